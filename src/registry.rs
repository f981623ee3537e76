//! The fixed-capacity client registry of one device.

use crate::device::fast::Gate;
use crate::mailbox::Mailbox;
use crate::types::{ClientHandle, ClientKind, DeviceId, Error, Event, PhysPort, PortSet, Tick};

/// Hardware operations one client may have in flight; one more is refused with
/// [`Error::TooManyOperations`] (the client's own error, never a refusal of the OS).
pub(crate) const OPS_PER_CLIENT: u32 = 16;

value_type! {
    /// A client's part in the reset cycle.
    #[non_exhaustive]
    pub enum Role {
        /// No cycle, or the device is not running.
        Idle,
        /// Told `RESET`, has not answered: the hardware reset waits for it.
        Voting,
        /// Answered `RESET`.
        Acked,
        /// Registered during the cycle: not a voter, told `RESET_END` with the rest.
        Joined,
    }
}

value_type! {
    /// Where a registration stands.
    #[non_exhaustive]
    pub enum ClientState {
        /// No client.
        Free,
        /// Registered and live.
        Active {
            /// Its part in the reset cycle.
            role: Role,
            /// Whether its interface is of the current epoch.
            fresh: bool,
            /// Whether it holds the device (vetoes query remove).
            holding: bool,
            /// Whether it cannot pause its work (vetoes query stop).
            cannot_pause: bool,
        },
        /// Told `Removed`; may only detach.
        Removed,
        /// Fenced: every call fails; waits for unregister or device removal.
        Revoked,
        /// Unregistered; waits for its callback in flight to return (or be fenced), then the
        /// slot is free.
        Unregistered,
    }
}

/// What keeps a client from being told an event at once, one bit each, so that the
/// question a broadcast asks of every slot is one test ([`Slot::can_take_now`]).
mod busy {
    /// A callback to the client is in flight.
    pub(super) const CALLBACK: u8 = 1;
    /// Events wait in its mailbox.
    pub(super) const MAIL: u8 = 2;
    /// The owner was asked to fence it.
    pub(super) const FENCE: u8 = 4;
}

/// A slot's callback in flight (and when it was handed over), waiting events and fence
/// asked for (see `busy`). Equal when the bits are, and the callbacks' hand-over ticks
/// while one is in flight: a tick left from a returned callback means nothing.
#[derive(Debug, Clone, Copy)]
struct Busy {
    bits: u8,
    /// When the callback in flight was handed over, while `bits` has `CALLBACK`.
    called: Tick,
}

impl Busy {
    const IDLE: Busy = Busy {
        bits: 0,
        called: Tick(0),
    };

    const fn callback(&self) -> Option<Tick> {
        if self.bits & busy::CALLBACK != 0 {
            Some(self.called)
        } else {
            None
        }
    }
}

impl PartialEq for Busy {
    fn eq(&self, other: &Busy) -> bool {
        self.bits == other.bits && self.callback() == other.callback()
    }
}

impl Eq for Busy {}

impl core::hash::Hash for Busy {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.bits.hash(state);
        self.callback().hash(state);
    }
}

/// One registry slot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Slot {
    /// The generation of the current or next client of this slot.
    pub(crate) generation: u16,
    /// The registration's state.
    pub(crate) state: ClientState,
    /// Trusted or not (meaningless while free).
    pub(crate) kind: ClientKind,
    /// The ports the client bound.
    pub(crate) ports: PortSet,
    /// Its callback in flight, waiting events and fence asked for: changed only through
    /// the methods below, which keep the bits and the mailbox in step.
    busy: Busy,
    /// When this client's `RESET` of the running cycle was handed to the owner: its
    /// answer's deadline counts from here (I13), not from the cycle's start, since a
    /// `RESET` held behind the client's own callback cannot be answered before it arrives.
    /// `None` while the `RESET` waits in the mailbox.
    pub(crate) reset_delivered: Option<Tick>,
    /// Hardware operations granted and not reported done: at most [`OPS_PER_CLIENT`]
    /// granted by the machine, plus those a fast-path close carried over (a `u32`, as
    /// [`crate::Input::FastPathClosed`] reports them).
    pub(crate) ops: u32,
    /// The client's fast-path gate, as the machine told the owner (see `device::fast`).
    pub(crate) gate: Gate,
    /// Events not yet handed over (at most one callback is in flight); changed only
    /// through the methods below.
    mailbox: Mailbox,
}

impl Slot {
    pub(crate) const FREE: Slot = Slot {
        generation: 0,
        state: ClientState::Free,
        kind: ClientKind::Trusted,
        ports: PortSet::EMPTY,
        busy: Busy::IDLE,
        reset_delivered: None,
        ops: 0,
        gate: Gate::Shut,
        mailbox: Mailbox::new(),
    };

    /// A new client in `state` takes the slot, nothing in flight or waiting (written in
    /// place: a slot built apart and copied in costs a bare-metal build a `memcpy`).
    pub(crate) fn register(&mut self, state: ClientState, kind: ClientKind) {
        *self = Slot {
            generation: self.generation,
            state,
            kind,
            ..Slot::FREE
        };
    }

    /// When the one callback in flight to this client was handed to the owner.
    #[inline(always)]
    pub(crate) const fn callback(&self) -> Option<Tick> {
        self.busy.callback()
    }

    /// Whether the owner was asked to fence the client ([`crate::Output::Fence`]); only
    /// [`crate::Input::FenceDone`] ends the wait for what it has in flight.
    #[inline(always)]
    pub(crate) const fn fence_requested(&self) -> bool {
        self.busy.bits & busy::FENCE != 0
    }

    /// Whether events wait in the client's mailbox (read from the mailbox, so that a
    /// callback's return clears its bit with one write, not a read and a write).
    #[inline(always)]
    pub(crate) fn has_mail(&self) -> bool {
        !self.mailbox.is_empty()
    }

    /// The events not yet handed over.
    pub(crate) const fn mailbox(&self) -> &Mailbox {
        &self.mailbox
    }

    /// A callback is handed to the client at `now`.
    #[inline(always)]
    pub(crate) fn call(&mut self, now: Tick) {
        self.busy.bits |= busy::CALLBACK;
        self.busy.called = now;
    }

    /// The client's callback returned (or was fenced).
    #[inline(always)]
    pub(crate) fn callback_returned(&mut self) {
        self.busy.bits &= !busy::CALLBACK;
    }

    /// The owner is asked to fence the client.
    pub(crate) fn request_fence(&mut self) {
        self.busy.bits |= busy::FENCE;
    }

    /// The owner reported the fence done.
    pub(crate) fn fence_reported(&mut self) {
        self.busy.bits &= !busy::FENCE;
    }

    /// Keep `event` for later (see `crate::mailbox`).
    pub(crate) fn put(&mut self, event: Event) {
        self.mailbox.put(event);
        self.mail_changed();
    }

    /// Forget every waiting event.
    pub(crate) fn clear_mailbox(&mut self) {
        self.mailbox.clear();
        self.mail_changed();
    }

    /// The next waiting event to call the client with (see `Mailbox::take`).
    #[inline]
    pub(crate) fn take(&mut self, link_of: impl Fn(PhysPort) -> Option<Event>) -> Option<Event> {
        let event = self.mailbox.take(link_of);
        self.mail_changed();
        event
    }

    fn mail_changed(&mut self) {
        let mail = if self.mailbox.is_empty() {
            0
        } else {
            busy::MAIL
        };
        self.busy.bits = (self.busy.bits & !busy::MAIL) | mail;
    }

    /// Whether something of this client's is still in flight that removal must wait for:
    /// a callback, a hardware operation, or a fence the owner has not reported done.
    pub(crate) const fn in_flight(&self) -> bool {
        self.busy.bits & (busy::CALLBACK | busy::FENCE) != 0 || self.ops_pending()
    }

    /// Whether an event can be handed to this client at once: no callback in flight,
    /// nothing waiting before it, and no fence asked for (its callback then has a
    /// deadline: see `device::deadlines`). One test.
    #[inline(always)]
    pub(crate) fn can_take_now(&self) -> bool {
        self.busy.bits == 0
    }

    /// Whether hardware operations of this client may be in flight: granted ones, or an
    /// unknown count behind a fast-path gate whose close is not answered yet (I15).
    pub(crate) const fn ops_pending(&self) -> bool {
        self.ops > 0 || matches!(self.gate, Gate::Closing { .. })
    }

    /// Whether a client occupies the slot (any state but free).
    pub(crate) const fn occupied(&self) -> bool {
        !matches!(self.state, ClientState::Free)
    }

    pub(crate) const fn is_active(&self) -> bool {
        matches!(self.state, ClientState::Active { .. })
    }

    pub(crate) const fn role(&self) -> Option<Role> {
        match self.state {
            ClientState::Active { role, .. } => Some(role),
            _ => None,
        }
    }

    pub(crate) const fn is_voting(&self) -> bool {
        matches!(self.role(), Some(Role::Voting))
    }

    /// The handle of this slot's client, slot `index` of `device`.
    #[inline(always)]
    pub(crate) fn handle(&self, device: DeviceId, index: usize) -> ClientHandle {
        ClientHandle {
            device,
            slot: u8::try_from(index).unwrap_or(u8::MAX),
            generation: self.generation,
        }
    }

    /// Free the slot for a later client: the generation moves on, so old handles go stale.
    /// A slot whose generation is exhausted stays retired (never reissued).
    pub(crate) fn free(&mut self) {
        let generation = self.generation.saturating_add(1);
        *self = Slot {
            generation,
            ..Slot::FREE
        };
    }
}

/// How a handle relates to its slot.
pub(crate) enum Lookup {
    /// The handle names the slot's current client.
    Current(usize),
    /// The handle names a client of this slot that is gone for good.
    Past,
}

/// The registry of one device.
///
/// `end` is one past the highest occupied slot (zero with none), so that every loop over
/// clients stops after the last registered one instead of walking the capacity (new
/// clients take the lowest free slot, so `end` follows what is registered). It is a
/// function of the slots: equal registries have equal `end`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Registry<const C: usize> {
    pub(crate) slots: [Slot; C],
    end: u16,
    /// How many slots have hardware operations pending ([`Slot::ops_pending`]): kept with
    /// every change to a slot's operations or gate (`ops_changed`), so that the question
    /// every reset, stop and power-down asks is one compare, not a scan. A function of
    /// the slots, as `end` is.
    ops_slots: u16,
}

impl<const C: usize> Registry<C> {
    pub(crate) const fn new() -> Self {
        Registry {
            slots: [const { Slot::FREE }; C],
            end: 0,
            ops_slots: 0,
        }
    }

    /// The indices that may hold a client: every occupied slot is below the end.
    #[inline]
    pub(crate) fn occupied(&self) -> core::ops::Range<usize> {
        0..usize::from(self.end).min(C)
    }

    /// The slots that may hold a client (see [`Self::occupied`]).
    #[inline]
    pub(crate) fn occupied_slots(&self) -> core::slice::Iter<'_, Slot> {
        self.slots.get(self.occupied()).unwrap_or(&[]).iter()
    }

    /// Record that slot `index` became occupied (`true`) or free (`false`).
    #[inline]
    pub(crate) fn mark(&mut self, index: usize, occupied: bool) {
        let end = usize::from(self.end);
        if occupied {
            if index >= end {
                self.end = u16::try_from(index + 1).unwrap_or(u16::MAX);
            }
        } else if index + 1 == end {
            let mut end = index;
            while end > 0 && self.slots.get(end - 1).is_some_and(|s| !s.occupied()) {
                end -= 1;
            }
            self.end = u16::try_from(end).unwrap_or(u16::MAX);
        }
    }

    /// Resolve a handle. Unknown: out of range, a generation never issued, or a free slot.
    pub(crate) fn lookup(&self, handle: ClientHandle) -> Result<Lookup, Error> {
        let index = usize::from(handle.slot);
        let slot = self.slots.get(index).ok_or(Error::UnknownClient)?;
        if handle.generation < slot.generation {
            return Ok(Lookup::Past);
        }
        if handle.generation > slot.generation || !slot.occupied() {
            return Err(Error::UnknownClient);
        }
        Ok(Lookup::Current(index))
    }

    /// The index of the handle's current, occupied slot.
    #[inline]
    pub(crate) fn current(&self, handle: ClientHandle) -> Result<usize, Error> {
        match self.lookup(handle)? {
            Lookup::Current(index) => Ok(index),
            Lookup::Past => Err(Error::UnknownClient),
        }
    }

    /// The index of the handle's slot if the client is active, else the typed reason (the
    /// errors of `current`, then revoked or detaching). One slot read: every client input
    /// passes here.
    #[inline(always)]
    pub(crate) fn active(&self, handle: ClientHandle) -> Result<usize, Error> {
        let index = usize::from(handle.slot);
        let slot = self.slots.get(index).ok_or(Error::UnknownClient)?;
        // The usual case in one test; the reason for a refusal is found out of line.
        if handle.generation == slot.generation && slot.is_active() {
            return Ok(index);
        }
        Err(not_active(handle, slot))
    }

    /// As [`Self::current`], with the client's slot.
    #[inline(always)]
    pub(crate) fn current_mut(
        &mut self,
        handle: ClientHandle,
    ) -> Result<(usize, &mut Slot), Error> {
        let index = usize::from(handle.slot);
        match self.slots.get_mut(index) {
            Some(slot) if slot.generation == handle.generation && slot.occupied() => {
                Ok((index, slot))
            }
            _ => Err(Error::UnknownClient),
        }
    }

    /// As [`Self::active`], with the client's slot: one lookup for an input that goes on
    /// to change it.
    #[inline(always)]
    pub(crate) fn active_mut(&mut self, handle: ClientHandle) -> Result<(usize, &mut Slot), Error> {
        let index = usize::from(handle.slot);
        let slot = self.slots.get_mut(index).ok_or(Error::UnknownClient)?;
        if handle.generation == slot.generation && slot.is_active() {
            return Ok((index, slot));
        }
        Err(not_active(handle, slot))
    }

    pub(crate) fn slot(&self, index: usize) -> Option<&Slot> {
        self.slots.get(index)
    }

    pub(crate) fn slot_mut(&mut self, index: usize) -> Option<&mut Slot> {
        self.slots.get_mut(index)
    }

    /// The first slot a new client can take.
    pub(crate) fn free_slot(&self) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| !s.occupied() && s.generation < u16::MAX)
    }

    pub(crate) fn handle(device: DeviceId, index: usize, slot: &Slot) -> ClientHandle {
        slot.handle(device, index)
    }

    pub(crate) fn any_holding(&self) -> bool {
        self.occupied_slots()
            .any(|s| matches!(s.state, ClientState::Active { holding: true, .. }))
    }

    pub(crate) fn any_cannot_pause(&self) -> bool {
        self.occupied_slots().any(|s| {
            matches!(
                s.state,
                ClientState::Active {
                    cannot_pause: true,
                    ..
                }
            )
        })
    }

    /// Whether any hardware operation is in flight (a fenced one counts until the fence
    /// is reported done: the hardware is touched only after that).
    #[inline]
    pub(crate) fn ops_in_flight(&self) -> bool {
        self.ops_slots != 0
    }

    /// Slot `index`'s operations or gate changed; `was` is whether it had operations
    /// pending before ([`Slot::ops_pending`]).
    #[inline]
    pub(crate) fn ops_changed(&mut self, index: usize, was: bool) {
        let pending = self.slots.get(index).is_some_and(Slot::ops_pending);
        match (was, pending) {
            (false, true) => self.ops_slots = self.ops_slots.saturating_add(1),
            (true, false) => self.ops_slots = self.ops_slots.saturating_sub(1),
            _ => {}
        }
    }

    /// Whether every client has detached: only free and revoked slots, nothing in flight.
    pub(crate) fn drained(&self) -> bool {
        self.occupied_slots()
            .all(|s| !s.in_flight() && matches!(s.state, ClientState::Free | ClientState::Revoked))
    }
}

/// Why `handle` does not name an active client of `slot` (see [`Registry::active`]).
#[cold]
#[inline(never)]
fn not_active(handle: ClientHandle, slot: &Slot) -> Error {
    if handle.generation != slot.generation {
        return Error::UnknownClient;
    }
    match slot.state {
        ClientState::Revoked => Error::ClientRevoked,
        ClientState::Free => Error::UnknownClient,
        _ => Error::ClientDetaching,
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn occupy(r: &mut Registry<4>, index: usize) {
        r.slots[index].state = ClientState::Removed;
        r.mark(index, true);
    }

    fn free(r: &mut Registry<4>, index: usize) {
        r.slots[index].free();
        r.mark(index, false);
    }

    /// Every loop over clients stops at `end`: it must stay one past the highest occupied
    /// slot as slots fill and free in any order (too low would skip a client, too high
    /// scans idle slots: the 64-slot figure of the performance issue).
    #[test]
    fn the_end_is_one_past_the_highest_occupied_slot() {
        let mut r = Registry::<4>::new();
        assert_eq!(r.occupied(), 0..0);
        for index in 0..3 {
            occupy(&mut r, index);
        }
        assert_eq!(r.occupied(), 0..3);
        free(&mut r, 1);
        assert_eq!(r.occupied(), 0..3, "a hole below the end keeps it");
        free(&mut r, 2);
        assert_eq!(
            r.occupied(),
            0..1,
            "freeing the last slot skips the hole too"
        );
        free(&mut r, 0);
        assert_eq!(r.occupied(), 0..0);
        occupy(&mut r, 3);
        assert_eq!(r.occupied(), 0..4);
        assert_eq!(r.occupied_slots().filter(|s| s.occupied()).count(), 1);
    }

    /// `can_take_now` is one test of bits kept by every change to the callback, the
    /// mailbox and the fence: after any sequence of those changes it must say what the
    /// callback, the mailbox's contents and the fence say, each followed here apart.
    #[test]
    fn the_busy_bits_follow_every_change() {
        let events = [
            Event::Reset,
            Event::DeviceStopped,
            Event::Revoked,
            Event::LinkChanged {
                port: PhysPort(0),
                state: crate::types::LinkState::Active,
            },
        ];
        let mut slot = Slot::FREE;
        let (mut callback, mut fence) = (None, false);
        let mut seed = 0x2545_f491_u32;
        for step in 0..5_000u64 {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            match seed % 7 {
                0 => {
                    slot.call(Tick(step));
                    callback = Some(Tick(step));
                }
                1 => {
                    slot.callback_returned();
                    callback = None;
                }
                2 => {
                    slot.request_fence();
                    fence = true;
                }
                3 => {
                    slot.fence_reported();
                    fence = false;
                }
                4 => slot.clear_mailbox(),
                5 => {
                    let _ = slot.take(|port| {
                        Some(Event::LinkChanged {
                            port,
                            state: crate::types::LinkState::Down,
                        })
                    });
                }
                _ => slot.put(events[(seed >> 8) as usize % events.len()]),
            }
            let empty = slot.mailbox().is_empty();
            assert_eq!(slot.callback(), callback, "step {step}");
            assert_eq!(slot.fence_requested(), fence, "step {step}");
            assert_eq!(slot.has_mail(), !empty, "step {step}");
            assert_eq!(
                slot.can_take_now(),
                callback.is_none() && empty && !fence,
                "step {step}"
            );
            assert_eq!(slot.in_flight(), callback.is_some() || fence, "step {step}");
        }
    }

    /// A returned callback's tick means nothing: slots that differ only in it are equal
    /// and hash alike (the explorer counts states by equality); callbacks in flight since
    /// different ticks are not equal.
    #[test]
    fn a_returned_callbacks_tick_is_no_part_of_the_state() {
        extern crate std;
        use core::hash::{Hash, Hasher};
        use std::collections::hash_map::DefaultHasher;
        let hash = |s: &Slot| {
            let mut h = DefaultHasher::new();
            s.hash(&mut h);
            h.finish()
        };
        let mut returned = Slot::FREE;
        returned.call(Tick(5));
        returned.callback_returned();
        assert_eq!(returned, Slot::FREE);
        assert_eq!(hash(&returned), hash(&Slot::FREE));
        let (mut a, mut b) = (Slot::FREE, Slot::FREE);
        a.call(Tick(5));
        b.call(Tick(6));
        assert_ne!(a, b);
        b.call(Tick(5));
        assert_eq!(a, b);
    }
}
