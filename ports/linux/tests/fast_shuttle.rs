//! The verbs' fast path under shuttle (random and PCT, issue 21): two contexts run verbs
//! through their [`HwContext`]s on threads of their own while PCI error recovery (the
//! core's close before the reset), a revocation (an unresponsive context disassociated
//! at its deadline), a permanent failure (surprise removal) then PCI remove, a system
//! suspend, or module unload runs. Each checks the common oracle (I12: no reset, start or
//! shutdown under an operation in flight) and, besides, that no power-down or release
//! ran under an operation in flight on a context not fenced, and that no fenced context
//! began one. Schedules per scheduler: `PNP_LINUX_SHUTTLE_ITERS` (default 300).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pnp_lifecycle::{ClientKind, HardwareCommand};
use pnp_lifecycle_linux::{ClientId, Driver, PciChannelState, PciErsResult, PmOp};
use pnp_lifecycle_runtime::ShuttleKernel;
use pnp_lifecycle_testkit::linux_port::{explore, iterations, shuttle_driver, timer, CONFIG, DEV};
use pnp_lifecycle_testkit::observed::{check, Log, Obs};
use shuttle::thread;

/// Verbs that began on the fast path and were carried by a close while they ran, one
/// count per race: the tests run in parallel, and one shared count was reset by each
/// race's start under another's feet (a landmark then read 0 by chance).
static CARRIED: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];

type D = Arc<Driver<ShuttleKernel>>;

/// `n` verbs of registration `id` (client number `client` in the log) through a context
/// taken once; refused verbs are the point of the race: nothing to do.
fn verbs(d: &D, log: &Log, client: u32, id: ClientId, n: usize, carried_by: &AtomicUsize) {
    let Ok(ctx) = d.hw_context(id, DEV) else {
        return;
    };
    for _ in 0..n {
        if let Ok(op) = d.begin_verb(&ctx) {
            let fast = op.on_fast_path();
            log.push(Obs::OperationBegin {
                client,
                device: DEV,
            });
            thread::yield_now();
            log.push(Obs::OperationEnd {
                client,
                device: DEV,
            });
            // The machine counts it only if a close carried it (one verb at a time here).
            let carried = fast
                && d.runtime()
                    .inspect(|o| o.machine().client(ctx.handle()))
                    .is_some_and(|v| v.operations_in_flight > 0);
            if carried {
                carried_by.fetch_add(1, Ordering::Relaxed);
            }
            let _ = d.end_verb(&ctx, op);
        }
        thread::yield_now();
    }
}

/// Besides the oracle: no power-down or release under a verb of a context not fenced,
/// and no verb of a context after a fence that waited for its verbs (a verb is logged
/// after its grant, and only such a fence is sure to come after every earlier grant's
/// log line: it waits for the verb's end).
fn no_power_down_or_release_under_a_verb(log: &[Obs]) {
    let mut in_flight = [0i32; 4];
    let mut fenced = [false; 4];
    let mut waited = [false; 4];
    for (i, o) in log.iter().enumerate() {
        match o {
            Obs::OperationBegin { client, .. } => {
                let c = *client as usize;
                assert!(
                    !waited[c],
                    "a verb of fenced context {c} began at #{i}: {log:?}"
                );
                in_flight[c] += 1;
            }
            Obs::OperationEnd { client, .. } => in_flight[*client as usize] -= 1,
            Obs::Fenced {
                client, overran, ..
            } => {
                fenced[*client as usize] = true;
                waited[*client as usize] = !overran;
            }
            Obs::Hardware {
                command: command @ (HardwareCommand::PowerDown | HardwareCommand::ReleaseResources),
                ..
            } => {
                for c in 0..in_flight.len() {
                    assert!(
                        in_flight[c] == 0 || fenced[c],
                        "{command:?} at #{i} under a verb of context {c}: {log:?}"
                    );
                }
            }
            _ => {}
        }
    }
}

fn finish(d: &D, log: &Log) {
    let _ = d.unload();
    log.push(Obs::UnloadReturned);
    let log = log.snapshot();
    if let Err(e) = check(&log, true) {
        panic!("{e}\nlog: {log:?}");
    }
    no_power_down_or_release_under_a_verb(&log);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Against {
    Recovery,
    Revocation,
    PermFailure,
    Suspend,
    Unload,
}

fn race(against: Against) {
    let counter = &CARRIED[against as usize];
    counter.store(0, Ordering::Relaxed);
    let name = format!("verbs on the fast path vs {against:?}");
    explore(&name, iterations(300), move || {
        let second = match against {
            Against::Revocation => (PciErsResult::None, ClientKind::Untrusted),
            _ => (PciErsResult::NeedReset, ClientKind::Trusted),
        };
        let clients = [(PciErsResult::NeedReset, ClientKind::Trusted), second];
        let (d, log, ids, clock) = shuttle_driver(CONFIG, &clients);
        let workers: Vec<_> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let (d, log, id) = (d.clone(), log.clone(), *id);
                thread::spawn(move || verbs(&d, &log, i as u32, id, 2, &CARRIED[against as usize]))
            })
            .collect();
        let t = {
            let (d, clock) = (d.clone(), clock.clone());
            thread::spawn(move || timer(&d, &clock, &[]))
        };
        match against {
            Against::Recovery | Against::Revocation => {
                let _ = d.error_detected(DEV, PciChannelState::Frozen);
                let _ = d.slot_reset(DEV);
                d.resume(DEV);
            }
            Against::PermFailure => {
                let _ = d.error_detected(DEV, PciChannelState::PermFailure);
                log.push(Obs::RequestSent { id: 1 });
                let removed = d.remove(DEV);
                log.push(Obs::RequestCompleted {
                    id: 1,
                    success: removed.is_ok(),
                });
            }
            Against::Suspend => {
                let _ = d.pm(DEV, PmOp::Suspend);
                let _ = d.pm(DEV, PmOp::Resume);
            }
            Against::Unload => {
                let _ = d.unload();
            }
        }
        for w in workers {
            w.join().unwrap();
        }
        finish(&d, &log);
        t.join().unwrap();
    });
    let carried = counter.load(Ordering::Relaxed);
    println!("{name}: {carried} verbs begun on the fast path were carried by a close");
    assert!(
        carried > 0,
        "landmark not reached: no verb carried by a close"
    );
}

#[test]
fn pci_error_recovery_closes_the_gate_under_verbs() {
    race(Against::Recovery);
}

#[test]
fn a_disassociation_races_a_verb_on_the_fast_path() {
    race(Against::Revocation);
}

#[test]
fn perm_failure_and_remove_race_verbs_on_the_fast_path() {
    race(Against::PermFailure);
}

#[test]
fn system_suspend_races_verbs_on_the_fast_path() {
    race(Against::Suspend);
}

#[test]
fn unload_races_verbs_on_the_fast_path() {
    race(Against::Unload);
}
