//! The vocabulary of the machine: identifiers, inputs, outputs, client events and errors.

use crate::table::{InputKind, PhaseKind};

ordered_type! {
    /// Which device of the driver an input or output concerns: an index below the
    /// machine's `DEVICES` capacity, chosen by the owner at [`Input::AddDevice`].
    pub struct DeviceId(pub u8);
}

ordered_type! {
    /// A device's *physical* port (what InfiniBand calls a port: one cable, one link), an
    /// index below the machine's `PORTS` capacity. Named so that it cannot be confused
    /// with the OS ports in `ports/`.
    pub struct PhysPort(pub u8);
}

ordered_type! {
    /// A set of physical ports, one bit per [`PhysPort`] (so at most 8 ports a device).
    pub struct PortSet(pub u8);
}

impl PortSet {
    /// The empty set.
    pub const EMPTY: PortSet = PortSet(0);

    /// The set holding only `port` (empty if the index is 8 or more).
    #[must_use]
    pub const fn single(port: PhysPort) -> PortSet {
        if port.0 < 8 {
            PortSet(1 << port.0)
        } else {
            PortSet(0)
        }
    }

    /// This set with `port` added.
    #[must_use]
    pub const fn with(self, port: PhysPort) -> PortSet {
        PortSet(self.0 | PortSet::single(port).0)
    }

    /// Whether `port` is in the set.
    #[must_use]
    pub const fn contains(self, port: PhysPort) -> bool {
        port.0 < 8 && self.0 & (1 << port.0) != 0
    }

    /// Whether the set is empty.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// How many ports the set holds.
    #[must_use]
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// The ports of the set, lowest first.
    pub fn iter(self) -> impl Iterator<Item = PhysPort> {
        (0u8..8).map(PhysPort).filter(move |p| self.contains(*p))
    }
}

ordered_type! {
    /// A reset group: devices that share one hardware reset (the functions of one chip, a
    /// physical function and its virtual functions), declared by the owner with
    /// [`Input::JoinResetGroup`]. An index below the machine's `DEVICES` capacity (a group
    /// has at least one member, so there are never more groups than devices).
    pub struct GroupId(pub u8);
}

ordered_type! {
    /// A client registration: the registry slot plus the slot's generation when the client
    /// registered. A handle from before never names a later client of the same slot.
    pub struct ClientHandle {
        /// The device the client registered with.
        pub device: DeviceId,
        /// The registry slot.
        pub slot: u8,
        /// The slot's generation at registration.
        pub generation: u16,
    }
}

ordered_type! {
    /// The device's interface generation. It grows by one at every completed reset; an
    /// interface acquired at an older epoch is stale.
    pub struct Epoch(pub u32);
}

ordered_type! {
    /// A point in time on the owner's monotonic clock, in the owner's tick unit.
    ///
    /// The machine has no clock: the owner passes `now` with every input
    /// ([`crate::Lifecycle::handle`]), and every deadline counts from the `now` of the input
    /// that started it. The timeouts in [`Config`] are in the same unit;
    /// [`Config::DEFAULT`] assumes milliseconds. [`Tick::from_duration`] and
    /// [`Tick::to_duration`] convert from and to [`core::time::Duration`] for any tick rate
    /// (an embedded timer at 32,768 Hz, a kernel's jiffies, `std::time::Instant`'s
    /// nanoseconds).
    pub struct Tick(pub u64);
}

impl Tick {
    /// The time `elapsed` after a clock's zero, at `ticks_per_second` (rounded down,
    /// saturating at `u64::MAX` ticks).
    #[must_use]
    pub const fn from_duration(elapsed: core::time::Duration, ticks_per_second: u64) -> Tick {
        let ticks = elapsed.as_nanos() * ticks_per_second as u128 / 1_000_000_000;
        Tick(if ticks > u64::MAX as u128 {
            u64::MAX
        } else {
            ticks as u64
        })
    }

    /// This time as a [`core::time::Duration`] since the clock's zero, at
    /// `ticks_per_second` (zero ticks per second gives zero).
    #[must_use]
    pub const fn to_duration(self, ticks_per_second: u64) -> core::time::Duration {
        if ticks_per_second == 0 {
            return core::time::Duration::ZERO;
        }
        let secs = self.0 / ticks_per_second;
        let rest = self.0 % ticks_per_second;
        let nanos = (rest as u128 * 1_000_000_000 / ticks_per_second as u128) as u32;
        core::time::Duration::new(secs, nanos)
    }

    /// `ticks` later, saturating.
    #[must_use]
    pub const fn after(self, ticks: u64) -> Tick {
        Tick(self.0.saturating_add(ticks))
    }
}

ordered_type! {
    /// The owner's name for a PnP request (an IRP, a probe call): echoed in exactly one
    /// [`Output::Complete`] if the request is accepted.
    pub struct RequestToken(pub u32);
}

value_type! {
    /// How far a client is trusted.
    pub enum ClientKind {
        /// A kernel client: waited for (up to its deadline, then [`TrustedTimeoutPolicy`]).
        Trusted,
        /// A user-space context: given a deadline, then revoked.
        Untrusted,
    }
}

value_type! {
    /// What a trusted client that misses a reset or detach deadline costs.
    pub enum TrustedTimeoutPolicy {
        /// Revoke it like an untrusted client.
        Revoke,
        /// Escalate: the device goes to failed (clients are told [`Event::DeviceFatal`]).
        /// During removal there is nothing to escalate to, so the client is revoked.
        FailDevice,
    }
}

value_type! {
    /// A port's transport protocol. A binding holds ports of one protocol only.
    pub enum Protocol {
        /// InfiniBand.
        Ib,
        /// RDMA over Converged Ethernet.
        Roce,
        /// iWARP.
        Iwarp,
    }
}

value_type! {
    /// A port's logical link state, as set by the subnet manager (or the Ethernet link).
    pub enum LinkState {
        /// No link (no cable, or no subnet manager yet).
        Down,
        /// Physical link up, not yet configured.
        Init,
        /// Configured, not yet active.
        Armed,
        /// Passing traffic.
        Active,
    }
}

value_type! {
    /// What a physical port can do, described by the owner at [`Input::ConfigurePort`].
    pub struct PortCaps {
        /// The port's protocol.
        pub protocol: Protocol,
        /// Largest MTU in bytes.
        pub max_mtu: u16,
        /// Whether the port supports remote atomics.
        pub atomics: bool,
    }
}

value_type! {
    /// The capabilities of a client's binding: what holds on every port it bound.
    pub struct BindingCaps {
        /// The one protocol of the binding.
        pub protocol: Protocol,
        /// The ports bound.
        pub ports: PortSet,
        /// The smallest `max_mtu` of the ports.
        pub max_mtu: u16,
        /// Whether every port supports atomics.
        pub atomics: bool,
    }
}

value_type! {
    /// What a client wants to do with the device.
    pub enum Access {
        /// Read a port's counters: allowed whatever the link state.
        QueryCounters(PhysPort),
        /// Touch the hardware (post work, ring a doorbell, create a queue). A granted
        /// operation is *in flight* until [`Input::AccessDone`]: no stop, hardware reset or
        /// removal teardown is commanded while one is (they wait, with
        /// [`Config::operation_timeout`], then fence the client).
        HardwareOp,
    }
}

value_type! {
    /// What the owner's hardware start did.
    pub enum StartResult {
        /// The device runs.
        Started,
        /// Failed before it claimed any resource: removal has nothing to undo.
        FailedBeforeResources,
        /// Claimed resources, then the hardware failed: removal releases the resources and
        /// touches no register.
        FailedAfterResources,
    }
}

value_type! {
    /// What the owner's hardware reset did.
    pub enum ResetResult {
        /// The hardware came back.
        Succeeded,
        /// The hardware did not come back: the device goes to failed.
        Failed,
    }
}

value_type! {
    /// Why a started device leaves its working state (D0) for a low-power state (Dx).
    pub enum PowerDownKind {
        /// The device idled out (Windows idle power-down, Linux runtime suspend): a
        /// client's hardware access brings it back to D0 first.
        Idle,
        /// The system goes to sleep (S3/S4, Linux system suspend): client accesses are
        /// refused with [`Error::Suspended`] until the owner powers the device up.
        SystemSleep,
    }
}

value_type! {
    /// What the owner's hardware power-up ([`HardwareCommand::PowerUp`]) did.
    pub enum PowerUpResult {
        /// Back in D0 with its state kept: clients go on with the interface they hold.
        Powered,
        /// Back in D0, but the hardware lost its state while down: the power-up ends like a
        /// completed reset (epoch + 1; clients re-acquire their interface).
        LostState,
        /// The hardware did not come back: treated as if it vanished (surprise removal).
        Failed,
    }
}

value_type! {
    /// One input to the machine, fed with the owner's clock: see
    /// [`crate::Lifecycle::handle`].
    ///
    /// ```
    /// use pnp_lifecycle::*;
    /// let mut m: Lifecycle<1, 2, 1, { queue_capacity(1, 2) }> = Lifecycle::new(Config::DEFAULT);
    /// let input = Input::AddDevice { device: DeviceId(0) };
    /// assert_eq!(input.kind(), InputKind::AddDevice);
    /// assert_eq!(m.handle(Tick(0), input), Ok(Reply::Accepted));
    /// // The same input again is refused, naming the state and the input; nothing changed.
    /// assert_eq!(
    ///     m.handle(Tick(1), input),
    ///     Err(Error::InvalidState { phase: PhaseKind::Added, input: InputKind::AddDevice })
    /// );
    /// ```
    pub enum Input {
        /// A new device (`AddDevice`, probe). Its slot must be free.
        AddDevice {
            /// The device.
            device: DeviceId,
        },
        /// Describe a physical port of an added, never started device.
        ConfigurePort {
            /// The device.
            device: DeviceId,
            /// The port.
            port: PhysPort,
            /// What it can do.
            caps: PortCaps,
        },
        /// Start, or restart after stop (`IRP_MN_START_DEVICE`).
        Start {
            /// The device.
            device: DeviceId,
            /// Completed when the hardware start reports back.
            token: RequestToken,
        },
        /// The owner finished the [`HardwareCommand::Start`] it was given.
        StartDone {
            /// The device.
            device: DeviceId,
            /// What happened.
            result: StartResult,
        },
        /// `IRP_MN_QUERY_STOP_DEVICE` (resource rebalance). Vetoed during a reset cycle.
        QueryStop {
            /// The device.
            device: DeviceId,
            /// Completed at once.
            token: RequestToken,
        },
        /// `IRP_MN_CANCEL_STOP_DEVICE`. Succeeds in every present state.
        CancelStop {
            /// The device.
            device: DeviceId,
            /// Completed at once.
            token: RequestToken,
        },
        /// `IRP_MN_STOP_DEVICE`, after a successful query stop.
        Stop {
            /// The device.
            device: DeviceId,
            /// Completed at once.
            token: RequestToken,
        },
        /// `IRP_MN_QUERY_REMOVE_DEVICE`. Vetoed during a reset cycle or while a client holds
        /// the device.
        QueryRemove {
            /// The device.
            device: DeviceId,
            /// Completed at once.
            token: RequestToken,
        },
        /// `IRP_MN_CANCEL_REMOVE_DEVICE`. Succeeds in every present state.
        CancelRemove {
            /// The device.
            device: DeviceId,
            /// Completed at once.
            token: RequestToken,
        },
        /// `IRP_MN_REMOVE_DEVICE`: tell every client, drain, undo, complete.
        Remove {
            /// The device.
            device: DeviceId,
            /// Completed when the device is gone.
            token: RequestToken,
        },
        /// `IRP_MN_SURPRISE_REMOVAL`, or a PCI permanent failure: the hardware is gone and is
        /// never commanded again. Cannot be vetoed.
        SurpriseRemoval {
            /// The device.
            device: DeviceId,
        },
        /// A catastrophic-error interrupt: a reset request from the driver itself.
        FatalError {
            /// The device.
            device: DeviceId,
        },
        /// The owner finished the [`HardwareCommand::Reset`] it was given.
        ResetDone {
            /// The device.
            device: DeviceId,
            /// What happened.
            result: ResetResult,
        },
        /// The outside agent changed a port's link state.
        LinkChanged {
            /// The device.
            device: DeviceId,
            /// The port.
            port: PhysPort,
            /// The new state.
            state: LinkState,
        },
        /// A client attaches. Never waits on a link.
        Register {
            /// The device.
            device: DeviceId,
            /// Trusted (kernel) or untrusted (user space).
            kind: ClientKind,
        },
        /// A client detaches. Idempotent: exactly one call wins.
        Unregister {
            /// The client.
            client: ClientHandle,
        },
        /// A callback the owner made for an [`Output::Notify`] has returned. The client's
        /// next waiting event, if any, is handed over at once.
        CallbackDone {
            /// The client the notification was addressed to.
            client: ClientHandle,
        },
        /// The owner finished the [`Output::Fence`] it was given for this client: nothing
        /// the client has in flight can reach the hardware or be called back any more.
        FenceDone {
            /// The fenced client.
            client: ClientHandle,
        },
        /// The client fetches the current interface (after `RESET_END`).
        AcquireInterface {
            /// The client.
            client: ClientHandle,
        },
        /// The client asks for a soft reset (`reset_request`).
        ResetRequest {
            /// The client.
            client: ClientHandle,
        },
        /// The client has quiesced and answers `RESET` (`reset_execute`).
        ResetExecute {
            /// The client.
            client: ClientHandle,
        },
        /// The client binds to a set of ports of one protocol (its protection domain).
        Bind {
            /// The client.
            client: ClientHandle,
            /// The ports.
            ports: PortSet,
        },
        /// The client holds the device (an open handle): query remove is vetoed.
        Hold {
            /// The client.
            client: ClientHandle,
        },
        /// The client lets go of its hold.
        ReleaseHold {
            /// The client.
            client: ClientHandle,
        },
        /// The client wants to use the device through the interface of `epoch`.
        Access {
            /// The client.
            client: ClientHandle,
            /// The epoch of the interface the client holds.
            epoch: Epoch,
            /// What for.
            what: Access,
        },
        /// A granted [`Access::HardwareOp`] has finished (reported by the client or by the
        /// owner on its behalf).
        AccessDone {
            /// The client.
            client: ClientHandle,
        },
        /// The client has quiesced and answers `RESET` saying it can recover without a
        /// hardware reset (Linux's `PCI_ERS_RESULT_CAN_RECOVER`). If every voter says so,
        /// the cycle ends without a reset: same epoch, clients told [`Event::Recovered`].
        CanRecover {
            /// The client.
            client: ClientHandle,
        },
        /// The client cannot pause its work: query stop is vetoed until [`Input::CanPause`].
        CannotPause {
            /// The client.
            client: ClientHandle,
        },
        /// The client can pause its work again.
        CanPause {
            /// The client.
            client: ClientHandle,
        },
        /// Take a started device to a low-power state (Windows `IRP_MN_SET_POWER` for Dx,
        /// Linux `suspend` or `runtime_suspend`). Clients are told [`Event::Suspending`],
        /// hardware operations in flight are drained (with [`Config::operation_timeout`],
        /// then fenced), then [`HardwareCommand::PowerDown`] is commanded; `token` completes
        /// when the owner reports [`Input::PowerDownDone`]. During a reset cycle a system
        /// sleep waits for the cycle to end; an idle power-down is vetoed
        /// ([`VetoReason::ResetInProgress`]). In a low-power state it succeeds at once (a
        /// system sleep turns an idle Dx into a sleep); added or stopped (no hardware
        /// claimed) it succeeds and does nothing; while a power-down or power-up is under
        /// way, or a stop, remove or start is pending, it is refused
        /// ([`Error::InvalidState`]).
        PowerDown {
            /// The device.
            device: DeviceId,
            /// Idle power-down or system sleep.
            kind: PowerDownKind,
            /// Completed once the device is in the low-power state (or with
            /// [`Status::DeviceGone`] if it is removed first).
            token: RequestToken,
        },
        /// The owner finished the [`HardwareCommand::PowerDown`] it was given.
        PowerDownDone {
            /// The device.
            device: DeviceId,
        },
        /// Bring a device in a low-power state back to D0 (Windows `IRP_MN_SET_POWER` for
        /// D0, Linux `resume` or `runtime_resume`): [`HardwareCommand::PowerUp`] is
        /// commanded; `token` completes when the owner reports [`Input::PowerUpDone`]. A
        /// power-up an access or a reset request already began is joined. In D0 (or
        /// stopped) it succeeds and does nothing.
        PowerUp {
            /// The device.
            device: DeviceId,
            /// Completed once the device is back (or with [`Status::HardwareFailed`] if the
            /// power-up failed).
            token: RequestToken,
        },
        /// The owner finished the [`HardwareCommand::PowerUp`] it was given.
        PowerUpDone {
            /// The device.
            device: DeviceId,
            /// What happened.
            result: PowerUpResult,
        },
        /// The owner closed a client's fast-path gate as [`Output::FastPath`] with
        /// [`FastPathGate::Close`] asked, and reports the operations that began on the fast
        /// path and are still in flight. An owner obligation like [`Input::FenceDone`]: the
        /// owner closes the gate under its lock and answers at once. From then on the
        /// client's brackets go through the machine ([`Input::Access`]); the `in_flight`
        /// operations count as granted by it, each ended by an [`Input::AccessDone`], and
        /// a drain under way (stop, reset, power-down) waits for operations from this
        /// input's `now` (a removal's deadline is at least `now` plus
        /// [`Config::operation_timeout`]): never shorter than configured (I13). Refused with
        /// [`Error::FastPathNotClosing`] (nothing changed) when no close of this client's
        /// gate is awaited.
        FastPathClosed {
            /// The client whose gate was closed.
            client: ClientHandle,
            /// Operations that began on the fast path and have not ended.
            in_flight: u32,
        },
        /// The owner declares that the device shares its hardware reset with the other
        /// members of `group` (DESIGN.md "Reset groups"). From then on a reset request or
        /// fatal error on any member runs one cycle for the whole group: every voter of
        /// every member is told `RESET`, and once all answered, left or were revoked the
        /// single [`HardwareCommand::Reset`] is commanded through one member, the
        /// *carrier* (the lowest-numbered member taking part, never one that vanished);
        /// the owner resets the whole group and answers [`Input::ResetDone`] for the
        /// carrier, and every member ends with `RESET_END` at its own new epoch. A member
        /// that cannot take part ends the group's cycle without a reset
        /// ([`CycleOutcome::CannotReset`]), as does the group's one deadline
        /// ([`Config::group_cycle_timeout`]). Accepted in every present state but a reset
        /// cycle; refused with [`Error::AlreadyInResetGroup`] for a member of a group,
        /// [`Error::NoSuchGroup`] for an id beyond `DEVICES`, and
        /// [`Error::GroupCycleInProgress`] while the group runs a cycle. A device leaves
        /// its group when it is removed (its slot becomes free).
        JoinResetGroup {
            /// The device.
            device: DeviceId,
            /// The group it joins.
            group: GroupId,
        },
        /// The device no longer shares its hardware reset: it resets alone again. Accepted
        /// (doing nothing) for a device in no group; refused like
        /// [`Input::JoinResetGroup`] during a cycle of the device or its group.
        LeaveResetGroup {
            /// The device.
            device: DeviceId,
        },
        /// A voter answers `RESET` refusing it (mlx5's "nack" of a synchronised reset, a
        /// function whose remote reset is disabled). The cycle ends with no hardware
        /// reset: for a device in a reset group, the whole group's cycle. Every requester
        /// is answered [`CycleOutcome::CannotReset`] naming the device and the client, and
        /// every client told `RESET` is told [`Event::Recovered`] (its interface is still
        /// good). Refused like [`Input::ResetExecute`] ([`Error::NotVoting`],
        /// [`Error::ResetNotDelivered`]) for a client that may not answer.
        ResetNack {
            /// The client.
            client: ClientHandle,
        },
        /// The owner's timer fired: the `now` passed with it reached
        /// [`crate::Lifecycle::poll_timeout`]. Early or spurious timeouts do nothing.
        Timeout,
        /// Driver unload (`DriverUnload`, module exit): a fence over every device.
        Unload,
    }
}

impl Input {
    /// The input's kind, the column of the per-state table.
    #[inline]
    #[must_use]
    pub const fn kind(&self) -> InputKind {
        match self {
            Input::AddDevice { .. } => InputKind::AddDevice,
            Input::ConfigurePort { .. } => InputKind::ConfigurePort,
            Input::Start { .. } => InputKind::Start,
            Input::StartDone { .. } => InputKind::StartDone,
            Input::QueryStop { .. } => InputKind::QueryStop,
            Input::CancelStop { .. } => InputKind::CancelStop,
            Input::Stop { .. } => InputKind::Stop,
            Input::QueryRemove { .. } => InputKind::QueryRemove,
            Input::CancelRemove { .. } => InputKind::CancelRemove,
            Input::Remove { .. } => InputKind::Remove,
            Input::SurpriseRemoval { .. } => InputKind::SurpriseRemoval,
            Input::FatalError { .. } => InputKind::FatalError,
            Input::ResetDone { .. } => InputKind::ResetDone,
            Input::LinkChanged { .. } => InputKind::LinkChanged,
            Input::Register { .. } => InputKind::Register,
            Input::Unregister { .. } => InputKind::Unregister,
            Input::CallbackDone { .. } => InputKind::CallbackDone,
            Input::AcquireInterface { .. } => InputKind::AcquireInterface,
            Input::ResetRequest { .. } => InputKind::ResetRequest,
            Input::ResetExecute { .. } => InputKind::ResetExecute,
            Input::Bind { .. } => InputKind::Bind,
            Input::Hold { .. } => InputKind::Hold,
            Input::ReleaseHold { .. } => InputKind::ReleaseHold,
            Input::Access { .. } => InputKind::Access,
            Input::FenceDone { .. } => InputKind::FenceDone,
            Input::FastPathClosed { .. } => InputKind::FastPathClosed,
            Input::JoinResetGroup { .. } => InputKind::JoinResetGroup,
            Input::LeaveResetGroup { .. } => InputKind::LeaveResetGroup,
            Input::ResetNack { .. } => InputKind::ResetNack,
            Input::AccessDone { .. } => InputKind::AccessDone,
            Input::CanRecover { .. } => InputKind::CanRecover,
            Input::CannotPause { .. } => InputKind::CannotPause,
            Input::CanPause { .. } => InputKind::CanPause,
            Input::PowerDown { .. } => InputKind::PowerDown,
            Input::PowerDownDone { .. } => InputKind::PowerDownDone,
            Input::PowerUp { .. } => InputKind::PowerUp,
            Input::PowerUpDone { .. } => InputKind::PowerUpDone,
            Input::Timeout => InputKind::Timeout,
            Input::Unload => InputKind::Unload,
        }
    }

    /// The request token of a PnP request input, if it carries one.
    #[inline]
    #[must_use]
    pub const fn token(&self) -> Option<RequestToken> {
        match *self {
            Input::Start { token, .. }
            | Input::QueryStop { token, .. }
            | Input::CancelStop { token, .. }
            | Input::Stop { token, .. }
            | Input::QueryRemove { token, .. }
            | Input::CancelRemove { token, .. }
            | Input::Remove { token, .. }
            | Input::PowerDown { token, .. }
            | Input::PowerUp { token, .. } => Some(token),
            _ => None,
        }
    }

    /// The device the input concerns, if it concerns one.
    #[inline]
    #[must_use]
    pub const fn device(&self) -> Option<DeviceId> {
        match *self {
            Input::AddDevice { device }
            | Input::ConfigurePort { device, .. }
            | Input::Start { device, .. }
            | Input::StartDone { device, .. }
            | Input::QueryStop { device, .. }
            | Input::CancelStop { device, .. }
            | Input::Stop { device, .. }
            | Input::QueryRemove { device, .. }
            | Input::CancelRemove { device, .. }
            | Input::Remove { device, .. }
            | Input::SurpriseRemoval { device }
            | Input::FatalError { device }
            | Input::ResetDone { device, .. }
            | Input::LinkChanged { device, .. }
            | Input::Register { device, .. }
            | Input::PowerDown { device, .. }
            | Input::PowerDownDone { device }
            | Input::PowerUp { device, .. }
            | Input::PowerUpDone { device, .. }
            | Input::JoinResetGroup { device, .. }
            | Input::LeaveResetGroup { device } => Some(device),
            Input::Unregister { client }
            | Input::CallbackDone { client }
            | Input::FenceDone { client }
            | Input::FastPathClosed { client, .. }
            | Input::AccessDone { client }
            | Input::CanRecover { client }
            | Input::CannotPause { client }
            | Input::CanPause { client }
            | Input::AcquireInterface { client }
            | Input::ResetRequest { client }
            | Input::ResetExecute { client }
            | Input::ResetNack { client }
            | Input::Bind { client, .. }
            | Input::Hold { client }
            | Input::ReleaseHold { client }
            | Input::Access { client, .. } => Some(client.device),
            Input::Timeout | Input::Unload => None,
        }
    }
}

value_type! {
    /// What a client is told. Each [`Output::Notify`] is one callback; the owner reports
    /// its return with [`Input::CallbackDone`].
    pub enum Event {
        /// The device is running (first start, or restart after a stop). No reset cycle.
        DeviceStarted {
            /// The current epoch.
            epoch: Epoch,
        },
        /// The device stopped for a rebalance: hardware calls are refused until it starts.
        DeviceStopped,
        /// `RESET`: quiesce, then answer with [`Input::ResetExecute`].
        Reset,
        /// `RESET_END`: the reset is done; acquire a fresh interface at `epoch`.
        ResetEnd {
            /// The new epoch.
            epoch: Epoch,
        },
        /// The cycle ended without a hardware reset (every voter could recover, or the
        /// reset could not be done: see [`CycleOutcome::CannotReset`]): the interface of
        /// `epoch` (unchanged) is still good; resume.
        Recovered {
            /// The epoch, the same as before the cycle.
            epoch: Epoch,
        },
        /// A port the client bound changed link state.
        LinkChanged {
            /// The port.
            port: PhysPort,
            /// Its new state.
            state: LinkState,
        },
        /// The device is going to a low-power state: finish or abandon hardware work now
        /// (operations still in flight are waited for up to [`Config::operation_timeout`],
        /// then fenced). Until [`Event::Resumed`], an access is refused
        /// ([`Error::Suspended`]) or, after an idle power-down, wakes the device
        /// ([`Reply::AccessWaitsForPowerUp`]). Always followed by `Resumed`, `Removed`,
        /// `Revoked`, or (after a stop in the low-power state) `DeviceStarted`.
        Suspending {
            /// Idle power-down or system sleep.
            kind: PowerDownKind,
        },
        /// The device is back in D0. If `epoch` differs from the epoch of the interface the
        /// client holds (`state_lost`: the hardware lost its state while down), acquire the
        /// interface again ([`Input::AcquireInterface`]) before touching the hardware.
        Resumed {
            /// The current epoch.
            epoch: Epoch,
            /// Whether this power-up lost the hardware's state (the epoch grew by one).
            state_lost: bool,
        },
        /// The device failed; only removal follows.
        DeviceFatal,
        /// The device is going away: detach ([`Input::Unregister`]). The last event.
        Removed {
            /// Whether the hardware vanished (surprise removal) rather than an orderly remove.
            surprise: bool,
        },
        /// The client is fenced: every later call fails with [`Error::ClientRevoked`].
        /// The last event.
        Revoked,
    }
}

value_type! {
    /// How an accepted PnP request ended.
    #[non_exhaustive]
    pub enum Status {
        /// Done.
        Success,
        /// The hardware failed (a start that did not succeed).
        HardwareFailed,
        /// The device vanished before the request could finish.
        DeviceGone,
    }
}

value_type! {
    /// A command to the owner's hardware layer.
    pub enum HardwareCommand {
        /// Claim resources and start the hardware; answer with [`Input::StartDone`].
        Start,
        /// Execute the hardware reset; answer with [`Input::ResetDone`]. For a member of a
        /// reset group ([`Input::JoinResetGroup`]) this device is the group's *carrier*:
        /// reset every function of the group (mlx5's synchronised reset, a PCI slot
        /// reset) and answer [`Input::ResetDone`] for this device only; the machine ends
        /// every member's cycle from that one answer.
        Reset,
        /// Quiesce the hardware (touches registers). Never issued after surprise removal.
        Shutdown,
        /// Release resources (unmap, disconnect interrupts) without touching registers.
        ReleaseResources,
        /// Take the hardware to its low-power state (Windows `EvtDeviceD0Exit`, Linux
        /// `suspend`); answer with [`Input::PowerDownDone`]. Issued only once no hardware
        /// operation is in flight.
        PowerDown,
        /// Bring the hardware back to D0 (Windows `EvtDeviceD0Entry`, Linux `resume`);
        /// answer with [`Input::PowerUpDone`]. The only command issued in a low-power state.
        PowerUp,
    }
}

value_type! {
    /// Why a device failed ([`Output::DeviceFailed`], [`crate::Lifecycle::failure`]).
    #[non_exhaustive]
    pub enum FailureCause {
        /// The hardware start failed ([`StartResult::FailedBeforeResources`] or
        /// [`StartResult::FailedAfterResources`]).
        StartFailed,
        /// The hardware reset failed ([`ResetResult::Failed`]).
        ResetFailed,
        /// A trusted client missed a deadline under [`TrustedTimeoutPolicy::FailDevice`].
        ClientMissedDeadline,
        /// A fatal error came with the epoch counter exhausted: no cycle could serve it.
        EpochExhausted,
    }
}

value_type! {
    /// How a reset cycle (and so every request it served) ended.
    #[non_exhaustive]
    pub enum CycleOutcome {
        /// The hardware reset succeeded; clients were told `RESET_END` with this epoch.
        Completed(Epoch),
        /// Every voter could recover: no hardware reset, the epoch is unchanged, clients
        /// were told [`Event::Recovered`].
        Recovered(Epoch),
        /// The hardware reset failed; the device went to failed.
        HardwareFailed,
        /// A voter missed its deadline under [`TrustedTimeoutPolicy::FailDevice`].
        ClientTimedOut,
        /// Remove or unload ended the cycle before the hardware reset (clients were told
        /// `Removed`), or ended a scheduled follow-up cycle before it began.
        AbortedByRemove,
        /// The hardware vanished.
        AbortedBySurpriseRemoval,
        /// A fatal error that arrived while a stop was pending was folded into the stop:
        /// the hardware was shut down and the restart re-initialises it.
        FoldedIntoStop,
        /// The cycle ended with no hardware reset because `member` could not take part
        /// (for a device in no reset group, `member` is the device itself): the epoch is
        /// unchanged, and every client told `RESET` was told [`Event::Recovered`]. Every
        /// member of a reset group that took part answers its requesters with this same
        /// outcome.
        CannotReset {
            /// The device that could not take part.
            member: DeviceId,
            /// Why.
            reason: CannotResetReason,
        },
    }
}

value_type! {
    /// Why a reset cycle ended without the hardware reset ([`CycleOutcome::CannotReset`]).
    #[non_exhaustive]
    pub enum CannotResetReason {
        /// A voter refused the reset ([`Input::ResetNack`]).
        ClientRefused(ClientHandle),
        /// The member is in a state that cannot take part in its group's reset: not
        /// started, starting, stop pending, stopping, stopped, remove pending or failed.
        MemberState(PhaseKind),
        /// The member is in, or going to, system sleep.
        SystemSleep,
        /// The group's cycle reached its one deadline ([`Config::group_cycle_timeout`]
        /// after it began) before the member was ready.
        DeadlinePassed,
    }
}

value_type! {
    /// One output of the machine, drained with [`crate::Lifecycle::poll_output`] after
    /// every input and carried out in order (the crate's front page shows an owner loop
    /// that matches every variant).
    ///
    /// ```
    /// use pnp_lifecycle::*;
    /// let mut m: Lifecycle<1, 2, 1, { queue_capacity(1, 2) }> = Lifecycle::new(Config::DEFAULT);
    /// let hca = DeviceId(0);
    /// m.handle(Tick(0), Input::AddDevice { device: hca }).unwrap();
    /// m.handle(Tick(0), Input::Start { device: hca, token: RequestToken(7) }).unwrap();
    /// match m.poll_output() {
    ///     Some(Output::Hardware { device, command: HardwareCommand::Start }) => {
    ///         // Bring the hardware up, then report it.
    ///         m.handle(Tick(3), Input::StartDone { device, result: StartResult::Started })
    ///             .unwrap();
    ///     }
    ///     other => panic!("expected a start command, got {other:?}"),
    /// }
    /// assert_eq!(
    ///     m.poll_output(),
    ///     Some(Output::Complete { device: hca, token: RequestToken(7), status: Status::Success })
    /// );
    /// ```
    pub enum Output {
        /// Call a client's callback with `event`, outside any lock, then feed
        /// [`Input::CallbackDone`].
        Notify {
            /// The client.
            client: ClientHandle,
            /// What to tell it.
            event: Event,
        },
        /// Command the hardware of a device.
        Hardware {
            /// The device.
            device: DeviceId,
            /// The command.
            command: HardwareCommand,
        },
        /// Complete an accepted PnP request.
        Complete {
            /// The device.
            device: DeviceId,
            /// The request.
            token: RequestToken,
            /// How it ended.
            status: Status,
        },
        /// A reset cycle ended: every reset request it joined is answered by this.
        ResetCycleFinished {
            /// The device.
            device: DeviceId,
            /// How it ended.
            outcome: CycleOutcome,
        },
        /// Fence a revoked client: wait out its callback or hardware access in flight for a
        /// bounded time, then cut its path to the device (unmap its doorbells, complete its
        /// outstanding requests) so a late access hits nothing; then feed
        /// [`Input::FenceDone`]. Removal and unload wait for that, not for the client. The
        /// client is revoked: no callback is ever addressed to it again. A `CallbackDone`
        /// or `AccessDone` for it is accepted and ignored until `FenceDone`; after it, the
        /// owner reports none (one would be refused, changing nothing).
        Fence {
            /// The client.
            client: ClientHandle,
        },
        /// Open or close a client's fast-path gate (DESIGN.md "Operations: the fast path",
        /// I15). Only an owner built with [`crate::Lifecycle::with_fast_path`] is told this.
        /// `Open { epoch }`: the owner may admit the client's hardware operations without
        /// the machine, for this client handle and `epoch` only, counting them itself.
        /// `Close`: the owner stops admitting them at once and answers
        /// [`Input::FastPathClosed`] with how many are still in flight; until that answer
        /// no stop, hardware reset, power-down or removal teardown is commanded, and an
        /// answer missing [`Config::operation_timeout`] revokes and fences the client.
        FastPath {
            /// The client.
            client: ClientHandle,
            /// Open or close.
            gate: FastPathGate,
        },
        /// A client's slot is free: its registration is over and none of its callbacks is
        /// in flight (a blocking unregister may return).
        ClientGone {
            /// The client.
            client: ClientHandle,
        },
        /// A device failed: only removal leaves that state. Clients are told
        /// [`Event::DeviceFatal`]; the owner reports the failure to its OS (Windows:
        /// `PNP_DEVICE_FAILED` through `IoInvalidateDeviceState`).
        DeviceFailed {
            /// The device.
            device: DeviceId,
            /// Why.
            cause: FailureCause,
        },
        /// A device finished removal; its slot is free.
        DeviceRemoved {
            /// The device.
            device: DeviceId,
        },
        /// Driver unload may finish: no device, no client, no callback in flight. Emitted
        /// once; the machine answers nothing after it.
        UnloadMayFinish,
    }
}

value_type! {
    /// What [`Output::FastPath`] asks of a client's fast-path gate.
    pub enum FastPathGate {
        /// Admit the client's hardware operations at `epoch` without the machine.
        Open {
            /// The device epoch the gate is valid for (the client's interface epoch).
            epoch: Epoch,
        },
        /// Stop admitting, then answer [`Input::FastPathClosed`].
        Close,
    }
}

value_type! {
    /// How a reset request was taken.
    pub enum ResetAnswer {
        /// A new cycle began: every client is told `RESET`.
        Started,
        /// Joined the cycle that is quiescing.
        Joined,
        /// The cycle is executing: one follow-up cycle is (or was already) scheduled.
        Scheduled,
        /// The device is in (or going to) a low-power state: one cycle runs once it is back
        /// in D0 (after an idle power-down the request itself brings it back). If the
        /// power-up reports lost state, that power-up serves the request: no cycle runs,
        /// and [`Output::ResetCycleFinished`] says [`CycleOutcome::Completed`].
        AfterPowerUp,
    }
}

value_type! {
    /// How a fatal error ([`Input::FatalError`]) was taken. It is never lost: a cycle serves
    /// it, or the stop or removal under way absorbs it, or the answer says why neither can.
    #[non_exhaustive]
    pub enum FatalAnswer {
        /// A reset cycle serves it (begun, joined, or scheduled as the follow-up).
        Served(ResetAnswer),
        /// A start, query stop or query remove is pending: a cycle serves it once that
        /// settles, or the stop or removal absorbs it. Either way an
        /// [`Output::ResetCycleFinished`] answers it.
        Deferred,
        /// A removal is under way: it absorbs the error (the hardware is torn down).
        FoldedIntoRemoval,
        /// The hardware is not live (added, stopped, failed, vanished or being removed):
        /// there is nothing to reset.
        HardwareNotLive(PhaseKind),
        /// The epoch counter is exhausted, so no cycle can serve it: the device failed.
        DeviceFailed,
    }
}

value_type! {
    /// How an access was taken ([`crate::Lifecycle::access`]). Not every answer grants
    /// it: one dropped unread may touch hardware that is powering up.
    #[must_use = "only `AccessAnswer::Granted` lets the access go ahead"]
    pub enum AccessAnswer {
        /// Granted ([`Reply::AccessGranted`]).
        Granted,
        /// Not granted: the device is powering up from an idle power-down for it
        /// ([`Reply::AccessWaitsForPowerUp`]); retry after [`Event::Resumed`].
        WaitForPowerUp,
    }
}

value_type! {
    /// How an unregistration went.
    pub enum Unregistered {
        /// This call detached the client.
        Now,
        /// The client was already unregistered, revoked and freed, or removed with its
        /// device: nothing changed.
        Already,
    }
}

value_type! {
    /// Why a query remove or query stop was vetoed.
    #[non_exhaustive]
    pub enum VetoReason {
        /// A reset cycle runs.
        ResetInProgress,
        /// A client holds the device.
        ClientHoldsDevice,
        /// A client cannot pause its work ([`Input::CannotPause`]).
        ClientCannotPause,
    }
}

value_type! {
    /// A refused input. The machine is exactly as it was before the input. `Display` says
    /// what was refused and what to do; it implements [`core::error::Error`], so `?` works
    /// in a `main` returning `Box<dyn std::error::Error>`.
    ///
    /// ```
    /// use pnp_lifecycle::*;
    /// let mut m: Lifecycle<1, 2, 1, { queue_capacity(1, 2) }> = Lifecycle::new(Config::DEFAULT);
    /// m.handle(Tick(10), Input::AddDevice { device: DeviceId(0) }).unwrap();
    /// let before = m.clone();
    /// let error = m.handle(Tick(9), Input::Unload).unwrap_err();
    /// assert_eq!(error, Error::TimeWentBackwards { last: Tick(10) });
    /// assert_eq!(
    ///     error.to_string(),
    ///     "time went backwards: now is earlier than the last input's time 10"
    /// );
    /// assert!(m == before, "a refused input changes nothing");
    /// ```
    #[non_exhaustive]
    pub enum Error {
        /// Driver unload finished: the machine takes no more inputs.
        Unloaded,
        /// Driver unload began: no new device or registration.
        Unloading,
        /// Driver unload was already requested.
        UnloadAlreadyRequested,
        /// The device id is not below the `DEVICES` capacity.
        NoSuchDevice,
        /// The per-state table refuses this input in the device's state.
        InvalidState {
            /// The device's state.
            phase: PhaseKind,
            /// The input.
            input: InputKind,
        },
        /// Query remove or query stop was vetoed.
        Vetoed(VetoReason),
        /// The port index is not below the `PORTS` capacity, or the port is not configured.
        NoSuchPort,
        /// The port was configured already.
        PortAlreadyConfigured,
        /// A binding must not be empty.
        EmptyBinding,
        /// The binding mixes protocols.
        MixedProtocols {
            /// The protocol of the lowest port.
            first: Protocol,
            /// Another protocol in the set.
            other: Protocol,
        },
        /// The client has not bound any port.
        NotBound,
        /// Every client slot is taken.
        RegistryFull,
        /// The handle names no client: never issued, or its slot was reused.
        UnknownClient,
        /// The client was revoked: every call fails.
        ClientRevoked,
        /// The client was told `Removed` (or unregistered): it may only detach.
        ClientDetaching,
        /// The interface epoch is old: acquire the interface again.
        StaleEpoch {
            /// The device's current epoch.
            current: Epoch,
        },
        /// The client is not a voter of the quiescing cycle, or answered already.
        NotVoting,
        /// A hardware access by a client that has answered `RESET` or joined the cycle.
        ResetInProgress,
        /// A hardware access while the device is going to or in a low-power state that
        /// the access cannot end (system sleep, or a power-down under way): retry after
        /// [`Event::Resumed`].
        Suspended {
            /// Why the device is (going) down.
            kind: PowerDownKind,
        },
        /// The client already holds the device.
        AlreadyHolding,
        /// The client does not hold the device.
        NotHolding,
        /// A PnP request of this kind is already pending for the device.
        RequestPending,
        /// Removal was requested: no new reset request.
        RemoveInProgress,
        /// No callback to this client is in flight.
        NoCallbackInFlight,
        /// No hardware operation of this client is in flight.
        NoOperationInFlight,
        /// The client has the most hardware operations in flight it may have: finish one.
        TooManyOperations,
        /// The client already declared it cannot pause.
        AlreadyCannotPause,
        /// The client had not declared it cannot pause.
        NotCannotPause,
        /// The owner was not asked to fence this client (or reported it already).
        NoFenceRequested,
        /// [`Input::FastPathClosed`] for a client whose fast-path gate the machine is not
        /// waiting to see closed (never asked, answered already, or fenced meanwhile).
        FastPathNotClosing,
        /// The client answered a `RESET` it has not been called with yet: its previous
        /// callback has not returned, so the `RESET` still waits in its mailbox.
        ResetNotDelivered,
        /// The owner reported a hardware completion with no command of that kind in flight.
        NoHardwareCommandInFlight,
        /// An input's `now` is earlier than the last one accepted.
        TimeWentBackwards {
            /// The last time accepted.
            last: Tick,
        },
        /// The epoch counter is at its maximum: no more reset cycles.
        EpochExhausted,
        /// The device is already a member of a reset group: leave it first.
        AlreadyInResetGroup {
            /// The group it belongs to.
            group: GroupId,
        },
        /// The group id is not below the `DEVICES` capacity.
        NoSuchGroup,
        /// The device's reset group runs a cycle: membership changes wait for its end.
        GroupCycleInProgress {
            /// The group.
            group: GroupId,
        },
        /// The output queue lacks room for the worst case of this input: drain it first.
        OutputBacklog {
            /// Free entries needed.
            needed: u16,
        },
    }
}

value_type! {
    /// The synchronous answer to an accepted input; see [`crate::Lifecycle::handle`].
    #[non_exhaustive]
    pub enum Reply {
        /// Accepted; any effect is in the outputs.
        Accepted,
        /// Registered.
        Registered {
            /// The new client's handle.
            client: ClientHandle,
            /// The interface epoch it holds.
            epoch: Epoch,
        },
        /// Unregistered.
        Unregistered(Unregistered),
        /// The interface of this epoch.
        Interface(Epoch),
        /// A reset request was taken.
        Reset(ResetAnswer),
        /// A fatal error was taken.
        Fatal(FatalAnswer),
        /// The access may go ahead.
        AccessGranted,
        /// The access was not granted: the device was in a low-power state after an idle
        /// power-down and is powering up for it (the machine commanded
        /// [`HardwareCommand::PowerUp`], or one was already under way). Retry once the
        /// client is told [`Event::Resumed`]; the owner bounds its wait with its own
        /// timeout (the power-up itself is the owner's hardware completion).
        AccessWaitsForPowerUp,
    }
}

value_type! {
    /// Timeouts and policies of the machine.
    pub struct Config {
        /// Ticks an untrusted voter has to answer `RESET` before it is revoked.
        pub untrusted_ack_timeout: u64,
        /// Ticks a trusted voter has to answer `RESET` before `trusted_policy` applies.
        pub trusted_ack_timeout: u64,
        /// What a trusted client that misses a deadline costs.
        pub trusted_policy: TrustedTimeoutPolicy,
        /// Ticks every client has to detach once removal begins (when it is told
        /// `Removed`, or queued `Removed` behind a callback still running) before it is
        /// revoked, and fenced if something of its is still in flight.
        pub detach_timeout: u64,
        /// Ticks a callback may run before its client is revoked and fenced (for a trusted
        /// client under [`TrustedTimeoutPolicy::FailDevice`], the device also fails).
        pub callback_timeout: u64,
        /// Ticks a stop, a hardware reset or a removal teardown waits for hardware
        /// operations in flight before it revokes and fences the clients that hold them.
        pub operation_timeout: u64,
    }
}

impl Config {
    /// Moderate defaults, in milliseconds if the owner ticks in milliseconds: 1 s for
    /// user space, 10 s for kernel clients (then revoke), 5 s to detach, 5 s a callback,
    /// 2 s for hardware operations to drain.
    pub const DEFAULT: Config = Config {
        untrusted_ack_timeout: 1_000,
        trusted_ack_timeout: 10_000,
        trusted_policy: TrustedTimeoutPolicy::Revoke,
        detach_timeout: 5_000,
        callback_timeout: 5_000,
        operation_timeout: 2_000,
    };
}

impl Config {
    /// The one deadline of a reset group's cycle, counted from the input that began it:
    /// the longest a member's voter may legitimately take (its `RESET` held behind a
    /// callback, then its answer), plus the drain of hardware operations. Reached before
    /// the hardware reset is commanded, the group's cycle ends without a reset
    /// ([`CannotResetReason::DeadlinePassed`]). Derived, so a `Config` stays as it was.
    #[must_use]
    pub const fn group_cycle_timeout(&self) -> u64 {
        let ack = if self.trusted_ack_timeout > self.untrusted_ack_timeout {
            self.trusted_ack_timeout
        } else {
            self.untrusted_ack_timeout
        };
        ack.saturating_add(self.callback_timeout)
            .saturating_add(self.operation_timeout)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::DEFAULT
    }
}
