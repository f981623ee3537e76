//! # pnp-lifecycle-linux
//!
//! The Linux port of `pnp-lifecycle`, in the shape of an RDMA provider driver: an
//! `ib_client` registry (`add` / `remove` callbacks, [`Driver::register_client`],
//! [`Driver::unregister_client`] that returns only when no callback of the client runs or
//! will run), PCI probe / remove, PCI error recovery mapped onto the core's reset cycle
//! (`error_detected` → `RESET`, `slot_reset` → hardware reset, `resume` → `RESET_END`;
//! `reset_prepare` / `reset_done` for a function reset; `pci_channel_io_perm_failure` →
//! surprise removal), revocable user-space contexts (uverbs disassociate: `EIO`), IB port
//! events and `ib_query_port` with the link down.
//!
//! Every lifecycle rule lives in the core; this crate owns the lock, the threads and the
//! vocabulary. Client callbacks are never called with the port's lock held. See the
//! README for the name mapping.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod clock;
pub mod driver;
pub mod errno;
pub mod oracle;
#[cfg(feature = "race")]
pub mod race;
mod sync;

#[cfg(test)]
mod shuttle_tests;

pub use clock::{Clock, ManualClock, MonotonicClock};
pub use driver::*;
pub use errno::{errno_of, Errno, LinuxError};
