//! Every deadline of a device: computed in one place, kept current as it changes, and
//! acted on from the same formulas.
//!
//! A device waits on three kinds of deadline: a client's callback in flight
//! ([`Config::callback_timeout`]), a voter's answer to `RESET` (its ack timeout, from the
//! `RESET`'s delivery), and the phase's own wait (a stop, a power-down or a reset draining
//! hardware operations; the detach deadline of removal). [`Device::earliest`] keeps the
//! earliest of them and how many fall at that tick, so [`crate::Lifecycle::poll_timeout`]
//! reads one value a device. The inputs of a reset cycle (a callback returned, a `RESET`
//! answered) change it in O(1); any other change (a new phase, a revocation) marks it
//! stale, and the end of the input finds it again over the occupied slots only.

use super::fast::Gate;
use super::{Ctx, Device, Phase, Resources};
use crate::registry::{ClientState, Role, Slot};
use crate::types::*;

/// When a wait of `ticks` begun at `from` ends; `None` if that is beyond the clock's range,
/// so never reached. DESIGN r3 allows refusing such an input or carrying the deadline
/// exactly; it is carried exactly (never saturated to something shorter), because the
/// inputs that begin waits include surprise removal, remove, unload, time and hardware
/// completions, which I11 forbids refusing for anything but the owner's own backlog.
pub(super) fn due(from: Tick, ticks: u64) -> Option<Tick> {
    from.0.checked_add(ticks).map(Tick)
}

/// Whether the clock at `now` has reached `at` (never, for a deadline beyond its range).
fn reached(now: Tick, at: Option<Tick>) -> bool {
    at.is_some_and(|at| now >= at)
}

/// How long a voter of `kind` has to answer `RESET`.
#[inline(always)]
pub(super) fn ack_timeout(config: &Config, kind: ClientKind) -> u64 {
    let timeout = match kind {
        ClientKind::Untrusted => config.untrusted_ack_timeout,
        ClientKind::Trusted => config.trusted_ack_timeout,
    };
    if planted!(EarlyRevocation) {
        return timeout / 2;
    }
    timeout
}

/// When a slot's callback in flight overruns: not once a fence is asked for (only the
/// fence ends that wait).
#[cfg_attr(not(target_os = "none"), inline(always))]
pub(super) fn callback_deadline(config: &Config, slot: &Slot) -> Option<Tick> {
    if planted!(NoCallbackDeadline) || slot.fence_requested() {
        return None;
    }
    due(slot.callback()?, config.callback_timeout)
}

/// When a callback handed over at `called` overruns, for a slot with no fence asked for
/// (a live client's: `callback_deadline` knowing what the caller checked).
#[inline(always)]
pub(super) fn callback_due(config: &Config, called: Tick) -> Option<Tick> {
    if planted!(NoCallbackDeadline) {
        return None;
    }
    due(called, config.callback_timeout)
}

/// When a voter must have answered `RESET`: its whole answer time after the `RESET` was
/// delivered (I13). None for a non-voter, or while its `RESET` waits behind its own
/// callback in flight (that callback's deadline runs instead).
#[cfg_attr(not(target_os = "none"), inline(always))]
pub(super) fn voter_deadline(config: &Config, slot: &Slot) -> Option<Tick> {
    if !slot.is_voting() {
        return None;
    }
    due(slot.reset_delivered?, ack_timeout(config, slot.kind))
}

/// `voter_deadline` for a slot known to be voting (the caller checked).
#[inline(always)]
pub(super) fn voter_due(config: &Config, slot: &Slot) -> Option<Tick> {
    due(slot.reset_delivered?, ack_timeout(config, slot.kind))
}

/// The deadlines one slot contributes: its callback's and its `RESET` answer's.
pub(super) type SlotDeadlines = [Option<Tick>; 2];

/// The deadlines of one slot.
#[cfg_attr(not(target_os = "none"), inline(always))]
pub(super) fn slot_deadlines(config: &Config, slot: &Slot) -> SlotDeadlines {
    [
        callback_deadline(config, slot),
        voter_deadline(config, slot),
    ]
}

/// Whether a slot holds hardware operations no fence has been asked for yet.
pub(super) fn unfenced_ops(slot: &Slot) -> bool {
    slot.ops_pending() && !slot.fence_requested()
}

/// A device's earliest deadline, kept current input by input.
///
/// It counts the deadlines at the earliest tick and, apart, the rest; while every other
/// deadline falls at one later tick, it knows that tick too, so that when the last deadline
/// at the earliest tick goes the next earliest is at hand without a search: a reset
/// cycle's callbacks (all due at one tick) end before its voters' answers (due at
/// another), and the last callback returned finds the answers' tick here. Only deadlines at
/// a third tick make the next one unknown; it is then found again by a search (`stale`).
/// Removing a deadline changes one count: the one at the earliest tick, or the rest.
///
/// `at` means something only while `count` is above zero (it is zero otherwise, so equal
/// states stay equal; `rest` is then zero too): a deadline beyond the clock's range is
/// never counted, so every counted one is a tick, and no sentinel tick is needed. The
/// counts never overflow: a device has at most two deadlines a client slot (its
/// callback's and its `RESET` answer's), one a fast-path gate and the phase's, at most
/// 3 · 256 + 1 < `u16::MAX`; and a deadline is removed only after it was added, so they
/// never go below zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Earliest {
    /// The earliest deadline's tick, while `count` is above zero.
    at: u64,
    /// How many of the device's deadlines fall at `at`: when the last of them goes, the
    /// next one takes its place (or is found again, or there is none left).
    count: u16,
    /// How many of the device's deadlines fall later than `at`.
    rest: u16,
    /// With `two`, the tick every deadline not at `at` falls at (if there is any).
    next: u64,
    /// Every deadline not at `at` falls at `next`: when the last at `at` goes, the rest
    /// are the earliest, all of them at `next`.
    two: bool,
    /// A change not followed one by one: found again at the end of the input.
    stale: bool,
}

impl Earliest {
    pub(crate) const NONE: Earliest = Earliest {
        at: 0,
        count: 0,
        rest: 0,
        next: 0,
        two: true,
        stale: false,
    };

    /// The earliest deadline, if any is counted.
    #[inline(always)]
    fn at(&self) -> Option<Tick> {
        (self.count != 0).then_some(Tick(self.at))
    }

    /// How many deadlines the device waits on in all.
    #[cfg(test)]
    fn total(&self) -> u16 {
        self.count.wrapping_add(self.rest)
    }

    /// A deadline was added.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub(super) fn add(&mut self, at: Option<Tick>) {
        let Some(Tick(at)) = at else { return };
        self.add_at(at, 1);
    }

    /// `n` deadlines at `at` were added (clients told at once share their deadline).
    #[inline(always)]
    pub(super) fn add_n(&mut self, at: Option<Tick>, n: u16) {
        if let (Some(Tick(at)), 1..) = (at, n) {
            self.add_at(at, n);
        }
    }

    /// `n` (at least one) deadlines at tick `at` were added. Inlined on a hosted target;
    /// a bare-metal build keeps one copy.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn add_at(&mut self, at: u64, n: u16) {
        if self.count == 0 {
            self.at = at;
            self.count = n;
            self.two = true;
        } else if at == self.at {
            self.count = self.count.wrapping_add(n);
        } else if self.rest == 0 {
            // One tick so far: the two are known.
            self.next = self.at.max(at);
            self.two = true;
            if at < self.at {
                self.at = at;
                self.rest = self.count;
                self.count = n;
            } else {
                self.rest = n;
            }
        } else {
            // A third tick makes the next one unknown.
            self.two &= at == self.next;
            if at < self.at {
                self.two = false;
                self.at = at;
                self.rest = self.rest.wrapping_add(self.count);
                self.count = n;
            } else {
                self.rest = self.rest.wrapping_add(n);
            }
        }
    }

    /// The same starts `ticks` later (nothing, beyond the clock's range).
    fn later(self, ticks: u64) -> Earliest {
        let Some(at) = self.at().and_then(|at| due(at, ticks)) else {
            return Earliest::NONE;
        };
        if !self.two || self.rest == 0 {
            return Earliest { at: at.0, ..self };
        }
        match due(Tick(self.next), ticks) {
            Some(next) => Earliest {
                at: at.0,
                next: next.0,
                ..self
            },
            // The later tick is beyond the clock's range: those deadlines are never due.
            None => Earliest {
                at: at.0,
                rest: 0,
                next: 0,
                ..self
            },
        }
    }

    /// `other`'s deadlines were added.
    fn add_many(&mut self, other: Earliest) {
        if other.count == 0 {
            return;
        }
        self.add_at(other.at, other.count);
        if other.rest == 0 {
            return;
        }
        if other.two {
            self.add_at(other.next, other.rest);
        } else {
            // At ticks not known (each after `other.at`, so after the earliest).
            self.two = false;
            self.rest = self.rest.wrapping_add(other.rest);
        }
    }

    /// A deadline went (it was met, or nobody waits on it any more).
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub(super) fn remove(&mut self, at: Option<Tick>) {
        let Some(Tick(at)) = at else { return };
        if at == self.at {
            self.count = self.count.wrapping_sub(1);
            if self.count == 0 {
                self.next_in_place();
            }
        } else {
            self.rest = self.rest.wrapping_sub(1);
        }
    }

    /// The last deadline at the earliest tick went: none left, or the rest, if they all
    /// fall at one tick, are the earliest now; if not, the earliest is found again.
    #[cold]
    fn next_in_place(&mut self) {
        if self.rest == 0 {
            // Nothing left to wait on: no search.
            *self = Earliest {
                stale: self.stale,
                ..Earliest::NONE
            };
        } else if !self.two {
            self.stale = true;
        } else {
            self.at = self.next;
            self.count = self.rest;
            self.rest = 0;
            self.next = 0;
        }
    }

    /// A slot's deadlines changed from `before` to `after` (ignored while stale: the end
    /// of the input finds the earliest again anyway).
    #[inline]
    pub(super) fn follow(&mut self, before: SlotDeadlines, after: SlotDeadlines) {
        if self.stale {
            return;
        }
        for (old, new) in before.into_iter().zip(after) {
            if old != new {
                self.remove(old);
                self.add(new);
            }
        }
    }

    /// Something changed that is not followed one by one (a phase, several slots).
    #[inline]
    pub(super) fn invalidate(&mut self) {
        self.stale = true;
    }
}
impl<const C: usize, const P: usize> Device<C, P> {
    /// The next time this device needs an [`Input::Timeout`], if it waits on a deadline
    /// the clock can reach. O(1): the value kept by the inputs.
    #[inline]
    pub(crate) fn next_deadline(&self) -> Option<Tick> {
        self.earliest.at()
    }

    /// The phase's own deadline: a stop's, a power-down's or a reset's wait for hardware
    /// operations in flight, or removal's detach deadline, while something waits on it.
    fn phase_deadline(&self, config: &Config) -> Option<Tick> {
        let unfenced = || self.registry.occupied_slots().any(unfenced_ops);
        match self.phase {
            Phase::Quiescing {
                draining: Some(from),
                ..
            }
            | Phase::Stopping { since: from, .. }
            | Phase::PoweringDown {
                since: from,
                commanded: false,
                ..
            } if unfenced() => due(from, config.operation_timeout),
            Phase::Removing { deadline, .. }
                if unfenced()
                    || self
                        .registry
                        .occupied_slots()
                        .any(|s| s.state == ClientState::Removed) =>
            {
                deadline
            }
            _ => None,
        }
    }

    /// Whether the phase waits on hardware operations or detaches, so that a change to a
    /// client's operations, fence or state may move the phase's deadline.
    #[inline]
    pub(super) fn phase_waits(&self) -> bool {
        self.phase.waits()
    }

    /// The deadlines slot `index` contributes now.
    pub(super) fn deadlines_of(&self, config: &Config, index: usize) -> SlotDeadlines {
        self.registry
            .slot(index)
            .map_or([None, None], |slot| slot_deadlines(config, slot))
    }

    /// Slot `index` changed from contributing `before`: follow the difference; a change
    /// that may move the phase's deadline marks it stale.
    pub(super) fn slot_changed(&mut self, config: &Config, index: usize, before: SlotDeadlines) {
        let after = self.deadlines_of(config, index);
        self.earliest.follow(before, after);
        self.operations_changed();
    }

    /// A client's operations, fence or state changed: the phase's deadline may move.
    #[inline]
    pub(super) fn operations_changed(&mut self) {
        if self.phase_waits() {
            self.earliest.invalidate();
        }
    }

    /// End of an input: find the earliest deadline again if a change was not followed one
    /// by one. Visits the occupied slots only.
    #[inline]
    pub(super) fn refresh_deadline(&mut self, config: &Config) {
        if self.earliest.stale {
            self.find_deadline(config);
        }
    }

    /// The same deadlines as `slot_deadlines` over every slot, plus the phase's. Deadlines
    /// of one kind share their timeout, so the earliest start of each kind (and how many
    /// began then) is found first and the timeouts are added once.
    #[inline(never)]
    fn find_deadline(&mut self, config: &Config) {
        if self.registry.occupied().is_empty() && !self.phase_waits() {
            self.earliest = Earliest::NONE;
            return;
        }
        let mut callbacks = Earliest::NONE;
        let mut trusted = Earliest::NONE;
        let mut untrusted = Earliest::NONE;
        let mut closes = Earliest::NONE;
        for slot in self.registry.occupied_slots() {
            if !slot.fence_requested() {
                callbacks.add(slot.callback());
                if let Gate::Closing { since } = slot.gate {
                    closes.add(Some(since));
                }
            }
            if slot.is_voting() {
                match slot.kind {
                    ClientKind::Trusted => trusted.add(slot.reset_delivered),
                    ClientKind::Untrusted => untrusted.add(slot.reset_delivered),
                }
            }
        }
        let mut earliest = Earliest::NONE;
        if !planted!(NoCallbackDeadline) {
            earliest.add_many(callbacks.later(config.callback_timeout));
        }
        earliest.add_many(trusted.later(ack_timeout(config, ClientKind::Trusted)));
        earliest.add_many(untrusted.later(ack_timeout(config, ClientKind::Untrusted)));
        earliest.add_many(closes.later(config.operation_timeout));
        earliest.add(self.phase_deadline(config));
        self.earliest = earliest;
    }

    /// Act on every deadline that `cx.now` has reached, from the same formulas as the
    /// kept earliest deadline.
    pub(crate) fn on_timeout<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        let now = cx.now;
        if !reached(now, self.earliest.at()) {
            return; // I13: nothing is due before its deadline
        }
        self.earliest.invalidate();
        let config = cx.config;
        // I13: a callback past its deadline gets its client revoked and fenced; under
        // `FailDevice` a trusted active client's overrun escalates.
        let mut escalate = false;
        for index in self.registry.occupied() {
            let Some(slot) = self.registry.slot(index) else {
                continue;
            };
            if reached(now, callback_deadline(config, slot)) {
                escalate |= slot.kind == ClientKind::Trusted
                    && slot.is_active()
                    && config.trusted_policy == TrustedTimeoutPolicy::FailDevice;
                self.revoke(cx, index, true);
            }
        }
        // I9, I15: a gate close unanswered in time revokes and fences its client.
        self.fence_overrunning_closes(cx);
        if reached(now, self.phase_deadline(config)) {
            if let Phase::Removing { .. } = self.phase {
                // I9: `Removed` was their last event: they are fenced without another;
                // whatever is still in flight is fenced before the teardown (I12).
                for index in self.registry.occupied() {
                    if self
                        .registry
                        .slot(index)
                        .is_some_and(|s| s.state == ClientState::Removed || unfenced_ops(s))
                    {
                        self.revoke(cx, index, false);
                    }
                }
            } else {
                // I12: operations that outlast a stop's, power-down's or reset's wait are
                // revoked and fenced.
                self.fence_operations(cx);
            }
        }
        if let Phase::Quiescing { .. } = self.phase {
            // I13: a voter that does not answer RESET in time (counted from its delivery)
            // is revoked, or escalates under `FailDevice`.
            for index in self.registry.occupied() {
                let Some(slot) = self.registry.slot(index) else {
                    continue;
                };
                if !reached(now, voter_deadline(config, slot)) {
                    continue;
                }
                match (slot.kind, config.trusted_policy) {
                    (ClientKind::Trusted, TrustedTimeoutPolicy::FailDevice) => escalate = true,
                    _ => self.revoke(cx, index, true),
                }
            }
        }
        if escalate && matches!(self.phase, Phase::Running | Phase::Quiescing { .. }) {
            self.fail_on_timeout(cx);
        }
        self.progress(cx);
        self.open_gates_when_settled(cx);
        self.refresh_deadline(config);
    }

    /// Revoke and fence every client with a hardware operation in flight that is not
    /// fenced yet: the stop, power-down or reset waited long enough (I12).
    fn fence_operations<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        for index in self.registry.occupied() {
            if self.registry.slot(index).is_some_and(unfenced_ops) {
                self.revoke(cx, index, true);
            }
        }
    }

    /// A trusted client missed a deadline under [`TrustedTimeoutPolicy::FailDevice`].
    fn fail_on_timeout<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        if matches!(self.phase, Phase::Quiescing { .. }) {
            cx.cycle_finished(CycleOutcome::ClientTimedOut);
        }
        self.set_roles(Role::Idle, false);
        self.fail(cx, Resources::Held, FailureCause::ClientMissedDeadline);
        self.notify_active(cx, Event::DeviceFatal);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    /// A reset cycle's deadlines: every callback due at one tick, every answer at a later
    /// one. When the last callback is returned the answers' tick is the earliest at once,
    /// with no search (a search a cycle was a twentieth of its cost at 16 clients).
    #[test]
    fn the_next_tick_takes_over_without_a_search() {
        let mut e = Earliest::NONE;
        e.add_n(Some(Tick(5_000)), 3);
        e.add_n(Some(Tick(10_000)), 3);
        for _ in 0..3 {
            e.remove(Some(Tick(5_000)));
        }
        assert!(!e.stale, "{e:?}");
        assert_eq!(e.at(), Some(Tick(10_000)));
        for _ in 0..3 {
            e.remove(Some(Tick(10_000)));
        }
        assert_eq!(e, Earliest::NONE);
    }

    /// Against the deadlines themselves: whatever is added and removed in whatever order,
    /// the kept earliest is the true one unless it says it must be found again; built from
    /// parts (`later`, `add_many`, as the search builds it) it is the true one too.
    #[test]
    fn the_kept_earliest_is_the_true_one_unless_stale() {
        let mut seed = 0x2545_f491_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for _ in 0..300 {
            let mut e = Earliest::NONE;
            let mut all: Vec<u64> = Vec::new();
            for _ in 0..60 {
                let r = next();
                if r % 3 != 0 || all.is_empty() {
                    let at = u64::from(r % 5) * 10;
                    let n = 1 + (r >> 8) % 3;
                    e.add_n(Some(Tick(at)), n as u16);
                    all.extend((0..n).map(|_| at));
                } else {
                    let at = all.swap_remove((r >> 8) as usize % all.len());
                    e.remove(Some(Tick(at)));
                }
                if e.stale {
                    // What the search would find: rebuilt from the deadlines.
                    e = Earliest::NONE;
                    for &at in &all {
                        e.add(Some(Tick(at)));
                    }
                }
                assert_eq!(e.at(), all.iter().min().map(|&t| Tick(t)), "{e:?} {all:?}");
                assert_eq!(usize::from(e.total()), all.len());
                // Parts shifted and merged give the same earliest.
                let (odd, even): (Vec<u64>, Vec<u64>) = all.iter().partition(|&&t| t % 20 != 0);
                let part = |ts: &[u64]| {
                    let mut p = Earliest::NONE;
                    for &t in ts {
                        p.add(Some(Tick(t)));
                    }
                    p.later(7)
                };
                let mut merged = Earliest::NONE;
                merged.add_many(part(&odd));
                merged.add_many(part(&even));
                assert_eq!(merged.at(), all.iter().min().map(|&t| Tick(t + 7)));
                assert_eq!(usize::from(merged.total()), all.len());
                // Removing every deadline of the merged one in order of tick never
                // leaves a wrong earliest.
                let mut sorted: Vec<u64> = all.iter().map(|t| t + 7).collect();
                sorted.sort_unstable();
                for (i, &t) in sorted.iter().enumerate() {
                    merged.remove(Some(Tick(t)));
                    if merged.stale {
                        break;
                    }
                    assert_eq!(merged.at(), sorted.get(i + 1).map(|&t| Tick(t)));
                }
            }
        }
    }
}
