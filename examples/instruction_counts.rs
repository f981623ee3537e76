//! A fixed workload for `valgrind --tool=callgrind`, whose instruction counts repeat
//! exactly (criterion's times on a shared machine do not).
//!
//! `ROUNDS=1` and `ROUNDS=101` runs differ by 100 rounds, so (Ir(101) - Ir(1)) / 100 is the
//! cost of one round without start-up. `.ci/run` does this when valgrind is present.
//! Usage: `ROUNDS=101 WORK=cycle64 cargo run --release --example instruction_counts`.

use pnp_lifecycle::*;
use std::hint::black_box;

#[path = "../benches/workload.rs"]
mod workload;
use workload::*;

fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let work = std::env::var("WORK").unwrap_or_else(|_| "transition".into());
    macro_rules! cycle {
        ($n:literal) => {{
            let (mut m, clients) = running::<$n, { queue_capacity(1, $n) }>($n);
            for _ in 0..rounds {
                reset_cycle(black_box(&mut m), &clients);
            }
            black_box(m.epoch(DEV));
        }};
    }
    match work.as_str() {
        "transition" => {
            let (mut m, _) = running::<8, { queue_capacity(1, 8) }>(0);
            for _ in 0..rounds {
                stop_query_cancel(black_box(&mut m));
            }
            black_box(m.phase(DEV));
        }
        "cycle1" => cycle!(1),
        "cycle4" => cycle!(4),
        "cycle16" => cycle!(16),
        "cycle64" => cycle!(64),
        other => eprintln!("unknown WORK={other}"),
    }
    println!(
        "size_of Lifecycle<1 device, 8 clients, 2 ports> = {} bytes",
        core::mem::size_of::<Lifecycle<1, 8, 2, { queue_capacity(1, 8) }>>()
    );
}
