//! Reset groups (DESIGN.md "Reset groups", issue 23) on Windows: the driver's own
//! declaration that devnodes it drives share one hardware reset (the functions of one
//! chip). Windows has no service that resets several devnodes while keeping their
//! stacks: `GUID_DEVICE_RESET_INTERFACE_STANDARD`'s function-level reset touches one
//! function only, and its platform-level reset reports every device on the reset line
//! missing and rebuilds their stacks (surprise removal, remove, `AddDevice`, start), so
//! clients get `Removed`, not `RESET_END`. The group's one reset is therefore the
//! driver's own chip reset, [`crate::Hal::reset`] of the carrier the core names (the
//! runtime's default `Os::group_reset`); see the README's "Reset groups".

use pnp_lifecycle::{DeviceId, GroupId};
use pnp_lifecycle_runtime::Kernel;

use crate::{Driver, NtStatus, WindowsVocabulary};

impl<K: Kernel, O: WindowsVocabulary<K>> Driver<K, O> {
    /// Declare that `device` shares its hardware reset with the other devnodes of
    /// `group` (after `AddDevice`): from then on a reset request, `reset_request` or
    /// catastrophic error on any of them runs one cycle for all, and the one
    /// [`crate::Hal::reset`] goes to the carrier.
    ///
    /// # Errors
    ///
    /// The core's refusal as an NTSTATUS (a member already, the group's cycle running,
    /// no such device or group).
    pub fn join_reset_group(&self, device: DeviceId, group: GroupId) -> Result<(), NtStatus> {
        self.runtime()
            .with(|owner, now| owner.join_reset_group(now, device, group))
            .map_err(Into::into)
    }

    /// `device` resets alone again.
    ///
    /// # Errors
    ///
    /// The core's refusal as an NTSTATUS (the group's cycle running).
    pub fn leave_reset_group(&self, device: DeviceId) -> Result<(), NtStatus> {
        self.runtime()
            .with(|owner, now| owner.leave_reset_group(now, device))
            .map_err(Into::into)
    }
}
