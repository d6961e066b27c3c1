//! server-ping across every cluster profile: each reconciled on its own task
//! ([`Cluster::ping`]), so a slow or broken account never stalls another; GoCD's agents of
//! profiles that no longer exist removed; then one server-health update for all.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tracing::Instrument;

use super::Plugin;
use crate::cluster::base::identity::cluster_key_of_agent;
use crate::cluster::capacity::ec2::pools::serves_ec2;
use crate::cluster::reconcile::ec2::driver::ensure_running;
use crate::cluster::{Cluster, Retirement};
use crate::error::Result;
use crate::ids::{AgentId, ClusterKey};
use crate::protocol::host_calls::{HealthKind, HealthMessage};
use crate::protocol::types::AgentMetadata;
use crate::settings::Properties;

/// How long one cluster profile's reconcile may take before the ping moves on without it.
const PER_CLUSTER_BUDGET: Duration = Duration::from_secs(40);

impl Plugin {
    /// Reconciles every cluster profile GoCD sent.
    ///
    /// # Errors
    /// A failed call to GoCD (list-agents, server health); each profile's own failures are
    /// told in server health instead.
    pub async fn ping_all(&self, profiles: &[Properties]) -> Result<()> {
        let mut problems = Vec::new();
        let mut clusters = Vec::new();
        // A failure to learn something means "don't act on what we could not see", never
        // "nothing exists": no agent is removed and no profile taken as gone then.
        let mut all_resolved = true;
        for props in profiles {
            match self.cluster(props).await {
                Ok(cluster) => clusters.push(cluster),
                Err(e) => {
                    all_resolved = false;
                    let message = format!("a cluster profile cannot be served: {e}");
                    problems.push(HealthMessage { kind: HealthKind::Error, message });
                }
            }
        }
        // Two teams' profiles on one cluster, account and role share one engine: one pass each.
        clusters.sort_by(|a, b| a.key().cmp(b.key()));
        clusters.dedup_by(|a, b| a.key() == b.key());
        let agents = self.gocd().list_agents().await?;
        let sent: HashSet<ClusterKey> = clusters.iter().map(|c| c.key().clone()).collect();
        for cluster in self.known_clusters().into_iter().filter(|c| !sent.contains(c.key())) {
            // GoCD no longer sends this profile (deleted, or edited into another key without
            // our hearing of it): it drains. Its pings go on until it has.
            if all_resolved && cluster.retired().is_none() {
                cluster.retire(Retirement::Replaced);
            }
            if cluster.retired().is_some() {
                clusters.push(cluster);
            }
        }
        let mut by_cluster = group_by_cluster(&agents);
        let mut pings = JoinSet::new();
        for cluster in &clusters {
            let gocd = by_cluster.remove(cluster.key().as_str()).unwrap_or_default();
            pings.spawn(self.ping_one(cluster.clone(), gocd));
        }
        while pings.join_next().await.is_some() {}

        if all_resolved {
            self.remove_agents_of_unknown_profiles(&clusters, &agents).await;
            self.sweep_leftovers_if_due(&clusters).await;
        }
        self.forget_drained();
        self.sync_event_queues();
        for cluster in self.known_clusters() {
            cluster.registry().prune(cluster.now());
        }
        *self.profile_problems.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = problems;
        self.send_health().await
    }

    /// One profile's pass, bounded in time; its failure becomes a health message of its own.
    fn ping_one(
        &self,
        cluster: Arc<Cluster>,
        gocd: HashMap<AgentId, AgentMetadata>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let metrics = self.metrics().clone();
        if serves_ec2(&cluster.profile(), &cluster.served_profiles().0) {
            // Adopts the profiles' instances after a restart, retires idle ones, places waiting work.
            ensure_running(&cluster);
        }
        // A child of the request's span: AWS errors in the log name the cluster they are about.
        let span =
            tracing::info_span!("cluster", cluster = %cluster.profile().cluster_name, region = %cluster.aws().region);
        async move {
            let pinged = tokio::time::timeout(PER_CLUSTER_BUDGET, cluster.ping(gocd)).await;
            // Warm pools: start on the keys held, retire the surplus (a closed WarmSchedule).
            cluster.tend_warm_pools().await;
            match pinged {
                Ok(Ok(report)) => report.registered_after.into_iter().for_each(|d| metrics.registered_after(d)),
                Ok(Err(e)) => cluster.event(HealthKind::Error, format!("server-ping could not reconcile: {e}")),
                Err(_) => cluster.event(
                    HealthKind::Error,
                    format!("server-ping gave up after {} s; AWS is slow or unreachable", PER_CLUSTER_BUDGET.as_secs()),
                ),
            }
        }
        .instrument(span)
    }

    /// Our agents whose cluster profile no longer exists have nothing to run on: their tasks
    /// in the clusters we can reach are stopped ([`Cluster::stop_strays`]), then the agents are
    /// removed.
    async fn remove_agents_of_unknown_profiles(&self, clusters: &[Arc<Cluster>], agents: &[AgentMetadata]) {
        let keys: HashSet<&str> = clusters.iter().map(|c| c.key().as_str()).collect();
        let orphans: Vec<AgentId> = agents
            .iter()
            .filter(|a| cluster_key_of_agent(&a.agent_id).is_some_and(|k| !keys.contains(k)))
            .map(|a| AgentId::from(a.agent_id.as_str()))
            .collect();
        if orphans.is_empty() {
            return;
        }
        let gone: std::collections::BTreeSet<ClusterKey> =
            orphans.iter().filter_map(|a| cluster_key_of_agent(a)).map(ClusterKey::from).collect();
        // One look per AWS cluster (several profiles may act in one), per vanished key.
        let mut seen = HashSet::new();
        for cluster in clusters {
            let (aws, profile) = (cluster.aws(), cluster.profile());
            let place = (aws.account_id.clone(), aws.region.clone(), profile.cluster_short_name().to_string());
            if !seen.insert(place) {
                continue;
            }
            for key in &gone {
                if let Err(e) = cluster.stop_strays(key).await {
                    tracing::warn!(key = key.as_str(), error = %e, "could not look for tasks of a cluster profile that no longer exists");
                }
            }
        }
        tracing::warn!(count = orphans.len(), "removing GoCD agents of cluster profiles that no longer exist");
        if self.gocd().disable_agents(&orphans).await.is_ok() {
            let _ = self.gocd().delete_agents(&orphans).await;
        }
    }
}

fn group_by_cluster(agents: &[AgentMetadata]) -> HashMap<&str, HashMap<AgentId, AgentMetadata>> {
    let mut by_cluster: HashMap<&str, HashMap<AgentId, AgentMetadata>> = HashMap::new();
    for agent in agents {
        if let Some(key) = cluster_key_of_agent(&agent.agent_id) {
            by_cluster.entry(key).or_default().insert(agent.agent_id.as_str().into(), agent.clone());
        }
    }
    by_cluster
}
