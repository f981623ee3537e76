//! The driver: Linux entry points over the shared owner runtime. Each entry point feeds
//! the machine under the runtime's lock, then (with [`Dispatch::Inline`], as `ib_core`
//! calls its clients) carries out the callbacks it caused on the calling thread. Blocking
//! entry points carry out work while they wait, and return `EDEADLK` from a callback.

use std::sync::Arc;

use pnp_lifecycle::{
    queue_capacity, Access, ClientHandle, ClientKind, ClientState, ClientView, Config, DeviceId,
    DriverPhase, Epoch, FailureCause, FatalAnswer, Input, LinkState, PhaseKind, PhysPort, PortCaps,
    PortSet, Reply, ResetResult, Role, Status, Tick,
};
use pnp_lifecycle_runtime::{
    AtomicWord, ClientGate, Clock, Completion, Dispatch, Kernel, MonotonicClock, Operation, Os,
    Owner, Runtime, StdKernel,
};

use crate::errno::{Errno, LinuxError};
use crate::os::{
    Attachment, ClientId, Hardware, IbClient, Job, LinuxOs, PciChannelState, PciErsResult, Pending,
    PmOp, PortState, Registration, MAX_CLIENTS, MAX_DEVICES, MAX_PORTS,
};
const QUEUE: usize = queue_capacity(MAX_DEVICES, MAX_CLIENTS);

/// The owner state the driver keeps behind the runtime's lock.
pub type LinuxOwner<O = LinuxOs> = Owner<O, MAX_DEVICES, MAX_CLIENTS, MAX_PORTS, QUEUE>;
/// The runtime the driver runs on.
pub type LinuxRuntime<K = StdKernel, O = LinuxOs> =
    Runtime<O, K, MAX_DEVICES, MAX_CLIENTS, MAX_PORTS, QUEUE>;

/// What the driver runs on: [`LinuxOs`], or a wrapper around it (a test seam).
pub trait LinuxPort: Os<Callback = Arc<dyn IbClient>, Request = Pending, Job = Job> {
    /// The Linux vocabulary inside.
    fn linux(&self) -> &LinuxOs;
}

impl LinuxPort for LinuxOs {
    fn linux(&self) -> &LinuxOs {
        self
    }
}

/// What `ib_query_port` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortAttr {
    /// The port's link state (set by the subnet manager).
    pub state: LinkState,
}

/// A context's handle on one device for its verbs (what a uverbs call carries: the
/// `ib_ucontext`), from [`Driver::hw_context`]: the attachment, the interface's epoch and
/// the attachment's own fast-path gate. [`Driver::begin_verb`] / [`Driver::end_verb`]
/// through it take no lock other contexts' verbs take while the core keeps the gate
/// open. It names the interface of one epoch: after a reset (`resume`) the context asks
/// for a new one; the old one is refused `ESTALE`.
pub struct HwContext<W: AtomicWord = std::sync::atomic::AtomicU64> {
    id: ClientId,
    dev: DeviceId,
    handle: ClientHandle,
    epoch: Epoch,
    gate: ClientGate<W>,
}

impl<W: AtomicWord> Clone for HwContext<W> {
    fn clone(&self) -> Self {
        HwContext {
            gate: self.gate.clone(),
            ..*self
        }
    }
}

impl<W: AtomicWord> std::fmt::Debug for HwContext<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HwContext")
            .field("id", &self.id)
            .field("dev", &self.dev)
            .field("handle", &self.handle)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl<W: AtomicWord> HwContext<W> {
    /// The interface's epoch this context uses.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The attachment's handle in the machine.
    pub fn handle(&self) -> ClientHandle {
        self.handle
    }
}

/// A verb's hardware operation in flight ([`Driver::begin_verb`]); hand it to
/// [`Driver::end_verb`].
#[derive(Debug)]
#[must_use = "a verb's operation in flight must be ended (Driver::end_verb)"]
pub struct HwOp {
    /// Granted on the fast path, or (`None`) by the machine under the lock.
    fast: Option<Operation>,
}

impl HwOp {
    /// Whether it was granted on the fast path (no lock).
    pub fn on_fast_path(&self) -> bool {
        self.fast.is_some()
    }
}

/// One Linux RDMA driver module (a `pci_driver` and `ib_device` provider) over the core.
pub struct Driver<K: Kernel = StdKernel, O: LinuxPort = LinuxOs> {
    rt: Arc<LinuxRuntime<K, O>>,
}

impl<K: Kernel, O: LinuxPort> std::fmt::Debug for Driver<K, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (phase, backlog) = self
            .rt
            .inspect(|o| (o.machine().driver_phase(), o.backlog()));
        f.debug_struct("Driver")
            .field("driver_phase", &phase)
            .field("backlog", &backlog)
            .field("os", self.rt.os().linux())
            .finish()
    }
}

fn dev_index(dev: DeviceId) -> Result<usize, LinuxError> {
    let d = usize::from(dev.0);
    (d < MAX_DEVICES)
        .then_some(d)
        .ok_or(LinuxError::new(Errno::ENODEV))
}

/// Whether the device is probed (started) and not failed or going away: a registered
/// client is attached to it.
fn probed(p: Option<PhaseKind>) -> bool {
    use PhaseKind::*;
    matches!(
        p,
        Some(Running | Quiescing | Executing | PoweringDown | LowPower | PoweringUp)
    )
}

/// The device's runtime-PM usage count: the hardware calls in flight (each verb's
/// `pm_runtime_get_sync` … `pm_runtime_put` is a core operation).
fn usage_count<O: LinuxPort>(o: &LinuxOwner<O>, dev: DeviceId) -> u32 {
    // On either path: the machine's count and the client's open fast-path gate.
    let count = |(c, _): (ClientHandle, ClientView)| o.operations_in_flight(c);
    o.machine().clients(dev).map(count).sum()
}

/// Whether a client is a voter of the cycle that has not answered.
fn voting<O: LinuxPort>(o: &LinuxOwner<O>, h: ClientHandle) -> bool {
    let state = o.machine().client(h).map(|v| v.state);
    matches!(
        state,
        Some(ClientState::Active {
            role: Role::Voting,
            ..
        })
    )
}

/// Feed the `CAN_RECOVER` votes of device index `d` that `mmio_enabled` did not ask for.
fn feed_owed_votes<O: LinuxPort>(o: &mut LinuxOwner<O>, now: Tick, s: &mut PortState, d: usize) {
    for a in s.attachments(d) {
        if std::mem::take(&mut a.mmio_owed) && voting(o, a.handle) {
            let _ = o.feed(now, Input::CanRecover { client: a.handle });
        }
    }
}

/// Whether the device is in, or on its way to or from, a low-power state.
fn powered_down(p: Option<PhaseKind>) -> bool {
    matches!(
        p,
        Some(PhaseKind::PoweringDown | PhaseKind::LowPower | PhaseKind::PoweringUp)
    )
}

const EDEADLK: LinuxError = LinuxError::new(Errno::EDEADLK);

impl Driver {
    /// A driver on `std` threads and a [`MonotonicClock`] (milliseconds).
    pub fn new(config: Config, hw: Arc<dyn Hardware>) -> Self {
        Self::with_clock(config, hw, Arc::new(MonotonicClock::new()))
    }
}

impl<K: Kernel> Driver<K> {
    /// A driver whose inputs carry `clock`'s time; callers dispatch inline.
    pub fn with_clock(config: Config, hw: Arc<dyn Hardware>, clock: Arc<dyn Clock>) -> Self {
        Self::on(config, LinuxOs::new(hw), clock, Dispatch::Inline)
    }
}

impl<K: Kernel, O: LinuxPort> Driver<K, O> {
    /// A driver over `os` (tests wrap [`LinuxOs`]). With [`Dispatch::Thread`] and a kernel
    /// that starts no thread, nothing is carried out until someone takes the runtime's
    /// work by hand (a cooperative schedule harness; use the non-blocking halves then).
    pub fn on(config: Config, os: O, clock: Arc<dyn Clock>, dispatch: Dispatch) -> Self {
        Driver {
            rt: Runtime::new(config, os, clock, dispatch),
        }
    }

    /// The runtime (to inspect the machine, or to carry work out by hand).
    pub fn runtime(&self) -> &Arc<LinuxRuntime<K, O>> {
        &self.rt
    }

    /// The port's state on its own (the port lock, a leaf: see [`LinuxOs`]).
    fn port<R>(&self, f: impl FnOnce(&mut PortState) -> R) -> R {
        self.rt.os().linux().port(f)
    }

    /// Under the runtime's lock, with the port's state (the port lock inside the
    /// runtime's, never the other way round); then dispatch.
    fn with<R>(&self, f: impl FnOnce(&mut LinuxOwner<O>, Tick, &mut PortState) -> R) -> R {
        self.rt.with(|o, now| self.port(|s| f(o, now, s)))
    }

    /// Block until `f` yields, dispatching meanwhile; `EDEADLK` from a callback.
    fn wait<R>(
        &self,
        mut f: impl FnMut(&mut LinuxOwner<O>, Tick, &mut PortState) -> Option<R>,
    ) -> Result<R, LinuxError> {
        self.rt
            .wait_until(|o, now| self.port(|s| f(o, now, s)))
            .map_err(|_| EDEADLK)
    }

    /// Carry out (or hand to the dispatcher) the work ready, as every call does after
    /// feeding; for a wait whose condition fed inputs.
    fn carry_out(&self) {
        self.rt.with(|_, _| ());
    }

    fn refuse_in_callback(&self) -> Result<(), LinuxError> {
        if self.rt.in_dispatch() {
            return Err(EDEADLK);
        }
        Ok(())
    }

    // ---- devices: probe / remove ---------------------------------------------------

    /// Non-blocking half of [`probe`](Self::probe): add the device, configure `ports`,
    /// request the start. Finish with [`end_probe`](Self::end_probe).
    pub fn begin_probe(&self, dev: DeviceId, ports: &[PortCaps]) -> Result<Pending, LinuxError> {
        let d = dev_index(dev)?;
        if ports.len() > MAX_PORTS {
            return Err(LinuxError::new(Errno::EINVAL));
        }
        self.with(|o, now, s| {
            o.feed(now, Input::AddDevice { device: dev })?;
            for (i, caps) in ports.iter().enumerate() {
                let port = PhysPort(i as u8);
                let _ = o.feed(
                    now,
                    Input::ConfigurePort {
                        device: dev,
                        port,
                        caps: *caps,
                    },
                );
            }
            s.devs[d] = Default::default();
            s.devs[d].ports = ports.len() as u8;
            let pending = Pending::default();
            o.submit(now, pending.clone(), |token| Input::Start {
                device: dev,
                token,
            })?;
            Ok(pending)
        })
    }

    /// The start of [`begin_probe`](Self::begin_probe) completed: `None` while it has
    /// not; on success every registered client is attached (its `add` follows). `EIO`:
    /// the start failed (the PCI core removes the device).
    pub fn end_probe(&self, dev: DeviceId, start: &Pending) -> Option<Result<(), LinuxError>> {
        let done = start.completion()?;
        let ok = done == Completion::Done(Status::Success)
            && self.with(|o, now, s| {
                for i in 0..s.clients.len() {
                    attach(o, now, s, i, dev);
                }
                o.machine().phase(dev) == Some(PhaseKind::Running)
            });
        Some(ok.then_some(()).ok_or(LinuxError::new(Errno::EIO)))
    }

    /// PCI `probe` + `ib_register_device`: add, start ([`Hardware::start`], outside the
    /// lock) and attach every registered client. A failed start removes the device
    /// again: `EIO`.
    pub fn probe(&self, dev: DeviceId, ports: &[PortCaps]) -> Result<(), LinuxError> {
        self.refuse_in_callback()?;
        let start = self.begin_probe(dev, ports)?;
        self.wait(|_, _, _| start.completion())?;
        match self.end_probe(dev, &start) {
            Some(Ok(())) => Ok(()),
            _ => {
                let _ = self.remove(dev);
                Err(LinuxError::new(Errno::EIO))
            }
        }
    }

    /// Non-blocking half of [`remove`](Self::remove): request the removal. It ends error
    /// recovery: a reset no `slot_reset` claimed will not run (reported failed: the
    /// teardown touches no register), one claimed and never resumed was done.
    pub fn begin_remove(&self, dev: DeviceId) -> Result<Pending, LinuxError> {
        dev_index(dev)?;
        self.with(|o, now, s| {
            let pending = Pending::default();
            o.submit(now, pending.clone(), |token| Input::Remove {
                device: dev,
                token,
            })?;
            end_claimed(o, now, s, dev);
            Ok(pending)
        })
    }

    /// PCI `remove` / `ib_unregister_device`: blocks until every client's `remove` ran
    /// and returned (or its context was fenced) and the device is torn down. Refused
    /// (`ENODEV`, ...) while module unload removes the device: that answer waits until
    /// unload's teardown is over.
    pub fn remove(&self, dev: DeviceId) -> Result<(), LinuxError> {
        self.refuse_in_callback()?;
        let refused = match self.begin_remove(dev) {
            Ok(pending) => match self.wait(|_, _, _| pending.completion())? {
                Completion::Done(_) => return Ok(()),
                Completion::Refused(e) => e.into(),
            },
            Err(e) => e,
        };
        // Module unload removes the device itself (Linux never calls `.remove` during
        // `pci_unregister_driver`'s unbind): a remove refused meanwhile answers only once
        // that teardown is over, so no driver code runs for the device after it returns.
        self.wait(|o, _, _| {
            let unloading = o.machine().driver_phase() != DriverPhase::Loaded;
            let over = o.unload_complete() && o.abandoned() == 0;
            (!unloading || over).then_some(())
        })?;
        Err(refused)
    }

    // ---- clients ---------------------------------------------------------------------

    /// `ib_register_client`: attach to every probed device, whatever its power state
    /// (one `add` each, before any other callback for it). Kernel clients are [`ClientKind::Trusted`], uverbs
    /// contexts [`ClientKind::Untrusted`]. `ENODEV` once module unload began.
    pub fn register_client(
        &self,
        ops: Arc<dyn IbClient>,
        kind: ClientKind,
    ) -> Result<ClientId, LinuxError> {
        self.with(|o, now, s| {
            if o.machine().driver_phase() != DriverPhase::Loaded {
                return Err(LinuxError::new(Errno::ENODEV));
            }
            s.next_client += 1;
            let id = ClientId(s.next_client);
            s.clients.push(Registration {
                id,
                ops,
                kind,
                live: true,
                at: [None; MAX_DEVICES],
            });
            // Every probed device, whatever its power state (`ib_register_client` calls
            // `add` for each registered `ib_device`).
            for dev in (0..MAX_DEVICES as u8).map(DeviceId) {
                if probed(o.machine().phase(dev)) {
                    attach(o, now, s, s.clients.len() - 1, dev);
                }
            }
            Ok(id)
        })
    }

    /// Non-blocking half of [`unregister_client`](Self::unregister_client): an
    /// attachment active or told `Removed` gets its owed `remove` as a job in its lane
    /// (one `remove` per pair: Linux serialises it with device removal), whose return
    /// detaches it; others detach at once. `true` for the one call that unregistered it
    /// (it ends with [`finish_unregister`](Self::finish_unregister) once ready).
    pub fn begin_unregister(&self, id: ClientId) -> bool {
        self.with(|o, now, s| {
            let Some(r) = s.reg(id).filter(|r| r.live) else {
                return false;
            };
            r.live = false;
            for a in r.at.iter().flatten() {
                match o.machine().client(a.handle).map(|v| v.state) {
                    Some(ClientState::Active { .. } | ClientState::Removed) => {
                        o.push_job(Job::Remove { handle: a.handle })
                    }
                    Some(_) => drop(o.feed(now, Input::Unregister { client: a.handle })),
                    None => {}
                }
            }
            true
        })
    }

    /// Whether no callback of an unregistering client runs or will run. A context fenced
    /// meanwhile lost its queued `remove` (disassociate was its last callback): it is
    /// detached here.
    pub fn unregister_ready(&self, id: ClientId) -> bool {
        self.with(|o, now, s| ready(o, now, s, id))
    }

    /// The winner of [`begin_unregister`](Self::begin_unregister), once ready: forget the
    /// registration (every owed `remove` ran in its lane).
    pub fn finish_unregister(&self, id: ClientId) {
        self.with(|_, _, s| s.clients.retain(|r| r.id != id));
    }

    /// `ib_unregister_client`: returns only when no callback of the client runs and none
    /// will run. Idempotent: concurrent callers all wait. `EDEADLK` from a callback.
    pub fn unregister_client(&self, id: ClientId) -> Result<(), LinuxError> {
        self.refuse_in_callback()?;
        let winner = self.begin_unregister(id);
        if winner {
            self.wait(|o, now, s| ready(o, now, s, id).then_some(()))?;
            self.finish_unregister(id);
        } else {
            self.wait(|_, _, s| s.reg(id).is_none().then_some(()))?;
        }
        Ok(())
    }

    /// A registration's live attachment to `dev`: `ENOENT` for no such registration,
    /// `ENODEV` if not attached (detached, device gone), `EIO` once disassociated.
    fn attachment(
        o: &LinuxOwner<O>,
        s: &mut PortState,
        id: ClientId,
        dev: DeviceId,
    ) -> Result<Attachment, LinuxError> {
        let d = dev_index(dev)?;
        let r = s.reg(id).ok_or(LinuxError::new(Errno::ENOENT))?;
        let a = r.at[d].ok_or(LinuxError::new(Errno::ENODEV))?;
        match o.machine().client(a.handle).map(|v| v.state) {
            None => Err(LinuxError::new(Errno::ENODEV)),
            Some(ClientState::Revoked) => Err(pnp_lifecycle::Error::ClientRevoked.into()),
            Some(_) => Ok(a),
        }
    }

    fn feed_for(
        &self,
        id: ClientId,
        dev: DeviceId,
        input: impl FnOnce(&mut PortState, Attachment) -> Input,
    ) -> Result<(), LinuxError> {
        self.with(|o, now, s| {
            let a = Self::attachment(o, s, id, dev)?;
            let input = input(s, a);
            o.feed(now, input).map(drop).map_err(LinuxError::from)
        })
    }

    /// A vote given later (`PCI_ERS_RESULT_NONE` earlier): quiesced, reset away. `EIO`
    /// once disassociated, `EINVAL` if not voting.
    pub fn reset_ack(&self, id: ClientId, dev: DeviceId) -> Result<(), LinuxError> {
        self.feed_for(id, dev, |_, a| Input::ResetExecute { client: a.handle })
    }

    /// A `CAN_RECOVER` vote given later (acks like [`reset_ack`](Self::reset_ack) during
    /// a function reset).
    pub fn recover_ack(&self, id: ClientId, dev: DeviceId) -> Result<(), LinuxError> {
        self.feed_for(id, dev, |s, a| {
            let client = a.handle;
            match s.devs[usize::from(dev.0)].forced {
                true => Input::ResetExecute { client },
                false => Input::CanRecover { client },
            }
        })
    }

    /// `ib_query_port`: the link state; allowed with the port DOWN.
    pub fn query_port(
        &self,
        id: ClientId,
        dev: DeviceId,
        port: PhysPort,
    ) -> Result<PortAttr, LinuxError> {
        let what = pnp_lifecycle::Access::QueryCounters(port);
        self.feed_for(id, dev, |_, a| Input::Access {
            client: a.handle,
            epoch: a.epoch,
            what,
        })?;
        let state = self.rt.inspect(|o| o.machine().link(dev, port));
        Ok(PortAttr {
            state: state.unwrap_or(LinkState::Down),
        })
    }

    /// A verb that touches the hardware and returns (`ib_post_send`): granted and ended
    /// within the call. `EAGAIN` in a reset cycle, `ESTALE` with an old interface, `EIO`
    /// once disassociated.
    pub fn post(&self, id: ClientId, dev: DeviceId) -> Result<(), LinuxError> {
        self.begin_hw_op(id, dev)?;
        self.end_hw_op(id, dev)
    }

    /// A hardware operation that outlasts the call (a verb sleeping on a firmware
    /// command), bracketed as `pm_runtime_get_sync` … `pm_runtime_put`: in flight until
    /// [`end_hw_op`](Self::end_hw_op); stop, reset, teardown and power-down wait for it
    /// (up to `operation_timeout`, then the context is fenced). Runtime-suspended: the
    /// core commands the runtime resume and this waits for it, `ETIMEDOUT` after
    /// `operation_timeout` (`EDEADLK` from a callback). System sleep: `ESHUTDOWN`.
    pub fn begin_hw_op(&self, id: ClientId, dev: DeviceId) -> Result<(), LinuxError> {
        self.begin_hw_op_as(id, dev, None)
    }

    /// [`begin_hw_op`](Self::begin_hw_op) under the lock; `context`: the handle and epoch
    /// a [`HwContext`] names (else the attachment's own).
    fn begin_hw_op_as(
        &self,
        id: ClientId,
        dev: DeviceId,
        context: Option<(ClientHandle, Epoch)>,
    ) -> Result<(), LinuxError> {
        let mut deadline = None;
        loop {
            let (waits, now) = self.with(|o, now, s| {
                let a = Self::attachment(o, s, id, dev)?;
                let (client, epoch) = match context {
                    // A context of an earlier attachment (detached and attached again).
                    Some((handle, _)) if handle != a.handle => {
                        return Err(LinuxError::new(Errno::ENODEV))
                    }
                    Some(named) => named,
                    None => (a.handle, a.epoch),
                };
                let what = Access::HardwareOp;
                let access = Input::Access {
                    client,
                    epoch,
                    what,
                };
                let reply = o.feed(now, access)?;
                Ok::<_, LinuxError>((reply == Reply::AccessWaitsForPowerUp, now))
            })?;
            if !waits {
                return Ok(());
            }
            let timeout = self.rt.inspect(|o| o.machine().config().operation_timeout);
            let until = *deadline.get_or_insert(now.after(timeout));
            self.rt.with(|o, _| o.wake_at(until)); // the timer fires at the deadline
                                                   // Back in D0 (perhaps by this thread's own inline power-up): ask again.
            let woke = self.wait(|o, _, _| {
                let now = self.rt.now();
                let down = powered_down(o.machine().phase(dev));
                (now >= until || !down).then_some(!down || now < until)
            })?;
            if !woke {
                return Err(LinuxError::new(Errno::ETIMEDOUT));
            }
        }
    }

    /// The operation of [`begin_hw_op`](Self::begin_hw_op) ended. A fenced context's late
    /// end only ends the fence's wait (`EIO` once the fence ended without it).
    pub fn end_hw_op(&self, id: ClientId, dev: DeviceId) -> Result<(), LinuxError> {
        self.with(|o, now, s| {
            let r = s.reg(id).ok_or(LinuxError::new(Errno::ENOENT))?;
            let a = r.at[dev_index(dev)?].ok_or(LinuxError::new(Errno::ENODEV))?;
            Self::operation_done(o, now, a.handle)
        })
    }

    /// `AccessDone` for `handle`, with the port's errno.
    fn operation_done(
        o: &mut LinuxOwner<O>,
        now: Tick,
        handle: ClientHandle,
    ) -> Result<(), LinuxError> {
        let done = o.operation_done(now, handle);
        // A fence that outran its grace already ended the operation: disassociated.
        let revoked = o.machine().client(handle).map(|v| v.state);
        match (done, revoked) {
            (Err(_), Some(ClientState::Revoked)) => Err(LinuxError::new(Errno::EIO)),
            (done, _) => Ok(done?),
        }
    }

    /// A context's handle for its verbs on `dev` ([`HwContext`]), taken once (after
    /// `add`, and again after each `resume`): the port lock is taken here, never by
    /// [`begin_verb`](Self::begin_verb) on the fast path. `ENOENT` for no such
    /// registration, `ENODEV` if not attached, `EIO` once disassociated.
    pub fn hw_context(
        &self,
        id: ClientId,
        dev: DeviceId,
    ) -> Result<HwContext<K::Word>, LinuxError> {
        let a = self.with(|o, _, s| Self::attachment(o, s, id, dev))?;
        let gate = self
            .rt
            .client_gate(a.handle)
            .ok_or(LinuxError::new(Errno::ENODEV))?;
        Ok(HwContext {
            id,
            dev,
            handle: a.handle,
            epoch: a.epoch,
            gate,
        })
    }

    /// [`begin_hw_op`](Self::begin_hw_op) through a context's [`HwContext`]. While the
    /// core keeps the attachment's gate open (the device running in D0 at the context's
    /// epoch, nothing to drain, not revoked) this takes no lock and makes no system call:
    /// the gate's compare-exchange on the attachment's own cache line. Otherwise the core
    /// decides under the lock, with the errnos of [`begin_hw_op`](Self::begin_hw_op)
    /// (`ESTALE`: the context's epoch is an earlier one; `ENODEV`: the context names an
    /// attachment since detached).
    pub fn begin_verb(&self, context: &HwContext<K::Word>) -> Result<HwOp, LinuxError> {
        if let Some(operation) = self
            .rt
            .operation_begin_fast_on(&context.gate, context.epoch)
        {
            return Ok(HwOp {
                fast: Some(operation),
            });
        }
        let named = Some((context.handle, context.epoch));
        self.begin_hw_op_as(context.id, context.dev, named)?;
        Ok(HwOp { fast: None })
    }

    /// The operation of [`begin_verb`](Self::begin_verb) ended: on the fast path with the
    /// gate still open, no lock; otherwise (granted by the core, or carried by a close
    /// since) as [`end_hw_op`](Self::end_hw_op).
    pub fn end_verb(&self, context: &HwContext<K::Word>, op: HwOp) -> Result<(), LinuxError> {
        if let Some(operation) = op.fast {
            if self.rt.operation_end_fast_on(&context.gate, operation) {
                return Ok(());
            }
        }
        self.rt
            .with(|o, now| Self::operation_done(o, now, context.handle))
    }

    /// The subnet manager moved a port: `IB_EVENT_PORT_ACTIVE` / `IB_EVENT_PORT_ERR` to
    /// the clients bound to it. Never changes the device state.
    pub fn set_port_state(
        &self,
        dev: DeviceId,
        port: PhysPort,
        state: LinkState,
    ) -> Result<(), LinuxError> {
        let input = Input::LinkChanged {
            device: dev,
            port,
            state,
        };
        self.with(|o, now, _| o.feed(now, input).map(drop).map_err(LinuxError::from))
    }

    // ---- PCI error recovery ----------------------------------------------------------

    /// `err_handler->error_detected`. Normal or frozen: a reset request of the driver's
    /// own; every client gets `error_detected` and votes. `CAN_RECOVER` if the votes
    /// already ended the cycle without a reset (their `resume` ran), `NEED_RESET` if a
    /// reset is, or may be, needed ([`slot_reset`](Self::slot_reset) follows),
    /// `DISCONNECT` if the device cannot reset (failed, gone). In Dx, `CAN_RECOVER` (the
    /// core: no live hardware; the power-up re-initialises); while powering down or up,
    /// `NEED_RESET` (a cycle runs once back in D0). Perm failure: surprise
    /// removal, `DISCONNECT`; the PCI core goes straight to [`remove`](Self::remove),
    /// so a reset no `slot_reset` claimed is reported not done.
    pub fn error_detected(&self, dev: DeviceId, state: PciChannelState) -> PciErsResult {
        let Ok(d) = dev_index(dev) else {
            return PciErsResult::Disconnect;
        };
        if state == PciChannelState::PermFailure {
            self.with(|o, now, s| {
                let _ = o.feed(now, Input::SurpriseRemoval { device: dev });
                end_claimed(o, now, s, dev);
            });
            return PciErsResult::Disconnect;
        }
        let answer = self.with(|o, now, s| {
            if o.machine().failure(dev).is_some() {
                return PciErsResult::Disconnect;
            }
            let in_cycle = matches!(
                o.machine().phase(dev),
                Some(PhaseKind::Quiescing | PhaseKind::Executing)
            );
            if !in_cycle {
                s.attachments(d).for_each(|a| a.mmio_owed = false); // a past cycle's
            }
            if crate::group::in_group_cycle(o, dev) {
                return PciErsResult::NeedReset; // the slot's one error, on another function
            }
            match o.feed(now, Input::FatalError { device: dev }) {
                Ok(Reply::Fatal(FatalAnswer::Served(_) | FatalAnswer::Deferred)) => {
                    PciErsResult::NeedReset
                }
                // In Dx nothing is live to reset; the power-up re-initialises.
                Ok(Reply::Fatal(FatalAnswer::HardwareNotLive(PhaseKind::LowPower))) => {
                    PciErsResult::CanRecover
                }
                _ => PciErsResult::Disconnect,
            }
        });
        // The votes were dispatched (unless another thread dispatches): a cycle served
        // and already over with the device running ended without a reset; one whose
        // every voter answered CAN_RECOVER waits for `mmio_enabled`. Otherwise the PCI
        // core skips `mmio_enabled`: the CAN_RECOVER votes stand as given.
        self.with(|o, now, s| {
            let phase = o.machine().phase(dev);
            let voters: Vec<_> = o
                .machine()
                .clients(dev)
                .filter_map(|(h, v)| match v.state {
                    ClientState::Active { role, .. } => Some((h, role)),
                    _ => None,
                })
                .collect();
            let mut can_recover = |(h, role)| match role {
                Role::Acked => false,
                Role::Voting => s.reg_of(h).is_some_and(|a| a.mmio_owed),
                _ => true,
            };
            let any_voting = voters.iter().any(|(_, role)| *role == Role::Voting);
            let all_can_recover = phase == Some(PhaseKind::Quiescing)
                && any_voting
                && voters.into_iter().all(&mut can_recover);
            match answer {
                PciErsResult::NeedReset if phase == Some(PhaseKind::Running) => {
                    PciErsResult::CanRecover
                }
                PciErsResult::NeedReset if all_can_recover => PciErsResult::CanRecover,
                answer => {
                    feed_owed_votes(o, now, s, d);
                    answer
                }
            }
        })
    }

    /// `err_handler->mmio_enabled` (after `CAN_RECOVER`): each client that answered
    /// `CAN_RECOVER` gets [`IbClient::mmio_enabled`] (in its lane) and its answer is its
    /// vote; this blocks until they answered. Then `RECOVERED` if the cycle ended without
    /// a reset (clients got `resume`) or the device is in Dx, `NEED_RESET` while one
    /// runs (a client needed it: `slot_reset` follows) or waits for a late vote or the
    /// power-up, `DISCONNECT` if the device is gone or failed (or from a callback).
    pub fn mmio_enabled(&self, dev: DeviceId) -> PciErsResult {
        let Ok(d) = dev_index(dev) else {
            return PciErsResult::Disconnect;
        };
        if self.refuse_in_callback().is_err() {
            return PciErsResult::Disconnect;
        }
        let asked: Vec<ClientHandle> = self.with(|o, _, s| {
            let mut asked = Vec::new();
            for a in s.attachments(d) {
                if std::mem::take(&mut a.mmio_owed) && voting(o, a.handle) {
                    a.mmio_answer = None;
                    o.push_job(Job::MmioEnabled { handle: a.handle });
                    asked.push(a.handle);
                }
            }
            asked
        });
        // Feed each answer as it comes (a vote the cycle no longer wants is refused and
        // changes nothing); done once none of them still votes.
        let mut needs_reset = false;
        let answered = |o: &mut LinuxOwner<O>, now: Tick, s: &mut PortState| {
            for &client in &asked {
                let answer = s.reg_of(client).and_then(|a| a.mmio_answer.take());
                let vote = match answer {
                    Some(PciErsResult::Recovered | PciErsResult::CanRecover) => {
                        Input::CanRecover { client }
                    }
                    Some(PciErsResult::NeedReset) => {
                        needs_reset = true;
                        Input::ResetExecute { client }
                    }
                    Some(PciErsResult::Disconnect) => Input::Unregister { client },
                    Some(PciErsResult::None) | None => continue, // votes later
                };
                if voting(o, client) {
                    let _ = o.feed(now, vote);
                }
            }
            asked.iter().all(|h| !voting(o, *h)).then_some(())
        };
        if self.wait(answered).is_err() {
            return PciErsResult::Disconnect;
        }
        self.carry_out(); // what the last vote caused (every `resume`, if recovered)
        let held = |o: &mut LinuxOwner<O>, _: Tick, _: &mut PortState| {
            crate::group::held_answer(o, dev, &asked, needs_reset)
        };
        if let Some(answer) = self.with(held) {
            return answer; // this function's own answer; its group decides
        }
        let (phase, failed) = self
            .rt
            .inspect(|o| (o.machine().phase(dev), o.machine().failure(dev)));
        match phase {
            _ if failed.is_some() => PciErsResult::Disconnect,
            Some(PhaseKind::Running | PhaseKind::LowPower) => PciErsResult::Recovered,
            Some(PhaseKind::Quiescing | PhaseKind::Executing) => PciErsResult::NeedReset,
            _ if powered_down(phase) => PciErsResult::NeedReset, // after the power-up
            _ => PciErsResult::Disconnect,
        }
    }

    /// Non-blocking `slot_reset`: `None` while clients still vote. `Some(RECOVERED)`:
    /// the hardware was re-initialised (or the cycle needed no reset); `resume` follows.
    pub fn poll_slot_reset(&self, dev: DeviceId) -> Option<PciErsResult> {
        let d = dev_index(dev).ok()?;
        let claim = self.with(|o, now, s| claim(o, now, s, d))?;
        Some(self.after_claim(dev, claim))
    }

    /// `err_handler->slot_reset`: blocks until every voter acked, left or was revoked
    /// and the machine commands the reset, then re-initialises ([`Hardware::reset`]):
    /// `RECOVERED`, or `DISCONNECT` if the cycle was aborted, the device failed or the
    /// re-init failed (the device fails; clients get `IB_EVENT_DEVICE_FATAL`).
    pub fn slot_reset(&self, dev: DeviceId) -> PciErsResult {
        let Ok(d) = dev_index(dev) else {
            return PciErsResult::Disconnect;
        };
        match self.wait(|o, now, s| claim(o, now, s, d)) {
            Ok(claim) => self.after_claim(dev, claim),
            Err(_) => PciErsResult::Disconnect,
        }
    }

    fn after_claim(&self, dev: DeviceId, claim: PciErsResult) -> PciErsResult {
        if claim != PciErsResult::NeedReset {
            self.carry_out(); // what votes `claim` fed caused
            return claim;
        }
        let result = self.rt.os().linux().hooks().reset(dev);
        self.with(|o, now, s| {
            let claimed = &mut s.devs[usize::from(dev.0)].claimed;
            match result {
                // Reported by `resume` (clients get theirs then), or by remove.
                ResetResult::Succeeded if *claimed => PciErsResult::Recovered,
                ResetResult::Failed if std::mem::take(claimed) => {
                    report_reset(o, now, s, dev, true, ResetResult::Failed);
                    PciErsResult::Disconnect
                }
                _ => PciErsResult::Disconnect, // remove or perm failure took it meanwhile
            }
        })
    }

    /// `err_handler->resume`: report the reset done; clients get `resume` with the new
    /// epoch. After a cycle without a reset there is nothing left to report.
    pub fn resume(&self, dev: DeviceId) {
        let Ok(d) = dev_index(dev) else { return };
        self.with(|o, now, s| {
            s.devs[d].forced = false;
            if std::mem::take(&mut s.devs[d].claimed) {
                end_reset(o, now, s, dev, true);
            }
        });
    }

    /// `err_handler->reset_prepare` (function reset): quiesce only. Clients get
    /// `error_detected` and vote (`CAN_RECOVER` acks like `NEED_RESET`: the reset happens
    /// anyway); blocks until the machine commands the reset and returns without touching
    /// the hardware. The PCI core resets the function next, then calls
    /// [`reset_done`](Self::reset_done). `ENODEV` if it cannot reset.
    pub fn reset_prepare(&self, dev: DeviceId) -> Result<(), LinuxError> {
        let d = dev_index(dev)?;
        self.refuse_in_callback()?;
        self.with(|_, _, s| s.devs[d].forced = true);
        let r = match self.error_detected(dev, PciChannelState::Normal) {
            PciErsResult::NeedReset => match self.wait(|o, now, s| claim(o, now, s, d))? {
                PciErsResult::NeedReset => Ok(()),
                _ => Err(LinuxError::new(Errno::ENODEV)),
            },
            _ => Err(LinuxError::new(Errno::ENODEV)),
        };
        if r.is_err() {
            self.with(|_, _, s| s.devs[d].forced = false);
        }
        r
    }

    /// `err_handler->reset_done`: the function reset happened; re-initialise the
    /// hardware ([`Hardware::reset`]) and report it, so clients get `resume` (a failed
    /// re-init fails the device). Nothing to do if `reset_prepare` failed.
    pub fn reset_done(&self, dev: DeviceId) {
        let Ok(d) = dev_index(dev) else { return };
        let claimed = self.with(|_, _, s| {
            s.devs[d].forced = false;
            s.devs[d].claimed
        });
        if !claimed {
            return;
        }
        let result = self.rt.os().linux().hooks().reset(dev);
        self.with(|o, now, s| {
            if std::mem::take(&mut s.devs[d].claimed) {
                let _ = o.feed(
                    now,
                    Input::ResetDone {
                        device: dev,
                        result,
                    },
                );
            }
        });
    }

    // ---- power: dev_pm_ops and runtime PM -------------------------------------------

    /// Non-blocking half of [`pm`](Self::pm): request the power transition `op` maps to.
    /// A runtime suspend while a verb holds a usage count is refused `EAGAIN` and changes
    /// nothing: the PM core's own gate (`rpm_check_suspend_allowed`), which never calls
    /// `runtime_suspend` with a nonzero usage count.
    pub fn begin_pm(&self, dev: DeviceId, op: PmOp) -> Result<Pending, LinuxError> {
        dev_index(dev)?;
        self.with(|o, now, _| {
            if op == PmOp::RuntimeSuspend && usage_count(o, dev) > 0 {
                return Err(LinuxError::new(Errno::EAGAIN));
            }
            let pending = Pending::default();
            o.submit(now, pending.clone(), |token| match op.power_down() {
                Some(kind) => Input::PowerDown {
                    device: dev,
                    kind,
                    token,
                },
                None => Input::PowerUp { device: dev, token },
            })?;
            Ok(pending)
        })
    }

    /// A `dev_pm_ops` callback, blocking until done (a system sleep waits for error
    /// recovery). Clients are told `suspending`, hardware calls drained, then
    /// [`Hardware::power_down`]; [`Hardware::power_up`], then `resumed` (lost state: a new
    /// epoch, as after a reset). Errno: the core's refusal, or `EIO` (power-up failed).
    pub fn pm(&self, dev: DeviceId, op: PmOp) -> Result<(), LinuxError> {
        self.refuse_in_callback()?;
        let pending = self.begin_pm(dev, op)?;
        match self.wait(|_, _, _| pending.completion())? {
            Completion::Done(Status::Success) => Ok(()),
            Completion::Done(_) => Err(LinuxError::new(Errno::EIO)),
            Completion::Refused(e) => Err(e.into()),
        }
    }

    /// `runtime_idle`: `EBUSY` while a hardware call holds a usage count (the core's
    /// operations in flight); `Ok`: the PM core may call `runtime_suspend`.
    pub fn runtime_idle(&self, dev: DeviceId) -> Result<(), LinuxError> {
        match self.rt.inspect(|o| usage_count(o, dev)) {
            0 => Ok(()),
            _ => Err(LinuxError::new(Errno::EBUSY)),
        }
    }

    // ---- time, unload, questions ----------------------------------------------------

    /// The timer fired: fence graces and the machine's deadlines that passed.
    pub fn timeout(&self) -> Result<(), LinuxError> {
        Ok(self.rt.timeout()?)
    }

    /// When [`timeout`](Self::timeout) is next due.
    pub fn poll_timeout(&self) -> Option<Tick> {
        self.rt.poll_timeout()
    }

    /// The body of a timer thread: block (never dispatching) until a deadline exists
    /// (`Some`: call [`timeout`](Self::timeout) once the clock reaches it) or unload
    /// finished (`None`).
    pub fn wait_tick_needed(&self) -> Option<Tick> {
        // The timer thread never carries out work (a stuck callback would stop time).
        self.rt
            .watch(|o, _| match o.unload_finished() {
                true => Some(None),
                false => o.poll_timeout().map(Some),
            })
            .ok()
            .flatten()
    }

    /// How long a fence waits out a running callback or operation (default: the longer
    /// of `callback_timeout` and `operation_timeout`).
    pub fn set_fence_grace(&self, ticks: u64) {
        self.with(|o, _, _| o.set_fence_grace(ticks));
    }

    /// Non-blocking half of [`unload`](Self::unload): the fence (removes every device).
    pub fn begin_unload(&self) -> Result<(), LinuxError> {
        self.with(|o, now, s| {
            o.feed(now, Input::Unload)?;
            // PCI remove of every device: error recovery ends, as in `begin_remove`.
            for d in 0..MAX_DEVICES {
                end_claimed(o, now, s, DeviceId(d as u8));
            }
            Ok(())
        })
    }

    /// Whether unload may return: the machine said so, every work item was carried out
    /// and no abandoned callback still runs module code.
    pub fn unload_finished(&self) -> bool {
        self.rt
            .inspect(|o| o.unload_complete() && o.abandoned() == 0)
    }

    /// `module_exit`: remove every device (clients get `remove`), block until unload may
    /// finish and every callback returned.
    pub fn unload(&self) -> Result<(), LinuxError> {
        self.refuse_in_callback()?;
        self.begin_unload()?;
        self.wait(|o, _, _| (o.unload_complete() && o.abandoned() == 0).then_some(()))
    }

    /// Why the machine failed the device, until it is removed. Meanwhile the PCI error
    /// path answers `DISCONNECT`.
    pub fn failure(&self, dev: DeviceId) -> Option<FailureCause> {
        self.rt.inspect(|o| o.machine().failure(dev))
    }

    /// The device's current epoch.
    pub fn epoch(&self, dev: DeviceId) -> Option<Epoch> {
        self.rt.inspect(|o| o.machine().epoch(dev))
    }

    /// Work items waiting (a debugfs-style counter), bounded even behind a stuck
    /// callback and a flood of link changes.
    pub fn backlog(&self) -> usize {
        self.rt.inspect(|o| o.backlog())
    }

    /// The kernel log (`dmesg`): a line per failed device (`dev_err`).
    pub fn kernel_log(&self) -> Vec<String> {
        self.rt.os().linux().kernel_log()
    }

    /// The machine's handle for a registration's attachment to `dev` (to ask the
    /// machine about it: `runtime().inspect(|o| o.machine().client(h))`).
    pub fn handle(&self, id: ClientId, dev: DeviceId) -> Option<ClientHandle> {
        let d = dev_index(dev).ok()?;
        self.port(|s| s.reg(id)?.at[d].map(|a| a.handle))
    }
}

/// Attach registration `i` to `dev` (unless it is already): register with the machine,
/// bind every port (a mixed-protocol device is refused: no port events), queue `add`.
fn attach<O: LinuxPort>(
    o: &mut LinuxOwner<O>,
    now: Tick,
    s: &mut PortState,
    i: usize,
    dev: DeviceId,
) {
    let d = usize::from(dev.0);
    let ports = s.devs[d].ports;
    let r = &mut s.clients[i];
    let attached = r.at[d].is_some_and(|a| o.machine().client(a.handle).is_some());
    if !r.live || attached {
        return;
    }
    let Ok((handle, epoch)) = o.register(now, dev, r.kind, r.ops.clone()) else {
        return;
    };
    if ports > 0 {
        let set = PortSet(((1u16 << ports) - 1) as u8);
        let _ = o.feed(
            now,
            Input::Bind {
                client: handle,
                ports: set,
            },
        );
    }
    r.at[d] = Some(Attachment {
        handle,
        epoch,
        added: false,
        unhooked: false,
        mmio_owed: false,
        mmio_answer: None,
    });
    o.push_job(Job::Add {
        client: r.id,
        handle,
    });
}

/// Report the commanded reset: done if `claimed` (re-initialised), else not done (no
/// `slot_reset` will run it). Refused, and so harmless, when no reset is in flight.
fn end_reset<O: LinuxPort>(
    o: &mut LinuxOwner<O>,
    now: Tick,
    s: &mut PortState,
    dev: DeviceId,
    claimed: bool,
) {
    let result = match claimed {
        true => ResetResult::Succeeded,
        false => ResetResult::Failed,
    };
    report_reset(o, now, s, dev, claimed, result);
}

/// Removal ends error recovery: [`end_reset`] with whether `slot_reset` took the reset.
fn end_claimed<O: LinuxPort>(o: &mut LinuxOwner<O>, now: Tick, s: &mut PortState, dev: DeviceId) {
    let claimed = std::mem::take(&mut s.devs[usize::from(dev.0) % MAX_DEVICES].claimed);
    end_reset(o, now, s, dev, claimed);
}

/// Report `dev`'s re-initialisation after the commanded reset (`took`: it ran); for a
/// function a reset group's reset covered, to its carrier (see `crate::group`).
fn report_reset<O: LinuxPort>(
    o: &mut LinuxOwner<O>,
    now: Tick,
    s: &mut PortState,
    dev: DeviceId,
    took: bool,
    result: ResetResult,
) {
    let Some(device) = crate::group::reset_report(s, dev, took) else {
        return;
    };
    let _ = o.feed(now, Input::ResetDone { device, result });
}

/// `slot_reset`'s question: `None` while clients vote; `NeedReset` when this call took
/// the commanded reset (the caller re-initialises); otherwise its answer.
fn claim<O: LinuxPort>(
    o: &mut LinuxOwner<O>,
    now: Tick,
    s: &mut PortState,
    d: usize,
) -> Option<PciErsResult> {
    let dev = DeviceId(d as u8);
    // The PCI core skipped `mmio_enabled` (someone needed a reset): CAN_RECOVER stands.
    feed_owed_votes(o, now, s, d);
    if o.machine().failure(dev).is_some() {
        return Some(PciErsResult::Disconnect);
    }
    match o.machine().phase(dev) {
        Some(PhaseKind::Quiescing) => None,
        // In Dx the core runs the reset once the device is back in D0 (or a lost-state
        // power-up serves it).
        p if powered_down(p) => None,
        Some(PhaseKind::Executing) if !s.devs[d].claimed => {
            s.devs[d].claimed = std::mem::take(&mut s.devs[d].ordered);
            s.devs[d].claimed.then_some(PciErsResult::NeedReset)
        }
        Some(PhaseKind::Running) => Some(PciErsResult::Recovered),
        _ => Some(PciErsResult::Disconnect),
    }
}

/// Whether no callback of registration `id` runs or will run: every attachment's slot is
/// free (nothing more is addressed to it) and none of its code still runs (an abandoned
/// callback included). A queued `add` then finds the registration gone and skips. A
/// revoked attachment (its fence cancelled the owed `remove` or swallowed its detach) is
/// detached here; any other waits for its `remove` job, queued ahead of a `Removed`.
fn ready<O: LinuxPort>(o: &mut LinuxOwner<O>, now: Tick, s: &mut PortState, id: ClientId) -> bool {
    let Some(r) = s.reg(id) else { return true };
    r.at.iter().flatten().all(|a| {
        let state = o.machine().client(a.handle).map(|v| v.state);
        if state == Some(ClientState::Revoked) {
            let _ = o.feed(now, Input::Unregister { client: a.handle });
        }
        o.machine().client(a.handle).is_none() && !o.client_code_running(a.handle)
    })
}
