//! DESIGN "Errors": an input that is wrong for the state, names an unknown client or would
//! overflow a capacity returns a named error and leaves the machine as it was (I10).

use crate::support::*;

#[test]
fn a_full_registry_refuses_with_a_typed_error_and_changes_nothing() {
    let mut o = owner();
    o.started(DEV, false);
    for _ in 0..4 {
        o.register(DEV, ClientKind::Untrusted);
    }
    o.refused(
        Input::Register {
            device: DEV,
            kind: ClientKind::Trusted,
        },
        Error::RegistryFull,
    );
}

#[test]
fn device_ids_beyond_capacity_are_refused() {
    let mut o = owner();
    o.refused(
        Input::AddDevice {
            device: DeviceId(1),
        },
        Error::NoSuchDevice,
    );
    let forged = ClientHandle {
        device: DeviceId(9),
        slot: 0,
        generation: 0,
    };
    o.refused(Input::Unregister { client: forged }, Error::NoSuchDevice);
    o.refused(Input::FenceDone { client: forged }, Error::NoSuchDevice);
    assert_eq!(o.m.binding_caps(forged), Err(Error::NoSuchDevice));
}

#[test]
fn an_undrained_queue_refuses_the_next_input_and_changes_nothing() {
    let mut m = starting_undrained(RequestToken(1));
    let before = m.clone();
    let needed = u16::try_from(M::DEVICE_INPUT_OUTPUTS).unwrap();
    assert_eq!(
        m.handle(
            Tick(3),
            Input::StartDone {
                device: DEV,
                result: StartResult::Started
            }
        ),
        Err(Error::OutputBacklog { needed })
    );
    assert_eq!(m, before);
    assert_eq!(m.now(), Tick(0), "a refused input does not move the clock");
}

#[test]
fn timeout_and_unload_need_room_for_their_worst_case_and_change_nothing_without_it() {
    let mut m = starting_undrained(RequestToken(1));
    assert_eq!(m.pending_output_count(), 1);
    let before = m.clone();
    let needed = u16::try_from(M::DRIVER_INPUT_OUTPUTS).unwrap();
    for input in [Input::Timeout, Input::Unload] {
        assert_eq!(
            m.handle(Tick(5), input),
            Err(Error::OutputBacklog { needed })
        );
        assert_eq!(m, before, "{input:?}");
    }
    assert_eq!(m.now(), Tick(0));
    assert_eq!(m.poll_output(), Some(hw(HardwareCommand::Start)));
    m.handle(Tick(5), Input::Timeout).unwrap();
    assert_eq!(m.now(), Tick(5));
}

#[test]
fn errors_display_what_was_refused_and_their_fields() {
    assert_eq!(
        Error::OutputBacklog { needed: 9 }.to_string(),
        "the output queue needs 9 free entries: drain poll_output first"
    );
    assert_eq!(
        Error::RegistryFull.to_string(),
        "every client slot is taken"
    );
    assert_eq!(
        Error::TimeWentBackwards { last: Tick(3) }.to_string(),
        "time went backwards: now is earlier than the last input's time 3"
    );
    assert_eq!(
        Error::InvalidState {
            phase: PhaseKind::Stopped,
            input: InputKind::FenceDone
        }
        .to_string(),
        "FenceDone is not accepted while the device is Stopped (see the state table)"
    );
    for error in [Error::ResetNotDelivered, Error::NoFenceRequested] {
        let text = error.to_string();
        assert!(!text.is_empty() && text != format!("{error:?}"), "{text}");
    }
}
