//! DESIGN "Clients", "Hardware operations are bracketed", as the machine counts them (the
//! brackets of "Operations: the fast path" when the path is closed; the fast path itself:
//! `tests/fast_path.rs`): no stop, reset or teardown while an operation is in flight, each
//! wait with a deadline, then revoke and fence (I12).

use crate::support::*;

const OP_DEADLINE: u64 = Config::DEFAULT.operation_timeout;

const UNTRUSTED_ACK: u64 = Config::DEFAULT.untrusted_ack_timeout;

/// DESIGN "Clients" (brackets) and I12: the stop commands no shutdown or release while a
/// client's hardware operation is in flight; it waits, and finishes when the operation does.
#[test]
fn stop_waits_for_operations_in_flight() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    grant(&mut o, c[0]);
    grant(&mut o, c[0]);
    let (t, out) = query_stop_and_stop(&mut o);
    assert_eq!(out, vec![notify(c[0], Event::DeviceStopped)]);
    assert_eq!(o.phase(DEV), PhaseKind::Stopping);
    assert_eq!(o.view(c[0]).operations_in_flight, 2);
    o.return_callbacks(DEV);
    o.advance(100);
    assert_eq!(o.ok(Input::AccessDone { client: c[0] }), vec![], "one left");
    assert_eq!(o.phase(DEV), PhaseKind::Stopping);
    // Nothing new is granted while stopping.
    o.refused(
        op(c[0]),
        Error::InvalidState {
            phase: PhaseKind::Stopping,
            input: InputKind::Access,
        },
    );
    assert_eq!(
        o.ok(Input::AccessDone { client: c[0] }),
        stopped_and_released(t)
    );
    assert_eq!(o.phase(DEV), PhaseKind::Stopped);
    assert_eq!(o.m.poll_timeout(), None);
    // A stop with nothing in flight does not wait.
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    let (t, out) = query_stop_and_stop(&mut o);
    let mut expected = vec![notify(c[0], Event::DeviceStopped)];
    expected.extend(stopped_and_released(t));
    assert_eq!(out, expected);
}

/// DESIGN "Clients": the stop's wait has a deadline (`operation_timeout`, from the stop);
/// the client that overruns it is revoked and fenced, and the hardware is shut down only
/// once the owner reports the fence done.
#[test]
fn stop_fences_an_operation_that_outlasts_its_deadline() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    grant(&mut o, c[1]);
    o.at(10);
    let (t, _) = query_stop_and_stop(&mut o);
    o.return_callbacks(DEV);
    assert_eq!(o.m.poll_timeout(), Some(Tick(10 + OP_DEADLINE)));
    assert_eq!(
        o.timeout_at(10 + OP_DEADLINE - 1),
        vec![],
        "not before the deadline"
    );
    assert_eq!(o.fire_timeout(), vec![Output::Fence { client: c[1] }]);
    assert_eq!(
        o.phase(DEV),
        PhaseKind::Stopping,
        "no shutdown before the fence"
    );
    assert_eq!(o.view(c[1]).state, ClientState::Revoked);
    assert_eq!(
        o.m.poll_timeout(),
        None,
        "the fence is the owner's to report"
    );
    // A late AccessDone is accepted and ignored: only the fence ends the wait.
    assert_eq!(o.ok(Input::AccessDone { client: c[1] }), vec![]);
    assert_eq!(o.phase(DEV), PhaseKind::Stopping);
    o.advance(1);
    assert_eq!(
        o.ok(Input::FenceDone { client: c[1] }),
        stopped_and_released(t)
    );
    o.refused(
        Input::AccessDone { client: c[1] },
        Error::NoOperationInFlight,
    );
    // Revoked: every later call fails (a hardware call is refused by the stopped state).
    o.refused(
        op(c[1]),
        Error::InvalidState {
            phase: PhaseKind::Stopped,
            input: InputKind::Access,
        },
    );
    o.refused(Input::Hold { client: c[1] }, Error::ClientRevoked);
    // The trusted client, which had nothing in flight, is untouched.
    assert!(matches!(o.view(c[0]).state, ClientState::Active { .. }));
}

/// DESIGN "The reset cycle" and I12: after the last vote the hardware reset waits for
/// operations in flight, and runs when the last one finishes.
#[test]
fn reset_waits_for_operations_in_flight_after_the_last_vote() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.return_callbacks(DEV);
    grant(&mut o, c[0]);
    grant(&mut o, c[1]);
    o.ok(Input::ResetExecute { client: c[0] });
    o.at(50);
    assert_eq!(o.ok(Input::ResetExecute { client: c[1] }), vec![]);
    assert_eq!(
        o.m.phase_detail(DEV),
        Some(Phase::Quiescing {
            since: Tick(0),
            voters: 0,
            reset_needed: true,
            draining: Some(Tick(50)),
        })
    );
    assert_eq!(o.m.poll_timeout(), Some(Tick(50 + OP_DEADLINE)));
    assert_eq!(o.ok(Input::AccessDone { client: c[1] }), vec![]);
    assert_eq!(
        o.ok(Input::AccessDone { client: c[0] }),
        vec![hw(HardwareCommand::Reset)]
    );
}

/// DESIGN "Clients": the reset's wait for operations has a deadline counted from the last
/// vote; the overrunning client is revoked and fenced, the reset follows the fence.
#[test]
fn reset_fences_an_operation_that_outlasts_its_deadline() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.return_callbacks(DEV);
    grant(&mut o, c[1]);
    o.ok(Input::ResetExecute { client: c[0] });
    o.at(70);
    o.ok(Input::ResetExecute { client: c[1] });
    assert_eq!(o.timeout_at(70 + OP_DEADLINE - 1), vec![]);
    assert_eq!(o.fire_timeout(), vec![Output::Fence { client: c[1] }]);
    assert_eq!(o.now, Tick(70 + OP_DEADLINE));
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    assert_eq!(
        o.ok(Input::FenceDone { client: c[1] }),
        vec![hw(HardwareCommand::Reset)]
    );
    let out = o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    assert!(out.contains(&notify(c[0], Event::ResetEnd { epoch: Epoch(1) })));
    assert!(!out
        .iter()
        .any(|x| matches!(x, Output::Notify { client, .. } if *client == c[1])));
}

/// DESIGN "Clients" and I12: removal teardown waits for operations in flight; at the
/// detach deadline the holders are fenced, and the hardware is shut down after the fence.
#[test]
fn removal_teardown_waits_for_operations_then_fences_at_the_detach_deadline() {
    for finishes in [true, false] {
        let (mut o, c) = running_with(&[ClientKind::Trusted]);
        grant(&mut o, c[0]);
        o.at(5);
        let t = o.token();
        assert_eq!(
            o.ok(Input::Remove {
                device: DEV,
                token: t
            }),
            vec![notify(c[0], Event::Removed { surprise: false })]
        );
        o.return_callbacks(DEV);
        // The client detaches, but its operation is still in flight.
        assert_eq!(
            o.step(Input::Unregister { client: c[0] }).0,
            Ok(Reply::Unregistered(Unregistered::Now))
        );
        assert_eq!(o.phase(DEV), PhaseKind::Removing);
        assert_eq!(
            o.m.poll_timeout(),
            Some(Tick(5 + Config::DEFAULT.detach_timeout))
        );
        let teardown = vec![
            Output::ClientGone { client: c[0] },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
        ];
        if finishes {
            o.advance(10);
            assert_eq!(o.ok(Input::AccessDone { client: c[0] }), teardown);
            continue;
        }
        assert_eq!(o.timeout_at(4 + Config::DEFAULT.detach_timeout), vec![]);
        assert_eq!(o.fire_timeout(), vec![Output::Fence { client: c[0] }]);
        assert_eq!(
            o.phase(DEV),
            PhaseKind::Removing,
            "no teardown before the fence"
        );
        assert_eq!(o.ok(Input::FenceDone { client: c[0] }), teardown);
    }
}

/// DESIGN "Clients": a revoked client's operation in flight is fenced before the hardware
/// is touched: the reset waits for the fence.
#[test]
fn revocation_fences_operation_in_flight_before_reset() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    let (kernel, user) = (c[0], c[1]);
    o.ok(Input::ResetRequest { client: kernel });
    o.return_callbacks(DEV);
    // The untrusted voter is granted an operation while quiescing, then goes silent.
    grant(&mut o, user);
    assert_eq!(o.ok(Input::ResetExecute { client: kernel }), vec![]);
    assert_eq!(o.m.poll_timeout(), Some(Tick(UNTRUSTED_ACK)));
    assert_eq!(
        o.fire_timeout(),
        vec![Output::Fence { client: user }],
        "revoked and fenced, no reset yet"
    );
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    // However long the fence takes, the hardware is not reset before it.
    assert_eq!(o.m.poll_timeout(), None);
    assert_eq!(o.timeout_at(UNTRUSTED_ACK + 10 * OP_DEADLINE), vec![]);
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    assert_eq!(
        o.ok(Input::FenceDone { client: user }),
        vec![hw(HardwareCommand::Reset)]
    );
    let out = o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    assert_eq!(
        out,
        vec![
            notify(kernel, Event::ResetEnd { epoch: Epoch(1) }),
            finished(CycleOutcome::Completed(Epoch(1))),
        ]
    );
    assert_eq!(
        o.events_of(user),
        vec![Event::Reset],
        "fenced: no event after"
    );
}

/// DESIGN "Clients" (no client can make the machine refuse the OS): the bound on
/// operations in flight is the client's own typed error; it changes nothing and stands in
/// the way of no OS input.
#[test]
fn too_many_operations_is_the_clients_error_and_refuses_no_os_input() {
    let (mut o, c) = running_with(&[ClientKind::Untrusted, ClientKind::Trusted]);
    for _ in 0..16 {
        grant(&mut o, c[0]);
    }
    // `refused` asserts the machine is unchanged and nothing queued (I10).
    o.refused(op(c[0]), Error::TooManyOperations);
    assert_eq!(o.view(c[0]).operations_in_flight, 16);
    // Another client is not affected, nor are queries.
    grant(&mut o, c[1]);
    assert_eq!(
        o.step(Input::Access {
            client: c[0],
            epoch: Epoch(0),
            what: Access::QueryCounters(P0)
        })
        .0,
        Ok(Reply::AccessGranted)
    );
    o.ok(Input::AccessDone { client: c[0] });
    grant(&mut o, c[0]);
    o.refused(op(c[0]), Error::TooManyOperations);
    // The OS is never refused: a fatal error, surprise removal, remove and unload are
    // taken, and unload finishes once the owner fences what the client never finishes.
    assert_eq!(
        fatal(&mut o).0,
        Ok(Reply::Fatal(FatalAnswer::Served(ResetAnswer::Started)))
    );
    o.ok(Input::SurpriseRemoval { device: DEV });
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    o.ok(Input::Unload);
    let mut out = o.return_callbacks(DEV);
    out.extend(o.ok(Input::AccessDone { client: c[1] }));
    out.extend(o.fire_timeout());
    assert!(out.contains(&Output::Fence { client: c[0] }), "{out:?}");
    out.extend(o.finish_fences(DEV));
    assert!(out.contains(&complete(t, Status::Success)), "{out:?}");
    assert_eq!(out.last(), Some(&Output::UnloadMayFinish), "{out:?}");
    assert_eq!(count_hw(&out, HardwareCommand::Shutdown), 0);
}

/// An `AccessDone` with nothing in flight is the reporter's mistake: refused, nothing
/// changed.
#[test]
fn access_done_without_an_operation_in_flight_is_refused() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.refused(
        Input::AccessDone { client: c[0] },
        Error::NoOperationInFlight,
    );
    grant(&mut o, c[0]);
    o.ok(Input::AccessDone { client: c[0] });
    o.refused(
        Input::AccessDone { client: c[0] },
        Error::NoOperationInFlight,
    );
    o.ok(Input::Unregister { client: c[0] });
    o.refused(Input::AccessDone { client: c[0] }, Error::UnknownClient);
}
