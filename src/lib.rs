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
//! out (outside any lock it holds), and arms its timer at the next deadline.
//! [`Lifecycle::feed`] is that step in one call: it feeds the input, hands every output to
//! the owner's sink in order, and returns the reply with [`Fed::wake_at`], when to feed
//! [`Input::Timeout`]. A refusal is a [`Refusal`] naming the input, its device or client
//! and the time. Every input also has a typed method ([`Lifecycle::start`],
//! [`Lifecycle::reset_execute`], ...); after one, [`Lifecycle::drain`] hands the outputs
//! over and says when to wake (or the next `feed` hands them over first).
//!
//! This loop matches every [`Output`]; a real owner replaces the comments with its OS
//! calls, and a `no_std` one keeps its work in a fixed-capacity queue instead.
//!
//! ```
//! use pnp_lifecycle::*;
//! use std::collections::VecDeque;
//!
//! type Hca = Lifecycle<1, 4, 1, { queue_capacity(1, 4) }>;
//!
//! /// The owner: the machine, its work in the machine's order, and its one timer.
//! struct Owner {
//!     m: Hca,
//!     work: VecDeque<Output>,
//!     timer: Option<Tick>,
//! }
//!
//! impl Owner {
//!     /// Feed `input` at `now`, then carry out every output, feeding back what carrying
//!     /// them out reports (callback returns, hardware completions, fences).
//!     fn run(&mut self, now: Tick, input: Input) -> Result<Reply, Refusal> {
//!         let fed = self.m.feed(now, input, |o| self.work.push_back(o))?;
//!         self.timer = fed.wake_at;
//!         while let Some(output) = self.work.pop_front() {
//!             if let Some(report) = carry_out(output) {
//!                 self.timer = self.m.feed(now, report, |o| self.work.push_back(o))?.wake_at;
//!             }
//!         }
//!         Ok(fed.reply)
//!     }
//! }
//!
//! /// Do what an output says; what it reports back at once, if anything.
//! fn carry_out(output: Output) -> Option<Input> {
//!     match output {
//!         // Call the client's callback outside any lock; report its return.
//!         Output::Notify { client, event } => {
//!             let _ = event; // e.g. RESET: the client quiesces, answers later
//!             Some(Input::CallbackDone { client })
//!         }
//!         // Cut a revoked client's path to the device, then report it.
//!         Output::Fence { client } => Some(Input::FenceDone { client }),
//!         // Only with `Lifecycle::with_fast_path`: open the client's gate, or close it
//!         // and report the operations still in flight on it.
//!         Output::FastPath { client, gate } => match gate {
//!             FastPathGate::Open { .. } => None,
//!             FastPathGate::Close => Some(Input::FastPathClosed { client, in_flight: 0 }),
//!         },
//!         // Command the hardware; report what it did.
//!         Output::Hardware { device, command } => match command {
//!             HardwareCommand::Start => Some(Input::StartDone { device, result: StartResult::Started }),
//!             HardwareCommand::Reset => Some(Input::ResetDone { device, result: ResetResult::Succeeded }),
//!             HardwareCommand::Shutdown | HardwareCommand::ReleaseResources => None,
//!             // D0 exit and entry (this hardware keeps its state while down).
//!             HardwareCommand::PowerDown => Some(Input::PowerDownDone { device }),
//!             HardwareCommand::PowerUp => {
//!                 Some(Input::PowerUpDone { device, result: PowerUpResult::Powered })
//!             }
//!         },
//!         // Complete the IRP / return from probe with `status`.
//!         Output::Complete { .. } => None,
//!         // Answer every reset request (and deferred fatal error) of this cycle.
//!         Output::ResetCycleFinished { .. } => None,
//!         // Report the failure to the OS (Windows: PNP_DEVICE_FAILED).
//!         Output::DeviceFailed { .. } => None,
//!         // A blocking unregister may return; a device slot is free.
//!         Output::ClientGone { .. } | Output::DeviceRemoved { .. } => None,
//!         // DriverUnload may return.
//!         Output::UnloadMayFinish => None,
//!     }
//! }
//!
//! # fn main() -> Result<(), Refusal> {
//! let mut owner = Owner { m: Hca::new(Config::DEFAULT), work: VecDeque::new(), timer: None };
//! let hca = DeviceId(0);
//! owner.run(Tick(0), Input::AddDevice { device: hca })?;
//! owner.run(Tick(0), Input::Start { device: hca, token: RequestToken(1) })?;
//! let register = |kind| Input::Register { device: hca, kind };
//! let Reply::Registered { client: verbs, .. } = owner.run(Tick(10), register(ClientKind::Trusted))?
//! else { unreachable!() };
//! let Reply::Registered { client: uverbs, .. } = owner.run(Tick(10), register(ClientKind::Untrusted))?
//! else { unreachable!() };
//!
//! // 60 s later a reset is requested: deadlines count from now, not from an older tick.
//! owner.run(Tick(60_000), Input::ResetRequest { client: verbs })?;
//! assert_eq!(owner.timer, Some(Tick(61_000))); // the untrusted voter's deadline
//! owner.run(Tick(60_100), Input::ResetExecute { client: verbs })?;
//!
//! // The user-space context never answers: the owner's timer fires at the deadline.
//! let due = owner.timer.expect("a deadline");
//! owner.run(due, Input::Timeout)?; // revoked; the reset runs; RESET_END; epoch 1
//! assert_eq!(owner.m.epoch(hca), Some(Epoch(1)));
//! assert_eq!(owner.m.client(uverbs).map(|c| c.state), Some(ClientState::Revoked));
//! assert_eq!(owner.timer, None); // nothing waits on a deadline
//!
//! // Driver unload: every device removed, every client detached or revoked.
//! owner.run(Tick(62_000), Input::Unload)?;
//! owner.run(Tick(62_001), Input::Unregister { client: verbs })?;
//! assert_eq!(owner.m.driver_phase(), DriverPhase::Unloaded);
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
    pub use crate::device::{
        AfterReset, HwOp, Phase, Port, Prior, QueryPending, Resources, Teardown,
    };
}

// The README's Rust blocks are doctests: its API tour compiles as a `main`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// The package's README (the registry page) runs its quick start too.
#[cfg(doctest)]
#[doc = include_str!("../README.crate.md")]
struct CrateReadmeDoctests;

pub use machine::{outputs_per_device_input, queue_capacity, ClientView, DriverPhase, Lifecycle};
pub use owner_loop::{Fed, Refusal};
pub use recorder::{Record, Recorder};
pub use registry::{ClientState, Role};
pub use table::{InputKind, PhaseKind};
pub use types::*;
