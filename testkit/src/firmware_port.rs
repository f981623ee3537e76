//! The firmware port's test machinery (tests and fuzzing only; nothing here is in the
//! shipped crate): a recording board and reset line whose observations feed the common
//! oracle [`crate::observed`] plus two firmware checks over board I/O ([`check_board`]),
//! the cooperative schedule harness [`race::run`] (the `firmware_irq_race` fuzz target), the
//! shuttle scenarios [`scenario`], and the planted faults [`faults`].
//!
//! Client numbers in [`Obs`] are [`client_id`]s.

pub mod board;
pub mod faults;
pub mod race;
pub mod scenario;

use std::sync::{Arc, Mutex, PoisonError};

use pnp_lifecycle::{ClientHandle, DeviceId, FatalAnswer, HardwareCommand, Output};
use pnp_lifecycle_firmware::IsrOutcome;

use crate::observed::{self, Obs};

/// One thing that happened at the port's edges, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rec {
    /// What a client, the hardware or an OS request observed (for [`observed::check`]).
    /// `Obs::Hardware { command: Reset }` is the reset line actually pulsed.
    Obs(Obs),
    /// An output the port acted on, as the board saw it (`Board::observe`):
    /// `Output::Hardware { command: Reset }` is the core commanding the pulse.
    Output(Output),
    /// The catastrophic-error interrupt raised a fatal error (recorded inside the lock).
    Raise {
        /// The device.
        device: DeviceId,
        /// What the interrupt body returned.
        outcome: IsrOutcome,
    },
}

/// A shared, ordered log of [`Rec`]s (cheap to clone; a std mutex inside, fine under
/// shuttle since nothing blocks while holding it).
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<Mutex<Vec<Rec>>>);

impl Recorder {
    /// Append one record; returns its place.
    pub fn push(&self, rec: Rec) -> usize {
        let mut log = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        log.push(rec);
        log.len() - 1
    }

    /// Replace the record at `at` (a placeholder pushed earlier).
    pub fn set(&self, at: usize, rec: Rec) {
        if let Some(slot) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(at)
        {
            *slot = rec;
        }
    }

    /// Append one observation.
    pub fn obs(&self, obs: Obs) {
        let _ = self.push(Rec::Obs(obs));
    }

    /// Everything so far.
    pub fn snapshot(&self) -> Vec<Rec> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The oracle's number for a client: device, generation and slot packed.
pub fn client_id(client: ClientHandle) -> u32 {
    (u32::from(client.device.0) << 24)
        | (u32::from(client.generation) << 8)
        | u32::from(client.slot)
}

/// The common oracle over what was observed, then [`check_board`].
pub fn check(log: &[Rec], finished: bool) -> Result<(), String> {
    let obs: Vec<Obs> = log
        .iter()
        .filter_map(|r| match r {
            Rec::Obs(o) => Some(*o),
            _ => None,
        })
        .collect();
    observed::check(&obs, finished)?;
    check_board(log, finished)
}

/// The firmware's own checks over board I/O:
/// * the reset line is pulsed only when the core commanded it, once a command (and, when
///   `finished`, every command was carried out);
/// * a fatal error the interrupt raised is never lost: the interrupt never finds the
///   machine borrowed (the critical section excludes thread mode), and when `finished`
///   every raise that a cycle serves (fed and served or deferred, or latched) is followed
///   by a reset pulse of the device, unless the device failed or was removed or the
///   driver unloaded (after it: that answers it; before it: nothing is left to reset).
pub fn check_board(log: &[Rec], finished: bool) -> Result<(), String> {
    let mut commanded: Vec<(DeviceId, u32)> = Vec::new();
    for (at, rec) in log.iter().enumerate() {
        match *rec {
            Rec::Output(Output::Hardware {
                device,
                command: HardwareCommand::Reset,
            }) => match commanded.iter_mut().find(|(d, _)| *d == device) {
                Some((_, n)) => *n += 1,
                None => commanded.push((device, 1)),
            },
            Rec::Obs(Obs::Hardware {
                device,
                command: HardwareCommand::Reset,
            }) => match commanded.iter_mut().find(|(d, _)| *d == device) {
                Some((_, n)) if *n > 0 => *n -= 1,
                _ => {
                    return Err(format!(
                        "reset line of device {} pulsed at #{at} before the core commanded it",
                        device.0
                    ))
                }
            },
            Rec::Raise {
                outcome: IsrOutcome::Busy,
                ..
            } => {
                return Err(format!(
                    "fatal error lost at #{at}: the interrupt found the machine borrowed (no critical section)"
                ))
            }
            Rec::Raise { device, outcome } if finished => {
                let served = matches!(
                    outcome,
                    IsrOutcome::Latched
                        | IsrOutcome::Fed(FatalAnswer::Served(_) | FatalAnswer::Deferred)
                );
                let pulsed = log[at..].iter().any(|r| {
                    matches!(*r, Rec::Obs(Obs::Hardware { device: d, command: HardwareCommand::Reset }) if d == device)
                });
                // Failure, removal or unload answers it, or (before it) left nothing to
                // reset: the latch is replayed and refused.
                let ended = log.iter().any(|r| {
                    matches!(*r,
                        Rec::Output(Output::DeviceFailed { device: d, .. } | Output::DeviceRemoved { device: d })
                        if d == device)
                        || matches!(r, Rec::Output(Output::UnloadMayFinish))
                });
                let answered = pulsed || ended;
                if served && !answered {
                    return Err(format!(
                        "fatal error of device {} raised at #{at} ({outcome:?}) was lost: no reset after it",
                        device.0
                    ));
                }
            }
            _ => {}
        }
    }
    if finished {
        if let Some((d, n)) = commanded.iter().find(|(_, n)| *n > 0) {
            return Err(format!(
                "{n} reset(s) of device {} commanded, never pulsed",
                d.0
            ));
        }
    }
    Ok(())
}
