//! The firmware's checks over board I/O (`pnp_lifecycle_testkit::firmware_port::check`:
//! the common oracle over what was observed, plus pulses only when commanded and no fatal
//! error lost) flag each violation on a hand-made log, so a passing run means something.

use pnp_lifecycle::*;
use pnp_lifecycle_firmware::IsrOutcome;
use pnp_lifecycle_testkit::firmware_port::{check, check_board, client_id, Rec};
use pnp_lifecycle_testkit::observed::{Obs, Seen};

const DEV: DeviceId = DeviceId(0);
const A: ClientHandle = ClientHandle {
    device: DEV,
    slot: 0,
    generation: 0,
};
const COMMAND: Rec = Rec::Output(Output::Hardware {
    device: DEV,
    command: HardwareCommand::Reset,
});
const PULSE: Rec = Rec::Obs(Obs::Hardware {
    device: DEV,
    command: HardwareCommand::Reset,
});

fn told(event: Event) -> [Rec; 2] {
    let client = client_id(A);
    [
        Rec::Obs(Obs::Enter {
            client,
            device: DEV,
            seen: Seen::Event(event),
        }),
        Rec::Obs(Obs::Exit { client }),
    ]
}

fn answered() -> [Rec; 2] {
    let client = client_id(A);
    [
        Rec::Obs(Obs::AnswerTried {
            client,
            device: DEV,
        }),
        Rec::Obs(Obs::AnswerResult {
            client,
            accepted: true,
        }),
    ]
}

fn raise(outcome: IsrOutcome) -> Rec {
    Rec::Raise {
        device: DEV,
        outcome,
    }
}

fn log(parts: &[&[Rec]]) -> Vec<Rec> {
    parts.concat()
}

const SERVED: IsrOutcome = IsrOutcome::Fed(FatalAnswer::Served(ResetAnswer::Started));

#[test]
fn a_clean_cycle_from_a_fatal_error_passes() {
    let clean = log(&[
        &[raise(SERVED)],
        &told(Event::Reset),
        &answered(),
        &[COMMAND, PULSE],
        &told(Event::ResetEnd { epoch: Epoch(1) }),
    ]);
    assert_eq!(check(&clean, true), Ok(()));
}

#[test]
fn a_pulse_before_the_command_is_flagged() {
    let eager = log(&[
        &told(Event::Reset),
        &[PULSE],
        &answered(),
        &[COMMAND, PULSE],
    ]);
    let finding = check(&eager, false).expect_err("missed");
    // The common oracle sees the reset before the client answered (I3) first.
    assert!(finding.starts_with("I3"), "{finding}");
    let finding = check_board(&eager, false).unwrap_err();
    assert!(
        finding.contains("before the core commanded it"),
        "{finding}"
    );
}

#[test]
fn a_commanded_reset_never_pulsed_is_flagged_when_finished() {
    let half = log(&[&told(Event::Reset), &answered(), &[COMMAND]]);
    assert_eq!(check(&half, false), Ok(()));
    let finding = check_board(&half, true).expect_err("missed");
    assert!(finding.contains("never pulsed"), "{finding}");
}

#[test]
fn a_fatal_error_with_no_reset_after_it_is_flagged() {
    let cycle = log(&[
        &told(Event::Reset),
        &answered(),
        &[COMMAND, PULSE],
        &told(Event::ResetEnd { epoch: Epoch(1) }),
    ]);
    // Raised (latched) after the cycle's pulse, and nothing follows: lost.
    let lost = log(&[&cycle, &[raise(IsrOutcome::Latched)]]);
    let finding = check(&lost, true).expect_err("missed");
    assert!(finding.contains("was lost: no reset after it"), "{finding}");
    // Raised before the pulse: served by that cycle.
    let served = log(&[&[raise(IsrOutcome::Latched)], &cycle]);
    assert_eq!(check(&served, true), Ok(()));
    // Answered without a cycle (nothing to reset): fine.
    let not_live = raise(IsrOutcome::Fed(FatalAnswer::HardwareNotLive(
        PhaseKind::Failed,
    )));
    assert_eq!(check(&log(&[&cycle, &[not_live]]), true), Ok(()));
    // Removal after it answers it too.
    let removed = Rec::Output(Output::DeviceRemoved { device: DEV });
    assert_eq!(check(&log(&[&lost, &[removed]]), true), Ok(()));
}

#[test]
fn an_interrupt_that_finds_the_machine_borrowed_is_flagged() {
    let finding = check(&[raise(IsrOutcome::Busy)], false).expect_err("missed");
    assert!(
        finding.contains("interrupt found the machine borrowed"),
        "{finding}"
    );
}

#[test]
fn the_common_oracle_runs_on_firmware_records() {
    // I1: a callback after Removed.
    let late = log(&[
        &told(Event::Removed { surprise: false }),
        &told(Event::Reset),
    ]);
    assert!(check(&late, false).expect_err("missed").starts_with("I1"));
    // I4: RESET never ended.
    let open = log(&[&told(Event::Reset), &answered()]);
    assert!(check(&open, true).expect_err("missed").starts_with("I4"));
    // I5: a request completed twice.
    let twice = [
        Rec::Obs(Obs::RequestSent { id: 1 }),
        Rec::Obs(Obs::RequestCompleted {
            id: 1,
            success: true,
        }),
        Rec::Obs(Obs::RequestCompleted {
            id: 1,
            success: true,
        }),
    ];
    assert!(check(&twice, false).expect_err("missed").starts_with("I5"));
}

fn hw(command: HardwareCommand) -> Rec {
    Rec::Obs(Obs::Hardware {
        device: DEV,
        command,
    })
}

#[test]
fn the_board_check_flags_a_hardware_touch_in_dx_but_not_the_power_up() {
    // I14 at the board, without the common oracle: the reset line pulsed (even when
    // commanded) or a shutdown between the power-down and the power-up is a finding.
    for touch in [HardwareCommand::Reset, HardwareCommand::Shutdown] {
        let log = [COMMAND, hw(HardwareCommand::PowerDown), hw(touch)];
        let finding = check_board(&log, false).unwrap_err();
        assert!(finding.contains("I14"), "{finding}");
    }
    // Control: the power-up and then the pulse, or the release from Dx, are fine.
    let log = [
        COMMAND,
        hw(HardwareCommand::PowerDown),
        hw(HardwareCommand::PowerUp),
        PULSE,
    ];
    assert_eq!(check_board(&log, true), Ok(()));
    let log = [
        hw(HardwareCommand::PowerDown),
        hw(HardwareCommand::ReleaseResources),
    ];
    assert_eq!(check_board(&log, true), Ok(()));
}

#[test]
fn the_board_check_flags_an_operation_in_dx_and_a_suspend_never_ended() {
    let begin = Rec::Obs(Obs::OperationBegin {
        client: client_id(A),
        device: DEV,
    });
    let log = [hw(HardwareCommand::PowerDown), begin];
    assert!(check_board(&log, false).unwrap_err().contains("I14"));
    let suspending = told(Event::Suspending {
        kind: PowerDownKind::Idle,
    });
    assert!(check_board(&suspending, true).unwrap_err().contains("I14"));
    assert_eq!(check_board(&suspending, false), Ok(()), "not over yet");
    let resumed = told(Event::Resumed {
        epoch: Epoch(0),
        state_lost: false,
    });
    let log: Vec<Rec> = suspending.into_iter().chain(resumed).collect();
    assert_eq!(check_board(&log, true), Ok(()));
}
