//! The driver: its entry points over the runtime, the remove lock, and the mlx4 interface.

use std::sync::Arc;

use pnp_lifecycle::table::{disposition, Disposition};
use pnp_lifecycle::{
    AccessAnswer, ClientHandle, ClientKind, Config, DeviceId, Epoch, Input, InputKind, LinkState,
    PhaseKind, PhysPort, PortCaps, Reply, ResetAnswer, Tick, Unregistered,
};
use pnp_lifecycle_runtime::{
    ClientGate, Clock, Dispatch, Kernel, Monitor, MonotonicClock, StdKernel, UnloadError,
};

use crate::os::{feed_irp, Callback, Hal, Irp, PnpDeviceState, PnpMinor, WindowsOs};
use crate::{NtStatus, WinRuntime, WindowsVocabulary, DEVICES};

/// One `IO_REMOVE_LOCK`: an I/O count biased by one at initialisation, and the removed
/// flag `IoReleaseRemoveLockAndWait` sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoveLockState {
    count: u32,
    removed: bool,
}

impl RemoveLockState {
    /// `IoInitializeRemoveLock`: count 1 (the bias), not removed.
    pub const fn new() -> Self {
        RemoveLockState {
            count: 1,
            removed: false,
        }
    }

    /// `IoAcquireRemoveLock`: fails with `STATUS_DELETE_PENDING` once remove began.
    pub fn acquire(&mut self) -> Result<(), NtStatus> {
        if self.removed {
            return Err(NtStatus::DELETE_PENDING);
        }
        self.count += 1;
        Ok(())
    }

    /// `IoReleaseRemoveLock`.
    pub fn release(&mut self) {
        self.count = self.count.saturating_sub(1);
    }

    /// The first half of `IoReleaseRemoveLockAndWait`: mark removed, release the caller's
    /// acquisition and the bias. The port does not then wait for [`Self::idle`] (a wait
    /// without a deadline): the core drains and fences what is in flight.
    pub fn release_for_remove(&mut self) {
        self.removed = true;
        self.count = self.count.saturating_sub(2);
    }

    /// Whether no holder is left (what `IoReleaseRemoveLockAndWait` waits for).
    pub const fn idle(&self) -> bool {
        self.count == 0
    }
}

impl Default for RemoveLockState {
    fn default() -> Self {
        Self::new()
    }
}

type Locks = [RemoveLockState; DEVICES];

/// The driver: the runtime (its dispatcher threads are the notification threads: every
/// callback, IRP completion and hardware command, including the reset, in the core's order
/// per client, per device and for the OS) and one remove lock per device. Cheap to clone.
pub struct Driver<K: Kernel = StdKernel, O: WindowsVocabulary<K> = WindowsOs<K>> {
    runtime: Arc<WinRuntime<O, K>>,
    locks: Arc<K::Monitor<Locks>>,
    hal: Arc<dyn Hal>,
}

impl<K: Kernel, O: WindowsVocabulary<K>> std::fmt::Debug for Driver<K, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("os", self.runtime.os().windows())
            .finish_non_exhaustive()
    }
}

impl<K: Kernel, O: WindowsVocabulary<K>> Clone for Driver<K, O> {
    fn clone(&self) -> Self {
        Driver {
            runtime: Arc::clone(&self.runtime),
            locks: Arc::clone(&self.locks),
            hal: Arc::clone(&self.hal),
        }
    }
}

impl Driver {
    /// `DriverEntry` with no device, on a [`MonotonicClock`] (milliseconds); starts the
    /// notification threads. Call [`Self::unload`] to end them.
    pub fn new(config: Config, hal: Arc<dyn Hal>) -> Self {
        Self::with_clock(config, hal, Arc::new(MonotonicClock::new()))
    }

    /// Like [`Self::new`], with every input stamped by `clock`.
    pub fn with_clock(config: Config, hal: Arc<dyn Hal>, clock: Arc<dyn Clock>) -> Self {
        Self::with_os(config, Arc::clone(&hal), clock, WindowsOs::new(hal))
    }
}

impl<K: Kernel, O: WindowsVocabulary<K>> Driver<K, O> {
    /// Like [`Self::with_clock`], with the runtime carrying work out through `os` (a
    /// wrapper of [`WindowsOs`] over the same `hal`, e.g. one that records).
    pub fn with_os(config: Config, hal: Arc<dyn Hal>, clock: Arc<dyn Clock>, os: O) -> Self {
        Driver {
            runtime: WinRuntime::new(config, os, clock, Dispatch::Thread),
            locks: Arc::new(Monitor::new([RemoveLockState::new(); DEVICES])),
            hal,
        }
    }

    /// The runtime, to ask the core (`inspect(|o| o.machine()...)`) or drive it.
    pub fn runtime(&self) -> &Arc<WinRuntime<O, K>> {
        &self.runtime
    }

    /// Run `f` on the device's remove lock.
    fn lock<R>(
        &self,
        device: DeviceId,
        f: impl FnOnce(&mut RemoveLockState) -> Result<R, NtStatus>,
    ) -> Result<R, NtStatus> {
        self.locks.with(|l| {
            let lock = l.get_mut(usize::from(device.0));
            f(lock.ok_or(NtStatus::NO_SUCH_DEVICE)?)
        })
    }

    fn release(&self, device: DeviceId) {
        let _ = self.lock(device, |l| {
            l.release();
            Ok(())
        });
    }

    /// Feed `input` holding the device's remove lock (`IoAcquireRemoveLock` ...
    /// `IoReleaseRemoveLock`).
    fn locked(&self, device: DeviceId, input: Input) -> Result<Reply, NtStatus> {
        self.runtime.with(|owner, now| {
            self.lock(device, RemoveLockState::acquire)?;
            let reply = owner.feed(now, input);
            self.release(device);
            Ok(reply?)
        })
    }

    fn feed(&self, input: Input) -> Result<(), NtStatus> {
        self.runtime.feed(input).map(drop).map_err(Into::into)
    }

    /// `AddDevice`; once the core took the device, `IoInitializeRemoveLock`. The core
    /// refuses a slot still occupied, and no holder of a removed device's lock is left once
    /// its `IRP_MN_REMOVE_DEVICE` drained it, so a device added again starts afresh.
    pub fn add_device(&self, device: DeviceId) -> Result<(), NtStatus> {
        self.runtime.with(|owner, now| {
            owner.feed(now, Input::AddDevice { device })?;
            self.lock(device, |l| {
                *l = RemoveLockState::new();
                Ok(())
            })
        })
    }

    /// Describe a physical port of an added device.
    pub fn configure_port(
        &self,
        device: DeviceId,
        port: PhysPort,
        caps: PortCaps,
    ) -> Result<(), NtStatus> {
        self.feed(Input::ConfigurePort { device, port, caps })
    }

    /// The `IRP_MJ_PNP` dispatch. Returns `STATUS_PENDING` if the IRP completes later (on
    /// the notification thread), else the status it was completed with. Each IRP is
    /// completed exactly once. `IRP_MN_REMOVE_DEVICE` never blocks: it marks the remove
    /// lock removed (later holders get `STATUS_DELETE_PENDING`) and the core drains what
    /// is in flight, fencing what overruns its deadline; it completes when the core did.
    /// A power minor code is completed with `STATUS_INVALID_DEVICE_REQUEST` (it is
    /// [`Self::dispatch_power`]'s).
    pub fn dispatch_pnp(&self, irp: &Arc<Irp<K>>) -> NtStatus {
        self.dispatch(irp, false)
    }

    /// The `IRP_MJ_POWER` dispatch, under the remove lock: `IRP_MN_SET_POWER` to S1..S5 is
    /// the core's `PowerDown { SystemSleep }`, to D1..D3 `PowerDown { Idle }`, to S0 / D0
    /// `PowerUp`, completed (`STATUS_PENDING` returned) when the core completes it or with
    /// its refusal; `IRP_MN_QUERY_POWER` is completed at once, from the core's state,
    /// changing nothing. A PnP minor code is completed with `STATUS_INVALID_DEVICE_REQUEST`.
    pub fn dispatch_power(&self, irp: &Arc<Irp<K>>) -> NtStatus {
        self.dispatch(irp, true)
    }

    fn dispatch(&self, irp: &Arc<Irp<K>>, power: bool) -> NtStatus {
        if irp.minor.is_power() != power {
            irp.complete(NtStatus::INVALID_DEVICE_REQUEST);
            return NtStatus::INVALID_DEVICE_REQUEST;
        }
        let (device, minor) = (irp.device, irp.minor);
        let kmdf = self.runtime.os().windows().kmdf();
        // KMDF's `EvtDeviceQueryRemove` / `QueryStop`: the driver's own veto comes first.
        let stop = match minor {
            PnpMinor::QueryRemoveDevice => Some(false),
            PnpMinor::QueryStopDevice => Some(true),
            _ => None,
        };
        if let Some(veto) = kmdf.zip(stop).and_then(|(k, stop)| k.veto(device, stop)) {
            irp.complete(veto);
            return veto;
        }
        let remove = minor == PnpMinor::RemoveDevice;
        // `IRP_MN_REMOVE_DEVICE` marks the remove lock removed (no new holder) and goes to
        // the core at once, without waiting for the holders: every holder that can last is
        // a hardware operation the core counts, and its drain, deadline and fence end it
        // (the fence cuts the client's path: `Hal::cut_client`). Waiting here, with no
        // deadline, let one stuck operation block the remove forever (issue 22, item 2).
        let entered = self.runtime.with(|owner, now| {
            self.lock(device, |l| {
                l.acquire()?;
                if remove {
                    l.release_for_remove();
                }
                Ok(())
            })?;
            if minor == PnpMinor::SurpriseRemoval {
                let phase = owner.machine().phase(device).unwrap_or(PhaseKind::Absent);
                if let (Some(k), Disposition::Handle) =
                    (kmdf, disposition(phase, InputKind::SurpriseRemoval))
                {
                    k.surprise_removed(device);
                }
            }
            let status = feed_irp(owner, now, Arc::clone(irp));
            if let (Some(k), PnpMinor::SetPower(state), NtStatus::PENDING) = (kmdf, minor, status) {
                if let Some(target) = state.wdf_target() {
                    k.power_target(device, target);
                }
            }
            if !remove {
                self.release(device);
            }
            Ok(status)
        });
        entered.unwrap_or_else(|status| {
            irp.complete(status);
            status
        })
    }

    /// `IRP_MN_QUERY_PNP_DEVICE_STATE`: `PNP_DEVICE_FAILED` while the core holds the device
    /// failed (from `IoInvalidateDeviceState` until it is removed).
    pub fn query_pnp_device_state(&self, device: DeviceId) -> Result<PnpDeviceState, NtStatus> {
        self.runtime.inspect(|owner| {
            let machine = owner.machine();
            machine.phase(device).ok_or(NtStatus::NO_SUCH_DEVICE)?;
            Ok(match machine.failure(device) {
                Some(_) => PnpDeviceState::FAILED,
                None => PnpDeviceState::NONE,
            })
        })
    }

    /// Register a client for `device`'s reset events (mlx4 `register_event_handler`),
    /// under the remove lock. The interface it gets is of the current epoch.
    pub fn register_client(
        &self,
        device: DeviceId,
        kind: ClientKind,
        callback: Callback,
    ) -> Result<MlxInterface<K, O>, NtStatus> {
        let (handle, epoch) = self.runtime.with(|owner, now| {
            self.lock(device, RemoveLockState::acquire)?;
            let registered = owner.register(now, device, kind, callback);
            self.release(device);
            registered.map_err(NtStatus::from)
        })?;
        // The client's own fast-path gate, kept with its interface: `hardware_op` finds it
        // without a lookup. `None` only for a handle naming no slot (never, once registered).
        let gate = self.runtime.client_gate(handle);
        Ok(MlxInterface {
            driver: self.clone(),
            handle,
            epoch,
            gate,
        })
    }

    /// `IRP_MJ_CREATE`: `client` opened a handle (the core's hold): `IRP_MN_QUERY_REMOVE_DEVICE`
    /// is vetoed (`STATUS_DEVICE_BUSY`) until it is closed. Under the remove lock.
    pub fn dispatch_create(&self, client: ClientHandle) -> Result<(), NtStatus> {
        self.locked(client.device, Input::Hold { client }).map(drop)
    }

    /// `IRP_MJ_CLOSE`: `client`'s handle is closed. No remove lock: closing works while
    /// delete is pending.
    pub fn dispatch_close(&self, client: ClientHandle) -> Result<(), NtStatus> {
        self.feed(Input::ReleaseHold { client })
    }

    /// The subnet manager changed a port's link state.
    pub fn link_changed(
        &self,
        device: DeviceId,
        port: PhysPort,
        state: LinkState,
    ) -> Result<(), NtStatus> {
        self.feed(Input::LinkChanged {
            device,
            port,
            state,
        })
    }

    /// The catastrophic-error interrupt's DPC: a reset the driver asks for itself.
    pub fn catastrophic_error(&self, device: DeviceId) -> Result<(), NtStatus> {
        self.feed(Input::FatalError { device })
    }

    /// The timer DPC, due at [`Self::poll_timeout`] (ends fences past their grace too).
    pub fn timeout(&self) -> Result<(), NtStatus> {
        self.runtime.timeout().map_err(Into::into)
    }

    /// When [`Self::timeout`] is next due, in the clock's time (the core's deadlines, the
    /// runtime's fences, and accesses waiting for a power-up: `Owner::wake_at`).
    pub fn poll_timeout(&self) -> Option<Tick> {
        self.runtime.poll_timeout()
    }

    /// `DriverUnload`: blocks until the core let unload finish, every work item was carried
    /// out and the notification thread ended. A client still registered is told `Removed`
    /// and waited for until it unregisters or [`Self::timeout`] passes its detach deadline.
    /// From inside a callback: `STATUS_POSSIBLE_DEADLOCK`, nothing changed.
    pub fn unload(&self) -> Result<(), NtStatus> {
        match self.runtime.unload() {
            Ok(()) => Ok(()),
            Err(UnloadError::Refused(e)) => Err(e.into()),
            Err(UnloadError::WouldDeadlock) => Err(NtStatus::POSSIBLE_DEADLOCK),
        }
    }
}

/// The mlx4 bus interface as one client holds it: its handle and the interface's epoch.
/// After RESET_END, [`Self::acquire`] hands out the fresh one.
pub struct MlxInterface<K: Kernel = StdKernel, O: WindowsVocabulary<K> = WindowsOs<K>> {
    driver: Driver<K, O>,
    handle: ClientHandle,
    epoch: Epoch,
    /// The client's fast-path gate (see [`ClientGate`]).
    gate: Option<ClientGate<K::Word>>,
}

impl<K: Kernel, O: WindowsVocabulary<K>> std::fmt::Debug for MlxInterface<K, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MlxInterface")
            .field("handle", &self.handle)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl<K: Kernel, O: WindowsVocabulary<K>> Clone for MlxInterface<K, O> {
    fn clone(&self) -> Self {
        MlxInterface {
            driver: self.driver.clone(),
            handle: self.handle,
            epoch: self.epoch,
            gate: self.gate.clone(),
        }
    }
}

impl<K: Kernel, O: WindowsVocabulary<K>> MlxInterface<K, O> {
    /// The client's handle.
    pub fn handle(&self) -> ClientHandle {
        self.handle
    }

    /// The interface's epoch.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    fn call(&self, input: Input) -> Result<Reply, NtStatus> {
        self.driver.locked(self.handle.device, input)
    }

    /// `reset_request`: ask for a soft reset (started, joined or scheduled).
    pub fn reset_request(&self) -> Result<ResetAnswer, NtStatus> {
        match self.call(Input::ResetRequest {
            client: self.handle,
        })? {
            Reply::Reset(answer) => Ok(answer),
            _ => Err(NtStatus::UNSUCCESSFUL),
        }
    }

    /// `reset_execute`: the client quiesced and answers RESET.
    pub fn reset_execute(&self) -> Result<(), NtStatus> {
        self.call(Input::ResetExecute {
            client: self.handle,
        })
        .map(drop)
    }

    /// The client cannot pause its work: `IRP_MN_QUERY_STOP_DEVICE` fails
    /// (`STATUS_DEVICE_BUSY`) until [`Self::can_pause`].
    pub fn cannot_pause(&self) -> Result<(), NtStatus> {
        self.call(Input::CannotPause {
            client: self.handle,
        })
        .map(drop)
    }

    /// The client can pause its work again.
    pub fn can_pause(&self) -> Result<(), NtStatus> {
        self.call(Input::CanPause {
            client: self.handle,
        })
        .map(drop)
    }

    /// Acquire the current interface (after RESET_END: a fresh epoch).
    pub fn acquire(&self) -> Result<Self, NtStatus> {
        match self.call(Input::AcquireInterface {
            client: self.handle,
        })? {
            Reply::Interface(epoch) => Ok(MlxInterface {
                epoch,
                ..self.clone()
            }),
            _ => Err(NtStatus::UNSUCCESSFUL),
        }
    }

    /// A hardware operation through this interface ([`Hal::client_op`]), holding the remove
    /// lock from the core's grant until it returned: no stop, reset, power-down or teardown
    /// is commanded under it, and a fence waits for it. In an idle Dx the core brings the
    /// device back first: this waits for that power-up, then asks again, for at most the
    /// configured `operation_timeout` (then `STATUS_IO_TIMEOUT`; from inside a callback,
    /// where it would wait for itself, `STATUS_POSSIBLE_DEADLOCK`). In system sleep:
    /// `STATUS_DEVICE_POWERED_OFF`.
    pub fn hardware_op(&self) -> Result<(), NtStatus> {
        let (driver, device) = (&self.driver, self.handle.device);
        // The fast path (DESIGN r3): while the core keeps this client's gate open — started,
        // D0, this epoch, nothing to drain — no lock and no system call. The gate shuts in
        // the same owner-lock section that marks the remove lock removed and feeds the
        // remove, and what it carried the core drains before any teardown: the remove
        // lock would add nothing here.
        if let Some(gate) = &self.gate {
            if let Some(operation) = driver.runtime.operation_begin_fast_on(gate, self.epoch) {
                driver.hal.client_op(device, self.handle);
                // Refused only for a client the core no longer counts (fenced): nothing to undo.
                let _ = driver.runtime.operation_end_on(gate, operation);
                return Ok(());
            }
        }
        let mut deadline = None;
        loop {
            let answer = driver.runtime.with(|owner, now| {
                driver.lock(device, RemoveLockState::acquire)?;
                let answer = owner.operation_begin(now, self.handle, self.epoch);
                if answer != Ok(AccessAnswer::Granted) {
                    driver.release(device);
                }
                let limit = now
                    .0
                    .saturating_add(owner.machine().config().operation_timeout);
                Ok::<_, NtStatus>((answer?, *deadline.get_or_insert(limit)))
            })?;
            match answer {
                (AccessAnswer::Granted, _) => break,
                (_, limit) => self.wait_for_power_up(Tick(limit))?,
            }
        }
        driver.hal.client_op(device, self.handle);
        driver.runtime.with(|owner, now| {
            // Refused only for a client the core no longer counts (fenced): nothing to undo.
            let _ = owner.operation_done(now, self.handle);
        });
        driver.release(device);
        Ok(())
    }

    /// Wait until the device left its power transition or low-power state (then ask
    /// again, however late), or `deadline` (the timer DPC fires then: `Owner::wake_at`).
    fn wait_for_power_up(&self, deadline: Tick) -> Result<(), NtStatus> {
        let device = self.handle.device;
        let powering = [
            PhaseKind::PoweringDown,
            PhaseKind::LowPower,
            PhaseKind::PoweringUp,
        ];
        let runtime = &self.driver.runtime;
        runtime.with(|owner, _| owner.wake_at(deadline));
        let waited = runtime.wait_until(|owner, now| {
            let phase = owner.machine().phase(device);
            if !phase.is_some_and(|p| powering.contains(&p)) {
                return Some(Ok(()));
            }
            (now >= deadline).then_some(Err(NtStatus::IO_TIMEOUT))
        });
        waited.map_err(|_| NtStatus::POSSIBLE_DEADLOCK)?
    }

    /// Unregister and block until no callback of this client runs or will run (the core
    /// freed its slot: `ClientGone`). From inside any callback (where it would wait for
    /// itself) it changes nothing and fails with `STATUS_POSSIBLE_DEADLOCK`: use
    /// [`Self::unregister_nowait`] there.
    pub fn unregister(&self) -> Result<Unregistered, NtStatus> {
        let runtime = &self.driver.runtime;
        if runtime.in_dispatch() {
            return Err(NtStatus::POSSIBLE_DEADLOCK);
        }
        let result = self.unregister_nowait();
        runtime
            .wait_until(|owner, _| owner.machine().client(self.handle).is_none().then_some(()))
            .map_err(|_| NtStatus::POSSIBLE_DEADLOCK)?;
        result
    }

    /// Unregister without waiting (from inside a callback). No remove lock: detaching
    /// works while delete is pending.
    pub fn unregister_nowait(&self) -> Result<Unregistered, NtStatus> {
        match self.driver.runtime.feed(Input::Unregister {
            client: self.handle,
        })? {
            Reply::Unregistered(u) => Ok(u),
            _ => Err(NtStatus::UNSUCCESSFUL),
        }
    }
}
