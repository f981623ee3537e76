//! Issue 22 item 1: no driver code runs for a device after PCI `remove` returns (or
//! `module_exit`'s unload). With a slow `ReleaseResources` (20 ms) and three verbs
//! threads looping (each of their calls carries work out inline, as `ib_core` callers
//! do), `remove()` returns only after every hardware hook the core ordered before it
//! returned, in every one of N runs on real threads, and in every schedule shuttle tries.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pnp_lifecycle::{ClientKind, Config, DeviceId, HardwareCommand};
use pnp_lifecycle_linux::{ClientId, Driver, Hardware, IbClient, PciChannelState};

const DEV: DeviceId = DeviceId(0);
const RUNS: u32 = 200;
const VERBS_THREADS: usize = 3;

/// Hardware whose teardown is slow, counting the hooks running now.
#[derive(Default)]
struct SlowTeardown {
    busy: AtomicU32,
    releases: AtomicU32,
}

impl Hardware for SlowTeardown {
    fn command(&self, _: DeviceId, command: HardwareCommand) {
        self.busy.fetch_add(1, Ordering::SeqCst);
        match command {
            HardwareCommand::ReleaseResources => {
                std::thread::sleep(Duration::from_millis(20));
                self.releases.fetch_add(1, Ordering::SeqCst);
            }
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
        self.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A kernel client with the default callbacks (its `remove` returns at once).
struct Quiet;
impl IbClient for Quiet {
    fn add(&self, _: DeviceId) {}
    fn remove(&self, _: DeviceId, _: pnp_lifecycle_linux::RemoveCause) {}
}

/// A probed device, a client, and three verbs threads posting until `stop`.
struct Run {
    d: Arc<Driver>,
    hw: Arc<SlowTeardown>,
    stop: Arc<AtomicBool>,
    verbs: Vec<std::thread::JoinHandle<()>>,
}

impl Run {
    fn start() -> Run {
        let hw = Arc::new(SlowTeardown::default());
        let d = Arc::new(Driver::new(
            Config::DEFAULT,
            Arc::clone(&hw) as Arc<dyn Hardware>,
        ));
        d.probe(DEV, &[]).unwrap();
        let id: ClientId = d
            .register_client(Arc::new(Quiet), ClientKind::Trusted)
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let verbs = (0..VERBS_THREADS)
            .map(|_| {
                let (d, stop) = (Arc::clone(&d), Arc::clone(&stop));
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let _ = d.post(id, DEV);
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        Run { d, hw, stop, verbs }
    }

    /// What the PCI core sees at the return: the release done, no hook still running.
    fn early(&self) -> bool {
        self.hw.releases.load(Ordering::SeqCst) != 1 || self.hw.busy.load(Ordering::SeqCst) != 0
    }

    fn end(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.verbs {
            t.join().unwrap();
        }
        self.d.unload().unwrap();
    }
}

#[test]
fn pci_remove_returns_only_after_release_resources_returned() {
    let mut early = 0;
    for _ in 0..RUNS {
        let run = Run::start();
        run.d.remove(DEV).unwrap();
        early += u32::from(run.early());
        run.end();
    }
    println!(
        "PCI remove() returned while ReleaseResources still ran ({VERBS_THREADS} verbs \
         threads): {early} of {RUNS} runs"
    );
    assert_eq!(early, 0);
}

#[test]
fn remove_after_a_permanent_failure_returns_only_after_release_resources_returned() {
    let mut early = 0;
    for _ in 0..RUNS {
        let run = Run::start();
        run.d.error_detected(DEV, PciChannelState::PermFailure);
        run.d.remove(DEV).unwrap();
        early += u32::from(run.early());
        run.end();
    }
    println!(
        "remove() after pci_channel_io_perm_failure returned while ReleaseResources still \
         ran: {early} of {RUNS} runs"
    );
    assert_eq!(early, 0);
}

#[test]
fn module_unload_returns_only_after_the_teardown_it_caused_returned() {
    let mut early = 0;
    for _ in 0..RUNS {
        let run = Run::start();
        run.stop.store(true, Ordering::SeqCst);
        // module_exit with the device still bound: the core removes it.
        run.d.unload().unwrap();
        early += u32::from(run.early());
        for t in run.verbs {
            t.join().unwrap();
        }
    }
    println!("module unload returned before ReleaseResources returned: {early} of {RUNS} runs");
    assert_eq!(early, 0);
}

/// The same race under shuttle's scheduler (random and PCT schedules), where the slow
/// hook yields instead of sleeping: every schedule is counted, none may return early.
mod shuttle_schedules {
    use super::*;
    use pnp_lifecycle_linux::ManualClock;
    use pnp_lifecycle_runtime::ShuttleKernel;

    static SCHEDULES: AtomicU32 = AtomicU32::new(0);
    static EARLY: AtomicU32 = AtomicU32::new(0);

    #[derive(Default)]
    struct Yielding {
        busy: AtomicU32,
        releases: AtomicU32,
    }

    impl Hardware for Yielding {
        fn command(&self, _: DeviceId, command: HardwareCommand) {
            self.busy.fetch_add(1, Ordering::SeqCst);
            for _ in 0..4 {
                shuttle::thread::yield_now();
            }
            if command == HardwareCommand::ReleaseResources {
                self.releases.fetch_add(1, Ordering::SeqCst);
            }
            self.busy.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn scenario() {
        let hw = Arc::new(Yielding::default());
        let clock = Arc::new(ManualClock::new(pnp_lifecycle::Tick(0)));
        let d: Arc<Driver<ShuttleKernel>> = Arc::new(Driver::with_clock(
            Config::DEFAULT,
            Arc::clone(&hw) as Arc<dyn Hardware>,
            clock,
        ));
        d.probe(DEV, &[]).unwrap();
        let id = d
            .register_client(Arc::new(Quiet), ClientKind::Trusted)
            .unwrap();
        let verbs: Vec<_> = (0..VERBS_THREADS)
            .map(|_| {
                let d = Arc::clone(&d);
                shuttle::thread::spawn(move || {
                    for _ in 0..4 {
                        let _ = d.post(id, DEV);
                    }
                })
            })
            .collect();
        d.remove(DEV).unwrap();
        let early = hw.releases.load(Ordering::SeqCst) != 1 || hw.busy.load(Ordering::SeqCst) != 0;
        SCHEDULES.fetch_add(1, Ordering::SeqCst);
        EARLY.fetch_add(u32::from(early), Ordering::SeqCst);
        for t in verbs {
            t.join().unwrap();
        }
        d.unload().unwrap();
    }

    #[test]
    fn pci_remove_returns_only_after_release_resources_returned_in_every_schedule() {
        shuttle::check_random(scenario, 1_000);
        shuttle::check_pct(scenario, 1_000, 3);
        let (early, n) = (
            EARLY.load(Ordering::SeqCst),
            SCHEDULES.load(Ordering::SeqCst),
        );
        println!(
            "PCI remove() returned while ReleaseResources still ran: {early} of {n} schedules"
        );
        assert_eq!(early, 0);
    }
}
