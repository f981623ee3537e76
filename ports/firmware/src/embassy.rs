//! The embassy front-end (feature `embassy`): an `async` owner loop. The interrupt latches
//! and raises a [`FatalSignal`] ([`latch_and_signal`]); [`Firmware::run_async`] acts like
//! [`Firmware::run`], awaits the reset pulse ([`ResetLine::pulse_async`]) and waits for the
//! signal or [`Timer::at`] the machine's next deadline. `Board::now` must return [`now`].
//! No wake-up is lost: a `Signal` raised before the wait is kept and ends it at once.

use core::future::Future;

use embassy_futures::select::select;
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::signal::Signal;
use embassy_time::{Instant, Timer};
use embedded_hal::digital::OutputPin;
use embedded_hal_async::delay::DelayNs;
use pnp_lifecycle::{DeviceId, Tick};

use crate::firmware::{Board, Firmware, PortError, Step, Work};
use crate::lock::Lock;
use crate::reset::{ResetControl, ResetLine};
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

/// A [`ResetLine`] whose delay is async as well as blocking (`embassy_time::Delay`): the
/// async loop awaits the hold ([`ResetLine::pulse_async`]), the blocking
/// [`Firmware::step`] / [`Firmware::pump`] still pulse it with [`ResetLine::pulse`].
pub type AsyncResetLine<P, D> = ResetLine<P, D>;

impl<P, D> AsyncResetControl for ResetLine<P, D>
where
    P: OutputPin,
    D: embedded_hal::delay::DelayNs + DelayNs,
{
    async fn reset_async(&mut self, _device: DeviceId) -> Result<(), Self::Error> {
        self.pulse_async().await
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
                let result = self.reset_control_mut().reset_async(device).await;
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
                        first_error.get_or_insert(e);
                    }
                }
            }
            if let Some(error) = first_error {
                return Err(error);
            }
            let deadline = self.poll_timeout()?;
            if self.timeout_due(deadline)? {
                continue;
            }
            if done(self) {
                return Ok(());
            }
            if self.has_work()? {
                continue;
            }
            match deadline {
                Some(deadline) => {
                    select(signal.wait(), Timer::at(Instant::from_millis(deadline.0))).await;
                }
                None => signal.wait().await,
            }
        }
    }
}
