//! Reset groups (DESIGN.md "Reset groups", issue 23) on the runtime: the owner's
//! declaration of a group and a voter's refusal fed under the lock like any input, and
//! the group's one hardware reset handed to the port as one work item that names every
//! member it covers. Every rule is the machine's: which members take part, which one
//! carries the reset, when it is commanded and how the cycle ends.

use alloc::vec::Vec;

use pnp_lifecycle::{ClientHandle, DeviceId, Error, GroupId, Input, Lifecycle, PhaseKind, Tick};

use crate::owner::{Os, Owner};

/// The group's one hardware reset, commanded through `carrier` (the machine's
/// `HardwareCommand::Reset` to a member of a reset group): reset every function in
/// `members` once, and answer `Input::ResetDone` for `carrier` only ([`Os::group_reset`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupReset {
    /// The group.
    pub group: GroupId,
    /// The member the machine commanded the reset through (never one that vanished).
    pub carrier: DeviceId,
    /// The members whose cycle waits for this reset, in id order, the carrier among them:
    /// a member that vanished, was removed or left the cycle is not.
    pub members: Vec<DeviceId>,
}

impl GroupReset {
    /// What the machine's reset command to `carrier` covers, read under the lock when
    /// the command is taken off the machine; `None` for a device in no group.
    pub(crate) fn of<const D: usize, const C: usize, const P: usize, const Q: usize>(
        machine: &Lifecycle<D, C, P, Q>,
        carrier: DeviceId,
    ) -> Option<Self> {
        let group = machine.reset_group(carrier)?;
        let members = members_of(machine, group)
            .filter(|d| machine.phase(*d) == Some(PhaseKind::Executing))
            .collect();
        Some(GroupReset {
            group,
            carrier,
            members,
        })
    }
}

/// The devices declared members of `group`, in id order.
fn members_of<const D: usize, const C: usize, const P: usize, const Q: usize>(
    machine: &Lifecycle<D, C, P, Q>,
    group: GroupId,
) -> impl Iterator<Item = DeviceId> + '_ {
    (0..D)
        .filter_map(|d| u8::try_from(d).ok().map(DeviceId))
        .filter(move |d| machine.reset_group(*d) == Some(group))
}

impl<O: Os, const D: usize, const C: usize, const P: usize, const Q: usize> Owner<O, D, C, P, Q> {
    /// Declare that `device` shares its hardware reset with the other members of `group`
    /// (`Input::JoinResetGroup`).
    ///
    /// # Errors
    ///
    /// The machine's refusal (a member of a group already, no such group, the group's
    /// cycle under way...); nothing changed.
    pub fn join_reset_group(
        &mut self,
        now: Tick,
        device: DeviceId,
        group: GroupId,
    ) -> Result<(), Error> {
        self.feed(now, Input::JoinResetGroup { device, group })
            .map(drop)
    }

    /// `device` resets alone again (`Input::LeaveResetGroup`).
    ///
    /// # Errors
    ///
    /// The machine's refusal (its group's cycle under way...); nothing changed.
    pub fn leave_reset_group(&mut self, now: Tick, device: DeviceId) -> Result<(), Error> {
        self.feed(now, Input::LeaveResetGroup { device }).map(drop)
    }

    /// A voter refuses the reset (`Input::ResetNack`): the cycle, its group's for a
    /// member, ends without a hardware reset.
    ///
    /// # Errors
    ///
    /// The machine's refusal (not voting, its `RESET` not delivered...); nothing changed.
    pub fn reset_nack(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.feed(now, Input::ResetNack { client }).map(drop)
    }

    /// The devices the owner declared members of `group`, in id order.
    pub fn reset_group_members(&self, group: GroupId) -> Vec<DeviceId> {
        members_of(self.machine(), group).collect()
    }
}
