//! The owner: a machine under test, the oracle, and optionally the reference model (the
//! spec model, [`crate::spec`]), stepped together. The owner keeps a clock and passes its
//! `now` with every input. [`World::step`] keeps the owner's obligation (drain every
//! output after every input), checks the invariants, and compares with the model.

use crate::oracle::{Check, Oracle, Violation};
use crate::spec::Spec;
use crate::sut::Sut;
use pnp_lifecycle::{
    ClientHandle, Config, DeviceId, DriverPhase, Error, HardwareCommand, Input, Output, PhysPort,
    PowerUpResult, Reply, ResetResult, StartResult, Tick,
};

/// The reference model for a machine like `S` (with the fast path if `S` runs it).
fn model_for<S: Sut>(config: Config) -> Spec {
    let model = Spec::new(S::DEVICES, S::CLIENTS, S::PORTS, config);
    if S::FAST_PATH {
        model.with_fast_path()
    } else {
        model
    }
}

/// One step's result as the owner saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The machine's answer.
    pub result: Result<Reply, Error>,
    /// Every output drained after the input, in order.
    pub outputs: Vec<Output>,
}

/// A machine under test with its oracle and (optionally) its reference model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct World<S: Sut> {
    /// The machine under test.
    pub sut: S,
    /// The invariant checker and owner bookkeeping.
    pub oracle: Oracle,
    /// The reference model (the spec model), compared after every step when present.
    pub model: Option<Spec>,
    /// The owner's clock: the latest `now` it passed.
    pub clock: Tick,
    /// Whether the oracle's verdicts count (it always keeps its books, which the
    /// generator reads). Off, only the models judge: [`World::oracle_off`].
    pub oracle_checks: bool,
}

impl<S: Sut> World<S> {
    /// A fresh world; `with_model` adds the reference model comparison.
    pub fn new(config: Config, with_model: bool) -> Self {
        World {
            sut: S::create(config),
            oracle: Oracle::new(S::DEVICES),
            model: with_model.then(|| model_for::<S>(config)),
            clock: Tick(0),
            oracle_checks: true,
        }
    }

    /// A world around an existing machine (e.g. a [`crate::faults::Faulty`] wrapper).
    pub fn from_sut(sut: S, with_model: bool) -> Self {
        let config = sut.config();
        World {
            sut,
            oracle: Oracle::new(S::DEVICES),
            model: with_model.then(|| model_for::<S>(config)),
            clock: Tick(0),
            oracle_checks: true,
        }
    }

    /// This world with the spec model compared after every step (what `with_model` asks
    /// of [`World::new`]).
    pub fn with_spec(mut self) -> Self {
        self.model = Some(model_for::<S>(self.sut.config()));
        self
    }

    /// This world with the oracle's verdicts ignored: only the models judge a step.
    pub fn oracle_off(mut self) -> Self {
        self.oracle_checks = false;
        self
    }

    /// Apply one input at the owner's current clock.
    pub fn step_now(&mut self, input: Input) -> Result<Step, Violation> {
        self.step(self.clock, input)
    }

    /// Apply one input that happened at `now` (the owner's clock moves to `now` if it is
    /// later), drain every output, check every invariant and compare with the
    /// model. A `Violation` describes the first rule broken.
    pub fn step(&mut self, now: Tick, input: Input) -> Result<Step, Violation> {
        self.clock = self.clock.max(now);
        let before = self.sut.clone();
        let result = self.sut.handle(now, input);
        let mut outputs = Vec::new();
        while let Some(o) = self.sut.poll_output() {
            outputs.push(o);
            if outputs.len() > 4 * S::DRIVER_INPUT_OUTPUTS + 16 {
                return Err(Violation {
                    check: Check::Bound,
                    detail: format!("unbounded outputs after {:?}", input),
                });
            }
        }
        let verdict = self
            .oracle
            .check_step(now, &before, &input, &result, &outputs, &self.sut);
        if self.oracle_checks {
            verdict?;
        }
        if let Some(model) = self.model.as_mut() {
            let (mres, mouts) = model.handle(now, input);
            judge(&self.sut, model, input, &result, &outputs, (mres, mouts))?;
        }
        Ok(Step { result, outputs })
    }

    /// Clients with a callback in flight (not fenced), with when it was made.
    pub fn callbacks_out(&self) -> Vec<(ClientHandle, Tick)> {
        self.oracle
            .handles()
            .filter(|(_, c)| !c.fence_pending)
            .filter_map(|(h, c)| c.callback.map(|t| (h, t)))
            .collect()
    }

    /// Clients with a granted hardware operation not reported done (nor fenced).
    pub fn operations_out(&self) -> Vec<ClientHandle> {
        self.oracle
            .handles()
            .filter(|(_, c)| c.ops > 0 && !c.fence_pending)
            .map(|(h, _)| h)
            .collect()
    }

    /// Clients whose fast-path gate the machine asked to close, unanswered (issue 21).
    pub fn closes_out(&self) -> Vec<ClientHandle> {
        self.oracle
            .handles()
            .filter(|(_, c)| c.gate_closing.is_some())
            .map(|(h, _)| h)
            .collect()
    }

    /// Clients the owner was asked to fence and has not reported done.
    pub fn fences_out(&self) -> Vec<ClientHandle> {
        self.oracle
            .handles()
            .filter(|(_, c)| c.fence_pending)
            .map(|(h, _)| h)
            .collect()
    }
}

/// Compare one step of the machine with a reference model's.
fn judge<S: Sut, M: Reference>(
    sut: &S,
    model: &M,
    input: Input,
    result: &Result<Reply, Error>,
    outputs: &[Output],
    (mres, mouts): (Result<Reply, Error>, Vec<Output>),
) -> Result<(), Violation> {
    if mres != *result {
        return Err(Violation {
            check: Check::Model,
            detail: format!(
                "after {:?}: core answered {:?}, model {:?}",
                input, result, mres
            ),
        });
    }
    if let Err(why) = compare_outputs(outputs, &mouts) {
        return Err(Violation {
            check: Check::Model,
            detail: format!(
                "after {:?}: {}\n core:  {:?}\n model: {:?}",
                input, why, outputs, mouts
            ),
        });
    }
    compare_state(sut, model).map_err(|why| Violation {
        check: Check::Model,
        detail: format!("after {:?}: {}", input, why),
    })?;
    Ok(())
}

/// What `compare_state` reads of a reference model (the [`Spec`]).
pub trait Reference {
    /// Where the driver stands with respect to unload.
    fn driver_phase(&self) -> DriverPhase;
    /// The last accepted input's `now`.
    fn now(&self) -> Tick;
    /// The next deadline.
    fn poll_timeout(&self) -> Option<Tick>;
    /// A device's state.
    fn phase(&self, d: DeviceId) -> Option<pnp_lifecycle::PhaseKind>;
    /// A device's epoch.
    fn epoch(&self, d: DeviceId) -> Option<pnp_lifecycle::Epoch>;
    /// A port's link state.
    fn link(&self, d: DeviceId, p: PhysPort) -> Option<pnp_lifecycle::LinkState>;
    /// A device's occupied client slots.
    fn clients_into(&self, d: DeviceId, v: &mut Vec<(ClientHandle, pnp_lifecycle::ClientView)>);
    /// A client's binding capabilities.
    fn binding_caps(&self, h: ClientHandle) -> Result<pnp_lifecycle::BindingCaps, Error>;
}

macro_rules! reference {
    ($t:ty) => {
        impl Reference for $t {
            fn driver_phase(&self) -> DriverPhase {
                <$t>::driver_phase(self)
            }
            fn now(&self) -> Tick {
                <$t>::now(self)
            }
            fn poll_timeout(&self) -> Option<Tick> {
                <$t>::poll_timeout(self)
            }
            fn phase(&self, d: DeviceId) -> Option<pnp_lifecycle::PhaseKind> {
                <$t>::phase(self, d)
            }
            fn epoch(&self, d: DeviceId) -> Option<pnp_lifecycle::Epoch> {
                <$t>::epoch(self, d)
            }
            fn link(&self, d: DeviceId, p: PhysPort) -> Option<pnp_lifecycle::LinkState> {
                <$t>::link(self, d, p)
            }
            fn clients_into(
                &self,
                d: DeviceId,
                v: &mut Vec<(ClientHandle, pnp_lifecycle::ClientView)>,
            ) {
                <$t>::clients_into(self, d, v)
            }
            fn binding_caps(&self, h: ClientHandle) -> Result<pnp_lifecycle::BindingCaps, Error> {
                <$t>::binding_caps(self, h)
            }
        }
    };
}
reference!(Spec);

/// Compare the core's outputs of one step with the model's.
///
/// Relaxation (documented): the specification fixes no order between outputs of one
/// input except where it matters to a receiver. So the lists must be equal as multisets,
/// and equal in order when projected on (a) each client's notifications, (b) each device's
/// hardware commands, (c) each device's cycle results, and `UnloadMayFinish` must be last.
pub fn compare_outputs(core: &[Output], model: &[Output]) -> Result<(), String> {
    if core == model {
        return Ok(());
    }
    let mut a = core.to_vec();
    let mut b = model.to_vec();
    // Outputs have no order of their own: sort by their text to compare as multisets.
    a.sort_by_key(|o| format!("{o:?}"));
    b.sort_by_key(|o| format!("{o:?}"));
    if a != b {
        return Err("different outputs".into());
    }
    type Key = fn(&Output) -> Option<(u8, u8, u16)>;
    let projections: [Key; 3] = [
        |o| match o {
            Output::Notify { client, .. } => {
                Some((client.device.0, client.slot, client.generation))
            }
            _ => None,
        },
        |o| match o {
            Output::Hardware { device, .. } => Some((device.0, 0, 0)),
            _ => None,
        },
        |o| match o {
            Output::ResetCycleFinished { device, .. } => Some((device.0, 0, 0)),
            _ => None,
        },
    ];
    for key in projections {
        let mut keys: Vec<_> = core.iter().filter_map(key).collect();
        keys.dedup();
        for k in keys {
            let pa: Vec<_> = core.iter().filter(|o| key(o) == Some(k)).collect();
            let pb: Vec<_> = model.iter().filter(|o| key(o) == Some(k)).collect();
            if pa != pb {
                return Err(format!("different order for {:?}", k));
            }
        }
    }
    for list in [core, model] {
        if let Some(p) = list.iter().position(|o| *o == Output::UnloadMayFinish) {
            if p + 1 != list.len() {
                return Err("UnloadMayFinish not last".into());
            }
        }
    }
    Ok(())
}

/// Compare the observable state of the core with the model's.
pub fn compare_state<S: Sut, M: Reference>(sut: &S, model: &M) -> Result<(), String> {
    if sut.driver_phase() != model.driver_phase() {
        return Err(format!(
            "driver phase core {:?}, model {:?}",
            sut.driver_phase(),
            model.driver_phase()
        ));
    }
    if sut.now() != model.now() {
        return Err("clock differs".into());
    }
    if sut.poll_timeout() != model.poll_timeout() {
        return Err(format!(
            "poll_timeout core {:?}, model {:?}",
            sut.poll_timeout(),
            model.poll_timeout()
        ));
    }
    for i in 0..S::DEVICES {
        let d = DeviceId(i as u8);
        if sut.phase(d) != model.phase(d) || sut.epoch(d) != model.epoch(d) {
            return Err(format!(
                "device {}: core {:?} epoch {:?}, model {:?} epoch {:?}",
                i,
                sut.phase_detail(d),
                sut.epoch(d),
                model.phase(d),
                model.epoch(d)
            ));
        }
        for p in 0..S::PORTS {
            let port = PhysPort(p as u8);
            if sut.link(d, port) != model.link(d, port) {
                return Err(format!("device {} port {} link differs", i, p));
            }
        }
        // Both lists go into buffers kept between steps (no allocation a step).
        let differs = CLIENT_LISTS.with(|lists| {
            let (cs, ms) = &mut *lists.borrow_mut();
            sut.client_list_into(d, cs);
            model.clients_into(d, ms);
            if cs != ms {
                return Some(format!(
                    "device {} clients:\n core:  {:?}\n model: {:?}",
                    i, cs, ms
                ));
            }
            cs.iter()
                .find(|(h, _)| sut.binding_caps(*h) != model.binding_caps(*h))
                .map(|(h, _)| format!("binding caps of {:?} differ", h))
        });
        if let Some(why) = differs {
            return Err(why);
        }
    }
    Ok(())
}

type ClientList = Vec<(ClientHandle, pnp_lifecycle::ClientView)>;

std::thread_local! {
    /// `compare_state`'s two client lists (the core's, the model's).
    static CLIENT_LISTS: core::cell::RefCell<(ClientList, ClientList)> =
        const { core::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// How [`drive_to_quiescence`] treats the clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quiesce {
    /// Clients answer: every callback returns, every hardware operation is reported done,
    /// every client unregisters; then the driver unloads.
    Cooperative,
    /// Clients return their callbacks but never answer `RESET`, never finish a hardware
    /// operation and never detach: deadlines must still end every cycle, stop and
    /// removal, and then unload must finish.
    Uncooperative,
    /// Clients never return a callback, never answer, never finish a hardware operation,
    /// never detach, and the owner's clock jumps far ahead between inputs. The owner only keeps its own duties: complete
    /// hardware commands, answer fences (late), feed `Timeout` when the clock reaches
    /// `poll_timeout`. Every cycle, stop, remove and unload must still finish (I9).
    Hostile,
}

/// How far the hostile owner's clock jumps between inputs.
pub const HOSTILE_JUMP: u64 = 1_000_000_007;

/// I9: from any state, keep the owner's duties (complete every hardware command, answer
/// every fence, feed `Timeout` at every deadline), let the clients behave per `mode`, and
/// unload; assert that every cycle, removal and the unload finish within a bounded number
/// of inputs, and that every obligation is met at the end. Returns the number of inputs
/// it took.
pub fn drive_to_quiescence<S: Sut>(
    world: &mut World<S>,
    mode: Quiesce,
) -> Result<usize, Violation> {
    let clients = S::DEVICES * S::CLIENTS;
    // A client: a few callbacks (its mailbox holds at most three ordered events, a link
    // bit a port and a last event), up to 16 operations reported done, an unregister, a
    // fence. A device: hardware completions and a few timeouts.
    let budget = clients * (S::PORTS + 26) + 10 * S::DEVICES + 16;
    let mut steps = 0;
    let mut cycles_settled = mode == Quiesce::Cooperative;
    while steps <= budget {
        if world.oracle.unload_finished {
            world.oracle.check_quiescent()?;
            return Ok(steps);
        }
        let (now, input) = next_duty(world, mode, &mut cycles_settled)?;
        world.step(now, input)?;
        steps += 1;
    }
    Err(Violation {
        check: Check::I9,
        detail: format!(
            "not quiescent after {} inputs ({:?}); phases {:?}",
            budget,
            mode,
            (0..S::DEVICES)
                .map(|d| world.sut.phase_detail(DeviceId(d as u8)))
                .collect::<Vec<_>>()
        ),
    })
}

fn next_duty<S: Sut>(
    world: &World<S>,
    mode: Quiesce,
    cycles_settled: &mut bool,
) -> Result<(Tick, Input), Violation> {
    let clock = world.clock.max(world.sut.now());
    let hostile = mode == Quiesce::Hostile;
    let jump = |t: Tick| if hostile { t.after(HOSTILE_JUMP) } else { t };
    let due = world.sut.poll_timeout();
    if hostile && due.is_some_and(|t| t <= clock) {
        return Ok((clock, Input::Timeout));
    }
    if !hostile {
        if let Some((client, _)) = world.callbacks_out().first() {
            return Ok((clock, Input::CallbackDone { client: *client }));
        }
    }
    if let Some(client) = world.closes_out().first() {
        // The owner closes the gate under its lock and answers at once; its fast path
        // has nothing in flight here.
        let (client, in_flight) = (*client, 0);
        return Ok((clock, Input::FastPathClosed { client, in_flight }));
    }
    if let Some(client) = world.fences_out().first() {
        // The owner waits out the call for a bounded time, then reports.
        return Ok((jump(clock), Input::FenceDone { client: *client }));
    }
    for (i, b) in world.oracle.devices.iter().enumerate() {
        let device = DeviceId(i as u8);
        if b.start_in_flight {
            let result = StartResult::Started;
            return Ok((jump(clock), Input::StartDone { device, result }));
        }
        if b.reset_in_flight {
            let result = ResetResult::Succeeded;
            return Ok((jump(clock), Input::ResetDone { device, result }));
        }
        if b.power_down_in_flight {
            return Ok((jump(clock), Input::PowerDownDone { device }));
        }
        if b.power_up_in_flight {
            let result = PowerUpResult::Powered;
            return Ok((jump(clock), Input::PowerUpDone { device, result }));
        }
    }
    if mode == Quiesce::Cooperative {
        // Cooperative clients finish their hardware operations.
        if let Some(client) = world.operations_out().first() {
            return Ok((clock, Input::AccessDone { client: *client }));
        }
        if let Some((client, _)) = world
            .oracle
            .handles()
            .find(|(_, c)| !c.gone && !c.unregistered)
        {
            return Ok((clock, Input::Unregister { client }));
        }
    }
    if !*cycles_settled {
        // A reset waiting in a system sleep for the power-up waits for the owner's
        // resume, which no duty here sends: unload answers it.
        let running = world.oracle.devices.iter().enumerate().any(|(i, b)| {
            let asleep = b.power_reset
                && world.sut.phase(DeviceId(i as u8)) == Some(pnp_lifecycle::PhaseKind::LowPower);
            b.cycles_owed > 0 && !asleep
        });
        if !running {
            *cycles_settled = true;
        } else if let Some(t) = due {
            return Ok((t.max(clock), Input::Timeout));
        } else {
            return Err(Violation {
                check: Check::I9,
                detail: "a reset cycle waits with no deadline and nothing in flight".into(),
            });
        }
    }
    if world.sut.driver_phase() == DriverPhase::Loaded && !world.oracle.unload_requested {
        return Ok((jump(clock), Input::Unload));
    }
    if let Some(t) = due {
        return Ok((jump(t.max(clock)), Input::Timeout));
    }
    Err(Violation {
        check: Check::I9,
        detail: format!(
            "stuck ({:?}): unload not finished, nothing to do, no deadline; phases {:?}",
            mode,
            (0..S::DEVICES)
                .map(|d| world.sut.phase_detail(DeviceId(d as u8)))
                .collect::<Vec<_>>()
        ),
    })
}

/// Whether an output is a hardware command of kind `command`.
pub fn is_hw(o: &Output, command: HardwareCommand) -> bool {
    matches!(o, Output::Hardware { command: c, .. } if *c == command)
}

/// The tick one past every configured deadline from `now`.
pub fn past_all_deadlines(config: &Config, now: Tick) -> Tick {
    let most = config
        .untrusted_ack_timeout
        .max(config.trusted_ack_timeout)
        .max(config.detach_timeout)
        .max(config.callback_timeout)
        .max(config.operation_timeout);
    Tick(now.0.saturating_add(most).saturating_add(1))
}
