//! One device: its lifecycle phase, ports, epoch and client registry, and every handler.
//!
//! Handlers check everything first and change state only once nothing can fail, so a
//! refused input leaves the device exactly as it was.

use crate::queue::OutputQueue;
use crate::registry::{ClientState, Lookup, Registry, Role, Slot, OPS_PER_CLIENT};
use crate::table::{InputKind, PhaseKind};
use crate::types::*;

mod deadlines;
mod power;

use deadlines::{callback_deadline, due, slot_deadlines, voter_deadline, Earliest};

value_type! {
    /// Whether the device holds hardware resources (mapped registers, interrupts).
    pub enum Resources {
        /// Nothing claimed: removal has nothing to release.
        None,
        /// Claimed: removal releases them.
        Held,
    }
}

value_type! {
    /// A hardware command whose completion the machine still waits for.
    pub enum HwOp {
        /// [`HardwareCommand::Start`], answered by [`Input::StartDone`].
        Start,
        /// [`HardwareCommand::Reset`], answered by [`Input::ResetDone`].
        Reset,
        /// [`HardwareCommand::PowerDown`], answered by [`Input::PowerDownDone`].
        PowerDown,
        /// [`HardwareCommand::PowerUp`], answered by [`Input::PowerUpDone`].
        PowerUp,
    }
}

value_type! {
    /// What removal undoes once every client has detached.
    pub enum Teardown {
        /// Nothing was claimed (never started, a start that failed early, or stopped).
        Nothing,
        /// Release resources without touching registers (failed or vanished hardware).
        Release,
        /// Quiesce the hardware, then release resources.
        ShutdownAndRelease,
    }
}

impl Teardown {
    const fn of(resources: Resources) -> Teardown {
        match resources {
            Resources::None => Teardown::Nothing,
            Resources::Held => Teardown::Release,
        }
    }

    /// The same teardown for hardware that has vanished: no register is touched.
    const fn without_registers(self) -> Teardown {
        match self {
            Teardown::ShutdownAndRelease => Teardown::Release,
            other => other,
        }
    }
}

value_type! {
    /// What follows the hardware reset in flight.
    pub enum AfterReset {
        /// Back to running.
        Resume,
        /// One follow-up cycle, for requests that arrived during execution.
        FollowUp,
        /// Remove the device, then complete this request.
        Remove(RequestToken),
    }
}

value_type! {
    /// The state a query remove left, restored exactly by cancel remove.
    pub enum Prior {
        /// Added, never started.
        Added,
        /// Running.
        Running,
        /// Stopped.
        Stopped,
        /// Failed.
        Failed(Resources, FailureCause),
        /// In a low-power state.
        LowPower(PowerDownKind),
    }
}

value_type! {
    /// The state of a device slot, with the data each state needs.
    pub enum Phase {
        /// No device.
        Absent,
        /// Added, never started.
        Added,
        /// Hardware start in flight; `token` completes when it reports.
        Starting {
            /// The start request.
            token: RequestToken,
            /// A fatal error arrived meanwhile: a cycle serves it once the device runs.
            fatal: bool,
        },
        /// Running, no reset cycle.
        Running,
        /// Clients told `RESET` at `since`; waiting for voters, then for hardware
        /// operations in flight.
        Quiescing {
            /// When the cycle began (each voter's deadline counts from the delivery of its
            /// own `RESET`: see the registry's slots).
            since: Tick,
            /// Voters that have not answered, left or been revoked. Kept so that each
            /// answer costs O(1) and a cycle stays linear in clients.
            voters: u16,
            /// Some voter answered `ResetExecute` (or there was no voter): the hardware is
            /// reset. Otherwise every voter could recover and the cycle ends without one.
            reset_needed: bool,
            /// Every voter answered and the reset waits for hardware operations in flight
            /// since then (their deadline counts from here).
            draining: Option<Tick>,
        },
        /// Hardware reset in flight.
        Executing {
            /// What follows it.
            then: AfterReset,
        },
        /// Query stop succeeded.
        StopPending {
            /// A fatal error arrived meanwhile: the stop absorbs it, or a cycle serves it
            /// after cancel stop.
            fatal: bool,
            /// The query stop came in a low-power state: the stop releases resources
            /// without touching registers, cancel stop returns to that state.
            low_power: Option<PowerDownKind>,
        },
        /// Stop accepted at `since`; waiting for hardware operations in flight.
        Stopping {
            /// The stop request, completed once the hardware is released.
            token: RequestToken,
            /// When the wait began: the operations' deadline counts from here.
            since: Tick,
            /// A fatal error the stop absorbs.
            fatal: bool,
        },
        /// Stopped; resources released.
        Stopped,
        /// Query remove succeeded.
        RemovePending {
            /// The state cancel remove restores.
            prior: Prior,
            /// A fatal error arrived meanwhile (only with a running prior): the removal
            /// absorbs it, or a cycle serves it after cancel remove.
            fatal: bool,
        },
        /// Failed.
        Failed {
            /// What removal must release.
            resources: Resources,
            /// Why it failed.
            cause: FailureCause,
        },
        /// The hardware vanished.
        SurpriseRemoved {
            /// What removal must release (known once `in_flight` reports).
            resources: Resources,
            /// A hardware command that has not reported yet.
            in_flight: Option<HwOp>,
        },
        /// Clients told `Suspending` at `since`; waiting for hardware operations in flight
        /// (`commanded` false), then for the hardware power-down (`commanded` true).
        PoweringDown {
            /// Idle power-down or system sleep.
            kind: PowerDownKind,
            /// The power-down request, completed in the low-power state.
            token: RequestToken,
            /// When the wait for operations began: their deadline counts from here.
            since: Tick,
            /// [`HardwareCommand::PowerDown`] was commanded.
            commanded: bool,
            /// A reset request or fatal error waits for the next power-up.
            reset: bool,
            /// An access after an idle power-down waits: the device comes straight back
            /// once it is down.
            wake: bool,
        },
        /// In a low-power state (Dx).
        LowPower {
            /// Idle power-down or system sleep.
            kind: PowerDownKind,
            /// A reset request or fatal error waits for the power-up.
            reset: bool,
        },
        /// Hardware power-up in flight.
        PoweringUp {
            /// The power-up request, if the owner sent one (an access or a reset request
            /// after an idle power-down starts one without).
            token: Option<RequestToken>,
            /// A reset request or fatal error is served once the device is back.
            reset: bool,
        },
        /// Draining clients, then undoing.
        Removing {
            /// The remove request, if the PnP manager sent one (unload sends none).
            token: Option<RequestToken>,
            /// When clients that have not detached are revoked (`None`: beyond the clock's
            /// range, so never).
            deadline: Option<Tick>,
            /// What to undo at the end.
            teardown: Teardown,
            /// A hardware command that must report before resources go.
            in_flight: Option<HwOp>,
        },
    }
}

impl Phase {
    /// The state without its data: the row of the per-state table.
    pub const fn kind(&self) -> PhaseKind {
        match self {
            Phase::Absent => PhaseKind::Absent,
            Phase::Added => PhaseKind::Added,
            Phase::Starting { .. } => PhaseKind::Starting,
            Phase::Running => PhaseKind::Running,
            Phase::Quiescing { .. } => PhaseKind::Quiescing,
            Phase::Executing { .. } => PhaseKind::Executing,
            Phase::StopPending { .. } => PhaseKind::StopPending,
            Phase::Stopping { .. } => PhaseKind::Stopping,
            Phase::Stopped => PhaseKind::Stopped,
            Phase::RemovePending { .. } => PhaseKind::RemovePending,
            Phase::Failed { .. } => PhaseKind::Failed,
            Phase::SurpriseRemoved { .. } => PhaseKind::SurpriseRemoved,
            Phase::Removing { .. } => PhaseKind::Removing,
            Phase::PoweringDown { .. } => PhaseKind::PoweringDown,
            Phase::LowPower { .. } => PhaseKind::LowPower,
            Phase::PoweringUp { .. } => PhaseKind::PoweringUp,
        }
    }
}

value_type! {
    /// One physical port.
    pub struct Port {
        /// Its capabilities, once configured.
        pub caps: Option<PortCaps>,
        /// Its link state.
        pub link: LinkState,
    }
}

impl Port {
    const UNCONFIGURED: Port = Port {
        caps: None,
        link: LinkState::Down,
    };
}

/// What a handler needs from the driver around it.
pub(crate) struct Ctx<'a, const Q: usize> {
    pub(crate) device: DeviceId,
    pub(crate) now: Tick,
    pub(crate) config: &'a Config,
    pub(crate) unloading: bool,
    pub(crate) out: &'a mut OutputQueue<Q>,
}

impl<const Q: usize> Ctx<'_, Q> {
    fn hardware(&mut self, command: HardwareCommand) {
        debug!("device {} hardware {}", self.device.0, command);
        self.out.push(Output::Hardware {
            device: self.device,
            command,
        });
    }

    fn complete(&mut self, token: RequestToken, status: Status) {
        self.out.push(Output::Complete {
            device: self.device,
            token,
            status,
        });
    }

    fn cycle_finished(&mut self, outcome: CycleOutcome) {
        debug!("device {} cycle finished {}", self.device.0, outcome);
        self.out.push(Output::ResetCycleFinished {
            device: self.device,
            outcome,
        });
    }

    fn deadline(&self, after: u64) -> Option<Tick> {
        due(self.now, after)
    }
}

/// One device slot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Device<const C: usize, const P: usize> {
    pub(crate) phase: Phase,
    pub(crate) epoch: Epoch,
    pub(crate) ports: [Port; P],
    pub(crate) registry: Registry<C>,
    /// A system-sleep power-down requested during a reset cycle: it begins when the cycle
    /// ends with the device running (or completes with the status of another ending).
    pub(crate) sleep_after_cycle: Option<RequestToken>,
    /// The earliest deadline the device waits on, kept current (see `deadlines`).
    pub(crate) earliest: Earliest,
}

impl<const C: usize, const P: usize> Device<C, P> {
    pub(crate) const fn new() -> Self {
        Device {
            phase: Phase::Absent,
            epoch: Epoch(0),
            ports: [Port::UNCONFIGURED; P],
            registry: Registry::new(),
            sleep_after_cycle: None,
            earliest: Earliest::NONE,
        }
    }

    /// Why the device failed, while it is failed (or remove is pending from failed).
    pub(crate) fn failure(&self) -> Option<FailureCause> {
        match self.phase {
            Phase::Failed { cause, .. }
            | Phase::RemovePending {
                prior: Prior::Failed(_, cause),
                ..
            } => Some(cause),
            _ => None,
        }
    }

    /// Every state change goes through here, with a trace line. A system sleep deferred
    /// by a reset cycle is completed here if the cycle ends anywhere but running.
    fn set_phase<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, phase: Phase) {
        if phase.kind() != self.phase.kind() {
            debug!(
                "device {} {} -> {}",
                cx.device.0,
                self.phase.kind(),
                phase.kind()
            );
        }
        // The phase's own deadline (an operations' wait, removal's detach) may change.
        let waited = self.phase_waits();
        self.phase = phase;
        if waited || self.phase_waits() {
            self.earliest.invalidate();
        }
        let settled = match phase.kind() {
            PhaseKind::Quiescing | PhaseKind::Executing | PhaseKind::Running => None,
            PhaseKind::Failed => Some(Status::HardwareFailed),
            _ => Some(Status::DeviceGone),
        };
        if let (Some(status), Some(token)) = (settled, self.sleep_after_cycle) {
            self.sleep_after_cycle = None;
            cx.complete(token, status);
        }
    }

    /// The device failed for `cause`: say so to the owner (Windows reports
    /// `PNP_DEVICE_FAILED`); clients are told [`Event::DeviceFatal`] by the caller.
    fn fail<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        resources: Resources,
        cause: FailureCause,
    ) {
        self.set_phase(cx, Phase::Failed { resources, cause });
        cx.out.push(Output::DeviceFailed {
            device: cx.device,
            cause,
        });
    }

    fn refuse(&self, input: InputKind) -> Error {
        Error::InvalidState {
            phase: self.phase.kind(),
            input,
        }
    }

    /// Run a device input the table accepted. Inlined into its one caller,
    /// `Lifecycle::handle`: the call, its frame and the context's trip through memory cost
    /// a fifth of a client input.
    #[inline(always)]
    pub(crate) fn dispatch<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        input: Input,
    ) -> Result<Reply, Error> {
        let accepted = |r: Result<(), Error>| r.map(|()| Reply::Accepted);
        let result = match input {
            Input::AddDevice { .. } => accepted(self.add(cx)),
            Input::ConfigurePort { port, caps, .. } => accepted(self.configure_port(port, caps)),
            Input::Start { token, .. } => accepted(self.start(cx, token)),
            Input::StartDone { result, .. } => accepted(self.start_done(cx, result)),
            Input::QueryStop { token, .. } => accepted(self.query_stop(cx, token)),
            Input::CancelStop { token, .. } => accepted(self.cancel_stop(cx, token)),
            Input::Stop { token, .. } => accepted(self.stop(cx, token)),
            Input::QueryRemove { token, .. } => accepted(self.query_remove(cx, token)),
            Input::CancelRemove { token, .. } => accepted(self.cancel_remove(cx, token)),
            Input::Remove { token, .. } => accepted(self.remove(cx, Some(token))),
            Input::SurpriseRemoval { .. } => accepted(self.surprise_removal(cx)),
            Input::FatalError { .. } => self.fatal_error(cx).map(Reply::Fatal),
            Input::ResetDone { result, .. } => accepted(self.reset_done(cx, result)),
            Input::LinkChanged { port, state, .. } => accepted(self.link_changed(cx, port, state)),
            Input::Register { kind, .. } => self.register(cx, kind),
            Input::Unregister { client } => self.unregister(cx, client).map(Reply::Unregistered),
            Input::CallbackDone { client } => accepted(self.callback_done(cx, client)),
            Input::FenceDone { client } => accepted(self.fence_done(cx, client)),
            Input::AccessDone { client } => accepted(self.access_done(cx, client)),
            Input::CanRecover { client } => accepted(self.answer_reset(cx, client, false)),
            Input::CannotPause { client } => {
                accepted(self.set_veto(client, ClientVeto::CannotPause, true))
            }
            Input::CanPause { client } => {
                accepted(self.set_veto(client, ClientVeto::CannotPause, false))
            }
            Input::AcquireInterface { client } => self.acquire(client).map(Reply::Interface),
            Input::ResetRequest { client } => match self.registry.active(client) {
                Ok(_) => self.request_reset(cx).map(Reply::Reset),
                Err(e) => Err(e),
            },
            Input::ResetExecute { client } => accepted(self.answer_reset(cx, client, true)),
            Input::Bind { client, ports } => accepted(self.bind(client, ports)),
            Input::Hold { client } => accepted(self.set_veto(client, ClientVeto::Hold, true)),
            Input::ReleaseHold { client } => {
                accepted(self.set_veto(client, ClientVeto::Hold, false))
            }
            Input::Access {
                client,
                epoch,
                what,
            } => self.access(cx, client, epoch, what),
            Input::PowerDown { kind, token, .. } => accepted(self.power_down(cx, kind, token)),
            Input::PowerDownDone { .. } => accepted(self.power_down_done(cx)),
            Input::PowerUp { token, .. } => accepted(self.power_up(cx, token)),
            Input::PowerUpDone { result, .. } => accepted(self.power_up_done(cx, result)),
            Input::Timeout | Input::Unload => Err(self.refuse(input.kind())),
        };
        // I13, I9: `poll_timeout` reads the earliest deadline kept here.
        self.refresh_deadline(cx.config);
        result
    }

    /// Driver unload removes the device (without a token; never refused in a present
    /// state, I11).
    pub(crate) fn unload<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        self.earliest.invalidate();
        let _ = self.remove(cx, None);
        self.refresh_deadline(cx.config);
    }

    // ---- notifications -------------------------------------------------------------

    /// Call the client with `event` now if no callback of its is in flight, else keep the
    /// event in its mailbox (bounded: see `crate::mailbox`).
    fn notify<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, index: usize, event: Event) {
        let Some(slot) = self.registry.slots.get_mut(index) else {
            return;
        };
        if (slot.callback.is_none() || planted!(SecondCallbackInFlight)) && slot.mailbox.is_empty()
        {
            // The deadlines follow: the callback's begins, and the answer's with a RESET.
            if slot.callback.is_some() {
                self.earliest.remove(callback_deadline(cx.config, slot));
            }
            slot.callback = Some(cx.now);
            self.earliest.add(callback_deadline(cx.config, slot));
            if event == Event::Reset {
                if slot.reset_delivered.is_some() {
                    self.earliest.remove(voter_deadline(cx.config, slot));
                }
                slot.reset_delivered = Some(cx.now);
                self.earliest.add(voter_deadline(cx.config, slot));
            }
            let client = Registry::<C>::handle(cx.device, index, slot);
            cx.out.push(Output::Notify { client, event });
        } else {
            if event == Event::Reset && slot.reset_delivered.is_some() {
                // I13: no answer deadline runs while the RESET cannot be answered.
                self.earliest.remove(voter_deadline(cx.config, slot));
                slot.reset_delivered = None;
            }
            slot.mailbox.put(event);
        }
    }

    /// The client's callback returned: hand over its next waiting event, if any.
    fn deliver_next<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, index: usize) {
        let ports = &self.ports;
        let Some(slot) = self.registry.slots.get_mut(index) else {
            return;
        };
        let bound = slot.ports;
        let link_of = |port: PhysPort| {
            let state = ports.get(usize::from(port.0))?.link;
            bound
                .contains(port)
                .then_some(Event::LinkChanged { port, state })
        };
        if let Some(event) = slot.mailbox.take(link_of) {
            slot.callback = Some(cx.now);
            if event == Event::Reset {
                // I13: a RESET held behind the client's callback is answerable from now.
                slot.reset_delivered = Some(cx.now);
            }
            let client = Registry::<C>::handle(cx.device, index, slot);
            cx.out.push(Output::Notify { client, event });
            // Its callback's deadline, and its RESET answer's if this is its RESET.
            self.earliest.add(callback_deadline(cx.config, slot));
            if event == Event::Reset {
                self.earliest.add(voter_deadline(cx.config, slot));
            }
        }
    }

    /// Revoke a client: every later call fails, no event but `Revoked` (when `tell`) is
    /// addressed to it, and if a callback of its is in flight the owner is asked to fence
    /// it instead ([`Output::Fence`]), which removal then waits for.
    fn revoke<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, index: usize, tell: bool) {
        let before = self.deadlines_of(cx.config, index);
        let Some(slot) = self.registry.slot_mut(index) else {
            return;
        };
        let newly = matches!(
            slot.state,
            ClientState::Active { .. } | ClientState::Removed
        );
        let was_voting = slot.is_voting();
        if newly {
            warn!("device {} revokes client {}", cx.device.0, index);
            slot.state = ClientState::Revoked;
        }
        slot.mailbox.clear();
        let fence = (slot.callback.is_some() || slot.ops > 0)
            && !slot.fence_requested
            && !planted!(NoFenceForStuckCallback);
        if fence {
            slot.fence_requested = true;
            let client = Registry::<C>::handle(cx.device, index, slot);
            cx.out.push(Output::Fence { client });
        }
        if was_voting {
            self.voter_left(true);
        }
        self.slot_changed(cx.config, index, before);
        if newly && tell && !fence {
            self.notify(cx, index, Event::Revoked);
        }
    }

    /// Tell every active client `event`.
    fn notify_active<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, event: Event) {
        for index in self.registry.occupied() {
            if self.registry.slot(index).is_some_and(Slot::is_active) {
                self.notify(cx, index, event);
            }
        }
    }

    /// Set every active client's role (and, after a completed reset, mark it stale).
    fn set_roles(&mut self, role: Role, interface_stale: bool) {
        for index in self.registry.occupied() {
            let Some(slot) = self.registry.slots.get_mut(index) else {
                continue;
            };
            if let ClientState::Active { role: r, fresh, .. } = &mut slot.state {
                if *r == Role::Voting || role == Role::Voting {
                    // A voter's answer deadline goes (or comes).
                    self.earliest.invalidate();
                }
                *r = role;
                if interface_stale {
                    *fresh = false;
                }
            }
        }
    }

    fn free_slot<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, index: usize) {
        let before = self.deadlines_of(cx.config, index);
        if let Some(slot) = self.registry.slot_mut(index) {
            let client = Registry::<C>::handle(cx.device, index, slot);
            slot.free();
            self.registry.mark(index, false);
            cx.out.push(Output::ClientGone { client });
        }
        self.slot_changed(cx.config, index, before);
    }

    // ---- device lifecycle ----------------------------------------------------------

    #[inline(never)]
    fn add<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) -> Result<(), Error> {
        if cx.unloading {
            return Err(Error::Unloading);
        }
        self.set_phase(cx, Phase::Added);
        Ok(())
    }

    #[inline(never)]
    fn configure_port(&mut self, port: PhysPort, caps: PortCaps) -> Result<(), Error> {
        let slot = self
            .ports
            .get_mut(usize::from(port.0))
            .ok_or(Error::NoSuchPort)?;
        if slot.caps.is_some() {
            return Err(Error::PortAlreadyConfigured);
        }
        slot.caps = Some(caps);
        Ok(())
    }

    #[inline(never)]
    fn start<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        self.set_phase(
            cx,
            Phase::Starting {
                token,
                fatal: false,
            },
        );
        cx.hardware(HardwareCommand::Start);
        Ok(())
    }

    #[inline(never)]
    fn start_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        result: StartResult,
    ) -> Result<(), Error> {
        let claimed = match result {
            StartResult::FailedBeforeResources => Resources::None,
            StartResult::Started | StartResult::FailedAfterResources => Resources::Held,
        };
        match self.phase {
            Phase::Starting { token, fatal } => {
                let (status, teardown) = match result {
                    StartResult::Started => (Status::Success, Teardown::ShutdownAndRelease),
                    _ => (Status::HardwareFailed, Teardown::of(claimed)),
                };
                cx.complete(token, status);
                if cx.unloading {
                    answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedByRemove);
                    return self.begin_removal(cx, None, teardown, None, false);
                }
                if result == StartResult::Started {
                    self.set_phase(cx, Phase::Running);
                    let epoch = self.epoch;
                    self.notify_active(cx, Event::DeviceStarted { epoch });
                    if fatal {
                        // Rule: a fatal error during start is served as soon as it runs.
                        self.serve_deferred_fatal(cx);
                    }
                } else {
                    self.fail(cx, claimed, FailureCause::StartFailed);
                    self.notify_active(cx, Event::DeviceFatal);
                    answer_deferred_fatal(cx, fatal, CycleOutcome::HardwareFailed);
                }
                Ok(())
            }
            Phase::SurpriseRemoved {
                in_flight: Some(HwOp::Start),
                ..
            } => {
                self.set_phase(
                    cx,
                    Phase::SurpriseRemoved {
                        resources: claimed,
                        in_flight: None,
                    },
                );
                Ok(())
            }
            Phase::Removing {
                token,
                deadline,
                in_flight: Some(HwOp::Start),
                ..
            } => {
                // Only a surprise removal leaves a start in flight during removal.
                self.set_phase(
                    cx,
                    Phase::Removing {
                        token,
                        deadline,
                        teardown: Teardown::of(claimed),
                        in_flight: None,
                    },
                );
                self.try_finish_removal(cx);
                Ok(())
            }
            _ => Err(Error::NoHardwareCommandInFlight),
        }
    }

    fn query_stop<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        let low_power = match self.phase {
            Phase::Running => None,
            // Rule (Power): query stop in a low-power state is answered as in D0; a reset
            // waiting for the power-up vetoes it as a running cycle would.
            Phase::LowPower { reset: true, .. } => {
                return Err(Error::Vetoed(VetoReason::ResetInProgress))
            }
            Phase::LowPower { kind, reset: false } => Some(kind),
            _ => return Err(self.refuse(InputKind::QueryStop)),
        };
        // Rule: a client that cannot pause vetoes query stop, naming why.
        if self.registry.any_cannot_pause() {
            return Err(Error::Vetoed(VetoReason::ClientCannotPause));
        }
        self.set_phase(
            cx,
            Phase::StopPending {
                fatal: false,
                low_power,
            },
        );
        cx.complete(token, Status::Success);
        Ok(())
    }

    fn cancel_stop<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        let Phase::StopPending { fatal, low_power } = self.phase else {
            return Err(self.refuse(InputKind::CancelStop));
        };
        if let Some(kind) = low_power {
            // Rule (Power): cancel stop returns to the low-power state it came from.
            self.set_phase(cx, Phase::LowPower { kind, reset: false });
            cx.complete(token, Status::Success);
            return Ok(());
        }
        self.set_phase(cx, Phase::Running);
        cx.complete(token, Status::Success);
        if fatal {
            self.serve_deferred_fatal(cx);
        }
        Ok(())
    }

    #[inline(never)]
    fn stop<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        let Phase::StopPending { fatal, low_power } = self.phase else {
            return Err(self.refuse(InputKind::Stop));
        };
        self.notify_active(cx, Event::DeviceStopped);
        if low_power.is_some() {
            // Rule (Power, I14): stopped from a low-power state: no operation can be in
            // flight (drained at the power-down) and no register is touched; the
            // resources are released and a restart powers the device up.
            self.set_phase(cx, Phase::Stopped);
            if !planted!(StopKeepsResources) {
                cx.hardware(HardwareCommand::ReleaseResources);
            }
            cx.complete(token, Status::Success);
            if cx.unloading {
                let _ = self.begin_removal(cx, None, Teardown::Nothing, None, false);
            }
            return Ok(());
        }
        // Rule: the stop waits for hardware operations in flight (I12).
        self.set_phase(
            cx,
            Phase::Stopping {
                token,
                since: cx.now,
                fatal,
            },
        );
        self.finish_stop_if_drained(cx);
        Ok(())
    }

    /// Shut the hardware down and release it once no operation is in flight.
    fn finish_stop_if_drained<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        let Phase::Stopping { token, fatal, .. } = self.phase else {
            return;
        };
        if self.registry.ops_in_flight() && !planted!(StopWhileOperationInFlight) {
            return;
        }
        answer_deferred_fatal(cx, fatal, CycleOutcome::FoldedIntoStop);
        self.set_phase(cx, Phase::Stopped);
        cx.hardware(HardwareCommand::Shutdown);
        if !planted!(StopKeepsResources) {
            cx.hardware(HardwareCommand::ReleaseResources);
        }
        cx.complete(token, Status::Success);
        if cx.unloading {
            // Unload waited for the stop: now it removes (nothing left to undo).
            let _ = self.begin_removal(cx, None, Teardown::Nothing, None, false);
        }
    }

    #[inline(never)]
    fn query_remove<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        let prior = match self.phase {
            Phase::Added => Prior::Added,
            Phase::Running => Prior::Running,
            Phase::Stopped => Prior::Stopped,
            Phase::Failed { resources, cause } => Prior::Failed(resources, cause),
            // Rule (Power): query remove in a low-power state is answered as in D0; a reset
            // waiting for the power-up vetoes it as a running cycle would.
            Phase::LowPower { reset: true, .. } => {
                return Err(Error::Vetoed(VetoReason::ResetInProgress))
            }
            Phase::LowPower { kind, reset: false } => Prior::LowPower(kind),
            _ => return Err(self.refuse(InputKind::QueryRemove)),
        };
        if self.registry.any_holding() && !planted!(QueryRemoveIgnoresHold) {
            return Err(Error::Vetoed(VetoReason::ClientHoldsDevice));
        }
        self.set_phase(
            cx,
            Phase::RemovePending {
                prior,
                fatal: false,
            },
        );
        cx.complete(token, Status::Success);
        Ok(())
    }

    #[inline(never)]
    fn cancel_remove<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        let Phase::RemovePending { prior, fatal } = self.phase else {
            return Err(self.refuse(InputKind::CancelRemove));
        };
        self.set_phase(
            cx,
            match prior {
                Prior::Added => Phase::Added,
                Prior::Running => Phase::Running,
                Prior::Stopped => Phase::Stopped,
                Prior::Failed(resources, cause) => Phase::Failed { resources, cause },
                Prior::LowPower(kind) => Phase::LowPower { kind, reset: false },
            },
        );
        cx.complete(token, Status::Success);
        if fatal {
            self.serve_deferred_fatal(cx);
        }
        Ok(())
    }

    /// An explicit remove (`token` given) or the removal that driver unload implies.
    #[inline(never)]
    pub(crate) fn remove<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: Option<RequestToken>,
    ) -> Result<(), Error> {
        let teardown = match self.phase {
            Phase::Added | Phase::Stopped => Teardown::Nothing,
            Phase::Running => Teardown::ShutdownAndRelease,
            Phase::StopPending { fatal, low_power } => {
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedByRemove);
                match low_power {
                    // Rule (Power, I14): from a low-power state, no register is touched.
                    Some(_) => Teardown::Release,
                    None => Teardown::ShutdownAndRelease,
                }
            }
            Phase::Quiescing { .. } => {
                self.set_roles(Role::Idle, false);
                cx.cycle_finished(CycleOutcome::AbortedByRemove);
                Teardown::ShutdownAndRelease
            }
            Phase::RemovePending { prior, fatal } => {
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedByRemove);
                match prior {
                    Prior::Added | Prior::Stopped => Teardown::Nothing,
                    Prior::Running => Teardown::ShutdownAndRelease,
                    Prior::Failed(resources, _) => Teardown::of(resources),
                    // Rule (Power, I14): remove from Dx releases without powering up.
                    Prior::LowPower(_) => self.low_power_teardown(),
                }
            }
            Phase::Failed { resources, .. } => Teardown::of(resources),
            Phase::PoweringDown { .. } | Phase::LowPower { .. } | Phase::PoweringUp { .. } => {
                return self.remove_in_power_transition(cx, token);
            }
            Phase::SurpriseRemoved {
                resources,
                in_flight,
            } => {
                return self.begin_removal(cx, token, Teardown::of(resources), in_flight, true);
            }
            // Deferred: removal begins when the hardware reset reports.
            Phase::Executing { then } => {
                let Some(token) = token else {
                    return Ok(()); // unload: `reset_done` sees `unloading`
                };
                match then {
                    AfterReset::Remove(_) => return Err(Error::RequestPending),
                    AfterReset::FollowUp => cx.cycle_finished(CycleOutcome::AbortedByRemove),
                    AfterReset::Resume => {}
                }
                self.set_phase(
                    cx,
                    Phase::Executing {
                        then: AfterReset::Remove(token),
                    },
                );
                return Ok(());
            }
            Phase::Removing {
                token: pending,
                deadline,
                teardown,
                in_flight,
            } => {
                return match (pending, token) {
                    (_, None) => Ok(()),
                    (Some(_), Some(_)) => Err(Error::RequestPending),
                    (None, Some(token)) => {
                        self.set_phase(
                            cx,
                            Phase::Removing {
                                token: Some(token),
                                deadline,
                                teardown,
                                in_flight,
                            },
                        );
                        self.try_finish_removal(cx);
                        Ok(())
                    }
                };
            }
            // Only unload gets here (the table refuses a PnP remove while starting); it
            // waits for the start to report (`start_done` sees `unloading`).
            Phase::Starting { .. } => return Ok(()),
            // Likewise a stop waiting for operations: `finish_stop_if_drained` removes.
            Phase::Stopping { .. } => return Ok(()),
            Phase::Absent => return Err(self.refuse(InputKind::Remove)),
        };
        self.begin_removal(cx, token, teardown, None, false)
    }

    #[inline(never)]
    fn surprise_removal<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) -> Result<(), Error> {
        let (resources, in_flight) = match self.phase {
            Phase::Added | Phase::Stopped => (Resources::None, None),
            Phase::Starting { token, fatal } => {
                cx.complete(token, Status::DeviceGone);
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedBySurpriseRemoval);
                (Resources::None, Some(HwOp::Start))
            }
            Phase::Running => (Resources::Held, None),
            Phase::StopPending { fatal, .. } => {
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedBySurpriseRemoval);
                (Resources::Held, None)
            }
            // Rule (Power): surprise removal in Dx touches nothing and repeats no
            // power-down step; a power command in flight must report before teardown.
            Phase::PoweringDown { .. } | Phase::LowPower { .. } | Phase::PoweringUp { .. } => {
                if planted!(HardwareCommandInDx) && matches!(self.phase, Phase::LowPower { .. }) {
                    cx.hardware(HardwareCommand::PowerDown);
                }
                self.settle_power_requests(
                    cx,
                    Status::DeviceGone,
                    CycleOutcome::AbortedBySurpriseRemoval,
                );
                (Resources::Held, self.power_command_in_flight())
            }
            Phase::Stopping { token, fatal, .. } => {
                // The hardware is gone: nothing left to shut down; the stop ends here.
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedBySurpriseRemoval);
                cx.complete(token, Status::DeviceGone);
                (Resources::Held, None)
            }
            Phase::Quiescing { .. } => {
                self.set_roles(Role::Idle, false);
                cx.cycle_finished(CycleOutcome::AbortedBySurpriseRemoval);
                (Resources::Held, None)
            }
            Phase::Executing { then } => {
                cx.cycle_finished(CycleOutcome::AbortedBySurpriseRemoval);
                self.set_roles(Role::Idle, false);
                match then {
                    AfterReset::Resume => {}
                    AfterReset::FollowUp => {
                        cx.cycle_finished(CycleOutcome::AbortedBySurpriseRemoval)
                    }
                    AfterReset::Remove(token) => {
                        return self.begin_removal(
                            cx,
                            Some(token),
                            Teardown::Release,
                            Some(HwOp::Reset),
                            true,
                        );
                    }
                }
                (Resources::Held, Some(HwOp::Reset))
            }
            Phase::RemovePending { prior, fatal } => {
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedBySurpriseRemoval);
                match prior {
                    Prior::Added | Prior::Stopped => (Resources::None, None),
                    Prior::Running => (Resources::Held, None),
                    Prior::Failed(resources, _) => (resources, None),
                    Prior::LowPower(_) => (Resources::Held, None),
                }
            }
            Phase::Failed { resources, .. } => (resources, None),
            Phase::Removing {
                token,
                deadline,
                teardown,
                in_flight,
            } => {
                // Clients were told already; only the teardown changes: no registers.
                self.set_phase(
                    cx,
                    Phase::Removing {
                        token,
                        deadline,
                        teardown: teardown.without_registers(),
                        in_flight,
                    },
                );
                return Ok(());
            }
            Phase::SurpriseRemoved { .. } | Phase::Absent => {
                return Err(self.refuse(InputKind::SurpriseRemoval))
            }
        };
        self.vanish(cx, resources, in_flight)
    }

    /// The hardware is gone (a surprise removal, or a failed power-up from Dx): every
    /// client is told `Removed`; the device waits for the remove (unload removes now).
    fn vanish<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        resources: Resources,
        in_flight: Option<HwOp>,
    ) -> Result<(), Error> {
        if cx.unloading {
            // Nobody will send a remove: unload removes.
            return self.begin_removal(cx, None, Teardown::of(resources), in_flight, true);
        }
        self.tell_removed(cx, true);
        self.set_phase(
            cx,
            Phase::SurpriseRemoved {
                resources,
                in_flight,
            },
        );
        Ok(())
    }

    /// Every active client is told `Removed` and may only detach from now on.
    fn tell_removed<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, surprise: bool) {
        for index in self.registry.occupied() {
            if self.registry.slot(index).is_some_and(Slot::is_active) {
                if let Some(slot) = self.registry.slot_mut(index) {
                    slot.state = ClientState::Removed;
                }
                // Voters' deadlines go; removal's detach deadline comes.
                self.earliest.invalidate();
                self.notify(cx, index, Event::Removed { surprise });
            }
        }
    }

    fn begin_removal<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: Option<RequestToken>,
        teardown: Teardown,
        in_flight: Option<HwOp>,
        surprise: bool,
    ) -> Result<(), Error> {
        self.tell_removed(cx, surprise);
        let teardown = if surprise {
            teardown.without_registers()
        } else {
            teardown
        };
        self.set_phase(
            cx,
            Phase::Removing {
                token,
                deadline: cx.deadline(cx.config.detach_timeout),
                teardown,
                in_flight,
            },
        );
        self.try_finish_removal(cx);
        Ok(())
    }

    /// Finish removal once every client detached, every callback came back and no
    /// hardware command is in flight.
    fn try_finish_removal<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        let Phase::Removing {
            token,
            teardown,
            in_flight: None,
            ..
        } = self.phase
        else {
            return;
        };
        if !self.registry.drained() {
            return;
        }
        for index in self.registry.occupied() {
            if self.registry.slot(index).is_some_and(Slot::occupied) {
                self.free_slot(cx, index); // revoked clients: force-detached
            }
        }
        match teardown {
            Teardown::Nothing => {}
            Teardown::Release => cx.hardware(HardwareCommand::ReleaseResources),
            Teardown::ShutdownAndRelease => {
                cx.hardware(HardwareCommand::Shutdown);
                cx.hardware(HardwareCommand::ReleaseResources);
            }
        }
        if let Some(token) = token {
            cx.complete(token, Status::Success);
        }
        cx.out.push(Output::DeviceRemoved { device: cx.device });
        self.set_phase(cx, Phase::Absent);
        self.ports = [Port::UNCONFIGURED; P];
    }

    // ---- fatal errors -------------------------------------------------------------

    /// A catastrophic-error interrupt: a reset request from the driver itself, never lost.
    #[inline(never)]
    fn fatal_error<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) -> Result<FatalAnswer, Error> {
        match self.phase {
            // Rule: served by a cycle as soon as the state allows.
            Phase::Running | Phase::Quiescing { .. } => match self.request_reset(cx) {
                Ok(answer) => Ok(FatalAnswer::Served(answer)),
                Err(_) => {
                    // Only an exhausted epoch refuses here: nothing can reset it.
                    self.fail_exhausted(cx);
                    Ok(FatalAnswer::DeviceFailed)
                }
            },
            // Rule: folded into the removal under way.
            Phase::Executing {
                then: AfterReset::Remove(_),
            } => Ok(FatalAnswer::FoldedIntoRemoval),
            Phase::Executing { .. } if cx.unloading => Ok(FatalAnswer::FoldedIntoRemoval),
            Phase::Executing { .. } => match self.request_reset(cx) {
                Ok(answer) => Ok(FatalAnswer::Served(answer)),
                // No follow-up fits in the epoch: the reset in flight serves it.
                Err(_) => Ok(FatalAnswer::Served(ResetAnswer::Joined)),
            },
            // Rule: a pending start, stop or remove defers it; its end answers it.
            Phase::Starting { ref mut fatal, .. }
            | Phase::StopPending {
                ref mut fatal,
                low_power: None,
            }
            | Phase::Stopping { ref mut fatal, .. }
            | Phase::RemovePending {
                prior: Prior::Running,
                ref mut fatal,
            } => {
                *fatal = !planted!(LoseDeferredFatal);
                Ok(FatalAnswer::Deferred)
            }
            // Rule (Power): during a power transition a cycle serves it after the power-up
            // (an idle power-down is ended for it).
            Phase::PoweringDown { .. } | Phase::PoweringUp { .. } => {
                self.reset_after_power_up(cx);
                Ok(FatalAnswer::Served(ResetAnswer::AfterPowerUp))
            }
            // Rule: where the hardware is not live, answered with a named reason.
            Phase::LowPower { .. } | Phase::StopPending { .. } => {
                Ok(FatalAnswer::HardwareNotLive(self.phase.kind()))
            }
            Phase::Added
            | Phase::Stopped
            | Phase::RemovePending { .. }
            | Phase::Failed { .. }
            | Phase::SurpriseRemoved { .. }
            | Phase::Removing { .. } => Ok(FatalAnswer::HardwareNotLive(self.phase.kind())),
            Phase::Absent => Err(self.refuse(InputKind::FatalError)),
        }
    }

    /// The device runs again after a start, cancel stop or cancel remove that held a fatal
    /// error: serve it with a cycle now.
    fn serve_deferred_fatal<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        if self.request_reset(cx).is_err() {
            self.fail_exhausted(cx);
            cx.cycle_finished(CycleOutcome::HardwareFailed);
        }
    }

    /// A fatal error no cycle can serve (the epoch is exhausted): the device fails.
    fn fail_exhausted<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        self.set_roles(Role::Idle, false);
        self.fail(cx, Resources::Held, FailureCause::EpochExhausted);
        self.notify_active(cx, Event::DeviceFatal);
    }

    // ---- the reset cycle -----------------------------------------------------------

    fn request_reset<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) -> Result<ResetAnswer, Error> {
        match self.phase {
            Phase::Running => {
                if self.epoch.0 == u32::MAX {
                    return Err(Error::EpochExhausted);
                }
                self.begin_cycle(cx);
                Ok(ResetAnswer::Started)
            }
            Phase::Quiescing { .. } => Ok(ResetAnswer::Joined),
            Phase::Executing { then } => {
                if cx.unloading {
                    return Err(Error::Unloading);
                }
                match then {
                    AfterReset::Remove(_) => Err(Error::RemoveInProgress),
                    AfterReset::FollowUp => Ok(ResetAnswer::Scheduled),
                    AfterReset::Resume => {
                        // This cycle ends at epoch + 1; the follow-up needs epoch + 2.
                        if self.epoch.0 >= u32::MAX - 1 {
                            return Err(Error::EpochExhausted);
                        }
                        self.set_phase(
                            cx,
                            Phase::Executing {
                                then: AfterReset::FollowUp,
                            },
                        );
                        Ok(ResetAnswer::Scheduled)
                    }
                }
            }
            // Rule (Power): a reset requested in Dx is served after the power-up.
            Phase::PoweringDown { .. } | Phase::LowPower { .. } | Phase::PoweringUp { .. } => {
                if self.epoch.0 == u32::MAX {
                    return Err(Error::EpochExhausted);
                }
                if cx.unloading {
                    return Err(Error::Unloading);
                }
                self.reset_after_power_up(cx);
                Ok(ResetAnswer::AfterPowerUp)
            }
            _ => Err(self.refuse(InputKind::ResetRequest)),
        }
    }

    /// Tell every client `RESET`; with no voter the hardware reset follows at once.
    fn begin_cycle<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        // One pass: every active client votes and is told `RESET` (as `set_roles` then
        // `notify_active` would: telling a client reads no role).
        let mut voters = 0usize;
        for index in self.registry.occupied() {
            let Some(slot) = self.registry.slots.get_mut(index) else {
                continue;
            };
            if let ClientState::Active { role, .. } = &mut slot.state {
                *role = Role::Voting;
                // Its answer deadline begins when this cycle's RESET is delivered.
                slot.reset_delivered = None;
                voters += 1;
                self.notify(cx, index, Event::Reset);
            }
        }
        self.set_phase(
            cx,
            Phase::Quiescing {
                since: cx.now,
                voters: u16::try_from(voters).unwrap_or(u16::MAX),
                // With no voter nobody can say it recovers: the reset runs.
                reset_needed: voters == 0,
                draining: None,
            },
        );
        self.execute_if_quiesced(cx);
    }

    /// A voter answered, left or was revoked. Only a `CanRecover` answer leaves the
    /// reset unneeded: a voter that answered `ResetExecute`, left or was revoked without
    /// saying it can recover makes the reset run.
    fn voter_left(&mut self, needs_reset: bool) {
        if let Phase::Quiescing {
            voters,
            reset_needed,
            ..
        } = &mut self.phase
        {
            *voters = voters.saturating_sub(1);
            *reset_needed |= needs_reset;
        }
    }

    /// Once every voter answered, left or was revoked: end the cycle without a reset if
    /// every voter could recover; otherwise, once no hardware operation is in flight (or
    /// every one is fenced), command the hardware reset.
    #[inline]
    fn execute_if_quiesced<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        if let Phase::Quiescing { voters, .. } = self.phase {
            if voters == 0 || (planted!(ResetWithOneVoterLeft) && voters == 1) {
                self.execute_quiesced(cx);
            }
        }
    }

    /// Every voter answered (see `execute_if_quiesced`): end the cycle or reset.
    #[inline(never)]
    fn execute_quiesced<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        let Phase::Quiescing {
            since,
            voters,
            reset_needed,
            draining,
        } = self.phase
        else {
            return;
        };
        if !reset_needed {
            // Rule: every voter can recover: the cycle ends without a reset, same epoch.
            self.set_roles(Role::Idle, false);
            let epoch = self.epoch;
            self.set_phase(cx, Phase::Running);
            self.notify_active(cx, Event::Recovered { epoch });
            cx.cycle_finished(CycleOutcome::Recovered(epoch));
            self.sleep_if_deferred(cx);
            return;
        }
        // Rule: no hardware reset while an operation is in flight (I12).
        if self.registry.ops_in_flight() && !planted!(ResetBeforeFence) {
            if draining.is_none() {
                self.set_phase(
                    cx,
                    Phase::Quiescing {
                        since,
                        voters,
                        reset_needed,
                        draining: Some(cx.now),
                    },
                );
            }
            return;
        }
        self.set_phase(
            cx,
            Phase::Executing {
                then: AfterReset::Resume,
            },
        );
        cx.hardware(HardwareCommand::Reset);
    }

    /// A voter answers `RESET`: `needs_reset` for `ResetExecute`, not for `CanRecover`.
    /// Inlined (with `callback_done` and `acquire`) into `dispatch`, so into
    /// `Lifecycle::handle`: these are the inputs a reset cycle is made of, N each.
    #[inline(always)]
    fn answer_reset<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
        needs_reset: bool,
    ) -> Result<(), Error> {
        let index = self.registry.active(client)?;
        let slot = self.registry.slot_mut(index).ok_or(Error::UnknownClient)?;
        if !slot.is_voting() {
            return Err(Error::NotVoting);
        }
        if slot.mailbox.holds_reset() {
            return Err(Error::ResetNotDelivered);
        }
        self.earliest.remove(voter_deadline(cx.config, slot));
        if let ClientState::Active { role, .. } = &mut slot.state {
            *role = Role::Acked;
        }
        self.voter_left(needs_reset);
        self.execute_if_quiesced(cx);
        Ok(())
    }

    #[inline(never)]
    fn reset_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        result: ResetResult,
    ) -> Result<(), Error> {
        let then = match self.phase {
            Phase::Executing { then } => then,
            Phase::SurpriseRemoved {
                resources,
                in_flight: Some(HwOp::Reset),
            } => {
                self.set_phase(
                    cx,
                    Phase::SurpriseRemoved {
                        resources,
                        in_flight: None,
                    },
                );
                return Ok(());
            }
            Phase::Removing {
                token,
                deadline,
                teardown,
                in_flight: Some(HwOp::Reset),
            } => {
                self.set_phase(
                    cx,
                    Phase::Removing {
                        token,
                        deadline,
                        teardown,
                        in_flight: None,
                    },
                );
                self.try_finish_removal(cx);
                return Ok(());
            }
            _ => return Err(Error::NoHardwareCommandInFlight),
        };
        let succeeded = result == ResetResult::Succeeded;
        if succeeded {
            // `request_reset` refused any cycle that would overflow the epoch.
            self.epoch = Epoch(self.epoch.0.saturating_add(1));
        }
        self.set_roles(Role::Idle, succeeded);
        let removal = match then {
            AfterReset::Remove(token) => Some(Some(token)),
            _ if cx.unloading => Some(None),
            _ => None,
        };
        if let Some(token) = removal {
            let outcome = if succeeded {
                CycleOutcome::AbortedByRemove
            } else {
                CycleOutcome::HardwareFailed
            };
            cx.cycle_finished(outcome);
            if then == AfterReset::FollowUp {
                cx.cycle_finished(CycleOutcome::AbortedByRemove);
            }
            let teardown = if succeeded {
                Teardown::ShutdownAndRelease
            } else {
                Teardown::Release
            };
            return self.begin_removal(cx, token, teardown, None, false);
        }
        if !succeeded {
            self.fail(cx, Resources::Held, FailureCause::ResetFailed);
            self.notify_active(cx, Event::DeviceFatal);
            cx.cycle_finished(CycleOutcome::HardwareFailed);
            if then == AfterReset::FollowUp {
                cx.cycle_finished(CycleOutcome::HardwareFailed);
            }
            return Ok(());
        }
        let epoch = self.epoch;
        self.notify_active(cx, Event::ResetEnd { epoch });
        cx.cycle_finished(CycleOutcome::Completed(epoch));
        self.set_phase(cx, Phase::Running);
        if then == AfterReset::FollowUp {
            self.begin_cycle(cx);
        }
        self.sleep_if_deferred(cx);
        Ok(())
    }

    // ---- clients ---------------------------------------------------------------------

    #[inline(never)]
    fn register<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        kind: ClientKind,
    ) -> Result<Reply, Error> {
        if cx.unloading {
            return Err(Error::Unloading);
        }
        let role = match self.phase {
            Phase::Executing {
                then: AfterReset::Remove(_),
            } => return Err(Error::RemoveInProgress),
            Phase::Quiescing { .. } | Phase::Executing { .. } => Role::Joined,
            _ => Role::Idle,
        };
        let index = self.registry.free_slot().ok_or(Error::RegistryFull)?;
        let slot = self.registry.slot_mut(index).ok_or(Error::RegistryFull)?;
        *slot = Slot {
            generation: slot.generation,
            state: ClientState::Active {
                role,
                fresh: true,
                holding: false,
                cannot_pause: false,
            },
            kind,
            ..Slot::FREE
        };
        let client = Registry::<C>::handle(cx.device, index, slot);
        self.registry.mark(index, true);
        Ok(Reply::Registered {
            client,
            epoch: self.epoch,
        })
    }

    #[inline(never)]
    fn unregister<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
    ) -> Result<Unregistered, Error> {
        let index = match self.registry.lookup(client)? {
            Lookup::Past => return Ok(Unregistered::Already),
            Lookup::Current(index) => index,
        };
        let slot = self.registry.slot_mut(index).ok_or(Error::UnknownClient)?;
        if slot.state == ClientState::Unregistered {
            return Ok(Unregistered::Already);
        }
        let was_voting = slot.is_voting();
        let before = slot_deadlines(cx.config, slot);
        // Rule: after unregister returns, nothing more is addressed to the client.
        if !planted!(NotifyAfterUnregister) {
            slot.mailbox.clear();
        }
        if slot.in_flight() {
            slot.state = ClientState::Unregistered;
            self.slot_changed(cx.config, index, before);
        } else {
            self.free_slot(cx, index);
        }
        if was_voting {
            self.voter_left(true);
        }
        self.progress(cx);
        Ok(Unregistered::Now)
    }

    /// Inlined: see `answer_reset`.
    #[inline(always)]
    fn callback_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
    ) -> Result<(), Error> {
        let index = self.registry.current(client)?;
        let slot = self.registry.slot_mut(index).ok_or(Error::UnknownClient)?;
        if slot.fence_requested {
            // Rule: once a fence is asked for, only the fence ends the wait.
            return Ok(());
        }
        if slot.callback.is_none() {
            return Err(Error::NoCallbackInFlight);
        }
        self.earliest.remove(callback_deadline(cx.config, slot));
        slot.callback = None;
        let deliver_anyway = planted!(NotifyAfterUnregister) && !slot.mailbox.is_empty();
        if slot.state == ClientState::Unregistered && !deliver_anyway {
            if !slot.in_flight() {
                self.free_slot(cx, index);
            }
        } else if !slot.mailbox.is_empty() {
            // Nothing waiting (the usual case) needs no delivery.
            self.deliver_next(cx, index);
        }
        self.progress(cx);
        Ok(())
    }

    #[inline(never)]
    fn fence_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
    ) -> Result<(), Error> {
        let index = self.registry.current(client)?;
        let slot = self.registry.slot_mut(index).ok_or(Error::UnknownClient)?;
        if !slot.fence_requested {
            return Err(Error::NoFenceRequested);
        }
        let before = slot_deadlines(cx.config, slot);
        slot.fence_requested = false;
        slot.callback = None;
        slot.ops = 0;
        self.slot_changed(cx.config, index, before);
        let Some(slot) = self.registry.slots.get(index) else {
            return Err(Error::UnknownClient);
        };
        if slot.state == ClientState::Unregistered {
            self.free_slot(cx, index);
        }
        self.progress(cx);
        Ok(())
    }

    /// Inlined: see `answer_reset`.
    #[inline(always)]
    fn acquire(&mut self, client: ClientHandle) -> Result<Epoch, Error> {
        let index = self.registry.active(client)?;
        if let Some(ClientState::Active { fresh, .. }) =
            self.registry.slot_mut(index).map(|s| &mut s.state)
        {
            *fresh = true;
        }
        Ok(self.epoch)
    }

    #[inline(never)]
    fn bind(&mut self, client: ClientHandle, ports: PortSet) -> Result<(), Error> {
        let index = self.registry.active(client)?;
        if ports.is_empty() {
            return Err(Error::EmptyBinding);
        }
        let mut first: Option<Protocol> = None;
        for port in ports.iter() {
            let caps = self
                .ports
                .get(usize::from(port.0))
                .and_then(|p| p.caps)
                .ok_or(Error::NoSuchPort)?;
            match first {
                None => first = Some(caps.protocol),
                Some(first) if first != caps.protocol => {
                    return Err(Error::MixedProtocols {
                        first,
                        other: caps.protocol,
                    })
                }
                Some(_) => {}
            }
        }
        if let Some(slot) = self.registry.slot_mut(index) {
            slot.ports = ports;
        }
        Ok(())
    }

    /// Raise or lower one of a client's vetoes: holding the device (vetoes query remove)
    /// or not being able to pause (vetoes query stop). Setting it twice is the client's
    /// error, named for the veto.
    #[inline(never)]
    fn set_veto(&mut self, client: ClientHandle, veto: ClientVeto, on: bool) -> Result<(), Error> {
        let index = self.registry.active(client)?;
        if let Some(ClientState::Active {
            holding,
            cannot_pause,
            ..
        }) = self.registry.slot_mut(index).map(|s| &mut s.state)
        {
            let (flag, already, not) = match veto {
                ClientVeto::Hold => (holding, Error::AlreadyHolding, Error::NotHolding),
                ClientVeto::CannotPause => (
                    cannot_pause,
                    Error::AlreadyCannotPause,
                    Error::NotCannotPause,
                ),
            };
            match (*flag, on) {
                (true, true) => return Err(already),
                (false, false) => return Err(not),
                _ => *flag = on,
            }
        }
        Ok(())
    }

    #[inline(never)]
    fn access<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
        epoch: Epoch,
        what: Access,
    ) -> Result<Reply, Error> {
        let index = self.registry.active(client)?;
        let Some(ClientState::Active { role, fresh, .. }) =
            self.registry.slot(index).map(|s| s.state)
        else {
            return Err(Error::ClientDetaching);
        };
        if epoch != self.epoch || !fresh {
            return Err(Error::StaleEpoch {
                current: self.epoch,
            });
        }
        match (self.phase, role) {
            (Phase::Running, _) | (Phase::Quiescing { .. }, Role::Voting) => {}
            (Phase::Quiescing { .. }, _) => return Err(Error::ResetInProgress),
            // Rule (Power, I14): no access is granted in a low-power state: after an idle
            // power-down it brings the device back first, in system sleep it is refused.
            (Phase::LowPower { .. } | Phase::PoweringDown { .. } | Phase::PoweringUp { .. }, _)
                if !planted!(OperationGrantedInDx) =>
            {
                return self.access_while_powered_down(cx);
            }
            (Phase::LowPower { .. }, _) => {}
            _ => return Err(self.refuse(InputKind::Access)),
        }
        match what {
            Access::QueryCounters(port) => {
                self.ports
                    .get(usize::from(port.0))
                    .and_then(|p| p.caps)
                    .ok_or(Error::NoSuchPort)?;
            }
            // Rule: a hardware operation is bracketed: in flight until `AccessDone`.
            Access::HardwareOp => {
                let slot = self.registry.slot_mut(index).ok_or(Error::UnknownClient)?;
                if slot.ops >= OPS_PER_CLIENT {
                    return Err(Error::TooManyOperations);
                }
                slot.ops += 1;
                self.operations_changed();
            }
        }
        Ok(Reply::AccessGranted)
    }

    #[inline(never)]
    fn access_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
    ) -> Result<(), Error> {
        let index = self.registry.current(client)?;
        let slot = self.registry.slot_mut(index).ok_or(Error::UnknownClient)?;
        if slot.fence_requested {
            // Rule: once a fence is asked for, only the fence ends the wait.
            return Ok(());
        }
        if slot.ops == 0 {
            return Err(Error::NoOperationInFlight);
        }
        slot.ops -= 1;
        let free = slot.state == ClientState::Unregistered && !slot.in_flight();
        self.operations_changed();
        if free {
            self.free_slot(cx, index);
        }
        self.progress(cx);
        Ok(())
    }

    /// Something in flight finished or was fenced: a stop, a reset or a removal that
    /// waited for it may go on.
    fn progress<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        match self.phase {
            Phase::Stopping { .. } => self.finish_stop_if_drained(cx),
            Phase::Quiescing { .. } => self.execute_if_quiesced(cx),
            Phase::Removing { .. } => self.try_finish_removal(cx),
            Phase::PoweringDown { .. } => self.power_down_if_drained(cx),
            _ => {}
        }
    }

    /// The capabilities of a client's binding.
    pub(crate) fn binding_caps(&self, client: ClientHandle) -> Result<BindingCaps, Error> {
        let index = self.registry.active(client)?;
        let ports = self
            .registry
            .slot(index)
            .map_or(PortSet::EMPTY, |s| s.ports);
        let mut caps: Option<BindingCaps> = None;
        for port in ports.iter() {
            let Some(pc) = self.ports.get(usize::from(port.0)).and_then(|p| p.caps) else {
                continue;
            };
            caps = Some(match caps {
                None => BindingCaps {
                    protocol: pc.protocol,
                    ports: PortSet::single(port),
                    max_mtu: pc.max_mtu,
                    atomics: pc.atomics,
                },
                Some(c) => BindingCaps {
                    protocol: c.protocol,
                    ports: c.ports.with(port),
                    max_mtu: c.max_mtu.min(pc.max_mtu),
                    atomics: c.atomics && pc.atomics,
                },
            });
        }
        caps.ok_or(Error::NotBound)
    }

    // ---- links -------------------------------------------------------------------------

    #[inline(never)]
    fn link_changed<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        port: PhysPort,
        state: LinkState,
    ) -> Result<(), Error> {
        let entry = self
            .ports
            .get_mut(usize::from(port.0))
            .filter(|p| p.caps.is_some())
            .ok_or(Error::NoSuchPort)?;
        if entry.link == state {
            return Ok(());
        }
        entry.link = state;
        // Rule (I4): after `DeviceFatal` only `Removed` or `Revoked` follow (a failed
        // device, or one whose remove is pending from failed).
        if self.failure().is_some() {
            return Ok(());
        }
        for index in self.registry.occupied() {
            let bound = self
                .registry
                .slot(index)
                .is_some_and(|s| s.is_active() && s.ports.contains(port));
            if bound {
                self.notify(cx, index, Event::LinkChanged { port, state });
            }
        }
        Ok(())
    }
}

/// A veto a client can raise against a PnP query.
#[derive(Clone, Copy)]
enum ClientVeto {
    /// An open handle: vetoes query remove.
    Hold,
    /// Work that cannot pause: vetoes query stop.
    CannotPause,
}

/// Answer a fatal error that a pending start, stop or removal held (if one did).
fn answer_deferred_fatal<const Q: usize>(cx: &mut Ctx<'_, Q>, fatal: bool, outcome: CycleOutcome) {
    if fatal {
        cx.cycle_finished(outcome);
    }
}
