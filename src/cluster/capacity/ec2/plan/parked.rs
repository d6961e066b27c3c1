//! The stopped-instance pool (`Ec2StoppedInstances`), as a pure step after [`super::plan`]:
//! it rewrites the plan's launches and idle retirements, so the plugin and the job-wait
//! benchmark run the same rules.
//!
//! 1. **Stale**: a stopped instance whose launch settings (the `gocd:launch-spec` fingerprint:
//!    AMI, user data, instance profile, key pair, root volume, security groups, public IP) are
//!    not the profile's current ones, or whose type is no longer listed, is terminated: starting
//!    it would run agents on what the operator changed away from.
//! 2. **Start before launching**: each planned launch is served by a stopped instance of its OS
//!    and architecture whose type the launch may have, the most recently stopped first (its
//!    image cache is the newest); only the launches left over start new instances.
//! 3. **Stop instead of terminating**: an on-demand instance retired for being idle is stopped
//!    (EBS kept) while fewer than `Ec2StoppedInstances` are stopped; spot instances (one-time
//!    requests, which EC2 cannot stop) and instances retired for another reason are terminated.
//! 4. **Surplus**: stopped instances beyond `Ec2StoppedInstances` (the operator lowered it, or a
//!    restart adopted more) are terminated, the longest stopped first.

use std::time::SystemTime;

use super::{Launch, Plan, Policy, RetireReason, Retirement, Slot};
use crate::cluster::capacity::ec2::{Arch, OsClass};

/// A stopped (or stopping) instance of ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parked {
    /// EC2 instance id.
    pub id: String,
    /// Its OS.
    pub os: OsClass,
    /// Its type's architecture.
    pub arch: Arch,
    /// Its instance type.
    pub instance_type: String,
    /// EC2 says `stopped` (a `stopping` one cannot be started yet).
    pub stopped: bool,
    /// Whether its launch settings are the profile's current ones (`None`: not known this pass;
    /// it is neither started nor terminated as stale).
    pub fresh: Option<bool>,
    /// A spot instance (stopped by someone else: we never stop spot ones).
    pub spot: bool,
    /// Since when it is stopped.
    pub since: SystemTime,
}

/// A stopped instance to start for a planned launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restart {
    /// The stopped instance.
    pub instance: String,
    /// The launch it replaces.
    pub launch: Launch,
    /// The launch was one of [`Plan::launch_on_demand`].
    pub on_demand: bool,
}

/// What the stopped pool changes in a plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reuse {
    /// Stopped instances to start, each for the launch it replaces (to launch after all if the
    /// start is refused).
    pub start: Vec<Restart>,
    /// Idle instances to stop rather than terminate.
    pub stop: Vec<String>,
}

/// Rewrites `plan` for a stopped pool of at most `keep` instances (see the module doc): launches
/// served by stopped instances move to [`Reuse::start`], idle retirements kept move to
/// [`Reuse::stop`], and stale or surplus stopped instances join `plan.retire`.
pub fn reuse(plan: &mut Plan, parked: &[Parked], slots: &[Slot], policy: &Policy, keep: u32) -> Reuse {
    let mut out = Reuse::default();
    let listed = |t: &str| policy.types.iter().any(|o| o.name == t);
    // 1. Stale.
    let mut usable: Vec<&Parked> = Vec::new();
    // Settings unknown this pass: neither started nor stale, but counted in the pool.
    let mut unknown: Vec<&Parked> = Vec::new();
    for p in parked {
        match p.fresh {
            Some(false) => plan.retire.push(Retirement { instance: p.id.clone(), reason: RetireReason::Stale }),
            _ if !listed(&p.instance_type) || p.spot => {
                plan.retire.push(Retirement { instance: p.id.clone(), reason: RetireReason::Stale });
            }
            Some(true) => usable.push(p),
            None => unknown.push(p),
        }
    }
    // 2. Start before launching: the most recently stopped first.
    usable.sort_by(|a, b| b.since.cmp(&a.since).then_with(|| a.id.cmp(&b.id)));
    let mut started = vec![false; usable.len()];
    for (on_demand, launches) in [(true, &mut plan.launch_on_demand), (false, &mut plan.launch)] {
        let mut left = Vec::new();
        for l in launches.drain(..) {
            let found = usable.iter().enumerate().find(|(i, p)| {
                !started[*i] && p.stopped && p.os == l.os && p.arch == l.arch && l.types.contains(&p.instance_type)
            });
            match found {
                Some((i, p)) => {
                    started[i] = true;
                    out.start.push(Restart { instance: p.id.clone(), launch: l, on_demand });
                }
                None => left.push(l),
            }
        }
        *launches = left;
    }
    let mut kept: Vec<&Parked> = usable.iter().zip(&started).filter(|(_, s)| !**s).map(|(p, _)| *p).collect();
    kept.extend(unknown);
    // 3. Stop instead of terminating, while the pool has room.
    let mut room = (keep as usize).saturating_sub(kept.len());
    plan.retire.retain(|r| {
        let on_demand = slots.iter().any(|s| s.id == r.instance && !s.spot);
        if r.reason == RetireReason::Idle && on_demand && room > 0 {
            room -= 1;
            out.stop.push(r.instance.clone());
            false
        } else {
            true
        }
    });
    // 4. Surplus: the longest stopped go.
    kept.sort_by(|a, b| a.since.cmp(&b.since).then_with(|| a.id.cmp(&b.id)));
    let surplus = kept.len().saturating_sub(keep as usize);
    for p in kept.into_iter().take(surplus) {
        plan.retire.push(Retirement { instance: p.id.clone(), reason: RetireReason::SurplusStopped });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::cluster::capacity::ec2::plan::{Registered, Rules, TypeOffer};
    use crate::cluster::capacity::ec2::Resources;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    fn policy() -> Policy {
        Policy {
            min: 0,
            max: 5,
            idle: Duration::from_secs(600),
            register_timeout: Duration::from_secs(300),
            launch_patience: Duration::ZERO,
            types: vec![TypeOffer {
                name: "m5.large".into(),
                capacity: Resources::new(2048, 7680),
                arch: Arch::X86_64,
                known: true,
            }],
            spot: false,
            spot_turn: 0,
            rules: Rules::default(),
        }
    }

    fn parked(id: &str, since: u64) -> Parked {
        Parked {
            id: id.into(),
            os: OsClass::Linux,
            arch: Arch::X86_64,
            instance_type: "m5.large".into(),
            stopped: true,
            fresh: Some(true),
            spot: false,
            since: at(since),
        }
    }

    fn launch() -> Launch {
        Launch { os: OsClass::Linux, arch: Arch::X86_64, types: vec!["m5.large".into()] }
    }

    fn idle_slot(id: &str, spot: bool) -> Slot {
        Slot {
            id: id.into(),
            os: OsClass::Linux,
            instance_type: "m5.large".into(),
            arch: Arch::X86_64,
            launched_at: at(0),
            running: true,
            registered: Some(Registered {
                usable: true,
                total: Resources::new(2048, 7680),
                remaining: Resources::new(2048, 7680),
                tasks: 0,
            }),
            idle_since: Some(at(0)),
            retiring: false,
            spot,
            spot_warned: false,
        }
    }

    fn idle(id: &str) -> Retirement {
        Retirement { instance: id.into(), reason: RetireReason::Idle }
    }

    #[test]
    fn a_launch_starts_the_most_recently_stopped_instance_instead() {
        let mut plan = Plan { launch: vec![launch(), launch()], ..Plan::default() };
        let reuse = reuse(&mut plan, &[parked("i-old", 10), parked("i-new", 20)], &[], &policy(), 2);
        let started: Vec<&str> = reuse.start.iter().map(|r| r.instance.as_str()).collect();
        assert_eq!(started, ["i-new", "i-old"]);
        assert!(plan.launch.is_empty() && plan.retire.is_empty(), "{plan:?}");
    }

    #[test]
    fn an_idle_on_demand_instance_is_stopped_while_the_pool_has_room_else_terminated() {
        let slots = [idle_slot("i-a", false), idle_slot("i-b", false), idle_slot("i-s", true)];
        let mut plan = Plan { retire: vec![idle("i-a"), idle("i-b"), idle("i-s")], ..Plan::default() };
        let reuse = reuse(&mut plan, &[parked("i-p", 5)], &slots, &policy(), 2);
        assert_eq!(reuse.stop, ["i-a"], "one stopped already, room for one more");
        let gone: Vec<&str> = plan.retire.iter().map(|r| r.instance.as_str()).collect();
        assert_eq!(gone, ["i-b", "i-s"], "the pool is full; spot is never stopped");
    }

    #[test]
    fn stale_and_surplus_stopped_instances_are_terminated() {
        let stale = Parked { fresh: Some(false), ..parked("i-stale", 30) };
        let unlisted = Parked { instance_type: "c5.xlarge".into(), ..parked("i-unlisted", 31) };
        let unknown = Parked { fresh: None, ..parked("i-unknown", 32) };
        let pool = [stale, unlisted, unknown, parked("i-1", 1), parked("i-2", 2), parked("i-3", 3)];
        let mut plan = Plan::default();
        assert_eq!(reuse(&mut plan, &pool, &[], &policy(), 1), Reuse::default());
        let gone: Vec<(&str, RetireReason)> = plan.retire.iter().map(|r| (r.instance.as_str(), r.reason)).collect();
        assert_eq!(
            gone,
            [
                ("i-stale", RetireReason::Stale),
                ("i-unlisted", RetireReason::Stale),
                ("i-1", RetireReason::SurplusStopped),
                ("i-2", RetireReason::SurplusStopped),
                ("i-3", RetireReason::SurplusStopped),
            ],
            "the newest stopped one is kept, the one whose settings are unknown this pass"
        );
        let mut plan = Plan::default();
        reuse(&mut plan, &[Parked { fresh: None, ..parked("i-unknown", 32) }], &[], &policy(), 0);
        assert_eq!(plan.retire.len(), 1, "a pool of 0 keeps none, known or not: {plan:?}");
    }

    #[test]
    fn a_stopping_instance_or_one_of_another_architecture_is_not_started() {
        let stopping = Parked { stopped: false, ..parked("i-stopping", 1) };
        let arm = Parked { arch: Arch::Arm64, ..parked("i-arm", 2) };
        let mut plan = Plan { launch: vec![launch()], ..Plan::default() };
        let reuse = reuse(&mut plan, &[stopping, arm], &[], &policy(), 5);
        assert!(reuse.start.is_empty());
        assert_eq!(plan.launch, [launch()], "launched after all");
    }

    #[test]
    fn with_no_pool_nothing_changes() {
        let slots = [idle_slot("i-a", false)];
        let mut plan = Plan { launch: vec![launch()], retire: vec![idle("i-a")], ..Plan::default() };
        let before = plan.clone();
        assert_eq!(reuse(&mut plan, &[], &slots, &policy(), 0), Reuse::default());
        assert_eq!(plan, before);
    }
}
