//! The machine under test, as the testkit sees it: the core itself or a wrapper around it
//! (see [`crate::faults::Faulty`]). The [`Sut`] trait lives in the published oracle crate
//! (`pnp-lifecycle-oracle`); the machine sizes the testkit drives are here.

use pnp_lifecycle::Lifecycle;
pub use pnp_lifecycle_oracle::sut::*;

/// The small machine the explorer uses: 1 device, 3 clients, 2 physical ports.
pub type Small = Lifecycle<1, 3, 2, { pnp_lifecycle::queue_capacity(1, 3) }>;
/// The explorer's two-device machine: 2 devices, 3 clients, 1 physical port.
pub type Pair = Lifecycle<2, 3, 1, { pnp_lifecycle::queue_capacity(2, 3) }>;
/// The machine the fuzz bodies use: 2 devices (the unload fence spans both), 3 clients,
/// 2 physical ports.
pub type Fuzz = Lifecycle<2, 3, 2, { pnp_lifecycle::queue_capacity(2, 3) }>;
