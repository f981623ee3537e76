//! Reset groups (DESIGN.md "Reset groups", issue 23) in the kernel's words: the functions
//! of one chip or one slot declared one group, and the two anchors over the core's group
//! cycle.
//!
//! * **mlx5's synchronised firmware reset** (`mlx5/core/fw_reset.c`): a reset request
//!   ([`Driver::fw_reset_sync`], devlink's `fw_activate`) on one function is the
//!   group's cycle: the reset-request event reaches every function's clients as `RESET`
//!   ([`IbClient::sync_reset_request`]: ack or nack); a function whose
//!   `enable_remote_dev_reset` is off nacks for its clients
//!   ([`Driver::set_enable_remote_dev_reset`]). Once all acked, the one reset the
//!   machine commands through its carrier is carried out here: every covered function
//!   unloads ([`Hardware::fw_reset_unload`]), the carrier toggles the link once
//!   ([`Hardware::fw_reset_now`]), every function reloads ([`Hardware::reset`]). mlx5's
//!   timer for the whole is the machine's one group deadline.
//! * **PCI error recovery across the functions of one slot**: the PCI core calls
//!   `error_detected` on each function (the first one's is the group's request, the
//!   others' are the same slot error, not a second one), resets the slot once (the
//!   machine's command through the carrier lets it), then `slot_reset` and `resume` on
//!   each; the first `resume` reports the one reset, for the carrier.
//!
//! Which members take part, which carries the reset and when, and how the cycle ends are
//! the machine's: the port only says what the kernel said.

use pnp_lifecycle::{
    CannotResetReason, ClientHandle, ClientState, CycleOutcome, DeviceId, FatalAnswer, GroupId,
    Input, PhaseKind, Reply, ResetResult, Role,
};
use pnp_lifecycle_runtime::{GroupReset, Kernel};

use crate::driver::{Driver, LinuxOwner, LinuxPort};
use crate::errno::{Errno, LinuxError};
use crate::os::{ClientId, IbClient, LinuxOs, PciErsResult, PortState, MAX_DEVICES};

/// A client's answer to mlx5's sync-reset request ([`IbClient::sync_reset_request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncResetAnswer {
    /// Quiesced: the firmware may reset (`mlx5_fw_reset_set_reset_sync_ack`).
    Ack,
    /// Refused (`mlx5_fw_reset_set_reset_sync_nack`): no function resets.
    Nack,
    /// Answers later: [`Driver::reset_ack`] or [`Driver::reset_nack`].
    Later,
}

fn index(dev: DeviceId) -> usize {
    usize::from(dev.0) % MAX_DEVICES
}

fn dev_index(dev: DeviceId) -> Result<usize, LinuxError> {
    let d = usize::from(dev.0);
    (d < MAX_DEVICES)
        .then_some(d)
        .ok_or(LinuxError::new(Errno::ENODEV))
}

/// How a sync reset's cycle ended, as devlink's `reload` returns it.
fn sync_reset_result(outcome: CycleOutcome) -> Result<(), LinuxError> {
    let errno = match outcome {
        CycleOutcome::Completed(_) => return Ok(()),
        CycleOutcome::CannotReset {
            reason: CannotResetReason::DeadlinePassed,
            ..
        } => Errno::ETIMEDOUT,
        // A nack, or a function that cannot take part now (stopped, suspending...).
        CycleOutcome::CannotReset { .. } | CycleOutcome::Recovered(_) => Errno::EBUSY,
        CycleOutcome::AbortedByRemove | CycleOutcome::AbortedBySurpriseRemoval => Errno::ENODEV,
        _ => Errno::EIO,
    };
    Err(LinuxError::new(errno))
}

impl<K: Kernel, O: LinuxPort> Driver<K, O> {
    /// Declare `dev` one of the functions that share one hardware reset (one ConnectX
    /// chip's physical functions, the functions of one PCI slot) as `group`.
    ///
    /// # Errors
    ///
    /// The core's refusal: `EBUSY` for a member of a group or while the group's cycle
    /// runs, `EINVAL` for a group id beyond the driver's devices, `ENODEV` for no device.
    pub fn join_reset_group(&self, dev: DeviceId, group: GroupId) -> Result<(), LinuxError> {
        dev_index(dev)?;
        self.runtime()
            .with(|o, now| o.join_reset_group(now, dev, group))
            .map_err(LinuxError::from)
    }

    /// `dev` resets alone again.
    ///
    /// # Errors
    ///
    /// The core's refusal (`EBUSY` while the group's cycle runs).
    pub fn leave_reset_group(&self, dev: DeviceId) -> Result<(), LinuxError> {
        dev_index(dev)?;
        self.runtime()
            .with(|o, now| o.leave_reset_group(now, dev))
            .map_err(LinuxError::from)
    }

    /// A sync-reset nack given later ([`SyncResetAnswer::Later`] earlier).
    ///
    /// # Errors
    ///
    /// `ENODEV` if not attached to `dev`; the core's refusal (`EINVAL` if not voting).
    pub fn reset_nack(&self, id: ClientId, dev: DeviceId) -> Result<(), LinuxError> {
        let client = self.handle(id, dev).ok_or(LinuxError::new(Errno::ENODEV))?;
        self.runtime()
            .with(|o, now| o.reset_nack(now, client))
            .map_err(LinuxError::from)
    }

    /// devlink's `enable_remote_dev_reset` parameter of function `dev` (on by default):
    /// off, the function nacks every sync-reset request, its own or another function's.
    pub fn set_enable_remote_dev_reset(&self, dev: DeviceId, enable: bool) {
        if let Ok(d) = dev_index(dev) {
            self.runtime()
                .os()
                .linux()
                .port(|s| s.devs[d].no_remote_reset = !enable);
        }
    }

    /// Non-blocking half of [`fw_reset_sync`](Self::fw_reset_sync): the sync-reset
    /// request on `dev` (its group's members hear it as mlx5's reset-request event).
    ///
    /// # Errors
    ///
    /// `ENODEV` if the device is not live, `EIO` if it failed, or the core's refusal.
    pub fn begin_fw_reset_sync(&self, dev: DeviceId) -> Result<(), LinuxError> {
        let d = dev_index(dev)?;
        let rt = self.runtime();
        rt.with(|o, now| {
            match o.feed(now, Input::FatalError { device: dev }) {
                Ok(Reply::Fatal(FatalAnswer::Served(_) | FatalAnswer::Deferred)) => {}
                Ok(Reply::Fatal(FatalAnswer::DeviceFailed)) => {
                    return Err(LinuxError::new(Errno::EIO))
                }
                Ok(_) => return Err(LinuxError::new(Errno::ENODEV)),
                Err(e) => return Err(e.into()),
            }
            // The functions the core made take part hear the request event (their RESET
            // is still queued: it is carried out once this lock is released); the
            // requester reads how the cycle ended.
            let members = match o.machine().reset_group(dev) {
                Some(group) => o.reset_group_members(group),
                None => vec![dev],
            };
            let taking_part: Vec<DeviceId> = members
                .into_iter()
                .filter(|m| *m == dev || in_cycle_or_waking(o.machine().phase(*m)))
                .collect();
            rt.os().linux().port(|s| {
                for m in &taking_part {
                    s.devs[index(*m)].sync_reset = true;
                }
                s.devs[d].outcome = None;
            });
            Ok(())
        })
    }

    /// How the sync reset begun on `dev` ended, once it did.
    pub fn fw_reset_sync_result(&self, dev: DeviceId) -> Option<Result<(), LinuxError>> {
        let d = dev_index(dev).ok()?;
        let outcome = self.runtime().os().linux().port(|s| s.devs[d].outcome)?;
        Some(sync_reset_result(outcome))
    }

    /// devlink `reload action fw_activate` on function `dev` (mlx5's
    /// `mlx5_fw_reset_set_reset_sync` and the wait for its end): one cycle for `dev`'s
    /// reset group. Blocks until it ended: `Ok` after the one reset (every function
    /// reloaded, clients got `resume` with the new epoch); `EBUSY` if a function nacked
    /// or could not take part (clients got `resume` with the same epoch), `ETIMEDOUT`
    /// past the group's one deadline, `ENODEV` if removal ended it, `EIO` if the reset
    /// failed. `EDEADLK` from a callback.
    pub fn fw_reset_sync(&self, dev: DeviceId) -> Result<(), LinuxError> {
        if self.runtime().in_dispatch() {
            return Err(LinuxError::new(Errno::EDEADLK));
        }
        self.begin_fw_reset_sync(dev)?;
        let rt = self.runtime();
        rt.wait_until(|_, _| self.fw_reset_sync_result(dev))
            .map_err(|_| LinuxError::new(Errno::EDEADLK))?
    }
}

/// A member the group's cycle holds: quiescing or executing, or (from an idle
/// power-down) powered up first. One in system sleep stays down and takes no part.
fn in_cycle_or_waking(phase: Option<PhaseKind>) -> bool {
    use PhaseKind::*;
    matches!(phase, Some(Quiescing | Executing | PoweringUp))
}

/// Inside the first `error_detected` of a slot's recovery: whether `dev` already takes
/// part in its group's cycle, so this `error_detected` is the same slot error reaching
/// another function, not a second request.
pub(crate) fn in_group_cycle<O: LinuxPort>(o: &LinuxOwner<O>, dev: DeviceId) -> bool {
    let machine = o.machine();
    let Some(group) = machine.reset_group(dev) else {
        return false;
    };
    machine.group_cycle(group).is_some()
        && matches!(
            machine.phase(dev),
            Some(PhaseKind::Quiescing | PhaseKind::Executing)
        )
}

/// `mmio_enabled`'s answer for a function whose group's cycle still waits for another
/// function's votes: its own (`NEED_RESET` if one of its clients acked needing the reset,
/// at `error_detected` or now; else `RECOVERED`), for the PCI core to merge over the slot.
/// The group's cycle ends when the last function's votes are in. `None` otherwise.
pub(crate) fn held_answer<O: LinuxPort>(
    o: &LinuxOwner<O>,
    dev: DeviceId,
    asked: &[ClientHandle],
    needs_reset: bool,
) -> Option<PciErsResult> {
    if !in_group_cycle(o, dev) || o.machine().phase(dev) != Some(PhaseKind::Quiescing) {
        return None;
    }
    let acked_before = o.machine().clients(dev).any(|(h, v)| {
        !asked.contains(&h)
            && matches!(
                v.state,
                ClientState::Active {
                    role: Role::Acked,
                    ..
                }
            )
    });
    Some(match needs_reset || acked_before {
        true => PciErsResult::NeedReset,
        false => PciErsResult::Recovered,
    })
}

/// Which device the report of `dev`'s re-initialisation goes to: `dev` itself, or, for a
/// function the group's reset covered, its carrier. `None`: a member that leaves without
/// having re-initialised (removed before its `slot_reset`) says nothing about the reset.
pub(crate) fn reset_report(s: &mut PortState, dev: DeviceId, took: bool) -> Option<DeviceId> {
    match s.devs[index(dev)].carrier.take() {
        Some(carrier) if carrier != dev => took.then_some(carrier),
        _ => Some(dev),
    }
}

/// `RESET` to a client of a function under a sync-reset request: `Some(vote)`, its ack,
/// nack or nothing yet. `None` outside one (PCI error recovery's `error_detected`).
pub(crate) fn sync_reset_vote(
    os: &LinuxOs,
    ops: &dyn IbClient,
    client: ClientHandle,
) -> Option<Option<Input>> {
    let (sync, refuses) = os.port(|s| {
        let dev = &s.devs[index(client.device)];
        (dev.sync_reset, dev.no_remote_reset)
    });
    if !sync {
        return None;
    }
    // `enable_remote_dev_reset` off: the function nacks without asking its clients.
    let answer = match refuses {
        true => SyncResetAnswer::Nack,
        false => ops.sync_reset_request(client.device),
    };
    Some(match answer {
        SyncResetAnswer::Ack => Some(Input::ResetExecute { client }),
        SyncResetAnswer::Nack => Some(Input::ResetNack { client }),
        SyncResetAnswer::Later => None,
    })
}

/// The machine's one reset for `members` through `carrier`. Under a sync-reset request:
/// unload every function, one link toggle through the carrier, reload every function;
/// the completion is `ResetDone` for the carrier (failed if any reload failed). Otherwise
/// (PCI error recovery) the PCI core resets the slot: each covered function's
/// `slot_reset` takes it, and the first `resume` reports it for the carrier.
pub(crate) fn group_reset(os: &LinuxOs, reset: &GroupReset) -> Option<Input> {
    sync_reset(os, reset.carrier, &reset.members).or_else(|| {
        os.port(|s| {
            for m in &reset.members {
                let dev = &mut s.devs[index(*m)];
                dev.ordered = true;
                dev.carrier = Some(reset.carrier);
            }
        });
        None
    })
}

/// The sync reset's unload, link toggle and reload, if the carrier is under a sync-reset
/// request (`None` otherwise).
pub(crate) fn sync_reset(os: &LinuxOs, carrier: DeviceId, members: &[DeviceId]) -> Option<Input> {
    if !os.port(|s| s.devs[index(carrier)].sync_reset) {
        return None;
    }
    let hw = os.hooks();
    for m in members {
        hw.fw_reset_unload(*m);
    }
    hw.fw_reset_now(carrier);
    let mut result = ResetResult::Succeeded;
    for m in members {
        if hw.reset(*m) == ResetResult::Failed {
            result = ResetResult::Failed;
        }
    }
    Some(Input::ResetDone {
        device: carrier,
        result,
    })
}

/// A cycle of `dev` ended: a sync reset's requester reads how.
pub(crate) fn cycle_finished(s: &mut PortState, dev: DeviceId, outcome: CycleOutcome) {
    let d = &mut s.devs[index(dev)];
    if std::mem::take(&mut d.sync_reset) {
        d.outcome = Some(outcome);
    }
}
