//! Walk the whole matrix: every device input kind in every device state, then the
//! driver-wide inputs (`Timeout`, `Unload`) in every state.
//!
//! For each cell the machine must do what the per-state table says:
//! * `Refuse`: `Err(InvalidState { phase, input })`, nothing changed, nothing queued;
//! * `Veto`: `Err(Vetoed(ResetInProgress))`, nothing changed;
//! * `Ignore`: `Ok`, the machine unchanged, at most a successful completion queued;
//! * `Defer`: `Ok`, the device stays in its state until the hardware reports;
//! * `Handle`: never `InvalidState` for this cell, any refusal changes nothing, and at
//!   least one concrete instance of the state accepts the input.

mod common;
use common::*;
use pnp_lifecycle::inspect::*;
use pnp_lifecycle::table::*;
use pnp_lifecycle::*;

type O = Owner<1, 4, 2, { queue_capacity(1, 4) }>;

/// Build one instance of `phase`: a trusted client bound to port 0 and an untrusted one,
/// optionally holding the device (and then with port 1 unconfigured), optionally with
/// every callback returned (else the trusted one has a callback in flight where it can),
/// optionally with a third client whose callback overran and whose fence the owner has
/// not reported done. `via` picks how SurpriseRemoved and Removing are reached:
/// 0 from Added, 1 with a hardware start in flight, 2 with a hardware reset in flight,
/// 3 (Removing only) by driver unload, with no remove request; 4 (Quiescing only) with
/// every vote in and the reset waiting for an operation in flight; 5 (Stopping only) past
/// the operations' deadline, the holder's fence asked for and not reported. For the power
/// states, `via` 0 is an idle power-down, 1 a system sleep, 2 (LowPower only) a system
/// sleep with a reset request waiting for the power-up. `via` 6 and 7 reach SurpriseRemoved
/// and Removing with a hardware power-down (6) or power-up (7) in flight.
/// With `ops` the untrusted client has a hardware operation in flight from the start on
/// (Stopping exists only so). In the holding variants the untrusted client also declares
/// it cannot pause where the state takes that.
fn instance(
    phase: PhaseKind,
    hold: bool,
    returned: bool,
    via: u8,
    fenced: bool,
    ops: bool,
) -> Option<O> {
    use PhaseKind::*;
    let mut o = owner();
    let go = |o: &mut O, input: Input| o.step(input).0.is_ok();
    let via_fits = match via {
        0 => true,
        1 | 2 | 6 | 7 => matches!(phase, SurpriseRemoved | Removing),
        3 => phase == Removing,
        4 => phase == Quiescing && ops,
        5 => phase == Stopping && ops,
        _ => false,
    } || matches!(
        (phase, via),
        (PoweringDown | LowPower | PoweringUp, 0 | 1) | (LowPower, 2)
    );
    if !via_fits || phase == Stopping && !ops {
        return None;
    }
    if phase == Absent {
        if fenced {
            return None;
        }
        if hold {
            // Absent after a full removal: old handles exist and are "past".
            o.started(DEV, false);
            let c = o.register(DEV, ClientKind::Trusted);
            o.ok(Input::Remove {
                device: DEV,
                token: RequestToken(1),
            });
            o.return_callbacks(DEV);
            o.ok(Input::Unregister { client: c });
        }
        return Some(o);
    }
    let ok = go(&mut o, Input::AddDevice { device: DEV })
        && go(
            &mut o,
            Input::ConfigurePort {
                device: DEV,
                port: P0,
                caps: IB,
            },
        )
        && (hold // the holding variants leave port 1 to be configured
            || go(
                &mut o,
                Input::ConfigurePort {
                    device: DEV,
                    port: P1,
                    caps: IB,
                },
            ));
    assert!(ok);
    let t = o.register(DEV, ClientKind::Trusted);
    let u = o.register(DEV, ClientKind::Untrusted);
    o.ok(Input::Bind {
        client: t,
        ports: PortSet::single(P0),
    });
    // A link event before start: the bound client has a callback in flight from the start.
    o.ok(Input::LinkChanged {
        device: DEV,
        port: P0,
        state: LinkState::Init,
    });
    if fenced {
        // A third client's link callback hangs past its deadline: revoked and fenced.
        let f = o.register(DEV, ClientKind::Untrusted);
        o.ok(Input::Bind {
            client: f,
            ports: PortSet::single(P0),
        });
        o.ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Armed,
        });
        while o.view(t).callback_in_flight {
            o.ok(Input::CallbackDone { client: t });
        }
        o.advance(Config::DEFAULT.callback_timeout);
        let out = o.timeout();
        assert!(out.contains(&Output::Fence { client: f }), "{out:?}");
        assert!(o.view(f).fence_requested);
        o.ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Init,
        });
    }
    if hold {
        o.ok(Input::Hold { client: u });
        if phase == Failed {
            // Failed takes `CanPause` but not `CannotPause`: declare it before.
            o.ok(Input::CannotPause { client: u });
        }
    }
    let started = |o: &mut O| {
        go(
            o,
            Input::Start {
                device: DEV,
                token: RequestToken(2),
            },
        ) && go(
            o,
            Input::StartDone {
                device: DEV,
                result: StartResult::Started,
            },
        ) && (!ops
            || go(
                o,
                Input::Access {
                    client: u,
                    epoch: Epoch(0),
                    what: Access::HardwareOp,
                },
            ))
    };
    let power_down = |o: &mut O| {
        let kind = if via == 0 {
            PowerDownKind::Idle
        } else {
            PowerDownKind::SystemSleep
        };
        started(o)
            && go(
                o,
                Input::PowerDown {
                    device: DEV,
                    kind,
                    token: RequestToken(5),
                },
            )
    };
    let reached = match phase {
        Absent => unreachable!(),
        PoweringDown => power_down(&mut o),
        LowPower => {
            power_down(&mut o)
                && go(&mut o, Input::PowerDownDone { device: DEV })
                && (via != 2 || go(&mut o, Input::ResetRequest { client: t }))
        }
        // After an idle power-down an access brings the device back (no request token);
        // after a system sleep the owner does.
        PoweringUp => {
            power_down(&mut o)
                && go(&mut o, Input::PowerDownDone { device: DEV })
                && go(
                    &mut o,
                    if via == 0 {
                        Input::Access {
                            client: t,
                            epoch: Epoch(0),
                            what: Access::HardwareOp,
                        }
                    } else {
                        Input::PowerUp {
                            device: DEV,
                            token: RequestToken(6),
                        }
                    },
                )
        }
        Added => true,
        RemovePending => go(
            &mut o,
            Input::QueryRemove {
                device: DEV,
                token: RequestToken(3),
            },
        ),
        Removing if via == 3 => started(&mut o) && go(&mut o, Input::Unload),
        Removing | SurpriseRemoved => {
            let in_flight = match via {
                0 => true,
                1 => go(
                    &mut o,
                    Input::Start {
                        device: DEV,
                        token: RequestToken(2),
                    },
                ),
                6 | 7 => {
                    started(&mut o)
                        && go(
                            &mut o,
                            Input::PowerDown {
                                device: DEV,
                                kind: PowerDownKind::Idle,
                                token: RequestToken(5),
                            },
                        )
                        && (via == 6
                            || go(&mut o, Input::PowerDownDone { device: DEV })
                                && go(
                                    &mut o,
                                    Input::PowerUp {
                                        device: DEV,
                                        token: RequestToken(6),
                                    },
                                ))
                }
                _ => {
                    started(&mut o)
                        && go(&mut o, Input::ResetRequest { client: t })
                        && !o.return_callbacks(DEV).is_empty()
                        && go(&mut o, Input::ResetExecute { client: t })
                        && go(&mut o, Input::ResetExecute { client: u })
                }
            };
            let gone = if via == 0 && phase == Removing {
                true
            } else {
                go(&mut o, Input::SurpriseRemoval { device: DEV })
            };
            in_flight
                && gone
                && (phase == SurpriseRemoved
                    || go(
                        &mut o,
                        Input::Remove {
                            device: DEV,
                            token: RequestToken(3),
                        },
                    ))
        }
        Starting => go(
            &mut o,
            Input::Start {
                device: DEV,
                token: RequestToken(2),
            },
        ),
        Failed => {
            go(
                &mut o,
                Input::Start {
                    device: DEV,
                    token: RequestToken(2),
                },
            ) && go(
                &mut o,
                Input::StartDone {
                    device: DEV,
                    result: StartResult::FailedAfterResources,
                },
            )
        }
        Running => started(&mut o),
        Quiescing if via == 4 => {
            started(&mut o)
                && go(&mut o, Input::ResetRequest { client: t })
                && !o.return_callbacks(DEV).is_empty()
                && go(&mut o, Input::ResetExecute { client: t })
                && go(&mut o, Input::ResetExecute { client: u })
        }
        Quiescing => started(&mut o) && go(&mut o, Input::ResetRequest { client: t }),
        Stopping => {
            let stopping = started(&mut o)
                && go(
                    &mut o,
                    Input::QueryStop {
                        device: DEV,
                        token: RequestToken(3),
                    },
                )
                && go(
                    &mut o,
                    Input::Stop {
                        device: DEV,
                        token: RequestToken(4),
                    },
                );
            if stopping && via == 5 {
                o.return_callbacks(DEV);
                o.advance(Config::DEFAULT.operation_timeout);
                let out = o.timeout();
                assert_eq!(out, vec![Output::Fence { client: u }]);
            }
            stopping
        }
        Executing => {
            started(&mut o)
                && go(&mut o, Input::ResetRequest { client: t })
                && !o.return_callbacks(DEV).is_empty()
                && go(&mut o, Input::ResetExecute { client: t })
                && go(&mut o, Input::ResetExecute { client: u })
        }
        StopPending | Stopped => {
            started(&mut o)
                && go(
                    &mut o,
                    Input::QueryStop {
                        device: DEV,
                        token: RequestToken(3),
                    },
                )
                && (phase == StopPending
                    || go(
                        &mut o,
                        Input::Stop {
                            device: DEV,
                            token: RequestToken(4),
                        },
                    ))
        }
    };
    if !reached || ops && o.phase(DEV) != phase {
        return None;
    }
    if ops && !o.m.clients(DEV).any(|(_, v)| v.operations_in_flight > 0) {
        return None; // the same as without
    }
    if hold && disposition(phase, InputKind::CannotPause) == Disposition::Handle {
        let _ = o.step(Input::CannotPause { client: u });
    }
    if returned {
        o.return_callbacks(DEV);
    } else {
        // Link changes are taken in every present state: the bound client gets (or keeps)
        // a callback in flight.
        o.ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Down,
        });
    }
    assert_eq!(o.phase(DEV), phase);
    Some(o)
}

/// Every instance of `phase` that `instance` can build.
fn instances(phase: PhaseKind) -> Vec<O> {
    let mut all = Vec::new();
    for via in 0..8 {
        for fenced in [false, true] {
            for (h, r) in [(false, false), (false, true), (true, false), (true, true)] {
                for ops in [false, true] {
                    all.extend(instance(phase, h, r, via, fenced, ops));
                }
            }
        }
    }
    all.extend(closing_instance(phase));
    assert!(!all.is_empty(), "no instance of {phase:?}");
    all
}

/// With the fast path on (issue 21): an instance of `phase` where the untrusted client's
/// gate was opened and its close is not answered yet, in every state a close can be
/// awaited in.
fn closing_instance(phase: PhaseKind) -> Option<O> {
    use PhaseKind::*;
    let config = Config {
        trusted_policy: TrustedTimeoutPolicy::FailDevice,
        ..Config::DEFAULT
    };
    let mut o = owner();
    o.m = Lifecycle::new(config).with_fast_path();
    o.started(DEV, false);
    let t = o.register(DEV, ClientKind::Trusted);
    let u = o.register(DEV, ClientKind::Untrusted);
    let token = RequestToken(5);
    match phase {
        Running => {
            o.ok(Input::QueryStop { device: DEV, token });
            o.ok(Input::CancelStop { device: DEV, token });
        }
        Quiescing => {
            o.ok(Input::ResetRequest { client: t });
        }
        StopPending | Stopping => {
            o.ok(Input::QueryStop { device: DEV, token });
            if phase == Stopping {
                o.ok(Input::Stop { device: DEV, token });
            }
        }
        RemovePending => {
            o.ok(Input::QueryRemove { device: DEV, token });
        }
        Failed => {
            // A trusted client's callback overruns under FailDevice: the device fails.
            o.ok(Input::Bind {
                client: t,
                ports: PortSet::single(P0),
            });
            o.ok(Input::LinkChanged {
                device: DEV,
                port: P0,
                state: LinkState::Active,
            });
            o.now = o.now.after(config.callback_timeout);
            o.ok(Input::Timeout);
        }
        SurpriseRemoved => {
            o.ok(Input::SurpriseRemoval { device: DEV });
        }
        Removing => {
            o.ok(Input::Remove { device: DEV, token });
        }
        PoweringDown => {
            o.ok(Input::PowerDown {
                device: DEV,
                kind: PowerDownKind::Idle,
                token,
            });
        }
        _ => return None,
    }
    assert_eq!(o.phase(DEV), phase);
    assert!(
        o.m.pending_output_count() == 0,
        "the owner drained every output"
    );
    let _ = u;
    Some(o)
}

/// Concrete inputs of one kind for an instance: every client, every small parameter.
fn candidates(kind: InputKind, o: &O) -> Vec<Input> {
    let mut clients: Vec<ClientHandle> = o.m.clients(DEV).map(|(h, _)| h).collect();
    clients.push(ClientHandle {
        device: DEV,
        slot: 0,
        generation: 0,
    });
    let epoch = o.m.epoch(DEV).unwrap();
    let token = RequestToken(100);
    let per_client = |f: &dyn Fn(ClientHandle) -> Input| clients.iter().map(|c| f(*c)).collect();
    match kind {
        InputKind::AddDevice => vec![Input::AddDevice { device: DEV }],
        InputKind::ConfigurePort => [P0, P1, PhysPort(1)]
            .iter()
            .map(|p| Input::ConfigurePort {
                device: DEV,
                port: *p,
                caps: IB,
            })
            .collect(),
        InputKind::Start => vec![Input::Start { device: DEV, token }],
        InputKind::StartDone => [
            StartResult::Started,
            StartResult::FailedBeforeResources,
            StartResult::FailedAfterResources,
        ]
        .iter()
        .map(|r| Input::StartDone {
            device: DEV,
            result: *r,
        })
        .collect(),
        InputKind::QueryStop => vec![Input::QueryStop { device: DEV, token }],
        InputKind::CancelStop => vec![Input::CancelStop { device: DEV, token }],
        InputKind::Stop => vec![Input::Stop { device: DEV, token }],
        InputKind::QueryRemove => vec![Input::QueryRemove { device: DEV, token }],
        InputKind::CancelRemove => vec![Input::CancelRemove { device: DEV, token }],
        InputKind::Remove => vec![Input::Remove { device: DEV, token }],
        InputKind::SurpriseRemoval => vec![Input::SurpriseRemoval { device: DEV }],
        InputKind::FatalError => vec![Input::FatalError { device: DEV }],
        InputKind::ResetDone => [ResetResult::Succeeded, ResetResult::Failed]
            .iter()
            .map(|r| Input::ResetDone {
                device: DEV,
                result: *r,
            })
            .collect(),
        InputKind::LinkChanged => [(P0, LinkState::Active), (P1, LinkState::Init)]
            .iter()
            .map(|(port, state)| Input::LinkChanged {
                device: DEV,
                port: *port,
                state: *state,
            })
            .collect(),
        InputKind::Register => [ClientKind::Trusted, ClientKind::Untrusted]
            .iter()
            .map(|k| Input::Register {
                device: DEV,
                kind: *k,
            })
            .collect(),
        InputKind::Unregister => per_client(&|client| Input::Unregister { client }),
        InputKind::CallbackDone => per_client(&|client| Input::CallbackDone { client }),
        InputKind::FenceDone => per_client(&|client| Input::FenceDone { client }),
        InputKind::FastPathClosed => clients
            .iter()
            .flat_map(|c| {
                [0, 1].map(|in_flight| Input::FastPathClosed {
                    client: *c,
                    in_flight,
                })
            })
            .collect(),
        InputKind::AccessDone => per_client(&|client| Input::AccessDone { client }),
        InputKind::CanRecover => per_client(&|client| Input::CanRecover { client }),
        InputKind::CannotPause => per_client(&|client| Input::CannotPause { client }),
        InputKind::CanPause => per_client(&|client| Input::CanPause { client }),
        InputKind::AcquireInterface => per_client(&|client| Input::AcquireInterface { client }),
        InputKind::ResetRequest => per_client(&|client| Input::ResetRequest { client }),
        InputKind::ResetExecute => per_client(&|client| Input::ResetExecute { client }),
        InputKind::ResetNack => per_client(&|client| Input::ResetNack { client }),
        InputKind::JoinResetGroup => vec![Input::JoinResetGroup {
            device: DEV,
            group: GroupId(0),
        }],
        InputKind::LeaveResetGroup => vec![Input::LeaveResetGroup { device: DEV }],
        InputKind::Bind => per_client(&|client| Input::Bind {
            client,
            ports: PortSet::single(P1),
        }),
        InputKind::Hold => per_client(&|client| Input::Hold { client }),
        InputKind::ReleaseHold => per_client(&|client| Input::ReleaseHold { client }),
        InputKind::Access => {
            let mut v: Vec<Input> = per_client(&|client| Input::Access {
                client,
                epoch,
                what: Access::HardwareOp,
            });
            v.extend(clients.iter().map(|c| Input::Access {
                client: *c,
                epoch,
                what: Access::QueryCounters(P0),
            }));
            v
        }
        InputKind::PowerDown => [PowerDownKind::Idle, PowerDownKind::SystemSleep]
            .iter()
            .map(|k| Input::PowerDown {
                device: DEV,
                kind: *k,
                token,
            })
            .collect(),
        InputKind::PowerDownDone => vec![Input::PowerDownDone { device: DEV }],
        InputKind::PowerUp => vec![Input::PowerUp { device: DEV, token }],
        InputKind::PowerUpDone => [
            PowerUpResult::Powered,
            PowerUpResult::LostState,
            PowerUpResult::Failed,
        ]
        .iter()
        .map(|r| Input::PowerUpDone {
            device: DEV,
            result: *r,
        })
        .collect(),
        // Driver-wide: not in the table; walked by the tests below.
        InputKind::Timeout | InputKind::Unload => vec![],
    }
}

#[test]
fn every_input_in_every_state_has_the_outcome_the_table_declares() {
    let mut cells = 0;
    let mut tried = 0;
    for &phase in PhaseKind::ALL {
        let instances = instances(phase);
        for &kind in &InputKind::ALL[..DEVICE_INPUTS] {
            let declared = disposition(phase, kind);
            let mut accepted = 0;
            for base in &instances {
                for input in candidates(kind, base) {
                    assert_eq!(input.kind(), kind);
                    tried += 1;
                    let mut o = base.fork();
                    let before = o.m.clone();
                    // `step` itself asserts that any refusal changed nothing.
                    let (reply, outputs) = o.step(input);
                    match declared {
                        Disposition::Refuse => assert_eq!(
                            reply,
                            Err(Error::InvalidState { phase, input: kind }),
                            "{phase:?} x {input:?}"
                        ),
                        Disposition::Veto => assert_eq!(
                            reply,
                            Err(Error::Vetoed(VetoReason::ResetInProgress)),
                            "{phase:?} x {input:?}"
                        ),
                        Disposition::Ignore => {
                            assert_eq!(reply, Ok(Reply::Accepted), "{phase:?} x {input:?}");
                            assert_eq!(o.m, before, "ignored {input:?} changed {phase:?}");
                            assert!(outputs.iter().all(|out| matches!(
                                out,
                                Output::Complete {
                                    status: Status::Success,
                                    ..
                                }
                            )));
                        }
                        Disposition::Defer | Disposition::Handle => {
                            assert_ne!(
                                reply,
                                Err(Error::InvalidState { phase, input: kind }),
                                "{phase:?} x {input:?}: the table says {declared:?}"
                            );
                            if reply.is_ok() {
                                accepted += 1;
                                if declared == Disposition::Defer {
                                    assert_eq!(o.phase(DEV), phase, "deferred {input:?}");
                                }
                            }
                        }
                    }
                }
            }
            if matches!(declared, Disposition::Handle | Disposition::Defer) {
                assert!(
                    accepted > 0,
                    "{phase:?} x {kind:?} is {declared:?} but no instance accepts it"
                );
            }
            cells += 1;
        }
    }
    assert_eq!(cells, PhaseKind::COUNT * DEVICE_INPUTS);
    for kind in [
        InputKind::FenceDone,
        InputKind::AccessDone,
        InputKind::CanRecover,
        InputKind::CannotPause,
        InputKind::CanPause,
    ] {
        assert!(InputKind::ALL[..DEVICE_INPUTS].contains(&kind));
    }
    println!("matrix: {cells} cells, {tried} concrete inputs");
}

#[test]
fn the_table_has_one_row_per_state_in_order() {
    assert_eq!(TABLE.len(), PhaseKind::COUNT);
    for (i, row) in TABLE.iter().enumerate() {
        assert_eq!(row.phase as usize, i);
        assert_eq!(row.phase, PhaseKind::ALL[i]);
    }
}

#[test]
fn driver_wide_inputs_are_answered_in_every_driver_phase() {
    let mut o = owner();
    o.at(1);
    assert_eq!(o.step(Input::Timeout).0, Ok(Reply::Accepted));
    assert_eq!(o.step(Input::Unload).0, Ok(Reply::Accepted)); // no device: finishes at once
    assert_eq!(o.m.driver_phase(), DriverPhase::Unloaded);
    o.at(2);
    assert_eq!(o.step(Input::Timeout).0, Err(Error::Unloaded));
    assert_eq!(o.step(Input::Unload).0, Err(Error::Unloaded));
}

/// `Timeout` in every state: early (nothing due) it changes nothing but the clock; at
/// `poll_timeout()` it is taken.
#[test]
fn timeout_is_taken_in_every_state_and_changes_nothing_before_a_deadline() {
    let mut fired = 0;
    for &phase in PhaseKind::ALL {
        for base in instances(phase) {
            let mut o = base.fork();
            let before = o.m.clone();
            let early = o.m.poll_timeout().is_none_or(|due| due > o.now);
            assert!(early, "{phase:?}: a deadline already passed at {:?}", o.now);
            assert_eq!(o.step(Input::Timeout), (Ok(Reply::Accepted), vec![]));
            assert_eq!(
                o.m, before,
                "{phase:?}: a spurious timeout changed the machine"
            );
            // Later but still before the deadline: only the clock moves.
            if let Some(due) = o.m.poll_timeout() {
                o.at(due.0 - 1);
                assert_eq!(o.timeout(), vec![], "{phase:?}: acted before {due:?}");
                let mut copy = o.fork();
                copy.fire_timeout();
                fired += 1;
            }
        }
    }
    assert!(fired > 0);
}

/// What a correct owner does, and nothing more, until unload finishes: report every
/// fence and every hardware completion it owes, return callbacks if `callbacks`, and wake
/// at `poll_timeout()`. The clients never detach. Returns every output.
fn drive_until_unloaded(o: &mut O, callbacks: bool) -> Vec<Output> {
    let mut all = Vec::new();
    for _ in 0..64 {
        if o.m.driver_phase() == DriverPhase::Unloaded {
            return all;
        }
        if callbacks {
            all.extend(o.return_callbacks(DEV));
        }
        all.extend(o.finish_fences(DEV));
        let report = match o.m.phase_detail(DEV) {
            Some(Phase::Starting { .. })
            | Some(Phase::SurpriseRemoved {
                in_flight: Some(HwOp::Start),
                ..
            })
            | Some(Phase::Removing {
                in_flight: Some(HwOp::Start),
                ..
            }) => Some(Input::StartDone {
                device: DEV,
                result: StartResult::Started,
            }),
            Some(Phase::Executing { .. })
            | Some(Phase::SurpriseRemoved {
                in_flight: Some(HwOp::Reset),
                ..
            })
            | Some(Phase::Removing {
                in_flight: Some(HwOp::Reset),
                ..
            }) => Some(Input::ResetDone {
                device: DEV,
                result: ResetResult::Succeeded,
            }),
            Some(Phase::PoweringDown {
                commanded: true, ..
            })
            | Some(Phase::SurpriseRemoved {
                in_flight: Some(HwOp::PowerDown),
                ..
            })
            | Some(Phase::Removing {
                in_flight: Some(HwOp::PowerDown),
                ..
            }) => Some(Input::PowerDownDone { device: DEV }),
            Some(Phase::PoweringUp { .. })
            | Some(Phase::SurpriseRemoved {
                in_flight: Some(HwOp::PowerUp),
                ..
            })
            | Some(Phase::Removing {
                in_flight: Some(HwOp::PowerUp),
                ..
            }) => Some(Input::PowerUpDone {
                device: DEV,
                result: PowerUpResult::Powered,
            }),
            _ => None,
        };
        if let Some(input) = report {
            all.extend(o.ok(input));
        } else if o.m.driver_phase() != DriverPhase::Unloaded {
            let owed = o.m.clients(DEV).any(|(_, v)| v.fence_requested);
            if !owed {
                let due = o.m.poll_timeout();
                assert!(
                    due.is_some(),
                    "unload waits with no deadline and nothing owed: {:?} {:?}",
                    o.m.phase_detail(DEV),
                    o.m.clients(DEV).collect::<Vec<_>>()
                );
                all.extend(o.fire_timeout());
            }
        }
    }
    panic!("unload did not finish: {:?}", o.m.phase_detail(DEV));
}

/// `Unload` in every state: accepted, and it finishes once the owner does its part, even
/// when no client ever returns a callback or detaches (I9, I11).
#[test]
fn unload_is_taken_in_every_state_and_finishes_whatever_the_clients_do() {
    let mut runs = 0;
    for &phase in PhaseKind::ALL {
        for base in instances(phase) {
            for callbacks in [true, false] {
                let mut o = base.fork();
                let mut all = if o.m.driver_phase() == DriverPhase::Loaded {
                    o.ok(Input::Unload)
                } else {
                    // Reached by unload already: accepted once, refused after.
                    o.refused(Input::Unload, Error::UnloadAlreadyRequested);
                    Vec::new()
                };
                all.extend(drive_until_unloaded(&mut o, callbacks));
                let finishes = all
                    .iter()
                    .filter(|out| **out == Output::UnloadMayFinish)
                    .count();
                assert_eq!(finishes, 1, "{phase:?}: {all:?}");
                assert_eq!(all.last(), Some(&Output::UnloadMayFinish));
                assert_eq!(o.m.poll_timeout(), None);
                runs += 1;
            }
        }
    }
    println!("unload: {runs} runs");
}

/// The walks above reach the issue-10 situations: a stop waiting for an operation (and
/// one whose holder is being fenced), a reset waiting for one after the last vote, and a
/// removal waiting for one.
#[test]
fn the_matrix_reaches_operations_in_flight_racing_stop_reset_and_removal() {
    let stopping = instances(PhaseKind::Stopping);
    // Every one but the fast-path instance, whose stop waits for a close's answer instead.
    let with_ops = stopping
        .iter()
        .filter(|o| o.m.clients(DEV).any(|(_, v)| v.operations_in_flight > 0))
        .count();
    assert_eq!(with_ops + 1, stopping.len());
    assert!(stopping.iter().any(|o| o
        .m
        .clients(DEV)
        .any(|(_, v)| v.fence_requested && v.operations_in_flight > 0)));
    assert!(instances(PhaseKind::Quiescing).iter().any(|o| matches!(
        o.m.phase_detail(DEV),
        Some(Phase::Quiescing {
            draining: Some(_),
            ..
        })
    )));
    assert!(instances(PhaseKind::Removing)
        .iter()
        .any(|o| o.m.clients(DEV).any(|(_, v)| v.operations_in_flight > 0)));
}
