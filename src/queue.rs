//! The fixed-capacity output queue: a `heapless::Deque` plus an overflow count.

use crate::types::Output;
use heapless::Deque;

/// Room is checked before an input is accepted, so a push never finds the queue full; if
/// it ever did, the output would be counted in `overflowed` rather than lost silently (the
/// tests assert the count stays zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutputQueue<const Q: usize> {
    queue: Deque<Output, Q>,
    overflowed: u32,
}

impl<const Q: usize> core::hash::Hash for OutputQueue<Q> {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.queue.len().hash(state);
        for output in self.queue.iter() {
            output.hash(state);
        }
        self.overflowed.hash(state);
    }
}

impl<const Q: usize> OutputQueue<Q> {
    pub(crate) const fn new() -> Self {
        OutputQueue {
            queue: Deque::new(),
            overflowed: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn free(&self) -> usize {
        Q - self.queue.len()
    }

    pub(crate) const fn overflowed(&self) -> u32 {
        self.overflowed
    }

    pub(crate) fn push(&mut self, output: Output) {
        if self.queue.push_back(output).is_err() {
            self.overflowed = self.overflowed.saturating_add(1);
        }
    }

    pub(crate) fn pop(&mut self) -> Option<Output> {
        self.queue.pop_front()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Output> {
        self.queue.iter()
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
}
