//! Issue 22 item 1: no driver code runs for a device after the OS heard the driver is done
//! with it. `IRP_MN_REMOVE_DEVICE`'s completion (and `IRP_MN_SURPRISE_REMOVAL`'s, and
//! `DriverUnload`'s return) is observed only after every `Hal` call the core ordered before
//! it returned — with a slow `Hal::release` (20 ms), in every one of N runs on real
//! threads (the notification threads carry the teardown and the completion on different
//! lanes; the runtime orders them).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pnp_lifecycle::{ClientHandle, ClientKind, Config, DeviceId, Event, ResetResult, StartResult};
use pnp_lifecycle_windows::{Driver, Hal, Irp, MlxInterface, NtStatus, PnpMinor};

const DEV: DeviceId = DeviceId(0);
const RUNS: u32 = 50;

/// Hardware whose teardown is slow, watching the IRPs the OS waits on: a `Hal` call that
/// began before one of them completed and ended after it is driver code run for a
/// device the OS was told is done.
#[derive(Default)]
struct SlowTeardown {
    watched: Mutex<Vec<Arc<Irp>>>,
    /// `Hal` calls running now.
    busy: AtomicU32,
    releases: AtomicU32,
    violations: AtomicU32,
}

impl SlowTeardown {
    fn watch(&self, irp: &Arc<Irp>) {
        self.watched.lock().unwrap().push(Arc::clone(irp));
    }

    fn completed(&self) -> Vec<bool> {
        let watched = self.watched.lock().unwrap();
        watched.iter().map(|i| i.status().is_some()).collect()
    }

    fn slow(&self, pause: Duration) {
        self.busy.fetch_add(1, Ordering::SeqCst);
        let before = self.completed();
        std::thread::sleep(pause);
        let after = self.completed();
        if before.iter().zip(&after).any(|(b, a)| !b && *a) {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        self.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Hal for SlowTeardown {
    fn start(&self, _: DeviceId) -> StartResult {
        StartResult::Started
    }
    fn reset(&self, _: DeviceId) -> ResetResult {
        ResetResult::Succeeded
    }
    fn shutdown(&self, _: DeviceId) {
        self.slow(Duration::from_millis(5));
    }
    fn release(&self, _: DeviceId) {
        self.slow(Duration::from_millis(20));
        self.releases.fetch_add(1, Ordering::SeqCst);
    }
    fn client_op(&self, _: DeviceId, _: ClientHandle) {}
    // No client is fenced here: its operations end before the removal.
    fn cut_client(&self, _: DeviceId, _: ClientHandle) {}
}

fn irp(driver: &Driver, hal: &SlowTeardown, minor: PnpMinor, token: u32) -> NtStatus {
    let irp: Arc<Irp> = Irp::new(DEV, minor, token);
    hal.watch(&irp);
    driver.dispatch_pnp(&irp);
    irp.wait()
}

/// A started device with a client that leaves when told `Removed` (from its callback).
fn started() -> (Driver, Arc<SlowTeardown>) {
    let hal = Arc::new(SlowTeardown::default());
    let d = Driver::new(Config::DEFAULT, Arc::clone(&hal) as Arc<dyn Hal>);
    d.add_device(DEV).unwrap();
    assert_eq!(irp(&d, &hal, PnpMinor::StartDevice, 1), NtStatus::SUCCESS);
    let me: Arc<Mutex<Option<MlxInterface>>> = Arc::default();
    let slot = Arc::clone(&me);
    let iface = d
        .register_client(
            DEV,
            ClientKind::Trusted,
            Arc::new(move |event| {
                if matches!(event, Event::Removed { .. }) {
                    if let Some(i) = slot.lock().unwrap().as_ref() {
                        let _ = i.unregister_nowait();
                    }
                }
            }),
        )
        .unwrap();
    *me.lock().unwrap() = Some(iface);
    (d, hal)
}

/// What the OS saw at the moment it was told the driver is done: how many `Hal` calls
/// still ran, and how many overlapped a completion (the `Hal`'s own count).
fn verdict(hal: &SlowTeardown) -> u32 {
    hal.busy.load(Ordering::SeqCst) + hal.violations.load(Ordering::SeqCst)
}

#[test]
fn remove_device_completes_only_after_release_returned() {
    let mut early = 0;
    for _ in 0..RUNS {
        let (d, hal) = started();
        assert_eq!(
            irp(&d, &hal, PnpMinor::QueryRemoveDevice, 2),
            NtStatus::SUCCESS
        );
        assert_eq!(irp(&d, &hal, PnpMinor::RemoveDevice, 3), NtStatus::SUCCESS);
        // The PnP manager sees the completion: Hal::release has returned.
        let released = hal.releases.load(Ordering::SeqCst) == 1;
        early += u32::from(!released || verdict(&hal) > 0);
        d.unload().unwrap();
    }
    println!("IRP_MN_REMOVE_DEVICE completed before Hal::release returned: {early} of {RUNS} runs");
    assert_eq!(early, 0);
}

#[test]
fn surprise_removal_and_remove_complete_only_after_the_hal_calls_before_them_returned() {
    let mut early = 0;
    for _ in 0..RUNS {
        let (d, hal) = started();
        assert_eq!(
            irp(&d, &hal, PnpMinor::SurpriseRemoval, 2),
            NtStatus::SUCCESS
        );
        early += u32::from(verdict(&hal) > 0);
        assert_eq!(irp(&d, &hal, PnpMinor::RemoveDevice, 3), NtStatus::SUCCESS);
        let released = hal.releases.load(Ordering::SeqCst) == 1;
        early += u32::from(!released || verdict(&hal) > 0);
        d.unload().unwrap();
    }
    println!(
        "SURPRISE_REMOVAL / REMOVE_DEVICE completed while a Hal call ordered before it ran: \
         {early} of {RUNS} runs"
    );
    assert_eq!(early, 0);
}

#[test]
fn unload_returns_only_after_the_teardown_it_caused_returned() {
    let mut early = 0;
    for _ in 0..RUNS {
        let (d, hal) = started();
        // DriverUnload with the device still present: the core removes it.
        d.unload().unwrap();
        let released = hal.releases.load(Ordering::SeqCst) == 1;
        early += u32::from(!released || verdict(&hal) > 0);
    }
    println!("DriverUnload returned before Hal::release returned: {early} of {RUNS} runs");
    assert_eq!(early, 0);
}
