//! The Linux port: a schedule interleaving probe/remove, ib_client registration, PCI error recovery, uverbs revocation and module exit.
//! The port's `race::run` checks the invariants on what the clients received and that
//! every actor finished; an `Err` is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|schedule: &[u8]| {
    if let Err(finding) = pnp_lifecycle_linux::race::run(schedule) {
        panic!("{}", finding);
    }
});
