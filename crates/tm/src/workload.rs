//! The cost workloads: the traffic manager configurations and the traffic that
//! `examples/tm_cost.rs` (instructions per packet, under callgrind) and `fastpath bench tm`
//! (nanoseconds per packet, wall clock) both run, so the two figures describe the same work.
//!
//! Each step offers a burst of [`BURST`] descriptors to one port and then asks that port for
//! up to [`BURST`] packets back, at a virtual time that advances [`STEP_NS`] (1 µs) per burst.
//! Descriptors are 64–1517 bytes, of random class, and (HQoS) of random pipe among 262,144; the
//! burst's port is random among the scenario's ports. Nothing here reads a clock: the caller
//! times [`Workload::run`].
//!
//! | scenario | letter | what |
//! |---|---|---|
//! | `flat` | a | 64 flat ports × 8 classes (7, 6 strict; 5..0 DRR), unshaped |
//! | `flat-wred` | b | `flat` + WRED on every class + a shaper on every port that never binds |
//! | `hqos` | c | one HQoS port, 262,144 pipes (64 groups × 4096) × 8 classes, unshaped |
//! | `hqos-shaped` | d | `hqos` + a shaper on every pipe that never binds |

use crate::config::{BufferConfig, FlatPortConfig, GroupConfig, HqosConfig, PipeProfile, PortConfig, TmConfig};
use crate::shaper::ShaperConfig;
use crate::wred::{WredConfig, ECT0};
use crate::{Desc, Enq, Tm};
use fastpath_packet::PktId;
use std::hint::black_box;

/// Packets per enqueue burst and per dequeue budget (at most 64: the harness counts a burst's
/// drops in one 64-bit mask).
pub const BURST: usize = 32;
const _: () = assert!(BURST <= 64);

/// Virtual time between two steps.
pub const STEP_NS: u64 = 1000;

/// One of the four cost scenarios (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// (a) 64 flat ports × 8 classes, SP + DRR.
    Flat,
    /// (b) (a) + WRED on every class + port shapers.
    FlatWred,
    /// (c) HQoS, 262,144 pipes × 8 classes.
    Hqos,
    /// (d) (c) + a shaper on every pipe.
    HqosShaped,
}

impl Scenario {
    /// Every scenario, in letter order.
    pub const ALL: [Scenario; 4] = [Scenario::Flat, Scenario::FlatWred, Scenario::Hqos, Scenario::HqosShaped];

    /// The scenario's name (`flat`, `flat-wred`, `hqos`, `hqos-shaped`).
    pub const fn name(self) -> &'static str {
        match self {
            Scenario::Flat => "flat",
            Scenario::FlatWred => "flat-wred",
            Scenario::Hqos => "hqos",
            Scenario::HqosShaped => "hqos-shaped",
        }
    }

    /// The scenario's letter in docs/tm.md's Cost table (`a`..`d`).
    pub const fn letter(self) -> &'static str {
        match self {
            Scenario::Flat => "a",
            Scenario::FlatWred => "b",
            Scenario::Hqos => "c",
            Scenario::HqosShaped => "d",
        }
    }

    /// One line saying what the scenario is.
    pub const fn describe(self) -> &'static str {
        match self {
            Scenario::Flat => "64 flat ports x 8 classes, SP+DRR",
            Scenario::FlatWred => "64 ports x 8 classes, + WRED + shaper",
            Scenario::Hqos => "HQoS 262,144 pipes x 8 classes",
            Scenario::HqosShaped => "HQoS 262,144 pipes x 8 classes, pipe shapers",
        }
    }

    /// The scenario named `s` (its name or its letter).
    pub fn parse(s: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|x| x.name() == s || x.letter() == s)
    }

    /// Ports the bursts are spread over.
    pub const fn ports(self) -> u32 {
        match self {
            Scenario::Flat | Scenario::FlatWred => 64,
            Scenario::Hqos | Scenario::HqosShaped => 1,
        }
    }

    /// Pipes the descriptors are spread over (1 on flat ports, where the field is ignored).
    pub const fn pipes(self) -> u32 {
        match self {
            Scenario::Flat | Scenario::FlatWred => 1,
            Scenario::Hqos | Scenario::HqosShaped => 1 << 18,
        }
    }

    /// The traffic manager's configuration: a 256 MiB, 1M-descriptor buffer and the ports.
    pub fn config(self) -> TmConfig {
        let buffer = BufferConfig { total_bytes: 256 << 20, total_pkts: 1 << 20 };
        let groups = vec![GroupConfig { pipes: 4096, profile: 0, shaper: None }; 64];
        let ports = match self {
            Scenario::Flat => vec![PortConfig::Flat(FlatPortConfig::default()); 64],
            Scenario::FlatWred => {
                let mut p = FlatPortConfig { shaper: Some(ShaperConfig::new(400_000_000_000, 1 << 20)), ..FlatPortConfig::default() };
                for c in &mut p.classes {
                    c.wred = Some(WredConfig::rte_sched_default(1 << 20));
                }
                vec![PortConfig::Flat(p); 64]
            }
            Scenario::Hqos => vec![PortConfig::Hqos(HqosConfig { groups, ..HqosConfig::default() })],
            Scenario::HqosShaped => {
                let shaped = PipeProfile { shaper: Some(ShaperConfig::new(10_000_000_000, 1 << 16)), ..PipeProfile::default() };
                vec![PortConfig::Hqos(HqosConfig { groups, profiles: vec![shaped], ..HqosConfig::default() })]
            }
        };
        TmConfig { buffer, seed: 1, ports }
    }

    /// The scenario's traffic: 65,536 descriptors cycled through, one port per burst.
    pub fn workload(self) -> Workload {
        let mut s = 0x1234_5678u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let n = 1usize << 16;
        let pipes = u64::from(self.pipes());
        let descs = (0..n)
            .map(|i| {
                let r = next();
                Desc {
                    pkt: PktId(i as u32),
                    len_bytes: 64 + (r % 1454) as u32,
                    pipe: ((r >> 16) % pipes) as u32,
                    class: ((r >> 40) % 8) as u8,
                    ecn: ECT0,
                    user: 0,
                }
            })
            .collect();
        let port_of = (0..n / BURST).map(|_| (next() % u64::from(self.ports())) as usize).collect();
        Workload { descs, port_of }
    }
}

/// Descriptors and the port of each burst, built before any timing starts.
#[derive(Clone, Debug)]
pub struct Workload {
    descs: Vec<Desc>,
    port_of: Vec<usize>,
}

impl Workload {
    /// Runs `packets / BURST` steps (enqueue a burst, dequeue up to a burst) on `tm`, from
    /// virtual time 0; returns the packets sent and the packets dropped. No clock: the caller
    /// times it.
    pub fn run(&self, tm: &mut Tm, packets: usize) -> (u64, u64) {
        self.run_at(tm, packets, 0)
    }

    /// [`run`](Self::run) from virtual time `t0_ns` (after a warm-up of N packets, pass
    /// [`Workload::duration_ns`] of N so that time does not go back).
    pub fn run_at(&self, tm: &mut Tm, packets: usize, t0_ns: u64) -> (u64, u64) {
        let mut res = [Enq::Queued; BURST];
        let mut out = [Desc::default(); BURST];
        let (mut sent, mut dropped) = (0u64, 0u64);
        let bursts = self.port_of.len().max(1);
        for b in 0..packets / BURST {
            let k = b % bursts;
            let port = self.port_of.get(k).copied().unwrap_or(0);
            let now_ns = t0_ns + (b as u64) * STEP_NS;
            let pkts = self.descs.get(k * BURST..(k + 1) * BURST).unwrap_or_default();
            tm.enqueue_burst(port, pkts, now_ns, &mut res);
            // A mask and its popcount rather than `filter().count()`, which compiled to a
            // bit-by-bit count of a compare mask (about 4 instructions per packet of harness).
            let mask = res.iter().enumerate().fold(0u64, |m, (i, r)| m | u64::from(matches!(r, Enq::Dropped(_))) << (i & 63));
            dropped += u64::from(mask.count_ones());
            sent += tm.dequeue_burst(port, BURST, now_ns, &mut out) as u64;
            black_box(&out);
        }
        (sent, dropped)
    }

    /// The virtual time `packets` take: one [`STEP_NS`] per burst.
    pub const fn duration_ns(packets: usize) -> u64 {
        (packets / BURST) as u64 * STEP_NS
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_flat_runs_without_loss() {
        for s in Scenario::ALL {
            assert_eq!(Scenario::parse(s.name()), Some(s));
            assert_eq!(Scenario::parse(s.letter()), Some(s));
        }
        assert_eq!(Scenario::parse("x"), None);
        let s = Scenario::Flat;
        let mut tm = Tm::build(&s.config()).unwrap();
        assert_eq!(s.workload().run(&mut tm, 3200), (3200, 0));
    }
}
