//! The state thread mode and the interrupt handlers share: the machine (whose output queue
//! thread mode takes from) and the interrupt latch.

use pnp_lifecycle::{Config, DeviceId, Error, FatalAnswer, Input, Lifecycle, Output, Reply, Tick};

use crate::lock::Lock;

/// Why [`Shared::feed`] took no input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FeedError {
    /// The machine's output queue lacks room for this input's worst case: act on the queued
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
    /// Fed to the machine, with its answer; its outputs wait in the buffer for thread mode.
    Fed(FatalAnswer),
    /// Accepted with a reply that is not a [`Reply::Fatal`] (the core never gives one).
    Ignored,
    /// Latched for thread mode, which feeds it once the buffer is empty
    /// ([`crate::Firmware::step`]). Repeated latches coalesce, as reset requests do in the
    /// machine.
    Latched,
    /// The machine refused it (unloaded, no such device).
    Refused(Error),
    /// The device id is beyond the machine's `DEVICES`.
    NoSuchDevice,
    /// The shared state was borrowed (impossible behind a critical section).
    Busy,
}

/// The shared state: a machine with `D` devices, `C` client slots a device, `P` physical
/// ports a device and an output queue of `Q` (at least
/// [`pnp_lifecycle::queue_capacity`]`(D, C)`), plus one latched fatal error a device.
///
/// The machine's own queue is the only output buffer: thread mode takes one output at a
/// time inside the critical section ([`pop`](Self::pop)) and acts on it outside, so the
/// queue is held once in RAM. An input finds room for its documented worst case or is
/// refused by the machine ([`FeedError::Backlog`], nothing changed).
#[derive(Debug, Clone)]
pub struct Shared<const D: usize, const C: usize, const P: usize, const Q: usize> {
    machine: Lifecycle<D, C, P, Q>,
    latched: [bool; D],
    /// Thread mode is making room for an input ([`crate::Firmware::input`]): fatal errors
    /// are latched, not fed or replayed, until it is in, so that a storm cannot keep
    /// refilling the queue ahead of it.
    held: bool,
}

impl<const D: usize, const C: usize, const P: usize, const Q: usize> Shared<D, C, P, Q> {
    /// A fresh machine with nothing latched. `const`, so it can initialise a `static`
    /// (`ConstStaticCell`) without a stack copy.
    pub const fn new(config: Config) -> Self {
        Shared {
            machine: Lifecycle::new(config),
            latched: [false; D],
            held: false,
        }
    }

    /// The machine, read-only (ask it; inputs go through [`feed`](Self::feed)).
    pub fn machine(&self) -> &Lifecycle<D, C, P, Q> {
        &self.machine
    }

    /// Outputs waiting for thread mode (in the machine's queue).
    pub fn pending_len(&self) -> usize {
        self.machine.pending_output_count()
    }

    /// Whether a fatal error of `device` is latched, waiting for thread mode.
    pub fn is_latched(&self, device: DeviceId) -> bool {
        self.latched.get(usize::from(device.0)) == Some(&true)
    }

    /// Outputs the machine could not queue ([`Lifecycle::lost_outputs`]; room is checked
    /// before every input, so this stays zero).
    pub fn lost_outputs(&self) -> u32 {
        self.machine.lost_outputs()
    }

    /// Feed one input at `now` (read from the platform's clock inside the critical
    /// section, so inputs reach the machine in clock order). Its outputs wait in the
    /// machine's queue for [`pop`](Self::pop). Refused (nothing changes) unless the queue
    /// has room for the machine's documented worst case for the input.
    pub fn feed(&mut self, now: Tick, input: Input) -> Result<Reply, FeedError> {
        self.machine
            .handle(now, input)
            .map_err(|error| match error {
                Error::OutputBacklog { needed } => FeedError::Backlog {
                    needed: usize::from(needed),
                },
                error => FeedError::Refused(error),
            })
    }

    /// The oldest output thread mode has not acted on, taken out of the machine's queue.
    /// Outputs come in the machine's order: a notification queued before a fence of the
    /// same client is a callback made (synchronously, in thread mode) before the fence.
    pub fn pop(&mut self) -> Option<Output> {
        self.machine.poll_output()
    }

    /// The feeding interrupt's body (inside the lock), at `now`: fed at once if the buffer
    /// has room, latched otherwise or while thread mode makes room for an input. Never acts
    /// on an output.
    pub fn fatal_error_from_isr(&mut self, device: DeviceId, now: Tick) -> IsrOutcome {
        if usize::from(device.0) >= D {
            return IsrOutcome::NoSuchDevice;
        }
        if self.is_latched(device) || self.held {
            // Coalesces with the request already waiting, or waits behind thread mode's input.
            return self.latch_fatal(device);
        }
        match self.feed(now, Input::FatalError { device }) {
            Ok(Reply::Fatal(answer)) => {
                fw_debug!("isr: device {} fatal error fed: {}", device.0, answer);
                IsrOutcome::Fed(answer)
            }
            Ok(_) => IsrOutcome::Ignored,
            Err(FeedError::Backlog { .. }) => self.latch_fatal(device),
            Err(FeedError::Refused(error)) => {
                fw_warn!("isr: device {} fatal error refused: {}", device.0, error);
                IsrOutcome::Refused(error)
            }
        }
    }

    /// The constant-time interrupt body ([`latch_fatal_interrupt`]): latch a fatal error of
    /// `device` for thread mode, which feeds it (and broadcasts `RESET`) outside the
    /// interrupt. The machine is not touched, so nothing here grows with the clients.
    pub fn latch_fatal(&mut self, device: DeviceId) -> IsrOutcome {
        match self.latched.get_mut(usize::from(device.0)) {
            Some(flag) => {
                *flag = true;
                IsrOutcome::Latched
            }
            None => IsrOutcome::NoSuchDevice,
        }
    }

    /// Hold fatal errors in the latch while thread mode makes room for an input (`true`),
    /// or let them be fed again (`false`).
    pub(crate) fn hold_fatal_errors(&mut self, hold: bool) {
        self.held = hold;
    }

    /// Whether thread mode has work here: a buffered output or a latched fatal error.
    pub fn has_work(&self) -> bool {
        self.machine.pending_output_count() > 0 || self.latched.contains(&true)
    }

    /// Feed a latched fatal error if the buffer has room now, clearing its latch. `None`:
    /// nothing latched, still no room, or thread mode is making room for an input (the
    /// latch stays).
    pub fn replay_latched(&mut self, now: Tick) -> Option<(DeviceId, Result<Reply, Error>)> {
        if self.held {
            return None;
        }
        let index = self.latched.iter().position(|l| *l)?;
        let device = DeviceId(u8::try_from(index).ok()?);
        let result = match self.feed(now, Input::FatalError { device }) {
            Err(FeedError::Backlog { .. }) => return None,
            Ok(reply) => Ok(reply),
            Err(FeedError::Refused(error)) => Err(error),
        };
        match result {
            Ok(reply) => fw_debug!("device {} latched fatal error fed: {}", device.0, reply),
            Err(error) => fw_warn!("device {} latched fatal error refused: {}", device.0, error),
        }
        if let Some(flag) = self.latched.get_mut(index) {
            *flag = false;
        }
        Some((device, result))
    }
}

/// The feeding interrupt handler: raise [`Input::FatalError`] for `device` inside the lock,
/// at the time `now()` reads (inside the critical section, so no other input slips in
/// between with a later time), or latch it while thread mode's outputs fill the machine's
/// queue or thread mode makes room for an input ([`crate::Firmware::input`]). Its masked time grows with the clients (the machine queues the `RESET` broadcast
/// in it); prefer [`latch_fatal_interrupt`].
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

/// The catastrophic-error interrupt handler in constant time: latch ([`Shared::latch_fatal`])
/// and return. Thread mode ([`crate::Firmware::step`], [`crate::Firmware::run`]) feeds it
/// as `Input::FatalError` at its next step and reports the machine's answer as
/// [`crate::Step::ReplayedFatal`]; the `RESET` broadcast runs in thread mode.
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
