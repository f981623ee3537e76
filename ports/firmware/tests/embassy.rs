//! The embassy front-end on the host: embassy's std executor (`arch-std`) and std time
//! driver. The "interrupt" is another thread that latches the fatal error and raises the
//! signal; the async loop runs the reset cycle with the reset pulse's hold awaited on
//! `embassy_time::Delay`, and `Timer::at` wakes it at the machine's deadline.
#![cfg(feature = "embassy")]

use core::cell::RefCell;
use std::sync::mpsc;
use std::time::Duration;

use critical_section::Mutex;
use embassy_executor::Executor;
use embedded_hal_mock::eh1::digital::{Mock as Pin, State, Transaction as T};
use pnp_lifecycle::*;
use pnp_lifecycle_firmware::embassy::{latch_and_signal, now, AsyncResetLine, FatalSignal};
use pnp_lifecycle_firmware::*;

const Q: usize = queue_capacity(1, 8);
type Machine = Mutex<RefCell<Shared<1, 8, 2, Q>>>;
const DEV: DeviceId = DeviceId(0);
/// Short timeouts, so that the timer test takes 200 ms.
const CONFIG: Config = Config {
    trusted_ack_timeout: 200,
    ..Config::DEFAULT
};

struct Clients {
    silent: Option<usize>,
    handles: Vec<ClientHandle>,
    log: Vec<(ClientHandle, Event)>,
    cycles: u32,
    unloaded: u32,
}

impl Board for Clients {
    fn now(&mut self) -> Tick {
        now()
    }
    fn notify(&mut self, _: ClientHandle, _: Event) {}
    fn deliver(&mut self, client: ClientHandle, event: Event, answers: &mut Answers) {
        self.log.push((client, event));
        if self.silent.map(|i| self.handles.get(i)) == Some(Some(&client)) {
            return;
        }
        match event {
            Event::Reset => answers.reset_execute(),
            Event::ResetEnd { .. } => answers.acquire_interface(),
            Event::Removed { .. } => answers.unregister(),
            _ => {}
        }
    }
    fn observe(&mut self, output: &Output) {
        match output {
            Output::ResetCycleFinished { .. } => self.cycles += 1,
            Output::UnloadMayFinish => self.unloaded += 1,
            _ => {}
        }
    }
}

#[derive(Debug)]
struct Outcome {
    events: Vec<Vec<Event>>,
    cycles: u32,
    unloaded: u32,
    pulse_ms: u64,
    elapsed_ms: u64,
}

async fn scenario(
    shared: &'static Machine,
    signal: &'static FatalSignal,
    silent: Option<usize>,
) -> Outcome {
    let start = embassy_time::Instant::now();
    let pin = Pin::new(&[T::set(State::Low), T::set(State::High)]);
    // A 20 ms hold, awaited on embassy's timer.
    let line = AsyncResetLine::new(pin, embassy_time::Delay, 20_000_000, Polarity::ActiveLow);
    let board = Clients {
        silent,
        handles: Vec::new(),
        log: Vec::new(),
        cycles: 0,
        unloaded: 0,
    };
    let mut fw = Firmware::new(shared, line, board);
    fw.input(Input::AddDevice { device: DEV }).unwrap();
    fw.input(Input::Start {
        device: DEV,
        token: RequestToken(1),
    })
    .unwrap();
    fw.run_async(signal, |_| true).await.unwrap();
    for _ in 0..3 {
        match fw
            .input(Input::Register {
                device: DEV,
                kind: ClientKind::Trusted,
            })
            .unwrap()
        {
            Reply::Registered { client, .. } => fw.board_mut().handles.push(client),
            other => panic!("{other:?}"),
        }
    }
    fw.run_async(signal, |_| true).await.unwrap();
    // The "interrupt": another thread, 30 ms later; the loop is asleep on the signal.
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(latch_and_signal(shared, DEV, signal), IsrOutcome::Latched);
    });
    let before = embassy_time::Instant::now();
    fw.run_async(signal, |fw| fw.board().cycles > 0)
        .await
        .unwrap();
    let pulse_ms = before.elapsed().as_millis();
    fw.input(Input::Unload).unwrap();
    fw.run_async(signal, |fw| fw.board().unloaded > 0)
        .await
        .unwrap();
    let (line, board) = fw.into_parts();
    line.into_parts().0.done();
    Outcome {
        events: board
            .handles
            .iter()
            .map(|h| {
                board
                    .log
                    .iter()
                    .filter(|(c, _)| c == h)
                    .map(|(_, e)| *e)
                    .collect()
            })
            .collect(),
        cycles: board.cycles,
        unloaded: board.unloaded,
        pulse_ms,
        elapsed_ms: start.elapsed().as_millis(),
    }
}

#[embassy_executor::task(pool_size = 2)]
async fn owner(silent: Option<usize>, tx: mpsc::Sender<Outcome>) {
    let shared: &'static Machine =
        Box::leak(Box::new(Mutex::new(RefCell::new(Shared::new(CONFIG)))));
    let signal: &'static FatalSignal = Box::leak(Box::new(FatalSignal::new()));
    let _ = tx.send(scenario(shared, signal, silent).await);
}

/// Run the owner task on embassy's std executor (in its own thread: `run` never returns).
fn on_executor(silent: Option<usize>) -> Outcome {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let executor: &'static mut Executor = Box::leak(Box::new(Executor::new()));
        executor.run(|spawner| spawner.spawn(owner(silent, tx)).expect("spawn"));
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the async loop hung")
}

#[test]
fn async_loop_runs_the_cycle_from_a_signal_and_an_awaited_pulse() {
    let o = on_executor(None);
    for events in &o.events {
        assert_eq!(
            events,
            &[
                Event::Reset,
                Event::ResetEnd { epoch: Epoch(1) },
                Event::Removed { surprise: false }
            ]
        );
    }
    assert_eq!((o.cycles, o.unloaded), (1, 1));
    // Asleep on the signal until the interrupt 30 ms in, then the 20 ms hold awaited.
    assert!(o.pulse_ms >= 50, "{o:?}");
}

#[test]
fn timer_at_the_deadline_times_out_a_silent_client() {
    let o = on_executor(Some(2));
    assert_eq!(&o.events[2][..2], &[Event::Reset, Event::Revoked]);
    assert_eq!(
        o.events[0][..2],
        [Event::Reset, Event::ResetEnd { epoch: Epoch(1) }]
    );
    assert_eq!((o.cycles, o.unloaded), (1, 1));
    assert!(
        o.pulse_ms >= 200,
        "woken by Timer::at at the 200 ms deadline: {o:?}"
    );
    assert!(o.elapsed_ms < 5_000, "{o:?}");
}
