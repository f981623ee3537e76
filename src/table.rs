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
        /// [`crate::Input::CallbackDoneWith`]
        CallbackDoneWith,
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
/// reached only once every close was answered or fenced), CallbackDoneWith (handled where
/// a callback's return is and at least one answer is; the answer then meets its own cell
/// in the same row, refused as that input: `InvalidState { phase, input: <its kind> }`),
/// JoinResetGroup and LeaveResetGroup (membership: any present state but a reset
/// cycle's), ResetNack (a voter's answer: quiescing only, like ResetExecute).
#[rustfmt::skip]
pub const TABLE: [Row; PhaseKind::COUNT] = [
    //                                                Add Cfg Sta SDn QSt CSt Stp QRm CRm Rem Spr Fat RDn Lnk Reg Unr CbD Acq RRq REx Bnd Hld Rel Acc Fnc AcD CnR CnP CaP PDn PDD PUp PUD FPC CbW JRG LRG Nck
    Row { phase: PhaseKind::Absent,          inputs: [H,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  H,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R,  R] },
    Row { phase: PhaseKind::Added,           inputs: [R,  H,  H,  R,  R,  I,  R,  H,  I,  H,  H,  H,  R,  H,  H,  H,  H,  R,  R,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  I,  R,  R,  R,  R,  H,  H,  H,  R] },
    Row { phase: PhaseKind::Starting,        inputs: [R,  R,  R,  H,  R,  I,  R,  R,  I,  R,  H,  H,  R,  H,  H,  H,  H,  R,  R,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  R,  R,  R,  R,  R,  H,  H,  H,  R] },
    Row { phase: PhaseKind::Running,         inputs: [R,  R,  R,  R,  H,  I,  R,  H,  I,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  R,  I,  R,  H,  H,  H,  H,  R] },
    Row { phase: PhaseKind::Quiescing,       inputs: [R,  R,  R,  R,  V,  I,  R,  V,  I,  H,  H,  H,  R,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  H,  H,  H,  H,  H,  H,  R,  I,  R,  H,  H,  R,  R,  H] },
    Row { phase: PhaseKind::Executing,       inputs: [R,  R,  R,  R,  V,  I,  R,  V,  I,  D,  H,  H,  H,  H,  H,  H,  H,  R,  H,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  H,  R,  I,  R,  R,  H,  R,  R,  R] },
    Row { phase: PhaseKind::StopPending,     inputs: [R,  R,  R,  R,  R,  H,  H,  R,  I,  H,  H,  H,  R,  H,  H,  H,  H,  R,  R,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  H,  R,  H,  R,  H,  H,  H,  H,  R] },
    Row { phase: PhaseKind::Stopping,        inputs: [R,  R,  R,  R,  R,  I,  R,  R,  I,  R,  H,  H,  R,  H,  H,  H,  H,  R,  R,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  R,  R,  R,  R,  H,  H,  H,  H,  R] },
    Row { phase: PhaseKind::Stopped,         inputs: [R,  R,  H,  R,  R,  I,  R,  H,  I,  H,  H,  H,  R,  H,  H,  H,  H,  R,  R,  R,  H,  H,  H,  R,  H,  H,  R,  H,  H,  I,  R,  I,  R,  R,  H,  H,  H,  R] },
    Row { phase: PhaseKind::RemovePending,   inputs: [R,  R,  R,  R,  R,  I,  R,  R,  H,  H,  H,  H,  R,  H,  R,  H,  H,  R,  R,  R,  H,  R,  R,  R,  H,  H,  R,  R,  R,  H,  R,  H,  R,  H,  R,  H,  H,  R] },
    Row { phase: PhaseKind::Failed,          inputs: [R,  R,  R,  R,  R,  I,  R,  H,  I,  H,  H,  H,  R,  H,  R,  H,  H,  R,  R,  R,  H,  R,  H,  R,  H,  H,  R,  R,  H,  R,  R,  R,  R,  H,  R,  H,  H,  R] },
    Row { phase: PhaseKind::SurpriseRemoved, inputs: [R,  R,  R,  H,  R,  I,  R,  R,  I,  H,  I,  H,  H,  H,  R,  H,  H,  R,  R,  R,  R,  R,  R,  R,  H,  H,  R,  R,  R,  R,  H,  R,  H,  H,  R,  H,  H,  R] },
    Row { phase: PhaseKind::Removing,        inputs: [R,  R,  R,  H,  R,  I,  R,  R,  I,  H,  H,  H,  H,  H,  R,  H,  H,  R,  R,  R,  R,  R,  R,  R,  H,  H,  R,  R,  R,  R,  H,  R,  H,  H,  R,  H,  H,  R] },
    Row { phase: PhaseKind::PoweringDown,    inputs: [R,  R,  R,  R,  R,  H,  H,  R,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  R,  H,  R,  R,  H,  H,  H,  H,  R] },
    Row { phase: PhaseKind::LowPower,        inputs: [R,  R,  R,  R,  H,  I,  R,  H,  I,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  R,  H,  R,  R,  H,  H,  H,  R] },
    Row { phase: PhaseKind::PoweringUp,      inputs: [R,  R,  R,  R,  R,  H,  H,  R,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  H,  H,  H,  H,  R,  H,  H,  R,  R,  H,  H,  R,  H,  H,  H,  R] },
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
        InputKind::CallbackDoneWith,
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

// An answer given with a callback's return (`Input::CallbackDoneWith`) is handled or
// refused, never ignored, deferred or vetoed: its cell decides alone.
#[allow(clippy::indexing_slicing)]
const _: () = {
    let answers = [
        InputKind::ResetExecute,
        InputKind::CanRecover,
        InputKind::CannotPause,
        InputKind::AcquireInterface,
    ];
    let mut i = 0;
    while i < TABLE.len() {
        let mut k = 0;
        while k < answers.len() {
            let cell = TABLE[i].inputs[answers[k] as usize];
            assert!(
                matches!(cell, Disposition::Handle | Disposition::Refuse),
                "an answer given with a callback's return is handled or refused"
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

/// The front end's row of a device that takes the full front end whatever its input: a
/// member of a reset group, any device while the driver unloads or once it unloaded (see
/// [`FRONT`]). No input's mask has its bit.
pub(crate) const SLOW_ROW: u8 = 31;

/// The inputs a client gives during a power transition run for a pending query: their
/// answer may be that query's (`Device::refused_for_pending_query`), so they take the full
/// front end in the powering rows.
pub(crate) const PENDING_QUERY_INPUTS: [InputKind; 8] = [
    InputKind::Register,
    InputKind::AcquireInterface,
    InputKind::ResetRequest,
    InputKind::Hold,
    InputKind::ReleaseHold,
    InputKind::Access,
    InputKind::CannotPause,
    InputKind::CanPause,
];

/// By input kind, a mask of front rows (bit `PhaseKind as u8`; a device's row is its
/// phase's kind or [`SLOW_ROW`]): whether the front end may run the input's handler at once,
/// its table cell being [`Disposition::Handle`] or [`Disposition::Defer`] and nothing else
/// to decide (the device in no reset group, the driver loaded, no pending query's answer to
/// give, no membership change). Every other pair takes the full front end, which reads
/// [`TABLE`] itself; so this decides nothing the table does not: it only says where the
/// answer is known without looking further. Derived from [`TABLE`] at compile time.
#[allow(clippy::indexing_slicing)]
pub(crate) const FRONT: [u32; DEVICE_INPUTS] = {
    let mut front = [0; DEVICE_INPUTS];
    let mut k = 0;
    while k < DEVICE_INPUTS {
        let membership =
            k == InputKind::JoinResetGroup as usize || k == InputKind::LeaveResetGroup as usize;
        let mut pending_query_input = false;
        let mut q = 0;
        while q < PENDING_QUERY_INPUTS.len() {
            if PENDING_QUERY_INPUTS[q] as usize == k {
                pending_query_input = true;
            }
            q += 1;
        }
        let mut row = 0;
        while row < PhaseKind::COUNT {
            let powering = matches!(
                TABLE[row].phase,
                PhaseKind::PoweringDown | PhaseKind::PoweringUp
            );
            if matches!(
                TABLE[row].inputs[k],
                Disposition::Handle | Disposition::Defer
            ) && !membership
                && !(powering && pending_query_input)
            {
                front[k] |= 1 << row;
            }
            row += 1;
        }
        k += 1;
    }
    front
};

// Every phase kind has its bit, below the slow row's.
const _: () = assert!(PhaseKind::COUNT < SLOW_ROW as usize);

/// Whether the front end may run a device input of `kind` at once on a device whose front
/// row is `row` (see [`FRONT`]); `false` for anything else. (The shift takes `row` modulo
/// 32, as the machine's shift does: no row reaches 32.)
#[inline(always)]
pub(crate) fn front_admits(kind: InputKind, row: u8) -> bool {
    FRONT
        .get(kind as usize)
        .is_some_and(|rows| rows.wrapping_shr(u32::from(row)) & 1 != 0)
}
