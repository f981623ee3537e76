//! Reset groups on the firmware port (issue 23), built from nothing new: two device ids
//! wired to one reset line and declared one group. A reset request on the second runs one
//! cycle for both, and the shared line is pulsed exactly once (the `embedded-hal-mock` pin
//! and delay assert every transition), through the first id, after every client of both
//! answered; every client ends at its device's new epoch.

use core::cell::RefCell;

use critical_section::Mutex;
use embedded_hal_mock::eh1::delay::{CheckedDelay, Transaction as D};
use embedded_hal_mock::eh1::digital::{Mock as Pin, State, Transaction as T};
use pnp_lifecycle::*;
use pnp_lifecycle_firmware::*;
use pnp_lifecycle_testkit::firmware_port::board::{feed_client, RecordingBoard};
use static_cell::ConstStaticCell;

const Q: usize = queue_capacity(2, 8);
type Machine = Mutex<RefCell<Shared<2, 8, 2, Q>>>;
type Fw = Firmware<'static, Machine, ResetLine<Pin, CheckedDelay>, RecordingBoard, 2, 8, 2, Q>;
const PULSE: u32 = 10_000;

fn register(fw: &mut Fw, device: DeviceId) -> ClientHandle {
    let kind = ClientKind::Trusted;
    match fw.input(Input::Register { device, kind }).unwrap() {
        Reply::Registered { client, .. } => client,
        other => panic!("{other:?}"),
    }
}

/// Feed every queued client answer and pump, until quiet.
fn settle(fw: &mut Fw) {
    loop {
        fw.pump().unwrap();
        let Some(input) = fw.board_mut().reactions.pop_front() else {
            break;
        };
        let _ = feed_client(fw, input);
    }
}

#[test]
fn two_ids_on_one_reset_line_declared_a_group_reset_with_one_pulse() {
    static CELL: ConstStaticCell<Machine> =
        ConstStaticCell::new(Mutex::new(RefCell::new(Shared::new(Config::DEFAULT))));
    let line = ResetLine::new(
        Pin::new(&[T::set(State::Low), T::set(State::High)]),
        CheckedDelay::new(&[D::delay_ns(PULSE)]),
        PULSE,
        Polarity::ActiveLow,
    );
    let mut fw: Fw = Firmware::new(CELL.take(), line, RecordingBoard::default());
    let (d0, d1) = (DeviceId(0), DeviceId(1));
    for (i, device) in [d0, d1].into_iter().enumerate() {
        fw.input(Input::AddDevice { device }).unwrap();
        let token = RequestToken(i as u32 + 1);
        fw.input(Input::Start { device, token }).unwrap();
        fw.pump().unwrap();
        let group = GroupId(0);
        fw.input(Input::JoinResetGroup { device, group }).unwrap();
    }
    let (a, b) = (register(&mut fw, d0), register(&mut fw, d1));
    fw.pump().unwrap();
    fw.input(Input::ResetRequest { client: b }).unwrap();
    settle(&mut fw);
    let board = fw.board();
    for c in [a, b] {
        let end = Event::ResetEnd { epoch: Epoch(1) };
        assert_eq!(board.events[&c], vec![Event::Reset, end], "{c:?}");
    }
    let reset = |device| Output::Hardware {
        device,
        command: HardwareCommand::Reset,
    };
    assert_eq!((board.count(reset(d0)), board.count(reset(d1))), (1, 0));
    assert_eq!(fw.reset_control().pulses(), 1);
    let (line, _) = fw.into_parts();
    let (mut pin, mut delay) = line.into_parts();
    pin.done();
    delay.done();
}
