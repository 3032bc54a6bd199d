//! The flow table against its `HashMap` twin (`reference::flow`) on random operation sequences:
//! inserts, packets with random TCP flags, batch lookups of 0..=256 keys, removals, time jumps
//! and expiry. Small capacities make "table full" common; a 64-slot wheel with ~0.27 s ticks
//! makes long timeouts wrap around the wheel many times.

use fastpath_tables::flow::{flags::*, proto, FlowConfig, FlowKey, FlowTable, InsertError, Segment, Side, NO_FLOW};
use fastpath_tables::reference::flow::RefFlowTable;
use proptest::prelude::*;

const POOL: usize = 48;

fn pool() -> Vec<FlowKey> {
    (0..POOL)
        .map(|i| {
            let p = [proto::TCP, proto::TCP, proto::UDP, proto::ICMP][i % 4];
            let (a, b) = ([198, 18, 0, (i % 7) as u8], [198, 19, 0, (i / 7) as u8]);
            let port = if p == proto::ICMP { 77 } else { 1000 + i as u16 };
            FlowKey::v4((i % 3) as u32, p, a, port, b, if p == proto::ICMP { 77 } else { 80 }).0
        })
        .collect()
}

#[derive(Clone, Debug)]
enum Op {
    Insert(usize, bool, Segment),
    Packet(usize, bool, Segment),
    Batch(Vec<usize>),
    Remove(usize),
    Advance(u64),
    Expire,
}

fn seg() -> impl Strategy<Value = Segment> {
    let fl = prop_oneof![Just(SYN), Just(SYN | ACK), Just(ACK), Just(ACK | PSH), Just(FIN | ACK), Just(RST), Just(RST | ACK), any::<u8>(),];
    let num = prop_oneof![Just(0u32), Just(1000), Just(1001), Just(1101), Just(5000), Just(5001), Just(70_000), any::<u32>()];
    (fl, num.clone(), num, prop_oneof![Just(65535u16), Just(0), any::<u16>()], prop_oneof![Just(0u32), Just(100)], 40u32..1500).prop_map(
        |(f, seq, ack, win, len, wire)| {
            let mut s = Segment::tcp(f, seq, ack, win, len);
            s.wire_len = wire;
            s
        },
    )
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..POOL;
    prop_oneof![
        4 => (k.clone(), any::<bool>(), seg()).prop_map(|(k, s, g)| Op::Insert(k, s, g)),
        6 => (k.clone(), any::<bool>(), seg()).prop_map(|(k, s, g)| Op::Packet(k, s, g)),
        1 => prop::collection::vec(0..POOL, 0..=256).prop_map(Op::Batch),
        1 => k.prop_map(Op::Remove),
        2 => prop_oneof![
            Just(0u64),
            Just(1_000_000),
            Just(1_000_000_000),
            Just(10_000_000_000),
            Just(31_000_000_000),
            Just(200_000_000_000),
            0u64..1_000_000_000_000,
        ].prop_map(Op::Advance),
        2 => Just(Op::Expire),
    ]
}

fn side(from_lo: bool) -> Side {
    if from_lo {
        Side::Lo
    } else {
        Side::Hi
    }
}

fn same_err(a: Result<u32, InsertError>, b: Result<(), InsertError>) -> bool {
    match (a, b) {
        (Ok(_), Ok(())) => true,
        (Err(InsertError::Exists(_)), Err(InsertError::Exists(_))) => true,
        (Err(x), Err(y)) => x == y,
        _ => false,
    }
}

fn check_same(fast: &FlowTable, twin: &RefFlowTable) -> Result<(), TestCaseError> {
    prop_assert_eq!(fast.len(), twin.len());
    for (_, e) in fast.iter() {
        let r = twin.map.get(e.key());
        prop_assert!(r.is_some(), "fast holds {:?}, twin does not", e.key());
        let r = r.unwrap();
        prop_assert_eq!(e.conn(), &r.conn);
        prop_assert_eq!(e.initiator(), r.initiator);
        prop_assert_eq!(e.expires_ns(), r.expires_ns);
        for d in [fastpath_tables::flow::Dir::Original, fastpath_tables::flow::Dir::Reply] {
            prop_assert_eq!(e.pkts(d), r.pkts[d as usize]);
            prop_assert_eq!(e.bytes(d), r.bytes[d as usize]);
        }
    }
    Ok(())
}

fn run(cap: u32, window_check: bool, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let keys = pool();
    let mut cfg = FlowConfig::with_capacity(cap);
    cfg.window_check = window_check;
    cfg.tick_shift = 28;
    cfg.wheel_slots = 64;
    let mut fast = FlowTable::new(cfg).unwrap();
    let mut twin = RefFlowTable::new(cfg);
    let mut now = 1u64;
    let mut fulls = 0u64;
    for op in ops {
        match op {
            Op::Insert(k, s, g) => {
                let key = &keys[k];
                let a = fast.insert(key, fast.hash(key), side(s), &g, now);
                let b = twin.insert(key, side(s), &g, now);
                prop_assert!(same_err(a, b), "insert {:?}: fast {:?} twin {:?}", key, a, b);
                fulls += u64::from(b == Err(InsertError::Full));
                if let Ok(id) = a {
                    prop_assert_eq!(fast.entry(id).unwrap().key(), key);
                }
            }
            Op::Packet(k, s, g) => {
                let key = &keys[k];
                let a = fast.lookup(key, fast.hash(key), now).map(|id| fast.track(id, side(s), &g, now));
                let b = twin.track(key, side(s), &g, now);
                prop_assert_eq!(a, b);
            }
            Op::Batch(ix) => {
                let ks: Vec<FlowKey> = ix.iter().map(|&i| keys[i]).collect();
                let mut out = vec![0u32; ks.len()];
                let hits = fast.lookup_batch(&ks, now, &mut out);
                let mut twin_hits = 0;
                for (k, id) in ks.iter().zip(&out) {
                    let t = twin.lookup(k, now).is_some();
                    twin_hits += usize::from(t);
                    prop_assert_eq!(*id != NO_FLOW, t);
                    if *id != NO_FLOW {
                        prop_assert_eq!(fast.entry(*id).unwrap().key(), k);
                    }
                }
                prop_assert_eq!(hits, twin_hits);
            }
            Op::Remove(k) => {
                let key = &keys[k];
                let a = fast.lookup(key, fast.hash(key), now).is_some_and(|id| fast.remove(id));
                let b = twin.lookup(key, now).is_some() && twin.remove(key);
                prop_assert_eq!(a, b);
            }
            Op::Advance(dt) => now += dt,
            Op::Expire => {
                let a = fast.expire(now, usize::MAX);
                let b = twin.expire(now);
                prop_assert_eq!(a, b);
            }
        }
        check_same(&fast, &twin)?;
    }
    prop_assert_eq!(fast.stats().full, fulls);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn flow_table_matches_twin_small(window_check in any::<bool>(), ops in prop::collection::vec(op(), 1..200)) {
        run(8, window_check, ops)?;
    }

    #[test]
    fn flow_table_matches_twin_roomy(window_check in any::<bool>(), ops in prop::collection::vec(op(), 1..200)) {
        run(64, window_check, ops)?;
    }
}

/// Batch lookups at every length 0..=256 agree with one-at-a-time lookups.
#[test]
fn batch_lookup_every_length() {
    let mut t = FlowTable::new(FlowConfig::with_capacity(4096)).unwrap();
    let mut keys = Vec::new();
    for i in 0..600u32 {
        let (k, s) = FlowKey::v4(1, proto::UDP, [198, 18, (i >> 8) as u8, i as u8], 5000, [198, 19, 0, 1], 53);
        if i % 3 != 0 {
            t.insert(&k, t.hash(&k), s, &Segment::datagram(64), 0).unwrap();
        }
        keys.push(k);
    }
    for n in 0..=256usize {
        let ks: Vec<FlowKey> = (0..n).map(|j| keys[(j * 7 + n) % keys.len()]).collect();
        let mut out = vec![0u32; n];
        let hits = t.lookup_batch(&ks, 1, &mut out);
        let mut want = 0;
        for (k, id) in ks.iter().zip(&out) {
            let one = t.lookup(k, t.hash(k), 1).unwrap_or(NO_FLOW);
            assert_eq!(*id, one);
            want += usize::from(one != NO_FLOW);
        }
        assert_eq!(hits, want);
    }
}
