//! What happens to a cluster profile's tasks and instances without a request: the events ECS and
//! EC2 send through the event queue ([`queue`]), and what happened lately, for operators
//! ([`Events`]: warnings and errors shown in the status reports and sent as server-health
//! messages while they are fresh).

pub mod queue;

use std::collections::VecDeque;
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
