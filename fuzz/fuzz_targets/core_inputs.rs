//! Arbitrary input sequences into the core; the oracle (I1-I10) after every step, the
//! reference model compared after every step, both liveness drives at the end.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(finding) = pnp_lifecycle_testkit::fuzz_bodies::core_inputs(data) {
        panic!("{}", finding);
    }
});
