//! The reset-group decisions of `src/machine/groups.rs` that cargo-mutants found
//! unpinned: each test names the behaviour it holds and fails with the mutant applied.

use pnp_lifecycle::*;

const A: DeviceId = DeviceId(0);
const B: DeviceId = DeviceId(1);
const ALONE: DeviceId = DeviceId(2);
const G: GroupId = GroupId(0);

type M = Lifecycle<3, 2, 1, { queue_capacity(3, 2) }>;

fn drained(m: &mut M) -> Vec<Output> {
    let mut seen = Vec::new();
    let _ = m.drain(|o| seen.push(o));
    seen
}

/// A and B added in group G, ALONE added in no group; the queue drained.
fn members_added() -> M {
    let mut m = M::new(Config::DEFAULT);
    for device in [A, B, ALONE] {
        m.add_device(Tick(0), device).unwrap();
    }
    m.join_reset_group(Tick(0), A, G).unwrap();
    m.join_reset_group(Tick(0), B, G).unwrap();
    assert_eq!(drained(&mut m), []);
    m
}

/// An input on a member may move every member of its group, so it needs the room a
/// driver input needs; refused, it changes nothing (I10), and drained it is taken.
/// (cargo-mutants: `free() < needed` → `>` in `handle_member` survived.)
#[test]
fn an_input_on_a_member_needs_room_for_every_member_and_changes_nothing_without_it() {
    let mut m = members_added();
    m.start(Tick(1), A, RequestToken(1)).unwrap();
    assert_eq!(m.pending_output_count(), 1, "A's Start is not drained");
    let before = m.clone();
    let needed = u16::try_from(M::DRIVER_INPUT_OUTPUTS).unwrap();
    assert_eq!(
        m.start_done(Tick(2), A, StartResult::Started),
        Err(Error::OutputBacklog { needed })
    );
    assert_eq!(
        m.start(Tick(2), B, RequestToken(2)),
        Err(Error::OutputBacklog { needed }),
        "the other member's input too"
    );
    assert_eq!(m, before, "a refused input changes nothing");
    assert_eq!(m.now(), Tick(1), "a refused input does not move the clock");

    // A device in no group needs only one device input's room.
    m.start(Tick(2), ALONE, RequestToken(3)).unwrap();

    assert_eq!(
        drained(&mut m),
        [
            Output::Hardware {
                device: A,
                command: HardwareCommand::Start
            },
            Output::Hardware {
                device: ALONE,
                command: HardwareCommand::Start
            },
        ]
    );
    m.start_done(Tick(3), A, StartResult::Started).unwrap();
    assert_eq!(m.phase(A), Some(PhaseKind::Running));
}
