//! Thread mode and the catastrophic-error interrupt as two shuttle threads contending for
//! the machine through a mutex (shuttle's, standing in for the critical section). Random and
//! PCT schedulers, `FIRMWARE_SHUTTLE_ITERATIONS` schedules per scenario and scheduler
//! (default 10,000). I1–I5 are checked on what the clients actually received, and every
//! thread must finish.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pnp_lifecycle_firmware::IsrOutcome;

use pnp_lifecycle::*;
use pnp_lifecycle_firmware::oracle::{check, Record};
use pnp_lifecycle_firmware::race::{
    Behaviour, RaceShared, RecordingBoard, ScriptedReset, CLIENTS, QUEUE, RACE_CONFIG,
};
use pnp_lifecycle_firmware::{on_fatal_interrupt, Busy, Firmware, Lock, PortError};

struct ShuttleLock(shuttle::sync::Mutex<RaceShared>);

impl Lock<RaceShared> for ShuttleLock {
    fn lock<R>(&self, f: impl FnOnce(&mut RaceShared) -> R) -> Result<R, Busy> {
        let mut guard = self.0.lock().map_err(|_| Busy)?;
        Ok(f(&mut guard))
    }
}

type Fw<'a> = Firmware<'a, ShuttleLock, ScriptedReset, RecordingBoard, 1, CLIENTS, 1, QUEUE>;

const DEV: DeviceId = DeviceId(0);
const REMOVE_TOKEN: RequestToken = RequestToken(100);
const THREAD_BOUND: usize = 5_000;

/// Per scenario: schedules in which the interrupt found the buffer busy and latched, and in
/// which it fed its request straight to the machine (proof both paths are explored).
static LATCHED: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];
static FED: [AtomicUsize; 3] = [const { AtomicUsize::new(0) }; 3];

fn iterations() -> usize {
    std::env::var("FIRMWARE_SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

#[derive(Clone, Copy, PartialEq)]
enum Scenario {
    /// Thread mode runs a client-requested reset cycle; the interrupt raises fatal errors.
    IrqDuringResetCycle,
    /// Thread mode removes the device; the interrupt raises fatal errors.
    IrqDuringRemoval,
    /// Thread mode starts a reset cycle and unloads; the interrupt raises fatal errors.
    UnloadRacesResetCycle,
}

fn feed(fw: &mut Fw<'_>, input: Input) -> Result<Reply, PortError<()>> {
    let result = fw.input(input);
    fw.board_mut().record_input(input, &result);
    result
}

fn scenario(which: Scenario) {
    let lock = Arc::new(ShuttleLock(shuttle::sync::Mutex::new(RaceShared::new(
        RACE_CONFIG,
    ))));
    let mut fw: Fw<'_> = Firmware::new(&*lock, ScriptedReset::default(), RecordingBoard::default());
    // Boot (before the interrupt is unmasked).
    feed(&mut fw, Input::AddDevice { device: DEV }).unwrap();
    feed(
        &mut fw,
        Input::Start {
            device: DEV,
            token: RequestToken(1),
        },
    )
    .unwrap();
    fw.pump().unwrap();
    let mut clients = Vec::new();
    for (kind, behaviour) in [
        (ClientKind::Trusted, Behaviour::Cooperative),
        (ClientKind::Untrusted, Behaviour::Silent),
    ] {
        let Ok(Reply::Registered { client, .. }) =
            feed(&mut fw, Input::Register { device: DEV, kind })
        else {
            panic!("register refused")
        };
        fw.board_mut().behaviour.insert(client, behaviour);
        clients.push(client);
    }
    // Unmask the interrupt.
    let isr_lock = Arc::clone(&lock);
    let isr_clock = fw.board().clock.clone();
    let isr = shuttle::thread::spawn(move || {
        let mut outcomes = Vec::new();
        for _ in 0..2 {
            outcomes.push(on_fatal_interrupt(&*isr_lock, DEV, || isr_clock.now()));
            shuttle::thread::yield_now();
        }
        outcomes
    });
    let mut script: VecDeque<Input> = match which {
        Scenario::IrqDuringResetCycle => [Input::ResetRequest { client: clients[0] }].into(),
        Scenario::IrqDuringRemoval => [Input::Remove {
            device: DEV,
            token: REMOVE_TOKEN,
        }]
        .into(),
        Scenario::UnloadRacesResetCycle => {
            [Input::ResetRequest { client: clients[0] }, Input::Unload].into()
        }
    };
    // Thread mode's main loop: act, answer for the clients, run the script, tick.
    let mut isr = Some(isr);
    let mut finished = false;
    for _ in 0..THREAD_BOUND {
        match fw.pump() {
            Ok(_) => {}
            Err(e) => panic!("thread mode: {e:?}"),
        }
        if let Some(answer) = fw.board_mut().reactions.pop_front() {
            let _ = feed(&mut fw, answer); // a revoked client's late answer is refused: fine
            continue;
        }
        if let Some(input) = script.pop_front() {
            let result = feed(&mut fw, input);
            assert!(result.is_ok(), "{input:?} refused: {result:?}");
            continue;
        }
        if let Some(handle) = isr.take() {
            let outcomes = handle.join().expect("the interrupt thread panicked");
            assert_eq!(outcomes.len(), 2);
            if outcomes.contains(&IsrOutcome::Latched) {
                LATCHED[which as usize].fetch_add(1, Ordering::Relaxed);
            }
            if outcomes.iter().any(|o| matches!(o, IsrOutcome::Fed(_))) {
                FED[which as usize].fetch_add(1, Ordering::Relaxed);
            }
            continue;
        }
        if let Some(now) = fw.poll_timeout().unwrap() {
            // Simulated time: the timer jumps to the machine's next deadline.
            fw.board().clock.set(now);
            match fw.timeout() {
                Ok(_) | Err(PortError::Refused(Error::Unloaded)) => continue,
                Err(e) => panic!("tick: {e:?}"),
            }
        }
        if fw.is_idle().unwrap() {
            finished = true;
            break;
        }
    }
    assert!(
        finished,
        "thread mode did not finish (lost wake-up or livelock)"
    );
    let (phase, driver, epoch, lost) = lock
        .lock(|s| {
            let m = s.machine();
            (
                m.phase(DEV),
                m.driver_phase(),
                m.epoch(DEV),
                s.lost_outputs(),
            )
        })
        .unwrap();
    assert_eq!(lost, 0);
    let board = fw.board();
    if let Err(violation) = check(&board.log) {
        panic!("{violation}\nlog: {:#?}", board.log);
    }
    match which {
        Scenario::IrqDuringResetCycle => {
            assert_eq!(phase, Some(PhaseKind::Running));
            assert!(epoch >= Some(Epoch(1)));
            // The cooperative client saw every cycle through.
            let events = &board.events[&clients[0]];
            assert!(
                matches!(events.last(), Some(Event::ResetEnd { .. })),
                "{events:?}"
            );
            // The silent one was revoked at its deadline, and told nothing after.
            assert_eq!(board.events[&clients[1]].last(), Some(&Event::Revoked));
        }
        Scenario::IrqDuringRemoval | Scenario::UnloadRacesResetCycle => {
            assert_eq!(phase, Some(PhaseKind::Absent));
            assert_eq!(board.count(Output::DeviceRemoved { device: DEV }), 1);
            if which == Scenario::UnloadRacesResetCycle {
                assert_eq!(driver, DriverPhase::Unloaded);
                assert_eq!(board.count(Output::UnloadMayFinish), 1);
            } else {
                assert!(board.log.contains(&Record::Output(Output::Complete {
                    device: DEV,
                    token: REMOVE_TOKEN,
                    status: Status::Success
                })));
            }
            for c in &clients {
                let last = board.events[c].last();
                assert!(
                    matches!(last, Some(Event::Removed { .. } | Event::Revoked)),
                    "{last:?}"
                );
            }
        }
    }
}

macro_rules! schedulers {
    ($($random:ident, $pct:ident => $scenario:expr;)+) => {$(
        #[cfg(not(feature = "planted-fault"))]
        #[test]
        fn $random() {
            shuttle::check_random(|| scenario($scenario), iterations());
            let i = $scenario as usize;
            assert!(LATCHED[i].load(Ordering::Relaxed) > 0, "no schedule made the interrupt latch");
            assert!(FED[i].load(Ordering::Relaxed) > 0, "no schedule let the interrupt feed");
        }

        #[cfg(not(feature = "planted-fault"))]
        #[test]
        fn $pct() {
            shuttle::check_pct(|| scenario($scenario), iterations(), 3);
        }
    )+};
}

schedulers! {
    irq_during_reset_cycle_random, irq_during_reset_cycle_pct => Scenario::IrqDuringResetCycle;
    irq_during_removal_random, irq_during_removal_pct => Scenario::IrqDuringRemoval;
    unload_races_reset_cycle_random, unload_races_reset_cycle_pct => Scenario::UnloadRacesResetCycle;
}

/// With the planted fault (the interrupt drops the outputs thread mode has not acted on),
/// shuttle must find a failing schedule.
#[cfg(feature = "planted-fault")]
#[test]
fn planted_fault_is_caught_by_shuttle() {
    for which in [
        Scenario::IrqDuringResetCycle,
        Scenario::IrqDuringRemoval,
        Scenario::UnloadRacesResetCycle,
    ] {
        let caught = std::panic::catch_unwind(|| {
            shuttle::check_random(move || scenario(which), iterations());
        });
        assert!(
            caught.is_err(),
            "the planted fault escaped {} schedules",
            iterations()
        );
    }
}
