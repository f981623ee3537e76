//! The typed methods users call (`m.start(..)`, `m.reset_execute(..)`), not `Input`
//! through `handle`: each one has its effect (cargo-mutants found twelve that could be
//! replaced by `Ok(())` unnoticed), random walks fed through them alone keep every rule
//! and match the reference model, and the output bound holds at the worst input seen.

use arbitrary::Unstructured;
use pnp_lifecycle::*;
use pnp_lifecycle_testkit::gen::{small_config, Generator};
use pnp_lifecycle_testkit::rng::SplitMix;
use pnp_lifecycle_testkit::{Fuzz, Sut, World};

const HCA: DeviceId = DeviceId(0);
const P0: PhysPort = PhysPort(0);
const P1: PhysPort = PhysPort(1);

/// One device, 8 client slots, 2 ports: enough clients that the output bound's per-client
/// term dominates its constant.
type M = Lifecycle<1, 8, 2, { queue_capacity(1, 8) }>;

fn drained(m: &mut M) -> Vec<Output> {
    let mut seen = Vec::new();
    let _ = m.drain(|o| seen.push(o));
    seen
}

fn notify(client: ClientHandle, event: Event) -> Output {
    Output::Notify { client, event }
}

fn hw(command: HardwareCommand) -> Output {
    Output::Hardware {
        device: HCA,
        command,
    }
}

fn complete(token: u32, status: Status) -> Output {
    Output::Complete {
        device: HCA,
        token: RequestToken(token),
        status,
    }
}

fn ib() -> PortCaps {
    PortCaps {
        protocol: Protocol::Ib,
        max_mtu: 4096,
        atomics: true,
    }
}

/// A running device with both ports configured and `n` clients, each callback returned.
fn running(n: usize, kind: ClientKind) -> (M, Vec<ClientHandle>) {
    let mut m = M::new(Config::DEFAULT);
    m.add_device(Tick(0), HCA).unwrap();
    m.configure_port(Tick(0), HCA, P0, ib()).unwrap();
    m.configure_port(Tick(0), HCA, P1, ib()).unwrap();
    m.start(Tick(0), HCA, RequestToken(1)).unwrap();
    assert_eq!(drained(&mut m), [hw(HardwareCommand::Start)]);
    m.start_done(Tick(0), HCA, StartResult::Started).unwrap();
    assert_eq!(drained(&mut m), [complete(1, Status::Success)]);
    let clients = (0..n)
        .map(|_| m.register(Tick(0), HCA, kind).unwrap().0)
        .collect();
    assert_eq!(drained(&mut m), []);
    (m, clients)
}

fn return_callbacks(m: &mut M, outputs: &[Output]) {
    for output in outputs {
        if let Output::Notify { client, .. } = *output {
            m.callback_done(m.now(), client).unwrap();
        }
    }
}

#[test]
fn add_configure_and_start_bring_a_device_up_and_a_failed_start_names_its_cause() {
    let mut m = M::new(Config::DEFAULT);
    assert_eq!(m.phase(HCA), Some(PhaseKind::Absent));
    m.add_device(Tick(0), HCA).unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::Added));
    assert_eq!(m.link(HCA, P0), None);
    m.configure_port(Tick(0), HCA, P0, ib()).unwrap();
    assert_eq!(m.link(HCA, P0), Some(LinkState::Down));
    assert_eq!(
        m.configure_port(Tick(0), HCA, P0, ib()),
        Err(Error::PortAlreadyConfigured)
    );
    m.start(Tick(1), HCA, RequestToken(4)).unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::Starting));
    assert_eq!(drained(&mut m), [hw(HardwareCommand::Start)]);
    assert_eq!(m.failure(HCA), None);
    m.start_done(Tick(2), HCA, StartResult::FailedBeforeResources)
        .unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::Failed));
    assert_eq!(m.failure(HCA), Some(FailureCause::StartFailed));
    let seen = drained(&mut m);
    assert!(
        seen.contains(&complete(4, Status::HardwareFailed)),
        "{seen:?}"
    );
    assert!(seen.contains(&Output::DeviceFailed {
        device: HCA,
        cause: FailureCause::StartFailed
    }));
    // Removal leaves the failed state; the cause goes with it.
    m.remove(Tick(3), HCA, RequestToken(5)).unwrap();
    let seen = drained(&mut m);
    assert!(seen.contains(&Output::DeviceRemoved { device: HCA }));
    assert!(seen.contains(&complete(5, Status::Success)));
    assert_eq!(m.failure(HCA), None);
    assert_eq!(m.phase(HCA), Some(PhaseKind::Absent));
}

#[test]
fn power_down_power_down_done_power_up_and_power_up_done_cycle_the_device_through_dx() {
    let (mut m, clients) = running(1, ClientKind::Trusted);
    let c = clients[0];
    m.power_down(Tick(1), HCA, PowerDownKind::Idle, RequestToken(7))
        .unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::PoweringDown));
    let seen = drained(&mut m);
    assert_eq!(
        seen,
        [
            notify(
                c,
                Event::Suspending {
                    kind: PowerDownKind::Idle
                }
            ),
            hw(HardwareCommand::PowerDown)
        ]
    );
    return_callbacks(&mut m, &seen);
    m.power_down_done(Tick(2), HCA).unwrap();
    assert_eq!(drained(&mut m), [complete(7, Status::Success)]);
    assert_eq!(m.phase(HCA), Some(PhaseKind::LowPower));
    assert_eq!(
        m.power_down_done(Tick(2), HCA),
        Err(Error::InvalidState {
            phase: PhaseKind::LowPower,
            input: InputKind::PowerDownDone
        })
    );
    m.power_up(Tick(3), HCA, RequestToken(8)).unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::PoweringUp));
    assert_eq!(drained(&mut m), [hw(HardwareCommand::PowerUp)]);
    m.power_up_done(Tick(4), HCA, PowerUpResult::Powered)
        .unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::Running));
    let seen = drained(&mut m);
    assert!(seen.contains(&complete(8, Status::Success)), "{seen:?}");
    assert!(seen.contains(&notify(
        c,
        Event::Resumed {
            epoch: Epoch(0),
            state_lost: false
        }
    )));
}

#[test]
fn access_grants_an_operation_that_access_done_ends_and_after_idle_dx_it_wakes_the_device() {
    let (mut m, clients) = running(1, ClientKind::Trusted);
    let c = clients[0];
    assert_eq!(
        m.access(Tick(1), c, Epoch(0), Access::HardwareOp),
        Ok(AccessAnswer::Granted)
    );
    assert_eq!(m.client(c).unwrap().operations_in_flight, 1);
    m.access_done(Tick(2), c).unwrap();
    assert_eq!(m.client(c).unwrap().operations_in_flight, 0);
    assert_eq!(m.access_done(Tick(2), c), Err(Error::NoOperationInFlight));
    assert_eq!(
        m.access(Tick(2), c, Epoch(0), Access::QueryCounters(P0)),
        Ok(AccessAnswer::Granted)
    );
    assert_eq!(m.client(c).unwrap().operations_in_flight, 0);

    // Idle Dx: an access is not granted, it brings the device back.
    m.power_down(Tick(3), HCA, PowerDownKind::Idle, RequestToken(7))
        .unwrap();
    let seen = drained(&mut m);
    return_callbacks(&mut m, &seen);
    m.power_down_done(Tick(3), HCA).unwrap();
    let _ = drained(&mut m);
    assert_eq!(
        m.access(Tick(4), c, Epoch(0), Access::HardwareOp),
        Ok(AccessAnswer::WaitForPowerUp)
    );
    assert_eq!(m.client(c).unwrap().operations_in_flight, 0);
    assert_eq!(drained(&mut m), [hw(HardwareCommand::PowerUp)]);
}

#[test]
fn callback_done_ends_the_callback_in_flight_and_hands_over_the_next_event() {
    let (mut m, clients) = running(1, ClientKind::Trusted);
    let c = clients[0];
    m.bind(Tick(0), c, PortSet::single(P0)).unwrap();
    m.link_changed(Tick(1), HCA, P0, LinkState::Active).unwrap();
    assert_eq!(m.link(HCA, P0), Some(LinkState::Active));
    let up = notify(
        c,
        Event::LinkChanged {
            port: P0,
            state: LinkState::Active,
        },
    );
    assert_eq!(drained(&mut m), [up]);
    assert!(m.client(c).unwrap().callback_in_flight);
    m.link_changed(Tick(2), HCA, P0, LinkState::Down).unwrap();
    assert_eq!(drained(&mut m), [], "waits behind the callback in flight");
    assert_eq!(m.client(c).unwrap().waiting_events, 1);
    m.callback_done(Tick(3), c).unwrap();
    let down = notify(
        c,
        Event::LinkChanged {
            port: P0,
            state: LinkState::Down,
        },
    );
    assert_eq!(drained(&mut m), [down]);
    m.callback_done(Tick(4), c).unwrap();
    assert!(!m.client(c).unwrap().callback_in_flight);
    assert_eq!(m.callback_done(Tick(4), c), Err(Error::NoCallbackInFlight));
}

#[test]
fn a_callback_past_its_deadline_is_fenced_and_fence_done_lets_removal_finish() {
    let (mut m, clients) = running(1, ClientKind::Untrusted);
    let c = clients[0];
    m.bind(Tick(0), c, PortSet::single(P0)).unwrap();
    m.link_changed(Tick(0), HCA, P0, LinkState::Active).unwrap();
    let _ = drained(&mut m); // the callback never returns
    let due = m.poll_timeout().unwrap();
    assert_eq!(due, Tick(Config::DEFAULT.callback_timeout));
    m.timeout(due).unwrap();
    assert_eq!(drained(&mut m), [Output::Fence { client: c }]);
    assert_eq!(m.client(c).unwrap().state, ClientState::Revoked);
    assert!(m.client(c).unwrap().fence_requested);
    m.remove(due, HCA, RequestToken(9)).unwrap();
    assert_eq!(drained(&mut m), [], "removal waits for the fence");
    m.fence_done(due, c).unwrap();
    assert_eq!(
        drained(&mut m),
        [
            Output::ClientGone { client: c },
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(9, Status::Success),
            Output::DeviceRemoved { device: HCA },
        ]
    );
    assert_eq!(m.client(c), None);
}

#[test]
fn reset_execute_lets_the_hardware_reset_run_and_reset_done_ends_the_cycle() {
    let (mut m, clients) = running(2, ClientKind::Trusted);
    assert_eq!(
        m.reset_request(Tick(1), clients[0]),
        Ok(ResetAnswer::Started)
    );
    let seen = drained(&mut m);
    assert_eq!(
        seen,
        [
            notify(clients[0], Event::Reset),
            notify(clients[1], Event::Reset)
        ]
    );
    return_callbacks(&mut m, &seen);
    m.reset_execute(Tick(2), clients[0]).unwrap();
    assert_eq!(drained(&mut m), [], "one voter still quiescing");
    assert_eq!(m.reset_execute(Tick(2), clients[0]), Err(Error::NotVoting));
    m.reset_execute(Tick(3), clients[1]).unwrap();
    assert_eq!(drained(&mut m), [hw(HardwareCommand::Reset)]);
    assert_eq!(m.phase(HCA), Some(PhaseKind::Executing));
    m.reset_done(Tick(4), HCA, ResetResult::Succeeded).unwrap();
    let end = Event::ResetEnd { epoch: Epoch(1) };
    assert_eq!(
        drained(&mut m),
        [
            notify(clients[0], end),
            notify(clients[1], end),
            Output::ResetCycleFinished {
                device: HCA,
                outcome: CycleOutcome::Completed(Epoch(1))
            }
        ]
    );
    assert_eq!(m.epoch(HCA), Some(Epoch(1)));
    assert_eq!(m.acquire_interface(Tick(5), clients[0]), Ok(Epoch(1)));
}

#[test]
fn can_recover_from_every_voter_ends_the_cycle_without_a_hardware_reset() {
    let (mut m, clients) = running(2, ClientKind::Trusted);
    assert_eq!(
        m.fatal_error(Tick(1), HCA),
        Ok(FatalAnswer::Served(ResetAnswer::Started))
    );
    let seen = drained(&mut m);
    return_callbacks(&mut m, &seen);
    m.can_recover(Tick(2), clients[0]).unwrap();
    assert_eq!(drained(&mut m), []);
    assert_eq!(m.phase(HCA), Some(PhaseKind::Quiescing));
    m.can_recover(Tick(3), clients[1]).unwrap();
    let recovered = Event::Recovered { epoch: Epoch(0) };
    assert_eq!(
        drained(&mut m),
        [
            notify(clients[0], recovered),
            notify(clients[1], recovered),
            Output::ResetCycleFinished {
                device: HCA,
                outcome: CycleOutcome::Recovered(Epoch(0))
            }
        ]
    );
    assert_eq!(m.phase(HCA), Some(PhaseKind::Running));
    assert_eq!(m.epoch(HCA), Some(Epoch(0)));
}

#[test]
fn bind_sets_the_ports_a_client_hears_and_its_binding_caps() {
    let (mut m, clients) = running(2, ClientKind::Trusted);
    assert_eq!(m.binding_caps(clients[0]), Err(Error::NotBound));
    let both = PortSet::single(P0).with(P1);
    m.bind(Tick(1), clients[0], both).unwrap();
    assert_eq!(m.client(clients[0]).unwrap().ports, both);
    assert_eq!(m.binding_caps(clients[0]).unwrap().ports, both);
    assert_eq!(
        m.bind(Tick(1), clients[1], PortSet::EMPTY),
        Err(Error::EmptyBinding)
    );
    m.link_changed(Tick(2), HCA, P1, LinkState::Active).unwrap();
    assert_eq!(
        drained(&mut m),
        [notify(
            clients[0],
            Event::LinkChanged {
                port: P1,
                state: LinkState::Active
            }
        )],
        "only the bound client hears it"
    );
}

#[test]
fn hold_vetoes_query_remove_until_release_hold_and_cancel_remove_undoes_a_query() {
    let (mut m, clients) = running(1, ClientKind::Trusted);
    let c = clients[0];
    m.hold(Tick(1), c).unwrap();
    assert!(matches!(
        m.client(c).unwrap().state,
        ClientState::Active { holding: true, .. }
    ));
    assert_eq!(m.hold(Tick(1), c), Err(Error::AlreadyHolding));
    assert_eq!(
        m.query_remove(Tick(2), HCA, RequestToken(3)),
        Err(Error::Vetoed(VetoReason::ClientHoldsDevice))
    );
    m.release_hold(Tick(3), c).unwrap();
    assert_eq!(m.release_hold(Tick(3), c), Err(Error::NotHolding));
    m.query_remove(Tick(4), HCA, RequestToken(3)).unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::RemovePending));
    assert_eq!(drained(&mut m), [complete(3, Status::Success)]);
    m.cancel_remove(Tick(5), HCA, RequestToken(4)).unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::Running));
    assert_eq!(drained(&mut m), [complete(4, Status::Success)]);
}

#[test]
fn cannot_pause_vetoes_query_stop_until_can_pause_and_stop_then_start_restarts() {
    let (mut m, clients) = running(1, ClientKind::Trusted);
    let c = clients[0];
    m.cannot_pause(Tick(1), c).unwrap();
    assert!(matches!(
        m.client(c).unwrap().state,
        ClientState::Active {
            cannot_pause: true,
            ..
        }
    ));
    assert_eq!(m.cannot_pause(Tick(1), c), Err(Error::AlreadyCannotPause));
    assert_eq!(
        m.query_stop(Tick(2), HCA, RequestToken(3)),
        Err(Error::Vetoed(VetoReason::ClientCannotPause))
    );
    m.can_pause(Tick(3), c).unwrap();
    assert_eq!(m.can_pause(Tick(3), c), Err(Error::NotCannotPause));
    m.query_stop(Tick(4), HCA, RequestToken(3)).unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::StopPending));
    assert_eq!(drained(&mut m), [complete(3, Status::Success)]);
    m.cancel_stop(Tick(5), HCA, RequestToken(4)).unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::Running));
    assert_eq!(drained(&mut m), [complete(4, Status::Success)]);
    m.query_stop(Tick(6), HCA, RequestToken(5)).unwrap();
    let _ = drained(&mut m);
    m.stop(Tick(7), HCA, RequestToken(6)).unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::Stopped));
    assert_eq!(
        drained(&mut m),
        [
            notify(c, Event::DeviceStopped),
            hw(HardwareCommand::Shutdown),
            hw(HardwareCommand::ReleaseResources),
            complete(6, Status::Success),
        ]
    );
    m.callback_done(Tick(8), c).unwrap();
    m.start(Tick(8), HCA, RequestToken(7)).unwrap();
    assert_eq!(drained(&mut m), [hw(HardwareCommand::Start)]);
}

#[test]
fn surprise_removal_tells_every_client_and_unregister_then_remove_frees_the_device() {
    let (mut m, clients) = running(2, ClientKind::Trusted);
    m.surprise_removal(Tick(1), HCA).unwrap();
    assert_eq!(m.phase(HCA), Some(PhaseKind::SurpriseRemoved));
    let gone = Event::Removed { surprise: true };
    let seen = drained(&mut m);
    assert_eq!(seen, [notify(clients[0], gone), notify(clients[1], gone)]);
    return_callbacks(&mut m, &seen);
    for c in &clients {
        assert_eq!(m.unregister(Tick(2), *c), Ok(Unregistered::Now));
        assert_eq!(drained(&mut m), [Output::ClientGone { client: *c }]);
        assert_eq!(m.unregister(Tick(2), *c), Ok(Unregistered::Already));
    }
    m.remove(Tick(3), HCA, RequestToken(2)).unwrap();
    let seen = drained(&mut m);
    assert!(
        seen.contains(&Output::DeviceRemoved { device: HCA }),
        "{seen:?}"
    );
    assert!(
        !seen.contains(&hw(HardwareCommand::Shutdown)),
        "a vanished device's registers are never touched"
    );
}

#[test]
fn unload_removes_every_device_and_says_once_that_it_may_finish() {
    let (mut m, clients) = running(1, ClientKind::Trusted);
    m.unload(Tick(1)).unwrap();
    assert_eq!(m.driver_phase(), DriverPhase::Unloading);
    assert_eq!(m.unload(Tick(1)), Err(Error::UnloadAlreadyRequested));
    let seen = drained(&mut m);
    assert_eq!(
        seen,
        [notify(clients[0], Event::Removed { surprise: false })]
    );
    return_callbacks(&mut m, &seen);
    m.unregister(Tick(2), clients[0]).unwrap();
    let seen = drained(&mut m);
    assert_eq!(seen.last(), Some(&Output::UnloadMayFinish));
    assert_eq!(m.driver_phase(), DriverPhase::Unloaded);
    assert_eq!(m.timeout(Tick(3)), Err(Error::Unloaded));
}

/// The documented bound is what owners size their queues with by hand (the ports, the
/// README's arithmetic): two outputs a client plus eight, and one more for
/// `UnloadMayFinish`; the queue fits one for every device.
#[test]
fn the_output_bound_is_the_documented_two_a_client_plus_eight() {
    for clients in 1..=256 {
        assert_eq!(outputs_per_device_input(clients), 2 * clients + 8);
        assert_eq!(queue_capacity(3, clients), 3 * (2 * clients + 8) + 1);
    }
    assert_eq!(M::DEVICE_INPUT_OUTPUTS, outputs_per_device_input(8) + 1);
    assert_eq!(M::DRIVER_INPUT_OUTPUTS, queue_capacity(1, 8));
}

/// The most outputs one device input was seen to give (random walks and this search):
/// the fence that lets a removal finish during unload frees every revoked slot, tears
/// the hardware down, completes the remove, and lets unload finish: a `ClientGone` a
/// client plus five. With every slot taken it fits the bound and nothing is lost.
#[test]
fn the_worst_device_input_seen_fits_the_output_bound_with_every_slot_taken() {
    let (mut m, clients) = running(8, ClientKind::Untrusted);
    assert_eq!(
        m.access(Tick(1), clients[0], Epoch(0), Access::HardwareOp),
        Ok(AccessAnswer::Granted)
    );
    m.remove(Tick(2), HCA, RequestToken(2)).unwrap();
    let seen = drained(&mut m);
    assert_eq!(seen.len(), 8, "every client told Removed: {seen:?}");
    return_callbacks(&mut m, &seen);
    m.unload(Tick(3)).unwrap();
    assert_eq!(drained(&mut m), []);
    // Nobody detaches: at the detach deadline every client is revoked; the one with an
    // operation in flight is fenced.
    let due = m.poll_timeout().unwrap();
    m.timeout(due).unwrap();
    assert_eq!(drained(&mut m), [Output::Fence { client: clients[0] }]);
    assert!(clients
        .iter()
        .all(|c| m.client(*c).unwrap().state == ClientState::Revoked));

    m.fence_done(due, clients[0]).unwrap();
    let seen = drained(&mut m);
    let mut expected: Vec<Output> = clients
        .iter()
        .map(|c| Output::ClientGone { client: *c })
        .collect();
    expected.extend([
        hw(HardwareCommand::Shutdown),
        hw(HardwareCommand::ReleaseResources),
        complete(2, Status::Success),
        Output::DeviceRemoved { device: HCA },
        Output::UnloadMayFinish,
    ]);
    assert_eq!(seen, expected);
    assert_eq!(seen.len(), clients.len() + 5);
    assert!(seen.len() <= M::DEVICE_INPUT_OUTPUTS);
    assert_eq!(m.lost_outputs(), 0);
}

// ---- random walks through the typed methods alone ----------------------------------

/// The fuzz machine, fed only through its typed methods: the oracle and the reference
/// model see it as they see `handle`, so a typed method that dropped its input, or
/// answered otherwise, breaks a rule or disagrees with the model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Typed(Fuzz);

/// Feed `input` through the typed method for it, and give the answer as `handle` would.
/// The match has no wildcard: a new input must get its typed method here.
fn typed(m: &mut Fuzz, now: Tick, input: Input) -> Result<Reply, Error> {
    let ok = |r: Result<(), Error>| r.map(|()| Reply::Accepted);
    match input {
        Input::AddDevice { device } => ok(m.add_device(now, device)),
        Input::ConfigurePort { device, port, caps } => {
            ok(m.configure_port(now, device, port, caps))
        }
        Input::Start { device, token } => ok(m.start(now, device, token)),
        Input::StartDone { device, result } => ok(m.start_done(now, device, result)),
        Input::QueryStop { device, token } => ok(m.query_stop(now, device, token)),
        Input::CancelStop { device, token } => ok(m.cancel_stop(now, device, token)),
        Input::Stop { device, token } => ok(m.stop(now, device, token)),
        Input::QueryRemove { device, token } => ok(m.query_remove(now, device, token)),
        Input::CancelRemove { device, token } => ok(m.cancel_remove(now, device, token)),
        Input::Remove { device, token } => ok(m.remove(now, device, token)),
        Input::SurpriseRemoval { device } => ok(m.surprise_removal(now, device)),
        Input::FatalError { device } => m.fatal_error(now, device).map(Reply::Fatal),
        Input::ResetDone { device, result } => ok(m.reset_done(now, device, result)),
        Input::LinkChanged {
            device,
            port,
            state,
        } => ok(m.link_changed(now, device, port, state)),
        Input::Register { device, kind } => m
            .register(now, device, kind)
            .map(|(client, epoch)| Reply::Registered { client, epoch }),
        Input::Unregister { client } => m.unregister(now, client).map(Reply::Unregistered),
        Input::CallbackDone { client } => ok(m.callback_done(now, client)),
        Input::FenceDone { client } => ok(m.fence_done(now, client)),
        Input::FastPathClosed { client, in_flight } => {
            ok(m.fast_path_closed(now, client, in_flight))
        }
        Input::AcquireInterface { client } => {
            m.acquire_interface(now, client).map(Reply::Interface)
        }
        Input::ResetRequest { client } => m.reset_request(now, client).map(Reply::Reset),
        Input::ResetExecute { client } => ok(m.reset_execute(now, client)),
        Input::ResetNack { client } => ok(m.reset_nack(now, client)),
        Input::JoinResetGroup { device, group } => ok(m.join_reset_group(now, device, group)),
        Input::LeaveResetGroup { device } => ok(m.leave_reset_group(now, device)),
        Input::Bind { client, ports } => ok(m.bind(now, client, ports)),
        Input::Hold { client } => ok(m.hold(now, client)),
        Input::ReleaseHold { client } => ok(m.release_hold(now, client)),
        Input::Access {
            client,
            epoch,
            what,
        } => m.access(now, client, epoch, what).map(|a| match a {
            AccessAnswer::Granted => Reply::AccessGranted,
            AccessAnswer::WaitForPowerUp => Reply::AccessWaitsForPowerUp,
        }),
        Input::AccessDone { client } => ok(m.access_done(now, client)),
        Input::CanRecover { client } => ok(m.can_recover(now, client)),
        Input::CannotPause { client } => ok(m.cannot_pause(now, client)),
        Input::CanPause { client } => ok(m.can_pause(now, client)),
        Input::PowerDown {
            device,
            kind,
            token,
        } => ok(m.power_down(now, device, kind, token)),
        Input::PowerDownDone { device } => ok(m.power_down_done(now, device)),
        Input::PowerUp { device, token } => ok(m.power_up(now, device, token)),
        Input::PowerUpDone { device, result } => ok(m.power_up_done(now, device, result)),
        Input::Timeout => ok(m.timeout(now)),
        Input::Unload => ok(m.unload(now)),
    }
}

impl Sut for Typed {
    const DEVICES: usize = Fuzz::DEVICES;
    const CLIENTS: usize = <Fuzz as Sut>::CLIENTS;
    const PORTS: usize = <Fuzz as Sut>::PORTS;
    const DEVICE_INPUT_OUTPUTS: usize = Fuzz::DEVICE_INPUT_OUTPUTS;
    const DRIVER_INPUT_OUTPUTS: usize = Fuzz::DRIVER_INPUT_OUTPUTS;

    fn create(config: Config) -> Self {
        Typed(Fuzz::new(config))
    }
    fn handle(&mut self, now: Tick, input: Input) -> Result<Reply, Error> {
        typed(&mut self.0, now, input)
    }
    fn poll_output(&mut self) -> Option<Output> {
        self.0.poll_output()
    }
    fn pending_output_count(&self) -> usize {
        self.0.pending_output_count()
    }
    fn lost_outputs(&self) -> u32 {
        self.0.lost_outputs()
    }
    fn phase(&self, device: DeviceId) -> Option<PhaseKind> {
        self.0.phase(device)
    }
    fn phase_detail(&self, device: DeviceId) -> Option<pnp_lifecycle::inspect::Phase> {
        self.0.phase_detail(device)
    }
    fn epoch(&self, device: DeviceId) -> Option<Epoch> {
        self.0.epoch(device)
    }
    fn driver_phase(&self) -> DriverPhase {
        self.0.driver_phase()
    }
    fn now(&self) -> Tick {
        self.0.now()
    }
    fn poll_timeout(&self) -> Option<Tick> {
        self.0.poll_timeout()
    }
    fn client(&self, handle: ClientHandle) -> Option<ClientView> {
        self.0.client(handle)
    }
    fn client_list(&self, device: DeviceId) -> Vec<(ClientHandle, ClientView)> {
        self.0.clients(device).collect()
    }
    fn binding_caps(&self, handle: ClientHandle) -> Result<BindingCaps, Error> {
        self.0.binding_caps(handle)
    }
    fn link(&self, device: DeviceId, port: PhysPort) -> Option<LinkState> {
        self.0.link(device, port)
    }
    fn config(&self) -> Config {
        *self.0.config()
    }
}

/// Random walks (the fuzz generator's inputs, time steps and jumps), fed through the
/// typed methods only, checked by the oracle and compared with the reference model after
/// every step. Returns how many inputs of each kind were accepted.
#[test]
fn random_walks_through_the_typed_methods_keep_every_rule_and_match_the_model() {
    let mut rng = SplitMix(0x7e57_7e57);
    let mut accepted = [0u32; 64];
    for case in 0..3000 {
        let bytes = rng.case(64, 1500);
        let mut u = Unstructured::new(&bytes);
        let config = small_config(&mut u).unwrap();
        let mut world: World<Typed> = World::new(config, true);
        let mut generator = Generator::new();
        while !u.is_empty() {
            let Ok((now, input)) = generator.next(&mut u, &world) else {
                break;
            };
            let step = world
                .step(now, input)
                .unwrap_or_else(|v| panic!("case {case}: {v}"));
            if step.result.is_ok() {
                accepted[input.kind() as usize] += 1;
            }
            if world.oracle.unload_finished {
                break;
            }
        }
    }
    eprintln!(
        "accepted per input kind: {:?}",
        &accepted[..InputKind::COUNT]
    );
    // Each typed method cargo-mutants found untested was reached, accepted, many times.
    for kind in [
        InputKind::PowerDown,
        InputKind::PowerUp,
        InputKind::AccessDone,
        InputKind::CallbackDone,
        InputKind::FenceDone,
        InputKind::ResetExecute,
        InputKind::CanRecover,
        InputKind::Bind,
        InputKind::Hold,
        InputKind::ReleaseHold,
        InputKind::CannotPause,
        InputKind::CanPause,
        InputKind::Access,
    ] {
        assert!(
            accepted[kind as usize] >= 20,
            "{kind:?} accepted only {} times",
            accepted[kind as usize]
        );
    }
}
