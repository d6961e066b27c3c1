//! `Plugin`: the state every handler shares — the port to GoCD, the GoCD server's identity, the
//! AWS clients per account and the engine of each cluster profile ([`Cluster`]). Nothing here
//! is persisted: AWS is the store (`docs/design.md`, "Where the truth lives"), and a new process
//! adopts what it finds there. Server-ping across every cluster profile is `plugin/ping.rs`.

mod leftovers;
mod ping;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};

use tokio::sync::OnceCell;

use crate::aws::Accounts;
use crate::aws::AwsClients;
use crate::cluster::base::gocd::console_line;
use crate::cluster::base::identity::{cluster_key, cluster_key_of_agent, settings_fingerprint};
use crate::cluster::base::locks::{Mutex, MutexGuard};
use crate::cluster::Retirement;
use crate::cluster::{Cluster, EngineOptions, Gocd};
use crate::error::{PluginError, Result};
use crate::ids::{ClusterKey, SettingsFingerprint};
use crate::protocol::host_calls::ServerInfo;
use crate::protocol::types::JobIdentifier;
use crate::settings::{ClusterProfile, FieldError, Properties};

/// Knobs of the plugin itself (not of the wire).
#[derive(Debug, Clone, Default)]
pub struct PluginOptions {
    /// Counters and histograms the plugin feeds (served by `serve --metrics-addr`).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Knobs of every cluster profile's engine.
    pub engine: EngineOptions,
}

/// One request's cluster profile, as its own properties say, taken once.
#[derive(Debug, Clone)]
pub struct ProfileSnapshot {
    /// The profile parsed from the request's properties.
    pub profile: ClusterProfile,
    /// Their [`settings_fingerprint`]: which team's profile the request's agents count against.
    pub settings: SettingsFingerprint,
}

/// Shared by every request handler.
#[derive(Debug)]
pub struct Plugin {
    gocd: Arc<dyn Gocd>,
    server: OnceCell<ServerInfo>,
    accounts: Accounts,
    clusters: Mutex<HashMap<ClusterKey, Arc<Cluster>>>,
    metrics: Arc<crate::metrics::Metrics>,
    engine: EngineOptions,
    /// The event queues read for the serving profiles (`EventQueueUrl`).
    event_queues: crate::cluster::reconcile::queue::EventQueues,
    /// The last server-ping's problems of profiles that cannot be served (sent again with
    /// every health update between pings).
    profile_problems: Mutex<Vec<crate::protocol::host_calls::HealthMessage>>,
    /// When this process last swept for leftovers (`plugin/leftovers.rs`).
    leftover_sweep: Mutex<leftovers::SweepClock>,
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
            event_queues: Default::default(),
            profile_problems: Mutex::new(Vec::new()),
            leftover_sweep: Mutex::new(leftovers::SweepClock::default()),
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

    /// The engine of the cluster profile with these properties, created on first use (with
    /// its AWS clients) and given the newest properties on each use.
    ///
    /// # Errors
    /// [`PluginError::Config`] for a profile that does not validate or has no region; AWS
    /// errors when the account the credentials act in cannot be learnt; host errors.
    pub async fn cluster(&self, props: &Properties) -> Result<Arc<Cluster>> {
        Ok(self.cluster_and_profile(props).await?.0)
    }

    /// [`Plugin::cluster`], and the profile parsed from these very properties with their
    /// settings fingerprint, both taken once: a request works on its own snapshot of its
    /// profile from start to end, whatever other requests send.
    ///
    /// # Errors
    /// As [`Plugin::cluster`].
    pub async fn cluster_and_profile(&self, props: &Properties) -> Result<(Arc<Cluster>, ProfileSnapshot)> {
        let profile = parse_cluster_profile(props)?;
        let settings = settings_fingerprint(props);
        let server = self.server_info().await?;
        let aws = self.accounts.clients_for(&profile, &server.server_id).await?;
        let key = self.key_of(&profile, &aws)?;
        // Served again under the engines' lock, which `forget_drained` holds too: an engine
        // this request serves is never forgotten as drained meanwhile.
        let clusters = self.clusters();
        if let Some(cluster) = clusters.get(&key).cloned() {
            // The same account, perhaps through new credentials.
            cluster.reconfigure(aws, profile.clone());
            cluster.serve_again(&settings, &profile);
            return Ok((cluster, ProfileSnapshot { profile, settings }));
        }
        drop(clusters);
        let engine = &self.engine;
        let fresh =
            Arc::new(Cluster::new(key.clone(), server.server_id, aws, profile.clone(), self.gocd.clone(), engine));
        let cluster = self.clusters().entry(key).or_insert(fresh).clone();
        cluster.serve_again(&settings, &profile);
        Ok((cluster, ProfileSnapshot { profile, settings }))
    }

    /// [`Plugin::cluster_and_profile`] for a job that needs an agent: when the profile cannot
    /// be served, the job's console says why (GoCD only logs a create-agent's 500; the job would
    /// wait with an empty console).
    ///
    /// # Errors
    /// As [`Plugin::cluster`].
    pub async fn cluster_for_job(
        &self,
        props: &Properties,
        job: &JobIdentifier,
    ) -> Result<(Arc<Cluster>, ProfileSnapshot)> {
        let found = self.cluster_and_profile(props).await;
        if found.is_ok() {
            self.sync_event_queues(); // a new profile's queue is read before its first task starts
        }
        if let Err(e) = &found {
            let _ = self.gocd.console_log(job, console_line(format!("could not start an agent: {e}"))).await;
        }
        found
    }

    /// The key of a profile whose clients are `aws`: where it acts (`docs/design.md`, "Where the
    /// truth lives").
    fn key_of(&self, profile: &ClusterProfile, aws: &AwsClients) -> Result<ClusterKey> {
        let Some(account) = aws.account_id.as_deref() else {
            // Not cached: the next request asks STS again.
            self.accounts.forget(profile);
            return Err(PluginError::Config(format!(
                "the AWS account of the credentials of cluster {} could not be learnt (STS GetCallerIdentity failed); \
                 the next request tries again",
                profile.cluster_name
            )));
        };
        Ok(cluster_key(account, &aws.region, &profile.cluster_name, profile.role_arn.as_deref()))
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
        all.sort_by(|a, b| a.key().cmp(b.key()));
        all
    }

    /// cluster-profile-changed: an edit that keeps the profile's key keeps its engine and
    /// everything in flight (reservations, launches of unknown outcome, the EC2 queue, finished
    /// jobs), and its agents count against the edited `MaxAgents`; a deleted profile's agents
    /// are stopped, and its engine with its instances retires unless another team's profile
    /// shares it ([`Cluster::profile_deleted`]); an edit that changes the key (another role,
    /// region, account or cluster) leaves the old engine draining: nothing new starts there,
    /// and its tasks stop as their jobs complete.
    pub async fn cluster_profile_changed(&self, old: Option<&Properties>, new: &Properties, deleted: bool) {
        let old = old.unwrap_or(new);
        let Some(old_cluster) = self.known_cluster_of(old).await else { return };
        if deleted {
            tracing::info!(cluster = %old_cluster.profile().cluster_name, "cluster profile deleted: stopping its agents");
            old_cluster.profile_deleted(&settings_fingerprint(old));
            return;
        }
        match self.cluster(new).await {
            Ok(edited) if Arc::ptr_eq(&edited, &old_cluster) => {
                edited.settings_edited(&settings_fingerprint(old), &settings_fingerprint(new));
                tracing::info!(cluster = %edited.profile().cluster_name, "cluster profile edited: its state is kept");
            }
            Ok(_) => {
                tracing::info!(cluster = %old_cluster.profile().cluster_name, "cluster profile moved: draining the old one");
                old_cluster.retire(Retirement::Replaced);
            }
            Err(e) => tracing::warn!(error = %e, "the edited cluster profile cannot be served; the old one drains"),
        }
    }

    /// The engine this process already has for these properties, if any (no AWS call beyond
    /// the cached clients).
    async fn known_cluster_of(&self, props: &Properties) -> Option<Arc<Cluster>> {
        let profile = ClusterProfile::parse(props).ok()?;
        let server = self.server.get()?;
        let aws = self.accounts.clients_for(&profile, &server.server_id).await.ok()?;
        let key = self.key_of(&profile, &aws).ok()?;
        self.clusters().get(&key).cloned()
    }

    /// Forgets an engine that drained completely.
    pub fn forget_drained(&self) {
        self.clusters().retain(|_, c| {
            let drained = c.is_drained();
            if drained {
                tracing::info!(cluster = %c.profile().cluster_name, "a retired cluster profile has drained");
                c.ec2().stop();
            }
            !drained
        });
    }

    /// Sends GoCD the plugin's server-health messages: the last server-ping's profile problems
    /// and every cluster's fresh events. Server-ping sends them, and so does an event from a
    /// queue that changed them (a stop, a drain), without waiting for the next ping.
    ///
    /// # Errors
    /// The failed call to GoCD.
    pub async fn send_health(&self) -> Result<()> {
        let mut messages = self.profile_problems.lock().unwrap_or_else(PoisonError::into_inner).clone();
        for cluster in self.known_clusters() {
            let fresh = cluster.events().fresh(cluster.now());
            messages.extend(
                fresh
                    .into_iter()
                    .map(|e| crate::protocol::host_calls::HealthMessage { kind: e.kind, message: e.message }),
            );
        }
        self.gocd.set_health_messages(&messages).await?;
        Ok(())
    }

    /// Notified when an event from a queue changed what server health should say.
    pub fn health_changed(&self) -> Arc<tokio::sync::Notify> {
        self.event_queues.changed()
    }

    /// Reads the event queue of every serving profile that names one, and no other
    /// (`cluster/reconcile/queue`).
    pub fn sync_event_queues(&self) {
        self.event_queues.sync(&self.known_clusters());
    }

    /// Stops background work at shutdown (the EC2 capacity loops, the event queue pollers).
    pub fn shutdown(&self) {
        self.event_queues.stop();
        self.known_clusters().iter().for_each(|c| c.ec2().stop());
    }

    fn clusters(&self) -> MutexGuard<'_, HashMap<ClusterKey, Arc<Cluster>>> {
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
