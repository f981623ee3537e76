//! One oracle over what an OS port's clients, hardware and OS requests observed, in the
//! order they observed it, for every port (Windows, Linux, firmware) and their fuzz race
//! targets. It sees only what happened at the port's edges (callbacks entered and left,
//! answers, detaches, hardware commands, client operations, fences, requests, unload), never
//! the core or the runtime, so it judges the whole stack.
//!
//! A port's recording client translates its vocabulary back into core words: Linux
//! `add` → [`Seen::Attached`], `error_detected` → `Event::Reset`, `resume` →
//! `Event::ResetEnd`, `remove` → `Event::Removed`, `disassociate` → `Event::Revoked`.
//!
//! What [`check`] asserts (DESIGN.md I1–I5, I12):
//! * I1: no callback after the client's blocking detach returned, after `Removed` or
//!   `Revoked`, or after its fence (one callback already taken when a fence overran its
//!   grace may still begin); never two callbacks of one client at once; a detach does not
//!   return while its callback runs.
//! * I2: nothing happens after unload returned (a request refused then is an answer).
//! * I3: no hardware reset while a client told RESET has not answered, unless it was
//!   leaving or is fenced later.
//! * I4: RESET is not told twice without an end; when the run `finished`, every RESET
//!   ended (RESET_END, `Removed`, `Revoked`, a fence, or the client left).
//! * I5: every request is completed exactly once (all of them, when `finished`).
//! * I12: no hardware reset, shutdown or start while an operation of a client that was
//!   not fenced is in flight.
//! * I14: after a hardware power-down and until the power-up (or the resources' release),
//!   no hardware command but `PowerUp` / `ReleaseResources` and no client operation begins;
//!   when the run `finished`, every client told `Suspending` was later told `Resumed`,
//!   `Removed` or `Revoked` (or was fenced, or left).

use std::sync::{Arc, Mutex, PoisonError};

use pnp_lifecycle::{DeviceId, Event, HardwareCommand};

/// What a callback brought, in core words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// A fresh attachment of the client to the device (Linux `add`).
    Attached,
    /// A core event.
    Event(Event),
}

/// One observation. `client` is the test's own number for a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Obs {
    /// A callback of `client` about `device` began.
    Enter {
        /// The client.
        client: u32,
        /// The device.
        device: DeviceId,
        /// What it brought.
        seen: Seen,
    },
    /// The client's callback returned.
    Exit {
        /// The client.
        client: u32,
    },
    /// The client is about to answer RESET (`reset_execute`, a vote, `can_recover`).
    AnswerTried {
        /// The client.
        client: u32,
        /// The device.
        device: DeviceId,
    },
    /// The answer returned; `accepted`: the core took it.
    AnswerResult {
        /// The client.
        client: u32,
        /// Whether it was taken.
        accepted: bool,
    },
    /// The client is about to detach (unregister).
    DetachBegin {
        /// The client.
        client: u32,
    },
    /// The client's blocking detach returned.
    DetachReturned {
        /// The client.
        client: u32,
    },
    /// The hardware was commanded.
    Hardware {
        /// The device.
        device: DeviceId,
        /// The command.
        command: HardwareCommand,
    },
    /// A client's granted hardware operation began.
    OperationBegin {
        /// The client.
        client: u32,
        /// The device.
        device: DeviceId,
    },
    /// It ended.
    OperationEnd {
        /// The client.
        client: u32,
        /// The device.
        device: DeviceId,
    },
    /// The client was fenced (its fence is done).
    Fenced {
        /// The client.
        client: u32,
        /// The device.
        device: DeviceId,
        /// Whether the fence stopped waiting for something still running.
        overran: bool,
    },
    /// An OS request was sent.
    RequestSent {
        /// The test's name for it.
        id: u32,
    },
    /// It completed.
    RequestCompleted {
        /// The test's name for it.
        id: u32,
        /// Whether it succeeded.
        success: bool,
    },
    /// Driver unload returned.
    UnloadReturned,
}

/// A shared, ordered log of observations (cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct Log(Arc<Mutex<Vec<Obs>>>);

impl Log {
    /// An empty log.
    pub fn new() -> Log {
        Log::default()
    }

    /// Append one observation.
    pub fn push(&self, obs: Obs) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(obs);
    }

    /// Everything so far, in order.
    pub fn snapshot(&self) -> Vec<Obs> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Attachment {
    open_reset: bool,
    answered: bool,
    /// An answer the core took before its RESET was delivered.
    early_answer: bool,
    closed: bool,
    /// One callback taken before a fence that overran may still begin.
    late_callback_allowed: bool,
    fenced: bool,
    operations: u32,
    /// Told `Suspending`, not yet `Resumed`, `Removed` or `Revoked`.
    suspended: bool,
}

#[derive(Debug, Clone, Default)]
struct ClientTrack {
    running: bool,
    leaving: bool,
    detached: bool,
    attachments: Vec<(DeviceId, Attachment)>,
}

impl ClientTrack {
    fn at(&mut self, device: DeviceId) -> &mut Attachment {
        let pos = match self.attachments.iter().position(|(d, _)| *d == device) {
            Some(pos) => pos,
            None => {
                self.attachments.push((device, Attachment::default()));
                self.attachments.len() - 1
            }
        };
        &mut self.attachments[pos].1
    }
}

fn track(clients: &mut Vec<ClientTrack>, client: u32) -> &mut ClientTrack {
    let i = client as usize;
    if clients.len() <= i {
        clients.resize(i + 1, ClientTrack::default());
    }
    &mut clients[i]
}

/// Whether `client` is fenced or revoked on `device` somewhere in `later`.
fn fenced_later(later: &[Obs], client: u32, device: DeviceId) -> bool {
    later.iter().any(|o| match *o {
        Obs::Fenced {
            client: c,
            device: d,
            ..
        } => c == client && d == device,
        Obs::Enter {
            client: c,
            device: d,
            seen: Seen::Event(Event::Revoked),
        } => c == client && d == device,
        _ => false,
    })
}

/// Check a run (see the module docs). `finished`: every actor ended, so open obligations
/// (a RESET never ended, a request never completed) count.
pub fn check(log: &[Obs], finished: bool) -> Result<(), String> {
    let mut clients: Vec<ClientTrack> = Vec::new();
    let mut requests: Vec<(u32, u32)> = Vec::new();
    let mut unloaded = false;
    let mut low_power: Vec<DeviceId> = Vec::new();
    for (pos, obs) in log.iter().enumerate() {
        if unloaded
            && matches!(
                obs,
                Obs::Enter { .. }
                    | Obs::Hardware { .. }
                    | Obs::RequestCompleted { success: true, .. }
            )
        {
            return Err(format!("I2: {obs:?} at #{pos} after unload returned"));
        }
        match *obs {
            Obs::Enter {
                client,
                device,
                seen,
            } => {
                let c = track(&mut clients, client);
                if c.detached {
                    return Err(format!(
                        "I1: client {client} got {seen:?} at #{pos} after its detach returned"
                    ));
                }
                if c.running {
                    return Err(format!(
                        "I1: client {client} has two callbacks at once (#{pos})"
                    ));
                }
                c.running = true;
                let a = c.at(device);
                if a.closed && seen != Seen::Attached {
                    if a.late_callback_allowed {
                        a.late_callback_allowed = false;
                        continue;
                    }
                    return Err(format!(
                        "I1: client {client} got {seen:?} on device {} at #{pos} after its last event",
                        device.0
                    ));
                }
                match seen {
                    Seen::Attached => {
                        *a = Attachment {
                            early_answer: a.early_answer,
                            ..Attachment::default()
                        }
                    }
                    Seen::Event(Event::Reset) => {
                        if a.open_reset {
                            return Err(format!(
                                "I4: client {client} told RESET twice without an end (#{pos})"
                            ));
                        }
                        a.open_reset = true;
                        a.answered = a.early_answer;
                        a.early_answer = false;
                    }
                    Seen::Event(Event::ResetEnd { .. } | Event::Recovered { .. }) => {
                        a.open_reset = false;
                        a.early_answer = false;
                    }
                    Seen::Event(Event::Removed { .. } | Event::Revoked) => {
                        a.open_reset = false;
                        a.early_answer = false;
                        a.closed = true;
                        a.suspended = false;
                    }
                    Seen::Event(Event::Suspending { .. }) => a.suspended = true,
                    Seen::Event(Event::Resumed { .. }) => a.suspended = false,
                    Seen::Event(_) => {}
                }
            }
            Obs::Exit { client } => track(&mut clients, client).running = false,
            Obs::AnswerTried { client, device } => {
                let accepted = log[pos..].iter().find_map(|o| match *o {
                    Obs::AnswerResult {
                        client: c,
                        accepted,
                    } if c == client => Some(accepted),
                    _ => None,
                });
                if accepted == Some(true) {
                    let a = track(&mut clients, client).at(device);
                    if a.open_reset {
                        a.answered = true;
                    } else {
                        a.early_answer = true;
                    }
                }
            }
            Obs::AnswerResult { .. } => {}
            Obs::DetachBegin { client } => track(&mut clients, client).leaving = true,
            Obs::DetachReturned { client } => {
                let c = track(&mut clients, client);
                if c.running {
                    return Err(format!(
                        "I1: detach of client {client} returned at #{pos} while its callback runs"
                    ));
                }
                c.detached = true;
            }
            Obs::Hardware { device, command } => {
                let down = low_power.contains(&device);
                match command {
                    HardwareCommand::PowerUp | HardwareCommand::ReleaseResources => {
                        low_power.retain(|d| *d != device)
                    }
                    _ if down => {
                        return Err(format!(
                            "I14: hardware {command:?} at #{pos} while device {} is in a low-power state",
                            device.0
                        ))
                    }
                    HardwareCommand::PowerDown => low_power.push(device),
                    _ => {}
                }
                for (i, c) in clients.iter().enumerate() {
                    let client = i as u32;
                    let Some((_, a)) = c.attachments.iter().find(|(d, _)| *d == device) else {
                        continue;
                    };
                    if command == HardwareCommand::Reset
                        && a.open_reset
                        && !a.answered
                        && !c.leaving
                        && !fenced_later(&log[pos..], client, device)
                    {
                        return Err(format!(
                            "I3: hardware reset at #{pos} while client {client} was told RESET and has not answered"
                        ));
                    }
                    let touches = matches!(
                        command,
                        HardwareCommand::Reset | HardwareCommand::Shutdown | HardwareCommand::Start
                    );
                    if touches && a.operations > 0 && !a.fenced {
                        return Err(format!(
                            "I12: hardware {command:?} at #{pos} while an operation of client {client} is in flight"
                        ));
                    }
                }
            }
            Obs::OperationBegin { client, device } => {
                if low_power.contains(&device) {
                    return Err(format!(
                        "I14: client {client}'s operation began at #{pos} while device {} is in a low-power state",
                        device.0
                    ));
                }
                track(&mut clients, client).at(device).operations += 1;
            }
            Obs::OperationEnd { client, device } => {
                let a = track(&mut clients, client).at(device);
                a.operations = a.operations.saturating_sub(1);
            }
            Obs::Fenced {
                client,
                device,
                overran,
            } => {
                let c = track(&mut clients, client);
                let running = c.running;
                let a = c.at(device);
                a.open_reset = false;
                a.early_answer = false;
                a.closed = true;
                a.fenced = true;
                a.suspended = false;
                a.late_callback_allowed = overran && !running;
            }
            Obs::RequestSent { id } => {
                if requests.iter().any(|(r, _)| *r == id) {
                    return Err(format!("I5: request {id} sent twice (#{pos})"));
                }
                requests.push((id, 0));
            }
            Obs::RequestCompleted { id, .. } => match requests.iter_mut().find(|(r, _)| *r == id) {
                Some((_, n)) => {
                    *n += 1;
                    if *n > 1 {
                        return Err(format!("I5: request {id} completed twice (#{pos})"));
                    }
                }
                None => {
                    return Err(format!(
                        "I5: request {id} completed at #{pos} but never sent"
                    ))
                }
            },
            Obs::UnloadReturned => {
                if unloaded {
                    return Err(format!("I2: unload returned twice (#{pos})"));
                }
                unloaded = true;
            }
        }
    }
    if finished {
        for (i, c) in clients.iter().enumerate() {
            for (d, a) in &c.attachments {
                if a.open_reset && !c.leaving {
                    return Err(format!(
                        "I4: client {i} was told RESET on device {} and never RESET_END, Removed or Revoked",
                        d.0
                    ));
                }
                if a.suspended && !c.leaving {
                    return Err(format!(
                        "I14: client {i} was told Suspending on device {} and never Resumed, Removed or Revoked",
                        d.0
                    ));
                }
            }
        }
        if let Some((id, _)) = requests.iter().find(|(_, n)| *n == 0) {
            return Err(format!("I5: request {id} never completed"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: DeviceId = DeviceId(0);

    fn enter(client: u32, event: Event) -> Obs {
        Obs::Enter {
            client,
            device: DEV,
            seen: Seen::Event(event),
        }
    }

    #[test]
    fn a_clean_cycle_passes() {
        let log = [
            Obs::RequestSent { id: 1 },
            enter(0, Event::Reset),
            Obs::AnswerTried {
                client: 0,
                device: DEV,
            },
            Obs::AnswerResult {
                client: 0,
                accepted: true,
            },
            Obs::Exit { client: 0 },
            Obs::Hardware {
                device: DEV,
                command: HardwareCommand::Reset,
            },
            enter(
                0,
                Event::ResetEnd {
                    epoch: pnp_lifecycle::Epoch(1),
                },
            ),
            Obs::Exit { client: 0 },
            Obs::RequestCompleted {
                id: 1,
                success: true,
            },
            Obs::UnloadReturned,
        ];
        assert_eq!(check(&log, true), Ok(()));
    }

    #[test]
    fn each_rule_bites() {
        let reset = Obs::Hardware {
            device: DEV,
            command: HardwareCommand::Reset,
        };
        let power_down = Obs::Hardware {
            device: DEV,
            command: HardwareCommand::PowerDown,
        };
        let cases: [(&str, Vec<Obs>); 10] = [
            ("I14", vec![power_down, reset]),
            (
                "I14",
                vec![
                    power_down,
                    Obs::OperationBegin {
                        client: 0,
                        device: DEV,
                    },
                ],
            ),
            (
                "I14",
                vec![
                    enter(
                        0,
                        Event::Suspending {
                            kind: pnp_lifecycle::PowerDownKind::Idle,
                        },
                    ),
                    Obs::Exit { client: 0 },
                ],
            ),
            (
                "I3",
                vec![enter(0, Event::Reset), Obs::Exit { client: 0 }, reset],
            ),
            (
                "I1",
                vec![
                    enter(0, Event::Removed { surprise: false }),
                    Obs::Exit { client: 0 },
                    enter(0, Event::DeviceFatal),
                ],
            ),
            (
                "I1",
                vec![enter(0, Event::DeviceFatal), enter(0, Event::DeviceFatal)],
            ),
            (
                "I12",
                vec![
                    Obs::OperationBegin {
                        client: 0,
                        device: DEV,
                    },
                    Obs::Hardware {
                        device: DEV,
                        command: HardwareCommand::Shutdown,
                    },
                ],
            ),
            ("I5", vec![Obs::RequestSent { id: 7 }]),
            ("I4", vec![enter(0, Event::Reset), Obs::Exit { client: 0 }]),
            ("I2", vec![Obs::UnloadReturned, reset]),
        ];
        for (rule, log) in cases {
            let verdict = check(&log, true);
            assert!(
                verdict.as_ref().is_err_and(|e| e.starts_with(rule)),
                "{rule}: {verdict:?} for {log:?}"
            );
        }
    }

    #[test]
    fn a_power_cycle_passes() {
        let hw = |command| Obs::Hardware {
            device: DEV,
            command,
        };
        let kind = pnp_lifecycle::PowerDownKind::Idle;
        let log = [
            enter(0, Event::Suspending { kind }),
            Obs::Exit { client: 0 },
            hw(HardwareCommand::PowerDown),
            hw(HardwareCommand::PowerUp),
            enter(
                0,
                Event::Resumed {
                    epoch: pnp_lifecycle::Epoch(0),
                    state_lost: false,
                },
            ),
            Obs::Exit { client: 0 },
            Obs::OperationBegin {
                client: 0,
                device: DEV,
            },
            Obs::OperationEnd {
                client: 0,
                device: DEV,
            },
            hw(HardwareCommand::PowerDown),
            hw(HardwareCommand::ReleaseResources),
        ];
        assert_eq!(check(&log, true), Ok(()));
    }

    #[test]
    fn a_fenced_holder_excuses_the_reset() {
        let log = [
            Obs::OperationBegin {
                client: 0,
                device: DEV,
            },
            Obs::Fenced {
                client: 0,
                device: DEV,
                overran: true,
            },
            Obs::Hardware {
                device: DEV,
                command: HardwareCommand::Reset,
            },
        ];
        assert_eq!(check(&log, true), Ok(()));
    }
}
