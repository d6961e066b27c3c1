//! Launching one pool's instances: RunInstances with the planned type, the AMI of its
//! architecture in the pool's catalog, the pool's profile's instance profile, subnets and
//! groups, key pair, gp3 root volume (at least the AMI's root snapshot), IMDSv2, tags (the pool's
//! `gocd:ec2-pool` among ours) and user data; a type refused for capacity falls to the next
//! fitting type, spot first when asked, on-demand when every type's spot capacity is refused, the
//! next subnet (another zone) when on-demand capacity is refused too; a growing pause of the
//! pool's launches after a failure.

use sha2::{Digest, Sha256};

use crate::aws::network::Network;
use crate::aws::AwsError;
use crate::cluster::base::identity::{TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
use crate::cluster::capacity::ec2::api::{self, LaunchRequest, Refusal, TAG_EC2_POOL, TAG_LAUNCH_SPEC, TAG_OS};
use crate::cluster::capacity::ec2::catalog::Catalog;
use crate::cluster::capacity::ec2::plan::Launch;
use crate::cluster::capacity::ec2::pool::Ec2Instance;
use crate::cluster::capacity::ec2::pools::PoolConfig;
use crate::cluster::capacity::ec2::user_data::{self, Join};
use crate::cluster::capacity::ec2::{Arch, OsClass};
use crate::cluster::Cluster;
use crate::ids::Ec2PoolKey;
use crate::protocol::host_calls::HealthKind;
use crate::settings::{ClusterProfile, Ec2Capacity};

/// Launches a pool's instances (`cfg`: its settings, perhaps turned on-demand), grouped by (OS,
/// architecture, types): for each, the types in the plan's order, spot first when asked,
/// on-demand when every type's spot capacity is refused, then the next subnet (another zone)
/// when on-demand capacity is refused too.
pub(super) async fn launch(cluster: &Cluster, pool: &PoolConfig, cfg: &Ec2Capacity, launches: &[Launch]) {
    let (now, profile, key) = (cluster.now(), &*pool.profile, &pool.key);
    let (backing_off, catalog) = {
        let st = cluster.ec2().state();
        let memory = st.memory(Some(key));
        (memory.is_some_and(|m| m.backing_off(now)), memory.and_then(|m| m.catalog().cloned()))
    };
    if backing_off {
        return;
    }
    let Some(catalog) = catalog else {
        return;
    };
    let network = match instance_network(cluster, profile).await {
        Ok(n) => n,
        Err(e) => return launch_failed(cluster, key, format!("could not resolve subnets and security groups: {e}")),
    };
    let mut groups: Vec<(&Launch, u32)> = Vec::new();
    for l in launches {
        match groups.iter_mut().find(|(g, _)| *g == l) {
            Some((_, count)) => *count += 1,
            None => groups.push((l, 1)),
        }
    }
    for (group, count) in groups {
        let Some(ami) = catalog.ami_for(group.arch, group.os) else {
            return launch_failed(
                cluster,
                key,
                format!(
                    "Ec2AmiId lists no {} AMI: add one for the {} instance types",
                    group.arch.as_str(),
                    group.arch.as_str()
                ),
            );
        };
        let root_volume_gib = ami.root_volume_gib(cfg.root_volume_gib);
        let cfg = &Ec2Capacity { root_volume_gib, ..cfg.clone() };
        let spec = fingerprint(cluster, profile, cfg, &ami.id, group.os);
        match launch_some(cluster, pool, cfg, &network, group, (&ami.id, &spec), count).await {
            Ok((instances, fell_back)) => {
                let ids: Vec<&str> = instances.iter().map(|i| i.id.as_str()).collect();
                let instance_type = instances.first().map(|i| i.instance_type.as_str()).unwrap_or_default();
                tracing::info!(?ids, pool = %key, os = group.os.as_str(), instance_type, ami = %ami.id, spot = cfg.spot && !fell_back, "launched EC2 instances");
                let mut st = cluster.ec2().state();
                st.launched(key, &instances, cluster.now());
                st.memory_mut(key).launched(instances.len(), fell_back);
            }
            Err(message) => return launch_failed(cluster, key, message),
        }
    }
}

async fn launch_some(
    cluster: &Cluster,
    pool: &PoolConfig,
    cfg: &Ec2Capacity,
    network: &Network,
    launch: &Launch,
    (ami_id, spec): (&str, &str),
    count: u32,
) -> Result<(Vec<Ec2Instance>, bool), LaunchFailed> {
    let (os, profile, key) = (launch.os, &*pool.profile, &pool.key);
    let n = network.subnets.len().max(1);
    let (first, images) = {
        let st = cluster.ec2().state();
        let memory = st.memory(Some(key));
        (memory.map_or(0, |m| m.next_subnet(n)), memory.map(|m| m.images().to_vec()).unwrap_or_default())
    };
    let subnets: Vec<(usize, &String)> =
        network.subnets.iter().enumerate().cycle().skip(first).take(network.subnets.len()).collect();
    let join = Join { images: &images, ..join(cluster, profile, cfg) };
    let mut tags: Vec<(String, String)> =
        profile.tags.iter().filter(|(k, _)| !k.starts_with("gocd:") && k != "Name").cloned().collect();
    tags.push((TAG_SERVER_ID.into(), cluster.server_id().to_string()));
    tags.push((TAG_CLUSTER_PROFILE.into(), cluster.key().to_string()));
    tags.push((TAG_OS.into(), os.as_str().into()));
    tags.push((TAG_LAUNCH_SPEC.into(), spec.to_string()));
    tags.push((TAG_EC2_POOL.into(), key.to_string()));
    tags.push(("Name".into(), format!("gocd-ecs-agents {}", profile.cluster_short_name())));
    let mut refusals: Vec<(String, Refusal)> = Vec::new();
    let markets: &[bool] = if cfg.spot { &[true, false] } else { &[false] };
    for (index, subnet) in subnets {
        cluster.ec2().state().memory_mut(key).tried_subnet(index, n);
        // Each type in the plan's order, spot first; on-demand only once every type's spot
        // capacity was refused.
        for &spot in markets {
            for instance_type in &launch.types {
                let request = LaunchRequest {
                    ami_id,
                    instance_type,
                    instance_profile: &cfg.instance_profile,
                    subnet,
                    security_groups: &network.security_groups,
                    public_ip: profile.assign_public_ip,
                    key_pair: cfg.key_pair.as_deref(),
                    root_volume_gib: cfg.root_volume_gib,
                    user_data: user_data::encoded(os, &join),
                    os,
                    tags: tags.clone(),
                    count,
                    spot,
                    client_token: format!("gocd-{}-{}", cluster.key(), uuid::Uuid::new_v4().simple()),
                };
                match api::run_instances(&cluster.aws(), &request).await {
                    Ok(Ok(instances)) if !instances.is_empty() => {
                        let fell_back = cfg.spot && !spot;
                        if !refusals.is_empty() {
                            let market = if spot { "spot" } else { "on-demand" };
                            let why: Vec<String> =
                                refusals.iter().map(|(t, r)| format!("{t}: {}: {}", r.code, r.message)).collect();
                            cluster.event(
                                HealthKind::Warning,
                                format!(
                                    "EC2 {} capacity was refused ({}); launched {} {market} {instance_type} instance(s) instead",
                                    if cfg.spot { "spot" } else { "on-demand" },
                                    why.join("; "),
                                    instances.len()
                                ),
                            );
                        }
                        return Ok((instances, fell_back));
                    }
                    Ok(Ok(_)) => return Err(LaunchFailed::NoInstance),
                    Ok(Err(refusal)) => {
                        tracing::warn!(subnet = %subnet, spot, instance_type = %instance_type, code = %refusal.code, message = %refusal.message, "EC2 refused capacity");
                        refusals.push((instance_type.clone(), refusal));
                    }
                    Err(e) => return Err(LaunchFailed::Aws(e)),
                }
            }
        }
    }
    let refusals = refusals.iter().map(|(t, r)| format!("{t}: {}: {}", r.code, r.message)).collect();
    Err(LaunchFailed::NoCapacity { types: launch.types.clone(), refusals })
}

/// The join script's settings of this profile (no images: see [`fingerprint`]).
fn join<'a>(cluster: &'a Cluster, profile: &'a ClusterProfile, cfg: &'a Ec2Capacity) -> Join<'a> {
    Join {
        cluster: profile.cluster_short_name(),
        server_id: cluster.server_id(),
        cluster_key: cluster.key(),
        extra: cfg.user_data.as_deref(),
        images: &[],
    }
}

/// The fingerprint of what an instance launched now for `os` gets (the `gocd:launch-spec` tag):
/// AMI, user data (without the pre-pulled images, which grow as elastic profiles are seen and do
/// not change what the instance is), instance profile, key pair, root volume, security groups
/// and public IP. A stopped instance is started again only while its tag matches.
pub(super) fn fingerprint(
    cluster: &Cluster,
    profile: &ClusterProfile,
    cfg: &Ec2Capacity,
    ami_id: &str,
    os: OsClass,
) -> String {
    let parts = [
        ami_id.to_string(),
        user_data::script(os, &join(cluster, profile, cfg)),
        cfg.instance_profile.clone(),
        cfg.key_pair.clone().unwrap_or_default(),
        cfg.root_volume_gib.to_string(),
        profile.security_group_ids.join(","),
        profile.assign_public_ip.to_string(),
    ];
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0u8]);
    }
    hasher.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The fingerprint a new instance of this OS and architecture would have now (see
/// [`fingerprint`]); `None` when no listed AMI has the architecture.
pub(super) fn current_fingerprint(
    cluster: &Cluster,
    profile: &ClusterProfile,
    cfg: &Ec2Capacity,
    catalog: &Catalog,
    os: OsClass,
    arch: Arch,
) -> Option<String> {
    let ami = catalog.ami_for(arch, os)?;
    let cfg = Ec2Capacity { root_volume_gib: ami.root_volume_gib(cfg.root_volume_gib), ..cfg.clone() };
    Some(fingerprint(cluster, profile, &cfg, &ami.id, os))
}

/// Why a group of instances was not launched; each reads as a sentence for server health.
#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum LaunchFailed {
    /// RunInstances answered with no instance and no refusal.
    #[error("RunInstances launched no instance and gave no reason")]
    NoInstance,
    /// A RunInstances call failed otherwise than for capacity.
    #[error(transparent)]
    Aws(AwsError),
    /// Every type, market and subnet was refused for capacity.
    #[error("EC2 has no {} capacity in any subnet: {}", .types.join(" or "), .refusals.join("; "))]
    NoCapacity {
        /// The types tried, in the plan's order.
        types: Vec<String>,
        /// Each refusal: `type: code: message`.
        refusals: Vec<String>,
    },
}

/// Backs the pool's launches off (the pool's alone: another pool's AMI or types may launch).
fn launch_failed(cluster: &Cluster, pool: &Ec2PoolKey, message: impl std::fmt::Display) {
    let now = cluster.now();
    let backoff = cluster.ec2().state().memory_mut(pool).launch_failed(now);
    cluster.event(
        HealthKind::Error,
        format!("could not launch EC2 instances (next try in {} s): {message}", backoff.as_secs()),
    );
}

/// The cluster profile's subnets and groups (else the default VPC's), resolved once.
async fn instance_network(cluster: &Cluster, profile: &ClusterProfile) -> Result<Network, AwsError> {
    let key = (profile.subnet_ids.clone(), profile.security_group_ids.clone());
    cluster.ec2().network(&cluster.aws(), key).await
}

#[cfg(test)]
mod tests {
    use super::LaunchFailed;

    #[test]
    fn a_launch_refused_everywhere_names_the_types_and_each_refusal() {
        let failed = LaunchFailed::NoCapacity {
            types: vec!["c5.xlarge".into(), "m5.xlarge".into()],
            refusals: vec![
                "c5.xlarge: InsufficientInstanceCapacity: none left".into(),
                "m5.xlarge: InsufficientInstanceCapacity: none left".into(),
            ],
        };
        assert_eq!(
            failed.to_string(),
            "EC2 has no c5.xlarge or m5.xlarge capacity in any subnet: c5.xlarge: InsufficientInstanceCapacity: \
             none left; m5.xlarge: InsufficientInstanceCapacity: none left"
        );
        assert_eq!(LaunchFailed::NoInstance.to_string(), "RunInstances launched no instance and gave no reason");
    }
}
