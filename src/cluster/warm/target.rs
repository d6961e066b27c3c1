//! `WarmAgents`: how many idle agents a pool keeps — a number, or `auto` — and the target one
//! pass aims at, given the schedule and the arrivals.
//!
//! # `auto`
//!
//! The target is the largest number of arrivals (create-agent requests of jobs of this elastic
//! profile pair and environment) within any window of one cold start's length during the last
//! hour ([`AUTO_LOOKBACK`]), capped at [`AUTO_MAX`] and at `MaxAgents`.
//!
//! Why: a warm agent that takes a job is replaced by one started on that job's key, which is
//! ready one cold start later. Within one cold start the pool can therefore serve at most as many
//! jobs as it holds; jobs spread over longer are served by the replacements too. The largest
//! burst within one cold start is thus the smallest pool that would have served every job of
//! the last hour warm (keys permitting), and no larger pool would have served more. The idle
//! cost stays bounded: never more idle agents than the largest recent burst (and never more than
//! [`AUTO_MAX`]), and an hour after the last burst the target falls back, so a quiet evening
//! retires the pool. Agents that just finished a job count as idle, so steady load keeps the
//! pool without any start at all.

use std::time::{Duration, SystemTime};

pub use crate::settings::warm_agents::{WarmAgents, WarmAgentsError, MAX_WARM_AGENTS};

/// How far back `auto` looks at arrivals.
pub const AUTO_LOOKBACK: Duration = Duration::from_secs(3600);
/// The most idle agents `auto` keeps per pool.
pub const AUTO_MAX: u32 = 10;

/// The largest number of `arrivals` within any window of `cold_start` that ends within
/// [`AUTO_LOOKBACK`] before `now` (arrivals after `now` are ignored; order does not matter).
pub fn auto_size(arrivals: &[SystemTime], cold_start: Duration, now: SystemTime) -> u32 {
    let since = now.checked_sub(AUTO_LOOKBACK).unwrap_or(SystemTime::UNIX_EPOCH);
    let mut recent: Vec<SystemTime> = arrivals.iter().copied().filter(|a| *a >= since && *a <= now).collect();
    recent.sort_unstable();
    // Two pointers: for each arrival as a window's last, how many lie within cold_start before it.
    let (mut first, mut most) = (0, 0);
    for (last, at) in recent.iter().enumerate() {
        while at.duration_since(recent[first]).unwrap_or_default() >= cold_start && first < last {
            first += 1;
        }
        most = most.max(last + 1 - first);
    }
    u32::try_from(most).unwrap_or(u32::MAX)
}

/// The number of idle agents the pass aims at: 0 outside the schedule's window (`open` false),
/// else the setting (for `auto`, [`auto_size`] capped at [`AUTO_MAX`]), capped at `max_agents`.
pub fn target(
    agents: WarmAgents,
    open: bool,
    arrivals: &[SystemTime],
    cold_start: Duration,
    max_agents: u32,
    now: SystemTime,
) -> u32 {
    if !open {
        return 0;
    }
    let wanted = match agents {
        WarmAgents::Off => 0,
        WarmAgents::Count(n) => n,
        WarmAgents::Auto => auto_size(arrivals, cold_start, now).min(AUTO_MAX),
    };
    wanted.min(max_agents)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn auto_is_the_largest_burst_within_one_cold_start_in_the_last_hour() {
        let now = 10_000;
        let cold = Duration::from_secs(80);
        // (arrivals, size)
        let cases: [(&[u64], u32); 8] = [
            (&[], 0),
            (&[now], 1),
            // Three within 80 s, then two more later: 3.
            (&[now - 500, now - 480, now - 421, now - 200, now - 10], 3),
            // Exactly 80 s apart is two windows.
            (&[now - 300, now - 220, now - 140], 1),
            (&[now - 300, now - 221, now - 142], 2),
            // A burst older than an hour no longer counts.
            (&[now - 3700, now - 3699, now - 3698, now - 100], 1),
            // A burst exactly an hour old still does.
            (&[now - 3600, now - 3600, now - 100], 2),
            // Arrivals after now are ignored; order does not matter.
            (&[now + 1, now + 2, now - 5, now - 40], 2),
        ];
        for (arrivals, size) in cases {
            let arrivals: Vec<SystemTime> = arrivals.iter().map(|s| at(*s)).collect();
            assert_eq!(auto_size(&arrivals, cold, at(now)), size, "{arrivals:?}");
        }
    }

    #[test]
    fn target_caps_and_closes() {
        let now = at(5000);
        let burst: Vec<SystemTime> = (0..15).map(|i| at(4900 + i)).collect();
        let cold = Duration::from_secs(90);
        // (setting, open, max_agents, target)
        let cases = [
            (WarmAgents::Off, true, 10, 0),
            (WarmAgents::Count(3), true, 10, 3),
            (WarmAgents::Count(30), true, 10, 10),
            (WarmAgents::Count(3), false, 10, 0),
            (WarmAgents::Auto, true, 50, AUTO_MAX),
            (WarmAgents::Auto, true, 4, 4),
            (WarmAgents::Auto, false, 50, 0),
        ];
        for (setting, open, max, want) in cases {
            assert_eq!(target(setting, open, &burst, cold, max, now), want, "{setting:?} open {open} max {max}");
        }
        assert_eq!(target(WarmAgents::Auto, true, &burst[..2], cold, 50, now), 2);
    }
}
