//! One device: its lifecycle phase, ports, epoch and client registry, and the dispatch of
//! each input to the family of handlers it belongs to: `pnp` (add, start, stop and the
//! queries), `removal`, `reset` (fatal errors and the reset cycle), `clients`, `links`,
//! `power`; `phase` holds the phases, `deadlines` every deadline.
//!
//! Handlers check everything first and change state only once nothing can fail, so a
//! refused input leaves the device exactly as it was (I10).

use crate::queue::OutputQueue;
use crate::registry::{ClientState, Lookup, Registry, Role, Slot, OPS_PER_CLIENT};
use crate::table::{InputKind, PhaseKind};
use crate::types::*;

mod clients;
mod deadlines;
pub(crate) mod fast;
pub(crate) mod group;
mod links;
mod phase;
mod pnp;
mod power;
mod removal;
mod reset;

use clients::ClientVeto;
use deadlines::{
    ack_timeout, callback_deadline, callback_due, due, slot_deadlines, voter_deadline, voter_due,
    Earliest,
};
pub use phase::{AfterReset, HwOp, Phase, Port, Prior, QueryPending, Resources, Teardown};

/// What a handler needs from the driver around it.
pub(crate) struct Ctx<'a, const Q: usize> {
    pub(crate) device: DeviceId,
    pub(crate) now: Tick,
    pub(crate) config: &'a Config,
    pub(crate) unloading: bool,
    pub(crate) out: &'a mut OutputQueue<Q>,
    /// Reset groups: another member of the device's group cannot take part (which, and
    /// why), so a cycle this input would begin ends at once, telling nobody `RESET` (a
    /// client whose callback is stuck collects no `RESET`/`Recovered` pairs). `None` for a
    /// device in no group.
    pub(crate) group_blocker: Option<(DeviceId, CannotResetReason)>,
}

impl<'a, const Q: usize> Ctx<'a, Q> {
    /// The context of one device input, once the queue has room for the `needed` outputs
    /// its worst case produces (I10: else it is refused and nothing changes). Every entry
    /// of a device input (the machine's fast and slow paths, a group member's) builds its
    /// context here.
    #[inline(always)]
    pub(crate) fn for_input(
        out: &'a mut OutputQueue<Q>,
        needed: usize,
        config: &'a Config,
        device: DeviceId,
        now: Tick,
        unloading: bool,
        group_blocker: Option<(DeviceId, CannotResetReason)>,
    ) -> Result<Self, Error> {
        out.room_for(needed)?;
        Ok(Ctx {
            device,
            now,
            config,
            unloading,
            out,
            group_blocker,
        })
    }

    /// Command the hardware.
    fn hardware(&mut self, command: HardwareCommand) {
        debug!("device {} hardware {}", self.device.0, command);
        self.out.push(Output::Hardware {
            device: self.device,
            command,
        });
    }

    /// Complete a PnP request (exactly once per accepted token, I5).
    fn complete(&mut self, token: RequestToken, status: Status) {
        self.out.push(Output::Complete {
            device: self.device,
            token,
            status,
        });
    }

    /// Report the end of a reset cycle (one per cycle owed, I8).
    fn cycle_finished(&mut self, outcome: CycleOutcome) {
        debug!("device {} cycle finished {}", self.device.0, outcome);
        self.out.push(Output::ResetCycleFinished {
            device: self.device,
            outcome,
        });
    }

    /// The deadline `after` ticks from now (`None`: beyond the clock's range).
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
    /// The owner runs a fast path ([`crate::Lifecycle::with_fast_path`]): the machine
    /// opens and closes its clients' gates (see `fast`).
    pub(crate) fast_path: bool,
    /// The device entered running during the input under way: its gates open at its end.
    pub(crate) gates_to_open: bool,
    /// Its reset group and its part in the group's cycle (see `group`).
    pub(crate) group: group::Member,
    /// The front end's row for this device ([`crate::table::FRONT`]): its phase's kind,
    /// or [`crate::table::SLOW_ROW`] while it is in a reset group or the driver unloads.
    /// `set_phase` writes the kind (an input on the fast path never joins a group nor
    /// begins unload); the machine rewrites every row after any other input.
    pub(crate) front: u8,
}

impl<const C: usize, const P: usize> Device<C, P> {
    /// An absent device with no client.
    pub(crate) const fn new() -> Self {
        Device {
            phase: Phase::Absent,
            epoch: Epoch(0),
            ports: [Port::UNCONFIGURED; P],
            registry: Registry::new(),
            sleep_after_cycle: None,
            earliest: Earliest::NONE,
            fast_path: false,
            gates_to_open: false,
            group: group::Member::NONE,
            front: PhaseKind::Absent as u8,
        }
    }

    /// The front end's row that follows from the device's phase and group, and whether
    /// the driver is `unloading` (or unloaded) (see [`Device::front`]).
    pub(crate) fn front_row(&self, unloading: bool) -> u8 {
        if unloading || self.group.group.is_some() {
            crate::table::SLOW_ROW
        } else {
            self.phase.kind() as u8
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

    /// Every state change goes through here: it records the phase, with a trace line (and
    /// notes that the phase's own deadline may have moved). Inlined into its callers on a
    /// hosted target (a call here was a fifth of a query stop); a bare-metal build keeps
    /// one copy, its code size being the measure there (`compare/firmware`).
    #[cfg_attr(not(target_os = "none"), inline(always))]
    fn set_phase<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, phase: Phase) {
        #[cfg(any(feature = "defmt", feature = "log"))]
        if phase.kind() != self.phase.kind() {
            debug!(
                "device {} {} -> {}",
                cx.device.0,
                self.phase.kind(),
                phase.kind()
            );
        }
        // The phase's own deadline (an operations' wait, removal's detach) may change
        // (the new phase's part is known where the handler names it).
        if phase.waits() || self.phase.waits() {
            self.earliest.invalidate();
        }
        // Right on the fast path; any other input rewrites it at its end.
        self.front = phase.kind() as u8;
        if !self.fast_path {
            self.phase = phase;
            return;
        }
        // I15: leaving running closes every gate before any drain; entering it opens them
        // at the input's end.
        let was = self.phase.kind();
        self.phase = phase;
        self.gate_follows_phase(cx, was);
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
        self.end_deferred_sleep(cx);
        cx.out.push(Output::DeviceFailed {
            device: cx.device,
            cause,
        });
    }

    /// The typed refusal of `input` in the current phase (I10).
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
            Input::CallbackDoneWith { client, answer } => {
                self.callback_done_with(cx, client, answer)
            }
            Input::FenceDone { client } => accepted(self.fence_done(cx, client)),
            Input::AccessDone { client } => accepted(self.access_done(cx, client)),
            Input::CanRecover { client } => accepted(self.answer_reset(cx, client, false)),
            Input::CannotPause { client } => {
                accepted(self.set_veto(client, ClientVeto::CannotPause, true))
            }
            Input::CanPause { client } => {
                accepted(self.set_veto(client, ClientVeto::CannotPause, false))
            }
            Input::AcquireInterface { client } => {
                let epoch = self.acquire(client)?;
                if self.fast_path {
                    // I15: a gate opens only at the device's current epoch.
                    self.gate_follows_client(cx, usize::from(client.slot));
                }
                Ok(Reply::Interface(epoch))
            }
            Input::FastPathClosed { client, in_flight } => {
                accepted(self.fast_path_closed(cx, client, in_flight))
            }
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
            Input::ResetNack { client } => accepted(self.reset_nack(cx, client)),
            // Membership is the driver's (`machine/groups.rs`): never dispatched here.
            Input::JoinResetGroup { .. }
            | Input::LeaveResetGroup { .. }
            | Input::Timeout
            | Input::Unload => Err(self.refuse(input.kind())),
        };
        // I13, I9: `poll_timeout` reads the earliest deadline kept here.
        self.refresh_deadline(cx.config);
        result
    }

    /// During a power transition run for a pending query (the machine asks only in the
    /// powering phases), a client's `input` gets that query's answer: refused, named after
    /// its state, where its row refuses it.
    #[cold]
    pub(crate) fn refused_for_pending_query(&self, input: InputKind) -> Option<Error> {
        let phase = self.phase.query_pending()?.phase();
        let client_input = crate::table::PENDING_QUERY_INPUTS.contains(&input);
        (client_input
            && crate::table::disposition(phase, input) == crate::table::Disposition::Refuse)
            .then_some(Error::InvalidState { phase, input })
    }

    /// Driver unload removes the device (without a token; never refused in a present
    /// state, I11).
    pub(crate) fn unload<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        self.earliest.invalidate();
        let _ = self.remove(cx, None);
        self.refresh_deadline(cx.config);
    }
}

/// Answer a fatal error that a pending start, stop or removal held (if one did).
fn answer_deferred_fatal<const Q: usize>(cx: &mut Ctx<'_, Q>, fatal: bool, outcome: CycleOutcome) {
    if fatal {
        cx.cycle_finished(outcome);
    }
}
