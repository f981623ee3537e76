//! The oracle: invariants I1-I5 of DESIGN.md checked on what the OS side observed, in the
//! order it happened (client callbacks, client calls, hardware resets, IRP completions).

use pnp_lifecycle::Event;

use crate::ntstatus::NtStatus;

/// One thing the OS side saw. `client` is the test's own index for a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// A client callback received `event`.
    Event {
        /// The client.
        client: usize,
        /// What it got.
        event: Event,
    },
    /// A client is about to call `reset_execute`.
    ExecuteCalled {
        /// The client.
        client: usize,
    },
    /// A client is about to call unregister.
    UnregisterCalled {
        /// The client.
        client: usize,
    },
    /// A client's (blocking) unregister returned.
    UnregisterReturned {
        /// The client.
        client: usize,
    },
    /// The reset worker began the hardware reset.
    HardwareReset,
    /// An IRP was dispatched.
    IrpDispatched {
        /// Its token.
        token: u32,
    },
    /// An IRP was completed.
    IrpCompleted {
        /// Its token.
        token: u32,
        /// Its status.
        status: NtStatus,
    },
    /// `UnloadMayFinish` was delivered (unload returned).
    UnloadFinished,
}

#[derive(Clone, Copy, Default)]
struct ClientTrack {
    open_reset: bool,
    answered: bool,
    last_event_seen: bool,
    leaving: bool,
    unregistered: bool,
}

/// Check I1-I5 over a whole run. `finished` says the run ended (every thread or actor
/// finished), so open obligations (a RESET with no answer, an IRP not completed) count.
pub fn check(observations: &[Observation], finished: bool) -> Result<(), String> {
    let mut clients: Vec<ClientTrack> = Vec::new();
    let mut irps: Vec<(u32, u32)> = Vec::new();
    let mut unloaded = false;
    for (i, obs) in observations.iter().enumerate() {
        // A request refused after unload (a failure status) is an answer, not an output.
        let is_output = match obs {
            Observation::Event { .. } | Observation::HardwareReset => true,
            Observation::IrpCompleted { status, .. } => status.is_success(),
            _ => false,
        };
        if unloaded && is_output {
            return Err(format!("I2: {obs:?} at #{i} after UnloadMayFinish"));
        }
        let idx = match *obs {
            Observation::Event { client, .. }
            | Observation::ExecuteCalled { client }
            | Observation::UnregisterCalled { client }
            | Observation::UnregisterReturned { client } => client,
            _ => usize::MAX,
        };
        if idx != usize::MAX && clients.len() <= idx {
            clients.resize(idx + 1, ClientTrack::default());
        }
        match *obs {
            Observation::Event { client, event } => {
                let Some(c) = clients.get_mut(client) else {
                    continue;
                };
                if c.unregistered {
                    return Err(format!(
                        "I1: client {client} got {event:?} at #{i} after its unregister returned"
                    ));
                }
                if c.last_event_seen {
                    return Err(format!(
                        "I1: client {client} got {event:?} at #{i} after Removed/Revoked"
                    ));
                }
                match event {
                    Event::Reset => {
                        if c.open_reset {
                            return Err(format!(
                                "I4: client {client} got a second RESET at #{i} before RESET_END/Removed/Revoked"
                            ));
                        }
                        c.open_reset = true;
                        c.answered = false;
                    }
                    // A cycle that ended without a reset answers RESET too (the port
                    // delivers it as RESET_END with the same epoch; accepted either way).
                    Event::ResetEnd { .. } | Event::Recovered { .. } => c.open_reset = false,
                    Event::Removed { .. } | Event::Revoked => {
                        c.open_reset = false;
                        c.last_event_seen = true;
                    }
                    _ => {}
                }
            }
            Observation::ExecuteCalled { client } => {
                if let Some(c) = clients.get_mut(client) {
                    c.answered = true;
                }
            }
            Observation::UnregisterCalled { client } => {
                if let Some(c) = clients.get_mut(client) {
                    c.leaving = true;
                }
            }
            Observation::UnregisterReturned { client } => {
                if let Some(c) = clients.get_mut(client) {
                    c.unregistered = true;
                }
            }
            Observation::HardwareReset => {
                if let Some(voter) = clients
                    .iter()
                    .position(|c| c.open_reset && !c.answered && !c.leaving)
                {
                    return Err(format!(
                        "I3: hardware reset at #{i} while client {voter} was told RESET and has not answered"
                    ));
                }
            }
            Observation::IrpDispatched { token } => {
                if irps.iter().any(|(t, _)| *t == token) {
                    return Err(format!("I5: token {token} dispatched twice"));
                }
                irps.push((token, 0));
            }
            Observation::IrpCompleted { token, .. } => {
                match irps.iter_mut().find(|(t, _)| *t == token) {
                    Some((_, n)) => {
                        *n += 1;
                        if *n > 1 {
                            return Err(format!("I5: IRP {token} completed twice (#{i})"));
                        }
                    }
                    None => return Err(format!("I5: IRP {token} completed but never dispatched")),
                }
            }
            Observation::UnloadFinished => {
                if unloaded {
                    return Err(format!("I2: UnloadMayFinish twice (#{i})"));
                }
                unloaded = true;
            }
        }
    }
    if finished {
        if let Some(c) = clients.iter().position(|c| c.open_reset && !c.leaving) {
            return Err(format!(
                "I4: client {c} was told RESET and never RESET_END, Removed or Revoked"
            ));
        }
        if let Some((t, _)) = irps.iter().find(|(_, n)| *n == 0) {
            return Err(format!("I5: IRP {t} never completed"));
        }
    }
    Ok(())
}
