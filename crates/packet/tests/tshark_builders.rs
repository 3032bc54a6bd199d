//! FrameBuilder output checked by an independent dissector: tshark reads the frames with IPv4,
//! UDP and TCP checksum validation on, must report nothing malformed and no error-level expert
//! item, and must see the field values we asked for.
//!
//! Fails when tshark is missing and `CI` is set; otherwise skips with a notice.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{ArpRepr, IpProto, Ipv4Repr, Ipv6Frag, TcpFlags, TcpRepr, VXLAN_PORT};
use fastpath_packet::testutil::{self, assert_field, Fields};

const DMAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SMAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap_or(Ipv6Addr::UNSPECIFIED)
}

/// A fresh temp dir for this test process; removed by the caller.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fastpath-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("creating {}: {e}", d.display()));
    d
}

/// Writes `frames`, checks tshark finds them clean, returns the requested fields per frame.
fn check(name: &str, frames: &[Vec<u8>], fields: &[&str]) -> Option<Vec<Fields>> {
    if !testutil::tshark_or_skip(name) {
        return None;
    }
    let dir = temp_dir(name);
    let path = dir.join("frames.pcap");
    testutil::write_pcap(&path, frames).unwrap_or_else(|e| panic!("writing pcap: {e}"));
    let checked = testutil::tshark_check(&path, fields);
    let _ = std::fs::remove_dir_all(&dir);
    let (rows, problems) = checked.unwrap_or_else(|e| panic!("tshark: {e}"));
    assert!(problems.is_empty(), "{name}: tshark found problems:\n{}", problems.join("\n"));
    assert_eq!(rows.len(), frames.len(), "{name}: tshark saw a different number of frames");
    Some(rows)
}

#[test]
fn ipv4_udp_tcp_icmp() {
    let opts = TcpRepr {
        window: 29200,
        options: vec![2, 4, 0x05, 0xb4, 1, 3, 3, 7], // MSS 1460, NOP, window scale 7
        ..TcpRepr::new(40000, 80, TcpFlags::SYN, 1000, 0)
    };
    let tos = Ipv4Repr {
        ttl: 5,
        dscp: 46,
        ecn: 2,
        ident: 0x4242,
        dont_frag: true,
        options: vec![0x94, 0x04, 0x00, 0x00], // Router Alert (RFC 2113)
        ..Ipv4Repr::new(A, B, IpProto::UDP, 0)
    };
    let frames = vec![
        FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).udp(1024, 1025).frame_len(64).build(),
        FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).tcp_with(opts).payload(b"GET / HTTP/1.0\r\n\r\n").build(),
        FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).icmp_echo(0x1234, 7).payload(b"abcdefgh").build(),
        FrameBuilder::eth(DMAC, SMAC).ipv4_with(tos).udp(5000, 5001).payload(&[0x5a; 3]).frame_len(1518).build(),
        FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).tcp(1, 2, TcpFlags::FIN | TcpFlags::ACK, u32::MAX, 5).build(),
    ];
    let f = [
        "ip.src",
        "ip.dst",
        "ip.ttl",
        "ip.proto",
        "ip.len",
        "ip.dsfield.dscp",
        "ip.dsfield.ecn",
        "ip.id",
        "ip.checksum.status",
        "udp.srcport",
        "udp.dstport",
        "udp.length",
        "udp.checksum.status",
        "tcp.srcport",
        "tcp.dstport",
        "tcp.seq_raw",
        "tcp.ack_raw",
        "tcp.flags",
        "tcp.options.mss_val",
        "tcp.checksum.status",
        "tcp.len",
        "icmp.type",
        "icmp.ident",
        "icmp.seq",
        "icmp.checksum.status",
        "frame.len",
    ];
    let Some(r) = check("ipv4_udp_tcp_icmp", &frames, &f) else { return };
    // 0: UDP, 64 bytes.
    assert_field(&r, 0, "ip.src", &["198.18.0.1"]);
    assert_field(&r, 0, "ip.dst", &["198.19.0.1"]);
    assert_field(&r, 0, "ip.ttl", &["64"]);
    assert_field(&r, 0, "ip.proto", &["17"]);
    assert_field(&r, 0, "ip.len", &["50"]);
    assert_field(&r, 0, "ip.checksum.status", &["1"]);
    assert_field(&r, 0, "udp.srcport", &["1024"]);
    assert_field(&r, 0, "udp.dstport", &["1025"]);
    assert_field(&r, 0, "udp.length", &["30"]);
    assert_field(&r, 0, "udp.checksum.status", &["1"]);
    assert_field(&r, 0, "frame.len", &["64"]);
    // 1: TCP SYN with options and data.
    assert_field(&r, 1, "ip.proto", &["6"]);
    assert_field(&r, 1, "tcp.srcport", &["40000"]);
    assert_field(&r, 1, "tcp.dstport", &["80"]);
    assert_field(&r, 1, "tcp.seq_raw", &["1000"]);
    assert_field(&r, 1, "tcp.flags", &["0x0002"]);
    assert_field(&r, 1, "tcp.options.mss_val", &["1460"]);
    assert_field(&r, 1, "tcp.checksum.status", &["1"]);
    assert_field(&r, 1, "tcp.len", &["18"]);
    // 2: ICMP echo request.
    assert_field(&r, 2, "ip.proto", &["1"]);
    assert_field(&r, 2, "icmp.type", &["8"]);
    assert_field(&r, 2, "icmp.ident", &["4660"]);
    assert_field(&r, 2, "icmp.seq", &["7"]);
    assert_field(&r, 2, "icmp.checksum.status", &["1"]);
    // 3: IPv4 with options, DSCP/ECN, 1518 bytes.
    assert_field(&r, 3, "ip.ttl", &["5"]);
    assert_field(&r, 3, "ip.dsfield.dscp", &["46"]);
    assert_field(&r, 3, "ip.dsfield.ecn", &["2"]);
    assert_field(&r, 3, "ip.id", &["0x4242"]);
    assert_field(&r, 3, "ip.len", &["1504"]);
    assert_field(&r, 3, "ip.checksum.status", &["1"]);
    assert_field(&r, 3, "udp.checksum.status", &["1"]);
    assert_field(&r, 3, "frame.len", &["1518"]);
    // 4: FIN|ACK with extreme sequence number.
    assert_field(&r, 4, "tcp.flags", &["0x0011"]);
    assert_field(&r, 4, "tcp.seq_raw", &["4294967295"]);
    assert_field(&r, 4, "tcp.ack_raw", &["5"]);
    assert_field(&r, 4, "tcp.checksum.status", &["1"]);
}

#[test]
fn ipv6_with_extension_headers() {
    let (s, d) = (v6("2001:db8::1"), v6("2001:db8::2"));
    let frames = vec![
        FrameBuilder::eth(DMAC, SMAC)
            .ipv6(s, d)
            .ipv6_ext(IpProto::HOPOPT, &[1, 4, 0, 0, 0, 0]) // PadN
            .ipv6_ext(IpProto::DSTOPTS, &[1, 4, 0, 0, 0, 0])
            .udp(40000, 40001)
            .payload(b"query")
            .build(),
        FrameBuilder::eth(DMAC, SMAC).ipv6(s, d).icmp_echo(9, 10).payload(b"ping6").build(),
        FrameBuilder::eth(DMAC, SMAC).ipv6(s, d).tcp(443, 50000, TcpFlags::SYN | TcpFlags::ACK, 5, 1001).build(),
        FrameBuilder::eth(DMAC, SMAC)
            .ipv6(s, d)
            .ipv6_frag(Ipv6Frag { offset: 0, more: true, ident: 0xabcd })
            .udp(7, 7)
            .payload(&[0u8; 16])
            .build(),
    ];
    let f = [
        "ipv6.src",
        "ipv6.dst",
        "ipv6.nxt",
        "ipv6.hlim",
        "ipv6.plen",
        "udp.dstport",
        "udp.checksum.status",
        "icmpv6.type",
        "icmpv6.echo.identifier",
        "icmpv6.echo.sequence_number",
        "icmpv6.checksum.status",
        "tcp.flags",
        "tcp.checksum.status",
        "ipv6.fraghdr.ident",
        "ipv6.fraghdr.more",
        "ipv6.fraghdr.nxt",
    ];
    let Some(r) = check("ipv6_with_extension_headers", &frames, &f) else { return };
    assert_field(&r, 0, "ipv6.src", &["2001:db8::1"]);
    assert_field(&r, 0, "ipv6.dst", &["2001:db8::2"]);
    assert_field(&r, 0, "ipv6.nxt", &["0"]);
    assert_field(&r, 0, "ipv6.hlim", &["64"]);
    assert_field(&r, 0, "ipv6.plen", &["29"]);
    assert_field(&r, 0, "udp.dstport", &["40001"]);
    assert_field(&r, 0, "udp.checksum.status", &["1"]);
    assert_field(&r, 1, "ipv6.nxt", &["58"]);
    assert_field(&r, 1, "icmpv6.type", &["128"]);
    assert_field(&r, 1, "icmpv6.echo.identifier", &["0x0009"]);
    assert_field(&r, 1, "icmpv6.echo.sequence_number", &["10"]);
    assert_field(&r, 1, "icmpv6.checksum.status", &["1"]);
    assert_field(&r, 2, "tcp.flags", &["0x0012"]);
    assert_field(&r, 2, "tcp.checksum.status", &["1"]);
    assert_field(&r, 3, "ipv6.nxt", &["44"]);
    assert_field(&r, 3, "ipv6.fraghdr.ident", &["0x0000abcd"]);
    assert_field(&r, 3, "ipv6.fraghdr.more", &["1"]);
    assert_field(&r, 3, "ipv6.fraghdr.nxt", &["17"]);
}

#[test]
fn vlan_qinq_vxlan_arp() {
    let inner_a = Ipv4Addr::new(10, 0, 0, 1);
    let inner_b = Ipv4Addr::new(10, 0, 0, 2);
    let frames = vec![
        FrameBuilder::eth(DMAC, SMAC).vlan(100, 5).ipv4(A, B).udp(1, 2).frame_len(64).build(),
        FrameBuilder::eth(DMAC, SMAC).qinq(300, 42).ipv4(A, B).tcp(3, 4, TcpFlags::ACK, 1, 1).frame_len(128).build(),
        FrameBuilder::eth(DMAC, SMAC)
            .ipv4(A, B)
            .udp(49152, VXLAN_PORT)
            .vxlan(0x00ab_cdef)
            .inner_eth([2, 0, 0, 0, 1, 2], [2, 0, 0, 0, 1, 1])
            .ipv4(inner_a, inner_b)
            .udp(50000, 50001)
            .payload(b"inner")
            .build(),
        FrameBuilder::eth([0xff; 6], SMAC).arp(ArpRepr::request(SMAC, A, B)).frame_len(60).build(),
    ];
    let f = [
        "vlan.id",
        "vlan.priority",
        "vlan.etype",
        "ieee8021ad.id",
        "eth.type",
        "ip.src",
        "ip.dst",
        "ip.checksum.status",
        "udp.dstport",
        "udp.checksum.status",
        "tcp.checksum.status",
        "vxlan.vni",
        "vxlan.flags",
        "arp.opcode",
        "arp.src.proto_ipv4",
        "arp.dst.proto_ipv4",
        "arp.src.hw_mac",
    ];
    let Some(r) = check("vlan_qinq_vxlan_arp", &frames, &f) else { return };
    assert_field(&r, 0, "eth.type", &["0x8100"]);
    assert_field(&r, 0, "vlan.id", &["100"]);
    assert_field(&r, 0, "vlan.priority", &["5"]);
    assert_field(&r, 0, "vlan.etype", &["0x0800"]);
    assert_field(&r, 0, "udp.checksum.status", &["1"]);
    assert_field(&r, 1, "eth.type", &["0x88a8"]);
    assert_field(&r, 1, "ieee8021ad.id", &["300"]);
    assert_field(&r, 1, "vlan.id", &["42"]);
    assert_field(&r, 1, "vlan.etype", &["0x0800"]);
    assert_field(&r, 1, "tcp.checksum.status", &["1"]);
    assert_field(&r, 2, "vxlan.vni", &["11259375"]);
    assert_field(&r, 2, "ip.src", &["198.18.0.1", "10.0.0.1"]);
    assert_field(&r, 2, "ip.dst", &["198.19.0.1", "10.0.0.2"]);
    assert_field(&r, 2, "ip.checksum.status", &["1", "1"]);
    assert_field(&r, 2, "udp.dstport", &["4789", "50001"]);
    assert_field(&r, 2, "udp.checksum.status", &["1", "1"]);
    assert_field(&r, 3, "eth.type", &["0x0806"]);
    assert_field(&r, 3, "arp.opcode", &["1"]);
    assert_field(&r, 3, "arp.src.proto_ipv4", &["198.18.0.1"]);
    assert_field(&r, 3, "arp.dst.proto_ipv4", &["198.19.0.1"]);
    assert_field(&r, 3, "arp.src.hw_mac", &["02:00:00:00:00:01"]);
}

/// The checker itself must be able to fail: a frame with a broken IPv4 checksum is reported.
#[test]
fn tshark_reports_a_bad_checksum() {
    if !testutil::tshark_or_skip("tshark_reports_a_bad_checksum") {
        return;
    }
    let mut bad = FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).udp(1, 2).frame_len(64).build();
    bad[14 + 10] ^= 0xff; // IPv4 header checksum
    let mut bad_udp = FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).udp(1, 2).payload(b"x").build();
    bad_udp[14 + 20 + 6] ^= 0x01; // UDP checksum
    let dir = temp_dir("bad-checksum");
    let path = dir.join("bad.pcap");
    testutil::write_pcap(&path, &[bad, bad_udp]).unwrap_or_else(|e| panic!("{e}"));
    let problems = testutil::tshark_problems(&path, testutil::EXPERT_ERROR);
    let _ = std::fs::remove_dir_all(&dir);
    let problems = problems.unwrap_or_else(|e| panic!("{e}"));
    assert!(problems.iter().any(|p| p.starts_with("frame 1:")), "{problems:?}");
    assert!(problems.iter().any(|p| p.starts_with("frame 2:")), "{problems:?}");
}
