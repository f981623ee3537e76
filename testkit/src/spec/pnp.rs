//! DESIGN "Device lifecycle": add, ports, start, stop and its query, query remove.

use super::{Answer, Busy, Claim, Dev, Due, Query, Spec, Standing};
use pnp_lifecycle::{
    CycleOutcome, DeviceId, Error, Event, FailureCause, HardwareCommand, Output, PhysPort,
    PortCaps, Reply, RequestToken, StartResult, Status, Tick, VetoReason,
};

impl Spec {
    pub(super) fn add_device(&mut self, d: DeviceId) -> Answer {
        if self.driver != pnp_lifecycle::DriverPhase::Loaded {
            return Err(Error::Unloading);
        }
        let dev = self.dev_mut(d);
        // A slot keeps its epoch and its clients' generations (epochs only grow, handles
        // never alias).
        let epoch = dev.epoch;
        let generations: Vec<u16> = dev.clients.iter().map(|c| c.generation).collect();
        *dev = Dev::new(dev.clients.len(), dev.ports.len());
        dev.epoch = epoch;
        for (c, g) in dev.clients.iter_mut().zip(generations) {
            c.generation = g;
        }
        dev.present = true;
        Ok(Reply::Accepted)
    }

    pub(super) fn configure_port(&mut self, d: DeviceId, port: PhysPort, caps: PortCaps) -> Answer {
        match self.dev(d).ports.get(usize::from(port.0)) {
            None => Err(Error::NoSuchPort),
            Some(Some(_)) => Err(Error::PortAlreadyConfigured),
            Some(None) => {
                self.dev_mut(d).ports[usize::from(port.0)] =
                    Some((caps, pnp_lifecycle::LinkState::Down));
                Ok(Reply::Accepted)
            }
        }
    }

    pub(super) fn start(&mut self, d: DeviceId, token: RequestToken) -> Answer {
        let dev = self.dev_mut(d);
        dev.stopped = false;
        dev.hardware_busy = Some(Busy::Start(Some(token)));
        self.hardware(d, HardwareCommand::Start);
        Ok(Reply::Accepted)
    }

    pub(super) fn start_done(&mut self, now: Tick, d: DeviceId, result: StartResult) -> Answer {
        let Some(Busy::Start(token)) = self.dev(d).hardware_busy else {
            return Err(Error::NoHardwareCommandInFlight);
        };
        let dev = self.dev_mut(d);
        dev.hardware_busy = None;
        let gone = dev.vanished || dev.removal_begun;
        match result {
            StartResult::Started => dev.claim = Claim::Live,
            StartResult::FailedAfterResources => dev.claim = Claim::Resources,
            StartResult::FailedBeforeResources => dev.claim = Claim::Nothing,
        }
        let Some(token) = token else {
            return Ok(Reply::Accepted);
        };
        if gone {
            self.complete(d, token, Status::DeviceGone);
            return Ok(Reply::Accepted);
        }
        if self.dev(d).removal_owed {
            // Removal follows at once (settle): clients are told `Removed`, not the start.
            let status = if result == StartResult::Started {
                Status::Success
            } else {
                Status::HardwareFailed
            };
            self.complete(d, token, status);
            return Ok(Reply::Accepted);
        }
        if result == StartResult::Started {
            self.dev_mut(d).started = true;
            self.complete(d, token, Status::Success);
            let epoch = self.dev(d).epoch;
            for s in self.live(d) {
                self.notify(now, d, s, Event::DeviceStarted { epoch });
            }
            if std::mem::take(&mut self.dev_mut(d).fatal_deferred) {
                self.start_cycle(now, d);
            }
        } else {
            self.complete(d, token, Status::HardwareFailed);
            self.dev_mut(d).started = false;
            self.fail(now, d, FailureCause::StartFailed);
            if std::mem::take(&mut self.dev_mut(d).fatal_deferred) {
                self.finished(d, CycleOutcome::HardwareFailed);
            }
        }
        Ok(Reply::Accepted)
    }

    /// The device failed: only removal leaves; clients are told it is fatal.
    pub(super) fn fail(&mut self, now: Tick, d: DeviceId, cause: FailureCause) {
        let dev = self.dev_mut(d);
        dev.failed = Some(cause);
        // A failed device's registers are not touched again: removal only releases.
        if dev.claim == Claim::Live {
            dev.claim = Claim::Resources;
        }
        self.out.push(Output::DeviceFailed { device: d, cause });
        for s in self.live(d) {
            self.notify(now, d, s, Event::DeviceFatal);
        }
    }

    pub(super) fn query_stop(&mut self, d: DeviceId, token: RequestToken) -> Answer {
        if self.dev(d).reset_after_up {
            return Err(Error::Vetoed(VetoReason::ResetInProgress)); // a cycle is owed
        }
        if self
            .live(d)
            .iter()
            .any(|&s| self.dev(d).clients[s].cannot_pause)
        {
            return Err(Error::Vetoed(VetoReason::ClientCannotPause));
        }
        self.dev_mut(d).query_pending = Some(Query::Stop);
        self.complete(d, token, Status::Success);
        Ok(Reply::Accepted)
    }

    pub(super) fn cancel_stop(&mut self, now: Tick, d: DeviceId, token: RequestToken) -> Answer {
        // A stop already accepted (held for the power transition) is past cancelling.
        if self.dev(d).query_pending == Some(Query::Stop) && self.dev(d).stop_held.is_none() {
            self.dev_mut(d).query_pending = None;
        }
        self.complete(d, token, Status::Success);
        self.serve_deferred_fatal(now, d);
        Ok(Reply::Accepted)
    }

    pub(super) fn stop(&mut self, now: Tick, d: DeviceId, token: RequestToken) -> Answer {
        let dev = self.dev(d);
        let in_transition = dev.powering_down.is_some() || dev.hardware_busy == Some(Busy::PowerUp);
        if in_transition {
            // A power transition answers as the state it returns to: the pending query's
            // (the stop is held until the hardware reports), else low power or running.
            if dev.query_pending == Some(Query::Stop) {
                if dev.stop_held.is_some() {
                    return Err(Error::RequestPending);
                }
                self.dev_mut(d).stop_held = Some(token);
                return Ok(Reply::Accepted);
            }
            let phase = if dev.powering_down.is_some() {
                pnp_lifecycle::PhaseKind::LowPower
            } else {
                pnp_lifecycle::PhaseKind::Running
            };
            return Err(Error::InvalidState {
                phase,
                input: pnp_lifecycle::InputKind::Stop,
            });
        }
        self.stop_now(now, d, token);
        Ok(Reply::Accepted)
    }

    /// The stop itself: clients told, operations drained, then the hardware released.
    pub(super) fn stop_now(&mut self, now: Tick, d: DeviceId, token: RequestToken) {
        let dev = self.dev_mut(d);
        dev.query_pending = None;
        dev.stop_draining = Some(token);
        for s in self.live(d) {
            self.notify(now, d, s, Event::DeviceStopped);
        }
    }

    /// A stop whose operations drained shuts the hardware down and releases it.
    pub(super) fn settle_stop(&mut self, now: Tick, d: DeviceId) {
        let Some(token) = self.dev(d).stop_draining else {
            return;
        };
        if !self.drained(now, d) {
            return;
        }
        let dev = self.dev_mut(d);
        dev.stop_draining = None;
        dev.stopped = true;
        dev.started = false;
        dev.claim = Claim::Nothing;
        dev.drain_until = None;
        // In Dx the hardware is not touched: its resources are released only.
        if dev.dx.take().is_none() {
            self.hardware(d, HardwareCommand::Shutdown);
        }
        self.hardware(d, HardwareCommand::ReleaseResources);
        self.complete(d, token, Status::Success);
        let owed = std::mem::take(&mut self.dev_mut(d).reset_after_up);
        if std::mem::take(&mut self.dev_mut(d).fatal_deferred) || owed {
            self.finished(d, CycleOutcome::FoldedIntoStop);
        }
    }

    /// Whether no hardware operation is in flight; if some are, the drain's deadline runs.
    pub(super) fn drained(&mut self, now: Tick, d: DeviceId) -> bool {
        let busy = self.dev(d).clients.iter().any(|c| c.ops > 0) || self.closing(d);
        // Operations of a client being fenced wait for the owner's fence, no deadline.
        let unfenced = self
            .dev(d)
            .clients
            .iter()
            .any(|c| c.ops > 0 && !c.fence_requested);
        let timeout = self.config.operation_timeout;
        let dev = self.dev_mut(d);
        if !unfenced {
            dev.drain_until = None;
        } else if dev.drain_until.is_none() {
            dev.drain_until = Some(Due::after(now, timeout));
        }
        !busy
    }

    pub(super) fn query_remove(&mut self, d: DeviceId, token: RequestToken) -> Answer {
        if self.dev(d).reset_after_up {
            return Err(Error::Vetoed(VetoReason::ResetInProgress)); // a cycle is owed
        }
        let holds = self
            .dev(d)
            .clients
            .iter()
            .any(|c| c.standing == Standing::Live && c.holding);
        if holds {
            return Err(Error::Vetoed(VetoReason::ClientHoldsDevice));
        }
        self.dev_mut(d).query_pending = Some(Query::Remove);
        self.complete(d, token, Status::Success);
        Ok(Reply::Accepted)
    }

    pub(super) fn cancel_remove(&mut self, now: Tick, d: DeviceId, token: RequestToken) -> Answer {
        if self.dev(d).query_pending == Some(Query::Remove) {
            self.dev_mut(d).query_pending = None;
        }
        self.complete(d, token, Status::Success);
        self.serve_deferred_fatal(now, d);
        Ok(Reply::Accepted)
    }
}
