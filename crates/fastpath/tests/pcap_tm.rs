//! Packet-in / packet-out through `fastpath run` with a traffic manager (`[tm]`), on pcap ports:
//! strict priority reorders a batch, WRED marks ECN-capable packets CE and drops Not-ECT ones,
//! and the run prints the `tm` row and the queue table. tshark checks what we wrote: DSCP and
//! ECN fields, valid IPv4 checksums after the CE rewrite, nothing malformed.

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{IpProto, Ipv4Repr};
use fastpath_packet::testutil::{assert_clean, tshark_fields, tshark_or_skip, write_pcap};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;

const SPEC: &str = r#"
name = "tm-pcap"
[parser]
headers = ["eth", "ipv4", "udp"]
[control]
ingress = "forward 1"

[tm]
[tm.dscp]
46 = 7

[[tm.class]]
class = 0
wred = "ecn"

[[tm.wred]]
name = "ecn"
min_bytes = 1
max_bytes = 40000
maxp_inv = 1
weight_log2 = 1
"#;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fastpath-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn frame(dscp: u8, ecn: u8, len: usize, seq: u16) -> Vec<u8> {
    let mut r = Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), IpProto::UDP, 0);
    r.dscp = dscp;
    r.ecn = ecn;
    FrameBuilder::eth([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1]).ipv4_with(r).udp(1000 + seq, 9).frame_len(len).build()
}

#[test]
fn priority_wred_and_ecn_marks_checked_by_tshark() {
    let d = tmp("tm");
    let spec = d.join("tm.toml");
    std::fs::write(&spec, SPEC).unwrap();
    // 64 frames (one received batch): even ones DSCP 46 (class 7, strict), odd ones DSCP 0
    // (class 0, WRED): three of four ECT(0), one Not-ECT.
    let frames: Vec<Vec<u8>> =
        (0..64u16).map(|k| if k % 2 == 0 { frame(46, 0, 200, k) } else { frame(0, if k % 8 == 7 { 0 } else { 2 }, 1000, k) }).collect();
    let input = d.join("in.pcap");
    write_pcap(&input, &frames).unwrap();
    let output = d.join("out.pcap");
    let out = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["run", &spec.display().to_string(), "--port", &format!("in=pcap:{}", input.display())])
        .args(["--port", &format!("out=pcap::{}", output.display())])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let num =
        |prefix: &str| -> u64 { text.lines().find_map(|l| l.trim().strip_prefix(prefix)).and_then(|v| v.trim().parse().ok()).unwrap_or(0) };
    let wred_drops = num("tm/tm_wred:");
    assert!(wred_drops > 0, "Not-ECT packets in the marking region are dropped:\n{text}");
    assert!(text.contains("port  class") && text.contains("refused by reason:"), "the queue table is printed:\n{text}");
    let class0 =
        text.lines().find(|l| l.split_whitespace().take(2).eq(["1", "0"])).unwrap_or_else(|| panic!("no port 1 class 0 row:\n{text}"));
    let cols: Vec<u64> = class0.split_whitespace().map(|c| c.parse().unwrap()).collect();
    let (deq, drops, marks) = (cols[4], cols[6], cols[7]);
    assert_eq!(deq + drops, 32, "every class-0 packet left or was refused:\n{text}");
    assert_eq!(drops, wred_drops);
    if !tshark_or_skip("priority_wred_and_ecn_marks_checked_by_tshark") {
        return;
    }
    assert_clean(&output);
    let rows = tshark_fields(&output, &["ip.dsfield.dscp", "ip.dsfield.ecn", "ip.checksum.status", "udp.srcport"]).unwrap();
    assert_eq!(rows.len() as u64, 64 - wred_drops);
    for r in &rows {
        assert_eq!(r["ip.checksum.status"], vec!["1"], "the IPv4 checksum must verify (tshark: 1 = good): {r:?}");
    }
    // All 64 arrive in one batch, so its 32 class-7 frames leave before any class-0 frame.
    let dscp: Vec<&str> = rows.iter().map(|r| r["ip.dsfield.dscp"][0].as_str()).collect();
    assert!(dscp[..32].iter().all(|d| *d == "46"), "strict priority first: {dscp:?}");
    assert!(dscp[32..].iter().all(|d| *d == "0"), "{dscp:?}");
    let ce = rows.iter().filter(|r| r["ip.dsfield.ecn"] == vec!["3"]).count() as u64;
    assert!(ce > 0 && ce == marks, "{ce} CE frames on the wire, {marks} marks counted:\n{text}");
    let not_ect_left = rows.iter().filter(|r| r["ip.dsfield.dscp"] == vec!["0"] && r["ip.dsfield.ecn"] == vec!["0"]).count();
    assert_eq!(not_ect_left as u64 + wred_drops, 8, "Not-ECT frames are never marked, only kept or dropped");
}
