//! A client's mailbox: the events it has not been called with yet.
//!
//! A client has at most one callback in flight. Events that arrive meanwhile wait here, and
//! the mailbox is bounded by construction, whatever the client does:
//!
//! * `Removed` and `Revoked` are last events: either replaces everything waiting.
//! * A link change is remembered as "this port changed" (one bit a port); the client is
//!   told the port's state as it is when the callback is made, so a newer link state
//!   replaces an older one.
//! * Device news (`DeviceStarted`, `DeviceStopped`, `Suspending`, `Resumed`,
//!   `DeviceFatal`) replaces older device news: the client learns where the device is now
//!   (a `Resumed` that replaces a waiting `Suspending` says the device is back at its
//!   epoch; the client re-acquires if that differs from its interface's). `DeviceFatal` also drops waiting
//!   link changes: after it only `Removed` or `Revoked` follow.
//! * `RESET` and `RESET_END` (or `Recovered`) queue in order. A client cannot answer a `RESET` it has not
//!   been called with ([`crate::Error::ResetNotDelivered`]), so a second cycle cannot end
//!   with a reset while its `RESET` waits here; a cycle that ends without one meanwhile (a
//!   reset group's, ended by another member; a nack) withdraws the waiting `RESET` instead
//!   of queueing `Recovered`: at most `RESET_END`, `RESET` and one device news wait, three
//!   entries ([`EVENTS`]), plus the link bits.

use crate::types::{Event, PhysPort, PortSet};

/// Ordered events a mailbox holds besides link changes and the last event (see the
/// module documentation for why three suffice).
pub(crate) const EVENTS: usize = 3;

/// The events waiting for one client.
///
/// The ordered events sit at the front of a fixed array, oldest first, every entry after
/// them `None`: a value equal mailboxes share, whatever they held before.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Mailbox {
    events: [Option<Event>; EVENTS],
    links: PortSet,
    last: Option<Event>,
    /// Nothing waits: kept with every change (a function of the fields above), so that the
    /// question every notification and every callback's return asks is one compare.
    empty: bool,
    /// Events that found no room. The argument above keeps this zero; the tests prove it.
    overflowed: u8,
}

impl Mailbox {
    pub(crate) const fn new() -> Self {
        Mailbox {
            events: [None; EVENTS],
            links: PortSet::EMPTY,
            last: None,
            empty: true,
            overflowed: 0,
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.empty
    }

    /// Record whether anything waits, after a change.
    fn settle(&mut self) {
        self.empty = self.events[0].is_none() && self.links.is_empty() && self.last.is_none();
    }

    pub(crate) fn len(&self) -> usize {
        self.events.iter().filter(|e| e.is_some()).count()
            + self.links.len() as usize
            + usize::from(self.last.is_some())
    }

    pub(crate) const fn overflowed(&self) -> u8 {
        self.overflowed
    }

    /// Whether a `RESET` waits here (the client has not been called with it yet).
    #[inline]
    pub(crate) fn holds_reset(&self) -> bool {
        self.events[0].is_some() && self.events.contains(&Some(Event::Reset))
    }

    /// Forget everything waiting (the client unregistered or was fenced).
    pub(crate) fn clear(&mut self) {
        self.events = [None; EVENTS];
        self.links = PortSet::EMPTY;
        self.last = None;
        self.empty = true;
    }

    /// Keep `event` for later, coalescing as the module documentation says.
    pub(crate) fn put(&mut self, event: Event) {
        self.put_event(event);
        self.settle();
    }

    fn put_event(&mut self, event: Event) {
        if self.last.is_some() {
            return; // nothing follows a last event
        }
        match event {
            Event::Removed { .. } | Event::Revoked => {
                self.clear();
                self.last = Some(event);
            }
            Event::LinkChanged { port, .. } => self.links = self.links.with(port),
            Event::DeviceStarted { .. }
            | Event::DeviceStopped
            | Event::Suspending { .. }
            | Event::Resumed { .. } => {
                self.drop_device_news();
                self.push(event);
            }
            // After `DeviceFatal` only a last event follows: waiting link news goes.
            Event::DeviceFatal => {
                self.drop_device_news();
                self.links = PortSet::EMPTY;
                self.push(event);
            }
            Event::Recovered { .. } if self.holds_reset() => self.withdraw_reset(),
            Event::Reset | Event::ResetEnd { .. } | Event::Recovered { .. } => self.push(event),
        }
    }

    /// A cycle ended without a reset before its `RESET` reached the client (a reset group's
    /// cycle ended by another member, a nack): the waiting `RESET` is withdrawn and the
    /// client never hears of that cycle (it was told nothing, so it is owed nothing, I4).
    /// This keeps the bound above: a cycle can end while its `RESET` waits here only so.
    fn withdraw_reset(&mut self) {
        let mut kept = [None; EVENTS];
        let mut free = kept.iter_mut();
        let last_reset = self.events.iter().rposition(|e| *e == Some(Event::Reset));
        for (i, event) in self.events.into_iter().enumerate() {
            if Some(i) == last_reset {
                continue;
            }
            if let (Some(event), Some(entry)) = (event, free.next()) {
                *entry = Some(event);
            }
        }
        self.events = kept;
    }

    /// Remove waiting device news, keeping the order of the rest.
    fn drop_device_news(&mut self) {
        let mut kept = [None; EVENTS];
        let mut free = kept.iter_mut();
        for event in self.events.into_iter().flatten() {
            if !is_device_news(&event) {
                if let Some(entry) = free.next() {
                    *entry = Some(event);
                }
            }
        }
        self.events = kept;
    }

    fn push(&mut self, event: Event) {
        match self.events.iter_mut().find(|e| e.is_none()) {
            Some(entry) => *entry = Some(event),
            None => self.overflowed = self.overflowed.saturating_add(1),
        }
    }

    /// The next event to call the client with: ordered events first, then link changes
    /// (lowest port first, `link_of` giving its state now), then the last event.
    #[inline]
    pub(crate) fn take(&mut self, link_of: impl Fn(PhysPort) -> Option<Event>) -> Option<Event> {
        let event = self.take_event(link_of);
        self.settle();
        event
    }

    #[inline]
    fn take_event(&mut self, link_of: impl Fn(PhysPort) -> Option<Event>) -> Option<Event> {
        let [first, second, third] = &mut self.events;
        if let Some(event) = first.take() {
            *first = second.take();
            *second = third.take();
            return Some(event);
        }
        if self.links.is_empty() {
            return self.last.take();
        }
        self.take_link(link_of)
    }

    fn take_link(&mut self, link_of: impl Fn(PhysPort) -> Option<Event>) -> Option<Event> {
        while let Some(port) = self.links.iter().next() {
            self.links = PortSet(self.links.0 & !PortSet::single(port).0);
            if let Some(event) = link_of(port) {
                return Some(event);
            }
        }
        self.last.take()
    }
}

const fn is_device_news(event: &Event) -> bool {
    matches!(
        event,
        Event::DeviceStarted { .. }
            | Event::DeviceStopped
            | Event::Suspending { .. }
            | Event::Resumed { .. }
            | Event::DeviceFatal
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::types::{Epoch, LinkState};

    fn drain(m: &mut Mailbox, state: LinkState) -> std::vec::Vec<Event> {
        core::iter::from_fn(|| m.take(|port| Some(Event::LinkChanged { port, state }))).collect()
    }

    extern crate std;

    /// `holds_reset` is about a waiting `RESET` only: other waiting news does not make an
    /// answer "not delivered" (`Error::ResetNotDelivered`).
    #[test]
    fn holds_reset_only_while_a_reset_waits() {
        let mut m = Mailbox::new();
        assert!(!m.holds_reset());
        m.put(Event::DeviceStopped);
        assert!(!m.holds_reset(), "device news is not a RESET");
        m.put(Event::Reset);
        assert!(m.holds_reset());
        assert_eq!(m.take(|_| None), Some(Event::DeviceStopped));
        assert!(m.holds_reset(), "still behind the news");
        assert_eq!(m.take(|_| None), Some(Event::Reset));
        assert!(!m.holds_reset());
        m.put(Event::Recovered { epoch: Epoch(0) });
        assert!(!m.holds_reset());
    }

    /// `is_empty` is kept with every change, not computed: after any sequence of puts,
    /// takes and clears it must say what the contents say.
    #[test]
    fn is_empty_follows_every_change() {
        let events = [
            Event::Reset,
            Event::ResetEnd { epoch: Epoch(1) },
            Event::Recovered { epoch: Epoch(1) },
            Event::DeviceStopped,
            Event::DeviceFatal,
            Event::LinkChanged {
                port: PhysPort(1),
                state: LinkState::Active,
            },
            Event::Removed { surprise: false },
            Event::Revoked,
        ];
        let mut m = Mailbox::new();
        let mut seed = 0x9e37_79b9_u32;
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            match seed % 11 {
                0..=5 => m.put(events[(seed / 11) as usize % events.len()]),
                6..=9 => {
                    let _ = m.take(|port| {
                        (!seed.is_multiple_of(3)).then_some(Event::LinkChanged {
                            port,
                            state: LinkState::Down,
                        })
                    });
                }
                _ => m.clear(),
            }
            #[allow(clippy::len_zero)] // the kept flag against the counted contents
            let counted_empty = m.len() == 0;
            assert_eq!(m.is_empty(), counted_empty, "{m:?}");
        }
    }

    #[test]
    fn a_flood_of_link_changes_leaves_one_entry_a_port_with_the_newest_state() {
        let mut m = Mailbox::new();
        for i in 0..1000u32 {
            let state = if i % 2 == 0 {
                LinkState::Active
            } else {
                LinkState::Down
            };
            m.put(Event::LinkChanged {
                port: PhysPort((i % 2) as u8),
                state,
            });
        }
        assert_eq!(m.len(), 2);
        let told = drain(&mut m, LinkState::Armed);
        assert_eq!(
            told,
            [
                Event::LinkChanged {
                    port: PhysPort(0),
                    state: LinkState::Armed
                },
                Event::LinkChanged {
                    port: PhysPort(1),
                    state: LinkState::Armed
                },
            ]
        );
    }

    #[test]
    fn removed_and_revoked_replace_everything_and_nothing_follows_them() {
        let mut m = Mailbox::new();
        m.put(Event::Reset);
        m.put(Event::LinkChanged {
            port: PhysPort(0),
            state: LinkState::Down,
        });
        m.put(Event::Removed { surprise: true });
        m.put(Event::Revoked);
        m.put(Event::DeviceFatal);
        assert_eq!(
            drain(&mut m, LinkState::Down),
            [Event::Removed { surprise: true }]
        );
    }

    #[test]
    fn device_news_replaces_older_news_and_resets_keep_their_order() {
        let mut m = Mailbox::new();
        m.put(Event::ResetEnd { epoch: Epoch(1) });
        m.put(Event::DeviceStopped);
        m.put(Event::DeviceStarted { epoch: Epoch(1) });
        m.put(Event::Reset);
        assert!(m.holds_reset());
        m.put(Event::DeviceFatal);
        assert_eq!(m.overflowed(), 0);
        assert_eq!(
            drain(&mut m, LinkState::Down),
            [
                Event::ResetEnd { epoch: Epoch(1) },
                Event::Reset,
                Event::DeviceFatal
            ]
        );
        assert!(!m.holds_reset());
    }

    /// A cycle that ends without a reset while its `RESET` still waits here (a reset
    /// group's cycle ended by another member) withdraws that `RESET`: the stuck client's
    /// mailbox stays within its bound however many such cycles pass.
    #[test]
    fn a_cycle_ended_before_its_reset_was_delivered_withdraws_the_reset() {
        let mut m = Mailbox::new();
        for epoch in 0..4 {
            m.put(Event::Reset);
            m.put(Event::Recovered { epoch: Epoch(0) });
            m.put(Event::DeviceStopped);
            m.put(Event::DeviceStarted {
                epoch: Epoch(epoch),
            });
        }
        m.put(Event::Reset);
        assert_eq!(m.overflowed(), 0);
        assert_eq!(
            drain(&mut m, LinkState::Down),
            [Event::DeviceStarted { epoch: Epoch(3) }, Event::Reset]
        );
    }

    #[test]
    fn an_event_beyond_the_bound_is_counted_not_lost_silently() {
        let mut m = Mailbox::new();
        for _ in 0..EVENTS + 1 {
            m.put(Event::Reset);
        }
        assert_eq!(m.overflowed(), 1);
        assert_eq!(m.len(), EVENTS);
    }
}
