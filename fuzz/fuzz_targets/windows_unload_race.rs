//! The Windows port: a schedule choosing, at each yield point, which actor runs next (PnP manager, clients, reset worker, notification thread, driver unload).
//! The port's `race::run` checks the invariants on what the clients received and that
//! every actor finished; an `Err` is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|schedule: &[u8]| {
    if let Err(finding) = pnp_lifecycle_windows::race::run(schedule) {
        panic!("{}", finding);
    }
});
