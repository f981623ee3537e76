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

/// Rewrite the committed seed corpus of `core_inputs` (after the byte format changed):
/// `PNP_WRITE_CORPUS=1 cargo test --release --test fuzz_replay write_seed_corpus -- --ignored`.
/// Keeps, from 4000 seeded random cases, the eight that drive the most distinct
/// (input kind, output kind) pairs.
#[test]
#[ignore]
fn write_seed_corpus() {
    use pnp_lifecycle::Output;
    use pnp_lifecycle_testkit::gen::{small_config, Generator};
    use pnp_lifecycle_testkit::{Fuzz, World};
    use std::collections::BTreeSet;
    let mut rng = SplitMix(0x5eed_c0de);
    let mut scored: Vec<(usize, Vec<u8>)> = Vec::new();
    for _ in 0..4000 {
        let data = rng.case(256, 3000);
        let mut u = arbitrary::Unstructured::new(&data);
        let Ok(config) = small_config(&mut u) else {
            continue;
        };
        let mut world: World<Fuzz> = World::new(config, false);
        let mut g = Generator::new();
        let mut seen = BTreeSet::new();
        while !u.is_empty() {
            let Ok((now, input)) = g.next(&mut u, &world) else {
                break;
            };
            let Ok(step) = world.step(now, input) else {
                break;
            };
            for o in &step.outputs {
                let kind = match o {
                    Output::Notify { event, .. } => format!("{event:?}").chars().take(8).collect(),
                    other => format!("{other:?}").chars().take(8).collect::<String>(),
                };
                seen.insert((format!("{:?}", input.kind()), kind));
            }
            if world.oracle.unload_finished {
                break;
            }
        }
        scored.push((seen.len(), data));
    }
    scored.sort_by_key(|s| std::cmp::Reverse(s.0));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/core_inputs");
    if std::env::var_os("PNP_WRITE_CORPUS").is_some() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            std::fs::remove_file(e.path()).unwrap();
        }
        for (i, (score, data)) in scored.iter().take(8).enumerate() {
            std::fs::write(dir.join(format!("seed-{i}-{score}")), data).unwrap();
        }
    }
    println!(
        "best scores: {:?}",
        scored.iter().take(8).map(|s| s.0).collect::<Vec<_>>()
    );
}

/// Guard against a generator that never reaches the new edges: over seeded random cases,
/// the fuzz body's inputs must fence stuck callbacks, report fences done, complete reset
/// cycles, defer fatal errors, revoke clients, refuse time going backwards, refuse an
/// answer to an undelivered `RESET`, finish unload, report hardware operations done, make a
/// stop wait for one, revoke and fence an operation holder, end a cycle without a reset
/// and veto a query stop for a client that cannot pause.
#[test]
fn random_cases_reach_the_new_edges() {
    use pnp_lifecycle::{
        CycleOutcome, Error, Event, FatalAnswer, Input, Output, Reply, VetoReason,
    };
    use pnp_lifecycle_testkit::gen::{small_config, Generator};
    use pnp_lifecycle_testkit::{Fuzz, World};
    use std::collections::BTreeMap;
    let mut rng = SplitMix(0x000e_d9e5);
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..1500 {
        let data = rng.case(256, 3000);
        let mut u = arbitrary::Unstructured::new(&data);
        let Ok(config) = small_config(&mut u) else {
            continue;
        };
        let mut world: World<Fuzz> = World::new(config, false);
        let mut g = Generator::new();
        while !u.is_empty() {
            let Ok((now, input)) = g.next(&mut u, &world) else {
                break;
            };
            let ops_out: u32 = world.oracle.handles().map(|(_, c)| c.ops).sum();
            let holders: Vec<_> = world
                .oracle
                .handles()
                .filter(|(_, c)| c.ops > 0)
                .map(|(h, _)| h)
                .collect();
            let step = world.step(now, input).unwrap();
            let mut hit = |k| *seen.entry(k).or_default() += 1;
            match (&input, &step.result) {
                (Input::AccessDone { .. }, Ok(_)) => hit("AccessDone accepted"),
                (Input::Stop { .. }, Ok(_))
                    if ops_out > 0
                        && !step
                            .outputs
                            .iter()
                            .any(|o| matches!(o, Output::Hardware { .. })) =>
                {
                    hit("stop waits for an operation")
                }
                (_, Err(Error::Vetoed(VetoReason::ClientCannotPause))) => {
                    hit("query stop vetoed: cannot pause")
                }
                (Input::FenceDone { .. }, Ok(_)) => hit("FenceDone accepted"),
                (_, Ok(Reply::Fatal(FatalAnswer::Deferred))) => hit("fatal deferred"),
                (_, Err(Error::TimeWentBackwards { .. })) => hit("time backwards refused"),
                (_, Err(Error::ResetNotDelivered)) => hit("RESET not delivered"),
                (_, Ok(Reply::AccessWaitsForPowerUp)) => hit("access waits for a power-up"),
                (_, Err(Error::Suspended { .. })) => hit("access refused: suspended"),
                (_, Ok(Reply::Reset(pnp_lifecycle::ResetAnswer::AfterPowerUp))) => {
                    hit("reset after power-up")
                }
                (
                    Input::PowerUpDone {
                        result: pnp_lifecycle::PowerUpResult::LostState,
                        ..
                    },
                    Ok(_),
                ) => hit("power-up lost state"),
                _ => {}
            }
            for o in &step.outputs {
                match o {
                    Output::Fence { client } if holders.contains(client) => {
                        hit("Fence");
                        hit("operation holder fenced")
                    }
                    Output::Fence { .. } => hit("Fence"),
                    Output::ResetCycleFinished {
                        outcome: CycleOutcome::Recovered(_),
                        ..
                    } => hit("cycle recovered"),
                    Output::Notify {
                        event: Event::Revoked,
                        ..
                    } => hit("Revoked"),
                    Output::ResetCycleFinished {
                        outcome: CycleOutcome::Completed(_),
                        ..
                    } => hit("cycle completed"),
                    Output::UnloadMayFinish => hit("unload finished"),
                    Output::Hardware {
                        command: pnp_lifecycle::HardwareCommand::PowerDown,
                        ..
                    } => hit("power-down commanded"),
                    Output::Notify {
                        event: Event::Resumed { .. },
                        ..
                    } => hit("Resumed"),
                    _ => {}
                }
            }
            if world.oracle.unload_finished {
                break;
            }
        }
    }
    println!("edges reached in 1500 random cases: {seen:?}");
    for k in [
        "FenceDone accepted",
        "fatal deferred",
        "time backwards refused",
        "RESET not delivered",
        "Fence",
        "Revoked",
        "cycle completed",
        "unload finished",
        "AccessDone accepted",
        "stop waits for an operation",
        "query stop vetoed: cannot pause",
        "operation holder fenced",
        "cycle recovered",
        "power-down commanded",
        "Resumed",
        "access waits for a power-up",
        "access refused: suspended",
        "reset after power-up",
        "power-up lost state",
    ] {
        assert!(seen.get(k).copied().unwrap_or(0) > 0, "never reached: {k}");
    }
}
