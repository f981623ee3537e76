//! Planted faults in the runtime's own decisions (`src/planted.rs`, compiled only with
//! `--cfg pnp_faults`): each is planted in an owner and must be CAUGHT by the check that
//! guards it; the same scenario without the fault is clean.
//!
//! `RUSTFLAGS="--cfg pnp_faults" CARGO_TARGET_DIR=target/faults cargo test -p
//! pnp-lifecycle-runtime --test planted -- --nocapture`

#![cfg(pnp_faults)]

mod group_toy;
mod toy;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use pnp_lifecycle_runtime::planted::Fault;
use pnp_lifecycle_runtime::Dispatch;
use toy::Rt;

const SCHEDULES: usize = 1_000;

/// Run `scenario` under shuttle's random scheduler; the failure message if it found one.
fn failure(scenario: impl Fn() + Send + Sync + 'static) -> Option<String> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        shuttle::check_random(scenario, SCHEDULES)
    }));
    result.err().map(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

/// shuttle's panic hook is process-wide: the tests of this file run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn no_fault(rt: &Arc<Rt>) {
    rt.with(|o, _| o.plant(Fault::None));
}

fn no_barrier(rt: &Arc<Rt>) {
    rt.with(|o, _| o.plant(Fault::CompletionOvertakesTeardown));
}

#[test]
fn planted_completion_overtaking_the_teardown_is_caught() {
    let _serial = serial();
    println!(); // off the test harness's "test name ... " line
    for dispatch in [Dispatch::Thread, Dispatch::Inline] {
        let message = failure(move || toy::remove_behind_a_slow_teardown(dispatch, no_barrier))
            .unwrap_or_else(|| {
                panic!("planted CompletionOvertakesTeardown ({dispatch:?}): NOT caught")
            });
        let line = message.lines().next().unwrap_or_default();
        assert!(
            message.contains("still ran"),
            "caught, but not as expected: {line}"
        );
        println!(
            "planted CompletionOvertakesTeardown ({dispatch:?}): caught ({})",
            line.chars().take(120).collect::<String>()
        );
    }
}

fn every_member(rt: &Arc<group_toy::Rt>) {
    rt.with(|o, _| o.plant(Fault::GroupResetCoversEveryMember));
}

#[test]
fn planted_group_reset_covering_every_member_is_caught() {
    let _serial = serial();
    println!(); // off the test harness's "test name ... " line
    let message = failure(|| group_toy::surprise_removal_mid_cycle(every_member))
        .unwrap_or_else(|| panic!("planted GroupResetCoversEveryMember: NOT caught"));
    assert!(
        message.contains("a reset through a vanished member"),
        "caught, but not as expected: {message}"
    );
    let line = message.lines().next().unwrap_or_default();
    println!(
        "planted GroupResetCoversEveryMember: caught ({})",
        line.chars().take(120).collect::<String>()
    );
}

#[test]
fn control_without_a_fault_is_clean() {
    let _serial = serial();
    println!(); // off the test harness's "test name ... " line
    for dispatch in [Dispatch::Thread, Dispatch::Inline] {
        let found = failure(move || toy::remove_behind_a_slow_teardown(dispatch, no_fault));
        assert_eq!(found, None, "{dispatch:?}");
        println!("control ({dispatch:?}): clean in {SCHEDULES} schedules");
    }
    let found = failure(|| group_toy::surprise_removal_mid_cycle(|_| ()));
    assert_eq!(found, None, "the group scenario");
    println!("control (group, surprise removal mid-cycle): clean in {SCHEDULES} schedules");
}

fn begin_after_close(rt: &Arc<Rt>) {
    rt.plant_in_gates(Fault::BeginAfterClose);
}

/// Issue 21: a fast-path begin that checks the gate and counts in two steps is admitted
/// after the close read the count. The fast path's races catch it: a drain's hardware
/// command under an uncounted operation, or the owner's anomaly when the machine reopens
/// a gate it believes empty.
#[test]
fn planted_begin_after_close_is_caught_by_the_fast_path_races() {
    let _serial = serial();
    println!(); // off the test harness's "test name ... " line
    for against in [toy::Against::ResetCycle, toy::Against::PowerDown] {
        let message = failure(move || toy::fast_race(Dispatch::Thread, against, begin_after_close))
            .unwrap_or_else(|| panic!("planted BeginAfterClose vs {against:?}: NOT caught"));
        let line = message.lines().next().unwrap_or_default();
        assert!(
            [
                "uncounted",
                "anomalies",
                "every operation ended",
                "fenced client"
            ]
            .iter()
            .any(|m| line.contains(m)),
            "caught, but not as expected: {line}"
        );
        println!(
            "planted BeginAfterClose vs {against:?}: caught ({})",
            line.chars().take(120).collect::<String>()
        );
    }
}

#[test]
fn control_of_the_fast_path_races_without_a_fault_is_clean() {
    let _serial = serial();
    println!(); // off the test harness's "test name ... " line
    for against in [toy::Against::ResetCycle, toy::Against::PowerDown] {
        let found = failure(move || toy::fast_race(Dispatch::Thread, against, |_| {}));
        assert_eq!(found, None, "{against:?}");
        println!("control (fast path vs {against:?}): clean in {SCHEDULES} schedules");
    }
}
