//! Human-readable text: what a driver writer sees in a log line or an error message.

use crate::owner_loop::Refusal;
use crate::table::{InputKind, PhaseKind};
use crate::types::{CannotResetReason, CycleOutcome, Error, HardwareCommand, VetoReason};
use core::fmt::{Debug, Display, Formatter, Result};

/// Kinds print as their names (`QueryRemove`, `Quiescing`).
macro_rules! display_as_name {
    ($($t:ty),+) => {$(
        impl Display for $t {
            fn fmt(&self, f: &mut Formatter<'_>) -> Result {
                Debug::fmt(self, f)
            }
        }
    )+};
}

display_as_name!(InputKind, PhaseKind, HardwareCommand);

impl Display for CycleOutcome {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        match self {
            CycleOutcome::Completed(epoch) => write!(f, "completed at epoch {}", epoch.0),
            CycleOutcome::Recovered(epoch) => {
                write!(f, "recovered without a reset at epoch {}", epoch.0)
            }
            CycleOutcome::HardwareFailed => f.write_str("the hardware reset failed"),
            CycleOutcome::ClientTimedOut => f.write_str("a trusted client missed its deadline"),
            CycleOutcome::AbortedByRemove => f.write_str("aborted by remove or unload"),
            CycleOutcome::AbortedBySurpriseRemoval => f.write_str("aborted: the hardware vanished"),
            CycleOutcome::FoldedIntoStop => f.write_str("folded into the stop"),
            CycleOutcome::CannotReset { member, reason } => {
                write!(f, "ended without a reset: device {} {reason}", member.0)
            }
        }
    }
}

impl Display for CannotResetReason {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        match self {
            CannotResetReason::ClientRefused(c) => {
                write!(f, "has a client that refused it (slot {})", c.slot)
            }
            CannotResetReason::MemberState(phase) => write!(f, "cannot take part while {phase}"),
            CannotResetReason::SystemSleep => f.write_str("is in system sleep"),
            CannotResetReason::DeadlinePassed => {
                f.write_str("was not ready by the group's deadline")
            }
        }
    }
}

impl Display for VetoReason {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        f.write_str(match self {
            VetoReason::ResetInProgress => "a reset cycle is running",
            VetoReason::ClientHoldsDevice => "a client holds the device open",
            VetoReason::ClientCannotPause => "a client cannot pause its work",
        })
    }
}

impl Display for Error {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        match self {
            Error::Unloaded => f.write_str("the driver has unloaded: no input is taken any more"),
            Error::Unloading => {
                f.write_str("driver unload is under way: no new device or client is admitted")
            }
            Error::UnloadAlreadyRequested => f.write_str("driver unload was already requested"),
            Error::NoSuchDevice => f.write_str("no such device: the id is beyond the capacity"),
            Error::InvalidState { phase, input } => write!(
                f,
                "{input} is not accepted while the device is {phase} (see the state table)"
            ),
            Error::Vetoed(reason) => write!(f, "vetoed: {reason}; retry when it ends"),
            Error::NoSuchPort => f.write_str("no such physical port, or it is not configured"),
            Error::PortAlreadyConfigured => f.write_str("the physical port is configured already"),
            Error::EmptyBinding => f.write_str("a binding needs at least one port"),
            Error::MixedProtocols { first, other } => write!(
                f,
                "a binding must use one protocol, but it mixes {first:?} and {other:?}"
            ),
            Error::NotBound => f.write_str("the client has bound no port"),
            Error::RegistryFull => f.write_str("every client slot is taken"),
            Error::UnknownClient => {
                f.write_str("unknown client handle: never issued, or its slot was reused")
            }
            Error::ClientRevoked => f.write_str("the client was revoked: every call fails"),
            Error::ClientDetaching => {
                f.write_str("the client was told Removed or unregistered: it may only detach")
            }
            Error::StaleEpoch { current } => write!(
                f,
                "the interface is stale: acquire it again (current epoch {})",
                current.0
            ),
            Error::NotVoting => f.write_str("the client has no RESET to answer"),
            Error::ResetInProgress => f.write_str(
                "a reset cycle is running: wait for RESET_END before touching the hardware",
            ),
            Error::Suspended { kind } => write!(
                f,
                "the device is {}: no hardware access until it is told Resumed",
                match kind {
                    crate::types::PowerDownKind::Idle => "powering down after idling out",
                    crate::types::PowerDownKind::SystemSleep => "suspended for system sleep",
                }
            ),
            Error::AlreadyHolding => f.write_str("the client already holds the device"),
            Error::NotHolding => f.write_str("the client does not hold the device"),
            Error::RequestPending => f.write_str("a request of this kind is already pending"),
            Error::RemoveInProgress => f.write_str("removal was requested: no new reset request"),
            Error::NoCallbackInFlight => f.write_str("no callback to this client is in flight"),
            Error::NoOperationInFlight => {
                f.write_str("no hardware operation of this client is in flight")
            }
            Error::TooManyOperations => f.write_str(
                "the client has the most hardware operations in flight it may have: finish one",
            ),
            Error::AlreadyCannotPause => f.write_str("the client already said it cannot pause"),
            Error::NotCannotPause => f.write_str("the client had not said it cannot pause"),
            Error::NoFenceRequested => f.write_str("no fence of this client was asked for"),
            Error::FastPathNotClosing => {
                f.write_str("no close of this client's fast-path gate is awaited")
            }
            Error::ResetNotDelivered => {
                f.write_str("RESET not delivered yet: return the client's previous callback first")
            }
            Error::NoHardwareCommandInFlight => {
                f.write_str("no hardware command of that kind is in flight")
            }
            Error::TimeWentBackwards { last } => write!(
                f,
                "time went backwards: now is earlier than the last input's time {}",
                last.0
            ),
            Error::EpochExhausted => f.write_str("the epoch counter is exhausted: no more resets"),
            Error::AlreadyInResetGroup { group } => {
                write!(
                    f,
                    "the device is in reset group {} already: leave it first",
                    group.0
                )
            }
            Error::NoSuchGroup => f.write_str("no such reset group: the id is beyond the capacity"),
            Error::GroupCycleInProgress { group } => write!(
                f,
                "reset group {} runs a cycle: change membership after it ends",
                group.0
            ),
            Error::OutputBacklog { needed } => write!(
                f,
                "the output queue needs {needed} free entries: drain poll_output first"
            ),
        }
    }
}

impl core::error::Error for Error {}

impl Display for Refusal {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result {
        write!(f, "{}", self.kind())?;
        if let Some(client) = self.client() {
            write!(
                f,
                " by client {} (generation {}) of device {}",
                client.slot, client.generation, client.device.0
            )?;
        } else if let Some(device) = self.device() {
            write!(f, " for device {}", device.0)?;
        }
        write!(f, " at tick {} refused: {}", self.at.0, self.error)
    }
}
