//! The firmware port on a real (emulated) Cortex-M4: QEMU's `mps2-an386`.
//!
//! For 1, 4 and 8 clients: boot, register the clients, pend the catastrophic-error
//! interrupt line in the NVIC (a real exception entry through the vector table), run the
//! reset cycle with the reset line (an `embedded-hal` pin over the board's FPGAIO LED
//! register) pulsed low for 10 µs, then unload the driver. Every critical section is timed
//! with SysTick (see `measure`), and the outcome lines are printed through semihosting
//! for `../ci-step.sh` to check. Exits through semihosting: 0 when every check held.

#![no_std]
#![no_main]

mod board;
mod measure;

use core::cell::RefCell;
use core::fmt::Write as _;
use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::NVIC;
use cortex_m_rt::{entry, exception, ExceptionFrame};
use critical_section::Mutex;
use pnp_lifecycle_firmware::pnp_lifecycle::{
    queue_capacity, Access, ClientKind, Config, DeviceId, Input, PhaseKind, PowerDownKind, Reply,
    RequestToken,
};
use pnp_lifecycle_firmware::{
    latch_fatal_interrupt, on_fatal_interrupt, Firmware, IsrOutcome, Lock, Polarity, ResetLine,
    Shared,
};

use board::{Clients, Irq, LedPin, SpinDelay};
use measure::MeasuredIdle;

/// Client slots of the machine: the largest scenario.
pub const CLIENTS: usize = 8;
const Q: usize = queue_capacity(1, CLIENTS);
/// The machine shared by thread mode and the interrupt handlers.
pub type Machine = Mutex<RefCell<Shared<1, CLIENTS, 2, Q>>>;
/// The one device.
pub const DEV: DeviceId = DeviceId(0);
/// Reset pulse width.
const PULSE_NS: u32 = 10_000;

static MACHINE: Machine = Mutex::new(RefCell::new(Shared::new(Config::DEFAULT)));

/// What the fatal-error interrupt did last (0 none, 1 fed, 2 latched, 3 other).
static ISR_OUTCOME: AtomicU32 = AtomicU32::new(0);
static ISR_ENTRIES: AtomicU32 = AtomicU32::new(0);
/// Which interrupt path the handler takes: 0 latch only (`latch_fatal_interrupt`, the
/// default), 1 feed the machine in the interrupt (`on_fatal_interrupt`, for comparison).
static ISR_FEEDS: AtomicU32 = AtomicU32::new(0);

/// Semihosting print, not timed as a critical section.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        $crate::measure::untimed(|| cortex_m_semihosting::hprintln!($($arg)*));
    }};
}

#[entry]
fn main() -> ! {
    let mut cp = cortex_m::Peripherals::take().unwrap_or_else(|| fail("peripherals taken"));
    measure::start_systick(&mut cp.SYST);
    board::start_clock(&mut cp.NVIC);
    let cal = measure::calibrate();
    say!(
        "qemu: mps2-an386 Cortex-M4, SysTick {} ticks per 100 instructions, empty critical section {} ticks",
        cal.per_100,
        cal.empty_cs
    );
    let mut ok = true;
    for feeds in [false, true] {
        ISR_FEEDS.store(u32::from(feeds), Ordering::SeqCst);
        for clients in [1usize, 4, 8] {
            ok &= scenario(clients, &cal);
        }
    }
    if ok {
        say!("RESULT: PASS");
        cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_SUCCESS);
    } else {
        say!("RESULT: FAIL");
        cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_FAILURE);
    }
    loop {
        cortex_m::asm::wfi();
    }
}

fn scenario(n: usize, cal: &measure::Calibration) -> bool {
    let _ = MACHINE.lock(|s| *s = Shared::new(Config::DEFAULT));
    ISR_OUTCOME.store(0, Ordering::SeqCst);
    let line = ResetLine::new(LedPin::new(0), SpinDelay, PULSE_NS, Polarity::ActiveLow);
    let mut fw = Firmware::new(&MACHINE, line, Clients::default());
    let mut ok = true;
    let mut check = |what: &str, cond: bool| {
        if !cond {
            say!("CHECK FAILED: {} ({} clients)", what, n);
            ok = false;
        }
    };
    // Boot: device added and started, the reset line released, n clients registered.
    check("add", fw.input(Input::AddDevice { device: DEV }).is_ok());
    check(
        "start",
        fw.input(Input::Start {
            device: DEV,
            token: RequestToken(1),
        })
        .is_ok(),
    );
    check("start pump", fw.pump().is_ok());
    for _ in 0..n {
        match fw.input(Input::Register {
            device: DEV,
            kind: ClientKind::Trusted,
        }) {
            Ok(Reply::Registered { client, .. }) => fw.board_mut().add(client),
            other => {
                let _ = other;
                check("register", false);
            }
        }
    }
    check("boot", fw.run(&mut MeasuredIdle, |_| true).is_ok());
    let epoch0 = fw.with_machine(|m| m.epoch(DEV)).ok().flatten();
    measure::reset_maxima();

    // A real interrupt: pend the catastrophic-error line; the handler raises the fatal error.
    unsafe { NVIC::unmask(Irq::HcaCatastrophic) };
    NVIC::pend(Irq::HcaCatastrophic);
    cortex_m::asm::dsb();
    cortex_m::asm::isb();
    check("interrupt taken", ISR_ENTRIES.load(Ordering::SeqCst) > 0);
    check(
        "owner loop (cycle)",
        fw.run(&mut MeasuredIdle, |fw| fw.board().cycles_finished > 0)
            .is_ok(),
    );
    NVIC::mask(Irq::HcaCatastrophic);
    ISR_ENTRIES.store(0, Ordering::SeqCst);
    let m_cycle = measure::maxima();

    let epoch1 = fw.with_machine(|m| m.epoch(DEV)).ok().flatten();
    let phase = fw.with_machine(|m| m.phase(DEV)).ok().flatten();
    let b = fw.board();
    let (resets, ends) = (b.resets, b.reset_ends);
    let pin = fw.reset_control().pulses();
    let led = board::led_transitions();
    check("one cycle", b.cycles_finished == 1);
    check("every client told RESET", resets == n as u32);
    check("every client told RESET_END", ends == n as u32);
    check("running after the cycle", phase == Some(PhaseKind::Running));
    check("one pulse", pin == 1);
    check("line low then high", led == 2);
    say!(
        "cycle: {} clients, isr {}, RESET x{}, RESET_END x{}, reset line pulses {} (LED writes low/high {}), epoch {:?} -> {:?}, phase {:?}: completed",
        n,
        match ISR_OUTCOME.load(Ordering::SeqCst) {
            1 => "fed",
            2 => "latched",
            _ => "other",
        },
        resets,
        ends,
        pin,
        led,
        epoch0.map(|e| e.0),
        epoch1.map(|e| e.0),
        phase
    );

    // Low power: an idle power-down; the owner loop sleeps in the low-power mode
    // (SLEEPDEEP + the masked wfi) until a timer interrupt stands for a host request; the
    // client's access then brings the device back through the core and is granted.
    measure::LOW_POWER_SLEEPS.store(0, Ordering::Relaxed);
    check(
        "power down",
        fw.power_down(DEV, PowerDownKind::Idle, RequestToken(2))
            .is_ok(),
    );
    let wake_at = board::now().0 + 3;
    check(
        "owner loop (low power)",
        fw.run(&mut MeasuredIdle, |_| board::now().0 >= wake_at)
            .is_ok(),
    );
    let low = fw.with_machine(|m| m.phase(DEV)).ok().flatten();
    check("in Dx", low == Some(PhaseKind::LowPower));
    let sleeps = measure::LOW_POWER_SLEEPS.load(Ordering::Relaxed);
    check("slept in low power", sleeps > 0);
    let client = fw.board().handles[0];
    let epoch = fw.with_machine(|m| m.epoch(DEV)).ok().flatten();
    let access = epoch.map(|e| fw.access(client, e, Access::HardwareOp, 100));
    check(
        "access granted after the power-up",
        matches!(access, Some(Ok(Reply::AccessGranted))),
    );
    check(
        "access done",
        fw.input(Input::AccessDone { client }).is_ok(),
    );
    check("power pump", fw.pump().is_ok());
    let phase = fw.with_machine(|m| m.phase(DEV)).ok().flatten();
    let b = fw.board();
    check("back in D0", phase == Some(PhaseKind::Running));
    check(
        "one power-down, one power-up",
        (b.power_downs, b.power_ups) == (1, 1),
    );
    check(
        "every client told Suspending and Resumed",
        (b.suspending, b.resumed) == (n as u32, n as u32),
    );
    check("no pulse in Dx", fw.reset_control().pulses() == 1);
    say!(
        "power: {} clients, idle power-down, low-power sleeps {}, Suspending x{}, Resumed x{}, power-down/up {}/{}, access after the wake granted, phase {:?}: resumed",
        n,
        sleeps,
        b.suspending,
        b.resumed,
        b.power_downs,
        b.power_ups,
        phase
    );

    // Driver unload ends it.
    measure::reset_maxima();
    check("unload", fw.input(Input::Unload).is_ok());
    check(
        "owner loop (unload)",
        fw.run(&mut MeasuredIdle, |fw| fw.board().unload_finished > 0)
            .is_ok(),
    );
    let m_unload = measure::maxima();
    let b = fw.board();
    check("unload finished exactly once", b.unload_finished == 1);
    check("every client told Removed", b.removed == n as u32);
    let lost = MACHINE.lock(|s| s.lost_outputs()).unwrap_or(u32::MAX);
    check("no lost output", lost == 0);
    say!(
        "unload: {} clients, Removed x{}, UnloadMayFinish x{}: finished exactly once",
        n,
        b.removed,
        b.unload_finished
    );
    let mut line = heapless::String::<200>::new();
    let _ = write!(
        line,
        "latency: isr path {}, {} clients, masked instructions: fatal-error isr {}, thread max (cycle) {}, thread max (unload) {}",
        if ISR_FEEDS.load(Ordering::Relaxed) == 0 { "latch" } else { "feed" },
        n,
        cal.instructions(m_cycle.fatal_isr),
        cal.instructions(m_cycle.thread),
        cal.instructions(m_unload.thread)
    );
    say!("{}", line);
    ok
}

/// The catastrophic-error interrupt (NVIC line 31 of the AN386).
#[no_mangle]
extern "C" fn HCA_CATASTROPHIC() {
    measure::enter_isr();
    ISR_ENTRIES.fetch_add(1, Ordering::SeqCst);
    let outcome = if ISR_FEEDS.load(Ordering::Relaxed) == 0 {
        latch_fatal_interrupt(&MACHINE, DEV)
    } else {
        on_fatal_interrupt(&MACHINE, DEV, board::now)
    };
    ISR_OUTCOME.store(
        match outcome {
            IsrOutcome::Fed(_) => 1,
            IsrOutcome::Latched => 2,
            _ => 3,
        },
        Ordering::SeqCst,
    );
    measure::leave_isr();
}

/// The board's 1 ms timer (CMSDK APB timer 0, NVIC line 8).
#[no_mangle]
extern "C" fn TIMER0() {
    board::tick();
}

/// Interrupt vectors, in the device's order (what a PAC would generate).
#[repr(C)]
pub union Vector {
    handler: unsafe extern "C" fn(),
    reserved: usize,
}

#[link_section = ".vector_table.interrupts"]
#[no_mangle]
#[used]
static __INTERRUPTS: [Vector; 32] = {
    let mut v = [const { Vector { reserved: 0 } }; 32];
    v[Irq::Timer0 as usize] = Vector { handler: TIMER0 };
    v[Irq::HcaCatastrophic as usize] = Vector {
        handler: HCA_CATASTROPHIC,
    };
    v
};

#[exception]
unsafe fn HardFault(_frame: &ExceptionFrame) -> ! {
    fail("hard fault")
}

/// Print and exit with a failure status (a hang would be caught by the CI time limit).
pub fn fail(why: &str) -> ! {
    cortex_m_semihosting::hprintln!("PANIC: {}", why);
    cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::bkpt();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    cortex_m_semihosting::hprintln!("PANIC: {}", info);
    cortex_m_semihosting::debug::exit(cortex_m_semihosting::debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::bkpt();
    }
}
