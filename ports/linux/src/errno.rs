//! Linux errno values and the mapping of core errors onto them.

use pnp_lifecycle::{Error, PhaseKind};

/// The errno values the port returns (positive, as in `<errno.h>`; the kernel returns
/// them negated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(clippy::upper_case_acronyms)]
#[repr(i32)]
pub enum Errno {
    /// 2: no such client.
    ENOENT = 2,
    /// 5: the context was revoked (uverbs disassociate) or the device failed.
    EIO = 5,
    /// 11: try again (a reset cycle runs, or a transient backlog).
    EAGAIN = 11,
    /// 16: busy (a vetoed query, a transient device state, a pending request).
    EBUSY = 16,
    /// 19: the device is gone or going (removal, unload).
    ENODEV = 19,
    /// 22: invalid argument (not voting, bad port, mixed protocols).
    EINVAL = 22,
    /// 28: no free client slot.
    ENOSPC = 28,
    /// 35: a blocking call from inside a callback of the port.
    EDEADLK = 35,
    /// 75: the epoch counter is exhausted.
    EOVERFLOW = 75,
    /// 108: the device is (going) down for system sleep: retry after `resume`.
    ESHUTDOWN = 108,
    /// 110: a runtime resume an access waited for did not come in time.
    ETIMEDOUT = 110,
    /// 116: the interface is from before a reset.
    ESTALE = 116,
}

impl Errno {
    /// The numeric value on Linux.
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// An error of a port entry point: the errno, and the core's reason when there is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinuxError {
    /// The errno.
    pub errno: Errno,
    /// The core's typed reason, if the core refused the input.
    pub cause: Option<Error>,
}

impl LinuxError {
    /// A port-level error with no core cause.
    pub const fn new(errno: Errno) -> Self {
        LinuxError { errno, cause: None }
    }
}

impl std::fmt::Display for LinuxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cause {
            Some(c) => write!(f, "{:?} ({c})", self.errno),
            None => write!(f, "{:?}", self.errno),
        }
    }
}

impl std::error::Error for LinuxError {}

/// The errno a core error maps to.
pub fn errno_of(e: Error) -> Errno {
    match e {
        Error::ClientRevoked => Errno::EIO,
        Error::Unloaded
        | Error::Unloading
        | Error::NoSuchDevice
        | Error::ClientDetaching
        | Error::RemoveInProgress => Errno::ENODEV,
        Error::InvalidState { phase, .. } => match phase {
            PhaseKind::Absent | PhaseKind::Removing | PhaseKind::SurpriseRemoved => Errno::ENODEV,
            PhaseKind::Failed => Errno::EIO,
            _ => Errno::EBUSY,
        },
        Error::Vetoed(_)
        | Error::RequestPending
        | Error::UnloadAlreadyRequested
        | Error::TooManyOperations
        | Error::AlreadyInResetGroup { .. }
        | Error::GroupCycleInProgress { .. } => Errno::EBUSY,
        Error::ResetInProgress | Error::OutputBacklog { .. } | Error::ResetNotDelivered => {
            Errno::EAGAIN
        }
        Error::StaleEpoch { .. } => Errno::ESTALE,
        // Not EBUSY (a veto or a pending request) nor EAGAIN (a reset cycle): the device
        // is shut down for system sleep and no retry succeeds before the PM core resumes it.
        Error::Suspended { .. } => Errno::ESHUTDOWN,
        Error::RegistryFull => Errno::ENOSPC,
        Error::UnknownClient => Errno::ENOENT,
        Error::EpochExhausted => Errno::EOVERFLOW,
        // NoOperationInFlight, AlreadyCannotPause, NotCannotPause and the other misuses.
        _ => Errno::EINVAL,
    }
}

impl From<Error> for LinuxError {
    fn from(e: Error) -> Self {
        LinuxError {
            errno: errno_of(e),
            cause: Some(e),
        }
    }
}
