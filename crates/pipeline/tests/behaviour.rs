//! Packet-in / packet-out behaviour of the compiler and executor on real frames: the reference
//! pipelines, every table engine, branches, primitives, and exact per-stage drop counters.
//! Frames come from `FrameBuilder`; outputs are re-parsed with the checked header views and
//! checksums recomputed independently (`csum`). The tshark-checked pcap tests live with the
//! binary (`crates/fastpath/tests`).

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{self, IpProto, Ipv4Repr, TcpFlags};
use fastpath_packet::{csum, Batch, DropReason, Pool, Verdict};
use fastpath_pipeline::Pipeline;
use std::net::{Ipv4Addr, Ipv6Addr};

const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

fn pipeline(path: &str) -> Pipeline {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let text = std::fs::read_to_string(format!("{root}{path}")).unwrap();
    fastpath_pipeline::compile(path, &text).unwrap_or_else(|e| panic!("{e}")).instantiate()
}

fn inline(spec: &str) -> Pipeline {
    fastpath_pipeline::compile("inline.toml", spec).unwrap_or_else(|e| panic!("{e}")).instantiate()
}

/// Runs frames (with input ports) through `p` in one batch; returns verdicts and output bytes.
fn run(p: &mut Pipeline, frames: &[(u16, Vec<u8>)]) -> Vec<(Verdict, Vec<u8>)> {
    let mut pool = Pool::new(512);
    let mut b = Batch::new();
    for (port, f) in frames {
        let h = pool.alloc().unwrap();
        pool.set_data(h, f);
        assert!(b.push(h, *port));
    }
    p.process(&mut pool, &mut b, 1_000_000);
    (0..b.len()).map(|i| (b.verdict(i), pool.data(b.handle(i)).to_vec())).collect()
}

/// The verdicts of [`run`].
fn verdicts(p: &mut Pipeline, frames: &[(u16, Vec<u8>)]) -> Vec<Verdict> {
    run(p, frames).into_iter().map(|(v, _)| v).collect()
}

fn drops(p: &Pipeline, stage: &str, r: DropReason) -> u64 {
    p.stats().into_iter().find(|(n, _)| n == stage).map_or(0, |(_, s)| s.drops[r as usize])
}

fn udp4(src: &str, dst: &str, ttl: u8) -> Vec<u8> {
    let (s, d): (Ipv4Addr, Ipv4Addr) = (src.parse().unwrap(), dst.parse().unwrap());
    let mut r = Ipv4Repr::new(s, d, IpProto::UDP, 0);
    r.ttl = ttl;
    FrameBuilder::eth(A, B).ipv4_with(r).udp(1024, 53).frame_len(64).build()
}

fn ipv4_ok(frame: &[u8]) -> hdr::Ipv4<'_> {
    let eth = hdr::Eth::parse(frame).unwrap();
    let ip = hdr::Ipv4::parse(eth.payload()).unwrap();
    assert!(ip.checksum_ok(), "IPv4 header checksum must verify after rewriting");
    ip
}

#[test]
fn l2fwd_swaps_macs_and_forwards_to_the_peer_port() {
    let mut p = pipeline("pipelines/l2fwd.toml");
    p.load_entries("e", "table port_pair add 0 => forward(1)\ntable port_pair add 1 => forward(0)\n").unwrap();
    let f = udp4("198.18.0.1", "198.19.0.1", 64);
    let out = run(&mut p, &[(0, f.clone()), (1, f.clone()), (7, f.clone())]);
    assert_eq!(out[0].0, Verdict::Tx(1));
    assert_eq!(out[1].0, Verdict::Tx(0));
    assert_eq!(out[2].0, Verdict::Drop(DropReason::PortDown));
    let eth = hdr::Eth::parse(&out[0].1).unwrap();
    assert_eq!((eth.dst(), eth.src()), (B, A));
    assert_eq!(&out[0].1[12..], &f[12..], "only the MACs change");
    assert_eq!(drops(&p, "port_pair", DropReason::PortDown), 1);
}

fn router() -> Pipeline {
    let mut p = pipeline("pipelines/router.toml");
    p.load_entries(
        "routes",
        "table fib4 add 198.18.0.0/15 => nexthop(1, 02:00:00:00:01:01, 02:00:00:00:00:01)\n\
         table fib4 add 198.18.5.0/24 => nexthop(2, 02:00:00:00:01:02, 02:00:00:00:00:01)\n\
         table fib6 add 2001:2::/48 => nexthop(3, 02:00:00:00:01:03, 02:00:00:00:00:01)\n",
    )
    .unwrap();
    p
}

#[test]
fn router_forwards_by_longest_prefix_and_rewrites_ttl_checksum_and_macs() {
    let mut p = router();
    let out = run(&mut p, &[(0, udp4("10.0.0.1", "198.19.7.7", 64)), (0, udp4("10.0.0.1", "198.18.5.9", 2))]);
    assert_eq!(out[0].0, Verdict::Tx(1));
    assert_eq!(out[1].0, Verdict::Tx(2), "the /24 is longer than the /15");
    let ip = ipv4_ok(&out[0].1);
    assert_eq!(ip.ttl(), 63);
    assert_eq!(ipv4_ok(&out[1].1).ttl(), 1);
    let eth = hdr::Eth::parse(&out[1].1).unwrap();
    assert_eq!(eth.dst(), [2, 0, 0, 0, 1, 2]);
    assert_eq!(eth.src(), [2, 0, 0, 0, 0, 1]);
    // The UDP checksum is unchanged and still verifies: TTL is not in the pseudo-header.
    let udp = hdr::Udp::parse(ip.payload()).unwrap();
    assert!(udp.checksum_ok_v4(ip.src_bytes(), ip.dst_bytes()));
}

#[test]
fn router_counts_every_loss_under_its_reason() {
    let mut p = router();
    let mut bad_csum = udp4("10.0.0.1", "198.19.0.1", 64);
    bad_csum[14 + 10] ^= 0xff;
    let mut truncated = udp4("10.0.0.1", "198.19.0.1", 64);
    truncated.truncate(14 + 12);
    let arp =
        FrameBuilder::eth([0xff; 6], A).arp(hdr::ArpRepr::request(A, Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2))).build();
    let frames = vec![
        (0, udp4("10.0.0.1", "198.19.0.1", 1)),   // TTL would reach 0
        (0, udp4("10.0.0.1", "203.0.113.1", 64)), // no route
        (0, bad_csum),
        (0, truncated),
        (0, arp),
        (0, vec![0u8; 10]), // shorter than Ethernet
    ];
    let out = run(&mut p, &frames);
    let want = [
        DropReason::TtlExpired,
        DropReason::NoRoute,
        DropReason::Ipv4BadChecksum,
        DropReason::Ipv4Truncated,
        DropReason::NotIp,
        DropReason::EthTruncated,
    ];
    for (o, w) in out.iter().zip(want) {
        assert_eq!(o.0, Verdict::Drop(w));
    }
    assert_eq!(drops(&p, "ttl-dec", DropReason::TtlExpired), 1);
    assert_eq!(drops(&p, "fib4", DropReason::NoRoute), 1);
    assert_eq!(drops(&p, "parser", DropReason::Ipv4BadChecksum), 1);
    assert_eq!(drops(&p, "parser", DropReason::Ipv4Truncated), 1);
    assert_eq!(drops(&p, "parser", DropReason::EthTruncated), 1);
    assert_eq!(drops(&p, "drop", DropReason::NotIp), 1);
}

#[test]
fn router_routes_ipv6_and_decrements_hop_limit() {
    let mut p = router();
    let f = FrameBuilder::eth(A, B)
        .ipv6("2001:2::1".parse::<Ipv6Addr>().unwrap(), "2001:2:0:1::9".parse().unwrap())
        .udp(1000, 2000)
        .frame_len(90)
        .build();
    let miss = FrameBuilder::eth(A, B).ipv6("2001:2::1".parse::<Ipv6Addr>().unwrap(), "2001:3::9".parse().unwrap()).udp(1, 2).build();
    let out = run(&mut p, &[(0, f), (0, miss)]);
    assert_eq!(out[0].0, Verdict::Tx(3));
    assert_eq!(out[1].0, Verdict::Drop(DropReason::NoRoute));
    let eth = hdr::Eth::parse(&out[0].1).unwrap();
    let ip = hdr::Ipv6::parse(eth.payload()).unwrap();
    assert_eq!(ip.hop_limit(), 63);
    assert_eq!(eth.dst(), [2, 0, 0, 0, 1, 3]);
}

#[test]
fn router_routes_vlan_tagged_ipv4() {
    let mut p = router();
    let f = FrameBuilder::eth(A, B).vlan(100, 3).ipv4("10.0.0.1".parse().unwrap(), "198.18.5.1".parse().unwrap()).udp(1, 2).build();
    let out = run(&mut p, &[(0, f)]);
    assert_eq!(out[0].0, Verdict::Tx(2));
    let eth = hdr::Eth::parse(&out[0].1).unwrap();
    let tag = hdr::Vlan::parse(eth.payload()).unwrap();
    assert_eq!(tag.vid(), 100);
    let ip = hdr::Ipv4::parse(tag.payload()).unwrap();
    assert!(ip.checksum_ok());
    assert_eq!(ip.ttl(), 63);
}

const ACL: &str = r#"
name = "acl"
[parser]
headers = ["eth", "ipv4", "udp", "tcp"]
[[action]]
name = "remark"
params = ["dscp"]
body = "set_dscp dscp; forward 1"
[[table]]
name = "acl"
key = [
  { field = "ipv4.src", match = "ternary" },
  { field = "ipv4.dst", match = "ternary" },
  { field = "l4.dport", match = "range" },
  { field = "ipv4.proto", match = "ternary" },
]
actions = ["remark", "drop", "forward"]
size = 64
default = "forward(9)"
[control]
ingress = '''
if ipv4.valid:
    apply acl
    if acl.miss:
        count misses
'''
[[counter]]
name = "misses"
size = 1
"#;

#[test]
fn acl_priorities_ranges_masks_and_remarking() {
    let mut p = inline(ACL);
    p.load_entries(
        "rules",
        "table acl add 10.0.0.0/8 * 80..90 6/0xff priority 10 => drop\n\
         table acl add 10.1.0.0/16 * 0..65535 * priority 5 => remark(46)\n\
         table acl add * 198.51.100.0/24 * 17/0xff priority 20 => forward(3)\n",
    )
    .unwrap();
    let tcp = |s: &str, d: &str, port| {
        FrameBuilder::eth(A, B).ipv4(s.parse().unwrap(), d.parse().unwrap()).tcp(999, port, TcpFlags::SYN, 1, 0).build()
    };
    let out = run(
        &mut p,
        &[
            (0, tcp("10.2.0.1", "192.0.2.1", 85)),       // rule 1: drop
            (0, tcp("10.1.0.1", "192.0.2.1", 85)),       // rules 1 and 2 match; priority 5 wins: remark
            (0, tcp("10.2.0.1", "192.0.2.1", 91)),       // port outside the range: default
            (0, udp4("172.16.0.1", "198.51.100.7", 64)), // rule 3
            (0, tcp("172.16.0.1", "198.51.100.7", 80)),  // proto mismatch: default
        ],
    );
    assert_eq!(out[0].0, Verdict::Drop(DropReason::ActionDrop));
    assert_eq!(out[1].0, Verdict::Tx(1));
    assert_eq!(ipv4_ok(&out[1].1).dscp(), 46);
    // TCP checksum unaffected by DSCP (not in the pseudo-header) and still valid.
    let ip = ipv4_ok(&out[1].1);
    let seg = ip.payload();
    assert_eq!(csum::l4_v4(ip.src_bytes(), ip.dst_bytes(), 6, seg), 0);
    assert_eq!(out[2].0, Verdict::Tx(9));
    assert_eq!(out[3].0, Verdict::Tx(3));
    assert_eq!(out[4].0, Verdict::Tx(9));
    assert_eq!(p.objects().counter("misses").unwrap().values[0].0, 2);
    assert_eq!(p.table("acl").unwrap().hit_miss(), (3, 2));
}

/// The overlay's classifier key (source, destination, destination port as a range, protocol).
const ACL_KEY: &str = r#"key = [
  { field = "ipv4.src", match = "ternary" },
  { field = "ipv4.dst", match = "ternary" },
  { field = "l4.dport", match = "range" },
  { field = "ipv4.proto", match = "ternary" },
]"#;

/// Two classifier tables on one key; `in_action_body` is the first table's action.
fn two_acls(in_action_body: &str) -> String {
    format!(
        r#"
name = "two-acls"
[parser]
headers = ["eth", "ipv4", "udp", "tcp"]
[[action]]
name = "deny_in"
body = "{in_action_body}"
[[action]]
name = "deny_out"
body = "drop no_route"
[[action]]
name = "fwd"
params = ["port"]
body = "forward port"
[[table]]
name = "acl_in"
{ACL_KEY}
actions = ["no_action", "deny_in"]
size = 64
default = "no_action"
[[table]]
name = "acl_out"
{ACL_KEY}
actions = ["deny_out", "fwd"]
size = 64
default = "fwd(2)"
[control]
ingress = '''
apply acl_in
apply acl_out
'''
"#
    )
}

/// Runs `batches` batches of 128 UDP frames with keys never seen before (so the classifiers'
/// caches stand aside after the first and each table classifies directly: at least 15 in 16
/// lookups must miss, and a frame without the key's headers counts as a lookup, not a miss),
/// frame `j` of batch `n` from 10.0.N.J to 192.0.2.(J % 4) port 1000 + J, frames 63 and 127 not
/// IPv4; checks
/// each verdict against `expect(src last byte, dst last byte, dport)` (`None`: not IPv4) and
/// against the reference interpreter.
fn run_two_acls(spec: &str, rules: &str, batches: u8, expect: impl Fn(Option<(u8, u8, u16)>) -> Verdict) {
    let prog = fastpath_pipeline::compile("two-acls.toml", spec).unwrap_or_else(|e| panic!("{e}"));
    let (mut p, mut r) = (prog.instantiate(), prog.instantiate_reference());
    p.load_entries("rules", rules).unwrap();
    r.load_entries("rules", rules).unwrap();
    for n in 0..batches {
        let mut frames = Vec::new();
        let mut want = Vec::new();
        for j in 0..128u8 {
            if j % 64 == 63 {
                let v6 = FrameBuilder::eth(A, B).ipv6("2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap()).udp(1, 2).build();
                frames.push((0, v6));
                want.push(expect(None));
                continue;
            }
            let (src, dst, dport) = (Ipv4Addr::new(10, 0, n, j), Ipv4Addr::new(192, 0, 2, j % 4), 1000 + u16::from(j));
            frames.push((0, FrameBuilder::eth(A, B).ipv4(src, dst).udp(5000, dport).build()));
            want.push(expect(Some((j, j % 4, dport))));
        }
        let (got, reference) = (run(&mut p, &frames), run(&mut r, &frames));
        for (j, ((g, _), w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "batch {n} frame {j}");
        }
        assert_eq!(got, reference, "batch {n}: specialised against reference");
    }
}

/// `acl_in` then `acl_out` on the same key, nothing between that could change it: the plan
/// reads the key once (the second table takes the first's), and each table still applies its
/// own rules to each packet's own key, batch after batch, with frames whose key misses mixed in.
#[test]
fn two_classifiers_on_one_key_read_it_once_and_apply_their_own_rules() {
    let spec = two_acls("drop acl_deny");
    let plan = fastpath_pipeline::compile("two-acls.toml", &spec).unwrap().instantiate().show_plan();
    assert!(plan.contains("(key kept for the next table)") && plan.contains("(key from the previous table)"), "{plan}");
    let rules = "table acl_in add 10.0.0.0/8 * 1000..1001 * priority 10 => deny_in\n\
                 table acl_out add * 192.0.2.1/32 * 17/0xff priority 10 => deny_out\n\
                 table acl_out add * 192.0.2.2/32 1020..1040 * priority 20 => fwd(3)\n";
    run_two_acls(&spec, rules, 5, |k| match k {
        None => Verdict::Tx(2),
        Some((j, _, _)) if j <= 1 => Verdict::Drop(DropReason::AclDeny),
        Some((_, 1, _)) => Verdict::Drop(DropReason::NoRoute),
        Some((_, 2, 1020..=1040)) => Verdict::Tx(3),
        Some(_) => Verdict::Tx(2),
    });
}

/// When the first table's action can change a key field, the second reads its key from the
/// packet: here `acl_in` rewrites the destination that `acl_out` denies.
#[test]
fn a_classifier_after_one_that_rewrites_its_key_reads_the_packet() {
    let spec = two_acls("set ipv4.dst = 198.51.100.1");
    let plan = fastpath_pipeline::compile("two-acls.toml", &spec).unwrap().instantiate().show_plan();
    // (The first takes its key from the parser, which nothing before it can change.)
    assert!(!plan.contains("(key kept") && !plan.contains("(key from the previous"), "{plan}");
    let rules = "table acl_in add * * 1000..1001 * priority 10 => deny_in\n\
                 table acl_out add * 198.51.100.1/32 * * priority 10 => deny_out\n";
    run_two_acls(&spec, rules, 3, |k| match k {
        None => Verdict::Tx(2),
        Some((_, _, 1000..=1001)) => Verdict::Drop(DropReason::NoRoute),
        Some(_) => Verdict::Tx(2),
    });
}

/// Tables whose keys differ only in how a field matches (`range` reads a missing port as 0,
/// `ternary` misses) each read their own.
#[test]
fn classifiers_share_a_key_only_when_it_is_the_same() {
    let spec =
        two_acls("drop acl_deny").replacen(r#"{ field = "l4.dport", match = "range" }"#, r#"{ field = "l4.dport", match = "ternary" }"#, 1);
    let plan = fastpath_pipeline::compile("two-acls.toml", &spec).unwrap_or_else(|e| panic!("{e}")).instantiate().show_plan();
    assert!(!plan.contains("(key"), "{plan}");
}

/// A stateful ACL steering by `ct.verdict` right after it (no `ct_load`).
fn ct_verdict_spec() -> String {
    format!(
        r#"
name = "ct-verdict"
[parser]
headers = ["eth", "ipv4", "udp", "tcp"]
[[conntrack]]
name = "flows"
size = 1024
[[action]]
name = "allow"
body = "ct_commit flows 1"
[[action]]
name = "mark"
params = ["v"]
body = "ct_commit flows v"
[[table]]
name = "acl"
{ACL_KEY}
actions = ["allow", "mark"]
size = 64
default = "allow"
[control]
ingress = '''
conntrack flows
if ct.new:
    apply acl
if ct.verdict == 1:
    forward 1
elif ct.verdict == 7:
    forward 7
else:
    drop acl_deny
'''
"#
    )
}

/// `ct_commit` with a constant verdict (the action's own or an entry's argument) caches it in
/// the flow and in `ct.verdict` at once: the connection's first packet is steered by the
/// verdict just committed, its later packets by the one the flow kept.
#[test]
fn ct_commit_verdicts_steer_the_first_packet_and_stay_with_the_flow() {
    let prog = fastpath_pipeline::compile("ct-verdict.toml", &ct_verdict_spec()).unwrap_or_else(|e| panic!("{e}"));
    let rules = "table acl add * * 80..80 * priority 10 => mark(7)\n";
    for mut p in [prog.instantiate(), prog.instantiate_reference()] {
        p.load_entries("rules", rules).unwrap();
        let udp =
            |sport, dport| FrameBuilder::eth(A, B).ipv4("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()).udp(sport, dport).build();
        let frames = [(0, udp(1000, 80)), (0, udp(1001, 53)), (0, udp(1002, 80))];
        for round in 0..2 {
            assert_eq!(verdicts(&mut p, &frames), [Verdict::Tx(7), Verdict::Tx(1), Verdict::Tx(7)], "round {round}");
        }
    }
}

/// A conntrack zone read from a metadata register (the overlay's `meta.vnet`, which the stage
/// reads straight from the register): one 5-tuple in two zones is two connections.
#[test]
fn a_zone_from_metadata_keeps_the_same_tuple_apart() {
    let spec = r#"
name = "zones"
[parser]
headers = ["eth", "ipv4", "udp", "tcp"]
[metadata]
zone = 16
[[conntrack]]
name = "flows"
size = 1024
[control]
ingress = '''
if meta.in_port == 1:
    set meta.zone = 1
else:
    set meta.zone = 2
conntrack flows meta.zone
if ct.new:
    forward 5
elif ct.reply:
    forward 6
else:
    forward 7
'''
"#;
    let prog = fastpath_pipeline::compile("zones.toml", spec).unwrap_or_else(|e| panic!("{e}"));
    let there = || udp4("10.0.0.1", "10.0.0.2", 64);
    let back = || FrameBuilder::eth(B, A).ipv4("10.0.0.2".parse().unwrap(), "10.0.0.1".parse().unwrap()).udp(53, 1024).build();
    for mut p in [prog.instantiate(), prog.instantiate_reference()] {
        let got = verdicts(&mut p, &[(1, there()), (2, there())]);
        assert_eq!(got, [Verdict::Tx(5), Verdict::Tx(5)], "the same tuple opens a connection in each zone");
        let got = verdicts(&mut p, &[(2, back()), (1, there()), (3, back())]);
        assert_eq!(got, [Verdict::Tx(6), Verdict::Tx(7), Verdict::Tx(6)]);
    }
}

/// Colour-aware meters keep a packet's incoming colour (RFC 2697 §3, RFC 2698 §3: a
/// pre-coloured packet is never re-marked to a better colour); a blind one ignores it. Both
/// kinds, compiled and reference.
#[test]
fn colour_aware_meters_keep_the_incoming_colour_and_blind_ones_ignore_it() {
    let spec = r#"
name = "colours"
[parser]
headers = ["eth", "ipv4", "udp", "tcp"]
[[meter]]
name = "aware"
kind = "srtcm"
size = 1
color_aware = true
[[meter]]
name = "blind"
kind = "srtcm"
size = 1
[[meter]]
name = "tr_aware"
kind = "trtcm"
size = 1
color_aware = true
[control]
ingress = '''
if meta.in_port == 1 or meta.in_port == 3:
    set meta.color = 1
elif meta.in_port == 5:
    set meta.color = 2
if meta.in_port == 2 or meta.in_port == 3:
    meter blind 0
elif meta.in_port == 4 or meta.in_port == 5:
    meter tr_aware 0
else:
    meter aware 0
if meta.color == 0:
    forward 10
elif meta.color == 1:
    forward 11
else:
    forward 12
'''
"#;
    let prog = fastpath_pipeline::compile("colours.toml", spec).unwrap_or_else(|e| panic!("{e}"));
    let rates = "meter aware 0 cir 10000000000 cbs 1000000 ebs 1000000\n\
                 meter blind 0 cir 10000000000 cbs 1000000 ebs 1000000\n\
                 meter tr_aware 0 cir 1000000000 cbs 1000000 pir 2000000000 pbs 1000000\n";
    for mut p in [prog.instantiate(), prog.instantiate_reference()] {
        p.load_entries("rates", rates).unwrap();
        let frames: Vec<(u16, Vec<u8>)> = (0..6).map(|port| (port, udp4("10.0.0.1", "10.0.0.2", 64))).collect();
        let got = verdicts(&mut p, &frames);
        let want = [10, 11, 10, 10, 10, 12].map(Verdict::Tx);
        assert_eq!(got, want);
    }
}

/// An allowlist: entries whose action does nothing, a default that does nothing, and the
/// hit tested afterwards. The classifier pass finishes such hits itself (the action pass only
/// visits hits with work to do), so the hit bit and the hit count must still come out right.
#[test]
fn acl_hits_on_empty_actions_are_still_hits() {
    let mut p = inline(
        r#"
name = "allow"
[parser]
headers = ["eth", "ipv4", "udp", "tcp"]
[[table]]
name = "acl"
key = [
  { field = "ipv4.src", match = "ternary" },
  { field = "l4.dport", match = "range" },
]
actions = ["no_action", "drop"]
size = 64
default = "no_action"
[control]
ingress = '''
if ipv4.valid:
    apply acl
    if acl.hit:
        count allowed
        forward 1
    else:
        forward 2
'''
[[counter]]
name = "allowed"
size = 1
"#,
    );
    p.load_entries(
        "rules",
        "table acl add 10.0.0.0/8 0..1023 priority 10 => no_action\n\
         table acl add 192.0.2.0/24 * priority 20 => no_action\n\
         table acl add 10.1.0.0/16 53..53 priority 5 => drop\n",
    )
    .unwrap();
    // Enough packets for the cache and the batch loops: 40 hits on empty entries (the
    // first two rules), 20 drops (the third), 20 misses.
    let mut frames = Vec::new();
    for k in 0..20u8 {
        frames.push((0, udp4(&format!("10.2.0.{k}"), "198.51.100.1", 64))); // rule 1 (port 53)
        frames.push((0, udp4(&format!("192.0.2.{k}"), "198.51.100.1", 64))); // rule 2
        frames.push((0, udp4(&format!("10.1.0.{k}"), "198.51.100.1", 64))); // rule 3 (port 53): drop
        frames.push((0, udp4(&format!("172.16.0.{k}"), "198.51.100.1", 64))); // no rule
    }
    let out = run(&mut p, &frames);
    for (i, (v, _)) in out.iter().enumerate() {
        let want = match i % 4 {
            0 | 1 => Verdict::Tx(1),
            2 => Verdict::Drop(DropReason::ActionDrop),
            _ => Verdict::Tx(2),
        };
        assert_eq!(*v, want, "frame {i}");
    }
    assert_eq!(p.objects().counter("allowed").unwrap().values[0].0, 40);
    assert_eq!(p.table("acl").unwrap().hit_miss(), (60, 20));
}

/// The control thread builds a classifier once; worker replicas adopt it (a pointer swap at a
/// batch boundary, no rebuild) and hand the one they replaced back to be freed elsewhere.
#[test]
fn a_replica_adopts_the_classifier_the_control_replica_built() {
    let ops = |p: &Pipeline, text: &str| -> Vec<fastpath_pipeline::entries::EntryOp> {
        text.lines().map(|l| p.program().parse_entry(l).unwrap_or_else(|e| panic!("{l}: {e:?}"))).collect()
    };
    let (mut control, mut worker) = (inline(ACL), inline(ACL));
    let first = ops(
        &control,
        "table acl add 10.0.0.0/8 * 80..90 6/0xff priority 10 => drop
         table acl add 10.1.0.0/16 * 0..65535 * priority 5 => remark(46)",
    );
    control.apply_ops(&first).unwrap();
    let built = control.built_classifiers(&first);
    assert_eq!(built.len(), 1);
    let mut retired = Vec::new();
    worker.apply_ops_prebuilt(&first, &built, &mut retired).unwrap();
    assert!(retired.is_empty(), "nothing was live before");
    let live = worker.table("acl").unwrap().built_classifier().unwrap();
    assert!(std::sync::Arc::ptr_eq(&live.acl, &built[0].1.acl), "the worker adopted, it did not rebuild");
    let tcp = |s: &str, port| {
        FrameBuilder::eth(A, B).ipv4(s.parse().unwrap(), "192.0.2.1".parse().unwrap()).tcp(999, port, TcpFlags::SYN, 1, 0).build()
    };
    let out = run(&mut worker, &[(0, tcp("10.2.0.1", 85)), (0, tcp("10.1.0.1", 85)), (0, tcp("10.2.0.1", 91))]);
    assert_eq!(out[0].0, Verdict::Drop(DropReason::ActionDrop));
    assert_eq!((out[1].0, ipv4_ok(&out[1].1).dscp()), (Verdict::Tx(1), 46));
    assert_eq!(out[2].0, Verdict::Tx(9));
    // A second change: the first classifier comes back to be freed by the caller.
    let second = ops(&control, "table acl del 10.0.0.0/8 * 80..90 6/0xff");
    control.apply_ops(&second).unwrap();
    let built2 = control.built_classifiers(&second);
    worker.apply_ops_prebuilt(&second, &built2, &mut retired).unwrap();
    assert_eq!(retired.len(), 1);
    assert!(std::sync::Arc::ptr_eq(&retired[0], &built[0].1.acl));
    let out = run(&mut worker, &[(0, tcp("10.2.0.1", 85))]);
    assert_eq!(out[0].0, Verdict::Tx(9), "the deleted rule is gone on the worker");
    assert_eq!(worker.table("acl").unwrap().len(), 1);

    // A replica whose action entries differ (another history: `forward(7)` interned first)
    // must not use a classifier whose rules index the control replica's entries: it builds its
    // own, and forwards by its own entries.
    let mut other = inline(ACL);
    other
        .apply_ops(&ops(&other, "table acl add 192.168.0.0/16 * * * priority 1 => forward(7)\ntable acl del 192.168.0.0/16 * * *"))
        .unwrap();
    let mut retired = Vec::new();
    other.apply_ops_prebuilt(&first, &built, &mut retired).unwrap();
    let own = other.table("acl").unwrap().built_classifier().unwrap();
    assert!(!std::sync::Arc::ptr_eq(&own.acl, &built[0].1.acl), "refused: built its own");
    let out = run(&mut other, &[(0, tcp("10.2.0.1", 85)), (0, tcp("10.1.0.1", 85))]);
    assert_eq!(out[0].0, Verdict::Drop(DropReason::ActionDrop));
    assert_eq!((out[1].0, ipv4_ok(&out[1].1).dscp()), (Verdict::Tx(1), 46));
}

/// `del` has no priority: it removes every rule with those fields, and the count follows.
#[test]
fn deleting_a_classifier_key_removes_each_of_its_priorities() {
    let mut p = inline(ACL);
    p.load_entries(
        "rules",
        "table acl add 10.0.0.0/8 * * * priority 10 => drop
table acl add 10.0.0.0/8 * * * priority 20 => forward(3)
",
    )
    .unwrap();
    assert_eq!(p.table("acl").unwrap().len(), 2);
    p.apply_command("table acl del 10.0.0.0/8 * * *").unwrap();
    assert_eq!(p.table("acl").unwrap().len(), 0);
}

#[test]
fn exact_and_direct_tables_with_set_and_vlan_push_pop() {
    let spec = r#"
name = "l2"
[parser]
headers = ["eth", "vlan", "ipv4", "udp"]
[[action]]
name = "tag"
params = ["vid", "port"]
body = "push_vlan vid 5; forward port"
[[action]]
name = "untag"
params = ["port"]
body = "pop_vlan; forward port"
[[table]]
name = "mac"
key = [{ field = "eth.dst", match = "exact" }]
actions = ["tag", "untag", "forward"]
size = 1024
default = "drop"
[control]
ingress = '''
apply mac
if meta.out_port == 4:
    set ipv4.dst = 192.0.2.99
'''
"#;
    let mut p = inline(spec);
    p.load_entries(
        "e",
        "table mac add 02:00:00:00:00:0a => tag(100, 2)\n\
         table mac add 02:00:00:00:00:0c => untag(3)\n\
         table mac add 02:00:00:00:00:0d => forward(4)\n",
    )
    .unwrap();
    let tagged = FrameBuilder::eth([2, 0, 0, 0, 0, 0x0c], B)
        .vlan(7, 0)
        .ipv4("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())
        .udp(5, 6)
        .build();
    let plain = udp4("198.18.0.1", "198.18.0.2", 64);
    let natted = FrameBuilder::eth([2, 0, 0, 0, 0, 0x0d], B)
        .ipv4("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())
        .udp(5, 6)
        .payload(b"hello")
        .build();
    let unknown =
        FrameBuilder::eth([2, 0, 0, 0, 0, 0x0e], B).ipv4("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap()).udp(5, 6).build();
    let out = run(&mut p, &[(0, plain.clone()), (0, tagged.clone()), (0, natted), (0, unknown)]);
    assert_eq!(out[0].0, Verdict::Tx(2));
    let eth = hdr::Eth::parse(&out[0].1).unwrap();
    let tag = hdr::Vlan::parse(eth.payload()).unwrap();
    assert_eq!((tag.vid(), tag.pcp()), (100, 5));
    assert_eq!(tag.payload(), &plain[14..], "the tag is inserted after the MACs, the rest unchanged");
    assert_eq!(out[1].0, Verdict::Tx(3));
    assert_eq!(&out[1].1[..12], &tagged[..12]);
    assert_eq!(&out[1].1[12..], &tagged[16..], "pop removes exactly the tag");
    assert_eq!(out[2].0, Verdict::Tx(4));
    let ip = ipv4_ok(&out[2].1);
    assert_eq!(ip.dst(), Ipv4Addr::new(192, 0, 2, 99));
    let udp = hdr::Udp::parse(ip.payload()).unwrap();
    assert!(udp.checksum_ok_v4(ip.src_bytes(), ip.dst_bytes()), "address rewrite keeps the UDP checksum valid");
    assert_eq!(out[3].0, Verdict::Drop(DropReason::TableMiss));
}

/// A table whose entries set registers: while every entry sets the same one, the action pass
/// stores their values straight from a list; entries of an action on another register, added
/// later, must still set theirs.
#[test]
fn a_table_of_register_sets_writes_each_entrys_own_register() {
    let spec = r#"
name = "regs"
[parser]
headers = ["eth", "ipv4", "udp"]
[metadata]
a = 16
b = 16
[[action]]
name = "set_a"
params = ["v"]
body = "set meta.a = v"
[[action]]
name = "set_b"
params = ["v"]
body = "set meta.b = v"
[[table]]
name = "m"
key = [{ field = "eth.src", match = "exact" }]
actions = ["set_a", "set_b"]
size = 64
default = "drop"
[control]
ingress = '''
apply m
if meta.a == 7:
    forward 1
elif meta.b == 9:
    forward 2
else:
    forward 3
'''
"#;
    let from = |last: u8| {
        FrameBuilder::eth(B, [2, 0, 0, 0, 0, last]).ipv4("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap()).udp(5, 6).build()
    };
    let frames = [(0, from(1)), (0, from(2)), (0, from(3)), (0, from(4))];
    let mut p = inline(spec);
    // Every entry sets meta.a.
    p.load_entries("e", "table m add 02:00:00:00:00:01 => set_a(7)\ntable m add 02:00:00:00:00:02 => set_a(5)\n").unwrap();
    let v = verdicts(&mut p, &frames);
    assert_eq!(v, [Verdict::Tx(1), Verdict::Tx(3), Verdict::Drop(DropReason::TableMiss), Verdict::Drop(DropReason::TableMiss)]);
    // Then entries that set meta.b.
    p.load_entries("f", "table m add 02:00:00:00:00:03 => set_b(9)\ntable m add 02:00:00:00:00:04 => set_b(7)\n").unwrap();
    let v = verdicts(&mut p, &frames);
    assert_eq!(v, [Verdict::Tx(1), Verdict::Tx(3), Verdict::Tx(2), Verdict::Tx(3)], "each entry sets its own register");
}

/// A table of register sets whose miss drops sets the register in its lookup's loop: a batch
/// of one key (hit or miss), a mixed batch, a packet without the key's header, and the hit bit
/// a later condition tests; the drops are counted as the table's.
#[test]
fn a_register_table_sets_hits_and_drops_misses_in_its_lookup() {
    let spec = r#"
name = "regs"
[parser]
headers = ["eth", "arp", "ipv4", "udp"]
[metadata]
a = 16
[[action]]
name = "set_a"
params = ["v"]
body = "set meta.a = v"
[[table]]
name = "m"
key = [{ field = "ipv4.dst", match = "exact" }]
actions = ["set_a"]
size = 64
default = "drop"
[control]
ingress = '''
apply m
if m.hit and meta.a == 7:
    forward 1
elif m.hit:
    forward 2
else:
    forward 3
'''
"#;
    let to = |dst: &str| udp4("198.18.0.1", dst, 64);
    let mut p = inline(spec);
    p.load_entries("e", "table m add 10.0.0.7 => set_a(7)\ntable m add 10.0.0.5 => set_a(5)\n").unwrap();
    let miss = Verdict::Drop(DropReason::TableMiss);
    let one: Vec<(u16, Vec<u8>)> = (0..40).map(|_| (0, to("10.0.0.7"))).collect();
    assert!(verdicts(&mut p, &one).iter().all(|v| *v == Verdict::Tx(1)), "a batch of one key that hits");
    let one: Vec<(u16, Vec<u8>)> = (0..40).map(|_| (0, to("10.0.0.9"))).collect();
    assert!(verdicts(&mut p, &one).iter().all(|v| *v == miss), "a batch of one key that misses");
    let arp =
        FrameBuilder::eth([0xff; 6], A).arp(hdr::ArpRepr::request(A, Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2))).build();
    let mixed = [(0, to("10.0.0.5")), (0, to("10.0.0.7")), (0, to("10.0.0.9")), (0, arp), (0, to("10.0.0.5"))];
    assert_eq!(verdicts(&mut p, &mixed), [Verdict::Tx(2), Verdict::Tx(1), miss, miss, Verdict::Tx(2)]);
    assert_eq!(drops(&p, "m", DropReason::TableMiss), 40 + 2, "each miss counted once");
}

#[test]
fn meters_colour_by_rate_and_drop_red() {
    let spec = r#"
name = "police"
[parser]
headers = ["eth"]
[[meter]]
name = "pol"
kind = "srtcm"
size = 4
[control]
ingress = '''
meter pol meta.in_port drop_red
forward 1
'''
"#;
    let mut p = inline(spec);
    // 1000 bytes/s committed, 200-byte committed burst, no excess: the third 100-byte frame is red.
    p.load_entries("m", "meter pol 0 cir 1000 cbs 200 ebs 0\n").unwrap();
    let f = vec![0u8; 100];
    let out = run(&mut p, &[(0, f.clone()), (0, f.clone()), (0, f.clone()), (1, f.clone())]);
    let v: Vec<Verdict> = out.iter().map(|o| o.0).collect();
    assert_eq!(v, vec![Verdict::Tx(1), Verdict::Tx(1), Verdict::Drop(DropReason::MeterRed), Verdict::Tx(1)]);
}

#[test]
fn a_packet_never_forwarded_is_dropped_as_no_verdict() {
    let mut p = inline("name = \"x\"\n[parser]\nheaders = [\"eth\"]\n[control]\ningress = \"set meta.tc = 3\"\n");
    let out = run(&mut p, &[(0, vec![0u8; 60])]);
    assert_eq!(out[0].0, Verdict::Drop(DropReason::NoVerdict));
    let end = p.stats().into_iter().find(|(n, _)| n == "end").unwrap().1;
    assert_eq!(end.drops[DropReason::NoVerdict as usize], 1);
}

#[test]
fn trace_shows_each_stage_key_and_verdict() {
    let mut p = router();
    p.trace_next(1);
    run(&mut p, &[(0, udp4("10.0.0.1", "198.18.5.9", 64)), (0, udp4("10.0.0.1", "198.18.5.9", 64))]);
    let t = p.take_trace();
    assert!(t.contains("Packet 1"), "{t}");
    assert!(!t.contains("Packet 2"), "only one packet was asked for:\n{t}");
    assert!(t.contains("fib4: key ipv4.dst=198.18.5.9 -> hit action nexthop"), "{t}");
    assert!(t.contains("headers [eth, ipv4, udp]") || t.contains("headers [eth, ipv4]"), "{t}");
    assert!(t.contains("verdict: tx port 2"), "{t}");
}

#[test]
fn control_commands_report_bad_input_with_the_line() {
    let mut p = router();
    let e = p
        .load_entries(
            "r.txt",
            "table fib4 add 10.0.0.0/8 => nexthop(1, 02:00:00:00:00:01, 02:00:00:00:00:02)\ntable fib5 add 10.0.0.0/8 => drop\n",
        )
        .unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.msg.contains("did you mean \"fib4\""), "{e}");
    let e = p.apply_command("table fib4 add 10.0.0.1/8 => drop").unwrap_err();
    assert!(e.msg.contains("beyond its /8"), "{e}");
    let e = p.apply_command("table fib4 add 10.0.0.0/8 => nexthop(1, 2)").unwrap_err();
    assert!(e.msg.contains("takes 3 argument"), "{e}");
    p.apply_command("table fib4 del 198.18.5.0/24").unwrap();
    let out = run(&mut p, &[(0, udp4("10.0.0.1", "198.18.5.9", 64))]);
    assert_eq!(out[0].0, Verdict::Tx(1), "after deleting the /24 the /15 routes it");
    assert!(p.apply_command("table fib4 del 198.18.5.0/24").is_err());
}

#[test]
fn classifier_keys_may_include_metadata_fields() {
    let spec = r#"
name = "meta-acl"
[parser]
headers = ["eth", "ipv4", "udp"]
[metadata]
vnet = 24
[[table]]
name = "acl"
key = [{ field = "meta.vnet", match = "ternary" }, { field = "ipv4.dst", match = "ternary" }]
actions = ["forward", "drop"]
size = 16
default = "drop"
[control]
ingress = '''
set meta.vnet = 7
apply acl
'''
"#;
    let mut p = inline(spec);
    p.load_entries("e", "table acl add 7 10.0.0.0/8 priority 1 => forward(2)\ntable acl add * * priority 9 => forward(3)\n").unwrap();
    let out = run(&mut p, &[(0, udp4("1.1.1.1", "10.1.2.3", 64)), (0, udp4("1.1.1.1", "192.0.2.1", 64))]);
    assert_eq!(out[0].0, Verdict::Tx(2));
    assert_eq!(out[1].0, Verdict::Tx(3), "an all-wildcard rule matches whatever the metadata holds");
}

#[test]
fn classifier_with_more_than_four_fields() {
    let spec = r#"
name = "six"
[parser]
headers = ["eth", "ipv4", "udp", "tcp"]
[metadata]
vnet = 24
[[table]]
name = "acl"
key = [
  { field = "meta.vnet", match = "ternary" },
  { field = "ipv4.src", match = "ternary" },
  { field = "ipv4.dst", match = "ternary" },
  { field = "l4.sport", match = "range" },
  { field = "l4.dport", match = "range" },
  { field = "ipv4.proto", match = "ternary" },
]
actions = ["forward", "drop"]
size = 16
default = "drop"
[control]
ingress = '''
set meta.vnet = 5
apply acl
'''
"#;
    let mut p = inline(spec);
    p.load_entries(
        "e",
        "table acl add 5 * 10.0.0.0/8 * 53..53 17/0xff priority 1 => forward(2)\ntable acl add * * * * * * priority 9 => forward(3)\n",
    )
    .unwrap();
    let out = run(&mut p, &[(0, udp4("1.1.1.1", "10.1.2.3", 64)), (0, udp4("1.1.1.1", "192.0.2.1", 64))]);
    assert_eq!(out[0].0, Verdict::Tx(2), "the sixth field (proto) and the first (metadata) take part");
    assert_eq!(out[1].0, Verdict::Tx(3));
}

/// Classifier changes committed as a delta over the last full build, full builds ("folds")
/// run while more changes arrive and then published to a worker replica between changes: after
/// every change, the worker (which adopted the control replica's classifier) and the control
/// replica give each packet the verdict of a pipeline that loaded the same rules in one full
/// build.
#[test]
fn classifier_changes_and_folds_keep_every_replica_exact() {
    let spec = ACL.replace("size = 64", "size = 4096");
    // Rule i: a /24 source (a /16 for every 40th, which covers others of its priority), a
    // port range, one of 7 priorities and an action that tells rules apart. Keys are unique.
    let key = |i: u32| {
        if i.is_multiple_of(40) {
            format!("10.{}.0.0/16 * {}..{} *", i / 256 % 256, 1000 + i / 40, 2000 + i / 40)
        } else {
            let ports = format!("{}..{}", 1000 + i % 50, 2000 + i % 50);
            format!("10.{}.{}.0/24 * {ports} *", i / 256 % 256, i % 256)
        }
    };
    let add = |i: u32| {
        let action = if i.is_multiple_of(9) { "drop".to_string() } else { format!("forward({})", i % 8 + 1) };
        format!("table acl add {} priority {} => {action}\n", key(i), i % 7)
    };
    let ops = |p: &Pipeline, text: &str| -> Vec<fastpath_pipeline::entries::EntryOp> {
        text.lines().map(|l| p.program().parse_entry(l).unwrap_or_else(|e| panic!("{l}: {e:?}"))).collect()
    };
    let mut live: Vec<u32> = (0..200).collect();
    let base: String = live.iter().map(|&i| add(i)).collect();
    let (mut control, mut worker) = (inline(&spec), inline(&spec));
    control.load_entries("base", &base).unwrap();
    worker.load_entries("base", &base).unwrap();
    let mut next = 200u32;
    let mut pending = Vec::new();
    let (mut folds, mut retired) = (0, Vec::new());
    for round in 0..40 {
        let mut text = String::new();
        for _ in 0..6 {
            text.push_str(&add(next));
            live.push(next);
            next += 1;
        }
        for _ in 0..4 {
            let gone = live.remove((round * 7) % live.len());
            text.push_str(&format!("table acl del {}\n", key(gone)));
        }
        let ops = ops(&control, &text);
        control.apply_ops(&ops).unwrap();
        let mut built = control.built_classifiers(&ops);
        if pending.is_empty() {
            pending = control.fold_jobs();
        } else if round % 3 == 0 {
            // Finished after more changes came in: those go on top of the fold.
            for (t, job) in pending.drain(..) {
                let b = control.finish_fold(t, job.run()).expect("a fresh fold is installed");
                assert!(!b.acl.has_delta() || b.acl.stats().added + b.acl.stats().deleted <= 40);
                built.retain(|(u, _)| *u != t);
                built.push((t, b));
                folds += 1;
            }
        }
        worker.apply_ops_prebuilt(&ops, &built, &mut retired).unwrap();
        let ours = control.table("acl").unwrap().built_classifier().unwrap();
        let theirs = worker.table("acl").unwrap().built_classifier().unwrap();
        assert!(std::sync::Arc::ptr_eq(&ours.acl, &theirs.acl), "round {round}: the worker adopted");
        let mut fresh = inline(&spec);
        fresh.load_entries("now", &live.iter().map(|&i| add(i)).collect::<String>()).unwrap();
        assert!(!fresh.table("acl").unwrap().built_classifier().unwrap().acl.has_delta());
        let frames: Vec<(u16, Vec<u8>)> = (0..next)
            .step_by(3)
            .flat_map(|i| {
                let src = Ipv4Addr::new(10, (i / 256 % 256) as u8, (i % 256) as u8, 5);
                [1500u16, 999].map(|port| {
                    (0, FrameBuilder::eth(A, B).ipv4(src, "192.0.2.1".parse().unwrap()).tcp(999, port, TcpFlags::SYN, 1, 0).build())
                })
            })
            .collect();
        for chunk in frames.chunks(256) {
            let want: Vec<Verdict> = run(&mut fresh, chunk).into_iter().map(|x| x.0).collect();
            let got: Vec<Verdict> = run(&mut worker, chunk).into_iter().map(|x| x.0).collect();
            assert_eq!(got, want, "round {round}: the worker");
            let got: Vec<Verdict> = run(&mut control, chunk).into_iter().map(|x| x.0).collect();
            assert_eq!(got, want, "round {round}: the control replica");
        }
    }
    assert!(folds >= 3, "only {folds} folds: the test no longer covers them");
    assert_eq!(worker.table("acl").unwrap().len(), live.len());
}

/// A counter with a `ttl_dec` before it and one with a `ttl_dec` after it, each run in one loop:
/// a packet whose TTL expires is counted only when the count came first, the drops land in the
/// stage's row, and the compiled pipeline agrees with the reference interpreter.
#[test]
fn ttl_dec_next_to_a_count_keeps_the_order_of_the_two() {
    let spec = r#"
name = "ttl-count"
[parser]
headers = ["eth", "ipv4", "udp"]
[metadata]
idx = 8
[[counter]]
name = "seen"
size = 4
[control]
ingress = '''
if meta.in_port == 0:
    set meta.idx = 2
    ttl_dec
    count seen meta.idx
    forward 1
else:
    count seen 3
    ttl_dec
    forward 0
'''
"#;
    let prog = fastpath_pipeline::compile("ttl-count.toml", spec).unwrap_or_else(|e| panic!("{e}"));
    let frames: Vec<(u16, Vec<u8>)> =
        [(0, 64), (0, 1), (0, 2), (1, 1), (1, 9), (1, 0)].iter().map(|&(port, ttl)| (port, udp4("10.0.0.1", "10.0.0.2", ttl))).collect();
    let expired = Verdict::Drop(DropReason::TtlExpired);
    for mut p in [prog.instantiate(), prog.instantiate_reference()] {
        let out = run(&mut p, &frames);
        let v: Vec<Verdict> = out.iter().map(|(v, _)| *v).collect();
        assert_eq!(v, [Verdict::Tx(1), expired, Verdict::Tx(1), expired, Verdict::Tx(0), expired]);
        assert_eq!(ipv4_ok(&out[0].1).ttl(), 63);
        assert_eq!(ipv4_ok(&out[4].1).ttl(), 8);
        let seen = &p.objects().counter("seen").unwrap().values;
        assert_eq!((seen[2].0, seen[3].0), (2, 3), "ttl_dec first: 2 of 3 counted; count first: all 3");
        assert_eq!((seen[2].1, seen[3].1), (2 * 64, 3 * 64));
        let all: u64 = p.stats().iter().map(|(_, s)| s.drops[DropReason::TtlExpired as usize]).sum();
        assert_eq!(all, 3);
    }
    let plan = prog.instantiate().show_plan();
    assert!(plan.contains("ttl_dec ▸ count") && plan.contains("▸ ttl_dec (one loop)"), "{plan}");
}

/// `ct_load` leaves a batch alone only when nothing but conntrack and `ct_commit` writes
/// `ct.verdict`: here a `set ct.verdict = 0` before it makes it reload every batch, and an
/// established flow's packet still finds its committed verdict; without the `set`, the plan
/// says the load is skipped in a batch with no commit, and the verdicts are the same.
#[test]
fn ct_load_reloads_what_a_set_overwrote() {
    let spec = |extra: &str| {
        format!(
            r#"
name = "ct-load"
[parser]
headers = ["eth", "ipv4", "udp"]
[[conntrack]]
name = "flows"
size = 64
[control]
ingress = '''
conntrack flows
if ct.new:
    ct_commit flows 1
{extra}
ct_load flows
if ct.verdict != 1:
    drop acl_deny
forward 1
'''
"#
        )
    };
    let f = udp4("10.0.0.1", "10.0.0.2", 64);
    // In a branch of its own, so that the `set` is not in `ct_load`'s primitive run.
    for (extra, skipped) in [("if ipv4.valid:\n    set ct.verdict = 0", false), ("", true)] {
        let prog = fastpath_pipeline::compile("ct-load.toml", &spec(extra)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(prog.instantiate().show_plan().contains("(skipped in a batch"), skipped, "{extra:?}");
        for mut p in [prog.instantiate(), prog.instantiate_reference()] {
            // The new flow's packet (committed), then the established flow's alone in a batch.
            assert_eq!(verdicts(&mut p, &[(0, f.clone())]), [Verdict::Tx(1)], "{extra:?}");
            assert_eq!(verdicts(&mut p, &[(0, f.clone()), (0, f.clone())]), [Verdict::Tx(1); 2], "{extra:?}");
        }
    }
}

/// A classifier on parts of the 5-tuple that runs right after the parser takes each packet's
/// key from the parser's record (the switch's ACL does); with a stage between the two it reads
/// the packets itself. Both apply the rules as the reference interpreter does, to UDP, TCP,
/// ICMP (its port reads as 0) and IPv4 with options (which the parser's fast path leaves to the
/// full parser), and a packet without IPv4 misses.
#[test]
fn a_classifier_right_after_the_parser_takes_the_parsed_tuple() {
    let plan = pipeline("pipelines/switch-acl.toml").show_plan();
    assert!(plan.contains("(key from the parser)"), "{plan}");
    let spec = |before: &str| {
        format!(
            r#"
name = "t"
[parser]
headers = ["eth", "ipv4", "ipv6", "icmp", "udp", "tcp"]
[[action]]
name = "deny"
body = "drop acl_deny"
[[table]]
name = "acl"
key = [{{ field = "meta.in_port", match = "ternary" }}, {{ field = "ipv4.src", match = "ternary" }}, {{ field = "l4.dport", match = "range" }}]
actions = ["no_action", "deny"]
size = 64
default = "no_action"
[control]
ingress = '''
{before}
apply acl
forward 1
'''
"#
        )
    };
    let rules = "table acl add * 10.0.0.0/8 1000..1000 priority 10 => deny\n\
                 table acl add 2/0xffff * 0..0 priority 20 => deny\n";
    let (a, b) = (Ipv4Addr::new(10, 1, 2, 3), Ipv4Addr::new(192, 168, 0, 1));
    let e = || FrameBuilder::eth([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let mut opts = Ipv4Repr::new(a, b, IpProto::UDP, 0);
    opts.options = vec![1, 1, 1, 0];
    let frames = vec![
        (0, e().ipv4(a, b).udp(5, 1000).build()),
        (0, e().ipv4(a, b).udp(5, 1001).build()),
        (0, e().ipv4(b, a).tcp(5, 1000, TcpFlags::SYN, 1, 0).build()),
        (0, e().ipv4(a, b).tcp(5, 1000, TcpFlags::SYN, 1, 0).build()),
        (0, e().ipv4_with(opts).udp(5, 1000).build()),
        (2, e().ipv4(b, a).icmp_echo(1, 1).build()),
        (3, e().ipv4(b, a).icmp_echo(1, 1).build()),
        (2, e().ipv6("2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap()).udp(1, 0).build()),
    ];
    let deny = Verdict::Drop(DropReason::AclDeny);
    let want = [deny, Verdict::Tx(1), Verdict::Tx(1), deny, deny, deny, Verdict::Tx(1), Verdict::Tx(1)];
    for (before, parsed) in [("", true), ("ttl_dec", false)] {
        let prog = fastpath_pipeline::compile("t.toml", &spec(before)).unwrap_or_else(|e| panic!("{e}"));
        let (mut p, mut r) = (prog.instantiate(), prog.instantiate_reference());
        assert_eq!(p.show_plan().contains("(key from the parser)"), parsed, "{}", p.show_plan());
        p.load_entries("acl", rules).unwrap();
        r.load_entries("acl", rules).unwrap();
        // Twice: the second batch's keys come from the cache.
        for _ in 0..2 {
            assert_eq!(verdicts(&mut p, &frames), want, "{before:?}");
            assert_eq!(verdicts(&mut r, &frames), want, "{before:?}: reference");
        }
    }
}
