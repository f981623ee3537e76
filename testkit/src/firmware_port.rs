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

use pnp_lifecycle::{ClientHandle, DeviceId, FatalAnswer, HardwareCommand, Output, Reply};
use pnp_lifecycle_firmware::IsrOutcome;

use crate::observed::{self, Obs, Seen};

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
    /// Thread mode fed a latched fatal error (`Step::ReplayedFatal`), with the answer.
    Replayed {
        /// The device.
        device: DeviceId,
        /// The machine's answer.
        result: Result<pnp_lifecycle::Reply, pnp_lifecycle::Error>,
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
///   driver unloaded (after it: that answers it; before it: nothing is left to reset);
/// * I14 at the board: from the board's power-down until its power-up (or the release of
///   the resources) the device's hardware is touched by nothing but the power-up (no
///   reset pulse, start, shutdown) and no client operation begins; and, when `finished`,
///   every client told `Suspending` was later told `Resumed`, `Removed`, `Revoked` or
///   `DeviceStarted`.
pub fn check_board(log: &[Rec], finished: bool) -> Result<(), String> {
    let mut commanded: Vec<(DeviceId, u32)> = Vec::new();
    let (mut dx, mut suspended) = (Vec::new(), Vec::new());
    for (at, rec) in log.iter().enumerate() {
        if let Rec::Obs(obs) = *rec {
            check_dx(obs, at, &mut dx, &mut suspended)?;
        }
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
                // A latch is served unless its replay (when recorded) found the hardware
                // not live (e.g. powered down: nothing to reset) or was refused.
                let replay = log[at..].iter().find_map(|r| match *r {
                    Rec::Replayed { device: d, result } if d == device => Some(result),
                    _ => None,
                });
                let replay_served = !matches!(
                    replay,
                    Some(Ok(Reply::Fatal(FatalAnswer::HardwareNotLive(_))) | Err(_))
                );
                let served = match outcome {
                    IsrOutcome::Latched => replay_served,
                    IsrOutcome::Fed(FatalAnswer::Served(_) | FatalAnswer::Deferred) => true,
                    _ => false,
                };
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
    if let (true, Some(client)) = (finished, suspended.first()) {
        return Err(format!(
            "I14: client {client:#x} was told Suspending and never Resumed, Removed or Revoked"
        ));
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

/// One observation against I14 at the board: `dx` holds the devices powered down,
/// `suspended` the clients told `Suspending` and not yet told they are back (or gone).
fn check_dx(
    obs: Obs,
    at: usize,
    dx: &mut Vec<DeviceId>,
    suspended: &mut Vec<u32>,
) -> Result<(), String> {
    match obs {
        Obs::Hardware { device, command } => match command {
            HardwareCommand::PowerDown => dx.push(device),
            HardwareCommand::PowerUp | HardwareCommand::ReleaseResources => {
                dx.retain(|d| *d != device)
            }
            _ if dx.contains(&device) => {
                return Err(format!(
                    "I14: hardware {command:?} of device {} at #{at} while it is powered down",
                    device.0
                ))
            }
            _ => {}
        },
        Obs::OperationBegin { client, device } if dx.contains(&device) => {
            return Err(format!(
                "I14: client {client:#x} began a hardware operation at #{at} while device {} is powered down",
                device.0
            ))
        }
        // A client that detached is told nothing more (I1).
        Obs::DetachBegin { client } => suspended.retain(|c| *c != client),
        Obs::Enter {
            client,
            seen: Seen::Event(event),
            ..
        } => match event {
            pnp_lifecycle::Event::Suspending { .. } => suspended.push(client),
            pnp_lifecycle::Event::Resumed { .. }
            | pnp_lifecycle::Event::Removed { .. }
            | pnp_lifecycle::Event::Revoked
            | pnp_lifecycle::Event::DeviceStarted { .. } => suspended.retain(|c| *c != client),
            _ => {}
        },
        _ => {}
    }
    Ok(())
}
