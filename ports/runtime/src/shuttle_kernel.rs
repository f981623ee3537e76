//! shuttle's primitives: the same runtime under its deterministic scheduler (random and
//! PCT schedules), for the ports' concurrency tests.

use std::boxed::Box;
use std::sync::atomic::{AtomicU64, Ordering};

use shuttle::sync::{Condvar, Mutex};

use crate::owner::ContextId;
use crate::runtime::{Kernel, Monitor};

/// `shuttle::sync::Mutex` + `Condvar` and `shuttle::thread`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShuttleKernel;

/// [`Monitor`] over shuttle's `Mutex` and `Condvar`.
#[derive(Debug)]
pub struct ShuttleMonitor<T> {
    value: Mutex<T>,
    changed: Condvar,
}

impl<T: Send> Monitor<T> for ShuttleMonitor<T> {
    fn new(value: T) -> Self {
        ShuttleMonitor {
            value: Mutex::new(value),
            changed: Condvar::new(),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self
            .value
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let result = f(&mut guard);
        self.changed.notify_all();
        result
    }

    fn wait_until<R>(&self, mut f: impl FnMut(&mut T) -> Option<R>) -> R {
        let mut guard = self
            .value
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            if let Some(r) = f(&mut guard) {
                self.changed.notify_all();
                return r;
            }
            guard = self
                .changed
                .wait(guard)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

static NEXT_CONTEXT: AtomicU64 = AtomicU64::new(1);

shuttle::thread_local! {
    static CONTEXT: u64 = NEXT_CONTEXT.fetch_add(1, Ordering::Relaxed);
}

impl Kernel for ShuttleKernel {
    type Monitor<T: Send + 'static> = ShuttleMonitor<T>;
    type Word = ShuttleWord;
    type Thread = shuttle::thread::JoinHandle<()>;

    fn context() -> ContextId {
        ContextId(CONTEXT.with(|c| *c))
    }

    fn spawn(f: Box<dyn FnOnce() + Send + 'static>) -> Self::Thread {
        shuttle::thread::spawn(f)
    }

    fn join(thread: Self::Thread) {
        let _ = thread.join();
    }
}

/// The fast path's gate word under shuttle: every operation of the hot path (a begin's or
/// an end's load and compare-exchange) is a scheduling point; the owner's (open, close,
/// count, under the owner lock) are not, since a port may hold a lock of its own, not
/// the scheduler's, around them (the Linux port's lock is `std`'s) and a scheduling point
/// there would block the real thread. A close is then one atomic step between the hot
/// path's steps, as on the target.
#[derive(Debug)]
pub struct ShuttleWord(AtomicU64);

impl crate::fast::AtomicWord for ShuttleWord {
    fn with_value(value: u64) -> Self {
        ShuttleWord(AtomicU64::new(value))
    }
    fn load(&self, order: Ordering) -> u64 {
        shuttle::thread::yield_now();
        self.0.load(order)
    }
    fn store(&self, value: u64, order: Ordering) {
        shuttle::thread::yield_now();
        self.0.store(value, order)
    }
    fn compare_exchange_weak(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        shuttle::thread::yield_now();
        self.0.compare_exchange(current, new, success, failure)
    }
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        shuttle::thread::yield_now();
        self.0.compare_exchange(current, new, success, failure)
    }
    fn fetch_and(&self, value: u64, order: Ordering) -> u64 {
        shuttle::thread::yield_now();
        self.0.fetch_and(value, order)
    }
    fn owner_load(&self, order: Ordering) -> u64 {
        self.0.load(order)
    }
    fn owner_store(&self, value: u64, order: Ordering) {
        self.0.store(value, order)
    }
    fn owner_fetch_and(&self, value: u64, order: Ordering) -> u64 {
        self.0.fetch_and(value, order)
    }
}
