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
//! ## The owner loop
//!
//! The owner feeds every input with its clock, drains every output after it, carries each
//! out (outside any lock it holds), and wakes at [`Lifecycle::poll_timeout`]. This loop
//! matches every [`Output`]; a real owner replaces the comments with its OS calls.
//!
//! ```
//! use pnp_lifecycle::*;
//!
//! type Hca = Lifecycle<1, 4, 1, { queue_capacity(1, 4) }>;
//!
//! /// Feed `input` at `now`, then carry out every output, including what carrying them
//! /// out feeds back (callback returns, hardware completions, fences).
//! fn feed(m: &mut Hca, now: Tick, input: Input) -> Result<Reply, Error> {
//!     let reply = m.handle(now, input)?;
//!     let mut work = heapless::Deque::<Input, 64>::new();
//!     loop {
//!         while let Some(output) = m.poll_output() {
//!             let follow_up = match output {
//!                 // Call the client's callback outside any lock; report its return.
//!                 Output::Notify { client, event } => {
//!                     let _ = event; // e.g. RESET: the client quiesces, answers later
//!                     Some(Input::CallbackDone { client })
//!                 }
//!                 // Cut a revoked client's path to the device, then report it.
//!                 Output::Fence { client } => Some(Input::FenceDone { client }),
//!                 // Command the hardware; report what it did.
//!                 Output::Hardware { device, command } => match command {
//!                     HardwareCommand::Start => {
//!                         Some(Input::StartDone { device, result: StartResult::Started })
//!                     }
//!                     HardwareCommand::Reset => {
//!                         Some(Input::ResetDone { device, result: ResetResult::Succeeded })
//!                     }
//!                     HardwareCommand::Shutdown | HardwareCommand::ReleaseResources => None,
//!                     // D0 exit and entry (this hardware keeps its state while down).
//!                     HardwareCommand::PowerDown => Some(Input::PowerDownDone { device }),
//!                     HardwareCommand::PowerUp => {
//!                         Some(Input::PowerUpDone { device, result: PowerUpResult::Powered })
//!                     }
//!                 },
//!                 // Complete the IRP / return from probe with `status`.
//!                 Output::Complete { .. } => None,
//!                 // Answer every reset request (and deferred fatal error) of this cycle.
//!                 Output::ResetCycleFinished { .. } => None,
//!                 // Report the failure to the OS (Windows: PNP_DEVICE_FAILED).
//!                 Output::DeviceFailed { .. } => None,
//!                 // A blocking unregister may return; a device slot is free.
//!                 Output::ClientGone { .. } | Output::DeviceRemoved { .. } => None,
//!                 // DriverUnload may return.
//!                 Output::UnloadMayFinish => None,
//!             };
//!             if let Some(input) = follow_up {
//!                 work.push_back(input).map_err(|_| Error::OutputBacklog { needed: 1 })?;
//!             }
//!         }
//!         let Some(next) = work.pop_front() else { return Ok(reply) };
//!         m.handle(now, next)?;
//!     }
//! }
//!
//! # fn main() -> Result<(), Error> {
//! let mut m = Hca::new(Config::DEFAULT);
//! let hca = DeviceId(0);
//! feed(&mut m, Tick(0), Input::AddDevice { device: hca })?;
//! feed(&mut m, Tick(0), Input::Start { device: hca, token: RequestToken(1) })?;
//! let (verbs, _) = m.register(Tick(10), hca, ClientKind::Trusted)?;
//! let (uverbs, _) = m.register(Tick(10), hca, ClientKind::Untrusted)?;
//!
//! // 60 s later a reset is requested: deadlines count from now, not from an older tick.
//! feed(&mut m, Tick(60_000), Input::ResetRequest { client: verbs })?;
//! assert_eq!(m.poll_timeout(), Some(Tick(61_000))); // the untrusted voter's deadline
//! feed(&mut m, Tick(60_100), Input::ResetExecute { client: verbs })?;
//!
//! // The user-space context never answers: the owner's timer fires at the deadline.
//! let due = m.poll_timeout().expect("a deadline");
//! feed(&mut m, due, Input::Timeout)?; // revoked; the reset runs; RESET_END; epoch 1
//! assert_eq!(m.epoch(hca), Some(Epoch(1)));
//! assert_eq!(m.client(uverbs).map(|c| c.state), Some(ClientState::Revoked));
//!
//! // Driver unload: every device removed, every client detached or revoked.
//! feed(&mut m, Tick(62_000), Input::Unload)?;
//! feed(&mut m, Tick(62_001), Input::Unregister { client: verbs })?;
//! assert_eq!(m.driver_phase(), DriverPhase::Unloaded);
//! # Ok(())
//! # }
//! ```
//!
//! ## Rules the machine keeps
//!
//! * Every device input meets the per-state [`table::TABLE`] first: handled, deferred until a
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
//! * Power: a started device goes to a low-power state ([`Input::PowerDown`]) only after
//!   clients were told [`Event::Suspending`] and hardware operations drained; in it
//!   nothing but [`HardwareCommand::PowerUp`] is commanded and no access is granted (after
//!   an idle power-down an access brings the device back: [`Reply::AccessWaitsForPowerUp`]);
//!   every client told `Suspending` is later told [`Event::Resumed`], `Removed` or
//!   `Revoked`.
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
mod owner_loop;
#[cfg(pnp_faults)]
pub mod planted;
mod queue;
mod recorder;
mod registry;
pub mod table;
mod types;

/// The machine's internals, for tests, fuzzers and diagnostics only (feature `inspect`):
/// a device's state with its data. Not covered by semantic versioning; an owner never
/// needs them.
#[cfg(feature = "inspect")]
pub mod inspect {
    pub use crate::device::{AfterReset, HwOp, Phase, Port, Prior, Resources, Teardown};
}

// The README's Rust blocks are doctests: its API tour compiles as a `main`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use machine::{outputs_per_device_input, queue_capacity, ClientView, DriverPhase, Lifecycle};
pub use owner_loop::{Fed, Refusal};
pub use recorder::{Record, Recorder};
pub use registry::{ClientState, Role};
pub use table::{InputKind, PhaseKind};
pub use types::*;
