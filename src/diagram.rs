//! Every state change the machine can make, next to the table that admits it, and the
//! state diagram drawn from both.
//!
//! [`TRANSITIONS`] lists, for each state, which accepted input can move a device to which
//! state. A compile-time check ties it to [`crate::table::TABLE`]: a transition on an input the
//! table refuses in that state fails the build. The tests walk the machine and fail on a
//! state change this list lacks, and compare [`write_mermaid`]'s drawing with the one
//! committed in the README, so neither the list nor the drawing can drift.

use crate::table::{disposition, Disposition, InputKind, PhaseKind, Row, DEVICE_INPUTS};
use core::fmt::{self, Write};

/// One edge: in `from`, an accepted `input` may leave the device in `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Transition {
    /// The state before.
    pub from: PhaseKind,
    /// The input (a table column, or the driver-wide `Timeout` and `Unload`).
    pub input: InputKind,
    /// The state after.
    pub to: PhaseKind,
}

macro_rules! edges {
    ($($from:ident: $($input:ident => $($to:ident)|+),+;)+) => {
        &[$($($(Transition {
            from: PhaseKind::$from,
            input: InputKind::$input,
            to: PhaseKind::$to,
        },)+)+)+]
    };
}

/// Every state change the machine can make. Drawn by [`write_mermaid`]:
///
#[doc = concat!("```text\n", include_str!("diagram.mmd"), "```")]
pub const TRANSITIONS: &[Transition] = edges! {
    Absent: AddDevice => Added;
    Added: Start => Starting,
        QueryRemove => RemovePending,
        Remove => Removing | Absent,
        SurpriseRemoval => SurpriseRemoved,
        Unload => Removing | Absent;
    Starting: StartDone => Running | Failed | Quiescing | Executing | Removing | Absent,
        SurpriseRemoval => SurpriseRemoved | Removing;
    Running: QueryStop => StopPending,
        QueryRemove => RemovePending,
        ResetRequest => Quiescing,
        FatalError => Quiescing | Executing | Failed,
        Remove => Removing | Absent,
        SurpriseRemoval => SurpriseRemoved,
        Timeout => Failed,
        Unload => Removing | Absent,
        PowerDown => PoweringDown;
    Quiescing: ResetExecute => Executing,
        CanRecover => Running | Executing | PoweringDown,
        ResetNack => Running | PoweringDown,
        Unregister => Executing,
        AccessDone => Executing,
        FenceDone => Executing,
        FastPathClosed => Executing,
        Timeout => Executing | Failed,
        Remove => Removing | Absent,
        SurpriseRemoval => SurpriseRemoved,
        Unload => Removing | Absent;
    Executing: ResetDone => Running | Quiescing | Failed | Removing | Absent | PoweringDown,
        SurpriseRemoval => SurpriseRemoved | Removing;
    StopPending: CancelStop => Running | Quiescing | Executing | Failed | LowPower,
        Stop => Stopping | Stopped,
        Remove => Removing | Absent,
        SurpriseRemoval => SurpriseRemoved,
        Unload => Removing | Absent;
    Stopping: AccessDone => Stopped | Removing | Absent,
        FenceDone => Stopped | Removing | Absent,
        FastPathClosed => Stopped | Removing | Absent,
        SurpriseRemoval => SurpriseRemoved | Removing;
    Stopped: Start => Starting,
        QueryRemove => RemovePending,
        Remove => Removing | Absent,
        SurpriseRemoval => SurpriseRemoved,
        Unload => Removing | Absent;
    RemovePending: CancelRemove => Added | Running | Stopped | Failed | Quiescing | Executing | LowPower,
        Remove => Removing | Absent,
        SurpriseRemoval => SurpriseRemoved,
        Unload => Removing | Absent;
    Failed: QueryRemove => RemovePending,
        Remove => Removing | Absent,
        SurpriseRemoval => SurpriseRemoved,
        Unload => Removing | Absent;
    SurpriseRemoved: Remove => Removing | Absent,
        Unload => Removing | Absent;
    Removing: Unregister => Absent,
        CallbackDone => Absent,
        FenceDone => Absent,
        FastPathClosed => Absent,
        AccessDone => Absent,
        StartDone => Absent,
        ResetDone => Absent,
        Timeout => Absent,
        PowerDownDone => Absent,
        PowerUpDone => Absent;
    PoweringDown: PowerDownDone => LowPower | PoweringUp,
        Remove => Removing,
        SurpriseRemoval => SurpriseRemoved,
        Unload => Removing;
    LowPower: PowerUp => PoweringUp,
        Access => PoweringUp,
        ResetRequest => PoweringUp,
        QueryStop => StopPending,
        QueryRemove => RemovePending,
        Remove => Removing | Absent,
        SurpriseRemoval => SurpriseRemoved,
        Unload => Removing | Absent;
    PoweringUp: PowerUpDone => Running | Quiescing | Executing | Failed | SurpriseRemoved,
        Remove => Removing,
        SurpriseRemoval => SurpriseRemoved,
        Unload => Removing;
};

/// Whether `table` lets `input` reach a handler in `from` (driver-wide inputs always do).
fn admitted_in(table: &[Row], from: PhaseKind, input: InputKind) -> bool {
    if input as usize >= DEVICE_INPUTS {
        return true;
    }
    let cell = table
        .get(from as usize)
        .and_then(|row| row.inputs.get(input as usize))
        .copied();
    matches!(cell, Some(Disposition::Handle | Disposition::Defer))
}

// Evaluated at compile time: a transition on a refused, vetoed or ignored cell fails the
// build.
#[allow(clippy::indexing_slicing)]
const _: () = {
    let mut i = 0;
    while i < TRANSITIONS.len() {
        let t = TRANSITIONS[i];
        if (t.input as usize) < DEVICE_INPUTS {
            let cell = crate::table::TABLE[t.from as usize].inputs[t.input as usize];
            assert!(
                matches!(cell, Disposition::Handle | Disposition::Defer),
                "a transition on an input the table does not admit"
            );
        }
        i += 1;
    }
};

/// Whether the machine lists a change from `from` to `to` on `input` (for tests that walk
/// it). A change of state not listed here is a bug in the list or in the machine.
pub fn is_listed(from: PhaseKind, input: InputKind, to: PhaseKind) -> bool {
    from == to
        || (TRANSITIONS
            .iter()
            .any(|t| t.from == from && t.input == input && t.to == to)
            && disposition(from, input) != Disposition::Refuse)
}

/// Draw the state diagram as Mermaid (`stateDiagram-v2`): one arrow per pair of states,
/// labelled with the inputs that make the change, using only the transitions `table`
/// admits. `write_mermaid(&TABLE, TRANSITIONS, ..)` is the README's diagram.
pub fn write_mermaid(table: &[Row], transitions: &[Transition], w: &mut impl Write) -> fmt::Result {
    writeln!(w, "stateDiagram-v2")?;
    writeln!(w, "    [*] --> Absent")?;
    for (i, t) in transitions.iter().enumerate() {
        if !admitted_in(table, t.from, t.input) {
            continue;
        }
        // One arrow per (from, to): drawn at the first admitted transition of the pair.
        let earlier = transitions
            .get(..i)
            .unwrap_or(&[])
            .iter()
            .any(|e| e.from == t.from && e.to == t.to && admitted_in(table, e.from, e.input));
        if earlier {
            continue;
        }
        write!(w, "    {} --> {}: ", t.from, t.to)?;
        let mut first = true;
        for e in transitions.iter() {
            if e.from == t.from && e.to == t.to && admitted_in(table, e.from, e.input) {
                if !first {
                    w.write_str(", ")?;
                }
                write!(w, "{}", e.input)?;
                first = false;
            }
        }
        writeln!(w)?;
    }
    Ok(())
}
