//! The Linux port's cooperative schedule harness (what the fuzz target `linux_unload_race`
//! and the corpus replay call): the driver's actors — the PCI core (remove, perm
//! failure), the ERS recovery worker, a late-voting uverbs context, an unregistering
//! kernel client, the subnet manager, module unload, the dispatcher and the timer — run as
//! cooperative state machines over one driver, with no threads. Each schedule byte picks
//! the next actor; the first byte picks which optional actors take part (bit 0: PCI
//! remove, bit 1: perm failure first, bit 2: unregister, bit 3: subnet manager, bit 4: a
//! trusted client's missed deadline fails the device, bit 5: the PM core suspends and
//! resumes the device — system sleep, or runtime PM with bit 6 — with `dev_pm_ops`). The timer jumps to the next
//! deadline only once no work is ready (a held callback may still be running), so clients
//! mostly get their events before their deadlines and deadlines still pass with a
//! callback in flight. Afterwards every actor must have finished, the runtime saw no
//! anomaly, and the common oracle holds.

use std::boxed::Box;
use std::sync::Arc;

use pnp_lifecycle::{ClientKind, Config, LinkState, PhysPort, Tick, TrustedTimeoutPolicy};
use pnp_lifecycle_linux::{
    ClientId, Dispatch, Driver, LinuxOs, LinuxPort, PciChannelState, PciErsResult, Pending, PmOp,
};
use pnp_lifecycle_runtime::{Completion, ContextId, Done, Kernel, ManualClock, StdMonitor, Work};

use super::{late_ack, Recorder, RecordingHardware, DEV, IB};
use crate::observed::{check, Log, Obs};

const STEP_BUDGET: usize = 4_000;
/// The context the harness's dispatcher carries work out as.
const DISPATCHER: ContextId = ContextId(1);

/// A kernel that starts no thread: work waits until the harness takes it.
#[derive(Debug, Clone, Copy, Default)]
pub struct CoopKernel;

impl Kernel for CoopKernel {
    type Monitor<T: Send + 'static> = StdMonitor<T>;
    type Thread = ();
    type Word = std::sync::atomic::AtomicU64;
    fn context() -> ContextId {
        ContextId(0)
    }
    fn spawn(_: Box<dyn FnOnce() + Send + 'static>) {}
    fn join(_: ()) {}
}

/// The driver the harness steps.
pub type CoopDriver<O = LinuxOs> = Driver<CoopKernel, O>;

/// Carry one work item out, as the runtime's dispatcher does.
pub use pnp_lifecycle_runtime::carry_out;

/// Carry out every ready work item.
pub fn pump<O: LinuxPort>(d: &CoopDriver<O>) {
    let rt = d.runtime();
    while let Some(work) = rt.with(|o, _| o.take(DISPATCHER)) {
        let done = carry_out(rt.os(), work);
        rt.with(|o, now| o.finish(now, DISPATCHER, done));
    }
}

/// A cooperative driver over `os`, device [`DEV`] probed (by hand) with one IB port.
pub fn coop_driver<O: LinuxPort>(config: Config, os: O, clock: Arc<ManualClock>) -> CoopDriver<O> {
    let d = Driver::on(config, os, clock, Dispatch::Thread);
    if let Ok(start) = d.begin_probe(DEV, &[IB]) {
        pump(&d);
        let _ = d.end_probe(DEV, &start);
    }
    d
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Actor {
    Dispatcher,
    Timer,
    Worker,
    Pci,
    User,
    Unregister,
    SubnetManager,
    Unload,
    Pm,
}

/// A work item the dispatcher took (and maybe carried out), handed back later.
enum Held<O: LinuxPort> {
    Taken(Work<O>),
    Done(Done),
}

struct World<O: LinuxPort> {
    d: CoopDriver<O>,
    clock: Arc<ManualClock>,
    log: Log,
    kernel: ClientId,
    user: ClientId,
    perm: bool,
    held: Option<Held<O>>,
    worker: u8,
    pci: u8,
    remove: Option<Pending>,
    user_state: u8,
    unreg: u8,
    sm: u8,
    unload: u8,
    /// The PM core: its ops (power-down, power-up), the step, the request in flight.
    pm_ops: [PmOp; 2],
    pm: u8,
    pm_request: Option<Pending>,
}

impl<O: LinuxPort> World<O> {
    /// One step of `a`; whether the actor is done.
    /// Record the remove request's completion if it came; whether it did.
    fn record_remove_completion(&mut self) -> bool {
        match self.remove.as_ref().and_then(Pending::completion) {
            Some(c) => {
                let success = matches!(c, Completion::Done(_));
                self.log.push(Obs::RequestCompleted { id: 1, success });
                true
            }
            None => false,
        }
    }

    fn step(&mut self, a: Actor) -> bool {
        let d = &self.d;
        match a {
            Actor::Dispatcher => {
                // Three steps per item (take, carry out, hand back); others run between.
                let rt = d.runtime();
                self.held = match self.held.take() {
                    None => rt.with(|o, _| o.take(DISPATCHER)).map(Held::Taken),
                    Some(Held::Taken(work)) => Some(Held::Done(carry_out(rt.os(), work))),
                    Some(Held::Done(done)) => {
                        rt.with(|o, now| o.finish(now, DISPATCHER, done));
                        None
                    }
                };
                false
            }
            Actor::Timer => {
                // Time jumps to the next deadline once nothing is ready to run: a callback
                // may still be held (running), so deadlines can pass with one in flight.
                let ready = d.runtime().inspect(|o| o.work_ready());
                if let Some(t) = d.poll_timeout().filter(|_| !ready) {
                    self.clock.set(t);
                    let _ = d.timeout();
                }
                false
            }
            Actor::Worker => {
                self.worker = match self.worker {
                    0 => match d.error_detected(DEV, PciChannelState::Frozen) {
                        PciErsResult::NeedReset => 1,
                        _ => 3,
                    },
                    1 => match d.poll_slot_reset(DEV) {
                        None => 1,
                        Some(PciErsResult::Recovered) => 2,
                        Some(_) => 3,
                    },
                    _ => {
                        d.resume(DEV);
                        3
                    }
                };
                self.worker == 3
            }
            Actor::Pci => {
                self.pci = match self.pci {
                    0 => {
                        if self.perm {
                            let _ = d.error_detected(DEV, PciChannelState::PermFailure);
                        }
                        1
                    }
                    1 => match d.begin_remove(DEV) {
                        Ok(p) => {
                            self.log.push(Obs::RequestSent { id: 1 });
                            self.remove = Some(p);
                            2
                        }
                        Err(_) => 3,
                    },
                    2 => match self.record_remove_completion() {
                        true => 3,
                        false => 2,
                    },
                    done => done,
                };
                self.pci == 3
            }
            Actor::User => {
                if self.user_state == 0 {
                    late_ack(d, &self.log, 1, self.user);
                }
                self.user_state += 1;
                self.user_state >= 2
            }
            Actor::Unregister => {
                self.unreg = match self.unreg {
                    0 => {
                        self.log.push(Obs::DetachBegin { client: 0 });
                        match d.begin_unregister(self.kernel) {
                            true => 1,
                            false => 2,
                        }
                    }
                    1 if d.unregister_ready(self.kernel) => {
                        d.finish_unregister(self.kernel);
                        self.log.push(Obs::DetachReturned { client: 0 });
                        2
                    }
                    s => s,
                };
                self.unreg == 2
            }
            Actor::Pm => {
                // Requests 2 (power-down) and 3 (power-up): sent, each completed once.
                let id = 2 + u32::from(self.pm / 2);
                match (self.pm, self.pm_request.as_ref().map(Pending::completion)) {
                    (0 | 2, _) => {
                        self.log.push(Obs::RequestSent { id });
                        let op = self.pm_ops[usize::from(self.pm / 2)];
                        let sent = d.begin_pm(DEV, op);
                        let success = sent.is_ok();
                        self.pm_request = sent.ok();
                        if !success {
                            self.log.push(Obs::RequestCompleted { id, success });
                            self.pm += 1;
                        }
                        self.pm += 1;
                    }
                    (_, Some(Some(c))) => {
                        let success = matches!(c, Completion::Done(_));
                        self.log.push(Obs::RequestCompleted { id, success });
                        self.pm_request = None;
                        self.pm += 1;
                    }
                    _ => {}
                }
                self.pm == 4
            }
            Actor::SubnetManager => {
                if self.sm == 0 {
                    let _ = d.set_port_state(DEV, PhysPort(0), LinkState::Active);
                    self.sm = 1;
                }
                true
            }
            Actor::Unload => {
                self.unload = match self.unload {
                    0 => match d.begin_unload() {
                        Ok(()) => 1,
                        Err(_) => 3,
                    },
                    1 if d.unload_finished() && self.held.is_none() => {
                        // The PCI actor only polls its remove: a completion that already
                        // happened is recorded before unload returns, where it belongs.
                        if self.pci == 2 && self.record_remove_completion() {
                            self.pci = 3;
                        }
                        if let Some(Some(c)) = self.pm_request.as_ref().map(Pending::completion) {
                            let id = 2 + u32::from(self.pm / 2);
                            let success = matches!(c, Completion::Done(_));
                            self.log.push(Obs::RequestCompleted { id, success });
                            self.pm_request = None;
                            self.pm += 1;
                        }
                        self.log.push(Obs::UnloadReturned);
                        2
                    }
                    s => s,
                };
                self.unload == 2 // refused (3): never finishes, reported
            }
        }
    }
}

/// Run one schedule over the plain port. `Err(description)` on an oracle violation, a
/// runtime anomaly or an actor that did not finish (a hang). Never panics.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    run_with(schedule, |hw| LinuxOs::new(hw))
}

/// [`run`] over the port `os` builds (a planted fault wraps [`LinuxOs`]).
pub fn run_with<O: LinuxPort>(
    schedule: &[u8],
    os: impl FnOnce(Arc<RecordingHardware>) -> O,
) -> Result<(), String> {
    let flags = schedule.first().copied().unwrap_or(0);
    let bytes = schedule.get(1..).unwrap_or(&[]);
    let log = Log::new();
    let config = Config {
        trusted_policy: if flags & 0x10 != 0 {
            TrustedTimeoutPolicy::FailDevice
        } else {
            TrustedTimeoutPolicy::Revoke
        },
        ..super::CONFIG
    };
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let d = coop_driver(config, os(RecordingHardware::new(&log)), clock.clone());
    let kernel = Recorder::new(0, PciErsResult::NeedReset, &log);
    let kernel = d
        .register_client(kernel, ClientKind::Trusted)
        .map_err(|e| format!("register: {e}"))?;
    let user = Recorder::new(1, PciErsResult::None, &log);
    let user = d
        .register_client(user, ClientKind::Untrusted)
        .map_err(|e| format!("register: {e}"))?;
    let mut actors = vec![
        Actor::Dispatcher,
        Actor::Timer,
        Actor::Worker,
        Actor::Unload,
        Actor::User,
    ];
    for (bit, actor) in [
        (1, Actor::Pci),
        (4, Actor::Unregister),
        (8, Actor::SubnetManager),
        (0x20, Actor::Pm),
    ] {
        if flags & bit != 0 {
            actors.push(actor);
        }
    }
    let mut w = World {
        d,
        clock,
        log,
        kernel,
        user,
        perm: flags & 2 != 0,
        held: None,
        worker: 0,
        pci: 0,
        remove: None,
        user_state: 0,
        unreg: 0,
        sm: 0,
        unload: 0,
        pm_ops: match flags & 0x40 {
            0 => [PmOp::Suspend, PmOp::Resume],
            _ => [PmOp::RuntimeSuspend, PmOp::RuntimeResume],
        },
        pm: 0,
        pm_request: None,
    };
    let mut done = vec![false; actors.len()];
    let service = |a: Actor| matches!(a, Actor::Dispatcher | Actor::Timer);
    let mut steps = 0usize;
    for &b in bytes.iter().take(STEP_BUDGET) {
        let live: Vec<usize> = (0..actors.len()).filter(|&i| !done[i]).collect();
        let i = live[usize::from(b) % live.len()];
        if w.step(actors[i]) && !service(actors[i]) {
            done[i] = true;
        }
        steps += 1;
    }
    // Fair round-robin until every actor finished and the dispatcher is idle.
    let mut rr = 0usize;
    while steps < 2 * STEP_BUDGET {
        let all = (0..actors.len()).all(|i| done[i] || service(actors[i]));
        if all && w.held.is_none() && w.d.unload_finished() {
            break;
        }
        let i = rr % actors.len();
        rr += 1;
        if !done[i] && w.step(actors[i]) && !service(actors[i]) {
            done[i] = true;
        }
        steps += 1;
    }
    let stuck: Vec<Actor> = (0..actors.len())
        .filter(|&i| !done[i] && !service(actors[i]))
        .map(|i| actors[i])
        .collect();
    if !stuck.is_empty() || w.held.is_some() {
        return Err(format!(
            "actors did not finish: {stuck:?} (work held: {})",
            w.held.is_some()
        ));
    }
    let anomalies = w.d.runtime().inspect(|o| o.anomalies());
    if anomalies != 0 {
        return Err(format!("the runtime saw {anomalies} anomalies"));
    }
    let log = w.log.snapshot();
    check(&log, true).map_err(|e| format!("{e}; log {log:?}"))
}
