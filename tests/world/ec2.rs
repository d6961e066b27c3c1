//! `InstanceSimulator`: plays the ECS agent on the EC2 instances the plugin launches.
//!
//! No instance boots in moto, so this simulator watches each fleet's account every ~300 ms
//! (DescribeInstances with the plugin's `gocd:server-id` tag, through the test's own client) and,
//! after a delay, registers each running instance as a container instance of the cluster its user
//! data names (`ECS_CLUSTER=` or `Initialize-ECSAgent -Cluster '...'`), with an instance identity
//! document `{"instanceId", "region"}` and, as total resources, what the ECS agent registers for
//! the instance's type ([`super::aws_rules::ecs_registers`] of the vCPUs and MiB moto's
//! DescribeInstanceTypes gives it). moto ignores them and registers 4096 CPU units and 7482 MiB
//! whatever the type; the proxy answers the container instance with its type's figures
//! (`ecs.container_instance_resources`, `tests/world/README.md`). It can be told to let instances
//! never register. The plugin deregisters container instances itself (moto leaves them ACTIVE
//! when the instance terminates).
//!
//! A stopped instance (the plugin's stopped pool, `Ec2StoppedInstances`) is not alive while it
//! is stopped, and alive again once started, with a count of its starts. The real ECS agent,
//! whose state file survives on the kept root volume, comes back as the same container instance;
//! moto ties no container instance to an EC2 state (it stays as the plugin left it, its agent
//! "connected" throughout), so the simulator keeps the ARN it registered and does not register a
//! second one: the same container instance, as ECS would show it once the agent is back.
//!
//! It keeps the figures the tests check: every instance seen (type, spot, tags, when it
//! registered and when it went), and the most instances alive at once.
//!
//! [`create_instance_profile`] creates an IAM instance profile in an account through moto's IAM
//! query API (RunInstances refuses unknown instance profiles).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{Filter, InstanceAttributeName};
use aws_sdk_ecs::types::Resource;
use base64::Engine;
use tokio::task::JoinHandle;

use super::agents::Fleet;
use super::http::{self, HttpRequest};
use super::moto::{aws_error_text, REGION};

/// How the simulated ECS agents behave.
#[derive(Debug, Clone)]
pub struct Ec2Policy {
    /// Time from first seeing a running instance to registering it (boot, ECS agent start).
    pub register_delay: Duration,
    /// How many of the first instances seen never register.
    pub never_register_first: usize,
}

impl Default for Ec2Policy {
    fn default() -> Self {
        Ec2Policy { register_delay: Duration::from_secs(2), never_register_first: 0 }
    }
}

/// An instance the simulator has seen.
#[derive(Debug, Clone)]
pub struct SeenInstance {
    pub fleet: usize,
    pub id: String,
    pub instance_type: String,
    pub spot: bool,
    pub tags: BTreeMap<String, String>,
    pub iam_instance_profile: Option<String>,
    pub key_name: Option<String>,
    pub subnet_id: Option<String>,
    pub security_groups: Vec<String>,
    pub http_tokens: Option<String>,
    pub user_data: String,
    /// The cluster its user data joins.
    pub cluster: Option<String>,
    pub state: String,
    /// Order in which it was first seen (0 for the first).
    pub order: usize,
    pub first_seen: Instant,
    /// EC2's `LaunchTime`: the simulator may first see an instance well after it (its polls
    /// wait on moto, which a loaded machine slows).
    pub launched_at: Option<std::time::SystemTime>,
    pub never_registers: bool,
    pub registered_at: Option<Instant>,
    pub container_instance_arn: Option<String>,
    pub gone_at: Option<Instant>,
    /// Times it was seen stopped, and started again after.
    pub stops: usize,
    pub starts: usize,
}

impl SeenInstance {
    /// Pending or running.
    pub fn alive(&self) -> bool {
        self.gone_at.is_none()
    }
}

/// What the simulator knows; read it with [`InstanceSimulator::with_state`].
#[derive(Debug, Default)]
pub struct Ec2SimState {
    pub policy: Option<Ec2Policy>,
    pub instances: BTreeMap<String, SeenInstance>,
    pub alive_now: usize,
    pub max_alive: usize,
    pub polls: u64,
    pub errors: Vec<String>,
}

impl Ec2SimState {
    /// Instances seen in one fleet.
    pub fn of_fleet(&self, fleet: usize) -> Vec<&SeenInstance> {
        self.instances.values().filter(|i| i.fleet == fleet).collect()
    }

    /// Instances still pending or running.
    pub fn alive(&self) -> Vec<&SeenInstance> {
        self.instances.values().filter(|i| i.alive()).collect()
    }
}

struct Inner {
    fleets: Vec<Fleet>,
    server_id: String,
    ec2: Vec<aws_sdk_ec2::Client>,
    ecs: Vec<aws_sdk_ecs::Client>,
    state: Mutex<Ec2SimState>,
    /// What an instance of each type registers (CPU units, MiB), as asked of moto.
    registers: Mutex<BTreeMap<String, (i32, i32)>>,
}

/// The simulated ECS agents of the plugin's instances; stops polling when dropped.
pub struct InstanceSimulator {
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for InstanceSimulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceSimulator").field("fleets", &self.inner.fleets.len()).finish()
    }
}

impl Drop for InstanceSimulator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const POLL: Duration = Duration::from_millis(300);

impl InstanceSimulator {
    /// Starts watching the fleets' accounts for instances tagged with `server_id`.
    pub fn start(fleets: Vec<Fleet>, server_id: &str, policy: Ec2Policy) -> InstanceSimulator {
        let inner = Arc::new(Inner {
            ec2: fleets.iter().map(|f| aws_sdk_ec2::Client::new(&f.config)).collect(),
            ecs: fleets.iter().map(|f| aws_sdk_ecs::Client::new(&f.config)).collect(),
            fleets,
            server_id: server_id.to_string(),
            state: Mutex::new(Ec2SimState { policy: Some(policy), ..Ec2SimState::default() }),
            registers: Mutex::default(),
        });
        let i = inner.clone();
        let task = tokio::spawn(async move {
            loop {
                i.poll().await;
                tokio::time::sleep(POLL).await;
            }
        });
        InstanceSimulator { inner, task }
    }

    /// Reads the state.
    pub fn with_state<R>(&self, f: impl FnOnce(&Ec2SimState) -> R) -> R {
        f(&self.inner.state.lock().unwrap())
    }

    /// Instances seen so far.
    pub fn instances(&self) -> Vec<SeenInstance> {
        self.with_state(|s| s.instances.values().cloned().collect())
    }

    /// The most instances alive at once.
    pub fn max_alive(&self) -> usize {
        self.with_state(|s| s.max_alive)
    }

    /// Polls until `pred` holds.
    ///
    /// # Panics
    /// After `timeout`, with `what` and the instances seen.
    pub async fn wait_until(&self, what: &str, timeout: Duration, pred: impl Fn(&Ec2SimState) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.with_state(&pred) {
                return;
            }
            if Instant::now() > deadline {
                let summary = self.with_state(|s| {
                    let rows: Vec<String> = s
                        .instances
                        .values()
                        .map(|i| {
                            format!(
                                "{} fleet={} state={} registered={} gone={}",
                                i.id,
                                i.fleet,
                                i.state,
                                i.registered_at.is_some(),
                                i.gone_at.is_some()
                            )
                        })
                        .collect();
                    format!(
                        "{} polls, last errors {:?}\n  {}",
                        s.polls,
                        s.errors.iter().rev().take(5).collect::<Vec<_>>(),
                        rows.join("\n  ")
                    )
                });
                panic!("timed out after {timeout:?} waiting for {what} (instance simulator: {summary})");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Inner {
    async fn poll(&self) {
        for i in 0..self.fleets.len() {
            if let Err(e) = self.observe(i).await {
                self.state.lock().unwrap().errors.push(format!("{}: {e}", self.fleets[i].label));
            }
        }
        let due: Vec<(usize, String, String, String)> = {
            let st = self.state.lock().unwrap();
            let delay = st.policy.as_ref().map_or(Duration::ZERO, |p| p.register_delay);
            st.instances
                .values()
                .filter(|i| i.alive() && i.state == "running" && i.registered_at.is_none() && !i.never_registers)
                .filter(|i| i.first_seen.elapsed() >= delay)
                .map(|i| {
                    let cluster = i.cluster.clone().unwrap_or_else(|| self.fleets[i.fleet].cluster.clone());
                    (i.fleet, i.id.clone(), cluster, i.instance_type.clone())
                })
                .collect()
        };
        for (fleet, id, cluster, instance_type) in due {
            let result = self.register(fleet, &id, &cluster, &instance_type).await;
            let mut st = self.state.lock().unwrap();
            match result {
                Ok(arn) => {
                    if let Some(i) = st.instances.get_mut(&id) {
                        i.registered_at = Some(Instant::now());
                        i.container_instance_arn = Some(arn);
                    }
                }
                Err(e) => st.errors.push(format!("register {id}: {e}")),
            }
        }
        let mut st = self.state.lock().unwrap();
        st.polls += 1;
        st.alive_now = st.instances.values().filter(|i| i.alive()).count();
        st.max_alive = st.max_alive.max(st.alive_now);
    }

    /// moto attaches RunInstances' `IamInstanceProfile` to the first instance of a reservation
    /// only, and just after answering; EC2 gives it to every instance launched. Associates it with
    /// the others, as EC2 would have, so their descriptions (and the agents' roles) are right.
    /// Returns each instance's profile ARN.
    async fn attach_the_reservations_profile(
        &self,
        fleet: usize,
        reservation: &aws_sdk_ec2::types::Reservation,
    ) -> Result<Vec<(String, String)>, String> {
        let instances = reservation.instances();
        let Some(arn) = instances.iter().find_map(|i| i.iam_instance_profile().and_then(|p| p.arn())) else {
            return Ok(Vec::new());
        };
        let mut profiles: Vec<(String, String)> = instances
            .iter()
            .filter_map(|i| Some((i.instance_id()?.to_string(), i.iam_instance_profile()?.arn()?.to_string())))
            .collect();
        let alive = |i: &&aws_sdk_ec2::types::Instance| {
            i.state().and_then(|s| s.name()).is_some_and(|n| matches!(n.as_str(), "pending" | "running"))
        };
        for inst in instances.iter().filter(|i| i.iam_instance_profile().is_none()).filter(alive) {
            let Some(id) = inst.instance_id() else { continue };
            self.ec2[fleet]
                .associate_iam_instance_profile()
                .instance_id(id)
                .iam_instance_profile(aws_sdk_ec2::types::IamInstanceProfileSpecification::builder().arn(arn).build())
                .send()
                .await
                .map_err(|e| format!("AssociateIamInstanceProfile {id}: {}", aws_error_text(&e)))?;
            profiles.push((id.to_string(), arn.to_string()));
        }
        Ok(profiles)
    }

    async fn observe(&self, fleet: usize) -> Result<(), String> {
        let out = self.ec2[fleet]
            .describe_instances()
            .filters(Filter::builder().name("tag:gocd:server-id").values(&self.server_id).build())
            .send()
            .await
            .map_err(|e| format!("DescribeInstances: {}", aws_error_text(&e)))?;
        let mut profiles = std::collections::HashMap::new();
        for reservation in out.reservations() {
            profiles.extend(self.attach_the_reservations_profile(fleet, reservation).await?);
        }
        for inst in out.reservations().iter().flat_map(|r| r.instances()) {
            let Some(id) = inst.instance_id() else {
                continue;
            };
            let state = inst.state().and_then(|s| s.name()).map(|n| n.as_str().to_string()).unwrap_or_default();
            let known = self.state.lock().unwrap().instances.contains_key(id);
            if known {
                let mut st = self.state.lock().unwrap();
                if let Some(seen) = st.instances.get_mut(id) {
                    let alive = state == "pending" || state == "running";
                    if seen.gone_at.is_none() && !alive {
                        seen.gone_at = Some(Instant::now());
                        seen.stops += usize::from(state == "stopping" || state == "stopped");
                    } else if seen.gone_at.is_some() && alive && seen.stops > seen.starts {
                        // Started again from the stopped pool: its agent reconnects as the same
                        // container instance (see the module doc).
                        seen.gone_at = None;
                        seen.starts += 1;
                    }
                    seen.state = state;
                    // moto sets a spot instance's lifecycle after adding it to its reservation:
                    // a look in between sees none, so a later look may still say spot.
                    seen.spot |= inst.instance_lifecycle().is_some_and(|l| l.as_str() == "spot");
                    if seen.iam_instance_profile.is_none() {
                        seen.iam_instance_profile = profiles.get(id).cloned();
                    }
                }
                continue;
            }
            let user_data = self.user_data(fleet, id).await.unwrap_or_default();
            let mut st = self.state.lock().unwrap();
            let order = st.instances.len();
            let never = st.policy.as_ref().is_some_and(|p| order < p.never_register_first);
            let alive = state == "pending" || state == "running";
            st.instances.insert(
                id.to_string(),
                SeenInstance {
                    fleet,
                    id: id.to_string(),
                    instance_type: inst.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
                    spot: inst.instance_lifecycle().is_some_and(|l| l.as_str() == "spot"),
                    tags: inst
                        .tags()
                        .iter()
                        .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
                        .collect(),
                    iam_instance_profile: profiles.get(id).cloned(),
                    key_name: inst.key_name().map(str::to_string),
                    subnet_id: inst.subnet_id().map(str::to_string),
                    security_groups: inst
                        .security_groups()
                        .iter()
                        .filter_map(|g| g.group_id())
                        .map(str::to_string)
                        .collect(),
                    http_tokens: inst.metadata_options().and_then(|m| m.http_tokens()).map(|t| t.as_str().to_string()),
                    cluster: cluster_of(&user_data),
                    user_data,
                    state,
                    order,
                    first_seen: Instant::now(),
                    launched_at: inst.launch_time().and_then(|t| std::time::SystemTime::try_from(*t).ok()),
                    never_registers: never,
                    registered_at: None,
                    container_instance_arn: None,
                    gone_at: (!alive).then(Instant::now),
                    stops: 0,
                    starts: 0,
                },
            );
        }
        Ok(())
    }

    /// The instance's user data in clear text (moto may hand it back decoded or in base64).
    async fn user_data(&self, fleet: usize, id: &str) -> Result<String, String> {
        let out = self.ec2[fleet]
            .describe_instance_attribute()
            .instance_id(id)
            .attribute(InstanceAttributeName::UserData)
            .send()
            .await
            .map_err(|e| format!("DescribeInstanceAttribute: {}", aws_error_text(&e)))?;
        let raw = out.user_data().and_then(|v| v.value()).unwrap_or("").to_string();
        Ok(match base64::engine::general_purpose::STANDARD.decode(raw.trim()) {
            Ok(bytes) => String::from_utf8(bytes).unwrap_or(raw),
            Err(_) => raw,
        })
    }

    /// What the ECS agent registers for an instance of this type: CPU units and MiB, from the
    /// vCPUs and memory moto's DescribeInstanceTypes gives the type (asked once per type).
    async fn type_registers(&self, fleet: usize, instance_type: &str) -> Result<(i32, i32), String> {
        if let Some(known) = self.registers.lock().unwrap().get(instance_type) {
            return Ok(*known);
        }
        let out = self.ec2[fleet]
            .describe_instance_types()
            .instance_types(aws_sdk_ec2::types::InstanceType::from(instance_type))
            .send()
            .await
            .map_err(|e| format!("DescribeInstanceTypes {instance_type}: {}", aws_error_text(&e)))?;
        let described = out.instance_types().first().ok_or_else(|| format!("moto knows no {instance_type}"))?;
        let vcpus = described.v_cpu_info().and_then(|v| v.default_v_cpus()).unwrap_or_default();
        let mib = described.memory_info().and_then(|m| m.size_in_mib()).unwrap_or_default();
        let (cpu, memory) = super::aws_rules::ecs_registers(i64::from(vcpus), mib);
        let figures = (
            i32::try_from(cpu).map_err(|e| format!("{instance_type}: {e}"))?,
            i32::try_from(memory).map_err(|e| format!("{instance_type}: {e}"))?,
        );
        self.registers.lock().unwrap().insert(instance_type.to_string(), figures);
        Ok(figures)
    }

    async fn register(&self, fleet: usize, id: &str, cluster: &str, instance_type: &str) -> Result<String, String> {
        let document = serde_json::json!({"instanceId": id, "region": REGION}).to_string();
        let (cpu, memory) = self.type_registers(fleet, instance_type).await?;
        let resource =
            |name: &str, value: i32| Resource::builder().name(name).r#type("INTEGER").integer_value(value).build();
        let out = self.ecs[fleet]
            .register_container_instance()
            .cluster(cluster)
            .instance_identity_document(document)
            .total_resources(resource("CPU", cpu))
            .total_resources(resource("MEMORY", memory))
            .send()
            .await
            .map_err(|e| format!("RegisterContainerInstance: {}", aws_error_text(&e)))?;
        out.container_instance()
            .and_then(|c| c.container_instance_arn())
            .map(str::to_string)
            .ok_or_else(|| "RegisterContainerInstance answered no ARN".to_string())
    }
}

/// The cluster a user data script joins.
pub fn cluster_of(user_data: &str) -> Option<String> {
    if let Some(rest) = user_data.split("ECS_CLUSTER=").nth(1) {
        return rest.lines().next().map(|s| s.trim().to_string());
    }
    let rest = user_data.split("Initialize-ECSAgent -Cluster '").nth(1)?;
    rest.split('\'').next().map(str::to_string)
}

/// Creates an IAM instance profile in the account of `access_key_id` through moto's IAM query
/// API (moto reads the account from the key and does not check the signature). Returns its ARN.
///
/// # Panics
/// When moto refuses.
pub async fn create_instance_profile(moto: SocketAddr, access_key_id: &str, name: &str) -> String {
    let body = format!("Action=CreateInstanceProfile&InstanceProfileName={name}&Version=2010-05-08");
    let request = HttpRequest {
        method: "POST".into(),
        target: "/".into(),
        version: "HTTP/1.1".into(),
        headers: vec![
            ("Host".into(), moto.to_string()),
            ("Content-Type".into(), "application/x-www-form-urlencoded".into()),
            (
                "Authorization".into(),
                format!("AWS4-HMAC-SHA256 Credential={access_key_id}/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0"),
            ),
        ],
        body: body.into_bytes(),
    };
    let response = http::send(moto, &request).await.unwrap_or_else(|e| panic!("CreateInstanceProfile {name}: {e}"));
    let text = response.text();
    assert_eq!(response.status, 200, "CreateInstanceProfile {name} answered {}: {text}", response.status);
    text.split("<Arn>").nth(1).and_then(|r| r.split("</Arn>").next()).unwrap_or_default().to_string()
}

/// Ids of instances, as a set.
pub fn ids<'a>(instances: impl IntoIterator<Item = &'a SeenInstance>) -> BTreeSet<String> {
    instances.into_iter().map(|i| i.id.clone()).collect()
}

/// The id of one of moto's Amazon Linux 2023 AMIs of this architecture (`x86_64` or `arm64`)
/// in the config's region (moto's AMI ids differ by region and version, so they are looked up).
pub async fn al2023_ami(config: &aws_config::SdkConfig, arch: &str) -> String {
    let filters = [("name", format!("al2023-ami-2023*-{arch}")), ("architecture", arch.to_string())];
    first_ami(config, &filters, &format!("Amazon Linux 2023 {arch}")).await
}

/// The id of one of moto's Windows Server AMIs in the config's region.
pub async fn windows_ami(config: &aws_config::SdkConfig) -> String {
    first_ami(config, &[("platform", "windows".to_string())], "Windows").await
}

/// The first by id of the AMIs DescribeImages finds with these filters.
async fn first_ami(config: &aws_config::SdkConfig, filters: &[(&str, String)], what: &str) -> String {
    let filters =
        filters.iter().map(|(name, value)| aws_sdk_ec2::types::Filter::builder().name(*name).values(value).build());
    let out = aws_sdk_ec2::Client::new(config)
        .describe_images()
        .set_filters(Some(filters.collect()))
        .send()
        .await
        .unwrap_or_else(|e| panic!("DescribeImages: {}", super::moto::aws_error_text(&e)));
    let mut ids: Vec<String> = out.images().iter().filter_map(|i| i.image_id().map(str::to_string)).collect();
    ids.sort();
    ids.into_iter().next().unwrap_or_else(|| panic!("moto knows no {what} AMI"))
}
