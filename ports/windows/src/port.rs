//! The port's non-blocking core: the lifecycle machine plus the OS-side bookkeeping (IRPs
//! pending completion, client callbacks, remove locks, the delivery queue). Every method is
//! called with the port lock held and never blocks; the threaded [`crate::Driver`] and the
//! cooperative [`crate::race`] harness both drive it. No lifecycle rule lives here: each
//! OS request becomes one core input, each core output one [`Work`] item.

use std::collections::VecDeque;
use std::sync::Arc;

use pnp_lifecycle::{
    queue_capacity, Access, ClientHandle, ClientKind, Config, CycleOutcome, DeviceId, Epoch, Event,
    FailureCause, HardwareCommand, Input, Lifecycle, Output, Reply, RequestToken, ResetAnswer,
    ResetResult, StartResult, Tick, Unregistered,
};

use crate::clock::{Clock, MonotonicClock};
use crate::ntstatus::NtStatus;

/// Devices one driver instance can own.
pub const DEVICES: usize = 2;
/// Client slots per device.
pub const CLIENTS: usize = 4;
/// Physical ports per device.
pub const PORTS: usize = 2;
/// The core machine the port drives.
pub type Machine = Lifecycle<DEVICES, CLIENTS, PORTS, { queue_capacity(DEVICES, CLIENTS) }>;

/// The PnP minor codes the dispatch handles (`IRP_MN_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PnpMinor {
    /// `IRP_MN_START_DEVICE`
    StartDevice,
    /// `IRP_MN_QUERY_REMOVE_DEVICE`
    QueryRemoveDevice,
    /// `IRP_MN_CANCEL_REMOVE_DEVICE`
    CancelRemoveDevice,
    /// `IRP_MN_REMOVE_DEVICE`
    RemoveDevice,
    /// `IRP_MN_SURPRISE_REMOVAL`
    SurpriseRemoval,
    /// `IRP_MN_QUERY_STOP_DEVICE`
    QueryStopDevice,
    /// `IRP_MN_STOP_DEVICE`
    StopDevice,
    /// `IRP_MN_CANCEL_STOP_DEVICE`
    CancelStopDevice,
}

impl PnpMinor {
    /// The Windows name of the minor code.
    pub const fn name(self) -> &'static str {
        match self {
            PnpMinor::StartDevice => "IRP_MN_START_DEVICE",
            PnpMinor::QueryRemoveDevice => "IRP_MN_QUERY_REMOVE_DEVICE",
            PnpMinor::CancelRemoveDevice => "IRP_MN_CANCEL_REMOVE_DEVICE",
            PnpMinor::RemoveDevice => "IRP_MN_REMOVE_DEVICE",
            PnpMinor::SurpriseRemoval => "IRP_MN_SURPRISE_REMOVAL",
            PnpMinor::QueryStopDevice => "IRP_MN_QUERY_STOP_DEVICE",
            PnpMinor::StopDevice => "IRP_MN_STOP_DEVICE",
            PnpMinor::CancelStopDevice => "IRP_MN_CANCEL_STOP_DEVICE",
        }
    }

    /// The core input for this request.
    pub const fn input(self, device: DeviceId, token: RequestToken) -> Input {
        match self {
            PnpMinor::StartDevice => Input::Start { device, token },
            PnpMinor::QueryRemoveDevice => Input::QueryRemove { device, token },
            PnpMinor::CancelRemoveDevice => Input::CancelRemove { device, token },
            PnpMinor::RemoveDevice => Input::Remove { device, token },
            PnpMinor::SurpriseRemoval => Input::SurpriseRemoval { device },
            PnpMinor::QueryStopDevice => Input::QueryStop { device, token },
            PnpMinor::StopDevice => Input::Stop { device, token },
            PnpMinor::CancelStopDevice => Input::CancelStop { device, token },
        }
    }
}

/// A device's `PNP_DEVICE_STATE` bits, as the driver answers
/// `IRP_MN_QUERY_PNP_DEVICE_STATE` (the query the PnP manager sends after
/// `IoInvalidateDeviceState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PnpDeviceState(pub u32);

impl PnpDeviceState {
    /// No bit set: the device works.
    pub const NONE: PnpDeviceState = PnpDeviceState(0);
    /// `PNP_DEVICE_DISABLED`.
    pub const DISABLED: PnpDeviceState = PnpDeviceState(0x0000_0001);
    /// `PNP_DEVICE_DONT_DISPLAY_IN_UI`.
    pub const DONT_DISPLAY_IN_UI: PnpDeviceState = PnpDeviceState(0x0000_0002);
    /// `PNP_DEVICE_FAILED`: the PnP manager stops the device and sends it remove.
    pub const FAILED: PnpDeviceState = PnpDeviceState(0x0000_0004);
    /// `PNP_DEVICE_REMOVED`.
    pub const REMOVED: PnpDeviceState = PnpDeviceState(0x0000_0008);

    /// Whether every bit of `bits` is set.
    pub const fn contains(self, bits: PnpDeviceState) -> bool {
        self.0 & bits.0 == bits.0
    }

    /// Whether `PNP_DEVICE_FAILED` is set.
    pub const fn failed(self) -> bool {
        self.contains(Self::FAILED)
    }
}

/// The state of one `IO_REMOVE_LOCK`: an I/O count biased by one at initialisation, and
/// the removed flag `IoReleaseRemoveLockAndWait` sets.
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
    /// acquisition and the bias. The caller then waits for [`Self::idle`].
    pub fn release_for_remove(&mut self) {
        self.removed = true;
        self.count = self.count.saturating_sub(2);
    }

    /// Whether no holder is left (what `IoReleaseRemoveLockAndWait` waits for).
    pub const fn idle(&self) -> bool {
        self.count == 0
    }

    /// Whether remove began.
    pub const fn removed(&self) -> bool {
        self.removed
    }

    /// Current holders (the bias counts as one until remove).
    pub const fn holders(&self) -> u32 {
        self.count
    }
}

impl Default for RemoveLockState {
    fn default() -> Self {
        Self::new()
    }
}

/// One thing to do outside the port lock, in core output order.
#[derive(Debug, Clone)]
pub enum Work<Cb, R> {
    /// Call the client's callback with `event`, then [`PortCore::callback_done`].
    Callback {
        /// The client.
        client: ClientHandle,
        /// The event (RESET, RESET_END, Removed, Revoked, link...). The core's
        /// `Event::Recovered` (a cycle that ended without a hardware reset) is delivered as
        /// `RESET_END` with the unchanged epoch: the mlx4 interface has no other end of a
        /// reset, and acquiring the interface again hands out the same epoch.
        event: Event,
        /// The callback the client registered (`None` only if the core named a client the
        /// port never saw, which [`PortCore::anomalies`] counts).
        callback: Option<Cb>,
    },
    /// Start the hardware, then [`PortCore::start_done`].
    HardwareStart(DeviceId),
    /// Quiesce the hardware (fire and forget).
    HardwareShutdown(DeviceId),
    /// Release resources (fire and forget).
    HardwareRelease(DeviceId),
    /// Complete an IRP (`IoCompleteRequest`).
    CompleteIrp {
        /// The IRP.
        irp: R,
        /// Its final status.
        status: NtStatus,
    },
    /// A reset cycle ended.
    CycleFinished(DeviceId, CycleOutcome),
    /// The device failed (`Output::DeviceFailed`): `IoInvalidateDeviceState`. The port
    /// already set `PNP_DEVICE_FAILED` in the device's state
    /// ([`PortCore::pnp_device_state`]), which `IRP_MN_QUERY_PNP_DEVICE_STATE` answers; the
    /// PnP manager then stops the device and sends it remove.
    InvalidateDeviceState {
        /// The device.
        device: DeviceId,
        /// Why it failed.
        cause: FailureCause,
    },
    /// The client was revoked with a callback or a hardware operation in flight and the
    /// port fenced it: its queued callback (if it had not started) was cancelled, every
    /// later call through its interface fails (`STATUS_ACCESS_DENIED`), and `FenceDone` was
    /// fed (at once, or, if a hardware operation of the client is running, once it returns
    /// or the config's `operation_timeout` passed, whichever is first: see
    /// [`PortCore::timeout`]). A callback still running is not waited for: it can no
    /// longer reach the hardware through the port, and its late return (or a late
    /// operation's end) is not reported to the core.
    Fenced(ClientHandle),
    /// A client's slot is free (a blocking unregister may return).
    ClientGone(ClientHandle),
    /// A device is gone.
    DeviceRemoved(DeviceId),
    /// Driver unload may finish (the last item ever).
    UnloadMayFinish,
}

/// The port state guarded by the port lock. `Cb` is what a client registered to be called
/// with; `R` is the port's handle to an IRP.
#[derive(Debug)]
pub struct PortCore<Cb, R> {
    machine: Machine,
    irps: Vec<(DeviceId, RequestToken, R)>,
    clients: Vec<(ClientHandle, Cb)>,
    /// Work to do outside the lock, in core output order.
    pub fifo: VecDeque<Work<Cb, R>>,
    /// Devices whose hardware reset was commanded: the reset worker's queue.
    pub reset_jobs: VecDeque<DeviceId>,
    locks: [RemoveLockState; DEVICES],
    anomalies: u32,
    unload_emitted: bool,
    clock: Arc<dyn Clock>,
    /// Clients the core asked the port to fence (kept: a handle is never reused).
    fenced: Vec<ClientHandle>,
    /// Fences carried out whose `FenceDone` is still to be fed.
    fence_done_owed: VecDeque<ClientHandle>,
    /// Granted hardware operations still running, one entry per operation.
    ops_in_flight: Vec<ClientHandle>,
    /// Fences waiting for a running hardware operation, until a deadline.
    fence_waiting: Vec<(ClientHandle, Tick)>,
    /// How long a fence waits out a running hardware operation.
    fence_grace: u64,
    /// Each device's `PNP_DEVICE_STATE` and, once failed, why.
    pnp_state: [(PnpDeviceState, Option<FailureCause>); DEVICES],
    /// `IoInvalidateDeviceState` calls made.
    invalidations: u32,
    /// The last core token minted for an IRP (see [`Self::pnp_feed`]).
    last_token: u32,
}

impl<Cb: Clone, R> PortCore<Cb, R> {
    /// A port with no device, on a [`MonotonicClock`] (milliseconds since now).
    pub fn new(config: Config) -> Self {
        Self::with_clock(config, Arc::new(MonotonicClock::new()))
    }

    /// A port with no device whose inputs carry `clock`'s time.
    pub fn with_clock(config: Config, clock: Arc<dyn Clock>) -> Self {
        PortCore {
            machine: Machine::new(config),
            irps: Vec::new(),
            clients: Vec::new(),
            fifo: VecDeque::new(),
            reset_jobs: VecDeque::new(),
            locks: [RemoveLockState::new(); DEVICES],
            anomalies: 0,
            unload_emitted: false,
            clock,
            fenced: Vec::new(),
            fence_done_owed: VecDeque::new(),
            ops_in_flight: Vec::new(),
            fence_waiting: Vec::new(),
            fence_grace: config.operation_timeout,
            pnp_state: [(PnpDeviceState::NONE, None); DEVICES],
            invalidations: 0,
            last_token: 0,
        }
    }

    /// The port's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Whether the port fenced this client.
    pub fn is_fenced(&self, client: ClientHandle) -> bool {
        self.fenced.contains(&client)
    }

    /// The core machine (read-only: every change goes through an input).
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// `IRP_MN_QUERY_PNP_DEVICE_STATE`: the device's `PNP_DEVICE_STATE` bits
    /// (`PNP_DEVICE_FAILED` from the core's `Output::DeviceFailed` until the device is
    /// removed). `STATUS_NO_SUCH_DEVICE` for a device slot this driver does not have.
    pub fn pnp_device_state(&self, device: DeviceId) -> Result<PnpDeviceState, NtStatus> {
        self.pnp_state
            .get(usize::from(device.0))
            .map(|(state, _)| *state)
            .ok_or(NtStatus::NO_SUCH_DEVICE)
    }

    /// Why the device failed, as the port recorded it from `Output::DeviceFailed` (until the
    /// device is removed).
    pub fn failure(&self, device: DeviceId) -> Option<FailureCause> {
        self.pnp_state
            .get(usize::from(device.0))
            .and_then(|(_, cause)| *cause)
    }

    /// How many times the port called `IoInvalidateDeviceState`.
    pub fn invalidations(&self) -> u32 {
        self.invalidations
    }

    /// Core answers the port did not expect (a refused `CallbackDone`, a notification to a
    /// client the port never registered). Stays zero unless the core or the port is wrong.
    pub fn anomalies(&self) -> u32 {
        self.anomalies
    }

    /// Whether `UnloadMayFinish` came out of the core.
    pub fn unload_emitted(&self) -> bool {
        self.unload_emitted
    }

    /// Whether the client's registration is still known to the port (until `ClientGone`).
    pub fn client_known(&self, client: ClientHandle) -> bool {
        self.clients.iter().any(|(h, _)| *h == client)
    }

    /// Whether a device's remove lock has no holder left (false for an unknown device).
    pub fn lock_idle(&self, device: DeviceId) -> bool {
        self.locks
            .get(usize::from(device.0))
            .is_some_and(RemoveLockState::idle)
    }

    /// The remove lock of a device.
    pub fn remove_lock(&mut self, device: DeviceId) -> Result<&mut RemoveLockState, NtStatus> {
        self.locks
            .get_mut(usize::from(device.0))
            .ok_or(NtStatus::NO_SUCH_DEVICE)
    }

    /// Feed one input at the clock's `now` (read here, under the port lock, so inputs
    /// reach the core in clock order); on success move every output to the work queue.
    pub fn feed(&mut self, input: Input) -> Result<Reply, NtStatus> {
        let now = self.clock.now();
        let reply = self.machine.handle(now, input).map_err(NtStatus::from)?;
        self.drain();
        Ok(reply)
    }

    /// Route every output; feed the `FenceDone` of every fence carried out meanwhile.
    fn drain(&mut self) {
        loop {
            while let Some(output) = self.machine.poll_output() {
                self.route(output);
            }
            let Some(client) = self.fence_done_owed.pop_front() else {
                return;
            };
            let now = self.clock.now();
            if self
                .machine
                .handle(now, Input::FenceDone { client })
                .is_err()
            {
                self.anomalies += 1;
            }
        }
    }

    /// The fence, in Windows terms: cancel the client's callback if it is still queued
    /// (complete its outstanding request), tear down its mapping (every later call through
    /// its interface is refused by the core: `STATUS_ACCESS_DENIED`), and report it done.
    /// Never blocks. A hardware operation of the client still running is waited out (the
    /// fence is done when it returns, or at the first [`Self::timeout`] past the config's
    /// `operation_timeout`), so the hardware is not touched under it.
    fn fence(&mut self, client: ClientHandle) {
        if !self.fenced.contains(&client) {
            self.fenced.push(client);
        }
        self.fifo
            .retain(|w| !matches!(w, Work::Callback { client: c, .. } if *c == client));
        if self.ops_in_flight.contains(&client) {
            let deadline = self.clock.now().after(self.fence_grace);
            self.fence_waiting.push((client, deadline));
        } else {
            self.fence_done_owed.push_back(client);
        }
    }

    /// Fences whose grace passed: done, whether or not the operation returned.
    fn expire_fences(&mut self) {
        let now = self.clock.now();
        let mut i = 0;
        while i < self.fence_waiting.len() {
            if self.fence_waiting[i].1 <= now {
                let (client, _) = self.fence_waiting.remove(i);
                self.fence_done_owed.push_back(client);
            } else {
                i += 1;
            }
        }
    }

    fn route(&mut self, output: Output) {
        let work = match output {
            Output::Notify { client, event } => {
                // A cycle that ended without a hardware reset: RESET_END, same epoch.
                let event = match event {
                    Event::Recovered { epoch } => Event::ResetEnd { epoch },
                    other => other,
                };
                let callback = self
                    .clients
                    .iter()
                    .find(|(h, _)| *h == client)
                    .map(|(_, cb)| cb.clone());
                if callback.is_none() {
                    self.anomalies += 1;
                }
                Work::Callback {
                    client,
                    event,
                    callback,
                }
            }
            Output::Hardware { device, command } => match command {
                HardwareCommand::Start => Work::HardwareStart(device),
                HardwareCommand::Reset => {
                    self.reset_jobs.push_back(device);
                    return;
                }
                HardwareCommand::Shutdown => Work::HardwareShutdown(device),
                HardwareCommand::ReleaseResources => Work::HardwareRelease(device),
                // Power (issue 15): this port feeds no power input yet, so the core never
                // commands one; the power vocabulary comes with the port's part of issue 15.
                HardwareCommand::PowerDown | HardwareCommand::PowerUp => {
                    self.anomalies += 1;
                    return;
                }
            },
            Output::Complete {
                device,
                token,
                status,
            } => {
                let Some(pos) = self
                    .irps
                    .iter()
                    .position(|(d, t, _)| *d == device && *t == token)
                else {
                    self.anomalies += 1;
                    return;
                };
                let (_, _, irp) = self.irps.swap_remove(pos);
                Work::CompleteIrp {
                    irp,
                    status: status.into(),
                }
            }
            Output::ResetCycleFinished { device, outcome } => Work::CycleFinished(device, outcome),
            Output::Fence { client } => {
                self.fence(client);
                Work::Fenced(client)
            }
            Output::ClientGone { client } => {
                self.clients.retain(|(h, _)| *h != client);
                Work::ClientGone(client)
            }
            Output::DeviceFailed { device, cause } => {
                match self.pnp_state.get_mut(usize::from(device.0)) {
                    Some(slot) => {
                        slot.0 .0 |= PnpDeviceState::FAILED.0;
                        slot.1 = Some(cause);
                    }
                    None => self.anomalies += 1,
                }
                self.invalidations += 1;
                Work::InvalidateDeviceState { device, cause }
            }
            Output::DeviceRemoved { device } => {
                // The slot is free: a device added there later starts with a clean state.
                if let Some(slot) = self.pnp_state.get_mut(usize::from(device.0)) {
                    *slot = (PnpDeviceState::NONE, None);
                }
                Work::DeviceRemoved(device)
            }
            Output::UnloadMayFinish => {
                self.unload_emitted = true;
                Work::UnloadMayFinish
            }
        };
        self.fifo.push_back(work);
    }

    /// `AddDevice`: once the core accepted the device, `IoInitializeRemoveLock` on its
    /// remove lock. A device added again in a slot whose earlier device was removed must
    /// not inherit that device's removed lock (every `IoAcquireRemoveLock` would fail with
    /// `STATUS_DELETE_PENDING` forever). The core refuses `AddDevice` while the slot is
    /// still occupied, and no holder of the old lock is left once the old device's
    /// `IRP_MN_REMOVE_DEVICE` got past `IoReleaseRemoveLockAndWait`, so re-initialising
    /// here cannot disturb anyone.
    pub fn add_device(&mut self, device: DeviceId) -> Result<(), NtStatus> {
        self.feed(Input::AddDevice { device })?;
        *self.remove_lock(device)? = RemoveLockState::new();
        Ok(())
    }

    /// Top of the PnP dispatch: `IoAcquireRemoveLock`, and for `IRP_MN_REMOVE_DEVICE` the
    /// first half of `IoReleaseRemoveLockAndWait`. On `Err` the IRP must be completed with
    /// the status (see [`Self::fail_irp`]).
    pub fn pnp_enter(&mut self, device: DeviceId, minor: PnpMinor) -> Result<(), NtStatus> {
        let lock = self.remove_lock(device)?;
        lock.acquire()?;
        if minor == PnpMinor::RemoveDevice {
            lock.release_for_remove();
        }
        Ok(())
    }

    /// Queue the completion of an IRP the port refuses without the core.
    pub fn fail_irp(&mut self, irp: R, status: NtStatus) {
        self.fifo.push_back(Work::CompleteIrp { irp, status });
    }

    /// The rest of the PnP dispatch, after [`Self::pnp_enter`] (and, for remove, after the
    /// remove lock went idle): feed the request to the core. The IRP completes through a
    /// [`Work::CompleteIrp`]: at once if the core refuses (status from the error), or when
    /// the core completes its token. Returns `STATUS_PENDING` or the status it completes
    /// with.
    ///
    /// Token collisions are decided in one place, here, and cannot happen: the core token
    /// of an IRP is minted by the port (a counter that skips tokens still pending), never
    /// taken from the caller. An IRP is identified by its handle `R` (the IRP pointer in
    /// Windows), not by a number the caller chose, so the port must not refuse it over such
    /// a number; and whether a request may overlap one still pending is a lifecycle rule,
    /// which only the core decides (it refuses with `RequestPending` / `InvalidState`).
    ///
    /// `IRP_MN_SURPRISE_REMOVAL` has no token in the core and cannot be vetoed: the core
    /// accepts it in every state where the device is present. The port completes it only
    /// after the core took it (queued behind every output of that input), with the core's
    /// refusal status only if the core refused it (no such device, unloaded).
    pub fn pnp_feed(&mut self, device: DeviceId, minor: PnpMinor, irp: R) -> NtStatus {
        if minor != PnpMinor::RemoveDevice {
            if let Ok(lock) = self.remove_lock(device) {
                lock.release();
            }
        }
        let token = self.mint_token();
        if minor == PnpMinor::SurpriseRemoval {
            let status = match self.feed(minor.input(device, token)) {
                Ok(_) => NtStatus::SUCCESS,
                Err(status) => status,
            };
            self.fail_irp(irp, status);
            return status;
        }
        self.irps.push((device, token, irp));
        match self.feed(minor.input(device, token)) {
            Ok(_) => NtStatus::PENDING,
            Err(status) => {
                if let Some(pos) = self.irps.iter().position(|(_, t, _)| *t == token) {
                    let (_, _, irp) = self.irps.swap_remove(pos);
                    self.fail_irp(irp, status);
                }
                status
            }
        }
    }

    /// A core token no pending IRP holds.
    fn mint_token(&mut self) -> RequestToken {
        loop {
            self.last_token = self.last_token.wrapping_add(1);
            let token = RequestToken(self.last_token);
            if !self.irps.iter().any(|(_, t, _)| *t == token) {
                return token;
            }
        }
    }

    /// Register a client (the mlx4 `register_event_handler`), taking the remove lock for
    /// the call.
    pub fn register(
        &mut self,
        device: DeviceId,
        kind: ClientKind,
        callback: Cb,
    ) -> Result<(ClientHandle, Epoch), NtStatus> {
        self.remove_lock(device)?.acquire()?;
        let result = self.feed(Input::Register { device, kind });
        self.remove_lock(device)?.release();
        match result? {
            Reply::Registered { client, epoch } => {
                self.clients.push((client, callback));
                Ok((client, epoch))
            }
            _ => {
                self.anomalies += 1;
                Err(NtStatus::INVALID_DEVICE_STATE)
            }
        }
    }

    /// A client call that holds the device's remove lock while the core takes it.
    pub fn client_call(&mut self, input: Input) -> Result<Reply, NtStatus> {
        let device = input.device().ok_or(NtStatus::NO_SUCH_DEVICE)?;
        self.remove_lock(device)?.acquire()?;
        let result = self.feed(input);
        self.remove_lock(device)?.release();
        result
    }

    /// `reset_request`.
    pub fn reset_request(&mut self, client: ClientHandle) -> Result<ResetAnswer, NtStatus> {
        match self.client_call(Input::ResetRequest { client })? {
            Reply::Reset(answer) => Ok(answer),
            _ => Err(NtStatus::INVALID_DEVICE_STATE),
        }
    }

    /// `reset_execute`: the client quiesced and answers RESET.
    pub fn reset_execute(&mut self, client: ClientHandle) -> Result<(), NtStatus> {
        self.client_call(Input::ResetExecute { client }).map(drop)
    }

    /// A hardware operation through the interface of `epoch` may begin (the core's grant).
    /// It is in flight until [`Self::access_done`]; the caller holds the remove lock.
    pub fn access_hardware(&mut self, client: ClientHandle, epoch: Epoch) -> Result<(), NtStatus> {
        self.feed(Input::Access {
            client,
            epoch,
            what: Access::HardwareOp,
        })?;
        self.ops_in_flight.push(client);
        Ok(())
    }

    /// A granted hardware operation returned. Not reported for a fenced client (same rule
    /// as [`Self::callback_done`]); a fence that waited for it is done.
    pub fn access_done(&mut self, client: ClientHandle) {
        if let Some(pos) = self.ops_in_flight.iter().position(|c| *c == client) {
            self.ops_in_flight.swap_remove(pos);
        }
        if self.fenced.contains(&client) {
            if !self.ops_in_flight.contains(&client) {
                if let Some(pos) = self.fence_waiting.iter().position(|(c, _)| *c == client) {
                    self.fence_waiting.remove(pos);
                    self.fence_done_owed.push_back(client);
                    self.drain();
                }
            }
            return;
        }
        if self.feed(Input::AccessDone { client }).is_err() {
            self.anomalies += 1;
        }
    }

    /// The client cannot pause its work: query stop is vetoed until [`Self::can_pause`].
    pub fn cannot_pause(&mut self, client: ClientHandle) -> Result<(), NtStatus> {
        self.client_call(Input::CannotPause { client }).map(drop)
    }

    /// The client can pause its work again.
    pub fn can_pause(&mut self, client: ClientHandle) -> Result<(), NtStatus> {
        self.client_call(Input::CanPause { client }).map(drop)
    }

    /// Acquire the current interface (after RESET_END).
    pub fn acquire_interface(&mut self, client: ClientHandle) -> Result<Epoch, NtStatus> {
        match self.client_call(Input::AcquireInterface { client })? {
            Reply::Interface(epoch) => Ok(epoch),
            _ => Err(NtStatus::INVALID_DEVICE_STATE),
        }
    }

    /// `IRP_MJ_CREATE` for a client: it opened a handle to the device (`Input::Hold`);
    /// `IRP_MN_QUERY_REMOVE_DEVICE` is vetoed (`STATUS_DEVICE_BUSY`) until
    /// [`Self::close_handle`]. Takes the remove lock for the call, as a create dispatch
    /// does (after remove began: `STATUS_DELETE_PENDING`).
    pub fn create_handle(&mut self, client: ClientHandle) -> Result<(), NtStatus> {
        self.client_call(Input::Hold { client }).map(drop)
    }

    /// `IRP_MJ_CLOSE`: the client's handle is closed (`Input::ReleaseHold`). No remove
    /// lock: closing must work while delete is pending.
    pub fn close_handle(&mut self, client: ClientHandle) -> Result<(), NtStatus> {
        self.feed(Input::ReleaseHold { client }).map(drop)
    }

    /// Unregister (no remove lock: detaching must work while delete is pending). The
    /// caller waits until [`Self::client_known`] is false for a blocking unregister.
    pub fn unregister(&mut self, client: ClientHandle) -> Result<Unregistered, NtStatus> {
        match self.feed(Input::Unregister { client })? {
            Reply::Unregistered(u) => Ok(u),
            _ => Err(NtStatus::INVALID_DEVICE_STATE),
        }
    }

    /// A callback returned. Not reported for a fenced client: the fence ended the
    /// core's wait for it.
    pub fn callback_done(&mut self, client: ClientHandle) {
        if self.fenced.contains(&client) {
            return;
        }
        if self.feed(Input::CallbackDone { client }).is_err() {
            self.anomalies += 1;
        }
    }

    /// The hardware start finished.
    pub fn start_done(&mut self, device: DeviceId, result: StartResult) {
        if self.feed(Input::StartDone { device, result }).is_err() {
            self.anomalies += 1;
        }
    }

    /// The reset worker finished a hardware reset.
    pub fn reset_done(&mut self, device: DeviceId, result: ResetResult) {
        if self.feed(Input::ResetDone { device, result }).is_err() {
            self.anomalies += 1;
        }
    }

    /// The timer fired: end the fences whose wait for an operation passed its grace, then
    /// feed `Input::Timeout` at the clock's `now` (due when the clock reaches
    /// [`Self::poll_timeout`]; feeding it early is harmless).
    pub fn timeout(&mut self) -> Result<(), NtStatus> {
        self.expire_fences();
        self.drain();
        self.feed(Input::Timeout).map(drop)
    }

    /// When the core (or a fence waiting out an operation) next needs [`Self::timeout`].
    pub fn poll_timeout(&self) -> Option<Tick> {
        let fences = self.fence_waiting.iter().map(|(_, t)| *t).min();
        match (self.machine.poll_timeout(), fences) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// `DriverUnload`: the core's unload fence.
    pub fn unload(&mut self) -> Result<(), NtStatus> {
        self.feed(Input::Unload).map(drop)
    }
}
