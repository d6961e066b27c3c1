//! `soci`: whether a Fargate elastic profile's ECR image has a SOCI index, which lets Fargate
//! start the task before the whole image is pulled (lazy loading), and what one would save.
//! Fargate keeps no image cache: without an index every task pulls the whole image first.
//!
//! An index is found two ways. v2: the image's tag names an OCI image index whose manifests
//! include the SOCI index (`artifactType` [`SOCI_V2`]), or an image manifest annotated with
//! the index's digest ([`SOCI_V2_ANNOTATION`]): ECR's BatchGetImage with the index media types
//! accepted. v1: a referrer of the image of artifact type [`SOCI_V1`] (ECR's
//! ListImageReferrers); where ECR (or an emulator) does not answer it, the line says v1 was not
//! checked. Only images in the ECR registry of the profile's account and region are looked at
//! (Fargate lazily loads from ECR only); profiles with a `TaskDefinitionArn` are skipped
//! ([`checked_image`]).
//!
//! Without an index, the line gives the image's measured pulls ([`Measured`]) and what an index
//! could take off each start: [`SOCI_SHARE`] of the pull. `doctor` measures the pulls of the
//! plugin's agent tasks of the cluster profile that ECS still lists — stopped within the last
//! hour (ECS keeps them about that long) or running — whose pull ended within the hour (ECS's
//! `pullStartedAt` to `pullStoppedAt`, p50 and p95 as the status report's Images table computes
//! them); `try` gives its own task's pull. The check is [`index`] (ECR's reads) then
//! [`finding`] (the words), shared by both commands.

use std::collections::HashSet;
use std::io;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::{Aws, Report, Verdict};
use crate::aws::ecr::{EcrImage, EcrReads};
use crate::aws::status::TaskStatus;
use crate::aws::task_view::TaskView;
use crate::aws::{AwsError, Failure};
use crate::cli::leftovers::found::{in_cluster, owner};
use crate::cluster::accounting::image_pulls::ImageStats;
use crate::cluster::base::identity::cluster_key;
use crate::settings::{ClusterProfile, ElasticProfile, LaunchType};

/// The artifact type of a SOCI index manifest v2, in a SOCI-enabled image's index.
pub const SOCI_V2: &str = "application/vnd.amazon.soci.index.v2+json";
/// The artifact type of a SOCI index manifest v1, a referrer of the image.
pub const SOCI_V1: &str = "application/vnd.amazon.soci.index.v1+json";
/// The annotation of an image manifest in a SOCI-enabled image that names its SOCI index.
pub const SOCI_V2_ANNOTATION: &str = "com.amazon.soci.index-digest";
/// The share of a pull a SOCI index could take off a start at best: AWS reports Fargate task
/// starts "up to 60 % faster" with lazy loading; taken here off the image pull only.
pub const SOCI_SHARE: f64 = 0.6;
/// How far back `doctor` measures pulls: ECS lists a stopped task for about an hour.
pub const MEASURED_WITHIN: Duration = Duration::from_secs(3600);

/// What a manifest says of a SOCI index v2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SociV2 {
    /// A SOCI-enabled image: the index's digest, when the manifest names it.
    Found(Option<String>),
    /// No SOCI index v2 in this manifest.
    Absent,
    /// Not a manifest (not JSON).
    Unreadable,
}

/// Reads a manifest (an OCI image index, a Docker manifest list, or an image manifest).
pub fn soci_v2(manifest: &str) -> SociV2 {
    let Ok(v) = serde_json::from_str::<Value>(manifest) else {
        return SociV2::Unreadable;
    };
    let annotated = |m: &Value| m["annotations"][SOCI_V2_ANNOTATION].as_str().map(str::to_string);
    if let Some(manifests) = v["manifests"].as_array() {
        if let Some(index) = manifests.iter().find(|m| m["artifactType"].as_str() == Some(SOCI_V2)) {
            return SociV2::Found(index["digest"].as_str().map(str::to_string));
        }
        if let Some(digest) = manifests.iter().find_map(annotated) {
            return SociV2::Found(Some(digest));
        }
        return SociV2::Absent;
    }
    match annotated(&v) {
        Some(digest) => SociV2::Found(Some(digest)),
        None => SociV2::Absent,
    }
}

/// What lazy loading saves, and how to add an index: the fix of a `warn soci` line.
fn how_to_add(image: &str) -> String {
    format!(
        "add a SOCI index v2 with the SOCI CLI (soci convert {image} <new tag>, then push the new tag), or \
         deploy AWS's cfn-ecr-aws-soci-index-builder stack to index images as they are pushed; then set Image \
         (or the task definition) to the converted image: it is a new image index whose digest and tag differ \
         from the original's, and a task that names the original still pulls it whole"
    )
}

/// The ECR image of an elastic profile whose SOCI index is worth a look: a profile that does not
/// run on the plugin's EC2 instances (`LaunchType` `EC2`), names its image itself (no
/// `TaskDefinitionArn`), and pulls from the ECR registry of `account` in `region`.
pub fn checked_image(
    cluster: &ClusterProfile,
    elastic: &ElasticProfile,
    account: Option<&str>,
    region: &str,
) -> Option<EcrImage> {
    if cluster.launch_type == LaunchType::Ec2 || elastic.task_definition_arn.is_some() {
        return None;
    }
    EcrImage::parse(&elastic.image).filter(|image| image.is_in(account, region))
}

/// What ECR says of an image's SOCI index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Index {
    /// A SOCI index v2 (its digest, when the image's index names it).
    V2(Option<String>),
    /// A SOCI index v1: a referrer of the image.
    V1,
    /// No index; why v1 was not checked, when it was not.
    Absent {
        /// ` (a SOCI index v1 was not checked: ...)`, or empty.
        v1_unchecked: &'static str,
    },
    /// ECR has no such image.
    NoImage,
    /// The image could not be read.
    Unread(AwsError),
    /// Its manifest is not JSON.
    Unreadable,
}

/// The measured pulls a `warn soci` line speaks of.
#[derive(Debug, Clone)]
pub enum Measured {
    /// `doctor`: the pulls of the image by the plugin's agent tasks ECS still lists, within
    /// [`MEASURED_WITHIN`], counted oldest first.
    Recent(ImageStats),
    /// `doctor`: the tasks could not be read (the failed call).
    Unread(String),
    /// `try`: its task's own pull; `None` when ECS gave no pull times.
    ThisTask(Option<Duration>),
}

/// A `soci` verdict: what was found and, for a warning, the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `ok` (an index) or `warn`.
    pub verdict: Verdict,
    /// What was found, naming the image.
    pub finding: String,
    /// What to do.
    pub fix: Option<String>,
}

/// Reads from ECR whether `image` has a SOCI index: BatchGetImage, then (no v2 found)
/// ListImageReferrers.
pub async fn index(ecr: &EcrReads<'_>, image: &EcrImage) -> Index {
    let manifest = match ecr.manifest(image).await {
        Ok(Some(m)) => m,
        Ok(None) => return Index::NoImage,
        Err(e) => return Index::Unread(e),
    };
    match soci_v2(&manifest.body) {
        SociV2::Found(digest) => return Index::V2(digest),
        SociV2::Unreadable => return Index::Unreadable,
        SociV2::Absent => {}
    }
    let v1_unchecked = match manifest.digest.as_deref() {
        Some(digest) => match ecr.referrers(image, digest, SOCI_V1).await {
            Ok(types) if types.iter().any(|t| t == SOCI_V1) => return Index::V1,
            Ok(_) => "",
            Err(_) => " (a SOCI index v1 was not checked: ECR did not answer ListImageReferrers)",
        },
        None => " (a SOCI index v1 was not checked: ECR gave no digest of the image)",
    };
    Index::Absent { v1_unchecked }
}

/// The verdict on `reference`'s SOCI index, with the measured pulls when it has none.
pub fn finding(reference: &str, index: &Index, measured: &Measured) -> Finding {
    let ok = |finding: String| Finding { verdict: Verdict::Ok, finding, fix: None };
    let warn = |finding: String, fix: Option<String>| Finding { verdict: Verdict::Warn, finding, fix };
    match index {
        Index::V2(digest) => {
            let digest = digest.as_ref().map(|d| format!(" {d}")).unwrap_or_default();
            ok(format!("{reference} has a SOCI index v2{digest}: Fargate loads its large layers lazily"))
        }
        Index::V1 => ok(format!(
            "{reference} has a SOCI index v1 (a referrer of the image): Fargate loads its large layers lazily; a \
             SOCI index v2 (soci convert) binds the index to the image itself"
        )),
        Index::NoImage => warn(
            format!("ECR has no image {reference}, so its SOCI index was not checked"),
            Some("push the image, or correct Image".to_string()),
        ),
        Index::Unread(e) => {
            let verb = if e.failure == Failure::NotFound { "found no" } else { "could not read" };
            warn(
                format!("{verb} image {reference} in ECR, so its SOCI index was not checked: {}", e.detail),
                Some("allow ecr:BatchGetImage and ecr:DescribeImages on the repository to this identity".to_string())
                    .filter(|_| e.failure == Failure::Denied),
            )
        }
        Index::Unreadable => {
            warn(format!("the manifest of {reference} could not be read, so its SOCI index was not checked"), None)
        }
        Index::Absent { v1_unchecked } => warn(
            format!(
                "{reference} has no SOCI index{v1_unchecked}: every Fargate task pulls the whole image before it \
                 starts. With an index Fargate starts the task first and loads the image lazily: AWS reports task \
                 starts up to 60 % shorter for large images (the gain grows with the image; layers under 10 MiB \
                 are not lazily loaded, and zstd-compressed layers are not indexed). {}",
                saving(measured)
            ),
            Some(how_to_add(reference)),
        ),
    }
}

/// `12.3 s`.
fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The measured pulls, and what an index could take off each start: [`SOCI_SHARE`] of the pull
/// (of the p50 pull, for several).
fn saving(measured: &Measured) -> String {
    let off = |pull: Duration| secs(pull.mul_f64(SOCI_SHARE));
    let share = format!("{:.0} %", SOCI_SHARE * 100.0);
    match measured {
        Measured::Recent(stats) => match (stats.p50(), stats.p95()) {
            (Some(p50), Some(p95)) => {
                let pulls = if stats.pulls == 1 { "1 pull".to_string() } else { format!("{} pulls", stats.pulls) };
                let window = if u64::try_from(stats.window()).unwrap_or(u64::MAX) < stats.pulls {
                    format!(" (of the last {})", stats.window())
                } else {
                    String::new()
                };
                format!(
                    "{pulls} measured in the last hour: p50 {}, p95 {}{window}; a SOCI index could take up to {} off \
                     each start ({share} of the p50 pull: AWS reports starts up to {share} shorter; taken here off \
                     the pull only)",
                    secs(p50),
                    secs(p95),
                    off(p50)
                )
            }
            _ => "No pull of this image measured in the last hour (the plugin's agent tasks ECS lists: those \
                  stopped within the hour, and those running)"
                .to_string(),
        },
        Measured::Unread(why) => format!("The last hour's pulls of this image could not be read: {why}"),
        Measured::ThisTask(Some(pull)) => format!(
            "This task's pull took {}: a SOCI index could take up to {} off each start like it ({share} of the pull: \
             AWS reports starts up to {share} shorter; taken here off the pull only)",
            secs(*pull),
            off(*pull)
        ),
        Measured::ThisTask(None) => {
            "ECS gave no pull times for this task, so what an index would save was not measured".to_string()
        }
    }
}

/// One measured pull: the task's images, when the pull ended and how long it took.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pull {
    images: Vec<String>,
    ended: SystemTime,
    took: Duration,
}

impl Pull {
    /// The pull of a task ECS gave both pull times of.
    fn of(task: &TaskView) -> Option<Pull> {
        Some(Pull {
            images: task.containers.iter().filter_map(|c| c.image.clone()).collect(),
            ended: task.pull_stopped_at?,
            took: pull_time(task)?,
        })
    }
}

/// How long a task's image pull took: ECS's `pullStartedAt` to `pullStoppedAt`; `None` until
/// ECS gives both (a task stopped during its pull never has the second).
pub fn pull_time(task: &TaskView) -> Option<Duration> {
    task.pull_stopped_at?.duration_since(task.pull_started_at?).ok()
}

/// The pulls of `reference` among `pulls`, counted oldest first (the window keeps the latest).
fn recent(pulls: &[Pull], reference: &str) -> ImageStats {
    let mut of: Vec<&Pull> = pulls.iter().filter(|p| p.images.iter().any(|i| i == reference)).collect();
    of.sort_by_key(|p| p.ended);
    let mut stats = ImageStats::default();
    for p in of {
        stats.observe(p.took, p.ended);
    }
    stats
}

/// Whether a task carries the plugin's owner tags for the cluster profile `key` — of GoCD
/// server `server_id` when given, else of any — as an agent task (not `try`'s).
fn agent_of(task: &TaskView, key: &str, server_id: Option<&str>) -> bool {
    owner(&task.tags, server_id).is_some_and(|o| o.cluster_profile == key && o.trial.is_none())
}

/// The pulls of the plugin's agent tasks of the cluster profile that ECS lists — stopped
/// lately, or running — whose pull ended within [`MEASURED_WITHIN`] of `now`: ListTasks of
/// each desired status (every page), then DescribeTasks in batches of 100. Reads only.
async fn pulls_of_the_cluster(
    aws: &Aws,
    profile: &ClusterProfile,
    server_id: Option<&str>,
    now: SystemTime,
) -> Result<Vec<Pull>, AwsError> {
    let clients = aws.engine_clients(profile.role_arn.clone());
    let cluster = profile.cluster_name.as_str();
    let key = cluster_key(&aws.account, &aws.region, cluster, profile.role_arn.as_deref());
    let mut arns = clients.list_tasks_desired(cluster, &TaskStatus::Stopped).await?;
    let mut listed: HashSet<String> = arns.iter().cloned().collect();
    for arn in clients.list_tasks_desired(cluster, &TaskStatus::Running).await? {
        if listed.insert(arn.clone()) {
            arns.push(arn);
        }
    }
    let since = now.checked_sub(MEASURED_WITHIN).unwrap_or(SystemTime::UNIX_EPOCH);
    let keep = |t: &TaskView| {
        in_cluster(&t.cluster_arn, cluster)
            && agent_of(t, key.as_str(), server_id)
            && Pull::of(t).is_some_and(|p| p.ended >= since)
    };
    let tasks = clients.describe_tasks(cluster, &arns, keep).await?;
    Ok(tasks.iter().filter_map(Pull::of).collect())
}

/// The `soci` lines: one per Fargate elastic profile whose image is in the profile's ECR.
pub(super) async fn check(
    aws: &Aws,
    profile: &ClusterProfile,
    elastic: &[(String, ElasticProfile)],
    server_id: Option<&str>,
    r: &mut Report<'_>,
) -> io::Result<()> {
    let mut seen: Vec<&str> = Vec::new();
    // Read once, for the first image without an index.
    let mut pulls: Option<Result<Vec<Pull>, AwsError>> = None;
    for (shown, e) in elastic {
        if seen.contains(&e.image.as_str()) {
            continue;
        }
        let Some(image) = checked_image(profile, e, Some(aws.account.as_str()), &aws.region) else { continue };
        seen.push(&e.image);
        let index = index(&aws.ecr_reads(), &image).await;
        let measured = match &index {
            Index::Absent { .. } => {
                let read = match pulls.take() {
                    Some(read) => read,
                    None => pulls_of_the_cluster(aws, profile, server_id, SystemTime::now()).await,
                };
                let measured = match &read {
                    Ok(read) => Measured::Recent(recent(read, &e.image)),
                    Err(err) => Measured::Unread(err.to_string()),
                };
                pulls = Some(read);
                measured
            }
            _ => Measured::Recent(ImageStats::default()),
        };
        let Finding { verdict, finding, fix } = finding(&e.image, &index, &measured);
        r.line(verdict, "soci", format!("{shown}: {finding}"), fix)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_index_with_a_soci_index_v2() {
        let index = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:img","size":1,
             "platform":{"architecture":"amd64","os":"linux"},
             "annotations":{"com.amazon.soci.index-digest":"sha256:soci"}},
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.amazon.soci.index.v2+json",
             "digest":"sha256:soci","size":2,"annotations":{"com.amazon.soci.image-manifest-digest":"sha256:img"}}]}"#;
        assert_eq!(soci_v2(index), SociV2::Found(Some("sha256:soci".into())));
        // An index naming it by annotation only.
        let annotated =
            r#"{"manifests":[{"digest":"sha256:img","annotations":{"com.amazon.soci.index-digest":"sha256:s"}}]}"#;
        assert_eq!(soci_v2(annotated), SociV2::Found(Some("sha256:s".into())));
    }

    #[test]
    fn images_without_a_soci_index_v2() {
        let plain_index = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:amd","platform":{"architecture":"amd64","os":"linux"}},
            {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:arm","platform":{"architecture":"arm64","os":"linux"}}]}"#;
        assert_eq!(soci_v2(plain_index), SociV2::Absent);
        let manifest = r#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
            "config":{"mediaType":"application/vnd.docker.container.image.v1+json","size":7023,"digest":"sha256:c"},
            "layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","size":32654,"digest":"sha256:l"}]}"#;
        assert_eq!(soci_v2(manifest), SociV2::Absent);
        // A SOCI index v1 is a referrer, never in the image's own manifest.
        let v1_type =
            r#"{"manifests":[{"digest":"sha256:x","artifactType":"application/vnd.amazon.soci.index.v1+json"}]}"#;
        assert_eq!(soci_v2(v1_type), SociV2::Absent);
        assert_eq!(soci_v2("not json"), SociV2::Unreadable);
    }

    const IMAGE: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gocd/agent:v1";

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn pull(image: &str, ended: u64, took_ms: u64) -> Pull {
        Pull { images: vec![image.to_string()], ended: at(ended), took: Duration::from_millis(took_ms) }
    }

    fn absent(measured: &Measured) -> Finding {
        finding(IMAGE, &Index::Absent { v1_unchecked: "" }, measured)
    }

    #[test]
    fn the_warning_gives_the_measured_pulls_and_what_an_index_would_save() {
        // Three pulls of the image, one of another image: p50 and p95 by nearest rank.
        let pulls =
            [pull(IMAGE, 30, 40_000), pull(IMAGE, 10, 20_000), pull("other:v1", 15, 90_000), pull(IMAGE, 20, 30_000)];
        let stats = recent(&pulls, IMAGE);
        assert_eq!(
            (stats.pulls, stats.p50(), stats.p95()),
            (3, Some(Duration::from_secs(30)), Some(Duration::from_secs(40)))
        );
        let f = absent(&Measured::Recent(stats));
        assert_eq!(f.verdict, Verdict::Warn);
        assert!(
            f.finding.ends_with(
                "3 pulls measured in the last hour: p50 30.0 s, p95 40.0 s; a SOCI index could take up to 18.0 s off \
                 each start (60 % of the p50 pull: AWS reports starts up to 60 % shorter; taken here off the pull only)"
            ),
            "{}",
            f.finding
        );
        assert!(
            f.finding.starts_with(&format!("{IMAGE} has no SOCI index: every Fargate task pulls")),
            "{}",
            f.finding
        );
        assert!(f.fix.as_deref().is_some_and(|fix| fix.contains("soci convert")), "{f:?}");
        let one = absent(&Measured::Recent(recent(&[pull(IMAGE, 1, 12_345)], IMAGE)));
        assert!(
            one.finding.contains(
                "1 pull measured in the last hour: p50 12.3 s, p95 12.3 s; a SOCI index could take up to 7.4 s off"
            ),
            "{}",
            one.finding
        );
    }

    #[test]
    fn more_pulls_than_the_window_say_which_the_percentiles_are_of() {
        // 250 pulls: the 50 oldest (slow) have left the window of the last 200 (fast).
        let pulls: Vec<Pull> = (0..250).map(|i| pull(IMAGE, i, if i < 50 { 90_000 } else { 10_000 })).rev().collect();
        let f = absent(&Measured::Recent(recent(&pulls, IMAGE)));
        assert!(
            f.finding.contains("250 pulls measured in the last hour: p50 10.0 s, p95 10.0 s (of the last 200); "),
            "{}",
            f.finding
        );
    }

    #[test]
    fn no_pull_measured_and_pulls_unread_are_said() {
        let none = absent(&Measured::Recent(ImageStats::default()));
        assert!(none.finding.contains("No pull of this image measured in the last hour"), "{}", none.finding);
        assert!(!none.finding.contains("could take up to"), "{}", none.finding);
        let unread = absent(&Measured::Unread("AWS ListTasks failed: AccessDeniedException".into()));
        assert!(
            unread.finding.ends_with("could not be read: AWS ListTasks failed: AccessDeniedException"),
            "{}",
            unread.finding
        );
        let this = absent(&Measured::ThisTask(Some(Duration::from_millis(2500))));
        assert!(
            this.finding
                .contains("This task's pull took 2.5 s: a SOCI index could take up to 1.5 s off each start like it"),
            "{}",
            this.finding
        );
        let unmeasured = absent(&Measured::ThisTask(None));
        assert!(unmeasured
            .finding
            .ends_with("ECS gave no pull times for this task, so what an index would save was not measured"));
    }

    #[test]
    fn an_index_found_is_ok_and_says_no_pulls() {
        let v2 = finding(IMAGE, &Index::V2(Some("sha256:s".into())), &Measured::ThisTask(Some(Duration::from_secs(9))));
        assert_eq!(v2.verdict, Verdict::Ok);
        assert_eq!(v2.finding, format!("{IMAGE} has a SOCI index v2 sha256:s: Fargate loads its large layers lazily"));
        assert_eq!(v2.fix, None);
        let v1 = finding(IMAGE, &Index::V1, &Measured::Recent(ImageStats::default()));
        assert!(v1.verdict == Verdict::Ok && v1.finding.contains("SOCI index v1"), "{v1:?}");
        let denied = AwsError::new("BatchGetImage", Failure::Denied, "AccessDeniedException: no");
        let unread = finding(IMAGE, &Index::Unread(denied), &Measured::ThisTask(None));
        assert_eq!(unread.verdict, Verdict::Warn);
        assert!(unread.fix.as_deref().is_some_and(|f| f.contains("ecr:BatchGetImage")), "{unread:?}");
    }

    #[test]
    fn only_the_profiles_agent_tasks_count() {
        let tags = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let task = |pairs: &[(&str, &str)]| TaskView { tags: tags(pairs), ..TaskView::default() };
        let ours = task(&[("gocd:server-id", "server-a"), ("gocd:cluster-profile", "0123456789ab")]);
        assert!(agent_of(&ours, "0123456789ab", None));
        assert!(agent_of(&ours, "0123456789ab", Some("server-a")));
        assert!(!agent_of(&ours, "0123456789ab", Some("server-b")), "another GoCD server's");
        assert!(!agent_of(&ours, "ba9876543210", None), "another cluster profile's");
        let tried = task(&[("gocd:server-id", "try"), ("gocd:cluster-profile", "0123456789ab"), ("gocd:try", "true")]);
        assert!(!agent_of(&tried, "0123456789ab", None), "try's");
        assert!(!agent_of(&task(&[("gocd:cluster-profile", "0123456789ab")]), "0123456789ab", None), "half tagged");
    }

    #[test]
    fn a_pull_needs_both_times() {
        let mut t = TaskView { pull_started_at: Some(at(10)), ..TaskView::default() };
        assert_eq!(pull_time(&t), None, "still pulling, or stopped during the pull");
        t.pull_stopped_at = Some(at(24));
        assert_eq!(pull_time(&t), Some(Duration::from_secs(14)));
    }

    #[test]
    fn the_fix_names_the_image_and_the_new_digest() {
        let fix = how_to_add("123456789012.dkr.ecr.eu-west-1.amazonaws.com/agent:v1");
        assert!(fix.contains("soci convert 123456789012.dkr.ecr.eu-west-1.amazonaws.com/agent:v1"), "{fix}");
        assert!(fix.contains("cfn-ecr-aws-soci-index-builder") && fix.contains("digest"), "{fix}");
    }
}
