//! The threaded port: the port lock, the notification thread (client callbacks, IRP
//! completion, start/shutdown/release), the reset worker, IRPs and the mlx4 interface.

use pnp_lifecycle::{
    ClientHandle, ClientKind, Config, DeviceId, Epoch, Event, FailureCause, Input, LinkState,
    PhysPort, PortCaps, RequestToken, ResetAnswer, ResetResult, StartResult, Tick, Unregistered,
};

use crate::clock::{Clock, MonotonicClock};
use crate::ntstatus::NtStatus;
use crate::port::{PnpDeviceState, PnpMinor, PortCore, Work};
use crate::sync::{lock, thread, wait, Arc, Condvar, Mutex};

/// A client's event callback (the mlx4 reset event handler). Called on the port's
/// notification thread, never under the port lock. It may call back into the port, but
/// must not block on it: a blocking [`MlxInterface::unregister`] from inside it is refused
/// with `STATUS_POSSIBLE_DEADLOCK` (use [`MlxInterface::unregister_nowait`]).
pub type Callback = Arc<dyn Fn(Event) + Send + Sync>;

/// The hardware the port drives. Every method is called outside the port lock.
pub trait Hal: Send + Sync {
    /// Claim resources and start the device.
    fn start(&self, device: DeviceId) -> StartResult;
    /// Execute the hardware reset (on the reset worker thread).
    fn reset(&self, device: DeviceId) -> ResetResult;
    /// Quiesce the hardware.
    fn shutdown(&self, device: DeviceId);
    /// Release resources.
    fn release(&self, device: DeviceId);
    /// A client's hardware operation, made while the client holds the remove lock.
    fn client_op(&self, device: DeviceId, client: ClientHandle);
}

#[derive(Debug, Default)]
struct IrpSlot {
    status: Option<NtStatus>,
    completions: u32,
}

/// An I/O request packet: a PnP minor code, the token the port names it by, and a
/// completion slot.
#[derive(Debug)]
pub struct Irp {
    /// The device it targets.
    pub device: DeviceId,
    /// `IRP_MN_*`.
    pub minor: PnpMinor,
    /// Its caller-chosen name (logs and tests). Not the core's token: the port mints that,
    /// so two IRPs with the same name are never confused (see [`PortCore::pnp_feed`]).
    pub token: RequestToken,
    slot: Mutex<IrpSlot>,
    done: Condvar,
}

impl Irp {
    /// A new IRP.
    pub fn new(device: DeviceId, minor: PnpMinor, token: u32) -> Arc<Irp> {
        Arc::new(Irp {
            device,
            minor,
            token: RequestToken(token),
            slot: Mutex::new(IrpSlot::default()),
            done: Condvar::new(),
        })
    }

    /// `IoCompleteRequest`. A second completion is counted (see [`Self::completions`]).
    pub fn complete(&self, status: NtStatus) {
        let mut slot = lock(&self.slot);
        slot.completions += 1;
        if slot.status.is_none() {
            slot.status = Some(status);
        }
        self.done.notify_all();
    }

    /// The final status, if completed.
    pub fn status(&self) -> Option<NtStatus> {
        lock(&self.slot).status
    }

    /// How many times it was completed (exactly one is right).
    pub fn completions(&self) -> u32 {
        lock(&self.slot).completions
    }

    /// Block until completed; the final status.
    pub fn wait(&self) -> NtStatus {
        let mut slot = lock(&self.slot);
        loop {
            if let Some(status) = slot.status {
                return status;
            }
            slot = wait(&self.done, slot);
        }
    }
}

/// A deliberately planted concurrency fault (feature `planted-fault` only).
#[cfg(feature = "planted-fault")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No fault.
    None,
    /// The notification thread calls client callbacks while holding the port lock.
    CallbackUnderLock,
    /// `IRP_MN_REMOVE_DEVICE` does not wait for remove-lock holders.
    RemoveDoesNotWait,
}

struct Inner {
    core: Mutex<PortCore<Callback, Arc<Irp>>>,
    changed: Condvar,
    hal: Arc<dyn Hal>,
    threads: Mutex<Vec<thread::JoinHandle<()>>>,
    /// The notification thread (set before it makes any callback): a blocking call made on
    /// it would wait for itself.
    notifier: Mutex<Option<thread::ThreadId>>,
    #[cfg(feature = "planted-fault")]
    fault: Fault,
}

/// The driver: the port lock around [`PortCore`], plus its notification thread and reset
/// worker. Cheap to clone (a shared handle).
#[derive(Clone)]
pub struct Driver {
    inner: Arc<Inner>,
}

impl Driver {
    /// `DriverEntry`: a driver with no device; spawns the notification thread and the
    /// reset worker. Call [`Self::unload`] to end them.
    /// The port's clock is a [`MonotonicClock`] (milliseconds since `DriverEntry`).
    pub fn new(config: Config, hal: Arc<dyn Hal>) -> Driver {
        Self::with_clock(config, hal, std::sync::Arc::new(MonotonicClock::new()))
    }

    /// Like [`Self::new`], with the time taken from `clock` (every input carries it).
    pub fn with_clock(
        config: Config,
        hal: Arc<dyn Hal>,
        clock: std::sync::Arc<dyn Clock>,
    ) -> Driver {
        Self::build(
            config,
            hal,
            clock,
            #[cfg(feature = "planted-fault")]
            Fault::None,
        )
    }

    /// Like [`Self::new`], with a planted fault.
    #[cfg(feature = "planted-fault")]
    pub fn with_fault(config: Config, hal: Arc<dyn Hal>, fault: Fault) -> Driver {
        Self::build(
            config,
            hal,
            std::sync::Arc::new(MonotonicClock::new()),
            fault,
        )
    }

    fn build(
        config: Config,
        hal: Arc<dyn Hal>,
        clock: std::sync::Arc<dyn Clock>,
        #[cfg(feature = "planted-fault")] fault: Fault,
    ) -> Driver {
        let driver = Driver {
            inner: Arc::new(Inner {
                core: Mutex::new(PortCore::with_clock(config, clock)),
                changed: Condvar::new(),
                hal,
                threads: Mutex::new(Vec::new()),
                notifier: Mutex::new(None),
                #[cfg(feature = "planted-fault")]
                fault,
            }),
        };
        let notifier = driver.clone();
        let worker = driver.clone();
        let handles = vec![
            thread::spawn(move || notifier.notification_thread()),
            thread::spawn(move || worker.reset_worker()),
        ];
        *lock(&driver.inner.threads) = handles;
        driver
    }

    /// Run `f` under the port lock, then wake every waiter.
    fn with<T>(&self, f: impl FnOnce(&mut PortCore<Callback, Arc<Irp>>) -> T) -> T {
        let mut core = lock(&self.inner.core);
        let result = f(&mut core);
        self.inner.changed.notify_all();
        result
    }

    /// `AddDevice`.
    pub fn add_device(&self, device: DeviceId) -> Result<(), NtStatus> {
        self.with(|c| c.add_device(device))
    }

    /// Describe a physical port of an added device.
    pub fn configure_port(
        &self,
        device: DeviceId,
        port: PhysPort,
        caps: PortCaps,
    ) -> Result<(), NtStatus> {
        self.with(|c| {
            c.feed(Input::ConfigurePort { device, port, caps })
                .map(drop)
        })
    }

    /// The PnP dispatch routine (`IRP_MJ_PNP`). Returns `STATUS_PENDING` if the IRP
    /// completes later, else the status it was completed with. Every IRP is completed
    /// exactly once, on the notification thread. For `IRP_MN_REMOVE_DEVICE` this blocks
    /// in `IoReleaseRemoveLockAndWait` until every remove-lock holder has released.
    pub fn dispatch_pnp(&self, irp: &Arc<Irp>) -> NtStatus {
        let (device, minor) = (irp.device, irp.minor);
        let mut core = lock(&self.inner.core);
        if let Err(status) = core.pnp_enter(device, minor) {
            drop(core);
            irp.complete(status);
            return status;
        }
        #[cfg(feature = "planted-fault")]
        let wait_for_holders = self.inner.fault != Fault::RemoveDoesNotWait;
        #[cfg(not(feature = "planted-fault"))]
        let wait_for_holders = true;
        if minor == PnpMinor::RemoveDevice && wait_for_holders {
            while !core.remove_lock(device).is_ok_and(|l| l.idle()) {
                core = wait(&self.inner.changed, core);
            }
        }
        let status = core.pnp_feed(device, minor, Arc::clone(irp));
        self.inner.changed.notify_all();
        if core.unload_emitted() {
            // The notification thread may have exited: complete refusals here.
            let leftovers: Vec<_> = core.fifo.drain(..).collect();
            drop(core);
            for work in leftovers {
                if let Work::CompleteIrp { irp, status } = work {
                    irp.complete(status);
                }
            }
        }
        status
    }

    /// Register a client for `device`'s reset events: the mlx4 interface it gets back is of
    /// the current epoch.
    pub fn register_client(
        &self,
        device: DeviceId,
        kind: ClientKind,
        callback: Callback,
    ) -> Result<MlxInterface, NtStatus> {
        let (handle, epoch) = self.with(|c| c.register(device, kind, callback))?;
        Ok(MlxInterface {
            driver: self.clone(),
            handle,
            epoch,
        })
    }

    /// `IRP_MJ_CREATE`: `client` opened a handle to the device (the core's `Input::Hold`).
    /// While it is open, `IRP_MN_QUERY_REMOVE_DEVICE` fails with `STATUS_DEVICE_BUSY`.
    /// One handle per client (a second: `STATUS_INVALID_DEVICE_REQUEST`); after remove
    /// began: `STATUS_DELETE_PENDING`.
    pub fn dispatch_create(&self, client: ClientHandle) -> Result<(), NtStatus> {
        self.with(|c| c.create_handle(client))
    }

    /// `IRP_MJ_CLOSE`: `client`'s handle is closed (the core's `Input::ReleaseHold`).
    pub fn dispatch_close(&self, client: ClientHandle) -> Result<(), NtStatus> {
        self.with(|c| c.close_handle(client))
    }

    /// The subnet manager changed a port's link state.
    pub fn link_changed(
        &self,
        device: DeviceId,
        port: PhysPort,
        state: LinkState,
    ) -> Result<(), NtStatus> {
        self.with(|c| {
            c.feed(Input::LinkChanged {
                device,
                port,
                state,
            })
            .map(drop)
        })
    }

    /// A catastrophic-error interrupt (its DPC): a reset request from the driver itself.
    pub fn catastrophic_error(&self, device: DeviceId) -> Result<(), NtStatus> {
        self.with(|c| c.feed(Input::FatalError { device }).map(drop))
    }

    /// The timer DPC: the clock reached [`Self::poll_timeout`]; feeds `Input::Timeout` at
    /// the clock's `now`.
    pub fn timeout(&self) -> Result<(), NtStatus> {
        self.with(PortCore::timeout)
    }

    /// When the next [`Self::timeout`] is due (the time of the port's clock).
    pub fn poll_timeout(&self) -> Option<Tick> {
        self.with(|c| c.poll_timeout())
    }

    /// `DriverUnload`: the core's fence over every device. Blocks until the core emitted
    /// `UnloadMayFinish` and the notification thread and reset worker have exited.
    /// A client still registered is told `Removed` and waited for: until it unregisters,
    /// or until [`Self::timeout`] passes its detach deadline (the port drives no timer itself).
    pub fn unload(&self) -> Result<(), NtStatus> {
        self.with(PortCore::unload)?;
        let threads = std::mem::take(&mut *lock(&self.inner.threads));
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }

    /// `IRP_MN_QUERY_PNP_DEVICE_STATE`: the device's `PNP_DEVICE_STATE` bits. After the core
    /// failed the device (a failed start or hardware reset, a trusted client that missed its
    /// deadline, an exhausted epoch) the port called `IoInvalidateDeviceState` and answers
    /// [`PnpDeviceState::FAILED`] until the device is removed.
    pub fn pnp_device_state(&self, device: DeviceId) -> Result<PnpDeviceState, NtStatus> {
        self.with(|c| c.pnp_device_state(device))
    }

    /// Why the device failed (see [`PortCore::failure`]).
    pub fn failure(&self, device: DeviceId) -> Option<FailureCause> {
        self.with(|c| c.failure(device))
    }

    /// Port-level anomalies (see [`PortCore::anomalies`]).
    pub fn anomalies(&self) -> u32 {
        self.with(|c| c.anomalies())
    }

    /// Run `f` on the port state under the lock (diagnostics and tests).
    pub fn inspect<T>(&self, f: impl FnOnce(&PortCore<Callback, Arc<Irp>>) -> T) -> T {
        f(&lock(&self.inner.core))
    }

    /// Whether the caller is the notification thread (inside a client callback, or the
    /// port's own hardware start/shutdown/release).
    fn on_notification_thread(&self) -> bool {
        *lock(&self.inner.notifier) == Some(thread::current().id())
    }

    fn notification_thread(&self) {
        *lock(&self.inner.notifier) = Some(thread::current().id());
        let mut core = lock(&self.inner.core);
        loop {
            let Some(work) = core.fifo.pop_front() else {
                if core.unload_emitted() {
                    return;
                }
                core = wait(&self.inner.changed, core);
                continue;
            };
            match work {
                Work::Callback {
                    client,
                    event,
                    callback,
                } => {
                    #[cfg(feature = "planted-fault")]
                    let under_lock = self.inner.fault == Fault::CallbackUnderLock;
                    #[cfg(not(feature = "planted-fault"))]
                    let under_lock = false;
                    if under_lock {
                        if let Some(cb) = callback {
                            cb(event); // PLANTED FAULT: the port lock is held here.
                        }
                    } else {
                        drop(core);
                        if let Some(cb) = callback {
                            cb(event);
                        }
                        core = lock(&self.inner.core);
                    }
                    core.callback_done(client);
                }
                Work::HardwareStart(device) => {
                    drop(core);
                    let result = self.inner.hal.start(device);
                    core = lock(&self.inner.core);
                    core.start_done(device, result);
                }
                Work::HardwareShutdown(device) => {
                    drop(core);
                    self.inner.hal.shutdown(device);
                    core = lock(&self.inner.core);
                }
                Work::HardwareRelease(device) => {
                    drop(core);
                    self.inner.hal.release(device);
                    core = lock(&self.inner.core);
                }
                Work::CompleteIrp { irp, status } => {
                    drop(core);
                    irp.complete(status);
                    core = lock(&self.inner.core);
                }
                // `IoInvalidateDeviceState`: the failed state is already recorded under the
                // port lock, where `pnp_device_state` (IRP_MN_QUERY_PNP_DEVICE_STATE) reads it.
                Work::InvalidateDeviceState { .. }
                | Work::CycleFinished(..)
                | Work::Fenced(_)
                | Work::ClientGone(_)
                | Work::DeviceRemoved(_)
                | Work::UnloadMayFinish => {}
            }
            self.inner.changed.notify_all();
        }
    }

    fn reset_worker(&self) {
        let mut core = lock(&self.inner.core);
        loop {
            let Some(device) = core.reset_jobs.pop_front() else {
                if core.unload_emitted() {
                    return;
                }
                core = wait(&self.inner.changed, core);
                continue;
            };
            drop(core);
            let result = self.inner.hal.reset(device);
            core = lock(&self.inner.core);
            core.reset_done(device, result);
            self.inner.changed.notify_all();
        }
    }
}

/// The mlx4 bus interface as one client holds it: the client's handle and the epoch of the
/// interface. After RESET_END, [`Self::acquire`] hands out a fresh one.
#[derive(Clone)]
pub struct MlxInterface {
    driver: Driver,
    handle: ClientHandle,
    epoch: Epoch,
}

impl MlxInterface {
    /// The client's handle.
    pub fn handle(&self) -> ClientHandle {
        self.handle
    }

    /// The interface's epoch.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// `reset_request`: ask for a soft reset (joined, scheduled or refused).
    pub fn reset_request(&self) -> Result<ResetAnswer, NtStatus> {
        self.driver.with(|c| c.reset_request(self.handle))
    }

    /// `reset_execute`: the client quiesced and answers RESET.
    pub fn reset_execute(&self) -> Result<(), NtStatus> {
        self.driver.with(|c| c.reset_execute(self.handle))
    }

    /// The client cannot pause its work: `IRP_MN_QUERY_STOP_DEVICE` fails
    /// (`STATUS_DEVICE_BUSY`) until [`Self::can_pause`].
    pub fn cannot_pause(&self) -> Result<(), NtStatus> {
        self.driver.with(|c| c.cannot_pause(self.handle))
    }

    /// The client can pause its work again.
    pub fn can_pause(&self) -> Result<(), NtStatus> {
        self.driver.with(|c| c.can_pause(self.handle))
    }

    /// Acquire the current interface (after RESET_END: a fresh epoch).
    pub fn acquire(&self) -> Result<MlxInterface, NtStatus> {
        let epoch = self.driver.with(|c| c.acquire_interface(self.handle))?;
        Ok(MlxInterface {
            driver: self.driver.clone(),
            handle: self.handle,
            epoch,
        })
    }

    /// A hardware operation through this interface: holds the remove lock across the
    /// core's check and the operation itself (`IoAcquireRemoveLock` ... `IoReleaseRemoveLock`).
    /// The operation is in flight in the core from the grant until it returns (then
    /// `AccessDone` is fed, unless the client was fenced meanwhile): no stop, hardware reset
    /// or removal teardown is commanded under it.
    pub fn hardware_op(&self) -> Result<(), NtStatus> {
        let device = self.handle.device;
        self.driver.with(|c| {
            c.remove_lock(device)?.acquire()?;
            let granted = c.access_hardware(self.handle, self.epoch);
            if granted.is_err() {
                if let Ok(l) = c.remove_lock(device) {
                    l.release();
                }
            }
            granted.map(drop)
        })?;
        self.driver.inner.hal.client_op(device, self.handle);
        self.driver.with(|c| {
            c.access_done(self.handle);
            if let Ok(l) = c.remove_lock(device) {
                l.release();
            }
        });
        Ok(())
    }

    /// Unregister and block until no callback of this client runs or will run (the core's
    /// `ClientGone`). Idempotent. Called from inside any client's callback (on the
    /// notification thread, which alone could deliver what it would wait for) it changes
    /// nothing and fails with `STATUS_POSSIBLE_DEADLOCK`, like Linux's `EDEADLK`: use
    /// [`Self::unregister_nowait`] there.
    pub fn unregister(&self) -> Result<Unregistered, NtStatus> {
        if self.driver.on_notification_thread() {
            return Err(NtStatus::POSSIBLE_DEADLOCK);
        }
        let inner = &self.driver.inner;
        let mut core = lock(&inner.core);
        let result = core.unregister(self.handle);
        inner.changed.notify_all();
        while core.client_known(self.handle) {
            core = wait(&inner.changed, core);
        }
        result
    }

    /// Unregister without waiting (from inside a callback); the client is gone once the
    /// port's `ClientGone` is delivered.
    pub fn unregister_nowait(&self) -> Result<Unregistered, NtStatus> {
        self.driver.with(|c| c.unregister(self.handle))
    }
}
