//! # pnp-lifecycle-runtime
//!
//! The owner runtime the OS ports of [`pnp_lifecycle`] share: the concurrency of driving
//! the machine, written once. A port supplies its vocabulary ([`Os`]) and its platform's
//! primitives ([`Kernel`]); every lifecycle rule stays in the core.
//!
//! `no_std` with `alloc` (as in a kernel): the work queue and the tables of OS objects
//! grow with what the machine ordered. Feature `std` (default) adds [`StdKernel`] and the
//! clocks; feature `shuttle` adds `ShuttleKernel` (the same runtime under the `shuttle`
//! crate's deterministic scheduler) for concurrency tests.
//!
//! # What it guarantees
//!
//! * **One lock around the machine.** Every input is fed under it, stamped with the
//!   clock's `now` read under the same lock ([`Runtime::with`]); every output is taken off
//!   the machine before the lock is released.
//! * **Work outside the lock, in the machine's order, a lane at a time.** Callbacks,
//!   hardware commands, request completions and news are carried out with no lock held
//!   ([`Work`], [`Os`]). Each item belongs to a lane (its client; its device, for hardware
//!   and for [`News::Fenced`], so a port hears a fence before the hardware commands it let
//!   go ahead; one line for completions, other news and the port's jobs); a lane's items
//!   run one at a time in output order, and different lanes run side by side. So a client
//!   sees its events in order, never two callbacks at once (the machine has at most one in flight
//!   and hears `CallbackDone` only after it returned), and a callback that never returns
//!   holds up nobody but its own client.
//! * **"Done" comes last.** A request's completion, [`News::DeviceRemoved`] and
//!   [`News::UnloadMayFinish`] are what an OS reads as "the driver is done" (no driver
//!   code may run for a device after `IRP_MN_REMOVE_DEVICE` completes or PCI `remove`
//!   returns). Each is carried out only after every hardware command its device's lane
//!   (every device's, for unload) was given before it has returned: an ordering barrier
//!   between lanes, kept by [`Owner::take`] without holding the lock while it waits.
//!   Client lanes never hold it up (a stuck callback is bounded by the machine's
//!   deadlines and the fence).
//! * **Waits that refuse instead of deadlocking.** A blocking wait ([`Runtime::wait_until`],
//!   [`Runtime::unload`]) called from inside a callback or a hardware command returns
//!   [`WouldDeadlock`] (for unload, [`UnloadError::WouldDeadlock`]) and changes nothing.
//! * **Brackets and fences.** A client's hardware operation is an `Access` bracket closed
//!   by [`Owner::operation_done`]. When the machine asks for a fence, a queued callback of
//!   the client is cancelled, a running callback and operations in flight are waited out
//!   until they return or the fence's grace passes, then `FenceDone` is fed and the port
//!   hears [`News::Fenced`]; a callback still running then is abandoned (its return
//!   reports nothing).
//! * **Reset groups carried, not decided.** The group inputs are fed under the lock like
//!   any other ([`Owner::join_reset_group`], [`Owner::reset_nack`]); the machine's one
//!   reset of a group reaches the port as one [`Work::GroupReset`] naming the carrier and
//!   the members it covers ([`Os::group_reset`]). Which members take part, the carrier,
//!   when and how the cycle ends are the machine's.
//! * **Nothing is lost.** Every OS request handed to [`Owner::submit`] is completed
//!   exactly once, by the machine's completion or with its refusal.
//!
//! # Calling order
//!
//! [`Runtime::new`] → inputs through [`Runtime::with`] / [`Runtime::feed`] (registration
//! with [`Owner::register`], OS requests with [`Owner::submit`]) → [`Runtime::timeout`]
//! when the clock reaches [`Runtime::poll_timeout`] → [`Runtime::unload`].
//! A cooperative schedule harness drives [`Owner`] directly: [`Owner::take`] a work item,
//! carry it out, [`Owner::finish`] it.

#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod fast;
mod group;
mod owner;
#[cfg(pnp_faults)]
pub mod planted;
mod runtime;
#[cfg(feature = "shuttle")]
mod shuttle_kernel;
#[cfg(feature = "std")]
mod std_kernel;

pub use fast::{AtomicWord, End, Gate, GateControl, Ticket};
pub use group::GroupReset;
pub use owner::{Completion, ContextId, Done, News, Os, Owner, Work};
pub use runtime::{
    carry_out, Begin, ClientGate, Clock, Dispatch, Kernel, Monitor, Operation, Runtime,
    UnloadError, WouldDeadlock,
};
#[cfg(feature = "shuttle")]
pub use shuttle_kernel::{ShuttleKernel, ShuttleMonitor, ShuttleWord};
#[cfg(feature = "std")]
pub use std_kernel::{ManualClock, MonotonicClock, StdKernel, StdMonitor};
