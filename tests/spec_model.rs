//! The spec model (`testkit/src/spec/`, an independent second reading of DESIGN.md as
//! facts) agrees with the core: random walks from the testkit's generator (every input,
//! reset groups included: `spec::covers` holds for all), with the oracle on and the spec
//! model compared after every step; each walk ends with the owner's I9 drive
//! (cooperative, uncooperative or hostile clients), compared too. Group walks (and an
//! explorer run) begin with two started devices in one reset group, so that most cycles
//! are the group's; they also compare each device's group and each group's deadline.

use arbitrary::Unstructured;
use pnp_lifecycle::{
    DeviceId, GroupId, HardwareCommand, Input, Output, RequestToken, StartResult, Tick,
    TrustedTimeoutPolicy,
};
use pnp_lifecycle_testkit::gen::{small_config, Generator};
use pnp_lifecycle_testkit::rng::SplitMix;
use pnp_lifecycle_testkit::spec::covers;
use pnp_lifecycle_testkit::{drive_to_quiescence, FastSmall, Fuzz, Quiesce, Small, Sut, World};
use std::cell::Cell;

thread_local! {
    /// Hardware resets commanded, in this thread's walks, while two devices shared a group.
    static GROUP_RESETS: Cell<usize> = const { Cell::new(0) };
}

/// Two devices added, started and joined to reset group 0.
fn group_prefix() -> Vec<(Tick, Input)> {
    let t = Tick(0);
    let mut v = Vec::new();
    for (i, device) in [DeviceId(0), DeviceId(1)].into_iter().enumerate() {
        let token = RequestToken(100 + i as u32);
        v.push((t, Input::AddDevice { device }));
        v.push((t, Input::Start { device, token }));
        let result = StartResult::Started;
        v.push((t, Input::StartDone { device, result }));
        let group = GroupId(0);
        v.push((t, Input::JoinResetGroup { device, group }));
    }
    v
}

/// A comparison beyond `World`'s, made after every step.
type Extra<S> = fn(&World<S>) -> Result<(), String>;

/// What a set of walks begins with and compares beyond `World`.
struct Setup<S: Sut> {
    prefix: Vec<(Tick, Input)>,
    extra: Option<Extra<S>>,
    /// The trusted-client policy every walk keeps (else the generator's).
    policy: Option<TrustedTimeoutPolicy>,
}

impl<S: Sut> Setup<S> {
    fn plain() -> Setup<S> {
        Setup {
            prefix: Vec::new(),
            extra: None,
            policy: None,
        }
    }
}

/// One walk from `bytes` on machine `S` (after `prefix`, with `extra` compared after every
/// step): the number of covered steps taken, or the first divergence with the walk that
/// led to it.
fn walk<S: Sut>(bytes: &[u8], end: Quiesce, setup: &Setup<S>) -> Result<usize, String> {
    let mut u = Unstructured::new(bytes);
    let mut config = small_config(&mut u).map_err(|e| e.to_string())?;
    if let Some(policy) = setup.policy {
        config.trusted_policy = policy;
    }
    let extra = setup.extra;
    let mut world: World<S> = World::new(config, false).with_spec();
    let mut generator = Generator::new();
    let mut trace: Vec<String> = Vec::new();
    let mut prefix = setup.prefix.iter().copied();
    loop {
        let (now, input) = match prefix.next() {
            Some(step) => step,
            None if u.is_empty() => break,
            None => match generator.next(&mut u, &world) {
                Ok(step) => step,
                Err(_) => break,
            },
        };
        if !covers(&input) {
            continue;
        }
        let grouped = world.spec.as_ref().is_some_and(|spec| {
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
                    joined.push(format!("spec model: {:#?}", world.spec));
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
    let more = drive_to_quiescence(&mut world, end)
        .map_err(|v| format!("config {config:?}\nafter the walk, {end:?}: {v}"))?;
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
        match walk::<S>(&bytes, end, setup) {
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
    let Some(spec) = world.spec.as_ref() else {
        return Ok(());
    };
    for i in 0..2u8 {
        let (d, g) = (DeviceId(i), GroupId(i));
        let (core, model) = (world.sut.reset_group(d), spec.reset_group(d));
        if core != model {
            return Err(format!("{d:?}'s group: core {core:?}, model {model:?}"));
        }
        let (core, model) = (world.sut.group_cycle(g).flatten(), spec.group_cycle(g));
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
/// group's deadline, members removed or vanished) agree, and so do the group facts.
#[test]
fn spec_model_agrees_with_the_core_on_reset_group_walks() {
    // `Revoke` only: under `FailDevice` the core commands a group's reset while a member
    // failed by a trusted client's missed drain still has that client's operation in
    // flight (I12; reported, not fixed here).
    let setup = Setup {
        prefix: group_prefix(),
        extra: Some(same_groups),
        policy: Some(TrustedTimeoutPolicy::Revoke),
    };
    let steps = walks::<Fuzz>(0x5bec_0004, 2000, &setup);
    let resets = GROUP_RESETS.with(Cell::get);
    println!("reset groups: {steps} covered steps, {resets} hardware resets of a group");
    assert!(steps > 150_000, "only {steps} steps compared");
    assert!(resets > 100, "only {resets} hardware resets of a group");
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
            compare_model: false,
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
/// client on the second (the prefix of `tests/planted_core_faults.rs`), every edge
/// compared with the spec model, with liveness drives. `Revoke`
/// only: under `FailDevice` the explorer reaches the core's I12 breach (a group's reset
/// commanded through one member while a member failed by a trusted client's missed drain
/// still has that client's operation in flight; reported, not fixed here).
#[test]
fn spec_model_agrees_with_the_core_across_a_reset_groups_graph() {
    use pnp_lifecycle::{ClientKind, Config};
    use pnp_lifecycle_testkit::explore::{explore_from, Bounds};
    use pnp_lifecycle_testkit::Pair;
    let mut prefix = group_prefix();
    let (device, kind) = (DeviceId(1), ClientKind::Untrusted);
    prefix.push((Tick(0), Input::Register { device, kind }));
    let config = Config {
        untrusted_ack_timeout: 2,
        trusted_ack_timeout: 4,
        trusted_policy: TrustedTimeoutPolicy::Revoke,
        detach_timeout: 3,
        callback_timeout: 5,
        operation_timeout: 3,
    };
    // Depth 5, drives from every fourth state, keeps it to seconds (depth 6 with drives
    // from every state agrees too: 2.5 M states, 4.5 min).
    let bounds = Bounds {
        compare_model: false,
        max_depth: 5,
        liveness_every: 4,
        wide_alphabet: false,
        ..Bounds::FULL
    };
    let world: World<Pair> = World::new(config, false).with_spec();
    let report = explore_from(world, &prefix, bounds);
    println!("explore a reset group with the spec model: {report}");
    if let Some((v, path)) = &report.violation {
        panic!("{v}\npath: {path:#?}");
    }
    assert!(report.states > 10_000, "{report}");
}
