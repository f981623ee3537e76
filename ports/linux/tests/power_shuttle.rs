//! Power under shuttle (random and PCT schedulers): `dev_pm_ops` system sleep and runtime
//! PM racing PCI error recovery, a reset request, verbs, perm failure (surprise removal),
//! PCI remove, `ib_unregister_client` and module unload. Each asserts the common oracle
//! (I1-I14: no hardware command but the power-up or release in Dx, no verb in Dx, every
//! `suspending` ended) and that every actor finished with an errno of its contract.
//! Schedules per scheduler: `PNP_LINUX_SHUTTLE_ITERS` (default 3000).

use std::sync::Arc;

use pnp_lifecycle::{ClientKind, HardwareCommand};
use pnp_lifecycle_linux::{ClientId, Driver, Errno, PciChannelState, PciErsResult, PmOp};
use pnp_lifecycle_runtime::ShuttleKernel;
use pnp_lifecycle_testkit::linux_port::{
    explore, iterations, late_ack, shuttle_driver, timer, unregister, CONFIG, DEV,
};
use pnp_lifecycle_testkit::observed::{check, Log, Obs};
use shuttle::thread;

type D = Arc<Driver<ShuttleKernel>>;

fn iters() -> usize {
    iterations(3000)
}

fn finish(log: &Log) -> Vec<Obs> {
    log.push(Obs::UnloadReturned);
    let log = log.snapshot();
    if let Err(e) = check(&log, true) {
        panic!("{e}\nlog: {log:?}");
    }
    log
}

/// A verb of client `c` (`pm_runtime_get_sync`, the op, `pm_runtime_put`). Logged under
/// the runtime's lock while the core still counts it in flight: a verb whose fence outran
/// its grace meanwhile reaches nothing and is not an operation the oracle sees.
fn verb(d: &Driver<ShuttleKernel>, log: &Log, c: u32, id: ClientId) -> Option<Errno> {
    if let Err(e) = d.begin_hw_op(id, DEV) {
        return Some(e.errno);
    }
    let h = d.handle(id, DEV);
    let push = |o: Obs| {
        d.runtime().inspect(|rt| {
            let view = h.and_then(|h| rt.machine().client(h));
            let live = view.is_some_and(|v| v.operations_in_flight > 0);
            if live {
                log.push(o);
            }
            live
        })
    };
    let device = DEV;
    if push(Obs::OperationBegin { client: c, device }) {
        thread::yield_now();
        push(Obs::OperationEnd { client: c, device });
    }
    d.end_hw_op(id, DEV).err().map(|e| e.errno)
}

/// The PCI core's error recovery, as `pcie_do_recovery` sequences the callbacks.
fn recovery(d: &Driver<ShuttleKernel>) -> PciErsResult {
    let mut r = d.error_detected(DEV, PciChannelState::Frozen);
    if r == PciErsResult::CanRecover {
        r = d.mmio_enabled(DEV);
    }
    if r == PciErsResult::NeedReset {
        r = d.slot_reset(DEV);
    }
    if r == PciErsResult::Recovered {
        d.resume(DEV);
    }
    r
}

fn spawn<R: Send + 'static>(
    d: &D,
    f: impl FnOnce(D) -> R + Send + 'static,
) -> thread::JoinHandle<R> {
    let d = d.clone();
    thread::spawn(move || f(d))
}

fn hardware_commands(log: &[Obs]) -> Vec<HardwareCommand> {
    let of = |o: &Obs| match o {
        Obs::Hardware { command, .. } => Some(*command),
        _ => None,
    };
    log.iter().filter_map(of).collect()
}

/// Runtime suspend, then system suspend and resume, racing error recovery (a reset
/// request of the driver's own) and a late-voting context's verb. Every actor returns;
/// a verb fails only with the errno of the state it met; the device ends running.
#[test]
fn suspend_and_runtime_pm_race_error_recovery_and_verbs() {
    explore("power vs error recovery and verbs", iters(), || {
        let clients = [
            (PciErsResult::NeedReset, ClientKind::Trusted),
            (PciErsResult::None, ClientKind::Untrusted),
        ];
        let (d, log, ids, clock) = shuttle_driver(CONFIG, &clients);
        let t = {
            let (d, clock) = (d.clone(), clock.clone());
            thread::spawn(move || timer(&d, &clock, &[]))
        };
        let pm = spawn(&d, |d| {
            // EBUSY in a reset cycle; EAGAIN while the context's verb holds a usage count.
            let idle = d.pm(DEV, PmOp::RuntimeSuspend).err().map(|e| e.errno);
            assert!(
                matches!(idle, None | Some(Errno::EBUSY | Errno::EAGAIN)),
                "{idle:?}"
            );
            let sleep = d.pm(DEV, PmOp::Suspend).err().map(|e| e.errno);
            // A system suspend waits for recovery; EBUSY only while a runtime resume a
            // verb began is under way (the PM core's pm_runtime_barrier excludes it).
            assert!(matches!(sleep, None | Some(Errno::EBUSY)), "{sleep:?}");
            d.pm(DEV, PmOp::Resume).expect("resume");
        });
        let ers = spawn(&d, |d| recovery(&d));
        let user = {
            let (d, log, id) = (d.clone(), log.clone(), ids[1]);
            thread::spawn(move || {
                late_ack(&d, &log, 1, id);
                verb(&d, &log, 1, id)
            })
        };
        pm.join().unwrap();
        let r = ers.join().unwrap();
        assert!(
            matches!(r, PciErsResult::Recovered | PciErsResult::Disconnect),
            "{r:?}"
        );
        let v = user.join().unwrap();
        use Errno::*;
        assert!(
            matches!(
                v,
                None | Some(ESHUTDOWN | EAGAIN | EBUSY | ESTALE | EIO | ETIMEDOUT)
            ),
            "{v:?}"
        );
        // After the resume a verb of the trusted client works, unless recovery failed.
        // Its callbacks the others' calls caused (its `resume`) ran, on whichever thread.
        let h = d.handle(ids[0], DEV).expect("attached");
        let idle = |v: pnp_lifecycle::ClientView| !v.callback_in_flight && v.waiting_events == 0;
        let _ = d
            .runtime()
            .wait_until(|o, _| o.machine().client(h).is_none_or(idle).then_some(()));
        if d.failure(DEV).is_none() {
            assert_eq!(verb(&d, &log, 0, ids[0]), None);
        }
        d.unload().expect("unload");
        t.join().unwrap();
        finish(&log);
    });
}

/// System suspend and resume racing perm failure (surprise removal), PCI remove,
/// `ib_unregister_client` and module unload: nothing hangs, the client gets exactly
/// one `remove`, nothing but the release reaches hardware in Dx (I14), and unload
/// returns only after every callback returned (I2).
#[test]
fn system_suspend_races_perm_failure_remove_unregister_and_unload() {
    explore(
        "suspend vs surprise removal, remove, unload",
        iters(),
        || {
            let clients = [(PciErsResult::NeedReset, ClientKind::Trusted)];
            let (d, log, ids, clock) = shuttle_driver(CONFIG, &clients);
            let t = {
                let (d, clock) = (d.clone(), clock.clone());
                thread::spawn(move || timer(&d, &clock, &[]))
            };
            let pm = spawn(&d, |d| {
                let _ = d.pm(DEV, PmOp::Suspend);
                let _ = d.pm(DEV, PmOp::Resume);
            });
            let pci = {
                let log = log.clone();
                spawn(&d, move |d| {
                    d.error_detected(DEV, PciChannelState::PermFailure);
                    log.push(Obs::RequestSent { id: 1 });
                    let r = d.remove(DEV);
                    let success = r.is_ok();
                    log.push(Obs::RequestCompleted { id: 1, success });
                })
            };
            let unreg = {
                let (log, id) = (log.clone(), ids[0]);
                spawn(&d, move |d| unregister(&d, &log, 0, id))
            };
            let unload = spawn(&d, |d| d.unload());
            pm.join().unwrap();
            pci.join().unwrap();
            unreg.join().unwrap();
            unload.join().unwrap().expect("unload");
            t.join().unwrap();
            let log = finish(&log);
            let removes = log
                .iter()
                .filter(|o| {
                    matches!(
                        o,
                        Obs::Enter {
                            seen: pnp_lifecycle_testkit::observed::Seen::Event(
                                pnp_lifecycle::Event::Removed { .. }
                            ),
                            ..
                        }
                    )
                })
                .count();
            assert_eq!(removes, 1, "exactly one remove: {log:?}");
        },
    );
}

/// Runtime suspend racing a verb that wakes the device, error recovery, PCI remove and
/// unload: the verb either ran in D0 or failed (`ENODEV` once removal began, `ETIMEDOUT`,
/// `EAGAIN` in the cycle, `ESTALE` with the interface from before the reset when recovery
/// finished first, `EIO`), and no power-up follows the release.
#[test]
fn runtime_suspend_races_a_waking_verb_recovery_remove_and_unload() {
    explore("runtime suspend vs verb, recovery, remove", iters(), || {
        let clients = [(PciErsResult::NeedReset, ClientKind::Trusted)];
        let (d, log, ids, clock) = shuttle_driver(CONFIG, &clients);
        let t = {
            let (d, clock) = (d.clone(), clock.clone());
            thread::spawn(move || timer(&d, &clock, &[]))
        };
        let pm = spawn(&d, |d| {
            if d.runtime_idle(DEV).is_ok() {
                let _ = d.pm(DEV, PmOp::RuntimeSuspend);
            }
        });
        let user = {
            let (log, id) = (log.clone(), ids[0]);
            spawn(&d, move |d| verb(&d, &log, 0, id))
        };
        let ers = spawn(&d, |d| recovery(&d));
        let pci = spawn(&d, |d| d.remove(DEV));
        pm.join().unwrap();
        let v = user.join().unwrap();
        use Errno::*;
        assert!(
            matches!(
                v,
                None | Some(ENODEV | ETIMEDOUT | EAGAIN | ESTALE | EIO | EBUSY)
            ),
            "{v:?}"
        );
        ers.join().unwrap();
        pci.join().unwrap().expect("remove");
        d.unload().expect("unload");
        t.join().unwrap();
        let log = finish(&log);
        let cmds = hardware_commands(&log);
        let release = cmds
            .iter()
            .position(|c| *c == HardwareCommand::ReleaseResources);
        assert!(release.is_some_and(|i| i + 1 == cmds.len()), "{cmds:?}");
    });
}

/// Issue 22 item 5: `runtime_suspend` racing a verb. The PM core never calls it while a
/// verb holds a usage count, so it is refused `EAGAIN` then, changing nothing: no client
/// is told `suspending` while a verb runs (the oracle's log shows the verb in flight
/// around the callback otherwise), and a refused runtime suspend told no one and powered
/// nothing down. Before: the power-down was entered with the verb in flight, clients
/// were told `suspending` while it ran, and the device powered down after it.
#[test]
fn runtime_suspend_racing_a_verb_is_refused_and_tells_no_client_while_it_runs() {
    explore("runtime suspend vs a verb in flight", iters(), || {
        let clients = [(PciErsResult::NeedReset, ClientKind::Trusted)];
        let (d, log, ids, clock) = shuttle_driver(CONFIG, &clients);
        let t = {
            let (d, clock) = (d.clone(), clock.clone());
            thread::spawn(move || timer(&d, &clock, &[]))
        };
        let user = {
            let (log, id) = (log.clone(), ids[0]);
            spawn(&d, move |d| verb(&d, &log, 0, id))
        };
        let pm = spawn(&d, |d| {
            d.pm(DEV, PmOp::RuntimeSuspend).err().map(|e| e.errno)
        });
        let idle = pm.join().unwrap();
        assert!(matches!(idle, None | Some(Errno::EAGAIN)), "{idle:?}");
        // The verb ran, or waited for the runtime resume (and ran, or met its deadline
        // first: the timer jumps to it).
        let v = user.join().unwrap();
        assert!(matches!(v, None | Some(Errno::ETIMEDOUT)), "{v:?}");
        let _ = d.pm(DEV, PmOp::RuntimeResume);
        d.unload().expect("unload");
        t.join().unwrap();
        let log = finish(&log);
        let suspending = |o: &Obs| {
            matches!(
                o,
                Obs::Enter {
                    seen: pnp_lifecycle_testkit::observed::Seen::Event(
                        pnp_lifecycle::Event::Suspending { .. }
                    ),
                    ..
                }
            )
        };
        let mut in_flight = 0;
        for o in &log {
            match o {
                Obs::OperationBegin { .. } => in_flight += 1,
                Obs::OperationEnd { .. } => in_flight -= 1,
                o if suspending(o) => assert_eq!(in_flight, 0, "told while a verb ran: {log:?}"),
                _ => {}
            }
        }
        if idle.is_some() {
            assert!(!log.iter().any(suspending), "refused, yet told: {log:?}");
            let downs = hardware_commands(&log);
            assert!(!downs.contains(&HardwareCommand::PowerDown), "{downs:?}");
        }
    });
}
