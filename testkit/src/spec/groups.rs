//! DESIGN "Reset groups": devices that share one hardware reset run one cycle. A group's
//! cycle is a fact (`GroupRun`: the members taking part, the carrier once the reset is
//! commanded, the one deadline); each member keeps its own cycle facts (`told_reset`,
//! `answered`, `reset_needed`), and the group's rules read them all.

use super::{Answer, Busy, Due, Spec};
use pnp_lifecycle::{
    CannotResetReason, CycleOutcome, DeviceId, Error, GroupId, HardwareCommand, PhaseKind,
    PowerDownKind, Reply, Tick,
};
use std::collections::BTreeSet;

/// A reset group's cycle under way.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct GroupRun {
    /// The members taking part (a member removed or vanished leaves).
    members: BTreeSet<u8>,
    /// The member the hardware reset was commanded through, once it was.
    carrier: Option<u8>,
    /// The group's one deadline (before the hardware reset is commanded).
    deadline: Due,
}

impl GroupRun {
    /// The group's one deadline.
    pub(super) fn deadline(&self) -> Due {
        self.deadline
    }
}

impl Spec {
    /// The group of `d`, if it is in one.
    pub(super) fn group_of(&self, d: DeviceId) -> Option<GroupId> {
        self.dev(d).group
    }

    /// The cycle of `d`'s group, if one runs.
    fn run_of(&self, d: DeviceId) -> Option<&GroupRun> {
        let g = self.group_of(d)?;
        self.group_runs.get(usize::from(g.0))?.as_ref()
    }

    fn run_mut(&mut self, g: GroupId) -> Option<&mut GroupRun> {
        self.group_runs.get_mut(usize::from(g.0))?.as_mut()
    }

    /// Whether `d` takes part in its group's cycle.
    pub(super) fn in_group_run(&self, d: DeviceId) -> bool {
        self.run_of(d).is_some_and(|r| r.members.contains(&d.0))
    }

    /// Whether `d` takes part in its group's cycle with other members.
    pub(super) fn shares_group_run(&self, d: DeviceId) -> bool {
        self.run_of(d)
            .is_some_and(|r| r.members.contains(&d.0) && r.members.len() > 1)
    }

    pub(super) fn join_group(&mut self, d: DeviceId, group: GroupId) -> Answer {
        if let Some(g) = self.group_of(d) {
            return Err(Error::AlreadyInResetGroup { group: g });
        }
        if usize::from(group.0) >= self.devices.len() {
            return Err(Error::NoSuchGroup);
        }
        if self.group_runs[usize::from(group.0)].is_some() {
            return Err(Error::GroupCycleInProgress { group });
        }
        self.dev_mut(d).group = Some(group);
        Ok(Reply::Accepted)
    }

    pub(super) fn leave_group(&mut self, d: DeviceId) -> Answer {
        let Some(g) = self.group_of(d) else {
            return Ok(Reply::Accepted);
        };
        if self.group_runs[usize::from(g.0)].is_some() {
            return Err(Error::GroupCycleInProgress { group: g });
        }
        self.dev_mut(d).group = None;
        Ok(Reply::Accepted)
    }

    /// A device's slot became free: it leaves its group (and the group's cycle).
    pub(super) fn forget_member(&mut self, d: DeviceId) {
        if let Some(g) = self.group_of(d) {
            if let Some(run) = self.run_mut(g) {
                run.members.remove(&d.0);
                run.carrier = run.carrier.filter(|&c| c != d.0);
                if run.members.is_empty() {
                    self.group_runs[usize::from(g.0)] = None;
                }
            }
        }
        self.dev_mut(d).group = None;
    }

    /// `d` leaves its group's cycle (removed or vanished); the cycle goes on without it.
    /// Once the reset was commanded every member stays until the carrier answers.
    pub(super) fn leave_group_run(&mut self, d: DeviceId) {
        let Some(g) = self.group_of(d) else { return };
        let Some(run) = self.run_mut(g) else { return };
        if run.carrier.is_some() {
            return; // the reset was commanded: the carrier's answer ends every member
        }
        run.members.remove(&d.0);
        if run.members.is_empty() {
            self.group_runs[usize::from(g.0)] = None;
        }
    }

    /// Why `m` cannot take part in its group's cycle, if it cannot.
    fn cannot_take_part(&self, m: DeviceId) -> Option<CannotResetReason> {
        let dev = self.dev(m);
        // A power transition run for a pending query stands as that query.
        let phase = match (dev.phase(), dev.query_pending) {
            (PhaseKind::PoweringDown | PhaseKind::PoweringUp, Some(super::Query::Stop)) => {
                PhaseKind::StopPending
            }
            (PhaseKind::PoweringDown | PhaseKind::PoweringUp, Some(super::Query::Remove)) => {
                PhaseKind::RemovePending
            }
            (phase, _) => phase,
        };
        match phase {
            PhaseKind::Running
            | PhaseKind::LowPower
            | PhaseKind::PoweringDown
            | PhaseKind::PoweringUp
            | PhaseKind::Removing
            | PhaseKind::SurpriseRemoved
            | PhaseKind::Absent => {}
            other => return Some(CannotResetReason::MemberState(other)),
        }
        let waking = dev.hardware_busy == Some(Busy::PowerUp);
        let sleeping = dev.powering_down == Some(PowerDownKind::SystemSleep)
            || (dev.dx == Some(PowerDownKind::SystemSleep) && !waking);
        sleeping.then_some(CannotResetReason::SystemSleep)
    }

    /// Begin a cycle on `d`: for a member of a group, the group's cycle (or, if a member
    /// cannot take part, its end at once with no client told `RESET`).
    pub(super) fn start_cycle(&mut self, now: Tick, d: DeviceId) {
        if self.group_of(d).is_none() || self.in_group_run(d) {
            self.start_member_cycle(now, d);
            return;
        }
        self.begin_group_cycle(now, d, true);
    }

    /// A reset owed to `d` waits for its power-up: its group's cycle begins all the same
    /// (its deadline runs), `d` joining it once back; from system sleep, once it wakes.
    pub(super) fn begin_group_cycle_after_power_up(&mut self, now: Tick, d: DeviceId) {
        let dev = self.dev(d);
        if !dev.reset_after_up || !dev.present || dev.vanished || dev.removal_begun {
            return;
        }
        let sleeping = self.cannot_take_part(d) == Some(CannotResetReason::SystemSleep);
        if self.group_of(d).is_some() && self.run_of(d).is_none() && !sleeping {
            self.begin_group_cycle(now, d, false);
        }
    }

    fn begin_group_cycle(&mut self, now: Tick, d: DeviceId, ready: bool) {
        let Some(g) = self.group_of(d) else { return };
        let members: Vec<DeviceId> = (0..self.devices.len())
            .map(|i| DeviceId(i as u8))
            .filter(|&m| self.dev(m).present && self.dev(m).group == Some(g))
            .filter(|&m| {
                let dev = self.dev(m);
                !dev.vanished && !dev.removal_begun && !dev.removal_owed
            })
            .collect();
        for &m in &members {
            if m == d {
                continue;
            }
            if let Some(reason) = self.cannot_take_part(m) {
                self.dev_mut(d).reset_after_up = false;
                self.finished(d, CycleOutcome::CannotReset { member: m, reason });
                return;
            }
        }
        self.group_runs[usize::from(g.0)] = Some(GroupRun {
            members: members.iter().map(|m| m.0).collect(),
            carrier: None,
            deadline: Due::after(now, self.config.group_cycle_timeout()),
        });
        for m in members {
            if m == d {
                if ready {
                    self.start_member_cycle(now, m);
                }
            } else if self.reset_in_dx(m).is_none() {
                self.start_member_cycle(now, m);
            }
        }
    }

    /// Every group's cycle settles (a member that left may have been the last waited for).
    pub(super) fn settle_groups(&mut self, now: Tick) {
        for g in 0..self.group_runs.len() {
            let first = self.group_runs[g]
                .as_ref()
                .and_then(|r| r.members.first().copied());
            if let Some(m) = first {
                self.settle_group(now, DeviceId(m));
            }
        }
    }

    /// The group's cycle, once every member's voters answered: recovery, or the one
    /// hardware reset through the carrier once every member drained.
    pub(super) fn settle_group(&mut self, now: Tick, d: DeviceId) {
        let Some(g) = self.group_of(d) else { return };
        let Some(run) = self.run_of(d).cloned() else {
            return;
        };
        if run.carrier.is_some() {
            return;
        }
        // A member that failed meanwhile and then met a state no member could take part in
        // (remove pending) ends the group's cycle without the reset, as it would have kept
        // the cycle from beginning (DESIGN: a member with remove pending cannot take part).
        let blocked = run.members.iter().map(|&m| DeviceId(m)).find_map(|m| {
            let reason = self.cannot_take_part(m)?;
            let still_failed = reason == CannotResetReason::MemberState(PhaseKind::Failed);
            (self.dev(m).failed.is_some() && !still_failed).then_some((m, reason))
        });
        if let Some((member, reason)) = blocked {
            let outcome = CycleOutcome::CannotReset { member, reason };
            self.end_group_without_reset(now, d, outcome);
            return;
        }
        // A member that failed meanwhile (a trusted client's missed deadline) no longer
        // votes.
        let (members, failed): (Vec<DeviceId>, Vec<DeviceId>) = run
            .members
            .iter()
            .map(|&m| DeviceId(m))
            .partition(|&m| self.dev(m).failed.is_none());
        if members.is_empty() {
            self.group_runs[usize::from(g.0)] = None;
            return;
        }
        // Each member drains once its own voters answered.
        let mut ready = true;
        for &m in &members {
            let dev = self.dev(m);
            if dev.quiescing && dev.told_reset.is_empty() {
                ready &= self.drained(now, m);
            } else {
                ready = false;
            }
        }
        if !ready {
            return;
        }
        if !members.iter().any(|&m| self.dev(m).reset_needed) {
            self.group_runs[usize::from(g.0)] = None;
            for &m in &members {
                let epoch = self.dev(m).epoch;
                self.end_without_reset(now, m, CycleOutcome::Recovered(epoch));
            }
            // Then what waited for the cycle (a system sleep) on every member.
            for m in members {
                self.settle_power(now, m);
            }
            return;
        }
        // The one hardware reset resets a failed member's function too: it waits for that
        // member's operations (fenced or not) to end (I12). A recovery touches no hardware.
        if failed
            .iter()
            .any(|&m| self.dev(m).clients.iter().any(|c| c.ops > 0))
        {
            return;
        }
        let Some(&carrier) = members.first() else {
            return;
        };
        for &m in &members {
            let dev = self.dev_mut(m);
            dev.quiescing = false;
            dev.hardware_busy = Some(Busy::Reset);
        }
        if let Some(run) = self.run_mut(g) {
            run.carrier = Some(carrier.0);
        }
        self.hardware(carrier, HardwareCommand::Reset);
    }

    /// A nack ends the whole group's cycle with no reset.
    pub(super) fn end_group_without_reset(
        &mut self,
        now: Tick,
        d: DeviceId,
        outcome: CycleOutcome,
    ) {
        let Some(g) = self.group_of(d) else { return };
        let Some(run) = self.group_runs[usize::from(g.0)].take() else {
            return;
        };
        for &m in &run.members {
            if self.dev(DeviceId(m)).failed.is_some() {
                continue; // its cycle ended when it failed
            }
            // A member waiting for its power-up no longer owes the cycle.
            self.dev_mut(DeviceId(m)).reset_after_up = false;
            self.end_without_reset(now, DeviceId(m), outcome);
        }
        // Then what waited for the cycle (a system sleep) on every member.
        for &m in &run.members {
            self.settle_power(now, DeviceId(m));
        }
    }

    /// The members (other than the carrier) whose cycle the carrier's `ResetDone` ends.
    pub(super) fn take_group_run(&mut self, d: DeviceId) -> Option<Vec<DeviceId>> {
        let g = self.group_of(d)?;
        let run = self.group_runs[usize::from(g.0)].take()?;
        Some(run.members.iter().map(|&m| DeviceId(m)).collect())
    }

    /// Whether `d` is a member executing its group's reset through another carrier (a
    /// device of the group not taking part, e.g. vanished before the cycle began with a
    /// reset of its own in flight, is not).
    pub(super) fn carried_by_another(&self, d: DeviceId) -> bool {
        self.run_of(d)
            .filter(|r| r.members.contains(&d.0))
            .and_then(|r| r.carrier)
            .is_some_and(|c| c != d.0)
    }

    /// The group's deadline of `d`, if its group's cycle waits before the reset.
    pub(super) fn group_deadline(&self, d: DeviceId) -> Option<Due> {
        let run = self.run_of(d)?;
        (run.carrier.is_none() && run.members.contains(&d.0)).then_some(run.deadline)
    }

    /// The group's deadline passed before the reset: every member ends without it, naming
    /// the lowest member that was not ready (`failed_now`: members this `Timeout` failed).
    pub(super) fn expire_group(&mut self, now: Tick, d: DeviceId, failed_now: &[bool]) {
        if self.group_deadline(d).is_none_or(|t| !t.reached(now)) {
            return;
        }
        let Some(run) = self.run_of(d).cloned() else {
            return;
        };
        let late = run
            .members
            .iter()
            .map(|&m| DeviceId(m))
            .find(|&m| {
                // Not ready: waiting for its power-up, a voter or an operation; failed by
                // this very deadline (its voter overran); or failed earlier and holding the
                // reset back by its operations (I12).
                let dev = self.dev(m);
                let busy = dev.clients.iter().any(|c| c.ops > 0);
                if dev.failed.is_some() {
                    return busy || failed_now.get(usize::from(m.0)) == Some(&true);
                }
                !dev.quiescing || !dev.told_reset.is_empty() || busy
            })
            // Else the member the reset would have gone through (the lowest not failed).
            .or_else(|| {
                let mut members = run.members.iter().map(|&m| DeviceId(m));
                members.find(|&m| self.dev(m).failed.is_none())
            })
            .unwrap_or(d);
        let outcome = CycleOutcome::CannotReset {
            member: late,
            reason: CannotResetReason::DeadlinePassed,
        };
        self.end_group_without_reset(now, d, outcome);
    }
}
