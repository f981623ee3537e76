//! The exhaustive explorer over the core's reachable state graph, with abstract time (each
//! input happens now, or the clock jumps to the next deadline) and the device-order
//! reduction (see `pnp_lifecycle_testkit::explore`). Every rule the oracle knows is checked
//! on every edge, the reference model is compared on every edge, and the I9 liveness drives
//! (cooperative, uncooperative, hostile clients) run from every `liveness_every`-th state.
//!
//! * `explore_two_devices_three_clients`: 2 devices, 3 clients (two on the first device,
//!   one on the second, which has a hardware operation in flight), both started, one
//!   physical port each: full reset cycles and cycles recovered without a reset, callbacks
//!   and operations in flight and fences, stops, removes, surprise removals and unload,
//!   and power (an idle power-down on device 0, a system sleep on device 1, racing the
//!   operation in flight, resets and removal).
//! * `explore_one_device_*`: 1 device, 3 client slots, 2 physical ports, from a fresh
//!   machine, for each trusted-timeout policy.
//!
//! Release builds (or `PNP_EXPLORE_FULL=1`) run the full bound; debug builds a smaller one.
//! `PNP_EXPLORE_DEPTH=n` overrides the depth.

use pnp_lifecycle::{
    Access, ClientHandle, ClientKind, Config, DeviceId, Epoch, GroupId, Input, PhysPort, PortSet,
    RequestToken, StartResult, Tick, TrustedTimeoutPolicy,
};
use pnp_lifecycle_testkit::explore::{
    explore, explore_from, Bounds, Report, EXPLORER_PORTS, FAST_PATH_LANDMARKS, GROUP_LANDMARKS,
    LANDMARKS,
};
use pnp_lifecycle_testkit::{FastSmall, Pair, Small, World};

fn config(policy: TrustedTimeoutPolicy) -> Config {
    Config {
        untrusted_ack_timeout: 2,
        trusted_ack_timeout: 4,
        trusted_policy: policy,
        detach_timeout: 3,
        callback_timeout: 5,
        operation_timeout: 3,
    }
}

fn full() -> bool {
    std::env::var_os("PNP_EXPLORE_FULL").is_some() || !cfg!(debug_assertions)
}

/// Threads per breadth-first layer: `PNP_EXPLORE_THREADS`, else 2 (the CI machine's cores).
fn threads() -> usize {
    std::env::var("PNP_EXPLORE_THREADS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(2)
}

fn depth(full_depth: usize, quick_depth: usize) -> usize {
    std::env::var("PNP_EXPLORE_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(if full() { full_depth } else { quick_depth })
}

/// Two devices added, configured and started; two clients on device 0 (trusted, bound to
/// the port; untrusted), one untrusted on device 1.
pub fn two_device_prefix() -> Vec<(Tick, Input)> {
    let t = Tick(0);
    let d0 = DeviceId(0);
    let d1 = DeviceId(1);
    let mut v = Vec::new();
    for (i, d) in [d0, d1].into_iter().enumerate() {
        v.push((t, Input::AddDevice { device: d }));
        v.push((
            t,
            Input::ConfigurePort {
                device: d,
                port: PhysPort(0),
                caps: EXPLORER_PORTS[0],
            },
        ));
        v.push((
            t,
            Input::Start {
                device: d,
                token: RequestToken(100 + i as u32),
            },
        ));
        v.push((
            t,
            Input::StartDone {
                device: d,
                result: StartResult::Started,
            },
        ));
    }
    v.push((
        t,
        Input::Register {
            device: d0,
            kind: ClientKind::Trusted,
        },
    ));
    v.push((
        t,
        Input::Bind {
            client: ClientHandle {
                device: d0,
                slot: 0,
                generation: 0,
            },
            ports: PortSet::single(PhysPort(0)),
        },
    ));
    v.push((
        t,
        Input::Register {
            device: d0,
            kind: ClientKind::Untrusted,
        },
    ));
    v.push((
        t,
        Input::Register {
            device: d1,
            kind: ClientKind::Untrusted,
        },
    ));
    // Device 1's client has a hardware operation in flight: stop, reset, removal and
    // revocation race it within a few inputs.
    v.push((
        t,
        Input::Access {
            client: ClientHandle {
                device: d1,
                slot: 0,
                generation: 0,
            },
            epoch: Epoch(0),
            what: Access::HardwareOp,
        },
    ));
    v
}

fn check(name: &str, report: &Report) {
    println!("explore {name}: {report}");
    assert!(report.violation.is_none(), "{}", report);
    assert!(!report.truncated, "state budget exhausted: {}", report);
    assert!(
        report.states > 1000,
        "suspiciously small state space: {}",
        report
    );
    assert!(report.edges > report.states);
}

#[test]
fn explore_two_devices_three_clients() {
    let bounds = Bounds {
        // Depth 5 (full): it reaches an operation in flight racing a stop, a reset, a
        // removal and a revocation, and an unload that waits for one (depth 6 is ~7M
        // states). Depth 4 (debug) reaches all but that unload.
        max_depth: depth(5, 4),
        max_epoch: 1,
        max_generation: 1,
        max_states: 3_000_000,
        liveness_every: if full() { 29 } else { 97 },
        compare_model: true,
        wide_alphabet: false,
        threads: threads(),
    };
    let world = World::<Pair>::new(config(TrustedTimeoutPolicy::Revoke), true);
    let report = explore_from(world, &two_device_prefix(), bounds);
    check(&format!("2 devices, 3 clients, {bounds:?}"), &report);
    // The bound reaches full cycles, fences, revocations, deferred fatal errors folded
    // into a stop, removals and unload, and a hardware operation in flight racing a stop,
    // a reset, a removal and a revocation; recovery without a reset and the pause veto.
    for (i, (name, n)) in LANDMARKS.iter().zip(report.reached).enumerate() {
        if FAST_PATH_LANDMARKS.contains(&i) || GROUP_LANDMARKS.contains(&i) {
            continue; // see `explore_fast_path` and `explore_reset_group`
        }
        if *name == "unload finished" && bounds.max_depth < 5 {
            continue; // the one-device explorations reach it at this depth
        }
        assert!(n > 0, "the bound never reaches: {name}: {report}");
    }
}

fn one_device(policy: TrustedTimeoutPolicy) {
    let bounds = if full() {
        Bounds {
            max_depth: depth(8, 6),
            threads: threads(),
            ..Bounds::FULL
        }
    } else {
        Bounds {
            max_depth: depth(8, 6),
            threads: threads(),
            ..Bounds::QUICK
        }
    };
    let report = explore(World::<Small>::new(config(policy), true), bounds);
    check(&format!("1 device {policy:?}, {bounds:?}"), &report);
}

#[test]
fn explore_one_device_revoke_policy() {
    one_device(TrustedTimeoutPolicy::Revoke);
}

#[test]
fn explore_one_device_fail_device_policy() {
    one_device(TrustedTimeoutPolicy::FailDevice);
}

/// The fast path's gates (issue 21): one device started with the fast path on and one
/// client whose gate is open; the owner answers every close with nothing or one operation
/// in flight. The bound reaches a close carrying an operation, a close that overran its
/// deadline and was fenced, and a gate reopened at the epoch after a reset.
#[test]
fn explore_fast_path() {
    let t = Tick(0);
    let device = DeviceId(0);
    let prefix = vec![
        (t, Input::AddDevice { device }),
        (
            t,
            Input::ConfigurePort {
                device,
                port: PhysPort(0),
                caps: EXPLORER_PORTS[0],
            },
        ),
        (
            t,
            Input::Start {
                device,
                token: RequestToken(100),
            },
        ),
        (
            t,
            Input::StartDone {
                device,
                result: StartResult::Started,
            },
        ),
        (
            t,
            Input::Register {
                device,
                kind: ClientKind::Untrusted,
            },
        ),
    ];
    let bounds = Bounds {
        max_depth: depth(6, 5),
        max_epoch: 1,
        max_generation: 1,
        max_states: 3_000_000,
        liveness_every: if full() { 3 } else { 11 },
        compare_model: true,
        wide_alphabet: false,
        threads: threads(),
    };
    let world = World::<FastSmall>::new(config(TrustedTimeoutPolicy::Revoke), true);
    let report = explore_from(world, &prefix, bounds);
    check(&format!("fast path, 1 device, {bounds:?}"), &report);
    for i in FAST_PATH_LANDMARKS {
        assert!(
            report.reached[i] > 0,
            "the bound never reaches: {}: {report}",
            LANDMARKS[i]
        );
    }
}

/// Reset groups (issue 23): two devices started in one reset group, an untrusted client on
/// device 1 only (device 0 has no voter, so it is quiesced at once). Every input order is
/// explored (no device-order reduction while a group exists). The bound reaches a group
/// reset commanded through one member, a cycle ended by a nack, a member removed or
/// surprise-removed mid-cycle with the group reset without it, and a member in an idle
/// power-down powered up for the group's cycle.
#[test]
fn explore_reset_group() {
    let t = Tick(0);
    let mut prefix = Vec::new();
    for (i, device) in [DeviceId(0), DeviceId(1)].into_iter().enumerate() {
        prefix.push((t, Input::AddDevice { device }));
        prefix.push((
            t,
            Input::ConfigurePort {
                device,
                port: PhysPort(0),
                caps: EXPLORER_PORTS[0],
            },
        ));
        prefix.push((
            t,
            Input::Start {
                device,
                token: RequestToken(100 + i as u32),
            },
        ));
        prefix.push((
            t,
            Input::StartDone {
                device,
                result: StartResult::Started,
            },
        ));
        prefix.push((
            t,
            Input::JoinResetGroup {
                device,
                group: GroupId(0),
            },
        ));
    }
    prefix.push((
        t,
        Input::Register {
            device: DeviceId(1),
            kind: ClientKind::Untrusted,
        },
    ));
    let bounds = Bounds {
        max_depth: depth(5, 4),
        max_epoch: 1,
        max_generation: 1,
        max_states: 3_000_000,
        liveness_every: if full() { 7 } else { 23 },
        compare_model: true,
        wide_alphabet: false,
        threads: threads(),
    };
    let world = World::<Pair>::new(config(TrustedTimeoutPolicy::Revoke), true);
    let report = explore_from(world, &prefix, bounds);
    check(&format!("reset group of 2 devices, {bounds:?}"), &report);
    // The group's reach on a short line of its own (the full report line is long).
    let reach: Vec<String> = GROUP_LANDMARKS
        .map(|i| format!("{}: {}", LANDMARKS[i], report.reached[i]))
        .collect();
    println!("explore reset group reach (edges): {}", reach.join("; "));
    for i in GROUP_LANDMARKS {
        assert!(
            report.reached[i] > 0,
            "the bound never reaches: {}: {report}",
            LANDMARKS[i]
        );
    }
}
