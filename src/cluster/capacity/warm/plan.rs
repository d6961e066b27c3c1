//! One pass over a warm pool: from what the pool holds (idle agents, agents starting, unused
//! keys, room under `MaxAgents`), its target and the clock, which keys start warm agents, which
//! idle agents retire and which keys are dropped. Pure: the caller applies the plan.

use std::time::{Duration, SystemTime};

use crate::ids::AgentId;

/// How long GoCD accepts an ephemeral auto-register key after making it
/// (`gocd.ephemeral.auto.register.key.expiry.millis`, 30 minutes by default).
pub const KEY_LIFETIME: Duration = Duration::from_secs(30 * 60);
/// The oldest key a warm agent is started with: [`KEY_LIFETIME`] less 10 minutes for the agent
/// to start and register (provisioning, image pull and the agent's own boot take one to two
/// minutes; the rest is margin for a slow pull or a throttled RunTask retried).
pub const KEY_MAX_AGE: Duration = Duration::from_secs(20 * 60);

/// An idle warm (or kept) agent of the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleAgent {
    /// The elastic agent id.
    pub id: AgentId,
    /// Since when it has had no job.
    pub idle_since: SystemTime,
    /// It runs on Spot capacity (`WarmLaunchType` `FARGATE_SPOT`): the cheaper agent to keep.
    pub spot: bool,
}

/// An auto-register key that came with a create-agent request and that no agent has used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnusedKey {
    /// The caller's handle for the key (never the key itself, which is not to be logged).
    pub id: String,
    /// When the create-agent request brought it (GoCD made it just before).
    pub received_at: SystemTime,
}

/// What one pool holds now.
#[derive(Debug, Clone, Default)]
pub struct PoolView {
    /// Idle agents ready for a job.
    pub idle: Vec<IdleAgent>,
    /// Warm agents started and not yet registered (they will join `idle`).
    pub starting: u32,
    /// Unused keys, in any order.
    pub keys: Vec<UnusedKey>,
    /// How many more agents `MaxAgents` allows now (for the cluster profile, all pools and jobs
    /// counted).
    pub headroom: u32,
}

/// What the pass does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WarmPlan {
    /// Keys to start one warm agent each with, oldest first.
    pub start: Vec<String>,
    /// Idle agents to stop, idle longest first.
    pub retire: Vec<AgentId>,
    /// Keys too old to start an agent with: forget them.
    pub drop_keys: Vec<String>,
}

impl WarmPlan {
    /// Whether the pass does nothing.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty() && self.retire.is_empty() && self.drop_keys.is_empty()
    }
}

/// Whether a key received at `received_at` may start an agent at `now`: at most
/// [`KEY_MAX_AGE`] old (a key from the future, a clock step back, counts as new).
pub fn key_usable(received_at: SystemTime, now: SystemTime) -> bool {
    now.duration_since(received_at).unwrap_or_default() <= KEY_MAX_AGE
}

/// One pass: drop the keys older than [`KEY_MAX_AGE`]; while the pool (idle and starting)
/// holds fewer than `target`, start warm agents on the oldest usable keys, as many as the keys
/// and the headroom allow; while it holds more, retire idle agents: those on on-demand capacity
/// first (an idle second there costs about three times a Spot one, and a kept agent started cold
/// for its job runs on the profile's own launch type), then those idle longest (agents still
/// starting are left to register, and go at a later pass if still surplus).
pub fn plan(pool: &PoolView, target: u32, now: SystemTime) -> WarmPlan {
    let (mut usable, old): (Vec<&UnusedKey>, Vec<&UnusedKey>) =
        pool.keys.iter().partition(|k| key_usable(k.received_at, now));
    usable.sort_by(|a, b| a.received_at.cmp(&b.received_at).then_with(|| a.id.cmp(&b.id)));
    let idle = u32::try_from(pool.idle.len()).unwrap_or(u32::MAX);
    let held = idle.saturating_add(pool.starting);
    let missing = usize::try_from(target.saturating_sub(held).min(pool.headroom)).unwrap_or(usize::MAX);
    let start = usable.iter().take(missing).map(|k| k.id.clone()).collect();
    let surplus = usize::try_from(held.saturating_sub(target).min(idle)).unwrap_or(usize::MAX);
    let mut by_idle: Vec<&IdleAgent> = pool.idle.iter().collect();
    by_idle.sort_by(|a, b| (a.spot, a.idle_since).cmp(&(b.spot, b.idle_since)).then_with(|| a.id.cmp(&b.id)));
    let retire = by_idle.iter().take(surplus).map(|a| a.id.clone()).collect();
    let drop_keys = old.iter().map(|k| k.id.clone()).collect();
    WarmPlan { start, retire, drop_keys }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    const NOW: u64 = 100_000;
    const MAX_AGE: u64 = KEY_MAX_AGE.as_secs();

    /// A pool: idle agents (id, seconds idle), starting, keys (id, age in seconds), headroom.
    fn pool(idle: &[(&str, u64)], starting: u32, keys: &[(&str, u64)], headroom: u32) -> PoolView {
        PoolView {
            idle: idle
                .iter()
                .map(|(id, s)| IdleAgent { id: (*id).into(), idle_since: at(NOW - s), spot: id.starts_with("spot") })
                .collect(),
            starting,
            keys: keys.iter().map(|(id, s)| UnusedKey { id: id.to_string(), received_at: at(NOW - s) }).collect(),
            headroom,
        }
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn passes() {
        // (what, pool, target, start, retire, drop)
        let cases = [
            ("empty pool, no keys: nothing to start with", pool(&[], 0, &[], 10), 2, &[][..], &[][..], &[][..]),
            (
                "keys fill the missing places, oldest first",
                pool(&[], 0, &[("k1", 10), ("k2", 300), ("k3", 60)], 10),
                2,
                &["k2", "k3"],
                &[],
                &[],
            ),
            (
                "starting agents count toward the target",
                pool(&[("a", 5)], 1, &[("k1", 10), ("k2", 20)], 10),
                3,
                &["k2"],
                &[],
                &[],
            ),
            ("at the target: nothing", pool(&[("a", 5), ("b", 9)], 0, &[("k1", 10)], 10), 2, &[], &[], &[]),
            (
                "headroom bounds the starts",
                pool(&[], 0, &[("k1", 10), ("k2", 20), ("k3", 30)], 1),
                3,
                &["k3"],
                &[],
                &[],
            ),
            ("no headroom: no start", pool(&[], 0, &[("k1", 10)], 0), 1, &[], &[], &[]),
            ("fewer keys than places: all usable ones", pool(&[], 0, &[("k1", 10)], 10), 4, &["k1"], &[], &[]),
            (
                "surplus retires, idle longest first",
                pool(&[("a", 5), ("b", 500), ("c", 50)], 0, &[], 10),
                1,
                &[],
                &["b", "c"],
                &[],
            ),
            (
                "surplus on on-demand capacity retires before Spot, then idle longest first",
                pool(&[("spot-a", 900), ("b", 5), ("spot-c", 50), ("d", 60)], 0, &[], 10),
                1,
                &[],
                &["d", "b", "spot-a"],
                &[],
            ),
            (
                "target 0 (window closed) retires every idle agent",
                pool(&[("a", 5), ("b", 7)], 0, &[("k1", 10)], 10),
                0,
                &[],
                &["b", "a"],
                &[],
            ),
            ("starting agents are not retired", pool(&[("a", 5)], 3, &[], 10), 1, &[], &["a"], &[]),
            (
                "expired keys are dropped, never used",
                pool(&[], 0, &[("old", MAX_AGE + 1), ("new", 30)], 10),
                2,
                &["new"],
                &[],
                &["old"],
            ),
            (
                "a key exactly at the age limit is still usable",
                pool(&[], 0, &[("edge", MAX_AGE)], 10),
                1,
                &["edge"],
                &[],
                &[],
            ),
            (
                "keys are dropped even when none are needed",
                pool(&[("a", 1)], 0, &[("old", 1800), ("new", 1)], 10),
                1,
                &[],
                &[],
                &["old"],
            ),
            ("a key past GoCD's expiry is dropped too", pool(&[], 0, &[("dead", 3600)], 10), 1, &[], &[], &["dead"]),
        ];
        for (what, pool, target, start, retire, drop) in cases {
            let got = plan(&pool, target, at(NOW));
            assert_eq!(
                got,
                WarmPlan {
                    start: ids(start),
                    retire: ids(retire).into_iter().map(AgentId::from).collect(),
                    drop_keys: ids(drop)
                },
                "{what}"
            );
        }
    }

    #[test]
    fn a_key_from_the_future_is_young() {
        assert!(key_usable(at(NOW + 60), at(NOW)));
        assert!(!key_usable(at(NOW - MAX_AGE - 1), at(NOW)));
    }

    #[test]
    fn never_an_expired_key_whatever_the_pool() {
        // Every pool shape, every key age around the limits: no started key is older than the
        // limit, and an agent started with one registers before GoCD's expiry if it takes less
        // than the margin.
        for age in [0, 1, 600, MAX_AGE - 1, MAX_AGE, MAX_AGE + 1, 1799, 1800, 1801, 7200] {
            for target in 0..4 {
                for starting in 0..3 {
                    let view = pool(&[("a", 10)], starting, &[("k", age), ("young", 5)], 10);
                    let got = plan(&view, target, at(NOW));
                    assert!(!got.start.contains(&"k".to_string()) || age <= MAX_AGE);
                    assert!(got.drop_keys.contains(&"k".to_string()) == (age > MAX_AGE));
                    assert!(got.start.iter().all(|k| !got.drop_keys.contains(k)));
                }
            }
        }
        assert!(KEY_MAX_AGE + Duration::from_secs(10 * 60) <= KEY_LIFETIME);
    }
}
