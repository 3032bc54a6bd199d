//! MemSource / MemSink: frames have the configured sizes, flows, protocols and tags (checked by
//! a small dissector written here from the RFC header layouts, independent of the packet crate),
//! IMIX proportions, header restore per pass, limits, and no leaked buffers.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use fastpath_io::mem::{Encap, FlowSpec, FrameSizes, MemError, MemSink, MemSource, ProtoMix, Templates, TrafficProfile, L4};
use fastpath_io::worker::{RunEnd, TxAll, Worker};
use fastpath_io::Port;
use fastpath_packet::{Batch, Pool};

/// What the dissector found in a frame.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    len: usize,
    vlans: Vec<(u16, u16)>,    // (TPID, VID)
    vxlan: Option<(u16, u32)>, // (outer UDP source port, VNI)
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    sport: u16,
    dport: u16,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// RFC 1071 one's-complement sum.
fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        s += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Ethernet (IEEE 802.3) ▸ 802.1ad/802.1Q tags ▸ IPv4 (RFC 791) / IPv6 (RFC 8200) ▸
/// UDP (RFC 768) / TCP (RFC 9293) / ICMP echo (RFC 792, RFC 4443); VXLAN (RFC 7348) inside
/// UDP 4789 is opened once. Checks every length field against the frame.
fn dissect(f: &[u8]) -> Seen {
    let mut at = 12;
    let mut vlans = Vec::new();
    let mut ty = be16(f, at);
    while ty == 0x8100 || ty == 0x88a8 {
        vlans.push((ty, be16(f, at + 2) & 0x0fff));
        at += 4;
        ty = be16(f, at);
    }
    at += 2;
    let (src, dst, proto, l4, l3_end) = match ty {
        0x0800 => {
            assert_eq!(f[at] >> 4, 4);
            let ihl = usize::from(f[at] & 0xf) * 4;
            assert_eq!(usize::from(be16(f, at + 2)), f.len() - at, "IPv4 total length");
            assert_eq!(csum(&f[at..at + ihl]), 0, "IPv4 header checksum");
            let s = Ipv4Addr::new(f[at + 12], f[at + 13], f[at + 14], f[at + 15]);
            let d = Ipv4Addr::new(f[at + 16], f[at + 17], f[at + 18], f[at + 19]);
            (IpAddr::V4(s), IpAddr::V4(d), f[at + 9], at + ihl, f.len())
        }
        0x86dd => {
            assert_eq!(f[at] >> 4, 6);
            assert_eq!(usize::from(be16(f, at + 4)), f.len() - at - 40, "IPv6 payload length");
            let s: [u8; 16] = f[at + 8..at + 24].try_into().unwrap();
            let d: [u8; 16] = f[at + 24..at + 40].try_into().unwrap();
            (IpAddr::V6(Ipv6Addr::from(s)), IpAddr::V6(Ipv6Addr::from(d)), f[at + 6], at + 40, f.len())
        }
        t => panic!("unexpected EtherType {t:#x}"),
    };
    let (sport, dport) = (be16(f, l4), be16(f, l4 + 2));
    if proto == 17 {
        assert_eq!(usize::from(be16(f, l4 + 4)), l3_end - l4, "UDP length");
        if dport == 4789 {
            assert_eq!(f[l4 + 8] & 0x08, 0x08, "VXLAN I flag");
            let vni = u32::from_be_bytes([0, f[l4 + 12], f[l4 + 13], f[l4 + 14]]);
            let mut inner = dissect(&f[l4 + 16..]);
            inner.len = f.len();
            inner.vxlan = Some((sport, vni));
            return inner;
        }
    }
    if proto == 6 {
        assert_eq!(usize::from(f[l4 + 12] >> 4) * 4, 20, "TCP data offset");
    }
    if proto == 1 || proto == 58 {
        // Echo request: type 8 (ICMP) / 128 (ICMPv6), code 0; id and sequence follow.
        assert!(f[l4] == 8 || f[l4] == 128);
        return Seen { len: f.len(), vlans, vxlan: None, src, dst, proto, sport: be16(f, l4 + 4), dport: be16(f, l4 + 6) };
    }
    Seen { len: f.len(), vlans, vxlan: None, src, dst, proto, sport, dport }
}

/// Receives `n` packets (bursts as they come) and returns their frames; frees everything.
fn receive(src: &mut MemSource, n: usize, pool_n: usize) -> Vec<Vec<u8>> {
    let mut pool = Pool::new(pool_n);
    let mut b = Batch::new();
    let mut out = Vec::new();
    while out.len() < n {
        b.clear();
        let got = src.rx_burst(&mut pool, &mut b, 0);
        assert_eq!(got, b.len());
        for &h in b.handles() {
            out.push(pool.data(h).to_vec());
        }
        pool.free_bulk(b.handles());
        if got == 0 {
            break;
        }
    }
    assert_eq!(pool.available(), pool_n);
    out.truncate(n);
    out
}

fn expect_flow(seen: &Seen, spec: &FlowSpec) {
    assert_eq!(seen.src, spec.src);
    assert_eq!(seen.dst, spec.dst);
    assert_eq!((seen.sport, seen.dport), (spec.src_port, spec.dst_port));
    let proto = match (spec.l4, spec.src) {
        (L4::Udp, _) => 17,
        (L4::Tcp, _) => 6,
        (L4::Icmp, IpAddr::V4(_)) => 1,
        (L4::Icmp, IpAddr::V6(_)) => 58,
    };
    assert_eq!(seen.proto, proto);
}

#[test]
fn default_profile_is_64_byte_udp_in_benchmark_ranges() {
    let p = TrafficProfile::default();
    let mut src = MemSource::new("gen", &p).unwrap();
    let frames = receive(&mut src, 256, 512);
    assert_eq!(frames.len(), 256);
    for f in &frames {
        assert_eq!(f, &frames[0], "one flow: every frame the same");
    }
    let s = dissect(&frames[0]);
    assert_eq!(s.len, 64);
    assert_eq!(s.proto, 17);
    assert_eq!(&frames[0][..6], &[0x02, 0, 0, 0, 0, 0x02], "dst MAC");
    let (IpAddr::V4(a), IpAddr::V4(b)) = (s.src, s.dst) else { panic!() };
    assert_eq!(a.octets()[..2], [198, 18]);
    assert_eq!(b.octets()[..2], [198, 19]);
    assert_eq!(src.templates().stride(), 64);
    assert_eq!(src.stats().rx_pkts, 256);
    assert_eq!(src.stats().rx_bytes, 256 * 64);
}

#[test]
fn flows_come_round_robin_with_distinct_tuples() {
    let p = TrafficProfile { flows: 1000, frame_sizes: FrameSizes::Fixed(128), seed: 7, ..Default::default() };
    let mut src = MemSource::new("gen", &p).unwrap();
    let frames = receive(&mut src, 2500, 300);
    let mut tuples = HashSet::new();
    let (mut srcs, mut dsts) = (HashSet::new(), HashSet::new());
    for (k, f) in frames.iter().enumerate() {
        let s = dissect(f);
        assert_eq!(s.len, 128);
        expect_flow(&s, &p.flow(k as u32 % 1000));
        if k < 1000 {
            tuples.insert((s.src, s.dst, s.sport, s.dport));
            srcs.insert(s.src);
            dsts.insert(s.dst);
        } else {
            assert_eq!(f, &frames[k - 1000], "packet {k} repeats flow {}", k % 1000);
        }
    }
    assert_eq!(tuples.len(), 1000);
    assert_eq!(srcs.len(), 1000, "first 64k flows have distinct sources");
    assert_eq!(dsts.len(), 1000);
}

#[test]
fn seed_decides_and_is_deterministic() {
    let p = |seed| TrafficProfile { flows: 64, seed, ..Default::default() };
    let frames = |seed| receive(&mut MemSource::new("g", &p(seed)).unwrap(), 64, 128);
    assert_eq!(frames(1), frames(1));
    assert_ne!(frames(1), frames(2));
}

#[test]
fn tuples_stay_distinct_past_64k_flows() {
    let p = TrafficProfile { flows: 200_000, ..Default::default() };
    let mut seen = HashSet::new();
    for i in (0..200_000).step_by(7) {
        let f = p.flow(i);
        assert!(seen.insert((f.src, f.dst, f.src_port)), "flow {i} repeats a tuple");
    }
}

#[test]
fn imix_proportions_and_spread() {
    let p = TrafficProfile { flows: 10, frame_sizes: FrameSizes::Imix, ..Default::default() };
    let mut src = MemSource::new("gen", &p).unwrap();
    let frames = receive(&mut src, 1200, 512);
    let count = |n| frames.iter().filter(|f| f.len() == n).count();
    assert_eq!((count(64), count(570), count(1518)), (700, 400, 100));
    // Evenly spread: every window of 12 packets holds exactly 7/4/1.
    for w in frames.windows(12) {
        assert_eq!(w.iter().filter(|f| f.len() == 1518).count(), 1);
        assert_eq!(w.iter().filter(|f| f.len() == 570).count(), 4);
    }
    // Sizes and flows are independent: flow 0 is seen at several sizes.
    let flow0: HashSet<usize> = frames.iter().step_by(10).map(|f| f.len()).collect();
    assert!(flow0.len() > 1);
    for (k, f) in frames.iter().enumerate() {
        let s = dissect(f);
        expect_flow(&s, &p.flow(k as u32 % 10));
        assert_eq!(s.len, src.templates().frame_len(k as u64));
    }
    assert_eq!(src.templates().period(), 60, "lcm(10 flows, 12 sizes)");
}

#[test]
fn list_sizes_in_order() {
    let p = TrafficProfile { flows: 3, frame_sizes: FrameSizes::List(vec![100, 200, 60, 1500]), ..Default::default() };
    let frames = receive(&mut MemSource::new("g", &p).unwrap(), 24, 64);
    let lens: Vec<usize> = frames.iter().map(Vec::len).collect();
    assert_eq!(lens, [100, 200, 60, 1500].repeat(6));
}

#[test]
fn protocol_mix_and_ipv6_share() {
    let mix = ProtoMix { udp: 2, tcp: 1, icmp: 1, ipv6_percent: 25, ..Default::default() };
    let p = TrafficProfile { flows: 4000, frame_sizes: FrameSizes::Fixed(128), proto: mix, seed: 3, ..Default::default() };
    let t = p.templates().unwrap();
    assert_eq!(t.stride(), 128, "IPv6 + TCP headers need two lines");
    let mut src = MemSource::from_templates("g", t);
    let frames = receive(&mut src, 4000, 512);
    let (mut udp, mut tcp, mut icmp, mut v6) = (0, 0, 0, 0);
    for (k, f) in frames.iter().enumerate() {
        let s = dissect(f);
        expect_flow(&s, &p.flow(k as u32));
        match s.proto {
            17 => udp += 1,
            6 => tcp += 1,
            _ => icmp += 1,
        }
        if let IpAddr::V6(a) = s.src {
            assert_eq!(a.segments()[..3], [0x2001, 2, 0], "inside 2001:2::/48");
            v6 += 1;
        }
    }
    let near = |x: i32, want: i32| (x - want).abs() < want / 8;
    assert!(near(udp, 2000) && near(tcp, 1000) && near(icmp, 1000), "{udp} {tcp} {icmp}");
    assert!(near(v6, 1000), "{v6}");
}

#[test]
fn vlan_qinq_and_vxlan_variants() {
    let base = TrafficProfile { flows: 10, frame_sizes: FrameSizes::Fixed(128), ..Default::default() };
    let vlan = TrafficProfile { proto: ProtoMix { encap: Encap::Vlan { vid: 100 }, ..Default::default() }, ..base.clone() };
    for f in receive(&mut MemSource::new("g", &vlan).unwrap(), 10, 64) {
        let s = dissect(&f);
        assert_eq!(s.vlans, vec![(0x8100, 100)]);
        assert_eq!(s.len, 128);
    }
    let qinq =
        TrafficProfile { proto: ProtoMix { encap: Encap::QinQ { s_vid: 10, c_vid: 1, c_per_s: 4 }, ..Default::default() }, ..base.clone() };
    let tags: Vec<_> = receive(&mut MemSource::new("g", &qinq).unwrap(), 10, 64).iter().map(|f| dissect(f).vlans).collect();
    for (i, t) in tags.iter().enumerate() {
        assert_eq!(t, &vec![(0x88a8, 10 + i as u16 / 4), (0x8100, 1 + i as u16 % 4)], "subscriber {i}");
    }
    let vx = TrafficProfile {
        proto: ProtoMix {
            encap: Encap::Vxlan {
                vni: 5000,
                vnis: 3,
                outer_src_mac: [2, 0, 0, 0, 1, 1],
                outer_dst_mac: [2, 0, 0, 0, 1, 2],
                outer_src: Ipv4Addr::new(198, 18, 255, 1),
                outer_dst: Ipv4Addr::new(198, 19, 255, 1),
            },
            ..Default::default()
        },
        ..base.clone()
    };
    let t = vx.templates().unwrap();
    assert_eq!(t.stride(), 128);
    let mut sports = HashSet::new();
    for (i, f) in receive(&mut MemSource::from_templates("g", t), 10, 64).iter().enumerate() {
        let s = dissect(f);
        assert_eq!(s.len, 128, "the size counts the outer headers");
        let (sport, vni) = s.vxlan.unwrap();
        assert_eq!(vni, 5000 + i as u32 % 3);
        assert!(sport >= 49152);
        sports.insert(sport);
        expect_flow(&s, &base.flow(i as u32));
        assert_eq!(&f[..6], &[2, 0, 0, 0, 1, 2], "outer dst MAC");
    }
    assert!(sports.len() > 5, "outer source port carries flow entropy");
}

#[test]
fn headers_are_restored_each_pass_payload_is_not() {
    let p = TrafficProfile { flows: 4, frame_sizes: FrameSizes::Fixed(200), ..Default::default() };
    let want = receive(&mut MemSource::new("g", &p).unwrap(), 4, 8);
    let mut src = MemSource::new("g", &p).unwrap();
    // A pool of 4: every pass reuses the same buffers.
    let mut pool = Pool::new(4);
    let mut b = Batch::new();
    for pass in 0..3 {
        b.clear();
        assert_eq!(src.rx_burst(&mut pool, &mut b, 0), 4);
        for (i, &h) in b.handles().iter().enumerate() {
            let d = pool.data(h);
            assert_eq!(&d[..64], &want[i][..64], "pass {pass}: headers restored");
            if pass > 0 {
                assert!(d[64..].iter().all(|&x| x == 0xEE), "pass {pass}: payload is what the buffer held");
            }
            // The "pipeline" scribbles over everything and moves the frame start.
            pool.data_mut(h).fill(0xEE);
            pool.strip(h, 14);
        }
        pool.free_bulk(b.handles());
    }
}

#[test]
fn limit_burst_and_pool_exhaustion() {
    let p = TrafficProfile { flows: 5, ..Default::default() };
    let mut src = MemSource::new("g", &p).unwrap().with_limit(100).with_burst(32);
    let mut pool = Pool::new(10);
    let mut b = Batch::new();
    let mut flows = Vec::new();
    let mut polls = 0;
    while !src.is_exhausted() {
        polls += 1;
        assert!(polls < 100);
        b.clear();
        let n = src.rx_burst(&mut pool, &mut b, 2);
        assert!(n <= 10, "the pool has 10 buffers");
        for &h in b.handles() {
            flows.push(dissect(pool.data(h)).src);
        }
        pool.free_bulk(b.handles());
    }
    assert_eq!(flows.len(), 100);
    for (k, s) in flows.iter().enumerate() {
        assert_eq!(*s, p.flow(k as u32 % 5).src, "packet {k}: flows stay in order across short bursts");
    }
    b.clear();
    assert_eq!(src.rx_burst(&mut pool, &mut b, 0), 0);
    assert_eq!(src.remaining(), 0);
}

#[test]
fn a_full_batch_is_not_overfilled() {
    let mut src = MemSource::new("g", &TrafficProfile::default()).unwrap();
    let mut pool = Pool::new(600);
    let mut b = Batch::new();
    assert_eq!(src.rx_burst(&mut pool, &mut b, 0), 256);
    assert_eq!(src.rx_burst(&mut pool, &mut b, 0), 0);
    assert_eq!(pool.available(), 600 - 256);
}

#[test]
fn custom_generator_plugs_in() {
    // A pipeline supplying its own frames: flow number in the first payload byte.
    let gen = |flow: u32, len: usize| {
        let mut v = vec![0u8; len];
        v[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental EtherType
        v[14] = flow as u8;
        v
    };
    let t = Templates::build(&gen, 3, &FrameSizes::Fixed(200)).unwrap();
    assert_eq!(t.stride(), 128, "a closure restores the default 128 bytes");
    let t = Templates::build(&gen, 3, &FrameSizes::Fixed(60)).unwrap();
    assert_eq!(t.stride(), 64, "frames of at most 64 bytes are restored whole by one line");
    let frames = receive(&mut MemSource::from_templates("g", t), 7, 16);
    assert_eq!(frames.iter().map(|f| f[14]).collect::<Vec<_>>(), vec![0, 1, 2, 0, 1, 2, 0]);
    assert!(frames.iter().all(|f| f.len() == 60));
}

#[test]
fn a_frame_longer_than_asked_gets_the_stride_its_headers_need() {
    // Headers that do not fit the size asked for: the frame comes out 100 bytes long.
    let gen = |flow: u32, len: usize| {
        let mut v: Vec<u8> = (0..len.max(100)).map(|k| k as u8).collect();
        v[99] = flow as u8;
        v
    };
    let t = Templates::build(&gen, 2, &FrameSizes::Fixed(64)).unwrap();
    assert_eq!(t.stride(), 128);
    for (i, f) in receive(&mut MemSource::from_templates("g", t), 4, 16).iter().enumerate() {
        assert_eq!(f.len(), 100);
        assert_eq!(f[64..99], (64..99).map(|k| k as u8).collect::<Vec<_>>()[..], "bytes past the first line restored");
        assert_eq!(f[99], i as u8 % 2);
    }
}

#[test]
fn profile_errors() {
    let e = |p: TrafficProfile| p.templates().err().unwrap();
    assert_eq!(e(TrafficProfile { flows: 0, ..Default::default() }), MemError::NoFlows);
    assert_eq!(e(TrafficProfile { frame_sizes: FrameSizes::Fixed(9000), ..Default::default() }), MemError::BadSize(9000));
    assert_eq!(e(TrafficProfile { frame_sizes: FrameSizes::List(vec![]), ..Default::default() }), MemError::NoSizes);
    assert_eq!(MemError::BadSize(9000).to_string(), "frame size 9000 is outside 14..=1792");
}

#[test]
fn a_million_flows() {
    let p = TrafficProfile { flows: 1 << 20, ..Default::default() };
    let t = p.templates().unwrap();
    assert_eq!(t.period(), 1 << 20);
    assert_eq!(t.memory_bytes(), (1 << 20) * 66);
    let mut src = MemSource::from_templates("g", t);
    let frames = receive(&mut src, 512, 512);
    for (k, f) in frames.iter().enumerate() {
        expect_flow(&dissect(f), &p.flow(k as u32));
    }
}

#[test]
fn router_bench_scale_64k_flows_of_ipv6_tcp() {
    let mix = ProtoMix { udp: 0, tcp: 1, ipv6_percent: 100, ..Default::default() };
    let p = TrafficProfile { flows: 65536, proto: mix, frame_sizes: FrameSizes::Fixed(78), ..Default::default() };
    let t = p.templates().unwrap();
    assert_eq!(t.memory_bytes(), 65536 * 130, "8 MiB of headers");
    let f = receive(&mut MemSource::from_templates("g", t), 1, 4);
    let s = dissect(&f[0]);
    assert_eq!((s.len, s.proto), (78, 6));
}

#[test]
fn sink_counts_and_frees_through_the_worker() {
    let p = TrafficProfile { flows: 100, frame_sizes: FrameSizes::Imix, ..Default::default() };
    let ports: Vec<Box<dyn Port>> =
        vec![Box::new(MemSource::new("gen", &p).unwrap().with_limit(10_000)), Box::new(MemSink::new("sink").counting_bytes())];
    let mut w = Worker::new(Pool::new(1024), ports, TxAll(1));
    assert_eq!(w.run_until_exhausted(), RunEnd::Exhausted);
    let rx = w.ports()[0].stats();
    let tx = w.ports()[1].stats();
    assert_eq!(rx.rx_pkts, 10_000);
    assert_eq!(tx.tx_pkts, 10_000);
    assert_eq!(tx.tx_bytes, rx.rx_bytes);
    // 10000 = 833 IMIX periods of 12 + 4 packets.
    let period_bytes = 7 * 64 + 4 * 570 + 1518;
    assert!(rx.rx_bytes >= 833 * period_bytes && rx.rx_bytes < 834 * period_bytes);
    assert_eq!(w.stats().tx_pkts, 10_000);
    assert_eq!(w.pool().available(), 1024);
}
