//! `import`, end to end: the profiles it translates from GoCD's own ECS plugin
//! (`tests/data/import/`, the API JSON pair) each run a job green through the plugin in the test
//! world. The test runs the `import` binary, reads what it wrote (`profiles/cluster-*.json`,
//! `profiles/elastic-*.json`), and gives each migrated elastic profile one job.
//!
//! The world is not the input's AWS account, so the test changes what an operator fills in for
//! their own account, and nothing `import` decided: each change is one commented line of
//! [`for_the_world`]. What the profiles need from the world is made first, under the names the
//! profiles give: the ECS cluster, the EC2 instance profiles in moto's IAM.
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`); without it the tests panic, never skip.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::scenario_ext::*;
use crate::world::ec2::{al2023_ami, create_instance_profile, windows_ami, Ec2Policy};
use crate::world::host::{HostState, Props};
use crate::world::moto::{self, DefaultNetwork, REGION, TEST_ACCESS_KEY_ID};
use crate::world::*;

const BIN: &str = env!("CARGO_BIN_EXE_ecs-elastic-agent");

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import").join(name)
}

fn read_props(path: &Path) -> Props {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One elastic profile `import` wrote: its id, its cluster profile's id, its LaunchType.
#[derive(Debug, Clone)]
struct Written {
    elastic: String,
    cluster: String,
    launch_type: String,
}

/// Runs `import --out DIR` on the API JSON pair; returns what it wrote, from its stdout.
fn run_import(dir: &Path) -> Vec<Written> {
    let _ = std::fs::remove_dir_all(dir);
    let run = Command::new(BIN)
        .arg("import")
        .arg("--out")
        .arg(dir)
        .arg(data("cluster-profiles.json"))
        .arg(data("elastic-profiles.json"))
        .env("RUST_LOG", "off")
        .output()
        .expect("import runs");
    let stdout = String::from_utf8_lossy(&run.stdout).to_string();
    assert!(run.status.success(), "import failed: {stdout}{}", String::from_utf8_lossy(&run.stderr));
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("wrote elastic profile "))
        .map(|l| {
            // `<id> (cluster profile <id>, LaunchType <type>)`
            let (elastic, rest) = l.split_once(" (cluster profile ").expect("the wrote line");
            let (cluster, launch) = rest.trim_end_matches(')').split_once(", LaunchType ").expect("the wrote line");
            Written { elastic: elastic.into(), cluster: cluster.into(), launch_type: launch.into() }
        })
        .collect()
}

/// What the world has where the input names the operator's own account.
struct WorldValues {
    network: DefaultNetwork,
    linux_ami: String,
    windows_ami: String,
}

/// The profile as an operator of the world would fill in their own account's values; every key
/// `import` decided (launch type, sizes, instance types, counts, timeouts, roles, images, log
/// settings...) is left as it wrote it. `windows` is whether its AMI is for Windows instances.
fn for_the_world(mut p: Props, world: &WorldValues, windows: bool) -> Props {
    let mut fill = |key: &str, value: String| {
        if let Some(v) = p.get_mut(key) {
            *v = value;
        }
    };
    // The input's region (eu-west-1) is the operator's; the world's AWS is in the test region.
    fill("Region", REGION.to_string());
    // The input's subnets and security group are ids of the operator's VPC, unknown to moto:
    // moto's default VPC's default-for-AZ subnets and its `default` group instead.
    fill("SubnetIds", world.network.subnet_ids.join(","));
    fill("SecurityGroupIds", world.network.security_group_id.clone());
    // The input's AMI ids are the operator's (AMI ids differ by region and account): one moto
    // knows, of the same OS (Amazon Linux 2023 x86_64 for the Linux instance type c5.xlarge, a
    // Windows Server AMI for the Windows one).
    fill("Ec2AmiId", if windows { world.windows_ami.clone() } else { world.linux_ami.clone() });
    p
}

/// The elastic profile of the Windows EC2 cluster profile `import` writes.
const WINDOWS: &str = "windows-dotnet";

/// Every elastic profile `import` writes from the API JSON pair runs one job: agent registered,
/// job assigned, job-completion answered 200, the task stopped, and no call the plugin made broke
/// a rule of real AWS. One world for all of them, as after a real switch: the five cluster
/// profiles `import` split `ecs-prod` into all name its one ECS cluster `gocd-agents`, so they
/// share one engine, and that engine plans each EC2 profile's capacity with that profile's own
/// settings (its pool): `windows-dotnet` (4096 CPU units, 8 GiB) runs on a Windows m5.4xlarge
/// launched from the Windows profile's AMI, and the Linux EC2 profiles' jobs on c5.xlarge
/// instances from the Linux AMI, whichever profile GoCD sent last.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_of_each_imported_profile_runs_green() {
    let dir = std::env::temp_dir().join(format!("ecs-ea-e2e-import-{}", std::process::id()));
    let written = run_import(&dir);
    let ids: BTreeSet<&str> = written.iter().map(|w| w.elastic.as_str()).collect();
    assert_eq!(
        ids,
        BTreeSet::from(["build-small", "build-tiny", "docker-builds", "linux-ec2", "windows-dotnet"]),
        "the elastic profiles import migrates from tests/data/import/"
    );
    let flat = dir.join("profiles");
    let clusters: BTreeMap<String, Props> = written
        .iter()
        .map(|w| (w.cluster.clone(), read_props(&flat.join(format!("cluster-{}.json", w.cluster)))))
        .collect();
    let elastics: BTreeMap<String, Props> = written
        .iter()
        .map(|w| (w.elastic.clone(), read_props(&flat.join(format!("elastic-{}.json", w.elastic)))))
        .collect();

    let mut w = Scenario::new("import_each_profile_runs").await;
    let base = w.base.clone();
    let world = WorldValues {
        network: moto::default_network(&base).await,
        linux_ami: al2023_ami(&base, "x86_64").await,
        windows_ami: windows_ami(&base).await,
    };
    // What the profiles need from the world, under the names they give: the ECS cluster of every
    // cluster profile, and the instance profile of every EC2 one in moto's IAM (RunInstances
    // refuses one that does not exist).
    let names: BTreeSet<&String> = clusters.values().filter_map(|p| p.get("ClusterName")).collect();
    assert_eq!(names.len(), 1, "import names one ECS cluster for all: {names:?}");
    for name in names {
        w.cluster(name, &base, name).await;
    }
    let instance_profiles: BTreeSet<&String> = clusters.values().filter_map(|p| p.get("Ec2InstanceProfile")).collect();
    for name in instance_profiles {
        create_instance_profile(w.moto.addr(), TEST_ACCESS_KEY_ID, name).await;
    }

    // Windows: the elastic profile's OperatingSystemFamily, on its own cluster profile.
    let windows_clusters: BTreeSet<&String> = written
        .iter()
        .filter(|x| elastics[&x.elastic].get("OperatingSystemFamily").is_some_and(|f| f.starts_with("WINDOWS")))
        .map(|x| &x.cluster)
        .collect();
    assert_eq!(windows_clusters.len(), 1, "windows-dotnet has its own cluster profile: {windows_clusters:?}");
    // The image and type of every RunInstances.
    let launched = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let record = launched.clone();
    w.proxy.add_rule("amis", move |call| {
        if call.is("ec2", "RunInstances") {
            let field = |name: &str| call.form_param(name).unwrap_or_default().to_string();
            record.lock().unwrap().push((field("ImageId"), field("InstanceType")));
        }
        Verdict::Forward
    });
    let mut cfg = w.host_config();
    for (id, p) in &clusters {
        cfg = cfg.cluster_profile(id, for_the_world(p.clone(), &world, windows_clusters.contains(id)));
    }
    for x in &written {
        cfg = cfg.elastic_profile(&x.elastic, &x.cluster, for_the_world(elastics[&x.elastic].clone(), &world, false));
    }
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });
    let ec2 = w.instances(&host, Ec2Policy::default());

    let mut jobs = Vec::new();
    for x in &written {
        jobs.push((x.clone(), host.add_job(JobSpec::new(&x.elastic, Duration::from_secs(3))).await));
    }
    host.wait_until("a job of every imported profile completed", Duration::from_secs(240), |s| {
        s.jobs.iter().all(|j| j.completion_code.is_some())
    })
    .await;
    let (rejections, completions, refusals) = host.with_state(|s: &HostState| {
        let by_profile: BTreeMap<String, (Option<i64>, i64)> =
            s.jobs.iter().map(|j| (j.spec.elastic_profile.clone(), (j.completion_code, j.identifier.job_id))).collect();
        let refusals: Vec<String> =
            s.error_responses.iter().filter(|e| e.name.contains("create-agent")).map(|e| e.body.to_string()).collect();
        (s.rejections.clone(), by_profile, refusals)
    });
    assert!(rejections.is_empty(), "GoCD refused registrations: {rejections:?}");
    assert!(refusals.is_empty(), "create-agent refused: {refusals:#?}");
    for (x, _) in &jobs {
        let (code, job_id) = completions[&x.elastic];
        assert_eq!(code, Some(200), "{} ({}): job-completion answered {code:?}", x.elastic, x.launch_type);
        assert_eq!(sim.tasks_for_job(job_id), 1, "{}: the job ran in {} tasks", x.elastic, sim.tasks_for_job(job_id));
    }
    // Each EC2 profile's instances were launched with its own AMI and type: the Windows
    // profile's from the Windows AMI as its m5.4xlarge, the Linux ones' from the Linux AMI.
    let instances = ec2.instances();
    let windows_types: BTreeSet<&String> =
        windows_clusters.iter().filter_map(|id| clusters[*id].get("Ec2InstanceType")).collect();
    let launches: Vec<(String, String)> = launched.lock().unwrap().clone();
    for (ami, instance_type) in &launches {
        let windows = *ami == world.windows_ami;
        assert!(windows || *ami == world.linux_ami, "launched from {ami}, no profile's AMI: {launches:?}");
        assert_eq!(windows, windows_types.contains(instance_type), "{instance_type} from {ami}: {launches:?}");
    }
    let amis: BTreeSet<&String> = launches.iter().map(|(ami, _)| ami).collect();
    assert_eq!(amis, BTreeSet::from([&world.linux_ami, &world.windows_ami]), "{launches:?} {instances:#?}");
    // The Windows job had a Windows instance of its own profile's type (the Linux profiles'
    // c5.xlarge holds less than it reserves), and each EC2 profile's instances carry its pool.
    let windows: Vec<_> =
        instances.iter().filter(|i| i.tags.get("gocd:os").map(String::as_str) == Some("windows")).collect();
    assert!(
        !windows.is_empty() && windows.iter().all(|i| windows_types.contains(&i.instance_type)),
        "{WINDOWS}: {instances:#?}"
    );
    let ec2_profiles = clusters.values().filter(|p| p.get("LaunchType").map(String::as_str) == Some("EC2")).count();
    let pools: BTreeSet<&String> = instances.iter().filter_map(|i| i.tags.get("gocd:ec2-pool")).collect();
    assert_eq!(pools.len(), ec2_profiles, "a pool per EC2 cluster profile: {instances:#?}");

    host.wait_until("every agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    w.assert_no_live_tasks(Duration::from_secs(60)).await;
    let scanner = SecretScanner::from_world(&host, Some(&w.proxy));
    scanner.assert_host_clean(&host);
    eprintln!(
        "FIGURES: test={} secs={} jobs={} instances_launched={} aws_calls={} all_calls={:?}",
        w.name,
        w.started.elapsed().as_secs(),
        jobs.len(),
        instances.len(),
        w.proxy.total(),
        w.proxy.counts(),
    );
    // The instances are left to the profiles' own idle times (15 to 30 minutes, and
    // `Ec2MinInstances` 1 on ecs-prod-ec2 keeps one up for good): their retirement is
    // `tests/e2e/ec2.rs`'s business, not the import's. moto goes with the world.
    drop(sim);
    drop(ec2);
    host.shutdown().await;
    drop(w);
    let _ = std::fs::remove_dir_all(&dir);
}
