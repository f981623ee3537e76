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
    type Word = shuttle::sync::atomic::AtomicU64;
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
