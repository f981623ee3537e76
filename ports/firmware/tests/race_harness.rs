//! The deterministic schedule harness: every schedule must pass (no planted fault), and
//! under the planted fault some schedule must fail.

use pnp_lifecycle_firmware::race::run;

/// A cheap deterministic byte stream (xorshift).
fn schedules(count: usize, len: usize) -> impl Iterator<Item = Vec<u8>> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..count).map(move |_| {
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect()
    })
}

#[cfg(not(feature = "planted-fault"))]
#[test]
fn every_schedule_keeps_the_invariants() {
    let mut checked = 0;
    for schedule in schedules(20_000, 40) {
        if let Err(e) = run(&schedule) {
            panic!("schedule {schedule:?} failed: {e}");
        }
        checked += 1;
    }
    assert_eq!(checked, 20_000);
}

#[cfg(not(feature = "planted-fault"))]
#[test]
fn degenerate_inputs_do_not_panic_and_pass() {
    for schedule in [&[][..], &[0], &[1], &[0x80], &[0x81], &[255; 64], &[2; 200]] {
        assert_eq!(run(schedule), Ok(()), "schedule {schedule:?}");
    }
}

#[cfg(feature = "planted-fault")]
#[test]
fn planted_fault_is_found_by_the_harness() {
    let failing = schedules(20_000, 40).find_map(|s| run(&s).err().map(|e| (s, e)));
    let (schedule, error) = failing.expect("the planted fault escaped 20,000 schedules");
    eprintln!("planted fault caught by schedule {schedule:?}: {error}");
}
