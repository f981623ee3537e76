//! The machine under test, as the testkit sees it: the core itself or a wrapper around it
//! (the testkit's fault-planting `Faulty`). Everything the oracle observes goes through
//! this trait.

use core::fmt::Debug;
use core::hash::Hash;
use pnp_lifecycle::inspect::Phase;
use pnp_lifecycle::{
    BindingCaps, ClientHandle, ClientView, Config, DeviceId, DriverPhase, Epoch, Error, Input,
    Lifecycle, LinkState, Output, PhaseKind, PhysPort, Reply, Tick,
};

/// A machine the oracle, the model comparison and the explorer can drive.
///
/// Implemented for every [`Lifecycle`] and for the fault-planting wrapper. `Clone + Eq +
/// Hash` let the explorer deduplicate states and the oracle check I10 (a refused input
/// changes nothing).
pub trait Sut: Clone + Eq + Hash + Debug {
    /// Device capacity.
    const DEVICES: usize;
    /// Client slots per device.
    const CLIENTS: usize;
    /// Physical ports per device.
    const PORTS: usize;
    /// The documented bound on outputs of one device input.
    const DEVICE_INPUT_OUTPUTS: usize;
    /// The documented bound on outputs of a tick or an unload.
    const DRIVER_INPUT_OUTPUTS: usize;
    /// Whether the machine runs the fast path ([`Lifecycle::with_fast_path`]): its owner
    /// answers every gate close ([`Input::FastPathClosed`]).
    const FAST_PATH: bool = false;

    /// A fresh machine.
    fn create(config: Config) -> Self;
    /// Apply one input that happened at `now` on the owner's clock.
    fn handle(&mut self, now: Tick, input: Input) -> Result<Reply, Error>;
    /// Take the next output.
    fn poll_output(&mut self) -> Option<Output>;
    /// Outputs still queued.
    fn pending_output_count(&self) -> usize;
    /// Outputs the machine dropped for lack of room.
    fn lost_outputs(&self) -> u32;
    /// A device's state kind.
    fn phase(&self, device: DeviceId) -> Option<PhaseKind>;
    /// A device's state with data.
    fn phase_detail(&self, device: DeviceId) -> Option<Phase>;
    /// A device's epoch.
    fn epoch(&self, device: DeviceId) -> Option<Epoch>;
    /// The unload fence.
    fn driver_phase(&self) -> DriverPhase;
    /// The `now` of the last input accepted.
    fn now(&self) -> Tick;
    /// The next deadline.
    fn poll_timeout(&self) -> Option<Tick>;
    /// What the machine knows of a client.
    fn client(&self, handle: ClientHandle) -> Option<ClientView>;
    /// Every occupied client slot of a device.
    fn client_list(&self, device: DeviceId) -> Vec<(ClientHandle, ClientView)>;
    /// [`Self::client_list`] into `into` (cleared first), reusing its allocation: the
    /// model comparison asks for it after every step.
    fn client_list_into(&self, device: DeviceId, into: &mut Vec<(ClientHandle, ClientView)>) {
        into.clear();
        into.extend(self.client_list(device));
    }
    /// A binding's capabilities.
    fn binding_caps(&self, handle: ClientHandle) -> Result<BindingCaps, Error>;
    /// A port's link state, if configured.
    fn link(&self, device: DeviceId, port: PhysPort) -> Option<LinkState>;
    /// The configuration.
    fn config(&self) -> Config;
}

impl<const D: usize, const C: usize, const P: usize, const Q: usize> Sut for Lifecycle<D, C, P, Q> {
    const DEVICES: usize = D;
    const CLIENTS: usize = C;
    const PORTS: usize = P;
    const DEVICE_INPUT_OUTPUTS: usize = Lifecycle::<D, C, P, Q>::DEVICE_INPUT_OUTPUTS;
    const DRIVER_INPUT_OUTPUTS: usize = Lifecycle::<D, C, P, Q>::DRIVER_INPUT_OUTPUTS;

    fn create(config: Config) -> Self {
        Lifecycle::new(config)
    }
    fn handle(&mut self, now: Tick, input: Input) -> Result<Reply, Error> {
        Lifecycle::handle(self, now, input)
    }
    fn poll_output(&mut self) -> Option<Output> {
        Lifecycle::poll_output(self)
    }
    fn pending_output_count(&self) -> usize {
        Lifecycle::pending_output_count(self)
    }
    fn lost_outputs(&self) -> u32 {
        Lifecycle::lost_outputs(self)
    }
    fn phase(&self, device: DeviceId) -> Option<PhaseKind> {
        Lifecycle::phase(self, device)
    }
    fn phase_detail(&self, device: DeviceId) -> Option<Phase> {
        Lifecycle::phase_detail(self, device)
    }
    fn epoch(&self, device: DeviceId) -> Option<Epoch> {
        Lifecycle::epoch(self, device)
    }
    fn driver_phase(&self) -> DriverPhase {
        Lifecycle::driver_phase(self)
    }
    fn now(&self) -> Tick {
        Lifecycle::now(self)
    }
    fn poll_timeout(&self) -> Option<Tick> {
        Lifecycle::poll_timeout(self)
    }
    fn client(&self, handle: ClientHandle) -> Option<ClientView> {
        Lifecycle::client(self, handle)
    }
    fn client_list(&self, device: DeviceId) -> Vec<(ClientHandle, ClientView)> {
        Lifecycle::clients(self, device).collect()
    }
    fn client_list_into(&self, device: DeviceId, into: &mut Vec<(ClientHandle, ClientView)>) {
        into.clear();
        into.extend(Lifecycle::clients(self, device));
    }
    fn binding_caps(&self, handle: ClientHandle) -> Result<BindingCaps, Error> {
        Lifecycle::binding_caps(self, handle)
    }
    fn link(&self, device: DeviceId, port: PhysPort) -> Option<LinkState> {
        Lifecycle::link(self, device, port)
    }
    fn config(&self) -> Config {
        *Lifecycle::config(self)
    }
}
