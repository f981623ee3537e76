//! Time spent with interrupts masked, measured on the target.
//!
//! This binary's critical-section implementation is the single-core Cortex-M one
//! (`cpsid i` / restore PRIMASK) plus two reads of SysTick's current value: one just after
//! masking, one just before unmasking, for the outermost section only. SysTick runs free at
//! the CPU clock (25 MHz, 40 ns a tick); QEMU runs with `-icount shift=6`, so each
//! instruction advances the virtual clock by exactly 64 ns = 1.6 ticks, and a tick count
//! converts to instructions exactly ([`calibrate`] checks the ratio on a run of `nop`s
//! instead of trusting it). The longest section is kept per context: thread mode, the
//! fatal-error interrupt, other interrupts.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use cortex_m::peripheral::{syst::SystClkSource, SYST};

struct MeasuredCs;
critical_section::set_impl!(MeasuredCs);

static START: AtomicU32 = AtomicU32::new(0);
/// Ticks of the current section before a `wfi` (see [`MeasuredIdle`]).
static ACC: AtomicU32 = AtomicU32::new(0);
static IN_ISR: AtomicBool = AtomicBool::new(false);
static UNTIMED: AtomicBool = AtomicBool::new(false);
static MAX_THREAD: AtomicU32 = AtomicU32::new(0);
static MAX_FATAL: AtomicU32 = AtomicU32::new(0);

fn cvr() -> u32 {
    SYST::get_current()
}

// SAFETY: single core; PRIMASK masks every configurable interrupt, and the state restored is
// the one read on entry, so nesting is sound.
unsafe impl critical_section::Impl for MeasuredCs {
    unsafe fn acquire() -> bool {
        let was_active = cortex_m::register::primask::read().is_active();
        cortex_m::interrupt::disable();
        if was_active {
            START.store(cvr(), Ordering::Relaxed);
        }
        was_active
    }

    unsafe fn release(was_active: bool) {
        if was_active {
            let end = cvr();
            let ticks = (START.load(Ordering::Relaxed).wrapping_sub(end) & 0xFF_FFFF)
                + ACC.swap(0, Ordering::Relaxed);
            if !UNTIMED.load(Ordering::Relaxed) {
                let max = if IN_ISR.load(Ordering::Relaxed) {
                    &MAX_FATAL
                } else {
                    &MAX_THREAD
                };
                if ticks > max.load(Ordering::Relaxed) {
                    max.store(ticks, Ordering::Relaxed);
                }
            }
            cortex_m::interrupt::enable();
        }
    }
}

/// Start SysTick free running at the CPU clock, without its interrupt.
pub fn start_systick(syst: &mut SYST) {
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(0xFF_FFFF);
    syst.clear_current();
    syst.disable_interrupt();
    syst.enable_counter();
}

/// The fatal-error interrupt's sections are timed apart from thread mode's.
pub fn enter_isr() {
    IN_ISR.store(true, Ordering::Relaxed);
}

/// Leaving the fatal-error interrupt.
pub fn leave_isr() {
    IN_ISR.store(false, Ordering::Relaxed);
}

/// Run `f` (semihosting output) without timing its sections.
pub fn untimed<R>(f: impl FnOnce() -> R) -> R {
    UNTIMED.store(true, Ordering::Relaxed);
    let r = f();
    UNTIMED.store(false, Ordering::Relaxed);
    r
}

/// Longest sections since [`reset_maxima`], in SysTick ticks.
#[derive(Clone, Copy, Debug)]
pub struct Maxima {
    /// Thread mode.
    pub thread: u32,
    /// The fatal-error interrupt.
    pub fatal_isr: u32,
}

/// Forget the longest sections seen so far.
pub fn reset_maxima() {
    MAX_THREAD.store(0, Ordering::SeqCst);
    MAX_FATAL.store(0, Ordering::SeqCst);
}

/// The longest sections seen since [`reset_maxima`].
pub fn maxima() -> Maxima {
    Maxima {
        thread: MAX_THREAD.load(Ordering::SeqCst),
        fatal_isr: MAX_FATAL.load(Ordering::SeqCst),
    }
}

/// SysTick ticks per 100 instructions and the cost of an empty critical section.
#[derive(Clone, Copy, Debug)]
pub struct Calibration {
    /// Ticks for 100 `nop`s (160 expected at `-icount shift=6`).
    pub per_100: u32,
    /// Ticks measured for `critical_section::with(|_| ())`: the probe's own cost.
    pub empty_cs: u32,
}

impl Calibration {
    /// Ticks measured for a section → instructions executed in it, less the probe's cost.
    pub fn instructions(&self, ticks: u32) -> u32 {
        (ticks.saturating_sub(self.empty_cs) * 100 + self.per_100 / 2) / self.per_100.max(1)
    }
}

/// Measure the tick rate on 100 and 1100 `nop`s, and the empty section.
pub fn calibrate() -> Calibration {
    let t0 = cvr();
    // SAFETY: `nop`s only.
    unsafe { core::arch::asm!(".rept 100", "nop", ".endr", options(nomem, nostack)) };
    let t1 = cvr();
    unsafe { core::arch::asm!(".rept 1100", "nop", ".endr", options(nomem, nostack)) };
    let t2 = cvr();
    let short = t0.wrapping_sub(t1) & 0xFF_FFFF;
    let long = t1.wrapping_sub(t2) & 0xFF_FFFF;
    let per_100 = (long - short) / 10;
    reset_maxima();
    critical_section::with(|_| ());
    let empty_cs = maxima().thread;
    reset_maxima();
    Calibration { per_100, empty_cs }
}

/// The port's `WfiIdle` (check, then `wfi`, inside the critical section) with the probe
/// paused while the core sleeps: an interrupt pended during `wfi` wakes the core at once
/// and is taken as the section ends, so the sleep itself delays no interrupt; the
/// instructions before and after it are counted.
pub struct MeasuredIdle;

const SLEEPDEEP: u32 = 1 << 2;

/// Sleeps the owner loop took in the low-power mode (`Idle::sleep_low_power`).
pub static LOW_POWER_SLEEPS: AtomicU32 = AtomicU32::new(0);

impl pnp_lifecycle_firmware::Idle for MeasuredIdle {
    /// Every device is in Dx: `SLEEPDEEP` around the same masked `wfi` (what
    /// `DeepSleepIdle` does; QEMU sleeps as for `wfi`, the timer interrupt still wakes it).
    fn sleep_low_power(&mut self, ready: &mut dyn FnMut() -> bool) {
        LOW_POWER_SLEEPS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: SCR is written only here, in thread mode, read-modify-write.
        let scb = unsafe { &*cortex_m::peripheral::SCB::PTR };
        unsafe { scb.scr.modify(|r| r | SLEEPDEEP) };
        self.sleep(ready);
        unsafe { scb.scr.modify(|r| r & !SLEEPDEEP) };
    }

    fn sleep(&mut self, ready: &mut dyn FnMut() -> bool) {
        critical_section::with(|_| {
            if !ready() {
                let before = START.load(Ordering::Relaxed).wrapping_sub(cvr()) & 0xFF_FFFF;
                ACC.fetch_add(before, Ordering::Relaxed);
                cortex_m::asm::wfi();
                START.store(cvr(), Ordering::Relaxed);
            }
        });
    }
}
