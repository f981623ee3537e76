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
    assert!(o
        .ok(Input::Tick {
            now: Tick(UNTRUSTED_DEADLINE - 1)
        })
        .is_empty());
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
    // At the deadline the silent context is revoked and the reset is commanded.
    assert_eq!(
        o.ok(Input::Tick {
            now: Tick(UNTRUSTED_DEADLINE)
        }),
        vec![notify(uverbs, Event::Revoked), hw(HardwareCommand::Reset)]
    );
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
    o.ok(Input::ResetRequest { client: a });
    o.ok(Input::ResetExecute { client: a });
    let t = o.token();
    o.ok(Input::Unload);
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
    assert!(o.ok(Input::Unregister { client: a }).is_empty());
    assert!(o.ok(Input::Unregister { client: b }).is_empty());
    assert!(o.ok(Input::CallbackDone { client: a }).is_empty()); // RESET
    assert_eq!(
        o.ok(Input::CallbackDone { client: a }),
        vec![Output::ClientGone { client: a }]
    ); // Removed
    assert!(o.ok(Input::CallbackDone { client: b }).is_empty()); // RESET
                                                                 // The last callback token: everything finishes, unload exactly once, at the end.
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
