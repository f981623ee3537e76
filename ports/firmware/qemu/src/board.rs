//! The AN386 board: its 1 ms clock (CMSDK APB timer 0), the reset line (bit 0 of the
//! FPGAIO LED register, read back to count its transitions), a SysTick-timed delay, and
//! the clients (thread-mode callbacks that answer the machine).

use core::convert::Infallible;
use core::ptr::{read_volatile, write_volatile};
use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::interrupt::InterruptNumber;
use cortex_m::peripheral::NVIC;
use pnp_lifecycle_firmware::pnp_lifecycle::{
    ClientHandle, DeviceId, Event, Output, PowerUpResult, Tick,
};
use pnp_lifecycle_firmware::{Answers, Board};

/// The AN386's interrupt lines used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum Irq {
    /// CMSDK APB timer 0.
    Timer0 = 8,
    /// No device of the AN386 drives line 31: it stands for the HCA's catastrophic-error
    /// line, pended by software in the NVIC.
    HcaCatastrophic = 31,
}

// SAFETY: the numbers are valid AN386 interrupt lines (QEMU gives the board 32).
unsafe impl InterruptNumber for Irq {
    fn number(self) -> u16 {
        self as u16
    }
}

const TIMER0: usize = 0x4000_0000;
const FPGAIO_LED: usize = 0x4002_8000;
/// The AN386's peripheral clock (= CPU clock) in QEMU.
pub const CLOCK_HZ: u32 = 25_000_000;

static MS: AtomicU32 = AtomicU32::new(0);
static LED_WRITES: AtomicU32 = AtomicU32::new(0);

/// Start the 1 ms clock interrupt.
pub fn start_clock(_nvic: &mut NVIC) {
    // SAFETY: CMSDK APB timer 0 registers (CTRL, VALUE, RELOAD, INTCLEAR) on the AN386.
    unsafe {
        write_volatile((TIMER0 + 0x8) as *mut u32, CLOCK_HZ / 1000 - 1);
        write_volatile((TIMER0 + 0x4) as *mut u32, CLOCK_HZ / 1000 - 1);
        write_volatile((TIMER0 + 0xC) as *mut u32, 1);
        write_volatile(TIMER0 as *mut u32, 0b1001); // enable, interrupt enable
        NVIC::unmask(Irq::Timer0);
    }
}

/// The timer interrupt's body.
pub fn tick() {
    // SAFETY: INTCLEAR of timer 0.
    unsafe { write_volatile((TIMER0 + 0xC) as *mut u32, 1) };
    MS.fetch_add(1, Ordering::SeqCst);
}

/// Milliseconds since boot: the machine's clock.
pub fn now() -> Tick {
    Tick(u64::from(MS.load(Ordering::SeqCst)))
}

/// The number of level changes the reset line's register saw since the last call.
pub fn led_transitions() -> u32 {
    LED_WRITES.swap(0, Ordering::SeqCst)
}

/// An `embedded-hal` output pin over one bit of the FPGAIO LED register. Each write is read
/// back; a level change is counted.
pub struct LedPin {
    bit: u32,
}

impl LedPin {
    /// The pin on bit `bit`, released (high).
    pub fn new(bit: u32) -> Self {
        let mut pin = LedPin { bit };
        pin.write(true);
        let _ = led_transitions();
        pin
    }

    fn write(&mut self, high: bool) {
        // SAFETY: the FPGAIO LED register of the AN386 (read/write, bits 0..1).
        unsafe {
            let reg = FPGAIO_LED as *mut u32;
            let before = read_volatile(reg);
            let after = if high {
                before | (1 << self.bit)
            } else {
                before & !(1 << self.bit)
            };
            write_volatile(reg, after);
            if read_volatile(reg) != before {
                LED_WRITES.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

impl embedded_hal::digital::ErrorType for LedPin {
    type Error = Infallible;
}

impl embedded_hal::digital::OutputPin for LedPin {
    fn set_low(&mut self) -> Result<(), Infallible> {
        self.write(false);
        Ok(())
    }
    fn set_high(&mut self) -> Result<(), Infallible> {
        self.write(true);
        Ok(())
    }
}

/// A busy-wait delay on SysTick (free running at the CPU clock).
pub struct SpinDelay;

impl embedded_hal::delay::DelayNs for SpinDelay {
    fn delay_ns(&mut self, ns: u32) {
        let ticks = (u64::from(ns) * u64::from(CLOCK_HZ) / 1_000_000_000) as u32;
        let start = cortex_m::peripheral::SYST::get_current();
        while start.wrapping_sub(cortex_m::peripheral::SYST::get_current()) & 0xFF_FFFF < ticks {}
    }
}

/// The clients and what they saw. A client answers from inside its callback
/// (`Board::deliver`): `RESET` with `ResetExecute`, `RESET_END` by acquiring the new
/// interface, `Removed` by unregistering.
#[derive(Default)]
pub struct Clients {
    /// Registered clients.
    pub handles: heapless::Vec<ClientHandle, 8>,
    /// `RESET` callbacks.
    pub resets: u32,
    /// `RESET_END` callbacks.
    pub reset_ends: u32,
    /// `Removed` callbacks.
    pub removed: u32,
    /// `ResetCycleFinished` outputs.
    pub cycles_finished: u32,
    /// `UnloadMayFinish` outputs.
    pub unload_finished: u32,
    /// `Suspending` callbacks.
    pub suspending: u32,
    /// `Resumed` callbacks.
    pub resumed: u32,
    /// Power-downs and power-ups of the hardware (`Board::power_down` / `power_up`).
    pub power_downs: u32,
    /// See `power_downs`.
    pub power_ups: u32,
}

impl Clients {
    /// A registered client.
    pub fn add(&mut self, client: ClientHandle) {
        let _ = self.handles.push(client);
    }
}

impl Board for Clients {
    fn now(&mut self) -> Tick {
        now()
    }

    fn notify(&mut self, client: ClientHandle, event: Event) {
        self.deliver(client, event, &mut Answers::new(client));
    }

    fn deliver(&mut self, _client: ClientHandle, event: Event, answers: &mut Answers) {
        match event {
            Event::Reset => {
                self.resets += 1;
                answers.reset_execute();
            }
            Event::ResetEnd { .. } => {
                self.reset_ends += 1;
                answers.acquire_interface();
            }
            Event::Removed { .. } => {
                self.removed += 1;
                answers.unregister();
            }
            Event::Suspending { .. } => self.suspending += 1,
            Event::Resumed { .. } => self.resumed += 1,
            _ => {}
        }
    }

    fn power_down(&mut self, _device: DeviceId) {
        self.power_downs += 1; // a real board gates the peripheral's clock here
    }

    fn power_up(&mut self, _device: DeviceId) -> PowerUpResult {
        self.power_ups += 1;
        PowerUpResult::Powered
    }

    fn observe(&mut self, output: &Output) {
        match output {
            Output::ResetCycleFinished { .. } => self.cycles_finished += 1,
            Output::UnloadMayFinish => self.unload_finished += 1,
            _ => {}
        }
    }

    fn start(&mut self, _device: DeviceId) -> pnp_lifecycle_firmware::pnp_lifecycle::StartResult {
        pnp_lifecycle_firmware::pnp_lifecycle::StartResult::Started
    }
}
