//! The cooperative schedule harness (the `firmware_irq_race` fuzz target): thread mode, the
//! clients and the catastrophic-error interrupt as actors, each schedule byte picking who
//! steps next, so the interrupt can land between any two thread-mode steps. Thread-free,
//! cheap, and [`run`] never panics.

use std::cell::RefCell;
use std::collections::VecDeque;

use pnp_lifecycle::{
    ClientHandle, ClientKind, DriverPhase, Event, Input, Output, PhaseKind, Reply, RequestToken,
};
use pnp_lifecycle_firmware::{Board, Firmware, Lock, PortError, ResetControl, Step};

use super::board::{
    feed_client, AsRecording, Behaviour, CellLock, RaceShared, RecordingBoard, ScriptedReset,
    CLIENTS, DEV, QUEUE, RACE_CONFIG,
};
use super::faults::{raise, EagerPulse, Fault, IsrPath};
use super::{check, Recorder};

const REMOVE_TOKEN: RequestToken = RequestToken(100);
const FATAL_INTERRUPTS: u32 = 2;
const FINISH_BOUND: u32 = 4_000;

type Fw<'a, B> = Firmware<'a, CellLock<RaceShared>, ScriptedReset, B, 1, CLIENTS, 1, QUEUE>;

/// Run one schedule on the shipped port: a started device with a trusted and an untrusted
/// cooperative client and a silent untrusted one; thread mode asks for a reset, then
/// unloads (byte 0 even) or removes the device (odd); the interrupt raises two fatal errors
/// (feeding, or only latching when bit 6 of byte 0 is set); bit 7 makes every reset pulse
/// fail. Each later byte picks the actor that steps (`% 3`: thread mode, clients,
/// interrupt). Then every actor runs to the end. Checked: [`super::check`] (the common
/// oracle and the board checks), every actor finished, nothing lost or owed, the device
/// removed and `DeviceRemoved` / `UnloadMayFinish` exactly once, every client's last event
/// `Removed` or `Revoked`. `Err` names what broke.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    run_with(schedule, Fault::None)
}

/// [`run`] with a planted fault (`Fault::UnmaskedLock` needs preemption: the shuttle
/// scenarios only; here it runs as the control).
pub fn run_with(schedule: &[u8], fault: Fault) -> Result<(), String> {
    let rec = Recorder::default();
    let board = RecordingBoard::new(rec.clone());
    match fault {
        Fault::EagerPulse => run_on(schedule, fault, EagerPulse(board), rec),
        _ => run_on(schedule, fault, board, rec),
    }
}

fn run_on<B: Board + AsRecording>(
    schedule: &[u8],
    fault: Fault,
    board: B,
    rec: Recorder,
) -> Result<(), String> {
    let first = schedule.first().copied().unwrap_or(0);
    let unload = first & 1 == 0;
    let path = if first & 0x40 != 0 {
        IsrPath::Latch
    } else {
        IsrPath::Feed
    };
    let lock = CellLock(RefCell::new(RaceShared::new(RACE_CONFIG)));
    let reset = ScriptedReset {
        fail: first & 0x80 != 0,
        pulses: 0,
    };
    let mut fw: Fw<'_, B> = Firmware::new(&lock, reset, board);
    let clients = setup(&mut fw)?;
    let c0 = *clients.first().ok_or("no client")?;
    let script: VecDeque<Input> = [
        Input::ResetRequest { client: c0 },
        if unload {
            Input::Unload
        } else {
            Input::Remove {
                device: DEV,
                token: REMOVE_TOKEN,
            }
        },
    ]
    .into();
    let mut actors = Actors {
        fw,
        script,
        isr_fired: 0,
        lock: &lock,
        path,
        fault,
        rec: rec.clone(),
    };
    for byte in schedule.iter().skip(1) {
        match byte % 3 {
            0 => actors.thread_step()?,
            1 => actors.client_step()?,
            _ => actors.isr_step(),
        };
    }
    let mut rounds = 0u32;
    while actors.thread_step()? | actors.client_step()? | actors.isr_step() {
        rounds += 1;
        if rounds > FINISH_BOUND {
            return Err(format!("livelock: still busy after {FINISH_BOUND} rounds"));
        }
    }
    let Actors {
        mut fw,
        script,
        isr_fired,
        ..
    } = actors;
    if !script.is_empty() || isr_fired != FATAL_INTERRUPTS {
        return Err(format!(
            "an actor did not finish: {script:?}, {isr_fired} raises"
        ));
    }
    let (phase, driver, lost) = lock
        .lock(|s| {
            let m = s.machine();
            (m.phase(DEV), m.driver_phase(), s.lost_outputs())
        })
        .map_err(|_| "lock busy at the end")?;
    if lost != 0 || fw.owed() != 0 {
        return Err(format!(
            "{lost} outputs lost, {} completions owed",
            fw.owed()
        ));
    }
    check(&rec.snapshot(), true)?;
    let board = fw.board_mut().recording();
    if !board.reactions.is_empty() {
        return Err(format!("client answers not fed: {:?}", board.reactions));
    }
    if phase != Some(PhaseKind::Absent) {
        return Err(format!("device not removed: {phase:?}"));
    }
    if board.count(Output::DeviceRemoved { device: DEV }) != 1 {
        return Err("DeviceRemoved not emitted exactly once".into());
    }
    if unload && (driver != DriverPhase::Unloaded || board.count(Output::UnloadMayFinish) != 1) {
        return Err(format!("unload did not finish exactly once: {driver:?}"));
    }
    for c in &clients {
        let last = board.events.get(c).and_then(|e| e.last()).copied();
        if !matches!(last, Some(Event::Removed { .. } | Event::Revoked)) {
            return Err(format!("client {c:?} ended on {last:?}"));
        }
    }
    Ok(())
}

/// Boot a device of the harness and register its three clients (trusted cooperative,
/// untrusted cooperative, untrusted silent), recording the start request.
pub fn setup<L, R, B>(
    fw: &mut Firmware<'_, L, R, B, 1, CLIENTS, 1, QUEUE>,
) -> Result<Vec<ClientHandle>, String>
where
    L: Lock<RaceShared>,
    R: ResetControl,
    R::Error: core::fmt::Debug,
    B: Board + AsRecording,
{
    let err = |e: PortError<R::Error>| format!("setup: {e:?}");
    fw.input(Input::AddDevice { device: DEV }).map_err(err)?;
    let start = Input::Start {
        device: DEV,
        token: RequestToken(1),
    };
    let result = fw.input(start);
    fw.board_mut().recording().record_request(start, &result);
    result.map_err(err)?;
    fw.pump().map_err(err)?;
    let mut clients = Vec::new();
    for (kind, behaviour) in [
        (ClientKind::Trusted, Behaviour::Cooperative),
        (ClientKind::Untrusted, Behaviour::Cooperative),
        (ClientKind::Untrusted, Behaviour::Silent),
    ] {
        match fw
            .input(Input::Register { device: DEV, kind })
            .map_err(err)?
        {
            Reply::Registered { client, .. } => {
                fw.board_mut()
                    .recording()
                    .behaviour
                    .insert(client, behaviour);
                clients.push(client);
            }
            other => return Err(format!("setup: register answered {other:?}")),
        }
    }
    Ok(clients)
}

struct Actors<'a, B: Board + AsRecording> {
    fw: Fw<'a, B>,
    script: VecDeque<Input>,
    isr_fired: u32,
    lock: &'a CellLock<RaceShared>,
    path: IsrPath,
    fault: Fault,
    rec: Recorder,
}

impl<B: Board + AsRecording> Actors<'_, B> {
    /// One thread-mode step: a unit of port work, else the next scripted input, else a tick
    /// to the machine's next deadline. `Ok(false)`: nothing to do.
    fn thread_step(&mut self) -> Result<bool, String> {
        match self.fw.step() {
            Ok(Step::Idle) => {}
            Ok(_) | Err(PortError::Reset { .. }) => return Ok(true),
            Err(e) => return Err(format!("thread mode: {e:?}")),
        }
        if let Some(input) = self.script.front().copied() {
            let result = self.fw.submit(input);
            match result {
                Err(PortError::Backlog { .. }) => return Ok(true),
                Err(PortError::Busy | PortError::Stalled) => {
                    return Err(format!("thread mode: {result:?}"))
                }
                _ => {}
            }
            self.fw
                .board_mut()
                .recording()
                .record_request(input, &result);
            self.script.pop_front();
            return Ok(true);
        }
        let timeout = self.fw.poll_timeout().map_err(|_| "busy")?;
        if let Some(now) = timeout {
            self.fw.board_mut().recording().clock.set(now);
            return match self.fw.submit(Input::Timeout) {
                Ok(_) | Err(PortError::Backlog { .. }) => Ok(true),
                Err(e) => Err(format!("tick: {e:?}")),
            };
        }
        Ok(false)
    }

    /// One client answer fed (a refusal is fine: a revoked client's late `reset_execute`).
    fn client_step(&mut self) -> Result<bool, String> {
        let Some(input) = self.fw.board_mut().recording().reactions.pop_front() else {
            return Ok(false);
        };
        match feed_client(&mut self.fw, input) {
            Err(PortError::Backlog { .. }) => {
                self.fw.board_mut().recording().reactions.push_front(input)
            }
            Err(e @ (PortError::Busy | PortError::Stalled)) => {
                return Err(format!("client: {e:?}"))
            }
            _ => {}
        }
        Ok(true)
    }

    fn isr_step(&mut self) -> bool {
        if self.isr_fired >= FATAL_INTERRUPTS {
            return false;
        }
        self.isr_fired += 1;
        let clock = self.fw.board_mut().recording().clock.clone();
        raise(
            self.lock,
            DEV,
            self.path,
            self.fault,
            || clock.now(),
            &self.rec,
        );
        true
    }
}
