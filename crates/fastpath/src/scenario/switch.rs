//! The `switch-acl` scenario: hosts behind port 0 send to hosts behind port 1 through the MAC
//! table, the ACL (0, 24 or N rules) and the traffic manager. The hosts behind port 1 announce
//! themselves first (a gratuitous ARP each, as hosts do when they come up), so the benchmark
//! measures forwarding to learned addresses, not flooding.

use super::Scenario;
use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::ArpRepr;
use fastpath_packet::{Batch, Pool, BATCH_MAX};
use fastpath_pipeline::Pipeline;
use fastpath_tables::acl::classbench::{generate, Kind};
use fastpath_tables::acl::FieldMatch;
use std::fmt::Write;
use std::net::Ipv4Addr;

/// The 24 rules of the switch tests.
pub const ACL24: &str = include_str!("../../../../testdata/switch-acl/acl24.txt");

/// Host `f`'s MAC behind port `side` (0 or 1).
fn host(side: u8, f: u32) -> [u8; 6] {
    [0x02, 0, side, (f >> 16) as u8, (f >> 8) as u8, f as u8]
}

/// Flow `f`'s frame: host f behind port 0 to host f behind port 1, UDP to port 9 (which no rule
/// of `acl24.txt` matches).
pub fn frame(f: u32, len: usize) -> Vec<u8> {
    FrameBuilder::eth(host(1, f), host(0, f))
        .ipv4(Ipv4Addr::from(0x0a00_0000 | f), Ipv4Addr::from(0x0a80_0000 | f))
        .udp(1024 + (f % 50000) as u16, 9)
        .frame_len(len)
        .build()
}

/// `n` ClassBench rules of flavour `kind` as entry commands for the `acl` table, on every port,
/// permitting: the bench traffic does not match them (their addresses are random), so they cost
/// lookups only. Rules whose addresses are not prefixes are left out.
pub fn generated_rules(kind: Kind, n: usize, seed: u64) -> String {
    let mut out = String::new();
    for (i, r) in generate(kind, n, seed).iter().enumerate() {
        let [sip, dip, _sport, dport, proto] = r.fields.as_slice() else { continue };
        // A prefix is a range [lo, lo + 2^k - 1] with lo aligned (as ClassBench writes them).
        let addr = |f: &FieldMatch| {
            let (lo, hi) = f.bounds(32);
            let host = hi.wrapping_sub(lo);
            (f.is_range(32) && host & host.wrapping_add(1) == 0 && lo & host == 0)
                .then(|| format!("{}/{}", Ipv4Addr::from(lo), 32 - host.count_ones()))
        };
        let (Some(s), Some(d)) = (addr(sip), addr(dip)) else { continue };
        let p = match *proto {
            FieldMatch::Masked { mask: 0, .. } => "*".to_string(),
            FieldMatch::Masked { value, mask } => format!("{value}/0x{mask:x}"),
            FieldMatch::Range { lo, hi } if lo == hi => format!("{lo}/0xff"),
            FieldMatch::Range { .. } => "*".to_string(),
        };
        let (lo, hi) = dport.bounds(16);
        let _ = writeln!(out, "table acl add * {s} {d} {p} {lo}..{hi} priority {} => no_action", 100 + i);
    }
    out
}

/// Loads `rules` ACL rules (0, the 24 of the switch tests, or that many generated ones) and
/// teaches the switch where the `flows` hosts behind port 1 are.
pub fn build(mut pipe: Pipeline, flows: u32, rules: usize, seed: u64) -> Result<Scenario, String> {
    pipe.set_ports(2)?;
    let entries = match rules {
        0 => String::new(),
        24 => ACL24.to_string(),
        n => generated_rules(Kind::Acl, n, seed),
    };
    let loaded = pipe.load_entries("switch-acl rules", &entries).map_err(|e| e.to_string())?;
    // Each host behind port 1 announces itself with a gratuitous ARP (a broadcast, flooded to
    // port 0 and freed).
    let mut pool = Pool::new(2 * BATCH_MAX);
    let mut b = Batch::new();
    let mut f = 0;
    while f < flows {
        b.clear();
        while f < flows && !b.is_full() {
            let h = pool.alloc().ok_or("switch-acl: priming pool ran dry")?;
            let ip = Ipv4Addr::from(0x0a80_0000 | f);
            let hello = FrameBuilder::eth([0xff; 6], host(1, f)).arp(ArpRepr::request(host(1, f), ip, ip)).build();
            pool.set_data(h, &hello);
            b.push(h, 1);
            f += 1;
        }
        pipe.process(&mut pool, &mut b, 0);
        for i in 0..b.len() {
            if !matches!(b.verdict(i), fastpath_packet::Verdict::Queued(_)) {
                pool.free(b.handle(i));
            }
        }
        while pipe.egress(0, &mut pool, &mut b, 0) > 0 {
            pool.free_bulk(b.handles());
        }
    }
    pipe.reset_stats();
    Ok(Scenario { pipe, frame: Box::new(frame), config: serde_json::json!({ "ports": 2, "acl_rules": loaded, "learned_hosts": flows }) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_rules_load_and_the_traffic_reaches_the_learned_port() {
        let text = super::super::PIPELINES.iter().find(|(n, _)| *n == "switch-acl").unwrap().1;
        let prog = fastpath_pipeline::compile("switch-acl.toml", text).unwrap();
        for rules in [0, 24, 1000] {
            let s = build(prog.instantiate(), 100, rules, 1).unwrap();
            assert_eq!(s.config["acl_rules"], if rules == 0 { 0 } else { rules }, "every generated rule converts");
            let mut pipe = s.pipe;
            let mut pool = Pool::new(64);
            let mut b = Batch::new();
            for flow in 0..10 {
                let h = pool.alloc().unwrap();
                pool.set_data(h, &(s.frame)(flow * 7, 64));
                b.push(h, 0);
            }
            pipe.process(&mut pool, &mut b, 1);
            assert!(b.verdicts().iter().all(|v| *v == fastpath_packet::Verdict::Queued(1)), "{:?}", b.verdicts());
            let fdb = pipe.stats().into_iter().find(|(n, _)| n == "fdb").unwrap().1;
            assert_eq!((fdb.pkts_in, fdb.pkts_out), (10, 10));
            assert!(pipe.show_plan().contains("flooded 100"), "only the hellos were flooded: {}", pipe.show_plan());
        }
    }
}
