//! DESIGN "Power" and "Device lifecycle": a power transition asked while a query stop or
//! query remove is pending is carried out, and the device returns to the pending query
//! once the hardware reports (Windows must not fail `IRP_MN_SET_POWER`: a D3 idle
//! followed by a rebalance's query stop, then D0, is a real order). Issue 22, item 6.

mod common;
use common::*;
use pnp_lifecycle::*;

type O = Owner<1, 4, 2, { queue_capacity(1, 4) }>;

const IDLE: PowerDownKind = PowerDownKind::Idle;
const SLEEP: PowerDownKind = PowerDownKind::SystemSleep;
const BACK: Event = Event::Resumed {
    epoch: Epoch(0),
    state_lost: false,
};

/// A running device with one trusted client, every callback returned.
fn running() -> (O, ClientHandle) {
    let mut o = owner();
    o.started(DEV, false);
    let c = o.register(DEV, ClientKind::Trusted);
    o.return_callbacks(DEV);
    (o, c)
}

fn power_down(o: &mut O, kind: PowerDownKind) -> (RequestToken, Vec<Output>) {
    let token = o.token();
    let out = o.ok(Input::PowerDown {
        device: DEV,
        kind,
        token,
    });
    (token, out)
}

fn power_up(o: &mut O) -> (RequestToken, Vec<Output>) {
    let token = o.token();
    let out = o.ok(Input::PowerUp { device: DEV, token });
    (token, out)
}

/// A request that completes at once with success; its outputs are exactly that.
fn granted(o: &mut O, make: fn(RequestToken) -> Input) {
    let token = o.token();
    assert_eq!(o.ok(make(token)), vec![complete(token, Status::Success)]);
}

fn query_stop(token: RequestToken) -> Input {
    Input::QueryStop { device: DEV, token }
}
fn cancel_stop(token: RequestToken) -> Input {
    Input::CancelStop { device: DEV, token }
}
fn query_remove(token: RequestToken) -> Input {
    Input::QueryRemove { device: DEV, token }
}
fn cancel_remove(token: RequestToken) -> Input {
    Input::CancelRemove { device: DEV, token }
}

fn hardware_op(o: &mut O, client: ClientHandle) -> Result<Reply, Error> {
    o.step(Input::Access {
        client,
        epoch: Epoch(0),
        what: Access::HardwareOp,
    })
    .0
}

/// D3 (idle), then a query stop (success), then D0 is being powered up: the device is in
/// `PoweringUp` with the query stop still pending.
fn d3_query_stop_d0_under_way() -> (O, ClientHandle, RequestToken) {
    let (mut o, c) = running();
    let (down, out) = power_down(&mut o, IDLE);
    assert_eq!(
        out,
        vec![
            notify(c, Event::Suspending { kind: IDLE }),
            hw(HardwareCommand::PowerDown)
        ]
    );
    o.return_callbacks(DEV);
    assert_eq!(
        o.ok(Input::PowerDownDone { device: DEV }),
        vec![complete(down, Status::Success)]
    );
    granted(&mut o, query_stop);
    assert_eq!(o.phase(DEV), PhaseKind::StopPending);
    let (up, out) = power_up(&mut o);
    assert_eq!(out, vec![hw(HardwareCommand::PowerUp)], "D0 is not refused");
    assert_eq!(o.phase(DEV), PhaseKind::PoweringUp);
    (o, c, up)
}

/// A query remove (success) in D0, then D3 (`kind`) is under way: the device is in
/// `PoweringDown`, the power-down commanded, the query remove still pending.
fn query_remove_d3_under_way(kind: PowerDownKind) -> (O, ClientHandle, RequestToken) {
    let (mut o, c) = running();
    granted(&mut o, query_remove);
    let (down, out) = power_down(&mut o, kind);
    assert_eq!(
        out,
        vec![
            notify(c, Event::Suspending { kind }),
            hw(HardwareCommand::PowerDown)
        ],
        "D3 is not refused: suspending, nothing in flight, then the command"
    );
    assert_eq!(o.phase(DEV), PhaseKind::PoweringDown);
    o.return_callbacks(DEV);
    (o, c, down)
}

#[test]
fn d3_then_query_stop_then_d0_then_cancel_stop_leaves_the_device_running() {
    let (mut o, c, up) = d3_query_stop_d0_under_way();
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Powered,
        }),
        vec![complete(up, Status::Success), notify(c, BACK)]
    );
    assert_eq!(
        o.phase(DEV),
        PhaseKind::StopPending,
        "back to the pending query"
    );
    o.return_callbacks(DEV);
    granted(&mut o, cancel_stop);
    assert_eq!(o.phase(DEV), PhaseKind::Running);
    assert_eq!(hardware_op(&mut o, c), Ok(Reply::AccessGranted));
}

#[test]
fn d3_then_query_stop_then_d0_then_stop_shuts_the_powered_hardware_down() {
    let (mut o, c, up) = d3_query_stop_d0_under_way();
    o.ok(Input::PowerUpDone {
        device: DEV,
        result: PowerUpResult::Powered,
    });
    o.return_callbacks(DEV);
    let stop = o.token();
    assert_eq!(
        o.ok(Input::Stop {
            device: DEV,
            token: stop
        }),
        vec![
            notify(c, Event::DeviceStopped),
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(stop, Status::Success)
        ],
        "in D0 again: the stop quiesces the hardware ({up:?} done)"
    );
    assert_eq!(o.phase(DEV), PhaseKind::Stopped);
}

#[test]
fn a_stop_that_arrives_during_the_power_up_is_served_when_the_hardware_reports() {
    let (mut o, c, up) = d3_query_stop_d0_under_way();
    let stop = o.token();
    assert_eq!(
        o.ok(Input::Stop {
            device: DEV,
            token: stop
        }),
        vec![],
        "accepted, held for the power-up"
    );
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Powered,
        }),
        vec![
            complete(up, Status::Success),
            notify(c, BACK),
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(stop, Status::Success)
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Stopped);
    o.return_callbacks(DEV);
    assert_eq!(o.events_of(c).last(), Some(&Event::DeviceStopped));
}

#[test]
fn query_stop_in_d0_then_d3_then_stop_releases_without_touching_registers() {
    let (mut o, c) = running();
    granted(&mut o, query_stop);
    let (down, out) = power_down(&mut o, SLEEP);
    assert_eq!(
        out,
        vec![
            notify(c, Event::Suspending { kind: SLEEP }),
            hw(HardwareCommand::PowerDown)
        ]
    );
    o.return_callbacks(DEV);
    assert_eq!(
        o.ok(Input::PowerDownDone { device: DEV }),
        vec![complete(down, Status::Success)]
    );
    assert_eq!(o.phase(DEV), PhaseKind::StopPending);
    let stop = o.token();
    assert_eq!(
        o.ok(Input::Stop {
            device: DEV,
            token: stop
        }),
        vec![
            notify(c, Event::DeviceStopped),
            hw(HardwareCommand::ReleaseResources),
            complete(stop, Status::Success)
        ],
        "stopped from Dx: no shutdown, no power-up"
    );
}

#[test]
fn query_remove_then_d3_then_cancel_remove_leaves_the_device_in_d3() {
    for kind in [IDLE, SLEEP] {
        let (mut o, c, down) = query_remove_d3_under_way(kind);
        assert_eq!(
            o.ok(Input::PowerDownDone { device: DEV }),
            vec![complete(down, Status::Success)]
        );
        assert_eq!(o.phase(DEV), PhaseKind::RemovePending);
        granted(&mut o, cancel_remove);
        assert_eq!(o.phase(DEV), PhaseKind::LowPower, "{kind:?}");
        let (up, out) = power_up(&mut o);
        assert_eq!(out, vec![hw(HardwareCommand::PowerUp)]);
        assert_eq!(
            o.ok(Input::PowerUpDone {
                device: DEV,
                result: PowerUpResult::Powered,
            }),
            vec![complete(up, Status::Success), notify(c, BACK)]
        );
        assert_eq!(o.phase(DEV), PhaseKind::Running);
    }
}

#[test]
fn query_remove_then_d3_then_remove_releases_without_powering_up() {
    let (mut o, c, down) = query_remove_d3_under_way(SLEEP);
    o.ok(Input::PowerDownDone { device: DEV });
    let remove = o.token();
    assert_eq!(
        o.ok(Input::Remove {
            device: DEV,
            token: remove
        }),
        vec![notify(c, Event::Removed { surprise: false })],
        "{down:?}"
    );
    o.return_callbacks(DEV);
    assert_eq!(
        o.ok(Input::Unregister { client: c }),
        vec![
            Output::ClientGone { client: c },
            hw(HardwareCommand::ReleaseResources),
            complete(remove, Status::Success),
            Output::DeviceRemoved { device: DEV }
        ]
    );
}

#[test]
fn d0_while_a_query_remove_is_pending_in_d3_returns_to_the_pending_query() {
    let (mut o, c) = running();
    let (_, _) = power_down(&mut o, SLEEP);
    o.return_callbacks(DEV);
    o.ok(Input::PowerDownDone { device: DEV });
    granted(&mut o, query_remove);
    let (up, out) = power_up(&mut o);
    assert_eq!(out, vec![hw(HardwareCommand::PowerUp)]);
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Powered,
        }),
        vec![complete(up, Status::Success), notify(c, BACK)]
    );
    assert_eq!(o.phase(DEV), PhaseKind::RemovePending);
    o.return_callbacks(DEV);
    granted(&mut o, cancel_remove);
    assert_eq!(o.phase(DEV), PhaseKind::Running);
}

#[test]
fn surprise_removal_during_the_power_up_for_a_pending_query_stop() {
    let (mut o, c, up) = d3_query_stop_d0_under_way();
    let stop = o.token();
    o.ok(Input::Stop {
        device: DEV,
        token: stop,
    });
    assert_eq!(
        o.ok(Input::SurpriseRemoval { device: DEV }),
        vec![
            complete(up, Status::DeviceGone),
            complete(stop, Status::DeviceGone),
            notify(c, Event::Removed { surprise: true })
        ],
        "every request held answered; no command"
    );
    assert_eq!(o.phase(DEV), PhaseKind::SurpriseRemoved);
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Powered,
        }),
        vec![],
        "the power-up in flight reports; nothing follows"
    );
}

#[test]
fn surprise_removal_during_the_power_down_for_a_pending_query_remove() {
    let (mut o, c, down) = query_remove_d3_under_way(IDLE);
    assert_eq!(
        o.ok(Input::SurpriseRemoval { device: DEV }),
        vec![
            complete(down, Status::DeviceGone),
            notify(c, Event::Removed { surprise: true })
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::SurpriseRemoved);
    assert_eq!(o.ok(Input::PowerDownDone { device: DEV }), vec![]);
    o.return_callbacks(DEV);
    let remove = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: remove,
    });
    let out = o.ok(Input::Unregister { client: c });
    assert_eq!(
        out,
        vec![
            Output::ClientGone { client: c },
            hw(HardwareCommand::ReleaseResources),
            complete(remove, Status::Success),
            Output::DeviceRemoved { device: DEV }
        ]
    );
}

#[test]
fn a_cancel_stop_during_the_power_up_leaves_the_device_running_once_it_reports() {
    let (mut o, c, up) = d3_query_stop_d0_under_way();
    granted(&mut o, cancel_stop);
    assert_eq!(o.phase(DEV), PhaseKind::PoweringUp);
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Powered,
        }),
        vec![complete(up, Status::Success), notify(c, BACK)]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Running, "the query was cancelled");
    assert_eq!(hardware_op(&mut o, c), Ok(Reply::AccessGranted));
}

#[test]
fn a_cancel_remove_during_the_power_down_leaves_the_device_in_d3_once_it_reports() {
    let (mut o, _c, down) = query_remove_d3_under_way(SLEEP);
    granted(&mut o, cancel_remove);
    assert_eq!(
        o.ok(Input::PowerDownDone { device: DEV }),
        vec![complete(down, Status::Success)]
    );
    assert_eq!(o.phase(DEV), PhaseKind::LowPower, "the query was cancelled");
    // A query remove again is answered as in any Dx.
    granted(&mut o, query_remove);
}

#[test]
fn during_the_transition_clients_get_the_pending_query_s_answers() {
    let (mut o, c, _down) = query_remove_d3_under_way(IDLE);
    // Remove pending: no new registration, no reset request, no access (DESIGN
    // "Device lifecycle"); the power-down does not make them admissible. Each refusal
    // names the pending query's state, whose answer it is.
    o.refused(
        Input::Register {
            device: DEV,
            kind: ClientKind::Untrusted,
        },
        Error::InvalidState {
            phase: PhaseKind::RemovePending,
            input: InputKind::Register,
        },
    );
    o.refused(
        Input::ResetRequest { client: c },
        Error::InvalidState {
            phase: PhaseKind::RemovePending,
            input: InputKind::ResetRequest,
        },
    );
    assert_eq!(
        hardware_op(&mut o, c),
        Err(Error::InvalidState {
            phase: PhaseKind::RemovePending,
            input: InputKind::Access,
        }),
        "no wake-up for a device whose removal is pending"
    );
}

#[test]
fn a_fatal_error_during_the_power_down_for_a_pending_stop_is_folded_into_the_stop() {
    let (mut o, _c) = running();
    granted(&mut o, query_stop);
    let (down, _) = power_down(&mut o, IDLE);
    o.return_callbacks(DEV);
    assert_eq!(
        o.step(Input::FatalError { device: DEV }).0,
        Ok(Reply::Fatal(FatalAnswer::Deferred))
    );
    assert_eq!(
        o.ok(Input::PowerDownDone { device: DEV }),
        vec![complete(down, Status::Success)],
        "the pending stop holds it: no wake-up"
    );
    assert_eq!(o.phase(DEV), PhaseKind::StopPending);
    let stop = o.token();
    let out = o.ok(Input::Stop {
        device: DEV,
        token: stop,
    });
    assert!(
        out.contains(&finished(CycleOutcome::FoldedIntoStop)),
        "answered by the stop (I8): {out:?}"
    );
}

#[test]
fn a_power_query_during_a_pending_query_answers_what_the_power_down_gets() {
    let (mut o, _c) = running();
    granted(&mut o, query_stop);
    assert_eq!(o.m.query_power_down(DEV, SLEEP), Ok(()));
    let before = o.m.clone();
    assert_eq!(o.m.query_power_down(DEV, IDLE), Ok(()));
    assert!(o.m == before, "asking changes nothing");
}

#[test]
fn a_failed_power_up_for_a_pending_query_stop_ends_the_held_stop_with_the_device() {
    let (mut o, c, up) = d3_query_stop_d0_under_way();
    let stop = o.token();
    o.ok(Input::Stop {
        device: DEV,
        token: stop,
    });
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Failed,
        }),
        vec![
            complete(up, Status::HardwareFailed),
            complete(stop, Status::DeviceGone),
            notify(c, Event::Removed { surprise: true })
        ],
        "a failed power-up from Dx is the hardware having vanished"
    );
    assert_eq!(o.phase(DEV), PhaseKind::SurpriseRemoved);
}

#[test]
fn a_lost_state_power_up_for_a_pending_query_remove_returns_to_it_at_a_new_epoch() {
    let (mut o, c) = running();
    power_down(&mut o, SLEEP);
    o.return_callbacks(DEV);
    o.ok(Input::PowerDownDone { device: DEV });
    granted(&mut o, query_remove);
    let (up, _) = power_up(&mut o);
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::LostState,
        }),
        vec![
            complete(up, Status::Success),
            notify(
                c,
                Event::Resumed {
                    epoch: Epoch(1),
                    state_lost: true
                }
            )
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::RemovePending);
    assert_eq!(o.m.epoch(DEV), Some(Epoch(1)));
    o.return_callbacks(DEV);
    granted(&mut o, cancel_remove);
    assert_eq!(o.phase(DEV), PhaseKind::Running);
    assert_eq!(
        hardware_op(&mut o, c),
        Err(Error::StaleEpoch { current: Epoch(1) }),
        "the old interface is gone"
    );
}

#[test]
fn a_fatal_error_held_through_the_power_down_is_served_after_the_power_up_on_cancel_stop() {
    let (mut o, c) = running();
    granted(&mut o, query_stop);
    assert_eq!(
        o.step(Input::FatalError { device: DEV }).0,
        Ok(Reply::Fatal(FatalAnswer::Deferred))
    );
    power_down(&mut o, IDLE);
    o.return_callbacks(DEV);
    o.ok(Input::PowerDownDone { device: DEV });
    let cancel = o.token();
    assert_eq!(
        o.ok(cancel_stop(cancel)),
        vec![
            complete(cancel, Status::Success),
            hw(HardwareCommand::PowerUp)
        ],
        "an idle Dx comes back for the fatal error the query held"
    );
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Powered,
        }),
        vec![notify(c, BACK)]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing, "served by a cycle (I8)");
    assert_eq!(o.return_callbacks(DEV), vec![notify(c, Event::Reset)]);
}
