//! What one packet costs through the traffic manager: enqueue + dequeue, in bursts of 32,
//! timed with the wall clock (noisy; the exact figure is callgrind's instruction count).
//!
//! ```text
//! cargo run --release -p fastpath-tm --example tm_cost [packets [a|b|c|d]]   (default 10,000,000, all)
//! ```
//!
//! Instructions per packet (exact, repeatable): `scripts/tm-instructions [a|b|c|d]` runs one
//! scenario under callgrind at N and 2N packets and divides the difference by N, e.g.
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/tm_cost 1000000 a`.
//!
//! Scenarios ([`fastpath_tm::workload`], shared with `fastpath bench tm`): (a) 64 flat ports ×
//! 8 classes (classes 7, 6 strict, 5..0 DRR), unshaped; (b) the same with WRED on every class
//! and a shaper on every port that never binds; (c) one HQoS port with 262,144 pipes (64 groups
//! × 4096), 8 classes, unshaped; (d) the same with a shaper on every pipe that never binds.
//! Descriptors are generated before the clock starts, so only the traffic manager is timed.
//! A run with `packets` = 0 builds everything and stops (for callgrind's start-up baseline).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use fastpath_tm::workload::{Scenario, BURST};
use fastpath_tm::Tm;
use std::time::Instant;

fn main() {
    let packets: usize = std::env::args().nth(1).map_or(10_000_000, |a| a.parse().expect("packets: a number"));
    let only = std::env::args().nth(2).unwrap_or_default();
    for s in Scenario::ALL {
        if !only.is_empty() && only != s.letter() && only != s.name() {
            continue;
        }
        let mut tm = Tm::build(&s.config()).unwrap();
        let w = s.workload();
        let t0 = Instant::now();
        let (sent, dropped) = w.run(&mut tm, packets);
        let dt = t0.elapsed();
        if packets > 0 {
            let n = (packets / BURST * BURST) as f64;
            let name = format!("({}) {}", s.letter(), s.describe());
            println!(
                "{name:<48} {:>7.1} ns/packet (enqueue + dequeue)  {:>6.1} Mpps  sent {sent}  dropped {dropped}",
                dt.as_nanos() as f64 / n,
                n / dt.as_secs_f64() / 1e6
            );
            if let Some(h) = tm.hqos_port(0) {
                let per_pipe = h.bytes_per_pipe();
                println!("HQoS state per pipe: {per_pipe} bytes (x {} = {} MiB)", h.pipes(), (per_pipe * h.pipes()) >> 20);
            }
        }
    }
}
