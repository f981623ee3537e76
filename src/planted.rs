//! Planted faults in the machine's own decisions, compiled only with `--cfg pnp_faults`
//! (never in a shipped build). A test selects one fault for the current thread and shows
//! that the oracle, with the reference model off, catches it. See `tests/planted_faults.rs`.

extern crate std;

use core::cell::Cell;

/// A wrong decision the machine can be made to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// No fault.
    None,
    /// A voter's `RESET` deadline counts from half its timeout (revoked too early, I13).
    EarlyRevocation,
    /// Surprise removal is refused while a client has a callback in flight (I11).
    RefuseSurpriseWhileCallbackRuns,
    /// A fatal error during a pending stop is answered `Deferred` and then forgotten (I8).
    LoseDeferredFatal,
    /// Revoking a client whose callback is stuck asks for no fence: removal waits forever
    /// (I9).
    NoFenceForStuckCallback,
    /// `poll_timeout` forgets callback deadlines: nothing wakes the owner (I9).
    NoCallbackDeadline,
    /// The hardware reset is commanded with one voter still silent (I3).
    ResetWithOneVoterLeft,
    /// A registration is admitted while remove is pending.
    RegisterWhileRemovePending,
    /// Query remove is not vetoed while a client holds the device.
    QueryRemoveIgnoresHold,
    /// Stop quiesces the hardware but does not release its resources.
    StopKeepsResources,
    /// Unregister keeps the client's waiting events, which are then delivered (I1).
    NotifyAfterUnregister,
    /// A second callback is handed out while one is in flight (I11's bound).
    SecondCallbackInFlight,
    /// Stop shuts the hardware down while a client's operation is in flight (I12).
    StopWhileOperationInFlight,
    /// The hardware reset is commanded before a revoked client's operation is fenced
    /// (I12).
    ResetBeforeFence,
    /// Surprise removal in a low-power state repeats the power-down command (a hardware
    /// command in Dx, I14).
    HardwareCommandInDx,
    /// A hardware access is granted in a low-power state (I14).
    OperationGrantedInDx,
    /// The power-up tells no client the device is back (I14).
    SuspendWithoutResume,
    /// A fast-path gate is opened again while its close is not answered (I15).
    GateReopenedWhileClosing,
    /// A close's answer loses the operations it carried: the drain proceeds without them
    /// (I15).
    CloseDropsCarriedOperations,
    /// A gate is opened for a client whose interface is of an older epoch (I15).
    GateOpenedAtStaleEpoch,
    /// A power-down closes no gate: the gate stays open into Dx (I15).
    GateLeftOpenIntoDx,
    /// A revoked client's gate is opened (I15).
    GateOpenedForRevokedClient,
    /// A reset group's hardware reset is commanded once one member is quiesced, before
    /// the other members' voters answered (I3 per group).
    GroupResetBeforeAllAnswered,
    /// A voter's refusal of a reset (`ResetNack`) is taken for an ack: the reset runs.
    GroupNackLost,
    /// A member removed or surprise-removed ends its group's cycle as if it could not take
    /// part, instead of leaving it.
    GroupRemovedMemberBlocks,
}

impl Fault {
    /// Every planted fault.
    pub const ALL: &'static [Fault] = &[
        Fault::EarlyRevocation,
        Fault::RefuseSurpriseWhileCallbackRuns,
        Fault::LoseDeferredFatal,
        Fault::NoFenceForStuckCallback,
        Fault::NoCallbackDeadline,
        Fault::ResetWithOneVoterLeft,
        Fault::RegisterWhileRemovePending,
        Fault::QueryRemoveIgnoresHold,
        Fault::StopKeepsResources,
        Fault::NotifyAfterUnregister,
        Fault::SecondCallbackInFlight,
        Fault::StopWhileOperationInFlight,
        Fault::ResetBeforeFence,
        Fault::HardwareCommandInDx,
        Fault::OperationGrantedInDx,
        Fault::SuspendWithoutResume,
        Fault::GateReopenedWhileClosing,
        Fault::CloseDropsCarriedOperations,
        Fault::GateOpenedAtStaleEpoch,
        Fault::GateLeftOpenIntoDx,
        Fault::GateOpenedForRevokedClient,
        Fault::GroupResetBeforeAllAnswered,
        Fault::GroupNackLost,
        Fault::GroupRemovedMemberBlocks,
    ];
}

std::thread_local! {
    static ACTIVE: Cell<Fault> = const { Cell::new(Fault::None) };
}

/// Plant `fault` for every machine used on this thread (`Fault::None` removes it).
pub fn plant(fault: Fault) {
    ACTIVE.with(|a| a.set(fault));
}

/// Whether `fault` is planted on this thread.
pub fn active(fault: Fault) -> bool {
    ACTIVE.with(|a| a.get() == fault)
}
