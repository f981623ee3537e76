//! One test per rule of DESIGN.md, named after the rule.

mod common;
use common::*;
use pnp_lifecycle::inspect::*;
use pnp_lifecycle::*;

fn running_with(
    kinds: &[ClientKind],
) -> (Owner<1, 4, 2, { queue_capacity(1, 4) }>, Vec<ClientHandle>) {
    let mut o = owner();
    o.started(DEV, false);
    let clients = kinds.iter().map(|k| o.register(DEV, *k)).collect();
    (o, clients)
}

fn hardware_commands(outputs: &[Output]) -> Vec<HardwareCommand> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Hardware { command, .. } => Some(*command),
            _ => None,
        })
        .collect()
}

// ---- device lifecycle ------------------------------------------------------------------

#[test]
fn query_remove_is_vetoed_while_a_reset_cycle_runs() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    let t = o.token();
    o.refused(
        Input::QueryRemove {
            device: DEV,
            token: t,
        },
        Error::Vetoed(VetoReason::ResetInProgress),
    );
    o.ok(Input::ResetExecute { client: c[0] });
    assert_eq!(o.phase(DEV), PhaseKind::Executing);
    o.refused(
        Input::QueryRemove {
            device: DEV,
            token: t,
        },
        Error::Vetoed(VetoReason::ResetInProgress),
    );
}

#[test]
fn query_remove_is_vetoed_while_a_client_holds_the_device() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::Hold { client: c[0] });
    let t = o.token();
    o.refused(
        Input::QueryRemove {
            device: DEV,
            token: t,
        },
        Error::Vetoed(VetoReason::ClientHoldsDevice),
    );
    o.ok(Input::ReleaseHold { client: c[0] });
    assert_eq!(
        o.ok(Input::QueryRemove {
            device: DEV,
            token: t
        }),
        vec![complete(t, Status::Success)]
    );
}

#[test]
fn cancel_remove_returns_to_exactly_the_prior_state() {
    // From every state query remove accepts: the full machine must come back unchanged.
    let setups: [fn(&mut Owner<1, 4, 2, { queue_capacity(1, 4) }>); 4] = [
        |_| {},
        |o| {
            let t = o.token();
            o.ok(Input::Start {
                device: DEV,
                token: t,
            });
            o.ok(Input::StartDone {
                device: DEV,
                result: StartResult::Started,
            });
        },
        |o| {
            let t = o.token();
            o.ok(Input::Start {
                device: DEV,
                token: t,
            });
            o.ok(Input::StartDone {
                device: DEV,
                result: StartResult::Started,
            });
            let t = o.token();
            o.ok(Input::QueryStop {
                device: DEV,
                token: t,
            });
            let t = o.token();
            o.ok(Input::Stop {
                device: DEV,
                token: t,
            });
        },
        |o| {
            let t = o.token();
            o.ok(Input::Start {
                device: DEV,
                token: t,
            });
            o.ok(Input::StartDone {
                device: DEV,
                result: StartResult::FailedAfterResources,
            });
        },
    ];
    for setup in setups {
        let mut o = owner();
        o.ok(Input::AddDevice { device: DEV });
        let c = o.register(DEV, ClientKind::Trusted);
        setup(&mut o);
        o.return_callbacks(DEV);
        let before = o.m.clone();
        let prior = o.phase(DEV);
        let t = o.token();
        o.ok(Input::QueryRemove {
            device: DEV,
            token: t,
        });
        assert_eq!(o.phase(DEV), PhaseKind::RemovePending);
        let t = o.token();
        assert_eq!(
            o.ok(Input::CancelRemove {
                device: DEV,
                token: t
            }),
            vec![complete(t, Status::Success)]
        );
        assert_eq!(
            o.m, before,
            "cancel remove from {prior:?} did not restore the machine"
        );
        assert!(o.m.client(c).is_some());
    }
}

#[test]
fn cancel_remove_without_query_remove_succeeds_and_changes_nothing() {
    let (mut o, _) = running_with(&[ClientKind::Trusted]);
    let before = o.m.clone();
    let t = o.token();
    assert_eq!(
        o.ok(Input::CancelRemove {
            device: DEV,
            token: t
        }),
        vec![complete(t, Status::Success)]
    );
    assert_eq!(o.m, before);
}

#[test]
fn remove_pending_refuses_new_reset_requests_and_registrations() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    let t = o.token();
    o.ok(Input::QueryRemove {
        device: DEV,
        token: t,
    });
    let refused = Error::InvalidState {
        phase: PhaseKind::RemovePending,
        input: InputKind::ResetRequest,
    };
    o.refused(Input::ResetRequest { client: c[0] }, refused);
    o.refused(
        Input::Register {
            device: DEV,
            kind: ClientKind::Trusted,
        },
        Error::InvalidState {
            phase: PhaseKind::RemovePending,
            input: InputKind::Register,
        },
    );
    // A fatal error is not a reset request: it is never refused, but held until the
    // removal absorbs it or cancel remove lets a cycle serve it.
    assert_eq!(
        o.step(Input::FatalError { device: DEV }).0,
        Ok(Reply::Fatal(FatalAnswer::Deferred))
    );
    assert_eq!(
        o.m.phase_detail(DEV),
        Some(Phase::RemovePending {
            prior: Prior::Running,
            fatal: true
        })
    );
}

#[test]
fn surprise_removal_is_accepted_in_every_state_after_add() {
    // Reach each state, then surprise-remove: it must never be refused (there is no veto).
    for target in PhaseKind::ALL
        .iter()
        .copied()
        .filter(|p| *p != PhaseKind::Absent)
    {
        let mut o = owner();
        let c = reach(&mut o, target);
        assert_eq!(o.phase(DEV), target);
        let (reply, _) = o.step(Input::SurpriseRemoval { device: DEV });
        assert_eq!(
            reply,
            Ok(Reply::Accepted),
            "surprise removal refused in {target:?}"
        );
        o.return_callbacks(DEV);
        let p = o.phase(DEV);
        assert!(
            matches!(p, PhaseKind::SurpriseRemoved | PhaseKind::Removing),
            "{target:?} -> {p:?}"
        );
        if let Some(c) = c {
            if target != PhaseKind::Removing && target != PhaseKind::SurpriseRemoved {
                assert_eq!(
                    o.events_of(c).last(),
                    Some(&Event::Removed { surprise: true }),
                    "{target:?}"
                );
            }
        }
    }
}

/// Drive a fresh machine to `target`, with one registered trusted client where possible.
fn reach(
    o: &mut Owner<1, 4, 2, { queue_capacity(1, 4) }>,
    target: PhaseKind,
) -> Option<ClientHandle> {
    use PhaseKind::*;
    if target == Absent {
        return None;
    }
    o.ok(Input::AddDevice { device: DEV });
    o.ok(Input::ConfigurePort {
        device: DEV,
        port: P0,
        caps: IB,
    });
    let c = o.register(DEV, ClientKind::Trusted);
    let t = o.token();
    match target {
        Added => return Some(c),
        RemovePending => {
            o.ok(Input::QueryRemove {
                device: DEV,
                token: t,
            });
            return Some(c);
        }
        Removing => {
            o.ok(Input::Remove {
                device: DEV,
                token: t,
            });
            return Some(c);
        }
        SurpriseRemoved => {
            o.ok(Input::SurpriseRemoval { device: DEV });
            return Some(c);
        }
        _ => {}
    }
    o.ok(Input::Start {
        device: DEV,
        token: t,
    });
    if target == Starting {
        return Some(c);
    }
    if target == Failed {
        o.ok(Input::StartDone {
            device: DEV,
            result: StartResult::FailedAfterResources,
        });
        return Some(c);
    }
    o.ok(Input::StartDone {
        device: DEV,
        result: StartResult::Started,
    });
    o.return_callbacks(DEV);
    match target {
        Running => {}
        Quiescing => {
            o.ok(Input::ResetRequest { client: c });
        }
        Executing => {
            o.ok(Input::ResetRequest { client: c });
            o.ok(Input::ResetExecute { client: c });
        }
        Stopping => {
            // The stop waits for the client's hardware operation in flight.
            assert_eq!(
                o.step(Input::Access {
                    client: c,
                    epoch: Epoch(0),
                    what: Access::HardwareOp
                })
                .0,
                Ok(Reply::AccessGranted)
            );
            let t = o.token();
            o.ok(Input::QueryStop {
                device: DEV,
                token: t,
            });
            let t = o.token();
            o.ok(Input::Stop {
                device: DEV,
                token: t,
            });
        }
        StopPending | Stopped => {
            let t = o.token();
            o.ok(Input::QueryStop {
                device: DEV,
                token: t,
            });
            if target == Stopped {
                let t = o.token();
                o.ok(Input::Stop {
                    device: DEV,
                    token: t,
                });
            }
        }
        PoweringDown | LowPower | PoweringUp => {
            let t = o.token();
            o.ok(Input::PowerDown {
                device: DEV,
                kind: PowerDownKind::Idle,
                token: t,
            });
            if target != PoweringDown {
                o.ok(Input::PowerDownDone { device: DEV });
            }
            if target == PoweringUp {
                let t = o.token();
                o.ok(Input::PowerUp {
                    device: DEV,
                    token: t,
                });
            }
        }
        _ => unreachable!(),
    }
    o.return_callbacks(DEV);
    Some(c)
}

#[test]
fn surprise_removal_never_commands_hardware() {
    // Surprise removal in each state where hardware is live or in flight; afterwards no
    // Start, Reset or Shutdown is ever commanded, whatever follows.
    for target in [
        PhaseKind::Running,
        PhaseKind::Quiescing,
        PhaseKind::Executing,
        PhaseKind::StopPending,
        PhaseKind::Starting,
        PhaseKind::Removing,
    ] {
        let mut o = owner();
        let c = reach(&mut o, target).unwrap();
        o.ok(Input::SurpriseRemoval { device: DEV });
        let mut after = Vec::new();
        // Everything the owner might still feed: late hardware reports, requests, remove.
        for input in [
            Input::ResetDone {
                device: DEV,
                result: ResetResult::Succeeded,
            },
            Input::StartDone {
                device: DEV,
                result: StartResult::Started,
            },
            Input::FatalError { device: DEV },
            Input::ResetRequest { client: c },
            Input::Remove {
                device: DEV,
                token: RequestToken(900),
            },
        ] {
            after.extend(o.step(input).1);
        }
        after.extend(o.return_callbacks(DEV));
        after.extend(o.ok(Input::Unregister { client: c }));
        assert_eq!(o.phase(DEV), PhaseKind::Absent, "{target:?}");
        for command in hardware_commands(&after) {
            assert_eq!(
                command,
                HardwareCommand::ReleaseResources,
                "{target:?}: {command:?} after surprise removal"
            );
        }
    }
}

#[test]
fn surprise_removed_device_waits_for_the_remove_that_always_follows() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::SurpriseRemoval { device: DEV });
    o.return_callbacks(DEV);
    o.ok(Input::Unregister { client: c[0] });
    assert_eq!(o.phase(DEV), PhaseKind::SurpriseRemoved);
    let t = o.token();
    let out = o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert_eq!(
        out,
        vec![
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
        ]
    );
}

#[test]
fn remove_after_failed_start_undoes_only_what_the_start_did() {
    for (result, expected) in [
        (StartResult::FailedBeforeResources, vec![]),
        (
            StartResult::FailedAfterResources,
            vec![HardwareCommand::ReleaseResources],
        ),
        (
            StartResult::Started,
            vec![HardwareCommand::Shutdown, HardwareCommand::ReleaseResources],
        ),
    ] {
        let mut o = owner();
        o.ok(Input::AddDevice { device: DEV });
        let t = o.token();
        o.ok(Input::Start {
            device: DEV,
            token: t,
        });
        let out = o.ok(Input::StartDone {
            device: DEV,
            result,
        });
        let status = if result == StartResult::Started {
            Status::Success
        } else {
            Status::HardwareFailed
        };
        assert!(out.contains(&complete(t, status)));
        let t = o.token();
        let out = o.ok(Input::Remove {
            device: DEV,
            token: t,
        });
        assert_eq!(hardware_commands(&out), expected, "{result:?}");
        assert!(out.contains(&complete(t, Status::Success)));
    }
}

#[test]
fn stopped_device_is_not_touched_and_refuses_hardware_calls() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    let t = o.token();
    o.ok(Input::QueryStop {
        device: DEV,
        token: t,
    });
    let t = o.token();
    let out = o.ok(Input::Stop {
        device: DEV,
        token: t,
    });
    assert_eq!(
        out,
        vec![
            notify(c[0], Event::DeviceStopped),
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
        ]
    );
    let refused = Error::InvalidState {
        phase: PhaseKind::Stopped,
        input: InputKind::Access,
    };
    for what in [Access::HardwareOp, Access::QueryCounters(P0)] {
        o.refused(
            Input::Access {
                client: c[0],
                epoch: Epoch(0),
                what,
            },
            refused,
        );
    }
    o.refused(
        Input::ResetRequest { client: c[0] },
        Error::InvalidState {
            phase: PhaseKind::Stopped,
            input: InputKind::ResetRequest,
        },
    );
    // A registration while stopped is admitted; link changes still flow; no hardware.
    let late = o.register(DEV, ClientKind::Untrusted);
    o.ok(Input::Bind {
        client: late,
        ports: PortSet::single(P0),
    });
    let out = o.ok(Input::LinkChanged {
        device: DEV,
        port: P0,
        state: LinkState::Active,
    });
    assert_eq!(hardware_commands(&out), vec![]);
}

#[test]
fn restart_brings_clients_back_without_a_reset_cycle() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    let t = o.token();
    o.ok(Input::QueryStop {
        device: DEV,
        token: t,
    });
    let t = o.token();
    o.ok(Input::Stop {
        device: DEV,
        token: t,
    });
    o.return_callbacks(DEV);
    let t = o.token();
    assert_eq!(
        o.ok(Input::Start {
            device: DEV,
            token: t
        }),
        vec![hw(HardwareCommand::Start)]
    );
    let out = o.ok(Input::StartDone {
        device: DEV,
        result: StartResult::Started,
    });
    assert_eq!(
        out,
        vec![
            complete(t, Status::Success),
            notify(c[0], Event::DeviceStarted { epoch: Epoch(0) }),
            notify(c[1], Event::DeviceStarted { epoch: Epoch(0) }),
        ]
    );
    assert_eq!(count_hw(&out, HardwareCommand::Reset), 0);
    assert_eq!(o.m.epoch(DEV), Some(Epoch(0)));
    // The interface from before the stop is still good.
    assert_eq!(
        o.step(Input::Access {
            client: c[0],
            epoch: Epoch(0),
            what: Access::HardwareOp
        })
        .0,
        Ok(Reply::AccessGranted)
    );
}

#[test]
fn remove_completes_only_after_every_client_was_told_removed_returned_callbacks_and_detached() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    let t = o.token();
    let out = o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert_eq!(
        out,
        vec![
            notify(c[0], Event::Removed { surprise: false }),
            notify(c[1], Event::Removed { surprise: false }),
        ]
    );
    // Detaching without returning the callback is not enough.
    assert_eq!(o.ok(Input::Unregister { client: c[0] }), vec![]);
    assert_eq!(o.ok(Input::Unregister { client: c[1] }), vec![]);
    assert_eq!(o.phase(DEV), PhaseKind::Removing);
    assert_eq!(
        o.ok(Input::CallbackDone { client: c[0] }),
        vec![Output::ClientGone { client: c[0] }]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Removing);
    let out = o.ok(Input::CallbackDone { client: c[1] });
    assert_eq!(
        out,
        vec![
            Output::ClientGone { client: c[1] },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
        ]
    );
    // No callback after remove completes: nothing is addressed to the old clients.
    for input in [
        Input::AddDevice { device: DEV },
        Input::ConfigurePort {
            device: DEV,
            port: P0,
            caps: IB,
        },
        Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Active,
        },
    ] {
        assert!(o.ok(input).is_empty());
    }
}

#[test]
fn unload_is_accepted_once_and_refuses_new_registrations() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::Unload);
    o.refused(Input::Unload, Error::UnloadAlreadyRequested);
    o.refused(
        Input::AddDevice { device: DEV },
        Error::InvalidState {
            phase: PhaseKind::Removing,
            input: InputKind::AddDevice,
        },
    );
    o.return_callbacks(DEV);
    o.ok(Input::Unregister { client: c[0] });
    o.refused(Input::Unload, Error::Unloaded);
    o.refused(Input::AddDevice { device: DEV }, Error::Unloaded);
}

#[test]
fn unload_refuses_registration_while_a_start_is_in_flight() {
    let mut o = owner();
    o.ok(Input::AddDevice { device: DEV });
    let t = o.token();
    o.ok(Input::Start {
        device: DEV,
        token: t,
    });
    o.ok(Input::Unload);
    o.refused(
        Input::Register {
            device: DEV,
            kind: ClientKind::Trusted,
        },
        Error::Unloading,
    );
    // The start reports; removal follows at once and unload finishes.
    let out = o.ok(Input::StartDone {
        device: DEV,
        result: StartResult::Started,
    });
    assert_eq!(
        out,
        vec![
            complete(t, Status::Success),
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            Output::DeviceRemoved { device: DEV },
            Output::UnloadMayFinish,
        ]
    );
}

#[test]
fn unload_may_finish_exactly_once_only_when_no_device_client_or_callback_is_left() {
    let mut o: Owner<2, 4, 2, { queue_capacity(2, 4) }> = Owner::new(Config::DEFAULT);
    let d1 = DeviceId(1);
    o.started(DEV, false);
    o.started(d1, false);
    let a = o.register(DEV, ClientKind::Trusted);
    let b = o.register(d1, ClientKind::Untrusted);
    let mut all = o.ok(Input::Unload);
    all.extend(o.ok(Input::CallbackDone { client: a }));
    all.extend(o.ok(Input::Unregister { client: a }));
    // One device gone, the other still has a client: the fence holds.
    assert_eq!(o.phase(DEV), PhaseKind::Absent);
    assert!(!all.contains(&Output::UnloadMayFinish));
    all.extend(o.ok(Input::Unregister { client: b }));
    assert!(
        !all.contains(&Output::UnloadMayFinish),
        "callback to b still in flight"
    );
    let last = o.ok(Input::CallbackDone { client: b });
    assert_eq!(last.last(), Some(&Output::UnloadMayFinish));
    all.extend(last);
    assert_eq!(
        all.iter()
            .filter(|o| **o == Output::UnloadMayFinish)
            .count(),
        1
    );
    assert_eq!(o.m.driver_phase(), DriverPhase::Unloaded);
    // Nothing at all after it, whatever the time.
    o.at(1 << 40);
    for input in [
        Input::Timeout,
        Input::Unregister { client: a },
        Input::FenceDone { client: a },
        Input::Unload,
    ] {
        o.refused(input, Error::Unloaded);
    }
    assert_eq!(o.m.poll_timeout(), None);
}

// ---- clients -----------------------------------------------------------------------------

#[test]
fn a_handle_from_before_never_aliases_a_later_client_of_the_same_slot() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    assert_eq!(
        o.ok(Input::Unregister { client: c[0] }),
        vec![Output::ClientGone { client: c[0] }]
    );
    let d = o.register(DEV, ClientKind::Untrusted);
    assert_eq!(d.slot, c[0].slot);
    assert_ne!(d.generation, c[0].generation);
    o.refused(
        Input::Access {
            client: c[0],
            epoch: Epoch(0),
            what: Access::HardwareOp,
        },
        Error::UnknownClient,
    );
    o.refused(Input::ResetRequest { client: c[0] }, Error::UnknownClient);
    assert_eq!(
        o.step(Input::Unregister { client: c[0] }).0,
        Ok(Reply::Unregistered(Unregistered::Already))
    );
    assert!(
        o.m.client(d).is_some(),
        "the old handle's unregister touched the new client"
    );
    // A generation never issued is unknown, not "already".
    let forged = ClientHandle {
        generation: d.generation + 5,
        ..d
    };
    o.refused(Input::Unregister { client: forged }, Error::UnknownClient);
}

#[test]
fn untrusted_client_is_revoked_at_its_deadline_and_every_later_call_fails() {
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    // Its RESET callback returns at once; it just never answers.
    o.return_callbacks(DEV);
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(Config::DEFAULT.untrusted_ack_timeout))
    );
    assert!(o.timeout_at(999).is_empty());
    let out = o.timeout_at(1000);
    assert_eq!(
        out,
        vec![notify(c[0], Event::Revoked), hw(HardwareCommand::Reset)]
    );
    for input in [
        Input::ResetExecute { client: c[0] },
        Input::ResetRequest { client: c[0] },
        Input::AcquireInterface { client: c[0] },
        Input::Bind {
            client: c[0],
            ports: PortSet::single(P0),
        },
        Input::Hold { client: c[0] },
        Input::Access {
            client: c[0],
            epoch: Epoch(0),
            what: Access::QueryCounters(P0),
        },
    ] {
        let (reply, _) = o.step(input);
        assert!(
            matches!(
                reply,
                Err(Error::ClientRevoked) | Err(Error::InvalidState { .. })
            ),
            "{input:?}: {reply:?}"
        );
    }
    o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    assert_eq!(o.phase(DEV), PhaseKind::Running);
    o.refused(
        Input::AcquireInterface { client: c[0] },
        Error::ClientRevoked,
    );
    assert_eq!(o.events_of(c[0]), vec![Event::Reset, Event::Revoked]);
}

#[test]
fn trusted_client_missing_its_deadline_is_revoked_under_the_revoke_policy() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.return_callbacks(DEV);
    let at = Config::DEFAULT.trusted_ack_timeout;
    assert_eq!(o.m.poll_timeout(), Some(Tick(at)));
    assert!(o.timeout_at(at - 1).is_empty());
    assert_eq!(
        o.timeout_at(at),
        vec![notify(c[0], Event::Revoked), hw(HardwareCommand::Reset)]
    );
}

#[test]
fn trusted_client_missing_its_deadline_fails_the_device_under_the_escalate_policy() {
    let config = Config {
        trusted_policy: TrustedTimeoutPolicy::FailDevice,
        ..Config::DEFAULT
    };
    let mut o: Owner<1, 4, 2, { queue_capacity(1, 4) }> = Owner::new(config);
    o.started(DEV, false);
    let slow = o.register(DEV, ClientKind::Trusted);
    let quick = o.register(DEV, ClientKind::Trusted);
    o.ok(Input::ResetRequest { client: quick });
    o.return_callbacks(DEV);
    o.ok(Input::ResetExecute { client: quick });
    assert!(o.timeout_at(config.trusted_ack_timeout - 1).is_empty());
    let out = o.timeout_at(config.trusted_ack_timeout);
    assert_eq!(
        out,
        vec![
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::ClientTimedOut
            },
            Output::DeviceFailed {
                device: DEV,
                cause: FailureCause::ClientMissedDeadline
            },
            notify(slow, Event::DeviceFatal),
            notify(quick, Event::DeviceFatal),
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Failed);
    assert_eq!(count_hw(&out, HardwareCommand::Reset), 0);
    // Only remove leaves failed; and the RESET both got is answered by Removed.
    o.refused(
        Input::Start {
            device: DEV,
            token: RequestToken(77),
        },
        Error::InvalidState {
            phase: PhaseKind::Failed,
            input: InputKind::Start,
        },
    );
    o.return_callbacks(DEV);
    let t = o.token();
    let out = o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert_eq!(
        out,
        vec![
            notify(slow, Event::Removed { surprise: false }),
            notify(quick, Event::Removed { surprise: false })
        ]
    );
}

#[test]
fn nothing_waits_on_clients_without_a_deadline() {
    // Whenever the machine waits for a client (a vote, a callback, a detach),
    // poll_timeout names a tick.
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    assert!(o.m.poll_timeout().is_some());
    o.ok(Input::ResetExecute { client: c[0] });
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(Config::DEFAULT.untrusted_ack_timeout))
    );
    o.ok(Input::ResetExecute { client: c[1] });
    // The votes are in, but the RESET callbacks have not returned: they have a deadline.
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(Config::DEFAULT.callback_timeout))
    );
    o.return_callbacks(DEV);
    assert_eq!(o.m.poll_timeout(), None, "waiting on hardware only");
    o.at(100);
    o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(100 + Config::DEFAULT.callback_timeout)),
        "RESET_END callbacks"
    );
    o.return_callbacks(DEV);
    o.at(200);
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    o.at(300);
    o.return_callbacks(DEV);
    let deadline = o.m.poll_timeout().expect("detach has a deadline");
    assert_eq!(deadline, Tick(200 + Config::DEFAULT.detach_timeout));
    // Nobody detaches: at the deadline both are revoked silently and removal completes.
    assert!(o.timeout_at(deadline.0 - 1).is_empty());
    let out = o.fire_timeout();
    assert_eq!(
        out,
        vec![
            Output::ClientGone { client: c[0] },
            Output::ClientGone { client: c[1] },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
        ]
    );
    assert_eq!(
        o.events_of(c[0]).last(),
        Some(&Event::Removed { surprise: false })
    );
}

#[test]
fn registering_never_waits_on_a_link() {
    let mut o = owner();
    o.started(DEV, false);
    assert_eq!(o.m.link(DEV, P0), Some(LinkState::Down));
    assert_eq!(o.m.link(DEV, P1), Some(LinkState::Down));
    let c = o.register(DEV, ClientKind::Untrusted);
    o.ok(Input::Bind {
        client: c,
        ports: PortSet::single(P0).with(P1),
    });
    assert_eq!(
        o.step(Input::Access {
            client: c,
            epoch: Epoch(0),
            what: Access::QueryCounters(P1)
        })
        .0,
        Ok(Reply::AccessGranted)
    );
}

#[test]
fn a_client_that_registers_before_start_is_told_when_the_device_starts() {
    let mut o = owner();
    o.ok(Input::AddDevice { device: DEV });
    let c = o.register(DEV, ClientKind::Trusted);
    let t = o.token();
    o.ok(Input::Start {
        device: DEV,
        token: t,
    });
    let out = o.ok(Input::StartDone {
        device: DEV,
        result: StartResult::Started,
    });
    assert!(out.contains(&notify(c, Event::DeviceStarted { epoch: Epoch(0) })));
    // and one registered before a start that fails is told the device is fatal
    let mut o = owner();
    o.ok(Input::AddDevice { device: DEV });
    let c = o.register(DEV, ClientKind::Trusted);
    let t = o.token();
    o.ok(Input::Start {
        device: DEV,
        token: t,
    });
    let out = o.ok(Input::StartDone {
        device: DEV,
        result: StartResult::FailedBeforeResources,
    });
    assert!(out.contains(&notify(c, Event::DeviceFatal)));
}

#[test]
fn register_during_reset_is_admitted_is_not_a_voter_and_gets_reset_end() {
    for during in [PhaseKind::Quiescing, PhaseKind::Executing] {
        let (mut o, c) = running_with(&[ClientKind::Trusted]);
        o.ok(Input::ResetRequest { client: c[0] });
        if during == PhaseKind::Executing {
            o.ok(Input::ResetExecute { client: c[0] });
        }
        let late = o.register(DEV, ClientKind::Untrusted);
        assert_eq!(
            o.m.client(late).unwrap().state,
            ClientState::Active {
                role: Role::Joined,
                fresh: true,
                holding: false,
                cannot_pause: false
            }
        );
        let not_voting = if during == PhaseKind::Quiescing {
            Error::NotVoting
        } else {
            Error::InvalidState {
                phase: during,
                input: InputKind::ResetExecute,
            }
        };
        o.refused(Input::ResetExecute { client: late }, not_voting);
        if during == PhaseKind::Quiescing {
            // The lone voter's answer is enough: the newcomer is not waited for.
            assert_eq!(
                o.ok(Input::ResetExecute { client: c[0] }),
                vec![hw(HardwareCommand::Reset)]
            );
        }
        let out = o.ok(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded,
        });
        assert!(
            out.contains(&notify(late, Event::ResetEnd { epoch: Epoch(1) })),
            "{during:?}"
        );
        assert_eq!(o.events_of(late), vec![Event::ResetEnd { epoch: Epoch(1) }]);
    }
}

#[test]
fn unregister_is_idempotent_with_exactly_one_winner() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    let replies: Vec<_> = (0..3)
        .map(|_| o.step(Input::Unregister { client: c[0] }).0)
        .collect();
    assert_eq!(
        replies,
        vec![
            Ok(Reply::Unregistered(Unregistered::Now)),
            Ok(Reply::Unregistered(Unregistered::Already)),
            Ok(Reply::Unregistered(Unregistered::Already)),
        ]
    );
}

#[test]
fn no_notification_is_addressed_to_a_client_after_it_unregistered() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Trusted]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0),
    });
    o.ok(Input::ResetRequest { client: c[1] });
    // A link change waits behind c0's RESET callback...
    assert!(o
        .ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Init,
        })
        .is_empty());
    assert_eq!(o.view(c[0]).waiting_events, 1);
    // ...and c0 leaves with that callback still in flight: its slot stays until it
    // returns, and what waited for it is never delivered.
    assert_eq!(o.ok(Input::Unregister { client: c[0] }), vec![]);
    assert_eq!(o.view(c[0]).waiting_events, 0);
    let mut after = Vec::new();
    after.extend(o.ok(Input::LinkChanged {
        device: DEV,
        port: P0,
        state: LinkState::Active,
    }));
    after.extend(o.ok(Input::ResetExecute { client: c[1] }));
    after.extend(o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    }));
    let t = o.token();
    after.extend(o.ok(Input::Remove {
        device: DEV,
        token: t,
    }));
    after.extend(o.ok(Input::CallbackDone { client: c[0] }));
    assert!(
        !after
            .iter()
            .any(|o| matches!(o, Output::Notify { client, .. } if *client == c[0])),
        "{after:?}"
    );
    assert!(after.contains(&Output::ClientGone { client: c[0] }));
}

// ---- the reset cycle -----------------------------------------------------------------

#[test]
fn requests_before_execution_coalesce_into_one_cycle() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Trusted]);
    let answers: Vec<_> = [c[0], c[1], c[0]]
        .iter()
        .map(|c| o.step(Input::ResetRequest { client: *c }).0)
        .collect();
    assert_eq!(
        answers,
        vec![
            Ok(Reply::Reset(ResetAnswer::Started)),
            Ok(Reply::Reset(ResetAnswer::Joined)),
            Ok(Reply::Reset(ResetAnswer::Joined)),
        ]
    );
    assert_eq!(
        o.step(Input::FatalError { device: DEV }).0,
        Ok(Reply::Fatal(FatalAnswer::Served(ResetAnswer::Joined)))
    );
    let mut out = o.ok(Input::ResetExecute { client: c[0] });
    out.extend(o.ok(Input::ResetExecute { client: c[1] }));
    out.extend(o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    }));
    assert_eq!(count_hw(&out, HardwareCommand::Reset), 1);
    assert_eq!(o.phase(DEV), PhaseKind::Running);
    assert_eq!(o.m.epoch(DEV), Some(Epoch(1)));
}

#[test]
fn requests_during_execution_give_exactly_one_follow_up_cycle() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.return_callbacks(DEV);
    o.ok(Input::ResetExecute { client: c[0] });
    for _ in 0..3 {
        assert_eq!(
            o.step(Input::ResetRequest { client: c[0] }).0,
            Ok(Reply::Reset(ResetAnswer::Scheduled))
        );
    }
    assert_eq!(
        o.step(Input::FatalError { device: DEV }).0,
        Ok(Reply::Fatal(FatalAnswer::Served(ResetAnswer::Scheduled)))
    );
    let out = o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    // The follow-up's RESET waits until the RESET_END callback returns.
    assert_eq!(
        out,
        vec![
            notify(c[0], Event::ResetEnd { epoch: Epoch(1) }),
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::Completed(Epoch(1))
            },
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    assert_eq!(
        o.ok(Input::CallbackDone { client: c[0] }),
        vec![notify(c[0], Event::Reset)]
    );
    o.ok(Input::ResetExecute { client: c[0] });
    let out = o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    assert_eq!(
        o.phase(DEV),
        PhaseKind::Running,
        "exactly one follow-up: {out:?}"
    );
    assert_eq!(o.m.epoch(DEV), Some(Epoch(2)));
}

#[test]
fn hardware_reset_waits_for_every_voter_to_ack_leave_or_be_revoked() {
    let (mut o, c) = running_with(&[
        ClientKind::Trusted,
        ClientKind::Trusted,
        ClientKind::Untrusted,
    ]);
    o.ok(Input::ResetRequest { client: c[0] });
    assert_eq!(o.ok(Input::ResetExecute { client: c[0] }), vec![]);
    assert_eq!(o.ok(Input::Unregister { client: c[1] }), vec![]); // RESET callback out
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    // the silent voter's RESET callback returns; it never answers
    assert!(o.ok(Input::CallbackDone { client: c[2] }).is_empty());
    assert!(o
        .timeout_at(Config::DEFAULT.untrusted_ack_timeout - 1)
        .is_empty());
    // the last voter is revoked at its deadline: only then is the reset commanded
    let out = o.timeout_at(Config::DEFAULT.untrusted_ack_timeout);
    assert_eq!(
        out,
        vec![notify(c[2], Event::Revoked), hw(HardwareCommand::Reset)]
    );
}

#[test]
fn after_reset_end_the_epoch_is_one_higher_and_stale_handles_are_refused_until_reacquired() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.ok(Input::ResetExecute { client: c[0] });
    o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    assert_eq!(o.m.epoch(DEV), Some(Epoch(1)));
    let stale = Error::StaleEpoch { current: Epoch(1) };
    for epoch in [Epoch(0), Epoch(1), Epoch(2)] {
        // Not even the new epoch number works before the interface is re-acquired.
        o.refused(
            Input::Access {
                client: c[0],
                epoch,
                what: Access::HardwareOp,
            },
            stale,
        );
    }
    assert_eq!(
        o.step(Input::AcquireInterface { client: c[0] }).0,
        Ok(Reply::Interface(Epoch(1)))
    );
    o.refused(
        Input::Access {
            client: c[0],
            epoch: Epoch(0),
            what: Access::HardwareOp,
        },
        stale,
    );
    assert_eq!(
        o.step(Input::Access {
            client: c[0],
            epoch: Epoch(1),
            what: Access::HardwareOp
        })
        .0,
        Ok(Reply::AccessGranted)
    );
}

#[test]
fn every_client_told_reset_is_told_exactly_one_of_reset_end_removed_or_revoked() {
    // Three ways a cycle can end for a client, in one run each.
    let ends = |events: &[Event]| {
        let after_reset = events.iter().skip_while(|e| **e != Event::Reset).skip(1);
        after_reset
            .filter(|e| {
                matches!(
                    e,
                    Event::ResetEnd { .. } | Event::Removed { .. } | Event::Revoked
                )
            })
            .count()
    };
    // completes
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.ok(Input::ResetExecute { client: c[0] });
    o.return_callbacks(DEV);
    o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    o.return_callbacks(DEV);
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    o.return_callbacks(DEV);
    assert_eq!(
        ends(&o.events_of(c[0])),
        2,
        "RESET_END, then Removed at the later remove"
    );
    assert_eq!(o.events_of(c[0])[1], Event::ResetEnd { epoch: Epoch(1) });
    // revoked, then the device is removed: no Removed after Revoked
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.return_callbacks(DEV);
    o.timeout_at(5_000);
    o.return_callbacks(DEV);
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    o.return_callbacks(DEV);
    assert_eq!(o.events_of(c[0]), vec![Event::Reset, Event::Revoked]);
    // fenced: its RESET callback never returned, so it is fenced rather than told
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    assert_eq!(
        o.timeout_at(Config::DEFAULT.untrusted_ack_timeout),
        vec![Output::Fence { client: c[0] }, hw(HardwareCommand::Reset)]
    );
    assert_eq!(o.events_of(c[0]), vec![Event::Reset]);
    // removed mid-cycle
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    o.return_callbacks(DEV);
    assert_eq!(
        o.events_of(c[0]),
        vec![Event::Reset, Event::Removed { surprise: false }]
    );
}

#[test]
fn remove_during_quiescing_aborts_the_cycle_and_clients_get_removed_not_reset_end() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.return_callbacks(DEV);
    o.ok(Input::ResetExecute { client: c[0] });
    let t = o.token();
    let out = o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert_eq!(
        out,
        vec![
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::AbortedByRemove
            },
            notify(c[0], Event::Removed { surprise: false }),
            notify(c[1], Event::Removed { surprise: false }),
        ]
    );
    // a late answer from the second voter changes nothing and commands nothing
    o.refused(
        Input::ResetExecute { client: c[1] },
        Error::InvalidState {
            phase: PhaseKind::Removing,
            input: InputKind::ResetExecute,
        },
    );
}

#[test]
fn remove_during_executing_waits_for_the_hardware_then_removes() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.return_callbacks(DEV);
    o.ok(Input::ResetExecute { client: c[0] });
    let t = o.token();
    assert_eq!(
        o.ok(Input::Remove {
            device: DEV,
            token: t
        }),
        vec![]
    );
    assert_eq!(
        o.step(Input::FatalError { device: DEV }).0,
        Ok(Reply::Fatal(FatalAnswer::FoldedIntoRemoval))
    );
    assert_eq!(o.phase(DEV), PhaseKind::Executing);
    o.refused(
        Input::ResetRequest { client: c[0] },
        Error::RemoveInProgress,
    );
    let out = o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    assert_eq!(
        out,
        vec![
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::AbortedByRemove
            },
            notify(c[0], Event::Removed { surprise: false }),
        ]
    );
    o.return_callbacks(DEV);
    let out = o.ok(Input::Unregister { client: c[0] });
    assert!(out.contains(&complete(t, Status::Success)));
}

#[test]
fn failed_hardware_reset_goes_to_failed_clients_are_told_fatal_and_only_remove_leaves() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.return_callbacks(DEV);
    o.ok(Input::ResetExecute { client: c[0] });
    o.ok(Input::ResetRequest { client: c[0] }); // a follow-up that can never run
    let out = o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Failed,
    });
    assert_eq!(
        out,
        vec![
            Output::DeviceFailed {
                device: DEV,
                cause: FailureCause::ResetFailed
            },
            notify(c[0], Event::DeviceFatal),
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::HardwareFailed
            },
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::HardwareFailed
            },
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Failed);
    let t = o.token();
    for input in [
        Input::Start {
            device: DEV,
            token: t,
        },
        Input::QueryStop {
            device: DEV,
            token: t,
        },
        Input::ResetRequest { client: c[0] },
    ] {
        let (reply, _) = o.step(input);
        assert!(matches!(
            reply,
            Err(Error::InvalidState {
                phase: PhaseKind::Failed,
                ..
            })
        ));
    }
    // No cycle can serve a fatal error now: answered with the reason, not a silent
    // "accepted" (I8), and nothing changes.
    let before = o.m.clone();
    assert_eq!(
        o.step(Input::FatalError { device: DEV }),
        (
            Ok(Reply::Fatal(FatalAnswer::HardwareNotLive(
                PhaseKind::Failed
            ))),
            vec![]
        )
    );
    assert_eq!(o.m, before);
    o.return_callbacks(DEV);
    o.ok(Input::Unregister { client: c[0] });
    let out = o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert_eq!(
        hardware_commands(&out),
        vec![HardwareCommand::ReleaseResources]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Absent);
}

#[test]
fn a_hardware_fatal_error_is_a_reset_request_from_the_driver_itself() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    assert_eq!(
        o.step(Input::FatalError { device: DEV }).0,
        Ok(Reply::Fatal(FatalAnswer::Served(ResetAnswer::Started)))
    );
    assert_eq!(o.events_of(c[0]), vec![Event::Reset]);
    // With no client at all the hardware reset follows at once.
    let mut o = owner();
    o.started(DEV, false);
    let out = o.ok(Input::FatalError { device: DEV });
    assert_eq!(out, vec![hw(HardwareCommand::Reset)]);
}

// ---- links and bindings ------------------------------------------------------------------

#[test]
fn link_changes_go_to_bound_clients_only_and_never_change_the_device_state() {
    let (mut o, c) = running_with(&[
        ClientKind::Trusted,
        ClientKind::Untrusted,
        ClientKind::Trusted,
    ]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0),
    });
    o.ok(Input::Bind {
        client: c[1],
        ports: PortSet::single(P1),
    });
    for (port, state) in [
        (P0, LinkState::Init),
        (P0, LinkState::Armed),
        (P1, LinkState::Active),
        (P0, LinkState::Down),
    ] {
        let before = o.m.phase_detail(DEV);
        let out = o.ok(Input::LinkChanged {
            device: DEV,
            port,
            state,
        });
        let to = if port == P0 { c[0] } else { c[1] };
        assert_eq!(out, vec![notify(to, Event::LinkChanged { port, state })]);
        assert_eq!(o.m.phase_detail(DEV), before);
        assert_eq!(o.m.link(DEV, port), Some(state));
        o.return_callbacks(DEV);
    }
    assert!(o.events_of(c[2]).is_empty());
    // The same state again is no change: nothing to tell.
    assert!(o
        .ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Down
        })
        .is_empty());
    // Links change during a reset cycle without disturbing it.
    o.ok(Input::ResetRequest { client: c[2] });
    o.ok(Input::LinkChanged {
        device: DEV,
        port: P1,
        state: LinkState::Down,
    });
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
}

#[test]
fn queries_are_allowed_with_every_link_down() {
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0).with(P1),
    });
    assert!(
        o.m.link(DEV, P0) == Some(LinkState::Down) && o.m.link(DEV, P1) == Some(LinkState::Down)
    );
    for port in [P0, P1] {
        assert_eq!(
            o.step(Input::Access {
                client: c[0],
                epoch: Epoch(0),
                what: Access::QueryCounters(port)
            })
            .0,
            Ok(Reply::AccessGranted)
        );
    }
    assert!(o.m.binding_caps(c[0]).is_ok());
}

#[test]
fn a_binding_that_mixes_protocols_is_refused_with_a_typed_error() {
    let mut o = owner();
    o.started(DEV, true); // P0 IB, P1 RoCE
    let c = o.register(DEV, ClientKind::Trusted);
    o.refused(
        Input::Bind {
            client: c,
            ports: PortSet::single(P0).with(P1),
        },
        Error::MixedProtocols {
            first: Protocol::Ib,
            other: Protocol::Roce,
        },
    );
    o.refused(
        Input::Bind {
            client: c,
            ports: PortSet::EMPTY,
        },
        Error::EmptyBinding,
    );
    o.refused(
        Input::Bind {
            client: c,
            ports: PortSet::single(PhysPort(5)),
        },
        Error::NoSuchPort,
    );
    assert_eq!(o.m.binding_caps(c), Err(Error::NotBound));
}

#[test]
fn capabilities_are_answered_per_binding() {
    let mut o = owner();
    o.ok(Input::AddDevice { device: DEV });
    let slow_ib = PortCaps {
        protocol: Protocol::Ib,
        max_mtu: 2048,
        atomics: false,
    };
    o.ok(Input::ConfigurePort {
        device: DEV,
        port: P0,
        caps: IB,
    });
    o.ok(Input::ConfigurePort {
        device: DEV,
        port: P1,
        caps: slow_ib,
    });
    let both = o.register(DEV, ClientKind::Trusted);
    let first = o.register(DEV, ClientKind::Trusted);
    o.ok(Input::Bind {
        client: both,
        ports: PortSet::single(P0).with(P1),
    });
    o.ok(Input::Bind {
        client: first,
        ports: PortSet::single(P0),
    });
    assert_eq!(
        o.m.binding_caps(both),
        Ok(BindingCaps {
            protocol: Protocol::Ib,
            ports: PortSet::single(P0).with(P1),
            max_mtu: 2048,
            atomics: false
        })
    );
    assert_eq!(
        o.m.binding_caps(first),
        Ok(BindingCaps {
            protocol: Protocol::Ib,
            ports: PortSet::single(P0),
            max_mtu: 4096,
            atomics: true
        })
    );
}

// ---- errors and capacities -----------------------------------------------------------------

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

/// A device added and starting, its `Hardware{Start}` left in the queue.
fn starting_undrained(token: RequestToken) -> M {
    let mut m = M::new(Config::DEFAULT);
    m.handle(Tick(0), Input::AddDevice { device: DEV }).unwrap();
    m.handle(Tick(0), Input::Start { device: DEV, token })
        .unwrap();
    m
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

const LINK_FLIPS: [LinkState; 2] = [LinkState::Init, LinkState::Down];

/// Flip P0's link `n` times, never returning a callback; every flip must be accepted.
/// Return every output.
fn flood_links(o: &mut Owner<1, 4, 2, { queue_capacity(1, 4) }>, n: usize) -> Vec<Output> {
    (0..n)
        .flat_map(|i| {
            o.ok(Input::LinkChanged {
                device: DEV,
                port: P0,
                state: LINK_FLIPS[i % 2],
            })
        })
        .collect()
}

#[test]
fn a_client_that_never_returns_a_callback_holds_one_event_a_port_and_blocks_no_input() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0),
    });
    // Far past the old limit of 254 callbacks in flight: nothing is refused.
    let sent = 1_000;
    let out = flood_links(&mut o, sent);
    assert_eq!(
        out,
        vec![notify(
            c[0],
            Event::LinkChanged {
                port: P0,
                state: LINK_FLIPS[0]
            }
        )],
        "one callback in flight; the rest wait"
    );
    let view = o.view(c[0]);
    assert!(view.callback_in_flight);
    assert_eq!(
        view.waiting_events, 1,
        "one entry for the port, whatever the flood"
    );
    // A non-notifying input works, and so does one that needs a notification.
    assert!(o.step(Input::Hold { client: c[0] }).0.is_ok());
    // Returning the callback hands over the port's newest state, once.
    let newest = LINK_FLIPS[(sent - 1) % 2];
    assert_eq!(
        o.ok(Input::CallbackDone { client: c[0] }),
        vec![notify(
            c[0],
            Event::LinkChanged {
                port: P0,
                state: newest
            }
        )]
    );
    assert!(o.ok(Input::CallbackDone { client: c[0] }).is_empty());
    let view = o.view(c[0]);
    assert!(!view.callback_in_flight);
    assert_eq!(view.waiting_events, 0);
    o.refused(
        Input::CallbackDone { client: c[0] },
        Error::NoCallbackInFlight,
    );
    // The next change is delivered at once.
    assert_eq!(
        o.ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LINK_FLIPS[sent % 2],
        }),
        vec![notify(
            c[0],
            Event::LinkChanged {
                port: P0,
                state: LINK_FLIPS[sent % 2]
            }
        )]
    );
}

#[test]
fn a_deadline_passes_on_time_whatever_a_flooded_client_does() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0),
    });
    // The untrusted client asks: the cycle starts at tick 0, its deadline is 1 000.
    o.ok(Input::ResetRequest { client: c[1] });
    // The untrusted client's RESET callback returns; the trusted one's never does.
    assert!(o.ok(Input::CallbackDone { client: c[1] }).is_empty());
    let deadline = Tick(Config::DEFAULT.untrusted_ack_timeout);
    assert_eq!(o.m.poll_timeout(), Some(deadline));
    assert!(flood_links(&mut o, 1_000).is_empty());
    assert_eq!(o.view(c[0]).waiting_events, 1);
    // Before the deadline nothing happens; at it, the silent voter is revoked on time.
    assert!(o.timeout_at(deadline.0 - 1).is_empty());
    assert_eq!(o.fire_timeout(), vec![notify(c[1], Event::Revoked)]);
    assert_eq!(o.now, deadline);
    assert_eq!(
        o.phase(DEV),
        PhaseKind::Quiescing,
        "the trusted voter is waited for"
    );
    // The stuck callback's own deadline comes next: fenced, and the reset goes ahead.
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(Config::DEFAULT.callback_timeout))
    );
    o.ok(Input::CallbackDone { client: c[1] }); // its Revoked callback
    assert_eq!(
        o.fire_timeout(),
        vec![Output::Fence { client: c[0] }, hw(HardwareCommand::Reset)]
    );
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
fn a_slot_is_retired_when_its_generation_is_spent_so_no_handle_repeats() {
    let mut m: Lifecycle<1, 1, 1, { queue_capacity(1, 1) }> = Lifecycle::new(Config::DEFAULT);
    let now = Tick(0);
    m.handle(now, Input::AddDevice { device: DEV }).unwrap();
    let mut issued = 0u32;
    let mut last = None;
    loop {
        match m.register(now, DEV, ClientKind::Untrusted) {
            Ok((client, _)) => {
                assert_eq!(u32::from(client.generation), issued);
                assert_eq!(m.unregister(now, client), Ok(Unregistered::Now));
                while m.poll_output().is_some() {}
                issued += 1;
                last = Some(client);
            }
            Err(error) => {
                assert_eq!(error, Error::RegistryFull);
                break;
            }
        }
        assert!(issued <= 70_000, "the slot is never retired");
    }
    // Generations 0 ..= u16::MAX - 1 were issued; u16::MAX marks the slot spent.
    assert_eq!(issued, u32::from(u16::MAX));
    assert_eq!(m.unregister(now, last.unwrap()), Ok(Unregistered::Already));
}

#[test]
fn port_sets_hold_ports_0_to_7_and_nothing_beyond() {
    let (p2, p7, p8) = (PhysPort(2), PhysPort(7), PhysPort(8));
    assert_eq!(PortSet::single(p8), PortSet::EMPTY);
    assert!(!PortSet(u8::MAX).contains(p8));
    let set = PortSet::single(P0).with(p2).with(p2).with(p7).with(p8);
    assert_eq!(set, PortSet(0b1000_0101));
    assert!(set.contains(p2) && set.contains(p7) && !set.contains(P1));
    assert_eq!(set.len(), 3);
    assert_eq!(PortSet::EMPTY.len(), 0);
    assert_eq!(set.iter().collect::<Vec<_>>(), vec![P0, p2, p7]);
    assert!(PortSet::EMPTY.is_empty() && !set.is_empty());
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

#[test]
fn time_never_goes_backwards() {
    let mut o = owner();
    o.timeout_at(10);
    o.at(9);
    o.refused(Input::Timeout, Error::TimeWentBackwards { last: Tick(10) });
    o.timeout_at(10);
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

/// The registry's per-client state, measured through the machine's size. Revision 2 gave
/// each slot a bounded mailbox (three ordered events, a bit a port, a last event) and the
/// time its callback was handed over, so a slot is no longer 8 bytes; this pins the new
/// figure so that growth is a decision, not an accident.
/// Issue 10 added the count of hardware operations in flight, the fence flag and the
/// cannot-pause flag: 80 bytes. Issue 21 added the fast-path gate (open, or closing since
/// a tick) and widened the operation count to take what a close carries: 88 bytes. DESIGN
/// r3's deadline from a RESET's delivery (issue 20, C1) added when it was delivered: 104.
const SLOT_BYTES: usize = 104;

#[test]
fn a_client_slot_is_at_most_its_documented_size() {
    let one = core::mem::size_of::<Lifecycle<1, 1, 2, { queue_capacity(1, 1) }>>();
    let two = core::mem::size_of::<Lifecycle<1, 2, 2, { queue_capacity(1, 2) }>>();
    let queue_growth = core::mem::size_of::<Output>() * 2; // queue_capacity grows by 2 a client
    let slot = two - one - queue_growth;
    assert!(slot <= SLOT_BYTES, "slot = {slot} bytes");
}

// ---- revision 2: time, callbacks, fences, fatal errors ----------------------------------

/// DESIGN "Architecture" and I13: a deadline counts from the `now` of the input that
/// started it, not from an earlier input or timeout (issue 9, finding 1).
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
}

/// I11: no client behaviour makes the machine refuse surprise removal, remove, unload,
/// the time, a hardware completion or a fatal error (issue 9, finding 2). Per-client
/// bookkeeping stays bounded whatever the client does.
#[test]
fn a_stuck_callback_never_makes_the_machine_refuse_surprise_removal_remove_or_unload() {
    type O = Owner<1, 4, 2, { queue_capacity(1, 4) }>;
    const PORTS: usize = 2;
    const STATES: [LinkState; 4] = [
        LinkState::Init,
        LinkState::Armed,
        LinkState::Active,
        LinkState::Down,
    ];
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Trusted]);
    let (good, stuck) = (c[0], c[1]);
    let both = PortSet::single(P0).with(P1);
    for client in [good, stuck] {
        o.ok(Input::Bind {
            client,
            ports: both,
        });
    }
    let bounded = |o: &O| {
        for (h, v) in o.m.clients(DEV) {
            assert!(usize::from(v.waiting_events) <= 3 + PORTS, "{h:?}: {v:?}");
        }
        assert_eq!(o.m.lost_outputs(), 0);
    };
    let flap = |o: &mut O, i: usize| {
        for port in [P0, P1] {
            o.ok(Input::LinkChanged {
                device: DEV,
                port,
                state: STATES[i % 4],
            });
        }
    };
    // The good client returns every callback and answers every RESET it was given.
    let serve_good = |o: &mut O| {
        while o.view(good).callback_in_flight {
            o.ok(Input::CallbackDone { client: good });
        }
        if matches!(
            o.view(good).state,
            ClientState::Active {
                role: Role::Voting,
                ..
            }
        ) {
            o.ok(Input::ResetExecute { client: good });
        }
    };
    // What the OS, the time and the hardware may say: all accepted, on a copy.
    let os_accepted = |o: &O| {
        for input in [
            Input::SurpriseRemoval { device: DEV },
            Input::Remove {
                device: DEV,
                token: RequestToken(9_999),
            },
            Input::Unload,
            Input::Timeout,
            Input::FatalError { device: DEV },
        ] {
            let mut copy = o.fork();
            copy.advance(1);
            copy.ok(input);
            bounded(&copy);
        }
    };
    // The stuck client's first callback is a link change; it never returns.
    flap(&mut o, 0);
    assert!(o.view(stuck).callback_in_flight);
    // Phase 1: a cycle the stuck client cannot answer; requests, fatal errors and link
    // flaps keep coming while time stands still.
    for i in 1..=10_000 {
        flap(&mut o, i);
        assert!(matches!(
            o.step(Input::ResetRequest { client: good }).0,
            Ok(Reply::Reset(_))
        ));
        assert!(matches!(
            o.step(Input::FatalError { device: DEV }).0,
            Ok(Reply::Fatal(FatalAnswer::Served(_)))
        ));
        serve_good(&mut o);
        o.timeout();
        bounded(&o);
        let view = o.view(stuck);
        assert!(view.callback_in_flight && !view.fence_requested);
        if i == 1 {
            // Its RESET waits behind the stuck callback: it cannot answer it.
            o.refused(
                Input::ResetExecute { client: stuck },
                Error::ResetNotDelivered,
            );
        }
        if i % 1_000 == 0 {
            os_accepted(&o);
        }
    }
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    assert_eq!(o.events_of(stuck).len(), 1, "one callback, never returned");
    // Phase 2: its callback deadline passes: fenced, and the cycle goes on without it.
    assert_eq!(
        o.fire_timeout(),
        vec![Output::Fence { client: stuck }, hw(HardwareCommand::Reset)]
    );
    // Phase 3: ten thousand whole cycles with the fence never reported done.
    let mut completed = 0;
    for i in 0..10_000 {
        o.advance(1);
        let mut out = o.ok(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded,
        });
        serve_good(&mut o);
        flap(&mut o, i);
        serve_good(&mut o);
        assert_eq!(
            o.step(Input::ResetRequest { client: good }).0,
            Ok(Reply::Reset(ResetAnswer::Started))
        );
        assert_eq!(
            o.step(Input::FatalError { device: DEV }).0,
            Ok(Reply::Fatal(FatalAnswer::Served(ResetAnswer::Joined)))
        );
        out.extend(o.timeout());
        serve_good(&mut o);
        assert_eq!(o.phase(DEV), PhaseKind::Executing);
        completed += out
            .iter()
            .filter(|o| {
                matches!(
                    o,
                    Output::ResetCycleFinished {
                        outcome: CycleOutcome::Completed(_),
                        ..
                    }
                )
            })
            .count();
        bounded(&o);
        let view = o.view(stuck);
        assert!(view.fence_requested && view.state == ClientState::Revoked);
        assert_eq!(view.waiting_events, 0);
        if i % 1_000 == 0 {
            os_accepted(&o);
        }
    }
    assert_eq!(completed, 10_000);
    assert_eq!(o.m.epoch(DEV), Some(Epoch(10_000)));
    // Phase 4: a restart and the end of the device, all accepted.
    o.advance(1);
    o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    serve_good(&mut o);
    for input in [
        Input::QueryStop {
            device: DEV,
            token: RequestToken(1),
        },
        Input::Stop {
            device: DEV,
            token: RequestToken(2),
        },
        Input::Start {
            device: DEV,
            token: RequestToken(3),
        },
        Input::StartDone {
            device: DEV,
            result: StartResult::Started,
        },
        Input::ResetRequest { client: good },
    ] {
        o.ok(input);
        serve_good(&mut o);
    }
    assert_eq!(o.phase(DEV), PhaseKind::Executing);
    let t = o.token();
    for input in [
        Input::SurpriseRemoval { device: DEV },
        Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded,
        },
        Input::FatalError { device: DEV },
        Input::Timeout,
        Input::Remove {
            device: DEV,
            token: t,
        },
        Input::Unload,
    ] {
        o.ok(input);
        bounded(&o);
    }
    o.return_callbacks(DEV);
    o.ok(Input::Unregister { client: good });
    assert_eq!(o.phase(DEV), PhaseKind::Removing, "waits for the fence");
    assert_eq!(
        o.ok(Input::FenceDone { client: stuck }),
        vec![
            Output::ClientGone { client: stuck },
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
            Output::UnloadMayFinish,
        ]
    );
}

/// DESIGN "Clients": a callback that has not returned by its deadline counts like a
/// missed `RESET` answer; revoking a client whose callback runs asks the owner to fence it.
#[test]
fn a_callback_past_its_deadline_revokes_and_fences_its_client() {
    for kind in [ClientKind::Untrusted, ClientKind::Trusted] {
        let (mut o, c) = running_with(&[kind, ClientKind::Trusted]);
        let (slow, quick) = (c[0], c[1]);
        for client in [slow, quick] {
            o.ok(Input::Bind {
                client,
                ports: PortSet::single(P0),
            });
        }
        o.at(100);
        let active = Event::LinkChanged {
            port: P0,
            state: LinkState::Active,
        };
        assert_eq!(
            o.ok(Input::LinkChanged {
                device: DEV,
                port: P0,
                state: LinkState::Active
            }),
            vec![notify(slow, active), notify(quick, active)]
        );
        o.at(200);
        o.ok(Input::CallbackDone { client: quick });
        let due = 100 + Config::DEFAULT.callback_timeout;
        assert_eq!(o.m.poll_timeout(), Some(Tick(due)));
        assert!(o.timeout_at(due - 1).is_empty());
        assert_eq!(o.view(slow).state, o.view(quick).state, "{kind:?} early");
        // At the deadline: revoked, and fenced instead of told (its callback still runs).
        assert_eq!(o.fire_timeout(), vec![Output::Fence { client: slow }]);
        let view = o.view(slow);
        assert_eq!(view.state, ClientState::Revoked);
        assert!(view.fence_requested && view.callback_in_flight);
        assert_eq!(
            o.m.poll_timeout(),
            None,
            "the fence is the owner's to finish"
        );
        assert_eq!(o.phase(DEV), PhaseKind::Running, "{kind:?} under Revoke");
        // Every later call fails; nothing more is addressed to it.
        o.refused(
            Input::Access {
                client: slow,
                epoch: Epoch(0),
                what: Access::HardwareOp,
            },
            Error::ClientRevoked,
        );
        o.refused(Input::ResetRequest { client: slow }, Error::ClientRevoked);
        assert_eq!(
            o.ok(Input::LinkChanged {
                device: DEV,
                port: P0,
                state: LinkState::Down
            }),
            vec![notify(
                quick,
                Event::LinkChanged {
                    port: P0,
                    state: LinkState::Down
                }
            )]
        );
        // Its late return changes nothing: only the fence ends the wait.
        let before = o.m.clone();
        assert!(o.ok(Input::CallbackDone { client: slow }).is_empty());
        assert_eq!(o.m, before);
        assert!(o.ok(Input::FenceDone { client: slow }).is_empty());
        let view = o.view(slow);
        assert!(!view.fence_requested && !view.callback_in_flight);
        assert_eq!(view.state, ClientState::Revoked);
        o.refused(Input::FenceDone { client: slow }, Error::NoFenceRequested);
        o.refused(Input::FenceDone { client: quick }, Error::NoFenceRequested);
        assert_eq!(o.events_of(slow), vec![active]);
        assert_eq!(
            o.step(Input::Unregister { client: slow }),
            (
                Ok(Reply::Unregistered(Unregistered::Now)),
                vec![Output::ClientGone { client: slow }]
            )
        );
    }
}

/// DESIGN "Clients" and I9: remove and unload finish without a client whose callback
/// never returns, once the owner reports its fence (issue 9, finding 3). While the
/// machine waits on a client, `poll_timeout` names the time to wake.
#[test]
fn removal_finishes_after_the_fence_of_a_stuck_callback() {
    for unload in [false, true] {
        let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
        let (stuck, good) = (c[0], c[1]);
        for client in [stuck, good] {
            o.ok(Input::Bind {
                client,
                ports: PortSet::single(P0),
            });
        }
        o.ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Active,
        });
        o.ok(Input::CallbackDone { client: good });
        o.at(1_000);
        let t = o.token();
        let removal = if unload {
            Input::Unload
        } else {
            Input::Remove {
                device: DEV,
                token: t,
            }
        };
        assert_eq!(
            o.ok(removal),
            vec![notify(good, Event::Removed { surprise: false })]
        );
        assert!(o.m.poll_timeout().is_some());
        assert!(o.ok(Input::CallbackDone { client: good }).is_empty());
        assert!(o.m.poll_timeout().is_some());
        assert_eq!(
            o.ok(Input::Unregister { client: good }),
            vec![Output::ClientGone { client: good }]
        );
        // Only the stuck client is waited for, and there is a time to wake.
        assert_eq!(
            o.m.poll_timeout(),
            Some(Tick(Config::DEFAULT.callback_timeout))
        );
        assert_eq!(o.fire_timeout(), vec![Output::Fence { client: stuck }]);
        assert_eq!(o.phase(DEV), PhaseKind::Removing);
        // Now only the owner's fence is waited for.
        assert_eq!(o.m.poll_timeout(), None);
        assert!(o.timeout_at(1 << 40).is_empty());
        assert_eq!(o.phase(DEV), PhaseKind::Removing);
        let mut end = vec![
            Output::ClientGone { client: stuck },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
        ];
        if unload {
            end.extend([
                Output::DeviceRemoved { device: DEV },
                Output::UnloadMayFinish,
            ]);
        } else {
            end.extend([
                complete(t, Status::Success),
                Output::DeviceRemoved { device: DEV },
            ]);
        }
        assert_eq!(
            o.ok(Input::FenceDone { client: stuck }),
            end,
            "unload: {unload}"
        );
        assert_eq!(
            o.events_of(stuck),
            vec![Event::LinkChanged {
                port: P0,
                state: LinkState::Active
            }],
            "its Removed waited behind the stuck callback and went with the fence"
        );
    }
    // A client told `Removed` whose callback hangs past the detach deadline is fenced the
    // same way.
    let config = Config {
        callback_timeout: 8_000,
        ..Config::DEFAULT
    };
    let mut o: Owner<1, 4, 2, { queue_capacity(1, 4) }> = Owner::new(config);
    o.started(DEV, false);
    let stuck = o.register(DEV, ClientKind::Trusted);
    let t = o.token();
    assert_eq!(
        o.ok(Input::Remove {
            device: DEV,
            token: t
        }),
        vec![notify(stuck, Event::Removed { surprise: false })]
    );
    assert_eq!(o.m.poll_timeout(), Some(Tick(config.detach_timeout)));
    assert_eq!(o.fire_timeout(), vec![Output::Fence { client: stuck }]);
    assert_eq!(o.m.poll_timeout(), None);
    assert_eq!(
        o.ok(Input::FenceDone { client: stuck }),
        vec![
            Output::ClientGone { client: stuck },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
        ]
    );
}

/// DESIGN "Clients": a trusted client whose callback overruns meets the configured
/// policy; under `FailDevice` the device fails (and a running cycle ends timed out).
#[test]
fn trusted_callback_overrun_under_fail_device_fails_the_device() {
    type O = Owner<1, 4, 2, { queue_capacity(1, 4) }>;
    let config = Config {
        trusted_policy: TrustedTimeoutPolicy::FailDevice,
        ..Config::DEFAULT
    };
    let due = Tick(config.callback_timeout);
    // Running: a link callback hangs.
    let mut o: O = Owner::new(config);
    o.started(DEV, false);
    let stuck = o.register(DEV, ClientKind::Trusted);
    let other = o.register(DEV, ClientKind::Trusted);
    o.ok(Input::Bind {
        client: stuck,
        ports: PortSet::single(P0),
    });
    o.ok(Input::LinkChanged {
        device: DEV,
        port: P0,
        state: LinkState::Active,
    });
    assert_eq!(o.m.poll_timeout(), Some(due));
    let out = o.fire_timeout();
    assert_eq!(
        out,
        vec![
            Output::Fence { client: stuck },
            Output::DeviceFailed {
                device: DEV,
                cause: FailureCause::ClientMissedDeadline
            },
            notify(other, Event::DeviceFatal)
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Failed);
    // Quiescing: the RESET callback hangs (before the trusted answer deadline).
    let mut o: O = Owner::new(config);
    o.started(DEV, false);
    let stuck = o.register(DEV, ClientKind::Trusted);
    let other = o.register(DEV, ClientKind::Trusted);
    o.ok(Input::ResetRequest { client: other });
    o.ok(Input::CallbackDone { client: other });
    o.ok(Input::ResetExecute { client: other });
    assert_eq!(o.m.poll_timeout(), Some(due));
    let out = o.fire_timeout();
    assert_eq!(
        out,
        vec![
            Output::Fence { client: stuck },
            finished(CycleOutcome::ClientTimedOut),
            Output::DeviceFailed {
                device: DEV,
                cause: FailureCause::ClientMissedDeadline
            },
            notify(other, Event::DeviceFatal)
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Failed);
    assert_eq!(count_hw(&out, HardwareCommand::Reset), 0);
    // The policy is for trusted clients: an untrusted overrun only revokes.
    let mut o: O = Owner::new(config);
    o.started(DEV, false);
    let user = o.register(DEV, ClientKind::Untrusted);
    o.ok(Input::Bind {
        client: user,
        ports: PortSet::single(P0),
    });
    o.ok(Input::LinkChanged {
        device: DEV,
        port: P0,
        state: LinkState::Active,
    });
    assert_eq!(o.fire_timeout(), vec![Output::Fence { client: user }]);
    assert_eq!(o.phase(DEV), PhaseKind::Running);
}

type O1 = Owner<1, 4, 2, { queue_capacity(1, 4) }>;

fn fatal(o: &mut O1) -> (Result<Reply, Error>, Vec<Output>) {
    o.step(Input::FatalError { device: DEV })
}

fn outcomes(outputs: &[Output]) -> Vec<CycleOutcome> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::ResetCycleFinished { outcome, .. } => Some(*outcome),
            _ => None,
        })
        .collect()
}

/// Let a cycle run to its end: every callback returned, every voter answers, the
/// hardware reset succeeds. Returns every output.
fn finish_cycle(o: &mut O1) -> Vec<Output> {
    let mut out = o.return_callbacks(DEV);
    let voters: Vec<ClientHandle> =
        o.m.clients(DEV)
            .filter(|(_, v)| {
                matches!(
                    v.state,
                    ClientState::Active {
                        role: Role::Voting,
                        ..
                    }
                )
            })
            .map(|(h, _)| h)
            .collect();
    for client in voters {
        out.extend(o.ok(Input::ResetExecute { client }));
    }
    assert_eq!(o.phase(DEV), PhaseKind::Executing);
    out.extend(o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    }));
    out.extend(o.return_callbacks(DEV));
    out
}

/// A device with one trusted client, running, every callback returned.
fn running_one() -> (O1, ClientHandle) {
    let (o, c) = running_with(&[ClientKind::Trusted]);
    (o, c[0])
}

/// DESIGN "The reset cycle": a fatal error is never lost. Where the hardware is live it is
/// served by a cycle as soon as the state allows or folded into the stop or removal under
/// way, answered by a `ResetCycleFinished` either way; where it is not live it is answered
/// with the phase (issue 9, finding 4).
#[test]
fn fatal_error_is_answered_in_every_present_state() {
    use FatalAnswer::*;
    use PhaseKind::*;
    let served = |a| Ok(Reply::Fatal(Served(a)));
    let deferred = Ok(Reply::Fatal(Deferred));
    let not_live = |p| Ok(Reply::Fatal(HardwareNotLive(p)));
    let mut answered = std::collections::BTreeSet::new();

    // Absent: no device to answer for.
    let mut o = owner();
    o.refused(
        Input::FatalError { device: DEV },
        Error::InvalidState {
            phase: Absent,
            input: InputKind::FatalError,
        },
    );
    // Not live: answered with the reason, nothing changes.
    for target in [
        Added,
        Stopped,
        Failed,
        SurpriseRemoved,
        Removing,
        RemovePending,
        LowPower,
    ] {
        let mut o = owner();
        reach(&mut o, target);
        let before = o.m.clone();
        assert_eq!(fatal(&mut o), (not_live(target), vec![]), "{target:?}");
        assert_eq!(o.m, before, "{target:?}");
        answered.insert(target);
    }
    // Powering down or up: served by a cycle after the power-up.
    for target in [PoweringDown, PoweringUp] {
        let mut o = owner();
        reach(&mut o, target);
        assert_eq!(fatal(&mut o).0, served(ResetAnswer::AfterPowerUp));
        answered.insert(target);
    }
    // Running, quiescing, executing: served by a cycle.
    let (mut o, _) = running_one();
    assert_eq!(fatal(&mut o).0, served(ResetAnswer::Started));
    answered.insert(Running);
    assert_eq!(fatal(&mut o).0, served(ResetAnswer::Joined));
    answered.insert(Quiescing);
    let mut out = o.return_callbacks(DEV);
    let c = o.m.clients(DEV).next().unwrap().0;
    out.extend(o.ok(Input::ResetExecute { client: c }));
    assert_eq!(fatal(&mut o).0, served(ResetAnswer::Scheduled));
    answered.insert(Executing);
    out.extend(o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    }));
    out.extend(finish_cycle(&mut o));
    assert_eq!(
        outcomes(&out),
        vec![
            CycleOutcome::Completed(Epoch(1)),
            CycleOutcome::Completed(Epoch(2))
        ]
    );
    // Executing with a removal under way: folded into it.
    let (mut o, c) = running_one();
    o.ok(Input::ResetRequest { client: c });
    o.return_callbacks(DEV);
    o.ok(Input::ResetExecute { client: c });
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert_eq!(fatal(&mut o).0, Ok(Reply::Fatal(FoldedIntoRemoval)));
    let (mut o, c) = running_one();
    o.ok(Input::ResetRequest { client: c });
    o.return_callbacks(DEV);
    o.ok(Input::ResetExecute { client: c });
    o.ok(Input::Unload);
    assert_eq!(fatal(&mut o).0, Ok(Reply::Fatal(FoldedIntoRemoval)));

    // Starting: deferred; the start's end answers it.
    for (result, expected) in [
        (
            StartResult::Started,
            vec![CycleOutcome::Completed(Epoch(1))],
        ),
        (
            StartResult::FailedAfterResources,
            vec![CycleOutcome::HardwareFailed],
        ),
    ] {
        let mut o = owner();
        reach(&mut o, Starting);
        assert_eq!(fatal(&mut o), (deferred, vec![]));
        assert_eq!(
            o.m.phase_detail(DEV),
            Some(Phase::Starting {
                token: RequestToken(2),
                fatal: true
            })
        );
        assert_eq!(
            fatal(&mut o),
            (deferred, vec![]),
            "a second one is held too"
        );
        let mut out = o.ok(Input::StartDone {
            device: DEV,
            result,
        });
        if result == StartResult::Started {
            assert_eq!(o.phase(DEV), Quiescing, "start done serves it with a cycle");
            out.extend(finish_cycle(&mut o));
        }
        assert_eq!(outcomes(&out), expected, "{result:?}");
    }
    let mut o = owner();
    reach(&mut o, Starting);
    assert_eq!(fatal(&mut o).0, deferred);
    let out = o.ok(Input::SurpriseRemoval { device: DEV });
    assert_eq!(outcomes(&out), vec![CycleOutcome::AbortedBySurpriseRemoval]);
    answered.insert(Starting);

    // Stop pending: deferred; cancel stop serves it, stop folds it in, removal aborts it.
    type Then = fn(&mut O1) -> Vec<Output>;
    let ends: [(Then, CycleOutcome); 4] = [
        (
            |o| {
                let t = o.token();
                let mut out = o.ok(Input::CancelStop {
                    device: DEV,
                    token: t,
                });
                assert_eq!(
                    o.phase(DEV),
                    Quiescing,
                    "cancel stop serves it with a cycle"
                );
                out.extend(finish_cycle(o));
                out
            },
            CycleOutcome::Completed(Epoch(1)),
        ),
        (
            |o| {
                let t = o.token();
                o.ok(Input::Stop {
                    device: DEV,
                    token: t,
                })
            },
            CycleOutcome::FoldedIntoStop,
        ),
        (
            |o| {
                let t = o.token();
                o.ok(Input::Remove {
                    device: DEV,
                    token: t,
                })
            },
            CycleOutcome::AbortedByRemove,
        ),
        (
            |o| o.ok(Input::SurpriseRemoval { device: DEV }),
            CycleOutcome::AbortedBySurpriseRemoval,
        ),
    ];
    for (then, expected) in ends {
        let mut o = owner();
        reach(&mut o, StopPending);
        assert_eq!(fatal(&mut o), (deferred, vec![]));
        assert_eq!(
            o.m.phase_detail(DEV),
            Some(Phase::StopPending {
                fatal: true,
                low_power: None
            })
        );
        let out = then(&mut o);
        assert_eq!(outcomes(&out), vec![expected]);
    }
    answered.insert(StopPending);

    // Stopping (waiting for an operation in flight): deferred; the stop absorbs it when
    // the operation finishes, or surprise removal answers it.
    for surprise in [false, true] {
        let mut o = owner();
        let c = reach(&mut o, Stopping).unwrap();
        assert_eq!(fatal(&mut o), (deferred, vec![]));
        let out = if surprise {
            o.ok(Input::SurpriseRemoval { device: DEV })
        } else {
            o.ok(Input::AccessDone { client: c })
        };
        let expected = if surprise {
            CycleOutcome::AbortedBySurpriseRemoval
        } else {
            CycleOutcome::FoldedIntoStop
        };
        assert_eq!(outcomes(&out), vec![expected]);
    }
    answered.insert(Stopping);

    // Remove pending from running: deferred; cancel remove serves it, removal aborts it.
    let ends: [(Then, CycleOutcome); 3] = [
        (
            |o| {
                let t = o.token();
                let mut out = o.ok(Input::CancelRemove {
                    device: DEV,
                    token: t,
                });
                assert_eq!(
                    o.phase(DEV),
                    Quiescing,
                    "cancel remove serves it with a cycle"
                );
                out.extend(finish_cycle(o));
                out
            },
            CycleOutcome::Completed(Epoch(1)),
        ),
        (
            |o| {
                let t = o.token();
                o.ok(Input::Remove {
                    device: DEV,
                    token: t,
                })
            },
            CycleOutcome::AbortedByRemove,
        ),
        (
            |o| o.ok(Input::SurpriseRemoval { device: DEV }),
            CycleOutcome::AbortedBySurpriseRemoval,
        ),
    ];
    for (then, expected) in ends {
        let (mut o, _) = running_one();
        let t = o.token();
        o.ok(Input::QueryRemove {
            device: DEV,
            token: t,
        });
        assert_eq!(fatal(&mut o), (deferred, vec![]));
        assert_eq!(
            o.m.phase_detail(DEV),
            Some(Phase::RemovePending {
                prior: Prior::Running,
                fatal: true
            })
        );
        let out = then(&mut o);
        assert_eq!(outcomes(&out), vec![expected]);
    }
    // Every present state was walked.
    assert_eq!(answered.len(), PhaseKind::COUNT - 1, "{answered:?}");
}

/// DESIGN "Clients" / the mailbox: a client cannot answer a `RESET` it has not been
/// called with yet.
#[test]
fn a_reset_answer_before_the_reset_is_delivered_is_refused() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Trusted]);
    let (busy, asker) = (c[0], c[1]);
    o.ok(Input::Bind {
        client: busy,
        ports: PortSet::single(P0),
    });
    let active = Event::LinkChanged {
        port: P0,
        state: LinkState::Active,
    };
    assert_eq!(
        o.ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Active
        }),
        vec![notify(busy, active)]
    );
    assert_eq!(
        o.ok(Input::ResetRequest { client: asker }),
        vec![notify(asker, Event::Reset)]
    );
    let view = o.view(busy);
    assert!(view.callback_in_flight);
    assert_eq!(view.waiting_events, 1);
    o.refused(
        Input::ResetExecute { client: busy },
        Error::ResetNotDelivered,
    );
    assert!(o.ok(Input::ResetExecute { client: asker }).is_empty());
    assert_eq!(
        o.ok(Input::CallbackDone { client: busy }),
        vec![notify(busy, Event::Reset)]
    );
    // Called with it, it may answer even before the callback returns.
    assert_eq!(
        o.ok(Input::ResetExecute { client: busy }),
        vec![hw(HardwareCommand::Reset)]
    );
}

/// DESIGN "Clients": at most one callback in flight per client; the next waiting event is
/// handed over by the `CallbackDone` that returns the previous one, ordered events first.
#[test]
fn at_most_one_callback_in_flight_per_client() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Trusted]);
    let (slow, asker) = (c[0], c[1]);
    o.ok(Input::Bind {
        client: slow,
        ports: PortSet::single(P0).with(P1),
    });
    let link = |port, state| Input::LinkChanged {
        device: DEV,
        port,
        state,
    };
    let mut all = Vec::new();
    all.extend(o.ok(link(P0, LinkState::Init)));
    all.extend(o.ok(link(P1, LinkState::Active)));
    all.extend(o.ok(Input::ResetRequest { client: asker }));
    all.extend(o.ok(Input::CallbackDone { client: asker }));
    all.extend(o.ok(Input::ResetExecute { client: asker }));
    all.extend(o.ok(link(P0, LinkState::Armed)));
    let to_slow: Vec<&Output> = all
        .iter()
        .filter(|out| matches!(out, Output::Notify { client, .. } if *client == slow))
        .collect();
    assert_eq!(
        to_slow,
        vec![&notify(
            slow,
            Event::LinkChanged {
                port: P0,
                state: LinkState::Init
            }
        )]
    );
    let view = o.view(slow);
    assert!(view.callback_in_flight);
    assert_eq!(view.waiting_events, 3, "RESET and one entry a port");
    // Each return hands over exactly the next one: ordered events first, then the ports.
    assert_eq!(
        o.ok(Input::CallbackDone { client: slow }),
        vec![notify(slow, Event::Reset)]
    );
    assert_eq!(
        o.ok(Input::CallbackDone { client: slow }),
        vec![notify(
            slow,
            Event::LinkChanged {
                port: P0,
                state: LinkState::Armed
            }
        )]
    );
    assert_eq!(
        o.ok(Input::CallbackDone { client: slow }),
        vec![notify(
            slow,
            Event::LinkChanged {
                port: P1,
                state: LinkState::Active
            }
        )]
    );
    assert!(o.ok(Input::CallbackDone { client: slow }).is_empty());
    o.refused(
        Input::CallbackDone { client: slow },
        Error::NoCallbackInFlight,
    );
}

/// DESIGN "Clients": while a callback runs, a newer link state replaces an older one (one
/// entry a port), and `Removed` replaces everything waiting.
#[test]
fn link_changes_coalesce_to_the_newest_state_while_a_callback_runs() {
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    let c = c[0];
    o.ok(Input::Bind {
        client: c,
        ports: PortSet::single(P0).with(P1),
    });
    let link = |port, state| Input::LinkChanged {
        device: DEV,
        port,
        state,
    };
    let told = |port, state| notify(c, Event::LinkChanged { port, state });
    assert_eq!(
        o.ok(link(P0, LinkState::Init)),
        vec![told(P0, LinkState::Init)]
    );
    use LinkState::*;
    for state in [Armed, Active, Down, Init, Armed, Active] {
        assert!(o.ok(link(P0, state)).is_empty());
    }
    for state in [Init, Down, Armed] {
        assert!(o.ok(link(P1, state)).is_empty());
    }
    assert_eq!(o.view(c).waiting_events, 2);
    assert_eq!(
        o.ok(Input::CallbackDone { client: c }),
        vec![told(P0, Active)]
    );
    // P1 moves on while P0's callback runs: the client is told the state at delivery.
    assert!(o.ok(link(P1, Active)).is_empty());
    assert_eq!(
        o.ok(Input::CallbackDone { client: c }),
        vec![told(P1, Active)]
    );
    assert!(o.ok(Input::CallbackDone { client: c }).is_empty());
    assert_eq!(
        o.events_of(c),
        vec![
            Event::LinkChanged {
                port: P0,
                state: Init
            },
            Event::LinkChanged {
                port: P0,
                state: Active
            },
            Event::LinkChanged {
                port: P1,
                state: Active
            },
        ]
    );
    // `Removed` replaces every link change still waiting.
    assert_eq!(o.ok(link(P0, Down)), vec![told(P0, Down)]);
    assert!(o.ok(link(P0, Init)).is_empty());
    assert!(o.ok(link(P1, Down)).is_empty());
    let t = o.token();
    assert!(o
        .ok(Input::Remove {
            device: DEV,
            token: t
        })
        .is_empty());
    assert_eq!(o.view(c).waiting_events, 1);
    assert_eq!(
        o.ok(Input::CallbackDone { client: c }),
        vec![notify(c, Event::Removed { surprise: false })]
    );
    assert!(o.ok(Input::CallbackDone { client: c }).is_empty());
}

/// I4 as revised: a failed reset's `DeviceFatal` answers `RESET`; after it only
/// `Removed`/`Revoked` follow (issue 9, finding 5).
#[test]
fn failed_reset_answers_reset_with_device_fatal() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    let (a, b) = (c[0], c[1]);
    assert_eq!(
        o.ok(Input::ResetRequest { client: a }),
        vec![notify(a, Event::Reset), notify(b, Event::Reset)]
    );
    o.ok(Input::ResetExecute { client: a });
    assert_eq!(
        o.ok(Input::ResetExecute { client: b }),
        vec![hw(HardwareCommand::Reset)]
    );
    let late = o.register(DEV, ClientKind::Trusted);
    o.ok(Input::CallbackDone { client: a });
    // b's RESET callback still runs: its answer waits behind it.
    assert_eq!(
        o.ok(Input::ResetDone {
            device: DEV,
            result: ResetResult::Failed
        }),
        vec![
            Output::DeviceFailed {
                device: DEV,
                cause: FailureCause::ResetFailed
            },
            notify(a, Event::DeviceFatal),
            notify(late, Event::DeviceFatal),
            finished(CycleOutcome::HardwareFailed),
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Failed);
    assert_eq!(
        o.ok(Input::CallbackDone { client: b }),
        vec![notify(b, Event::DeviceFatal)]
    );
    o.return_callbacks(DEV);
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    o.return_callbacks(DEV);
    for client in [a, b] {
        assert_eq!(
            o.events_of(client),
            vec![
                Event::Reset,
                Event::DeviceFatal,
                Event::Removed { surprise: false }
            ],
            "{client:?}"
        );
    }
    assert_eq!(
        o.events_of(late),
        vec![Event::DeviceFatal, Event::Removed { surprise: false }]
    );
    // The oracle of I4 as revised, over every client's events.
    for (client, events) in &o.events {
        let mut waiting = false;
        let mut fatal = false;
        for e in events {
            match e {
                Event::Reset => {
                    assert!(!fatal, "{client:?}: RESET after DeviceFatal");
                    waiting = true;
                }
                Event::ResetEnd { .. } => waiting = false,
                Event::DeviceFatal => {
                    waiting = false;
                    fatal = true;
                }
                Event::Removed { .. } | Event::Revoked => waiting = false,
                other => assert!(!fatal, "{client:?}: {other:?} after DeviceFatal"),
            }
        }
        assert!(!waiting, "{client:?} left hanging: {events:?}");
    }
}

// ---- issue 10: hardware operations bracketed and drained, fences, vetoes, recovery ------

const OP_DEADLINE: u64 = Config::DEFAULT.operation_timeout;

fn op(client: ClientHandle) -> Input {
    Input::Access {
        client,
        epoch: Epoch(0),
        what: Access::HardwareOp,
    }
}

fn grant(o: &mut O1, client: ClientHandle) {
    assert_eq!(o.step(op(client)).0, Ok(Reply::AccessGranted));
}

/// Query stop, then stop; returns the stop's token.
fn query_stop_and_stop(o: &mut O1) -> (RequestToken, Vec<Output>) {
    let t = o.token();
    o.ok(Input::QueryStop {
        device: DEV,
        token: t,
    });
    let t = o.token();
    let out = o.ok(Input::Stop {
        device: DEV,
        token: t,
    });
    (t, out)
}

fn stopped_and_released(token: RequestToken) -> Vec<Output> {
    vec![
        hw(HardwareCommand::Shutdown),
        hw(HardwareCommand::ReleaseResources),
        complete(token, Status::Success),
    ]
}

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

/// DESIGN "Clients": a revoked client's operation in flight is fenced before the hardware
/// is touched: the reset waits for the fence (issue 10, finding 2).
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

const UNTRUSTED_ACK: u64 = Config::DEFAULT.untrusted_ack_timeout;

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

/// DESIGN "Clients" (open handles and vetoes) and I10: a client that cannot pause vetoes
/// query stop, naming why; the veto changes nothing; once it can pause the query succeeds.
#[test]
fn query_stop_vetoed_by_client_that_cannot_pause() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    o.ok(Input::CannotPause { client: c[1] });
    o.refused(
        Input::CannotPause { client: c[1] },
        Error::AlreadyCannotPause,
    );
    o.refused(Input::CanPause { client: c[0] }, Error::NotCannotPause);
    let before = o.m.clone();
    let t = o.token();
    // `step` asserts that the refusal changed nothing and queued nothing (I10).
    o.refused(
        Input::QueryStop {
            device: DEV,
            token: t,
        },
        Error::Vetoed(VetoReason::ClientCannotPause),
    );
    assert_eq!(o.m, before);
    assert_eq!(o.phase(DEV), PhaseKind::Running);
    // Query remove is not affected by it (only holding vetoes query remove).
    let mut f = o.fork();
    let t = f.token();
    f.ok(Input::QueryRemove {
        device: DEV,
        token: t,
    });
    // Nor is a reset cycle.
    let mut f = o.fork();
    assert_eq!(
        f.step(Input::ResetRequest { client: c[0] }).0,
        Ok(Reply::Reset(ResetAnswer::Started))
    );
    o.ok(Input::CanPause { client: c[1] });
    let t = o.token();
    assert_eq!(
        o.ok(Input::QueryStop {
            device: DEV,
            token: t
        }),
        vec![complete(t, Status::Success)]
    );
    // A client that leaves takes its veto with it.
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    o.ok(Input::CannotPause { client: c[0] });
    o.ok(Input::Unregister { client: c[0] });
    let t = o.token();
    o.ok(Input::QueryStop {
        device: DEV,
        token: t,
    });
    // And the holding veto names its own reason.
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    o.ok(Input::Hold { client: c[0] });
    let t = o.token();
    o.refused(
        Input::QueryRemove {
            device: DEV,
            token: t,
        },
        Error::Vetoed(VetoReason::ClientHoldsDevice),
    );
}

/// DESIGN "The reset cycle": when every voter says it can recover, the cycle ends without
/// a hardware reset; the epoch is unchanged, clients are told `Recovered`, the request
/// (here a fatal error) is answered, and the old interface is still good.
#[test]
fn cycle_without_reset_keeps_the_epoch() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    assert_eq!(
        fatal(&mut o).0,
        Ok(Reply::Fatal(FatalAnswer::Served(ResetAnswer::Started)))
    );
    o.return_callbacks(DEV);
    // A client registered during the cycle is not a voter but hears its end.
    let late = o.register(DEV, ClientKind::Trusted);
    o.refused(Input::CanRecover { client: late }, Error::NotVoting);
    assert_eq!(o.ok(Input::CanRecover { client: c[0] }), vec![]);
    o.refused(Input::CanRecover { client: c[0] }, Error::NotVoting);
    let out = o.ok(Input::CanRecover { client: c[1] });
    let recovered = Event::Recovered { epoch: Epoch(0) };
    assert_eq!(
        out,
        vec![
            notify(c[0], recovered),
            notify(c[1], recovered),
            notify(late, recovered),
            finished(CycleOutcome::Recovered(Epoch(0))),
        ]
    );
    assert_eq!(o.m.epoch(DEV), Some(Epoch(0)));
    assert_eq!(o.phase(DEV), PhaseKind::Running);
    o.return_callbacks(DEV);
    grant(&mut o, c[0]);
    grant(&mut o, late);
    // Outside a cycle there is nothing to answer.
    o.refused(
        Input::CanRecover { client: c[1] },
        Error::InvalidState {
            phase: PhaseKind::Running,
            input: InputKind::CanRecover,
        },
    );
    // A client's reset request ends the same way when every voter can recover.
    assert_eq!(
        o.step(Input::ResetRequest { client: c[1] }).0,
        Ok(Reply::Reset(ResetAnswer::Started))
    );
    o.ok(Input::AccessDone { client: c[0] });
    o.ok(Input::AccessDone { client: late });
    o.return_callbacks(DEV);
    o.ok(Input::CanRecover { client: c[0] });
    o.ok(Input::CanRecover { client: c[1] });
    let out = o.ok(Input::CanRecover { client: late });
    assert_eq!(
        out.last(),
        Some(&finished(CycleOutcome::Recovered(Epoch(0))))
    );
    assert_eq!(count_hw(&out, HardwareCommand::Reset), 0);
}

/// DESIGN "The reset cycle": if any voter needs a reset, the reset runs, whatever order
/// the answers come in.
#[test]
fn one_reset_vote_makes_the_reset_run() {
    for reset_first in [false, true] {
        let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
        let _ = fatal(&mut o);
        o.return_callbacks(DEV);
        let (first, second) = if reset_first {
            (
                Input::ResetExecute { client: c[1] },
                Input::CanRecover { client: c[0] },
            )
        } else {
            (
                Input::CanRecover { client: c[0] },
                Input::ResetExecute { client: c[1] },
            )
        };
        assert_eq!(o.ok(first), vec![]);
        assert_eq!(o.ok(second), vec![hw(HardwareCommand::Reset)]);
        let out = o.ok(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded,
        });
        assert_eq!(
            out,
            vec![
                notify(c[0], Event::ResetEnd { epoch: Epoch(1) }),
                notify(c[1], Event::ResetEnd { epoch: Epoch(1) }),
                finished(CycleOutcome::Completed(Epoch(1))),
            ]
        );
    }
}

/// DESIGN "Reset cycle" and I8: a reset that was asked for is not skipped because its
/// voters were revoked: nobody said it could recover. (Found by this test: the core ends
/// such a cycle with `Recovered` and no reset.)
#[test]
fn a_cycle_whose_voters_were_all_revoked_still_resets() {
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    let _ = fatal(&mut o);
    o.return_callbacks(DEV);
    assert_eq!(
        o.fire_timeout(),
        vec![notify(c[0], Event::Revoked), hw(HardwareCommand::Reset)],
        "a hardware fatal error must not end without a reset because the voter was silent"
    );
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

/// DESIGN "Device lifecycle" and issue 10: surprise removal touches nothing, so it waits
/// for nothing: accepted at once while a stop or a reset waits for operations, no hardware
/// command follows, and the remove that follows releases (no register) once the operation
/// is done or fenced.
#[test]
fn surprise_removal_waits_for_nothing() {
    for during in [PhaseKind::Stopping, PhaseKind::Quiescing] {
        let (mut o, c) = running_with(&[ClientKind::Trusted]);
        grant(&mut o, c[0]);
        let mut all = Vec::new();
        let stop_token = if during == PhaseKind::Stopping {
            let (t, out) = query_stop_and_stop(&mut o);
            all.extend(out);
            Some(t)
        } else {
            all.extend(o.ok(Input::ResetRequest { client: c[0] }));
            o.return_callbacks(DEV);
            all.extend(o.ok(Input::ResetExecute { client: c[0] }));
            assert!(matches!(
                o.m.phase_detail(DEV),
                Some(Phase::Quiescing {
                    draining: Some(_),
                    ..
                })
            ));
            None
        };
        o.return_callbacks(DEV);
        assert_eq!(o.phase(DEV), during);
        let out = o.ok(Input::SurpriseRemoval { device: DEV });
        let mut expected = match stop_token {
            Some(t) => vec![complete(t, Status::DeviceGone)],
            None => vec![finished(CycleOutcome::AbortedBySurpriseRemoval)],
        };
        expected.push(notify(c[0], Event::Removed { surprise: true }));
        assert_eq!(out, expected, "{during:?}");
        assert_eq!(o.phase(DEV), PhaseKind::SurpriseRemoved);
        all.extend(out);
        all.extend(o.return_callbacks(DEV));
        let t = o.token();
        all.extend(o.ok(Input::Remove {
            device: DEV,
            token: t,
        }));
        all.extend(o.ok(Input::Unregister { client: c[0] }));
        assert_eq!(
            o.phase(DEV),
            PhaseKind::Removing,
            "the release waits for the operation"
        );
        let out = o.ok(Input::AccessDone { client: c[0] });
        assert_eq!(
            out,
            vec![
                Output::ClientGone { client: c[0] },
                hw(HardwareCommand::ReleaseResources),
                complete(t, Status::Success),
                Output::DeviceRemoved { device: DEV },
            ]
        );
        all.extend(out);
        for command in [HardwareCommand::Shutdown, HardwareCommand::Reset] {
            assert_eq!(count_hw(&all, command), 0, "{during:?}: {all:?}");
        }
    }
}

/// DESIGN "Device lifecycle" (unload is a fence) and I9: unload during a stop that waits
/// for an operation finishes once the operation does (or is fenced).
#[test]
fn unload_during_a_stop_waiting_for_operations_finishes() {
    for operation_finishes in [true, false] {
        let (mut o, c) = running_with(&[ClientKind::Untrusted]);
        grant(&mut o, c[0]);
        let (t, _) = query_stop_and_stop(&mut o);
        o.return_callbacks(DEV);
        assert_eq!(o.ok(Input::Unload), vec![], "unload waits for the stop");
        assert_eq!(o.phase(DEV), PhaseKind::Stopping);
        o.refused(
            Input::Register {
                device: DEV,
                kind: ClientKind::Trusted,
            },
            Error::Unloading,
        );
        let mut out = if operation_finishes {
            o.ok(Input::AccessDone { client: c[0] })
        } else {
            let mut out = o.fire_timeout();
            assert_eq!(out, vec![Output::Fence { client: c[0] }]);
            out.extend(o.ok(Input::FenceDone { client: c[0] }));
            out
        };
        let mut stop = stopped_and_released(t);
        if operation_finishes {
            stop.push(notify(c[0], Event::Removed { surprise: false }));
            assert_eq!(out, stop);
            out.extend(o.return_callbacks(DEV));
            out.extend(o.ok(Input::Unregister { client: c[0] }));
        } else {
            // Fenced: revoked, freed with the device; no `Removed` after the fence.
            assert_eq!(out[1..4], stop[..]);
        }
        assert_eq!(out.last(), Some(&Output::UnloadMayFinish), "{out:?}");
        assert_eq!(o.m.driver_phase(), DriverPhase::Unloaded);
        assert_eq!(count_hw(&out, HardwareCommand::Shutdown), 1);
    }
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

/// I4 (revision 2): after `DeviceFatal` only `Removed` or `Revoked` reach a client, not
/// even link news; the link state is still recorded and queries still see it.
#[test]
fn no_link_change_after_device_fatal() {
    // A failed start and a failed reset both tell clients `DeviceFatal`.
    for via_reset in [false, true] {
        let mut o = owner();
        o.ok(Input::AddDevice { device: DEV });
        o.ok(Input::ConfigurePort {
            device: DEV,
            port: P0,
            caps: IB,
        });
        let c = o.register(DEV, ClientKind::Trusted);
        o.ok(Input::Bind {
            client: c,
            ports: PortSet::single(P0),
        });
        let t = o.token();
        o.ok(Input::Start {
            device: DEV,
            token: t,
        });
        let result = if via_reset {
            StartResult::Started
        } else {
            StartResult::FailedAfterResources
        };
        o.ok(Input::StartDone {
            device: DEV,
            result,
        });
        o.return_callbacks(DEV);
        if via_reset {
            o.ok(Input::ResetRequest { client: c });
            o.return_callbacks(DEV);
            o.ok(Input::ResetExecute { client: c });
            o.ok(Input::ResetDone {
                device: DEV,
                result: ResetResult::Failed,
            });
        }
        assert_eq!(o.phase(DEV), PhaseKind::Failed);
        assert_eq!(o.events_of(c).last(), Some(&Event::DeviceFatal));
        // With the fatal callback still running and after it returned.
        for state in [LinkState::Active, LinkState::Down] {
            assert_eq!(
                o.ok(Input::LinkChanged {
                    device: DEV,
                    port: P0,
                    state
                }),
                vec![]
            );
            assert_eq!(o.m.link(DEV, P0), Some(state));
            o.return_callbacks(DEV);
        }
        let t = o.token();
        o.ok(Input::Remove {
            device: DEV,
            token: t,
        });
        o.return_callbacks(DEV);
        let after: Vec<Event> = o
            .events_of(c)
            .into_iter()
            .skip_while(|e| *e != Event::DeviceFatal)
            .collect();
        assert_eq!(
            after,
            vec![Event::DeviceFatal, Event::Removed { surprise: false }],
            "via reset: {via_reset}"
        );
    }
}

/// Reach a recovery cycle in which the first voter said it can recover and the second
/// has not answered yet.
fn recovering() -> (O1, Vec<ClientHandle>) {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    let _ = fatal(&mut o);
    o.return_callbacks(DEV);
    o.ok(Input::CanRecover { client: c[0] });
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    (o, c)
}

/// DESIGN "The reset cycle": remove during a recovery cycle behaves as during any cycle:
/// the cycle is aborted (clients get `Removed`, never `Recovered`), no reset.
#[test]
fn recovery_without_reset_racing_remove() {
    let (mut o, c) = recovering();
    let t = o.token();
    let out = o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert_eq!(
        out,
        vec![
            finished(CycleOutcome::AbortedByRemove),
            notify(c[0], Event::Removed { surprise: false }),
            notify(c[1], Event::Removed { surprise: false }),
        ]
    );
    o.refused(
        Input::CanRecover { client: c[1] },
        Error::InvalidState {
            phase: PhaseKind::Removing,
            input: InputKind::CanRecover,
        },
    );
    o.return_callbacks(DEV);
    o.ok(Input::Unregister { client: c[0] });
    let out = o.ok(Input::Unregister { client: c[1] });
    assert_eq!(
        out,
        vec![
            Output::ClientGone { client: c[1] },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
        ]
    );
    for c in c {
        assert!(!o
            .events_of(c)
            .contains(&Event::Recovered { epoch: Epoch(0) }));
    }
}

/// DESIGN "The reset cycle": surprise removal during a recovery cycle aborts it; nothing
/// touches the hardware.
#[test]
fn recovery_without_reset_racing_surprise_removal() {
    let (mut o, c) = recovering();
    let out = o.ok(Input::SurpriseRemoval { device: DEV });
    assert_eq!(
        out,
        vec![
            finished(CycleOutcome::AbortedBySurpriseRemoval),
            notify(c[0], Event::Removed { surprise: true }),
            notify(c[1], Event::Removed { surprise: true }),
        ]
    );
    o.refused(
        Input::CanRecover { client: c[1] },
        Error::InvalidState {
            phase: PhaseKind::SurpriseRemoved,
            input: InputKind::CanRecover,
        },
    );
    o.return_callbacks(DEV);
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    o.ok(Input::Unregister { client: c[0] });
    let out = o.ok(Input::Unregister { client: c[1] });
    assert_eq!(count_hw(&out, HardwareCommand::Shutdown), 0);
    assert!(out.contains(&Output::DeviceRemoved { device: DEV }));
}

/// DESIGN "The reset cycle": unload during a recovery cycle aborts it like remove, and
/// unload finishes even if the silent voter never detaches.
#[test]
fn recovery_without_reset_racing_unload() {
    let (mut o, c) = recovering();
    let out = o.ok(Input::Unload);
    assert_eq!(
        out,
        vec![
            finished(CycleOutcome::AbortedByRemove),
            notify(c[0], Event::Removed { surprise: false }),
            notify(c[1], Event::Removed { surprise: false }),
        ]
    );
    let mut out = o.return_callbacks(DEV);
    out.extend(o.ok(Input::Unregister { client: c[0] }));
    // The untrusted client never detaches: revoked silently at the detach deadline.
    out.extend(o.fire_timeout());
    assert_eq!(out.last(), Some(&Output::UnloadMayFinish), "{out:?}");
    assert_eq!(count_hw(&out, HardwareCommand::Reset), 0);
    assert!(!o
        .events_of(c[1])
        .contains(&Event::Recovered { epoch: Epoch(0) }));
}

// ---- power (DESIGN "Power", I14) ---------------------------------------------------------

type O = Owner<1, 4, 2, { queue_capacity(1, 4) }>;

fn power_down(o: &mut O, kind: PowerDownKind) -> (RequestToken, Vec<Output>) {
    let token = o.token();
    let out = o.ok(Input::PowerDown {
        device: DEV,
        kind,
        token,
    });
    (token, out)
}

/// A running device with one trusted client, taken to `kind` Dx; every callback returned.
fn in_dx(kind: PowerDownKind) -> (O, ClientHandle) {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    let (token, out) = power_down(&mut o, kind);
    assert!(out.contains(&hw(HardwareCommand::PowerDown)), "{out:?}");
    o.return_callbacks(DEV);
    let out = o.ok(Input::PowerDownDone { device: DEV });
    assert_eq!(out, vec![complete(token, Status::Success)]);
    assert_eq!(o.phase(DEV), PhaseKind::LowPower);
    (o, c[0])
}

fn hardware_op(o: &mut O, client: ClientHandle, epoch: u32) -> Result<Reply, Error> {
    o.step(Input::Access {
        client,
        epoch: Epoch(epoch),
        what: Access::HardwareOp,
    })
    .0
}

/// DESIGN "Power": powering down is orderly: clients are told the device is suspending,
/// hardware operations in flight are drained, then the hardware is commanded to power down.
#[test]
fn powering_down_tells_clients_drains_operations_then_commands_the_hardware() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    assert_eq!(hardware_op(&mut o, c[1], 0), Ok(Reply::AccessGranted));
    let (token, out) = power_down(&mut o, PowerDownKind::SystemSleep);
    let suspending = Event::Suspending {
        kind: PowerDownKind::SystemSleep,
    };
    assert_eq!(
        out,
        vec![notify(c[0], suspending), notify(c[1], suspending)],
        "told first; no power-down while an operation is in flight"
    );
    assert_eq!(o.phase(DEV), PhaseKind::PoweringDown);
    o.return_callbacks(DEV);
    assert_eq!(
        o.ok(Input::AccessDone { client: c[1] }),
        vec![hw(HardwareCommand::PowerDown)]
    );
    assert_eq!(
        o.ok(Input::PowerDownDone { device: DEV }),
        vec![complete(token, Status::Success)]
    );
    assert_eq!(o.phase(DEV), PhaseKind::LowPower);
    assert_eq!(o.m.epoch(DEV), Some(Epoch(0)), "not a reset: same epoch");
}

/// DESIGN "Power": the drain has the brackets' deadline, then revokes and fences.
#[test]
fn an_operation_that_outlasts_the_power_down_wait_is_revoked_and_fenced_first() {
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    assert_eq!(hardware_op(&mut o, c[0], 0), Ok(Reply::AccessGranted));
    o.at(100);
    power_down(&mut o, PowerDownKind::Idle);
    o.return_callbacks(DEV);
    let due = 100 + Config::DEFAULT.operation_timeout;
    assert_eq!(o.m.poll_timeout(), Some(Tick(due)));
    assert_eq!(o.timeout_at(due - 1), vec![], "not before its deadline");
    assert_eq!(
        o.timeout_at(due),
        vec![Output::Fence { client: c[0] }],
        "revoked and fenced; still no power-down"
    );
    assert_eq!(
        o.ok(Input::FenceDone { client: c[0] }),
        vec![hw(HardwareCommand::PowerDown)]
    );
}

/// DESIGN "Power": powering up commands the hardware, then tells clients the device is
/// back; the epoch does not change and the interface they hold stays good.
#[test]
fn powering_up_commands_the_hardware_then_tells_clients_back_at_the_same_epoch() {
    let (mut o, c) = in_dx(PowerDownKind::SystemSleep);
    let token = o.token();
    assert_eq!(
        o.ok(Input::PowerUp { device: DEV, token }),
        vec![hw(HardwareCommand::PowerUp)],
        "the hardware first, clients only once it is back"
    );
    let out = o.ok(Input::PowerUpDone {
        device: DEV,
        result: PowerUpResult::Powered,
    });
    assert_eq!(
        out,
        vec![
            complete(token, Status::Success),
            notify(
                c,
                Event::Resumed {
                    epoch: Epoch(0),
                    state_lost: false
                }
            )
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Running);
    assert_eq!(hardware_op(&mut o, c, 0), Ok(Reply::AccessGranted));
}

/// DESIGN "Power": a power-up that reports lost state ends like a completed reset: epoch
/// + 1, clients told so and re-acquire. No reset cycle runs.
#[test]
fn a_lost_state_power_up_ends_like_a_completed_reset() {
    let (mut o, c) = in_dx(PowerDownKind::SystemSleep);
    let token = o.token();
    o.ok(Input::PowerUp { device: DEV, token });
    let out = o.ok(Input::PowerUpDone {
        device: DEV,
        result: PowerUpResult::LostState,
    });
    assert_eq!(
        out,
        vec![
            complete(token, Status::Success),
            notify(
                c,
                Event::Resumed {
                    epoch: Epoch(1),
                    state_lost: true
                }
            )
        ],
        "no RESET, no hardware reset"
    );
    assert_eq!(o.m.epoch(DEV), Some(Epoch(1)));
    o.return_callbacks(DEV);
    assert_eq!(
        hardware_op(&mut o, c, 0),
        Err(Error::StaleEpoch { current: Epoch(1) })
    );
    o.ok(Input::AcquireInterface { client: c });
    assert_eq!(hardware_op(&mut o, c, 1), Ok(Reply::AccessGranted));
}

/// I14: in Dx no hardware command but the power-up is issued and no access is granted; in
/// system sleep the access is refused with a named reason and nothing changes.
#[test]
fn in_system_sleep_an_access_is_refused_by_name_and_nothing_touches_the_hardware() {
    let (mut o, c) = in_dx(PowerDownKind::SystemSleep);
    for what in [Access::HardwareOp, Access::QueryCounters(P0)] {
        o.refused(
            Input::Access {
                client: c,
                epoch: Epoch(0),
                what,
            },
            Error::Suspended {
                kind: PowerDownKind::SystemSleep,
            },
        );
    }
    assert_eq!(
        Error::Suspended {
            kind: PowerDownKind::SystemSleep
        }
        .to_string(),
        "the device is suspended for system sleep: no hardware access until it is told Resumed"
    );
    // A fatal interrupt from a powered-down device is answered without touching it.
    let (reply, out) = o.step(Input::FatalError { device: DEV });
    assert_eq!(
        reply,
        Ok(Reply::Fatal(FatalAnswer::HardwareNotLive(
            PhaseKind::LowPower
        )))
    );
    assert_eq!(out, vec![]);
    // A link change, a registration, a hold: no hardware command.
    o.ok(Input::LinkChanged {
        device: DEV,
        port: P0,
        state: LinkState::Active,
    });
    let late = o.register(DEV, ClientKind::Untrusted);
    let out = o.ok(Input::Hold { client: late });
    assert_eq!(count_hw(&out, HardwareCommand::Shutdown), 0);
    assert_eq!(o.phase(DEV), PhaseKind::LowPower);
}

/// DESIGN "Power": an access in an idle Dx brings the device back to D0 first: it is not
/// granted, it waits for the power-up (`AccessWaitsForPowerUp`), which the machine starts.
#[test]
fn an_access_in_an_idle_dx_brings_the_device_back_first() {
    let (mut o, c) = in_dx(PowerDownKind::Idle);
    let (reply, out) = o.step(Input::Access {
        client: c,
        epoch: Epoch(0),
        what: Access::HardwareOp,
    });
    assert_eq!(reply, Ok(Reply::AccessWaitsForPowerUp));
    assert_eq!(out, vec![hw(HardwareCommand::PowerUp)]);
    assert_eq!(o.view(c).operations_in_flight, 0, "not granted");
    // A second access waits for the same power-up; the owner's power-up request joins it.
    assert_eq!(
        o.step(Input::Access {
            client: c,
            epoch: Epoch(0),
            what: Access::QueryCounters(P0),
        }),
        (Ok(Reply::AccessWaitsForPowerUp), vec![])
    );
    let token = o.token();
    assert_eq!(o.ok(Input::PowerUp { device: DEV, token }), vec![]);
    let out = o.ok(Input::PowerUpDone {
        device: DEV,
        result: PowerUpResult::Powered,
    });
    assert!(out.contains(&complete(token, Status::Success)), "{out:?}");
    assert!(out.contains(&notify(
        c,
        Event::Resumed {
            epoch: Epoch(0),
            state_lost: false
        }
    )));
    assert_eq!(hardware_op(&mut o, c, 0), Ok(Reply::AccessGranted));
    // The typed entry point says the same.
    let (mut o, c) = in_dx(PowerDownKind::Idle);
    assert_eq!(
        o.m.access(Tick(0), c, Epoch(0), Access::HardwareOp),
        Ok(AccessAnswer::WaitForPowerUp)
    );
}

/// DESIGN "Power": an access that comes while an idle power-down is under way waits too,
/// and the device comes straight back once it is down.
#[test]
fn an_access_during_an_idle_power_down_waits_and_the_device_comes_straight_back() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Trusted]);
    assert_eq!(hardware_op(&mut o, c[1], 0), Ok(Reply::AccessGranted));
    let (token, _) = power_down(&mut o, PowerDownKind::Idle);
    assert_eq!(
        o.step(Input::Access {
            client: c[0],
            epoch: Epoch(0),
            what: Access::HardwareOp,
        }),
        (Ok(Reply::AccessWaitsForPowerUp), vec![])
    );
    assert_eq!(
        o.ok(Input::AccessDone { client: c[1] }),
        vec![hw(HardwareCommand::PowerDown)]
    );
    assert_eq!(
        o.ok(Input::PowerDownDone { device: DEV }),
        vec![
            complete(token, Status::Success),
            hw(HardwareCommand::PowerUp)
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::PoweringUp);
}

/// DESIGN "Power": a reset requested in Dx is served after the power-up, by one cycle
/// however many requests came.
#[test]
fn a_reset_requested_in_dx_is_served_after_the_power_up_by_one_cycle() {
    let (mut o, c) = in_dx(PowerDownKind::SystemSleep);
    for _ in 0..2 {
        assert_eq!(
            o.step(Input::ResetRequest { client: c }),
            (Ok(Reply::Reset(ResetAnswer::AfterPowerUp)), vec![]),
            "in system sleep nothing is touched"
        );
    }
    let fatal = o.step(Input::FatalError { device: DEV }).0;
    assert_eq!(
        fatal,
        Ok(Reply::Fatal(FatalAnswer::HardwareNotLive(
            PhaseKind::LowPower
        )))
    );
    let token = o.token();
    assert_eq!(
        o.ok(Input::PowerUp { device: DEV, token }),
        vec![hw(HardwareCommand::PowerUp)]
    );
    let out = o.ok(Input::PowerUpDone {
        device: DEV,
        result: PowerUpResult::Powered,
    });
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing, "{out:?}");
    let mut all = out;
    all.extend(o.return_callbacks(DEV));
    all.extend(o.ok(Input::ResetExecute { client: c }));
    all.extend(o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    }));
    assert_eq!(
        o.events_of(c),
        vec![
            Event::Suspending {
                kind: PowerDownKind::SystemSleep
            },
            Event::Resumed {
                epoch: Epoch(0),
                state_lost: false
            },
            Event::Reset,
            Event::ResetEnd { epoch: Epoch(1) },
        ]
    );
    assert_eq!(count_hw(&all, HardwareCommand::Reset), 1);
    assert_eq!(
        outcomes(&all),
        vec![CycleOutcome::Completed(Epoch(1))],
        "one cycle"
    );
    // After an idle power-down the request itself brings the device back.
    let (mut o, c) = in_dx(PowerDownKind::Idle);
    assert_eq!(
        o.step(Input::ResetRequest { client: c }),
        (
            Ok(Reply::Reset(ResetAnswer::AfterPowerUp)),
            vec![hw(HardwareCommand::PowerUp)]
        )
    );
}

/// DESIGN "Power": no cycle runs for a reset requested in Dx if the power-up itself
/// reported lost state: that power-up answers the request.
#[test]
fn a_reset_requested_in_dx_needs_no_cycle_when_the_power_up_lost_state() {
    let (mut o, c) = in_dx(PowerDownKind::Idle);
    o.ok(Input::ResetRequest { client: c });
    let out = o.ok(Input::PowerUpDone {
        device: DEV,
        result: PowerUpResult::LostState,
    });
    assert_eq!(
        out,
        vec![
            notify(
                c,
                Event::Resumed {
                    epoch: Epoch(1),
                    state_lost: true
                }
            ),
            finished(CycleOutcome::Completed(Epoch(1)))
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Running);
    assert_eq!(o.m.epoch(DEV), Some(Epoch(1)));
}

/// DESIGN "Power": a power-down requested during a reset cycle waits for the cycle to
/// end (system sleep); an idle power-down is not started (vetoed, nothing changes).
#[test]
fn a_power_down_during_a_reset_cycle_waits_for_it_and_an_idle_one_is_not_started() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    let idle = Input::PowerDown {
        device: DEV,
        kind: PowerDownKind::Idle,
        token: RequestToken(50),
    };
    o.refused(idle, Error::Vetoed(VetoReason::ResetInProgress));
    let (token, out) = power_down(&mut o, PowerDownKind::SystemSleep);
    assert_eq!(out, vec![], "waits: nobody told, nothing commanded");
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    o.return_callbacks(DEV);
    o.ok(Input::ResetExecute { client: c[0] });
    o.refused(idle, Error::Vetoed(VetoReason::ResetInProgress));
    let out = o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    assert_eq!(
        out,
        vec![
            notify(c[0], Event::ResetEnd { epoch: Epoch(1) }),
            finished(CycleOutcome::Completed(Epoch(1))),
            hw(HardwareCommand::PowerDown),
        ],
        "the cycle ends, then the power-down begins (its Suspending waits for the callback)"
    );
    o.return_callbacks(DEV);
    assert_eq!(
        o.events_of(c[0]).last(),
        Some(&Event::Suspending {
            kind: PowerDownKind::SystemSleep
        })
    );
    assert_eq!(
        o.ok(Input::PowerDownDone { device: DEV }),
        vec![complete(token, Status::Success)]
    );
    // A system sleep that waited for a cycle the device's removal ended completes then.
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    let (token, _) = power_down(&mut o, PowerDownKind::SystemSleep);
    let t = o.token();
    let out = o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert!(
        out.contains(&complete(token, Status::DeviceGone)),
        "{out:?}"
    );
}

/// DESIGN "Power": surprise removal in Dx touches nothing and repeats none of the
/// power-down steps already done; the remove that follows releases without registers.
#[test]
fn surprise_removal_in_dx_touches_nothing_and_repeats_no_power_down_step() {
    let (mut o, c) = in_dx(PowerDownKind::Idle);
    let out = o.ok(Input::SurpriseRemoval { device: DEV });
    assert_eq!(out, vec![notify(c, Event::Removed { surprise: true })]);
    o.return_callbacks(DEV);
    o.ok(Input::Unregister { client: c });
    let t = o.token();
    let out = o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert_eq!(
        hardware_commands(&out),
        vec![HardwareCommand::ReleaseResources]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Absent);
}

/// DESIGN "Power": remove from Dx releases resources without powering up.
#[test]
fn remove_from_dx_releases_resources_without_powering_up() {
    for kind in [PowerDownKind::Idle, PowerDownKind::SystemSleep] {
        let (mut o, c) = in_dx(kind);
        let t = o.token();
        let mut out = o.ok(Input::Remove {
            device: DEV,
            token: t,
        });
        out.extend(o.return_callbacks(DEV));
        out.extend(o.ok(Input::Unregister { client: c }));
        assert_eq!(
            hardware_commands(&out),
            vec![HardwareCommand::ReleaseResources],
            "{kind:?}"
        );
        assert!(out.contains(&complete(t, Status::Success)));
        assert_eq!(o.phase(DEV), PhaseKind::Absent);
    }
}

/// DESIGN "Power": query remove and query stop in Dx are answered as in D0 (vetoes
/// included); cancel returns to Dx exactly; a stop from Dx touches no register.
#[test]
fn query_remove_and_query_stop_in_dx_are_answered_as_in_d0() {
    let (mut o, c) = in_dx(PowerDownKind::SystemSleep);
    let before = o.m.clone();
    o.ok(Input::Hold { client: c });
    o.refused(
        Input::QueryRemove {
            device: DEV,
            token: RequestToken(60),
        },
        Error::Vetoed(VetoReason::ClientHoldsDevice),
    );
    o.ok(Input::ReleaseHold { client: c });
    o.ok(Input::CannotPause { client: c });
    o.refused(
        Input::QueryStop {
            device: DEV,
            token: RequestToken(61),
        },
        Error::Vetoed(VetoReason::ClientCannotPause),
    );
    o.ok(Input::CanPause { client: c });
    for (query, cancel) in [
        (
            Input::QueryRemove {
                device: DEV,
                token: RequestToken(62),
            },
            Input::CancelRemove {
                device: DEV,
                token: RequestToken(63),
            },
        ),
        (
            Input::QueryStop {
                device: DEV,
                token: RequestToken(64),
            },
            Input::CancelStop {
                device: DEV,
                token: RequestToken(65),
            },
        ),
    ] {
        assert_eq!(
            o.ok(query),
            vec![complete(query.token().unwrap(), Status::Success)]
        );
        o.ok(cancel);
        assert!(o.m == before, "cancel returns to exactly the Dx it left");
    }
    // A stop from Dx: resources released, no register touched, no power-up.
    o.ok(Input::QueryStop {
        device: DEV,
        token: RequestToken(66),
    });
    let out = o.ok(Input::Stop {
        device: DEV,
        token: RequestToken(67),
    });
    assert_eq!(
        hardware_commands(&out),
        vec![HardwareCommand::ReleaseResources]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Stopped);
    // The restart brings the client back: told the device started.
    o.return_callbacks(DEV);
    let t = o.token();
    o.ok(Input::Start {
        device: DEV,
        token: t,
    });
    o.ok(Input::StartDone {
        device: DEV,
        result: StartResult::Started,
    });
    o.return_callbacks(DEV);
    assert_eq!(
        o.events_of(c).last(),
        Some(&Event::DeviceStarted { epoch: Epoch(0) })
    );
}

/// DESIGN "Power": unload removes every device whatever its power state.
#[test]
fn unload_removes_every_device_whatever_its_power_state() {
    let setups: [fn(&mut O); 4] = [
        |o| {
            power_down(o, PowerDownKind::Idle);
        },
        |o| {
            power_down(o, PowerDownKind::Idle);
            o.ok(Input::PowerDownDone { device: DEV });
        },
        |o| {
            power_down(o, PowerDownKind::SystemSleep);
            o.ok(Input::PowerDownDone { device: DEV });
        },
        |o| {
            power_down(o, PowerDownKind::SystemSleep);
            o.ok(Input::PowerDownDone { device: DEV });
            let t = o.token();
            o.ok(Input::PowerUp {
                device: DEV,
                token: t,
            });
        },
    ];
    for setup in setups {
        let (mut o, c) = running_with(&[ClientKind::Trusted]);
        setup(&mut o);
        let phase = o.phase(DEV);
        let mut out = o.ok(Input::Unload);
        out.extend(o.return_callbacks(DEV));
        out.extend(o.ok(Input::Unregister { client: c[0] }));
        match phase {
            PhaseKind::PoweringDown => {
                out.extend(o.ok(Input::PowerDownDone { device: DEV }));
            }
            PhaseKind::PoweringUp => {
                out.extend(o.ok(Input::PowerUpDone {
                    device: DEV,
                    result: PowerUpResult::Powered,
                }));
            }
            _ => {}
        }
        assert_eq!(
            out.last(),
            Some(&Output::UnloadMayFinish),
            "{phase:?}: {out:?}"
        );
        // Down or going down: released without a register access or a power-up.
        if phase != PhaseKind::PoweringUp {
            assert_eq!(
                hardware_commands(&out),
                vec![HardwareCommand::ReleaseResources],
                "{phase:?}"
            );
        }
        assert_eq!(o.m.driver_phase(), DriverPhase::Unloaded);
    }
}

/// DESIGN "Power": a failed power-up from Dx is treated as the hardware having vanished.
#[test]
fn a_failed_power_up_from_dx_is_a_surprise_removal() {
    let (mut o, c) = in_dx(PowerDownKind::Idle);
    o.ok(Input::ResetRequest { client: c });
    let out = o.ok(Input::PowerUpDone {
        device: DEV,
        result: PowerUpResult::Failed,
    });
    assert_eq!(
        out,
        vec![
            finished(CycleOutcome::AbortedBySurpriseRemoval),
            notify(c, Event::Removed { surprise: true })
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::SurpriseRemoved);
    o.return_callbacks(DEV);
    o.ok(Input::Unregister { client: c });
    let t = o.token();
    assert_eq!(
        hardware_commands(&o.ok(Input::Remove {
            device: DEV,
            token: t
        })),
        vec![HardwareCommand::ReleaseResources],
        "no register is touched"
    );
}

/// DESIGN "Power": a failed power-up on first start is a failed start (the start is the
/// first D0 entry: the owner reports it as a failed `StartDone`).
#[test]
fn a_failed_power_up_on_first_start_is_a_failed_start() {
    let mut o = owner();
    o.ok(Input::AddDevice { device: DEV });
    let c = o.register(DEV, ClientKind::Trusted);
    let t = o.token();
    o.ok(Input::Start {
        device: DEV,
        token: t,
    });
    o.refused(
        Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Failed,
        },
        Error::InvalidState {
            phase: PhaseKind::Starting,
            input: InputKind::PowerUpDone,
        },
    );
    let out = o.ok(Input::StartDone {
        device: DEV,
        result: StartResult::FailedAfterResources,
    });
    assert!(out.contains(&complete(t, Status::HardwareFailed)));
    assert_eq!(o.phase(DEV), PhaseKind::Failed);
    assert_eq!(o.events_of(c), vec![Event::DeviceFatal]);
}

/// I14: every client told the device is suspending is later told it is back, `Removed`
/// or `Revoked`, even when the news waits behind a callback that runs long.
#[test]
fn every_client_told_suspending_is_later_told_back_removed_or_revoked() {
    // Back: a client whose callback still runs when the device comes back is told once
    // it returns (the waiting Suspending is replaced by Resumed: where the device is now).
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0),
    });
    o.ok(Input::LinkChanged {
        device: DEV,
        port: P0,
        state: LinkState::Active,
    });
    power_down(&mut o, PowerDownKind::SystemSleep);
    assert_eq!(o.view(c[0]).waiting_events, 1);
    o.ok(Input::PowerDownDone { device: DEV });
    let t = o.token();
    o.ok(Input::PowerUp {
        device: DEV,
        token: t,
    });
    o.ok(Input::PowerUpDone {
        device: DEV,
        result: PowerUpResult::Powered,
    });
    assert_eq!(o.view(c[0]).waiting_events, 1, "bounded: one device news");
    o.return_callbacks(DEV);
    assert_eq!(
        o.events_of(c[0]).last(),
        Some(&Event::Resumed {
            epoch: Epoch(0),
            state_lost: false
        })
    );
    // Back after a delivered Suspending.
    let (mut o, c) = in_dx(PowerDownKind::Idle);
    hardware_op(&mut o, c, 0).unwrap();
    o.ok(Input::PowerUpDone {
        device: DEV,
        result: PowerUpResult::Powered,
    });
    o.return_callbacks(DEV);
    let told = o.events_of(c);
    assert!(
        matches!(
            told.as_slice(),
            [Event::Suspending { .. }, Event::Resumed { .. }]
        ),
        "{told:?}"
    );
    // Revoked: a client whose Suspending callback never returns.
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    power_down(&mut o, PowerDownKind::Idle);
    o.advance(Config::DEFAULT.callback_timeout);
    assert_eq!(o.timeout(), vec![Output::Fence { client: c[0] }]);
    assert_eq!(o.view(c[0]).state, ClientState::Revoked);
}

/// DESIGN "Power": query stop and query remove in Dx are answered as in D0, and a reset
/// that waits for the power-up vetoes them as a running cycle would (`ResetInProgress`),
/// changing nothing; the reset is then served after the power-up.
#[test]
fn query_stop_and_query_remove_in_dx_are_vetoed_while_a_reset_waits_for_the_power_up() {
    let (mut o, c) = in_dx(PowerDownKind::SystemSleep);
    assert_eq!(
        o.step(Input::ResetRequest { client: c }),
        (Ok(Reply::Reset(ResetAnswer::AfterPowerUp)), vec![])
    );
    let token = o.token();
    o.refused(
        Input::QueryStop { device: DEV, token },
        Error::Vetoed(VetoReason::ResetInProgress),
    );
    let token = o.token();
    o.refused(
        Input::QueryRemove { device: DEV, token },
        Error::Vetoed(VetoReason::ResetInProgress),
    );
    assert_eq!(o.phase(DEV), PhaseKind::LowPower);
    let token = o.token();
    o.ok(Input::PowerUp { device: DEV, token });
    o.ok(Input::PowerUpDone {
        device: DEV,
        result: PowerUpResult::Powered,
    });
    assert_eq!(
        o.phase(DEV),
        PhaseKind::Quiescing,
        "the reset is served now"
    );
}

/// Two clients, the untrusted one with a hardware operation in flight, then a `kind`
/// power-down that waits for it (`PoweringDown`); every callback returned.
fn powering_down_behind_an_operation(kind: PowerDownKind) -> (O, Vec<ClientHandle>, RequestToken) {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    assert_eq!(hardware_op(&mut o, c[1], 0), Ok(Reply::AccessGranted));
    let (token, _) = power_down(&mut o, kind);
    o.return_callbacks(DEV);
    assert_eq!(o.phase(DEV), PhaseKind::PoweringDown);
    (o, c, token)
}

/// DESIGN "Power": a reset requested (or a fatal error raised) while an idle power-down is
/// under way is served after the power-up, and the device does not stay down for it: once
/// the power-down is done, the power-up is commanded at once, then the cycle runs.
#[test]
fn a_reset_or_fatal_error_during_an_idle_power_down_brings_the_device_straight_back() {
    for fatal in [false, true] {
        let (mut o, c, token) = powering_down_behind_an_operation(PowerDownKind::Idle);
        let (reply, out) = if fatal {
            o.step(Input::FatalError { device: DEV })
        } else {
            o.step(Input::ResetRequest { client: c[0] })
        };
        let expected = if fatal {
            Reply::Fatal(FatalAnswer::Served(ResetAnswer::AfterPowerUp))
        } else {
            Reply::Reset(ResetAnswer::AfterPowerUp)
        };
        assert_eq!((reply, out), (Ok(expected), vec![]), "fatal {fatal}");
        assert_eq!(
            o.ok(Input::AccessDone { client: c[1] }),
            vec![hw(HardwareCommand::PowerDown)],
            "the power-down still completes first"
        );
        assert_eq!(
            o.ok(Input::PowerDownDone { device: DEV }),
            vec![
                complete(token, Status::Success),
                hw(HardwareCommand::PowerUp)
            ],
            "straight back up (fatal {fatal})"
        );
        let back = Event::Resumed {
            epoch: Epoch(0),
            state_lost: false,
        };
        assert_eq!(
            o.ok(Input::PowerUpDone {
                device: DEV,
                result: PowerUpResult::Powered,
            }),
            vec![notify(c[0], back), notify(c[1], back)]
        );
        assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
        assert_eq!(
            o.return_callbacks(DEV),
            vec![notify(c[0], Event::Reset), notify(c[1], Event::Reset)]
        );
    }
}

/// DESIGN "Power": during a system-sleep power-down a reset (or a fatal error) waits for
/// the owner's power-up; nothing powers the device up by itself.
#[test]
fn a_reset_or_fatal_error_during_a_system_sleep_power_down_waits_for_the_power_up() {
    for fatal in [false, true] {
        let (mut o, c, token) = powering_down_behind_an_operation(PowerDownKind::SystemSleep);
        if fatal {
            o.ok(Input::FatalError { device: DEV });
        } else {
            o.ok(Input::ResetRequest { client: c[0] });
        }
        o.ok(Input::AccessDone { client: c[1] });
        assert_eq!(
            o.ok(Input::PowerDownDone { device: DEV }),
            vec![complete(token, Status::Success)],
            "asleep: no power-up (fatal {fatal})"
        );
        assert_eq!(o.phase(DEV), PhaseKind::LowPower);
        let wake = o.token();
        assert_eq!(
            o.ok(Input::PowerUp {
                device: DEV,
                token: wake
            }),
            vec![hw(HardwareCommand::PowerUp)]
        );
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Powered,
        });
        assert_eq!(o.phase(DEV), PhaseKind::Quiescing, "served after the wake");
    }
}

/// DESIGN "Power": in system sleep an access is refused with a named reason, already
/// while the device is powering down (the drain lets no new operation in).
#[test]
fn an_access_during_a_system_sleep_power_down_is_refused_by_name() {
    let (mut o, c, _) = powering_down_behind_an_operation(PowerDownKind::SystemSleep);
    o.refused(
        Input::Access {
            client: c[0],
            epoch: Epoch(0),
            what: Access::HardwareOp,
        },
        Error::Suspended {
            kind: PowerDownKind::SystemSleep,
        },
    );
}

/// DESIGN "Power": a reset request and a fatal error that arrive while the device powers
/// up join that power-up: one cycle after it serves both (one hardware reset, one
/// `ResetCycleFinished`).
#[test]
fn a_reset_and_a_fatal_error_while_powering_up_are_served_by_one_cycle_after_it() {
    let (mut o, c) = in_dx(PowerDownKind::SystemSleep);
    let wake = o.token();
    assert_eq!(
        o.ok(Input::PowerUp {
            device: DEV,
            token: wake
        }),
        vec![hw(HardwareCommand::PowerUp)]
    );
    assert_eq!(
        o.step(Input::ResetRequest { client: c }),
        (Ok(Reply::Reset(ResetAnswer::AfterPowerUp)), vec![])
    );
    assert_eq!(
        o.step(Input::FatalError { device: DEV }),
        (
            Ok(Reply::Fatal(FatalAnswer::Served(ResetAnswer::AfterPowerUp))),
            vec![]
        )
    );
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Powered,
        }),
        vec![
            complete(wake, Status::Success),
            notify(
                c,
                Event::Resumed {
                    epoch: Epoch(0),
                    state_lost: false
                }
            )
        ]
    );
    assert_eq!(o.return_callbacks(DEV), vec![notify(c, Event::Reset)]);
    assert_eq!(
        o.ok(Input::ResetExecute { client: c }),
        vec![hw(HardwareCommand::Reset)]
    );
    assert_eq!(
        o.ok(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded
        }),
        vec![
            notify(c, Event::ResetEnd { epoch: Epoch(1) }),
            finished(CycleOutcome::Completed(Epoch(1)))
        ]
    );
}

/// DESIGN "Power": asking whether a power-down would be accepted changes nothing, and the
/// answer is the one the power-down gets: the table's (refused in Failed), then the
/// handler's on its data (an idle power-down vetoed during a reset cycle, a second deferred
/// system sleep refused as pending).
#[test]
fn asking_whether_a_power_down_would_be_accepted_answers_as_it_and_changes_nothing() {
    use PowerDownKind::{Idle, SystemSleep};
    fn ask(o: &O, kind: PowerDownKind) -> Result<(), Error> {
        let before = o.m.clone();
        let answer = o.m.query_power_down(DEV, kind);
        assert_eq!(o.m, before, "asking changed the machine");
        answer
    }
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    assert_eq!(ask(&o, Idle), Ok(()));
    assert_eq!(ask(&o, SystemSleep), Ok(()));
    assert_eq!(
        o.m.query_power_down(DeviceId(9), Idle),
        Err(Error::NoSuchDevice)
    );
    o.ok(Input::ResetRequest { client: c[0] });
    assert_eq!(
        ask(&o, Idle),
        Err(Error::Vetoed(VetoReason::ResetInProgress))
    );
    assert_eq!(ask(&o, SystemSleep), Ok(()));
    let (_, out) = power_down(&mut o, SystemSleep);
    assert_eq!(
        out,
        vec![],
        "the asked sleep is accepted and waits for the cycle"
    );
    assert_eq!(ask(&o, SystemSleep), Err(Error::RequestPending));
    o.refused(
        Input::PowerDown {
            device: DEV,
            kind: SystemSleep,
            token: RequestToken(60),
        },
        Error::RequestPending,
    );
    // Query stop succeeded: a power-down is accepted (Windows must not fail SET_POWER;
    // issue 22 item 6), and so is the answer.
    let (mut o, _) = running_with(&[ClientKind::Trusted]);
    let t = o.token();
    o.ok(Input::QueryStop {
        device: DEV,
        token: t,
    });
    assert_eq!(ask(&o, SystemSleep), Ok(()));
    // Start failed: the table refuses a power-down, and so does the answer.
    let mut o = owner();
    o.ok(Input::AddDevice { device: DEV });
    let t = o.token();
    o.ok(Input::Start {
        device: DEV,
        token: t,
    });
    o.ok(Input::StartDone {
        device: DEV,
        result: StartResult::FailedAfterResources,
    });
    let refused = Err(Error::InvalidState {
        phase: PhaseKind::Failed,
        input: InputKind::PowerDown,
    });
    assert_eq!(ask(&o, SystemSleep), refused);
    // In Dx: accepted (already down).
    let (o, _) = in_dx(Idle);
    assert_eq!(ask(&o, Idle), Ok(()));
    assert_eq!(ask(&o, SystemSleep), Ok(()));
}
