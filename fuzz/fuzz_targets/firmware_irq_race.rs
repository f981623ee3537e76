//! The firmware port: a schedule interleaving the catastrophic-error ISR, the thread-mode pump, the reset line and unload.
//! The port's `race::run` checks the invariants on what the clients received and that
//! every actor finished; an `Err` is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|schedule: &[u8]| {
    if let Err(finding) = pnp_lifecycle_firmware::race::run(schedule) {
        panic!("{}", finding);
    }
});
