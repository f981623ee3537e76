//! DESIGN "Architecture: sans-IO core, thin OS ports": time enters only as values passed
//! with every input, a deadline counts from the `now` of the input that started it, the
//! owner feeds inputs and drains outputs.

use crate::support::*;

/// DESIGN "Architecture" and I13: a deadline counts from the `now` of the input that
/// started it, not from an earlier input or timeout.
#[test]
fn deadline_counts_from_the_input_that_started_it() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    let (kernel, user) = (c[0], c[1]);
    // 60 s pass with nothing due: a correct owner is never woken.
    assert_eq!(o.m.poll_timeout(), None);
    o.at(60_000);
    assert_eq!(
        o.step(Input::ResetRequest { client: kernel }).0,
        Ok(Reply::Reset(ResetAnswer::Started))
    );
    let untrusted = Config::DEFAULT.untrusted_ack_timeout;
    let trusted = Config::DEFAULT.trusted_ack_timeout;
    assert_eq!(o.m.poll_timeout(), Some(Tick(60_000 + untrusted)));
    assert_eq!(o.m.poll_timeout(), Some(Tick(61_000)));
    // The RESET callbacks return a little later; the answers are still due from 60 s.
    o.at(60_010);
    o.return_callbacks(DEV);
    assert_eq!(o.m.poll_timeout(), Some(Tick(61_000)));
    // Nobody is revoked a tick early...
    assert!(o.timeout_at(60_999).is_empty());
    for client in [kernel, user] {
        assert!(
            matches!(
                o.view(client).state,
                ClientState::Active {
                    role: Role::Voting,
                    ..
                }
            ),
            "{client:?} revoked early"
        );
    }
    // ...and the untrusted one exactly at its deadline; the trusted one still has time.
    assert_eq!(o.timeout_at(61_000), vec![notify(user, Event::Revoked)]);
    o.return_callbacks(DEV);
    assert_eq!(o.m.poll_timeout(), Some(Tick(60_000 + trusted)));
    assert!(o.timeout_at(60_000 + trusted - 1).is_empty());
    assert_eq!(
        o.timeout_at(60_000 + trusted),
        vec![notify(kernel, Event::Revoked), hw(HardwareCommand::Reset)]
    );
}

/// Time going backwards is refused with a typed error and nothing changes, not even the
/// clock; a refused input does not move the clock either.
#[test]
fn time_going_backwards_is_refused_and_changes_nothing() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0),
    });
    o.at(1_000);
    o.ok(Input::ResetRequest { client: c[1] });
    let last = Tick(1_000);
    o.at(999);
    let t = o.token();
    for input in [
        Input::Timeout,
        Input::Unload,
        Input::AddDevice { device: DEV },
        Input::Start {
            device: DEV,
            token: t,
        },
        Input::StartDone {
            device: DEV,
            result: StartResult::Started,
        },
        Input::CancelStop {
            device: DEV,
            token: t,
        },
        Input::Remove {
            device: DEV,
            token: t,
        },
        Input::SurpriseRemoval { device: DEV },
        Input::FatalError { device: DEV },
        Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded,
        },
        Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Active,
        },
        Input::Register {
            device: DEV,
            kind: ClientKind::Trusted,
        },
        Input::Unregister { client: c[0] },
        Input::CallbackDone { client: c[0] },
        Input::FenceDone { client: c[0] },
        Input::ResetExecute { client: c[0] },
        Input::AcquireInterface { client: c[0] },
        Input::Access {
            client: c[0],
            epoch: Epoch(0),
            what: Access::QueryCounters(P0),
        },
    ] {
        // `refused` also checks the machine and the queue are exactly as before.
        o.refused(input, Error::TimeWentBackwards { last });
    }
    assert_eq!(o.m.now(), last);
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(1_000 + Config::DEFAULT.untrusted_ack_timeout)),
        "the cycle's deadlines are untouched"
    );
    // A refused input does not move the clock: 1 200 is still accepted after it.
    o.at(1_500);
    let t = o.token();
    o.refused(
        Input::Stop {
            device: DEV,
            token: t,
        },
        Error::InvalidState {
            phase: PhaseKind::Quiescing,
            input: InputKind::Stop,
        },
    );
    assert_eq!(o.m.now(), last);
    o.at(1_200);
    o.ok(Input::CallbackDone { client: c[0] });
    // An ignored input is accepted, so it takes the time.
    o.at(1_300);
    o.ok(Input::CancelStop {
        device: DEV,
        token: t,
    });
    o.at(1_250);
    o.refused(
        Input::Timeout,
        Error::TimeWentBackwards { last: Tick(1_300) },
    );
    // The same time again is not backwards.
    o.timeout_at(1_300);
}

#[test]
fn ticks_convert_from_and_to_durations_at_any_rate() {
    use core::time::Duration;
    assert_eq!(
        Tick::from_duration(Duration::from_millis(1_500), 1_000),
        Tick(1_500)
    );
    assert_eq!(
        Tick::from_duration(Duration::from_secs(2), 32_768),
        Tick(65_536)
    );
    assert_eq!(
        Tick::from_duration(Duration::MAX, 1_000_000_000),
        Tick(u64::MAX)
    );
    assert_eq!(Tick(1_500).to_duration(1_000), Duration::from_millis(1_500));
    assert_eq!(Tick(16_384).to_duration(32_768), Duration::from_millis(500));
    assert_eq!(Tick(5).to_duration(0), Duration::ZERO);
    assert_eq!(Tick(u64::MAX - 1).after(5), Tick(u64::MAX));
    assert_eq!(Tick(1).after(2), Tick(3));
}

#[test]
fn the_typed_wrappers_return_the_reply_of_their_input() {
    let mut o = owner();
    o.started(DEV, false);
    let m = &mut o.m;
    let now = Tick(7);
    let (a, epoch) = m.register(now, DEV, ClientKind::Trusted).unwrap();
    let (b, _) = m.register(now, DEV, ClientKind::Trusted).unwrap();
    assert_eq!(m.now(), now);
    assert_eq!(m.acquire_interface(now, a), Ok(epoch));
    assert_eq!(m.reset_request(now, a), Ok(ResetAnswer::Started));
    while m.poll_output().is_some() {}
    assert_eq!(m.reset_request(now, b), Ok(ResetAnswer::Joined));
    assert_eq!(
        m.fatal_error(now, DEV),
        Ok(FatalAnswer::Served(ResetAnswer::Joined))
    );
    assert_eq!(m.unregister(now, b), Ok(Unregistered::Now));
    while m.poll_output().is_some() {}
    assert_eq!(m.unregister(now, b), Ok(Unregistered::Already));
    // Refusals pass through unchanged.
    assert_eq!(
        m.acquire_interface(now, a),
        Err(Error::InvalidState {
            phase: PhaseKind::Quiescing,
            input: InputKind::AcquireInterface
        })
    );
    assert_eq!(m.fatal_error(now, DeviceId(1)), Err(Error::NoSuchDevice));
    assert_eq!(
        m.register(Tick(6), DEV, ClientKind::Trusted),
        Err(Error::TimeWentBackwards { last: now })
    );
}

#[test]
fn the_queue_and_the_phase_can_be_inspected_without_changing_them() {
    let fresh = M::new(Config::DEFAULT);
    assert_eq!(fresh.phase_detail(DEV), Some(Phase::Absent));
    assert_eq!(fresh.phase_detail(DeviceId(1)), None);
    let mut m = starting_undrained(RequestToken(3));
    m.handle(
        Tick(0),
        Input::QueryStop {
            device: DEV,
            token: RequestToken(4),
        },
    )
    .unwrap_err();
    assert_eq!(
        m.phase_detail(DEV),
        Some(Phase::Starting {
            token: RequestToken(3),
            fatal: false
        })
    );
    let queued: Vec<Output> = m.pending_outputs().copied().collect();
    assert_eq!(queued, vec![hw(HardwareCommand::Start)]);
    assert_eq!(m.pending_output_count(), 1);
    assert_eq!(m.poll_output(), Some(hw(HardwareCommand::Start)));
    assert_eq!(m.pending_output_count(), 0);
    assert_eq!(m.pending_outputs().count(), 0);
    assert_eq!(m.lost_outputs(), 0);
}
