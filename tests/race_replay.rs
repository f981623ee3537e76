//! Replays the committed corpora and kept crash files of the race fuzz targets through
//! the ports' schedule harnesses (`pnp_lifecycle_testkit::<port>_port::race::run`, test
//! code that never ships with a port), and runs each over bounded seeded random schedules.

use pnp_lifecycle_testkit::rng::SplitMix;
use std::path::Path;

type Body = fn(&[u8]) -> Result<(), String>;

const TARGETS: [(&str, Body); 3] = [
    (
        "windows_unload_race",
        pnp_lifecycle_testkit::windows_port::race::run,
    ),
    (
        "linux_unload_race",
        pnp_lifecycle_testkit::linux_port::race::run,
    ),
    (
        "firmware_irq_race",
        pnp_lifecycle_testkit::firmware_port::race::run,
    ),
];

fn files(target: &str) -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut v = Vec::new();
    for dir in ["corpus", "artifacts", "regressions"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) {
            v.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_file()));
        }
    }
    v.sort();
    v
}

#[test]
fn replay_race_corpora_and_crashes() {
    for (target, body) in TARGETS {
        let files = files(target);
        for f in &files {
            let data = std::fs::read(f).unwrap();
            if let Err(e) = body(&data) {
                panic!("{} {}: {}", target, f.display(), e);
            }
        }
        println!("{}: replayed {} files", target, files.len());
        assert!(!files.is_empty(), "{}: seed corpus missing", target);
    }
}

#[test]
fn race_targets_random() {
    let cases = if cfg!(debug_assertions) { 300 } else { 3000 };
    for (target, body) in TARGETS {
        let mut rng = SplitMix(0x7ace ^ target.len() as u64);
        for case in 0..cases {
            let data = rng.case(0, 512);
            if let Err(e) = body(&data) {
                panic!("{} random case {}: {}", target, case, e);
            }
        }
        println!("{}: {} random schedules", target, cases);
    }
}
