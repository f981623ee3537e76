//! The PnP manager's requests that are not removal: add, port configuration, start, query
//! and cancel stop, stop, query and cancel remove.

use super::*;

impl<const C: usize, const P: usize> Device<C, P> {
    // ---- device lifecycle ----------------------------------------------------------

    /// [`Input::AddDevice`]: the device exists, not started (refused while unloading).
    #[inline(never)]
    pub(super) fn add<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) -> Result<(), Error> {
        if cx.unloading {
            return Err(Error::Unloading);
        }
        self.set_phase(cx, Phase::Added);
        Ok(())
    }

    /// [`Input::ConfigurePort`]: a port's capabilities, once.
    #[inline(never)]
    pub(super) fn configure_port(&mut self, port: PhysPort, caps: PortCaps) -> Result<(), Error> {
        let slot = self
            .ports
            .get_mut(usize::from(port.0))
            .ok_or(Error::NoSuchPort)?;
        if slot.caps.is_some() {
            return Err(Error::PortAlreadyConfigured);
        }
        slot.caps = Some(caps);
        Ok(())
    }

    /// [`Input::Start`]: command the hardware start; the request completes when it reports.
    #[inline(never)]
    pub(super) fn start<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        self.set_phase(
            cx,
            Phase::Starting {
                token,
                fatal: false,
            },
        );
        cx.hardware(HardwareCommand::Start);
        Ok(())
    }

    /// [`Input::StartDone`]: the start reported. Started: running, clients told
    /// `DeviceStarted` (and a fatal error held meanwhile is served). Failed: failed with what it
    /// claimed. After a surprise removal or during removal, only what removal releases changes.
    #[inline(never)]
    pub(super) fn start_done<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        result: StartResult,
    ) -> Result<(), Error> {
        let claimed = match result {
            StartResult::FailedBeforeResources => Resources::None,
            StartResult::Started | StartResult::FailedAfterResources => Resources::Held,
        };
        match self.phase {
            Phase::Starting { token, fatal } => {
                let (status, teardown) = match result {
                    StartResult::Started => (Status::Success, Teardown::ShutdownAndRelease),
                    _ => (Status::HardwareFailed, Teardown::of(claimed)),
                };
                cx.complete(token, status);
                if cx.unloading {
                    answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedByRemove);
                    return self.begin_removal(cx, None, teardown, None, false);
                }
                if result == StartResult::Started {
                    self.set_phase(cx, Phase::Running);
                    let epoch = self.epoch;
                    self.notify_active(cx, Event::DeviceStarted { epoch });
                    if fatal {
                        // I8: a fatal error during start is served as soon as it runs.
                        self.serve_deferred_fatal(cx);
                    }
                } else {
                    self.fail(cx, claimed, FailureCause::StartFailed);
                    self.notify_active(cx, Event::DeviceFatal);
                    answer_deferred_fatal(cx, fatal, CycleOutcome::HardwareFailed);
                }
                Ok(())
            }
            // Only a surprise removal (or unload) leaves a start in flight then.
            _ => self.hardware_done_after_removal(cx, HwOp::Start, Some(claimed), false),
        }
    }

    /// [`Input::QueryStop`]: accepted unless a client cannot pause (a veto naming why) or a
    /// reset waits for a power-up. Inlined into dispatch on a hosted target (see
    /// `set_phase`).
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub(super) fn query_stop<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        let low_power = match self.phase {
            Phase::Running => None,
            // Rule (Power): query stop in a low-power state is answered as in D0; a reset
            // waiting for the power-up vetoes it as a running cycle would.
            Phase::LowPower { reset: true, .. } => {
                return Err(Error::Vetoed(VetoReason::ResetInProgress))
            }
            Phase::LowPower { kind, reset: false } => Some(kind),
            _ => return Err(self.refuse(InputKind::QueryStop)),
        };
        // Rule: a client that cannot pause vetoes query stop, naming why.
        if self.registry.any_cannot_pause() {
            return Err(Error::Vetoed(VetoReason::ClientCannotPause));
        }
        self.set_phase(
            cx,
            Phase::StopPending {
                fatal: false,
                low_power,
            },
        );
        cx.complete(token, Status::Success);
        Ok(())
    }

    /// [`Input::CancelStop`]: back to where the query stop found the device; a fatal error held
    /// meanwhile is served. Inlined into dispatch on a hosted target.
    #[cfg_attr(not(target_os = "none"), inline(always))]
    pub(super) fn cancel_stop<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        let Phase::StopPending { fatal, low_power } = self.phase else {
            return self.cancel_in_power_transition(cx, token, InputKind::CancelStop);
        };
        if let Some(kind) = low_power {
            // Rule (Power): cancel stop returns to the low-power state it came from; a
            // fatal error held since D0 is served after the power-up.
            self.set_phase(cx, Phase::LowPower { kind, reset: false });
            cx.complete(token, Status::Success);
            if fatal {
                self.serve_deferred_fatal(cx);
            }
            return Ok(());
        }
        self.set_phase(cx, Phase::Running);
        cx.complete(token, Status::Success);
        if fatal {
            self.serve_deferred_fatal(cx);
        }
        Ok(())
    }

    /// [`Input::Stop`]: clients told `DeviceStopped`; the hardware is shut down and released
    /// once no operation is in flight (I12).
    #[inline(never)]
    pub(super) fn stop<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        let Phase::StopPending { fatal, low_power } = self.phase else {
            return self.stop_in_power_transition(token);
        };
        self.notify_active(cx, Event::DeviceStopped);
        if low_power.is_some() {
            answer_deferred_fatal(cx, fatal, CycleOutcome::FoldedIntoStop);
            // I14 (Power): stopped from a low-power state: no operation can be in
            // flight (drained at the power-down) and no register is touched; the
            // resources are released and a restart powers the device up.
            self.set_phase(cx, Phase::Stopped);
            if !planted!(StopKeepsResources) {
                cx.hardware(HardwareCommand::ReleaseResources);
            }
            cx.complete(token, Status::Success);
            if cx.unloading {
                let _ = self.begin_removal(cx, None, Teardown::Nothing, None, false);
            }
            return Ok(());
        }
        // I12: the stop waits for hardware operations in flight.
        self.set_phase(
            cx,
            Phase::Stopping {
                token,
                since: cx.now,
                fatal,
            },
        );
        self.finish_stop_if_drained(cx);
        Ok(())
    }

    /// Shut the hardware down and release it once no operation is in flight.
    pub(super) fn finish_stop_if_drained<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        let Phase::Stopping { token, fatal, .. } = self.phase else {
            return;
        };
        if self.registry.ops_in_flight() && !planted!(StopWhileOperationInFlight) {
            return;
        }
        answer_deferred_fatal(cx, fatal, CycleOutcome::FoldedIntoStop);
        self.set_phase(cx, Phase::Stopped);
        cx.hardware(HardwareCommand::Shutdown);
        if !planted!(StopKeepsResources) {
            cx.hardware(HardwareCommand::ReleaseResources);
        }
        cx.complete(token, Status::Success);
        if cx.unloading {
            // Unload waited for the stop: now it removes (nothing left to undo).
            let _ = self.begin_removal(cx, None, Teardown::Nothing, None, false);
        }
    }

    /// [`Input::QueryRemove`]: accepted unless a client holds the device (a veto naming why) or
    /// a reset waits for a power-up; cancel remove restores exactly the state it found.
    #[inline(never)]
    pub(super) fn query_remove<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        let prior = match self.phase {
            Phase::Added => Prior::Added,
            Phase::Running => Prior::Running,
            Phase::Stopped => Prior::Stopped,
            Phase::Failed { resources, cause } => Prior::Failed(resources, cause),
            // Rule (Power): query remove in a low-power state is answered as in D0; a reset
            // waiting for the power-up vetoes it as a running cycle would.
            Phase::LowPower { reset: true, .. } => {
                return Err(Error::Vetoed(VetoReason::ResetInProgress))
            }
            Phase::LowPower { kind, reset: false } => Prior::LowPower(kind),
            _ => return Err(self.refuse(InputKind::QueryRemove)),
        };
        if self.registry.any_holding() && !planted!(QueryRemoveIgnoresHold) {
            return Err(Error::Vetoed(VetoReason::ClientHoldsDevice));
        }
        self.set_phase(
            cx,
            Phase::RemovePending {
                prior,
                fatal: false,
            },
        );
        cx.complete(token, Status::Success);
        Ok(())
    }

    /// [`Input::CancelRemove`]: restore the state the query remove found; a fatal error held
    /// meanwhile is served.
    #[inline(never)]
    pub(super) fn cancel_remove<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: RequestToken,
    ) -> Result<(), Error> {
        let Phase::RemovePending { prior, fatal } = self.phase else {
            return self.cancel_in_power_transition(cx, token, InputKind::CancelRemove);
        };
        self.set_phase(
            cx,
            match prior {
                Prior::Added => Phase::Added,
                Prior::Running => Phase::Running,
                Prior::Stopped => Phase::Stopped,
                Prior::Failed(resources, cause) => Phase::Failed { resources, cause },
                Prior::LowPower(kind) => Phase::LowPower { kind, reset: false },
            },
        );
        cx.complete(token, Status::Success);
        if fatal {
            self.serve_deferred_fatal(cx);
        }
        Ok(())
    }
}
