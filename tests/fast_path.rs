//! The fast path's gates (issue 21; DESIGN.md "Operations: the fast path", I15): the
//! machine opens a client's gate exactly while the device runs in D0 with nothing to drain
//! and the client is registered, unrevoked and at the current epoch; it closes the gate
//! before every drain and waits for the owner's answer, whose operations it then drains
//! like its own. Each test states the exact outputs.

mod common;
use common::*;
use pnp_lifecycle::*;

fn fast() -> Owner<1, 4, 2, { queue_capacity(1, 4) }> {
    let mut o = owner();
    o.m = Lifecycle::new(Config::DEFAULT).with_fast_path();
    o
}

fn open(client: ClientHandle, epoch: u32) -> Output {
    Output::FastPath {
        client,
        gate: FastPathGate::Open {
            epoch: Epoch(epoch),
        },
    }
}

fn close(client: ClientHandle) -> Output {
    Output::FastPath {
        client,
        gate: FastPathGate::Close,
    }
}

fn closed(client: ClientHandle, in_flight: u32) -> Input {
    Input::FastPathClosed { client, in_flight }
}

/// A started fast-path device with one trusted client whose gate is open and whose
/// callbacks have returned.
fn running_with_open_gate() -> (Owner<1, 4, 2, { queue_capacity(1, 4) }>, ClientHandle) {
    let mut o = fast();
    o.started(DEV, false);
    let (reply, outputs) = o.step(Input::Register {
        device: DEV,
        kind: ClientKind::Trusted,
    });
    let Ok(Reply::Registered { client, .. }) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(
        outputs,
        vec![open(client, 0)],
        "register while running opens"
    );
    (o, client)
}

#[test]
fn the_gate_opens_when_the_device_starts_and_on_register_while_running() {
    let mut o = fast();
    o.ok(Input::AddDevice { device: DEV });
    let c = o.register(DEV, ClientKind::Trusted);
    let token = o.token();
    assert_eq!(
        o.ok(Input::Start { device: DEV, token }),
        vec![hw(HardwareCommand::Start)]
    );
    assert_eq!(
        o.ok(Input::StartDone {
            device: DEV,
            result: StartResult::Started
        }),
        vec![
            complete(token, Status::Success),
            notify(c, Event::DeviceStarted { epoch: Epoch(0) }),
            open(c, 0),
        ]
    );
    let (reply, outputs) = o.step(Input::Register {
        device: DEV,
        kind: ClientKind::Untrusted,
    });
    let Ok(Reply::Registered { client: u, .. }) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(outputs, vec![open(u, 0)]);

    // Without `with_fast_path` the machine never speaks of gates.
    let mut plain = owner();
    plain.ok(Input::AddDevice { device: DEV });
    let c = plain.register(DEV, ClientKind::Trusted);
    let token = plain.token();
    plain.ok(Input::Start { device: DEV, token });
    let outputs = plain.ok(Input::StartDone {
        device: DEV,
        result: StartResult::Started,
    });
    assert!(!outputs.iter().any(|o| matches!(o, Output::FastPath { .. })));
    plain.refused(closed(c, 0), Error::FastPathNotClosing);
}

#[test]
fn a_stop_closes_the_gate_first_and_drains_what_the_close_carried() {
    let (mut o, c) = running_with_open_gate();
    let query = o.token();
    assert_eq!(
        o.ok(Input::QueryStop {
            device: DEV,
            token: query
        }),
        vec![close(c), complete(query, Status::Success)]
    );
    let stop = o.token();
    assert_eq!(
        o.ok(Input::Stop {
            device: DEV,
            token: stop
        }),
        vec![notify(c, Event::DeviceStopped)],
        "no shutdown while the close is unanswered"
    );
    o.return_callbacks(DEV);
    o.advance(5);
    assert_eq!(o.ok(closed(c, 2)), vec![], "two operations still in flight");
    assert_eq!(o.view(c).operations_in_flight, 2);
    // Rule (I13): the carried operations' deadline counts from the answer.
    assert_eq!(
        o.m.poll_timeout(),
        Some(o.now.after(Config::DEFAULT.operation_timeout))
    );
    assert_eq!(o.ok(Input::AccessDone { client: c }), vec![]);
    assert_eq!(
        o.ok(Input::AccessDone { client: c }),
        vec![
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(stop, Status::Success),
        ]
    );
    o.refused(
        closed(c, 0),
        Error::InvalidState {
            phase: PhaseKind::Stopped,
            input: InputKind::FastPathClosed,
        },
    );
}

#[test]
fn a_reset_closes_the_gate_and_reopens_it_at_the_new_epoch_once_reacquired() {
    let (mut o, c) = running_with_open_gate();
    let (reply, outputs) = o.step(Input::ResetRequest { client: c });
    assert_eq!(reply, Ok(Reply::Reset(ResetAnswer::Started)));
    assert_eq!(outputs, vec![notify(c, Event::Reset), close(c)]);
    o.return_callbacks(DEV);
    assert_eq!(
        o.ok(Input::ResetExecute { client: c }),
        vec![],
        "no hardware reset while the close is unanswered"
    );
    assert_eq!(o.ok(closed(c, 0)), vec![hw(HardwareCommand::Reset)]);
    let outputs = o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    assert_eq!(
        outputs,
        vec![
            notify(c, Event::ResetEnd { epoch: Epoch(1) }),
            finished(CycleOutcome::Completed(Epoch(1))),
        ],
        "the client's interface is stale: its gate stays shut"
    );
    o.return_callbacks(DEV);
    let (reply, outputs) = o.step(Input::AcquireInterface { client: c });
    assert_eq!(reply, Ok(Reply::Interface(Epoch(1))));
    assert_eq!(outputs, vec![open(c, 1)], "reopened at the new epoch");
}

#[test]
fn a_power_down_closes_the_gate_before_the_hardware_and_the_power_up_reopens_it() {
    let (mut o, c) = running_with_open_gate();
    let token = o.token();
    assert_eq!(
        o.ok(Input::PowerDown {
            device: DEV,
            kind: PowerDownKind::Idle,
            token
        }),
        vec![
            notify(
                c,
                Event::Suspending {
                    kind: PowerDownKind::Idle
                }
            ),
            close(c),
        ]
    );
    o.return_callbacks(DEV);
    assert_eq!(o.ok(closed(c, 0)), vec![hw(HardwareCommand::PowerDown)]);
    assert_eq!(
        o.ok(Input::PowerDownDone { device: DEV }),
        vec![complete(token, Status::Success)],
        "no gate opens in Dx"
    );
    let up = o.token();
    assert_eq!(
        o.ok(Input::PowerUp {
            device: DEV,
            token: up
        }),
        vec![hw(HardwareCommand::PowerUp)]
    );
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Powered
        }),
        vec![
            complete(up, Status::Success),
            notify(
                c,
                Event::Resumed {
                    epoch: Epoch(0),
                    state_lost: false
                }
            ),
            open(c, 0),
        ]
    );
}

#[test]
fn surprise_removal_closes_the_gate_and_the_teardown_waits_for_the_answer() {
    let (mut o, c) = running_with_open_gate();
    assert_eq!(
        o.ok(Input::SurpriseRemoval { device: DEV }),
        vec![notify(c, Event::Removed { surprise: true }), close(c)]
    );
    o.return_callbacks(DEV);
    let token = o.token();
    assert_eq!(o.ok(Input::Remove { device: DEV, token }), vec![]);
    assert_eq!(o.ok(Input::Unregister { client: c }), vec![]);
    assert_eq!(
        o.ok(closed(c, 0)),
        vec![
            Output::ClientGone { client: c },
            hw(HardwareCommand::ReleaseResources),
            complete(token, Status::Success),
            Output::DeviceRemoved { device: DEV },
        ]
    );
}

#[test]
fn remove_closes_the_gate_and_drains_a_carried_operation_before_the_teardown() {
    let (mut o, c) = running_with_open_gate();
    let token = o.token();
    assert_eq!(
        o.ok(Input::Remove { device: DEV, token }),
        vec![notify(c, Event::Removed { surprise: false }), close(c)]
    );
    o.return_callbacks(DEV);
    assert_eq!(o.ok(Input::Unregister { client: c }), vec![]);
    assert_eq!(o.ok(closed(c, 1)), vec![], "one operation still in flight");
    assert_eq!(
        o.ok(Input::AccessDone { client: c }),
        vec![
            Output::ClientGone { client: c },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(token, Status::Success),
            Output::DeviceRemoved { device: DEV },
        ]
    );
}

#[test]
fn unregister_closes_the_gate_and_the_slot_waits_for_the_answer() {
    let (mut o, c) = running_with_open_gate();
    o.return_callbacks(DEV);
    let (reply, outputs) = o.step(Input::Unregister { client: c });
    assert_eq!(reply, Ok(Reply::Unregistered(Unregistered::Now)));
    assert_eq!(outputs, vec![close(c)]);
    assert_eq!(o.ok(closed(c, 0)), vec![Output::ClientGone { client: c }]);
}

#[test]
fn a_revocation_closes_the_gate_and_a_revoked_client_is_never_reopened() {
    let (mut o, c) = running_with_open_gate();
    o.return_callbacks(DEV);
    o.ok(Input::Bind {
        client: c,
        ports: PortSet::single(P0),
    });
    o.ok(Input::LinkChanged {
        device: DEV,
        port: P0,
        state: LinkState::Active,
    });
    // The callback hangs past its deadline: revoked, fenced, and the gate closed.
    o.advance(Config::DEFAULT.callback_timeout);
    assert_eq!(
        o.ok(Input::Timeout),
        vec![Output::Fence { client: c }, close(c)]
    );
    assert_eq!(
        o.ok(closed(c, 1)),
        vec![],
        "the fence covers what it carried"
    );
    assert_eq!(o.view(c).operations_in_flight, 1);
    assert_eq!(o.ok(Input::FenceDone { client: c }), vec![]);
    assert_eq!(o.view(c).state, ClientState::Revoked);
    o.refused(closed(c, 0), Error::FastPathNotClosing);
}

#[test]
fn a_close_unanswered_in_time_revokes_and_fences_the_client() {
    let (mut o, c) = running_with_open_gate();
    o.return_callbacks(DEV);
    let query = o.token();
    o.ok(Input::QueryStop {
        device: DEV,
        token: query,
    });
    let stop = o.token();
    o.ok(Input::Stop {
        device: DEV,
        token: stop,
    });
    o.return_callbacks(DEV);
    let due = Tick(o.now.0 + Config::DEFAULT.operation_timeout);
    assert_eq!(o.m.poll_timeout(), Some(due));
    o.at(due.0 - 1);
    assert_eq!(
        o.ok(Input::Timeout),
        vec![],
        "not before its deadline (I13)"
    );
    o.at(due.0);
    assert_eq!(o.ok(Input::Timeout), vec![Output::Fence { client: c }]);
    assert_eq!(o.view(c).state, ClientState::Revoked);
    assert_eq!(
        o.ok(Input::FenceDone { client: c }),
        vec![
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(stop, Status::Success),
        ]
    );
    o.refused(
        closed(c, 0),
        Error::InvalidState {
            phase: PhaseKind::Stopped,
            input: InputKind::FastPathClosed,
        },
    );
}

/// The output bound's per-client term (two a client) is reached with the gates, and fits:
/// a start tells every client registered before it that the device started and opens its
/// gate. A power-up that serves a reset waiting for it passes through running: it opens no
/// gate (it would close it again within the same input).
#[test]
fn a_start_reaches_two_outputs_a_client_and_a_power_up_serving_a_reset_opens_nothing() {
    type M4 = Lifecycle<1, 4, 2, { queue_capacity(1, 4) }>;
    let mut o = fast();
    o.ok(Input::AddDevice { device: DEV });
    let clients: Vec<ClientHandle> = (0..4)
        .map(|_| o.register(DEV, ClientKind::Trusted))
        .collect();
    let token = o.token();
    o.ok(Input::Start { device: DEV, token });
    let outputs = o.ok(Input::StartDone {
        device: DEV,
        result: StartResult::Started,
    });
    let mine = |outputs: &[Output], c: &ClientHandle| {
        outputs
            .iter()
            .filter(|out| match out {
                Output::Notify { client, .. } | Output::FastPath { client, .. } => client == c,
                _ => false,
            })
            .count()
    };
    for c in &clients {
        assert_eq!(mine(&outputs, c), 2, "{c:?}: {outputs:?}");
    }
    assert_eq!(outputs.len(), 2 * 4 + 1, "{outputs:?}");
    assert!(outputs.len() <= M4::DEVICE_INPUT_OUTPUTS);
    assert_eq!(M4::DEVICE_INPUT_OUTPUTS, outputs_per_device_input(4) + 1);
    assert_eq!(outputs_per_device_input(4), 2 * 4 + 8);

    o.return_callbacks(DEV);
    let token = o.token();
    o.ok(Input::PowerDown {
        device: DEV,
        kind: PowerDownKind::SystemSleep,
        token,
    });
    o.return_callbacks(DEV);
    for c in &clients {
        o.ok(closed(*c, 0));
    }
    o.ok(Input::PowerDownDone { device: DEV });
    let (reply, _) = o.step(Input::ResetRequest { client: clients[0] });
    assert_eq!(reply, Ok(Reply::Reset(ResetAnswer::AfterPowerUp)));
    let up = o.token();
    o.ok(Input::PowerUp {
        device: DEV,
        token: up,
    });
    let outputs = o.ok(Input::PowerUpDone {
        device: DEV,
        result: PowerUpResult::Powered,
    });
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    assert!(
        !outputs
            .iter()
            .any(|out| matches!(out, Output::FastPath { .. })),
        "{outputs:?}"
    );
    for c in &clients {
        assert_eq!(mine(&outputs, c), 1, "{c:?}: {outputs:?}");
    }
}

/// The fuzz body (oracle with I15, the three liveness drives; model off: the reference
/// model runs no fast path) over a two-device fast-path machine, on 3,000 seeded random cases:
/// the generator's owner answers closes with 0 to 2 operations in flight.
#[test]
fn seeded_fuzz_runs_on_the_fast_path_break_no_rule() {
    use pnp_lifecycle_testkit::fuzz_bodies::run_inputs;
    use pnp_lifecycle_testkit::rng::SplitMix;
    use pnp_lifecycle_testkit::{FastPath, Sut};
    type FastFuzz = FastPath<2, 3, 2, { queue_capacity(2, 3) }>;
    let mut rng = SplitMix(0xfa57);
    let mut inputs = 0;
    for case in 0..3000 {
        let data = rng.case(64, 2048);
        match run_inputs::<FastFuzz>(&data, true, FastFuzz::create) {
            Ok(n) => inputs += n,
            Err(finding) => panic!("case {case}: {finding}"),
        }
    }
    println!("3000 fast-path cases, {inputs} inputs, no rule broken");
    assert!(inputs > 30_000);
}
