//! A deterministic schedule harness for fuzzing (feature `race`): the PnP manager, two
//! clients, the notification thread, the reset worker and driver unload run as
//! cooperative actors over [`PortCore`] (no real threads). Each schedule byte picks which
//! runnable actor takes its next step; when the bytes run out the actors are stepped
//! round-robin. The run is checked with [`crate::oracle::check`] (I1-I5 on what the
//! clients received) and every actor must finish.

use std::collections::VecDeque;

use pnp_lifecycle::{ClientHandle, ClientKind, Config, DeviceId, Event, ResetResult, StartResult};

use crate::oracle::{check, Observation};
use crate::port::{PnpMinor, PortCore, Work};

const DEV: DeviceId = DeviceId(0);
const STEP_LIMIT: usize = 20_000;
const CLIENT_COUNT: usize = 2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pnp {
    SendRemove,
    RemoveWaitIdle,
    WaitComplete,
    Done,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientStep {
    Request,
    Run,
    WaitGone,
    Done,
}

struct Client {
    handle: ClientHandle,
    inbox: VecDeque<Event>,
    step: ClientStep,
}

struct World {
    core: PortCore<usize, u32>,
    log: Vec<Observation>,
    pnp: Pnp,
    remove_token: u32,
    remove_done: bool,
    unload_sent: bool,
    notifier_in_callback: Option<ClientHandle>,
    worker_busy: bool,
    clients: Vec<Client>,
}

const ACTORS: usize = 4 + CLIENT_COUNT;

impl World {
    fn setup() -> Result<World, String> {
        // Simulated time standing at zero: deterministic, no deadline passes.
        let clock = std::sync::Arc::new(crate::ManualClock::new(pnp_lifecycle::Tick(0)));
        let mut core: PortCore<usize, u32> = PortCore::with_clock(Config::DEFAULT, clock);
        let e = |s: crate::NtStatus| format!("setup: {s}");
        core.add_device(DEV).map_err(e)?;
        core.pnp_enter(DEV, PnpMinor::StartDevice).map_err(e)?;
        core.pnp_feed(DEV, PnpMinor::StartDevice, 1);
        let mut log = vec![Observation::IrpDispatched { token: 1 }];
        while let Some(work) = core.fifo.pop_front() {
            match work {
                Work::HardwareStart(d) => core.start_done(d, StartResult::Started),
                Work::CompleteIrp { irp, status } => {
                    log.push(Observation::IrpCompleted { token: irp, status })
                }
                _ => {}
            }
        }
        let mut clients = Vec::new();
        for i in 0..CLIENT_COUNT {
            let (handle, _) = core.register(DEV, ClientKind::Trusted, i).map_err(e)?;
            clients.push(Client {
                handle,
                inbox: VecDeque::new(),
                step: if i == 0 {
                    ClientStep::Request
                } else {
                    ClientStep::Run
                },
            });
        }
        Ok(World {
            core,
            log,
            pnp: Pnp::SendRemove,
            remove_token: 2,
            remove_done: false,
            unload_sent: false,
            notifier_in_callback: None,
            worker_busy: false,
            clients,
        })
    }

    fn finished(&self, actor: usize) -> bool {
        let drained = self.core.unload_emitted() && self.core.fifo.is_empty();
        match actor {
            0 => self.pnp == Pnp::Done,
            1 => self.unload_sent && drained,
            2 => drained && self.notifier_in_callback.is_none(),
            3 => drained && self.core.reset_jobs.is_empty() && !self.worker_busy,
            n => self
                .clients
                .get(n - 4)
                .is_none_or(|c| c.step == ClientStep::Done),
        }
    }

    fn runnable(&self, actor: usize) -> bool {
        if self.finished(actor) {
            return false;
        }
        match actor {
            0 => match self.pnp {
                Pnp::SendRemove => true,
                Pnp::RemoveWaitIdle => self.core.lock_idle(DEV),
                Pnp::WaitComplete => self.remove_done,
                Pnp::Done => false,
            },
            1 => !self.unload_sent,
            2 => self.notifier_in_callback.is_some() || !self.core.fifo.is_empty(),
            3 => self.worker_busy || !self.core.reset_jobs.is_empty(),
            n => match self.clients.get(n - 4) {
                Some(c) => match c.step {
                    ClientStep::Request => true,
                    ClientStep::Run => !c.inbox.is_empty(),
                    ClientStep::WaitGone => !self.core.client_known(c.handle),
                    ClientStep::Done => false,
                },
                None => false,
            },
        }
    }

    fn step(&mut self, actor: usize) {
        match actor {
            0 => self.step_pnp(),
            1 => {
                self.unload_sent = true;
                let _ = self.core.unload();
            }
            2 => self.step_notifier(),
            3 => {
                if self.worker_busy {
                    self.worker_busy = false;
                    self.core.reset_done(DEV, ResetResult::Succeeded);
                } else if self.core.reset_jobs.pop_front().is_some() {
                    self.log.push(Observation::HardwareReset);
                    self.worker_busy = true;
                }
            }
            n => self.step_client(n - 4),
        }
    }

    fn step_pnp(&mut self) {
        let token = self.remove_token;
        match self.pnp {
            Pnp::SendRemove => {
                self.log.push(Observation::IrpDispatched { token });
                match self.core.pnp_enter(DEV, PnpMinor::RemoveDevice) {
                    Ok(()) => self.pnp = Pnp::RemoveWaitIdle,
                    Err(status) => {
                        self.core.fail_irp(token, status);
                        self.pnp = Pnp::WaitComplete;
                    }
                }
            }
            Pnp::RemoveWaitIdle => {
                self.core.pnp_feed(DEV, PnpMinor::RemoveDevice, token);
                self.pnp = Pnp::WaitComplete;
            }
            Pnp::WaitComplete => self.pnp = Pnp::Done,
            Pnp::Done => {}
        }
    }

    fn step_notifier(&mut self) {
        if let Some(client) = self.notifier_in_callback.take() {
            self.core.callback_done(client);
            return;
        }
        let Some(work) = self.core.fifo.pop_front() else {
            return;
        };
        match work {
            Work::Callback {
                client,
                event,
                callback,
            } => {
                if let Some(i) = callback {
                    self.log.push(Observation::Event { client: i, event });
                    if let Some(c) = self.clients.get_mut(i) {
                        c.inbox.push_back(event);
                    }
                }
                self.notifier_in_callback = Some(client);
            }
            Work::HardwareStart(d) => self.core.start_done(d, StartResult::Started),
            Work::CompleteIrp { irp, status } => {
                self.log
                    .push(Observation::IrpCompleted { token: irp, status });
                if irp == self.remove_token {
                    self.remove_done = true;
                }
            }
            Work::UnloadMayFinish => self.log.push(Observation::UnloadFinished),
            _ => {}
        }
    }

    fn step_client(&mut self, i: usize) {
        let Some(c) = self.clients.get_mut(i) else {
            return;
        };
        let handle = c.handle;
        match c.step {
            ClientStep::Request => {
                c.step = ClientStep::Run;
                let _ = self.core.reset_request(handle);
            }
            ClientStep::Run => match c.inbox.pop_front() {
                Some(Event::Reset) => {
                    self.log.push(Observation::ExecuteCalled { client: i });
                    let _ = self.core.reset_execute(handle);
                }
                Some(Event::ResetEnd { .. }) => {
                    let _ = self.core.acquire_interface(handle);
                }
                Some(Event::Removed { .. } | Event::Revoked) => {
                    c.step = ClientStep::WaitGone;
                    self.log.push(Observation::UnregisterCalled { client: i });
                    let _ = self.core.unregister(handle);
                }
                _ => {}
            },
            ClientStep::WaitGone => {
                c.step = ClientStep::Done;
                self.log.push(Observation::UnregisterReturned { client: i });
            }
            ClientStep::Done => {}
        }
    }
}

/// Run one schedule. `Err` describes an invariant violation, a deadlock (no actor can
/// move and some have not finished) or a run that did not finish within the step bound.
/// Never panics.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    let mut w = World::setup()?;
    let mut bytes = schedule.iter();
    let mut rr = 0usize;
    for _ in 0..STEP_LIMIT {
        let runnable: Vec<usize> = (0..ACTORS).filter(|&a| w.runnable(a)).collect();
        if runnable.is_empty() {
            if let Some(a) = (0..ACTORS).find(|&a| !w.finished(a)) {
                return Err(format!("deadlock: actor {a} cannot finish"));
            }
            check(&w.log, true)?;
            if w.core.anomalies() != 0 {
                return Err(format!("{} port anomalies", w.core.anomalies()));
            }
            return Ok(());
        }
        let pick = match bytes.next() {
            Some(&b) => usize::from(b),
            None => {
                rr = rr.wrapping_add(1);
                rr
            }
        };
        let actor = runnable.get(pick % runnable.len()).copied().unwrap_or(0);
        w.step(actor);
    }
    check(&w.log, false)?;
    Err("not finished within the step bound".into())
}
