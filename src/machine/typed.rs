//! The typed entry points: one method per [`Input`] variant, each feeding its input
//! through [`Lifecycle::handle`] (the same table check, room check and outputs), with a
//! typed answer; and the questions that change nothing.

use super::{DriverPhase, Lifecycle};
use crate::table::{disposition, Disposition, InputKind, PhaseKind};
use crate::types::*;

impl<const D: usize, const C: usize, const P: usize, const Q: usize> Lifecycle<D, C, P, Q> {
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
    /// refusals of every input ([`handle`](Self::handle)).
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
    /// ([`handle`](Self::handle)).
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
    /// every input ([`handle`](Self::handle)).
    pub fn start(&mut self, now: Tick, device: DeviceId, token: RequestToken) -> Result<(), Error> {
        self.accept(now, Input::Start { device, token })
    }

    /// The hardware start the machine commanded finished: [`Input::StartDone`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] or [`Error::NoHardwareCommandInFlight`] if no start is
    /// in flight; and the refusals of every input ([`handle`](Self::handle)).
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
    /// table refuses; and the refusals of every input ([`handle`](Self::handle)).
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
    /// ([`handle`](Self::handle)).
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
    /// input ([`handle`](Self::handle)).
    pub fn stop(&mut self, now: Tick, device: DeviceId, token: RequestToken) -> Result<(), Error> {
        self.accept(now, Input::Stop { device, token })
    }

    /// `IRP_MN_QUERY_REMOVE_DEVICE`: [`Input::QueryRemove`]; `token` completes at once.
    ///
    /// # Errors
    ///
    /// [`Error::Vetoed`] during a reset cycle or while a client holds the device
    /// ([`hold`](Self::hold)), [`Error::InvalidState`] in a state the table refuses; and
    /// the refusals of every input ([`handle`](Self::handle)).
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
    /// ([`handle`](Self::handle)).
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
    /// ([`handle`](Self::handle)).
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
    /// refusals of every input ([`handle`](Self::handle)).
    pub fn surprise_removal(&mut self, now: Tick, device: DeviceId) -> Result<(), Error> {
        self.accept(now, Input::SurpriseRemoval { device })
    }

    /// Report a catastrophic-error interrupt ([`Input::FatalError`]): a reset request from
    /// the driver itself, never lost (see [`FatalAnswer`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] for an absent device; and the refusals of every input
    /// ([`handle`](Self::handle)).
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
    /// flight; and the refusals of every input ([`handle`](Self::handle)).
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
    /// input ([`handle`](Self::handle)).
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
    /// refusals of every input ([`handle`](Self::handle)).
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
    /// in flight; and the refusals of every input ([`handle`](Self::handle)).
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
    /// input ([`handle`](Self::handle)).
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
    /// in flight; and the refusals of every input ([`handle`](Self::handle)).
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
    /// ([`handle`](Self::handle)).
    pub fn callback_done(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::CallbackDone { client })
    }

    /// A callback returned with the client's answer, one input instead of two
    /// ([`Input::CallbackDoneWith`], DESIGN.md "Cost"): `RESET`'s return with
    /// [`CallbackAnswer::ResetExecute`] or [`CallbackAnswer::CanRecover`], `RESET_END`'s
    /// with [`CallbackAnswer::AcquireInterface`] (its epoch is the `Some` answered), any
    /// callback's with [`CallbackAnswer::CannotPause`]. The same outputs as
    /// [`callback_done`](Self::callback_done) then the answer's own method.
    ///
    /// # Errors
    ///
    /// Refused whole, nothing changed: [`Error::InvalidState`] naming the answer's input
    /// where the table refuses that input, [`Error::UnknownClient`],
    /// [`Error::ClientRevoked`] or [`Error::ClientDetaching`] for a client that may not
    /// answer, [`Error::NoCallbackInFlight`], then the answer's own errors
    /// ([`Error::NotVoting`], [`Error::ResetNotDelivered`] when this return is of a
    /// callback the `RESET` waits behind, [`Error::AlreadyCannotPause`]); and the
    /// refusals of every input ([`handle`](Self::handle)).
    pub fn callback_done_with(
        &mut self,
        now: Tick,
        client: ClientHandle,
        answer: CallbackAnswer,
    ) -> Result<Option<Epoch>, Error> {
        self.value(
            now,
            Input::CallbackDoneWith { client, answer },
            |r| match r {
                Reply::Interface(e) => Some(Some(e)),
                Reply::Accepted => Some(None),
                _ => None,
            },
        )
    }

    /// The owner closed a client's fast-path gate as an [`Output::FastPath`] `Close` asked,
    /// with `in_flight` operations still running on it ([`Input::FastPathClosed`]); they
    /// end through [`access_done`](Self::access_done).
    ///
    /// # Errors
    ///
    /// [`Error::FastPathNotClosing`] if no close of its gate is awaited,
    /// [`Error::UnknownClient`] for a handle that names no client; and the refusals of
    /// every input ([`handle`](Self::handle)).
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
    /// every input ([`handle`](Self::handle)).
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
    /// ([`handle`](Self::handle)).
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
    /// input ([`handle`](Self::handle)).
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
    /// refuses; and the refusals of every input ([`handle`](Self::handle)).
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
    /// refuses; and the refusals of every input ([`handle`](Self::handle)).
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
    /// every input ([`handle`](Self::handle)).
    pub fn reset_execute(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::ResetExecute { client })
    }

    /// Answer `RESET` refusing the reset ([`Input::ResetNack`], mlx5's nack): the cycle
    /// (for a member of a reset group, the group's) ends without a hardware reset,
    /// answered [`CycleOutcome::CannotReset`] naming this client.
    ///
    /// # Errors
    ///
    /// As [`reset_execute`](Self::reset_execute).
    pub fn reset_nack(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::ResetNack { client })
    }

    /// Declare that `device` shares its hardware reset with the other members of `group`
    /// ([`Input::JoinResetGroup`], DESIGN.md "Reset groups").
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyInResetGroup`] for a member of a group, [`Error::NoSuchGroup`] for
    /// an id beyond `DEVICES`, [`Error::GroupCycleInProgress`] while the group runs a
    /// cycle, [`Error::InvalidState`] for an absent device or during the device's own
    /// reset cycle; and the refusals of every input ([`handle`](Self::handle)).
    pub fn join_reset_group(
        &mut self,
        now: Tick,
        device: DeviceId,
        group: GroupId,
    ) -> Result<(), Error> {
        self.accept(now, Input::JoinResetGroup { device, group })
    }

    /// `device` resets alone again ([`Input::LeaveResetGroup`]); nothing to do for a
    /// device in no group.
    ///
    /// # Errors
    ///
    /// [`Error::GroupCycleInProgress`] while its group runs a cycle,
    /// [`Error::InvalidState`] for an absent device or during the device's own reset
    /// cycle; and the refusals of every input ([`handle`](Self::handle)).
    pub fn leave_reset_group(&mut self, now: Tick, device: DeviceId) -> Result<(), Error> {
        self.accept(now, Input::LeaveResetGroup { device })
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
    /// every input ([`handle`](Self::handle)).
    pub fn bind(&mut self, now: Tick, client: ClientHandle, ports: PortSet) -> Result<(), Error> {
        self.accept(now, Input::Bind { client, ports })
    }

    /// Hold the device open, vetoing query remove ([`Input::Hold`]).
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyHolding`], [`Error::UnknownClient`], [`Error::ClientRevoked`] or
    /// [`Error::ClientDetaching`] for a client that may not call; and the refusals of
    /// every input ([`handle`](Self::handle)).
    pub fn hold(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::Hold { client })
    }

    /// Let go of the hold ([`Input::ReleaseHold`]).
    ///
    /// # Errors
    ///
    /// [`Error::NotHolding`], [`Error::UnknownClient`], [`Error::ClientRevoked`] or
    /// [`Error::ClientDetaching`] for a client that may not call; and the refusals of
    /// every input ([`handle`](Self::handle)).
    pub fn release_hold(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::ReleaseHold { client })
    }

    /// Declare that the client cannot pause, vetoing query stop ([`Input::CannotPause`]).
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyCannotPause`], [`Error::UnknownClient`], [`Error::ClientRevoked`]
    /// or [`Error::ClientDetaching`] for a client that may not call; and the refusals of
    /// every input ([`handle`](Self::handle)).
    pub fn cannot_pause(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::CannotPause { client })
    }

    /// The client can pause again ([`Input::CanPause`]).
    ///
    /// # Errors
    ///
    /// [`Error::NotCannotPause`], [`Error::UnknownClient`], [`Error::ClientRevoked`] or
    /// [`Error::ClientDetaching`] for a client that may not call; and the refusals of
    /// every input ([`handle`](Self::handle)).
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
    /// ([`handle`](Self::handle)).
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
        self.outputs.room_for(needed)?;
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
    /// ([`handle`](Self::handle)).
    pub fn access_done(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        self.accept(now, Input::AccessDone { client })
    }
}
