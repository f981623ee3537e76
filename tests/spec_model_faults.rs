//! The spec model (`testkit/src/spec/`) catches every planted core fault (`src/planted.rs`)
//! with the oracle's verdicts off: random walks (the testkit's generator) compared with the
//! spec model alone find a divergence; a fast-path gate's fault the walks miss, the
//! explorer from a started device with open gates; a reset group's fault, the explorer
//! from two started devices in one group (where, with no fault, it finds none). Run with:
//!
//! ```sh
//! RUSTFLAGS="--cfg pnp_faults" CARGO_TARGET_DIR=target/faults \
//!     cargo test -p pnp-lifecycle --test spec_model_faults -- --nocapture
//! ```
#![cfg(pnp_faults)]

use arbitrary::Unstructured;
use pnp_lifecycle::planted::{plant, Fault};
use pnp_lifecycle::{
    ClientHandle, ClientKind, Config, DeviceId, Input, PhysPort, PortSet, RequestToken,
    StartResult, Tick, TrustedTimeoutPolicy,
};
use pnp_lifecycle_testkit::explore::{explore_from, Bounds, EXPLORER_PORTS};
use pnp_lifecycle_testkit::gen::{small_config, two_devices_in_one_group, Generator};
use pnp_lifecycle_testkit::rng::SplitMix;
use pnp_lifecycle_testkit::spec::covers;
use pnp_lifecycle_testkit::{
    drive_to_quiescence, Check, FastSmall, Fuzz, Pair, Quiesce, Sut, Violation, World,
};

/// Faults in reset groups' decisions: sought by the explorer from two started devices in
/// one reset group.
const GROUPS: &[Fault] = &[
    Fault::GroupResetBeforeAllAnswered,
    Fault::GroupNackLost,
    Fault::GroupRemovedMemberBlocks,
];

/// Faults in the fast path's gates: sought on a machine built with the fast path.
const GATES: &[Fault] = &[
    Fault::GateReopenedWhileClosing,
    Fault::CloseDropsCarriedOperations,
    Fault::GateOpenedAtStaleEpoch,
    Fault::GateLeftOpenIntoDx,
    Fault::GateOpenedForRevokedClient,
];

/// One walk with only the spec model judging: the spec model's first divergence, with
/// the number of steps it took.
fn walk<S: Sut>(bytes: &[u8], end: Quiesce) -> Option<(usize, Violation)> {
    let mut u = Unstructured::new(bytes);
    let config = small_config(&mut u).ok()?;
    let mut world: World<S> = World::new(config, false).with_spec().oracle_off();
    let mut generator = Generator::new();
    let mut steps = 0;
    while !u.is_empty() {
        let Ok((now, input)) = generator.next(&mut u, &world) else {
            break;
        };
        if !covers(&input) {
            continue;
        }
        steps += 1;
        match world.step(now, input) {
            Err(v) if v.check == Check::Model => return Some((steps, v)),
            Err(v) => panic!("only the spec model judges, yet {v}"),
            Ok(_) => {}
        }
        if world.oracle.unload_finished {
            break;
        }
    }
    // The owner's duties to the end: the drive's own "stuck" verdict is not the model's.
    match drive_to_quiescence(&mut world, end) {
        Err(v) if v.check == Check::Model => Some((steps, v)),
        _ => None,
    }
}

/// Walks until the spec model diverges: (walks, steps in the last walk, its divergence).
fn hunt(fault: Fault, cases: usize) -> Option<(usize, usize, Violation)> {
    let mut rng = SplitMix(0x5bec ^ fault as u64);
    plant(fault);
    let found = (0..cases).find_map(|case| {
        let bytes = rng.case(64, 2048);
        let end = [
            Quiesce::Cooperative,
            Quiesce::Uncooperative,
            Quiesce::Hostile,
        ][case % 3];
        // The gates' faults need the fast path on (one device); the rest, two devices.
        let found = if GATES.contains(&fault) {
            walk::<FastSmall>(&bytes, end)
        } else {
            walk::<Fuzz>(&bytes, end)
        };
        found.map(|(steps, v)| (case + 1, steps, v))
    });
    plant(Fault::None);
    found
}

/// One device started with the fast path on, a trusted client bound to port 0 (its gate
/// open) and an untrusted one.
fn fast_prefix() -> Vec<(Tick, Input)> {
    let t = Tick(0);
    let d = DeviceId(0);
    let client = |slot| ClientHandle {
        device: d,
        slot,
        generation: 0,
    };
    vec![
        (t, Input::AddDevice { device: d }),
        (
            t,
            Input::ConfigurePort {
                device: d,
                port: PhysPort(0),
                caps: EXPLORER_PORTS[0],
            },
        ),
        (
            t,
            Input::Start {
                device: d,
                token: RequestToken(100),
            },
        ),
        (
            t,
            Input::StartDone {
                device: d,
                result: StartResult::Started,
            },
        ),
        (
            t,
            Input::Register {
                device: d,
                kind: ClientKind::Trusted,
            },
        ),
        (
            t,
            Input::Bind {
                client: client(0),
                ports: PortSet::single(PhysPort(0)),
            },
        ),
        (
            t,
            Input::Register {
                device: d,
                kind: ClientKind::Untrusted,
            },
        ),
    ]
}

/// The explorer (breadth-first, narrow alphabet, depth 5) from [`fast_prefix`] with only
/// the spec model judging: its first divergence and the path to it.
fn explore_hunt(fault: Fault) -> Option<(usize, Violation)> {
    let config = Config {
        untrusted_ack_timeout: 2,
        trusted_ack_timeout: 4,
        trusted_policy: TrustedTimeoutPolicy::Revoke,
        detach_timeout: 3,
        callback_timeout: 5,
        operation_timeout: 3,
    };
    let bounds = Bounds {
        max_depth: 5,
        max_epoch: 2,
        max_generation: 1,
        max_states: 2_000_000,
        liveness_every: 0,
        compare_model: true,
        wide_alphabet: false,
        threads: 1, // a planted fault is per thread
    };
    plant(fault);
    let world: World<FastSmall> = World::new(config, false).with_spec().oracle_off();
    let report = explore_from(world, &fast_prefix(), bounds);
    plant(Fault::None);
    report.violation.map(|(v, path)| (path.len(), v))
}

/// Two devices started in one reset group; an untrusted client on device 1 only (device 0
/// has no voter: quiesced at once). The prefix of `tests/planted_core_faults.rs`.
fn group_prefix() -> Vec<(Tick, Input)> {
    let mut v = two_devices_in_one_group();
    let (device, kind) = (DeviceId(1), ClientKind::Untrusted);
    v.push((Tick(0), Input::Register { device, kind }));
    v
}

/// The explorer (breadth-first, narrow alphabet, depth 5) from [`group_prefix`] with only
/// the spec model judging: its first divergence and the path to it.
fn explore_group_hunt(fault: Fault) -> Option<(usize, Violation)> {
    let config = Config {
        untrusted_ack_timeout: 2,
        trusted_ack_timeout: 4,
        trusted_policy: TrustedTimeoutPolicy::Revoke,
        detach_timeout: 3,
        callback_timeout: 5,
        operation_timeout: 3,
    };
    let bounds = Bounds {
        max_depth: 5,
        max_epoch: 2,
        max_generation: 1,
        max_states: 2_000_000,
        liveness_every: 0,
        compare_model: true,
        wide_alphabet: false,
        threads: 1, // a planted fault is per thread
    };
    plant(fault);
    let world: World<Pair> = World::new(config, false).with_spec().oracle_off();
    let report = explore_from(world, &group_prefix(), bounds);
    plant(Fault::None);
    report.violation.map(|(v, path)| {
        if std::env::var("SPEC_DUMP").is_ok() {
            println!("{path:#?}");
        }
        (path.len(), v)
    })
}

#[test]
fn control_no_fault_no_divergence() {
    if let Some((inputs, v)) = explore_group_hunt(Fault::None) {
        panic!("no fault planted, yet the explorer from a reset group diverged after {inputs} inputs: {v}");
    }
    assert!(
        explore_hunt(Fault::None).is_none(),
        "no fault planted, yet the explorer with the spec model diverged"
    );
    assert!(
        hunt(Fault::None, 500).is_none(),
        "no fault planted, yet the spec model diverged"
    );
    let mut rng = SplitMix(0xc0);
    for case in 0..500 {
        let bytes = rng.case(64, 2048);
        if let Some((_, v)) = walk::<FastSmall>(&bytes, Quiesce::Hostile) {
            panic!("no fault planted, fast path case {case}: {v}");
        }
    }
}

#[test]
fn the_spec_model_alone_catches_every_covered_planted_fault() {
    let mut missed = Vec::new();
    for &fault in Fault::ALL {
        // A group's fault: the explorer from a reset group (its divergence is the fault's:
        // the control finds none there).
        if GROUPS.contains(&fault) {
            match explore_group_hunt(fault) {
                Some((inputs, v)) => println!(
                    "{fault:?}: caught by the spec model (oracle off) in the explorer from a reset group after {inputs} inputs: {}",
                    v.detail.lines().next().unwrap_or("")
                ),
                None => missed.push(fault),
            }
            continue;
        }
        match hunt(fault, 3000) {
            Some((walks, steps, v)) => println!(
                "{fault:?}: caught by the spec model (oracle off) in walk {walks}, step {steps}: {}",
                v.detail.lines().next().unwrap_or("")
            ),
            // A gate's fault the random walks did not reach: the explorer from a started
            // device with two clients and their gates open.
            None if GATES.contains(&fault) => match explore_hunt(fault) {
                Some((inputs, v)) => println!(
                    "{fault:?}: caught by the spec model (oracle off) in the explorer after {inputs} inputs: {}",
                    v.detail.lines().next().unwrap_or("")
                ),
                None => missed.push(fault),
            },
            None => missed.push(fault),
        }
    }
    assert!(missed.is_empty(), "the spec model missed {missed:?}");
}
