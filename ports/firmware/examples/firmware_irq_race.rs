//! The firmware-side view of a reset cycle racing driver unload, with a catastrophic-error
//! interrupt landing in the middle: reset-pin transitions, interrupt entries and what each
//! client receives. Host-runnable:
//!
//! ```text
//! cargo run -p pnp-lifecycle-firmware --example firmware_irq_race
//! ```
//!
//! The machine lives in a `ConstStaticCell`, shared through a
//! `critical_section::Mutex<RefCell<…>>` (critical-section's `std` implementation stands in
//! for the Cortex-M one); the "interrupt" is called between two thread-mode steps, as the
//! NVIC would preempt thread mode.

use core::cell::RefCell;
use core::convert::Infallible;

use critical_section::Mutex;
use embedded_hal::delay::DelayNs;
use embedded_hal::digital::{ErrorType, OutputPin};
use pnp_lifecycle::*;
use pnp_lifecycle_firmware::*;
use pnp_lifecycle_testkit::firmware_port::board::{
    feed_client, AsRecording, Behaviour, RecordingBoard,
};
use pnp_lifecycle_testkit::firmware_port::check;
use static_cell::ConstStaticCell;

const Q: usize = queue_capacity(1, 8);
type Machine = Mutex<RefCell<Shared<1, 8, 2, Q>>>;
const DEV: DeviceId = DeviceId(0);

static MACHINE: ConstStaticCell<Machine> =
    ConstStaticCell::new(Mutex::new(RefCell::new(Shared::new(Config::DEFAULT))));
static ISR_LINK: IsrLink<Machine> = IsrLink::new();
static BOOT: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// The platform's monotonic timer (a SysTick counter on the target): ms since boot.
fn millis() -> Tick {
    Tick::from_duration(BOOT.get_or_init(std::time::Instant::now).elapsed(), 1_000)
}

/// The catastrophic-error interrupt handler.
fn hca_catastrophic_irq() {
    if let Some(shared) = ISR_LINK.get() {
        let outcome = on_fatal_interrupt(shared, DEV, millis);
        println!("  [ISR ] catastrophic error -> Input::FatalError: {outcome:?}");
    }
}

/// A reset pin that prints its transitions.
struct PrintPin;
impl ErrorType for PrintPin {
    type Error = Infallible;
}
impl OutputPin for PrintPin {
    fn set_low(&mut self) -> Result<(), Infallible> {
        println!("  [PIN ] nRESET -> LOW  (device held in reset)");
        Ok(())
    }
    fn set_high(&mut self) -> Result<(), Infallible> {
        println!("  [PIN ] nRESET -> HIGH (released)");
        Ok(())
    }
}

struct PrintDelay;
impl DelayNs for PrintDelay {
    fn delay_ns(&mut self, ns: u32) {
        println!("  [WAIT] DelayNs {ns} ns");
    }
}

/// Client callbacks, printed, and recorded (testkit's `RecordingBoard`) for the oracle.
struct Clients(RecordingBoard);
impl Board for Clients {
    fn now(&mut self) -> Tick {
        millis()
    }
    fn fence(&mut self, client: ClientHandle) {
        println!("  [MASK] client {} path masked", client.slot);
        self.0.fence(client);
    }
    fn notify(&mut self, client: ClientHandle, event: Event) {
        println!("  [CB  ] client {} <- {event:?}", client.slot);
        self.0.notify(client, event);
    }
    fn observe(&mut self, output: &Output) {
        if !matches!(output, Output::Notify { .. }) {
            println!("  [OUT ] {output:?}");
        }
        self.0.observe(output);
    }
    fn reset_finished(&mut self, device: DeviceId, result: ResetResult) {
        self.0.reset_finished(device, result);
    }
}

impl AsRecording for Clients {
    fn recording(&mut self) -> &mut RecordingBoard {
        &mut self.0
    }
}

type Fw = Firmware<'static, Machine, ResetLine<PrintPin, PrintDelay>, Clients, 1, 8, 2, Q>;

fn feed(fw: &mut Fw, input: Input) {
    let result = fw.input(input);
    println!("[THREAD] {input:?} -> {result:?}");
    fw.board().0.record_request(input, &result);
}

fn answer_one(fw: &mut Fw) -> bool {
    let Some(input) = fw.board_mut().0.reactions.pop_front() else {
        return false;
    };
    let mut result = feed_client(fw, input);
    if let Err(PortError::Backlog { .. }) = result {
        fw.pump().ok();
        result = feed_client(fw, input);
    }
    println!("[CLIENT] {input:?} -> {result:?}");
    true
}

fn main() {
    let shared: &'static Machine = MACHINE.take();
    ISR_LINK.install(shared);
    let line = ResetLine::new(PrintPin, PrintDelay, 10_000, Polarity::ActiveLow).with_settle(2_000);
    let mut fw: Fw = Firmware::new(shared, line, Clients(RecordingBoard::default()));

    println!("== boot");
    feed(&mut fw, Input::AddDevice { device: DEV });
    feed(
        &mut fw,
        Input::Start {
            device: DEV,
            token: RequestToken(1),
        },
    );
    fw.pump().ok();
    let mut clients = Vec::new();
    for kind in [ClientKind::Trusted, ClientKind::Untrusted] {
        if let Ok(Reply::Registered { client, .. }) =
            fw.input(Input::Register { device: DEV, kind })
        {
            println!("[THREAD] register {kind:?} -> client {}", client.slot);
            fw.board_mut()
                .0
                .behaviour
                .insert(client, Behaviour::Cooperative);
            clients.push(client);
        }
    }

    println!("== client 0 asks for a soft reset");
    feed(&mut fw, Input::ResetRequest { client: clients[0] });
    // Thread mode delivers the first RESET callback...
    fw.step().ok();
    fw.step().ok();
    println!("== the interrupt preempts thread mode between two steps");
    hca_catastrophic_irq();
    fw.pump().ok();
    println!("== both clients answer reset_execute: the hardware reset is commanded");
    answer_one(&mut fw);
    answer_one(&mut fw);
    println!("== thread mode pulses the reset line (one step)...");
    fw.step().ok();
    println!("== ...and driver unload arrives before ResetDone is fed back");
    feed(&mut fw, Input::Unload);
    println!("== thread mode drains (the hardware reset in flight finishes first)");
    loop {
        if let Err(e) = fw.pump() {
            println!("[THREAD] pump error: {e:?}");
        }
        if !answer_one(&mut fw) {
            break;
        }
    }
    println!("== interrupt after unload");
    hca_catastrophic_irq();

    let board = &fw.board().0;
    println!("== what each client received");
    for (client, events) in &board.events {
        println!("  client {}: {events:?}", client.slot);
    }
    println!("== reset pulses: {}", fw.reset_control().pulses());
    match check(&board.rec.snapshot(), true) {
        Ok(()) => println!("== the common oracle (I1-I5, I12) and the board checks hold"),
        Err(e) => {
            println!("== VIOLATION: {e}");
            std::process::exit(1);
        }
    }
    println!(
        "== size_of Shared<1 device, 8 clients, 2 ports, Q={Q}> = {} bytes (Lifecycle alone {} bytes)",
        core::mem::size_of::<Shared<1, 8, 2, Q>>(),
        core::mem::size_of::<Lifecycle<1, 8, 2, Q>>()
    );
}
