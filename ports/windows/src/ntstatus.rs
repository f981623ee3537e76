//! NTSTATUS values and the mapping from the core's errors and statuses.

use pnp_lifecycle::{Error, Status};

/// An NTSTATUS-like completion status (the 32-bit value Windows uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NtStatus(pub u32);

impl NtStatus {
    /// `STATUS_SUCCESS`.
    pub const SUCCESS: NtStatus = NtStatus(0x0000_0000);
    /// `STATUS_UNSUCCESSFUL`: a status or error of a newer core this port does not know.
    pub const UNSUCCESSFUL: NtStatus = NtStatus(0xC000_0001);
    /// `STATUS_PENDING`: the IRP completes later.
    pub const PENDING: NtStatus = NtStatus(0x0000_0103);
    /// `STATUS_DEVICE_BUSY`: a veto, a pending request, a reset in progress.
    pub const DEVICE_BUSY: NtStatus = NtStatus(0x8000_0011);
    /// `STATUS_DEVICE_POWERED_OFF`: an access while the system sleeps.
    pub const DEVICE_POWERED_OFF: NtStatus = NtStatus(0x8000_000F);
    /// `STATUS_IO_TIMEOUT`: an access waited for a power-up past its deadline.
    pub const IO_TIMEOUT: NtStatus = NtStatus(0xC000_00B5);
    /// `STATUS_INVALID_HANDLE`: an unknown client handle.
    pub const INVALID_HANDLE: NtStatus = NtStatus(0xC000_0008);
    /// `STATUS_INVALID_PARAMETER`: a bad port, binding or tick.
    pub const INVALID_PARAMETER: NtStatus = NtStatus(0xC000_000D);
    /// `STATUS_NO_SUCH_DEVICE`: no such device, or the driver finished unloading.
    pub const NO_SUCH_DEVICE: NtStatus = NtStatus(0xC000_000E);
    /// `STATUS_INVALID_DEVICE_REQUEST`: the request makes no sense for this client.
    pub const INVALID_DEVICE_REQUEST: NtStatus = NtStatus(0xC000_0010);
    /// `STATUS_ACCESS_DENIED`: the client was revoked (fenced).
    pub const ACCESS_DENIED: NtStatus = NtStatus(0xC000_0022);
    /// `STATUS_DELETE_PENDING`: remove or unload began (also the remove lock's refusal).
    pub const DELETE_PENDING: NtStatus = NtStatus(0xC000_0056);
    /// `STATUS_REVISION_MISMATCH`: a stale interface (older epoch): acquire it again.
    pub const REVISION_MISMATCH: NtStatus = NtStatus(0xC000_0059);
    /// `STATUS_INSUFFICIENT_RESOURCES`: a capacity is exhausted.
    pub const INSUFFICIENT_RESOURCES: NtStatus = NtStatus(0xC000_009A);
    /// `STATUS_POSSIBLE_DEADLOCK`: a blocking call made where it would wait for the thread
    /// making it (a blocking unregister from inside a client callback).
    pub const POSSIBLE_DEADLOCK: NtStatus = NtStatus(0xC000_0194);
    /// `STATUS_INVALID_DEVICE_STATE`: the core's per-state table refuses the request.
    pub const INVALID_DEVICE_STATE: NtStatus = NtStatus(0xC000_0184);
    /// `STATUS_DEVICE_REMOVED`: the device vanished before the request finished.
    pub const DEVICE_REMOVED: NtStatus = NtStatus(0xC000_02B6);
    /// `STATUS_DEVICE_HARDWARE_ERROR`: the hardware start failed.
    pub const DEVICE_HARDWARE_ERROR: NtStatus = NtStatus(0xC000_0483);

    /// Whether this is a success or informational status (`NT_SUCCESS`).
    pub const fn is_success(self) -> bool {
        self.0 < 0x8000_0000
    }

    /// The NTSTATUS name of a value this crate uses, or `"STATUS_?"`.
    pub const fn name(self) -> &'static str {
        match self.0 {
            0x0000_0000 => "STATUS_SUCCESS",
            0x0000_0103 => "STATUS_PENDING",
            0xC000_0001 => "STATUS_UNSUCCESSFUL",
            0x8000_0011 => "STATUS_DEVICE_BUSY",
            0x8000_000F => "STATUS_DEVICE_POWERED_OFF",
            0xC000_00B5 => "STATUS_IO_TIMEOUT",
            0xC000_0008 => "STATUS_INVALID_HANDLE",
            0xC000_000D => "STATUS_INVALID_PARAMETER",
            0xC000_000E => "STATUS_NO_SUCH_DEVICE",
            0xC000_0010 => "STATUS_INVALID_DEVICE_REQUEST",
            0xC000_0022 => "STATUS_ACCESS_DENIED",
            0xC000_0056 => "STATUS_DELETE_PENDING",
            0xC000_0059 => "STATUS_REVISION_MISMATCH",
            0xC000_009A => "STATUS_INSUFFICIENT_RESOURCES",
            0xC000_0184 => "STATUS_INVALID_DEVICE_STATE",
            0xC000_0194 => "STATUS_POSSIBLE_DEADLOCK",
            0xC000_02B6 => "STATUS_DEVICE_REMOVED",
            0xC000_0483 => "STATUS_DEVICE_HARDWARE_ERROR",
            _ => "STATUS_?",
        }
    }
}

impl core::fmt::Display for NtStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} (0x{:08X})", self.name(), self.0)
    }
}

impl From<Status> for NtStatus {
    /// The status of an accepted request the core completed.
    fn from(status: Status) -> NtStatus {
        match status {
            Status::Success => NtStatus::SUCCESS,
            Status::HardwareFailed => NtStatus::DEVICE_HARDWARE_ERROR,
            Status::DeviceGone => NtStatus::DEVICE_REMOVED,
            // `Status` is non-exhaustive: a status this port does not know yet.
            _ => NtStatus::UNSUCCESSFUL,
        }
    }
}

impl From<Error> for NtStatus {
    /// The failure status of a request the core refused.
    fn from(error: Error) -> NtStatus {
        match error {
            Error::Unloaded | Error::NoSuchDevice => NtStatus::NO_SUCH_DEVICE,
            Error::Unloading
            | Error::UnloadAlreadyRequested
            | Error::RemoveInProgress
            | Error::ClientDetaching => NtStatus::DELETE_PENDING,
            Error::InvalidState { .. } | Error::NoHardwareCommandInFlight => {
                NtStatus::INVALID_DEVICE_STATE
            }
            Error::Vetoed(_)
            | Error::ResetInProgress
            | Error::RequestPending
            | Error::ResetNotDelivered
            | Error::OutputBacklog { .. } => NtStatus::DEVICE_BUSY,
            Error::NoSuchPort
            | Error::PortAlreadyConfigured
            | Error::EmptyBinding
            | Error::MixedProtocols { .. }
            | Error::TimeWentBackwards { .. } => NtStatus::INVALID_PARAMETER,
            Error::NotBound
            | Error::NotVoting
            | Error::AlreadyHolding
            | Error::NotHolding
            | Error::NoCallbackInFlight
            | Error::NoOperationInFlight
            | Error::AlreadyCannotPause
            | Error::NotCannotPause
            | Error::NoFenceRequested => NtStatus::INVALID_DEVICE_REQUEST,
            Error::RegistryFull | Error::EpochExhausted | Error::TooManyOperations => {
                NtStatus::INSUFFICIENT_RESOURCES
            }
            Error::UnknownClient => NtStatus::INVALID_HANDLE,
            Error::ClientRevoked => NtStatus::ACCESS_DENIED,
            Error::Suspended { .. } => NtStatus::DEVICE_POWERED_OFF,
            Error::StaleEpoch { .. } => NtStatus::REVISION_MISMATCH,
            // `Error` is non-exhaustive: a refusal this port does not know yet.
            _ => NtStatus::UNSUCCESSFUL,
        }
    }
}
