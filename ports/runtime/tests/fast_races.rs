//! The fast path's races under shuttle (random and PCT schedules, issue 21): fast-path
//! operations of two clients on threads of their own race a reset cycle (the machine's
//! close and reopen of every gate), a revocation (the fence), surprise removal, a
//! system-sleep power-down and unload, with both dispatch modes. Each checks that no
//! hardware command that needs the operations drained (reset, shutdown, release,
//! power-down) ran while an operation was in flight uncounted, that no fenced client began
//! one, that every operation ended and that the owner saw no anomaly.
//!
//! `PNP_FAST_SHUTTLE_ITERS` schedules per scheduler and case (default 300).

mod toy;

use std::sync::atomic::Ordering;

use pnp_lifecycle_runtime::Dispatch;
use toy::Against;

fn iters() -> usize {
    std::env::var("PNP_FAST_SHUTTLE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// Runs both dispatch modes; asserts the landmark that an operation granted on the fast
/// path was carried by a close while it ran (the race the case is about was reached).
fn explore(against: Against) {
    let _serial = serial();
    toy::CARRIED.store(0, Ordering::Relaxed);
    for dispatch in [Dispatch::Thread, Dispatch::Inline] {
        let n = iters();
        shuttle::check_random(move || toy::fast_race(dispatch, against, |_| {}), n);
        shuttle::check_pct(move || toy::fast_race(dispatch, against, |_| {}), n, 3);
        println!("fast path vs {against:?} ({dispatch:?}): {n} random + {n} PCT schedules");
    }
    let carried = toy::CARRIED.load(Ordering::Relaxed);
    println!("fast path vs {against:?}: {carried} operations carried by a close");
    assert!(
        carried > 0,
        "landmark not reached: no operation carried by a close"
    );
}

/// The landmark counter is one per process: the cases run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn the_close_of_a_reset_cycle_races_begins_and_ends_on_two_clients() {
    explore(Against::ResetCycle);
}

#[test]
fn a_revocation_races_a_fast_operation() {
    explore(Against::Revocation);
}

#[test]
fn surprise_removal_races_fast_operations() {
    explore(Against::SurpriseRemoval);
}

#[test]
fn a_power_down_races_fast_operations() {
    explore(Against::PowerDown);
}

#[test]
fn unload_races_fast_operations() {
    explore(Against::Unload);
}
