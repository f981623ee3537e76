//! The machine under test, as the testkit sees it: the core itself or a wrapper around it
//! (see [`crate::faults::Faulty`]). The [`Sut`] trait lives in the published oracle crate
//! (`pnp-lifecycle-oracle`); the machine sizes the testkit drives are here.

use pnp_lifecycle::inspect::Phase;
use pnp_lifecycle::{
    BindingCaps, ClientHandle, ClientView, Config, DeviceId, DriverPhase, Epoch, Error, Input,
    Lifecycle, LinkState, Output, PhaseKind, PhysPort, Reply, Tick,
};
pub use pnp_lifecycle_oracle::sut::*;

/// A [`Lifecycle`] built [`Lifecycle::with_fast_path`]: the machine opens and closes its
/// clients' fast-path gates, and the owner ([`crate::World`]) answers every close.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FastPath<const D: usize, const C: usize, const P: usize, const Q: usize>(
    pub Lifecycle<D, C, P, Q>,
);

impl<const D: usize, const C: usize, const P: usize, const Q: usize> Sut for FastPath<D, C, P, Q> {
    const DEVICES: usize = D;
    const CLIENTS: usize = C;
    const PORTS: usize = P;
    const DEVICE_INPUT_OUTPUTS: usize = Lifecycle::<D, C, P, Q>::DEVICE_INPUT_OUTPUTS;
    const DRIVER_INPUT_OUTPUTS: usize = Lifecycle::<D, C, P, Q>::DRIVER_INPUT_OUTPUTS;
    const FAST_PATH: bool = true;

    fn create(config: Config) -> Self {
        FastPath(Lifecycle::new(config).with_fast_path())
    }
    fn handle(&mut self, now: Tick, input: Input) -> Result<Reply, Error> {
        self.0.handle(now, input)
    }
    fn poll_output(&mut self) -> Option<Output> {
        self.0.poll_output()
    }
    fn pending_output_count(&self) -> usize {
        self.0.pending_output_count()
    }
    fn lost_outputs(&self) -> u32 {
        self.0.lost_outputs()
    }
    fn phase(&self, device: DeviceId) -> Option<PhaseKind> {
        self.0.phase(device)
    }
    fn phase_detail(&self, device: DeviceId) -> Option<Phase> {
        self.0.phase_detail(device)
    }
    fn epoch(&self, device: DeviceId) -> Option<Epoch> {
        self.0.epoch(device)
    }
    fn driver_phase(&self) -> DriverPhase {
        self.0.driver_phase()
    }
    fn now(&self) -> Tick {
        self.0.now()
    }
    fn poll_timeout(&self) -> Option<Tick> {
        self.0.poll_timeout()
    }
    fn client(&self, handle: ClientHandle) -> Option<ClientView> {
        self.0.client(handle)
    }
    fn client_list(&self, device: DeviceId) -> Vec<(ClientHandle, ClientView)> {
        self.0.clients(device).collect()
    }
    fn binding_caps(&self, handle: ClientHandle) -> Result<BindingCaps, Error> {
        self.0.binding_caps(handle)
    }
    fn link(&self, device: DeviceId, port: PhysPort) -> Option<LinkState> {
        self.0.link(device, port)
    }
    fn config(&self) -> Config {
        *self.0.config()
    }
}

/// [`Small`] with the fast path on: the explorer's machine for the gates (issue 21).
pub type FastSmall = FastPath<1, 3, 2, { pnp_lifecycle::queue_capacity(1, 3) }>;

/// The small machine the explorer uses: 1 device, 3 clients, 2 physical ports.
pub type Small = Lifecycle<1, 3, 2, { pnp_lifecycle::queue_capacity(1, 3) }>;
/// The explorer's two-device machine: 2 devices, 3 clients, 1 physical port.
pub type Pair = Lifecycle<2, 3, 1, { pnp_lifecycle::queue_capacity(2, 3) }>;
/// The machine the fuzz bodies use: 2 devices (the unload fence spans both), 3 clients,
/// 2 physical ports.
pub type Fuzz = Lifecycle<2, 3, 2, { pnp_lifecycle::queue_capacity(2, 3) }>;
