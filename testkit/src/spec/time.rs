//! DESIGN "Nothing waits without a deadline" and "A deadline runs only while the client
//! can act": every deadline is a fact (`callback_since`, `reset_delivered`, `drain_until`,
//! `detach_by`), `poll_timeout` is their minimum, and a `Timeout` applies each one passed.
//! A deadline is carried exactly ([`Due`]): one beyond the clock's range is never reached,
//! never cut short to `u64::MAX` ("No deadline is cut short because the clock is near the
//! end of its range").

use super::{Spec, Standing};
use pnp_lifecycle::{
    ClientKind, CycleOutcome, DeviceId, FailureCause, PhaseKind, Tick, TrustedTimeoutPolicy,
};

/// A point in time a wait ends, carried exactly: `from + ticks` in 128 bits, so a deadline
/// beyond `u64::MAX` stays beyond every tick the owner can pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Due(u128);

impl Due {
    /// `ticks` after `from`, exactly.
    pub(super) fn after(from: Tick, ticks: u64) -> Due {
        Due(u128::from(from.0) + u128::from(ticks))
    }

    /// Whether the clock at `now` has reached it.
    pub(super) fn reached(self, now: Tick) -> bool {
        u128::from(now.0) >= self.0
    }

    /// The tick it falls on (`None`: beyond the clock's range).
    pub(super) fn tick(self) -> Option<Tick> {
        u64::try_from(self.0).ok().map(Tick)
    }
}

impl Spec {
    fn ack_timeout(&self, kind: ClientKind) -> u64 {
        match kind {
            ClientKind::Trusted => self.config.trusted_ack_timeout,
            ClientKind::Untrusted => self.config.untrusted_ack_timeout,
        }
    }

    /// The earliest deadline of a device (`None` too when every one is beyond the clock).
    pub(super) fn next_deadline(&self, d: DeviceId) -> Option<Tick> {
        let dev = self.dev(d);
        let mut all: Vec<Due> = Vec::new();
        for (s, c) in dev.clients.iter().enumerate() {
            if c.standing == Standing::Free || c.fence_requested {
                continue;
            }
            if let Some(t) = c.callback_since {
                all.push(Due::after(t, self.config.callback_timeout));
            }
            if let (true, Some(t)) = (dev.told_reset.contains(&s), dev.reset_delivered[s]) {
                all.push(Due::after(t, self.ack_timeout(c.kind)));
            }
            if let Some(t) = c.detach_by {
                all.push(t);
            }
            if let super::fast::Gate::Closing(t) = c.gate {
                all.push(Due::after(t, self.config.operation_timeout));
            }
        }
        all.extend(dev.drain_until);
        all.extend(self.group_deadline(d));
        all.into_iter().min()?.tick()
    }

    /// Apply every deadline passed at `now`, device by device (a group's after its
    /// members' clients').
    pub(super) fn on_time(&mut self, now: Tick) {
        // Members of a group's cycle first: their clients' deadlines are judged before
        // the group's own.
        let grouped: Vec<bool> = (0..self.devices.len())
            .map(|i| self.in_group_run(DeviceId(i as u8)))
            .collect();
        let failed = |spec: &Spec| -> Vec<bool> {
            spec.devices.iter().map(|x| x.failed.is_some()).collect()
        };
        let failed_before = failed(self);
        for (i, _) in grouped.iter().enumerate().filter(|(_, &g)| g) {
            self.expire(now, DeviceId(i as u8));
        }
        let failed_now: Vec<bool> = failed(self)
            .iter()
            .zip(&failed_before)
            .map(|(&after, &before)| after && !before)
            .collect();
        for (i, &g) in grouped.iter().enumerate() {
            let d = DeviceId(i as u8);
            if !self.dev(d).present {
                continue;
            }
            if !g {
                self.expire(now, d);
            }
            self.expire_group(now, d, &failed_now);
            self.settle(now, d);
        }
        self.settle_groups(now);
    }

    /// Every deadline passed at `now`, judged on the facts as they were when the time
    /// came: late clients are revoked (fenced if something of theirs is in flight), then,
    /// if a trusted one was late under `FailDevice` while the device ran, it fails.
    fn expire(&mut self, now: Tick, d: DeviceId) {
        let fail_policy = self.config.trusted_policy == TrustedTimeoutPolicy::FailDevice;
        // Only a running device (or one in a cycle's quiescing) escalates to failed: in
        // every other state the table lists no timeout into `Failed`.
        let phase = self.dev(d).phase();
        let escalates = fail_policy && matches!(phase, PhaseKind::Running | PhaseKind::Quiescing);
        let mut late = Vec::new();
        let mut fail = false;
        for s in 0..self.dev(d).clients.len() {
            let c = &self.dev(d).clients[s];
            if c.standing == Standing::Free || c.fence_requested {
                continue;
            }
            let trusted = c.kind == ClientKind::Trusted;
            let registered = c.standing == Standing::Live;
            let callback_late = c
                .callback_since
                .is_some_and(|t| Due::after(t, self.config.callback_timeout).reached(now));
            let detach_late = c.detach_by.is_some_and(|t| t.reached(now));
            let vote_late = self.dev(d).told_reset.contains(&s)
                && self.dev(d).reset_delivered[s]
                    .is_some_and(|t| Due::after(t, self.ack_timeout(c.kind)).reached(now));
            let drain_late = c.ops > 0 && self.dev(d).drain_until.is_some_and(|t| t.reached(now));
            let close_late = matches!(c.gate, super::fast::Gate::Closing(t)
                if Due::after(t, self.config.operation_timeout).reached(now));
            if callback_late {
                late.push(s);
                fail |= trusted && registered && escalates;
            } else if close_late {
                late.push(s); // a close overran: revoked and fenced, never escalated
            } else if vote_late {
                if trusted && escalates {
                    fail = true;
                } else {
                    late.push(s);
                }
            } else if detach_late || drain_late || close_late {
                late.push(s);
            }
        }
        for s in late {
            self.revoke(now, d, s);
        }
        if fail {
            self.fail_for_deadline(now, d);
        }
    }

    /// A trusted client missed a deadline under `FailDevice`: the device fails, and a
    /// cycle under way ends `ClientTimedOut`.
    fn fail_for_deadline(&mut self, now: Tick, d: DeviceId) {
        let in_cycle = self.dev(d).in_cycle();
        // A member of a group's cycle with others: its cycle ends before it fails (it no
        // longer holds the group's cycle back).
        let shared = self.shares_group_run(d);
        if in_cycle {
            let dev = self.dev_mut(d);
            dev.quiescing = false;
            dev.told_reset.clear();
            dev.answered.clear();
            dev.joined.clear();
            dev.drain_until = None;
            dev.reset_delivered.iter_mut().for_each(|t| *t = None);
        }
        if in_cycle && shared {
            self.finished(d, CycleOutcome::ClientTimedOut);
        }
        self.fail(now, d, FailureCause::ClientMissedDeadline);
        if in_cycle && !shared {
            self.finished(d, CycleOutcome::ClientTimedOut);
        }
    }
}
