//! What kind of capacity each provider of a `CapacityProviderStrategy` is: Fargate,
//! an Auto Scaling group's, or ECS Managed Instances. The kind decides what the task
//! definitions must be valid for (`requiresCompatibilities`) and which elastic profile keys ECS
//! refuses (Managed Instances takes no ephemeral storage, shared memory or host volumes).
//!
//! `FARGATE` and `FARGATE_SPOT` are known by name. The others are learned with one
//! DescribeCapacityProviders per engine (through the account's call budget), and for `default`
//! the cluster's default strategy with one DescribeClusters first; the answer is kept until the
//! profile names another strategy or cluster.

use std::sync::{Arc, PoisonError};
use std::time::SystemTime;

pub use crate::aws::capacity_providers::{Compatibility, ProviderKind};
pub use crate::aws::status::ResourceStatus;
use crate::aws::{AwsClients, AwsError};
use crate::cluster::base::clock::Clock;
use crate::settings::{ClusterProfile, ProviderStrategy};

impl ProviderKind {
    /// In words, for the status report.
    pub fn describe(self) -> &'static str {
        match self {
            ProviderKind::Fargate => "Fargate",
            ProviderKind::AutoScaling => "Auto Scaling group",
            ProviderKind::ManagedInstances => "ECS Managed Instances",
            ProviderKind::Unknown => "unknown",
        }
    }

    /// What a task definition must list in `requiresCompatibilities` to run on it.
    fn compatibility(self) -> Compatibility {
        match self {
            ProviderKind::Fargate => Compatibility::Fargate,
            // Not described: may be an Auto Scaling group's (EC2), as before kinds were learned.
            ProviderKind::AutoScaling | ProviderKind::Unknown => Compatibility::Ec2,
            ProviderKind::ManagedInstances => Compatibility::ManagedInstances,
        }
    }
}

/// One provider the strategy may send tasks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownProvider {
    /// Its short name.
    pub name: String,
    /// What it is.
    pub kind: ProviderKind,
    /// ECS's status (`ACTIVE`, `INACTIVE`, `MISSING` when not described; Fargate's: `ACTIVE`).
    pub status: ResourceStatus,
}

/// The providers of one strategy, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderKinds {
    /// In the strategy's order (for `default`, the cluster's default strategy's).
    pub providers: Vec<KnownProvider>,
}

impl ProviderKinds {
    /// The first ECS Managed Instances provider, if any.
    pub fn managed_instances(&self) -> Option<&str> {
        self.providers.iter().find(|p| p.kind == ProviderKind::ManagedInstances).map(|p| p.name.as_str())
    }

    /// What the task definitions must be valid for: FARGATE (the sizes are Fargate's), EC2
    /// where an Auto Scaling group (or a provider not described) may place them, and
    /// MANAGED_INSTANCES where ECS Managed Instances may. An empty list (`default` on a cluster
    /// without a default strategy) is taken as "may be EC2".
    pub fn compatibilities(&self) -> Vec<Compatibility> {
        let mut out = vec![Compatibility::Fargate];
        let kinds: Vec<Compatibility> = if self.providers.is_empty() {
            vec![Compatibility::Ec2]
        } else {
            self.providers.iter().map(|p| p.kind.compatibility()).collect()
        };
        for c in [Compatibility::Ec2, Compatibility::ManagedInstances] {
            if kinds.contains(&c) {
                out.push(c);
            }
        }
        out
    }

    /// The providers a task definition that may run on `runs_on` (see
    /// `task_definition::Contents::runs_on`) cannot take, each with the compatibility it
    /// lacks, in the strategy's order. Providers ECS did not describe are left out: their kind
    /// is not known, and RunTask names the problem.
    pub fn lacking(&self, runs_on: &[Compatibility]) -> Vec<(&KnownProvider, Compatibility)> {
        self.providers
            .iter()
            .filter(|p| p.kind != ProviderKind::Unknown)
            .map(|p| (p, p.kind.compatibility()))
            .filter(|(_, needed)| !runs_on.contains(needed))
            .collect()
    }

    /// `name: kind, STATUS` per provider, for the cluster status report.
    pub fn describe(&self) -> String {
        if self.providers.is_empty() {
            return "the cluster has no default capacity provider strategy".to_string();
        }
        let list: Vec<String> =
            self.providers.iter().map(|p| format!("{}: {}, {}", p.name, p.kind.describe(), p.status)).collect();
        list.join("; ")
    }
}

/// The kinds as known without AWS: `FARGATE` and `FARGATE_SPOT` by name; `None` when a provider
/// must be described first.
pub fn known_by_name(strategy: &ProviderStrategy) -> Option<ProviderKinds> {
    let ProviderStrategy::Providers(shares) = strategy else {
        return None;
    };
    let providers = shares
        .iter()
        .map(|s| {
            is_fargate(&s.name).then(|| KnownProvider {
                name: s.name.clone(),
                kind: ProviderKind::Fargate,
                status: ResourceStatus::Active,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(ProviderKinds { providers })
}

fn is_fargate(name: &str) -> bool {
    name == "FARGATE" || name == "FARGATE_SPOT"
}

/// Learns the kinds of the providers `strategy` may use in `cluster`: DescribeClusters for
/// `default` (its default strategy's providers), then one DescribeCapacityProviders for the
/// names that are not Fargate's.
///
/// # Errors
/// The failed call; the engine asks again at the next create-agent.
pub async fn learn(aws: &AwsClients, cluster: &str, strategy: &ProviderStrategy) -> Result<ProviderKinds, AwsError> {
    if let Some(known) = known_by_name(strategy) {
        return Ok(known);
    }
    let names: Vec<String> = match strategy {
        ProviderStrategy::Providers(shares) => shares.iter().map(|s| s.name.clone()).collect(),
        ProviderStrategy::ClusterDefault => aws.default_strategy(cluster).await?,
    };
    let asked: Vec<String> = names.iter().filter(|n| !is_fargate(n)).cloned().collect();
    let described = if asked.is_empty() { Vec::new() } else { aws.describe_capacity_providers(asked).await? };
    let providers = names
        .into_iter()
        .map(|name| {
            if is_fargate(&name) {
                return KnownProvider { name, kind: ProviderKind::Fargate, status: ResourceStatus::Active };
            }
            let found = described.iter().find(|p| p.name == name || p.arn.as_deref() == Some(name.as_str()));
            match found {
                Some(p) => KnownProvider { kind: p.kind, status: p.status.clone(), name },
                None => KnownProvider { name, kind: ProviderKind::Unknown, status: ResourceStatus::from("MISSING") },
            }
        })
        .collect();
    Ok(ProviderKinds { providers })
}

/// The engine's learned kinds: kept for one (cluster, strategy), learned again when the profile
/// names another.
#[derive(Debug, Default)]
pub struct ProviderCache {
    learned: crate::cluster::base::locks::Mutex<Option<Learned>>,
    /// One learner at a time: concurrent create-agents share one call.
    learning: tokio::sync::Mutex<()>,
}

#[derive(Debug, Clone)]
struct Learned {
    cluster: String,
    strategy: ProviderStrategy,
    kinds: Arc<ProviderKinds>,
    at: SystemTime,
}

impl ProviderCache {
    /// The kinds for `profile`'s strategy if learned already (`None` without a strategy, or
    /// before the first create-agent learned them).
    pub fn current(&self, profile: &ClusterProfile) -> Option<Arc<ProviderKinds>> {
        let strategy = profile.capacity_providers.as_ref()?;
        if let Some(known) = known_by_name(strategy) {
            return Some(Arc::new(known));
        }
        let learned = self.learned.lock().unwrap_or_else(PoisonError::into_inner);
        learned
            .as_ref()
            .filter(|l| l.cluster == profile.cluster_name && &l.strategy == strategy)
            .map(|l| l.kinds.clone())
    }

    /// When the kinds in use were learned.
    pub fn learned_at(&self) -> Option<SystemTime> {
        self.learned.lock().unwrap_or_else(PoisonError::into_inner).as_ref().map(|l| l.at)
    }

    /// The kinds for `profile`'s strategy, learned from AWS the first time (and again when the
    /// strategy or cluster changed), dated by `clock`. `None` without a strategy.
    ///
    /// # Errors
    /// The failed DescribeClusters or DescribeCapacityProviders call.
    pub async fn get(
        &self,
        aws: &AwsClients,
        profile: &ClusterProfile,
        clock: &dyn Clock,
    ) -> Result<Option<Arc<ProviderKinds>>, AwsError> {
        let Some(strategy) = profile.capacity_providers.as_ref() else {
            return Ok(None);
        };
        if let Some(kinds) = self.current(profile) {
            return Ok(Some(kinds));
        }
        let _one = self.learning.lock().await;
        if let Some(kinds) = self.current(profile) {
            return Ok(Some(kinds));
        }
        let kinds = Arc::new(learn(aws, &profile.cluster_name, strategy).await?);
        tracing::info!(cluster = %profile.cluster_name, providers = %kinds.describe(), "learned the capacity providers' kinds");
        *self.learned.lock().unwrap_or_else(PoisonError::into_inner) = Some(Learned {
            cluster: profile.cluster_name.clone(),
            strategy: strategy.clone(),
            kinds: kinds.clone(),
            at: clock.now(),
        });
        Ok(Some(kinds))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(name: &str, kind: ProviderKind) -> KnownProvider {
        KnownProvider { name: name.into(), kind, status: ResourceStatus::Active }
    }

    #[test]
    fn compatibilities_follow_the_kinds() {
        let kinds = |p: Vec<KnownProvider>| ProviderKinds { providers: p }.compatibilities();
        assert_eq!(kinds(vec![provider("FARGATE", ProviderKind::Fargate)]), [Compatibility::Fargate]);
        assert_eq!(
            kinds(vec![provider("asg", ProviderKind::AutoScaling)]),
            [Compatibility::Fargate, Compatibility::Ec2]
        );
        assert_eq!(
            kinds(vec![provider("mi", ProviderKind::ManagedInstances)]),
            [Compatibility::Fargate, Compatibility::ManagedInstances]
        );
        assert_eq!(
            kinds(vec![provider("mi", ProviderKind::ManagedInstances), provider("x", ProviderKind::Unknown)]),
            [Compatibility::Fargate, Compatibility::Ec2, Compatibility::ManagedInstances]
        );
        assert_eq!(kinds(vec![]), [Compatibility::Fargate, Compatibility::Ec2], "no default strategy: may be EC2");
    }

    #[test]
    fn a_task_definition_lacks_what_a_provider_s_kind_needs() {
        let kinds = ProviderKinds {
            providers: vec![
                provider("FARGATE", ProviderKind::Fargate),
                provider("ci-asg", ProviderKind::AutoScaling),
                provider("ci-mi", ProviderKind::ManagedInstances),
                KnownProvider {
                    name: "gone".into(),
                    kind: ProviderKind::Unknown,
                    status: ResourceStatus::from("MISSING"),
                },
            ],
        };
        let lacking = |runs_on: &[Compatibility]| -> Vec<(String, Compatibility)> {
            kinds.lacking(runs_on).into_iter().map(|(p, c)| (p.name.clone(), c)).collect()
        };
        assert_eq!(
            lacking(&[Compatibility::Fargate]),
            [("ci-asg".to_string(), Compatibility::Ec2), ("ci-mi".to_string(), Compatibility::ManagedInstances)],
            "the provider ECS did not describe is not judged"
        );
        assert_eq!(
            lacking(&[Compatibility::Ec2]),
            [("FARGATE".to_string(), Compatibility::Fargate), ("ci-mi".to_string(), Compatibility::ManagedInstances)]
        );
        assert!(lacking(&[Compatibility::Fargate, Compatibility::Ec2, Compatibility::ManagedInstances]).is_empty());
    }

    #[test]
    fn fargate_is_known_by_name_and_others_need_a_call() {
        let fargates = crate::settings::capacity_providers::parse("FARGATE\nFARGATE_SPOT:2").unwrap();
        let known = known_by_name(&fargates).expect("no call needed");
        assert!(known.providers.iter().all(|p| p.kind == ProviderKind::Fargate));
        assert_eq!(known.managed_instances(), None);
        let mixed = crate::settings::capacity_providers::parse("FARGATE\nci-mi").unwrap();
        assert_eq!(known_by_name(&mixed), None);
        assert_eq!(known_by_name(&ProviderStrategy::ClusterDefault), None);
    }

    #[test]
    fn a_provider_s_kind_in_words() {
        let kinds = ProviderKinds {
            providers: vec![
                provider("ci-mi", ProviderKind::ManagedInstances),
                provider("FARGATE", ProviderKind::Fargate),
            ],
        };
        assert_eq!(kinds.managed_instances(), Some("ci-mi"));
        assert_eq!(kinds.describe(), "ci-mi: ECS Managed Instances, ACTIVE; FARGATE: Fargate, ACTIVE");
    }
}
