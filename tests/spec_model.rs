//! The spec model (`testkit/src/spec/`, an independent second reading of DESIGN.md as
//! facts) agrees with the core: random walks from the testkit's generator (every input,
//! reset groups included: `spec::covers` holds for all), with the oracle on and the spec
//! model compared after every step; each walk ends with the owner's I9 drive
//! (cooperative, uncooperative or hostile clients), compared too. Group walks (and an
//! explorer run) begin with two started devices in one reset group, so that most cycles
//! are the group's; they also compare each device's group and each group's deadline.

use arbitrary::Unstructured;
use pnp_lifecycle::{
    DeviceId, GroupId, HardwareCommand, Input, Output, Tick, TrustedTimeoutPolicy,
};
use pnp_lifecycle_testkit::gen::{small_config, two_devices_in_one_group, Generator};
use pnp_lifecycle_testkit::rng::SplitMix;
use pnp_lifecycle_testkit::spec::covers;
use pnp_lifecycle_testkit::{drive_to_quiescence, FastSmall, Fuzz, Quiesce, Small, Sut, World};
use std::cell::Cell;

thread_local! {
    /// Hardware resets commanded, in this thread's walks, while two devices shared a group.
    static GROUP_RESETS: Cell<usize> = const { Cell::new(0) };
    /// Walks near the end of the clock whose I9 drive stopped at a wait whose deadline
    /// lies beyond the end (carried exactly, so never reached).
    static BEYOND_THE_END: Cell<usize> = const { Cell::new(0) };
}

/// A comparison beyond `World`'s, made after every step.
type Extra<S> = fn(&World<S>) -> Result<(), String>;

/// What a set of walks begins with and compares beyond `World`.
struct Setup<S: Sut> {
    prefix: Vec<(Tick, Input)>,
    extra: Option<Extra<S>>,
    /// The trusted-client policy every walk keeps (else the generator's).
    policy: Option<TrustedTimeoutPolicy>,
    /// Each walk's clock begins this near the end of its range (`u64::MAX` less up to 47
    /// ticks), so deadlines fall on both sides of the end (else it begins at 0).
    near_the_end: bool,
}

impl<S: Sut> Setup<S> {
    fn plain() -> Setup<S> {
        Setup {
            prefix: Vec::new(),
            extra: None,
            policy: None,
            near_the_end: false,
        }
    }
}

/// One walk from `bytes` on machine `S` (after `prefix`, with `extra` compared after every
/// step): the number of covered steps taken, or the first divergence with the walk that
/// led to it.
fn walk<S: Sut>(
    bytes: &[u8],
    end: Quiesce,
    setup: &Setup<S>,
    clock: Tick,
) -> Result<usize, String> {
    let mut u = Unstructured::new(bytes);
    let mut config = small_config(&mut u).map_err(|e| e.to_string())?;
    if let Some(policy) = setup.policy {
        config.trusted_policy = policy;
    }
    let extra = setup.extra;
    let mut world: World<S> = World::new(config, false).with_spec();
    world.clock = clock;
    let mut generator = Generator::new();
    let mut trace: Vec<String> = Vec::new();
    let mut prefix = setup.prefix.iter().copied();
    loop {
        let (now, input) = match prefix.next() {
            // The prefix's ticks count from the walk's clock.
            Some((t, input)) => (Tick(clock.0.saturating_add(t.0)), input),
            None if u.is_empty() => break,
            None => match generator.next(&mut u, &world) {
                Ok(step) => step,
                Err(_) => break,
            },
        };
        if !covers(&input) {
            continue;
        }
        let grouped = world.model.as_ref().is_some_and(|spec| {
            let mut groups = (0..S::DEVICES).filter_map(|d| spec.reset_group(DeviceId(d as u8)));
            groups.next().is_some_and(|g| groups.any(|h| h == g))
        });
        let step = world
            .step(now, input)
            .and_then(|step| match extra.map(|f| f(&world)) {
                Some(Err(why)) => Err(pnp_lifecycle_testkit::Violation {
                    check: pnp_lifecycle_testkit::Check::Model,
                    detail: why,
                }),
                _ => Ok(step),
            });
        match step {
            Ok(step) if step.result.is_ok() => {
                let reset = |o: &Output| {
                    matches!(
                        o,
                        Output::Hardware {
                            command: HardwareCommand::Reset,
                            ..
                        }
                    )
                };
                if grouped && step.outputs.iter().any(reset) {
                    GROUP_RESETS.with(|c| c.set(c.get() + 1));
                }
                let phases: Vec<_> = (0..S::DEVICES)
                    .map(|d| world.sut.phase_detail(pnp_lifecycle::DeviceId(d as u8)))
                    .collect();
                trace.push(format!(
                    "  {now:?} {input:?}\n     -> {:?} {:?}\n     {phases:?}",
                    step.result, step.outputs
                ))
            }
            Ok(_) => trace.push(format!("  {now:?} {input:?} -> refused")),
            Err(v) => {
                let accepted: Vec<&String> =
                    trace.iter().filter(|t| !t.ends_with("refused")).collect();
                let tail: Vec<&String> = accepted.iter().rev().take(25).rev().copied().collect();
                let mut joined: Vec<String> = tail.iter().map(|s| s.to_string()).collect();
                if std::env::var("SPEC_DUMP").is_ok() {
                    joined.push(format!("spec model: {:#?}", world.model));
                }
                return Err(format!(
                    "config {config:?}\nstep {} at {now:?} {input:?}: {v}\nlast accepted steps:\n{}",
                    trace.len(),
                    joined.join("\n")
                ));
            }
        }
        if world.oracle.unload_finished {
            break;
        }
    }
    // Then the owner's duties to the end (I9), still compared step by step.
    let more = match drive_to_quiescence(&mut world, end) {
        // Near the end a wait may have its deadline beyond `u64::MAX`: nothing ends it
        // (DESIGN r3 carries it exactly rather than cut it short), and both agreed so far.
        Err(v) if setup.near_the_end && v.check == pnp_lifecycle_testkit::Check::I9 => {
            BEYOND_THE_END.with(|c| c.set(c.get() + 1));
            0
        }
        more => more.map_err(|v| format!("config {config:?}\nafter the walk, {end:?}: {v}"))?,
    };
    Ok(trace.len() + more)
}

fn walks<S: Sut>(seed: u64, cases: usize, setup: &Setup<S>) -> usize {
    let cases = std::env::var("SPEC_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    // `SPEC_CASES` and `SPEC_SEED` widen a run by hand (CI keeps the defaults).
    let seed = std::env::var("SPEC_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(seed, |s| seed ^ s);
    let mut rng = SplitMix(seed);
    let mut steps = 0;
    for case in 0..cases {
        let bytes = rng.case(200, 2000);
        let end = [
            Quiesce::Cooperative,
            Quiesce::Uncooperative,
            Quiesce::Hostile,
        ][case % 3];
        let clock = if setup.near_the_end {
            Tick(u64::MAX - (case % 48) as u64)
        } else {
            Tick(0)
        };
        match walk::<S>(&bytes, end, setup, clock) {
            Ok(n) => steps += n,
            Err(why) => panic!("case {case}: the spec model and the core disagree\n{why}"),
        }
    }
    steps
}

#[test]
fn spec_model_agrees_with_the_core_on_one_device_walks() {
    let steps = walks::<Small>(0x5bec_0001, 2000, &Setup::plain());
    println!("one device: {steps} covered steps");
    assert!(steps > 150_000, "only {steps} steps compared");
}

#[test]
fn spec_model_agrees_with_the_core_on_fast_path_walks() {
    let steps = walks::<FastSmall>(0x5bec_0003, 2000, &Setup::plain());
    println!("fast path: {steps} covered steps");
    assert!(steps > 150_000, "only {steps} steps compared");
}

#[test]
fn spec_model_agrees_with_the_core_on_two_device_walks() {
    let steps = walks::<Fuzz>(0x5bec_0002, 2000, &Setup::plain());
    println!("two devices: {steps} covered steps");
    assert!(steps > 150_000, "only {steps} steps compared");
}

/// The core's and the spec model's reset-group facts: each device's group, and each
/// group's cycle with its one deadline.
fn same_groups(world: &World<Fuzz>) -> Result<(), String> {
    let Some(spec) = world.model.as_ref() else {
        return Ok(());
    };
    for i in 0..2u8 {
        let (d, g) = (DeviceId(i), GroupId(i));
        let (core, model) = (world.sut.reset_group(d), spec.reset_group(d));
        if core != model {
            return Err(format!("{d:?}'s group: core {core:?}, model {model:?}"));
        }
        let (core, model) = (world.sut.group_cycle(g), spec.group_cycle(g));
        if core != model {
            return Err(format!(
                "{g:?}'s cycle deadline: core {core:?}, model {model:?}"
            ));
        }
    }
    Ok(())
}

/// Walks that begin with both devices started in one reset group: the group's cycles
/// (one hardware reset through the carrier, nacks, members that cannot take part, the
/// group's deadline, members removed or vanished) agree, and so do the group facts. Both
/// trusted-client policies (the generator's pick): under `FailDevice` a member fails
/// mid-cycle and leaves its group's cycle, its fenced operations holding the group's
/// reset (I12).
#[test]
fn spec_model_agrees_with_the_core_on_reset_group_walks() {
    let setup = Setup {
        prefix: two_devices_in_one_group(),
        extra: Some(same_groups),
        ..Setup::plain()
    };
    let steps = walks::<Fuzz>(0x5bec_0004, 2000, &setup);
    let resets = GROUP_RESETS.with(Cell::get);
    println!("reset groups: {steps} covered steps, {resets} hardware resets of a group");
    assert!(steps > 150_000, "only {steps} steps compared");
    assert!(resets > 100, "only {resets} hardware resets of a group");
}

/// DESIGN r3, "A deadline runs only while the client can act": no deadline is cut short
/// near the end of the clock's range. Walks whose clock begins within 48 ticks of
/// `u64::MAX` (a deadline then falls before the end or beyond it, never reached, and the
/// generator's jumps land on the end), one device and two in a reset group, compared with
/// the spec model after every step; the end of each walk is the owner's I9 drive as far
/// as deadlines within the range carry it.
#[test]
fn spec_model_agrees_with_the_core_near_the_end_of_the_clock() {
    let one = Setup {
        near_the_end: true,
        ..Setup::plain()
    };
    let steps = walks::<Small>(0x5bec_0005, 1000, &one);
    let beyond = BEYOND_THE_END.with(|c| c.replace(0));
    println!(
        "one device near the end of the clock: {steps} covered steps; {beyond} I9 drives \
         stopped at a wait whose deadline lies beyond u64::MAX"
    );
    assert!(steps > 75_000, "only {steps} steps compared");
    let group = Setup {
        prefix: two_devices_in_one_group(),
        extra: Some(same_groups),
        near_the_end: true,
        ..Setup::plain()
    };
    let steps = walks::<Fuzz>(0x5bec_0006, 1000, &group);
    let beyond = BEYOND_THE_END.with(|c| c.replace(0));
    println!(
        "a reset group near the end of the clock: {steps} covered steps; {beyond} I9 \
         drives stopped at a wait whose deadline lies beyond u64::MAX"
    );
    assert!(steps > 75_000, "only {steps} steps compared");
}

/// The explorer's one-device graph from a fresh machine, every edge reached through
/// covered inputs compared with the spec model (a branch that takes an uncovered input
/// leaves the spec model behind), under either trusted-client policy, with the liveness
/// drives from every state.
#[test]
fn spec_model_agrees_with_the_core_across_the_explorers_graph() {
    use pnp_lifecycle::Config;
    use pnp_lifecycle_testkit::explore::{explore, Bounds};
    for policy in [
        TrustedTimeoutPolicy::Revoke,
        TrustedTimeoutPolicy::FailDevice,
    ] {
        let config = Config {
            untrusted_ack_timeout: 2,
            trusted_ack_timeout: 4,
            trusted_policy: policy,
            detach_timeout: 3,
            callback_timeout: 5,
            operation_timeout: 3,
        };
        // The full bound but one level shallower (the full depth is `tests/explore.rs`'s).
        let bounds = Bounds {
            compare_model: true,
            max_depth: 7,
            ..Bounds::FULL
        };
        let world: World<Small> = World::new(config, false).with_spec();
        let report = explore(world, bounds);
        println!("explore with the spec model, {policy:?}: {report}");
        if let Some((v, path)) = &report.violation {
            panic!("{v}\npath: {path:#?}");
        }
        assert!(report.states > 50_000, "{report}");
        // The same with the fast path on (gates opened and closed, closes answered).
        let world: World<FastSmall> = World::new(config, false).with_spec();
        let report = explore(world, bounds);
        println!("explore with the spec model, fast path, {policy:?}: {report}");
        if let Some((v, path)) = &report.violation {
            panic!("{v}\npath: {path:#?}");
        }
        assert!(report.states > 50_000, "{report}");
    }
}

/// The explorer's graph from two started devices in one reset group with an untrusted
/// client on the second (`gen::two_devices_in_one_group` and the client, as
/// `tests/planted_core_faults.rs` starts), every edge
/// compared with the spec model, with liveness drives, under `FailDevice` (a member fails
/// mid-cycle; `tests/explore.rs`'s group graph, compared with the spec model too, keeps
/// `Revoke`).
#[test]
fn spec_model_agrees_with_the_core_across_a_reset_groups_graph() {
    use pnp_lifecycle::{ClientKind, Config};
    use pnp_lifecycle_testkit::explore::{explore_from, Bounds};
    use pnp_lifecycle_testkit::Pair;
    let mut prefix = two_devices_in_one_group();
    let (device, kind) = (DeviceId(1), ClientKind::Untrusted);
    prefix.push((Tick(0), Input::Register { device, kind }));
    let config = Config {
        untrusted_ack_timeout: 2,
        trusted_ack_timeout: 4,
        trusted_policy: TrustedTimeoutPolicy::FailDevice,
        detach_timeout: 3,
        callback_timeout: 5,
        operation_timeout: 3,
    };
    // Depth 5, drives from every fourth state, keeps it to seconds (depth 6 with drives
    // from every state agrees too: 2.5 M states, 4.5 min).
    let bounds = Bounds {
        compare_model: true,
        max_depth: 5,
        liveness_every: 4,
        wide_alphabet: false,
        ..Bounds::FULL
    };
    let world: World<Pair> = World::new(config, false).with_spec();
    let report = explore_from(world, &prefix, bounds);
    println!("explore a reset group with the spec model: {report}");
    match &report.violation {
        Some((v, path)) => panic!("{v}\npath: {path:#?}"),
        None => assert!(report.states > 10_000, "{report}"),
    }
}
