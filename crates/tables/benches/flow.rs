//! Flow-table benchmarks: bulk lookup hits at 1k / 1M / 5M flows (batches of 256, keys in
//! random order so 1M+ tables miss the caches) and connection churn (insert a SYN, track its
//! SYN+ACK, age old flows out through the wheel) as a connections-per-second proxy.
//!
//! Run: `cargo bench -p fastpath-tables --bench flow`. Prints bytes per flow and build time.
//!
//! Instruction counts (stable on a noisy machine): `FLOW_BENCH_INSTR=<what>,<flows>,<batches>`
//! skips criterion and just runs `<batches>` batches of 256, `<what>` = `lookup`, `track` or
//! `churn`. Run it under `valgrind --tool=callgrind` with B and 2B batches; the difference over
//! 256·B is instructions per packet, free of set-up.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use fastpath_tables::flow::{flags::*, proto, FlowConfig, FlowKey, FlowTable, Segment, Side, NO_FLOW};

/// Flow `i`'s key: distinct for every `i < 2^32` (address from `i`, fixed ports).
fn key(i: u32) -> (FlowKey, Side) {
    let b = i.to_be_bytes();
    FlowKey::v4(42, proto::TCP, [10, b[1], b[2], b[3]], 1024 + u16::from(b[0]), [198, 18, 0, 1], 443)
}

/// Cheap deterministic permutation-ish index stream (xorshift).
fn picks(n: u32, count: usize) -> Vec<u32> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..count)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % u64::from(n)) as u32
        })
        .collect()
}

fn build(n: u32) -> FlowTable {
    let t0 = Instant::now();
    let mut t = FlowTable::new(FlowConfig::with_capacity(n)).unwrap();
    let built = t0.elapsed();
    // Every flow completes its handshake (client ISN 1, server ISN 1000): ESTABLISHED.
    for i in 0..n {
        let (k, s) = key(i);
        let id = t.insert(&k, t.hash(&k), s, &Segment::tcp(SYN, 1, 0, 65535, 0), 0).unwrap();
        let r = if s == Side::Lo { Side::Hi } else { Side::Lo };
        t.track(id, r, &Segment::tcp(SYN | ACK, 1000, 2, 65535, 0), 0);
        t.track(id, s, &Segment::tcp(ACK, 2, 1001, 65535, 0), 0);
    }
    eprintln!(
        "flow table {n} flows: {} B/flow ({} MiB), allocate {:.2?}, fill {:.2?}",
        t.bytes_per_flow(),
        t.memory_bytes() >> 20,
        built,
        t0.elapsed() - built
    );
    t
}

fn lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("flow_lookup_hit");
    g.throughput(Throughput::Elements(256));
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(3));
    for n in [1_000u32, 1_000_000, 5_000_000] {
        let mut t = build(n);
        let ks: Vec<FlowKey> = picks(n, 1 << 20).into_iter().map(|i| key(i).0).collect();
        let mut out = [NO_FLOW; 256];
        let mut pos = 0;
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                let batch = &ks[pos..pos + 256];
                pos = (pos + 256) % ks.len();
                let hits = t.lookup_batch(batch, 1, &mut out);
                debug_assert_eq!(hits, 256);
                black_box(hits)
            })
        });
        // Lookup plus tracking an established ACK on every hit (the per-packet work of a
        // conntrack stage on a known flow: state machine, window check, counters, deadline).
        let sides: Vec<Side> = picks(n, 1 << 20).into_iter().map(|i| key(i).1).collect();
        g.bench_with_input(BenchmarkId::new("track", n), &n, |b, _| {
            b.iter(|| {
                let p = pos;
                pos = (pos + 256) % ks.len();
                track_batch(&mut t, &ks[p..p + 256], &sides[p..p + 256], &mut out)
            })
        });
        drop(t);
    }
    g.finish();
}

/// Looks up a batch and tracks an in-window ACK from each flow's initiator (window checks on).
fn track_batch(t: &mut FlowTable, keys: &[FlowKey], sides: &[Side], out: &mut [u32; 256]) -> usize {
    let syn = Segment::tcp(ACK, 2, 1001, 65535, 0);
    t.lookup_batch(keys, 1, out);
    let mut ok = 0;
    for (&id, &s) in out.iter().zip(sides) {
        ok += usize::from(t.track(id, s, &syn, 1) == fastpath_tables::flow::TcpVerdict::Accept);
    }
    black_box(ok)
}

/// One churn batch as a conntrack stage sees it: 256 SYNs of new connections miss in a bulk
/// lookup (which also brings their buckets into cache), are inserted, their SYN+ACKs are
/// tracked, then expiry runs with budget 512.
fn churn_batch(t: &mut FlowTable, next: &mut u32, now: &mut u64) -> usize {
    let syn = Segment::tcp(SYN, 1000, 0, 65535, 0);
    let synack = Segment::tcp(SYN | ACK, 5000, 1001, 65535, 0);
    *now += 1 << 20;
    let mut keys = [FlowKey::ZERO; 256];
    let mut sides = [Side::Lo; 256];
    for (k, s) in keys.iter_mut().zip(&mut sides) {
        (*k, *s) = key(*next);
        *next = next.wrapping_add(1);
    }
    let mut out = [NO_FLOW; 256];
    t.lookup_batch(&keys, *now, &mut out);
    for ((k, &s), &hit) in keys.iter().zip(&sides).zip(&out) {
        if hit != NO_FLOW {
            continue;
        }
        let h = t.hash(k);
        if let Ok(id) = t.insert(k, h, s, &syn, *now) {
            let r = if s == Side::Lo { Side::Hi } else { Side::Lo };
            black_box(t.track(id, r, &synack, *now));
        }
    }
    black_box(t.expire(*now, 512))
}

/// Churn table: 1 ms ticks, SYN_RECV lives `live / 256` ms, so with one batch per ms about
/// `live` flows stay in the table and 256 age out per batch.
fn churn_table(live: u32) -> FlowTable {
    let mut cfg = FlowConfig::with_capacity(live + live / 4);
    cfg.tick_shift = 20;
    cfg.timeouts.syn_recv_ns = u64::from(live / 256) << 20;
    cfg.timeouts.syn_sent_ns = cfg.timeouts.syn_recv_ns;
    FlowTable::new(cfg).unwrap()
}

fn churn(c: &mut Criterion) {
    let mut g = c.benchmark_group("flow_churn");
    g.throughput(Throughput::Elements(256));
    g.warm_up_time(Duration::from_secs(1));
    g.measurement_time(Duration::from_secs(3));
    for live in [100_000u32, 1_000_000] {
        let mut t = churn_table(live);
        let (mut next, mut now) = (0u32, 0u64);
        g.bench_with_input(BenchmarkId::new("syn_synack_expire", live), &live, |b, _| b.iter(|| churn_batch(&mut t, &mut next, &mut now)));
        eprintln!("churn: {} live flows at the end, {:?}", t.len(), t.stats());
    }
    g.finish();
}

/// `FLOW_BENCH_INSTR=<lookup|track|churn>,<flows>,<batches>`: plain loop for callgrind.
fn instr_mode(spec: &str) {
    let v: Vec<&str> = spec.split(',').collect();
    let (what, flows, batches) = match v.as_slice() {
        [w, f, b] => (*w, f.parse::<u32>().unwrap(), b.parse::<usize>().unwrap()),
        _ => panic!("FLOW_BENCH_INSTR=<lookup|track|churn>,<flows>,<batches>"),
    };
    let mut out = [NO_FLOW; 256];
    let mut sum = 0usize;
    if what == "churn" {
        let mut t = churn_table(flows);
        let (mut next, mut now) = (0u32, 0u64);
        // Reach steady state first (table full of live flows, expiry running).
        for _ in 0..(flows as usize / 256) * 2 {
            churn_batch(&mut t, &mut next, &mut now);
        }
        let i0 = fastpath_packet::prefetch::cycles();
        for _ in 0..batches {
            sum += churn_batch(&mut t, &mut next, &mut now);
        }
        eprintln!(
            "churn: {batches} batches, {} cycles/conn, {sum} expired",
            (fastpath_packet::prefetch::cycles() - i0) / (batches as u64 * 256).max(1)
        );
        return;
    }
    let mut t = build(flows);
    let ix = picks(flows, batches * 256);
    let ks: Vec<FlowKey> = ix.iter().map(|&i| key(i).0).collect();
    let sides: Vec<Side> = ix.iter().map(|&i| key(i).1).collect();
    let i0 = fastpath_packet::prefetch::cycles();
    for b in 0..batches {
        let r = b * 256..(b + 1) * 256;
        sum += if what == "track" { track_batch(&mut t, &ks[r.clone()], &sides[r], &mut out) } else { t.lookup_batch(&ks[r], 1, &mut out) };
    }
    eprintln!(
        "{what}: {batches} batches, {} cycles/pkt, {sum} hits",
        (fastpath_packet::prefetch::cycles() - i0) / (batches as u64 * 256).max(1)
    );
}

criterion_group!(benches, lookup, churn);

fn main() {
    if let Ok(spec) = std::env::var("FLOW_BENCH_INSTR") {
        instr_mode(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
