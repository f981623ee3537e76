//! DESIGN "Operations: the fast path": the machine opens a client's gate while nothing
//! needs its operations counted, and closes it (the owner answers with the operations
//! still in flight, counted from then on) before it needs an exact count. A close is a
//! wait like any other: it has a deadline, then the client is revoked and fenced.

use super::{Answer, Due, Spec, Standing};
use pnp_lifecycle::{ClientHandle, DeviceId, Error, FastPathGate, Output, PhaseKind, Reply, Tick};

/// A client's fast-path gate as the machine told the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Gate {
    Shut,
    Open,
    /// Close asked at this time; the answer is awaited.
    Closing(Tick),
}

impl Spec {
    /// Whether `slot`'s gate may be open: the device running in D0 with no cycle, stop,
    /// power-down or removal, the client live, unfenced and at the current epoch.
    fn gate_wanted(&self, d: DeviceId, slot: usize) -> bool {
        let dev = self.dev(d);
        let c = &dev.clients[slot];
        dev.phase() == PhaseKind::Running
            && c.standing == Standing::Live
            && !c.fence_requested
            && c.interface == dev.epoch
    }

    /// Close every gate no longer wanted (asked at once, so a drain waits for the answer).
    pub(super) fn close_gates(&mut self, now: Tick, d: DeviceId) {
        if !self.fast_path {
            return;
        }
        for s in 0..self.dev(d).clients.len() {
            if self.dev(d).clients[s].gate == Gate::Open && !self.gate_wanted(d, s) {
                self.dev_mut(d).clients[s].gate = Gate::Closing(now);
                let client = self.handle_of(d, s);
                self.out.push(Output::FastPath {
                    client,
                    gate: FastPathGate::Close,
                });
            }
        }
    }

    /// Gates open only at the end of an input that left the device running.
    pub(super) fn open_gates(&mut self, d: DeviceId) {
        if !self.fast_path {
            return;
        }
        for s in 0..self.dev(d).clients.len() {
            if self.dev(d).clients[s].gate == Gate::Shut && self.gate_wanted(d, s) {
                self.dev_mut(d).clients[s].gate = Gate::Open;
                let client = self.handle_of(d, s);
                let epoch = self.dev(d).epoch;
                self.out.push(Output::FastPath {
                    client,
                    gate: FastPathGate::Open { epoch },
                });
            }
        }
    }

    /// Whether any close is awaited on the device (its operations are uncounted).
    pub(super) fn closing(&self, d: DeviceId) -> bool {
        self.dev(d)
            .clients
            .iter()
            .any(|c| matches!(c.gate, Gate::Closing(_)))
    }

    pub(super) fn fast_path_closed(
        &mut self,
        now: Tick,
        h: ClientHandle,
        in_flight: u32,
    ) -> Answer {
        let c = self.known(h)?;
        if !matches!(c.gate, Gate::Closing(_)) {
            return Err(Error::FastPathNotClosing);
        }
        let fenced = c.fence_requested;
        let d = h.device;
        let timeout = self.config.operation_timeout;
        let removing = self.dev(d).removal_begun;
        if fenced {
            // Being fenced: its operations are counted, the fence ends them; a removal's
            // one deadline still moves to at least `now` plus the drain's.
            let c = self.cl_mut(h);
            c.gate = Gate::Shut;
            c.ops += in_flight;
            if in_flight > 0 {
                let by = Due::after(now, timeout);
                let dev = self.dev_mut(d);
                if let Some(until) = dev.drain_until {
                    dev.drain_until = Some(until.max(by));
                }
                if removing {
                    for c in dev.clients.iter_mut() {
                        if let Some(t) = c.detach_by {
                            c.detach_by = Some(t.max(by));
                        }
                    }
                }
            }
            return Ok(Reply::Accepted);
        }
        let c = self.cl_mut(h);
        c.gate = Gate::Shut;
        c.ops += in_flight;
        if in_flight > 0 {
            let c = self.cl_mut(h);
            // The drain waits for these from now: never shorter than configured (I13).
            if removing {
                // The removal has one deadline: it is at least `now` plus the drain's.
                let by = Due::after(now, timeout);
                c.detach_by = Some(c.detach_by.map_or(by, |t| t.max(by)));
                for c in self.dev_mut(d).clients.iter_mut() {
                    if let Some(t) = c.detach_by {
                        c.detach_by = Some(t.max(by));
                    }
                }
            } else if let Some(until) = self.dev(d).drain_until {
                // A drain under way: it waits for these too.
                self.dev_mut(d).drain_until = Some(until.max(Due::after(now, timeout)));
            }
        }
        if self.cl(h).standing == Standing::Unregistered {
            if self.cl(h).ops == 0 {
                self.cl_mut(h).detach_by = None; // detached, nothing left to drain
            }
            self.free_if_idle(d, usize::from(h.slot));
        }
        Ok(Reply::Accepted)
    }
}
