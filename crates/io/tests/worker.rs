//! The worker's verdict dispatch: every packet ends up transmitted, freed or on the punt ring,
//! each counted once, and the pool is full again at the end (no leaked buffers).

use std::sync::{Arc, Mutex};

use fastpath_io::worker::{Punted, RunEnd, Worker, WorkerStats};
use fastpath_io::{Port, PortStats};
use fastpath_packet::{Batch, DropReason, PktId, Pool, PuntReason};
use proptest::prelude::*;

/// A test port: gives `frames` (in bursts of at most `burst`), records what it is asked to send,
/// and accepts at most `tx_room` packets per `tx_burst`.
struct VecPort {
    frames: Vec<Vec<u8>>,
    next: usize,
    burst: usize,
    tx_room: usize,
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
    stats: PortStats,
}

impl VecPort {
    fn new(frames: Vec<Vec<u8>>, burst: usize, tx_room: usize) -> (VecPort, Arc<Mutex<Vec<Vec<u8>>>>) {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let p = VecPort { frames, next: 0, burst, tx_room, sent: sent.clone(), stats: PortStats::default() };
        (p, sent)
    }
}

impl Port for VecPort {
    fn name(&self) -> &str {
        "vec"
    }
    fn rx_burst(&mut self, pool: &mut Pool, batch: &mut Batch, port_id: u16) -> usize {
        let mut n = 0;
        while n < self.burst && self.next < self.frames.len() && !batch.is_full() {
            let Some(h) = pool.alloc() else { break };
            pool.set_data(h, &self.frames[self.next]);
            batch.push(h, port_id);
            self.next += 1;
            n += 1;
        }
        self.stats.rx_pkts += n as u64;
        n
    }
    fn tx_burst(&mut self, pool: &mut Pool, pkts: &[PktId]) -> usize {
        let n = pkts.len().min(self.tx_room);
        let mut sent = self.sent.lock().unwrap();
        for &h in &pkts[..n] {
            sent.push(pool.data(h).to_vec());
        }
        pool.free_bulk(&pkts[..n]);
        self.stats.tx_pkts += n as u64;
        n
    }
    fn is_exhausted(&self) -> bool {
        self.next == self.frames.len()
    }
    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Verdict by the frame's first byte: 0/1 → Tx(0)/Tx(1), 2 → Drop, 3 → Punt, 4 → left
/// Continue, 5 → Tx(9) (no such port).
fn processor() -> impl FnMut(&mut Pool, &mut Batch, u64) {
    |pool: &mut Pool, b: &mut Batch, _now: u64| {
        for i in b.live() {
            match pool.data(b.handle(i))[0] {
                0 => b.tx(i, 0),
                1 => b.tx(i, 1),
                2 => b.drop(i, DropReason::AclDeny),
                3 => b.punt(i, PuntReason::NEW_FLOW),
                4 => {}
                _ => b.tx(i, 9),
            }
        }
    }
}

fn frames_of(kinds: &[u8]) -> Vec<Vec<u8>> {
    kinds.iter().enumerate().map(|(k, &c)| vec![c, k as u8, (k >> 8) as u8, 0xee]).collect()
}

struct Run {
    stats: WorkerStats,
    sent: [Vec<Vec<u8>>; 2],
    punts: Vec<(Vec<u8>, Punted)>,
    available: usize,
}

fn run(kinds: &[u8], burst: usize, tx_room: usize, punt_cap: Option<usize>, pool_n: usize) -> Run {
    let (src, sent0) = VecPort::new(frames_of(kinds), burst, tx_room);
    let (sink, sent1) = VecPort::new(Vec::new(), burst, tx_room);
    let ports: Vec<Box<dyn Port>> = vec![Box::new(src), Box::new(sink)];
    let mut w = Worker::new(Pool::new(pool_n), ports, processor());
    if let Some(c) = punt_cap {
        w = w.with_punt_ring(c);
    }
    let mut punts = Vec::new();
    loop {
        let end = w.run_until_exhausted();
        // Drain punts so a full ring never starves the source.
        let n = w.drain_punts(|d, p| punts.push((d.to_vec(), p)));
        if end == RunEnd::Exhausted && n == 0 {
            break;
        }
    }
    let stats = w.stats();
    let available = w.pool().available();
    let s0 = sent0.lock().unwrap().clone();
    let s1 = sent1.lock().unwrap().clone();
    Run { stats, sent: [s0, s1], punts, available }
}

#[test]
fn verdicts_are_dispatched_and_counted() {
    let kinds = [0, 1, 2, 3, 4, 5, 1, 1, 2, 3];
    let r = run(&kinds, 256, usize::MAX, Some(8), 32);
    let f = frames_of(&kinds);
    assert_eq!(r.sent[0], vec![f[0].clone()]);
    assert_eq!(r.sent[1], vec![f[1].clone(), f[6].clone(), f[7].clone()]);
    assert_eq!(r.punts.iter().map(|(d, _)| d.clone()).collect::<Vec<_>>(), vec![f[3].clone(), f[9].clone()]);
    assert!(r.punts.iter().all(|(_, p)| p.reason == PuntReason::NEW_FLOW && p.in_port == 0));
    let s = r.stats;
    assert_eq!(s.rx_pkts, 10);
    assert_eq!(s.tx_pkts, 4);
    assert_eq!(s.dropped, 2);
    assert_eq!(s.punted, 2);
    assert_eq!(s.unfinished, 1);
    assert_eq!(s.tx_bad_port, 1);
    assert_eq!(s.tx_dropped + s.punt_dropped, 0);
    assert_eq!(r.available, 32, "every buffer is back in the pool");
}

#[test]
fn refused_tx_and_full_punt_ring_are_freed_and_counted() {
    // 40 packets to port 1 in one batch; the port takes 16 per call.
    let mut kinds = vec![1u8; 40];
    kinds.extend([3u8; 5]);
    let r = run(&kinds, 256, 16, Some(2), 64);
    assert_eq!(r.stats.tx_pkts, 16);
    assert_eq!(r.stats.tx_dropped, 24);
    assert_eq!(r.stats.punted, 2);
    assert_eq!(r.stats.punt_dropped, 3);
    assert_eq!(r.sent[1], frames_of(&kinds)[..16].to_vec());
    assert_eq!(r.available, 64);
}

#[test]
fn without_a_punt_ring_punts_are_freed() {
    let r = run(&[3, 3, 0], 256, usize::MAX, None, 8);
    assert_eq!(r.stats.punt_dropped, 2);
    assert_eq!(r.stats.punted, 0);
    assert!(r.punts.is_empty());
    assert_eq!(r.available, 8);
}

#[test]
fn a_pool_held_by_punts_stops_the_run() {
    let (src, _) = VecPort::new(frames_of(&[3; 10]), 256, usize::MAX);
    let ports: Vec<Box<dyn Port>> = vec![Box::new(src)];
    let mut w = Worker::new(Pool::new(4), ports, processor()).with_punt_ring(100);
    assert_eq!(w.run_until_exhausted(), RunEnd::PoolEmpty);
    assert_eq!(w.stats().punted, 4);
    assert_eq!(w.drain_punts(|_, _| {}), 4);
    assert_eq!(w.run_until_exhausted(), RunEnd::PoolEmpty);
    assert_eq!(w.drain_punts(|_, _| {}), 4);
    assert_eq!(w.run_until_exhausted(), RunEnd::Exhausted);
    assert_eq!(w.drain_punts(|_, _| {}), 2);
    assert_eq!(w.pool().available(), 4);
}

#[test]
fn clock_is_read_once_per_batch_and_passed_down() {
    let (src, _) = VecPort::new(frames_of(&[0; 10]), 4, usize::MAX);
    let ports: Vec<Box<dyn Port>> = vec![Box::new(src)];
    let mut t = 0u64;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let proc = move |_: &mut Pool, b: &mut Batch, now: u64| {
        seen2.lock().unwrap().push((now, b.len()));
        for i in b.live() {
            b.tx(i, 0);
        }
    };
    let mut w = Worker::new(Pool::new(16), ports, proc).with_clock(move || {
        t += 100;
        t
    });
    assert_eq!(w.run_until_exhausted(), RunEnd::Exhausted);
    assert_eq!(*seen.lock().unwrap(), vec![(100, 4), (200, 4), (300, 2)]);
    assert_eq!(w.stats().batches, 3);
    assert_eq!(w.pool().available(), 16);
}

proptest! {
    /// Any mix of verdicts, burst sizes, tx room and ring size: the counters add up to what was
    /// received, transmitted frames arrive in order, and no buffer leaks.
    #[test]
    fn accounting_adds_up(
        kinds in proptest::collection::vec(0u8..6, 0..700),
        burst in 1usize..300,
        tx_room in 0usize..300,
        punt_cap in proptest::option::of(1usize..50),
    ) {
        let r = run(&kinds, burst, tx_room, punt_cap, 512);
        let s = r.stats;
        prop_assert_eq!(s.rx_pkts, kinds.len() as u64);
        prop_assert_eq!(
            s.tx_pkts + s.tx_dropped + s.tx_bad_port + s.dropped + s.punted + s.punt_dropped + s.unfinished,
            s.rx_pkts
        );
        let count = |c: u8| kinds.iter().filter(|&&k| k == c).count() as u64;
        prop_assert_eq!(s.tx_pkts + s.tx_dropped, count(0) + count(1));
        prop_assert_eq!(s.dropped, count(2));
        prop_assert_eq!(s.punted + s.punt_dropped, count(3));
        prop_assert_eq!(s.unfinished, count(4));
        prop_assert_eq!(s.tx_bad_port, count(5));
        prop_assert_eq!(r.punts.len() as u64, s.punted);
        prop_assert_eq!(r.sent[0].len() + r.sent[1].len(), s.tx_pkts as usize);
        for sent in &r.sent {
            // In order: the sequence numbers in bytes 1..3 only grow.
            let seq: Vec<u16> = sent.iter().map(|f| u16::from(f[1]) | u16::from(f[2]) << 8).collect();
            prop_assert!(seq.windows(2).all(|w| w[0] < w[1]));
        }
        prop_assert_eq!(r.available, 512);
    }
}
