//! The oracle: invariants I1–I5 of `DESIGN.md`, checked on what the clients and the board
//! actually received, in the order thread mode acted on it (the buffer is FIFO, so that is
//! the order the machine emitted it).

use std::collections::BTreeMap;
use std::format;
use std::string::String;

use pnp_lifecycle::{
    ClientHandle, DeviceId, Error, Event, HardwareCommand, Input, Output, Reply, Unregistered,
};

/// One thing that happened, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// An output thread mode acted on (from [`crate::Board::observe`]).
    Output(Output),
    /// An input fed by thread mode or a client, with the machine's answer.
    Input(Input, Result<Reply, Error>),
}

#[derive(Default)]
struct ClientTrack {
    open_reset: bool,
    last_was_reset_end: bool,
    finished: bool, // told Removed/Revoked, unregistered, or gone
}

/// Check I1–I5 on a log. `Ok` or the first violation, described.
pub fn check(log: &[Record]) -> Result<(), String> {
    let mut clients: BTreeMap<ClientHandle, ClientTrack> = BTreeMap::new();
    let mut unload_done = false;
    let mut no_reset: BTreeMap<DeviceId, &'static str> = BTreeMap::new();
    let mut tokens: BTreeMap<u32, u32> = BTreeMap::new(); // accepted token -> completions
    for (at, record) in log.iter().enumerate() {
        match *record {
            Record::Output(output) => {
                if unload_done {
                    return Err(format!(
                        "I2: output {output:?} at {at} after UnloadMayFinish"
                    ));
                }
                match output {
                    Output::Notify { client, event } => {
                        let t = clients.entry(client).or_default();
                        if t.finished {
                            return Err(format!(
                                "I1: {event:?} to {client:?} at {at} after it left or was revoked"
                            ));
                        }
                        match event {
                            Event::Reset => {
                                if t.open_reset {
                                    return Err(format!(
                                        "I4: second RESET to {client:?} at {at} before an answer"
                                    ));
                                }
                                t.open_reset = true;
                                t.last_was_reset_end = false;
                            }
                            // A cycle that ended without a reset answers RESET too.
                            Event::ResetEnd { .. } | Event::Recovered { .. } => {
                                if t.last_was_reset_end {
                                    return Err(format!(
                                        "I4: double RESET_END to {client:?} at {at}"
                                    ));
                                }
                                t.open_reset = false;
                                t.last_was_reset_end = true;
                            }
                            Event::Removed { .. } | Event::Revoked => {
                                t.open_reset = false;
                                t.finished = true;
                            }
                            _ => {}
                        }
                    }
                    Output::Hardware { device, command } => {
                        if matches!(command, HardwareCommand::Reset | HardwareCommand::Shutdown) {
                            if let Some(why) = no_reset.get(&device) {
                                if command == HardwareCommand::Reset || *why == "surprise removal" {
                                    return Err(format!(
                                        "I3: {command:?} of {device:?} at {at} after {why}"
                                    ));
                                }
                            }
                        }
                        if command == HardwareCommand::Reset {
                            if let Some((c, _)) = clients
                                .iter()
                                .find(|(c, t)| c.device == device && t.open_reset)
                            {
                                return Err(format!(
                                    "I3: hardware reset at {at} while voter {c:?} has not answered"
                                ));
                            }
                        }
                    }
                    Output::Complete { token, .. } => {
                        let n = tokens.entry(token.0).or_insert(0);
                        *n += 1;
                    }
                    Output::ClientGone { client } => {
                        let t = clients.entry(client).or_default();
                        t.open_reset = false;
                        t.finished = true;
                    }
                    Output::DeviceRemoved { device } => {
                        no_reset.insert(device, "removal");
                    }
                    Output::Fence { client } => {
                        // A fenced client counts as revoked (I4 as revised): nothing more
                        // is addressed to it.
                        let t = clients.entry(client).or_default();
                        t.open_reset = false;
                        t.finished = true;
                    }
                    Output::DeviceFailed { device, .. } => {
                        // Failed: only removal leaves, so no reset is commanded after it.
                        no_reset.entry(device).or_insert("failure");
                    }
                    Output::UnloadMayFinish => unload_done = true,
                    Output::ResetCycleFinished { .. } => {}
                }
            }
            Record::Input(input, result) => {
                let ok = result.is_ok();
                match input {
                    Input::ResetExecute { client } | Input::CanRecover { client } if ok => {
                        if let Some(t) = clients.get_mut(&client) {
                            t.open_reset = false;
                        }
                    }
                    Input::Unregister { client }
                        if result == Ok(Reply::Unregistered(Unregistered::Now)) =>
                    {
                        let t = clients.entry(client).or_default();
                        t.open_reset = false;
                        t.finished = true;
                    }
                    Input::Remove { device, .. } if ok => {
                        no_reset.entry(device).or_insert("remove");
                    }
                    Input::SurpriseRemoval { device } if ok => {
                        no_reset.insert(device, "surprise removal");
                    }
                    Input::Unload if ok => {
                        for d in 0..=u8::MAX {
                            no_reset.entry(DeviceId(d)).or_insert("unload");
                        }
                    }
                    _ => {}
                }
                if ok {
                    if let Some(token) = input.token().map(|t| t.0) {
                        if tokens.insert(token, 0).is_some() {
                            return Err(format!("I5: token {token} accepted twice (test bug)"));
                        }
                    }
                }
            }
        }
    }
    for (token, n) in &tokens {
        if *n != 1 {
            return Err(format!("I5: token {token} completed {n} times"));
        }
    }
    if let Some((c, _)) = clients.iter().find(|(_, t)| t.open_reset) {
        return Err(format!("I4: RESET to {c:?} never answered"));
    }
    Ok(())
}
