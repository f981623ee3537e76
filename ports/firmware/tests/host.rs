//! Host tests on the target's real lock (`critical_section::Mutex<RefCell<…>>`, with
//! critical-section's `std` implementation) and an `embedded-hal-mock` reset line whose
//! pin transitions and delays are asserted exactly.

use core::cell::RefCell;

use critical_section::Mutex;
use embedded_hal_mock::eh1::delay::{CheckedDelay, Transaction as D};
use embedded_hal_mock::eh1::digital::{Mock as Pin, State, Transaction as T};
use embedded_hal_mock::eh1::MockError;
use pnp_lifecycle::*;
use pnp_lifecycle_firmware::*;
use pnp_lifecycle_testkit::firmware_port::board::{feed_client, RecordingBoard};
use pnp_lifecycle_testkit::firmware_port::{check, Rec};
use static_cell::ConstStaticCell;

const Q: usize = queue_capacity(1, 8);
type Machine = Mutex<RefCell<Shared<1, 8, 2, Q>>>;
const DEV: DeviceId = DeviceId(0);
const PULSE: u32 = 10_000;

fn pin_error() -> MockError {
    MockError::Io(std::io::ErrorKind::Other)
}

#[test]
fn pulse_is_low_hold_high_exactly() {
    let pin = Pin::new(&[T::set(State::Low), T::set(State::High)]);
    let delay = CheckedDelay::new(&[D::delay_ns(PULSE)]);
    let mut line = ResetLine::new(pin, delay, PULSE, Polarity::ActiveLow);
    assert_eq!(line.pulse(), Ok(()));
    assert_eq!(line.pulses(), 1);
    let (mut pin, mut delay) = line.into_parts();
    pin.done();
    delay.done();
}

#[test]
fn active_high_with_settle() {
    let pin = Pin::new(&[T::set(State::High), T::set(State::Low)]);
    let delay = CheckedDelay::new(&[D::delay_ns(PULSE), D::delay_ns(500)]);
    let mut line = ResetLine::new(pin, delay, PULSE, Polarity::ActiveHigh).with_settle(500);
    assert_eq!(line.pulse(), Ok(()));
    let (mut pin, mut delay) = line.into_parts();
    pin.done();
    delay.done();
}

#[test]
fn assert_failure_is_typed_releases_the_line_and_skips_the_hold() {
    let pin = Pin::new(&[
        T::set(State::Low).with_error(pin_error()),
        T::set(State::High),
    ]);
    let delay = CheckedDelay::new(&[]);
    let mut line = ResetLine::new(pin, delay, PULSE, Polarity::ActiveLow);
    assert_eq!(line.pulse(), Err(ResetError::Assert(pin_error())));
    let (mut pin, mut delay) = line.into_parts();
    pin.done();
    delay.done();
}

#[test]
fn deassert_failure_is_typed() {
    let pin = Pin::new(&[
        T::set(State::Low),
        T::set(State::High).with_error(pin_error()),
    ]);
    let delay = CheckedDelay::new(&[D::delay_ns(PULSE)]);
    let mut line = ResetLine::new(pin, delay, PULSE, Polarity::ActiveLow).with_settle(7);
    assert_eq!(line.pulse(), Err(ResetError::Deassert(pin_error())));
    let (mut pin, mut delay) = line.into_parts();
    pin.done();
    delay.done(); // no settle delay after a failed release
}

type Fw = Firmware<'static, Machine, ResetLine<Pin, CheckedDelay>, RecordingBoard, 1, 8, 2, Q>;

fn boot(shared: &'static Machine, pin: &[T], delays: &[D]) -> (Fw, ClientHandle, ClientHandle) {
    let line = ResetLine::new(
        Pin::new(pin),
        CheckedDelay::new(delays),
        PULSE,
        Polarity::ActiveLow,
    );
    let mut fw = Firmware::new(shared, line, RecordingBoard::default());
    fw.input(Input::AddDevice { device: DEV }).unwrap();
    let start = Input::Start {
        device: DEV,
        token: RequestToken(1),
    };
    let result = fw.input(start);
    fw.board().record_request(start, &result); // for the oracle's I5
    result.unwrap();
    fw.pump().unwrap();
    let (a, b) = (register(&mut fw), register(&mut fw));
    fw.pump().unwrap();
    (fw, a, b)
}

fn register(fw: &mut Fw) -> ClientHandle {
    match fw
        .input(Input::Register {
            device: DEV,
            kind: ClientKind::Trusted,
        })
        .unwrap()
    {
        Reply::Registered { client, .. } => client,
        other => panic!("{other:?}"),
    }
}

/// Feed every queued client answer and pump, until quiet.
fn settle(fw: &mut Fw) -> Vec<PortError<ResetError<MockError>>> {
    let mut errors = Vec::new();
    loop {
        if let Err(e) = fw.pump() {
            errors.push(e);
        }
        let Some(input) = fw.board_mut().reactions.pop_front() else {
            break;
        };
        let _ = feed_client(fw, input);
    }
    errors
}

#[test]
fn reset_cycle_drives_the_pin_then_feeds_reset_done() {
    static CELL: ConstStaticCell<Machine> =
        ConstStaticCell::new(Mutex::new(RefCell::new(Shared::new(Config::DEFAULT))));
    let shared = CELL.take();
    let (mut fw, a, b) = boot(
        shared,
        &[T::set(State::Low), T::set(State::High)],
        &[D::delay_ns(PULSE)],
    );
    assert_eq!(
        fw.input(Input::ResetRequest { client: a }).unwrap(),
        Reply::Reset(ResetAnswer::Started)
    );
    assert!(settle(&mut fw).is_empty());
    let board = fw.board();
    for c in [a, b] {
        assert_eq!(
            board.events[&c],
            vec![Event::Reset, Event::ResetEnd { epoch: Epoch(1) }]
        );
    }
    assert_eq!(
        board.count(Output::ResetCycleFinished {
            device: DEV,
            outcome: CycleOutcome::Completed(Epoch(1))
        }),
        1
    );
    check(&board.rec.snapshot(), true).unwrap();
    assert_eq!(
        fw.with_machine(|m| m.phase(DEV)).unwrap(),
        Some(PhaseKind::Running)
    );
    assert_eq!(fw.reset_control().pulses(), 1);
    let (line, _) = fw.into_parts();
    let (mut pin, mut delay) = line.into_parts();
    pin.done();
    delay.done();
}

#[test]
fn failed_pulse_reports_reset_failed_and_a_typed_error() {
    static CELL: ConstStaticCell<Machine> =
        ConstStaticCell::new(Mutex::new(RefCell::new(Shared::new(Config::DEFAULT))));
    let shared = CELL.take();
    let (mut fw, a, b) = boot(
        shared,
        &[
            T::set(State::Low),
            T::set(State::High).with_error(pin_error()),
        ],
        &[D::delay_ns(PULSE)],
    );
    fw.input(Input::ResetRequest { client: a }).unwrap();
    let errors = settle(&mut fw);
    assert_eq!(
        errors,
        vec![PortError::Reset {
            device: DEV,
            error: ResetError::Deassert(pin_error())
        }]
    );
    assert_eq!(
        fw.with_machine(|m| m.phase(DEV)).unwrap(),
        Some(PhaseKind::Failed)
    );
    let board = fw.board();
    for c in [a, b] {
        assert_eq!(board.events[&c], vec![Event::Reset, Event::DeviceFatal]);
    }
    assert_eq!(
        board.count(Output::ResetCycleFinished {
            device: DEV,
            outcome: CycleOutcome::HardwareFailed
        }),
        1
    );
    assert_eq!(fw.reset_control().pulses(), 1);
    // The failure reached the board through `observe`, before the clients' DEVICE_FATAL;
    // the cause is the core's to keep.
    let failed = Output::DeviceFailed {
        device: DEV,
        cause: FailureCause::ResetFailed,
    };
    assert_eq!(board.count(failed), 1);
    let log = board.rec.snapshot();
    let at = |o: Output| log.iter().position(|r| *r == Rec::Output(o));
    assert!(
        at(failed)
            < at(Output::Notify {
                client: a,
                event: Event::DeviceFatal
            })
    );
    assert_eq!(
        fw.with_machine(|m| m.failure(DEV)).unwrap(),
        Some(FailureCause::ResetFailed)
    );
    let (line, _) = fw.into_parts();
    let (mut pin, mut delay) = line.into_parts();
    pin.done();
    delay.done();
}

#[test]
fn fatal_interrupt_only_feeds_and_latches_while_thread_mode_has_outputs() {
    static CELL: ConstStaticCell<Machine> =
        ConstStaticCell::new(Mutex::new(RefCell::new(Shared::new(Config::DEFAULT))));
    static LINK: IsrLink<Machine> = IsrLink::new();
    let shared = CELL.take();
    let (mut fw, a, b) = boot(
        shared,
        &[T::set(State::Low), T::set(State::High)],
        &[D::delay_ns(PULSE)],
    );
    LINK.install(shared);
    let isr = || on_fatal_interrupt(LINK.get().unwrap(), DEV, || Tick(0));
    assert_eq!(
        isr(),
        IsrOutcome::Fed(FatalAnswer::Served(ResetAnswer::Started))
    );
    // The interrupt called no client: the RESETs wait in the buffer for thread mode.
    assert!(fw.board().events.is_empty());
    assert_eq!(shared_pending(shared), 2);
    // A second interrupt finds the buffer busy: latched, not fed, nothing dropped.
    assert_eq!(isr(), IsrOutcome::Latched);
    assert_eq!(shared_pending(shared), 2);
    assert_eq!(isr(), IsrOutcome::Latched); // coalesces
    assert!(settle(&mut fw).is_empty());
    // The latch was replayed and cleared.
    assert!(!critical_section::with(|cs| shared
        .borrow(cs)
        .borrow()
        .is_latched(DEV)));
    // The latched request was replayed in thread mode: it joined (or followed) the cycle, so
    // one cycle ran and the clients saw exactly one RESET / RESET_END pair.
    let board = fw.board();
    for c in [a, b] {
        assert_eq!(
            board.events[&c],
            vec![Event::Reset, Event::ResetEnd { epoch: Epoch(1) }]
        );
    }
    assert_eq!(
        critical_section::with(|cs| shared.borrow(cs).borrow().lost_outputs()),
        0
    );
    let (line, _) = fw.into_parts();
    let (mut pin, mut delay) = line.into_parts();
    pin.done();
    delay.done();
}

fn shared_pending(shared: &Machine) -> usize {
    critical_section::with(|cs| shared.borrow(cs).borrow().pending_len())
}

#[test]
fn fatal_interrupt_for_an_unknown_device_or_a_removed_one_is_refused() {
    static CELL: ConstStaticCell<Machine> =
        ConstStaticCell::new(Mutex::new(RefCell::new(Shared::new(Config::DEFAULT))));
    let shared = CELL.take();
    assert_eq!(
        on_fatal_interrupt(shared, DeviceId(3), || Tick(0)),
        IsrOutcome::NoSuchDevice
    );
    assert!(matches!(
        on_fatal_interrupt(shared, DEV, || Tick(0)),
        IsrOutcome::Refused(Error::InvalidState {
            phase: PhaseKind::Absent,
            ..
        })
    ));
}

#[test]
fn fatal_interrupt_on_a_failed_device_is_answered_not_reported_as_a_reset() {
    static CELL: ConstStaticCell<Machine> =
        ConstStaticCell::new(Mutex::new(RefCell::new(Shared::new(Config::DEFAULT))));
    let shared = CELL.take();
    let line = ResetLine::new(
        Pin::new(&[]),
        CheckedDelay::new(&[]),
        PULSE,
        Polarity::ActiveLow,
    );
    struct FailingStart;
    impl Board for FailingStart {
        fn now(&mut self) -> Tick {
            Tick(0)
        }
        fn notify(&mut self, _: ClientHandle, _: Event) {}
        fn start(&mut self, _: DeviceId) -> StartResult {
            StartResult::FailedAfterResources
        }
    }
    let mut fw = Firmware::new(shared, line, FailingStart);
    fw.input(Input::AddDevice { device: DEV }).unwrap();
    fw.input(Input::Start {
        device: DEV,
        token: RequestToken(1),
    })
    .unwrap();
    fw.pump().unwrap();
    assert_eq!(
        fw.with_machine(|m| m.phase(DEV)).unwrap(),
        Some(PhaseKind::Failed)
    );
    // Answered (never dropped): the hardware is not live, there is nothing to reset.
    let answer = FatalAnswer::HardwareNotLive(PhaseKind::Failed);
    assert_eq!(
        on_fatal_interrupt(shared, DEV, || Tick(0)),
        IsrOutcome::Fed(answer)
    );
    assert_eq!(fw.pump(), Ok(0)); // nothing was queued: no reset pulse, no callback
    assert_eq!(
        fw.with_machine(|m| m.failure(DEV)).unwrap(),
        Some(FailureCause::StartFailed)
    );
    let (line, _) = fw.into_parts();
    let (mut pin, mut delay) = line.into_parts();
    pin.done();
    delay.done();
}

/// The output queue is held once in RAM: the shared state is the machine (its queue the
/// only output buffer) plus one latch flag a device, never a second copy of the queue.
#[test]
fn the_shared_state_holds_the_output_queue_once() {
    use core::mem::size_of;
    let machine = size_of::<Lifecycle<1, 8, 2, Q>>();
    let shared = size_of::<Shared<1, 8, 2, Q>>();
    let queue = Q * size_of::<Output>();
    assert!(
        shared < machine + queue / 2,
        "Shared {shared} B vs the machine {machine} B: a second queue of {queue} B?"
    );
    // Outputs wait in the machine's queue and come out of it in order.
    let mut s: Shared<1, 8, 2, Q> = Shared::new(Config::DEFAULT);
    assert_eq!(
        s.feed(Tick(0), Input::AddDevice { device: DEV }),
        Ok(Reply::Accepted)
    );
    let token = RequestToken(1);
    let start = Input::Start { device: DEV, token };
    assert_eq!(s.feed(Tick(0), start), Ok(Reply::Accepted));
    assert_eq!(s.pending_len(), s.machine().pending_output_count());
    assert_eq!(
        s.pop(),
        Some(Output::Hardware {
            device: DEV,
            command: HardwareCommand::Start
        })
    );
    assert_eq!(s.pop(), None);
    assert!(!s.has_work());
}
