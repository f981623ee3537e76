//! The vocabulary of the machine: identifiers, inputs, outputs, client events and errors.

use crate::table::{InputKind, PhaseKind};

mod config;
mod error;
mod input;
mod output;
mod reply;

pub use config::*;
pub use error::*;
pub use input::*;
pub use output::*;
pub use reply::*;

ordered_type! {
    /// Which device of the driver an input or output concerns: an index below the
    /// machine's `DEVICES` capacity, chosen by the owner at [`Input::AddDevice`].
    pub struct DeviceId(pub u8);
}

ordered_type! {
    /// A device's *physical* port (what InfiniBand calls a port: one cable, one link), an
    /// index below the machine's `PORTS` capacity. Named so that it cannot be confused
    /// with the OS ports in `ports/`.
    pub struct PhysPort(pub u8);
}

ordered_type! {
    /// A set of physical ports, one bit per [`PhysPort`] (so at most 8 ports a device).
    pub struct PortSet(pub u8);
}

impl PortSet {
    /// The empty set.
    pub const EMPTY: PortSet = PortSet(0);

    /// The set holding only `port` (empty if the index is 8 or more).
    #[must_use]
    pub const fn single(port: PhysPort) -> PortSet {
        if port.0 < 8 {
            PortSet(1 << port.0)
        } else {
            PortSet(0)
        }
    }

    /// This set with `port` added.
    #[must_use]
    pub const fn with(self, port: PhysPort) -> PortSet {
        PortSet(self.0 | PortSet::single(port).0)
    }

    /// Whether `port` is in the set.
    #[must_use]
    pub const fn contains(self, port: PhysPort) -> bool {
        port.0 < 8 && self.0 & (1 << port.0) != 0
    }

    /// Whether the set is empty.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// How many ports the set holds.
    #[must_use]
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// The ports of the set, lowest first.
    pub fn iter(self) -> impl Iterator<Item = PhysPort> {
        (0u8..8).map(PhysPort).filter(move |p| self.contains(*p))
    }
}

ordered_type! {
    /// A reset group: devices that share one hardware reset (the functions of one chip, a
    /// physical function and its virtual functions), declared by the owner with
    /// [`Input::JoinResetGroup`]. An index below the machine's `DEVICES` capacity (a group
    /// has at least one member, so there are never more groups than devices).
    pub struct GroupId(pub u8);
}

ordered_type! {
    /// A client registration: the registry slot plus the slot's generation when the client
    /// registered. A handle from before never names a later client of the same slot.
    pub struct ClientHandle {
        /// The device the client registered with.
        pub device: DeviceId,
        /// The registry slot.
        pub slot: u8,
        /// The slot's generation at registration.
        pub generation: u16,
    }
}

ordered_type! {
    /// The device's interface generation. It grows by one at every completed reset; an
    /// interface acquired at an older epoch is stale.
    pub struct Epoch(pub u32);
}

ordered_type! {
    /// A point in time on the owner's monotonic clock, in the owner's tick unit.
    ///
    /// The machine has no clock: the owner passes `now` with every input
    /// ([`crate::Lifecycle::handle`]), and every deadline counts from the `now` of the input
    /// that started it. The timeouts in [`Config`] are in the same unit;
    /// [`Config::DEFAULT`] assumes milliseconds. [`Tick::from_duration`] and
    /// [`Tick::to_duration`] convert from and to [`core::time::Duration`] for any tick rate
    /// (an embedded timer at 32,768 Hz, a kernel's jiffies, `std::time::Instant`'s
    /// nanoseconds).
    pub struct Tick(pub u64);
}

impl Tick {
    /// The time `elapsed` after a clock's zero, at `ticks_per_second` (rounded down,
    /// saturating at `u64::MAX` ticks).
    #[must_use]
    pub const fn from_duration(elapsed: core::time::Duration, ticks_per_second: u64) -> Tick {
        let ticks = elapsed.as_nanos() * ticks_per_second as u128 / 1_000_000_000;
        Tick(if ticks > u64::MAX as u128 {
            u64::MAX
        } else {
            ticks as u64
        })
    }

    /// This time as a [`core::time::Duration`] since the clock's zero, at
    /// `ticks_per_second` (zero ticks per second gives zero).
    #[must_use]
    pub const fn to_duration(self, ticks_per_second: u64) -> core::time::Duration {
        if ticks_per_second == 0 {
            return core::time::Duration::ZERO;
        }
        let secs = self.0 / ticks_per_second;
        let rest = self.0 % ticks_per_second;
        let nanos = (rest as u128 * 1_000_000_000 / ticks_per_second as u128) as u32;
        core::time::Duration::new(secs, nanos)
    }

    /// `ticks` later, saturating.
    #[must_use]
    pub const fn after(self, ticks: u64) -> Tick {
        Tick(self.0.saturating_add(ticks))
    }
}

ordered_type! {
    /// The owner's name for a PnP request (an IRP, a probe call): echoed in exactly one
    /// [`Output::Complete`] if the request is accepted.
    pub struct RequestToken(pub u32);
}

value_type! {
    /// How far a client is trusted.
    pub enum ClientKind {
        /// A kernel client: waited for (up to its deadline, then [`TrustedTimeoutPolicy`]).
        Trusted,
        /// A user-space context: given a deadline, then revoked.
        Untrusted,
    }
}

value_type! {
    /// What a trusted client that misses a reset or detach deadline costs.
    pub enum TrustedTimeoutPolicy {
        /// Revoke it like an untrusted client.
        Revoke,
        /// Escalate while the device runs or a reset cycle quiesces: the device goes to
        /// failed (clients are told [`Event::DeviceFatal`]; a cycle ends
        /// [`CycleOutcome::ClientTimedOut`]). In any other state an OS request or the
        /// hardware already decides the device's next state (a pending query, a start, a
        /// stop, a reset executing, a power transition, removal), so the client is revoked
        /// and fenced like an untrusted client.
        FailDevice,
    }
}

value_type! {
    /// A port's transport protocol. A binding holds ports of one protocol only.
    pub enum Protocol {
        /// InfiniBand.
        Ib,
        /// RDMA over Converged Ethernet.
        Roce,
        /// iWARP.
        Iwarp,
    }
}

value_type! {
    /// A port's logical link state, as set by the subnet manager (or the Ethernet link).
    pub enum LinkState {
        /// No link (no cable, or no subnet manager yet).
        Down,
        /// Physical link up, not yet configured.
        Init,
        /// Configured, not yet active.
        Armed,
        /// Passing traffic.
        Active,
    }
}

value_type! {
    /// What a physical port can do, described by the owner at [`Input::ConfigurePort`].
    pub struct PortCaps {
        /// The port's protocol.
        pub protocol: Protocol,
        /// Largest MTU in bytes.
        pub max_mtu: u16,
        /// Whether the port supports remote atomics.
        pub atomics: bool,
    }
}

value_type! {
    /// The capabilities of a client's binding: what holds on every port it bound.
    pub struct BindingCaps {
        /// The one protocol of the binding.
        pub protocol: Protocol,
        /// The ports bound.
        pub ports: PortSet,
        /// The smallest `max_mtu` of the ports.
        pub max_mtu: u16,
        /// Whether every port supports atomics.
        pub atomics: bool,
    }
}

value_type! {
    /// What a client wants to do with the device.
    pub enum Access {
        /// Read a port's counters: allowed whatever the link state.
        QueryCounters(PhysPort),
        /// Touch the hardware (post work, ring a doorbell, create a queue). A granted
        /// operation is *in flight* until [`Input::AccessDone`]: no stop, hardware reset,
        /// power-down or removal teardown is commanded while one is (they wait, with
        /// [`Config::operation_timeout`], removal with [`Config::detach_timeout`], then
        /// fence the client).
        HardwareOp,
    }
}

value_type! {
    /// What the owner's hardware start did.
    pub enum StartResult {
        /// The device runs.
        Started,
        /// Failed before it claimed any resource: removal has nothing to undo.
        FailedBeforeResources,
        /// Claimed resources, then the hardware failed: removal releases the resources and
        /// touches no register.
        FailedAfterResources,
    }
}

value_type! {
    /// What the owner's hardware reset did.
    pub enum ResetResult {
        /// The hardware came back.
        Succeeded,
        /// The hardware did not come back: the device goes to failed.
        Failed,
    }
}

value_type! {
    /// Why a started device leaves its working state (D0) for a low-power state (Dx).
    pub enum PowerDownKind {
        /// The device idled out (Windows idle power-down, Linux runtime suspend): a
        /// client's hardware access brings it back to D0 first.
        Idle,
        /// The system goes to sleep (S3/S4, Linux system suspend): client accesses are
        /// refused with [`Error::Suspended`] until the owner powers the device up.
        SystemSleep,
    }
}

value_type! {
    /// What the owner's hardware power-up ([`HardwareCommand::PowerUp`]) did.
    pub enum PowerUpResult {
        /// Back in D0 with its state kept: clients go on with the interface they hold.
        Powered,
        /// Back in D0, but the hardware lost its state while down: the power-up ends like a
        /// completed reset (epoch + 1; clients re-acquire their interface).
        LostState,
        /// The hardware did not come back: treated as if it vanished (surprise removal).
        Failed,
    }
}
