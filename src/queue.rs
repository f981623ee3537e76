//! The fixed-capacity output queue: a ring of outputs plus an overflow count.

use crate::types::{Error, Output};

/// Room is checked before an input is accepted, so a push never finds the queue full; if
/// it ever did, the output would be counted in `overflowed` rather than lost silently (the
/// tests assert the count stays zero).
///
/// A ring over a fixed array: `len` outputs from `head`, wrapping. Entries outside that
/// window are stale; equality, hashing and `Debug` see only the outputs queued, oldest
/// first.
#[derive(Clone)]
pub(crate) struct OutputQueue<const Q: usize> {
    buf: [Output; Q],
    head: usize,
    len: usize,
    overflowed: u32,
}

impl<const Q: usize> PartialEq for OutputQueue<Q> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.overflowed == other.overflowed && self.iter().eq(other.iter())
    }
}

impl<const Q: usize> Eq for OutputQueue<Q> {}

impl<const Q: usize> core::fmt::Debug for OutputQueue<Q> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        struct Queued<'a, const Q: usize>(&'a OutputQueue<Q>);
        impl<const Q: usize> core::fmt::Debug for Queued<'_, Q> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.debug_list().entries(self.0.iter()).finish()
            }
        }
        f.debug_struct("OutputQueue")
            .field("queue", &Queued(self))
            .field("overflowed", &self.overflowed)
            .finish()
    }
}

impl<const Q: usize> core::hash::Hash for OutputQueue<Q> {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.len.hash(state);
        for output in self.iter() {
            output.hash(state);
        }
        self.overflowed.hash(state);
    }
}

impl<const Q: usize> OutputQueue<Q> {
    pub(crate) const fn new() -> Self {
        OutputQueue {
            buf: [Output::UnloadMayFinish; Q],
            head: 0,
            len: 0,
            overflowed: 0,
        }
    }

    /// The ring index `offset` places after the head.
    #[inline]
    fn at(&self, offset: usize) -> usize {
        let index = self.head + offset;
        if index >= Q {
            index - Q
        } else {
            index
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Room left (the tests' measure; inputs ask `room_for`).
    #[cfg(test)]
    pub(crate) fn free(&self) -> usize {
        Q - self.len
    }

    /// I10: an input is taken only if the queue has room for the most outputs it can
    /// produce (`needed`); otherwise it is refused, and nothing changes, with the
    /// owner's own backlog as the reason. The one home of that check.
    #[inline(always)]
    pub(crate) fn room_for(&self, needed: usize) -> Result<(), Error> {
        // `len` against a bound known when `needed` is (one compare of memory with a
        // constant; `free()` here cost a subtraction more, as `len <= Q` is not known).
        match Q.checked_sub(needed) {
            Some(most) if self.len <= most => Ok(()),
            _ => Err(Error::OutputBacklog {
                needed: u16::try_from(needed).unwrap_or(u16::MAX),
            }),
        }
    }

    pub(crate) const fn overflowed(&self) -> u32 {
        self.overflowed
    }

    #[inline]
    pub(crate) fn push(&mut self, output: Output) {
        // Below the ring's end, one bound says both that the index is in the ring and
        // that there is room (`head + len < Q` gives `len < Q`). An owner that drains
        // after every input never gets past it (a drain starts the ring again).
        if let Some(entry) = self.buf.get_mut(self.head + self.len) {
            *entry = output;
            self.len += 1;
            return;
        }
        self.push_wrapped(output);
    }

    /// `push` where the next entry is past the ring's end: it wraps to the start, or the
    /// queue is full and the output is counted as lost.
    #[cold]
    #[inline(never)]
    fn push_wrapped(&mut self, output: Output) {
        let index = (self.head + self.len).wrapping_sub(Q);
        match self.buf.get_mut(index) {
            Some(entry) if self.len < Q => {
                *entry = output;
                self.len += 1;
            }
            _ => self.overflowed = self.overflowed.saturating_add(1),
        }
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Output> {
        if self.len == 0 {
            return None;
        }
        let output = self.buf.get(self.head).copied();
        self.head = self.at(1);
        self.len -= 1;
        output
    }

    /// Hand every queued output to `sink`, oldest first, and empty the queue. The outputs
    /// are read in order with no index kept per output: one run of the ring, or two where
    /// they wrap past its end (after a drain the next push starts at its first slot, so an
    /// owner that drains after every input never wraps).
    #[inline]
    pub(crate) fn drain(&mut self, mut sink: impl FnMut(Output)) {
        if self.len == 0 {
            return; // most inputs of a cycle queue nothing
        }
        if let Some(run) = self.buf.get(self.head..self.head + self.len) {
            for output in run {
                sink(*output);
            }
        } else {
            self.drain_wrapped(&mut sink);
        }
        self.head = 0;
        self.len = 0;
    }

    /// `drain` where the outputs wrap past the end of the ring.
    #[cold]
    fn drain_wrapped(&self, sink: &mut impl FnMut(Output)) {
        let (start, from_head) = self.buf.split_at(self.head.min(Q));
        let rest = self.len.saturating_sub(from_head.len());
        for output in from_head.iter().chain(start.iter().take(rest)) {
            sink(*output);
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Output> {
        (0..self.len).filter_map(move |offset| self.buf.get(self.at(offset)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DeviceId, HardwareCommand};
    use core::hash::{Hash, Hasher};

    /// FNV-1a: enough to tell whether the queue's contents reach the hasher.
    struct Fnv(u64);

    impl Hasher for Fnv {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for byte in bytes {
                self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }

    fn hash_of(queue: &OutputQueue<4>) -> u64 {
        let mut hasher = Fnv(0xcbf2_9ce4_8422_2325);
        queue.hash(&mut hasher);
        hasher.finish()
    }

    fn hw(command: HardwareCommand) -> Output {
        Output::Hardware {
            device: DeviceId(0),
            command,
        }
    }

    /// The explorer keys its visited set on the machine's hash: queues that differ in
    /// contents or order must not all collide.
    #[test]
    fn the_contents_and_order_of_the_queue_reach_its_hash() {
        let mut start_then_reset = OutputQueue::<4>::new();
        start_then_reset.push(hw(HardwareCommand::Start));
        start_then_reset.push(hw(HardwareCommand::Reset));
        let mut reset_then_start = OutputQueue::<4>::new();
        reset_then_start.push(hw(HardwareCommand::Reset));
        reset_then_start.push(hw(HardwareCommand::Start));
        let empty = OutputQueue::<4>::new();
        assert_eq!(
            hash_of(&start_then_reset),
            hash_of(&start_then_reset.clone())
        );
        assert_ne!(hash_of(&start_then_reset), hash_of(&reset_then_start));
        assert_ne!(hash_of(&start_then_reset), hash_of(&empty));
    }

    /// The machine's "a refused input changes nothing" (I10) and the explorer compare
    /// queues by value: the outputs queued, oldest first, and the overflow count; not where
    /// the ring stands nor what stale slots hold.
    #[test]
    fn equality_sees_the_queued_outputs_and_the_overflow_count_only() {
        let mut fresh = OutputQueue::<4>::new();
        fresh.push(hw(HardwareCommand::Start));
        fresh.push(hw(HardwareCommand::Reset));
        let mut turned = OutputQueue::<4>::new();
        turned.push(hw(HardwareCommand::PowerUp));
        turned.pop();
        turned.push(hw(HardwareCommand::Start));
        turned.push(hw(HardwareCommand::Reset));
        assert!(fresh == turned, "another head, a stale slot: equal");
        let mut swapped = OutputQueue::<4>::new();
        swapped.push(hw(HardwareCommand::Reset));
        swapped.push(hw(HardwareCommand::Start));
        assert!(fresh != swapped, "same length, other order");
        let mut shorter = OutputQueue::<4>::new();
        shorter.push(hw(HardwareCommand::Start));
        assert!(fresh != shorter);
        let mut overflowed = OutputQueue::<1>::new();
        overflowed.push(hw(HardwareCommand::Start));
        let mut full = overflowed.clone();
        overflowed.push(hw(HardwareCommand::Reset));
        assert_eq!(overflowed.overflowed(), 1);
        assert!(overflowed != full, "same outputs, one lost");
        full.pop();
        assert!(full != overflowed);
    }

    /// A drain hands over the queued outputs in order, across the ring's end too, and
    /// leaves an empty queue that takes outputs again.
    #[test]
    fn drain_hands_over_every_output_in_order_across_the_end_of_the_ring() {
        extern crate std;
        use std::vec::Vec;
        let mut q = OutputQueue::<3>::new();
        q.push(hw(HardwareCommand::PowerUp));
        q.push(hw(HardwareCommand::PowerUp));
        q.pop();
        q.pop();
        q.push(hw(HardwareCommand::Start)); // the ring's last slot
        q.push(hw(HardwareCommand::Reset)); // its first
        q.push(hw(HardwareCommand::PowerDown));
        let mut seen = Vec::new();
        q.drain(|o| seen.push(o));
        assert_eq!(
            seen,
            [
                hw(HardwareCommand::Start),
                hw(HardwareCommand::Reset),
                hw(HardwareCommand::PowerDown)
            ]
        );
        assert_eq!(q.len(), 0);
        assert_eq!(q.pop(), None);
        q.drain(|_| unreachable!("an empty queue hands over nothing"));
        q.push(hw(HardwareCommand::Start));
        assert_eq!(q.pop(), Some(hw(HardwareCommand::Start)));
        assert_eq!(q.overflowed(), 0);
    }

    /// `Debug` (what a failing test and the recorder print) lists the queued outputs in
    /// order, nothing stale.
    #[test]
    fn debug_lists_the_queued_outputs_oldest_first() {
        extern crate std;
        let mut q = OutputQueue::<2>::new();
        q.push(hw(HardwareCommand::PowerUp));
        q.pop();
        q.push(hw(HardwareCommand::Start));
        q.push(hw(HardwareCommand::Reset));
        assert_eq!(
            std::format!("{q:?}"),
            "OutputQueue { queue: [Hardware { device: DeviceId(0), command: Start }, \
             Hardware { device: DeviceId(0), command: Reset }], overflowed: 0 }"
        );
    }
}
