//! Naive twins of the fast structures, written for obviousness, not speed: the property tests
//! in `tests/` check that the real ones make exactly the same decisions.
//!
//! [`RefFlatPort`] is one flat port alone in a shared buffer: `VecDeque` queues, the dynamic
//! threshold recomputed from every queue's length at each packet (in `f64`, exact at these
//! sizes), strict priority by scanning classes from 7 down, and DRR exactly as the paper's
//! pseudo-code, one turn at a time (a `VecDeque` active list, `deficit += quantum` when a turn
//! starts). Classes that become non-empty during one enqueue burst join the tail of the active
//! list at the end of the burst, highest class first (a burst is one arrival instant). No WRED
//! and no shapers (they have their own unit tests).

use crate::config::{ClassSched, FlatPortConfig, CLASSES};
use crate::{Desc, Enq, TmDrop};
use std::collections::VecDeque;

/// One flat port on its own buffer, the slow and obvious way.
#[derive(Clone, Debug)]
pub struct RefFlatPort {
    queues: Vec<VecDeque<Desc>>,
    strict: [bool; CLASSES],
    quantum: [u64; CLASSES],
    cap: [usize; CLASSES],
    min: [u64; CLASSES],
    alpha: [f64; CLASSES],
    total_bytes: u64,
    total_pkts: usize,
    active: VecDeque<usize>,
    deficit: [u64; CLASSES],
    in_turn: bool,
    hwm: [(u64, u64); CLASSES],
}

impl RefFlatPort {
    /// The port of `cfg` (WRED and shapers ignored) in a buffer of `total_bytes`/`total_pkts`.
    pub fn new(cfg: &FlatPortConfig, total_bytes: u64, total_pkts: u32) -> RefFlatPort {
        let mut r = RefFlatPort {
            queues: vec![VecDeque::new(); CLASSES],
            strict: [false; CLASSES],
            quantum: [0; CLASSES],
            cap: [0; CLASSES],
            min: [0; CLASSES],
            alpha: [0.0; CLASSES],
            total_bytes,
            total_pkts: total_pkts as usize,
            active: VecDeque::new(),
            deficit: [0; CLASSES],
            in_turn: false,
            hwm: [(0, 0); CLASSES],
        };
        for (c, cc) in cfg.classes.iter().enumerate() {
            match cc.sched {
                ClassSched::Strict => r.strict[c] = true,
                ClassSched::Drr { weight } => r.quantum[c] = u64::from(weight) * u64::from(cfg.drr_quantum_bytes),
            }
            r.cap[c] = cc.ring_pkts as usize;
            r.min[c] = cc.min_bytes;
            r.alpha[c] = 2f64.powi(i32::from(cc.alpha_log2));
        }
        r
    }

    fn bytes(&self, c: usize) -> u64 {
        self.queues[c].iter().map(|d| u64::from(d.len_bytes)).sum()
    }

    /// Offers a burst, one packet at a time; DRR classes that were empty before it and hold
    /// packets after it join the active list at its end, highest class first.
    pub fn enqueue_burst(&mut self, pkts: &[Desc]) -> Vec<Enq> {
        let was_empty: Vec<bool> = self.queues.iter().map(VecDeque::is_empty).collect();
        let res = pkts.iter().map(|d| self.offer(*d)).collect();
        for c in (0..CLASSES).rev() {
            if was_empty[c] && !self.queues[c].is_empty() && !self.strict[c] {
                self.active.push_back(c);
            }
        }
        res
    }

    /// Offers one packet (a burst of one).
    pub fn enqueue(&mut self, d: Desc) -> Enq {
        self.enqueue_burst(&[d]).pop().unwrap_or(Enq::Dropped(TmDrop::NoQueue))
    }

    /// One packet of a burst, without the DRR join.
    fn offer(&mut self, d: Desc) -> Enq {
        let c = usize::from(d.class);
        if c >= CLASSES {
            return Enq::Dropped(TmDrop::NoQueue);
        }
        if self.queues[c].len() >= self.cap[c] {
            return Enq::Dropped(TmDrop::QueueFull);
        }
        let held: usize = self.queues.iter().map(VecDeque::len).sum();
        if held >= self.total_pkts {
            return Enq::Dropped(TmDrop::BufferFull);
        }
        let len = u64::from(d.len_bytes);
        let q = self.bytes(c);
        if q + len > self.min[c] {
            let reserved: u64 = self.min.iter().sum();
            let shared_used: u64 = (0..CLASSES).map(|i| self.bytes(i).saturating_sub(self.min[i])).sum();
            let free = self.total_bytes - reserved - shared_used;
            let from_shared = q + len - q.max(self.min[c]);
            if from_shared > free {
                return Enq::Dropped(TmDrop::BufferFull);
            }
            if q.saturating_sub(self.min[c]) as f64 >= (self.alpha[c] * free as f64).floor() {
                return Enq::Dropped(TmDrop::Threshold);
            }
        }
        self.queues[c].push_back(d);
        let (b, p) = (self.bytes(c), self.queues[c].len() as u64);
        self.hwm[c] = (self.hwm[c].0.max(b), self.hwm[c].1.max(p));
        Enq::Queued
    }

    /// Class `c`'s occupancy and high watermarks, checked after every packet:
    /// `(bytes, packets, most bytes, most packets)`.
    pub fn occupancy(&self, c: usize) -> (u64, u64, u64, u64) {
        let (hb, hp) = self.hwm[c];
        (self.bytes(c), self.queues[c].len() as u64, hb, hp)
    }

    /// Takes up to `budget` packets in scheduling order.
    pub fn dequeue(&mut self, budget: usize) -> Vec<Desc> {
        let mut out = Vec::new();
        while out.len() < budget {
            if let Some(c) = (0..CLASSES).rev().find(|&c| self.strict[c] && !self.queues[c].is_empty()) {
                out.extend(self.queues[c].pop_front());
                continue;
            }
            let Some(&c) = self.active.front() else { break };
            if !self.in_turn {
                self.deficit[c] += self.quantum[c];
                self.in_turn = true;
            }
            let head = self.queues[c].front().map_or(0, |d| u64::from(d.len_bytes));
            if head <= self.deficit[c] {
                self.deficit[c] -= head;
                out.extend(self.queues[c].pop_front());
                if self.queues[c].is_empty() {
                    self.deficit[c] = 0;
                    self.active.pop_front();
                    self.in_turn = false;
                }
            } else {
                self.active.rotate_left(1);
                self.in_turn = false;
            }
        }
        out
    }
}
