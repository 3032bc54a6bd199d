//! `pipelines/switch-acl.toml` and `l2_switch` on real frames: learning, forwarding to the
//! learned port, flooding (broadcast, unknown unicast) to every other member port, VLAN
//! separation and ingress filtering, 802.1D same-port filtering, ageing in virtual time, and the
//! 24 ACL rules (deny, DSCP rewrite with a valid checksum, the class it picks). The
//! tshark-checked pcap test is `crates/fastpath/tests/pcap_switch.rs`.

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{self, IpProto, Ipv4Repr, TcpFlags};
use fastpath_packet::{Batch, DropReason, Pool, Verdict};
use fastpath_pipeline::Pipeline;
use std::net::Ipv4Addr;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");

fn mac(n: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, n]
}

fn switch(ports: usize, rules: bool) -> Pipeline {
    let text = std::fs::read_to_string(format!("{ROOT}pipelines/switch-acl.toml")).unwrap();
    let mut p = fastpath_pipeline::compile("switch-acl.toml", &text).unwrap_or_else(|e| panic!("{e}")).instantiate();
    p.set_ports(ports).unwrap();
    if rules {
        let e = std::fs::read_to_string(format!("{ROOT}testdata/switch-acl/acl24.txt")).unwrap();
        assert_eq!(p.load_entries("acl24.txt", &e).unwrap(), 24);
    }
    p
}

fn udp(dst: [u8; 6], src: [u8; 6], dport: u16) -> Vec<u8> {
    let r = Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), IpProto::UDP, 0);
    FrameBuilder::eth(dst, src).ipv4_with(r).udp(1000, dport).frame_len(100).build()
}

/// One frame in on `port` at `now_ns`; returns its verdict and every (port, frame) that left.
fn send(p: &mut Pipeline, pool: &mut Pool, port: u16, frame: &[u8], now_ns: u64) -> (Verdict, Vec<(u16, Vec<u8>)>) {
    let mut b = Batch::new();
    let h = pool.alloc().unwrap();
    pool.set_data(h, frame);
    b.push(h, port);
    p.process(pool, &mut b, now_ns);
    let v = b.verdict(0);
    if let Verdict::Drop(_) = v {
        pool.free(h);
    }
    let mut out = Vec::new();
    for q in 0..8u16 {
        while p.egress(q, pool, &mut b, now_ns) > 0 {
            for i in 0..b.len() {
                assert_eq!(b.verdict(i), Verdict::Tx(q));
                out.push((q, pool.data(b.handle(i)).to_vec()));
                pool.free(b.handle(i));
            }
        }
    }
    (v, out)
}

fn ports_of(out: &[(u16, Vec<u8>)]) -> Vec<u16> {
    out.iter().map(|(q, _)| *q).collect()
}

#[test]
fn learns_floods_unknowns_and_forwards_known_addresses() {
    let mut p = switch(4, false);
    let mut pool = Pool::new(64);
    // A (port 0) to unknown B: flooded to 1, 2, 3, each copy byte for byte the frame.
    let f = udp(mac(0xb), mac(0xa), 9);
    let (_, out) = send(&mut p, &mut pool, 0, &f, 0);
    assert_eq!(ports_of(&out), [1, 2, 3]);
    assert!(out.iter().all(|(_, g)| *g == f));
    // B answers from port 2: A is known, so it goes to port 0 only.
    let (_, out) = send(&mut p, &mut pool, 2, &udp(mac(0xa), mac(0xb), 9), 1000);
    assert_eq!(ports_of(&out), [0]);
    // A to B again: now B is known on port 2.
    let (_, out) = send(&mut p, &mut pool, 0, &f, 2000);
    assert_eq!(ports_of(&out), [2]);
    // Broadcast is always flooded.
    let (_, out) = send(&mut p, &mut pool, 3, &udp([0xff; 6], mac(0xc), 9), 3000);
    assert_eq!(ports_of(&out), [0, 1, 2]);
    // B moves to port 3: the next frame to B follows it.
    send(&mut p, &mut pool, 3, &udp(mac(0xa), mac(0xb), 9), 4000);
    let (_, out) = send(&mut p, &mut pool, 0, &f, 5000);
    assert_eq!(ports_of(&out), [3]);
    // A frame to an address learned on its own input port is filtered.
    let (v, out) = send(&mut p, &mut pool, 3, &udp(mac(0xb), mac(0xc), 9), 6000);
    assert_eq!((v, out.len()), (Verdict::Drop(DropReason::L2SamePort), 0));
    assert!(p.show_plan().contains("learned 3 moved 1"), "{}", p.show_plan());
    assert_eq!(pool.available(), 64, "every copy was freed");
}

#[test]
fn entries_age_out_after_the_ageing_time() {
    let mut p = switch(3, false);
    let mut pool = Pool::new(64);
    send(&mut p, &mut pool, 1, &udp(mac(0xa), mac(0xb), 9), 0);
    let (_, out) = send(&mut p, &mut pool, 0, &udp(mac(0xb), mac(0xa), 9), 299_000_000_000);
    assert_eq!(ports_of(&out), [1], "299 s later B is still known");
    let (_, out) = send(&mut p, &mut pool, 0, &udp(mac(0xb), mac(0xa), 9), 301_000_000_000);
    assert_eq!(ports_of(&out), [1, 2], "301 s after B's last frame, frames to B are flooded again");
}

#[test]
fn vlans_separate_learning_and_flood_domains_and_filter_ingress() {
    let text = std::fs::read_to_string(format!("{ROOT}pipelines/switch-acl.toml")).unwrap().replace(
        "ageing_s = 300",
        "ageing_s = 300\nvlans = [{ vid = 10, ports = [0, 1, 2] }, { vid = 20, ports = [0, 3, 4] }, { vid = 0, ports = [5] }]",
    );
    let mut p = fastpath_pipeline::compile("vlans.toml", &text).unwrap_or_else(|e| panic!("{e}")).instantiate();
    p.set_ports(6).unwrap();
    let mut pool = Pool::new(64);
    let tagged = |vid, dst, src| {
        FrameBuilder::eth(dst, src).vlan(vid, 0).ipv4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)).udp(1, 9).build()
    };
    let (_, out) = send(&mut p, &mut pool, 0, &tagged(10, [0xff; 6], mac(1)), 0);
    assert_eq!(ports_of(&out), [1, 2], "VLAN 10 floods to its members only");
    let (_, out) = send(&mut p, &mut pool, 0, &tagged(20, [0xff; 6], mac(1)), 0);
    assert_eq!(ports_of(&out), [3, 4]);
    // mac(1) is known on port 0 in VLAN 10; in VLAN 30 (unknown) nothing is forwarded.
    let (v, _) = send(&mut p, &mut pool, 1, &tagged(30, mac(1), mac(2)), 0);
    assert_eq!(v, Verdict::Drop(DropReason::VlanFiltered));
    // Port 3 is not in VLAN 10: its VLAN 10 frames are refused at ingress.
    let (v, _) = send(&mut p, &mut pool, 3, &tagged(10, mac(1), mac(3)), 0);
    assert_eq!(v, Verdict::Drop(DropReason::VlanFiltered));
    // Same MAC in VLAN 20 is a different entry: still unknown there, so flooded.
    let (_, out) = send(&mut p, &mut pool, 3, &tagged(20, mac(1), mac(3)), 0);
    assert_eq!(ports_of(&out), [0], "VLAN 20 learned mac(1) on port 0 from the broadcast above");
    let (_, out) = send(&mut p, &mut pool, 4, &tagged(20, mac(9), mac(4)), 0);
    assert_eq!(ports_of(&out), [0, 3]);
    // An untagged frame belongs to VLAN 0, whose only member is port 5: nowhere to flood.
    let (v, _) = send(&mut p, &mut pool, 5, &udp([0xff; 6], mac(5), 9), 0);
    assert_eq!(v, Verdict::Drop(DropReason::NoRoute));
}

#[test]
fn the_24_rules_deny_rewrite_dscp_and_choose_the_queue() {
    let mut p = switch(3, true);
    let mut pool = Pool::new(64);
    // Teach the switch where B is (port 1).
    send(&mut p, &mut pool, 1, &udp(mac(0xa), mac(0xb), 9), 0);
    let tcp = |dport| {
        FrameBuilder::eth(mac(0xb), mac(0xa))
            .ipv4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
            .tcp(40000, dport, TcpFlags::SYN, 1, 0)
            .build()
    };
    let (v, _) = send(&mut p, &mut pool, 0, &tcp(23), 0);
    assert_eq!(v, Verdict::Drop(DropReason::AclDeny));
    let (v, out) = send(&mut p, &mut pool, 0, &tcp(5201), 0);
    assert_eq!((v, ports_of(&out)), (Verdict::Queued(1), vec![1]), "the lab's traffic passes");
    // UDP 5060 from port 0: DSCP 46, class 7.
    let (_, out) = send(&mut p, &mut pool, 0, &udp(mac(0xb), mac(0xa), 5060), 0);
    let ip = hdr::Ipv4::parse(hdr::Eth::parse(&out[0].1).unwrap().payload()).unwrap();
    assert_eq!(ip.dscp(), 46);
    assert!(ip.checksum_ok());
    assert_eq!(p.tm().unwrap().queue_counters(1, 7).unwrap().deq_pkts, 1);
    // The same from port 2 has no rewrite rule: DSCP stays 0, class 0.
    send(&mut p, &mut pool, 1, &udp(mac(0xc), mac(0xb), 9), 0);
    let (_, out) = send(&mut p, &mut pool, 2, &udp(mac(0xb), mac(0xc), 5060), 0);
    let ip = hdr::Ipv4::parse(hdr::Eth::parse(&out[0].1).unwrap().payload()).unwrap();
    assert_eq!(ip.dscp(), 0);
    let acl = p.stats().into_iter().find(|(n, _)| n == "acl").unwrap().1;
    assert_eq!(acl.drops[DropReason::AclDeny as usize], 1);
}

#[test]
fn the_acl_result_cache_follows_every_rule_change() {
    // The same flow before and after each change: the classifier's result cache must never
    // answer for rules that changed.
    let mut p = switch(2, true);
    let mut pool = Pool::new(64);
    send(&mut p, &mut pool, 1, &udp(mac(0xa), mac(0xb), 9), 0);
    let f = udp(mac(0xb), mac(0xa), 9);
    for _ in 0..3 {
        assert_eq!(send(&mut p, &mut pool, 0, &f, 0).0, Verdict::Queued(1), "cached: permitted");
    }
    p.load_entries("x", "table acl add * 10.0.0.1/32 * 17/0xff 9..9 priority 1 => deny\n").unwrap();
    assert_eq!(send(&mut p, &mut pool, 0, &f, 0).0, Verdict::Drop(DropReason::AclDeny), "a new rule applies at once");
    p.load_entries("x", "table acl del * 10.0.0.1/32 * 17/0xff 9..9\n").unwrap();
    assert_eq!(send(&mut p, &mut pool, 0, &f, 0).0, Verdict::Queued(1), "and its removal too");
    p.load_entries("x", "table acl add * * * 17/0xff 9..9 priority 1 => deny\n").unwrap();
    assert_eq!(send(&mut p, &mut pool, 0, &f, 0).0, Verdict::Drop(DropReason::AclDeny));
    p.load_entries("x", "table acl clear\n").unwrap();
    assert_eq!(send(&mut p, &mut pool, 0, &f, 0).0, Verdict::Queued(1), "cleared: nothing denies");
}
