//! Deterministic power behaviour of the Linux port (`dev_pm_ops` system sleep, runtime
//! PM) on std threads and a manual clock, against error recovery, PCI remove, perm
//! failure and unload. Every test ends with the common oracle (I1-I14) over what clients
//! and hardware observed.

use std::sync::Arc;

use pnp_lifecycle::{
    ClientKind, Epoch, Error, Event, HardwareCommand, Input, PowerDownKind, PowerUpResult,
    RequestToken, Tick,
};
use pnp_lifecycle_linux::*;
use pnp_lifecycle_testkit::linux_port::{late_ack, Recorder, RecordingHardware, CONFIG, DEV, IB};
use pnp_lifecycle_testkit::observed::{check, Log, Obs, Seen};

fn driver_with(power_up: PowerUpResult) -> (Arc<Driver>, Log, ClientId) {
    let log = Log::new();
    let hw = RecordingHardware::powering_up(&log, power_up);
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let d = Arc::new(Driver::<StdKernel>::with_clock(CONFIG, hw, clock));
    d.probe(DEV, &[IB]).unwrap();
    let rec = Recorder::new(0, PciErsResult::NeedReset, &log);
    let k = d.register_client(rec, ClientKind::Trusted).unwrap();
    (d, log, k)
}

fn driver() -> (Arc<Driver>, Log, ClientId) {
    driver_with(PowerUpResult::Powered)
}

/// A verb as a client issues it (`pm_runtime_get_sync`, the op, `pm_runtime_put`), logged
/// for the oracle.
fn verb(d: &Driver, log: &Log, id: ClientId) -> Result<(), LinuxError> {
    d.begin_hw_op(id, DEV)?;
    log.push(Obs::OperationBegin {
        client: 0,
        device: DEV,
    });
    log.push(Obs::OperationEnd {
        client: 0,
        device: DEV,
    });
    d.end_hw_op(id, DEV)
}

/// Block until the system suspend a thread submitted waits in the core for the reset
/// cycle: a second one, tried on a copy of the machine (the driver's is untouched), is
/// refused `RequestPending`. Without this the cycle could end before the suspend arrived
/// and the test would not test the wait.
fn until_the_suspend_waits_for_the_cycle(d: &Driver) {
    let second = Input::PowerDown {
        device: DEV,
        kind: PowerDownKind::SystemSleep,
        token: RequestToken(u32::MAX),
    };
    for _ in 0..10_000 {
        let waits = d.runtime().inspect(|o| {
            let mut copy = o.machine().clone();
            copy.handle(copy.now(), second) == Err(Error::RequestPending)
        });
        if waits {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    panic!("the system suspend never waited for the reset cycle");
}

fn seen(log: &Log) -> Vec<Seen> {
    let of = |o: Obs| match o {
        Obs::Enter { seen, .. } => Some(seen),
        _ => None,
    };
    log.snapshot().into_iter().filter_map(of).collect()
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

const SLEEP: Seen = Seen::Event(Event::Suspending {
    kind: PowerDownKind::SystemSleep,
});
const IDLE: Seen = Seen::Event(Event::Suspending {
    kind: PowerDownKind::Idle,
});
fn resumed(epoch: u32, state_lost: bool) -> Seen {
    Seen::Event(Event::Resumed {
        epoch: Epoch(epoch),
        state_lost,
    })
}

#[test]
fn system_sleep_refuses_verbs_with_eshutdown_until_resume() {
    use HardwareCommand::*;
    for (down, up) in [
        (PmOp::Suspend, PmOp::Resume),
        (PmOp::Freeze, PmOp::Thaw),
        (PmOp::Poweroff, PmOp::Restore),
    ] {
        let (d, log, k) = driver();
        d.pm(DEV, down).unwrap();
        let e = verb(&d, &log, k).unwrap_err();
        assert_eq!((e.errno, e.errno.code()), (Errno::ESHUTDOWN, 108));
        assert_eq!(d.runtime_idle(DEV), Ok(()));
        // Already down: a second suspend is done at once; nothing is commanded.
        d.pm(DEV, down).unwrap();
        d.pm(DEV, up).unwrap();
        verb(&d, &log, k).unwrap();
        assert_eq!(seen(&log), [Seen::Attached, SLEEP, resumed(0, false)]);
        assert_eq!(hw(&log), [Start, PowerDown, PowerUp]);
        // Resuming a running device is done at once, and commands nothing.
        d.pm(DEV, up).unwrap();
        assert_eq!(hw(&log), [Start, PowerDown, PowerUp]);
        finish(&d, &log);
    }
}

#[test]
fn a_verb_in_runtime_suspend_waits_for_the_runtime_resume_the_core_commands() {
    use HardwareCommand::*;
    let (d, log, k) = driver();
    d.pm(DEV, PmOp::RuntimeSuspend).unwrap();
    assert_eq!(hw(&log), [Start, PowerDown]);
    verb(&d, &log, k).unwrap(); // pm_runtime_get_sync resumed it
    assert_eq!(hw(&log), [Start, PowerDown, PowerUp]);
    assert_eq!(seen(&log), [Seen::Attached, IDLE, resumed(0, false)]);
    // The PM core's own runtime_resume of a running device: done, commands nothing.
    d.pm(DEV, PmOp::RuntimeResume).unwrap();
    assert_eq!(hw(&log), [Start, PowerDown, PowerUp]);
    finish(&d, &log);
}

/// Issue 22 item 5: the PM core never calls `runtime_suspend` while the usage count is
/// nonzero (`rpm_check_suspend_allowed`: `-EAGAIN`), so a runtime suspend with a verb in
/// flight is refused at once, the device stays active and no client is told anything.
/// Before: the power-down was entered, the client told `suspending` while its verb ran,
/// and the device powered down when the verb ended.
#[test]
fn runtime_suspend_with_a_verb_in_flight_is_refused_eagain_and_tells_no_client() {
    use HardwareCommand::*;
    let (d, log, k) = driver();
    d.begin_hw_op(k, DEV).unwrap();
    assert_eq!(d.runtime_idle(DEV).unwrap_err().errno, Errno::EBUSY);
    // The non-blocking half first: before the fix `pm` blocked until the verb ended.
    let e = d.begin_pm(DEV, PmOp::RuntimeSuspend).unwrap_err();
    assert_eq!((e.errno, e.errno.code()), (Errno::EAGAIN, 11));
    assert_eq!(
        d.pm(DEV, PmOp::RuntimeSuspend).unwrap_err().errno,
        Errno::EAGAIN
    );
    let running = d.runtime().inspect(|o| o.machine().phase(DEV));
    assert_eq!(running, Some(pnp_lifecycle::PhaseKind::Running));
    assert_eq!(seen(&log), [Seen::Attached], "no client told suspending");
    d.end_hw_op(k, DEV).unwrap();
    assert_eq!(
        hw(&log),
        [Start],
        "nothing powered down when the verb ended"
    );
    // Once the usage count is zero the runtime suspend goes ahead.
    assert_eq!(d.runtime_idle(DEV), Ok(()));
    d.pm(DEV, PmOp::RuntimeSuspend).unwrap();
    assert_eq!(hw(&log), [Start, PowerDown]);
    assert_eq!(seen(&log), [Seen::Attached, IDLE]);
    // A system suspend is not gated by the usage count: it waits for the verb (drain).
    d.pm(DEV, PmOp::RuntimeResume).unwrap();
    d.begin_hw_op(k, DEV).unwrap();
    let sleep = {
        let d = d.clone();
        std::thread::spawn(move || d.pm(DEV, PmOp::Suspend))
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(hw(&log), [Start, PowerDown, PowerUp], "not drained");
    d.end_hw_op(k, DEV).unwrap();
    sleep.join().unwrap().unwrap();
    assert_eq!(hw(&log), [Start, PowerDown, PowerUp, PowerDown]);
    d.pm(DEV, PmOp::Resume).unwrap();
    finish(&d, &log);
}

#[test]
fn a_lost_state_restore_is_a_new_epoch_and_contexts_reacquire() {
    let (d, log, k) = driver_with(PowerUpResult::LostState);
    d.pm(DEV, PmOp::Poweroff).unwrap();
    d.pm(DEV, PmOp::Restore).unwrap();
    assert_eq!(d.epoch(DEV), Some(Epoch(1)));
    assert_eq!(seen(&log), [Seen::Attached, SLEEP, resumed(1, true)]);
    verb(&d, &log, k).unwrap(); // the context holds the new interface
    finish(&d, &log);
}

#[test]
fn a_failed_power_up_is_the_device_vanishing() {
    let (d, log, k) = driver_with(PowerUpResult::Failed);
    d.pm(DEV, PmOp::Suspend).unwrap();
    assert_eq!(d.pm(DEV, PmOp::Resume).unwrap_err().errno, Errno::EIO);
    assert_eq!(verb(&d, &log, k).unwrap_err().errno, Errno::ENODEV);
    let gone = Seen::Event(Event::Removed { surprise: true });
    assert_eq!(seen(&log), [Seen::Attached, SLEEP, gone]);
    d.remove(DEV).unwrap();
    finish(&d, &log);
}

#[test]
fn error_detected_in_dx_can_recover_since_the_power_up_reinitialises() {
    use HardwareCommand::*;
    for (down, up) in [
        (PmOp::Suspend, PmOp::Resume),
        (PmOp::RuntimeSuspend, PmOp::RuntimeResume),
    ] {
        let (d, log, k) = driver();
        d.pm(DEV, down).unwrap();
        // The core: no live hardware to reset (FatalAnswer::HardwareNotLive(LowPower)).
        let answer = d.error_detected(DEV, PciChannelState::Frozen);
        assert_eq!(answer, PciErsResult::CanRecover);
        assert_eq!(d.mmio_enabled(DEV), PciErsResult::Recovered);
        d.resume(DEV);
        assert_eq!(hw(&log), [Start, PowerDown], "nothing reaches Dx hardware");
        d.pm(DEV, up).unwrap();
        verb(&d, &log, k).unwrap();
        assert_eq!(hw(&log), [Start, PowerDown, PowerUp]);
        finish(&d, &log);
    }
}

#[test]
fn a_lost_state_power_up_after_error_detected_in_dx_is_a_new_epoch() {
    let (d, log, k) = driver_with(PowerUpResult::LostState);
    d.pm(DEV, PmOp::RuntimeSuspend).unwrap();
    let answer = d.error_detected(DEV, PciChannelState::Frozen);
    assert_eq!(answer, PciErsResult::CanRecover);
    assert_eq!(d.mmio_enabled(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    verb(&d, &log, k).unwrap(); // wakes it: a new interface, re-acquired
    assert_eq!(d.epoch(DEV), Some(Epoch(1)));
    assert_eq!(seen(&log), [Seen::Attached, IDLE, resumed(1, true)]);
    finish(&d, &log);
}

#[test]
fn a_reset_owed_across_a_system_suspend_runs_before_the_power_down() {
    use HardwareCommand::*;
    let log = Log::new();
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let hw_ = RecordingHardware::new(&log);
    let d = Arc::new(Driver::<StdKernel>::with_clock(CONFIG, hw_, clock));
    d.probe(DEV, &[IB]).unwrap();
    let rec = Recorder::new(0, PciErsResult::None, &log);
    let u = d.register_client(rec, ClientKind::Untrusted).unwrap();
    // A cycle that needs a reset, then a system suspend that waits for it.
    let answer = d.error_detected(DEV, PciChannelState::Frozen);
    assert_eq!(answer, PciErsResult::NeedReset);
    let sleep = {
        let d = d.clone();
        std::thread::spawn(move || d.pm(DEV, PmOp::Suspend))
    };
    until_the_suspend_waits_for_the_cycle(&d);
    assert!(late_ack(&d, &log, 0, u));
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    sleep.join().unwrap().unwrap();
    assert_eq!(hw(&log), [Start, Reset, PowerDown]);
    d.pm(DEV, PmOp::Resume).unwrap();
    finish(&d, &log);
}

#[test]
fn perm_failure_in_system_sleep_is_surprise_removal_and_remove_finishes() {
    use HardwareCommand::*;
    let (d, log, _) = driver();
    d.pm(DEV, PmOp::Suspend).unwrap();
    let answer = d.error_detected(DEV, PciChannelState::PermFailure);
    assert_eq!(answer, PciErsResult::Disconnect);
    d.remove(DEV).unwrap();
    let gone = Seen::Event(Event::Removed { surprise: true });
    assert_eq!(seen(&log), [Seen::Attached, SLEEP, gone]);
    // Nothing but the release reaches hardware that is down (I14).
    assert_eq!(hw(&log), [Start, PowerDown, ReleaseResources]);
    finish(&d, &log);
}

#[test]
fn pci_remove_and_unload_in_dx_finish_without_touching_the_registers() {
    for op in [PmOp::Suspend, PmOp::RuntimeSuspend] {
        let (d, log, k) = driver();
        d.pm(DEV, op).unwrap();
        d.remove(DEV).unwrap();
        assert_eq!(verb(&d, &log, k).unwrap_err().errno, Errno::ENODEV);
        // Released without powering up (DESIGN "Power": remove from Dx), nothing else.
        use HardwareCommand::*;
        assert_eq!(hw(&log), [Start, PowerDown, ReleaseResources], "{op:?}");
        finish(&d, &log);
        let (d, log, _) = driver();
        d.pm(DEV, op).unwrap();
        finish(&d, &log); // unload in Dx
    }
}

#[test]
fn unregister_in_system_sleep_calls_remove_once_and_unload_finishes() {
    let (d, log, k) = driver();
    d.pm(DEV, PmOp::Suspend).unwrap();
    d.unregister_client(k).unwrap();
    let gone = Seen::Event(Event::Removed { surprise: false });
    assert_eq!(seen(&log), [Seen::Attached, SLEEP, gone]);
    d.pm(DEV, PmOp::Resume).unwrap();
    finish(&d, &log);
}

#[test]
fn a_runtime_suspend_during_error_recovery_is_refused_with_ebusy() {
    let log = Log::new();
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let hw = RecordingHardware::new(&log);
    let d = Arc::new(Driver::<StdKernel>::with_clock(CONFIG, hw, clock));
    d.probe(DEV, &[IB]).unwrap();
    // A context that votes later keeps the cycle quiescing.
    let rec = Recorder::new(0, PciErsResult::None, &log);
    let u = d.register_client(rec, ClientKind::Untrusted).unwrap();
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    let e = d.pm(DEV, PmOp::RuntimeSuspend).unwrap_err();
    assert_eq!(e.errno, Errno::EBUSY);
    // A system suspend waits for the cycle instead.
    let sleep = {
        let d = d.clone();
        std::thread::spawn(move || d.pm(DEV, PmOp::Suspend))
    };
    until_the_suspend_waits_for_the_cycle(&d);
    assert!(late_ack(&d, &log, 0, u));
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    sleep.join().unwrap().unwrap();
    d.pm(DEV, PmOp::Resume).unwrap();
    finish(&d, &log);
}

/// Hardware whose runtime resume hangs until the test lets it go (a device slow to leave
/// D3), logging as [`RecordingHardware`] does.
struct SlowPowerUp {
    inner: Arc<RecordingHardware>,
    gate: std::sync::Mutex<(bool, bool)>, // (entered, released)
    moved: std::sync::Condvar,
}

impl Hardware for SlowPowerUp {
    fn start(&self, dev: pnp_lifecycle::DeviceId) -> pnp_lifecycle::StartResult {
        self.inner.start(dev)
    }
    fn power_down(&self, dev: pnp_lifecycle::DeviceId) {
        self.inner.power_down(dev)
    }
    fn power_up(&self, dev: pnp_lifecycle::DeviceId) -> PowerUpResult {
        let mut g = self.gate.lock().unwrap();
        g.0 = true;
        self.moved.notify_all();
        while !g.1 {
            g = self.moved.wait(g).unwrap();
        }
        drop(g);
        self.inner.power_up(dev)
    }
    fn command(&self, dev: pnp_lifecycle::DeviceId, command: HardwareCommand) {
        self.inner.command(dev, command)
    }
}

/// A verb in runtime suspend waits for the runtime resume the core commands, with a
/// deadline. The first verb's access commands the resume and carries it out itself
/// (inline dispatch), which hangs in the hardware; a second verb waits for it and gets
/// `ETIMEDOUT` at `operation_timeout` after it began waiting, not earlier. Once the resume
/// completes, the first verb runs (the device is back, however long that took).
#[test]
fn a_verb_waiting_for_a_slow_runtime_resume_times_out_at_its_deadline() {
    let log = Log::new();
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let slow = Arc::new(SlowPowerUp {
        inner: RecordingHardware::new(&log),
        gate: std::sync::Mutex::new((false, false)),
        moved: std::sync::Condvar::new(),
    });
    let d = Arc::new(Driver::<StdKernel>::with_clock(
        CONFIG,
        slow.clone(),
        clock.clone(),
    ));
    d.probe(DEV, &[IB]).unwrap();
    let rec = Recorder::new(0, PciErsResult::NeedReset, &log);
    let k = d.register_client(rec, ClientKind::Trusted).unwrap();
    d.pm(DEV, PmOp::RuntimeSuspend).unwrap();
    let first = {
        let (d, log) = (d.clone(), log.clone());
        std::thread::spawn(move || verb(&d, &log, k))
    };
    let mut g = slow.gate.lock().unwrap();
    while !g.0 {
        g = slow.moved.wait(g).unwrap();
    }
    drop(g);
    let second = {
        let d = d.clone();
        std::thread::spawn(move || d.begin_hw_op(k, DEV))
    };
    let due = Tick(CONFIG.operation_timeout);
    for _ in 0..10_000 {
        if d.poll_timeout() == Some(due) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(
        d.poll_timeout(),
        Some(due),
        "the second verb's deadline is the timer's"
    );
    clock.set(Tick(due.0 - 1));
    d.timeout().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(!second.is_finished(), "not before its deadline");
    clock.set(due);
    d.timeout().unwrap();
    let e = second.join().unwrap().unwrap_err();
    assert_eq!(e.errno, Errno::ETIMEDOUT);
    {
        let mut g = slow.gate.lock().unwrap();
        g.1 = true;
        slow.moved.notify_all();
    }
    first.join().unwrap().unwrap();
    use HardwareCommand::*;
    assert_eq!(hw(&log), [Start, PowerDown, PowerUp]);
    assert_eq!(seen(&log), [Seen::Attached, IDLE, resumed(0, false)]);
    finish(&d, &log);
}

fn seen_by(log: &Log, c: u32) -> Vec<Seen> {
    let of = |o: Obs| match o {
        Obs::Enter { client, seen, .. } if client == c => Some(seen),
        _ => None,
    };
    log.snapshot().into_iter().filter_map(of).collect()
}

/// Issue 22 item 4: `ib_register_client` calls `add` for every registered device, in
/// whatever power state. A client registered while the device is runtime-suspended (or
/// in system sleep) is attached at once: its `add` runs, it has a handle, and after the
/// resume its verbs work. Before: it was never attached (no `add`, `ENODEV`, no handle).
#[test]
fn a_client_registered_while_suspended_gets_add_and_its_verbs_work_after_the_resume() {
    use HardwareCommand::*;
    for (down, up, kind) in [
        (
            PmOp::RuntimeSuspend,
            PmOp::RuntimeResume,
            PowerDownKind::Idle,
        ),
        (PmOp::Suspend, PmOp::Resume, PowerDownKind::SystemSleep),
    ] {
        let (d, log, _) = driver();
        d.pm(DEV, down).unwrap();
        let rec = Recorder::new(1, PciErsResult::NeedReset, &log);
        let b = d.register_client(rec, ClientKind::Trusted).unwrap();
        assert!(d.handle(b, DEV).is_some(), "{down:?}: attached");
        assert_eq!(
            seen_by(&log, 1),
            [Seen::Attached],
            "{down:?}: add ran in Dx"
        );
        d.pm(DEV, up).unwrap();
        verb(&d, &log, b).unwrap();
        assert_eq!(
            seen_by(&log, 1),
            [Seen::Attached, resumed(0, false)],
            "{down:?}"
        );
        let told = Seen::Event(Event::Suspending { kind });
        assert_eq!(seen_by(&log, 0), [Seen::Attached, told, resumed(0, false)]);
        assert_eq!(hw(&log), [Start, PowerDown, PowerUp], "{down:?}");
        finish(&d, &log);
    }
}
