//! # pnp-lifecycle-firmware
//!
//! The bare-metal port of [`pnp_lifecycle`]: the machine lives in a `static`
//! ([`static_cell::StaticCell`] or [`static_cell::ConstStaticCell`]), shared between thread
//! mode and interrupt handlers through a
//! [`critical_section::Mutex`]`<`[`core::cell::RefCell`]`<`[`Shared`]`>>`.
//!
//! * **Interrupts** only latch or feed inputs. The catastrophic-error interrupt calls
//!   [`latch_fatal_interrupt`] (constant time: one flag; thread mode feeds
//!   [`Input::FatalError`]) or [`on_fatal_interrupt`] (feeds it inside the critical
//!   section, or latches it when thread mode's outputs still fill the machine's queue).
//! * **Every input** goes through [`Shared::feed`]: inside the critical section the machine
//!   handles it; its outputs wait in the machine's own queue, the only output buffer (the
//!   queue is held once in RAM).
//! * **Thread mode** ([`Firmware`]) takes outputs out of that queue one at a time
//!   ([`Shared::pop`], inside the critical section) and acts on them *outside* it: client callbacks ([`Board::notify`]), the
//!   hardware reset ([`ResetLine`]: an `embedded_hal` [`OutputPin`](embedded_hal::digital::OutputPin)
//!   held for a pulse width timed with [`DelayNs`](embedded_hal::delay::DelayNs)), start and
//!   shutdown. It feeds their completions ([`Input::CallbackDone`], [`Input::ResetDone`],
//!   [`Input::StartDone`]) back, never losing one.
//!
//! All lifecycle rules stay in the core; this crate translates vocabulary and owns the
//! concurrency (its own single-context owner loop: the shared `pnp-lifecycle-runtime`
//! needs `alloc` and threads, see the README). Test machinery (schedule harness, oracle,
//! planted faults) lives in `pnp-lifecycle-testkit`, not here.
//!
//! ```
//! use core::cell::RefCell;
//! use critical_section::Mutex;
//! use pnp_lifecycle::{queue_capacity, Config, DeviceId, Input, RequestToken};
//! use pnp_lifecycle_firmware::{Board, Firmware, Polarity, ResetLine, Shared};
//! # use embedded_hal_mock::eh1::{delay::NoopDelay, digital::{Mock as Pin, State, Transaction as T}};
//!
//! const Q: usize = queue_capacity(1, 8);
//! type Machine = Mutex<RefCell<Shared<1, 8, 2, Q>>>;
//! static MACHINE: static_cell::ConstStaticCell<Machine> =
//!     static_cell::ConstStaticCell::new(Mutex::new(RefCell::new(Shared::new(Config::DEFAULT))));
//!
//! struct Clients;
//! impl Board for Clients {
//!     fn now(&mut self) -> pnp_lifecycle::Tick {
//!         pnp_lifecycle::Tick(0) // the board's monotonic timer, in ms
//!     }
//!     fn notify(&mut self, _client: pnp_lifecycle::ClientHandle, _event: pnp_lifecycle::Event) {}
//! }
//!
//! let shared: &'static Machine = MACHINE.take();
//! # let pin = Pin::new(&[]);
//! let line = ResetLine::new(pin, NoopDelay::new(), 10_000, Polarity::ActiveLow);
//! let mut fw = Firmware::new(shared, line, Clients);
//! fw.input(Input::AddDevice { device: DeviceId(0) }).unwrap();
//! fw.input(Input::Start { device: DeviceId(0), token: RequestToken(1) }).unwrap();
//! fw.pump().unwrap(); // Board::start runs, StartDone is fed back
//! assert_eq!(
//!     fw.with_machine(|m| m.phase(DeviceId(0))).unwrap(),
//!     Some(pnp_lifecycle::PhaseKind::Running)
//! );
//! # fw.into_parts().0.into_parts().0.done();
//! ```
//!
//! The critical-section *implementation* is left to the final binary (for a single-core
//! Cortex-M: `cortex-m = { features = ["critical-section-single-core"] }`); this library
//! only uses the `critical-section` API and builds for `thumbv7em-none-eabihf` without one.

#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs, missing_debug_implementations)]
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[macro_use]
mod log;

mod firmware;
mod lock;
mod reset;
mod shared;

#[cfg(feature = "embassy")]
pub mod embassy;

pub use firmware::{Answers, Board, Firmware, Idle, PortError, Step};
#[cfg(feature = "cortex-m")]
pub use firmware::{DeepSleepIdle, WfiIdle};
pub use lock::{Busy, IsrLink, Lock};
pub use reset::{Polarity, ResetControl, ResetError, ResetLine};
pub use shared::{latch_fatal_interrupt, on_fatal_interrupt, FeedError, IsrOutcome, Shared};

/// The core crate, re-exported.
pub use pnp_lifecycle;
#[allow(unused_imports)]
use pnp_lifecycle::Input; // for the intra-doc links above
