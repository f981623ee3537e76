//! Property tests: random input sequences, each input with the owner's `now` (small steps,
//! huge jumps, the next deadline), the rules of DESIGN.md checked after every step by the
//! shared oracle, the independent reference model compared step by step, and at the end
//! the I9 liveness drive (every cycle, removal and unload finishes in bounded inputs),
//! with cooperative, uncooperative and hostile clients (callbacks that never return, a
//! clock that jumps far ahead).

use arbitrary::Unstructured;
use pnp_lifecycle::inspect::*;
use pnp_lifecycle::*;
use pnp_lifecycle_testkit::gen::{small_config, Generator};
use pnp_lifecycle_testkit::{drive_to_quiescence, Fuzz, Quiesce, World};
use proptest::prelude::*;

/// The Quiescing phase caches its outstanding voters; the cache must equal the registry.
fn voters_consistent(m: &Fuzz) -> Result<(), String> {
    for d in 0..2u8 {
        let device = DeviceId(d);
        if let Some(Phase::Quiescing { voters, .. }) = m.phase_detail(device) {
            let counted = m
                .clients(device)
                .filter(|(_, v)| {
                    matches!(
                        v.state,
                        ClientState::Active {
                            role: Role::Voting,
                            ..
                        }
                    )
                })
                .count();
            if usize::from(voters) != counted {
                return Err(format!(
                    "{device:?}: cached voters {voters}, registry {counted}"
                ));
            }
        }
    }
    Ok(())
}

fn run(bytes: &[u8], mode: Quiesce) -> Result<usize, String> {
    let mut u = Unstructured::new(bytes);
    let config = small_config(&mut u).map_err(|e| e.to_string())?;
    let mut world: World<Fuzz> = World::new(config, true);
    let mut generator = Generator::new();
    let mut steps = 0;
    // `Unstructured` yields defaults forever once empty: stop when the bytes run out.
    while !u.is_empty() {
        let Ok((now, input)) = generator.next(&mut u, &world) else {
            break;
        };
        world
            .step(now, input)
            .map_err(|v| format!("step {steps}: {v}"))?;
        voters_consistent(&world.sut)?;
        steps += 1;
        if world.oracle.unload_finished {
            break; // everything after is refused with `Unloaded`
        }
    }
    drive_to_quiescence(&mut world, mode)
        .map_err(|v| format!("liveness after {steps} steps: {v}"))?;
    Ok(steps)
}

proptest! {
    // A failing case is saved beside this file and replayed first on every later run.
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            "tests/properties.proptest-regressions"
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn invariants_hold_and_the_model_agrees_on_random_sequences(
        bytes in proptest::collection::vec(any::<u8>(), 0..1500)
    ) {
        run(&bytes, Quiesce::Cooperative).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn liveness_holds_when_clients_never_cooperate(
        bytes in proptest::collection::vec(any::<u8>(), 0..1500)
    ) {
        run(&bytes, Quiesce::Uncooperative).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn liveness_holds_when_clients_are_hostile_and_the_clock_jumps(
        bytes in proptest::collection::vec(any::<u8>(), 0..1500)
    ) {
        run(&bytes, Quiesce::Hostile).map_err(TestCaseError::fail)?;
    }
}

/// Guard against a property that passes because it does nothing: random byte strings of
/// proptest's size must produce long input sequences on average.
#[test]
fn random_sequences_are_long_enough_to_mean_something() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut total = 0;
    for _ in 0..64 {
        let bytes: Vec<u8> = (0..1500)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        total += run(&bytes, Quiesce::Cooperative).unwrap();
    }
    println!("64 random sequences: {total} inputs");
    assert!(total > 64 * 50, "only {total} inputs in 64 sequences");
}
