//! A recording driver writer's KMDF callbacks: each call is kept, in order, so a test can
//! assert KMDF's documented sequences; a `D0Entry` can be made to fail and a power-up to
//! report lost context.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use pnp_lifecycle::DeviceId;
use pnp_lifecycle_windows::{KmdfDevice, NtStatus, WdfPowerDeviceState};

/// One KMDF callback, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `EvtDevicePrepareHardware`.
    PrepareHardware,
    /// `EvtDeviceD0Entry(previous)`.
    D0Entry(WdfPowerDeviceState),
    /// `EvtDeviceSelfManagedIoInit`.
    SelfManagedIoInit,
    /// `EvtDeviceSelfManagedIoSuspend`.
    SelfManagedIoSuspend,
    /// `EvtDeviceSelfManagedIoRestart`.
    SelfManagedIoRestart,
    /// `EvtDeviceD0Exit(target)`.
    D0Exit(WdfPowerDeviceState),
    /// `EvtDeviceReleaseHardware`.
    ReleaseHardware,
    /// `EvtDeviceSelfManagedIoFlush`.
    SelfManagedIoFlush,
    /// `EvtDeviceSelfManagedIoCleanup`.
    SelfManagedIoCleanup,
    /// `EvtDeviceSurpriseRemoval`.
    SurpriseRemoval,
    /// `EvtDeviceQueryRemove`.
    QueryRemove,
    /// `EvtDeviceQueryStop`.
    QueryStop,
}

/// KMDF callbacks that record every call (any device) and may fail the next `D0Entry`.
#[derive(Debug, Default)]
pub struct KmdfRecorder {
    steps: Mutex<Vec<Step>>,
    fail_d0_entry: AtomicBool,
    fail_prepare: AtomicBool,
    veto_queries: AtomicBool,
    lose_context: AtomicBool,
    yields: usize,
}

impl KmdfRecorder {
    /// A recorder whose callbacks yield `yields` times under shuttle (0 outside it).
    pub fn new(yields: usize) -> Self {
        KmdfRecorder {
            yields,
            ..KmdfRecorder::default()
        }
    }

    /// Every callback so far, in order.
    pub fn steps(&self) -> Vec<Step> {
        self.steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Forget what was recorded (after a prologue the test does not assert).
    pub fn clear(&self) {
        self.steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The next `D0Entry` fails (`STATUS_DEVICE_HARDWARE_ERROR`).
    pub fn fail_next_d0_entry(&self) {
        self.fail_d0_entry.store(true, Ordering::SeqCst);
    }

    /// The next `PrepareHardware` fails (`STATUS_INSUFFICIENT_RESOURCES`-like: the
    /// recorder answers `STATUS_DEVICE_HARDWARE_ERROR`).
    pub fn fail_next_prepare(&self) {
        self.fail_prepare.store(true, Ordering::SeqCst);
    }

    /// `QueryRemove` / `QueryStop` veto (`STATUS_DEVICE_BUSY`) while `veto` holds.
    pub fn veto_queries(&self, veto: bool) {
        self.veto_queries.store(veto, Ordering::SeqCst);
    }

    /// Power-ups report lost context from now on.
    pub fn lose_context(&self) {
        self.lose_context.store(true, Ordering::SeqCst);
    }

    fn push(&self, step: Step) {
        self.steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(step);
        for _ in 0..self.yields {
            shuttle::thread::yield_now();
        }
    }
}

impl KmdfDevice for KmdfRecorder {
    fn prepare_hardware(&self, _: DeviceId) -> NtStatus {
        self.push(Step::PrepareHardware);
        match self.fail_prepare.swap(false, Ordering::SeqCst) {
            true => NtStatus::DEVICE_HARDWARE_ERROR,
            false => NtStatus::SUCCESS,
        }
    }
    fn d0_entry(&self, _: DeviceId, previous: WdfPowerDeviceState) -> NtStatus {
        self.push(Step::D0Entry(previous));
        match self.fail_d0_entry.swap(false, Ordering::SeqCst) {
            true => NtStatus::DEVICE_HARDWARE_ERROR,
            false => NtStatus::SUCCESS,
        }
    }
    fn context_lost(&self, _: DeviceId) -> bool {
        self.lose_context.load(Ordering::SeqCst)
    }
    fn self_managed_io_init(&self, _: DeviceId) -> NtStatus {
        self.push(Step::SelfManagedIoInit);
        NtStatus::SUCCESS
    }
    fn self_managed_io_suspend(&self, _: DeviceId) {
        self.push(Step::SelfManagedIoSuspend);
    }
    fn self_managed_io_restart(&self, _: DeviceId) -> NtStatus {
        self.push(Step::SelfManagedIoRestart);
        NtStatus::SUCCESS
    }
    fn d0_exit(&self, _: DeviceId, target: WdfPowerDeviceState) {
        self.push(Step::D0Exit(target));
    }
    fn release_hardware(&self, _: DeviceId) {
        self.push(Step::ReleaseHardware);
    }
    fn self_managed_io_flush(&self, _: DeviceId) {
        self.push(Step::SelfManagedIoFlush);
    }
    fn self_managed_io_cleanup(&self, _: DeviceId) {
        self.push(Step::SelfManagedIoCleanup);
    }
    fn surprise_removal(&self, _: DeviceId) {
        self.push(Step::SurpriseRemoval);
    }
    fn query_remove(&self, _: DeviceId) -> NtStatus {
        self.push(Step::QueryRemove);
        self.query_answer()
    }
    fn query_stop(&self, _: DeviceId) -> NtStatus {
        self.push(Step::QueryStop);
        self.query_answer()
    }
}

impl KmdfRecorder {
    fn query_answer(&self) -> NtStatus {
        match self.veto_queries.load(Ordering::SeqCst) {
            true => NtStatus::DEVICE_BUSY,
            false => NtStatus::SUCCESS,
        }
    }
}

/// Check a recorded callback sequence against KMDF's rules (any number of cycles): no
/// `PrepareHardware` while prepared (a failed one counts as prepared: KMDF releases it);
/// `D0Entry` only prepared and out of D0; I/O initialised once in D0, restarted only after
/// a suspend, suspended only while running; `D0Exit` only in D0 with I/O suspended;
/// `ReleaseHardware` only prepared with I/O suspended, and after a surprise removal in D0
/// only once `D0Exit` ran (a failed `D0Entry` is recorded like one that succeeded, so a
/// release after it is allowed); `SurpriseRemoval` at most once per removal, before the
/// `Flush`; `Flush` only released, then `Cleanup`; the queries anywhere.
pub fn check_order(steps: &[Step]) -> Result<(), String> {
    let (mut prepared, mut d0, mut init, mut running, mut flushed) =
        (false, false, false, false, false);
    let mut surprised = false;
    for (pos, step) in steps.iter().enumerate() {
        let ok = match step {
            Step::PrepareHardware => !prepared && !flushed,
            Step::D0Entry(_) => prepared && !d0,
            Step::SelfManagedIoInit => d0 && !init,
            Step::SelfManagedIoRestart => d0 && init && !running,
            Step::SelfManagedIoSuspend => running,
            Step::D0Exit(_) => d0 && !running,
            Step::ReleaseHardware => prepared && !running && !(surprised && d0),
            Step::SelfManagedIoFlush => init && !prepared && !flushed,
            Step::SelfManagedIoCleanup => flushed,
            Step::SurpriseRemoval => !surprised && !flushed,
            Step::QueryRemove | Step::QueryStop => true,
        };
        if !ok {
            return Err(format!("KMDF order: {step:?} at #{pos} in {steps:?}"));
        }
        match step {
            Step::PrepareHardware => (prepared, surprised) = (true, false),
            Step::D0Entry(_) => d0 = true,
            Step::SelfManagedIoInit | Step::SelfManagedIoRestart => (init, running) = (true, true),
            Step::SelfManagedIoSuspend => running = false,
            Step::D0Exit(_) => d0 = false,
            Step::ReleaseHardware => (prepared, d0) = (false, false),
            Step::SelfManagedIoFlush => flushed = true,
            Step::SelfManagedIoCleanup => (init, flushed, surprised) = (false, false, false),
            Step::SurpriseRemoval => surprised = true,
            Step::QueryRemove | Step::QueryStop => {}
        }
    }
    Ok(())
}
