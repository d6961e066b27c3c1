//! `WarmAgents`: how many idle agents a pool keeps — a number, or `auto` — and the target one
//! pass aims at, given the schedule and the arrivals.
//!
//! # `auto`
//!
//! The target is the larger of two bursts, capped at [`AUTO_MAX`] and at `MaxAgents`:
//!
//! - **the last hour's**: the largest number of arrivals (create-agent requests of jobs of this
//!   elastic profile pair and environment) within any window of one cold start's length during
//!   the last hour ([`AUTO_LOOKBACK`]);
//! - **the coming hour's, on earlier days**: the same, within the hour that follows this moment
//!   ([`AUTO_AHEAD`]) on each of the last three days ([`AUTO_MEMORY_DAYS`]: a weekend does not
//!   erase Friday), the largest of them.
//!
//! Why the last hour: a warm agent that takes a job is replaced by one started on that job's
//! key, which is ready one cold start later. Within one cold start the pool can therefore serve
//! at most as many jobs as it holds; jobs spread over longer are served by the replacements too.
//! The largest burst within one cold start is thus the smallest pool that would have served every
//! job of the last hour warm (keys permitting), and no larger pool would have served more.
//!
//! Why earlier days: CI load repeats by the hour of the working day. A pool sized by the last hour
//! alone shrinks in a quiet hour (the lunch dip) and meets the surge after it with too few agents;
//! it can grow again only from agents kept after their jobs and from the keys of jobs it served, so
//! the surge's first jobs wait a cold start. Looking at the coming hour of earlier days keeps the
//! agents through the dip when the same hour was busy before. A pool cannot grow *ahead* of a
//! surge (a warm agent needs an unused key, and keys come only with jobs): it can only keep what
//! it has. The memory is the plugin's own, in memory: it starts empty when the plugin starts, and
//! "the same hour" is 24 hours earlier (a clock change shifts it by an hour for a day).
//!
//! The idle cost stays bounded: never more idle agents than the largest burst of the last hour or
//! of the same coming hour on the last three days, and never more than [`AUTO_MAX`]. An hour
//! after the last burst, and when earlier days were quiet at the coming hour, the target falls
//! to 0, so a quiet evening retires the pool. Agents that just finished a job count as idle, so
//! steady load keeps the pool without any start at all.
//!
//! Through the night `auto` keeps nothing: no key is left after a quiet stretch, so the morning's
//! first jobs start cold and the pool forms again from their agents. A floor of idle agents kept
//! through the night would meet them, at a night's idle cost; the job-wait benchmark plays that
//! floor beside `auto` (README "Job wait") and the plugin does not keep one.

use std::time::{Duration, SystemTime};

pub use crate::settings::warm_agents::{WarmAgents, WarmAgentsError, MAX_WARM_AGENTS};

/// How far back `auto` looks at arrivals.
pub const AUTO_LOOKBACK: Duration = Duration::from_secs(3600);
/// How far ahead of this moment `auto` looks on earlier days.
pub const AUTO_AHEAD: Duration = Duration::from_secs(3600);
/// How many earlier days `auto` looks at.
pub const AUTO_MEMORY_DAYS: u32 = 3;
/// One day: "the same hour" on an earlier day is this much earlier.
pub const DAY: Duration = Duration::from_secs(86_400);
/// How long a pool remembers an arrival: what [`auto_size`] reads.
pub const AUTO_MEMORY: Duration = Duration::from_secs(86_400 * AUTO_MEMORY_DAYS as u64);
/// The most idle agents `auto` keeps per pool.
pub const AUTO_MAX: u32 = 10;

/// `auto`'s size (before [`AUTO_MAX`]): the larger of [`recent_burst`] and [`earlier_burst`].
pub fn auto_size(arrivals: &[SystemTime], cold_start: Duration, now: SystemTime) -> u32 {
    recent_burst(arrivals, cold_start, now).max(earlier_burst(arrivals, cold_start, now))
}

/// The largest number of `arrivals` within any window of `cold_start` that ends within
/// [`AUTO_LOOKBACK`] before `now` (arrivals after `now` are ignored; order does not matter).
pub fn recent_burst(arrivals: &[SystemTime], cold_start: Duration, now: SystemTime) -> u32 {
    burst(arrivals, cold_start, now.checked_sub(AUTO_LOOKBACK).unwrap_or(SystemTime::UNIX_EPOCH), now)
}

/// The largest burst (as [`recent_burst`]) within the [`AUTO_AHEAD`] that follows this moment of
/// the day, on each of the last [`AUTO_MEMORY_DAYS`] days.
pub fn earlier_burst(arrivals: &[SystemTime], cold_start: Duration, now: SystemTime) -> u32 {
    (1..=AUTO_MEMORY_DAYS)
        .filter_map(|days| now.checked_sub(DAY * days))
        .map(|then| burst(arrivals, cold_start, then, then + AUTO_AHEAD))
        .max()
        .unwrap_or(0)
}

/// The largest number of `arrivals` between `from` and `to` (both included) within any window
/// shorter than `cold_start`.
fn burst(arrivals: &[SystemTime], cold_start: Duration, from: SystemTime, to: SystemTime) -> u32 {
    let mut recent: Vec<SystemTime> = arrivals.iter().copied().filter(|a| *a >= from && *a <= to).collect();
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
/// `arrivals` are the pool's of the last [`AUTO_MEMORY`].
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
    fn auto_remembers_the_coming_hour_of_earlier_days() {
        let day = DAY.as_secs();
        let now = 10 * day + 5000;
        let cold = Duration::from_secs(80);
        let size = |arrivals: &[u64]| {
            let arrivals: Vec<SystemTime> = arrivals.iter().map(|s| at(*s)).collect();
            (auto_size(&arrivals, cold, at(now)), earlier_burst(&arrivals, cold, at(now)))
        };
        // Yesterday, 10 minutes after this moment: a burst of three; nothing recent.
        let yesterday = now - day + 600;
        assert_eq!(size(&[yesterday, yesterday + 5, yesterday + 10]), (3, 3));
        // The same burst just past the coming hour, or in yesterday's past hour: not counted.
        let late = now - day + 3601;
        assert_eq!(size(&[late, late + 5, late + 10]), (0, 0));
        let before = now - day - 600;
        assert_eq!(size(&[before, before + 5, before + 10]), (0, 0));
        // Three days back counts; four do not.
        let third = now - 3 * day + 60;
        assert_eq!(size(&[third, third + 1]), (2, 2));
        let fourth = now - 4 * day + 60;
        assert_eq!(size(&[fourth, fourth + 1]), (0, 0));
        // The larger of the recent burst and the earlier days' wins.
        assert_eq!(size(&[yesterday, yesterday + 5, now - 30, now - 20, now - 10, now - 5]), (4, 2));
        // Early in the plugin's life (a clock near the epoch) there are no earlier days.
        assert_eq!(earlier_burst(&[at(10)], cold, at(100)), 0);
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
            assert_eq!(recent_burst(&arrivals, cold, at(now)), size, "{arrivals:?}");
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
