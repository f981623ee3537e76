//! End-to-end scenarios, each asserting the exact output sequence.

mod common;
use common::*;
use pnp_lifecycle::*;

const UNTRUSTED_DEADLINE: u64 = Config::DEFAULT.untrusted_ack_timeout;

fn access(client: ClientHandle, epoch: u32) -> Input {
    Input::Access {
        client,
        epoch: Epoch(epoch),
        what: Access::HardwareOp,
    }
}

/// The WinOF mlx4 soft reset: two kernel clients and one user-space context that never
/// answers; one kernel client asks for the reset.
#[test]
fn winof_soft_reset_with_a_silent_user_space_client() {
    let mut o = owner();
    o.started(DEV, false);
    let ipoib = o.register(DEV, ClientKind::Trusted);
    let srp = o.register(DEV, ClientKind::Trusted);
    let uverbs = o.register(DEV, ClientKind::Untrusted);

    assert_eq!(
        o.step(Input::ResetRequest { client: ipoib }).0,
        Ok(Reply::Reset(ResetAnswer::Started))
    );
    assert_eq!(
        o.events.values().flatten().count(),
        3,
        "RESET to all three: {:?}",
        o.events
    );
    for c in [ipoib, srp, uverbs] {
        assert_eq!(o.events_of(c), vec![Event::Reset]);
        o.ok(Input::CallbackDone { client: c });
    }
    assert!(o.ok(Input::ResetExecute { client: ipoib }).is_empty());
    assert!(o.ok(Input::ResetExecute { client: srp }).is_empty());
    assert_eq!(o.m.poll_timeout(), Some(Tick(UNTRUSTED_DEADLINE)));
    // Before the deadline nothing happens; the hardware is not reset.
    assert!(o.timeout_at(UNTRUSTED_DEADLINE - 1).is_empty());
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    // At the deadline the silent context is revoked and the reset is commanded.
    assert_eq!(
        o.fire_timeout(),
        vec![notify(uverbs, Event::Revoked), hw(HardwareCommand::Reset)]
    );
    assert_eq!(o.now, Tick(UNTRUSTED_DEADLINE));
    o.ok(Input::CallbackDone { client: uverbs });
    assert_eq!(
        o.ok(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded
        }),
        vec![
            notify(ipoib, Event::ResetEnd { epoch: Epoch(1) }),
            notify(srp, Event::ResetEnd { epoch: Epoch(1) }),
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::Completed(Epoch(1))
            },
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Running);
    // User space keeps poking the hardware: fenced, with either epoch.
    o.refused(access(uverbs, 0), Error::ClientRevoked);
    o.refused(access(uverbs, 1), Error::ClientRevoked);
    // Stale handles are refused until the interface is re-acquired.
    o.refused(access(ipoib, 0), Error::StaleEpoch { current: Epoch(1) });
    o.refused(access(srp, 1), Error::StaleEpoch { current: Epoch(1) });
    assert_eq!(
        o.step(Input::AcquireInterface { client: ipoib }).0,
        Ok(Reply::Interface(Epoch(1)))
    );
    assert_eq!(o.step(access(ipoib, 1)).0, Ok(Reply::AccessGranted));
    o.refused(access(srp, 1), Error::StaleEpoch { current: Epoch(1) });
    o.refused(
        Input::AcquireInterface { client: uverbs },
        Error::ClientRevoked,
    );
    assert_eq!(o.events_of(uverbs), vec![Event::Reset, Event::Revoked]);
}

/// Driver unload while clients are quiescing: the cycle aborts, every client is told
/// `Removed`, and unload finishes exactly once, after the last callback comes back.
#[test]
fn driver_unload_while_clients_are_quiescing() {
    let mut o = owner();
    o.started(DEV, false);
    let a = o.register(DEV, ClientKind::Trusted);
    let b = o.register(DEV, ClientKind::Untrusted);
    assert_eq!(
        o.ok(Input::ResetRequest { client: a }),
        vec![notify(a, Event::Reset), notify(b, Event::Reset)]
    );
    // Both RESET callbacks return; a answers, b is still quiescing.
    assert!(o.ok(Input::CallbackDone { client: a }).is_empty());
    assert!(o.ok(Input::CallbackDone { client: b }).is_empty());
    o.ok(Input::ResetExecute { client: a });
    let t = o.token();
    o.at(100);
    assert_eq!(
        o.ok(Input::Unload),
        vec![
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::AbortedByRemove
            },
            notify(a, Event::Removed { surprise: false }),
            notify(b, Event::Removed { surprise: false }),
        ]
    );
    // The unload's removal is the one the PnP manager would send anyway: attaching its
    // request is allowed once.
    assert!(o
        .ok(Input::Remove {
            device: DEV,
            token: t
        })
        .is_empty());
    assert_eq!(
        o.events_of(a),
        vec![Event::Reset, Event::Removed { surprise: false }]
    );
    assert_eq!(
        o.events_of(b),
        vec![Event::Reset, Event::Removed { surprise: false }]
    );
    // b answers RESET late: the cycle is gone, nothing is commanded.
    o.refused(
        Input::ResetExecute { client: b },
        Error::InvalidState {
            phase: PhaseKind::Removing,
            input: InputKind::ResetExecute,
        },
    );
    // They detach while their Removed callbacks run: the slots wait for the returns.
    assert!(o.ok(Input::Unregister { client: a }).is_empty());
    assert!(o.ok(Input::Unregister { client: b }).is_empty());
    assert_eq!(
        o.ok(Input::CallbackDone { client: a }),
        vec![Output::ClientGone { client: a }]
    );
    // The last callback returns: everything finishes, unload exactly once, at the end.
    assert_eq!(
        o.ok(Input::CallbackDone { client: b }),
        vec![
            Output::ClientGone { client: b },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
            Output::UnloadMayFinish,
        ]
    );
    assert_eq!(o.m.driver_phase(), DriverPhase::Unloaded);
    assert_eq!(
        o.step(Input::CallbackDone { client: b }).0,
        Err(Error::Unloaded)
    );
}

/// The hardware vanishes while its reset executes: no RESET_END, no register touched,
/// the late reset report is absorbed, and remove releases only resources.
#[test]
fn surprise_removal_while_the_hardware_reset_executes() {
    let mut o = owner();
    o.started(DEV, false);
    let a = o.register(DEV, ClientKind::Trusted);
    o.ok(Input::ResetRequest { client: a });
    assert!(o.ok(Input::CallbackDone { client: a }).is_empty());
    assert_eq!(
        o.ok(Input::ResetExecute { client: a }),
        vec![hw(HardwareCommand::Reset)]
    );
    o.ok(Input::ResetRequest { client: a }); // a follow-up, scheduled
    assert_eq!(
        o.ok(Input::SurpriseRemoval { device: DEV }),
        vec![
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::AbortedBySurpriseRemoval
            },
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::AbortedBySurpriseRemoval
            },
            notify(a, Event::Removed { surprise: true }),
        ]
    );
    // The reset worker reports afterwards; whatever it says, nothing is commanded.
    assert!(o
        .ok(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded
        })
        .is_empty());
    assert_eq!(
        o.step(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded
        })
        .0,
        Err(Error::NoHardwareCommandInFlight)
    );
    o.return_callbacks(DEV);
    o.ok(Input::Unregister { client: a });
    let t = o.token();
    assert_eq!(
        o.ok(Input::Remove {
            device: DEV,
            token: t
        }),
        vec![
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
        ]
    );
    assert_eq!(o.m.epoch(DEV), Some(Epoch(0)), "no RESET_END, no new epoch");
    assert_eq!(
        o.events_of(a),
        vec![Event::Reset, Event::Removed { surprise: true }]
    );
}

/// Attach and read counters with every link down; then link changes arrive as events and
/// never change the device state.
#[test]
fn counters_with_the_link_down_then_link_events() {
    let mut o = owner();
    o.started(DEV, false);
    let c = o.register(DEV, ClientKind::Untrusted);
    o.ok(Input::Bind {
        client: c,
        ports: PortSet::single(P0),
    });
    assert_eq!(o.m.link(DEV, P0), Some(LinkState::Down));
    assert_eq!(
        o.step(Input::Access {
            client: c,
            epoch: Epoch(0),
            what: Access::QueryCounters(P0)
        })
        .0,
        Ok(Reply::AccessGranted)
    );
    let detail = o.m.phase_detail(DEV);
    let mut seen = Vec::new();
    for state in [
        LinkState::Init,
        LinkState::Armed,
        LinkState::Active,
        LinkState::Down,
    ] {
        seen.extend(o.ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state,
        }));
        assert_eq!(o.m.phase_detail(DEV), detail);
        // The owner returns each callback, so the next change is told at once.
        o.advance(10);
        assert!(o.ok(Input::CallbackDone { client: c }).is_empty());
    }
    // Port 1 is not bound: its changes reach nobody.
    seen.extend(o.ok(Input::LinkChanged {
        device: DEV,
        port: P1,
        state: LinkState::Active,
    }));
    assert_eq!(
        seen,
        [
            LinkState::Init,
            LinkState::Armed,
            LinkState::Active,
            LinkState::Down
        ]
        .map(|state| notify(c, Event::LinkChanged { port: P0, state }))
        .to_vec()
    );
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

/// A binding that mixes IB and RoCE is refused; capabilities are answered per binding.
#[test]
fn mixed_protocol_binding_refused_and_capabilities_per_binding() {
    let mut o = owner();
    o.started(DEV, true); // P0 InfiniBand, P1 RoCE
    let verbs = o.register(DEV, ClientKind::Trusted);
    let rdma_cm = o.register(DEV, ClientKind::Untrusted);
    let before = o.m.clone();
    o.refused(
        Input::Bind {
            client: verbs,
            ports: PortSet::single(P0).with(P1),
        },
        Error::MixedProtocols {
            first: Protocol::Ib,
            other: Protocol::Roce,
        },
    );
    assert_eq!(o.m, before);
    o.ok(Input::Bind {
        client: verbs,
        ports: PortSet::single(P0),
    });
    o.ok(Input::Bind {
        client: rdma_cm,
        ports: PortSet::single(P1),
    });
    assert_eq!(
        o.m.binding_caps(verbs),
        Ok(BindingCaps {
            protocol: Protocol::Ib,
            ports: PortSet::single(P0),
            max_mtu: IB.max_mtu,
            atomics: IB.atomics,
        })
    );
    assert_eq!(
        o.m.binding_caps(rdma_cm),
        Ok(BindingCaps {
            protocol: Protocol::Roce,
            ports: PortSet::single(P1),
            max_mtu: ROCE.max_mtu,
            atomics: ROCE.atomics,
        })
    );
}

// ---- issue 9: the findings, as their users met them ------------------------------------

/// Finding 1: an owner that wakes only at `poll_timeout()` and passes its clock with every
/// input never gets a client revoked early. A minute passes with nothing due; then a reset
/// is requested: its voters have their whole deadline from that moment.
#[test]
fn finding_1_a_correct_owner_never_gets_its_clients_revoked_early() {
    let mut o = owner();
    o.started(DEV, false);
    let kernel = o.register(DEV, ClientKind::Trusted);
    let user = o.register(DEV, ClientKind::Untrusted);
    assert_eq!(o.m.poll_timeout(), None, "nothing due: the owner sleeps");
    o.at(60_000);
    assert_eq!(
        o.step(Input::ResetRequest { client: kernel }),
        (
            Ok(Reply::Reset(ResetAnswer::Started)),
            vec![notify(kernel, Event::Reset), notify(user, Event::Reset)]
        )
    );
    assert_eq!(o.m.poll_timeout(), Some(Tick(60_000 + UNTRUSTED_DEADLINE)));
    o.at(60_001);
    assert!(o.ok(Input::CallbackDone { client: kernel }).is_empty());
    assert!(o.ok(Input::CallbackDone { client: user }).is_empty());
    o.at(60_400);
    assert!(o.ok(Input::ResetExecute { client: kernel }).is_empty());
    // An early wake-up (a shared timer) at 60 999 revokes nobody.
    assert!(o.timeout_at(60_999).is_empty());
    // The owner's timer fires when asked: the silent user-space context is revoked then,
    // one full deadline after the request, and the hardware reset follows.
    assert_eq!(
        o.fire_timeout(),
        vec![notify(user, Event::Revoked), hw(HardwareCommand::Reset)]
    );
    assert_eq!(o.now, Tick(61_000));
    assert!(o.ok(Input::CallbackDone { client: user }).is_empty());
    o.at(61_050);
    assert_eq!(
        o.ok(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded
        }),
        vec![
            notify(kernel, Event::ResetEnd { epoch: Epoch(1) }),
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::Completed(Epoch(1))
            },
        ]
    );
    assert_eq!(
        o.events_of(kernel),
        [Event::Reset, Event::ResetEnd { epoch: Epoch(1) }]
    );
    assert_eq!(o.events_of(user), [Event::Reset, Event::Revoked]);
}

/// Finding 2: a client whose callback never returns, with its links flapping and resets
/// requested far past the old limit of ~253 callbacks, makes the machine refuse nothing:
/// the time still reaches a silent voter on another device, surprise removal is taken, no
/// reset runs on the vanished device, and removal finishes once the stuck client is fenced.
#[test]
fn finding_2_a_stuck_client_never_makes_the_machine_refuse_the_os() {
    let d1 = DeviceId(1);
    let mut o: Owner<2, 4, 2, { queue_capacity(2, 4) }> = Owner::new(Config::DEFAULT);
    o.started(DEV, false);
    o.started(d1, false);
    let stuck = o.register(DEV, ClientKind::Trusted);
    let silent = o.register(d1, ClientKind::Untrusted);
    o.ok(Input::Bind {
        client: stuck,
        ports: PortSet::single(P0).with(P1),
    });
    assert_eq!(
        o.ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Init
        }),
        vec![notify(
            stuck,
            Event::LinkChanged {
                port: P0,
                state: LinkState::Init
            }
        )]
    );
    let flips = [LinkState::Down, LinkState::Init];
    for i in 0..600 {
        for port in [P0, P1] {
            assert!(o
                .ok(Input::LinkChanged {
                    device: DEV,
                    port,
                    state: flips[i % 2],
                })
                .is_empty());
        }
        // A catastrophic-error storm on the same device: one cycle serves them all.
        let answer = if i == 0 {
            ResetAnswer::Started
        } else {
            ResetAnswer::Joined
        };
        assert_eq!(
            o.step(Input::FatalError { device: DEV }),
            (Ok(Reply::Fatal(FatalAnswer::Served(answer))), vec![])
        );
    }
    let view = o.view(stuck);
    assert!(view.callback_in_flight);
    assert_eq!(view.waiting_events, 3, "RESET and one entry a port");
    // A silent voter on the other device is still revoked on time.
    o.at(10);
    assert_eq!(
        o.step(Input::FatalError { device: d1 }),
        (
            Ok(Reply::Fatal(FatalAnswer::Served(ResetAnswer::Started))),
            vec![notify(silent, Event::Reset)]
        )
    );
    assert!(o.ok(Input::CallbackDone { client: silent }).is_empty());
    assert_eq!(o.m.poll_timeout(), Some(Tick(10 + UNTRUSTED_DEADLINE)));
    assert_eq!(
        o.fire_timeout(),
        vec![
            notify(silent, Event::Revoked),
            Output::Hardware {
                device: d1,
                command: HardwareCommand::Reset
            }
        ]
    );
    assert!(o.ok(Input::CallbackDone { client: silent }).is_empty());
    // The hardware of device 0 vanishes: surprise removal is taken at once.
    o.at(2_000);
    assert_eq!(
        o.ok(Input::SurpriseRemoval { device: DEV }),
        vec![Output::ResetCycleFinished {
            device: DEV,
            outcome: CycleOutcome::AbortedBySurpriseRemoval
        }]
    );
    assert_eq!(o.phase(DEV), PhaseKind::SurpriseRemoved);
    // No reset of the vanished device, whatever asks for one.
    assert_eq!(
        o.step(Input::FatalError { device: DEV }),
        (
            Ok(Reply::Fatal(FatalAnswer::HardwareNotLive(
                PhaseKind::SurpriseRemoved
            ))),
            vec![]
        )
    );
    o.refused(
        Input::ResetRequest { client: stuck },
        Error::InvalidState {
            phase: PhaseKind::SurpriseRemoved,
            input: InputKind::ResetRequest,
        },
    );
    // Remove follows; it waits for the stuck client, with a deadline.
    let t = o.token();
    assert!(o
        .ok(Input::Remove {
            device: DEV,
            token: t
        })
        .is_empty());
    assert_eq!(o.phase(DEV), PhaseKind::Removing);
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(Config::DEFAULT.callback_timeout))
    );
    assert_eq!(o.fire_timeout(), vec![Output::Fence { client: stuck }]);
    assert_eq!(
        o.ok(Input::FenceDone { client: stuck }),
        vec![
            Output::ClientGone { client: stuck },
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
        ]
    );
    assert_eq!(o.events_of(stuck).len(), 1, "one callback, never returned");
    // The other device went on with its reset.
    assert_eq!(o.phase(d1), PhaseKind::Executing);
}

/// Finding 3: a callback that never returns no longer blocks remove and driver unload:
/// its deadline revokes the client and asks the owner to fence it; once the owner reports
/// the fence, removal and unload finish without it.
#[test]
fn finding_3_a_callback_that_never_returns_does_not_block_remove_or_unload() {
    let mut o = owner();
    o.started(DEV, false);
    let stuck = o.register(DEV, ClientKind::Trusted);
    o.ok(Input::Bind {
        client: stuck,
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
        vec![notify(stuck, active)]
    );
    o.at(1_000);
    let t = o.token();
    assert!(o
        .ok(Input::Remove {
            device: DEV,
            token: t
        })
        .is_empty());
    assert!(o.ok(Input::Unload).is_empty());
    assert_eq!(o.m.driver_phase(), DriverPhase::Unloading);
    // The machine waits on the stuck callback, and says until when.
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(Config::DEFAULT.callback_timeout))
    );
    assert_eq!(o.fire_timeout(), vec![Output::Fence { client: stuck }]);
    // Now it waits only on the owner's fence.
    assert_eq!(o.m.poll_timeout(), None);
    assert_eq!(o.phase(DEV), PhaseKind::Removing);
    assert_eq!(
        o.ok(Input::FenceDone { client: stuck }),
        vec![
            Output::ClientGone { client: stuck },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
            Output::UnloadMayFinish,
        ]
    );
    assert_eq!(o.events_of(stuck), vec![active]);
    assert_eq!(o.m.driver_phase(), DriverPhase::Unloaded);
}

/// Finding 4: a catastrophic error during a start, a pending stop or a pending remove is
/// never lost: it is held and served by a cycle once the device runs, or folded into the
/// stop or removal, and a `ResetCycleFinished` answers it either way.
#[test]
fn finding_4_a_fatal_error_while_starting_or_stop_or_remove_pending_is_never_lost() {
    let deferred = (Ok(Reply::Fatal(FatalAnswer::Deferred)), vec![]);
    // During start: served by a cycle once the start succeeds.
    let mut o = owner();
    o.ok(Input::AddDevice { device: DEV });
    let c = o.register(DEV, ClientKind::Trusted);
    let t = o.token();
    assert_eq!(
        o.ok(Input::Start {
            device: DEV,
            token: t
        }),
        vec![hw(HardwareCommand::Start)]
    );
    assert_eq!(o.step(Input::FatalError { device: DEV }), deferred);
    assert_eq!(
        o.ok(Input::StartDone {
            device: DEV,
            result: StartResult::Started
        }),
        vec![
            complete(t, Status::Success),
            notify(c, Event::DeviceStarted { epoch: Epoch(0) }),
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    assert_eq!(
        o.ok(Input::CallbackDone { client: c }),
        vec![notify(c, Event::Reset)]
    );
    assert_eq!(
        o.ok(Input::ResetExecute { client: c }),
        vec![hw(HardwareCommand::Reset)]
    );
    assert_eq!(
        o.ok(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded
        }),
        vec![Output::ResetCycleFinished {
            device: DEV,
            outcome: CycleOutcome::Completed(Epoch(1))
        }]
    );
    assert_eq!(
        o.ok(Input::CallbackDone { client: c }),
        vec![notify(c, Event::ResetEnd { epoch: Epoch(1) })]
    );

    // During a pending stop: folded into the stop.
    let mut o = owner();
    o.started(DEV, false);
    let c = o.register(DEV, ClientKind::Trusted);
    let t = o.token();
    o.ok(Input::QueryStop {
        device: DEV,
        token: t,
    });
    assert_eq!(o.step(Input::FatalError { device: DEV }), deferred);
    let t = o.token();
    assert_eq!(
        o.ok(Input::Stop {
            device: DEV,
            token: t
        }),
        vec![
            notify(c, Event::DeviceStopped),
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::FoldedIntoStop
            },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
        ]
    );

    // During a pending remove: cancel remove serves it with a cycle...
    let mut o = owner();
    o.started(DEV, false);
    let c = o.register(DEV, ClientKind::Trusted);
    let t = o.token();
    o.ok(Input::QueryRemove {
        device: DEV,
        token: t,
    });
    assert_eq!(o.step(Input::FatalError { device: DEV }), deferred);
    let t = o.token();
    assert_eq!(
        o.ok(Input::CancelRemove {
            device: DEV,
            token: t
        }),
        vec![complete(t, Status::Success), notify(c, Event::Reset)]
    );
    assert!(o.ok(Input::CallbackDone { client: c }).is_empty());
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
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::Completed(Epoch(1))
            },
        ]
    );
    // ...and the removal absorbs it.
    let mut o = owner();
    o.started(DEV, false);
    let c = o.register(DEV, ClientKind::Trusted);
    let t = o.token();
    o.ok(Input::QueryRemove {
        device: DEV,
        token: t,
    });
    assert_eq!(o.step(Input::FatalError { device: DEV }), deferred);
    let t = o.token();
    assert_eq!(
        o.ok(Input::Remove {
            device: DEV,
            token: t
        }),
        vec![
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::AbortedByRemove
            },
            notify(c, Event::Removed { surprise: false }),
        ]
    );
}

/// Finding 5 (I4 as revised): after a failed hardware reset a client told `RESET` is told
/// the device is fatal, which answers its `RESET`; only `Removed` follows.
#[test]
fn finding_5_a_failed_reset_answers_reset_with_device_fatal() {
    let mut o = owner();
    o.started(DEV, false);
    let ipoib = o.register(DEV, ClientKind::Trusted);
    let uverbs = o.register(DEV, ClientKind::Untrusted);
    assert_eq!(
        o.ok(Input::ResetRequest { client: ipoib }),
        vec![notify(ipoib, Event::Reset), notify(uverbs, Event::Reset)]
    );
    for c in [ipoib, uverbs] {
        assert!(o.ok(Input::CallbackDone { client: c }).is_empty());
    }
    assert!(o.ok(Input::ResetExecute { client: ipoib }).is_empty());
    assert_eq!(
        o.ok(Input::ResetExecute { client: uverbs }),
        vec![hw(HardwareCommand::Reset)]
    );
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
            notify(ipoib, Event::DeviceFatal),
            notify(uverbs, Event::DeviceFatal),
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::HardwareFailed
            },
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Failed);
    for c in [ipoib, uverbs] {
        assert!(o.ok(Input::CallbackDone { client: c }).is_empty());
    }
    let t = o.token();
    assert_eq!(
        o.ok(Input::Remove {
            device: DEV,
            token: t
        }),
        vec![
            notify(ipoib, Event::Removed { surprise: false }),
            notify(uverbs, Event::Removed { surprise: false }),
        ]
    );
    for c in [ipoib, uverbs] {
        assert!(o.ok(Input::CallbackDone { client: c }).is_empty());
        assert_eq!(
            o.events_of(c),
            [
                Event::Reset,
                Event::DeviceFatal,
                Event::Removed { surprise: false }
            ]
        );
    }
    assert_eq!(
        o.ok(Input::Unregister { client: ipoib }),
        vec![Output::ClientGone { client: ipoib }]
    );
    assert_eq!(
        o.ok(Input::Unregister { client: uverbs }),
        vec![
            Output::ClientGone { client: uverbs },
            hw(HardwareCommand::ReleaseResources),
            complete(t, Status::Success),
            Output::DeviceRemoved { device: DEV },
        ]
    );
}

/// Issue 10, finding 1, on the core: a client's granted hardware operation runs for
/// 300 ms; query stop and stop arrive meanwhile. The stop is accepted but nothing touches
/// the hardware until the operation reports done; then shutdown, release and the stop's
/// completion, in that order.
#[test]
fn finding_10_1_the_hardware_is_not_stopped_under_a_running_operation() {
    let mut o = owner();
    o.started(DEV, false);
    let verbs = o.register(DEV, ClientKind::Trusted);
    o.at(1_000);
    assert_eq!(o.step(access(verbs, 0)), (Ok(Reply::AccessGranted), vec![]));
    o.at(1_050);
    let query = o.token();
    assert_eq!(
        o.ok(Input::QueryStop {
            device: DEV,
            token: query
        }),
        vec![complete(query, Status::Success)]
    );
    let stop = o.token();
    assert_eq!(
        o.ok(Input::Stop {
            device: DEV,
            token: stop
        }),
        vec![notify(verbs, Event::DeviceStopped)]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Stopping);
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(1_050 + Config::DEFAULT.operation_timeout))
    );
    o.at(1_100);
    assert_eq!(o.ok(Input::CallbackDone { client: verbs }), vec![]);
    o.at(1_300);
    assert_eq!(
        o.ok(Input::AccessDone { client: verbs }),
        vec![
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(stop, Status::Success),
        ]
    );
    assert_eq!(o.phase(DEV), PhaseKind::Stopped);
    // The restart brings the client back without a reset cycle.
    let start = o.token();
    assert_eq!(
        o.ok(Input::Start {
            device: DEV,
            token: start
        }),
        vec![hw(HardwareCommand::Start)]
    );
    assert_eq!(
        o.ok(Input::StartDone {
            device: DEV,
            result: StartResult::Started
        }),
        vec![
            complete(start, Status::Success),
            notify(verbs, Event::DeviceStarted { epoch: Epoch(0) }),
        ]
    );
}

/// Issue 10, finding 2, on the core: an untrusted voter is granted a hardware access
/// while quiescing and then goes silent. Its deadline revokes it and asks the owner to
/// fence it, and the hardware reset is commanded only after the owner reports the fence.
#[test]
fn finding_10_2_the_hardware_is_not_reset_under_a_revoked_clients_operation() {
    let mut o = owner();
    o.started(DEV, false);
    let ipoib = o.register(DEV, ClientKind::Trusted);
    let uverbs = o.register(DEV, ClientKind::Untrusted);
    o.at(10);
    assert_eq!(
        o.ok(Input::ResetRequest { client: ipoib }),
        vec![notify(ipoib, Event::Reset), notify(uverbs, Event::Reset)]
    );
    o.at(11);
    assert_eq!(o.ok(Input::CallbackDone { client: ipoib }), vec![]);
    assert_eq!(o.ok(Input::CallbackDone { client: uverbs }), vec![]);
    o.at(12);
    // A voter may still use the hardware until it answers.
    assert_eq!(
        o.step(access(uverbs, 0)),
        (Ok(Reply::AccessGranted), vec![])
    );
    o.at(13);
    assert_eq!(o.ok(Input::ResetExecute { client: ipoib }), vec![]);
    assert_eq!(o.m.poll_timeout(), Some(Tick(10 + UNTRUSTED_DEADLINE)));
    assert_eq!(
        o.fire_timeout(),
        vec![Output::Fence { client: uverbs }],
        "revoked and fenced; no reset while its operation may still run"
    );
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    assert_eq!(
        o.m.poll_timeout(),
        None,
        "the fence is the owner's to report"
    );
    o.at(10 + UNTRUSTED_DEADLINE + 40);
    assert_eq!(
        o.ok(Input::FenceDone { client: uverbs }),
        vec![hw(HardwareCommand::Reset)]
    );
    assert_eq!(
        o.ok(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded
        }),
        vec![
            notify(ipoib, Event::ResetEnd { epoch: Epoch(1) }),
            finished(CycleOutcome::Completed(Epoch(1))),
        ]
    );
    o.refused(access(uverbs, 1), Error::ClientRevoked);
    assert_eq!(o.events_of(uverbs), vec![Event::Reset]);
}

/// Power: an HCA idles out (runtime suspend); a kernel client's post wakes it. Later the
/// system sleeps: user space is refused by name; on resume the hardware lost its state,
/// which ends like a completed reset (epoch 1, both clients re-acquire).
#[test]
fn idle_power_down_woken_by_an_access_then_system_sleep_resumed_with_lost_state() {
    let mut o = owner();
    o.started(DEV, false);
    let ipoib = o.register(DEV, ClientKind::Trusted);
    let uverbs = o.register(DEV, ClientKind::Untrusted);
    let idle = Event::Suspending {
        kind: PowerDownKind::Idle,
    };
    assert_eq!(
        o.ok(Input::PowerDown {
            device: DEV,
            kind: PowerDownKind::Idle,
            token: RequestToken(10),
        }),
        vec![
            notify(ipoib, idle),
            notify(uverbs, idle),
            hw(HardwareCommand::PowerDown)
        ]
    );
    o.return_callbacks(DEV);
    assert_eq!(
        o.ok(Input::PowerDownDone { device: DEV }),
        vec![complete(RequestToken(10), Status::Success)]
    );
    // IPoIB posts a send: not granted, the device comes back for it.
    assert_eq!(
        o.step(access(ipoib, 0)),
        (
            Ok(Reply::AccessWaitsForPowerUp),
            vec![hw(HardwareCommand::PowerUp)]
        )
    );
    let back = Event::Resumed {
        epoch: Epoch(0),
        state_lost: false,
    };
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::Powered
        }),
        vec![notify(ipoib, back), notify(uverbs, back)]
    );
    o.return_callbacks(DEV);
    assert_eq!(o.step(access(ipoib, 0)).0, Ok(Reply::AccessGranted));
    o.ok(Input::AccessDone { client: ipoib });

    // System sleep: the same orderly power-down; user space is refused, not woken.
    let sleep = Event::Suspending {
        kind: PowerDownKind::SystemSleep,
    };
    assert_eq!(
        o.ok(Input::PowerDown {
            device: DEV,
            kind: PowerDownKind::SystemSleep,
            token: RequestToken(11),
        }),
        vec![
            notify(ipoib, sleep),
            notify(uverbs, sleep),
            hw(HardwareCommand::PowerDown)
        ]
    );
    o.return_callbacks(DEV);
    o.ok(Input::PowerDownDone { device: DEV });
    o.refused(
        access(uverbs, 0),
        Error::Suspended {
            kind: PowerDownKind::SystemSleep,
        },
    );
    // Resume: the HCA lost its state (its firmware reloaded).
    assert_eq!(
        o.ok(Input::PowerUp {
            device: DEV,
            token: RequestToken(12)
        }),
        vec![hw(HardwareCommand::PowerUp)]
    );
    let lost = Event::Resumed {
        epoch: Epoch(1),
        state_lost: true,
    };
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::LostState
        }),
        vec![
            complete(RequestToken(12), Status::Success),
            notify(ipoib, lost),
            notify(uverbs, lost)
        ]
    );
    o.return_callbacks(DEV);
    o.refused(access(uverbs, 0), Error::StaleEpoch { current: Epoch(1) });
    o.ok(Input::AcquireInterface { client: uverbs });
    assert_eq!(o.step(access(uverbs, 1)).0, Ok(Reply::AccessGranted));
    assert_eq!(
        o.events_of(ipoib),
        vec![idle, back, sleep, lost],
        "every Suspending answered by Resumed"
    );
}

/// Power meets resets and removal: a system sleep arrives during a reset cycle and waits
/// for it; in Dx a client asks for a reset (served after the power-up); then the hardware
/// vanishes: the reset is answered, nothing is touched, the remove only releases.
#[test]
fn system_sleep_waits_for_a_reset_cycle_then_the_hardware_vanishes_in_dx() {
    let mut o = owner();
    o.started(DEV, false);
    let verbs = o.register(DEV, ClientKind::Trusted);
    assert_eq!(
        o.ok(Input::ResetRequest { client: verbs }),
        vec![notify(verbs, Event::Reset)]
    );
    // The sleep waits: nobody is told, nothing is commanded.
    assert_eq!(
        o.ok(Input::PowerDown {
            device: DEV,
            kind: PowerDownKind::SystemSleep,
            token: RequestToken(20),
        }),
        vec![]
    );
    o.ok(Input::CallbackDone { client: verbs });
    assert_eq!(
        o.ok(Input::ResetExecute { client: verbs }),
        vec![hw(HardwareCommand::Reset)]
    );
    let sleep = Event::Suspending {
        kind: PowerDownKind::SystemSleep,
    };
    assert_eq!(
        o.ok(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded
        }),
        vec![
            notify(verbs, Event::ResetEnd { epoch: Epoch(1) }),
            finished(CycleOutcome::Completed(Epoch(1))),
            hw(HardwareCommand::PowerDown),
        ]
    );
    assert_eq!(
        o.ok(Input::CallbackDone { client: verbs }),
        vec![notify(verbs, sleep)]
    );
    o.ok(Input::CallbackDone { client: verbs });
    assert_eq!(
        o.ok(Input::PowerDownDone { device: DEV }),
        vec![complete(RequestToken(20), Status::Success)]
    );
    // In Dx: the reset request waits for the power-up.
    o.ok(Input::AcquireInterface { client: verbs });
    assert_eq!(
        o.step(Input::ResetRequest { client: verbs }),
        (Ok(Reply::Reset(ResetAnswer::AfterPowerUp)), vec![])
    );
    // The hardware vanishes while asleep.
    assert_eq!(
        o.ok(Input::SurpriseRemoval { device: DEV }),
        vec![
            finished(CycleOutcome::AbortedBySurpriseRemoval),
            notify(verbs, Event::Removed { surprise: true })
        ]
    );
    o.ok(Input::CallbackDone { client: verbs });
    o.ok(Input::Unregister { client: verbs });
    assert_eq!(
        o.ok(Input::Remove {
            device: DEV,
            token: RequestToken(21)
        }),
        vec![
            hw(HardwareCommand::ReleaseResources),
            complete(RequestToken(21), Status::Success),
            Output::DeviceRemoved { device: DEV }
        ]
    );
    assert_eq!(
        o.events_of(verbs),
        vec![
            Event::Reset,
            Event::ResetEnd { epoch: Epoch(1) },
            sleep,
            Event::Removed { surprise: true }
        ]
    );
}

#[test]
fn a_recovery_told_late_is_followed_by_the_epoch_a_lost_state_power_up_reached() {
    // Found by the fuzz smoke in CI: a client answers CAN_RECOVER from inside its RESET
    // callback while a system sleep waits for the cycle; the cycle ends without a reset,
    // but its `Recovered{0}` waits behind the running callback while the device sleeps and
    // comes back having lost its state (epoch 1). The client hears both, in order.
    let mut o = owner();
    o.started(DEV, false);
    let verbs = o.register(DEV, ClientKind::Untrusted);
    assert_eq!(
        o.ok(Input::ResetRequest { client: verbs }),
        vec![notify(verbs, Event::Reset)]
    );
    let sleep = RequestToken(30);
    assert_eq!(
        o.ok(Input::PowerDown {
            device: DEV,
            kind: PowerDownKind::SystemSleep,
            token: sleep,
        }),
        vec![]
    );
    // Still inside its RESET callback: the news waits, the sleep goes ahead.
    assert_eq!(
        o.ok(Input::CanRecover { client: verbs }),
        vec![
            finished(CycleOutcome::Recovered(Epoch(0))),
            hw(HardwareCommand::PowerDown)
        ]
    );
    assert_eq!(
        o.ok(Input::PowerDownDone { device: DEV }),
        vec![complete(sleep, Status::Success)]
    );
    let wake = RequestToken(31);
    assert_eq!(
        o.ok(Input::PowerUp {
            device: DEV,
            token: wake
        }),
        vec![hw(HardwareCommand::PowerUp)]
    );
    assert_eq!(
        o.ok(Input::PowerUpDone {
            device: DEV,
            result: PowerUpResult::LostState
        }),
        vec![complete(wake, Status::Success)]
    );
    // The late news first, then where the device is now.
    assert_eq!(
        o.ok(Input::CallbackDone { client: verbs }),
        vec![notify(verbs, Event::Recovered { epoch: Epoch(0) })]
    );
    let back = Event::Resumed {
        epoch: Epoch(1),
        state_lost: true,
    };
    assert_eq!(
        o.ok(Input::CallbackDone { client: verbs }),
        vec![notify(verbs, back)]
    );
    // The interface the recovery kept is stale: the hardware is never reached with it.
    o.refused(access(verbs, 0), Error::StaleEpoch { current: Epoch(1) });
    assert_eq!(
        o.events_of(verbs),
        vec![Event::Reset, Event::Recovered { epoch: Epoch(0) }, back]
    );
}

/// C1 (DESIGN r3, "A deadline runs only while the client can act"): a voter whose `RESET`
/// waited behind its own earlier callback gets its whole answer deadline counted from the
/// moment `RESET` is delivered, not from the start of the cycle.
#[test]
fn a_reset_held_behind_a_callback_gets_its_whole_deadline_from_delivery() {
    let mut o = owner();
    o.started(DEV, false);
    let slow = o.register(DEV, ClientKind::Untrusted);
    let asker = o.register(DEV, ClientKind::Untrusted);
    o.ok(Input::Bind {
        client: slow,
        ports: PortSet::single(P0),
    });
    // The slow client's link callback begins at 0 and returns within its own deadline.
    assert_eq!(
        o.ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Active
        }),
        vec![notify(
            slow,
            Event::LinkChanged {
                port: P0,
                state: LinkState::Active
            }
        )]
    );
    o.at(1);
    assert_eq!(
        o.ok(Input::ResetRequest { client: asker }),
        vec![notify(asker, Event::Reset)]
    );
    o.ok(Input::CallbackDone { client: asker });
    o.ok(Input::ResetExecute { client: asker });
    // RESET reaches the slow client one tick after its cycle-start deadline had passed.
    o.at(1 + UNTRUSTED_DEADLINE + 1);
    assert_eq!(
        o.ok(Input::CallbackDone { client: slow }),
        vec![notify(slow, Event::Reset)]
    );
    let delivered = o.now.0;
    assert_eq!(
        o.m.poll_timeout(),
        Some(Tick(delivered + UNTRUSTED_DEADLINE))
    );
    assert!(o.timeout().is_empty(), "not revoked at delivery");
    o.ok(Input::CallbackDone { client: slow });
    assert!(o.timeout_at(delivered + UNTRUSTED_DEADLINE - 1).is_empty());
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    // Its whole deadline after delivery, it is revoked and the reset runs.
    assert_eq!(
        o.fire_timeout(),
        vec![notify(slow, Event::Revoked), hw(HardwareCommand::Reset)]
    );
    assert_eq!(o.now, Tick(delivered + UNTRUSTED_DEADLINE));
}

/// C2 (DESIGN r3): no deadline is cut short because the clock is near the end of its
/// range. A `RESET` delivered at `u64::MAX - 3` with a 10-tick answer time ends beyond the
/// clock's range: it is carried exactly, so nothing is revoked at `u64::MAX` (saturated,
/// it was revoked after 3 ticks) and the voter can still answer.
#[test]
fn a_deadline_beyond_the_clocks_range_is_never_cut_short() {
    let config = Config {
        untrusted_ack_timeout: 10,
        ..Config::DEFAULT
    };
    let mut o: Owner<1, 4, 2, { queue_capacity(1, 4) }> = Owner::new(config);
    o.started(DEV, false);
    let voter = o.register(DEV, ClientKind::Untrusted);
    o.at(u64::MAX - 3);
    assert_eq!(
        o.ok(Input::ResetRequest { client: voter }),
        vec![notify(voter, Event::Reset)]
    );
    o.ok(Input::CallbackDone { client: voter });
    assert_eq!(o.m.poll_timeout(), None, "no deadline the clock can reach");
    assert!(o.timeout_at(u64::MAX).is_empty());
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    assert_eq!(
        o.ok(Input::ResetExecute { client: voter }),
        vec![hw(HardwareCommand::Reset)]
    );
}
