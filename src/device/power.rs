//! Power: a started device's working state (D0) and low-power states (Dx), and how they
//! meet resets, stop and removal (DESIGN.md "Power", invariant I14).
//!
//! Powering down is orderly: clients are told [`Event::Suspending`], hardware operations
//! in flight are drained (with [`Config::operation_timeout`], then revoked and fenced),
//! then [`HardwareCommand::PowerDown`] is commanded. Powering up commands
//! [`HardwareCommand::PowerUp`], then tells clients [`Event::Resumed`]. Neither changes the
//! epoch unless the power-up reports [`PowerUpResult::LostState`]. In Dx nothing but the
//! power-up is commanded and no access is granted.

use super::{Ctx, Device, HwOp, Phase, Prior, QueryPending, Resources, Teardown};
use crate::registry::Role;
use crate::table::{InputKind, PhaseKind};
use crate::types::*;

/// What an admitted power-down does ([`Device::power_down_plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PowerDownPlan {
    /// Tell clients `Suspending`, drain operations, then command the power-down.
    Begin,
    /// A system sleep during a reset cycle: begun once the cycle leaves the device running.
    AfterCycle,
    /// Already in a low-power state: completed at once, the state now of this kind.
    AlreadyDown(PowerDownKind),
    /// Answered with success, nothing else (remove pending from added or stopped: as
    /// there, no power state to change).
    Nothing,
}

impl<const C: usize, const P: usize> Device<C, P> {
    /// What [`Input::PowerDown`] of `kind` would do now, in a state the table admits it
    /// in, or the error it would get. Pure: [`Self::power_down`] acts on it and
    /// `Lifecycle::query_power_down` answers from it, so the two cannot drift (DESIGN
    /// "Asking changes nothing").
    pub(crate) fn power_down_plan(&self, kind: PowerDownKind) -> Result<PowerDownPlan, Error> {
        match (self.phase, kind) {
            // Rule (Power): powering down is orderly: suspending, drain, then the command;
            // with a query stop or remove pending too (Windows must not fail a SET_POWER).
            (
                Phase::Running
                | Phase::StopPending {
                    low_power: None, ..
                }
                | Phase::RemovePending {
                    prior: Prior::Running,
                    ..
                },
                _,
            ) => Ok(PowerDownPlan::Begin),
            // Rule (Power): an idle power-down is not started during a reset cycle.
            (Phase::Quiescing { .. } | Phase::Executing { .. }, PowerDownKind::Idle) => {
                Err(Error::Vetoed(VetoReason::ResetInProgress))
            }
            (
                Phase::Executing {
                    then: super::AfterReset::Remove(_),
                },
                PowerDownKind::SystemSleep,
            ) => Err(Error::RemoveInProgress),
            // Rule (Power): a system sleep requested during a reset cycle waits for it.
            (Phase::Quiescing { .. } | Phase::Executing { .. }, PowerDownKind::SystemSleep) => {
                if self.sleep_after_cycle.is_some() {
                    return Err(Error::RequestPending);
                }
                Ok(PowerDownPlan::AfterCycle)
            }
            // Rule (Power): already down; a system sleep makes an idle Dx a sleep.
            (
                Phase::LowPower { kind: was, .. }
                | Phase::StopPending {
                    low_power: Some(was),
                    ..
                }
                | Phase::RemovePending {
                    prior: Prior::LowPower(was),
                    ..
                },
                _,
            ) => Ok(PowerDownPlan::AlreadyDown(match (was, kind) {
                (PowerDownKind::Idle, PowerDownKind::Idle) => PowerDownKind::Idle,
                _ => PowerDownKind::SystemSleep,
            })),
            // Added, stopped or failed: answered as there.
            (Phase::RemovePending { prior, .. }, _) => {
                answer_as_prior(prior, InputKind::PowerDown).map(|()| PowerDownPlan::Nothing)
            }
            _ => Err(self.refuse(InputKind::PowerDown)),
        }
    }

    /// [`Input::PowerDown`] in a state the table admits it in.
    #[inline(never)]
    pub(super) fn power_down<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        kind: PowerDownKind,
        token: RequestToken,
    ) -> Result<(), Error> {
        match self.power_down_plan(kind)? {
            PowerDownPlan::Begin => {
                // A pending query's deferred fatal error travels as the transition's reset.
                let (back_to, reset) = match self.phase {
                    Phase::StopPending { fatal, .. } => (Some(QueryPending::Stop(None)), fatal),
                    Phase::RemovePending { fatal, .. } => (Some(QueryPending::Remove), fatal),
                    _ => (None, false),
                };
                self.begin_power_down(cx, kind, token, back_to, reset)
            }
            PowerDownPlan::AfterCycle => self.sleep_after_cycle = Some(token),
            PowerDownPlan::AlreadyDown(kind) => {
                let phase = match self.phase {
                    Phase::LowPower { reset, .. } => Phase::LowPower { kind, reset },
                    Phase::StopPending { fatal, .. } => Phase::StopPending {
                        fatal,
                        low_power: Some(kind),
                    },
                    Phase::RemovePending { fatal, .. } => Phase::RemovePending {
                        prior: Prior::LowPower(kind),
                        fatal,
                    },
                    other => other,
                };
                self.set_phase(cx, phase);
                cx.complete(token, Status::Success);
            }
            PowerDownPlan::Nothing => cx.complete(token, Status::Success),
        }
        Ok(())
    }

    /// Tell every client `Suspending`, then power down once no operation is in flight.
    fn begin_power_down<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        kind: PowerDownKind,
        token: RequestToken,
        back_to: Option<QueryPending>,
        reset: bool,
    ) {
        self.notify_active(cx, Event::Suspending { kind });
        self.set_phase(
            cx,
            Phase::PoweringDown {
                kind,
                token,
                since: cx.now,
                commanded: false,
                reset,
                wake: false,
                back_to,
            },
        );
        self.power_down_if_drained(cx);
    }

    /// Command the hardware power-down once no hardware operation is in flight (a fenced
    /// one counts until the fence is reported done).
    pub(super) fn power_down_if_drained<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        let Phase::PoweringDown {
            ref mut commanded, ..
        } = self.phase
        else {
            return;
        };
        // I12 (Power): no power-down while an operation is in flight.
        if *commanded || self.registry.ops_in_flight() {
            return;
        }
        *commanded = true;
        cx.hardware(HardwareCommand::PowerDown);
    }

    /// A system sleep deferred by a reset cycle begins once the cycle left the device
    /// running.
    pub(super) fn sleep_if_deferred<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        if self.phase != Phase::Running {
            return;
        }
        if let Some(token) = self.sleep_after_cycle.take() {
            self.begin_power_down(cx, PowerDownKind::SystemSleep, token, None, false);
        }
    }

    /// A reset cycle that held a system sleep ended anywhere but running (the device
    /// failed, vanished or is being removed): the sleep request completes with that
    /// ending's status (I5).
    pub(super) fn end_deferred_sleep<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        let status = match self.phase.kind() {
            PhaseKind::Quiescing | PhaseKind::Executing | PhaseKind::Running => return,
            PhaseKind::Failed => Status::HardwareFailed,
            _ => Status::DeviceGone,
        };
        if let Some(token) = self.sleep_after_cycle.take() {
            cx.complete(token, status);
        }
    }

    /// [`Input::PowerDownDone`].
    #[inline(never)]
    pub(super) fn power_down_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
    ) -> Result<(), Error> {
        match self.phase {
            Phase::PoweringDown {
                kind,
                token,
                commanded: true,
                reset,
                wake,
                back_to,
                ..
            } => {
                if let Some(query) = back_to {
                    // Rule (Power): down for a pending query: back to it, the stop that
                    // came meanwhile served now.
                    self.set_phase(cx, query.returned(Some(kind), reset));
                    cx.complete(token, Status::Success);
                    self.serve_held_stop(cx, query);
                    return Ok(());
                }
                self.set_phase(cx, Phase::LowPower { kind, reset });
                cx.complete(token, Status::Success);
                if (reset || wake) && kind == PowerDownKind::Idle {
                    // Rule (Power): a reset or an access that came on the way down brings
                    // an idle device straight back.
                    self.begin_power_up(cx, None, reset, None);
                }
                Ok(())
            }
            _ => self.hardware_done_after_removal(cx, HwOp::PowerDown, None, false),
        }
    }

    /// [`Input::PowerUp`].
    #[inline(never)]
    pub(super) fn power_up<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        match self.phase {
            Phase::LowPower { reset, .. } => {
                self.begin_power_up(cx, Some(token), reset, None);
                Ok(())
            }
            // Rule (Power): a power-up is never refused for a pending query (Windows must
            // not fail SET_POWER D0); the device returns to the query once up.
            Phase::StopPending {
                fatal,
                low_power: Some(_),
            } => {
                self.begin_power_up(cx, Some(token), fatal, Some(QueryPending::Stop(None)));
                Ok(())
            }
            Phase::RemovePending {
                prior: Prior::LowPower(_),
                fatal,
            } => {
                self.begin_power_up(cx, Some(token), fatal, Some(QueryPending::Remove));
                Ok(())
            }
            // In D0 already: answered as there, nothing to power.
            Phase::StopPending {
                low_power: None, ..
            }
            | Phase::RemovePending {
                prior: Prior::Running,
                ..
            } => {
                cx.complete(token, Status::Success);
                Ok(())
            }
            // Added, stopped or failed: answered as there.
            Phase::RemovePending { prior, .. } => {
                answer_as_prior(prior, InputKind::PowerUp)?;
                cx.complete(token, Status::Success);
                Ok(())
            }
            // An access or a reset request already began the power-up: this one joins it.
            Phase::PoweringUp {
                token: None,
                reset,
                back_to,
            } => {
                self.set_phase(
                    cx,
                    Phase::PoweringUp {
                        token: Some(token),
                        reset,
                        back_to,
                    },
                );
                Ok(())
            }
            Phase::PoweringUp { token: Some(_), .. } => Err(Error::RequestPending),
            _ => Err(self.refuse(InputKind::PowerUp)),
        }
    }

    /// Command the hardware power-up: the only command issued in Dx (I14).
    fn begin_power_up<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: Option<RequestToken>,
        reset: bool,
        back_to: Option<QueryPending>,
    ) {
        self.set_phase(
            cx,
            Phase::PoweringUp {
                token,
                reset,
                back_to,
            },
        );
        cx.hardware(HardwareCommand::PowerUp);
    }

    /// [`Input::PowerUpDone`].
    #[inline(never)]
    pub(super) fn power_up_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        result: PowerUpResult,
    ) -> Result<(), Error> {
        let Phase::PoweringUp {
            token,
            reset,
            back_to,
        } = self.phase
        else {
            return self.hardware_done_after_removal(
                cx,
                HwOp::PowerUp,
                None,
                result == PowerUpResult::Failed,
            );
        };
        let complete = |cx: &mut Ctx<'_, Q>, status| {
            if let Some(token) = token {
                cx.complete(token, status);
            }
        };
        if let Some(query) = back_to {
            return self.power_up_done_for_query(cx, result, token, reset, query);
        }
        match result {
            // Rule (Power): the power-up commands the hardware, then tells clients back;
            // the epoch is unchanged. A reset that waited for it is served now.
            PowerUpResult::Powered => {
                self.set_phase(cx, Phase::Running);
                complete(cx, Status::Success);
                let epoch = self.epoch;
                if !planted!(SuspendWithoutResume) {
                    self.notify_active(
                        cx,
                        Event::Resumed {
                            epoch,
                            state_lost: false,
                        },
                    );
                }
                if reset {
                    self.serve_deferred_fatal(cx);
                }
            }
            // I6 (Power): a lost-state power-up ends like a completed reset: epoch + 1,
            // clients told and re-acquire; it serves a reset that waited for it.
            PowerUpResult::LostState if self.epoch.0 < u32::MAX => {
                self.epoch = Epoch(self.epoch.0 + 1);
                self.set_roles(Role::Idle, true);
                self.set_phase(cx, Phase::Running);
                complete(cx, Status::Success);
                let epoch = self.epoch;
                self.notify_active(
                    cx,
                    Event::Resumed {
                        epoch,
                        state_lost: true,
                    },
                );
                if reset {
                    cx.cycle_finished(CycleOutcome::Completed(epoch));
                }
            }
            // No epoch is left to tell clients their interface is gone: the device fails.
            PowerUpResult::LostState => {
                complete(cx, Status::HardwareFailed);
                self.fail_exhausted(cx);
                if reset {
                    cx.cycle_finished(CycleOutcome::HardwareFailed);
                }
            }
            // Rule (Power): a failed power-up from Dx is the hardware having vanished.
            PowerUpResult::Failed => {
                complete(cx, Status::HardwareFailed);
                if reset {
                    cx.cycle_finished(CycleOutcome::AbortedBySurpriseRemoval);
                }
                return self.vanish(cx, Resources::Held, None);
            }
        }
        Ok(())
    }

    /// [`Input::PowerUpDone`] of a power-up asked while a query stop or remove was
    /// pending: as [`Self::power_up_done`], but the device returns to that query (its
    /// deferred fatal error still held, unless a lost state served it) instead of running.
    fn power_up_done_for_query<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        result: PowerUpResult,
        token: Option<RequestToken>,
        reset: bool,
        query: QueryPending,
    ) -> Result<(), Error> {
        let status = match result {
            PowerUpResult::Powered => Status::Success,
            PowerUpResult::LostState if self.epoch.0 < u32::MAX => Status::Success,
            PowerUpResult::LostState => Status::HardwareFailed,
            PowerUpResult::Failed => Status::HardwareFailed,
        };
        if let Some(token) = token {
            cx.complete(token, status);
        }
        if status != Status::Success {
            // Failed or out of epochs: the held stop ends with the device.
            let (gone, outcome) = match result {
                PowerUpResult::Failed => {
                    (Status::DeviceGone, CycleOutcome::AbortedBySurpriseRemoval)
                }
                _ => (Status::HardwareFailed, CycleOutcome::HardwareFailed),
            };
            if let QueryPending::Stop(Some(stop)) = query {
                cx.complete(stop, gone);
            }
            if reset {
                cx.cycle_finished(outcome);
            }
            if result == PowerUpResult::Failed {
                // Rule (Power): a failed power-up from Dx is the hardware having vanished.
                return self.vanish(cx, Resources::Held, None);
            }
            self.fail_exhausted(cx);
            return Ok(());
        }
        let state_lost = result == PowerUpResult::LostState;
        if state_lost {
            // I6 (Power): a lost state ends like a completed reset; it serves the fatal.
            self.epoch = Epoch(self.epoch.0 + 1);
            self.set_roles(Role::Idle, true);
        }
        self.set_phase(cx, query.returned(None, reset && !state_lost));
        let epoch = self.epoch;
        self.notify_active(cx, Event::Resumed { epoch, state_lost });
        if reset && state_lost {
            cx.cycle_finished(CycleOutcome::Completed(epoch));
        }
        self.serve_held_stop(cx, query);
        Ok(())
    }

    /// A stop that arrived during a power transition for a pending query stop: served
    /// now that the device is back in stop pending.
    fn serve_held_stop<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, query: QueryPending) {
        if let QueryPending::Stop(Some(stop)) = query {
            let _ = self.stop(cx, stop); // in stop pending: always accepted
        }
    }

    /// [`Input::Stop`] during a power transition for a pending query stop: held, served
    /// when the hardware reports (never lost; a second one is the owner's error). Without
    /// a query stop, refused as the state the transition ends in would refuse it.
    pub(super) fn stop_in_power_transition(&mut self, token: RequestToken) -> Result<(), Error> {
        match self.phase {
            Phase::PoweringDown {
                back_to: Some(QueryPending::Stop(ref mut held)),
                ..
            }
            | Phase::PoweringUp {
                back_to: Some(QueryPending::Stop(ref mut held)),
                ..
            } => match held {
                Some(_) => Err(Error::RequestPending),
                None => {
                    *held = Some(token);
                    Ok(())
                }
            },
            // No query stop to serve it: refused as the state the transition ends in.
            Phase::PoweringDown { back_to, .. } | Phase::PoweringUp { back_to, .. } => {
                Err(Error::InvalidState {
                    phase: match (back_to, self.phase.kind()) {
                        (Some(query), _) => query.phase(),
                        (None, PhaseKind::PoweringDown) => PhaseKind::LowPower,
                        (None, _) => PhaseKind::Running,
                    },
                    input: InputKind::Stop,
                })
            }
            _ => Err(self.refuse(InputKind::Stop)),
        }
    }

    /// [`Input::CancelStop`] or [`Input::CancelRemove`] (`input`) during a power
    /// transition: the transition no longer returns to the query it cancels and ends as
    /// any other (a held fatal error then waits for the power-up). Nothing to cancel (no
    /// such query, or a stop already held): answered, no effect, as Windows requires.
    pub(super) fn cancel_in_power_transition<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
        input: InputKind,
    ) -> Result<(), Error> {
        let (Phase::PoweringDown {
            ref mut back_to, ..
        }
        | Phase::PoweringUp {
            ref mut back_to, ..
        }) = self.phase
        else {
            return Err(self.refuse(input));
        };
        if matches!(
            (*back_to, input),
            (Some(QueryPending::Stop(None)), InputKind::CancelStop)
                | (Some(QueryPending::Remove), InputKind::CancelRemove)
        ) {
            *back_to = None;
        }
        cx.complete(token, Status::Success);
        Ok(())
    }

    /// An access while the device is (going) down: it waits for a power-up (one begins
    /// after an idle power-down) or is refused with the reason.
    pub(super) fn access_while_powered_down<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
    ) -> Result<Reply, Error> {
        match self.phase {
            // I14 (Power): an access in an idle Dx brings the device back first.
            Phase::LowPower {
                kind: PowerDownKind::Idle,
                reset,
            } => {
                self.begin_power_up(cx, None, reset, None);
                Ok(Reply::AccessWaitsForPowerUp)
            }
            Phase::PoweringUp { .. } => Ok(Reply::AccessWaitsForPowerUp),
            // Rule (Power): an idle power-down under way finishes, then comes back.
            Phase::PoweringDown {
                kind: PowerDownKind::Idle,
                ref mut wake,
                ..
            } => {
                *wake = true;
                Ok(Reply::AccessWaitsForPowerUp)
            }
            // I14 (Power): refused with a named reason in system sleep.
            Phase::LowPower { kind, .. } | Phase::PoweringDown { kind, .. } => {
                Err(Error::Suspended { kind })
            }
            _ => Err(self.refuse(InputKind::Access)),
        }
    }

    /// A reset request or fatal error during a power transition or in Dx: served once the
    /// device is back (after an idle power-down, it brings the device back now).
    pub(super) fn reset_after_power_up<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        match self.phase {
            Phase::PoweringDown { ref mut reset, .. } => *reset = true,
            Phase::LowPower {
                kind: PowerDownKind::Idle,
                ..
            } => self.begin_power_up(cx, None, true, None),
            Phase::LowPower { ref mut reset, .. } | Phase::PoweringUp { ref mut reset, .. } => {
                *reset = true
            }
            _ => {}
        }
    }

    /// What removal undoes from a low-power state: the resources, no register (I14).
    pub(super) fn low_power_teardown(&self) -> Teardown {
        Teardown::Release
    }

    /// The power command in flight, if one is.
    pub(super) fn power_command_in_flight(&self) -> Option<HwOp> {
        match self.phase {
            Phase::PoweringDown {
                commanded: true, ..
            } => Some(HwOp::PowerDown),
            Phase::PoweringUp { .. } => Some(HwOp::PowerUp),
            _ => None,
        }
    }

    /// Answer what a power transition holds when the device goes away: its request
    /// completes with `status`, a reset waiting for the power-up is answered.
    pub(super) fn settle_power_requests<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        status: Status,
        outcome: CycleOutcome,
    ) {
        let (token, reset) = match self.phase {
            Phase::PoweringDown { token, reset, .. } => (Some(token), reset),
            Phase::LowPower { reset, .. } => (None, reset),
            Phase::PoweringUp { token, reset, .. } => (token, reset),
            _ => return,
        };
        if let Some(token) = token {
            cx.complete(token, status);
        }
        if let Some(QueryPending::Stop(Some(stop))) = self.phase.query_pending() {
            cx.complete(stop, status);
        }
        if reset {
            cx.cycle_finished(outcome);
        }
    }

    /// Remove (or unload) during a power transition or in Dx.
    pub(super) fn remove_in_power_transition<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: Option<RequestToken>,
    ) -> Result<(), Error> {
        let (teardown, in_flight) = match self.phase {
            // Still in D0, draining: removal drains instead and quiesces the hardware.
            Phase::PoweringDown {
                commanded: false, ..
            } => (Teardown::ShutdownAndRelease, None),
            // I14 (Power): remove from Dx releases resources without powering up.
            Phase::PoweringDown {
                commanded: true, ..
            }
            | Phase::LowPower { .. } => (self.low_power_teardown(), self.power_command_in_flight()),
            // Back in D0 once it reports (a failed power-up touches no register).
            Phase::PoweringUp { .. } => (Teardown::ShutdownAndRelease, Some(HwOp::PowerUp)),
            _ => return Err(self.refuse(InputKind::Remove)),
        };
        self.settle_power_requests(cx, Status::DeviceGone, CycleOutcome::AbortedByRemove);
        self.begin_removal(cx, token, teardown, in_flight, false)
    }
}

/// A power request while remove is pending from added, stopped or failed (no power state to
/// change): answered as that state answers it (cancel remove returns there exactly):
/// success where its row ignores the request, else its refusal.
fn answer_as_prior(prior: Prior, input: InputKind) -> Result<(), Error> {
    let phase = match prior {
        Prior::Added => PhaseKind::Added,
        Prior::Stopped => PhaseKind::Stopped,
        Prior::Failed(..) => PhaseKind::Failed,
        Prior::Running => PhaseKind::Running,
        Prior::LowPower(_) => PhaseKind::LowPower,
    };
    match crate::table::disposition(phase, input) {
        crate::table::Disposition::Ignore => Ok(()),
        _ => Err(Error::InvalidState { phase, input }),
    }
}
