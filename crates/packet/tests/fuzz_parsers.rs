//! A bounded, deterministic fuzzer for every header parser (nightly cargo-fuzz is not
//! available here, so this runs in `cargo test`).
//!
//! Inputs are (a) arbitrary bytes and (b) mutations of valid frames built with `FrameBuilder`
//! (every protocol, tunnels, extension headers): bit flips, byte and 16-bit writes of
//! "interesting" values, edits of the real length fields (IPv4 IHL/total length, IPv6 payload
//! and extension lengths, UDP length, TCP data offset), truncations, extensions and splices.
//! Each input goes through [`exercise`]: the full header walk from Ethernet to the inner
//! VXLAN frame, every parser at several offsets, every accessor of every view that parsed, and
//! the write views' setters on a copy. It asserts that nothing panics, that parsed slices stay
//! inside the input, and that setters keep a checksum that verified before verifying after.
//!
//! `FUZZ_ITERS` sets the number of inputs per test (default 600 000 per test, three such tests:
//! ~1.8 M inputs in a few seconds in the test profile); `FUZZ_SEED` the seed (printed on
//! failure). A panicking input is written to `testdata/fuzz-regressions/crash-<hash>.bin`
//! before the test fails; [`replay_fuzz_regressions`] runs every file there on each test run.

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::csum;
use fastpath_packet::hdr::vlan::parse_tags;
use fastpath_packet::hdr::{
    Arp, ArpMut, ArpRepr, Eth, EthMut, EtherType, Icmp, IcmpMut, IcmpRepr, IcmpType, IpProto, Ipv4, Ipv4Mut, Ipv4Repr, Ipv6, Ipv6Frag,
    Ipv6Mut, Tcp, TcpFlags, TcpMut, TcpRepr, Udp, UdpMut, Vlan, VlanMut, Vxlan, VxlanMut, VXLAN_PORT,
};

// ---------------------------------------------------------------------------------------------
// Deterministic randomness.

/// SplitMix64 (Steele, Lea, Flood 2014): small, fast, good enough to drive mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

fn iters() -> usize {
    std::env::var("FUZZ_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(600_000)
}

fn seed(salt: u64) -> u64 {
    std::env::var("FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_f00d) ^ salt
}

// ---------------------------------------------------------------------------------------------
// The seed corpus: valid frames of every kind.

fn corpus() -> Vec<Vec<u8>> {
    let (m1, m2) = ([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1]);
    let (a, b) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 19, 0, 1));
    let (s6, d6): (Ipv6Addr, Ipv6Addr) = (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
    let opts = Ipv4Repr { options: vec![0x94, 4, 0, 0, 1, 1, 1, 0], ..Ipv4Repr::new(a, b, IpProto::UDP, 0) };
    let tcp_opts = TcpRepr { options: vec![2, 4, 5, 0xb4, 1, 3, 3, 7], ..TcpRepr::new(1, 2, TcpFlags::SYN, 3, 4) };
    let e = || FrameBuilder::eth(m1, m2);
    vec![
        e().ipv4(a, b).udp(1024, 1025).frame_len(64).build(),
        e().ipv4(a, b).tcp(40000, 80, TcpFlags::SYN | TcpFlags::ACK, 1, 2).payload(b"data").build(),
        e().ipv4(a, b).tcp_with(tcp_opts.clone()).build(),
        e().ipv4(a, b).icmp_echo(1, 2).payload(b"ping").build(),
        e().ipv4_with(opts).udp(9, 9).payload(&[7; 20]).build(),
        e().ipv6(s6, d6).udp(1, 2).payload(b"x").build(),
        e().ipv6(s6, d6).tcp_with(tcp_opts).payload(b"y").build(),
        e().ipv6(s6, d6).icmp_echo(3, 4).build(),
        e().ipv6(s6, d6)
            .ipv6_ext(IpProto::HOPOPT, &[1, 4, 0, 0, 0, 0])
            .ipv6_ext(IpProto::ROUTING, &[0; 14])
            .ipv6_frag(Ipv6Frag { offset: 0, more: true, ident: 5 })
            .ipv6_ext(IpProto::AH, &[0; 10])
            .ipv6_ext(IpProto::DSTOPTS, &[])
            .udp(5, 6)
            .build(),
        e().vlan(100, 3).ipv4(a, b).udp(1, 2).build(),
        e().qinq(10, 20).ipv6(s6, d6).udp(1, 2).build(),
        e().qinq(10, 20).arp(ArpRepr::request(m2, a, b)).build(),
        e().arp(ArpRepr::request(m2, a, b)).frame_len(60).build(),
        e().ipv4(a, b)
            .udp(49152, VXLAN_PORT)
            .vxlan(77)
            .inner_eth(m1, m2)
            .vlan(5, 0)
            .ipv4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
            .tcp(1, 2, TcpFlags::ACK, 9, 9)
            .build(),
        e().ipv6(s6, d6).udp(49152, VXLAN_PORT).vxlan(78).inner_eth(m1, m2).ipv6(d6, s6).icmp_echo(1, 1).build(),
        e().ipv4(a, b).icmp(IcmpRepr { msg_type: IcmpType::TIME_EXCEEDED, code: 0, rest: [0; 4] }).build(),
    ]
}

/// Offsets and widths of the real length fields of a valid frame (found with the views).
fn length_fields(f: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut base = 0usize;
    let mut frame = f;
    for _ in 0..2 {
        let Ok(e) = Eth::parse(frame) else { break };
        let Ok((outer, inner, off)) = parse_tags(e.ethertype(), e.payload()) else { break };
        let et = inner.or(outer).map_or(e.ethertype(), |v| v.ethertype());
        let l3 = base + 14 + off;
        let Some(l3b) = f.get(l3..) else { break };
        let (proto, l4, l4b) = if et == EtherType::IPV4 {
            let Ok(p) = Ipv4::parse(l3b) else { break };
            out.extend([(l3, 1), (l3 + 2, 2)]);
            (p.protocol(), l3 + p.header_len(), p.payload())
        } else if et == EtherType::IPV6 {
            let Ok(p) = Ipv6::parse(l3b) else { break };
            out.push((l3 + 4, 2));
            let mut o = l3 + 40;
            for (_, h) in p.exts() {
                out.push((o + 1, 1));
                o += h.len();
            }
            (p.upper_proto(), l3 + p.upper_offset(), p.upper_payload())
        } else {
            break;
        };
        if proto == IpProto::UDP {
            out.push((l4 + 4, 2));
            match Udp::parse(l4b) {
                Ok(u) if u.dst_port() == VXLAN_PORT => {
                    base = l4 + 16;
                    frame = u.payload().get(8..).unwrap_or_default();
                    continue;
                }
                _ => break,
            }
        } else if proto == IpProto::TCP {
            out.push((l4 + 12, 1));
        }
        break;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Mutations.

const INTERESTING8: [u8; 10] = [0, 1, 4, 5, 6, 0x0f, 0x40, 0x7f, 0x80, 0xff];
const INTERESTING16: [u16; 12] = [0, 1, 7, 8, 19, 20, 39, 40, 0x00ff, 0x7fff, 0x8000, 0xffff];

fn mutate(rng: &mut Rng, seed: &[u8], lens: &[(usize, usize)], other: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(seed);
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let n = out.len();
        match rng.below(9) {
            0 | 1 => {
                if n > 0 {
                    let i = rng.below(n);
                    out[i] ^= 1 << rng.below(8);
                }
            }
            2 => {
                if n > 0 {
                    let i = rng.below(n);
                    out[i] = if rng.below(2) == 0 { INTERESTING8[rng.below(INTERESTING8.len())] } else { rng.byte() };
                }
            }
            3 => {
                if n > 1 {
                    let i = rng.below(n - 1);
                    let v = INTERESTING16[rng.below(INTERESTING16.len())];
                    out[i..i + 2].copy_from_slice(&v.to_be_bytes());
                }
            }
            4 | 5 => {
                // Edit a real length field: interesting values, or the true value ± small.
                if let Some(&(off, w)) = lens.get(rng.below(lens.len().max(1))) {
                    if w == 2 && off + 2 <= n {
                        let cur = u16::from_be_bytes([out[off], out[off + 1]]);
                        let v = match rng.below(3) {
                            0 => INTERESTING16[rng.below(INTERESTING16.len())],
                            1 => cur.wrapping_add(rng.below(9) as u16).wrapping_sub(4),
                            _ => rng.next() as u16,
                        };
                        out[off..off + 2].copy_from_slice(&v.to_be_bytes());
                    } else if w == 1 && off < n {
                        out[off] = match rng.below(3) {
                            0 => (out[off] & 0xf0) | rng.below(16) as u8,          // IHL nibble
                            1 => (out[off] & 0x0f) | ((rng.below(16) as u8) << 4), // data offset
                            _ => rng.byte(),
                        };
                    }
                }
            }
            6 => out.truncate(rng.below(n + 1)),
            7 => {
                let k = rng.below(16);
                for _ in 0..k {
                    out.push(rng.byte());
                }
            }
            _ => {
                // Splice a chunk of another valid frame in at a random place.
                if !other.is_empty() && n > 0 {
                    let from = rng.below(other.len());
                    let len = rng.below(other.len() - from + 1).min(32);
                    let at = rng.below(n);
                    let end = (at + len).min(n);
                    out[at..end].copy_from_slice(&other[from..from + (end - at)]);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Exercising the parsers.

thread_local! {
    /// How deep inputs got on this thread: [L4 parsed, inner (tunnelled) Ethernet parsed].
    static REACHED: std::cell::Cell<[u64; 2]> = const { std::cell::Cell::new([0; 2]) };
}

fn reached(i: usize) {
    REACHED.with(|r| {
        let mut v = r.get();
        v[i] += 1;
        r.set(v);
    });
}

#[derive(Clone, Copy)]
enum Addrs {
    V4([u8; 4], [u8; 4]),
    V6([u8; 16], [u8; 16]),
}

/// `inner` lies inside `outer` (by address).
fn inside(inner: &[u8], outer: &[u8]) -> bool {
    let (o, i) = (outer.as_ptr_range(), inner.as_ptr_range());
    inner.is_empty() || (i.start >= o.start && i.end <= o.end)
}

fn walk_eth(buf: &[u8], depth: u32) {
    let Ok(e) = Eth::parse(buf) else { return };
    if depth > 0 {
        reached(1);
    }
    black_box((e.dst(), e.src(), e.ethertype(), e.header_len()));
    assert_eq!(e.payload().len() + 14, buf.len());
    let Ok((outer, inner, off)) = parse_tags(e.ethertype(), e.payload()) else { return };
    for v in [outer, inner].into_iter().flatten() {
        black_box((v.pcp(), v.dei(), v.vid(), v.tci(), v.ethertype(), v.payload().len()));
        assert!(inside(v.payload(), buf));
    }
    let et = inner.or(outer).map_or(e.ethertype(), |v| v.ethertype());
    let Some(l3) = e.payload().get(off..) else { panic!("tag offset {off} past the frame") };
    if et == EtherType::ARP {
        if let Ok(a) = Arp::parse(l3) {
            black_box((a.htype(), a.ptype(), a.op(), a.sha(), a.spa(), a.tha(), a.tpa()));
            black_box(ArpRepr::from_view(&a));
        }
    } else if et == EtherType::IPV4 {
        walk_ipv4(l3, depth);
    } else if et == EtherType::IPV6 {
        walk_ipv6(l3, depth);
    }
}

fn walk_ipv4(b: &[u8], depth: u32) {
    let Ok(p) = Ipv4::parse(b) else { return };
    black_box((p.tos(), p.dscp(), p.ecn(), p.total_len(), p.ident(), p.dont_frag(), p.more_frags()));
    black_box((p.frag_offset(), p.is_fragment(), p.ttl(), p.protocol(), p.checksum(), p.src(), p.dst()));
    let _ = black_box((p.options(), p.checksum_ok(), p.verify_checksum(), p.pseudo_sum()));
    black_box(Ipv4Repr::from_view(&p));
    assert!(p.header_len() >= 20 && p.header_len() <= 60);
    assert_eq!(p.header_len() + p.payload().len(), usize::from(p.total_len()));
    assert!(p.total_len() as usize <= b.len());
    walk_l4(p.protocol(), p.payload(), Addrs::V4(p.src_bytes(), p.dst_bytes()), depth);
}

fn walk_ipv6(b: &[u8], depth: u32) {
    let Ok(p) = Ipv6::parse(b) else { return };
    black_box((p.traffic_class(), p.dscp(), p.ecn(), p.flow_label(), p.payload_len(), p.next_header()));
    black_box((p.hop_limit(), p.src(), p.dst(), p.ext_headers(), p.ext_count(), p.fragment(), p.pseudo_sum()));
    assert!(p.ext_count() <= fastpath_packet::hdr::ipv6::MAX_EXT_HEADERS);
    assert_eq!(p.exts().count(), p.ext_count());
    assert_eq!(p.exts().map(|(_, h)| h.len()).sum::<usize>(), p.ext_headers().len());
    assert_eq!(40 + p.payload().len(), 40 + usize::from(p.payload_len()));
    assert_eq!(p.upper_offset() + p.upper_payload().len(), 40 + p.payload().len());
    assert!(inside(p.upper_payload(), b));
    walk_l4(p.upper_proto(), p.upper_payload(), Addrs::V6(p.src_bytes(), p.dst_bytes()), depth);
}

fn walk_l4(proto: IpProto, b: &[u8], addrs: Addrs, depth: u32) {
    match proto {
        IpProto::UDP => {
            let Ok(u) = Udp::parse(b) else { return };
            if depth == 0 {
                reached(0);
            }
            black_box((u.src_port(), u.dst_port(), u.len(), u.is_empty(), u.checksum()));
            match addrs {
                Addrs::V4(s, d) => black_box(u.checksum_ok_v4(s, d)),
                Addrs::V6(s, d) => black_box(u.checksum_ok_v6(s, d)),
            };
            assert_eq!(8 + u.payload().len(), usize::from(u.len()));
            if u.dst_port() == VXLAN_PORT && depth == 0 {
                if let Ok(x) = Vxlan::parse(u.payload()) {
                    black_box((x.flags(), x.vni()));
                    assert!(x.vni() <= 0x00ff_ffff);
                    walk_eth(x.payload(), depth + 1);
                }
            }
        }
        IpProto::TCP => {
            let Ok(t) = Tcp::parse(b) else { return };
            if depth == 0 {
                reached(0);
            }
            black_box((t.src_port(), t.dst_port(), t.seq(), t.ack(), t.flags(), t.reserved(), t.window()));
            black_box((t.checksum(), t.urgent(), t.options(), TcpRepr::from_view(&t)));
            match addrs {
                Addrs::V4(s, d) => black_box(t.checksum_ok_v4(s, d)),
                Addrs::V6(s, d) => black_box(t.checksum_ok_v6(s, d)),
            };
            assert_eq!(t.header_len() + t.payload().len(), b.len());
        }
        IpProto::ICMP | IpProto::ICMPV6 => {
            let Ok(m) = Icmp::parse(b) else { return };
            black_box((m.msg_type(), m.code(), m.checksum(), m.rest_of_header(), m.echo_id(), m.echo_seq()));
            black_box((m.checksum_ok_v4(), IcmpRepr::from_view(&m)));
            if let Addrs::V6(s, d) = addrs {
                black_box(m.checksum_ok_v6(s, d));
            }
            assert_eq!(8 + m.data().len(), b.len());
        }
        _ => {}
    }
}

/// Every parser straight on `b` (as if a stage had computed a wrong offset).
fn parse_all_at(b: &[u8]) {
    black_box(Eth::parse(b).map(|v| v.payload().len()).ok());
    black_box(Vlan::parse(b).map(|v| v.vid()).ok());
    black_box(Arp::parse(b).map(|v| v.tpa()).ok());
    black_box(Vxlan::parse(b).map(|v| v.vni()).ok());
    walk_ipv4(b, 1);
    walk_ipv6(b, 1);
    for p in [IpProto::UDP, IpProto::TCP, IpProto::ICMP] {
        walk_l4(p, b, Addrs::V4([1, 2, 3, 4], [5, 6, 7, 8]), 1);
    }
}

/// The write views' setters on a copy: no panic, and a checksum that verified still does.
fn edit_all(b: &[u8], scratch: &mut Vec<u8>) {
    scratch.clear();
    scratch.extend_from_slice(b);
    if let Ok(mut e) = EthMut::parse(scratch) {
        e.swap_macs();
        e.set_src([1; 6]);
        e.set_ethertype(e.ethertype());
    }
    let Ok(e) = Eth::parse(b) else { return };
    let Ok((outer, inner, off)) = parse_tags(e.ethertype(), e.payload()) else { return };
    let et = inner.or(outer).map_or(e.ethertype(), |v| v.ethertype());
    if outer.is_some() {
        if let Some(t) = scratch.get_mut(14..) {
            if let Ok(mut v) = VlanMut::parse(t) {
                v.set_vid(4095);
                v.set_pcp(9);
                v.set_dei(true);
            }
        }
    }
    let l3 = 14 + off;
    let Some(l3b) = scratch.get_mut(l3..) else { return };
    if et == EtherType::ARP {
        if let Ok(mut a) = ArpMut::parse(l3b) {
            a.make_reply([3; 6]);
        }
    } else if et == EtherType::IPV4 {
        let Ok(mut m) = Ipv4Mut::parse(l3b) else { return };
        let ok = m.as_view().checksum_ok();
        let (src, dst) = (m.as_view().src_bytes(), m.as_view().dst_bytes());
        let proto = m.protocol();
        black_box(m.decrement_ttl());
        m.set_dscp(46);
        m.set_ecn(3);
        m.set_ident(0xabcd);
        m.set_dont_frag(true);
        m.set_src(Ipv4Addr::new(10, 1, 1, 1));
        m.set_dst(Ipv4Addr::new(10, 2, 2, 2));
        if ok {
            assert!(m.as_view().checksum_ok(), "IPv4 incremental update broke a good checksum");
        }
        let new = Addrs::V4([10, 1, 1, 1], [10, 2, 2, 2]);
        edit_l4(proto, m.into_payload(), Addrs::V4(src, dst), new);
    } else if et == EtherType::IPV6 {
        let Ok(mut m) = Ipv6Mut::parse(l3b) else { return };
        black_box(m.decrement_hop_limit());
        m.set_dscp(10);
        m.set_ecn(1);
        m.set_flow_label(0xfffff);
        let (src, dst) = (m.src().octets(), m.dst().octets());
        let (ns, nd) = ([0xfd; 16], [0xfe; 16]);
        m.set_src(ns.into());
        m.set_dst(nd.into());
        let proto = m.upper_proto();
        edit_l4(proto, m.upper_payload_mut(), Addrs::V6(src, dst), Addrs::V6(ns, nd));
    }
}

fn edit_l4(proto: IpProto, b: &mut [u8], old: Addrs, new: Addrs) {
    match (proto, old, new) {
        (IpProto::UDP, Addrs::V4(os, od), Addrs::V4(ns, nd)) => {
            let Ok(mut u) = UdpMut::parse(b) else { return };
            let ok = u.as_view().checksum_ok_v4(os, od);
            u.set_src_port(1);
            u.set_dst_port(2);
            u.update_pseudo(&os, &ns);
            u.update_pseudo(&od, &nd);
            if ok {
                assert!(u.as_view().checksum_ok_v4(ns, nd), "UDP incremental update broke a good checksum");
            }
            u.fill_checksum_v4(ns, nd);
            assert!(u.as_view().checksum_ok_v4(ns, nd));
        }
        (IpProto::UDP, Addrs::V6(os, od), Addrs::V6(ns, nd)) => {
            let Ok(mut u) = UdpMut::parse(b) else { return };
            let ok = u.as_view().checksum_ok_v6(os, od);
            u.set_dst_port(3);
            u.update_pseudo(&os, &ns);
            u.update_pseudo(&od, &nd);
            if ok {
                assert!(u.as_view().checksum_ok_v6(ns, nd), "UDP/IPv6 incremental update broke a good checksum");
            }
        }
        (IpProto::TCP, Addrs::V4(os, od), Addrs::V4(ns, nd)) => {
            let Ok(mut t) = TcpMut::parse(b) else { return };
            let ok = t.as_view().checksum_ok_v4(os, od);
            t.set_seq(1);
            t.set_ack(2);
            t.set_flags(TcpFlags::RST);
            t.set_window(0);
            t.set_src_port(5);
            t.update_pseudo(&os, &ns);
            t.update_pseudo(&od, &nd);
            if ok {
                assert!(t.as_view().checksum_ok_v4(ns, nd), "TCP incremental update broke a good checksum");
            }
        }
        (IpProto::TCP, Addrs::V6(_, _), Addrs::V6(ns, nd)) => {
            let Ok(mut t) = TcpMut::parse(b) else { return };
            t.set_dst_port(9);
            t.fill_checksum_v6(ns, nd);
            assert!(t.as_view().checksum_ok_v6(ns, nd));
        }
        (IpProto::ICMP, _, _) => {
            let Ok(mut m) = IcmpMut::parse(b) else { return };
            let ok = m.as_view().checksum_ok_v4();
            m.set_msg_type(IcmpType::ECHO_REPLY);
            m.set_code(0);
            m.set_echo_id(1);
            m.set_echo_seq(2);
            if ok {
                assert!(m.as_view().checksum_ok_v4(), "ICMP incremental update broke a good checksum");
            }
        }
        (IpProto::ICMPV6, _, Addrs::V6(ns, nd)) => {
            let Ok(mut m) = IcmpMut::parse(b) else { return };
            m.set_msg_type(IcmpType::V6_ECHO_REPLY);
            m.fill_checksum_v6(ns, nd);
            assert!(m.as_view().checksum_ok_v6(ns, nd));
        }
        _ => {
            if let Ok(mut x) = VxlanMut::parse(b) {
                x.set_vni(u32::MAX);
            }
        }
    }
}

/// Runs one input through everything.
fn exercise(b: &[u8], scratch: &mut Vec<u8>) {
    walk_eth(b, 0);
    for off in [0usize, 1, 4, 8, 14, 18, 22, 34, 54] {
        if let Some(s) = b.get(off..) {
            parse_all_at(s);
        }
    }
    black_box(csum::sum(b));
    edit_all(b, scratch);
}

// ---------------------------------------------------------------------------------------------
// Driving and recording.

fn regressions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/fuzz-regressions")
}

/// FNV-1a, to name crash files by content.
fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3))
}

/// Runs `exercise` on `input`; on panic, keeps the input and fails with the seed.
fn run_one(input: &[u8], scratch: &mut Vec<u8>, what: &str, seed: u64, i: usize) {
    if catch_unwind(AssertUnwindSafe(|| exercise(input, scratch))).is_err() {
        let dir = regressions_dir();
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("crash-{:016x}.bin", fnv(input)));
        let saved = std::fs::write(&path, input).is_ok();
        panic!(
            "{what}: input {i} (seed {seed:#x}, FUZZ_SEED to replay) panicked; {} {}",
            if saved { "kept in" } else { "could not write" },
            path.display()
        );
    }
}

#[test]
fn fuzz_arbitrary_bytes() {
    let seed = seed(1);
    let mut rng = Rng(seed);
    let (mut input, mut scratch) = (Vec::new(), Vec::new());
    for i in 0..iters() {
        input.clear();
        let max = if rng.below(4) == 0 { 1600 } else { 120 };
        let n = rng.below(max);
        input.extend((0..n).map(|_| rng.byte()));
        // Make deep parsing likely: a plausible EtherType and IP version half the time.
        if n >= 15 && rng.below(2) == 0 {
            let (t, v) = match rng.below(4) {
                0 => (0x0800u16, 0x45u8),
                1 => (0x86dd, 0x60),
                2 => (0x8100, 0x08),
                _ => (0x0806, 0x00),
            };
            input[12..14].copy_from_slice(&t.to_be_bytes());
            input[14] = v | (input[14] & 0x0f);
        }
        run_one(&input, &mut scratch, "arbitrary bytes", seed, i);
    }
}

fn fuzz_mutations(salt: u64) {
    let seed = seed(salt);
    let mut rng = Rng(seed);
    let corpus = corpus();
    let lens: Vec<_> = corpus.iter().map(|f| length_fields(f)).collect();
    let (mut input, mut scratch) = (Vec::new(), Vec::new());
    for i in 0..iters() {
        let k = rng.below(corpus.len());
        let other = &corpus[rng.below(corpus.len())];
        mutate(&mut rng, &corpus[k], &lens[k], other, &mut input);
        run_one(&input, &mut scratch, "mutated frame", seed, i);
    }
    // The fuzzer must reach deep code, or it proves little: many mutants still carry a
    // parseable UDP/TCP header, and some a parseable tunnelled frame.
    let [l4, inner] = REACHED.with(|r| r.get());
    let n = iters() as u64;
    assert!(l4 >= n / 8, "only {l4} of {n} mutants reached UDP/TCP");
    assert!(inner >= n / 100, "only {inner} of {n} mutants reached an inner frame");
}

#[test]
fn fuzz_mutated_frames_a() {
    fuzz_mutations(2);
}

#[test]
fn fuzz_mutated_frames_b() {
    fuzz_mutations(3);
}

#[test]
fn fuzz_every_truncation_of_every_seed() {
    let mut scratch = Vec::new();
    for (k, f) in corpus().iter().enumerate() {
        for n in 0..=f.len() {
            run_one(&f[..n], &mut scratch, "truncation", k as u64, n);
        }
    }
}

#[test]
fn corpus_is_valid_and_length_fields_found() {
    // The seeds must parse fully, or mutations start from junk.
    for (k, f) in corpus().iter().enumerate() {
        let e = Eth::parse(f).unwrap_or_else(|m| panic!("seed {k}: {m:?}"));
        let lens = length_fields(f);
        if e.ethertype() != EtherType::ARP && !(e.ethertype().is_vlan_tag() && k == 11) {
            assert!(!lens.is_empty(), "seed {k}: no length fields found");
        }
        for &(off, w) in &lens {
            assert!(off + w <= f.len(), "seed {k}: field at {off} past the frame");
        }
    }
    // The VXLAN seed's inner lengths are found too (outer IPv4, UDP; inner IPv4, TCP).
    let vx = &corpus()[13];
    assert!(length_fields(vx).len() >= 6, "{:?}", length_fields(vx));
}

/// Replays every kept crash input; none may panic any more.
#[test]
fn replay_fuzz_regressions() {
    let Ok(dir) = std::fs::read_dir(regressions_dir()) else { return };
    let mut scratch = Vec::new();
    for entry in dir.flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "bin") {
            let input = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            exercise(&input, &mut scratch);
        }
    }
}
