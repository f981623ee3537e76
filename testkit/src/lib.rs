//! # pnp-lifecycle-testkit
//!
//! The verification machinery of `pnp-lifecycle`, shared by `tests/` and `fuzz/`:
//!
//! * [`oracle`]: the rules of `DESIGN.md` (I1–I13, one callback in flight, fences,
//!   admission while remove is pending, the hold and pause vetoes, stop releasing
//!   resources, every fatal error answered, recovery without a reset only when every voter
//!   can recover, every state change listed in `TRANSITIONS`) as predicates over each step, from outputs, replies and public
//!   queries only, so they hold with the reference model off;
//! * [`spec`]: the reference model, DESIGN.md read as facts (not the core's phases),
//!   compared step by step ([`world`]);
//! * [`world`]: the owner (a clock passed with every input, drain after every input,
//!   bookkeeping) and the I9 liveness drive [`world::drive_to_quiescence`] with
//!   cooperative, uncooperative and hostile clients;
//! * [`gen`]: the input generator for fuzzing (inputs with time steps and jumps);
//! * [`faults`]: a fault-planting wrapper that proves the checks bite (faults in the
//!   core's own decisions are planted in `src/planted.rs` behind `--cfg pnp_faults`);
//! * [`explore`]: the exhaustive breadth-first explorer (abstract time, device-order
//!   reduction, parallel layers);
//! * [`fuzz_bodies`]: the bodies of the fuzz targets;
//! * [`rng`]: a seeded generator for bounded random runs;
//! * [`observed`]: one oracle over what an OS port's clients observed, and the ports'
//!   schedule harnesses, recording clients and planted faults ([`windows_port`],
//!   [`linux_port`], [`firmware_port`]).

#![forbid(unsafe_code)]
#![deny(missing_docs)]
// The oracle reads best as one arm per input kind with the check inside it.
#![allow(clippy::collapsible_match, clippy::collapsible_if)]

pub mod explore;
pub mod faults;
pub mod firmware_port;
pub mod fuzz_bodies;
pub mod gen;
pub mod linux_port;
pub mod observed;
pub mod rng;
pub mod spec;
pub mod sut;

/// The invariant oracle: the published crate `pnp-lifecycle-oracle`, re-exported.
pub use pnp_lifecycle_oracle as oracle;
pub mod windows_port;
pub mod world;

pub use oracle::{Check, Oracle, Violation};
pub use sut::{FastPath, FastSmall, Fuzz, Pair, Small, Sut};
pub use world::{drive_to_quiescence, Quiesce, World};
