//! The driver under shuttle (`ShuttleKernel`: every lock, wait and notification thread of
//! the runtime is the scheduler's), random and PCT schedules. Each scenario asserts the
//! common oracle over what the clients, hardware and IRPs observed
//! (`pnp_lifecycle_testkit::observed::check`), every IRP completed exactly once, no runtime
//! anomaly, shuttle's own deadlock detection, and the finding's own behaviour.
//!
//! `WINDOWS_SHUTTLE_ITERS` sets the schedules per scheduler per scenario (default 2000).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pnp_lifecycle::{ClientKind, Config, Event, HardwareCommand, PhaseKind, ResetResult};
use pnp_lifecycle_runtime::{Monitor, ShuttleKernel, ShuttleMonitor};
use pnp_lifecycle_testkit::observed::Obs;
use pnp_lifecycle_testkit::windows_port::{both_schedulers, iterations, scenarios, World, DEV};
use pnp_lifecycle_windows::{MlxInterface, NtStatus, PnpDeviceState, PnpMinor};
use shuttle::thread::{self, JoinHandle};

type Iface =
    MlxInterface<ShuttleKernel, pnp_lifecycle_testkit::windows_port::RecordedOs<ShuttleKernel>>;

fn run(name: &str, scenario: fn()) {
    let n = both_schedulers(scenario, iterations(2000));
    println!("{name}: {n} schedules (random + PCT)");
}

fn spawn_client(w: &Arc<World>, request: bool) -> JoinHandle<()> {
    let c = w.register().expect("register");
    let w = Arc::clone(w);
    thread::spawn(move || w.run_client(c, request))
}

/// A client's I/O thread: hardware operations until one is refused; the refusal.
fn spawn_io(iface: &Iface) -> JoinHandle<NtStatus> {
    let io = iface.clone();
    thread::spawn(move || loop {
        if let Err(status) = io.hardware_op() {
            return status;
        }
    })
}

fn join<T>(handles: Vec<JoinHandle<T>>) {
    for h in handles {
        h.join().expect("thread ended without panicking");
    }
}

/// Positions in the log of the observations `f` picks.
fn positions(log: &[Obs], f: impl Fn(&Obs) -> bool) -> Vec<usize> {
    log.iter()
        .enumerate()
        .filter(|(_, o)| f(o))
        .map(|(i, _)| i)
        .collect()
}

fn hardware(command: HardwareCommand) -> impl Fn(&Obs) -> bool {
    move |o| matches!(o, Obs::Hardware { command: c, .. } if *c == command)
}

/// Unload racing a reset cycle one client asked for.
#[test]
fn shuttle_unload_racing_reset_cycle() {
    run("unload racing a reset cycle", || {
        let w = World::new();
        let mut hs = vec![spawn_client(&w, true), spawn_client(&w, false)];
        let u = Arc::clone(&w);
        hs.push(thread::spawn(move || u.unload()));
        join(hs);
        w.finish();
    });
}

/// `IRP_MN_REMOVE_DEVICE` racing a client's `reset_execute`.
#[test]
fn shuttle_remove_racing_reset_execute() {
    run("remove racing reset_execute", || {
        let w = World::new();
        let mut hs = vec![spawn_client(&w, false), spawn_client(&w, true)];
        let p = Arc::clone(&w);
        hs.push(thread::spawn(move || {
            assert_eq!(p.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
        }));
        join(hs);
        w.unload();
        w.finish();
    });
}

/// A blocking unregister racing a notification in flight to the same client.
#[test]
fn shuttle_unregister_racing_notification() {
    run("unregister racing a notification", || {
        let w = World::new();
        let requester = spawn_client(&w, true);
        let c1 = w.register().expect("register");
        let w1 = Arc::clone(&w);
        join(vec![thread::spawn(move || w1.unregister(c1.id, &c1.iface))]);
        w.unload();
        join(vec![requester]);
        w.finish();
    });
}

/// Surprise removal during a reset cycle: completed by the core's path (the core took it
/// when the IRP completes), then remove and unload.
#[test]
fn shuttle_surprise_removal_during_a_reset() {
    run("surprise removal during a reset", || {
        let w = World::new();
        let mut hs = vec![spawn_client(&w, true), spawn_client(&w, false)];
        let p = Arc::clone(&w);
        hs.push(thread::spawn(move || {
            assert_eq!(p.pnp(PnpMinor::SurpriseRemoval), NtStatus::SUCCESS);
            let phase = p.driver.runtime().inspect(|o| o.machine().phase(DEV));
            assert_eq!(
                phase,
                Some(PhaseKind::SurpriseRemoved),
                "completed behind the core"
            );
            assert_eq!(p.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
        }));
        join(hs);
        w.unload();
        w.finish();
    });
}

/// `IRP_MN_REMOVE_DEVICE` against a client's I/O thread: the remove goes to the core at
/// once and the core drains the operation in flight before the teardown: no operation
/// runs once the resources are released, and the client's later operations are refused
/// with `STATUS_DELETE_PENDING` (the remove lock is marked removed).
#[test]
fn shuttle_remove_drains_operations_before_the_teardown() {
    run("remove drains operations before the teardown", || {
        let w = World::new();
        let c = w.register().expect("register");
        let io = spawn_io(&c.iface);
        let wc = Arc::clone(&w);
        let events = thread::spawn(move || wc.run_client(c, false));
        assert_eq!(w.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
        assert_eq!(io.join().unwrap(), NtStatus::DELETE_PENDING);
        join(vec![events]);
        w.unload();
        w.finish();
        let log = w.log.snapshot();
        let released = positions(&log, hardware(HardwareCommand::ReleaseResources));
        let ops = positions(&log, |o| matches!(o, Obs::OperationEnd { .. }));
        assert!(
            released.first() > ops.last(),
            "an operation ran after the resources were released"
        );
    });
}

/// Re-add after remove (issue 11): a device removed while a client's I/O thread runs, then
/// added again in the same slot, starts and takes a client (the remove lock is
/// re-initialised on `AddDevice`): no `STATUS_DELETE_PENDING`.
#[test]
fn shuttle_readd_after_remove() {
    run("re-add after remove", || {
        let w = World::new();
        let c = w.register().expect("register");
        let io = spawn_io(&c.iface);
        let wc = Arc::clone(&w);
        let events = thread::spawn(move || wc.run_client(c, false));
        let p = Arc::clone(&w);
        let pnp = thread::spawn(move || {
            assert_eq!(p.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
            assert_eq!(p.driver.add_device(DEV), Ok(()), "the slot is free again");
            assert_eq!(p.pnp(PnpMinor::StartDevice), NtStatus::SUCCESS);
            let c1 = p
                .register()
                .expect("a client registers on the re-added device");
            assert_eq!(c1.iface.hardware_op(), Ok(()));
            let pc = Arc::clone(&p);
            let events1 = thread::spawn(move || pc.run_client(c1, false));
            assert_eq!(p.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
            join(vec![events1]);
        });
        join(vec![events, pnp]);
        io.join().unwrap();
        w.unload();
        w.finish();
    });
}

/// The blocking-unregister scenario, shared with the planted faults: client 0's RESET
/// callback calls client 1's blocking unregister, and its `Removed` callback its own; each
/// is refused with `STATUS_POSSIBLE_DEADLOCK` (nothing changed) and the callback leaves with
/// `unregister_nowait`. Meanwhile client 1's own thread unregisters (blocking), the PnP
/// manager sends IRPs and the driver unloads: nothing hangs.
pub fn unregister_inside_callback(w: Arc<World>) {
    type Slot = Arc<ShuttleMonitor<Option<(u32, Iface)>>>;
    let (other, me): (Slot, Slot) = (Arc::new(Monitor::new(None)), Arc::new(Monitor::new(None)));
    let refused = Arc::new(ShuttleMonitor::new(0u32));
    let (hook_other, hook_me, hook_refused, log) =
        (other.clone(), me.clone(), refused.clone(), w.log.clone());
    let c0 = w
        .register_with(ClientKind::Trusted, move |event| {
            let target = match event {
                Event::Reset => hook_other.with(|s| s.clone()),
                Event::Removed { .. } => hook_me.with(|s| s.clone()),
                _ => None,
            };
            let Some((id, iface)) = target else { return };
            assert_eq!(
                iface.unregister().map_err(|s| s.name()),
                Err("STATUS_POSSIBLE_DEADLOCK"),
                "a blocking unregister inside a callback is refused"
            );
            hook_refused.with(|n| *n += 1);
            log.push(Obs::DetachBegin { client: id });
            let _ = iface.unregister_nowait();
        })
        .expect("register 0");
    let c1 = w.register().expect("register 1");
    me.with(|s| *s = Some((c0.id, c0.iface.clone())));
    other.with(|s| *s = Some((c1.id, c1.iface.clone())));
    let w0 = Arc::clone(&w);
    let client0 = thread::spawn(move || w0.run_client(c0, true));
    let w1 = Arc::clone(&w);
    join(vec![thread::spawn(move || w1.unregister(c1.id, &c1.iface))]);
    // Later IRPs still complete.
    let status = w.pnp(PnpMinor::QueryStopDevice);
    if status == NtStatus::SUCCESS {
        assert_eq!(w.pnp(PnpMinor::CancelStopDevice), NtStatus::SUCCESS);
    }
    w.unload();
    join(vec![client0]);
    w.finish();
    assert!(
        refused.with(|n| *n) >= 1,
        "client 0's Removed callback tried its own blocking unregister"
    );
}

/// Unregister from inside a callback (issue 11).
#[test]
fn shuttle_unregister_inside_callback() {
    run("blocking unregister inside a callback", || {
        unregister_inside_callback(World::new())
    });
}

/// Two IRPs carrying the same caller token both reach the core (issue 11): a stop waits
/// for a client's operation in flight while `IRP_MN_SURPRISE_REMOVAL` carrying the stop's
/// token arrives. Surprise removal is completed by the core's path with `STATUS_SUCCESS`
/// (the core holds the device surprise-removed by then); the stop completes exactly once.
#[test]
fn shuttle_surprise_removal_with_a_colliding_token() {
    run("surprise removal with a colliding token", || {
        const SAME: u32 = 1000;
        let w = World::new();
        let c = w.register().expect("register");
        let io = spawn_io(&c.iface);
        let wc = Arc::clone(&w);
        let events = thread::spawn(move || wc.run_client(c, false));
        let s = Arc::clone(&w);
        let stopper = thread::spawn(move || {
            if s.pnp_tagged(PnpMinor::QueryStopDevice, Some(SAME)) == NtStatus::SUCCESS {
                s.pnp_tagged(PnpMinor::StopDevice, Some(SAME));
            }
        });
        let p = Arc::clone(&w);
        let surpriser = thread::spawn(move || {
            assert_eq!(
                p.pnp_tagged(PnpMinor::SurpriseRemoval, Some(SAME)),
                NtStatus::SUCCESS,
                "surprise removal is never refused over a token"
            );
            let phase = p.driver.runtime().inspect(|o| o.machine().phase(DEV));
            assert_eq!(phase, Some(PhaseKind::SurpriseRemoved));
        });
        join(vec![stopper, surpriser]);
        assert_eq!(w.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
        join(vec![events]);
        io.join().unwrap();
        w.unload();
        w.finish();
    });
}

/// A failed device is reported to the PnP manager (issue 11): a reset that fails while a
/// second client runs hardware operations. Once the core holds the device failed,
/// `IRP_MN_QUERY_PNP_DEVICE_STATE` answers `PNP_DEVICE_FAILED` (asked of the core, in
/// whatever order the news and the query run); the PnP manager's query remove and remove
/// then succeed; `IoInvalidateDeviceState` was called exactly once.
#[test]
fn shuttle_failed_reset_reported_to_the_pnp_manager() {
    const QUERY_ROUNDS: usize = 4;
    run("a failed reset reported to the PnP manager", || {
        let w = World::with(ResetResult::Failed, |os| os);
        let worker = w.register().expect("register");
        let io = spawn_io(&worker.iface);
        let mut hs = vec![spawn_client(&w, true)];
        let wc = Arc::clone(&w);
        hs.push(thread::spawn(move || wc.run_client(worker, false)));
        let p = Arc::clone(&w);
        hs.push(thread::spawn(move || {
            // The client's reset may run before, between or after these queries. In every
            // order each answer is NONE or FAILED, and the failure, once seen (by a
            // query or in the core read around it), stays seen: a failure is kept until
            // remove, and no answer contradicts the core's state read around it.
            let failed = || {
                p.driver
                    .runtime()
                    .inspect(|o| o.machine().failure(DEV).is_some())
            };
            let answered_failed = |answer: Result<PnpDeviceState, NtStatus>| {
                assert!(
                    answer == Ok(PnpDeviceState::NONE) || answer == Ok(PnpDeviceState::FAILED),
                    "the pre-failure state or FAILED, nothing else: {answer:?}"
                );
                answer == Ok(PnpDeviceState::FAILED)
            };
            // Queries interleaved with reads of the core, a few rounds so that some orders
            // see the failure arrive among them.
            let mut seen = vec![failed()];
            for _ in 0..QUERY_ROUNDS {
                seen.push(answered_failed(p.driver.query_pnp_device_state(DEV)));
                seen.push(failed());
                thread::yield_now();
            }
            assert!(
                seen.windows(2).all(|w| w[0] <= w[1]),
                "the core read, then each query's answer and the core read after it: \
                 {seen:?} goes back from FAILED"
            );
            p.driver
                .runtime()
                .wait_until(|o, _| o.machine().failure(DEV).map(drop))
                .expect("the PnP manager's thread is not a notification thread");
            assert_eq!(
                p.driver.query_pnp_device_state(DEV),
                Ok(PnpDeviceState::FAILED)
            );
            assert_eq!(p.pnp(PnpMinor::QueryRemoveDevice), NtStatus::SUCCESS);
            assert_eq!(p.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
        }));
        join(hs);
        io.join().expect("the I/O thread ends with a refusal");
        assert_eq!(w.hal.invalidations(), 1, "IoInvalidateDeviceState once");
        w.unload();
        w.finish();
    });
}

/// `IRP_MJ_CREATE` / `IRP_MJ_CLOSE` are the core's hold: query remove is vetoed while a
/// handle is open, whatever the interleaving; once it is closed, query remove succeeds.
#[test]
fn shuttle_query_remove_vetoed_while_a_handle_is_open() {
    run("query remove against an open handle", || {
        let w = World::new();
        let c = w.register().expect("register");
        let client = c.iface.handle();
        assert_eq!(w.driver.dispatch_create(client), Ok(()));
        assert_eq!(w.pnp(PnpMinor::QueryRemoveDevice), NtStatus::DEVICE_BUSY);
        assert_eq!(w.driver.dispatch_close(client), Ok(()));
        let open = Arc::new(ShuttleMonitor::new(false));
        let (d, o) = (w.driver.clone(), open.clone());
        let opener = thread::spawn(move || {
            for _ in 0..2 {
                if d.dispatch_create(client).is_ok() {
                    o.with(|v| *v = true);
                    thread::yield_now();
                    o.with(|v| *v = false);
                    assert_eq!(d.dispatch_close(client), Ok(()));
                }
            }
        });
        let (p, o) = (Arc::clone(&w), open.clone());
        let querier = thread::spawn(move || {
            let status = p.pnp(PnpMinor::QueryRemoveDevice);
            if status == NtStatus::SUCCESS {
                assert!(!o.with(|v| *v), "query remove succeeded with a handle open");
                assert_eq!(p.pnp(PnpMinor::CancelRemoveDevice), NtStatus::SUCCESS);
            } else {
                assert_eq!(status, NtStatus::DEVICE_BUSY);
            }
        });
        join(vec![opener, querier]);
        assert_eq!(w.pnp(PnpMinor::QueryRemoveDevice), NtStatus::SUCCESS);
        let wc = Arc::clone(&w);
        let events = thread::spawn(move || wc.run_client(c, false));
        assert_eq!(w.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
        join(vec![events]);
        w.unload();
        w.finish();
    });
}

/// `IRP_MN_STOP_DEVICE` against a client's hardware operation in flight (issue 11): the
/// stop goes through the core's Stopping phase, so the hardware is shut down only after the
/// operation returned (oracle I12), and the stop does shut it down.
#[test]
fn shuttle_stop_against_an_operation_in_flight() {
    run("stop against an operation in flight", || {
        let w = World::new();
        let c = w.register().expect("register");
        let io = spawn_io(&c.iface);
        let wc = Arc::clone(&w);
        let events = thread::spawn(move || wc.run_client(c, false));
        assert_eq!(w.pnp(PnpMinor::QueryStopDevice), NtStatus::SUCCESS);
        assert_eq!(w.pnp(PnpMinor::StopDevice), NtStatus::SUCCESS);
        assert_eq!(w.pnp(PnpMinor::StartDevice), NtStatus::SUCCESS);
        assert_eq!(w.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
        join(vec![events]);
        io.join().unwrap();
        w.unload();
        w.finish();
        let log = w.log.snapshot();
        assert!(!positions(&log, hardware(HardwareCommand::Shutdown)).is_empty());
    });
}

/// Revocation against an operation in flight (issue 11): an untrusted client runs hardware
/// operations and never answers RESET; the timer passes its answer deadline (not the
/// fence's grace), the core revokes it and the runtime fences it. The fence waits out the
/// running operation: no hardware reset under it.
#[test]
fn shuttle_revocation_against_an_operation_in_flight() {
    static FENCED: AtomicUsize = AtomicUsize::new(0);
    run("revocation against an operation in flight", || {
        let w = World::new();
        let told = Arc::new(ShuttleMonitor::new(false));
        let hook_told = told.clone();
        let c0 = w
            .register_with(ClientKind::Untrusted, move |event| {
                if event == Event::Reset {
                    hook_told.with(|t| *t = true);
                }
            })
            .expect("register untrusted");
        let (id0, iface0) = (c0.id, c0.iface.clone());
        let io = {
            let w = Arc::clone(&w);
            thread::spawn(move || {
                while iface0.hardware_op().is_ok() {}
                w.unregister(id0, &iface0);
            })
        };
        let requester = spawn_client(&w, true);
        let timer = {
            let w = Arc::clone(&w);
            thread::spawn(move || {
                told.wait_until(|t| t.then_some(()));
                w.clock.advance(Config::DEFAULT.untrusted_ack_timeout + 1);
                let _ = w.driver.timeout();
            })
        };
        join(vec![timer, io]);
        w.unload();
        join(vec![requester]);
        w.finish();
        let log = w.log.snapshot();
        if log
            .iter()
            .any(|o| matches!(o, Obs::Fenced { client, .. } if *client == id0))
        {
            FENCED.fetch_add(1, Ordering::Relaxed);
        }
        let mut open = false;
        for o in &log {
            match o {
                Obs::OperationBegin { client, .. } if *client == id0 => open = true,
                Obs::OperationEnd { client, .. } if *client == id0 => open = false,
                Obs::Hardware {
                    command: HardwareCommand::Reset,
                    ..
                } => assert!(!open, "hardware reset under the revoked client's operation"),
                _ => {}
            }
        }
    });
    let fenced = FENCED.load(Ordering::Relaxed);
    println!("  client 0 revoked and fenced in {fenced} schedules");
    assert!(fenced > 0, "the scenario reaches the revocation");
}

/// Issue 22, item 2: a client operation that never ends by itself no longer blocks
/// `IRP_MN_REMOVE_DEVICE`: the remove goes to the core at once; the core's removal
/// deadline revokes and fences the client, the port cuts its path, and the remove
/// completes with success within the removal deadline plus the fence's grace
/// (`scenarios::remove_against_a_stuck_operation`).
#[test]
fn shuttle_remove_against_a_stuck_operation_finishes_by_the_fence() {
    run("remove against a stuck operation", || {
        scenarios::remove_against_a_stuck_operation(World::new())
    });
}

/// Issue 22, item 3: a revoked client's operation outran its fence's grace and the reset
/// went ahead; the port cut the client's path first (`Hal::cut_client` on the fence's
/// news), so its accesses during the reset hit nothing (`TestHal` panics on an access
/// during a reset otherwise). Some schedules really run the reset inside the operation
/// (counted).
#[test]
fn shuttle_reset_never_overlaps_a_fenced_clients_access() {
    static OVERLAPS: AtomicUsize = AtomicUsize::new(0);
    run("reset against an operation past its fence", || {
        let w = World::new();
        if scenarios::reset_against_an_operation_past_its_fence(Arc::clone(&w)) {
            assert!(w.hal.missed() > 0, "the operation's accesses hit nothing");
            OVERLAPS.fetch_add(1, Ordering::Relaxed);
        }
    });
    let overlaps = OVERLAPS.load(Ordering::Relaxed);
    println!("  the reset ran inside the fenced operation in {overlaps} schedules");
    assert!(overlaps > 0, "the scenario reaches the overlap");
}
