//! The cooperative schedule harness (`pnp_lifecycle_testkit::linux_port::race::run`, what
//! the fuzz target `linux_unload_race` calls) over generated schedules, the fuzz corpus
//! and the kept crash.

use pnp_lifecycle_testkit::linux_port::race::run;

fn lcg(seed: &mut u64) -> u8 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 33) as u8
}

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
    println!("linux race harness: {runs} schedules");
    assert_eq!(runs, 3200);
}

#[test]
fn degenerate_schedules_do_not_panic_and_finish() {
    assert_eq!(run(&[]), Ok(()));
    assert_eq!(run(&[0xff]), Ok(()));
    assert_eq!(run(&[0xff; 5000]), Ok(()));
    assert_eq!(run(&[0x0f, 7, 7, 7, 7, 7, 7, 7, 7, 7]), Ok(()));
}

/// Fuzz finding (linux_unload_race): the user context acked while the reset cycle was
/// already running but before its `add` had been delivered; an oracle that reset the
/// client's state at `add` forgot the accepted vote.
#[test]
fn regression_ack_before_add_is_a_vote() {
    let s = include_bytes!("race-crash-51da980553ce3050b43c225b441a89d33ccff7cb");
    assert_eq!(run(s), Ok(()));
}

#[test]
fn the_fuzz_corpus_replays() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/corpus/linux_unload_race"
    );
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("corpus") {
        let path = entry.expect("entry").path();
        let s = std::fs::read(&path).expect("read");
        assert_eq!(run(&s), Ok(()), "{}", path.display());
        n += 1;
    }
    println!("linux race corpus: {n} files");
    assert!(n > 0);
}
