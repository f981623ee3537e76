//! The runtime's own guarantees, with a toy port: order, one callback a client at a time,
//! waits that refuse inside a callback, fences that cancel, wait and overrun, a dispatcher
//! abandoned to a stuck callback while the others go on, and a removal whose completion
//! waits for the teardown. The threaded tests run under shuttle (random and PCT
//! schedules).

mod toy;

use std::sync::{Arc, Mutex, OnceLock};

use pnp_lifecycle::{
    ClientHandle, ClientKind, Config, Event, HardwareCommand, Input, PhaseKind, Tick,
};
use pnp_lifecycle_runtime::{
    Begin, ContextId, Dispatch, ManualClock, Runtime, UnloadError, WouldDeadlock,
};
use toy::{quiet, started, Cb, Plain, Rt, Seen, Toy, DEV};

fn no_client_called_twice_at_once(log: &[Seen]) {
    let mut inside: Vec<ClientHandle> = Vec::new();
    for s in log {
        match s {
            Seen::Enter(c, _) => {
                assert!(
                    !inside.contains(c),
                    "two callbacks of {c:?} at once: {log:?}"
                );
                inside.push(*c);
            }
            Seen::Exit(c) => inside.retain(|x| x != c),
            _ => {}
        }
    }
}

#[test]
fn a_blocking_wait_inside_a_callback_is_refused_and_changes_nothing() {
    let check = || {
        let clock = Arc::new(ManualClock::new(Tick(0)));
        let rt: Arc<Rt> = Runtime::new(Config::DEFAULT, Toy::default(), clock, Dispatch::Thread);
        started(&rt);
        let me: Arc<OnceLock<Arc<Rt>>> = Arc::new(OnceLock::new());
        let refused = Arc::new(Mutex::new(None));
        let (me2, refused2) = (Arc::clone(&me), Arc::clone(&refused));
        let cb: Cb = Arc::new(move |client, event| {
            if event == Event::Reset {
                let rt = me2.get().unwrap();
                // A blocking detach from inside the callback would wait for itself.
                let r = rt.wait_until(|o, _| o.machine().client(client).is_none().then_some(()));
                // So would a driver unload.
                let u = rt.unload();
                *refused2.lock().unwrap() = Some((r, u));
                return Some(Input::ResetExecute { client });
            }
            None
        });
        let client = rt
            .with(|o, now| o.register(now, DEV, ClientKind::Trusted, cb))
            .unwrap()
            .0;
        me.set(Arc::clone(&rt)).ok();
        rt.feed(Input::ResetRequest { client }).unwrap();
        rt.wait_until(|o, _| {
            (o.machine().epoch(DEV) == Some(pnp_lifecycle::Epoch(1))).then_some(())
        })
        .unwrap();
        assert_eq!(
            *refused.lock().unwrap(),
            Some((Err(WouldDeadlock), Err(UnloadError::WouldDeadlock)))
        );
        // The refused unload changed nothing: the driver is still loaded.
        assert!(!rt.inspect(|o| o.unload_finished()));
        rt.feed(Input::Unregister { client }).unwrap();
        rt.unload().unwrap();
        no_client_called_twice_at_once(&rt.os().log());
    };
    shuttle::check_random(check, 1_000);
    shuttle::check_pct(check, 1_000, 3);
    println!("a_blocking_wait_inside_a_callback: 2,000 schedules");
}

#[test]
fn a_stuck_callback_holds_up_only_its_own_client_and_its_fence_overruns() {
    let check = || {
        let clock = Arc::new(ManualClock::new(Tick(0)));
        let rt: Arc<Rt> = Runtime::new(
            Config::DEFAULT,
            Toy::default(),
            Arc::clone(&clock) as Arc<dyn pnp_lifecycle_runtime::Clock>,
            Dispatch::Thread,
        );
        started(&rt);
        // The stuck client blocks until released: it never returns on its own.
        let (release, wait) = shuttle::sync::mpsc::channel::<()>();
        let wait = Arc::new(Mutex::new(wait));
        let stuck: Cb = Arc::new(move |_, event| {
            if event == Event::Reset {
                let _ = wait.lock().unwrap().recv();
            }
            None
        });
        let answers: Cb = Arc::new(|client, event| {
            (event == Event::Reset).then_some(Input::ResetExecute { client })
        });
        let a = rt
            .with(|o, now| o.register(now, DEV, ClientKind::Untrusted, stuck))
            .unwrap()
            .0;
        let b = rt
            .with(|o, now| o.register(now, DEV, ClientKind::Untrusted, answers))
            .unwrap()
            .0;
        rt.feed(Input::ResetRequest { client: b }).unwrap();
        // B answers while A's callback hangs: A holds up nobody but itself.
        rt.wait_until(|o, _| {
            let entered = o.callback_running(a);
            let b_done = o.machine().client(b).is_some_and(|v| !v.callback_in_flight);
            (entered && b_done).then_some(())
        })
        .unwrap();
        // The clock passes every deadline: A's vote, its callback, the fence's grace.
        let b_got_reset_end = || {
            rt.os()
                .log()
                .iter()
                .any(|s| matches!(s, Seen::Enter(c, Event::ResetEnd { .. }) if *c == b))
        };
        // A misses its vote: revoked; the reset goes on without it (its callback touches
        // nothing through the port any more) and B is told RESET_END.
        clock.advance(10_000);
        rt.timeout().unwrap();
        rt.wait_until(|o, _| {
            let b_idle = o.machine().client(b).is_some_and(|v| !v.callback_in_flight);
            (b_got_reset_end() && b_idle).then_some(())
        })
        .unwrap();
        // A's fence waits out its running callback until the grace passes.
        assert!(!rt.os().log().iter().any(|s| matches!(s, Seen::Fenced(..))));
        clock.advance(10_000);
        rt.timeout().unwrap();
        rt.wait_until(|_, _| rt.os().log().contains(&Seen::Fenced(a, true)).then_some(()))
            .unwrap();
        let log = rt.os().log();
        assert!(log.contains(&Seen::Fenced(a, true)), "{log:?}");
        assert!(
            log.contains(&Seen::Hardware(HardwareCommand::Reset)),
            "{log:?}"
        );
        release.send(()).unwrap();
        rt.feed(Input::Unregister { client: b }).unwrap();
        rt.unload().unwrap();
        let log = rt.os().log();
        no_client_called_twice_at_once(&log);
        // Nothing reached A after its fence but the RESET it was handed before.
        let fenced_at = log
            .iter()
            .position(|s| *s == Seen::Fenced(a, true))
            .unwrap();
        let late: Vec<_> = log[fenced_at..]
            .iter()
            .filter(|s| matches!(s, Seen::Enter(c, _) if *c == a))
            .collect();
        assert!(
            late.len() <= 1 && late.iter().all(|s| **s == Seen::Enter(a, Event::Reset)),
            "{log:?}"
        );
    };
    shuttle::check_random(check, 500);
    shuttle::check_pct(check, 500, 3);
    println!("a_stuck_callback_holds_up_only_its_own_client: 1,000 schedules");
}

/// Carry out every ready work item by hand (a cooperative harness), as context 1.
fn run_all(o: &mut Plain, toy: &Toy, now: Tick) {
    let me = ContextId(1);
    while let Some(work) = o.take(me) {
        let done = pnp_lifecycle_runtime::carry_out(toy, work);
        o.finish(now, me, done);
    }
}

#[test]
fn a_fence_cancels_a_queued_callback_and_waits_for_an_operation() {
    let toy = Toy::default();
    let mut o = Plain::new(Config::DEFAULT);
    let t = Tick(0);
    o.feed(t, Input::AddDevice { device: DEV }).unwrap();
    o.submit(t, 1, |token| Input::Start { device: DEV, token })
        .unwrap();
    run_all(&mut o, &toy, t);
    let (a, epoch) = o.register(t, DEV, ClientKind::Untrusted, quiet()).unwrap();
    let (b, _) = o
        .register(
            t,
            DEV,
            ClientKind::Untrusted,
            Arc::new(|c, e| (e == Event::Reset).then_some(Input::ResetExecute { client: c })),
        )
        .unwrap();
    assert_eq!(
        o.operation_begin(t, a, epoch),
        Ok(pnp_lifecycle::AccessAnswer::Granted)
    );
    o.feed(t, Input::ResetRequest { client: b }).unwrap();
    // A's RESET is queued, not taken; A misses every deadline.
    let late = Tick(100_000);
    o.timeout(late).unwrap();
    run_all(&mut o, &toy, late);
    let log = toy.log();
    assert!(
        !log.iter()
            .any(|s| matches!(s, Seen::Enter(c, Event::Reset) if *c == a)),
        "the fence cancelled A's queued RESET: {log:?}"
    );
    assert!(
        !log.contains(&Seen::Hardware(HardwareCommand::Reset)),
        "no reset under A's operation: {log:?}"
    );
    assert!(o.poll_timeout().is_some(), "the fence waits with a grace");
    o.operation_done(late, a).unwrap();
    run_all(&mut o, &toy, late);
    let log = toy.log();
    let fenced = log.iter().position(|s| *s == Seen::Fenced(a, false));
    let reset = log
        .iter()
        .position(|s| *s == Seen::Hardware(HardwareCommand::Reset));
    assert!(
        matches!((fenced, reset), (Some(f), Some(r)) if f < r),
        "{log:?}"
    );
    assert_eq!(o.anomalies(), 0);
}

#[test]
fn a_refused_request_is_completed_with_the_refusal_and_tokens_never_collide() {
    let toy = Toy::default();
    let mut o = Plain::new(Config::DEFAULT);
    let t = Tick(0);
    // No device: refused, and the request still completes exactly once.
    let refused = o.submit(t, 7, |token| Input::Start { device: DEV, token });
    assert!(refused.is_err(), "{refused:?}");
    o.feed(t, Input::AddDevice { device: DEV }).unwrap();
    let t1 = o
        .submit(t, 8, |token| Input::QueryStop { device: DEV, token })
        .err();
    let t2 = o.submit(t, 9, |token| Input::Start { device: DEV, token });
    run_all(&mut o, &toy, t);
    let completed: Vec<u32> = toy
        .log()
        .iter()
        .filter_map(|s| match s {
            Seen::Completed(id, _) => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(completed, [7, 8, 9], "{t1:?} {t2:?}");
}

#[test]
fn the_timer_never_carries_out_work_so_a_stuck_inline_callback_is_still_fenced() {
    let check = || {
        let clock = Arc::new(ManualClock::new(Tick(0)));
        let rt: Arc<Rt> = Runtime::new(
            Config::DEFAULT,
            Toy::default(),
            Arc::clone(&clock) as Arc<dyn pnp_lifecycle_runtime::Clock>,
            Dispatch::Inline,
        );
        started(&rt);
        // A never answers RESET. B answers, then never returns from RESET_END.
        let (release, wait) = shuttle::sync::mpsc::channel::<()>();
        let wait = Arc::new(Mutex::new(wait));
        let stuck_on_end: Cb = Arc::new(move |client, event| match event {
            Event::Reset => Some(Input::ResetExecute { client }),
            Event::ResetEnd { .. } => {
                let _ = wait.lock().unwrap().recv();
                None
            }
            _ => None,
        });
        let a = rt
            .with(|o, now| o.register(now, DEV, ClientKind::Untrusted, quiet()))
            .unwrap()
            .0;
        let b = rt
            .with(|o, now| o.register(now, DEV, ClientKind::Untrusted, stuck_on_end))
            .unwrap()
            .0;
        // This thread dispatches inline: both RESET callbacks run here and return.
        rt.feed(Input::ResetRequest { client: b }).unwrap();
        // The timer: A misses its vote, the reset runs and B is told RESET_END, all of
        // it on a worker. Were the timer to carry the work out, it would be caught in
        // B's callback here and time would stop.
        clock.advance(10_000);
        rt.timeout().unwrap();
        rt.watch(|o, _| o.callback_running(b).then_some(()))
            .unwrap();
        // B's callback deadline, then its fence's grace.
        clock.advance(10_000);
        rt.timeout().unwrap();
        clock.advance(10_000);
        rt.timeout().unwrap();
        rt.watch(|_, _| rt.os().log().contains(&Seen::Fenced(b, true)).then_some(()))
            .unwrap();
        assert!(rt.inspect(|o| o.machine().client(a).is_some()));
        release.send(()).unwrap();
        rt.unload().unwrap();
        no_client_called_twice_at_once(&rt.os().log());
    };
    shuttle::check_random(check, 500);
    shuttle::check_pct(check, 500, 3);
    println!("the_timer_never_carries_out_work: 1,000 schedules");
}

#[test]
fn an_operation_in_an_idle_power_down_is_not_granted_until_the_power_up() {
    use pnp_lifecycle::{AccessAnswer, PowerDownKind};
    let toy = Toy::default();
    let mut o = Plain::new(Config::DEFAULT);
    let t = Tick(0);
    o.feed(t, Input::AddDevice { device: DEV }).unwrap();
    o.submit(t, 1, |token| Input::Start { device: DEV, token })
        .unwrap();
    run_all(&mut o, &toy, t);
    let (a, epoch) = o.register(t, DEV, ClientKind::Untrusted, quiet()).unwrap();
    o.submit(t, 2, |token| Input::PowerDown {
        device: DEV,
        kind: PowerDownKind::Idle,
        token,
    })
    .unwrap();
    run_all(&mut o, &toy, t);
    assert_eq!(o.machine().phase(DEV), Some(PhaseKind::LowPower));
    // Not in flight: the power-up comes first, and nothing is owed for this attempt.
    assert_eq!(
        o.operation_begin(t, a, epoch),
        Ok(AccessAnswer::WaitForPowerUp)
    );
    assert_eq!(
        o.machine().client(a).map(|v| v.operations_in_flight),
        Some(0)
    );
    run_all(&mut o, &toy, t);
    assert!(toy
        .log()
        .contains(&Seen::Hardware(HardwareCommand::PowerUp)));
    assert_eq!(o.operation_begin(t, a, epoch), Ok(AccessAnswer::Granted));
    assert_eq!(
        o.machine().client(a).map(|v| v.operations_in_flight),
        Some(1)
    );
    o.operation_done(t, a).unwrap();
    assert_eq!(o.anomalies(), 0);
}

#[test]
fn a_ports_wake_up_is_in_poll_timeout_until_the_timer_passes_it() {
    let mut o = Plain::new(Config::DEFAULT);
    assert_eq!(o.poll_timeout(), None);
    o.wake_at(Tick(300));
    o.wake_at(Tick(100));
    assert_eq!(o.poll_timeout(), Some(Tick(100)));
    o.timeout(Tick(99)).unwrap();
    assert_eq!(o.poll_timeout(), Some(Tick(100)), "not yet passed");
    o.timeout(Tick(100)).unwrap();
    assert_eq!(o.poll_timeout(), Some(Tick(300)));
    o.timeout(Tick(1_000)).unwrap();
    assert_eq!(o.poll_timeout(), None);
}

#[test]
fn a_removal_completes_only_after_its_teardown_returned() {
    let mut schedules = 0;
    for dispatch in [Dispatch::Thread, Dispatch::Inline] {
        let check = move || toy::remove_behind_a_slow_teardown(dispatch, |_| {});
        shuttle::check_random(check, 1_000);
        shuttle::check_pct(check, 1_000, 3);
        schedules += 2_000;
    }
    println!(
        "a_removal_completes_only_after_its_teardown_returned: {schedules} schedules, none early"
    );
}

#[test]
fn unload_errors_say_what_happened_and_keep_the_machines_refusal_as_their_source() {
    use core::error::Error as _;
    let refused = UnloadError::Refused(pnp_lifecycle::Error::Unloaded);
    assert!(
        refused.to_string().starts_with("unload refused: "),
        "{refused}"
    );
    assert!(refused.source().is_some());
    let deadlock = UnloadError::from(WouldDeadlock);
    assert_eq!(deadlock, UnloadError::WouldDeadlock);
    assert_eq!(deadlock.to_string(), WouldDeadlock.to_string());
    assert!(deadlock.source().is_none());
}

/// The port-held gate (issue 21): granted on the fast path while the machine keeps it
/// open; a stale epoch falls to the machine, which refuses it by name and counts nothing;
/// an operation ended through another client's gate is ended on its own client's.
#[test]
fn a_client_gate_grants_only_its_open_and_ends_an_operation_on_its_own_client() {
    shuttle::check_random(
        || {
            let clock = Arc::new(ManualClock::new(Tick(0)));
            let rt: Arc<Rt> =
                Runtime::new(Config::DEFAULT, Toy::default(), clock, Dispatch::Inline);
            toy::started(&rt);
            let reg = || {
                rt.with(|o, now| o.register(now, DEV, ClientKind::Trusted, quiet()))
                    .unwrap()
            };
            let ((a, epoch), (b, _)) = (reg(), reg());
            let (ga, gb) = (rt.client_gate(a).unwrap(), rt.client_gate(b).unwrap());
            assert_eq!(ga.client(), a);
            let Ok(Begin::Granted(op)) = rt.operation_begin_on(&ga, epoch) else {
                panic!("not granted")
            };
            assert!(op.on_fast_path());
            assert_eq!(op.client(), a);
            assert_eq!(rt.inspect(|o| o.operations_in_flight(a)), 1);
            // Ended through b's gate: a's count drops, b's is untouched.
            rt.operation_end_on(&gb, op).unwrap();
            assert_eq!(rt.inspect(|o| o.operations_in_flight(a)), 0);
            assert_eq!(rt.inspect(|o| o.operations_in_flight(b)), 0);
            let stale = pnp_lifecycle::Epoch(epoch.0 + 1);
            assert!(rt.operation_begin_fast_on(&ga, stale).is_none());
            assert_eq!(
                rt.operation_begin_on(&ga, stale).unwrap_err(),
                pnp_lifecycle::Error::StaleEpoch { current: epoch }
            );
            assert_eq!(
                rt.inspect(|o| o.operations_in_flight(a)),
                0,
                "nothing counted"
            );
            assert_eq!(rt.inspect(|o| o.anomalies()), 0);
        },
        1,
    );
}
