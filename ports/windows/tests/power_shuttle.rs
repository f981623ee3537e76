//! Power under shuttle (random and PCT schedules) with the KMDF callbacks: a power-down
//! (`IRP_MN_SET_POWER`) racing a reset request, a surprise removal, a remove and unload.
//! Each scenario asserts the common oracle (I1-I5, I12, I14) over what the clients,
//! hardware and IRPs observed, every IRP completed exactly once, no runtime anomaly, and the
//! recorded KMDF callbacks in an order KMDF allows (`kmdf::check_order`), ending with
//! Flush → Cleanup once the device is gone.
//!
//! `WINDOWS_SHUTTLE_ITERS` sets the schedules per scheduler per scenario (default 2000).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pnp_lifecycle_testkit::windows_port::kmdf::{check_order, Step};
use pnp_lifecycle_testkit::windows_port::{both_schedulers, iterations, World};
use pnp_lifecycle_windows::{
    DevicePowerState as D, PnpMinor, PowerState, SystemPowerState as S, WdfPowerDeviceState,
};
use shuttle::thread::{self, JoinHandle};

/// Per scenario: schedules whose device reached Dx (`D0Exit(D3)` ran).
static REACHED_DX: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

fn run(name: &str, which: usize, scenario: fn()) {
    let n = both_schedulers(scenario, iterations(2000));
    let dx = REACHED_DX[which].load(Ordering::SeqCst);
    println!("{name}: {n} schedules (random + PCT), {dx} reached Dx");
    assert!(dx > 0, "{name}: no schedule reached Dx");
}

fn set(state: PowerState) -> PnpMinor {
    PnpMinor::SetPower(state)
}

/// A client: its event thread (asks for a reset first if `request`) and one hardware
/// operation on another thread (it may wait for a power-up, or be refused).
fn spawn_client(w: &Arc<World>, request: bool) -> Vec<JoinHandle<()>> {
    let c = w.register().expect("register");
    let io = c.iface.clone();
    let wc = Arc::clone(w);
    vec![
        thread::spawn(move || wc.run_client(c, request)),
        thread::spawn(move || {
            let _ = io.hardware_op();
        }),
    ]
}

fn join(handles: Vec<JoinHandle<()>>) {
    for h in handles {
        h.join().expect("thread ended without panicking");
    }
}

/// The oracle, the KMDF order, and (once the device is gone) Flush → Cleanup last.
fn verdict(w: &World, which: usize, removed: bool) {
    w.finish();
    let steps = w.kmdf.as_ref().expect("a powered world").steps();
    if let Err(e) = check_order(&steps) {
        panic!("{e}");
    }
    if steps.contains(&Step::D0Exit(WdfPowerDeviceState::D3)) {
        REACHED_DX[which].fetch_add(1, Ordering::SeqCst);
    }
    if removed {
        assert!(
            steps.ends_with(&[Step::SelfManagedIoFlush, Step::SelfManagedIoCleanup]),
            "removal ends with Flush, Cleanup: {steps:?}"
        );
    }
}

/// An idle power-down (D3) and back (D0) racing a client's reset request and another
/// client's hardware operation.
#[test]
fn shuttle_power_down_racing_reset_request() {
    run("power-down racing a reset request", 0, || {
        let w = World::powered();
        let mut hs = spawn_client(&w, true);
        hs.extend(spawn_client(&w, false));
        let p = Arc::clone(&w);
        let power = thread::spawn(move || {
            p.pnp(set(PowerState::Device(D::D3)));
            p.pnp(set(PowerState::Device(D::D0)));
        });
        power.join().expect("power thread");
        w.unload();
        join(hs);
        verdict(&w, 0, true);
    });
}

/// A system sleep (S3) racing a surprise removal, then remove and unload.
#[test]
fn shuttle_power_down_racing_surprise_removal() {
    run("power-down racing surprise removal", 1, || {
        let w = World::powered();
        let mut hs = spawn_client(&w, false);
        let p = Arc::clone(&w);
        hs.push(thread::spawn(move || {
            p.pnp(set(PowerState::System(S::S3)));
        }));
        let r = Arc::clone(&w);
        hs.push(thread::spawn(move || {
            r.pnp(PnpMinor::SurpriseRemoval);
            r.pnp(PnpMinor::RemoveDevice);
        }));
        join(hs);
        w.unload();
        verdict(&w, 1, true);
    });
}

/// An idle power-down and back racing query remove and remove.
#[test]
fn shuttle_power_down_racing_remove() {
    run("power-down racing remove", 2, || {
        let w = World::powered();
        let mut hs = spawn_client(&w, false);
        let p = Arc::clone(&w);
        hs.push(thread::spawn(move || {
            p.pnp(set(PowerState::Device(D::D3)));
            p.pnp(set(PowerState::Device(D::D0)));
        }));
        let r = Arc::clone(&w);
        hs.push(thread::spawn(move || {
            r.pnp(PnpMinor::QueryRemoveDevice);
            r.pnp(PnpMinor::RemoveDevice);
        }));
        join(hs);
        w.unload();
        verdict(&w, 2, true);
    });
}

/// A system sleep racing driver unload (which removes the device whatever its power).
#[test]
fn shuttle_power_down_racing_unload() {
    run("power-down racing unload", 3, || {
        let w = World::powered();
        let mut hs = spawn_client(&w, true);
        let p = Arc::clone(&w);
        hs.push(thread::spawn(move || {
            p.pnp(set(PowerState::System(S::S4)));
        }));
        let u = Arc::clone(&w);
        hs.push(thread::spawn(move || u.unload()));
        join(hs);
        verdict(&w, 3, true);
    });
}
