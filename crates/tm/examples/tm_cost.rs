//! What one packet costs through the traffic manager: enqueue + dequeue, in bursts of 32,
//! timed with the wall clock (noisy; the exact figure is callgrind's instruction count).
//!
//! ```text
//! cargo run --release -p fastpath-tm --example tm_cost [packets [a|b|c|d]]   (default 10,000,000, all)
//! ```
//!
//! Instructions per packet (exact, repeatable): run one scenario under callgrind at N and 2N
//! packets and divide the difference by N, as `shared/tools/instr-per-packet` does:
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/tm_cost 1000000 a`.
//!
//! Scenarios: (a) 64 flat ports × 8 classes (classes 7, 6 strict, 5..0 DRR), unshaped;
//! (b) the same with WRED on every class and a shaper on every port that never binds;
//! (c) one HQoS port with 262,144 pipes (64 groups × 4096), 8 classes, unshaped;
//! (d) the same with a shaper on every pipe that never binds.
//! Descriptors are generated before the clock starts, so only the traffic manager is timed.
//! A run with `packets` = 0 builds everything and stops (for callgrind's start-up baseline).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fastpath_packet::PktId;
use fastpath_tm::config::{BufferConfig, FlatPortConfig, GroupConfig, HqosConfig, PipeProfile, PortConfig, TmConfig};
use fastpath_tm::shaper::ShaperConfig;
use fastpath_tm::wred::{WredConfig, ECT0};
use fastpath_tm::{Desc, Enq, Tm};
use std::hint::black_box;
use std::time::Instant;

const BURST: usize = 32;

/// A fixed pseudo-random pattern of descriptors, cycled through.
fn pattern(n: usize, ports: u32, pipes: u32, seed: u64) -> (Vec<Desc>, Vec<usize>) {
    let mut s = seed;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let descs = (0..n)
        .map(|i| {
            let r = next();
            Desc {
                pkt: PktId(i as u32),
                len_bytes: 64 + (r % 1454) as u32,
                pipe: ((r >> 16) % u64::from(pipes)) as u32,
                class: ((r >> 40) % 8) as u8,
                ecn: ECT0,
                user: 0,
            }
        })
        .collect();
    let port_of = (0..n / BURST).map(|_| (next() % u64::from(ports)) as usize).collect();
    (descs, port_of)
}

fn run(name: &str, tm: &mut Tm, packets: usize, ports: u32, pipes: u32) {
    let (descs, port_of) = pattern(1 << 16, ports, pipes, 0x1234_5678);
    let mut res = [Enq::Queued; BURST];
    let mut out = [Desc::default(); BURST];
    let bursts = packets / BURST;
    let (mut sent, mut dropped) = (0u64, 0u64);
    let t0 = Instant::now();
    for b in 0..bursts {
        let k = b % port_of.len();
        let port = port_of[k];
        let now_ns = (b as u64) * 1000;
        let pkts = &descs[k * BURST..(k + 1) * BURST];
        tm.enqueue_burst(port, pkts, now_ns, &mut res);
        dropped += res.iter().filter(|r| matches!(r, Enq::Dropped(_))).count() as u64;
        sent += tm.dequeue_burst(port, BURST, now_ns, &mut out) as u64;
        black_box(&out);
    }
    let dt = t0.elapsed();
    if packets > 0 {
        let n = (bursts * BURST) as f64;
        println!(
            "{name:<44} {:>7.1} ns/packet (enqueue + dequeue)  {:>6.1} Mpps  sent {sent}  dropped {dropped}",
            dt.as_nanos() as f64 / n,
            n / dt.as_secs_f64() / 1e6
        );
    }
}

fn main() {
    let packets: usize = std::env::args().nth(1).map_or(10_000_000, |a| a.parse().expect("packets: a number"));
    let only = std::env::args().nth(2).unwrap_or_default();
    let on = |s: &str| only.is_empty() || only == s;
    let buffer = BufferConfig { total_bytes: 256 << 20, total_pkts: 1 << 20 };

    if on("a") {
        let flat = FlatPortConfig::default();
        let mut tm = Tm::build(&TmConfig { buffer, seed: 1, ports: vec![PortConfig::Flat(flat); 64] }).unwrap();
        run("(a) 64 ports x 8 classes, SP+DRR", &mut tm, packets, 64, 1);
    }
    if on("b") {
        let mut wred = FlatPortConfig { shaper: Some(ShaperConfig::new(400_000_000_000, 1 << 20)), ..FlatPortConfig::default() };
        for c in &mut wred.classes {
            c.wred = Some(WredConfig::rte_sched_default(1 << 20));
        }
        let mut tm = Tm::build(&TmConfig { buffer, seed: 1, ports: vec![PortConfig::Flat(wred); 64] }).unwrap();
        run("(b) 64 ports x 8 classes, + WRED + shaper", &mut tm, packets, 64, 1);
    }

    let groups = vec![GroupConfig { pipes: 4096, profile: 0, shaper: None }; 64];
    if on("c") {
        let h = HqosConfig { groups: groups.clone(), ..HqosConfig::default() };
        let mut tm = Tm::build(&TmConfig { buffer, seed: 1, ports: vec![PortConfig::Hqos(h)] }).unwrap();
        let per_pipe = tm.hqos_port(0).map_or(0, |p| p.bytes_per_pipe());
        run("(c) HQoS 262,144 pipes x 8 classes", &mut tm, packets, 1, 1 << 18);
        if packets > 0 {
            println!("HQoS state per pipe: {per_pipe} bytes (x 262,144 = {} MiB)", (per_pipe << 18) >> 20);
        }
    }
    if on("d") {
        let shaped = PipeProfile { shaper: Some(ShaperConfig::new(10_000_000_000, 1 << 16)), ..PipeProfile::default() };
        let h = HqosConfig { groups, profiles: vec![shaped], ..HqosConfig::default() };
        let mut tm = Tm::build(&TmConfig { buffer, seed: 1, ports: vec![PortConfig::Hqos(h)] }).unwrap();
        run("(d) HQoS 262,144 pipes x 8 classes, pipe shapers", &mut tm, packets, 1, 1 << 18);
    }
}
