//! The cooperative schedule harness (`pnp_lifecycle_testkit::linux_port::race::run`, what
//! the fuzz target `linux_unload_race` calls) over generated schedules, the fuzz corpus
//! and the kept crash.

use pnp_lifecycle_testkit::linux_port::race::run;

fn lcg(seed: &mut u64) -> u8 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 33) as u8
}

#[test]
fn every_flag_combination_over_many_schedules_holds_the_invariants() {
    let mut seed = 7u64;
    let mut runs = 0;
    for flags in 0u8..128 {
        for _ in 0..100 {
            let len = usize::from(lcg(&mut seed)) % 64;
            let mut s = vec![flags];
            s.extend((0..len).map(|_| lcg(&mut seed)));
            if let Err(e) = run(&s) {
                panic!("schedule {s:?}: {e}");
            }
            runs += 1;
        }
    }
    println!("linux race harness: {runs} schedules");
    assert_eq!(runs, 12_800);
}

#[test]
fn degenerate_schedules_do_not_panic_and_finish() {
    assert_eq!(run(&[]), Ok(()));
    assert_eq!(run(&[0xff]), Ok(()));
    assert_eq!(run(&[0xff; 5000]), Ok(()));
    assert_eq!(run(&[0x0f, 7, 7, 7, 7, 7, 7, 7, 7, 7]), Ok(()));
}

/// Fuzz finding (linux_unload_race): the user context acked while the reset cycle was
/// already running but before its `add` had been delivered; an oracle that reset the
/// client's state at `add` forgot the accepted vote.
#[test]
fn regression_ack_before_add_is_a_vote() {
    let s = include_bytes!("race-crash-51da980553ce3050b43c225b441a89d33ccff7cb");
    assert_eq!(run(s), Ok(()));
}

#[test]
fn the_fuzz_corpus_replays() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/corpus/linux_unload_race"
    );
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("corpus") {
        let path = entry.expect("entry").path();
        let s = std::fs::read(&path).expect("read");
        assert_eq!(run(&s), Ok(()), "{}", path.display());
        n += 1;
    }
    println!("linux race corpus: {n} files");
    assert!(n > 0);
}

/// Fuzz finding (linux_unload_race): `ib_unregister_client` began, the core was told
/// `Unregister` at once, so removal and unload finished without waiting and the owed
/// `remove(ClientUnregistered)` ran after unload returned (client code after module
/// unload, racing the device's removal). The owed `remove` is now a job in the client's
/// lane whose return detaches it: removal and unload wait for it, and exactly one
/// `remove` is called for the (client, device) pair.
#[test]
fn regression_unregister_remove_is_waited_for_by_removal_and_unload() {
    let s = include_bytes!("race-crash-141fab158a75caee275f6d9ded8353db3ac159ce");
    assert_eq!(run(s), Ok(()));
}

/// Fuzz finding after that fix: a trusted client's `error_detected` outlived its deadline
/// (the device failed), it unregistered, then perm failure and remove told it `Removed`
/// while its owed `remove` was still queued; detaching it there (as "no longer active")
/// let removal and unload finish before the owed `remove` ran. Only a revoked attachment
/// (whose fence cancelled the job) is detached without it.
#[test]
fn regression_an_unregister_remove_queued_ahead_of_removed_is_waited_for() {
    let s = include_bytes!("race-crash-e16b084837f3f2750fb1a91bce395f98f9189aca");
    assert_eq!(run(s), Ok(()));
}

#[test]
fn an_owed_unregister_remove_holds_removal_and_unload_and_runs_once() {
    use pnp_lifecycle::{ClientKind, Event, Tick};
    use pnp_lifecycle_linux::PciErsResult;
    use pnp_lifecycle_runtime::ManualClock;
    use pnp_lifecycle_testkit::linux_port::race::{coop_driver, pump};
    use pnp_lifecycle_testkit::linux_port::{Recorder, CONFIG, DEV};
    use pnp_lifecycle_testkit::observed::{check, Log, Obs, Seen};
    use std::sync::Arc;

    let log = Log::new();
    let hw = pnp_lifecycle_testkit::linux_port::RecordingHardware::new(&log);
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let d = coop_driver(CONFIG, pnp_lifecycle_linux::LinuxOs::new(hw), clock);
    let k = d
        .register_client(
            Recorder::new(0, PciErsResult::NeedReset, &log),
            ClientKind::Trusted,
        )
        .unwrap();
    pump(&d);
    log.push(Obs::DetachBegin { client: 0 });
    assert!(d.begin_unregister(k));
    let remove = d.begin_remove(DEV).unwrap();
    d.begin_unload().unwrap();
    // Nothing carried out yet: the owed remove is queued, so nothing may finish.
    assert!(!d.unregister_ready(k));
    assert!(remove.completion().is_none(), "removal did not wait");
    assert!(
        !d.unload_finished(),
        "unload did not wait for the owed remove"
    );
    pump(&d);
    let removes = || {
        let removed = |o: &Obs| {
            let seen = Seen::Event(Event::Removed { surprise: false });
            matches!(o, Obs::Enter { seen: s, .. } if *s == seen)
        };
        log.snapshot().iter().filter(|o| removed(o)).count()
    };
    // The remove ran in the client's lane, before removal completed and unload finished.
    assert_eq!(
        removes(),
        1,
        "exactly one remove for the pair, before unload"
    );
    assert!(remove.completion().is_some());
    assert!(d.unload_finished());
    assert!(d.unregister_ready(k));
    d.finish_unregister(k);
    log.push(Obs::DetachReturned { client: 0 });
    log.push(Obs::UnloadReturned);
    assert_eq!(removes(), 1);
    check(&log.snapshot(), true).unwrap();
}
