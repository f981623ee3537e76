//! The firmware port: a schedule interleaving the catastrophic-error ISR, the thread-mode pump, the reset line and unload.
//! `pnp_lifecycle_testkit::firmware_port::race::run` checks the common oracle and the
//! firmware's board checks on what the clients and the hardware observed, and that every
//! actor finished; an `Err` is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|schedule: &[u8]| {
    if let Err(finding) = pnp_lifecycle_testkit::firmware_port::race::run(schedule) {
        panic!("{}", finding);
    }
});
