//! Shuttle scenarios of issue 22 shared by the port's own tests (`tests/shuttle.rs`) and
//! its planted faults (`tests/planted.rs`): a remove against a client operation that never
//! ends by itself (item 2), and a reset against an operation that outran its client's
//! fence (item 3). Each asserts what the OS demands; the hardware model ([`TestHal`])
//! makes an access after its client's path was cut hit nothing.

use std::sync::Arc;

use pnp_lifecycle::{ClientHandle, ClientKind, ClientState, Config, Event, PhaseKind, Role};
use pnp_lifecycle_runtime::{Clock, Kernel, Monitor, ShuttleMonitor};
use pnp_lifecycle_windows::{NtStatus, PnpMinor, WinOwner, WindowsVocabulary};
use shuttle::thread;

use super::{Hold, World, DEV};

/// How long the core may take to end a remove that a client's operation holds up: its
/// removal deadline (`detach_timeout`), then the runtime fence's grace
/// (`max(callback_timeout, operation_timeout)`).
pub const REMOVE_BOUND: u64 = Config::DEFAULT.detach_timeout
    + if Config::DEFAULT.callback_timeout > Config::DEFAULT.operation_timeout {
        Config::DEFAULT.callback_timeout
    } else {
        Config::DEFAULT.operation_timeout
    };

/// Wait until `client` has an operation in flight (on the fast path or granted by the core).
fn in_flight<K: Kernel, O: WindowsVocabulary<K>>(w: &World<K, O>, client: ClientHandle) {
    // Polled: an operation on the fast path takes no lock, so nothing would wake a wait.
    while w
        .driver
        .runtime()
        .inspect(|owner| owner.operations_in_flight(client))
        == 0
    {
        thread::yield_now();
    }
}

/// The timer DPC: fire at every deadline (moving the clock to it) until `done`.
fn timer_until<K: Kernel, O: WindowsVocabulary<K>>(
    w: &World<K, O>,
    done: impl Fn(&WinOwner<O>) -> bool,
) {
    for _ in 0..32 {
        let due = w
            .driver
            .runtime()
            .wait_until(|owner, _| match done(owner) {
                true => Some(None),
                false => owner.poll_timeout().map(Some),
            })
            .expect("the timer runs outside callbacks");
        let Some(at) = due else {
            return;
        };
        if at > w.clock.now() {
            w.clock.set(at);
        }
        let _ = w.driver.timeout();
    }
    panic!("the timer fired 32 times and the scenario did not end");
}

/// Item 2: a client's hardware operation never ends by itself ([`Hold::Stuck`]; the
/// client never reads its events, so it never detaches either). `IRP_MN_REMOVE_DEVICE`
/// must still complete, with success, within the core's removal deadline plus the fence's
/// grace: the core revokes and fences the client, the port cuts its path
/// ([`pnp_lifecycle_windows::Hal::cut_client`]), which ends the stuck operation, and the
/// teardown follows. A dispatch that waits for the operation before the core sees the
/// remove waits forever (shuttle: deadlock).
pub fn remove_against_a_stuck_operation<K: Kernel, O: WindowsVocabulary<K>>(w: Arc<World<K, O>>) {
    let c = w.register().expect("register");
    let client = c.iface.handle();
    w.hal.hold(client, Hold::Stuck);
    let iface = c.iface.clone();
    let io = thread::spawn(move || iface.hardware_op());
    in_flight(&w, client);
    let sent = w.clock.now();
    let remover = {
        let w = Arc::clone(&w);
        thread::spawn(move || w.pnp(PnpMinor::RemoveDevice))
    };
    timer_until(&w, |owner| {
        owner
            .machine()
            .phase(DEV)
            .is_none_or(|p| p == PhaseKind::Absent)
    });
    assert_eq!(
        remover.join().expect("the PnP manager's thread"),
        NtStatus::SUCCESS,
        "IRP_MN_REMOVE_DEVICE against a stuck operation"
    );
    let took = w.clock.now().0 - sent.0;
    assert!(
        took <= REMOVE_BOUND,
        "the remove took {took} ticks, more than the removal deadline and the fence's grace ({REMOVE_BOUND})"
    );
    assert!(w.hal.is_cut(client), "the stuck client's path was cut");
    let _ = io.join().expect("the I/O thread");
    w.unload();
    w.finish();
}

/// Item 3: an untrusted client's operation is in flight and stays there ([`Hold::Until`])
/// while the client never answers RESET; the timer passes its answer deadline (revoked,
/// fenced: the fence waits for the operation), then the fence's grace (`FenceDone`: the
/// reset may go ahead). Then the operation goes on touching the hardware while the reset
/// runs. The hardware model panics on an access during the reset unless the client's path
/// was cut first. Returns whether the reset ran while the operation was still inside
/// (the overlap the cut must make harmless).
pub fn reset_against_an_operation_past_its_fence<K: Kernel, O: WindowsVocabulary<K>>(
    w: Arc<World<K, O>>,
) -> bool {
    let told = Arc::new(ShuttleMonitor::new(false));
    let hook = Arc::clone(&told);
    let u = w
        .register_with(ClientKind::Untrusted, move |event| {
            if event == Event::Reset {
                hook.with(|t| *t = true);
            }
        })
        .expect("register the untrusted client");
    let client = u.iface.handle();
    let gate = Arc::new(ShuttleMonitor::new(false));
    w.hal.hold(client, Hold::Until(Arc::clone(&gate), 4));
    let iface = u.iface.clone();
    let io = thread::spawn(move || {
        let _ = iface.hardware_op();
    });
    in_flight(&w, client);
    let t = w.register().expect("register the trusted client");
    let trusted = t.iface.handle();
    let requester = {
        let w = Arc::clone(&w);
        thread::spawn(move || w.run_client(t, true))
    };
    told.wait_until(|t| t.then_some(()));
    // The trusted client answered RESET and its callback returned before the clock moves
    // (else the grace below would pass its callback deadline too).
    let _ = w.driver.runtime().wait_until(|owner, _| {
        let view = owner.machine().client(trusted)?;
        let answered = matches!(
            view.state,
            ClientState::Active {
                role: Role::Acked,
                ..
            }
        );
        (answered && !view.callback_in_flight).then_some(())
    });
    let config = Config::DEFAULT;
    w.clock.advance(config.untrusted_ack_timeout + 1);
    let _ = w.driver.timeout(); // revoked; the fence waits for the operation
    w.clock.advance(REMOVE_BOUND - config.detach_timeout + 1);
    let _ = w.driver.timeout(); // the grace passed: FenceDone, the reset may go ahead
    gate.with(|g| *g = true);
    io.join().expect("the I/O thread");
    w.unload();
    requester.join().expect("the trusted client");
    w.finish();
    reset_inside_operation(&w.log.snapshot(), w.ids.of(client))
}

/// Whether a hardware reset was commanded between `client`'s operation begin and end.
fn reset_inside_operation(log: &[crate::observed::Obs], client: u32) -> bool {
    use crate::observed::Obs;
    let mut open = false;
    for o in log {
        match o {
            Obs::OperationBegin { client: c, .. } if *c == client => open = true,
            Obs::OperationEnd { client: c, .. } if *c == client => open = false,
            Obs::Hardware {
                command: pnp_lifecycle::HardwareCommand::Reset,
                ..
            } if open => return true,
            _ => {}
        }
    }
    false
}
