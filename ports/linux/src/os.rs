//! The Linux vocabulary: `ib_client` callbacks, the driver's hardware hooks, PCI error
//! recovery's types, and [`LinuxOs`], which carries out the runtime's work in those words.
//! No lifecycle rule lives here: what a callback answers becomes a core input.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use pnp_lifecycle::{
    ClientHandle, ClientKind, CycleOutcome, DeviceId, Epoch, Event, FailureCause, HardwareCommand,
    Input, LinkState, PhysPort, PowerDownKind, PowerUpResult, ResetResult, StartResult,
};
use pnp_lifecycle_runtime::{Completion, GroupReset, News, Os};

use crate::group::SyncResetAnswer;

/// Devices one driver can own.
pub const MAX_DEVICES: usize = 2;
/// Core client slots per device.
pub const MAX_CLIENTS: usize = 8;
/// Physical (IB) ports per device.
pub const MAX_PORTS: usize = 2;

/// An `ib_register_client` registration (or an opened uverbs context), never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientId(pub u32);

/// Why a client's `remove` callback runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoveCause {
    /// The device goes away (PCI remove, module unload); `surprise` for a hot unplug or
    /// `pci_channel_io_perm_failure`.
    DeviceRemoved {
        /// Whether the hardware vanished.
        surprise: bool,
    },
    /// The client itself called `ib_unregister_client`.
    ClientUnregistered,
}

/// An IB asynchronous event (`struct ib_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IbEvent {
    /// `IB_EVENT_PORT_ACTIVE`: the port reached ACTIVE.
    PortActive(PhysPort),
    /// `IB_EVENT_PORT_ERR`: the port left ACTIVE (now DOWN, INIT or ARMED).
    PortErr(PhysPort),
    /// `IB_EVENT_DEVICE_FATAL`: the device failed; only removal follows.
    DeviceFatal,
}

impl IbEvent {
    /// The Linux constant's name.
    pub fn linux_name(&self) -> &'static str {
        match self {
            IbEvent::PortActive(_) => "IB_EVENT_PORT_ACTIVE",
            IbEvent::PortErr(_) => "IB_EVENT_PORT_ERR",
            IbEvent::DeviceFatal => "IB_EVENT_DEVICE_FATAL",
        }
    }
}

/// `pci_channel_state_t`, the argument of `error_detected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PciChannelState {
    /// `pci_channel_io_normal`: the link still works; a reset is wanted.
    Normal,
    /// `pci_channel_io_frozen`: MMIO is blocked until a slot reset.
    Frozen,
    /// `pci_channel_io_perm_failure`: the device is dead (surprise removal).
    PermFailure,
}

/// `pci_ers_result_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PciErsResult {
    /// `PCI_ERS_RESULT_NONE`: from a client: no vote yet, it answers later.
    None,
    /// `PCI_ERS_RESULT_CAN_RECOVER`: quiesced, no reset needed.
    CanRecover,
    /// `PCI_ERS_RESULT_NEED_RESET`: quiesced, a reset is needed.
    NeedReset,
    /// `PCI_ERS_RESULT_DISCONNECT`: give up on the device (from a client: detach).
    Disconnect,
    /// `PCI_ERS_RESULT_RECOVERED`: the device works again.
    Recovered,
}

impl PciErsResult {
    /// The Linux constant's name.
    pub fn linux_name(&self) -> &'static str {
        match self {
            PciErsResult::None => "PCI_ERS_RESULT_NONE",
            PciErsResult::CanRecover => "PCI_ERS_RESULT_CAN_RECOVER",
            PciErsResult::NeedReset => "PCI_ERS_RESULT_NEED_RESET",
            PciErsResult::Disconnect => "PCI_ERS_RESULT_DISCONNECT",
            PciErsResult::Recovered => "PCI_ERS_RESULT_RECOVERED",
        }
    }
}

/// A `dev_pm_ops` callback the PM core calls: system sleep (suspend-to-RAM, and the
/// hibernation phases) and runtime PM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmOp {
    /// `suspend` (suspend-to-RAM): `PowerDown { SystemSleep }`.
    Suspend,
    /// `freeze`: as `suspend` (the image is written with the device quiet).
    Freeze,
    /// `poweroff`: as `suspend`.
    Poweroff,
    /// `runtime_suspend` (after `runtime_idle` said idle): `PowerDown { Idle }`.
    RuntimeSuspend,
    /// `resume`: `PowerUp`.
    Resume,
    /// `thaw`: as `resume`.
    Thaw,
    /// `restore` (from the hibernation image; state is typically lost): as `resume`.
    Restore,
    /// `runtime_resume`: as `resume`.
    RuntimeResume,
}

impl PmOp {
    /// The power-down it asks for, `None` for a power-up.
    pub fn power_down(self) -> Option<PowerDownKind> {
        match self {
            PmOp::Suspend | PmOp::Freeze | PmOp::Poweroff => Some(PowerDownKind::SystemSleep),
            PmOp::RuntimeSuspend => Some(PowerDownKind::Idle),
            _ => None,
        }
    }
}

/// A client's callbacks (`struct ib_client` and its event handler). Never called with a
/// lock held, never two at once for one attachment; a blocking entry point of the driver
/// called from one returns `EDEADLK`.
pub trait IbClient: Send + Sync {
    /// `add(struct ib_device *)`: attached to `dev`.
    fn add(&self, dev: DeviceId);
    /// `remove(struct ib_device *, void *)`: the last callback for `dev`; returning detaches.
    fn remove(&self, dev: DeviceId, cause: RemoveCause);
    /// `RESET` of a reset cycle, shaped as `error_detected`: quiesce, then vote.
    /// `NeedReset` acks, `CanRecover` answers that no reset may be needed: its vote is
    /// its [`Self::mmio_enabled`] answer if every voter said so, else it acks needing no
    /// reset (the others' reset runs); in a function reset it acks like `NeedReset`.
    /// `None` votes later ([`crate::Driver::reset_ack`] / [`crate::Driver::recover_ack`]),
    /// `Disconnect` detaches from `dev`.
    fn error_detected(&self, dev: DeviceId) -> PciErsResult {
        let _ = dev;
        PciErsResult::NeedReset
    }
    /// `mmio_enabled` (after every client answered `CAN_RECOVER` and MMIO works again,
    /// before any `resume`): `RECOVERED` (or `CAN_RECOVER`) votes no reset, `NEED_RESET`
    /// makes the cycle reset the device (`slot_reset` follows, then `resume` with a new
    /// epoch), `NONE` votes later, `DISCONNECT` detaches from `dev`.
    fn mmio_enabled(&self, dev: DeviceId) -> PciErsResult {
        let _ = dev;
        PciErsResult::Recovered
    }
    /// `resume`: the device is back at `epoch` (after a reset: a new interface; after a
    /// cycle every voter could recover from: the same one).
    fn resume(&self, dev: DeviceId, epoch: Epoch) {
        let _ = (dev, epoch);
    }
    /// An asynchronous event (`ib_event_handler`).
    fn event(&self, dev: DeviceId, event: IbEvent) {
        let _ = (dev, event);
    }
    /// uverbs disassociate: the context was revoked; the last callback for `dev`, and
    /// every later call on it fails with `EIO`.
    fn disassociate(&self, dev: DeviceId) {
        let _ = dev;
    }
    /// The device is going to a low-power state (runtime or system suspend); hardware
    /// calls are drained first. `ib_core` has no such callback: RDMA providers instead
    /// unregister the `ib_device` on system suspend (clients get `remove`, then `add`).
    fn suspending(&self, dev: DeviceId, kind: PowerDownKind) {
        let _ = (dev, kind);
    }
    /// Back in D0 at `epoch`. With `state_lost` the device lost its state (a new
    /// interface, as after a reset): the default calls [`Self::resume`].
    fn resumed(&self, dev: DeviceId, epoch: Epoch, state_lost: bool) {
        if state_lost {
            self.resume(dev, epoch);
        }
    }
    /// `RESET` of an mlx5 sync reset ([`crate::Driver::fw_reset_sync`]) instead of
    /// `error_detected`: quiesce and ack, or nack (no function of the group resets).
    fn sync_reset_request(&self, dev: DeviceId) -> SyncResetAnswer {
        let _ = dev;
        SyncResetAnswer::Ack
    }
    /// Not a callback: the context on `dev` was fenced (disassociated while a callback or
    /// operation of it ran: that one returned, or, with `overran`, still runs past the
    /// grace and reaches nothing). Nothing else follows for `dev`. Must not block.
    fn disassociated(&self, dev: DeviceId, overran: bool) {
        let _ = (dev, overran);
    }
}

/// The driver's hardware hooks, called outside any lock.
pub trait Hardware: Send + Sync {
    /// Probe-time start (claim BARs and IRQs, bring the firmware up).
    fn start(&self, dev: DeviceId) -> StartResult {
        let _ = dev;
        StartResult::Started
    }
    /// Re-initialise after the slot or function reset (`slot_reset`, `reset_done`).
    fn reset(&self, dev: DeviceId) -> ResetResult {
        let _ = dev;
        ResetResult::Succeeded
    }
    /// `dev_pm_ops` power-down (save state, enter Dx); no hardware operation is in flight.
    fn power_down(&self, dev: DeviceId) {
        let _ = dev;
    }
    /// `dev_pm_ops` power-up (enter D0, restore state): whether the state survived.
    fn power_up(&self, dev: DeviceId) -> PowerUpResult {
        let _ = dev;
        PowerUpResult::Powered
    }
    /// mlx5's sync reset, on every function it covers: unload (`mlx5_unload_one`) before
    /// the reset; [`Self::reset`] reloads after it.
    fn fw_reset_unload(&self, dev: DeviceId) {
        let _ = dev;
    }
    /// mlx5's sync reset, once, on the function that carries it: the reset itself (the
    /// PCI link toggle).
    fn fw_reset_now(&self, dev: DeviceId) {
        let _ = dev;
    }
    /// `Shutdown` / `ReleaseResources` (fire and forget).
    fn command(&self, dev: DeviceId, command: HardwareCommand) {
        let _ = (dev, command);
    }
}

/// Hardware on which everything succeeds.
#[derive(Debug, Default)]
pub struct NullHardware;
impl Hardware for NullHardware {}

/// A PCI request (probe's start, remove) the machine completes later; clones share it.
#[derive(Debug, Clone, Default)]
pub struct Pending(Arc<OnceLock<Completion>>);

impl Pending {
    /// How it ended, once it did.
    pub fn completion(&self) -> Option<Completion> {
        self.0.get().copied()
    }
}

/// The port's own work, ordered with the machine's, each in its attachment's lane.
#[derive(Debug, Clone, Copy)]
pub enum Job {
    /// `client->add(ibdev)` for a new attachment.
    Add {
        /// The registration.
        client: ClientId,
        /// The attachment.
        handle: ClientHandle,
    },
    /// `client->remove(ibdev)` owed by `ib_unregister_client`; its return feeds
    /// `Unregister`, so removal and unload wait for it as for any callback.
    Remove {
        /// The attachment.
        handle: ClientHandle,
    },
    /// `mmio_enabled` of a client that answered `CAN_RECOVER`: its answer is its vote.
    MmioEnabled {
        /// The attachment.
        handle: ClientHandle,
    },
}

/// Kernel log lines kept (`dmesg`), the oldest dropped first.
pub const KERNEL_LOG_LINES: usize = 64;

/// One registration's attachment to a device.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attachment {
    pub(crate) handle: ClientHandle,
    /// The interface the context holds: its own object, handed to it with `add` and
    /// `resume` and shown with every hardware access, as a verbs context holds its
    /// `ib_ucontext`. The core keeps the device's epoch; this is which one the context
    /// uses (stale after a reset until its `resume` ran).
    pub(crate) epoch: Epoch,
    /// `add` ran (so `remove` is owed on unregister).
    pub(crate) added: bool,
    /// Its one `remove` ran (the device's, or `ib_unregister_client`'s, or none was
    /// owed): nothing more reaches the client on this device; the other only detaches.
    pub(crate) unhooked: bool,
    /// It answered `CAN_RECOVER` in this cycle and its vote is not fed yet: the
    /// driver's `mmio_enabled` asks it again, or `slot_reset` feeds it as it stands.
    pub(crate) mmio_owed: bool,
    /// Its `mmio_enabled` answer, for the driver's `mmio_enabled` to feed (under the
    /// runtime's lock, where a vote the cycle no longer wants is simply refused).
    pub(crate) mmio_answer: Option<PciErsResult>,
}

/// An `ib_client` registration.
pub(crate) struct Registration {
    pub(crate) id: ClientId,
    pub(crate) ops: Arc<dyn IbClient>,
    pub(crate) kind: ClientKind,
    /// Not yet unregistered.
    pub(crate) live: bool,
    pub(crate) at: [Option<Attachment>; MAX_DEVICES],
}

/// What the PCI core did with a device that the machine does not know.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PciDev {
    /// Physical ports, as probed.
    pub(crate) ports: u8,
    /// A function reset (`reset_prepare`) runs: the reset happens whatever clients vote.
    pub(crate) forced: bool,
    /// `slot_reset` / `reset_prepare` took the commanded reset; its report is owed
    /// (`resume`, `reset_done`, or remove).
    pub(crate) claimed: bool,
    /// The machine's reset command was carried out (in the device's lane).
    pub(crate) ordered: bool,
    /// The reset group's reset that covers this function was commanded through this
    /// carrier; the function's report goes to it (`crate::group::reset_report`).
    pub(crate) carrier: Option<DeviceId>,
    /// devlink's `enable_remote_dev_reset` is off: the function nacks sync resets.
    pub(crate) no_remote_reset: bool,
    /// An mlx5 sync-reset request runs on the function's group (not PCI recovery).
    pub(crate) sync_reset: bool,
    /// How the function's last sync-reset cycle ended.
    pub(crate) outcome: Option<CycleOutcome>,
}

/// The port's own state: the `ib_client` registry, the PCI core's side of each device
/// and the kernel log. Behind the port lock (see [`LinuxOs`] for its place in the lock
/// order).
#[derive(Default)]
pub(crate) struct PortState {
    pub(crate) clients: Vec<Registration>,
    pub(crate) next_client: u32,
    pub(crate) devs: [PciDev; MAX_DEVICES],
    pub(crate) log: VecDeque<String>,
}

impl PortState {
    pub(crate) fn reg(&mut self, id: ClientId) -> Option<&mut Registration> {
        self.clients.iter_mut().find(|c| c.id == id)
    }

    /// The registration owning attachment `h`, and the attachment.
    fn attachment(&mut self, h: ClientHandle) -> Option<(Arc<dyn IbClient>, &mut Attachment)> {
        let d = usize::from(h.device.0) % MAX_DEVICES;
        let mut at = self
            .clients
            .iter_mut()
            .map(|r| (r.ops.clone(), &mut r.at[d]));
        at.find_map(|(ops, a)| a.as_mut().filter(|a| a.handle == h).map(|a| (ops, a)))
    }

    /// Attachment `h`.
    pub(crate) fn reg_of(&mut self, h: ClientHandle) -> Option<&mut Attachment> {
        self.attachment(h).map(|(_, a)| a)
    }

    /// The attachments to `dev` (device index `d`).
    pub(crate) fn attachments(&mut self, d: usize) -> impl Iterator<Item = &mut Attachment> {
        self.clients
            .iter_mut()
            .filter_map(move |r| r.at[d].as_mut())
    }
}

impl std::fmt::Debug for PortState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<ClientId> = self.clients.iter().map(|r| r.id).collect();
        f.debug_struct("PortState")
            .field("clients", &ids)
            .field("devs", &self.devs)
            .field("log_lines", &self.log.len())
            .finish()
    }
}

std::thread_local! {
    /// Whether this thread is inside [`LinuxOs::port`].
    static IN_PORT_LOCK: Cell<bool> = const { Cell::new(false) };
}

/// The Linux vocabulary the runtime carries work out in.
///
/// Lock order: the port lock (its `ib_client` registry and PCI state) is a leaf. It is
/// taken on its own (by the work the runtime carries out, outside the runtime's lock) or
/// inside the runtime's lock (by the driver's entry points), held only while its state is
/// read or written, and nothing is called and no other lock taken while it is held: the
/// runtime's lock is never taken inside it. [`LinuxOs::port_lock_held`] lets a test
/// kernel check that on every acquisition of the runtime's lock.
pub struct LinuxOs {
    hw: Arc<dyn Hardware>,
    state: Mutex<PortState>,
}

impl std::fmt::Debug for LinuxOs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinuxOs")
            .field(
                "state",
                &*self.state.lock().unwrap_or_else(PoisonError::into_inner),
            )
            .finish_non_exhaustive()
    }
}

impl LinuxOs {
    /// A port over `hw`, with no client.
    pub fn new(hw: Arc<dyn Hardware>) -> Self {
        LinuxOs {
            hw,
            state: Mutex::new(PortState::default()),
        }
    }

    /// The hardware hooks (not [`Os::hardware`], which carries out a machine command).
    pub fn hooks(&self) -> &dyn Hardware {
        &*self.hw
    }

    /// The kernel log (`dmesg`), oldest first, at most [`KERNEL_LOG_LINES`] lines.
    pub fn kernel_log(&self) -> Vec<String> {
        self.port(|s| s.log.iter().cloned().collect())
    }

    /// Whether the calling thread holds the port lock: a lock-order check asks this each
    /// time the runtime's lock is taken (it must be `false`: see [`LinuxOs`]).
    pub fn port_lock_held() -> bool {
        IN_PORT_LOCK.with(Cell::get)
    }

    /// Run `f` on the port's state under the port lock (a leaf: `f` only reads and
    /// writes the state).
    pub(crate) fn port<R>(&self, f: impl FnOnce(&mut PortState) -> R) -> R {
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let was = IN_PORT_LOCK.with(|held| held.replace(true));
        let result = f(&mut guard);
        IN_PORT_LOCK.with(|held| held.set(was));
        result
    }
}

/// The text of a failure cause, as the port logs it.
pub fn failure_text(cause: FailureCause) -> &'static str {
    match cause {
        FailureCause::StartFailed => "the hardware start failed",
        FailureCause::ResetFailed => "the hardware reset failed",
        FailureCause::ClientMissedDeadline => "a trusted client missed its deadline",
        FailureCause::EpochExhausted => "the reset epoch counter is exhausted",
        _ => "an unknown cause",
    }
}

impl Os for LinuxOs {
    type Callback = Arc<dyn IbClient>;
    type Request = Pending;
    type Job = Job;

    fn call(&self, ops: &Arc<dyn IbClient>, client: ClientHandle, event: Event) -> Option<Input> {
        let dev = client.device;
        // Exactly one `remove` per (client, device): the device's or the unregister's.
        let removed = matches!(event, Event::Removed { .. });
        let unhooked = self.port(|s| {
            s.attachment(client).is_some_and(|(_, a)| {
                let was = a.unhooked;
                a.unhooked |= removed;
                was
            })
        });
        if unhooked {
            return Some(Input::Unregister { client }); // its remove already ran
        }
        match event {
            Event::Reset => {
                if let Some(vote) = crate::group::sync_reset_vote(self, &**ops, client) {
                    return vote; // mlx5's reset-request event
                }
                let vote = ops.error_detected(dev);
                // CAN_RECOVER outside a function reset: `mmio_enabled` asks again (its
                // answer is the vote), or `slot_reset` feeds it as it stands.
                let owed = self.port(|s| {
                    let forced = s.devs[usize::from(dev.0) % MAX_DEVICES].forced;
                    let owed = vote == PciErsResult::CanRecover && !forced;
                    if let Some((_, a)) = s.attachment(client) {
                        a.mmio_owed = owed;
                    }
                    owed
                });
                match vote {
                    PciErsResult::CanRecover if owed => None,
                    PciErsResult::NeedReset
                    | PciErsResult::CanRecover
                    | PciErsResult::Recovered => Some(Input::ResetExecute { client }),
                    PciErsResult::Disconnect => Some(Input::Unregister { client }),
                    PciErsResult::None => None,
                }
            }
            Event::ResetEnd { epoch }
            | Event::Resumed {
                epoch,
                state_lost: true,
            } => {
                self.port(|s| {
                    if let Some((_, a)) = s.attachment(client) {
                        a.epoch = epoch; // the context's interface is the new one
                    }
                });
                match event {
                    Event::ResetEnd { .. } => ops.resume(dev, epoch),
                    _ => ops.resumed(dev, epoch, true),
                }
                Some(Input::AcquireInterface { client })
            }
            Event::Resumed { epoch, .. } => {
                ops.resumed(dev, epoch, false);
                None
            }
            Event::Suspending { kind } => {
                ops.suspending(dev, kind);
                None
            }
            Event::Recovered { epoch } => {
                ops.resume(dev, epoch);
                None
            }
            Event::LinkChanged { port, state } => {
                let event = match state {
                    LinkState::Active => IbEvent::PortActive(port),
                    _ => IbEvent::PortErr(port),
                };
                ops.event(dev, event);
                None
            }
            Event::DeviceFatal => {
                ops.event(dev, IbEvent::DeviceFatal);
                None
            }
            Event::Removed { surprise } => {
                ops.remove(dev, RemoveCause::DeviceRemoved { surprise });
                Some(Input::Unregister { client }) // returning from remove() detaches
            }
            Event::Revoked => {
                ops.disassociate(dev);
                None
            }
            // Clients are added to probed devices only: never a start or stop event.
            Event::DeviceStarted { .. } | Event::DeviceStopped => None,
        }
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        match command {
            HardwareCommand::Start => Some(Input::StartDone {
                device,
                result: self.hw.start(device),
            }),
            // The PCI core runs it (`slot_reset`, or the function reset and `reset_done`),
            // once this item, behind the news of fences it waited for, was carried out.
            HardwareCommand::Reset => {
                if let Some(done) = crate::group::sync_reset(self, device, &[device]) {
                    return Some(done); // mlx5's sync reset of a lone function
                }
                self.port(|s| s.devs[usize::from(device.0) % MAX_DEVICES].ordered = true);
                None
            }
            HardwareCommand::PowerDown => {
                self.hw.power_down(device);
                Some(Input::PowerDownDone { device })
            }
            HardwareCommand::PowerUp => Some(Input::PowerUpDone {
                device,
                result: self.hw.power_up(device),
            }),
            _ => {
                self.hw.command(device, command);
                None
            }
        }
    }

    fn group_reset(&self, reset: &GroupReset) -> Option<Input> {
        crate::group::group_reset(self, reset)
    }

    fn complete(&self, request: Pending, completion: Completion) {
        let _ = request.0.set(completion);
    }

    fn job(&self, job: Job) -> Option<Input> {
        let (client, handle) = match job {
            Job::Add { client, handle } => (client, handle),
            Job::MmioEnabled { handle } => {
                let ops = self.port(|s| {
                    let (ops, a) = s.attachment(handle)?;
                    (!a.unhooked).then_some(ops)
                })?;
                let answer = ops.mmio_enabled(handle.device);
                self.port(|s| {
                    if let Some((_, a)) = s.attachment(handle) {
                        a.mmio_answer = Some(answer);
                    }
                });
                return None;
            }
            Job::Remove { handle } => {
                let owed = self.port(|s| {
                    s.attachment(handle).map(|(ops, a)| {
                        let first = !std::mem::replace(&mut a.unhooked, true);
                        (first, (first && a.added).then_some(ops))
                    })
                });
                // The device's `remove` ran first: it detached the client.
                let Some((true, ops)) = owed else { return None };
                if let Some(ops) = ops {
                    ops.remove(handle.device, RemoveCause::ClientUnregistered);
                }
                return Some(Input::Unregister { client: handle });
            }
        };
        let dev = handle.device;
        let ops = self.port(|s| {
            let r = s.reg(client)?;
            // Unregistered before its add ran: no add, so no remove either.
            let live = r.live && r.at[usize::from(dev.0)].is_some_and(|a| a.handle == handle);
            if live {
                r.at[usize::from(dev.0)].as_mut()?.added = true;
            }
            live.then(|| r.ops.clone())
        });
        if let Some(ops) = ops {
            ops.add(dev);
        }
        None
    }

    /// `add` and the owed `remove` run in their attachment's lane: in order with its
    /// callbacks, never beside one, and cancelled by its fence.
    fn job_client(job: &Job) -> Option<ClientHandle> {
        match job {
            Job::Add { handle, .. } | Job::Remove { handle } | Job::MmioEnabled { handle } => {
                Some(*handle)
            }
        }
    }

    fn news(&self, news: News) {
        match news {
            News::Fenced { client, overran } => {
                let ops = self.port(|s| s.attachment(client).map(|(ops, _)| ops));
                if let Some(ops) = ops {
                    ops.disassociated(client.device, overran);
                }
            }
            News::DeviceFailed { device, cause } => {
                // dev_err(): the PCI error path answers DISCONNECT until removal.
                let line = format!(
                    "pnp-lifecycle {}: device failed: {} ({cause:?}); PCI error recovery \
                     answers DISCONNECT until removal",
                    device.0,
                    failure_text(cause)
                );
                self.port(|s| {
                    if s.log.len() == KERNEL_LOG_LINES {
                        s.log.pop_front();
                    }
                    s.log.push_back(line);
                });
            }
            News::CycleFinished { device, outcome } => {
                self.port(|s| crate::group::cycle_finished(s, device, outcome));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a lock-order check asks: true inside the port lock only, nested calls
    /// restoring it (the check in `tests/lock_order.rs` relies on it).
    #[test]
    fn port_lock_held_is_true_inside_the_port_lock_only() {
        let os = LinuxOs::new(Arc::new(NullHardware));
        assert!(!LinuxOs::port_lock_held());
        let inside = os.port(|_| LinuxOs::port_lock_held());
        assert!(inside);
        assert!(!LinuxOs::port_lock_held());
        let other = std::thread::spawn(LinuxOs::port_lock_held);
        let seen_elsewhere = os.port(|_| other.join().unwrap());
        assert!(!seen_elsewhere, "per thread");
    }
}
