//! Issue 22 item 9: can an interrupt storm starve thread mode's unload (or remove)?
//!
//! Unload needs the machine's whole output queue free (`DRIVER_INPUT_OUTPUTS` equals the
//! queue with one device; so does a device input's worst case). A storm of
//! catastrophic-error interrupts fires at the worst moment, every time: right after thread
//! mode leaves a critical section with the queue empty and nothing latched, i.e. between
//! `Firmware::input`'s pump reaching idle and its re-submit. Each fatal error, fed by
//! `on_fatal_interrupt` or replayed from `latch_fatal_interrupt`'s latch, finds the last
//! cycle over and starts a new one, whose `RESET` broadcast refills the queue. Before the
//! port held fatal errors in the latch while `input` makes room, the request waited out
//! the whole storm (500 of 500 fatal errors, 1 457 or 10 516 critical sections); now it
//! finishes within `BOUND` critical sections of thread mode whatever the storm's length,
//! and every fatal error is still answered by the core (I8). The shuttle tests race a storm
//! thread against the unload under random and PCT schedules (random found the starvation
//! before the fix).

use core::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use pnp_lifecycle::*;
use pnp_lifecycle_firmware::*;
use pnp_lifecycle_testkit::firmware_port::board::{CellLock, ScriptedReset, ShuttleLock};

const C: usize = 8;
const Q: usize = queue_capacity(1, C);
type State = Shared<1, C, 2, Q>;
const DEV: DeviceId = DeviceId(0);
/// Fatal errors the storm raises at most; long enough that a starved unload shows.
const STORM: u32 = 500;
/// Thread mode's critical sections from the request to its end: the cycle under way (two
/// clients) plus the teardown take 39; twice that, far below what the storm's cycles take
/// when it starves the request (over 500).
const BOUND: u32 = 80;

/// Which interrupt body the storm runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isr {
    /// `on_fatal_interrupt`: feeds inside the critical section, latches on a full queue.
    Feed,
    /// `latch_fatal_interrupt`: sets the flag, thread mode feeds it.
    Latch,
}

/// The target's critical section, plus an interrupt that fires as thread mode leaves it
/// whenever the queue is empty and nothing is latched (the moment a driver-level input
/// would find room), until it has raised `STORM` fatal errors.
struct StormLock {
    inner: CellLock<State>,
    isr: Cell<Option<Isr>>,
    fired: Cell<u32>,
    /// Thread mode's critical sections.
    sections: Cell<u32>,
    outcomes: RefCell<Vec<IsrOutcome>>,
}

impl StormLock {
    fn new() -> Self {
        StormLock {
            inner: CellLock(RefCell::new(Shared::new(Config::DEFAULT))),
            isr: Cell::new(None),
            fired: Cell::new(0),
            sections: Cell::new(0),
            outcomes: RefCell::new(Vec::new()),
        }
    }

    fn storm(&self) {
        let Some(isr) = self.isr.get() else { return };
        if self.fired.get() >= STORM {
            return;
        }
        let idle = self
            .inner
            .lock(|s| s.pending_len() == 0 && !s.is_latched(DEV))
            .unwrap();
        if !idle {
            return;
        }
        self.fired.set(self.fired.get() + 1);
        let outcome = match isr {
            Isr::Feed => on_fatal_interrupt(&self.inner, DEV, || Tick(0)),
            Isr::Latch => latch_fatal_interrupt(&self.inner, DEV),
        };
        self.outcomes.borrow_mut().push(outcome);
    }
}

impl Lock<State> for StormLock {
    fn lock<R>(&self, f: impl FnOnce(&mut State) -> R) -> Result<R, Busy> {
        let result = self.inner.lock(f)?;
        self.sections.set(self.sections.get() + 1);
        // Interrupts unmask: the storm's interrupt is taken here.
        self.storm();
        Ok(result)
    }
}

/// Clients that answer from inside their callbacks: `RESET` with `reset_execute`, `RESET_END`
/// by acquiring the new interface, `Removed` by detaching.
#[derive(Default)]
struct Clients {
    unloaded: bool,
    removed: bool,
    cycles: u32,
}

impl Board for Clients {
    fn now(&mut self) -> Tick {
        Tick(0)
    }

    fn notify(&mut self, _client: ClientHandle, _event: Event) {}

    fn deliver(&mut self, _client: ClientHandle, event: Event, answers: &mut Answers) {
        match event {
            Event::Reset => answers.reset_execute(),
            Event::ResetEnd { .. } => answers.acquire_interface(),
            Event::Removed { .. } | Event::Revoked => answers.unregister(),
            _ => {}
        }
    }

    fn observe(&mut self, output: &Output) {
        match output {
            Output::UnloadMayFinish => self.unloaded = true,
            Output::DeviceRemoved { .. } => self.removed = true,
            Output::ResetCycleFinished { .. } => self.cycles += 1,
            _ => {}
        }
    }
}

type Fw<'a, L> = Firmware<'a, L, ScriptedReset, Clients, 1, C, 2, Q>;

/// Add and start the device, register two clients; returns the first client.
fn boot<L: Lock<State>>(fw: &mut Fw<'_, L>) -> ClientHandle {
    fw.input(Input::AddDevice { device: DEV }).unwrap();
    fw.input(Input::Start {
        device: DEV,
        token: RequestToken(1),
    })
    .unwrap();
    fw.pump().unwrap();
    let mut clients = (0..2).map(|_| {
        let register = Input::Register {
            device: DEV,
            kind: ClientKind::Trusted,
        };
        match fw.input(register).unwrap() {
            Reply::Registered { client, .. } => client,
            other => panic!("{other:?}"),
        }
    });
    let first = clients.next().unwrap();
    assert_eq!(clients.count(), 1);
    fw.pump().unwrap();
    first
}

/// One unit of thread-mode work. A client's answer refused because a new cycle overtook
/// it (a fatal error fed between `RESET_END` and its `AcquireInterface`) is the core's
/// typed answer to a stale input, not a failure.
fn step<L: Lock<State>>(fw: &mut Fw<'_, L>) -> Step {
    match fw.step() {
        Ok(step) => step,
        Err(PortError::AnswerRefused { input, .. }) => Step::Fed(input),
        Err(error) => panic!("thread mode: {error:?}"),
    }
}

/// What one storm did to a driver-level input.
struct Run {
    /// `input` calls until the machine took the input (1: at once).
    attempts: u32,
    /// Fatal errors the storm raised before the input was taken.
    fired_before: u32,
    /// Thread mode's critical sections from the request to its end.
    sections: u32,
    /// Fatal errors the interrupt had the machine answer itself (fed or refused).
    fed: u32,
    /// Fatal errors the interrupt latched for thread mode to replay.
    latched: u32,
    /// Reset cycles finished meanwhile.
    reset_cycles: u32,
}

/// Boot, start the storm, then ask for `request` the way a driver does (retry while the
/// queue lacks room) and run thread mode until `finished`.
fn storm_against(isr: Isr, request: Input, finished: fn(&Clients) -> bool) -> Run {
    let lock = StormLock::new();
    let mut fw = Firmware::new(&lock, ScriptedReset::default(), Clients::default());
    boot(&mut fw);
    lock.isr.set(Some(isr));
    let start = lock.sections.get();
    // The storm is under way: its first fatal error was fed as boot's last critical
    // section ended, and its `RESET` broadcast waits in the queue.
    let first = on_fatal_interrupt(&lock.inner, DEV, || Tick(0));
    assert!(matches!(first, IsrOutcome::Fed(_)), "{first:?}");
    lock.outcomes.borrow_mut().push(first);
    lock.fired.set(1);
    let mut attempts = 0;
    loop {
        attempts += 1;
        match fw.input(request) {
            Ok(_) => break,
            Err(PortError::Backlog { .. }) => {}
            Err(error) => panic!("{request:?} refused: {error:?}"),
        }
        assert!(
            attempts <= 10 * STORM,
            "{request:?} never taken: the storm starved it"
        );
    }
    let fired_before = lock.fired.get();
    let mut sections = None;
    let mut replays = Vec::new();
    loop {
        if sections.is_none() && finished(fw.board()) {
            sections = Some(lock.sections.get() - start);
        }
        match step(&mut fw) {
            Step::Idle => break,
            Step::ReplayedFatal(_, answer) => replays.push(answer),
            _ => {}
        }
    }
    let sections = sections.unwrap_or_else(|| panic!("{request:?} did not finish"));
    let outcomes = lock.outcomes.borrow();
    // Every fatal error the storm raised was answered by the machine: fed, or latched and
    // replayed (the storm never fires while one is latched, so none coalesced, and only a
    // replay clears the latch).
    let fed = outcomes
        .iter()
        .filter(|o| matches!(o, IsrOutcome::Fed(_) | IsrOutcome::Refused(_)))
        .count() as u32;
    let latched = outcomes
        .iter()
        .filter(|o| **o == IsrOutcome::Latched)
        .count() as u32;
    assert_eq!(fed + latched, lock.fired.get(), "{outcomes:?}");
    assert!(
        !lock.inner.lock(|s| s.is_latched(DEV)).unwrap(),
        "a latched fatal error was never replayed"
    );
    // Held while `input` made room, so every replay came after the request was taken: the
    // core answers each for hardware that is torn down (the replay waits for a free queue,
    // so the teardown has run by then).
    assert_eq!(replays.len() as u32, latched);
    for answer in &replays {
        assert!(
            matches!(
                answer,
                Err(Error::Unloaded | Error::InvalidState { .. })
                    | Ok(Reply::Fatal(
                        FatalAnswer::FoldedIntoRemoval | FatalAnswer::HardwareNotLive(_)
                    ))
            ),
            "{answer:?}"
        );
    }
    Run {
        attempts,
        fired_before,
        sections,
        fed,
        latched,
        reset_cycles: fw.board().cycles,
    }
}

fn unload(isr: Isr) -> Run {
    storm_against(isr, Input::Unload, |c| c.unloaded)
}

fn remove(isr: Isr) -> Run {
    let request = Input::Remove {
        device: DEV,
        token: RequestToken(9),
    };
    storm_against(isr, request, |c| c.removed)
}

fn assert_bounded(what: &str, run: &Run) {
    let report = format!(
        "{what}: taken after {} input call(s) and {} fatal errors, finished after {} \
         critical sections; the interrupt had {} answered and latched {}; {} reset cycles",
        run.attempts, run.fired_before, run.sections, run.fed, run.latched, run.reset_cycles
    );
    println!("{report}");
    // Taken after the storm's first fatal error and at most one more (latched meanwhile).
    assert!(
        run.fired_before <= 2 && run.sections <= BOUND,
        "starved behind the storm: {report}"
    );
}

#[test]
fn feeding_interrupt_storm_does_not_starve_unload() {
    assert_bounded("unload, feeding interrupt", &unload(Isr::Feed));
}

#[test]
fn latching_interrupt_storm_does_not_starve_unload() {
    assert_bounded("unload, latching interrupt", &unload(Isr::Latch));
}

#[test]
fn feeding_interrupt_storm_does_not_starve_remove() {
    assert_bounded("remove, feeding interrupt", &remove(Isr::Feed));
}

#[test]
fn latching_interrupt_storm_does_not_starve_remove() {
    assert_bounded("remove, latching interrupt", &remove(Isr::Latch));
}

// The same storm as a shuttle schedule: an interrupt thread raising fatal errors (fed or
// latched) at every point the schedulers pick, against thread mode's unload.

/// Fatal errors the shuttle storm raises at most (it stops once unload finished).
const SHUTTLE_STORM: u32 = 300;

fn iterations() -> usize {
    std::env::var("FIRMWARE_SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// Thread mode's side of a [`ShuttleLock`], counting its critical sections.
struct Counting<'a> {
    lock: &'a ShuttleLock<State>,
    sections: Cell<u32>,
}

impl Lock<State> for Counting<'_> {
    fn lock<R>(&self, f: impl FnOnce(&mut State) -> R) -> Result<R, Busy> {
        self.sections.set(self.sections.get() + 1);
        self.lock.lock(f)
    }
}

fn explore(name: &str, isr: Isr, pct: bool) {
    let n = iterations();
    // The most critical sections an unload took in any schedule.
    let most = Arc::new(AtomicU32::new(0));
    let m = Arc::clone(&most);
    let body = move || {
        let sections = shuttle_unload(isr);
        m.fetch_max(sections, Ordering::Relaxed);
    };
    if pct {
        shuttle::check_pct(body, n, 3);
    } else {
        shuttle::check_random(body, n);
    }
    println!(
        "{name}: {n} schedules; unload finished within {} critical sections",
        most.load(Ordering::Relaxed)
    );
}

/// One schedule: boot, unmask the storm, unload; returns thread mode's critical sections
/// from the unload request to `UnloadMayFinish`.
fn shuttle_unload(isr: Isr) -> u32 {
    let lock = Arc::new(ShuttleLock::new(Shared::<1, C, 2, Q>::new(Config::DEFAULT)));
    let counting = Counting {
        lock: &lock,
        sections: Cell::new(0),
    };
    let mut fw = Firmware::new(&counting, ScriptedReset::default(), Clients::default());
    // Boot before the interrupt is unmasked; a client's reset request leaves its `RESET`
    // broadcast in the queue, so the unload must make room.
    let client = boot(&mut fw);
    fw.input(Input::ResetRequest { client }).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let storm = {
        let (lock, done) = (Arc::clone(&lock), Arc::clone(&done));
        shuttle::thread::spawn(move || {
            let mut outcomes = Vec::new();
            for _ in 0..SHUTTLE_STORM {
                if done.load(Ordering::SeqCst) {
                    break;
                }
                outcomes.push(match isr {
                    Isr::Feed => on_fatal_interrupt(&lock.isr(), DEV, || Tick(0)),
                    Isr::Latch => latch_fatal_interrupt(&lock.isr(), DEV),
                });
                shuttle::thread::yield_now();
            }
            outcomes
        })
    };
    let begin = counting.sections.get();
    let mut attempts = 0;
    while let Err(error) = fw.input(Input::Unload) {
        attempts += 1;
        assert!(matches!(error, PortError::Backlog { .. }), "{error:?}");
        assert!(attempts < 10 * SHUTTLE_STORM, "unload never taken");
    }
    while !fw.board().unloaded {
        assert_ne!(step(&mut fw), Step::Idle, "unload did not finish");
    }
    let sections = counting.sections.get() - begin;
    done.store(true, Ordering::SeqCst);
    let outcomes = storm.join().unwrap();
    while step(&mut fw) != Step::Idle {}
    assert!(
        sections <= BOUND,
        "unload starved behind the storm: {sections} critical sections, {} fatal errors",
        outcomes.len()
    );
    // Each fatal error was answered in the interrupt or latched, and the latch replayed.
    assert!(outcomes.iter().all(|o| matches!(
        o,
        IsrOutcome::Fed(_) | IsrOutcome::Refused(_) | IsrOutcome::Latched
    )));
    assert!(!lock.isr().lock(|s| s.is_latched(DEV)).unwrap());
    sections
}

#[test]
fn feeding_interrupt_storm_against_unload_random() {
    explore("feeding, random", Isr::Feed, false);
}

#[test]
fn feeding_interrupt_storm_against_unload_pct() {
    explore("feeding, pct", Isr::Feed, true);
}

#[test]
fn latching_interrupt_storm_against_unload_random() {
    explore("latching, random", Isr::Latch, false);
}

#[test]
fn latching_interrupt_storm_against_unload_pct() {
    explore("latching, pct", Isr::Latch, true);
}
