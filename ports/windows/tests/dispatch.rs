//! The PnP dispatch and the mlx4 interface with real `std` threads: statuses as Windows
//! sees them.

use std::sync::{Arc, Mutex};

use pnp_lifecycle::{ClientHandle, ClientKind, Config, DeviceId, Event, ResetResult, StartResult};
use pnp_lifecycle_windows::{Driver, Hal, Irp, MlxInterface, NtStatus, PnpMinor};

const DEV: DeviceId = DeviceId(0);

struct Hw;
impl Hal for Hw {
    fn start(&self, _: DeviceId) -> StartResult {
        StartResult::Started
    }
    fn reset(&self, _: DeviceId) -> ResetResult {
        ResetResult::Succeeded
    }
    fn shutdown(&self, _: DeviceId) {}
    fn release(&self, _: DeviceId) {}
    fn client_op(&self, _: DeviceId, _: ClientHandle) {}
    fn cut_client(&self, _: DeviceId, _: ClientHandle) {}
}

fn irp(driver: &Driver, minor: PnpMinor, token: u32) -> (Arc<Irp>, NtStatus) {
    let irp: Arc<Irp> = Irp::new(DEV, minor, token);
    driver.dispatch_pnp(&irp);
    let status = irp.wait();
    assert_eq!(irp.completions(), 1);
    (irp, status)
}

fn started() -> Driver {
    let d = Driver::new(Config::DEFAULT, Arc::new(Hw));
    d.add_device(DEV).unwrap();
    assert_eq!(irp(&d, PnpMinor::StartDevice, 1).1, NtStatus::SUCCESS);
    d
}

type Events = Arc<Mutex<Vec<Event>>>;

fn client(d: &Driver) -> (MlxInterface, Events) {
    let events: Events = Arc::default();
    let e = events.clone();
    let iface = d
        .register_client(
            DEV,
            ClientKind::Trusted,
            Arc::new(move |ev| e.lock().unwrap().push(ev)),
        )
        .unwrap();
    (iface, events)
}

fn wait_for(events: &Events, pred: impl Fn(&[Event]) -> bool) {
    for _ in 0..10_000 {
        if pred(&events.lock().unwrap()) {
            return;
        }
        std::thread::yield_now();
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    panic!("events never arrived: {:?}", events.lock().unwrap());
}

#[test]
fn query_remove_is_vetoed_during_a_reset_and_a_stale_interface_is_refused() {
    let d = started();
    let (iface, events) = client(&d);
    iface.reset_request().unwrap();
    wait_for(&events, |e| e.contains(&Event::Reset));
    assert_eq!(
        irp(&d, PnpMinor::QueryRemoveDevice, 2).1,
        NtStatus::DEVICE_BUSY
    );
    iface.reset_execute().unwrap();
    wait_for(&events, |e| {
        e.iter().any(|e| matches!(e, Event::ResetEnd { .. }))
    });
    assert_eq!(iface.hardware_op(), Err(NtStatus::REVISION_MISMATCH));
    let fresh = iface.acquire().unwrap();
    assert_eq!(fresh.epoch().0, iface.epoch().0 + 1);
    fresh.hardware_op().unwrap();
    assert_eq!(irp(&d, PnpMinor::QueryRemoveDevice, 3).1, NtStatus::SUCCESS);
    assert_eq!(
        irp(&d, PnpMinor::CancelRemoveDevice, 4).1,
        NtStatus::SUCCESS
    );
    // Detach before unload: unload tells a registered client `Removed` and waits for it
    // to detach, and only a `Tick` past its detach deadline (nothing here ticks) would
    // revoke it, so a client that never unregisters keeps `unload` blocked.
    fresh.unregister().unwrap();
    d.unload().unwrap();
    assert_eq!(d.runtime().inspect(|o| o.anomalies()), 0);
}

#[test]
fn remove_completes_after_clients_detach_and_the_remove_lock_refuses_new_calls() {
    let d = started();
    let (iface, events) = client(&d);
    let remove: Arc<Irp> = Irp::new(DEV, PnpMinor::RemoveDevice, 2);
    assert_eq!(d.dispatch_pnp(&remove), NtStatus::PENDING);
    wait_for(&events, |e| e.contains(&Event::Removed { surprise: false }));
    assert_eq!(
        remove.status(),
        None,
        "remove waits for the client to detach"
    );
    assert_eq!(iface.reset_request(), Err(NtStatus::DELETE_PENDING));
    assert!(matches!(
        d.register_client(DEV, ClientKind::Trusted, Arc::new(|_| {})),
        Err(NtStatus::DELETE_PENDING)
    ));
    iface.unregister().unwrap();
    assert_eq!(remove.wait(), NtStatus::SUCCESS);
    assert_eq!(remove.completions(), 1);
    let n = events.lock().unwrap().len();
    d.unload().unwrap();
    assert_eq!(
        events.lock().unwrap().len(),
        n,
        "no callback after unregister"
    );
}

#[test]
fn refused_requests_complete_with_the_mapped_status() {
    let d = started();
    assert_eq!(
        irp(&d, PnpMinor::StopDevice, 2).1,
        NtStatus::INVALID_DEVICE_STATE,
        "stop without query stop"
    );
    assert_eq!(irp(&d, PnpMinor::QueryStopDevice, 3).1, NtStatus::SUCCESS);
    assert_eq!(irp(&d, PnpMinor::StopDevice, 4).1, NtStatus::SUCCESS);
    assert_eq!(irp(&d, PnpMinor::StartDevice, 5).1, NtStatus::SUCCESS);
    assert_eq!(irp(&d, PnpMinor::SurpriseRemoval, 6).1, NtStatus::SUCCESS);
    assert_eq!(irp(&d, PnpMinor::RemoveDevice, 7).1, NtStatus::SUCCESS);
    assert_eq!(
        irp(&d, PnpMinor::RemoveDevice, 8).1,
        NtStatus::DELETE_PENDING,
        "the remove lock refuses a second remove"
    );
    d.unload().unwrap();
    assert_eq!(
        irp(&d, PnpMinor::StartDevice, 9).1,
        NtStatus::DELETE_PENDING
    );
}

/// A client that cannot pause vetoes query stop; a hardware operation in flight holds the
/// stop's shutdown off until it returned (the core's Stopping phase).
#[test]
fn stop_waits_for_a_hardware_operation_and_cannot_pause_vetoes_query_stop() {
    use std::sync::atomic::{AtomicBool, Ordering};
    struct SlowOp {
        in_op: AtomicBool,
        shut_under_op: AtomicBool,
    }
    impl Hal for SlowOp {
        fn start(&self, _: DeviceId) -> StartResult {
            StartResult::Started
        }
        fn reset(&self, _: DeviceId) -> ResetResult {
            ResetResult::Succeeded
        }
        fn shutdown(&self, _: DeviceId) {
            if self.in_op.load(Ordering::SeqCst) {
                self.shut_under_op.store(true, Ordering::SeqCst);
            }
        }
        fn release(&self, _: DeviceId) {}
        fn client_op(&self, _: DeviceId, _: ClientHandle) {
            self.in_op.store(true, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(50));
            self.in_op.store(false, Ordering::SeqCst);
        }
        fn cut_client(&self, _: DeviceId, _: ClientHandle) {}
    }
    let hal = Arc::new(SlowOp {
        in_op: AtomicBool::new(false),
        shut_under_op: AtomicBool::new(false),
    });
    let d = Driver::new(Config::DEFAULT, hal.clone());
    d.add_device(DEV).unwrap();
    assert_eq!(irp(&d, PnpMinor::StartDevice, 1).1, NtStatus::SUCCESS);
    let (iface, _events) = client(&d);
    iface.cannot_pause().unwrap();
    assert_eq!(
        irp(&d, PnpMinor::QueryStopDevice, 2).1,
        NtStatus::DEVICE_BUSY
    );
    iface.can_pause().unwrap();
    let io = iface.clone();
    let op = std::thread::spawn(move || io.hardware_op());
    while !hal.in_op.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    assert_eq!(irp(&d, PnpMinor::QueryStopDevice, 3).1, NtStatus::SUCCESS);
    assert_eq!(irp(&d, PnpMinor::StopDevice, 4).1, NtStatus::SUCCESS);
    assert_eq!(op.join().unwrap(), Ok(()));
    assert!(
        !hal.shut_under_op.load(Ordering::SeqCst),
        "shut down under the operation"
    );
    iface.unregister().unwrap();
    d.unload().unwrap();
}

/// A HAL whose hardware reset never brings the device back.
#[derive(Default)]
struct ResetFails {
    invalidations: std::sync::atomic::AtomicU32,
}
impl Hal for ResetFails {
    fn start(&self, _: DeviceId) -> StartResult {
        StartResult::Started
    }
    fn reset(&self, _: DeviceId) -> ResetResult {
        ResetResult::Failed
    }
    fn shutdown(&self, _: DeviceId) {}
    fn release(&self, _: DeviceId) {}
    fn client_op(&self, _: DeviceId, _: ClientHandle) {}
    fn cut_client(&self, _: DeviceId, _: ClientHandle) {}
    fn invalidate_device_state(&self, _: DeviceId) {
        self.invalidations
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A failed hardware reset: the core's `DeviceFailed` becomes `IoInvalidateDeviceState`,
/// and `IRP_MN_QUERY_PNP_DEVICE_STATE` answers `PNP_DEVICE_FAILED` until the device is
/// removed.
#[test]
fn a_failed_reset_reports_pnp_device_failed_until_remove() {
    use pnp_lifecycle::FailureCause;
    use pnp_lifecycle_windows::PnpDeviceState;
    let hal = Arc::new(ResetFails::default());
    let d = Driver::new(Config::DEFAULT, hal.clone());
    d.add_device(DEV).unwrap();
    assert_eq!(irp(&d, PnpMinor::StartDevice, 1).1, NtStatus::SUCCESS);
    assert_eq!(d.query_pnp_device_state(DEV), Ok(PnpDeviceState::NONE));
    let (iface, events) = client(&d);
    iface.reset_request().unwrap();
    wait_for(&events, |e| e.contains(&Event::Reset));
    iface.reset_execute().unwrap();
    wait_for(&events, |e| e.contains(&Event::DeviceFatal));
    let state = d.query_pnp_device_state(DEV).unwrap();
    assert!(
        state.failed(),
        "PNP_DEVICE_FAILED after a failed reset: {state:?}"
    );
    assert_eq!(state, PnpDeviceState::FAILED);
    assert_eq!(
        d.runtime().inspect(|o| o.machine().failure(DEV)),
        Some(FailureCause::ResetFailed)
    );
    assert_eq!(
        hal.invalidations.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    // The PnP manager answers PNP_DEVICE_FAILED with remove; the core still holds the
    // device failed while a query remove is pending.
    assert_eq!(irp(&d, PnpMinor::QueryRemoveDevice, 2).1, NtStatus::SUCCESS);
    assert!(
        d.query_pnp_device_state(DEV).unwrap().failed(),
        "still failed while remove is pending"
    );
    let remove: Arc<Irp> = Irp::new(DEV, PnpMinor::RemoveDevice, 3);
    d.dispatch_pnp(&remove);
    wait_for(&events, |e| e.contains(&Event::Removed { surprise: false }));
    iface.unregister().unwrap();
    assert_eq!(remove.wait(), NtStatus::SUCCESS);
    assert_eq!(d.query_pnp_device_state(DEV), Ok(PnpDeviceState::NONE));
    assert_eq!(
        d.query_pnp_device_state(DeviceId(7)),
        Err(NtStatus::NO_SUCH_DEVICE)
    );
    d.unload().unwrap();
    assert_eq!(d.runtime().inspect(|o| o.anomalies()), 0);
}

/// The core's `Event::Recovered` (a cycle every voter could recover from) reaches an mlx4
/// client as RESET_END with the unchanged epoch: the interface has no other end of a reset.
#[test]
fn recovered_is_delivered_as_reset_end_with_the_same_epoch() {
    use pnp_lifecycle::{Epoch, Input};
    use pnp_lifecycle_windows::{Os, WindowsOs};
    let os: WindowsOs = WindowsOs::new(Arc::new(Hw));
    let seen: Events = Arc::default();
    let s = seen.clone();
    let callback: pnp_lifecycle_windows::Callback = Arc::new(move |e| s.lock().unwrap().push(e));
    let client = ClientHandle {
        device: DEV,
        slot: 0,
        generation: 0,
    };
    let answer: Option<Input> = os.call(&callback, client, Event::Recovered { epoch: Epoch(3) });
    assert_eq!(answer, None);
    assert_eq!(*seen.lock().unwrap(), [Event::ResetEnd { epoch: Epoch(3) }]);
}

/// Issue 22, item 9: the PnP manager sends no IRP to a driver during `DriverUnload` (it
/// unloads a driver only once every device of it was removed), and the port does not
/// check that it does not. What it does promise holds either way: an
/// `IRP_MN_SURPRISE_REMOVAL` sent while unload waits for a client is the core's
/// (accepted: the device is already being removed), and one sent after unload returned is
/// refused with `STATUS_NO_SUCH_DEVICE`; each is completed exactly once.
#[test]
fn surprise_removal_during_and_after_unload_is_completed_once_with_the_cores_answer() {
    let d = started();
    let (iface, events) = client(&d);
    let unloader = {
        let d = d.clone();
        std::thread::spawn(move || d.unload())
    };
    wait_for(&events, |e| e.contains(&Event::Removed { surprise: false }));
    let (_, during) = irp(&d, PnpMinor::SurpriseRemoval, 2);
    assert_eq!(
        during,
        NtStatus::SUCCESS,
        "folded into the removal under way"
    );
    iface.unregister().unwrap();
    assert_eq!(unloader.join().unwrap(), Ok(()));
    let (_, after) = irp(&d, PnpMinor::SurpriseRemoval, 3);
    assert_eq!(after, NtStatus::NO_SUCH_DEVICE);
}
