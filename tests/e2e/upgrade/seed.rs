//! Leaving in moto and in the simulated GoCD what one recorded version left when the operator
//! replaced it: every example of its file, in its state, with the names and tags that version
//! wrote (its patterns, filled with this world's server id, keys and jobs; every other value,
//! such as a profile's hash, as the example has it), made by the calls that version made
//! (RegisterTaskDefinition, RunInstances, RunTask, StartTask), through the proxy so that AWS's
//! rules hold for them too.
//!
//! States (`tests/data/upgrades/README.md`, "States"):
//! - `task_definition` `registered`: the family, with the agent container;
//! - `ec2_instance` `running`: launched and registered as a container instance of its cluster;
//!   `stopped`: the same, then stopped (the stopped pool, `Ec2StoppedInstances`);
//! - `task` `busy`: its agent registered with GoCD and building the job its tags name;
//!   `kept`: registered and idle after that job completed (warm starts keep it for the next);
//!   `warm`: registered and idle, never given a job; its tags name the job whose unused
//!   registration key started it (here one that completed).
//!
//! A state or kind this module does not know fails the test: a new version's file that adds one
//! needs its seeding here.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{IamInstanceProfileSpecification, InstanceType, ResourceType, Tag, TagSpecification};
use aws_sdk_ecs::types::{
    AssignPublicIp, AwsVpcConfiguration, Compatibility, ContainerDefinition, ContainerOverride, KeyValuePair,
    LaunchType, NetworkConfiguration, NetworkMode, TaskOverride,
};
use base64::Engine;

use super::schema::{Example, Kind, Schema};
use crate::world::ec2::InstanceSimulator;
use crate::world::host::{JobHandle, JobState, PLUGIN_ID};
use crate::world::moto::{self, aws_error_text};
use crate::world::*;

/// The agent container of the task definitions the plugin registers (what GoCD's agent image
/// runs in; the overrides name it).
const AGENT_CONTAINER: &str = "gocd-agent";

/// The placeholders of a task the seeding fills from the GoCD job it makes for it, and the
/// names it launches the task with: a version's file must keep them.
const JOB_VALUES: [&str; 7] =
    ["job_id", "pipeline", "pipeline_counter", "stage", "stage_counter", "job", "agent_nonce"];
const TASK_NAMES: [&str; 3] = ["started_by", "task_definition_family", "agent_id"];

/// What was seeded.
#[derive(Debug, Default)]
pub struct Seeded {
    pub agents: Vec<SeededAgent>,
    pub instances: Vec<SeededInstance>,
    /// The task definition families registered.
    pub families: Vec<String>,
}

/// An agent left running.
#[derive(Debug, Clone)]
pub struct SeededAgent {
    /// Its example in the version's file.
    pub example: String,
    /// `busy`, `kept` or `warm`.
    pub state: String,
    pub agent_id: String,
    pub task_arn: String,
    /// Busy: the job it builds; kept: the job it ran; warm: the job whose key started it.
    pub job: JobHandle,
}

/// An instance left running or stopped.
#[derive(Debug, Clone)]
pub struct SeededInstance {
    pub example: String,
    /// `running` or `stopped`.
    pub state: String,
    pub id: String,
    pub container_instance_arn: String,
}

/// Leaves what the version of `schema` left: task definitions, then instances, then tasks and
/// their agents; busy agents then build their jobs (for `busy_for` from now).
///
/// # Panics
/// On an example it cannot seed, or a call moto refuses.
pub async fn seed(
    schema: &Schema,
    w: &Scenario,
    host: &GoCdHost,
    sim: &AgentSimulator,
    ec2: &InstanceSimulator,
    busy_for: Duration,
) -> Seeded {
    // Through the proxy, signed with the plugin's keys, as the old plugin's calls were.
    let cfg = moto::sdk_config_for(&w.proxy.endpoint(), &moto::test_credentials(), &schema.world.region).await;
    let ecs = aws_sdk_ecs::Client::new(&cfg);
    let ec2c = aws_sdk_ec2::Client::new(&cfg);
    let mut seeded = Seeded::default();
    let order = |state: &str| match state {
        "registered" => 0,
        "running" | "stopped" => 1,
        _ => 2,
    };
    let mut examples: Vec<(&String, &Example)> = schema.examples.iter().collect();
    examples.sort_by_key(|(name, e)| (order(&e.state), name.to_string()));
    let mut tasks = Vec::new();
    for (name, example) in examples {
        match (example.kind.as_str(), example.state.as_str()) {
            ("task_definition", "registered") => {
                seeded.families.push(register(schema, &ecs, host, example).await);
            }
            ("ec2_instance", "running" | "stopped") => {
                seeded.instances.push(launch(schema, &ec2c, host, ec2, name, example).await);
            }
            ("task", "busy" | "kept" | "warm") => {
                let agent = start_task(schema, &ecs, w, host, &seeded, name, example).await;
                tasks.push(agent);
            }
            (kind, state) => panic!(
                "{}: example {name} is a {kind} in state {state}, which the adoption test cannot leave yet: \
                 teach tests/e2e/upgrade/seed.rs to leave it as that version did",
                schema.file.display()
            ),
        }
    }
    let arns: Vec<String> = tasks.iter().map(|a: &SeededAgent| a.task_arn.clone()).collect();
    sim.wait_until("the agents of the seeded tasks registered with GoCD", Duration::from_secs(30), |s| {
        arns.iter().all(|a| s.tasks.get(a).is_some_and(|t| matches!(t.registration, Some(Ok(())))))
    })
    .await;
    host.as_operator(|s| {
        let now = Instant::now();
        for a in &tasks {
            let job = &mut s.jobs[a.job.0];
            match a.state.as_str() {
                "busy" => {
                    job.state = JobState::Running { agent_id: a.agent_id.clone() };
                    job.started_at = Some(now);
                    job.spec.duration = busy_for;
                    if let Some(agent) = s.agents.iter_mut().find(|g| g.agent_id == a.agent_id) {
                        agent.agent_state = "Building";
                        agent.build_state = "Building";
                        agent.job = Some(a.job);
                    }
                }
                // A kept agent ran the job; a warm agent's key came from a job another agent
                // (gone since) ran.
                state => {
                    let ran_it = if state == "kept" { a.agent_id.clone() } else { format!("{}-gone", a.agent_id) };
                    job.state = JobState::Completed { agent_id: ran_it };
                    job.started_at = Some(now);
                    job.completed_at = Some(now);
                    job.completion_code = Some(200);
                }
            }
        }
    });
    seeded.agents = tasks;
    seeded
}

/// The example's values: those it was recorded with, then this world's inputs and what the
/// version derives from them (server id, keys, `startedBy`'s hash).
fn values_of(schema: &Schema, kind: &Kind, example: &Example, host: &GoCdHost) -> BTreeMap<String, String> {
    let mut values = schema.compare(kind, &example.names, &example.tags).bound;
    values.extend(schema.world_values(&schema.cluster_profile_of(example), host.server_id()));
    values
}

/// The names and tags of `kind` the example has (every one the kind always has, and those it
/// has only sometimes when the example has them), rendered with `values`.
fn rendered(
    schema: &Schema,
    kind: &Kind,
    example: &Example,
    values: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let render = |fields: &BTreeMap<String, super::schema::Field>, had: &BTreeMap<String, String>| {
        fields
            .iter()
            .filter(|(k, f)| f.required() || had.contains_key(*k))
            .map(|(k, f)| (k.clone(), schema.render(f.pattern(), values)))
            .collect::<BTreeMap<String, String>>()
    };
    (render(&kind.names, &example.names), render(&kind.tags, &example.tags))
}

fn ecs_tags(tags: &BTreeMap<String, String>) -> Vec<aws_sdk_ecs::types::Tag> {
    tags.iter().map(|(k, v)| aws_sdk_ecs::types::Tag::builder().key(k).value(v).build()).collect()
}

/// RegisterTaskDefinition of the example's family: on Fargate awsvpc with task-level sizes, on
/// EC2 bridge with the container's; the agent container runs the elastic profile's image.
async fn register(schema: &Schema, ecs: &aws_sdk_ecs::Client, host: &GoCdHost, example: &Example) -> String {
    let kind = schema.kind("task_definition");
    let values = values_of(schema, kind, example, host);
    let (names, tags) = rendered(schema, kind, example, &values);
    let family =
        names.get("family").unwrap_or_else(|| panic!("{}: a task definition without a family", schema.file.display()));
    let elastic = &schema
        .elastic_profile(example.elastic_profile.as_deref().expect("a task definition's elastic profile"))
        .properties;
    let prop = |k: &str| elastic.get(k).cloned().unwrap_or_else(|| panic!("the elastic profile has no {k}"));
    let (cpu, memory) = (prop("Cpu"), prop("Memory"));
    // The agent container gets the profile's size (no sidecars), as the plugin's do.
    let container = ContainerDefinition::builder()
        .name(AGENT_CONTAINER)
        .image(prop("Image"))
        .essential(true)
        .cpu(cpu.parse().expect("Cpu"))
        .memory(memory.parse().expect("Memory"))
        .build();
    let request = if schema.is_ec2(&schema.cluster_profile_of(example)) {
        ecs.register_task_definition().requires_compatibilities(Compatibility::Ec2).network_mode(NetworkMode::Bridge)
    } else {
        ecs.register_task_definition()
            .requires_compatibilities(Compatibility::Fargate)
            .network_mode(NetworkMode::Awsvpc)
            .cpu(cpu)
            .memory(memory)
    };
    request
        .container_definitions(container)
        .family(family)
        .set_tags(Some(ecs_tags(&tags)))
        .send()
        .await
        .unwrap_or_else(|e| panic!("RegisterTaskDefinition {family}: {}", aws_error_text(&e)));
    family.clone()
}

/// RunInstances of one instance of the profile's type and AMI, joining its cluster, with the
/// example's tags; waits until its ECS agent registered it, and stops it when the example is
/// stopped.
async fn launch(
    schema: &Schema,
    ec2c: &aws_sdk_ec2::Client,
    host: &GoCdHost,
    sim: &InstanceSimulator,
    name: &str,
    example: &Example,
) -> SeededInstance {
    let kind = schema.kind("ec2_instance");
    let values = values_of(schema, kind, example, host);
    let (_, tags) = rendered(schema, kind, example, &values);
    let profile = &schema.world.cluster_profiles[&schema.cluster_profile_of(example)];
    let prop = |k: &str| profile.get(k).cloned().unwrap_or_else(|| panic!("the EC2 cluster profile has no {k}"));
    let instance_type = prop("Ec2InstanceType").split(',').next().unwrap_or_default().trim().to_string();
    let ami = prop("Ec2AmiId").split(',').next().unwrap_or_default().trim().to_string();
    let script = format!("#!/bin/bash\ncat <<'EOF' >> /etc/ecs/ecs.config\nECS_CLUSTER={}\nEOF\n", prop("ClusterName"));
    let tags: Vec<Tag> = tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect();
    let out = ec2c
        .run_instances()
        .image_id(&ami)
        .instance_type(InstanceType::from(instance_type.as_str()))
        .min_count(1)
        .max_count(1)
        .iam_instance_profile(IamInstanceProfileSpecification::builder().name(prop("Ec2InstanceProfile")).build())
        .user_data(base64::engine::general_purpose::STANDARD.encode(script))
        .tag_specifications(
            TagSpecification::builder().resource_type(ResourceType::Instance).set_tags(Some(tags)).build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("RunInstances ({name}): {}", aws_error_text(&e)));
    let id = out.instances().first().and_then(|i| i.instance_id()).expect("an instance").to_string();
    sim.wait_until("the seeded instance registered with its cluster", Duration::from_secs(30), |s| {
        s.instances.get(&id).is_some_and(|i| i.container_instance_arn.is_some())
    })
    .await;
    let container_instance_arn =
        sim.with_state(|s| s.instances[&id].container_instance_arn.clone()).expect("registered");
    if example.state == "stopped" {
        ec2c.stop_instances()
            .instance_ids(&id)
            .send()
            .await
            .unwrap_or_else(|e| panic!("StopInstances ({name}): {}", aws_error_text(&e)));
        sim.wait_until("the seeded instance stopped", Duration::from_secs(30), |s| {
            s.instances.get(&id).is_some_and(|i| i.stops == 1)
        })
        .await;
    }
    SeededInstance { example: name.to_string(), state: example.state.clone(), id, container_instance_arn }
}

/// The GoCD job of a task example and the agent's registration key: busy and kept, the key of
/// the job's create-agent; warm, a key of a later create-agent of its job that no agent used.
async fn job_of(host: &GoCdHost, example: &Example, environment: Option<&String>) -> (JobHandle, String) {
    let profile = example.elastic_profile.as_deref().expect("a task's elastic profile");
    let mut spec = JobSpec::new(profile, Duration::from_secs(1));
    if let Some(env) = environment {
        spec = spec.in_environment(env);
    }
    // The plugin is not running: GoCD's create-agent goes unanswered, as it did while the
    // operator replaced the plugin.
    let h = host.add_job(spec).await;
    let key = match example.state.as_str() {
        "warm" => host.issue_key(Some(h)),
        _ => host.with_state(|s| s.job(h).keys[0].clone()),
    };
    (h, key)
}

/// RunTask (Fargate) or StartTask (on the example's instance) of a task example, with its
/// `startedBy`, family, tags and the agent's registration overrides.
async fn start_task(
    schema: &Schema,
    ecs: &aws_sdk_ecs::Client,
    w: &Scenario,
    host: &GoCdHost,
    seeded: &Seeded,
    name: &str,
    example: &Example,
) -> SeededAgent {
    let kind = schema.kind("task");
    for v in JOB_VALUES {
        assert!(
            schema.values.contains_key(v),
            "{}: tests/e2e/upgrade/seed.rs fills {{{v}}}, which it no longer has",
            schema.file.display()
        );
    }
    for n in TASK_NAMES {
        assert!(
            kind.names.contains_key(n),
            "{}: tests/e2e/upgrade/seed.rs launches by the task's name {n}, which it no longer has",
            schema.file.display()
        );
    }
    let mut values = values_of(schema, kind, example, host);
    let (h, key) = job_of(host, example, values.get("environment")).await;
    let job = host.job_identifier(h);
    let nonce = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    for (k, v) in [
        ("job_id", job.job_id.to_string()),
        ("pipeline", job.pipeline_name),
        ("pipeline_counter", job.pipeline_counter.to_string()),
        ("stage", job.stage_name),
        ("stage_counter", job.stage_counter),
        ("job", job.job_name),
        ("agent_nonce", nonce),
    ] {
        values.insert(k.to_string(), v);
    }
    let (names, tags) = rendered(schema, kind, example, &values);
    let family = &names["task_definition_family"];
    assert!(
        seeded.families.contains(family),
        "{}: example {name} runs family {family}, which no task_definition example registers",
        schema.file.display()
    );
    let agent_id = names["agent_id"].clone();
    let mut env = vec![
        ("GO_EA_SERVER_URL", "https://gocd.test/go".to_string()),
        ("GO_EA_AUTO_REGISTER_KEY", key),
        ("GO_EA_AUTO_REGISTER_ELASTIC_AGENT_ID", agent_id.clone()),
        ("GO_EA_AUTO_REGISTER_ELASTIC_PLUGIN_ID", PLUGIN_ID.to_string()),
    ];
    // `{environment}` has a value only when the example has the tag that names it.
    if let Some(e) = values.get("environment") {
        env.push(("GO_EA_AUTO_REGISTER_ENVIRONMENT", e.clone()));
    }
    let container = ContainerOverride::builder()
        .name(AGENT_CONTAINER)
        .set_environment(Some(env.iter().map(|(k, v)| KeyValuePair::builder().name(*k).value(v).build()).collect()))
        .build();
    let overrides = TaskOverride::builder().container_overrides(container).build();
    let cluster_profile = schema.cluster_profile_of(example);
    let cluster = schema.world.cluster_profiles[&cluster_profile]["ClusterName"].clone();
    let task = if schema.is_ec2(&cluster_profile) {
        let on = example
            .on
            .as_deref()
            .unwrap_or_else(|| panic!("{}: example {name} names no instance (`on`)", schema.file.display()));
        let instance = seeded.instances.iter().find(|i| i.example == on && i.state == "running").unwrap_or_else(|| {
            panic!("{}: example {name} runs on {on}, which is no running ec2_instance example", schema.file.display())
        });
        let out = ecs
            .start_task()
            .cluster(&cluster)
            .task_definition(family)
            .container_instances(&instance.container_instance_arn)
            .started_by(&names["started_by"])
            .overrides(overrides)
            .set_tags(Some(ecs_tags(&tags)))
            .send()
            .await
            .unwrap_or_else(|e| panic!("StartTask ({name}): {}", aws_error_text(&e)));
        out.tasks().first().cloned()
    } else {
        let network = moto::default_network(&w.base).await;
        let vpc = AwsVpcConfiguration::builder()
            .set_subnets(Some(network.subnet_ids))
            .security_groups(network.security_group_id)
            .assign_public_ip(AssignPublicIp::Disabled)
            .build()
            .expect("an awsvpc configuration");
        let out = ecs
            .run_task()
            .cluster(&cluster)
            .task_definition(family)
            .launch_type(LaunchType::Fargate)
            .count(1)
            .started_by(&names["started_by"])
            .network_configuration(NetworkConfiguration::builder().awsvpc_configuration(vpc).build())
            .overrides(overrides)
            .set_tags(Some(ecs_tags(&tags)))
            .send()
            .await
            .unwrap_or_else(|e| panic!("RunTask ({name}): {}", aws_error_text(&e)));
        out.tasks().first().cloned()
    };
    let task_arn =
        task.and_then(|t| t.task_arn().map(str::to_string)).unwrap_or_else(|| panic!("{name}: no task started"));
    SeededAgent { example: name.to_string(), state: example.state.clone(), agent_id, task_arn, job: h }
}
