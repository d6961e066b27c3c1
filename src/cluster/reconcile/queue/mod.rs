//! The event queue (`EventQueueUrl`): an SQS queue that an EventBridge rule feeds with ECS task
//! state changes (and, for EC2 profiles, the plugin's instances' Spot warnings and state
//! changes), read so that the engine learns of a stopped task within seconds instead of at the
//! next server-ping.
//!
//! - [`parse`]: the events AWS documents, read from message bodies (pure).
//! - `handle.rs`: what an event does to one cluster profile's engine ([`Cluster::on_event`]).
//! - [`EventQueues`]: one background long-poll per queue (20 s waits, 10 messages a call, each
//!   message deleted once handled), through the account's budget and retries
//!   ([`crate::aws::CallStats::call`]). Every serving cluster profile that names the queue is
//!   offered each event; the one whose task it is acts, the others ignore it. One poller per
//!   queue, not per profile: two pollers of one queue would each delete the other's messages.
//!   For the same reason a queue must serve one GoCD server only (README "Event queue").
//!
//! Polling stays the safety net: server-ping reconciles as before, and says in server health
//! when the queue could not be read (and when it is read again), or said nothing of a task that
//! stopped.

mod handle;
pub mod parse;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::task::JoinHandle;

pub use handle::Handled;

use crate::aws::sqs::BATCH;
use crate::cluster::base::locks::{Mutex, MutexGuard};
pub use crate::cluster::base::recent::{QueueStatus, MISSED_AFTER};
use crate::cluster::Cluster;
use crate::protocol::host_calls::HealthKind;

/// SQS's longest long poll.
const WAIT_SECONDS: i32 = 20;
/// Pause after a failed read.
const AFTER_ERROR: Duration = Duration::from_secs(15);
/// An answer faster than this with no message (not a long poll after all): pause this long.
const TOO_FAST: Duration = Duration::from_secs(1);
impl Cluster {
    /// The profile's event queue status, locked.
    pub fn queue_status(&self) -> MutexGuard<'_, QueueStatus> {
        self.state.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Server-ping reports the agent's task stopped: unless an event told of it, its event is
    /// awaited ([`QueueStatus::found_by_ping`], [`Cluster::queue_settle`]).
    pub(crate) fn queue_missed(&self, agent_id: &str) {
        if self.profile().event_queue_url.is_none() {
            return;
        }
        let now = self.now();
        self.queue_status().found_by_ping(agent_id, now);
    }

    /// Stops server-ping found whose events have not come within [`MISSED_AFTER`] of `now`:
    /// the queue missed them (late, lost, or no rule feeds it), and server health says so.
    pub fn queue_settle(&self, now: SystemTime) {
        let Some(url) = self.profile().event_queue_url.clone() else { return };
        let missed = self.queue_status().settle(now);
        if missed.is_empty() {
            return;
        }
        self.event(
            HealthKind::Warning,
            format!(
                "server-ping found the task of agent(s) {} stopped, and the event queue {url} told nothing of it within \
                 {} s: is an EventBridge rule sending this cluster's ECS Task State Change events to it \
                 (ecs-elastic-agent iam-policy prints one)? Stopped tasks are noticed at server-ping meanwhile",
                missed.join(", "),
                MISSED_AFTER.as_secs()
            ),
        );
    }

    /// An event told of a stop server-ping had found first: the queue did not miss it.
    fn queue_late(&self, agent_id: &str) {
        if self.queue_status().late(agent_id) {
            tracing::debug!(agent_id, "the event of a stop came after server-ping found it");
        }
    }

    fn queue_told(&self, agent_id: &str) {
        self.queue_status().told(agent_id);
    }

    /// A read succeeded: after failed ones, server health says the queue is read again (the
    /// warning that it could not be read stays listed with the other recent events).
    fn queue_read(&self, url: &str, now: SystemTime) {
        let recovered = self.queue_status().read(url, now);
        if recovered {
            self.event(
                HealthKind::Warning,
                format!(
                    "the event queue {url} is read again: stopped tasks are noticed within seconds again, not only \
                     at server-ping"
                ),
            );
        }
    }

    fn queue_failed(&self, url: &str, error: &str, now: SystemTime) {
        let warn = self.queue_status().failed(url, error, now);
        if warn {
            self.event(
                HealthKind::Warning,
                format!(
                    "the event queue {url} could not be read ({error}): stopped tasks are noticed at server-ping \
                     instead, up to a ping later; check EventQueueUrl and the plugin's sqs:ReceiveMessage and \
                     sqs:DeleteMessage permissions (ecs-elastic-agent doctor)"
                ),
            );
        }
    }
}

/// One poller per queue URL, each offering its events to the cluster profiles that name it.
#[derive(Debug, Default)]
pub struct EventQueues {
    pollers: Mutex<HashMap<String, Poller>>,
    /// Notified when an event changed what server health should say (a stop, a drain, a queue
    /// that cannot be read): the plugin sends health then rather than at the next ping.
    changed: Arc<tokio::sync::Notify>,
}

#[derive(Debug)]
struct Poller {
    members: Arc<Mutex<Vec<Weak<Cluster>>>>,
    task: JoinHandle<()>,
}

impl EventQueues {
    /// Makes the pollers match `clusters`: every serving profile with an `EventQueueUrl` is
    /// offered its queue's events; a queue no serving profile names any more is no longer read
    /// (a retired profile's poller stops here). Needs a tokio runtime.
    pub fn sync(&self, clusters: &[Arc<Cluster>]) {
        let mut wanted: HashMap<String, Vec<Weak<Cluster>>> = HashMap::new();
        for cluster in clusters.iter().filter(|c| c.retired().is_none()) {
            if let Some(url) = cluster.profile().event_queue_url.clone() {
                wanted.entry(url).or_default().push(Arc::downgrade(cluster));
            }
        }
        let mut pollers = self.lock();
        pollers.retain(|url, poller| {
            let keep = wanted.contains_key(url) && !poller.task.is_finished();
            if !keep {
                tracing::info!(queue = %url, "event queue no longer read");
                poller.task.abort();
            }
            keep
        });
        for (url, members) in wanted {
            match pollers.get(&url) {
                Some(poller) => *poller.members.lock().unwrap_or_else(PoisonError::into_inner) = members,
                None => {
                    tracing::info!(queue = %url, "reading the event queue");
                    let members = Arc::new(Mutex::new(members));
                    let task = tokio::spawn(run(url.clone(), members.clone(), self.changed.clone()));
                    pollers.insert(url, Poller { members, task });
                }
            }
        }
    }

    /// Notified when an event changed what server health should say.
    pub fn changed(&self) -> Arc<tokio::sync::Notify> {
        self.changed.clone()
    }

    /// Stops every poller (plugin shutdown).
    pub fn stop(&self) {
        for (_, poller) in self.lock().drain() {
            poller.task.abort();
        }
    }

    /// The queues being read.
    pub fn urls(&self) -> Vec<String> {
        let mut urls: Vec<String> = self.lock().keys().cloned().collect();
        urls.sort();
        urls
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Poller>> {
        self.pollers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for EventQueues {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The poller of one queue: long-poll, hand each event to the members, delete what was read.
async fn run(url: String, members: Arc<Mutex<Vec<Weak<Cluster>>>>, changed: Arc<tokio::sync::Notify>) {
    loop {
        let live: Vec<Arc<Cluster>> =
            members.lock().unwrap_or_else(PoisonError::into_inner).iter().filter_map(Weak::upgrade).collect();
        let Some(reader) = live.first().cloned() else { return };
        let events_before: usize = live.iter().map(|c| c.events().recorded()).sum();
        let pause = poll_once(&url, &reader, &live).await;
        if live.iter().map(|c| c.events().recorded()).sum::<usize>() != events_before {
            changed.notify_one(); // something for server health
        }
        drop(live);
        drop(reader);
        if let Some(pause) = pause {
            tokio::time::sleep(pause).await;
        }
    }
}

/// One ReceiveMessage and what follows; returns the pause before the next, if any.
async fn poll_once(url: &str, reader: &Cluster, live: &[Arc<Cluster>]) -> Option<Duration> {
    let aws = reader.aws();
    let asked = Instant::now();
    let answer = aws.receive_messages(url, WAIT_SECONDS).await;
    let now = reader.now();
    let messages = match answer {
        Ok(messages) => messages,
        Err(e) => {
            let error = e.to_string();
            live.iter().for_each(|c| c.queue_failed(url, &error, now));
            return Some(AFTER_ERROR);
        }
    };
    live.iter().for_each(|c| c.queue_read(url, now));
    live.iter().for_each(|c| c.queue_settle(now));
    if messages.is_empty() {
        return (asked.elapsed() < TOO_FAST).then_some(TOO_FAST);
    }
    let mut done = Vec::with_capacity(messages.len());
    for message in &messages {
        handle_message(&message.body, live).await;
        if let Some(receipt) = &message.receipt {
            done.push(receipt.clone());
        }
    }
    delete(url, reader, &done).await;
    None
}

/// Offers one message to every member until one takes it.
async fn handle_message(body: &str, live: &[Arc<Cluster>]) {
    let event = match parse::parse(body) {
        Ok(event) => event,
        Err(why) => {
            tracing::warn!(size = body.len(), %why, "dropped an unreadable message from the event queue");
            return;
        }
    };
    for cluster in live {
        match cluster.on_event(&event).await {
            Ok(Handled::NotOurs) => continue,
            Ok(handled) => {
                tracing::debug!(?handled, "event handled");
                return;
            }
            Err(e) => {
                cluster.event(HealthKind::Warning, format!("an event from the queue could not be acted on: {e}"));
                return;
            }
        }
    }
    tracing::debug!("an event of no cluster profile of this server: ignored");
}

/// Deletes handled messages, 10 a call (SQS's most).
async fn delete(url: &str, reader: &Cluster, receipts: &[String]) {
    let aws = reader.aws();
    for chunk in receipts.chunks(BATCH as usize) {
        match aws.delete_messages(url, chunk).await {
            Ok(failed) if failed > 0 => {
                tracing::warn!(failed, "some handled events could not be deleted from the queue")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "handled events could not be deleted from the queue"),
        }
    }
}

#[cfg(test)]
mod tests;
