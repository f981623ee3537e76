//! Planted port faults (`pnp_lifecycle_testkit::windows_port::planted`): substitute
//! implementations of the port's seams, each a mistake a port author could make. Each is
//! run under shuttle and must be CAUGHT (the oracle, a finding's assertion, or shuttle's
//! deadlock detection); the same scenarios on the real port are clean.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use pnp_lifecycle::{ClientKind, Event, ResetResult};
use pnp_lifecycle_runtime::{Kernel, Monitor, ShuttleKernel};
use pnp_lifecycle_testkit::observed::Obs;
use pnp_lifecycle_testkit::windows_port::kmdf::KmdfRecorder;
use pnp_lifecycle_testkit::windows_port::planted::{
    remove_after_holders_left, DeferredCallbacks, EarlyResetDone, FenceNotCut, LyingKernel,
    PowerUpNotCarriedOut,
};
use pnp_lifecycle_testkit::windows_port::scenarios::{
    remove_against_a_stuck_operation, reset_against_an_operation_past_its_fence,
};
use pnp_lifecycle_testkit::windows_port::{iterations, RecordedOs, World, DEV};
use pnp_lifecycle_windows::{
    DevicePowerState, MlxInterface, NtStatus, PnpMinor, PowerState, WindowsVocabulary,
};
use shuttle::thread;

/// Run `scenario` under shuttle's random scheduler; the failure message if it found one.
fn failure(scenario: impl Fn() + Send + Sync + 'static) -> Option<String> {
    let n = iterations(2000);
    let result = catch_unwind(AssertUnwindSafe(|| shuttle::check_random(scenario, n)));
    result.err().map(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

fn caught(name: &str, scenario: impl Fn() + Send + Sync + 'static, expect: &[&str]) {
    let message = failure(scenario).unwrap_or_else(|| panic!("planted {name}: NOT caught"));
    let line = message.lines().next().unwrap_or_default();
    assert!(
        expect.iter().any(|e| message.contains(e)),
        "planted {name}: caught, but not as expected ({expect:?}): {line}"
    );
    println!("planted {name}: caught ({line})");
}

/// A moment passes: whatever the port left running gets to run before the verdict.
fn settle() {
    for _ in 0..20 {
        thread::yield_now();
    }
}

/// A client's number and interface, for a callback that makes it leave.
type Leaver<K, O> = (u32, MlxInterface<K, O>);

/// A client whose `Removed` callback tries its own blocking unregister (refused: it would
/// wait for itself), then leaves with `unregister_nowait`; the driver unloads.
fn self_unregister<K: Kernel, O: WindowsVocabulary<K>>(w: Arc<World<K, O>>) {
    let slot: Arc<K::Monitor<Option<Leaver<K, O>>>> = Arc::new(Monitor::new(None));
    let hook_slot = Arc::clone(&slot);
    let log = w.log.clone();
    let c = w
        .register_with(ClientKind::Trusted, move |event| {
            if let Event::Removed { .. } = event {
                let Some((id, iface)) = hook_slot.with(|s| s.clone()) else {
                    return;
                };
                assert_eq!(iface.unregister(), Err(NtStatus::POSSIBLE_DEADLOCK));
                log.push(Obs::DetachBegin { client: id });
                let _ = iface.unregister_nowait();
            }
        })
        .expect("register");
    slot.with(|s| *s = Some((c.id, c.iface.clone())));
    w.unload();
    w.finish();
}

/// Two clients, one asks for a reset, the driver unloads meanwhile.
fn unload_racing_reset<K: Kernel, O: WindowsVocabulary<K>>(w: Arc<World<K, O>>) {
    let mut threads = Vec::new();
    for request in [true, false] {
        let c = w.register().expect("register");
        let wc = Arc::clone(&w);
        threads.push(thread::spawn(move || wc.run_client(c, request)));
    }
    let u = Arc::clone(&w);
    threads.push(thread::spawn(move || u.unload()));
    for t in threads {
        t.join().expect("thread ended");
    }
    settle();
    w.finish();
}

/// A client asks for a reset and leaves at once (a blocking unregister, which returns once
/// no callback of it runs or will run); the driver unloads.
fn request_then_leave<K: Kernel, O: WindowsVocabulary<K>>(w: Arc<World<K, O>>) {
    let c = w.register().expect("register");
    let wc = Arc::clone(&w);
    let client = thread::spawn(move || {
        let _ = c.iface.reset_request();
        wc.unregister(c.id, &c.iface);
    });
    client.join().expect("client ended");
    w.unload();
    settle();
    w.finish();
}

/// A client asks for a reset and, once told RESET_END, runs hardware operations through the
/// fresh interface; then it leaves and the driver unloads.
fn operations_after_reset<K: Kernel, O: WindowsVocabulary<K>>(w: Arc<World<K, O>>) {
    let ended = Arc::new(K::Monitor::new(false));
    let hook_ended = Arc::clone(&ended);
    let c = w
        .register_with(ClientKind::Trusted, move |event| {
            if let Event::ResetEnd { .. } = event {
                hook_ended.with(|e: &mut bool| *e = true);
            }
        })
        .expect("register");
    let id = c.id;
    let wc = Arc::clone(&w);
    let client = thread::spawn(move || {
        c.iface.reset_request().expect("reset_request");
        // The RESET callback only queues; answer it here.
        wc.log.push(Obs::AnswerTried {
            client: id,
            device: DEV,
        });
        let accepted = c.iface.reset_execute().is_ok();
        wc.log.push(Obs::AnswerResult {
            client: id,
            accepted,
        });
        ended.wait_until(|e| e.then_some(()));
        let fresh = c.iface.acquire().expect("the fresh interface");
        for _ in 0..2 {
            fresh.hardware_op().expect("an operation after RESET_END");
        }
        wc.unregister(id, &fresh);
    });
    client.join().expect("client ended");
    w.unload();
    settle();
    w.finish();
}

type Plain = RecordedOs<ShuttleKernel>;

/// shuttle's panic hook is process-wide: a schedule that panics on purpose (a planted
/// fault caught) while another test's shuttle run installs or restores the hook loses its
/// panic ("ExecutionState NotSet"). The tests of this file run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn planted_lying_context_is_caught() {
    let _serial = serial();
    caught(
        "lying Kernel::context (a blocking unregister inside a callback is not refused)",
        || {
            self_unregister(World::<LyingKernel, RecordedOs<LyingKernel>>::with(
                ResetResult::Succeeded,
                |os| os,
            ))
        },
        &["deadlock", "POSSIBLE_DEADLOCK", "left: Ok"],
    );
}

#[test]
fn planted_deferred_callbacks_are_caught() {
    let _serial = serial();
    caught(
        "deferred callbacks (a callback's return reported before it ran)",
        || {
            request_then_leave(World::<ShuttleKernel, DeferredCallbacks<Plain>>::with(
                ResetResult::Succeeded,
                DeferredCallbacks::new,
            ))
        },
        &["I1", "I2", "I4"],
    );
}

#[test]
fn planted_early_reset_done_is_caught() {
    let _serial = serial();
    caught(
        "early ResetDone (the reset reported done before it ran)",
        || {
            operations_after_reset(World::<ShuttleKernel, EarlyResetDone<Plain>>::with(
                ResetResult::Succeeded,
                EarlyResetDone::new,
            ))
        },
        &["I12", "I2", "hardware resets"],
    );
}

/// A client's operations while the device idles to D3: the first access wakes it.
fn operations_across_idle<K: Kernel, O: WindowsVocabulary<K>>(w: Arc<World<K, O>>) {
    let c = w.register().expect("register");
    let io = c.iface.clone();
    let wc = Arc::clone(&w);
    let events = thread::spawn(move || wc.run_client(c, false));
    let d3 = PnpMinor::SetPower(PowerState::Device(DevicePowerState::D3));
    assert_eq!(w.pnp(d3), NtStatus::SUCCESS);
    for _ in 0..2 {
        let _ = io.hardware_op();
    }
    settle();
    w.unload();
    events.join().expect("client thread");
    w.finish();
}

/// A powered world (recording KMDF callbacks) whose vocabulary `wrap` plants a fault.
fn powered<O: WindowsVocabulary<ShuttleKernel>>(
    wrap: impl FnOnce(RecordedOs<ShuttleKernel>) -> O,
) -> Arc<World<ShuttleKernel, O>> {
    World::build(
        ResetResult::Succeeded,
        Some(Arc::new(KmdfRecorder::new(2))),
        wrap,
    )
}

#[test]
fn planted_power_up_not_carried_out_is_caught() {
    let _serial = serial();
    caught(
        "power-up not carried out (PowerUpDone without D0Entry: the old stub)",
        || operations_across_idle(powered(PowerUpNotCarriedOut::new)),
        &["I14"],
    );
}

/// Issue 22, item 2, planted: the remove waits for the device's operations before the core
/// sees it (the old `IoReleaseRemoveLockAndWait` first). A stuck operation ends only when
/// the core's fence cuts it, which never comes: shuttle reports the deadlock.
#[test]
fn planted_remove_waiting_for_holders_is_caught() {
    let _serial = serial();
    caught(
        "remove waits for remove-lock holders before the core sees it",
        || {
            let w = World::new();
            w.set_pnp_dispatch(remove_after_holders_left);
            remove_against_a_stuck_operation(w);
        },
        &["deadlock"],
    );
}

/// Issue 22, item 3, planted: the fence's news is dropped, so the fenced client's path is
/// never cut and its operation, past its grace, touches the hardware during the reset.
#[test]
fn planted_fence_not_cut_is_caught() {
    let _serial = serial();
    caught(
        "fence not cut (the fenced news ignored: Hal::cut_client never called)",
        || {
            reset_against_an_operation_past_its_fence(
                World::<ShuttleKernel, FenceNotCut<Plain>>::with(
                    ResetResult::Succeeded,
                    FenceNotCut::new,
                ),
            );
        },
        &["I12"],
    );
}

#[test]
fn control_runs_on_the_real_port_are_clean() {
    let _serial = serial();
    let clean = |s: fn(Arc<World>)| failure(move || s(World::new()));
    for (name, scenario) in [
        ("self unregister", self_unregister as fn(Arc<World>)),
        ("unload racing reset", unload_racing_reset),
        ("request then leave", request_then_leave),
        ("operations after reset", operations_after_reset),
        (
            "remove against a stuck operation",
            remove_against_a_stuck_operation,
        ),
        ("reset against an operation past its fence", |w| {
            reset_against_an_operation_past_its_fence(w);
        }),
    ] {
        assert_eq!(clean(scenario), None, "control {name}");
        println!("control {name}: clean over {} schedules", iterations(2000));
    }
    let idle = failure(|| operations_across_idle(powered(|os| os)));
    assert_eq!(idle, None, "control operations across idle");
    println!(
        "control operations across idle: clean over {} schedules",
        iterations(2000)
    );
}
