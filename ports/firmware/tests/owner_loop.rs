//! The owner loop (`Firmware::run`) and the constant-time interrupt path
//! (`latch_fatal_interrupt`), on the target's lock type with critical-section's `std`
//! implementation: answers from inside a callback, no lost event, `poll_timeout` timers and
//! an idle path that never loses a wake-up.

use core::cell::{Cell, RefCell};
use std::rc::Rc;

use critical_section::Mutex;
use embedded_hal_mock::eh1::delay::NoopDelay;
use embedded_hal_mock::eh1::digital::{Mock as Pin, State, Transaction as T};
use pnp_lifecycle::*;
use pnp_lifecycle_firmware::*;

const Q: usize = queue_capacity(1, 8);
type Machine = Mutex<RefCell<Shared<1, 8, 2, Q>>>;
const DEV: DeviceId = DeviceId(0);

fn machine() -> &'static Machine {
    Box::leak(Box::new(Mutex::new(RefCell::new(Shared::new(
        Config::DEFAULT,
    )))))
}

/// Clients that answer from inside their callbacks; one of them may stay silent.
struct Clients {
    clock: Rc<Cell<u64>>,
    shared: &'static Machine,
    silent: Option<ClientHandle>,
    log: Vec<(ClientHandle, Event)>,
    /// Latch a second fatal error from inside the first `RESET_END` callback.
    refire_on_reset_end: bool,
    cycles: u32,
    unloaded: u32,
    answers: usize,
}

impl Board for Clients {
    fn now(&mut self) -> Tick {
        Tick(self.clock.get())
    }
    fn notify(&mut self, _: ClientHandle, _: Event) {
        unreachable!("deliver is overridden")
    }
    fn deliver(&mut self, client: ClientHandle, event: Event, answers: &mut Answers) {
        self.log.push((client, event));
        if Some(client) == self.silent {
            return;
        }
        match event {
            Event::Reset => answers.reset_execute(),
            Event::ResetEnd { .. } => {
                answers.acquire_interface();
                if self.refire_on_reset_end {
                    self.refire_on_reset_end = false;
                    assert_eq!(latch_fatal_interrupt(self.shared, DEV), IsrOutcome::Latched);
                }
            }
            Event::Removed { .. } => answers.unregister(),
            _ => {}
        }
        self.answers += answers.inputs().len();
    }
    fn observe(&mut self, output: &Output) {
        match output {
            Output::ResetCycleFinished { .. } => self.cycles += 1,
            Output::UnloadMayFinish => self.unloaded += 1,
            _ => {}
        }
    }
}

/// A host idle: a scripted "interrupt" may land just before the readiness check (the
/// lost-wake-up window); with nothing ready, sleeping jumps the clock to the deadline (the
/// timer interrupt), or fails the test when nothing could ever wake it.
struct TestIdle {
    clock: Rc<Cell<u64>>,
    deadline: Rc<Cell<Option<u64>>>,
    before_check: Option<Box<dyn FnMut()>>,
    sleeps: u32,
}

impl Idle for TestIdle {
    fn sleep(&mut self, ready: &mut dyn FnMut() -> bool) {
        if let Some(mut irq) = self.before_check.take() {
            irq();
        }
        if ready() {
            return;
        }
        self.sleeps += 1;
        match self.deadline.get() {
            Some(d) if d > self.clock.get() => self.clock.set(d),
            _ => panic!("slept with nothing to wake it: a lost wake-up"),
        }
    }
}

type Fw = Firmware<'static, Machine, ResetLine<Pin, NoopDelay>, Clients, 1, 8, 2, Q>;

fn boot(n: usize, pulses: usize) -> (Fw, Vec<ClientHandle>, Rc<Cell<u64>>) {
    let shared = machine();
    let clock = Rc::new(Cell::new(0));
    let mut pin = Vec::new();
    for _ in 0..pulses {
        pin.extend([T::set(State::Low), T::set(State::High)]);
    }
    let line = ResetLine::new(
        Pin::new(&pin),
        NoopDelay::new(),
        10_000,
        Polarity::ActiveLow,
    );
    let board = Clients {
        clock: clock.clone(),
        shared,
        silent: None,
        log: Vec::new(),
        refire_on_reset_end: false,
        cycles: 0,
        unloaded: 0,
        answers: 0,
    };
    let mut fw = Firmware::new(shared, line, board);
    fw.input(Input::AddDevice { device: DEV }).unwrap();
    fw.input(Input::Start {
        device: DEV,
        token: RequestToken(1),
    })
    .unwrap();
    let mut clients = Vec::new();
    fw.pump().unwrap();
    for _ in 0..n {
        match fw
            .input(Input::Register {
                device: DEV,
                kind: ClientKind::Trusted,
            })
            .unwrap()
        {
            Reply::Registered { client, .. } => clients.push(client),
            other => panic!("{other:?}"),
        }
    }
    fw.pump().unwrap();
    fw.board_mut().log.clear();
    (fw, clients, clock)
}

fn idle(clock: &Rc<Cell<u64>>) -> (TestIdle, Rc<Cell<Option<u64>>>) {
    let deadline = Rc::new(Cell::new(None));
    (
        TestIdle {
            clock: clock.clone(),
            deadline: deadline.clone(),
            before_check: None,
            sleeps: 0,
        },
        deadline,
    )
}

fn events_of(fw: &Fw, client: ClientHandle) -> Vec<Event> {
    fw.board()
        .log
        .iter()
        .filter(|(c, _)| *c == client)
        .map(|(_, e)| *e)
        .collect()
}

#[test]
fn the_interrupt_only_latches_and_the_loop_runs_the_cycle_with_answers_from_callbacks() {
    let (mut fw, clients, clock) = boot(4, 1);
    let shared = fw.shared();
    assert_eq!(latch_fatal_interrupt(shared, DEV), IsrOutcome::Latched);
    // The interrupt did not touch the machine: no broadcast, nothing buffered.
    assert_eq!(
        fw.with_machine(|m| m.phase(DEV)).unwrap(),
        Some(PhaseKind::Running)
    );
    assert_eq!(shared.lock(|s| s.pending_len()).unwrap(), 0);
    assert!(shared.lock(|s| s.is_latched(DEV)).unwrap());
    assert!(fw.has_work().unwrap());
    let (mut idle, _) = idle(&clock);
    fw.run(&mut idle, |fw| fw.board().cycles == 1).unwrap();
    for &c in &clients {
        assert_eq!(
            events_of(&fw, c),
            vec![Event::Reset, Event::ResetEnd { epoch: Epoch(1) }],
            "{c:?}"
        );
    }
    assert_eq!(fw.with_machine(|m| m.epoch(DEV)).unwrap(), Some(Epoch(1)));
    assert_eq!(fw.board().answers, 8); // 4 ResetExecute + 4 AcquireInterface
    assert!(!shared.lock(|s| s.is_latched(DEV)).unwrap()); // replayed
                                                           // Unload ends it, exactly once.
    fw.input(Input::Unload).unwrap();
    fw.run(&mut idle, |fw| fw.board().unloaded > 0).unwrap();
    assert_eq!(fw.board().unloaded, 1);
    assert_eq!(shared.lock(|s| s.lost_outputs()).unwrap(), 0);
    assert_eq!(idle.sleeps, 0);
    let (line, _) = fw.into_parts();
    line.into_parts().0.done();
}

#[test]
fn reset_after_reset_end_is_never_lost() {
    // A second fatal error latched from inside the first RESET_END callback: every client
    // still gets RESET, RESET_END, RESET, RESET_END, in order (the naive mailbox loses the
    // second RESET behind the first RESET_END).
    let (mut fw, clients, clock) = boot(3, 2);
    fw.board_mut().refire_on_reset_end = true;
    let (mut idle, _) = idle(&clock);
    latch_fatal_interrupt(fw.shared(), DEV);
    fw.run(&mut idle, |fw| fw.board().cycles == 2).unwrap();
    for &c in &clients {
        assert_eq!(
            events_of(&fw, c),
            vec![
                Event::Reset,
                Event::ResetEnd { epoch: Epoch(1) },
                Event::Reset,
                Event::ResetEnd { epoch: Epoch(2) }
            ],
            "{c:?}"
        );
    }
    let (line, _) = fw.into_parts();
    line.into_parts().0.done();
}

#[test]
fn a_silent_client_is_timed_out_through_poll_timeout() {
    let (mut fw, clients, clock) = boot(2, 1);
    fw.board_mut().silent = Some(clients[1]);
    let (mut idle, deadline) = idle(&clock);
    latch_fatal_interrupt(fw.shared(), DEV);
    // The idle's timer is armed on the machine's next deadline.
    let mut rounds = 0;
    while fw.board().cycles == 0 {
        rounds += 1;
        assert!(rounds < 10, "no progress");
        let _ = fw.run(&mut idle, |fw| {
            deadline.set(fw.poll_timeout().unwrap().map(|t| t.0));
            fw.board().cycles > 0 || deadline.get().is_some()
        });
        if fw.board().cycles == 0 {
            // Sleep until the deadline, then let the loop feed the timeout.
            let mut never = || false;
            idle.sleep(&mut never);
        }
    }
    assert_eq!(clock.get(), Config::DEFAULT.trusted_ack_timeout);
    assert_eq!(
        events_of(&fw, clients[1]),
        vec![Event::Reset, Event::Revoked]
    );
    assert_eq!(
        events_of(&fw, clients[0]),
        vec![Event::Reset, Event::ResetEnd { epoch: Epoch(1) }]
    );
    let (line, _) = fw.into_parts();
    line.into_parts().0.done();
}

#[test]
fn an_interrupt_just_before_the_idle_check_is_not_lost() {
    let (mut fw, clients, clock) = boot(1, 1);
    let (mut idle, _) = idle(&clock);
    let shared = fw.shared();
    // The loop is idle and about to sleep when the interrupt lands: the check inside the
    // idle's critical section sees the latch and does not sleep (TestIdle panics if it
    // would sleep with nothing to wake it).
    idle.before_check = Some(Box::new(move || {
        latch_fatal_interrupt(shared, DEV);
    }));
    let mut passes = 0;
    fw.run(&mut idle, |fw| {
        passes += 1;
        passes > 1 && fw.board().cycles == 1
    })
    .unwrap();
    assert_eq!(idle.sleeps, 0);
    assert_eq!(
        events_of(&fw, clients[0]),
        vec![Event::Reset, Event::ResetEnd { epoch: Epoch(1) }]
    );
    let (line, _) = fw.into_parts();
    line.into_parts().0.done();
}
