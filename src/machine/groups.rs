//! Reset groups (DESIGN.md "Reset groups"): the owner's declaration of which devices share
//! one hardware reset, and the group's cycle over its members.

use super::Lifecycle;
use crate::device::group::Member;
use crate::device::Device;
use crate::types::*;

/// A reset group's cycle under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct GroupCycle {
    /// The group's one deadline (`None`: beyond the clock's range).
    pub(crate) deadline: Option<Tick>,
    /// The hardware reset was commanded through the carrier.
    pub(crate) commanded: bool,
}

/// [`Input::JoinResetGroup`] for `device` (the table admitted it in the device's state).
pub(super) fn join<const C: usize, const P: usize>(
    device: &mut Device<C, P>,
    cycles: &[Option<GroupCycle>],
    group: GroupId,
) -> Result<(), Error> {
    if let Some(current) = device.group.group {
        return Err(Error::AlreadyInResetGroup { group: current });
    }
    match cycles.get(usize::from(group.0)) {
        None => Err(Error::NoSuchGroup),
        Some(Some(_)) => Err(Error::GroupCycleInProgress { group }),
        Some(None) => {
            device.group = Member {
                group: Some(group),
                ..Member::NONE
            };
            Ok(())
        }
    }
}

/// [`Input::LeaveResetGroup`] for `device`: nothing to do in no group.
pub(super) fn leave<const C: usize, const P: usize>(
    device: &mut Device<C, P>,
    cycles: &[Option<GroupCycle>],
) -> Result<(), Error> {
    let Some(group) = device.group.group else {
        return Ok(());
    };
    if cycles
        .get(usize::from(group.0))
        .is_some_and(Option::is_some)
    {
        return Err(Error::GroupCycleInProgress { group });
    }
    device.group = Member::NONE;
    Ok(())
}

impl<const D: usize, const C: usize, const P: usize, const Q: usize> Lifecycle<D, C, P, Q> {
    /// The reset group a device belongs to, if any ([`Input::JoinResetGroup`]).
    #[must_use]
    pub fn reset_group(&self, device: DeviceId) -> Option<GroupId> {
        self.devices
            .get(usize::from(device.0))
            .and_then(|d| d.group.group)
    }

    /// Whether a reset group runs a cycle, and if so its one deadline (`Some(None)`: the
    /// deadline is beyond the clock's range).
    #[must_use]
    pub fn group_cycle(&self, group: GroupId) -> Option<Option<Tick>> {
        self.group_cycles
            .get(usize::from(group.0))
            .copied()
            .flatten()
            .map(|c| c.deadline)
    }
}
