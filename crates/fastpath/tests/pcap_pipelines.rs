//! Packet-in / packet-out through `fastpath run` with pcap ports, for the reference pipelines
//! `l2fwd` and `router`. Inputs are built with `FrameBuilder`; the outputs are checked by an
//! independent dissector — tshark with IP/UDP/TCP checksum validation on: nothing malformed,
//! no error-level expert items, and the field values we expect — and the per-stage drop
//! counters the run prints are checked exactly.
//!
//! The router input is also committed as `testdata/pcap/router-in.pcap` (for the README tour);
//! a test fails if it drifts from what `router_frames()` builds (regenerate with
//! `FASTPATH_REGEN_TESTDATA=1`).

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{ArpRepr, IpProto, Ipv4Repr, TcpFlags};
use fastpath_packet::testutil::{assert_clean, tshark_fields, tshark_or_skip, write_pcap};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

const HOST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const ROUTER: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fastpath-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn v4(src: &str, dst: &str, ttl: u8, proto: IpProto) -> Ipv4Repr {
    let mut r = Ipv4Repr::new(src.parse().unwrap(), dst.parse().unwrap(), proto, 0);
    r.ttl = ttl;
    r
}

/// The router test traffic, in order, with where each frame must go.
fn router_frames() -> Vec<(Vec<u8>, &'static str)> {
    let mut bad =
        FrameBuilder::eth(ROUTER, HOST).ipv4_with(v4("10.1.1.1", "198.19.0.1", 64, IpProto::UDP)).udp(1000, 53).frame_len(64).build();
    bad[14 + 10] ^= 0x5a; // corrupt the IPv4 header checksum
    vec![
        (
            FrameBuilder::eth(ROUTER, HOST).ipv4_with(v4("10.1.1.1", "198.19.7.7", 64, IpProto::UDP)).udp(1000, 53).frame_len(64).build(),
            "p1",
        ),
        (
            FrameBuilder::eth(ROUTER, HOST).ipv4_with(v4("10.1.1.1", "198.18.5.9", 64, IpProto::UDP)).udp(1000, 53).frame_len(128).build(),
            "p2",
        ),
        (FrameBuilder::eth(ROUTER, HOST).ipv4_with(v4("10.1.1.1", "198.19.0.1", 1, IpProto::UDP)).udp(1000, 53).build(), "ttl_expired"),
        (FrameBuilder::eth(ROUTER, HOST).ipv4_with(v4("10.1.1.1", "203.0.113.1", 64, IpProto::UDP)).udp(1000, 53).build(), "no_route"),
        (bad, "ipv4_bad_checksum"),
        (
            FrameBuilder::eth(ROUTER, HOST)
                .ipv4_with(v4("198.18.0.7", "10.9.9.9", 9, IpProto::TCP))
                .tcp(40000, 80, TcpFlags::SYN, 7, 0)
                .build(),
            "p1",
        ),
        (
            FrameBuilder::eth(ROUTER, HOST)
                .ipv4_with(v4("198.18.0.7", "198.19.1.1", 64, IpProto::ICMP))
                .icmp_echo(9, 1)
                .payload(b"ping")
                .build(),
            "p1",
        ),
        (FrameBuilder::eth(ROUTER, HOST).vlan(42, 0).ipv4_with(v4("10.1.1.1", "198.18.5.200", 64, IpProto::UDP)).udp(7, 9).build(), "p2"),
        (
            FrameBuilder::eth(ROUTER, HOST)
                .ipv6("2001:2::1".parse::<Ipv6Addr>().unwrap(), "2001:2:0:77::1".parse().unwrap())
                .udp(5000, 6000)
                .payload(b"six")
                .build(),
            "p3",
        ),
        (
            FrameBuilder::eth([0xff; 6], HOST)
                .arp(ArpRepr::request(HOST, Ipv4Addr::new(198, 18, 0, 7), Ipv4Addr::new(198, 18, 0, 1)))
                .build(),
            "not_ip",
        ),
    ]
}

fn fastpath(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_fastpath")).args(args).current_dir(root()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "fastpath {args:?} failed:\n{text}");
    text
}

#[test]
fn committed_router_input_matches_its_builder() {
    let path = root().join("testdata/pcap/router-in.pcap");
    let frames: Vec<Vec<u8>> = router_frames().into_iter().map(|f| f.0).collect();
    if std::env::var_os("FASTPATH_REGEN_TESTDATA").is_some() {
        write_pcap(&path, &frames).unwrap();
    }
    let d = tmp("regen");
    write_pcap(&d.join("x.pcap"), &frames).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        std::fs::read(d.join("x.pcap")).unwrap(),
        "testdata/pcap/router-in.pcap drifted from router_frames()"
    );
}

#[test]
fn router_pcap_in_pcap_out_checked_by_tshark() {
    let d = tmp("router");
    let input = d.join("in.pcap");
    let frames = router_frames();
    write_pcap(&input, &frames.iter().map(|f| f.0.clone()).collect::<Vec<_>>()).unwrap();
    let outs: Vec<PathBuf> = (1..=3).map(|k| d.join(format!("out{k}.pcap"))).collect();
    let ports = [
        format!("p0=pcap:{}", input.display()),
        format!("p1=pcap::{}", outs[0].display()),
        format!("p2=pcap::{}", outs[1].display()),
        format!("p3=pcap::{}", outs[2].display()),
    ];
    let mut args = vec!["run", "pipelines/router.toml", "--entries", "testdata/routes/small.txt", "--trace", "2"];
    for p in &ports {
        args.extend(["--port", p.as_str()]);
    }
    let text = fastpath(&args);
    // Exact per-stage drop counters.
    for line in ["ttl-dec/ttl_expired: 1", "fib4/no_route: 1", "parser/ipv4_bad_checksum: 1", "drop/not_ip: 1"] {
        assert!(text.contains(line), "missing '{line}' in:\n{text}");
    }
    assert!(text.contains("Packet 1") && text.contains("fib4: key ipv4.dst=198.19.7.7 -> hit action nexthop"), "trace:\n{text}");
    let want = |port: &str| frames.iter().filter(|f| f.1 == port).count();
    if !tshark_or_skip("router_pcap_in_pcap_out_checked_by_tshark") {
        return;
    }
    for (k, out) in outs.iter().enumerate() {
        assert_clean(out);
        let rows = tshark_fields(
            out,
            &["eth.dst", "eth.src", "ip.ttl", "ip.checksum.status", "udp.checksum.status", "tcp.checksum.status", "ipv6.hlim", "vlan.id"],
        )
        .unwrap();
        assert_eq!(rows.len(), want(&format!("p{}", k + 1)), "frames out of port {}", k + 1);
        for r in &rows {
            assert_eq!(r["eth.dst"], vec![format!("02:00:00:00:01:0{}", k + 1)]);
            assert_eq!(r["eth.src"], vec!["02:00:00:00:00:01".to_string()]);
            for c in ["ip.checksum.status", "udp.checksum.status", "tcp.checksum.status"] {
                assert!(r[c].iter().all(|s| s == "1"), "{c} not good (tshark: 1 = good) in {r:?}");
            }
        }
        match k {
            0 => assert_eq!(rows.iter().map(|r| r["ip.ttl"].clone()).collect::<Vec<_>>(), vec![vec!["63"], vec!["8"], vec!["63"]]),
            1 => {
                assert!(rows.iter().all(|r| r["ip.ttl"] == vec!["63"]));
                assert_eq!(rows[1]["vlan.id"], vec!["42"], "the VLAN tag is kept");
            }
            _ => assert_eq!(rows[0]["ipv6.hlim"], vec!["63"]),
        }
    }
}

#[test]
fn l2fwd_pcap_in_pcap_out_checked_by_tshark() {
    let d = tmp("l2fwd");
    let (a, b) = ([0x02, 0, 0, 0, 0, 0xaa], [0x02, 0, 0, 0, 0, 0xbb]);
    let frames: Vec<Vec<u8>> = (0..8u16)
        .map(|k| {
            FrameBuilder::eth(b, a)
                .ipv4("198.18.0.1".parse().unwrap(), "198.19.0.1".parse().unwrap())
                .udp(1000 + k, 9)
                .frame_len(64 + usize::from(k) * 100)
                .build()
        })
        .collect();
    let (in0, in1, out0, out1) = (d.join("in0.pcap"), d.join("in1.pcap"), d.join("out0.pcap"), d.join("out1.pcap"));
    write_pcap(&in0, &frames[..5]).unwrap();
    write_pcap(&in1, &frames[5..]).unwrap();
    let entries = d.join("pairs.txt");
    std::fs::write(&entries, "table port_pair add 0 => forward(1)\ntable port_pair add 1 => forward(0)\n").unwrap();
    let p0 = format!("p0=pcap:{}:{}", in0.display(), out0.display());
    let p1 = format!("p1=pcap:{}:{}", in1.display(), out1.display());
    let text = fastpath(&["run", "pipelines/l2fwd.toml", "--entries", entries.to_str().unwrap(), "--port", &p0, "--port", &p1]);
    assert!(text.contains("port 1 p1"), "{text}");
    if !tshark_or_skip("l2fwd_pcap_in_pcap_out_checked_by_tshark") {
        return;
    }
    for (out, n, first) in [(&out1, 5usize, 0u16), (&out0, 3, 5)] {
        assert_clean(out);
        let rows = tshark_fields(out, &["eth.dst", "eth.src", "udp.srcport", "frame.len", "udp.checksum.status"]).unwrap();
        assert_eq!(rows.len(), n);
        for (k, r) in rows.iter().enumerate() {
            assert_eq!(r["eth.dst"], vec!["02:00:00:00:00:aa"], "MACs swapped");
            assert_eq!(r["eth.src"], vec!["02:00:00:00:00:bb"]);
            assert_eq!(r["udp.srcport"], vec![(1000 + first + k as u16).to_string()], "order and payload kept");
            assert_eq!(r["frame.len"], vec![(64 + usize::from(first + k as u16) * 100).to_string()]);
            assert_eq!(r["udp.checksum.status"], vec!["1"], "tshark: 1 = good");
        }
    }
}

#[test]
fn a_damaged_capture_is_reported_and_what_came_before_is_still_written() {
    let d = tmp("damaged");
    let input = d.join("in.pcap");
    let frames: Vec<Vec<u8>> = router_frames().into_iter().map(|f| f.0).take(2).collect();
    write_pcap(&input, &frames).unwrap();
    let mut bytes = std::fs::read(&input).unwrap();
    bytes.truncate(bytes.len() - 20); // cut the last record short
    std::fs::write(&input, bytes).unwrap();
    let out = d.join("out.pcap");
    let o = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .current_dir(root())
        .args(["run", "pipelines/router.toml", "--entries", "testdata/routes/small.txt"])
        .args(["--port", &format!("p0=pcap:{}", input.display()), "--port", &format!("p1=pcap::{}", out.display())])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("truncated"), "{err}");
    let got = std::fs::read(&out).unwrap();
    assert!(got.len() > 24 + 16, "the first frame was processed and written");
}
