//! A bare-metal image holding the core, to measure its flash and RAM on
//! thumbv7em-none-eabihf: `Lifecycle<1 device, 4 clients, 1 port, queue_capacity(1, 4)>`
//! in a static (as the firmware port holds it), driven by an owner loop whose every input
//! is opaque to the optimiser (`black_box`), so every handler the machine has is kept.
//!
//! Features: `baseline` (the same skeleton without the machine: its `.text` is
//! subtracted), `statig` (the statig-fsm peer in the same skeleton). The symbol sizes
//! `PNP_MACHINE` (the machine itself, in RAM) and `SIZE_OF_*` (arrays as long as the type
//! is) carry the target's `size_of` figures into the ELF.
#![no_std]
#![no_main]

use core::hint::black_box;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        black_box(());
    }
}

/// The entry point (rust-lld's default entry symbol): the owner's loop, forever.
#[no_mangle]
pub extern "C" fn _start() -> ! {
    work::run()
}

#[cfg(not(any(feature = "baseline", feature = "statig")))]
mod work {
    use core::hint::black_box;
    use core::mem::size_of;
    use core::ptr::addr_of_mut;
    use pnp_lifecycle::*;

    /// One device, four clients, one port.
    pub type M = Lifecycle<1, 4, 1, { queue_capacity(1, 4) }>;

    /// The machine, in RAM for the program's life (its symbol size is `size_of::<M>()`).
    #[no_mangle]
    pub static mut PNP_MACHINE: M = M::new(Config::DEFAULT);

    #[no_mangle]
    #[used]
    pub static SIZE_OF_INPUT: [u8; size_of::<Input>()] = [0; size_of::<Input>()];
    #[no_mangle]
    #[used]
    pub static SIZE_OF_OUTPUT: [u8; size_of::<Output>()] = [0; size_of::<Output>()];
    #[no_mangle]
    #[used]
    pub static SIZE_OF_REPLY: [u8; size_of::<Reply>()] = [0; size_of::<Reply>()];
    #[no_mangle]
    #[used]
    pub static SIZE_OF_ERROR: [u8; size_of::<Error>()] = [0; size_of::<Error>()];

    pub fn run() -> ! {
        // SAFETY: the only reference to the static, taken once on the only thread.
        let m = unsafe { &mut *addr_of_mut!(PNP_MACHINE) };
        loop {
            // Any input at any time: the optimiser cannot drop a handler.
            let _ = black_box(m.handle(black_box(Tick(0)), black_box(Input::Timeout)));
            while let Some(output) = m.poll_output() {
                black_box(output);
            }
            black_box(m.poll_timeout());
        }
    }
}

#[cfg(feature = "baseline")]
mod work {
    pub fn run() -> ! {
        loop {
            core::hint::black_box(0u32);
        }
    }
}

#[cfg(feature = "statig")]
mod work {
    use core::hint::black_box;
    use core::mem::size_of;
    use statig_fsm::{Device, Handle};

    #[no_mangle]
    #[used]
    pub static SIZE_OF_STATIG_DEVICE: [u8; size_of::<Device>()] = [0; size_of::<Device>()];

    pub fn run() -> ! {
        let mut dev = Device::new();
        loop {
            let h: Handle = black_box(Handle {
                slot: 0,
                generation: 0,
            });
            let _ = black_box(match black_box(0u8) {
                0 => dev.register().map(drop),
                1 => dev.unregister(h),
                2 => dev.request_reset(h),
                3 => dev.ack_reset(h),
                4 => dev.hw_reset_done(),
                5 => dev.reacquire(h).map(drop),
                6 => dev.start(),
                _ => dev.remove(),
            });
            while let Some(output) = dev.poll_output() {
                black_box(output);
            }
        }
    }
}
