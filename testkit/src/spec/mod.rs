//! A second, independent reference model: `DESIGN.md` (revision 3) read again as *facts*
//! about a device and its clients, and each input answered by the rules of DESIGN that
//! apply to those facts. No phase enum drives a decision: the device's [`PhaseKind`] is
//! *derived* from the facts for comparison (`Dev::phase`), and the per-state `TABLE`
//! (part of the specification) decides only refusals, vetoes and ignored requests.
//!
//! Sources: `DESIGN.md`; the public rustdoc of the core's types (`Input`, `Output`,
//! `Event`, `Error`, `Reply`, `CycleOutcome`, `Config`, `ClientState`, `Role`,
//! `ClientView`), the module doc of the core's mailbox (its coalescing rules), and
//! `pnp_lifecycle::table` (`TABLE` and `TRANSITIONS`). Not the core's handlers (the
//! legacy model that mirrored them is gone: this is the testkit's one reference model).
//!
//! The facts, per device (see `Dev`): whether the hardware is claimed or live, which
//! hardware command is in flight (`hardware_busy`), which query is pending
//! (`query_pending`), whether a stop is draining, whether removal has begun
//! (`removal_begun`, or `removal_owed` while a hardware command or stop ends), the reset
//! cycle as sets of clients (`told_reset` waiting to answer, `answered`, `joined`) and
//! whether the reset is needed (`reset_needed`), a follow-up flag and deferred fatal
//! errors, power (`dx`, `powering_down`, the tokens owed), drains as a deadline, its
//! reset group (`group`; each group's cycle is a `groups::GroupRun`); per
//! client (see `Cl`): its registration standing, its interface epoch, callbacks and
//! operations in flight, its mailbox, its gate, and its deadlines.
//!
//! Covered ([`covers`]): PnP (add, ports, start, query/cancel/stop, query/cancel/remove,
//! surprise removal), clients (register, unregister, callbacks, bind, links, hold, pause,
//! interface, access), the reset cycle (requests, fatal errors, answers, recovery, a
//! voter's nack), removal and unload, every deadline, power (power-down and power-up,
//! idle and system sleep, Dx under a pending query), the fast path's gates (opened while
//! the device runs and the client may touch the hardware, closed before any count is
//! needed, the close's answer counted and deadlined), reset groups (joining and leaving,
//! one cycle for every member, the carrier's one reset, a nack, a member that cannot take
//! part, the group's one deadline, a member removed or vanished), on any number of
//! devices: every input ([`covers`] is true for all).
//!
//! Choices DESIGN leaves open, taken from the core's public docs or, where those are
//! silent too, named here (a divergence would show which reading the core took):
//! * refusals are checked in the order: unloaded, time backwards, device id, table, then
//!   the input's own checks (client lookup, then state, then data);
//! * `OutputBacklog` is not modelled (the testkit's owner drains after every input);
//! * a new client takes the lowest free slot; freeing a slot bumps its generation; a
//!   device slot keeps its epoch and generations across removal and re-add;
//! * a link change to the state a port already has tells nobody;
//! * a gate may be open exactly while the device's state is running (D0, no cycle, no
//!   query, stop or removal) and the client is live, unfenced and at the current epoch;
//!   closes are asked within the input that ends that, opens at the end of an input; a
//!   close's answer extends a drain under way (or the removal's one deadline) to at least
//!   its `now` plus `operation_timeout`, even for a client being fenced;
//! * a power transition run for a pending query answers an input as that query's state
//!   does (the core's documented "clients get that query's answers"), a stop then held
//!   until the hardware reports; a fatal error there is deferred like the query defers it,
//!   and without a query it is served after the power-up (`AfterPowerUp`); a stop of a
//!   device in Dx releases its resources without touching registers;
//! * a cycle ends without a reset only if every voter said it can recover (one that left
//!   or was revoked needs the reset); with no voter the reset runs at once;
//! * removal has one deadline (`detach_timeout` from its start; a client told `Removed`
//!   by a surprise removal gets it from the `Remove`); a client revoked after it was told
//!   `Removed` is revoked silently, freed with the removal;
//! * a remove waits for a reset under way (a follow-up cycle is answered
//!   `AbortedByRemove` at once); unload waits for a start, a reset or a stop under way
//!   (the follow-up answered when the reset reports); a fatal error meanwhile is
//!   `FoldedIntoRemoval`, during the removal itself `HardwareNotLive(Removing)`;
//! * a trusted client's missed deadline under `FailDevice` fails the device only from
//!   running or quiescing (the only states `TRANSITIONS` lets a timeout fail);
//! * a waiting link change is told only to a client still bound to the port;
//! * reset groups (`groups`): membership is refused first for a member
//!   (`AlreadyInResetGroup`), then for an id out of range, then while the group's cycle
//!   runs; the group's cycle takes every present member not vanished nor being removed,
//!   even a lone one, and its deadline runs from the input that began it; a member that
//!   cannot take part is looked for among the *other* members (the requester's own
//!   power state only delays it); a reset owed across a power-up begins the group's cycle
//!   (and its deadline) at the next input that is not a leave (a join of the device owing
//!   it begins it), from system
//!   sleep only once the wake is commanded; the group decides recovery or reset only once
//!   every member answered *and drained*; the carrier is the lowest member taking part;
//!   the deadline names the member not ready ("before the member was ready", the
//!   core's `DeadlinePassed` doc): the lowest still waiting (for its power-up, a voter or
//!   an operation), failed by that very `Timeout` (its voter overran), or failed earlier
//!   and still holding the reset with its operations; else the lowest not failed
//!   (`tests/spec_found.rs`); a member whose removal
//!   begins or that vanishes leaves the group's cycle even when it failed; a
//!   member's cycle that ends on its own (a trusted client's missed deadline under
//!   `FailDevice`) ends before the member fails and its voters no longer hold the
//!   group's cycle back (a lone member's ends with it), though its operations (fenced,
//!   counted until the fence is done) still hold the one hardware reset (DESIGN's I12),
//!   not a recovery, which touches no hardware; a member failed meanwhile that then has
//!   remove pending ends the group's cycle without the reset, naming it (it could not
//!   have taken part); a power-up that lost state answers its
//!   requests `Completed` and still joins the group's cycle under way;
//! * a deadline is carried exactly (`time::Due`, 128 bits): one beyond `u64::MAX` is
//!   never reached and `poll_timeout` does not name it (DESIGN r3: never cut short);
//! * the mailbox coalesces as the core's mailbox documents: `Removed`/`Revoked` replace
//!   everything, a link change is one bit a port told with the state at delivery, device
//!   news replaces older news, `RESET`/`RESET_END`/`Recovered` queue in order; ordered
//!   events first, then links (lowest port first), then the last event.

mod clients;
mod fast;
mod groups;
mod pnp;
mod power;
mod removal;
mod reset;
mod time;

use clients::Mailbox;
use pnp_lifecycle::table::{disposition, Disposition};
use pnp_lifecycle::{
    BindingCaps, ClientHandle, ClientKind, ClientState, ClientView, Config, DeviceId, DriverPhase,
    Epoch, Error, FailureCause, Input, InputKind, LinkState, Output, PhaseKind, PhysPort, PortCaps,
    PortSet, PowerDownKind, Reply, RequestToken, Role, Status, Tick, VetoReason,
};
use std::collections::BTreeSet;
use time::Due;

/// Whether the spec model covers `input` (a walk compared with it must keep to these):
/// every input, reset groups included.
pub fn covers(input: &Input) -> bool {
    let _ = input;
    true
}

/// Where a client's registration stands (what `ClientState` shows, less the role).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Standing {
    Free,
    Live,
    /// Told `Removed` (or it waits in its mailbox): may only detach.
    Told,
    Revoked,
    Unregistered,
}

/// One client slot: facts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Cl {
    generation: u16,
    standing: Standing,
    kind: ClientKind,
    ports: PortSet,
    interface: Epoch,
    holding: bool,
    cannot_pause: bool,
    /// When the callback now in flight was made.
    callback_since: Option<Tick>,
    ops: u32,
    mailbox: Mailbox,
    fence_requested: bool,
    /// Deadline to detach once removal began.
    detach_by: Option<Due>,
    /// Its fast-path gate.
    gate: fast::Gate,
}

impl Cl {
    fn new() -> Cl {
        Cl {
            generation: 0,
            standing: Standing::Free,
            kind: ClientKind::Trusted,
            ports: PortSet::EMPTY,
            interface: Epoch(0),
            holding: false,
            cannot_pause: false,
            callback_since: None,
            ops: 0,
            mailbox: Mailbox::default(),
            fence_requested: false,
            detach_by: None,
            gate: fast::Gate::Shut,
        }
    }
}

/// A hardware command in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Busy {
    /// A start, with its request while it is still owed an answer.
    Start(Option<RequestToken>),
    Reset,
    PowerDown,
    PowerUp,
}

/// A pending PnP query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Query {
    Stop,
    Remove,
}

/// What the hardware holds (what a removal must undo).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Claim {
    /// Nothing claimed.
    Nothing,
    /// Resources claimed, registers not to be touched (a start that failed after claiming).
    Resources,
    /// Resources claimed and the hardware live.
    Live,
}

/// One device slot: facts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Dev {
    present: bool,
    epoch: Epoch,
    ports: Vec<Option<(PortCaps, LinkState)>>,
    clients: Vec<Cl>,
    claim: Claim,
    started: bool,
    hardware_busy: Option<Busy>,
    query_pending: Option<Query>,
    /// A stop accepted, draining operations before the hardware is shut down.
    stop_draining: Option<RequestToken>,
    stopped: bool,
    failed: Option<FailureCause>,
    vanished: bool,
    /// Removal began (with the remove's token, if a remove began it).
    removal_begun: bool,
    /// A remove (or unload) waits for the hardware reset in flight.
    removal_owed: bool,
    remove_tokens: Vec<RequestToken>,
    /// Reset cycle: quiescing (clients told `RESET`, answers awaited).
    quiescing: bool,
    /// Voters told `RESET` (or it waits in their mailbox) that have not answered.
    told_reset: BTreeSet<usize>,
    /// When each voter's `RESET` was delivered (its answer deadline counts from there).
    reset_delivered: Vec<Option<Tick>>,
    answered: BTreeSet<usize>,
    /// Some voter needs the hardware reset: it answered `RESET` plainly, or left the vote
    /// (unregistered, revoked) without saying it can recover; or there was no voter.
    reset_needed: bool,
    joined: BTreeSet<usize>,
    /// One follow-up cycle owed (a request during execution).
    follow_up: bool,
    /// Fatal errors answered `Deferred`, owed a cycle or a fold.
    fatal_deferred: bool,
    /// Operations being drained before a stop, a reset or a teardown: until when.
    drain_until: Option<Due>,
    /// In a low-power state (Dx), and why.
    dx: Option<PowerDownKind>,
    /// A power-down accepted (clients told `Suspending`), not yet reported done.
    powering_down: Option<PowerDownKind>,
    /// Power requests owed a completion when the power transition under way ends.
    power_tokens: Vec<RequestToken>,
    /// The power-up request owed a completion when the device is back.
    up_token: Option<RequestToken>,
    /// A power-up asked while the power-down was under way.
    up_after_down: bool,
    /// A system sleep asked during a reset cycle: begins when the cycle ends.
    sleep_after_cycle: Option<RequestToken>,
    /// A reset request in (or on the way to) Dx: served once the device is back.
    reset_after_up: bool,
    /// A stop asked during a power transition run for a pending query stop: served once
    /// the hardware reports.
    stop_held: Option<RequestToken>,
    /// The reset group the device belongs to.
    group: Option<pnp_lifecycle::GroupId>,
}

impl Dev {
    fn new(clients: usize, ports: usize) -> Dev {
        Dev {
            present: false,
            epoch: Epoch(0),
            ports: vec![None; ports],
            clients: vec![Cl::new(); clients],
            claim: Claim::Nothing,
            started: false,
            hardware_busy: None,
            query_pending: None,
            stop_draining: None,
            stopped: false,
            failed: None,
            vanished: false,
            removal_begun: false,
            removal_owed: false,
            remove_tokens: Vec::new(),
            quiescing: false,
            told_reset: BTreeSet::new(),
            reset_delivered: vec![None; clients],
            answered: BTreeSet::new(),
            reset_needed: false,
            joined: BTreeSet::new(),
            follow_up: false,
            fatal_deferred: false,
            drain_until: None,
            dx: None,
            powering_down: None,
            power_tokens: Vec::new(),
            up_token: None,
            up_after_down: false,
            sleep_after_cycle: None,
            reset_after_up: false,
            stop_held: None,
            group: None,
        }
    }

    /// The state the facts amount to, in the table's vocabulary.
    fn phase(&self) -> PhaseKind {
        use PhaseKind as K;
        if !self.present {
            K::Absent
        } else if self.removal_begun {
            K::Removing
        } else if self.vanished {
            K::SurpriseRemoved
        } else if self.powering_down.is_some() {
            K::PoweringDown
        } else if self.hardware_busy == Some(Busy::PowerUp) {
            K::PoweringUp
        } else if self.query_pending == Some(Query::Remove) {
            K::RemovePending
        } else if self.failed.is_some() {
            K::Failed
        } else if self.hardware_busy == Some(Busy::Reset) {
            K::Executing
        } else if self.quiescing {
            K::Quiescing
        } else if matches!(self.hardware_busy, Some(Busy::Start(_))) {
            K::Starting
        } else if self.stop_draining.is_some() {
            K::Stopping
        } else if self.stopped {
            K::Stopped
        } else if self.query_pending == Some(Query::Stop) {
            K::StopPending
        } else if self.dx.is_some() {
            K::LowPower
        } else if self.started {
            K::Running
        } else {
            K::Added
        }
    }

    /// Whether a cycle runs (quiescing or executing).
    fn in_cycle(&self) -> bool {
        self.quiescing || self.hardware_busy == Some(Busy::Reset)
    }
}

/// The spec model of a whole driver.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Spec {
    config: Config,
    fast_path: bool,
    now: Tick,
    driver: DriverPhase,
    devices: Vec<Dev>,
    /// Each reset group's cycle under way, by group id.
    group_runs: Vec<Option<groups::GroupRun>>,
    /// The outputs of the input being handled.
    out: Vec<Output>,
}

/// A rule's result: a reply, or a refusal that changed nothing.
type Answer = Result<Reply, Error>;

impl Spec {
    /// A driver with `devices` device slots, `clients` client slots and `ports` physical
    /// ports a device.
    pub fn new(devices: usize, clients: usize, ports: usize, config: Config) -> Spec {
        Spec {
            config,
            fast_path: false,
            now: Tick(0),
            driver: DriverPhase::Loaded,
            devices: vec![Dev::new(clients, ports); devices],
            group_runs: vec![None; devices],
            out: Vec::new(),
        }
    }

    /// This model for a machine built with the fast path.
    pub fn with_fast_path(mut self) -> Spec {
        self.fast_path = true;
        self
    }

    /// Apply one input at `now`: the answer and every output, in order. A refusal changes
    /// nothing (I10).
    pub fn handle(&mut self, now: Tick, input: Input) -> (Result<Reply, Error>, Vec<Output>) {
        let before = self.clone();
        self.out.clear();
        let answer = self.decide(now, input);
        match answer {
            Ok(_) => {
                self.now = now;
                for i in 0..self.devices.len() {
                    self.open_gates(DeviceId(i as u8));
                }
                self.finish_unload_if_done();
                let out = std::mem::take(&mut self.out);
                (answer, out)
            }
            Err(_) => {
                *self = before;
                (answer, Vec::new())
            }
        }
    }

    fn decide(&mut self, now: Tick, input: Input) -> Answer {
        if self.driver == DriverPhase::Unloaded {
            return Err(Error::Unloaded);
        }
        if now < self.now {
            return Err(Error::TimeWentBackwards { last: self.now });
        }
        let Some(d) = input.device() else {
            return match input {
                Input::Timeout => {
                    self.now = now;
                    self.on_time(now);
                    Ok(Reply::Accepted)
                }
                _ => {
                    if self.driver != DriverPhase::Loaded {
                        return Err(Error::UnloadAlreadyRequested);
                    }
                    self.now = now;
                    self.unload(now);
                    Ok(Reply::Accepted)
                }
            };
        };
        let Some(dev) = self.devices.get(usize::from(d.0)) else {
            return Err(Error::NoSuchDevice);
        };
        let phase = dev.phase();
        let kind = input.kind();
        match disposition(phase, kind) {
            Disposition::Refuse => return Err(Error::InvalidState { phase, input: kind }),
            Disposition::Veto => return Err(Error::Vetoed(VetoReason::ResetInProgress)),
            Disposition::Ignore => {
                if let Some(token) = input.token() {
                    self.complete(d, token, Status::Success);
                }
                return Ok(Reply::Accepted);
            }
            Disposition::Handle | Disposition::Defer => {}
        }
        // A power transition run for a pending query answers as that query's state (the
        // device returns to it), but for the transition's own completion.
        let dev = self.dev(d);
        let own = matches!(
            kind,
            InputKind::PowerDownDone | InputKind::PowerUpDone | InputKind::CallbackDoneWith
        );
        if matches!(phase, PhaseKind::PoweringDown | PhaseKind::PoweringUp) && !own {
            let query = match dev.query_pending {
                Some(Query::Stop) => Some(PhaseKind::StopPending),
                Some(Query::Remove) => Some(PhaseKind::RemovePending),
                None => None,
            };
            if let Some(q) = query {
                if disposition(q, kind) == Disposition::Refuse {
                    return Err(Error::InvalidState {
                        phase: q,
                        input: kind,
                    });
                }
            }
        }
        let answer = self.rule(now, d, input)?;
        if kind != InputKind::LeaveResetGroup {
            // A reset owed across a power-up begins its group's cycle at once, also when
            // the device owing it has just joined (leaving begins nothing).
            self.begin_group_cycle_after_power_up(now, d);
        }
        self.settle(now, d);
        self.settle_groups(now);
        Ok(answer)
    }

    /// Apply every rule whose conditions the facts now meet: a cycle whose voters all
    /// answered, a stop or teardown whose operations drained, a removal owed.
    fn settle(&mut self, now: Tick, d: DeviceId) {
        self.close_gates(now, d);
        self.settle_cycle(now, d);
        self.settle_power(now, d);
        self.settle_stop(now, d);
        let dev = self.dev(d);
        let busy = dev.hardware_busy.is_some() || dev.stop_draining.is_some();
        if dev.removal_owed && (!busy || dev.vanished) {
            self.begin_removal(now, d);
        }
        self.close_gates(now, d);
        self.settle_removal(d);
    }

    fn rule(&mut self, now: Tick, d: DeviceId, input: Input) -> Answer {
        match input {
            Input::AddDevice { .. } => self.add_device(d),
            Input::ConfigurePort { port, caps, .. } => self.configure_port(d, port, caps),
            Input::Start { token, .. } => self.start(d, token),
            Input::StartDone { result, .. } => self.start_done(now, d, result),
            Input::QueryStop { token, .. } => self.query_stop(d, token),
            Input::CancelStop { token, .. } => self.cancel_stop(now, d, token),
            Input::Stop { token, .. } => self.stop(now, d, token),
            Input::QueryRemove { token, .. } => self.query_remove(d, token),
            Input::CancelRemove { token, .. } => self.cancel_remove(now, d, token),
            Input::Remove { token, .. } => self.remove(now, d, Some(token)),
            Input::SurpriseRemoval { .. } => self.surprise_removal(now, d),
            Input::FatalError { .. } => self.fatal_error(now, d),
            Input::ResetDone { result, .. } => self.reset_done(now, d, result),
            Input::LinkChanged { port, state, .. } => self.link_changed(now, d, port, state),
            Input::Register { kind, .. } => self.register(d, kind),
            Input::Unregister { client } => self.unregister(now, client),
            Input::CallbackDone { client } => self.callback_done(now, client),
            Input::CallbackDoneWith { client, answer } => {
                self.callback_done_with(now, client, answer)
            }
            Input::FenceDone { client } => self.fence_done(client),
            Input::AcquireInterface { client } => self.acquire_interface(client),
            Input::ResetRequest { client } => self.reset_request(now, client),
            Input::ResetExecute { client } => self.answer_reset(now, client, false),
            Input::CanRecover { client } => self.answer_reset(now, client, true),
            Input::ResetNack { client } => self.reset_nack(now, client),
            Input::Bind { client, ports } => self.bind(client, ports),
            Input::Hold { client } => self.hold(client, true),
            Input::ReleaseHold { client } => self.hold(client, false),
            Input::CannotPause { client } => self.pause(client, true),
            Input::CanPause { client } => self.pause(client, false),
            Input::Access {
                client,
                epoch,
                what,
            } => self.access(client, epoch, what),
            Input::AccessDone { client } => self.access_done(client),
            Input::PowerDown { kind, token, .. } => self.power_down(now, d, kind, token),
            Input::PowerDownDone { .. } => self.power_down_done(now, d),
            Input::PowerUp { token, .. } => self.power_up(d, token),
            Input::PowerUpDone { result, .. } => self.power_up_done(now, d, result),
            Input::FastPathClosed { client, in_flight } => {
                self.fast_path_closed(now, client, in_flight)
            }
            Input::JoinResetGroup { group, .. } => self.join_group(d, group),
            Input::LeaveResetGroup { .. } => self.leave_group(d),
            _ => Err(Error::InvalidState {
                phase: self.dev(d).phase(),
                input: input.kind(),
            }),
        }
    }

    // ---- small helpers -------------------------------------------------------------

    fn dev(&self, d: DeviceId) -> &Dev {
        &self.devices[usize::from(d.0)]
    }

    fn dev_mut(&mut self, d: DeviceId) -> &mut Dev {
        &mut self.devices[usize::from(d.0)]
    }

    fn cl(&self, h: ClientHandle) -> &Cl {
        &self.devices[usize::from(h.device.0)].clients[usize::from(h.slot)]
    }

    fn cl_mut(&mut self, h: ClientHandle) -> &mut Cl {
        &mut self.devices[usize::from(h.device.0)].clients[usize::from(h.slot)]
    }

    fn handle_of(&self, d: DeviceId, slot: usize) -> ClientHandle {
        ClientHandle {
            device: d,
            slot: slot as u8,
            generation: self.dev(d).clients[slot].generation,
        }
    }

    /// The slots of `d` whose client is registered (any standing but free).
    fn occupied(&self, d: DeviceId) -> Vec<usize> {
        (0..self.dev(d).clients.len())
            .filter(|&s| self.dev(d).clients[s].standing != Standing::Free)
            .collect()
    }

    /// The slots of `d` whose client is live.
    fn live(&self, d: DeviceId) -> Vec<usize> {
        (0..self.dev(d).clients.len())
            .filter(|&s| self.dev(d).clients[s].standing == Standing::Live)
            .collect()
    }

    fn complete(&mut self, device: DeviceId, token: RequestToken, status: Status) {
        self.out.push(Output::Complete {
            device,
            token,
            status,
        });
    }

    fn hardware(&mut self, device: DeviceId, command: pnp_lifecycle::HardwareCommand) {
        self.out.push(Output::Hardware { device, command });
    }

    // ---- the getters `World` compares ------------------------------------------------

    /// The driver's unload standing.
    pub fn driver_phase(&self) -> DriverPhase {
        self.driver
    }

    /// The `now` of the last accepted input.
    pub fn now(&self) -> Tick {
        self.now
    }

    /// A device's state, derived from its facts.
    pub fn phase(&self, d: DeviceId) -> Option<PhaseKind> {
        self.devices.get(usize::from(d.0)).map(Dev::phase)
    }

    /// A device's epoch.
    pub fn epoch(&self, d: DeviceId) -> Option<Epoch> {
        self.devices.get(usize::from(d.0)).map(|x| x.epoch)
    }

    /// A configured port's link state.
    pub fn link(&self, d: DeviceId, p: PhysPort) -> Option<LinkState> {
        self.devices
            .get(usize::from(d.0))?
            .ports
            .get(usize::from(p.0))?
            .map(|(_, l)| l)
    }

    /// Every occupied client slot of a device, as the core's `clients` lists them.
    pub fn clients_into(&self, d: DeviceId, v: &mut Vec<(ClientHandle, ClientView)>) {
        v.clear();
        let Some(dev) = self.devices.get(usize::from(d.0)) else {
            return;
        };
        for (s, c) in dev.clients.iter().enumerate() {
            let state = match c.standing {
                Standing::Free => continue,
                Standing::Live => ClientState::Active {
                    role: self.role(d, s),
                    fresh: c.interface == dev.epoch,
                    holding: c.holding,
                    cannot_pause: c.cannot_pause,
                },
                Standing::Told => ClientState::Removed,
                Standing::Revoked => ClientState::Revoked,
                Standing::Unregistered => ClientState::Unregistered,
            };
            v.push((
                self.handle_of(d, s),
                ClientView {
                    kind: c.kind,
                    state,
                    ports: c.ports,
                    callback_in_flight: c.callback_since.is_some(),
                    operations_in_flight: c.ops.min(255) as u8,
                    waiting_events: c.mailbox.len() as u8,
                    fence_requested: c.fence_requested,
                },
            ));
        }
    }

    fn role(&self, d: DeviceId, s: usize) -> Role {
        let dev = self.dev(d);
        if dev.told_reset.contains(&s) {
            Role::Voting
        } else if dev.answered.contains(&s) {
            Role::Acked
        } else if dev.joined.contains(&s) {
            Role::Joined
        } else {
            Role::Idle
        }
    }

    /// The capabilities of a client's binding.
    pub fn binding_caps(&self, h: ClientHandle) -> Result<BindingCaps, Error> {
        let dev = self
            .devices
            .get(usize::from(h.device.0))
            .ok_or(Error::NoSuchDevice)?;
        self.callable(h)?;
        let c = &dev.clients[usize::from(h.slot)];
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

    /// When the model next needs the time: the earliest deadline of any device.
    pub fn poll_timeout(&self) -> Option<Tick> {
        if self.driver == DriverPhase::Unloaded {
            return None;
        }
        (0..self.devices.len())
            .filter_map(|i| self.next_deadline(DeviceId(i as u8)))
            .min()
    }
}

impl Spec {
    /// The reset group a device belongs to.
    pub fn reset_group(&self, d: DeviceId) -> Option<pnp_lifecycle::GroupId> {
        self.devices.get(usize::from(d.0))?.group
    }

    /// A reset group's cycle under way and its one deadline, as the core's `group_cycle`
    /// answers (`None`: no cycle runs; `Some(None)`: the deadline is beyond the clock).
    pub fn group_cycle(&self, g: pnp_lifecycle::GroupId) -> Option<Option<Tick>> {
        self.group_runs
            .get(usize::from(g.0))?
            .as_ref()
            .map(|r| r.deadline().tick())
    }
}
