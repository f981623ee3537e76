//! What the machine asks of the owner: [`Output`], the events clients are told, and how
//! requests and cycles ended.

use super::*;

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
        /// outcome. When a member already cannot take part as the request (or fatal
        /// error) arrives, the request is answered as usual and this outcome follows in
        /// the same input; no client is told `RESET` for a cycle that cannot run.
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
