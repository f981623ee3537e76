//! Deterministic behaviour of the Linux port, with std threads where a race is needed.
#![cfg_attr(feature = "planted-fault", allow(dead_code, unused_imports))]

use pnp_lifecycle::*;
use pnp_lifecycle_linux::oracle::{self, Entry, Log, Recorder, RecordingHardware, What};
use pnp_lifecycle_linux::*;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

const DEV: DeviceId = DeviceId(0);
const IB: PortCaps = PortCaps {
    protocol: Protocol::Ib,
    max_mtu: 4096,
    atomics: true,
};
const CONFIG: Config = Config {
    untrusted_ack_timeout: 10,
    trusted_ack_timeout: 100,
    trusted_policy: TrustedTimeoutPolicy::Revoke,
    detach_timeout: 50,
    callback_timeout: 200,
    operation_timeout: 100,
};

fn driver() -> (Arc<Driver>, Log) {
    let (d, log, _clock) = driver_with_clock();
    (d, log)
}

/// A driver on a manual clock standing at zero: time moves only when the test says so.
fn driver_with_clock() -> (Arc<Driver>, Log, Arc<ManualClock>) {
    let log = oracle::new_log();
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let d = Arc::new(Driver::with_clock(
        CONFIG,
        Arc::new(RecordingHardware { log: log.clone() }),
        clock.clone(),
    ));
    d.probe(DEV, &[IB, IB]).unwrap();
    (d, log, clock)
}

fn events_of(log: &Log, c: u32) -> Vec<What> {
    oracle::snapshot(log)
        .into_iter()
        .filter_map(|e| match e {
            Entry::Enter { c: x, what, .. } if x == c => Some(what),
            _ => None,
        })
        .collect()
}

#[test]
fn port_events_reach_bound_clients_and_queries_work_with_the_port_down() {
    let (d, log) = driver();
    let k = d
        .register_client(
            Recorder::new(0, PciErsResult::NeedReset, &log),
            ClientKind::Trusted,
        )
        .unwrap();
    let attr = d.query_port(k, DEV, PhysPort(1)).unwrap();
    assert_eq!(attr.state, LinkState::Down);
    assert_eq!(attr.queries, 1);
    d.set_port_state(DEV, PhysPort(0), LinkState::Active)
        .unwrap();
    d.set_port_state(DEV, PhysPort(0), LinkState::Down).unwrap();
    assert_eq!(
        events_of(&log, 0),
        vec![
            What::Add,
            What::Event(IbEvent::PortActive(PhysPort(0))),
            What::Event(IbEvent::PortErr(PhysPort(0))),
        ]
    );
    assert_eq!(
        d.query_port(k, DEV, PhysPort(7)).unwrap_err().errno,
        Errno::EINVAL
    );
    d.unload().unwrap();
    oracle::check(&oracle::snapshot(&log), true).unwrap();
    d.audit(true).unwrap();
}

#[test]
fn an_untrusted_context_that_misses_its_deadline_is_disassociated_with_eio() {
    let (d, log, clock) = driver_with_clock();
    let _k = d
        .register_client(
            Recorder::new(0, PciErsResult::NeedReset, &log),
            ClientKind::Trusted,
        )
        .unwrap();
    let u = d
        .register_client(
            Recorder::new(1, PciErsResult::None, &log),
            ClientKind::Untrusted,
        )
        .unwrap();
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    assert_eq!(d.next_timeout(), Some(Tick(10)));
    clock.set(Tick(10));
    d.timeout().unwrap();
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    assert_eq!(
        events_of(&log, 1),
        vec![
            What::Add,
            What::Reset(PciErsResult::None),
            What::Disassociate
        ]
    );
    assert_eq!(
        events_of(&log, 0),
        vec![
            What::Add,
            What::Reset(PciErsResult::NeedReset),
            What::ResetEnd(Epoch(1))
        ]
    );
    for e in [
        d.reset_ack(u, DEV).unwrap_err(),
        d.query_port(u, DEV, PhysPort(0)).unwrap_err(),
        d.post(u, DEV).unwrap_err(),
    ] {
        assert_eq!(e.errno, Errno::EIO);
        assert_eq!(e.errno.code(), 5);
    }
    d.unload().unwrap();
    // Still its last event, and still EIO.
    assert_eq!(events_of(&log, 1).last(), Some(&What::Disassociate));
    assert_eq!(d.post(u, DEV).unwrap_err().errno, Errno::EIO);
    oracle::check(&oracle::snapshot(&log), true).unwrap();
    d.audit(true).unwrap();
}

#[test]
fn a_late_ack_lets_the_reset_go_ahead_and_hardware_calls_wait_meanwhile() {
    let (d, log) = driver();
    let u = d
        .register_client(
            Recorder::new(1, PciErsResult::None, &log),
            ClientKind::Untrusted,
        )
        .unwrap();
    d.error_detected(DEV, PciChannelState::Normal);
    // Still quiescing: the voter itself may touch the hardware, the reset has not run.
    assert!(!oracle::snapshot(&log)
        .iter()
        .any(|e| matches!(e, Entry::HwReset { .. })));
    d.reset_ack(u, DEV).unwrap();
    // Executing now: a second vote and a hardware call are refused as busy.
    assert_eq!(d.reset_ack(u, DEV).unwrap_err().errno, Errno::EBUSY);
    assert_eq!(d.post(u, DEV).unwrap_err().errno, Errno::EBUSY);
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    d.post(u, DEV).unwrap(); // fresh interface after RESET_END
    assert_eq!(d.cycles(), vec![(DEV, CycleOutcome::Completed(Epoch(1)))]);
    d.unload().unwrap();
}

#[test]
fn function_reset_runs_a_full_cycle() {
    let (d, log) = driver();
    d.register_client(
        Recorder::new(0, PciErsResult::CanRecover, &log),
        ClientKind::Trusted,
    )
    .unwrap();
    d.reset_prepare(DEV).unwrap();
    d.reset_done(DEV);
    d.reset_prepare(DEV).unwrap();
    d.reset_done(DEV);
    assert_eq!(
        events_of(&log, 0),
        vec![
            What::Add,
            What::Reset(PciErsResult::CanRecover),
            What::ResetEnd(Epoch(1)),
            What::Reset(PciErsResult::CanRecover),
            What::ResetEnd(Epoch(2)),
        ]
    );
    d.unload().unwrap();
    oracle::check(&oracle::snapshot(&log), true).unwrap();
}

#[test]
fn perm_failure_is_terminal_surprise_removal() {
    let (d, log) = driver();
    d.register_client(
        Recorder::new(0, PciErsResult::NeedReset, &log),
        ClientKind::Trusted,
    )
    .unwrap();
    assert_eq!(
        d.error_detected(DEV, PciChannelState::PermFailure),
        PciErsResult::Disconnect
    );
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::Disconnect
    );
    assert_eq!(d.slot_reset(DEV), PciErsResult::Disconnect);
    d.remove(DEV).unwrap();
    assert_eq!(d.remove(DEV).unwrap_err().errno, Errno::ENODEV);
    assert_eq!(
        events_of(&log, 0),
        vec![
            What::Add,
            What::Remove(RemoveCause::DeviceRemoved { surprise: true })
        ]
    );
    assert!(!oracle::snapshot(&log)
        .iter()
        .any(|e| matches!(e, Entry::HwReset { .. })));
    d.unload().unwrap();
    d.audit(true).unwrap();
}

#[test]
fn a_disconnect_vote_detaches_the_client_from_the_device() {
    let (d, log) = driver();
    let c = d
        .register_client(
            Recorder::new(0, PciErsResult::Disconnect, &log),
            ClientKind::Trusted,
        )
        .unwrap();
    d.error_detected(DEV, PciChannelState::Frozen);
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    assert_eq!(
        events_of(&log, 0),
        vec![What::Add, What::Reset(PciErsResult::Disconnect)]
    );
    assert_eq!(d.post(c, DEV).unwrap_err().errno, Errno::ENODEV);
    d.unload().unwrap();
}

/// A client whose port-event callback blocks until released.
struct Blocking {
    entered: Mutex<Option<mpsc::Sender<()>>>,
    release: Mutex<mpsc::Receiver<()>>,
}
impl IbClient for Blocking {
    fn add(&self, _: DeviceId) {}
    fn remove(&self, _: DeviceId, _: RemoveCause) {}
    fn event(&self, _: DeviceId, _: IbEvent) {
        if let Some(tx) = self.entered.lock().unwrap().take() {
            tx.send(()).unwrap();
        }
        self.release.lock().unwrap().recv().unwrap();
    }
}

#[cfg(not(feature = "planted-fault"))]
#[test]
fn unregister_waits_for_the_callback_in_flight() {
    let (d, _log) = driver();
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let c = d
        .register_client(
            Arc::new(Blocking {
                entered: Mutex::new(Some(entered_tx)),
                release: Mutex::new(release_rx),
            }),
            ClientKind::Trusted,
        )
        .unwrap();
    let d2 = d.clone();
    let sm = std::thread::spawn(move || {
        d2.set_port_state(DEV, PhysPort(0), LinkState::Active)
            .unwrap()
    });
    entered_rx.recv().unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let d3 = d.clone();
    let unreg = std::thread::spawn(move || {
        d3.unregister_client(c).unwrap();
        done_tx.send(()).unwrap();
    });
    assert!(
        done_rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "unregister returned while the callback was running"
    );
    release_tx.send(()).unwrap();
    done_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    sm.join().unwrap();
    unreg.join().unwrap();
    assert!(d.client_gone(c));
    d.unregister_client(c).unwrap(); // idempotent
    d.unload().unwrap();
}

/// A client that calls a blocking entry point from its own callback.
struct SelfUnregister {
    driver: Mutex<Option<(Arc<Driver>, ClientId)>>,
    got: Mutex<Option<Errno>>,
}
impl IbClient for SelfUnregister {
    fn add(&self, _: DeviceId) {}
    fn remove(&self, _: DeviceId, _: RemoveCause) {}
    fn event(&self, _: DeviceId, _: IbEvent) {
        if let Some((d, id)) = self.driver.lock().unwrap().clone() {
            *self.got.lock().unwrap() = d.unregister_client(id).err().map(|e| e.errno);
        }
    }
}

#[cfg(not(feature = "planted-fault"))]
#[test]
fn a_blocking_call_from_a_callback_is_refused_with_edeadlk() {
    let (d, _log) = driver();
    let client = Arc::new(SelfUnregister {
        driver: Mutex::new(None),
        got: Mutex::new(None),
    });
    let id = d
        .register_client(client.clone(), ClientKind::Trusted)
        .unwrap();
    *client.driver.lock().unwrap() = Some((d.clone(), id));
    d.set_port_state(DEV, PhysPort(0), LinkState::Active)
        .unwrap();
    assert_eq!(*client.got.lock().unwrap(), Some(Errno::EDEADLK));
    *client.driver.lock().unwrap() = None; // break the cycle
    d.unload().unwrap();
}

#[test]
fn unload_is_a_fence() {
    let (d, log) = driver();
    d.unload().unwrap();
    let e = d
        .register_client(
            Recorder::new(0, PciErsResult::NeedReset, &log),
            ClientKind::Trusted,
        )
        .unwrap_err();
    assert_eq!(e.errno, Errno::ENODEV);
    assert!(d.unload().is_err());
    assert!(d.unload_finished());
    assert_eq!(
        d.probe(DeviceId(1), &[IB]).unwrap_err().errno,
        Errno::ENODEV
    );
    d.audit(true).unwrap();
}

#[test]
fn can_recover_votes_end_the_cycle_without_a_reset() {
    let (d, log) = driver();
    d.register_client(
        Recorder::new(0, PciErsResult::CanRecover, &log),
        ClientKind::Trusted,
    )
    .unwrap();
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Normal),
        PciErsResult::CanRecover
    );
    assert_eq!(d.mmio_enabled(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    assert_eq!(
        events_of(&log, 0),
        vec![
            What::Add,
            What::Reset(PciErsResult::CanRecover),
            What::ResetEnd(Epoch(0)),
        ]
    );
    assert!(!oracle::snapshot(&log)
        .iter()
        .any(|e| matches!(e, Entry::HwReset { .. })));
    assert_eq!(d.cycles(), vec![(DEV, CycleOutcome::Recovered(Epoch(0)))]);
    d.unload().unwrap();
    oracle::check(&oracle::snapshot(&log), true).unwrap();
    d.audit(true).unwrap();
}

#[test]
fn one_need_reset_vote_keeps_the_reset() {
    let (d, log) = driver();
    for (c, vote) in [(0, PciErsResult::CanRecover), (1, PciErsResult::NeedReset)] {
        d.register_client(Recorder::new(c, vote, &log), ClientKind::Trusted)
            .unwrap();
    }
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Normal),
        PciErsResult::NeedReset
    );
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    assert_eq!(d.cycles(), vec![(DEV, CycleOutcome::Completed(Epoch(1)))]);
    d.unload().unwrap();
    oracle::check(&oracle::snapshot(&log), true).unwrap();
    d.audit(true).unwrap();
}

#[test]
fn slot_reset_waits_for_a_hardware_operation_in_flight() {
    let (d, log) = driver();
    let k = d
        .register_client(
            Recorder::new(0, PciErsResult::NeedReset, &log),
            ClientKind::Trusted,
        )
        .unwrap();
    d.begin_hw_op(k, DEV).unwrap();
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    assert_eq!(d.poll_slot_reset(DEV), None);
    d.end_hw_op(k, DEV).unwrap();
    assert_eq!(
        d.end_hw_op(k, DEV).unwrap_err().errno,
        Errno::EINVAL,
        "no operation in flight any more"
    );
    assert_eq!(d.poll_slot_reset(DEV), Some(PciErsResult::Recovered));
    d.resume(DEV);
    d.post(k, DEV).unwrap(); // grant and AccessDone in one call
    assert_eq!(d.cycles(), vec![(DEV, CycleOutcome::Completed(Epoch(1)))]);
    d.unload().unwrap();
    oracle::check(&oracle::snapshot(&log), true).unwrap();
    d.audit(true).unwrap();
}

#[test]
fn an_operation_that_overruns_is_fenced_before_the_reset_and_its_late_end_not_reported() {
    let (d, log, clock) = driver_with_clock();
    let u = d
        .register_client(
            Recorder::new(0, PciErsResult::NeedReset, &log),
            ClientKind::Untrusted,
        )
        .unwrap();
    d.begin_hw_op(u, DEV).unwrap();
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    // The operation's deadline revokes the context; the fence waits the operation out.
    while d.poll_slot_reset(DEV).is_none() {
        let t = d.next_timeout().expect("a deadline while the reset waits");
        clock.set(t);
        d.timeout().unwrap();
    }
    let snap = oracle::snapshot(&log);
    let fenced = snap
        .iter()
        .position(|e| matches!(e, Entry::Fenced { c: 0, .. }))
        .expect("fenced");
    let reset = snap
        .iter()
        .position(|e| matches!(e, Entry::HwReset { .. }))
        .expect("reset ran");
    assert!(fenced < reset, "the fence comes before the reset");
    d.resume(DEV);
    d.end_hw_op(u, DEV).unwrap(); // late: not reported to the core
    assert_eq!(d.post(u, DEV).unwrap_err().errno, Errno::EIO);
    d.unload().unwrap();
    oracle::check(&oracle::snapshot(&log), true).unwrap();
    d.audit(true).unwrap();
}

/// Hardware whose re-initialisation after a slot reset fails.
struct ReinitFails;
impl Hardware for ReinitFails {
    fn reset(&self, _: DeviceId) -> ResetResult {
        ResetResult::Failed
    }
}

#[test]
fn a_failed_slot_reset_fails_the_device_and_the_error_path_disconnects_until_removal() {
    let log = oracle::new_log();
    let d = Driver::with_clock(
        CONFIG,
        Arc::new(ReinitFails),
        Arc::new(ManualClock::new(Tick(0))),
    );
    d.probe(DEV, &[IB, IB]).unwrap();
    d.register_client(
        Recorder::new(0, PciErsResult::NeedReset, &log),
        ClientKind::Trusted,
    )
    .unwrap();
    assert_eq!(d.failure(DEV), None);
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    assert_eq!(d.slot_reset(DEV), PciErsResult::Disconnect);
    assert_eq!(d.failure(DEV), Some(FailureCause::ResetFailed));
    assert_eq!(d.cycles(), vec![(DEV, CycleOutcome::HardwareFailed)]);
    let dmesg = d.kernel_log();
    assert_eq!(dmesg.len(), 1, "{dmesg:?}");
    assert!(
        dmesg[0].contains("device failed") && dmesg[0].contains("ResetFailed"),
        "{dmesg:?}"
    );
    // A failed device cannot reset: every later step of the error path gives up.
    for state in [PciChannelState::Normal, PciChannelState::Frozen] {
        assert_eq!(d.error_detected(DEV, state), PciErsResult::Disconnect);
    }
    assert_eq!(d.mmio_enabled(DEV), PciErsResult::Disconnect);
    assert_eq!(d.slot_reset(DEV), PciErsResult::Disconnect);
    assert_eq!(d.poll_slot_reset(DEV), Some(PciErsResult::Disconnect));
    assert_eq!(
        d.reset_prepare(DEV).unwrap_err().errno,
        Errno::ENODEV,
        "no function reset of a failed device"
    );
    assert_eq!(
        d.cycles().len(),
        1,
        "no cycle after the failure: {:?}",
        d.cycles()
    );
    assert_eq!(
        events_of(&log, 0),
        vec![
            What::Add,
            What::Reset(PciErsResult::NeedReset),
            What::Event(IbEvent::DeviceFatal),
        ]
    );
    // Removal clears it: the slot is free for a new probe.
    d.remove(DEV).unwrap();
    assert_eq!(d.failure(DEV), None);
    d.unload().unwrap();
    oracle::check(&oracle::snapshot(&log), true).unwrap();
    d.audit(true).unwrap();
}

/// Runs `f` on a thread; fails the test if it does not return within 10 s.
fn returns_in_time(name: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(10)).is_ok(),
        "{name} did not return"
    );
}

#[test]
fn perm_failure_straight_after_error_detected_lets_remove_finish() {
    let (d, log) = driver();
    d.register_client(
        Recorder::new(0, PciErsResult::NeedReset, &log),
        ClientKind::Trusted,
    )
    .unwrap();
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    // No slot_reset: the PCI core gives up on the device.
    assert_eq!(
        d.error_detected(DEV, PciChannelState::PermFailure),
        PciErsResult::Disconnect
    );
    let d2 = d.clone();
    returns_in_time("remove after perm failure", move || d2.remove(DEV).unwrap());
    assert!(!oracle::snapshot(&log)
        .iter()
        .any(|e| matches!(e, Entry::HwReset { .. })));
    let d2 = d.clone();
    returns_in_time("unload", move || d2.unload().unwrap());
    oracle::check(&oracle::snapshot(&log), true).unwrap();
}

#[test]
fn remove_straight_after_error_detected_finishes() {
    let (d, log) = driver();
    d.register_client(
        Recorder::new(0, PciErsResult::NeedReset, &log),
        ClientKind::Trusted,
    )
    .unwrap();
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    // No slot_reset: the driver is removed while the reset is pending.
    let d2 = d.clone();
    returns_in_time("remove after error_detected", move || {
        d2.remove(DEV).unwrap()
    });
    assert!(!oracle::snapshot(&log)
        .iter()
        .any(|e| matches!(e, Entry::HwReset { .. })));
    let d2 = d.clone();
    returns_in_time("unload", move || d2.unload().unwrap());
    oracle::check(&oracle::snapshot(&log), true).unwrap();
}

/// Hardware that records its calls, in order, next to the test's own markers.
struct OrderHardware(Arc<Mutex<Vec<&'static str>>>);
impl Hardware for OrderHardware {
    fn reset(&self, _dev: DeviceId) -> ResetResult {
        self.0.lock().unwrap().push("reinit");
        ResetResult::Succeeded
    }
}

/// A client that records its `RESET` / `RESET_END` into the same list.
struct OrderClient(Arc<Mutex<Vec<&'static str>>>);
impl IbClient for OrderClient {
    fn add(&self, _dev: DeviceId) {}
    fn remove(&self, _dev: DeviceId, _cause: RemoveCause) {}
    fn error_detected(&self, _dev: DeviceId) -> PciErsResult {
        self.0.lock().unwrap().push("client RESET");
        PciErsResult::NeedReset
    }
    fn resume(&self, _dev: DeviceId, _epoch: Epoch) {
        self.0.lock().unwrap().push("client RESET_END");
    }
}

#[test]
fn reset_prepare_quiesces_and_reset_done_reinitialises_after_the_function_reset() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let d = Driver::with_clock(
        CONFIG,
        Arc::new(OrderHardware(calls.clone())),
        Arc::new(ManualClock::new(Tick(0))),
    );
    d.probe(DEV, &[IB]).unwrap();
    d.register_client(Arc::new(OrderClient(calls.clone())), ClientKind::Trusted)
        .unwrap();
    for _ in 0..2 {
        d.reset_prepare(DEV).unwrap();
        calls.lock().unwrap().push("FLR");
        d.reset_done(DEV);
    }
    assert_eq!(
        *calls.lock().unwrap(),
        vec![
            "client RESET",
            "FLR",
            "reinit",
            "client RESET_END",
            "client RESET",
            "FLR",
            "reinit",
            "client RESET_END",
        ]
    );
    d.unload().unwrap();
    d.audit(true).unwrap();
}

/// A client whose first IB event callback hangs until the test opens its gate.
struct StuckClient {
    entered: Mutex<Option<mpsc::Sender<()>>>,
    gate: Mutex<Option<mpsc::Receiver<()>>>,
}
impl IbClient for StuckClient {
    fn add(&self, _dev: DeviceId) {}
    fn remove(&self, _dev: DeviceId, _cause: RemoveCause) {}
    fn event(&self, _dev: DeviceId, _event: IbEvent) {
        if let Some(tx) = self.entered.lock().unwrap().take() {
            let _ = tx.send(());
            let gate = self.gate.lock().unwrap().take().unwrap();
            let _ = gate.recv();
        }
    }
}

#[test]
fn a_stuck_callback_behind_a_link_flood_does_not_hold_up_surprise_removal_and_remove() {
    let (d, log, clock) = driver_with_clock();
    let (entered_tx, entered_rx) = mpsc::channel();
    let (open_tx, open_rx) = mpsc::channel();
    d.register_client(
        Arc::new(StuckClient {
            entered: Mutex::new(Some(entered_tx)),
            gate: Mutex::new(Some(open_rx)),
        }),
        ClientKind::Untrusted,
    )
    .unwrap();
    d.register_client(
        Recorder::new(1, PciErsResult::NeedReset, &log),
        ClientKind::Trusted,
    )
    .unwrap();
    let timer = {
        let (d, clock) = (d.clone(), clock.clone());
        std::thread::spawn(move || {
            while let Some(t) = d.wait_tick_needed() {
                clock.set(t);
                let _ = d.timeout();
            }
        })
    };
    // The first link change: this thread becomes the dispatcher and hangs in the callback.
    let stuck = {
        let d = d.clone();
        std::thread::spawn(move || {
            let _ = d.set_port_state(DEV, PhysPort(0), LinkState::Active);
        })
    };
    entered_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // A flood of link changes behind it: the port's FIFO stays bounded.
    for i in 0..10_000 {
        let state = if i % 2 == 0 {
            LinkState::Down
        } else {
            LinkState::Active
        };
        d.set_port_state(DEV, PhysPort(0), state).unwrap();
        assert!(
            d.backlog() <= 4,
            "backlog {} after {i} changes",
            d.backlog()
        );
    }
    assert_eq!(
        d.error_detected(DEV, PciChannelState::PermFailure),
        PciErsResult::Disconnect
    );
    let d2 = d.clone();
    returns_in_time("remove behind a stuck callback", move || {
        d2.remove(DEV).unwrap()
    });
    open_tx.send(()).unwrap();
    stuck.join().unwrap();
    let d2 = d.clone();
    returns_in_time("unload", move || d2.unload().unwrap());
    timer.join().unwrap();
    oracle::check(&oracle::snapshot(&log), true).unwrap();
}
