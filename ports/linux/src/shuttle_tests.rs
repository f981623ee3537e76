//! Concurrency tests under shuttle (random and PCT schedulers). Compiled only for this
//! crate's unit tests, where `crate::sync` is shuttle's. Iterations per scheduler and
//! scenario: `PNP_LINUX_SHUTTLE_ITERS` (default 10000).

use crate::clock::ManualClock;
use crate::driver::*;
use crate::oracle::{self, Entry, Log, Recorder, RecordingHardware, What};
use crate::sync::{thread, Arc};
use pnp_lifecycle::*;

fn iters() -> usize {
    std::env::var("PNP_LINUX_SHUTTLE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

const DEV: DeviceId = DeviceId(0);
const IB: PortCaps = PortCaps {
    protocol: Protocol::Ib,
    max_mtu: 4096,
    atomics: true,
};

const CONFIG: Config = Config {
    untrusted_ack_timeout: 10,
    trusted_ack_timeout: 100,
    trusted_policy: TrustedTimeoutPolicy::Revoke,
    detach_timeout: 50,
    callback_timeout: 200,
    operation_timeout: 50,
};

type Clk = std::sync::Arc<ManualClock>;

fn setup(clients: &[(PciErsResult, ClientKind)]) -> (Arc<Driver>, Log, Vec<ClientId>, Clk) {
    let log = oracle::new_log();
    let clock: Clk = std::sync::Arc::new(ManualClock::new(Tick(0)));
    let d = Arc::new(Driver::with_clock(
        CONFIG,
        Arc::new(RecordingHardware { log: log.clone() }),
        clock.clone(),
    ));
    d.probe(DEV, &[IB]).expect("probe");
    let ids = clients
        .iter()
        .enumerate()
        .map(|(i, (vote, kind))| {
            d.register_client(Recorder::new(i as u32, *vote, &log), *kind)
                .expect("register")
        })
        .collect();
    (d, log, ids, clock)
}

/// A timer thread on simulated time: the clock jumps to each deadline the driver waits for.
fn timer(d: &Arc<Driver>, clock: &Clk) -> thread::JoinHandle<()> {
    let (d, clock) = (d.clone(), clock.clone());
    thread::spawn(move || {
        while let Some(t) = d.wait_tick_needed() {
            clock.set(t);
            let _ = d.timeout();
        }
    })
}

/// The PCI core's recovery worker: error_detected, slot_reset, resume.
fn ers_worker(d: &Arc<Driver>) -> thread::JoinHandle<()> {
    let d = d.clone();
    thread::spawn(move || {
        if d.error_detected(DEV, PciChannelState::Frozen) == PciErsResult::NeedReset
            && d.slot_reset(DEV) == PciErsResult::Recovered
        {
            d.resume(DEV);
        }
    })
}

/// A user-space (uverbs) context that acks late; after it was disassociated every call
/// must fail with EIO (or ENODEV once the device is gone).
fn user_acker(d: &Arc<Driver>, log: &Log, id: ClientId, c: u32) -> thread::JoinHandle<()> {
    let (d, log) = (d.clone(), log.clone());
    thread::spawn(move || {
        oracle::push(&log, Entry::AckAttempt { c, dev: DEV });
        let ok = d.reset_ack(id, DEV).is_ok();
        oracle::push(&log, Entry::AckResult { c, ok });
        let revoked = oracle::snapshot(&log)
            .iter()
            .any(|e| matches!(e, Entry::Enter { c: x, what: What::Disassociate, .. } if *x == c));
        let r = d.query_port(id, DEV, PhysPort(0));
        if revoked {
            let e = r.expect_err("a revoked context's call succeeded");
            assert!(
                matches!(e.errno, crate::Errno::EIO),
                "revoked context got {e:?}, not EIO"
            );
        }
    })
}

fn unload_and_check(d: &Arc<Driver>, log: &Log) {
    d.unload().expect("unload");
    oracle::push(log, Entry::UnloadDone);
}

fn verdict(d: &Arc<Driver>, log: &Log) {
    let entries = oracle::snapshot(log);
    if let Err(e) = oracle::check(&entries, true) {
        panic!("{e}\nlog: {entries:#?}");
    }
    if let Err(e) = d.audit(true) {
        panic!("{e}");
    }
}

fn unload_races_reset_cycle() {
    let (d, log, ids, clock) = setup(&[
        (PciErsResult::NeedReset, ClientKind::Trusted),
        (PciErsResult::None, ClientKind::Untrusted),
    ]);
    let t = timer(&d, &clock);
    let w = ers_worker(&d);
    let u = user_acker(&d, &log, ids[1], 1);
    let (d2, log2) = (d.clone(), log.clone());
    let unloader = thread::spawn(move || unload_and_check(&d2, &log2));
    for h in [w, u, unloader, t] {
        h.join().expect("thread finished");
    }
    verdict(&d, &log);
}

fn remove_races_votes() {
    let (d, log, ids, clock) = setup(&[
        (PciErsResult::NeedReset, ClientKind::Trusted),
        (PciErsResult::CanRecover, ClientKind::Trusted),
        (PciErsResult::None, ClientKind::Untrusted),
    ]);
    let t = timer(&d, &clock);
    let w = ers_worker(&d);
    let u = user_acker(&d, &log, ids[2], 2);
    let d2 = d.clone();
    let pci = thread::spawn(move || {
        let _ = d2.remove(DEV);
    });
    for h in [w, u, pci] {
        h.join().expect("thread finished");
    }
    unload_and_check(&d, &log);
    t.join().expect("timer finished");
    verdict(&d, &log);
}

fn unregister_races_notification() {
    // No deadline is involved (the port detaches on `remove`'s return): no timer thread.
    let (d, log, ids, _clock) = setup(&[(PciErsResult::NeedReset, ClientKind::Trusted)]);
    let d2 = d.clone();
    let sm = thread::spawn(move || {
        let _ = d2.set_port_state(DEV, PhysPort(0), LinkState::Active);
    });
    let (d3, log3, id) = (d.clone(), log.clone(), ids[0]);
    let unreg = thread::spawn(move || {
        oracle::push(&log3, Entry::UnregisterBegin { c: 0 });
        d3.unregister_client(id).expect("unregister");
        oracle::push(&log3, Entry::Unregistered { c: 0 });
        assert!(d3.client_gone(id) || cfg!(feature = "planted-fault"));
    });
    for h in [sm, unreg] {
        h.join().expect("thread finished");
    }
    unload_and_check(&d, &log);
    verdict(&d, &log);
}

fn perm_failure_during_slot_reset() {
    let (d, log, ids, clock) = setup(&[
        (PciErsResult::NeedReset, ClientKind::Trusted),
        (PciErsResult::None, ClientKind::Untrusted),
    ]);
    let t = timer(&d, &clock);
    let w = ers_worker(&d);
    let u = user_acker(&d, &log, ids[1], 1);
    let d2 = d.clone();
    let pci = thread::spawn(move || {
        assert_eq!(
            d2.error_detected(DEV, PciChannelState::PermFailure),
            PciErsResult::Disconnect
        );
        let _ = d2.remove(DEV);
    });
    for h in [w, u, pci] {
        h.join().expect("thread finished");
    }
    unload_and_check(&d, &log);
    t.join().expect("timer finished");
    verdict(&d, &log);
}

macro_rules! both_schedulers {
    ($random:ident, $pct:ident, $f:ident) => {
        #[test]
        fn $random() {
            shuttle::check_random($f, iters());
        }
        #[test]
        fn $pct() {
            shuttle::check_pct($f, iters(), 3);
        }
    };
}

both_schedulers!(
    unload_races_reset_cycle_random,
    unload_races_reset_cycle_pct,
    unload_races_reset_cycle
);
both_schedulers!(
    remove_races_votes_random,
    remove_races_votes_pct,
    remove_races_votes
);
#[cfg(not(feature = "planted-fault"))]
both_schedulers!(
    unregister_races_notification_random,
    unregister_races_notification_pct,
    unregister_races_notification
);
both_schedulers!(
    perm_failure_during_slot_reset_random,
    perm_failure_during_slot_reset_pct,
    perm_failure_during_slot_reset
);

/// With the planted fault (`unregister_client` does not wait for the in-flight
/// callback), the scheduler must find a schedule that breaks I1.
#[cfg(feature = "planted-fault")]
#[test]
fn planted_fault_is_caught() {
    let found = std::panic::catch_unwind(|| {
        shuttle::check_random(unregister_races_notification, iters());
    });
    let payload = found.expect_err("shuttle did not catch the planted fault");
    let msg = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        msg.contains("I1"),
        "caught, but not as an I1 violation: {msg}"
    );
}
