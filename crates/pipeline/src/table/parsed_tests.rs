//! Tests of the parser's record of the 5-tuple against the table's own reading of the packet:
//! a file of its own, as it uses both the parser and the table's key forms, which the record's
//! module does not.

use super::aclkey::tests::{five_tuple, v4};
use super::aclkey::{AclKey, CacheKey, ParsedForm};
use super::parsed::ParsedTuple;
use crate::field::Extract;
use crate::ir::MAX_KEY_FIELDS;
use fastpath_packet::{Batch, Hdr, HdrSet, Meta, Pool, Slot};

/// A table after the parser reads from the parser's record the key it would read from the
/// packet, for keys with and without each header's parts, on frames of every shape
/// (tagged, IPv6, ICMP, ARP, options, a later fragment), cut short or with a byte changed.
#[test]
fn parsed_records_read_as_the_packets() {
    use crate::stages::parser::Parser;
    use fastpath_packet::build::FrameBuilder;
    use fastpath_packet::hdr::{ArpRepr, IpProto, Ipv4Repr, TcpFlags};
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(192, 168, 7, 9));
    let e = || FrameBuilder::eth([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let with = |f: &dyn Fn(&mut Ipv4Repr)| {
        let mut r = Ipv4Repr::new(a, b, IpProto::UDP, 0);
        f(&mut r);
        e().ipv4_with(r).udp(7, 9).build()
    };
    let shapes = [
        e().ipv4(a, b).udp(1000, 53).build(),
        e().ipv4(a, b).tcp(40000, 80, TcpFlags::SYN, 1, 0).build(),
        e().ipv4(a, b).icmp_echo(1, 2).build(),
        e().vlan(10, 0).ipv4(a, b).udp(5060, 5061).build(),
        e().qinq(20, 30).ipv4(a, b).tcp(1, 2, TcpFlags::ACK, 1, 1).build(),
        e().ipv6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST).udp(1, 2).build(),
        e().arp(ArpRepr::request([2, 0, 0, 0, 0, 2], a, b)).build(),
        with(&|r| r.options = vec![1, 1, 1, 0]),
        with(&|r| r.frag_offset = 8),
    ];
    let sport = Extract::Be16 { slot: Slot::L4, byte: 0, needs: HdrSet::EMPTY.with(Hdr::Udp), alt: HdrSet::EMPTY.with(Hdr::Tcp) };
    let dport = Extract::Be16 { slot: Slot::L4, byte: 2, needs: HdrSet::EMPTY.with(Hdr::Udp), alt: HdrSet::EMPTY.with(Hdr::Tcp) };
    let proto = Extract::Short { slot: Slot::L3, byte: 9, n: 1, needs: HdrSet::EMPTY.with(Hdr::Ipv4), alt: HdrSet::EMPTY };
    let keys = [
        five_tuple(),
        vec![(v4(16), 32, false), (Extract::InPort, 9, false)],
        vec![(sport, 16, true), (v4(12), 32, false), (proto, 8, false)],
        vec![(Extract::InPort, 9, false), (dport, 16, true), (sport, 16, true), (v4(16), 32, false)],
    ];
    // Keys the record does not hold: an exact port (a packet without one misses), an
    // address as a range, a register.
    for fields in
        [vec![(v4(12), 32, false), (dport, 16, false)], vec![(v4(12), 32, true)], vec![(Extract::Reg(0), 8, false), (proto, 8, false)]]
    {
        let k = AclKey::new(&fields).expect("a uniform key");
        assert!(k.tuple().expect("a 5-tuple key").parsed_masks().is_none());
    }
    let hs = ["eth", "vlan", "arp", "ipv4", "ipv6", "icmp", "udp", "tcp"].iter().filter_map(|h| Hdr::from_name(h));
    let parser = Parser::new(hs.fold(HdrSet::EMPTY, |s, h| s.with(h)), false, true);
    let mut runner = proptest::test_runner::TestRunner::default();
    runner
        .run(&(0..shapes.len(), 0usize..60, 0usize..80, any::<u8>(), 0usize..80, any::<u16>()), |(shape, cut, at, v, at2, port)| {
            // A frame, and the same frame with another byte changed (in or out of the key).
            let mut f = shapes[shape].clone();
            if let Some(x) = f.get_mut(at) {
                *x = v;
            }
            f.truncate(f.len().saturating_sub(cut));
            let mut g = f.clone();
            if let Some(x) = g.get_mut(at2) {
                *x ^= 0x41;
            }
            // Each frame's key words (what a cache miss asks the classifier) and key (what
            // the cache compares): from its record, then from its bytes.
            type Read = [(Option<[u32; MAX_KEY_FIELDS]>, Option<[u64; 2]>); 2];
            let read = |f: &[u8], fields: &[(Extract, u8, bool)]| -> Option<Read> {
                let mut m = Meta::arrived(port);
                parser.parse(f, &mut m).ok()?;
                let (mut pool, mut batch) = (Pool::new(1), Batch::new());
                let h = pool.alloc().expect("one buffer");
                pool.set_data(h, f);
                batch.push(h, port);
                let (meta, [lo, hi]) = batch.meta_and_words_mut(0);
                *meta = m;
                [*lo, *hi] = ParsedTuple::of(f, &m);
                let k = AclKey::new(fields).expect("a uniform key");
                let t = k.tuple().expect("a 5-tuple key");
                let form = ParsedForm::new(t).expect("the record holds the key");
                let parsed = form.read(&pool, &batch, 0);
                let raw = t.read_raw::<false>(&k, f, &m);
                Some([(parsed.map(|p| form.words(&p)), parsed), (raw.map(|r| t.raw_words(&r)), raw)])
            };
            for fields in &keys {
                let (Some(a), Some(b)) = (read(&f, fields), read(&g, fields)) else { continue };
                // The record's key words are the packet's; two records are equal exactly
                // when the packets' keys are.
                prop_assert_eq!(a[0].0, a[1].0, "{:?} {:02x?}", fields, f);
                prop_assert_eq!(a[0].1 == b[0].1, a[1].1 == b[1].1, "{:?} {:02x?} {:02x?}", fields, f, g);
            }
            Ok(())
        })
        .expect("the parser's record reads as the packet");
}
