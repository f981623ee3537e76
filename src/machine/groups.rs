//! Reset groups (DESIGN.md "Reset groups"): the owner's declaration of which devices share
//! one hardware reset, and the group's cycle over its members.

use super::Lifecycle;
use crate::device::group::{Member, Part, Say, Stage};
use crate::device::{Ctx, Device};
use crate::queue::OutputQueue;
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

/// The driver's view of one group for the length of one input: the devices, the queue and
/// the clock, split from the machine so each member gets its own context.
pub(super) struct GroupStep<'a, const C: usize, const P: usize, const Q: usize> {
    pub(super) devices: &'a mut [Device<C, P>],
    pub(super) cycle: &'a mut Option<GroupCycle>,
    pub(super) out: &'a mut OutputQueue<Q>,
    pub(super) config: &'a Config,
    pub(super) now: Tick,
    pub(super) unloading: bool,
    pub(super) group: GroupId,
}

impl<const C: usize, const P: usize, const Q: usize> GroupStep<'_, C, P, Q> {
    /// Run `f` on every member, in device order, with its own context.
    fn each(&mut self, mut f: impl FnMut(&mut Device<C, P>, &mut Ctx<'_, Q>)) {
        for (index, device) in self.devices.iter_mut().enumerate() {
            if device.group.group != Some(self.group) {
                continue;
            }
            let mut cx = Ctx {
                device: DeviceId(u8::try_from(index).unwrap_or(u8::MAX)),
                now: self.now,
                config: self.config,
                unloading: self.unloading,
                out: &mut *self.out,
                // The group's cycle is under way or being begun: nothing blocks it here.
                group_blocker: None,
            };
            f(device, &mut cx);
        }
    }

    /// The first member (in device order) for which `f` gives a value.
    fn find<T>(&self, f: impl Fn(&Device<C, P>) -> Option<T>) -> Option<(DeviceId, T)> {
        self.devices
            .iter()
            .enumerate()
            .filter(|(_, d)| d.group.group == Some(self.group))
            .find_map(|(i, d)| f(d).map(|t| (DeviceId(u8::try_from(i).unwrap_or(u8::MAX)), t)))
    }

    /// End the group's cycle without a reset: every member taking part (or wanting a
    /// cycle) answers its requesters `CannotReset` naming `member` and `reason`, and tells
    /// its clients told `RESET` that the cycle ended (I4, I8).
    fn end_without_reset(&mut self, member: DeviceId, reason: CannotResetReason) {
        let outcome = CycleOutcome::CannotReset { member, reason };
        debug!(
            "reset group {} ends without a reset: {}",
            self.group.0, outcome
        );
        self.each(|d, cx| {
            if d.group.taking_part() || d.wants_group_cycle() {
                d.end_group_cycle(cx, outcome);
            }
        });
        self.close();
    }

    /// The group's cycle is over: no member is left in it (nor has left it: see
    /// [`Stage::Left`]).
    fn close(&mut self) {
        *self.cycle = None;
        self.each(|d, _| d.group.leave_cycle());
    }

    /// What the members say, read in device order (see [`Say`]).
    fn survey(&self) -> Survey {
        let mut survey = Survey::default();
        for (index, device) in self.devices.iter().enumerate() {
            if device.group.group != Some(self.group) {
                continue;
            }
            let member = DeviceId(u8::try_from(index).unwrap_or(u8::MAX));
            match device.group_say() {
                Say::Nothing => {}
                Say::EndsCycle(reason) => {
                    survey.ends.get_or_insert((member, reason));
                }
                Say::Quiescing => {
                    survey.quiescing = true;
                    survey.holding.get_or_insert(member);
                }
                Say::HoldsReset => {
                    survey.left_with_operations = true;
                    survey.holding.get_or_insert(member);
                }
                Say::Ready { reset_needed } => {
                    survey.carrier.get_or_insert(member);
                    survey.reset_needed |= reset_needed;
                }
            }
        }
        survey
    }

    /// After an input that concerned a member (or the time): move the group's cycle on.
    /// `carrier_done`: the carrier's hardware reset reported with this result.
    pub(super) fn settle(&mut self, carrier_done: Option<ResetResult>) {
        if let Some(result) = carrier_done {
            if self.cycle.is_some_and(|c| c.commanded) {
                self.each(|d, cx| d.group_reset_done(cx, result));
                *self.cycle = None;
            }
        }
        self.progress();
        if self.cycle.is_none() && self.find(|d| d.wants_group_cycle().then_some(())).is_some() {
            self.begin();
            self.progress();
        }
        // Members back to running open their fast-path gates (as at any input's end).
        self.each(|d, cx| d.open_gates_when_settled(cx));
    }

    /// A member wants a cycle: begin the group's, unless a member cannot take part.
    fn begin(&mut self) {
        let blocker = self.find(|d| match d.group_part() {
            Part::Blocks(reason) => Some(reason),
            Part::Vanished | Part::Joins => None,
        });
        if let Some((member, reason)) = blocker {
            self.end_without_reset(member, reason);
            return;
        }
        debug!("reset group {} begins a cycle", self.group.0);
        *self.cycle = Some(GroupCycle {
            deadline: self
                .now
                .0
                .checked_add(self.config.group_cycle_timeout())
                .map(Tick),
            commanded: false,
        });
        self.each(|d, cx| d.join_group_cycle(cx));
    }

    /// The cycle under way, before its reset: members that left, then the group's
    /// decision on what every member says.
    fn progress(&mut self) {
        let Some(cycle) = *self.cycle else { return };
        if cycle.commanded {
            return; // the carrier's ResetDone ends it
        }
        // Members no longer quiescing leave the cycle (planted: one removed or
        // surprise-removed ends it).
        let mut vanished = None;
        self.each(|d, cx| {
            if d.group.taking_part() && !d.still_in_group_cycle() {
                if planted!(GroupRemovedMemberBlocks)
                    && matches!(d.group_part(), Part::Blocks(_))
                    && vanished.is_none()
                {
                    vanished = Some((cx.device, d.phase.kind()));
                }
                d.leave_group_cycle(cx);
            }
        });
        if let Some((member, phase)) = vanished {
            self.end_without_reset(member, CannotResetReason::MemberState(phase));
            return;
        }
        let survey = self.survey();
        // I8: a refusal, or a member that left and can no longer take part: every
        // requester is answered why, and no reset.
        if let Some((member, reason)) = survey.ends {
            self.end_without_reset(member, reason);
            return;
        }
        let Some(carrier) = survey.carrier else {
            if !survey.quiescing {
                self.close(); // every member left
            }
            return;
        };
        // I3 per group: every member's voters answered, left or were revoked.
        if survey.quiescing && !planted!(GroupResetBeforeAllAnswered) {
            return;
        }
        if !survey.reset_needed {
            // I4: every voter of every member can recover: no reset, same epochs.
            self.each(|d, cx| {
                if d.group_ready().is_some() {
                    let outcome = CycleOutcome::Recovered(d.epoch);
                    d.end_cycle_without_reset(cx, outcome);
                }
            });
            self.close();
            return;
        }
        // I12 per group: a member that left the cycle but shares the hardware ends its
        // operations, fenced or not, before the reset.
        if survey.left_with_operations {
            return;
        }
        // The one reset goes through the first member ready (none vanished: I3).
        debug!(
            "reset group {} resets through device {}",
            self.group.0, carrier.0
        );
        *self.cycle = Some(GroupCycle {
            commanded: true,
            ..cycle
        });
        self.each(|d, cx| {
            if d.group_ready().is_some() {
                d.execute_group_reset(cx, cx.device == carrier);
            }
        });
    }

    /// I9: the group's one deadline passed before its reset was commanded: the cycle ends
    /// without one, naming the first member that held it back (quiescing, or left with
    /// operations in flight).
    pub(super) fn deadline_passed(&mut self) {
        let Some(cycle) = *self.cycle else { return };
        if cycle.commanded || cycle.deadline.is_none_or(|at| self.now < at) {
            return;
        }
        let survey = self.survey();
        match survey.holding.or(survey.carrier) {
            Some(member) => self.end_without_reset(member, CannotResetReason::DeadlinePassed),
            None => self.close(),
        }
    }
}

/// What a group's members say to its cycle (see [`Say`]), for its decision.
#[derive(Default)]
struct Survey {
    /// The first member ending the cycle without a reset, and why.
    ends: Option<(DeviceId, CannotResetReason)>,
    /// Some member still quiesces.
    quiescing: bool,
    /// Some member that left the cycle still has hardware operations in flight.
    left_with_operations: bool,
    /// The first member holding the reset back (quiescing, or left with operations).
    holding: Option<DeviceId>,
    /// The first member ready: the reset goes through it.
    carrier: Option<DeviceId>,
    /// Some ready member's voter did not say it can recover.
    reset_needed: bool,
}

impl<const D: usize, const C: usize, const P: usize, const Q: usize> Lifecycle<D, C, P, Q> {
    /// An input on a member of a reset group, or a membership change: the same checks and
    /// handler as any device input (the table admitted it already), with the group's
    /// room, the carrier's report, a cycle that cannot run stopped before it begins, and
    /// the group's cycle moved on at the end. Kept off the path of devices in no group.
    #[cold]
    #[inline(never)]
    pub(super) fn handle_member(
        &mut self,
        now: Tick,
        input: Input,
        device_id: DeviceId,
    ) -> Result<Reply, Error> {
        let unloading = self.driver == super::DriverPhase::Unloading;
        // A member that cannot take part stops a cycle before it begins.
        let blocked = self.group_blocker(device_id);
        let device = self
            .devices
            .get_mut(usize::from(device_id.0))
            .ok_or(Error::NoSuchDevice)?;
        let group = device.group.group;
        let carrier_done = match input {
            // The group's reset went through its carrier: only the carrier reports it.
            Input::ResetDone { result, .. } => match device.group.stage {
                Stage::AwaitingReset { carrier: false } => {
                    return Err(Error::NoHardwareCommandInFlight)
                }
                Stage::AwaitingReset { carrier: true } => Some(result),
                _ => None,
            },
            _ => None,
        };
        // An input on a member may move every member.
        let mut cx = Ctx::for_input(
            &mut self.outputs,
            Self::DRIVER_INPUT_OUTPUTS,
            &self.config,
            device_id,
            now,
            unloading,
            blocked,
        )?;
        let result = match input {
            Input::JoinResetGroup { group, .. } => {
                join(device, &self.group_cycles, group).map(|()| Reply::Accepted)
            }
            Input::LeaveResetGroup { .. } => {
                leave(device, &self.group_cycles).map(|()| Reply::Accepted)
            }
            _ => super::dispatch(device, &mut cx, input),
        };
        if super::end_input(result.is_ok(), device, &mut cx, &mut self.now, now) {
            // A device that just joined settles its new group: a member already waiting
            // for a cycle (its reset wanted in a power transition) begins it now.
            let group = group.or(device.group.group);
            if let Some(group) = group {
                self.settle_group(group, carrier_done);
            }
            self.finish_unload_if_done();
        }
        result
    }

    /// Move group `group`'s cycle on after an input (see [`GroupStep::settle`]).
    pub(super) fn settle_group(&mut self, group: GroupId, carrier_done: Option<ResetResult>) {
        let Some(cycle) = self.group_cycles.get_mut(usize::from(group.0)) else {
            return;
        };
        GroupStep {
            devices: &mut self.devices,
            cycle,
            out: &mut self.outputs,
            config: &self.config,
            now: self.now,
            unloading: self.driver == super::DriverPhase::Unloading,
            group,
        }
        .settle(carrier_done);
        self.group_deadline = self.next_group_deadline();
    }

    /// A timeout or unload: every group with a cycle under way checks its deadline and
    /// moves on (members may have left, answered or been revoked).
    pub(super) fn settle_group_cycles(&mut self) {
        for index in 0..D {
            let Some(Some(_)) = self.group_cycles.get(index) else {
                continue;
            };
            let group = GroupId(u8::try_from(index).unwrap_or(u8::MAX));
            if let Some(cycle) = self.group_cycles.get_mut(index) {
                GroupStep {
                    devices: &mut self.devices,
                    cycle,
                    out: &mut self.outputs,
                    config: &self.config,
                    now: self.now,
                    unloading: self.driver == super::DriverPhase::Unloading,
                    group,
                }
                .deadline_passed();
            }
            self.settle_group(group, None);
        }
        self.group_deadline = self.next_group_deadline();
    }

    /// For an input on `device`, a member of a group with no cycle under way: the first
    /// other member that cannot take part in one, and why (`None` for a device in no
    /// group). A cycle the input would begin ends at once with that reason.
    pub(super) fn group_blocker(&self, device: DeviceId) -> Option<(DeviceId, CannotResetReason)> {
        let group = self.devices.get(usize::from(device.0))?.group.group?;
        if self.group_cycle(group).is_some() {
            return None;
        }
        self.devices
            .iter()
            .enumerate()
            .filter(|(i, d)| d.group.group == Some(group) && *i != usize::from(device.0))
            .find_map(|(i, d)| match d.group_part() {
                Part::Blocks(reason) => {
                    Some((DeviceId(u8::try_from(i).unwrap_or(u8::MAX)), reason))
                }
                Part::Vanished | Part::Joins => None,
            })
    }

    /// The earliest deadline of a group's cycle waiting for its members.
    fn next_group_deadline(&self) -> Option<Tick> {
        self.group_cycles
            .iter()
            .flatten()
            .filter(|c| !c.commanded)
            .filter_map(|c| c.deadline)
            .min()
    }
}
