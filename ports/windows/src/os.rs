//! The Windows vocabulary the runtime carries out: IRPs as its requests, client callbacks,
//! the hardware, and the PnP dispatch's non-blocking half ([`feed_irp`]).

use std::marker::PhantomData;
use std::sync::Arc;

use pnp_lifecycle::{
    ClientHandle, DeviceId, Event, HardwareCommand, Input, PowerUpResult, RequestToken,
    ResetResult, StartResult, Status, Tick,
};
use pnp_lifecycle_runtime::{Completion, Kernel, Monitor, News, Os, StdKernel};

use crate::power::{Kmdf, KmdfDevice, PowerState};
use crate::{NtStatus, WinOwner};

/// The minor codes the dispatch handles (`IRP_MN_*`): `IRP_MJ_PNP`'s, and `IRP_MJ_POWER`'s
/// ([`Self::SetPower`], [`Self::QueryPower`]; see [`crate::Driver::dispatch_power`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PnpMinor {
    /// `IRP_MN_START_DEVICE`
    StartDevice,
    /// `IRP_MN_QUERY_REMOVE_DEVICE`
    QueryRemoveDevice,
    /// `IRP_MN_CANCEL_REMOVE_DEVICE`
    CancelRemoveDevice,
    /// `IRP_MN_REMOVE_DEVICE`
    RemoveDevice,
    /// `IRP_MN_SURPRISE_REMOVAL`
    SurpriseRemoval,
    /// `IRP_MN_QUERY_STOP_DEVICE`
    QueryStopDevice,
    /// `IRP_MN_STOP_DEVICE`
    StopDevice,
    /// `IRP_MN_CANCEL_STOP_DEVICE`
    CancelStopDevice,
    /// `IRP_MN_SET_POWER` (`IRP_MJ_POWER`) to a system or device power state.
    SetPower(PowerState),
    /// `IRP_MN_QUERY_POWER` (`IRP_MJ_POWER`): may the device go to this state?
    QueryPower(PowerState),
}

impl PnpMinor {
    /// The Windows name of the minor code.
    pub const fn name(self) -> &'static str {
        match self {
            PnpMinor::StartDevice => "IRP_MN_START_DEVICE",
            PnpMinor::QueryRemoveDevice => "IRP_MN_QUERY_REMOVE_DEVICE",
            PnpMinor::CancelRemoveDevice => "IRP_MN_CANCEL_REMOVE_DEVICE",
            PnpMinor::RemoveDevice => "IRP_MN_REMOVE_DEVICE",
            PnpMinor::SurpriseRemoval => "IRP_MN_SURPRISE_REMOVAL",
            PnpMinor::QueryStopDevice => "IRP_MN_QUERY_STOP_DEVICE",
            PnpMinor::StopDevice => "IRP_MN_STOP_DEVICE",
            PnpMinor::CancelStopDevice => "IRP_MN_CANCEL_STOP_DEVICE",
            PnpMinor::SetPower(_) => "IRP_MN_SET_POWER",
            PnpMinor::QueryPower(_) => "IRP_MN_QUERY_POWER",
        }
    }

    /// Whether it is an `IRP_MJ_POWER` minor code.
    pub const fn is_power(self) -> bool {
        matches!(self, PnpMinor::SetPower(_) | PnpMinor::QueryPower(_))
    }

    /// The core input for this request (surprise removal has no token in the core;
    /// `IRP_MN_QUERY_POWER` has none: it is answered from the core's state).
    pub const fn input(self, device: DeviceId, token: RequestToken) -> Option<Input> {
        Some(match self {
            PnpMinor::StartDevice => Input::Start { device, token },
            PnpMinor::QueryRemoveDevice => Input::QueryRemove { device, token },
            PnpMinor::CancelRemoveDevice => Input::CancelRemove { device, token },
            PnpMinor::RemoveDevice => Input::Remove { device, token },
            PnpMinor::SurpriseRemoval => Input::SurpriseRemoval { device },
            PnpMinor::QueryStopDevice => Input::QueryStop { device, token },
            PnpMinor::StopDevice => Input::Stop { device, token },
            PnpMinor::CancelStopDevice => Input::CancelStop { device, token },
            PnpMinor::SetPower(state) => state.input(device, token),
            PnpMinor::QueryPower(_) => return None,
        })
    }
}

/// A device's `PNP_DEVICE_STATE` bits, as `IRP_MN_QUERY_PNP_DEVICE_STATE` answers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PnpDeviceState(pub u32);

impl PnpDeviceState {
    /// No bit set: the device works.
    pub const NONE: PnpDeviceState = PnpDeviceState(0);
    /// `PNP_DEVICE_FAILED`: the PnP manager stops the device and sends it remove.
    pub const FAILED: PnpDeviceState = PnpDeviceState(0x0000_0004);

    /// Whether `PNP_DEVICE_FAILED` is set.
    pub const fn failed(self) -> bool {
        self.0 & Self::FAILED.0 != 0
    }
}

#[derive(Debug, Default)]
struct IrpSlot {
    status: Option<NtStatus>,
    completions: u32,
}

/// An I/O request packet of `IRP_MJ_PNP`: the runtime's request, completed exactly once.
pub struct Irp<K: Kernel = StdKernel> {
    /// The device it targets.
    pub device: DeviceId,
    /// `IRP_MN_*`.
    pub minor: PnpMinor,
    /// The caller's own number for it (logs and tests). Not the core's token: the runtime
    /// mints that, so two IRPs carrying the same number both reach the core.
    pub token: u32,
    slot: K::Monitor<IrpSlot>,
}

impl<K: Kernel> Irp<K> {
    /// A new IRP.
    pub fn new(device: DeviceId, minor: PnpMinor, token: u32) -> Arc<Self> {
        Arc::new(Irp {
            device,
            minor,
            token,
            slot: Monitor::new(IrpSlot::default()),
        })
    }

    /// `IoCompleteRequest`. A second completion is counted, and does not change the status.
    pub fn complete(&self, status: NtStatus) {
        self.slot.with(|s| {
            s.completions += 1;
            s.status.get_or_insert(status);
        });
    }

    /// The final status, if completed.
    pub fn status(&self) -> Option<NtStatus> {
        self.slot.with(|s| s.status)
    }

    /// How many times it was completed (exactly one is right).
    pub fn completions(&self) -> u32 {
        self.slot.with(|s| s.completions)
    }

    /// Block until completed; the final status.
    pub fn wait(&self) -> NtStatus {
        self.slot.wait_until(|s| s.status)
    }
}

impl<K: Kernel> std::fmt::Debug for Irp<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} #{} (device {})",
            self.minor.name(),
            self.token,
            self.device.0
        )
    }
}

/// A client's event callback (the mlx4 reset event handler), called on the notification
/// thread with no lock held. It may call into the driver; a blocking
/// [`crate::MlxInterface::unregister`] from inside it is refused with
/// `STATUS_POSSIBLE_DEADLOCK`.
pub type Callback = Arc<dyn Fn(Event) + Send + Sync>;

/// The hardware, and the OS calls the driver makes about it. Called with no lock held.
pub trait Hal: Send + Sync {
    /// Claim resources and start the device.
    fn start(&self, device: DeviceId) -> StartResult;
    /// Execute the hardware reset.
    fn reset(&self, device: DeviceId) -> ResetResult;
    /// Quiesce the hardware.
    fn shutdown(&self, device: DeviceId);
    /// Release resources.
    fn release(&self, device: DeviceId);
    /// A client's hardware operation (under the remove lock and the core's grant).
    fn client_op(&self, device: DeviceId, client: ClientHandle);
    /// Cut `client`'s path to the hardware: unmap its doorbell pages and BAR window (as
    /// uverbs' disassociate zaps a process's mappings), so that whatever of its code still
    /// runs reaches nothing. Called once the core fenced the client (`FenceDone` fed), on
    /// the device's notification lane before any hardware command that fence let go ahead
    /// (a reset, a stop, the teardown). When it returns, no access of `client` may reach
    /// the device any more.
    fn cut_client(&self, device: DeviceId, client: ClientHandle);
    /// `IoInvalidateDeviceState`: the device failed; the PnP manager will send
    /// `IRP_MN_QUERY_PNP_DEVICE_STATE`. Default: nothing.
    fn invalidate_device_state(&self, device: DeviceId) {
        let _ = device;
    }
}

/// An [`Os`] speaking this port's vocabulary: [`WindowsOs`], or a wrapper of it (which
/// hands out the [`WindowsOs`] it wraps, so the dispatch can reach the KMDF callbacks).
pub trait WindowsVocabulary<K: Kernel>: Os<Callback = Callback, Request = Arc<Irp<K>>> {
    /// The [`WindowsOs`] at the bottom of the wrappers.
    fn windows(&self) -> &WindowsOs<K>;
}

impl<K: Kernel> WindowsVocabulary<K> for WindowsOs<K> {
    fn windows(&self) -> &WindowsOs<K> {
        self
    }
}

/// What the runtime's notification thread carries out, in Windows terms.
pub struct WindowsOs<K: Kernel = StdKernel> {
    hal: Arc<dyn Hal>,
    kmdf: Option<Kmdf<K>>,
    kernel: PhantomData<fn() -> K>,
}

impl<K: Kernel> std::fmt::Debug for WindowsOs<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowsOs")
            .field("kmdf", &self.kmdf.is_some())
            .finish_non_exhaustive()
    }
}

impl<K: Kernel> WindowsOs<K> {
    /// The KMDF callbacks, if any.
    pub(crate) fn kmdf(&self) -> Option<&Kmdf<K>> {
        self.kmdf.as_ref()
    }

    /// The vocabulary over `hal`, without KMDF callbacks: start, shutdown and release are
    /// [`Hal`]'s, and the device keeps its power (a power command is done at once).
    pub fn new(hal: Arc<dyn Hal>) -> Self {
        WindowsOs {
            hal,
            kmdf: None,
            kernel: PhantomData,
        }
    }

    /// The vocabulary over `hal` (resets, client operations) and the driver writer's KMDF
    /// callbacks `evt` for start, power, stop and removal (README: the callback orders).
    pub fn with_kmdf(hal: Arc<dyn Hal>, evt: Arc<dyn KmdfDevice>) -> Self {
        WindowsOs {
            kmdf: Some(Kmdf::new(evt)),
            ..Self::new(hal)
        }
    }
}

impl<K: Kernel> Os for WindowsOs<K> {
    type Callback = Callback;
    type Request = Arc<Irp<K>>;
    type Job = ();

    /// The mlx4 interface has no other end of a reset than RESET_END: a cycle that ended
    /// without a hardware reset (`Recovered`) is RESET_END with the unchanged epoch.
    fn call(&self, callback: &Callback, _: ClientHandle, event: Event) -> Option<Input> {
        callback(match event {
            Event::Recovered { epoch } => Event::ResetEnd { epoch },
            other => other,
        });
        None
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        let (hal, kmdf) = (&self.hal, self.kmdf.as_ref());
        match command {
            HardwareCommand::Start => Some(Input::StartDone {
                device,
                result: kmdf.map_or_else(|| hal.start(device), |k| k.start(device)),
            }),
            HardwareCommand::Reset => Some(Input::ResetDone {
                device,
                result: hal.reset(device),
            }),
            HardwareCommand::Shutdown => {
                kmdf.map_or_else(|| hal.shutdown(device), |k| k.shutdown(device));
                None
            }
            HardwareCommand::ReleaseResources => {
                kmdf.map_or_else(|| hal.release(device), |k| k.release(device));
                None
            }
            HardwareCommand::PowerDown => {
                if let Some(k) = kmdf {
                    k.power_down(device);
                }
                Some(Input::PowerDownDone { device })
            }
            HardwareCommand::PowerUp => Some(Input::PowerUpDone {
                device,
                result: kmdf.map_or(PowerUpResult::Powered, |k| k.power_up(device)),
            }),
        }
    }

    /// A removal's `IRP_MN_REMOVE_DEVICE` completes after the KMDF flush and cleanup.
    fn complete(&self, irp: Arc<Irp<K>>, completion: Completion) {
        if let (Some(k), PnpMinor::RemoveDevice, Completion::Done(Status::Success)) =
            (&self.kmdf, irp.minor, completion)
        {
            k.removed(irp.device, true);
        }
        irp.complete(match completion {
            Completion::Done(status) => status.into(),
            Completion::Refused(error) => error.into(),
        });
    }

    fn news(&self, news: News) {
        match news {
            News::DeviceFailed { device, .. } => self.hal.invalidate_device_state(device),
            // The fence's news runs in the device's lane, before the hardware commands the
            // fence let go ahead: the client's path is cut before the hardware is touched.
            News::Fenced { client, .. } => self.hal.cut_client(client.device, client),
            News::DeviceRemoved { device } => {
                if let Some(k) = &self.kmdf {
                    k.removed(device, false);
                }
            }
            _ => {}
        }
    }
}

/// Hand a PnP IRP to the core (the dispatch's non-blocking half, under the owner lock): it
/// completes through the runtime, with the core's completion or its refusal. Surprise
/// removal has no token and is completed behind every output it caused;
/// `IRP_MN_QUERY_POWER` is answered at once from the core's state ([`PowerState::query`]).
/// Returns `STATUS_PENDING`, or the status it was completed with.
pub fn feed_irp<K: Kernel, O: WindowsVocabulary<K>>(
    owner: &mut WinOwner<O>,
    now: Tick,
    irp: Arc<Irp<K>>,
) -> NtStatus {
    let (device, minor) = (irp.device, irp.minor);
    match minor {
        PnpMinor::SurpriseRemoval => {
            owner.feed_then_complete(now, Input::SurpriseRemoval { device }, irp);
            return NtStatus::PENDING;
        }
        PnpMinor::QueryPower(state) => {
            let machine = owner.machine();
            let status = state.query(machine.phase(device), |kind| {
                machine.query_power_down(device, kind)
            });
            irp.complete(status);
            return status;
        }
        _ => {}
    }
    // Every minor code left has an input; `Timeout` is never fed in its place.
    let input = |token| minor.input(device, token).unwrap_or(Input::Timeout);
    match owner.submit(now, irp, input) {
        Ok(_) => NtStatus::PENDING,
        Err(error) => error.into(),
    }
}
