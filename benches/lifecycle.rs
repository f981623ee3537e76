//! Criterion benchmarks: one simple transition, and one whole reset cycle for 1, 4, 16
//! and 64 clients. Run with `cargo bench --bench lifecycle`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pnp_lifecycle::*;
use std::hint::black_box;

#[path = "workload.rs"]
mod workload;
use workload::*;

fn simple_transition(c: &mut Criterion) {
    let (mut m, _) = running::<8, { queue_capacity(1, 8) }>(0);
    let mut g = c.benchmark_group("transition");
    g.throughput(Throughput::Elements(2));
    g.bench_function("query_stop+cancel_stop", |b| {
        b.iter(|| stop_query_cancel(black_box(&mut m)))
    });
    g.finish();
}

macro_rules! cycle {
    ($g:expr, $n:literal) => {{
        let (m, clients) = running::<$n, { queue_capacity(1, $n) }>($n);
        $g.throughput(Throughput::Elements($n));
        $g.bench_with_input(BenchmarkId::from_parameter($n), &$n, |b, _| {
            let mut m = m.clone();
            b.iter(|| reset_cycle(black_box(&mut m), &clients))
        });
    }};
}

fn reset_cycles(c: &mut Criterion) {
    let mut g = c.benchmark_group("reset_cycle_clients");
    cycle!(g, 1);
    cycle!(g, 4);
    cycle!(g, 16);
    cycle!(g, 64);
    g.finish();
}

criterion_group!(benches, simple_transition, reset_cycles);
criterion_main!(benches);
