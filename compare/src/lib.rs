//! Issue 12's comparison: `pnp-lifecycle` and the two peers of `../shared/peers`
//! (`statig-fsm`, `naive-std`) driven through the same reset cycle, the peers' README cycle:
//! client 0 requests, every client acks, the hardware reset is done, every client
//! reacquires.
//!
//! The peers are driven exactly as their own `main.rs` drive them. `pnp-lifecycle` is
//! driven with its whole owner contract: `handle(now, input)` and a drain of every output
//! (`drain_outputs`, the outputs `poll_output` gives one by one) after every input, every `Notify` answered by a `CallbackDone` (one
//! callback in flight per client: the next `Notify` comes out of the `CallbackDone` that
//! returns the previous one), a `ResetExecute` from every client, the
//! `Hardware { Reset }` command answered by `ResetDone`, an `AcquireInterface` from every
//! client. Every run counts what it was told and checks notifications = 2·N·R and
//! hardware resets = R, as the peers' mains do.

use pnp_lifecycle::{
    queue_capacity, CallbackAnswer, ClientHandle, ClientKind, Config, DeviceId, Event,
    HardwareCommand, Input, Lifecycle, Output, PhaseKind, Reply, RequestToken, ResetResult,
    StartResult, Tick,
};
use std::hint::black_box;
use std::time::Instant;

/// What one run of a workload saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Client notifications delivered (`RESET` and `RESET_END`).
    pub notifications: u64,
    /// Hardware resets commanded.
    pub resets: u64,
    /// Callbacks returned (pnp only: `CallbackDone` fed).
    pub callbacks_returned: u64,
    /// Other outputs drained (pnp only: completions, `ResetCycleFinished`).
    pub other_outputs: u64,
}

/// The result of one timed run.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    /// What the run saw.
    pub counts: Counts,
    /// Wall-clock nanoseconds per round (the set-up excluded).
    pub ns_per_round: f64,
}

/// The one device of every pnp workload.
pub const DEV: DeviceId = DeviceId(0);
/// The owner's clock. Every callback is returned at once, so no deadline is ever due and
/// the time may stand still (as in `benches/workload.rs`).
pub const NOW: Tick = Tick(0);
/// Physical ports of the host workloads (as in `benches/workload.rs`).
pub const PORTS: usize = 2;

/// The machine of the host workloads: one device, `C` client slots, two ports, a queue of
/// `Q` = `queue_capacity(1, C)` outputs.
pub type Machine<const C: usize, const Q: usize> = Lifecycle<1, C, PORTS, Q>;

// ---------------------------------------------------------------------------------------
// pnp-lifecycle
// ---------------------------------------------------------------------------------------

#[cold]
#[inline(never)]
fn refused(e: pnp_lifecycle::Error) -> ! {
    panic!("pnp refused an input of the workload: {e:?}")
}

/// The owner: the machine and what the owner has been told. With `POLL`, it also asks
/// when to arm its timer after every drain ([`Lifecycle::drain`], whose answer is
/// [`Lifecycle::poll_timeout`]'s), as the README's owner loop does. With `WITH`, each client's answer travels with its callback's return
/// ([`Input::CallbackDoneWith`]: `RESET` returns with `ResetExecute`, `RESET_END` with
/// `AcquireInterface`), one input where the plain owner feeds two.
struct Owner<const C: usize, const Q: usize, const POLL: bool = false, const WITH: bool = false> {
    m: Machine<C, Q>,
    counts: Counts,
    /// A `Hardware { Reset }` was commanded and not yet answered with `ResetDone`.
    reset_commanded: bool,
}

impl<const C: usize, const Q: usize, const POLL: bool, const WITH: bool> Owner<C, Q, POLL, WITH> {
    /// Feed one input, then drain every output (the owner contract). A refused input is a
    /// failure of the workload.
    #[inline(always)]
    fn feed(&mut self, input: Input) {
        if let Err(e) = self.m.handle(NOW, input) {
            refused(e);
        }
        self.drain();
    }

    /// Feed one input and keep its reply (set-up only).
    fn feed_reply(&mut self, input: Input) -> Reply {
        let reply = self.m.handle(NOW, input).unwrap_or_else(|e| refused(e));
        self.drain();
        reply
    }

    /// Carry out every queued output (`Lifecycle::drain_outputs`, or with `POLL` the owner
    /// loop's `Lifecycle::drain`, which also says when to arm the timer).
    #[inline]
    fn drain(&mut self) {
        let counts = &mut self.counts;
        let reset_commanded = &mut self.reset_commanded;
        let sink = |out| match out {
            // The owner calls the client's callback here, outside any lock; the
            // client returns it with `CallbackDone`.
            Output::Notify { .. } => counts.notifications += 1,
            Output::Hardware {
                command: HardwareCommand::Reset,
                ..
            } => {
                counts.resets += 1;
                *reset_commanded = true;
            }
            _ => counts.other_outputs += 1,
        };
        if POLL {
            black_box(self.m.drain(sink));
        } else {
            self.m.drain_outputs(sink);
        }
    }

    /// A client returns its callback.
    #[inline]
    fn callback_done(&mut self, client: ClientHandle) {
        self.feed(Input::CallbackDone { client });
        self.counts.callbacks_returned += 1;
    }

    /// A running device with `n` trusted clients, every callback returned.
    fn running(n: usize) -> (Self, Vec<ClientHandle>) {
        let mut o = Owner {
            m: Lifecycle::new(Config::DEFAULT),
            counts: Counts::default(),
            reset_commanded: false,
        };
        o.feed(Input::AddDevice { device: DEV });
        o.feed(Input::Start {
            device: DEV,
            token: RequestToken(1),
        });
        o.feed(Input::StartDone {
            device: DEV,
            result: StartResult::Started,
        });
        let clients: Vec<ClientHandle> = (0..n)
            .map(|_| {
                match o.feed_reply(Input::Register {
                    device: DEV,
                    kind: ClientKind::Trusted,
                }) {
                    Reply::Registered { client, .. } => client,
                    other => panic!("register answered {other:?}"),
                }
            })
            .collect();
        // Registered while running: any `DeviceStarted` news is delivered and returned.
        for &c in &clients {
            while o.m.client(c).is_some_and(|v| v.callback_in_flight) {
                o.callback_done(c);
            }
        }
        o.counts = Counts::default();
        (o, clients)
    }

    /// One cycle: client 0 requests, every client returns `RESET` and answers
    /// `ResetExecute`, the commanded hardware reset is done, every client returns
    /// `RESET_END` and acquires its interface again.
    #[inline]
    fn cycle(&mut self, clients: &[ClientHandle]) {
        self.feed(Input::ResetRequest { client: clients[0] });
        for &c in clients {
            self.answer(c, CallbackAnswer::ResetExecute);
        }
        assert!(
            self.reset_commanded,
            "no Hardware {{ Reset }} after every ack"
        );
        self.reset_commanded = false;
        self.feed(Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded,
        });
        for &c in clients {
            self.answer(c, CallbackAnswer::AcquireInterface);
        }
    }

    /// A client returns its callback and answers: one input with `WITH`, else two.
    #[inline(always)]
    fn answer(&mut self, client: ClientHandle, answer: CallbackAnswer) {
        if WITH {
            self.feed(Input::CallbackDoneWith { client, answer });
            self.counts.callbacks_returned += 1;
        } else {
            self.callback_done(client);
            self.feed(answer.input(client));
        }
    }
}

fn pnp_cycles<const C: usize, const Q: usize, const POLL: bool, const WITH: bool>(
    n: usize,
    rounds: u64,
) -> Run {
    assert!(n >= 1 && n <= C, "pnp: {n} clients do not fit {C} slots");
    let (mut o, clients) = Owner::<C, Q, POLL, WITH>::running(n);
    let t0 = Instant::now();
    for _ in 0..rounds {
        black_box(&mut o).cycle(&clients);
    }
    let ns = t0.elapsed().as_nanos() as f64 / rounds.max(1) as f64;
    assert_eq!(o.m.phase(DEV), Some(PhaseKind::Running));
    assert!(
        o.m.clients(DEV).all(|(_, v)| !v.callback_in_flight),
        "a callback was left in flight"
    );
    Run {
        counts: o.counts,
        ns_per_round: ns,
    }
}

/// Client counts `pnp` accepts: the machine has exactly `N` client slots.
pub const PNP_CLIENTS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// `pnp N R`: `R` cycles of `N` clients on a machine with exactly `N` client slots.
pub fn pnp(n: usize, rounds: u64) -> Run {
    pnp_with::<false, false>(n, rounds)
}

/// `pnp-pt N R`: as `pnp`, the owner also asking `poll_timeout` after every drain.
pub fn pnp_poll(n: usize, rounds: u64) -> Run {
    pnp_with::<true, false>(n, rounds)
}

/// `pnpw N R`: as `pnp`, each answer given with its callback's return
/// ([`Input::CallbackDoneWith`]).
pub fn pnp_answer(n: usize, rounds: u64) -> Run {
    pnp_with::<false, true>(n, rounds)
}

/// `pnpw-pt N R`: as `pnpw`, the owner also asking `poll_timeout` after every drain.
pub fn pnp_answer_poll(n: usize, rounds: u64) -> Run {
    pnp_with::<true, true>(n, rounds)
}

fn pnp_with<const POLL: bool, const WITH: bool>(n: usize, rounds: u64) -> Run {
    match n {
        1 => pnp_cycles::<1, { queue_capacity(1, 1) }, POLL, WITH>(n, rounds),
        2 => pnp_cycles::<2, { queue_capacity(1, 2) }, POLL, WITH>(n, rounds),
        4 => pnp_cycles::<4, { queue_capacity(1, 4) }, POLL, WITH>(n, rounds),
        8 => pnp_cycles::<8, { queue_capacity(1, 8) }, POLL, WITH>(n, rounds),
        16 => pnp_cycles::<16, { queue_capacity(1, 16) }, POLL, WITH>(n, rounds),
        32 => pnp_cycles::<32, { queue_capacity(1, 32) }, POLL, WITH>(n, rounds),
        64 => pnp_cycles::<64, { queue_capacity(1, 64) }, POLL, WITH>(n, rounds),
        _ => panic!("pnp: N must be one of {PNP_CLIENTS:?} (the slot count is a const generic)"),
    }
}

/// `slots64 N R`: the same cycle on a machine with 64 client slots, `N` of them used.
pub fn pnp_slots64(n: usize, rounds: u64) -> Run {
    pnp_cycles::<64, { queue_capacity(1, 64) }, false, false>(n, rounds)
}

/// `qs R`: `R` query stop + cancel stop pairs on a running device (8 slots, no client),
/// every output drained. Counts the completions as `other_outputs`.
pub fn pnp_query_stop(rounds: u64) -> Run {
    let (mut o, _) = Owner::<8, { queue_capacity(1, 8) }>::running(0);
    let t0 = Instant::now();
    for _ in 0..rounds {
        let o = black_box(&mut o);
        o.feed(Input::QueryStop {
            device: DEV,
            token: RequestToken(2),
        });
        o.feed(Input::CancelStop {
            device: DEV,
            token: RequestToken(3),
        });
    }
    let ns = t0.elapsed().as_nanos() as f64 / rounds.max(1) as f64;
    assert_eq!(o.m.phase(DEV), Some(PhaseKind::Running));
    assert_eq!(
        o.counts.other_outputs,
        2 * rounds,
        "one completion a request"
    );
    Run {
        counts: o.counts,
        ns_per_round: ns,
    }
}

// ---------------------------------------------------------------------------------------
// The peers, as their own main.rs drive them
// ---------------------------------------------------------------------------------------

/// `statig N R`, as `shared/peers/statig-fsm/src/main.rs`.
#[cfg(peers)]
pub fn statig(n: usize, rounds: u64) -> Run {
    use statig_fsm::{Device, Handle, Output};
    fn drain(dev: &mut Device, c: &mut Counts) {
        while let Some(out) = dev.poll_output() {
            match out {
                Output::Notify(..) => c.notifications += 1,
                Output::ExecuteHwReset => c.resets += 1,
            }
        }
    }
    let mut dev = Device::new();
    let mut handles: Vec<Handle> = (0..n).map(|_| dev.register().expect("register")).collect();
    dev.start().expect("start");
    let mut c = Counts::default();
    let t0 = Instant::now();
    for _ in 0..rounds {
        dev.request_reset(handles[0]).expect("request_reset");
        drain(&mut dev, &mut c);
        for &h in &handles {
            dev.ack_reset(h).expect("ack_reset");
            drain(&mut dev, &mut c);
        }
        dev.hw_reset_done().expect("hw_reset_done");
        drain(&mut dev, &mut c);
        for h in handles.iter_mut() {
            *h = dev.reacquire(*h).expect("reacquire");
        }
    }
    let ns = t0.elapsed().as_nanos() as f64 / rounds.max(1) as f64;
    Run {
        counts: c,
        ns_per_round: ns,
    }
}

/// `naive N R`, as `shared/peers/naive-std/src/main.rs`.
#[cfg(peers)]
pub fn naive(n: usize, rounds: u64) -> Run {
    use naive_std::{Device, Handle};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;
    let notes = Arc::new(AtomicU64::new(0));
    let hw = Arc::new(AtomicU64::new(0));
    let hw_cb = hw.clone();
    let dev = Device::new(move || {
        hw_cb.fetch_add(1, Relaxed);
    });
    let mut handles: Vec<Handle> = (0..n)
        .map(|_| {
            let notes = notes.clone();
            dev.register(Box::new(move |_| {
                notes.fetch_add(1, Relaxed);
            }))
            .expect("register")
        })
        .collect();
    dev.start().expect("start");
    let t0 = Instant::now();
    for _ in 0..rounds {
        dev.request_reset(handles[0]).expect("request_reset");
        for &h in &handles {
            dev.ack_reset(h).expect("ack_reset");
        }
        dev.hw_reset_done().expect("hw_reset_done");
        for h in handles.iter_mut() {
            *h = dev.reacquire(*h).expect("reacquire");
        }
    }
    let ns = t0.elapsed().as_nanos() as f64 / rounds.max(1) as f64;
    Run {
        counts: Counts {
            notifications: notes.load(Relaxed),
            resets: hw.load(Relaxed),
            ..Counts::default()
        },
        ns_per_round: ns,
    }
}

/// Check a cycle run's counts as the peers' mains do: notifications = 2·N·R and hardware
/// resets = R; for pnp also every callback returned and nothing else in the cycle's output
/// but, at most, one cycle-end report a round.
pub fn check_cycle(imp: &str, n: usize, rounds: u64, c: Counts) {
    assert_eq!(
        c.notifications,
        2 * n as u64 * rounds,
        "{imp}: notifications != 2*N*R"
    );
    assert_eq!(c.resets, rounds, "{imp}: hardware resets != R");
    if imp != "statig" && imp != "naive" {
        assert_eq!(
            c.callbacks_returned, c.notifications,
            "{imp}: a callback not returned"
        );
        assert!(
            c.other_outputs <= rounds,
            "{imp}: {} unexpected outputs",
            c.other_outputs
        );
    }
}

/// Whether the peers of `shared/peers/` were beside the repository when this crate was
/// built (a user's clone has no `shared/`: then only pnp's workloads exist).
pub const PEERS: bool = cfg!(peers);

/// `size_of` of everything the issue asks for, as (name, bytes) lines.
pub fn sizes() -> Vec<(String, usize)> {
    use core::mem::size_of;
    let mut v: Vec<(String, usize)> = vec![
        ("pnp Input".into(), size_of::<Input>()),
        ("pnp Output".into(), size_of::<Output>()),
        ("pnp Reply".into(), size_of::<Reply>()),
        ("pnp Error".into(), size_of::<pnp_lifecycle::Error>()),
        ("pnp Event".into(), size_of::<Event>()),
        ("pnp ClientHandle".into(), size_of::<ClientHandle>()),
    ];
    macro_rules! machine {
        ($c:literal) => {
            v.push((
                format!(
                    "pnp Lifecycle<1, {}, {PORTS}, queue_capacity(1, {}) = {}>",
                    $c,
                    $c,
                    queue_capacity(1, $c)
                ),
                size_of::<Machine<$c, { queue_capacity(1, $c) }>>(),
            ));
        };
    }
    machine!(1);
    machine!(4);
    machine!(16);
    machine!(64);
    v.push((
        "pnp Lifecycle<1, 4, 1, queue_capacity(1, 4)> (firmware config, this host)".into(),
        size_of::<Lifecycle<1, 4, 1, { queue_capacity(1, 4) }>>(),
    ));
    #[cfg(peers)]
    {
        let (s, sc) = statig_fsm::Device::sizes();
        v.push(("statig-fsm Device (64 slots, 128-entry queue)".into(), s));
        v.push(("statig-fsm Slot".into(), sc));
        let (n, nc) = naive_std::Device::sizes();
        v.push(("naive-std Mutex<Inner> (shallow; map on heap)".into(), n));
        v.push(("naive-std Client".into(), nc));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_impl_counts_the_same_cycle() {
        for n in [1, 4, 16] {
            #[cfg_attr(not(peers), allow(unused_mut))]
            let mut runs = vec![
                ("pnp", pnp(n, 3)),
                ("pnp-pt", pnp_poll(n, 3)),
                ("pnpw", pnp_answer(n, 3)),
                ("pnpw-pt", pnp_answer_poll(n, 3)),
                ("slots64", pnp_slots64(n, 3)),
            ];
            #[cfg(peers)]
            runs.extend([("statig", statig(n, 3)), ("naive", naive(n, 3))]);
            for (imp, run) in runs {
                check_cycle(imp, n, 3, run.counts);
            }
        }
    }

    #[test]
    fn query_stop_pairs_complete() {
        let run = pnp_query_stop(5);
        assert_eq!(run.counts.other_outputs, 10);
    }
}
