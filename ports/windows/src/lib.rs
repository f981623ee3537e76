//! # pnp-lifecycle-windows
//!
//! The Windows (WDM/KMDF-shaped) port of [`pnp_lifecycle`]: it turns Windows vocabulary
//! into core inputs and carries the core's outputs back out, and owns the concurrency. No
//! lifecycle rule lives here.
//!
//! * [`Driver::dispatch_pnp`]: the `IRP_MJ_PNP` dispatch for `IRP_MN_START_DEVICE`,
//!   `QUERY_REMOVE`, `CANCEL_REMOVE`, `REMOVE`, `SURPRISE_REMOVAL`, `QUERY_STOP`, `STOP`,
//!   `CANCEL_STOP`. Each [`Irp`] is completed exactly once: at once with the NTSTATUS of a
//!   core refusal ([`NtStatus::from`]`(Error)`), or when the core completes its token.
//! * A remove lock per device ([`RemoveLockState`]) with `IoAcquireRemoveLock` /
//!   `IoReleaseRemoveLockAndWait` semantics: after remove begins, acquire fails with
//!   `STATUS_DELETE_PENDING`; remove waits for every holder before the core sees it.
//! * The WinOF mlx4 reset interface ([`MlxInterface`]): `reset_request`, a callback that
//!   gets RESET ([`pnp_lifecycle::Event::Reset`]) and RESET_END (and Removed, Revoked,
//!   link events), `reset_execute`, and [`MlxInterface::acquire`] for the fresh interface.
//! * Threads: the notification thread makes every client callback (never under the port
//!   lock), completes IRPs and runs start/shutdown/release; the reset worker executes the
//!   hardware reset and feeds `ResetDone`.
//!
//! Under the crate's unit tests (or the `shuttle` feature) the locks and threads are
//! shuttle's; [`race`] (feature `race`) is a cooperative, thread-free schedule harness.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod clock;
mod driver;
mod ntstatus;
pub mod oracle;
mod port;
pub mod sync;

#[cfg(feature = "race")]
pub mod race;

pub use clock::{Clock, ManualClock, MonotonicClock};
#[cfg(feature = "planted-fault")]
pub use driver::Fault;
pub use driver::{Callback, Driver, Hal, Irp, MlxInterface};
pub use ntstatus::NtStatus;
pub use port::{
    Machine, PnpDeviceState, PnpMinor, PortCore, RemoveLockState, Work, CLIENTS, DEVICES, PORTS,
};

#[cfg(test)]
mod tests;
