//! Thread mode and the catastrophic-error interrupt as two shuttle threads contending for
//! the machine through a shuttle mutex standing in for the critical section
//! (`pnp_lifecycle_testkit::firmware_port::scenario`). Random and PCT schedulers,
//! `FIRMWARE_SHUTTLE_ITERATIONS` schedules per scenario and scheduler (default 10,000). Each
//! run asserts the common oracle over what the clients and the hardware observed, the
//! board checks (pulses only when commanded, no fatal error lost, I14: nothing but the
//! power-up touches a powered-down device), that every thread finished and the end state.
//! The power scenarios race an idle power-down or system sleep against the interrupt's
//! fatal error (and a client access it announces), surprise removal, remove and unload.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pnp_lifecycle_firmware::IsrOutcome;
use pnp_lifecycle_testkit::firmware_port::faults::{Fault, IsrPath};
use pnp_lifecycle_testkit::firmware_port::scenario::{run_power, Scenario};

fn iterations() -> usize {
    std::env::var("FIRMWARE_SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

/// Run `which` under `scheduler`; count the schedules in which the interrupt latched and
/// in which it fed its error straight to the machine (both paths must be explored).
fn explore(name: &str, which: Scenario, path: IsrPath, pct: bool) {
    let (latched, fed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (l, f) = (Arc::clone(&latched), Arc::clone(&fed));
    // Power coverage: raised in Dx, woken by an access, released in Dx.
    let power: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
    let p = Arc::clone(&power);
    let body = move || {
        let (outcomes, coverage) = run_power(which, path, Fault::None);
        for (hit, counter) in [
            coverage.raised_in_dx,
            coverage.woken_by_access,
            coverage.released_in_dx,
        ]
        .into_iter()
        .zip(p.iter())
        {
            if hit {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
        if outcomes.contains(&IsrOutcome::Latched) {
            l.fetch_add(1, Ordering::Relaxed);
        }
        if outcomes.iter().any(|o| matches!(o, IsrOutcome::Fed(_))) {
            f.fetch_add(1, Ordering::Relaxed);
        }
    };
    let n = iterations();
    if pct {
        shuttle::check_pct(body, n, 3);
    } else {
        shuttle::check_random(body, n);
    }
    let (latched, fed) = (latched.load(Ordering::Relaxed), fed.load(Ordering::Relaxed));
    println!(
        "{name}: {n} schedules ({}); the interrupt latched in {latched}, fed in {fed}",
        if pct { "pct depth 3" } else { "random" }
    );
    assert!(latched > 0, "no schedule made the interrupt latch");
    let [in_dx, by_access, released] = [0, 1, 2].map(|i| power[i].load(Ordering::Relaxed));
    let expect = match which {
        Scenario::IdlePowerDownRacesIrq => [true, true, false],
        Scenario::SurpriseRemovalInDx | Scenario::RemoveInDx | Scenario::UnloadInDx => {
            [true, false, true]
        }
        _ => [false; 3],
    };
    if expect.contains(&true) {
        println!(
            "{name}: power: raised in Dx in {in_dx}, woken by the access in {by_access}, released in Dx in {released}"
        );
    }
    for (count, expected, what) in [
        (in_dx, expect[0], "a fatal error raised in Dx"),
        (by_access, expect[1], "an access waking the device"),
        (released, expect[2], "a release from Dx"),
    ] {
        assert!(!expected || count > 0, "no schedule had {what}");
    }
    if path == IsrPath::Feed {
        assert!(fed > 0, "no schedule let the interrupt feed");
    }
}

macro_rules! schedulers {
    ($($random:ident, $pct:ident => $scenario:expr, $path:expr;)+) => {$(
        #[test]
        fn $random() {
            explore(stringify!($random), $scenario, $path, false);
        }

        #[test]
        fn $pct() {
            explore(stringify!($pct), $scenario, $path, true);
        }
    )+};
}

schedulers! {
    irq_during_reset_cycle_random, irq_during_reset_cycle_pct => Scenario::IrqDuringResetCycle, IsrPath::Feed;
    irq_during_removal_random, irq_during_removal_pct => Scenario::IrqDuringRemoval, IsrPath::Feed;
    unload_races_reset_cycle_random, unload_races_reset_cycle_pct => Scenario::UnloadRacesResetCycle, IsrPath::Feed;
    latching_irq_during_reset_cycle_random, latching_irq_during_reset_cycle_pct => Scenario::IrqDuringResetCycle, IsrPath::Latch;
    idle_power_down_races_irq_random, idle_power_down_races_irq_pct => Scenario::IdlePowerDownRacesIrq, IsrPath::Latch;
    surprise_removal_in_dx_random, surprise_removal_in_dx_pct => Scenario::SurpriseRemovalInDx, IsrPath::Latch;
    remove_in_dx_random, remove_in_dx_pct => Scenario::RemoveInDx, IsrPath::Feed;
    unload_in_dx_random, unload_in_dx_pct => Scenario::UnloadInDx, IsrPath::Latch;
}
