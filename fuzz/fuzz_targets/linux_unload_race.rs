//! The Linux port: a schedule interleaving probe/remove, ib_client registration, PCI error recovery, uverbs revocation, dev_pm_ops suspend/resume (system sleep or runtime PM) and module exit.
//! The harness `pnp_lifecycle_testkit::linux_port::race::run` checks the common oracle on
//! what the clients and hardware observed and that every actor finished; an `Err` is a
//! finding.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|schedule: &[u8]| {
    if let Err(finding) = pnp_lifecycle_testkit::linux_port::race::run(schedule) {
        panic!("{}", finding);
    }
});
