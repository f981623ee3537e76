//! # pnp-lifecycle
//!
//! A `no_std`, heap-free, sans-IO state machine for a device's Plug-and-Play lifecycle in
//! the Windows style (add, start, query/cancel stop and remove, surprise removal, remove,
//! driver unload) together with a coordinated multi-client **soft-reset cycle**, a client
//! registry with generation-checked handles, per-port link state and uniform multi-port
//! bindings.
//!
//! The machine ([`Lifecycle`]) takes [`Input`]s and queues [`Output`]s. It has no clock,
//! no lock, no callback and no I/O: the owner (an OS port) feeds it PnP requests, hardware
//! completions, client calls and ticks, and carries out what it says — notify a client,
//! command the hardware, complete a request, let unload finish.
//!
//! ```
//! use pnp_lifecycle::*;
//!
//! let mut m: Lifecycle<1, 4, 2, { queue_capacity(1, 4) }> = Lifecycle::new(Config::DEFAULT);
//! let dev = DeviceId(0);
//! m.handle(Tick(0), Input::AddDevice { device: dev }).unwrap();
//! m.handle(Tick(0), Input::Start { device: dev, token: RequestToken(1) }).unwrap();
//! assert_eq!(
//!     m.poll_output(),
//!     Some(Output::Hardware { device: dev, command: HardwareCommand::Start })
//! );
//! m.handle(Tick(5), Input::StartDone { device: dev, result: StartResult::Started }).unwrap();
//! assert_eq!(
//!     m.poll_output(),
//!     Some(Output::Complete { device: dev, token: RequestToken(1), status: Status::Success })
//! );
//! assert_eq!(m.phase(dev), Some(PhaseKind::Running));
//! ```
//!
//! ## Rules the machine keeps
//!
//! * Every device input meets the per-state [`TABLE`] first: handled, deferred until a
//!   hardware command reports, ignored with success (a cancel with nothing to cancel), or
//!   refused with [`Error::InvalidState`].
//! * A refused input changes nothing and queues nothing.
//! * One input queues at most [`Lifecycle::DEVICE_INPUT_OUTPUTS`] outputs (a tick or an
//!   unload at most [`Lifecycle::DRIVER_INPUT_OUTPUTS`]); the queue is checked for that
//!   room before the input is accepted ([`Error::OutputBacklog`] otherwise).
//! * The owner passes its clock with every input; deadlines count from the input that
//!   started them, and [`Lifecycle::poll_timeout`] says when to feed [`Input::Timeout`].
//! * A client has at most one callback in flight; later events wait in a bounded
//!   per-client mailbox where newer link states and device news replace older ones and
//!   `Removed`/`Revoked` replace everything, so no client can exhaust a capacity.
//! * A callback that overruns [`Config::callback_timeout`] gets its client revoked and
//!   fenced ([`Output::Fence`], answered by [`Input::FenceDone`]): nothing waits without
//!   a deadline.
//! * A client that registers before start is admitted and told [`Event::DeviceStarted`]
//!   when the device starts (or [`Event::DeviceFatal`] if the start fails).
//! * Every client told [`Event::Reset`] is later told exactly one of
//!   [`Event::ResetEnd`], [`Event::Removed`], [`Event::Revoked`] (or fenced), or
//!   [`Event::DeviceFatal`] after a failed reset. `Removed` and
//!   `Revoked` are a client's last events: a client that does not detach by the detach
//!   deadline after `Removed` is revoked silently.
//! * Driver unload removes every device (a removal with no request token), and emits
//!   [`Output::UnloadMayFinish`] exactly once, when no device, client or callback is left.

#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[cfg(feature = "arbitrary")]
extern crate std;

#[macro_use]
mod fmt;
#[macro_use]
mod macros;

mod device;
mod diagram;
mod display;
mod machine;
mod mailbox;
#[cfg(pnp_faults)]
pub mod planted;
mod queue;
mod recorder;
mod registry;
mod table;
mod types;

pub use device::{AfterReset, HwOp, Phase, Port, Prior, Resources, Teardown};
pub use diagram::{is_listed, write_mermaid, Transition, TRANSITIONS};
pub use machine::{outputs_per_device_input, queue_capacity, ClientView, DriverPhase, Lifecycle};
pub use recorder::{Record, Recorder};
pub use registry::{ClientState, Role};
pub use table::{disposition, Disposition, InputKind, PhaseKind, Row, DEVICE_INPUTS, TABLE};
pub use types::*;
