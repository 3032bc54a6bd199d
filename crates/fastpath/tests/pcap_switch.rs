//! `pipelines/switch-acl.toml` through `fastpath run` on four pcap ports, checked by tshark:
//! an unknown destination and a broadcast ARP are flooded to every other port, the answers go
//! only to the learned port, an ACL deny and a DSCP rewrite apply, and nothing we wrote is
//! malformed. (Ageing is tested in virtual time in `crates/pipeline/tests/switch.rs`.)

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{ArpRepr, TcpFlags};
use fastpath_packet::testutil::{assert_clean, tshark_fields, tshark_or_skip, write_pcap};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

fn mac(n: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, n]
}

fn udp(dst: [u8; 6], src: [u8; 6], dport: u16) -> Vec<u8> {
    FrameBuilder::eth(dst, src).ipv4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)).udp(1000, dport).frame_len(120).build()
}

#[test]
fn switch_acl_floods_learns_and_filters_checked_by_tshark() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let d = std::env::temp_dir().join(format!("fastpath-test-{}-switch", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let arp = FrameBuilder::eth([0xff; 6], mac(0xa))
        .arp(ArpRepr::request(mac(0xa), Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)))
        .build();
    let telnet = FrameBuilder::eth(mac(0xb), mac(0xa))
        .ipv4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
        .tcp(40000, 23, TcpFlags::SYN, 1, 0)
        .build();
    // Port 0 (A) is read first: to unknown B, a broadcast ARP, and a SIP packet that port 0's
    // rule rewrites to EF (DSCP 46, class 7, so it leaves first). Then port 1 (B) answers A,
    // port 2 (C) writes to A, and port 3 (D) sends a denied telnet SYN and a SIP packet that no
    // rule of port 3 rewrites.
    let inputs: [Vec<Vec<u8>>; 4] = [
        vec![udp(mac(0xb), mac(0xa), 9), arp, udp(mac(0xb), mac(0xa), 5060)],
        vec![udp(mac(0xa), mac(0xb), 9)],
        vec![udp(mac(0xa), mac(0xc), 9)],
        vec![telnet, udp(mac(0xb), mac(0xd), 5060)],
    ];
    let mut args: Vec<String> =
        vec!["run".into(), "pipelines/switch-acl.toml".into(), "--entries".into(), "testdata/switch-acl/acl24.txt".into()];
    let mut outs: Vec<PathBuf> = Vec::new();
    for (k, frames) in inputs.iter().enumerate() {
        let (i, o) = (d.join(format!("in{k}.pcap")), d.join(format!("out{k}.pcap")));
        write_pcap(&i, frames).unwrap();
        args.extend(["--port".into(), format!("p{k}=pcap:{}:{}", i.display(), o.display())]);
        outs.push(o);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fastpath")).args(&args).current_dir(&root).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("acl/acl_deny: 1"), "{text}");
    if !tshark_or_skip("switch_acl_floods_learns_and_filters_checked_by_tshark") {
        return;
    }
    let rows = |k: usize| {
        assert_clean(&outs[k]);
        tshark_fields(&outs[k], &["eth.dst", "eth.src", "arp.opcode", "ip.dsfield.dscp", "ip.checksum.status", "udp.dstport"]).unwrap()
    };
    let src = |r: &fastpath_packet::testutil::Fields| r["eth.src"][0].clone();
    // Port 0 gets B's and C's frames to A (A was learned on port 0).
    let p0 = rows(0);
    assert_eq!(p0.iter().map(src).collect::<Vec<_>>(), ["02:00:00:00:00:0b", "02:00:00:00:00:0c"]);
    // Ports 1, 2 and 3 get A's three frames flooded: the rewritten SIP packet first (strict
    // class 7, DSCP 46, checksum still valid), then the unknown unicast and the ARP broadcast.
    for k in [1, 2, 3] {
        let r = rows(k);
        assert_eq!((r[0]["udp.dstport"][0].as_str(), r[0]["ip.dsfield.dscp"][0].as_str()), ("5060", "46"), "port {k}: {r:?}");
        assert_eq!(r[0]["ip.checksum.status"], vec!["1"]);
        assert_eq!((r[1]["eth.dst"][0].as_str(), r[1]["udp.dstport"][0].as_str()), ("02:00:00:00:00:0b", "9"), "port {k}");
        assert_eq!(r[2]["eth.dst"], vec!["ff:ff:ff:ff:ff:ff"], "port {k}: broadcast flooded");
        assert_eq!(r[2]["arp.opcode"], vec!["1"]);
    }
    // Port 1 (B) also gets D's SIP packet, B being learned there: port 3 has no rewrite rule.
    let p1 = rows(1);
    assert_eq!(p1.len(), 4, "{p1:?}");
    assert_eq!((p1[3]["udp.dstport"][0].as_str(), p1[3]["ip.dsfield.dscp"][0].as_str()), ("5060", "0"));
    assert_eq!(rows(2).len(), 3);
    // Port 3 gets the flood from A and nothing else: D's telnet SYN was denied.
    assert_eq!(rows(3).len(), 3);
}
