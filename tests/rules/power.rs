//! DESIGN "Power (device low-power states and system sleep)": orderly power-down and
//! power-up, nothing touched in Dx, power and resets, removal in any power state, asking
//! changes nothing, failed power-up; I14.

use crate::support::*;

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
