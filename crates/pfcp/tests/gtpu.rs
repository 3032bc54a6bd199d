//! GTP-U (the CPRi's wire format) checked by tshark 4.0's GTP dissector, and a mutation loop.
//!
//! The tshark test writes an Echo Request, an Echo Response and two G-PDUs, each carrying a
//! whole Q-in-Q Ethernet frame with a DHCP message (a DISCOVER up, an OFFER down), in UDP 2152
//! over IPv4 over Ethernet. tshark is told that T-PDUs are Ethernet (`gtp.dissect_tpdu_as`)
//! and must decode the GTP-U header, the inner Ethernet, both VLAN tags, IPv4, UDP and DHCP
//! with the values we wrote, with checksum checks on, nothing malformed and no expert item at
//! warning level or above. tshark is installed by `scripts/test`; without it this test fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

mod common;

use common::{ip_udp, write_pcap};
use fastpath_pfcp::gtpu::{self, Gtpu, GtpuRepr, MessageType, GTPU_PORT};
use std::process::Command;

/// A minimal DHCP message of type `ty` (BOOTP header, cookie, option 53, end), 300 bytes.
fn dhcp(op: u8, ty: u8, chaddr: [u8; 6], yiaddr: [u8; 4]) -> Vec<u8> {
    let mut d = vec![0u8; 236];
    d[0] = op;
    d[1] = 1; // htype Ethernet
    d[2] = 6; // hlen
    d[4..8].copy_from_slice(&0xdead_beefu32.to_be_bytes()); // xid
    d[10] = 0x80; // broadcast
    d[16..20].copy_from_slice(&yiaddr);
    d[28..34].copy_from_slice(&chaddr);
    d.extend_from_slice(&[99, 130, 83, 99, 53, 1, ty, 255]);
    d.resize(300, 0);
    d
}

/// Ethernet with an S-tag (802.1ad) and a C-tag (802.1Q) around an IPv4 packet.
fn qinq(dst: [u8; 6], src: [u8; 6], svlan: u16, cvlan: u16, ip: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x88, 0xa8]);
    f.extend_from_slice(&svlan.to_be_bytes());
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&cvlan.to_be_bytes());
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(ip);
    f
}

/// The outer frame: Ethernet / IPv4 / UDP 2152 → 2152 / GTP-U.
fn outer(gtp: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&ip_udp([192, 0, 2, 2], [192, 0, 2, 1], GTPU_PORT, GTPU_PORT, gtp));
    f
}

const SUB: [u8; 6] = [0x02, 0, 0, 0, 0x12, 0x34];
const GW: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 1];

#[test]
fn tshark_decodes_gtpu_and_the_frame_inside() {
    let discover = qinq([0xff; 6], SUB, 100, 200, &ip_udp([0; 4], [255; 4], 68, 67, &dhcp(1, 1, SUB, [0; 4])));
    let offer = qinq([0xff; 6], GW, 100, 200, &ip_udp([100, 64, 0, 1], [255; 4], 67, 68, &dhcp(2, 2, SUB, [100, 64, 0, 10])));
    let mut up = Vec::new();
    gtpu::emit_gpdu(gtpu::cpri_teid(1, 3), &discover, &mut up).unwrap();
    let mut down = Vec::new();
    gtpu::emit_gpdu(gtpu::cpri_teid(1, 3), &offer, &mut down).unwrap();
    let frames = [outer(&gtpu::echo_request(7)), outer(&gtpu::echo_response(7)), outer(&up), outer(&down)];
    let dir = std::env::temp_dir().join(format!("fastpath-gtpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("gtpu.pcap");
    write_pcap(&pcap, &frames);
    let fields = [
        "gtp.message",
        "gtp.teid",
        "gtp.seq_number",
        "gtp.recovery",
        "eth.src",
        "ieee8021ad.id",
        "vlan.etype",
        "vlan.id",
        "ip.src",
        "udp.srcport",
        "dhcp.option.dhcp",
        "dhcp.hw.mac_addr",
        "dhcp.ip.your",
        "_ws.malformed",
        "_ws.expert.severity",
    ];
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(&pcap);
    cmd.args(["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE", "-o", "gtp.dissect_tpdu_as:ETHERNET"]);
    cmd.args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|", "-E", "separator=\t"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("tshark must be installed");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 4, "{text}");
    let want: [[&str; 15]; 4] = [
        ["0x01", "0x00000000", "0x0007", "", "02:00:00:00:00:02", "", "", "", "192.0.2.2", "2152", "", "", "", "", ""],
        ["0x02", "0x00000000", "0x0007", "0", "02:00:00:00:00:02", "", "", "", "192.0.2.2", "2152", "", "", "", "", ""],
        [
            "0xff",
            "0x00010003",
            "",
            "",
            "02:00:00:00:00:02|02:00:00:00:12:34",
            "100",
            "0x0800",
            "200",
            "192.0.2.2|0.0.0.0",
            "2152|68",
            "1",
            "02:00:00:00:12:34",
            "0.0.0.0",
            "",
            "",
        ],
        [
            "0xff",
            "0x00010003",
            "",
            "",
            "02:00:00:00:00:02|02:fa:00:00:00:01",
            "100",
            "0x0800",
            "200",
            "192.0.2.2|100.64.0.1",
            "2152|67",
            "2",
            "02:00:00:00:12:34",
            "100.64.0.10",
            "",
            "",
        ],
    ];
    for (i, (row, want)) in rows.iter().zip(want.iter()).enumerate() {
        for (j, f) in fields.iter().enumerate() {
            let got = row.get(j).copied().unwrap_or("");
            if *f == "_ws.expert.severity" {
                // Chat-level items (e.g. "sequence number") are fine; nothing at warning or above.
                for s in got.split('|').filter(|s| !s.is_empty()) {
                    let s: u32 = s.parse().unwrap();
                    assert!(s < 6_291_456, "frame {}: expert severity {s:#x}", i + 1);
                }
                continue;
            }
            assert_eq!(got, want[j], "frame {}: {f}", i + 1);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Deterministic xorshift, so a failure can be replayed from its seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Mutations of valid messages: never a panic; whatever parses, re-emitted without its
/// extensions, parses to the same type, TEID, sequence number and payload. `FUZZ_ITERS`
/// (default 200,000), `FUZZ_SEED`.
#[test]
fn mutation_loop() {
    let iters: usize = std::env::var("FUZZ_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let seed: u64 = std::env::var("FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x9e37_79b9_7f4a_7c15);
    eprintln!("gtpu mutation loop: {iters} inputs, FUZZ_SEED={seed}");
    let mut seeds = vec![gtpu::echo_request(1), gtpu::echo_response(2)];
    let mut g = Vec::new();
    gtpu::emit_gpdu(0x0001_0002, &[0xAB; 60], &mut g).unwrap();
    seeds.push(g);
    seeds.push(vec![0x34, 0xff, 0, 9, 0, 0, 0, 1, 0, 7, 0, 0x85, 1, 0x10, 0x01, 0, 0xEE]);
    let mut rng = Rng(seed | 1);
    let mut parsed = 0usize;
    for _ in 0..iters {
        let mut b = seeds[rng.below(seeds.len())].clone();
        for _ in 0..1 + rng.below(4) {
            match rng.below(5) {
                0 if !b.is_empty() => {
                    let i = rng.below(b.len());
                    b[i] ^= 1 << rng.below(8);
                }
                1 if !b.is_empty() => {
                    let i = rng.below(b.len());
                    b[i] = [0, 1, 0x7f, 0x80, 0xff][rng.below(5)];
                }
                2 => b.truncate(rng.below(b.len() + 1)),
                3 => {
                    let i = rng.below(b.len() + 1);
                    b.insert(i, rng.next() as u8);
                }
                _ if b.len() >= 4 => {
                    // Make the length field agree, so mutations reach the optional fields.
                    let l = (b.len() - 8.min(b.len())) as u16;
                    b[2..4].copy_from_slice(&l.to_be_bytes());
                }
                _ => {}
            }
        }
        if let Ok(v) = Gtpu::parse(&b) {
            parsed += 1;
            let mut out = Vec::new();
            GtpuRepr::from_view(&v).emit(&mut out).unwrap();
            let w = Gtpu::parse(&out).unwrap();
            assert_eq!((w.msg_type, w.teid, w.seq, w.payload), (v.msg_type, v.teid, v.seq, v.payload), "{b:02x?}");
            let _ = v.recovery();
        }
    }
    eprintln!("{parsed} of {iters} parsed");
    assert!(parsed > iters / 50, "the loop should reach past the header often");
    let _ = MessageType::G_PDU;
}
