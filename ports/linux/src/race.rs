//! A deterministic schedule harness for fuzzing (feature `race`): the driver's actors —
//! the PCI core (remove, perm failure), the ERS reset worker, clients (a late-acking
//! uverbs context, an unregistering kernel client), the subnet manager, module unload,
//! the callback dispatcher and the timer — run as cooperative state machines over a
//! [`Driver::new_cooperative`] driver, with no threads. Each schedule byte picks the next
//! actor; the first byte picks which optional actors take part. Afterwards every actor
//! must have finished and I1–I5 must hold on what the clients received.

use crate::clock::ManualClock;
use crate::driver::*;
use crate::oracle::{self, Entry, Log, Recorder, RecordingHardware};
use crate::sync::Arc;
use pnp_lifecycle::*;

const DEV: DeviceId = DeviceId(0);
const STEP_BUDGET: usize = 4_000;

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
}

struct World {
    d: Driver,
    clock: std::sync::Arc<ManualClock>,
    log: Log,
    kernel: ClientId,
    user: ClientId,
    perm: bool,
    held: Option<InFlight>,
    worker: u8,
    pci: u8,
    pci_token: Option<RequestToken>,
    user_state: u8,
    unreg: u8,
    sm: u8,
    unload: u8,
}

impl World {
    /// One step of `a`; returns whether the actor is done.
    fn step(&mut self, a: Actor) -> bool {
        match a {
            Actor::Dispatcher => {
                if let Some(mut f) = self.held.take() {
                    // Two steps per callback: call, then hand back; others run between.
                    if !f.called() {
                        f.call(self.d.hardware());
                        self.held = Some(f);
                    } else {
                        self.d.finish_job(f);
                    }
                } else {
                    self.held = self.d.take_job();
                }
                false
            }
            Actor::Timer => {
                if let Some(t) = self.d.next_timeout() {
                    self.clock.set(t);
                    let _ = self.d.timeout();
                }
                false
            }
            Actor::Worker => match self.worker {
                0 => {
                    self.worker = if self.d.error_detected(DEV, PciChannelState::Frozen)
                        == PciErsResult::NeedReset
                    {
                        1
                    } else {
                        3
                    };
                    self.worker == 3
                }
                1 => {
                    match self.d.poll_slot_reset(DEV) {
                        None => {}
                        Some(PciErsResult::Recovered) => self.worker = 2,
                        Some(_) => self.worker = 3,
                    }
                    self.worker == 3
                }
                2 => {
                    self.d.resume(DEV);
                    self.worker = 3;
                    true
                }
                _ => true,
            },
            Actor::Pci => match self.pci {
                0 => {
                    if self.perm {
                        let _ = self.d.error_detected(DEV, PciChannelState::PermFailure);
                    }
                    self.pci = 1;
                    false
                }
                1 => {
                    self.pci_token = self.d.begin_remove(DEV).ok();
                    self.pci = if self.pci_token.is_some() { 2 } else { 3 };
                    self.pci == 3
                }
                2 => {
                    if self
                        .pci_token
                        .is_some_and(|t| self.d.poll_request(t).is_some())
                    {
                        self.pci = 3;
                    }
                    self.pci == 3
                }
                _ => true,
            },
            Actor::User => match self.user_state {
                0 => {
                    oracle::push(&self.log, Entry::AckAttempt { c: 1, dev: DEV });
                    let ok = self.d.reset_ack(self.user, DEV).is_ok();
                    oracle::push(&self.log, Entry::AckResult { c: 1, ok });
                    self.user_state = 1;
                    false
                }
                1 => {
                    self.user_state = 2;
                    true
                }
                _ => true,
            },
            Actor::Unregister => match self.unreg {
                0 => {
                    oracle::push(&self.log, Entry::UnregisterBegin { c: 0 });
                    let _ = self.d.begin_unregister(self.kernel);
                    self.unreg = 1;
                    false
                }
                1 => {
                    if self.d.client_gone(self.kernel) {
                        oracle::push(&self.log, Entry::Unregistered { c: 0 });
                        self.unreg = 2;
                    }
                    self.unreg == 2
                }
                _ => true,
            },
            Actor::SubnetManager => {
                if self.sm == 0 {
                    let _ = self.d.set_port_state(DEV, PhysPort(0), LinkState::Active);
                    self.sm = 1;
                }
                true
            }
            Actor::Unload => match self.unload {
                0 => {
                    self.unload = if self.d.begin_unload().is_ok() { 1 } else { 3 };
                    false
                }
                1 => {
                    if self.d.unload_finished() && self.held.is_none() {
                        oracle::push(&self.log, Entry::UnloadDone);
                        self.unload = 2;
                    }
                    self.unload == 2
                }
                2 => true,
                _ => false, // refused: never finishes (reported)
            },
        }
    }
}

/// Run one schedule. `Err(description)` on an invariant violation or an actor that did
/// not finish (deadlock, lost wake-up). Never panics.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    let flags = schedule.first().copied().unwrap_or(0);
    let bytes = schedule.get(1..).unwrap_or(&[]);
    let log = oracle::new_log();
    let config = Config {
        untrusted_ack_timeout: 10,
        trusted_ack_timeout: 100,
        trusted_policy: if flags & 0x10 != 0 {
            TrustedTimeoutPolicy::FailDevice
        } else {
            TrustedTimeoutPolicy::Revoke
        },
        detach_timeout: 50,
        callback_timeout: 200,
        operation_timeout: 50,
    };
    let clock = std::sync::Arc::new(ManualClock::new(Tick(0)));
    let d = Driver::cooperative_with_clock(
        config,
        Arc::new(RecordingHardware { log: log.clone() }),
        clock.clone(),
    );
    let caps = PortCaps {
        protocol: Protocol::Ib,
        max_mtu: 4096,
        atomics: true,
    };
    d.probe(DEV, &[caps]).map_err(|e| format!("probe: {e}"))?;
    let kernel = d
        .register_client(
            Recorder::new(0, PciErsResult::NeedReset, &log),
            ClientKind::Trusted,
        )
        .map_err(|e| format!("register: {e}"))?;
    let user = d
        .register_client(
            Recorder::new(1, PciErsResult::None, &log),
            ClientKind::Untrusted,
        )
        .map_err(|e| format!("register: {e}"))?;
    let mut actors = vec![
        Actor::Dispatcher,
        Actor::Timer,
        Actor::Worker,
        Actor::Unload,
        Actor::User,
    ];
    if flags & 1 != 0 {
        actors.push(Actor::Pci);
    }
    if flags & 4 != 0 {
        actors.push(Actor::Unregister);
    }
    if flags & 8 != 0 {
        actors.push(Actor::SubnetManager);
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
        pci_token: None,
        user_state: 0,
        unreg: 0,
        sm: 0,
        unload: 0,
    };
    let mut done = vec![false; actors.len()];
    let service = |a: Actor| matches!(a, Actor::Dispatcher | Actor::Timer);
    let mut steps = 0usize;
    for &b in bytes.iter().take(STEP_BUDGET) {
        let live: Vec<usize> = (0..actors.len()).filter(|&i| !done[i]).collect();
        if live.is_empty() {
            break;
        }
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
            "actors did not finish: {stuck:?} (held job: {})",
            w.held.is_some()
        ));
    }
    let entries = oracle::snapshot(&w.log);
    oracle::check(&entries, true).map_err(|e| format!("{e}; log {entries:?}"))?;
    w.d.audit(true)
}
