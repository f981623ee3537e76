//! The cooperative schedule harness (`pnp_lifecycle_testkit::windows_port::race::run`, the
//! fuzz target's body): fixed and pseudo-random schedules all pass, and they reach the
//! interleavings that matter (a hardware reset, an operation, remove before and after
//! unload).

use pnp_lifecycle::HardwareCommand;
use pnp_lifecycle_testkit::observed::Obs;
use pnp_lifecycle_testkit::windows_port::race::{observe, run};

#[test]
fn empty_and_fixed_schedules_pass() {
    run(&[]).unwrap();
    for b in 0..=255u8 {
        run(&[b; 64]).unwrap_or_else(|e| panic!("schedule [{b}; 64]: {e}"));
    }
}

#[test]
fn pseudo_random_schedules_pass_and_differ() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let (mut resets, mut ops, mut refused, mut logs) = (0, 0, 0, Vec::new());
    let mut powered_down = 0;
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
        let (result, log) = observe(&schedule);
        if let Err(e) = result {
            panic!("schedule {schedule:?}: {e}");
        }
        let has = |f: &dyn Fn(&Obs) -> bool| log.iter().any(f);
        resets += usize::from(has(&|o| {
            matches!(
                o,
                Obs::Hardware {
                    command: HardwareCommand::Reset,
                    ..
                }
            )
        }));
        ops += usize::from(has(&|o| matches!(o, Obs::OperationBegin { .. })));
        powered_down += usize::from(has(&|o| {
            matches!(
                o,
                Obs::Hardware {
                    command: HardwareCommand::PowerDown,
                    ..
                }
            )
        }));
        refused += usize::from(has(&|o| {
            matches!(o, Obs::RequestCompleted { success: false, .. })
        }));
        if !logs.contains(&log) {
            logs.push(log);
        }
    }
    println!(
        "race harness: 3000 schedules, {} distinct runs, {resets} with a hardware reset, {ops} with an operation, {refused} with a refused IRP, {powered_down} with a power-down",
        logs.len()
    );
    assert!(resets > 0 && ops > 0 && refused > 0 && powered_down > 0 && logs.len() > 100);
}

/// The committed fuzz corpus of `windows_unload_race` still replays clean.
#[test]
fn fuzz_corpus_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus/windows_unload_race");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("the seed corpus").flatten() {
        let data = std::fs::read(entry.path()).expect("a corpus file");
        run(&data).unwrap_or_else(|e| panic!("{}: {e}", entry.path().display()));
        n += 1;
    }
    println!("windows_unload_race corpus: {n} files replayed");
    assert!(n > 0);
}
