//! What pricing a job needs that no price table holds, read from AWS when the job completes
//! and kept: the instance type of a capacity provider's container instance it ran on
//! (DescribeContainerInstances, once per instance), the Spot price of the plugin's own Spot
//! instance (DescribeSpotPriceHistory, once an hour per type and zone), and a price the table
//! lacks ([`super::super::price_fill`], the Price List, once an hour per gap). Each read is
//! shared by the completions that need it at once; a failed one leaves the job's cost "not
//! known" (or a Spot instance at on-demand), said in its line. A completion waits for them at
//! most [`READS_AT_MOST`]; a read still going then goes on behind it, and what it learns is kept
//! for the next completions, which use it instead of asking AWS again (AWS counts every call
//! against the account's budget).

use std::sync::Arc;

use tracing::Instrument;

use super::super::price_fill::{self, Gap};
use super::{provider_spot_key, spot_key, ProviderInstance, Rate, Unpriced};
use crate::aws::AwsError;
use crate::cluster::agents::tasks::Capacity;
use crate::cluster::capacity::providers::ProviderKind;
use crate::cluster::Cluster;
use crate::ids::AgentId;

/// The longest a job's completion waits for what its price needs.
const READS_AT_MOST: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a Spot price read from EC2 is used before it is read again.
const SPOT_PRICE_KEPT: std::time::Duration = std::time::Duration::from_secs(3600);

impl Cluster {
    /// Reads from AWS what pricing `agent_id`'s job needs and no table holds (the module doc),
    /// before [`Cluster::job_cost`] prices it: waits at most [`READS_AT_MOST`], as the agent's
    /// task is stopped after it (a slow read leaves the job's cost not known, never its task
    /// running). The reads run as the engine's background work, so one that outlasts the wait is
    /// not cancelled: it ends, and keeps what it read, behind the completion.
    pub(in crate::cluster) async fn read_what_pricing_needs(self: &Arc<Self>, agent_id: &AgentId) {
        let (done, read) = tokio::sync::oneshot::channel();
        let (cluster, agent) = (self.clone(), agent_id.clone());
        let reads = async move {
            cluster.learn_provider_instance(&agent).await;
            cluster.learn_spot_price(&agent).await;
            cluster.fill_price_gaps(&agent).await;
            let _ = done.send(());
        };
        self.spawn_background(reads.in_current_span());
        // An error: the reads ended without finishing (the runtime is shutting down).
        if !matches!(tokio::time::timeout(READS_AT_MOST, read).await, Ok(Ok(()))) {
            tracing::info!(
                agent_id = agent_id.as_str(),
                "reading what the job's price needs took too long; its cost may be not known"
            );
        }
    }

    /// Reads the Spot price of the plugin's own Spot instance that `agent_id`'s task ran on, once
    /// an hour per instance type and zone; a failed read leaves the job priced at on-demand,
    /// said in its line (a refused one for the hour, a transient one until the next completion).
    async fn learn_spot_price(&self, agent_id: &AgentId) {
        let Some(record) = self.registry().get(agent_id).cloned() else { return };
        let Some(arn) = record.task.as_ref().and_then(|t| t.container_instance_arn.clone()) else { return };
        let ours = {
            let st = self.ec2().state();
            st.instances.values().find(|i| i.container.as_ref().is_some_and(|c| c.arn == arn)).and_then(spot_key)
        };
        let os = self.os_of(&record);
        let a_providers = || {
            let cost = self.cost();
            cost.provider_instances.get(&arn).and_then(|cell| cell.get()).and_then(|i| provider_spot_key(i, os))
        };
        let Some(key) = ours.or_else(a_providers) else { return };
        let now = self.now();
        let fresh = || {
            let cost = self.cost();
            cost.spot_prices
                .get(&key)
                .is_some_and(|(_, at)| now.duration_since(*at).unwrap_or_default() < SPOT_PRICE_KEPT)
        };
        // Checked before waiting for another read (the usual case) and again after it.
        if fresh() {
            return;
        }
        let reading = self.cost().reads.clone();
        let _one_at_a_time = reading.lock().await;
        if fresh() {
            return;
        }
        let (instance_type, zone, os) = &key;
        let price = match crate::aws::ec2::spot_price(&self.aws(), instance_type, zone, *os).await {
            Ok(Some(price)) => Some(price),
            Ok(None) => {
                tracing::info!(instance_type, zone, "EC2 gave no Spot price; jobs are priced at on-demand for an hour");
                None
            }
            Err(e) if e.transient() => {
                tracing::info!(instance_type, zone, error = %e, "the Spot price could not be read now; this job is priced at on-demand");
                return;
            }
            Err(e) => {
                tracing::info!(instance_type, zone, error = %e, "the Spot price could not be read (the role needs ec2:DescribeSpotPriceHistory); jobs are priced at on-demand for an hour");
                None
            }
        };
        let mut cost = self.cost();
        if cost.spot_prices.len() >= 256 {
            cost.spot_prices.clear();
        }
        cost.spot_prices.insert(key, (price, now));
    }

    /// Reads from the Price List what the table lacks to price `agent_id`'s job (see
    /// [`super::price_fill`]): each gap once an hour at most, with the profile's credentials.
    async fn fill_price_gaps(&self, agent_id: &AgentId) {
        let Some(record) = self.registry().get(agent_id).cloned() else { return };
        let region = self.aws().region.clone();
        let mut wanted = Vec::new();
        match self.rate(&record, &region) {
            Err(Unpriced { gap: Some(gap), .. }) => wanted.push(gap),
            Ok(Rate::Ec2 { volume_priced: false, volume_gib, .. }) if volume_gib > 0 => wanted.push(Gap::Gp3),
            _ => {}
        }
        if wanted.is_empty() {
            return;
        }
        let reading = self.cost().reads.clone();
        let _one_at_a_time = reading.lock().await;
        let gaps = self.cost().filled.to_ask(&region, wanted, self.now());
        let today = jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
        for gap in gaps {
            match price_fill::read(&self.aws(), &region, &gap, &today).await {
                Ok(read) if read.fargate.is_empty() && read.ec2.is_empty() && read.gp3_gb_month.is_empty() => {
                    tracing::info!(?gap, region, "the AWS Price List lists no price for this; it stays unknown");
                }
                Ok(read) => {
                    tracing::info!(?gap, region, "a price the table lacked was read from the AWS Price List");
                    let mut cost = self.cost();
                    cost.filled.add(read);
                    cost.table = None;
                }
                Err(e) => tracing::info!(
                    ?gap,
                    region,
                    error = %e,
                    "a price the table lacks could not be read from the AWS Price List (the profile's role needs pricing:GetProducts); asked again in an hour"
                ),
            }
        }
    }

    /// Describes the capacity provider's container instance `agent_id`'s task ran on, once per
    /// instance, so that its job can be priced: its type and size (DescribeContainerInstances)
    /// and whether it is Spot (DescribeInstances, only read: the instance is the group's). A
    /// Fargate task, or an instance described already, needs no call; a failed
    /// DescribeContainerInstances leaves the job's cost "not known", a failed DescribeInstances
    /// the instance priced at on-demand, each said in its line.
    async fn learn_provider_instance(&self, agent_id: &AgentId) {
        let Some(record) = self.registry().get(agent_id).cloned() else { return };
        let Some(task) = record.task.as_ref().filter(|_| record.capacity == Some(Capacity::Provider)) else { return };
        let Some(arn) = task.container_instance_arn.clone() else { return };
        let kind = self.provider_kind(&record, &task.capacity);
        if matches!(kind, Some(ProviderKind::Fargate | ProviderKind::ManagedInstances)) {
            return;
        }
        let cell = {
            let mut cost = self.cost();
            if cost.provider_instances.len() >= 1000 {
                cost.provider_instances.clear();
            }
            cost.provider_instances.entry(arn.clone()).or_default().clone()
        };
        let cluster = self.profile().cluster_name.clone();
        let described = cell
            .get_or_try_init(|| async {
                let found =
                    crate::aws::ec2::describe_container_instances(&self.aws(), &cluster, std::slice::from_ref(&arn))
                        .await?;
                let found = found.into_iter().find(|c| c.arn == arn);
                let container = found.ok_or_else(|| {
                    AwsError::in_answer("DescribeContainerInstances", "the instance was not in its answer")
                })?;
                let spot = match &container.ec2_id {
                    None => None,
                    Some(id) => match crate::aws::ec2::spot_or_not(&self.aws(), std::slice::from_ref(id)).await {
                        Ok(found) => found.into_iter().find(|(i, _)| i == id).map(|(_, spot)| spot),
                        Err(e) => {
                            tracing::info!(instance = id.as_str(), error = %e, "whether a capacity provider's instance is Spot is not known; it is priced at on-demand");
                            None
                        }
                    },
                };
                Ok::<_, AwsError>(ProviderInstance { container, spot })
            })
            .await;
        if let Err(e) = described {
            tracing::info!(agent_id = agent_id.as_str(), error = %e, "the instance a job ran on is not described; its cost is not known");
        }
    }
}
