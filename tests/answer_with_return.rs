//! A client's answer given with its callback's return (DESIGN.md "Cost": one input, not
//! two): `Input::CallbackDoneWith` does exactly what `CallbackDone` then the answer's own
//! input do, or is refused whole with nothing changed (I10); a `RESET` answer travels
//! only with the return of the `RESET` or of a later callback; and the input's worst
//! case fits the documented output bound.

use pnp_lifecycle::*;

const HCA: DeviceId = DeviceId(0);
const P0: PhysPort = PhysPort(0);

/// One device, 8 client slots, 1 port.
type M = Lifecycle<1, 8, 1, { queue_capacity(1, 8) }>;

fn drained(m: &mut M) -> Vec<Output> {
    let mut seen = Vec::new();
    let _ = m.drain(|o| seen.push(o));
    seen
}

fn notify(client: ClientHandle, event: Event) -> Output {
    Output::Notify { client, event }
}

fn ib() -> PortCaps {
    PortCaps {
        protocol: Protocol::Ib,
        max_mtu: 4096,
        atomics: true,
    }
}

/// A running device with `n` trusted clients bound to port 0, nothing in flight.
fn running(n: usize, fast_path: bool) -> (M, Vec<ClientHandle>) {
    let mut m = M::new(Config::DEFAULT);
    if fast_path {
        m = m.with_fast_path();
    }
    m.add_device(Tick(0), HCA).unwrap();
    m.configure_port(Tick(0), HCA, P0, ib()).unwrap();
    m.start(Tick(0), HCA, RequestToken(1)).unwrap();
    drained(&mut m);
    m.start_done(Tick(0), HCA, StartResult::Started).unwrap();
    drained(&mut m);
    let clients: Vec<ClientHandle> = (0..n)
        .map(|_| {
            let (c, _) = m.register(Tick(0), HCA, ClientKind::Trusted).unwrap();
            drained(&mut m);
            m.bind(Tick(0), c, PortSet::single(P0)).unwrap();
            drained(&mut m);
            c
        })
        .collect();
    (m, clients)
}

/// Every client's view, for comparing two machines.
fn views(m: &M) -> Vec<(ClientHandle, ClientView)> {
    m.clients(HCA).collect()
}

/// The reset cycle fed both ways: on one machine each `RESET` returns with
/// `ResetExecute` and each `RESET_END` with `AcquireInterface`; on the other the return and
/// the answer are two inputs. Outputs, replies, states and deadlines agree input by input.
#[test]
fn a_cycle_answered_with_each_return_is_the_cycle_of_two_inputs_each() {
    let (mut one, clients) = running(3, false);
    let (mut two, _) = running(3, false);
    let now = Tick(5);
    for m in [&mut one, &mut two] {
        assert_eq!(m.reset_request(now, clients[0]), Ok(ResetAnswer::Started));
    }
    let told: Vec<Output> = clients.iter().map(|&c| notify(c, Event::Reset)).collect();
    assert_eq!(drained(&mut one), told);
    assert_eq!(drained(&mut two), told);
    for &c in &clients {
        assert_eq!(
            one.callback_done_with(now, c, CallbackAnswer::ResetExecute),
            Ok(None)
        );
        two.callback_done(now, c).unwrap();
        two.reset_execute(now, c).unwrap();
        assert_eq!(drained(&mut one), drained(&mut two));
        assert_eq!(views(&one), views(&two));
        assert_eq!(one.poll_timeout(), two.poll_timeout());
    }
    assert_eq!(one.phase(HCA), Some(PhaseKind::Executing));
    for m in [&mut one, &mut two] {
        m.reset_done(now, HCA, ResetResult::Succeeded).unwrap();
    }
    let ended = drained(&mut one);
    assert_eq!(ended, drained(&mut two));
    assert!(ended.contains(&notify(clients[2], Event::ResetEnd { epoch: Epoch(1) })));
    for &c in &clients {
        assert_eq!(
            one.callback_done_with(now, c, CallbackAnswer::AcquireInterface),
            Ok(Some(Epoch(1)))
        );
        two.callback_done(now, c).unwrap();
        assert_eq!(two.acquire_interface(now, c), Ok(Epoch(1)));
        assert_eq!(drained(&mut one), drained(&mut two));
        assert_eq!(views(&one), views(&two));
    }
    assert_eq!(one, two, "the same machine either way");
    assert_eq!(one.phase(HCA), Some(PhaseKind::Running));
    assert!(views(&one).iter().all(|(_, v)| !v.callback_in_flight));
}

/// `CanRecover` with every `RESET`'s return ends the cycle without a hardware reset, as
/// the two-input answers do; `CannotPause` with a return vetoes a later query stop.
#[test]
fn can_recover_and_cannot_pause_travel_with_a_return() {
    let (mut m, clients) = running(2, false);
    m.reset_request(Tick(1), clients[0]).unwrap();
    drained(&mut m);
    for &c in &clients {
        m.callback_done_with(Tick(2), c, CallbackAnswer::CanRecover)
            .unwrap();
    }
    let seen = drained(&mut m);
    assert!(seen.contains(&Output::ResetCycleFinished {
        device: HCA,
        outcome: CycleOutcome::Recovered(Epoch(0)),
    }));
    assert!(!seen.iter().any(|o| matches!(
        o,
        Output::Hardware {
            command: HardwareCommand::Reset,
            ..
        }
    )));
    assert_eq!(m.epoch(HCA), Some(Epoch(0)));
    // Each client was told Recovered; its return carries the pause veto.
    m.callback_done_with(Tick(3), clients[1], CallbackAnswer::CannotPause)
        .unwrap();
    assert_eq!(
        m.query_stop(Tick(4), HCA, RequestToken(9)),
        Err(Error::Vetoed(VetoReason::ClientCannotPause))
    );
    // A second veto is the client's error, and changes nothing, not even the return.
    m.link_changed(Tick(5), HCA, P0, LinkState::Active).unwrap();
    drained(&mut m);
    let before = m.clone();
    assert_eq!(
        m.callback_done_with(Tick(6), clients[1], CallbackAnswer::CannotPause),
        Err(Error::AlreadyCannotPause)
    );
    assert_eq!(m, before);
    assert!(m.client(clients[1]).unwrap().callback_in_flight);
}

/// Every refusal leaves the machine exactly as it was, the callback still in flight
/// (I10): an answer from a non-voter, a `RESET` answer with the return of a callback its
/// `RESET` waits behind, no callback in flight, an answer the state's table refuses, an
/// answer from a revoked client.
#[test]
fn an_answer_the_client_may_not_give_refuses_the_return_too() {
    let (mut m, clients) = running(2, false);
    let (a, b) = (clients[0], clients[1]);

    // Running, a link callback out: the table refuses a RESET answer, naming it.
    m.link_changed(Tick(1), HCA, P0, LinkState::Active).unwrap();
    assert_eq!(drained(&mut m).len(), 2);
    let before = m.clone();
    assert_eq!(
        m.callback_done_with(Tick(2), a, CallbackAnswer::ResetExecute),
        Err(Error::InvalidState {
            phase: PhaseKind::Running,
            input: InputKind::ResetExecute,
        })
    );
    assert_eq!(m, before);

    // A cycle begins while the link callbacks are out: the RESETs wait behind them.
    m.reset_request(Tick(2), a).unwrap();
    assert_eq!(drained(&mut m), []);
    let before = m.clone();
    for answer in [CallbackAnswer::ResetExecute, CallbackAnswer::CanRecover] {
        assert_eq!(
            m.callback_done_with(Tick(3), a, answer),
            Err(Error::ResetNotDelivered)
        );
        assert_eq!(m, before);
    }
    // The plain return delivers the RESET; its own return may carry the ack.
    m.callback_done(Tick(3), a).unwrap();
    assert_eq!(drained(&mut m), [notify(a, Event::Reset)]);
    assert_eq!(
        m.callback_done_with(Tick(4), a, CallbackAnswer::ResetExecute),
        Ok(None)
    );
    // No callback of a's is out now.
    let before = m.clone();
    assert_eq!(
        m.callback_done_with(Tick(5), a, CallbackAnswer::CannotPause),
        Err(Error::NoCallbackInFlight)
    );
    assert_eq!(m, before);
    // Quiescing refuses AcquireInterface in its table: the answer is named.
    assert_eq!(
        m.callback_done_with(Tick(5), b, CallbackAnswer::AcquireInterface),
        Err(Error::InvalidState {
            phase: PhaseKind::Quiescing,
            input: InputKind::AcquireInterface,
        })
    );
    assert_eq!(m, before);
    // a answered: a later callback's return cannot answer again.
    m.link_changed(Tick(5), HCA, P0, LinkState::Down).unwrap();
    assert_eq!(
        drained(&mut m),
        [notify(
            a,
            Event::LinkChanged {
                port: P0,
                state: LinkState::Down
            }
        )]
    );
    let before = m.clone();
    assert_eq!(
        m.callback_done_with(Tick(5), a, CallbackAnswer::ResetExecute),
        Err(Error::NotVoting)
    );
    assert_eq!(m, before);

    // b never returns its callback: at its deadline b is revoked and fenced (and the
    // reset runs without it).
    let due = m.poll_timeout().unwrap();
    m.timeout(due).unwrap();
    assert!(drained(&mut m).contains(&Output::Fence { client: b }));
    let before = m.clone();
    assert_eq!(
        m.callback_done_with(due, b, CallbackAnswer::CannotPause),
        Err(Error::ClientRevoked)
    );
    assert_eq!(m, before);
}

/// The input's worst case: the last voter's `CanRecover` with its `RESET`'s return, with
/// the fast path on and every slot taken, ends the cycle: every client is told
/// `Recovered`, every gate opens, and the cycle's end is reported: two outputs a client
/// plus one, within `outputs_per_device_input` (two a client plus eight), nothing lost.
/// The same as the return and the answer fed as two inputs.
#[test]
fn the_last_answer_with_its_return_fits_the_output_bound_with_every_slot_taken() {
    let (mut one, clients) = running(8, true);
    let mut two = one.clone();
    for m in [&mut one, &mut two] {
        m.reset_request(Tick(1), clients[0]).unwrap();
        let closes = drained(m);
        // Leaving running closes every gate; the owner answers each at once.
        for o in closes {
            if let Output::FastPath { client, .. } = o {
                m.fast_path_closed(Tick(1), client, 0).unwrap();
            }
        }
        drained(m);
    }
    let (last, rest) = clients.split_last().unwrap();
    for &c in rest {
        one.callback_done_with(Tick(2), c, CallbackAnswer::CanRecover)
            .unwrap();
        two.callback_done(Tick(2), c).unwrap();
        two.can_recover(Tick(2), c).unwrap();
        assert_eq!(drained(&mut one), drained(&mut two));
    }
    one.callback_done_with(Tick(3), *last, CallbackAnswer::CanRecover)
        .unwrap();
    let seen = drained(&mut one);
    two.callback_done(Tick(3), *last).unwrap();
    let mut split = drained(&mut two);
    two.can_recover(Tick(3), *last).unwrap();
    split.extend(drained(&mut two));
    assert_eq!(seen, split, "one input does what the two do");

    let recovered = seen
        .iter()
        .filter(|o| {
            matches!(
                o,
                Output::Notify {
                    event: Event::Recovered { .. },
                    ..
                }
            )
        })
        .count();
    let opened = seen
        .iter()
        .filter(|o| {
            matches!(
                o,
                Output::FastPath {
                    gate: FastPathGate::Open { .. },
                    ..
                }
            )
        })
        .count();
    assert_eq!((recovered, opened), (8, 8));
    assert_eq!(seen.len(), 2 * clients.len() + 1);
    assert!(seen.len() <= outputs_per_device_input(clients.len()));
    assert_eq!(M::DEVICE_INPUT_OUTPUTS, outputs_per_device_input(8) + 1);
    assert_eq!(one.lost_outputs(), 0);
    assert_eq!(one.phase(HCA), Some(PhaseKind::Running));
}
