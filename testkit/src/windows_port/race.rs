//! The Windows port's cooperative schedule harness (the fuzz target `windows_unload_race`
//! and `tests/race_replay.rs` run it): the PnP manager sending `IRP_MN_REMOVE_DEVICE`, three
//! mlx4 clients (one asks for a reset; an untrusted one never answers RESET and its I/O
//! thread does hardware operations), the timer DPC (each step passes the next deadline),
//! two notification threads and `DriverUnload` run as thread-free actors over the runtime's
//! [`Owner`](pnp_lifecycle_runtime::Owner), through the port's own pieces ([`WindowsOs`],
//! [`feed_irp`], [`RemoveLockState`]). The first schedule byte holds remove and unload off
//! for up to 63 steps (its low six bits); its bit 6 adds the power manager, which sends
//! `IRP_MN_SET_POWER` D3 then D0 (bit 7: S3 then S0) through the power dispatch's steps;
//! each later byte picks which runnable actor takes its next step; when
//! the bytes run out the actors step round-robin. A notification
//! thread carries each work item out with `take` in one step and reports it with `finish`
//! in a later one.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use pnp_lifecycle::{
    Access, ClientHandle, ClientKind, ClientState, Config, Epoch, Event, Input, Reply, ResetResult,
    Tick,
};
use pnp_lifecycle_runtime::{ContextId, Done, StdKernel};
use pnp_lifecycle_windows::{
    feed_irp, Callback, DevicePowerState, Hal, Irp, PnpMinor, PowerState, RemoveLockState,
    SystemPowerState, WinOwner, WindowsOs,
};

use super::{Ids, Recorded, TestHal, DEV};
use crate::observed::{check, Log, Obs};

type TheOs = Recorded<WindowsOs<StdKernel>>;
type Inbox = Arc<Mutex<VecDeque<Event>>>;

const STEP_LIMIT: usize = 20_000;
/// Clients 0 and 1 are trusted and answer RESET; client 2 is untrusted, never answers and
/// runs the I/O thread: the timer revokes it, and the runtime fences it.
const CLIENTS: usize = 3;
const OPS: u32 = 3;
const NOW: Tick = Tick(0);
/// Notification threads (the runtime's dispatchers; its lanes let two carry work at once).
const DISPATCHERS: usize = 2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pnp {
    Send,
    WaitComplete,
    Done,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Request,
    Run,
    WaitGone,
    Done,
}

struct Client {
    id: u32,
    handle: ClientHandle,
    inbox: Inbox,
    step: Step,
}

struct World {
    owner: WinOwner<TheOs>,
    os: TheOs,
    log: Log,
    lock: RemoveLockState,
    irps: Vec<Arc<Irp<StdKernel>>>,
    pnp: Pnp,
    unload: Option<bool>,
    carrying: [Option<Done>; DISPATCHERS],
    now: Tick,
    io: Option<bool>,
    ops_done: u32,
    epoch: Epoch,
    clients: Vec<Client>,
    /// The PnP manager's `IRP_MN_REMOVE_DEVICE`, once sent.
    remove: Option<Arc<Irp<StdKernel>>>,
    /// The power manager's IRPs still to send, and the one it waits for.
    power: VecDeque<PnpMinor>,
    power_irp: Option<Arc<Irp<StdKernel>>>,
    /// How often the I/O thread asked again after `AccessWaitsForPowerUp`.
    io_waits: u32,
}

const ACTORS: usize = 3 + CLIENTS + DISPATCHERS;
/// The power manager (if the first byte asks for it).
const POWER: usize = ACTORS;
/// The timer DPC: runnable while a deadline is set; its step makes the next one pass.
const TIMER: usize = ACTORS + 1;

fn kind(client: usize) -> ClientKind {
    if client + 1 == CLIENTS {
        ClientKind::Untrusted
    } else {
        ClientKind::Trusted
    }
}

use pnp_lifecycle_runtime::carry_out;

impl World {
    fn setup() -> Result<World, String> {
        let (log, ids) = (Log::new(), Ids::default());
        let hal: Arc<dyn Hal> = Arc::new(TestHal::new(
            log.clone(),
            ids.clone(),
            0,
            ResetResult::Succeeded,
        ));
        let mut w = World {
            owner: WinOwner::new(Config::DEFAULT),
            os: Recorded::new(WindowsOs::new(hal), log.clone(), ids.clone()),
            log,
            lock: RemoveLockState::new(),
            irps: Vec::new(),
            pnp: Pnp::Send,
            unload: None,
            carrying: [None; DISPATCHERS],
            now: NOW,
            io: None,
            ops_done: 0,
            epoch: Epoch(0),
            clients: Vec::new(),
            remove: None,
            power: VecDeque::new(),
            power_irp: None,
            io_waits: 0,
        };
        let e = |e| format!("setup: {e:?}");
        w.owner
            .feed(NOW, Input::AddDevice { device: DEV })
            .map_err(e)?;
        let start = w.send(PnpMinor::StartDevice);
        feed_irp(&mut w.owner, NOW, start);
        while let Some(work) = w.owner.take(ContextId(1)) {
            let done = carry_out(&w.os, work);
            w.owner.finish(NOW, ContextId(1), done);
        }
        w.observe_completions();
        for i in 0..CLIENTS {
            let inbox: Inbox = Arc::default();
            let queue = Arc::clone(&inbox);
            let callback: Callback = Arc::new(move |event| {
                queue
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_back(event);
            });
            let (handle, epoch) = w.owner.register(NOW, DEV, kind(i), callback).map_err(e)?;
            w.epoch = epoch;
            let step = if i == 0 { Step::Request } else { Step::Run };
            w.clients.push(Client {
                id: ids.of(handle),
                handle,
                inbox,
                step,
            });
        }
        Ok(w)
    }

    /// A new IRP, logged as sent.
    fn send(&mut self, minor: PnpMinor) -> Arc<Irp<StdKernel>> {
        let id = self.irps.len() as u32;
        let irp = Irp::new(DEV, minor, id);
        self.irps.push(Arc::clone(&irp));
        self.log.push(Obs::RequestSent { id });
        irp
    }

    /// Log the IRPs completed since last time (the PnP manager's completion routines).
    fn observe_completions(&mut self) {
        let seen = self
            .log
            .snapshot()
            .iter()
            .filter(|o| matches!(o, Obs::RequestCompleted { .. }))
            .count();
        for (id, irp) in self.irps.iter().enumerate().skip(seen) {
            let Some(status) = irp.status() else { return };
            self.log.push(Obs::RequestCompleted {
                id: id as u32,
                success: status.is_success(),
            });
        }
    }

    /// A client call under the remove lock (held only for the call).
    fn locked(&mut self, input: Input) -> bool {
        if self.lock.acquire().is_err() {
            return false;
        }
        let taken = self.owner.feed(self.now, input).is_ok();
        self.lock.release();
        taken
    }

    /// Whether the core revoked the client or freed its slot.
    fn cut_off(&self, client: ClientHandle) -> bool {
        self.owner
            .machine()
            .client(client)
            .is_none_or(|v| v.state == ClientState::Revoked)
    }

    fn finished(&self, actor: usize) -> bool {
        match actor {
            POWER => self.power.is_empty() && self.power_irp.is_none(),
            0 => self.pnp == Pnp::Done,
            1 => self.unload == Some(true),
            2 => self.io == Some(false),
            n if n < 3 + CLIENTS => self.clients.get(n - 3).is_none_or(|c| c.step == Step::Done),
            n => self.owner.unload_complete() && self.carrying[n - 3 - CLIENTS].is_none(),
        }
    }

    fn runnable(&self, actor: usize) -> bool {
        if self.finished(actor) {
            return false;
        }
        match actor {
            0 => match self.pnp {
                Pnp::Send => true,
                Pnp::WaitComplete => self.remove.as_ref().is_some_and(|i| i.status().is_some()),
                Pnp::Done => false,
            },
            1 => self.unload.is_none() || self.owner.unload_complete(),
            2 => true,
            POWER => self.power_irp.as_ref().is_none_or(|i| i.status().is_some()),
            n if n >= 3 + CLIENTS => {
                self.carrying[n - 3 - CLIENTS].is_some() || self.owner.work_ready()
            }
            n => match self.clients.get(n - 3) {
                Some(c) => match c.step {
                    Step::Request => true,
                    Step::Run => {
                        self.cut_off(c.handle)
                            || !c
                                .inbox
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .is_empty()
                    }
                    Step::WaitGone => self.owner.machine().client(c.handle).is_none(),
                    Step::Done => false,
                },
                None => false,
            },
        }
    }

    fn step(&mut self, actor: usize) {
        match actor {
            TIMER => {
                if let Some(deadline) = self.owner.poll_timeout() {
                    self.now = self.now.max(deadline);
                }
                let _ = self.owner.timeout(self.now);
            }
            0 => self.step_pnp(),
            POWER => self.step_power(),
            1 => match self.unload {
                None => {
                    self.unload = Some(false);
                    let _ = self.owner.feed(self.now, Input::Unload);
                }
                Some(_) => {
                    self.unload = Some(true);
                    self.log.push(Obs::UnloadReturned);
                }
            },
            2 => self.step_io(),
            n if n < 3 + CLIENTS => self.step_client(n - 3),
            n => {
                let d = n - 3 - CLIENTS;
                let context = ContextId(d as u64 + 1);
                match self.carrying[d].take() {
                    Some(done) => self.owner.finish(self.now, context, done),
                    None => {
                        if let Some(work) = self.owner.take(context) {
                            self.carrying[d] = Some(carry_out(&self.os, work));
                        }
                    }
                }
                self.observe_completions();
            }
        }
    }

    fn step_pnp(&mut self) {
        match self.pnp {
            Pnp::Send => {
                let irp = self.send(PnpMinor::RemoveDevice);
                self.remove = Some(Arc::clone(&irp));
                // As the dispatch: IoAcquireRemoveLock, mark it removed, and feed the core
                // at once (its drain, deadline and fence end what is in flight).
                match self.lock.acquire() {
                    Ok(()) => {
                        self.lock.release_for_remove();
                        feed_irp(&mut self.owner, self.now, irp);
                    }
                    Err(status) => irp.complete(status),
                }
                self.pnp = Pnp::WaitComplete;
            }
            Pnp::WaitComplete => {
                self.observe_completions();
                self.pnp = Pnp::Done;
            }
            Pnp::Done => {}
        }
    }

    /// The power manager: each `IRP_MN_SET_POWER` under the remove lock (the power
    /// dispatch), then wait for its completion.
    fn step_power(&mut self) {
        if self.power_irp.take().is_some() {
            self.observe_completions();
            return;
        }
        if self.unload.is_some() {
            // The power manager sends nothing to a driver being unloaded.
            self.power.clear();
            return;
        }
        let Some(minor) = self.power.pop_front() else {
            return;
        };
        let irp = self.send(minor);
        match self.lock.acquire() {
            Ok(()) => {
                feed_irp(&mut self.owner, self.now, Arc::clone(&irp));
                self.lock.release();
            }
            Err(status) => irp.complete(status),
        }
        self.power_irp = Some(irp);
    }

    /// Client 0's I/O thread: up to `OPS` hardware operations, each under the remove lock
    /// and the core's grant, begun in one step and ended in a later one.
    fn step_io(&mut self) {
        let Some(c) = self.clients.last() else {
            self.io = Some(false);
            return;
        };
        let (id, handle) = (c.id, c.handle);
        if self.io == Some(true) {
            self.log.push(Obs::OperationEnd {
                client: id,
                device: DEV,
            });
            let _ = self.owner.operation_done(self.now, handle);
            self.lock.release();
            self.io = None;
            return;
        }
        // As `MlxInterface::hardware_op`: in an idle Dx the access is not granted but
        // brings the device back; it is asked again in a later step (up to a bound: its
        // deadline).
        let access = Input::Access {
            client: handle,
            epoch: self.epoch,
            what: Access::HardwareOp,
        };
        let reply = (self.ops_done < OPS && self.lock.acquire().is_ok())
            .then(|| self.owner.feed(self.now, access));
        let granted = matches!(reply, Some(Ok(Reply::AccessGranted)));
        if reply.is_some() && !granted {
            self.lock.release();
        }
        if matches!(reply, Some(Ok(Reply::AccessWaitsForPowerUp))) && self.io_waits < OPS * 16 {
            self.io_waits += 1;
            return;
        }
        if granted {
            self.ops_done += 1;
            self.log.push(Obs::OperationBegin {
                client: id,
                device: DEV,
            });
            self.io = Some(true);
        } else {
            self.io = Some(false);
        }
    }

    fn step_client(&mut self, i: usize) {
        let Some(c) = self.clients.get_mut(i) else {
            return;
        };
        let (id, handle) = (c.id, c.handle);
        match c.step {
            Step::Request => {
                c.step = Step::Run;
                self.locked(Input::ResetRequest { client: handle });
            }
            Step::Run => {
                let event = c
                    .inbox
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .pop_front();
                match event {
                    Some(Event::Reset) if kind(i) == ClientKind::Trusted => {
                        self.log.push(Obs::AnswerTried {
                            client: id,
                            device: DEV,
                        });
                        let accepted = self.locked(Input::ResetExecute { client: handle });
                        self.log.push(Obs::AnswerResult {
                            client: id,
                            accepted,
                        });
                    }
                    Some(Event::ResetEnd { .. }) => {
                        self.locked(Input::AcquireInterface { client: handle });
                    }
                    // Revoked with its Revoked callback cancelled by the fence, or freed
                    // with its device: its calls fail, so it leaves.
                    None | Some(Event::Removed { .. } | Event::Revoked) => {
                        c.step = Step::WaitGone;
                        self.log.push(Obs::DetachBegin { client: id });
                        let _ = self
                            .owner
                            .feed(self.now, Input::Unregister { client: handle });
                    }
                    _ => {}
                }
            }
            Step::WaitGone => {
                c.step = Step::Done;
                self.log.push(Obs::DetachReturned { client: id });
            }
            Step::Done => {}
        }
    }

    fn verdict(&self, finished: bool) -> Result<(), String> {
        let log = self.log.snapshot();
        check(&log, finished)?;
        if let Some(irp) = self.irps.iter().find(|i| i.completions() > 1) {
            return Err(format!("{irp:?} completed {} times", irp.completions()));
        }
        match self.owner.anomalies() {
            0 => Ok(()),
            n => Err(format!("{n} runtime anomalies")),
        }
    }
}

/// Run one schedule. `Err` describes what the oracle caught, a deadlock (no actor can move
/// and some have not finished) or a run that did not finish within the step bound. Never
/// panics.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    observe(schedule).0
}

/// Like [`run`], with everything the run observed.
pub fn observe(schedule: &[u8]) -> (Result<(), String>, Vec<Obs>) {
    let mut w = match World::setup() {
        Ok(w) => w,
        Err(e) => return (Err(e), Vec::new()),
    };
    let result = drive(&mut w, schedule);
    (result, w.log.snapshot())
}

fn drive(w: &mut World, schedule: &[u8]) -> Result<(), String> {
    // The first byte holds remove and unload off for that many steps while others can move
    // (so reset cycles are reached too); the rest pick actors.
    let first = schedule.first().copied().unwrap_or(0);
    let hold_off = usize::from(first % 64);
    if first & 64 != 0 {
        let (down, up) = match first & 128 {
            0 => (
                PowerState::Device(DevicePowerState::D3),
                PowerState::Device(DevicePowerState::D0),
            ),
            _ => (
                PowerState::System(SystemPowerState::S3),
                PowerState::System(SystemPowerState::S0),
            ),
        };
        w.power
            .extend([PnpMinor::SetPower(down), PnpMinor::SetPower(up)]);
    }
    let mut bytes = schedule.iter().skip(1);
    let mut rr = 0usize;
    for step in 0..STEP_LIMIT {
        let mut runnable: Vec<usize> = (0..=POWER).filter(|&a| w.runnable(a)).collect();
        if w.owner.poll_timeout().is_some() {
            runnable.push(TIMER);
        }
        if step < hold_off && runnable.iter().any(|&a| a > 1) {
            runnable.retain(|&a| a > 1);
        }
        if runnable.is_empty() {
            if let Some(a) = (0..=POWER).find(|&a| !w.finished(a)) {
                w.verdict(false)?;
                return Err(format!("deadlock: actor {a} cannot finish"));
            }
            return w.verdict(true);
        }
        let pick = match bytes.next() {
            Some(&b) => usize::from(b),
            None => {
                rr = rr.wrapping_add(1);
                rr
            }
        };
        w.step(runnable[pick % runnable.len()]);
    }
    w.verdict(false)?;
    Err("not finished within the step bound".into())
}
