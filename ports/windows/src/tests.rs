//! Shuttle tests: the threaded port under random and PCT schedules. `sync` is shuttle's
//! here, so every lock, condvar and thread of the port is under the scheduler's control.
//!
//! `WINDOWS_SHUTTLE_ITERS` sets the schedules per scenario (default 10000): half under the
//! random scheduler, half under PCT (depth 3).

use std::collections::VecDeque;

use pnp_lifecycle::{ClientHandle, ClientKind, Config, DeviceId, Event, ResetResult, StartResult};

use crate::oracle::{check, Observation};
use crate::sync::{lock, thread, wait, Arc, Condvar, Mutex};
use crate::{Driver, Hal, Irp, MlxInterface, NtStatus, PnpMinor};

const DEV: DeviceId = DeviceId(0);

fn iterations() -> usize {
    std::env::var("WINDOWS_SHUTTLE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

type Log = Arc<Mutex<Vec<Observation>>>;

fn record(log: &Log, obs: Observation) {
    lock(log).push(obs);
}

#[derive(Default)]
struct HwState {
    ops_in_progress: u32,
    released: bool,
    violations: Vec<String>,
}

struct TestHal {
    log: Log,
    hw: Mutex<HwState>,
}

impl Hal for TestHal {
    fn start(&self, _: DeviceId) -> StartResult {
        // A device added again after remove starts on fresh resources.
        lock(&self.hw).released = false;
        StartResult::Started
    }
    fn reset(&self, _: DeviceId) -> ResetResult {
        record(&self.log, Observation::HardwareReset);
        if lock(&self.hw).ops_in_progress > 0 {
            lock(&self.hw)
                .violations
                .push("hardware reset while a client hardware op ran".into());
        }
        thread::yield_now();
        ResetResult::Succeeded
    }
    fn shutdown(&self, _: DeviceId) {
        let mut hw = lock(&self.hw);
        if hw.ops_in_progress > 0 {
            hw.violations
                .push("hardware shut down (stop) while a client hardware op ran".into());
        }
    }
    fn release(&self, _: DeviceId) {
        let mut hw = lock(&self.hw);
        if hw.ops_in_progress > 0 {
            hw.violations
                .push("resources released while a client hardware op ran".into());
        }
        hw.released = true;
    }
    fn client_op(&self, _: DeviceId, _: ClientHandle) {
        {
            let mut hw = lock(&self.hw);
            if hw.released {
                hw.violations
                    .push("client hardware op after release".into());
            }
            hw.ops_in_progress += 1;
        }
        // A real operation takes a while: give the scheduler room to run others.
        for _ in 0..40 {
            thread::yield_now();
        }
        lock(&self.hw).ops_in_progress -= 1;
    }
}

/// What a test client's callback hands its thread (the WinOF pattern: queue, then act).
#[derive(Default)]
struct Inbox {
    events: VecDeque<Event>,
}

struct TestClient {
    id: usize,
    inbox: Arc<(Mutex<Inbox>, Condvar)>,
}

struct World {
    driver: Driver,
    log: Log,
    hal: Arc<TestHal>,
    irps: Mutex<Vec<Arc<Irp>>>,
    next_token: Mutex<u32>,
}

impl World {
    fn new(#[cfg(feature = "planted-fault")] fault: crate::Fault) -> Arc<World> {
        Self::build(
            None,
            #[cfg(feature = "planted-fault")]
            fault,
        )
    }

    /// A started world whose inputs carry `clock`'s time.
    fn with_clock(clock: std::sync::Arc<crate::ManualClock>) -> Arc<World> {
        Self::build(
            Some(clock),
            #[cfg(feature = "planted-fault")]
            crate::Fault::None,
        )
    }

    fn build(
        clock: Option<std::sync::Arc<crate::ManualClock>>,
        #[cfg(feature = "planted-fault")] fault: crate::Fault,
    ) -> Arc<World> {
        let log: Log = Arc::new(Mutex::new(Vec::new()));
        let hal = Arc::new(TestHal {
            log: log.clone(),
            hw: Mutex::new(HwState::default()),
        });
        let driver = match clock {
            Some(clock) => Driver::with_clock(Config::DEFAULT, hal.clone(), clock),
            #[cfg(feature = "planted-fault")]
            None => Driver::with_fault(Config::DEFAULT, hal.clone(), fault),
            #[cfg(not(feature = "planted-fault"))]
            None => Driver::new(Config::DEFAULT, hal.clone()),
        };
        let world = Arc::new(World {
            driver,
            log,
            hal,
            irps: Mutex::new(Vec::new()),
            next_token: Mutex::new(1),
        });
        world.driver.add_device(DEV).expect("add device");
        assert_eq!(world.pnp(PnpMinor::StartDevice), NtStatus::SUCCESS);
        world
    }

    /// The PnP manager sends one IRP and waits for its completion.
    fn pnp(&self, minor: PnpMinor) -> NtStatus {
        self.pnp_named(minor, None)
    }

    /// Like [`Self::pnp`], with the IRP's own token set to `name` (the oracle still logs a
    /// unique number per IRP).
    fn pnp_named(&self, minor: PnpMinor, name: Option<u32>) -> NtStatus {
        let token = {
            let mut t = lock(&self.next_token);
            *t += 1;
            *t
        };
        let irp = Irp::new(DEV, minor, name.unwrap_or(token));
        lock(&self.irps).push(irp.clone());
        record(&self.log, Observation::IrpDispatched { token });
        self.driver.dispatch_pnp(&irp);
        let status = irp.wait();
        record(&self.log, Observation::IrpCompleted { token, status });
        status
    }

    fn register(&self, id: usize) -> Option<(TestClient, MlxInterface)> {
        self.register_with(id, Arc::new(|_| {}))
    }

    /// Register client `id`; its callback records and queues the event, then runs `hook`.
    fn register_with(
        &self,
        id: usize,
        hook: Arc<dyn Fn(Event) + Send + Sync>,
    ) -> Option<(TestClient, MlxInterface)> {
        let inbox: Arc<(Mutex<Inbox>, Condvar)> = Arc::default();
        let (cb_inbox, log) = (inbox.clone(), self.log.clone());
        let iface = self
            .driver
            .register_client(
                DEV,
                ClientKind::Trusted,
                Arc::new(move |event| {
                    let mut b = lock(&cb_inbox.0);
                    record(&log, Observation::Event { client: id, event });
                    b.events.push_back(event);
                    cb_inbox.1.notify_all();
                    drop(b);
                    hook(event);
                }),
            )
            .ok()?;
        Some((TestClient { id, inbox }, iface))
    }

    fn unregister(&self, id: usize, iface: &MlxInterface) {
        record(&self.log, Observation::UnregisterCalled { client: id });
        iface
            .unregister()
            .expect("unregister never fails for a known handle");
        record(&self.log, Observation::UnregisterReturned { client: id });
    }

    /// A client thread: quiesce and `reset_execute` on RESET (holding its own lock while it
    /// calls the port, as drivers do), re-acquire on RESET_END, detach on Removed/Revoked.
    fn run_client(self: &Arc<Self>, client: TestClient, mut iface: MlxInterface, request: bool) {
        if request {
            let _ = iface.reset_request();
        }
        let (m, cv) = &*client.inbox;
        let mut b = lock(m);
        loop {
            let Some(event) = b.events.pop_front() else {
                b = wait(cv, b);
                continue;
            };
            match event {
                Event::Reset => {
                    record(&self.log, Observation::ExecuteCalled { client: client.id });
                    let _ = iface.reset_execute();
                }
                Event::ResetEnd { .. } => {
                    if let Ok(fresh) = iface.acquire() {
                        assert!(
                            fresh.epoch() > iface.epoch(),
                            "RESET_END gives a newer epoch"
                        );
                        iface = fresh;
                    }
                }
                Event::Removed { .. } | Event::Revoked => {
                    drop(b);
                    self.unregister(client.id, &iface);
                    return;
                }
                _ => {}
            }
        }
    }

    fn unload(&self) {
        self.driver.unload().expect("unload is accepted once");
        record(&self.log, Observation::UnloadFinished);
    }

    fn verdict(&self) -> Result<(), String> {
        let log = lock(&self.log).clone();
        check(&log, true).map_err(|e| format!("invariant violated: {e}\n{log:#?}"))?;
        for irp in lock(&self.irps).iter() {
            if irp.completions() != 1 {
                return Err(format!("I5: {irp:?} completed {} times", irp.completions()));
            }
        }
        if self.driver.anomalies() != 0 {
            return Err(format!("{} port anomalies", self.driver.anomalies()));
        }
        let hw = lock(&self.hal.hw);
        if !hw.violations.is_empty() {
            return Err(format!("hardware: {:?}", hw.violations));
        }
        Ok(())
    }

    fn finish(&self) {
        if let Err(e) = self.verdict() {
            panic!("{e}");
        }
    }
}

fn spawn_client(w: &Arc<World>, id: usize, request: bool) -> Option<thread::JoinHandle<()>> {
    let (c, iface) = w.register(id)?;
    let w = w.clone();
    Some(thread::spawn(move || w.run_client(c, iface, request)))
}

fn join_all(handles: Vec<thread::JoinHandle<()>>) {
    for h in handles {
        h.join().expect("thread finished without panicking");
    }
}

fn world() -> Arc<World> {
    World::new(
        #[cfg(feature = "planted-fault")]
        crate::Fault::None,
    )
}

/// Unload racing a reset cycle: a client asks for a reset while the driver unloads.
fn unload_racing_reset(w: Arc<World>) {
    let mut hs: Vec<_> = (0..2).filter_map(|i| spawn_client(&w, i, i == 0)).collect();
    let u = w.clone();
    hs.push(thread::spawn(move || u.unload()));
    join_all(hs);
    w.finish();
}

/// Remove racing a client's `reset_execute`.
fn remove_racing_execute(w: Arc<World>) {
    let mut hs: Vec<_> = (0..2).filter_map(|i| spawn_client(&w, i, i == 1)).collect();
    let p = w.clone();
    hs.push(thread::spawn(move || {
        assert_eq!(p.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
        p.unload();
    }));
    join_all(hs);
    w.finish();
}

/// Unregister racing a notification in flight: client 1 leaves while client 0's reset
/// request notifies it.
fn unregister_racing_notification(w: Arc<World>) {
    let client0 = spawn_client(&w, 0, true);
    let (_c1, iface1) = w.register(1).expect("register");
    let w1 = w.clone();
    let leaver = thread::spawn(move || w1.unregister(1, &iface1));
    join_all(vec![leaver]);
    w.unload();
    join_all(client0.into_iter().collect());
    w.finish();
}

/// Surprise removal during the hardware reset, then remove, then unload.
fn surprise_during_execute(w: Arc<World>) {
    let mut hs: Vec<_> = (0..2).filter_map(|i| spawn_client(&w, i, i == 0)).collect();
    let p = w.clone();
    hs.push(thread::spawn(move || {
        assert_eq!(p.pnp(PnpMinor::SurpriseRemoval), NtStatus::SUCCESS);
        assert_eq!(p.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
        p.unload();
    }));
    join_all(hs);
    w.finish();
}

fn both_schedulers(f: fn(Arc<World>)) {
    let n = iterations().div_ceil(2).max(1);
    shuttle::check_random(move || f(world()), n);
    shuttle::check_pct(move || f(world()), n, 3);
}

#[test]
fn shuttle_unload_racing_reset_cycle() {
    both_schedulers(unload_racing_reset);
}

#[test]
fn shuttle_remove_racing_reset_execute() {
    both_schedulers(remove_racing_execute);
}

#[test]
fn shuttle_unregister_racing_notification() {
    both_schedulers(unregister_racing_notification);
}

#[test]
fn shuttle_surprise_removal_during_execution() {
    both_schedulers(surprise_during_execute);
}

/// Run `f` under the random scheduler with `fault` planted; the failure message if shuttle
/// found a failing schedule.
#[cfg(feature = "planted-fault")]
fn find_failure(fault: crate::Fault, f: fn(Arc<World>)) -> Option<String> {
    let n = iterations();
    let result = std::panic::catch_unwind(move || {
        shuttle::check_random(move || f(World::new(fault)), n);
    });
    result.err().map(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

/// The planted callback-under-lock fault: the notification thread holds the port lock
/// while a client callback takes the client's lock, and the client thread holds its lock
/// while calling `reset_execute`: an ABBA deadlock that only some schedules reach.
#[cfg(feature = "planted-fault")]
#[test]
fn planted_callback_under_lock_is_caught() {
    let failure = find_failure(crate::Fault::CallbackUnderLock, unload_racing_reset)
        .expect("shuttle must find a failing schedule with callbacks under the port lock");
    assert!(
        failure.contains("deadlock"),
        "expected a deadlock, got: {failure}"
    );
}

/// A client with an I/O thread doing hardware ops; remove must wait for the op in flight
/// before the core tears the hardware down.
fn remove_racing_hardware_op(w: Arc<World>) {
    if let Err(e) = remove_racing_hardware_op_verdict(&w) {
        panic!("{e}");
    }
}

fn remove_racing_hardware_op_verdict(w: &Arc<World>) -> Result<(), String> {
    let (c, iface) = w.register(0).expect("register");
    let io = iface.clone();
    let io_thread = thread::spawn(move || {
        let mut r = io.hardware_op();
        while r.is_ok() {
            r = io.hardware_op();
        }
        assert_eq!(
            r,
            Err(NtStatus::DELETE_PENDING),
            "ops end when remove begins"
        );
    });
    let wc = w.clone();
    let events = thread::spawn(move || wc.run_client(c, iface, false));
    let p = w.clone();
    let pnp = thread::spawn(move || {
        assert_eq!(p.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    });
    join_all(vec![io_thread, events, pnp]);
    w.unload();
    w.verdict()
}

#[test]
fn shuttle_remove_waits_for_remove_lock_holders() {
    both_schedulers(remove_racing_hardware_op);
}

/// The planted remove-does-not-wait fault: `IRP_MN_REMOVE_DEVICE` skips the
/// `IoReleaseRemoveLockAndWait` wait, so the hardware is released under a running op.
#[cfg(feature = "planted-fault")]
#[test]
fn planted_remove_without_wait_is_caught() {
    // Record the first violation instead of panicking inside the scheduler.
    static FOUND: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    // Batches of 200 schedules, up to the scenario budget, stopping at the first find.
    let mut budget = iterations();
    while budget > 0 && FOUND.lock().unwrap().is_none() {
        let batch = budget.min(200);
        budget -= batch;
        shuttle::check_random(
            || {
                let w = World::new(crate::Fault::RemoveDoesNotWait);
                if let Err(e) = remove_racing_hardware_op_verdict(&w) {
                    FOUND.lock().unwrap().get_or_insert(e);
                }
            },
            batch,
        );
    }
    let found = FOUND.lock().unwrap().clone();
    let failure = found.expect("shuttle must find a failing schedule when remove does not wait");
    assert!(
        failure.contains("hardware"),
        "expected a hardware violation, got: {failure}"
    );
}

/// Re-add after remove (issue 11): a device removed while a client's I/O thread runs, then
/// added again in the same slot, must start and take a new client (`IoInitializeRemoveLock`
/// on the new `AddDevice`): neither `START` nor registration may fail with
/// `STATUS_DELETE_PENDING`.
fn readd_after_remove(w: Arc<World>) {
    let (c, iface) = w.register(0).expect("register");
    let io = iface.clone();
    let io_thread = thread::spawn(move || while io.hardware_op().is_ok() {});
    let wc = w.clone();
    let events = thread::spawn(move || wc.run_client(c, iface, false));
    let p = w.clone();
    let pnp = thread::spawn(move || {
        assert_eq!(p.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
        p.driver.add_device(DEV).expect("the slot is free again");
        assert_eq!(p.pnp(PnpMinor::StartDevice), NtStatus::SUCCESS);
        let (c1, iface1) = p
            .register(1)
            .expect("a client registers on the re-added device");
        assert_eq!(iface1.hardware_op(), Ok(()));
        let pc = p.clone();
        let events1 = thread::spawn(move || pc.run_client(c1, iface1, false));
        assert_eq!(p.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
        events1.join().expect("client 1 finished");
    });
    join_all(vec![io_thread, events, pnp]);
    w.unload();
    w.finish();
}

#[test]
fn shuttle_readd_after_remove() {
    both_schedulers(readd_after_remove);
}

/// Unregister from inside a callback (issue 11): client 0's RESET callback calls client
/// 1's *blocking* unregister. The notification thread would wait for itself (client 1's
/// RESET is queued behind); the port refuses with `STATUS_POSSIBLE_DEADLOCK` and changes
/// nothing, and the callback then leaves with `unregister_nowait`, while client 1's own
/// thread races a blocking unregister of the same handle.
fn unregister_inside_callback(w: Arc<World>) {
    let other: Arc<Mutex<Option<MlxInterface>>> = Arc::default();
    let (hook_other, log) = (other.clone(), w.log.clone());
    let hook: Arc<dyn Fn(Event) + Send + Sync> = Arc::new(move |event| {
        if event != Event::Reset {
            return;
        }
        let Some(iface1) = lock(&hook_other).clone() else {
            return;
        };
        assert_eq!(
            iface1.unregister(),
            Err(NtStatus::POSSIBLE_DEADLOCK),
            "a blocking unregister inside a callback is refused"
        );
        record(&log, Observation::UnregisterCalled { client: 1 });
        let _ = iface1.unregister_nowait();
    });
    let (c0, iface0) = w.register_with(0, hook).expect("register 0");
    let (_c1, iface1) = w.register(1).expect("register 1");
    *lock(&other) = Some(iface1.clone());
    let w0 = w.clone();
    let client0 = thread::spawn(move || w0.run_client(c0, iface0, true));
    let w1 = w.clone();
    let leaver = thread::spawn(move || w1.unregister(1, &iface1));
    join_all(vec![leaver]);
    w.unload();
    join_all(vec![client0]);
    w.finish();
}

#[test]
fn shuttle_unregister_inside_callback() {
    both_schedulers(unregister_inside_callback);
}

/// Token collision against a pending IRP (issue 11): a stop waits for a client's hardware
/// operation in flight while an `IRP_MN_SURPRISE_REMOVAL` carrying the same token arrives.
/// Surprise removal cannot be vetoed: it completes with `STATUS_SUCCESS` once the core took
/// it, and the pending stop still completes exactly once.
fn surprise_with_colliding_token(w: Arc<World>) {
    const SAME: u32 = 1000;
    let (c, iface) = w.register(0).expect("register");
    let io = iface.clone();
    let io_thread = thread::spawn(move || while io.hardware_op().is_ok() {});
    let wc = w.clone();
    let events = thread::spawn(move || wc.run_client(c, iface, false));
    let s = w.clone();
    let stopper = thread::spawn(move || {
        if s.pnp(PnpMinor::QueryStopDevice) == NtStatus::SUCCESS {
            s.pnp_named(PnpMinor::StopDevice, Some(SAME));
        }
    });
    let p = w.clone();
    let surpriser = thread::spawn(move || {
        assert_eq!(
            p.pnp_named(PnpMinor::SurpriseRemoval, Some(SAME)),
            NtStatus::SUCCESS,
            "surprise removal is never refused over a token"
        );
    });
    join_all(vec![stopper, surpriser]);
    assert_eq!(w.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    join_all(vec![io_thread, events]);
    w.unload();
    w.finish();
}

#[test]
fn shuttle_surprise_removal_with_colliding_token() {
    both_schedulers(surprise_with_colliding_token);
}

/// Open handles (issue 11): `IRP_MJ_CREATE` / `IRP_MJ_CLOSE` are the core's hold. Query
/// remove is vetoed while the handle is open, whatever the interleaving with a client
/// that opens and closes it; once it is closed, query remove succeeds.
fn query_remove_against_open_handle(w: Arc<World>) {
    let (c, iface) = w.register(0).expect("register");
    let client = iface.handle();
    assert_eq!(w.driver.dispatch_create(client), Ok(()));
    assert_eq!(w.pnp(PnpMinor::QueryRemoveDevice), NtStatus::DEVICE_BUSY);
    assert_eq!(w.driver.dispatch_close(client), Ok(()));
    let open = Arc::new(Mutex::new(false));
    let (d, o) = (w.driver.clone(), open.clone());
    let opener = thread::spawn(move || {
        for _ in 0..2 {
            if d.dispatch_create(client).is_ok() {
                *lock(&o) = true;
                thread::yield_now();
                *lock(&o) = false;
                assert_eq!(d.dispatch_close(client), Ok(()));
            }
        }
    });
    let (p, o) = (w.clone(), open.clone());
    let querier = thread::spawn(move || {
        let status = p.pnp(PnpMinor::QueryRemoveDevice);
        if status == NtStatus::SUCCESS {
            assert!(!*lock(&o), "query remove succeeded while a handle was open");
            assert_eq!(p.pnp(PnpMinor::CancelRemoveDevice), NtStatus::SUCCESS);
        } else {
            assert_eq!(status, NtStatus::DEVICE_BUSY);
        }
    });
    join_all(vec![opener, querier]);
    assert_eq!(w.pnp(PnpMinor::QueryRemoveDevice), NtStatus::SUCCESS);
    let wc = w.clone();
    let events = thread::spawn(move || wc.run_client(c, iface, false));
    assert_eq!(w.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    join_all(vec![events]);
    w.unload();
    w.finish();
}

#[test]
fn shuttle_query_remove_vetoed_while_a_handle_is_open() {
    both_schedulers(query_remove_against_open_handle);
}

/// Stop against an operation in flight (issue 11): a client's I/O thread runs hardware
/// operations while the PnP manager stops the device (query stop, stop) and restarts it.
/// The stop's shutdown waits for the operation in flight (the core's Stopping state); the
/// test HAL records a shutdown under a running operation as a violation.
fn stop_against_operation(w: Arc<World>) {
    let (c, iface) = w.register(0).expect("register");
    let io = iface.clone();
    let io_thread = thread::spawn(move || while io.hardware_op().is_ok() {});
    let wc = w.clone();
    let events = thread::spawn(move || wc.run_client(c, iface, false));
    assert_eq!(w.pnp(PnpMinor::QueryStopDevice), NtStatus::SUCCESS);
    assert_eq!(w.pnp(PnpMinor::StopDevice), NtStatus::SUCCESS);
    assert_eq!(w.pnp(PnpMinor::StartDevice), NtStatus::SUCCESS);
    assert_eq!(w.pnp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    join_all(vec![io_thread, events]);
    w.unload();
    w.finish();
}

#[test]
fn shuttle_stop_against_operation_in_flight() {
    both_schedulers(stop_against_operation);
}

/// Revocation against an operation in flight (issue 11): an untrusted client runs a
/// hardware operation and never answers RESET; the timer passes its answer deadline (but
/// not the operation's), the core revokes it and asks the port to fence it. The fence waits
/// out the running operation, so the hardware reset never runs under it (the test HAL
/// records a reset under a running operation as a violation).
fn revocation_against_operation(w: Arc<World>, clock: std::sync::Arc<crate::ManualClock>) {
    // (told RESET, revoked, its I/O thread left)
    type Seen = Arc<(Mutex<(bool, bool, bool)>, Condvar)>;
    let seen: Seen = Arc::default();
    let (hook_seen, log) = (seen.clone(), w.log.clone());
    let iface0 = w
        .driver
        .register_client(
            DEV,
            ClientKind::Untrusted,
            Arc::new(move |event| {
                record(&log, Observation::Event { client: 0, event });
                let mut s = lock(&hook_seen.0);
                match event {
                    Event::Reset => s.0 = true,
                    Event::Revoked => s.1 = true,
                    _ => {}
                }
                hook_seen.1.notify_all();
            }),
        )
        .expect("register untrusted");
    let (io, io_seen, io_log) = (iface0.clone(), seen.clone(), w.log.clone());
    let io_thread = thread::spawn(move || {
        while io.hardware_op().is_ok() {}
        record(&io_log, Observation::UnregisterCalled { client: 0 });
        let _ = io.unregister_nowait();
        lock(&io_seen.0).2 = true;
        io_seen.1.notify_all();
    });
    let requester = spawn_client(&w, 1, true).expect("register trusted");
    let (d, timer_seen, timer_log) = (w.driver.clone(), seen.clone(), w.log.clone());
    let timer = thread::spawn(move || {
        // The answer deadline counts from the RESET: pass it once client 0 was told.
        let mut s = lock(&timer_seen.0);
        while !s.0 && !s.2 {
            s = wait(&timer_seen.1, s);
        }
        drop(s);
        // Client 0 is being revoked: the oracle no longer counts it as a voter (the fence
        // may cancel its queued Revoked callback, so it may never see one).
        record(&timer_log, Observation::UnregisterCalled { client: 0 });
        clock.advance(Config::DEFAULT.untrusted_ack_timeout + 1);
        let _ = d.timeout();
        let mut s = lock(&timer_seen.0);
        while !s.1 && !s.2 {
            s = wait(&timer_seen.1, s);
        }
    });
    join_all(vec![timer, io_thread]);
    w.unload();
    join_all(vec![requester]);
    w.finish();
}

#[test]
fn shuttle_revocation_against_operation_in_flight() {
    let n = iterations().div_ceil(2).max(1);
    let run = || {
        let clock = std::sync::Arc::new(crate::ManualClock::new(pnp_lifecycle::Tick(0)));
        revocation_against_operation(World::with_clock(clock.clone()), clock)
    };
    shuttle::check_random(run, n);
    shuttle::check_pct(run, n, 3);
}
