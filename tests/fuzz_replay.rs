//! Replays every committed corpus file and every kept crash file of the `core_inputs`
//! fuzz target through its body (the same code the fuzz target runs), then runs the body
//! over a bounded number of seeded random inputs. Crash files live in
//! `fuzz/artifacts/core_inputs/` and `fuzz/regressions/core_inputs/` (kept forever).
//! The race targets' corpora are replayed by `tests/race_replay.rs`.

use pnp_lifecycle_testkit::fuzz_bodies::core_inputs;
use pnp_lifecycle_testkit::rng::SplitMix;
use std::path::Path;
use std::time::{Duration, Instant};

fn files(target: &str) -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut v = Vec::new();
    for dir in ["corpus", "artifacts", "regressions"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) {
            for e in entries.flatten() {
                if e.path().is_file() {
                    v.push(e.path());
                }
            }
        }
    }
    v.sort();
    v
}

#[test]
fn replay_core_inputs_corpus_and_crashes() {
    let files = files("core_inputs");
    let mut inputs = 0;
    for f in &files {
        let data = std::fs::read(f).unwrap();
        match core_inputs(&data) {
            Ok(n) => inputs += n,
            Err(finding) => panic!("{}: {}", f.display(), finding),
        }
    }
    println!(
        "core_inputs: replayed {} files ({} inputs)",
        files.len(),
        inputs
    );
    assert!(!files.is_empty(), "the committed seed corpus is missing");
}

#[test]
fn core_inputs_random() {
    // Bounded both by count and by time, so it stays well under 30 s even in debug.
    let cases = if cfg!(debug_assertions) { 2000 } else { 20000 };
    let budget = Duration::from_secs(20);
    let start = Instant::now();
    let mut rng = SplitMix(0x00c0_ffee);
    let (mut ran, mut inputs) = (0, 0);
    for _ in 0..cases {
        let data = rng.case(16, 3000);
        match core_inputs(&data) {
            Ok(n) => inputs += n,
            Err(finding) => panic!("random case {} ({} bytes): {}", ran, data.len(), finding),
        }
        ran += 1;
        if start.elapsed() > budget {
            break;
        }
    }
    println!(
        "core_inputs: {} random cases, {} inputs, {:.1?}",
        ran,
        inputs,
        start.elapsed()
    );
    assert!(inputs > ran, "the generator produced almost no inputs");
}

#[test]
#[ignore]
fn debug_case() {
    use pnp_lifecycle::DeviceId;
    use pnp_lifecycle_testkit::gen::{small_config, Generator};
    use pnp_lifecycle_testkit::{Fuzz, World};
    let n: usize = std::env::var("CASE").unwrap().parse().unwrap();
    let mut rng = SplitMix(0x00c0_ffee);
    let mut data = rng.case(16, 3000);
    for _ in 0..n {
        data = rng.case(16, 3000);
    }
    let mut u = arbitrary::Unstructured::new(&data);
    let config = small_config(&mut u).unwrap();
    println!("{:?}", config);
    let mut world: World<Fuzz> = World::new(config, true);
    let mut g = Generator::new();
    while !u.is_empty() {
        let Ok((now, input)) = g.next(&mut u, &world) else {
            break;
        };
        let r = world.step(now, input);
        println!(
            "@{} {:?} -> {:?}",
            now.0,
            input,
            r.as_ref().map(|s| (&s.result, &s.outputs))
        );
        println!(
            "   phases {:?} {:?}",
            world.sut.phase_detail(DeviceId(0)),
            world.sut.phase_detail(DeviceId(1))
        );
        if r.is_err() {
            break;
        }
    }
}
