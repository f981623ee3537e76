//! Reset groups on Windows (issue 23): two devnodes of one chip declared one group.
//! A client's `reset_request` on one runs one cycle for both (RESET to every client, one
//! `Hal::reset` through the carrier, RESET_END to every client). A platform-level device
//! reset is not such a cycle: Windows reports every device on the reset line missing and
//! rebuilds their stacks, which reaches the core as surprise removal and remove of each
//! member during the group's cycle — no hardware reset, clients told `Removed`.

use std::sync::{Arc, Mutex};

use pnp_lifecycle::{
    ClientHandle, ClientKind, Config, DeviceId, Epoch, Event, GroupId, ResetResult, StartResult,
};
use pnp_lifecycle_windows::{Driver, Hal, Irp, MlxInterface, NtStatus, PnpMinor};

const F0: DeviceId = DeviceId(0);
const F1: DeviceId = DeviceId(1);

type Trace = Arc<Mutex<Vec<String>>>;

struct Chip(Trace);
impl Hal for Chip {
    fn start(&self, d: DeviceId) -> StartResult {
        self.0.lock().unwrap().push(format!("Hal::start f{}", d.0));
        StartResult::Started
    }
    fn reset(&self, d: DeviceId) -> ResetResult {
        self.0.lock().unwrap().push(format!("Hal::reset f{}", d.0));
        ResetResult::Succeeded
    }
    fn shutdown(&self, _: DeviceId) {}
    fn release(&self, _: DeviceId) {}
    fn client_op(&self, _: DeviceId, _: ClientHandle) {}
    fn cut_client(&self, _: DeviceId, _: ClientHandle) {}
}

fn irp(d: &Driver, dev: DeviceId, minor: PnpMinor, token: u32) -> NtStatus {
    let irp: Arc<Irp> = Irp::new(dev, minor, token);
    d.dispatch_pnp(&irp);
    irp.wait()
}

/// `AddDevice` and `IRP_MN_START_DEVICE` for both functions, declared one group.
fn chip() -> (Driver, Trace) {
    let trace: Trace = Arc::default();
    let d = Driver::new(Config::DEFAULT, Arc::new(Chip(Arc::clone(&trace))));
    for (i, f) in [F0, F1].into_iter().enumerate() {
        d.add_device(f).unwrap();
        assert_eq!(
            irp(&d, f, PnpMinor::StartDevice, i as u32),
            NtStatus::SUCCESS
        );
        d.join_reset_group(f, GroupId(0)).unwrap();
    }
    (d, trace)
}

type Events = Arc<Mutex<Vec<Event>>>;

fn client(d: &Driver, dev: DeviceId) -> (MlxInterface, Events) {
    let events: Events = Arc::default();
    let e = Arc::clone(&events);
    let callback = Arc::new(move |ev| e.lock().unwrap().push(ev));
    let iface = d
        .register_client(dev, ClientKind::Trusted, callback)
        .unwrap();
    (iface, events)
}

fn wait_for(events: &Events, pred: impl Fn(&[Event]) -> bool) {
    for _ in 0..10_000 {
        if pred(&events.lock().unwrap()) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    panic!("events never arrived: {:?}", events.lock().unwrap());
}

fn ended(events: &[Event]) -> bool {
    events
        .iter()
        .any(|e| matches!(e, Event::ResetEnd { .. } | Event::Removed { .. }))
}

#[test]
fn a_reset_request_on_one_devnode_resets_the_chip_once_through_the_carrier() {
    let (d, trace) = chip();
    let (a, a_events) = client(&d, F0);
    let (b, b_events) = client(&d, F1);
    b.reset_request().unwrap();
    wait_for(&a_events, |e| e.contains(&Event::Reset));
    wait_for(&b_events, |e| e.contains(&Event::Reset));
    a.reset_execute().unwrap();
    assert!(
        !trace
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.starts_with("Hal::reset")),
        "no reset before every client of both devnodes answered"
    );
    b.reset_execute().unwrap();
    wait_for(&a_events, ended);
    wait_for(&b_events, ended);
    let end = Event::ResetEnd { epoch: Epoch(1) };
    assert_eq!(*a_events.lock().unwrap(), [Event::Reset, end]);
    assert_eq!(*b_events.lock().unwrap(), [Event::Reset, end]);
    assert_eq!(
        *trace.lock().unwrap(),
        ["Hal::start f0", "Hal::start f1", "Hal::reset f0"]
    );
    a.unregister().unwrap();
    b.unregister().unwrap();
    d.unload().unwrap();
}

#[test]
fn a_platform_level_reset_is_a_teardown_of_every_member_not_a_group_cycle() {
    let (d, trace) = chip();
    let (a, a_events) = client(&d, F0);
    let (b, b_events) = client(&d, F1);
    a.reset_request().unwrap();
    wait_for(&b_events, |e| e.contains(&Event::Reset));
    // PlatformLevelDeviceReset: both devices reported missing, their stacks torn down.
    for (i, f) in [F1, F0].into_iter().enumerate() {
        let token = 10 + i as u32;
        assert_eq!(
            irp(&d, f, PnpMinor::SurpriseRemoval, token),
            NtStatus::SUCCESS
        );
    }
    wait_for(&a_events, ended);
    wait_for(&b_events, ended);
    a.unregister().unwrap();
    b.unregister().unwrap();
    for (i, f) in [F1, F0].into_iter().enumerate() {
        assert_eq!(
            irp(&d, f, PnpMinor::RemoveDevice, 20 + i as u32),
            NtStatus::SUCCESS
        );
    }
    for events in [&a_events, &b_events] {
        let seen = events.lock().unwrap().clone();
        assert_eq!(seen, [Event::Reset, Event::Removed { surprise: true }]);
    }
    assert_eq!(
        *trace.lock().unwrap(),
        ["Hal::start f0", "Hal::start f1"],
        "no reset through a vanished devnode"
    );
    // Windows rebuilds the stacks: AddDevice and start again, a fresh device at epoch 0.
    d.add_device(F0).unwrap();
    assert_eq!(irp(&d, F0, PnpMinor::StartDevice, 30), NtStatus::SUCCESS);
    let epoch = d.runtime().inspect(|o| o.machine().epoch(F0));
    assert_eq!(epoch, Some(Epoch(0)));
    d.unload().unwrap();
}
