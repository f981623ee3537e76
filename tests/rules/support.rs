//! Helpers more than one section module uses: machines brought to a state, and readers
//! of outputs.

pub use crate::common::*;
pub use pnp_lifecycle::inspect::*;
pub use pnp_lifecycle::*;

/// The owner most tests drive: one device, four client slots, two physical ports.
pub type O = Owner<1, 4, 2, { queue_capacity(1, 4) }>;

/// A started device with one client of each kind in `kinds`, in that order.
pub fn running_with(kinds: &[ClientKind]) -> (O, Vec<ClientHandle>) {
    let mut o = owner();
    o.started(DEV, false);
    let clients = kinds.iter().map(|k| o.register(DEV, *k)).collect();
    (o, clients)
}

/// The hardware commands among `outputs`, in order.
pub fn hardware_commands(outputs: &[Output]) -> Vec<HardwareCommand> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Hardware { command, .. } => Some(*command),
            _ => None,
        })
        .collect()
}

/// Drive a fresh machine to `target`, with one registered trusted client where possible.
pub fn reach(o: &mut O, target: PhaseKind) -> Option<ClientHandle> {
    use PhaseKind::*;
    if target == Absent {
        return None;
    }
    o.ok(Input::AddDevice { device: DEV });
    o.ok(Input::ConfigurePort {
        device: DEV,
        port: P0,
        caps: IB,
    });
    let c = o.register(DEV, ClientKind::Trusted);
    let t = o.token();
    match target {
        Added => return Some(c),
        RemovePending => {
            o.ok(Input::QueryRemove {
                device: DEV,
                token: t,
            });
            return Some(c);
        }
        Removing => {
            o.ok(Input::Remove {
                device: DEV,
                token: t,
            });
            return Some(c);
        }
        SurpriseRemoved => {
            o.ok(Input::SurpriseRemoval { device: DEV });
            return Some(c);
        }
        _ => {}
    }
    o.ok(Input::Start {
        device: DEV,
        token: t,
    });
    if target == Starting {
        return Some(c);
    }
    if target == Failed {
        o.ok(Input::StartDone {
            device: DEV,
            result: StartResult::FailedAfterResources,
        });
        return Some(c);
    }
    o.ok(Input::StartDone {
        device: DEV,
        result: StartResult::Started,
    });
    o.return_callbacks(DEV);
    match target {
        Running => {}
        Quiescing => {
            o.ok(Input::ResetRequest { client: c });
        }
        Executing => {
            o.ok(Input::ResetRequest { client: c });
            o.ok(Input::ResetExecute { client: c });
        }
        Stopping => {
            // The stop waits for the client's hardware operation in flight.
            assert_eq!(
                o.step(Input::Access {
                    client: c,
                    epoch: Epoch(0),
                    what: Access::HardwareOp
                })
                .0,
                Ok(Reply::AccessGranted)
            );
            let t = o.token();
            o.ok(Input::QueryStop {
                device: DEV,
                token: t,
            });
            let t = o.token();
            o.ok(Input::Stop {
                device: DEV,
                token: t,
            });
        }
        StopPending | Stopped => {
            let t = o.token();
            o.ok(Input::QueryStop {
                device: DEV,
                token: t,
            });
            if target == Stopped {
                let t = o.token();
                o.ok(Input::Stop {
                    device: DEV,
                    token: t,
                });
            }
        }
        PoweringDown | LowPower | PoweringUp => {
            let t = o.token();
            o.ok(Input::PowerDown {
                device: DEV,
                kind: PowerDownKind::Idle,
                token: t,
            });
            if target != PoweringDown {
                o.ok(Input::PowerDownDone { device: DEV });
            }
            if target == PoweringUp {
                let t = o.token();
                o.ok(Input::PowerUp {
                    device: DEV,
                    token: t,
                });
            }
        }
        _ => unreachable!(),
    }
    o.return_callbacks(DEV);
    Some(c)
}

/// A device added and starting, its `Hardware{Start}` left in the queue.
pub fn starting_undrained(token: RequestToken) -> M {
    let mut m = M::new(Config::DEFAULT);
    m.handle(Tick(0), Input::AddDevice { device: DEV }).unwrap();
    m.handle(Tick(0), Input::Start { device: DEV, token })
        .unwrap();
    m
}

/// Report a hardware fatal error on the device.
pub fn fatal(o: &mut O) -> (Result<Reply, Error>, Vec<Output>) {
    o.step(Input::FatalError { device: DEV })
}

/// The outcomes of the reset cycles `outputs` finish, in order.
pub fn outcomes(outputs: &[Output]) -> Vec<CycleOutcome> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::ResetCycleFinished { outcome, .. } => Some(*outcome),
            _ => None,
        })
        .collect()
}

/// A hardware operation by `client` at epoch 0.
pub fn op(client: ClientHandle) -> Input {
    Input::Access {
        client,
        epoch: Epoch(0),
        what: Access::HardwareOp,
    }
}

/// Begin a hardware operation for `client`; it must be granted.
pub fn grant(o: &mut O, client: ClientHandle) {
    assert_eq!(o.step(op(client)).0, Ok(Reply::AccessGranted));
}

/// Query stop, then stop; returns the stop's token.
pub fn query_stop_and_stop(o: &mut O) -> (RequestToken, Vec<Output>) {
    let t = o.token();
    o.ok(Input::QueryStop {
        device: DEV,
        token: t,
    });
    let t = o.token();
    let out = o.ok(Input::Stop {
        device: DEV,
        token: t,
    });
    (t, out)
}

/// What a stop ends with once nothing is in flight: shutdown, release, the token answered.
pub fn stopped_and_released(token: RequestToken) -> Vec<Output> {
    vec![
        hw(HardwareCommand::Shutdown),
        hw(HardwareCommand::ReleaseResources),
        complete(token, Status::Success),
    ]
}
