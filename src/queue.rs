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
