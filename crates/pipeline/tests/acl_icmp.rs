//! Classifier tables with an `l4.dport` range key and packets that have no ports (ICMP): the
//! missing port reads as 0 (Open vSwitch's flow key does the same), so a rule with a wildcard
//! port range applies to ping, and a rule with a real port range does not. Shown on the
//! `sdn-overlay` pipeline, whose stateful inbound ACL must let a tenant's ping through and its
//! echo replies back (the lab's overlay test pings through it between kernel VXLAN peers).

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::{Batch, DropReason, Pool, Verdict};
use fastpath_pipeline::Pipeline;
use std::net::Ipv4Addr;

const A_MAC: [u8; 6] = [0x02, 0, 0xc6, 0x13, 0x64, 0x01];
const B_MAC: [u8; 6] = [0x02, 0, 0xc6, 0x13, 0x64, 0x02];
const A: Ipv4Addr = Ipv4Addr::new(198, 19, 100, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 19, 100, 2);

fn overlay(entries: &str) -> Pipeline {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let text = std::fs::read_to_string(format!("{root}pipelines/sdn-overlay.toml")).unwrap().replace("size = 5000000\n", "size = 1024\n");
    let mut p = fastpath_pipeline::compile("sdn-overlay.toml", &text).unwrap_or_else(|e| panic!("{e}")).instantiate();
    let common = "\
table vni_map add 100 => set_vnet(1)
table local_mac add 02:00:c6:13:64:01 => local_mac(1)
table local_mac add 02:00:c6:13:64:02 => local_mac(2)
table ca_pa add 1 198.19.100.2 => to_tunnel(2)
table ca_pa add 1 198.19.100.1 => to_tunnel(1)
table tunnels add 1 => encap(02:00:00:00:0e:01, 02:00:00:00:0e:00, 198.18.1.254, 198.18.1.1, 100, 0)
table tunnels add 2 => encap(02:00:00:00:0e:02, 02:00:00:00:0e:00, 198.18.2.254, 198.18.2.1, 100, 1)
";
    p.load_entries("e", &format!("{common}{entries}")).unwrap();
    p
}

/// A VXLAN frame (VNI 100) carrying an ICMP echo request (`reply == false`) or reply.
fn echo(from_a: bool, reply: bool, id: u16) -> Vec<u8> {
    let (smac, dmac, src, dst) = if from_a { (A_MAC, B_MAC, A, B) } else { (B_MAC, A_MAC, B, A) };
    let mut f = FrameBuilder::eth([2, 0, 0, 0, 0xe, 0], [2, 0, 0, 0, 0xe, 9])
        .ipv4(Ipv4Addr::new(198, 18, 1, 1), Ipv4Addr::new(198, 18, 1, 254))
        .udp(50000, 4789)
        .vxlan(100)
        .inner_eth(dmac, smac)
        .ipv4(src, dst)
        .icmp_echo(id, 1)
        .payload(b"ping")
        .build();
    if reply {
        // Type 8 (request) -> 0 (reply): the ICMP header follows 50 outer + 14 + 20 inner bytes;
        // fix the ICMP checksum by the difference (RFC 1624: ~(~HC + ~m + m')).
        let at = 50 + 14 + 20;
        f[at] = 0;
        let old = u16::from_be_bytes([f[at + 2], f[at + 3]]);
        let sum = u32::from(!old) + u32::from(!0x0800u16); // + the new word, 0x0000
        let sum = (sum & 0xffff) + (sum >> 16);
        let sum = (sum & 0xffff) + (sum >> 16);
        f[at + 2..at + 4].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    }
    f
}

fn one(p: &mut Pipeline, f: &[u8]) -> Verdict {
    let mut pool = Pool::new(8);
    let mut b = Batch::new();
    let h = pool.alloc().unwrap();
    pool.set_data(h, f);
    assert!(b.push(h, 0));
    p.process(&mut pool, &mut b, 1_000_000);
    b.verdict(0)
}

fn drops(p: &Pipeline, r: DropReason) -> u64 {
    p.stats().iter().map(|(_, s)| s.drops[r as usize]).sum()
}

#[test]
fn ping_matches_a_wildcard_port_rule_and_its_replies_return() {
    let mut p = overlay("table acl_in add 198.19.100.1/32 198.19.100.2/32 * * priority 10 => allow\n");
    assert_eq!(one(&mut p, &echo(true, false, 7)), Verdict::Tx(1), "A's echo request is allowed");
    assert_eq!(one(&mut p, &echo(false, true, 7)), Verdict::Tx(0), "B's echo reply returns (established)");
    assert_eq!(drops(&p, DropReason::AclDeny), 0);
    // An echo request B -> A opens a new connection that no rule allows.
    assert!(matches!(one(&mut p, &echo(false, false, 8)), Verdict::Drop(DropReason::AclDeny)));
}

#[test]
fn a_rule_with_a_real_port_range_does_not_match_icmp() {
    let mut p = overlay(
        "table acl_in add 198.19.100.1/32 198.19.100.2/32 5201..5201 * priority 10 => allow\n\
         table acl_in add 198.19.100.1/32 198.19.100.2/32 * 1/0xff priority 20 => deny\n",
    );
    assert!(matches!(one(&mut p, &echo(true, false, 9)), Verdict::Drop(DropReason::AclDeny)));
    assert_eq!(drops(&p, DropReason::AclDeny), 1);
}
