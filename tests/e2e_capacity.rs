//! Existing ECS capacity (issue 18), end to end on moto behind the strict proxy:
//!
//! - a `CapacityProviderStrategy` mixing FARGATE and FARGATE_SPOT starts every agent with RunTask
//!   through one provider of the strategy and no launch type, and the RunTask bodies counted at
//!   the proxy follow the strategy's base and weights.
//!
//! Needs `MOTO_SERVER`; never skips.

#![allow(clippy::print_stderr, clippy::tests_outside_test_module)]

mod reliability;
mod world;

use std::collections::BTreeMap;
use std::time::Duration;

use reliability::*;
use world::*;

/// FARGATE takes the first two agents (base 2), then one in four; FARGATE_SPOT three in four.
const STRATEGY: &str = "FARGATE:1:2\nFARGATE_SPOT:3";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mixed_fargate_strategy_honours_base_and_weights_at_the_proxy() {
    let mut w = Scenario::new("capacity_mixed_fargate").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cfg = w
        .host_config()
        .cluster_profile("p", cluster_props("gocd-a", &[("CapacityProviderStrategy", STRATEGY), ("MaxAgents", "20")]))
        .elastic_profile("small", "p", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    host.add_jobs(JobSpec::new("small", Duration::from_secs(2)), 10).await;
    host.wait_until("all ten jobs completed", Duration::from_secs(120), |s| s.all_completed()).await;
    assert_all_done(&host, &sim, Duration::from_secs(60)).await;

    let mut by_provider: BTreeMap<String, u64> = BTreeMap::new();
    for call in w.proxy.log().iter().filter(|r| r.key() == "ecs:RunTask") {
        let body = call.json.clone().expect("RunTask has a JSON body");
        assert!(body.get("launchType").is_none(), "a launch type beside the strategy: {body}");
        let strategy = body["capacityProviderStrategy"].as_array().cloned().unwrap_or_default();
        assert_eq!(strategy.len(), 1, "one provider a call: {body}");
        let name = strategy[0]["capacityProvider"].as_str().expect("a provider name").to_string();
        *by_provider.entry(name).or_insert(0) += 1;
    }
    let expected: BTreeMap<String, u64> = [("FARGATE".to_string(), 4), ("FARGATE_SPOT".to_string(), 6)].into();
    assert_eq!(by_provider, expected, "2 base on FARGATE, then 8 by weight 1:3");
    let on_spot =
        sim.with_state(|s| s.tasks.values().filter(|t| t.capacity_provider.as_deref() == Some("FARGATE_SPOT")).count());
    assert_eq!(on_spot, 6, "moto ran six tasks through FARGATE_SPOT");
    let report = host.cluster_status_report("p").await.expect("cluster status report");
    let view = report.body["view"].as_str().unwrap_or_default().to_string();
    assert!(view.contains("capacity providers FARGATE:1:2, FARGATE_SPOT:3:0"), "the report names the strategy");
    w.finish(host, sim, &format!("run_task_by_provider={by_provider:?}")).await;
}
