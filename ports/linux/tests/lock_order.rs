//! Issue 22 item 10: the port's two locks have one order. The port lock (`LinuxOs`'s
//! registry and PCI state) is a leaf: taken inside the runtime's lock or on its own,
//! never around it. A kernel whose monitor checks, on every acquisition of the runtime's
//! locks, that the calling thread does not hold the port lock runs a workload through
//! every entry point (probe, clients, verbs, PCI error recovery with `mmio_enabled`
//! votes, function reset, runtime PM and system sleep, port events, unregister, perm
//! failure, remove, unload, the timer) on std threads, with inline dispatch and with
//! dispatcher threads. Any path taking the runtime's lock inside the port lock fails it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pnp_lifecycle::{ClientKind, DeviceId, LinkState, PhysPort, Tick};
use pnp_lifecycle_linux::*;
use pnp_lifecycle_runtime::{ContextId, Monitor, StdMonitor};
use pnp_lifecycle_testkit::linux_port::{Recorder, RecordingHardware, CONFIG, IB};
use pnp_lifecycle_testkit::observed::Log;

static CHECKS: AtomicUsize = AtomicUsize::new(0);
static VIOLATION: Mutex<Option<String>> = Mutex::new(None);

fn check_order() {
    CHECKS.fetch_add(1, Ordering::Relaxed);
    if LinuxOs::port_lock_held() {
        let trace = std::backtrace::Backtrace::force_capture().to_string();
        VIOLATION.lock().unwrap().get_or_insert(trace);
    }
}

/// [`StdMonitor`], checking the lock order on every acquisition.
struct Ordered<T>(StdMonitor<T>);

impl<T: Send> Monitor<T> for Ordered<T> {
    fn new(value: T) -> Self {
        Ordered(StdMonitor::new(value))
    }
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        check_order();
        self.0.with(f)
    }
    fn wait_until<R>(&self, f: impl FnMut(&mut T) -> Option<R>) -> R {
        check_order();
        self.0.wait_until(f)
    }
}

/// `std` threads with [`Ordered`] monitors.
struct OrderedKernel;

impl Kernel for OrderedKernel {
    type Monitor<T: Send + 'static> = Ordered<T>;
    type Thread = std::thread::JoinHandle<()>;
    type Word = std::sync::atomic::AtomicU64;
    fn context() -> ContextId {
        StdKernel::context()
    }
    fn spawn(f: Box<dyn FnOnce() + Send + 'static>) -> Self::Thread {
        std::thread::spawn(f)
    }
    fn join(thread: Self::Thread) {
        let _ = thread.join();
    }
}

type D = Arc<Driver<OrderedKernel>>;

const D0: DeviceId = DeviceId(0);
const D1: DeviceId = DeviceId(1);

fn recovery(d: &D) {
    let mut r = d.error_detected(D0, PciChannelState::Frozen);
    if r == PciErsResult::CanRecover {
        r = d.mmio_enabled(D0);
    }
    if r == PciErsResult::NeedReset {
        r = d.slot_reset(D0);
    }
    if r == PciErsResult::Recovered {
        d.resume(D0);
    }
}

fn workload(dispatch: Dispatch) {
    let log = Log::new();
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let os = LinuxOs::new(RecordingHardware::new(&log));
    let d: D = Arc::new(Driver::on(CONFIG, os, clock.clone(), dispatch));
    d.probe(D0, &[IB]).unwrap();
    d.probe(D1, &[IB, IB]).unwrap();
    let kernel = Recorder::new(0, PciErsResult::NeedReset, &log);
    let k = d.register_client(kernel, ClientKind::Trusted).unwrap();
    let calm = Recorder::new(1, PciErsResult::CanRecover, &log);
    d.register_client(calm, ClientKind::Trusted).unwrap();
    let user = Recorder::new(2, PciErsResult::None, &log);
    let u = d.register_client(user, ClientKind::Untrusted).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let timer = {
        let (d, clock, stop) = (d.clone(), clock.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                clock.advance(5);
                let _ = d.timeout();
                let _ = d.poll_timeout();
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let spawn = |f: fn(&D, ClientId, ClientId)| {
        let d = d.clone();
        std::thread::spawn(move || f(&d, k, u))
    };
    let actors = [
        spawn(|d, _, _| {
            for _ in 0..3 {
                recovery(d);
            }
            if d.reset_prepare(D0).is_ok() {
                d.reset_done(D0);
            }
        }),
        spawn(|d, k, u| {
            for _ in 0..30 {
                let _ = d.post(k, D0);
                let _ = d.query_port(k, D0, PhysPort(0));
                if d.begin_hw_op(u, D1).is_ok() {
                    let _ = d.end_hw_op(u, D1);
                }
                let _ = d.reset_ack(u, D0);
                let _ = d.recover_ack(u, D0);
            }
        }),
        spawn(|d, _, _| {
            for _ in 0..5 {
                let _ = d.runtime_idle(D1);
                let _ = d.pm(D1, PmOp::RuntimeSuspend);
                let _ = d.pm(D1, PmOp::RuntimeResume);
                let _ = d.pm(D1, PmOp::Suspend);
                let _ = d.pm(D1, PmOp::Resume);
            }
        }),
        spawn(|d, _, _| {
            for i in 0..20 {
                let state = [LinkState::Active, LinkState::Down][i % 2];
                let _ = d.set_port_state(D0, PhysPort(0), state);
                let _ = d.set_port_state(D1, PhysPort(1), state);
            }
        }),
        spawn(|d, _, _| {
            let log = Log::new();
            for i in 0..5 {
                let rec = Recorder::new(10 + i, PciErsResult::CanRecover, &log);
                if let Ok(id) = d.register_client(rec, ClientKind::Trusted) {
                    let _ = d.handle(id, D0);
                    let _ = d.unregister_client(id);
                }
                let _ = (d.kernel_log(), d.backlog(), format!("{d:?}"));
            }
        }),
    ];
    for a in actors {
        a.join().unwrap();
    }
    // Only the CAN_RECOVER client left: recovery asks it at `mmio_enabled`.
    let _ = d.unregister_client(k);
    let _ = d.unregister_client(u);
    recovery(&d);
    d.error_detected(D1, PciChannelState::PermFailure);
    let _ = d.remove(D1);
    d.unload().unwrap();
    stop.store(true, Ordering::Relaxed);
    timer.join().unwrap();
}

#[test]
fn no_path_takes_the_runtime_lock_inside_the_port_lock() {
    for dispatch in [Dispatch::Inline, Dispatch::Thread] {
        for _ in 0..5 {
            workload(dispatch);
        }
    }
    assert!(CHECKS.load(Ordering::Relaxed) > 1_000, "the check ran");
    if let Some(trace) = VIOLATION.lock().unwrap().take() {
        panic!("the runtime's lock was taken inside the port lock at:\n{trace}");
    }
}
