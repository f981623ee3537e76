//! The toy port the runtime's tests share: a log of what it saw, in order, and hardware
//! that can be slow (it yields to shuttle's scheduler inside each command).

#![allow(dead_code)] // each test binary uses a part

use std::sync::{Arc, Mutex};

use pnp_lifecycle::{
    queue_capacity, ClientHandle, ClientKind, Config, DeviceId, Event, HardwareCommand, Input,
    PhaseKind, ResetResult, StartResult, Tick,
};
use pnp_lifecycle_runtime::{
    Completion, Dispatch, ManualClock, News, Os, Owner, Runtime, ShuttleKernel,
};

pub const DEV: DeviceId = DeviceId(0);
pub type Cb = Arc<dyn Fn(ClientHandle, Event) -> Option<Input> + Send + Sync>;
pub type Rt = Runtime<Toy, ShuttleKernel, 1, 4, 1, { queue_capacity(1, 4) }>;
pub type Plain = Owner<Toy, 1, 4, 1, { queue_capacity(1, 4) }>;

/// What the toy port saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Enter(ClientHandle, Event),
    Exit(ClientHandle),
    Hardware(HardwareCommand),
    /// The hardware command returned.
    HardwareDone(HardwareCommand),
    Completed(u32, Completion),
    Fenced(ClientHandle, bool),
    /// A client's hardware operation was granted (logged after the grant).
    OpBegin(ClientHandle),
    /// It is about to end (logged before the end).
    OpEnd(ClientHandle),
    DeviceRemoved,
    UnloadMayFinish,
}

#[derive(Default)]
pub struct Toy {
    log: Mutex<Vec<Seen>>,
    /// Each hardware command yields this many times to shuttle's scheduler (0: none).
    slow: usize,
}

impl Toy {
    /// Hardware whose every command takes `yields` turns of shuttle's scheduler.
    pub fn slow(yields: usize) -> Self {
        Toy {
            slow: yields,
            ..Toy::default()
        }
    }
    pub fn push(&self, s: Seen) {
        self.log.lock().unwrap().push(s);
    }
    pub fn log(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }
}

impl Os for Toy {
    type Callback = Cb;
    type Request = u32;
    type Job = ();

    fn call(&self, cb: &Cb, client: ClientHandle, event: Event) -> Option<Input> {
        self.push(Seen::Enter(client, event));
        let answer = cb(client, event);
        self.push(Seen::Exit(client));
        answer
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        self.push(Seen::Hardware(command));
        for _ in 0..self.slow {
            shuttle::thread::yield_now();
        }
        self.push(Seen::HardwareDone(command));
        match command {
            HardwareCommand::Start => Some(Input::StartDone {
                device,
                result: StartResult::Started,
            }),
            HardwareCommand::Reset => Some(Input::ResetDone {
                device,
                result: ResetResult::Succeeded,
            }),
            HardwareCommand::PowerDown => Some(Input::PowerDownDone { device }),
            HardwareCommand::PowerUp => Some(Input::PowerUpDone {
                device,
                result: pnp_lifecycle::PowerUpResult::Powered,
            }),
            _ => None,
        }
    }

    fn complete(&self, request: u32, completion: Completion) {
        self.push(Seen::Completed(request, completion));
    }

    fn news(&self, news: News) {
        match news {
            News::Fenced { client, overran } => self.push(Seen::Fenced(client, overran)),
            News::DeviceRemoved { .. } => self.push(Seen::DeviceRemoved),
            News::UnloadMayFinish => self.push(Seen::UnloadMayFinish),
            _ => {}
        }
    }
}

pub fn quiet() -> Cb {
    Arc::new(|_, _| None)
}

/// A started device, fed through the runtime.
pub fn started(rt: &Arc<Rt>) {
    rt.feed(Input::AddDevice { device: DEV }).unwrap();
    rt.with(|o, now| o.submit(now, 1, |token| Input::Start { device: DEV, token }))
        .unwrap();
    rt.wait_until(|o, _| (o.machine().phase(DEV) == Some(PhaseKind::Running)).then_some(()))
        .unwrap();
}

fn completed(log: &[Seen], request: u32) -> Option<usize> {
    log.iter()
        .position(|s| matches!(s, Seen::Completed(r, _) if *r == request))
}

/// The OS's "the driver is done" — a request's completion, `DeviceRemoved`,
/// `UnloadMayFinish` — comes after every hardware command ordered before it returned.
/// Panics with the log if not.
pub fn done_after_teardown(log: &[Seen], remove: u32) {
    let returned = |c: HardwareCommand| {
        log.iter()
            .position(|s| *s == Seen::HardwareDone(c))
            .unwrap_or_else(|| panic!("{c:?} never returned: {log:?}"))
    };
    let teardown =
        returned(HardwareCommand::Shutdown).max(returned(HardwareCommand::ReleaseResources));
    let at = |what: &str, i: Option<usize>| {
        let i = i.unwrap_or_else(|| panic!("no {what}: {log:?}"));
        assert!(
            i > teardown,
            "{what} before the teardown returned (driver code still ran): {log:?}"
        );
    };
    at("remove completion", completed(log, remove));
    at(
        "DeviceRemoved",
        log.iter().position(|s| *s == Seen::DeviceRemoved),
    );
    at(
        "UnloadMayFinish",
        log.iter().position(|s| *s == Seen::UnloadMayFinish),
    );
}

/// A started device with one client (it leaves when told `Removed`) on hardware whose
/// commands are slow; the OS queries, then removes it while other threads carry work out
/// (with [`Dispatch::Inline`] a second thread pumps, as verbs threads do on Linux), then
/// unloads. `setup` runs on the fresh runtime (a planted fault). Checks
/// [`done_after_teardown`].
pub fn remove_behind_a_slow_teardown(dispatch: Dispatch, setup: fn(&Arc<Rt>)) {
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let rt: Arc<Rt> = Runtime::new(Config::DEFAULT, Toy::slow(3), clock, dispatch);
    setup(&rt);
    started(&rt);
    let leaves: Cb = Arc::new(|client, event| {
        matches!(event, Event::Removed { .. }).then_some(Input::Unregister { client })
    });
    rt.with(|o, now| o.register(now, DEV, ClientKind::Trusted, leaves))
        .unwrap();
    rt.with(|o, now| o.submit(now, 2, |token| Input::QueryRemove { device: DEV, token }))
        .unwrap();
    rt.wait_until(|_, _| completed(&rt.os().log(), 2).map(drop))
        .unwrap();
    let helper = (dispatch == Dispatch::Inline).then(|| {
        let rt = Arc::clone(&rt);
        shuttle::thread::spawn(move || {
            for _ in 0..6 {
                rt.pump();
                shuttle::thread::yield_now();
            }
        })
    });
    rt.with(|o, now| o.submit(now, 3, |token| Input::Remove { device: DEV, token }))
        .unwrap();
    // The PnP manager / PCI core sees the remove end here.
    rt.wait_until(|_, _| completed(&rt.os().log(), 3).map(drop))
        .unwrap();
    let seen_at_completion = rt.os().log();
    assert!(
        seen_at_completion.contains(&Seen::HardwareDone(HardwareCommand::ReleaseResources)),
        "remove completed while ReleaseResources still ran: {seen_at_completion:?}"
    );
    if let Some(h) = helper {
        h.join().unwrap();
    }
    rt.unload().unwrap();
    done_after_teardown(&rt.os().log(), 3);
}

// ---- the fast path's races (issue 21) -----------------------------------------------

/// A client that does what it is told: acks `RESET`, re-acquires after `RESET_END` and a
/// lost-state power-up, leaves when removed.
pub fn cooperative() -> Cb {
    Arc::new(|client, event| match event {
        Event::Reset => Some(Input::ResetExecute { client }),
        Event::ResetEnd { .. }
        | Event::Resumed {
            state_lost: true, ..
        } => Some(Input::AcquireInterface { client }),
        Event::Removed { .. } => Some(Input::Unregister { client }),
        _ => None,
    })
}

/// A user-space context that never answers `RESET` (it is revoked at its deadline).
pub fn unresponsive() -> Cb {
    Arc::new(|client, event| match event {
        Event::Removed { .. } => Some(Input::Unregister { client }),
        _ => None,
    })
}

/// Operations granted on the fast path and carried by a close while they ran (a landmark:
/// the races reach it).
pub static CARRIED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// `n` hardware operations of `client` through its own gate at `epoch`, as a port's hot
/// path does them: each granted one is logged ([`Seen::OpBegin`] after the grant,
/// [`Seen::OpEnd`] before the end), with a turn of the scheduler inside. Refusals are
/// what the races are about: nothing to do.
pub fn operations(rt: &Arc<Rt>, client: ClientHandle, epoch: pnp_lifecycle::Epoch, n: usize) {
    let Some(gate) = rt.client_gate(client) else {
        panic!("no gate for {client:?}")
    };
    for _ in 0..n {
        if let Ok(pnp_lifecycle_runtime::Begin::Granted(op)) = rt.operation_begin_on(&gate, epoch) {
            let fast = op.on_fast_path();
            rt.os().push(Seen::OpBegin(client));
            shuttle::thread::yield_now();
            shuttle::thread::yield_now();
            rt.os().push(Seen::OpEnd(client));
            // `operation_end_on`, in its two halves, to see which ended how.
            if !rt.operation_end_fast_on(&gate, op) {
                if fast {
                    CARRIED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                let _ = rt.with(|o, now| o.operation_done(now, client));
            }
        }
        shuttle::thread::yield_now();
    }
}

/// I12/I14 on the fast path: no hardware command that needs the operations drained
/// (reset, shutdown, release, power-down) while an operation is in flight that the machine
/// did not count (one of a client whose fence overran its grace is let go, by design); no
/// operation begun after its client was fenced. Panics with the log if not.
pub fn no_hardware_under_an_operation(log: &[Seen]) {
    use HardwareCommand::*;
    let mut in_flight: Vec<(ClientHandle, i32)> = Vec::new();
    let mut overran: Vec<ClientHandle> = Vec::new();
    let mut fenced: Vec<ClientHandle> = Vec::new();
    for (i, seen) in log.iter().enumerate() {
        match seen {
            Seen::OpBegin(c) => {
                assert!(
                    !fenced.contains(c),
                    "an operation of fenced client {c:?} begun at #{i}: {log:?}"
                );
                match in_flight.iter_mut().find(|(k, _)| k == c) {
                    Some((_, n)) => *n += 1,
                    None => in_flight.push((*c, 1)),
                }
            }
            Seen::OpEnd(c) => {
                if let Some((_, n)) = in_flight.iter_mut().find(|(k, _)| k == c) {
                    *n -= 1;
                }
            }
            // Only a fence that waited for the operations is sure to come after every
            // earlier grant's log line (it waits for their ends).
            Seen::Fenced(c, over) => {
                if *over {
                    overran.push(*c);
                } else {
                    fenced.push(*c);
                }
            }
            Seen::Hardware(command @ (Reset | Shutdown | ReleaseResources | PowerDown)) => {
                for (c, n) in &in_flight {
                    assert!(
                        *n == 0 || overran.contains(c),
                        "hardware {command:?} at #{i} while {n} operation(s) of {c:?} were in flight uncounted: {log:?}"
                    );
                }
            }
            _ => {}
        }
    }
}

/// What races the fast path's operations in [`fast_race`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Against {
    /// A reset cycle: the machine closes every gate before the reset, reopens after.
    ResetCycle,
    /// An unresponsive context revoked at its deadline (fenced) in a reset cycle.
    Revocation,
    /// Surprise removal.
    SurpriseRemoval,
    /// A system-sleep power-down.
    PowerDown,
    /// Driver unload.
    Unload,
}

/// A started device with three clients: 0 and 1 run fast-path operations on threads of
/// their own while the main thread drives `against`; client 2 is the reset's requester
/// (for [`Against::Revocation`], client 1 is an unresponsive context). `setup` runs on the
/// fresh runtime (a planted fault). Checks [`no_hardware_under_an_operation`], that every
/// operation ended (the machine counts none at the end) and no anomaly.
pub fn fast_race(dispatch: Dispatch, against: Against, setup: fn(&Arc<Rt>)) {
    let config = Config {
        untrusted_ack_timeout: 10,
        ..Config::DEFAULT
    };
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let rt: Arc<Rt> = Runtime::new(config, Toy::slow(1), clock.clone(), dispatch);
    setup(&rt);
    started(&rt);
    let register = |kind, cb| rt.with(|o, now| o.register(now, DEV, kind, cb)).unwrap();
    let (c0, e0) = register(ClientKind::Trusted, cooperative());
    let (c1, e1) = match against {
        Against::Revocation => register(ClientKind::Untrusted, unresponsive()),
        _ => register(ClientKind::Trusted, cooperative()),
    };
    let (c2, _) = register(ClientKind::Trusted, cooperative());
    let workers: Vec<_> = [(c0, e0), (c1, e1)]
        .into_iter()
        .map(|(client, epoch)| {
            let rt = Arc::clone(&rt);
            shuttle::thread::spawn(move || operations(&rt, client, epoch, 3))
        })
        .collect();
    match against {
        Against::ResetCycle | Against::Revocation => {
            let _ = rt.feed(Input::ResetRequest { client: c2 });
            if against == Against::Revocation {
                // The context's deadline passes (once: no fence outruns its grace).
                clock.set(Tick(10));
                let _ = rt.timeout();
            }
            rt.wait_until(|o, _| {
                let running = o.machine().phase(DEV) == Some(PhaseKind::Running);
                (running && o.machine().epoch(DEV) != Some(e0)).then_some(())
            })
            .unwrap();
        }
        Against::SurpriseRemoval => {
            let _ = rt.feed(Input::SurpriseRemoval { device: DEV });
        }
        Against::PowerDown => {
            let kind = pnp_lifecycle::PowerDownKind::SystemSleep;
            let _ = rt.with(|o, now| {
                o.submit(now, 7, |token| Input::PowerDown {
                    device: DEV,
                    kind,
                    token,
                })
            });
        }
        // Unload removes the device under the operations (a second unload below succeeds).
        Against::Unload => rt.unload().unwrap(),
    }
    for w in workers {
        w.join().unwrap();
    }
    let log = rt.os().log();
    let counted: u32 = rt.inspect(|o| [c0, c1].iter().map(|c| o.operations_in_flight(*c)).sum());
    assert_eq!(counted, 0, "every operation ended: {log:?}");
    assert_eq!(rt.inspect(|o| o.anomalies()), 0, "anomalies: {log:?}");
    rt.unload().unwrap();
    let log = rt.os().log();
    no_hardware_under_an_operation(&log);
    assert_eq!(rt.inspect(|o| o.anomalies()), 0, "anomalies: {log:?}");
}
