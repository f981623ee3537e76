//! What [`Lifecycle::handle`](crate::Lifecycle::handle) answers at once: [`Reply`] and its
//! answers.

use super::*;

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
