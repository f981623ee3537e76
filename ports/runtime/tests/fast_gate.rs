//! The fast path's gate under shuttle (random and PCT schedules): operations of two
//! clients begin and end while the owner closes and reopens their gates. Whatever the
//! interleaving, every operation is counted exactly once — ended on the fast path while
//! the gate it began under was open, or carried by a close and ended through the machine —
//! and after a close no operation begins on the fast path until the next open.

use std::sync::atomic::{AtomicU64 as StdU64, Ordering::SeqCst};
use std::sync::Arc;

use pnp_lifecycle::Epoch;
use pnp_lifecycle_runtime::{End, Gate};
use shuttle::sync::atomic::AtomicU64;

type G = Gate<AtomicU64>;

/// What one run saw, per client: operations begun, ended fast, ended carried; and what the
/// closes carried.
#[derive(Default)]
struct Tally {
    begun: StdU64,
    fast: StdU64,
    carried_ends: StdU64,
    carried_by_close: StdU64,
}

fn scenario() {
    let gates: Arc<[G; 2]> = Arc::new([G::new(), G::new()]);
    let tallies: Arc<[Tally; 2]> = Arc::new([Tally::default(), Tally::default()]);
    for (i, g) in gates.iter().enumerate() {
        let _ = g.open(i as u16, Epoch(0));
    }
    let mut threads = Vec::new();
    for client in 0..2usize {
        let (gates, tallies) = (gates.clone(), tallies.clone());
        threads.push(shuttle::thread::spawn(move || {
            let (g, t) = (&gates[client], &tallies[client]);
            for _ in 0..3 {
                match g.begin(client as u16, Epoch(0)) {
                    Some(ticket) => {
                        t.begun.fetch_add(1, SeqCst);
                        shuttle::thread::yield_now();
                        match g.end(ticket) {
                            End::Fast => t.fast.fetch_add(1, SeqCst),
                            End::Carried => t.carried_ends.fetch_add(1, SeqCst),
                        };
                    }
                    None => {
                        // A stale handle never gets in, open or shut.
                        assert!(g.begin(client as u16, Epoch(1)).is_none());
                    }
                }
            }
        }));
    }
    // The owner: close client 0's gate, hold it shut a while, reopen; close client 1's
    // for good (a revocation).
    {
        let (gates, tallies) = (gates.clone(), tallies.clone());
        threads.push(shuttle::thread::spawn(move || {
            let t0 = &tallies[0];
            let carried = gates[0].close();
            t0.carried_by_close.fetch_add(u64::from(carried), SeqCst);
            shuttle::thread::yield_now();
            let reopened = gates[0].open(0, Epoch(0));
            assert_eq!(
                reopened, 0,
                "a shut gate carries nothing more when reopened"
            );
            let t1 = &tallies[1];
            let carried = gates[1].close();
            t1.carried_by_close.fetch_add(u64::from(carried), SeqCst);
            // Shut for good: nothing begins on the fast path any more.
            assert!(gates[1].begin(1, Epoch(0)).is_none());
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let last = gates[0].close();
    tallies[0]
        .carried_by_close
        .fetch_add(u64::from(last), SeqCst);
    for (i, t) in tallies.iter().enumerate() {
        let (begun, fast, ends, closes) = (
            t.begun.load(SeqCst),
            t.fast.load(SeqCst),
            t.carried_ends.load(SeqCst),
            t.carried_by_close.load(SeqCst),
        );
        assert_eq!(
            begun,
            fast + ends,
            "client {i}: an operation lost or ended twice"
        );
        assert_eq!(
            ends, closes,
            "client {i}: the closes carried {closes}, {ends} ended carried"
        );
    }
}

#[test]
fn every_operation_is_counted_once_random() {
    shuttle::check_random(scenario, 3_000);
}

#[test]
fn every_operation_is_counted_once_pct() {
    shuttle::check_pct(scenario, 3_000, 3);
}
