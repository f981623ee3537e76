//! The fast path of `MlxInterface::hardware_op` under shuttle (random and PCT, issue 21):
//! I/O threads of two clients run hardware operations through their interfaces' gates
//! (shuttle's atomics, so every step of the gate is a scheduling point) while one client's
//! reset cycle closes and reopens the gates, a stop, or a surprise removal runs; each
//! ends with `IRP_MN_REMOVE_DEVICE`, which ends the I/O threads. Each checks the common
//! oracle (I12 for reset, start and shutdown) and, besides, that no power-down or release
//! of the resources ran under an operation of a client not fenced.
//!
//! `WINDOWS_SHUTTLE_ITERS` sets the schedules per scheduler per scenario (default 300).

use std::sync::Arc;

use pnp_lifecycle::HardwareCommand;
use pnp_lifecycle_runtime::ShuttleKernel;
use pnp_lifecycle_testkit::observed::Obs;
use pnp_lifecycle_testkit::windows_port::{both_schedulers, iterations, World};
use pnp_lifecycle_windows::{MlxInterface, NtStatus, PnpMinor};
use shuttle::thread::{self, JoinHandle};

type Iface =
    MlxInterface<ShuttleKernel, pnp_lifecycle_testkit::windows_port::RecordedOs<ShuttleKernel>>;

fn run(name: &str, scenario: fn()) {
    let n = both_schedulers(scenario, iterations(300));
    println!("{name}: {n} schedules (random + PCT)");
}

/// A client's I/O thread: hardware operations until one is refused.
fn spawn_io(iface: &Iface) -> JoinHandle<NtStatus> {
    let io = iface.clone();
    thread::spawn(move || loop {
        if let Err(status) = io.hardware_op() {
            return status;
        }
    })
}

/// Besides the oracle: no power-down or release under an operation of a client not fenced.
fn no_power_down_or_release_under_an_operation(log: &[Obs]) {
    let mut in_flight: Vec<(u32, i32)> = Vec::new();
    let mut fenced: Vec<u32> = Vec::new();
    for (i, o) in log.iter().enumerate() {
        match o {
            Obs::OperationBegin { client, .. } => {
                match in_flight.iter_mut().find(|(c, _)| c == client) {
                    Some((_, n)) => *n += 1,
                    None => in_flight.push((*client, 1)),
                }
            }
            Obs::OperationEnd { client, .. } => {
                if let Some((_, n)) = in_flight.iter_mut().find(|(c, _)| c == client) {
                    *n -= 1;
                }
            }
            Obs::Fenced { client, .. } => fenced.push(*client),
            Obs::Hardware {
                command: command @ (HardwareCommand::PowerDown | HardwareCommand::ReleaseResources),
                ..
            } => {
                for (c, n) in &in_flight {
                    assert!(
                        *n == 0 || fenced.contains(c),
                        "{command:?} at #{i} under an operation of client {c}: {log:?}"
                    );
                }
            }
            _ => {}
        }
    }
}

/// Two clients' I/O threads and event threads (`requester` asks for a reset first) while
/// `pnp` runs on the main thread, then `IRP_MN_REMOVE_DEVICE` and unload.
fn race(pnp: &[PnpMinor], requester: bool) {
    let w = World::new();
    let mut events = Vec::new();
    let mut io = Vec::new();
    for request in [requester, false] {
        let c = w.register().expect("register");
        io.push(spawn_io(&c.iface));
        let wc = Arc::clone(&w);
        events.push(thread::spawn(move || wc.run_client(c, request)));
    }
    for minor in pnp {
        let _ = w.pnp(*minor);
    }
    assert_eq!(w.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    for h in io {
        h.join().expect("I/O thread");
    }
    for h in events {
        h.join().expect("event thread");
    }
    w.unload();
    w.finish();
    no_power_down_or_release_under_an_operation(&w.log.snapshot());
}

#[test]
fn shuttle_a_reset_cycles_close_races_operations_of_two_clients() {
    run("reset cycle's close vs fast operations", || race(&[], true));
}

#[test]
fn shuttle_a_stop_races_fast_operations() {
    run("stop vs fast operations", || {
        race(&[PnpMinor::QueryStopDevice, PnpMinor::StopDevice], false)
    });
}

#[test]
fn shuttle_surprise_removal_races_fast_operations() {
    run("surprise removal vs fast operations", || {
        race(&[PnpMinor::SurpriseRemoval], false)
    });
}
