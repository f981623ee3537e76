//! Planted firmware-port faults: substitute seams a firmware author could get wrong, each
//! caught by `ports/firmware/tests/planted.rs`. None is compiled into the shipped crate.
//!
//! | fault | seam | caught by |
//! | --- | --- | --- |
//! | [`Fault::UnmaskedLock`] | the lock is a `RefCell` borrow without a critical section ([`super::board::ShuttleLock::unmasked`]) | the interrupt finds the machine borrowed and its fatal error is lost ([`super::check_board`]) |
//! | [`Fault::DroppingLatch`] | the interrupt body, finding the buffer busy, reports `Latched` but sets no latch ([`dropping_latch_isr`]) | a fatal error with no reset after it ([`super::check_board`]) |
//! | [`Fault::EagerPulse`] | the reset line is pulsed from the `RESET` callback, before the core commands it ([`EagerPulse`]) | a pulse not commanded ([`super::check_board`]) and I3 ([`crate::observed::check`]) |
//! | [`Fault::IsrWakesByReset`] | the fatal-error interrupt, finding the device powered down, wakes it by pulsing the reset line itself instead of leaving the power-up to the core (`scenario::run`) | I14: a hardware touch in Dx ([`super::check_board`]) |
//! | [`Fault::QuiesceOnRelease`] | the board's `release_resources` quiesces the hardware (a shutdown) before releasing, also when removed from Dx ([`QuiesceOnRelease`]) | I14: a hardware touch in Dx ([`super::check_board`]) |

use std::cell::Cell;

use pnp_lifecycle::{
    ClientHandle, DeviceId, Event, HardwareCommand, Output, PowerUpResult, ResetResult,
    StartResult, Tick,
};
use pnp_lifecycle_firmware::{
    latch_fatal_interrupt, on_fatal_interrupt, Board, Busy, IsrOutcome, Lock, Shared,
};

use super::board::{AsRecording, RecordingBoard};
use super::Rec;
use crate::observed::Obs;

/// Which seam is substituted (`None`: the shipped port, the control).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No fault.
    None,
    /// The lock is not a critical section.
    UnmaskedLock,
    /// The interrupt latch drops the fatal errors it should latch.
    DroppingLatch,
    /// The reset line pulses before the core commands it.
    EagerPulse,
    /// The interrupt pulses the reset line while the device is powered down.
    IsrWakesByReset,
    /// Releasing the resources touches the registers (a shutdown), even in Dx.
    QuiesceOnRelease,
}

/// Which interrupt body the firmware uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsrPath {
    /// `on_fatal_interrupt`: feed inside the interrupt, latch when the buffer is busy.
    Feed,
    /// `latch_fatal_interrupt`: always latch (constant time).
    Latch,
}

/// PLANTED FAULT (`Fault::DroppingLatch`): the feeding interrupt body that, finding thread
/// mode's outputs in the buffer, says `Latched` and forgets the error.
pub fn dropping_latch_isr<L, const D: usize, const C: usize, const P: usize, const Q: usize>(
    lock: &L,
    device: DeviceId,
    now: impl FnOnce() -> Tick,
) -> IsrOutcome
where
    L: Lock<Shared<D, C, P, Q>>,
{
    lock.lock(|s| {
        if s.pending_len() > 0 {
            IsrOutcome::Latched
        } else {
            s.fatal_error_from_isr(device, now())
        }
    })
    .unwrap_or(IsrOutcome::Busy)
}

/// The catastrophic-error interrupt as the firmware under test has it: the shipped body for
/// `path`, or the dropping one under [`Fault::DroppingLatch`]. The raise is recorded inside
/// the lock, so it sits in the log in the machine's order.
pub fn raise<L, const D: usize, const C: usize, const P: usize, const Q: usize>(
    lock: &L,
    device: DeviceId,
    path: IsrPath,
    fault: Fault,
    now: impl Fn() -> Tick,
    rec: &super::Recorder,
) -> IsrOutcome
where
    L: Lock<Shared<D, C, P, Q>>,
{
    let recording = RecordingLock {
        lock,
        rec,
        device,
        at: Cell::new(None),
    };
    let outcome = match (fault, path) {
        (Fault::DroppingLatch, _) => dropping_latch_isr(&recording, device, now),
        (_, IsrPath::Feed) => on_fatal_interrupt(&recording, device, now),
        (_, IsrPath::Latch) => latch_fatal_interrupt(&recording, device),
    };
    let raised = Rec::Raise { device, outcome };
    match recording.at.get() {
        Some(at) => rec.set(at, raised),
        None => {
            rec.push(raised);
        }
    }
    outcome
}

/// A lock that takes the raise's place in the log inside the section (so it sits in the
/// machine's order); [`raise`] fills in the outcome.
struct RecordingLock<'a, L> {
    lock: &'a L,
    rec: &'a super::Recorder,
    device: DeviceId,
    at: Cell<Option<usize>>,
}

impl<L, const D: usize, const C: usize, const P: usize, const Q: usize> Lock<Shared<D, C, P, Q>>
    for RecordingLock<'_, L>
where
    L: Lock<Shared<D, C, P, Q>>,
{
    fn lock<R>(&self, f: impl FnOnce(&mut Shared<D, C, P, Q>) -> R) -> Result<R, Busy> {
        self.lock.lock(|s| {
            let outcome = IsrOutcome::Ignored; // a placeholder until the body returns
            let device = self.device;
            self.at
                .set(Some(self.rec.push(Rec::Raise { device, outcome })));
            f(s)
        })
    }
}

/// PLANTED FAULT (`Fault::EagerPulse`): a board whose `RESET` callback quiesces and pulses
/// the reset line at once, before the core commands the reset (before the other clients
/// answered).
#[derive(Debug, Default)]
pub struct EagerPulse(pub RecordingBoard);

impl Board for EagerPulse {
    fn now(&mut self) -> Tick {
        self.0.now()
    }
    fn notify(&mut self, client: ClientHandle, event: Event) {
        self.0.notify(client, event);
        if event == Event::Reset {
            let (device, command) = (client.device, HardwareCommand::Reset);
            self.0.rec.obs(Obs::Hardware { device, command });
        }
    }
    fn fence(&mut self, client: ClientHandle) {
        self.0.fence(client);
    }
    fn start(&mut self, device: DeviceId) -> StartResult {
        self.0.start(device)
    }
    fn shutdown(&mut self, device: DeviceId) {
        self.0.shutdown(device);
    }
    fn release_resources(&mut self, device: DeviceId) {
        self.0.release_resources(device);
    }
    fn power_down(&mut self, device: DeviceId) {
        self.0.power_down(device);
    }
    fn power_up(&mut self, device: DeviceId) -> PowerUpResult {
        self.0.power_up(device)
    }
    fn observe(&mut self, output: &Output) {
        self.0.observe(output);
    }
    fn reset_finished(&mut self, device: DeviceId, result: ResetResult) {
        self.0.reset_finished(device, result);
    }
}

impl AsRecording for EagerPulse {
    fn recording(&mut self) -> &mut RecordingBoard {
        &mut self.0
    }
}

/// PLANTED FAULT (`Fault::QuiesceOnRelease`): a board whose `release_resources` shuts the
/// hardware down first "to be safe", touching registers of a device removed from Dx.
#[derive(Debug, Default)]
pub struct QuiesceOnRelease(pub RecordingBoard);

impl Board for QuiesceOnRelease {
    fn now(&mut self) -> Tick {
        self.0.now()
    }
    fn notify(&mut self, client: ClientHandle, event: Event) {
        self.0.notify(client, event);
    }
    fn fence(&mut self, client: ClientHandle) {
        self.0.fence(client);
    }
    fn start(&mut self, device: DeviceId) -> StartResult {
        self.0.start(device)
    }
    fn shutdown(&mut self, device: DeviceId) {
        self.0.shutdown(device);
    }
    fn release_resources(&mut self, device: DeviceId) {
        self.0.shutdown(device);
        self.0.release_resources(device);
    }
    fn power_down(&mut self, device: DeviceId) {
        self.0.power_down(device);
    }
    fn power_up(&mut self, device: DeviceId) -> PowerUpResult {
        self.0.power_up(device)
    }
    fn observe(&mut self, output: &Output) {
        self.0.observe(output);
    }
    fn reset_finished(&mut self, device: DeviceId, result: ResetResult) {
        self.0.reset_finished(device, result);
    }
}

impl AsRecording for QuiesceOnRelease {
    fn recording(&mut self) -> &mut RecordingBoard {
        &mut self.0
    }
}
