//! DESIGN "Clients" and "Links and bindings": the registry, callbacks one at a time with a
//! bounded mailbox, hardware operations bracketed, revocation and fences.

use super::{Answer, Cl, Spec, Standing};
use pnp_lifecycle::{
    Access, CallbackAnswer, ClientHandle, ClientKind, DeviceId, Epoch, Error, Event, LinkState,
    Output, PhysPort, PortCaps, PortSet, Reply, Tick, Unregistered,
};

/// Hardware operations one client may have in flight (the core documents 16).
const OPS_PER_CLIENT: u32 = 16;

/// The events a client has not been called with yet, coalesced as documented: ordered
/// events, one bit a port for link news, and a last event (`Removed`/`Revoked`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Mailbox {
    ordered: Vec<Event>,
    links: PortSet,
    last: Option<Event>,
}

fn is_device_news(e: &Event) -> bool {
    matches!(
        e,
        Event::DeviceStarted { .. }
            | Event::DeviceStopped
            | Event::Suspending { .. }
            | Event::Resumed { .. }
            | Event::DeviceFatal
    )
}

impl Default for Mailbox {
    fn default() -> Self {
        Mailbox {
            ordered: Vec::new(),
            links: PortSet::EMPTY,
            last: None,
        }
    }
}

impl Mailbox {
    pub(super) fn len(&self) -> usize {
        self.ordered.len() + self.links.len() as usize + usize::from(self.last.is_some())
    }

    pub(super) fn holds_reset(&self) -> bool {
        self.ordered.contains(&Event::Reset)
    }

    pub(super) fn clear(&mut self) {
        *self = Mailbox::default();
    }

    fn put(&mut self, e: Event) {
        if self.last.is_some() {
            return;
        }
        match e {
            Event::Removed { .. } | Event::Revoked => {
                self.clear();
                self.last = Some(e);
            }
            Event::LinkChanged { port, .. } => self.links = self.links.with(port),
            Event::DeviceFatal => {
                self.ordered.retain(|x| !is_device_news(x));
                self.links = PortSet::EMPTY;
                self.ordered.push(e);
            }
            e if is_device_news(&e) => {
                self.ordered.retain(|x| !is_device_news(x));
                self.ordered.push(e);
            }
            Event::Recovered { .. } if self.holds_reset() => {
                if let Some(i) = self.ordered.iter().rposition(|x| *x == Event::Reset) {
                    self.ordered.remove(i);
                }
            }
            e => self.ordered.push(e),
        }
    }

    fn take(&mut self, links: &[Option<(PortCaps, LinkState)>], bound: PortSet) -> Option<Event> {
        if !self.ordered.is_empty() {
            return Some(self.ordered.remove(0));
        }
        while let Some(port) = self.links.iter().next() {
            self.links = PortSet(self.links.0 & !PortSet::single(port).0);
            // Told the port's state now, if the client is still bound to it.
            if let (true, Some(Some((_, state)))) =
                (bound.contains(port), links.get(usize::from(port.0)))
            {
                return Some(Event::LinkChanged {
                    port,
                    state: *state,
                });
            }
        }
        self.last.take()
    }
}

impl Spec {
    /// The client a handle names, if it is the slot's current, registered client.
    pub(super) fn known(&self, h: ClientHandle) -> Result<&Cl, Error> {
        let dev = self
            .devices
            .get(usize::from(h.device.0))
            .ok_or(Error::NoSuchDevice)?;
        match dev.clients.get(usize::from(h.slot)) {
            Some(c) if c.generation == h.generation && c.standing != Standing::Free => Ok(c),
            _ => Err(Error::UnknownClient),
        }
    }

    /// The client may call: registered, not revoked, not detaching.
    pub(super) fn callable(&self, h: ClientHandle) -> Result<&Cl, Error> {
        let c = self.known(h)?;
        match c.standing {
            Standing::Live => Ok(c),
            Standing::Revoked => Err(Error::ClientRevoked),
            _ => Err(Error::ClientDetaching),
        }
    }

    /// Tell a client `event`: a callback now, or its mailbox if one is in flight.
    pub(super) fn notify(&mut self, now: Tick, d: DeviceId, slot: usize, event: Event) {
        let h = self.handle_of(d, slot);
        let c = &mut self.dev_mut(d).clients[slot];
        if c.callback_since.is_some() {
            c.mailbox.put(event);
            return;
        }
        c.callback_since = Some(now);
        if event == Event::Reset {
            self.dev_mut(d).reset_delivered[slot] = Some(now);
        }
        self.out.push(Output::Notify { client: h, event });
    }

    /// Free a slot: the registration is over (`ClientGone`).
    pub(super) fn free(&mut self, d: DeviceId, slot: usize) {
        let h = self.handle_of(d, slot);
        let dev = self.dev_mut(d);
        if dev.told_reset.remove(&slot) {
            dev.reset_needed = true; // a voter left without saying it can recover
        }
        dev.answered.remove(&slot);
        dev.joined.remove(&slot);
        dev.reset_delivered[slot] = None;
        let c = &mut dev.clients[slot];
        let generation = c.generation.wrapping_add(1);
        *c = Cl::new();
        c.generation = generation;
        self.out.push(Output::ClientGone { client: h });
    }

    /// An unregistered client's slot is freed once nothing of its is in flight.
    pub(super) fn free_if_idle(&mut self, d: DeviceId, slot: usize) {
        let c = &self.dev(d).clients[slot];
        let shut = c.gate == super::fast::Gate::Shut;
        if c.callback_since.is_none() && c.ops == 0 && !c.fence_requested && shut {
            self.free(d, slot);
        }
    }

    /// Revoke a client: it leaves any vote; fenced if anything of its is in flight,
    /// otherwise told `Revoked` (or, told `Removed` already, simply freed).
    pub(super) fn revoke(&mut self, now: Tick, d: DeviceId, slot: usize) {
        let h = self.handle_of(d, slot);
        let dev = self.dev_mut(d);
        if dev.told_reset.remove(&slot) {
            dev.reset_needed = true; // a voter left without saying it can recover
        }
        dev.answered.remove(&slot);
        dev.joined.remove(&slot);
        dev.reset_delivered[slot] = None;
        let c = &mut dev.clients[slot];
        let was = c.standing;
        if was != Standing::Unregistered {
            c.standing = Standing::Revoked;
        }
        c.mailbox.clear();
        c.detach_by = None;
        // A gate still closing keeps its operations uncounted until the fence is done.
        let gate_open = matches!(c.gate, super::fast::Gate::Closing(_));
        if c.callback_since.is_some() || c.ops > 0 || gate_open {
            c.fence_requested = true;
            self.out.push(Output::Fence { client: h });
        } else if was == Standing::Told {
            // Told `Removed` already (its last event): revoked silently, freed with the
            // removal.
        } else {
            self.notify(now, d, slot, Event::Revoked);
        }
    }

    pub(super) fn register(&mut self, d: DeviceId, kind: ClientKind) -> Answer {
        if self.driver != pnp_lifecycle::DriverPhase::Loaded {
            return Err(Error::Unloading);
        }
        let dev = self.dev(d);
        if dev.removal_owed {
            return Err(Error::RemoveInProgress);
        }
        let Some(slot) = dev
            .clients
            .iter()
            .position(|c| c.standing == Standing::Free)
        else {
            return Err(Error::RegistryFull);
        };
        let epoch = dev.epoch;
        let in_cycle = dev.in_cycle();
        let dev = self.dev_mut(d);
        let c = &mut dev.clients[slot];
        c.standing = Standing::Live;
        c.kind = kind;
        c.interface = epoch;
        if in_cycle {
            dev.joined.insert(slot);
        }
        Ok(Reply::Registered {
            client: self.handle_of(d, slot),
            epoch,
        })
    }

    pub(super) fn unregister(&mut self, now: Tick, h: ClientHandle) -> Answer {
        let d = h.device;
        let slot = usize::from(h.slot);
        let Some(c) = self.dev(d).clients.get(slot) else {
            return Err(Error::UnknownClient);
        };
        if h.generation < c.generation
            || (h.generation == c.generation && c.standing == Standing::Unregistered)
        {
            return Ok(Reply::Unregistered(Unregistered::Already));
        }
        if h.generation != c.generation || c.standing == Standing::Free {
            return Err(Error::UnknownClient);
        }
        let busy = c.callback_since.is_some()
            || c.fence_requested
            || c.ops > 0
            || c.gate != super::fast::Gate::Shut;
        let dev = self.dev_mut(d);
        if dev.told_reset.remove(&slot) {
            dev.reset_needed = true; // a voter left without saying it can recover
        }
        dev.answered.remove(&slot);
        dev.joined.remove(&slot);
        dev.reset_delivered[slot] = None;
        let c = &mut dev.clients[slot];
        c.mailbox.clear();
        if c.ops == 0 && !matches!(c.gate, super::fast::Gate::Closing(_)) {
            c.detach_by = None; // detached: only its callback's own deadline runs
        }
        if busy {
            c.standing = Standing::Unregistered;
        } else {
            self.free(d, slot);
        }
        let _ = now;
        Ok(Reply::Unregistered(Unregistered::Now))
    }

    pub(super) fn callback_done(&mut self, now: Tick, h: ClientHandle) -> Answer {
        let c = self.known(h)?;
        if c.fence_requested {
            return Ok(Reply::Accepted);
        }
        if c.callback_since.is_none() {
            return Err(Error::NoCallbackInFlight);
        }
        let d = h.device;
        let slot = usize::from(h.slot);
        self.dev_mut(d).clients[slot].callback_since = None;
        if self.dev(d).clients[slot].standing == Standing::Unregistered {
            self.free_if_idle(d, slot);
            return Ok(Reply::Accepted);
        }
        let ports = self.dev(d).ports.clone();
        let bound = self.dev(d).clients[slot].ports;
        if let Some(next) = self.dev_mut(d).clients[slot].mailbox.take(&ports, bound) {
            self.notify(now, d, slot, next);
        }
        Ok(Reply::Accepted)
    }

    pub(super) fn callback_done_with(
        &mut self,
        now: Tick,
        h: ClientHandle,
        answer: CallbackAnswer,
    ) -> Answer {
        // The answer meets its own cell of the table first (the same row).
        let phase = self.dev(h.device).phase();
        if let pnp_lifecycle::table::Disposition::Refuse =
            pnp_lifecycle::table::disposition(phase, answer.kind())
        {
            return Err(Error::InvalidState {
                phase,
                input: answer.kind(),
            });
        }
        let c = self.known(h)?;
        if c.callback_since.is_none() {
            return Err(Error::NoCallbackInFlight);
        }
        let reset_waits = c.mailbox.holds_reset();
        // The answer is the client's call: one that may not call is refused whole.
        self.callable(h)?;
        if reset_waits
            && matches!(
                answer,
                CallbackAnswer::ResetExecute | CallbackAnswer::CanRecover
            )
        {
            return Err(Error::ResetNotDelivered);
        }
        self.callback_done(now, h)?;
        let input = answer.input(h);
        self.rule(now, h.device, input)
    }

    pub(super) fn fence_done(&mut self, h: ClientHandle) -> Answer {
        let c = self.known(h)?;
        if !c.fence_requested {
            return Err(Error::NoFenceRequested);
        }
        let d = h.device;
        let slot = usize::from(h.slot);
        let c = &mut self.dev_mut(d).clients[slot];
        c.fence_requested = false;
        c.callback_since = None;
        c.ops = 0;
        c.gate = super::fast::Gate::Shut;
        if c.standing == Standing::Unregistered {
            self.free(d, slot);
        }
        Ok(Reply::Accepted)
    }

    pub(super) fn acquire_interface(&mut self, h: ClientHandle) -> Answer {
        self.callable(h)?;
        let epoch = self.dev(h.device).epoch;
        self.cl_mut(h).interface = epoch;
        Ok(Reply::Interface(epoch))
    }

    pub(super) fn bind(&mut self, h: ClientHandle, ports: PortSet) -> Answer {
        self.callable(h)?;
        if ports.is_empty() {
            return Err(Error::EmptyBinding);
        }
        let dev = self.dev(h.device);
        let mut first = None;
        for p in 0..8u8 {
            if !ports.contains(PhysPort(p)) {
                continue;
            }
            let Some(Some((caps, _))) = dev.ports.get(usize::from(p)) else {
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
                _ => {}
            }
        }
        self.cl_mut(h).ports = ports;
        Ok(Reply::Accepted)
    }

    pub(super) fn link_changed(
        &mut self,
        now: Tick,
        d: DeviceId,
        port: PhysPort,
        state: LinkState,
    ) -> Answer {
        let Some(Some((caps, old))) = self.dev(d).ports.get(usize::from(port.0)).copied() else {
            return Err(Error::NoSuchPort);
        };
        if old == state {
            return Ok(Reply::Accepted);
        }
        self.dev_mut(d).ports[usize::from(port.0)] = Some((caps, state));
        if self.dev(d).failed.is_some() {
            return Ok(Reply::Accepted); // after `DeviceFatal` only `Removed`/`Revoked` (I4)
        }
        for s in self.live(d) {
            if self.dev(d).clients[s].ports.contains(port) {
                self.notify(now, d, s, Event::LinkChanged { port, state });
            }
        }
        Ok(Reply::Accepted)
    }

    pub(super) fn hold(&mut self, h: ClientHandle, hold: bool) -> Answer {
        let c = self.callable(h)?;
        match (hold, c.holding) {
            (true, true) => Err(Error::AlreadyHolding),
            (false, false) => Err(Error::NotHolding),
            _ => {
                self.cl_mut(h).holding = hold;
                Ok(Reply::Accepted)
            }
        }
    }

    pub(super) fn pause(&mut self, h: ClientHandle, cannot: bool) -> Answer {
        let c = self.callable(h)?;
        match (cannot, c.cannot_pause) {
            (true, true) => Err(Error::AlreadyCannotPause),
            (false, false) => Err(Error::NotCannotPause),
            _ => {
                self.cl_mut(h).cannot_pause = cannot;
                Ok(Reply::Accepted)
            }
        }
    }

    pub(super) fn access(&mut self, h: ClientHandle, epoch: Epoch, what: Access) -> Answer {
        let c = self.callable(h)?;
        let dev = self.dev(h.device);
        // Stale until the client re-acquires, whatever epoch it names.
        if epoch != dev.epoch || c.interface != dev.epoch {
            return Err(Error::StaleEpoch { current: dev.epoch });
        }
        let slot = usize::from(h.slot);
        if dev.answered.contains(&slot) || dev.joined.contains(&slot) {
            return Err(Error::ResetInProgress);
        }
        if let Some(answer) = self.access_in_dx(h.device) {
            return answer;
        }
        let dev = self.dev(h.device);
        let c = self.cl(h);
        match what {
            Access::QueryCounters(port) => match dev.ports.get(usize::from(port.0)) {
                Some(Some(_)) => Ok(Reply::AccessGranted),
                _ => Err(Error::NoSuchPort),
            },
            Access::HardwareOp => {
                if c.ops >= OPS_PER_CLIENT {
                    return Err(Error::TooManyOperations);
                }
                self.cl_mut(h).ops += 1;
                Ok(Reply::AccessGranted)
            }
        }
    }

    pub(super) fn access_done(&mut self, h: ClientHandle) -> Answer {
        let c = self.known(h)?;
        if c.fence_requested {
            return Ok(Reply::Accepted);
        }
        if c.ops == 0 {
            return Err(Error::NoOperationInFlight);
        }
        self.cl_mut(h).ops -= 1;
        if self.cl(h).standing == Standing::Unregistered {
            let closing = matches!(self.cl(h).gate, super::fast::Gate::Closing(_));
            if self.cl(h).ops == 0 && !closing {
                self.cl_mut(h).detach_by = None; // detached, nothing left to drain
            }
            self.free_if_idle(h.device, usize::from(h.slot));
        }
        Ok(Reply::Accepted)
    }
}
