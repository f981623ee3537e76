//! Power in Windows words with real `std` threads: `IRP_MN_SET_POWER` / `IRP_MN_QUERY_POWER`
//! and the KMDF callback orders for the seven documented sequences (start, power-down,
//! power-up, rebalance, orderly removal, surprise removal in D0 and in Dx), each asserted
//! on the recorded callbacks, plus failed `D0Entry`s and accesses in Dx.

use std::sync::{Arc, Mutex};

use pnp_lifecycle::{
    ClientHandle, ClientKind, Config, DeviceId, Epoch, Event, HardwareCommand, PhaseKind,
    PowerDownKind, ResetResult, StartResult, Tick,
};
use pnp_lifecycle_testkit::observed::{Log, Obs, Seen};
use pnp_lifecycle_testkit::windows_port::kmdf::{KmdfRecorder, Step};
use pnp_lifecycle_testkit::windows_port::{Ids, Recorded};
use pnp_lifecycle_windows::{
    DevicePowerState as D, Driver, Hal, Irp, ManualClock, MlxInterface, MonotonicClock, NtStatus,
    PnpMinor, PowerState, StdKernel, SystemPowerState as S, WdfPowerDeviceState, WindowsOs,
    WindowsVocabulary,
};

const DEV: DeviceId = DeviceId(0);
const D3: WdfPowerDeviceState = WdfPowerDeviceState::D3;
const FINAL: WdfPowerDeviceState = WdfPowerDeviceState::D3Final;

struct Hw;
impl Hal for Hw {
    fn start(&self, _: DeviceId) -> StartResult {
        StartResult::Started
    }
    fn reset(&self, _: DeviceId) -> ResetResult {
        ResetResult::Succeeded
    }
    fn shutdown(&self, _: DeviceId) {}
    fn release(&self, _: DeviceId) {}
    fn client_op(&self, _: DeviceId, _: ClientHandle) {}
    fn cut_client(&self, _: DeviceId, _: ClientHandle) {}
}

struct Rig {
    driver: Driver<StdKernel, Recorded<WindowsOs>>,
    kmdf: Arc<KmdfRecorder>,
    /// The core's hardware commands as the port received them (`Obs::Hardware`): the
    /// KMDF steps alone would hide a repeated command the port's step bookkeeping skips.
    log: Log,
}

fn set(state: PowerState) -> PnpMinor {
    PnpMinor::SetPower(state)
}

fn sleep_s3() -> PnpMinor {
    set(PowerState::System(S::S3))
}

fn idle_d3() -> PnpMinor {
    set(PowerState::Device(D::D3))
}

fn d0() -> PnpMinor {
    set(PowerState::Device(D::D0))
}

impl Rig {
    /// A driver with recording KMDF callbacks and its device added (not started).
    fn added() -> Rig {
        let kmdf = Arc::new(KmdfRecorder::new(0));
        let hal: Arc<dyn Hal> = Arc::new(Hw);
        let log = Log::new();
        let os = Recorded::new(
            WindowsOs::with_kmdf(hal.clone(), kmdf.clone()),
            log.clone(),
            Ids::default(),
        );
        let clock = Arc::new(MonotonicClock::new());
        let driver = Driver::with_os(Config::DEFAULT, hal, clock, os);
        driver.add_device(DEV).unwrap();
        Rig { driver, kmdf, log }
    }

    /// Started, the start's callbacks forgotten.
    fn started() -> Rig {
        let rig = Rig::added();
        assert_eq!(rig.irp(PnpMinor::StartDevice), NtStatus::SUCCESS);
        rig.kmdf.clear();
        rig
    }

    /// Send one IRP (PnP or power), wait for its completion (exactly once).
    fn irp(&self, minor: PnpMinor) -> NtStatus {
        let irp: Arc<Irp> = Irp::new(DEV, minor, 0);
        if minor.is_power() {
            self.driver.dispatch_power(&irp);
        } else {
            self.driver.dispatch_pnp(&irp);
        }
        let status = irp.wait();
        assert_eq!(irp.completions(), 1, "{irp:?}");
        status
    }

    fn phase(&self) -> Option<PhaseKind> {
        self.driver.runtime().inspect(|o| o.machine().phase(DEV))
    }

    fn steps(&self) -> Vec<Step> {
        self.kmdf.steps()
    }

    /// Every hardware command the core gave, from the start.
    fn commands(&self) -> Vec<HardwareCommand> {
        let of = |o: Obs| match o {
            Obs::Hardware { command, .. } => Some(command),
            _ => None,
        };
        self.log.snapshot().into_iter().filter_map(of).collect()
    }
}

type Events = Arc<Mutex<Vec<Event>>>;

fn client<O: WindowsVocabulary<StdKernel>>(
    d: &Driver<StdKernel, O>,
) -> (MlxInterface<StdKernel, O>, Events) {
    let events: Events = Arc::default();
    let e = events.clone();
    let iface = d
        .register_client(
            DEV,
            ClientKind::Trusted,
            Arc::new(move |ev| e.lock().unwrap().push(ev)),
        )
        .unwrap();
    (iface, events)
}

fn wait_for(events: &Events, pred: impl Fn(&[Event]) -> bool) {
    for _ in 0..10_000 {
        if pred(&events.lock().unwrap()) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    panic!("events never arrived: {:?}", events.lock().unwrap());
}

use Step::*;

#[test]
fn start_is_prepare_hardware_d0_entry_then_self_managed_io_init() {
    let rig = Rig::added();
    assert_eq!(rig.irp(PnpMinor::StartDevice), NtStatus::SUCCESS);
    assert_eq!(
        rig.steps(),
        [PrepareHardware, D0Entry(FINAL), SelfManagedIoInit]
    );
}

#[test]
fn power_down_is_suspend_then_d0_exit_to_d3_for_idle_and_system_sleep() {
    for (minor, kind) in [
        (idle_d3(), PowerDownKind::Idle),
        (sleep_s3(), PowerDownKind::SystemSleep),
    ] {
        let rig = Rig::started();
        let (_iface, events) = client(&rig.driver);
        assert_eq!(rig.irp(minor), NtStatus::SUCCESS);
        assert_eq!(rig.steps(), [SelfManagedIoSuspend, D0Exit(D3)], "{minor:?}");
        assert_eq!(rig.phase(), Some(PhaseKind::LowPower));
        wait_for(&events, |e| e.contains(&Event::Suspending { kind }));
    }
}

#[test]
fn power_up_is_d0_entry_from_d3_then_self_managed_io_restart() {
    for (down, up) in [
        (idle_d3(), d0()),
        (sleep_s3(), set(PowerState::System(S::S0))),
    ] {
        let rig = Rig::started();
        let (_iface, events) = client(&rig.driver);
        assert_eq!(rig.irp(down), NtStatus::SUCCESS);
        rig.kmdf.clear();
        assert_eq!(rig.irp(up), NtStatus::SUCCESS);
        assert_eq!(rig.steps(), [D0Entry(D3), SelfManagedIoRestart]);
        assert_eq!(rig.phase(), Some(PhaseKind::Running));
        let resumed = Event::Resumed {
            epoch: Epoch(0),
            state_lost: false,
        };
        wait_for(&events, |e| e.contains(&resumed));
        // Clients hear it only once the hardware is back (the command came first).
        let log = rig.log.snapshot();
        let at = |f: &dyn Fn(&Obs) -> bool| log.iter().position(f);
        let powered = at(&|o| {
            matches!(
                o,
                Obs::Hardware {
                    command: HardwareCommand::PowerUp,
                    ..
                }
            )
        });
        let told = at(&|o| matches!(o, Obs::Enter { seen, .. } if *seen == Seen::Event(resumed)));
        assert!(powered.is_some() && powered < told, "{log:?}");
    }
}

#[test]
fn rebalance_is_suspend_d0_exit_release_then_prepare_d0_entry_restart() {
    let rig = Rig::started();
    assert_eq!(rig.irp(PnpMinor::QueryStopDevice), NtStatus::SUCCESS);
    assert_eq!(rig.irp(PnpMinor::StopDevice), NtStatus::SUCCESS);
    assert_eq!(rig.irp(PnpMinor::StartDevice), NtStatus::SUCCESS);
    assert_eq!(
        rig.steps(),
        [
            QueryStop,
            SelfManagedIoSuspend,
            D0Exit(FINAL),
            ReleaseHardware,
            PrepareHardware,
            D0Entry(FINAL),
            SelfManagedIoRestart
        ]
    );
}

#[test]
fn orderly_removal_from_d0_ends_with_flush_and_cleanup_before_the_irp_completes() {
    let rig = Rig::started();
    assert_eq!(rig.irp(PnpMinor::QueryRemoveDevice), NtStatus::SUCCESS);
    assert_eq!(rig.irp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    // Asserted right when the IRP completed: Cleanup ran before it.
    assert_eq!(
        rig.steps(),
        [
            QueryRemove,
            SelfManagedIoSuspend,
            D0Exit(FINAL),
            ReleaseHardware,
            SelfManagedIoFlush,
            SelfManagedIoCleanup
        ]
    );
}

/// Issue 22, item 7: KMDF's surprise removal in D0 (`WdfDevStatePnpSurpriseRemoveIoStarted`
/// then the failed path's power-down): `EvtDeviceSurpriseRemoval` →
/// `SelfManagedIoSuspend` → `D0Exit(D3Final)` → `ReleaseHardware`, then on remove
/// `Flush` → `Cleanup`. The port used to skip `D0Exit` (it followed the core, which
/// commands no `Shutdown` for a vanished device).
#[test]
fn surprise_removal_in_d0_is_surprise_removal_suspend_d0_exit_release_flush_cleanup() {
    let rig = Rig::started();
    assert_eq!(rig.irp(PnpMinor::SurpriseRemoval), NtStatus::SUCCESS);
    assert_eq!(rig.irp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    assert_eq!(
        rig.steps(),
        [
            SurpriseRemoval,
            SelfManagedIoSuspend,
            D0Exit(FINAL),
            ReleaseHardware,
            SelfManagedIoFlush,
            SelfManagedIoCleanup
        ]
    );
    use HardwareCommand::*;
    assert_eq!(
        rig.commands(),
        [Start, ReleaseResources],
        "the core commanded no register access: D0Exit is KMDF's, told the device is gone"
    );
}

/// Issue 22, item 7: a failed `EvtDevicePrepareHardware` is undone by
/// `EvtDeviceReleaseHardware` at once (KMDF's `WdfDevStatePnpFailedOwnHardware`); the
/// removal that follows releases nothing twice.
#[test]
fn a_failed_prepare_hardware_is_followed_by_release_hardware() {
    let rig = Rig::added();
    rig.kmdf.fail_next_prepare();
    assert_ne!(rig.irp(PnpMinor::StartDevice), NtStatus::SUCCESS);
    assert_eq!(rig.steps(), [PrepareHardware, ReleaseHardware]);
    assert_eq!(rig.irp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    assert_eq!(rig.steps(), [PrepareHardware, ReleaseHardware]);
}

/// Issue 22, item 7: system shutdown (S5) leaves D0 for good: `D0Exit(WdfPowerDeviceD3Final)`;
/// a system sleep (S1..S4) `D0Exit(D3)`.
#[test]
fn system_shutdown_s5_is_d0_exit_to_d3_final() {
    for (state, target) in [(S::S5, FINAL), (S::S4, D3), (S::S1, D3)] {
        let rig = Rig::started();
        assert_eq!(rig.irp(set(PowerState::System(state))), NtStatus::SUCCESS);
        assert_eq!(
            rig.steps(),
            [SelfManagedIoSuspend, D0Exit(target)],
            "{state:?}"
        );
    }
}

/// Issue 22, item 7: an idle power-down to D1 or D2 is `D0Exit(D1)` / `D0Exit(D2)`, and the
/// power-up's `D0Entry` reports the state the device left D0 for.
#[test]
fn an_idle_power_down_to_d1_or_d2_and_d0_entry_reports_the_state_left() {
    for (state, wdf) in [
        (D::D1, WdfPowerDeviceState::D1),
        (D::D2, WdfPowerDeviceState::D2),
        (D::D3, D3),
    ] {
        let rig = Rig::started();
        assert_eq!(rig.irp(set(PowerState::Device(state))), NtStatus::SUCCESS);
        assert_eq!(rig.irp(d0()), NtStatus::SUCCESS);
        assert_eq!(
            rig.steps(),
            [
                SelfManagedIoSuspend,
                D0Exit(wdf),
                D0Entry(wdf),
                SelfManagedIoRestart
            ],
            "{state:?}"
        );
    }
}

/// Issue 22, item 7: `EvtDeviceQueryRemove` / `EvtDeviceQueryStop` veto the query
/// themselves: the IRP fails with the driver's status and the core never sees it.
#[test]
fn the_driver_vetoes_query_remove_and_query_stop_before_the_core() {
    let rig = Rig::started();
    rig.kmdf.veto_queries(true);
    assert_eq!(rig.irp(PnpMinor::QueryRemoveDevice), NtStatus::DEVICE_BUSY);
    assert_eq!(rig.irp(PnpMinor::QueryStopDevice), NtStatus::DEVICE_BUSY);
    assert_eq!(rig.phase(), Some(PhaseKind::Running));
    assert_eq!(rig.steps(), [QueryRemove, QueryStop]);
    rig.kmdf.veto_queries(false);
    assert_eq!(rig.irp(PnpMinor::QueryStopDevice), NtStatus::SUCCESS);
    assert_eq!(rig.phase(), Some(PhaseKind::StopPending));
}

#[test]
fn surprise_removal_in_dx_repeats_no_power_down_step() {
    let rig = Rig::started();
    assert_eq!(rig.irp(idle_d3()), NtStatus::SUCCESS);
    assert_eq!(rig.steps(), [SelfManagedIoSuspend, D0Exit(D3)]);
    rig.kmdf.clear();
    assert_eq!(rig.irp(PnpMinor::SurpriseRemoval), NtStatus::SUCCESS);
    assert_eq!(rig.irp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    assert_eq!(
        rig.steps(),
        [
            SurpriseRemoval,
            ReleaseHardware,
            SelfManagedIoFlush,
            SelfManagedIoCleanup
        ]
    );
    use HardwareCommand::*;
    assert_eq!(
        rig.commands(),
        [Start, PowerDown, ReleaseResources],
        "the core repeated no power-down command"
    );
}

#[test]
fn orderly_removal_from_dx_releases_without_powering_up() {
    let rig = Rig::started();
    assert_eq!(rig.irp(sleep_s3()), NtStatus::SUCCESS);
    rig.kmdf.clear();
    assert_eq!(rig.irp(PnpMinor::QueryRemoveDevice), NtStatus::SUCCESS);
    assert_eq!(rig.irp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    assert_eq!(
        rig.steps(),
        [
            QueryRemove,
            ReleaseHardware,
            SelfManagedIoFlush,
            SelfManagedIoCleanup
        ]
    );
    use HardwareCommand::*;
    assert_eq!(
        rig.commands(),
        [Start, PowerDown, ReleaseResources],
        "neither a power-up nor a shutdown of hardware in Dx"
    );
}

#[test]
fn a_failed_d0_entry_on_first_start_fails_the_start_and_removal_releases() {
    let rig = Rig::added();
    rig.kmdf.fail_next_d0_entry();
    assert_eq!(
        rig.irp(PnpMinor::StartDevice),
        NtStatus::DEVICE_HARDWARE_ERROR
    );
    // A failed start (orderly removal follows), not a vanished device.
    assert_eq!(rig.phase(), Some(PhaseKind::Failed));
    assert_eq!(
        rig.driver.runtime().inspect(|o| o.machine().failure(DEV)),
        Some(pnp_lifecycle::FailureCause::StartFailed)
    );
    assert_eq!(rig.irp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    use HardwareCommand::*;
    assert_eq!(rig.commands(), [Start, ReleaseResources]);
    // SelfManagedIoInit never ran, so there is nothing to flush or clean up.
    assert_eq!(
        rig.steps(),
        [PrepareHardware, D0Entry(FINAL), ReleaseHardware]
    );
    assert_eq!(rig.phase(), Some(PhaseKind::Absent));
}

#[test]
fn a_failed_d0_entry_from_dx_is_a_surprise_removal() {
    let rig = Rig::started();
    let (iface, events) = client(&rig.driver);
    assert_eq!(rig.irp(idle_d3()), NtStatus::SUCCESS);
    rig.kmdf.clear();
    rig.kmdf.fail_next_d0_entry();
    assert_eq!(rig.irp(d0()), NtStatus::DEVICE_HARDWARE_ERROR);
    assert_eq!(rig.phase(), Some(PhaseKind::SurpriseRemoved));
    wait_for(&events, |e| e.contains(&Event::Removed { surprise: true }));
    iface.unregister().unwrap(); // the client lets go, so the remove need not wait
    assert_eq!(rig.irp(PnpMinor::RemoveDevice), NtStatus::SUCCESS);
    assert_eq!(
        rig.steps(),
        [
            D0Entry(D3),
            ReleaseHardware,
            SelfManagedIoFlush,
            SelfManagedIoCleanup
        ]
    );
}

#[test]
fn a_power_up_that_lost_context_tells_clients_a_new_epoch() {
    let rig = Rig::started();
    let (iface, events) = client(&rig.driver);
    assert_eq!(rig.irp(idle_d3()), NtStatus::SUCCESS);
    rig.kmdf.lose_context();
    assert_eq!(rig.irp(d0()), NtStatus::SUCCESS);
    let resumed = Event::Resumed {
        epoch: Epoch(1),
        state_lost: true,
    };
    wait_for(&events, |e| e.contains(&resumed));
    assert_eq!(iface.hardware_op(), Err(NtStatus::REVISION_MISMATCH));
    assert_eq!(iface.acquire().unwrap().hardware_op(), Ok(()));
}

#[test]
fn query_power_answers_from_the_core_and_changes_nothing() {
    let rig = Rig::started();
    for state in [PowerState::System(S::S4), PowerState::Device(D::D2)] {
        assert_eq!(rig.irp(PnpMinor::QueryPower(state)), NtStatus::SUCCESS);
    }
    assert_eq!(rig.phase(), Some(PhaseKind::Running));
    assert_eq!(rig.steps(), []);
    // Query stop succeeded: a power-down is accepted there now (issue 22 item 6), and the
    // query says so without moving the device.
    assert_eq!(rig.irp(PnpMinor::QueryStopDevice), NtStatus::SUCCESS);
    rig.kmdf.clear();
    let query = PnpMinor::QueryPower(PowerState::System(S::S3));
    assert_eq!(rig.irp(query), NtStatus::SUCCESS);
    assert_eq!(rig.phase(), Some(PhaseKind::StopPending));
    assert_eq!(rig.steps(), []);
    assert_eq!(rig.irp(sleep_s3()), NtStatus::SUCCESS);
    assert_eq!(rig.steps(), [SelfManagedIoSuspend, D0Exit(D3)]);
    assert_eq!(
        rig.phase(),
        Some(PhaseKind::StopPending),
        "back to the query"
    );
    // Where the table refuses (the hardware vanished), the query answers as the set does.
    let gone = Rig::started();
    assert_eq!(gone.irp(PnpMinor::SurpriseRemoval), NtStatus::SUCCESS);
    assert_eq!(gone.irp(query), NtStatus::INVALID_DEVICE_STATE);
    assert_eq!(gone.irp(sleep_s3()), NtStatus::INVALID_DEVICE_STATE);
}

#[test]
fn power_irps_go_to_the_power_dispatch_only() {
    let rig = Rig::started();
    let irp: Arc<Irp> = Irp::new(DEV, sleep_s3(), 0);
    assert_eq!(
        rig.driver.dispatch_pnp(&irp),
        NtStatus::INVALID_DEVICE_REQUEST
    );
    let irp: Arc<Irp> = Irp::new(DEV, PnpMinor::StopDevice, 0);
    assert_eq!(
        rig.driver.dispatch_power(&irp),
        NtStatus::INVALID_DEVICE_REQUEST
    );
    assert_eq!(irp.completions(), 1);
    assert_eq!(rig.phase(), Some(PhaseKind::Running));
}

#[test]
fn an_access_in_idle_dx_powers_the_device_up_and_in_system_sleep_is_refused() {
    let rig = Rig::started();
    let (iface, _) = client(&rig.driver);
    assert_eq!(rig.irp(idle_d3()), NtStatus::SUCCESS);
    rig.kmdf.clear();
    assert_eq!(iface.hardware_op(), Ok(()));
    assert_eq!(rig.steps(), [D0Entry(D3), SelfManagedIoRestart]);
    assert_eq!(rig.phase(), Some(PhaseKind::Running));
    assert_eq!(rig.irp(sleep_s3()), NtStatus::SUCCESS);
    assert_eq!(iface.hardware_op(), Err(NtStatus::DEVICE_POWERED_OFF));
}

#[test]
fn an_access_waiting_for_a_power_up_times_out() {
    // A power-up that never reports: the access gives up at its deadline.
    struct Stuck(Arc<KmdfRecorder>, Arc<std::sync::Barrier>);
    impl pnp_lifecycle_windows::KmdfDevice for Stuck {
        fn d0_entry(&self, device: DeviceId, previous: WdfPowerDeviceState) -> NtStatus {
            if previous == D3 {
                self.1.wait(); // held until the test let the access time out
            }
            self.0.d0_entry(device, previous)
        }
    }
    let gate = Arc::new(std::sync::Barrier::new(2));
    let hal: Arc<dyn Hal> = Arc::new(Hw);
    let evt = Arc::new(Stuck(Arc::new(KmdfRecorder::new(0)), gate.clone()));
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let os = WindowsOs::with_kmdf(hal.clone(), evt);
    let driver = Driver::with_os(Config::DEFAULT, hal, clock.clone(), os);
    driver.add_device(DEV).unwrap();
    let start: Arc<Irp> = Irp::new(DEV, PnpMinor::StartDevice, 0);
    driver.dispatch_pnp(&start);
    assert_eq!(start.wait(), NtStatus::SUCCESS);
    let (iface, _) = client(&driver);
    let down: Arc<Irp> = Irp::new(DEV, idle_d3(), 1);
    driver.dispatch_power(&down);
    assert_eq!(down.wait(), NtStatus::SUCCESS);
    let access = std::thread::spawn(move || iface.hardware_op());
    while driver.runtime().inspect(|o| o.machine().phase(DEV)) != Some(PhaseKind::PoweringUp) {
        std::thread::yield_now();
    }
    let due = Tick(Config::DEFAULT.operation_timeout);
    for _ in 0..1_000_000 {
        if driver.poll_timeout() == Some(due) {
            break; // the access registered its deadline with the timer
        }
        std::thread::yield_now();
    }
    assert_eq!(
        driver.poll_timeout(),
        Some(due),
        "the timer DPC is due then"
    );
    clock.set(due);
    let _ = driver.timeout(); // the timer DPC: the waiting access sees the time
    assert_eq!(access.join().unwrap(), Err(NtStatus::IO_TIMEOUT));
    gate.wait();
}

/// Issue 22, item 6: a driver must not fail `IRP_MN_SET_POWER` to D0. After an idle D3 and
/// a query stop (a rebalance that follows an idle power-down), the power-up runs and the
/// device returns to its pending query stop (the core refused it before).
#[test]
fn set_power_d0_after_query_stop_in_d3_powers_the_device_up() {
    let rig = Rig::started();
    assert_eq!(rig.irp(idle_d3()), NtStatus::SUCCESS);
    assert_eq!(rig.irp(PnpMinor::QueryStopDevice), NtStatus::SUCCESS);
    rig.kmdf.clear();
    assert_eq!(rig.irp(d0()), NtStatus::SUCCESS);
    assert_eq!(rig.steps(), [D0Entry(D3), SelfManagedIoRestart]);
}

/// Issue 22, item 6: `IRP_MN_SET_POWER` to a system sleep (an S-IRP no driver may fail) or
/// the power policy owner's D3 while a query remove is pending powers the device down (the
/// core refused it before).
#[test]
fn set_power_s3_or_d3_while_a_query_remove_is_pending_is_not_failed() {
    for minor in [sleep_s3(), idle_d3()] {
        let rig = Rig::started();
        assert_eq!(rig.irp(PnpMinor::QueryRemoveDevice), NtStatus::SUCCESS);
        rig.kmdf.clear();
        assert_eq!(rig.irp(minor), NtStatus::SUCCESS, "{minor:?}");
        assert_eq!(rig.steps(), [SelfManagedIoSuspend, D0Exit(D3)]);
    }
}

/// Issue 22, item 6: `IRP_MN_QUERY_POWER` is answered from the core's query, which knows
/// what a handler decides on its data: during a reset cycle an idle power-down is vetoed
/// (the table alone says Handle), and the query says so too.
#[test]
fn query_power_during_a_reset_cycle_agrees_with_the_set() {
    let rig = Rig::started();
    let (iface, _events) = client(&rig.driver);
    iface.reset_request().unwrap(); // never answered: the cycle stays in Quiescing
    assert_eq!(rig.phase(), Some(PhaseKind::Quiescing));
    let query = PnpMinor::QueryPower(PowerState::Device(D::D3));
    let asked = rig.irp(query);
    assert_eq!(rig.irp(idle_d3()), NtStatus::DEVICE_BUSY);
    assert_eq!(
        asked,
        NtStatus::DEVICE_BUSY,
        "the query's answer is the set's"
    );
}
