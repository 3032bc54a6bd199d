//! The control plane's CPRi output read by tshark: a DISCOVER and a REQUEST go into
//! `cp::ControlPlane` as G-PDUs; the OFFER and ACK G-PDUs it sends back are put in UDP 2152 over
//! IPv4 over Ethernet and decoded by tshark 4.0 with T-PDUs as Ethernet
//! (`gtp.dissect_tpdu_as:ETHERNET`) and IPv4/UDP checksum checks on (outer and inner). tshark
//! must read the TEID, the gateway MAC, the subscriber's S-VLAN (802.1ad) and C-VLAN, the
//! addresses, UDP 67 → 68 and the DHCP type and yiaddr we meant, with nothing malformed and no
//! expert item at warning level or above.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;

use fastpath_bng::cp::{ControlPlane, DhcpMode, Params, UpParams};
use fastpath_bng::cpri::client_frame;
use fastpath_bng::dhcp::server::{Identity, PoolConfig, ServerConfig};
use fastpath_bng::dhcp::wire::{DhcpRepr, MessageType, Op};
use fastpath_bng::pfcp_cp::CpConfig;
use fastpath_packet::build::FrameBuilder;
use fastpath_packet::testutil;
use fastpath_pfcp::gtpu;

const GW: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);

#[test]
fn offer_and_ack_g_pdus_decode_in_tshark() {
    let dir = std::env::temp_dir().join(format!("fastpath-cpri-tshark-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let params = Params {
        dhcp: DhcpMode::Server(ServerConfig {
            server_id: GW,
            pools: vec![PoolConfig {
                name: "s100".into(),
                svlans: vec![100],
                first: Ipv4Addr::new(100, 64, 0, 10),
                last: Ipv4Addr::new(100, 64, 0, 20),
                mask: Ipv4Addr::new(255, 255, 255, 0),
                gateway: GW,
                dns: vec![],
                lease_time_s: 600,
            }],
            offer_hold_s: 30,
            decline_quarantine_s: 600,
        }),
        gw_mac: [2, 0xfa, 0, 0, 0, 1],
        store: dir.join("cp.db"),
        pfcp: CpConfig::new(Ipv4Addr::LOCALHOST),
        user_planes: vec![UpParams { id: 1, ports: vec![3] }],
        heartbeat_s: 10,
        max_missed: 3,
    };
    let mut cp = ControlPlane::open(&params, 1_700_000_000).unwrap();
    // The user plane's CPRi address (where replies go).
    const UP: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 2), 2152));
    let sub = Identity { port: 3, svlan: 100, cvlan: 200, mac: [2, 0, 0, 0, 0x12, 0x34] };
    let gpdu = |m: &DhcpRepr| {
        let mut d = Vec::new();
        gtpu::emit_gpdu(gtpu::cpri_teid(1, 3), &client_frame(&sub, m), &mut d).unwrap();
        d
    };
    let mut m = DhcpRepr::empty(Op::BOOTREQUEST);
    m.xid = 0x2bad_cafe;
    m.chaddr[..6].copy_from_slice(&sub.mac);
    m.options.message_type = Some(MessageType::DISCOVER);
    let discover = gpdu(&m);
    let offer = cp.on_gtpu(&discover, UP, 1_700_000_000).unwrap().gtpu.remove(0).1;
    m.options.message_type = Some(MessageType::REQUEST);
    m.options.requested_ip = Some(Ipv4Addr::new(100, 64, 0, 10));
    m.options.server_id = Some(GW);
    let ack = cp.on_gtpu(&gpdu(&m), UP, 1_700_000_001).unwrap().gtpu.remove(0).1;

    if !testutil::tshark_or_skip("cpri tshark") {
        return;
    }
    let outer = |g: &[u8]| {
        FrameBuilder::eth([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
            .ipv4(Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2))
            .udp(gtpu::GTPU_PORT, gtpu::GTPU_PORT)
            .payload(g)
            .build()
    };
    let path = dir.join("cpri.pcap");
    testutil::write_pcap(&path, &[outer(&discover), outer(&offer), outer(&ack)]).unwrap();
    let fields = [
        "gtp.teid",
        "eth.src",
        "eth.dst",
        "ieee8021ad.id",
        "vlan.id",
        "ip.src",
        "ip.dst",
        "udp.srcport",
        "dhcp.option.dhcp",
        "dhcp.ip.your",
        "_ws.malformed",
        "_ws.expert.severity",
    ];
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(&path);
    cmd.args(["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE", "-o", "gtp.dissect_tpdu_as:ETHERNET"]);
    cmd.args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|", "-E", "separator=\t"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 3, "{text}");
    let want = [
        [
            "0x00010003",
            "02:00:00:00:00:01|02:00:00:00:12:34",
            "02:00:00:00:00:02|ff:ff:ff:ff:ff:ff",
            "100",
            "200",
            "192.0.2.1|0.0.0.0",
            "192.0.2.2|255.255.255.255",
            "2152|68",
            "1",
            "0.0.0.0",
        ],
        [
            "0x00010003",
            "02:00:00:00:00:01|02:fa:00:00:00:01",
            "02:00:00:00:00:02|02:00:00:00:12:34",
            "100",
            "200",
            "192.0.2.1|100.64.0.1",
            "192.0.2.2|100.64.0.10",
            "2152|67",
            "2",
            "100.64.0.10",
        ],
        [
            "0x00010003",
            "02:00:00:00:00:01|02:fa:00:00:00:01",
            "02:00:00:00:00:02|02:00:00:00:12:34",
            "100",
            "200",
            "192.0.2.1|100.64.0.1",
            "192.0.2.2|100.64.0.10",
            "2152|67",
            "5",
            "100.64.0.10",
        ],
    ];
    for (i, (row, want)) in rows.iter().zip(want.iter()).enumerate() {
        for (j, w) in want.iter().enumerate() {
            assert_eq!(row.get(j).copied().unwrap_or(""), *w, "frame {}: {}", i + 1, fields[j]);
        }
        assert_eq!(row.get(10).copied().unwrap_or(""), "", "frame {}: malformed", i + 1);
        for s in row.get(11).copied().unwrap_or("").split('|').filter(|s| !s.is_empty()) {
            assert!(s.parse::<u32>().unwrap() < 0x0060_0000, "frame {}: expert severity {s}", i + 1);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
