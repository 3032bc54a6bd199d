//! LPM used the way a pipeline stage uses it: addresses gathered from the live slots of a
//! `Batch`, one `lookup_lanes` per batch, verdicts from the result (miss → `no_route` drop,
//! hit → forward). Cross-crate: `fastpath-packet` batches with `fastpath-tables` LPM.

use fastpath_packet::batch::{Batch, BATCH_MAX};
use fastpath_packet::drop::DropReason;
use fastpath_packet::pool::PktId;
use fastpath_packet::verdict::Verdict;
use fastpath_tables::lpm::{Lpm4, Lpm6, LpmError, VALUE_MAX};
use std::net::{Ipv4Addr, Ipv6Addr};

fn v4(s: &str) -> u32 {
    s.parse::<Ipv4Addr>().map(u32::from).unwrap_or(0)
}

#[test]
fn stage_style_lookup_over_live_lanes() {
    let mut fib = Lpm4::new();
    fib.insert_addr(Ipv4Addr::new(198, 18, 0, 0), 15, 1).ok();
    fib.insert_addr(Ipv4Addr::new(198, 18, 7, 0), 24, 2).ok();
    fib.insert_addr(Ipv4Addr::new(198, 18, 7, 9), 32, 3).ok();

    let mut b = Batch::new();
    let mut dst = [0u32; BATCH_MAX];
    for (i, d) in dst.iter_mut().enumerate() {
        assert!(b.push(PktId(i as u32), 0));
        // 198.18.x.y for even slots, 203.0.113.y (unrouted) for odd ones.
        *d = if i % 2 == 0 { v4("198.18.7.0") + i as u32 / 2 } else { v4("203.0.113.0") + i as u32 % 256 };
    }
    b.drop(0, DropReason::NotIp); // slot 0 already dropped by an earlier stage
    let mut nh = [0; BATCH_MAX];
    let hits = fib.lookup_lanes(&dst, b.live(), &mut nh);
    for i in b.live() {
        match nh[i] {
            fastpath_tables::MISS => b.drop(i, DropReason::NoRoute),
            port => b.tx(i, port as u16),
        }
    }
    assert_eq!(hits, 127);
    assert_eq!(b.verdict(0), Verdict::Drop(DropReason::NotIp));
    assert_eq!(b.verdict(2), Verdict::Tx(2)); // 198.18.7.1 → /24
    assert_eq!(b.verdict(18), Verdict::Tx(3)); // 198.18.7.9 → /32
    assert_eq!(b.verdict(1), Verdict::Drop(DropReason::NoRoute));
    assert!(b.live().is_empty());
}

#[test]
fn batch_equals_single_lookups_v6() {
    let mut fib = Lpm6::new();
    let net: u128 = "2001:db8::".parse::<Ipv6Addr>().map(u128::from).unwrap_or(0);
    for i in 0..64u128 {
        assert_eq!(fib.insert(net | i << 80, 48, i as u32), Ok(()));
    }
    assert_eq!(fib.insert(net, 32, VALUE_MAX), Ok(()));
    let addrs: Vec<u128> = (0..300u128).map(|i| net | (i % 80) << 80 | i).collect();
    let mut out = vec![None; addrs.len()];
    assert_eq!(fib.lookup_batch(&addrs, &mut out), 300);
    for (a, o) in addrs.iter().zip(&out) {
        assert_eq!(*o, fib.lookup(*a));
    }
    assert_eq!(out[5], Some(5));
    assert_eq!(out[70], Some(VALUE_MAX));
    assert_eq!(fib.remove(net, 32), Ok(VALUE_MAX));
    assert_eq!(fib.lookup(addrs[70]), None);
    assert_eq!(fib.remove(net, 32), Err(LpmError::NotFound));
}
