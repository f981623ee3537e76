//! Power in Windows words: `IRP_MN_SET_POWER` / `IRP_MN_QUERY_POWER` for system (S0..S5)
//! and device (D0..D3) power, and the KMDF-shaped callbacks ([`KmdfDevice`]) a driver writer
//! knows, called in KMDF's documented orders from the hardware commands the core issues.
//!
//! The lifecycle decisions stay the core's. What lives here is OS-side bookkeeping: per
//! device, which KMDF steps already ran ([`Kmdf`]), so that a command repeats none of them
//! (a surprise removal in Dx calls no second `SelfManagedIoSuspend` / `D0Exit`).

use std::sync::Arc;

use pnp_lifecycle::{
    DeviceId, Input, PhaseKind, PowerDownKind, PowerUpResult, RequestToken, StartResult,
};
use pnp_lifecycle_runtime::{Kernel, Monitor};

use crate::{NtStatus, DEVICES};

/// `SYSTEM_POWER_STATE`: S0 (working) to S5 (off).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SystemPowerState {
    /// `PowerSystemWorking`.
    S0,
    /// `PowerSystemSleeping1`.
    S1,
    /// `PowerSystemSleeping2`.
    S2,
    /// `PowerSystemSleeping3`.
    S3,
    /// `PowerSystemHibernate`.
    S4,
    /// `PowerSystemShutdown`.
    S5,
}

/// `DEVICE_POWER_STATE`: D0 (working) to D3 (off).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DevicePowerState {
    /// `PowerDeviceD0`.
    D0,
    /// `PowerDeviceD1`.
    D1,
    /// `PowerDeviceD2`.
    D2,
    /// `PowerDeviceD3`.
    D3,
}

/// The `POWER_STATE` a power IRP carries (`Parameters.Power.Type` and `.State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PowerState {
    /// `SystemPowerState`: an S-IRP.
    System(SystemPowerState),
    /// `DevicePowerState`: a D-IRP (from the power policy owner, when the device idles).
    Device(DevicePowerState),
}

impl PowerState {
    /// Whether the state is a working one (S0, D0).
    pub const fn working(self) -> bool {
        matches!(
            self,
            PowerState::System(SystemPowerState::S0) | PowerState::Device(DevicePowerState::D0)
        )
    }

    /// The core input `IRP_MN_SET_POWER` to this state is: S0 / D0 → `PowerUp`; a system
    /// sleep (S1..S5) → `PowerDown { SystemSleep }`; D1..D3 → `PowerDown { Idle }`.
    pub const fn input(self, device: DeviceId, token: RequestToken) -> Input {
        match self {
            _ if self.working() => Input::PowerUp { device, token },
            PowerState::System(_) => Input::PowerDown {
                device,
                kind: PowerDownKind::SystemSleep,
                token,
            },
            PowerState::Device(_) => Input::PowerDown {
                device,
                kind: PowerDownKind::Idle,
                token,
            },
        }
    }

    /// `IRP_MN_QUERY_POWER`, answered from the core's side-effect-free question
    /// ([`pnp_lifecycle::Lifecycle::query_power_down`], passed as `ask`): exactly the answer
    /// the set-power to this state would get now, nothing changed. Accepted: success; else
    /// the refusal's status (vetoed: `STATUS_DEVICE_BUSY`; refused:
    /// `STATUS_INVALID_DEVICE_STATE`). Windows sends queries only for lower states; a query
    /// for S0 / D0 succeeds. `phase` is `None` for a device id the driver does not have.
    pub fn query(
        self,
        phase: Option<PhaseKind>,
        ask: impl FnOnce(PowerDownKind) -> Result<(), pnp_lifecycle::Error>,
    ) -> NtStatus {
        if phase.is_none() {
            return NtStatus::NO_SUCH_DEVICE;
        }
        let kind = match self {
            _ if self.working() => return NtStatus::SUCCESS,
            PowerState::System(_) => PowerDownKind::SystemSleep,
            PowerState::Device(_) => PowerDownKind::Idle,
        };
        match ask(kind) {
            Ok(()) => NtStatus::SUCCESS,
            Err(error) => error.into(),
        }
    }
}

/// `WDF_POWER_DEVICE_STATE`: what `EvtDeviceD0Entry` came from and `EvtDeviceD0Exit` goes
/// to. The core has one low-power state; which Dx the device sits in is Windows' word,
/// kept by the port from the `IRP_MN_SET_POWER` that sent it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WdfPowerDeviceState {
    /// `WdfPowerDeviceD1`: an idle power-down to D1.
    D1,
    /// `WdfPowerDeviceD2`: an idle power-down to D2.
    D2,
    /// `WdfPowerDeviceD3`: an idle power-down to D3, or a system sleep (S1..S4).
    D3,
    /// `WdfPowerDeviceD3Final`: the device was never in D0 before (start), or leaves D0 for
    /// good: a stop (rebalance), a removal (orderly or surprise), system shutdown (S5).
    D3Final,
}

impl PowerState {
    /// The `WDF_POWER_DEVICE_STATE` a set-power to this state sends a device in D0 to:
    /// D1 / D2 / D3 as asked, a system sleep S1..S4 D3, shutdown (S5) D3Final; `None` for
    /// S0 / D0.
    pub const fn wdf_target(self) -> Option<WdfPowerDeviceState> {
        Some(match self {
            PowerState::Device(DevicePowerState::D1) => WdfPowerDeviceState::D1,
            PowerState::Device(DevicePowerState::D2) => WdfPowerDeviceState::D2,
            PowerState::Device(DevicePowerState::D3) => WdfPowerDeviceState::D3,
            PowerState::System(SystemPowerState::S5) => WdfPowerDeviceState::D3Final,
            PowerState::System(
                SystemPowerState::S1
                | SystemPowerState::S2
                | SystemPowerState::S3
                | SystemPowerState::S4,
            ) => WdfPowerDeviceState::D3,
            PowerState::System(SystemPowerState::S0) | PowerState::Device(DevicePowerState::D0) => {
                return None
            }
        })
    }
}

/// The KMDF event callbacks a driver writer implements (optional: a [`crate::WindowsOs`]
/// without them uses [`crate::Hal`]'s start / shutdown / release and its device keeps its
/// power). Called on the notification thread, one device command at a time, no lock held.
/// Every default does nothing and succeeds.
pub trait KmdfDevice: Send + Sync {
    /// `EvtDevicePrepareHardware`: map the resources. A failure fails the start; as in KMDF,
    /// `EvtDeviceReleaseHardware` is then called at once to undo what it mapped.
    fn prepare_hardware(&self, device: DeviceId) -> NtStatus {
        let _ = device;
        NtStatus::SUCCESS
    }
    /// `EvtDeviceD0Entry`: the device entered D0 from `previous`. A failure on start fails
    /// the start (orderly removal follows); from D3 it is a failed power-up (the core treats
    /// it as a surprise removal).
    fn d0_entry(&self, device: DeviceId, previous: WdfPowerDeviceState) -> NtStatus {
        let _ = (device, previous);
        NtStatus::SUCCESS
    }
    /// Asked after a successful `EvtDeviceD0Entry` from D3: whether the device lost the state
    /// its clients' interfaces depend on (they then re-acquire: epoch + 1). Default: no.
    fn context_lost(&self, device: DeviceId) -> bool {
        let _ = device;
        false
    }
    /// `EvtDeviceSelfManagedIoInit`: once, on the first start.
    fn self_managed_io_init(&self, device: DeviceId) -> NtStatus {
        let _ = device;
        NtStatus::SUCCESS
    }
    /// `EvtDeviceSelfManagedIoSuspend`: before leaving D0 (power-down, stop, removal).
    fn self_managed_io_suspend(&self, device: DeviceId) {
        let _ = device;
    }
    /// `EvtDeviceSelfManagedIoRestart`: back in D0 after a power-up or a restart.
    fn self_managed_io_restart(&self, device: DeviceId) -> NtStatus {
        let _ = device;
        NtStatus::SUCCESS
    }
    /// `EvtDeviceD0Exit`: the device leaves D0 for `target`; the last register access.
    fn d0_exit(&self, device: DeviceId, target: WdfPowerDeviceState) {
        let _ = (device, target);
    }
    /// `EvtDeviceReleaseHardware`: unmap the resources (no register access).
    fn release_hardware(&self, device: DeviceId) {
        let _ = device;
    }
    /// `EvtDeviceSelfManagedIoFlush`: the device was removed.
    fn self_managed_io_flush(&self, device: DeviceId) {
        let _ = device;
    }
    /// `EvtDeviceSelfManagedIoCleanup`: the last callback of a removed device.
    fn self_managed_io_cleanup(&self, device: DeviceId) {
        let _ = device;
    }
    /// `EvtDeviceSurpriseRemoval`: the hardware is gone (`IRP_MN_SURPRISE_REMOVAL`). Called
    /// before the removal's `SelfManagedIoSuspend` / `D0Exit(D3Final)` /
    /// `ReleaseHardware`, which must then touch no register.
    fn surprise_removal(&self, device: DeviceId) {
        let _ = device;
    }
    /// `EvtDeviceQueryRemove`: the driver's own veto of `IRP_MN_QUERY_REMOVE_DEVICE`,
    /// asked before the core. A failure completes the IRP with it; the core never sees
    /// the query. Called on the PnP manager's thread, no lock held.
    fn query_remove(&self, device: DeviceId) -> NtStatus {
        let _ = device;
        NtStatus::SUCCESS
    }
    /// `EvtDeviceQueryStop`: the driver's own veto of `IRP_MN_QUERY_STOP_DEVICE`, as
    /// [`Self::query_remove`].
    fn query_stop(&self, device: DeviceId) -> NtStatus {
        let _ = device;
        NtStatus::SUCCESS
    }
}

/// Which KMDF steps ran for one device (OS-side bookkeeping, not lifecycle state).
#[derive(Debug, Clone, Copy, Default)]
struct Steps {
    prepared: bool,
    d0: bool,
    io_init: bool,
    io_running: bool,
    removed: bool,
    /// `IRP_MN_SURPRISE_REMOVAL` came; `EvtDeviceSurpriseRemoval` not yet called.
    surprise: bool,
    /// The Dx the last accepted `IRP_MN_SET_POWER` asked for (the next power-down's).
    target: Option<WdfPowerDeviceState>,
    /// The Dx the device was sent to when it left D0 (what `D0Entry` reports).
    left: Option<WdfPowerDeviceState>,
}

/// The translation of the core's hardware commands into [`KmdfDevice`] callbacks.
pub(crate) struct Kmdf<K: Kernel> {
    evt: Arc<dyn KmdfDevice>,
    steps: K::Monitor<[Steps; DEVICES]>,
}

impl<K: Kernel> Kmdf<K> {
    pub(crate) fn new(evt: Arc<dyn KmdfDevice>) -> Self {
        Kmdf {
            evt,
            steps: Monitor::new([Steps::default(); DEVICES]),
        }
    }

    /// Read (and change) one device's steps.
    fn steps<R>(&self, device: DeviceId, f: impl FnOnce(&mut Steps) -> R) -> R {
        self.steps.with(|s| {
            let mut spare = Steps::default();
            f(s.get_mut(usize::from(device.0)).unwrap_or(&mut spare))
        })
    }

    /// `Start`: PrepareHardware (unless held) → D0Entry(D3Final) → SelfManagedIoInit (first
    /// start) or SelfManagedIoRestart (after a rebalance).
    pub(crate) fn start(&self, device: DeviceId) -> StartResult {
        let (evt, s) = (&self.evt, self.steps(device, |s| *s));
        if !s.prepared {
            if !evt.prepare_hardware(device).is_success() {
                // KMDF (`WdfDevStatePnpFailedOwnHardware`): ReleaseHardware undoes it.
                evt.release_hardware(device);
                return StartResult::FailedBeforeResources;
            }
            self.steps(device, |s| s.prepared = true);
        }
        if !evt
            .d0_entry(device, WdfPowerDeviceState::D3Final)
            .is_success()
        {
            return StartResult::FailedAfterResources;
        }
        self.steps(device, |s| s.d0 = true);
        let io = if s.io_init {
            evt.self_managed_io_restart(device)
        } else {
            self.steps(device, |s| s.io_init = true);
            evt.self_managed_io_init(device)
        };
        if !io.is_success() {
            return StartResult::FailedAfterResources;
        }
        self.steps(device, |s| s.io_running = true);
        StartResult::Started
    }

    /// Leave D0 for `target`: SelfManagedIoSuspend (unless done) → D0Exit (if in D0).
    fn leave_d0(&self, device: DeviceId, target: WdfPowerDeviceState) {
        if self.suspend_io(device).d0 {
            self.evt.d0_exit(device, target);
        }
    }

    /// SelfManagedIoSuspend if I/O still runs; the device counts as out of D0 from here.
    /// Returns the steps as they were.
    fn suspend_io(&self, device: DeviceId) -> Steps {
        let was = self.steps(device, |s| {
            let was = *s;
            (s.io_running, s.d0) = (false, false);
            was
        });
        if was.io_running {
            self.evt.self_managed_io_suspend(device);
        }
        was
    }

    /// `Shutdown` (stop or orderly removal, registers still reachable): leave D0 for
    /// D3Final.
    pub(crate) fn shutdown(&self, device: DeviceId) {
        self.leave_d0(device, WdfPowerDeviceState::D3Final);
    }

    /// An `IRP_MN_SET_POWER` to `target` was accepted by the core (called under the owner
    /// lock, before the power-down it may command is carried out).
    pub(crate) fn power_target(&self, device: DeviceId, target: WdfPowerDeviceState) {
        self.steps(device, |s| s.target = Some(target));
    }

    /// `IRP_MN_SURPRISE_REMOVAL` reached the core: `EvtDeviceSurpriseRemoval` comes first
    /// in the device's next release (or its removal, if nothing is released).
    pub(crate) fn surprise_removed(&self, device: DeviceId) {
        self.steps(device, |s| s.surprise = true);
    }

    /// The driver's own veto of a query (`EvtDeviceQueryRemove` / `QueryStop`), if any.
    pub(crate) fn veto(&self, device: DeviceId, stop: bool) -> Option<NtStatus> {
        let status = match stop {
            true => self.evt.query_stop(device),
            false => self.evt.query_remove(device),
        };
        (!status.is_success()).then_some(status)
    }

    /// `EvtDeviceSurpriseRemoval`, once per surprise removal.
    fn tell_surprise(&self, device: DeviceId) {
        if self.steps(device, |s| std::mem::take(&mut s.surprise)) {
            self.evt.surprise_removal(device);
        }
    }

    /// `PowerDown`: SelfManagedIoSuspend → D0Exit(the Dx asked for: D1, D2, D3, or
    /// D3Final for S5).
    pub(crate) fn power_down(&self, device: DeviceId) {
        let target = self.steps(device, |s| {
            let target = s.target.take().unwrap_or(WdfPowerDeviceState::D3);
            s.left = Some(target);
            target
        });
        self.leave_d0(device, target);
    }

    /// `PowerUp`: D0Entry(the Dx it left) → SelfManagedIoRestart.
    pub(crate) fn power_up(&self, device: DeviceId) -> PowerUpResult {
        let evt = &self.evt;
        let left = self.steps(device, |s| s.left.take());
        if !evt
            .d0_entry(device, left.unwrap_or(WdfPowerDeviceState::D3))
            .is_success()
        {
            return PowerUpResult::Failed;
        }
        self.steps(device, |s| s.d0 = true);
        let lost = evt.context_lost(device);
        if !evt.self_managed_io_restart(device).is_success() {
            return PowerUpResult::Failed;
        }
        self.steps(device, |s| s.io_running = true);
        match lost {
            true => PowerUpResult::LostState,
            false => PowerUpResult::Powered,
        }
    }

    /// `ReleaseResources` (no register access): after a surprise removal
    /// SurpriseRemoval first; if the device is still in D0 (a surprise removal in D0: no
    /// `Shutdown` came) SelfManagedIoSuspend → D0Exit(D3Final), as KMDF; →
    /// ReleaseHardware; on a removed device, then Flush → Cleanup.
    pub(crate) fn release(&self, device: DeviceId) {
        self.tell_surprise(device);
        let s = self.steps(device, |s| *s);
        self.leave_d0(device, WdfPowerDeviceState::D3Final);
        if s.prepared {
            self.evt.release_hardware(device);
        }
        let finish = self.steps(device, |s| {
            s.prepared = false;
            s.removed.then(|| std::mem::take(s))
        });
        self.finish(device, finish);
    }

    /// The core removed the device: Flush → Cleanup once its hardware is released (now, or
    /// when the `ReleaseResources` still on its way has run). With `wait` (the completion
    /// of `IRP_MN_REMOVE_DEVICE`, which the core orders behind the teardown), wait for that
    /// release first, so the IRP completes after Cleanup, as in KMDF.
    pub(crate) fn removed(&self, device: DeviceId, wait: bool) {
        self.tell_surprise(device);
        let slot = usize::from(device.0);
        if wait {
            self.steps
                .wait_until(|s| s.get(slot).is_none_or(|s| !s.prepared).then_some(()));
        }
        let finish = self.steps(device, |s| {
            s.removed = true;
            (!s.prepared).then(|| std::mem::take(s))
        });
        self.finish(device, finish);
    }

    fn finish(&self, device: DeviceId, was: Option<Steps>) {
        if was.is_some_and(|s| s.io_init) {
            self.evt.self_managed_io_flush(device);
            self.evt.self_managed_io_cleanup(device);
        }
    }
}
