//! The flat port against its naive twin (`fastpath_tm::reference::RefFlatPort`), in virtual
//! time: random configs (strict/DRR mixes, weights, quanta, rings, reservations, α) and random
//! sequences of enqueue bursts (random classes, some invalid, random sizes) and dequeue bursts
//! (random budgets) must give the same result for every packet and the same dequeue order, and
//! the same counters (occupancy and high watermarks included).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fastpath_packet::PktId;
use fastpath_tm::config::{BufferConfig, ClassConfig, ClassSched, FlatPortConfig, PortConfig, TmConfig, CLASSES};
use fastpath_tm::reference::RefFlatPort;
use fastpath_tm::{Desc, Enq, Tm};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Enq(Vec<(u8, u32)>),
    Deq(usize),
}

fn class_cfg() -> impl Strategy<Value = ClassConfig> {
    (prop_oneof![Just(None), (1u32..8).prop_map(Some)], prop::sample::select(vec![2u32, 4, 16, 64, 256]), 0u64..1500, -4i8..=3).prop_map(
        |(w, ring, min, alpha)| ClassConfig {
            sched: w.map_or(ClassSched::Strict, |weight| ClassSched::Drr { weight }),
            ring_pkts: ring,
            min_bytes: min,
            alpha_log2: alpha,
            ..ClassConfig::default()
        },
    )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop::collection::vec((prop_oneof![40 => 0u8..=8, 1 => 9u8..=255], prop_oneof![9 => 1u32..2000, 1 => Just(0u32)]), 0..24).prop_map(Op::Enq),
        // Bursts past 32 packets and budgets past 32 and 64: held-back batches drained whole
        // into windows of 32 and 64 slots (with a large quantum, see below).
        1 => prop::collection::vec((0u8..8, 1u32..2000), 24..48).prop_map(Op::Enq),
        2 => prop_oneof![3 => 0usize..40, 1 => 40usize..=64].prop_map(Op::Deq),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn flat_port_equals_reference(
        classes in prop::array::uniform8(class_cfg()),
        quantum in prop::sample::select(vec![64u32, 300, 1500, 9000]),
        // Small buffers exercise every refusal (bursts fall back to the per-packet path); large
        // ones let whole bursts through the batched path.
        total_bytes in prop_oneof![2_000u64..60_000, 1_000_000u64..4_000_000],
        total_pkts in prop_oneof![4u32..200, 1_000u32..5_000],
        ops in prop::collection::vec(op(), 1..60),
        // Half the ports have no reservations, and half have rings of 256 (bursts held back
        // from the rings need room for the whole batch in the smallest ring): paths of their own.
        reserve in any::<bool>(),
        big_rings in any::<bool>(),
    ) {
        let mut port = FlatPortConfig { classes, drr_quantum_bytes: quantum, shaper: None };
        if big_rings {
            for c in &mut port.classes {
                c.ring_pkts = 256;
            }
        }
        if !reserve || port.classes.iter().map(|c| c.min_bytes).sum::<u64>() > total_bytes {
            for c in &mut port.classes {
                c.min_bytes = 0;
            }
        }
        check(&port, total_bytes, total_pkts, &ops)?;
    }

    /// One or two DRR classes busy at a time, dequeued a few packets at a time: a class alone
    /// in the round robin sends in one run, its turn left open when the budget runs out and
    /// resumed by the next dequeue, and its deficit must be the one its turns would leave when
    /// another class joins.
    #[test]
    fn a_class_alone_in_the_round_robin_equals_reference(
        weights in prop::array::uniform8(1u32..8),
        quantum in prop::sample::select(vec![64u32, 300, 1500]),
        ops in prop::collection::vec(prop_oneof![
            2 => prop::collection::vec((prop_oneof![6 => Just(0u8), 1 => Just(1u8)], 40u32..2000), 1..12).prop_map(Op::Enq),
            3 => (1usize..5).prop_map(Op::Deq),
        ], 1..80),
    ) {
        let classes = weights.map(|weight| ClassConfig { sched: ClassSched::Drr { weight }, ring_pkts: 256, ..ClassConfig::default() });
        let port = FlatPortConfig { classes, drr_quantum_bytes: quantum, shaper: None };
        check(&port, 4_000_000, 5_000, &ops)?;
    }
}

/// Runs `ops` on a port of config `port` and on its naive twin: every result, the dequeue
/// order and the counters must agree, and a final drain must empty both.
fn check(port: &FlatPortConfig, total_bytes: u64, total_pkts: u32, ops: &[Op]) -> Result<(), TestCaseError> {
    {
        let cfg = TmConfig { buffer: BufferConfig { total_bytes, total_pkts }, seed: 1, ports: vec![PortConfig::Flat(*port)] };
        let mut tm = Tm::build(&cfg).unwrap();
        let mut rf = RefFlatPort::new(port, total_bytes, total_pkts);
        let mut id = 0u32;
        let mut now = 0u64;
        let mut out = vec![Desc::default(); 64];
        for op in ops {
            now += 1000;
            match op {
                Op::Enq(burst) => {
                    let pkts: Vec<Desc> = burst
                        .iter()
                        .map(|&(class, len)| {
                            id += 1;
                            Desc { pkt: PktId(id), len_bytes: len, class, ..Desc::default() }
                        })
                        .collect();
                    let mut res = vec![Enq::Queued; pkts.len()];
                    prop_assert_eq!(tm.enqueue_burst(0, &pkts, now, &mut res), pkts.len());
                    let want = rf.enqueue_burst(&pkts);
                    prop_assert_eq!(res, want);
                }
                Op::Deq(budget) => {
                    let n = tm.dequeue_burst(0, *budget, now, &mut out);
                    let want = rf.dequeue(*budget);
                    prop_assert_eq!(&out[..n], &want[..]);
                }
            }
            for k in 0..CLASSES {
                let c = tm.queue_counters(0, k).unwrap();
                prop_assert_eq!((c.occ_bytes, c.occ_pkts, c.hwm_bytes, c.hwm_pkts), rf.occupancy(k), "class {}", k);
            }
        }
        // Drain: the rest comes out in the same order, and the buffer is empty after.
        loop {
            let n = tm.dequeue_burst(0, 64, now, &mut out);
            let want = rf.dequeue(64);
            prop_assert_eq!(&out[..n], &want[..]);
            if n == 0 {
                break;
            }
        }
        prop_assert_eq!(tm.buffer().used_pkts(), 0);
        prop_assert_eq!(tm.buffer().used_bytes(), 0);
        let c = tm.port_counters(0).unwrap();
        prop_assert_eq!(c.enq_pkts, c.deq_pkts);
        prop_assert_eq!(c.enq_pkts + c.total_drops(), u64::from(id));
        prop_assert!((0..CLASSES).all(|k| tm.queue_counters(0, k).unwrap().occ_pkts == 0));
    }
    Ok(())
}
