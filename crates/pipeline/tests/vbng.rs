//! `pipelines/vbng.toml` on real frames, every branch: a good subscriber up and down (tags
//! popped and pushed, MACs rewritten, TTL and checksum), a spoofed source, an unknown
//! subscriber (rate-limited punt, then `no_session`), DHCP punted, ARP for the gateway answered,
//! untagged and wrongly tagged frames, the policer's colours, the class ACL, and the
//! hierarchical QoS's class order. The tshark-checked pcap test is
//! `crates/fastpath/tests/pcap_vbng.rs`.

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{self, ArpRepr, IpProto, Ipv4Repr};
use fastpath_packet::{Batch, DropReason, Pool, PuntReason, Verdict};
use fastpath_pipeline::Pipeline;
use std::net::Ipv4Addr;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
const GW: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 1];
const SUB_MAC: [u8; 6] = [0x02, 0x5b, 0, 0, 0, 7];
const SUB_IP: Ipv4Addr = Ipv4Addr::new(100, 64, 1, 7);
const CORE_MAC: [u8; 6] = [0x02, 0xc0, 0, 0, 0, 1];
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);

/// The vbng pipeline with one subscriber (session 7: port 0, S-VLAN 100, C-VLAN 7, tier 0,
/// ACL profile `acl`), the gateway's ARP entry and one core route.
fn vbng(acl: u8) -> Pipeline {
    let text = std::fs::read_to_string(format!("{ROOT}pipelines/vbng.toml")).unwrap();
    let mut p = fastpath_pipeline::compile("vbng.toml", &text).unwrap_or_else(|e| panic!("{e}")).instantiate();
    p.set_ports(2).unwrap();
    let entries = format!(
        "table up_session add 0 100 7 02:5b:00:00:00:07 => session_up(7, 100.64.1.7, {acl})
         table down_session add 100.64.1.7 => session_down(7, 0, 100, 7, 02:5b:00:00:00:07)
         table class_acl add 0/0xff * * priority 10 => no_action
         table class_acl add 1/0xff 6/0xff 80..80 priority 10 => no_action
         table class_acl add 1/0xff 6/0xff 443..443 priority 10 => no_action
         table core_route add 198.18.0.0/24 => core_nh(1, 10, 02:c0:00:00:00:01)
         table arp_gw add 100.64.0.1 => arp_reply(02:fa:00:00:00:01)
         meter police 7 cir 1000 cbs 3000 pir 2000 pbs 6000
         meter punt_limit 0 cir 1000 cbs 200 ebs 0
         tm pipe 0 7 profile 1"
    );
    let n = entries.lines().count();
    assert_eq!(p.load_entries("entries", &entries).unwrap(), n);
    p
}

fn up(src: Ipv4Addr, svlan: u16, cvlan: u16, dport: u16, len: usize) -> Vec<u8> {
    let r = Ipv4Repr::new(src, SERVER, IpProto::UDP, 64);
    FrameBuilder::eth(GW, SUB_MAC).qinq(svlan, cvlan).ipv4_with(r).udp(40000, dport).frame_len(len).build()
}

fn down(dst: Ipv4Addr, dscp: u8, len: usize) -> Vec<u8> {
    let mut r = Ipv4Repr::new(SERVER, dst, IpProto::UDP, 64);
    r.dscp = dscp;
    FrameBuilder::eth(GW, CORE_MAC).vlan(10, 0).ipv4_with(r).udp(53, 40000).frame_len(len).build()
}

/// Frames in on `port` at `now_ns` (one batch); returns their verdicts and every (port, frame)
/// that left, in the order the traffic manager let them out.
fn send(p: &mut Pipeline, pool: &mut Pool, port: u16, frames: &[Vec<u8>], now_ns: u64) -> (Vec<Verdict>, Vec<(u16, Vec<u8>)>) {
    let mut b = Batch::new();
    for f in frames {
        let h = pool.alloc().unwrap();
        pool.set_data(h, f);
        b.push(h, port);
    }
    p.process(pool, &mut b, now_ns);
    let verdicts: Vec<Verdict> = (0..b.len()).map(|i| b.verdict(i)).collect();
    for (i, v) in verdicts.iter().enumerate() {
        if matches!(v, Verdict::Drop(_) | Verdict::Punt(_)) {
            pool.free(b.handle(i));
        }
    }
    let mut out = Vec::new();
    for q in 0..2u16 {
        while p.egress(q, pool, &mut b, now_ns) > 0 {
            for i in 0..b.len() {
                assert_eq!(b.verdict(i), Verdict::Tx(q));
                out.push((q, pool.data(b.handle(i)).to_vec()));
                pool.free(b.handle(i));
            }
        }
    }
    (verdicts, out)
}

fn one(p: &mut Pipeline, pool: &mut Pool, port: u16, f: Vec<u8>) -> (Verdict, Vec<(u16, Vec<u8>)>) {
    let (v, out) = send(p, pool, port, &[f], 0);
    (v[0], out)
}

#[test]
fn a_subscriber_upstream_loses_its_tags_and_is_routed_to_the_core() {
    let mut p = vbng(0);
    let mut pool = Pool::new(64);
    let (_, out) = one(&mut p, &mut pool, 0, up(SUB_IP, 100, 7, 9, 200));
    assert_eq!(out.len(), 1);
    let (port, f) = &out[0];
    assert_eq!(*port, 1);
    let e = hdr::Eth::parse(f).unwrap();
    assert_eq!((e.dst(), e.src()), (CORE_MAC, GW));
    // One core tag (802.1Q VLAN 10), no subscriber tags; 8 bytes shorter minus the 4 of the tag.
    assert_eq!(e.ethertype(), hdr::EtherType::VLAN);
    assert_eq!(f.len(), 200 - 4);
    let (outer, inner, len) = hdr::vlan::parse_tags(e.ethertype(), &f[14..]).unwrap();
    assert_eq!(outer.unwrap().vid(), 10);
    assert!(inner.is_none());
    let ip = hdr::Ipv4::parse(&f[14 + len..]).unwrap();
    assert_eq!((ip.src(), ip.dst(), ip.ttl()), (SUB_IP, SERVER, 63));
    assert!(ip.verify_checksum().is_ok());
    assert_eq!(p.objects().counter("sub_up").unwrap().values[7], (1, 200));
}

#[test]
fn a_subscriber_downstream_gets_its_s_tag_and_c_tag() {
    let mut p = vbng(0);
    let mut pool = Pool::new(64);
    let (_, out) = one(&mut p, &mut pool, 1, down(SUB_IP, 0, 300));
    assert_eq!(out.len(), 1);
    let (port, f) = &out[0];
    assert_eq!(*port, 0);
    let e = hdr::Eth::parse(f).unwrap();
    assert_eq!((e.dst(), e.src(), e.ethertype()), (SUB_MAC, GW, hdr::EtherType::QINQ));
    let (outer, inner, len) = hdr::vlan::parse_tags(e.ethertype(), &f[14..]).unwrap();
    assert_eq!((outer.unwrap().vid(), inner.unwrap().vid()), (100, 7));
    assert_eq!(f.len(), 300 + 4);
    let ip = hdr::Ipv4::parse(&f[14 + len..]).unwrap();
    assert_eq!((ip.dst(), ip.ttl()), (SUB_IP, 63));
    assert!(ip.verify_checksum().is_ok());
    // Counted as delivered: with its two tags in place of the core tag.
    assert_eq!(p.objects().counter("sub_down").unwrap().values[7], (1, 304));
}

/// The downstream session table (262,144 entries keyed by one IPv4 address) is kept as /32
/// routes of a DIR-24-8, not a hash: it must still match exactly. Its neighbours in the same
/// /24 and in other /24s miss; a second session in the /24 and deleting the first change only
/// their own addresses; the table lists its keys as plain addresses.
#[test]
fn the_session_table_by_address_matches_exactly() {
    let mut p = vbng(0);
    let mut pool = Pool::new(64);
    assert!(p.show_plan().contains("as /32 routes (DIR-24-8)"), "{}", p.show_plan());
    let verdict = |p: &mut Pipeline, pool: &mut Pool, dst: Ipv4Addr| one(p, pool, 1, down(dst, 0, 300)).0;
    let no_session = Verdict::Drop(DropReason::NoSession);
    assert_eq!(verdict(&mut p, &mut pool, SUB_IP), Verdict::Queued(0));
    for near in [[100, 64, 1, 6], [100, 64, 1, 8], [100, 64, 0, 7], [100, 64, 2, 7], [101, 64, 1, 7], [0, 0, 0, 0], [255, 255, 255, 255]] {
        assert_eq!(verdict(&mut p, &mut pool, Ipv4Addr::from(near)), no_session, "{near:?}");
    }
    let second = Ipv4Addr::new(100, 64, 1, 8);
    p.load_entries("e", "table down_session add 100.64.1.8 => session_down(8, 0, 100, 8, 02:5b:00:00:00:08)").unwrap();
    assert_eq!(
        p.entry_lines("down_session").unwrap(),
        [
            "table down_session add 100.64.1.7 => session_down(7, 0, 100, 7, 02:5b:00:00:00:07)",
            "table down_session add 100.64.1.8 => session_down(8, 0, 100, 8, 02:5b:00:00:00:08)",
        ]
    );
    assert_eq!(verdict(&mut p, &mut pool, second), Verdict::Queued(0));
    p.load_entries("e", "table down_session del 100.64.1.7").unwrap();
    assert_eq!(verdict(&mut p, &mut pool, SUB_IP), no_session);
    assert_eq!(verdict(&mut p, &mut pool, second), Verdict::Queued(0));
    assert_eq!(p.table("down_session").unwrap().len(), 1);
    assert!(p.load_entries("e", "table down_session del 100.64.1.7").is_err(), "a deleted key is gone");
}

#[test]
fn a_spoofed_source_is_dropped() {
    let mut p = vbng(0);
    let mut pool = Pool::new(64);
    let (v, out) = one(&mut p, &mut pool, 0, up(Ipv4Addr::new(100, 64, 1, 8), 100, 7, 9, 200));
    assert_eq!(v, Verdict::Drop(DropReason::SpoofedSource));
    assert!(out.is_empty());
}

#[test]
fn an_unknown_subscriber_is_punted_within_the_limit_then_dropped() {
    let mut p = vbng(0);
    let mut pool = Pool::new(64);
    // Another C-VLAN: no session. The punt limiter lets 200 bytes through, then drops.
    let frames: Vec<Vec<u8>> = (0..3).map(|_| up(SUB_IP, 100, 8, 9, 100)).collect();
    let (v, _) = send(&mut p, &mut pool, 0, &frames, 0);
    assert_eq!(v, [Verdict::Punt(PuntReason::ACTION), Verdict::Punt(PuntReason::ACTION), Verdict::Drop(DropReason::NoSession)]);
    // Unknown downstream address: dropped.
    let (v, _) = one(&mut p, &mut pool, 1, down(Ipv4Addr::new(100, 64, 9, 9), 0, 100));
    assert_eq!(v, Verdict::Drop(DropReason::NoSession));
}

#[test]
fn dhcp_is_punted_and_arp_for_the_gateway_answered() {
    let mut p = vbng(0);
    let mut pool = Pool::new(64);
    let dhcp = FrameBuilder::eth([0xff; 6], SUB_MAC)
        .qinq(100, 7)
        .ipv4_with(Ipv4Repr::new(Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST, IpProto::UDP, 64))
        .udp(68, 67)
        .frame_len(342)
        .build();
    assert_eq!(one(&mut p, &mut pool, 0, dhcp).0, Verdict::Punt(PuntReason::ACTION));

    let req =
        FrameBuilder::eth([0xff; 6], SUB_MAC).qinq(100, 7).arp(ArpRepr::request(SUB_MAC, SUB_IP, Ipv4Addr::new(100, 64, 0, 1))).build();
    let (_, out) = one(&mut p, &mut pool, 0, req);
    assert_eq!(out.len(), 1);
    let (port, f) = &out[0];
    assert_eq!(*port, 0, "the reply goes back out of the access port");
    let e = hdr::Eth::parse(f).unwrap();
    assert_eq!((e.dst(), e.src()), (SUB_MAC, GW));
    let (outer, inner, len) = hdr::vlan::parse_tags(e.ethertype(), &f[14..]).unwrap();
    assert_eq!((outer.unwrap().vid(), inner.unwrap().vid()), (100, 7));
    let a = ArpRepr::from_view(&hdr::Arp::parse(&f[14 + len..]).unwrap());
    assert_eq!(a.op, hdr::ArpOp::REPLY);
    assert_eq!((a.sha, a.spa, a.tha, a.tpa), (GW, Ipv4Addr::new(100, 64, 0, 1), SUB_MAC, SUB_IP));

    // ARP for another address is not ours to answer.
    let other =
        FrameBuilder::eth([0xff; 6], SUB_MAC).qinq(100, 7).arp(ArpRepr::request(SUB_MAC, SUB_IP, Ipv4Addr::new(100, 64, 0, 9))).build();
    assert_eq!(one(&mut p, &mut pool, 0, other).0, Verdict::Drop(DropReason::NoRoute));
}

#[test]
fn untagged_and_single_tagged_access_frames_are_not_sessions() {
    let mut p = vbng(0);
    let mut pool = Pool::new(64);
    let r = Ipv4Repr::new(SUB_IP, SERVER, IpProto::UDP, 64);
    let untagged = FrameBuilder::eth(GW, SUB_MAC).ipv4_with(r.clone()).udp(1, 9).frame_len(100).build();
    assert_eq!(one(&mut p, &mut pool, 0, untagged).0, Verdict::Drop(DropReason::NoSession));
    // One tag only: treated as core traffic, whose destination is no subscriber.
    let single = FrameBuilder::eth(GW, SUB_MAC).vlan(100, 0).ipv4_with(r).udp(1, 9).frame_len(100).build();
    assert_eq!(one(&mut p, &mut pool, 0, single).0, Verdict::Drop(DropReason::NoSession));
    // S-VLAN and C-VLAN swapped: another identity.
    let (v, _) = send(&mut p, &mut pool, 0, &[up(SUB_IP, 7, 100, 9, 100), up(SUB_IP, 7, 100, 9, 100), up(SUB_IP, 7, 100, 9, 100)], 0);
    assert_eq!(v[2], Verdict::Drop(DropReason::NoSession));
}

#[test]
fn the_policer_colours_green_yellow_red() {
    let mut p = vbng(0);
    let mut pool = Pool::new(256);
    // CBS 3000, PBS 6000 bytes at t = 0: 1000-byte frames are green 3 times, yellow 3 more,
    // then red (dropped).
    let frames: Vec<Vec<u8>> = (0..8).map(|_| up(SUB_IP, 100, 7, 9, 1000)).collect();
    let (v, out) = send(&mut p, &mut pool, 0, &frames, 0);
    assert_eq!(out.len(), 6);
    assert_eq!(&v[6..], [Verdict::Drop(DropReason::MeterRed); 2]);
}

#[test]
fn the_class_acl_allows_only_the_profile_s_ports() {
    let mut p = vbng(1);
    let mut pool = Pool::new(64);
    let tcp = |dport| {
        let r = Ipv4Repr::new(SUB_IP, SERVER, IpProto::TCP, 64);
        FrameBuilder::eth(GW, SUB_MAC).qinq(100, 7).ipv4_with(r).tcp(40000, dport, hdr::TcpFlags::SYN, 1, 0).frame_len(100).build()
    };
    assert_eq!(one(&mut p, &mut pool, 0, tcp(443)).1.len(), 1);
    assert_eq!(one(&mut p, &mut pool, 0, tcp(22)).0, Verdict::Drop(DropReason::AclDeny));
    assert_eq!(one(&mut p, &mut pool, 0, up(SUB_IP, 100, 7, 53, 100)).0, Verdict::Drop(DropReason::AclDeny));
}

#[test]
fn voice_leaves_before_the_other_classes_of_the_subscriber() {
    let mut p = vbng(0);
    let mut pool = Pool::new(64);
    // One batch: best effort, AF11, AF41, EF. EF (class 3, strict) leaves first; the others
    // share by weight.
    let frames = [down(SUB_IP, 0, 200), down(SUB_IP, 10, 200), down(SUB_IP, 34, 200), down(SUB_IP, 46, 200)];
    let (_, out) = send(&mut p, &mut pool, 1, &frames, 0);
    assert_eq!(out.len(), 4);
    let dscp = |f: &[u8]| hdr::Ipv4::parse(&f[22..]).unwrap().dscp();
    assert_eq!(dscp(&out[0].1), 46);
    let tm = p.tm().unwrap();
    assert_eq!(tm.port_counters(0).unwrap().deq_pkts, 4);
}
