//! The per-state table: for every device state, what every device input does there, and
//! every state change the machine can make ([`TRANSITIONS`], drawn by [`write_mermaid`]).
//! This is the machine's specification in data; `tests/state_matrix.rs` walks every cell.
//!
//! Like the Windows Driver Frameworks' PnP machine, there is one row per state, the row's
//! position tied to the state enum at compile time. The machine consults the table before
//! any handler runs, so a refused cell can never reach a handler, and the test
//! `tests/state_matrix.rs` walks every cell.

pub use crate::diagram::{is_listed, write_mermaid, Transition, TRANSITIONS};

macro_rules! kinds {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
        pub enum $name { $($(#[$vm])* $v),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            /// How many values there are.
            pub const COUNT: usize = $name::ALL.len();
        }
    };
}

kinds! {
    /// The state of one device slot, without its data.
    PhaseKind {
        /// No device in the slot.
        Absent,
        /// Added, never started.
        Added,
        /// Hardware start commanded, not yet reported.
        Starting,
        /// Running, no reset cycle.
        Running,
        /// Reset cycle: clients told `RESET`, waiting for their answers.
        Quiescing,
        /// Reset cycle: hardware reset commanded, not yet reported.
        Executing,
        /// Query stop succeeded.
        StopPending,
        /// Stop accepted: clients told, waiting for hardware operations in flight to
        /// finish (or be fenced) before the hardware is shut down and released.
        Stopping,
        /// Stopped for a rebalance; the hardware is released.
        Stopped,
        /// Query remove succeeded.
        RemovePending,
        /// Failed: only removal leaves.
        Failed,
        /// The hardware vanished; removal follows.
        SurpriseRemoved,
        /// Removal is draining clients.
        Removing,
        /// Power-down accepted: clients told `Suspending`; waiting for hardware operations
        /// in flight, then for the hardware power-down commanded.
        PoweringDown,
        /// In a low-power state (Dx): no hardware command but power-up, no access granted.
        LowPower,
        /// Hardware power-up commanded, not yet reported.
        PoweringUp,
    }
}

kinds! {
    /// The kind of an [`crate::Input`], without its data.
    InputKind {
        /// [`crate::Input::AddDevice`]
        AddDevice,
        /// [`crate::Input::ConfigurePort`]
        ConfigurePort,
        /// [`crate::Input::Start`]
        Start,
        /// [`crate::Input::StartDone`]
        StartDone,
        /// [`crate::Input::QueryStop`]
        QueryStop,
        /// [`crate::Input::CancelStop`]
        CancelStop,
        /// [`crate::Input::Stop`]
        Stop,
        /// [`crate::Input::QueryRemove`]
        QueryRemove,
        /// [`crate::Input::CancelRemove`]
        CancelRemove,
        /// [`crate::Input::Remove`]
        Remove,
        /// [`crate::Input::SurpriseRemoval`]
        SurpriseRemoval,
        /// [`crate::Input::FatalError`]
        FatalError,
        /// [`crate::Input::ResetDone`]
        ResetDone,
        /// [`crate::Input::LinkChanged`]
        LinkChanged,
        /// [`crate::Input::Register`]
        Register,
        /// [`crate::Input::Unregister`]
        Unregister,
        /// [`crate::Input::CallbackDone`]
        CallbackDone,
        /// [`crate::Input::AcquireInterface`]
        AcquireInterface,
        /// [`crate::Input::ResetRequest`]
        ResetRequest,
        /// [`crate::Input::ResetExecute`]
        ResetExecute,
        /// [`crate::Input::Bind`]
        Bind,
        /// [`crate::Input::Hold`]
        Hold,
        /// [`crate::Input::ReleaseHold`]
        ReleaseHold,
        /// [`crate::Input::Access`]
        Access,
        /// [`crate::Input::FenceDone`]
        FenceDone,
        /// [`crate::Input::AccessDone`]
        AccessDone,
        /// [`crate::Input::CanRecover`]
        CanRecover,
        /// [`crate::Input::CannotPause`]
        CannotPause,
        /// [`crate::Input::CanPause`]
        CanPause,
        /// [`crate::Input::PowerDown`]
        PowerDown,
        /// [`crate::Input::PowerDownDone`]
        PowerDownDone,
        /// [`crate::Input::PowerUp`]
        PowerUp,
        /// [`crate::Input::PowerUpDone`]
        PowerUpDone,
        /// [`crate::Input::FastPathClosed`]
        FastPathClosed,
        /// [`crate::Input::JoinResetGroup`]
        JoinResetGroup,
        /// [`crate::Input::LeaveResetGroup`]
        LeaveResetGroup,
        /// [`crate::Input::ResetNack`]
        ResetNack,
        /// [`crate::Input::Timeout`] (driver-wide: not in the table)
        Timeout,
        /// [`crate::Input::Unload`] (driver-wide: not in the table)
        Unload,
    }
}

kinds! {
    /// What a state does with an input.
    Disposition {
        /// Acted on now. The handler may still refuse for the input's data (an unknown
        /// client, a veto, a stale epoch) with a typed error and no change.
        Handle,
        /// Accepted now, acted on when the hardware command in flight reports back.
        Defer,
        /// Accepted and answered with success, with no other effect (a cancel with nothing
        /// to cancel, a second surprise removal). Windows requires such requests to succeed.
        Ignore,
        /// Refused with [`crate::Error::Vetoed`]`(ResetInProgress)`: a query the state
        /// understands and denies (query stop or remove during a reset cycle).
        Veto,
        /// Refused with [`crate::Error::InvalidState`]; nothing changes.
        Refuse,
    }
}

/// One row of the table: a state and the disposition of every device input in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Row {
    /// The state this row describes.
    pub phase: PhaseKind,
    /// Indexed by `InputKind as usize`, for the device inputs (all but `Timeout` and `Unload`).
    pub inputs: [Disposition; DEVICE_INPUTS],
}

/// How many input kinds the table has a column for: all but `Timeout` and `Unload`.
pub const DEVICE_INPUTS: usize = InputKind::COUNT - 2;

use Disposition::{Defer as D, Handle as H, Ignore as I, Refuse as R, Veto as V};

/// The table. Columns, in [`InputKind`] order:
/// AddDevice, ConfigurePort, Start, StartDone, QueryStop, CancelStop, Stop, QueryRemove,
/// CancelRemove, Remove, SurpriseRemoval, FatalError, ResetDone, LinkChanged, Register,
/// Unregister, CallbackDone, AcquireInterface, ResetRequest, ResetExecute, Bind, Hold,
/// ReleaseHold, Access, FenceDone, AccessDone, CanRecover, CannotPause, CanPause,
/// PowerDown, PowerDownDone, PowerUp, PowerUpDone, FastPathClosed (handled in every state a
/// close can be awaited in: running, or any state a running device leaves for, before the
/// drain that waits for the answer; the handler refuses it by name unless that client's
/// gate is closing. Added, starting, executing, stopped and the low-power states are
/// reached only once every close was answered or fenced), JoinResetGroup and
/// LeaveResetGroup (membership: any present state but a reset cycle's), ResetNack (a
/// voter's answer: quiescing only, like ResetExecute).
#[rustfmt::skip]
pub const TABLE: [Row; PhaseKind::COUNT] = [
    //                                                Add Cfg Sta SDn QSt CSt Stp QRm CRm Rem Spr Fat RDn Lnk Reg Unr CbD Acq RRq REx Bnd Hld Rel Acc Fnc AcD CnR CnP CaP PDn PDD PUp PUD FPC JRG LRG Nck
    Row { phase: PhaseKind::Absent,          inputs: [H,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  H,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R, R,  R,  R] },
    Row { phase: PhaseKind::Added,           inputs: [R,  H,  H,  R,  R,  I,  R,  H,  I,  H,  H,  H,  R,  H,  H,  H,  H,  R,  R,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  I,  R,  R,  R,  R, H,  H,  R] },
    Row { phase: PhaseKind::Starting,        inputs: [R,  R,  R,  H,  R,  I,  R,  R,  I,  R,  H,  H,  R,  H,  H,  H,  H,  R,  R,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  R,  R,  R,  R,  R, H,  H,  R] },
    Row { phase: PhaseKind::Running,         inputs: [R,  R,  R,  R,  H,  I,  R,  H,  I,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  R,  I,  R,  H, H,  H,  R] },
    Row { phase: PhaseKind::Quiescing,       inputs: [R,  R,  R,  R,  V,  I,  R,  V,  I,  H,  H,  H,  R,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  H,  H,  H,  H,  H,  H,  R,  I,  R,  H, R,  R,  H] },
    Row { phase: PhaseKind::Executing,       inputs: [R,  R,  R,  R,  V,  I,  R,  V,  I,  D,  H,  H,  H,  H,  H,  H,  H,  R,  H,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  H,  R,  I,  R,  R, R,  R,  R] },
    Row { phase: PhaseKind::StopPending,     inputs: [R,  R,  R,  R,  R,  H,  H,  R,  I,  H,  H,  H,  R,  H,  H,  H,  H,  R,  R,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  R,  R,  R,  R,  H, H,  H,  R] },
    Row { phase: PhaseKind::Stopping,        inputs: [R,  R,  R,  R,  R,  I,  R,  R,  I,  R,  H,  H,  R,  H,  H,  H,  H,  R,  R,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  R,  R,  R,  R,  H, H,  H,  R] },
    Row { phase: PhaseKind::Stopped,         inputs: [R,  R,  H,  R,  R,  I,  R,  H,  I,  H,  H,  H,  R,  H,  H,  H,  H,  R,  R,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  I,  R,  I,  R,  R, H,  H,  R] },
    Row { phase: PhaseKind::RemovePending,   inputs: [R,  R,  R,  R,  R,  I,  R,  R,  H,  H,  H,  H,  R,  H,  R,  H,  H,  R,  R,  R,  H,  R,  R,  R,  H,  H,  R,  R,  R,  R,  R,  R,  R,  H, H,  H,  R] },
    Row { phase: PhaseKind::Failed,          inputs: [R,  R,  R,  R,  R,  I,  R,  H,  I,  H,  H,  H,  R,  H,  R,  H,  H,  R,  R,  R,  H,  R,  H,  R,  H,  H,  R,  R,  H,  R,  R,  R,  R,  H, H,  H,  R] },
    Row { phase: PhaseKind::SurpriseRemoved, inputs: [R,  R,  R,  H,  R,  I,  R,  R,  I,  H,  I,  H,  H,  H,  R,  H,  H,  R,  R,  R,  R,  R,  R,  R,  H,  H,  R,  R,  R,  R,  H,  R,  H,  H, H,  H,  R] },
    Row { phase: PhaseKind::Removing,        inputs: [R,  R,  R,  H,  R,  I,  R,  R,  I,  H,  H,  H,  H,  H,  R,  H,  H,  R,  R,  R,  R,  R,  R,  R,  H,  H,  R,  R,  R,  R,  H,  R,  H,  H, H,  H,  R] },
    Row { phase: PhaseKind::PoweringDown,    inputs: [R,  R,  R,  R,  R,  I,  R,  R,  I,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  R,  H,  R,  R,  H, H,  H,  R] },
    Row { phase: PhaseKind::LowPower,        inputs: [R,  R,  R,  R,  H,  I,  R,  H,  I,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  R,  H,  R,  R, H,  H,  R] },
    Row { phase: PhaseKind::PoweringUp,      inputs: [R,  R,  R,  R,  R,  I,  R,  R,  I,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  R,  R,  H,  H,  R, H,  H,  R] },
];

// Evaluated at compile time: a bad row fails the build, never a running driver.
#[allow(clippy::indexing_slicing)]
const _: () = {
    let mut i = 0;
    while i < TABLE.len() {
        assert!(
            TABLE[i].phase as usize == i,
            "TABLE rows must follow PhaseKind order"
        );
        i += 1;
    }
    assert!(InputKind::Timeout as usize == DEVICE_INPUTS);
    assert!(InputKind::Unload as usize == DEVICE_INPUTS + 1);
};

// Inputs answered with a value (a handle, an epoch, an answer) are never ignored or
// deferred, so their handler always gives that value (see `Lifecycle::register` & co).
#[allow(clippy::indexing_slicing)]
const _: () = {
    let valued = [
        InputKind::Register,
        InputKind::Unregister,
        InputKind::AcquireInterface,
        InputKind::ResetRequest,
        InputKind::FatalError,
        InputKind::Access,
    ];
    let mut i = 0;
    while i < TABLE.len() {
        let mut k = 0;
        while k < valued.len() {
            let cell = TABLE[i].inputs[valued[k] as usize];
            assert!(
                !matches!(cell, Disposition::Ignore | Disposition::Defer),
                "an input answered with a value must never be ignored or deferred"
            );
            k += 1;
        }
        i += 1;
    }
};

/// The disposition of `input` in `phase`. Driver-wide inputs (`Timeout`, `Unload`) are
/// always [`Disposition::Handle`] here; the machine refuses them only once unloaded.
pub fn disposition(phase: PhaseKind, input: InputKind) -> Disposition {
    TABLE
        .get(phase as usize)
        .and_then(|row| row.inputs.get(input as usize))
        .copied()
        .unwrap_or(Disposition::Handle)
}
