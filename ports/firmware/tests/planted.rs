//! Planted firmware-port faults (`pnp_lifecycle_testkit::firmware_port::faults`): each is a
//! substitute seam a firmware author could get wrong, run under shuttle with both
//! `check_random` and `check_pct`, and must be CAUGHT (a panic of the scenario: the oracle,
//! a board check or the finding's assertion); the shipped port in the same runs is clean.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pnp_lifecycle_testkit::firmware_port::faults::{Fault, IsrPath};
use pnp_lifecycle_testkit::firmware_port::race::run_with;
use pnp_lifecycle_testkit::firmware_port::scenario::{run, Scenario};

const ITERATIONS: usize = 2_000;

/// Run `which` with `fault` under shuttle's random scheduler and under PCT; for each, the
/// finding and the schedule it came in (`None`: it escaped every schedule).
fn hunt(which: Scenario, path: IsrPath, fault: Fault) -> [Option<(String, usize)>; 2] {
    let hunt_with = |pct: bool| {
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&runs);
        let body = move || {
            counter.fetch_add(1, Ordering::Relaxed);
            run(which, path, fault);
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            if pct {
                shuttle::check_pct(body, ITERATIONS, 3)
            } else {
                shuttle::check_random(body, ITERATIONS)
            }
        }));
        result.err().map(|e| {
            let finding = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            (finding, runs.load(Ordering::Relaxed))
        })
    };
    [hunt_with(false), hunt_with(true)]
}

fn assert_caught(name: &str, which: Scenario, path: IsrPath, fault: Fault, expect: &[&str]) {
    let [random, pct] = hunt(which, path, fault);
    for (scheduler, found) in [("random", random), ("pct", pct)] {
        let (finding, at) = found.unwrap_or_else(|| {
            panic!("planted {name}: ESCAPED {ITERATIONS} {scheduler} schedules")
        });
        let first = finding.lines().next().unwrap_or_default().to_string();
        assert!(
            expect.iter().any(|e| finding.contains(e)),
            "planted {name}: caught under {scheduler}, but not for the planted reason: {first}"
        );
        println!("planted {name}: caught ({scheduler}, schedule {at} of {ITERATIONS}: {first})");
    }
}

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
fn control_the_shipped_port_is_clean_in_the_same_runs() {
    let _serial = serial();
    for (which, path) in [
        (Scenario::IrqDuringResetCycle, IsrPath::Feed),
        (Scenario::IrqDuringResetCycle, IsrPath::Latch),
        (Scenario::OneIrqDuringResetCycle, IsrPath::Feed),
        (Scenario::UnloadRacesResetCycle, IsrPath::Feed),
        (Scenario::IdlePowerDownRacesIrq, IsrPath::Latch),
        (Scenario::RemoveInDx, IsrPath::Latch),
    ] {
        let [random, pct] = hunt(which, path, Fault::None);
        assert_eq!(
            (random.clone(), pct.clone()),
            (None, None),
            "{which:?} {path:?}"
        );
    }
    println!("control: clean ({ITERATIONS} random + {ITERATIONS} pct schedules in each of 6 runs)");
}

#[test]
fn planted_unmasked_lock_is_caught() {
    let _serial = serial();
    // Thread mode preempted mid-borrow: the interrupt finds the machine borrowed and its
    // fatal error is lost.
    assert_caught(
        "unmasked-lock",
        Scenario::IrqDuringResetCycle,
        IsrPath::Feed,
        Fault::UnmaskedLock,
        &["interrupt found the machine borrowed"],
    );
}

#[test]
fn planted_dropping_latch_is_caught() {
    let _serial = serial();
    // A fatal error raised while RESET_END callbacks wait in the buffer is dropped: no
    // follow-up cycle, no reset after it.
    assert_caught(
        "dropping-latch",
        Scenario::OneIrqDuringResetCycle,
        IsrPath::Feed,
        Fault::DroppingLatch,
        &["was lost: no reset after it"],
    );
}

#[test]
fn planted_eager_pulse_is_caught() {
    let _serial = serial();
    // The RESET callback pulses the line itself, before the core commands the reset (and
    // so before the other clients answered: the common oracle's I3).
    assert_caught(
        "eager-pulse",
        Scenario::IrqDuringResetCycle,
        IsrPath::Latch,
        Fault::EagerPulse,
        &["before the core commanded it", "I3: hardware reset"],
    );
}

#[test]
fn planted_isr_wakes_by_reset_is_caught() {
    let _serial = serial();
    // The interrupt, finding the device powered down, pulses the reset line itself instead
    // of leaving the power-up to the core: a hardware touch in Dx (I14).
    assert_caught(
        "isr-wakes-by-reset",
        Scenario::IdlePowerDownRacesIrq,
        IsrPath::Latch,
        Fault::IsrWakesByReset,
        &["I14: hardware Reset"],
    );
}

#[test]
fn planted_quiesce_on_release_is_caught() {
    let _serial = serial();
    // Releasing the resources of a device removed from system sleep shuts it down first:
    // a register touch in Dx (I14).
    assert_caught(
        "quiesce-on-release",
        Scenario::RemoveInDx,
        IsrPath::Latch,
        Fault::QuiesceOnRelease,
        &["I14: hardware Shutdown"],
    );
}

#[test]
fn planted_eager_pulse_is_found_by_the_cooperative_harness_too() {
    let _serial = serial();
    // The harness (the fuzz target's body) always ends in removal or unload, which answers
    // any fatal error, so it cannot tell a dropped latch; an eager pulse it finds.
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let found = (0..20_000).find_map(|i| {
        let schedule: Vec<u8> = (0..40)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        run_with(&schedule, Fault::EagerPulse).err().map(|e| (i, e))
    });
    let (i, finding) = found.expect("planted eager-pulse: ESCAPED the harness");
    println!("planted eager-pulse: caught (race harness, schedule {i}: {finding})");
    assert_eq!(
        run_with(&[0x41, 2, 0, 1, 0, 2], Fault::None),
        Ok(()),
        "control"
    );
}
