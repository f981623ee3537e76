//! The hardware reset: a reset line driven through an `embedded_hal` [`OutputPin`] and held
//! for a pulse width timed with [`DelayNs`].

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

/// Something that can execute the hardware reset of a device (answered to the machine with
/// [`pnp_lifecycle::Input::ResetDone`]).
pub trait ResetControl {
    /// Why a reset failed.
    type Error;
    /// Reset `device`'s hardware; return once it is out of reset.
    fn reset(&mut self, device: DeviceId) -> Result<(), Self::Error>;
}

/// One reset line: assert, hold `pulse_ns`, deassert, then wait `settle_ns` for the device
/// to come out of reset. Serves every device id it is asked about (a board with one device
/// per line implements [`ResetControl`] itself to pick the line).
#[derive(Debug)]
pub struct ResetLine<P, D> {
    pin: P,
    delay: D,
    pulse_ns: u32,
    settle_ns: u32,
    polarity: Polarity,
    pulses: u32,
}

impl<P: OutputPin, D: DelayNs> ResetLine<P, D> {
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
        self.deassert()
    }

    /// One reset pulse.
    pub fn pulse(&mut self) -> Result<(), ResetError<P::Error>> {
        self.pulses = self.pulses.saturating_add(1);
        if let Err(error) = self.assert() {
            // Leave the line released rather than in an unknown level; the assert error is
            // what the caller hears about.
            let _ = self.deassert();
            return Err(ResetError::Assert(error));
        }
        self.delay.delay_ns(self.pulse_ns);
        self.deassert().map_err(ResetError::Deassert)?;
        if self.settle_ns > 0 {
            self.delay.delay_ns(self.settle_ns);
        }
        Ok(())
    }

    /// How many pulses were attempted.
    pub fn pulses(&self) -> u32 {
        self.pulses
    }

    /// The pulse width in nanoseconds.
    pub fn pulse_ns(&self) -> u32 {
        self.pulse_ns
    }

    /// Give the pin and the delay back.
    pub fn into_parts(self) -> (P, D) {
        (self.pin, self.delay)
    }

    fn assert(&mut self) -> Result<(), P::Error> {
        match self.polarity {
            Polarity::ActiveLow => self.pin.set_low(),
            Polarity::ActiveHigh => self.pin.set_high(),
        }
    }

    fn deassert(&mut self) -> Result<(), P::Error> {
        match self.polarity {
            Polarity::ActiveLow => self.pin.set_high(),
            Polarity::ActiveHigh => self.pin.set_low(),
        }
    }
}

impl<P: OutputPin, D: DelayNs> ResetControl for ResetLine<P, D> {
    type Error = ResetError<P::Error>;

    fn reset(&mut self, device: DeviceId) -> Result<(), Self::Error> {
        fw_debug!("device {} reset pulse", device.0);
        self.pulse()
    }
}
