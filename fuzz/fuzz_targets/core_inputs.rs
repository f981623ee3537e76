//! Arbitrary input sequences into the core, each with the owner's `now` (small steps, huge
//! jumps, the next deadline); the oracle (I1-I14 and the model-free rules) after every
//! step, the reference model compared after every step, the three liveness drives
//! (cooperative, uncooperative, hostile clients) at the end.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(finding) = pnp_lifecycle_testkit::fuzz_bodies::core_inputs(data) {
        panic!("{}", finding);
    }
});
