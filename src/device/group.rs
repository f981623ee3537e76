//! A device's part in its reset group's cycle (DESIGN.md "Reset groups"): the group itself,
//! its members and its one hardware reset are the driver's (`machine/groups.rs`); here a
//! member holds its quiesced cycle for the group's decision, ends it as the group says,
//! and takes a voter's refusal (`ResetNack`).

use super::*;

/// A member's stage in its group's cycle: one progression, so no two stages hold at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Stage {
    /// Not in a group's cycle.
    Out,
    /// Taking part, not yet quiesced (or waiting for the power-up that begins its
    /// cycle): its own cycle neither commands the hardware reset nor ends by itself once
    /// quiesced; it waits for the group's decision.
    Quiescing,
    /// Quiesced (every voter answered, left or was revoked; no hardware operation in
    /// flight): ready for the group's reset, which its own cycle needs or not.
    Ready {
        /// Some voter did not say it can recover.
        reset_needed: bool,
    },
    /// The group's hardware reset was commanded; the carrier's [`Input::ResetDone`] ends
    /// this member's cycle.
    AwaitingReset {
        /// The reset was commanded through this device.
        carrier: bool,
    },
    /// Left this cycle before its reset (it failed, vanished, or its epoch could not move
    /// on): it no longer votes. Until it vanishes it shares the hardware the group's one
    /// reset resets, so its operations hold that reset back (I12), and a state no cycle
    /// could begin with ends the cycle (I8); see `group_say`.
    Left,
}

/// A device's membership and its part in the group's cycle under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Member {
    /// The group the owner declared, if any.
    pub(crate) group: Option<GroupId>,
    /// Its stage in the group's cycle.
    pub(crate) stage: Stage,
    /// A voter refused the group's reset ([`Input::ResetNack`]): the group ends its cycle.
    pub(crate) refused_by: Option<ClientHandle>,
}

impl Member {
    /// In no group.
    pub(crate) const NONE: Member = Member {
        group: None,
        stage: Stage::Out,
        refused_by: None,
    };

    /// Out of the group's cycle (the membership stays).
    pub(crate) fn leave_cycle(&mut self) {
        *self = Member {
            group: self.group,
            ..Member::NONE
        };
    }

    /// Takes part in its group's cycle: quiescing, ready, or awaiting the reset (a member
    /// that left the cycle but shares its hardware does not).
    pub(crate) fn taking_part(&self) -> bool {
        matches!(
            self.stage,
            Stage::Quiescing | Stage::Ready { .. } | Stage::AwaitingReset { .. }
        )
    }

    /// The device's cycle quiesced: ready for the group's reset if it takes part. A device
    /// not yet in the group's cycle is found ready when it joins (`join_group_cycle`).
    pub(crate) fn quiesced(&mut self, reset_needed: bool) {
        if matches!(self.stage, Stage::Quiescing | Stage::Ready { .. }) {
            self.stage = Stage::Ready { reset_needed };
        }
    }
}

impl<const C: usize, const P: usize> Device<C, P> {
    /// Reset groups ([`Input::JoinResetGroup`]): a device leaves its group when it is
    /// removed (its slot becomes free); re-added, it joins anew. Called from the one place
    /// a device becomes absent (`try_finish_removal`), whatever led there: remove,
    /// surprise removal then remove, unload, a detach deadline, the group's decision.
    #[inline]
    pub(crate) fn leave_group_on_removal(&mut self) {
        self.group = Member::NONE;
    }

    /// [`Input::ResetNack`]: a voter refuses the reset. Alone, the device's cycle ends
    /// without one; in a group's cycle the group ends it (for every member).
    pub(super) fn reset_nack<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
    ) -> Result<(), Error> {
        if planted!(GroupNackLost) {
            // Planted: the refusal is taken for an ack.
            return self.answer_reset(cx, client, true);
        }
        let index = self.registry.active(client)?;
        let slot = self.registry.slot(index).ok_or(Error::UnknownClient)?;
        if !slot.is_voting() {
            return Err(Error::NotVoting);
        }
        if slot.mailbox().holds_reset() {
            return Err(Error::ResetNotDelivered);
        }
        if self.group.taking_part() {
            // The group ends its cycle at the end of this input (every member at once).
            if self.group.refused_by.is_none() {
                self.group.refused_by = Some(client);
            }
            return Ok(());
        }
        self.end_cycle_without_reset(
            cx,
            CycleOutcome::CannotReset {
                member: cx.device,
                reason: CannotResetReason::ClientRefused(client),
            },
        );
        Ok(())
    }

    /// End the quiescing cycle with no hardware reset: same epoch, clients told
    /// [`Event::Recovered`] (I4), requesters answered `outcome` (I8).
    pub(crate) fn end_cycle_without_reset<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        outcome: CycleOutcome,
    ) {
        if !matches!(self.phase, Phase::Quiescing { .. }) {
            return;
        }
        self.group.leave_cycle();
        self.set_roles(Role::Idle, false);
        let epoch = self.epoch;
        self.set_phase(cx, Phase::Running);
        self.notify_active(cx, Event::Recovered { epoch });
        cx.cycle_finished(outcome);
        self.sleep_if_deferred(cx);
        self.refresh_deadline(cx.config);
    }
}

/// What a member says to its group's cycle under way, before the reset is commanded: the
/// one thing the group's decision (`machine/groups.rs`) reads of each member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Say {
    /// Nothing: out of the cycle, or vanished (it leaves without blocking, I3).
    Nothing,
    /// The cycle ends without a reset, answered to every requester (I8): a voter refused,
    /// or a member that left is now in a state no cycle could begin with.
    EndsCycle(CannotResetReason),
    /// Still quiescing: voters to answer, operations to drain or a power-up to wait for
    /// (I3 per group: no decision yet).
    Quiescing,
    /// Left the cycle, yet its hardware operations (fenced or not) are in flight: a reset
    /// waits for them (I12); a cycle ending without one does not.
    HoldsReset,
    /// Quiesced and waiting for the group's decision.
    Ready {
        /// Some voter did not say it can recover.
        reset_needed: bool,
    },
}

/// What a member can do when its group's cycle begins.
pub(crate) enum Part {
    /// It vanished (surprise-removed or being removed): it neither takes part nor blocks,
    /// and no reset is commanded through it (I3).
    Vanished,
    /// It takes part: told `RESET` now, or once powered up from an idle power-down.
    Joins,
    /// It cannot take part: the group's cycle ends without a reset, for this reason.
    Blocks(CannotResetReason),
}

impl<const C: usize, const P: usize> Device<C, P> {
    /// Whether the device wants a cycle its group does not run yet: it began one (a
    /// request or fatal error on it), or waits for an idle power-up to serve one. A reset
    /// asked in system sleep waits for the owner's power-up, as it does alone.
    pub(crate) fn wants_group_cycle(&self) -> bool {
        // A fatal error a pending query deferred waits for that query's end, as in no group.
        !self.group.taking_part()
            && self.phase.query_pending().is_none()
            && match self.phase {
                Phase::Quiescing { .. } | Phase::PoweringUp { reset: true, .. } => true,
                Phase::PoweringDown {
                    kind: PowerDownKind::Idle,
                    reset,
                    ..
                }
                | Phase::LowPower {
                    kind: PowerDownKind::Idle,
                    reset,
                } => reset,
                _ => false,
            }
    }

    /// What the device can do in a group's cycle beginning now. A member is never absent:
    /// the table refuses [`Input::JoinResetGroup`] there, and a device leaves its group as
    /// it becomes absent (`leave_group_on_removal`).
    pub(crate) fn group_part(&self) -> Part {
        match self.phase {
            Phase::SurpriseRemoved { .. } | Phase::Removing { .. } => {
                if planted!(GroupRemovedMemberBlocks) {
                    return Part::Blocks(CannotResetReason::MemberState(self.phase.kind()));
                }
                Part::Vanished
            }
            // A power transition for a pending query: the member is that query's state.
            Phase::PoweringDown {
                back_to: Some(query),
                ..
            }
            | Phase::PoweringUp {
                back_to: Some(query),
                ..
            } => Part::Blocks(CannotResetReason::MemberState(match query {
                QueryPending::Stop(_) => PhaseKind::StopPending,
                QueryPending::Remove => PhaseKind::RemovePending,
            })),
            Phase::Running | Phase::Quiescing { .. } | Phase::PoweringUp { .. } => Part::Joins,
            Phase::PoweringDown { kind, .. } | Phase::LowPower { kind, .. } => match kind {
                PowerDownKind::Idle => Part::Joins,
                PowerDownKind::SystemSleep => Part::Blocks(CannotResetReason::SystemSleep),
            },
            _ => Part::Blocks(CannotResetReason::MemberState(self.phase.kind())),
        }
    }

    /// The group's cycle begins: every voter is told `RESET` (a running member begins its
    /// cycle, held for the group once quiesced); a member in an idle power-down is
    /// powered up first (its cycle begins once it is back).
    pub(crate) fn join_group_cycle<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        if !matches!(self.group_part(), Part::Joins) {
            return;
        }
        self.group.leave_cycle();
        self.group.stage = Stage::Quiescing;
        let begun = match self.phase {
            Phase::Quiescing { .. } => {
                // A member that began the cycle may be quiesced already (no voter left).
                self.execute_if_quiesced(cx);
                true
            }
            // Running: its cycle begins; in a power state: its reset waits for the power-up
            // (already, or from now on).
            _ => self.request_reset(cx).is_ok(),
        };
        if !begun {
            // Only an exhausted epoch refuses: no cycle runs on it, yet the group's reset
            // touches its function all the same.
            self.group.stage = Stage::Left;
        }
        self.refresh_deadline(cx.config);
    }

    /// A reset waits for the power-up already.
    fn wants_power_up_reset(&self) -> bool {
        matches!(
            self.phase,
            Phase::PoweringDown { reset: true, .. }
                | Phase::LowPower { reset: true, .. }
                | Phase::PoweringUp { reset: true, .. }
        )
    }

    /// Whether the device, taking part, is still in the group's cycle: quiescing, or
    /// waiting for the power-up that begins its cycle. A member removed, surprise-removed,
    /// failed, or served by a lost-state power-up has left it.
    pub(crate) fn still_in_group_cycle(&self) -> bool {
        self.group.taking_part()
            && (matches!(self.phase, Phase::Quiescing { .. }) || self.wants_power_up_reset())
    }

    /// Taking part, the device is no longer in the group's cycle (see
    /// `still_in_group_cycle`): it leaves it (what it then says is `group_say`'s).
    pub(crate) fn leave_group_cycle<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        if matches!(self.phase, Phase::Running) {
            // Back from a power-up that lost its state (which served its own request):
            // the group's reset still touches it, so it takes part again.
            self.join_group_cycle(cx);
        } else {
            self.group.stage = Stage::Left;
        }
    }

    /// What the member says to its group's cycle under way, before the reset is commanded.
    pub(crate) fn group_say(&self) -> Say {
        match self.group.stage {
            Stage::Out | Stage::AwaitingReset { .. } => Say::Nothing,
            Stage::Quiescing | Stage::Ready { .. } => {
                match (self.group.refused_by, self.group_ready()) {
                    // I8: a voter refused: every requester is answered that.
                    (Some(client), _) => Say::EndsCycle(CannotResetReason::ClientRefused(client)),
                    (None, Some(reset_needed)) => Say::Ready { reset_needed },
                    (None, None) => Say::Quiescing,
                }
            }
            Stage::Left => match self.group_part() {
                // Removed or surprise-removed: it leaves without blocking (DESIGN), and the
                // reset neither goes through it nor waits for it (I3).
                Part::Vanished => Say::Nothing,
                // I8: left when it failed, then a query or a stop: a cycle could not have
                // begun with it, so it ends without the reset. Still failed, it does not:
                // the reset touches its hardware, nothing more.
                Part::Blocks(reason) if !matches!(self.phase, Phase::Failed { .. }) => {
                    Say::EndsCycle(reason)
                }
                // I12 per group: its operations in flight, fenced or not, end first.
                _ if self.registry.ops_in_flight() => Say::HoldsReset,
                _ => Say::Nothing,
            },
        }
    }

    /// Quiesced and waiting for the group's decision: `Some(reset_needed)`.
    pub(crate) fn group_ready(&self) -> Option<bool> {
        match self.phase {
            Phase::Quiescing { .. } => match self.group.stage {
                Stage::Ready { reset_needed } => Some(reset_needed),
                _ => None,
            },
            _ => None,
        }
    }

    /// The group's reset is commanded: this member's cycle executes; through the carrier
    /// the one [`HardwareCommand::Reset`] goes to the owner.
    pub(crate) fn execute_group_reset<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        carrier: bool,
    ) {
        if !matches!(self.phase, Phase::Quiescing { .. }) {
            return;
        }
        self.group.stage = Stage::AwaitingReset { carrier };
        self.set_phase(
            cx,
            Phase::Executing {
                then: AfterReset::Resume,
            },
        );
        if carrier {
            cx.hardware(HardwareCommand::Reset);
        }
        self.refresh_deadline(cx.config);
    }

    /// The carrier's reset reported: every other member that awaited it ends its cycle as
    /// its own reset would have (RESET_END at its new epoch, or a removal under way goes
    /// on). The carrier's own [`Input::ResetDone`] has been handled already.
    pub(crate) fn group_reset_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        result: ResetResult,
    ) {
        let awaited = self.group.stage == Stage::AwaitingReset { carrier: false };
        // A follow-up cycle already begun (the carrier's) joins the group's next cycle.
        self.group.leave_cycle();
        if awaited {
            let _ = self.reset_done(cx, result);
            self.refresh_deadline(cx.config);
        }
    }

    /// The group's cycle ended without a reset: end this member's part, answering its
    /// requesters `outcome` (a reset waiting for a power-up is dropped, answered too).
    pub(crate) fn end_group_cycle<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        outcome: CycleOutcome,
    ) {
        match self.phase {
            Phase::Quiescing { .. } => self.end_cycle_without_reset(cx, outcome),
            Phase::PoweringDown { ref mut reset, .. }
            | Phase::LowPower { ref mut reset, .. }
            | Phase::PoweringUp { ref mut reset, .. }
                if *reset =>
            {
                *reset = false;
                cx.cycle_finished(outcome);
            }
            _ => {}
        }
        self.group.leave_cycle();
    }
}
