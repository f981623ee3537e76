//! The fixed-capacity client registry of one device.

use crate::types::{ClientHandle, ClientKind, DeviceId, Error, PortSet};

/// Callbacks one client may have in flight. An input that could notify a client already at
/// `CALLBACK_LIMIT - NOTIFY_PER_INPUT` is refused with [`Error::CallbackBacklog`].
pub(crate) const CALLBACK_LIMIT: u8 = u8::MAX;
/// The most notifications one input addresses to one client (`RESET_END` then `RESET`).
pub(crate) const NOTIFY_PER_INPUT: u8 = 2;

value_type! {
    /// A client's part in the reset cycle.
    pub enum Role {
        /// No cycle, or the device is not running.
        Idle,
        /// Told `RESET`, has not answered: the hardware reset waits for it.
        Voting,
        /// Answered `RESET`.
        Acked,
        /// Registered during the cycle: not a voter, told `RESET_END` with the rest.
        Joined,
    }
}

value_type! {
    /// Where a registration stands.
    pub enum ClientState {
        /// No client.
        Free,
        /// Registered and live.
        Active {
            /// Its part in the reset cycle.
            role: Role,
            /// Whether its interface is of the current epoch.
            fresh: bool,
            /// Whether it holds the device (vetoes query remove).
            holding: bool,
        },
        /// Told `Removed`; may only detach.
        Removed,
        /// Fenced: every call fails; waits for unregister or device removal.
        Revoked,
        /// Unregistered; waits for its callbacks to come back, then the slot is free.
        Unregistered,
    }
}

value_type! {
    /// One registry slot. Eight bytes.
    pub struct Slot {
        /// The generation of the current or next client of this slot.
        pub generation: u16,
        /// The registration's state.
        pub state: ClientState,
        /// Trusted or not (meaningless while free).
        pub kind: ClientKind,
        /// The ports the client bound.
        pub ports: PortSet,
        /// Callbacks to this client in flight.
        pub callbacks: u8,
    }
}

impl Slot {
    pub(crate) const FREE: Slot = Slot {
        generation: 0,
        state: ClientState::Free,
        kind: ClientKind::Trusted,
        ports: PortSet::EMPTY,
        callbacks: 0,
    };

    /// Whether a client occupies the slot (any state but free).
    pub(crate) const fn occupied(&self) -> bool {
        !matches!(self.state, ClientState::Free)
    }

    pub(crate) const fn is_active(&self) -> bool {
        matches!(self.state, ClientState::Active { .. })
    }

    pub(crate) const fn role(&self) -> Option<Role> {
        match self.state {
            ClientState::Active { role, .. } => Some(role),
            _ => None,
        }
    }

    pub(crate) const fn is_voting(&self) -> bool {
        matches!(self.role(), Some(Role::Voting))
    }

    /// Free the slot for a later client: the generation moves on, so old handles go stale.
    /// A slot whose generation is exhausted stays retired (never reissued).
    pub(crate) fn free(&mut self) {
        let generation = self.generation.saturating_add(1);
        *self = Slot {
            generation,
            ..Slot::FREE
        };
    }
}

/// How a handle relates to its slot.
pub(crate) enum Lookup {
    /// The handle names the slot's current client.
    Current(usize),
    /// The handle names a client of this slot that is gone for good.
    Past,
}

/// The registry of one device.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Registry<const C: usize> {
    pub(crate) slots: [Slot; C],
}

impl<const C: usize> Registry<C> {
    pub(crate) const fn new() -> Self {
        Registry {
            slots: [Slot::FREE; C],
        }
    }

    /// Resolve a handle. Unknown: out of range, a generation never issued, or a free slot.
    pub(crate) fn lookup(&self, handle: ClientHandle) -> Result<Lookup, Error> {
        let index = usize::from(handle.slot);
        let slot = self.slots.get(index).ok_or(Error::UnknownClient)?;
        if handle.generation < slot.generation {
            return Ok(Lookup::Past);
        }
        if handle.generation > slot.generation || !slot.occupied() {
            return Err(Error::UnknownClient);
        }
        Ok(Lookup::Current(index))
    }

    /// The index of the handle's current, occupied slot.
    pub(crate) fn current(&self, handle: ClientHandle) -> Result<usize, Error> {
        match self.lookup(handle)? {
            Lookup::Current(index) => Ok(index),
            Lookup::Past => Err(Error::UnknownClient),
        }
    }

    /// The index of the handle's slot if the client is active, else the typed reason.
    pub(crate) fn active(&self, handle: ClientHandle) -> Result<usize, Error> {
        let index = self.current(handle)?;
        match self.slots.get(index).map(|s| s.state) {
            Some(ClientState::Active { .. }) => Ok(index),
            Some(ClientState::Revoked) => Err(Error::ClientRevoked),
            _ => Err(Error::ClientDetaching),
        }
    }

    pub(crate) fn slot(&self, index: usize) -> Option<&Slot> {
        self.slots.get(index)
    }

    pub(crate) fn slot_mut(&mut self, index: usize) -> Option<&mut Slot> {
        self.slots.get_mut(index)
    }

    /// The first slot a new client can take.
    pub(crate) fn free_slot(&self) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| !s.occupied() && s.generation < u16::MAX)
    }

    pub(crate) fn handle(device: DeviceId, index: usize, slot: &Slot) -> ClientHandle {
        ClientHandle {
            device,
            slot: u8::try_from(index).unwrap_or(u8::MAX),
            generation: slot.generation,
        }
    }

    pub(crate) fn any_holding(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s.state, ClientState::Active { holding: true, .. }))
    }

    /// Whether every client has detached: only free and revoked slots, no callback out.
    pub(crate) fn drained(&self) -> bool {
        self.slots.iter().all(|s| {
            s.callbacks == 0 && matches!(s.state, ClientState::Free | ClientState::Revoked)
        })
    }

    /// Whether some occupied client could not take `NOTIFY_PER_INPUT` more callbacks.
    pub(crate) fn backlogged(&self) -> bool {
        self.slots
            .iter()
            .any(|s| s.occupied() && s.callbacks > CALLBACK_LIMIT - NOTIFY_PER_INPUT)
    }
}
