//! What `leftovers` found, as pure data: which tags make something the plugin's ([`owner`]),
//! one line per thing found ([`Leftover::line`]), and the summary lines. No I/O and no clock.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::aws::tags::{TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
use crate::cluster::base::identity::TAG_TRY;

/// The prefix of every task-definition family the plugin registers: the engine's
/// `gocd-<cluster key>-<hash>` (`cluster::task_definition::family`) and try's
/// `gocd-<cluster key>-try-<hash>`.
pub const FAMILY_PREFIX: &str = "gocd-";

/// What a thing found is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// An ECS task.
    Task,
    /// An EC2 instance.
    Instance,
    /// A task-definition revision.
    TaskDefinition,
}

impl Kind {
    /// Its word at the start of a line.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Task => "task",
            Kind::Instance => "instance",
            Kind::TaskDefinition => "task-definition",
        }
    }
}

/// The owner tags of something the plugin made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// `gocd:server-id` (`try` for what `try` started).
    pub server_id: String,
    /// `gocd:cluster-profile`.
    pub cluster_profile: String,
    /// `gocd:try`, when set.
    pub trial: Option<String>,
}

/// The owner of something with these tags, when it is the plugin's — both owner tags set, not
/// empty — and of server `only` when one is given. Nothing else is ever listed or touched.
pub fn owner(tags: &HashMap<String, String>, only: Option<&str>) -> Option<Owner> {
    let tag = |key: &str| tags.get(key).filter(|v| !v.trim().is_empty()).cloned();
    let server_id = tag(TAG_SERVER_ID)?;
    let cluster_profile = tag(TAG_CLUSTER_PROFILE)?;
    if only.is_some_and(|only| only != server_id) {
        return None;
    }
    Some(Owner { server_id, cluster_profile, trial: tag(TAG_TRY) })
}

/// Whether a task ECS describes as in `cluster_arn` is in the cluster listed as `listed` (an ARN
/// from ListClusters, or a name or ARN given): reads are checked, as ECS's fakes do not filter.
pub fn in_cluster(cluster_arn: &str, listed: &str) -> bool {
    let name = listed.rsplit_once(":cluster/").map_or(listed, |(_, name)| name);
    cluster_arn == listed || cluster_arn.ends_with(&format!(":cluster/{name}"))
}

/// The name of a cluster given by ARN or name.
pub fn cluster_name(cluster: &str) -> &str {
    cluster.rsplit_once(":cluster/").map_or(cluster, |(_, name)| name)
}

/// One thing of the plugin's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// What it is.
    pub kind: Kind,
    /// Its ARN or id.
    pub id: String,
    /// Its owner tags.
    pub owner: Owner,
    /// Its state as AWS says it (`RUNNING`, `stopped`, `ACTIVE`, ...).
    pub state: String,
    /// When it was created (accepted, launched, registered), when AWS says.
    pub since: Option<SystemTime>,
    /// A task's cluster (its ARN): where to stop it.
    pub cluster: Option<String>,
    /// Further `key=value`s for the line (a task's cluster, an instance's type).
    pub extra: Vec<(&'static str, String)>,
}

impl Leftover {
    /// `<kind> <id> gocd:server-id=<id> gocd:cluster-profile=<key>[ gocd:try=true] state=<state>
    /// age=<age>[ key=value...]`.
    pub fn line(&self, now: SystemTime) -> String {
        let mut line = format!(
            "{} {} {TAG_SERVER_ID}={} {TAG_CLUSTER_PROFILE}={}",
            self.kind.word(),
            value(&self.id),
            value(&self.owner.server_id),
            value(&self.owner.cluster_profile)
        );
        if let Some(trial) = &self.owner.trial {
            line.push_str(&format!(" {TAG_TRY}={}", value(trial)));
        }
        let age = self
            .since
            .map_or_else(|| "unknown".to_string(), |since| age(now.duration_since(since).unwrap_or_default()));
        line.push_str(&format!(" state={} age={age}", value(&self.state)));
        for (key, v) in &self.extra {
            line.push_str(&format!(" {key}={}", value(v)));
        }
        line
    }
}

/// A tag value as one word: quoted when it is empty or holds a space, `=` or a quote.
fn value(v: &str) -> String {
    if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control() || c == '=' || c == '"') {
        format!("{v:?}")
    } else {
        v.to_string()
    }
}

/// An age in its two largest units: `45s`, `12m`, `3h05m`, `2d04h`.
pub fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// How many of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Tasks.
    pub tasks: usize,
    /// Instances.
    pub instances: usize,
    /// Task-definition revisions.
    pub task_definitions: usize,
}

impl Counts {
    /// The counts of these.
    pub fn of<'a>(found: impl IntoIterator<Item = &'a Leftover>) -> Counts {
        let mut counts = Counts::default();
        for f in found {
            counts.add(f.kind);
        }
        counts
    }

    /// One more of `kind`.
    pub fn add(&mut self, kind: Kind) {
        match kind {
            Kind::Task => self.tasks += 1,
            Kind::Instance => self.instances += 1,
            Kind::TaskDefinition => self.task_definitions += 1,
        }
    }

    /// All of them.
    pub fn total(&self) -> usize {
        self.tasks + self.instances + self.task_definitions
    }

    /// `N tasks, N instances, N task definitions` (singular for one).
    pub fn said(&self) -> String {
        format!(
            "{}, {}, {}",
            many(self.tasks, "task", "tasks"),
            many(self.instances, "instance", "instances"),
            many(self.task_definitions, "task definition", "task definitions")
        )
    }
}

fn many(n: usize, one: &str, more: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { more })
}

/// The last line of a listing (without `--remove`).
pub fn listed_summary(found: &Counts) -> String {
    if found.total() == 0 {
        format!("{}: nothing of the plugin's is left", found.said())
    } else {
        format!("{}; run again with --remove to remove them", found.said())
    }
}

/// The last line of a `--remove` run.
pub fn removed_summary(removed: &Counts, failed: usize) -> String {
    match failed {
        0 => format!("removed {}", removed.said()),
        n => format!(
            "removed {}; {} could not be removed (FAIL lines say why)",
            removed.said(),
            many(n, "thing", "things")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn only_what_carries_both_owner_tags_is_the_plugins() {
        let both = tags(&[(TAG_SERVER_ID, "A"), (TAG_CLUSTER_PROFILE, "0123456789ab"), ("Name", "agent")]);
        let owner = owner(&both, None).expect("the plugin's");
        assert_eq!(
            (owner.server_id.as_str(), owner.cluster_profile.as_str(), owner.trial),
            ("A", "0123456789ab", None)
        );
        assert_eq!(super::owner(&tags(&[(TAG_SERVER_ID, "A")]), None), None, "no cluster profile tag");
        assert_eq!(super::owner(&tags(&[(TAG_CLUSTER_PROFILE, "k")]), None), None, "no server id tag");
        assert_eq!(super::owner(&tags(&[(TAG_SERVER_ID, " "), (TAG_CLUSTER_PROFILE, "k")]), None), None, "empty");
        assert_eq!(super::owner(&HashMap::new(), None), None);
    }

    #[test]
    fn a_server_id_keeps_only_that_servers() {
        let a = tags(&[(TAG_SERVER_ID, "A"), (TAG_CLUSTER_PROFILE, "k")]);
        assert!(owner(&a, Some("A")).is_some());
        assert_eq!(owner(&a, Some("B")), None);
        let trial = tags(&[(TAG_SERVER_ID, "try"), (TAG_CLUSTER_PROFILE, "k"), (TAG_TRY, "true")]);
        assert_eq!(owner(&trial, Some("try")).and_then(|o| o.trial).as_deref(), Some("true"));
    }

    #[test]
    fn a_task_is_checked_against_the_cluster_listed() {
        let arn = "arn:aws:ecs:eu-west-1:123456789012:cluster/ci";
        assert!(in_cluster(arn, arn));
        assert!(in_cluster(arn, "ci"));
        assert!(!in_cluster(arn, "c"));
        assert!(!in_cluster("arn:aws:ecs:eu-west-1:123456789012:cluster/ci-2", "ci"));
        assert!(!in_cluster(arn, "arn:aws:ecs:eu-west-1:123456789012:cluster/other"));
        assert_eq!(cluster_name(arn), "ci");
        assert_eq!(cluster_name("ci"), "ci");
    }

    #[test]
    fn the_plugins_families_start_with_the_prefix() {
        let props = |pairs: &[(&str, &str)]| -> crate::settings::Properties {
            pairs.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect()
        };
        let cluster = crate::settings::ClusterProfile::parse(&props(&[("ClusterName", "ci")])).expect("valid");
        let elastic = crate::settings::ElasticProfile::parse(&props(&[("Image", "gocd/agent:v1")])).expect("valid");
        let family =
            crate::cluster::launch::task_definition::family("0123456789ab", &cluster, &elastic, "eu-west-1", None);
        assert!(family.starts_with(FAMILY_PREFIX), "{family}");
    }

    #[test]
    fn one_line_says_what_whose_state_and_age() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let task = Leftover {
            kind: Kind::Task,
            id: "arn:aws:ecs:eu-west-1:123456789012:task/ci/abc".into(),
            owner: Owner { server_id: "A".into(), cluster_profile: "0123456789ab".into(), trial: None },
            state: "RUNNING".into(),
            since: Some(now - Duration::from_secs(3 * 3600 + 5 * 60)),
            cluster: Some("arn:aws:ecs:eu-west-1:123456789012:cluster/ci".into()),
            extra: vec![("cluster", "ci".into())],
        };
        assert_eq!(
            task.line(now),
            "task arn:aws:ecs:eu-west-1:123456789012:task/ci/abc gocd:server-id=A gocd:cluster-profile=0123456789ab state=RUNNING age=3h05m cluster=ci"
        );
        let instance = Leftover {
            kind: Kind::Instance,
            id: "i-0abc".into(),
            owner: Owner { server_id: "try".into(), cluster_profile: "k".into(), trial: Some("true".into()) },
            state: "stopped".into(),
            since: None,
            cluster: None,
            extra: vec![("type", "c5.large".into())],
        };
        assert_eq!(
            instance.line(now),
            "instance i-0abc gocd:server-id=try gocd:cluster-profile=k gocd:try=true state=stopped age=unknown type=c5.large"
        );
        let odd = Leftover { owner: Owner { server_id: "a b".into(), ..instance.owner.clone() }, ..instance };
        assert!(odd.line(now).contains("gocd:server-id=\"a b\" "), "{}", odd.line(now));
    }

    #[test]
    fn ages_in_two_units() {
        let age = |s| age(Duration::from_secs(s));
        assert_eq!(
            [age(45), age(12 * 60 + 7), age(3 * 3600 + 5 * 60), age(2 * 86_400 + 4 * 3600)],
            ["45s", "12m", "3h05m", "2d04h"]
        );
    }

    #[test]
    fn the_summary_counts_and_says_what_next() {
        let c = Counts { tasks: 3, instances: 1, task_definitions: 2 };
        assert_eq!(
            listed_summary(&c),
            "3 tasks, 1 instance, 2 task definitions; run again with --remove to remove them"
        );
        assert_eq!(
            listed_summary(&Counts::default()),
            "0 tasks, 0 instances, 0 task definitions: nothing of the plugin's is left"
        );
        assert_eq!(removed_summary(&c, 0), "removed 3 tasks, 1 instance, 2 task definitions");
        assert_eq!(
            removed_summary(&Counts { tasks: 1, ..Counts::default() }, 2),
            "removed 1 task, 0 instances, 0 task definitions; 2 things could not be removed (FAIL lines say why)"
        );
        let mut counted = Counts::default();
        counted.add(Kind::TaskDefinition);
        assert_eq!((counted.task_definitions, counted.total()), (1, 1));
    }
}
