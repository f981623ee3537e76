//! The set-ups of `tests/spec_found.rs` (in the testkit: `spec::found`, which the walks and
//! the fuzz body also ask whether the core still shows a divergence), and the core after
//! them.
#![allow(dead_code)]

use pnp_lifecycle::{DeviceId, Input, Output, Tick};
pub use pnp_lifecycle_testkit::spec::found::*;
use pnp_lifecycle_testkit::{Fuzz, World};

pub const D0: DeviceId = DeviceId(0);
pub const D1: DeviceId = DeviceId(1);

/// The core after `inputs` (oracle on), with the outputs of the last input.
pub fn core_after(inputs: &[(Tick, Input)]) -> (World<Fuzz>, Vec<Output>) {
    let mut w: World<Fuzz> = World::new(CONFIG, false);
    let mut last = Vec::new();
    for &(now, input) in inputs {
        let step = w
            .step(now, input)
            .unwrap_or_else(|v| panic!("{input:?} at {now:?}: {v}"));
        last = step.outputs;
    }
    (w, last)
}
