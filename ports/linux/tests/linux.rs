//! Deterministic behaviour of the Linux port on std threads and a manual clock: every
//! test ends with the common oracle over what clients and hardware observed.

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use pnp_lifecycle::{
    ClientKind, DeviceId, Epoch, Event, FailureCause, LinkState, PhysPort, ResetResult, Tick,
};
use pnp_lifecycle_linux::*;
use pnp_lifecycle_testkit::linux_port::{late_ack, Recorder, RecordingHardware, CONFIG, DEV, IB};
use pnp_lifecycle_testkit::observed::{check, Log, Obs, Seen};

fn driver_on(hw: Arc<RecordingHardware>, log: &Log) -> (Arc<Driver>, Arc<ManualClock>) {
    let _ = log;
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let d = Arc::new(Driver::<StdKernel>::with_clock(CONFIG, hw, clock.clone()));
    d.probe(DEV, &[IB, IB]).unwrap();
    (d, clock)
}

fn driver() -> (Arc<Driver>, Log, Arc<ManualClock>) {
    let log = Log::new();
    let (d, clock) = driver_on(RecordingHardware::new(&log), &log);
    (d, log, clock)
}

fn client(d: &Driver, log: &Log, id: u32, vote: PciErsResult, kind: ClientKind) -> ClientId {
    d.register_client(Recorder::new(id, vote, log), kind)
        .unwrap()
}

fn seen(log: &Log, c: u32) -> Vec<Seen> {
    let of = |o: Obs| match o {
        Obs::Enter { client, seen, .. } if client == c => Some(seen),
        _ => None,
    };
    log.snapshot().into_iter().filter_map(of).collect()
}

fn finish(d: &Driver, log: &Log) {
    d.unload().unwrap();
    log.push(Obs::UnloadReturned);
    check(&log.snapshot(), true).unwrap();
}

const RESET: Seen = Seen::Event(Event::Reset);
fn end(epoch: u32) -> Seen {
    Seen::Event(Event::ResetEnd {
        epoch: Epoch(epoch),
    })
}

#[test]
fn port_events_reach_bound_clients_and_queries_work_with_the_port_down() {
    let (d, log, _) = driver();
    let k = client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    assert_eq!(
        d.query_port(k, DEV, PhysPort(1)).unwrap().state,
        LinkState::Down
    );
    d.set_port_state(DEV, PhysPort(0), LinkState::Active)
        .unwrap();
    d.set_port_state(DEV, PhysPort(0), LinkState::Down).unwrap();
    let link = |state| {
        Seen::Event(Event::LinkChanged {
            port: PhysPort(0),
            state,
        })
    };
    assert_eq!(
        seen(&log, 0),
        [
            Seen::Attached,
            link(LinkState::Active),
            link(LinkState::Down)
        ]
    );
    assert_eq!(
        d.query_port(k, DEV, PhysPort(7)).unwrap_err().errno,
        Errno::EINVAL
    );
    finish(&d, &log);
}

#[test]
fn an_untrusted_context_that_misses_its_deadline_is_disassociated_with_eio() {
    let (d, log, clock) = driver();
    client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    let u = client(&d, &log, 1, PciErsResult::None, ClientKind::Untrusted);
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    assert_eq!(d.poll_timeout(), Some(Tick(10)));
    clock.set(Tick(10));
    d.timeout().unwrap();
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    assert_eq!(
        seen(&log, 1),
        [Seen::Attached, RESET, Seen::Event(Event::Revoked)]
    );
    assert_eq!(seen(&log, 0), [Seen::Attached, RESET, end(1)]);
    for e in [
        d.reset_ack(u, DEV).unwrap_err(),
        d.query_port(u, DEV, PhysPort(0)).unwrap_err(),
        d.post(u, DEV).unwrap_err(),
    ] {
        assert_eq!((e.errno, e.errno.code()), (Errno::EIO, 5));
    }
    finish(&d, &log);
}

#[test]
fn a_late_vote_lets_the_reset_go_ahead_and_hardware_calls_wait_meanwhile() {
    let (d, log, _) = driver();
    let u = client(&d, &log, 1, PciErsResult::None, ClientKind::Untrusted);
    d.error_detected(DEV, PciChannelState::Normal);
    assert_eq!(d.mmio_enabled(DEV), PciErsResult::NeedReset);
    assert_eq!(d.poll_slot_reset(DEV), None, "the vote is still out");
    assert!(late_ack(&d, &log, 1, u));
    assert_eq!(d.reset_ack(u, DEV).unwrap_err().errno, Errno::EBUSY);
    assert_eq!(d.post(u, DEV).unwrap_err().errno, Errno::EBUSY);
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    d.post(u, DEV).unwrap(); // its resume refreshed its interface
    assert_eq!(d.epoch(DEV), Some(Epoch(1)));
    finish(&d, &log);
}

#[test]
fn every_voter_can_recover_so_error_detected_answers_can_recover_and_mmio_enabled_recovered() {
    let (d, log, _) = driver();
    client(&d, &log, 0, PciErsResult::CanRecover, ClientKind::Trusted);
    client(&d, &log, 1, PciErsResult::CanRecover, ClientKind::Trusted);
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Normal),
        PciErsResult::CanRecover
    );
    assert_eq!(d.mmio_enabled(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    assert_eq!(d.epoch(DEV), Some(Epoch(0)));
    assert_eq!(seen(&log, 0), [Seen::Attached, RESET, end(0)]);
    // One NEED_RESET keeps the reset.
    client(&d, &log, 2, PciErsResult::NeedReset, ClientKind::Trusted);
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Normal),
        PciErsResult::NeedReset
    );
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    assert_eq!(d.epoch(DEV), Some(Epoch(1)));
    finish(&d, &log);
}

#[test]
fn a_function_reset_quiesces_in_prepare_and_reinitialises_in_done() {
    let (d, log, _) = driver();
    client(&d, &log, 0, PciErsResult::CanRecover, ClientKind::Trusted);
    let resets = |log: &Log| {
        let reset = |o: &Obs| {
            matches!(
                o,
                Obs::Hardware {
                    command: pnp_lifecycle::HardwareCommand::Reset,
                    ..
                }
            )
        };
        log.snapshot().iter().filter(|o| reset(o)).count()
    };
    d.reset_prepare(DEV).unwrap();
    assert_eq!(
        seen(&log, 0),
        [Seen::Attached, RESET],
        "quiesced, not resumed"
    );
    assert_eq!(resets(&log), 0, "prepare touches no hardware");
    d.reset_done(DEV);
    assert_eq!(resets(&log), 1, "done re-initialises");
    assert_eq!(seen(&log, 0), [Seen::Attached, RESET, end(1)]);
    finish(&d, &log);
}

#[test]
fn perm_failure_is_surprise_removal_and_remove_finishes() {
    let (d, log, _) = driver();
    client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    let u = client(&d, &log, 1, PciErsResult::None, ClientKind::Untrusted);
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::NeedReset
    );
    assert_eq!(
        d.error_detected(DEV, PciChannelState::PermFailure),
        PciErsResult::Disconnect
    );
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::Disconnect
    );
    assert_eq!(d.slot_reset(DEV), PciErsResult::Disconnect);
    assert_eq!(d.reset_ack(u, DEV).unwrap_err().errno, Errno::ENODEV);
    d.remove(DEV).unwrap();
    assert_eq!(d.remove(DEV).unwrap_err().errno, Errno::ENODEV);
    let gone = Seen::Event(Event::Removed { surprise: true });
    assert_eq!(seen(&log, 0), [Seen::Attached, RESET, gone]);
    finish(&d, &log);
}

#[test]
fn a_failed_slot_reset_fails_the_device_logs_it_and_recovery_disconnects_until_removal() {
    let log = Log::new();
    let hw = Arc::new(RecordingHardware {
        log: log.clone(),
        reset: ResetResult::Failed,
        power_up: pnp_lifecycle::PowerUpResult::Powered,
    });
    let (d, _) = driver_on(hw, &log);
    client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    d.error_detected(DEV, PciChannelState::Frozen);
    assert_eq!(d.slot_reset(DEV), PciErsResult::Disconnect);
    assert_eq!(d.failure(DEV), Some(FailureCause::ResetFailed));
    assert!(
        d.kernel_log()[0].contains("the hardware reset failed"),
        "{:?}",
        d.kernel_log()
    );
    assert_eq!(
        d.error_detected(DEV, PciChannelState::Frozen),
        PciErsResult::Disconnect
    );
    assert_eq!(d.mmio_enabled(DEV), PciErsResult::Disconnect);
    assert_eq!(d.reset_prepare(DEV).unwrap_err().errno, Errno::ENODEV);
    d.remove(DEV).unwrap();
    assert_eq!(d.failure(DEV), None);
    finish(&d, &log);
}

#[test]
fn a_disconnect_vote_detaches_the_client_from_the_device() {
    let (d, log, _) = driver();
    let c = client(&d, &log, 0, PciErsResult::Disconnect, ClientKind::Trusted);
    d.error_detected(DEV, PciChannelState::Frozen);
    assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered);
    d.resume(DEV);
    assert_eq!(seen(&log, 0), [Seen::Attached, RESET]);
    assert_eq!(d.post(c, DEV).unwrap_err().errno, Errno::ENODEV);
    d.unregister_client(c).unwrap();
    assert_eq!(
        seen(&log, 0),
        [Seen::Attached, RESET],
        "no remove after a detach"
    );
    finish(&d, &log);
}

/// A client whose port events block until released; `entered` says it is inside.
struct Blocking {
    inner: Arc<Recorder>,
    entered: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl IbClient for Blocking {
    fn add(&self, dev: DeviceId) {
        self.inner.add(dev)
    }
    fn remove(&self, dev: DeviceId, cause: RemoveCause) {
        self.inner.remove(dev, cause)
    }
    fn event(&self, dev: DeviceId, event: IbEvent) {
        self.inner.event(dev, event);
        let _ = self.entered.lock().unwrap().send(());
        let _ = self.release.lock().unwrap().recv();
    }
}

#[test]
fn unregister_waits_for_the_callback_in_flight_then_calls_remove() {
    let (d, log, _) = driver();
    let (entered, inside) = mpsc::channel();
    let (release, released) = mpsc::channel();
    let blocking = Blocking {
        inner: Recorder::new(0, PciErsResult::NeedReset, &log),
        entered: Mutex::new(entered),
        release: Mutex::new(released),
    };
    let c = d
        .register_client(Arc::new(blocking), ClientKind::Trusted)
        .unwrap();
    let sm = {
        let d = d.clone();
        std::thread::spawn(move || d.set_port_state(DEV, PhysPort(0), LinkState::Active))
    };
    inside.recv().unwrap();
    let (done, returned) = mpsc::channel();
    let unreg = {
        let (d, log) = (d.clone(), log.clone());
        std::thread::spawn(move || {
            log.push(Obs::DetachBegin { client: 0 });
            d.unregister_client(c).unwrap();
            log.push(Obs::DetachReturned { client: 0 });
            done.send(()).unwrap();
        })
    };
    let early = returned.recv_timeout(Duration::from_millis(200));
    assert!(early.is_err(), "unregister returned while the callback ran");
    release.send(()).unwrap();
    returned.recv_timeout(Duration::from_secs(10)).unwrap();
    sm.join().unwrap().unwrap();
    unreg.join().unwrap();
    let link = Seen::Event(Event::LinkChanged {
        port: PhysPort(0),
        state: LinkState::Active,
    });
    let removed = Seen::Event(Event::Removed { surprise: false });
    assert_eq!(seen(&log, 0), [Seen::Attached, link, removed]);
    d.unregister_client(c).unwrap(); // idempotent
    finish(&d, &log);
}

/// A client that unregisters itself from its own callback.
#[derive(Default)]
struct SelfUnregister {
    driver: Mutex<Option<(Arc<Driver>, ClientId)>>,
    got: Mutex<Option<Errno>>,
}

impl IbClient for SelfUnregister {
    fn add(&self, _: DeviceId) {}
    fn remove(&self, _: DeviceId, _: RemoveCause) {}
    fn event(&self, _: DeviceId, _: IbEvent) {
        if let Some((d, id)) = self.driver.lock().unwrap().take() {
            *self.got.lock().unwrap() = d.unregister_client(id).err().map(|e| e.errno);
        }
    }
}

#[test]
fn a_blocking_call_from_a_callback_is_refused_with_edeadlk() {
    let (d, log, _) = driver();
    let me = Arc::new(SelfUnregister::default());
    let id = d.register_client(me.clone(), ClientKind::Trusted).unwrap();
    *me.driver.lock().unwrap() = Some((d.clone(), id));
    d.set_port_state(DEV, PhysPort(0), LinkState::Active)
        .unwrap();
    assert_eq!(*me.got.lock().unwrap(), Some(Errno::EDEADLK));
    finish(&d, &log);
}

#[test]
fn unload_is_a_fence() {
    let (d, log, _) = driver();
    client(&d, &log, 0, PciErsResult::NeedReset, ClientKind::Trusted);
    finish(&d, &log);
    let late = Recorder::new(1, PciErsResult::NeedReset, &log);
    let e = d.register_client(late, ClientKind::Trusted).unwrap_err();
    assert_eq!(e.errno, Errno::ENODEV);
    assert_eq!(
        d.probe(DeviceId(1), &[IB]).unwrap_err().errno,
        Errno::ENODEV
    );
    let gone = Seen::Event(Event::Removed { surprise: false });
    assert_eq!(seen(&log, 0), [Seen::Attached, gone]);
}

/// What a scripted client and the hardware saw, in one order.
type Script = Arc<Mutex<Vec<String>>>;

/// A client that answers `error_detected` with `detected` and `mmio_enabled` with `mmio`,
/// logging each callback by name.
struct Voter {
    name: &'static str,
    detected: PciErsResult,
    mmio: PciErsResult,
    script: Script,
}

impl Voter {
    fn push(&self, what: String) {
        self.script
            .lock()
            .unwrap()
            .push(format!("{} {what}", self.name));
    }
}

impl IbClient for Voter {
    fn add(&self, _: DeviceId) {}
    fn remove(&self, _: DeviceId, _: RemoveCause) {}
    fn error_detected(&self, _: DeviceId) -> PciErsResult {
        self.push(format!("error_detected -> {}", self.detected.linux_name()));
        self.detected
    }
    fn mmio_enabled(&self, _: DeviceId) -> PciErsResult {
        self.push(format!("mmio_enabled -> {}", self.mmio.linux_name()));
        self.mmio
    }
    fn resume(&self, _: DeviceId, epoch: Epoch) {
        self.push(format!("resume epoch {}", epoch.0));
    }
}

/// Hardware that logs its re-initialisation into the script.
struct ScriptHw(Script);

impl Hardware for ScriptHw {
    fn reset(&self, _: DeviceId) -> ResetResult {
        self.0.lock().unwrap().push("hardware reset".into());
        ResetResult::Succeeded
    }
}

/// A driver with clients `a` and `b` answering `(error_detected, mmio_enabled)`.
fn voters(a: [PciErsResult; 2], b: [PciErsResult; 2]) -> (Arc<Driver>, Script) {
    let script = Script::default();
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let hw = Arc::new(ScriptHw(script.clone()));
    let d = Arc::new(Driver::<StdKernel>::with_clock(CONFIG, hw, clock));
    d.probe(DEV, &[IB]).unwrap();
    for (name, [detected, mmio]) in [("A", a), ("B", b)] {
        let script = script.clone();
        let voter = Voter {
            name,
            detected,
            mmio,
            script,
        };
        d.register_client(Arc::new(voter), ClientKind::Trusted)
            .unwrap();
    }
    (d, script)
}

/// `pcie_do_recovery`'s sequence: `error_detected`, `mmio_enabled` if every driver
/// answered `CAN_RECOVER`, `slot_reset` if one needs a reset, `resume` once recovered.
fn pcie_do_recovery(d: &Driver) -> Vec<PciErsResult> {
    let mut answers = vec![d.error_detected(DEV, PciChannelState::Normal)];
    if answers[0] == PciErsResult::CanRecover {
        answers.push(d.mmio_enabled(DEV));
    }
    if answers.last() == Some(&PciErsResult::NeedReset) {
        answers.push(d.slot_reset(DEV));
    }
    if answers.last() == Some(&PciErsResult::Recovered) {
        d.resume(DEV);
    }
    answers
}

/// Issue 22 item 8: a client votes at `mmio_enabled`. Both answered `CAN_RECOVER`; B
/// then needs a reset: `mmio_enabled` answers `NEED_RESET`, `slot_reset` re-initialises
/// the hardware and both get `resume` with the new epoch, in Linux's documented order
/// (Documentation/PCI/pci-error-recovery.rst: `error_detected` to every driver, then
/// `mmio_enabled` to every driver, then `slot_reset`, then `resume`). Before: the cycle
/// ended at the votes (`resume` before `mmio_enabled`) and `mmio_enabled` always
/// answered `RECOVERED`.
#[test]
fn a_client_needing_a_reset_at_mmio_enabled_makes_the_reset_run_in_linux_order() {
    use PciErsResult::*;
    let (d, script) = voters([CanRecover, Recovered], [CanRecover, NeedReset]);
    assert_eq!(pcie_do_recovery(&d), [CanRecover, NeedReset, Recovered]);
    assert_eq!(
        *script.lock().unwrap(),
        [
            "A error_detected -> PCI_ERS_RESULT_CAN_RECOVER",
            "B error_detected -> PCI_ERS_RESULT_CAN_RECOVER",
            "A mmio_enabled -> PCI_ERS_RESULT_RECOVERED",
            "B mmio_enabled -> PCI_ERS_RESULT_NEED_RESET",
            "hardware reset",
            "A resume epoch 1",
            "B resume epoch 1",
        ]
    );
    assert_eq!(d.epoch(DEV), Some(Epoch(1)));
    assert_eq!(d.runtime().inspect(|o| o.anomalies()), 0);
    d.unload().unwrap();
}

/// Every client recovered at `mmio_enabled`: `RECOVERED`, no reset, `resume` with the
/// same epoch, after every `mmio_enabled`.
#[test]
fn every_client_recovered_at_mmio_enabled_so_no_reset_and_resume_comes_last() {
    use PciErsResult::*;
    let (d, script) = voters([CanRecover, Recovered], [CanRecover, Recovered]);
    assert_eq!(d.error_detected(DEV, PciChannelState::Normal), CanRecover);
    assert_eq!(d.mmio_enabled(DEV), Recovered);
    // Recovered when mmio_enabled returns: the clients' resume already ran.
    assert_eq!(script.lock().unwrap().len(), 6);
    d.resume(DEV);
    assert_eq!(
        *script.lock().unwrap(),
        [
            "A error_detected -> PCI_ERS_RESULT_CAN_RECOVER",
            "B error_detected -> PCI_ERS_RESULT_CAN_RECOVER",
            "A mmio_enabled -> PCI_ERS_RESULT_RECOVERED",
            "B mmio_enabled -> PCI_ERS_RESULT_RECOVERED",
            "A resume epoch 0",
            "B resume epoch 0",
        ]
    );
    assert_eq!(d.epoch(DEV), Some(Epoch(0)));
    assert_eq!(d.runtime().inspect(|o| o.anomalies()), 0);
    d.unload().unwrap();
}

/// One client needs a reset at `error_detected`: the PCI core skips `mmio_enabled`,
/// the other's `CAN_RECOVER` stands, and the reset runs.
#[test]
fn a_reset_needed_at_error_detected_skips_mmio_enabled() {
    use PciErsResult::*;
    let (d, script) = voters([NeedReset, Recovered], [CanRecover, NeedReset]);
    assert_eq!(pcie_do_recovery(&d), [NeedReset, Recovered]);
    assert_eq!(
        *script.lock().unwrap(),
        [
            "A error_detected -> PCI_ERS_RESULT_NEED_RESET",
            "B error_detected -> PCI_ERS_RESULT_CAN_RECOVER",
            "hardware reset",
            "A resume epoch 1",
            "B resume epoch 1",
        ]
    );
    assert_eq!(d.runtime().inspect(|o| o.anomalies()), 0);
    d.unload().unwrap();
}
