//! The port's EC2 and ECS calls of EC2 capacity, each through the account's budget and retries
//! (`aws.calls.call`), and the describes of the listed instance types and AMIs, returning the
//! plain data of [`super::ec2_types`]. Reads are filtered to what carries both our tags; the
//! engine's writes only ever name instances and container instances that such a read returned.

use std::time::SystemTime;

use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::operation::RequestId;
use aws_sdk_ec2::types::{
    BlockDeviceMapping, EbsBlockDevice, Filter, HttpTokensState, IamInstanceProfileSpecification,
    InstanceInterruptionBehavior, InstanceLifecycleType, InstanceMarketOptionsRequest, InstanceMetadataEndpointState,
    InstanceMetadataOptionsRequest, InstanceNetworkInterfaceSpecification, InstanceType, MarketType, ResourceType,
    SpotInstanceType, SpotMarketOptions, Tag, TagSpecification, VolumeType,
};

use super::budget::Category;
use super::ec2_types::sizes as capacity;
use super::ec2_types::{AmiInfo, Arch, ContainerInstance, Ec2Instance, OsClass, Resources, TypeInfo};
use super::status::{ContainerInstanceStatus, Ec2State};
use super::tags::{TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
use super::{AwsClients, AwsError, Failure};
use crate::ids::Ec2PoolKey;

/// Tag naming the OS an instance was launched for (`linux` or `windows`).
pub const TAG_OS: &str = "gocd:os";
/// Tag set on a Spot instance when EC2 warns that it will interrupt it: the warning's time, in
/// seconds since the epoch. The warning is one event; the tag keeps it across a plugin restart.
pub const TAG_SPOT_WARNED: &str = "gocd:spot-warned";
/// Tag holding the fingerprint of the launch settings an instance was launched with (AMI, user
/// data, instance profile, key pair, root volume, security groups, public IP): a stopped
/// instance whose fingerprint is not the profile's current one is terminated, not started.
pub const TAG_LAUNCH_SPEC: &str = "gocd:launch-spec";
/// Tag holding the key of the EC2 pool an instance was launched into: a short hash of the EC2
/// settings of the cluster profile it serves (`cluster::ec2::pools`). After a restart each
/// instance is adopted into its own profile's pool by it.
pub const TAG_EC2_POOL: &str = "gocd:ec2-pool";
/// AWS's limit of container instances per DescribeContainerInstances.
const DESCRIBE_CHUNK: usize = 100;
/// EC2 said it has no capacity for this request (spot or the instance type in that zone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The error code.
    pub code: String,
    /// EC2's message.
    pub message: String,
    /// AWS's request id of the refused call.
    pub request_id: Option<String>,
}

/// The refused call's request id is the attempt's (its span in a job's trace carries it).
impl RequestId for Refusal {
    fn request_id(&self) -> Option<&str> {
        self.request_id.as_deref()
    }
}

/// One RunInstances.
#[derive(Debug, Clone)]
pub struct LaunchRequest<'a> {
    /// The AMI of the type's architecture (from `Ec2AmiId`).
    pub ami_id: &'a str,
    /// One type of `Ec2InstanceType`.
    pub instance_type: &'a str,
    /// `Ec2InstanceProfile`, a name or an ARN.
    pub instance_profile: &'a str,
    /// One subnet.
    pub subnet: &'a str,
    /// Security groups.
    pub security_groups: &'a [String],
    /// `AssignPublicIp`: a public IP for the instance, else none (whatever the subnet's default).
    pub public_ip: bool,
    /// `Ec2KeyPair`.
    pub key_pair: Option<&'a str>,
    /// `Ec2RootVolumeGiB`.
    pub root_volume_gib: u32,
    /// Base64 user data.
    pub user_data: String,
    /// The OS (root device name, `gocd:os` tag).
    pub os: OsClass,
    /// Every tag (ours win).
    pub tags: Vec<(String, String)>,
    /// How many.
    pub count: u32,
    /// Spot or on-demand.
    pub spot: bool,
    /// Idempotency token of this launch.
    pub client_token: String,
}

fn filter(name: &str, value: &str) -> Filter {
    Filter::builder().name(name).values(value).build()
}

fn ours(server_id: &str, cluster_key: &str) -> [Filter; 2] {
    [filter(&format!("tag:{TAG_SERVER_ID}"), server_id), filter(&format!("tag:{TAG_CLUSTER_PROFILE}"), cluster_key)]
}

fn instance_view(i: &aws_sdk_ec2::types::Instance) -> Option<Ec2Instance> {
    let tag = |k: &str| i.tags().iter().find(|t| t.key() == Some(k)).and_then(|t| t.value());
    Some(Ec2Instance {
        id: i.instance_id()?.to_string(),
        instance_type: i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        state: i.state().and_then(|s| s.name()).map(Ec2State::from).unwrap_or_default(),
        launched_at: i.launch_time().and_then(|t| SystemTime::try_from(*t).ok()),
        spot: i.instance_lifecycle() == Some(&InstanceLifecycleType::Spot),
        os: OsClass::from_tag(tag(TAG_OS).or(i.platform().map(|p| p.as_str()))),
        spot_warned_at: tag(TAG_SPOT_WARNED).and_then(spot_warned_at),
        launch_spec: tag(TAG_LAUNCH_SPEC).map(str::to_string),
        pool: tag(TAG_EC2_POOL).map(Ec2PoolKey::from),
    })
}

/// The time a `gocd:spot-warned` tag holds (seconds since the epoch), if it is one.
fn spot_warned_at(value: &str) -> Option<SystemTime> {
    let secs: u64 = value.trim().parse().ok()?;
    SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(secs))
}

/// Tags an instance of ours EC2 Spot warned about with the warning's time
/// ([`TAG_SPOT_WARNED`]), so a plugin that restarts before the instance goes still counts its
/// tasks as work coming back.
///
/// # Errors
/// The failed CreateTags call.
pub async fn mark_spot_warned(aws: &AwsClients, instance_id: &str, at: SystemTime) -> Result<(), AwsError> {
    let secs = at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
    let request = aws
        .ec2
        .create_tags()
        .resources(instance_id)
        .tags(Tag::builder().key(TAG_SPOT_WARNED).value(secs.to_string()).build());
    aws.calls.call("CreateTags", || request.clone().send()).await.map(|_| ())
}

/// Our instances that are pending, running, stopping or stopped (every page): the stopped ones
/// are the pool `Ec2StoppedInstances` keeps, adopted by their tags after a restart.
///
/// # Errors
/// The failed DescribeInstances call.
pub async fn describe_ours(aws: &AwsClients, server_id: &str, cluster_key: &str) -> Result<Vec<Ec2Instance>, AwsError> {
    let mut filters = ours(server_id, cluster_key).to_vec();
    filters.push(not_terminated());
    let found = describe_pages(aws, filters).await?;
    Ok(found.iter().filter_map(instance_view).collect())
}

/// Every instance of this GoCD server in the account and region, of any cluster profile, that
/// is not terminated yet: (id, its `gocd:cluster-profile` key). The leftover sweep's read.
///
/// # Errors
/// The failed DescribeInstances call.
pub async fn of_server(aws: &AwsClients, server_id: &str) -> Result<Vec<(String, String)>, AwsError> {
    let filters = vec![filter(&format!("tag:{TAG_SERVER_ID}"), server_id), not_terminated()];
    let found = describe_pages(aws, filters).await?;
    let key_of = |i: &aws_sdk_ec2::types::Instance| {
        i.tags().iter().find(|t| t.key() == Some(TAG_CLUSTER_PROFILE)).and_then(|t| t.value()).map(str::to_string)
    };
    Ok(found.iter().filter_map(|i| Some((i.instance_id()?.to_string(), key_of(i)?))).collect())
}

/// The states of an instance that still exists (terminated ones stay listed for an hour;
/// shutting-down ones are on their way there).
pub const NOT_TERMINATED: [Ec2State; 4] = [Ec2State::Pending, Ec2State::Running, Ec2State::Stopping, Ec2State::Stopped];

/// The `instance-state-name` filter of the instances that still exist ([`NOT_TERMINATED`]).
pub fn not_terminated() -> Filter {
    let states = NOT_TERMINATED.iter().map(ToString::to_string).collect();
    Filter::builder().name("instance-state-name").set_values(Some(states)).build()
}

/// DescribeInstances with these filters, every page.
async fn describe_pages(aws: &AwsClients, filters: Vec<Filter>) -> Result<Vec<aws_sdk_ec2::types::Instance>, AwsError> {
    let mut found = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let request = aws
            .ec2
            .describe_instances()
            .set_filters(Some(filters.clone()))
            .max_results(1000)
            .set_next_token(next.take());
        let page = aws.calls.call("DescribeInstances", || request.clone().send()).await?;
        found.extend(page.reservations().iter().flat_map(|r| r.instances()).cloned());
        match page.next_token() {
            Some(token) if !token.is_empty() => next = Some(token.to_string()),
            _ => return Ok(found),
        }
    }
}

/// Which of these instance ids are ours, in any state: (id, state).
///
/// The ids go in an `instance-id` filter, not as `InstanceIds`: EC2 fails a whole call that
/// names an id it no longer knows (an instance terminated over an hour ago, whose container
/// instance a shared cluster may still list), where a filter value simply matches nothing. EC2
/// takes at most 200 filter values a call, so the ids go [`IDS_PER_DESCRIBE`] at a time.
///
/// # Errors
/// The failed DescribeInstances call.
pub async fn states_of_ours(
    aws: &AwsClients,
    ids: &[String],
    server_id: &str,
    cluster_key: &str,
) -> Result<Vec<(String, Ec2State)>, AwsError> {
    let found = by_ids(aws, ids, &ours(server_id, cluster_key)).await?;
    Ok(found.into_iter().map(|i| (i.id, i.state)).collect())
}

/// Whether each of these instances (ours or not: a capacity provider's) is a Spot instance, by
/// id; an id EC2 no longer lists is left out. Only read, never changed.
///
/// # Errors
/// The failed DescribeInstances call.
pub async fn spot_or_not(aws: &AwsClients, ids: &[String]) -> Result<Vec<(String, bool)>, AwsError> {
    let found = by_ids(aws, ids, &[]).await?;
    Ok(found.into_iter().map(|i| (i.id, i.spot)).collect())
}

/// The instances of `ids` that also match `filters`, by an `instance-id` filter (see
/// [`states_of_ours`]), [`IDS_PER_DESCRIBE`] ids a call.
async fn by_ids(aws: &AwsClients, ids: &[String], filters: &[Filter]) -> Result<Vec<Ec2Instance>, AwsError> {
    let mut found = Vec::new();
    for chunk in ids.chunks(IDS_PER_DESCRIBE) {
        let mut filters = filters.to_vec();
        filters.push(Filter::builder().name("instance-id").set_values(Some(chunk.to_vec())).build());
        let instances = describe_pages(aws, filters).await?;
        found.extend(instances.iter().filter_map(instance_view));
    }
    Ok(found)
}

/// Instance ids per DescribeInstances in [`states_of_ours`] (EC2: 200 filter values a call, the
/// two tag filters' included).
const IDS_PER_DESCRIBE: usize = 100;

/// Every container instance of the cluster (ACTIVE and DRAINING).
///
/// # Errors
/// The failed ListContainerInstances or DescribeContainerInstances call.
pub async fn container_instances(aws: &AwsClients, cluster: &str) -> Result<Vec<ContainerInstance>, AwsError> {
    let mut arns = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let request = aws.ecs.list_container_instances().cluster(cluster).max_results(100).set_next_token(next.take());
        let page = aws.calls.call("ListContainerInstances", || request.clone().send()).await?;
        arns.extend(page.container_instance_arns().iter().cloned());
        match page.next_token() {
            Some(token) if !token.is_empty() => next = Some(token.to_string()),
            _ => break,
        }
    }
    describe_container_instances(aws, cluster, &arns).await
}

/// These container instances of the cluster, [`DESCRIBE_CHUNK`] a call (one a capacity
/// provider's tasks ran on, to price them; it is only read).
///
/// # Errors
/// The failed DescribeContainerInstances call.
pub async fn describe_container_instances(
    aws: &AwsClients,
    cluster: &str,
    arns: &[String],
) -> Result<Vec<ContainerInstance>, AwsError> {
    let mut found = Vec::with_capacity(arns.len());
    for chunk in arns.chunks(DESCRIBE_CHUNK) {
        let request =
            aws.ecs.describe_container_instances().cluster(cluster).set_container_instances(Some(chunk.to_vec()));
        let out = aws.calls.call("DescribeContainerInstances", || request.clone().send()).await?;
        found.extend(out.container_instances().iter().map(container_view));
    }
    Ok(found)
}

/// The port's view of one described container instance.
fn container_view(c: &aws_sdk_ecs::types::ContainerInstance) -> ContainerInstance {
    let resources = |list: &[aws_sdk_ecs::types::Resource]| {
        let get = |name: &str| {
            list.iter().find(|r| r.name() == Some(name)).map_or(0, |r| u32::try_from(r.integer_value()).unwrap_or(0))
        };
        Resources::new(get("CPU"), get("MEMORY"))
    };
    let total = resources(c.registered_resources());
    // Never more room than the instance has (moto frees a task's resources again on a
    // repeated StopTask).
    let remaining = resources(c.remaining_resources());
    let remaining = Resources::new(remaining.cpu.min(total.cpu), remaining.memory.min(total.memory));
    // The ECS agent registers the instance's type and zone as these attributes.
    let attribute = |name: &str| c.attributes().iter().find(|a| a.name() == name).and_then(|a| a.value());
    let instance_type = attribute("ecs.instance-type");
    ContainerInstance {
        arn: c.container_instance_arn().unwrap_or_default().to_string(),
        ec2_id: c.ec2_instance_id().map(str::to_string),
        instance_type: instance_type.map(str::to_string),
        zone: attribute("ecs.availability-zone").map(str::to_string),
        status: c.status().map(ContainerInstanceStatus::from).unwrap_or_default(),
        connected: c.agent_connected(),
        total,
        remaining,
        tasks: u32::try_from(c.running_tasks_count().max(0) + c.pending_tasks_count().max(0)).unwrap_or(0),
    }
}

/// Deregisters a container instance; refused (by ECS) while tasks run on it.
///
/// # Errors
/// The failed DeregisterContainerInstance call.
pub async fn deregister(aws: &AwsClients, cluster: &str, arn: &str) -> Result<(), AwsError> {
    let request = aws.ecs.deregister_container_instance().cluster(cluster).container_instance(arn).force(false);
    aws.calls.call("DeregisterContainerInstance", || request.clone().send()).await.map(|_| ())
}

/// Terminates instances of ours.
///
/// # Errors
/// The failed TerminateInstances call.
pub async fn terminate(aws: &AwsClients, ids: &[String]) -> Result<(), AwsError> {
    let request = aws.ec2.terminate_instances().set_instance_ids(Some(ids.to_vec()));
    aws.calls.spend(Category::Ec2InstancesTerminated, u32::try_from(ids.len()).unwrap_or(u32::MAX)).await;
    aws.calls.call("TerminateInstances", || request.clone().send()).await.map(|_| ())
}

/// Stops an instance of ours (its EBS root volume is kept): an idle on-demand instance retired
/// into the stopped pool (`Ec2StoppedInstances`).
///
/// # Errors
/// The failed StopInstances call: [`Failure::WrongState`] when it is not running (already
/// stopping, or a one-time Spot instance EC2 cannot stop: [`Failure::Refused`]).
pub async fn stop(aws: &AwsClients, id: &str) -> Result<(), AwsError> {
    let request = aws.ec2.stop_instances().instance_ids(id);
    aws.calls.call("StopInstances", || request.clone().send()).await.map(|_| ())
}

/// Starts a stopped instance of ours again.
///
/// # Errors
/// The failed StartInstances call: [`Failure::NoCapacity`] when EC2 has no capacity of its type
/// in its zone now (`InsufficientInstanceCapacity`: launch a new instance instead),
/// [`Failure::WrongState`] when it is not stopped (still stopping).
pub async fn start(aws: &AwsClients, id: &str) -> Result<(), AwsError> {
    let request = aws.ec2.start_instances().instance_ids(id);
    aws.calls.spend(Category::Ec2InstancesLaunched, 1).await;
    aws.calls.call("StartInstances", || request.clone().send()).await.map(|_| ())
}

/// The Spot price an hour in effect now for `instance_type` in `zone`, for `os`: one
/// DescribeSpotPriceHistory starting now, which EC2 answers with the last price change before
/// that time (the price in effect) and any since; the latest is taken. `None` when EC2 has no
/// Spot price for it.
///
/// # Errors
/// The failed DescribeSpotPriceHistory call.
pub async fn spot_price(
    aws: &AwsClients,
    instance_type: &str,
    zone: &str,
    os: OsClass,
) -> Result<Option<f64>, AwsError> {
    let products: &[&str] = match os {
        OsClass::Linux => &["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
        OsClass::Windows => &["Windows", "Windows (Amazon VPC)"],
    };
    let now = aws_smithy_types::DateTime::from(SystemTime::now());
    let request = aws
        .ec2
        .describe_spot_price_history()
        .instance_types(InstanceType::from(instance_type))
        .availability_zone(zone)
        .set_product_descriptions(Some(products.iter().map(|p| (*p).to_string()).collect()))
        .start_time(now);
    let out = aws.calls.call("DescribeSpotPriceHistory", || request.clone().send()).await?;
    let latest = out
        .spot_price_history()
        .iter()
        .filter(|p| p.availability_zone() == Some(zone))
        .filter_map(|p| {
            Some((p.timestamp().and_then(|t| SystemTime::try_from(*t).ok()), p.spot_price()?.parse::<f64>().ok()?))
        })
        .filter(|(_, price)| price.is_finite() && *price > 0.0)
        .max_by_key(|(at, _)| *at);
    Ok(latest.map(|(_, price)| price))
}

/// The listed instance types as EC2 describes them (one call for all of them): architecture
/// and what an instance registers with ECS.
///
/// # Errors
/// The failed DescribeInstanceTypes call (`InvalidInstanceType` names the types EC2 does not offer).
pub async fn describe_instance_types(aws: &AwsClients, types: &[String]) -> Result<Vec<TypeInfo>, AwsError> {
    let request = aws
        .ec2
        .describe_instance_types()
        .set_instance_types(Some(types.iter().map(|t| InstanceType::from(t.as_str())).collect()));
    let out = aws.calls.call("DescribeInstanceTypes", || request.clone().send()).await?;
    Ok(type_infos(&out))
}

/// The types of a DescribeInstanceTypes answer.
pub fn type_infos(out: &aws_sdk_ec2::operation::describe_instance_types::DescribeInstanceTypesOutput) -> Vec<TypeInfo> {
    out.instance_types()
        .iter()
        .filter_map(|t| {
            let name = t.instance_type()?.as_str().to_string();
            let archs = t.processor_info().map(|p| p.supported_architectures()).unwrap_or_default();
            let arch = archs.iter().find_map(|a| Arch::of_ec2(a.as_str())).unwrap_or_else(|| Arch::guess(&name));
            let vcpus = t.v_cpu_info().and_then(|v| v.default_v_cpus()).and_then(|v| u32::try_from(v).ok());
            let mib = t.memory_info().and_then(|m| m.size_in_mib()).and_then(|m| u64::try_from(m).ok());
            let capacity = match (vcpus, mib) {
                (Some(v), Some(m)) if v > 0 && m > 0 => Some(capacity::from_size(v, m)),
                _ => capacity::estimate(&name),
            };
            Some(TypeInfo { name, arch, capacity })
        })
        .collect()
}

/// The listed AMIs as EC2 describes them (one call): architecture, platform, root snapshot size.
///
/// # Errors
/// The failed DescribeImages call (`InvalidAMIID.NotFound` when one does not exist).
pub async fn describe_images(aws: &AwsClients, ami_ids: &[String]) -> Result<Vec<AmiInfo>, AwsError> {
    let request = aws.ec2.describe_images().set_image_ids(Some(ami_ids.to_vec()));
    let out = aws.calls.call("DescribeImages", || request.clone().send()).await?;
    Ok(ami_infos(&out))
}

/// The AMIs of a DescribeImages answer.
pub fn ami_infos(out: &aws_sdk_ec2::operation::describe_images::DescribeImagesOutput) -> Vec<AmiInfo> {
    out.images()
        .iter()
        .filter_map(|image| {
            let root_gib = image
                .root_device_name()
                .and_then(|root| image.block_device_mappings().iter().find(|m| m.device_name() == Some(root)))
                .and_then(|m| m.ebs()?.volume_size())
                .and_then(|gib| u32::try_from(gib).ok())
                .unwrap_or(0);
            Some(AmiInfo {
                id: image.image_id()?.to_string(),
                arch: image.architecture().and_then(|a| Arch::of_ec2(a.as_str())),
                os: OsClass::from_tag(image.platform().map(|p| p.as_str())),
                root_gib,
            })
        })
        .collect()
}

/// RunInstances: `Ok(Err(refusal))` when EC2 has no capacity for it (not retried: asking again
/// at once does not make capacity appear; the caller falls back to on-demand or another zone).
///
/// # Errors
/// Any other failure of the call.
pub async fn run_instances(
    aws: &AwsClients,
    launch: &LaunchRequest<'_>,
) -> Result<Result<Vec<Ec2Instance>, Refusal>, AwsError> {
    let tags: Vec<Tag> = launch.tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect();
    let profile = if launch.instance_profile.starts_with("arn:") {
        IamInstanceProfileSpecification::builder().arn(launch.instance_profile).build()
    } else {
        IamInstanceProfileSpecification::builder().name(launch.instance_profile).build()
    };
    let root_device = match launch.os {
        OsClass::Linux => "/dev/xvda",
        OsClass::Windows => "/dev/sda1",
    };
    let count = i32::try_from(launch.count).unwrap_or(1).max(1);
    let mut request = aws
        .ec2
        .run_instances()
        .image_id(launch.ami_id)
        .instance_type(InstanceType::from(launch.instance_type))
        .min_count(1)
        .max_count(count)
        .iam_instance_profile(profile)
        .set_key_name(launch.key_pair.map(str::to_string))
        .block_device_mappings(
            BlockDeviceMapping::builder()
                .device_name(root_device)
                .ebs(
                    EbsBlockDevice::builder()
                        .volume_size(i32::try_from(launch.root_volume_gib).unwrap_or(30))
                        .volume_type(VolumeType::Gp3)
                        .delete_on_termination(true)
                        // Encrypted whatever the account's default (the account's default
                        // KMS key for EBS when none is set): agents' workspaces hold sources
                        // and build secrets.
                        .encrypted(true)
                        .build(),
                )
                .build(),
        )
        .metadata_options(
            InstanceMetadataOptionsRequest::builder()
                .http_tokens(HttpTokensState::Required)
                .http_endpoint(InstanceMetadataEndpointState::Enabled)
                // Hop limit 1: the instance itself reaches IMDS, a bridge-mode container (one
                // hop further) does not, so no job reads the instance role's credentials
                // (`docs/aws-rules.md`, "EC2"). Tasks get their own role through ECS's endpoint.
                .http_put_response_hop_limit(1)
                .build(),
        )
        .tag_specifications(
            TagSpecification::builder().resource_type(ResourceType::Instance).set_tags(Some(tags.clone())).build(),
        )
        .tag_specifications(
            TagSpecification::builder().resource_type(ResourceType::Volume).set_tags(Some(tags)).build(),
        )
        .user_data(&launch.user_data)
        .client_token(&launch.client_token);
    // The network interface is given whole so that the public IP is what `AssignPublicIp` says,
    // never the subnet's own default (a public subnet would hand every agent a public IP); EC2
    // refuses the subnet and groups at the top level beside it.
    request = request.network_interfaces(
        InstanceNetworkInterfaceSpecification::builder()
            .device_index(0)
            .subnet_id(launch.subnet)
            .set_groups(Some(launch.security_groups.to_vec()))
            .associate_public_ip_address(launch.public_ip)
            .delete_on_termination(true)
            .build(),
    );
    if launch.spot {
        request = request.instance_market_options(
            InstanceMarketOptionsRequest::builder()
                .market_type(MarketType::Spot)
                .spot_options(
                    SpotMarketOptions::builder()
                        .spot_instance_type(SpotInstanceType::OneTime)
                        .instance_interruption_behavior(InstanceInterruptionBehavior::Terminate)
                        .build(),
                )
                .build(),
        );
    }
    aws.calls.spend(Category::Ec2InstancesLaunched, count.unsigned_abs()).await;
    let answer = aws
        .calls
        .call("RunInstances", || {
            let request = request.clone();
            async move {
                match request.send().await {
                    Ok(out) => Ok(Ok(out)),
                    // EC2 refuses capacity in one subnet or zone (rather than the request): the
                    // launch moves on to the next subnet.
                    Err(e) => match AwsError::from_sdk("RunInstances", &e).failure {
                        Failure::NoCapacity => Ok(Err(Refusal {
                            code: e.code().unwrap_or_default().to_string(),
                            message: e.message().unwrap_or_default().to_string(),
                            request_id: e.request_id().map(str::to_string),
                        })),
                        _ => Err(e),
                    },
                }
            }
        })
        .await?;
    Ok(answer.map(|out| {
        out.instances()
            .iter()
            .filter_map(instance_view)
            .map(|mut i| {
                if i.state == Ec2State::default() {
                    i.state = Ec2State::Pending;
                }
                i.os = launch.os;
                i
            })
            .collect()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_sdk_instance() {
        let i = aws_sdk_ec2::types::Instance::builder()
            .instance_id("i-0abc")
            .instance_type(InstanceType::C5Xlarge)
            .instance_lifecycle(aws_sdk_ec2::types::InstanceLifecycleType::Spot)
            .state(
                aws_sdk_ec2::types::InstanceState::builder()
                    .name(aws_sdk_ec2::types::InstanceStateName::Running)
                    .build(),
            )
            .tags(Tag::builder().key(TAG_OS).value("windows").build())
            .tags(Tag::builder().key(TAG_SPOT_WARNED).value("1700000000").build())
            .tags(Tag::builder().key(TAG_LAUNCH_SPEC).value("0123abcd").build())
            .tags(Tag::builder().key(TAG_EC2_POOL).value("5f3c0a9b1d2e").build())
            .build();
        let v = instance_view(&i).unwrap();
        assert_eq!((v.id.as_str(), v.instance_type.as_str(), &v.state), ("i-0abc", "c5.xlarge", &Ec2State::Running));
        assert!(v.spot);
        assert_eq!(v.os, OsClass::Windows);
        assert_eq!(v.spot_warned_at, Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000)));
        assert_eq!(v.launch_spec.as_deref(), Some("0123abcd"));
        assert_eq!(v.pool.as_deref(), Some("5f3c0a9b1d2e"));
        assert_eq!(spot_warned_at("soon"), None, "a tag someone else wrote is no warning time");
    }
}
