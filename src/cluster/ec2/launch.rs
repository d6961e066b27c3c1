//! Launching instances: RunInstances with the profile's AMI, type, instance profile, subnets and
//! groups, key pair, gp3 root volume, IMDSv2, tags and user data; spot first when asked,
//! on-demand when spot capacity is refused, the next subnet (another zone) when on-demand
//! capacity is refused too; a growing pause after a failure.

use std::time::{Duration, SystemTime};

use super::api::{self, LaunchRequest, Refusal, TAG_OS};
use super::pool::Ec2Instance;
use super::user_data::{self, Join};
use super::OsClass;
use crate::aws::network::{self, Network};
use crate::aws::AwsError;
use crate::cluster::identity::{TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
use crate::cluster::Cluster;
use crate::protocol::host_calls::HealthKind;
use crate::settings::{ClusterProfile, Ec2Capacity};

/// First and longest pause of launches after RunInstances failed.
const LAUNCH_BACKOFF: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(300));

/// Launches instances, grouped by OS: spot first when asked, on-demand when spot capacity is
/// refused, then the next subnet (another zone) when on-demand capacity is refused too.
pub(super) async fn launch(cluster: &Cluster, profile: &ClusterProfile, cfg: &Ec2Capacity, oses: &[OsClass]) {
    let now = SystemTime::now();
    if cluster.ec2.state().launch_backoff.is_some_and(|(until, _)| now < until) {
        return;
    }
    let network = match instance_network(cluster, profile).await {
        Ok(n) => n,
        Err(e) => return launch_failed(cluster, format!("could not resolve subnets and security groups: {e}")),
    };
    let root_volume_gib = root_volume_gib(cluster, cfg).await;
    let cfg = &Ec2Capacity { root_volume_gib, ..cfg.clone() };
    for os in [OsClass::Linux, OsClass::Windows] {
        let count = oses.iter().filter(|o| **o == os).count() as u32;
        if count == 0 {
            continue;
        }
        match launch_some(cluster, profile, cfg, &network, os, count).await {
            Ok((instances, fell_back)) => {
                let ids: Vec<&str> = instances.iter().map(|i| i.id.as_str()).collect();
                tracing::info!(?ids, os = os.as_str(), spot = cfg.spot && !fell_back, "launched EC2 instances");
                let mut st = cluster.ec2.state();
                st.launched(&instances, SystemTime::now());
                st.counters.launched += instances.len() as u64;
                if fell_back {
                    st.counters.spot_fallbacks += instances.len() as u64;
                }
                st.launch_backoff = None;
            }
            Err(message) => return launch_failed(cluster, message),
        }
    }
}

async fn launch_some(
    cluster: &Cluster,
    profile: &ClusterProfile,
    cfg: &Ec2Capacity,
    network: &Network,
    os: OsClass,
    count: u32,
) -> Result<(Vec<Ec2Instance>, bool), String> {
    let n = network.subnets.len().max(1);
    let first = cluster.ec2.state().next_subnet % n;
    let subnets: Vec<(usize, &String)> =
        network.subnets.iter().enumerate().cycle().skip(first).take(network.subnets.len()).collect();
    let join = Join {
        cluster: profile.cluster_short_name(),
        server_id: &cluster.server_id,
        cluster_key: &cluster.key,
        extra: cfg.user_data.as_deref(),
    };
    let mut tags: Vec<(String, String)> =
        profile.tags.iter().filter(|(k, _)| !k.starts_with("gocd:") && k != "Name").cloned().collect();
    tags.push((TAG_SERVER_ID.into(), cluster.server_id.clone()));
    tags.push((TAG_CLUSTER_PROFILE.into(), cluster.key.clone()));
    tags.push((TAG_OS.into(), os.as_str().into()));
    tags.push(("Name".into(), format!("gocd-ecs-agents {}", profile.cluster_short_name())));
    let mut refusals: Vec<Refusal> = Vec::new();
    let mut spot = cfg.spot;
    for (index, subnet) in subnets {
        cluster.ec2.state().next_subnet = (index + 1) % n;
        loop {
            let request = LaunchRequest {
                ami_id: &cfg.ami_id,
                instance_type: &cfg.instance_type,
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
                client_token: format!("gocd-{}-{}", cluster.key, uuid::Uuid::new_v4().simple()),
            };
            match api::run_instances(&cluster.aws(), &request).await {
                Ok(Ok(instances)) if !instances.is_empty() => {
                    let fell_back = cfg.spot && !spot;
                    if fell_back {
                        let why: Vec<String> = refusals.iter().map(|r| format!("{}: {}", r.code, r.message)).collect();
                        cluster.event(
                            HealthKind::Warning,
                            format!(
                                "EC2 spot capacity was refused ({}); launched {} on-demand instance(s) instead",
                                why.join("; "),
                                instances.len()
                            ),
                        );
                    }
                    return Ok((instances, fell_back));
                }
                Ok(Ok(_)) => return Err("RunInstances launched no instance and gave no reason".into()),
                Ok(Err(refusal)) => {
                    tracing::warn!(subnet = %subnet, spot, code = %refusal.code, message = %refusal.message, "EC2 refused capacity");
                    refusals.push(refusal);
                    if spot {
                        spot = false;
                        continue;
                    }
                    break;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    let why: Vec<String> = refusals.iter().map(|r| format!("{}: {}", r.code, r.message)).collect();
    Err(format!("EC2 has no {} capacity in any subnet: {}", cfg.instance_type, why.join("; ")))
}

fn launch_failed(cluster: &Cluster, message: String) {
    let now = SystemTime::now();
    let backoff = {
        let mut st = cluster.ec2.state();
        let next = st.launch_backoff.map_or(LAUNCH_BACKOFF.0, |(_, b)| (b * 2).min(LAUNCH_BACKOFF.1));
        st.launch_backoff = Some((now + next, next));
        next
    };
    cluster.event(
        HealthKind::Error,
        format!("could not launch EC2 instances (next try in {} s): {message}", backoff.as_secs()),
    );
}

/// `Ec2RootVolumeGiB`, or the AMI's own root snapshot size when that is larger (RunInstances
/// refuses a root volume smaller than the snapshot); the AMI is described once.
async fn root_volume_gib(cluster: &Cluster, cfg: &Ec2Capacity) -> u32 {
    let known = cluster.ec2.state().ami_root_gib.get(&cfg.ami_id).copied();
    let ami = match known {
        Some(size) => size,
        None => match api::ami_root_gib(&cluster.aws(), &cfg.ami_id).await {
            Ok(size) => {
                let size = size.unwrap_or(0);
                cluster.ec2.state().ami_root_gib.insert(cfg.ami_id.clone(), size);
                size
            }
            Err(e) => {
                tracing::info!(ami = %cfg.ami_id, error = %e, "could not read the AMI's root volume size; using Ec2RootVolumeGiB");
                0
            }
        },
    };
    cfg.root_volume_gib.max(ami)
}

/// The cluster profile's subnets and groups (else the default VPC's), resolved once.
async fn instance_network(cluster: &Cluster, profile: &ClusterProfile) -> Result<Network, AwsError> {
    let key = (profile.subnet_ids.clone(), profile.security_group_ids.clone());
    let mut cached = cluster.ec2.network.lock().await;
    if let Some((k, n)) = cached.as_ref() {
        if *k == key {
            return Ok(n.clone());
        }
    }
    let resolved = network::resolve(&cluster.aws(), &key.0, &key.1).await?;
    *cached = Some((key, resolved.clone()));
    Ok(resolved)
}
