//! DESIGN "The reset cycle": requested → quiescing → executing → ended → started.
//! Coalescing, the votes, the epoch, every `RESET` answered (I4), remove during a cycle, a
//! failed reset, fatal errors, recovery without a reset.

use crate::support::*;

/// Let a cycle run to its end: every callback returned, every voter answers, the
/// hardware reset succeeds. Returns every output.
fn finish_cycle(o: &mut O) -> Vec<Output> {
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
fn running_one() -> (O, ClientHandle) {
    let (o, c) = running_with(&[ClientKind::Trusted]);
    (o, c[0])
}

/// Reach a recovery cycle in which the first voter said it can recover and the second
/// has not answered yet.
fn recovering() -> (O, Vec<ClientHandle>) {
    let (mut o, c) = running_with(&[ClientKind::Trusted, ClientKind::Untrusted]);
    let _ = fatal(&mut o);
    o.return_callbacks(DEV);
    o.ok(Input::CanRecover { client: c[0] });
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    (o, c)
}

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

/// I4: a failed reset's `DeviceFatal` answers `RESET`; after it only `Removed`/`Revoked`
/// follow.
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
    // The oracle of I4, over every client's events.
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

/// I4: after `DeviceFatal` only `Removed` or `Revoked` reach a client, not
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

/// Unload during executing, like remove, waits for the hardware reset to finish, then
/// removes: no teardown under a running reset, and clients get `Removed`, not `RESET_END`.
#[test]
fn unload_during_executing_waits_for_the_hardware_then_removes() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::ResetRequest { client: c[0] });
    o.return_callbacks(DEV);
    assert_eq!(
        o.ok(Input::ResetExecute { client: c[0] }),
        vec![hw(HardwareCommand::Reset)]
    );
    assert_eq!(o.ok(Input::Unload), vec![]);
    assert_eq!(o.phase(DEV), PhaseKind::Executing);
    assert_eq!(o.m.driver_phase(), DriverPhase::Unloading);
    let out = o.ok(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    });
    assert_eq!(
        out,
        vec![
            finished(CycleOutcome::AbortedByRemove),
            notify(c[0], Event::Removed { surprise: false }),
        ]
    );
    o.return_callbacks(DEV);
    assert_eq!(
        o.ok(Input::Unregister { client: c[0] }),
        vec![
            Output::ClientGone { client: c[0] },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            Output::DeviceRemoved { device: DEV },
            Output::UnloadMayFinish,
        ]
    );
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

/// DESIGN "The reset cycle": a fatal error is never lost. Where the hardware is live it is
/// served by a cycle as soon as the state allows or folded into the stop or removal under
/// way, answered by a `ResetCycleFinished` either way; where it is not live it is answered
/// with the phase.
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
    type Then = fn(&mut O) -> Vec<Output>;
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

/// DESIGN "The reset cycle" and I8: a reset that was asked for is not skipped because its
/// voters were revoked: nobody said it could recover, so it must not end `Recovered`.
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
