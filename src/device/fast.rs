//! The fast path's gates (DESIGN.md "Operations: the fast path", invariant I15): the
//! machine decides, per client, when the owner may admit the client's hardware operations
//! without it, and takes the count back before any drain.
//!
//! The rule, in one place ([`Device::gate_wanted`]): a client's gate is open exactly while
//! the device is running in D0 with nothing to drain (phase `Running`: no stop, reset,
//! removal teardown or power-down under way) and the client is registered, neither
//! revoked nor fenced, and holds the interface of the device's current epoch. Where one
//! client changes (register, acquire, revoke, unregister) only its gate is reconciled;
//! where the device's state changes, every occupied slot's.
//!
//! Closing is a handshake: [`Output::FastPath`] `Close`, answered by
//! [`Input::FastPathClosed`] with the operations still in flight. Until the answer the
//! client counts as having operations of unknown number in flight (`Slot::ops_pending`),
//! so no stop, hardware reset, power-down or removal teardown proceeds (I12); the answer's
//! count joins the client's operations, which then end through the machine. A close not
//! answered within [`Config::operation_timeout`] revokes and fences the client (I9).

use super::deadlines::due;
use super::{Ctx, Device, Phase};
use crate::registry::{ClientState, Registry};
use crate::table::PhaseKind;
use crate::types::*;

value_type! {
    /// A client's fast-path gate as the machine last told the owner.
    pub enum Gate {
        /// Shut: every bracket goes through the machine.
        Shut,
        /// Opened ([`FastPathGate::Open`]): the owner may admit operations itself.
        Open,
        /// A close was asked at `since` ([`FastPathGate::Close`]); the answer is awaited.
        Closing {
            /// When the close was asked: its deadline counts from here.
            since: Tick,
        },
    }
}

impl<const C: usize, const P: usize> Device<C, P> {
    /// Whether the client in slot `index` should have its gate open now (the rule).
    fn gate_wanted(&self, index: usize) -> bool {
        let Some(slot) = self.registry.slot(index) else {
            return false;
        };
        let client_ok = match slot.state {
            ClientState::Active { fresh, .. } => fresh || planted!(GateOpenedAtStaleEpoch),
            ClientState::Revoked => planted!(GateOpenedForRevokedClient),
            _ => false,
        };
        let unfenced = !slot.fence_requested() || planted!(GateOpenedForRevokedClient);
        self.fast_path && self.phase == Phase::Running && client_ok && unfenced
    }

    /// Open or close the gate of the client in slot `index` to follow the rule. A gate
    /// whose close is not answered yet stays closing: the answer reconciles it again.
    pub(super) fn gate_follows_client<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        index: usize,
    ) {
        let wanted = self.gate_wanted(index);
        let epoch = self.epoch;
        let Some(slot) = self.registry.slot_mut(index) else {
            return;
        };
        let reopen =
            planted!(GateReopenedWhileClosing) && matches!(slot.gate, Gate::Closing { .. });
        match (slot.gate, wanted) {
            (Gate::Shut, true) => {
                slot.gate = Gate::Open;
                let client = Registry::<C>::handle(cx.device, index, slot);
                cx.out.push(Output::FastPath {
                    client,
                    gate: FastPathGate::Open { epoch },
                });
            }
            (Gate::Closing { .. }, true) if reopen => {
                let had_ops = slot.ops_pending();
                slot.gate = Gate::Open;
                let client = Registry::<C>::handle(cx.device, index, slot);
                self.registry.ops_changed(index, had_ops);
                cx.out.push(Output::FastPath {
                    client,
                    gate: FastPathGate::Open { epoch },
                });
            }
            (Gate::Open, false) => self.close_gate(cx, index),
            _ => {}
        }
    }

    /// Ask the owner to close an open gate (nothing if it is shut or closing already).
    pub(super) fn close_gate<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, index: usize) {
        let Some(slot) = self.registry.slot_mut(index) else {
            return;
        };
        if slot.gate != Gate::Open {
            return;
        }
        let had_ops = slot.ops_pending();
        slot.gate = Gate::Closing { since: cx.now };
        let client = Registry::<C>::handle(cx.device, index, slot);
        self.registry.ops_changed(index, had_ops);
        // Its deadline joins the device's (found again at the input's end).
        self.earliest.invalidate();
        cx.out.push(Output::FastPath {
            client,
            gate: FastPathGate::Close,
        });
    }

    /// The device's state changed (from `was`), called by `set_phase`. Leaving running,
    /// every open gate closes at once, before anything drains. Entering it, the gates open
    /// once the input is done (`open_gates_when_settled`): an input that only passes
    /// through running (a power-up that serves a waiting reset) opens nothing.
    pub(super) fn gate_follows_phase<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        was: PhaseKind,
    ) {
        let running = self.phase.kind() == PhaseKind::Running;
        if !self.fast_path || (was == PhaseKind::Running) == running {
            return;
        }
        if running {
            self.gates_to_open = true;
            return;
        }
        if planted!(GateLeftOpenIntoDx) && self.phase.kind() == PhaseKind::PoweringDown {
            return;
        }
        for index in self.registry.occupied() {
            self.gate_follows_client(cx, index);
        }
    }

    /// At the end of an input that brought the device into running: open the gates the
    /// rule wants open (only then: never a scan per ordinary input).
    #[inline]
    pub(crate) fn open_gates_when_settled<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        if !self.gates_to_open {
            return;
        }
        self.gates_to_open = false;
        if self.phase != Phase::Running {
            return;
        }
        for index in self.registry.occupied() {
            self.gate_follows_client(cx, index);
        }
    }

    /// [`Input::FastPathClosed`]: the owner closed the gate; `in_flight` operations that
    /// began on the fast path join the client's count and end through the machine.
    #[inline(never)]
    pub(super) fn fast_path_closed<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        client: ClientHandle,
        in_flight: u32,
    ) -> Result<(), Error> {
        let index = self.registry.current(client)?;
        let slot = self.registry.slot_mut(index).ok_or(Error::UnknownClient)?;
        if !matches!(slot.gate, Gate::Closing { .. }) {
            return Err(Error::FastPathNotClosing);
        }
        let had_ops = slot.ops_pending();
        slot.gate = Gate::Shut;
        self.earliest.invalidate();
        let carried = if planted!(CloseDropsCarriedOperations) {
            0
        } else {
            in_flight
        };
        slot.ops = slot.ops.saturating_add(carried);
        let state = slot.state;
        let unfenced = slot.ops_pending() && !slot.fence_requested();
        let gone = state == ClientState::Unregistered && !slot.in_flight();
        self.registry.ops_changed(index, had_ops);
        if carried > 0 {
            // Rule (I13): the carried operations' deadline counts from this answer.
            self.drain_waits_from(cx);
        }
        if state == ClientState::Revoked && unfenced {
            // Rule: a revoked client's operations are fenced before the hardware is touched.
            self.revoke(cx, index, false);
        }
        if gone {
            self.free_slot(cx, index);
        }
        self.progress(cx);
        self.gate_follows_client(cx, index);
        Ok(())
    }

    /// A drain under way learnt of operations only now: its wait for operations counts
    /// from `cx.now` (never shorter for any operation it waits for, I13).
    fn drain_waits_from<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        let now = cx.now;
        let later = cx.deadline(cx.config.operation_timeout);
        self.earliest.invalidate();
        match &mut self.phase {
            Phase::Stopping { since, .. }
            | Phase::PoweringDown {
                since,
                commanded: false,
                ..
            } => *since = now,
            Phase::Quiescing {
                draining: Some(from),
                ..
            } => *from = now,
            // A deadline beyond the clock's range (`None`) stays beyond it (I13).
            Phase::Removing { deadline, .. } => {
                *deadline = match (*deadline, later) {
                    (Some(at), Some(floor)) => Some(at.max(floor)),
                    _ => None,
                }
            }
            _ => {}
        }
    }

    /// The earliest deadline of a close not answered (and not fenced), if any.
    pub(super) fn next_close_deadline(&self, config: &Config) -> Option<Tick> {
        self.registry
            .occupied_slots()
            .filter_map(|slot| match slot.gate {
                Gate::Closing { since } if !slot.fence_requested() => {
                    due(since, config.operation_timeout)
                }
                _ => None,
            })
            .min()
    }

    /// Revoke and fence every client whose close overran [`Config::operation_timeout`],
    /// like an operation that overran a drain (I9).
    pub(super) fn fence_overrunning_closes<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        let Some(first) = self.next_close_deadline(cx.config) else {
            return;
        };
        if cx.now < first {
            return;
        }
        for index in self.registry.occupied() {
            let overran = self.registry.slot(index).is_some_and(|slot| {
                matches!(slot.gate, Gate::Closing { since }
                    if !slot.fence_requested()
                        && due(since, cx.config.operation_timeout).is_some_and(|at| cx.now >= at))
            });
            if overran {
                self.revoke(cx, index, true);
            }
        }
    }
}
