//! HQoS invariants in virtual time, on random hierarchies (groups, pipes, profiles, shapers at
//! every level, 4 or 8 classes, strict and weighted classes) and random traffic:
//! - every accepted packet leaves exactly once (none lost once the port is drained, none
//!   duplicated, none invented), and every refused one is counted;
//! - packets of one pipe and class leave in arrival order;
//! - no shaper is exceeded over any window: bytes sent between two dequeue calls at t1 ≤ t2
//!   (both included) ≤ burst + rate × (t2 − t1).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fastpath_packet::PktId;
use fastpath_tm::config::{BufferConfig, ClassSched, GroupConfig, HqosConfig, HqosQueueConfig, PipeProfile, PortConfig, TmConfig, CLASSES};
use fastpath_tm::shaper::{ShaperConfig, UNITS_PER_BYTE};
use fastpath_tm::{Desc, Enq, Tm};
use proptest::prelude::*;
use std::collections::HashMap;

fn shaper() -> impl Strategy<Value = Option<ShaperConfig>> {
    prop_oneof![Just(None), (1_000_000u64..200_000_000, 2000u64..20_000).prop_map(|(r, b)| Some(ShaperConfig::new(r, b))),]
}

fn profile() -> impl Strategy<Value = PipeProfile> {
    (shaper(), prop::array::uniform8(prop_oneof![Just(None), (1u32..5).prop_map(Some)]))
        .prop_map(|(shaper, w)| PipeProfile { shaper, sched: w.map(|w| w.map_or(ClassSched::Strict, |weight| ClassSched::Drr { weight })) })
}

fn hqos() -> impl Strategy<Value = HqosConfig> {
    (
        prop_oneof![Just(4u8), Just(8u8)],
        shaper(),
        prop::collection::vec(profile(), 1..4),
        prop::collection::vec((1u32..20, shaper(), any::<u16>()), 1..5),
        prop::sample::select(vec![200u32, 1500, 4000]),
        2u8..16,
    )
        .prop_map(|(classes, port_shaper, profiles, groups, quantum, tick)| {
            let np = profiles.len() as u16;
            HqosConfig {
                classes,
                shaper: port_shaper,
                queues: [HqosQueueConfig { limit_bytes: 30_000, min_bytes: 0, alpha_log2: 3 }; CLASSES],
                groups: groups.into_iter().map(|(pipes, shaper, p)| GroupConfig { pipes, profile: p % np, shaper }).collect(),
                profiles,
                quantum_bytes: quantum,
                wheel_tick_log2: tick,
            }
        })
}

#[derive(Clone, Debug)]
enum Op {
    Enq(Vec<(u32, u8, u32)>),
    Deq(usize),
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop::collection::vec((0u32..100, 0u8..9, 60u32..2000), 0..32).prop_map(Op::Enq),
        3 => (0usize..64).prop_map(Op::Deq),
        2 => (0u64..2_000_000).prop_map(Op::Wait),
    ]
}

/// Bytes sent per dequeue call, (time, bytes), for one shaped entity.
fn check_shaped(name: &str, s: &ShaperConfig, sends: &[(u64, u64)]) -> Result<(), TestCaseError> {
    for i in 0..sends.len() {
        let mut bytes = 0u128;
        for j in i..sends.len() {
            bytes += u128::from(sends[j].1);
            let dt = u128::from(sends[j].0 - sends[i].0);
            let allowed = u128::from(s.burst_bytes) * u128::from(UNITS_PER_BYTE) + dt * u128::from(s.rate_bps);
            prop_assert!(bytes * u128::from(UNITS_PER_BYTE) <= allowed, "{} sent {} bytes in {} ns ({:?})", name, bytes, dt, s);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn hqos_keeps_every_packet_order_and_rate(h in hqos(), ops in prop::collection::vec(op(), 1..80)) {
        let cfg = TmConfig { buffer: BufferConfig { total_bytes: 400_000, total_pkts: 400 }, seed: 1, ports: vec![PortConfig::Hqos(h.clone())] };
        let mut tm = Tm::build(&cfg).unwrap();
        let npipes = h.pipes() as u32;
        let group_of: Vec<usize> = h.groups.iter().enumerate().flat_map(|(g, gc)| std::iter::repeat_n(g, gc.pipes as usize)).collect();
        let mut profile_of: Vec<u16> = h.groups.iter().flat_map(|gc| std::iter::repeat_n(gc.profile, gc.pipes as usize)).collect();
        // Exercise set_pipe_profile on pipe 0 before any traffic.
        let np = h.profiles.len() as u16;
        tm.set_pipe_profile(0, 0, np - 1).unwrap();
        profile_of[0] = np - 1;

        let mut id = 0u32;
        let mut now = 0u64;
        let mut accepted: HashMap<u32, Desc> = HashMap::new();
        let mut refused = 0u64;
        let mut last_out: HashMap<(u32, u8), u32> = HashMap::new();
        let mut port_sends = vec![];
        let mut group_sends: Vec<Vec<(u64, u64)>> = vec![vec![]; h.groups.len()];
        let mut pipe_sends: Vec<Vec<(u64, u64)>> = vec![vec![]; npipes as usize];
        let mut out = vec![Desc::default(); 64];
        let mut deq = |tm: &mut Tm, budget: usize, now: u64, accepted: &mut HashMap<u32, Desc>| -> Result<usize, TestCaseError> {
            let n = tm.dequeue_burst(0, budget, now, &mut out);
            prop_assert!(n <= budget);
            let mut per_group = vec![0u64; h.groups.len()];
            let mut per_pipe: HashMap<u32, u64> = HashMap::new();
            let mut total = 0;
            for d in &out[..n] {
                let a = accepted.remove(&d.pkt.0);
                prop_assert_eq!(a, Some(*d), "packet {} not queued or sent twice", d.pkt.0);
                let prev = last_out.insert((d.pipe, d.class), d.pkt.0);
                prop_assert!(prev.is_none_or(|p| p < d.pkt.0), "pipe {} class {} out of order", d.pipe, d.class);
                total += u64::from(d.len_bytes);
                per_group[group_of[d.pipe as usize]] += u64::from(d.len_bytes);
                *per_pipe.entry(d.pipe).or_default() += u64::from(d.len_bytes);
            }
            port_sends.push((now, total));
            for (g, b) in per_group.into_iter().enumerate() {
                group_sends[g].push((now, b));
            }
            for (p, sends) in pipe_sends.iter_mut().enumerate() {
                sends.push((now, per_pipe.get(&(p as u32)).copied().unwrap_or(0)));
            }
            Ok(n)
        };
        for op in &ops {
            match op {
                Op::Enq(burst) => {
                    let pkts: Vec<Desc> = burst
                        .iter()
                        .map(|&(pipe, class, len)| {
                            id += 1;
                            Desc { pkt: PktId(id), len_bytes: len, pipe: pipe % (npipes + 1), class, ..Desc::default() }
                        })
                        .collect();
                    let mut res = vec![Enq::Queued; pkts.len()];
                    tm.enqueue_burst(0, &pkts, now, &mut res);
                    for (d, r) in pkts.iter().zip(&res) {
                        match r {
                            Enq::Queued => {
                                accepted.insert(d.pkt.0, *d);
                            }
                            Enq::Dropped(_) => refused += 1,
                            Enq::Marked => prop_assert!(false, "no WRED on HQoS ports"),
                        }
                    }
                }
                Op::Deq(budget) => {
                    deq(&mut tm, *budget, now, &mut accepted)?;
                }
                Op::Wait(dt) => now += dt,
            }
        }
        // Drain in one-millisecond steps: everything accepted comes out.
        let mut steps = 0;
        while !accepted.is_empty() {
            now += 1_000_000;
            deq(&mut tm, 64, now, &mut accepted)?;
            steps += 1;
            prop_assert!(steps < 100_000, "{} packets stuck; next eligible {:?}", accepted.len(), tm.next_eligible_ns(0));
        }
        prop_assert_eq!(tm.next_eligible_ns(0), None);
        prop_assert_eq!(tm.buffer().used_pkts(), 0);
        let c = tm.port_counters(0).unwrap();
        prop_assert_eq!(c.total_drops(), refused);
        prop_assert_eq!(c.enq_pkts, c.deq_pkts);
        prop_assert_eq!(c.enq_pkts + refused, u64::from(id));

        if let Some(s) = &h.shaper {
            check_shaped("port", s, &port_sends)?;
        }
        for (g, gc) in h.groups.iter().enumerate() {
            if let Some(s) = &gc.shaper {
                check_shaped(&format!("group {g}"), s, &group_sends[g])?;
            }
        }
        for (p, sends) in pipe_sends.iter().enumerate() {
            if let Some(s) = &h.profiles[usize::from(profile_of[p])].shaper {
                check_shaped(&format!("pipe {p}"), s, sends)?;
            }
        }
    }
}
