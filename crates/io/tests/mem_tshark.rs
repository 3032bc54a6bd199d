//! The mem source's frames, written through `PcapSink`, read by tshark (an independent
//! dissector) with IPv4/UDP/TCP checksum validation on: no malformed frame, no error, and the
//! fields each flow should have. Also checks that `PcapSink` writes files tshark reads.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use fastpath_io::mem::{Encap, FrameSizes, MemSource, ProtoMix, TrafficProfile, L4};
use fastpath_io::pcap::{PcapSink, SinkClock};
use fastpath_io::worker::{RunEnd, TxAll, Worker};
use fastpath_io::Port;
use fastpath_packet::testutil;
use fastpath_packet::Pool;

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("io-mem-tshark");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Runs `pkts` packets of `p` through a worker into a pcap file (fresh pool: payloads are zero,
/// so L4 checksums over them verify).
fn capture(p: &TrafficProfile, pkts: u64, name: &str) -> PathBuf {
    let path = tmp(name);
    let ports: Vec<Box<dyn Port>> = vec![
        Box::new(MemSource::new("gen", p).unwrap().with_limit(pkts)),
        Box::new(PcapSink::create("out", &path).unwrap().with_clock(SinkClock::Sequence)),
    ];
    let mut w = Worker::new(Pool::new(4096), ports, TxAll(1));
    assert_eq!(w.run_until_exhausted(), RunEnd::Exhausted);
    assert_eq!(w.stats().tx_pkts, pkts);
    path
}

fn flat(rows: &[testutil::Fields], k: usize, field: &str) -> Vec<String> {
    rows[k].get(field).cloned().unwrap_or_default()
}

#[test]
fn protocol_mix_is_clean_and_matches_the_flows() {
    if !testutil::tshark_or_skip("protocol_mix_is_clean_and_matches_the_flows") {
        return;
    }
    let mix = ProtoMix { udp: 2, tcp: 1, icmp: 1, ipv6_percent: 30, ..Default::default() };
    let p = TrafficProfile { flows: 40, frame_sizes: FrameSizes::Imix, proto: mix, seed: 11, ..Default::default() };
    let path = capture(&p, 120, "mix.pcap");
    testutil::assert_clean(&path);
    let rows = testutil::tshark_fields(
        &path,
        &[
            "frame.len",
            "ip.src",
            "ipv6.src",
            "ip.dst",
            "ipv6.dst",
            "udp.srcport",
            "tcp.srcport",
            "tcp.dstport",
            "icmp.ident",
            "icmpv6.echo.identifier",
        ],
    )
    .unwrap();
    assert_eq!(rows.len(), 120);
    let sizes = FrameSizes::Imix.sequence();
    for (k, _) in rows.iter().enumerate() {
        let f = p.flow(k as u32 % 40);
        // A frame is never shorter than its headers (IPv6 + TCP needs 74 bytes).
        let l3 = if f.src.is_ipv4() { 20 } else { 40 };
        let l4 = if f.l4 == L4::Tcp { 20 } else { 8 };
        let want = sizes[k % 12].max(14 + l3 + l4);
        assert_eq!(flat(&rows, k, "frame.len"), vec![want.to_string()], "frame {k}");
        let (src, dst) = (f.src.to_string(), f.dst.to_string());
        if f.src.is_ipv4() {
            assert_eq!(flat(&rows, k, "ip.src"), vec![src]);
            assert_eq!(flat(&rows, k, "ip.dst"), vec![dst]);
        } else {
            assert_eq!(flat(&rows, k, "ipv6.src"), vec![src]);
            assert_eq!(flat(&rows, k, "ipv6.dst"), vec![dst]);
        }
        match f.l4 {
            L4::Udp => assert_eq!(flat(&rows, k, "udp.srcport"), vec![f.src_port.to_string()]),
            L4::Tcp => {
                assert_eq!(flat(&rows, k, "tcp.srcport"), vec![f.src_port.to_string()]);
                assert_eq!(flat(&rows, k, "tcp.dstport"), vec![f.dst_port.to_string()]);
            }
            L4::Icmp => {
                let field = if f.src.is_ipv4() { "icmp.ident" } else { "icmpv6.echo.identifier" };
                let got = flat(&rows, k, field);
                assert!(
                    got.iter().any(|v| v == &f.src_port.to_string() || v.contains(&format!("0x{:04x}", f.src_port))),
                    "frame {k}: {got:?}"
                );
            }
        }
    }
}

#[test]
fn qinq_is_clean_and_tagged_per_subscriber() {
    if !testutil::tshark_or_skip("qinq_is_clean_and_tagged_per_subscriber") {
        return;
    }
    let qinq = TrafficProfile {
        flows: 8,
        frame_sizes: FrameSizes::Fixed(128),
        proto: ProtoMix { encap: Encap::QinQ { s_vid: 100, c_vid: 10, c_per_s: 4 }, ..Default::default() },
        ..Default::default()
    };
    let path = capture(&qinq, 8, "qinq.pcap");
    testutil::assert_clean(&path);
    // tshark names the 802.1ad service tag `ieee8021ad` and the customer tag `vlan`.
    let rows = testutil::tshark_fields(&path, &["ieee8021ad.id", "vlan.id"]).unwrap();
    assert_eq!(rows.len(), 8);
    for (k, _) in rows.iter().enumerate() {
        let (s, c) = (100 + k / 4, 10 + k % 4);
        assert_eq!(flat(&rows, k, "ieee8021ad.id"), vec![s.to_string()]);
        assert_eq!(flat(&rows, k, "vlan.id"), vec![c.to_string()]);
    }
}

#[test]
fn vxlan_is_clean_with_outer_and_inner_headers() {
    if !testutil::tshark_or_skip("vxlan_is_clean_with_outer_and_inner_headers") {
        return;
    }
    let vx = TrafficProfile {
        flows: 6,
        frame_sizes: FrameSizes::Fixed(160),
        proto: ProtoMix {
            tcp: 1,
            udp: 1,
            encap: Encap::Vxlan {
                vni: 7000,
                vnis: 2,
                outer_src_mac: [2, 0, 0, 0, 9, 1],
                outer_dst_mac: [2, 0, 0, 0, 9, 2],
                outer_src: Ipv4Addr::new(198, 18, 200, 1),
                outer_dst: Ipv4Addr::new(198, 19, 200, 1),
            },
            ..Default::default()
        },
        ..Default::default()
    };
    let path = capture(&vx, 6, "vxlan.pcap");
    testutil::assert_clean(&path);
    let rows = testutil::tshark_fields(&path, &["vxlan.vni", "ip.src", "frame.len"]).unwrap();
    assert_eq!(rows.len(), 6);
    for (k, _) in rows.iter().enumerate() {
        let f = vx.flow(k as u32);
        assert_eq!(flat(&rows, k, "vxlan.vni"), vec![(7000 + k % 2).to_string()]);
        assert_eq!(flat(&rows, k, "ip.src"), vec!["198.18.200.1".to_string(), f.src.to_string()], "outer then inner");
        assert_eq!(flat(&rows, k, "frame.len"), vec!["160".to_string()]);
    }
}
