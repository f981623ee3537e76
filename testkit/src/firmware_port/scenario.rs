//! Thread mode and the catastrophic-error interrupt as two shuttle threads contending for
//! the machine through [`ShuttleLock`] (the critical section), for the shuttle tests in
//! `ports/firmware/tests/`. One call is one execution: run it under `shuttle::check_random`
//! or `shuttle::check_pct`. It panics on a finding.

use std::collections::VecDeque;
use std::sync::Arc;

use shuttle::rand::Rng;

use pnp_lifecycle::{
    ClientHandle, DriverPhase, Epoch, Error, Event, Input, Output, PhaseKind, RequestToken, Status,
};
use pnp_lifecycle_firmware::{Board, Firmware, IsrOutcome, Lock, PortError};

use super::board::{
    feed_client, AsRecording, RaceShared, RecordingBoard, ScriptedReset, ShuttleLock, CLIENTS, DEV,
    QUEUE, RACE_CONFIG,
};
use super::faults::{raise, EagerPulse, Fault, IsrPath};
use super::race::setup;
use super::{check, Rec, Recorder};

/// What thread mode does while the interrupt raises two fatal errors (one in
/// `OneIrqDuringResetCycle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// A client-requested reset cycle.
    IrqDuringResetCycle,
    /// A client-requested reset cycle and a single fatal error: nothing coalesces with it,
    /// so where it lands decides whether a follow-up cycle runs.
    OneIrqDuringResetCycle,
    /// Removal of the device.
    IrqDuringRemoval,
    /// A reset cycle, then unload.
    UnloadRacesResetCycle,
}

const REMOVE_TOKEN: RequestToken = RequestToken(100);
const THREAD_BOUND: usize = 5_000;
/// The interrupt yields up to this many times before each raise.
const ISR_SPREAD: u32 = 120;

/// One execution of `which` with the interrupt body `path` and the planted `fault`
/// (`Fault::None`: the shipped port). Panics on a finding: the common oracle or a board
/// check failing, thread mode not finishing (lost wake-up, livelock), a lost output, or
/// the wrong end state (running at a higher epoch with the silent client revoked; removed
/// with the request completed; unloaded exactly once). Returns the interrupt's outcomes.
pub fn run(which: Scenario, path: IsrPath, fault: Fault) -> Vec<IsrOutcome> {
    let rec = Recorder::default();
    let board = RecordingBoard::new(rec.clone());
    match fault {
        Fault::EagerPulse => run_on(which, path, fault, EagerPulse(board), rec),
        _ => run_on(which, path, fault, board, rec),
    }
}

fn run_on<B: Board + AsRecording>(
    which: Scenario,
    path: IsrPath,
    fault: Fault,
    board: B,
    rec: Recorder,
) -> Vec<IsrOutcome> {
    let shared = RaceShared::new(RACE_CONFIG);
    let lock = Arc::new(if fault == Fault::UnmaskedLock {
        ShuttleLock::unmasked(shared)
    } else {
        ShuttleLock::new(shared)
    });
    let reset = ScriptedReset::default();
    let mut fw: Firmware<'_, _, _, B, 1, CLIENTS, 1, QUEUE> = Firmware::new(&*lock, reset, board);
    // Boot before the interrupt is unmasked; two clients: trusted cooperative, untrusted
    // cooperative (the third, silent one, is revoked at its deadline).
    let clients: Vec<ClientHandle> = setup(&mut fw).expect("boot");
    let isr_lock = Arc::clone(&lock);
    let isr_clock = fw.board_mut().recording().clock.clone();
    let isr_rec = rec.clone();
    let isr = shuttle::thread::spawn(move || {
        let mut outcomes = Vec::new();
        let raises = if which == Scenario::OneIrqDuringResetCycle {
            1
        } else {
            2
        };
        for _ in 0..raises {
            // The interrupt lands anywhere in the run: before, during or after the cycle.
            for _ in 0..shuttle::rand::thread_rng().gen_range(0..ISR_SPREAD) {
                shuttle::thread::yield_now();
            }
            let now = || isr_clock.now();
            outcomes.push(raise(&isr_lock.isr(), DEV, path, fault, now, &isr_rec));
        }
        outcomes
    });
    let mut script: VecDeque<Input> = match which {
        Scenario::IrqDuringResetCycle | Scenario::OneIrqDuringResetCycle => {
            [Input::ResetRequest { client: clients[0] }].into()
        }
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
    let mut outcomes = Vec::new();
    let mut finished = false;
    for _ in 0..THREAD_BOUND {
        if let Err(e) = fw.pump() {
            panic!("thread mode: {e:?}");
        }
        if let Some(answer) = fw.board_mut().recording().reactions.pop_front() {
            let _ = feed_client(&mut fw, answer); // a revoked client's late answer: refused
            continue;
        }
        if let Some(input) = script.pop_front() {
            let result = fw.input(input);
            fw.board_mut().recording().record_request(input, &result);
            assert!(result.is_ok(), "{input:?} refused: {result:?}");
            continue;
        }
        if let Some(now) = fw.poll_timeout().expect("busy") {
            // Simulated time: the timer jumps to the machine's next deadline.
            fw.board_mut().recording().clock.set(now);
            match fw.timeout() {
                Ok(_) | Err(PortError::Refused(Error::Unloaded)) => continue,
                Err(e) => panic!("tick: {e:?}"),
            }
        }
        if let Some(handle) = isr.take() {
            // Nothing else to do: wait for the interrupt's last raise (as `wfi` would).
            outcomes = handle.join().expect("the interrupt thread panicked");
            continue;
        }
        if !fw.has_work().expect("busy") {
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
        .expect("busy");
    assert_eq!(lost, 0, "outputs lost");
    let log = rec.snapshot();
    if let Err(finding) = check(&log, true) {
        panic!("{finding}\nlog: {log:#?}");
    }
    let board = fw.board_mut().recording();
    match which {
        Scenario::IrqDuringResetCycle | Scenario::OneIrqDuringResetCycle => {
            assert_eq!(phase, Some(PhaseKind::Running));
            assert!(epoch >= Some(Epoch(1)));
            let events = &board.events[&clients[0]];
            assert!(
                matches!(events.last(), Some(Event::ResetEnd { .. })),
                "{events:?}"
            );
            // The silent one was revoked at its deadline, and told nothing after.
            assert_eq!(board.events[&clients[2]].last(), Some(&Event::Revoked));
        }
        Scenario::IrqDuringRemoval | Scenario::UnloadRacesResetCycle => {
            assert_eq!(phase, Some(PhaseKind::Absent));
            assert_eq!(board.count(Output::DeviceRemoved { device: DEV }), 1);
            if which == Scenario::UnloadRacesResetCycle {
                assert_eq!(driver, DriverPhase::Unloaded);
                assert_eq!(board.count(Output::UnloadMayFinish), 1);
            } else {
                let done = Output::Complete {
                    device: DEV,
                    token: REMOVE_TOKEN,
                    status: Status::Success,
                };
                assert!(log.contains(&Rec::Output(done)), "removal never completed");
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
    outcomes
}
