//! `pnp-compare IMPL N ROUNDS`: N clients, ROUNDS reset cycles, one result line.
//!
//! IMPL is `pnp`, `statig` or `naive` (the same cycle, see the crate docs); `pnp-pt` (pnp,
//! the owner asking `poll_timeout` after every drain); `pnpw` and `pnpw-pt` (the same two,
//! each client's answer given with its callback's return); `slots64`
//! (pnp with 64 client slots, N of them registered); `qs` (pnp: ROUNDS query stop + cancel
//! stop pairs; N is ignored); `sizes` (prints `size_of` lines and exits).
//! `statig` and `naive` exist only where `shared/peers/` was beside the repository at build
//! time (exit status 3 otherwise).
//! For callgrind: (Ir(101 rounds) − Ir(1 round)) / 100 is the cost of one round.

use pnp_compare::{
    check_cycle, pnp, pnp_answer, pnp_answer_poll, pnp_poll, pnp_query_stop, pnp_slots64, sizes,
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage =
        "usage: pnp-compare (pnp|pnp-pt|pnpw|pnpw-pt|statig|naive|slots64|qs) N ROUNDS | pnp-compare sizes";
    let imp = args.get(1).map(String::as_str).unwrap_or_else(|| {
        eprintln!("{usage}");
        std::process::exit(2)
    });
    if imp == "sizes" {
        for (name, bytes) in sizes() {
            println!("size_of {name} = {bytes}");
        }
        return;
    }
    let num = |i: usize, default: u64| -> u64 {
        match args.get(i) {
            None => default,
            Some(s) => s.parse().unwrap_or_else(|_| {
                eprintln!("{usage}: {s:?} is not a number");
                std::process::exit(2)
            }),
        }
    };
    let (n, rounds) = (num(2, 16) as usize, num(3, 100_000));
    let run = match imp {
        "pnp" => pnp(n, rounds),
        "pnp-pt" => pnp_poll(n, rounds),
        "pnpw" => pnp_answer(n, rounds),
        "pnpw-pt" => pnp_answer_poll(n, rounds),
        #[cfg(peers)]
        "statig" => pnp_compare::statig(n, rounds),
        #[cfg(peers)]
        "naive" => pnp_compare::naive(n, rounds),
        #[cfg(not(peers))]
        "statig" | "naive" => {
            eprintln!(
                "{imp}: built without shared/peers/ beside the repository (compare/peers/build.rs)"
            );
            std::process::exit(3)
        }
        "slots64" => pnp_slots64(n, rounds),
        "qs" => pnp_query_stop(rounds),
        _ => {
            eprintln!("{usage}: unknown IMPL {imp:?}");
            std::process::exit(2)
        }
    };
    if imp != "qs" {
        check_cycle(imp, n, rounds, run.counts);
    }
    let c = run.counts;
    println!(
        "impl={imp} clients={n} rounds={rounds} ns_per_round={:.1} notifications={} resets={} \
         callbacks_returned={} other_outputs={}",
        run.ns_per_round, c.notifications, c.resets, c.callbacks_returned, c.other_outputs
    );
}
