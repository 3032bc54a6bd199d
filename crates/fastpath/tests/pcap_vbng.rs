//! `pipelines/vbng.toml` through `fastpath run` on pcap ports, checked by tshark: the access
//! port (Q-in-Q subscribers), the core port (VLAN 10) and a punt port to the control plane.
//! A subscriber's frame leaves to the core with one core tag and valid checksums; a spoofed one
//! is dropped; DHCP and an unknown subscriber's frame are punted whole; ARP for the gateway is
//! answered inside the subscriber's two tags; downstream frames get the S-tag (802.1ad) and the
//! C-tag, voice first; an unknown destination is dropped. Every branch on in-memory frames is in
//! `crates/pipeline/tests/vbng.rs`.

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{ArpRepr, IpProto, Ipv4Repr};
use fastpath_packet::testutil::{assert_clean, tshark_fields, tshark_or_skip, write_pcap};
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

const GW: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 1];
const CORE: [u8; 6] = [0x02, 0xc0, 0, 0, 0, 1];

fn sub_mac(n: u8) -> [u8; 6] {
    [0x02, 0x5b, 0, 0, 0, n]
}

fn up(n: u8, src: Ipv4Addr) -> Vec<u8> {
    FrameBuilder::eth(GW, sub_mac(n)).qinq(100, u16::from(n)).ipv4(src, Ipv4Addr::new(198, 18, 0, 5)).udp(40000, 9).frame_len(200).build()
}

fn down(dst: Ipv4Addr, dscp: u8) -> Vec<u8> {
    let mut r = Ipv4Repr::new(Ipv4Addr::new(198, 18, 0, 5), dst, IpProto::UDP, 64);
    r.dscp = dscp;
    FrameBuilder::eth(GW, CORE).vlan(10, 0).ipv4_with(r).udp(9, 40000).frame_len(300).build()
}

/// A DHCPDISCOVER (RFC 2131 §2: BOOTP header, magic cookie, option 53 = 1, end).
fn discover(chaddr: [u8; 6]) -> Vec<u8> {
    let mut m = vec![0u8; 236];
    m[..4].copy_from_slice(&[1, 1, 6, 0]); // BOOTREQUEST, Ethernet, 6-byte address, 0 hops
    m[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes()); // xid
    m[10] = 0x80; // broadcast flag
    m[28..34].copy_from_slice(&chaddr);
    m.extend_from_slice(&[99, 130, 83, 99, 53, 1, 1, 255]);
    m
}

#[test]
fn vbng_sessions_punts_arp_and_hqos_checked_by_tshark() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let d = std::env::temp_dir().join(format!("fastpath-test-{}-vbng", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let dhcp = FrameBuilder::eth([0xff; 6], sub_mac(9))
        .qinq(100, 9)
        .ipv4_with(Ipv4Repr::new(Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST, IpProto::UDP, 64))
        .udp(68, 67)
        .payload(&discover(sub_mac(9)))
        .build();
    let arp = FrameBuilder::eth([0xff; 6], sub_mac(7))
        .qinq(100, 7)
        .arp(ArpRepr::request(sub_mac(7), Ipv4Addr::new(100, 64, 1, 7), Ipv4Addr::new(100, 64, 0, 1)))
        .build();
    let access = vec![
        up(7, Ipv4Addr::new(100, 64, 1, 7)),
        up(7, Ipv4Addr::new(100, 64, 1, 99)), // spoofed
        dhcp,
        arp,
        up(9, Ipv4Addr::new(100, 64, 1, 9)), // no session: punted within the limit
    ];
    let core = vec![down(Ipv4Addr::new(100, 64, 1, 8), 0), down(Ipv4Addr::new(100, 64, 1, 8), 46), down(Ipv4Addr::new(100, 64, 9, 9), 0)];
    let names = ["access", "core", "cp"];
    let inputs = [access, core, Vec::new()];
    let mut args: Vec<String> =
        ["run", "pipelines/vbng.toml", "--entries", "testdata/vbng/demo.txt", "--punt", "cp"].iter().map(|s| s.to_string()).collect();
    let mut outs = Vec::new();
    for (name, frames) in names.iter().zip(&inputs) {
        let (i, o) = (d.join(format!("{name}-in.pcap")), d.join(format!("{name}-out.pcap")));
        write_pcap(&i, frames).unwrap();
        args.extend(["--port".into(), format!("{name}=pcap:{}:{}", i.display(), o.display())]);
        outs.push(o);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_fastpath")).args(&args).current_dir(&root).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("spoofed_source: 1"), "{text}");
    assert!(text.contains("no_session: 1"), "{text}");
    if !tshark_or_skip("vbng_sessions_punts_arp_and_hqos_checked_by_tshark") {
        return;
    }
    let fields = [
        "eth.dst",
        "eth.src",
        "ieee8021ad.id",
        "vlan.id",
        "arp.opcode",
        "arp.src.proto_ipv4",
        "ip.src",
        "ip.dst",
        "ip.ttl",
        "ip.dsfield.dscp",
        "ip.checksum.status",
        "udp.checksum.status",
        "dhcp.option.dhcp",
        "frame.protocols",
    ];
    let rows = |k: usize| {
        assert_clean(&outs[k]);
        tshark_fields(&outs[k], &fields).unwrap()
    };
    let one = |r: &fastpath_packet::testutil::Fields, f: &str| r[f].first().cloned().unwrap_or_default();

    // Core: subscriber 7's frame, its two tags replaced by the core VLAN, routed (TTL 63),
    // checksums valid (tshark: 1 = good).
    let c = rows(1);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!((one(&c[0], "eth.dst"), one(&c[0], "eth.src")), ("02:c0:00:00:00:01".into(), "02:fa:00:00:00:01".into()));
    assert_eq!(c[0]["vlan.id"], ["10"]);
    assert!(c[0]["ieee8021ad.id"].is_empty());
    assert_eq!((one(&c[0], "ip.src"), one(&c[0], "ip.ttl")), ("100.64.1.7".into(), "63".into()));
    assert_eq!((one(&c[0], "ip.checksum.status"), one(&c[0], "udp.checksum.status")), ("1".into(), "1".into()));

    // Access: the ARP reply inside subscriber 7's tags, then subscriber 8's downstream frames
    // with its S-tag and C-tag, voice (EF) first.
    let a = rows(0);
    assert_eq!(a.len(), 3, "{a:?}");
    assert_eq!((one(&a[0], "arp.opcode"), one(&a[0], "arp.src.proto_ipv4")), ("2".into(), "100.64.0.1".into()));
    assert_eq!((a[0]["ieee8021ad.id"].clone(), a[0]["vlan.id"].clone()), (vec!["100".to_string()], vec!["7".to_string()]));
    assert_eq!(one(&a[0], "eth.dst"), "02:5b:00:00:00:07");
    for (r, dscp) in a[1..].iter().zip(["46", "0"]) {
        assert_eq!(one(r, "eth.dst"), "02:5b:00:00:00:08");
        assert_eq!((r["ieee8021ad.id"].clone(), r["vlan.id"].clone()), (vec!["100".to_string()], vec!["8".to_string()]));
        assert_eq!((one(r, "ip.dsfield.dscp"), one(r, "ip.ttl")), (dscp.to_string(), "63".to_string()));
        assert_eq!(one(r, "ip.checksum.status"), "1");
        assert!(one(r, "frame.protocols").starts_with("eth:ethertype:ieee8021ad:ethertype:vlan:ethertype:ip:udp"), "{r:?}");
    }

    // Control plane: the DHCP DISCOVER's frame and the unknown subscriber's, whole, tags and all.
    let p = rows(2);
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(p[0]["vlan.id"], ["9"]);
    assert_eq!(one(&p[0], "eth.dst"), "ff:ff:ff:ff:ff:ff");
    assert_eq!(one(&p[0], "dhcp.option.dhcp"), "1", "a DHCPDISCOVER");
    assert_eq!(one(&p[1], "ip.src"), "100.64.1.9");
}
