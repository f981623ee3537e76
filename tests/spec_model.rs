//! The spec model (`testkit/src/spec/`, an independent second reading of DESIGN.md as
//! facts) agrees with the core: random walks from the testkit's generator, restricted to
//! the inputs the spec model covers (`spec::covers`), with the oracle on and the spec model
//! compared after every step; each walk ends with the owner's I9 drive (cooperative,
//! uncooperative or hostile clients), compared too.

use arbitrary::Unstructured;
use pnp_lifecycle_testkit::gen::{small_config, Generator};
use pnp_lifecycle_testkit::rng::SplitMix;
use pnp_lifecycle_testkit::spec::covers;
use pnp_lifecycle_testkit::{drive_to_quiescence, FastSmall, Fuzz, Quiesce, Small, Sut, World};

/// One walk from `bytes` on machine `S`: the number of covered steps taken, or the first
/// divergence with the walk that led to it.
fn walk<S: Sut>(bytes: &[u8], end: Quiesce) -> Result<usize, String> {
    let mut u = Unstructured::new(bytes);
    let config = small_config(&mut u).map_err(|e| e.to_string())?;
    let mut world: World<S> = World::new(config, false).with_spec();
    let mut generator = Generator::new();
    let mut trace: Vec<String> = Vec::new();
    while !u.is_empty() {
        let Ok((now, input)) = generator.next(&mut u, &world) else {
            break;
        };
        if !covers(&input) {
            continue;
        }
        match world.step(now, input) {
            Ok(step) if step.result.is_ok() => {
                let phases: Vec<_> = (0..S::DEVICES)
                    .map(|d| world.sut.phase_detail(pnp_lifecycle::DeviceId(d as u8)))
                    .collect();
                trace.push(format!(
                    "  {now:?} {input:?}\n     -> {:?} {:?}\n     {phases:?}",
                    step.result, step.outputs
                ))
            }
            Ok(_) => trace.push(format!("  {now:?} {input:?} -> refused")),
            Err(v) => {
                let accepted: Vec<&String> =
                    trace.iter().filter(|t| !t.ends_with("refused")).collect();
                let tail: Vec<&String> = accepted.iter().rev().take(25).rev().copied().collect();
                let mut joined: Vec<String> = tail.iter().map(|s| s.to_string()).collect();
                if std::env::var("SPEC_DUMP").is_ok() {
                    joined.push(format!("spec model: {:#?}", world.spec));
                }
                return Err(format!(
                    "config {config:?}\nstep {} at {now:?}: {v}\nlast accepted steps:\n{}",
                    trace.len(),
                    joined.join("\n")
                ));
            }
        }
        if world.oracle.unload_finished {
            break;
        }
    }
    // Then the owner's duties to the end (I9), still compared step by step.
    let more = drive_to_quiescence(&mut world, end)
        .map_err(|v| format!("config {config:?}\nafter the walk, {end:?}: {v}"))?;
    Ok(trace.len() + more)
}

fn walks<S: Sut>(seed: u64, cases: usize) -> usize {
    let cases = std::env::var("SPEC_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    // `SPEC_CASES` and `SPEC_SEED` widen a run by hand (CI keeps the defaults).
    let seed = std::env::var("SPEC_SEED")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(seed, |s| seed ^ s);
    let mut rng = SplitMix(seed);
    let mut steps = 0;
    for case in 0..cases {
        let bytes = rng.case(200, 2000);
        let end = [
            Quiesce::Cooperative,
            Quiesce::Uncooperative,
            Quiesce::Hostile,
        ][case % 3];
        match walk::<S>(&bytes, end) {
            Ok(n) => steps += n,
            Err(why) => panic!("case {case}: the spec model and the core disagree\n{why}"),
        }
    }
    steps
}

#[test]
fn spec_model_agrees_with_the_core_on_one_device_walks() {
    let steps = walks::<Small>(0x5bec_0001, 2000);
    println!("one device: {steps} covered steps");
    assert!(steps > 150_000, "only {steps} steps compared");
}

#[test]
fn spec_model_agrees_with_the_core_on_fast_path_walks() {
    let steps = walks::<FastSmall>(0x5bec_0003, 2000);
    println!("fast path: {steps} covered steps");
    assert!(steps > 150_000, "only {steps} steps compared");
}

#[test]
fn spec_model_agrees_with_the_core_on_two_device_walks() {
    let steps = walks::<Fuzz>(0x5bec_0002, 2000);
    println!("two devices: {steps} covered steps");
    assert!(steps > 150_000, "only {steps} steps compared");
}

/// The explorer's one-device graph from a fresh machine, every edge reached through
/// covered inputs compared with the spec model (a branch that takes an uncovered input
/// leaves the spec model behind), under either trusted-client policy, with the liveness
/// drives from every state.
#[test]
fn spec_model_agrees_with_the_core_across_the_explorers_graph() {
    use pnp_lifecycle::{Config, TrustedTimeoutPolicy};
    use pnp_lifecycle_testkit::explore::{explore, Bounds};
    for policy in [
        TrustedTimeoutPolicy::Revoke,
        TrustedTimeoutPolicy::FailDevice,
    ] {
        let config = Config {
            untrusted_ack_timeout: 2,
            trusted_ack_timeout: 4,
            trusted_policy: policy,
            detach_timeout: 3,
            callback_timeout: 5,
            operation_timeout: 3,
        };
        // The full bound but one level shallower (the full depth is `tests/explore.rs`'s).
        let bounds = Bounds {
            compare_model: false,
            max_depth: 7,
            ..Bounds::FULL
        };
        let world: World<Small> = World::new(config, false).with_spec();
        let report = explore(world, bounds);
        println!("explore with the spec model, {policy:?}: {report}");
        if let Some((v, path)) = &report.violation {
            panic!("{v}\npath: {path:#?}");
        }
        assert!(report.states > 50_000, "{report}");
        // The same with the fast path on (gates opened and closed, closes answered).
        let world: World<FastSmall> = World::new(config, false).with_spec();
        let report = explore(world, bounds);
        println!("explore with the spec model, fast path, {policy:?}: {report}");
        if let Some((v, path)) = &report.violation {
            panic!("{v}\npath: {path:#?}");
        }
        assert!(report.states > 50_000, "{report}");
    }
}
