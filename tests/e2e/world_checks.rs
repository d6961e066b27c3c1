//! Checks of the test world itself (`docs/design.md`, "The test world"): moto starts and answers, the proxy forwards,
//! counts and applies its rules, the GoCD host simulator answers callbacks and catches stdout
//! violations, the agent simulator registers agents only with valid keys, and the host loads the
//! real plugin with stdout holding nothing but protocol lines.
//!
//! Needs `MOTO_SERVER` (see `scripts/moto.sh`); without it the tests panic, never skip.

use crate::world;
use std::time::Duration;

use crate::world::host::PLUGIN_ID;
use crate::world::moto::{self, aws_error_text, BASE_ACCOUNT};
use crate::world::proxy::rules;
use crate::world::*;
use aws_sdk_ecs::types::{
    AwsVpcConfiguration, CapacityProviderStrategyItem, Compatibility, ContainerDefinition, ContainerOverride,
    KeyValuePair, NetworkConfiguration, NetworkMode, Tag, TaskOverride,
};
use serde_json::json;

const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/gocd-agents";

/// Registers a Fargate task definition and returns its ARN.
async fn task_definition(ecs: &aws_sdk_ecs::Client) -> String {
    let container = ContainerDefinition::builder()
        .name("agent")
        .image("gocd/gocd-agent-alpine-3.19:v24.1.0")
        .cpu(512)
        .memory(1024)
        .build();
    let out = ecs
        .register_task_definition()
        .family("world-test")
        .requires_compatibilities(Compatibility::Fargate)
        .network_mode(NetworkMode::Awsvpc)
        .cpu("512")
        .memory("1024")
        .container_definitions(container)
        .send()
        .await
        .unwrap_or_else(|e| panic!("RegisterTaskDefinition: {}", aws_error_text(&e)));
    out.task_definition().and_then(|t| t.task_definition_arn()).unwrap().to_string()
}

fn network(net: &moto::DefaultNetwork) -> NetworkConfiguration {
    NetworkConfiguration::builder()
        .awsvpc_configuration(
            AwsVpcConfiguration::builder()
                .subnets(net.subnet_ids[0].clone())
                .security_groups(net.security_group_id.clone())
                .build()
                .unwrap(),
        )
        .build()
}

/// Runs a task the way the plugin would: overrides carrying the agent's registration.
async fn run_agent_task(
    ecs: &aws_sdk_ecs::Client,
    td: &str,
    net: &moto::DefaultNetwork,
    job_id: &str,
    agent_id: &str,
    key: &str,
) {
    let env = |k: &str, v: &str| KeyValuePair::builder().name(k).value(v).build();
    let overrides = TaskOverride::builder()
        .container_overrides(
            ContainerOverride::builder()
                .name("agent")
                .environment(env("GO_EA_SERVER_URL", "https://gocd.test/go"))
                .environment(env("GO_EA_AUTO_REGISTER_KEY", key))
                .environment(env("GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID", agent_id))
                .environment(env("GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID", PLUGIN_ID))
                .build(),
        )
        .build();
    ecs.run_task()
        .cluster("world")
        .task_definition(td)
        .launch_type(aws_sdk_ecs::types::LaunchType::Fargate)
        .network_configuration(network(net))
        .overrides(overrides)
        .tags(Tag::builder().key("gocd:job-id").value(job_id).build())
        .send()
        .await
        .unwrap_or_else(|e| panic!("RunTask: {}", aws_error_text(&e)));
}

/// A stand-in plugin (a shell script) for host self-tests that need no real plugin.
fn fake_plugin(script: &str) -> HostConfig {
    let mut cfg = HostConfig::new("http://127.0.0.1:9");
    cfg.program = Some(("/bin/sh".into(), vec!["-c".into(), script.into()]));
    cfg
}

const FAKE_HELLO: &str = r#"{"type":"hello","protocol":1,"plugin_id":"cd.go.contrib.elastic-agent.ecs","name":"fake","version":"0","extension":"elastic-agent","extension_versions":["5.0"]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn moto_starts_answers_and_keeps_accounts_apart() {
    let moto = Moto::start().await;
    let r = moto.api("GET", "/moto-api/", None).await;
    assert_eq!(r.status, 200);

    let base = moto.base_config().await;
    let sts = aws_sdk_sts::Client::new(&base);
    let me = sts.get_caller_identity().send().await.expect("GetCallerIdentity");
    assert_eq!(me.account(), Some(BASE_ACCOUNT));

    let role = moto.assume_role_config(ROLE_ARN).await;
    assert_eq!(role.account, "111111111111");
    let them = aws_sdk_sts::Client::new(&role.config).get_caller_identity().send().await.unwrap();
    assert_eq!(them.account(), Some("111111111111"));

    let a = moto::create_cluster(&base, "base-cluster").await;
    let b = moto::create_cluster(&role.config, "role-cluster").await;
    assert!(a.contains(BASE_ACCOUNT) && b.contains("111111111111"), "{a} {b}");
    let listed = aws_sdk_ecs::Client::new(&base).list_clusters().send().await.unwrap();
    assert_eq!(listed.cluster_arns(), std::slice::from_ref(&a), "the base account sees only its own cluster");

    let net = moto::default_network(&base).await;
    assert!(net.vpc_id.starts_with("vpc-") && !net.subnet_ids.is_empty() && net.security_group_id.starts_with("sg-"));

    // Tasks stay RUNNING across DescribeTasks (manual transitions).
    let ecs = aws_sdk_ecs::Client::new(&base);
    let td = task_definition(&ecs).await;
    ecs.run_task()
        .cluster("base-cluster")
        .task_definition(&td)
        .launch_type(aws_sdk_ecs::types::LaunchType::Fargate)
        .network_configuration(network(&net))
        .send()
        .await
        .unwrap();
    for _ in 0..5 {
        let live = moto::live_tasks(&base, "base-cluster").await;
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].last_status(), Some("RUNNING"));
    }
    assert!(moto::live_tasks(&role.config, "role-cluster").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn proxy_forwards_counts_and_applies_rules() {
    let moto = Moto::start().await;
    let proxy = Proxy::start(moto.addr()).await;
    let direct = moto.base_config().await;
    let via = moto::base_config_at(&proxy.endpoint()).await;
    moto::create_cluster(&direct, "world").await;
    let net = moto::default_network(&direct).await;

    let ecs = aws_sdk_ecs::Client::new(&via);
    let ec2 = aws_sdk_ec2::Client::new(&via);
    let sts = aws_sdk_sts::Client::new(&via);
    for _ in 0..3 {
        ecs.list_clusters().send().await.expect("ListClusters through the proxy");
    }
    ec2.describe_vpcs().send().await.expect("DescribeVpcs through the proxy");
    sts.get_caller_identity().send().await.expect("GetCallerIdentity through the proxy");
    assert_eq!(proxy.count("ecs:ListClusters"), 3, "{:?}", proxy.counts());
    assert_eq!(proxy.count("ec2:DescribeVpcs"), 1, "{:?}", proxy.counts());
    assert_eq!(proxy.count("sts:GetCallerIdentity"), 1, "{:?}", proxy.counts());

    // AssumeRole through the proxy: credentials captured, account known for later calls.
    let out =
        sts.assume_role().role_arn(ROLE_ARN).role_session_name("world").external_id("ext-1").send().await.unwrap();
    let captured = proxy.captured_credentials();
    assert_eq!(captured.len(), 1);
    assert_eq!(captured[0].account, "111111111111");
    assert_eq!(Some(captured[0].credentials.access_key_id.as_str()), out.credentials().map(|c| c.access_key_id()));
    let assume = proxy.log().into_iter().find(|r| r.key() == "sts:AssumeRole").unwrap();
    assert_eq!(assume.role_arn.as_deref(), Some(ROLE_ARN));
    assert_eq!(assume.external_id.as_deref(), Some("ext-1"));
    let role_creds = captured[0].credentials.clone();
    let as_role = moto::sdk_config_for(&proxy.endpoint(), &role_creds, moto::REGION).await;
    aws_sdk_ecs::Client::new(&as_role).list_clusters().send().await.unwrap();
    let last = proxy.log().pop().unwrap();
    assert_eq!(last.assumed_account.as_deref(), Some("111111111111"));

    // FARGATE_SPOT refused for capacity, without reaching moto; FARGATE still starts.
    proxy.add_rule("spot", rules::fargate_spot_capacity_refused());
    let td = task_definition(&aws_sdk_ecs::Client::new(&direct)).await;
    let spot = ecs
        .run_task()
        .cluster("world")
        .task_definition(&td)
        .capacity_provider_strategy(
            CapacityProviderStrategyItem::builder().capacity_provider("FARGATE_SPOT").weight(1).build().unwrap(),
        )
        .network_configuration(network(&net))
        .send()
        .await
        .expect("a refused spot launch is still HTTP 200");
    assert!(spot.tasks().is_empty());
    assert_eq!(spot.failures()[0].reason(), Some(rules::SPOT_CAPACITY_REASON));
    assert!(moto::all_tasks(&direct, "world").await.is_empty(), "the refused launch must not reach moto");
    let on_demand = ecs
        .run_task()
        .cluster("world")
        .task_definition(&td)
        .launch_type(aws_sdk_ecs::types::LaunchType::Fargate)
        .network_configuration(network(&net))
        .send()
        .await
        .unwrap();
    assert_eq!(on_demand.tasks().len(), 1);
    assert_eq!(proxy.ecs_live_now(), 1);
    assert_eq!(proxy.ecs_live_high_water(), 1);
    let arn = on_demand.tasks()[0].task_arn().unwrap();
    ecs.stop_task().cluster("world").task(arn).reason("done").send().await.unwrap();
    assert_eq!(proxy.ecs_live_now(), 0);

    // A denied role: STS's AccessDenied in its wire format.
    proxy.add_rule("deny", rules::deny_assume_role("arn:aws:iam::222222222222:role/forbidden"));
    let denied = sts
        .assume_role()
        .role_arn("arn:aws:iam::222222222222:role/forbidden")
        .role_session_name("world")
        .send()
        .await
        .expect_err("AssumeRole must be denied");
    let text = aws_error_text(&denied);
    assert!(
        text.contains("AccessDenied")
            || denied.as_service_error().and_then(|e| e.meta().code()) == Some("AccessDenied"),
        "{text}"
    );
    assert_eq!(denied.as_service_error().and_then(|e| e.meta().code()), Some("AccessDenied"));

    // Keep-alive: many calls, counted one by one.
    let before = proxy.mark();
    for _ in 0..20 {
        ecs.list_clusters().send().await.unwrap();
    }
    assert_eq!(proxy.counts_since(before).get("ecs:ListClusters"), Some(&20));

    // A dropped connection surfaces as an error to the client (after its retries).
    proxy.add_rule("drop", |c| if c.is("ecs", "DescribeClusters") { Verdict::Drop } else { Verdict::Forward });
    assert!(ecs.describe_clusters().clusters("world").send().await.is_err());
    assert!(proxy.log().iter().any(|r| r.outcome == proxy::Outcome::Dropped));
    eprintln!("FIGURES: world proxy counts {:?}", proxy.counts());
}

#[test]
fn form_bodies_decode() {
    let f = world::http::form_decode(b"Action=AssumeRole&RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fx&A=b+c&E=%");
    assert_eq!(f[0], ("Action".into(), "AssumeRole".into()));
    assert_eq!(f[1].1, "arn:aws:iam::1:role/x");
    assert_eq!(f[2].1, "b c");
    assert_eq!(f[3].1, "%");
}

#[test]
fn secret_scanner_names_the_kind_not_the_secret() {
    let mut s = SecretScanner::new();
    s.add(SecretKind::SessionToken, "FQoGZXIvYXdzEXAMPLETOKENVALUE");
    s.add(SecretKind::AutoRegisterKey, "short");
    assert_eq!(s.len(), 1, "values under 8 characters are ignored");
    assert!(s.scan("stderr", "all fine").is_empty());
    let leaks = s.scan("stderr", "token=FQoGZXIvYXdzEXAMPLETOKENVALUE");
    assert_eq!(leaks.len(), 1);
    assert_eq!(leaks[0].kind, SecretKind::SessionToken);
    assert!(!leaks[0].to_string().contains("FQoG"), "the report must not show the secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn host_answers_callbacks_and_catches_stdout_violations() {
    let dir = std::env::temp_dir().join(format!("ecs-ea-world-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("answers.jsonl");
    let script = format!(
        r#"printf '%s\n' '{FAKE_HELLO}'
printf '%s\n' '{{"type":"request","id":"a","name":"go.processor.server-info.get","version":"1.0","body":null}}'
printf '%s\n' '{{"type":"request","id":7,"name":"go.processor.elastic-agents.list-agents","version":"1.0","body":null}}'
printf '%s\n' '{{"type":"request","id":8,"name":"go.processor.no-such-thing","version":"1.0","body":null}}'
printf '%s\n' '{{"type":"request","id":9,"name":"go.processor.server-health.add-messages","version":"1.0","body":[{{"type":"warning","message":"w1"}},{{"type":"error","message":"e1"}}]}}'
printf '%s\n' '{{"type":"request","id":10,"name":"go.processor.console-log.append","version":"2.0","body":{{"pipeline_name":"p","pipeline_counter":"3","stage_name":"s","stage_counter":"1","job_name":"j","text":"hello console"}}}}'
head -n 5 > '{}'
printf 'this is not json\n'
cat > /dev/null
"#,
        out.display()
    );
    let host = GoCdHost::start(fake_plugin(&script)).await;
    world::wait_for("the fake plugin to get five answers", Duration::from_secs(10), || async {
        std::fs::read_to_string(&out).is_ok_and(|t| t.lines().count() == 5)
    })
    .await;
    let answers: Vec<serde_json::Value> =
        std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let by_id =
        |id: serde_json::Value| answers.iter().find(|a| a["id"] == id).unwrap_or_else(|| panic!("no answer to {id}"));
    let info = by_id(json!("a"));
    assert_eq!(info["type"], "response");
    assert_eq!(info["code"], 200);
    assert_eq!(info["body"]["server_id"], host.server_id());
    assert_eq!(info["body"]["secure_site_url"], "https://gocd.test/go");
    assert_eq!(by_id(json!(7))["body"], json!([]));
    assert_eq!(by_id(json!(8))["code"], 404);
    assert_eq!(by_id(json!(9))["code"], 200);
    assert_eq!(by_id(json!(10))["code"], 200);
    let health = host.health_messages();
    assert_eq!(health.len(), 2);
    assert_eq!((health[1].kind.as_str(), health[1].message.as_str()), ("error", "e1"));
    assert!(host.with_state(|s| s.console.iter().any(|c| c.text == "hello console" && c.key == "p/3/s/1/j")));

    world::wait_for("the garbage line to be seen", Duration::from_secs(10), || async {
        host.with_state(|s| !s.violations.is_empty())
    })
    .await;
    let problems = host.try_shutdown().await.expect_err("a non-JSON stdout line is a violation");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("not one JSON object"), "{problems:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn host_rejects_a_plugin_without_hello() {
    let host = GoCdHost::new(fake_plugin(
        r#"printf '%s\n' '{"type":"response","id":1,"code":200,"body":null}'; cat >/dev/null"#,
    ));
    let err = host.spawn_plugin().await.expect_err("no hello");
    assert!(err.contains("not a hello"), "{err}");
    let problems = host.try_shutdown().await.expect_err("violations");
    assert!(problems.iter().any(|p| p.contains("not a hello")), "{problems:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn registry_takes_only_valid_unused_keys_and_agent_sim_registers_tasks() {
    let moto = Moto::start().await;
    let base = moto.base_config().await;
    moto::create_cluster(&base, "world").await;
    let net = moto::default_network(&base).await;
    let ecs = aws_sdk_ecs::Client::new(&base);
    let td = task_definition(&ecs).await;

    let host = GoCdHost::start(fake_plugin(&format!("printf '%s\\n' '{FAKE_HELLO}'; cat >/dev/null"))).await;
    // The registry's own rules.
    let k = host.issue_key(None);
    assert!(host.register_agent("", PLUGIN_ID, &k, None).is_err(), "no agent id");
    let k = host.issue_key(None);
    assert!(host.register_agent("a-0", PLUGIN_ID, "not-a-key", None).is_err());
    host.register_agent("a-0", PLUGIN_ID, &k, Some("prod, qa")).expect("valid key");
    assert!(host.register_agent("a-1", PLUGIN_ID, &k, None).is_err(), "a key is single-use");
    let k2 = host.issue_key(None);
    assert!(host.register_agent("a-0", PLUGIN_ID, &k2, None).is_err(), "duplicate agent id");
    assert_eq!(host.registry()[0].environments, ["prod", "qa"]);
    assert_eq!(host.rejections().len(), 4);

    // The agent simulator registers what the tasks' overrides say, when allowed.
    let sim = AgentSimulator::start(&host, vec![Fleet::new("base", &base, "world")], SimPolicy::default());
    sim.never_register("43");
    sim.hold("44");
    let good = host.issue_key(None);
    run_agent_task(&ecs, &td, &net, "42", "agent-42", &good).await;
    run_agent_task(&ecs, &td, &net, "43", "agent-43", &host.issue_key(None)).await;
    run_agent_task(&ecs, &td, &net, "44", "agent-44", &host.issue_key(None)).await;
    host.wait_until("agent-42 registered", Duration::from_secs(15), |s| {
        s.agents.iter().any(|a| a.agent_id == "agent-42")
    })
    .await;
    run_agent_task(&ecs, &td, &net, "45", "agent-45", &good).await; // a used key
    sim.wait_until("four tasks seen and the reused key refused", Duration::from_secs(15), |s| {
        s.tasks.len() == 4 && s.tasks.values().any(|t| matches!(t.registration, Some(Err(_))))
    })
    .await;
    assert!(!host.registry().iter().any(|a| a.agent_id == "agent-43" || a.agent_id == "agent-44"));
    sim.release("44");
    host.wait_until("agent-44 registered after release", Duration::from_secs(15), |s| {
        s.agents.iter().any(|a| a.agent_id == "agent-44")
    })
    .await;
    assert_eq!(sim.max_live(), 4);
    assert_eq!(sim.tasks_for_job(42), 1);

    let arn = sim.stop_task_by_hand(42, "stopped by the world test").await;
    sim.wait_until("the stopped task noticed", Duration::from_secs(15), |s| s.tasks[&arn].stopped).await;
    assert_eq!(sim.with_state(|s| s.tasks[&arn].stopped_reason.clone()).as_deref(), Some("stopped by the world test"));
    assert_eq!(moto::live_tasks(&base, "world").await.len(), 3);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn host_loads_the_real_plugin_and_stdout_holds_only_protocol_lines() {
    let moto = Moto::start().await;
    let proxy = Proxy::start(moto.addr()).await;
    let cfg = HostConfig::new(&proxy.endpoint())
        .cluster_profile("cp", props(&[("ClusterName", "world"), ("Region", moto::REGION)]))
        .elastic_profile("ep", "cp", props(&[("Image", "gocd/gocd-agent-alpine-3.19:v24.1.0")]));
    let host = GoCdHost::start(cfg).await;
    let report = host.load().await;
    assert_eq!(report.hello["plugin_id"], PLUGIN_ID);
    assert_eq!(report.hello["extension"], "elastic-agent");
    assert!(report.elastic_profile_metadata.as_array().unwrap().iter().any(|m| m["key"] == "Image"));
    assert!(report.cluster_profile_metadata.as_array().unwrap().iter().any(|m| m["key"] == "ClusterName"));
    let migrated = &report.migrate_config["cluster_profiles"];
    assert_eq!(migrated[0]["id"], "cp", "configured profiles come back unchanged: {migrated}");
    // A few more harmless requests: an unknown name is a 404, not a crash.
    let unknown = host.request("no-such-request", json!({})).await.expect("an answer");
    assert_eq!(unknown.code, 404);
    assert!(unknown.body["message"].is_string());
    host.assert_no_violations();
    let scanner = SecretScanner::from_world(&host, Some(&proxy));
    scanner.assert_host_clean(&host);
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_real_plugin_exits_zero_on_sigterm() {
    let host = GoCdHost::start(HostConfig::new("http://127.0.0.1:9")).await;
    let status = host.terminate().await.expect("the plugin exits within 15 s of SIGTERM");
    assert!(status.success(), "exit status {status} after SIGTERM (docs/protocol.md, \"Shutdown\", wants 0)");
    host.assert_no_violations();
}

/// The network world's ranges and material hosts, as AWS and git read them.
#[test]
fn the_network_world_reads_ranges_and_materials_as_aws_and_git_do() {
    use crate::world::network::{material_host, Cidr};
    assert!(Cidr::parse("10.0.0.0/16").unwrap().contains("10.0.200.1".parse().unwrap()));
    assert!(!Cidr::parse("10.0.0.0/16").unwrap().contains("10.1.0.1".parse().unwrap()));
    assert!(Cidr::parse("0.0.0.0/0").unwrap().contains("8.8.8.8".parse().unwrap()));
    assert!(Cidr::parse("2001:db8::/32").is_none(), "IPv6 ranges are not IPv4 ones");
    assert_eq!(material_host("git@github.com:gocd/gocd.git"), ("github.com".into(), 22));
    assert_eq!(material_host("git://github.com/gocd/gocd"), ("github.com".into(), 9418));
    assert_eq!(material_host("https://github.com/gocd/gocd"), ("github.com".into(), 443));
    assert_eq!(material_host("ssh://git@github.com:2222/x"), ("github.com".into(), 2222));
}
