//! The owner runtime with a toy OS vocabulary that prints what it is asked to do: one
//! device, two clients, a soft-reset cycle, removal, unload.
//!
//! `cargo run -p pnp-lifecycle-runtime --example owner`

use std::sync::Arc;

use pnp_lifecycle::{
    queue_capacity, ClientHandle, ClientKind, Config, DeviceId, Epoch, Event, HardwareCommand,
    Input, PhaseKind, PowerUpResult, ResetResult, StartResult,
};
use pnp_lifecycle_runtime::{Completion, Dispatch, MonotonicClock, News, Os, Runtime, StdKernel};

/// What a client registers: called with its event outside the lock; what it returns (a
/// vote, a detach) is fed to the machine before `CallbackDone`.
type Callback = Arc<dyn Fn(ClientHandle, Event) -> Option<Input> + Send + Sync>;

/// The toy OS: prints every callback, hardware command, completion and piece of news.
struct Printer;

impl Os for Printer {
    type Callback = Callback;
    /// An OS request is its name here (an IRP, a PCI call in a real port).
    type Request = &'static str;
    type Job = ();

    fn call(&self, callback: &Callback, client: ClientHandle, event: Event) -> Option<Input> {
        let answer = callback(client, event);
        match answer {
            Some(input) => println!("  client {}: {event:?} -> {:?}", client.slot, input.kind()),
            None => println!("  client {}: {event:?}", client.slot),
        }
        answer
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        println!("  hardware: {command:?}");
        match command {
            HardwareCommand::Start => Some(Input::StartDone {
                device,
                result: StartResult::Started,
            }),
            HardwareCommand::Reset => Some(Input::ResetDone {
                device,
                result: ResetResult::Succeeded,
            }),
            HardwareCommand::PowerDown => Some(Input::PowerDownDone { device }),
            HardwareCommand::PowerUp => Some(Input::PowerUpDone {
                device,
                result: PowerUpResult::Powered,
            }),
            // Quiesce and release: nothing to report back.
            HardwareCommand::Shutdown | HardwareCommand::ReleaseResources => None,
        }
    }

    fn complete(&self, request: &'static str, completion: Completion) {
        println!("  OS: {request} completed: {completion:?}");
    }

    fn news(&self, news: News) {
        println!("  news: {news:?}");
    }
}

const DEV: DeviceId = DeviceId(0);
type Rt = Runtime<Printer, StdKernel, 1, 2, 1, { queue_capacity(1, 2) }>;

/// A client that quiesces and answers RESET, takes the fresh interface after RESET_END,
/// and detaches when the device goes away.
fn well_behaved() -> Callback {
    Arc::new(|client, event| match event {
        Event::Reset => Some(Input::ResetExecute { client }),
        Event::ResetEnd { .. } => Some(Input::AcquireInterface { client }),
        Event::Removed { .. } => Some(Input::Unregister { client }),
        _ => None,
    })
}

fn main() {
    // Inline: the calling thread carries out the work its call ordered, so the
    // transcript is in one order. `Dispatch::Thread` hands it to dispatcher threads
    // (one per busy lane), as the Windows port does.
    let rt: Arc<Rt> = Runtime::new(
        Config::DEFAULT,
        Printer,
        Arc::new(MonotonicClock::new()),
        Dispatch::Inline,
    );

    println!("add and start the device");
    rt.feed(Input::AddDevice { device: DEV })
        .expect("a free slot");
    rt.with(|owner, now| owner.submit(now, "start", |token| Input::Start { device: DEV, token }))
        .expect("start accepted");

    println!("register two clients");
    let mut clients = Vec::new();
    for kind in [ClientKind::Trusted, ClientKind::Untrusted] {
        let (client, epoch) = rt
            .with(|owner, now| owner.register(now, DEV, kind, well_behaved()))
            .expect("a free client slot");
        println!(
            "  client {} registered ({kind:?}) at {epoch:?}",
            client.slot
        );
        clients.push(client);
    }

    println!("client 0 asks for a soft reset: both quiesce, the hardware resets, both resume");
    let answer = rt.feed(Input::ResetRequest { client: clients[0] });
    println!("  reset_request returned {answer:?} (inline: the cycle ran inside the call)");
    let epoch = rt
        .wait_until(|owner, _| {
            let idle = clients.iter().all(|c| {
                owner
                    .machine()
                    .client(*c)
                    .is_some_and(|v| !v.callback_in_flight)
            });
            let epoch = owner.machine().epoch(DEV).filter(|e| *e > Epoch(0));
            epoch.filter(|_| idle)
        })
        .expect("not called from a callback");
    println!("  the device is at {epoch:?}");

    println!("the OS removes the device: clients are told, detach, then the teardown");
    rt.with(|owner, now| owner.submit(now, "remove", |token| Input::Remove { device: DEV, token }))
        .expect("remove accepted");
    rt.wait_until(|owner, _| (owner.machine().phase(DEV) == Some(PhaseKind::Absent)).then_some(()))
        .expect("not called from a callback");

    println!("driver unload");
    rt.unload()
        .expect("unload finishes: no device, no client left");
    let anomalies = rt.inspect(|o| o.anomalies());
    println!("unloaded ({rt:?}); anomalies: {anomalies}");
    assert_eq!(anomalies, 0, "the machine refused nothing the runtime fed");
}
