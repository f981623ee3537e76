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

/// Fuzz finding (linux_unload_race): the user context acked while the reset cycle was
/// already running but before its `add` had been delivered; the oracle reset the
/// client's per-device state at `add` and forgot the accepted vote.
#[cfg(not(feature = "planted-fault"))]
#[test]
fn regression_ack_before_add_is_a_vote() {
    let s = include_bytes!("race-crash-51da980553ce3050b43c225b441a89d33ccff7cb");
    assert_eq!(run(s), Ok(()));
}

/// The oracle keeps its teeth around `add`: without an accepted ack the same log is an
/// I3 violation, and an ack from a finished attachment does not carry into a later one.
#[test]
fn oracle_still_flags_a_reset_without_the_vote() {
    use pnp_lifecycle::DeviceId;
    use pnp_lifecycle_linux::oracle::{check, Entry, What};
    use pnp_lifecycle_linux::{PciErsResult, RemoveCause};
    let dev = DeviceId(0);
    let enter = |what| Entry::Enter { c: 1, dev, what };
    let exit = Entry::Exit { c: 1 };
    let ack = [
        Entry::AckAttempt { c: 1, dev },
        Entry::AckResult { c: 1, ok: true },
    ];
    let cycle = [
        enter(What::Add),
        exit,
        enter(What::Reset(PciErsResult::None)),
        exit,
        Entry::HwReset { dev },
    ];
    // The fuzz finding's shape: ack taken before `add` was delivered — a vote.
    assert_eq!(check(&[&ack[..], &cycle[..]].concat(), false), Ok(()));
    // No ack at all.
    assert!(check(&cycle, false).unwrap_err().starts_with("I3"));
    // A refused ack is no vote.
    let refused = [
        Entry::AckAttempt { c: 1, dev },
        Entry::AckResult { c: 1, ok: false },
    ];
    let e = check(&[&refused[..], &cycle[..]].concat(), false).unwrap_err();
    assert!(e.starts_with("I3"), "{e}");
    // An ack before a `remove` does not count for the next attachment.
    let removed = [
        enter(What::Add),
        exit,
        ack[0],
        ack[1],
        enter(What::Remove(RemoveCause::DeviceRemoved { surprise: false })),
        exit,
    ];
    let e = check(&[&removed[..], &cycle[..]].concat(), false).unwrap_err();
    assert!(e.starts_with("I3"), "{e}");
}
