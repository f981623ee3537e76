//! The firmware port's power paths, host-side: the board's power-down and power-up hooks
//! answer the core's commands, the owner loop sleeps in the board's low-power mode while
//! the device is in Dx, an access after an idle power-down waits for the power-up (with a
//! deadline), system sleep refuses accesses, `LostState` ends like a reset and `Failed`
//! like a surprise removal, and the reset line is never pulsed in Dx. Each test ends with
//! the common oracle plus the firmware board check (I14 at the board).

use std::cell::RefCell;

use pnp_lifecycle::*;
use pnp_lifecycle_firmware::*;
use pnp_lifecycle_testkit::firmware_port::board::{
    AsRecording, CellLock, RaceShared, RecordingBoard, ScriptedReset, CLIENTS, DEV, QUEUE,
    RACE_CONFIG,
};
use pnp_lifecycle_testkit::firmware_port::race::setup;
use pnp_lifecycle_testkit::firmware_port::{check, Recorder};

type Fw<'a, B> = Firmware<'a, CellLock<RaceShared>, ScriptedReset, B, 1, CLIENTS, 1, QUEUE>;

const POWER: RequestToken = RequestToken(200);
const WAKE: RequestToken = RequestToken(201);

fn lock() -> CellLock<RaceShared> {
    CellLock(RefCell::new(RaceShared::new(RACE_CONFIG)))
}

fn boot<B: Board + AsRecording>(fw: &mut Fw<'_, B>) -> Vec<ClientHandle> {
    let clients = setup(fw).expect("boot");
    serve(fw);
    clients
}

/// Thread mode works and the clients answer, until nothing is left.
fn serve<B: Board + AsRecording>(fw: &mut Fw<'_, B>) {
    for _ in 0..1_000 {
        fw.pump().expect("pump");
        match fw.board_mut().recording().reactions.pop_front() {
            Some(answer) => {
                let _ = pnp_lifecycle_testkit::firmware_port::board::feed_client(fw, answer);
            }
            None => return,
        }
    }
    panic!("thread mode did not settle");
}

fn phase<B: Board>(fw: &Fw<'_, B>) -> Option<PhaseKind> {
    fw.with_machine(|m| m.phase(DEV)).expect("busy")
}

fn epoch<B: Board>(fw: &Fw<'_, B>) -> Epoch {
    fw.with_machine(|m| m.epoch(DEV))
        .expect("busy")
        .expect("device")
}

fn events(board: &RecordingBoard, client: ClientHandle) -> Vec<Event> {
    board.events.get(&client).cloned().unwrap_or_default()
}

fn power_down<B: Board + AsRecording>(fw: &mut Fw<'_, B>, kind: PowerDownKind) {
    let result = fw.power_down(DEV, kind, POWER);
    let input = Input::PowerDown {
        device: DEV,
        kind,
        token: POWER,
    };
    fw.board_mut().recording().record_request(input, &result);
    result.expect("power down");
    serve(fw);
    assert_eq!(phase(fw), Some(PhaseKind::LowPower));
    assert!(fw
        .board_mut()
        .recording()
        .powered_down
        .load(std::sync::atomic::Ordering::SeqCst));
}

/// The application wakes the device (`Firmware::wake`), recorded for the oracle.
fn wake<B: Board + AsRecording>(fw: &mut Fw<'_, B>) {
    let result = fw.wake(DEV, WAKE);
    let input = Input::PowerUp {
        device: DEV,
        token: WAKE,
    };
    fw.board_mut().recording().record_request(input, &result);
    result.expect("wake");
    serve(fw);
}

/// An OS request through `Firmware::input`, recorded for the oracle.
fn send<B: Board + AsRecording>(fw: &mut Fw<'_, B>, input: Input) {
    let result = fw.input(input);
    fw.board_mut().recording().record_request(input, &result);
    result.expect("request");
    serve(fw);
}

fn oracle(rec: &Recorder, finished: bool) {
    if let Err(finding) = check(&rec.snapshot(), finished) {
        panic!("{finding}\nlog: {:#?}", rec.snapshot());
    }
}

#[test]
fn idle_power_down_calls_the_hook_after_suspending_and_an_access_wakes_it() {
    let (rec, lock) = (Recorder::default(), lock());
    let mut fw: Fw<'_, _> = Firmware::new(
        &lock,
        ScriptedReset::default(),
        RecordingBoard::new(rec.clone()),
    );
    let clients = boot(&mut fw);
    power_down(&mut fw, PowerDownKind::Idle);
    let suspending = Event::Suspending {
        kind: PowerDownKind::Idle,
    };
    assert_eq!(events(fw.board(), clients[0]).last(), Some(&suspending));
    // The access is not granted in Dx: the core commands the power-up, thread mode runs
    // it and the Resumed callbacks, then the retried access is granted.
    let e = epoch(&fw);
    let reply = fw.access(clients[0], e, Access::HardwareOp, 100);
    assert_eq!(reply, Ok(Reply::AccessGranted));
    assert_eq!(phase(&fw), Some(PhaseKind::Running));
    let resumed = Event::Resumed {
        epoch: e,
        state_lost: false,
    };
    assert_eq!(events(fw.board(), clients[0]).last(), Some(&resumed));
    fw.input(Input::AccessDone { client: clients[0] })
        .expect("done");
    assert_eq!(fw.reset_control().pulses, 0);
    oracle(&rec, true);
}

#[test]
fn system_sleep_refuses_accesses_until_the_application_wakes_it() {
    let (rec, lock) = (Recorder::default(), lock());
    let mut fw: Fw<'_, _> = Firmware::new(
        &lock,
        ScriptedReset::default(),
        RecordingBoard::new(rec.clone()),
    );
    let clients = boot(&mut fw);
    power_down(&mut fw, PowerDownKind::SystemSleep);
    let e = epoch(&fw);
    assert_eq!(
        fw.access(clients[0], e, Access::HardwareOp, 100),
        Err(PortError::Refused(Error::Suspended {
            kind: PowerDownKind::SystemSleep
        }))
    );
    assert_eq!(
        phase(&fw),
        Some(PhaseKind::LowPower),
        "a refused access wakes nothing"
    );
    wake(&mut fw);
    assert_eq!(phase(&fw), Some(PhaseKind::Running));
    assert_eq!(epoch(&fw), e);
    assert_eq!(
        fw.access(clients[0], e, Access::HardwareOp, 100),
        Ok(Reply::AccessGranted)
    );
    fw.input(Input::AccessDone { client: clients[0] })
        .expect("done");
    oracle(&rec, true);
}

#[test]
fn lost_state_power_up_ends_like_a_reset_without_a_pulse() {
    let (rec, lock) = (Recorder::default(), lock());
    let mut fw: Fw<'_, _> = Firmware::new(
        &lock,
        ScriptedReset::default(),
        RecordingBoard::new(rec.clone()),
    );
    let clients = boot(&mut fw);
    power_down(&mut fw, PowerDownKind::SystemSleep);
    let before = epoch(&fw);
    fw.board_mut()
        .power_up_results
        .push_back(PowerUpResult::LostState);
    wake(&mut fw);
    assert_eq!(phase(&fw), Some(PhaseKind::Running));
    let after = epoch(&fw);
    assert_eq!(after, Epoch(before.0 + 1));
    assert_eq!(
        events(fw.board(), clients[1]).last(),
        Some(&Event::Resumed {
            epoch: after,
            state_lost: true
        })
    );
    // The old interface is stale now.
    assert_eq!(
        fw.access(clients[0], before, Access::HardwareOp, 100),
        Err(PortError::Refused(Error::StaleEpoch { current: after }))
    );
    assert_eq!(fw.reset_control().pulses, 0);
    oracle(&rec, true);
}

#[test]
fn failed_power_up_is_a_surprise_removal() {
    let (rec, lock) = (Recorder::default(), lock());
    let mut fw: Fw<'_, _> = Firmware::new(
        &lock,
        ScriptedReset::default(),
        RecordingBoard::new(rec.clone()),
    );
    let clients = boot(&mut fw);
    power_down(&mut fw, PowerDownKind::Idle);
    fw.board_mut()
        .power_up_results
        .push_back(PowerUpResult::Failed);
    let e = epoch(&fw);
    // An access wakes it; the power-up fails; the access ends refused, not timed out.
    let reply = fw.access(clients[0], e, Access::HardwareOp, 100);
    assert!(matches!(reply, Err(PortError::Refused(_))), "{reply:?}");
    serve(&mut fw);
    assert_eq!(phase(&fw), Some(PhaseKind::SurpriseRemoved));
    for c in &clients {
        let last = events(fw.board(), *c).last().copied();
        assert!(matches!(last, Some(Event::Removed { .. })), "{last:?}");
    }
    send(
        &mut fw,
        Input::Remove {
            device: DEV,
            token: RequestToken(100),
        },
    );
    assert_eq!(phase(&fw), Some(PhaseKind::Absent));
    assert_eq!(fw.reset_control().pulses, 0);
    oracle(&rec, true);
}

#[test]
fn reset_request_in_system_sleep_pulses_only_after_the_power_up() {
    let (rec, lock) = (Recorder::default(), lock());
    let mut fw: Fw<'_, _> = Firmware::new(
        &lock,
        ScriptedReset::default(),
        RecordingBoard::new(rec.clone()),
    );
    let clients = boot(&mut fw);
    fw.board_mut().behaviour.insert(
        clients[2],
        pnp_lifecycle_testkit::firmware_port::board::Behaviour::Cooperative,
    );
    power_down(&mut fw, PowerDownKind::SystemSleep);
    assert_eq!(
        fw.input(Input::ResetRequest { client: clients[0] }),
        Ok(Reply::Reset(ResetAnswer::AfterPowerUp))
    );
    serve(&mut fw);
    assert_eq!(
        fw.reset_control().pulses,
        0,
        "the reset line is not pulsed in Dx"
    );
    assert_eq!(phase(&fw), Some(PhaseKind::LowPower));
    wake(&mut fw);
    assert_eq!(fw.reset_control().pulses, 1);
    assert_eq!(phase(&fw), Some(PhaseKind::Running));
    oracle(&rec, true);
}

#[test]
fn fatal_interrupt_in_dx_is_answered_hardware_not_live_and_touches_nothing() {
    let (rec, lock) = (Recorder::default(), lock());
    let mut fw: Fw<'_, _> = Firmware::new(
        &lock,
        ScriptedReset::default(),
        RecordingBoard::new(rec.clone()),
    );
    boot(&mut fw);
    power_down(&mut fw, PowerDownKind::Idle);
    assert_eq!(latch_fatal_interrupt(&lock, DEV), IsrOutcome::Latched);
    assert_eq!(
        fw.step(),
        Ok(Step::ReplayedFatal(
            DEV,
            Ok(Reply::Fatal(FatalAnswer::HardwareNotLive(
                PhaseKind::LowPower
            )))
        ))
    );
    serve(&mut fw);
    assert_eq!(phase(&fw), Some(PhaseKind::LowPower));
    assert_eq!(fw.reset_control().pulses, 0);
    wake(&mut fw);
    oracle(&rec, true);
}

#[test]
fn remove_and_unload_from_dx_release_without_powering_up() {
    for unload in [false, true] {
        let (rec, lock) = (Recorder::default(), lock());
        let mut fw: Fw<'_, _> = Firmware::new(
            &lock,
            ScriptedReset::default(),
            RecordingBoard::new(rec.clone()),
        );
        boot(&mut fw);
        power_down(&mut fw, PowerDownKind::SystemSleep);
        let input = if unload {
            Input::Unload
        } else {
            Input::Remove {
                device: DEV,
                token: RequestToken(100),
            }
        };
        send(&mut fw, input);
        assert_eq!(phase(&fw), Some(PhaseKind::Absent));
        let hw: Vec<HardwareCommand> = rec
            .snapshot()
            .iter()
            .filter_map(|r| match r {
                pnp_lifecycle_testkit::firmware_port::Rec::Obs(
                    pnp_lifecycle_testkit::observed::Obs::Hardware { command, .. },
                ) => Some(*command),
                _ => None,
            })
            .collect();
        assert_eq!(
            hw,
            [
                HardwareCommand::Start,
                HardwareCommand::PowerDown,
                HardwareCommand::ReleaseResources
            ],
            "unload {unload}"
        );
        oracle(&rec, true);
    }
}

/// A board whose clock moves one tick every time it is read.
struct Ticking(RecordingBoard);

impl Board for Ticking {
    fn now(&mut self) -> Tick {
        let now = self.0.now();
        self.0.clock.set(Tick(now.0 + 1));
        now
    }
    fn notify(&mut self, client: ClientHandle, event: Event) {
        self.0.notify(client, event)
    }
    fn power_down(&mut self, device: DeviceId) {
        self.0.power_down(device)
    }
    fn power_up(&mut self, device: DeviceId) -> PowerUpResult {
        self.0.power_up(device)
    }
    fn observe(&mut self, output: &Output) {
        self.0.observe(output)
    }
}

impl AsRecording for Ticking {
    fn recording(&mut self) -> &mut RecordingBoard {
        &mut self.0
    }
}

#[test]
fn an_access_waiting_for_a_slow_power_down_times_out_at_its_own_deadline() {
    let (rec, lock) = (Recorder::default(), lock());
    let mut fw: Fw<'_, _> = Firmware::new(
        &lock,
        ScriptedReset::default(),
        Ticking(RecordingBoard::new(rec.clone())),
    );
    let clients = boot(&mut fw);
    let e = epoch(&fw);
    // Client 1's operation is in flight: the idle power-down drains it (up to the
    // operation timeout, 15 ticks) before the hardware powers down.
    assert_eq!(
        fw.access(clients[1], e, Access::HardwareOp, 0),
        Ok(Reply::AccessGranted)
    );
    fw.power_down(DEV, PowerDownKind::Idle, POWER)
        .expect("power down");
    let start = fw.board_mut().now();
    let reply = fw.access(clients[0], e, Access::HardwareOp, 5);
    assert_eq!(
        reply,
        Err(PortError::PowerUpTimedOut { client: clients[0] })
    );
    let waited = fw.board_mut().now().0 - start.0;
    assert!((5..15).contains(&waited), "waited {waited} ticks");
    assert_eq!(phase(&fw), Some(PhaseKind::PoweringDown));
}

/// An idle that records which sleep the loop chose.
#[derive(Default)]
struct Sleeps {
    plain: u32,
    low_power: u32,
}

impl Idle for Sleeps {
    fn sleep(&mut self, _ready: &mut dyn FnMut() -> bool) {
        self.plain += 1;
    }
    fn sleep_low_power(&mut self, _ready: &mut dyn FnMut() -> bool) {
        self.low_power += 1;
    }
}

#[test]
fn the_owner_loop_sleeps_in_low_power_only_while_the_device_is_in_dx() {
    let (rec, lock) = (Recorder::default(), lock());
    let mut fw: Fw<'_, _> = Firmware::new(
        &lock,
        ScriptedReset::default(),
        RecordingBoard::new(rec.clone()),
    );
    boot(&mut fw);
    let mut idle = Sleeps::default();
    let mut rounds = 0;
    fw.run(&mut idle, |_| {
        rounds += 1;
        rounds > 2
    })
    .expect("run");
    assert_eq!((idle.plain, idle.low_power), (2, 0));
    power_down(&mut fw, PowerDownKind::Idle);
    let mut rounds = 0;
    fw.run(&mut idle, |_| {
        rounds += 1;
        rounds > 2
    })
    .expect("run");
    assert_eq!((idle.plain, idle.low_power), (2, 2));
    wake(&mut fw);
    oracle(&rec, true);
}

/// The log reduced to the callbacks (event kind), hardware commands and completions.
fn trace(rec: &Recorder) -> Vec<String> {
    use pnp_lifecycle_testkit::firmware_port::Rec;
    use pnp_lifecycle_testkit::observed::{Obs, Seen};
    rec.snapshot()
        .iter()
        .filter_map(|r| match r {
            Rec::Obs(Obs::Enter {
                seen: Seen::Event(event),
                ..
            }) => Some(
                format!("{event:?}")
                    .split([' ', '{', '('])
                    .next()?
                    .to_string(),
            ),
            Rec::Obs(Obs::Hardware { command, .. }) => Some(format!("hw {command:?}")),
            Rec::Obs(Obs::RequestCompleted { id, .. }) => Some(format!("done {id}")),
            _ => None,
        })
        .collect()
}

#[test]
fn callback_orders_for_power_down_power_up_and_remove_from_dx() {
    let (rec, lock) = (Recorder::default(), lock());
    let mut fw: Fw<'_, _> = Firmware::new(
        &lock,
        ScriptedReset::default(),
        RecordingBoard::new(rec.clone()),
    );
    boot(&mut fw);
    let booted = trace(&rec).len();
    power_down(&mut fw, PowerDownKind::SystemSleep);
    wake(&mut fw);
    send(
        &mut fw,
        Input::PowerDown {
            device: DEV,
            kind: PowerDownKind::SystemSleep,
            token: RequestToken(202),
        },
    );
    send(
        &mut fw,
        Input::Remove {
            device: DEV,
            token: RequestToken(100),
        },
    );
    let t = trace(&rec);
    let expected = [
        // power-down: clients first, then the hardware, then the request completes
        "Suspending",
        "Suspending",
        "Suspending",
        "hw PowerDown",
        "done 200",
        // power-up: the hardware, the request, then the clients
        "hw PowerUp",
        "done 201",
        "Resumed",
        "Resumed",
        "Resumed",
        "Suspending",
        "Suspending",
        "Suspending",
        "hw PowerDown",
        "done 202",
        // remove from Dx: the clients are told, then only the resources are released
        "Removed",
        "Removed",
        "Removed",
        "hw ReleaseResources",
        "done 100",
    ];
    assert_eq!(t[booted..], expected, "{t:?}");
    oracle(&rec, true);
}
