//! The cooperative schedule harness (`--features race`) over many schedules.
#![cfg(feature = "race")]

use pnp_lifecycle_linux::race::run;

fn lcg(seed: &mut u64) -> u8 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 33) as u8
}

#[cfg(not(feature = "planted-fault"))]
#[test]
fn every_flag_combination_over_many_schedules_holds_the_invariants() {
    let mut seed = 7u64;
    let mut runs = 0;
    for flags in 0u8..32 {
        for _ in 0..100 {
            let len = usize::from(lcg(&mut seed)) % 64;
            let mut s = vec![flags];
            s.extend((0..len).map(|_| lcg(&mut seed)));
            if let Err(e) = run(&s) {
                panic!("schedule {s:?}: {e}");
            }
            runs += 1;
        }
    }
    assert_eq!(runs, 3200);
}

#[cfg(not(feature = "planted-fault"))]
#[test]
fn degenerate_schedules_do_not_panic_and_finish() {
    assert_eq!(run(&[]), Ok(()));
    assert_eq!(run(&[0xff]), Ok(()));
    assert_eq!(run(&[0xff; 5000]), Ok(()));
    assert_eq!(run(&[0x0f, 7, 7, 7, 7, 7, 7, 7, 7, 7]), Ok(()));
}

/// With the planted fault the harness must find a violating schedule.
#[cfg(feature = "planted-fault")]
#[test]
fn planted_fault_is_found_by_the_harness() {
    let mut seed = 11u64;
    let found = (0..20_000).find_map(|_| {
        let mut s = vec![0x04 | 0x08];
        s.extend((0..32).map(|_| lcg(&mut seed)));
        run(&s).err()
    });
    let e = found.expect("no schedule exposed the planted fault");
    assert!(e.contains("I1"), "{e}");
}
