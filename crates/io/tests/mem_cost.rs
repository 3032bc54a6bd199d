//! Harness for counting the mem source's and worker's instructions per packet with callgrind
//! (ignored in normal runs; performance is never a timed test). Recipe:
//!
//! ```text
//! cargo test --release -p fastpath-io --test mem_cost --no-run   # note the binary path
//! for n in 1000000 2000000; do MEMIO_PKTS=$n valgrind --tool=callgrind \
//!   --callgrind-out-file=cg.$n <binary> --ignored --exact --test-threads=1 source_pipeline_sink; done
//! # instructions per packet = (Ir(2N) − Ir(N)) / N, from `callgrind_annotate cg.$n | head`
//! ```
//! `MEMIO_FLOWS` (default 1) and `MEMIO_SIZE` (default 64) set the traffic.

use fastpath_io::mem::{FrameSizes, MemSink, MemSource, Templates, TrafficProfile};
use fastpath_io::worker::{RunEnd, TxAll, Worker};
use fastpath_io::Port;
use fastpath_packet::Pool;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
#[ignore = "measurement harness for callgrind; see the module doc"]
fn source_pipeline_sink() {
    let pkts = env("MEMIO_PKTS", 1000);
    let flows = env("MEMIO_FLOWS", 1) as u32;
    let size = env("MEMIO_SIZE", 64) as usize;
    // Ethernet/IPv4/UDP frames from the default profile (64-byte template stride).
    let p = TrafficProfile { flows, frame_sizes: FrameSizes::Fixed(size), ..Default::default() };
    let t = p.templates().unwrap();
    let ports: Vec<Box<dyn Port>> = vec![Box::new(MemSource::from_templates("gen", t).with_limit(pkts)), Box::new(MemSink::new("sink"))];
    let mut w = Worker::new(Pool::new(4096), ports, TxAll(1));
    assert_eq!(w.run_until_exhausted(), RunEnd::Exhausted);
    assert_eq!(w.stats().tx_pkts, pkts);
}

/// The general dispatch path: verdicts alternate between two sinks (no uniform fast path).
#[test]
#[ignore = "measurement harness for callgrind; see the module doc"]
fn source_split_two_sinks() {
    let pkts = env("MEMIO_PKTS", 1000);
    let flows = env("MEMIO_FLOWS", 1) as u32;
    let size = env("MEMIO_SIZE", 64) as usize;
    // A closure generator: the default 128-byte template stride.
    let gen = |_: u32, len: usize| vec![0u8; len];
    let t = Templates::build(&gen, flows, &FrameSizes::Fixed(size)).unwrap();
    let ports: Vec<Box<dyn Port>> =
        vec![Box::new(MemSource::from_templates("gen", t).with_limit(pkts)), Box::new(MemSink::new("a")), Box::new(MemSink::new("b"))];
    let split = |_: &mut Pool, b: &mut fastpath_packet::Batch, _: u64| {
        for i in 0..b.len() {
            b.tx(i, 1 + (i & 1) as u16);
        }
    };
    let mut w = Worker::new(Pool::new(4096), ports, split);
    assert_eq!(w.run_until_exhausted(), RunEnd::Exhausted);
    assert_eq!(w.stats().tx_pkts, pkts);
}
