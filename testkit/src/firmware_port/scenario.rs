//! Thread mode and the catastrophic-error interrupt as two shuttle threads contending for
//! the machine through [`ShuttleLock`] (the critical section), for the shuttle tests in
//! `ports/firmware/tests/`. One call is one execution: run it under `shuttle::check_random`
//! or `shuttle::check_pct`. It panics on a finding.

use std::collections::VecDeque;
use std::sync::Arc;

use shuttle::rand::Rng;

use std::sync::atomic::{AtomicBool, Ordering};

use pnp_lifecycle::{
    Access, ClientHandle, DriverPhase, Epoch, Error, Event, HardwareCommand, Input, Output,
    PhaseKind, PowerDownKind, Reply, RequestToken, Status,
};
use pnp_lifecycle_firmware::{Board, Firmware, IsrOutcome, Lock, PortError, Step};

use super::board::{
    feed_client, AsRecording, RaceShared, RecordingBoard, ScriptedReset, ShuttleLock, CLIENTS, DEV,
    QUEUE, RACE_CONFIG,
};
use super::faults::{raise, EagerPulse, Fault, IsrPath, QuiesceOnRelease};
use super::race::setup;
use super::{check, client_id, Rec, Recorder};
use crate::observed::Obs;

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
    /// An idle power-down racing one fatal error (the interrupt latch) and a client access
    /// that an interrupt announces (thread mode makes it with [`Firmware::access`]): either
    /// wakes the device through the core.
    IdlePowerDownRacesIrq,
    /// System sleep, then surprise removal (in Dx unless the interrupt's cycle delays the
    /// sleep), then remove.
    SurpriseRemovalInDx,
    /// System sleep, then remove.
    RemoveInDx,
    /// An idle power-down, then unload.
    UnloadInDx,
}

const REMOVE_TOKEN: RequestToken = RequestToken(100);
const POWER_TOKEN: RequestToken = RequestToken(200);
const WAKE_TOKEN: RequestToken = RequestToken(201);
/// How long an access waits for the power-up, in ticks.
const ACCESS_WAIT: u64 = 1_000;
const THREAD_BOUND: usize = 5_000;
/// The interrupt yields up to this many times before each raise.
const ISR_SPREAD: u32 = 120;

/// One execution of `which` with the interrupt body `path` and the planted `fault`
/// (`Fault::None`: the shipped port). Panics on a finding: the common oracle or a board
/// check failing, thread mode not finishing (lost wake-up, livelock), a lost output, or
/// the wrong end state (running at a higher epoch with the silent client revoked; removed
/// with the request completed; unloaded exactly once). Returns the interrupt's outcomes.
pub fn run(which: Scenario, path: IsrPath, fault: Fault) -> Vec<IsrOutcome> {
    run_power(which, path, fault).0
}

/// Where a run's interrupts landed relative to the power state, for coverage counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PowerCoverage {
    /// A fatal error was raised while the board was powered down.
    pub raised_in_dx: bool,
    /// The device was powered up with no application wake: a client's access did it.
    pub woken_by_access: bool,
    /// Removal or unload released the resources of a powered-down device.
    pub released_in_dx: bool,
}

/// [`run`], also saying where the interrupts landed.
pub fn run_power(which: Scenario, path: IsrPath, fault: Fault) -> (Vec<IsrOutcome>, PowerCoverage) {
    let rec = Recorder::default();
    let board = RecordingBoard::new(rec.clone());
    match fault {
        Fault::EagerPulse => run_on(which, path, fault, EagerPulse(board), rec),
        Fault::QuiesceOnRelease => run_on(which, path, fault, QuiesceOnRelease(board), rec),
        _ => run_on(which, path, fault, board, rec),
    }
}

fn run_on<B: Board + AsRecording>(
    which: Scenario,
    path: IsrPath,
    fault: Fault,
    board: B,
    rec: Recorder,
) -> (Vec<IsrOutcome>, PowerCoverage) {
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
    let powered_down = Arc::clone(&fw.board_mut().recording().powered_down);
    let access_irq = Arc::new(AtomicBool::new(false));
    let isr_access = Arc::clone(&access_irq);
    let isr = shuttle::thread::spawn(move || {
        let mut outcomes = Vec::new();
        let (raises, access) = match which {
            Scenario::OneIrqDuringResetCycle => (1, false),
            Scenario::IdlePowerDownRacesIrq => (1, true),
            _ => (2, false),
        };
        let spread = || {
            // The interrupt lands anywhere in the run: before, during or after the cycle.
            for _ in 0..shuttle::rand::thread_rng().gen_range(0..ISR_SPREAD) {
                shuttle::thread::yield_now();
            }
        };
        for _ in 0..raises {
            spread();
            let now = || isr_clock.now();
            outcomes.push(raise(&isr_lock.isr(), DEV, path, fault, now, &isr_rec));
            if fault == Fault::IsrWakesByReset && powered_down.load(Ordering::SeqCst) {
                // PLANTED: the interrupt wakes the device itself with the reset line.
                let (device, command) = (DEV, HardwareCommand::Reset);
                isr_rec.obs(Obs::Hardware { device, command });
            }
        }
        if access {
            spread();
            // A host request arrived: the interrupt tells thread mode (and wakes `wfi`).
            isr_access.store(true, Ordering::SeqCst);
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
        Scenario::IdlePowerDownRacesIrq => [power_down(PowerDownKind::Idle)].into(),
        Scenario::SurpriseRemovalInDx => [
            power_down(PowerDownKind::SystemSleep),
            Input::SurpriseRemoval { device: DEV },
            Input::Remove {
                device: DEV,
                token: REMOVE_TOKEN,
            },
        ]
        .into(),
        Scenario::RemoveInDx => [
            power_down(PowerDownKind::SystemSleep),
            Input::Remove {
                device: DEV,
                token: REMOVE_TOKEN,
            },
        ]
        .into(),
        Scenario::UnloadInDx => [power_down(PowerDownKind::Idle), Input::Unload].into(),
    };
    let (mut accesses, mut woke) = (Vec::new(), false);
    // Thread mode's main loop: act, answer for the clients, run the script, tick.
    let mut isr = Some(isr);
    let mut outcomes = Vec::new();
    let mut finished = false;
    for _ in 0..THREAD_BOUND {
        loop {
            match fw.step() {
                Ok(Step::Idle) => break,
                Ok(Step::ReplayedFatal(device, result)) => {
                    rec.push(Rec::Replayed { device, result });
                }
                Ok(_) => {}
                Err(e) => panic!("thread mode: {e:?}"),
            }
        }
        if let Some(answer) = fw.board_mut().recording().reactions.pop_front() {
            let _ = feed_client(&mut fw, answer); // a revoked client's late answer: refused
            continue;
        }
        if let Some(input) = script.pop_front() {
            let result = fw.input(input);
            fw.board_mut().recording().record_request(input, &result);
            // A power-down may be refused (an idle one is not started during a reset cycle).
            let power = matches!(input, Input::PowerDown { .. });
            assert!(result.is_ok() || power, "{input:?} refused: {result:?}");
            continue;
        }
        if access_irq.swap(false, Ordering::SeqCst) {
            accesses.push(access(&mut fw, clients[0]));
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
        let low = fw.with_machine(|m| m.phase(DEV)).expect("busy") == Some(PhaseKind::LowPower);
        if which == Scenario::IdlePowerDownRacesIrq && low && !woke {
            // Nothing woke the device: the application does, so the run ends in D0.
            woke = true;
            let input = Input::PowerUp {
                device: DEV,
                token: WAKE_TOKEN,
            };
            let result = fw.input(input);
            fw.board_mut().recording().record_request(input, &result);
            assert!(result.is_ok(), "wake refused: {result:?}");
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
    let coverage = power_coverage(&log, woke);
    if let Err(finding) = check(&log, true) {
        panic!("{finding}\nlog: {log:#?}");
    }
    let board = fw.board_mut().recording();
    match which {
        Scenario::IdlePowerDownRacesIrq => {
            assert!(
                !accesses.contains(&Err(PortError::PowerUpTimedOut { client: clients[0] })),
                "{accesses:?}"
            );
            // Woken by the access, or by the application at the end.
            assert_eq!(phase, Some(PhaseKind::Running), "accesses {accesses:?}");
        }
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
        Scenario::IrqDuringRemoval
        | Scenario::UnloadRacesResetCycle
        | Scenario::SurpriseRemovalInDx
        | Scenario::RemoveInDx
        | Scenario::UnloadInDx => {
            assert_eq!(phase, Some(PhaseKind::Absent));
            assert_eq!(board.count(Output::DeviceRemoved { device: DEV }), 1);
            if matches!(
                which,
                Scenario::UnloadRacesResetCycle | Scenario::UnloadInDx
            ) {
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
    (outcomes, coverage)
}

fn power_coverage(log: &[Rec], woke: bool) -> PowerCoverage {
    let hw = |r: &Rec, c: HardwareCommand| matches!(r, Rec::Obs(Obs::Hardware { command, .. }) if *command == c);
    let mut coverage = PowerCoverage::default();
    let mut down = false;
    for r in log {
        if hw(r, HardwareCommand::PowerDown) {
            down = true;
        } else if hw(r, HardwareCommand::PowerUp) {
            down = false;
            coverage.woken_by_access |= !woke;
        } else if hw(r, HardwareCommand::ReleaseResources) {
            coverage.released_in_dx |= down;
            down = false;
        } else if matches!(r, Rec::Raise { .. }) {
            coverage.raised_in_dx |= down;
        }
    }
    coverage
}

fn power_down(kind: PowerDownKind) -> Input {
    Input::PowerDown {
        device: DEV,
        kind,
        token: POWER_TOKEN,
    }
}

/// A client's hardware operation that an interrupt announced, made from thread mode: the
/// access (waiting for a power-up after an idle power-down), the operation, its end.
fn access<B: Board + AsRecording>(
    fw: &mut Firmware<'_, ShuttleLock<RaceShared>, ScriptedReset, B, 1, CLIENTS, 1, QUEUE>,
    client: ClientHandle,
) -> Result<Reply, PortError<()>> {
    let epoch = fw
        .with_machine(|m| m.epoch(DEV))
        .expect("busy")
        .expect("device");
    let result = fw.access(client, epoch, Access::HardwareOp, ACCESS_WAIT);
    if result == Ok(Reply::AccessGranted) {
        let (rec, id) = (fw.board_mut().recording().rec.clone(), client_id(client));
        rec.obs(Obs::OperationBegin {
            client: id,
            device: DEV,
        });
        rec.obs(Obs::OperationEnd {
            client: id,
            device: DEV,
        });
        fw.input(Input::AccessDone { client }).expect("access done");
    }
    result
}
