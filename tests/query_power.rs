//! DESIGN "Asking changes nothing": `Lifecycle::query_power_down` answers exactly what
//! `PowerDown` would get now, and changes nothing. Checked before every step of random
//! input sequences (the fuzz generator), against `handle(PowerDown)` on a clone.

use arbitrary::Unstructured;
use pnp_lifecycle::table::PhaseKind;
use pnp_lifecycle::*;
use pnp_lifecycle_testkit::gen::{small_config, Generator};
use pnp_lifecycle_testkit::rng::SplitMix;
use pnp_lifecycle_testkit::{Fuzz, World};
use std::collections::BTreeSet;

const KINDS: [PowerDownKind; 2] = [PowerDownKind::Idle, PowerDownKind::SystemSleep];

/// Compare the query with the input on a clone, for every device and kind; record which
/// (phase, kind, answer) were seen.
fn compare(m: &Fuzz, seen: &mut BTreeSet<(PhaseKind, bool, String)>) {
    for d in 0..2u8 {
        let device = DeviceId(d);
        for kind in KINDS {
            let before = m.clone();
            let asked = m.query_power_down(device, kind);
            assert_eq!(*m, before, "the query changed the machine");
            let mut tried = m.clone();
            let done = tried
                .handle(
                    m.now(),
                    Input::PowerDown {
                        device,
                        kind,
                        token: RequestToken(0xbeef),
                    },
                )
                .map(drop);
            let phase = m.phase(device).unwrap_or(PhaseKind::Absent);
            assert_eq!(asked, done, "device {d} in {phase:?}, {kind:?}");
            let answer = match asked {
                Ok(()) => "ok".to_string(),
                Err(e) => format!("{e:?}")
                    .split(['(', ' ', '{'])
                    .next()
                    .unwrap_or("")
                    .to_string(),
            };
            seen.insert((phase, kind == PowerDownKind::Idle, answer));
        }
    }
}

#[test]
fn the_power_down_query_answers_what_the_power_down_gets_and_changes_nothing() {
    let mut rng = SplitMix(0x005e_ed0f_9e17);
    let mut seen = BTreeSet::new();
    let mut steps = 0usize;
    for _ in 0..400 {
        let bytes = rng.bytes(1500);
        let mut u = Unstructured::new(&bytes);
        let Ok(config) = small_config(&mut u) else {
            continue;
        };
        let mut world: World<Fuzz> = World::new(config, true);
        let mut generator = Generator::new();
        while !u.is_empty() {
            compare(&world.sut, &mut seen);
            let Ok((now, input)) = generator.next(&mut u, &world) else {
                break;
            };
            world.step(now, input).unwrap();
            steps += 1;
            if world.oracle.unload_finished {
                compare(&world.sut, &mut seen);
                break;
            }
        }
    }
    let answers: BTreeSet<&str> = seen.iter().map(|(_, _, a)| a.as_str()).collect();
    let phases: BTreeSet<PhaseKind> = seen.iter().map(|(p, _, _)| *p).collect();
    println!(
        "{steps} steps, {} (phase, kind, answer) triples",
        seen.len()
    );
    // Not vacuous: accepted, refused by the table, vetoed by the handler, all seen.
    for answer in ["ok", "InvalidState", "Vetoed"] {
        assert!(
            answers.contains(answer),
            "never answered {answer}: {answers:?}"
        );
    }
    assert!(phases.len() >= 10, "only {phases:?}");
}
