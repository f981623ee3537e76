//! The synchronisation primitives the port uses: `std`'s, or shuttle's when the crate is
//! compiled for its own unit tests (`cfg(test)`), so that the same port code runs under
//! shuttle's deterministic schedulers.

#[cfg(test)]
pub use shuttle::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(test)]
pub use shuttle::thread;

#[cfg(not(test))]
pub use std::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(test))]
pub use std::thread;

/// Lock, ignoring poisoning (a panicking callback must not wedge the driver).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Wait on a condition variable, ignoring poisoning.
pub fn wait<'a, T>(cv: &Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(g)
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
