//! The hardware reset: a reset line driven through an `embedded_hal` [`OutputPin`] and held
//! for a pulse width timed with [`DelayNs`] (awaited with `embedded_hal_async`'s `DelayNs`
//! under feature `embassy`).

use embedded_hal::delay::DelayNs;
use embedded_hal::digital::OutputPin;
use pnp_lifecycle::DeviceId;

/// Which level holds the device in reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Polarity {
    /// Low holds the device in reset (the usual `nRESET`).
    ActiveLow,
    /// High holds the device in reset.
    ActiveHigh,
}

/// A reset pulse that did not happen as commanded. The machine is told
/// [`pnp_lifecycle::ResetResult::Failed`] either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetError<E> {
    /// Driving the line to its reset level failed. Releasing the line was still attempted.
    Assert(E),
    /// Releasing the line after the pulse failed: the device may still be held in reset.
    Deassert(E),
}

/// Something that executes the hardware reset of a device when the machine commands it
/// (answered with [`pnp_lifecycle::Input::ResetDone`]).
pub trait ResetControl {
    /// Why a reset failed.
    type Error;
    /// Reset `device`'s hardware; return once it is out of reset.
    fn reset(&mut self, device: DeviceId) -> Result<(), Self::Error>;
}

/// One reset line: assert, hold `pulse_ns`, deassert, then wait `settle_ns` for the device
/// to come out of reset. Serves every device id it is asked about (a board with one line a
/// device implements [`ResetControl`] itself to pick the line).
#[derive(Debug)]
pub struct ResetLine<P, D> {
    pin: P,
    delay: D,
    pulse_ns: u32,
    settle_ns: u32,
    polarity: Polarity,
    pulses: u32,
}

impl<P: OutputPin, D> ResetLine<P, D> {
    /// A line that holds the device in reset for `pulse_ns` nanoseconds, with no settle
    /// time. The pin is not touched until the first reset.
    pub fn new(pin: P, delay: D, pulse_ns: u32, polarity: Polarity) -> Self {
        ResetLine {
            pin,
            delay,
            pulse_ns,
            settle_ns: 0,
            polarity,
            pulses: 0,
        }
    }

    /// Also wait `settle_ns` nanoseconds after releasing the line (0: no wait, no delay call).
    pub fn with_settle(mut self, settle_ns: u32) -> Self {
        self.settle_ns = settle_ns;
        self
    }

    /// Put the line in its released (not-in-reset) level, for boot.
    pub fn release(&mut self) -> Result<(), P::Error> {
        self.drive(false)
    }

    /// How many pulses were attempted.
    pub fn pulses(&self) -> u32 {
        self.pulses
    }

    /// Give the pin and the delay back.
    pub fn into_parts(self) -> (P, D) {
        (self.pin, self.delay)
    }

    /// Drive the line to its reset level (`true`) or its released level.
    fn drive(&mut self, in_reset: bool) -> Result<(), P::Error> {
        let high = in_reset == (self.polarity == Polarity::ActiveHigh);
        self.pin.set_state(high.into())
    }

    /// The pulse's first half: count it and assert; on failure release the line (rather
    /// than leave it in an unknown level) and report the assert error.
    fn begin(&mut self) -> Result<(), ResetError<P::Error>> {
        self.pulses = self.pulses.saturating_add(1);
        self.drive(true).map_err(|error| {
            let _ = self.drive(false);
            ResetError::Assert(error)
        })
    }
}

impl<P: OutputPin, D: DelayNs> ResetLine<P, D> {
    /// One reset pulse.
    pub fn pulse(&mut self) -> Result<(), ResetError<P::Error>> {
        self.begin()?;
        self.delay.delay_ns(self.pulse_ns);
        self.drive(false).map_err(ResetError::Deassert)?;
        if self.settle_ns > 0 {
            self.delay.delay_ns(self.settle_ns);
        }
        Ok(())
    }
}

impl<P: OutputPin, D: DelayNs> ResetControl for ResetLine<P, D> {
    type Error = ResetError<P::Error>;

    fn reset(&mut self, device: DeviceId) -> Result<(), Self::Error> {
        fw_debug!("device {} reset pulse", device.0);
        self.pulse()
    }
}

#[cfg(feature = "embassy")]
impl<P: OutputPin, D: embedded_hal_async::delay::DelayNs> ResetLine<P, D> {
    /// One reset pulse, the hold (and settle time) awaited, so the executor runs other
    /// tasks meanwhile.
    pub async fn pulse_async(&mut self) -> Result<(), ResetError<P::Error>> {
        self.begin()?;
        self.delay.delay_ns(self.pulse_ns).await;
        self.drive(false).map_err(ResetError::Deassert)?;
        if self.settle_ns > 0 {
            self.delay.delay_ns(self.settle_ns).await;
        }
        Ok(())
    }
}
