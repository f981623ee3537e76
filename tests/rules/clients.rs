//! DESIGN "Clients": the registry and its handles, trusted and untrusted deadlines,
//! registering, unregistering, callback deadlines and fences, a deadline that runs only
//! while the client can act, no client making the machine refuse the OS, open handles and
//! vetoes. (Hardware operations bracketed: `operations`.)

use crate::support::*;

const LINK_FLIPS: [LinkState; 2] = [LinkState::Init, LinkState::Down];

/// Flip P0's link `n` times, never returning a callback; every flip must be accepted.
/// Return every output.
fn flood_links(o: &mut O, n: usize) -> Vec<Output> {
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
    let mut o: O = Owner::new(config);
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

/// DESIGN "Clients": a trusted client whose callback overruns meets the configured
/// policy; under `FailDevice` the device fails while it runs or a cycle quiesces (and the
/// cycle ends timed out); in any other state the client is revoked and fenced.
#[test]
fn trusted_callback_overrun_under_fail_device_fails_the_device() {
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
    // Outside running and quiescing an OS request already decides the device's next
    // state (here a pending query stop): the trusted overrun is revoked and fenced, and
    // the device waits for the OS as before.
    let mut o: O = Owner::new(config);
    o.started(DEV, false);
    let stuck = o.register(DEV, ClientKind::Trusted);
    o.ok(Input::Bind {
        client: stuck,
        ports: PortSet::single(P0),
    });
    o.ok(Input::LinkChanged {
        device: DEV,
        port: P0,
        state: LinkState::Active,
    });
    o.ok(Input::QueryStop {
        device: DEV,
        token: RequestToken(7),
    });
    assert_eq!(o.m.poll_timeout(), Some(due));
    assert_eq!(o.fire_timeout(), vec![Output::Fence { client: stuck }]);
    assert_eq!(o.phase(DEV), PhaseKind::StopPending);
}

/// DESIGN "Clients" and I9: remove and unload finish without a client whose callback
/// never returns, once the owner reports its fence. While the
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
    let mut o: O = Owner::new(config);
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

/// I11: no client behaviour makes the machine refuse surprise removal, remove, unload,
/// the time, a hardware completion or a fatal error. Per-client
/// bookkeeping stays bounded whatever the client does.
#[test]
fn a_stuck_callback_never_makes_the_machine_refuse_surprise_removal_remove_or_unload() {
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

#[test]
fn a_client_that_never_returns_a_callback_holds_one_event_a_port_and_blocks_no_input() {
    let (mut o, c) = running_with(&[ClientKind::Trusted]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0),
    });
    // A thousand changes, more than any queue holds: nothing is refused.
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

/// The registry's per-client state, measured through the machine's size: the bounded
/// mailbox (three ordered events, a bit a port, a last event), when its callback was
/// handed over and when its `RESET` was delivered, the count of hardware operations in
/// flight, the fence and cannot-pause flags, and the fast-path gate (open, or closing
/// since a tick). Pinned so that growth is a decision, not an accident.
const SLOT_BYTES: usize = 104;

#[test]
fn a_client_slot_is_at_most_its_documented_size() {
    let one = core::mem::size_of::<Lifecycle<1, 1, 2, { queue_capacity(1, 1) }>>();
    let two = core::mem::size_of::<Lifecycle<1, 2, 2, { queue_capacity(1, 2) }>>();
    let queue_growth = core::mem::size_of::<Output>() * 2; // queue_capacity grows by 2 a client
    let slot = two - one - queue_growth;
    assert!(slot <= SLOT_BYTES, "slot = {slot} bytes");
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
