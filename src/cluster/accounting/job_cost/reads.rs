//! What pricing a job needs that no price table holds, read from AWS when the job completes
//! and kept: the instance type of a capacity provider's container instance it ran on
//! (DescribeContainerInstances, once per instance), the Spot price of the plugin's own Spot
//! instance (DescribeSpotPriceHistory, once an hour per type and zone), and a price the table
//! lacks ([`super::super::price_fill`], the Price List, once an hour per gap). Each read is
//! shared by the completions that need it at once; a failed one leaves the job's cost "not
//! known" (or a Spot instance at on-demand), said in its line. A completion waits for them at
//! most [`super::READS_AT_MOST`]; a read still going then goes on behind it, and what it learns is kept
//! for the next completions, which use it instead of asking AWS again (AWS counts every call
//! against the account's budget).

use std::time::SystemTime;

use super::super::price_fill::{self, Gap};
use super::{provider_kind, provider_spot_key, spot_key, Costs, ProviderInstance, Rate, Sources, Unpriced};
use crate::aws::AwsError;
use crate::cluster::agents::tasks::Capacity;
use crate::cluster::launch::providers::ProviderKind;
use crate::ids::AgentId;

/// How long a Spot price read from EC2 is used before it is read again.
const SPOT_PRICE_KEPT: std::time::Duration = std::time::Duration::from_secs(3600);

impl Costs {
    /// Reads the Spot price of the plugin's own Spot instance that `agent_id`'s task ran on, once
    /// an hour per instance type and zone; a failed read leaves the job priced at on-demand,
    /// said in its line (a refused one for the hour, a transient one until the next completion).
    pub async fn learn_spot_price(&self, src: &Sources<'_>, agent_id: &AgentId, now: SystemTime) {
        let Some(record) = src.registry().get(agent_id).cloned() else { return };
        let Some(arn) = record.task.as_ref().and_then(|t| t.container_instance_arn.clone()) else { return };
        let ours = {
            let st = src.ec2.state();
            st.instance_of_container(&arn).and_then(spot_key)
        };
        let os = self.os_of(&record);
        let a_providers = || {
            let cost = self.lock();
            cost.provider_instances.get(&arn).and_then(|cell| cell.get()).and_then(|i| provider_spot_key(i, os))
        };
        let Some(key) = ours.or_else(a_providers) else { return };
        let fresh = || {
            let cost = self.lock();
            cost.spot_prices
                .get(&key)
                .is_some_and(|(_, at)| now.duration_since(*at).unwrap_or_default() < SPOT_PRICE_KEPT)
        };
        // Checked before waiting for another read (the usual case) and again after it.
        if fresh() {
            return;
        }
        let reading = self.lock().reads.clone();
        let _one_at_a_time = reading.lock().await;
        if fresh() {
            return;
        }
        let (instance_type, zone, os) = &key;
        let price = match crate::aws::ec2::spot_price(&src.aws, instance_type, zone, *os).await {
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
        let mut cost = self.lock();
        if cost.spot_prices.len() >= 256 {
            cost.spot_prices.clear();
        }
        cost.spot_prices.insert(key, (price, now));
    }

    /// Reads from the Price List what the table lacks to price `agent_id`'s job (see
    /// [`crate::cluster::accounting::price_fill`]): each gap once an hour at most, with the profile's credentials.
    pub async fn fill_price_gaps(&self, src: &Sources<'_>, agent_id: &AgentId, now: SystemTime) {
        let Some(record) = src.registry().get(agent_id).cloned() else { return };
        let region = src.aws.region.clone();
        let mut wanted = Vec::new();
        match self.rate(src, &record, &region) {
            Err(Unpriced { gap: Some(gap), .. }) => wanted.push(gap),
            Ok(Rate::Ec2 { volume_priced: false, volume_gib, .. }) if volume_gib > 0 => wanted.push(Gap::Gp3),
            _ => {}
        }
        if wanted.is_empty() {
            return;
        }
        let reading = self.lock().reads.clone();
        let _one_at_a_time = reading.lock().await;
        let gaps = self.lock().filled.to_ask(&region, wanted, now);
        let today =
            jiff::Timestamp::try_from(now).map_or_else(|_| String::new(), |t| t.strftime("%Y-%m-%d").to_string());
        for gap in gaps {
            match price_fill::read(&src.aws, &region, &gap, &today).await {
                Ok(read) if read.fargate.is_empty() && read.ec2.is_empty() && read.gp3_gb_month.is_empty() => {
                    tracing::info!(?gap, region, "the AWS Price List lists no price for this; it stays unknown");
                }
                Ok(read) => {
                    tracing::info!(?gap, region, "a price the table lacked was read from the AWS Price List");
                    let mut cost = self.lock();
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
    pub async fn learn_provider_instance(&self, src: &Sources<'_>, agent_id: &AgentId) {
        let Some(record) = src.registry().get(agent_id).cloned() else { return };
        let Some(task) = record.task.as_ref().filter(|_| record.capacity == Some(Capacity::Provider)) else { return };
        let Some(arn) = task.container_instance_arn.clone() else { return };
        let kind = provider_kind(src, &record, &task.capacity);
        if matches!(kind, Some(ProviderKind::Fargate | ProviderKind::ManagedInstances)) {
            return;
        }
        let cell = {
            let mut cost = self.lock();
            if cost.provider_instances.len() >= 1000 {
                cost.provider_instances.clear();
            }
            cost.provider_instances.entry(arn.clone()).or_default().clone()
        };
        let cluster = src.profile_of(&record.settings).cluster_name.clone();
        let described = cell
            .get_or_try_init(|| async {
                let found =
                    crate::aws::ec2::describe_container_instances(&src.aws, &cluster, std::slice::from_ref(&arn))
                        .await?;
                let found = found.into_iter().find(|c| c.arn == arn);
                let container = found.ok_or_else(|| {
                    AwsError::in_answer("DescribeContainerInstances", "the instance was not in its answer")
                })?;
                let spot = match &container.ec2_id {
                    None => None,
                    Some(id) => match crate::aws::ec2::spot_or_not(&src.aws, std::slice::from_ref(id)).await {
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
