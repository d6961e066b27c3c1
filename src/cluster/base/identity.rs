//! Names that mark what is ours (`docs/design.md`, "Where the truth lives"): the cluster profile
//! key, `startedBy`, the tags every task carries, and agent ids. A task is ours only when both its
//! server-id and cluster-profile tags are.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::ids::{AgentId, ClusterKey, SettingsFingerprint};
use crate::protocol::types::JobIdentifier;

pub use crate::aws::tags::{TAG_CLUSTER_PROFILE, TAG_SERVER_ID};
/// Tag: the elastic agent id.
pub const TAG_AGENT_ID: &str = "gocd:elastic-agent-id";
/// Tag: GoCD's job id.
pub const TAG_JOB_ID: &str = "gocd:job-id";
/// Tag: pipeline name.
pub const TAG_PIPELINE: &str = "gocd:pipeline";
/// Tag: pipeline counter.
pub const TAG_PIPELINE_COUNTER: &str = "gocd:pipeline-counter";
/// Tag: stage name.
pub const TAG_STAGE: &str = "gocd:stage";
/// Tag: stage counter.
pub const TAG_STAGE_COUNTER: &str = "gocd:stage-counter";
/// Tag: job name.
pub const TAG_JOB: &str = "gocd:job";
/// Tag: environment (only when the pipeline has one).
pub const TAG_ENVIRONMENT: &str = "gocd:environment";
/// Tag: elastic profile hash.
pub const TAG_ELASTIC_PROFILE: &str = "gocd:elastic-profile";
/// Tag: which launch of the job this is (1, 2, ...).
pub const TAG_ATTEMPT: &str = "gocd:attempt";
/// Tag: a task `ecs-elastic-agent try` started (its server id tag is `try`, no GoCD server's).
pub const TAG_TRY: &str = "gocd:try";

/// 12 hex chars of SHA-256 over the parts, joined by NUL.
pub fn short_hash(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hasher.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect()
}

/// The cluster profile key: a hash of where the profile acts — the account (the role's, else
/// the base credentials'), region, cluster (its name; an ARN means the same cluster) and role —
/// not of every property, so that editing `MaxAgents` orphans nothing, while two accounts with
/// a cluster of the same name never share a key.
pub fn cluster_key(account: &str, region: &str, cluster: &str, role_arn: Option<&str>) -> ClusterKey {
    let name = cluster.rsplit_once(":cluster/").map_or(cluster, |(_, name)| name);
    short_hash(&[account, region, name, role_arn.unwrap_or("")]).into()
}

/// `startedBy` of our tasks (at most 36 chars): this server and this cluster profile.
pub fn started_by(server_id: &str, cluster_key: &ClusterKey) -> String {
    format!("gocd-{}-{}", &short_hash(&[server_id])[..10], cluster_key)
}

/// A fresh agent id for a job: `ea-<cluster key>-<job id>-<random>`. The cluster key in it
/// tells, from GoCD's agent list alone, which cluster profile an agent belongs to.
pub fn new_agent_id(cluster_key: &ClusterKey, job: &JobIdentifier) -> AgentId {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("ea-{cluster_key}-{}-{}", job.job_id, &random[..8]).into()
}

/// The cluster key an agent id of ours names, if it is one.
pub fn cluster_key_of_agent(agent_id: &str) -> Option<&str> {
    let rest = agent_id.strip_prefix("ea-")?;
    let key = rest.get(..12)?;
    (key.bytes().all(|b| b.is_ascii_hexdigit()) && rest[12..].starts_with('-')).then_some(key)
}

/// Who one cluster profile's engine is, fixed for its life: what its tags, `startedBy` and agent
/// ids name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Hash of (account, region, cluster, role): tags and agent ids carry it ([`cluster_key`]).
    pub key: ClusterKey,
    /// GoCD's server id.
    pub server_id: String,
    /// Our `startedBy` in this cluster ([`started_by`]).
    pub started_by: String,
}

impl Identity {
    /// The identity of the engine of `key` under GoCD server `server_id`.
    pub fn new(key: ClusterKey, server_id: String) -> Self {
        Identity { started_by: started_by(&server_id, &key), key, server_id }
    }
}

/// What one task is, for its tags.
#[derive(Debug, Clone, Copy)]
pub struct TaskLabels<'a> {
    /// GoCD's server id.
    pub server_id: &'a str,
    /// The cluster profile key.
    pub cluster_key: &'a str,
    /// The agent id.
    pub agent_id: &'a str,
    /// The job.
    pub job: &'a JobIdentifier,
    /// The pipeline's environment.
    pub environment: Option<&'a str>,
    /// The elastic profile hash.
    pub elastic_profile: &'a str,
    /// Launch attempt for the job.
    pub attempt: u32,
    /// The cluster profile's [`settings_fingerprint`].
    pub settings: &'a str,
}

/// The most tags of ours on one task (with `gocd:environment`); AWS allows 50 in all.
pub const PLUGIN_TAGS: usize = 13;

/// Tag of the cluster profile's settings a task was started under ([`settings_fingerprint`]):
/// two teams' profiles on one cluster, account and role share a key but count their own
/// `MaxAgents`, also after a restart.
pub const TAG_CLUSTER_SETTINGS: &str = "gocd:cluster-settings";

/// A short hash of every property of a cluster profile, in key order: which team's profile an
/// agent was started under, where several share one cluster, account and role.
pub fn settings_fingerprint(props: &crate::protocol::profiles::Properties) -> SettingsFingerprint {
    let lines: Vec<String> = props.iter().map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or(""))).collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    short_hash(&refs).into()
}

/// The tags of one task as one map: the profiles' tags in order, a later one replacing an
/// earlier one of the same key (pass the cluster profile's, then the elastic profile's: the
/// elastic profile wins), then ours, which nothing replaces. No key is sent twice.
pub fn task_tags(labels: &TaskLabels<'_>, user_tags: &[(String, String)]) -> Vec<(String, String)> {
    let TaskLabels { server_id, cluster_key, agent_id, job, environment, elastic_profile, attempt, settings } = *labels;
    let mut tags: Vec<(String, String)> = Vec::with_capacity(user_tags.len() + PLUGIN_TAGS);
    for (k, v) in user_tags.iter().filter(|(k, _)| !k.starts_with("gocd:") && !k.starts_with("aws:")) {
        match tags.iter_mut().find(|(key, _)| key == k) {
            Some(slot) => slot.1 = v.clone(),
            None => tags.push((k.clone(), v.clone())),
        }
    }
    let ours = [
        (TAG_SERVER_ID, server_id.to_string()),
        (TAG_CLUSTER_PROFILE, cluster_key.to_string()),
        (TAG_AGENT_ID, agent_id.to_string()),
        (TAG_JOB_ID, job.job_id.to_string()),
        (TAG_PIPELINE, job.pipeline_name.clone()),
        (TAG_PIPELINE_COUNTER, job.pipeline_counter.to_string()),
        (TAG_STAGE, job.stage_name.clone()),
        (TAG_STAGE_COUNTER, job.stage_counter.clone()),
        (TAG_JOB, job.job_name.clone()),
        (TAG_ELASTIC_PROFILE, elastic_profile.to_string()),
        (TAG_ATTEMPT, attempt.to_string()),
        (TAG_CLUSTER_SETTINGS, settings.to_string()),
    ];
    tags.extend(ours.into_iter().map(|(k, v)| (k.to_string(), tag_value(&v))));
    if let Some(env) = environment {
        tags.push((TAG_ENVIRONMENT.to_string(), tag_value(env)));
    }
    tags
}

/// Whether tags mark a resource of this server and cluster profile.
pub fn is_ours(tags: &HashMap<String, String>, server_id: &str, cluster_key: &str) -> bool {
    tags.get(TAG_SERVER_ID).map(String::as_str) == Some(server_id)
        && tags.get(TAG_CLUSTER_PROFILE).map(String::as_str) == Some(cluster_key)
}

/// The job a task was started for, read back from its tags (after a restart).
pub fn job_from_tags(tags: &HashMap<String, String>) -> Option<JobIdentifier> {
    let get = |k: &str| tags.get(k).cloned();
    Some(JobIdentifier {
        pipeline_name: get(TAG_PIPELINE)?,
        pipeline_label: get(TAG_PIPELINE_COUNTER)?,
        pipeline_counter: get(TAG_PIPELINE_COUNTER)?.parse().ok()?,
        stage_name: get(TAG_STAGE)?,
        stage_counter: get(TAG_STAGE_COUNTER)?,
        job_name: get(TAG_JOB)?,
        job_id: get(TAG_JOB_ID)?.parse().ok()?,
    })
}

/// The client token of one launch, from the agent's reservation: every retry of one launch
/// sends the same token, so it cannot start a second task; a new attempt (a new reservation,
/// with a new random agent id) gets a new one, also after a restart, so a token is never reused
/// with other parameters within AWS's 24 hours. At most 64 ASCII characters.
pub fn client_token(server_id: &str, agent_id: &str, variant: &str) -> String {
    let token = format!("{}-{agent_id}{variant}", &short_hash(&[server_id])[..8]);
    token.chars().filter(char::is_ascii).take(64).collect()
}

/// A tag value AWS accepts: at most 256 characters of letters, digits, spaces and
/// `+ - = . _ : / @`; anything else becomes `_`.
fn tag_value(v: &str) -> String {
    v.chars().map(|c| if c.is_alphanumeric() || " +-=._:/@".contains(c) { c } else { '_' }).take(256).collect()
}

/// What a task's `clusterArn` ends with for a cluster named by name or ARN.
pub fn cluster_arn_suffix(cluster: &str) -> String {
    match cluster.rsplit_once(":cluster/") {
        Some((_, name)) => format!(":cluster/{name}"),
        None => format!(":cluster/{cluster}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobIdentifier {
        serde_json::from_str(
            r#"{"pipeline_name":"build","pipeline_label":"14","pipeline_counter":14,"stage_name":"test","stage_counter":"2","job_name":"unit","job_id":4242}"#,
        )
        .unwrap()
    }

    #[test]
    fn keys_and_started_by_fit_aws_limits() {
        let key = cluster_key("111111111111", "eu-west-1", "ci", Some("arn:aws:iam::111111111111:role/gocd"));
        assert_eq!(key.len(), 12);
        assert_ne!(key, cluster_key("111111111111", "eu-west-1", "ci", None));
        assert_ne!(
            cluster_key("111111111111", "eu-west-1", "ci", None),
            cluster_key("222222222222", "eu-west-1", "ci", None)
        );
        assert_eq!(
            cluster_key("111111111111", "eu-west-1", "ci", None),
            cluster_key("111111111111", "eu-west-1", "arn:aws:ecs:eu-west-1:111111111111:cluster/ci", None),
            "a name and its ARN are one cluster"
        );
        let started_by = started_by("8c1f4a2e-2696-4689-8d46-1ef3c4e4447c", &key);
        assert!(started_by.len() <= 36, "{started_by}");
        let mut long_job = job();
        long_job.job_id = i64::MIN;
        let agent = new_agent_id(&key, &long_job);
        let token = client_token("8c1f4a2e-2696-4689-8d46-1ef3c4e4447c", &agent, "-od");
        assert!(token.len() <= 64 && token.is_ascii(), "{token}");
        assert_eq!(token, client_token("8c1f4a2e-2696-4689-8d46-1ef3c4e4447c", &agent, "-od"), "stable per launch");
        let next_attempt = new_agent_id(&key, &long_job);
        assert_ne!(
            token,
            client_token("8c1f4a2e-2696-4689-8d46-1ef3c4e4447c", &next_attempt, "-od"),
            "new per attempt"
        );
    }

    #[test]
    fn tags_are_one_map_the_elastic_profile_wins_and_ours_are_never_replaced() {
        let job = job();
        let labels = TaskLabels {
            server_id: "sid",
            cluster_key: "key",
            agent_id: "ea-1",
            job: &job,
            environment: Some("prod<script>"),
            elastic_profile: "h",
            attempt: 1,
            settings: "",
        };
        let user = [
            ("team".to_string(), "platform".to_string()),
            ("cost-center".to_string(), "1".to_string()),
            ("team".to_string(), "mobile".to_string()),
            (TAG_AGENT_ID.to_string(), "forged".to_string()),
        ];
        let tags = task_tags(&labels, &user);
        let keys: std::collections::HashSet<&str> = tags.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys.len(), tags.len(), "no key twice: {tags:?}");
        let get = |k: &str| tags.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("team"), Some("mobile"));
        assert_eq!(get(TAG_AGENT_ID), Some("ea-1"));
        assert_eq!(get(TAG_ENVIRONMENT), Some("prod_script_"), "only AWS's tag characters");
        assert_eq!(tags.len(), 2 + PLUGIN_TAGS);
    }

    #[test]
    fn agent_ids_name_their_cluster() {
        let id = new_agent_id(&"0123456789ab".into(), &job());
        assert!(id.starts_with("ea-0123456789ab-4242-"), "{id}");
        assert_eq!(cluster_key_of_agent(&id), Some("0123456789ab"));
        assert_eq!(cluster_key_of_agent("i-283432d4"), None);
        assert_eq!(cluster_key_of_agent("ea-short-1"), None);
    }

    #[test]
    fn tags_round_trip_the_job() {
        let job = job();
        let labels = TaskLabels {
            server_id: "sid",
            cluster_key: "key",
            agent_id: "agent",
            job: &job,
            environment: Some("prod"),
            elastic_profile: "hash",
            attempt: 1,
            settings: "",
        };
        let tags = task_tags(&labels, &[("team".into(), "a".into())]);
        let map: HashMap<String, String> = tags.into_iter().collect();
        assert!(is_ours(&map, "sid", "key"));
        assert!(!is_ours(&map, "other", "key"));
        assert!(!is_ours(&map, "sid", "other"));
        assert_eq!(map["team"], "a");
        assert_eq!(map[TAG_ENVIRONMENT], "prod");
        let back = job_from_tags(&map).unwrap();
        assert_eq!((back.job_id, back.locator()), (4242, job.locator()));
    }

    /// Cost Explorer groups by `gocd:pipeline`, `gocd:stage` and `gocd:job` once they are
    /// activated as cost-allocation tags: whatever GoCD names a pipeline, each is a tag AWS takes
    /// (value at most 256 characters of letters, digits, spaces and `_ . : / = + - @`; key at
    /// most 128, never `aws:`), and a task never has more than 50 tags.
    #[test]
    fn cost_allocation_tags_keep_to_aws_rules_whatever_the_names() {
        let hostile = format!("rm -rf /; <b>\"x\"</b> $(id) `id` é名前\n\t{}", "ü".repeat(300));
        let job = JobIdentifier {
            pipeline_name: hostile.clone(),
            stage_name: "stage#1 & 'quote'".into(),
            job_name: "a".repeat(1000),
            ..job()
        };
        let labels = TaskLabels {
            server_id: "sid",
            cluster_key: "key",
            agent_id: "agent",
            job: &job,
            environment: Some("prod\u{0}"),
            elastic_profile: "hash",
            attempt: 1,
            settings: "",
        };
        let user: Vec<(String, String)> = (0..37).map(|i| (format!("t{i}"), "v".into())).collect();
        let tags = task_tags(&labels, &user);
        assert!(tags.len() <= 50, "{}", tags.len());
        let allowed = |c: char| c.is_alphanumeric() || " _.:/=+-@".contains(c);
        for (k, v) in &tags {
            assert!(k.chars().count() <= 128 && !k.starts_with("aws:"), "{k}");
            assert!(v.chars().count() <= 256 && v.chars().all(allowed), "{k}={v:?}");
        }
        let map: HashMap<String, String> = tags.into_iter().collect();
        assert!(map[TAG_PIPELINE].starts_with("rm -rf /_ _b__x__/b_ __id_ _id_ é名前__ü"), "{}", map[TAG_PIPELINE]);
        assert_eq!(map[TAG_PIPELINE].chars().count(), 256);
        assert_eq!(map[TAG_STAGE], "stage_1 _ _quote_");
        assert_eq!(map[TAG_JOB].len(), 256);
        assert_eq!(map[TAG_ENVIRONMENT], "prod_");
    }
}
