//! `std`'s primitives: [`StdKernel`], and the clocks a hosted port uses.

use std::boxed::Box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

use pnp_lifecycle::Tick;

use crate::owner::ContextId;
use crate::runtime::{Clock, Kernel, Monitor};

/// `std::sync::Mutex` + `Condvar` and `std::thread`.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdKernel;

/// [`Monitor`] over `std::sync::Mutex` and `Condvar` (poisoning ignored: no callback
/// runs under the lock).
#[derive(Debug, Default)]
pub struct StdMonitor<T> {
    value: Mutex<T>,
    changed: Condvar,
}

impl<T: Send> Monitor<T> for StdMonitor<T> {
    fn new(value: T) -> Self {
        StdMonitor {
            value: Mutex::new(value),
            changed: Condvar::new(),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        let result = f(&mut guard);
        self.changed.notify_all();
        result
    }

    fn wait_until<R>(&self, mut f: impl FnMut(&mut T) -> Option<R>) -> R {
        let mut guard = self.value.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(r) = f(&mut guard) {
                self.changed.notify_all();
                return r;
            }
            guard = self
                .changed
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

static NEXT_CONTEXT: AtomicU64 = AtomicU64::new(1);

std::thread_local! {
    static CONTEXT: u64 = NEXT_CONTEXT.fetch_add(1, Ordering::Relaxed);
}

impl Kernel for StdKernel {
    type Monitor<T: Send + 'static> = StdMonitor<T>;
    type Word = core::sync::atomic::AtomicU64;
    type Thread = std::thread::JoinHandle<()>;

    fn context() -> ContextId {
        ContextId(CONTEXT.with(|c| *c))
    }

    fn spawn(f: Box<dyn FnOnce() + Send + 'static>) -> Self::Thread {
        std::thread::spawn(f)
    }

    fn join(thread: Self::Thread) {
        let _ = thread.join();
    }
}

/// Milliseconds since the clock was created (`std::time::Instant`, monotonic).
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    start: Instant,
}

impl MonotonicClock {
    /// A clock whose zero is now.
    pub fn new() -> Self {
        MonotonicClock {
            start: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Tick {
        Tick::from_duration(self.start.elapsed(), 1_000)
    }
}

/// A clock that moves only when told to (tests, harnesses, simulations).
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub const fn new(start: Tick) -> Self {
        ManualClock {
            now: AtomicU64::new(start.0),
        }
    }

    /// Move the clock to `now` (an earlier value is ignored: it never goes backwards).
    pub fn set(&self, now: Tick) {
        self.now.fetch_max(now.0, Ordering::SeqCst);
    }

    /// Move the clock `ticks` forward (saturating).
    pub fn advance(&self, ticks: u64) {
        let _ = self
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(ticks))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Tick {
        Tick(self.now.load(Ordering::SeqCst))
    }
}
