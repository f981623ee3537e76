//! Decisions of `src/device/` that the rest of the suite does not pin: each test names the
//! behaviour it fixes (cargo-mutants over `src/device/` found them unchecked).

mod common;
use common::*;
use pnp_lifecycle::*;

type O = Owner<1, 4, 2, { queue_capacity(1, 4) }>;

/// A running device with one client of each kind: `[untrusted, trusted]`.
fn running_untrusted_and_trusted() -> (O, ClientHandle, ClientHandle) {
    let mut o = owner();
    o.started(DEV, false);
    let untrusted = o.register(DEV, ClientKind::Untrusted);
    let trusted = o.register(DEV, ClientKind::Trusted);
    (o, untrusted, trusted)
}

// ---- the one deadline list (DESIGN "Cost": `poll_timeout` keeps the next deadline) -----

/// `poll_timeout` names the earliest deadline still waited on: once the voter whose
/// deadline it was answers, the next voter's; once the last answers, none (an owner arms
/// no timer for a deadline nobody waits on any more).
#[test]
fn poll_timeout_moves_to_the_next_voter_deadline_as_voters_answer() {
    let (mut o, untrusted, trusted) = running_untrusted_and_trusted();
    let ack = |kind| match kind {
        ClientKind::Untrusted => Config::DEFAULT.untrusted_ack_timeout,
        ClientKind::Trusted => Config::DEFAULT.trusted_ack_timeout,
    };
    assert!(ack(ClientKind::Untrusted) < ack(ClientKind::Trusted));
    o.at(100);
    o.ok(Input::ResetRequest { client: trusted });
    o.return_callbacks(DEV);
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(100 + ack(ClientKind::Untrusted)))
    );
    o.at(110);
    o.ok(Input::CanRecover { client: untrusted });
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(100 + ack(ClientKind::Trusted)))
    );
    o.at(120);
    o.ok(Input::ResetExecute { client: trusted });
    assert_eq!(o.phase(DEV), PhaseKind::Executing);
    assert_eq!(o.m.poll_timeout(), None);
}

/// A callback delivered during a cycle adds its own deadline: `poll_timeout` stays at an
/// earlier voter deadline, and moves to the callback's once that voter has answered.
#[test]
fn poll_timeout_keeps_the_earlier_of_a_voter_deadline_and_a_new_callback_deadline() {
    let (mut o, untrusted, trusted) = running_untrusted_and_trusted();
    for client in [untrusted, trusted] {
        o.ok(Input::Bind {
            client,
            ports: PortSet::single(P0),
        });
    }
    let config = Config::DEFAULT;
    o.at(100);
    o.ok(Input::ResetRequest { client: trusted });
    o.return_callbacks(DEV);
    let untrusted_due = Tick(100 + config.untrusted_ack_timeout);
    let trusted_due = Tick(100 + config.trusted_ack_timeout);
    assert_eq!(o.m.poll_timeout(), Some(untrusted_due));
    // A link change at 200 hands both voters a callback, due after the untrusted voter's
    // deadline and before the trusted voter's.
    o.at(200);
    let link = Event::LinkChanged {
        port: P0,
        state: LinkState::Active,
    };
    let out = o.ok(Input::LinkChanged {
        device: DEV,
        port: P0,
        state: LinkState::Active,
    });
    assert!(out.contains(&notify(untrusted, link)), "{out:?}");
    assert!(out.contains(&notify(trusted, link)), "{out:?}");
    let callback_due = Tick(200 + config.callback_timeout);
    assert!(untrusted_due < callback_due && callback_due < trusted_due);
    assert_eq!(o.m.poll_timeout(), Some(untrusted_due));
    // The untrusted voter answers: the callbacks' deadline is the earliest now.
    o.at(300);
    o.ok(Input::CanRecover { client: untrusted });
    assert_eq!(o.m.poll_timeout(), Some(callback_due));
    // Both callbacks returned: the trusted voter's deadline.
    o.at(310);
    o.return_callbacks(DEV);
    assert_eq!(o.m.poll_timeout(), Some(trusted_due));
}

// ---- power (DESIGN "Power", I8) -------------------------------------------------------

/// A fatal error deferred during a power-up asked while a query stop is pending stays
/// held when the hardware reports powered: the device is back in stop pending, and the
/// cancel stop that ends the query serves it with a reset cycle (I8).
#[test]
fn a_fatal_error_deferred_during_the_power_up_for_a_query_stop_is_served_on_cancel_stop() {
    let mut o = owner();
    o.started(DEV, false);
    let c = o.register(DEV, ClientKind::Trusted);
    o.return_callbacks(DEV);
    let down = o.token();
    o.ok(Input::PowerDown {
        device: DEV,
        kind: PowerDownKind::Idle,
        token: down,
    });
    o.return_callbacks(DEV);
    o.ok(Input::PowerDownDone { device: DEV });
    let query = o.token();
    o.ok(Input::QueryStop {
        device: DEV,
        token: query,
    });
    let up = o.token();
    assert_eq!(
        o.ok(Input::PowerUp {
            device: DEV,
            token: up
        }),
        vec![hw(HardwareCommand::PowerUp)]
    );
    assert_eq!(
        o.step(Input::FatalError { device: DEV }).0,
        Ok(Reply::Fatal(FatalAnswer::Deferred)),
        "held by the pending query, as in stop pending"
    );
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Powered,
        }),
        vec![
            complete(up, Status::Success),
            notify(
                c,
                Event::Resumed {
                    epoch: Epoch(0),
                    state_lost: false
                }
            )
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::StopPending);
    o.return_callbacks(DEV);
    let cancel = o.token();
    assert_eq!(
        o.ok(Input::CancelStop {
            device: DEV,
            token: cancel,
        }),
        vec![complete(cancel, Status::Success), notify(c, Event::Reset)],
        "the held fatal error is served by a cycle"
    );
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
}
