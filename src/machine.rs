//! The driver-wide machine: its devices, the unload fence, time and the output queue.

use crate::device::{Ctx, Device};
use crate::queue::OutputQueue;
use crate::registry::ClientState;
use crate::table::{disposition, front_admits, Disposition, InputKind, PhaseKind};
use crate::types::*;

mod groups;
mod typed;

/// The most outputs one device input can produce with `clients` client slots, whatever the
/// clients do: two a client (a notification or a fence, then `ClientGone`; a client has at
/// most one callback in flight, so later events wait in its bounded mailbox; with the fast
/// path on, a gate's open or close takes the place of the `ClientGone`: a slot is freed
/// only once its gate is shut, and gates open only at the end of an input that left the
/// device running, so no input both opens and closes one), plus hardware commands,
/// completions, cycle results and `DeviceRemoved`. A callback's return with its answer
/// ([`Input::CallbackDoneWith`]) stays within it: the return hands its client at most that
/// client's own next event, and the answer's notifications then find the client's callback
/// in flight (its events wait in its mailbox), so no client gets more than from either
/// half alone (`tests/answer_with_return.rs` reaches two a client plus one).
#[must_use]
pub const fn outputs_per_device_input(clients: usize) -> usize {
    2 * clients + 8
}

/// The output queue capacity a machine needs: room for the worst input, a tick or an
/// unload that touches every device, plus `UnloadMayFinish`.
#[must_use]
pub const fn queue_capacity(devices: usize, clients: usize) -> usize {
    devices * outputs_per_device_input(clients) + 1
}

value_type! {
    /// Where the driver stands with respect to unload.
    pub enum DriverPhase {
        /// Loaded.
        Loaded,
        /// Unload requested: devices are being removed, registrations are refused.
        Unloading,
        /// `UnloadMayFinish` was emitted; every input is refused with [`Error::Unloaded`].
        Unloaded,
    }
}

value_type! {
    /// What the machine knows of a client.
    pub struct ClientView {
        /// Trusted or not.
        pub kind: ClientKind,
        /// Its registration state.
        pub state: ClientState,
        /// The ports it bound.
        pub ports: PortSet,
        /// Whether a callback to it is in flight (at most one is).
        pub callback_in_flight: bool,
        /// Hardware operations granted and not reported done.
        pub operations_in_flight: u8,
        /// Events waiting for that callback to return (bounded by construction).
        pub waiting_events: u8,
        /// Whether the owner was asked to fence it and has not reported it done.
        pub fence_requested: bool,
    }
}

/// The PnP lifecycle and reset machine of a driver with up to `DEVICES` devices, each with
/// up to `CLIENTS` client slots and `PORTS` physical ports, queueing up to `QUEUE` outputs
/// (at least [`queue_capacity`]`(DEVICES, CLIENTS)`, checked at compile time).
///
/// # Calling order
///
/// * Feed every input with the owner's clock: [`handle`](Self::handle)`(now, input)` (or a
///   typed method). `now` never goes backwards; every deadline counts from the `now` of the
///   input that started it.
/// * Drain [`poll_output`](Self::poll_output) after each input and carry the outputs out
///   in order: call each [`Output::Notify`] callback outside any lock and report its
///   return with [`Input::CallbackDone`]; fence each [`Output::Fence`] client and report
///   [`Input::FenceDone`]; command the hardware and report its completion.
/// * Ask [`poll_timeout`](Self::poll_timeout) after draining, and feed
///   [`Input::Timeout`] with `now` when the owner's clock reaches it. An owner that does
///   only this never sees a deadline shorter than configured.
///
/// [`feed`](Self::feed) does the three in one call (the recommended loop: see the
/// crate's front page); [`drain`](Self::drain) does the last two after a typed method.
///
/// ```
/// use pnp_lifecycle::*;
/// // One device, 8 client slots, 2 physical ports; the queue fits the worst input.
/// let mut m: Lifecycle<1, 8, 2, { queue_capacity(1, 8) }> = Lifecycle::new(Config::DEFAULT);
/// let hca = DeviceId(0);
/// m.handle(Tick(0), Input::AddDevice { device: hca })?;
/// let (client, epoch) = m.register(Tick(1), hca, ClientKind::Trusted)?; // before start
/// assert_eq!(epoch, Epoch(0));
/// assert_eq!(m.poll_timeout(), None); // nothing waits on a deadline
/// assert_eq!(m.client(client).map(|c| c.kind), Some(ClientKind::Trusted));
/// # Ok::<(), Error>(())
/// ```
///
/// Only the owner's own failure to drain refuses an input ([`Error::OutputBacklog`]):
/// nothing a client does (never returning a callback, never answering, never detaching,
/// a flood of link changes) makes the machine refuse surprise removal, remove, unload, a
/// timeout, a hardware completion or a fatal error.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lifecycle<
    const DEVICES: usize,
    const CLIENTS: usize,
    const PORTS: usize,
    const QUEUE: usize,
> {
    config: Config,
    now: Tick,
    driver: DriverPhase,
    devices: [Device<CLIENTS, PORTS>; DEVICES],
    /// Each reset group's cycle under way, by [`GroupId`] (`machine/groups.rs`).
    group_cycles: [Option<groups::GroupCycle>; DEVICES],
    /// The earliest deadline of those cycles, kept current as they change.
    group_deadline: Option<Tick>,
    /// `poll_timeout` may read the devices' deadlines alone: no reset group's cycle waits
    /// on a deadline and the driver has not unloaded. Kept by `handle_slow` (the fast path
    /// changes neither), so the owner loop's question costs one test more than the read.
    timer_is_devices: bool,
    outputs: OutputQueue<QUEUE>,
}

impl<const D: usize, const C: usize, const P: usize, const Q: usize> Lifecycle<D, C, P, Q> {
    /// Outputs one device input may produce (see [`outputs_per_device_input`]), plus one
    /// for `UnloadMayFinish`.
    pub const DEVICE_INPUT_OUTPUTS: usize = outputs_per_device_input(C) + 1;
    /// Outputs a tick or an unload may produce.
    pub const DRIVER_INPUT_OUTPUTS: usize = queue_capacity(D, C);

    const CHECKS: () = {
        assert!(
            D >= 1 && D <= 256,
            "DEVICES must be 1..=256 (DeviceId is a u8)"
        );
        assert!(
            C >= 1 && C <= 256,
            "CLIENTS must be 1..=256 (a slot index is a u8)"
        );
        assert!(P <= 8, "PORTS must be at most 8 (PortSet is a u8)");
        assert!(
            Q >= queue_capacity(D, C),
            "QUEUE must be at least queue_capacity(DEVICES, CLIENTS)"
        );
    };

    /// A machine with no device, at tick zero.
    #[must_use]
    pub const fn new(config: Config) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::CHECKS;
        Lifecycle {
            config,
            now: Tick(0),
            driver: DriverPhase::Loaded,
            devices: [const { Device::new() }; D],
            group_cycles: [None; D],
            group_deadline: None,
            timer_is_devices: true,
            outputs: OutputQueue::new(),
        }
    }

    /// This machine with the fast path on (DESIGN.md "Operations: the fast path", I15):
    /// for an owner that admits clients' hardware operations itself while the machine
    /// lets it (`ports/runtime`'s gate). The machine then tells the owner, per client, when
    /// to open its gate and when to close it ([`Output::FastPath`]), and takes the close's
    /// answer ([`Input::FastPathClosed`]). Without it no gate is ever opened and every
    /// operation goes through [`Input::Access`].
    pub fn with_fast_path(mut self) -> Self {
        for device in self.devices.iter_mut() {
            device.fast_path = true;
        }
        self
    }

    /// Apply one input that happened at `now` on the owner's clock. On `Err` nothing
    /// changed and nothing was queued; on `Ok` the effects are queued for
    /// [`poll_output`](Self::poll_output). Every device input first meets the per-state
    /// table ([`crate::table::TABLE`]). Every input has a typed method too
    /// ([`start`](Self::start), [`reset_execute`](Self::reset_execute), ...), and
    /// [`feed`](Self::feed) adds the drain and the timer to either.
    ///
    /// # Errors
    ///
    /// The input is refused, and nothing changes, when:
    ///
    /// * the driver unloaded ([`Error::Unloaded`]), or `now` is earlier than the last
    ///   input's ([`Error::TimeWentBackwards`]);
    /// * the output queue lacks room for the input's worst case
    ///   ([`Error::OutputBacklog`]): outputs of earlier inputs were not drained. This is
    ///   the owner's own misuse; nothing a client does causes it;
    /// * the device id is beyond `DEVICES` ([`Error::NoSuchDevice`]), or the per-state
    ///   table refuses the input in the device's state ([`Error::InvalidState`]) or
    ///   vetoes it ([`Error::Vetoed`]);
    /// * the input's own handler refuses it: each typed method lists those errors.
    pub fn handle(&mut self, now: Tick, input: Input) -> Result<Reply, Error> {
        let result = self.handle_inner(now, input);
        // Only a logging build looks at the refusal again (the input kept alive for it
        // costs a plain build a copy per input).
        #[cfg(any(feature = "defmt", feature = "log"))]
        if let Err(error) = result {
            debug!("refused {}: {}", input.kind(), error);
        }
        result
    }

    // Inlined into `handle`, so into its caller: where the caller names the input (a typed
    // method, an owner's handler for one kind of event), its table column and its arm of
    // the dispatch are known there and fold away; the call into here and its result's
    // trip through memory had cost a fifth of a client input.
    //
    // The fast path: a device input whose table cell is known to be handled or deferred
    // from the device's front row alone (`table::FRONT`: the device in no reset group, the
    // driver loaded, no pending query's answer, no membership change). Everything else,
    // and every planted fault, takes the full front end (`handle_slow`), which ends by
    // rewriting every device's row.
    #[inline(always)]
    fn handle_inner(&mut self, now: Tick, input: Input) -> Result<Reply, Error> {
        // Every row is current (a test build checks it before every input).
        debug_assert!(self
            .devices
            .iter()
            .all(|d| d.front == d.front_row(self.driver != DriverPhase::Loaded)));
        debug_assert_eq!(self.timer_is_devices, self.timer_is_devices_now());
        let kind = input.kind();
        let Some(device_id) = input.device() else {
            return self.handle_slow(now, input);
        };
        let Some(device) = self
            .devices
            .get_mut(usize::from(device_id.0))
            .filter(|d| !cfg!(pnp_faults) && front_admits(kind, d.front))
        else {
            return self.handle_slow(now, input);
        };
        // Rule: time never goes backwards; a refused input changes nothing, not even time.
        if now < self.now {
            return Err(Error::TimeWentBackwards { last: self.now });
        }
        let mut cx = Ctx::for_input(
            &mut self.outputs,
            Self::DEVICE_INPUT_OUTPUTS,
            &self.config,
            device_id,
            now,
            false,
            None,
        )?;
        // The handler's result is returned as it is: unwrapping it with `?` and wrapping the
        // reply again moved both through memory (a twentieth of a client input).
        let result = dispatch(device, &mut cx, input);
        end_input(result.is_ok(), device, &mut cx, &mut self.now, now);
        result
    }

    /// The full front end: every input the fast path does not take. It rewrites every
    /// device's front row at its end, whatever it answered (the rows follow from the
    /// phases, the groups and the driver's phase, which only this path changes otherwise).
    #[cold]
    #[inline(never)]
    fn handle_slow(&mut self, now: Tick, input: Input) -> Result<Reply, Error> {
        let result = match self.driver {
            DriverPhase::Unloaded => Err(Error::Unloaded),
            DriverPhase::Unloading => self.handle_front(now, input, true),
            DriverPhase::Loaded => self.handle_front(now, input, false),
        };
        let unloading = self.driver != DriverPhase::Loaded;
        for device in self.devices.iter_mut() {
            device.front = device.front_row(unloading);
        }
        self.timer_is_devices = self.timer_is_devices_now();
        result
    }

    /// What [`Lifecycle::timer_is_devices`] follows from.
    fn timer_is_devices_now(&self) -> bool {
        self.group_deadline.is_none() && self.driver != DriverPhase::Unloaded
    }

    // `unloading`: the driver is unloading (else it is loaded).
    fn handle_front(&mut self, now: Tick, input: Input, unloading: bool) -> Result<Reply, Error> {
        // Rule: time never goes backwards; a refused input changes nothing, not even time.
        if now < self.now {
            return Err(Error::TimeWentBackwards { last: self.now });
        }
        // Only the driver-wide inputs (`Timeout`, `Unload`) concern no device.
        let Some(device_id) = input.device() else {
            return self.driver_input(now, input);
        };
        let kind = input.kind();
        let index = usize::from(device_id.0);
        let device = self.devices.get_mut(index).ok_or(Error::NoSuchDevice)?;
        let phase = device.phase.kind();
        if planted!(RefuseSurpriseWhileCallbackRuns)
            && kind == InputKind::SurpriseRemoval
            && device.registry.slots.iter().any(|s| s.callback().is_some())
        {
            return Err(Error::InvalidState { phase, input: kind });
        }
        let planted_admit = planted!(RegisterWhileRemovePending)
            && kind == InputKind::Register
            && phase == PhaseKind::RemovePending;
        match disposition(phase, kind) {
            Disposition::Refuse if planted_admit => {}
            Disposition::Refuse => return Err(Error::InvalidState { phase, input: kind }),
            Disposition::Veto => return Err(Error::Vetoed(VetoReason::ResetInProgress)),
            Disposition::Ignore => {
                self.outputs.room_for(1)?;
                if let Some(token) = input.token() {
                    self.outputs.push(Output::Complete {
                        device: device_id,
                        token,
                        status: Status::Success,
                    });
                }
                self.now = now;
                return Ok(Reply::Accepted);
            }
            Disposition::Handle | Disposition::Defer => {}
        }
        // A power transition for a pending query: clients get that query's answers.
        if matches!(phase, PhaseKind::PoweringDown | PhaseKind::PoweringUp) {
            if let Some(refused) = device.refused_for_pending_query(kind) {
                return Err(refused);
            }
        }
        // Reset groups: an input on a member, or a membership change, takes the group's
        // path (`machine/groups.rs`); a device in no group never does.
        if device.group.group.is_some()
            || matches!(kind, InputKind::JoinResetGroup | InputKind::LeaveResetGroup)
        {
            return self.handle_member(now, input, device_id);
        }
        let mut cx = Ctx::for_input(
            &mut self.outputs,
            Self::DEVICE_INPUT_OUTPUTS,
            &self.config,
            device_id,
            now,
            unloading,
            None,
        )?;
        let result = dispatch(device, &mut cx, input);
        if end_input(result.is_ok(), device, &mut cx, &mut self.now, now) && unloading {
            self.finish_unload_if_all_absent();
        }
        result
    }

    /// `Timeout` or `Unload`: every device at once.
    #[cold]
    #[inline(never)]
    fn driver_input(&mut self, now: Tick, input: Input) -> Result<Reply, Error> {
        match input {
            Input::Timeout => self.on_timeout(now).map(|()| Reply::Accepted),
            Input::Unload => self.begin_unload(now).map(|()| Reply::Accepted),
            _ => Err(Error::NoSuchDevice),
        }
    }

    fn on_timeout(&mut self, now: Tick) -> Result<(), Error> {
        self.check_driver_room()?;
        self.now = now;
        let unloading = self.driver == DriverPhase::Unloading;
        for (index, device) in self.devices.iter_mut().enumerate() {
            let mut cx = Ctx {
                device: DeviceId(u8::try_from(index).unwrap_or(u8::MAX)),
                now,
                config: &self.config,
                unloading,
                out: &mut self.outputs,
                group_blocker: None,
            };
            device.on_timeout(&mut cx);
        }
        self.settle_group_cycles();
        self.finish_unload_if_done();
        Ok(())
    }

    fn begin_unload(&mut self, now: Tick) -> Result<(), Error> {
        if self.driver != DriverPhase::Loaded {
            return Err(Error::UnloadAlreadyRequested);
        }
        self.check_driver_room()?;
        self.now = now;
        self.driver = DriverPhase::Unloading;
        for (index, device) in self.devices.iter_mut().enumerate() {
            if device.phase.kind() == PhaseKind::Absent {
                continue;
            }
            let mut cx = Ctx {
                device: DeviceId(u8::try_from(index).unwrap_or(u8::MAX)),
                now,
                config: &self.config,
                unloading: true,
                out: &mut self.outputs,
                group_blocker: None,
            };
            device.unload(&mut cx);
        }
        self.settle_group_cycles();
        self.finish_unload_if_done();
        Ok(())
    }

    fn check_driver_room(&self) -> Result<(), Error> {
        self.outputs.room_for(Self::DRIVER_INPUT_OUTPUTS)
    }

    /// The unload fence: once every device is gone, say so exactly once and take no more
    /// inputs. A device becomes absent only once its registry is drained (no client and no
    /// callback in flight), so absence is the whole condition.
    #[inline]
    fn finish_unload_if_done(&mut self) {
        if self.driver == DriverPhase::Unloading {
            self.finish_unload_if_all_absent();
        }
    }

    #[inline(never)]
    fn finish_unload_if_all_absent(&mut self) {
        if self
            .devices
            .iter()
            .all(|d| d.phase.kind() == PhaseKind::Absent)
        {
            self.outputs.push(Output::UnloadMayFinish);
            self.driver = DriverPhase::Unloaded;
        }
    }

    /// The next output, oldest first.
    #[must_use = "an output dropped is work the owner never does: carry it out"]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop()
    }

    /// Hand every queued output to `sink`, oldest first: the outputs
    /// [`poll_output`](Self::poll_output) would give one by one, read in one pass. For an
    /// owner that arms its timer elsewhere; [`drain`](Self::drain) also says when to wake.
    ///
    /// ```
    /// use pnp_lifecycle::*;
    /// let mut m: Lifecycle<1, 2, 1, { queue_capacity(1, 2) }> = Lifecycle::new(Config::DEFAULT);
    /// m.add_device(Tick(0), DeviceId(0))?;
    /// m.start(Tick(0), DeviceId(0), RequestToken(1))?;
    /// let mut seen = Vec::new();
    /// m.drain_outputs(|o| seen.push(o));
    /// assert_eq!(seen, [Output::Hardware { device: DeviceId(0), command: HardwareCommand::Start }]);
    /// assert_eq!(m.poll_output(), None);
    /// # Ok::<(), Error>(())
    /// ```
    #[inline]
    pub fn drain_outputs(&mut self, sink: impl FnMut(Output)) {
        self.outputs.drain(sink);
    }

    /// The outputs queued, oldest first, without taking them.
    pub fn pending_outputs(&self) -> impl Iterator<Item = &Output> {
        self.outputs.iter()
    }

    /// How many outputs are queued.
    #[must_use]
    pub fn pending_output_count(&self) -> usize {
        self.outputs.len()
    }

    /// Outputs dropped because the queue was full, plus client events that found no room
    /// in a mailbox. Room is checked before every input and mailboxes are bounded by
    /// construction, so this stays zero; it exists so tests can prove it.
    #[must_use]
    pub fn lost_outputs(&self) -> u32 {
        let events: u32 = self
            .devices
            .iter()
            .flat_map(|d| d.registry.slots.iter())
            .map(|s| u32::from(s.mailbox().overflowed()))
            .sum();
        self.outputs.overflowed().saturating_add(events)
    }

    /// When the machine next needs an [`Input::Timeout`], if it waits on a deadline: the
    /// earliest deadline of any device (a callback, a `RESET` answer, a detach).
    #[must_use = "arm the owner's timer at the returned time (feed `Input::Timeout` then)"]
    #[inline]
    pub fn poll_timeout(&self) -> Option<Tick> {
        // Each device keeps its earliest deadline current: O(1) a device; so does the
        // driver for its reset groups' cycles.
        let devices = self.devices.iter().filter_map(|d| d.next_deadline()).min();
        if self.timer_is_devices {
            return devices;
        }
        self.poll_timeout_with_groups(devices)
    }

    /// `poll_timeout` while a reset group's cycle waits or the driver unloaded.
    #[cold]
    #[inline(never)]
    fn poll_timeout_with_groups(&self, devices: Option<Tick>) -> Option<Tick> {
        if self.driver == DriverPhase::Unloaded {
            return None;
        }
        match (devices, self.group_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The `now` of the last input accepted.
    #[must_use]
    pub fn now(&self) -> Tick {
        self.now
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Where the driver stands with respect to unload.
    #[must_use]
    pub fn driver_phase(&self) -> DriverPhase {
        self.driver
    }

    /// A device's state, or `None` for an id beyond `DEVICES`.
    #[must_use]
    pub fn phase(&self, device: DeviceId) -> Option<PhaseKind> {
        self.devices
            .get(usize::from(device.0))
            .map(|d| d.phase.kind())
    }

    /// A device's state with its data: an internal, for tests, fuzzers and diagnostics
    /// (feature `inspect`; not covered by semantic versioning).
    #[cfg(feature = "inspect")]
    #[must_use]
    pub fn phase_detail(&self, device: DeviceId) -> Option<crate::inspect::Phase> {
        self.devices.get(usize::from(device.0)).map(|d| d.phase)
    }

    /// Why a device failed, while it is failed (or remove is pending from failed).
    #[must_use]
    pub fn failure(&self, device: DeviceId) -> Option<FailureCause> {
        self.devices
            .get(usize::from(device.0))
            .and_then(Device::failure)
    }

    /// A device's current epoch.
    #[must_use]
    pub fn epoch(&self, device: DeviceId) -> Option<Epoch> {
        self.devices.get(usize::from(device.0)).map(|d| d.epoch)
    }

    /// A port's link state, if the port is configured.
    #[must_use]
    pub fn link(&self, device: DeviceId, port: PhysPort) -> Option<LinkState> {
        self.devices
            .get(usize::from(device.0))
            .and_then(|d| d.ports.get(usize::from(port.0)))
            .filter(|p| p.caps.is_some())
            .map(|p| p.link)
    }

    /// What the machine knows of the client a handle names, if it is its current client.
    #[must_use]
    pub fn client(&self, handle: ClientHandle) -> Option<ClientView> {
        let device = self.devices.get(usize::from(handle.device.0))?;
        let slot = device.registry.slot(usize::from(handle.slot))?;
        (slot.occupied() && slot.generation == handle.generation).then(|| view(slot))
    }

    /// Every occupied client slot of a device.
    pub fn clients(
        &self,
        device: DeviceId,
    ) -> impl Iterator<Item = (ClientHandle, ClientView)> + '_ {
        self.devices
            .get(usize::from(device.0))
            .into_iter()
            .flat_map(move |d| {
                d.registry
                    .slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.occupied())
                    .map(move |(i, s)| {
                        (
                            ClientHandle {
                                device,
                                slot: u8::try_from(i).unwrap_or(u8::MAX),
                                generation: s.generation,
                            },
                            view(s),
                        )
                    })
            })
    }

    /// The capabilities of a client's binding; allowed whatever the link states.
    ///
    /// # Errors
    ///
    /// [`Error::NotBound`] if the client bound no configured port,
    /// [`Error::UnknownClient`], [`Error::ClientRevoked`] or [`Error::ClientDetaching`]
    /// for a client that may not call, [`Error::NoSuchDevice`] for a device beyond
    /// `DEVICES`.
    pub fn binding_caps(&self, client: ClientHandle) -> Result<BindingCaps, Error> {
        self.devices
            .get(usize::from(client.device.0))
            .ok_or(Error::NoSuchDevice)?
            .binding_caps(client)
    }
}

/// Run a device input the table accepted ([`Device::dispatch`], every handler behind it).
/// A hosted build inlines it into the entry (a call and its frame cost a fifth of a client
/// input there); a bare-metal build keeps one copy for the entry and the reset groups'
/// path, its code size being the measure there (`compare/firmware`).
#[cfg_attr(target_os = "none", inline(never))]
#[cfg_attr(not(target_os = "none"), inline(always))]
fn dispatch<const C: usize, const P: usize, const Q: usize>(
    device: &mut Device<C, P>,
    cx: &mut Ctx<'_, Q>,
    input: Input,
) -> Result<Reply, Error> {
    device.dispatch(cx, input)
}

/// The end of a device input, on every path: only an `accepted` input takes effect beyond
/// its handler (I10): the device's gates open once it settled (fast path, I15) and the
/// machine's clock moves to the input's `now`. Gives `accepted` back. (It takes the
/// result's test, not the result: a reference to the result kept it in memory, +23
/// instructions an input.)
#[inline(always)]
fn end_input<const C: usize, const P: usize, const Q: usize>(
    accepted: bool,
    device: &mut Device<C, P>,
    cx: &mut Ctx<'_, Q>,
    clock: &mut Tick,
    now: Tick,
) -> bool {
    if accepted {
        if device.gates_to_open {
            device.open_gates_when_settled(cx);
        }
        *clock = now;
    }
    accepted
}

fn view(slot: &crate::registry::Slot) -> ClientView {
    ClientView {
        kind: slot.kind,
        state: slot.state,
        ports: slot.ports,
        callback_in_flight: slot.callback().is_some(),
        operations_in_flight: u8::try_from(slot.ops).unwrap_or(u8::MAX),
        waiting_events: u8::try_from(slot.mailbox().len()).unwrap_or(u8::MAX),
        fence_requested: slot.fence_requested(),
    }
}

// Boundaries the public API cannot reach in a test's lifetime (`machine/boundaries.rs`).
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod boundaries;
