//! A device's part in its reset group's cycle (DESIGN.md "Reset groups"): the group itself,
//! its members and its one hardware reset are the driver's (`machine/groups.rs`); here a
//! member holds its quiesced cycle for the group's decision, ends it as the group says,
//! and takes a voter's refusal (`ResetNack`).

use super::*;

/// A device's membership and its part in the group's cycle under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Member {
    /// The group the owner declared, if any.
    pub(crate) group: Option<GroupId>,
    /// Takes part in its group's cycle: its own cycle does not command the hardware reset
    /// nor end by itself once quiesced; it waits for the group's decision.
    pub(crate) taking_part: bool,
    /// Quiesced (every voter answered, left or was revoked; no hardware operation in
    /// flight): ready for the group's reset. `reset_needed` of its cycle.
    pub(crate) ready: Option<bool>,
    /// Its cycle's hardware reset was commanded through the group's carrier; the
    /// carrier's [`Input::ResetDone`] ends it.
    pub(crate) awaits_group_reset: bool,
    /// The group's hardware reset was commanded through this device.
    pub(crate) carrier: bool,
    /// A voter refused the group's reset ([`Input::ResetNack`]): the group ends its cycle.
    pub(crate) refused_by: Option<ClientHandle>,
}

impl Member {
    /// In no group.
    pub(crate) const NONE: Member = Member {
        group: None,
        taking_part: false,
        ready: None,
        awaits_group_reset: false,
        carrier: false,
        refused_by: None,
    };

    /// Out of the group's cycle (the membership stays).
    pub(crate) fn leave_cycle(&mut self) {
        *self = Member {
            group: self.group,
            ..Member::NONE
        };
    }
}

impl<const C: usize, const P: usize> Device<C, P> {
    /// A device removed (its slot free) leaves its reset group.
    #[inline]
    pub(crate) fn leave_group_if_absent(&mut self) {
        if matches!(self.phase, Phase::Absent) {
            self.group = Member::NONE;
        }
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
        if slot.mailbox.holds_reset() {
            return Err(Error::ResetNotDelivered);
        }
        if self.group.taking_part {
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
