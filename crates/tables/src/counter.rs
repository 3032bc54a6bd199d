//! Per-worker packet and byte counters, summed when read.
//!
//! A [`CounterSet`] holds one block of `n` counters per worker. Each counter is a pair
//! (packets, bytes). A block is a run of 64-byte cache lines (`#[repr(align(64))]`), four pairs
//! per line, so two workers never write the same line (no false sharing):
//!
//! ```text
//!   worker 0: | p0 b0 p1 b1 p2 b2 p3 b3 | p4 b4 .. | ..      (each | .. | is one cache line)
//!   worker 1: | p0 b0 p1 b1 p2 b2 p3 b3 | p4 b4 .. | ..
//! ```
//!
//! **Why `AtomicU64` with `Relaxed`.** The control thread must read a block while its worker
//! writes it; a plain `u64` shared that way is a data race (undefined behaviour in Rust). Each
//! block has exactly one writer — the [`WorkerCounters`] handle, which is not `Clone` — so `add`
//! is a `Relaxed` load, an add and a `Relaxed` store, not a read-modify-write: on x86-64 that
//! compiles to plain `mov`s, with no `lock` prefix and no fence, the same code as a `u64`
//! array. Readers may see a packet count and its byte count from slightly different moments;
//! each value on its own is always one the writer stored (no torn 64-bit reads).
//!
//! Workers should add into locals and call [`WorkerCounters::add`] once per batch (STYLE §4).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Counter pairs per 64-byte line.
const PAIRS_PER_LINE: usize = 4;

/// One cache line of four (packets, bytes) pairs.
#[repr(align(64))]
#[derive(Default)]
struct Line([AtomicU64; 2 * PAIRS_PER_LINE]);

/// The counters of every worker; the control thread's reading side.
pub struct CounterSet {
    blocks: Arc<[Box<[Line]>]>,
    n: usize,
}

/// One worker's block: the only writer of it. Worker thread only.
pub struct WorkerCounters {
    blocks: Arc<[Box<[Line]>]>,
    worker: usize,
    n: usize,
}

impl CounterSet {
    /// Allocates `n_workers` blocks of `n_counters` zeroed pairs and returns the reader and
    /// one writer handle per worker (in worker order). Control thread only.
    pub fn new(n_workers: usize, n_counters: usize) -> (CounterSet, Vec<WorkerCounters>) {
        let lines = n_counters.div_ceil(PAIRS_PER_LINE);
        let blocks: Arc<[Box<[Line]>]> = (0..n_workers).map(|_| (0..lines).map(|_| Line::default()).collect::<Box<[Line]>>()).collect();
        let writers = (0..n_workers).map(|worker| WorkerCounters { blocks: Arc::clone(&blocks), worker, n: n_counters }).collect();
        (CounterSet { blocks, n: n_counters }, writers)
    }

    /// Number of counters per worker.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True when there are no counters.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Counter `idx` summed over all workers as (packets, bytes); (0, 0) when out of range.
    pub fn read(&self, idx: usize) -> (u64, u64) {
        if idx >= self.n {
            return (0, 0);
        }
        self.blocks.iter().fold((0u64, 0u64), |(p, b), blk| {
            let (wp, wb) = pair(blk, idx);
            (p.wrapping_add(wp.load(Relaxed)), b.wrapping_add(wb.load(Relaxed)))
        })
    }

    /// Counter `idx` of one worker as (packets, bytes); (0, 0) when out of range.
    pub fn read_worker(&self, worker: usize, idx: usize) -> (u64, u64) {
        match self.blocks.get(worker) {
            Some(blk) if idx < self.n => {
                let (p, b) = pair(blk, idx);
                (p.load(Relaxed), b.load(Relaxed))
            }
            _ => (0, 0),
        }
    }

    /// Every counter summed over all workers, as (packets, bytes), index = counter. Control
    /// thread only (allocates).
    pub fn snapshot(&self) -> Vec<(u64, u64)> {
        (0..self.n).map(|i| self.read(i)).collect()
    }
}

impl WorkerCounters {
    /// Adds `pkts` packets and `bytes` bytes to counter `idx` (wrapping). Out-of-range indices
    /// are ignored. Worker thread only; never panics, never allocates, no atomic RMW.
    #[inline]
    pub fn add(&self, idx: usize, pkts: u64, bytes: u64) {
        if idx >= self.n {
            return;
        }
        if let Some(blk) = self.blocks.get(self.worker) {
            let (p, b) = pair(blk, idx);
            p.store(p.load(Relaxed).wrapping_add(pkts), Relaxed);
            b.store(b.load(Relaxed).wrapping_add(bytes), Relaxed);
        }
    }

    /// This handle's worker index.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// Number of counters in the block.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True when the block has no counters.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// The (packets, bytes) cells of counter `idx` in a block; `idx < n` is checked by callers.
#[inline]
fn pair(blk: &[Line], idx: usize) -> (&AtomicU64, &AtomicU64) {
    let line = &blk[idx / PAIRS_PER_LINE];
    let slot = 2 * (idx % PAIRS_PER_LINE);
    (&line.0[slot], &line.0[slot + 1])
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cache_line_sized_and_aligned() {
        assert_eq!(std::mem::size_of::<Line>(), 64);
        assert_eq!(std::mem::align_of::<Line>(), 64);
    }

    #[test]
    fn sums_across_workers() {
        let (set, w) = CounterSet::new(3, 5);
        w[0].add(4, 1, 100);
        w[1].add(4, 2, 200);
        w[2].add(0, 7, 70);
        w[2].add(4, 1, 1);
        assert_eq!(set.read(4), (4, 301));
        assert_eq!(set.read(0), (7, 70));
        assert_eq!(set.read_worker(1, 4), (2, 200));
        assert_eq!(set.snapshot(), vec![(7, 70), (0, 0), (0, 0), (0, 0), (4, 301)]);
        // Out of range: ignored on add, zero on read.
        w[0].add(5, 9, 9);
        assert_eq!(set.read(5), (0, 0));
        assert_eq!(set.read_worker(3, 0), (0, 0));
    }

    #[test]
    fn counters_do_not_alias() {
        let (set, w) = CounterSet::new(2, 9);
        for i in 0..9 {
            w[i % 2].add(i, i as u64 + 1, 1000 * (i as u64 + 1));
        }
        for i in 0..9 {
            assert_eq!(set.read(i), (i as u64 + 1, 1000 * (i as u64 + 1)), "counter {i}");
        }
    }

    #[test]
    fn readable_while_workers_write() {
        let (set, writers) = CounterSet::new(2, 4);
        let threads: Vec<_> = writers
            .into_iter()
            .map(|w| {
                std::thread::spawn(move || {
                    for _ in 0..100_000 {
                        w.add(1, 1, 64);
                    }
                })
            })
            .collect();
        let mut last = 0;
        for _ in 0..100 {
            let (p, b) = set.read(1);
            assert!(p >= last, "counts only grow");
            assert!(b <= 64 * 200_000);
            last = p;
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(set.read(1), (200_000, 64 * 200_000));
    }
}
