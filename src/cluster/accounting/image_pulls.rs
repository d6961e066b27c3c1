//! Image pulls, per (elastic profile, image): how many tasks pulled it and how long each pull
//! took (ECS's `pullStartedAt` to `pullStoppedAt`), for the status report's "Images" table
//! (pulls, p50, p95 over the last [`WINDOW`] pulls, size) and the `ecs_ea_image_pull_seconds`
//! histogram. Fargate keeps no image cache, so every cold start pulls the whole image: these
//! figures say which images to make smaller or lazily loaded (SOCI, `doctor`'s `soci` line).
//!
//! A task counts once, when its record first has both pull times, and only when the plugin saw
//! it start (its pull began after the record was made: not a task adopted after a restart).
//! Memory is bounded: [`WINDOW`] durations per image, [`MAX_IMAGES`] images, and the task ARNs
//! counted only while their records live. The image's size is ECR's (`imageSizeInBytes`), read
//! at most once per image reference per [`SIZE_EVERY`]. Pure: the caller gives records and times.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::PoisonError;
use std::time::{Duration, SystemTime};

use super::job_wait::Histogram;
use crate::aws::ecr::EcrImage;
use crate::aws::AwsClients;
use crate::cluster::agents::tasks::TaskView;
use crate::cluster::agents::AgentRecord;
use crate::cluster::agents::Registry;
use crate::cluster::base::locks::{Mutex, MutexGuard};

/// Pulls kept per image for its p50 and p95.
pub const WINDOW: usize = 200;
/// Images (elastic profile, image) kept; the one pulled least lately goes first.
pub const MAX_IMAGES: usize = 256;
/// How often an image's size is read again from ECR.
pub const SIZE_EVERY: Duration = Duration::from_secs(3600);
/// The longest a status report waits for one image's size.
const SIZE_READ_LIMIT: Duration = Duration::from_secs(5);
/// ECS's clock and ours may differ: a pull that started this much before the record was made
/// still counts as one the plugin saw.
const CLOCK_SLACK: Duration = Duration::from_secs(30);

/// One image's pulls.
#[derive(Debug, Clone, Default)]
pub struct ImageStats {
    /// Pulls counted since the plugin started.
    pub pulls: u64,
    /// The last [`WINDOW`] pull times, oldest first.
    recent: VecDeque<Duration>,
    /// Every pull, for the histogram.
    pub histogram: Histogram,
    /// When its last counted pull ended.
    pub last: Option<SystemTime>,
}

impl ImageStats {
    /// Adds one pull.
    pub fn observe(&mut self, d: Duration, at: SystemTime) {
        self.pulls += 1;
        if self.recent.len() == WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(d);
        self.histogram.observe(d);
        self.last = Some(self.last.map_or(at, |l| l.max(at)));
    }

    /// The `p`th percentile (0..=100) of the last [`WINDOW`] pulls (nearest rank); `None`
    /// before any.
    pub fn percentile(&self, p: usize) -> Option<Duration> {
        if self.recent.is_empty() {
            return None;
        }
        let mut sorted: Vec<Duration> = self.recent.iter().copied().collect();
        sorted.sort_unstable();
        let rank = (p.min(100) * sorted.len()).div_ceil(100);
        Some(sorted[rank.clamp(1, sorted.len()) - 1])
    }

    /// The median pull of the window.
    pub fn p50(&self) -> Option<Duration> {
        self.percentile(50)
    }

    /// The 95th percentile pull of the window.
    pub fn p95(&self) -> Option<Duration> {
        self.percentile(95)
    }

    /// How many pulls the window holds.
    pub fn window(&self) -> usize {
        self.recent.len()
    }
}

/// What [`ImagePulls::note`] reads of an agent's record, copied out of it: the pulls are
/// counted under their own lock, after the registry's is released.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Its task.
    pub arn: String,
    /// When the record was made.
    pub created_at: SystemTime,
    /// When its task's image pull started and stopped, once ECS told both.
    pub pull: Option<(SystemTime, SystemTime)>,
    /// Its elastic profile (hash); empty without a pull.
    pub elastic_profile: String,
    /// The image pulled (the record's; when a task definition names it, its task's first
    /// container's); empty without a pull.
    pub image: String,
}

impl Seen {
    /// The record's task, if it has one.
    pub fn of(a: &AgentRecord) -> Option<Seen> {
        Some(Seen::new(a.task_arn.as_deref()?, a.created_at, &a.elastic_profile, &a.image, a.task.as_ref()))
    }

    /// What is read of a record of `task` made at `created_at`.
    pub fn new(arn: &str, created_at: SystemTime, elastic_profile: &str, image: &str, task: Option<&TaskView>) -> Seen {
        let pull = task.and_then(|t| Some((t.pull_started_at?, t.pull_stopped_at?)));
        let (elastic_profile, image) = match (pull, task) {
            (Some(_), Some(task)) => {
                let image = match image {
                    "" => task.containers.iter().find_map(|c| c.image.as_deref()).unwrap_or_default(),
                    image => image,
                };
                (elastic_profile.to_string(), image.to_string())
            }
            _ => (String::new(), String::new()),
        };
        Seen { arn: arn.to_string(), created_at, pull, elastic_profile, image }
    }
}

/// An image's size as ECR last said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Size {
    bytes: Option<u64>,
    read_at: SystemTime,
}

/// The pulls of one cluster profile's agents.
#[derive(Debug, Default)]
pub struct ImagePulls {
    by: BTreeMap<(String, String), ImageStats>,
    /// Task ARNs already counted (only while their records live).
    counted: HashSet<String>,
    sizes: HashMap<String, Size>,
    /// The number of the last look noted ([`ImagePulls::note_look`]).
    last_look: Option<u64>,
}

impl ImagePulls {
    /// Adds one pull of `image` by an agent of `elastic_profile`.
    pub fn observe(&mut self, elastic_profile: &str, image: &str, d: Duration, at: SystemTime) {
        let key = (elastic_profile.to_string(), image.to_string());
        if !self.by.contains_key(&key) && self.by.len() >= MAX_IMAGES {
            let oldest = self.by.iter().min_by_key(|(_, s)| s.last).map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                self.by.remove(&oldest);
            }
        }
        self.by.entry(key).or_default().observe(d, at);
    }

    /// Counts the pulls of `records` not counted yet, and forgets the tasks of records gone.
    pub fn note(&mut self, records: impl IntoIterator<Item = Seen>) {
        let mut live = HashSet::new();
        for a in records {
            if let Some((started, stopped)) = a.pull.filter(|_| !self.counted.contains(&a.arn)) {
                self.counted.insert(a.arn.clone());
                // A pull that began before this process made the record is an adopted task's
                // (after a restart): not counted.
                if started + CLOCK_SLACK >= a.created_at && !a.image.is_empty() {
                    let took = stopped.duration_since(started).unwrap_or_default();
                    self.observe(&a.elastic_profile, &a.image, took, stopped);
                }
            }
            live.insert(a.arn);
        }
        self.counted.retain(|arn| live.contains(arn));
    }

    /// [`ImagePulls::note`] of the records copied at look number `look` (looks are numbered in
    /// the order they copied the registry): a look overtaken by a later one notes nothing, as
    /// the later one, whose copy is newer, counted what this one would have.
    pub fn note_look(&mut self, look: u64, records: impl IntoIterator<Item = Seen>) {
        if self.last_look.is_some_and(|last| look < last) {
            return;
        }
        self.last_look = Some(look);
        self.note(records);
    }

    /// Every image's pulls, by elastic profile then image.
    pub fn all(&self) -> impl Iterator<Item = (&str, &str, &ImageStats)> {
        self.by.iter().map(|((e, i), s)| (e.as_str(), i.as_str(), s))
    }

    /// The image's size in bytes, when ECR told it.
    pub fn size(&self, image: &str) -> Option<u64> {
        self.sizes.get(image).and_then(|s| s.bytes)
    }

    /// The images pulled whose size was not read within [`SIZE_EVERY`] of `now`.
    pub fn sizes_due(&self, now: SystemTime) -> Vec<String> {
        let due: std::collections::BTreeSet<&String> = self
            .by
            .keys()
            .map(|(_, image)| image)
            .filter(|image| {
                self.sizes.get(*image).is_none_or(|s| now.duration_since(s.read_at).unwrap_or_default() >= SIZE_EVERY)
            })
            .collect();
        due.into_iter().cloned().collect()
    }

    /// Notes a size read at `now` (`None`: ECR did not say, or the image is not ECR's); read
    /// again after [`SIZE_EVERY`].
    pub fn set_size(&mut self, image: &str, bytes: Option<u64>, now: SystemTime) {
        self.sizes.insert(image.to_string(), Size { bytes, read_at: now });
        let images: HashSet<&String> = self.by.keys().map(|(_, i)| i).collect();
        self.sizes.retain(|i, _| images.contains(i));
    }
}

/// One engine's image pulls behind their lock, counted from the agents' records at each look.
#[derive(Debug, Default)]
pub struct Pulls {
    /// Looks so far, each numbered under the registry's lock.
    looks: AtomicU64,
    pulls: Mutex<ImagePulls>,
}

impl Pulls {
    /// The image pulls, locked, after counting those `registry`'s records show since the last
    /// look. Never hold it across an `.await`.
    pub fn look(&self, registry: &Mutex<Registry>) -> MutexGuard<'_, ImagePulls> {
        // Copied out of the registry's lock, released before the pulls' is taken; the look is
        // numbered under the registry's lock, so looks are noted in the order they copied it.
        let (look, seen) = {
            let registry = registry.lock().unwrap_or_else(PoisonError::into_inner);
            let look = self.looks.fetch_add(1, Ordering::Relaxed);
            (look, registry.all().filter_map(Seen::of).collect::<Vec<_>>())
        };
        let mut pulls = self.pulls.lock().unwrap_or_else(PoisonError::into_inner);
        pulls.note_look(look, seen);
        pulls
    }

    /// Reads from ECR the size of each pulled image whose size is due at `now` ([`SIZE_EVERY`]):
    /// one DescribeImages per image (waited for up to [`SIZE_READ_LIMIT`]), and only for an
    /// image in the ECR registry of the profile's account and region; other images have no size.
    pub async fn refresh_sizes(&self, registry: &Mutex<Registry>, aws: &AwsClients, now: SystemTime) {
        let due = self.look(registry).sizes_due(now);
        if due.is_empty() {
            return;
        }
        for image in due {
            let size = match EcrImage::parse(&image) {
                Some(ecr) if ecr.is_in(aws.account_id.as_deref(), &aws.region) => {
                    match tokio::time::timeout(SIZE_READ_LIMIT, aws.ecr_image(&ecr)).await {
                        Ok(Ok(facts)) => facts.size_bytes,
                        Ok(Err(e)) => {
                            tracing::info!(image = %image, error = %e, "could not read the image's size from ECR");
                            None
                        }
                        Err(_) => {
                            tracing::info!(image = %image, "ECR did not tell the image's size in time");
                            None
                        }
                    }
                }
                _ => None,
            };
            self.look(registry).set_size(&image, size, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    #[test]
    fn p50_and_p95_are_nearest_ranks_of_the_window() {
        let mut s = ImageStats::default();
        assert_eq!(s.p50(), None);
        for secs in (1..=100).rev() {
            s.observe(Duration::from_secs(secs), at(secs));
        }
        assert_eq!(s.pulls, 100);
        assert_eq!(s.p50(), Some(Duration::from_secs(50)));
        assert_eq!(s.p95(), Some(Duration::from_secs(95)));
        let mut one = ImageStats::default();
        one.observe(Duration::from_millis(1500), at(0));
        assert_eq!((one.p50(), one.p95()), (Some(Duration::from_millis(1500)), Some(Duration::from_millis(1500))));
    }

    #[test]
    fn the_window_keeps_the_last_pulls_only() {
        let mut s = ImageStats::default();
        // 300 slow pulls, then 200 fast ones: the slow ones have left the window.
        for i in 0..300 {
            s.observe(Duration::from_secs(90), at(i));
        }
        for i in 0..WINDOW as u64 {
            s.observe(Duration::from_secs(10), at(300 + i));
        }
        assert_eq!(s.pulls, 500, "every pull counted");
        assert_eq!(s.window(), WINDOW, "bounded");
        assert_eq!(s.p95(), Some(Duration::from_secs(10)));
        assert_eq!(s.histogram.counts.iter().sum::<u64>(), 500, "the histogram has every pull");
    }

    #[test]
    fn images_are_bounded_and_the_least_lately_pulled_goes_first() {
        let mut p = ImagePulls::default();
        for i in 0..MAX_IMAGES as u64 {
            p.observe("e", &format!("img-{i}"), Duration::from_secs(1), at(i + 10));
        }
        p.observe("e", "img-0", Duration::from_secs(1), at(10_000));
        p.observe("e", "new", Duration::from_secs(1), at(10_001));
        assert_eq!(p.all().count(), MAX_IMAGES);
        assert!(p.all().any(|(_, i, _)| i == "img-0"), "pulled lately, kept");
        assert!(!p.all().any(|(_, i, _)| i == "img-1"), "the least lately pulled went");
    }

    fn task(arn: &str, pull: Option<(u64, u64)>) -> TaskView {
        TaskView {
            arn: arn.into(),
            pull_started_at: pull.map(|p| at(p.0)),
            pull_stopped_at: pull.map(|p| at(p.1)),
            ..TaskView::default()
        }
    }

    fn seen(arn: &str, created: u64, task: &TaskView) -> Seen {
        Seen::new(arn, at(created), "small", "gocd/agent:v1", Some(task))
    }

    #[test]
    fn each_task_seen_starting_counts_once() {
        let mut p = ImagePulls::default();
        let (pulling, pulled, adopted) = (task("t1", None), task("t1", Some((110, 124))), task("t2", Some((110, 130))));
        p.note([seen("t1", 100, &pulling), seen("t2", 500, &adopted)]);
        p.note([seen("t1", 100, &pulled), seen("t2", 500, &adopted)]);
        p.note([seen("t1", 100, &pulled), seen("t2", 500, &adopted)]);
        let all: Vec<_> = p.all().map(|(e, i, s)| (e.to_string(), i.to_string(), s.pulls, s.p50())).collect();
        assert_eq!(all, [("small".into(), "gocd/agent:v1".into(), 1, Some(Duration::from_secs(14)))]);
        // Records gone: their tasks are forgotten.
        p.note([]);
        assert!(p.counted.is_empty());
    }

    #[test]
    fn a_look_overtaken_by_a_later_one_counts_and_forgets_nothing() {
        let mut p = ImagePulls::default();
        let pulled = task("t1", Some((110, 124)));
        // Look 2 copied the registry after look 1 but is noted first: it counts the pull.
        p.note_look(2, [seen("t1", 100, &pulled)]);
        // Look 1's older copy (before t1's record existed) neither forgets t1 nor counts again.
        p.note_look(1, []);
        p.note_look(3, [seen("t1", 100, &pulled)]);
        let pulls: Vec<u64> = p.all().map(|(_, _, s)| s.pulls).collect();
        assert_eq!(pulls, [1]);
        assert!(p.counted.contains("t1"));
    }

    #[test]
    fn a_task_definitions_image_is_its_first_containers() {
        let mut pulled = task("t1", Some((110, 124)));
        pulled.containers = vec![crate::cluster::agents::tasks::ContainerView {
            name: "agent".into(),
            image: Some("own/image:1".into()),
            last_status: None,
            exit_code: None,
            reason: None,
        }];
        assert_eq!(Seen::new("t1", at(100), "small", "", Some(&pulled)).image, "own/image:1");
        assert_eq!(Seen::new("t1", at(100), "small", "given:2", Some(&pulled)).image, "given:2");
        let pulling = task("t1", None);
        assert_eq!(Seen::new("t1", at(100), "small", "given:2", Some(&pulling)).pull, None);
    }

    #[test]
    fn sizes_are_read_again_after_an_hour() {
        let mut p = ImagePulls::default();
        p.observe("a", "img", Duration::from_secs(3), at(0));
        p.observe("b", "img", Duration::from_secs(3), at(0));
        assert_eq!(p.sizes_due(at(0)), ["img"], "one read per image");
        p.set_size("img", Some(42), at(0));
        assert_eq!(p.size("img"), Some(42));
        assert!(p.sizes_due(at(3599)).is_empty());
        assert_eq!(p.sizes_due(at(3600)), ["img"]);
    }
}
