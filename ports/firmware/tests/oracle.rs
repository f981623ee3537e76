//! The oracle flags each invariant it checks on a hand-made log (so a passing model-checking
//! run means something).

use pnp_lifecycle::*;
use pnp_lifecycle_firmware::oracle::{check, Record};

const DEV: DeviceId = DeviceId(0);
const A: ClientHandle = ClientHandle {
    device: DEV,
    slot: 0,
    generation: 0,
};

fn notify(event: Event) -> Record {
    Record::Output(Output::Notify { client: A, event })
}

fn violation(log: &[Record]) -> String {
    check(log).expect_err("the oracle missed a violation")
}

#[test]
fn a_clean_cycle_passes() {
    let log = [
        notify(Event::Reset),
        Record::Input(Input::ResetExecute { client: A }, Ok(Reply::Accepted)),
        Record::Output(Output::Hardware {
            device: DEV,
            command: HardwareCommand::Reset,
        }),
        notify(Event::ResetEnd { epoch: Epoch(1) }),
    ];
    assert_eq!(check(&log), Ok(()));
}

#[test]
fn i1_notification_after_unregister() {
    let log = [
        Record::Input(
            Input::Unregister { client: A },
            Ok(Reply::Unregistered(Unregistered::Now)),
        ),
        notify(Event::DeviceStopped),
    ];
    assert!(violation(&log).starts_with("I1"));
}

#[test]
fn i2_output_after_unload_may_finish() {
    let log = [
        Record::Output(Output::UnloadMayFinish),
        Record::Output(Output::UnloadMayFinish),
    ];
    assert!(violation(&log).starts_with("I2"));
}

#[test]
fn i3_reset_before_the_voter_answered_or_after_surprise_removal() {
    let early = [
        notify(Event::Reset),
        Record::Output(Output::Hardware {
            device: DEV,
            command: HardwareCommand::Reset,
        }),
    ];
    assert!(violation(&early).starts_with("I3"));
    let after_surprise = [
        Record::Input(Input::SurpriseRemoval { device: DEV }, Ok(Reply::Accepted)),
        Record::Output(Output::Hardware {
            device: DEV,
            command: HardwareCommand::Shutdown,
        }),
    ];
    assert!(violation(&after_surprise).starts_with("I3"));
}

#[test]
fn i4_reset_never_answered_or_answered_twice() {
    assert!(violation(&[notify(Event::Reset)]).starts_with("I4"));
    let twice = [
        notify(Event::Reset),
        notify(Event::ResetEnd { epoch: Epoch(1) }),
        notify(Event::ResetEnd { epoch: Epoch(1) }),
    ];
    assert!(violation(&twice).starts_with("I4"));
}

#[test]
fn i5_token_not_completed_exactly_once() {
    let start = Input::Start {
        device: DEV,
        token: RequestToken(9),
    };
    assert!(violation(&[Record::Input(start, Ok(Reply::Accepted))]).starts_with("I5"));
    let complete = Record::Output(Output::Complete {
        device: DEV,
        token: RequestToken(9),
        status: Status::Success,
    });
    let twice = [
        Record::Input(start, Ok(Reply::Accepted)),
        complete,
        complete,
    ];
    assert!(violation(&twice).starts_with("I5"));
}
