//! The cluster stack (`packaging/cloudformation/cluster.yaml`) deployed into moto's
//! CloudFormation with its defaults: what the stack should have made exists (moto skips resource
//! types it does not support without a word), `profile --from-stack` makes a cluster profile of
//! its outputs that `validate` accepts, the policy CloudFormation made is `iam-policy`'s for that
//! profile, and a job whose material is fetched over SSH runs green through the plugin with it,
//! in the stack's subnets, security group, log group and roles, its agent reaching a stock GoCD
//! server (`http://…:8153/go`) that lets in only the NAT's public address (`NatPublicIps`).
//! The same job on a stack whose agents may send only TCP 443 out (`AgentEgressPorts`) fails
//! with git's words in its console, and `doctor` names the group and the port.
//!
//! The world's agents obey the network as AWS keeps it (`tests/world/network.rs`): security
//! groups, routes, NAT addresses, DNS and the server's firewall.
//!
//! What moto does not make (the queue policy) and what it does not check (IAM capabilities,
//! `Rules`, role names' length) only real CloudFormation exercises:
//! `packaging/cloudformation/README.md`, "What the tests cover".
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use aws_config::SdkConfig;
use serde_json::Value;

use crate::world::http::{self, HttpRequest};
use crate::world::moto::{REGION, TEST_ACCESS_KEY_ID};
use crate::world::profiles::elastic_props;
use crate::world::stack::{self, as_cloudformation_makes_the_vpc};
use crate::world::*;

use crate::world::network::{self, Internet, NetworkWorld, GIT_HOST, GOCD_HOST};

const STACK: &str = "gocd-ci";
/// A stock GoCD server's URL (plain HTTP on 8153).
const STOCK_SERVER_URL: &str = "http://gocd.example.com:8153/go";
const CLUSTER: &str = "gocd-agents";

/// Creates the stack with its defaults and `given` parameters (`GoServerUrl` has no default),
/// and returns its outputs (`world::stack::deploy`).
async fn deploy(cfg: &SdkConfig, given: &[(&str, &str)]) -> BTreeMap<String, String> {
    stack::deploy(cfg, STACK, given).await
}

/// Runs the binary with the test keys and moto as AWS, like an operator with credentials.
async fn run(endpoint: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = crate::world::moto::operator_command(endpoint, Some(REGION));
    cmd.args(args);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output()).await.expect("in time").expect("run");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn write_temp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ecs-ea-cfn-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// IAM sends a policy document URL-encoded.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// The log groups moto has (CloudWatch Logs is not among the plugin's SDK crates: one JSON call).
async fn log_groups(moto: &Moto) -> Vec<String> {
    let request = HttpRequest {
        method: "POST".into(),
        target: "/".into(),
        version: "HTTP/1.1".into(),
        headers: vec![
            ("Host".into(), moto.addr().to_string()),
            ("Content-Type".into(), "application/x-amz-json-1.1".into()),
            ("X-Amz-Target".into(), "Logs_20140328.DescribeLogGroups".into()),
            (
                "Authorization".into(),
                format!("AWS4-HMAC-SHA256 Credential={TEST_ACCESS_KEY_ID}/20260101/{REGION}/logs/aws4_request, SignedHeaders=host, Signature=0"),
            ),
        ],
        body: b"{}".to_vec(),
    };
    let response = http::send(moto.addr(), &request).await.expect("DescribeLogGroups");
    assert_eq!(response.status, 200, "DescribeLogGroups: {}", response.text());
    let body: Value = serde_json::from_str(&response.text()).expect("JSON");
    body["logGroups"].as_array().unwrap().iter().map(|g| g["logGroupName"].as_str().unwrap().to_string()).collect()
}

/// What the stack should have made, checked in moto itself (not in the stack's own account of it).
async fn assert_made(w: &Scenario, outputs: &BTreeMap<String, String>) {
    let cfg = &w.base;
    let ecs = aws_sdk_ecs::Client::new(cfg);
    let clusters = ecs.describe_clusters().clusters(CLUSTER).send().await.expect("DescribeClusters");
    assert_eq!(clusters.clusters().len(), 1, "the cluster: {clusters:?}");
    assert_eq!(clusters.clusters()[0].status(), Some("ACTIVE"));

    let iam = aws_sdk_iam::Client::new(cfg);
    for role in [format!("{STACK}-execution"), format!("{STACK}-task")] {
        let got = iam.get_role().role_name(&role).send().await.unwrap_or_else(|e| panic!("role {role}: {e:?}"));
        let trust = percent_decoded(got.role().unwrap().assume_role_policy_document().unwrap_or_default());
        assert!(trust.contains("ecs-tasks.amazonaws.com"), "{role} trusts ECS tasks: {trust}");
    }
    let attached =
        iam.list_attached_role_policies().role_name(format!("{STACK}-execution")).send().await.expect("attached");
    // moto ignores a role's ManagedPolicyArns: only real CloudFormation attaches it.
    let names: Vec<&str> = attached.attached_policies().iter().filter_map(|p| p.policy_name()).collect();
    assert!(names.is_empty() || names == ["AmazonECSTaskExecutionRolePolicy"], "{names:?}");
    if names.is_empty() {
        eprintln!(
            "moto attached no AmazonECSTaskExecutionRolePolicy (ManagedPolicyArns): only real CloudFormation does"
        );
    }

    let ec2 = aws_sdk_ec2::Client::new(cfg);
    let subnets: Vec<String> = outputs["SubnetIds"].split(',').map(str::to_string).collect();
    let found = ec2.describe_subnets().set_subnet_ids(Some(subnets.clone())).send().await.expect("DescribeSubnets");
    assert_eq!(found.subnets().len(), 2, "the private subnets: {found:?}");
    let vpc = found.subnets()[0].vpc_id().unwrap().to_string();
    let nat = ec2
        .describe_nat_gateways()
        .filter(aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(&vpc).build())
        .send()
        .await
        .expect("DescribeNatGateways");
    assert_eq!(nat.nat_gateways().len(), 1, "the NAT gateway of the private subnets");
    as_cloudformation_makes_the_vpc(cfg, &vpc, &subnets).await;
    let group = outputs["SecurityGroupIds"].clone();
    let groups = ec2.describe_security_groups().group_ids(&group).send().await.expect("DescribeSecurityGroups");
    let sg = &groups.security_groups()[0];
    assert_eq!(sg.vpc_id(), Some(vpc.as_str()));
    // By default the agents' group lets all traffic out, as the VPC's default group does (moto
    // ignores a group's SecurityGroupEgress and keeps that rule in every case).
    let rules: Vec<(Option<&str>, Option<i32>)> =
        sg.ip_permissions_egress().iter().map(|p| (p.ip_protocol(), p.from_port())).collect();
    assert!(rules.iter().any(|(protocol, _)| *protocol == Some("-1")), "all traffic out: {rules:?}");
    // The NAT gateway's public address is an output: the server's firewall lets it in.
    let nat_ip = nat.nat_gateways()[0].nat_gateway_addresses().iter().find_map(|a| a.public_ip()).expect("a public IP");
    assert_eq!(outputs["NatPublicIps"], nat_ip, "{outputs:?}");
    assert_eq!(outputs["GoServerUrl"], STOCK_SERVER_URL);
    assert!(sg.ip_permissions().is_empty(), "nothing in: {:?}", sg.ip_permissions());

    let groups = log_groups(&w.moto).await;
    assert!(groups.contains(&outputs["LogGroup"]), "the log group {} in {groups:?}", outputs["LogGroup"]);

    let sqs = aws_sdk_sqs::Client::new(cfg);
    let queue = sqs
        .get_queue_attributes()
        .queue_url(&outputs["EventQueueUrl"])
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
        .send()
        .await
        .expect("the event queue");
    let attributes = queue.attributes().cloned().unwrap_or_default();
    let queue_arn = attributes[&aws_sdk_sqs::types::QueueAttributeName::QueueArn].clone();
    if !attributes.contains_key(&aws_sdk_sqs::types::QueueAttributeName::Policy) {
        eprintln!("moto made no queue policy (AWS::SQS::QueuePolicy): only real CloudFormation does");
    }
    let events = aws_sdk_eventbridge::Client::new(cfg);
    let rule = format!("gocd-ecs-events-{CLUSTER}");
    let targets = events.list_targets_by_rule().rule(&rule).send().await.expect("the rule's targets");
    assert_eq!(targets.targets().iter().map(|t| t.arn()).collect::<Vec<_>>(), [queue_arn.as_str()]);
    let by_target = events.list_rule_names_by_target().target_arn(&queue_arn).send().await.expect("rules");
    assert_eq!(by_target.rule_names(), [rule], "doctor finds the rule by the queue");
}

/// The cluster profile `profile --from-stack` makes, checked by `validate`, and its file.
async fn profile_from_stack(w: &Scenario, outputs: &BTreeMap<String, String>) -> (BTreeMap<String, String>, PathBuf) {
    let endpoint = w.moto.endpoint();
    let (code, profile, stderr) = run(&endpoint, &["profile", "--from-stack", STACK, "--region", REGION]).await;
    assert_eq!(code, Some(0), "profile --from-stack: {stderr}");
    assert!(stderr.contains(&format!("ExecutionRoleArn = {}", outputs["ExecutionRoleArn"])), "{stderr}");
    let cluster: BTreeMap<String, String> = serde_json::from_str(&profile).expect("a JSON object of strings");
    for key in ["ClusterName", "Region", "SubnetIds", "SecurityGroupIds", "LogGroup", "EventQueueUrl", "GoServerUrl"] {
        assert_eq!(cluster.get(key), outputs.get(key), "{key} in {profile}");
    }
    let path = write_temp("cluster.json", &profile);
    let (code, out, _) = run(&endpoint, &["validate", "--cluster-profile", path.to_str().unwrap()]).await;
    assert_eq!(code, Some(0), "validate accepts it: {out}");
    (cluster, path)
}

/// A GoCD host with the stack's profile and a `small` elastic profile of the stack's roles, and
/// agents held to the network as AWS keeps it (against `internet`).
async fn host_on_stack(
    w: &mut Scenario,
    cluster: BTreeMap<String, String>,
    outputs: &BTreeMap<String, String>,
    internet: &Internet,
) -> (GoCdHost, AgentSimulator) {
    w.fleets.push(Fleet::new("stack", &w.base, CLUSTER));
    let mut elastic = elastic_props();
    elastic.insert("ExecutionRoleArn".into(), outputs["ExecutionRoleArn"].clone());
    elastic.insert("TaskRoleArn".into(), outputs["TaskRoleArn"].clone());
    let cfg = w.host_config().cluster_profile("stack", cluster).elastic_profile("small", "stack", elastic);
    let host = GoCdHost::launch(cfg).await;
    let network = NetworkWorld::new(internet.clone(), &w.proxy);
    let policy =
        SimPolicy { register_delay: Duration::from_millis(300), network: Some(network), ..SimPolicy::default() };
    let sim = w.agents(&host, policy);
    (host, sim)
}

/// Waits until every job completed and job-completion was answered.
async fn until_completed(host: &GoCdHost) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !host.with_state(|s| s.all_completed()) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if !host.with_state(|s| s.all_completed()) {
        let console: Vec<String> = host.with_state(|s| s.console.iter().map(|c| c.text.clone()).collect());
        eprintln!("consoles: {console:#?}\nhealth: {:#?}", host.health_messages());
    }
    host.wait_until("the job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    host.wait_until("its agent deleted", Duration::from_secs(60), |s| s.agents.is_empty()).await;
    // The plugin deletes the agent while it handles job-completion, before its answer arrives.
    host.wait_until("job-completion answered", Duration::from_secs(30), |s| {
        s.jobs.iter().all(|j| j.completion_code.is_some())
    })
    .await;
}

/// The stack deployed into moto with its defaults makes a cluster profile (`profile
/// --from-stack`) that `validate` accepts, whose `iam-policy` is the policy CloudFormation made,
/// and a job whose material is fetched over SSH runs green through the plugin with it, its agent
/// reaching a stock GoCD server that lets in only the NAT's public address.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cluster_stack_makes_a_profile_that_runs_a_job() {
    let mut w = Scenario::new("cloudformation_cluster_stack").await;
    let outputs = deploy(&w.base, &[("GoServerUrl", STOCK_SERVER_URL)]).await;
    assert_made(&w, &outputs).await;
    let (cluster, path) = profile_from_stack(&w, &outputs).await;

    // The policy CloudFormation made is iam-policy's for that profile.
    let (code, want, stderr) =
        run(&w.moto.endpoint(), &["iam-policy", "--cluster-profile", path.to_str().unwrap()]).await;
    assert_eq!(code, Some(0), "iam-policy: {stderr}");
    let want: Value = serde_json::from_str(&want).unwrap();
    let iam = aws_sdk_iam::Client::new(&w.base);
    let policy = iam.get_policy().policy_arn(&outputs["PluginPolicyArn"]).send().await.expect("GetPolicy");
    let version = policy.policy().and_then(|p| p.default_version_id()).unwrap_or("v1").to_string();
    let document = iam
        .get_policy_version()
        .policy_arn(&outputs["PluginPolicyArn"])
        .version_id(version)
        .send()
        .await
        .expect("GetPolicyVersion");
    let document = percent_decoded(document.policy_version().unwrap().document().unwrap());
    let got: Value = serde_json::from_str(&document).expect("the policy as JSON");
    assert_eq!(got, want, "the stack's policy is iam-policy's for the stack's profile");

    // One job through the plugin with that profile; the server lets in only the NAT's address,
    // as the guide says to open it.
    let internet = Internet::stock();
    internet.admit_only(GOCD_HOST, &[&format!("{}/32", outputs["NatPublicIps"])]);
    let (host, sim) = host_on_stack(&mut w, cluster, &outputs, &internet).await;
    let job = host
        .add_job(JobSpec::new("small", Duration::from_secs(2)).with_material(&format!("git@{GIT_HOST}:gocd/gocd.git")))
        .await;
    until_completed(&host).await;
    let (codes, failure, checked) = host.with_state(|s| {
        (
            s.jobs.iter().map(|j| j.completion_code).collect::<Vec<_>>(),
            s.job(job).failure.clone(),
            s.job(job).materials_checked,
        )
    });
    assert_eq!(codes, [Some(200)]);
    assert_eq!(failure, None, "the job is green: {:#?}", host.console_log(job));
    assert!(checked, "the agent checked the material out over SSH");
    let reached = sim.with_state(|s| s.tasks.values().filter_map(|t| t.server_reached.clone()).collect::<Vec<_>>());
    assert!(reached.iter().all(Result::is_ok) && !reached.is_empty(), "{reached:?}");

    // It ran where the stack says, as the stack's roles, logging to its log group.
    let log = w.proxy.log();
    let body = |key: &str| {
        log.iter().find(|r| r.key() == key).and_then(|r| r.json.clone()).unwrap_or_else(|| panic!("no {key}"))
    };
    let run_task = body("ecs:RunTask");
    let network = &run_task["networkConfiguration"]["awsvpcConfiguration"];
    let subnets: Vec<&str> = network["subnets"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert_eq!(subnets.join(","), outputs["SubnetIds"], "{run_task}");
    assert_eq!(network["securityGroups"][0], outputs["SecurityGroupIds"].as_str());
    let definition = body("ecs:RegisterTaskDefinition");
    assert_eq!(definition["executionRoleArn"], outputs["ExecutionRoleArn"].as_str());
    assert_eq!(definition["taskRoleArn"], outputs["TaskRoleArn"].as_str());
    let logs = &definition["containerDefinitions"][0]["logConfiguration"]["options"]["awslogs-group"];
    assert_eq!(logs, outputs["LogGroup"].as_str(), "{definition}");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while w.proxy.count("sqs:ReceiveMessage") == 0 {
        assert!(std::time::Instant::now() < deadline, "the plugin never read the stack's event queue");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    w.assert_no_live_tasks(Duration::from_secs(60)).await;
    drop(sim);
    host.shutdown().await;
}

/// The same job on a stack whose agents may send only TCP 443 out (`AgentEgressPorts=443`, the
/// server behind a TLS proxy on 443): the agent registers, the build cannot reach its SSH
/// material and fails with git's words in the job's console, and `doctor` warns about the
/// group, naming port 22.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stack_that_lets_only_443_out_fails_ssh_checkouts_and_doctor_says_so() {
    let mut w = Scenario::new("cloudformation_egress_443").await;
    let server = format!("https://{GOCD_HOST}/go");
    let outputs = deploy(&w.base, &[("GoServerUrl", &server), ("AgentEgressPorts", "443")]).await;
    let group = outputs["SecurityGroupIds"].clone();
    let private: Vec<String> = outputs["SubnetIds"].split(',').map(str::to_string).collect();
    let ec2 = aws_sdk_ec2::Client::new(&w.base);
    let found = ec2.describe_subnets().set_subnet_ids(Some(private.clone())).send().await.expect("DescribeSubnets");
    let vpc = found.subnets()[0].vpc_id().unwrap().to_string();
    as_cloudformation_makes_the_vpc(&w.base, &vpc, &private).await;
    // moto ignores a group's SecurityGroupEgress: the group gets the rules real CloudFormation
    // makes of AgentEgressPorts=443.
    network::restrict_egress(&w.base, &group, &[443]).await;
    let (cluster, path) = profile_from_stack(&w, &outputs).await;

    let internet = Internet::stock();
    let (host, sim) = host_on_stack(&mut w, cluster, &outputs, &internet).await;
    let job = host
        .add_job(JobSpec::new("small", Duration::from_secs(2)).with_material(&format!("git@{GIT_HOST}:gocd/gocd.git")))
        .await;
    until_completed(&host).await;
    let failure = host.with_state(|s| s.job(job).failure.clone()).expect("the build failed");
    assert!(failure.contains("let no TCP 22 out") && failure.contains(&group), "{failure}");
    let console = host.console_log(job).join("\n");
    assert!(
        console.contains(&format!("ssh: connect to host {GIT_HOST} port 22: Connection timed out")),
        "git's words in the job's console:\n{console}"
    );

    let (code, out, stderr) = run(&w.moto.endpoint(), &["doctor", "--cluster-profile", path.to_str().unwrap()]).await;
    eprintln!("doctor:\n{out}{stderr}");
    let egress =
        out.lines().find(|l| l.starts_with("warn egress")).unwrap_or_else(|| panic!("no egress warning:\n{out}"));
    assert!(egress.contains(&group) && egress.contains("22"), "{egress}");
    assert_ne!(code, None);

    w.assert_no_live_tasks(Duration::from_secs(60)).await;
    drop(sim);
    host.shutdown().await;
}
