//! The port's clock: every input the port feeds the core carries the clock's `now`, read
//! under the port lock at the moment the input is fed (never a remembered earlier tick).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use pnp_lifecycle::Tick;

/// A source of the current time, in the unit of the [`pnp_lifecycle::Config`] the port
/// was built with (the default config assumes milliseconds). It must never go backwards.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Tick;
}

/// The default clock: milliseconds since the clock was created (`std::time::Instant`,
/// monotonic).
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

    /// Move the clock to `now` (a value earlier than the current one is ignored: the
    /// clock never goes backwards).
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

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now(&self) -> Tick {
        (**self).now()
    }
}

impl std::fmt::Debug for dyn Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clock").field("now", &self.now()).finish()
    }
}
