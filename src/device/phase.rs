//! A device's phases and the data each carries: the rows of the per-state table
//! (`crate::table`), with what a phase must remember (a pending request, a deferred fatal
//! error, what removal must undo).

use super::*;

value_type! {
    /// Whether the device holds hardware resources (mapped registers, interrupts).
    pub enum Resources {
        /// Nothing claimed: removal has nothing to release.
        None,
        /// Claimed: removal releases them.
        Held,
    }
}

value_type! {
    /// A hardware command whose completion the machine still waits for.
    pub enum HwOp {
        /// [`HardwareCommand::Start`], answered by [`Input::StartDone`].
        Start,
        /// [`HardwareCommand::Reset`], answered by [`Input::ResetDone`].
        Reset,
        /// [`HardwareCommand::PowerDown`], answered by [`Input::PowerDownDone`].
        PowerDown,
        /// [`HardwareCommand::PowerUp`], answered by [`Input::PowerUpDone`].
        PowerUp,
    }
}

value_type! {
    /// What removal undoes once every client has detached.
    pub enum Teardown {
        /// Nothing was claimed (never started, a start that failed early, or stopped).
        Nothing,
        /// Release resources without touching registers (failed or vanished hardware).
        Release,
        /// Quiesce the hardware, then release resources.
        ShutdownAndRelease,
    }
}

impl Teardown {
    /// What removal releases for `resources` claimed.
    pub(super) const fn of(resources: Resources) -> Teardown {
        match resources {
            Resources::None => Teardown::Nothing,
            Resources::Held => Teardown::Release,
        }
    }

    /// The same teardown for hardware that has vanished: no register is touched.
    pub(super) const fn without_registers(self) -> Teardown {
        match self {
            Teardown::ShutdownAndRelease => Teardown::Release,
            other => other,
        }
    }
}

value_type! {
    /// What follows the hardware reset in flight.
    pub enum AfterReset {
        /// Back to running.
        Resume,
        /// One follow-up cycle, for requests that arrived during execution.
        FollowUp,
        /// Remove the device, then complete this request.
        Remove(RequestToken),
    }
}

value_type! {
    /// The state a query remove left, restored exactly by cancel remove.
    pub enum Prior {
        /// Added, never started.
        Added,
        /// Running.
        Running,
        /// Stopped.
        Stopped,
        /// Failed.
        Failed(Resources, FailureCause),
        /// In a low-power state.
        LowPower(PowerDownKind),
    }
}

value_type! {
    /// The query a power transition was asked during: once the hardware reports, the device
    /// returns to it (Windows must not fail `IRP_MN_SET_POWER`, even with a query pending).
    pub enum QueryPending {
        /// Back to stop pending; a stop that arrived meanwhile is served then.
        Stop(Option<RequestToken>),
        /// Back to remove pending.
        Remove,
    }
}

impl QueryPending {
    /// The pending query's state once the power transition ends in `low_power` (`None`:
    /// D0), with `fatal` the deferred fatal error it carried. A held stop is served by the
    /// caller.
    pub(super) const fn returned(self, low_power: Option<PowerDownKind>, fatal: bool) -> Phase {
        match self {
            QueryPending::Stop(_) => Phase::StopPending { fatal, low_power },
            QueryPending::Remove => Phase::RemovePending {
                prior: match low_power {
                    Some(kind) => Prior::LowPower(kind),
                    None => Prior::Running,
                },
                fatal,
            },
        }
    }

    /// The state whose answers clients get meanwhile.
    pub(super) const fn phase(self) -> PhaseKind {
        match self {
            QueryPending::Stop(_) => PhaseKind::StopPending,
            QueryPending::Remove => PhaseKind::RemovePending,
        }
    }
}

value_type! {
    /// The state of a device slot, with the data each state needs.
    pub enum Phase {
        /// No device.
        Absent,
        /// Added, never started.
        Added,
        /// Hardware start in flight; `token` completes when it reports.
        Starting {
            /// The start request.
            token: RequestToken,
            /// A fatal error arrived meanwhile: a cycle serves it once the device runs.
            fatal: bool,
        },
        /// Running, no reset cycle.
        Running,
        /// Clients told `RESET` at `since`; waiting for voters, then for hardware
        /// operations in flight.
        Quiescing {
            /// When the cycle began (each voter's deadline counts from the delivery of its
            /// own `RESET`: see the registry's slots).
            since: Tick,
            /// Voters that have not answered, left or been revoked. Kept so that each
            /// answer costs O(1) and a cycle stays linear in clients.
            voters: u16,
            /// Some voter answered `ResetExecute` (or there was no voter): the hardware is
            /// reset. Otherwise every voter could recover and the cycle ends without one.
            reset_needed: bool,
            /// Every voter answered and the reset waits for hardware operations in flight
            /// since then (their deadline counts from here).
            draining: Option<Tick>,
        },
        /// Hardware reset in flight.
        Executing {
            /// What follows it.
            then: AfterReset,
        },
        /// Query stop succeeded.
        StopPending {
            /// A fatal error arrived meanwhile: the stop absorbs it, or a cycle serves it
            /// after cancel stop.
            fatal: bool,
            /// The query stop came in a low-power state: the stop releases resources
            /// without touching registers, cancel stop returns to that state.
            low_power: Option<PowerDownKind>,
        },
        /// Stop accepted at `since`; waiting for hardware operations in flight.
        Stopping {
            /// The stop request, completed once the hardware is released.
            token: RequestToken,
            /// When the wait began: the operations' deadline counts from here.
            since: Tick,
            /// A fatal error the stop absorbs.
            fatal: bool,
        },
        /// Stopped; resources released.
        Stopped,
        /// Query remove succeeded.
        RemovePending {
            /// The state cancel remove restores.
            prior: Prior,
            /// A fatal error arrived meanwhile (only with a running prior): the removal
            /// absorbs it, or a cycle serves it after cancel remove.
            fatal: bool,
        },
        /// Failed.
        Failed {
            /// What removal must release.
            resources: Resources,
            /// Why it failed.
            cause: FailureCause,
        },
        /// The hardware vanished.
        SurpriseRemoved {
            /// What removal must release (known once `in_flight` reports).
            resources: Resources,
            /// A hardware command that has not reported yet.
            in_flight: Option<HwOp>,
        },
        /// Clients told `Suspending` at `since`; waiting for hardware operations in flight
        /// (`commanded` false), then for the hardware power-down (`commanded` true).
        PoweringDown {
            /// Idle power-down or system sleep.
            kind: PowerDownKind,
            /// The power-down request, completed in the low-power state.
            token: RequestToken,
            /// When the wait for operations began: their deadline counts from here.
            since: Tick,
            /// [`HardwareCommand::PowerDown`] was commanded.
            commanded: bool,
            /// A reset request or fatal error waits for the next power-up.
            reset: bool,
            /// An access after an idle power-down waits: the device comes straight back
            /// once it is down.
            wake: bool,
            /// Asked during a query stop or remove: back to it once down (`reset` is then
            /// that query's deferred fatal error).
            back_to: Option<QueryPending>,
        },
        /// In a low-power state (Dx).
        LowPower {
            /// Idle power-down or system sleep.
            kind: PowerDownKind,
            /// A reset request or fatal error waits for the power-up.
            reset: bool,
        },
        /// Hardware power-up in flight.
        PoweringUp {
            /// The power-up request, if the owner sent one (an access or a reset request
            /// after an idle power-down starts one without).
            token: Option<RequestToken>,
            /// A reset request or fatal error is served once the device is back.
            reset: bool,
            /// Asked during a query stop or remove: back to it once up (`reset` is then
            /// that query's deferred fatal error).
            back_to: Option<QueryPending>,
        },
        /// Draining clients, then undoing.
        Removing {
            /// The remove request, if the PnP manager sent one (unload sends none).
            token: Option<RequestToken>,
            /// When clients that have not detached are revoked (`None`: beyond the clock's
            /// range, so never).
            deadline: Option<Tick>,
            /// What to undo at the end.
            teardown: Teardown,
            /// A hardware command that must report before resources go.
            in_flight: Option<HwOp>,
        },
    }
}

impl Phase {
    /// The pending query a power transition returns to, if it runs for one.
    pub(crate) const fn query_pending(&self) -> Option<QueryPending> {
        match *self {
            Phase::PoweringDown { back_to, .. } | Phase::PoweringUp { back_to, .. } => back_to,
            _ => None,
        }
    }

    /// Whether this phase has a deadline of its own that clients' operations, fences or
    /// states move: a stop's, power-down's or draining reset's wait for operations, or
    /// removal's detach (see `deadlines`). A const fn: for a phase a handler names, known
    /// when the code is compiled.
    #[inline]
    pub(crate) const fn waits(&self) -> bool {
        matches!(
            self,
            Phase::Quiescing {
                draining: Some(_),
                ..
            } | Phase::Stopping { .. }
                | Phase::PoweringDown {
                    commanded: false,
                    ..
                }
                | Phase::Removing { .. }
        )
    }

    /// The state without its data: the row of the per-state table.
    pub const fn kind(&self) -> PhaseKind {
        match self {
            Phase::Absent => PhaseKind::Absent,
            Phase::Added => PhaseKind::Added,
            Phase::Starting { .. } => PhaseKind::Starting,
            Phase::Running => PhaseKind::Running,
            Phase::Quiescing { .. } => PhaseKind::Quiescing,
            Phase::Executing { .. } => PhaseKind::Executing,
            Phase::StopPending { .. } => PhaseKind::StopPending,
            Phase::Stopping { .. } => PhaseKind::Stopping,
            Phase::Stopped => PhaseKind::Stopped,
            Phase::RemovePending { .. } => PhaseKind::RemovePending,
            Phase::Failed { .. } => PhaseKind::Failed,
            Phase::SurpriseRemoved { .. } => PhaseKind::SurpriseRemoved,
            Phase::Removing { .. } => PhaseKind::Removing,
            Phase::PoweringDown { .. } => PhaseKind::PoweringDown,
            Phase::LowPower { .. } => PhaseKind::LowPower,
            Phase::PoweringUp { .. } => PhaseKind::PoweringUp,
        }
    }
}

value_type! {
    /// One physical port.
    pub struct Port {
        /// Its capabilities, once configured.
        pub caps: Option<PortCaps>,
        /// Its link state.
        pub link: LinkState,
    }
}

impl Port {
    pub(super) const UNCONFIGURED: Port = Port {
        caps: None,
        link: LinkState::Down,
    };
}
