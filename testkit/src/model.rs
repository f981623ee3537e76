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
//! * the output-queue capacity error (`OutputBacklog`) is not modelled: the testkit's owner
//!   drains outputs after every input;
//! * a client has at most one callback in flight; later events wait in a mailbox that
//!   coalesces as the core documents (`Removed`/`Revoked` replace everything, one bit a
//!   port for link changes told with the state at delivery, device news replaces older
//!   news, `RESET`/`RESET_END` in order; ordered events before links before the last one).

use pnp_lifecycle::table::{Disposition, TABLE};
use pnp_lifecycle::{
    Access, BindingCaps, CallbackAnswer, CannotResetReason, ClientHandle, ClientKind, ClientState,
    ClientView, Config, CycleOutcome, DeviceId, DriverPhase, Epoch, Error, Event, FailureCause,
    FastPathGate, FatalAnswer, GroupId, HardwareCommand, Input, InputKind, LinkState, Output,
    PhaseKind, PhysPort, PortCaps, PortSet, PowerDownKind, PowerUpResult, Reply, RequestToken,
    ResetAnswer, ResetResult, Role, StartResult, Status, Tick, TrustedTimeoutPolicy, Unregistered,
    VetoReason,
};

/// Hardware operations one client may have in flight (the core documents 16).
const OPS_PER_CLIENT: u32 = 16;

/// A client's fast-path gate as the model told the owner (DESIGN.md "Operations: the fast
/// path", read here as a state at the end of every input: open exactly while the device is
/// running and the client live, unfenced and at the current epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Gate {
    Shut,
    Open,
    /// Close asked at this tick, answer awaited: operations of unknown number.
    Closing(u64),
}

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
    PowerDown,
    PowerUp,
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
    LowPower(PowerDownKind),
}

/// The query a power transition was asked during: the device returns to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Ret {
    /// Back to StopPending; a Stop held meanwhile.
    Stop(Option<RequestToken>),
    Remove,
}

impl Ret {
    fn kind(self) -> PhaseKind {
        match self {
            Ret::Stop(_) => PhaseKind::StopPending,
            Ret::Remove => PhaseKind::RemovePending,
        }
    }

    /// The query's state once the transition ends (`low`: in Dx), `fatal` held.
    fn st(self, low: Option<PowerDownKind>, fatal: bool) -> St {
        match self {
            Ret::Stop(_) => St::StopPending(fatal, low),
            Ret::Remove => St::RemovePending(low.map_or(Back::Running, Back::LowPower), fatal),
        }
    }

    fn held_stop(self) -> Option<RequestToken> {
        match self {
            Ret::Stop(t) => t,
            Ret::Remove => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum St {
    Absent,
    Added,
    Starting(RequestToken, bool),
    Running,
    /// A reset cycle: since when, whether some voter needs the reset (or there was no
    /// voter), and since when the reset waits for hardware operations in flight.
    Quiescing {
        since: u64,
        reset_needed: bool,
        draining: Option<u64>,
    },
    Executing(Next),
    /// A pending stop: a deferred fatal error, and the low-power state it was asked in.
    StopPending(bool, Option<PowerDownKind>),
    /// A stop waiting for hardware operations: its token, since when, a folded fatal.
    Stopping {
        token: RequestToken,
        since: u64,
        fatal: bool,
    },
    Stopped,
    RemovePending(Back, bool),
    Failed(bool),
    Surprised {
        held: bool,
        hw: Option<Hw>,
    },
    Removing {
        token: Option<RequestToken>,
        /// `None`: beyond the clock's range (never reached).
        deadline: Option<u64>,
        undo: Undo,
        hw: Option<Hw>,
    },
    /// Clients told Suspending; draining operations, then the power-down command.
    PoweringDown {
        kind: PowerDownKind,
        token: RequestToken,
        since: u64,
        commanded: bool,
        reset: bool,
        /// An access came during an idle power-down: back up once down.
        wake: bool,
        /// Asked while a query was pending: back to it (`reset` is its deferred fatal).
        back: Option<Ret>,
    },
    /// In Dx; `reset`: a reset waits for the power-up.
    LowPower {
        kind: PowerDownKind,
        reset: bool,
    },
    /// Power-up commanded.
    PoweringUp {
        token: Option<RequestToken>,
        reset: bool,
        back: Option<Ret>,
    },
}

impl St {
    fn kind(self) -> PhaseKind {
        match self {
            St::Absent => PhaseKind::Absent,
            St::Added => PhaseKind::Added,
            St::Starting(..) => PhaseKind::Starting,
            St::Running => PhaseKind::Running,
            St::Quiescing { .. } => PhaseKind::Quiescing,
            St::Executing(_) => PhaseKind::Executing,
            St::StopPending(..) => PhaseKind::StopPending,
            St::Stopping { .. } => PhaseKind::Stopping,
            St::Stopped => PhaseKind::Stopped,
            St::RemovePending(..) => PhaseKind::RemovePending,
            St::Failed(_) => PhaseKind::Failed,
            St::Surprised { .. } => PhaseKind::SurpriseRemoved,
            St::Removing { .. } => PhaseKind::Removing,
            St::PoweringDown { .. } => PhaseKind::PoweringDown,
            St::LowPower { .. } => PhaseKind::LowPower,
            St::PoweringUp { .. } => PhaseKind::PoweringUp,
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

#[derive(Debug, PartialEq, Eq, Hash)]
struct Cl {
    generation: u16,
    reg: Reg,
    kind: ClientKind,
    role: Role,
    fresh: bool,
    holding: bool,
    /// Declared it cannot pause (vetoes query stop while live).
    cannot_pause: bool,
    ports: PortSet,
    /// When the callback in flight was made, if one is.
    cb: Option<u64>,
    /// When its `RESET` of the running cycle was handed over: the answer's deadline counts
    /// from here (DESIGN r3: a deadline runs only while the client can act).
    reset_at: Option<u64>,
    /// Hardware operations granted and not reported done (nor fenced), with those a
    /// fast-path close carried.
    ops: u32,
    /// The owner was asked to fence the client and has not reported it done.
    fence: bool,
    mbox: Mbox,
    gate: Gate,
}

/// The events waiting for a client whose callback is in flight.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Mbox {
    ordered: Vec<Event>,
    links: PortSet,
    last: Option<Event>,
}

impl Default for Mbox {
    fn default() -> Self {
        Mbox {
            ordered: Vec::new(),
            links: PortSet::EMPTY,
            last: None,
        }
    }
}

impl Mbox {
    fn is_empty(&self) -> bool {
        self.ordered.is_empty() && self.links.is_empty() && self.last.is_none()
    }
    fn len(&self) -> usize {
        self.ordered.len() + self.links.len() as usize + usize::from(self.last.is_some())
    }
    fn put(&mut self, e: Event) {
        if self.last.is_some() {
            return;
        }
        match e {
            Event::Removed { .. } | Event::Revoked => {
                *self = Mbox::default();
                self.last = Some(e);
            }
            Event::LinkChanged { port, .. } => self.links = self.links.with(port),
            Event::DeviceStarted { .. }
            | Event::DeviceStopped
            | Event::DeviceFatal
            | Event::Suspending { .. }
            | Event::Resumed { .. } => {
                // Device news (power news too) replaces older device news.
                self.ordered.retain(|x| {
                    !matches!(
                        x,
                        Event::DeviceStarted { .. }
                            | Event::DeviceStopped
                            | Event::DeviceFatal
                            | Event::Suspending { .. }
                            | Event::Resumed { .. }
                    )
                });
                if e == Event::DeviceFatal {
                    // After DeviceFatal only a last event follows: waiting link news goes.
                    self.links = PortSet::EMPTY;
                }
                self.ordered.push(e);
            }
            Event::Recovered { .. } if self.ordered.contains(&Event::Reset) => {
                // A cycle that ended before its RESET reached the client (a group's cycle
                // ended for another member, a nack): the client never hears of it.
                if let Some(i) = self.ordered.iter().rposition(|x| *x == Event::Reset) {
                    self.ordered.remove(i);
                }
            }
            Event::Reset | Event::ResetEnd { .. } | Event::Recovered { .. } => self.ordered.push(e),
        }
    }
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
            cannot_pause: false,
            ports: PortSet::EMPTY,
            cb: None,
            reset_at: None,
            ops: 0,
            fence: false,
            mbox: Mbox::default(),
            gate: Gate::Shut,
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Dev {
    st: St,
    /// A system sleep asked for during a reset cycle.
    sleep: Option<RequestToken>,
    epoch: u32,
    ports: Vec<Option<(PortCaps, LinkState)>>,
    cls: Vec<Cl>,
    /// The owner runs the fast path: gates open and close.
    fast: bool,
    /// The reset group the owner declared, if any.
    group: Option<GroupId>,
    /// Its part in the group's cycle under way.
    part: Part,
}

/// A member's part in its group's cycle (DESIGN.md "Reset groups").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Part {
    /// Takes part: its cycle waits for the group's decision.
    on: bool,
    /// Quiesced: `Some(reset_needed)`.
    ready: Option<bool>,
    /// Executing the group's reset, commanded through the carrier.
    awaits: bool,
    /// The group's reset went through this device.
    carrier: bool,
    /// A voter refused.
    refused: Option<ClientHandle>,
    /// During one input on this member: another member cannot take part, so a cycle the
    /// input would begin is answered at once, nobody told `RESET`.
    blocked: Option<(DeviceId, CannotResetReason)>,
}

/// A group's cycle: its deadline (`None`: beyond the clock) and whether the reset was
/// commanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct GroupRun {
    deadline: Option<u64>,
    commanded: bool,
}

/// The reference model of a whole driver: `devices` devices of `clients` client slots and
/// `ports` physical ports each.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Model {
    config: Config,
    now: u64,
    driver: DriverPhase,
    devs: Vec<Dev>,
    /// Each reset group's cycle under way, by group id.
    groups: Vec<Option<GroupRun>>,
}

// `Clone` by hand for the model's plain `Vec`s: `clone_from` reuses the target's
// allocations, so `Model::handle`'s copy-then-commit (a refused input changes nothing)
// costs no allocation a step (it was a tenth of a `core_inputs` fuzz step, with its
// frees). Every field is copied, as a derived `Clone` would.
impl Cl {
    /// Hardware operations may be in flight: granted, carried by a close, or behind a gate
    /// that is open or closing (an open gate counts until the model's end-of-input close).
    fn owes_ops(&self) -> bool {
        self.ops > 0 || self.gate != Gate::Shut
    }
}

impl Clone for Mbox {
    fn clone(&self) -> Self {
        Mbox {
            ordered: self.ordered.clone(),
            links: self.links,
            last: self.last,
        }
    }
    fn clone_from(&mut self, source: &Self) {
        self.ordered.clone_from(&source.ordered);
        self.links = source.links;
        self.last = source.last;
    }
}

impl Clone for Cl {
    fn clone(&self) -> Self {
        Cl {
            mbox: self.mbox.clone(),
            ..*self
        }
    }
    fn clone_from(&mut self, source: &Self) {
        let Cl {
            generation,
            reg,
            kind,
            role,
            fresh,
            holding,
            cannot_pause,
            ports,
            cb,
            reset_at,
            ops,
            fence,
            mbox,
            gate,
        } = source;
        self.generation = *generation;
        self.reg = *reg;
        self.kind = *kind;
        self.role = *role;
        self.fresh = *fresh;
        self.holding = *holding;
        self.cannot_pause = *cannot_pause;
        self.ports = *ports;
        self.cb = *cb;
        self.reset_at = *reset_at;
        self.ops = *ops;
        self.fence = *fence;
        self.mbox.clone_from(mbox);
        self.gate = *gate;
    }
}

impl Clone for Dev {
    fn clone(&self) -> Self {
        Dev {
            st: self.st,
            sleep: self.sleep,
            epoch: self.epoch,
            ports: self.ports.clone(),
            cls: self.cls.clone(),
            fast: self.fast,
            group: self.group,
            part: self.part,
        }
    }
    fn clone_from(&mut self, source: &Self) {
        self.st = source.st;
        self.sleep = source.sleep;
        self.epoch = source.epoch;
        self.ports.clone_from(&source.ports);
        self.cls.clone_from(&source.cls);
        self.fast = source.fast;
        self.group = source.group;
        self.part = source.part;
    }
}

impl Clone for Model {
    fn clone(&self) -> Self {
        Model {
            config: self.config,
            now: self.now,
            driver: self.driver,
            devs: self.devs.clone(),
            groups: self.groups.clone(),
        }
    }
    fn clone_from(&mut self, source: &Self) {
        self.config = source.config;
        self.now = source.now;
        self.driver = source.driver;
        self.devs.clone_from(&source.devs);
        self.groups.clone_from(&source.groups);
    }
}

std::thread_local! {
    /// `Model::handle`'s working copy, kept between steps for its allocations.
    static SCRATCH: core::cell::RefCell<Option<Model>> = const { core::cell::RefCell::new(None) };
}

/// What a handler produced: the outputs, in the model's order.
type Out = Vec<Output>;

impl Model {
    /// A model with no device, at tick zero.
    pub fn new(devices: usize, clients: usize, ports: usize, config: Config) -> Model {
        let dev = Dev {
            st: St::Absent,
            sleep: None,
            epoch: 0,
            ports: vec![None; ports],
            cls: vec![Cl::free(0); clients],
            fast: false,
            group: None,
            part: Part::default(),
        };
        Model {
            config,
            now: 0,
            driver: DriverPhase::Loaded,
            devs: vec![dev; devices],
            groups: vec![None; devices],
        }
    }

    /// The same model for an owner that runs the fast path (the core's
    /// `Lifecycle::with_fast_path`).
    pub fn with_fast_path(mut self) -> Model {
        for d in &mut self.devs {
            d.fast = true;
        }
        self
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
        let mut v = Vec::new();
        self.clients_into(d, &mut v);
        v
    }

    /// [`Self::clients`] into `v` (cleared first), reusing its allocation.
    pub fn clients_into(&self, d: DeviceId, v: &mut Vec<(ClientHandle, ClientView)>) {
        v.clear();
        let Some(dev) = self.devs.get(usize::from(d.0)) else {
            return;
        };
        for (i, c) in dev.cls.iter().enumerate() {
            let state = match c.reg {
                Reg::Free => continue,
                Reg::Live => ClientState::Active {
                    role: c.role,
                    fresh: c.fresh,
                    holding: c.holding,
                    cannot_pause: c.cannot_pause,
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
                    callback_in_flight: c.cb.is_some(),
                    operations_in_flight: u8::try_from(c.ops).unwrap_or(u8::MAX),
                    waiting_events: c.mbox.len() as u8,
                    fence_requested: c.fence,
                },
            ));
        }
    }

    /// When the model next needs a tick.
    pub fn poll_timeout(&self) -> Option<Tick> {
        if self.driver == DriverPhase::Unloaded {
            return None;
        }
        // A reset group's cycle waiting for its members has its one deadline.
        let mut best: Option<u64> = self
            .groups
            .iter()
            .flatten()
            .filter(|r| !r.commanded)
            .filter_map(|r| r.deadline)
            .min();
        for d in &self.devs {
            for c in d.cls.iter().filter(|c| !c.fence) {
                if let Some(since) = c.cb {
                    if let Some(t) = since.checked_add(self.config.callback_timeout) {
                        best = Some(best.map_or(t, |b| b.min(t)));
                    }
                }
            }
            let unfenced_ops = d.cls.iter().any(|c| c.owes_ops() && !c.fence);
            let op_deadline = |from: u64| from.checked_add(self.config.operation_timeout);
            let mut ts: Vec<u64> = Vec::new();
            // A close unanswered has the operation timeout.
            for c in d.cls.iter().filter(|c| !c.fence) {
                if let Gate::Closing(since) = c.gate {
                    ts.extend(op_deadline(since));
                }
            }
            match d.st {
                St::Quiescing { draining, .. } => {
                    ts.extend(
                        d.cls
                            .iter()
                            .filter(|c| c.reg == Reg::Live && c.role == Role::Voting)
                            .filter_map(|c| c.reset_at?.checked_add(self.ack_timeout(c.kind))),
                    );
                    if let (Some(from), true) = (draining, unfenced_ops) {
                        ts.extend(op_deadline(from));
                    }
                }
                St::Stopping { since, .. }
                | St::PoweringDown {
                    since,
                    commanded: false,
                    ..
                } if unfenced_ops => ts.extend(op_deadline(since)),
                St::Removing { deadline, .. }
                    if unfenced_ops || d.cls.iter().any(|c| c.reg == Reg::Removed) =>
                {
                    ts.extend(deadline)
                }
                _ => {}
            }
            if let Some(t) = ts.into_iter().min() {
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
    pub fn handle(&mut self, now: Tick, input: Input) -> (Result<Reply, Error>, Vec<Output>) {
        // The input runs on a copy, committed only if accepted: a refused input changes
        // nothing. The copy reuses the allocations of the one before (see `SCRATCH`).
        let mut next = SCRATCH
            .with(|s| s.borrow_mut().take())
            .unwrap_or_else(|| self.clone());
        next.clone_from(self);
        let mut out = Vec::new();
        let result = match next.step(now.0, input, &mut out) {
            Ok(reply) => {
                next.now = now.0;
                next.unload_check(&mut out);
                core::mem::swap(self, &mut next);
                (Ok(reply), out)
            }
            Err(e) => (Err(e), Vec::new()),
        };
        SCRATCH.with(|s| *s.borrow_mut() = Some(next));
        result
    }

    fn unload_check(&mut self, out: &mut Out) {
        if self.driver == DriverPhase::Unloading && self.devs.iter().all(|d| d.st == St::Absent) {
            out.push(Output::UnloadMayFinish);
            self.driver = DriverPhase::Unloaded;
        }
    }

    fn step(&mut self, now: u64, input: Input, out: &mut Out) -> Result<Reply, Error> {
        if self.driver == DriverPhase::Unloaded {
            return Err(Error::Unloaded);
        }
        if now < self.now {
            return Err(Error::TimeWentBackwards {
                last: Tick(self.now),
            });
        }
        self.now = now;
        match input {
            Input::Timeout => return self.tick(now, out),
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
        // A power transition for a pending query: a client's input gets the query's answer.
        if let St::PoweringDown { back: Some(r), .. } | St::PoweringUp { back: Some(r), .. } =
            self.devs[di].st
        {
            let client_input = matches!(
                kind,
                InputKind::Register
                    | InputKind::AcquireInterface
                    | InputKind::ResetRequest
                    | InputKind::Hold
                    | InputKind::ReleaseHold
                    | InputKind::Access
                    | InputKind::CannotPause
                    | InputKind::CanPause
            );
            if client_input && TABLE[r.kind() as usize].inputs[kind as usize] == Disposition::Refuse
            {
                return Err(Error::InvalidState {
                    phase: r.kind(),
                    input: kind,
                });
            }
        }
        let unloading = self.driver == DriverPhase::Unloading;
        let now = self.now;
        let config = self.config;
        let group = self.devs[di].group;
        let carrier = self.devs[di].part.carrier;
        let mut cx = Cx {
            d,
            now,
            config,
            unloading,
            out,
        };
        let reply = match input {
            Input::JoinResetGroup { group, .. } => {
                if let Some(current) = self.devs[di].group {
                    return Err(Error::AlreadyInResetGroup { group: current });
                }
                if usize::from(group.0) >= self.devs.len() {
                    return Err(Error::NoSuchGroup);
                }
                if self.groups[usize::from(group.0)].is_some() {
                    return Err(Error::GroupCycleInProgress { group });
                }
                // A new member has no part in any cycle yet.
                self.devs[di].group = Some(group);
                self.devs[di].part = Part::default();
                Reply::Accepted
            }
            Input::LeaveResetGroup { .. } => {
                if let Some(group) = self.devs[di].group {
                    if self.groups[usize::from(group.0)].is_some() {
                        return Err(Error::GroupCycleInProgress { group });
                    }
                }
                self.devs[di].group = None;
                self.devs[di].part = Part::default();
                Reply::Accepted
            }
            Input::ResetDone { .. } if self.devs[di].part.awaits && !self.devs[di].part.carrier => {
                // The group's reset went through its carrier, not this member.
                return Err(Error::NoHardwareCommandInFlight);
            }
            _ => {
                let blocked = match group {
                    Some(g) if self.groups[usize::from(g.0)].is_none() => self
                        .devs
                        .iter()
                        .enumerate()
                        .filter(|&(i, d)| i != di && d.group == Some(g))
                        .find_map(|(i, d)| d.group_blocker().map(|r| (DeviceId(i as u8), r))),
                    _ => None,
                };
                self.devs[di].part.blocked = blocked;
                let reply = self.devs[di].input(&mut cx, input);
                self.devs[di].part.blocked = None;
                reply?
            }
        };
        self.devs[di].after(&mut cx);
        // A device that just joined: its new group settles (a waiting member begins).
        if let Some(group) = group.or(self.devs[di].group) {
            let carrier_done = match input {
                Input::ResetDone { result, .. } if carrier => Some(result),
                _ => None,
            };
            self.settle(group, carrier_done, out);
        }
        Ok(reply)
    }

    fn tick(&mut self, now: u64, out: &mut Out) -> Result<Reply, Error> {
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
            dev.after(&mut cx);
        }
        self.settle_all(out);
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
            dev.after(&mut cx);
        }
        self.settle_all(out);
        Ok(Reply::Accepted)
    }

    // ---- reset groups (DESIGN.md "Reset groups") ------------------------------------

    /// Run `f` on every member of `g` with its own context.
    fn members(&mut self, g: GroupId, out: &mut Out, mut f: impl FnMut(&mut Dev, &mut Cx<'_>)) {
        let unloading = self.driver == DriverPhase::Unloading;
        let (now, config) = (self.now, self.config);
        for (i, dev) in self.devs.iter_mut().enumerate() {
            if dev.group != Some(g) {
                continue;
            }
            let mut cx = Cx {
                d: DeviceId(i as u8),
                now,
                config,
                unloading,
                out,
            };
            f(dev, &mut cx);
        }
    }

    /// The first member of `g` for which `f` says something.
    fn first<T>(&self, g: GroupId, f: impl Fn(&Dev) -> Option<T>) -> Option<(DeviceId, T)> {
        self.devs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.group == Some(g))
            .find_map(|(i, d)| f(d).map(|t| (DeviceId(i as u8), t)))
    }

    /// A timeout or unload: each group's cycle checks its deadline, then moves on.
    fn settle_all(&mut self, out: &mut Out) {
        for gi in 0..self.groups.len() {
            let Some(run) = self.groups[gi] else { continue };
            let g = GroupId(gi as u8);
            if !run.commanded && run.deadline.is_some_and(|at| self.now >= at) {
                // The first member holding the reset back: quiescing, or left (it failed)
                // with operations in flight.
                let late = self
                    .first(g, |d| {
                        let left_with_ops = !d.part.on
                            && !matches!(
                                d.st,
                                St::Absent | St::Surprised { .. } | St::Removing { .. }
                            )
                            && d.cls.iter().any(Cl::owes_ops);
                        ((d.part.on && d.group_ready().is_none()) || left_with_ops).then_some(())
                    })
                    .or_else(|| self.first(g, |d| d.part.on.then_some(())));
                match late {
                    Some((member, ())) => {
                        self.end_group(g, member, CannotResetReason::DeadlinePassed, out)
                    }
                    None => self.groups[gi] = None,
                }
            }
            self.settle(g, None, out);
        }
    }

    /// No reset for the group: every member taking part (or wanting a cycle) ends its part
    /// answering `CannotReset`.
    fn end_group(
        &mut self,
        g: GroupId,
        member: DeviceId,
        reason: CannotResetReason,
        out: &mut Out,
    ) {
        let outcome = CycleOutcome::CannotReset { member, reason };
        self.members(g, out, |d, cx| {
            if d.part.on || d.wants_group_cycle() {
                d.end_group_part(cx, outcome);
            }
        });
        self.groups[usize::from(g.0)] = None;
    }

    /// After an input on a member (or the time): the group's cycle moves on.
    fn settle(&mut self, g: GroupId, carrier_done: Option<ResetResult>, out: &mut Out) {
        let gi = usize::from(g.0);
        if let Some(result) = carrier_done {
            if self.groups[gi].is_some_and(|r| r.commanded) {
                self.members(g, out, |d, cx| {
                    let awaited = d.part.awaits && !d.part.carrier;
                    // The carrier's follow-up cycle may be quiesced already.
                    let ready = match d.st {
                        St::Quiescing { .. } => d.part.ready,
                        _ => None,
                    };
                    d.part = Part {
                        ready,
                        ..Part::default()
                    };
                    if awaited {
                        let _ = d.reset_done(cx, result);
                        // A system sleep that waited for the cycle begins now.
                        d.sleep_after(cx);
                    }
                });
                self.groups[gi] = None;
            }
        }
        self.group_progress(g, out);
        if self.groups[gi].is_none()
            && self
                .first(g, |d| d.wants_group_cycle().then_some(()))
                .is_some()
        {
            match self.first(g, Dev::group_blocker) {
                Some((member, reason)) => self.end_group(g, member, reason, out),
                None => {
                    self.groups[gi] = Some(GroupRun {
                        deadline: self.now.checked_add(self.config.group_cycle_timeout()),
                        commanded: false,
                    });
                    self.members(g, out, |d, cx| d.join_group(cx));
                    self.group_progress(g, out);
                }
            }
        }
        self.members(g, out, |d, cx| d.after(cx));
    }

    fn group_progress(&mut self, g: GroupId, out: &mut Out) {
        let gi = usize::from(g.0);
        let Some(run) = self.groups[gi] else { return };
        if run.commanded {
            return;
        }
        self.members(g, out, |d, cx| {
            if d.part.on && !d.in_group_cycle() {
                d.part = Part::default();
                if d.st == St::Running {
                    // Back from a lost-state power-up: the group's reset touches it too.
                    d.join_group(cx);
                }
            }
        });
        // A member that failed and left, then got a query or a stop: no reset.
        if let Some((member, reason)) = self.first(g, |d| {
            if d.part.on || matches!(d.st, St::Failed { .. }) {
                None
            } else {
                d.group_blocker()
            }
        }) {
            self.end_group(g, member, reason, out);
            return;
        }
        if let Some((member, client)) = self.first(g, |d| d.part.refused) {
            self.end_group(g, member, CannotResetReason::ClientRefused(client), out);
            return;
        }
        if self.first(g, |d| d.part.on.then_some(())).is_none() {
            self.groups[gi] = None;
            return;
        }
        if self
            .first(g, |d| {
                (d.part.on && d.group_ready().is_none()).then_some(())
            })
            .is_some()
        {
            return;
        }
        if self.first(g, |d| d.group_ready().filter(|n| *n)).is_some() {
            // A member that left (it failed) still shares the hardware: the reset waits
            // until its operations, fenced or not, have ended.
            let still_there = |d: &Dev| {
                !matches!(
                    d.st,
                    St::Absent | St::Surprised { .. } | St::Removing { .. }
                )
            };
            if self
                .first(g, |d| {
                    (!d.part.on && still_there(d) && d.cls.iter().any(Cl::owes_ops)).then_some(())
                })
                .is_some()
            {
                return;
            }
            let carrier = self.first(g, Dev::group_ready).map(|(id, _)| id);
            self.groups[gi] = Some(GroupRun {
                commanded: true,
                ..run
            });
            self.members(g, out, |d, cx| {
                if d.group_ready().is_some() {
                    d.part = Part {
                        on: true,
                        awaits: true,
                        carrier: Some(cx.d) == carrier,
                        ..Part::default()
                    };
                    d.st = St::Executing(Next::Resume);
                    if Some(cx.d) == carrier {
                        cx.hw(HardwareCommand::Reset);
                    }
                }
            });
        } else {
            self.members(g, out, |d, cx| {
                if d.group_ready().is_some() {
                    let outcome = CycleOutcome::Recovered(Epoch(d.epoch));
                    d.end_group_part(cx, outcome);
                }
            });
            self.groups[gi] = None;
        }
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
    fn failed(&mut self, cause: FailureCause) {
        self.out.push(Output::DeviceFailed {
            device: self.d,
            cause,
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

    /// Call the client now if nothing of its is in flight or waiting; else keep the event.
    fn tell(&mut self, cx: &mut Cx<'_>, i: usize, event: Event) {
        let c = &mut self.cls[i];
        if c.cb.is_none() && c.mbox.is_empty() {
            c.cb = Some(cx.now);
            if event == Event::Reset {
                c.reset_at = Some(cx.now);
            }
            let client = self.handle_of(cx.d, i);
            cx.out.push(Output::Notify { client, event });
        } else {
            if event == Event::Reset {
                c.reset_at = None;
            }
            c.mbox.put(event);
        }
    }

    /// The client's callback returned: its next waiting event, if any.
    fn deliver_next(&mut self, cx: &mut Cx<'_>, i: usize) {
        let next = {
            let c = &mut self.cls[i];
            if !c.mbox.ordered.is_empty() {
                Some(c.mbox.ordered.remove(0))
            } else {
                let mut found = None;
                while let Some(port) = c.mbox.links.iter().next() {
                    c.mbox.links = PortSet(c.mbox.links.0 & !PortSet::single(port).0);
                    if c.ports.contains(port) {
                        if let Some(Some((_, state))) = self.ports.get(usize::from(port.0)) {
                            found = Some(Event::LinkChanged {
                                port,
                                state: *state,
                            });
                            break;
                        }
                    }
                }
                found.or_else(|| c.mbox.last.take())
            }
        };
        if let Some(event) = next {
            self.cls[i].cb = Some(cx.now);
            if event == Event::Reset {
                self.cls[i].reset_at = Some(cx.now);
            }
            let client = self.handle_of(cx.d, i);
            cx.out.push(Output::Notify { client, event });
        }
    }

    /// Revoke: fence if a callback is in flight, else tell `Revoked` (when `tell`).
    fn revoke(&mut self, cx: &mut Cx<'_>, i: usize, tell: bool) {
        // A voter revoked without saying it can recover makes the reset run.
        if self.cls[i].reg == Reg::Live && self.cls[i].role == Role::Voting {
            self.reset_is_needed();
        }
        // An open gate the rule no longer wants is closing: operations of unknown number.
        let gate_owes = match self.cls[i].gate {
            Gate::Shut => false,
            Gate::Open => !self.wants_open(&self.cls[i]),
            Gate::Closing(_) => true,
        };
        let newly = matches!(self.cls[i].reg, Reg::Live | Reg::Removed);
        if newly {
            self.cls[i].reg = Reg::Revoked;
        }
        self.cls[i].mbox = Mbox::default();
        let fence =
            (self.cls[i].cb.is_some() || self.cls[i].ops > 0 || gate_owes) && !self.cls[i].fence;
        if fence {
            self.cls[i].fence = true;
            let client = self.handle_of(cx.d, i);
            cx.out.push(Output::Fence { client });
        }
        if newly && tell && !fence {
            self.tell(cx, i, Event::Revoked);
        }
    }

    /// Whether the device waits on nothing of this client (its gate shut too).
    fn settled(c: &Cl) -> bool {
        c.cb.is_none() && !c.fence && !c.owes_ops()
    }

    /// The fast-path rule: a gate is open exactly while the device runs (D0, nothing to
    /// drain) and the client is live, unfenced, and holds the current epoch's interface.
    fn wants_open(&self, c: &Cl) -> bool {
        self.fast && self.st == St::Running && c.reg == Reg::Live && c.fresh && !c.fence
    }

    /// At the end of every input: tell the owner which gates to open and close.
    fn settle_gates(&mut self, cx: &mut Cx<'_>) {
        for i in 0..self.cls.len() {
            let wanted = self.wants_open(&self.cls[i]);
            let gate = match (self.cls[i].gate, wanted) {
                (Gate::Shut, true) => FastPathGate::Open {
                    epoch: Epoch(self.epoch),
                },
                (Gate::Open, false) => FastPathGate::Close,
                _ => continue,
            };
            self.cls[i].gate = match gate {
                FastPathGate::Close => Gate::Closing(cx.now),
                FastPathGate::Open { .. } => Gate::Open,
            };
            let client = self.handle_of(cx.d, i);
            cx.out.push(Output::FastPath { client, gate });
        }
    }

    fn reset_is_needed(&mut self) {
        if let St::Quiescing { reset_needed, .. } = &mut self.st {
            *reset_needed = true;
        }
    }

    /// Whether any hardware operation is in flight (a fenced one until `FenceDone`).
    fn ops_out(&self) -> bool {
        self.cls.iter().any(Cl::owes_ops)
    }

    /// Something in flight finished or was fenced: a stop, reset or removal may go on.
    fn progress(&mut self, cx: &mut Cx<'_>) {
        match self.st {
            St::PoweringDown { .. } => self.maybe_power_down(cx),
            St::Stopping { .. } => self.maybe_finish_stop(cx),
            St::Quiescing { .. } => self.maybe_execute(cx),
            St::Removing { .. } => self.maybe_finish_removal(cx),
            _ => {}
        }
    }

    /// The stop shuts down and releases the hardware once no operation is in flight.
    fn maybe_finish_stop(&mut self, cx: &mut Cx<'_>) {
        let St::Stopping { token, fatal, .. } = self.st else {
            return;
        };
        if self.ops_out() {
            return;
        }
        if fatal {
            cx.cycle(CycleOutcome::FoldedIntoStop);
        }
        self.st = St::Stopped;
        cx.hw(HardwareCommand::Shutdown);
        cx.hw(HardwareCommand::ReleaseResources);
        cx.done(token, Status::Success);
        if cx.unloading {
            self.begin_removal(cx, None, Undo::None, None, false);
        }
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
                self.st = St::Starting(token, false);
                cx.hw(HardwareCommand::Start);
                ok
            }
            Input::StartDone { result, .. } => self.start_done(cx, result).map(|_| Reply::Accepted),
            Input::QueryStop { token, .. } => {
                let low = match self.st {
                    St::Running => None,
                    St::LowPower { reset: false, kind } => Some(kind),
                    _ => return Err(Error::Vetoed(VetoReason::ResetInProgress)),
                };
                if self
                    .cls
                    .iter()
                    .any(|c| c.reg == Reg::Live && c.cannot_pause)
                {
                    return Err(Error::Vetoed(VetoReason::ClientCannotPause));
                }
                self.st = St::StopPending(false, low);
                cx.done(token, Status::Success);
                ok
            }
            Input::CancelStop { token, .. } => {
                let St::StopPending(fatal, low) = self.st else {
                    return self.cancel_in_transition(cx, token, InputKind::CancelStop);
                };
                if let Some(kind) = low {
                    self.st = St::LowPower { kind, reset: false };
                    cx.done(token, Status::Success);
                    if fatal {
                        self.serve_deferred(cx);
                    }
                    return ok;
                }
                self.st = St::Running;
                cx.done(token, Status::Success);
                if fatal {
                    self.serve_deferred(cx);
                }
                ok
            }
            Input::Stop { token, .. } => {
                let St::StopPending(fatal, low) = self.st else {
                    // Held by a power transition for a pending query stop.
                    return match &mut self.st {
                        St::PoweringDown {
                            back: Some(Ret::Stop(held)),
                            ..
                        }
                        | St::PoweringUp {
                            back: Some(Ret::Stop(held)),
                            ..
                        } => {
                            if held.is_some() {
                                return Err(Error::RequestPending);
                            }
                            *held = Some(token);
                            ok
                        }
                        // Refused as where the transition ends.
                        St::PoweringDown { back, .. } | St::PoweringUp { back, .. } => {
                            let phase = match (*back, self.st.kind()) {
                                (Some(r), _) => r.kind(),
                                (None, PhaseKind::PoweringDown) => PhaseKind::LowPower,
                                (None, _) => PhaseKind::Running,
                            };
                            Err(Error::InvalidState {
                                phase,
                                input: InputKind::Stop,
                            })
                        }
                        _ => Err(Error::InvalidState {
                            phase: self.st.kind(),
                            input: InputKind::Stop,
                        }),
                    };
                };
                self.tell_live(cx, Event::DeviceStopped);
                if low.is_some() {
                    if fatal {
                        cx.cycle(CycleOutcome::FoldedIntoStop);
                    }
                    // Stopped from Dx: nothing in flight, no register touched.
                    self.st = St::Stopped;
                    cx.hw(HardwareCommand::ReleaseResources);
                    cx.done(token, Status::Success);
                    if cx.unloading {
                        self.begin_removal(cx, None, Undo::None, None, false);
                    }
                    return ok;
                }
                // The stop waits for hardware operations in flight (I12).
                self.st = St::Stopping {
                    token,
                    since: cx.now,
                    fatal,
                };
                self.maybe_finish_stop(cx);
                ok
            }
            Input::QueryRemove { token, .. } => {
                let back = match self.st {
                    St::Added => Back::Added,
                    St::Running => Back::Running,
                    St::Stopped => Back::Stopped,
                    St::Failed(h) => Back::Failed(h),
                    St::LowPower { kind, reset: false } => Back::LowPower(kind),
                    _ => return Err(Error::Vetoed(VetoReason::ResetInProgress)),
                };
                if self.cls.iter().any(|c| c.reg == Reg::Live && c.holding) {
                    return Err(Error::Vetoed(VetoReason::ClientHoldsDevice));
                }
                self.st = St::RemovePending(back, false);
                cx.done(token, Status::Success);
                ok
            }
            Input::CancelRemove { token, .. } => {
                let St::RemovePending(back, fatal) = self.st else {
                    return self.cancel_in_transition(cx, token, InputKind::CancelRemove);
                };
                self.st = match back {
                    Back::Added => St::Added,
                    Back::Running => St::Running,
                    Back::Stopped => St::Stopped,
                    Back::Failed(h) => St::Failed(h),
                    Back::LowPower(kind) => St::LowPower { kind, reset: false },
                };
                cx.done(token, Status::Success);
                if fatal {
                    self.serve_deferred(cx);
                }
                ok
            }
            Input::Remove { token, .. } => self.remove(cx, Some(token)).map(|_| Reply::Accepted),
            Input::SurpriseRemoval { .. } => self.surprise(cx).map(|_| Reply::Accepted),
            Input::FatalError { .. } => self.fatal(cx).map(Reply::Fatal),
            Input::ResetDone { result, .. } => self.reset_done(cx, result).map(|_| Reply::Accepted),
            Input::LinkChanged { port, state, .. } => {
                let pi = usize::from(port.0);
                let Some(Some((_, link))) = self.ports.get_mut(pi) else {
                    return Err(Error::NoSuchPort);
                };
                if *link != state {
                    *link = state;
                    // After DeviceFatal only Removed or Revoked follow.
                    // Clients of a failed device were told DeviceFatal: nothing but
                    // Removed or Revoked follows, also while remove is pending from it.
                    if matches!(
                        self.st,
                        St::Failed(_) | St::RemovePending(Back::Failed(_), _)
                    ) {
                        return ok;
                    }
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
                    St::Quiescing { .. } | St::Executing(_) => Role::Joined,
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
                c.cannot_pause = false;
                c.ports = PortSet::EMPTY;
                c.cb = None;
                c.ops = 0;
                c.fence = false;
                c.mbox = Mbox::default();
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
                let settled = Dev::settled(c);
                // A voter that leaves without saying it can recover makes the reset run.
                if c.reg == Reg::Live && c.role == Role::Voting {
                    self.reset_is_needed();
                }
                self.cls[i].mbox = Mbox::default();
                if settled {
                    self.release_slot(cx, i);
                } else {
                    self.cls[i].reg = Reg::Leaving;
                }
                self.progress(cx);
                Ok(Reply::Unregistered(Unregistered::Now))
            }
            Input::CallbackDone { client } => {
                let i = current_index(self, client)?;
                if self.cls[i].fence {
                    return ok; // only the fence ends the wait
                }
                if self.cls[i].cb.is_none() {
                    return Err(Error::NoCallbackInFlight);
                }
                self.cls[i].cb = None;
                if self.cls[i].reg == Reg::Leaving {
                    if Dev::settled(&self.cls[i]) {
                        self.release_slot(cx, i);
                    }
                } else {
                    self.deliver_next(cx, i);
                }
                self.progress(cx);
                ok
            }
            Input::CallbackDoneWith { client, answer } => {
                // DESIGN "Cost": the return and the client's answer as one input, taken
                // whole or refused whole (the step runs on a copy: a refused answer undoes
                // the return). The answer meets its own table cell, comes from a live
                // client, and a RESET answer needs its RESET delivered before the return.
                let phase = self.st.kind();
                let kind = answer.kind();
                if TABLE[phase as usize].inputs[kind as usize] != Disposition::Handle {
                    return Err(Error::InvalidState { phase, input: kind });
                }
                let i = live_index(self, client)?;
                if self.cls[i].cb.is_none() {
                    return Err(Error::NoCallbackInFlight);
                }
                let reset_answer = matches!(
                    answer,
                    CallbackAnswer::ResetExecute | CallbackAnswer::CanRecover
                );
                if reset_answer
                    && self.cls[i].role == Role::Voting
                    && self.cls[i].mbox.ordered.contains(&Event::Reset)
                {
                    return Err(Error::ResetNotDelivered);
                }
                self.input(cx, Input::CallbackDone { client })?;
                self.input(cx, answer.input(client))
            }
            Input::FastPathClosed { client, in_flight } => {
                let i = current_index(self, client)?;
                if !matches!(self.cls[i].gate, Gate::Closing(_)) {
                    return Err(Error::FastPathNotClosing);
                }
                self.cls[i].gate = Gate::Shut;
                self.cls[i].ops = self.cls[i].ops.saturating_add(in_flight);
                if in_flight > 0 {
                    // The drain under way waits for operations from this answer.
                    let now = cx.now;
                    let later = now.checked_add(cx.config.operation_timeout);
                    match &mut self.st {
                        St::Stopping { since, .. }
                        | St::PoweringDown {
                            since,
                            commanded: false,
                            ..
                        } => *since = now,
                        St::Quiescing {
                            draining: Some(from),
                            ..
                        } => *from = now,
                        // Beyond the clock's range (`None`) stays beyond it.
                        St::Removing { deadline, .. } => {
                            *deadline = match (*deadline, later) {
                                (Some(at), Some(floor)) => Some(at.max(floor)),
                                _ => None,
                            }
                        }
                        _ => {}
                    }
                }
                let c = &self.cls[i];
                if c.reg == Reg::Revoked && c.ops > 0 && !c.fence {
                    self.revoke(cx, i, false);
                }
                if self.cls[i].reg == Reg::Leaving && Dev::settled(&self.cls[i]) {
                    self.release_slot(cx, i);
                }
                self.progress(cx);
                ok
            }
            Input::FenceDone { client } => {
                let i = current_index(self, client)?;
                if !self.cls[i].fence {
                    return Err(Error::NoFenceRequested);
                }
                self.cls[i].fence = false;
                self.cls[i].cb = None;
                self.cls[i].ops = 0;
                self.cls[i].gate = Gate::Shut; // the fence covers the fast path
                if self.cls[i].reg == Reg::Leaving {
                    self.release_slot(cx, i);
                }
                self.progress(cx);
                ok
            }
            Input::AccessDone { client } => {
                let i = current_index(self, client)?;
                if self.cls[i].fence {
                    return ok; // only the fence ends the wait
                }
                if self.cls[i].ops == 0 {
                    return Err(Error::NoOperationInFlight);
                }
                self.cls[i].ops -= 1;
                if self.cls[i].reg == Reg::Leaving && Dev::settled(&self.cls[i]) {
                    self.release_slot(cx, i);
                }
                self.progress(cx);
                ok
            }
            Input::CanRecover { client } => self.answer(cx, client, false).map(|_| Reply::Accepted),
            Input::CannotPause { client } => {
                let i = live_index(self, client)?;
                if self.cls[i].cannot_pause {
                    return Err(Error::AlreadyCannotPause);
                }
                self.cls[i].cannot_pause = true;
                ok
            }
            Input::CanPause { client } => {
                let i = live_index(self, client)?;
                if !self.cls[i].cannot_pause {
                    return Err(Error::NotCannotPause);
                }
                self.cls[i].cannot_pause = false;
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
                self.answer(cx, client, true).map(|_| Reply::Accepted)
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
                if matches!(self.st, St::Quiescing { .. }) && c.role != Role::Voting {
                    return Err(Error::ResetInProgress);
                }
                match self.st {
                    // An idle Dx comes back for the access; system sleep refuses it.
                    St::LowPower {
                        kind: PowerDownKind::Idle,
                        reset,
                    } => {
                        self.begin_power_up(cx, None, reset, None);
                        return Ok(Reply::AccessWaitsForPowerUp);
                    }
                    St::PoweringUp { .. } => return Ok(Reply::AccessWaitsForPowerUp),
                    St::PoweringDown {
                        kind: PowerDownKind::Idle,
                        ref mut wake,
                        ..
                    } => {
                        *wake = true;
                        return Ok(Reply::AccessWaitsForPowerUp);
                    }
                    St::LowPower { kind, .. } | St::PoweringDown { kind, .. } => {
                        return Err(Error::Suspended { kind })
                    }
                    _ => {}
                }
                match what {
                    Access::QueryCounters(p) => {
                        if !matches!(self.ports.get(usize::from(p.0)), Some(Some(_))) {
                            return Err(Error::NoSuchPort);
                        }
                    }
                    // A granted hardware operation is in flight until AccessDone.
                    Access::HardwareOp => {
                        if c.ops >= OPS_PER_CLIENT {
                            return Err(Error::TooManyOperations);
                        }
                        self.cls[i].ops += 1;
                    }
                }
                Ok(Reply::AccessGranted)
            }
            Input::PowerDown { kind, token, .. } => match (self.st, kind) {
                (St::Running, _) => {
                    self.begin_power_down(cx, kind, token, None, false);
                    ok
                }
                // A query pending in D0: down, then back to the query.
                (St::StopPending(fatal, None), _) => {
                    self.begin_power_down(cx, kind, token, Some(Ret::Stop(None)), fatal);
                    ok
                }
                (St::RemovePending(Back::Running, fatal), _) => {
                    self.begin_power_down(cx, kind, token, Some(Ret::Remove), fatal);
                    ok
                }
                (St::StopPending(fatal, Some(was)), _) => {
                    let both_idle = was == PowerDownKind::Idle && kind == PowerDownKind::Idle;
                    let kind = if both_idle {
                        PowerDownKind::Idle
                    } else {
                        PowerDownKind::SystemSleep
                    };
                    self.st = St::StopPending(fatal, Some(kind));
                    cx.done(token, Status::Success);
                    ok
                }
                (St::RemovePending(Back::LowPower(was), fatal), _) => {
                    let both_idle = was == PowerDownKind::Idle && kind == PowerDownKind::Idle;
                    let kind = if both_idle {
                        PowerDownKind::Idle
                    } else {
                        PowerDownKind::SystemSleep
                    };
                    self.st = St::RemovePending(Back::LowPower(kind), fatal);
                    cx.done(token, Status::Success);
                    ok
                }
                // As in added or stopped: nothing to power down; as in failed: refused.
                (St::RemovePending(Back::Added | Back::Stopped, _), _) => {
                    cx.done(token, Status::Success);
                    ok
                }
                (St::RemovePending(Back::Failed(_), _), _) => Err(Error::InvalidState {
                    phase: PhaseKind::Failed,
                    input: InputKind::PowerDown,
                }),
                (St::Quiescing { .. } | St::Executing(_), PowerDownKind::Idle) => {
                    Err(Error::Vetoed(VetoReason::ResetInProgress))
                }
                (St::Executing(Next::Remove(_)), _) => Err(Error::RemoveInProgress),
                (St::Quiescing { .. } | St::Executing(_), _) => {
                    if self.sleep.is_some() {
                        return Err(Error::RequestPending);
                    }
                    self.sleep = Some(token);
                    ok
                }
                (St::LowPower { kind: was, reset }, _) => {
                    let kind = if was == PowerDownKind::Idle && kind == PowerDownKind::Idle {
                        PowerDownKind::Idle
                    } else {
                        PowerDownKind::SystemSleep
                    };
                    self.st = St::LowPower { kind, reset };
                    cx.done(token, Status::Success);
                    ok
                }
                _ => Err(Error::InvalidState {
                    phase: self.st.kind(),
                    input: InputKind::PowerDown,
                }),
            },
            Input::PowerDownDone { .. } => match self.st {
                St::PoweringDown {
                    kind,
                    token,
                    commanded: true,
                    reset,
                    wake,
                    back,
                    ..
                } => {
                    if let Some(r) = back {
                        self.st = r.st(Some(kind), reset);
                        cx.done(token, Status::Success);
                        self.serve_held_stop(cx, r);
                        return ok;
                    }
                    self.st = St::LowPower { kind, reset };
                    cx.done(token, Status::Success);
                    if (reset || wake) && kind == PowerDownKind::Idle {
                        self.begin_power_up(cx, None, reset, None);
                    }
                    ok
                }
                _ => self
                    .power_done_late(cx, Hw::PowerDown, false)
                    .map(|_| Reply::Accepted),
            },
            Input::PowerUp { token, .. } => match self.st {
                St::LowPower { reset, .. } => {
                    self.begin_power_up(cx, Some(token), reset, None);
                    ok
                }
                // A query pending in Dx: up, then back to the query.
                St::StopPending(fatal, Some(_)) => {
                    self.begin_power_up(cx, Some(token), fatal, Some(Ret::Stop(None)));
                    ok
                }
                St::RemovePending(Back::LowPower(_), fatal) => {
                    self.begin_power_up(cx, Some(token), fatal, Some(Ret::Remove));
                    ok
                }
                // Already in D0 or stopped: as there, nothing to do.
                St::StopPending(_, None) | St::RemovePending(Back::Running | Back::Stopped, _) => {
                    cx.done(token, Status::Success);
                    ok
                }
                // Added or failed: refused as there.
                St::RemovePending(Back::Added, _) => Err(Error::InvalidState {
                    phase: PhaseKind::Added,
                    input: InputKind::PowerUp,
                }),
                St::RemovePending(Back::Failed(_), _) => Err(Error::InvalidState {
                    phase: PhaseKind::Failed,
                    input: InputKind::PowerUp,
                }),
                St::PoweringUp {
                    token: None,
                    reset,
                    back,
                } => {
                    self.st = St::PoweringUp {
                        token: Some(token),
                        reset,
                        back,
                    };
                    ok
                }
                St::PoweringUp { .. } => Err(Error::RequestPending),
                _ => Err(Error::InvalidState {
                    phase: self.st.kind(),
                    input: InputKind::PowerUp,
                }),
            },
            Input::PowerUpDone { result, .. } => {
                self.power_up_done(cx, result).map(|_| Reply::Accepted)
            }
            Input::ResetNack { client } => self.nack(cx, client).map(|_| Reply::Accepted),
            // Membership is the driver's (`Model::step`), never here.
            Input::JoinResetGroup { .. } | Input::LeaveResetGroup { .. } => Err(Error::NoSuchGroup),
            Input::Timeout | Input::Unload => Err(Error::NoSuchDevice),
        }
    }

    /// Power: clients told Suspending, then the power-down once nothing is in flight.
    fn begin_power_down(
        &mut self,
        cx: &mut Cx<'_>,
        kind: PowerDownKind,
        token: RequestToken,
        back: Option<Ret>,
        reset: bool,
    ) {
        self.tell_live(cx, Event::Suspending { kind });
        self.st = St::PoweringDown {
            kind,
            token,
            since: cx.now,
            commanded: false,
            reset,
            wake: false,
            back,
        };
        self.maybe_power_down(cx);
    }

    fn maybe_power_down(&mut self, cx: &mut Cx<'_>) {
        if let St::PoweringDown {
            commanded: commanded @ false,
            ..
        } = &mut self.st
        {
            if self.cls.iter().any(Cl::owes_ops) {
                return;
            }
            *commanded = true;
            cx.hw(HardwareCommand::PowerDown);
        }
    }

    fn begin_power_up(
        &mut self,
        cx: &mut Cx<'_>,
        token: Option<RequestToken>,
        reset: bool,
        back: Option<Ret>,
    ) {
        self.st = St::PoweringUp { token, reset, back };
        cx.hw(HardwareCommand::PowerUp);
    }

    /// A Stop held by the transition: served now that the query stop is back.
    fn serve_held_stop(&mut self, cx: &mut Cx<'_>, r: Ret) {
        if let Some(t) = r.held_stop() {
            let _ = self.input(
                cx,
                Input::Stop {
                    device: cx.d,
                    token: t,
                },
            );
        }
    }

    /// A cancel during a power transition: the transition stops returning to the query it
    /// cancels; with nothing to cancel, success and nothing else.
    fn cancel_in_transition(
        &mut self,
        cx: &mut Cx<'_>,
        token: RequestToken,
        input: InputKind,
    ) -> Result<Reply, Error> {
        match &mut self.st {
            St::PoweringDown { back, .. } | St::PoweringUp { back, .. } => {
                if (input == InputKind::CancelStop && *back == Some(Ret::Stop(None)))
                    || (input == InputKind::CancelRemove && *back == Some(Ret::Remove))
                {
                    *back = None;
                }
                cx.done(token, Status::Success);
                Ok(Reply::Accepted)
            }
            _ => Err(Error::InvalidState {
                phase: self.st.kind(),
                input,
            }),
        }
    }

    /// A reset (or fatal error) in a power transition or in Dx waits for the power-up.
    fn reset_after_power_up(&mut self, cx: &mut Cx<'_>) {
        match &mut self.st {
            St::PoweringDown { reset, .. } | St::PoweringUp { reset, .. } => *reset = true,
            St::LowPower {
                kind: PowerDownKind::Idle,
                ..
            } => self.begin_power_up(cx, None, true, None),
            St::LowPower { reset, .. } => *reset = true,
            _ => {}
        }
    }

    fn power_up_done(&mut self, cx: &mut Cx<'_>, result: PowerUpResult) -> Result<(), Error> {
        let St::PoweringUp { token, reset, back } = self.st else {
            return self.power_done_late(cx, Hw::PowerUp, result == PowerUpResult::Failed);
        };
        let done = |cx: &mut Cx<'_>, status| {
            if let Some(t) = token {
                cx.done(t, status);
            }
        };
        if let Some(r) = back {
            return self.power_up_done_query(cx, result, token, reset, r);
        }
        match result {
            PowerUpResult::Powered => {
                self.st = St::Running;
                done(cx, Status::Success);
                let epoch = Epoch(self.epoch);
                self.tell_live(
                    cx,
                    Event::Resumed {
                        epoch,
                        state_lost: false,
                    },
                );
                if reset {
                    self.serve_deferred(cx);
                }
            }
            PowerUpResult::LostState if self.epoch < u32::MAX => {
                self.epoch += 1;
                for c in self.cls.iter_mut().filter(|c| c.reg == Reg::Live) {
                    c.role = Role::Idle;
                    c.fresh = false;
                }
                self.st = St::Running;
                done(cx, Status::Success);
                let epoch = Epoch(self.epoch);
                self.tell_live(
                    cx,
                    Event::Resumed {
                        epoch,
                        state_lost: true,
                    },
                );
                if reset {
                    cx.cycle(CycleOutcome::Completed(epoch));
                }
            }
            PowerUpResult::LostState => {
                done(cx, Status::HardwareFailed);
                self.fail_exhausted(cx);
                if reset {
                    cx.cycle(CycleOutcome::HardwareFailed);
                }
            }
            PowerUpResult::Failed => {
                done(cx, Status::HardwareFailed);
                if reset {
                    cx.cycle(CycleOutcome::AbortedBySurpriseRemoval);
                }
                // The hardware vanished: as a surprise removal in Dx.
                if cx.unloading {
                    self.begin_removal(cx, None, Undo::Release, None, true);
                } else {
                    for i in 0..self.cls.len() {
                        if self.cls[i].reg == Reg::Live {
                            self.cls[i].reg = Reg::Removed;
                            self.tell(cx, i, Event::Removed { surprise: true });
                        }
                    }
                    self.st = St::Surprised {
                        held: true,
                        hw: None,
                    };
                }
            }
        }
        Ok(())
    }

    /// The power-up asked while a query was pending reports: back to the query (a lost
    /// state serves the held fatal error), the held stop served; a failed power-up or an
    /// exhausted epoch ends the held stop and fatal error with the device.
    fn power_up_done_query(
        &mut self,
        cx: &mut Cx<'_>,
        result: PowerUpResult,
        token: Option<RequestToken>,
        reset: bool,
        r: Ret,
    ) -> Result<(), Error> {
        let lost = result == PowerUpResult::LostState;
        let ok = result == PowerUpResult::Powered || (lost && self.epoch < u32::MAX);
        if !ok {
            let vanished = result == PowerUpResult::Failed;
            if let Some(t) = token {
                cx.done(t, Status::HardwareFailed);
            }
            if let Some(t) = r.held_stop() {
                let status = if vanished {
                    Status::DeviceGone
                } else {
                    Status::HardwareFailed
                };
                cx.done(t, status);
            }
            if reset {
                cx.cycle(if vanished {
                    CycleOutcome::AbortedBySurpriseRemoval
                } else {
                    CycleOutcome::HardwareFailed
                });
            }
            // Continue as a plain power-up that failed, nothing left to answer.
            self.st = St::PoweringUp {
                token: None,
                reset: false,
                back: None,
            };
            return self.power_up_done(cx, result);
        }
        if lost {
            self.epoch += 1;
            for c in self.cls.iter_mut().filter(|c| c.reg == Reg::Live) {
                c.role = Role::Idle;
                c.fresh = false;
            }
        }
        self.st = r.st(None, reset && !lost);
        if let Some(t) = token {
            cx.done(t, Status::Success);
        }
        let epoch = Epoch(self.epoch);
        self.tell_live(
            cx,
            Event::Resumed {
                epoch,
                state_lost: lost,
            },
        );
        if reset && lost {
            cx.cycle(CycleOutcome::Completed(epoch));
        }
        self.serve_held_stop(cx, r);
        Ok(())
    }

    /// A power command reports after surprise removal or once removal began.
    fn power_done_late(&mut self, cx: &mut Cx<'_>, op: Hw, failed: bool) -> Result<(), Error> {
        match self.st {
            St::Surprised { held, hw: Some(h) } if h == op => {
                self.st = St::Surprised { held, hw: None };
                Ok(())
            }
            St::Removing {
                token,
                deadline,
                undo,
                hw: Some(h),
            } if h == op => {
                self.st = St::Removing {
                    token,
                    deadline,
                    undo: if failed { undo.no_registers() } else { undo },
                    hw: None,
                };
                self.maybe_finish_removal(cx);
                Ok(())
            }
            _ => Err(Error::NoHardwareCommandInFlight),
        }
    }

    /// After every input: a system sleep asked for during a reset cycle begins once the
    /// cycle left the device running, or completes if it ended anywhere else.
    fn after(&mut self, cx: &mut Cx<'_>) {
        self.sleep_after(cx);
        self.settle_gates(cx);
        if self.st == St::Absent {
            // A device removed leaves its reset group, and any part it had in a cycle.
            self.group = None;
            self.part = Part::default();
        }
    }

    fn sleep_after(&mut self, cx: &mut Cx<'_>) {
        let Some(token) = self.sleep else { return };
        match self.st {
            St::Quiescing { .. } | St::Executing(_) => {}
            St::Running => {
                self.sleep = None;
                self.begin_power_down(cx, PowerDownKind::SystemSleep, token, None, false);
            }
            St::Failed(_) => {
                self.sleep = None;
                cx.done(token, Status::HardwareFailed);
            }
            _ => {
                self.sleep = None;
                cx.done(token, Status::DeviceGone);
            }
        }
    }

    /// A member wants a cycle its group does not run: it began one, or an idle power-up
    /// will begin one (a reset asked in system sleep waits for the owner's power-up).
    fn wants_group_cycle(&self) -> bool {
        // A fatal error a pending query deferred waits for the query's end.
        let for_query = matches!(
            self.st,
            St::PoweringDown { back: Some(_), .. } | St::PoweringUp { back: Some(_), .. }
        );
        !self.part.on
            && !for_query
            && match self.st {
                St::Quiescing { .. } | St::PoweringUp { reset: true, .. } => true,
                St::PoweringDown {
                    kind: PowerDownKind::Idle,
                    reset,
                    ..
                }
                | St::LowPower {
                    kind: PowerDownKind::Idle,
                    reset,
                } => reset,
                _ => false,
            }
    }

    /// Why this member cannot take part in a group cycle beginning now, if it cannot. A
    /// vanished member neither takes part nor blocks.
    fn group_blocker(&self) -> Option<CannotResetReason> {
        match self.st {
            // A power transition for a pending query: the member is that query's state.
            St::PoweringDown { back: Some(r), .. } | St::PoweringUp { back: Some(r), .. } => {
                Some(CannotResetReason::MemberState(r.kind()))
            }
            St::Absent
            | St::Surprised { .. }
            | St::Removing { .. }
            | St::Running
            | St::Quiescing { .. }
            | St::PoweringUp { .. } => None,
            St::PoweringDown { kind, .. } | St::LowPower { kind, .. } => {
                (kind == PowerDownKind::SystemSleep).then_some(CannotResetReason::SystemSleep)
            }
            st => Some(CannotResetReason::MemberState(st.kind())),
        }
    }

    fn takes_part(&self) -> bool {
        self.group_blocker().is_none()
            && !matches!(
                self.st,
                St::Absent | St::Surprised { .. } | St::Removing { .. }
            )
    }

    fn power_reset_waits(&self) -> bool {
        matches!(
            self.st,
            St::PoweringDown { reset: true, .. }
                | St::LowPower { reset: true, .. }
                | St::PoweringUp { reset: true, .. }
        )
    }

    /// The group's cycle begins: a running member begins its cycle (RESET to its voters);
    /// one in an idle power-down powers up first.
    fn join_group(&mut self, cx: &mut Cx<'_>) {
        if !self.takes_part() {
            return;
        }
        let ready = match self.st {
            St::Quiescing { .. } => self.part.ready,
            _ => None,
        };
        self.part = Part {
            on: true,
            ready,
            ..Part::default()
        };
        let begun = matches!(self.st, St::Quiescing { .. })
            || self.power_reset_waits()
            || self.reset_request(cx).is_ok();
        if !begun {
            self.part = Part::default();
        }
    }

    fn in_group_cycle(&self) -> bool {
        self.part.on && (matches!(self.st, St::Quiescing { .. }) || self.power_reset_waits())
    }

    fn group_ready(&self) -> Option<bool> {
        match self.st {
            St::Quiescing { .. } if self.part.on => self.part.ready,
            _ => None,
        }
    }

    /// The member's part ends with no reset: answered `outcome`, clients told `Recovered`.
    fn end_group_part(&mut self, cx: &mut Cx<'_>, outcome: CycleOutcome) {
        match &mut self.st {
            St::Quiescing { .. } => {
                self.end_without_reset(cx, outcome);
                self.sleep_after(cx);
            }
            St::PoweringDown { reset, .. }
            | St::LowPower { reset, .. }
            | St::PoweringUp { reset, .. }
                if *reset =>
            {
                *reset = false;
                cx.cycle(outcome);
            }
            _ => {}
        }
        self.part = Part::default();
    }

    /// A voter refuses RESET: alone, the cycle ends with no reset, the clients told
    /// `Recovered`, the requesters `CannotReset` naming the client.
    fn nack(&mut self, cx: &mut Cx<'_>, client: ClientHandle) -> Result<(), Error> {
        let i = live_index(self, client)?;
        if self.cls[i].role != Role::Voting {
            return Err(Error::NotVoting);
        }
        if self.cls[i].mbox.ordered.contains(&Event::Reset) {
            return Err(Error::ResetNotDelivered);
        }
        if self.part.on {
            // The group ends its cycle for every member.
            self.part.refused.get_or_insert(client);
            return Ok(());
        }
        let outcome = CycleOutcome::CannotReset {
            member: cx.d,
            reason: CannotResetReason::ClientRefused(client),
        };
        self.end_without_reset(cx, outcome);
        Ok(())
    }

    /// End the quiescing cycle with no reset: same epoch, every live client told
    /// `Recovered`, the cycle answered `outcome`.
    fn end_without_reset(&mut self, cx: &mut Cx<'_>, outcome: CycleOutcome) {
        if !matches!(self.st, St::Quiescing { .. }) {
            return;
        }
        self.part = Part::default();
        self.all_roles(Role::Idle);
        self.st = St::Running;
        let epoch = Epoch(self.epoch);
        self.tell_live(cx, Event::Recovered { epoch });
        cx.cycle(outcome);
    }

    /// A voter answers RESET: `needs_reset` for ResetExecute, not for CanRecover.
    fn answer(
        &mut self,
        cx: &mut Cx<'_>,
        client: ClientHandle,
        needs_reset: bool,
    ) -> Result<(), Error> {
        let i = live_index(self, client)?;
        if self.cls[i].role != Role::Voting {
            return Err(Error::NotVoting);
        }
        if self.cls[i].mbox.ordered.contains(&Event::Reset) {
            return Err(Error::ResetNotDelivered);
        }
        self.cls[i].role = Role::Acked;
        if let St::Quiescing { reset_needed, .. } = &mut self.st {
            *reset_needed |= needs_reset;
        }
        self.maybe_execute(cx);
        Ok(())
    }

    fn start_done(&mut self, cx: &mut Cx<'_>, result: StartResult) -> Result<(), Error> {
        let held = result != StartResult::FailedBeforeResources;
        match self.st {
            St::Starting(token, fatal) => {
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
                    if fatal {
                        cx.cycle(CycleOutcome::AbortedByRemove);
                    }
                    self.begin_removal(cx, None, undo, None, false);
                } else if ok {
                    self.st = St::Running;
                    let epoch = Epoch(self.epoch);
                    self.tell_live(cx, Event::DeviceStarted { epoch });
                    if fatal {
                        self.serve_deferred(cx);
                    }
                } else {
                    self.st = St::Failed(held);
                    cx.failed(FailureCause::StartFailed);
                    self.tell_live(cx, Event::DeviceFatal);
                    if fatal {
                        cx.cycle(CycleOutcome::HardwareFailed);
                    }
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
            St::StopPending(_, Some(_)) | St::RemovePending(Back::LowPower(_), _) => Undo::Release,
            St::Running | St::StopPending(..) | St::Quiescing { .. } => Undo::ShutdownRelease,
            St::RemovePending(Back::Added, _) | St::RemovePending(Back::Stopped, _) => Undo::None,
            St::RemovePending(Back::Running, _) => Undo::ShutdownRelease,
            St::RemovePending(Back::Failed(h), _) | St::Failed(h) => Undo::held(h),
            _ => Undo::None,
        }
    }

    fn remove(&mut self, cx: &mut Cx<'_>, token: Option<RequestToken>) -> Result<(), Error> {
        match self.st {
            St::Absent => Err(Error::InvalidState {
                phase: PhaseKind::Absent,
                input: InputKind::Remove,
            }),
            St::Starting(..) => match token {
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
            // Only unload gets here: the stop removes once it finished.
            St::Stopping { .. } => Ok(()),
            // Remove during a power transition or in Dx: its request is answered, a reset
            // waiting for the power-up is aborted; from Dx nothing is powered up.
            St::PoweringDown {
                token: t,
                commanded,
                reset,
                back,
                ..
            } => {
                cx.done(t, Status::DeviceGone);
                if let Some(held) = back.and_then(Ret::held_stop) {
                    cx.done(held, Status::DeviceGone);
                }
                if reset {
                    cx.cycle(CycleOutcome::AbortedByRemove);
                }
                if commanded {
                    self.begin_removal(cx, token, Undo::Release, Some(Hw::PowerDown), false);
                } else {
                    self.begin_removal(cx, token, Undo::ShutdownRelease, None, false);
                }
                Ok(())
            }
            St::LowPower { reset, .. } => {
                if reset {
                    cx.cycle(CycleOutcome::AbortedByRemove);
                }
                self.begin_removal(cx, token, Undo::Release, None, false);
                Ok(())
            }
            St::PoweringUp {
                token: t,
                reset,
                back,
            } => {
                if let Some(t) = t {
                    cx.done(t, Status::DeviceGone);
                }
                if let Some(held) = back.and_then(Ret::held_stop) {
                    cx.done(held, Status::DeviceGone);
                }
                if reset {
                    cx.cycle(CycleOutcome::AbortedByRemove);
                }
                self.begin_removal(cx, token, Undo::ShutdownRelease, Some(Hw::PowerUp), false);
                Ok(())
            }
            St::Quiescing { .. } => {
                self.all_roles(Role::Idle);
                cx.cycle(CycleOutcome::AbortedByRemove);
                self.begin_removal(cx, token, Undo::ShutdownRelease, None, false);
                Ok(())
            }
            _ => {
                if let St::StopPending(true, _) | St::RemovePending(_, true) = self.st {
                    cx.cycle(CycleOutcome::AbortedByRemove);
                }
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
            St::Starting(token, fatal) => {
                cx.done(token, Status::DeviceGone);
                if fatal {
                    cx.cycle(CycleOutcome::AbortedBySurpriseRemoval);
                }
                (false, Some(Hw::Start))
            }
            St::Running => (true, None),
            St::StopPending(fatal, _) => {
                if fatal {
                    cx.cycle(CycleOutcome::AbortedBySurpriseRemoval);
                }
                (true, None)
            }
            St::PoweringDown {
                token,
                commanded,
                reset,
                back,
                ..
            } => {
                cx.done(token, Status::DeviceGone);
                if let Some(held) = back.and_then(Ret::held_stop) {
                    cx.done(held, Status::DeviceGone);
                }
                if reset {
                    cx.cycle(CycleOutcome::AbortedBySurpriseRemoval);
                }
                (true, commanded.then_some(Hw::PowerDown))
            }
            St::LowPower { reset, .. } => {
                if reset {
                    cx.cycle(CycleOutcome::AbortedBySurpriseRemoval);
                }
                (true, None)
            }
            St::PoweringUp { token, reset, back } => {
                if let Some(t) = token {
                    cx.done(t, Status::DeviceGone);
                }
                if let Some(held) = back.and_then(Ret::held_stop) {
                    cx.done(held, Status::DeviceGone);
                }
                if reset {
                    cx.cycle(CycleOutcome::AbortedBySurpriseRemoval);
                }
                (true, Some(Hw::PowerUp))
            }
            St::Stopping { token, fatal, .. } => {
                if fatal {
                    cx.cycle(CycleOutcome::AbortedBySurpriseRemoval);
                }
                cx.done(token, Status::DeviceGone);
                (true, None)
            }
            St::Quiescing { .. } => {
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
            St::RemovePending(back, fatal) => {
                if fatal {
                    cx.cycle(CycleOutcome::AbortedBySurpriseRemoval);
                }
                match back {
                    Back::Added | Back::Stopped => (false, None),
                    Back::Running => (true, None),
                    Back::Failed(h) => (h, None),
                    Back::LowPower(_) => (true, None),
                }
            }
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
            deadline: cx.now.checked_add(cx.config.detach_timeout),
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
            .all(|c| Dev::settled(c) && matches!(c.reg, Reg::Free | Reg::Revoked));
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
            St::Quiescing { .. } => Ok(ResetAnswer::Joined),
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
            St::PoweringDown { .. } | St::LowPower { .. } | St::PoweringUp { .. } => {
                if self.epoch == u32::MAX {
                    return Err(Error::EpochExhausted);
                }
                if cx.unloading {
                    return Err(Error::Unloading);
                }
                self.reset_after_power_up(cx);
                Ok(ResetAnswer::AfterPowerUp)
            }
            _ => Err(Error::InvalidState {
                phase: self.st.kind(),
                input: InputKind::ResetRequest,
            }),
        }
    }

    fn begin_cycle(&mut self, cx: &mut Cx<'_>) {
        if let Some((member, reason)) = self.part.blocked {
            // Its group cannot reset: answered now, nobody told RESET.
            cx.cycle(CycleOutcome::CannotReset { member, reason });
            return;
        }
        self.all_roles(Role::Voting);
        self.tell_live(cx, Event::Reset);
        // With no voter nobody can say it recovers: the reset runs.
        let reset_needed = !self.voters();
        self.st = St::Quiescing {
            since: cx.now,
            reset_needed,
            draining: None,
        };
        self.maybe_execute(cx);
    }

    /// Every voter answered, left or was revoked: end without a reset if none needs one;
    /// else reset once no hardware operation is in flight (the wait begins now).
    fn maybe_execute(&mut self, cx: &mut Cx<'_>) {
        let St::Quiescing {
            since,
            reset_needed,
            draining,
        } = self.st
        else {
            return;
        };
        if self.voters() {
            return;
        }
        // A member's cycle ends or resets as its group decides.
        if !reset_needed && self.group.is_none() {
            self.all_roles(Role::Idle);
            self.st = St::Running;
            let epoch = Epoch(self.epoch);
            self.tell_live(cx, Event::Recovered { epoch });
            cx.cycle(CycleOutcome::Recovered(epoch));
            return;
        }
        if self.ops_out() {
            if draining.is_none() {
                self.st = St::Quiescing {
                    since,
                    reset_needed,
                    draining: Some(cx.now),
                };
            }
            return;
        }
        if self.group.is_some() {
            self.part.ready = Some(reset_needed);
            return;
        }
        self.st = St::Executing(Next::Resume);
        cx.hw(HardwareCommand::Reset);
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
            cx.failed(FailureCause::ResetFailed);
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
        let now = cx.now;
        let mut escalate = false;
        let cb_timeout = cx.config.callback_timeout;
        for i in 0..self.cls.len() {
            let c = &self.cls[i];
            let overran = c.reg != Reg::Free
                && !c.fence
                && c.cb
                    .and_then(|since| since.checked_add(cb_timeout))
                    .is_some_and(|at| now >= at);
            if overran {
                escalate |= c.kind == ClientKind::Trusted
                    && c.reg == Reg::Live
                    && cx.config.trusted_policy == TrustedTimeoutPolicy::FailDevice;
                self.revoke(cx, i, true);
            }
        }
        // A close unanswered for the operation timeout: revoked and fenced.
        for i in 0..self.cls.len() {
            let c = &self.cls[i];
            if let (Gate::Closing(since), false) = (c.gate, c.fence) {
                if since
                    .checked_add(cx.config.operation_timeout)
                    .is_some_and(|at| now >= at)
                {
                    self.revoke(cx, i, true);
                }
            }
        }
        match self.st {
            St::Quiescing { draining, .. } => {
                // Operations that outlast the reset's wait are revoked and fenced.
                if draining
                    .and_then(|from| from.checked_add(cx.config.operation_timeout))
                    .is_some_and(|at| now >= at)
                {
                    self.fence_ops(cx);
                }
                for i in 0..self.cls.len() {
                    let c = &self.cls[i];
                    if c.reg != Reg::Live || c.role != Role::Voting {
                        continue;
                    }
                    // Its answer time counts from its RESET's delivery.
                    let due = c
                        .reset_at
                        .and_then(|at| {
                            at.checked_add(match c.kind {
                                ClientKind::Trusted => cx.config.trusted_ack_timeout,
                                ClientKind::Untrusted => cx.config.untrusted_ack_timeout,
                            })
                        })
                        .is_some_and(|at| now >= at);
                    if !due {
                        continue;
                    }
                    if c.kind == ClientKind::Trusted
                        && cx.config.trusted_policy == TrustedTimeoutPolicy::FailDevice
                    {
                        escalate = true;
                    } else {
                        self.revoke(cx, i, true);
                    }
                }
            }
            St::Stopping { since, .. }
            | St::PoweringDown {
                since,
                commanded: false,
                ..
            } if since
                .checked_add(cx.config.operation_timeout)
                .is_some_and(|at| now >= at) =>
            {
                self.fence_ops(cx);
            }
            St::Removing { deadline, .. } if deadline.is_some_and(|at| now >= at) => {
                // Removed was their last event: revoked without another; whatever is
                // still in flight is fenced before the teardown.
                for i in 0..self.cls.len() {
                    let c = &self.cls[i];
                    if c.reg == Reg::Removed || (c.owes_ops() && !c.fence) {
                        self.revoke(cx, i, false);
                    }
                }
            }
            _ => {}
        }
        if escalate && matches!(self.st, St::Running | St::Quiescing { .. }) {
            if matches!(self.st, St::Quiescing { .. }) {
                cx.cycle(CycleOutcome::ClientTimedOut);
            }
            self.all_roles(Role::Idle);
            self.st = St::Failed(true);
            cx.failed(FailureCause::ClientMissedDeadline);
            self.tell_live(cx, Event::DeviceFatal);
        }
        self.progress(cx);
    }

    /// Revoke and fence every client with an operation in flight not fenced yet.
    fn fence_ops(&mut self, cx: &mut Cx<'_>) {
        for i in 0..self.cls.len() {
            if self.cls[i].owes_ops() && !self.cls[i].fence {
                self.revoke(cx, i, true);
            }
        }
    }

    /// A catastrophic error: served, deferred, folded or answered with a reason.
    fn fatal(&mut self, cx: &mut Cx<'_>) -> Result<FatalAnswer, Error> {
        match self.st {
            St::Running | St::Quiescing { .. } => match self.reset_request(cx) {
                Ok(a) => Ok(FatalAnswer::Served(a)),
                Err(_) => {
                    self.fail_exhausted(cx);
                    Ok(FatalAnswer::DeviceFailed)
                }
            },
            St::Executing(Next::Remove(_)) => Ok(FatalAnswer::FoldedIntoRemoval),
            St::Executing(_) if cx.unloading => Ok(FatalAnswer::FoldedIntoRemoval),
            St::Executing(_) => Ok(FatalAnswer::Served(
                self.reset_request(cx).unwrap_or(ResetAnswer::Joined),
            )),
            St::Starting(t, _) => {
                self.st = St::Starting(t, true);
                Ok(FatalAnswer::Deferred)
            }
            St::StopPending(_, None) => {
                self.st = St::StopPending(true, None);
                Ok(FatalAnswer::Deferred)
            }
            // Deferred as the pending query defers it.
            St::PoweringDown {
                back: Some(_),
                ref mut reset,
                ..
            }
            | St::PoweringUp {
                back: Some(_),
                ref mut reset,
                ..
            } => {
                *reset = true;
                Ok(FatalAnswer::Deferred)
            }
            St::PoweringDown { .. } | St::PoweringUp { .. } => {
                self.reset_after_power_up(cx);
                Ok(FatalAnswer::Served(ResetAnswer::AfterPowerUp))
            }
            St::Stopping { token, since, .. } => {
                self.st = St::Stopping {
                    token,
                    since,
                    fatal: true,
                };
                Ok(FatalAnswer::Deferred)
            }
            St::RemovePending(Back::Running, _) => {
                self.st = St::RemovePending(Back::Running, true);
                Ok(FatalAnswer::Deferred)
            }
            St::Absent => Err(Error::InvalidState {
                phase: PhaseKind::Absent,
                input: InputKind::FatalError,
            }),
            other => Ok(FatalAnswer::HardwareNotLive(other.kind())),
        }
    }

    fn serve_deferred(&mut self, cx: &mut Cx<'_>) {
        if self.reset_request(cx).is_err() {
            self.fail_exhausted(cx);
            cx.cycle(CycleOutcome::HardwareFailed);
        }
    }

    fn fail_exhausted(&mut self, cx: &mut Cx<'_>) {
        self.all_roles(Role::Idle);
        self.st = St::Failed(true);
        cx.failed(FailureCause::EpochExhausted);
        self.tell_live(cx, Event::DeviceFatal);
    }
}
