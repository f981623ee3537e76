//! Fatal errors and the coordinated reset cycle: quiesce every client, wait for hardware
//! operations, reset the hardware, tell every client the new epoch (DESIGN.md "The reset
//! cycle", I3, I5, I6, I8).

use super::*;

impl<const C: usize, const P: usize> Device<C, P> {
    // ---- fatal errors -------------------------------------------------------------

    /// A catastrophic-error interrupt: a reset request from the driver itself, never lost.
    #[inline(never)]
    pub(super) fn fatal_error<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
    ) -> Result<FatalAnswer, Error> {
        match self.phase {
            // I8: served by a cycle as soon as the state allows.
            Phase::Running | Phase::Quiescing { .. } => match self.request_reset(cx) {
                Ok(answer) => Ok(FatalAnswer::Served(answer)),
                Err(_) => {
                    // Only an exhausted epoch refuses here: nothing can reset it.
                    self.fail_exhausted(cx);
                    Ok(FatalAnswer::DeviceFailed)
                }
            },
            // I8: folded into the removal under way.
            Phase::Executing {
                then: AfterReset::Remove(_),
            } => Ok(FatalAnswer::FoldedIntoRemoval),
            Phase::Executing { .. } if cx.unloading => Ok(FatalAnswer::FoldedIntoRemoval),
            Phase::Executing { .. } => match self.request_reset(cx) {
                Ok(answer) => Ok(FatalAnswer::Served(answer)),
                // No follow-up fits in the epoch: the reset in flight serves it.
                Err(_) => Ok(FatalAnswer::Served(ResetAnswer::Joined)),
            },
            // I8: a pending start, stop or remove defers it; its end answers it.
            Phase::Starting { ref mut fatal, .. }
            | Phase::StopPending {
                ref mut fatal,
                low_power: None,
            }
            | Phase::Stopping { ref mut fatal, .. }
            | Phase::RemovePending {
                prior: Prior::Running,
                ref mut fatal,
            } => {
                *fatal = !planted!(LoseDeferredFatal);
                Ok(FatalAnswer::Deferred)
            }
            // I8 (Power): a power transition for a pending query defers it as the query
            // does; the query's end answers it.
            Phase::PoweringDown {
                back_to: Some(_),
                ref mut reset,
                ..
            }
            | Phase::PoweringUp {
                back_to: Some(_),
                ref mut reset,
                ..
            } => {
                *reset = !planted!(LoseDeferredFatal);
                Ok(FatalAnswer::Deferred)
            }
            // I8 (Power): during a power transition a cycle serves it after the power-up
            // (an idle power-down is ended for it).
            Phase::PoweringDown { .. } | Phase::PoweringUp { .. } => {
                self.reset_after_power_up(cx);
                Ok(FatalAnswer::Served(ResetAnswer::AfterPowerUp))
            }
            // I8: where the hardware is not live, answered with a named reason.
            Phase::LowPower { .. } | Phase::StopPending { .. } => {
                Ok(FatalAnswer::HardwareNotLive(self.phase.kind()))
            }
            Phase::Added
            | Phase::Stopped
            | Phase::RemovePending { .. }
            | Phase::Failed { .. }
            | Phase::SurpriseRemoved { .. }
            | Phase::Removing { .. } => Ok(FatalAnswer::HardwareNotLive(self.phase.kind())),
            Phase::Absent => Err(self.refuse(InputKind::FatalError)),
        }
    }

    /// The device runs again after a start, cancel stop or cancel remove that held a fatal
    /// error: serve it with a cycle now.
    pub(super) fn serve_deferred_fatal<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        if self.request_reset(cx).is_err() {
            self.fail_exhausted(cx);
            cx.cycle_finished(CycleOutcome::HardwareFailed);
        }
    }

    /// A fatal error no cycle can serve (the epoch is exhausted): the device fails.
    pub(super) fn fail_exhausted<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        self.set_roles(Role::Idle, false);
        self.fail(cx, Resources::Held, FailureCause::EpochExhausted);
        self.notify_active(cx, Event::DeviceFatal);
    }

    // ---- the reset cycle -----------------------------------------------------------

    /// A reset request (from a client or a fatal error): begin a cycle, join the running one,
    /// schedule one follow-up after the reset in flight, or wait for the power-up; refused when
    /// the epoch cannot move on.
    pub(super) fn request_reset<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
    ) -> Result<ResetAnswer, Error> {
        match self.phase {
            Phase::Running => {
                if self.epoch.0 == u32::MAX {
                    return Err(Error::EpochExhausted);
                }
                self.begin_cycle(cx);
                Ok(ResetAnswer::Started)
            }
            Phase::Quiescing { .. } => Ok(ResetAnswer::Joined),
            Phase::Executing { then } => {
                if cx.unloading {
                    return Err(Error::Unloading);
                }
                match then {
                    AfterReset::Remove(_) => Err(Error::RemoveInProgress),
                    AfterReset::FollowUp => Ok(ResetAnswer::Scheduled),
                    AfterReset::Resume => {
                        // This cycle ends at epoch + 1; the follow-up needs epoch + 2.
                        if self.epoch.0 >= u32::MAX - 1 {
                            return Err(Error::EpochExhausted);
                        }
                        self.set_phase(
                            cx,
                            Phase::Executing {
                                then: AfterReset::FollowUp,
                            },
                        );
                        Ok(ResetAnswer::Scheduled)
                    }
                }
            }
            // I8 (Power): a reset requested in Dx is served after the power-up.
            Phase::PoweringDown { .. } | Phase::LowPower { .. } | Phase::PoweringUp { .. } => {
                if self.epoch.0 == u32::MAX {
                    return Err(Error::EpochExhausted);
                }
                if cx.unloading {
                    return Err(Error::Unloading);
                }
                self.reset_after_power_up(cx);
                Ok(ResetAnswer::AfterPowerUp)
            }
            _ => Err(self.refuse(InputKind::ResetRequest)),
        }
    }

    /// Tell every client `RESET`; with no voter the hardware reset follows at once.
    pub(super) fn begin_cycle<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        if let Some((member, reason)) = cx.group_blocker {
            // Reset groups: another member cannot take part: no cycle, answered now.
            cx.cycle_finished(CycleOutcome::CannotReset { member, reason });
            return;
        }
        // One pass: every active client votes and is told `RESET` (as `set_roles` then
        // `notify_active` would: telling a client reads no role).
        // A voter that can take its RESET now is told in place (`tell`); its callback's
        // and its answer's deadlines, the same for every such voter of its kind, are added
        // once at the end.
        // Counted as they go: every voter, the untrusted told, and the voters not told now.
        let mut voters = 0u16;
        let mut untrusted = 0u16;
        let mut waiting = 0u16;
        for index in self.registry.occupied() {
            let Some(slot) = self.registry.slots.get_mut(index) else {
                continue;
            };
            let ClientState::Active { role, .. } = &mut slot.state else {
                continue;
            };
            *role = Role::Voting;
            voters += 1;
            match clients::tell(cx, index, slot, Event::Reset) {
                Some(kind) => untrusted += u16::from(kind == ClientKind::Untrusted),
                None => {
                    waiting += 1;
                    // Its answer deadline begins when this cycle's RESET is delivered.
                    slot.reset_delivered = None;
                    self.notify(cx, index, Event::Reset);
                }
            }
        }
        let trusted = voters - waiting - untrusted;
        let now = cx.now;
        self.earliest
            .add_n(callback_due(cx.config, now), trusted + untrusted);
        let trusted_due = due(now, ack_timeout(cx.config, ClientKind::Trusted));
        self.earliest.add_n(trusted_due, trusted);
        let untrusted_due = due(now, ack_timeout(cx.config, ClientKind::Untrusted));
        self.earliest.add_n(untrusted_due, untrusted);
        self.set_phase(
            cx,
            Phase::Quiescing {
                since: cx.now,
                voters,
                // With no voter nobody can say it recovers: the reset runs.
                reset_needed: voters == 0,
                draining: None,
            },
        );
        self.execute_if_quiesced(cx);
    }

    /// Once every voter answered, left or was revoked: end the cycle without a reset if
    /// every voter could recover; otherwise, once no hardware operation is in flight (or
    /// every one is fenced), command the hardware reset.
    #[inline]
    pub(super) fn execute_if_quiesced<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        if let Phase::Quiescing { voters, .. } = self.phase {
            if voters == 0 || (planted!(ResetWithOneVoterLeft) && voters == 1) {
                self.execute_quiesced(cx);
            }
        }
    }

    /// Every voter answered (see `execute_if_quiesced`): end the cycle or reset.
    #[inline(never)]
    pub(super) fn execute_quiesced<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        let Phase::Quiescing {
            since,
            voters,
            reset_needed,
            draining,
        } = self.phase
        else {
            return;
        };
        // Reset groups: a member's cycle ends or resets only as its group decides.
        let grouped = self.group.group.is_some();
        if !reset_needed && !grouped {
            // I3: every voter can recover: the cycle ends without a reset, same epoch.
            let epoch = self.epoch;
            self.set_phase(cx, Phase::Running);
            self.end_cycle_notify(cx, false);
            cx.cycle_finished(CycleOutcome::Recovered(epoch));
            self.sleep_if_deferred(cx);
            return;
        }
        // I12: no hardware reset while an operation is in flight.
        if self.registry.ops_in_flight() && !planted!(ResetBeforeFence) {
            if draining.is_none() {
                self.set_phase(
                    cx,
                    Phase::Quiescing {
                        since,
                        voters,
                        reset_needed,
                        draining: Some(cx.now),
                    },
                );
            }
            return;
        }
        if grouped {
            // Quiesced: the group commands its one reset once every member is
            // (`machine/groups.rs`).
            self.group.quiesced(reset_needed);
            return;
        }
        self.set_phase(
            cx,
            Phase::Executing {
                then: AfterReset::Resume,
            },
        );
        cx.hardware(HardwareCommand::Reset);
    }

    /// A voter answers `RESET`: `needs_reset` for `ResetExecute`, not for `CanRecover`.
    /// Inlined (with `callback_done` and `acquire`) into `dispatch`, so into
    /// `Lifecycle::handle`: these are the inputs a reset cycle is made of, N each.
    #[inline(always)]
    pub(super) fn answer_reset<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
        needs_reset: bool,
    ) -> Result<(), Error> {
        let (_, slot) = self.registry.active_mut(client)?;
        if !slot.is_voting() {
            return Err(Error::NotVoting);
        }
        if slot.mailbox().holds_reset() {
            return Err(Error::ResetNotDelivered);
        }
        self.earliest.remove(voter_due(cx.config, slot));
        if let ClientState::Active { role, .. } = &mut slot.state {
            *role = Role::Acked;
        }
        self.voter_answered(cx, needs_reset);
        Ok(())
    }

    /// [`Input::ResetDone`]: the hardware reset reported. Succeeded: the epoch moves on, clients
    /// are told `RESET_END` (I6) and the cycle completes (or a removal or follow-up cycle
    /// begins). Failed: the device fails and clients are told `DeviceFatal`.
    #[inline(never)]
    pub(super) fn reset_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        result: ResetResult,
    ) -> Result<(), Error> {
        let then = match self.phase {
            Phase::Executing { then } => then,
            _ => return self.hardware_done_after_removal(cx, HwOp::Reset, None, false),
        };
        let succeeded = result == ResetResult::Succeeded;
        if succeeded {
            // `request_reset` refused any cycle that would overflow the epoch.
            self.epoch = Epoch(self.epoch.0.saturating_add(1));
        }
        let removal = match then {
            AfterReset::Remove(token) => Some(Some(token)),
            _ if cx.unloading => Some(None),
            _ => None,
        };
        if removal.is_some() || !succeeded {
            self.set_roles(Role::Idle, succeeded);
        }
        if let Some(token) = removal {
            let outcome = if succeeded {
                CycleOutcome::AbortedByRemove
            } else {
                CycleOutcome::HardwareFailed
            };
            cx.cycle_finished(outcome);
            if then == AfterReset::FollowUp {
                cx.cycle_finished(CycleOutcome::AbortedByRemove);
            }
            let teardown = if succeeded {
                Teardown::ShutdownAndRelease
            } else {
                Teardown::Release
            };
            return self.begin_removal(cx, token, teardown, None, false);
        }
        if !succeeded {
            self.fail(cx, Resources::Held, FailureCause::ResetFailed);
            self.notify_active(cx, Event::DeviceFatal);
            cx.cycle_finished(CycleOutcome::HardwareFailed);
            if then == AfterReset::FollowUp {
                cx.cycle_finished(CycleOutcome::HardwareFailed);
            }
            return Ok(());
        }
        let epoch = self.epoch;
        // Roles back to idle, interfaces stale, and `RESET_END`, in one pass.
        self.end_cycle_notify(cx, true);
        cx.cycle_finished(CycleOutcome::Completed(epoch));
        self.set_phase(cx, Phase::Running);
        if then == AfterReset::FollowUp {
            self.begin_cycle(cx);
        }
        self.sleep_if_deferred(cx);
        Ok(())
    }
}
