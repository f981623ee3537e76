//! `bracket IMPL ROUNDS [THREADS]`: the cost of one client hardware-operation bracket
//! (begin + end), the driver's hot path (DESIGN r3, "Operations: the fast path").
//!
//! IMPL is what a driver writer would pick, or what this project offers:
//! * `atomic`: one `AtomicUsize` increment + decrement, what `IoAcquireRemoveLock` /
//!   `IoReleaseRemoveLock` cost;
//! * `mutex`: a `std::sync::Mutex` locked and unlocked twice (begin, end);
//! * `core`: the sans-IO machine alone: `access` + `access_done`, outputs drained;
//! * `runtime`: the shared owner runtime as the ports call it today:
//!   `with(operation_begin)` + `with(operation_done)` under the owner lock, `StdKernel`,
//!   `MonotonicClock`, `Dispatch::Inline`, a port that does nothing;
//! * `fast`: the runtime's fast path as the ports take it (the Windows `hardware_op`, the
//!   Linux verbs): `Runtime::operation_begin_on` + `Runtime::operation_end_on` through the
//!   client's own `ClientGate` (kept by the port since registration) while the machine
//!   keeps the gate open (started, D0, its epoch, nothing to drain);
//! * `lookup`: the same by client handle, `Runtime::operation_begin` +
//!   `Runtime::operation_end` (the gate looked up in the runtime's table every time);
//! * `gate`: the fast path's mechanism alone, `Gate::begin` + `Gate::end`.
//!
//! THREADS (default 1) threads each run ROUNDS brackets, thread `i` as client `i` (the
//! `core` workload is single-threaded by construction: the machine is one `&mut`). Prints
//! `ns_per_bracket`, the wall time of one bracket on one thread (all threads' brackets
//! overlap, so it is the per-thread figure). For callgrind:
//! (Ir(ROUNDS = 100,001) − Ir(ROUNDS = 1)) / 100,000 is the instructions of one bracket.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use pnp_lifecycle::{
    queue_capacity, ClientHandle, ClientKind, Config, DeviceId, Epoch, Event, HardwareCommand,
    Input, Lifecycle, PhaseKind, RequestToken, StartResult, Tick,
};
use pnp_lifecycle_runtime::{
    Begin, Completion, Dispatch, End, Gate, MonotonicClock, Os, Runtime, StdKernel,
};

const DEV: DeviceId = DeviceId(0);
const CLIENTS: usize = 16;
type Machine = Lifecycle<1, CLIENTS, 1, { queue_capacity(1, CLIENTS) }>;

/// A port that does nothing but complete a start.
struct Idle;

impl Os for Idle {
    type Callback = ();
    type Request = ();
    type Job = ();

    fn call(&self, _: &(), _: ClientHandle, _: Event) -> Option<Input> {
        None
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        (command == HardwareCommand::Start).then_some(Input::StartDone {
            device,
            result: StartResult::Started,
        })
    }

    fn complete(&self, _: (), _: Completion) {}
}

type Rt = Runtime<Idle, StdKernel, 1, CLIENTS, 1, { queue_capacity(1, CLIENTS) }>;

fn fail(what: &str, e: impl std::fmt::Debug) -> ! {
    eprintln!("bracket: {what}: {e:?}");
    std::process::exit(1)
}

/// Run `body(thread)` on `threads` threads started together; the slowest thread's ns per
/// round.
fn timed(threads: usize, rounds: u64, body: impl Fn(usize) + Sync) -> f64 {
    let start = Barrier::new(threads);
    let worst = Mutex::new(0f64);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (start, worst, body) = (&start, &worst, &body);
            s.spawn(move || {
                start.wait();
                let t0 = Instant::now();
                body(t);
                let ns = t0.elapsed().as_nanos() as f64 / rounds.max(1) as f64;
                let mut w = worst.lock().unwrap_or_else(|p| p.into_inner());
                *w = w.max(ns);
            });
        }
    });
    let w = *worst.lock().unwrap_or_else(|p| p.into_inner());
    w
}

fn atomic(rounds: u64, threads: usize) -> f64 {
    let lock = AtomicUsize::new(0);
    timed(threads, rounds, |_| {
        for _ in 0..rounds {
            black_box(lock.fetch_add(1, Ordering::Acquire));
            black_box(lock.fetch_sub(1, Ordering::Release));
        }
    })
}

fn mutex(rounds: u64, threads: usize) -> f64 {
    let lock = Mutex::new(0u64);
    timed(threads, rounds, |_| {
        for _ in 0..rounds {
            *lock.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            *lock.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        }
    })
}

fn gate(rounds: u64, threads: usize) -> f64 {
    let gates: Vec<Gate> = (0..threads).map(|_| Gate::new()).collect();
    for (i, g) in gates.iter().enumerate() {
        let _ = g.open(i as u16, Epoch(0));
    }
    timed(threads, rounds, |t| {
        let Some(g) = gates.get(t) else { return };
        for _ in 0..rounds {
            let Some(ticket) = black_box(g).begin(t as u16, Epoch(0)) else {
                fail("gate", "shut")
            };
            if g.end(ticket) != End::Fast {
                fail("gate", "carried");
            }
        }
    })
}

fn core(rounds: u64) -> f64 {
    let mut m: Machine = Lifecycle::new(Config::DEFAULT);
    let now = Tick(0);
    let step = |m: &mut Machine, input: Input| {
        if let Err(e) = m.handle(now, input) {
            fail("input refused", e)
        }
        while let Some(out) = m.poll_output() {
            black_box(out);
        }
    };
    step(&mut m, Input::AddDevice { device: DEV });
    step(
        &mut m,
        Input::Start {
            device: DEV,
            token: RequestToken(1),
        },
    );
    step(
        &mut m,
        Input::StartDone {
            device: DEV,
            result: StartResult::Started,
        },
    );
    let (client, epoch) = m
        .register(now, DEV, ClientKind::Trusted)
        .unwrap_or_else(|e| fail("register", e));
    while let Some(out) = m.poll_output() {
        black_box(out);
    }
    let t0 = Instant::now();
    for _ in 0..rounds {
        let what = pnp_lifecycle::Access::HardwareOp;
        step(
            &mut m,
            Input::Access {
                client: black_box(client),
                epoch,
                what,
            },
        );
        step(&mut m, Input::AccessDone { client });
    }
    t0.elapsed().as_nanos() as f64 / rounds.max(1) as f64
}

/// A runtime with a started device and `threads` registered clients.
fn started_runtime(threads: usize) -> (Arc<Rt>, Vec<(ClientHandle, Epoch)>) {
    let rt = Rt::new(
        Config::DEFAULT,
        Idle,
        Arc::new(MonotonicClock::new()),
        Dispatch::Inline,
    );
    rt.feed(Input::AddDevice { device: DEV })
        .unwrap_or_else(|e| fail("add", e));
    rt.with(|o, now| o.submit(now, (), |token| Input::Start { device: DEV, token }))
        .unwrap_or_else(|e| fail("start", e));
    rt.wait_until(|o, _| (o.machine().phase(DEV) == Some(PhaseKind::Running)).then_some(()))
        .unwrap_or_else(|e| fail("started", e));
    let clients: Vec<(ClientHandle, Epoch)> = (0..threads)
        .map(|_| {
            rt.with(|o, now| o.register(now, DEV, ClientKind::Trusted, ()))
                .unwrap_or_else(|e| fail("register", e))
        })
        .collect();
    (rt, clients)
}

fn runtime(rounds: u64, threads: usize) -> f64 {
    let (rt, clients) = started_runtime(threads);
    timed(threads, rounds, |t| {
        let Some(&(client, epoch)) = clients.get(t) else {
            return;
        };
        for _ in 0..rounds {
            let answer = rt
                .with(|o, now| o.operation_begin(now, client, epoch))
                .unwrap_or_else(|e| fail("operation_begin", e));
            if answer != pnp_lifecycle::AccessAnswer::Granted {
                fail("operation_begin", answer);
            }
            rt.with(|o, now| o.operation_done(now, client))
                .unwrap_or_else(|e| fail("operation_done", e));
        }
    })
}

fn fast(rounds: u64, threads: usize) -> f64 {
    let (rt, clients) = started_runtime(threads);
    let gates: Vec<_> = clients
        .iter()
        .map(|&(client, _)| {
            rt.client_gate(client)
                .unwrap_or_else(|| fail("client_gate", client))
        })
        .collect();
    timed(threads, rounds, |t| {
        let (Some(&(_, epoch)), Some(gate)) = (clients.get(t), gates.get(t)) else {
            return;
        };
        for _ in 0..rounds {
            // The port's handle, read from memory at every bracket.
            let gate = black_box(gate);
            match rt.operation_begin_on(gate, epoch) {
                Ok(Begin::Granted(op)) => {
                    if !op.on_fast_path() {
                        fail("fast", "granted by the machine: the gate is shut");
                    }
                    if let Err(e) = rt.operation_end_on(gate, op) {
                        fail("operation_end_on", e);
                    }
                }
                Ok(Begin::WaitForPowerUp) => fail("operation_begin_on", "wait for power-up"),
                Err(e) => fail("operation_begin_on", e),
            }
        }
    })
}

fn lookup(rounds: u64, threads: usize) -> f64 {
    let (rt, clients) = started_runtime(threads);
    timed(threads, rounds, |t| {
        let Some(&(client, epoch)) = clients.get(t) else {
            return;
        };
        for _ in 0..rounds {
            match rt.operation_begin(black_box(client), epoch) {
                Ok(Begin::Granted(op)) => {
                    if !op.on_fast_path() {
                        fail("lookup", "granted by the machine: the gate is shut");
                    }
                    if let Err(e) = rt.operation_end(op) {
                        fail("operation_end", e);
                    }
                }
                other => fail("operation_begin", other),
            }
        }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: bracket (atomic|mutex|core|runtime|fast|lookup|gate) ROUNDS [THREADS]";
    let num = |i: usize, default: u64| -> u64 {
        args.get(i).map_or(default, |s| {
            s.parse()
                .unwrap_or_else(|_| fail(usage, format!("{s:?} is not a number")))
        })
    };
    let imp = args.get(1).map_or("", String::as_str);
    let (rounds, threads) = (num(2, 1_000_000), num(3, 1).max(1) as usize);
    if threads > CLIENTS {
        fail(usage, format!("at most {CLIENTS} threads"));
    }
    let ns = match imp {
        "atomic" => atomic(rounds, threads),
        "mutex" => mutex(rounds, threads),
        "core" if threads == 1 => core(rounds),
        "core" => fail(usage, "core is one &mut machine: one thread"),
        "runtime" => runtime(rounds, threads),
        "gate" => gate(rounds, threads),
        "fast" => fast(rounds, threads),
        "lookup" => lookup(rounds, threads),
        _ => fail(usage, format!("unknown IMPL {imp:?}")),
    };
    println!("impl={imp} rounds={rounds} threads={threads} ns_per_bracket={ns:.1}");
}
