//! `Lifecycle::feed`, the recommended owner loop's step: feed, drain into the owner's
//! sink, arm the timer. A misuse (outputs of a typed method left undrained) no longer
//! surfaces as an `OutputBacklog` at the next, unrelated input; a refusal names the input,
//! its device or client, and the time.

use pnp_lifecycle::*;
use std::collections::VecDeque;

const HCA: DeviceId = DeviceId(0);

type M = Lifecycle<1, 4, 1, { queue_capacity(1, 4) }>;

fn hw(command: HardwareCommand) -> Output {
    Output::Hardware {
        device: HCA,
        command,
    }
}

/// A running device with two clients, an untrusted one and a trusted one, driven by
/// `feed` with every callback returned at once.
fn running() -> (M, ClientHandle, ClientHandle) {
    let mut m = M::new(Config::DEFAULT);
    let mut work = VecDeque::new();
    m.feed(Tick(0), Input::AddDevice { device: HCA }, |o| {
        work.push_back(o)
    })
    .unwrap();
    let start = Input::Start {
        device: HCA,
        token: RequestToken(1),
    };
    m.feed(Tick(0), start, |o| work.push_back(o)).unwrap();
    let started = Input::StartDone {
        device: HCA,
        result: StartResult::Started,
    };
    m.feed(Tick(1), started, |o| work.push_back(o)).unwrap();
    let user = m.register(Tick(2), HCA, ClientKind::Untrusted).unwrap().0;
    let kernel = m.register(Tick(2), HCA, ClientKind::Trusted).unwrap().0;
    (m, user, kernel)
}

/// Issue 19's report: `reset_execute` (typed) left the hardware reset queued, and the
/// owner's next timer tick was refused with `OutputBacklog { needed: 13 }`, an error about
/// the queue from an input that had nothing to do with it. `feed` hands the leftovers
/// over first, in order, and the tick goes through.
#[test]
fn feed_hands_over_what_a_typed_method_left_queued_before_the_input_it_feeds() {
    let (mut m, user, kernel) = running();
    let mut work = Vec::new();
    let fed = m
        .feed(Tick(10), Input::ResetRequest { client: kernel }, |o| {
            work.push(o)
        })
        .unwrap();
    assert_eq!(fed.reply, Reply::Reset(ResetAnswer::Started));
    assert_eq!(
        fed.wake_at,
        Some(Tick(10 + Config::DEFAULT.untrusted_ack_timeout))
    );
    assert_eq!(
        work,
        [
            Output::Notify {
                client: user,
                event: Event::Reset
            },
            Output::Notify {
                client: kernel,
                event: Event::Reset
            }
        ]
    );
    for client in [user, kernel] {
        m.callback_done(Tick(12), client).unwrap();
        m.reset_execute(Tick(12), client).unwrap(); // typed, and nothing drained
    }
    assert_eq!(
        m.pending_outputs().copied().collect::<Vec<_>>(),
        [hw(HardwareCommand::Reset)]
    );
    // With `handle` the timer tick is refused for want of room, far from the cause.
    let mut by_hand = m.clone();
    assert!(matches!(
        by_hand.handle(Tick(13), Input::Timeout),
        Err(Error::OutputBacklog { .. })
    ));

    let mut work = Vec::new();
    let fed = m.feed(Tick(13), Input::Timeout, |o| work.push(o)).unwrap();
    assert_eq!(fed.reply, Reply::Accepted);
    assert_eq!(
        work,
        [hw(HardwareCommand::Reset)],
        "the leftover, handed over"
    );
    assert_eq!(m.pending_output_count(), 0);
    assert_eq!(fed.wake_at, m.poll_timeout());
}

/// `feed` is `handle` plus the drain and the timer: the same machine afterwards, the
/// same outputs in the same order, the same reply, and `wake_at` is `poll_timeout`.
#[test]
fn feed_is_handle_then_a_full_drain_and_the_next_deadline() {
    let (mut fed_machine, user, kernel) = running();
    let mut by_hand = fed_machine.clone();
    let inputs = [
        (Tick(20), Input::ResetRequest { client: user }),
        (Tick(21), Input::CallbackDone { client: user }),
        (Tick(21), Input::CallbackDone { client: kernel }),
        (Tick(22), Input::ResetExecute { client: kernel }),
        (Tick(1_020), Input::Timeout),
        (
            Tick(1_021),
            Input::ResetDone {
                device: HCA,
                result: ResetResult::Succeeded,
            },
        ),
        (Tick(1_022), Input::CallbackDone { client: kernel }),
        (Tick(1_023), Input::CallbackDone { client: user }),
    ];
    for (now, input) in inputs {
        let mut seen = Vec::new();
        let result = fed_machine.feed(now, input, |o| seen.push(o));
        let expected = by_hand.handle(now, input);
        let mut drained = Vec::new();
        while let Some(o) = by_hand.poll_output() {
            drained.push(o);
        }
        assert_eq!(seen, drained, "{input:?}");
        assert_eq!(
            result.map(|f| f.reply),
            expected.map_err(|error| Refusal {
                error,
                input,
                at: now
            })
        );
        assert_eq!(fed_machine, by_hand, "{input:?}");
        if let Ok(fed) = fed_machine.feed(now, Input::Timeout, drop) {
            assert_eq!(fed.wake_at, fed_machine.poll_timeout());
        }
        by_hand = fed_machine.clone();
    }
    assert_eq!(fed_machine.epoch(HCA), Some(Epoch(1)));
    assert_eq!(
        fed_machine.client(user).map(|c| c.state),
        Some(ClientState::Revoked),
        "the user-space voter missed its deadline"
    );
}

/// A refusal names what was refused: the input with its device or client, and the time;
/// nothing changed; `?` gives the bare error.
#[test]
fn a_refusal_names_the_input_its_client_or_device_and_the_time_and_changes_nothing() {
    let (mut m, user, _) = running();
    let before = m.clone();
    let mut seen = Vec::new();
    let refusal = m
        .feed(Tick(30), Input::CanPause { client: user }, |o| seen.push(o))
        .unwrap_err();
    assert_eq!(seen, []);
    assert!(m == before, "a refused input changes nothing");
    assert_eq!(refusal.error, Error::NotCannotPause);
    assert_eq!(refusal.kind(), InputKind::CanPause);
    assert_eq!(refusal.client(), Some(user));
    assert_eq!(refusal.device(), Some(HCA));
    assert_eq!(refusal.at, Tick(30));
    assert_eq!(
        refusal.to_string(),
        format!(
            "CanPause by client {} (generation {}) of device 0 at tick 30 refused: \
             the client had not said it cannot pause",
            user.slot, user.generation
        )
    );
    let source = core::error::Error::source(&refusal).map(ToString::to_string);
    assert_eq!(source, Some(Error::NotCannotPause.to_string()));
    assert_eq!(Error::from(refusal), Error::NotCannotPause);

    let refusal = m
        .feed(Tick(1), Input::Unload, |o| seen.push(o))
        .unwrap_err();
    assert_eq!((refusal.device(), refusal.client()), (None, None));
    assert_eq!(
        refusal.to_string(),
        "Unload at tick 1 refused: time went backwards: now is earlier than the last \
         input's time 2"
    );
    let refusal = m
        .feed(
            Tick(31),
            Input::QueryStop {
                device: HCA,
                token: RequestToken(9),
            },
            drop,
        )
        .map(|_| ())
        .and_then(|()| {
            m.feed(
                Tick(31),
                Input::Stop {
                    device: DeviceId(3),
                    token: RequestToken(10),
                },
                drop,
            )
        })
        .unwrap_err();
    assert_eq!(refusal.error, Error::NoSuchDevice);
    assert!(refusal
        .to_string()
        .starts_with("Stop for device 3 at tick 31 refused: "));
}

/// The loop the crate's front page recommends: carry each output out, feed what that
/// reports with `feed` again, keep the timer at the last `wake_at`, and fire it.
#[test]
fn an_owner_loop_built_on_feed_runs_a_reset_cycle_a_timeout_and_unload_to_the_end() {
    let mut m = M::new(Config::DEFAULT);
    let mut work: VecDeque<Output> = VecDeque::new();
    let mut timer: Option<Tick> = None;
    let mut seen = Vec::new();
    let mut run = |m: &mut M, now: Tick, input: Input, timer: &mut Option<Tick>| -> Reply {
        let fed = m.feed(now, input, |o| work.push_back(o)).unwrap();
        *timer = fed.wake_at;
        while let Some(output) = work.pop_front() {
            seen.push(output);
            let follow_up = match output {
                // The untrusted client never answers RESET; every callback returns.
                Output::Notify { client, .. } => Some(Input::CallbackDone { client }),
                Output::Fence { client } => Some(Input::FenceDone { client }),
                Output::Hardware {
                    device,
                    command: HardwareCommand::Start,
                } => Some(Input::StartDone {
                    device,
                    result: StartResult::Started,
                }),
                Output::Hardware {
                    device,
                    command: HardwareCommand::Reset,
                } => Some(Input::ResetDone {
                    device,
                    result: ResetResult::Succeeded,
                }),
                _ => None,
            };
            if let Some(input) = follow_up {
                *timer = m.feed(now, input, |o| work.push_back(o)).unwrap().wake_at;
            }
        }
        fed.reply
    };
    run(
        &mut m,
        Tick(0),
        Input::AddDevice { device: HCA },
        &mut timer,
    );
    run(
        &mut m,
        Tick(0),
        Input::Start {
            device: HCA,
            token: RequestToken(1),
        },
        &mut timer,
    );
    let Reply::Registered { client: user, .. } = run(
        &mut m,
        Tick(1),
        Input::Register {
            device: HCA,
            kind: ClientKind::Untrusted,
        },
        &mut timer,
    ) else {
        panic!("not registered")
    };
    let Reply::Registered { client: kernel, .. } = run(
        &mut m,
        Tick(1),
        Input::Register {
            device: HCA,
            kind: ClientKind::Trusted,
        },
        &mut timer,
    ) else {
        panic!("not registered")
    };
    run(
        &mut m,
        Tick(100),
        Input::ResetRequest { client: kernel },
        &mut timer,
    );
    run(
        &mut m,
        Tick(101),
        Input::ResetExecute { client: kernel },
        &mut timer,
    );
    assert_eq!(
        timer,
        Some(Tick(100 + Config::DEFAULT.untrusted_ack_timeout))
    );
    let due = timer.unwrap();
    run(&mut m, due, Input::Timeout, &mut timer);
    assert_eq!(m.epoch(HCA), Some(Epoch(1)));
    assert_eq!(m.client(user).map(|c| c.state), Some(ClientState::Revoked));
    assert_eq!(timer, None, "nothing waits on a deadline");
    run(&mut m, due, Input::Unload, &mut timer);
    run(
        &mut m,
        due,
        Input::Unregister { client: kernel },
        &mut timer,
    );
    assert_eq!(m.driver_phase(), DriverPhase::Unloaded);
    assert_eq!(seen.last(), Some(&Output::UnloadMayFinish));
    assert_eq!(m.lost_outputs(), 0);
}

/// Naming the input and the time costs the refusal, not the bare error every other call
/// returns: `Error` stays 16 bytes (as small as `Result<Reply, Error>`), and a `Refusal`
/// is that plus the 12-byte input and the 8-byte time.
#[test]
fn naming_the_input_and_time_leaves_the_bare_error_small() {
    use core::mem::size_of;
    assert_eq!(size_of::<Error>(), 16);
    assert_eq!(size_of::<Result<Reply, Error>>(), size_of::<Error>());
    assert!(
        size_of::<Refusal>() <= size_of::<Error>() + size_of::<Input>() + size_of::<Tick>() + 4
    );
}
