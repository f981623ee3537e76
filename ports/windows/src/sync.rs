//! The port's concurrency primitives: `std`'s in a real build, shuttle's under the crate's
//! own unit tests or with the `shuttle` feature, so the same port code runs under the
//! deterministic scheduler.

#[cfg(any(test, feature = "shuttle"))]
pub use shuttle::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(any(test, feature = "shuttle"))]
pub use shuttle::thread;

#[cfg(not(any(test, feature = "shuttle")))]
pub use std::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(any(test, feature = "shuttle")))]
pub use std::thread;

/// Lock, ignoring poisoning (a panicking client callback never runs under the port lock).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Wait on `cv`, ignoring poisoning.
pub fn wait<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(g)
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
