//! Issue 21's decision for the firmware (see the README, "Hardware operations: the slow
//! path under the critical section"): a client's hardware operation, from thread mode or
//! from an interrupt handler, is the core's `Access` / `AccessDone`, each one short
//! critical section on the target's lock; the machine is built without the fast path, so
//! it never asks for a gate, and every operation is counted by the machine itself.
//! Host tests on the target's lock type (`critical_section::Mutex<RefCell<…>>`, with
//! critical-section's `std` implementation).

use core::cell::RefCell;

use critical_section::Mutex;
use pnp_lifecycle::*;
use pnp_lifecycle_firmware::{FeedError, Lock, Shared};

const Q: usize = queue_capacity(1, 4);
type Machine = Mutex<RefCell<Shared<1, 4, 1, Q>>>;
const DEV: DeviceId = DeviceId(0);
const NOW: Tick = Tick(0);

fn feed(shared: &Machine, input: Input) -> Result<Reply, FeedError> {
    shared.lock(|s| s.feed(NOW, input)).unwrap()
}

/// Thread mode's work, done as the firmware's owner loop does it (clients ack `RESET` and
/// re-acquire): every output taken, in order.
fn pump(shared: &Machine) -> Vec<Output> {
    let mut seen = Vec::new();
    while let Some(output) = shared.lock(|s| s.pop()).unwrap() {
        seen.push(output);
        let answers = match output {
            Output::Hardware {
                device,
                command: HardwareCommand::Start,
            } => vec![Input::StartDone {
                device,
                result: StartResult::Started,
            }],
            Output::Hardware {
                device,
                command: HardwareCommand::Reset,
            } => vec![Input::ResetDone {
                device,
                result: ResetResult::Succeeded,
            }],
            Output::Notify { client, event } => {
                let answer = match event {
                    Event::Reset => Some(Input::ResetExecute { client }),
                    Event::ResetEnd { .. } => Some(Input::AcquireInterface { client }),
                    _ => None,
                };
                answer
                    .into_iter()
                    .chain([Input::CallbackDone { client }])
                    .collect()
            }
            _ => vec![],
        };
        for input in answers {
            let _ = feed(shared, input);
        }
    }
    seen
}

/// A started device with one client.
fn started() -> (&'static Machine, ClientHandle, Epoch) {
    let shared: &'static Machine = Box::leak(Box::new(Mutex::new(RefCell::new(Shared::new(
        Config::DEFAULT,
    )))));
    feed(shared, Input::AddDevice { device: DEV }).unwrap();
    let token = RequestToken(1);
    feed(shared, Input::Start { device: DEV, token }).unwrap();
    pump(shared);
    let kind = ClientKind::Trusted;
    let Ok(Reply::Registered { client, epoch }) =
        feed(shared, Input::Register { device: DEV, kind })
    else {
        panic!("not registered")
    };
    pump(shared);
    (shared, client, epoch)
}

/// The interrupt handler's bracket: one critical section to begin, one to end.
fn isr_begin(shared: &Machine, client: ClientHandle, epoch: Epoch) -> Result<Reply, FeedError> {
    let what = Access::HardwareOp;
    feed(
        shared,
        Input::Access {
            client,
            epoch,
            what,
        },
    )
}

fn counted(shared: &Machine, client: ClientHandle) -> u8 {
    shared
        .lock(|s| s.machine().client(client).map(|v| v.operations_in_flight))
        .unwrap()
        .unwrap_or(0)
}

#[test]
fn an_interrupt_operation_is_counted_by_the_machine_and_holds_the_reset_back() {
    let (shared, client, epoch) = started();
    isr_begin(shared, client, epoch).unwrap();
    assert_eq!(counted(shared, client), 1);
    // Thread mode asks for a reset cycle while the interrupt's operation runs.
    feed(shared, Input::ResetRequest { client }).unwrap();
    let before = pump(shared);
    let reset = |o: &Output| {
        matches!(
            o,
            Output::Hardware {
                command: HardwareCommand::Reset,
                ..
            }
        )
    };
    assert!(
        !before.iter().any(reset),
        "reset under the operation: {before:?}"
    );
    feed(shared, Input::AccessDone { client }).unwrap();
    let after = pump(shared);
    assert!(
        after.iter().any(reset),
        "the reset once it ended: {after:?}"
    );
    // Built without the fast path: the machine never asks the firmware for a gate.
    let gate = |o: &Output| matches!(o, Output::FastPath { .. });
    assert!(!before.iter().chain(&after).any(gate));
    // The interface of the old epoch is refused by name, counting nothing.
    assert!(matches!(
        isr_begin(shared, client, epoch),
        Err(FeedError::Refused(Error::StaleEpoch { .. }))
    ));
    assert_eq!(counted(shared, client), 0);
}

#[test]
fn in_system_sleep_an_interrupt_operation_is_refused_by_name_and_changes_nothing() {
    let (shared, client, epoch) = started();
    let kind = PowerDownKind::SystemSleep;
    let token = RequestToken(2);
    feed(
        shared,
        Input::PowerDown {
            device: DEV,
            kind,
            token,
        },
    )
    .unwrap();
    for output in pump(shared) {
        if let Output::Hardware {
            command: HardwareCommand::PowerDown,
            ..
        } = output
        {
            feed(shared, Input::PowerDownDone { device: DEV }).unwrap();
        }
    }
    pump(shared);
    let before = shared.lock(|s| s.machine().clone()).unwrap();
    assert!(matches!(
        isr_begin(shared, client, epoch),
        Err(FeedError::Refused(Error::Suspended { .. }))
    ));
    let after = shared.lock(|s| s.machine().clone()).unwrap();
    assert!(before == after, "a refused access changes nothing");
    assert_eq!(counted(shared, client), 0);
}
