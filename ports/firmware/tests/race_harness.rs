//! The cooperative schedule harness (`pnp_lifecycle_testkit::firmware_port::race::run`, the
//! `firmware_irq_race` fuzz target's body): every schedule keeps the invariants.

use pnp_lifecycle_testkit::firmware_port::race::run;

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

#[test]
fn every_schedule_keeps_the_invariants() {
    let mut checked = 0;
    for schedule in schedules(20_000, 40) {
        if let Err(e) = run(&schedule) {
            panic!("schedule {schedule:?} failed: {e}");
        }
        checked += 1;
    }
    println!("firmware race harness: {checked} schedules");
    assert_eq!(checked, 20_000);
}

#[test]
fn degenerate_inputs_do_not_panic_and_pass() {
    for schedule in [
        &[][..],
        &[0],
        &[1],
        &[0x80],
        &[0x81],
        &[0x40],
        &[0xC1],
        &[255; 64],
        &[2; 200],
    ] {
        assert_eq!(run(schedule), Ok(()), "schedule {schedule:?}");
    }
}

#[test]
fn the_fuzz_corpus_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus/firmware_irq_race");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus") {
        let path = entry.expect("entry").path();
        let data = std::fs::read(&path).expect("read");
        if let Err(e) = run(&data) {
            panic!("{}: {e}", path.display());
        }
        n += 1;
    }
    println!("firmware_irq_race corpus: replayed {n} files");
    assert!(n > 0);
}
