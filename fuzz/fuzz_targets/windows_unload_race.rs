//! The Windows port: a schedule choosing, at each step, which actor moves next (the PnP
//! manager's remove, two mlx4 clients, a client's I/O thread, the notification thread,
//! driver unload). `pnp_lifecycle_testkit::windows_port::race::run` checks the common
//! oracle on what the clients, hardware and IRPs observed, and that every actor finished;
//! an `Err` is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|schedule: &[u8]| {
    if let Err(finding) = pnp_lifecycle_testkit::windows_port::race::run(schedule) {
        panic!("{}", finding);
    }
});
