//! DESIGN "Power": an orderly power-down (clients told, operations drained, then the
//! hardware), Dx touching nothing but a power-up, power-ups that may lose state, resets
//! and accesses in Dx.

use super::{Answer, Busy, Spec};
use pnp_lifecycle::table::{disposition, Disposition};
use pnp_lifecycle::InputKind;
use pnp_lifecycle::{
    CycleOutcome, DeviceId, Epoch, Error, Event, HardwareCommand, PowerDownKind, PowerUpResult,
    Reply, RequestToken, ResetAnswer, Status, Tick, VetoReason,
};

impl Spec {
    pub(super) fn power_down(
        &mut self,
        now: Tick,
        d: DeviceId,
        kind: PowerDownKind,
        token: RequestToken,
    ) -> Answer {
        if let Some(answer) = self.beneath_query(d, InputKind::PowerDown, token) {
            return answer;
        }
        let dev = self.dev(d);
        if let Some(current) = dev.dx {
            // Already down: a system sleep turns an idle Dx into a sleep.
            if kind == PowerDownKind::SystemSleep && current == PowerDownKind::Idle {
                self.dev_mut(d).dx = Some(kind);
            }
            self.complete(d, token, pnp_lifecycle::Status::Success);
            return Ok(Reply::Accepted);
        }
        if dev.in_cycle() && kind == PowerDownKind::Idle {
            return Err(Error::Vetoed(VetoReason::ResetInProgress));
        }
        if dev.removal_owed && !dev.remove_tokens.is_empty() {
            return Err(Error::RemoveInProgress);
        }
        if dev.in_cycle() {
            if dev.sleep_after_cycle.is_some() {
                return Err(Error::RequestPending);
            }
            self.dev_mut(d).sleep_after_cycle = Some(token);
            return Ok(Reply::Accepted);
        }
        self.begin_power_down(now, d, kind, token);
        Ok(Reply::Accepted)
    }

    /// With a query pending, a power request meets the table's cell of the state beneath
    /// the query: refused or ignored there, it is here too.
    fn beneath_query(
        &mut self,
        d: DeviceId,
        kind: InputKind,
        token: RequestToken,
    ) -> Option<Answer> {
        self.dev(d).query_pending?;
        let mut beneath = self.dev(d).clone();
        beneath.query_pending = None;
        let phase = beneath.phase();
        match disposition(phase, kind) {
            Disposition::Refuse => Some(Err(Error::InvalidState { phase, input: kind })),
            Disposition::Ignore => {
                self.complete(d, token, Status::Success);
                Some(Ok(Reply::Accepted))
            }
            _ => None,
        }
    }

    fn begin_power_down(
        &mut self,
        now: Tick,
        d: DeviceId,
        kind: PowerDownKind,
        token: RequestToken,
    ) {
        let dev = self.dev_mut(d);
        dev.powering_down = Some(kind);
        dev.power_tokens.push(token);
        for s in self.live(d) {
            self.notify(now, d, s, Event::Suspending { kind });
        }
    }

    /// A power-down whose operations drained commands the hardware; a system sleep that
    /// waited for a cycle begins once it ended.
    pub(super) fn settle_power(&mut self, now: Tick, d: DeviceId) {
        let dev = self.dev(d);
        let removing = dev.removal_begun || dev.removal_owed || dev.vanished;
        if dev.sleep_after_cycle.is_some() && !dev.in_cycle() && !removing {
            let failed = dev.failed.is_some();
            if let Some(token) = self.dev_mut(d).sleep_after_cycle.take() {
                if failed {
                    // The cycle failed the device: there is nothing to power down.
                    self.complete(d, token, Status::HardwareFailed);
                } else {
                    self.begin_power_down(now, d, PowerDownKind::SystemSleep, token);
                }
            }
        }
        let dev = self.dev(d);
        if dev.powering_down.is_none() || dev.hardware_busy.is_some() || dev.vanished {
            return;
        }
        if !self.drained(now, d) {
            return;
        }
        self.dev_mut(d).hardware_busy = Some(Busy::PowerDown);
        self.hardware(d, HardwareCommand::PowerDown);
    }

    pub(super) fn power_down_done(&mut self, now: Tick, d: DeviceId) -> Answer {
        if self.dev(d).hardware_busy != Some(Busy::PowerDown) {
            return Err(Error::NoHardwareCommandInFlight);
        }
        let dev = self.dev_mut(d);
        dev.hardware_busy = None;
        let kind = dev.powering_down.take();
        // The hardware is down now, whatever else happened meanwhile.
        dev.dx = kind.or(Some(PowerDownKind::Idle));
        if dev.vanished || dev.removal_begun {
            return Ok(Reply::Accepted);
        }
        for token in std::mem::take(&mut self.dev_mut(d).power_tokens) {
            self.complete(d, token, Status::Success);
        }
        // Back up at once if asked meanwhile, or if a reset is owed (idle power-down).
        let dev = self.dev_mut(d);
        let reset_owed = dev.reset_after_up && kind == Some(PowerDownKind::Idle);
        if std::mem::take(&mut dev.up_after_down) || reset_owed {
            self.command_power_up(d);
        } else {
            self.serve_held_stop(now, d);
        }
        Ok(Reply::Accepted)
    }

    /// A stop held during the power transition is served now that the hardware reported.
    fn serve_held_stop(&mut self, now: Tick, d: DeviceId) {
        if let Some(token) = self.dev_mut(d).stop_held.take() {
            self.stop_now(now, d, token);
        }
    }

    fn command_power_up(&mut self, d: DeviceId) {
        if self.dev(d).hardware_busy == Some(Busy::PowerUp) {
            return;
        }
        self.dev_mut(d).hardware_busy = Some(Busy::PowerUp);
        self.hardware(d, HardwareCommand::PowerUp);
    }

    pub(super) fn power_up(&mut self, d: DeviceId, token: RequestToken) -> Answer {
        if let Some(answer) = self.beneath_query(d, InputKind::PowerUp, token) {
            return answer;
        }
        let dev = self.dev(d);
        if dev.up_token.is_some() {
            return Err(Error::RequestPending);
        }
        if dev.powering_down.is_some() {
            let dev = self.dev_mut(d);
            dev.up_after_down = true;
            dev.up_token = Some(token);
            return Ok(Reply::Accepted);
        }
        if dev.dx.is_none() {
            self.complete(d, token, Status::Success);
            return Ok(Reply::Accepted);
        }
        self.dev_mut(d).up_token = Some(token);
        self.command_power_up(d);
        Ok(Reply::Accepted)
    }

    pub(super) fn power_up_done(
        &mut self,
        now: Tick,
        d: DeviceId,
        result: PowerUpResult,
    ) -> Answer {
        if self.dev(d).hardware_busy != Some(Busy::PowerUp) {
            return Err(Error::NoHardwareCommandInFlight);
        }
        let dev = self.dev_mut(d);
        dev.hardware_busy = None;
        if dev.vanished || dev.removal_begun {
            if result != PowerUpResult::Failed {
                dev.dx = None; // back in D0: the teardown may quiesce it
            }
            return Ok(Reply::Accepted);
        }
        let tokens: Vec<RequestToken> = dev.up_token.take().into_iter().collect();
        if result == PowerUpResult::Failed {
            // Treated as the hardware having vanished.
            self.dev_mut(d).dx = None;
            for token in tokens {
                self.complete(d, token, Status::HardwareFailed);
            }
            self.surprise_removal(now, d)?;
            return Ok(Reply::Accepted);
        }
        let lost = result == PowerUpResult::LostState;
        let dev = self.dev_mut(d);
        dev.dx = None;
        if lost {
            dev.epoch = Epoch(dev.epoch.0 + 1);
        }
        let epoch = dev.epoch;
        for token in tokens {
            self.complete(d, token, Status::Success);
        }
        for s in self.live(d) {
            self.notify(
                now,
                d,
                s,
                Event::Resumed {
                    epoch,
                    state_lost: lost,
                },
            );
        }
        // A fatal error deferred by a pending query (or a reset owed) stays with the query.
        if self.dev(d).query_pending.is_some() && !lost {
            let dev = self.dev_mut(d);
            dev.fatal_deferred |= std::mem::take(&mut dev.reset_after_up);
        }
        // A power-up that lost state was a reset: it serves whatever reset is owed.
        let fatal = (self.dev(d).query_pending.is_none() || lost)
            && std::mem::take(&mut self.dev_mut(d).fatal_deferred);
        if std::mem::take(&mut self.dev_mut(d).reset_after_up) || fatal {
            if lost {
                // The lost state was a reset: it serves the request; a group's cycle under
                // way still needs the member (the lost state reset it alone).
                self.finished(d, CycleOutcome::Completed(epoch));
                if self.in_group_run(d) {
                    self.start_cycle(now, d);
                }
            } else {
                self.start_cycle(now, d);
            }
        }
        // A stop held for this power-up is served now (it folds a fatal error it defers).
        self.serve_held_stop(now, d);
        Ok(Reply::Accepted)
    }

    /// A reset asked in (or on the way to) Dx: served after the power-up, which an idle
    /// power-down's request itself begins.
    pub(super) fn reset_in_dx(&mut self, d: DeviceId) -> Option<ResetAnswer> {
        let dev = self.dev(d);
        let going = dev.powering_down.is_some() || dev.hardware_busy == Some(Busy::PowerUp);
        if dev.dx.is_none() && !going {
            return None;
        }
        let idle = dev.dx == Some(PowerDownKind::Idle);
        let idle_going = dev.powering_down == Some(PowerDownKind::Idle);
        self.dev_mut(d).reset_after_up = true;
        if idle && !idle_going {
            self.command_power_up(d);
        }
        Some(ResetAnswer::AfterPowerUp)
    }

    /// An access in (or on the way to) Dx: `Some` answer if the power state decides it.
    pub(super) fn access_in_dx(&mut self, d: DeviceId) -> Option<Answer> {
        let dev = self.dev(d);
        match dev.powering_down {
            Some(PowerDownKind::Idle) => {
                // Back up as soon as it is down.
                self.dev_mut(d).up_after_down = true;
                return Some(Ok(Reply::AccessWaitsForPowerUp));
            }
            Some(kind) => return Some(Err(Error::Suspended { kind })),
            None => {}
        }
        if dev.hardware_busy == Some(Busy::PowerUp) {
            return Some(Ok(Reply::AccessWaitsForPowerUp)); // the device is on its way back
        }
        match dev.dx? {
            PowerDownKind::SystemSleep => Some(Err(Error::Suspended {
                kind: PowerDownKind::SystemSleep,
            })),
            PowerDownKind::Idle => {
                self.command_power_up(d);
                Some(Ok(Reply::AccessWaitsForPowerUp))
            }
        }
    }
}
