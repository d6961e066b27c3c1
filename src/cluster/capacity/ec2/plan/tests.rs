//! The planner's decisions, one behaviour per test, on hand-built snapshots.

use super::*;

const T0: SystemTime = SystemTime::UNIX_EPOCH;
const BOX: Resources = Resources::new(4096, 7482);
const JOB: Resources = Resources::new(1024, 1800);

/// The patience the tests of [`Rules::patient_scale_out`] wait (the default is 0, launching at
/// once; an operator sets a patience to trade waiting for cost).
const PATIENCE: Duration = Duration::from_secs(600);

fn policy() -> Policy {
    Policy {
        min: 0,
        max: 8,
        idle: Duration::from_secs(600),
        register_timeout: Duration::from_secs(300),
        launch_patience: PATIENCE,
        types: vec![offer("c5.xlarge", BOX, Arch::X86_64)],
        spot: false,
        spot_turn: 0,
        rules: Rules::default(),
    }
}

fn offer(name: &str, capacity: Resources, arch: Arch) -> TypeOffer {
    TypeOffer { name: name.into(), capacity, arch, known: true }
}

fn oses(launches: &[Launch]) -> Vec<OsClass> {
    launches.iter().map(|l| l.os).collect()
}

fn at(secs: u64) -> SystemTime {
    T0 + Duration::from_secs(secs)
}

fn demand(id: &str, need: Resources) -> Demand {
    Demand { id: id.into(), need, os: OsClass::Linux, arch: Arch::X86_64, since: T0, on_demand: false }
}

fn demands(n: usize) -> Vec<Demand> {
    (0..n).map(|i| demand(&format!("d{i:02}"), JOB)).collect()
}

fn starting(id: &str, launched: u64) -> Slot {
    Slot {
        id: id.into(),
        os: OsClass::Linux,
        instance_type: "c5.xlarge".into(),
        arch: Arch::X86_64,
        launched_at: at(launched),
        running: false,
        registered: None,
        idle_since: None,
        retiring: false,
        spot: false,
        spot_warned: false,
    }
}

fn registered(id: &str, remaining: Resources, tasks: u32, idle_since: Option<u64>) -> Slot {
    Slot {
        id: id.into(),
        os: OsClass::Linux,
        instance_type: "c5.xlarge".into(),
        arch: Arch::X86_64,
        launched_at: T0,
        running: true,
        registered: Some(Registered { usable: true, total: BOX, remaining, tasks }),
        idle_since: idle_since.map(at),
        retiring: false,
        spot: false,
        spot_warned: false,
    }
}

#[test]
fn work_whose_job_spot_interrupted_goes_to_on_demand_instances_only() {
    let spot = Slot { spot: true, ..registered("spot", BOX, 0, None) };
    let rerun = Demand { on_demand: true, ..demand("rerun", JOB) };
    let p = plan(&[spot], &[rerun.clone(), demand("other", JOB)], &policy(), T0);
    assert_eq!(p.start, vec![Placement { demand: "other".into(), instance: "spot".into() }]);
    assert_eq!((p.launch.len(), oses(&p.launch_on_demand)), (0, vec![OsClass::Linux]));
    // A starting on-demand instance takes it; a starting spot one does not.
    let starting_spot = Slot { spot: true, ..starting("s", 0) };
    let p = plan(&[starting_spot], std::slice::from_ref(&rerun), &policy(), T0);
    assert_eq!(oses(&p.launch_on_demand), vec![OsClass::Linux]);
    let p = plan(&[starting("od", 0)], std::slice::from_ref(&rerun), &policy(), T0);
    assert!(p.launch.is_empty() && p.launch_on_demand.is_empty(), "{p:?}");
    // And an on-demand instance with room places it.
    let p = plan(&[registered("od", BOX, 0, None)], &[rerun], &policy(), T0);
    assert_eq!(p.start, vec![Placement { demand: "rerun".into(), instance: "od".into() }]);
}

#[test]
fn a_spot_warning_launches_on_demand_room_for_the_reruns_before_the_instance_goes() {
    let two_used = BOX.minus(JOB).minus(JOB);
    let warned = Slot { spot: true, spot_warned: true, ..registered("doomed", two_used, 2, None) };
    // Drained (not usable): nothing is placed on it, and its two tasks' room is launched now.
    let draining =
        Slot { registered: warned.registered.clone().map(|r| Registered { usable: false, ..r }), ..warned.clone() };
    let p = plan(std::slice::from_ref(&draining), &[], &policy(), T0);
    assert_eq!((p.launch.len(), oses(&p.launch_on_demand)), (0, vec![OsClass::Linux]), "{p:?}");
    assert_eq!(p.waiting, 0, "nothing waits yet: the reruns are not asked for");
    // On-demand room already running takes them: nothing launched. Spot room does not.
    let od = registered("od", BOX.minus(JOB), 1, None);
    let p = plan(&[draining.clone(), od], &[], &policy(), T0);
    assert!(p.launch_on_demand.is_empty(), "{p:?}");
    let spot_room = Slot { spot: true, ..registered("spot", BOX, 0, None) };
    let p = plan(&[draining.clone(), spot_room], &[], &policy(), T0);
    assert_eq!(oses(&p.launch_on_demand), vec![OsClass::Linux]);
    // An on-demand instance already starting counts, and so does Ec2MaxInstances.
    let p = plan(&[draining.clone(), starting("od", 0)], &[], &policy(), T0);
    assert!(p.launch_on_demand.is_empty(), "{p:?}");
    let p = plan(std::slice::from_ref(&draining), &[], &Policy { max: 1, ..policy() }, T0);
    assert!(p.launch_on_demand.is_empty(), "{p:?}");
    // Once EC2 takes it (or its tasks are gone) the reruns are real demands, not counted twice.
    let p = plan(&[Slot { running: false, ..draining.clone() }], &[], &policy(), T0);
    assert!(p.launch_on_demand.is_empty(), "{p:?}");
    let emptied = Slot { spot: true, spot_warned: true, ..registered("doomed", BOX, 0, None) };
    let p = plan(&[emptied], &[], &policy(), T0);
    assert!(p.launch_on_demand.is_empty(), "{p:?}");
    // Two reruns already waiting and three tasks coming back: five quarters, two instances.
    let three_used = BOX.minus(JOB).minus(JOB).minus(JOB);
    let busy = Slot { spot: true, spot_warned: true, ..registered("doomed", three_used, 3, None) };
    let reruns: Vec<Demand> = (0..2).map(|i| Demand { on_demand: true, ..demand(&format!("r{i}"), JOB) }).collect();
    let p = plan(&[busy], &reruns, &policy(), T0);
    assert_eq!(p.launch_on_demand.len(), 2, "{p:?}");
}

#[test]
fn on_demand_room_kept_for_reruns_is_not_retired_as_idle() {
    let two_used = BOX.minus(JOB).minus(JOB);
    let draining = Slot {
        spot: true,
        spot_warned: true,
        registered: Some(Registered { usable: false, total: BOX, remaining: two_used, tasks: 2 }),
        ..registered("doomed", two_used, 2, None)
    };
    // The replacement launched during the warning, idle since it registered, long enough to
    // go (slack on a busy spot instance would even make it go at once).
    let replacement = registered("od", BOX, 0, Some(0));
    let slack = Slot { spot: true, ..registered("spot", BOX.minus(JOB), 1, None) };
    let late = T0 + Duration::from_secs(3600);
    let p = plan(&[draining.clone(), replacement.clone(), slack.clone()], &[], &policy(), late);
    assert!(p.retire.is_empty() && p.launch_on_demand.is_empty(), "{p:?}");
    // Once EC2 has taken the warned instance it is an idle instance like any other.
    let taken = Slot { running: false, ..draining };
    let p = plan(&[taken, replacement, slack], &[], &policy(), late);
    assert_eq!(p.retire.iter().map(|r| r.instance.as_str()).collect::<Vec<_>>(), ["od"], "{p:?}");
}

#[test]
fn thirty_tasks_four_to_an_instance_launch_eight() {
    let p = plan(&[], &demands(30), &policy(), T0);
    assert_eq!(p.launch.len(), 8);
    assert_eq!((p.start.len(), p.waiting), (0, 30));
}

#[test]
fn instances_still_starting_absorb_waiting_work_before_new_launches() {
    let slots: Vec<Slot> = (0..3).map(|i| starting(&format!("i-{i}"), 0)).collect();
    let p = plan(&slots, &demands(14), &policy(), at(10));
    assert_eq!(p.launch.len(), 1, "12 fit the 3 starting instances, 2 need one more");
    let p = plan(&slots, &demands(12), &policy(), at(10));
    assert!(p.launch.is_empty());
}

#[test]
fn never_more_than_max_counting_starting_instances() {
    let slots: Vec<Slot> = (0..7).map(|i| starting(&format!("i-{i}"), 0)).collect();
    let p = plan(&slots, &demands(60), &policy(), at(10));
    assert_eq!(p.launch.len(), 1);
    let mut full = policy();
    full.max = 7;
    assert!(plan(&slots, &demands(60), &full, at(10)).launch.is_empty());
}

#[test]
fn places_largest_first_on_the_tightest_fit() {
    let slots = vec![registered("i-empty", BOX, 0, Some(0)), registered("i-half", Resources::new(2048, 3700), 2, None)];
    let big = demand("big", Resources::new(3072, 3000));
    let small = demand("small", Resources::new(1024, 1800));
    let p = plan(&slots, &[small, big], &policy(), at(1));
    assert_eq!(
        p.start,
        vec![
            Placement { demand: "big".into(), instance: "i-empty".into() },
            Placement { demand: "small".into(), instance: "i-half".into() },
        ]
    );
    assert!(p.launch.is_empty() && p.retire.is_empty());
}

#[test]
fn placements_use_up_room_within_one_pass() {
    let slots = vec![registered("i-a", BOX, 0, None)];
    let impatient = Policy { rules: Rules { patient_scale_out: false, ..Rules::default() }, ..policy() };
    let p = plan(&slots, &demands(5), &impatient, at(1));
    assert_eq!(p.start.len(), 4);
    assert_eq!((p.waiting, p.launch.len()), (1, 1));
    let p = plan(&slots, &demands(5), &policy(), at(1));
    assert_eq!((p.start.len(), p.waiting, p.launch.len()), (4, 1, 0), "i-a is busy now: the fifth waits for it");
}

#[test]
fn patient_scale_out_waits_for_room_on_a_busy_instance_before_launching() {
    let full = vec![registered("i-full", Resources::new(0, 282), 4, None)];
    let patience = PATIENCE.as_secs();
    let p = plan(&full, &demands(1), &policy(), at(patience - 1));
    assert_eq!((p.waiting, p.launch.len()), (1, 0), "a task of i-full may end first: {p:?}");
    let p = plan(&full, &demands(1), &policy(), at(patience));
    assert_eq!(p.launch.len(), 1, "waited Ec2ScaleOutWaitSeconds: launched for");
    let impatient = Policy { rules: Rules { patient_scale_out: false, ..Rules::default() }, ..policy() };
    assert_eq!(plan(&full, &demands(1), &impatient, at(1)).launch.len(), 1);
    // Ec2ScaleOutWaitSeconds 0 (the operator's choice): at once; 60: after a minute.
    let at_once = Policy { launch_patience: Duration::ZERO, ..policy() };
    assert_eq!(plan(&full, &demands(1), &at_once, at(0)).launch.len(), 1);
    let minute = Policy { launch_patience: Duration::from_secs(60), ..policy() };
    assert_eq!(plan(&full, &demands(1), &minute, at(59)).launch.len(), 0);
    assert_eq!(plan(&full, &demands(1), &minute, at(60)).launch.len(), 1);
    // No busy instance that could take it: of another OS, spot for work that must run on
    // demand, or none busy at all.
    let win = Demand { os: OsClass::Windows, ..demand("w", JOB) };
    assert_eq!(oses(&plan(&full, &[win], &policy(), at(1)).launch), vec![OsClass::Windows]);
    let spot = vec![Slot { spot: true, ..full[0].clone() }];
    let rerun = Demand { on_demand: true, ..demand("rerun", JOB) };
    assert_eq!(oses(&plan(&spot, &[rerun], &policy(), at(1)).launch_on_demand), vec![OsClass::Linux]);
    // Nor a busy instance of another architecture.
    let arm_work = Demand { arch: Arch::Arm64, ..demand("a", JOB) };
    let p = plan(&full, &[arm_work], &mixed(), at(1));
    assert_eq!(p.launch.iter().map(|l| l.arch).collect::<Vec<_>>(), vec![Arch::Arm64]);
    assert_eq!(plan(&[], &demands(1), &policy(), at(1)).launch.len(), 1);
    // A starting instance still takes it into account (nothing more launched).
    let p = plan(&[full[0].clone(), starting("i-new", 200)], &demands(1), &policy(), at(400));
    assert!(p.launch.is_empty(), "{p:?}");
}

#[test]
fn no_more_work_waits_than_three_quarters_of_the_work_running() {
    // Two full instances run about two instances' work: 1.5 instances' worth may wait for room.
    let full = |id| registered(id, Resources::new(0, 282), 4, None);
    let busy = [full("i-a"), full("i-b")];
    let quarters: Vec<Demand> = (0..8).map(|i| Demand { since: at(i), ..demand(&format!("d{i}"), JOB) }).collect();
    let p = plan(&busy, &quarters, &policy(), at(10));
    assert_eq!((p.waiting, p.launch.len()), (8, 1), "the 6 oldest wait, the newest 2 launch one: {p:?}");
    // The bound is per OS: Windows work does not use up the Linux allowance.
    let mut mixed_os = quarters[..6].to_vec();
    mixed_os.push(Demand { os: OsClass::Windows, ..demand("w", JOB) });
    assert_eq!(
        oses(&plan(&busy, &mixed_os, &policy(), at(10)).launch),
        vec![OsClass::Windows],
        "no busy Windows instance"
    );
    // Without the rule every task waits out its patience.
    let unbounded = Policy { rules: Rules { waiting_bounded: false, ..Rules::default() }, ..policy() };
    assert!(plan(&busy, &quarters, &unbounded, at(10)).launch.is_empty());
    // One half-full instance: a half-instance task is more than three quarters of its work.
    let half = [registered("i-half", Resources::new(2048, 3741), 2, None)];
    assert_eq!(plan(&half, &[demand("big", Resources::new(2560, 3000))], &policy(), at(1)).launch.len(), 1);
    assert!(plan(&half, &[demand("small", Resources::new(1024, 1800))], &policy(), at(1)).launch.is_empty());
}

#[test]
fn a_task_needing_a_whole_instance_waits_for_a_busy_one_to_empty() {
    let full = |id| registered(id, Resources::new(0, 282), 4, None);
    let busy = [full("i-a"), full("i-b")];
    let whole = demand("whole", Resources::new(4096, 7000));
    let p = plan(&busy, std::slice::from_ref(&whole), &policy(), at(1));
    assert_eq!((p.waiting, p.launch.len()), (1, 0), "{p:?}");
    // Once one empties it goes there; after the patience it is launched for.
    let emptied = [full("i-a"), registered("i-b", BOX, 0, Some(1))];
    let p = plan(&emptied, std::slice::from_ref(&whole), &policy(), at(2));
    assert_eq!(p.start, vec![Placement { demand: "whole".into(), instance: "i-b".into() }]);
    assert_eq!(plan(&busy, std::slice::from_ref(&whole), &policy(), at(PATIENCE.as_secs())).launch.len(), 1);
    // One busy instance runs less work than the task needs: launched for at once.
    assert_eq!(plan(&busy[..1], std::slice::from_ref(&whole), &policy(), at(1)).launch.len(), 1);
    // Without the rule such a task launches at once.
    let at_once = Policy { rules: Rules { whole_tasks_wait: false, ..Rules::default() }, ..policy() };
    assert_eq!(plan(&busy, &[whole], &at_once, at(1)).launch.len(), 1);
}

#[test]
fn room_on_busy_instances_is_the_warm_spare() {
    let idle = registered("i-idle", BOX, 0, Some(0));
    let half = registered("i-half", Resources::new(2048, 3682), 2, None);
    let full = registered("i-full", Resources::new(0, 282), 4, None);
    let retired = |p: Plan| p.retire.into_iter().map(|r| r.instance).collect::<Vec<_>>();
    let slack = [idle.clone(), half.clone()];
    assert_eq!(retired(plan(&slack, &[], &policy(), at(1))), ["i-idle"], "half an instance free: no spare kept");
    let tight = [idle.clone(), full.clone()];
    assert!(plan(&tight, &[], &policy(), at(599)).retire.is_empty(), "no room elsewhere: i-idle is the spare");
    assert_eq!(retired(plan(&tight, &[], &policy(), at(600))), ["i-idle"]);
    let off = Policy { rules: Rules { slack_is_the_spare: false, ..Rules::default() }, ..policy() };
    assert!(plan(&slack, &[], &off, at(599)).retire.is_empty());
    // Ec2MinInstances still counts.
    assert!(plan(&slack, &[], &Policy { min: 2, ..policy() }, at(1)).retire.is_empty());
    // Room taken in this pass is not slack.
    let p = plan(&slack, &demands(2), &policy(), at(1));
    assert_eq!(p.start.len(), 2);
    assert!(p.retire.is_empty(), "i-half is full now, so i-idle stays the spare: {p:?}");
}

#[test]
fn os_must_match() {
    let slots = vec![registered("i-linux", BOX, 0, None)];
    let win = Demand { os: OsClass::Windows, ..demand("w", JOB) };
    let p = plan(&slots, &[win], &policy(), at(1));
    assert!(p.start.is_empty());
    assert_eq!(oses(&p.launch), vec![OsClass::Windows]);
}

#[test]
fn a_task_larger_than_an_instance_is_refused_not_launched_for() {
    let p = plan(&[], &[demand("huge", Resources::new(8192, 1000))], &policy(), T0);
    assert_eq!(p.too_big, vec!["huge".to_string()]);
    assert!(p.launch.is_empty());
    let mut unknown = policy();
    unknown.types[0].known = false;
    let p = plan(&[], &[demand("huge", Resources::new(8192, 1000))], &unknown, T0);
    assert_eq!((p.too_big.len(), p.launch.len()), (0, 1), "unknown capacity: try one instance");
}

#[test]
fn an_instance_that_never_registers_is_retired_after_the_timeout_and_replaced() {
    let slots = vec![starting("i-stuck", 0)];
    let p = plan(&slots, &demands(2), &policy(), at(300));
    assert!(p.retire.is_empty() && p.launch.is_empty(), "not before the timeout");
    let p = plan(&slots, &demands(2), &policy(), at(301));
    assert_eq!(p.retire, vec![Retirement { instance: "i-stuck".into(), reason: RetireReason::NeverRegistered }]);
    assert_eq!(p.launch.len(), 1, "its waiting work gets a new instance");
}

#[test]
fn idle_instances_retire_after_the_idle_time_down_to_the_minimum() {
    let slots = vec![
        registered("i-a", BOX, 0, Some(0)),
        registered("i-b", BOX, 0, Some(100)),
        registered("i-busy", Resources::new(3072, 5682), 1, None),
    ];
    let every_idle_kept = Policy { rules: Rules::NONE, ..policy() };
    assert!(plan(&slots, &[], &every_idle_kept, at(599)).retire.is_empty());
    let p = plan(&slots, &[], &policy(), at(700));
    assert_eq!(p.retire.iter().map(|r| r.instance.as_str()).collect::<Vec<_>>(), ["i-a", "i-b"]);
    let mut warm = policy();
    warm.min = 2;
    let p = plan(&slots, &[], &warm, at(700));
    assert_eq!(p.retire.iter().map(|r| r.instance.as_str()).collect::<Vec<_>>(), ["i-a"], "longest idle goes first");
}

#[test]
fn one_warm_spare_waits_the_idle_time_the_surplus_goes_after_two_minutes() {
    let slots = vec![
        registered("i-old", BOX, 0, Some(0)),
        registered("i-mid", BOX, 0, Some(30)),
        registered("i-last", BOX, 0, Some(60)),
        registered("i-busy", Resources::new(512, 900), 3, None),
    ];
    let retired = |p: Plan| p.retire.into_iter().map(|r| r.instance).collect::<Vec<_>>();
    assert!(plan(&slots, &[], &policy(), at(119)).retire.is_empty(), "not before two minutes");
    assert_eq!(retired(plan(&slots, &[], &policy(), at(120))), ["i-old"], "paced: one by one as each turns 2 min");
    assert_eq!(retired(plan(&slots, &[], &policy(), at(500))), ["i-old", "i-mid"], "i-last is the warm spare");
    assert_eq!(retired(plan(&slots, &[], &policy(), at(660))), ["i-old", "i-mid", "i-last"]);
    // Work for one of them this pass: it stays, and the spare is the next freshest.
    let p = plan(&slots, &[demand("d", Resources::new(4096, 7000))], &policy(), at(500));
    assert_eq!(p.start, vec![Placement { demand: "d".into(), instance: "i-last".into() }], "{p:?}");
    assert_eq!(retired(p), ["i-old"], "i-mid is now the spare");
    // The minimum counts the spare too.
    let warm = Policy { min: 3, ..policy() };
    assert_eq!(retired(plan(&slots, &[], &warm, at(500))), ["i-old"]);
    // Ec2IdleMinutes shorter than two minutes: everyone goes after it.
    let short = Policy { idle: Duration::from_secs(60), ..policy() };
    assert_eq!(retired(plan(&slots, &[], &short, at(120))), ["i-old", "i-mid", "i-last"]);
}

#[test]
fn an_idle_instance_given_work_in_this_pass_stays() {
    let slots = vec![registered("i-a", BOX, 0, Some(0))];
    let p = plan(&slots, &demands(1), &policy(), at(10_000));
    assert_eq!(p.start.len(), 1);
    assert!(p.retire.is_empty());
}

#[test]
fn the_minimum_is_kept_warm() {
    let mut warm = policy();
    warm.min = 2;
    assert_eq!(oses(&plan(&[], &[], &warm, T0).launch), vec![OsClass::Linux, OsClass::Linux]);
    assert_eq!(plan(&[starting("i-a", 0)], &[], &warm, T0).launch.len(), 1);
}

#[test]
fn unusable_instances_get_no_work_and_retire_when_empty_long_enough() {
    let mut drained = registered("i-d", BOX, 0, Some(0));
    drained.registered.as_mut().unwrap().usable = false;
    let p = plan(std::slice::from_ref(&drained), &demands(1), &policy(), at(10));
    assert!(p.start.is_empty());
    assert_eq!(p.launch.len(), 1);
    let p = plan(&[drained], &[], &policy(), at(301));
    assert_eq!(p.retire[0].reason, RetireReason::Unhealthy);
}

#[test]
fn instances_being_retired_are_not_counted_or_used() {
    let mut going = registered("i-going", BOX, 0, Some(0));
    going.retiring = true;
    let mut tight = policy();
    tight.max = 1;
    let p = plan(&[going], &demands(1), &tight, at(10));
    assert!(p.start.is_empty() && p.retire.is_empty());
    assert_eq!(p.launch.len(), 1);
}

#[test]
fn plans_are_idempotent() {
    let slots = vec![registered("i-a", BOX, 0, Some(0)), starting("i-b", 5)];
    let d = demands(6);
    assert_eq!(plan(&slots, &d, &policy(), at(20)), plan(&slots, &d, &policy(), at(20)));
}

/// c5.large, c5.xlarge, c6g.xlarge and m5.xlarge, listed in that order.
fn mixed() -> Policy {
    Policy {
        types: vec![
            offer("m5.xlarge", Resources::new(4096, 14964), Arch::X86_64),
            offer("c5.xlarge", BOX, Arch::X86_64),
            offer("c6g.xlarge", BOX, Arch::Arm64),
            offer("c5.large", Resources::new(2048, 3741), Arch::X86_64),
        ],
        ..policy()
    }
}

fn arm(id: &str, need: Resources) -> Demand {
    Demand { arch: Arch::Arm64, ..demand(id, need) }
}

fn types(l: &Launch) -> Vec<&str> {
    l.types.iter().map(String::as_str).collect()
}

#[test]
fn tasks_run_only_on_instances_of_their_architecture() {
    let x86 = registered("i-x86", BOX, 0, None);
    let graviton = Slot { instance_type: "c6g.xlarge".into(), arch: Arch::Arm64, ..registered("i-arm", BOX, 0, None) };
    let p = plan(&[x86.clone(), graviton], &[arm("a", JOB), demand("x", JOB)], &mixed(), at(1));
    assert_eq!(
        p.start,
        vec![
            Placement { demand: "a".into(), instance: "i-arm".into() },
            Placement { demand: "x".into(), instance: "i-x86".into() },
        ]
    );
    // Only an x86 instance with room: the ARM64 task gets a new c6g, not the x86 room.
    let p = plan(&[x86], &[arm("a", JOB)], &mixed(), at(1));
    assert!(p.start.is_empty());
    assert_eq!(p.launch.len(), 1);
    assert_eq!((p.launch[0].arch, types(&p.launch[0])), (Arch::Arm64, vec!["c6g.xlarge"]));
    // A starting x86 instance does not absorb it either.
    let p = plan(&[starting("i-s", 0)], &[arm("a", JOB)], &mixed(), at(1));
    assert_eq!(p.launch.iter().map(|l| l.arch).collect::<Vec<_>>(), vec![Arch::Arm64]);
}

#[test]
fn reruns_coming_back_from_a_warned_graviton_instance_get_graviton_room() {
    let two_used = BOX.minus(JOB).minus(JOB);
    let warned = Slot {
        spot: true,
        spot_warned: true,
        instance_type: "c6g.xlarge".into(),
        arch: Arch::Arm64,
        ..registered("doomed", two_used, 2, None)
    };
    // Room on an on-demand x86 instance does not take them.
    let x86_room = registered("od", BOX, 0, None);
    let p = plan(&[warned, x86_room], &[], &mixed(), T0);
    assert_eq!(p.launch_on_demand.len(), 1, "{p:?}");
    assert_eq!((p.launch_on_demand[0].arch, types(&p.launch_on_demand[0])), (Arch::Arm64, vec!["c6g.xlarge"]));
}

#[test]
fn an_architecture_no_listed_type_has_is_refused_not_launched_for() {
    let p = plan(&[], &[arm("a", JOB)], &policy(), T0);
    assert_eq!(p.no_type, vec!["a".to_string()]);
    assert!(p.launch.is_empty() && p.too_big.is_empty());
    let p = plan(&[], &[arm("huge", Resources::new(8192, 1000))], &mixed(), T0);
    assert_eq!(p.too_big, vec!["huge".to_string()], "larger than every arm64 type");
}

#[test]
fn a_new_instance_gets_the_cheapest_listed_type_that_holds_its_task() {
    // Small: c5.large (2 vCPUs) though listed last; the larger x86 types follow as fallbacks,
    // c5.xlarge before m5.xlarge (same vCPUs, less memory).
    let p = plan(&[], &[demand("small", JOB)], &mixed(), T0);
    assert_eq!(types(&p.launch[0]), vec!["c5.large", "c5.xlarge", "m5.xlarge"]);
    // 3 vCPUs: c5.xlarge; m5.xlarge only as a fallback.
    let p = plan(&[], &[demand("mid", Resources::new(3072, 4000))], &mixed(), T0);
    assert_eq!(types(&p.launch[0]), vec!["c5.xlarge", "m5.xlarge"]);
    // 10 GiB: only m5.xlarge holds it.
    let p = plan(&[], &[demand("big", Resources::new(2048, 10_000))], &mixed(), T0);
    assert_eq!(types(&p.launch[0]), vec!["m5.xlarge"]);
    // Equal sizes keep the list's order.
    let twins = Policy {
        types: vec![offer("c5a.xlarge", BOX, Arch::X86_64), offer("c5.xlarge", BOX, Arch::X86_64)],
        ..policy()
    };
    assert_eq!(types(&plan(&[], &[demand("d", JOB)], &twins, T0).launch[0]), vec!["c5a.xlarge", "c5.xlarge"]);
    // Tasks share the new instance first-fit: two 1024/1800 tasks fit one c5.large.
    let p = plan(&[], &demands(2), &mixed(), T0);
    assert_eq!(p.launch.len(), 1);
    assert_eq!(types(&p.launch[0]), vec!["c5.large", "c5.xlarge", "m5.xlarge"]);
    // A starting instance absorbs work by its own type's capacity (a c5.large: two tasks).
    let small = Slot { instance_type: "c5.large".into(), ..starting("i-s", 0) };
    let p = plan(&[small], &demands(3), &mixed(), at(1));
    assert_eq!(p.launch.len(), 1, "two fit the starting c5.large, one needs a new instance");
}

#[test]
fn patience_waits_only_for_busy_instances_large_enough_to_hold_the_task() {
    let small_total = Resources::new(2048, 3741);
    let busy_small = Slot {
        instance_type: "c5.large".into(),
        registered: Some(Registered { usable: true, total: small_total, remaining: Resources::new(0, 0), tasks: 2 }),
        ..registered("i-small", BOX, 2, None)
    };
    // 3 vCPUs never fit the busy c5.large: a c5.xlarge is launched at once.
    let p = plan(std::slice::from_ref(&busy_small), &[demand("mid", Resources::new(3072, 4000))], &mixed(), at(1));
    assert_eq!(p.launch.len(), 1, "{p:?}");
    assert_eq!(types(&p.launch[0]), vec!["c5.xlarge", "m5.xlarge"]);
    // A task the busy c5.large could hold once a task ends waits for it.
    let p = plan(&[busy_small], &[demand("quarter", JOB)], &mixed(), at(1));
    assert!(p.launch.is_empty(), "{p:?}");
}

#[test]
fn the_minimum_is_kept_warm_with_the_first_listed_type() {
    let warm = Policy { min: 1, ..mixed() };
    let p = plan(&[], &[], &warm, T0);
    assert_eq!(types(&p.launch[0]), vec!["m5.xlarge", "c5.large", "c5.xlarge"]);
}

#[test]
fn spot_launches_are_spread_over_the_fitting_types() {
    let spot = Policy {
        types: vec![
            offer("c5.xlarge", BOX, Arch::X86_64),
            offer("c5a.xlarge", BOX, Arch::X86_64),
            offer("m5.xlarge", Resources::new(4096, 14964), Arch::X86_64),
        ],
        spot: true,
        ..policy()
    };
    let full = Resources::new(4096, 7000);
    let work: Vec<Demand> = (0..4).map(|i| demand(&format!("d{i}"), full)).collect();
    let p = plan(&[], &work, &spot, T0);
    let first: Vec<&str> = p.launch.iter().map(|l| l.types[0].as_str()).collect();
    assert_eq!(first, ["c5.xlarge", "c5a.xlarge", "m5.xlarge", "c5.xlarge"]);
    assert!(p.launch.iter().all(|l| l.types.len() == 3), "every fitting type stays a fallback");
    // The turn carries over between passes.
    let p = plan(&[], &work[..1], &Policy { spot_turn: 2, ..spot.clone() }, T0);
    assert_eq!(types(&p.launch[0]), vec!["m5.xlarge", "c5.xlarge", "c5a.xlarge"]);
    // On-demand launches are never rotated: cheapest first.
    let p = plan(&[], &work[..2], &Policy { spot: false, ..spot }, T0);
    assert!(p.launch.iter().all(|l| l.types[0] == "c5.xlarge"), "{p:?}");
}

#[test]
fn the_idle_clock() {
    let grace = Duration::from_secs(60);
    assert_eq!(idle_since(None, 0, None, grace, at(5)), Some(at(5)));
    assert_eq!(idle_since(Some(at(1)), 0, None, grace, at(5)), Some(at(1)));
    assert_eq!(idle_since(Some(at(1)), 1, None, grace, at(5)), None);
    assert_eq!(idle_since(None, 0, Some(at(0)), grace, at(30)), None, "just placed: ECS may not count it yet");
    assert_eq!(idle_since(None, 0, Some(at(0)), grace, at(61)), Some(at(61)));
}
