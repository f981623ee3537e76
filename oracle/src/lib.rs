//! # pnp-lifecycle-oracle
//!
//! The invariant oracle of [`pnp_lifecycle`]: the rules of its design (I1–I14 and the
//! unnumbered rules it can see: one callback in flight, fences, vetoes, every fatal error
//! answered, every state change listed) as executable predicates over one step of an
//! owner — its `now`, the machine before, the input, the answer, the outputs drained after
//! it, the machine after — plus the owner-side bookkeeping they need (what each client
//! was told, which callback is in flight since when, which fences, hardware commands and
//! tokens are outstanding).
//!
//! It never looks inside the core's decisions: it uses the [`Sut`] observations only
//! (outputs, replies and public queries), so it checks an owner's stream without a
//! reference model. Run it on your own owner in tests or fuzzing: clone the machine before
//! each input (a `Lifecycle` is `Clone`), feed, drain, and hand the step to
//! [`Oracle::check_step`]; when your owner is done, [`Oracle::check_quiescent`] checks that
//! nothing was left (no token, cycle, callback or client).
//!
//! ```
//! use pnp_lifecycle::*;
//! use pnp_lifecycle_oracle::Oracle;
//!
//! type Hca = Lifecycle<1, 4, 1, { queue_capacity(1, 4) }>;
//! let mut m = Hca::new(Config::DEFAULT);
//! let mut oracle = Oracle::new(1);
//! let dev = DeviceId(0);
//! let mut step = |m: &mut Hca, now: Tick, input: Input| {
//!     let before = m.clone();
//!     let result = m.handle(now, input);
//!     let outputs: Vec<Output> = core::iter::from_fn(|| m.poll_output()).collect();
//!     oracle.check_step(now, &before, &input, &result, &outputs, m)?;
//!     Ok::<_, pnp_lifecycle_oracle::Violation>(outputs)
//! };
//! step(&mut m, Tick(0), Input::AddDevice { device: dev })?;
//! step(&mut m, Tick(0), Input::Start { device: dev, token: RequestToken(1) })?;
//! let outputs = step(&mut m, Tick(5), Input::StartDone { device: dev, result: StartResult::Started })?;
//! assert!(matches!(outputs[0], Output::Complete { status: Status::Success, .. }));
//! // A start reported twice is refused, and the oracle checks that nothing changed (I10).
//! step(&mut m, Tick(6), Input::StartDone { device: dev, result: StartResult::Started })?;
//! # Ok::<(), pnp_lifecycle_oracle::Violation>(())
//! ```
//!
//! The `pnp-lifecycle` repository's testkit drives it with an independent reference model,
//! random and exhaustive inputs, and planted faults that show each check bites.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
// The oracle reads best as one arm per input kind with the check inside it.
#![allow(clippy::collapsible_match, clippy::collapsible_if)]

pub mod sut;

pub use sut::Sut;

use pnp_lifecycle::inspect::Phase;
use pnp_lifecycle::table::{disposition, is_listed, Disposition};
use pnp_lifecycle::{
    Access, CannotResetReason, ClientHandle, ClientKind, ClientState, Config, CycleOutcome,
    DeviceId, DriverPhase, Epoch, Error, Event, FatalAnswer, GroupId, HardwareCommand, Input,
    InputKind, Output, PhaseKind, PowerDownKind, PowerUpResult, Reply, ResetAnswer, Tick,
    TrustedTimeoutPolicy, Unregistered, VetoReason,
};
use std::collections::BTreeMap;
use std::fmt;

/// Which rule a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    /// I1: no notification after unregistration, `Removed` or `Revoked`.
    I1,
    /// I2: nothing after `UnloadMayFinish`, which appears at most once and only when
    /// nothing is left.
    I2,
    /// I3: hardware reset only with no voter outstanding, never after surprise removal or
    /// once removal was requested.
    I3,
    /// I4: every `Reset` (and every registration during a cycle) is answered by exactly
    /// one of `ResetEnd` (or `Recovered`), `Removed`, `Revoked`; after `DeviceFatal` only
    /// `Removed` or `Revoked` follow.
    I4,
    /// I5: every accepted token completed exactly once, a refused one never.
    I5,
    /// I6: epochs only grow; access granted only with the current interface.
    I6,
    /// I7: link changes leave the device alone; registration ignores links.
    I7,
    /// I8: every accepted reset request is served by a cycle.
    I8,
    /// I9: liveness (the testkit's `world::drive_to_quiescence` drives it).
    I9,
    /// I10: a refused input changes nothing and queues nothing.
    I10,
    /// I11: surprise removal, remove, unload, the time, hardware completions and fatal
    /// errors are refused only for the owner's own failure or by the state table.
    I11,
    /// I12: no stop (`Shutdown`/`ReleaseResources`), hardware reset or removal teardown
    /// while a client has a granted hardware operation that was neither reported done
    /// (`AccessDone`) nor fenced (`FenceDone`).
    I12,
    /// I13: no client revoked or timed out before its configured deadline, counted from
    /// the `now` of the input that started it; time never goes backwards.
    I13,
    /// I14: while a device is in a low-power state (from its `PowerDown` command until
    /// its `PowerUp` reports, a restart or its removal) no hardware command but `PowerUp`
    /// (and `ReleaseResources`, which touches no register) and no access is granted;
    /// every client told `Suspending` is later told `Resumed` (or, after a stop,
    /// `DeviceStarted`), `Removed` or `Revoked`. Also: a system sleep is never woken by
    /// an access, and a power-down requested during a reset cycle waits for it.
    I14,
    /// I15: a fast-path gate is opened only for a registered, unrevoked, unfenced client
    /// holding the interface of the device's current epoch, in D0, never after surprise
    /// removal or once removal began, and never while its close is unanswered; no stop,
    /// hardware reset, power-down or removal teardown is commanded while any client's
    /// gate is open or its close unanswered (operations a close carried count as
    /// operations in flight, I12).
    I15,
    /// At most one callback in flight per client.
    OneCallback,
    /// A revoked client with a callback in flight is fenced (and only such a client).
    Fence,
    /// A registration admitted while remove is pending.
    PendingRemove,
    /// Query remove accepted while a client holds the device (or vetoed for a hold
    /// nobody has).
    HoldVeto,
    /// Query stop accepted while a client cannot pause (or vetoed for a client that
    /// can).
    PauseVeto,
    /// A cycle ended without a hardware reset although some voter needed one, none said it
    /// can recover, or the epoch moved; or a reset ran though every voter could recover.
    Recovery,
    /// A device entered Failed without one `DeviceFailed`, or one came without it.
    Failure,
    /// A state change `pnp_lifecycle::is_listed` does not list.
    Transition,
    /// A stop that does not release the hardware resources.
    StopRelease,
    /// Every fatal error is answered: a `Deferred` one later by exactly one
    /// `ResetCycleFinished` (or a cycle that serves it), the others by a correct reason.
    FatalAnswered,
    /// Resources are released exactly when held: nothing released that a start did not
    /// claim, nothing left claimed when the device is removed.
    Resources,
    /// Outputs of one input exceed the documented bound, or outputs were lost.
    Bound,
    /// Client handles: aliasing, unregister winners, `ClientGone`, callbacks.
    Handles,
    /// Reset groups (DESIGN.md "Reset groups"), beyond I3 and I4 per group: a member
    /// that vanished (surprise-removed or being removed) leaves the group's cycle and never
    /// ends it as a member that cannot take part.
    Group,
    /// The core and the reference model disagree.
    Model,
    /// An owner obligation (e.g. the model's callback precondition) could not be kept.
    Harness,
}

/// A broken invariant, with a human-readable explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule.
    pub check: Check,
    /// What happened.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.check, self.detail)
    }
}

impl std::error::Error for Violation {}

/// Shorthand for returning a violation.
macro_rules! fail {
    ($check:ident, $($arg:tt)*) => {
        return Err(Violation { check: Check::$check, detail: format!($($arg)*) })
    };
}

/// What the owner knows of one client (one handle: slot and generation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ClientBook {
    /// Trusted or not.
    pub trusted: bool,
    /// The `now` at which the callback in flight was made, if one is.
    pub callback: Option<Tick>,
    /// Told `DeviceFatal`: only `Removed`/`Revoked` may answer a `Reset` from now on.
    pub fatal_told: bool,
    /// The owner was asked to fence it (counts as revoked).
    pub fenced: bool,
    /// The fence was asked for and not yet reported done.
    pub fence_pending: bool,
    /// The core revoked it (seen in its state, or a fence): no event but `Revoked` after.
    pub cut: bool,
    /// It holds the device (an accepted `Hold` without `ReleaseHold`).
    pub holding: bool,
    /// It declared it cannot pause (an accepted `CannotPause` without `CanPause`).
    pub cannot_pause: bool,
    /// Hardware operations granted (`AccessGranted` for `HardwareOp`) and not ended by
    /// `AccessDone` or `FenceDone`.
    pub ops: u32,
    /// An `Unregister` for it returned `Now`.
    pub unregistered: bool,
    /// It was told `Removed`.
    pub removed: bool,
    /// It was told `Revoked`.
    pub revoked: bool,
    /// `ClientGone` was emitted for it.
    pub gone: bool,
    /// It is owed one of `ResetEnd`/`Removed`/`Revoked` (told `Reset`, or registered
    /// during a cycle).
    pub owed_end: bool,
    /// A voter of the running cycle (active when it began) that has not answered, left
    /// or been revoked.
    pub voter: bool,
    /// When its `RESET` of the running cycle was delivered (a `Notify`): its answer's
    /// deadline counts from here (DESIGN r3, "A deadline runs only while the client can
    /// act"). `None` while the `RESET` waits behind its callback in flight.
    pub reset_delivered: Option<Tick>,
    /// The epoch of the interface it holds (from registration or `AcquireInterface`).
    pub interface: Option<Epoch>,
    /// Told `Suspending` and not yet `Resumed`/`DeviceStarted` (I14).
    pub suspended: bool,
    /// Owed a `Recovered` of a cycle that ended without a reset at this epoch, not yet
    /// delivered (it waits behind the client's callback in flight).
    pub recovery_owed: Option<Epoch>,
    /// Its fast-path gate was opened and no close was asked since (I15).
    pub gate_open: bool,
    /// A close of its gate was asked at this `now` and not answered (nor fenced) yet.
    pub gate_closing: Option<Tick>,
    /// When a close's answer last carried operations into `ops`: their deadline counts
    /// from here (I13).
    pub carried_at: Option<Tick>,
}

impl ClientBook {
    /// Whether the client may still be addressed at all.
    pub fn addressable(&self) -> bool {
        !(self.unregistered || self.removed || self.revoked || self.gone)
    }
}

/// What the owner knows of one device.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct DeviceBook {
    /// Added and not yet `DeviceRemoved`.
    pub present: bool,
    /// A surprise removal was accepted since it was added.
    pub surprise: bool,
    /// A remove (or unload) was accepted for it.
    pub removal_requested: bool,
    /// A `Hardware{Start}` is outstanding (answered by `StartDone`).
    pub start_in_flight: bool,
    /// A `Hardware{Reset}` is outstanding (answered by `ResetDone`).
    pub reset_in_flight: bool,
    /// Accepted tokens not yet completed, with how many times each is owed.
    pub tokens: BTreeMap<u32, u32>,
    /// Reset cycles owed a `ResetCycleFinished` (the current one plus a follow-up).
    pub cycles_owed: u32,
    /// A follow-up cycle was scheduled.
    pub followup: bool,
    /// Highest epoch seen in a completed cycle.
    pub epoch: u32,
    /// When the running cycle began (voters' deadlines count from here).
    pub cycle_since: Option<Tick>,
    /// When the removal under way began (the detach deadline counts from here).
    pub removal_since: Option<Tick>,
    /// A fast-path close answered during the removal carried operations: the removal's
    /// deadline is at least this (their operation timeout from the answer, I13).
    pub removal_floor: Option<Tick>,
    /// A fatal error answered `Deferred` and not yet answered again.
    pub fatal_deferred: bool,
    /// When the stop or the hardware reset under way began waiting for hardware operations
    /// (the stop's `now`; for a reset, when its last voter answered, left or was revoked):
    /// their deadline counts from here.
    pub drain_since: Option<Tick>,
    /// Voters of the running cycle that answered `ResetExecute`.
    pub votes_reset: u32,
    /// Voters of the running cycle that answered `CanRecover`.
    pub votes_recover: u32,
    /// Voters of the running cycle revoked without answering.
    pub silent_revoked: u32,
    /// Voters of the running cycle that unregistered without answering.
    pub voters_left: u32,
    /// A start claimed resources (`StartDone` with `Started` or `FailedAfterResources`)
    /// that no `ReleaseResources` has released yet.
    pub resources_held: bool,
    /// Every client handle ever issued for the device.
    pub clients: BTreeMap<(u8, u16), ClientBook>,
    /// The hardware was commanded to power down and has not been powered up (nor
    /// restarted, nor removed) since (I14).
    pub low_power: bool,
    /// A system sleep was accepted and no power-up commanded since: an access must not
    /// wake the device.
    pub sleep: bool,
    /// A `Hardware{PowerDown}` is outstanding (answered by `PowerDownDone`).
    pub power_down_in_flight: bool,
    /// A `Hardware{PowerUp}` is outstanding (answered by `PowerUpDone`).
    pub power_up_in_flight: bool,
    /// A reset request (or fatal error) answered `AfterPowerUp` owes the one cycle (or
    /// lost-state power-up) that serves it.
    pub power_reset: bool,
    /// The reset group the owner declared (an accepted `JoinResetGroup`), until it leaves
    /// or the device is removed.
    pub group: Option<GroupId>,
    /// A voter refused the running cycle (`ResetNack`): no hardware reset may follow (I3).
    /// Kept until the device's next cycle begins.
    pub nacked: Option<ClientHandle>,
}

impl DeviceBook {
    /// Whether every voter of the running cycle answered `CanRecover` (and there was at
    /// least one): the only case in which the cycle ends without a hardware reset.
    pub fn all_voters_recover(&self) -> bool {
        self.votes_recover > 0
            && self.votes_reset == 0
            && self.silent_revoked == 0
            && self.voters_left == 0
    }
}

/// The invariant checker. Feed it every step with [`Oracle::check_step`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Oracle {
    /// One book per device.
    pub devices: Vec<DeviceBook>,
    /// `Unload` was accepted.
    pub unload_requested: bool,
    /// `UnloadMayFinish` was seen.
    pub unload_finished: bool,
    /// Whether [`Oracle::check_step`] runs the (costlier) metamorphic link check of I7 on
    /// registrations.
    pub metamorphic_links: bool,
    /// Whether a revocation of a client with a callback in flight must ask for a fence
    /// ([`Check::Fence`]). Tests turn it off to show that the liveness drive alone also
    /// sees a missing fence (as I9).
    pub fence_check: bool,
}

fn is_cycle_phase(p: Option<PhaseKind>) -> bool {
    matches!(p, Some(PhaseKind::Quiescing | PhaseKind::Executing))
}

/// Whether the device is in a power transition run for a pending query stop or remove: it
/// defers a fatal error as that query does.
fn power_for_query<S: Sut>(s: &S, d: DeviceId) -> bool {
    matches!(
        s.phase_detail(d),
        Some(
            Phase::PoweringDown {
                back_to: Some(_),
                ..
            } | Phase::PoweringUp {
                back_to: Some(_),
                ..
            }
        )
    )
}

fn is_power_phase(p: Option<PhaseKind>) -> bool {
    matches!(
        p,
        Some(PhaseKind::PoweringDown | PhaseKind::LowPower | PhaseKind::PoweringUp)
    )
}

impl Oracle {
    /// An oracle for a machine with `devices` devices.
    pub fn new(devices: usize) -> Oracle {
        Oracle {
            devices: vec![DeviceBook::default(); devices],
            unload_requested: false,
            unload_finished: false,
            metamorphic_links: true,
            fence_check: true,
        }
    }

    /// The book of a client, if its handle was ever issued.
    pub fn client(&self, h: ClientHandle) -> Option<&ClientBook> {
        self.devices
            .get(usize::from(h.device.0))?
            .clients
            .get(&(h.slot, h.generation))
    }

    fn client_mut(&mut self, h: ClientHandle) -> Option<&mut ClientBook> {
        self.devices
            .get_mut(usize::from(h.device.0))?
            .clients
            .get_mut(&(h.slot, h.generation))
    }

    /// Every handle ever issued, with its book.
    pub fn handles(&self) -> impl Iterator<Item = (ClientHandle, &ClientBook)> + '_ {
        self.devices.iter().enumerate().flat_map(|(d, book)| {
            book.clients.iter().map(move |(&(slot, generation), c)| {
                (
                    ClientHandle {
                        device: DeviceId(d as u8),
                        slot,
                        generation,
                    },
                    c,
                )
            })
        })
    }

    /// Check one step. `before` is the machine before `input`, `after` the machine after it
    /// and after `outputs` were drained from it.
    #[allow(clippy::too_many_arguments)]
    pub fn check_step<S: Sut>(
        &mut self,
        now: Tick,
        before: &S,
        input: &Input,
        result: &Result<Reply, Error>,
        outputs: &[Output],
        after: &S,
    ) -> Result<(), Violation> {
        // ---- I13: the clock -----------------------------------------------------------
        if result.is_ok() && now < before.now() {
            fail!(
                I13,
                "{:?} accepted at {:?}, before the last accepted {:?}",
                input,
                now,
                before.now()
            );
        }
        // ---- bounds and I2's "nothing after" --------------------------------------
        let grouped = input
            .device()
            .and_then(|d| self.dev(d))
            .is_some_and(|b| b.group.is_some());
        let bound = match input {
            Input::Timeout | Input::Unload => S::DRIVER_INPUT_OUTPUTS,
            // An input on a member of a reset group may move every member.
            _ if grouped => S::DRIVER_INPUT_OUTPUTS,
            _ => S::DEVICE_INPUT_OUTPUTS,
        };
        if outputs.len() > bound {
            fail!(
                Bound,
                "{} outputs for {:?}, bound {}",
                outputs.len(),
                input,
                bound
            );
        }
        if after.lost_outputs() != 0 {
            fail!(Bound, "{} outputs lost", after.lost_outputs());
        }
        if after.pending_output_count() != 0 {
            fail!(Bound, "outputs left queued after draining");
        }
        if self.unload_finished {
            if !outputs.is_empty() {
                fail!(I2, "output {:?} after UnloadMayFinish", outputs[0]);
            }
            if result.is_ok() {
                fail!(I2, "{:?} accepted after UnloadMayFinish", input);
            }
        }
        if let Some(pos) = outputs.iter().position(|o| *o == Output::UnloadMayFinish) {
            if pos + 1 != outputs.len() {
                fail!(I2, "output {:?} after UnloadMayFinish", outputs[pos + 1]);
            }
        }

        // ---- I10 -------------------------------------------------------------------
        let Ok(reply) = result else {
            if before != after {
                fail!(
                    I10,
                    "refused {:?} ({:?}) but the machine changed",
                    input,
                    result
                );
            }
            if !outputs.is_empty() {
                fail!(I10, "refused {:?} but queued {:?}", input, outputs);
            }
            return self.check_refusal(now, before, input, result);
        };

        // ---- revocations the core decided in this step (I13), before the outputs ------
        let revoked_now = self.revocations(now, before, input, outputs, after)?;
        // The books before the outputs, for the timeout checks at the end of the step.
        let books = if *input == Input::Timeout {
            self.devices.clone()
        } else {
            Vec::new()
        };

        // ---- effects of the accepted input itself ------------------------------------
        self.accept_input(now, before, input, reply, after)?;

        // ---- the outputs, in order -----------------------------------------------------
        for o in outputs {
            self.output(now, before, after, input, o)?;
        }

        // ---- whole-step checks -----------------------------------------------------------
        self.end_of_step(now, before, input, outputs, after, &revoked_now, &books)
    }

    /// Every client the core revoked in this step (its state turned `Revoked`, a fence was
    /// asked for, or a `Removed` client was freed without unregistering), each checked
    /// against the deadlines that justify it (I13), and a fence asked for every one whose
    /// callback was in flight.
    fn revocations<S: Sut>(
        &mut self,
        now: Tick,
        before: &S,
        input: &Input,
        outputs: &[Output],
        after: &S,
    ) -> Result<Vec<ClientHandle>, Violation> {
        let config = before.config();
        let mut revoked = Vec::new();
        let handles: Vec<ClientHandle> = self.handles().map(|(h, _)| h).collect();
        for h in handles {
            let Some(bv) = before.client(h) else { continue };
            if bv.state == ClientState::Revoked {
                continue;
            }
            let av = after.client(h);
            let unregistering = matches!(input, Input::Unregister { client } if *client == h);
            let fenced = outputs
                .iter()
                .any(|o| matches!(o, Output::Fence { client } if *client == h));
            if av.is_none() && !unregistering && matches!(bv.state, ClientState::Active { .. }) {
                fail!(
                    Handles,
                    "{:?} vanished by {:?} without unregistering or being removed",
                    h,
                    input
                );
            }
            let turned = match av {
                Some(v) => v.state == ClientState::Revoked,
                None => !unregistering && bv.state == ClientState::Removed,
            };
            if !(turned || fenced) {
                continue;
            }
            let c = self.client(h).cloned().unwrap_or_default();
            let d = self.dev(h.device).cloned().unwrap_or_default();
            let kind = if c.trusted {
                ClientKind::Trusted
            } else {
                ClientKind::Untrusted
            };
            let by_callback = c
                .callback
                .is_some_and(|t| passed(now, t, config.callback_timeout));
            let by_ack = c.voter
                && c.reset_delivered
                    .is_some_and(|t| passed(now, t, ack_timeout(&config, kind)));
            let by_detach = bv.state == ClientState::Removed
                && d.removal_since
                    .is_some_and(|t| passed(now, t, config.detach_timeout));
            // An operation holder: the stop's or reset's wait, or the detach deadline.
            // A gate whose close is unanswered holds operations of unknown count.
            let holds_ops = (c.ops > 0 || c.gate_closing.is_some()) && !c.fence_pending;
            let pb = before.phase(h.device);
            // A close unanswered for the operation timeout (I15, I9).
            let by_close = c
                .gate_closing
                .is_some_and(|t| passed(now, t, config.operation_timeout));
            // Operations a close carried during a wait count from its answer (I13): a
            // drain's wait restarts there (`drain_since`), a removal's has a floor.
            let by_operation = holds_ops
                && match pb {
                    Some(PhaseKind::Stopping | PhaseKind::Quiescing | PhaseKind::PoweringDown) => d
                        .drain_since
                        .is_some_and(|t| passed(now, t, config.operation_timeout)),
                    Some(PhaseKind::Removing) => {
                        d.removal_since
                            .is_some_and(|t| passed(now, t, config.detach_timeout))
                            && d.removal_floor.is_none_or(|f| now >= f)
                    }
                    _ => false,
                };
            if !(by_callback || by_ack || by_detach || by_operation || by_close) {
                fail!(
                    I13,
                    "{:?} revoked at {:?} before any deadline: callback since {:?} (+{}), \
                     voter {} whose RESET was delivered at {:?}, removal since {:?} (+{}), {} operations \
                     in a wait since {:?} (+{}) in {:?}",
                    h,
                    now,
                    c.callback,
                    config.callback_timeout,
                    c.voter,
                    c.reset_delivered,
                    d.removal_since,
                    config.detach_timeout,
                    c.ops,
                    d.drain_since,
                    config.operation_timeout,
                    pb
                );
            }
            if self.fence_check && c.callback.is_some() && !c.fence_pending && !fenced {
                fail!(
                    Fence,
                    "{:?} revoked with a callback in flight since {:?}, but no fence asked",
                    h,
                    c.callback
                );
            }
            if c.voter && is_cycle_phase(before.phase(h.device)) {
                self.dev_mut(h.device)?.silent_revoked += 1;
            }
            if let Some(b) = self.client_mut(h) {
                b.cut = true;
                b.voter = false;
            }
            revoked.push(h);
        }
        Ok(revoked)
    }

    fn check_refusal<S: Sut>(
        &mut self,
        now: Tick,
        before: &S,
        input: &Input,
        result: &Result<Reply, Error>,
    ) -> Result<(), Violation> {
        let Err(e) = result else { return Ok(()) };
        if let Error::TimeWentBackwards { last } = e {
            if now >= before.now() || *last != before.now() {
                fail!(
                    I13,
                    "{:?} at {:?} refused as backwards (last {:?}, machine at {:?})",
                    input,
                    now,
                    last,
                    before.now()
                );
            }
            return Ok(());
        }
        // I11: only the owner's failure or the state table may refuse these.
        let kind = input.kind();
        if matches!(
            kind,
            InputKind::SurpriseRemoval
                | InputKind::Remove
                | InputKind::Unload
                | InputKind::Timeout
                | InputKind::StartDone
                | InputKind::ResetDone
                | InputKind::PowerDownDone
                | InputKind::PowerUpDone
                | InputKind::FatalError
        ) {
            let phase = input.device().and_then(|d| before.phase(d));
            let allowed = match e {
                Error::OutputBacklog { .. }
                | Error::Unloaded
                | Error::TimeWentBackwards { .. }
                | Error::NoSuchDevice
                | Error::UnloadAlreadyRequested => true,
                Error::InvalidState { phase: p, input: k } => {
                    Some(*p) == phase
                        && *k == kind
                        && (disposition(*p, kind) == Disposition::Refuse
                            // A second surprise removal, or a removal under way.
                            || matches!(
                                (p, kind),
                                (PhaseKind::SurpriseRemoved, InputKind::SurpriseRemoval)
                                    | (PhaseKind::Absent, _)
                            ))
                }
                Error::NoHardwareCommandInFlight => matches!(
                    kind,
                    InputKind::StartDone
                        | InputKind::ResetDone
                        | InputKind::PowerDownDone
                        | InputKind::PowerUpDone
                ),
                Error::RequestPending => kind == InputKind::Remove,
                _ => false,
            };
            if !allowed {
                fail!(
                    I11,
                    "{:?} refused with {:?} in {:?}: clients made the machine refuse it",
                    input,
                    e,
                    phase
                );
            }
        }
        // The hardware completions must match the owner's outstanding commands.
        match (input, e) {
            (Input::StartDone { device, .. }, Error::NoHardwareCommandInFlight) => {
                if self.dev(*device).is_some_and(|d| d.start_in_flight) {
                    fail!(
                        I3,
                        "StartDone refused though a start is in flight on {:?}",
                        device
                    );
                }
            }
            (Input::ResetDone { device, .. }, Error::NoHardwareCommandInFlight) => {
                if self.dev(*device).is_some_and(|d| d.reset_in_flight) {
                    fail!(
                        I3,
                        "ResetDone refused though a reset is in flight on {:?}",
                        device
                    );
                }
            }
            (Input::PowerDownDone { device }, Error::NoHardwareCommandInFlight) => {
                if self.dev(*device).is_some_and(|d| d.power_down_in_flight) {
                    fail!(I11, "PowerDownDone refused though one is in flight");
                }
            }
            (Input::PowerUpDone { device, .. }, Error::NoHardwareCommandInFlight) => {
                if self.dev(*device).is_some_and(|d| d.power_up_in_flight) {
                    fail!(I11, "PowerUpDone refused though one is in flight");
                }
            }
            // I14: an access in Dx is never granted; a system sleep refuses it by name.
            (Input::Access { client, .. }, Error::Suspended { kind }) => {
                let phase = before.phase(client.device);
                let sleeping = self.dev(client.device).is_some_and(|b| b.sleep);
                let ok = match phase {
                    Some(PhaseKind::PoweringDown | PhaseKind::LowPower) => {
                        *kind == PowerDownKind::SystemSleep && sleeping
                    }
                    _ => false,
                };
                if !ok {
                    fail!(I14, "access refused as {:?} in {:?}", e, phase);
                }
            }
            (
                Input::CallbackDone { client } | Input::CallbackDoneWith { client, .. },
                Error::NoCallbackInFlight,
            ) => {
                if self.client(*client).is_some_and(|c| c.callback.is_some()) {
                    fail!(
                        Handles,
                        "CallbackDone refused for {:?} with callbacks out",
                        client
                    );
                }
            }
            (Input::Unregister { client }, _) => {
                if self
                    .client(*client)
                    .is_some_and(|c| c.addressable() || c.removed || c.revoked)
                    && !matches!(e, Error::OutputBacklog { .. } | Error::Unloaded)
                {
                    fail!(
                        Handles,
                        "Unregister of a registered client {:?} refused: {:?}",
                        client,
                        e
                    );
                }
            }
            (Input::AccessDone { client }, Error::NoOperationInFlight) => {
                if self
                    .client(*client)
                    .is_some_and(|c| c.ops > 0 && !c.fence_pending)
                {
                    fail!(
                        Handles,
                        "AccessDone refused for {:?} with operations out",
                        client
                    );
                }
            }
            (Input::QueryStop { device, .. }, Error::Vetoed(VetoReason::ClientCannotPause)) => {
                if !self.dev(*device).is_some_and(|b| {
                    b.clients
                        .values()
                        .any(|c| c.cannot_pause && c.addressable() && !c.cut)
                }) {
                    fail!(
                        PauseVeto,
                        "query stop of {:?} vetoed for a client that cannot pause; none is",
                        device
                    );
                }
            }
            (Input::QueryRemove { device, .. }, Error::Vetoed(VetoReason::ClientHoldsDevice)) => {
                if !self.dev(*device).is_some_and(|b| {
                    b.clients
                        .values()
                        .any(|c| c.holding && c.addressable() && !c.cut)
                }) {
                    fail!(
                        HoldVeto,
                        "query remove of {:?} vetoed for a hold; nobody holds it",
                        device
                    );
                }
            }
            (Input::Register { .. }, _) => {
                // I7: a registration is never refused because of a link.
                if matches!(e, Error::NoSuchPort) {
                    fail!(I7, "Register refused with NoSuchPort");
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn dev(&self, d: DeviceId) -> Option<&DeviceBook> {
        self.devices.get(usize::from(d.0))
    }

    /// I15: an [`Output::FastPath`].
    fn fast_path(
        &mut self,
        now: Tick,
        client: ClientHandle,
        gate: pnp_lifecycle::FastPathGate,
        current: Option<Epoch>,
    ) -> Result<(), Violation> {
        let d = self.dev(client.device).cloned().unwrap_or_default();
        let Some(c) = self.client_mut(client) else {
            fail!(
                I15,
                "fast-path gate {:?} of never-issued {:?}",
                gate,
                client
            );
        };
        match gate {
            pnp_lifecycle::FastPathGate::Open { epoch } => {
                if c.gate_open || c.gate_closing.is_some() {
                    fail!(
                        I15,
                        "gate of {:?} opened while open or its close (asked at {:?}) is \
                         unanswered",
                        client,
                        c.gate_closing
                    );
                }
                if !c.addressable() || c.cut || c.fenced {
                    fail!(
                        I15,
                        "gate opened for {:?}, which is gone, revoked or fenced",
                        client
                    );
                }
                if Some(epoch) != current || c.interface != Some(epoch) {
                    fail!(
                        I15,
                        "gate of {:?} opened at {:?}; device at {:?}, client's interface {:?}",
                        client,
                        epoch,
                        current,
                        c.interface
                    );
                }
                if d.low_power || d.power_down_in_flight || d.surprise || d.removal_requested {
                    fail!(
                        I15,
                        "gate of {:?} opened in Dx, after surprise removal or once removal began",
                        client
                    );
                }
                c.gate_open = true;
            }
            pnp_lifecycle::FastPathGate::Close => {
                if !c.gate_open {
                    fail!(I15, "close of {:?}'s gate, which is not open", client);
                }
                c.gate_open = false;
                c.gate_closing = Some(now);
            }
        }
        Ok(())
    }

    fn dev_mut(&mut self, d: DeviceId) -> Result<&mut DeviceBook, Violation> {
        match self.devices.get_mut(usize::from(d.0)) {
            Some(b) => Ok(b),
            None => fail!(
                Handles,
                "accepted input names device {:?} beyond capacity",
                d
            ),
        }
    }

    fn accept_input<S: Sut>(
        &mut self,
        now: Tick,
        before: &S,
        input: &Input,
        reply: &Reply,
        after: &S,
    ) -> Result<(), Violation> {
        // A callback's return with the client's answer (DESIGN "Cost"): the return's
        // effects here, then the answer's as if it were fed alone (one input, not two).
        let answered;
        let input = match *input {
            Input::CallbackDoneWith { client, answer } => {
                match self.client_mut(client) {
                    Some(c) if c.callback.is_some() && !c.gone && !c.fence_pending => {
                        c.callback = None;
                    }
                    _ => fail!(
                        Handles,
                        "CallbackDoneWith accepted for {:?} with none out, or fenced",
                        client
                    ),
                }
                answered = answer.input(client);
                &answered
            }
            _ => input,
        };
        // Cycles and removals that began in this step, and deferred fatal errors.
        for i in 0..S::DEVICES {
            let d = DeviceId(i as u8);
            let (pb, pa) = (before.phase(d), after.phase(d));
            if pa == Some(PhaseKind::Removing) && pb != Some(PhaseKind::Removing) {
                let b = self.dev_mut(d)?;
                b.removal_since = Some(now);
                b.removal_floor = None;
            }
            let requested = input.device() == Some(d)
                && matches!(
                    reply,
                    Reply::Reset(ResetAnswer::Started)
                        | Reply::Fatal(FatalAnswer::Served(ResetAnswer::Started))
                );
            // A cycle began (one that also ended in this step is answered in its outputs).
            if !is_cycle_phase(pb) && (is_cycle_phase(pa) || requested) {
                let b = self.dev_mut(d)?;
                if b.power_reset && pb == Some(PhaseKind::PoweringUp) {
                    // The cycle a reset request in Dx waited for: it serves that request.
                    b.power_reset = false;
                    self.begin_cycle(d, now)?;
                    continue;
                }
                if b.cycles_owed != 0 {
                    fail!(I8, "a new cycle began while {} owed", b.cycles_owed);
                }
                if !requested {
                    if b.fatal_deferred {
                        b.fatal_deferred = false;
                    } else if b.group.is_none() {
                        // (A member's cycle may be its group's, begun by another member or
                        // by its own power-up for it.)
                        fail!(I8, "{:?} began a cycle nobody asked for ({:?})", d, input);
                    }
                }
                b.cycles_owed = 1;
                self.begin_cycle(d, now)?;
            }
        }
        // A member pulled into its group's cycle during a power transition owes the cycle
        // its power-up will serve (as a reset request answered `AfterPowerUp` does).
        for i in 0..S::DEVICES {
            let d = DeviceId(i as u8);
            let waits = matches!(
                after.phase_detail(d),
                Some(
                    pnp_lifecycle::inspect::Phase::PoweringDown {
                        reset: true,
                        back_to: None,
                        ..
                    } | pnp_lifecycle::inspect::Phase::LowPower { reset: true, .. }
                        | pnp_lifecycle::inspect::Phase::PoweringUp {
                            reset: true,
                            back_to: None,
                            ..
                        }
                )
            );
            let b = self.dev_mut(d)?;
            // (A fatal error a pending query deferred is counted once that query ends.)
            if waits
                && b.group.is_some()
                && b.cycles_owed == 0
                && !b.power_reset
                && !b.fatal_deferred
            {
                b.power_reset = true;
                b.cycles_owed = 1;
            }
        }
        // Tokens of accepted requests are owed one completion each.
        if let Some((d, t)) = token_of(input) {
            *self.dev_mut(d)?.tokens.entry(t).or_insert(0) += 1;
        }
        // I6: epochs only grow.
        for i in 0..S::DEVICES {
            let d = DeviceId(i as u8);
            if after.epoch(d) < before.epoch(d) {
                fail!(
                    I6,
                    "epoch of {:?} went from {:?} to {:?}",
                    d,
                    before.epoch(d),
                    after.epoch(d)
                );
            }
        }
        match *input {
            Input::AddDevice { device } => {
                if self.unload_requested {
                    fail!(I2, "AddDevice accepted after unload");
                }
                let b = self.dev_mut(device)?;
                if b.present {
                    fail!(Handles, "AddDevice accepted for a present device");
                }
                b.present = true;
                b.surprise = false;
                b.removal_requested = false;
            }
            Input::Remove { device, .. } => self.dev_mut(device)?.removal_requested = true,
            Input::Unload => {
                self.unload_requested = true;
                for b in self.devices.iter_mut().filter(|b| b.present) {
                    b.removal_requested = true;
                }
            }
            Input::SurpriseRemoval { device } => self.dev_mut(device)?.surprise = true,
            Input::StartDone { device, result } => {
                let b = self.dev_mut(device)?;
                if !b.start_in_flight {
                    fail!(I3, "StartDone accepted with no start in flight");
                }
                b.start_in_flight = false;
                if result != pnp_lifecycle::StartResult::FailedBeforeResources {
                    b.resources_held = true;
                }
            }
            Input::ResetDone { device, .. } => {
                let b = self.dev_mut(device)?;
                if !b.reset_in_flight {
                    fail!(I3, "ResetDone accepted with no reset in flight");
                }
                b.reset_in_flight = false;
            }
            Input::PowerDown { device, kind, .. } => {
                let pb = before.phase(device);
                if kind == PowerDownKind::Idle && is_cycle_phase(pb) {
                    fail!(
                        I14,
                        "idle power-down of {:?} accepted during a reset cycle",
                        device
                    );
                }
                if kind == PowerDownKind::SystemSleep {
                    self.dev_mut(device)?.sleep = true;
                }
            }
            Input::PowerDownDone { device } => {
                let b = self.dev_mut(device)?;
                if !b.power_down_in_flight {
                    fail!(I3, "PowerDownDone accepted with no power-down in flight");
                }
                b.power_down_in_flight = false;
            }
            Input::PowerUpDone { device, result } => {
                let b = self.dev_mut(device)?;
                if !b.power_up_in_flight {
                    fail!(I3, "PowerUpDone accepted with no power-up in flight");
                }
                b.power_up_in_flight = false;
                if result == PowerUpResult::Failed {
                    // A failed power-up: the hardware vanished (a surprise removal).
                    b.surprise = true;
                } else {
                    b.low_power = false;
                }
            }
            Input::LinkChanged { device, .. } => {
                // I7: the device state does not move.
                if before.phase_detail(device) != after.phase_detail(device)
                    || before.epoch(device) != after.epoch(device)
                {
                    fail!(
                        I7,
                        "LinkChanged moved {:?} from {:?} to {:?}",
                        device,
                        before.phase_detail(device),
                        after.phase_detail(device)
                    );
                }
            }
            Input::Register { device, kind } => {
                let Reply::Registered { client, epoch } = *reply else {
                    fail!(Handles, "Register answered {:?}", reply);
                };
                if self.unload_requested {
                    fail!(I2, "Register accepted after unload");
                }
                if client.device != device || usize::from(client.slot) >= S::CLIENTS {
                    fail!(Handles, "Register issued a bad handle {:?}", client);
                }
                if Some(epoch) != before.epoch(device) {
                    fail!(
                        I6,
                        "Register gave epoch {:?}, device at {:?}",
                        epoch,
                        before.epoch(device)
                    );
                }
                if before.phase(device) == Some(PhaseKind::RemovePending) {
                    fail!(
                        PendingRemove,
                        "{:?} admitted to {:?} while remove is pending",
                        client,
                        device
                    );
                }
                let cycle = is_cycle_phase(before.phase(device));
                let b = self.dev_mut(device)?;
                if b.clients.contains_key(&(client.slot, client.generation)) {
                    fail!(Handles, "handle {:?} issued twice (aliasing)", client);
                }
                b.clients.insert(
                    (client.slot, client.generation),
                    ClientBook {
                        trusted: kind == ClientKind::Trusted,
                        owed_end: cycle,
                        interface: Some(epoch),
                        ..ClientBook::default()
                    },
                );
            }
            Input::Unregister { client } => {
                let Reply::Unregistered(how) = *reply else {
                    fail!(Handles, "Unregister answered {:?}", reply);
                };
                let known = self.client(client).cloned();
                match (how, known) {
                    (Unregistered::Now, None) => {
                        fail!(
                            Handles,
                            "Unregister of never-issued {:?} returned Now",
                            client
                        )
                    }
                    (Unregistered::Now, Some(c)) if c.unregistered || c.gone => {
                        fail!(Handles, "second Unregister winner for {:?}", client)
                    }
                    (Unregistered::Already, Some(c)) if !(c.unregistered || c.gone) => {
                        fail!(
                            Handles,
                            "Unregister of registered {:?} returned Already",
                            client
                        )
                    }
                    (Unregistered::Already, None) => {
                        fail!(
                            Handles,
                            "Unregister of never-issued {:?} returned Already",
                            client
                        )
                    }
                    _ => {}
                }
                let was_voter = self.client(client).is_some_and(|c| c.voter);
                if how == Unregistered::Now
                    && was_voter
                    && is_cycle_phase(before.phase(client.device))
                {
                    self.dev_mut(client.device)?.voters_left += 1;
                }
                if how == Unregistered::Now {
                    if let Some(c) = self.client_mut(client) {
                        c.unregistered = true;
                        c.voter = false;
                        c.holding = false;
                        c.cannot_pause = false;
                    }
                }
            }
            Input::CallbackDone { client } => match self.client_mut(client) {
                Some(c) if c.fence_pending => {}
                Some(c) if c.callback.is_some() && !c.gone => c.callback = None,
                _ => fail!(
                    Handles,
                    "CallbackDone accepted for {:?} with none out",
                    client
                ),
            },
            Input::FenceDone { client } => match self.client_mut(client) {
                Some(c) if c.fence_pending => {
                    c.fence_pending = false;
                    c.callback = None;
                    c.ops = 0;
                    c.gate_closing = None; // the fence covers the fast path
                    c.carried_at = None;
                }
                _ => fail!(Fence, "FenceDone accepted for {:?}, no fence asked", client),
            },
            Input::FastPathClosed { client, in_flight } => {
                match self.client_mut(client) {
                    Some(c) if c.gate_closing.is_some() => {
                        c.gate_closing = None;
                        c.ops += in_flight;
                        if in_flight > 0 {
                            c.carried_at = Some(now);
                        }
                    }
                    _ => fail!(
                        I15,
                        "FastPathClosed accepted for {:?}, no close asked",
                        client
                    ),
                }
                if in_flight > 0 {
                    // The drain under way waits for operations from this answer (I13).
                    let floor = now.after(before.config().operation_timeout);
                    let removing = before.phase(client.device) == Some(PhaseKind::Removing);
                    let b = self.dev_mut(client.device)?;
                    if b.drain_since.is_some() {
                        b.drain_since = Some(now);
                    }
                    if removing {
                        b.removal_floor = Some(b.removal_floor.map_or(floor, |f| f.max(floor)));
                    }
                }
            }
            Input::AccessDone { client } => match self.client_mut(client) {
                // Ignored until the fence is reported.
                Some(c) if c.fence_pending => {}
                Some(c) if c.ops > 0 && !c.gone => {
                    c.ops -= 1;
                    if c.ops == 0 {
                        c.carried_at = None;
                    }
                }
                _ => fail!(
                    Handles,
                    "AccessDone accepted for {:?} with no operation out",
                    client
                ),
            },
            Input::CannotPause { client } => {
                if let Some(c) = self.client_mut(client) {
                    c.cannot_pause = true;
                }
            }
            Input::CanPause { client } => {
                if let Some(c) = self.client_mut(client) {
                    c.cannot_pause = false;
                }
            }
            Input::QueryStop { device, .. } => {
                let b = self.dev_mut(device)?;
                if let Some((h, _)) = b
                    .clients
                    .iter()
                    .find(|(_, c)| c.cannot_pause && c.addressable() && !c.cut)
                {
                    fail!(
                        PauseVeto,
                        "query stop of {:?} accepted while client {:?} cannot pause",
                        device,
                        h
                    );
                }
            }
            Input::Hold { client } => {
                if let Some(c) = self.client_mut(client) {
                    c.holding = true;
                }
            }
            Input::ReleaseHold { client } => {
                if let Some(c) = self.client_mut(client) {
                    c.holding = false;
                }
            }
            Input::QueryRemove { device, .. } => {
                let b = self.dev_mut(device)?;
                if let Some((h, _)) = b
                    .clients
                    .iter()
                    .find(|(_, c)| c.holding && c.addressable() && !c.cut)
                {
                    fail!(
                        HoldVeto,
                        "query remove of {:?} accepted while client {:?} holds it",
                        device,
                        h
                    );
                }
            }
            Input::AcquireInterface { client } => {
                let Reply::Interface(e) = *reply else {
                    fail!(Handles, "AcquireInterface answered {:?}", reply);
                };
                if Some(e) != before.epoch(client.device) {
                    fail!(
                        I6,
                        "interface of epoch {:?} while device at {:?}",
                        e,
                        before.epoch(client.device)
                    );
                }
                match self.client_mut(client) {
                    Some(c) if c.addressable() => c.interface = Some(e),
                    _ => fail!(I1, "AcquireInterface accepted for gone client {:?}", client),
                }
            }
            Input::JoinResetGroup { device, group } => self.dev_mut(device)?.group = Some(group),
            Input::LeaveResetGroup { device } => self.dev_mut(device)?.group = None,
            Input::ResetNack { client } => {
                match self.client_mut(client) {
                    Some(c) if c.voter && c.owed_end => c.voter = false,
                    _ => fail!(I3, "ResetNack accepted from a non-voter {:?}", client),
                }
                let b = self.dev_mut(client.device)?;
                b.nacked.get_or_insert(client);
            }
            Input::ResetExecute { client } | Input::CanRecover { client } => {
                match self.client_mut(client) {
                    Some(c) if c.voter && c.owed_end => c.voter = false,
                    Some(c) if c.voter => {
                        fail!(
                            I4,
                            "{:?} accepted from {:?} never told Reset",
                            input.kind(),
                            client
                        )
                    }
                    _ => fail!(
                        I3,
                        "{:?} accepted from a non-voter {:?}",
                        input.kind(),
                        client
                    ),
                }
                let b = self.dev_mut(client.device)?;
                if matches!(input, Input::ResetExecute { .. }) {
                    b.votes_reset += 1;
                } else {
                    b.votes_recover += 1;
                }
            }
            Input::Access {
                client,
                epoch,
                what,
            } => {
                let current = before.epoch(client.device);
                let phase = before.phase(client.device);
                let Some(c) = self.client(client) else {
                    fail!(I6, "access granted to unknown {:?}", client);
                };
                if !c.addressable() {
                    fail!(I6, "access granted to detached/revoked {:?}", client);
                }
                if Some(epoch) != current || c.interface != current {
                    fail!(
                        I6,
                        "access granted at epoch {:?}; device at {:?}, client's interface {:?}",
                        epoch,
                        current,
                        c.interface
                    );
                }
                let low_power = self.dev(client.device).is_some_and(|b| b.low_power);
                let sleeping = self.dev(client.device).is_some_and(|b| b.sleep);
                if *reply == Reply::AccessWaitsForPowerUp {
                    // I14: only an idle Dx (or a power-up under way) makes an access wait.
                    let woke = phase == Some(PhaseKind::LowPower);
                    let ok = match phase {
                        Some(PhaseKind::PoweringUp) => true,
                        Some(PhaseKind::PoweringDown) => !sleeping,
                        Some(PhaseKind::LowPower) => {
                            !sleeping && after.phase(client.device) == Some(PhaseKind::PoweringUp)
                        }
                        _ => false,
                    };
                    if !ok {
                        fail!(
                            I14,
                            "access answered WaitForPowerUp in {:?} (system sleep: {}, woke: {})",
                            phase,
                            sleeping,
                            woke
                        );
                    }
                } else if low_power || is_power_phase(phase) {
                    fail!(I14, "access granted to {:?} in {:?} (Dx)", client, phase);
                } else {
                    match phase {
                        Some(PhaseKind::Running) => {}
                        Some(PhaseKind::Quiescing) if c.voter || c.owed_end => {}
                        _ => fail!(I3, "access granted in {:?} (voter: {})", phase, c.voter),
                    }
                }
                if let (Access::HardwareOp, Reply::AccessGranted) = (what, reply) {
                    if let Some(c) = self.client_mut(client) {
                        c.ops += 1;
                    }
                }
            }
            _ => {}
        }
        // Client-facing calls other than Unregister/CallbackDone need a live client.
        if let Some(client) = client_of(input) {
            if !matches!(
                input.kind(),
                InputKind::Unregister
                    | InputKind::CallbackDone
                    | InputKind::FenceDone
                    | InputKind::AccessDone
            ) {
                match self.client(client) {
                    Some(c) if c.addressable() && !c.cut => {}
                    other => fail!(
                        I1,
                        "{:?} accepted from a client that is not live ({:?})",
                        input.kind(),
                        other
                    ),
                }
            }
        }
        // Every fatal error is answered, with a reason that fits the state.
        if let Reply::Fatal(answer) = *reply {
            let d = input.device().unwrap_or(DeviceId(0));
            let pb = before.phase(d);
            let low_power = self.dev(d).is_some_and(|b| b.low_power);
            let ok = match answer {
                FatalAnswer::Served(ResetAnswer::AfterPowerUp) => {
                    matches!(pb, Some(PhaseKind::PoweringDown | PhaseKind::PoweringUp))
                }
                FatalAnswer::Served(_) => matches!(
                    pb,
                    Some(PhaseKind::Running | PhaseKind::Quiescing | PhaseKind::Executing)
                ),
                FatalAnswer::Deferred => {
                    matches!(
                        pb,
                        Some(
                            PhaseKind::Starting
                                | PhaseKind::StopPending
                                | PhaseKind::Stopping
                                | PhaseKind::RemovePending
                        )
                    ) && !low_power
                        || power_for_query(before, d)
                }
                FatalAnswer::FoldedIntoRemoval => {
                    pb == Some(PhaseKind::Executing)
                        && self.dev(d).is_some_and(|b| b.removal_requested)
                }
                FatalAnswer::HardwareNotLive(k) => {
                    Some(k) == pb
                        && matches!(
                            k,
                            PhaseKind::Added
                                | PhaseKind::Stopped
                                | PhaseKind::Failed
                                | PhaseKind::SurpriseRemoved
                                | PhaseKind::Removing
                                | PhaseKind::RemovePending
                                | PhaseKind::LowPower
                        )
                        || (k == PhaseKind::StopPending && Some(k) == pb && low_power)
                }
                FatalAnswer::DeviceFailed => after.phase(d) == Some(PhaseKind::Failed),
                _ => false, // an answer this oracle does not know is a finding
            };
            if !ok {
                fail!(
                    FatalAnswered,
                    "fatal error in {:?} answered {:?}",
                    pb,
                    answer
                );
            }
            if answer == FatalAnswer::Deferred && !is_cycle_phase(after.phase(d)) {
                self.dev_mut(d)?.fatal_deferred = true;
            }
        }
        // I8: count the reset requests.
        let answer = match *reply {
            Reply::Reset(a) | Reply::Fatal(FatalAnswer::Served(a)) => Some(a),
            _ => None,
        };
        if let Some(answer) = answer {
            let d = input.device().unwrap_or(DeviceId(0));
            let b = self.dev_mut(d)?;
            match answer {
                ResetAnswer::AfterPowerUp => {
                    if !is_power_phase(before.phase(d)) {
                        fail!(I8, "request answered AfterPowerUp in {:?}", before.phase(d));
                    }
                    if !b.power_reset {
                        if b.cycles_owed != 0 {
                            fail!(I8, "AfterPowerUp with {} cycles owed", b.cycles_owed);
                        }
                        b.power_reset = true;
                        b.cycles_owed = 1;
                    }
                }
                ResetAnswer::Started => {
                    if b.cycles_owed == 0 {
                        fail!(I8, "a cycle answered Started but none began");
                    }
                }
                ResetAnswer::Joined => {
                    if b.cycles_owed == 0 {
                        fail!(I8, "request joined a cycle that does not exist");
                    }
                }
                ResetAnswer::Scheduled => {
                    if b.cycles_owed == 0 {
                        fail!(I8, "request scheduled behind a cycle that does not exist");
                    }
                    if !b.followup {
                        b.followup = true;
                        b.cycles_owed += 1;
                    }
                }
            }
        }
        Ok(())
    }

    fn output<S: Sut>(
        &mut self,
        now: Tick,
        before: &S,
        after: &S,
        input: &Input,
        o: &Output,
    ) -> Result<(), Violation> {
        if self.unload_finished {
            fail!(I2, "output {:?} after UnloadMayFinish", o);
        }
        match *o {
            // Checked with the device's state change (`Check::Failure`).
            Output::DeviceFailed { .. } => {}
            Output::FastPath { client, gate } => {
                self.fast_path(now, client, gate, after.epoch(client.device))?
            }
            Output::Notify { client, event } => {
                let Some(c) = self.client_mut(client) else {
                    fail!(I1, "notification {:?} to never-issued {:?}", event, client);
                };
                if c.unregistered {
                    fail!(I1, "{:?} to {:?} after its unregistration", event, client);
                }
                if c.removed || c.revoked || c.fenced {
                    fail!(I1, "{:?} to {:?} after its last event", event, client);
                }
                if c.cut && event != Event::Revoked {
                    fail!(I1, "{:?} to {:?} after its revocation", event, client);
                }
                if c.gone {
                    fail!(I1, "{:?} to {:?} after ClientGone", event, client);
                }
                if let Some(since) = c.callback {
                    fail!(
                        OneCallback,
                        "{:?} to {:?} while its callback since {:?} is in flight",
                        event,
                        client,
                        since
                    );
                }
                c.callback = Some(now);
                // I4: after DeviceFatal only Removed or Revoked follow (not even link news).
                if c.fatal_told && !matches!(event, Event::Removed { .. } | Event::Revoked) {
                    fail!(I4, "{:?} to {:?} after DeviceFatal", event, client);
                }
                match event {
                    Event::Reset => {
                        c.reset_delivered = Some(now);
                        if c.owed_end {
                            fail!(
                                I4,
                                "second Reset to {:?} before its ResetEnd/Removed/Revoked",
                                client
                            );
                        }
                        c.owed_end = true;
                    }
                    Event::ResetEnd { epoch } => {
                        if !c.owed_end {
                            fail!(I4, "ResetEnd to {:?} that was owed none", client);
                        }
                        c.owed_end = false;
                        if Some(epoch) > after.epoch(client.device) {
                            fail!(
                                I6,
                                "ResetEnd{{{:?}}} but the device is at {:?}",
                                epoch,
                                after.epoch(client.device)
                            );
                        }
                    }
                    Event::Recovered { epoch } => {
                        if !c.owed_end {
                            fail!(I4, "Recovered to {:?} that was owed none", client);
                        }
                        c.owed_end = false;
                        // Delivered in the step the cycle ended: the device's epoch. Later,
                        // behind the client's own callback: the epoch the cycle ended at,
                        // which a lost-state power-up may have moved on since (its
                        // `Resumed` with the new epoch waits behind, as for a late
                        // `ResetEnd`).
                        let expected = c.recovery_owed.take().or(after.epoch(client.device));
                        if Some(epoch) != expected {
                            fail!(
                                Recovery,
                                "Recovered{{{:?}}} but its cycle ended at {:?} (the device \
                                 is at {:?})",
                                epoch,
                                expected,
                                after.epoch(client.device)
                            );
                        }
                    }
                    Event::Removed { surprise } => {
                        c.removed = true;
                        c.owed_end = false;
                        let dev_surprise = self.dev(client.device).is_some_and(|d| d.surprise);
                        if surprise && !dev_surprise {
                            fail!(Model, "Removed{{surprise}} without a surprise removal");
                        }
                    }
                    Event::Revoked => {
                        c.revoked = true;
                        c.owed_end = false;
                        c.voter = false;
                    }
                    Event::DeviceFatal => {
                        c.owed_end = false;
                        c.fatal_told = true;
                    }
                    Event::DeviceStarted { epoch } => {
                        c.suspended = false;
                        if Some(epoch) > after.epoch(client.device) {
                            fail!(
                                I6,
                                "DeviceStarted{{{:?}}} at {:?}",
                                epoch,
                                after.epoch(client.device)
                            );
                        }
                    }
                    Event::LinkChanged { port, state } => {
                        let bound = before.client(client).is_some_and(|v| {
                            v.ports.contains(port) && matches!(v.state, ClientState::Active { .. })
                        });
                        let delivery = matches!(
                            input,
                            Input::LinkChanged { .. }
                                | Input::CallbackDone { .. }
                                | Input::CallbackDoneWith { .. }
                        );
                        if !bound || !delivery || after.link(client.device, port) != Some(state) {
                            fail!(
                                I7,
                                "link event {:?} {:?} to {:?}, bound {}, input {:?}, link now {:?}",
                                port,
                                state,
                                client,
                                bound,
                                input,
                                after.link(client.device, port)
                            );
                        }
                    }
                    Event::DeviceStopped => {}
                    Event::Suspending { .. } => {
                        // I14's other half: a power-down asked for during a cycle waits.
                        if is_cycle_phase(after.phase(client.device)) {
                            fail!(I14, "Suspending to {:?} during a reset cycle", client);
                        }
                        c.suspended = true;
                    }
                    Event::Resumed { epoch, .. } => {
                        c.suspended = false;
                        if Some(epoch) > after.epoch(client.device) {
                            fail!(
                                I6,
                                "Resumed{{{:?}}} but the device is at {:?}",
                                epoch,
                                after.epoch(client.device)
                            );
                        }
                    }
                }
            }
            Output::Fence { client } => {
                let Some(c) = self.client_mut(client) else {
                    fail!(Fence, "fence for never-issued {:?}", client);
                };
                if c.gone || c.fence_pending || c.fenced {
                    fail!(Fence, "fence for {:?} asked twice or after it left", client);
                }
                if c.callback.is_none() && c.ops == 0 && c.gate_closing.is_none() {
                    fail!(Fence, "fence for {:?}, which has nothing in flight", client);
                }
                c.fenced = true;
                c.fence_pending = true;
                c.cut = true;
                c.owed_end = false;
                c.voter = false;
            }
            Output::Hardware { device, command } => {
                if command == HardwareCommand::Reset {
                    if let Some(g) = self.dev(device).and_then(|b| b.group) {
                        self.group_reset(device, g, after)?;
                    }
                }
                let b = self.dev_mut(device)?;
                // I14: in Dx only the power-up (or a restart after a stop), and the release
                // of resources, which touches no register.
                if b.low_power
                    && !matches!(
                        command,
                        HardwareCommand::PowerUp
                            | HardwareCommand::ReleaseResources
                            | HardwareCommand::Start
                    )
                {
                    fail!(
                        I14,
                        "{:?} commanded while {:?} is in a low-power state",
                        command,
                        device
                    );
                }
                if b.surprise && command != HardwareCommand::ReleaseResources {
                    fail!(
                        I3,
                        "{:?} commanded after surprise removal of {:?}",
                        command,
                        device
                    );
                }
                match command {
                    HardwareCommand::Reset => {
                        if b.removal_requested {
                            fail!(
                                I3,
                                "hardware reset of {:?} after removal was requested",
                                device
                            );
                        }
                        if b.reset_in_flight {
                            fail!(I3, "second hardware reset in flight on {:?}", device);
                        }
                        if b.cycles_owed == 0 {
                            fail!(I8, "hardware reset with no cycle");
                        }
                        let group = b.group;
                        let recover = match group {
                            None => b.all_voters_recover(),
                            Some(_) => false, // checked for the whole group below
                        };
                        if recover {
                            fail!(
                                Recovery,
                                "hardware reset of {:?} though every voter that answered \
                                 ({}) can recover",
                                device,
                                b.votes_recover
                            );
                        }
                        if let Some(h) = b.nacked {
                            fail!(
                                I3,
                                "hardware reset of {:?} after {:?} refused it",
                                device,
                                h
                            );
                        }

                        if let Some((h, _)) = b
                            .clients
                            .iter()
                            .find(|(_, c)| c.voter && !c.gone && !c.unregistered && !c.cut)
                        {
                            fail!(
                                I3,
                                "hardware reset of {:?} while voter {:?} has not answered",
                                device,
                                h
                            );
                        }
                        b.reset_in_flight = true;
                    }
                    HardwareCommand::Start => {
                        if b.start_in_flight {
                            fail!(I3, "second start in flight");
                        }
                        b.start_in_flight = true;
                    }
                    HardwareCommand::ReleaseResources => {
                        if !b.resources_held {
                            fail!(
                                Resources,
                                "{:?} releases resources no start claimed (or released twice)",
                                device
                            );
                        }
                        b.resources_held = false;
                    }
                    HardwareCommand::Shutdown => {
                        if !b.resources_held {
                            fail!(Resources, "{:?} shut down with nothing started", device);
                        }
                    }
                    HardwareCommand::PowerDown => {
                        if b.power_down_in_flight || b.power_up_in_flight {
                            fail!(I3, "power-down of {:?} with a power command out", device);
                        }
                        b.power_down_in_flight = true;
                        b.low_power = true;
                    }
                    HardwareCommand::PowerUp => {
                        if !b.low_power || b.power_up_in_flight || b.power_down_in_flight {
                            fail!(I3, "power-up of {:?} that is not down", device);
                        }
                        b.power_up_in_flight = true;
                        b.sleep = false;
                    }
                }
                if command == HardwareCommand::Start {
                    b.low_power = false;
                    b.sleep = false;
                }
                // I15: no command but a start while a gate is open or its close unanswered.
                if command != HardwareCommand::Start {
                    if let Some((h, c)) = b
                        .clients
                        .iter()
                        .find(|(_, c)| c.gate_open || c.gate_closing.is_some())
                    {
                        fail!(
                            I15,
                            "{:?} of {:?} while client {:?}'s fast-path gate is open ({}) or \
                             its close unanswered (since {:?})",
                            command,
                            device,
                            h,
                            c.gate_open,
                            c.gate_closing
                        );
                    }
                }
                // I12 (after the command's own checks, so a reset with a voter left is I3): the hardware is touched only once every operation is done or fenced.
                if command != HardwareCommand::Start {
                    if let Some((h, c)) = b
                        .clients
                        .iter()
                        .find(|(_, c)| c.ops > 0 && c.carried_at.is_some())
                    {
                        fail!(
                            I15,
                            "{:?} of {:?} while client {:?} has {} hardware operations in \
                             flight, some carried by a fast-path close (fence asked: {})",
                            command,
                            device,
                            h,
                            c.ops,
                            c.fence_pending
                        );
                    }
                    if let Some((h, c)) = b.clients.iter().find(|(_, c)| c.ops > 0) {
                        fail!(
                            I12,
                            "{:?} of {:?} while client {:?} has {} hardware operations in \
                             flight (fence asked: {}, done: no)",
                            command,
                            device,
                            h,
                            c.ops,
                            c.fence_pending
                        );
                    }
                }
            }
            Output::Complete { device, token, .. } => {
                let b = self.dev_mut(device)?;
                match b.tokens.get_mut(&token.0) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        if *n == 0 {
                            b.tokens.remove(&token.0);
                        }
                    }
                    _ => fail!(
                        I5,
                        "token {:?} of {:?} completed but not owed",
                        token,
                        device
                    ),
                }
            }
            Output::ResetCycleFinished { device, outcome } => {
                if let CycleOutcome::CannotReset { member, reason } = outcome {
                    self.cannot_reset(device, member, reason, before, after)?;
                }
                let b = self.dev_mut(device)?;
                if b.cycles_owed == 0 {
                    if b.fatal_deferred {
                        // The answer to a deferred fatal error.
                        b.fatal_deferred = false;
                        return Ok(());
                    }
                    if b.group.is_some() && matches!(outcome, CycleOutcome::CannotReset { .. }) {
                        // A member pulled into its group's cycle while powering up: the
                        // cycle that ended without a reset drops the reset it waited for.
                        return Ok(());
                    }
                    fail!(I8, "ResetCycleFinished({:?}) with no cycle owed", outcome);
                }
                if outcome == CycleOutcome::FoldedIntoStop {
                    fail!(FatalAnswered, "a cycle ended FoldedIntoStop");
                }
                if let CycleOutcome::Recovered(e) = outcome {
                    let b = self.dev_mut(device)?;
                    // A client still owed the end of an earlier cycle keeps that epoch: its
                    // `Recovered` waits behind its callback and says how *that* cycle ended.
                    for c in b.clients.values_mut().filter(|c| c.owed_end) {
                        c.recovery_owed.get_or_insert(e);
                    }
                    if Some(e) != before.epoch(device) || Some(e) != after.epoch(device) {
                        fail!(
                            Recovery,
                            "cycle recovered at {:?}; device was at {:?}, is at {:?}",
                            e,
                            before.epoch(device),
                            after.epoch(device)
                        );
                    }
                    // Only when every voter said it can recover (and at least one did).
                    if !b.all_voters_recover() {
                        fail!(
                            Recovery,
                            "{:?}'s cycle ended without a reset: {} voters needed one, {} \
                             said they can recover, {} left and {} were revoked without \
                             saying so",
                            device,
                            b.votes_reset,
                            b.votes_recover,
                            b.voters_left,
                            b.silent_revoked
                        );
                    }
                }
                let b = self.dev_mut(device)?;
                b.cycles_owed -= 1;
                b.power_reset = false;
                let followup = b.followup;
                b.followup = false;
                b.cycle_since = None;
                if followup && b.cycles_owed == 1 && matches!(outcome, CycleOutcome::Completed(_)) {
                    // The follow-up cycle begins now: every active client votes.
                    self.begin_cycle(device, now)?;
                } else if b.cycles_owed == 0
                    && b.group.is_some()
                    && is_cycle_phase(after.phase(device))
                {
                    // Its group's next cycle began in this step (another member's
                    // follow-up): every active client votes.
                    b.cycles_owed = 1;
                    self.begin_cycle(device, now)?;
                }
                let b = self.dev_mut(device)?;
                if let CycleOutcome::Completed(e) = outcome {
                    if e.0 <= b.epoch {
                        fail!(I6, "cycle completed at {:?}, not above {}", e, b.epoch);
                    }
                    if Some(e) != after.epoch(device) {
                        fail!(
                            I6,
                            "cycle completed at {:?}, device at {:?}",
                            e,
                            after.epoch(device)
                        );
                    }
                    b.epoch = e.0;
                }
                if b.cycles_owed == 0 {
                    for c in b.clients.values_mut() {
                        c.voter = false;
                    }
                }
            }
            Output::ClientGone { client } => {
                let Some(c) = self.client_mut(client) else {
                    fail!(Handles, "ClientGone for never-issued {:?}", client);
                };
                if c.gone {
                    fail!(Handles, "ClientGone twice for {:?}", client);
                }
                if c.gate_open || c.gate_closing.is_some() {
                    fail!(
                        I15,
                        "ClientGone for {:?} with its fast-path gate not closed",
                        client
                    );
                }
                if c.callback.is_some() || c.fence_pending {
                    fail!(
                        Handles,
                        "ClientGone for {:?} with a callback (since {:?}) or fence out",
                        client,
                        c.callback
                    );
                }
                if c.owed_end && !c.unregistered {
                    fail!(
                        I4,
                        "{:?} gone while still owed ResetEnd/Removed/Revoked",
                        client
                    );
                }
                c.gone = true;
                c.voter = false;
            }
            Output::DeviceRemoved { device } => {
                let b = self.dev_mut(device)?;
                if !b.present {
                    fail!(Handles, "DeviceRemoved for absent {:?}", device);
                }
                if let Some((h, _)) = b.clients.iter().find(|(_, c)| !c.gone) {
                    fail!(
                        Handles,
                        "{:?} removed while client {:?} has not detached",
                        device,
                        h
                    );
                }
                if b.start_in_flight
                    || b.reset_in_flight
                    || b.power_down_in_flight
                    || b.power_up_in_flight
                {
                    fail!(I3, "{:?} removed with a hardware command in flight", device);
                }
                b.low_power = false;
                b.sleep = false;
                if b.cycles_owed != 0 {
                    fail!(
                        I8,
                        "{:?} removed with {} cycles unanswered",
                        device,
                        b.cycles_owed
                    );
                }
                if b.resources_held {
                    fail!(
                        Resources,
                        "{:?} removed with its resources never released",
                        device
                    );
                }
                b.present = false;
                b.removal_requested = false;
                b.group = None;
            }
            Output::UnloadMayFinish => {
                if !self.unload_requested {
                    fail!(I2, "UnloadMayFinish without unload");
                }
                if let Some(i) = self.devices.iter().position(|b| b.present) {
                    fail!(I2, "UnloadMayFinish with device {} present", i);
                }
                if let Some((h, _)) = self
                    .handles()
                    .find(|(_, c)| !c.gone || c.callback.is_some() || c.fence_pending)
                {
                    fail!(I2, "UnloadMayFinish with client {:?} left", h);
                }
                self.unload_finished = true;
            }
        }
        Ok(())
    }

    /// The members of `g`, by device id.
    fn members(&self, g: GroupId) -> Vec<DeviceId> {
        (0..self.devices.len())
            .filter(|&i| self.devices[i].group == Some(g) && self.devices[i].present)
            .map(|i| DeviceId(i as u8))
            .collect()
    }

    /// A hardware reset commanded through `carrier`, a member of `g` (I3, I12 per group):
    /// exactly one reset in flight in the group; every other member still there has all
    /// its voters answered, nothing in flight, and executes the group's reset with it; no
    /// member refused it; and not every voter of every member can recover.
    fn group_reset<S: Sut>(
        &self,
        carrier: DeviceId,
        g: GroupId,
        after: &S,
    ) -> Result<(), Violation> {
        let mut recover = true;
        for d in self.members(g) {
            let b = &self.devices[usize::from(d.0)];
            if b.surprise || b.removal_requested {
                continue; // it left the cycle
            }
            if b.cycles_owed > 0 {
                if let Some(h) = b.nacked {
                    fail!(
                        I3,
                        "group reset through {:?} after {:?} refused it",
                        carrier,
                        h
                    );
                }
                recover &= b.all_voters_recover();
            }
            if d == carrier {
                continue;
            }
            if b.reset_in_flight {
                fail!(
                    I3,
                    "second hardware reset in group {:?}: {:?} while {:?}'s is in flight",
                    g,
                    carrier,
                    d
                );
            }
            let phase = after.phase(d);
            if !matches!(
                phase,
                Some(PhaseKind::Executing | PhaseKind::Failed | PhaseKind::Absent)
            ) {
                fail!(
                    I3,
                    "group {:?} reset through {:?} while member {:?} is {:?}, not quiesced \
                     for it",
                    g,
                    carrier,
                    d,
                    phase
                );
            }
            if let Some((h, _)) = b
                .clients
                .iter()
                .find(|(_, c)| c.voter && !c.gone && !c.unregistered && !c.cut)
            {
                fail!(
                    I3,
                    "group reset through {:?} while voter {:?} of member {:?} has not answered",
                    carrier,
                    h,
                    d
                );
            }
            if let Some((h, c)) = b.clients.iter().find(|(_, c)| c.ops > 0) {
                fail!(
                    I12,
                    "group reset through {:?} while client {:?} of member {:?} has {} \
                     operations in flight",
                    carrier,
                    h,
                    d,
                    c.ops
                );
            }
        }
        if recover {
            fail!(
                Recovery,
                "group {:?} reset through {:?} though every voter of every member can recover",
                g,
                carrier
            );
        }
        Ok(())
    }

    /// A cycle of `device` ended without a reset because `member` could not take part:
    /// the clients told `RESET` are owed `Recovered` at the device's epoch (I4), and the
    /// member named did not vanish (a vanished member leaves).
    fn cannot_reset<S: Sut>(
        &mut self,
        device: DeviceId,
        member: DeviceId,
        reason: CannotResetReason,
        before: &S,
        after: &S,
    ) -> Result<(), Violation> {
        // (Its epoch may have moved in this step: a completed reset, then a follow-up
        // that could not run.)
        let _ = before;
        if let Some(e) = after.epoch(device) {
            for c in self
                .dev_mut(device)?
                .clients
                .values_mut()
                .filter(|c| c.owed_end)
            {
                c.recovery_owed.get_or_insert(e); // an earlier cycle's end keeps its epoch
            }
        }
        let Some(m) = self.dev(member) else {
            fail!(Handles, "CannotReset names {:?}, beyond capacity", member);
        };
        if let CannotResetReason::MemberState(_) = reason {
            if m.surprise || m.removal_requested || !m.present {
                fail!(
                    Group,
                    "{:?}'s cycle ended for member {:?}, which vanished ({:?}): it should \
                     have left the cycle",
                    device,
                    member,
                    reason
                );
            }
        }
        if let CannotResetReason::ClientRefused(h) = reason {
            if m.nacked != Some(h) {
                fail!(I8, "CannotReset names {:?}, which refused nothing", h);
            }
        }
        Ok(())
    }

    /// Mark every live client of `d` a voter of a cycle beginning at `now`.
    fn begin_cycle(&mut self, d: DeviceId, now: Tick) -> Result<(), Violation> {
        let b = self.dev_mut(d)?;
        b.cycle_since = Some(now);
        b.nacked = None;
        b.votes_reset = 0;
        b.votes_recover = 0;
        b.silent_revoked = 0;
        b.voters_left = 0;
        b.drain_since = None;
        for c in b.clients.values_mut() {
            c.voter = c.addressable() && !c.cut;
            c.reset_delivered = None;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn end_of_step<S: Sut>(
        &mut self,
        now: Tick,
        before: &S,
        input: &Input,
        outputs: &[Output],
        after: &S,
        revoked_now: &[ClientHandle],
        books: &[DeviceBook],
    ) -> Result<(), Violation> {
        let config = after.config();
        // I15: a revocation closes the client's gate (or a fence covers it).
        if let Some((h, _)) = self.handles().find(|(_, c)| c.cut && c.gate_open) {
            fail!(
                I15,
                "{:?} was revoked but its fast-path gate is left open",
                h
            );
        }
        // A fatal error a pending query held, handed on when the query was cancelled in Dx
        // or during its power transition: it now waits for the power-up, as a reset
        // request in Dx does (I8), and the power-up's cycle answers it.
        for i in 0..S::DEVICES {
            let d = DeviceId(i as u8);
            let waits = matches!(
                after.phase_detail(d),
                Some(
                    Phase::LowPower { reset: true, .. }
                        | Phase::PoweringDown {
                            reset: true,
                            back_to: None,
                            ..
                        }
                        | Phase::PoweringUp {
                            reset: true,
                            back_to: None,
                            ..
                        }
                )
            );
            let b = self.dev_mut(d)?;
            if b.fatal_deferred && waits {
                // (A reset already waiting for the power-up, e.g. the group's cycle that
                // pulled this member in, answers it too: requests coalesce.)
                b.fatal_deferred = false;
                if !b.power_reset {
                    b.power_reset = true;
                    b.cycles_owed = 1;
                }
            }
        }
        for i in 0..S::DEVICES {
            let device = DeviceId(i as u8);
            let (pb, pa) = (before.phase(device), after.phase(device));
            // Every state change is one the machine lists.
            if let (Some(from), Some(to)) = (pb, pa) {
                let grouped = self.devices[i].group.is_some()
                    || books.get(i).is_some_and(|b| b.group.is_some());
                let group_moved = grouped && group_move(from, to);
                if !(is_listed(from, input.kind(), to) || group_moved) {
                    fail!(
                        Transition,
                        "{:?} went from {:?} to {:?} on {:?}, a change TRANSITIONS does not list",
                        device,
                        from,
                        to,
                        input
                    );
                }
            }
            // Entering Failed is reported to the owner exactly once, with its cause; nothing
            // else is reported as a failure.
            // (Cancel remove returns to a failure already reported.)
            let entered_failed = pa == Some(PhaseKind::Failed)
                && !matches!(pb, Some(PhaseKind::Failed | PhaseKind::RemovePending));
            let reported = outputs
                .iter()
                .filter(|o| matches!(o, Output::DeviceFailed { device: d, .. } if *d == device))
                .count();
            if reported != usize::from(entered_failed) {
                fail!(
                    Failure,
                    "{:?} went from {:?} to {:?} on {:?} with {} DeviceFailed outputs",
                    device,
                    pb,
                    pa,
                    input,
                    reported
                );
            }
            // A stop releases the hardware resources when it ends (at once, or once the
            // operations in flight are done or fenced).
            if pa == Some(PhaseKind::Stopped)
                && matches!(pb, Some(PhaseKind::StopPending | PhaseKind::Stopping))
                && !outputs.iter().any(|o| {
                    *o == Output::Hardware {
                        device,
                        command: HardwareCommand::ReleaseResources,
                    }
                })
            {
                fail!(
                    StopRelease,
                    "the stop of {:?} ended without releasing its resources: {:?}",
                    device,
                    outputs
                );
            }
            // When a stop or a hardware reset began waiting for operations in flight.
            let voters_left = self.devices[i].clients.values().any(|c| c.voter);
            let b = &mut self.devices[i];
            b.drain_since = match pa {
                Some(PhaseKind::Stopping) if pb != Some(PhaseKind::Stopping) => Some(now),
                Some(PhaseKind::Stopping) => b.drain_since,
                // A power-down drains operations like a stop, from the power-down's `now`.
                Some(PhaseKind::PoweringDown) if pb != Some(PhaseKind::PoweringDown) => Some(now),
                Some(PhaseKind::PoweringDown) => b.drain_since,
                Some(PhaseKind::Quiescing) if voters_left => None,
                Some(PhaseKind::Quiescing) => b.drain_since.or(Some(now)),
                _ => None,
            };
        }
        // I13: a device failed by a timeout only when a trusted client missed a deadline.
        if *input == Input::Timeout {
            for (i, b) in books.iter().enumerate() {
                let d = DeviceId(i as u8);
                let pb = before.phase(d);
                if !matches!(pb, Some(PhaseKind::Running | PhaseKind::Quiescing))
                    || after.phase(d) != Some(PhaseKind::Failed)
                {
                    continue;
                }
                let due = config.trusted_policy == TrustedTimeoutPolicy::FailDevice
                    && b.clients.iter().any(|(&(slot, generation), c)| {
                        let h = ClientHandle {
                            device: d,
                            slot,
                            generation,
                        };
                        let active = matches!(
                            before.client(h).map(|v| v.state),
                            Some(ClientState::Active { .. })
                        );
                        c.trusted
                            && active
                            && (revoked_now.contains(&h)
                                && c.callback
                                    .is_some_and(|t| passed(now, t, config.callback_timeout))
                                || c.voter
                                    && c.reset_delivered.is_some_and(|t| {
                                        passed(now, t, config.trusted_ack_timeout)
                                    }))
                    });
                if !due {
                    fail!(
                        I13,
                        "{:?} failed at {:?} with no trusted deadline passed (cycle since \
                         {:?}; clients {:?}; revoked now {:?})",
                        d,
                        now,
                        b.cycle_since,
                        b.clients,
                        revoked_now
                    );
                }
            }
        }
        // I5: requests that complete at once did so.
        if let Some((d, t)) = token_of(input) {
            // (A stop completes once no operation is in flight.)
            let at_once = matches!(
                input.kind(),
                InputKind::QueryStop
                    | InputKind::CancelStop
                    | InputKind::QueryRemove
                    | InputKind::CancelRemove
            );
            if at_once
                && !outputs.iter().any(|o| {
                    matches!(o, Output::Complete { device, token, .. } if *device == d && token.0 == t)
                })
            {
                fail!(I5, "{:?} accepted but not completed at once", input);
            }
        }
        for (i, b) in self.devices.iter().enumerate() {
            let d = DeviceId(i as u8);
            // I8: the cycles owed match the device state.
            let phase = after.phase(d);
            let ok = match phase {
                Some(PhaseKind::Quiescing) => b.cycles_owed == 1,
                Some(PhaseKind::Executing) => (1..=2).contains(&b.cycles_owed),
                Some(PhaseKind::PoweringDown | PhaseKind::LowPower | PhaseKind::PoweringUp) => {
                    b.cycles_owed == u32::from(b.power_reset)
                }
                _ => b.cycles_owed == 0,
            };
            if !ok {
                fail!(
                    I8,
                    "{:?} in {:?} with {} cycles owed a ResetCycleFinished",
                    d,
                    phase,
                    b.cycles_owed
                );
            }
            // I5: a removed device owes no token.
            if !b.present && !b.tokens.is_empty() {
                fail!(
                    I5,
                    "{:?} gone with tokens {:?} never completed",
                    d,
                    b.tokens
                );
            }
            // A fatal error deferred by a state that is left is answered in that step.
            if b.fatal_deferred
                && !matches!(
                    phase,
                    Some(
                        PhaseKind::Starting
                            | PhaseKind::StopPending
                            | PhaseKind::Stopping
                            | PhaseKind::RemovePending
                    )
                )
                && !power_for_query(after, d)
            {
                fail!(
                    FatalAnswered,
                    "{:?} left the state that deferred a fatal error ({:?} -> {:?}) unanswered",
                    d,
                    before.phase(d),
                    phase
                );
            }
            let deadline = after.poll_timeout();
            // A deadline beyond the clock's range is never reached: nothing to cover.
            let covers = |t: Option<Tick>| t.is_none_or(|t| deadline.is_some_and(|p| p <= t));
            // The owner's callback bookkeeping agrees with the machine's, every deadline
            // is in `poll_timeout`, and nobody owed an answer to `RESET` is left hanging.
            for (&(slot, generation), c) in &b.clients {
                let h = ClientHandle {
                    device: d,
                    slot,
                    generation,
                };
                if let Some(v) = after.client(h) {
                    if v.callback_in_flight != c.callback.is_some()
                        || v.fence_requested != c.fence_pending
                    {
                        fail!(
                            Handles,
                            "{:?}: machine says callback {} fence {}, owner {:?} {}",
                            h,
                            v.callback_in_flight,
                            v.fence_requested,
                            c.callback,
                            c.fence_pending
                        );
                    }
                    if let (Some(t), false) = (c.callback, c.fence_pending) {
                        if !covers(end(t, config.callback_timeout)) {
                            fail!(
                                I9,
                                "callback to {:?} since {:?}: its deadline is not in \
                                 poll_timeout {:?}",
                                h,
                                t,
                                deadline
                            );
                        }
                    }
                    let kind = if c.trusted {
                        ClientKind::Trusted
                    } else {
                        ClientKind::Untrusted
                    };
                    if let (true, false, Some(t)) = (c.voter, c.cut, c.reset_delivered) {
                        if !covers(end(t, ack_timeout(&config, kind))) {
                            fail!(
                                I9,
                                "voter {:?} whose RESET was delivered at {:?}: deadline not \
                                 in poll_timeout {:?}",
                                h,
                                t,
                                deadline
                            );
                        }
                    }
                    // A close unanswered has a deadline (I9, I15).
                    if let (Some(t), false) = (c.gate_closing, c.fence_pending) {
                        if !covers(end(t, config.operation_timeout)) {
                            fail!(
                                I9,
                                "the close of {:?}'s gate since {:?}: its deadline is not in \
                                 poll_timeout {:?}",
                                h,
                                t,
                                deadline
                            );
                        }
                    }
                    // An operation a stop, reset or teardown waits for has a deadline.
                    if c.ops > 0 && !c.fence_pending {
                        let wait = match phase {
                            Some(
                                PhaseKind::Stopping
                                | PhaseKind::Quiescing
                                | PhaseKind::PoweringDown,
                            ) => b.drain_since,
                            Some(PhaseKind::Removing) => b.removal_since,
                            _ => None,
                        };
                        let timeout = if phase == Some(PhaseKind::Removing) {
                            config.detach_timeout
                        } else {
                            config.operation_timeout
                        };
                        let floor = match phase {
                            Some(PhaseKind::Removing) => b.removal_floor.unwrap_or(Tick(0)),
                            _ => Tick(0),
                        };
                        if let Some(t) = wait {
                            if !covers(end(t, timeout).map(|at| at.max(floor))) {
                                fail!(
                                    I9,
                                    "{:?} holds {} operations a wait since {:?} needs gone; \
                                     deadline not in poll_timeout {:?}",
                                    h,
                                    c.ops,
                                    t,
                                    deadline
                                );
                            }
                        }
                    }
                    if v.operations_in_flight as u32 != c.ops && !c.fence_pending {
                        fail!(
                            Handles,
                            "{:?}: machine counts {} operations in flight, owner {}",
                            h,
                            v.operations_in_flight,
                            c.ops
                        );
                    }
                    if let (ClientState::Removed, Some(PhaseKind::Removing), Some(t)) =
                        (v.state, phase, b.removal_since)
                    {
                        let floor = b.removal_floor.unwrap_or(Tick(0));
                        if !covers(end(t, config.detach_timeout).map(|at| at.max(floor))) {
                            fail!(
                                I9,
                                "{:?} must detach by {:?}, not in poll_timeout {:?}",
                                h,
                                end(t, config.detach_timeout),
                                deadline
                            );
                        }
                    }
                    if c.owed_end
                        && !c.cut
                        && !c.unregistered
                        && b.cycles_owed == 0
                        && !v.callback_in_flight
                        && v.waiting_events == 0
                    {
                        fail!(
                            I4,
                            "{:?} was told RESET, its cycle is over and nothing more is \
                             coming to it ({:?})",
                            h,
                            phase
                        );
                    }
                    // I14: a client told Suspending is told it is back once the device is.
                    if c.suspended
                        && !c.cut
                        && !c.unregistered
                        && !c.removed
                        && !c.revoked
                        && matches!(
                            phase,
                            Some(PhaseKind::Running | PhaseKind::Quiescing | PhaseKind::Executing)
                        )
                        && !v.callback_in_flight
                        && v.waiting_events == 0
                    {
                        fail!(
                            I14,
                            "{:?} was told Suspending, the device is back ({:?}) and nothing \
                             more is coming to it",
                            h,
                            phase
                        );
                    }
                    if c.gone {
                        fail!(Handles, "{:?} still occupies its slot after ClientGone", h);
                    }
                } else if !c.gone && b.present {
                    fail!(Handles, "{:?} vanished without ClientGone", h);
                }
            }
        }
        if after.driver_phase() == DriverPhase::Unloaded && !self.unload_finished {
            fail!(I2, "machine unloaded without UnloadMayFinish");
        }
        // I7 (metamorphic): a registration's answer does not depend on the links.
        if self.metamorphic_links {
            if let Input::Register { device, .. } = *input {
                let mut other = before.clone();
                let mut flipped = false;
                for p in 0..S::PORTS {
                    let port = pnp_lifecycle::PhysPort(p as u8);
                    let state = match other.link(device, port) {
                        Some(pnp_lifecycle::LinkState::Active) => pnp_lifecycle::LinkState::Down,
                        Some(_) => pnp_lifecycle::LinkState::Active,
                        None => continue,
                    };
                    if other
                        .handle(
                            before.now(),
                            Input::LinkChanged {
                                device,
                                port,
                                state,
                            },
                        )
                        .is_ok()
                    {
                        flipped = true;
                    }
                    while other.poll_output().is_some() {}
                }
                if flipped {
                    let mut plain = before.clone();
                    let a = plain.handle(now, *input);
                    let b = other.handle(now, *input);
                    if a != b {
                        fail!(
                            I7,
                            "Register answered {:?}, but {:?} with other link states",
                            a,
                            b
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// The obligations that must be met once everything settled (after
    /// the testkit's `world::drive_to_quiescence`): no token, cycle, callback or client left.
    pub fn check_quiescent(&self) -> Result<(), Violation> {
        for (i, b) in self.devices.iter().enumerate() {
            if !b.tokens.is_empty() {
                fail!(I5, "device {} tokens never completed: {:?}", i, b.tokens);
            }
            if b.cycles_owed != 0 {
                fail!(
                    I8,
                    "device {} has {} cycles never finished",
                    i,
                    b.cycles_owed
                );
            }
            if b.present {
                fail!(I9, "device {} never removed", i);
            }
        }
        if let Some((h, c)) = self
            .handles()
            .find(|(_, c)| !c.gone || c.callback.is_some() || c.fence_pending)
        {
            fail!(I9, "client {:?} left: {:?}", h, c);
        }
        if !self.unload_finished {
            fail!(I9, "unload never finished");
        }
        Ok(())
    }
}

/// How long a voter of `kind` has to answer `RESET`.
/// When a wait of `ticks` from `from` ends: `None` beyond the clock's range (DESIGN r3: such
/// a deadline is carried exactly, never cut short, so the clock never reaches it).
pub fn end(from: Tick, ticks: u64) -> Option<Tick> {
    from.0.checked_add(ticks).map(Tick)
}

/// Whether a wait of `ticks` from `from` has ended at `now`.
pub fn passed(now: Tick, from: Tick, ticks: u64) -> bool {
    end(from, ticks).is_some_and(|at| now >= at)
}

/// How long a voter of `kind` has to answer `RESET`.
pub fn ack_timeout(config: &Config, kind: ClientKind) -> u64 {
    match kind {
        ClientKind::Trusted => config.trusted_ack_timeout,
        ClientKind::Untrusted => config.untrusted_ack_timeout,
    }
}

/// The (device, token) of a token-bearing input.
pub fn token_of(input: &Input) -> Option<(DeviceId, u32)> {
    Some((input.device()?, input.token()?.0))
}

/// The client a client input names.
pub fn client_of(input: &Input) -> Option<ClientHandle> {
    match *input {
        Input::Unregister { client }
        | Input::CallbackDone { client }
        | Input::CallbackDoneWith { client, .. }
        | Input::FenceDone { client }
        | Input::AcquireInterface { client }
        | Input::ResetRequest { client }
        | Input::ResetExecute { client }
        | Input::Bind { client, .. }
        | Input::Hold { client }
        | Input::ReleaseHold { client }
        | Input::Access { client, .. }
        | Input::AccessDone { client }
        | Input::CanRecover { client }
        | Input::CannotPause { client }
        | Input::CanPause { client } => Some(client),
        _ => None,
    }
}

// The README's example compiles and runs as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// A state change a member of a reset group may make on an input to another member (or
/// the time): its group's cycle begins, resets, recovers or ends without a reset.
fn group_move(from: PhaseKind, to: PhaseKind) -> bool {
    use PhaseKind::*;
    matches!(
        (from, to),
        (Running, Quiescing | Executing)
            | (LowPower, PoweringUp)
            | (Quiescing, Executing | Running | PoweringDown)
            | (
                Executing,
                Running | Quiescing | Failed | Removing | Absent | PoweringDown
            )
            | (Removing, Absent)
    )
}
