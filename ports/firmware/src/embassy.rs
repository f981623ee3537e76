//! The embassy front-end (feature `embassy`): an `async` owner loop.
//!
//! * The catastrophic-error interrupt latches the fatal error (constant time, see
//!   [`crate::latch_fatal_interrupt`]) and raises a [`FatalSignal`]
//!   ([`embassy_sync::signal::Signal`]): [`latch_and_signal`].
//! * [`Firmware::run_async`] acts on every output like [`Firmware::run`], awaits the reset
//!   pulse ([`AsyncResetLine`]: the hold timed with `embedded_hal_async::delay::DelayNs`, so
//!   the executor runs other tasks meanwhile), and waits for the signal or
//!   [`embassy_time::Timer::at`] the machine's next deadline, whichever comes first.
//! * The machine's clock is embassy's: `Board::now` should return [`now`] (milliseconds of
//!   [`embassy_time::Instant`]), which is what [`Timer::at`] is armed with.
//!
//! No wake-up is lost: a `Signal` raised between the readiness check and the wait is kept
//! and ends the wait at once.

use core::future::Future;

use embassy_futures::select::select;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::signal::Signal;
use embassy_time::{Instant, Timer};
use embedded_hal::digital::OutputPin;
use embedded_hal_async::delay::DelayNs;
use pnp_lifecycle::{DeviceId, Input, Tick};

use crate::firmware::{Board, Firmware, PortError, Step, Work};
use crate::lock::Lock;
use crate::reset::{Polarity, ResetControl, ResetError};
use crate::shared::{latch_fatal_interrupt, IsrOutcome, Shared};

/// The signal the fatal-error interrupt raises for the async loop (a `static`).
pub type FatalSignal = Signal<CriticalSectionRawMutex, ()>;

/// The machine's clock on embassy: milliseconds of [`embassy_time::Instant`].
pub fn now() -> Tick {
    Tick(Instant::now().as_millis())
}

/// The catastrophic-error interrupt's body on embassy: latch, then wake the loop.
pub fn latch_and_signal<L, const D: usize, const C: usize, const P: usize, const Q: usize>(
    lock: &L,
    device: DeviceId,
    signal: &FatalSignal,
) -> IsrOutcome
where
    L: Lock<Shared<D, C, P, Q>>,
{
    let outcome = latch_fatal_interrupt(lock, device);
    signal.signal(());
    outcome
}

/// A reset that can be awaited.
pub trait AsyncResetControl: ResetControl {
    /// Reset `device`'s hardware; complete once it is out of reset.
    fn reset_async(&mut self, device: DeviceId) -> impl Future<Output = Result<(), Self::Error>>;
}

/// A reset line held with an async delay: assert, `delay_ns(pulse_ns).await`, deassert,
/// then the settle time. Its blocking [`ResetControl`] form (used by the sync
/// [`Firmware::step`] / [`Firmware::pump`]) runs the same pulse with
/// `embassy_futures::block_on`.
#[derive(Debug)]
pub struct AsyncResetLine<P, D> {
    pin: P,
    delay: D,
    pulse_ns: u32,
    settle_ns: u32,
    polarity: Polarity,
    pulses: u32,
}

impl<P: OutputPin, D: DelayNs> AsyncResetLine<P, D> {
    /// A line that holds the device in reset for `pulse_ns` nanoseconds.
    pub fn new(pin: P, delay: D, pulse_ns: u32, polarity: Polarity) -> Self {
        AsyncResetLine {
            pin,
            delay,
            pulse_ns,
            settle_ns: 0,
            polarity,
            pulses: 0,
        }
    }

    /// Also wait `settle_ns` after releasing the line.
    pub fn with_settle(mut self, settle_ns: u32) -> Self {
        self.settle_ns = settle_ns;
        self
    }

    /// One reset pulse, the hold awaited.
    pub async fn pulse(&mut self) -> Result<(), ResetError<P::Error>> {
        self.pulses = self.pulses.saturating_add(1);
        let (assert_high, release_high) = match self.polarity {
            Polarity::ActiveLow => (false, true),
            Polarity::ActiveHigh => (true, false),
        };
        if let Err(error) = self.pin.set_state(assert_high.into()) {
            let _ = self.pin.set_state(release_high.into());
            return Err(ResetError::Assert(error));
        }
        self.delay.delay_ns(self.pulse_ns).await;
        self.pin
            .set_state(release_high.into())
            .map_err(ResetError::Deassert)?;
        if self.settle_ns > 0 {
            self.delay.delay_ns(self.settle_ns).await;
        }
        Ok(())
    }

    /// How many pulses were attempted.
    pub fn pulses(&self) -> u32 {
        self.pulses
    }

    /// Give the pin and the delay back.
    pub fn into_parts(self) -> (P, D) {
        (self.pin, self.delay)
    }
}

impl<P: OutputPin, D: DelayNs> ResetControl for AsyncResetLine<P, D> {
    type Error = ResetError<P::Error>;

    fn reset(&mut self, _device: DeviceId) -> Result<(), Self::Error> {
        embassy_futures::block_on(self.pulse())
    }
}

impl<P: OutputPin, D: DelayNs> AsyncResetControl for AsyncResetLine<P, D> {
    async fn reset_async(&mut self, _device: DeviceId) -> Result<(), Self::Error> {
        self.pulse().await
    }
}

impl<'a, L, R, B, const D: usize, const C: usize, const P: usize, const Q: usize>
    Firmware<'a, L, R, B, D, C, P, Q>
where
    L: Lock<Shared<D, C, P, Q>>,
    R: AsyncResetControl,
    B: Board,
{
    /// One unit of work ([`Firmware::step`]) with the reset pulse awaited.
    pub async fn step_async(&mut self) -> Result<Step, PortError<R::Error>> {
        match self.work()? {
            Work::Done(step) => Ok(step),
            Work::Reset(output, device) => {
                let result = self.reset_mut().reset_async(device).await;
                self.finish_reset(device, result)
                    .map(|()| Step::Acted(output))
            }
        }
    }

    /// The async owner loop ([`Firmware::run`] on embassy): act on everything (reset pulses
    /// awaited), feed `Input::Timeout` once the machine's deadline is reached, then await
    /// `signal` (raised by [`latch_and_signal`]) or [`Timer::at`] the deadline. Returns once
    /// `done` says so (checked when idle), or the first error met (call again to resume).
    /// `Board::now` must be [`now`].
    pub async fn run_async(
        &mut self,
        signal: &FatalSignal,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> Result<(), PortError<R::Error>> {
        loop {
            let mut first_error = None;
            loop {
                match self.step_async().await {
                    Ok(Step::Idle) => break,
                    Ok(_) => {}
                    Err(e @ (PortError::Busy | PortError::Stalled)) => return Err(e),
                    Err(e) => {
                        if first_error.is_none() {
                            first_error = Some(e);
                        }
                    }
                }
            }
            if let Some(error) = first_error {
                return Err(error);
            }
            let deadline = self.poll_timeout()?;
            if let Some(deadline) = deadline {
                if self.board_mut().now() >= deadline {
                    self.note_timeout();
                    match self.submit(Input::Timeout) {
                        Ok(_) | Err(PortError::Backlog { .. }) => continue,
                        Err(error) => return Err(error),
                    }
                }
            }
            if done(self) {
                return Ok(());
            }
            if self.has_work()? {
                continue;
            }
            self.note_sleep();
            match deadline {
                Some(deadline) => {
                    select(signal.wait(), Timer::at(Instant::from_millis(deadline.0))).await;
                }
                None => signal.wait().await,
            }
        }
    }
}
