//! Exact-match lookups per second: `u64 → u32` tables of 1 M and 10 M entries, batches of 256
//! keys drawn at random from the stored keys (every lookup hits, and consecutive batches touch
//! different buckets, so the table is not cache-resident).
//!
//! `cargo bench -p fastpath-tables --bench exact`
//!
//! Instruction counts: `EXACT_BENCH_INSTR=<entries>,<batches>` skips criterion and runs
//! `<batches>` batches of 256 hitting lookups; under `valgrind --tool=callgrind` with B and 2B
//! batches, (Ir(2B) − Ir(B)) / (256·B) is instructions per lookup.

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use fastpath_tables::exact::ExactTable;
use fastpath_tables::hash::hash_u64;
use std::hint::black_box;
use std::time::{Duration, Instant};

const BATCH: usize = 256;
/// Distinct probe keys cycled through (far more than fit in cache with their buckets).
const PROBES: usize = 1 << 20;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("exact");
    g.throughput(Throughput::Elements(BATCH as u64));
    for n in [1_000_000usize, 10_000_000] {
        let t0 = Instant::now();
        let mut t = ExactTable::<u64, u32>::with_capacity(n);
        for i in 0..n as u64 {
            if t.insert(hash_u64(i ^ 0x5555), i as u32).is_err() {
                eprintln!("insert {i} failed");
            }
        }
        eprintln!("exact {n}: built in {:?}, {} MB ({} B/entry)", t0.elapsed(), t.memory_bytes() >> 20, t.memory_bytes() / n);
        let probes: Vec<u64> = (0..PROBES as u64).map(|i| hash_u64((hash_u64(i) % n as u64) ^ 0x5555)).collect();
        let mut out = [None; BATCH];
        let mut at = 0usize;
        let mut next = || {
            at = (at + BATCH) % PROBES;
            &probes[at..at + BATCH]
        };
        g.bench_function(BenchmarkId::new("lookup_batch", n), |b| b.iter(|| black_box(t.lookup_batch(black_box(next()), &mut out))));
        g.bench_function(BenchmarkId::new("lookup_batch_w16", n), |b| {
            b.iter(|| black_box(t.lookup_batch_window::<16>(black_box(next()), &mut out)))
        });
        g.bench_function(BenchmarkId::new("lookup_batch_w32", n), |b| {
            b.iter(|| black_box(t.lookup_batch_window::<32>(black_box(next()), &mut out)))
        });
        g.bench_function(BenchmarkId::new("lookup_batch_w256", n), |b| {
            b.iter(|| black_box(t.lookup_batch_window::<256>(black_box(next()), &mut out)))
        });
        g.bench_function(BenchmarkId::new("lookup_scalar", n), |b| {
            b.iter(|| {
                let keys = black_box(next());
                for (o, k) in out.iter_mut().zip(keys) {
                    *o = t.lookup(k);
                }
                black_box(&out);
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    targets = bench
}
/// `EXACT_BENCH_INSTR=<entries>,<batches>`: plain loop for callgrind.
fn instr_mode(spec: &str) {
    let v: Vec<usize> = spec.split(',').map(|x| x.parse().unwrap_or(0)).collect();
    let [n, batches] = v.as_slice() else {
        eprintln!("EXACT_BENCH_INSTR=<entries>,<batches>");
        std::process::exit(2);
    };
    let mut t = ExactTable::<u64, u32>::with_capacity(*n);
    for i in 0..*n as u64 {
        t.insert(hash_u64(i ^ 0x5555), i as u32).ok();
    }
    let probes: Vec<u64> = (0..BATCH as u64 * 64).map(|i| hash_u64((hash_u64(i) % *n as u64) ^ 0x5555)).collect();
    let mut out = [None; BATCH];
    let mut hits = 0;
    for b in 0..*batches {
        hits += t.lookup_batch(black_box(&probes[(b % 64) * BATCH..][..BATCH]), &mut out);
    }
    println!("{hits} hits");
}

fn main() {
    if let Ok(spec) = std::env::var("EXACT_BENCH_INSTR") {
        instr_mode(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
