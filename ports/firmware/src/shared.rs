//! The state thread mode and the interrupt handlers share: the machine, the buffer its
//! outputs are drained into, and the fatal errors an interrupt had to latch.

use heapless::Deque;
use pnp_lifecycle::{Config, DeviceId, Error, FatalAnswer, Input, Lifecycle, Output, Reply, Tick};

use crate::lock::Lock;

/// Why [`Shared::feed`] took no input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FeedError {
    /// The output buffer lacks room for this input's worst case: act on the buffered
    /// outputs first. Nothing changed.
    Backlog {
        /// Free entries the input needs.
        needed: usize,
    },
    /// The machine refused the input. Nothing changed.
    Refused(Error),
}

/// What the catastrophic-error interrupt did with its [`Input::FatalError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IsrOutcome {
    /// Fed to the machine, with its answer (served by a cycle, deferred, folded into a
    /// removal, or why the hardware is not live); its outputs wait in the buffer for
    /// thread mode. The answer is also kept ([`Shared::last_fatal_answer`]).
    Fed(FatalAnswer),
    /// Accepted with a reply that is not a [`Reply::Fatal`] (the core never gives one; kept
    /// so that it would be reported as such, not misread).
    Ignored,
    /// The buffer held thread mode's outputs: the error is latched and thread mode feeds it
    /// once the buffer is empty ([`crate::Firmware::step`]). Repeated latches coalesce,
    /// as reset requests do in the machine.
    Latched,
    /// The machine refused it (only the driver's own state can: unloaded, no such
    /// device). The refusal is kept ([`Shared::last_fatal_answer`]).
    Refused(Error),
    /// The device id is beyond the machine's `DEVICES`.
    NoSuchDevice,
    /// The shared state was borrowed (impossible behind a critical section).
    Busy,
}

/// Counters of the interrupt side, for diagnostics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct IsrStats {
    /// Interrupt entries.
    pub entries: u32,
    /// Fatal errors fed to the machine (from the interrupt or replayed from a latch).
    pub fed: u32,
    /// Fatal errors latched because the buffer was busy.
    pub latched: u32,
    /// Fatal errors the machine refused.
    pub refused: u32,
}

/// The shared state: a machine with `D` devices, `C` client slots a device, `P` physical
/// ports a device and an output queue of `Q` (at least
/// [`pnp_lifecycle::queue_capacity`]`(D, C)`), plus a buffer of `Q` outputs that thread
/// mode acts on outside the critical section.
///
/// Every input goes through [`feed`](Self::feed): the machine handles it and its output
/// queue is drained into the buffer at once, inside the same critical section, so the
/// machine's own queue is empty whenever the lock is free.
#[derive(Debug, Clone)]
pub struct Shared<const D: usize, const C: usize, const P: usize, const Q: usize> {
    machine: Lifecycle<D, C, P, Q>,
    pending: Deque<Output, Q>,
    latched: [bool; D],
    answers: [Option<Result<FatalAnswer, Error>>; D],
    stats: IsrStats,
    lost: u32,
}

impl<const D: usize, const C: usize, const P: usize, const Q: usize> Shared<D, C, P, Q> {
    /// A fresh machine, at tick zero, with an empty buffer. `const`, so it can initialise a
    /// `static` (`ConstStaticCell`) without a stack copy.
    pub const fn new(config: Config) -> Self {
        Shared {
            machine: Lifecycle::new(config),
            pending: Deque::new(),
            latched: [false; D],
            answers: [None; D],
            stats: IsrStats {
                entries: 0,
                fed: 0,
                latched: 0,
                refused: 0,
            },
            lost: 0,
        }
    }

    /// The machine, read-only (diagnostics; inputs go through [`feed`](Self::feed)).
    pub fn machine(&self) -> &Lifecycle<D, C, P, Q> {
        &self.machine
    }

    /// Outputs waiting for thread mode.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The outputs waiting for thread mode, oldest first.
    pub fn pending(&self) -> impl Iterator<Item = &Output> {
        self.pending.iter()
    }

    /// Interrupt-side counters.
    pub fn isr_stats(&self) -> IsrStats {
        self.stats
    }

    /// Whether a fatal error of `device` is latched, waiting for thread mode.
    pub fn is_latched(&self, device: DeviceId) -> bool {
        self.latched
            .get(usize::from(device.0))
            .copied()
            .unwrap_or(false)
    }

    /// How the machine answered the last fatal error of `device` fed (from the interrupt
    /// or replayed from a latch): a fatal error is always answered, never dropped.
    pub fn last_fatal_answer(&self, device: DeviceId) -> Option<Result<FatalAnswer, Error>> {
        self.answers.get(usize::from(device.0)).copied().flatten()
    }

    fn record_fatal(&mut self, device: DeviceId, result: &Result<Reply, Error>) {
        let answer = match result {
            Ok(Reply::Fatal(answer)) => Ok(*answer),
            Ok(_) => return,
            Err(error) => Err(*error),
        };
        match answer {
            Ok(a) => fw_debug!("device {} fatal error answered: {}", device.0, a),
            Err(e) => fw_warn!("device {} fatal error refused: {}", device.0, e),
        }
        if let Some(slot) = self.answers.get_mut(usize::from(device.0)) {
            *slot = Some(answer);
        }
    }

    /// Whether any device has a latched fatal error.
    pub fn is_latched_any(&self) -> bool {
        self.latched.iter().any(|l| *l)
    }

    /// Outputs that found the buffer full. Room is checked before every input, so this
    /// stays zero (the tests assert it), like the machine's own
    /// [`Lifecycle::lost_outputs`].
    pub fn lost_outputs(&self) -> u32 {
        self.lost.saturating_add(self.machine.lost_outputs())
    }

    /// Room the buffer must have before `input` is fed: the machine's documented worst case.
    pub fn room_needed(input: &Input) -> usize {
        match input {
            Input::Timeout | Input::Unload => Lifecycle::<D, C, P, Q>::DRIVER_INPUT_OUTPUTS,
            _ => Lifecycle::<D, C, P, Q>::DEVICE_INPUT_OUTPUTS,
        }
    }

    /// Feed one input at `now` (read from the platform's clock inside the critical
    /// section, so inputs reach the machine in clock order) and move all of its outputs
    /// into the buffer. Refused (and nothing changes) when the buffer lacks room for the
    /// input's worst case.
    pub fn feed(&mut self, now: Tick, input: Input) -> Result<Reply, FeedError> {
        let needed = Self::room_needed(&input);
        if Q - self.pending.len() < needed {
            return Err(FeedError::Backlog { needed });
        }
        let result = self.machine.handle(now, input);
        if let Input::FatalError { device } = input {
            self.record_fatal(device, &result);
        }
        self.drain();
        result.map_err(FeedError::Refused)
    }

    /// The oldest buffered output.
    pub fn pop(&mut self) -> Option<Output> {
        self.pending.pop_front()
    }

    fn drain(&mut self) {
        while let Some(output) = self.machine.poll_output() {
            if let Output::Fence { client } = output {
                // The fence masks the client's path: a callback of its still buffered is
                // never made (thread mode has not started it).
                self.drop_notifications(client);
            }
            if self.pending.push_back(output).is_err() {
                self.lost = self.lost.saturating_add(1);
            }
        }
    }

    fn drop_notifications(&mut self, client: pnp_lifecycle::ClientHandle) {
        let mut kept: Deque<Output, Q> = Deque::new();
        while let Some(output) = self.pending.pop_front() {
            if matches!(output, Output::Notify { client: c, .. } if c == client) {
                continue;
            }
            // Cannot fail: `kept` holds no more than `pending` did.
            let _ = kept.push_back(output);
        }
        self.pending = kept;
    }

    /// The catastrophic-error interrupt's body (runs inside the lock), at `now`. Fed at
    /// once if the buffer has room, latched otherwise; never acts on an output.
    pub fn fatal_error_from_isr(&mut self, device: DeviceId, now: Tick) -> IsrOutcome {
        self.stats.entries = self.stats.entries.saturating_add(1);
        if usize::from(device.0) >= D {
            return IsrOutcome::NoSuchDevice;
        }
        // PLANTED FAULT (tests only): the interrupt "makes room" by throwing away the outputs
        // thread mode has not acted on yet, instead of latching its request.
        #[cfg(feature = "planted-fault")]
        self.pending.clear();
        if self.is_latched(device) {
            return IsrOutcome::Latched; // coalesces with the request already waiting
        }
        match self.feed(now, Input::FatalError { device }) {
            Ok(reply) => {
                self.stats.fed = self.stats.fed.saturating_add(1);
                fw_debug!("isr: device {} fatal error fed", device.0);
                match reply {
                    Reply::Fatal(answer) => IsrOutcome::Fed(answer),
                    _ => IsrOutcome::Ignored,
                }
            }
            Err(FeedError::Backlog { .. }) => {
                if let Some(flag) = self.latched.get_mut(usize::from(device.0)) {
                    *flag = true;
                }
                self.stats.latched = self.stats.latched.saturating_add(1);
                fw_debug!("isr: device {} fatal error latched", device.0);
                IsrOutcome::Latched
            }
            Err(FeedError::Refused(error)) => {
                self.stats.refused = self.stats.refused.saturating_add(1);
                fw_debug!("isr: device {} fatal error refused: {}", device.0, error);
                IsrOutcome::Refused(error)
            }
        }
    }

    /// The constant-time interrupt path ([`latch_fatal_interrupt`]): count the entry and
    /// latch a fatal error of `device` for thread mode, which feeds it (and broadcasts
    /// `RESET` to the clients) outside the interrupt. Nothing here depends on the number of
    /// clients: the machine is not touched.
    pub fn latch_fatal(&mut self, device: DeviceId) -> IsrOutcome {
        self.stats.entries = self.stats.entries.saturating_add(1);
        let Some(flag) = self.latched.get_mut(usize::from(device.0)) else {
            return IsrOutcome::NoSuchDevice;
        };
        *flag = true;
        self.stats.latched = self.stats.latched.saturating_add(1);
        IsrOutcome::Latched
    }

    /// Whether thread mode has work here: a buffered output or a latched fatal error.
    pub fn has_work(&self) -> bool {
        !self.pending.is_empty() || self.is_latched_any()
    }

    /// Feed a latched fatal error if the buffer has room now. `None`: nothing latched, or
    /// still no room (the latch stays).
    pub fn replay_latched(&mut self, now: Tick) -> Option<(DeviceId, Result<Reply, Error>)> {
        let index = self.latched.iter().position(|l| *l)?;
        let device = DeviceId(u8::try_from(index).ok()?);
        let result = match self.feed(now, Input::FatalError { device }) {
            Err(FeedError::Backlog { .. }) => return None,
            Ok(reply) => {
                self.stats.fed = self.stats.fed.saturating_add(1);
                Ok(reply)
            }
            Err(FeedError::Refused(error)) => {
                self.stats.refused = self.stats.refused.saturating_add(1);
                Err(error)
            }
        };
        if let Some(flag) = self.latched.get_mut(index) {
            *flag = false;
        }
        Some((device, result))
    }
}

/// The catastrophic-error interrupt handler's whole job: raise [`Input::FatalError`] for
/// `device` inside the lock, at the time `now()` reads from the platform's timer (called
/// inside the critical section, so no other input can slip in between with a later time).
/// Client callbacks and the reset pulse are left to thread mode.
///
/// ```ignore
/// #[interrupt]
/// fn HCA_CATASTROPHIC() {
///     if let Some(shared) = LINK.get() {
///         let _ = pnp_lifecycle_firmware::on_fatal_interrupt(shared, DeviceId(0), || {
///             Tick(MONOTONIC.now().ticks())
///         });
///     }
/// }
/// ```
pub fn on_fatal_interrupt<L, const D: usize, const C: usize, const P: usize, const Q: usize>(
    lock: &L,
    device: DeviceId,
    now: impl FnOnce() -> Tick,
) -> IsrOutcome
where
    L: Lock<Shared<D, C, P, Q>>,
{
    lock.lock(|shared| shared.fatal_error_from_isr(device, now()))
        .unwrap_or(IsrOutcome::Busy)
}

/// The catastrophic-error interrupt handler's job in constant time: latch a fatal error of
/// `device` ([`Shared::latch_fatal`]) and return. Thread mode ([`crate::Firmware::step`],
/// [`crate::Firmware::run`]) feeds it as `Input::FatalError` at its next step, so the
/// machine's work — the `RESET` broadcast to every client — runs in thread mode, and the
/// time this interrupt keeps interrupts masked does not grow with the number of clients
/// (measured on the target: `ports/firmware/README.md`). The machine's answer is then kept
/// in [`Shared::last_fatal_answer`] and reported as [`crate::Step::ReplayedFatal`].
///
/// ```ignore
/// #[interrupt]
/// fn HCA_CATASTROPHIC() {
///     let _ = pnp_lifecycle_firmware::latch_fatal_interrupt(&MACHINE, DeviceId(0));
/// }
/// ```
pub fn latch_fatal_interrupt<L, const D: usize, const C: usize, const P: usize, const Q: usize>(
    lock: &L,
    device: DeviceId,
) -> IsrOutcome
where
    L: Lock<Shared<D, C, P, Q>>,
{
    lock.lock(|shared| shared.latch_fatal(device))
        .unwrap_or(IsrOutcome::Busy)
}
