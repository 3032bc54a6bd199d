//! The `sdn-overlay` reference pipeline on real frames: connection tracking through the
//! pipeline (handshake, data, FIN, RST, retransmitted SYN, out-of-window), ageing on simulated
//! time, the stateful ACL (return path allowed, unsolicited inbound denied), the policer's rate,
//! a full flow table, and VXLAN encapsulation checked with the packet crate's header views.

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{self, TcpFlags};
use fastpath_packet::{csum, Batch, DropReason, Pool, Verdict};
use fastpath_pipeline::Pipeline;
use std::net::Ipv4Addr;

const CLIENT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0c, 0x01];
const SERVER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0c, 0x02];
const CLIENT: [u8; 4] = [10, 0, 0, 1];
const SERVER: [u8; 4] = [10, 0, 1, 1];
const SEC: u64 = 1_000_000_000;

const ENTRIES: &str = "\
table vni_map add 100 => set_vnet(1)
table acl_in add 10.0.0.0/24 10.0.1.0/24 80..80 6/0xff priority 10 => allow
table acl_in add 10.0.0.0/24 10.0.1.0/24 * 17/0xff priority 20 => allow
table acl_out add 10.0.0.0/24 10.0.1.1/32 6000..6000 17/0xff priority 5 => deny
table local_mac add 02:00:00:00:0c:01 => local_mac(1)
table local_mac add 02:00:00:00:0c:02 => local_mac(2)
table ca_pa add 1 10.0.1.1 => to_tunnel(7)
table ca_pa add 1 10.0.0.1 => to_tunnel(8)
table tunnels add 7 => encap(02:00:00:00:0e:07, 02:00:00:00:0e:01, 198.18.0.1, 198.18.7.7, 700, 1)
table tunnels add 8 => encap(02:00:00:00:0e:08, 02:00:00:00:0e:01, 198.18.0.1, 198.18.8.8, 800, 1)
";

fn overlay(flows: u32) -> Pipeline {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let text = std::fs::read_to_string(format!("{root}pipelines/sdn-overlay.toml")).unwrap();
    let text = text.replace("size = 5000000\n", &format!("size = {flows}\n"));
    let mut p = fastpath_pipeline::compile("sdn-overlay.toml", &text).unwrap_or_else(|e| panic!("{e}")).instantiate();
    p.load_entries("entries", ENTRIES).unwrap();
    p
}

/// Outer VXLAN (VNI 100) around a TCP segment.
fn tcp(from_client: bool, sport: u16, flags: TcpFlags, seq: u32, ack: u32, payload: usize) -> Vec<u8> {
    let (sm, dm, s, d, sp, dp) =
        if from_client { (CLIENT_MAC, SERVER_MAC, CLIENT, SERVER, sport, 80) } else { (SERVER_MAC, CLIENT_MAC, SERVER, CLIENT, 80, sport) };
    FrameBuilder::eth([2, 0, 0, 0, 0xe, 1], [2, 0, 0, 0, 0xe, 9])
        .ipv4(Ipv4Addr::new(198, 18, 9, 9), Ipv4Addr::new(198, 18, 0, 1))
        .udp(50000, 4789)
        .vxlan(100)
        .inner_eth(dm, sm)
        .ipv4(Ipv4Addr::from(s), Ipv4Addr::from(d))
        .tcp(sp, dp, flags, seq, ack)
        .payload(&vec![0x5a; payload])
        .build()
}

fn udp(sport: u16, len: usize) -> Vec<u8> {
    udp_to(sport, 5001, len)
}

fn udp_to(sport: u16, dport: u16, len: usize) -> Vec<u8> {
    FrameBuilder::eth([2, 0, 0, 0, 0xe, 1], [2, 0, 0, 0, 0xe, 9])
        .ipv4(Ipv4Addr::new(198, 18, 9, 9), Ipv4Addr::new(198, 18, 0, 1))
        .udp(50000, 4789)
        .vxlan(100)
        .inner_eth(SERVER_MAC, CLIENT_MAC)
        .ipv4(Ipv4Addr::from(CLIENT), Ipv4Addr::from(SERVER))
        .udp(sport, dport)
        .frame_len(len)
        .build()
}

fn run(p: &mut Pipeline, frames: &[Vec<u8>], now_ns: u64) -> Vec<(Verdict, Vec<u8>)> {
    let mut pool = Pool::new(512);
    let mut b = Batch::new();
    for f in frames {
        let h = pool.alloc().unwrap();
        pool.set_data(h, f);
        assert!(b.push(h, 0));
    }
    p.process(&mut pool, &mut b, now_ns);
    (0..b.len()).map(|i| (b.verdict(i), pool.data(b.handle(i)).to_vec())).collect()
}

fn one(p: &mut Pipeline, f: Vec<u8>, now_ns: u64) -> Verdict {
    run(p, &[f], now_ns)[0].0
}

fn drops(p: &Pipeline, stage: &str, r: DropReason) -> u64 {
    p.stats().into_iter().filter(|(n, _)| n == stage).map(|(_, s)| s.drops[r as usize]).sum()
}

fn state(p: &Pipeline) -> Vec<fastpath_tables::flow::State> {
    p.objects().conntrack("flows").unwrap().iter().map(|(_, e)| e.state()).collect()
}

use fastpath_tables::flow::State;
const SYN: TcpFlags = TcpFlags::SYN;
const ACK: TcpFlags = TcpFlags::ACK;
const SYNACK: TcpFlags = TcpFlags(0x12);
const FINACK: TcpFlags = TcpFlags(0x11);
const RST: TcpFlags = TcpFlags::RST;

#[test]
fn handshake_data_fin_pass_both_ways_and_leave_as_vxlan() {
    let mut p = overlay(1000);
    let t = SEC;
    assert_eq!(one(&mut p, tcp(true, 40000, SYN, 1000, 0, 0), t), Verdict::Tx(1));
    assert_eq!(state(&p), vec![State::SynSent]);
    assert_eq!(one(&mut p, tcp(false, 40000, SYNACK, 5000, 1001, 0), t), Verdict::Tx(1), "return path of an allowed connection");
    assert_eq!(one(&mut p, tcp(true, 40000, ACK, 1001, 5001, 0), t), Verdict::Tx(1));
    assert_eq!(state(&p), vec![State::Established]);
    let data = tcp(true, 40000, ACK, 1001, 5001, 100);
    let out = run(&mut p, std::slice::from_ref(&data), t);
    assert_eq!(out[0].0, Verdict::Tx(1));
    // Outer headers: VXLAN to the server's tunnel endpoint, VNI 700; inner frame intact.
    let f = &out[0].1;
    let eth = hdr::Eth::parse(f).unwrap();
    let ip = hdr::Ipv4::parse(eth.payload()).unwrap();
    assert!(ip.checksum_ok());
    assert_eq!(ip.dst(), Ipv4Addr::new(198, 18, 7, 7));
    assert_eq!(&f[36..38], &4789u16.to_be_bytes());
    assert_eq!(&f[42..50], &[0x08, 0, 0, 0, 0, 0x02, 0xbc, 0]);
    assert_eq!(&f[50..], &data[50..], "inner frame unchanged (green: no remark)");
    assert_eq!(one(&mut p, tcp(false, 40000, ACK, 5001, 1101, 0), t), Verdict::Tx(1));
    assert_eq!(one(&mut p, tcp(true, 40000, FINACK, 1101, 5001, 0), t), Verdict::Tx(1));
    assert_eq!(state(&p), vec![State::FinWait]);
    assert_eq!(one(&mut p, tcp(false, 40000, FINACK, 5001, 1102, 0), t), Verdict::Tx(1));
    assert_eq!(one(&mut p, tcp(true, 40000, ACK, 1102, 5002, 0), t), Verdict::Tx(1));
    assert!(matches!(state(&p)[0], State::TimeWait | State::LastAck), "{:?}", state(&p));
    assert_eq!(drops(&p, "acl_in", DropReason::AclDeny), 0);
}

#[test]
fn unsolicited_inbound_is_denied_and_the_denial_is_cached() {
    let mut p = overlay(1000);
    // The server opens towards the client: not allowed by the inbound ACL.
    assert_eq!(one(&mut p, tcp(false, 40001, SYN, 7000, 0, 0), SEC), Verdict::Drop(DropReason::AclDeny));
    // Its retransmission hits the flow: the cached verdict (2) drops it without the ACL.
    assert_eq!(one(&mut p, tcp(false, 40001, SYN, 7000, 0, 0), SEC), Verdict::Drop(DropReason::AclDeny));
    assert_eq!(drops(&p, "acl_in", DropReason::AclDeny), 1);
    assert_eq!(drops(&p, "drop-3", DropReason::AclDeny), 1);
    // A non-SYN first packet is refused by the tracker.
    assert_eq!(one(&mut p, tcp(false, 40002, ACK, 1, 1, 10), SEC), Verdict::Drop(DropReason::ConntrackInvalid));
}

#[test]
fn outbound_deny_drops_the_connection_from_its_first_packet_on_by_the_cached_verdict() {
    let mut p = overlay(1000);
    // Allowed inbound (UDP from the client subnet), denied outbound (port 6000 to the server).
    assert_eq!(one(&mut p, udp_to(40000, 6000, 128), SEC), Verdict::Drop(DropReason::AclDeny));
    assert_eq!(drops(&p, "acl_out", DropReason::AclDeny), 1);
    // The next packets of that connection never reach the classifiers: the flow says "deny".
    assert_eq!(one(&mut p, udp_to(40000, 6000, 128), SEC), Verdict::Drop(DropReason::AclDeny));
    assert_eq!(one(&mut p, udp_to(40000, 6000, 128), SEC), Verdict::Drop(DropReason::AclDeny));
    assert_eq!(drops(&p, "acl_out", DropReason::AclDeny), 1);
    let acl_in: u64 = p.stats().into_iter().filter(|(n, _)| n == "acl_in").map(|(_, s)| s.pkts_in).sum();
    assert_eq!(acl_in, 1, "only the first packet was classified");
    // Another port of the same pair passes.
    assert_eq!(one(&mut p, udp_to(40000, 5001, 128), SEC), Verdict::Tx(1));
}

#[test]
fn retransmitted_syn_rst_and_out_of_window() {
    let mut p = overlay(1000);
    let t = SEC;
    assert_eq!(one(&mut p, tcp(true, 40003, SYN, 1000, 0, 0), t), Verdict::Tx(1));
    assert_eq!(one(&mut p, tcp(true, 40003, SYN, 1000, 0, 0), t), Verdict::Tx(1), "retransmitted SYN");
    assert_eq!(state(&p).len(), 1);
    assert_eq!(one(&mut p, tcp(false, 40003, SYNACK, 5000, 1001, 0), t), Verdict::Tx(1));
    assert_eq!(one(&mut p, tcp(true, 40003, ACK, 1001, 5001, 0), t), Verdict::Tx(1));
    // Far outside the window: invalid, state unchanged.
    assert_eq!(one(&mut p, tcp(true, 40003, ACK, 1001 + 0x4000_0000, 5001, 10), t), Verdict::Drop(DropReason::ConntrackInvalid));
    assert_eq!(state(&p), vec![State::Established]);
    assert_eq!(one(&mut p, tcp(false, 40003, RST, 5001, 0, 0), t), Verdict::Tx(1));
    assert_eq!(state(&p), vec![State::Closed]);
}

#[test]
fn flows_age_out_on_simulated_time() {
    let mut p = overlay(1000);
    for k in 0..10 {
        assert_eq!(one(&mut p, tcp(true, 41000 + k, SYN, 1, 0, 0), SEC), Verdict::Tx(1));
    }
    assert_eq!(state(&p).len(), 10);
    // 10 s later the half-open flows (30 s SYN timeout) are still there.
    assert_eq!(one(&mut p, udp(9, 100), 11 * SEC), Verdict::Tx(1));
    assert_eq!(state(&p).len(), 11);
    // 40 s later they have aged out (the wheel frees them; the UDP flow, 30 s, too).
    let _ = run(&mut p, &[udp(10, 100)], 45 * SEC);
    assert_eq!(state(&p).len(), 1, "{:?}", state(&p));
    // A late SYN-ACK of an aged-out flow is a first packet that is not a SYN: invalid.
    assert_eq!(one(&mut p, tcp(false, 41000, SYNACK, 9, 2, 0), 45 * SEC), Verdict::Drop(DropReason::ConntrackInvalid));
}

#[test]
fn full_table_drops_new_flows_and_keeps_established_ones() {
    let mut p = overlay(4);
    for k in 0..4 {
        assert_eq!(one(&mut p, tcp(true, 42000 + k, SYN, 1, 0, 0), SEC), Verdict::Tx(1));
    }
    assert_eq!(one(&mut p, tcp(true, 42100, SYN, 1, 0, 0), SEC), Verdict::Drop(DropReason::FlowTableFull));
    assert_eq!(drops(&p, "conntrack", DropReason::FlowTableFull), 1);
    assert_eq!(one(&mut p, tcp(false, 42000, SYNACK, 9, 2, 0), SEC), Verdict::Tx(1));
    assert_eq!(one(&mut p, tcp(true, 42000, ACK, 2, 10, 0), SEC), Verdict::Tx(1));
}

#[test]
fn policer_rate_is_within_one_percent_over_a_simulated_second() {
    let mut p = overlay(100_000);
    // 1 MB/s committed, small bursts; offered: 3 MB/s of 1000-byte frames (inner 950 bytes).
    p.load_entries("m", "meter policer 1 cir 1000000 cbs 2000 ebs 2000\n").unwrap();
    let (mut passed, mut yellow) = (0u64, 0u64);
    let per_batch = 4u64;
    let batches = 3_000_000 / (1000 * per_batch) + 1;
    let mut sport = 1u16;
    for k in 0..batches {
        let now = SEC + k * SEC / batches;
        let frames: Vec<Vec<u8>> = (0..per_batch)
            .map(|_| {
                sport = sport.wrapping_add(1);
                udp(sport, 1000)
            })
            .collect();
        for (v, f) in run(&mut p, &frames, now) {
            if v == Verdict::Tx(1) {
                passed += (f.len() - 50) as u64; // metered length: the inner frame
                yellow += u64::from(f[50 + 15] >> 2 == 10);
            }
        }
    }
    let rate = passed as f64; // bytes in one simulated second
    assert!((rate - 1_000_000.0).abs() <= 10_000.0, "policed to {rate} bytes/s");
    assert!(yellow > 0, "excess burst is remarked yellow (DSCP 10)");
    assert!(drops(&p, "meter", DropReason::MeterRed) > 0);
}

#[test]
fn remarked_yellow_packet_keeps_a_valid_inner_checksum() {
    let mut p = overlay(100);
    p.load_entries("m", "meter policer 1 cir 1000 cbs 100 ebs 100000\n").unwrap();
    let out = run(&mut p, &[udp(1, 200)], SEC);
    assert_eq!(out[0].0, Verdict::Tx(1));
    let inner = &out[0].1[50..];
    let ip = hdr::Ipv4::parse(hdr::Eth::parse(inner).unwrap().payload()).unwrap();
    assert!(ip.checksum_ok());
    assert_eq!(inner[15] >> 2, 10);
    assert!(csum::ipv4_header_ok(&out[0].1[14..34]));
}

#[test]
fn many_handshakes_in_one_batch_find_their_own_connections() {
    // 120 SYNs, then their SYN-ACKs in the opposite order, in one batch: the SYN-ACKs miss the
    // lookup (their connections open later in the same pass), and many share a class of the
    // stage's filter with another connection opened after theirs (120 keys in 1,024 classes),
    // so its "last opened" shortcut must fall back to the full search for them.
    let mut p = overlay(1000);
    let ports: Vec<u16> = (0..120).map(|k| 41000 + k).collect();
    let mut frames: Vec<Vec<u8>> = ports.iter().map(|&sp| tcp(true, sp, SYN, 1000, 0, 0)).collect();
    frames.extend(ports.iter().rev().map(|&sp| tcp(false, sp, SYNACK, 5000, 1001, 0)));
    let v: Vec<Verdict> = run(&mut p, &frames, SEC).into_iter().map(|x| x.0).collect();
    assert!(v.iter().all(|&x| x == Verdict::Tx(1)), "{v:?}");
    assert_eq!(state(&p).len(), 120, "one connection each");
    assert!(state(&p).iter().all(|&s| s == State::SynRecv), "{:?}", state(&p));
}

#[test]
fn a_whole_handshake_in_one_batch_passes() {
    let mut p = overlay(1000);
    let frames = [
        tcp(true, 40010, SYN, 1000, 0, 0),
        tcp(false, 40010, SYNACK, 5000, 1001, 0),
        tcp(true, 40010, ACK, 1001, 5001, 0),
        tcp(false, 40011, SYN, 1, 0, 0), // unsolicited inbound
        tcp(false, 40011, SYN, 1, 0, 0), // and its retransmission in the same batch
    ];
    let v: Vec<Verdict> = run(&mut p, &frames, SEC).into_iter().map(|x| x.0).collect();
    assert_eq!(
        v,
        vec![Verdict::Tx(1), Verdict::Tx(1), Verdict::Tx(1), Verdict::Drop(DropReason::AclDeny), Verdict::Drop(DropReason::AclDeny)]
    );
    assert_eq!(drops(&p, "acl_in", DropReason::AclDeny), 1, "the ACL ran once for the denied flow");
}
