//! One test per rule of DESIGN.md, named after the rule.

mod common;
use common::*;
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
    o.refused(
        Input::FatalError { device: DEV },
        Error::InvalidState {
            phase: PhaseKind::RemovePending,
            input: InputKind::FatalError,
        },
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
        _ => unreachable!(),
    }
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
    // Nothing at all after it.
    for input in [
        Input::Tick { now: Tick(1 << 40) },
        Input::Unregister { client: a },
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
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(Config::DEFAULT.untrusted_ack_timeout))
    );
    assert!(o.ok(Input::Tick { now: Tick(999) }).is_empty());
    let out = o.ok(Input::Tick { now: Tick(1000) });
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
    let at = Config::DEFAULT.trusted_ack_timeout;
    assert_eq!(o.m.poll_timeout(), Some(Tick(at)));
    assert!(o.ok(Input::Tick { now: Tick(at - 1) }).is_empty());
    assert_eq!(
        o.ok(Input::Tick { now: Tick(at) }),
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
    o.ok(Input::ResetExecute { client: quick });
    let out = o.ok(Input::Tick {
        now: Tick(config.trusted_ack_timeout),
    });
    assert_eq!(
        out,
        vec![
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::ClientTimedOut
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
    // Whenever the machine waits for a client (a vote, a detach), poll_timeout names a tick.
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    assert!(o.m.poll_timeout().is_some());
    o.ok(Input::ResetExecute { client: c[0] });
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(Config::DEFAULT.untrusted_ack_timeout))
    );
    o.ok(Input::ResetExecute { client: c[1] });
    assert_eq!(o.m.poll_timeout(), None, "waiting on hardware only");
    o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    let deadline = o.m.poll_timeout().expect("detach has a deadline");
    assert_eq!(deadline, Tick(Config::DEFAULT.detach_timeout));
    o.return_callbacks(DEV);
    // Nobody detaches: at the deadline both are revoked silently and removal completes.
    let out = o.ok(Input::Tick { now: deadline });
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
                holding: false
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
    // c0 leaves with its RESET callback still in flight: its slot stays until it returns.
    assert_eq!(o.ok(Input::Unregister { client: c[0] }), vec![]);
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
        Ok(Reply::Reset(ResetAnswer::Joined))
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
    o.ok(Input::ResetExecute { client: c[0] });
    for _ in 0..3 {
        assert_eq!(
            o.step(Input::ResetRequest { client: c[0] }).0,
            Ok(Reply::Reset(ResetAnswer::Scheduled))
        );
    }
    let out = o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    assert_eq!(
        out,
        vec![
            notify(c[0], Event::ResetEnd { epoch: Epoch(1) }),
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::Completed(Epoch(1))
            },
            notify(c[0], Event::Reset),
        ]
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
    // the last voter is revoked at its deadline: only then is the reset commanded
    let out = o.ok(Input::Tick {
        now: Tick(Config::DEFAULT.untrusted_ack_timeout),
    });
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
    o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert_eq!(
        ends(&o.events_of(c[0])),
        2,
        "RESET_END, then Removed at the later remove"
    );
    assert_eq!(o.events_of(c[0])[1], Event::ResetEnd { epoch: Epoch(1) });
    // revoked, then the device is removed: no Removed after Revoked
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.ok(Input::Tick { now: Tick(5_000) });
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert_eq!(o.events_of(c[0]), vec![Event::Reset, Event::Revoked]);
    // removed mid-cycle
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    let t = o.token();
    o.ok(Input::Remove {
        device: DEV,
        token: t,
    });
    assert_eq!(
        o.events_of(c[0]),
        vec![Event::Reset, Event::Removed { surprise: false }]
    );
}

#[test]
fn remove_during_quiescing_aborts_the_cycle_and_clients_get_removed_not_reset_end() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
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
    o.ok(Input::ResetExecute { client: c[0] });
    let t = o.token();
    assert_eq!(
        o.ok(Input::Remove {
            device: DEV,
            token: t
        }),
        vec![]
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
    o.ok(Input::ResetExecute { client: c[0] });
    o.ok(Input::ResetRequest { client: c[0] }); // a follow-up that can never run
    let out = o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Failed,
    });
    assert_eq!(
        out,
        vec![
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
    // No cycle can serve a fatal error now: a refusal, not a silent "accepted" (I8).
    o.refused(
        Input::FatalError { device: DEV },
        Error::InvalidState {
            phase: PhaseKind::Failed,
            input: InputKind::FatalError,
        },
    );
    assert_eq!(o.phase(DEV), PhaseKind::Failed);
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
        Ok(Reply::Reset(ResetAnswer::Started))
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
    m.handle(Input::AddDevice { device: DEV }).unwrap();
    m.handle(Input::Start { device: DEV, token }).unwrap();
    m
}

#[test]
fn an_undrained_queue_refuses_the_next_input_and_changes_nothing() {
    let mut m = starting_undrained(RequestToken(1));
    let before = m.clone();
    let needed = u16::try_from(M::DEVICE_INPUT_OUTPUTS).unwrap();
    assert_eq!(
        m.handle(Input::StartDone {
            device: DEV,
            result: StartResult::Started
        }),
        Err(Error::OutputBacklog { needed })
    );
    assert_eq!(m, before);
}

#[test]
fn a_client_with_too_many_callbacks_in_flight_blocks_notifying_inputs_until_they_return() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0),
    });
    let sent = flood_links_until_backlogged(&mut o);
    assert_eq!(sent, 254);
    // A non-notifying input still works; returning one callback unblocks.
    assert!(o.step(Input::Hold { client: c[0] }).0.is_ok());
    o.ok(Input::CallbackDone { client: c[0] });
    o.ok(Input::LinkChanged {
        device: DEV,
        port: P0,
        state: LINK_FLIPS[sent % 2],
    });
}

const LINK_FLIPS: [LinkState; 2] = [LinkState::Init, LinkState::Down];

/// Flip P0's link, never returning a callback, until the device refuses with
/// `CallbackBacklog`; return how many flips were accepted.
fn flood_links_until_backlogged(o: &mut Owner<1, 4, 2, { queue_capacity(1, 4) }>) -> usize {
    let mut sent = 0;
    loop {
        let (reply, _) = o.step(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LINK_FLIPS[sent % 2],
        });
        if reply == Err(Error::CallbackBacklog) {
            return sent;
        }
        reply.unwrap();
        sent += 1;
        assert!(sent < 300, "no backlog limit");
    }
}

#[test]
fn a_deadline_is_not_passed_while_a_client_it_would_notify_is_backlogged() {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0),
    });
    // The untrusted client asks: the cycle starts at tick 0, its deadline is 1 000.
    o.ok(Input::ResetRequest { client: c[1] });
    let deadline = Tick(Config::DEFAULT.untrusted_ack_timeout);
    assert_eq!(o.m.poll_timeout(), Some(deadline));
    flood_links_until_backlogged(&mut o);
    // Before the deadline time may pass; at it, revoking would notify a backlogged device.
    o.ok(Input::Tick {
        now: Tick(deadline.0 - 1),
    });
    o.refused(Input::Tick { now: deadline }, Error::CallbackBacklog);
    o.return_callbacks(DEV);
    let outputs = o.ok(Input::Tick { now: deadline });
    assert!(outputs.contains(&notify(c[1], Event::Revoked)));
}

#[test]
fn tick_and_unload_need_room_for_their_worst_case_and_change_nothing_without_it() {
    let mut m = starting_undrained(RequestToken(1));
    assert_eq!(m.pending_output_count(), 1);
    let before = m.clone();
    let needed = u16::try_from(M::DRIVER_INPUT_OUTPUTS).unwrap();
    for input in [Input::Tick { now: Tick(5) }, Input::Unload] {
        assert_eq!(m.handle(input), Err(Error::OutputBacklog { needed }));
        assert_eq!(m, before, "{input:?}");
    }
    assert_eq!(m.poll_output(), Some(hw(HardwareCommand::Start)));
    m.handle(Input::Tick { now: Tick(5) }).unwrap();
    assert_eq!(m.now(), Tick(5));
}

#[test]
fn the_queue_and_the_phase_can_be_inspected_without_changing_them() {
    let fresh = M::new(Config::DEFAULT);
    assert_eq!(fresh.phase_detail(DEV), Some(Phase::Absent));
    assert_eq!(fresh.phase_detail(DeviceId(1)), None);
    let mut m = starting_undrained(RequestToken(3));
    m.handle(Input::QueryStop {
        device: DEV,
        token: RequestToken(4),
    })
    .unwrap_err();
    assert_eq!(
        m.phase_detail(DEV),
        Some(Phase::Starting {
            token: RequestToken(3)
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
    let (a, epoch) = m.register(DEV, ClientKind::Trusted).unwrap();
    let (b, _) = m.register(DEV, ClientKind::Trusted).unwrap();
    assert_eq!(m.acquire_interface(a), Ok(epoch));
    assert_eq!(m.reset_request(a), Ok(ResetAnswer::Started));
    while m.poll_output().is_some() {}
    assert_eq!(m.reset_request(b), Ok(ResetAnswer::Joined));
    assert_eq!(m.unregister(b), Ok(Unregistered::Now));
    while m.poll_output().is_some() {}
    assert_eq!(m.unregister(b), Ok(Unregistered::Already));
    // Refusals pass through unchanged.
    assert_eq!(
        m.acquire_interface(a),
        Err(Error::InvalidState {
            phase: PhaseKind::Quiescing,
            input: InputKind::AcquireInterface
        })
    );
}

#[test]
fn a_slot_is_retired_when_its_generation_is_spent_so_no_handle_repeats() {
    let mut m: Lifecycle<1, 1, 1, { queue_capacity(1, 1) }> = Lifecycle::new(Config::DEFAULT);
    m.handle(Input::AddDevice { device: DEV }).unwrap();
    let mut issued = 0u32;
    let mut last = None;
    loop {
        match m.register(DEV, ClientKind::Untrusted) {
            Ok((client, _)) => {
                assert_eq!(u32::from(client.generation), issued);
                assert_eq!(m.unregister(client), Ok(Unregistered::Now));
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
    assert_eq!(m.unregister(last.unwrap()), Ok(Unregistered::Already));
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
fn errors_display_their_variant_and_fields() {
    assert_eq!(
        Error::OutputBacklog { needed: 9 }.to_string(),
        "OutputBacklog { needed: 9 }"
    );
    assert_eq!(Error::RegistryFull.to_string(), "RegistryFull");
}

#[test]
fn time_never_goes_backwards() {
    let mut o = owner();
    o.ok(Input::Tick { now: Tick(10) });
    o.refused(
        Input::Tick { now: Tick(9) },
        Error::TimeWentBackwards { last: Tick(10) },
    );
    o.ok(Input::Tick { now: Tick(10) });
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
    assert_eq!(o.m.binding_caps(forged), Err(Error::NoSuchDevice));
}

#[test]
fn a_client_slot_is_at_most_eight_bytes() {
    // The registry's per-client state, measured through the machine's size.
    let one = core::mem::size_of::<Lifecycle<1, 1, 2, { queue_capacity(1, 1) }>>();
    let two = core::mem::size_of::<Lifecycle<1, 2, 2, { queue_capacity(1, 2) }>>();
    let queue_growth = core::mem::size_of::<Output>() * 2; // queue_capacity grows by 2 a client
    assert!(
        two - one - queue_growth <= 8,
        "slot = {} bytes",
        two - one - queue_growth
    );
}
