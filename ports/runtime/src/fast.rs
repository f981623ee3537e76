//! The fast path's gate (DESIGN r3, "Operations: the fast path"): one per client, so a
//! client's hardware operation begins and ends with a couple of atomic operations on a
//! cache line no other client touches, no lock and no system call.
//!
//! The machine stays the decider: the owner opens a client's gate only when the machine
//! says so (for that client and epoch), and closes it when the machine asks, before any
//! drain. Closing hands the machine the count of operations still in flight, and those
//! operations end through the machine (`AccessDone`), as on the slow path. A gate that
//! is shut, or open for another client of the slot or another epoch, grants nothing: the
//! caller then asks the machine, which grants or refuses by name.
//!
//! The word: bit 63 open, bits 32..63 the open's generation (one more at every open, so
//! an operation that began under an earlier open is known to have been carried), bits
//! 0..32 the operations in flight. The key (client generation, epoch) is written while
//! the gate is shut, before the open that publishes it.

use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use pnp_lifecycle::Epoch;

const OPEN: u64 = 1 << 63;
const COUNT: u64 = 0xffff_ffff;
const GENERATION_SHIFT: u32 = 32;
const GENERATION: u64 = 0x7fff_ffff << GENERATION_SHIFT;

/// The atomic word a gate is made of: `core`'s, or shuttle's for concurrency tests.
pub trait AtomicWord: Send + Sync {
    /// A word holding `value`.
    fn with_value(value: u64) -> Self;
    /// `load`.
    fn load(&self, order: core::sync::atomic::Ordering) -> u64;
    /// `store`.
    fn store(&self, value: u64, order: core::sync::atomic::Ordering);
    /// `compare_exchange_weak`.
    fn compare_exchange_weak(
        &self,
        current: u64,
        new: u64,
        success: core::sync::atomic::Ordering,
        failure: core::sync::atomic::Ordering,
    ) -> Result<u64, u64>;
    /// `compare_exchange`.
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: core::sync::atomic::Ordering,
        failure: core::sync::atomic::Ordering,
    ) -> Result<u64, u64>;
    /// `fetch_and`.
    fn fetch_and(&self, value: u64, order: core::sync::atomic::Ordering) -> u64;
    /// `load` by the owner, under its lock (opening, closing, counting): the same as
    /// [`Self::load`] but for a test word that makes only the hot path's operations
    /// scheduling points (a port may hold a lock of its own, not the scheduler's, around
    /// the owner's, as the Linux port's lock is).
    fn owner_load(&self, order: core::sync::atomic::Ordering) -> u64 {
        self.load(order)
    }
    /// `store` by the owner (see [`Self::owner_load`]).
    fn owner_store(&self, value: u64, order: core::sync::atomic::Ordering) {
        self.store(value, order)
    }
    /// `fetch_and` by the owner (see [`Self::owner_load`]).
    fn owner_fetch_and(&self, value: u64, order: core::sync::atomic::Ordering) -> u64 {
        self.fetch_and(value, order)
    }
}

macro_rules! atomic_word {
    ($t:ty) => {
        impl AtomicWord for $t {
            fn with_value(value: u64) -> Self {
                <$t>::new(value)
            }
            #[inline]
            fn load(&self, order: core::sync::atomic::Ordering) -> u64 {
                <$t>::load(self, order)
            }
            #[inline]
            fn store(&self, value: u64, order: core::sync::atomic::Ordering) {
                <$t>::store(self, value, order)
            }
            #[inline]
            fn compare_exchange_weak(
                &self,
                current: u64,
                new: u64,
                success: core::sync::atomic::Ordering,
                failure: core::sync::atomic::Ordering,
            ) -> Result<u64, u64> {
                <$t>::compare_exchange_weak(self, current, new, success, failure)
            }
            #[inline]
            fn compare_exchange(
                &self,
                current: u64,
                new: u64,
                success: core::sync::atomic::Ordering,
                failure: core::sync::atomic::Ordering,
            ) -> Result<u64, u64> {
                <$t>::compare_exchange(self, current, new, success, failure)
            }
            #[inline]
            fn fetch_and(&self, value: u64, order: core::sync::atomic::Ordering) -> u64 {
                <$t>::fetch_and(self, value, order)
            }
        }
    };
}
atomic_word!(core::sync::atomic::AtomicU64);
#[cfg(feature = "shuttle")]
atomic_word!(shuttle::sync::atomic::AtomicU64);

/// One client's fast-path gate, on a cache line of its own.
#[repr(align(64))]
pub struct Gate<A: AtomicWord = core::sync::atomic::AtomicU64> {
    word: A,
    key: A,
    /// A planted fault (tests only: `--cfg pnp_faults`).
    #[cfg(pnp_faults)]
    fault: core::sync::atomic::AtomicBool,
}

/// The owner's side of a gate, whatever its atomic word: opened and closed under the
/// owner lock when the machine says so.
pub trait GateControl: Send + Sync {
    /// See [`Gate::open`].
    fn open(&self, client_generation: u16, epoch: Epoch) -> u32;
    /// See [`Gate::close`].
    fn close(&self) -> u32;
    /// See [`Gate::in_flight`].
    fn in_flight(&self) -> u32;
    /// See [`Gate::is_open`].
    fn is_open(&self) -> bool;
}

impl<A: AtomicWord> GateControl for Gate<A> {
    fn open(&self, client_generation: u16, epoch: Epoch) -> u32 {
        Gate::open(self, client_generation, epoch)
    }
    fn close(&self) -> u32 {
        Gate::close(self)
    }
    fn in_flight(&self) -> u32 {
        Gate::in_flight(self)
    }
    fn is_open(&self) -> bool {
        Gate::is_open(self)
    }
}

/// An operation granted by a [`Gate`]; hand it back to [`Gate::end`]. It holds the high
/// half of the gate's word when it began (the open bit and the open's generation), so
/// that ending compares one number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "an operation granted on the fast path must be ended"]
pub struct Ticket(core::num::NonZeroU32);

impl Ticket {
    /// The ticket of an operation counted in `word` (open: its high half is not zero).
    #[inline(always)]
    fn of(word: u64) -> Option<Ticket> {
        core::num::NonZeroU32::new(high(word)).map(Ticket)
    }
}

/// The open bit and the generation, as a ticket holds them.
#[inline(always)]
fn high(word: u64) -> u32 {
    (word >> 32) as u32
}

/// How an operation granted on the fast path ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a carried operation must be reported to the machine"]
pub enum End {
    /// It ended on the fast path: nothing to report.
    Fast,
    /// The gate was closed while it ran, and the machine counted it: feed `AccessDone`.
    Carried,
}

/// The key of a client generation and an epoch: `key_of_client(g) | epoch`.
#[inline(always)]
pub(crate) fn key(client_generation: u16, epoch: Epoch) -> u64 {
    key_of_client(client_generation) | u64::from(epoch.0)
}

/// The client generation's half of a key.
#[inline(always)]
pub(crate) fn key_of_client(client_generation: u16) -> u64 {
    u64::from(client_generation) << 32
}

impl<A: AtomicWord> Default for Gate<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: AtomicWord> core::fmt::Debug for Gate<A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let word = self.word.owner_load(Relaxed);
        f.debug_struct("Gate")
            .field("open", &(word & OPEN != 0))
            .field("in_flight", &(word & COUNT))
            .finish()
    }
}

impl<A: AtomicWord> Gate<A> {
    /// A shut gate.
    pub fn new() -> Self {
        Gate {
            word: A::with_value(0),
            key: A::with_value(0),
            #[cfg(pnp_faults)]
            fault: core::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Plant [`crate::planted::Fault::BeginAfterClose`] in this gate (tests only).
    #[cfg(pnp_faults)]
    pub fn plant_begin_after_close(&self, planted: bool) {
        self.fault.store(planted, Relaxed);
    }

    /// Open for the client of `client_generation` at `epoch` (the owner, when the machine
    /// says so). A gate that is open already is first closed, and what that carries is
    /// returned, as [`Self::close`] would.
    pub fn open(&self, client_generation: u16, epoch: Epoch) -> u32 {
        let carried = self.close();
        self.key.owner_store(key(client_generation, epoch), Relaxed);
        let generation = self.word.owner_load(Relaxed) & GENERATION;
        let next = (generation + (1 << GENERATION_SHIFT)) & GENERATION;
        // Release: the key is written before a begin can see the gate open.
        self.word.owner_store(OPEN | next, Release);
        carried
    }

    /// Shut the gate (the owner, when the machine asks): no operation begins on the fast
    /// path from here on, and the operations in flight are returned; each of them ends
    /// [`End::Carried`].
    pub fn close(&self) -> u32 {
        // AcqRel: the operations that ended on the fast path happened before this.
        let old = self.word.owner_fetch_and(GENERATION, AcqRel);
        if old & OPEN == 0 {
            return 0;
        }
        u32::try_from(old & COUNT).unwrap_or(u32::MAX)
    }

    /// Whether the gate is open.
    pub fn is_open(&self) -> bool {
        self.word.owner_load(Relaxed) & OPEN != 0
    }

    /// Operations begun on the fast path and not ended, while the gate is open (a shut
    /// gate's were carried to the machine).
    pub fn in_flight(&self) -> u32 {
        let word = self.word.owner_load(Acquire);
        if word & OPEN == 0 {
            return 0;
        }
        u32::try_from(word & COUNT).unwrap_or(u32::MAX)
    }

    /// Begin an operation for the client of `client_generation` through its interface of
    /// `epoch`. `None`: not on the fast path (the gate is shut, or open for another client
    /// or epoch): ask the machine.
    #[inline]
    pub fn begin(&self, client_generation: u16, epoch: Epoch) -> Option<Ticket> {
        self.begin_keyed(key(client_generation, epoch))
    }

    /// [`Self::begin`] with the key computed by the caller.
    #[inline(always)]
    pub(crate) fn begin_keyed(&self, mine: u64) -> Option<Ticket> {
        #[cfg(pnp_faults)]
        if self.fault.load(Relaxed) {
            return self.begin_planted(mine);
        }
        // One try inline; a count changed meanwhile by another operation of the client,
        // or an open or close, is retried out of line.
        match self.try_begin(self.word.load(Acquire), mine) {
            Ok(ticket) => ticket,
            Err(now) => self.begin_contended(now, mine),
        }
    }

    /// One try at counting an operation into `word`: `Ok` with the answer, `Err` with
    /// the word that changed meanwhile.
    #[inline(always)]
    fn try_begin(&self, word: u64, mine: u64) -> Result<Option<Ticket>, u64> {
        // The key read after an open word is that open's key: it changes only while the
        // gate is shut, and then the word changes too and the exchange below fails. A full
        // count would carry into the generation: refused (`next`'s count is 0).
        let next = word.wrapping_add(1);
        if word & OPEN == 0 || next as u32 == 0 || self.key.load(Relaxed) != mine {
            return Ok(None);
        }
        match self.word.compare_exchange(word, next, Acquire, Acquire) {
            Ok(_) => Ok(Ticket::of(word)),
            Err(now) => Err(now),
        }
    }

    #[cold]
    #[inline(never)]
    fn begin_contended(&self, mut word: u64, mine: u64) -> Option<Ticket> {
        loop {
            match self.try_begin(word, mine) {
                Ok(ticket) => return ticket,
                Err(now) => word = now,
            }
        }
    }

    /// The planted fault: the check and the count are two steps, so a close between them
    /// reads a count without this operation, and the store then reopens the gate behind
    /// the close's back with it counted there. Tests only.
    #[cfg(pnp_faults)]
    fn begin_planted(&self, mine: u64) -> Option<Ticket> {
        let word = self.word.load(Acquire);
        if word & OPEN == 0 || word & COUNT == COUNT || self.key.load(Relaxed) != mine {
            return None;
        }
        self.word.store(word + 1, Release);
        Ticket::of(word)
    }

    /// End an operation [`Self::begin`] granted.
    #[inline(always)]
    pub fn end(&self, ticket: Ticket) -> End {
        match self.try_end(self.word.load(Relaxed), ticket) {
            Ok(end) => end,
            Err(now) => self.end_contended(now, ticket),
        }
    }

    /// One try at ending an operation counted in `word`: `Err` with the word that changed
    /// meanwhile.
    #[inline(always)]
    fn try_end(&self, word: u64, ticket: Ticket) -> Result<End, u64> {
        // Shut, or reopened since: a close carried it.
        if high(word) != ticket.0.get() {
            return Ok(End::Carried);
        }
        // Release: the operation's accesses happen before a close that sees it ended.
        match self
            .word
            .compare_exchange(word, word.wrapping_sub(1), Release, Relaxed)
        {
            Ok(_) => Ok(End::Fast),
            Err(now) => Err(now),
        }
    }

    #[cold]
    #[inline(never)]
    fn end_contended(&self, mut word: u64, ticket: Ticket) -> End {
        loop {
            match self.try_end(word, ticket) {
                Ok(end) => return end,
                Err(now) => word = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type G = Gate<core::sync::atomic::AtomicU64>;

    #[test]
    fn a_shut_gate_grants_nothing() {
        let g = G::new();
        assert_eq!(g.begin(0, Epoch(0)), None);
        assert_eq!(g.close(), 0);
    }

    #[test]
    fn an_open_gate_grants_only_its_client_and_epoch() {
        let g = G::new();
        assert_eq!(g.open(3, Epoch(7)), 0);
        assert_eq!(g.begin(3, Epoch(6)), None, "a stale epoch");
        assert_eq!(g.begin(2, Epoch(7)), None, "an earlier client of the slot");
        let t = g.begin(3, Epoch(7)).expect("granted");
        assert_eq!(g.end(t), End::Fast);
        assert_eq!(g.close(), 0, "nothing in flight");
    }

    #[test]
    fn closing_carries_what_is_in_flight_and_those_end_through_the_machine() {
        let g = G::new();
        let _ = g.open(1, Epoch(0));
        let a = g.begin(1, Epoch(0)).expect("granted");
        let b = g.begin(1, Epoch(0)).expect("granted");
        let c = g.begin(1, Epoch(0)).expect("granted");
        assert_eq!(g.end(a), End::Fast);
        assert_eq!(g.close(), 2);
        assert_eq!(g.begin(1, Epoch(0)), None, "shut");
        // Reopened (the same client and epoch, as after a cancelled stop): the two carried
        // operations still end through the machine, a new one on the fast path.
        let _ = g.open(1, Epoch(0));
        let d = g.begin(1, Epoch(0)).expect("granted");
        assert_eq!(g.end(b), End::Carried);
        assert_eq!(g.end(d), End::Fast);
        assert_eq!(g.end(c), End::Carried);
        assert_eq!(g.close(), 0);
    }

    #[test]
    fn reopening_for_a_new_epoch_carries_the_old_ones() {
        let g = G::new();
        let _ = g.open(1, Epoch(0));
        let a = g.begin(1, Epoch(0)).expect("granted");
        assert_eq!(g.open(1, Epoch(1)), 1, "the open closes first");
        assert_eq!(g.begin(1, Epoch(0)), None, "stale now");
        assert_eq!(g.end(a), End::Carried);
    }

    #[test]
    fn the_generation_wraps_without_confusing_tickets() {
        let g = G::new();
        g.word.store(GENERATION, Relaxed); // the last generation
        let _ = g.open(1, Epoch(0));
        assert!(g.is_open());
        let t = g.begin(1, Epoch(0)).expect("granted");
        assert_eq!(t.0.get(), 1 << 31, "open, the generation wrapped to zero");
        assert_eq!(g.end(t), End::Fast);
    }
}
