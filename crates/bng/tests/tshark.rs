//! The server's OFFER, ACK (after selecting and after renewing), NAK and INFORM-ACK, written to a
//! pcap inside UDP 67 → 68 over IPv4 over Ethernet, decoded by tshark (an independent DHCP
//! dissector) with IPv4 and UDP checksum checks on: no malformed packet, no error- or
//! warning-level expert item, and each field tshark reads equals what the server meant to send.

use std::net::Ipv4Addr;

use fastpath_bng::dhcp::server::{Destination, Identity, Outcome, PoolConfig, Reply, ServerConfig};
use fastpath_bng::dhcp::wire::{DhcpRepr, MessageType, Op, CLIENT_PORT, FLAG_BROADCAST, SERVER_PORT};
use fastpath_packet::build::FrameBuilder;
use fastpath_packet::testutil::{self, assert_field};

const SID: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0xfe];
const T0: u64 = 1_700_000_000;

fn frame(r: &Reply) -> Vec<u8> {
    let (dst_ip, dst_mac) = match r.dst {
        Destination::Broadcast => (Ipv4Addr::BROADCAST, [0xff; 6]),
        Destination::Unicast(ip) | Destination::UnicastToMac(ip, _) => (ip, r.msg.mac()),
        Destination::Relay(ip) => (ip, [2, 0, 0, 0, 0, 0xaa]),
    };
    FrameBuilder::eth(dst_mac, SERVER_MAC).ipv4(SID, dst_ip).udp(SERVER_PORT, CLIENT_PORT).payload(&r.msg.to_bytes()).build()
}

fn reply(o: Outcome) -> Reply {
    match o {
        Outcome::Reply(r) => *r,
        other => panic!("expected a reply, got {other:?}"),
    }
}

#[test]
fn server_replies_decode_cleanly_in_tshark() {
    let mut s = ServerConfig {
        server_id: SID,
        pools: vec![PoolConfig {
            name: "residential".into(),
            svlans: vec![100],
            first: Ipv4Addr::new(198, 18, 0, 10),
            last: Ipv4Addr::new(198, 18, 0, 99),
            mask: Ipv4Addr::new(255, 255, 255, 0),
            gateway: SID,
            dns: vec![Ipv4Addr::new(198, 18, 0, 53), Ipv4Addr::new(198, 18, 0, 54)],
            lease_time_s: 7200,
        }],
        offer_hold_s: 30,
        decline_quarantine_s: 600,
    }
    .build()
    .unwrap();
    let c = Identity { port: 3, svlan: 100, cvlan: 42, mac: [2, 0, 0, 0, 0x12, 0x34] };
    let mut discover = DhcpRepr::empty(Op::BOOTREQUEST);
    discover.xid = 0x2bad_cafe;
    discover.flags = FLAG_BROADCAST;
    discover.chaddr[..6].copy_from_slice(&c.mac);
    discover.options.message_type = Some(MessageType::DISCOVER);
    discover.options.relay_agent_info = Some(c.relay_agent_info());
    let offer = reply(s.handle(&discover, c, T0));

    let mut select = discover.clone();
    select.options.message_type = Some(MessageType::REQUEST);
    select.options.server_id = Some(SID);
    select.options.requested_ip = Some(offer.msg.yiaddr);
    let ack = reply(s.handle(&select, c, T0 + 1));

    let mut renew = DhcpRepr::empty(Op::BOOTREQUEST);
    renew.xid = 0x0bad_f00d;
    renew.chaddr[..6].copy_from_slice(&c.mac);
    renew.ciaddr = ack.msg.yiaddr;
    renew.options.message_type = Some(MessageType::REQUEST);
    let renew_ack = reply(s.handle(&renew, c, T0 + 3600));

    let other = Identity { mac: [2, 0, 0, 0, 0x56, 0x78], ..c };
    let mut stolen = renew.clone();
    stolen.chaddr[..6].copy_from_slice(&other.mac);
    let nak = reply(s.handle(&stolen, other, T0 + 3600));

    let mut inform = renew.clone();
    inform.options.message_type = Some(MessageType::INFORM);
    let inform_ack = reply(s.handle(&inform, c, T0 + 3601));

    let replies = [&offer, &ack, &renew_ack, &nak, &inform_ack];
    let types: Vec<_> = replies.iter().map(|r| r.msg.options.message_type).collect();
    let (o, a, n) = (Some(MessageType::OFFER), Some(MessageType::ACK), Some(MessageType::NAK));
    assert_eq!(types, vec![o, a, a, n, a]);

    if !testutil::tshark_or_skip("bng tshark") {
        return;
    }
    let path = std::env::temp_dir().join(format!("fastpath-bng-replies-{}.pcap", std::process::id()));
    testutil::write_pcap(&path, &replies.iter().map(|r| frame(r)).collect::<Vec<_>>()).unwrap();
    let fields = [
        "udp.srcport",
        "udp.dstport",
        "ip.dst",
        "dhcp.type",
        "dhcp.id",
        "dhcp.flags.bc",
        "dhcp.hw.mac_addr",
        "dhcp.ip.client",
        "dhcp.ip.your",
        "dhcp.option.dhcp",
        "dhcp.option.dhcp_server_id",
        "dhcp.option.ip_address_lease_time",
        "dhcp.option.renewal_time_value",
        "dhcp.option.rebinding_time_value",
        "dhcp.option.subnet_mask",
        "dhcp.option.router",
        "dhcp.option.domain_name_server",
        "dhcp.option.message",
        "dhcp.option.agent_information_option.agent_circuit_id",
        "dhcp.option.agent_information_option.agent_remote_id",
    ];
    let (rows, _) = testutil::tshark_check(&path, &fields).unwrap();
    let problems = testutil::tshark_problems(&path, testutil::EXPERT_WARN).unwrap();
    assert!(problems.is_empty(), "tshark found problems:\n{}", problems.join("\n"));
    assert_eq!(rows.len(), 5);
    for f in 0..5 {
        assert_field(&rows, f, "udp.srcport", &["67"]);
        assert_field(&rows, f, "udp.dstport", &["68"]);
        assert_field(&rows, f, "dhcp.type", &["2"]); // Boot Reply
        assert_field(&rows, f, "dhcp.option.dhcp_server_id", &["198.18.0.1"]);
    }
    // OFFER: broadcast (the client set the flag), address, times, configuration, option 82 echoed.
    assert_field(&rows, 0, "ip.dst", &["255.255.255.255"]);
    assert_field(&rows, 0, "dhcp.option.dhcp", &["2"]);
    assert_field(&rows, 0, "dhcp.id", &["0x2badcafe"]);
    assert_field(&rows, 0, "dhcp.flags.bc", &["1"]);
    assert_field(&rows, 0, "dhcp.hw.mac_addr", &["02:00:00:00:12:34"]);
    assert_field(&rows, 0, "dhcp.ip.your", &["198.18.0.10"]);
    assert_field(&rows, 0, "dhcp.option.ip_address_lease_time", &["7200"]);
    assert_field(&rows, 0, "dhcp.option.renewal_time_value", &["3600"]);
    assert_field(&rows, 0, "dhcp.option.rebinding_time_value", &["6300"]);
    assert_field(&rows, 0, "dhcp.option.subnet_mask", &["255.255.255.0"]);
    assert_field(&rows, 0, "dhcp.option.router", &["198.18.0.1"]);
    assert_field(&rows, 0, "dhcp.option.domain_name_server", &["198.18.0.53", "198.18.0.54"]);
    assert_field(&rows, 0, "dhcp.option.agent_information_option.agent_circuit_id", &["332f3130302f3432"]); // "3/100/42"
    assert_field(&rows, 0, "dhcp.option.agent_information_option.agent_remote_id", &["30323a30303a30303a30303a31323a3334"]);
    // ACK after selecting.
    assert_field(&rows, 1, "dhcp.option.dhcp", &["5"]);
    assert_field(&rows, 1, "dhcp.ip.your", &["198.18.0.10"]);
    assert_field(&rows, 1, "dhcp.option.ip_address_lease_time", &["7200"]);
    // ACK to a renewal: unicast to ciaddr, which it echoes.
    assert_field(&rows, 2, "ip.dst", &["198.18.0.10"]);
    assert_field(&rows, 2, "dhcp.option.dhcp", &["5"]);
    assert_field(&rows, 2, "dhcp.ip.client", &["198.18.0.10"]);
    assert_field(&rows, 2, "dhcp.id", &["0x0badf00d"]);
    // NAK: broadcast, no address, no lease time, a message.
    assert_field(&rows, 3, "ip.dst", &["255.255.255.255"]);
    assert_field(&rows, 3, "dhcp.option.dhcp", &["6"]);
    assert_field(&rows, 3, "dhcp.ip.your", &["0.0.0.0"]);
    assert_field(&rows, 3, "dhcp.option.ip_address_lease_time", &[]);
    assert_field(&rows, 3, "dhcp.option.message", &["lease unknown or expired"]);
    assert_field(&rows, 3, "dhcp.hw.mac_addr", &["02:00:00:00:56:78"]);
    // ACK to an INFORM: configuration but no lease time.
    assert_field(&rows, 4, "dhcp.option.dhcp", &["5"]);
    assert_field(&rows, 4, "dhcp.option.ip_address_lease_time", &[]);
    assert_field(&rows, 4, "dhcp.option.router", &["198.18.0.1"]);
    let _ = std::fs::remove_file(&path);
}
