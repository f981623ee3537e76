//! The bodies of the fuzz targets, shared by `fuzz/fuzz_targets/*` and
//! `tests/fuzz_replay.rs` so that both run the same code.

use crate::gen::{small_config, Generator};
use crate::oracle::Violation;
use crate::sut::{Fuzz, Sut};
use crate::world::{drive_to_quiescence, Quiesce, World};
use arbitrary::Unstructured;
use pnp_lifecycle::{Input, Tick};

/// The longest input sequence one fuzz case drives.
pub const MAX_INPUTS: usize = 512;

/// A failure found by a body: the violation and the inputs that led to it.
#[derive(Debug, Clone)]
pub struct Finding {
    /// What broke.
    pub violation: Violation,
    /// The inputs with the owner's `now` for each, from a fresh machine.
    pub inputs: Vec<(Tick, Input)>,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{} after {} inputs:", self.violation, self.inputs.len())?;
        for (now, i) in &self.inputs {
            writeln!(f, "  @{} {:?}", now.0, i)?;
        }
        Ok(())
    }
}

/// Drive `sut` with inputs generated from `data`, checking the oracle (and the spec model,
/// if `with_model`) on every step, then check liveness with the three quiescence drives
/// (cooperative, uncooperative and hostile clients). Returns the number of inputs applied.
pub fn run_inputs<S: Sut>(
    data: &[u8],
    with_model: bool,
    sut: impl FnOnce(pnp_lifecycle::Config) -> S,
) -> Result<usize, Finding> {
    let mut u = Unstructured::new(data);
    let Ok(config) = small_config(&mut u) else {
        return Ok(0);
    };
    let mut world = World::from_sut(sut(config), with_model);
    let mut generator = Generator::new();
    let mut inputs = Vec::new();
    while !u.is_empty() && inputs.len() < MAX_INPUTS {
        let Ok((now, input)) = generator.next(&mut u, &world) else {
            break;
        };
        inputs.push((now, input));
        if let Err(violation) = world.step(now, input) {
            return Err(Finding { violation, inputs });
        }
        if world.oracle.unload_finished {
            // Everything after is refused with `Unloaded` (checked once, above): stop.
            break;
        }
    }
    for mode in [
        Quiesce::Cooperative,
        Quiesce::Uncooperative,
        Quiesce::Hostile,
    ] {
        let mut w = world.clone();
        if let Err(mut violation) = drive_to_quiescence(&mut w, mode) {
            violation.detail = format!(
                "{} (quiescence drive {:?} after the inputs)",
                violation.detail, mode
            );
            return Err(Finding { violation, inputs });
        }
    }
    Ok(inputs.len())
}

/// The `core_inputs` target: arbitrary input sequences into the core (two devices, three
/// clients, two ports), the oracle after every step, the reference model compared after
/// every step, and the three liveness drives at the end.
pub fn core_inputs(data: &[u8]) -> Result<usize, Finding> {
    run_inputs::<Fuzz>(data, true, Fuzz::create)
}
