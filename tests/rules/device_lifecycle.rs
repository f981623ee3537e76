//! DESIGN "Device lifecycle (Windows PnP vocabulary)": query remove and its veto, surprise
//! removal, remove after a failed start, stop and restart, remove completion, unload as a
//! fence. (Every request in every state: `tests/state_matrix.rs`.)

use crate::support::*;

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
    let setups: [fn(&mut O); 4] = [
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

/// DESIGN "Device lifecycle": surprise removal touches nothing, so it waits
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
