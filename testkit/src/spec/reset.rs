//! DESIGN "The reset cycle": requests coalesce, every voter answers (or leaves, or is
//! revoked) before the one hardware reset, every client told `RESET` hears how it ended.

use super::{Answer, Busy, Spec};
use pnp_lifecycle::{
    CannotResetReason, ClientHandle, CycleOutcome, DeviceId, Epoch, Error, Event, FailureCause,
    FatalAnswer, HardwareCommand, Output, PhaseKind, Reply, ResetAnswer, ResetResult, Tick,
};

impl Spec {
    /// Begin a device's own cycle: every live client is a voter and is told `RESET`.
    pub(super) fn start_member_cycle(&mut self, now: Tick, d: DeviceId) {
        let voters = self.live(d);
        let dev = self.dev_mut(d);
        dev.quiescing = true;
        dev.told_reset = voters.iter().copied().collect();
        dev.reset_needed = voters.is_empty();
        dev.answered.clear();
        dev.joined.clear();
        for s in voters {
            self.notify(now, d, s, Event::Reset);
        }
    }

    /// The cycle ended: every requester is answered by one output.
    pub(super) fn finished(&mut self, d: DeviceId, outcome: CycleOutcome) {
        self.out
            .push(Output::ResetCycleFinished { device: d, outcome });
    }

    /// Clients told `RESET` (and those that joined) that are owed the cycle's end.
    fn owed_end(&self, d: DeviceId) -> Vec<usize> {
        let dev = self.dev(d);
        self.live(d)
            .into_iter()
            .filter(|s| {
                dev.told_reset.contains(s) || dev.answered.contains(s) || dev.joined.contains(s)
            })
            .collect()
    }

    fn clear_cycle(&mut self, d: DeviceId) {
        let dev = self.dev_mut(d);
        dev.quiescing = false;
        dev.told_reset.clear();
        dev.answered.clear();
        dev.joined.clear();
        dev.reset_delivered.iter_mut().for_each(|t| *t = None);
        dev.drain_until = None;
    }

    /// End the cycle without a hardware reset: clients told `Recovered`.
    pub(super) fn end_without_reset(&mut self, now: Tick, d: DeviceId, outcome: CycleOutcome) {
        let epoch = self.dev(d).epoch;
        for s in self.owed_end(d) {
            self.notify(now, d, s, Event::Recovered { epoch });
        }
        self.clear_cycle(d);
        self.finished(d, outcome);
    }

    /// Once every voter answered: recovery, or the hardware reset once operations drained.
    pub(super) fn settle_cycle(&mut self, now: Tick, d: DeviceId) {
        if self.in_group_run(d) {
            self.settle_group(now, d);
            return;
        }
        let dev = self.dev(d);
        if !dev.quiescing || !dev.told_reset.is_empty() {
            return;
        }
        if !dev.reset_needed {
            let epoch = dev.epoch;
            self.end_without_reset(now, d, CycleOutcome::Recovered(epoch));
            return;
        }
        if !self.drained(now, d) {
            return;
        }
        let dev = self.dev_mut(d);
        dev.quiescing = false;
        dev.hardware_busy = Some(Busy::Reset);
        self.hardware(d, HardwareCommand::Reset);
    }

    pub(super) fn reset_request(&mut self, now: Tick, h: ClientHandle) -> Answer {
        self.callable(h)?;
        let d = h.device;
        if self.driver != pnp_lifecycle::DriverPhase::Loaded {
            return Err(Error::Unloading);
        }
        if self.dev(d).removal_owed {
            return Err(Error::RemoveInProgress);
        }
        Ok(Reply::Reset(self.request_cycle(now, d)))
    }

    fn request_cycle(&mut self, now: Tick, d: DeviceId) -> ResetAnswer {
        if let Some(answer) = self.reset_in_dx(d) {
            return answer;
        }
        let dev = self.dev(d);
        if dev.hardware_busy == Some(Busy::Reset) {
            self.dev_mut(d).follow_up = true;
            ResetAnswer::Scheduled
        } else if dev.quiescing {
            ResetAnswer::Joined
        } else {
            self.start_cycle(now, d);
            ResetAnswer::Started
        }
    }

    pub(super) fn fatal_error(&mut self, now: Tick, d: DeviceId) -> Answer {
        use PhaseKind as K;
        let phase = self.dev(d).phase();
        let answer = match phase {
            // A removal waits for the hardware reset under way: it absorbs the error.
            K::Executing if self.dev(d).removal_owed => FatalAnswer::FoldedIntoRemoval,
            // A power transition run for a pending query defers it as that query does.
            K::PoweringDown | K::PoweringUp if self.dev(d).query_pending.is_some() => {
                self.dev_mut(d).fatal_deferred = true;
                FatalAnswer::Deferred
            }
            K::Running | K::Quiescing | K::Executing | K::PoweringDown | K::PoweringUp => {
                FatalAnswer::Served(self.request_cycle(now, d))
            }
            K::StopPending | K::RemovePending | K::Stopping
                if !self.dev(d).started
                    || self.dev(d).failed.is_some()
                    || self.dev(d).dx.is_some() =>
            {
                FatalAnswer::HardwareNotLive(phase)
            }
            K::Starting | K::StopPending | K::RemovePending | K::Stopping => {
                self.dev_mut(d).fatal_deferred = true;
                FatalAnswer::Deferred
            }
            other => FatalAnswer::HardwareNotLive(other),
        };
        Ok(Reply::Fatal(answer))
    }

    /// A fatal error deferred by a query now cancelled: a cycle serves it.
    pub(super) fn serve_deferred_fatal(&mut self, now: Tick, d: DeviceId) {
        if self.dev(d).query_pending.is_some() {
            return; // still deferred by the query that remains
        }
        if self.dev(d).fatal_deferred && self.dev(d).phase() == PhaseKind::Running {
            self.dev_mut(d).fatal_deferred = false;
            self.start_cycle(now, d);
        } else if self.dev(d).fatal_deferred
            && matches!(
                self.dev(d).phase(),
                PhaseKind::LowPower | PhaseKind::PoweringDown | PhaseKind::PoweringUp
            )
        {
            // Back in Dx: served after the power-up like a reset request.
            self.dev_mut(d).fatal_deferred = false;
            self.reset_in_dx(d);
        }
    }

    pub(super) fn answer_reset(&mut self, now: Tick, h: ClientHandle, can_recover: bool) -> Answer {
        self.callable(h)?;
        let d = h.device;
        let slot = usize::from(h.slot);
        if !self.dev(d).told_reset.contains(&slot) {
            return Err(Error::NotVoting);
        }
        if self.dev(d).clients[slot].mailbox.holds_reset() {
            return Err(Error::ResetNotDelivered);
        }
        let dev = self.dev_mut(d);
        dev.told_reset.remove(&slot);
        dev.reset_delivered[slot] = None;
        dev.answered.insert(slot);
        if !can_recover {
            dev.reset_needed = true;
        }
        let _ = now;
        Ok(Reply::Accepted)
    }

    pub(super) fn reset_nack(&mut self, now: Tick, h: ClientHandle) -> Answer {
        self.callable(h)?;
        let d = h.device;
        let slot = usize::from(h.slot);
        if !self.dev(d).told_reset.contains(&slot) {
            return Err(Error::NotVoting);
        }
        if self.dev(d).clients[slot].mailbox.holds_reset() {
            return Err(Error::ResetNotDelivered);
        }
        let outcome = CycleOutcome::CannotReset {
            member: d,
            reason: CannotResetReason::ClientRefused(h),
        };
        if self.in_group_run(d) {
            self.end_group_without_reset(now, d, outcome);
        } else {
            self.end_without_reset(now, d, outcome);
        }
        Ok(Reply::Accepted)
    }

    pub(super) fn reset_done(&mut self, now: Tick, d: DeviceId, result: ResetResult) -> Answer {
        if self.dev(d).hardware_busy != Some(Busy::Reset) || self.carried_by_another(d) {
            return Err(Error::NoHardwareCommandInFlight);
        }
        // The carrier's answer ends every member's cycle, member by member (each then
        // begins the sleep that waited for the cycle). A device of the group not taking
        // part (its own reset in flight when it vanished) ends only its own.
        let group = if self.in_group_run(d) {
            self.take_group_run(d)
        } else {
            None
        };
        let grouped = group.is_some();
        let members = group.unwrap_or_else(|| vec![d]);
        let mut again = Vec::new();
        for m in members.iter().copied() {
            if self.dev(m).hardware_busy != Some(Busy::Reset) {
                continue;
            }
            if self.member_reset_done(now, m, result) {
                again.push(m); // its follow-up comes first: a sleep waits for it
            } else if grouped {
                self.settle_power(now, m);
            }
        }
        // Then the follow-ups (one group's cycle for all of them).
        for m in again {
            if !self.in_group_run(m) {
                self.start_cycle(now, m);
            }
        }
        // The other members' rules apply too (a removal that waited for the reset).
        for m in members.into_iter().filter(|&m| m != d) {
            self.settle(now, m);
        }
        Ok(Reply::Accepted)
    }

    /// One member's cycle ends with the hardware reset's result: whether a follow-up is
    /// owed.
    fn member_reset_done(&mut self, now: Tick, d: DeviceId, result: ResetResult) -> bool {
        self.dev_mut(d).hardware_busy = None;
        let dev = self.dev(d);
        if dev.vanished {
            // The cycle ended when the hardware vanished.
            return false;
        }
        if dev.removal_owed {
            // A removal waited for the hardware: it ends the cycle, clients are told
            // `Removed` instead of `RESET_END`.
            let follow_up = std::mem::take(&mut self.dev_mut(d).follow_up);
            let outcome = if result == ResetResult::Succeeded {
                self.dev_mut(d).epoch.0 += 1; // the hardware was reset: epochs only grow
                CycleOutcome::AbortedByRemove
            } else {
                // The hardware failed: removal releases it without touching registers.
                self.dev_mut(d).claim = super::Claim::Resources;
                CycleOutcome::HardwareFailed
            };
            self.clear_cycle(d);
            self.finished(d, outcome);
            if follow_up {
                self.finished(d, CycleOutcome::AbortedByRemove);
            }
            return false;
        }
        let owed = self.owed_end(d);
        let follow_up = std::mem::take(&mut self.dev_mut(d).follow_up);
        match result {
            ResetResult::Succeeded => {
                let epoch = Epoch(self.dev(d).epoch.0 + 1);
                self.dev_mut(d).epoch = epoch;
                for s in owed {
                    self.notify(now, d, s, Event::ResetEnd { epoch });
                }
                self.clear_cycle(d);
                self.finished(d, CycleOutcome::Completed(epoch));
                return follow_up;
            }
            ResetResult::Failed => {
                self.clear_cycle(d);
                self.fail(now, d, FailureCause::ResetFailed);
                self.finished(d, CycleOutcome::HardwareFailed);
                if follow_up {
                    self.finished(d, CycleOutcome::HardwareFailed);
                }
            }
        }
        false
    }
}
