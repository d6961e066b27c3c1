//! The leftover sweep across cluster profiles (what it finds: `cluster/cleanup/strays.rs`): once per
//! AWS cluster for tasks and once per account and region for instances, each with the
//! credentials of a live profile that acts there. Runs from server-ping (the second of a process,
//! then every 30 minutes), only when every profile GoCD sent resolved (otherwise a profile that
//! failed to resolve would look gone).

use std::collections::HashSet;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::Plugin;
use crate::cluster::cleanup::LEFTOVER_SWEEP_EVERY;
use crate::cluster::Cluster;
use crate::ids::ClusterKey;
use crate::protocol::host_calls::HealthKind;
use crate::settings::LaunchType;

/// When the leftover sweep ran, and how many server-pings this process has seen.
#[derive(Debug, Default)]
pub struct SweepClock {
    pings: u64,
    last: Option<Instant>,
}

impl Plugin {
    /// Sweeps at the second server-ping of this process (the first adopts, and its reads
    /// stay the adoption's alone), then every [`LEFTOVER_SWEEP_EVERY`].
    pub(super) async fn sweep_leftovers_if_due(&self, clusters: &[Arc<Cluster>]) {
        {
            let mut sweep = self.leftover_sweep.lock().unwrap_or_else(PoisonError::into_inner);
            sweep.pings += 1;
            if sweep.pings < 2 || sweep.last.is_some_and(|at| at.elapsed() < LEFTOVER_SWEEP_EVERY) {
                return;
            }
            sweep.last = Some(Instant::now());
        }
        // Every key this process serves or drains: the rest of this server's tags are leftovers.
        let live: HashSet<ClusterKey> = self.known_clusters().iter().map(|c| c.key().clone()).collect();
        let serving = || clusters.iter().filter(|c| c.retired().is_none());
        let mut swept_clusters = HashSet::new();
        for cluster in serving() {
            let (aws, profile) = (cluster.aws(), cluster.profile());
            let place = (aws.account_id.clone(), aws.region.clone(), profile.cluster_short_name().to_string());
            if swept_clusters.insert(place) {
                if let Err(e) = cluster.stop_leftover_tasks(&live).await {
                    cluster.event(HealthKind::Warning, format!("could not look for leftover tasks: {e}"));
                }
            }
        }
        // EC2 profiles' credentials first: a Fargate profile's policy need not read instances.
        let mut by_launch_type: Vec<&Arc<Cluster>> = serving().collect();
        by_launch_type.sort_by_key(|c| c.profile().launch_type != LaunchType::Ec2);
        let mut swept_regions = HashSet::new();
        for cluster in by_launch_type {
            let aws = cluster.aws();
            if !swept_regions.insert((aws.account_id.clone(), aws.region.clone())) {
                continue;
            }
            match cluster.terminate_leftover_instances(&live).await {
                Ok(_) => {}
                Err(e) if cluster.profile().launch_type == LaunchType::Ec2 => {
                    cluster.event(HealthKind::Warning, format!("could not look for leftover instances: {e}"));
                }
                Err(e) => {
                    tracing::info!(error = %e, "a Fargate profile's credentials could not look for leftover instances")
                }
            }
        }
    }
}
