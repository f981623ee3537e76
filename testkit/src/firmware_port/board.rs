//! Recording stand-ins for what a firmware plugs into the port: a board whose clients
//! answer out of band, a reset line that records its pulses, a simulated timer, and the
//! locks the harness and the shuttle scenarios run the shared state behind.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};

use pnp_lifecycle::{
    queue_capacity, ClientHandle, Config, DeviceId, Event, HardwareCommand, Input, Output,
    PowerUpResult, Reply, ResetResult, Status, Tick, TrustedTimeoutPolicy, Unregistered,
};
use pnp_lifecycle_firmware::{Board, Busy, Firmware, Lock, PortError, ResetControl, Shared};

use super::{client_id, Rec, Recorder};
use crate::observed::{Obs, Seen};

/// Clients a device of the harness has at most.
pub const CLIENTS: usize = 3;
/// The harness machine's output queue.
pub const QUEUE: usize = queue_capacity(1, CLIENTS);
/// The harness's shared state: 1 device, 3 clients, 1 physical port.
pub type RaceShared = Shared<1, CLIENTS, 1, QUEUE>;
/// The device of the harness.
pub const DEV: DeviceId = DeviceId(0);

/// Short deadlines, so a few ticks pass them.
pub const RACE_CONFIG: Config = Config {
    untrusted_ack_timeout: 10,
    trusted_ack_timeout: 20,
    trusted_policy: TrustedTimeoutPolicy::Revoke,
    detach_timeout: 10,
    callback_timeout: 15,
    operation_timeout: 15,
};

/// How a recorded client answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers `RESET` with `reset_execute`; detaches on `Removed` or `Revoked`.
    Cooperative,
    /// Never answers `RESET` (revoked at its deadline); detaches on `Removed`/`Revoked`.
    Silent,
}

/// A simulated monotonic timer shared by thread mode and the interrupt: it moves only when
/// told to, never backwards.
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

/// A [`Board`] that records what its clients and the hardware observed, each client's
/// events in order, and queues each client's answer for whoever plays the clients
/// ([`feed_client`]).
#[derive(Debug, Default)]
pub struct RecordingBoard {
    /// The shared log.
    pub rec: Recorder,
    /// Each client's events, in order.
    pub events: BTreeMap<ClientHandle, Vec<Event>>,
    /// Client answers not yet fed, oldest first.
    pub reactions: VecDeque<Input>,
    /// How each client answers (absent: cooperative).
    pub behaviour: BTreeMap<ClientHandle, Behaviour>,
    /// The platform timer.
    pub clock: SimClock,
    /// Reset cycles finished.
    pub cycles: u32,
    /// What the next power-ups answer, oldest first (empty: `Powered`).
    pub power_up_results: VecDeque<PowerUpResult>,
    /// Whether the hardware is powered down (set by `power_down`, cleared by `power_up`
    /// and `release_resources`; the interrupt may read it).
    pub powered_down: Arc<AtomicBool>,
}

impl RecordingBoard {
    /// A board logging into `rec`.
    pub fn new(rec: Recorder) -> Self {
        RecordingBoard {
            rec,
            ..RecordingBoard::default()
        }
    }

    /// How many times the board saw `output`.
    pub fn count(&self, output: Output) -> usize {
        self.rec
            .snapshot()
            .iter()
            .filter(|r| **r == Rec::Output(output))
            .count()
    }

    /// Record that an OS request (an input with a token) was sent, if the core took it.
    pub fn record_request<E>(&self, input: Input, result: &Result<Reply, PortError<E>>) {
        if let (Some(token), Ok(_)) = (input.token(), result) {
            self.rec.obs(Obs::RequestSent { id: token.0 });
        }
    }
}

impl Board for RecordingBoard {
    fn now(&mut self) -> Tick {
        self.clock.now()
    }

    fn notify(&mut self, client: ClientHandle, event: Event) {
        let id = client_id(client);
        self.rec.obs(Obs::Enter {
            client: id,
            device: client.device,
            seen: Seen::Event(event),
        });
        self.events.entry(client).or_default().push(event);
        let behaviour = self.behaviour.get(&client).copied();
        match (event, behaviour) {
            (Event::Reset, Some(Behaviour::Cooperative) | None) => {
                self.reactions.push_back(Input::ResetExecute { client })
            }
            (Event::Removed { .. } | Event::Revoked, _) => {
                self.reactions.push_back(Input::Unregister { client })
            }
            _ => {}
        }
        self.rec.obs(Obs::Exit { client: id });
    }

    fn fence(&mut self, client: ClientHandle) {
        self.rec.obs(Obs::Fenced {
            client: client_id(client),
            device: client.device,
            overran: false,
        });
        // A fenced client is done with the device: it detaches.
        self.reactions
            .retain(|r| !matches!(r, Input::ResetExecute { client: c } if *c == client));
        self.reactions.push_back(Input::Unregister { client });
    }

    fn start(&mut self, device: DeviceId) -> pnp_lifecycle::StartResult {
        let command = HardwareCommand::Start;
        self.rec.obs(Obs::Hardware { device, command });
        pnp_lifecycle::StartResult::Started
    }

    fn shutdown(&mut self, device: DeviceId) {
        let command = HardwareCommand::Shutdown;
        self.rec.obs(Obs::Hardware { device, command });
    }

    fn release_resources(&mut self, device: DeviceId) {
        let command = HardwareCommand::ReleaseResources;
        self.rec.obs(Obs::Hardware { device, command });
        self.powered_down.store(false, Ordering::SeqCst);
    }

    fn power_down(&mut self, device: DeviceId) {
        let command = HardwareCommand::PowerDown;
        self.rec.obs(Obs::Hardware { device, command });
        self.powered_down.store(true, Ordering::SeqCst);
    }

    fn power_up(&mut self, device: DeviceId) -> PowerUpResult {
        let command = HardwareCommand::PowerUp;
        self.rec.obs(Obs::Hardware { device, command });
        self.powered_down.store(false, Ordering::SeqCst);
        self.power_up_results
            .pop_front()
            .unwrap_or(PowerUpResult::Powered)
    }

    fn observe(&mut self, output: &Output) {
        self.rec.push(Rec::Output(*output));
        match *output {
            Output::Complete { token, status, .. } => self.rec.obs(Obs::RequestCompleted {
                id: token.0,
                success: status == Status::Success,
            }),
            Output::UnloadMayFinish => self.rec.obs(Obs::UnloadReturned),
            Output::ResetCycleFinished { .. } => self.cycles += 1,
            _ => {}
        }
    }

    /// The pulse as the hardware observed it (whatever reset control made it).
    fn reset_finished(&mut self, device: DeviceId, _result: ResetResult) {
        let command = HardwareCommand::Reset;
        self.rec.obs(Obs::Hardware { device, command });
    }
}

/// Feed one input a client gives (an answer or a detach) through thread mode, recording
/// it for the oracle (`AnswerTried`/`AnswerResult`, `DetachBegin`/`DetachReturned`) unless
/// the buffer had no room ([`PortError::Backlog`]: nothing was fed).
pub fn feed_client<L, R, B, const D: usize, const C: usize, const P: usize, const Q: usize>(
    fw: &mut Firmware<'_, L, R, B, D, C, P, Q>,
    input: Input,
) -> Result<Reply, PortError<R::Error>>
where
    L: Lock<Shared<D, C, P, Q>>,
    R: ResetControl,
    B: Board + AsRecording,
{
    let result = fw.submit(input);
    if matches!(result, Err(PortError::Backlog { .. })) {
        return result;
    }
    let rec = fw.board_mut().recording().rec.clone();
    match input {
        Input::ResetExecute { client } | Input::CanRecover { client } => {
            let id = client_id(client);
            rec.obs(Obs::AnswerTried {
                client: id,
                device: client.device,
            });
            rec.obs(Obs::AnswerResult {
                client: id,
                accepted: result.is_ok(),
            });
        }
        Input::Unregister { client } => {
            rec.obs(Obs::DetachBegin {
                client: client_id(client),
            });
            if let Ok(Reply::Unregistered(Unregistered::Now | Unregistered::Already)) = result {
                rec.obs(Obs::DetachReturned {
                    client: client_id(client),
                });
            }
        }
        _ => {}
    }
    result
}

/// A board that is (or wraps) a [`RecordingBoard`].
pub trait AsRecording {
    /// The recording board.
    fn recording(&mut self) -> &mut RecordingBoard;
}

impl AsRecording for RecordingBoard {
    fn recording(&mut self) -> &mut RecordingBoard {
        self
    }
}

/// A reset line that counts its pulses (the board records them, `Board::reset_finished`);
/// fails every pulse when `fail`.
#[derive(Debug, Default)]
pub struct ScriptedReset {
    /// Fail every pulse.
    pub fail: bool,
    /// Pulses made.
    pub pulses: u32,
}

impl ResetControl for ScriptedReset {
    type Error = ();
    fn reset(&mut self, _device: DeviceId) -> Result<(), ()> {
        self.pulses += 1;
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

/// The critical section under shuttle: a shuttle mutex that the interrupt thread waits on
/// as a masked interrupt stays pending. Thread mode locks it directly; the interrupt goes
/// through [`ShuttleLock::isr`].
#[derive(Debug)]
pub enum ShuttleLock<T> {
    /// The shipped model: a critical section.
    Masked(shuttle::sync::Mutex<T>),
    /// PLANTED FAULT (`Fault::UnmaskedLock`): a `RefCell`-style borrow flag with interrupts
    /// left enabled. Thread mode can be preempted while it holds the state; the interrupt
    /// then finds it borrowed (`Busy`) instead of staying pending.
    Unmasked {
        /// The state (never contended: the flag excludes).
        value: std::sync::Mutex<T>,
        /// Borrowed (a `RefCell`'s flag; std atomics are no shuttle scheduling point).
        borrowed: AtomicBool,
    },
}

impl<T> ShuttleLock<T> {
    /// A lock that is a critical section.
    pub fn new(value: T) -> Self {
        ShuttleLock::Masked(shuttle::sync::Mutex::new(value))
    }

    /// The planted lock that is not a critical section.
    pub fn unmasked(value: T) -> Self {
        ShuttleLock::Unmasked {
            value: std::sync::Mutex::new(value),
            borrowed: AtomicBool::new(false),
        }
    }

    /// The interrupt's side of the lock.
    pub fn isr(&self) -> IsrSide<'_, T> {
        IsrSide(self)
    }

    fn with<R>(&self, preemptible: bool, f: impl FnOnce(&mut T) -> R) -> Result<R, Busy> {
        match self {
            ShuttleLock::Masked(mutex) => {
                let mut guard = mutex.lock().map_err(|_| Busy)?;
                Ok(f(&mut guard))
            }
            ShuttleLock::Unmasked { value, borrowed } => {
                if borrowed.swap(true, Ordering::SeqCst) {
                    return Err(Busy);
                }
                if preemptible {
                    // Interrupts are not masked: the interrupt may land here, mid-borrow.
                    shuttle::thread::yield_now();
                }
                let result = f(&mut value.lock().unwrap_or_else(PoisonError::into_inner));
                borrowed.store(false, Ordering::SeqCst);
                Ok(result)
            }
        }
    }
}

impl<T> Lock<T> for ShuttleLock<T> {
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, Busy> {
        self.with(true, f)
    }
}

/// The interrupt handler's view of a [`ShuttleLock`]: with a critical section it waits
/// (the interrupt stays pending until thread mode unmasks); without one it finds the state
/// borrowed. An interrupt runs to completion: it is never preempted inside.
#[derive(Debug)]
pub struct IsrSide<'a, T>(&'a ShuttleLock<T>);

impl<T> Lock<T> for IsrSide<'_, T> {
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, Busy> {
        self.0.with(false, f)
    }
}
