//! `Plugin`: the state every handler shares — the host client, the GoCD server's identity, the
//! AWS clients per account and the run-time state of each cluster profile. Nothing here is
//! persisted: AWS is the store (DESIGN.md §2), and a new process adopts what it finds there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::OnceCell;

use crate::aws::Accounts;
use crate::cluster::identity::{cluster_key, cluster_key_of_agent};
use crate::cluster::Cluster;
use crate::error::{PluginError, Result};
use crate::protocol::host_calls::ServerInfo;
use crate::server::host::HostClient;
use crate::settings::{ClusterProfile, FieldError, Properties};

/// Knobs of the plugin itself (not of the wire).
#[derive(Debug, Clone, Default)]
pub struct PluginOptions {
    /// Counters and histograms the plugin feeds (served by `serve --metrics-addr`).
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// Shared by every request handler.
#[derive(Debug)]
pub struct Plugin {
    host: HostClient,
    server: OnceCell<ServerInfo>,
    accounts: Accounts,
    clusters: Mutex<HashMap<String, Arc<Cluster>>>,
    metrics: Arc<crate::metrics::Metrics>,
}

impl Plugin {
    /// A plugin talking back to the host through `host`.
    pub fn new(host: HostClient, options: PluginOptions) -> Self {
        Plugin {
            host,
            server: OnceCell::new(),
            accounts: Accounts::default(),
            clusters: Mutex::new(HashMap::new()),
            metrics: options.metrics,
        }
    }

    /// The plugin's metrics.
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.metrics
    }

    /// The GoCD server's callbacks.
    pub fn host(&self) -> &HostClient {
        &self.host
    }

    /// The GoCD server's id and URLs, asked once (and again only after a failure).
    ///
    /// # Errors
    /// The failed server-info call.
    pub async fn server_info(&self) -> Result<ServerInfo> {
        let info = self
            .server
            .get_or_try_init(|| async {
                let info = self.host.server_info().await?;
                if info.server_id.is_empty() {
                    return Err(PluginError::Internal("the GoCD server sent an empty server_id".into()));
                }
                Ok::<_, PluginError>(info)
            })
            .await?;
        Ok(info.clone())
    }

    /// The run-time state of the cluster profile with these properties, created on first use
    /// (with its AWS clients) and updated with the newest properties on each use.
    ///
    /// # Errors
    /// [`PluginError::Config`] for a profile that does not validate or has no region; host errors.
    pub async fn cluster(&self, props: &Properties) -> Result<Arc<Cluster>> {
        let profile = parse_cluster_profile(props)?;
        let server = self.server_info().await?;
        let region = self.accounts.region_of(&profile).await?;
        let key = cluster_key(&region, &profile.cluster_name, profile.role_arn.as_deref());
        if let Some(cluster) = self.clusters().get(&key).cloned() {
            cluster.set_profile(profile);
            return Ok(cluster);
        }
        let aws = self.accounts.clients_for(&profile, &server.server_id).await?;
        let fresh = Arc::new(Cluster::new(key.clone(), server.server_id, aws, profile));
        Ok(self.clusters().entry(key).or_insert(fresh).clone())
    }

    /// The key a profile would have, without creating anything.
    ///
    /// # Errors
    /// As [`Plugin::cluster`].
    pub async fn cluster_key(&self, props: &Properties) -> Result<String> {
        let profile = parse_cluster_profile(props)?;
        let region = self.accounts.region_of(&profile).await?;
        Ok(cluster_key(&region, &profile.cluster_name, profile.role_arn.as_deref()))
    }

    /// The cluster an agent of ours belongs to, if this process knows it.
    pub fn cluster_of_agent(&self, agent_id: &str) -> Option<Arc<Cluster>> {
        let key = cluster_key_of_agent(agent_id)?;
        self.clusters().get(key).cloned()
    }

    /// Every cluster known to this process.
    pub fn known_clusters(&self) -> Vec<Arc<Cluster>> {
        let mut all: Vec<_> = self.clusters().values().cloned().collect();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all
    }

    /// Drops whatever is cached for the cluster profile with these properties: its clients
    /// (credentials, assumed role) and its state, which the next use adopts again from AWS.
    pub fn forget_cluster_profile(&self, props: &Properties) {
        let Ok(profile) = ClusterProfile::parse(props) else { return };
        self.accounts.forget(&profile);
        self.clusters().retain(|_, c| {
            let p = c.profile();
            let same = p.cluster_name == profile.cluster_name
                && p.role_arn == profile.role_arn
                && profile.region.as_ref().is_none_or(|r| *r == c.aws.region);
            if same {
                tracing::info!(cluster = %p.cluster_name, "forgot cached state of the cluster profile");
            }
            !same
        });
    }

    /// Stops background work at shutdown (the EC2 capacity loops).
    pub fn shutdown(&self) {
        self.known_clusters().iter().for_each(|c| c.ec2.stop());
    }

    fn clusters(&self) -> MutexGuard<'_, HashMap<String, Arc<Cluster>>> {
        self.clusters.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Parses a cluster profile, turning validation problems into one operator sentence.
///
/// # Errors
/// [`PluginError::Config`] listing every problem.
pub fn parse_cluster_profile(props: &Properties) -> Result<ClusterProfile> {
    ClusterProfile::parse(props)
        .map_err(|errors| PluginError::Config(format!("the cluster profile is not valid: {}", describe(&errors))))
}

/// `Key: message; Key: message`.
pub fn describe(errors: &[FieldError]) -> String {
    errors.iter().map(|e| format!("{}: {}", e.key, e.message)).collect::<Vec<_>>().join("; ")
}
