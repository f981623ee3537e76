//! The OS-side view of a reset cycle racing driver unload, with real threads: the PnP
//! manager starts the device, two mlx4 clients register, one asks for a reset, and the
//! driver unloads while the cycle runs. Prints every IRP, status, hardware call and client
//! callback as it happens.
//!
//! `cargo run -p pnp-lifecycle-windows --example windows_unload_race`

use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use pnp_lifecycle::{ClientHandle, ClientKind, Config, DeviceId, Event, ResetResult, StartResult};
use pnp_lifecycle_windows::{Driver, Hal, Irp, MlxInterface, NtStatus, PnpMinor};

struct PrintingHal;

impl Hal for PrintingHal {
    fn start(&self, device: DeviceId) -> StartResult {
        println!("[hal]      start device {}", device.0);
        StartResult::Started
    }
    fn reset(&self, device: DeviceId) -> ResetResult {
        println!("[hal]      hardware reset of device {} ...", device.0);
        thread::sleep(std::time::Duration::from_millis(20));
        println!("[hal]      hardware reset of device {} done", device.0);
        ResetResult::Succeeded
    }
    fn shutdown(&self, device: DeviceId) {
        println!("[hal]      shutdown device {}", device.0);
    }
    fn release(&self, device: DeviceId) {
        println!("[hal]      release resources of device {}", device.0);
    }
    fn client_op(&self, _: DeviceId, _: ClientHandle) {}
    fn cut_client(&self, _: DeviceId, _: ClientHandle) {}
}

type Inbox = Arc<(Mutex<Vec<Event>>, Condvar)>;

fn client(driver: &Driver, name: &'static str) -> (MlxInterface, Inbox) {
    let inbox: Inbox = Arc::default();
    let cb_inbox = inbox.clone();
    let iface = driver
        .register_client(
            DeviceId(0),
            ClientKind::Trusted,
            Arc::new(move |event| {
                println!("[{name}]  callback: {}", describe(event));
                cb_inbox.0.lock().unwrap().push(event);
                cb_inbox.1.notify_all();
            }),
        )
        .expect("register");
    println!(
        "[{name}]  registered: slot {} epoch {}",
        iface.handle().slot,
        iface.epoch().0
    );
    (iface, inbox)
}

fn describe(event: Event) -> String {
    match event {
        Event::Reset => "RESET".into(),
        Event::ResetEnd { epoch } => format!("RESET_END (epoch {})", epoch.0),
        other => format!("{other:?}"),
    }
}

fn run_client(name: &'static str, mut iface: MlxInterface, inbox: Inbox, request: bool) {
    if request {
        println!(
            "[{name}]  reset_request -> {:?}",
            iface.reset_request().map_err(NtStatus::name)
        );
    }
    loop {
        let event = {
            let mut events = inbox.0.lock().unwrap();
            while events.is_empty() {
                events = inbox.1.wait(events).unwrap();
            }
            events.remove(0)
        };
        match event {
            Event::Reset => println!(
                "[{name}]  reset_execute -> {:?}",
                iface.reset_execute().map_err(NtStatus::name)
            ),
            Event::ResetEnd { .. } => {
                if let Ok(fresh) = iface.acquire() {
                    println!(
                        "[{name}]  acquired fresh interface, epoch {}",
                        fresh.epoch().0
                    );
                    iface = fresh;
                }
            }
            Event::Removed { .. } | Event::Revoked => {
                println!(
                    "[{name}]  unregister -> {:?}",
                    iface.unregister().map_err(NtStatus::name)
                );
                return;
            }
            _ => {}
        }
    }
}

fn main() {
    let driver = Driver::new(Config::DEFAULT, Arc::new(PrintingHal));
    println!(
        "[driver]   AddDevice -> {:?}",
        driver.add_device(DeviceId(0))
    );
    let start = Irp::new(DeviceId(0), PnpMinor::StartDevice, 1);
    println!(
        "[pnp mgr]  {} -> {}",
        start.minor.name(),
        driver.dispatch_pnp(&start)
    );
    println!(
        "[pnp mgr]  {} completed: {}",
        start.minor.name(),
        start.wait()
    );

    let (ipoib, ipoib_inbox) = client(&driver, "ipoib");
    let (srp, srp_inbox) = client(&driver, "srp  ");
    let a = thread::spawn(move || run_client("ipoib", ipoib, ipoib_inbox, true));
    let b = thread::spawn(move || run_client("srp  ", srp, srp_inbox, false));

    let unloader = {
        let driver = driver.clone();
        thread::spawn(move || {
            println!("[driver]   DriverUnload");
            println!(
                "[driver]   unload -> {:?} (UnloadMayFinish seen)",
                driver.unload().map_err(NtStatus::name)
            );
        })
    };
    a.join().unwrap();
    b.join().unwrap();
    unloader.join().unwrap();

    // The PnP manager's late REMOVE finds the driver gone: refused, completed once.
    let remove = Irp::new(DeviceId(0), PnpMinor::RemoveDevice, 2);
    println!(
        "[pnp mgr]  {} -> {}",
        remove.minor.name(),
        driver.dispatch_pnp(&remove)
    );
    let status = remove.wait();
    println!("[pnp mgr]  {} completed: {status}", remove.minor.name());
    println!(
        "[driver]   IRP completions: start {}, remove {}; runtime anomalies {}",
        start.completions(),
        remove.completions(),
        driver.runtime().inspect(|o| o.anomalies())
    );
}
