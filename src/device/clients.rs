//! Clients: telling them events (one callback in flight, the rest in a bounded mailbox),
//! revoking them, and the inputs a client sends (register, unregister, callbacks returned,
//! fences, vetoes, bindings, hardware operations).

use super::*;
use crate::table::{disposition, Disposition};

impl<const C: usize, const P: usize> Device<C, P> {
    // ---- notifications -------------------------------------------------------------

    /// Call the client with `event` now if no callback of its is in flight, else keep the
    /// event in its mailbox (bounded: see `crate::mailbox`). Inlined on a hosted target (a
    /// call a client was a twentieth of a reset cycle); a bare-metal build keeps one copy.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub(super) fn notify<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        index: usize,
        event: Event,
    ) {
        if let Some(slot) = self.registry.slots.get_mut(index) {
            notify_slot(cx, &mut self.earliest, index, slot, event);
        }
    }

    /// The client's callback returned: hand over its next waiting event, if any.
    pub(super) fn deliver_next<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, index: usize) {
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
        if let Some(event) = slot.take(link_of) {
            slot.call(cx.now);
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
    pub(super) fn revoke<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, index: usize, tell: bool) {
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
        slot.clear_mailbox();
        let fence = (slot.callback().is_some() || slot.ops_pending())
            && !slot.fence_requested()
            && !planted!(NoFenceForStuckCallback);
        if fence {
            slot.request_fence();
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
        self.gate_follows_client(cx, index); // I15: a revocation closes the gate
    }

    /// Tell every active client `event`. A client that can take it now is told in place
    /// (`tell`); the callbacks' deadlines, all the same, are added once at the end.
    pub(super) fn notify_active<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, event: Event) {
        let mut told: u16 = 0;
        for index in self.registry.occupied() {
            let Some(slot) = self.registry.slots.get_mut(index) else {
                continue;
            };
            if !slot.is_active() {
                continue;
            }
            if event != Event::Reset && tell(cx, index, slot, event).is_some() {
                told += 1;
            } else {
                self.notify(cx, index, event);
            }
        }
        self.earliest.add_n(callback_due(cx.config, cx.now), told);
    }

    /// The end of a cycle in one pass over the clients: every active client's role goes
    /// back to idle and it is told the end, as `set_roles` then `notify_active` would
    /// (telling reads no role). With `reset_end` the cycle reset the hardware: every
    /// interface is stale and the clients are told `RESET_END`; without, `Recovered`.
    /// Inlined on a hosted target, where each caller names `reset_end` so the loop tests
    /// it for no client; a bare-metal build keeps one copy.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    #[cfg_attr(target_os = "none", inline(never))]
    pub(super) fn end_cycle_notify<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        reset_end: bool,
    ) {
        let epoch = self.epoch;
        let event = if reset_end {
            Event::ResetEnd { epoch }
        } else {
            Event::Recovered { epoch }
        };
        // I3: a cycle ends only once every voter answered, left or was revoked: no answer
        // deadline goes here (one is left only under a planted fault).
        if planted!(ResetWithOneVoterLeft) {
            self.earliest.invalidate();
        }
        let mut told: u16 = 0;
        let occupied = self.registry.occupied();
        let earliest = &mut self.earliest;
        let slots = self.registry.slots.get_mut(occupied).unwrap_or(&mut []);
        for (index, slot) in slots.iter_mut().enumerate() {
            let ClientState::Active { role, fresh, .. } = &mut slot.state else {
                continue;
            };
            *role = Role::Idle;
            if reset_end {
                *fresh = false;
            }
            if tell(cx, index, slot, event).is_some() {
                told += 1;
            } else {
                notify_slot(cx, earliest, index, slot, event);
            }
        }
        self.earliest.add_n(callback_due(cx.config, cx.now), told);
    }

    /// Set every active client's role (and, after a completed reset, mark it stale).
    pub(super) fn set_roles(&mut self, role: Role, interface_stale: bool) {
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

    /// Free a slot whose client is gone for good (unregistered with nothing in flight, or
    /// force-detached at the end of removal): [`Output::ClientGone`], and the slot's generation
    /// moves on so old handles go stale (I1).
    pub(super) fn free_slot<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, index: usize) {
        let before = self.deadlines_of(cx.config, index);
        if let Some(slot) = self.registry.slot_mut(index) {
            let client = Registry::<C>::handle(cx.device, index, slot);
            let had_ops = slot.ops_pending();
            slot.free();
            self.registry.ops_changed(index, had_ops);
            self.registry.mark(index, false);
            cx.out.push(Output::ClientGone { client });
        }
        self.slot_changed(cx.config, index, before);
    }

    /// A voter answered `RESET` (`needs_reset` unless it can recover): `voter_left`, then
    /// `execute_if_quiesced`, testing the phase once.
    #[inline(always)]
    pub(super) fn voter_answered<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        needs_reset: bool,
    ) {
        if let Phase::Quiescing {
            voters,
            reset_needed,
            ..
        } = &mut self.phase
        {
            *reset_needed |= needs_reset;
            // `voters` goes down by one (never below zero), and the last makes it run.
            if *voters <= 1 {
                *voters = 0;
                self.execute_quiesced(cx);
            } else {
                *voters -= 1;
                if planted!(ResetWithOneVoterLeft) && *voters == 1 {
                    self.execute_quiesced(cx);
                }
            }
        }
    }

    /// A voter answered, left or was revoked. Only a `CanRecover` answer leaves the
    /// reset unneeded: a voter that answered `ResetExecute`, left or was revoked without
    /// saying it can recover makes the reset run.
    pub(super) fn voter_left(&mut self, needs_reset: bool) {
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

    // ---- clients ---------------------------------------------------------------------

    /// [`Input::Register`]: a new client takes the lowest free slot. During a cycle it joins
    /// without voting and hears `RESET_END` with the rest; refused while unloading or when a
    /// removal waits behind the reset.
    #[inline(never)]
    pub(super) fn register<const Q: usize>(
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
        slot.register(
            ClientState::Active {
                role,
                fresh: true,
                holding: false,
                cannot_pause: false,
            },
            kind,
        );
        let client = Registry::<C>::handle(cx.device, index, slot);
        self.registry.mark(index, true);
        self.gate_follows_client(cx, index); // I15: opens while running
        Ok(Reply::Registered {
            client,
            epoch: self.epoch,
        })
    }

    /// [`Input::Unregister`]: nothing more is addressed to the client (I1); its slot frees once
    /// its callback, operations and fence are over. A voter that leaves makes the reset run.
    /// Answered `Already` for a handle of a client that is gone.
    #[inline(never)]
    pub(super) fn unregister<const Q: usize>(
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
        self.close_gate(cx, index); // I15: unregister closes the gate
        let slot = self.registry.slot_mut(index).ok_or(Error::UnknownClient)?;
        let was_voting = slot.is_voting();
        let before = slot_deadlines(cx.config, slot);
        // I1: after unregister returns, nothing more is addressed to the client.
        if !planted!(NotifyAfterUnregister) {
            slot.clear_mailbox();
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
    pub(super) fn callback_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
    ) -> Result<(), Error> {
        let (index, slot) = self.registry.current_mut(client)?;
        if slot.fence_requested() {
            // I12: once a fence is asked for, only the fence ends the wait.
            return Ok(());
        }
        let Some(called) = slot.callback() else {
            return Err(Error::NoCallbackInFlight);
        };
        self.earliest.remove(callback_due(cx.config, called));
        slot.callback_returned();
        let deliver_anyway = planted!(NotifyAfterUnregister) && slot.has_mail();
        if slot.state == ClientState::Unregistered && !deliver_anyway {
            if !slot.in_flight() {
                self.free_slot(cx, index);
            }
        } else if slot.has_mail() {
            // Nothing waiting (the usual case) needs no delivery.
            self.deliver_next(cx, index);
        }
        self.progress(cx);
        Ok(())
    }

    /// [`Input::CallbackDoneWith`]: the callback returned with the client's answer
    /// (DESIGN.md "Cost"): the return and the answer as two inputs would do them, refused
    /// whole. Everything either half could refuse is checked first (I10): the answer's own
    /// table cell, a live client, a callback in flight, and the answer's own conditions; a
    /// `RESET` answer also needs the `RESET` delivered before this return. One lookup of
    /// the client serves both halves.
    #[inline(always)]
    pub(super) fn callback_done_with<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
        answer: CallbackAnswer,
    ) -> Result<Reply, Error> {
        let phase = self.phase.kind();
        // The answer's cells hold only Handle or Refuse (checked at compile time).
        if disposition(phase, answer.kind()) != Disposition::Handle {
            return Err(Error::InvalidState {
                phase,
                input: answer.kind(),
            });
        }
        let (index, slot) = self.registry.active_mut(client)?;
        let Some(called) = slot.callback() else {
            return Err(Error::NoCallbackInFlight);
        };
        let ClientState::Active {
            role, cannot_pause, ..
        } = slot.state
        else {
            return Err(Error::ClientDetaching);
        };
        let reset_answer = matches!(
            answer,
            CallbackAnswer::ResetExecute | CallbackAnswer::CanRecover
        );
        match answer {
            CallbackAnswer::ResetExecute | CallbackAnswer::CanRecover => {
                if role != Role::Voting {
                    return Err(Error::NotVoting);
                }
                if slot.mailbox().holds_reset() {
                    return Err(Error::ResetNotDelivered);
                }
            }
            CallbackAnswer::CannotPause if cannot_pause => {
                return Err(Error::AlreadyCannotPause);
            }
            CallbackAnswer::CannotPause | CallbackAnswer::AcquireInterface => {}
        }
        // Nothing below refuses. A live client has no fence asked for, so its return is
        // `callback_done`'s usual case and its callback's deadline runs; it stays live
        // (and voting), so the answer meets what it met above.
        self.earliest.remove(callback_due(cx.config, called));
        slot.callback_returned();
        // The answer's own change, made here on the slot at hand (nothing the return
        // goes on to do below reads it).
        if let ClientState::Active {
            role,
            fresh,
            cannot_pause,
            ..
        } = &mut slot.state
        {
            match answer {
                CallbackAnswer::ResetExecute | CallbackAnswer::CanRecover => *role = Role::Acked,
                CallbackAnswer::CannotPause => *cannot_pause = true,
                CallbackAnswer::AcquireInterface => *fresh = true,
            }
        }
        if reset_answer {
            // The voter's answer deadline goes; the events its mailbox may hold hold no
            // RESET (checked above), so handing one over below moves no answer deadline.
            self.earliest.remove(voter_due(cx.config, slot));
        }
        if slot.has_mail() {
            self.deliver_next(cx, index);
        }
        if reset_answer {
            // Its own check: the reset runs once every voter answered.
            self.voter_answered(cx, answer == CallbackAnswer::ResetExecute);
        } else {
            // A wait the return may end.
            self.progress(cx);
        }
        if answer == CallbackAnswer::AcquireInterface {
            if self.fast_path {
                // I15: a gate opens only at the device's current epoch.
                self.gate_follows_client(cx, index);
            }
            return Ok(Reply::Interface(self.epoch));
        }
        Ok(Reply::Accepted)
    }

    /// [`Input::FenceDone`]: the owner fenced a revoked client: its callback and operations are
    /// over, and a stop, reset or removal waiting for them goes on (I12).
    #[inline(never)]
    pub(super) fn fence_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
    ) -> Result<(), Error> {
        let index = self.registry.current(client)?;
        let slot = self.registry.slot_mut(index).ok_or(Error::UnknownClient)?;
        if !slot.fence_requested() {
            return Err(Error::NoFenceRequested);
        }
        let before = slot_deadlines(cx.config, slot);
        let had_ops = slot.ops_pending();
        slot.fence_reported();
        slot.callback_returned();
        slot.ops = 0;
        slot.gate = fast::Gate::Shut; // the fence covers the fast path too
        self.registry.ops_changed(index, had_ops);
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
    pub(super) fn acquire(&mut self, client: ClientHandle) -> Result<Epoch, Error> {
        let (_, slot) = self.registry.active_mut(client)?;
        if let ClientState::Active { fresh, .. } = &mut slot.state {
            *fresh = true;
        }
        Ok(self.epoch)
    }

    /// [`Input::Bind`]: the client binds to ports of one protocol (a mixed binding is refused,
    /// naming both protocols).
    #[inline(never)]
    pub(super) fn bind(&mut self, client: ClientHandle, ports: PortSet) -> Result<(), Error> {
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
    pub(super) fn set_veto(
        &mut self,
        client: ClientHandle,
        veto: ClientVeto,
        on: bool,
    ) -> Result<(), Error> {
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

    /// [`Input::Access`]: grant a client's access at its current epoch while the device runs
    /// (a voter may still access during quiescing). A hardware operation stays in flight until
    /// [`Input::AccessDone`]; in a low-power state the access waits for (or is refused by) the
    /// power state (I14).
    #[inline(never)]
    pub(super) fn access<const Q: usize>(
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
            // I14 (Power): no access is granted in a low-power state: after an idle
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
            // I12: a hardware operation is bracketed: in flight until `AccessDone`.
            Access::HardwareOp => {
                let slot = self.registry.slot_mut(index).ok_or(Error::UnknownClient)?;
                if slot.ops >= OPS_PER_CLIENT {
                    return Err(Error::TooManyOperations);
                }
                let had_ops = slot.ops_pending();
                slot.ops += 1;
                self.registry.ops_changed(index, had_ops);
                self.operations_changed();
            }
        }
        Ok(Reply::AccessGranted)
    }

    /// [`Input::AccessDone`]: a hardware operation ended; a stop, reset, power-down or removal
    /// waiting for operations may go on (I12).
    #[inline(never)]
    pub(super) fn access_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
    ) -> Result<(), Error> {
        let index = self.registry.current(client)?;
        let slot = self.registry.slot_mut(index).ok_or(Error::UnknownClient)?;
        if slot.fence_requested() {
            // I12: once a fence is asked for, only the fence ends the wait.
            return Ok(());
        }
        if slot.ops == 0 {
            return Err(Error::NoOperationInFlight);
        }
        let had_ops = slot.ops_pending();
        slot.ops -= 1;
        let free = slot.state == ClientState::Unregistered && !slot.in_flight();
        self.registry.ops_changed(index, had_ops);
        self.operations_changed();
        if free {
            self.free_slot(cx, index);
        }
        self.progress(cx);
        Ok(())
    }

    /// Something in flight finished or was fenced: a stop, a reset or a removal that
    /// waited for it may go on. Inlined on a hosted target (most inputs find nothing
    /// waiting: one compare instead of a call); a bare-metal build keeps one copy.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub(super) fn progress<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
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
}

/// `Device::notify` on the slot at hand (`index` in its registry), the device's
/// deadlines following, so that a loop over the slots can tell each.
#[cfg_attr(not(target_os = "none"), inline(always))]
fn notify_slot<const Q: usize>(
    cx: &mut Ctx<'_, Q>,
    earliest: &mut Earliest,
    index: usize,
    slot: &mut Slot,
    event: Event,
) {
    if (slot.callback().is_none() || planted!(SecondCallbackInFlight)) && !slot.has_mail() {
        // The deadlines follow: the callback's begins, and the answer's with a RESET.
        if slot.callback().is_some() {
            earliest.remove(callback_deadline(cx.config, slot));
        }
        slot.call(cx.now);
        earliest.add(callback_deadline(cx.config, slot));
        if event == Event::Reset {
            if slot.reset_delivered.is_some() {
                earliest.remove(voter_deadline(cx.config, slot));
            }
            slot.reset_delivered = Some(cx.now);
            earliest.add(voter_deadline(cx.config, slot));
        }
        let client = slot.handle(cx.device, index);
        cx.out.push(Output::Notify { client, event });
    } else {
        if event == Event::Reset && slot.reset_delivered.is_some() {
            // I13: no answer deadline runs while the RESET cannot be answered.
            earliest.remove(voter_deadline(cx.config, slot));
            slot.reset_delivered = None;
        }
        // I11: bounded by construction (a newer link state replaces an older one,
        // `Removed`/`Revoked` replace everything): no client can fill it.
        slot.put(event);
    }
}

/// Hand `event` to the client in slot `index` at once if it can take it now
/// (`Slot::can_take_now`), as `Device::notify` does, except that its callback's deadline
/// (and, with a `RESET`, its answer's) is the caller's to add: clients told by one input
/// share them, so they are added once for all. The client's kind if it was told; if not,
/// the caller goes through `notify`.
#[cfg_attr(not(target_os = "none"), inline(always))]
pub(super) fn tell<const Q: usize>(
    cx: &mut Ctx<'_, Q>,
    index: usize,
    slot: &mut Slot,
    event: Event,
) -> Option<ClientKind> {
    if !slot.can_take_now() {
        return None;
    }
    slot.call(cx.now);
    if event == Event::Reset {
        slot.reset_delivered = Some(cx.now);
    }
    let client = slot.handle(cx.device, index);
    cx.out.push(Output::Notify { client, event });
    Some(slot.kind)
}

/// A veto a client can raise against a PnP query.
#[derive(Clone, Copy)]
pub(super) enum ClientVeto {
    /// An open handle: vetoes query remove.
    Hold,
    /// Work that cannot pause: vetoes query stop.
    CannotPause,
}
