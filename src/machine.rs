//! The driver-wide machine: its devices, the unload fence, time and the output queue.

use crate::device::{Ctx, Device};
use crate::queue::OutputQueue;
use crate::registry::ClientState;
use crate::table::{disposition, Disposition, InputKind, PhaseKind};
use crate::types::*;

/// The most outputs one device input can produce with `clients` client slots, whatever the
/// clients do: two a client (a notification or a fence, then `ClientGone`; a client has at
/// most one callback in flight, so later events wait in its bounded mailbox; with the fast
/// path on, a gate's open or close takes the place of the `ClientGone`: a slot is freed
/// only once its gate is shut, and gates open only at the end of an input that left the
/// device running, so no input both opens and closes one), plus hardware commands,
/// completions, cycle results and `DeviceRemoved`.
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
        if let Err(error) = result {
            debug!("refused {}: {}", input.kind(), error);
        }
        result
    }

    fn handle_inner(&mut self, now: Tick, input: Input) -> Result<Reply, Error> {
        if self.driver == DriverPhase::Unloaded {
            return Err(Error::Unloaded);
        }
        // Rule: time never goes backwards; a refused input changes nothing, not even time.
        if now < self.now {
            return Err(Error::TimeWentBackwards { last: self.now });
        }
        let kind = input.kind();
        let device_id = match input {
            Input::Timeout => return self.on_timeout(now).map(|()| Reply::Accepted),
            Input::Unload => return self.begin_unload(now).map(|()| Reply::Accepted),
            _ => input.device().ok_or(Error::NoSuchDevice)?,
        };
        let unloading = self.driver == DriverPhase::Unloading;
        let index = usize::from(device_id.0);
        let device = self.devices.get_mut(index).ok_or(Error::NoSuchDevice)?;
        let phase = device.phase.kind();
        if planted!(RefuseSurpriseWhileCallbackRuns)
            && kind == InputKind::SurpriseRemoval
            && device.registry.slots.iter().any(|s| s.callback.is_some())
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
                if self.outputs.free() < 1 {
                    return Err(Error::OutputBacklog { needed: 1 });
                }
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
        let needed = Self::DEVICE_INPUT_OUTPUTS;
        if self.outputs.free() < needed {
            return Err(Error::OutputBacklog {
                needed: u16::try_from(needed).unwrap_or(u16::MAX),
            });
        }
        let mut cx = Ctx {
            device: device_id,
            now,
            config: &self.config,
            unloading,
            out: &mut self.outputs,
        };
        // The handler's result is returned as it is: unwrapping it with `?` and wrapping the
        // reply again moved both through memory (a twentieth of a client input).
        let result = device.dispatch(&mut cx, input);
        if result.is_ok() {
            device.open_gates_when_settled(&mut cx); // fast path: gates open once settled
            self.now = now;
            self.finish_unload_if_done();
        }
        result
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
            };
            device.on_timeout(&mut cx);
        }
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
            };
            device.unload(&mut cx);
        }
        self.finish_unload_if_done();
        Ok(())
    }

    fn check_driver_room(&self) -> Result<(), Error> {
        let needed = Self::DRIVER_INPUT_OUTPUTS;
        if self.outputs.free() < needed {
            return Err(Error::OutputBacklog {
                needed: u16::try_from(needed).unwrap_or(u16::MAX),
            });
        }
        Ok(())
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
            .map(|s| u32::from(s.mailbox.overflowed()))
            .sum();
        self.outputs.overflowed().saturating_add(events)
    }

    /// When the machine next needs an [`Input::Timeout`], if it waits on a deadline: the
    /// earliest deadline of any device (a callback, a `RESET` answer, a detach).
    #[must_use = "arm the owner's timer at the returned time (feed `Input::Timeout` then)"]
    pub fn poll_timeout(&self) -> Option<Tick> {
        if self.driver == DriverPhase::Unloaded {
            return None;
        }
        // Each device keeps its earliest deadline current: O(1) a device.
        self.devices.iter().filter_map(|d| d.next_deadline()).min()
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

    // ---- typed entry points: the same inputs, with typed answers ------------------------
    //
    // One method per `Input` variant, each feeding its `Input` through `handle`: the
    // same table check, the same room check, the same outputs to drain. An input
    // answered with a value has only Handle, Veto or Refuse cells in the table (checked
    // at compile time in `table.rs`), so its handler always runs and always gives that
    // value; `unexpected` is the honest error for a reply that cannot happen.

    fn unexpected(&self, input: Input) -> Error {
        let phase = input
            .device()
            .and_then(|d| self.phase(d))
            .unwrap_or(PhaseKind::Absent);
        Error::InvalidState {
            phase,
            input: input.kind(),
        }
    }

    fn value<T>(
        &mut self,
        now: Tick,
        input: Input,
        pick: impl FnOnce(Reply) -> Option<T>,
    ) -> Result<T, Error> {
        let reply = self.handle(now, input)?;
        pick(reply).ok_or_else(|| self.unexpected(input))
    }

    fn accept(&mut self, now: Tick, input: Input) -> Result<(), Error> {
        self.handle(now, input).map(drop)
    }

    // -- the OS's PnP requests and the hardware's completions --

    /// A new device (`AddDevice`, probe): [`Input::AddDevice`]. Its slot must be free.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] if the device is present already, [`Error::Unloading`]
    /// once driver unload began, [`Error::NoSuchDevice`] beyond `DEVICES`; and the
    /// refusals of every input ([`handle`](Self::handle#errors)).
    pub fn add_device(&mut self, now: Tick, device: DeviceId) -> Result<(), Error> {
        self.accept(now, Input::AddDevice { device })
    }

    /// Describe a physical port of an added, never started device:
    /// [`Input::ConfigurePort`].
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchPort`] for a port beyond `PORTS`, [`Error::PortAlreadyConfigured`],
    /// [`Error::InvalidState`] once the device started; and the refusals of every input
    /// ([`handle`](Self::handle#errors)).
    pub fn configure_port(
        &mut self,
        now: Tick,
        device: DeviceId,
        port: PhysPort,
        caps: PortCaps,
    ) -> Result<(), Error> {
        self.accept(now, Input::ConfigurePort { device, port, caps })
    }

    /// Start, or restart after a stop (`IRP_MN_START_DEVICE`): [`Input::Start`]. The
    /// machine commands [`HardwareCommand::Start`]; `token` completes when
    /// [`start_done`](Self::start_done) reports.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] unless the device is added or stopped; and the refusals of
    /// every input ([`handle`](Self::handle#errors)).
    pub fn start(&mut self, now: Tick, device: DeviceId, token: RequestToken) -> Result<(), Error> {
        self.accept(now, Input::Start { device, token })
    }

    /// The hardware start the machine commanded finished: [`Input::StartDone`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] or [`Error::NoHardwareCommandInFlight`] if no start is
    /// in flight; and the refusals of every input ([`handle`](Self::handle#errors)).
    pub fn start_done(
        &mut self,
        now: Tick,
        device: DeviceId,
        result: StartResult,
    ) -> Result<(), Error> {
        self.accept(now, Input::StartDone { device, result })
    }

    /// `IRP_MN_QUERY_STOP_DEVICE`: [`Input::QueryStop`]; `token` completes at once.
    ///
    /// # Errors
    ///
    /// [`Error::Vetoed`] during a reset cycle or while a client cannot pause
    /// ([`cannot_pause`](Self::cannot_pause)), [`Error::InvalidState`] in a state the
    /// table refuses; and the refusals of every input ([`handle`](Self::handle#errors)).
    pub fn query_stop(
        &mut self,
        now: Tick,
        device: DeviceId,
        token: RequestToken,
    ) -> Result<(), Error> {
        self.accept(now, Input::QueryStop { device, token })
    }

    /// `IRP_MN_CANCEL_STOP_DEVICE`: [`Input::CancelStop`]; succeeds in every present state.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] for an absent device; and the refusals of every input
    /// ([`handle`](Self::handle#errors)).
    pub fn cancel_stop(
        &mut self,
        now: Tick,
        device: DeviceId,
        token: RequestToken,
    ) -> Result<(), Error> {
        self.accept(now, Input::CancelStop { device, token })
    }

    /// `IRP_MN_STOP_DEVICE`, after a successful query stop: [`Input::Stop`]. Clients are
    /// told [`Event::DeviceStopped`]; the hardware is shut down once no operation is in
    /// flight.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] unless a query stop succeeded; and the refusals of every
    /// input ([`handle`](Self::handle#errors)).
    pub fn stop(&mut self, now: Tick, device: DeviceId, token: RequestToken) -> Result<(), Error> {
        self.accept(now, Input::Stop { device, token })
    }

    /// `IRP_MN_QUERY_REMOVE_DEVICE`: [`Input::QueryRemove`]; `token` completes at once.
    ///
    /// # Errors
    ///
    /// [`Error::Vetoed`] during a reset cycle or while a client holds the device
    /// ([`hold`](Self::hold)), [`Error::InvalidState`] in a state the table refuses; and
    /// the refusals of every input ([`handle`](Self::handle#errors)).
    pub fn query_remove(
        &mut self,
        now: Tick,
        device: DeviceId,
        token: RequestToken,
    ) -> Result<(), Error> {
        self.accept(now, Input::QueryRemove { device, token })
    }

    /// `IRP_MN_CANCEL_REMOVE_DEVICE`: [`Input::CancelRemove`]; succeeds in every present
    /// state.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] for an absent device; and the refusals of every input
    /// ([`handle`](Self::handle#errors)).
    pub fn cancel_remove(
        &mut self,
        now: Tick,
        device: DeviceId,
        token: RequestToken,
    ) -> Result<(), Error> {
        self.accept(now, Input::CancelRemove { device, token })
    }

    /// `IRP_MN_REMOVE_DEVICE`: [`Input::Remove`]. Every client is told [`Event::Removed`];
    /// `token` completes with [`Output::DeviceRemoved`] once they detached (or were
    /// revoked at the detach deadline) and the hardware is undone.
    ///
    /// # Errors
    ///
    /// [`Error::RequestPending`] if a removal is already under way,
    /// [`Error::InvalidState`] for an absent device; and the refusals of every input
    /// ([`handle`](Self::handle#errors)).
    pub fn remove(
        &mut self,
        now: Tick,
        device: DeviceId,
        token: RequestToken,
    ) -> Result<(), Error> {
        self.accept(now, Input::Remove { device, token })
    }

    /// `IRP_MN_SURPRISE_REMOVAL` or a PCI permanent failure: [`Input::SurpriseRemoval`].
    /// The hardware is gone and never commanded again; clients are told
    /// [`Event::Removed`]. Nothing a client does makes it refused.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] if the device is absent or vanished already; and the
    /// refusals of every input ([`handle`](Self::handle#errors)).
    pub fn surprise_removal(&mut self, now: Tick, device: DeviceId) -> Result<(), Error> {
        self.accept(now, Input::SurpriseRemoval { device })
    }

    /// Report a catastrophic-error interrupt ([`Input::FatalError`]): a reset request from
    /// the driver itself, never lost (see [`FatalAnswer`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] for an absent device; and the refusals of every input
    /// ([`handle`](Self::handle#errors)).
    pub fn fatal_error(&mut self, now: Tick, device: DeviceId) -> Result<FatalAnswer, Error> {
        self.value(now, Input::FatalError { device }, |r| match r {
            Reply::Fatal(a) => Some(a),
            _ => None,
        })
    }

    /// The hardware reset the machine commanded finished: [`Input::ResetDone`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] or [`Error::NoHardwareCommandInFlight`] if no reset is in
    /// flight; and the refusals of every input ([`handle`](Self::handle#errors)).
    pub fn reset_done(
        &mut self,
        now: Tick,
        device: DeviceId,
        result: ResetResult,
    ) -> Result<(), Error> {
        self.accept(now, Input::ResetDone { device, result })
    }

    /// A port's link changed state: [`Input::LinkChanged`]. Clients bound to the port are
    /// told [`Event::LinkChanged`] (a newer state replaces one not yet delivered).
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchPort`] for a port beyond `PORTS` or not configured,
    /// [`Error::InvalidState`] in a state the table refuses; and the refusals of every
    /// input ([`handle`](Self::handle#errors)).
    pub fn link_changed(
        &mut self,
        now: Tick,
        device: DeviceId,
        port: PhysPort,
        state: LinkState,
    ) -> Result<(), Error> {
        self.accept(
            now,
            Input::LinkChanged {
                device,
                port,
                state,
            },
        )
    }

    /// Take a device to a low-power state ([`Input::PowerDown`]); `token` completes when
    /// [`power_down_done`](Self::power_down_done) reports.
    ///
    /// # Errors
    ///
    /// [`Error::Vetoed`] for an idle power-down during a reset cycle,
    /// [`Error::RequestPending`] or [`Error::RemoveInProgress`] while another request or a
    /// removal is under way, [`Error::InvalidState`] in a state the table refuses; and the
    /// refusals of every input ([`handle`](Self::handle#errors)).
    pub fn power_down(
        &mut self,
        now: Tick,
        device: DeviceId,
        kind: PowerDownKind,
        token: RequestToken,
    ) -> Result<(), Error> {
        self.accept(
            now,
            Input::PowerDown {
                device,
                kind,
                token,
            },
        )
    }

    /// The [`HardwareCommand::PowerDown`] the machine commanded finished:
    /// [`Input::PowerDownDone`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] or [`Error::NoHardwareCommandInFlight`] if no power-down is
    /// in flight; and the refusals of every input ([`handle`](Self::handle#errors)).
    pub fn power_down_done(&mut self, now: Tick, device: DeviceId) -> Result<(), Error> {
        self.accept(now, Input::PowerDownDone { device })
    }

    /// Bring a device in a low-power state back to D0 ([`Input::PowerUp`]); `token`
    /// completes when [`power_up_done`](Self::power_up_done) reports.
    ///
    /// # Errors
    ///
    /// [`Error::RequestPending`] if a power-up request is already pending,
    /// [`Error::InvalidState`] in a state the table refuses; and the refusals of every
    /// input ([`handle`](Self::handle#errors)).
    pub fn power_up(
        &mut self,
        now: Tick,
        device: DeviceId,
        token: RequestToken,
    ) -> Result<(), Error> {
        self.accept(now, Input::PowerUp { device, token })
    }

    /// The [`HardwareCommand::PowerUp`] the machine commanded finished:
    /// [`Input::PowerUpDone`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] or [`Error::NoHardwareCommandInFlight`] if no power-up is
    /// in flight; and the refusals of every input ([`handle`](Self::handle#errors)).
    pub fn power_up_done(
        &mut self,
        now: Tick,
        device: DeviceId,
        result: PowerUpResult,
    ) -> Result<(), Error> {
        self.accept(now, Input::PowerUpDone { device, result })
    }

    // -- the owner's timer and driver unload --

    /// The owner's timer fired ([`Input::Timeout`]): `now` reached
    /// [`poll_timeout`](Self::poll_timeout). Early or spurious timeouts do nothing.
    ///
    /// # Errors
    ///
    /// [`Error::OutputBacklog`] unless the queue has room for
    /// [`DRIVER_INPUT_OUTPUTS`](Self::DRIVER_INPUT_OUTPUTS) outputs (outputs of earlier
    /// inputs were not drained: [`feed`](Self::feed) drains them first),
    /// [`Error::TimeWentBackwards`], [`Error::Unloaded`].
    pub fn timeout(&mut self, now: Tick) -> Result<(), Error> {
        self.accept(now, Input::Timeout)
    }

    /// Driver unload (`DriverUnload`, module exit): [`Input::Unload`]. Every device is
    /// removed; [`Output::UnloadMayFinish`] says when unload may return.
    ///
    /// # Errors
    ///
    /// [`Error::UnloadAlreadyRequested`] the second time, [`Error::OutputBacklog`] unless
    /// the queue has room for [`DRIVER_INPUT_OUTPUTS`](Self::DRIVER_INPUT_OUTPUTS)
    /// outputs, [`Error::TimeWentBackwards`], [`Error::Unloaded`].
    pub fn unload(&mut self, now: Tick) -> Result<(), Error> {
        self.accept(now, Input::Unload)
    }

    // -- the owner's reports about a client --

    /// A callback the owner made for an [`Output::Notify`] returned
    /// ([`Input::CallbackDone`]); its outputs may hold the client's next callback.
    ///
    /// # Errors
    ///
    /// [`Error::NoCallbackInFlight`] if none is, [`Error::UnknownClient`] for a handle
    /// that names no client; and the refusals of every input
    /// ([`handle`](Self::handle#errors)).
    pub fn callback_done(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::CallbackDone { client })
    }

    /// The owner closed a client's fast-path gate as an [`Output::FastPath`] `Close` asked,
    /// with `in_flight` operations still running on it ([`Input::FastPathClosed`]); they
    /// end through [`access_done`](Self::access_done).
    ///
    /// # Errors
    ///
    /// [`Error::FastPathNotClosing`] if no close of its gate is awaited,
    /// [`Error::UnknownClient`] for a handle that names no client; and the refusals of
    /// every input ([`handle`](Self::handle#errors)).
    pub fn fast_path_closed(
        &mut self,
        now: Tick,
        client: ClientHandle,
        in_flight: u32,
    ) -> Result<(), Error> {
        self.accept(now, Input::FastPathClosed { client, in_flight })
    }

    /// The owner fenced a client as an [`Output::Fence`] asked ([`Input::FenceDone`]).
    ///
    /// # Errors
    ///
    /// [`Error::NoFenceRequested`] if no fence of it was asked for (or it was reported),
    /// [`Error::UnknownClient`] for a handle that names no client; and the refusals of
    /// every input ([`handle`](Self::handle#errors)).
    pub fn fence_done(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::FenceDone { client })
    }

    // -- a client's calls --

    /// Register a client ([`Input::Register`]): its handle and the epoch it holds. Never
    /// waits on a link.
    ///
    /// # Errors
    ///
    /// [`Error::RegistryFull`], [`Error::Unloading`], [`Error::RemoveInProgress`] while a
    /// removal waits for the reset under way, [`Error::InvalidState`] in a state the table
    /// refuses (the device is absent or being removed); and the refusals of every input
    /// ([`handle`](Self::handle#errors)).
    pub fn register(
        &mut self,
        now: Tick,
        device: DeviceId,
        kind: ClientKind,
    ) -> Result<(ClientHandle, Epoch), Error> {
        self.value(now, Input::Register { device, kind }, |r| match r {
            Reply::Registered { client, epoch } => Some((client, epoch)),
            _ => None,
        })
    }

    /// Unregister a client ([`Input::Unregister`]); idempotent: exactly one call answers
    /// [`Unregistered::Now`].
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchDevice`] for a device beyond `DEVICES`; and the refusals of every
    /// input ([`handle`](Self::handle#errors)).
    pub fn unregister(&mut self, now: Tick, client: ClientHandle) -> Result<Unregistered, Error> {
        self.value(now, Input::Unregister { client }, |r| match r {
            Reply::Unregistered(u) => Some(u),
            _ => None,
        })
    }

    /// Fetch the current interface ([`Input::AcquireInterface`]): the epoch to use it at.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownClient`], [`Error::ClientRevoked`] or [`Error::ClientDetaching`]
    /// for a client that may not call, [`Error::InvalidState`] in a state the table
    /// refuses; and the refusals of every input ([`handle`](Self::handle#errors)).
    pub fn acquire_interface(&mut self, now: Tick, client: ClientHandle) -> Result<Epoch, Error> {
        self.value(now, Input::AcquireInterface { client }, |r| match r {
            Reply::Interface(e) => Some(e),
            _ => None,
        })
    }

    /// Ask for a reset ([`Input::ResetRequest`]).
    ///
    /// # Errors
    ///
    /// [`Error::EpochExhausted`] when no more cycles fit the epoch counter,
    /// [`Error::RemoveInProgress`] or [`Error::Unloading`] while the device is going away,
    /// [`Error::UnknownClient`], [`Error::ClientRevoked`] or [`Error::ClientDetaching`]
    /// for a client that may not call, [`Error::InvalidState`] in a state the table
    /// refuses; and the refusals of every input ([`handle`](Self::handle#errors)).
    pub fn reset_request(&mut self, now: Tick, client: ClientHandle) -> Result<ResetAnswer, Error> {
        self.value(now, Input::ResetRequest { client }, |r| match r {
            Reply::Reset(a) => Some(a),
            _ => None,
        })
    }

    /// Answer `RESET`: quiesced, the hardware reset may run ([`Input::ResetExecute`]).
    /// When the last voter answers, the outputs hold [`HardwareCommand::Reset`]: drain
    /// them (or use [`feed`](Self::feed), which does).
    ///
    /// # Errors
    ///
    /// [`Error::NotVoting`] if the client has no `RESET` to answer,
    /// [`Error::ResetNotDelivered`] if its `RESET` still waits behind a callback that has
    /// not returned, [`Error::UnknownClient`], [`Error::ClientRevoked`] or
    /// [`Error::ClientDetaching`] for a client that may not call; and the refusals of
    /// every input ([`handle`](Self::handle#errors)).
    pub fn reset_execute(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::ResetExecute { client })
    }

    /// Answer `RESET`: quiesced, and can recover without a reset ([`Input::CanRecover`]).
    /// If every voter says so, the cycle ends without a hardware reset.
    ///
    /// # Errors
    ///
    /// As [`reset_execute`](Self::reset_execute).
    pub fn can_recover(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::CanRecover { client })
    }

    /// Bind the client to a set of ports of one protocol ([`Input::Bind`]).
    ///
    /// # Errors
    ///
    /// [`Error::EmptyBinding`], [`Error::NoSuchPort`] for a port not configured,
    /// [`Error::MixedProtocols`], [`Error::UnknownClient`], [`Error::ClientRevoked`] or
    /// [`Error::ClientDetaching`] for a client that may not call; and the refusals of
    /// every input ([`handle`](Self::handle#errors)).
    pub fn bind(&mut self, now: Tick, client: ClientHandle, ports: PortSet) -> Result<(), Error> {
        self.accept(now, Input::Bind { client, ports })
    }

    /// Hold the device open, vetoing query remove ([`Input::Hold`]).
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyHolding`], [`Error::UnknownClient`], [`Error::ClientRevoked`] or
    /// [`Error::ClientDetaching`] for a client that may not call; and the refusals of
    /// every input ([`handle`](Self::handle#errors)).
    pub fn hold(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::Hold { client })
    }

    /// Let go of the hold ([`Input::ReleaseHold`]).
    ///
    /// # Errors
    ///
    /// [`Error::NotHolding`], [`Error::UnknownClient`], [`Error::ClientRevoked`] or
    /// [`Error::ClientDetaching`] for a client that may not call; and the refusals of
    /// every input ([`handle`](Self::handle#errors)).
    pub fn release_hold(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::ReleaseHold { client })
    }

    /// Declare that the client cannot pause, vetoing query stop ([`Input::CannotPause`]).
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyCannotPause`], [`Error::UnknownClient`], [`Error::ClientRevoked`]
    /// or [`Error::ClientDetaching`] for a client that may not call; and the refusals of
    /// every input ([`handle`](Self::handle#errors)).
    pub fn cannot_pause(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::CannotPause { client })
    }

    /// The client can pause again ([`Input::CanPause`]).
    ///
    /// # Errors
    ///
    /// [`Error::NotCannotPause`], [`Error::UnknownClient`], [`Error::ClientRevoked`] or
    /// [`Error::ClientDetaching`] for a client that may not call; and the refusals of
    /// every input ([`handle`](Self::handle#errors)).
    pub fn can_pause(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::CanPause { client })
    }

    /// Use the device through the interface of `epoch` ([`Input::Access`]). A granted
    /// [`Access::HardwareOp`] is in flight until [`access_done`](Self::access_done).
    /// After an idle power-down the access is not granted but brings the device back:
    /// [`AccessAnswer::WaitForPowerUp`] (retry after [`Event::Resumed`]).
    ///
    /// # Errors
    ///
    /// [`Error::StaleEpoch`] (acquire the interface again), [`Error::ResetInProgress`]
    /// after answering `RESET`, [`Error::Suspended`] while the device is going to or in
    /// system sleep, [`Error::TooManyOperations`], [`Error::NoSuchPort`] for counters of a
    /// port not configured, [`Error::UnknownClient`], [`Error::ClientRevoked`] or
    /// [`Error::ClientDetaching`] for a client that may not call, [`Error::InvalidState`]
    /// in a state the table refuses; and the refusals of every input
    /// ([`handle`](Self::handle#errors)).
    pub fn access(
        &mut self,
        now: Tick,
        client: ClientHandle,
        epoch: Epoch,
        what: Access,
    ) -> Result<AccessAnswer, Error> {
        let input = Input::Access {
            client,
            epoch,
            what,
        };
        self.value(now, input, |r| match r {
            Reply::AccessGranted => Some(AccessAnswer::Granted),
            Reply::AccessWaitsForPowerUp => Some(AccessAnswer::WaitForPowerUp),
            _ => None,
        })
    }

    /// Would [`power_down`](Self::power_down) of `kind` be accepted now? The answer is
    /// exactly the one it would get (`Ok` for accepted, else its error: the table's
    /// disposition, then the handler's own checks, e.g. an idle power-down vetoed during a
    /// reset cycle), and nothing changes (DESIGN "Asking changes nothing"). For
    /// `IRP_MN_QUERY_POWER` and its kin.
    ///
    /// # Errors
    ///
    /// The error the power-down would get; nothing changed either way.
    pub fn query_power_down(&self, device: DeviceId, kind: PowerDownKind) -> Result<(), Error> {
        if self.driver == DriverPhase::Unloaded {
            return Err(Error::Unloaded);
        }
        let dev = self
            .devices
            .get(usize::from(device.0))
            .ok_or(Error::NoSuchDevice)?;
        let phase = dev.phase.kind();
        let handled = match disposition(phase, InputKind::PowerDown) {
            Disposition::Refuse => {
                return Err(Error::InvalidState {
                    phase,
                    input: InputKind::PowerDown,
                })
            }
            Disposition::Veto => return Err(Error::Vetoed(VetoReason::ResetInProgress)),
            Disposition::Ignore => false,
            Disposition::Handle | Disposition::Defer => true,
        };
        // As `handle`: an ignored input needs room for its completion, a handled one more.
        let needed = if handled {
            Self::DEVICE_INPUT_OUTPUTS
        } else {
            1
        };
        if self.outputs.free() < needed {
            return Err(Error::OutputBacklog {
                needed: u16::try_from(needed).unwrap_or(u16::MAX),
            });
        }
        if !handled {
            return Ok(());
        }
        dev.power_down_plan(kind).map(drop)
    }

    /// A granted hardware operation finished ([`Input::AccessDone`]).
    ///
    /// # Errors
    ///
    /// [`Error::NoOperationInFlight`] if the client has none, [`Error::UnknownClient`]
    /// for a handle that names no client; and the refusals of every input
    /// ([`handle`](Self::handle#errors)).
    pub fn access_done(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::AccessDone { client })
    }
}

fn view(slot: &crate::registry::Slot) -> ClientView {
    ClientView {
        kind: slot.kind,
        state: slot.state,
        ports: slot.ports,
        callback_in_flight: slot.callback.is_some(),
        operations_in_flight: u8::try_from(slot.ops).unwrap_or(u8::MAX),
        waiting_events: u8::try_from(slot.mailbox.len()).unwrap_or(u8::MAX),
        fence_requested: slot.fence_requested,
    }
}

/// Boundaries the public API cannot reach in a test's lifetime: the last epoch (2^32 reset
/// cycles) and a queue filled to the brim (every input checks its worst case first). These
/// tests set that state directly, then drive the machine only through its public inputs.
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod boundaries {
    use super::*;
    use crate::{ClientKind, Event, HardwareCommand, RequestToken, ResetResult, StartResult};

    const HCA: DeviceId = DeviceId(0);
    type Machine = Lifecycle<1, 2, 1, { queue_capacity(1, 2) }>;

    /// Drain, answering every notification.
    fn drain(m: &mut Machine) -> heapless::Vec<Output, 32> {
        let mut seen = heapless::Vec::new();
        while let Some(output) = m.poll_output() {
            seen.push(output).unwrap();
        }
        for output in seen.iter() {
            if let Output::Notify { client, .. } = *output {
                m.handle(Tick(0), Input::CallbackDone { client }).unwrap();
            }
        }
        seen
    }

    fn running_with_one_client() -> (Machine, ClientHandle) {
        let mut m = Machine::new(Config::DEFAULT);
        m.handle(Tick(0), Input::AddDevice { device: HCA }).unwrap();
        m.handle(
            Tick(0),
            Input::Start {
                device: HCA,
                token: RequestToken(1),
            },
        )
        .unwrap();
        drain(&mut m);
        m.handle(
            Tick(0),
            Input::StartDone {
                device: HCA,
                result: StartResult::Started,
            },
        )
        .unwrap();
        drain(&mut m);
        let (client, _) = m.register(Tick(0), HCA, ClientKind::Trusted).unwrap();
        (m, client)
    }

    fn request(m: &mut Machine, client: ClientHandle) -> Result<Reply, Error> {
        m.handle(Tick(0), Input::ResetRequest { client })
    }

    /// Queue distinct completions until `free` slots remain; return how many were queued.
    fn fill_until_free(m: &mut Machine, free: usize) -> u32 {
        let mut n = 0;
        while m.outputs.free() > free {
            m.outputs.push(filler(n));
            n += 1;
        }
        n
    }

    fn filler(n: u32) -> Output {
        Output::Complete {
            device: HCA,
            token: RequestToken(1_000 + n),
            status: Status::Success,
        }
    }

    #[test]
    fn a_reset_that_would_pass_the_last_epoch_is_refused_and_changes_nothing() {
        let (mut m, client) = running_with_one_client();
        m.devices[0].epoch = Epoch(u32::MAX);
        let before = m.clone();
        assert_eq!(request(&mut m, client), Err(Error::EpochExhausted));
        assert!(m == before, "a refused reset request changed the machine");
        assert_eq!(m.poll_output(), None);
    }

    #[test]
    fn a_follow_up_that_would_pass_the_last_epoch_is_refused_the_running_cycle_ends() {
        let (mut m, client) = running_with_one_client();
        m.devices[0].epoch = Epoch(u32::MAX - 1);
        assert_eq!(
            request(&mut m, client),
            Ok(Reply::Reset(ResetAnswer::Started))
        );
        let told = drain(&mut m);
        assert!(told.contains(&Output::Notify {
            client,
            event: Event::Reset
        }));
        m.handle(Tick(0), Input::ResetExecute { client }).unwrap();
        let told = drain(&mut m);
        assert!(told.contains(&Output::Hardware {
            device: HCA,
            command: HardwareCommand::Reset
        }));
        // This cycle ends at the last epoch; a follow-up would need one more.
        let before = m.clone();
        assert_eq!(request(&mut m, client), Err(Error::EpochExhausted));
        assert!(m == before, "a refused follow-up changed the machine");
        m.handle(
            Tick(0),
            Input::ResetDone {
                device: HCA,
                result: ResetResult::Succeeded,
            },
        )
        .unwrap();
        drain(&mut m);
        assert_eq!(m.epoch(HCA), Some(Epoch(u32::MAX)));
        assert_eq!(m.phase(HCA), Some(PhaseKind::Running));
        assert_eq!(request(&mut m, client), Err(Error::EpochExhausted));
    }

    /// Power the device down and up again, the power-up reporting `result`; every
    /// callback returned. Returns the outputs of the `PowerUpDone`.
    fn power_cycle(m: &mut Machine, result: crate::PowerUpResult) -> heapless::Vec<Output, 32> {
        let down = Input::PowerDown {
            device: HCA,
            kind: crate::PowerDownKind::Idle,
            token: RequestToken(2),
        };
        m.handle(Tick(0), down).unwrap();
        drain(m);
        m.handle(Tick(0), Input::PowerDownDone { device: HCA })
            .unwrap();
        drain(m);
        assert_eq!(m.phase(HCA), Some(PhaseKind::LowPower));
        let up = Input::PowerUp {
            device: HCA,
            token: RequestToken(3),
        };
        m.handle(Tick(0), up).unwrap();
        drain(m);
        m.handle(
            Tick(0),
            Input::PowerUpDone {
                device: HCA,
                result,
            },
        )
        .unwrap();
        drain(m)
    }

    #[test]
    fn a_lost_state_power_up_at_the_last_epoch_fails_the_device_instead_of_wrapping() {
        let (mut m, _) = running_with_one_client();
        m.devices[0].epoch = Epoch(u32::MAX);
        let seen = power_cycle(&mut m, crate::PowerUpResult::LostState);
        assert_eq!(m.epoch(HCA), Some(Epoch(u32::MAX)));
        assert_eq!(m.phase(HCA), Some(PhaseKind::Failed));
        assert!(seen.contains(&Output::Complete {
            device: HCA,
            token: RequestToken(3),
            status: Status::HardwareFailed
        }));
    }

    #[test]
    fn a_lost_state_power_up_one_before_the_last_epoch_reaches_it() {
        let (mut m, client) = running_with_one_client();
        m.devices[0].epoch = Epoch(u32::MAX - 1);
        let seen = power_cycle(&mut m, crate::PowerUpResult::LostState);
        assert_eq!(m.epoch(HCA), Some(Epoch(u32::MAX)));
        assert_eq!(m.phase(HCA), Some(PhaseKind::Running));
        assert!(seen.contains(&Output::Notify {
            client,
            event: Event::Resumed {
                epoch: Epoch(u32::MAX),
                state_lost: true
            }
        }));
    }

    #[test]
    fn an_ignored_input_completes_into_the_last_free_slot_and_is_refused_without_one() {
        let (mut m, _) = running_with_one_client();
        fill_until_free(&mut m, 1);
        let cancel = |token| Input::CancelStop {
            device: HCA,
            token: RequestToken(token),
        };
        // CancelStop while running is ignored: it completes, and needs one slot for that.
        assert_eq!(m.handle(Tick(0), cancel(7)), Ok(Reply::Accepted));
        assert_eq!(m.outputs.free(), 0);
        let before = m.clone();
        assert_eq!(
            m.handle(Tick(0), cancel(8)),
            Err(Error::OutputBacklog { needed: 1 })
        );
        assert!(m == before, "a refused ignored input changed the machine");
        assert_eq!(m.lost_outputs(), 0);
        let last = m.pending_outputs().last().copied();
        assert_eq!(
            last,
            Some(Output::Complete {
                device: HCA,
                token: RequestToken(7),
                status: Status::Success
            })
        );
    }

    #[test]
    fn an_output_pushed_into_a_full_queue_is_counted_as_lost() {
        let (mut m, _) = running_with_one_client();
        let n = fill_until_free(&mut m, 0);
        assert_eq!(m.lost_outputs(), 0);
        m.outputs.push(filler(n));
        assert_eq!(m.lost_outputs(), 1);
        assert_eq!(m.pending_output_count(), queue_capacity(1, 2));
    }
}
