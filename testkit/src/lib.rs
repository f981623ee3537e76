//! # pnp-lifecycle-testkit
//!
//! The verification machinery of `pnp-lifecycle`, shared by `tests/` and `fuzz/`:
//!
//! * [`oracle`]: invariants I1–I10 of `DESIGN.md` as predicates over each step;
//! * [`model`]: an independent reference model, compared step by step ([`world`]);
//! * [`world`]: the owner (drain after every input, bookkeeping) and the I9 liveness
//!   drive [`world::drive_to_quiescence`];
//! * [`gen`]: the input generator for fuzzing;
//! * [`faults`]: a fault-planting wrapper that proves the checks bite;
//! * [`explore`]: the exhaustive breadth-first explorer;
//! * [`fuzz_bodies`]: the bodies of the fuzz targets;
//! * [`rng`]: a seeded generator for bounded random runs.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
// The oracle reads best as one arm per input kind with the check inside it.
#![allow(clippy::collapsible_match, clippy::collapsible_if)]

pub mod explore;
pub mod faults;
pub mod fuzz_bodies;
pub mod gen;
pub mod model;
pub mod oracle;
pub mod rng;
pub mod sut;
pub mod world;

pub use oracle::{Check, Oracle, Violation};
pub use sut::{Fuzz, Pair, Small, Sut};
pub use world::{drive_to_quiescence, Quiesce, World};
