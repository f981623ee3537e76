//! The deterministic schedule harness: every schedule passes, and many differ.

use pnp_lifecycle_windows::race::run;

#[test]
fn empty_and_fixed_schedules_pass() {
    run(&[]).unwrap();
    for b in 0..=255u8 {
        run(&[b; 64]).unwrap_or_else(|e| panic!("schedule [{b}; 64]: {e}"));
    }
}

#[test]
fn pseudo_random_schedules_pass() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..3000 {
        let len = (i % 97) + 1;
        let schedule: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        if let Err(e) = run(&schedule) {
            panic!("schedule {schedule:?}: {e}");
        }
    }
}
