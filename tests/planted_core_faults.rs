//! Planted faults in the core's *own decisions* (`src/planted.rs`, compiled only with
//! `--cfg pnp_faults`): for each, the explorer or the fuzz body, **with the reference model
//! off**, must find it, and the check that fires is named. With `Fault::None` nothing
//! fires. Run with:
//!
//! ```sh
//! RUSTFLAGS="--cfg pnp_faults" CARGO_TARGET_DIR=target/faults \
//!     cargo test -p pnp-lifecycle --test planted_core_faults -- --nocapture
//! ```
#![cfg(pnp_faults)]

use pnp_lifecycle::planted::{plant, Fault};
use pnp_lifecycle::{
    ClientHandle, ClientKind, Config, DeviceId, GroupId, Input, PhysPort, PortSet, PowerDownKind,
    RequestToken, StartResult, Tick, TrustedTimeoutPolicy,
};
use pnp_lifecycle_testkit::explore::{explore_from, Bounds, Report, EXPLORER_PORTS};
use pnp_lifecycle_testkit::fuzz_bodies::run_inputs;
use pnp_lifecycle_testkit::rng::SplitMix;
use pnp_lifecycle_testkit::{
    drive_to_quiescence, Check, FastSmall, Fuzz, Pair, Quiesce, Small, Sut, World,
};

const CONFIG: Config = Config {
    untrusted_ack_timeout: 2,
    trusted_ack_timeout: 4,
    trusted_policy: TrustedTimeoutPolicy::Revoke,
    detach_timeout: 3,
    callback_timeout: 5,
    operation_timeout: 3,
};

/// Oracle only, narrow alphabet, no liveness drives: shallow faults are found fast.
const SEARCH: Bounds = Bounds {
    max_depth: 5,
    max_epoch: 2,
    max_generation: 1,
    max_states: 2_000_000,
    liveness_every: 0,
    compare_model: false,
    wide_alphabet: false,
    // A planted fault is per thread: explore on this one.
    threads: 1,
};

const HCA: DeviceId = DeviceId(0);

fn client(slot: u8) -> ClientHandle {
    ClientHandle {
        device: HCA,
        slot,
        generation: 0,
    }
}

/// One device started, a trusted client bound to port 0 and an untrusted client.
fn prefix() -> Vec<(Tick, Input)> {
    let t = Tick(0);
    vec![
        (t, Input::AddDevice { device: HCA }),
        (
            t,
            Input::ConfigurePort {
                device: HCA,
                port: PhysPort(0),
                caps: EXPLORER_PORTS[0],
            },
        ),
        (
            t,
            Input::Start {
                device: HCA,
                token: RequestToken(100),
            },
        ),
        (
            t,
            Input::StartDone {
                device: HCA,
                result: StartResult::Started,
            },
        ),
        (
            t,
            Input::Register {
                device: HCA,
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
                device: HCA,
                kind: ClientKind::Untrusted,
            },
        ),
    ]
}

fn explore_planted(fault: Fault, bounds: Bounds) -> Report {
    plant(fault);
    let world = World::<Small>::new(CONFIG, false);
    let report = explore_from(world, &prefix(), bounds);
    plant(Fault::None);
    report
}

/// The explorer, model off, must find `fault` as a violation of `expected`.
fn explorer_finds(fault: Fault, expected: Check) {
    let report = explore_planted(fault, SEARCH);
    let (v, path) = report
        .violation
        .clone()
        .unwrap_or_else(|| panic!("explorer missed planted fault {fault:?}: {report}"));
    println!(
        "{fault:?}: caught by the explorer (model off) as {:?} after {} inputs ({} states, {} edges, {:.1} s): {}",
        v.check,
        path.len(),
        report.states,
        report.edges,
        report.seconds,
        v.detail
    );
    assert_eq!(v.check, expected, "{fault:?} caught as {v} via {path:?}");
}

/// The fuzz body, model off (oracle and the three liveness drives), must find `fault`.
fn fuzz_finds(fault: Fault, expected: &[Check], cases: usize) {
    let mut rng = SplitMix(0x5eed ^ fault as u64);
    plant(fault);
    let found = (0..cases).find_map(|case| {
        let data = rng.case(64, 2048);
        run_inputs::<Fuzz>(&data, false, Fuzz::create)
            .err()
            .map(|f| (case, f))
    });
    plant(Fault::None);
    let (case, finding) =
        found.unwrap_or_else(|| panic!("fuzz body missed planted fault {fault:?} in {cases}"));
    println!(
        "{fault:?}: caught by the fuzz body (model off) in case {case} as {:?}: {}",
        finding.violation.check, finding.violation.detail
    );
    assert!(
        expected.contains(&finding.violation.check),
        "{fault:?}: {}",
        finding
    );
}

#[test]
fn control_no_fault_no_violation() {
    let report = explore_planted(
        Fault::None,
        Bounds {
            max_depth: 4,
            liveness_every: 5,
            ..SEARCH
        },
    );
    println!("control: no fault planted, the explorer (model off) finds nothing: {report}");
    assert!(report.violation.is_none(), "{}", report);
    plant(Fault::None);
    let mut rng = SplitMix(0xc0);
    for _ in 0..300 {
        let data = rng.case(64, 2048);
        if let Err(f) = run_inputs::<Fuzz>(&data, false, Fuzz::create) {
            panic!("no fault planted, yet: {f}");
        }
    }
    println!("control: no fault planted, the fuzz body (model off) finds nothing in 300 cases");
}

#[test]
fn early_revocation_breaks_i13() {
    explorer_finds(Fault::EarlyRevocation, Check::I13);
    fuzz_finds(Fault::EarlyRevocation, &[Check::I13], 3000);
}

#[test]
fn refused_surprise_removal_breaks_i11() {
    explorer_finds(Fault::RefuseSurpriseWhileCallbackRuns, Check::I11);
    fuzz_finds(Fault::RefuseSurpriseWhileCallbackRuns, &[Check::I11], 3000);
}

#[test]
fn lost_deferred_fatal_is_unanswered() {
    explorer_finds(Fault::LoseDeferredFatal, Check::FatalAnswered);
    fuzz_finds(Fault::LoseDeferredFatal, &[Check::FatalAnswered], 3000);
}

#[test]
fn revocation_without_fence_is_seen_and_removal_hangs() {
    explorer_finds(Fault::NoFenceForStuckCallback, Check::Fence);
    // Without the fence check, the hostile liveness drive sees the removal hang (I9):
    // a voter whose callback never returns is revoked without a fence.
    plant(Fault::NoFenceForStuckCallback);
    let mut world = World::<Small>::new(CONFIG, false);
    world.oracle.fence_check = false;
    for (now, input) in prefix() {
        world.step(now, input).unwrap();
    }
    world
        .step(Tick(0), Input::ResetRequest { client: client(0) })
        .unwrap();
    // The fence check is off: the liveness drive alone must see it.
    let outcome = drive_to_quiescence(&mut world, Quiesce::Hostile);
    plant(Fault::None);
    let v = outcome.expect_err("removal finished without the fence");
    println!(
        "NoFenceForStuckCallback: caught by the hostile liveness drive (fence check off) as {:?}: {}",
        v.check, v.detail
    );
    assert_eq!(v.check, Check::I9, "{v}");
}

#[test]
fn missing_callback_deadline_breaks_i9() {
    explorer_finds(Fault::NoCallbackDeadline, Check::I9);
    fuzz_finds(Fault::NoCallbackDeadline, &[Check::I9], 3000);
}

#[test]
fn reset_with_a_voter_left_breaks_i3() {
    explorer_finds(Fault::ResetWithOneVoterLeft, Check::I3);
    // With the voter silent, a cycle may also end without a reset nobody could recover
    // from (Recovery), or end while its RESET still waits in a mailbox, which then
    // overflows at the next cycle's (Bound: an event lost).
    fuzz_finds(
        Fault::ResetWithOneVoterLeft,
        &[Check::I3, Check::Recovery, Check::Bound],
        3000,
    );
}

#[test]
fn registration_while_remove_pending_is_seen() {
    explorer_finds(Fault::RegisterWhileRemovePending, Check::PendingRemove);
    fuzz_finds(
        Fault::RegisterWhileRemovePending,
        &[Check::PendingRemove],
        3000,
    );
}

#[test]
fn query_remove_past_a_hold_is_seen() {
    explorer_finds(Fault::QueryRemoveIgnoresHold, Check::HoldVeto);
    fuzz_finds(Fault::QueryRemoveIgnoresHold, &[Check::HoldVeto], 3000);
}

#[test]
fn stop_that_keeps_resources_is_seen() {
    explorer_finds(Fault::StopKeepsResources, Check::StopRelease);
    fuzz_finds(Fault::StopKeepsResources, &[Check::StopRelease], 3000);
}

#[test]
fn notify_after_unregister_breaks_i1() {
    explorer_finds(Fault::NotifyAfterUnregister, Check::I1);
    fuzz_finds(Fault::NotifyAfterUnregister, &[Check::I1], 3000);
}

#[test]
fn second_callback_in_flight_is_seen() {
    explorer_finds(Fault::SecondCallbackInFlight, Check::OneCallback);
    fuzz_finds(Fault::SecondCallbackInFlight, &[Check::OneCallback], 3000);
}

#[test]
fn stop_while_an_operation_is_in_flight_breaks_i12() {
    explorer_finds(Fault::StopWhileOperationInFlight, Check::I12);
    fuzz_finds(Fault::StopWhileOperationInFlight, &[Check::I12], 3000);
}

#[test]
fn reset_before_the_fence_breaks_i12() {
    explorer_finds(Fault::ResetBeforeFence, Check::I12);
    fuzz_finds(Fault::ResetBeforeFence, &[Check::I12], 3000);
}

/// The power faults need the power-down and its callbacks behind them: the search
/// starts from a running device whose clients were told `Suspending` and returned, and the
/// idle power-down (or system sleep) is one input away.
fn suspended_prefix(kind: PowerDownKind) -> Vec<(Tick, Input)> {
    let t = Tick(0);
    let mut v = prefix();
    v.push((
        t,
        Input::PowerDown {
            device: HCA,
            kind,
            token: RequestToken(101),
        },
    ));
    v.push((t, Input::CallbackDone { client: client(0) }));
    v.push((t, Input::CallbackDone { client: client(1) }));
    v
}

fn explorer_finds_from(fault: Fault, expected: Check, start: &[(Tick, Input)]) {
    plant(fault);
    let report = explore_from(World::<Small>::new(CONFIG, false), start, SEARCH);
    plant(Fault::None);
    let (v, path) = report
        .violation
        .clone()
        .unwrap_or_else(|| panic!("explorer missed planted fault {fault:?}: {report}"));
    println!(
        "{fault:?}: caught by the explorer (model off) as {:?} after {} inputs ({} states, {} edges, {:.1} s): {}",
        v.check,
        path.len(),
        report.states,
        report.edges,
        report.seconds,
        v.detail
    );
    assert_eq!(v.check, expected, "{fault:?} caught as {v} via {path:?}");
}

#[test]
fn a_hardware_command_in_dx_breaks_i14() {
    // Surprise removal in Dx repeats the power-down command.
    explorer_finds(Fault::HardwareCommandInDx, Check::I14);
    fuzz_finds(Fault::HardwareCommandInDx, &[Check::I14], 3000);
}

#[test]
fn an_operation_granted_in_dx_breaks_i14() {
    explorer_finds(Fault::OperationGrantedInDx, Check::I14);
    fuzz_finds(Fault::OperationGrantedInDx, &[Check::I14], 3000);
}

#[test]
fn a_suspend_without_resume_breaks_i14() {
    explorer_finds_from(
        Fault::SuspendWithoutResume,
        Check::I14,
        &suspended_prefix(PowerDownKind::SystemSleep),
    );
    fuzz_finds(Fault::SuspendWithoutResume, &[Check::I14], 3000);
}

/// Every planted fault has a test (the five fast-path gate faults and the three reset
/// group faults below).
#[test]
fn every_planted_fault_is_covered() {
    assert_eq!(Fault::ALL.len(), 24);
    let _ = Small::DEVICES;
}

// ---- the fast path's gates (issue 21) ----------------------------------------------------

/// One device started with the fast path on; a trusted client bound to port 0 (its gate
/// open) and, unless `one_client`, an untrusted one.
fn fast_prefix(one_client: bool) -> Vec<(Tick, Input)> {
    let mut inputs = prefix();
    if one_client {
        inputs.pop();
    }
    inputs
}

/// The explorer over [`FastSmall`] (the owner answers every close with nothing or one
/// operation in flight), model off, must find `fault` as a violation of I15.
fn explorer_finds_on_the_fast_path(fault: Fault, one_client: bool, expected: &[Check]) {
    plant(fault);
    let world = World::<FastSmall>::new(CONFIG, false);
    let report = explore_from(world, &fast_prefix(one_client), SEARCH);
    plant(Fault::None);
    let (v, path) = report
        .violation
        .clone()
        .unwrap_or_else(|| panic!("explorer missed planted fault {fault:?}: {report}"));
    println!(
        "{fault:?}: caught by the explorer on the fast path (model off) as {:?} after {} inputs ({} states, {} edges, {:.1} s): {}",
        v.check,
        path.len(),
        report.states,
        report.edges,
        report.seconds,
        v.detail
    );
    assert!(
        expected.contains(&v.check),
        "{fault:?} caught as {v} via {path:?}"
    );
}

#[test]
fn control_no_fault_on_the_fast_path() {
    plant(Fault::None);
    let world = World::<FastSmall>::new(CONFIG, false);
    let report = explore_from(
        world,
        &fast_prefix(false),
        Bounds {
            max_depth: 4,
            liveness_every: 5,
            ..SEARCH
        },
    );
    println!(
        "control: fast path, no fault planted, the explorer (model off) finds nothing: {report}"
    );
    assert!(report.violation.is_none(), "{}", report);
}

#[test]
fn a_gate_reopened_while_its_close_is_unanswered_breaks_i15() {
    explorer_finds_on_the_fast_path(Fault::GateReopenedWhileClosing, false, &[Check::I15]);
}

#[test]
fn a_close_that_drops_its_carried_operations_breaks_i15() {
    // Caught at the answer by the owner's count against the machine's (Handles), or at
    // the stop's shutdown with the carried operation still in flight (I15).
    explorer_finds_on_the_fast_path(
        Fault::CloseDropsCarriedOperations,
        false,
        &[Check::Handles, Check::I15],
    );
}

#[test]
fn a_gate_opened_at_a_stale_epoch_breaks_i15() {
    // A reset cycle with one voter fits the search depth.
    explorer_finds_on_the_fast_path(Fault::GateOpenedAtStaleEpoch, true, &[Check::I15]);
}

#[test]
fn a_gate_left_open_into_dx_breaks_i15() {
    explorer_finds_on_the_fast_path(Fault::GateLeftOpenIntoDx, false, &[Check::I15]);
}

#[test]
fn a_revoked_clients_gate_left_open_breaks_i15() {
    explorer_finds_on_the_fast_path(Fault::GateOpenedForRevokedClient, false, &[Check::I15]);
}

// ---- reset groups (issue 23) -----------------------------------------------------------

/// Two devices started in one reset group; an untrusted client on device 1 only (device 0
/// has no voter: quiesced at once).
fn group_prefix() -> Vec<(Tick, Input)> {
    let mut v = pnp_lifecycle_testkit::gen::two_devices_in_one_group();
    v.push((
        Tick(0),
        Input::Register {
            device: DeviceId(1),
            kind: ClientKind::Untrusted,
        },
    ));
    v
}

/// The explorer, model off, from the group prefix, must find `fault` as `expected`.
fn explorer_finds_in_a_group(fault: Fault, expected: Check) {
    plant(fault);
    let report = explore_from(World::<Pair>::new(CONFIG, false), &group_prefix(), SEARCH);
    plant(Fault::None);
    let (v, path) = report
        .violation
        .clone()
        .unwrap_or_else(|| panic!("explorer missed planted fault {fault:?}: {report}"));
    println!(
        "{fault:?}: caught by the explorer (model off) as {:?} after {} inputs ({} states, {} edges, {:.1} s): {}",
        v.check,
        path.len(),
        report.states,
        report.edges,
        report.seconds,
        v.detail
    );
    assert_eq!(v.check, expected, "{fault:?} caught as {v} via {path:?}");
}

#[test]
fn control_no_fault_in_a_group() {
    let bounds = Bounds {
        max_depth: 4,
        ..SEARCH
    };
    plant(Fault::None);
    let report = explore_from(World::<Pair>::new(CONFIG, false), &group_prefix(), bounds);
    println!("control (group): {report}");
    assert!(report.violation.is_none(), "{report}");
}

#[test]
fn a_group_reset_before_the_other_members_voters_answered_breaks_i3() {
    explorer_finds_in_a_group(Fault::GroupResetBeforeAllAnswered, Check::I3);
}

#[test]
fn a_lost_nack_breaks_i3() {
    explorer_finds_in_a_group(Fault::GroupNackLost, Check::I3);
}

#[test]
fn a_removed_member_blocking_the_groups_cycle_is_seen() {
    explorer_finds_in_a_group(Fault::GroupRemovedMemberBlocks, Check::Group);
}
