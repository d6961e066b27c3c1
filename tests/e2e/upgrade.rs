//! Upgrades that adopt. The names and tags the plugin writes into AWS are its only state
//! (`docs/design.md`, "Where the truth lives"): an operator who replaces the plugin with a newer
//! version while agents run relies on the new one recognising what the old one left. What each
//! released version writes is recorded in `tests/data/upgrades/<version>.json` (the format and
//! the rule for changing it: `tests/data/upgrades/README.md`).
//!
//! - [`recorded_schemas_hold_together`]: every version's file reads, and each of its examples
//!   matches its own patterns; the examples cover every state an upgrade meets.
//! - [`what_the_plugin_writes_is_the_newest_recorded_schema`]: the current binary runs one job on
//!   Fargate and one on EC2; every task, task definition and instance it wrote (read from the
//!   proxy's record of its calls) must have the names, tag keys and value shapes the newest
//!   version recorded, with the cluster key and `startedBy` derived as recorded. A difference
//!   fails: record a new version and the migration for the old one.
//! - [`every_recorded_version_is_adopted`]: for each recorded version, moto and the simulated
//!   GoCD are left as that version left them (`upgrade/seed.rs`: its task definitions, a running
//!   and a stopped instance, a busy agent on Fargate and one on EC2, a kept and a warm idle
//!   agent), then the current plugin starts: every busy agent keeps its job until it completes,
//!   the idle ones are given a job or retired by the usual rules, the instances are used and
//!   retired, no task definition of the old version is registered again, and nothing is left.
//!
//! Needs `MOTO_SERVER`; never skips.

mod schema;
mod seed;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::scenario_ext::*;
use crate::world::ec2::{create_instance_profile, Ec2Policy};
use crate::world::host::{HostConfig, HostState, JobState};
use crate::world::moto::TEST_ACCESS_KEY_ID;
use crate::world::proxy::{request_override_env, Proxy};
use crate::world::*;
use schema::Schema;

/// How long a busy agent's job goes on after the seeding: long enough that the new plugin has
/// adopted its task before the job ends.
const BUSY_FOR: Duration = Duration::from_secs(10);

/// The world of a version's file: its clusters (and the EC2 instance profiles) in moto, and
/// GoCD's configuration with its profiles.
async fn world_of(schema: &Schema, name: &'static str) -> (Scenario, HostConfig) {
    let mut w = Scenario::new(name).await;
    assert_eq!(
        schema.world.account,
        crate::world::aws_rules::DEFAULT_ACCOUNT,
        "{}: the world's account is moto's",
        schema.file.display()
    );
    let base = w.base.clone();
    let mut cfg = w.host_config();
    for (id, props) in &schema.world.cluster_profiles {
        w.cluster(id, &base, &props["ClusterName"]).await;
        if let Some(profile) = props.get("Ec2InstanceProfile") {
            create_instance_profile(w.moto.addr(), TEST_ACCESS_KEY_ID, profile).await;
        }
        cfg = cfg.cluster_profile(id, props.clone());
    }
    for (id, e) in &schema.world.elastic_profiles {
        cfg = cfg.elastic_profile(id, &e.cluster_profile, e.properties.clone());
    }
    (w, cfg)
}

/// EC2 calls that write (their form fields), as they reach the proxy: RunInstances, CreateTags,
/// StopInstances, StartInstances, TerminateInstances.
type Ec2Writes = Arc<Mutex<Vec<(Instant, String, Vec<(String, String)>)>>>;

fn record_ec2_writes(proxy: &Proxy) -> Ec2Writes {
    let writes: Ec2Writes = Arc::default();
    let seen = writes.clone();
    proxy.add_rule("upgrade-record-ec2-writes", move |call| {
        let writing = ["RunInstances", "CreateTags", "StopInstances", "StartInstances", "TerminateInstances"];
        if call.service == "ec2" && writing.contains(&call.operation.as_str()) {
            seen.lock().unwrap().push((call.received, call.operation.clone(), call.form.clone()));
        }
        Verdict::Forward
    });
    writes
}

/// One resource the plugin wrote: its kind in the recorded schemas, what wrote it, its names
/// and tags.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Written {
    kind: String,
    by: String,
    names: BTreeMap<String, String>,
    tags: BTreeMap<String, String>,
}

/// The family of a task definition ARN or `family:revision`.
fn family_of(task_definition: &str) -> &str {
    let name = task_definition.rsplit_once('/').map_or(task_definition, |(_, n)| n);
    name.rsplit_once(':').map_or(name, |(family, _)| family)
}

fn json_tags(body: &Value) -> BTreeMap<String, String> {
    let tags = body["tags"].as_array().cloned().unwrap_or_default();
    tags.iter()
        .filter_map(|t| Some((t["key"].as_str()?.to_string(), t["value"].as_str().unwrap_or("").to_string())))
        .collect()
}

/// The tags of one resource type of an EC2 call's `TagSpecification.N` (or of CreateTags'
/// `Tag.N`, with `resource` empty).
fn form_tags(form: &[(String, String)], resource: &str) -> BTreeMap<String, String> {
    let field = |k: &str| form.iter().find(|(name, _)| name == k).map(|(_, v)| v.clone());
    let prefix = if resource.is_empty() {
        Some("Tag.".to_string())
    } else {
        (1..=10)
            .find(|n| field(&format!("TagSpecification.{n}.ResourceType")).as_deref() == Some(resource))
            .map(|n| format!("TagSpecification.{n}.Tag."))
    };
    let Some(prefix) = prefix else { return BTreeMap::new() };
    (1..=50)
        .map_while(|m| {
            Some((field(&format!("{prefix}{m}.Key"))?, field(&format!("{prefix}{m}.Value")).unwrap_or_default()))
        })
        .collect()
}

/// Everything the plugin wrote since the proxy's log entry `mark` (ECS) and `since` (EC2).
fn written(proxy: &Proxy, ec2: &Ec2Writes, mark: usize, since: Instant) -> Vec<Written> {
    let mut out = BTreeSet::new();
    for r in proxy.log().into_iter().skip(mark) {
        let Some(body) = &r.json else { continue };
        let str_of = |k: &str| body[k].as_str().unwrap_or_default().to_string();
        match (r.service.as_str(), r.operation.as_str()) {
            ("ecs", op @ ("RunTask" | "StartTask")) => {
                let mut names = BTreeMap::new();
                names.insert("started_by".to_string(), str_of("startedBy"));
                names.insert("task_definition_family".to_string(), family_of(&str_of("taskDefinition")).to_string());
                if let Some(agent) = request_override_env(body, "GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID") {
                    names.insert("agent_id".to_string(), agent.to_string());
                }
                out.insert(Written {
                    kind: "task".into(),
                    by: format!("{op} in {}", str_of("cluster")),
                    names,
                    tags: json_tags(body),
                });
            }
            ("ecs", "RegisterTaskDefinition") => {
                let names = [("family".to_string(), str_of("family"))].into();
                out.insert(Written {
                    kind: "task_definition".into(),
                    by: "RegisterTaskDefinition".into(),
                    names,
                    tags: json_tags(body),
                });
            }
            _ => {}
        }
    }
    for (_, op, form) in ec2.lock().unwrap().iter().filter(|(at, _, _)| *at >= since) {
        match op.as_str() {
            "RunInstances" => {
                let tags = form_tags(form, "instance");
                out.insert(Written {
                    kind: "ec2_instance".into(),
                    by: "RunInstances".into(),
                    names: BTreeMap::new(),
                    tags,
                });
            }
            "CreateTags" => {
                let tags = form_tags(form, "");
                out.insert(Written {
                    kind: "ec2_instance".into(),
                    by: "CreateTags".into(),
                    names: BTreeMap::new(),
                    tags,
                });
            }
            _ => {}
        }
    }
    out.into_iter().collect()
}

/// What the check found wrong with one written resource, against the schema and this world
/// (the server id, the cluster profiles' keys, GoCD's jobs).
fn problems_of(schema: &Schema, w: &Written, host: &GoCdHost) -> Vec<String> {
    let Some(kind) = schema.kinds.get(&w.kind) else {
        return vec![format!("it writes a {} that {} does not record at all", w.kind, schema.version)];
    };
    let compared = schema.compare(kind, &w.names, &w.tags);
    // CreateTags adds to an instance: only the tags it adds are compared.
    let mut problems: Vec<String> = if w.by == "CreateTags" {
        compared.problems.into_iter().filter(|p| !p.starts_with("no ")).collect()
    } else {
        compared.problems
    };
    let bound = compared.bound;
    if let Some(key) = bound.get("cluster_key") {
        let profiles: Vec<(String, BTreeMap<String, String>)> = schema
            .world
            .cluster_profiles
            .keys()
            .map(|id| (id.clone(), schema.world_values(id, host.server_id())))
            .collect();
        match profiles.iter().find(|(_, v)| v.get("cluster_key") == Some(key)) {
            None => problems.push(format!(
                "its cluster key {key} is not what the recorded derivation gives for this world's cluster profiles ({})",
                profiles.iter().map(|(id, v)| format!("{id}: {}", v["cluster_key"])).collect::<Vec<_>>().join(", ")
            )),
            Some((id, world)) => {
                for (name, value) in &bound {
                    if let Some(expected) = world.get(name).filter(|e| *e != value) {
                        problems.push(format!(
                            "its {{{name}}} is {value:?}; the recorded derivation gives {expected:?} for cluster profile {id}"
                        ));
                    }
                }
            }
        }
    }
    if let Some(job_id) = bound.get("job_id").and_then(|j| j.parse::<i64>().ok()) {
        let job = host.with_state(|s: &HostState| {
            s.jobs.iter().find(|j| j.identifier.job_id == job_id || j.previous_job_ids.contains(&job_id)).cloned()
        });
        match job {
            None => problems.push(format!("its job id {job_id} is no job GoCD has")),
            Some(job) => {
                let i = &job.identifier;
                let expected = [
                    ("pipeline", Some(i.pipeline_name.clone())),
                    ("pipeline_counter", Some(i.pipeline_counter.to_string())),
                    ("stage", Some(i.stage_name.clone())),
                    ("stage_counter", Some(i.stage_counter.clone())),
                    ("job", Some(i.job_name.clone())),
                    ("environment", job.spec.environment.clone()),
                ];
                for (name, value) in expected {
                    if bound.get(name) != value.as_ref() {
                        problems.push(format!("its {{{name}}} is {:?}; job {job_id}'s is {value:?}", bound.get(name)));
                    }
                }
            }
        }
    }
    problems
}

/// What was written, in the examples' format (to record a new version from).
fn as_examples(written: &[Written]) -> String {
    let examples: serde_json::Map<String, Value> = written
        .iter()
        .enumerate()
        .map(|(i, w)| {
            (format!("{}_{i}", w.kind), json!({"kind": w.kind, "by": w.by, "names": w.names, "tags": w.tags}))
        })
        .collect();
    serde_json::to_string_pretty(&examples).unwrap_or_default()
}

/// The failure of the schema check: what differs, and what to do about it: a new version's
/// schema and the migration of the older one; while the version in `Cargo.toml` is unreleased
/// (its `CHANGELOG.md` section says so) and is the newest recorded, its file in place.
fn schema_changed(schema: &Schema, problems: &[String]) -> String {
    let cargo = env!("CARGO_PKG_VERSION");
    let changelog = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("CHANGELOG.md"))
        .unwrap_or_default();
    let unreleased = changelog.lines().any(|l| l.starts_with(&format!("## [{cargo}]")) && l.contains("unreleased"));
    let in_place = if schema.version == cargo && unreleased {
        format!(
            "\n\n{cargo} is not released yet (CHANGELOG.md): no released plugin wrote its schema, so update {} \
             in place instead.",
            schema.file.display()
        )
    } else {
        String::new()
    };
    format!(
        "what the plugin writes into AWS is not what {file} records for version {v}, the newest recorded version:\n  \
         {problems}\n\n\
         A later plugin adopts what an earlier one left by these names and tags only, so a change of one is a new \
         version's schema and a migration: raise the version in Cargo.toml, record the new version's schema as \
         tests/data/upgrades/<new version>.json (what the plugin wrote is printed above as WRITTEN), and make the \
         plugin migrate what {v} left (read the old name or tag as well as the new one, or rewrite it when it adopts \
         the resource), so that upgrade::every_recorded_version_is_adopted passes for {v} too. \
         See tests/data/upgrades/README.md.{in_place}",
        file = schema.file.display(),
        v = schema.version,
        problems = problems.join("\n  "),
    )
}

/// Every recorded version's file reads and holds together, and its examples cover what an
/// upgrade meets: a busy task on Fargate and on EC2, a kept and a warm agent, a running and a
/// stopped instance, and the task definitions.
#[test]
fn recorded_schemas_hold_together() {
    for schema in Schema::all() {
        let has = |kind: &str, state: &str, ec2: Option<bool>| {
            schema.examples.values().any(|e| {
                e.kind == kind
                    && e.state == state
                    && ec2.is_none_or(|x| schema.is_ec2(&schema.cluster_profile_of(e)) == x)
            })
        };
        let wanted = [
            ("task", "busy", Some(false)),
            ("task", "busy", Some(true)),
            ("task", "kept", None),
            ("task", "warm", None),
            ("ec2_instance", "running", None),
            ("ec2_instance", "stopped", None),
            ("task_definition", "registered", Some(false)),
            ("task_definition", "registered", Some(true)),
        ];
        for (kind, state, ec2) in wanted {
            let on = match ec2 {
                Some(true) => " on EC2",
                Some(false) => " on Fargate",
                None => "",
            };
            assert!(has(kind, state, ec2), "{}: no example of a {kind} {state}{on}", schema.file.display());
        }
    }
}

/// The current binary's names and tags are the newest recorded version's: one job on each of
/// the newest file's elastic profiles (one in a GoCD environment, one not), and every task,
/// task definition and instance the plugin wrote for them compared with the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn what_the_plugin_writes_is_the_newest_recorded_schema() {
    let schema = Schema::newest();
    let (w, cfg) = world_of(&schema, "upgrade_schema").await;
    let ec2_writes = record_ec2_writes(&w.proxy);
    let (mark, since) = (w.proxy.mark(), Instant::now());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });
    let ec2 = w.instances(&host, Ec2Policy { register_delay: Duration::from_millis(500), never_register_first: 0 });
    // The jobs on Fargate in a GoCD environment, those on EC2 not: the tag written only then,
    // and its absence.
    for (id, e) in &schema.world.elastic_profiles {
        let spec = JobSpec::new(id, Duration::from_secs(1));
        host.add_job(if schema.is_ec2(&e.cluster_profile) { spec } else { spec.in_environment("production") }).await;
    }
    host.wait_until("every job completed and its job-completion answered", Duration::from_secs(120), |s| {
        s.jobs.iter().all(|j| matches!(j.state, JobState::Completed { .. }) && j.completion_code.is_some())
    })
    .await;
    let written = written(&w.proxy, &ec2_writes, mark, since);
    let kinds: BTreeSet<&str> = written.iter().map(|x| x.kind.as_str()).collect();
    for kind in schema.kinds.keys() {
        assert!(
            kinds.contains(kind.as_str()),
            "the run wrote no {kind}: the check compares nothing of it: {written:#?}"
        );
    }
    let mut problems = Vec::new();
    for x in &written {
        for p in problems_of(&schema, x, &host) {
            problems.push(format!("{} ({}): {p}", x.kind, x.by));
        }
    }
    problems.sort();
    problems.dedup();
    eprintln!("WRITTEN (version {}): {}", env!("CARGO_PKG_VERSION"), as_examples(&written));
    assert!(problems.is_empty(), "{}", schema_changed(&schema, &problems));
    w.assert_no_aws_rule_broken();
    drop(sim);
    drop(ec2);
    host.shutdown().await;
}

/// Each recorded version, left as that version left it, is adopted by the current plugin.
/// The versions run side by side, each in its own world.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_recorded_version_is_adopted() {
    let mut runs = tokio::task::JoinSet::new();
    for schema in Schema::all() {
        runs.spawn(adopts(schema));
    }
    while let Some(done) = runs.join_next().await {
        if let Err(e) = done {
            std::panic::resume_unwind(e.into_panic());
        }
    }
}

/// The StopTask calls the plugin made since `mark`: task ARN → when.
fn stops_since(proxy: &Proxy, mark: usize) -> BTreeMap<String, Instant> {
    let mut stops = BTreeMap::new();
    for r in proxy.log().into_iter().skip(mark).filter(|r| r.key() == "ecs:StopTask") {
        if let Some(task) = r.json.as_ref().and_then(|b| b["task"].as_str()) {
            stops.entry(task.to_string()).or_insert(r.at);
        }
    }
    stops
}

/// One version's upgrade: seeded, then the current plugin started over it.
async fn adopts(schema: Schema) {
    let version = schema.version.clone();
    let (w, cfg) = world_of(&schema, "upgrade_adopts").await;
    let ec2_writes = record_ec2_writes(&w.proxy);
    let host = GoCdHost::new(cfg);
    let sim = w.agents(&host, SimPolicy { register_delay: Duration::from_millis(300), ..SimPolicy::default() });
    let ec2 = w.instances(&host, Ec2Policy { register_delay: Duration::from_millis(500), never_register_first: 0 });
    let seeded = seed::seed(&schema, &w, &host, &sim, &ec2, BUSY_FOR).await;
    let seeded_at = Instant::now();

    // The operator starts the new plugin.
    let (mark, started) = (w.proxy.mark(), Instant::now());
    if let Err(e) = host.spawn_plugin().await {
        panic!("{version}: the plugin did not start over what it left: {e}\n{}", host.with_state(|s| s.summary()));
    }
    host.load().await;
    host.start_loops();
    // New work beside the adopted agents, at once: one job per elastic profile.
    let profiles: Vec<String> = schema.world.elastic_profiles.keys().cloned().collect();
    let mut new_jobs = Vec::new();
    for id in &profiles {
        new_jobs.push(host.add_job(JobSpec::new(id, Duration::from_secs(1))).await);
    }
    host.wait_until("every job completed and its job-completion answered", Duration::from_secs(90), |s| {
        s.jobs.iter().all(|j| matches!(j.state, JobState::Completed { .. }) && j.completion_code.is_some())
    })
    .await;

    // Every busy agent kept its job until it completed: not stopped before, not deleted while it
    // ran (which reschedules the job), its job-completion answered.
    for a in seeded.agents.iter().filter(|a| a.state == "busy") {
        let (state, completed_at, code, previous) = host.with_state(|s| {
            let j = s.job(a.job);
            (j.state.clone(), j.completed_at, j.completion_code, j.previous_job_ids.clone())
        });
        assert!(
            previous.is_empty(),
            "{version}: {}'s job was rescheduled: the new plugin deleted its agent {} while it built (it did not \
             adopt its task {})",
            a.example,
            a.agent_id,
            a.task_arn
        );
        assert_eq!(
            state,
            JobState::Completed { agent_id: a.agent_id.clone() },
            "{version}: {}'s job did not complete on its agent",
            a.example
        );
        assert_eq!(code, Some(200), "{version}: {}'s job-completion", a.example);
        let completed_at = completed_at.expect("completed");
        assert!(completed_at > started, "{version}: {}'s job completed before the new plugin ran", a.example);
        if let Some(at) = stops_since(&w.proxy, mark).get(&a.task_arn) {
            assert!(*at > completed_at, "{version}: {}'s task was stopped while its job ran", a.example);
        }
    }
    // New jobs ran on one agent each.
    for h in &new_jobs {
        let id = host.with_state(|s| s.job(*h).identifier.job_id);
        assert!(sim.tasks_for_job(id) <= 1, "{version}: new job {id} ran in {} tasks", sim.tasks_for_job(id));
    }

    // Idle agents: given a job or retired by the usual rules (their task stopped by the plugin,
    // the agent deleted from GoCD): none left behind.
    host.wait_until("every agent deleted from GoCD", Duration::from_secs(120), |s| s.agents.is_empty()).await;
    let agents_gone = started.elapsed();
    let stops = stops_since(&w.proxy, mark);
    let (deleted, rejections) = host.with_state(|s| (s.deleted_agents.clone(), s.rejections.clone()));
    assert!(rejections.is_empty(), "{version}: GoCD refused registrations: {rejections:?}");
    let mut fates = Vec::new();
    for a in &seeded.agents {
        assert!(
            stops.contains_key(&a.task_arn),
            "{version}: the plugin never stopped {}'s task {}",
            a.example,
            a.task_arn
        );
        assert!(
            deleted.contains(&a.agent_id),
            "{version}: {}'s agent {} was not deleted from GoCD",
            a.example,
            a.agent_id
        );
        let reused =
            new_jobs.iter().any(|h| host.job_state(*h) == JobState::Completed { agent_id: a.agent_id.clone() });
        fates.push(format!(
            "{}:{}",
            a.example,
            if a.state == "busy" {
                "job_done"
            } else if reused {
                "reused"
            } else {
                "retired"
            }
        ));
    }

    // Instances: adopted (the new EC2 job ran on the running one, nothing launched) and retired.
    let ec2_cluster =
        schema.world.cluster_profiles.iter().find(|(id, _)| schema.is_ec2(id)).map(|(_, p)| p["ClusterName"].clone());
    let start_tasks: Vec<Value> =
        w.proxy.log().into_iter().skip(mark).filter(|r| r.key() == "ecs:StartTask").filter_map(|r| r.json).collect();
    let running: Vec<&seed::SeededInstance> = seeded.instances.iter().filter(|i| i.state == "running").collect();
    for body in &start_tasks {
        let on = body["containerInstances"][0].as_str().unwrap_or_default();
        assert!(
            running.iter().any(|i| i.container_instance_arn == on || i.container_instance_arn.ends_with(on)),
            "{version}: a task started on {on}, not on the adopted instance: {running:?}"
        );
    }
    assert!(!start_tasks.is_empty() || ec2_cluster.is_none(), "{version}: the new EC2 job started no task");
    let ids: Vec<String> = seeded.instances.iter().map(|i| i.id.clone()).collect();
    let ec2c = aws_sdk_ec2::Client::new(&w.base);
    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let out =
            ec2c.describe_instances().set_instance_ids(Some(ids.clone())).send().await.expect("DescribeInstances");
        let left: Vec<String> = out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter(|i| i.state().and_then(|s| s.name()).is_none_or(|n| n.as_str() != "terminated"))
            .map(|i| format!("{} {:?}", i.instance_id().unwrap_or("?"), i.state().and_then(|s| s.name())))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{version}: seeded instances not terminated: {left:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let instances_gone = started.elapsed();
    let ec2_ops: Vec<(String, Vec<(String, String)>)> = ec2_writes
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _, _)| *at >= started)
        .map(|(_, op, f)| (op.clone(), f.clone()))
        .collect();
    let ec2_timeline: Vec<String> = ec2_writes
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _, _)| *at >= started)
        .map(|(at, op, _)| format!("{op}@{}s", at.duration_since(started).as_secs()))
        .collect();
    let launched = ec2_ops.iter().filter(|(op, _)| op == "RunInstances").count();
    assert_eq!(launched, 0, "{version}: the plugin launched instances instead of adopting {ids:?}");
    for id in &ids {
        let terminated = ec2_ops.iter().any(|(op, f)| op == "TerminateInstances" && f.iter().any(|(_, v)| v == id));
        assert!(terminated, "{version}: {id} was not terminated by the plugin");
    }
    if let Some(cluster) = &ec2_cluster {
        let ecs = aws_sdk_ecs::Client::new(&w.base);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = ecs.list_container_instances().cluster(cluster).send().await.expect("ListContainerInstances");
            if out.container_instance_arns().is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{version}: container instances left: {:?}",
                out.container_instance_arns()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    // Task definitions: the old version's families are recognised, never registered again.
    let registered: Vec<String> = w
        .proxy
        .log()
        .into_iter()
        .skip(mark)
        .filter(|r| r.key() == "ecs:RegisterTaskDefinition")
        .filter_map(|r| r.json.and_then(|b| b["family"].as_str().map(str::to_string)))
        .collect();
    let again: Vec<&String> = registered.iter().filter(|f| seeded.families.contains(f)).collect();
    assert!(again.is_empty(), "{version}: the plugin registered the old version's families again: {again:?}");
    drop(ec2);
    let extra = format!(
        "version={version} seeding_s={} agents_gone_s={} instances_gone_s={} after_start_s={} fates={fates:?} ec2_writes={ec2_timeline:?} task_definitions_registered={registered:?}",
        seeded_at.duration_since(w.started).as_secs(),
        agents_gone.as_secs(),
        instances_gone.as_secs(),
        started.elapsed().as_secs()
    );
    w.finish(host, sim, &extra).await;
}
