//! Cost per job at run time: when a job completes, what it cost by the rules of
//! [`crate::cost::job`] and the price table of its agent's own cluster profile (the embedded
//! one, with that profile's `PriceTable` file laid over it), from what
//! the plugin already knows of its agent's task (the times and size of its last description)
//! and what [`reads`] learns once from AWS for it (a capacity provider instance's type, a Spot
//! price, a price the table lacks). The result goes to the job's console (one line), the log
//! (one line with pipeline, stage, job and cost), and this engine's [`Ledger`] (the report's
//! cost per pipeline and stage, the metrics' counters).
//!
//! The idle time of warm and kept agents is their pool's cost: taken when such an agent is given
//! a job (the wait before it) and when it is stopped while it waits ([`Costs::idle_agent_stopped`]).
//!
//! When ECS has not said `stoppedAt` by the job's completion (the usual case: StopTask is sent at
//! that moment), the completion is the end of the agent's billed time.

mod reads;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
use std::time::SystemTime;

use tokio::sync::OnceCell;

use super::price_fill::{Filled, Gap};
use crate::aws::ec2_types::ContainerInstance;
use crate::aws::AwsClients;
use crate::cluster::agents::tasks::Capacity;
use crate::cluster::agents::AgentRecord;
use crate::cluster::agents::Registry;
use crate::cluster::base::locks::{Mutex, MutexGuard};
use crate::cluster::base::served::Served;
use crate::cluster::capacity::ec2::instance::InstanceRecord;
use crate::cluster::capacity::ec2::pool::Pool;
use crate::cluster::capacity::ec2::pools::pool_profile;
use crate::cluster::launch::providers::{ProviderCache, ProviderKind};
use crate::cost::job::{
    duration_words, ec2_job_share, per_second, reservation_fraction, split, usd, AgentTimes, Span, Split,
};
use crate::cost::ledger::{Ledger, Summary};
use crate::cost::{fargate_billing_start, fargate_hourly, gp3_hourly, CostError, Market, PriceTable, TaskSize};
use crate::ids::{AgentId, SettingsFingerprint};
use crate::platform::{Arch, OsClass};
use crate::protocol::types::JobIdentifier;
use crate::settings::ClusterProfile;
use crate::settings::ElasticProfile;

/// What an elastic profile says of its tasks' size, kept by its hash.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Basis {
    cpu: u32,
    memory: u32,
    arch: Arch,
    os: OsClass,
    ephemeral_gb: f64,
}

/// The cost part of an engine's state.
#[derive(Debug, Default)]
pub struct CostState {
    ledger: Ledger,
    /// Up to when each kept or warm agent's time was charged (to a job or its pool).
    charged_until: HashMap<AgentId, SystemTime>,
    /// Tasks' sizes by elastic profile hash, from the requests seen since the start.
    basis: HashMap<String, Basis>,
    /// The price table, with the `PriceTable` path it was read for.
    table: Option<(Option<String>, Arc<PriceTable>)>,
    /// What jobs paid of each EC2 instance so far (by instance id; gone instances are forgotten
    /// once there are many).
    ec2_paid: HashMap<String, f64>,
    /// Capacity providers' container instances that agents ran on, by ARN (their type, size and
    /// market do not change), described once each (concurrent completions share the call; a
    /// failed one is tried again at the next).
    provider_instances: HashMap<String, Arc<OnceCell<ProviderInstance>>>,
    /// Spot prices an hour by (instance type, zone, OS), with when they were asked for (`None`:
    /// EC2 gave none, or refused the read); asked again after `reads::SPOT_PRICE_KEPT`.
    spot_prices: HashMap<SpotKey, (Option<f64>, SystemTime)>,
    /// Figures the table lacked, read from the Price List ([`super::price_fill`]).
    filled: Filled,
    /// Held while a price is read from AWS (a Spot price, the Price List): completions at once
    /// share one read.
    reads: Arc<tokio::sync::Mutex<()>>,
}

/// A capacity provider's instance, as far as pricing needs it.
#[derive(Debug, Clone)]
struct ProviderInstance {
    container: ContainerInstance,
    /// Whether it is a Spot instance (`None`: EC2 did not say; priced at on-demand).
    spot: Option<bool>,
}

/// Why an agent cannot be priced, with the table's gap behind it when that is the reason.
#[derive(Debug, Clone)]
struct Unpriced {
    why: String,
    gap: Option<Gap>,
}

impl From<String> for Unpriced {
    fn from(why: String) -> Unpriced {
        Unpriced { why, gap: None }
    }
}

impl From<&str> for Unpriced {
    fn from(why: &str) -> Unpriced {
        Unpriced { why: why.to_string(), gap: None }
    }
}

impl Unpriced {
    /// The table lacks `gap`'s figure (`missing` says which).
    fn missing(missing: &impl std::fmt::Display, gap: Gap) -> Unpriced {
        Unpriced { why: price_hint(&missing.to_string()), gap: Some(gap) }
    }
}

/// Where a Spot price applies: (instance type, zone, OS).
type SpotKey = (String, String, OsClass);

/// What an hour of an EC2 instance (ours, or a capacity provider's) costs, by its market.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ec2Price {
    /// On demand: the table's price.
    OnDemand,
    /// Spot, at EC2's Spot price now (an hour).
    Spot(f64),
    /// Spot, whose price EC2 did not give: priced at on-demand, said so.
    SpotNotKnown,
}

impl Ec2Price {
    /// The market of an instance whose Spot key is `spot` (`None`: on demand), by the Spot
    /// prices read so far.
    fn of(spot: Option<SpotKey>, cost: &CostState) -> Ec2Price {
        match spot {
            None => Ec2Price::OnDemand,
            Some(key) => {
                let price = cost.spot_prices.get(&key).and_then(|(p, _)| *p);
                price.map_or(Ec2Price::SpotNotKnown, Ec2Price::Spot)
            }
        }
    }

    /// The instance's price an hour: its Spot price, else the table's on-demand price of its type.
    fn hourly(self, table: &PriceTable, region: &str, instance_type: &str) -> Result<f64, Unpriced> {
        match self {
            Ec2Price::Spot(hourly) => Ok(hourly),
            Ec2Price::OnDemand | Ec2Price::SpotNotKnown => table
                .ec2_hour(region, instance_type)
                .map_err(|e| Unpriced::missing(&e, Gap::Ec2(instance_type.to_string()))),
        }
    }
}

/// How an agent is priced: per second on Fargate, or a share of an EC2 instance.
#[derive(Debug, Clone)]
enum Rate {
    Fargate {
        hourly: f64,
        minimum: u64,
        size: TaskSize,
    },
    Ec2 {
        /// The instance's price an hour, its root volume's included when `volume_priced`.
        hourly: f64,
        fraction: f64,
        instance: String,
        instance_type: String,
        /// Its gp3 root volume's GiB, and whether the table prices gp3 in the region.
        volume_gib: u32,
        volume_priced: bool,
        market: Ec2Price,
        launched_at: SystemTime,
    },
    /// A share of an instance of a capacity provider's Auto Scaling group: the instance is the
    /// group's, so a job pays its reservation only, and the instance's idle time is nobody's here.
    Provider {
        /// The instance's price an hour: its Spot price when it is Spot and EC2 gave it, else
        /// on-demand.
        hourly: f64,
        fraction: f64,
        provider: String,
        instance: String,
        instance_type: String,
        market: Ec2Price,
    },
}

/// The longest a job's completion waits for what its price needs.
pub const READS_AT_MOST: std::time::Duration = std::time::Duration::from_secs(5);

/// USD by elastic profile hash.
pub type CostByProfile = Vec<(String, f64)>;

/// What pricing reads of the rest of the engine, lent for one pricing: the account's clients,
/// the agents, the EC2 instances, the capacity providers' kinds and the profiles served.
#[derive(Debug)]
pub struct Sources<'a> {
    /// The account's clients (their region is the prices').
    pub aws: Arc<AwsClients>,
    /// The agents.
    pub registry: &'a Mutex<Registry>,
    /// The plugin's own EC2 instances.
    pub ec2: &'a Pool,
    /// The capacity providers' kinds, as learned.
    pub providers: &'a ProviderCache,
    /// The profiles served, by settings fingerprint.
    pub served: &'a Served,
    /// The profile GoCD sent last: for an agent whose own profile is not served (not heard
    /// since the process started, or deleted).
    pub profile: Arc<ClusterProfile>,
}

impl Sources<'_> {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cluster profile of settings fingerprint `settings`, as GoCD last sent it.
    fn profile_of(&self, settings: &SettingsFingerprint) -> Arc<ClusterProfile> {
        self.served.profile_of(settings).unwrap_or_else(|| self.profile.clone())
    }
}

/// What jobs and warm pools cost an engine: its ledger and what pricing learned, behind one
/// lock. Taken before the registry's and the EC2 pool's, never after (docs/architecture.md,
/// "Locks").
#[derive(Debug, Default)]
pub struct Costs(Mutex<CostState>);

impl Costs {
    /// Remembers the size of a request's elastic profile (for its agents' cost).
    pub fn remember_size(&self, e: &ElasticProfile) {
        let basis = Basis {
            cpu: e.cpu,
            memory: e.memory,
            arch: Arch::of_ecs(&e.cpu_architecture),
            os: OsClass::of_family(&e.operating_system_family),
            ephemeral_gb: e.ephemeral_storage_gib.map_or(crate::cost::bill::FREE_EPHEMERAL_GB, f64::from),
        };
        let mut cost = self.lock();
        if cost.basis.len() < 1000 || cost.basis.contains_key(&e.hash) {
            cost.basis.insert(e.hash.clone(), basis);
        }
    }

    /// Cost today and over the last seven days, for the report.
    pub fn summary(&self, now: SystemTime) -> Summary {
        self.lock().ledger.summary(now, 10)
    }

    /// Jobs' and pools' cost by elastic profile since the process started, for the metrics.
    pub fn totals(&self) -> (CostByProfile, CostByProfile) {
        let cost = self.lock();
        let list = |m: &std::collections::BTreeMap<String, f64>| m.iter().map(|(k, v)| (k.clone(), *v)).collect();
        (list(cost.ledger.jobs_total()), list(cost.ledger.pools_total()))
    }

    /// A job completed on `agent_id` at `now`; `stops` when its agent stops with it. Works out
    /// and records its cost (and its pool's, for the idle time before it), logs it, and returns
    /// the console line; `None` when the agent is not known.
    pub fn job_cost(
        &self,
        src: &Sources<'_>,
        agent_id: &AgentId,
        job: &JobIdentifier,
        now: SystemTime,
        stops: bool,
    ) -> Option<String> {
        let region = src.aws.region.clone();
        let record = src.registry().get(agent_id).cloned()?;
        let charged = self.lock().charged_until.get(agent_id).copied();
        let task = record.task.as_ref();
        let end = if stops { task.and_then(|t| t.stopped_at).unwrap_or(now).min(now) } else { now };
        let given_at = (record.warm || record.served_jobs.len() > 1)
            .then_some(record.job_requested_at.or(record.assigned_at))
            .flatten();
        let parts = split(AgentTimes { billing_start: billing_start(&record), charged_until: charged, given_at, end });
        let ran = duration_words(parts.job.length());
        let priced = self.rate(src, &record, &region);
        let mut cost = self.lock();
        if stops {
            cost.charged_until.remove(agent_id);
        } else {
            cost.charged_until.insert(agent_id.clone(), end);
            self.forget_gone_agents(src, &mut cost);
        }
        let (usd_total, line) = match priced {
            Err(unpriced) => {
                (None, format!("{}: cost not known: {}", ran_on(&record, &ran, given_at.is_some()), unpriced.why))
            }
            Ok(rate) => {
                let (job_usd, detail, after) = self.price_job(src, &rate, &parts, &record, &region, now, &mut cost);
                if let Some(idle) = parts.pool_idle {
                    let idle_usd = idle_usd(&rate, idle);
                    cost.ledger.pool_idle(now, &record.elastic_profile, idle_usd);
                }
                cost.ledger.job(now, &job.pipeline_name, &job.stage_name, &record.elastic_profile, job_usd);
                let idle_note = parts.pool_idle.map_or(String::new(), |idle| {
                    format!(
                        "; the {} it waited idle before the job are its warm pool's cost",
                        duration_words(idle.length())
                    )
                });
                let head = ran_on(&record, &ran, given_at.is_some());
                (Some(job_usd), format!("{head} on {detail}: {}{after}{idle_note}", usd(job_usd)))
            }
        };
        drop(cost);
        log_job_cost(job, agent_id, &record.elastic_profile, parts.job.billed_seconds(), usd_total);
        Some(line)
    }

    /// A job's cost at `rate`, with the line's words for where it ran and what follows the
    /// amount; an EC2 job's payment is added to its instance's.
    #[allow(clippy::too_many_arguments)]
    fn price_job(
        &self,
        src: &Sources<'_>,
        rate: &Rate,
        parts: &Split,
        record: &AgentRecord,
        region: &str,
        now: SystemTime,
        cost: &mut CostState,
    ) -> (f64, String, String) {
        match rate {
            Rate::Fargate { hourly, minimum, size } => {
                let minimum = if parts.minimum { *minimum } else { 0 };
                let note = if parts.job.billed_seconds() < minimum {
                    format!(" (AWS bills {} at least)", duration_words(std::time::Duration::from_secs(minimum)))
                } else {
                    String::new()
                };
                (
                    per_second(*hourly, parts.job, minimum),
                    format!("{}{note}", fargate_words(size, region)),
                    String::new(),
                )
            }
            Rate::Ec2 { hourly, fraction, instance, instance_type, volume_gib, volume_priced, market, launched_at } => {
                let so_far = per_second(*hourly, Span::new(*launched_at, now), 60);
                let paid = cost.ec2_paid.get(instance).copied().unwrap_or(0.0);
                let others = self.others_on_instance(src, record, *hourly, now, cost);
                let share = ec2_job_share(*hourly, *fraction, parts.job, so_far, paid, others);
                if cost.ec2_paid.len() > 256 {
                    let st = src.ec2.state();
                    cost.ec2_paid.retain(|id, _| st.instance(id).is_some());
                }
                *cost.ec2_paid.entry(instance.clone()).or_default() += share.total();
                let volume = if *volume_priced { format!(", {volume_gib} GiB gp3") } else { String::new() };
                let spot = match market {
                    Ec2Price::Spot(hourly) => format!(", Spot at {} an hour", usd(*hourly)),
                    Ec2Price::OnDemand | Ec2Price::SpotNotKnown => String::new(),
                };
                let what = format!(
                    "EC2 instance {instance} ({instance_type}{spot}{volume}, {region}), reserving {:.0} % of it",
                    fraction * 100.0
                );
                let mut unpriced = if *volume_priced {
                    String::new()
                } else {
                    format!("; its {volume_gib} GiB gp3 root volume not priced: the price table has no gp3 price for {region}")
                };
                if *market == Ec2Price::SpotNotKnown {
                    unpriced.push_str("; a Spot instance, priced at on-demand: EC2 did not give its Spot price");
                }
                let after = format!(
                    " ({} for its reservation, {} its share of the instance's boot and idle time{unpriced})",
                    usd(share.reserved),
                    usd(share.boot_and_idle)
                );
                (share.total(), what, after)
            }
            Rate::Provider { hourly, fraction, provider, instance, instance_type, market } => {
                let (spot, at) = match market {
                    Ec2Price::Spot(hourly) => (format!(", Spot at {} an hour", usd(*hourly)), "the Spot price"),
                    Ec2Price::OnDemand => (String::new(), "the on-demand price"),
                    Ec2Price::SpotNotKnown => {
                        (", Spot".to_string(), "the on-demand price, EC2 not having given its Spot price")
                    }
                };
                let what = format!(
                    "capacity provider {provider}'s EC2 instance {instance} ({instance_type}{spot}, {region}), reserving {:.0} % of it",
                    fraction * 100.0
                );
                let after =
                    format!(" (its reservation at {at}; the instance and its idle time are its Auto Scaling group's)");
                (fraction * per_second(*hourly, parts.job, 0), what, after)
            }
        }
    }

    /// A warm or kept agent was stopped while it waited for a job: its idle time since its last
    /// charge, and since it began to wait, is its pool's cost. A kept agent retired between its
    /// job's end and that job's cost (a warm pass at that moment) has no charge mark yet: the
    /// time it began to wait keeps its job's time out of its pool's cost.
    pub fn idle_agent_stopped(&self, src: &Sources<'_>, agent_id: &AgentId, now: SystemTime) {
        let Some(record) = src.registry().get(agent_id).cloned() else { return };
        let Some(waiting_since) = record.waiting_since else { return };
        let region = src.aws.region.clone();
        let rate = self.rate(src, &record, &region);
        let mut cost = self.lock();
        let from = cost.charged_until.remove(agent_id).unwrap_or_else(|| billing_start(&record)).max(waiting_since);
        match rate {
            Ok(rate) => {
                let usd = idle_usd(&rate, Span::new(from, now));
                cost.ledger.pool_idle(now, &record.elastic_profile, usd);
            }
            Err(unpriced) => {
                tracing::info!(agent_id = agent_id.as_str(), why = %unpriced.why, "the idle agent's cost is not known")
            }
        }
    }

    /// How `record`'s agent is priced, or why it cannot be.
    fn rate(&self, src: &Sources<'_>, record: &AgentRecord, region: &str) -> Result<Rate, Unpriced> {
        let table = self.price_table(&src.profile_of(&record.settings))?;
        let basis = self.lock().basis.get(&record.elastic_profile).copied();
        let task = record.task.as_ref();
        let units = |s: Option<&String>| s.and_then(|v| v.parse::<u32>().ok());
        let cpu = units(task.and_then(|t| t.cpu.as_ref())).or(basis.map(|b| b.cpu));
        let memory = units(task.and_then(|t| t.memory.as_ref())).or(basis.map(|b| b.memory));
        let market = match (record.capacity, task.map(|t| t.capacity.as_str())) {
            (Some(Capacity::Fargate), _) | (Some(Capacity::Provider), Some("FARGATE")) => Market::Fargate,
            (Some(Capacity::FargateSpot), _) | (Some(Capacity::Provider), Some("FARGATE_SPOT")) => Market::FargateSpot,
            (Some(Capacity::Ec2), _) => return self.ec2_rate(src, record, &table, region, cpu, memory),
            (Some(Capacity::Provider), Some(provider)) if !provider.is_empty() => {
                return self.provider_rate(src, record, provider, &table, region, cpu, memory)
            }
            _ => return Err("the capacity it ran on is not known".into()),
        };
        let (Some(cpu), Some(memory)) = (cpu, memory) else {
            return Err("its task's size is not known".into());
        };
        let b = basis.unwrap_or(Basis { cpu, memory, arch: Arch::X86_64, os: OsClass::Linux, ephemeral_gb: 20.0 });
        let size =
            TaskSize { market, arch: b.arch, os: b.os, ephemeral_gb: b.ephemeral_gb, ..TaskSize::linux(cpu, memory) };
        let (hourly, minimum) = fargate_hourly(&table, &size, region).map_err(|e| match e {
            CostError::NoPrice(missing) => Unpriced::missing(&missing, Gap::Fargate),
            other => Unpriced::from(other.to_string()),
        })?;
        Ok(Rate::Fargate { hourly, minimum, size })
    }

    fn ec2_rate(
        &self,
        src: &Sources<'_>,
        record: &AgentRecord,
        table: &PriceTable,
        region: &str,
        cpu: Option<u32>,
        memory: Option<u32>,
    ) -> Result<Rate, Unpriced> {
        let arn = record.task.as_ref().and_then(|t| t.container_instance_arn.clone());
        let arn = arn.ok_or("its EC2 instance is not known")?;
        // Copied out of the pool's lock, which is never held while the cost's is taken (the
        // cost's is held while the pool's is taken, in `price_job`: docs/architecture.md, "Locks").
        // With the AMI it was launched from, as its pool's catalog describes it.
        let (instance, ami) = {
            let st = src.ec2.state();
            let instance = st.instance_of_container(&arn).cloned();
            let ami = instance.as_ref().and_then(|i| {
                let catalog = st.memory(i.pool())?.catalog()?;
                catalog.ami_for(catalog.arch_of(i.instance_type()), i.os()).cloned()
            });
            (instance, ami)
        };
        let instance = instance.ok_or("its EC2 instance is no longer known")?;
        let total = instance.container().map(|c| c.total).unwrap_or_default();
        let market = Ec2Price::of(spot_key(&instance), &self.lock());
        let compute = market.hourly(table, region, instance.instance_type())?;
        // Its gp3 root volume is part of the instance's price: `Ec2RootVolumeGiB` of its pool's
        // cluster profile (the profile GoCD sent last only when no served profile has its pool:
        // left over, untagged, or not heard since the process started), or its AMI's root when
        // that is larger, as the launch made it. A region the table has no gp3 price for is
        // said, not guessed.
        let pool = instance.pool().and_then(|key| pool_profile(src.served.profiles().0, key));
        let asked = pool.unwrap_or_else(|| src.profile.clone()).ec2.as_ref().map_or(0, |e| e.root_volume_gib);
        let volume_gib = ami.map_or(asked, |ami| ami.root_volume_gib(asked));
        let volume = gp3_hourly(table, region, volume_gib).ok();
        let fraction = reservation_fraction(cpu.unwrap_or(0), memory.unwrap_or(0), total.cpu, total.memory);
        Ok(Rate::Ec2 {
            hourly: compute + volume.unwrap_or(0.0),
            fraction,
            instance: instance.id().to_string(),
            instance_type: instance.instance_type().to_string(),
            volume_gib,
            volume_priced: volume.is_some(),
            market,
            launched_at: instance.launched_at(),
        })
    }

    /// The rate of an agent that ran on `provider`'s instances: its reservation of the instance
    /// it ran on (described by [`Costs::learn_provider_instance`]).
    #[allow(clippy::too_many_arguments)]
    fn provider_rate(
        &self,
        src: &Sources<'_>,
        record: &AgentRecord,
        provider: &str,
        table: &PriceTable,
        region: &str,
        cpu: Option<u32>,
        memory: Option<u32>,
    ) -> Result<Rate, Unpriced> {
        if provider_kind(src, record, provider) == Some(ProviderKind::ManagedInstances) {
            return Err(Unpriced::from(format!(
                "it ran on ECS Managed Instances ({provider}), whose management fee the price table does not hold"
            )));
        }
        let arn = record.task.as_ref().and_then(|t| t.container_instance_arn.as_deref());
        let arn = arn.ok_or_else(|| format!("the instance of {provider} it ran on is not known"))?;
        let os = self.os_of(record);
        let cost = self.lock();
        let instance = cost
            .provider_instances
            .get(arn)
            .and_then(|cell| cell.get())
            .ok_or_else(|| format!("the instance of {provider} it ran on could not be described"))?;
        let market = Ec2Price::of(provider_spot_key(instance, os), &cost);
        let instance = &instance.container;
        let instance_type = instance
            .instance_type
            .clone()
            .ok_or_else(|| format!("the instance of {provider} it ran on did not say its type"))?;
        let hourly = market.hourly(table, region, &instance_type)?;
        let total = instance.total;
        Ok(Rate::Provider {
            hourly,
            fraction: reservation_fraction(cpu.unwrap_or(0), memory.unwrap_or(0), total.cpu, total.memory),
            provider: provider.rsplit('/').next().unwrap_or(provider).to_string(),
            instance: instance.ec2_id.clone().unwrap_or_else(|| arn.rsplit('/').next().unwrap_or(arn).to_string()),
            instance_type,
            market,
        })
    }

    /// The OS `record`'s agent runs, as its elastic profile says (Linux when not known).
    fn os_of(&self, record: &AgentRecord) -> OsClass {
        self.lock().basis.get(&record.elastic_profile).map_or(OsClass::Linux, |b| b.os)
    }

    /// What the other live agents on `record`'s instance have run up by reservation, not yet
    /// paid.
    fn others_on_instance(
        &self,
        src: &Sources<'_>,
        record: &AgentRecord,
        hourly: f64,
        now: SystemTime,
        cost: &CostState,
    ) -> f64 {
        let Some(arn) = record.task.as_ref().and_then(|t| t.container_instance_arn.as_deref()) else { return 0.0 };
        let others: Vec<AgentRecord> = src
            .registry()
            .all()
            .filter(|a| a.agent_id != record.agent_id && a.phase.is_live())
            .filter(|a| a.task.as_ref().and_then(|t| t.container_instance_arn.as_deref()) == Some(arn))
            .cloned()
            .collect();
        let st = src.ec2.state();
        let total = st.instance_of_container(arn).and_then(|i| i.container()).map(|c| c.total);
        let total = total.unwrap_or_default();
        others
            .iter()
            .map(|a| {
                let units = |s: Option<&String>| s.and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
                let t = a.task.as_ref();
                let f = reservation_fraction(
                    units(t.and_then(|t| t.cpu.as_ref())),
                    units(t.and_then(|t| t.memory.as_ref())),
                    total.cpu,
                    total.memory,
                );
                let from = cost.charged_until.get(&a.agent_id).copied().unwrap_or_else(|| billing_start(a));
                f * per_second(hourly, Span::new(from, now), 0)
            })
            .sum()
    }

    /// Keeps the charge marks of live agents only, once they are many (an agent that stopped
    /// another way than job-completion or retirement leaves its mark behind).
    fn forget_gone_agents(&self, src: &Sources<'_>, cost: &mut CostState) {
        if cost.charged_until.len() > 256 {
            let registry = src.registry();
            cost.charged_until.retain(|id, _| registry.get(id).is_some_and(|a| a.phase.is_live()));
        }
    }

    /// The price table of `profile` (the agent's own cluster profile, as GoCD last sent it):
    /// read once per `PriceTable` path, again when the Price List filled a gap, and when the
    /// profiles sharing the engine name other paths, again at each change of path.
    fn price_table(&self, profile: &ClusterProfile) -> Result<Arc<PriceTable>, String> {
        let path = profile.price_table.clone();
        if let Some((p, table)) = &self.lock().table {
            if *p == path {
                return Ok(table.clone());
            }
        }
        let table = match &path {
            None => PriceTable::embedded(),
            Some(p) => PriceTable::embedded_with(std::path::Path::new(p)).map_err(|e| e.to_string())?,
        };
        let mut cost = self.lock();
        let table = Arc::new(cost.filled.under(table));
        cost.table = Some((path, table.clone()));
        Ok(table)
    }

    /// The cost state, locked. Never held across an `.await`.
    pub(in crate::cluster) fn lock(&self) -> MutexGuard<'_, CostState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The job's `job cost` log line (one JSON object with `--log-format json`); `cost_usd` is
/// `unknown` when the job could not be priced.
fn log_job_cost(job: &JobIdentifier, agent_id: &AgentId, elastic_profile: &str, seconds: u64, usd: Option<f64>) {
    macro_rules! line {
        ($cost:expr) => {
            tracing::info!(
                pipeline = %job.pipeline_name,
                pipeline_counter = job.pipeline_counter,
                stage = %job.stage_name,
                stage_counter = %job.stage_counter,
                job = %job.job_name,
                job_id = job.job_id,
                agent_id = agent_id.as_str(),
                elastic_profile,
                seconds,
                cost_usd = $cost,
                "job cost"
            )
        };
    }
    match usd {
        Some(usd) => line!(usd),
        None => line!("unknown"),
    }
}

/// When AWS began billing the agent's task: the pull, else its start, else ECS's acceptance,
/// else the agent's reservation.
fn billing_start(record: &AgentRecord) -> SystemTime {
    let task = record.task.as_ref();
    task.and_then(|t| fargate_billing_start(t.pull_started_at, t.started_at))
        .or(task.and_then(|t| t.created_at))
        .unwrap_or(record.created_at)
}

/// An idle span's cost at an agent's rate (no minimum: the task's was taken with its first job).
fn idle_usd(rate: &Rate, idle: Span) -> f64 {
    match rate {
        Rate::Fargate { hourly, .. } => per_second(*hourly, idle, 0),
        Rate::Ec2 { hourly, fraction, .. } | Rate::Provider { hourly, fraction, .. } => {
            fraction * per_second(*hourly, idle, 0)
        }
    }
}

/// The start of the console line.
fn ran_on(record: &AgentRecord, ran: &str, given: bool) -> String {
    if given {
        format!("this job ran {ran} on its agent {} (warm or kept)", record.agent_id)
    } else {
        format!("this job's agent ran {ran}")
    }
}

/// `Fargate, 1 vCPU 2 GB, us-east-1` (Spot, ARM64, Windows and extra storage said when so).
fn fargate_words(size: &TaskSize, region: &str) -> String {
    let market = match size.market {
        Market::Fargate => "Fargate",
        Market::FargateSpot => "Fargate Spot",
    };
    let mut what = format!("{market}, {} vCPU {} GB", size.vcpu, size.memory_gb);
    if size.arch == Arch::Arm64 {
        what.push_str(" ARM64");
    }
    if size.os == OsClass::Windows {
        what.push_str(" Windows");
    }
    if size.ephemeral_gb > crate::cost::bill::FREE_EPHEMERAL_GB {
        what.push_str(&format!(" {} GB storage", size.ephemeral_gb));
    }
    format!("{what}, {region}")
}

/// A missing price, with what the operator can do.
fn price_hint(missing: &str) -> String {
    format!(
        "{missing}, and the AWS Price List did not give it (the profile's role needs pricing:GetProducts; it is asked again after an hour); or name a price file in the cluster profile's PriceTable (`ecs-elastic-agent prices --refresh --out prices.json` writes one)"
    )
}

/// What `provider` (a name, or ECS's ARN of it) of the strategy of `record`'s own cluster
/// profile is, when known.
fn provider_kind(src: &Sources<'_>, record: &AgentRecord, provider: &str) -> Option<ProviderKind> {
    let name = provider.rsplit('/').next().unwrap_or(provider);
    let profile = src.profile_of(&record.settings);
    src.providers.current(&profile)?.providers.iter().find(|p| p.name == name).map(|p| p.kind)
}

/// The Spot price's key of one of our instances: (type, zone, OS); `None` when it is on demand
/// or its zone is not known.
fn spot_key(instance: &InstanceRecord) -> Option<SpotKey> {
    let zone = instance.container()?.zone.clone()?;
    instance.spot().then(|| (instance.instance_type().to_string(), zone, instance.os()))
}

/// The Spot price's key of a capacity provider's instance running `os`: (type, zone, OS);
/// `None` unless EC2 said it is Spot and its type and zone are known.
fn provider_spot_key(instance: &ProviderInstance, os: OsClass) -> Option<SpotKey> {
    let c = &instance.container;
    (instance.spot == Some(true)).then(|| Some((c.instance_type.clone()?, c.zone.clone()?, os))).flatten()
}
