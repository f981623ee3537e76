//! The OS-side view of a PCI error-recovery cycle racing module unload: the PCI core's
//! recovery worker (error_detected / slot_reset / resume), `rmmod` (module_exit), a
//! kernel ib_client (IPoIB-like), a uverbs context that never answers, and a timer.
//!
//! Run: `cargo run -p pnp-lifecycle-linux --example linux_unload_race`

use pnp_lifecycle::*;
use pnp_lifecycle_linux::*;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

const DEV: DeviceId = DeviceId(0);

struct Printer {
    name: &'static str,
    vote: PciErsResult,
}

impl IbClient for Printer {
    fn add(&self, dev: DeviceId) {
        println!("[{}] add(mlx{})", self.name, dev.0);
    }
    fn remove(&self, dev: DeviceId, cause: RemoveCause) {
        println!("[{}] remove(mlx{}) cause={cause:?}", self.name, dev.0);
    }
    fn error_detected(&self, dev: DeviceId) -> PciErsResult {
        println!(
            "[{}] error_detected(mlx{}) -> {}",
            self.name,
            dev.0,
            self.vote.linux_name()
        );
        self.vote
    }
    fn resume(&self, dev: DeviceId, epoch: Epoch) {
        println!("[{}] resume(mlx{}) epoch={}", self.name, dev.0, epoch.0);
    }
    fn event(&self, dev: DeviceId, event: IbEvent) {
        println!("[{}] event(mlx{}) {}", self.name, dev.0, event.linux_name());
    }
    fn disassociate(&self, dev: DeviceId) {
        println!(
            "[{}] disassociate(mlx{}): IB_EVENT_DEVICE_FATAL, context fenced",
            self.name, dev.0
        );
    }
}

fn errno(r: Result<impl std::fmt::Debug, LinuxError>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => format!("-{} ({e})", e.errno.code()),
    }
}

fn main() {
    let config = Config {
        untrusted_ack_timeout: 20,
        trusted_ack_timeout: 1_000,
        trusted_policy: TrustedTimeoutPolicy::Revoke,
        detach_timeout: 500,
        callback_timeout: 200,
        operation_timeout: 500,
    };
    let clock = Arc::new(MonotonicClock::new());
    let d = Arc::new(Driver::<StdKernel>::with_clock(
        config,
        Arc::new(NullHardware),
        clock.clone(),
    ));
    let ib = PortCaps {
        protocol: Protocol::Ib,
        max_mtu: 4096,
        atomics: true,
    };
    println!("[pci] probe(mlx0) -> {}", errno(d.probe(DEV, &[ib, ib])));
    let ipoib = d
        .register_client(
            Arc::new(Printer {
                name: "ib_ipoib",
                vote: PciErsResult::NeedReset,
            }),
            ClientKind::Trusted,
        )
        .expect("register ipoib");
    let uctx = d
        .register_client(
            Arc::new(Printer {
                name: "uverbs0 ctx",
                vote: PciErsResult::None,
            }),
            ClientKind::Untrusted,
        )
        .expect("open uverbs");
    println!(
        "[ipoib] ib_query_port(mlx0, 1) with the link DOWN -> {}",
        errno(d.query_port(ipoib, DEV, PhysPort(0)))
    );
    d.set_port_state(DEV, PhysPort(0), LinkState::Active)
        .expect("SM");

    // A timer ticking in milliseconds.
    let timer = {
        let d = d.clone();
        thread::spawn(move || {
            while let Some(at) = d.wait_tick_needed() {
                let now = clock.now();
                if now < at {
                    thread::sleep(Duration::from_millis(at.0 - now.0));
                }
                let _ = d.timeout();
            }
        })
    };
    // The PCI core's AER recovery worker.
    let worker = {
        let d = d.clone();
        thread::spawn(move || {
            let r = d.error_detected(DEV, PciChannelState::Frozen);
            println!("[aer] error_detected(io_frozen) -> {}", r.linux_name());
            if r == PciErsResult::NeedReset {
                let r = d.slot_reset(DEV);
                println!("[aer] slot_reset -> {}", r.linux_name());
                if r == PciErsResult::Recovered {
                    d.resume(DEV);
                    println!("[aer] resume");
                }
            }
        })
    };
    thread::sleep(Duration::from_millis(5));
    println!(
        "[uverbs] ibv_post_send (context still a voter) -> {}",
        errno(d.post(uctx, DEV))
    );
    // rmmod races the cycle.
    let rmmod = {
        let d = d.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(10));
            println!("[rmmod] module_exit begins");
            let r = d.unload();
            println!("[rmmod] module_exit -> {}", errno(r));
        })
    };
    worker.join().expect("worker");
    println!(
        "[uverbs] ibv_query_port after the cycle -> {}",
        errno(d.query_port(uctx, DEV, PhysPort(0)))
    );
    rmmod.join().expect("rmmod");
    timer.join().expect("timer");
    println!(
        "[ipoib] ib_register_client after unload -> {}",
        errno(d.register_client(
            Arc::new(Printer {
                name: "late",
                vote: PciErsResult::NeedReset
            }),
            ClientKind::Trusted
        ))
    );
    println!("[driver] epoch after the cycle: {:?}", d.epoch(DEV));
    println!("[driver] dmesg: {:?}", d.kernel_log());
}
