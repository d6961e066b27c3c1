//! `Plugin`: the state every handler shares — the port to GoCD, the GoCD server's identity, the
//! AWS clients per account and the engine of each cluster profile ([`Cluster`]). Nothing here
//! is persisted: AWS is the store (DESIGN.md §2), and a new process adopts what it finds there.
//! Server-ping across every cluster profile is `plugin/ping.rs`.

mod ping;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::OnceCell;

use crate::aws::Accounts;
use crate::cluster::identity::{cluster_key, cluster_key_of_agent};
use crate::cluster::{Cluster, EngineOptions, Gocd};
use crate::error::{PluginError, Result};
use crate::protocol::host_calls::ServerInfo;
use crate::settings::{ClusterProfile, FieldError, Properties};

/// Knobs of the plugin itself (not of the wire).
#[derive(Debug, Clone, Default)]
pub struct PluginOptions {
    /// Counters and histograms the plugin feeds (served by `serve --metrics-addr`).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Knobs of every cluster profile's engine.
    pub engine: EngineOptions,
}

/// Shared by every request handler.
#[derive(Debug)]
pub struct Plugin {
    gocd: Arc<dyn Gocd>,
    server: OnceCell<ServerInfo>,
    accounts: Accounts,
    clusters: Mutex<HashMap<String, Arc<Cluster>>>,
    metrics: Arc<crate::metrics::Metrics>,
    engine: EngineOptions,
}

impl Plugin {
    /// A plugin talking back to GoCD through `gocd`.
    pub fn new(gocd: Arc<dyn Gocd>, options: PluginOptions) -> Self {
        Plugin {
            gocd,
            server: OnceCell::new(),
            accounts: Accounts::default(),
            clusters: Mutex::new(HashMap::new()),
            metrics: options.metrics,
            engine: options.engine,
        }
    }

    /// The plugin's metrics.
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.metrics
    }

    /// The port to GoCD.
    pub fn gocd(&self) -> &Arc<dyn Gocd> {
        &self.gocd
    }

    /// The GoCD server's id and URLs, asked once (and again only after a failure).
    ///
    /// # Errors
    /// The failed server-info call.
    pub async fn server_info(&self) -> Result<ServerInfo> {
        let info = self
            .server
            .get_or_try_init(|| async {
                let info = self.gocd.server_info().await?;
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
        let fresh =
            Arc::new(Cluster::new(key.clone(), server.server_id, aws, profile, self.gocd.clone(), &self.engine));
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

    /// The cluster of one of our agents: the one this process knows for its id, else the one
    /// of the cluster profile GoCD sent with the request (after a restart); `None` when neither
    /// names one.
    ///
    /// # Errors
    /// As [`Plugin::cluster`].
    pub async fn cluster_for_agent(&self, agent_id: &str, props: &Properties) -> Result<Option<Arc<Cluster>>> {
        match self.cluster_of_agent(agent_id) {
            Some(cluster) => Ok(Some(cluster)),
            None if !props.is_empty() => Ok(Some(self.cluster(props).await?)),
            None => Ok(None),
        }
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

/// Scrapes read the gauges of every known cluster (see `serve`, which attaches the plugin).
impl crate::metrics::ClusterGauges for Plugin {
    fn clusters(&self) -> Vec<Arc<Cluster>> {
        self.known_clusters()
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
