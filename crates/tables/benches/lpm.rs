//! LPM lookups per second: 1 M IPv4 routes (BGP-like length mix) with uniformly random
//! addresses, and 200 k IPv6 /32–/64 routes (under 10 k random /32 "allocations", as in the
//! public IPv6 table) with addresses inside them; batches of 256.
//! Also prints the time to build the 1 M-route table.
//!
//! `cargo bench -p fastpath-tables --bench lpm`
//!
//! Instruction counts (stable on a noisy machine): `LPM_BENCH_INSTR=<v4|v4plain|v6>,<routes>,<batches>`
//! skips criterion and runs `<batches>` batches of 256 random lookups. Run it under
//! `valgrind --tool=callgrind` with B and 2B batches; (Ir(2B) − Ir(B)) / (256·B) is
//! instructions per lookup, free of set-up.

use criterion::{criterion_group, Criterion, Throughput};
use fastpath_tables::lpm::{Lpm4, Lpm6};
use std::hint::black_box;
use std::time::{Duration, Instant};

const BATCH: usize = 256;
const PROBES: usize = 1 << 20;

/// splitmix64 stream.
fn rng(mut s: u64) -> impl FnMut() -> u64 {
    move || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// `n` IPv4 routes with a BGP-like length mix (55 % /24, 40 % /17–/23, 1.5 % /16, 0.5 %
/// /8–/15, 3 % /25–/32).
fn random_routes4(n: usize, seed: u64) -> Vec<(u32, u8, u32)> {
    let mut next = rng(seed);
    (0..n)
        .map(|i| {
            let r = next();
            let len = match r % 1000 {
                0..=549 => 24,
                550..=949 => 17 + (r >> 16) as u8 % 7,
                950..=964 => 16,
                965..=969 => 8 + (r >> 16) as u8 % 8,
                _ => 25 + (r >> 16) as u8 % 8,
            };
            ((r >> 32) as u32 & (u32::MAX << (32 - u32::from(len))), len, i as u32)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let routes = random_routes4(1_000_000, 7);
    let t0 = Instant::now();
    let mut t = Lpm4::new();
    for &(p, l, v) in &routes {
        if t.insert(p, l, v).is_err() {
            eprintln!("insert {p:#x}/{l} failed");
        }
    }
    eprintln!("lpm4: 1M routes built in {:?}, {} groups, {} MB", t0.elapsed(), t.groups(), t.memory_bytes() >> 20);
    let mut next = rng(99);
    let probes: Vec<u32> = (0..PROBES).map(|_| next() as u32).collect();
    let mut out = [None; BATCH];
    let hits: u64 = probes.chunks(BATCH).map(|c| t.lookup_batch(c, &mut out)).sum();
    eprintln!("lpm4: {:.1} % of random addresses hit", hits as f64 * 100.0 / PROBES as f64);
    let mut at = 0usize;
    let mut batch = || {
        at = (at + BATCH) % PROBES;
        &probes[at..at + BATCH]
    };
    let mut g = c.benchmark_group("lpm4_1M");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("lookup_batch", |b| b.iter(|| black_box(t.lookup_batch(black_box(batch()), &mut out))));
    g.bench_function("lookup_batch_noprefetch", |b| b.iter(|| black_box(t.lookup_batch_plain(black_box(batch()), &mut out))));
    g.bench_function("lookup_scalar", |b| {
        b.iter(|| {
            let a = black_box(batch());
            let mut h = 0u32;
            for &x in a {
                h = h.wrapping_add(t.lookup(x).unwrap_or(0));
            }
            black_box(h)
        })
    });
    g.finish();
    drop(t);

    let mut next = rng(5);
    let n6 = 200_000;
    let allocs: Vec<u128> = (0..10_000).map(|_| (u128::from(next() as u32) >> 3 | 1 << 29) << 96).collect();
    let routes6: Vec<(u128, u8, u32)> = (0..n6)
        .map(|i| {
            let r = u128::from(next()) << 32;
            let len = [32u8, 40, 48, 48, 48, 56, 64][i % 7];
            // Inside 2000::/3 global unicast, under one of the /32s, host bits cleared.
            let p = (allocs[i % allocs.len()] | r) & (u128::MAX << (128 - u32::from(len)));
            (p, len, i as u32)
        })
        .collect();
    let t0 = Instant::now();
    let mut t6 = Lpm6::new();
    for &(p, l, v) in &routes6 {
        if t6.insert(p, l, v).is_err() {
            eprintln!("insert6 {p:#x}/{l} failed");
        }
    }
    eprintln!("lpm6: {n6} routes built in {:?}, {} groups, {} MB", t0.elapsed(), t6.groups(), t6.memory_bytes() >> 20);
    let probes6: Vec<u128> = (0..PROBES)
        .map(|i| {
            let (p, l, _) = routes6[(next() as usize) % routes6.len()];
            p | (u128::from(next()) | (i as u128) << 64) >> l
        })
        .collect();
    let mut at = 0usize;
    let mut batch6 = || {
        at = (at + BATCH) % PROBES;
        &probes6[at..at + BATCH]
    };
    let mut g = c.benchmark_group("lpm6_200k");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("lookup_batch", |b| b.iter(|| black_box(t6.lookup_batch(black_box(batch6()), &mut out))));
    g.bench_function("lookup_scalar", |b| {
        b.iter(|| {
            let a = black_box(batch6());
            let mut h = 0u32;
            for &x in a {
                h = h.wrapping_add(t6.lookup(x).unwrap_or(0));
            }
            black_box(h)
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    targets = bench
}
/// `LPM_BENCH_INSTR=<v4|v4plain|v6>,<routes>,<batches>`: plain loop for callgrind.
fn instr_mode(spec: &str) {
    let v: Vec<&str> = spec.split(',').collect();
    let [what, routes, batches] = v.as_slice() else {
        eprintln!("LPM_BENCH_INSTR=<v4|v4plain|v6>,<routes>,<batches>");
        std::process::exit(2);
    };
    let (n, batches): (usize, usize) = (routes.parse().unwrap_or(0), batches.parse().unwrap_or(0));
    let mut next = rng(99);
    let mut out = [None; BATCH];
    let mut hits = 0u64;
    if what.starts_with("v4") {
        let mut t = Lpm4::new();
        for (p, l, v) in random_routes4(n, 7) {
            t.insert(p, l, v).ok();
        }
        let probes: Vec<u32> = (0..BATCH * 64).map(|_| next() as u32).collect();
        for b in 0..batches {
            let c = &probes[(b % 64) * BATCH..][..BATCH];
            hits += if *what == "v4plain" { t.lookup_batch_plain(black_box(c), &mut out) } else { t.lookup_batch(black_box(c), &mut out) };
        }
    } else {
        let mut t = Lpm6::new();
        for i in 0..n {
            let p = (u128::from(next()) >> 3 | 1 << 125) & (u128::MAX << 80);
            t.insert(p, [32u8, 40, 48][i % 3], i as u32).ok();
        }
        let routes: Vec<(u128, u8, u32)> = t.routes().collect();
        let probes: Vec<u128> = (0..BATCH * 64)
            .map(|_| {
                let (p, l, _) = routes[next() as usize % routes.len().max(1)];
                p | u128::from(next()) >> l.min(64)
            })
            .collect();
        for b in 0..batches {
            hits += t.lookup_batch(black_box(&probes[(b % 64) * BATCH..][..BATCH]), &mut out);
        }
    }
    println!("{what}: {hits} hits");
}

fn main() {
    if let Ok(spec) = std::env::var("LPM_BENCH_INSTR") {
        instr_mode(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
