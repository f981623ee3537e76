//! DESIGN "Device lifecycle" (remove, surprise removal, unload): every client told
//! `Removed`, detached or revoked and fenced, then the teardown, then `DeviceRemoved`;
//! unload is a fence over every device.

use super::{Answer, Busy, Claim, Due, Spec, Standing};
use pnp_lifecycle::{
    CycleOutcome, DeviceId, DriverPhase, Event, HardwareCommand, Output, Reply, RequestToken,
    Status, Tick,
};

impl Spec {
    pub(super) fn remove(&mut self, now: Tick, d: DeviceId, token: Option<RequestToken>) -> Answer {
        let dev = self.dev(d);
        if (dev.removal_begun || dev.removal_owed) && !dev.remove_tokens.is_empty() {
            return Err(pnp_lifecycle::Error::RequestPending);
        }
        if let Some(token) = token {
            self.dev_mut(d).remove_tokens.push(token);
        }
        if self.dev(d).removal_begun {
            // Joins the removal under way (begun by unload): completed with it.
            return Ok(Reply::Accepted);
        }
        if self.dev(d).hardware_busy == Some(Busy::Reset) {
            // The hardware reset runs: removal waits for it; a follow-up will never run.
            self.owe_removal(d, true);
            return Ok(Reply::Accepted);
        }
        self.begin_removal(now, d);
        Ok(Reply::Accepted)
    }

    /// Removal waits for the hardware command in flight; a scheduled follow-up cycle is
    /// answered now (it will never begin).
    fn owe_removal(&mut self, d: DeviceId, answer_follow_up: bool) {
        let dev = self.dev_mut(d);
        dev.removal_owed = true;
        if answer_follow_up && std::mem::take(&mut dev.follow_up) {
            self.finished(d, CycleOutcome::AbortedByRemove);
        }
    }

    /// Removal begins: a quiescing cycle is aborted and every live client told `Removed`.
    pub(super) fn begin_removal(&mut self, now: Tick, d: DeviceId) {
        self.leave_group_run(d);
        let dev = self.dev_mut(d);
        dev.removal_begun = true;
        dev.removal_owed = false;
        dev.query_pending = None;
        dev.drain_until = None; // the removal's own deadline (detach) bounds its drain
        self.power_requests_gone(d);
        let dev = self.dev_mut(d);
        let waiting = std::mem::take(&mut dev.reset_after_up);
        if dev.quiescing || std::mem::take(&mut dev.fatal_deferred) || waiting {
            self.abort_cycle(d, CycleOutcome::AbortedByRemove);
        }
        self.tell_removed(now, d, false);
        // Clients told `Removed` by a surprise removal have their detach deadline from now.
        let by = Due::after(now, self.config.detach_timeout);
        for c in self.dev_mut(d).clients.iter_mut() {
            let closing = matches!(c.gate, super::fast::Gate::Closing(_));
            let waits = c.standing == Standing::Told
                || (c.standing == Standing::Unregistered && (c.ops > 0 || closing));
            if waits && c.detach_by.is_none() && !c.fence_requested {
                c.detach_by = Some(by);
            }
        }
    }

    /// Power requests under way end with the device: `DeviceGone`.
    fn power_requests_gone(&mut self, d: DeviceId) {
        let dev = self.dev_mut(d);
        dev.powering_down = None;
        dev.up_after_down = false;
        let mut tokens = std::mem::take(&mut dev.power_tokens);
        tokens.extend(dev.sleep_after_cycle.take());
        tokens.extend(dev.up_token.take());
        tokens.extend(dev.stop_held.take());
        for token in tokens {
            self.complete(d, token, Status::DeviceGone);
        }
    }

    fn abort_cycle(&mut self, d: DeviceId, outcome: CycleOutcome) {
        self.leave_group_run(d);
        let dev = self.dev_mut(d);
        dev.quiescing = false;
        dev.fatal_deferred = false;
        dev.told_reset.clear();
        dev.answered.clear();
        dev.joined.clear();
        dev.drain_until = None;
        dev.reset_delivered.iter_mut().for_each(|t| *t = None);
        self.finished(d, outcome);
    }

    fn tell_removed(&mut self, now: Tick, d: DeviceId, surprise: bool) {
        let by = Due::after(now, self.config.detach_timeout);
        let removing = self.dev(d).removal_begun;
        for s in self.live(d) {
            let c = &mut self.dev_mut(d).clients[s];
            c.standing = Standing::Told;
            c.detach_by = removing.then_some(by);
            self.notify(now, d, s, Event::Removed { surprise });
        }
    }

    pub(super) fn surprise_removal(&mut self, now: Tick, d: DeviceId) -> Answer {
        self.leave_group_run(d);
        let dev = self.dev_mut(d);
        let first = !dev.vanished;
        dev.vanished = true;
        dev.drain_until = None; // nothing left to protect: the hardware is gone
        self.power_requests_gone(d);
        let dev = self.dev_mut(d);
        dev.query_pending = None;
        if let Some(token) = dev.stop_draining.take() {
            self.complete(d, token, Status::DeviceGone);
        }
        // A start in flight is answered now: the device is gone.
        if let Some(Busy::Start(token)) = &mut self.dev_mut(d).hardware_busy {
            if let Some(token) = token.take() {
                self.complete(d, token, Status::DeviceGone);
            }
        }
        let dev = self.dev_mut(d);
        let follow_up = std::mem::take(&mut dev.follow_up);
        let waiting = std::mem::take(&mut dev.reset_after_up);
        if first && (dev.in_cycle() || dev.fatal_deferred || waiting) {
            self.abort_cycle(d, CycleOutcome::AbortedBySurpriseRemoval);
        }
        if follow_up {
            // The scheduled follow-up cycle is answered too.
            self.finished(d, CycleOutcome::AbortedBySurpriseRemoval);
        }
        self.tell_removed(now, d, true);
        Ok(Reply::Accepted)
    }

    pub(super) fn unload(&mut self, now: Tick) {
        self.driver = DriverPhase::Unloading;
        for i in 0..self.devices.len() {
            let d = DeviceId(i as u8);
            let dev = self.dev(d);
            if !dev.present || dev.removal_begun {
                continue;
            }
            let hardware = matches!(dev.hardware_busy, Some(Busy::Start(_) | Busy::Reset));
            if (hardware || dev.stop_draining.is_some()) && !dev.vanished {
                // A start, a reset or a stop under way: removal waits for it to end (a
                // follow-up cycle is answered when the reset reports).
                self.owe_removal(d, false);
            } else {
                self.begin_removal(now, d);
            }
            self.settle(now, d);
        }
    }

    /// Once every client is gone (or revoked and fenced) and no hardware command runs,
    /// undo what the start did and complete the removal.
    pub(super) fn settle_removal(&mut self, d: DeviceId) {
        let dev = self.dev(d);
        if !dev.removal_begun || dev.hardware_busy.is_some() {
            return;
        }
        let waiting = dev.clients.iter().any(|c| match c.standing {
            Standing::Free => false,
            // Revoked: waits only for its fence, or its `Revoked` callback's return.
            Standing::Revoked => c.fence_requested || c.callback_since.is_some(),
            _ if c.gate != super::fast::Gate::Shut => true,
            _ => true,
        });
        if waiting {
            return;
        }
        for s in self.occupied(d) {
            self.free(d, s);
        }
        let dev = self.dev(d);
        let (claim, vanished) = (dev.claim, dev.vanished);
        let dev = dev.clone();
        if claim == Claim::Live && !vanished && dev.dx.is_none() {
            self.hardware(d, HardwareCommand::Shutdown);
        }
        if claim != Claim::Nothing {
            self.hardware(d, HardwareCommand::ReleaseResources);
        }
        for token in std::mem::take(&mut self.dev_mut(d).remove_tokens) {
            self.complete(d, token, Status::Success);
        }
        self.out.push(Output::DeviceRemoved { device: d });
        self.forget_member(d);
        let dev = self.dev_mut(d);
        dev.present = false;
        dev.removal_begun = false;
        dev.vanished = false;
        dev.claim = Claim::Nothing;
        dev.started = false;
        dev.stopped = false;
        dev.failed = None;
        dev.ports.iter_mut().for_each(|p| *p = None);
    }

    /// Driver unload finishes once every device is gone.
    pub(super) fn finish_unload_if_done(&mut self) {
        if self.driver == DriverPhase::Unloading && self.devices.iter().all(|d| !d.present) {
            self.out.push(Output::UnloadMayFinish);
            self.driver = DriverPhase::Unloaded;
        }
    }
}
