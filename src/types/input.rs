//! What the owner feeds the machine: [`Input`], and the answer a callback's return may carry.

use super::*;

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
        /// `IRP_MN_STOP_DEVICE`, after a successful query stop. During a power transition
        /// asked while the query stop was pending, held and served once the hardware
        /// reports.
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
        /// The client's callback returned with its answer (DESIGN.md "Cost": one input, not
        /// two): exactly [`Input::CallbackDone`] followed by the answer's own input, taken
        /// whole or refused whole (I10). A `RESET` answer must travel with the return of
        /// the `RESET` or of a later callback: one whose `RESET` still waits behind it is
        /// refused with [`Error::ResetNotDelivered`].
        CallbackDoneWith {
            /// The client the notification was addressed to.
            client: ClientHandle,
            /// What the client answers with the return.
            answer: CallbackAnswer,
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
        /// claimed) it succeeds and does nothing. With a query stop or query remove
        /// pending it is carried out and the device returns to that query (Windows must
        /// not fail a set-power). While a power-down or power-up is under way, or a stop,
        /// remove or start is in progress, it is refused ([`Error::InvalidState`]).
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
        /// power-up an access or a reset request already began is joined. With a query stop
        /// or query remove pending in Dx the device powers up and returns to that query. In
        /// D0 (or stopped) it succeeds and does nothing.
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
        /// its group when it is removed (its slot becomes free). An input on a member may
        /// move every member, so it needs the output room of a driver-wide input
        /// ([`crate::Lifecycle::DRIVER_INPUT_OUTPUTS`]; an owner that drains after every
        /// input always has it).
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
            Input::CallbackDoneWith { .. } => InputKind::CallbackDoneWith,
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
            | Input::CallbackDoneWith { client, .. }
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
    /// The answer a client gives with its callback's return ([`Input::CallbackDoneWith`]).
    pub enum CallbackAnswer {
        /// [`Input::ResetExecute`]: with the `RESET` callback's return.
        ResetExecute,
        /// [`Input::CanRecover`]: with the `RESET` callback's return.
        CanRecover,
        /// [`Input::CannotPause`].
        CannotPause,
        /// [`Input::AcquireInterface`]: with `RESET_END`'s (or a state-losing `Resumed`'s)
        /// return; answered [`Reply::Interface`].
        AcquireInterface,
    }
}

impl CallbackAnswer {
    /// The input the answer stands for.
    #[inline]
    #[must_use]
    pub const fn input(self, client: ClientHandle) -> Input {
        match self {
            CallbackAnswer::ResetExecute => Input::ResetExecute { client },
            CallbackAnswer::CanRecover => Input::CanRecover { client },
            CallbackAnswer::CannotPause => Input::CannotPause { client },
            CallbackAnswer::AcquireInterface => Input::AcquireInterface { client },
        }
    }

    /// The kind of the input the answer stands for.
    #[inline]
    #[must_use]
    pub const fn kind(self) -> InputKind {
        match self {
            CallbackAnswer::ResetExecute => InputKind::ResetExecute,
            CallbackAnswer::CanRecover => InputKind::CanRecover,
            CallbackAnswer::CannotPause => InputKind::CannotPause,
            CallbackAnswer::AcquireInterface => InputKind::AcquireInterface,
        }
    }
}
