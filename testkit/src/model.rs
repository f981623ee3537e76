//! An independent reference model: a small, slow, deliberately plain reading of
//! `DESIGN.md` plus the choices the core documents in its rustdoc (crate docs, the docs of
//! `Input`, `Event`, `Error`, `CycleOutcome`, and the per-state `TABLE`, which is part of
//! the specification).
//!
//! It uses only the core's public *types* and the `TABLE` data; none of the core's
//! handlers, registry or queue. It keeps state in plain `Vec`s and answers every input
//! with a reply and the full list of outputs it causes.
//!
//! Choices the specification leaves open, taken here (each would show as a divergence if
//! the core chose otherwise; `crate::world::compare_outputs` relaxes only output *order*):
//! * a new client takes the lowest free slot whose generation is not exhausted; freeing a
//!   slot bumps its generation; device slots keep their epoch and generations across
//!   removal and re-add (so epochs only grow and handles never alias);
//! * a link change to the state the port already has is accepted and tells nobody;
//! * checks run in the order: unloaded, device id, table, then the handler's own checks in
//!   the order its doc lists them (client lookup, then state, then data);
//! * the callback and output-queue capacity errors (`CallbackBacklog`, `OutputBacklog`)
//!   are not modelled: the testkit's owner drains outputs after every input and returns
//!   callbacks long before 253 are in flight (the world asserts this precondition).

use pnp_lifecycle::{
    Access, BindingCaps, ClientHandle, ClientKind, ClientState, ClientView, Config, CycleOutcome,
    DeviceId, Disposition, DriverPhase, Epoch, Error, Event, HardwareCommand, Input, InputKind,
    LinkState, Output, PhaseKind, PhysPort, PortCaps, PortSet, Reply, RequestToken, ResetAnswer,
    ResetResult, Role, StartResult, Status, Tick, TrustedTimeoutPolicy, Unregistered, VetoReason,
    TABLE,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Undo {
    None,
    Release,
    ShutdownRelease,
}

impl Undo {
    fn held(held: bool) -> Undo {
        if held {
            Undo::Release
        } else {
            Undo::None
        }
    }
    fn no_registers(self) -> Undo {
        if self == Undo::ShutdownRelease {
            Undo::Release
        } else {
            self
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Hw {
    Start,
    Reset,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Next {
    Resume,
    FollowUp,
    Remove(RequestToken),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Back {
    Added,
    Running,
    Stopped,
    Failed(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum St {
    Absent,
    Added,
    Starting(RequestToken),
    Running,
    Quiescing(u64),
    Executing(Next),
    StopPending,
    Stopped,
    RemovePending(Back),
    Failed(bool),
    Surprised {
        held: bool,
        hw: Option<Hw>,
    },
    Removing {
        token: Option<RequestToken>,
        deadline: u64,
        undo: Undo,
        hw: Option<Hw>,
    },
}

impl St {
    fn kind(self) -> PhaseKind {
        match self {
            St::Absent => PhaseKind::Absent,
            St::Added => PhaseKind::Added,
            St::Starting(_) => PhaseKind::Starting,
            St::Running => PhaseKind::Running,
            St::Quiescing(_) => PhaseKind::Quiescing,
            St::Executing(_) => PhaseKind::Executing,
            St::StopPending => PhaseKind::StopPending,
            St::Stopped => PhaseKind::Stopped,
            St::RemovePending(_) => PhaseKind::RemovePending,
            St::Failed(_) => PhaseKind::Failed,
            St::Surprised { .. } => PhaseKind::SurpriseRemoved,
            St::Removing { .. } => PhaseKind::Removing,
        }
    }
}

/// A client's registration in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Reg {
    Free,
    Live,
    Removed,
    Revoked,
    Leaving,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Cl {
    generation: u16,
    reg: Reg,
    kind: ClientKind,
    role: Role,
    fresh: bool,
    holding: bool,
    ports: PortSet,
    callbacks: u32,
}

impl Cl {
    fn free(generation: u16) -> Cl {
        Cl {
            generation,
            reg: Reg::Free,
            kind: ClientKind::Trusted,
            role: Role::Idle,
            fresh: false,
            holding: false,
            ports: PortSet::EMPTY,
            callbacks: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Dev {
    st: St,
    epoch: u32,
    ports: Vec<Option<(PortCaps, LinkState)>>,
    cls: Vec<Cl>,
}

/// The reference model of a whole driver: `devices` devices of `clients` client slots and
/// `ports` physical ports each.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Model {
    config: Config,
    now: u64,
    driver: DriverPhase,
    devs: Vec<Dev>,
}

/// What a handler produced: the outputs, in the model's order.
type Out = Vec<Output>;

impl Model {
    /// A model with no device, at tick zero.
    pub fn new(devices: usize, clients: usize, ports: usize, config: Config) -> Model {
        let dev = Dev {
            st: St::Absent,
            epoch: 0,
            ports: vec![None; ports],
            cls: vec![Cl::free(0); clients],
        };
        Model {
            config,
            now: 0,
            driver: DriverPhase::Loaded,
            devs: vec![dev; devices],
        }
    }

    /// The model's device state kind.
    pub fn phase(&self, d: DeviceId) -> Option<PhaseKind> {
        self.devs.get(usize::from(d.0)).map(|x| x.st.kind())
    }

    /// The model's epoch of a device.
    pub fn epoch(&self, d: DeviceId) -> Option<Epoch> {
        self.devs.get(usize::from(d.0)).map(|x| Epoch(x.epoch))
    }

    /// The unload fence.
    pub fn driver_phase(&self) -> DriverPhase {
        self.driver
    }

    /// The last tick.
    pub fn now(&self) -> Tick {
        Tick(self.now)
    }

    /// A port's link state, if configured.
    pub fn link(&self, d: DeviceId, p: PhysPort) -> Option<LinkState> {
        self.devs
            .get(usize::from(d.0))?
            .ports
            .get(usize::from(p.0))
            .copied()
            .flatten()
            .map(|(_, l)| l)
    }

    /// Every occupied client slot of a device, as the core's `ClientView`.
    pub fn clients(&self, d: DeviceId) -> Vec<(ClientHandle, ClientView)> {
        let Some(dev) = self.devs.get(usize::from(d.0)) else {
            return Vec::new();
        };
        let mut v = Vec::new();
        for (i, c) in dev.cls.iter().enumerate() {
            let state = match c.reg {
                Reg::Free => continue,
                Reg::Live => ClientState::Active {
                    role: c.role,
                    fresh: c.fresh,
                    holding: c.holding,
                },
                Reg::Removed => ClientState::Removed,
                Reg::Revoked => ClientState::Revoked,
                Reg::Leaving => ClientState::Unregistered,
            };
            v.push((
                ClientHandle {
                    device: d,
                    slot: i as u8,
                    generation: c.generation,
                },
                ClientView {
                    kind: c.kind,
                    state,
                    ports: c.ports,
                    callbacks_in_flight: u8::try_from(c.callbacks).unwrap_or(u8::MAX),
                },
            ));
        }
        v
    }

    /// The most callbacks any client has in flight (the model's precondition is that this
    /// stays far below 253).
    pub fn max_callbacks(&self) -> u32 {
        self.devs
            .iter()
            .flat_map(|d| d.cls.iter())
            .map(|c| c.callbacks)
            .max()
            .unwrap_or(0)
    }

    /// When the model next needs a tick.
    pub fn poll_timeout(&self) -> Option<Tick> {
        if self.driver == DriverPhase::Unloaded {
            return None;
        }
        let mut best: Option<u64> = None;
        for d in &self.devs {
            let t = match d.st {
                St::Quiescing(since) => d
                    .cls
                    .iter()
                    .filter(|c| c.reg == Reg::Live && c.role == Role::Voting)
                    .map(|c| since.saturating_add(self.ack_timeout(c.kind)))
                    .min(),
                St::Removing { deadline, .. } => d
                    .cls
                    .iter()
                    .any(|c| c.reg == Reg::Removed)
                    .then_some(deadline),
                _ => None,
            };
            if let Some(t) = t {
                best = Some(best.map_or(t, |b| b.min(t)));
            }
        }
        best.map(Tick)
    }

    fn ack_timeout(&self, kind: ClientKind) -> u64 {
        match kind {
            ClientKind::Trusted => self.config.trusted_ack_timeout,
            ClientKind::Untrusted => self.config.untrusted_ack_timeout,
        }
    }

    /// The capabilities of a client's binding.
    pub fn binding_caps(&self, h: ClientHandle) -> Result<BindingCaps, Error> {
        let dev = self
            .devs
            .get(usize::from(h.device.0))
            .ok_or(Error::NoSuchDevice)?;
        let i = live_index(dev, h)?;
        let c = &dev.cls[i];
        let mut caps: Option<BindingCaps> = None;
        for p in c.ports.iter() {
            let Some(Some((pc, _))) = dev.ports.get(usize::from(p.0)) else {
                continue;
            };
            caps = Some(match caps {
                None => BindingCaps {
                    protocol: pc.protocol,
                    ports: PortSet::single(p),
                    max_mtu: pc.max_mtu,
                    atomics: pc.atomics,
                },
                Some(b) => BindingCaps {
                    protocol: b.protocol,
                    ports: b.ports.with(p),
                    max_mtu: b.max_mtu.min(pc.max_mtu),
                    atomics: b.atomics && pc.atomics,
                },
            });
        }
        caps.ok_or(Error::NotBound)
    }

    /// Apply one input: the reply and every output it causes. On `Err` the model is
    /// unchanged and the output list is empty.
    pub fn handle(&mut self, input: Input) -> (Result<Reply, Error>, Vec<Output>) {
        let mut next = self.clone();
        let mut out = Vec::new();
        match next.step(input, &mut out) {
            Ok(reply) => {
                next.unload_check(&mut out);
                *self = next;
                (Ok(reply), out)
            }
            Err(e) => (Err(e), Vec::new()),
        }
    }

    fn unload_check(&mut self, out: &mut Out) {
        if self.driver == DriverPhase::Unloading
            && self
                .devs
                .iter()
                .all(|d| d.st == St::Absent && d.cls.iter().all(|c| c.callbacks == 0))
        {
            out.push(Output::UnloadMayFinish);
            self.driver = DriverPhase::Unloaded;
        }
    }

    fn step(&mut self, input: Input, out: &mut Out) -> Result<Reply, Error> {
        if self.driver == DriverPhase::Unloaded {
            return Err(Error::Unloaded);
        }
        match input {
            Input::Tick { now } => return self.tick(now.0, out),
            Input::Unload => return self.unload(out),
            _ => {}
        }
        let Some(d) = input.device() else {
            return Err(Error::NoSuchDevice);
        };
        let di = usize::from(d.0);
        if di >= self.devs.len() {
            return Err(Error::NoSuchDevice);
        }
        let phase = self.devs[di].st.kind();
        let kind = input.kind();
        // The table is part of the specification: consult it first.
        match TABLE[phase as usize].inputs[kind as usize] {
            Disposition::Refuse => return Err(Error::InvalidState { phase, input: kind }),
            Disposition::Veto => return Err(Error::Vetoed(VetoReason::ResetInProgress)),
            Disposition::Ignore => {
                if let Some(token) = input.token() {
                    out.push(Output::Complete {
                        device: d,
                        token,
                        status: Status::Success,
                    });
                }
                return Ok(Reply::Accepted);
            }
            Disposition::Handle | Disposition::Defer => {}
        }
        let unloading = self.driver == DriverPhase::Unloading;
        let now = self.now;
        let config = self.config;
        let mut cx = Cx {
            d,
            now,
            config,
            unloading,
            out,
        };
        self.devs[di].input(&mut cx, input)
    }

    fn tick(&mut self, now: u64, out: &mut Out) -> Result<Reply, Error> {
        if now < self.now {
            return Err(Error::TimeWentBackwards {
                last: Tick(self.now),
            });
        }
        self.now = now;
        let unloading = self.driver == DriverPhase::Unloading;
        let config = self.config;
        for (i, dev) in self.devs.iter_mut().enumerate() {
            let mut cx = Cx {
                d: DeviceId(i as u8),
                now,
                config,
                unloading,
                out,
            };
            dev.tick(&mut cx);
        }
        Ok(Reply::Accepted)
    }

    fn unload(&mut self, out: &mut Out) -> Result<Reply, Error> {
        if self.driver != DriverPhase::Loaded {
            return Err(Error::UnloadAlreadyRequested);
        }
        self.driver = DriverPhase::Unloading;
        let now = self.now;
        let config = self.config;
        for (i, dev) in self.devs.iter_mut().enumerate() {
            let mut cx = Cx {
                d: DeviceId(i as u8),
                now,
                config,
                unloading: true,
                out,
            };
            dev.unload(&mut cx);
        }
        Ok(Reply::Accepted)
    }
}

struct Cx<'a> {
    d: DeviceId,
    now: u64,
    config: Config,
    unloading: bool,
    out: &'a mut Out,
}

impl Cx<'_> {
    fn hw(&mut self, command: HardwareCommand) {
        self.out.push(Output::Hardware {
            device: self.d,
            command,
        });
    }
    fn done(&mut self, token: RequestToken, status: Status) {
        self.out.push(Output::Complete {
            device: self.d,
            token,
            status,
        });
    }
    fn cycle(&mut self, outcome: CycleOutcome) {
        self.out.push(Output::ResetCycleFinished {
            device: self.d,
            outcome,
        });
    }
}

/// Resolve a handle to the index of its current (occupied) client.
fn current_index(dev: &Dev, h: ClientHandle) -> Result<usize, Error> {
    let i = usize::from(h.slot);
    let c = dev.cls.get(i).ok_or(Error::UnknownClient)?;
    if c.generation != h.generation || c.reg == Reg::Free {
        return Err(Error::UnknownClient);
    }
    Ok(i)
}

/// Resolve a handle to a live client, or the typed reason why not.
fn live_index(dev: &Dev, h: ClientHandle) -> Result<usize, Error> {
    let i = current_index(dev, h)?;
    match dev.cls[i].reg {
        Reg::Live => Ok(i),
        Reg::Revoked => Err(Error::ClientRevoked),
        _ => Err(Error::ClientDetaching),
    }
}

impl Dev {
    fn handle_of(&self, d: DeviceId, i: usize) -> ClientHandle {
        ClientHandle {
            device: d,
            slot: i as u8,
            generation: self.cls[i].generation,
        }
    }

    fn tell(&mut self, cx: &mut Cx<'_>, i: usize, event: Event) {
        self.cls[i].callbacks += 1;
        let client = self.handle_of(cx.d, i);
        cx.out.push(Output::Notify { client, event });
    }

    fn tell_live(&mut self, cx: &mut Cx<'_>, event: Event) {
        for i in 0..self.cls.len() {
            if self.cls[i].reg == Reg::Live {
                self.tell(cx, i, event);
            }
        }
    }

    fn release_slot(&mut self, cx: &mut Cx<'_>, i: usize) {
        let client = self.handle_of(cx.d, i);
        let generation = self.cls[i].generation.saturating_add(1);
        self.cls[i] = Cl::free(generation);
        cx.out.push(Output::ClientGone { client });
    }

    fn voters(&self) -> bool {
        self.cls
            .iter()
            .any(|c| c.reg == Reg::Live && c.role == Role::Voting)
    }

    fn all_roles(&mut self, role: Role) {
        for c in self.cls.iter_mut().filter(|c| c.reg == Reg::Live) {
            c.role = role;
        }
    }

    fn input(&mut self, cx: &mut Cx<'_>, input: Input) -> Result<Reply, Error> {
        let ok = Ok(Reply::Accepted);
        match input {
            Input::AddDevice { .. } => {
                if cx.unloading {
                    return Err(Error::Unloading);
                }
                self.st = St::Added;
                ok
            }
            Input::ConfigurePort { port, caps, .. } => {
                let p = self
                    .ports
                    .get_mut(usize::from(port.0))
                    .ok_or(Error::NoSuchPort)?;
                if p.is_some() {
                    return Err(Error::PortAlreadyConfigured);
                }
                *p = Some((caps, LinkState::Down));
                ok
            }
            Input::Start { token, .. } => {
                self.st = St::Starting(token);
                cx.hw(HardwareCommand::Start);
                ok
            }
            Input::StartDone { result, .. } => self.start_done(cx, result).map(|_| Reply::Accepted),
            Input::QueryStop { token, .. } => match self.st {
                St::Running => {
                    self.st = St::StopPending;
                    cx.done(token, Status::Success);
                    ok
                }
                _ => Err(Error::Vetoed(VetoReason::ResetInProgress)),
            },
            Input::CancelStop { token, .. } => {
                self.st = St::Running;
                cx.done(token, Status::Success);
                ok
            }
            Input::Stop { token, .. } => {
                self.st = St::Stopped;
                self.tell_live(cx, Event::DeviceStopped);
                cx.hw(HardwareCommand::Shutdown);
                cx.hw(HardwareCommand::ReleaseResources);
                cx.done(token, Status::Success);
                ok
            }
            Input::QueryRemove { token, .. } => {
                let back = match self.st {
                    St::Added => Back::Added,
                    St::Running => Back::Running,
                    St::Stopped => Back::Stopped,
                    St::Failed(h) => Back::Failed(h),
                    _ => return Err(Error::Vetoed(VetoReason::ResetInProgress)),
                };
                if self.cls.iter().any(|c| c.reg == Reg::Live && c.holding) {
                    return Err(Error::Vetoed(VetoReason::ClientHoldsDevice));
                }
                self.st = St::RemovePending(back);
                cx.done(token, Status::Success);
                ok
            }
            Input::CancelRemove { token, .. } => {
                let St::RemovePending(back) = self.st else {
                    return Err(Error::InvalidState {
                        phase: self.st.kind(),
                        input: InputKind::CancelRemove,
                    });
                };
                self.st = match back {
                    Back::Added => St::Added,
                    Back::Running => St::Running,
                    Back::Stopped => St::Stopped,
                    Back::Failed(h) => St::Failed(h),
                };
                cx.done(token, Status::Success);
                ok
            }
            Input::Remove { token, .. } => self.remove(cx, Some(token)).map(|_| Reply::Accepted),
            Input::SurpriseRemoval { .. } => self.surprise(cx).map(|_| Reply::Accepted),
            Input::FatalError { .. } => self.reset_request(cx).map(Reply::Reset),
            Input::ResetDone { result, .. } => self.reset_done(cx, result).map(|_| Reply::Accepted),
            Input::LinkChanged { port, state, .. } => {
                let pi = usize::from(port.0);
                let Some(Some((_, link))) = self.ports.get_mut(pi) else {
                    return Err(Error::NoSuchPort);
                };
                if *link != state {
                    *link = state;
                    for i in 0..self.cls.len() {
                        if self.cls[i].reg == Reg::Live && self.cls[i].ports.contains(port) {
                            self.tell(cx, i, Event::LinkChanged { port, state });
                        }
                    }
                }
                ok
            }
            Input::Register { kind, .. } => {
                if cx.unloading {
                    return Err(Error::Unloading);
                }
                let role = match self.st {
                    St::Executing(Next::Remove(_)) => return Err(Error::RemoveInProgress),
                    St::Quiescing(_) | St::Executing(_) => Role::Joined,
                    _ => Role::Idle,
                };
                let i = self
                    .cls
                    .iter()
                    .position(|c| c.reg == Reg::Free && c.generation < u16::MAX)
                    .ok_or(Error::RegistryFull)?;
                let c = &mut self.cls[i];
                c.reg = Reg::Live;
                c.kind = kind;
                c.role = role;
                c.fresh = true;
                c.holding = false;
                c.ports = PortSet::EMPTY;
                c.callbacks = 0;
                Ok(Reply::Registered {
                    client: self.handle_of(cx.d, i),
                    epoch: Epoch(self.epoch),
                })
            }
            Input::Unregister { client } => {
                let i = usize::from(client.slot);
                let c = self.cls.get(i).ok_or(Error::UnknownClient)?;
                if client.generation < c.generation {
                    return Ok(Reply::Unregistered(Unregistered::Already));
                }
                if client.generation > c.generation || c.reg == Reg::Free {
                    return Err(Error::UnknownClient);
                }
                if c.reg == Reg::Leaving {
                    return Ok(Reply::Unregistered(Unregistered::Already));
                }
                if c.callbacks == 0 {
                    self.release_slot(cx, i);
                } else {
                    self.cls[i].reg = Reg::Leaving;
                }
                self.maybe_execute(cx);
                self.maybe_finish_removal(cx);
                Ok(Reply::Unregistered(Unregistered::Now))
            }
            Input::CallbackDone { client } => {
                let i = current_index(self, client)?;
                if self.cls[i].callbacks == 0 {
                    return Err(Error::NoCallbackInFlight);
                }
                self.cls[i].callbacks -= 1;
                if self.cls[i].callbacks == 0 && self.cls[i].reg == Reg::Leaving {
                    self.release_slot(cx, i);
                }
                self.maybe_finish_removal(cx);
                ok
            }
            Input::AcquireInterface { client } => {
                let i = live_index(self, client)?;
                self.cls[i].fresh = true;
                Ok(Reply::Interface(Epoch(self.epoch)))
            }
            Input::ResetRequest { client } => {
                live_index(self, client)?;
                self.reset_request(cx).map(Reply::Reset)
            }
            Input::ResetExecute { client } => {
                let i = live_index(self, client)?;
                if self.cls[i].role != Role::Voting {
                    return Err(Error::NotVoting);
                }
                self.cls[i].role = Role::Acked;
                self.maybe_execute(cx);
                ok
            }
            Input::Bind { client, ports } => {
                let i = live_index(self, client)?;
                if ports.is_empty() {
                    return Err(Error::EmptyBinding);
                }
                let mut first = None;
                for p in ports.iter() {
                    let Some(Some((caps, _))) = self.ports.get(usize::from(p.0)) else {
                        return Err(Error::NoSuchPort);
                    };
                    match first {
                        None => first = Some(caps.protocol),
                        Some(f) if f != caps.protocol => {
                            return Err(Error::MixedProtocols {
                                first: f,
                                other: caps.protocol,
                            })
                        }
                        Some(_) => {}
                    }
                }
                self.cls[i].ports = ports;
                ok
            }
            Input::Hold { client } => {
                let i = live_index(self, client)?;
                if self.cls[i].holding {
                    return Err(Error::AlreadyHolding);
                }
                self.cls[i].holding = true;
                ok
            }
            Input::ReleaseHold { client } => {
                let i = live_index(self, client)?;
                if !self.cls[i].holding {
                    return Err(Error::NotHolding);
                }
                self.cls[i].holding = false;
                ok
            }
            Input::Access {
                client,
                epoch,
                what,
            } => {
                let i = live_index(self, client)?;
                let c = &self.cls[i];
                if epoch.0 != self.epoch || !c.fresh {
                    return Err(Error::StaleEpoch {
                        current: Epoch(self.epoch),
                    });
                }
                if matches!(self.st, St::Quiescing(_)) && c.role != Role::Voting {
                    return Err(Error::ResetInProgress);
                }
                if let Access::QueryCounters(p) = what {
                    if !matches!(self.ports.get(usize::from(p.0)), Some(Some(_))) {
                        return Err(Error::NoSuchPort);
                    }
                }
                Ok(Reply::AccessGranted)
            }
            Input::Tick { .. } | Input::Unload => Err(Error::NoSuchDevice),
        }
    }

    fn start_done(&mut self, cx: &mut Cx<'_>, result: StartResult) -> Result<(), Error> {
        let held = result != StartResult::FailedBeforeResources;
        match self.st {
            St::Starting(token) => {
                let ok = result == StartResult::Started;
                cx.done(
                    token,
                    if ok {
                        Status::Success
                    } else {
                        Status::HardwareFailed
                    },
                );
                if cx.unloading {
                    let undo = if ok {
                        Undo::ShutdownRelease
                    } else {
                        Undo::held(held)
                    };
                    self.begin_removal(cx, None, undo, None, false);
                } else if ok {
                    self.st = St::Running;
                    let epoch = Epoch(self.epoch);
                    self.tell_live(cx, Event::DeviceStarted { epoch });
                } else {
                    self.st = St::Failed(held);
                    self.tell_live(cx, Event::DeviceFatal);
                }
                Ok(())
            }
            St::Surprised {
                hw: Some(Hw::Start),
                ..
            } => {
                self.st = St::Surprised { held, hw: None };
                Ok(())
            }
            St::Removing {
                token,
                deadline,
                hw: Some(Hw::Start),
                ..
            } => {
                self.st = St::Removing {
                    token,
                    deadline,
                    undo: Undo::held(held),
                    hw: None,
                };
                self.maybe_finish_removal(cx);
                Ok(())
            }
            _ => Err(Error::NoHardwareCommandInFlight),
        }
    }

    fn undo_for(&self) -> Undo {
        match self.st {
            St::Added | St::Stopped => Undo::None,
            St::Running | St::StopPending | St::Quiescing(_) => Undo::ShutdownRelease,
            St::RemovePending(Back::Added) | St::RemovePending(Back::Stopped) => Undo::None,
            St::RemovePending(Back::Running) => Undo::ShutdownRelease,
            St::RemovePending(Back::Failed(h)) | St::Failed(h) => Undo::held(h),
            _ => Undo::None,
        }
    }

    fn remove(&mut self, cx: &mut Cx<'_>, token: Option<RequestToken>) -> Result<(), Error> {
        match self.st {
            St::Absent => Err(Error::InvalidState {
                phase: PhaseKind::Absent,
                input: InputKind::Remove,
            }),
            St::Starting(_) => match token {
                // Unload waits for the start to report.
                None => Ok(()),
                Some(_) => Err(Error::InvalidState {
                    phase: PhaseKind::Starting,
                    input: InputKind::Remove,
                }),
            },
            St::Executing(next) => {
                let Some(t) = token else {
                    return Ok(()); // unload: the reset's completion removes
                };
                match next {
                    Next::Remove(_) => return Err(Error::RequestPending),
                    Next::FollowUp => cx.cycle(CycleOutcome::AbortedByRemove),
                    Next::Resume => {}
                }
                self.st = St::Executing(Next::Remove(t));
                Ok(())
            }
            St::Removing {
                token: pending,
                deadline,
                undo,
                hw,
            } => match (pending, token) {
                (_, None) => Ok(()),
                (Some(_), Some(_)) => Err(Error::RequestPending),
                (None, Some(t)) => {
                    self.st = St::Removing {
                        token: Some(t),
                        deadline,
                        undo,
                        hw,
                    };
                    self.maybe_finish_removal(cx);
                    Ok(())
                }
            },
            St::Surprised { held, hw } => {
                self.begin_removal(cx, token, Undo::held(held), hw, true);
                Ok(())
            }
            St::Quiescing(_) => {
                self.all_roles(Role::Idle);
                cx.cycle(CycleOutcome::AbortedByRemove);
                self.begin_removal(cx, token, Undo::ShutdownRelease, None, false);
                Ok(())
            }
            _ => {
                let undo = self.undo_for();
                self.begin_removal(cx, token, undo, None, false);
                Ok(())
            }
        }
    }

    fn unload(&mut self, cx: &mut Cx<'_>) {
        if self.st != St::Absent {
            let _ = self.remove(cx, None);
        }
    }

    fn surprise(&mut self, cx: &mut Cx<'_>) -> Result<(), Error> {
        let (held, hw) = match self.st {
            St::Added | St::Stopped => (false, None),
            St::Starting(token) => {
                cx.done(token, Status::DeviceGone);
                (false, Some(Hw::Start))
            }
            St::Running | St::StopPending => (true, None),
            St::Quiescing(_) => {
                self.all_roles(Role::Idle);
                cx.cycle(CycleOutcome::AbortedBySurpriseRemoval);
                (true, None)
            }
            St::Executing(next) => {
                cx.cycle(CycleOutcome::AbortedBySurpriseRemoval);
                self.all_roles(Role::Idle);
                match next {
                    Next::Resume => {}
                    Next::FollowUp => cx.cycle(CycleOutcome::AbortedBySurpriseRemoval),
                    Next::Remove(t) => {
                        self.begin_removal(cx, Some(t), Undo::Release, Some(Hw::Reset), true);
                        return Ok(());
                    }
                }
                (true, Some(Hw::Reset))
            }
            St::RemovePending(back) => match back {
                Back::Added | Back::Stopped => (false, None),
                Back::Running => (true, None),
                Back::Failed(h) => (h, None),
            },
            St::Failed(h) => (h, None),
            St::Removing {
                token,
                deadline,
                undo,
                hw,
            } => {
                self.st = St::Removing {
                    token,
                    deadline,
                    undo: undo.no_registers(),
                    hw,
                };
                return Ok(());
            }
            St::Absent | St::Surprised { .. } => {
                return Err(Error::InvalidState {
                    phase: self.st.kind(),
                    input: InputKind::SurpriseRemoval,
                })
            }
        };
        if cx.unloading {
            self.begin_removal(cx, None, Undo::held(held), hw, true);
            return Ok(());
        }
        for i in 0..self.cls.len() {
            if self.cls[i].reg == Reg::Live {
                self.cls[i].reg = Reg::Removed;
                self.tell(cx, i, Event::Removed { surprise: true });
            }
        }
        self.st = St::Surprised { held, hw };
        Ok(())
    }

    fn begin_removal(
        &mut self,
        cx: &mut Cx<'_>,
        token: Option<RequestToken>,
        undo: Undo,
        hw: Option<Hw>,
        surprise: bool,
    ) {
        for i in 0..self.cls.len() {
            if self.cls[i].reg == Reg::Live {
                self.cls[i].reg = Reg::Removed;
                self.tell(cx, i, Event::Removed { surprise });
            }
        }
        let undo = if surprise { undo.no_registers() } else { undo };
        self.st = St::Removing {
            token,
            deadline: cx.now.saturating_add(cx.config.detach_timeout),
            undo,
            hw,
        };
        self.maybe_finish_removal(cx);
    }

    fn maybe_finish_removal(&mut self, cx: &mut Cx<'_>) {
        let St::Removing {
            token,
            undo,
            hw: None,
            ..
        } = self.st
        else {
            return;
        };
        let drained = self
            .cls
            .iter()
            .all(|c| c.callbacks == 0 && matches!(c.reg, Reg::Free | Reg::Revoked));
        if !drained {
            return;
        }
        for i in 0..self.cls.len() {
            if self.cls[i].reg != Reg::Free {
                self.release_slot(cx, i);
            }
        }
        match undo {
            Undo::None => {}
            Undo::Release => cx.hw(HardwareCommand::ReleaseResources),
            Undo::ShutdownRelease => {
                cx.hw(HardwareCommand::Shutdown);
                cx.hw(HardwareCommand::ReleaseResources);
            }
        }
        if let Some(t) = token {
            cx.done(t, Status::Success);
        }
        cx.out.push(Output::DeviceRemoved { device: cx.d });
        self.st = St::Absent;
        for p in self.ports.iter_mut() {
            *p = None;
        }
    }

    fn reset_request(&mut self, cx: &mut Cx<'_>) -> Result<ResetAnswer, Error> {
        match self.st {
            St::Running => {
                if self.epoch == u32::MAX {
                    return Err(Error::EpochExhausted);
                }
                self.begin_cycle(cx);
                Ok(ResetAnswer::Started)
            }
            St::Quiescing(_) => Ok(ResetAnswer::Joined),
            St::Executing(next) => {
                if cx.unloading {
                    return Err(Error::Unloading);
                }
                match next {
                    Next::Remove(_) => Err(Error::RemoveInProgress),
                    Next::FollowUp => Ok(ResetAnswer::Scheduled),
                    Next::Resume => {
                        if self.epoch >= u32::MAX - 1 {
                            return Err(Error::EpochExhausted);
                        }
                        self.st = St::Executing(Next::FollowUp);
                        Ok(ResetAnswer::Scheduled)
                    }
                }
            }
            _ => Err(Error::InvalidState {
                phase: self.st.kind(),
                input: InputKind::ResetRequest,
            }),
        }
    }

    fn begin_cycle(&mut self, cx: &mut Cx<'_>) {
        self.all_roles(Role::Voting);
        self.tell_live(cx, Event::Reset);
        self.st = St::Quiescing(cx.now);
        self.maybe_execute(cx);
    }

    fn maybe_execute(&mut self, cx: &mut Cx<'_>) {
        if matches!(self.st, St::Quiescing(_)) && !self.voters() {
            self.st = St::Executing(Next::Resume);
            cx.hw(HardwareCommand::Reset);
        }
    }

    fn reset_done(&mut self, cx: &mut Cx<'_>, result: ResetResult) -> Result<(), Error> {
        let next = match self.st {
            St::Executing(n) => n,
            St::Surprised {
                held,
                hw: Some(Hw::Reset),
            } => {
                self.st = St::Surprised { held, hw: None };
                return Ok(());
            }
            St::Removing {
                token,
                deadline,
                undo,
                hw: Some(Hw::Reset),
            } => {
                self.st = St::Removing {
                    token,
                    deadline,
                    undo,
                    hw: None,
                };
                self.maybe_finish_removal(cx);
                return Ok(());
            }
            _ => return Err(Error::NoHardwareCommandInFlight),
        };
        let ok = result == ResetResult::Succeeded;
        if ok {
            self.epoch += 1;
        }
        for c in self.cls.iter_mut().filter(|c| c.reg == Reg::Live) {
            c.role = Role::Idle;
            if ok {
                c.fresh = false;
            }
        }
        let removal = match next {
            Next::Remove(t) => Some(Some(t)),
            _ if cx.unloading => Some(None),
            _ => None,
        };
        if let Some(token) = removal {
            cx.cycle(if ok {
                CycleOutcome::AbortedByRemove
            } else {
                CycleOutcome::HardwareFailed
            });
            if next == Next::FollowUp {
                cx.cycle(CycleOutcome::AbortedByRemove);
            }
            let undo = if ok {
                Undo::ShutdownRelease
            } else {
                Undo::Release
            };
            self.begin_removal(cx, token, undo, None, false);
            return Ok(());
        }
        if !ok {
            self.st = St::Failed(true);
            self.tell_live(cx, Event::DeviceFatal);
            cx.cycle(CycleOutcome::HardwareFailed);
            if next == Next::FollowUp {
                cx.cycle(CycleOutcome::HardwareFailed);
            }
            return Ok(());
        }
        let epoch = Epoch(self.epoch);
        self.tell_live(cx, Event::ResetEnd { epoch });
        cx.cycle(CycleOutcome::Completed(epoch));
        self.st = St::Running;
        if next == Next::FollowUp {
            self.begin_cycle(cx);
        }
        Ok(())
    }

    fn tick(&mut self, cx: &mut Cx<'_>) {
        match self.st {
            St::Quiescing(since) => {
                let mut fail = false;
                for i in 0..self.cls.len() {
                    let c = &self.cls[i];
                    if c.reg != Reg::Live || c.role != Role::Voting {
                        continue;
                    }
                    let due = cx.now
                        >= since.saturating_add(match c.kind {
                            ClientKind::Trusted => cx.config.trusted_ack_timeout,
                            ClientKind::Untrusted => cx.config.untrusted_ack_timeout,
                        });
                    if !due {
                        continue;
                    }
                    let revoke = c.kind == ClientKind::Untrusted
                        || cx.config.trusted_policy == TrustedTimeoutPolicy::Revoke;
                    if revoke {
                        self.cls[i].reg = Reg::Revoked;
                        self.tell(cx, i, Event::Revoked);
                    } else {
                        fail = true;
                    }
                }
                if fail {
                    self.all_roles(Role::Idle);
                    self.st = St::Failed(true);
                    cx.cycle(CycleOutcome::ClientTimedOut);
                    self.tell_live(cx, Event::DeviceFatal);
                } else {
                    self.maybe_execute(cx);
                }
            }
            St::Removing { deadline, .. } if cx.now >= deadline => {
                // Removed was their last event: revoke silently.
                for c in self.cls.iter_mut().filter(|c| c.reg == Reg::Removed) {
                    c.reg = Reg::Revoked;
                }
                self.maybe_finish_removal(cx);
            }
            _ => {}
        }
    }
}
