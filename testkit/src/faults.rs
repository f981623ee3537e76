//! Fault planting: a wrapper around a machine that drops, duplicates, reorders or injects
//! outputs, fakes replies, or replays stale handles, to prove the oracle and the model
//! comparison bite. Fault code lives here, never in the core.

use crate::sut::Sut;
use pnp_lifecycle::inspect::{AfterReset, Phase};
use pnp_lifecycle::{
    BindingCaps, ClientHandle, ClientView, Config, DeviceId, DriverPhase, Epoch, Error, Event,
    HardwareCommand, Input, LinkState, Output, PhaseKind, PhysPort, Reply, ResetAnswer, Tick,
};
use std::collections::VecDeque;

/// A deliberate bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// No fault: the wrapper is transparent.
    None,
    /// A broadcast after an unregistration still reaches the unregistered client
    /// (injects a `Notify`).
    NotifyAfterUnregister,
    /// The hardware reset is commanded at the first `ResetExecute` while other voters have
    /// not answered (injects `Hardware{Reset}`).
    ExecuteBeforeLastAck,
    /// A reset request during execution is answered `Scheduled` but never reaches the
    /// machine: the coalesced follow-up is lost.
    CoalescedRequestLost,
    /// An access with a stale epoch is granted (fakes the reply).
    StaleEpochAccepted,
    /// `UnloadMayFinish` is emitted twice (duplicates it).
    UnloadMayFinishTwice,
    /// A client that registered during a cycle is never told `ResetEnd` (drops it).
    JoinerMissesResetEnd,
    /// A handle from a slot's earlier client is replayed as the slot's current client (a
    /// registry without generations).
    StaleHandleReplay,
    /// A completion is delivered twice (duplicates `Complete`).
    DuplicateComplete,
    /// A `Recovered` told late names the device's epoch at delivery instead of the epoch
    /// its cycle ended at (a mailbox that fills the epoch in when it delivers).
    RecoveredSaysTheEpochNow,
}

impl Fault {
    /// Every planted fault random inputs reach (without `None`;
    /// `RecoveredSaysTheEpochNow` needs a kept input, `tests/planted_faults.rs`).
    pub const ALL: [Fault; 8] = [
        Fault::NotifyAfterUnregister,
        Fault::ExecuteBeforeLastAck,
        Fault::CoalescedRequestLost,
        Fault::StaleEpochAccepted,
        Fault::UnloadMayFinishTwice,
        Fault::JoinerMissesResetEnd,
        Fault::StaleHandleReplay,
        Fault::DuplicateComplete,
    ];
}

/// A machine with a planted fault. Drains the inner machine after every input into its
/// own queue, applying the fault on the way.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Faulty<S: Sut> {
    /// The machine that is wrapped.
    pub inner: S,
    /// The planted fault.
    pub fault: Fault,
    queue: VecDeque<Output>,
    ghosts: Vec<ClientHandle>,
    joiners: Vec<ClientHandle>,
}

impl<S: Sut> Faulty<S> {
    /// Wrap a fresh machine with `fault`.
    pub fn new(config: Config, fault: Fault) -> Self {
        Faulty {
            inner: S::create(config),
            fault,
            queue: VecDeque::new(),
            ghosts: Vec::new(),
            joiners: Vec::new(),
        }
    }

    fn current_of(&self, h: ClientHandle) -> Option<ClientHandle> {
        self.inner
            .client_list(h.device)
            .into_iter()
            .map(|(c, _)| c)
            .find(|c| c.slot == h.slot && c.generation > h.generation)
    }

    fn replay(&self, input: Input) -> Input {
        let fix = |h: ClientHandle| self.current_of(h).unwrap_or(h);
        match input {
            Input::Unregister { client } => Input::Unregister {
                client: fix(client),
            },
            Input::ResetRequest { client } => Input::ResetRequest {
                client: fix(client),
            },
            Input::Hold { client } => Input::Hold {
                client: fix(client),
            },
            Input::AcquireInterface { client } => Input::AcquireInterface {
                client: fix(client),
            },
            other => other,
        }
    }
}

impl<S: Sut> Sut for Faulty<S> {
    const DEVICES: usize = S::DEVICES;
    const CLIENTS: usize = S::CLIENTS;
    const PORTS: usize = S::PORTS;
    const DEVICE_INPUT_OUTPUTS: usize = S::DEVICE_INPUT_OUTPUTS;
    const DRIVER_INPUT_OUTPUTS: usize = S::DRIVER_INPUT_OUTPUTS;

    fn create(config: Config) -> Self {
        Faulty::new(config, Fault::None)
    }

    fn handle(&mut self, now: Tick, input: Input) -> Result<Reply, Error> {
        let before = input.device().and_then(|d| self.inner.phase_detail(d));
        let mut input = input;
        match self.fault {
            Fault::CoalescedRequestLost => {
                let live = match input {
                    Input::ResetRequest { client } => self.inner.client(client).is_some_and(|v| {
                        matches!(v.state, pnp_lifecycle::ClientState::Active { .. })
                    }),
                    Input::FatalError { .. } => true,
                    _ => false,
                };
                if live {
                    if before
                        == Some(Phase::Executing {
                            then: AfterReset::Resume,
                        })
                    {
                        return Ok(Reply::Reset(ResetAnswer::Scheduled));
                    }
                }
            }
            Fault::StaleHandleReplay => input = self.replay(input),
            _ => {}
        }
        let result = self.inner.handle(now, input);
        let mut outs: Vec<Output> = Vec::new();
        while let Some(o) = self.inner.poll_output() {
            outs.push(o);
        }
        let result = match (self.fault, input, result) {
            (Fault::StaleEpochAccepted, Input::Access { .. }, Err(Error::StaleEpoch { .. })) => {
                Ok(Reply::AccessGranted)
            }
            (_, _, r) => r,
        };
        match self.fault {
            Fault::NotifyAfterUnregister => {
                if let (Input::Unregister { client }, Ok(Reply::Unregistered(_))) = (input, &result)
                {
                    if !self.ghosts.contains(&client) {
                        self.ghosts.push(client);
                    }
                }
                let mut extra = Vec::new();
                for o in &outs {
                    if let Output::Notify { client, event } = *o {
                        if matches!(event, Event::Removed { .. } | Event::Revoked) {
                            continue;
                        }
                        if let Some(g) = self.ghosts.iter().position(|g| g.device == client.device)
                        {
                            extra.push(Output::Notify {
                                client: self.ghosts.remove(g),
                                event,
                            });
                        }
                    }
                }
                outs.extend(extra);
            }
            Fault::ExecuteBeforeLastAck => {
                if let (Input::ResetExecute { client }, Ok(_)) = (input, &result) {
                    // Voters left (not a reset that only waits for operations in flight).
                    let voters_left = self.inner.client_list(client.device).iter().any(|(_, v)| {
                        matches!(
                            v.state,
                            pnp_lifecycle::ClientState::Active {
                                role: pnp_lifecycle::Role::Voting,
                                ..
                            }
                        )
                    });
                    if self.inner.phase(client.device) == Some(PhaseKind::Quiescing) && voters_left
                    {
                        outs.push(Output::Hardware {
                            device: client.device,
                            command: HardwareCommand::Reset,
                        });
                    }
                }
            }
            Fault::UnloadMayFinishTwice => {
                if outs.contains(&Output::UnloadMayFinish) {
                    outs.push(Output::UnloadMayFinish);
                }
            }
            Fault::JoinerMissesResetEnd => {
                if let (Input::Register { .. }, Ok(Reply::Registered { client, .. })) =
                    (input, &result)
                {
                    if matches!(
                        before.map(|p| p.kind()),
                        Some(PhaseKind::Quiescing | PhaseKind::Executing)
                    ) {
                        self.joiners.push(*client);
                    }
                }
                let joiners = &mut self.joiners;
                outs.retain(|o| match *o {
                    Output::Notify {
                        client,
                        event: Event::ResetEnd { .. },
                    } => {
                        if let Some(i) = joiners.iter().position(|j| *j == client) {
                            joiners.remove(i);
                            false
                        } else {
                            true
                        }
                    }
                    _ => true,
                });
            }
            Fault::DuplicateComplete => {
                if let Some(c) = outs
                    .iter()
                    .find(|o| matches!(o, Output::Complete { .. }))
                    .copied()
                {
                    outs.push(c);
                }
            }
            Fault::RecoveredSaysTheEpochNow => {
                for o in outs.iter_mut() {
                    if let Output::Notify {
                        client,
                        event: Event::Recovered { epoch },
                    } = o
                    {
                        *epoch = self.inner.epoch(client.device).unwrap_or(*epoch);
                    }
                }
            }
            Fault::None
            | Fault::CoalescedRequestLost
            | Fault::StaleEpochAccepted
            | Fault::StaleHandleReplay => {}
        }
        self.queue.extend(outs);
        result
    }

    fn poll_output(&mut self) -> Option<Output> {
        self.queue.pop_front()
    }
    fn pending_output_count(&self) -> usize {
        self.queue.len()
    }
    fn lost_outputs(&self) -> u32 {
        self.inner.lost_outputs()
    }
    fn phase(&self, device: DeviceId) -> Option<PhaseKind> {
        self.inner.phase(device)
    }
    fn phase_detail(&self, device: DeviceId) -> Option<Phase> {
        self.inner.phase_detail(device)
    }
    fn epoch(&self, device: DeviceId) -> Option<Epoch> {
        self.inner.epoch(device)
    }
    fn driver_phase(&self) -> DriverPhase {
        self.inner.driver_phase()
    }
    fn now(&self) -> Tick {
        self.inner.now()
    }
    fn poll_timeout(&self) -> Option<Tick> {
        self.inner.poll_timeout()
    }
    fn client(&self, handle: ClientHandle) -> Option<ClientView> {
        self.inner.client(handle)
    }
    fn client_list(&self, device: DeviceId) -> Vec<(ClientHandle, ClientView)> {
        self.inner.client_list(device)
    }
    fn binding_caps(&self, handle: ClientHandle) -> Result<BindingCaps, Error> {
        self.inner.binding_caps(handle)
    }
    fn link(&self, device: DeviceId, port: PhysPort) -> Option<LinkState> {
        self.inner.link(device, port)
    }
    fn config(&self) -> Config {
        self.inner.config()
    }
}
