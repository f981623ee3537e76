//! Concurrency tests of the Linux port under shuttle (random and PCT schedulers), one per
//! finding. Each asserts the common oracle over what clients, hardware and requests
//! observed, plus the finding's own behaviour. Schedules per scheduler:
//! `PNP_LINUX_SHUTTLE_ITERS` (default 3000).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pnp_lifecycle::{ClientKind, DeviceId, Event, HardwareCommand, LinkState, PhysPort};
use pnp_lifecycle_linux::{IbClient, IbEvent, PciChannelState, PciErsResult, RemoveCause};
use pnp_lifecycle_testkit::linux_port::{
    explore, iterations, late_ack, shuttle_driver, timer, Recorder, CONFIG, DEV,
};
use pnp_lifecycle_testkit::observed::{check, Log, Obs, Seen};
use shuttle::sync::{Condvar, Mutex};
use shuttle::thread;

const TRUSTED: ClientKind = ClientKind::Trusted;
const UNTRUSTED: ClientKind = ClientKind::Untrusted;

fn iters() -> usize {
    iterations(3000)
}

fn resets(log: &[Obs]) -> Vec<usize> {
    let reset = |o: &Obs| {
        matches!(
            o,
            Obs::Hardware {
                command: HardwareCommand::Reset,
                ..
            }
        )
    };
    log.iter()
        .enumerate()
        .filter(|(_, o)| reset(o))
        .map(|(i, _)| i)
        .collect()
}

fn finish(log: &Log) -> Vec<Obs> {
    log.push(Obs::UnloadReturned);
    let log = log.snapshot();
    if let Err(e) = check(&log, true) {
        panic!("{e}\nlog: {log:?}");
    }
    log
}

/// Finding: a permanent failure reported straight after `error_detected`, with no
/// `slot_reset`, left PCI remove waiting forever for the reset the port had ordered.
static RESET_ORDERED_BEFORE_PERM: AtomicUsize = AtomicUsize::new(0);

#[test]
fn perm_failure_straight_after_error_detected_lets_remove_finish() {
    RESET_ORDERED_BEFORE_PERM.store(0, Ordering::SeqCst);
    explore("perm failure after error_detected", iters(), || {
        let clients = [
            (PciErsResult::NeedReset, TRUSTED),
            (PciErsResult::None, UNTRUSTED),
        ];
        let (d, log, ids, clock) = shuttle_driver(CONFIG, &clients);
        let t = {
            let (d, clock) = (d.clone(), clock.clone());
            thread::spawn(move || timer(&d, &clock, &[]))
        };
        let user = {
            let (d, log, id) = (d.clone(), log.clone(), ids[1]);
            thread::spawn(move || late_ack(&d, &log, 1, id))
        };
        let pci = {
            let (d, log) = (d.clone(), log.clone());
            thread::spawn(move || {
                let first = d.error_detected(DEV, PciChannelState::Frozen);
                assert!(matches!(
                    first,
                    PciErsResult::NeedReset | PciErsResult::Disconnect
                ));
                // The finding's interleaving: every vote in, the reset ordered (the
                // core is executing it) and nobody will ever run `slot_reset`.
                let phase = d.runtime().inspect(|o| o.machine().phase(DEV));
                if phase == Some(pnp_lifecycle::PhaseKind::Executing) {
                    RESET_ORDERED_BEFORE_PERM.fetch_add(1, Ordering::SeqCst);
                }
                let perm = d.error_detected(DEV, PciChannelState::PermFailure);
                assert_eq!(perm, PciErsResult::Disconnect);
                log.push(Obs::RequestSent { id: 1 });
                let removed = d.remove(DEV);
                log.push(Obs::RequestCompleted {
                    id: 1,
                    success: removed.is_ok(),
                });
                removed
            })
        };
        pci.join().unwrap().expect("PCI remove returns");
        user.join().unwrap();
        d.unload().expect("unload");
        t.join().unwrap();
        let log = finish(&log);
        assert!(resets(&log).is_empty(), "nobody ran a slot_reset: {log:?}");
    });
    let reached = RESET_ORDERED_BEFORE_PERM.load(Ordering::SeqCst);
    println!(
        "perm failure after error_detected: the reset was ordered first in {reached} schedules"
    );
    assert!(
        reached > 0,
        "the reset was never ordered before the perm failure"
    );
}

/// Finding: `reset_prepare` re-initialised before the function reset and `reset_done`
/// touched nothing. Now prepare only quiesces (every client votes first) and done
/// re-initialises after the reset, then clients resume.
#[test]
fn reset_prepare_quiesces_and_reset_done_reinitialises_after_the_function_reset() {
    explore("reset_prepare / reset_done order", iters(), || {
        let clients = [
            (PciErsResult::NeedReset, TRUSTED),
            (PciErsResult::CanRecover, TRUSTED),
        ];
        let (d, log, _, _clock) = shuttle_driver(CONFIG, &clients);
        let sm = {
            let d = d.clone();
            thread::spawn(move || {
                let _ = d.set_port_state(DEV, PhysPort(0), LinkState::Active);
            })
        };
        let pci = {
            let (d, log) = (d.clone(), log.clone());
            thread::spawn(move || {
                d.reset_prepare(DEV).expect("reset_prepare");
                // The PCI core's function reset.
                log.push(Obs::Hardware {
                    device: DEV,
                    command: HardwareCommand::Reset,
                });
                d.reset_done(DEV);
            })
        };
        pci.join().unwrap();
        sm.join().unwrap();
        assert_eq!(
            d.epoch(DEV).map(|e| e.0),
            Some(1),
            "the function reset is a reset"
        );
        d.unload().expect("unload");
        let log = finish(&log);
        let r = resets(&log);
        assert_eq!(r.len(), 2, "the function reset, then the re-init: {log:?}");
        for client in [0, 1] {
            let at = |seen: Seen| {
                log.iter().position(|o| {
                    *o == Obs::Enter {
                        client,
                        device: DEV,
                        seen,
                    }
                })
            };
            let voted = at(Seen::Event(Event::Reset)).expect("quiesced");
            assert!(
                voted < r[0],
                "client {client} quiesced before the function reset"
            );
            let resumed = log.iter().position(|o| {
                matches!(o, Obs::Enter { client: c, seen: Seen::Event(Event::ResetEnd { .. }), .. } if *c == client)
            });
            assert!(
                resumed.expect("resumed") > r[1],
                "client {client} resumed after the re-init"
            );
        }
    });
}

static RECOVERED_AT_ONCE: AtomicUsize = AtomicUsize::new(0);

/// Finding: `error_detected` always answered `NEED_RESET`. When every client votes
/// `CAN_RECOVER` the cycle ends without a reset: `CAN_RECOVER` and `mmio_enabled` →
/// `RECOVERED` (or, if another thread carried the votes out, `slot_reset` → `RECOVERED`
/// with no reset).
#[test]
fn every_client_can_recover_so_no_reset_and_mmio_enabled_recovers() {
    RECOVERED_AT_ONCE.store(0, Ordering::SeqCst);
    explore("CAN_RECOVER and mmio_enabled", iters(), || {
        let clients = [
            (PciErsResult::CanRecover, TRUSTED),
            (PciErsResult::CanRecover, TRUSTED),
        ];
        let (d, log, _, _clock) = shuttle_driver(CONFIG, &clients);
        let sm = {
            let d = d.clone();
            thread::spawn(move || {
                let _ = d.set_port_state(DEV, PhysPort(0), LinkState::Active);
            })
        };
        let answer = d.error_detected(DEV, PciChannelState::Frozen);
        match answer {
            PciErsResult::CanRecover => {
                RECOVERED_AT_ONCE.fetch_add(1, Ordering::SeqCst);
                assert_eq!(d.mmio_enabled(DEV), PciErsResult::Recovered);
            }
            PciErsResult::NeedReset => assert_eq!(d.slot_reset(DEV), PciErsResult::Recovered),
            other => panic!("error_detected answered {other:?}"),
        }
        d.resume(DEV);
        sm.join().unwrap();
        assert_eq!(d.epoch(DEV).map(|e| e.0), Some(0), "no reset: same epoch");
        d.unload().expect("unload");
        let log = finish(&log);
        assert!(resets(&log).is_empty(), "no hardware reset: {log:?}");
    });
    assert!(
        RECOVERED_AT_ONCE.load(Ordering::SeqCst) > 0,
        "CAN_RECOVER never answered"
    );
}

/// A gate: (entered, open).
type Gate = Arc<(Mutex<(bool, bool)>, Condvar)>;

fn gate_wait(gate: &Gate, ready: impl Fn(&(bool, bool)) -> bool) {
    let (m, cv) = &**gate;
    let mut g = m.lock().unwrap();
    while !ready(&g) {
        g = cv.wait(g).unwrap();
    }
}

fn gate_set(gate: &Gate, f: impl FnOnce(&mut (bool, bool))) {
    let (m, cv) = &**gate;
    f(&mut m.lock().unwrap());
    cv.notify_all();
}

/// A client whose port events never return until the test opens the gate.
struct Stuck {
    inner: Arc<Recorder>,
    gate: Gate,
}

impl IbClient for Stuck {
    fn add(&self, dev: DeviceId) {
        self.inner.add(dev)
    }
    fn remove(&self, dev: DeviceId, cause: RemoveCause) {
        self.inner.remove(dev, cause)
    }
    fn event(&self, dev: DeviceId, event: IbEvent) {
        self.inner.event(dev, event);
        gate_set(&self.gate, |g| g.0 = true);
        gate_wait(&self.gate, |g| g.1);
    }
    fn disassociate(&self, dev: DeviceId) {
        self.inner.disassociate(dev)
    }
    fn disassociated(&self, dev: DeviceId, overran: bool) {
        self.inner.disassociated(dev, overran)
    }
}

/// The most work items this scenario's driver can hold queued at once, however long the
/// flood. The flood leaves at most one callback of the other client queued: the core keeps
/// one callback in flight per client and a newer link state replaces an older one in the
/// client's mailbox (DESIGN r3: "No client can make the machine refuse the OS"). All else
/// is the removal's own work, each item ordered once: when the stuck client's fence ends
/// at its grace, one `Timeout` orders the teardown (`Fenced`, its `ClientGone`, the
/// release, the remove's completion, `DeviceRemoved`: five), which the timer hands to a
/// worker thread (a timer never carries work out), so any thread may read all five before
/// the worker or the waiting remove takes them; the other client's `ClientGone` (its last
/// item) may still be queued beside them. Six; the deterministic interleaving is
/// [`the_fence_ending_at_its_grace_queues_the_removals_teardown_beside_the_other_clients_last_item`].
/// (The bound was 4 until a schedule read five.)
const MOST_QUEUED: usize = 6;

/// Finding: a callback stuck behind a flood of link changes, then surprise removal and
/// PCI remove. Remove and the other client are held up by at most the callback deadline
/// plus the fence grace (on the runtime's manual clock); the backlog stays bounded
/// ([`MOST_QUEUED`]).
#[test]
fn a_stuck_callback_behind_a_link_flood_holds_up_remove_by_at_most_deadline_and_grace() {
    const GRACE: u64 = 50;
    explore(
        "stuck callback, link flood, perm failure, remove",
        iters(),
        || {
            let (d, log, _, clock) = shuttle_driver(CONFIG, &[(PciErsResult::NeedReset, TRUSTED)]);
            d.set_fence_grace(GRACE);
            let gate: Gate = Arc::default();
            let inner = Recorder::yielding(1, PciErsResult::NeedReset, &log);
            let stuck = Stuck {
                inner,
                gate: gate.clone(),
            };
            let stuck = d
                .register_client(Arc::new(stuck), TRUSTED)
                .expect("register");
            // The subnet manager's thread carries the event out and is caught in the callback.
            let sm = {
                let d = d.clone();
                thread::spawn(move || d.set_port_state(DEV, PhysPort(0), LinkState::Active))
            };
            gate_wait(&gate, |g| g.0);
            let t = {
                let (d, clock) = (d.clone(), clock.clone());
                thread::spawn(move || timer(&d, &clock, &[stuck]))
            };
            let flood = {
                let d = d.clone();
                thread::spawn(move || {
                    for i in 0..20u32 {
                        let state = if i % 2 == 0 {
                            LinkState::Down
                        } else {
                            LinkState::Active
                        };
                        let _ = d.set_port_state(DEV, PhysPort(0), state);
                    }
                    let backlog = d.backlog();
                    assert!(backlog <= MOST_QUEUED, "backlog {backlog}");
                })
            };
            let pci = {
                let (d, log, clock) = (d.clone(), log.clone(), clock.clone());
                thread::spawn(move || {
                    d.error_detected(DEV, PciChannelState::PermFailure);
                    log.push(Obs::RequestSent { id: 1 });
                    let removed = d.remove(DEV);
                    log.push(Obs::RequestCompleted {
                        id: 1,
                        success: removed.is_ok(),
                    });
                    removed.expect("remove");
                    let now = pnp_lifecycle_runtime::Clock::now(&*clock).0;
                    assert!(
                        now <= CONFIG.callback_timeout + GRACE,
                        "remove held up until {now}"
                    );
                })
            };
            pci.join().unwrap();
            flood.join().unwrap();
            gate_set(&gate, |g| g.1 = true);
            let _ = sm.join().unwrap();
            d.unload().expect("unload");
            t.join().unwrap();
            let log = finish(&log);
            let removed = log.iter().any(|o| {
                matches!(
                    o,
                    Obs::Enter {
                        client: 0,
                        seen: Seen::Event(Event::Removed { .. }),
                        ..
                    }
                )
            });
            assert!(removed, "the other client got its remove: {log:?}");
            let stuck_at = log.iter().position(|o| {
                let link = Seen::Event(Event::LinkChanged {
                    port: PhysPort(0),
                    state: LinkState::Active,
                });
                *o == Obs::Enter {
                    client: 1,
                    device: DEV,
                    seen: link,
                }
            });
            let beside = log[stuck_at.expect("stuck") + 1..]
                .iter()
                .filter(|o| matches!(o, Obs::Enter { client: 0, .. }))
                .count();
            assert!(
                beside > 0,
                "nothing reached the other client beside the stuck one: {log:?}"
            );
        },
    );
}

/// The interleaving behind [`MOST_QUEUED`], step by step on a driver whose work is
/// carried out only by hand (each step a thread's move between two holds of the lock):
/// the stuck client's callback deadline passes and its fence begins; the timer finds
/// nothing ready and decides to fire at the fence's grace; the PCI core reports the perm
/// failure, the flood's thread carries out the other client's `remove`, the PCI core
/// requests the removal, the flood's thread returns from the callback (the other client's
/// `ClientGone` is queued); then the timer fires: the fence ends and the teardown is
/// queued in one go. Six items wait until someone takes them; the flood itself never
/// leaves more than the other client's one callback.
#[test]
fn the_fence_ending_at_its_grace_queues_the_removals_teardown_beside_the_other_clients_last_item() {
    use pnp_lifecycle_linux::LinuxOs;
    use pnp_lifecycle_runtime::ContextId;
    use pnp_lifecycle_testkit::linux_port::race::{carry_out, coop_driver, pump};
    use pnp_lifecycle_testkit::linux_port::RecordingHardware;
    const SM: ContextId = ContextId(7); // the subnet manager's thread, stuck in a callback
    const FLOOD: ContextId = ContextId(8);
    let log = Log::new();
    let clock = Arc::new(pnp_lifecycle_runtime::ManualClock::new(
        pnp_lifecycle::Tick(0),
    ));
    let d = coop_driver(
        CONFIG,
        LinuxOs::new(RecordingHardware::new(&log)),
        clock.clone(),
    );
    d.set_fence_grace(50);
    let vote = PciErsResult::NeedReset;
    d.register_client(Recorder::new(0, vote, &log), TRUSTED)
        .expect("register");
    d.register_client(Recorder::new(1, vote, &log), TRUSTED)
        .expect("register");
    pump(&d);
    // The subnet manager's thread carries out client 0's link event, then is stuck in
    // client 1's.
    d.set_port_state(DEV, PhysPort(0), LinkState::Active)
        .expect("link");
    let rt = d.runtime();
    let first = rt.with(|o, _| o.take(SM)).expect("client 0's link event");
    let done = carry_out(rt.os(), first);
    rt.with(|o, now| o.finish(now, SM, done));
    let stuck = rt.with(|o, _| o.take(SM)).expect("client 1's link event");
    for i in 0..20u32 {
        let state = [LinkState::Down, LinkState::Active][i as usize % 2];
        d.set_port_state(DEV, PhysPort(0), state).expect("link");
        assert!(d.backlog() <= 1, "the flood piled up {}", d.backlog());
        pump(&d);
    }
    // The callback deadline: client 1 is revoked and its fence waits out the callback.
    let deadline = d.poll_timeout().expect("the callback's deadline");
    clock.set(deadline);
    d.timeout().expect("timeout");
    assert_eq!(d.backlog(), 0, "the fence began, nothing to carry out");
    // The timer sees nothing ready and no client's code running but the stuck one's.
    let grace_ends = d.poll_timeout().expect("the fence's grace");
    assert_eq!(grace_ends.0, deadline.0 + 50);
    assert_eq!(
        d.error_detected(DEV, PciChannelState::PermFailure),
        PciErsResult::Disconnect
    );
    let removed = rt.with(|o, _| o.take(FLOOD)).expect("client 0's remove");
    let remove = d.begin_remove(DEV).expect("remove");
    let done = carry_out(rt.os(), removed);
    rt.with(|o, now| o.finish(now, FLOOD, done));
    assert_eq!(d.backlog(), 1, "client 0's ClientGone");
    clock.set(grace_ends);
    d.timeout().expect("timeout");
    let snapshot = rt.inspect(|o| format!("{o:?}"));
    assert_eq!(d.backlog(), MOST_QUEUED, "{snapshot}");
    pump(&d);
    assert_eq!(d.backlog(), 0);
    assert!(remove.completion().is_some(), "the removal completed");
    let done = carry_out(rt.os(), stuck);
    rt.with(|o, now| o.finish(now, SM, done));
    assert_eq!(rt.inspect(|o| o.anomalies()), 0);
}

/// Finding: remove while a `slot_reset` was claimed and `resume` never called must not
/// hang: the re-initialised reset is reported done and the removal goes on.
#[test]
fn remove_after_a_claimed_slot_reset_without_resume_does_not_hang() {
    explore("remove after slot_reset without resume", iters(), || {
        let clients = [
            (PciErsResult::NeedReset, TRUSTED),
            (PciErsResult::None, UNTRUSTED),
        ];
        let (d, log, ids, clock) = shuttle_driver(CONFIG, &clients);
        let t = {
            let (d, clock) = (d.clone(), clock.clone());
            thread::spawn(move || timer(&d, &clock, &[]))
        };
        let user = {
            let (d, log, id) = (d.clone(), log.clone(), ids[1]);
            thread::spawn(move || late_ack(&d, &log, 1, id))
        };
        let pci = {
            let (d, log) = (d.clone(), log.clone());
            thread::spawn(move || {
                if d.error_detected(DEV, PciChannelState::Frozen) == PciErsResult::NeedReset {
                    let _ = d.slot_reset(DEV); // and no resume
                }
                log.push(Obs::RequestSent { id: 1 });
                let removed = d.remove(DEV);
                log.push(Obs::RequestCompleted {
                    id: 1,
                    success: removed.is_ok(),
                });
                removed.expect("remove");
            })
        };
        pci.join().unwrap();
        user.join().unwrap();
        d.unload().expect("unload");
        t.join().unwrap();
        finish(&log);
    });
}

/// Hardware whose release takes time (a yield inside it), marking its start and end.
struct SlowRelease {
    events: Arc<std::sync::Mutex<Vec<&'static str>>>,
}

impl pnp_lifecycle_linux::Hardware for SlowRelease {
    fn command(&self, _: DeviceId, command: HardwareCommand) {
        if command == HardwareCommand::ReleaseResources {
            self.events.lock().unwrap().push("release begins");
            thread::yield_now();
            self.events.lock().unwrap().push("release ends");
        }
    }
}

/// Issue 22 item 9 (Linux): a PCI remove overlapping module unload. Linux never calls
/// `.remove` during `pci_unregister_driver`'s unbind; the port answers a remove that
/// unload's own removal refused with `ENODEV` only once that teardown is over (the
/// release returned), never while it runs. Before: `ENODEV` at once while unload's
/// release still ran. (A remove that wins and succeeds is issue 22 item 1, the runtime's.)
#[test]
fn a_pci_remove_refused_during_unload_answers_only_after_the_teardown() {
    explore("PCI remove vs unload's teardown", iters(), || {
        let events = Arc::new(std::sync::Mutex::new(Vec::new()));
        let hw = Arc::new(SlowRelease {
            events: events.clone(),
        });
        let clock = Arc::new(pnp_lifecycle_runtime::ManualClock::new(
            pnp_lifecycle::Tick(0),
        ));
        let d = Arc::new(pnp_lifecycle_linux::Driver::<
            pnp_lifecycle_runtime::ShuttleKernel,
        >::with_clock(CONFIG, hw, clock));
        d.probe(DEV, &[pnp_lifecycle_testkit::linux_port::IB])
            .expect("probe");
        let log = Log::new();
        d.register_client(
            Recorder::yielding(0, PciErsResult::NeedReset, &log),
            TRUSTED,
        )
        .expect("register");
        let pci = {
            let (d, events) = (d.clone(), events.clone());
            thread::spawn(move || {
                let r = d.remove(DEV);
                let mark = match r {
                    Ok(()) => "remove returned Ok",
                    Err(_) => "remove returned ENODEV",
                };
                events.lock().unwrap().push(mark);
                r.err().map(|e| e.errno)
            })
        };
        d.unload().expect("unload");
        let r = pci.join().unwrap();
        assert!(
            matches!(r, None | Some(pnp_lifecycle_linux::Errno::ENODEV)),
            "{r:?}"
        );
        let events = events.lock().unwrap().clone();
        let at = |e| events.iter().position(|x| *x == e);
        assert_eq!(events.iter().filter(|e| **e == "release ends").count(), 1);
        if r.is_some() {
            let (ends, answered) = (at("release ends"), at("remove returned ENODEV"));
            assert!(
                ends < answered,
                "ENODEV before the teardown ended: {events:?}"
            );
        }
        log.push(Obs::UnloadReturned);
        check(&log.snapshot(), true).expect("oracle");
    });
}

/// A client that answers `error_detected` with `CAN_RECOVER` and `mmio_enabled` with
/// `mmio`, yielding inside each callback and logging it by name.
struct MmioVoter {
    name: &'static str,
    mmio: PciErsResult,
    script: Arc<std::sync::Mutex<Vec<String>>>,
}

impl MmioVoter {
    fn push(&self, what: &str) {
        self.script
            .lock()
            .unwrap()
            .push(format!("{} {what}", self.name));
        thread::yield_now();
    }
}

impl IbClient for MmioVoter {
    fn add(&self, _: DeviceId) {}
    fn remove(&self, _: DeviceId, _: RemoveCause) {}
    fn error_detected(&self, _: DeviceId) -> PciErsResult {
        self.push("error_detected");
        PciErsResult::CanRecover
    }
    fn mmio_enabled(&self, _: DeviceId) -> PciErsResult {
        self.push("mmio_enabled");
        self.mmio
    }
    fn resume(&self, _: DeviceId, epoch: pnp_lifecycle::Epoch) {
        self.push(&format!("resume {}", epoch.0));
    }
    fn event(&self, _: DeviceId, _: IbEvent) {
        thread::yield_now();
    }
}

/// Hardware logging its re-initialisation into the script.
struct ScriptReset(Arc<std::sync::Mutex<Vec<String>>>);

impl pnp_lifecycle_linux::Hardware for ScriptReset {
    fn reset(&self, _: DeviceId) -> pnp_lifecycle::ResetResult {
        self.0.lock().unwrap().push("hardware reset".into());
        pnp_lifecycle::ResetResult::Succeeded
    }
}

/// Issue 22 item 8 under races: `pcie_do_recovery` with two clients that answer
/// `CAN_RECOVER`, one of which needs a reset at `mmio_enabled`, while the subnet manager
/// moves a port (its thread may carry the votes out). Whenever `error_detected` answered
/// `CAN_RECOVER`, both `mmio_enabled` ran before the reset and every `resume` came after
/// it, with epoch 1; when the votes were still out (`NEED_RESET`), the PCI core skipped
/// `mmio_enabled` and the `CAN_RECOVER` votes stood (no reset, epoch 0). Either way
/// nothing is told `resume` before the last `mmio_enabled`.
#[test]
fn mmio_enabled_votes_under_races_keep_linux_order() {
    static ASKED: AtomicUsize = AtomicUsize::new(0);
    static SKIPPED: AtomicUsize = AtomicUsize::new(0);
    explore("mmio_enabled votes vs port events", iters(), || {
        let script = Arc::new(std::sync::Mutex::new(Vec::new()));
        let hw = Arc::new(ScriptReset(script.clone()));
        let clock = Arc::new(pnp_lifecycle_runtime::ManualClock::new(
            pnp_lifecycle::Tick(0),
        ));
        let d = Arc::new(pnp_lifecycle_linux::Driver::<
            pnp_lifecycle_runtime::ShuttleKernel,
        >::with_clock(CONFIG, hw, clock));
        d.probe(DEV, &[pnp_lifecycle_testkit::linux_port::IB])
            .expect("probe");
        for (name, mmio) in [
            ("A", PciErsResult::Recovered),
            ("B", PciErsResult::NeedReset),
        ] {
            let script = script.clone();
            let voter = MmioVoter { name, mmio, script };
            d.register_client(Arc::new(voter), TRUSTED)
                .expect("register");
        }
        let sm = {
            let d = d.clone();
            thread::spawn(move || {
                for state in [LinkState::Active, LinkState::Down] {
                    let _ = d.set_port_state(DEV, PhysPort(0), state);
                }
            })
        };
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
        sm.join().unwrap();
        d.unload().expect("unload");
        assert_eq!(d.runtime().inspect(|o| o.anomalies()), 0);
        use PciErsResult::*;
        let script = script.lock().unwrap().clone();
        let count = |w: &str| script.iter().filter(|s| s.ends_with(w)).count();
        let at = |w: &str| script.iter().position(|s| s.ends_with(w));
        let last = |w: &str| script.iter().rposition(|s| s.ends_with(w));
        match answers.as_slice() {
            [CanRecover, NeedReset, Recovered] => {
                ASKED.fetch_add(1, Ordering::Relaxed);
                assert_eq!(count("mmio_enabled"), 2, "{script:?}");
                assert!(last("mmio_enabled") < at("hardware reset"), "{script:?}");
                assert!(at("hardware reset") < at("resume 1"), "{script:?}");
                assert_eq!(count("resume 1"), 2, "{script:?}");
            }
            [NeedReset, Recovered] => {
                SKIPPED.fetch_add(1, Ordering::Relaxed);
                assert_eq!(count("mmio_enabled"), 0, "{script:?}");
                assert_eq!(count("hardware reset"), 0, "{script:?}");
                assert_eq!(count("resume 0"), 2, "{script:?}");
            }
            other => panic!("{other:?}: {script:?}"),
        }
        assert_eq!(count("error_detected"), 2, "{script:?}");
        if let Some(m) = last("mmio_enabled") {
            let first_resume = script.iter().position(|s| s.contains("resume"));
            assert!(first_resume.is_some_and(|r| r > m), "{script:?}");
        }
    });
    let (asked, skipped) = (
        ASKED.load(Ordering::Relaxed),
        SKIPPED.load(Ordering::Relaxed),
    );
    println!("mmio_enabled asked in {asked} schedules, skipped in {skipped}");
    assert!(asked > 0, "the mmio_enabled vote ran in some schedule");
}
