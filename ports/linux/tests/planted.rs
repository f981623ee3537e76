//! Each planted port fault (`pnp_lifecycle_testkit::linux_port::planted`) is caught, and
//! the same scenario over the real port is clean.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use pnp_lifecycle::{ClientKind, DeviceId, Tick};
use pnp_lifecycle_linux::{
    Dispatch, Driver, Errno, IbClient, LinuxOs, LinuxPort, PciChannelState, PciErsResult,
    RemoveCause,
};
use pnp_lifecycle_runtime::{Kernel, ManualClock, ShuttleKernel};
use pnp_lifecycle_testkit::linux_port::planted::{
    FatalAfterRemove, LyingKernel, ResumeWithoutPowerUp, VoteFirst,
};
use pnp_lifecycle_testkit::linux_port::race::run_with;
use pnp_lifecycle_testkit::linux_port::{
    explore, iterations, timer, Recorder, RecordingHardware, CONFIG, DEV, IB,
};
use pnp_lifecycle_testkit::observed::{check, Log, Obs};
use shuttle::thread;

fn lcg(seed: &mut u64) -> u8 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 33) as u8
}

/// The race harness over schedules with PCI remove; the first finding, if any.
fn harness<O: LinuxPort>(os: impl Fn(Arc<RecordingHardware>) -> O) -> (usize, Option<String>) {
    let mut seed = 3u64;
    for n in 1..=2_000 {
        let mut s = vec![0x01 | (lcg(&mut seed) & 0x0e)];
        s.extend((0..48).map(|_| lcg(&mut seed)));
        if let Err(e) = run_with(&s, &os) {
            return (n, Some(e));
        }
    }
    (2_000, None)
}

/// shuttle's panic hook is process-wide: a schedule that panics on purpose (a planted
/// fault caught) while another test's shuttle run installs or restores the hook loses its
/// panic ("ExecutionState NotSet"). The tests of this file run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn planted_fatal_after_remove_is_caught_by_the_race_harness() {
    let _serial = serial();
    let (n, clean) = harness(|hw| LinuxOs::new(hw));
    assert_eq!(clean, None, "control run");
    let (found_after, finding) = harness(|hw| FatalAfterRemove::new(hw));
    let finding = finding.expect("the planted fault went unnoticed");
    assert!(finding.starts_with("I1"), "{finding}");
    println!(
        "planted fatal_after_remove: caught (oracle, schedule {found_after}; control clean over {n}): {}",
        finding.split(';').next().unwrap_or("")
    );
}

/// A PCI recovery with one kernel client voting `NEED_RESET` while `slot_reset` waits on
/// another thread, over `os`; the oracle's verdict.
fn vote_scenario<K: Kernel, O: LinuxPort>(d: Arc<Driver<K, O>>, log: Log) -> Result<(), String> {
    let client = Recorder::yielding(0, PciErsResult::NeedReset, &log);
    d.register_client(client, ClientKind::Trusted)
        .map_err(|e| e.to_string())?;
    let pci = {
        let d = d.clone();
        thread::spawn(move || {
            // The PCI core's recovery worker, once the error was reported.
            let reported = |o: &mut pnp_lifecycle_linux::LinuxOwner<O>, _| {
                (o.machine().phase(DEV) != Some(pnp_lifecycle::PhaseKind::Running)).then_some(())
            };
            d.runtime().wait_until(reported).expect("not in a callback");
            if d.slot_reset(DEV) == PciErsResult::Recovered {
                d.resume(DEV);
            }
        })
    };
    d.error_detected(DEV, PciChannelState::Frozen);
    pci.join().unwrap();
    d.unload().map_err(|e| e.to_string())?;
    log.push(Obs::UnloadReturned);
    check(&log.snapshot(), true)
}

fn vote_first_driver(log: &Log) -> Arc<Driver<ShuttleKernel, VoteFirst<ShuttleKernel>>> {
    let os = VoteFirst {
        inner: LinuxOs::new(RecordingHardware::new(log)),
        runtime: OnceLock::new(),
    };
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let d = Arc::new(Driver::on(CONFIG, os, clock, Dispatch::Inline));
    let _ = d.runtime().os().runtime.set(Arc::downgrade(d.runtime()));
    d.probe(DEV, &[IB]).expect("probe");
    d
}

#[test]
fn planted_vote_first_is_caught_by_shuttle() {
    let _serial = serial();
    let iters = iterations(1000);
    explore("vote scenario (control)", iters, || {
        let log = Log::new();
        let clock = Arc::new(ManualClock::new(Tick(0)));
        let d = Arc::new(Driver::<ShuttleKernel>::with_clock(
            CONFIG,
            RecordingHardware::new(&log),
            clock,
        ));
        d.probe(DEV, &[IB]).expect("probe");
        vote_scenario(d, log).expect("control run");
    });
    // The verdicts are recorded, not panicked: a panic while other tasks still hold
    // shuttle's primitives can be lost in their teardown ("ExecutionState NotSet").
    let verdicts: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let run = {
        let seen = Arc::clone(&verdicts);
        move || {
            let log = Log::new();
            let d = vote_first_driver(&log);
            if let Err(e) = vote_scenario(d, log) {
                seen.lock().unwrap().push(e);
            }
        }
    };
    shuttle::check_random(run.clone(), iters);
    shuttle::check_pct(run, iters, 3);
    let verdicts = verdicts.lock().unwrap();
    let msg = verdicts.first().expect("the planted fault went unnoticed");
    assert!(verdicts.iter().all(|m| m.contains("I3")), "{verdicts:?}");
    println!(
        "planted vote_first: caught in {} of {iters} random + {iters} PCT schedules ({})",
        verdicts.len(),
        msg.lines().next().unwrap_or("")
    );
}

/// A client that unregisters itself from inside its `remove` callback (a blocking call
/// where it would wait for itself): `EDEADLK` expected.
struct SelfUnregister<K: Kernel> {
    driver: OnceLock<std::sync::Weak<Driver<K>>>,
    id: OnceLock<pnp_lifecycle_linux::ClientId>,
    answer: Arc<std::sync::Mutex<Option<Errno>>>,
}

impl<K: Kernel> IbClient for SelfUnregister<K> {
    fn add(&self, _: DeviceId) {}
    fn remove(&self, _: DeviceId, _: RemoveCause) {
        let d = self.driver.get().and_then(std::sync::Weak::upgrade);
        if let (Some(d), Some(id)) = (d, self.id.get()) {
            let r = d.unregister_client(*id);
            *self.answer.lock().unwrap() = r.err().map(|e| e.errno);
        }
    }
}

fn self_unregister<K: Kernel>() -> Option<Errno> {
    let log = Log::new();
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let d = Arc::new(Driver::<K>::with_clock(
        CONFIG,
        RecordingHardware::new(&log),
        clock.clone(),
    ));
    d.probe(DEV, &[IB]).expect("probe");
    let answer = Arc::default();
    let client = Arc::new(SelfUnregister::<K> {
        driver: OnceLock::new(),
        id: OnceLock::new(),
        answer: Arc::clone(&answer),
    });
    let _ = client.driver.set(Arc::downgrade(&d));
    let id = d
        .register_client(client.clone(), ClientKind::Trusted)
        .expect("register");
    let _ = client.id.set(id);
    let t = {
        let (d, clock) = (d.clone(), clock.clone());
        thread::spawn(move || timer(&d, &clock, &[]))
    };
    d.remove(DEV).expect("remove");
    d.unload().expect("unload");
    t.join().unwrap();
    let a = *answer.lock().unwrap();
    a
}

#[test]
fn planted_lying_kernel_is_caught_by_shuttle_as_a_deadlock() {
    let _serial = serial();
    let iters = iterations(1000);
    explore("unregister from a callback (control)", iters, || {
        assert_eq!(self_unregister::<ShuttleKernel>(), Some(Errno::EDEADLK));
    });
    let caught = catch_unwind(AssertUnwindSafe(|| {
        shuttle::check_random(
            || {
                self_unregister::<LyingKernel>();
            },
            iters,
        )
    }));
    let e = caught.expect_err("the planted fault went unnoticed");
    let msg = e
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.contains("deadlock"), "{msg}");
    println!(
        "planted lying_kernel: caught (shuttle: {})",
        msg.lines().next().unwrap_or("")
    );
}

/// Runtime suspend, a verb that wakes the device, system suspend and resume, a verb, over
/// `os`; the oracle's verdict (I14 among the rest).
fn power_scenario<O: LinuxPort>(os: O, log: &Log) -> Result<(), String> {
    use pnp_lifecycle_linux::PmOp;
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let d = Driver::<pnp_lifecycle_linux::StdKernel, O>::on(CONFIG, os, clock, Dispatch::Inline);
    d.probe(DEV, &[IB]).map_err(|e| e.to_string())?;
    let rec = Recorder::new(0, PciErsResult::NeedReset, log);
    let id = d
        .register_client(rec, ClientKind::Trusted)
        .map_err(|e| e.to_string())?;
    let verb = || {
        d.begin_hw_op(id, DEV).map_err(|e| e.to_string())?;
        log.push(Obs::OperationBegin {
            client: 0,
            device: DEV,
        });
        log.push(Obs::OperationEnd {
            client: 0,
            device: DEV,
        });
        d.end_hw_op(id, DEV).map_err(|e| e.to_string())
    };
    d.pm(DEV, PmOp::RuntimeSuspend).map_err(|e| e.to_string())?;
    verb()?;
    d.pm(DEV, PmOp::Suspend).map_err(|e| e.to_string())?;
    d.pm(DEV, PmOp::Resume).map_err(|e| e.to_string())?;
    verb()?;
    d.unload().map_err(|e| e.to_string())?;
    log.push(Obs::UnloadReturned);
    check(&log.snapshot(), true)
}

#[test]
fn planted_resume_without_power_up_is_caught_by_the_oracle_as_i14() {
    let _serial = serial();
    let log = Log::new();
    let clean = power_scenario(LinuxOs::new(RecordingHardware::new(&log)), &log);
    assert_eq!(clean, Ok(()), "control run");
    let log = Log::new();
    let inner = LinuxOs::new(RecordingHardware::new(&log));
    let finding = power_scenario(ResumeWithoutPowerUp { inner }, &log);
    let finding = finding.expect_err("the planted fault went unnoticed");
    assert!(finding.starts_with("I14"), "{finding}");
    println!("planted resume_without_power_up: caught (oracle): {finding}");
}
