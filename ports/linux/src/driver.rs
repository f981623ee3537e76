//! The driver: one `pnp-lifecycle` machine behind one mutex, plus the ib_client
//! registry, the PCI error-recovery entry points and the callback dispatcher.
//!
//! Every entry point locks, feeds the core, drains *all* its outputs into the port's own
//! queues, unlocks, and only then calls client callbacks. Callbacks go through one FIFO
//! with at most one dispatcher at a time, so each client sees its events in the core's
//! order and never two of its callbacks at once; after each callback the dispatcher feeds
//! `CallbackDone` (and the client's vote, detach or interface refresh).

use crate::clock::{Clock, MonotonicClock};
use crate::errno::{Errno, LinuxError};
use crate::sync::{self, thread, Arc, Condvar, Mutex, MutexGuard};
use pnp_lifecycle::*;
use std::collections::VecDeque;

/// Devices one driver can own.
pub const MAX_DEVICES: usize = 2;
/// Core client slots per device.
pub const MAX_CLIENTS: usize = 8;
/// Physical (IB) ports per device.
pub const MAX_PORTS: usize = 2;
const QUEUE: usize = queue_capacity(MAX_DEVICES, MAX_CLIENTS);

/// The core machine this port drives.
pub type Machine = Lifecycle<MAX_DEVICES, MAX_CLIENTS, MAX_PORTS, QUEUE>;

/// An `ib_register_client` registration (or an opened uverbs context): index plus
/// generation, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientId(pub u32);

/// Why a client's `remove` callback runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoveCause {
    /// The device goes away (`ib_unregister_device`, PCI remove, module unload);
    /// `surprise` for a hot unplug / `pci_channel_io_perm_failure`.
    DeviceRemoved {
        /// Whether the hardware vanished.
        surprise: bool,
    },
    /// The client itself called `ib_unregister_client`.
    ClientUnregistered,
}

/// An IB asynchronous event (`struct ib_event`) delivered to a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IbEvent {
    /// `IB_EVENT_PORT_ACTIVE`: the port reached ACTIVE.
    PortActive(PhysPort),
    /// `IB_EVENT_PORT_ERR`: the port left ACTIVE (now DOWN, INIT or ARMED).
    PortErr(PhysPort),
    /// `IB_EVENT_DEVICE_FATAL`: the device failed; only removal follows.
    DeviceFatal,
}

impl IbEvent {
    /// The Linux constant's name.
    pub fn linux_name(&self) -> &'static str {
        match self {
            IbEvent::PortActive(_) => "IB_EVENT_PORT_ACTIVE",
            IbEvent::PortErr(_) => "IB_EVENT_PORT_ERR",
            IbEvent::DeviceFatal => "IB_EVENT_DEVICE_FATAL",
        }
    }
}

/// `pci_channel_state_t`, the argument of `error_detected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PciChannelState {
    /// `pci_channel_io_normal`: the link still works; a reset is wanted.
    Normal,
    /// `pci_channel_io_frozen`: MMIO is blocked until a slot reset.
    Frozen,
    /// `pci_channel_io_perm_failure`: the device is dead (terminal: surprise removal).
    PermFailure,
}

/// `pci_ers_result_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PciErsResult {
    /// `PCI_ERS_RESULT_NONE`: from a client: "no vote yet, I answer later" (user space).
    None,
    /// `PCI_ERS_RESULT_CAN_RECOVER`: from a client: quiesced, go ahead.
    CanRecover,
    /// `PCI_ERS_RESULT_NEED_RESET`: quiesced, a reset is needed (a client's ack).
    NeedReset,
    /// `PCI_ERS_RESULT_DISCONNECT`: give up on the device (a client detaches from it).
    Disconnect,
    /// `PCI_ERS_RESULT_RECOVERED`: `slot_reset` succeeded.
    Recovered,
}

impl PciErsResult {
    /// The Linux constant's name.
    pub fn linux_name(&self) -> &'static str {
        match self {
            PciErsResult::None => "PCI_ERS_RESULT_NONE",
            PciErsResult::CanRecover => "PCI_ERS_RESULT_CAN_RECOVER",
            PciErsResult::NeedReset => "PCI_ERS_RESULT_NEED_RESET",
            PciErsResult::Disconnect => "PCI_ERS_RESULT_DISCONNECT",
            PciErsResult::Recovered => "PCI_ERS_RESULT_RECOVERED",
        }
    }
}

/// A client's callbacks (`struct ib_client` plus its event handler). They are never called
/// while the port holds its lock, and never two at once for one client; they must not call
/// the port's *blocking* entry points (those return `EDEADLK` from a callback).
pub trait IbClient: Send + Sync {
    /// `add(struct ib_device *)`: the client is attached to `dev`.
    fn add(&self, dev: DeviceId);
    /// `remove(struct ib_device *, void *)`: the client's last callback for `dev`.
    fn remove(&self, dev: DeviceId, cause: RemoveCause);
    /// `RESET` of a reset cycle, in the shape of `error_detected`: quiesce, then return the
    /// vote: `NeedReset` acks now (the core's `ResetExecute`), `CanRecover` acks now
    /// saying no reset is needed (the core's `CanRecover`; if every voter says so the
    /// cycle ends without a reset, except for a function reset ([`Driver::reset_prepare`]),
    /// which always resets), `None` acks later with [`Driver::reset_ack`] or
    /// [`Driver::recover_ack`], `Disconnect` detaches from `dev`.
    fn error_detected(&self, dev: DeviceId) -> PciErsResult {
        let _ = dev;
        PciErsResult::NeedReset
    }
    /// `RESET_END` (the `resume` of error recovery): the device is back at `epoch`. Also
    /// called, with the unchanged epoch, when a cycle ends without a reset (the core's
    /// `Event::Recovered`: every voter answered `CAN_RECOVER`).
    fn resume(&self, dev: DeviceId, epoch: Epoch) {
        let _ = (dev, epoch);
    }
    /// An asynchronous event (`ib_event_handler`).
    fn event(&self, dev: DeviceId, event: IbEvent) {
        let _ = (dev, event);
    }
    /// The context was revoked (uverbs disassociate): the last callback for `dev`; every
    /// later call on it fails with `EIO`.
    fn disassociate(&self, dev: DeviceId) {
        let _ = dev;
    }
    /// Not a callback: the port fenced the context on `dev` (revoked while a callback of
    /// it was in flight; that callback was cancelled before it ran, or returned, or — with
    /// `overran` — is still running past the fence's grace: it may finish, but its calls
    /// fail). No other callback for `dev` follows; every later call fails with `EIO`.
    /// Called under the port lock: must not block or call the port.
    fn disassociated(&self, dev: DeviceId, overran: bool) {
        let _ = (dev, overran);
    }
}

/// The driver's hardware hooks (called outside the lock).
pub trait Hardware: Send + Sync {
    /// Probe-time start (claim BARs, IRQs, bring up firmware).
    fn start(&self, dev: DeviceId) -> StartResult {
        let _ = dev;
        StartResult::Started
    }
    /// Re-initialise after the slot / function reset (in `slot_reset` / `reset_done`).
    fn reset(&self, dev: DeviceId) -> ResetResult {
        let _ = dev;
        ResetResult::Succeeded
    }
    /// `HardwareCommand::Shutdown` / `ReleaseResources` (fire and forget).
    fn command(&self, dev: DeviceId, command: HardwareCommand) {
        let _ = (dev, command);
    }
}

/// The default hardware: everything succeeds.
#[derive(Debug, Default)]
pub struct NullHardware;
impl Hardware for NullHardware {}

/// What `ib_query_port` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortAttr {
    /// The port's link state (set by the subnet manager).
    pub state: LinkState,
    /// How many counter queries the port answered (a stand-in for `ib_port_counters`).
    pub queries: u64,
}

struct ClientRec {
    id: ClientId,
    ops: Arc<dyn IbClient>,
    kind: ClientKind,
    live: bool,
    handles: [Option<ClientHandle>; MAX_DEVICES],
    epochs: [Epoch; MAX_DEVICES],
    added: [bool; MAX_DEVICES],
    revoked: [bool; MAX_DEVICES],
    pending: u32,
}

#[derive(Default, Clone, Copy)]
struct DevRec {
    probed: bool,
    ports: u8,
    reset_cmd: bool,
    reset_claimed: bool,
    /// A function reset ([`Driver::reset_prepare`]) runs: a `CAN_RECOVER` vote acks like
    /// `NEED_RESET` (the reset happens whatever the clients say).
    forced: bool,
    surprise: bool,
    queries: [u64; MAX_PORTS],
    /// The core failed the device (`Output::DeviceFailed`): the PCI error path answers
    /// `DISCONNECT` until the device is removed.
    failed: Option<FailureCause>,
}

/// Kernel log lines kept (the oldest are dropped first).
pub const KERNEL_LOG_LINES: usize = 64;

/// The text of a failure cause, as the port logs it.
pub fn failure_text(cause: FailureCause) -> &'static str {
    match cause {
        FailureCause::StartFailed => "the hardware start failed",
        FailureCause::ResetFailed => "the hardware reset failed",
        FailureCause::ClientMissedDeadline => "a trusted client missed its deadline",
        FailureCause::EpochExhausted => "the reset epoch counter is exhausted",
        // `FailureCause` is non-exhaustive: a cause of a newer core.
        _ => "an unknown cause",
    }
}

#[derive(Clone, Copy)]
enum Job {
    Notify {
        client: ClientId,
        handle: ClientHandle,
        event: Event,
    },
    Add {
        client: ClientId,
        dev: DeviceId,
    },
    Remove {
        client: ClientId,
        dev: DeviceId,
    },
    Hw {
        dev: DeviceId,
        command: HardwareCommand,
    },
}

struct Inner {
    m: Machine,
    /// The time every input carries, read under the lock as the input is fed.
    clock: std::sync::Arc<dyn Clock>,
    /// Handles the core asked the port to fence (uverbs disassociate); kept, since a
    /// handle is never reused.
    fenced: Vec<ClientHandle>,
    /// Fences carried out whose `FenceDone` is still to be fed.
    fence_done_owed: VecDeque<ClientHandle>,
    /// Fences waiting for a running callback to return, until a deadline.
    fence_waiting: Vec<(ClientHandle, Tick)>,
    /// The callback taken off the FIFO and not yet handed back, with its gate.
    taken: Option<(ClientHandle, std::sync::Arc<std::sync::atomic::AtomicU8>)>,
    /// How long a fence waits out a running callback.
    fence_grace: u64,
    /// Fences done while the callback still ran (grace passed).
    fence_overran: Vec<ClientHandle>,
    /// Granted hardware operations not yet reported finished, one entry per operation.
    ops_in_flight: Vec<(ClientId, ClientHandle)>,
    inline: bool,
    clients: Vec<ClientRec>,
    next_client: u32,
    devs: [DevRec; MAX_DEVICES],
    jobs: VecDeque<Job>,
    dispatching: bool,
    dispatcher: Option<thread::ThreadId>,
    /// Bumped when a dispatcher stuck in a fenced callback is abandoned.
    dispatch_gen: u64,
    /// Abandoned dispatchers still inside their callback: `remove` does not wait for
    /// them, `unload` does (the module's code still runs).
    abandoned: usize,
    next_token: u32,
    issued: Vec<RequestToken>,
    completed: Vec<(RequestToken, Status)>,
    cycles: Vec<(DeviceId, CycleOutcome)>,
    unload_requested: bool,
    unload_finished: bool,
    violations: Vec<String>,
    /// What the port printed (`dev_err`), newest last, at most [`KERNEL_LOG_LINES`].
    kernel_log: VecDeque<String>,
}

/// A callback taken off the dispatch FIFO, to be called outside the lock
/// ([`InFlight::call`]) and handed back with [`Driver::finish_job`].
pub struct InFlight {
    job: Job,
    /// 0 taken, 1 running, 2 cancelled by a fence before it ran.
    gate: std::sync::Arc<std::sync::atomic::AtomicU8>,
    ops: Option<Arc<dyn IbClient>>,
    vote: Option<PciErsResult>,
    called: bool,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("called", &self.called)
            .finish()
    }
}

impl InFlight {
    /// Whether [`call`](Self::call) ran.
    pub fn called(&self) -> bool {
        self.called
    }

    /// Run the callback (outside any port lock). Calling it twice runs it once.
    pub fn call(&mut self, hw: &dyn Hardware) {
        if self.called {
            return;
        }
        self.called = true;
        use std::sync::atomic::Ordering::SeqCst;
        if self.gate.compare_exchange(0, 1, SeqCst, SeqCst).is_err() {
            return; // fenced before it ran: never made
        }
        match (self.job, &self.ops) {
            (Job::Hw { dev, command }, _) => hw.command(dev, command),
            (Job::Add { dev, .. }, Some(ops)) => ops.add(dev),
            (Job::Remove { dev, .. }, Some(ops)) => {
                ops.remove(dev, RemoveCause::ClientUnregistered)
            }
            (Job::Notify { handle, event, .. }, Some(ops)) => {
                let dev = handle.device;
                match event {
                    Event::Reset => self.vote = Some(ops.error_detected(dev)),
                    // A cycle without a reset ends in `resume` too, at the same epoch.
                    Event::ResetEnd { epoch } | Event::Recovered { epoch } => {
                        ops.resume(dev, epoch)
                    }
                    Event::LinkChanged { port, state } => match state {
                        LinkState::Active => ops.event(dev, IbEvent::PortActive(port)),
                        _ => ops.event(dev, IbEvent::PortErr(port)),
                    },
                    Event::DeviceFatal => ops.event(dev, IbEvent::DeviceFatal),
                    Event::Removed { surprise } => {
                        ops.remove(dev, RemoveCause::DeviceRemoved { surprise })
                    }
                    Event::Revoked => ops.disassociate(dev),
                    // Not Linux events: clients are added to running devices only.
                    Event::DeviceStarted { .. } | Event::DeviceStopped => {}
                    // Power (issue 15): this port feeds no power input yet; the dev_pm_ops
                    // mapping comes with the port's part of issue 15.
                    Event::Suspending { .. } | Event::Resumed { .. } => {}
                }
            }
            _ => {}
        }
    }
}

/// One Linux RDMA driver module (a `pci_driver` + `ib_device` provider) over the core.
pub struct Driver {
    inner: Mutex<Inner>,
    cv: Condvar,
    timer_cv: Condvar,
    hw: Arc<dyn Hardware>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver").finish_non_exhaustive()
    }
}

fn err(e: Error) -> LinuxError {
    LinuxError::from(e)
}

fn dev_index(dev: DeviceId) -> Result<usize, LinuxError> {
    let i = usize::from(dev.0);
    if i < MAX_DEVICES {
        Ok(i)
    } else {
        Err(LinuxError::new(Errno::ENODEV))
    }
}

impl Inner {
    fn feed(&mut self, input: Input) -> Result<Reply, Error> {
        let now = self.clock.now();
        let r = self.m.handle(now, input);
        self.drain();
        r
    }

    /// uverbs disassociate: the context's later calls fail with `EIO`, a callback of its
    /// still queued is dropped, and the core is told the fence is done.
    fn fence(&mut self, handle: ClientHandle) {
        let d = usize::from(handle.device.0);
        if let Some(i) = self.client_of(handle) {
            let rec = &mut self.clients[i];
            rec.revoked[d] = true;
            rec.added[d] = false;
        }
        if !self.fenced.contains(&handle) {
            self.fenced.push(handle);
        }
        self.jobs
            .retain(|j| !matches!(j, Job::Notify { handle: h, .. } if *h == handle));
        // The port's own `add` / `remove` callbacks for this attachment are cut off too.
        if let Some(i) = self.client_of(handle) {
            let id = self.clients[i].id;
            let before = self.jobs.len();
            self.jobs.retain(|j| {
                !matches!(j, Job::Add { client, dev } | Job::Remove { client, dev }
                    if *client == id && *dev == handle.device)
            });
            let dropped = (before - self.jobs.len()) as u32;
            self.clients[i].pending -= dropped;
        }
        // A callback taken off the FIFO: cancel it if it has not started, else wait it
        // out (until it returns, or for `fence_grace` at most).
        // A hardware operation in flight is waited out the same way (until its end is
        // reported, or for `fence_grace`); the context's doorbells are unmapped after.
        use std::sync::atomic::Ordering::SeqCst;
        let running = self.taken.as_ref().is_some_and(|(h, gate)| {
            *h == handle && gate.compare_exchange(0, 2, SeqCst, SeqCst).is_err()
        });
        if running || self.op_in_flight(handle) {
            let deadline = self.clock.now().after(self.fence_grace);
            self.fence_waiting.push((handle, deadline));
        } else {
            self.fence_done_owed.push_back(handle);
        }
    }

    /// Fences whose grace passed: done, whether or not the callback returned (its late
    /// return is not reported; the context is disassociated).
    fn expire_fences(&mut self) {
        let now = self.clock.now();
        let mut i = 0;
        while i < self.fence_waiting.len() {
            if self.fence_waiting[i].1 <= now {
                let (h, _) = self.fence_waiting.remove(i);
                self.abandon_dispatcher_stuck_in(h);
                self.fence_overran.push(h);
                self.fence_done_owed.push_back(h);
            } else {
                i += 1;
            }
        }
    }

    /// The dispatcher hangs in a callback of `handle`, whose fence just overran its
    /// grace: the context is disassociated, so leave that thread to its callback and let
    /// another thread dispatch the rest of the FIFO (other clients' callbacks, hardware
    /// commands) and let `remove` / `unload` finish. The stuck thread, once its callback
    /// returns, reports nothing for it and stops dispatching (`dispatch_gen` moved on).
    fn abandon_dispatcher_stuck_in(&mut self, handle: ClientHandle) {
        if !self.inline || !self.dispatching {
            return;
        }
        if self.taken.as_ref().is_some_and(|(h, _)| *h == handle) {
            self.taken = None;
            self.dispatching = false;
            self.dispatcher = None;
            self.dispatch_gen += 1;
            self.abandoned += 1;
        }
    }

    /// The next deadline: the core's `poll_timeout`, or a fence's grace if earlier.
    fn next_deadline(&self) -> Option<Tick> {
        let fences = self.fence_waiting.iter().map(|(_, t)| *t).min();
        match (self.m.poll_timeout(), fences) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn op_in_flight(&self, handle: ClientHandle) -> bool {
        self.ops_in_flight.iter().any(|(_, h)| *h == handle)
    }

    /// A fence waiting for `handle` is done once neither its callback nor a hardware
    /// operation of it is in flight.
    fn release_fence(&mut self, handle: ClientHandle) {
        let busy =
            self.taken.as_ref().is_some_and(|(h, _)| *h == handle) || self.op_in_flight(handle);
        if busy {
            return;
        }
        if let Some(pos) = self.fence_waiting.iter().position(|(h, _)| *h == handle) {
            self.fence_waiting.remove(pos);
            self.fence_done_owed.push_back(handle);
            self.drain();
        }
    }

    /// A granted hardware operation ended: `AccessDone`, unless the context was fenced
    /// meanwhile (then it is not reported; a fence waiting for it is done).
    fn op_done(&mut self, handle: ClientHandle) -> Result<(), LinuxError> {
        let Some(pos) = self.ops_in_flight.iter().position(|(_, h)| *h == handle) else {
            return Err(LinuxError::from(Error::NoOperationInFlight));
        };
        self.ops_in_flight.swap_remove(pos);
        if self.fenced.contains(&handle) {
            self.release_fence(handle);
            return Ok(());
        }
        self.feed(Input::AccessDone { client: handle })
            .map(|_| ())
            .map_err(err)
    }

    /// `Access{HardwareOp}` for a context on `dev` at its interface's epoch; on success
    /// the operation is in flight until [`Self::op_done`].
    fn op_begin(&mut self, id: ClientId, dev: DeviceId) -> Result<ClientHandle, LinuxError> {
        let h = self.handle_for(id, dev)?;
        let d = dev_index(dev)?;
        let epoch = self
            .clients
            .iter()
            .find(|c| c.id == id)
            .map_or(Epoch(0), |c| c.epochs[d]);
        self.feed(Input::Access {
            client: h,
            epoch,
            what: Access::HardwareOp,
        })
        .map_err(err)?;
        self.ops_in_flight.push((id, h));
        Ok(h)
    }

    fn client_of(&self, handle: ClientHandle) -> Option<usize> {
        let d = usize::from(handle.device.0);
        self.clients
            .iter()
            .position(|c| c.handles.get(d).copied().flatten() == Some(handle))
    }

    fn rec(&mut self, id: ClientId) -> Option<&mut ClientRec> {
        self.clients.iter_mut().find(|c| c.id == id)
    }

    fn drain(&mut self) {
        loop {
            self.drain_outputs();
            self.expire_fences();
            let Some(client) = self.fence_done_owed.pop_front() else {
                return;
            };
            // The context is disassociated: tell its owner object (not a callback).
            let overran = match self.fence_overran.iter().position(|h| *h == client) {
                Some(pos) => {
                    self.fence_overran.swap_remove(pos);
                    true
                }
                None => false,
            };
            if let Some(i) = self.client_of(client) {
                self.clients[i].ops.disassociated(client.device, overran);
            }
            let now = self.clock.now();
            if let Err(e) = self.m.handle(now, Input::FenceDone { client }) {
                self.violations.push(format!("FenceDone refused: {e:?}"));
            }
        }
    }

    fn drain_outputs(&mut self) {
        while let Some(out) = self.m.poll_output() {
            if self.unload_finished {
                self.violations
                    .push(format!("I2: output {out:?} after UnloadMayFinish"));
            }
            match out {
                Output::Notify { client, event } => {
                    let d = usize::from(client.device.0);
                    match self.client_of(client) {
                        Some(i) => {
                            let rec = &mut self.clients[i];
                            if matches!(event, Event::Removed { .. } | Event::Revoked) {
                                rec.added[d] = false;
                            }
                            if event == Event::Revoked {
                                rec.revoked[d] = true;
                            }
                            self.jobs.push_back(Job::Notify {
                                client: rec.id,
                                handle: client,
                                event,
                            });
                        }
                        None => self
                            .violations
                            .push(format!("notify for unknown handle {client:?}")),
                    }
                }
                Output::Hardware { device, command } => {
                    let d = usize::from(device.0);
                    if let Some(dev) = self.devs.get_mut(d) {
                        match command {
                            HardwareCommand::Reset => {
                                if dev.surprise {
                                    self.violations
                                        .push("I3: reset commanded after surprise removal".into());
                                }
                                dev.reset_cmd = true;
                            }
                            // Power (issue 15): not fed by this port yet, never commanded.
                            HardwareCommand::Start
                            | HardwareCommand::PowerDown
                            | HardwareCommand::PowerUp => {}
                            HardwareCommand::Shutdown | HardwareCommand::ReleaseResources => {
                                if dev.surprise && command == HardwareCommand::Shutdown {
                                    self.violations
                                        .push("register access after surprise removal".into());
                                }
                                self.jobs.push_back(Job::Hw {
                                    dev: device,
                                    command,
                                });
                            }
                        }
                    }
                }
                Output::Complete { token, status, .. } => {
                    if !self.issued.contains(&token) {
                        self.violations
                            .push(format!("I5: completion of unknown {token:?}"));
                    }
                    if self.completed.iter().any(|(t, _)| *t == token) {
                        self.violations
                            .push(format!("I5: {token:?} completed twice"));
                    }
                    self.completed.push((token, status));
                }
                Output::ResetCycleFinished { device, outcome } => {
                    self.cycles.push((device, outcome));
                }
                Output::Fence { client } => self.fence(client),
                Output::ClientGone { client } => {
                    if let Some(i) = self.client_of(client) {
                        self.clients[i].handles[usize::from(client.device.0)] = None;
                        self.maybe_free(i);
                    }
                }
                Output::DeviceFailed { device, cause } => {
                    if let Some(dev) = self.devs.get_mut(usize::from(device.0)) {
                        dev.failed = Some(cause);
                    }
                    // dev_err(): the device is dead until removed; the PCI error path
                    // answers DISCONNECT from now on.
                    self.printk(format!(
                        "pnp-lifecycle {}: device failed: {} ({cause:?}); PCI error recovery \
                         answers DISCONNECT until removal",
                        device.0,
                        failure_text(cause)
                    ));
                }
                Output::DeviceRemoved { device } => {
                    if let Some(dev) = self.devs.get_mut(usize::from(device.0)) {
                        *dev = DevRec::default();
                    }
                }
                Output::UnloadMayFinish => self.unload_finished = true,
            }
        }
    }

    /// Append a kernel log line (`printk` / `dev_err`).
    fn printk(&mut self, line: String) {
        if self.kernel_log.len() == KERNEL_LOG_LINES {
            self.kernel_log.pop_front();
        }
        self.kernel_log.push_back(line);
    }

    fn maybe_free(&mut self, i: usize) {
        let c = &self.clients[i];
        if !c.live && c.pending == 0 && c.handles.iter().all(Option::is_none) {
            self.clients.remove(i);
        }
    }

    fn attach(&mut self, ci: usize, d: usize) {
        let dev = DeviceId(d as u8);
        let kind = self.clients[ci].kind;
        let now = self.clock.now();
        if let Ok((handle, epoch)) = self.m.register(now, dev, kind) {
            self.drain();
            let ports = self.devs[d].ports;
            if ports > 0 {
                let set = PortSet((1u16 << ports).wrapping_sub(1) as u8);
                // A mixed-protocol device: the client gets no port events (documented).
                let _ = self.feed(Input::Bind {
                    client: handle,
                    ports: set,
                });
            }
            let c = &mut self.clients[ci];
            c.handles[d] = Some(handle);
            c.epochs[d] = epoch;
            c.added[d] = true;
            c.revoked[d] = false;
            c.pending += 1;
            let id = c.id;
            self.jobs.push_back(Job::Add { client: id, dev });
        }
    }

    fn take(&mut self) -> Option<InFlight> {
        let job = self.jobs.pop_front()?;
        let ops = match job {
            Job::Notify { client, .. } | Job::Add { client, .. } | Job::Remove { client, .. } => {
                self.rec(client).map(|c| c.ops.clone())
            }
            Job::Hw { .. } => None,
        };
        let gate = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(0));
        if let Job::Notify { handle, .. } = job {
            self.taken = Some((handle, gate.clone()));
        }
        Some(InFlight {
            job,
            gate,
            ops,
            vote: None,
            called: false,
        })
    }

    fn finish(&mut self, f: InFlight) {
        if let Job::Notify { handle, .. } = f.job {
            if self.taken.as_ref().is_some_and(|(h, _)| *h == handle) {
                self.taken = None;
            }
            // The callback returned: a fence that waited for it is done (unless a
            // hardware operation of the context is still in flight).
            self.release_fence(handle);
        }
        match f.job {
            Job::Notify {
                client,
                handle,
                event,
            } => {
                let d = usize::from(handle.device.0);
                match (event, f.vote) {
                    (Event::Reset, Some(PciErsResult::CanRecover)) if !self.devs[d].forced => {
                        let _ = self.feed(Input::CanRecover { client: handle });
                    }
                    (
                        Event::Reset,
                        Some(
                            PciErsResult::NeedReset
                            | PciErsResult::CanRecover
                            | PciErsResult::Recovered,
                        ),
                    ) => {
                        let _ = self.feed(Input::ResetExecute { client: handle });
                    }
                    (Event::Reset, Some(PciErsResult::Disconnect)) => {
                        if let Some(c) = self.rec(client) {
                            c.added[d] = false;
                        }
                        let _ = self.feed(Input::Unregister { client: handle });
                    }
                    (Event::ResetEnd { .. }, _) => {
                        if let Ok(Reply::Interface(e)) =
                            self.feed(Input::AcquireInterface { client: handle })
                        {
                            if let Some(c) = self.rec(client) {
                                c.epochs[d] = e;
                            }
                        }
                    }
                    _ => {}
                }
                // A fenced context's callback is not reported: the fence ended the wait.
                if !self.fenced.contains(&handle) {
                    if let Err(e) = self.feed(Input::CallbackDone { client: handle }) {
                        self.violations.push(format!("CallbackDone refused: {e:?}"));
                    }
                }
                if matches!(event, Event::Removed { .. }) {
                    // Returning from remove() is the detach.
                    let _ = self.feed(Input::Unregister { client: handle });
                }
            }
            Job::Add { client, .. } | Job::Remove { client, .. } => {
                if let Some(i) = self.clients.iter().position(|c| c.id == client) {
                    self.clients[i].pending -= 1;
                    self.maybe_free(i);
                }
            }
            Job::Hw { .. } => {}
        }
    }

    fn new_token(&mut self) -> RequestToken {
        self.next_token += 1;
        let t = RequestToken(self.next_token);
        self.issued.push(t);
        t
    }

    fn status_of(&self, token: RequestToken) -> Option<Status> {
        self.completed
            .iter()
            .find(|(t, _)| *t == token)
            .map(|(_, s)| *s)
    }

    fn handle_for(&self, id: ClientId, dev: DeviceId) -> Result<ClientHandle, LinuxError> {
        let d = dev_index(dev)?;
        let c = self
            .clients
            .iter()
            .find(|c| c.id == id)
            .ok_or(LinuxError::new(Errno::ENOENT))?;
        if c.revoked[d] {
            return Err(LinuxError::from(Error::ClientRevoked));
        }
        c.handles[d].ok_or(LinuxError::new(Errno::ENODEV))
    }

    /// Whether the last cycle of device `d` that ended after `mark` (an index into
    /// `cycles`) ended without a reset, and the device runs with no reset pending.
    fn recovered_since(&self, d: usize, mark: usize) -> bool {
        let dev = DeviceId(d as u8);
        let last = self
            .cycles
            .get(mark..)
            .unwrap_or(&[])
            .iter()
            .rev()
            .find(|(x, _)| *x == dev);
        matches!(last, Some((_, CycleOutcome::Recovered(_))))
            && !self.devs[d].reset_cmd
            && self.m.phase(dev) == Some(PhaseKind::Running)
    }

    /// The PCI core went from `error_detected` straight to the end (a permanent failure,
    /// or `remove`) while the reset the core commanded was not yet claimed by a
    /// `slot_reset`: no `slot_reset` will run it, so report it as not done
    /// (`ResetDone{Failed}`); the core then tears down without touching the registers.
    fn abandon_unclaimed_reset(&mut self, d: usize) {
        if std::mem::take(&mut self.devs[d].reset_cmd) {
            let _ = self.feed(Input::ResetDone {
                device: DeviceId(d as u8),
                result: ResetResult::Failed,
            });
        }
    }

    fn slot_reset_poll(&mut self, d: usize) -> Option<PciErsResult> {
        let dev = &mut self.devs[d];
        if dev.failed.is_some() {
            return Some(PciErsResult::Disconnect);
        }
        if dev.reset_cmd {
            dev.reset_cmd = false;
            dev.reset_claimed = true;
            return Some(PciErsResult::NeedReset); // claimed: caller re-inits
        }
        match self.m.phase(DeviceId(d as u8)) {
            Some(PhaseKind::Quiescing | PhaseKind::Executing) => None,
            Some(PhaseKind::Running) => Some(PciErsResult::Recovered),
            _ => Some(PciErsResult::Disconnect),
        }
    }
}

impl Driver {
    /// A driver whose entry points dispatch callbacks themselves (threaded use).
    /// Its clock is a [`MonotonicClock`] (milliseconds since now).
    pub fn new(config: Config, hw: Arc<dyn Hardware>) -> Self {
        Self::with_clock(config, hw, std::sync::Arc::new(MonotonicClock::new()))
    }

    /// Like [`new`](Self::new), every input carrying `clock`'s time.
    pub fn with_clock(
        config: Config,
        hw: Arc<dyn Hardware>,
        clock: std::sync::Arc<dyn Clock>,
    ) -> Self {
        Self::build(config, hw, clock, true)
    }

    /// A driver for cooperative stepping: entry points never run callbacks; the owner
    /// steps the dispatcher with [`take_job`](Self::take_job) / [`finish_job`](Self::finish_job)
    /// and uses the non-blocking `begin_*` / `poll_*` entry points.
    pub fn new_cooperative(config: Config, hw: Arc<dyn Hardware>) -> Self {
        Self::cooperative_with_clock(config, hw, std::sync::Arc::new(MonotonicClock::new()))
    }

    /// Like [`new_cooperative`](Self::new_cooperative), every input carrying `clock`'s time.
    pub fn cooperative_with_clock(
        config: Config,
        hw: Arc<dyn Hardware>,
        clock: std::sync::Arc<dyn Clock>,
    ) -> Self {
        Self::build(config, hw, clock, false)
    }

    fn build(
        config: Config,
        hw: Arc<dyn Hardware>,
        clock: std::sync::Arc<dyn Clock>,
        inline: bool,
    ) -> Self {
        Driver {
            inner: Mutex::new(Inner {
                m: Machine::new(config),
                clock,
                fenced: Vec::new(),
                fence_done_owed: VecDeque::new(),
                fence_waiting: Vec::new(),
                taken: None,
                fence_grace: config.callback_timeout,
                fence_overran: Vec::new(),
                ops_in_flight: Vec::new(),
                inline,
                clients: Vec::new(),
                next_client: 0,
                devs: [DevRec::default(); MAX_DEVICES],
                jobs: VecDeque::new(),
                dispatching: false,
                dispatcher: None,
                dispatch_gen: 0,
                abandoned: 0,
                next_token: 0,
                issued: Vec::new(),
                completed: Vec::new(),
                cycles: Vec::new(),
                unload_requested: false,
                unload_finished: false,
                violations: Vec::new(),
                kernel_log: VecDeque::new(),
            }),
            cv: Condvar::new(),
            timer_cv: Condvar::new(),
            hw,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        sync::lock(&self.inner)
    }

    /// Lock, run `f`, deliver what it queued (unless another thread is dispatching; the
    /// lock is released around every callback), unlock, wake waiters.
    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut g = self.lock();
        let r = f(&mut g);
        let g = self.dispatch_locked(g);
        self.wake(&g);
        r
    }

    /// Wake the waiters; the timer thread only when it has something to do.
    fn wake(&self, g: &Inner) {
        self.cv.notify_all();
        if g.unload_finished || g.next_deadline().is_some() {
            self.timer_cv.notify_all();
        }
    }

    /// Become the dispatcher if there is none and run every queued callback, the lock
    /// released around each call.
    fn dispatch_locked<'a>(&'a self, mut g: MutexGuard<'a, Inner>) -> MutexGuard<'a, Inner> {
        if !g.inline || g.dispatching {
            return g;
        }
        g.dispatching = true;
        g.dispatcher = Some(thread::current().id());
        let gen = g.dispatch_gen;
        while let Some(mut f) = g.take() {
            drop(g);
            f.call(&*self.hw);
            g = self.lock();
            g.finish(f);
            self.wake(&g);
            if g.dispatch_gen != gen {
                // Abandoned while stuck in that callback: another thread dispatches now.
                g.abandoned -= 1;
                self.wake(&g);
                return g;
            }
        }
        g.dispatching = false;
        g.dispatcher = None;
        g
    }

    /// Block until `f` yields, helping to dispatch meanwhile. `EDEADLK` from a callback.
    fn wait_until<T>(&self, mut f: impl FnMut(&mut Inner) -> Option<T>) -> Result<T, LinuxError> {
        let mut g = self.lock();
        if g.dispatcher == Some(thread::current().id()) {
            return Err(LinuxError::new(Errno::EDEADLK));
        }
        loop {
            if let Some(t) = f(&mut g) {
                let g = self.dispatch_locked(g);
                self.wake(&g);
                return Ok(t);
            }
            if g.inline && !g.dispatching && !g.jobs.is_empty() {
                g = self.dispatch_locked(g);
                continue;
            }
            if !g.inline {
                return Err(LinuxError::new(Errno::EAGAIN));
            }
            g = sync::wait(&self.cv, g);
        }
    }

    // ---- devices: probe / remove -------------------------------------------------------

    /// PCI `probe` + `ib_register_device`: add, configure `ports`, start (calling
    /// [`Hardware::start`] outside the lock) and add every registered client. A failed
    /// start removes the device again and returns `EIO`.
    pub fn probe(&self, dev: DeviceId, ports: &[PortCaps]) -> Result<(), LinuxError> {
        let d = dev_index(dev)?;
        if ports.len() > MAX_PORTS {
            return Err(LinuxError::new(Errno::EINVAL));
        }
        let token = self.with(|g| -> Result<RequestToken, LinuxError> {
            g.feed(Input::AddDevice { device: dev }).map_err(err)?;
            for (i, caps) in ports.iter().enumerate() {
                let _ = g.feed(Input::ConfigurePort {
                    device: dev,
                    port: PhysPort(i as u8),
                    caps: *caps,
                });
            }
            g.devs[d].ports = ports.len() as u8;
            let t = g.new_token();
            g.feed(Input::Start {
                device: dev,
                token: t,
            })
            .map_err(err)?;
            Ok(t)
        })?;
        let result = self.hw.start(dev);
        let ok = self.with(|g| {
            let _ = g.feed(Input::StartDone {
                device: dev,
                result,
            });
            let ok = g.status_of(token) == Some(Status::Success)
                && g.m.phase(dev) == Some(PhaseKind::Running);
            if ok {
                g.devs[d].probed = true;
                for ci in 0..g.clients.len() {
                    if g.clients[ci].live {
                        g.attach(ci, d);
                    }
                }
            }
            ok
        });
        if ok {
            return Ok(());
        }
        let _ = self.remove(dev);
        Err(LinuxError::new(Errno::EIO))
    }

    /// Non-blocking half of [`remove`](Self::remove): feed `Remove`, return its token.
    pub fn begin_remove(&self, dev: DeviceId) -> Result<RequestToken, LinuxError> {
        let d = dev_index(dev)?;
        self.with(|g| {
            let t = g.new_token();
            match g.feed(Input::Remove {
                device: dev,
                token: t,
            }) {
                Ok(_) => {
                    g.devs[d].probed = false;
                    // Removal ends error recovery: a reset still waiting for its
                    // `slot_reset` will not run.
                    g.abandon_unclaimed_reset(d);
                    Ok(t)
                }
                Err(e) => {
                    g.issued.retain(|x| *x != t);
                    Err(err(e))
                }
            }
        })
    }

    /// Whether a request has completed (and no port job of the driver is left).
    pub fn poll_request(&self, token: RequestToken) -> Option<Status> {
        let g = self.lock();
        g.status_of(token)
            .filter(|_| g.jobs.is_empty() && !g.dispatching)
    }

    /// PCI `remove` / `ib_unregister_device`: every client's `remove` runs and returns,
    /// then the device is torn down. Blocks until then. `ENODEV` if it is already gone.
    pub fn remove(&self, dev: DeviceId) -> Result<(), LinuxError> {
        let t = self.begin_remove(dev)?;
        self.wait_until(|g| {
            g.status_of(t)
                .filter(|_| g.jobs.is_empty() && !g.dispatching)
        })
        .map(|_| ())
    }

    // ---- clients -----------------------------------------------------------------------

    /// `ib_register_client`: attach to every probed device (one `add` each, outside the
    /// lock). Kernel clients are [`ClientKind::Trusted`]; uverbs contexts
    /// [`ClientKind::Untrusted`]. `ENODEV` once module unload began.
    pub fn register_client(
        &self,
        ops: Arc<dyn IbClient>,
        kind: ClientKind,
    ) -> Result<ClientId, LinuxError> {
        self.with(|g| {
            if g.unload_requested {
                return Err(LinuxError::from(Error::Unloading));
            }
            g.next_client += 1;
            let id = ClientId(g.next_client);
            g.clients.push(ClientRec {
                id,
                ops,
                kind,
                live: true,
                handles: [None; MAX_DEVICES],
                epochs: [Epoch(0); MAX_DEVICES],
                added: [false; MAX_DEVICES],
                revoked: [false; MAX_DEVICES],
                pending: 0,
            });
            let ci = g.clients.len() - 1;
            for d in 0..MAX_DEVICES {
                if g.devs[d].probed {
                    g.attach(ci, d);
                }
            }
            Ok(id)
        })
    }

    /// Non-blocking half of [`unregister_client`](Self::unregister_client): detach from
    /// every device (queueing `remove` for each device it was added to).
    pub fn begin_unregister(&self, id: ClientId) -> Result<(), LinuxError> {
        self.with(|g| {
            let Some(ci) = g.clients.iter().position(|c| c.id == id) else {
                return Ok(()); // already gone: idempotent
            };
            if !g.clients[ci].live {
                return Ok(());
            }
            g.clients[ci].live = false;
            // Keep the record until the `remove` jobs are queued (feeding may free it).
            g.clients[ci].pending += 1;
            let handles = g.clients[ci].handles;
            for h in handles.into_iter().flatten() {
                let _ = g.feed(Input::Unregister { client: h });
            }
            // The core's outputs may have freed the record (or moved it).
            if let Some(ci) = g.clients.iter().position(|c| c.id == id) {
                for d in 0..MAX_DEVICES {
                    if g.clients[ci].added[d] {
                        g.clients[ci].added[d] = false;
                        g.clients[ci].pending += 1;
                        g.jobs.push_back(Job::Remove {
                            client: id,
                            dev: DeviceId(d as u8),
                        });
                    }
                }
                g.clients[ci].pending -= 1;
                g.maybe_free(ci);
            }
            Ok(())
        })
    }

    /// Whether a client's registration is over: no callback of it running or queued.
    pub fn client_gone(&self, id: ClientId) -> bool {
        let g = self.lock();
        #[cfg(feature = "planted-fault")]
        {
            // PLANTED FAULT: "gone" as soon as unregistration began.
            return !g.clients.iter().any(|c| c.id == id && c.live);
        }
        #[allow(unreachable_code)]
        !g.clients.iter().any(|c| c.id == id)
    }

    /// `ib_unregister_client`: returns only when no callback of the client is running and
    /// none will run. Idempotent (concurrent callers all wait). `EDEADLK` from a callback.
    pub fn unregister_client(&self, id: ClientId) -> Result<(), LinuxError> {
        self.begin_unregister(id)?;
        #[cfg(feature = "planted-fault")]
        {
            // PLANTED FAULT: return without waiting for the in-flight callback.
            return Ok(());
        }
        #[allow(unreachable_code)]
        self.wait_until(|g| (!g.clients.iter().any(|c| c.id == id)).then_some(()))
    }

    /// A deferred vote (`PCI_ERS_RESULT_NONE` earlier): the context has quiesced.
    /// `EIO` once revoked, `EINVAL` if it is not voting.
    pub fn reset_ack(&self, id: ClientId, dev: DeviceId) -> Result<(), LinuxError> {
        self.with(|g| {
            let h = g.handle_for(id, dev)?;
            g.feed(Input::ResetExecute { client: h })
                .map(|_| ())
                .map_err(err)
        })
    }

    /// A deferred `CAN_RECOVER` vote (`PCI_ERS_RESULT_NONE` earlier): the context has
    /// quiesced and needs no reset (during a function reset it acks like
    /// [`reset_ack`](Self::reset_ack)). `EIO` once revoked, `EINVAL` if it is not voting.
    pub fn recover_ack(&self, id: ClientId, dev: DeviceId) -> Result<(), LinuxError> {
        self.with(|g| {
            let h = g.handle_for(id, dev)?;
            let input = if g.devs[dev_index(dev)?].forced {
                Input::ResetExecute { client: h }
            } else {
                Input::CanRecover { client: h }
            };
            g.feed(input).map(|_| ()).map_err(err)
        })
    }

    /// `ib_query_port`: link state and counters; allowed with the port DOWN.
    pub fn query_port(
        &self,
        id: ClientId,
        dev: DeviceId,
        port: PhysPort,
    ) -> Result<PortAttr, LinuxError> {
        self.with(|g| {
            let h = g.handle_for(id, dev)?;
            let d = dev_index(dev)?;
            let epoch = g
                .clients
                .iter()
                .find(|c| c.id == id)
                .map_or(Epoch(0), |c| c.epochs[d]);
            g.feed(Input::Access {
                client: h,
                epoch,
                what: Access::QueryCounters(port),
            })
            .map_err(err)?;
            let q = g.devs[d]
                .queries
                .get_mut(usize::from(port.0))
                .ok_or(LinuxError::new(Errno::EINVAL))?;
            *q += 1;
            let queries = *q;
            Ok(PortAttr {
                state: g.m.link(dev, port).unwrap_or(LinkState::Down),
                queries,
            })
        })
    }

    /// A verb that touches the hardware (`ib_post_send`): `EAGAIN` during a reset
    /// cycle, `ESTALE` with an old interface, `EIO` once revoked, `EBUSY` with too many
    /// operations in flight. The post (write the WQE, ring the doorbell) runs under the
    /// port lock between the grant and its `AccessDone`, so it is never in flight when the
    /// call returns. For an operation that outlasts the call use
    /// [`begin_hw_op`](Self::begin_hw_op) / [`end_hw_op`](Self::end_hw_op).
    pub fn post(&self, id: ClientId, dev: DeviceId) -> Result<(), LinuxError> {
        self.with(|g| {
            let h = g.op_begin(id, dev)?;
            g.op_done(h)
        })
    }

    /// Begin a hardware operation that runs outside the port (a verb that sleeps on a
    /// firmware command): granted like [`post`](Self::post), then *in flight* until
    /// [`end_hw_op`](Self::end_hw_op): no stop, slot reset or removal teardown runs under
    /// it (they wait, up to the config's `operation_timeout`, then the context is revoked
    /// and fenced: disassociated, its doorbells unmapped).
    pub fn begin_hw_op(&self, id: ClientId, dev: DeviceId) -> Result<(), LinuxError> {
        self.with(|g| g.op_begin(id, dev).map(drop))
    }

    /// The operation begun with [`begin_hw_op`](Self::begin_hw_op) finished (`AccessDone`).
    /// A fenced context's late end is not reported to the core and returns `Ok`;
    /// `EINVAL` if none is in flight.
    pub fn end_hw_op(&self, id: ClientId, dev: DeviceId) -> Result<(), LinuxError> {
        self.with(|g| {
            // By the operations list, not the client record: a fenced context's record
            // may be gone already.
            let h = g
                .ops_in_flight
                .iter()
                .find(|(c, h)| *c == id && h.device == dev)
                .map(|(_, h)| *h)
                .ok_or(LinuxError::from(Error::NoOperationInFlight))?;
            g.op_done(h)
        })
    }

    /// The subnet manager moved a port (`IB_EVENT_PORT_ACTIVE` / `IB_EVENT_PORT_ERR`
    /// to the clients bound to it). Never changes the device state.
    pub fn set_port_state(
        &self,
        dev: DeviceId,
        port: PhysPort,
        state: LinkState,
    ) -> Result<(), LinuxError> {
        self.with(|g| {
            g.feed(Input::LinkChanged {
                device: dev,
                port,
                state,
            })
            .map(|_| ())
            .map_err(err)
        })
    }

    // ---- PCI error recovery --------------------------------------------------------------

    /// `err_handler->error_detected`. Normal / frozen: a reset request from the driver
    /// (`FatalError`): every client is told `RESET` (its `error_detected`) and the result
    /// is `NEED_RESET`, or `CAN_RECOVER` if the cycle already ended without a reset (every
    /// voter answered `CAN_RECOVER` before this returned: the clients' `resume` has run,
    /// the PCI core's [`mmio_enabled`](Self::mmio_enabled) and [`resume`](Self::resume)
    /// that follow have nothing left to do); `DISCONNECT` if the device cannot reset.
    /// With votes still outstanding it is `NEED_RESET`, and [`slot_reset`](Self::slot_reset)
    /// answers `RECOVERED` without a reset if the cycle then ends without one.
    /// Perm failure: surprise removal (terminal; the PCI core follows with
    /// [`remove`](Self::remove)), `DISCONNECT`.
    pub fn error_detected(&self, dev: DeviceId, state: PciChannelState) -> PciErsResult {
        let Ok(d) = dev_index(dev) else {
            return PciErsResult::Disconnect;
        };
        let mark = self.lock().cycles.len();
        let answer = self.with(|g| match state {
            // A failed device cannot reset: give up on it (the PCI core follows with
            // remove). Perm failure still tells the core the hardware vanished.
            PciChannelState::Normal | PciChannelState::Frozen if g.devs[d].failed.is_some() => {
                PciErsResult::Disconnect
            }
            PciChannelState::PermFailure => {
                if g.feed(Input::SurpriseRemoval { device: dev }).is_ok() {
                    g.devs[d].surprise = true;
                    g.devs[d].probed = false;
                }
                // Straight from `error_detected` to the end: no `slot_reset` follows.
                g.abandon_unclaimed_reset(d);
                PciErsResult::Disconnect
            }
            // Served by a cycle now, or by one once a pending start / stop / remove
            // settles: NEED_RESET (slot_reset waits for it). Folded into a removal, the
            // hardware not live, the device failed: DISCONNECT.
            _ => match g.feed(Input::FatalError { device: dev }) {
                Ok(Reply::Fatal(FatalAnswer::Served(_) | FatalAnswer::Deferred)) => {
                    PciErsResult::NeedReset
                }
                _ => PciErsResult::Disconnect,
            },
        });
        // The callbacks ran (unless another thread dispatches): did the votes end the
        // cycle without a reset?
        if answer == PciErsResult::NeedReset && self.lock().recovered_since(d, mark) {
            return PciErsResult::CanRecover;
        }
        answer
    }

    /// `err_handler->mmio_enabled`, after `error_detected` answered `CAN_RECOVER`:
    /// `RECOVERED` if the cycle ended without a reset, `NEED_RESET` if a reset is still
    /// to come (a cycle runs: the PCI core goes on with [`slot_reset`](Self::slot_reset)),
    /// `DISCONNECT` if the device is gone or failed. Never blocks.
    pub fn mmio_enabled(&self, dev: DeviceId) -> PciErsResult {
        let Ok(d) = dev_index(dev) else {
            return PciErsResult::Disconnect;
        };
        let g = self.lock();
        if g.devs[d].failed.is_some() {
            return PciErsResult::Disconnect;
        }
        if g.devs[d].reset_cmd {
            return PciErsResult::NeedReset;
        }
        match g.m.phase(dev) {
            Some(PhaseKind::Running) => PciErsResult::Recovered,
            Some(PhaseKind::Quiescing | PhaseKind::Executing) => PciErsResult::NeedReset,
            _ => PciErsResult::Disconnect,
        }
    }

    /// Non-blocking `slot_reset`: `None` while clients are still voting. On
    /// `Some(Recovered)` the hardware was re-initialised and [`resume`](Self::resume)
    /// must follow.
    pub fn poll_slot_reset(&self, dev: DeviceId) -> Option<PciErsResult> {
        let d = dev_index(dev).ok()?;
        let r = self.with(|g| g.slot_reset_poll(d))?;
        Some(self.after_claim(dev, r))
    }

    fn after_claim(&self, dev: DeviceId, r: PciErsResult) -> PciErsResult {
        if r != PciErsResult::NeedReset {
            return r;
        }
        match self.hw.reset(dev) {
            ResetResult::Succeeded => PciErsResult::Recovered,
            ResetResult::Failed => {
                self.with(|g| {
                    g.devs[usize::from(dev.0)].reset_claimed = false;
                    let _ = g.feed(Input::ResetDone {
                        device: dev,
                        result: ResetResult::Failed,
                    });
                });
                PciErsResult::Disconnect
            }
        }
    }

    /// `err_handler->slot_reset`: blocks until every voter acked, left or was revoked and
    /// the core commands the reset, then re-initialises ([`Hardware::reset`]):
    /// `RECOVERED`, or `DISCONNECT` if the cycle was aborted (removal, perm failure) or
    /// the re-init failed (the device goes to failed, clients get `DEVICE_FATAL`).
    pub fn slot_reset(&self, dev: DeviceId) -> PciErsResult {
        let Ok(d) = dev_index(dev) else {
            return PciErsResult::Disconnect;
        };
        match self.wait_until(|g| g.slot_reset_poll(d)) {
            Ok(r) => self.after_claim(dev, r),
            Err(_) => PciErsResult::Disconnect,
        }
    }

    /// `err_handler->resume`: report the reset done; clients get `RESET_END` (`resume`).
    /// After a cycle that ended without a reset there is nothing to report (the clients'
    /// `resume` ran when the last `CAN_RECOVER` vote came in).
    pub fn resume(&self, dev: DeviceId) {
        let Ok(d) = dev_index(dev) else { return };
        self.with(|g| {
            g.devs[d].forced = false;
            if std::mem::take(&mut g.devs[d].reset_claimed) {
                let _ = g.feed(Input::ResetDone {
                    device: dev,
                    result: ResetResult::Succeeded,
                });
            }
        });
    }

    /// `err_handler->reset_prepare` (function reset, FLR): quiesce. Requests a cycle
    /// (clients are told `RESET` and vote) and blocks until the core commands the reset
    /// (`Hardware{Reset}`), then returns: the PCI core performs the function reset next
    /// and calls [`reset_done`](Self::reset_done), which re-initialises. `ENODEV` if it
    /// cannot reset, `EDEADLK` from a callback. The function reset happens whatever the
    /// clients vote: a `CAN_RECOVER` vote acks like `NEED_RESET` until `reset_done`.
    pub fn reset_prepare(&self, dev: DeviceId) -> Result<(), LinuxError> {
        let d = dev_index(dev)?;
        self.lock().devs[d].forced = true;
        let r = if self.error_detected(dev, PciChannelState::Normal) != PciErsResult::NeedReset {
            Err(LinuxError::new(Errno::ENODEV))
        } else {
            // `NeedReset` from the poll: the commanded reset is claimed (no re-init yet).
            match self.wait_until(|g| g.slot_reset_poll(d)) {
                Ok(PciErsResult::NeedReset) => Ok(()),
                Ok(_) => Err(LinuxError::new(Errno::ENODEV)),
                Err(e) => Err(e),
            }
        };
        if r.is_err() {
            self.lock().devs[d].forced = false;
        }
        r
    }

    /// `err_handler->reset_done`: the function reset happened; re-initialise the
    /// hardware ([`Hardware::reset`], outside the lock) and report it (`ResetDone`), so
    /// clients get `RESET_END` (`resume`). A failed re-init fails the device. Nothing to
    /// do without a claimed reset (`reset_prepare` failed).
    pub fn reset_done(&self, dev: DeviceId) {
        let Ok(d) = dev_index(dev) else { return };
        let claimed = self.with(|g| {
            g.devs[d].forced = false;
            g.devs[d].reset_claimed
        });
        if !claimed {
            return;
        }
        let result = self.hw.reset(dev);
        self.with(|g| {
            if std::mem::take(&mut g.devs[d].reset_claimed) {
                let _ = g.feed(Input::ResetDone {
                    device: dev,
                    result,
                });
            }
        });
    }

    // ---- time and unload -----------------------------------------------------------------

    /// The timer fired: feed `Input::Timeout` at the clock's `now` (due once the clock
    /// reaches [`next_timeout`](Self::next_timeout); early is harmless).
    pub fn timeout(&self) -> Result<(), LinuxError> {
        self.with(|g| g.feed(Input::Timeout).map(|_| ()).map_err(err))
    }

    /// The port's clock.
    pub fn clock(&self) -> std::sync::Arc<dyn Clock> {
        self.lock().clock.clone()
    }

    /// When the core next needs [`timeout`](Self::timeout) (its `poll_timeout`).
    pub fn next_timeout(&self) -> Option<Tick> {
        self.lock().next_deadline()
    }

    /// How long a fence waits out a callback still running (default: the config's
    /// `callback_timeout`). After it the context is disassociated anyway.
    pub fn set_fence_grace(&self, ticks: u64) {
        self.lock().fence_grace = ticks;
    }

    /// Block until a deadline exists (`Some(deadline)`, the core's `poll_timeout`: call
    /// [`timeout`](Self::timeout) once the clock reaches it) or unload finished (`None`):
    /// the body of a timer thread.
    /// It waits on its own condition variable, woken only when a deadline exists or
    /// unload finished. (In a cooperative driver it returns `next_timeout` at once.)
    pub fn wait_tick_needed(&self) -> Option<Tick> {
        let mut g = self.lock();
        loop {
            if g.unload_finished {
                return None;
            }
            if let Some(t) = g.next_deadline() {
                return Some(t);
            }
            if !g.inline {
                return None;
            }
            g = sync::wait(&self.timer_cv, g);
        }
    }

    /// Non-blocking half of [`unload`](Self::unload): the fence.
    pub fn begin_unload(&self) -> Result<(), LinuxError> {
        self.with(|g| {
            g.feed(Input::Unload).map_err(err)?;
            g.unload_requested = true;
            for d in g.devs.iter_mut() {
                d.probed = false;
            }
            Ok(())
        })
    }

    /// Whether unload may finish (the core said so and no port job is left).
    pub fn unload_finished(&self) -> bool {
        let g = self.lock();
        g.unload_finished && g.jobs.is_empty() && !g.dispatching && g.abandoned == 0
    }

    /// `module_exit`: remove every device (clients get `remove`), block until the core
    /// emits `UnloadMayFinish` and every callback returned.
    pub fn unload(&self) -> Result<(), LinuxError> {
        self.begin_unload()?;
        self.wait_until(|g| {
            (g.unload_finished && g.jobs.is_empty() && !g.dispatching && g.abandoned == 0)
                .then_some(())
        })
    }

    // ---- cooperative stepping and audit ----------------------------------------------------

    /// Take the next callback off the FIFO (cooperative drivers only).
    pub fn take_job(&self) -> Option<InFlight> {
        let mut g = self.lock();
        if g.inline || g.dispatching {
            return None;
        }
        let f = g.take()?;
        g.dispatching = true;
        Some(f)
    }

    /// Hand a taken callback back: feed `CallbackDone` and its follow-ups.
    pub fn finish_job(&self, mut f: InFlight) {
        f.call(&*self.hw);
        let mut g = self.lock();
        g.finish(f);
        g.dispatching = false;
        self.wake(&g);
    }

    /// How many callbacks and hardware commands wait in the port's FIFO (a debugfs-style
    /// counter). Bounded: the core hands out at most one event per client at a time.
    pub fn backlog(&self) -> usize {
        self.lock().jobs.len()
    }

    /// The hardware hooks.
    pub fn hardware(&self) -> &dyn Hardware {
        &*self.hw
    }

    /// Why the core failed the device (`Output::DeviceFailed`), until it is removed. While
    /// it is set, `error_detected`, `mmio_enabled` and `slot_reset` answer `DISCONNECT`.
    pub fn failure(&self, dev: DeviceId) -> Option<FailureCause> {
        let d = dev_index(dev).ok()?;
        self.lock().devs[d].failed
    }

    /// The port's kernel log (`dmesg`), oldest first: at most [`KERNEL_LOG_LINES`] lines.
    pub fn kernel_log(&self) -> Vec<String> {
        self.lock().kernel_log.iter().cloned().collect()
    }

    /// How reset cycles ended, in order.
    pub fn cycles(&self) -> Vec<(DeviceId, CycleOutcome)> {
        self.lock().cycles.clone()
    }

    /// Check what the port saw of the core: I2 (nothing after `UnloadMayFinish`), I3 (no
    /// reset or register access after surprise removal), I5 (every accepted request
    /// completed exactly once, if `finished`), no lost output, no refused `CallbackDone`.
    pub fn audit(&self, finished: bool) -> Result<(), String> {
        let g = self.lock();
        if let Some(v) = g.violations.first() {
            return Err(v.clone());
        }
        if g.m.lost_outputs() != 0 {
            return Err("core lost outputs".into());
        }
        if finished {
            for t in &g.issued {
                if g.status_of(*t).is_none() {
                    return Err(format!("I5: {t:?} never completed"));
                }
            }
        }
        Ok(())
    }
}
