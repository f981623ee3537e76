//! A deterministic schedule harness (feature `race`, uses std): thread mode, the clients
//! and the catastrophic-error interrupt as cooperative actors, each schedule byte picking
//! who steps next, so the interrupt can land between any two thread-mode steps. Built for a
//! cargo-fuzz target: cheap, and [`run`] never panics.

use core::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::format;
use std::string::String;
use std::vec::Vec;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pnp_lifecycle::{
    queue_capacity, ClientHandle, ClientKind, Config, DeviceId, DriverPhase, Event, Input, Output,
    PhaseKind, Reply, RequestToken, Tick, TrustedTimeoutPolicy,
};

use crate::lock::{Busy, Lock};
use crate::oracle::{check, Record};
use crate::{on_fatal_interrupt, Board, Firmware, PortError, ResetControl, Shared, Step};

/// How a recorded client answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers `RESET` with `reset_execute`; detaches on `Removed` or `Revoked`.
    Cooperative,
    /// Never answers `RESET` (revoked at its deadline); detaches on `Removed`/`Revoked`.
    Silent,
}

/// A simulated monotonic timer shared by thread mode and the interrupt: it moves only when
/// told to (never backwards).
#[derive(Debug, Clone, Default)]
pub struct SimClock(Arc<AtomicU64>);

impl SimClock {
    /// The time now.
    pub fn now(&self) -> Tick {
        Tick(self.0.load(Ordering::SeqCst))
    }

    /// Move to `now` (an earlier value is ignored).
    pub fn set(&self, now: Tick) {
        self.0.fetch_max(now.0, Ordering::SeqCst);
    }
}

/// A [`Board`] that records every output (for the [`crate::oracle`]), every client's events
/// in order, and queues each client's answer for whoever plays the clients.
#[derive(Debug, Default)]
pub struct RecordingBoard {
    /// Everything, in order.
    pub log: Vec<Record>,
    /// Each client's events, in order.
    pub events: BTreeMap<ClientHandle, Vec<Event>>,
    /// Client answers not yet fed, oldest first.
    pub reactions: VecDeque<Input>,
    /// How each client answers (absent: cooperative).
    pub behaviour: BTreeMap<ClientHandle, Behaviour>,
    /// The platform timer.
    pub clock: SimClock,
    /// Clients whose path the board masked ([`Board::fence`]), in order.
    pub fenced: Vec<ClientHandle>,
}

impl Board for RecordingBoard {
    fn now(&mut self) -> Tick {
        self.clock.now()
    }

    fn fence(&mut self, client: ClientHandle) {
        self.fenced.push(client);
        // A fenced client is done with the device: it detaches.
        self.reactions
            .retain(|r| !matches!(r, Input::ResetExecute { client: c } if *c == client));
        self.reactions.push_back(Input::Unregister { client });
    }

    fn notify(&mut self, client: ClientHandle, event: Event) {
        self.events.entry(client).or_default().push(event);
        let behaviour = self
            .behaviour
            .get(&client)
            .copied()
            .unwrap_or(Behaviour::Cooperative);
        match (event, behaviour) {
            (Event::Reset, Behaviour::Cooperative) => {
                self.reactions.push_back(Input::ResetExecute { client })
            }
            (Event::Removed { .. } | Event::Revoked, _) => {
                self.reactions.push_back(Input::Unregister { client })
            }
            _ => {}
        }
    }

    fn observe(&mut self, output: &Output) {
        self.log.push(Record::Output(*output));
    }
}

impl RecordingBoard {
    /// Record an input fed from outside the port (a PnP event, a client answer).
    pub fn record_input<E>(&mut self, input: Input, result: &Result<Reply, PortError<E>>) {
        match result {
            Ok(reply) => self.log.push(Record::Input(input, Ok(*reply))),
            Err(PortError::Refused(error)) => self.log.push(Record::Input(input, Err(*error))),
            Err(_) => {}
        }
    }

    /// How many outputs equal `output`.
    pub fn count(&self, output: Output) -> usize {
        self.log
            .iter()
            .filter(|r| **r == Record::Output(output))
            .count()
    }
}

/// A reset control that succeeds, or fails every pulse.
#[derive(Debug, Default)]
pub struct ScriptedReset {
    /// Fail every pulse.
    pub fail: bool,
    /// Pulses commanded.
    pub pulses: u32,
}

impl ResetControl for ScriptedReset {
    type Error = ();
    fn reset(&mut self, _device: DeviceId) -> Result<(), ()> {
        self.pulses = self.pulses.saturating_add(1);
        if self.fail {
            Err(())
        } else {
            Ok(())
        }
    }
}

/// A plain `RefCell` lock for single-threaded cooperative runs.
#[derive(Debug)]
pub struct CellLock<T>(pub RefCell<T>);

impl<T> Lock<T> for CellLock<T> {
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, Busy> {
        let mut value = self.0.try_borrow_mut().map_err(|_| Busy)?;
        Ok(f(&mut value))
    }
}

/// Clients a device of the harness has.
pub const CLIENTS: usize = 3;
/// The harness machine's output queue.
pub const QUEUE: usize = queue_capacity(1, CLIENTS);
/// The harness's shared state: 1 device, 3 clients, 1 physical port.
pub type RaceShared = Shared<1, CLIENTS, 1, QUEUE>;

/// Short deadlines, so a few ticks pass them.
pub const RACE_CONFIG: Config = Config {
    untrusted_ack_timeout: 10,
    trusted_ack_timeout: 20,
    trusted_policy: TrustedTimeoutPolicy::Revoke,
    detach_timeout: 10,
    callback_timeout: 15,
    operation_timeout: 15,
};

const DEV: DeviceId = DeviceId(0);
const REMOVE_TOKEN: RequestToken = RequestToken(100);
const FATAL_INTERRUPTS: u32 = 2;
const FINISH_BOUND: u32 = 4_000;

type RaceFirmware<'a> =
    Firmware<'a, CellLock<RaceShared>, ScriptedReset, RecordingBoard, 1, CLIENTS, 1, QUEUE>;

/// Run one schedule: a started device with a trusted and an untrusted cooperative client
/// and a silent untrusted one; thread mode asks for a reset, then unloads (schedule byte 0
/// even) or removes the device (odd); the interrupt raises two fatal errors; bit 7 of byte 0
/// makes every reset pulse fail. Each later byte picks the actor that steps (`% 3`: thread
/// mode, clients, interrupt). Then every actor runs to the end. `Err` names the broken
/// invariant or the actor that did not finish.
pub fn run(schedule: &[u8]) -> Result<(), String> {
    let first = schedule.first().copied().unwrap_or(0);
    let unload = first & 1 == 0;
    let fail_reset = first & 0x80 != 0;
    let lock = CellLock(RefCell::new(RaceShared::new(RACE_CONFIG)));
    let reset = ScriptedReset {
        fail: fail_reset,
        pulses: 0,
    };
    let mut fw: RaceFirmware<'_> = Firmware::new(&lock, reset, RecordingBoard::default());
    let mut clients = Vec::new();
    setup(&mut fw, &mut clients)?;
    let c0 = *clients.first().ok_or("no client")?;
    let mut script: VecDeque<Input> = VecDeque::new();
    script.push_back(Input::ResetRequest { client: c0 });
    script.push_back(if unload {
        Input::Unload
    } else {
        Input::Remove {
            device: DEV,
            token: REMOVE_TOKEN,
        }
    });
    let mut isr_fired = 0u32;
    let mut actors = Actors {
        fw,
        script,
        isr_fired: &mut isr_fired,
        lock: &lock,
    };
    for byte in schedule.iter().skip(1) {
        match byte % 3 {
            0 => actors.thread_step()?,
            1 => actors.client_step()?,
            _ => actors.isr_step(),
        };
    }
    let mut rounds = 0u32;
    loop {
        let progressed = actors.thread_step()? | actors.client_step()? | actors.isr_step();
        if !progressed {
            break;
        }
        rounds += 1;
        if rounds > FINISH_BOUND {
            return Err(format!("livelock: still busy after {FINISH_BOUND} rounds"));
        }
    }
    let Actors { fw, script, .. } = actors;
    if !script.is_empty() {
        return Err(format!("thread mode did not finish its script: {script:?}"));
    }
    if isr_fired != FATAL_INTERRUPTS {
        return Err("the interrupt did not finish".into());
    }
    let (phase, driver, lost) = lock
        .lock(|s| {
            (
                s.machine().phase(DEV),
                s.machine().driver_phase(),
                s.lost_outputs(),
            )
        })
        .map_err(|_| "lock busy at the end")?;
    if lost != 0 {
        return Err(format!("{lost} outputs lost"));
    }
    if fw.owed() != 0 {
        return Err("completions still owed".into());
    }
    let board = fw.board();
    check(&board.log)?;
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

fn setup(fw: &mut RaceFirmware<'_>, clients: &mut Vec<ClientHandle>) -> Result<(), String> {
    let err = |e: PortError<()>| format!("setup: {e:?}");
    fw.input(Input::AddDevice { device: DEV }).map_err(err)?;
    fw.input(Input::Start {
        device: DEV,
        token: RequestToken(1),
    })
    .map_err(err)?;
    fw.board_mut().log.push(Record::Input(
        Input::Start {
            device: DEV,
            token: RequestToken(1),
        },
        Ok(Reply::Accepted),
    ));
    fw.pump().map_err(err)?;
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
                fw.board_mut().behaviour.insert(client, behaviour);
                clients.push(client);
            }
            other => return Err(format!("setup: register answered {other:?}")),
        }
    }
    Ok(())
}

struct Actors<'a, 'b> {
    fw: RaceFirmware<'a>,
    script: VecDeque<Input>,
    isr_fired: &'b mut u32,
    lock: &'a CellLock<RaceShared>,
}

impl Actors<'_, '_> {
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
            self.fw.board_mut().record_input(input, &result);
            self.script.pop_front();
            return Ok(true);
        }
        let timeout = self.fw.poll_timeout().map_err(|_| "busy")?;
        if let Some(now) = timeout {
            self.fw.board().clock.set(now);
            let result = self.fw.submit(Input::Timeout);
            return match result {
                Ok(_) | Err(PortError::Backlog { .. }) => Ok(true),
                Err(e) => Err(format!("tick: {e:?}")),
            };
        }
        Ok(false)
    }

    /// One client answer fed (refusals are fine and recorded: a revoked client's late
    /// `reset_execute` is refused).
    fn client_step(&mut self) -> Result<bool, String> {
        let Some(input) = self.fw.board_mut().reactions.pop_front() else {
            return Ok(false);
        };
        let result = self.fw.submit(input);
        match result {
            Err(PortError::Backlog { .. }) => {
                self.fw.board_mut().reactions.push_front(input);
            }
            Err(PortError::Busy | PortError::Stalled) => return Err(format!("client: {result:?}")),
            _ => self.fw.board_mut().record_input(input, &result),
        }
        Ok(true)
    }

    fn isr_step(&mut self) -> bool {
        if *self.isr_fired >= FATAL_INTERRUPTS {
            return false;
        }
        *self.isr_fired += 1;
        let clock = self.fw.board().clock.clone();
        let _ = on_fatal_interrupt(self.lock, DEV, || clock.now());
        true
    }
}
