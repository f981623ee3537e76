//! Removal: remove, surprise removal, the hardware vanishing, and the teardown once every
//! client has detached (DESIGN.md "Device lifecycle", I2, I9, I11, I12).

use super::*;

impl<const C: usize, const P: usize> Device<C, P> {
    /// An explicit remove (`token` given) or the removal that driver unload implies.
    /// I11: accepted in every present state whatever clients do (the table admits it
    /// everywhere but while starting; a remove already attached is the owner's error).
    #[inline(never)]
    pub(crate) fn remove<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: Option<RequestToken>,
    ) -> Result<(), Error> {
        let teardown = match self.phase {
            Phase::Added | Phase::Stopped => Teardown::Nothing,
            Phase::Running => Teardown::ShutdownAndRelease,
            Phase::StopPending { fatal, low_power } => {
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedByRemove);
                match low_power {
                    // I14 (Power): from a low-power state, no register is touched.
                    Some(_) => Teardown::Release,
                    None => Teardown::ShutdownAndRelease,
                }
            }
            Phase::Quiescing { .. } => {
                self.set_roles(Role::Idle, false);
                cx.cycle_finished(CycleOutcome::AbortedByRemove);
                Teardown::ShutdownAndRelease
            }
            Phase::RemovePending { prior, fatal } => {
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedByRemove);
                match prior {
                    Prior::Added | Prior::Stopped => Teardown::Nothing,
                    Prior::Running => Teardown::ShutdownAndRelease,
                    Prior::Failed(resources, _) => Teardown::of(resources),
                    // I14 (Power): remove from Dx releases without powering up.
                    Prior::LowPower(_) => self.low_power_teardown(),
                }
            }
            Phase::Failed { resources, .. } => Teardown::of(resources),
            Phase::PoweringDown { .. } | Phase::LowPower { .. } | Phase::PoweringUp { .. } => {
                return self.remove_in_power_transition(cx, token);
            }
            Phase::SurpriseRemoved {
                resources,
                in_flight,
            } => {
                return self.begin_removal(cx, token, Teardown::of(resources), in_flight, true);
            }
            // Deferred: removal begins when the hardware reset reports.
            Phase::Executing { then } => {
                let Some(token) = token else {
                    return Ok(()); // unload: `reset_done` sees `unloading`
                };
                match then {
                    AfterReset::Remove(_) => return Err(Error::RequestPending),
                    AfterReset::FollowUp => cx.cycle_finished(CycleOutcome::AbortedByRemove),
                    AfterReset::Resume => {}
                }
                self.set_phase(
                    cx,
                    Phase::Executing {
                        then: AfterReset::Remove(token),
                    },
                );
                return Ok(());
            }
            Phase::Removing {
                token: pending,
                deadline,
                teardown,
                in_flight,
            } => {
                return match (pending, token) {
                    (_, None) => Ok(()),
                    (Some(_), Some(_)) => Err(Error::RequestPending),
                    (None, Some(token)) => {
                        self.set_phase(
                            cx,
                            Phase::Removing {
                                token: Some(token),
                                deadline,
                                teardown,
                                in_flight,
                            },
                        );
                        self.try_finish_removal(cx);
                        Ok(())
                    }
                };
            }
            // Only unload gets here (the table refuses a PnP remove while starting); it
            // waits for the start to report (`start_done` sees `unloading`).
            Phase::Starting { .. } => return Ok(()),
            // Likewise a stop waiting for operations: `finish_stop_if_drained` removes.
            Phase::Stopping { .. } => return Ok(()),
            Phase::Absent => return Err(self.refuse(InputKind::Remove)),
        };
        self.begin_removal(cx, token, teardown, None, false)
    }

    /// [`Input::SurpriseRemoval`]: the hardware is gone. Accepted in every present state
    /// whatever clients do (I11): whatever waited on the hardware ends, clients are told
    /// `Removed`, and the device waits for the remove without touching registers.
    #[inline(never)]
    pub(super) fn surprise_removal<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
    ) -> Result<(), Error> {
        let (resources, in_flight) = match self.phase {
            Phase::Added | Phase::Stopped => (Resources::None, None),
            Phase::Starting { token, fatal } => {
                cx.complete(token, Status::DeviceGone);
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedBySurpriseRemoval);
                (Resources::None, Some(HwOp::Start))
            }
            Phase::Running => (Resources::Held, None),
            Phase::StopPending { fatal, .. } => {
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedBySurpriseRemoval);
                (Resources::Held, None)
            }
            // I11, I14 (Power): surprise removal in Dx touches nothing and repeats no
            // power-down step; a power command in flight must report before teardown.
            Phase::PoweringDown { .. } | Phase::LowPower { .. } | Phase::PoweringUp { .. } => {
                if planted!(HardwareCommandInDx) && matches!(self.phase, Phase::LowPower { .. }) {
                    cx.hardware(HardwareCommand::PowerDown);
                }
                self.settle_power_requests(
                    cx,
                    Status::DeviceGone,
                    CycleOutcome::AbortedBySurpriseRemoval,
                );
                (Resources::Held, self.power_command_in_flight())
            }
            Phase::Stopping { token, fatal, .. } => {
                // The hardware is gone: nothing left to shut down; the stop ends here.
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedBySurpriseRemoval);
                cx.complete(token, Status::DeviceGone);
                (Resources::Held, None)
            }
            Phase::Quiescing { .. } => {
                self.set_roles(Role::Idle, false);
                cx.cycle_finished(CycleOutcome::AbortedBySurpriseRemoval);
                (Resources::Held, None)
            }
            Phase::Executing { then } => {
                cx.cycle_finished(CycleOutcome::AbortedBySurpriseRemoval);
                self.set_roles(Role::Idle, false);
                match then {
                    AfterReset::Resume => {}
                    AfterReset::FollowUp => {
                        cx.cycle_finished(CycleOutcome::AbortedBySurpriseRemoval)
                    }
                    AfterReset::Remove(token) => {
                        return self.begin_removal(
                            cx,
                            Some(token),
                            Teardown::Release,
                            Some(HwOp::Reset),
                            true,
                        );
                    }
                }
                (Resources::Held, Some(HwOp::Reset))
            }
            Phase::RemovePending { prior, fatal } => {
                answer_deferred_fatal(cx, fatal, CycleOutcome::AbortedBySurpriseRemoval);
                match prior {
                    Prior::Added | Prior::Stopped => (Resources::None, None),
                    Prior::Running => (Resources::Held, None),
                    Prior::Failed(resources, _) => (resources, None),
                    Prior::LowPower(_) => (Resources::Held, None),
                }
            }
            Phase::Failed { resources, .. } => (resources, None),
            Phase::Removing {
                token,
                deadline,
                teardown,
                in_flight,
            } => {
                // Clients were told already; only the teardown changes: no registers.
                self.set_phase(
                    cx,
                    Phase::Removing {
                        token,
                        deadline,
                        teardown: teardown.without_registers(),
                        in_flight,
                    },
                );
                return Ok(());
            }
            Phase::SurpriseRemoved { .. } | Phase::Absent => {
                return Err(self.refuse(InputKind::SurpriseRemoval))
            }
        };
        self.vanish(cx, resources, in_flight)
    }

    /// The hardware is gone (a surprise removal, or a failed power-up from Dx): every
    /// client is told `Removed`; the device waits for the remove (unload removes now).
    pub(super) fn vanish<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        resources: Resources,
        in_flight: Option<HwOp>,
    ) -> Result<(), Error> {
        if cx.unloading {
            // Nobody will send a remove: unload removes.
            return self.begin_removal(cx, None, Teardown::of(resources), in_flight, true);
        }
        self.tell_removed(cx, true);
        self.set_phase(
            cx,
            Phase::SurpriseRemoved {
                resources,
                in_flight,
            },
        );
        self.end_deferred_sleep(cx);
        Ok(())
    }

    /// Every active client is told `Removed` and may only detach from now on.
    pub(super) fn tell_removed<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>, surprise: bool) {
        for index in self.registry.occupied() {
            if self.registry.slot(index).is_some_and(Slot::is_active) {
                if let Some(slot) = self.registry.slot_mut(index) {
                    slot.state = ClientState::Removed;
                }
                // Voters' deadlines go; removal's detach deadline comes.
                self.earliest.invalidate();
                self.notify(cx, index, Event::Removed { surprise });
            }
        }
    }

    /// Begin removal: clients are told `Removed` and have the detach deadline to go; the
    /// teardown waits for every callback, operation and fence (I9, I12).
    pub(super) fn begin_removal<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        token: Option<RequestToken>,
        teardown: Teardown,
        in_flight: Option<HwOp>,
        surprise: bool,
    ) -> Result<(), Error> {
        self.tell_removed(cx, surprise);
        let teardown = if surprise {
            teardown.without_registers()
        } else {
            teardown
        };
        self.set_phase(
            cx,
            Phase::Removing {
                token,
                deadline: cx.deadline(cx.config.detach_timeout),
                teardown,
                in_flight,
            },
        );
        self.end_deferred_sleep(cx);
        self.try_finish_removal(cx);
        Ok(())
    }

    /// Finish removal once every client detached, every callback came back and no
    /// hardware command is in flight.
    pub(super) fn try_finish_removal<const Q: usize>(&mut self, cx: &mut Ctx<'_, Q>) {
        let Phase::Removing {
            token,
            teardown,
            in_flight: None,
            ..
        } = self.phase
        else {
            return;
        };
        // I12: no removal teardown while a callback, hardware operation or fence of any
        // client is in flight; I9: the detach deadline revokes whoever does not go.
        if !self.registry.drained() {
            return;
        }
        for index in self.registry.occupied() {
            if self.registry.slot(index).is_some_and(Slot::occupied) {
                self.free_slot(cx, index); // revoked clients: force-detached
            }
        }
        match teardown {
            Teardown::Nothing => {}
            Teardown::Release => cx.hardware(HardwareCommand::ReleaseResources),
            Teardown::ShutdownAndRelease => {
                cx.hardware(HardwareCommand::Shutdown);
                cx.hardware(HardwareCommand::ReleaseResources);
            }
        }
        if let Some(token) = token {
            cx.complete(token, Status::Success);
        }
        cx.out.push(Output::DeviceRemoved { device: cx.device });
        self.set_phase(cx, Phase::Absent);
        // Reset groups: the slot is free, and so is its membership.
        self.leave_group_on_removal();
        self.ports = [Port::UNCONFIGURED; P];
    }

    /// A hardware command reports after the hardware vanished or removal began (a start,
    /// a reset or a power command that was in flight): removal no longer waits for it.
    /// `claimed` is what a start reports it claimed (the teardown follows it); a `failed`
    /// power command leaves registers untouched. I11: a hardware completion is accepted
    /// whatever clients do; I12: the teardown waited for it.
    pub(super) fn hardware_done_after_removal<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        op: HwOp,
        claimed: Option<Resources>,
        failed: bool,
    ) -> Result<(), Error> {
        match self.phase {
            Phase::SurpriseRemoved {
                resources,
                in_flight: Some(was),
            } if was == op => {
                self.set_phase(
                    cx,
                    Phase::SurpriseRemoved {
                        resources: claimed.unwrap_or(resources),
                        in_flight: None,
                    },
                );
                Ok(())
            }
            Phase::Removing {
                token,
                deadline,
                teardown,
                in_flight: Some(was),
            } if was == op => {
                let teardown = claimed.map_or(teardown, Teardown::of);
                let teardown = if failed {
                    teardown.without_registers()
                } else {
                    teardown
                };
                self.set_phase(
                    cx,
                    Phase::Removing {
                        token,
                        deadline,
                        teardown,
                        in_flight: None,
                    },
                );
                self.try_finish_removal(cx);
                Ok(())
            }
            _ => Err(Error::NoHardwareCommandInFlight),
        }
    }
}
