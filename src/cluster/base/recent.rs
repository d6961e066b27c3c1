//! What happened lately to one cluster profile's engine, for operators: its recent warnings and
//! errors ([`Events`], shown in the status reports and sent as server-health messages while they
//! are fresh) and what it knows of its event queue ([`QueueStatus`]: read or failing, the stops
//! its events told of, those it missed).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::protocol::host_calls::HealthKind;

/// How many events a cluster keeps.
const KEEP: usize = 100;
/// How long an event stays on GoCD's server-health page.
pub const HEALTH_FRESH_FOR: Duration = Duration::from_secs(15 * 60);

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// When.
    pub at: SystemTime,
    /// Warning or error.
    pub kind: HealthKind,
    /// What happened, for an operator.
    pub message: String,
}

/// Recent events, newest last.
#[derive(Debug, Default)]
pub struct Events {
    events: VecDeque<Event>,
    recorded: usize,
}

impl Events {
    /// Records an event (and logs it).
    pub fn push(&mut self, kind: HealthKind, message: impl Into<String>, at: SystemTime) {
        let message = message.into();
        match kind {
            HealthKind::Warning => tracing::warn!(%message, "cluster event"),
            HealthKind::Error => tracing::error!(%message, "cluster event"),
        }
        if self.events.len() == KEEP {
            self.events.pop_front();
        }
        self.events.push_back(Event { at, kind, message });
        self.recorded += 1;
    }

    /// How many events were ever recorded (kept or not): grows with each one.
    pub fn recorded(&self) -> usize {
        self.recorded
    }

    /// Every kept event, newest first.
    pub fn recent(&self) -> Vec<Event> {
        self.events.iter().rev().cloned().collect()
    }

    /// Events younger than [`HEALTH_FRESH_FOR`], deduplicated, newest first.
    pub fn fresh(&self, now: SystemTime) -> Vec<Event> {
        let mut seen = std::collections::HashSet::new();
        self.events
            .iter()
            .rev()
            .filter(|e| now.duration_since(e.at).unwrap_or_default() < HEALTH_FRESH_FOR)
            .filter(|e| seen.insert(e.message.clone()))
            .cloned()
            .collect()
    }
}

/// How long after server-ping found a stop its event may still come before the queue is said to
/// have missed it.
pub const MISSED_AFTER: Duration = Duration::from_secs(30);
/// A failing queue's warning is repeated this often (server health shows events for 15 minutes).
const WARN_AGAIN_AFTER: Duration = Duration::from_secs(10 * 60);
/// How many stops told by events are remembered, waiting for server-ping to find them.
const TOLD_KEPT: usize = 1000;

/// What one cluster profile knows of its event queue, for reports and server health.
#[derive(Debug, Default, Clone, Serialize)]
pub struct QueueStatus {
    /// The queue read for this profile, while a poller reads it.
    pub url: Option<String>,
    /// When a read last succeeded.
    pub last_read: Option<SystemTime>,
    /// Why the last read failed, while it fails.
    pub error: Option<String>,
    /// Events that changed one of this profile's tasks.
    pub events: u64,
    /// Stopped tasks whose agents were removed on an event.
    pub stops: u64,
    /// Tasks server-ping found stopped that no event had told of.
    pub missed: u64,
    #[serde(skip)]
    warned: Option<(String, SystemTime)>,
    /// Agents whose stop an event told of (not "missed" when server-ping reports them).
    #[serde(skip)]
    told: BTreeSet<String>,
    /// Agents whose stop server-ping found first, and when: missed unless their event comes
    /// within [`MISSED_AFTER`] (a ping may simply have been quicker than EventBridge).
    #[serde(skip)]
    suspects: BTreeMap<String, SystemTime>,
}

impl QueueStatus {
    /// Whether the queue has been read successfully and reads still succeed.
    pub fn healthy(&self) -> bool {
        self.last_read.is_some() && self.error.is_none()
    }

    /// Server-ping found the agent's task stopped at `now`: unless an event told of it, or the
    /// queue cannot be read (server health says so already), its event is awaited for
    /// [`MISSED_AFTER`] ([`QueueStatus::settle`]).
    pub fn found_by_ping(&mut self, agent_id: &str, now: SystemTime) {
        if self.told.remove(agent_id) || self.error.is_some() {
            return;
        }
        self.suspects.insert(agent_id.to_string(), now);
    }

    /// The agents whose stops server-ping found and whose events have not come within
    /// [`MISSED_AFTER`] of `now`: the queue missed them, and they are counted so.
    pub fn settle(&mut self, now: SystemTime) -> Vec<String> {
        let due: Vec<String> = self
            .suspects
            .iter()
            .filter(|(_, at)| now.duration_since(**at).unwrap_or_default() >= MISSED_AFTER)
            .map(|(agent, _)| agent.clone())
            .collect();
        for agent in &due {
            self.suspects.remove(agent);
        }
        self.missed += due.len() as u64;
        due
    }

    /// An event came for an agent whose stop server-ping may have found first: whether it had
    /// (the event came late, but the queue did not miss it).
    pub fn late(&mut self, agent_id: &str) -> bool {
        self.suspects.remove(agent_id).is_some()
    }

    /// An event told of the agent's stop before server-ping found it.
    pub fn told(&mut self, agent_id: &str) {
        if self.told.len() >= TOLD_KEPT {
            self.told.clear(); // agents whose ping never came (the plugin stopped them itself)
        }
        self.told.insert(agent_id.to_string());
    }

    /// A read of `url` succeeded at `now`: whether it follows failed ones (the queue is read
    /// again).
    pub fn read(&mut self, url: &str, now: SystemTime) -> bool {
        self.url = Some(url.to_string());
        self.last_read = Some(now);
        self.warned = None;
        self.error.take().is_some()
    }

    /// A read of `url` failed at `now` with `error`: whether to warn (a new error, or the same
    /// one [`WARN_AGAIN_AFTER`] after the last warning).
    pub fn failed(&mut self, url: &str, error: &str, now: SystemTime) -> bool {
        self.url = Some(url.to_string());
        self.error = Some(error.to_string());
        let due = self
            .warned
            .as_ref()
            .is_none_or(|(said, at)| said != error || now.duration_since(*at).unwrap_or_default() >= WARN_AGAIN_AFTER);
        if due {
            self.warned = Some((error.to_string(), now));
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_and_expires_health() {
        let t0 = SystemTime::UNIX_EPOCH;
        let mut e = Events::default();
        for i in 0..150 {
            e.push(HealthKind::Warning, format!("w{i}"), t0);
        }
        assert_eq!(e.recent().len(), KEEP);
        assert_eq!(e.recent()[0].message, "w149");
        e.push(HealthKind::Error, "w149", t0);
        assert_eq!(e.fresh(t0).iter().filter(|x| x.message == "w149").count(), 1);
        assert!(e.fresh(t0 + HEALTH_FRESH_FOR).is_empty());
    }
}
