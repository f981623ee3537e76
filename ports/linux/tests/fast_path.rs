//! The verbs on the fast path (issue 21, DESIGN r3 "Operations: the fast path"): a verb
//! through a context's [`HwContext`] is admitted without the port lock while the core
//! keeps the attachment's gate open, and refused on either path after revocation, after
//! surprise removal, in Dx and with a stale epoch, with the errno of the lock path. Every
//! test ends with the common oracle over what clients and hardware observed.

use std::sync::Arc;

use pnp_lifecycle::{ClientKind, HardwareCommand, Tick};
use pnp_lifecycle_linux::*;
use pnp_lifecycle_testkit::linux_port::{Recorder, RecordingHardware, CONFIG, DEV, IB};
use pnp_lifecycle_testkit::observed::{check, Log, Obs};

fn driver() -> (Arc<Driver>, Log, Arc<ManualClock>) {
    let log = Log::new();
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let hw = RecordingHardware::new(&log);
    let d = Arc::new(Driver::<StdKernel>::with_clock(CONFIG, hw, clock.clone()));
    d.probe(DEV, &[IB]).unwrap();
    (d, log, clock)
}

fn client(d: &Driver, log: &Log, id: u32, vote: PciErsResult, kind: ClientKind) -> ClientId {
    d.register_client(Recorder::new(id, vote, log), kind)
        .unwrap()
}

/// A verb through `ctx`, logged for the oracle: whether it went on the fast path.
fn verb(d: &Driver, log: &Log, client: u32, ctx: &HwContext) -> Result<bool, LinuxError> {
    let op = d.begin_verb(ctx)?;
    let fast = op.on_fast_path();
    log.push(Obs::OperationBegin {
        client,
        device: DEV,
    });
    log.push(Obs::OperationEnd {
        client,
        device: DEV,
    });
    d.end_verb(ctx, op)?;
    Ok(fast)
}

/// What the machine and the gate count for `ctx`'s attachment.
fn in_flight(d: &Driver, ctx: &HwContext) -> u32 {
    d.runtime()
        .inspect(|o| o.operations_in_flight(ctx.handle()))
}

fn hw(log: &Log) -> Vec<HardwareCommand> {
    let of = |o: Obs| match o {
        Obs::Hardware { command, .. } => Some(command),
        _ => None,
    };
    log.snapshot().into_iter().filter_map(of).collect()
}

fn finish(d: &Driver, log: &Log) {
    d.unload().unwrap();
    log.push(Obs::UnloadReturned);
    check(&log.snapshot(), true).unwrap();
}

#[test]
fn a_verb_of_a_running_device_goes_on_the_fast_path_and_is_counted() {
    let (d, log, _) = driver();
    let k = client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    let ctx = d.hw_context(k, DEV).unwrap();
    assert_eq!(verb(&d, &log, 0, &ctx), Ok(true), "no lock");
    // In flight on the fast path, it counts for the PM core's usage count too.
    let op = d.begin_verb(&ctx).unwrap();
    assert!(op.on_fast_path());
    assert_eq!(in_flight(&d, &ctx), 1);
    assert_eq!(d.runtime_idle(DEV).unwrap_err().errno, Errno::EBUSY);
    d.end_verb(&ctx, op).unwrap();
    assert_eq!(in_flight(&d, &ctx), 0);
    assert_eq!(d.runtime_idle(DEV), Ok(()));
    finish(&d, &log);
}

#[test]
fn a_revoked_context_is_refused_eio_on_the_fast_path_as_on_the_lock_path() {
    let (d, log, clock) = driver();
    client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    let u = client(&d, &log, 1, PciErsResult::None, ClientKind::Untrusted);
    let ctx = d.hw_context(u, DEV).unwrap();
    assert_eq!(verb(&d, &log, 1, &ctx), Ok(true));
    // The untrusted context misses its reset deadline: disassociated (revoked, fenced).
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    clock.set(Tick(10));
    d.timeout().unwrap();
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    let e = d.begin_verb(&ctx).unwrap_err();
    assert_eq!((e.errno, e.errno.code()), (Errno::EIO, 5));
    assert_eq!(d.begin_hw_op(u, DEV).unwrap_err().errno, Errno::EIO);
    assert_eq!(in_flight(&d, &ctx), 0, "nothing counted");
    finish(&d, &log);
}

#[test]
fn after_surprise_removal_a_verb_is_refused_on_both_paths() {
    let (d, log, _) = driver();
    let k = client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    let ctx = d.hw_context(k, DEV).unwrap();
    assert_eq!(verb(&d, &log, 0, &ctx), Ok(true));
    assert_eq!(
        d.error_detected(DEV, PciChannelState::PermFailure),
        PciErsResult::Disconnect
    );
    let fast = d.begin_verb(&ctx).unwrap_err();
    let slow = d.begin_hw_op(k, DEV).unwrap_err();
    assert_eq!(fast, slow, "the same refusal on both paths");
    assert_eq!(in_flight(&d, &ctx), 0, "nothing counted");
    d.remove(DEV).unwrap();
    assert_eq!(d.begin_verb(&ctx).unwrap_err().errno, Errno::ENODEV);
    finish(&d, &log);
}

#[test]
fn in_system_sleep_a_verb_is_refused_eshutdown_and_after_resume_is_fast_again() {
    let (d, log, _) = driver();
    let k = client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    let ctx = d.hw_context(k, DEV).unwrap();
    d.pm(DEV, PmOp::Suspend).unwrap();
    let e = d.begin_verb(&ctx).unwrap_err();
    assert_eq!((e.errno, e.errno.code()), (Errno::ESHUTDOWN, 108));
    assert_eq!(in_flight(&d, &ctx), 0, "nothing counted");
    d.pm(DEV, PmOp::Resume).unwrap();
    // Back in D0 at the same epoch (no state lost): the same context, on the fast path.
    assert_eq!(verb(&d, &log, 0, &ctx), Ok(true));
    finish(&d, &log);
}

#[test]
fn in_runtime_suspend_a_verb_waits_for_the_power_up_through_the_core() {
    let (d, log, _) = driver();
    let k = client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    let ctx = d.hw_context(k, DEV).unwrap();
    d.pm(DEV, PmOp::RuntimeSuspend).unwrap();
    use HardwareCommand::*;
    assert_eq!(hw(&log), [Start, PowerDown]);
    // The gate is shut in Dx: the core commands the power-up and grants it.
    assert_eq!(verb(&d, &log, 0, &ctx), Ok(false));
    assert_eq!(hw(&log), [Start, PowerDown, PowerUp]);
    assert_eq!(verb(&d, &log, 0, &ctx), Ok(true), "open again in D0");
    finish(&d, &log);
}

#[test]
fn a_context_of_an_earlier_epoch_is_refused_estale_and_a_new_one_is_fast() {
    let (d, log, _) = driver();
    let k = client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    let old = d.hw_context(k, DEV).unwrap();
    assert_eq!(verb(&d, &log, 0, &old), Ok(true));
    // A reset cycle: the device comes back at epoch 1.
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    let e = d.begin_verb(&old).unwrap_err();
    assert_eq!((e.errno, e.errno.code()), (Errno::ESTALE, 116));
    assert_eq!(in_flight(&d, &old), 0, "nothing counted");
    let new = d.hw_context(k, DEV).unwrap();
    assert_eq!(new.epoch().0, old.epoch().0 + 1);
    assert_eq!(verb(&d, &log, 0, &new), Ok(true));
    finish(&d, &log);
}

#[test]
fn an_operation_in_flight_when_the_gate_closes_ends_through_the_core_and_holds_the_reset() {
    let (d, log, _) = driver();
    let k = client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    let ctx = d.hw_context(k, DEV).unwrap();
    let op = d.begin_verb(&ctx).unwrap();
    assert!(op.on_fast_path());
    log.push(Obs::OperationBegin {
        client: 0,
        device: DEV,
    });
    // error_detected closes the gate: the close carries the operation to the core.
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    assert_eq!(in_flight(&d, &ctx), 1, "carried, still counted");
    assert_eq!(d.poll_slot_reset(DEV), None, "the reset waits for it");
    assert!(!hw(&log).contains(&HardwareCommand::Reset));
    log.push(Obs::OperationEnd {
        client: 0,
        device: DEV,
    });
    d.end_verb(&ctx, op).unwrap();
    assert_eq!(in_flight(&d, &ctx), 0);
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    finish(&d, &log);
}
