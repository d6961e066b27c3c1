//! Existing ECS capacity, end to end on moto behind the strict proxy:
//!
//! - a `CapacityProviderStrategy` mixing FARGATE and FARGATE_SPOT starts every agent with RunTask
//!   through one provider of the strategy and no launch type, and the RunTask bodies counted at
//!   the proxy follow the strategy's base and weights;
//! - `FARGATE_SPOT:1` + `FARGATE:0`: Spot refused for capacity (the proxy answers as AWS does)
//!   lands on FARGATE through the strategy, never with a launch type;
//! - a cluster whose capacity is an Auto Scaling group's capacity provider (moto places its tasks
//!   on the container instances registered for it) runs 20 jobs with no instance launched by the
//!   plugin, and the elastic profile's spread-by-zone placement reaches every RunTask as
//!   configured;
//! - a pricing read that outlasts what a job-completion waits for it goes on behind it, and the
//!   next job is priced from it with no second read;
//! - an ECS Managed Instances provider (the world's stand-in: the proxy describes it as AWS
//!   would, moto places its tasks on container instances registered for it) runs jobs with no
//!   instance launched by the plugin, every RunTask through it, the task definition requiring
//!   MANAGED_INSTANCES with awsvpc; an elastic profile with a key Managed Instances refuses is
//!   refused with a console line naming the key;
//! - an elastic profile naming a task definition (`TaskDefinitionArn`) whose
//!   requiresCompatibilities lack MANAGED_INSTANCES is refused at create-agent where the strategy
//!   names a Managed Instances provider: a console line and server health name the task
//!   definition and what to add, and no RunTask is sent;
//! - after a restart with tasks running, the strategy's split goes on from them.
//!
//! Needs `MOTO_SERVER`; never skips.

use crate::world;
use std::collections::BTreeMap;
use std::time::Duration;

use crate::reliability::*;
use crate::world::host::JobHandle;
use crate::world::http::HttpResponse;
use crate::world::proxy::{rules, Outcome, Verdict};
use crate::world::*;
use aws_sdk_ecs::types::{AutoScalingGroupProvider, CapacityProviderStrategyItem, Resource};

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

/// The provider of every RunTask the proxy forwarded to moto, in order, from log mark `since`.
fn run_task_providers(proxy: &Proxy, since: usize) -> Vec<String> {
    proxy.log()[since..]
        .iter()
        .filter(|r| r.key() == "ecs:RunTask" && r.outcome == Outcome::Forwarded)
        .map(|r| {
            let body = r.json.as_ref().expect("RunTask has a JSON body");
            assert!(body.get("launchType").is_none(), "a launch type beside the strategy: {body}");
            body["capacityProviderStrategy"][0]["capacityProvider"].as_str().unwrap_or("none").to_string()
        })
        .collect()
}

/// Adds one job and waits until its RunTask reached moto: one launch at a time, so the order
/// of the providers at the proxy is the plugin's order of choosing them.
async fn one_launch(host: &GoCdHost, proxy: &Proxy, spec: JobSpec, launched: usize) {
    host.add_job(spec).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while run_task_providers(proxy, 0).len() < launched {
        assert!(std::time::Instant::now() < deadline, "RunTask {launched} never reached moto");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `FARGATE:1:2` + `FARGATE_SPOT:3`: three jobs (the base's two on FARGATE, one on Spot), the
/// plugin killed while their tasks run and a new process started, then five more jobs. The new
/// process adopts the three tasks with their providers, so the RunTasks counted at the proxy go
/// on as one process would have (F F S, then S F S S S); a base owed again would have started
/// F F S S F.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_restart_with_tasks_running_the_split_goes_on_and_the_base_is_not_owed_twice() {
    let mut w = Scenario::new("capacity_restart_split").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    let cfg = w
        .host_config()
        .cluster_profile("p", cluster_props("gocd-a", &[("CapacityProviderStrategy", STRATEGY), ("MaxAgents", "20")]))
        .elastic_profile("small", "p", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    for n in 1..=3 {
        one_launch(&host, &w.proxy, JobSpec::new("small", Duration::from_secs(45)), n).await;
    }
    host.wait_until("the three jobs building", Duration::from_secs(90), |s| {
        s.count_jobs(|j| matches!(j, JobState::Running { .. })) == 3
    })
    .await;
    assert_eq!(run_task_providers(&w.proxy, 0), ["FARGATE", "FARGATE", "FARGATE_SPOT"], "the base of 2, then Spot");
    host.kill().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let restarted = w.proxy.mark();
    host.restart().await;

    for n in 4..=8 {
        one_launch(&host, &w.proxy, JobSpec::new("small", Duration::from_secs(2)), n).await;
    }
    host.wait_until("all eight jobs completed", Duration::from_secs(150), |s| s.all_completed()).await;
    assert_all_done(&host, &sim, Duration::from_secs(60)).await;

    let after = run_task_providers(&w.proxy, restarted);
    assert_eq!(
        after,
        ["FARGATE_SPOT", "FARGATE", "FARGATE_SPOT", "FARGATE_SPOT", "FARGATE_SPOT"],
        "the new process goes on from the adopted tasks; the base is not owed again"
    );
    let all = run_task_providers(&w.proxy, 0);
    assert_eq!(
        all,
        [
            "FARGATE",
            "FARGATE",
            "FARGATE_SPOT",
            "FARGATE_SPOT",
            "FARGATE",
            "FARGATE_SPOT",
            "FARGATE_SPOT",
            "FARGATE_SPOT"
        ],
        "as one process would have launched them"
    );
    let counts = sim.with_state(|s| {
        let on = |p: &str| s.tasks.values().filter(|t| t.capacity_provider.as_deref() == Some(p)).count();
        (on("FARGATE"), on("FARGATE_SPOT"))
    });
    assert_eq!(counts, (3, 5), "moto ran 3 tasks on FARGATE and 5 on FARGATE_SPOT");
    w.finish(host, sim, "plugin_processes=2 run_task=8 fargate=3 spot=5").await;
}

/// The Price List's answer to the plugin's GetProducts for c5a.xlarge's Linux on-demand price
/// in us-east-1 (a product document as AWS writes it); any other question gets no product.
fn price_list_answers_c5a_xlarge(call: &world::proxy::Call) -> Verdict {
    if !call.is("pricing", "GetProducts") {
        return Verdict::Forward;
    }
    let body = call.json().unwrap_or_default();
    let filter = |field: &str| {
        let filters = body["Filters"].as_array().cloned().unwrap_or_default();
        filters.iter().find(|f| f["Field"] == field).and_then(|f| f["Value"].as_str().map(str::to_string))
    };
    let asked = body["ServiceCode"] == "AmazonEC2"
        && filter("regionCode").as_deref() == Some("us-east-1")
        && filter("instanceType").as_deref() == Some("c5a.xlarge")
        && filter("operatingSystem").as_deref() == Some("Linux");
    let attributes = serde_json::json!({
        "regionCode": "us-east-1", "instanceType": "c5a.xlarge", "operatingSystem": "Linux",
        "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"
    });
    let document = serde_json::json!({
        "product": {"productFamily": "Compute Instance", "attributes": attributes, "sku": "JZ6SUN9MT7PK3DCU"},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {"JZ6SUN9MT7PK3DCU.JRTCKXETXF": {"offerTermCode": "JRTCKXETXF",
            "sku": "JZ6SUN9MT7PK3DCU", "priceDimensions": {"JZ6SUN9MT7PK3DCU.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "description": "$0.154 per On Demand Linux c5a.xlarge Instance Hour",
                "pricePerUnit": {"USD": "0.1540000000"}}}}}},
        "version": "20261015191316",
        "publicationDate": "2026-10-15T19:13:16Z"
    });
    let list: Vec<String> = if asked { vec![document.to_string()] } else { Vec::new() };
    Verdict::Respond(HttpResponse::aws_json(200, &serde_json::json!({"FormatVersion": "aws_v1", "PriceList": list})))
}

/// An ASG capacity provider `provider` in `cluster`, with `instances` instances of
/// `instance_type` registered for it: what an Auto Scaling group and its ECS agents would have
/// set up, done through moto directly (not through the proxy: nothing here is the plugin's).
async fn asg_capacity(w: &Scenario, cluster: &str, provider: &str, instances: usize, instance_type: &str) {
    let ecs = aws_sdk_ecs::Client::new(&w.base);
    let asg = format!("arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:1:autoScalingGroupName/{provider}");
    let group = AutoScalingGroupProvider::builder().auto_scaling_group_arn(asg).build().expect("an ASG provider");
    ecs.create_capacity_provider().name(provider).auto_scaling_group_provider(group).send().await.expect("provider");
    let strategy = CapacityProviderStrategyItem::builder().capacity_provider(provider).weight(1).build().expect("item");
    ecs.put_cluster_capacity_providers()
        .cluster(cluster)
        .capacity_providers(provider)
        .default_capacity_provider_strategy(strategy)
        .send()
        .await
        .expect("providers of the cluster");
    register_instances(w, cluster, instances, instance_type, false).await;
}

/// Whether a call is a DescribeInstances of given instances (`instance-id`), as the plugin reads
/// whether a capacity provider's instance is Spot; not the leftover sweep's, which asks by the
/// server's tag.
fn by_instance_id(call: &world::proxy::Call) -> bool {
    call.is("ec2", "DescribeInstances")
        && call.form.iter().any(|(k, v)| k.starts_with("Filter.") && k.ends_with(".Name") && v == "instance-id")
}

/// Counts the DescribeInstances of given instances ([`by_instance_id`]) from now on.
fn spot_or_not_reads(w: &Scenario) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
    let reads = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = reads.clone();
    w.proxy.add_rule("count-spot-or-not-reads", move |call| {
        if by_instance_id(call) {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Verdict::Forward
    });
    reads
}

/// `instances` instances of `instance_type` (4 vCPU, 7482 MiB registered), Spot ones when
/// `spot`, registered with `cluster`, as a capacity provider's would be.
async fn register_instances(w: &Scenario, cluster: &str, instances: usize, instance_type: &str, spot: bool) {
    let ecs = aws_sdk_ecs::Client::new(&w.base);
    let ec2 = aws_sdk_ec2::Client::new(&w.base);
    for _ in 0..instances {
        let out = ec2
            .run_instances()
            .image_id("ami-12c6146b")
            .instance_type(aws_sdk_ec2::types::InstanceType::from(instance_type))
            .set_instance_market_options(spot.then(|| {
                aws_sdk_ec2::types::InstanceMarketOptionsRequest::builder()
                    .market_type(aws_sdk_ec2::types::MarketType::Spot)
                    .build()
            }))
            .min_count(1)
            .max_count(1)
            .send()
            .await
            .expect("an instance of the group");
        let id = out.instances()[0].instance_id().expect("an id").to_string();
        let resource =
            |name: &str, value: i32| Resource::builder().name(name).r#type("INTEGER").integer_value(value).build();
        ecs.register_container_instance()
            .cluster(cluster)
            .instance_identity_document(serde_json::json!({ "instanceId": id, "region": "us-east-1" }).to_string())
            .total_resources(resource("CPU", 4096))
            .total_resources(resource("MEMORY", 7482))
            .send()
            .await
            .expect("registered with the cluster");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_asg_capacity_provider_runs_twenty_jobs_with_no_instance_of_ours_and_placement_as_configured() {
    let mut w = Scenario::new("capacity_asg").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    // c5a.xlarge: a type the embedded price table does not list, so its price is read from the
    // Price List at the first job's completion, as AWS answers GetProducts (moto has no Price
    // List).
    asg_capacity(&w, "gocd-a", "ci-asg", 3, "c5a.xlarge").await;
    w.proxy.add_rule("price-list", price_list_answers_c5a_xlarge);
    let mut elastic = elastic_props();
    elastic.extend(world::host::props(&[("PlacementStrategy", "spread:attribute:ecs.availability-zone")]));
    let cfg = w
        .host_config()
        .cluster_profile("p", cluster_props("gocd-a", &[("CapacityProviderStrategy", "ci-asg"), ("MaxAgents", "20")]))
        .elastic_profile("spread", "p", elastic);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    host.add_jobs(JobSpec::new("spread", Duration::from_secs(2)), 20).await;
    host.wait_until("all twenty jobs completed", Duration::from_secs(180), |s| s.all_completed()).await;
    assert_all_done(&host, &sim, Duration::from_secs(60)).await;

    let log = w.proxy.log();
    let run_tasks: Vec<_> = log.iter().filter(|r| r.key() == "ecs:RunTask").filter_map(|r| r.json.clone()).collect();
    assert_eq!(run_tasks.len(), 20, "one RunTask a job");
    for body in &run_tasks {
        assert!(body.get("launchType").is_none(), "{body}");
        let strategy = body["capacityProviderStrategy"].as_array().cloned().unwrap_or_default();
        assert_eq!(strategy.len(), 1, "{body}");
        assert_eq!(strategy[0]["capacityProvider"], "ci-asg", "{body}");
        assert_eq!(
            body["placementStrategy"],
            serde_json::json!([{ "type": "spread", "field": "attribute:ecs.availability-zone" }]),
            "the placement as configured"
        );
    }
    let launched_by_us = log.iter().filter(|r| r.service == "ec2" && r.operation == "RunInstances").count();
    assert_eq!(launched_by_us, 0, "the plugin launched no instance");
    let on_asg =
        sim.with_state(|s| s.tasks.values().filter(|t| t.capacity_provider.as_deref() == Some("ci-asg")).count());
    assert_eq!(on_asg, 20, "every task ran on the group's instances");

    // Each job is priced as its reservation of the group's c5a.xlarge it ran on (0.5 vCPU of
    // 4 vCPU, 1 GiB of 7482 MiB: 14 %), each instance described once, the type's price read
    // from the Price List once.
    for h in (0..host.with_state(|s| s.jobs.len())).map(JobHandle) {
        let line = host.cost_line(h).await;
        assert!(line.contains("on capacity provider ci-asg's EC2 instance i-"), "{line}");
        assert!(line.contains("(c5a.xlarge, us-east-1), reserving 14 % of it: $"), "{line}");
    }
    let described = log.iter().filter(|r| r.key() == "ecs:DescribeContainerInstances").count();
    assert!((1..=3).contains(&described), "each of the group's instances described once at most: {described}");
    assert_eq!(w.proxy.count("pricing:GetProducts"), 1, "the type's price read once for the twenty jobs");
    w.finish(host, sim, "jobs=20 run_task=20 run_instances=0").await;
}

/// A job on a Spot instance of an Auto Scaling group pays its reservation at EC2's Spot price
/// for the instance's type and zone; whether the instance is Spot is read once
/// (DescribeInstances), the price once for the jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_on_an_asg_spot_instance_pays_its_reservation_at_the_spot_price() {
    let mut w = Scenario::new("capacity_asg_spot").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    asg_capacity(&w, "gocd-a", "ci-asg", 0, "c5.xlarge").await;
    register_instances(&w, "gocd-a", 1, "c5.xlarge", true).await;
    w.proxy.add_rule("spot-price", rules::spot_price_history("0.068000"));
    let reads = spot_or_not_reads(&w);
    let cfg = w
        .host_config()
        .cluster_profile("p", cluster_props("gocd-a", &[("CapacityProviderStrategy", "ci-asg")]))
        .elastic_profile("small", "p", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    host.add_jobs(JobSpec::new("small", Duration::from_secs(2)), 3).await;
    host.wait_until("the three jobs completed", Duration::from_secs(120), |s| s.all_completed()).await;
    assert_all_done(&host, &sim, Duration::from_secs(60)).await;

    for h in (0..3).map(JobHandle) {
        let line = host.cost_line(h).await;
        assert!(line.contains("(c5.xlarge, Spot at $0.0680 an hour, us-east-1), reserving 14 % of it: $"), "{line}");
        assert!(line.contains("(its reservation at the Spot price;"), "{line}");
    }
    assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1, "whether the instance is Spot, read once");
    assert_eq!(w.proxy.count("ec2:DescribeSpotPriceHistory"), 1, "the Spot price read once for the three jobs");
    w.finish(host, sim, "jobs=3 spot_price=0.068").await;
}

/// A pricing read that outlasts what a job-completion waits for it (5 s) is not lost: the
/// completion goes on without it (that job's cost not known, said in its line), the read ends
/// behind it and is kept, and the next job is priced from it with no second read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pricing_read_slower_than_a_completion_waits_is_kept_for_the_next_job() {
    let mut w = Scenario::new("capacity_slow_pricing_read").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    asg_capacity(&w, "gocd-a", "ci-asg", 0, "c5.xlarge").await;
    register_instances(&w, "gocd-a", 1, "c5.xlarge", true).await;
    w.proxy.add_rule("spot-price", rules::spot_price_history("0.068000"));
    // EC2 answers the first read of whether the instance is Spot 8 s late.
    let reads = spot_or_not_reads(&w);
    let first = std::sync::atomic::AtomicBool::new(true);
    w.proxy.add_rule("slow-describe-instances", move |call| {
        if by_instance_id(call) && first.swap(false, std::sync::atomic::Ordering::SeqCst) {
            Verdict::Delay(Duration::from_secs(8))
        } else {
            Verdict::Forward
        }
    });
    let cfg = w
        .host_config()
        .cluster_profile("p", cluster_props("gocd-a", &[("CapacityProviderStrategy", "ci-asg")]))
        .elastic_profile("small", "p", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    let slow = host.add_job(JobSpec::new("small", Duration::from_secs(2))).await;
    host.wait_until("the first job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    let line = host.cost_line(slow).await;
    assert!(line.contains("cost not known") && line.contains("could not be described"), "{line}");
    let next = host.add_job(JobSpec::new("small", Duration::from_secs(2))).await;
    host.wait_until("the second job completed", Duration::from_secs(120), |s| s.all_completed()).await;
    assert_all_done(&host, &sim, Duration::from_secs(60)).await;
    let line = host.cost_line(next).await;
    assert!(line.contains("(c5.xlarge, Spot at $0.0680 an hour, us-east-1), reserving 14 % of it: $"), "{line}");
    let reads = reads.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(reads, 1, "the slow read went on and was kept: no second read");
    assert_eq!(w.proxy.count("ec2:DescribeSpotPriceHistory"), 1, "the Spot price read once");
    w.finish(host, sim, "jobs=2 slow_read_s=8").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn spot_refused_for_capacity_falls_back_to_the_strategys_next_provider() {
    let mut w = Scenario::new("capacity_spot_fallback").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    w.proxy.add_rule("spot-capacity", rules::fargate_spot_capacity_refused());
    let strategy = "FARGATE_SPOT:1\nFARGATE:0";
    let cfg = w
        .host_config()
        .cluster_profile("p", cluster_props("gocd-a", &[("CapacityProviderStrategy", strategy)]))
        .elastic_profile("small", "p", elastic_props());
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    host.add_jobs(JobSpec::new("small", Duration::from_secs(2)), 3).await;
    host.wait_until("the three jobs completed", Duration::from_secs(90), |s| s.all_completed()).await;
    assert_all_done(&host, &sim, Duration::from_secs(60)).await;

    let log = w.proxy.log();
    let provider = |r: &world::proxy::CallRecord| {
        r.json.as_ref().and_then(|b| b["capacityProviderStrategy"][0]["capacityProvider"].as_str().map(str::to_string))
    };
    let runs: Vec<_> = log.iter().filter(|r| r.key() == "ecs:RunTask").collect();
    assert!(runs.iter().all(|r| r.json.as_ref().is_some_and(|b| b.get("launchType").is_none())), "never a launch type");
    let refused = runs.iter().filter(|r| r.outcome == Outcome::Answered).count();
    let launched: Vec<Option<String>> =
        runs.iter().filter(|r| r.outcome == Outcome::Forwarded).map(|r| provider(r)).collect();
    assert_eq!(refused, 3, "each job asked FARGATE_SPOT first");
    assert_eq!(launched, vec![Some("FARGATE".to_string()); 3], "and ran through FARGATE");
    w.finish(host, sim, &format!("spot_refused={refused}")).await;
}

/// An ECS Managed Instances provider `provider` of `cluster`, with `instances` instances
/// registered for it. moto knows no such providers: the proxy describes it as AWS would
/// (`Proxy::managed_instances_provider`), moto's cluster lists it (moto takes any name), and
/// moto places its tasks on the registered instances, as ECS would on the instances it manages.
async fn managed_instances_capacity(w: &Scenario, cluster: &str, provider: &str, instances: usize) {
    w.proxy.managed_instances_provider(provider);
    let ecs = aws_sdk_ecs::Client::new(&w.base);
    ecs.put_cluster_capacity_providers()
        .cluster(cluster)
        .capacity_providers(provider)
        .set_default_capacity_provider_strategy(Some(vec![]))
        .send()
        .await
        .expect("providers of the cluster");
    register_instances(w, cluster, instances, "c5.xlarge", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_managed_instances_provider_runs_jobs_through_it_with_managed_instances_task_definitions() {
    let mut w = Scenario::new("capacity_managed_instances").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    managed_instances_capacity(&w, "gocd-a", "ci-mi", 2).await;
    let mut refused = elastic_props();
    refused.extend(world::host::props(&[("EphemeralStorageGiB", "50")]));
    let cfg = w
        .host_config()
        .cluster_profile("p", cluster_props("gocd-a", &[("CapacityProviderStrategy", "ci-mi"), ("MaxAgents", "10")]))
        .elastic_profile("small", "p", elastic_props())
        .elastic_profile("big-disk", "p", refused);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    host.add_jobs(JobSpec::new("small", Duration::from_secs(2)), 6).await;
    host.wait_until("all six jobs completed", Duration::from_secs(120), |s| s.all_completed()).await;
    // The cost line is written while the plugin handles job-completion: read the console once
    // every job-completion was answered, not when GoCD marked the jobs done.
    host.wait_until("job-completion answered for all six", Duration::from_secs(60), |s| {
        s.jobs.iter().filter(|j| j.state != JobState::Waiting).all(|j| j.completion_code.is_some())
    })
    .await;
    let console = host.console_log(JobHandle(0)).join("\n");
    assert!(
        console.contains("cost not known: it ran on ECS Managed Instances (ci-mi), whose management fee the price table does not hold"),
        "{console}"
    );

    // A key ECS Managed Instances refuses: no task, and the job's console says which and why.
    let big = host.add_job(JobSpec::new("big-disk", Duration::from_secs(2))).await;
    host.wait_until("the refusal in the job's console", Duration::from_secs(60), |s| {
        s.console.iter().any(|c| c.job == Some(big) && c.text.contains("EphemeralStorageGiB"))
    })
    .await;
    let console = host.console_log(big).join("\n");
    assert!(
        console.contains("EphemeralStorageGiB cannot be used where ECS Managed Instances may run the task")
            && console.contains("ci-mi"),
        "{console}"
    );
    assert_eq!(host.job_state(big), JobState::Waiting);
    host.wait_until("server health names the key too", Duration::from_secs(60), |s| {
        s.health_ever_mentions("EphemeralStorageGiB")
    })
    .await;
    host.cancel_job(big);
    assert_all_done(&host, &sim, Duration::from_secs(60)).await;

    let log = w.proxy.log();
    let run_tasks: Vec<_> = log.iter().filter(|r| r.key() == "ecs:RunTask").filter_map(|r| r.json.clone()).collect();
    assert_eq!(run_tasks.len(), 6, "one RunTask a job, none for the refused profile");
    for body in &run_tasks {
        assert!(body.get("launchType").is_none(), "{body}");
        let strategy = body["capacityProviderStrategy"].as_array().cloned().unwrap_or_default();
        assert_eq!(strategy.len(), 1, "{body}");
        assert_eq!(strategy[0]["capacityProvider"], "ci-mi", "{body}");
        assert!(body["networkConfiguration"]["awsvpcConfiguration"].is_object(), "awsvpc: {body}");
    }
    let registered = w.proxy.requests("ecs", "RegisterTaskDefinition");
    assert_eq!(registered.len(), 1, "one task definition, none for the refused profile");
    assert_eq!(registered[0]["requiresCompatibilities"], serde_json::json!(["FARGATE", "MANAGED_INSTANCES"]));
    assert_eq!(registered[0]["networkMode"], "awsvpc");
    assert_eq!(w.proxy.count("ecs:DescribeCapacityProviders"), 1, "the kinds learned once");
    assert_eq!(w.proxy.count("ecs:DescribeContainerInstances"), 0, "nothing described that is not priced");
    let launched_by_us = log.iter().filter(|r| r.service == "ec2" && r.operation == "RunInstances").count();
    assert_eq!(launched_by_us, 0, "the plugin launched no instance");
    let on_mi =
        sim.with_state(|s| s.tasks.values().filter(|t| t.capacity_provider.as_deref() == Some("ci-mi")).count());
    assert_eq!(on_mi, 6, "every task ran through the Managed Instances provider");
    let report = host.cluster_status_report("p").await.expect("cluster status report");
    let view = report.body["view"].as_str().unwrap_or_default().to_string();
    assert!(view.contains("ci-mi: ECS Managed Instances, ACTIVE"), "the report names the kind and status");
    w.finish(host, sim, "jobs=6 run_task=6 run_instances=0 refused=1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_given_task_definition_without_managed_instances_is_refused_naming_what_to_add() {
    let mut w = Scenario::new("capacity_given_td_managed_instances").await;
    let base = w.base.clone();
    w.cluster("base", &base, "gocd-a").await;
    managed_instances_capacity(&w, "gocd-a", "ci-mi", 1).await;
    let td =
        world::moto::register_team_task_definition(&w.base, "team-fargate-only", world::profiles::IMAGE, &["FARGATE"])
            .await;
    let given = world::host::props(&[
        ("Image", world::profiles::IMAGE),
        ("TaskDefinitionArn", td.as_str()),
        ("AgentContainerName", "agent"),
    ]);
    let cfg = w
        .host_config()
        .cluster_profile("p", cluster_props("gocd-a", &[("CapacityProviderStrategy", "ci-mi")]))
        .elastic_profile("given", "p", given);
    let host = GoCdHost::launch(cfg).await;
    let sim = w.agents(&host, SimPolicy::default());

    let job = host.add_job(JobSpec::new("given", Duration::from_secs(2))).await;
    host.wait_until("the refusal in the job's console", Duration::from_secs(60), |s| {
        s.console.iter().any(|c| c.job == Some(job) && c.text.contains("Add MANAGED_INSTANCES"))
    })
    .await;
    let console = host.console_log(job).join("\n");
    assert!(
        console.contains(&format!("task definition {td} cannot run on every capacity provider"))
            && console.contains(
                "ci-mi (ECS Managed Instances) needs MANAGED_INSTANCES; its requiresCompatibilities: FARGATE"
            )
            && console.contains("register a revision with requiresCompatibilities FARGATE, MANAGED_INSTANCES"),
        "{console}"
    );
    assert_eq!(host.job_state(job), JobState::Waiting);
    host.wait_until("server health names the task definition", Duration::from_secs(60), |s| {
        s.health_ever_mentions("team-fargate-only")
    })
    .await;
    host.cancel_job(job);
    assert_all_done(&host, &sim, Duration::from_secs(60)).await;
    assert_eq!(w.proxy.count("ecs:RunTask"), 0, "no RunTask left to fail on ci-mi");
    assert_eq!(w.proxy.count("ecs:RegisterTaskDefinition"), 0, "the given task definition is used as it is");
    w.finish(host, sim, "refused=1 run_task=0").await;
}
