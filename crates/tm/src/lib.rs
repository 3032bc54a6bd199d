//! fastpath-tm: the traffic manager between ingress and egress.
//!
//! Owns the egress queues of every port, the shared buffer they draw from, and the decision of
//! which packet leaves next and when:
//!
//! - **queues** ([`queue`]): per flat port 8 classes, each a fixed-capacity ring of packet
//!   descriptors ([`Desc`]: packet handle, length, class, pipe, ECN field);
//! - **shared buffer** ([`buffer`]): bytes and descriptors for all ports, a reservation per
//!   queue and Choudhury–Hahne dynamic thresholds, α = 2ⁿ per class (n in −4..=3, as SAI);
//! - **WRED / ECN** ([`wred`]): EWMA of the queue length, linear drop/mark probability between
//!   two thresholds, CE instead of drop for ECN-capable packets, and [`wred::mark_ce`], the
//!   header write with its incremental IPv4 checksum fix;
//! - **schedulers** ([`sched`]): strict priority above deficit round robin, mixed per class;
//! - **shapers** ([`shaper`]): token buckets per port and per queue, in bits/s and bytes;
//! - **hierarchical QoS** ([`hqos`]): port ▸ group ▸ pipe ▸ class ▸ queue with shapers at
//!   port, group and pipe level, for hundreds of thousands of pipes;
//! - a naive twin of the flat port ([`reference`]) that the property tests compare against;
//! - the cost workloads ([`workload`]) that `examples/tm_cost.rs` and `fastpath bench tm` run.
//!
//! Depends only on `fastpath-packet` (for `PktId` and the checksum helpers). It never touches
//! packet bytes itself (except in [`wred::mark_ce`], which the caller runs on packets that came
//! back [`Enq::Marked`]) and never frees packets: a dropped packet's handle is returned to the
//! caller with its reason, who frees it and counts it.
//!
//! **Invariants.** After [`Tm::build`], nothing allocates; each packet costs O(1) work on
//! enqueue and dequeue; nothing reads a clock (time is `now_ns`, passed in, so tests and
//! `fastpath sim` run in virtual time); nothing panics on any input; every packet offered is
//! either queued or returned as dropped with a [`TmDrop`] reason and counted. A `Tm` belongs to
//! one worker (it is `Send`); the control thread reads counters through that worker.
//!
//! ```
//! use fastpath_packet::PktId;
//! use fastpath_tm::config::{FlatPortConfig, PortConfig, TmConfig};
//! use fastpath_tm::shaper::ShaperConfig;
//! use fastpath_tm::{Desc, Enq, Tm};
//!
//! // One port shaped to 8 Mbit/s (1 byte per µs) with a 3000-byte burst.
//! let port = FlatPortConfig { shaper: Some(ShaperConfig::new(8_000_000, 3000)), ..FlatPortConfig::default() };
//! let mut tm = Tm::build(&TmConfig { ports: vec![PortConfig::Flat(port)], ..TmConfig::default() })?;
//!
//! let pkts: Vec<Desc> = (0..4).map(|i| Desc { pkt: PktId(i), len_bytes: 1000, class: i as u8 * 2, ..Desc::default() }).collect();
//! let mut res = [Enq::Queued; 4];
//! assert_eq!(tm.enqueue_burst(0, &pkts, 0, &mut res), 4);
//!
//! let mut out = [Desc::default(); 8];
//! let n = tm.dequeue_burst(0, 8, 0, &mut out);
//! assert_eq!(n, 3); // the burst; class 6 (strict) first
//! assert_eq!(out[0].class, 6);
//! assert_eq!(tm.next_eligible_ns(0), Some(1_000_000)); // 1000 bytes at 1 B/µs
//! assert_eq!(tm.dequeue_burst(0, 8, 1_000_000, &mut out), 1);
//! assert_eq!(tm.port_counters(0).map(|c| c.deq_bytes), Some(4000));
//! # Ok::<(), fastpath_tm::config::ConfigError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod buffer;
pub mod config;
pub mod counters;
pub mod hqos;
pub mod port;
pub mod queue;
pub mod reference;
pub mod sched;
pub mod shaper;
pub mod workload;
pub mod wred;

use buffer::SharedBuffer;
use config::{ConfigError, PortConfig, TmConfig};
use counters::QueueCounters;
use fastpath_packet::{DropReason, PktId};
use hqos::HqosPort;
use port::FlatPort;
use queue::Slab;
use wred::Rng;

/// A packet as the traffic manager sees it: 16 bytes, `Copy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Desc {
    /// The packet's buffer.
    pub pkt: PktId,
    /// Bytes the packet occupies on the wire as the shapers and the buffer count it (the frame
    /// length; add preamble/IFG here to shape on line rate).
    pub len_bytes: u32,
    /// HQoS pipe (subscriber) number; ignored by flat ports.
    pub pipe: u32,
    /// Traffic class: 0..=7 on flat ports (7 the highest priority), below the pipe's class
    /// count on HQoS ports.
    pub class: u8,
    /// The packet's ECN field (RFC 3168 codepoint, see [`wred::ecn_of`]) at enqueue.
    pub ecn: u8,
    /// Opaque to the traffic manager; comes back unchanged at dequeue.
    pub user: u16,
}

/// Why the traffic manager refused a packet. `Copy`, one byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum TmDrop {
    /// The queue is at its dynamic threshold (α × free shared buffer).
    Threshold,
    /// WRED dropped it (avg between the thresholds and not ECN-capable, or avg above max).
    Wred,
    /// The shared buffer has no bytes or no descriptors left.
    BufferFull,
    /// The queue is at its own limit (ring capacity, or HQoS queue byte limit).
    QueueFull,
    /// Longer than the burst of a shaper on its path: it could never leave.
    Shaper,
    /// No such port, class or pipe.
    NoQueue,
}

impl TmDrop {
    /// Every reason, index = `self as usize`.
    pub const ALL: [TmDrop; 6] = [TmDrop::Threshold, TmDrop::Wred, TmDrop::BufferFull, TmDrop::QueueFull, TmDrop::Shaper, TmDrop::NoQueue];
    /// Number of reasons.
    pub const COUNT: usize = TmDrop::ALL.len();

    /// The snake_case name: the name of its [`DropReason`].
    pub const fn name(self) -> &'static str {
        self.drop_reason().name()
    }

    /// The packet-level drop reason, one per TM reason (`queue_full` is shared with the ports'
    /// own queues).
    pub const fn drop_reason(self) -> DropReason {
        match self {
            TmDrop::Threshold => DropReason::TmThreshold,
            TmDrop::Wred => DropReason::TmWred,
            TmDrop::BufferFull => DropReason::TmBufferFull,
            TmDrop::QueueFull => DropReason::QueueFull,
            TmDrop::Shaper => DropReason::TmOversize,
            TmDrop::NoQueue => DropReason::TmNoQueue,
        }
    }
}

/// What became of one offered packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enq {
    /// Queued.
    Queued,
    /// Queued; WRED chose it for a CE mark, which the caller writes with [`wred::mark_ce`].
    Marked,
    /// Refused: the caller frees it and counts it under this reason.
    Dropped(TmDrop),
}

/// Flat ports are held inline (no pointer to chase per burst); the rare HQoS port is boxed.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
enum Port {
    Flat(FlatPort),
    Hqos(Box<HqosPort>),
}

/// The traffic manager: every port's queues, one shared buffer, one random generator.
#[derive(Clone, Debug)]
pub struct Tm {
    buffer: SharedBuffer,
    rng: Rng,
    ports: Vec<Port>,
    slab: Slab,
    no_port: u64,
}

impl Tm {
    /// Validates `cfg` and allocates everything the traffic manager will ever use: rings,
    /// pipes, the HQoS descriptor slab (`buffer.total_pkts` × 20 bytes, only when a port is
    /// hierarchical). Control thread.
    ///
    /// # Errors
    /// The first bad value of `cfg`, with where it is.
    pub fn build(cfg: &TmConfig) -> Result<Tm, ConfigError> {
        let reserved = cfg.validate()?;
        let mut any_hqos = false;
        let ports = cfg
            .ports
            .iter()
            .map(|p| match p {
                PortConfig::Flat(f) => Port::Flat(FlatPort::new(f)),
                PortConfig::Hqos(h) => {
                    any_hqos = true;
                    Port::Hqos(Box::new(HqosPort::new(h)))
                }
            })
            .collect();
        Ok(Tm {
            buffer: SharedBuffer::new(cfg.buffer.total_bytes, cfg.buffer.total_pkts, reserved),
            rng: Rng::new(cfg.seed),
            ports,
            slab: Slab::new(if any_hqos { cfg.buffer.total_pkts } else { 0 }),
            no_port: 0,
        })
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.ports.len()
    }

    /// Offers `pkts` to `port`; writes one result per packet into `res` and returns how many
    /// packets it handled, `min(pkts.len(), res.len())`. `now_ns` is the batch's time, never
    /// less than the last call's (a hierarchical port holding a burst back has its pipes'
    /// buckets pay at it; the results do not depend on it). Worker only; never allocates; never
    /// panics; O(1) per packet.
    pub fn enqueue_burst(&mut self, port: usize, pkts: &[Desc], now_ns: u64, res: &mut [Enq]) -> usize {
        match self.ports.get_mut(port) {
            Some(Port::Flat(p)) => p.enqueue_burst(&mut self.buffer, &mut self.rng, pkts, res),
            Some(Port::Hqos(h)) => h.enqueue_burst(&mut self.buffer, &mut self.slab, pkts, now_ns, res),
            None => {
                let n = pkts.len().min(res.len());
                for r in res.iter_mut().take(n) {
                    *r = Enq::Dropped(TmDrop::NoQueue);
                }
                self.no_port += n as u64;
                n
            }
        }
    }

    /// Takes up to `budget` packets (at most `out.len()`) that may leave `port` at `now_ns`, in
    /// scheduling order, into `out`; returns how many. Fewer than `budget` means the port is
    /// empty or its shapers hold the rest back (see [`next_eligible_ns`](Self::next_eligible_ns)).
    /// Worker only; never allocates; never panics; O(1) per packet.
    pub fn dequeue_burst(&mut self, port: usize, budget: usize, now_ns: u64, out: &mut [Desc]) -> usize {
        match self.ports.get_mut(port) {
            Some(Port::Flat(p)) => p.dequeue_burst(&mut self.buffer, budget, now_ns, out),
            Some(Port::Hqos(h)) => h.dequeue_burst(&mut self.buffer, &mut self.slab, budget, now_ns, out),
            None => 0,
        }
    }

    /// When `port` can next send, given no new arrivals (`None`: nothing queued; a time ≤ now:
    /// now). Exact for flat ports; a lower bound for HQoS ports (see
    /// [`HqosPort::next_eligible_ns`]). For a worker deciding how long it may idle.
    pub fn next_eligible_ns(&self, port: usize) -> Option<u64> {
        match self.ports.get(port)? {
            Port::Flat(p) => p.next_eligible_ns(),
            Port::Hqos(h) => h.next_eligible_ns(&self.slab),
        }
    }

    /// Counters of `class` on `port`: the queue's on a flat port, the class summed over every
    /// group on an HQoS port. `None` for an unknown port or class.
    pub fn queue_counters(&self, port: usize, class: usize) -> Option<QueueCounters> {
        match self.ports.get(port)? {
            Port::Flat(p) => p.queue_counters(class),
            Port::Hqos(h) => h.class_counters(class),
        }
    }

    /// Counters of `class` in `group` of an HQoS `port` (`None` for anything else).
    pub fn group_counters(&self, port: usize, group: usize, class: usize) -> Option<QueueCounters> {
        match self.ports.get(port)? {
            Port::Flat(_) => None,
            Port::Hqos(h) => h.group_counters(group, class),
        }
    }

    /// The sum of `port`'s counters (high watermarks: the largest queue's).
    pub fn port_counters(&self, port: usize) -> Option<QueueCounters> {
        match self.ports.get(port)? {
            Port::Flat(p) => Some(p.port_counters()),
            Port::Hqos(h) => Some(h.port_counters()),
        }
    }

    /// Packets offered to ports that do not exist (each was returned as `TmDrop::NoQueue`).
    pub fn no_port_drops(&self) -> u64 {
        self.no_port
    }

    /// The shared buffer's accounting (free and used bytes, packets held).
    pub fn buffer(&self) -> &SharedBuffer {
        &self.buffer
    }

    /// The flat port `port`, for its finer accessors.
    pub fn flat_port(&self, port: usize) -> Option<&FlatPort> {
        match self.ports.get(port)? {
            Port::Flat(p) => Some(p),
            Port::Hqos(_) => None,
        }
    }

    /// The HQoS port `port`, for its finer accessors.
    pub fn hqos_port(&self, port: usize) -> Option<&HqosPort> {
        match self.ports.get(port)? {
            Port::Flat(_) => None,
            Port::Hqos(h) => Some(h),
        }
    }

    /// Moves `pipe` of HQoS `port` to pipe profile `profile`. Control operation, run by the
    /// owning worker between bursts.
    ///
    /// # Errors
    /// An unknown port, pipe or profile.
    pub fn set_pipe_profile(&mut self, port: usize, pipe: u32, profile: u16) -> Result<(), ConfigError> {
        match self.ports.get_mut(port) {
            Some(Port::Hqos(h)) => h.set_pipe_profile(&mut self.slab, port, pipe, profile),
            _ => Err(ConfigError { loc: config::Loc::Port(port), problem: config::Problem::NoPipes }),
        }
    }
}

/// Jain's fairness index of the allocations `xs`: (Σx)² / (n · Σx²). 1.0 when all are equal,
/// 1/n when one takes everything; 1.0 for an empty or all-zero slice (nobody got less).
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || sq == 0.0 {
        1.0
    } else {
        sum * sum / (xs.len() as f64 * sq)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn desc_is_16_bytes_and_names_are_unique() {
        assert_eq!(std::mem::size_of::<Desc>(), 16);
        let mut names: Vec<&str> = TmDrop::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TmDrop::COUNT);
        for (i, r) in TmDrop::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        assert_eq!(TmDrop::Wred.drop_reason(), DropReason::TmWred);
        assert_eq!(TmDrop::Wred.name(), "tm_wred");
        assert_eq!(TmDrop::QueueFull.drop_reason(), DropReason::QueueFull);
    }

    #[test]
    fn jain_index_bounds() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0, 5.0]), 1.0);
        assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert!((jain_index(&[1.0, 2.0, 3.0]) - 36.0 / 42.0).abs() < 1e-12);
        assert_eq!(jain_index(&[]), 1.0);
    }

    #[test]
    fn unknown_port_is_named_and_counted() {
        let mut tm = Tm::build(&TmConfig::default()).unwrap();
        let mut res = [Enq::Queued; 2];
        assert_eq!(tm.enqueue_burst(3, &[Desc::default(); 2], 0, &mut res), 2);
        assert_eq!(res, [Enq::Dropped(TmDrop::NoQueue); 2]);
        assert_eq!(tm.no_port_drops(), 2);
        assert_eq!(tm.dequeue_burst(3, 8, 0, &mut [Desc::default(); 8]), 0);
        assert_eq!(tm.next_eligible_ns(3), None);
        assert!(tm.port_counters(3).is_none());
    }

    /// Many flat ports share one buffer: a congested port cannot take what α keeps free.
    #[test]
    fn ports_share_one_buffer() {
        let cfg = TmConfig {
            buffer: config::BufferConfig { total_bytes: 100_000, total_pkts: 10_000 },
            ports: vec![PortConfig::Flat(config::FlatPortConfig::default()); 2],
            ..TmConfig::default()
        };
        let mut tm = Tm::build(&cfg).unwrap();
        let pkts: Vec<Desc> = (0..1000).map(|i| Desc { pkt: PktId(i), len_bytes: 100, ..Desc::default() }).collect();
        let mut res = vec![Enq::Queued; 1000];
        tm.enqueue_burst(0, &pkts, 0, &mut res);
        // α = 1: one congested queue holds half the buffer.
        assert_eq!(tm.queue_counters(0, 0).map(|c| c.occ_bytes), Some(50_000));
        tm.enqueue_burst(1, &pkts, 0, &mut res);
        let q1 = tm.queue_counters(1, 0).map_or(0, |c| c.occ_bytes);
        assert_eq!(q1, 25_000);
        assert_eq!(tm.buffer().free_bytes(), 25_000);
    }
}
