//! The XDP datapath against the batch executor: the same spec and entries, the same frames;
//! every frame must get the same verdict (the same output port, or a drop for the same reason)
//! and leave with the same bytes, at both hooks the datapath compiles for (XDP and tc). Each
//! program runs through `BPF_PROG_TEST_RUN` on the ports of a veth pair in a namespace this
//! test creates; its verdict is read from its return value and from which counter moved.
//!
//! Needs root (CI runs it as root; a missing root fails there rather than skipping).

mod common;

use common::root_or_skip;
use fastpath_io::bpf::{tc_action, xdp_action, Prog, TestRun};
use fastpath_io::netns::{Netns, VethPair};
use fastpath_packet::{Batch, DropReason, Pool, Verdict};
use fastpath_xdp::{Hook, XdpCounters, XdpDatapath, XdpPortSpec};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// What happened to one frame.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Tx(u16, Vec<u8>),
    Drop(DropReason),
}

/// What `prog` (the datapath's program for `hook`) did with `frame` arriving on `port`.
fn bpf_outcome(dp: &XdpDatapath, prog: &Prog, hook: Hook, port: u16, frame: &[u8]) -> Outcome {
    let before = dp.counters();
    let mut out = vec![0u8; frame.len() + 512];
    let ifindex = dp.ifindexes()[usize::from(port)];
    let r: TestRun = match hook {
        Hook::Xdp => prog.test_run_xdp_on(ifindex, frame, &mut out),
        Hook::Tc => prog.test_run_skb_on(ifindex, frame, &mut out),
    }
    .unwrap();
    let after = dp.counters();
    let moved = |b: &XdpCounters, a: &XdpCounters| -> Vec<String> {
        let mut v = Vec::new();
        for (p, (x, y)) in b.tx.iter().zip(&a.tx).enumerate() {
            if x != y {
                v.push(format!("tx{p}"));
            }
        }
        for (r, n) in &a.drops {
            if b.drops.iter().find(|d| d.0 == *r).map_or(0, |d| d.1) != *n {
                v.push(r.name().to_string());
            }
        }
        v
    };
    let m = moved(&before, &after);
    assert_eq!(m.len(), 1, "exactly one tx or drop counter moves per frame: {m:?}");
    assert_eq!(after.rx[usize::from(port)], before.rx[usize::from(port)] + 1, "rx counted");
    let (redirect, drop) = match hook {
        Hook::Xdp => (xdp_action::REDIRECT, xdp_action::DROP),
        Hook::Tc => (tc_action::REDIRECT, tc_action::SHOT),
    };
    match r.retval as i32 {
        v if v == redirect => {
            let p: u16 =
                m[0].strip_prefix("tx").and_then(|x| x.parse().ok()).unwrap_or_else(|| panic!("redirect without a tx count: {m:?}"));
            Outcome::Tx(p, out[..r.data_len].to_vec())
        }
        v if v == drop => Outcome::Drop(DropReason::from_name(&m[0]).unwrap_or_else(|| panic!("drop without a reason: {m:?}"))),
        other => panic!("unexpected {hook:?} verdict {other}"),
    }
}

fn engine_outcome(pipe: &mut fastpath_pipeline::Pipeline, pool: &mut Pool, ports: u16, port: u16, frame: &[u8]) -> Outcome {
    let h = pool.alloc().unwrap();
    pool.set_data(h, frame);
    let mut b = Batch::new();
    assert!(b.push(h, port));
    pipe.process(pool, &mut b, 0);
    let out = match b.verdict(0) {
        // The worker drops a frame for a port that does not exist.
        Verdict::Tx(p) if p >= ports => Outcome::Drop(DropReason::PortDown),
        Verdict::Tx(p) => Outcome::Tx(p, pool.data(h).to_vec()),
        Verdict::Drop(r) => Outcome::Drop(r),
        v => panic!("unexpected verdict {v:?}"),
    };
    pool.free(h);
    out
}

/// Whether the kernel's skb test run (`bpf_prog_test_run_skb`) accepts `frame`: it refuses a
/// frame of the Ethernet header alone, and an IPv4 or IPv6 frame shorter than its IP header
/// (measured on Linux 6.18). The XDP leg still runs such frames.
fn skb_test_run_takes(frame: &[u8]) -> bool {
    let body = frame.len().saturating_sub(14);
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => body >= 20,
        0x86dd => body >= 40,
        _ => body >= 1,
    }
}

/// Runs `frames` (ingress port, bytes) through both datapaths built from `spec` + `entries`.
fn agree(tag: &str, spec: &str, entries: &str, cases: u32) {
    agree_on(tag, spec, entries, cases, frames());
}

/// [`agree`] on frames drawn from `strategy`. Each hook gets its own datapath and engine
/// (conntrack and meters keep state: the two programs must not share their maps).
fn agree_on(tag: &str, spec: &str, entries: &str, cases: u32, strategy: impl Strategy<Value = Vec<(u16, Vec<u8>)>> + Send + 'static) {
    let ns = Netns::new(&format!("fpx-{tag}")).unwrap();
    let _veth = VethPair::new(&ns, "x0", &ns, "x1").unwrap();
    let (spec, entries) = (spec.to_string(), entries.to_string());
    ns.run(move || {
        let prog = fastpath_pipeline::compile("t.toml", &spec).unwrap();
        let ports = [("p0", "x0"), ("p1", "x1")].map(|(n, i)| XdpPortSpec { name: n.into(), iface: i.into() });
        for hook in [Hook::Xdp, Hook::Tc] {
            let mut dp = XdpDatapath::build(prog.clone(), &ports).unwrap();
            dp.load_entries("entries", &entries).unwrap();
            dp.load_tc().unwrap();
            let bpf = if hook == Hook::Tc { dp.tc_prog().unwrap() } else { dp.prog() };
            let mut pipe = prog.instantiate();
            pipe.load_entries("entries", &entries).unwrap();
            // The runner's closure is `Fn`: the engine and its pool live in a cell.
            let engine = std::cell::RefCell::new((pipe, Pool::new(8)));
            let runs = std::cell::Cell::new(0u32);
            let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
            runner
                .run(&strategy, |fs| {
                    let mut e = engine.borrow_mut();
                    let (pipe, pool) = &mut *e;
                    for (port, f) in fs {
                        if hook == Hook::Tc && !skb_test_run_takes(&f) {
                            continue;
                        }
                        let want = engine_outcome(pipe, pool, 2, port, &f);
                        runs.set(runs.get() + 1);
                        let got = bpf_outcome(&dp, bpf, hook, port, &f);
                        prop_assert_eq!(&got, &want, "{:?}: port {} frame {:02x?}", hook, port, f);
                    }
                    Ok(())
                })
                .unwrap();
            assert!(runs.get() >= cases, "the {hook:?} program ran on {} frames only", runs.get());
        }
    })
    .unwrap();
}

const MACS: [[u8; 6]; 4] = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 7], [0xff; 6]];
const TYPES: [u16; 5] = [0x88b5, 0x0800, 0x0500, 0x86dd, 0x88b6];

/// Frames built mostly from the values the entries and conditions name, so every branch runs.
fn frames() -> impl Strategy<Value = Vec<(u16, Vec<u8>)>> {
    let mac = prop_oneof![3 => (0..MACS.len()).prop_map(|i| MACS[i]), 1 => any::<[u8; 6]>()];
    let ty = prop_oneof![3 => (0..TYPES.len()).prop_map(|i| TYPES[i]), 1 => any::<u16>()];
    let frame = (0u16..2, mac.clone(), mac, ty, proptest::collection::vec(any::<u8>(), 0..120)).prop_map(|(port, d, s, t, rest)| {
        let mut f = Vec::with_capacity(14 + rest.len());
        f.extend_from_slice(&d);
        f.extend_from_slice(&s);
        f.extend_from_slice(&t.to_be_bytes());
        f.extend_from_slice(&rest);
        (port, f)
    });
    proptest::collection::vec(frame, 1..40)
}

#[test]
fn l2fwd_agrees_with_the_engine() {
    if !root_or_skip() {
        return;
    }
    // Port 1 has no entry: its frames miss and drop as port_down (the table's default).
    let spec = include_str!("../../../pipelines/l2fwd.toml");
    agree("l2", spec, "table port_pair add 0 => forward(1)\n", 24);
}

/// A spec that uses every construct the XDP datapath compiles: a two-field key with metadata,
/// MAC and integer arguments, table defaults that drop and that forward, hit/miss, `and`/`or`/
/// `not`, field and metadata comparisons, a control-block drop with its reason, set, swap, and
/// an egress block.
const L2SW: &str = r#"
name = "l2sw"
[parser]
headers = ["eth"]

[[action]]
name = "rewrite"
params = ["port", "smac"]
body = "set eth.src = smac; forward port"

[[table]]
name = "mac"
key = [{ field = "eth.dst", match = "exact" }]
actions = ["rewrite", "forward", "drop"]
size = 64
default = "forward(1)"

[[table]]
name = "pair"
key = [{ field = "meta.in_port", match = "exact" }, { field = "eth.type", match = "exact" }]
actions = ["forward", "drop"]
size = 16
default = "drop(table_miss)"

[control]
ingress = '''
if eth.type == 0x88b5 and not meta.in_port == 1:
    apply mac
    if mac.miss:
        swap eth.dst eth.src
elif eth.type < 0x0600 or eth.src == 02:00:00:00:00:07:
    drop action_drop
else:
    apply pair
'''
egress = '''
if meta.out_port == 0:
    set eth.type = 0x88b6
'''
"#;

const L2SW_ENTRIES: &str = "\
table mac add 02:00:00:00:00:01 => rewrite(0, 02:aa:bb:cc:dd:ee)
table mac add 02:00:00:00:00:02 => drop
table mac add ff:ff:ff:ff:ff:ff => forward(5)
table pair add 0 0x0800 => forward(1)
table pair add 1 0x0800 => forward(0)
table pair add 1 0x88b5 => forward(0)
table pair add 1 0x86dd => drop
";

#[test]
fn every_supported_construct_agrees_with_the_engine() {
    if !root_or_skip() {
        return;
    }
    agree("sw", L2SW, L2SW_ENTRIES, 64);
}

/// A spec over every header the XDP datapath parses: fields of each layer in keys, conditions
/// and operands, validity tests, metadata registers, and writes under the IPv4 header checksum
/// (the whole-byte TTL and the 6-bit DSCP) and outside it (inner MACs).
const OVERLAY_PARSE: &str = r#"
name = "ovp"
[parser]
headers = ["eth", "ipv4", "udp", "tcp", "icmp", "vxlan", "inner_eth", "inner_ipv4", "inner_udp", "inner_tcp", "inner_icmp"]

[metadata]
vnet = 16

[[action]]
name = "set_vnet"
params = ["vnet"]
body = "set meta.vnet = vnet"

[[action]]
name = "out"
params = ["port", "mac"]
body = "set inner_eth.dst = mac; set ipv4.ttl = 9; forward port"

[[table]]
name = "vni_map"
key = [{ field = "vxlan.vni", match = "exact" }]
actions = ["set_vnet"]
size = 64
default = "drop(table_miss)"

[[table]]
name = "route"
key = [{ field = "meta.vnet", match = "exact" }, { field = "inner_ipv4.dst", match = "exact" }, { field = "inner_l4.dport", match = "exact" }]
actions = ["out", "drop"]
size = 64
default = "drop(no_route)"

[control]
ingress = '''
if vxlan.valid:
    apply vni_map
    if inner_tcp.valid and inner_tcp.flags == 0x02:
        set_dscp 46
    elif inner_icmp.valid:
        set inner_ipv4.ttl = 7
    apply route
elif udp.valid and l4.dport == 53:
    set ipv4.dscp = ipv4.ttl
    forward 1
elif icmp.valid and icmp.type == 8:
    swap eth.src eth.dst
    forward meta.in_port
elif tcp.valid:
    set ipv4.ttl = tcp.flags
    forward 0
elif ipv4.valid and ipv4.proto == 17:
    drop udp_truncated
elif ipv4.valid:
    forward ipv4.proto
else:
    drop not_ip
'''
"#;

const OVERLAY_PARSE_ENTRIES: &str = "\
table vni_map add 100 => set_vnet(1)
table vni_map add 200 => set_vnet(2)
table route add 1 10.1.0.2 80 => out(1, 02:00:00:00:00:02)
table route add 2 10.1.0.2 80 => out(0, 02:00:00:00:00:07)
table route add 1 10.1.0.3 0 => out(0, 02:00:00:00:00:01)
table route add 2 10.1.0.2 53 => drop
";

fn csum(h: &[u8]) -> u16 {
    let mut s: u32 = h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An IPv4 packet from `src` to `dst`: `ihl` words of header (options zero, at least 20
/// bytes), fragment field `frag`, a correct header checksum.
fn ipv4(proto: u8, ihl: u8, frag: u16, (src, dst): ([u8; 4], [u8; 4]), body: &[u8]) -> Vec<u8> {
    let hl = usize::from(ihl.max(5)) * 4;
    let mut h = vec![0u8; hl];
    h[0] = 0x40 | ihl;
    h[1] = 0x28;
    h[2..4].copy_from_slice(&((hl + body.len()) as u16).to_be_bytes());
    h[6..8].copy_from_slice(&frag.to_be_bytes());
    h[8] = 64;
    h[9] = proto;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(body);
    h
}

/// A TCP header's moving parts: flags, sequence and acknowledgment numbers, window, and a
/// window-scale option (in front of a NOP) when `Some`.
#[derive(Clone, Copy, Debug)]
struct TcpBits {
    flags: u8,
    seq: u32,
    ack: u32,
    win: u16,
    wscale: Option<u8>,
}

/// An upper-layer header for `proto` from port `ours` to `port` (ICMP: type `port`), the other
/// way round when `rev`, TCP's from `t`, then `body`.
fn upper(proto: u8, (ours, port): (u16, u16), rev: bool, t: TcpBits, body: &[u8]) -> Vec<u8> {
    let (sport, dport) = if rev { (port, ours) } else { (ours, port) };
    let mut h = match proto {
        17 => {
            let mut u = vec![0u8; 8];
            u[0..2].copy_from_slice(&sport.to_be_bytes());
            u[2..4].copy_from_slice(&dport.to_be_bytes());
            u[4..6].copy_from_slice(&((8 + body.len()) as u16).to_be_bytes());
            u
        }
        6 => {
            let opts: Vec<u8> = t.wscale.map_or(Vec::new(), |ws| vec![1, 3, 3, ws]);
            let mut h = vec![0u8; 20];
            h[0..2].copy_from_slice(&sport.to_be_bytes());
            h[2..4].copy_from_slice(&dport.to_be_bytes());
            h[4..8].copy_from_slice(&t.seq.to_be_bytes());
            h[8..12].copy_from_slice(&t.ack.to_be_bytes());
            h[12] = (((20 + opts.len()) / 4) << 4) as u8;
            h[13] = t.flags;
            h[14..16].copy_from_slice(&t.win.to_be_bytes());
            h.extend(opts);
            h
        }
        1 | 58 => vec![port as u8, 0, 0, 0, 0, 7, 0, 0],
        _ => Vec::new(),
    };
    h.extend_from_slice(body);
    h
}

fn eth(dst: [u8; 6], et: u16, body: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 9]);
    f.extend_from_slice(&et.to_be_bytes());
    f.extend_from_slice(body);
    f
}

/// IPv4 frames, plain and VXLAN-encapsulated, built from the values the spec and entries name
/// (a few hosts and ports, both directions, the TCP flags of a connection's life), then
/// sometimes cut short or with one byte changed, so that every parser drop and branch runs.
fn ip_frames() -> impl Strategy<Value = Vec<(u16, Vec<u8>)>> {
    ip_frames_of(0.6, 1)
}

/// [`ip_frames`] with a share `tunnel` of VXLAN frames and a weight `damage` for the odd
/// values (a random EtherType, IHL, fragment, VXLAN flags, port; a frame cut short or with a
/// byte changed): 1 in every test but the whole-pipeline one, which takes 0 (rare) so that
/// most frames reach its later stages.
fn ip_frames_of(tunnel: f64, damage: u32) -> impl Strategy<Value = Vec<(u16, Vec<u8>)>> {
    // The weight of the usual values against 1 for the odd ones.
    let w = if damage == 0 { 40 } else { 3 };
    let proto = prop_oneof![Just(17u8), Just(6u8), Just(1u8), Just(58u8), any::<u8>()];
    let port = prop_oneof![Just(80u16), Just(53u16), Just(0u16), Just(8u16), any::<u16>()];
    let ihl = prop_oneof![3 * w => Just(5u8), w => Just(6u8), 1 => 0u8..16];
    let frag = prop_oneof![3 * w => Just(0u16), w => Just(0x2000u16), 1 => any::<u16>()];
    let host = prop_oneof![Just([10u8, 1, 0, 2]), Just([10u8, 1, 0, 3]), any::<[u8; 4]>()];
    let flags = prop_oneof![Just(0x02u8), Just(0x12u8), Just(0x10u8), Just(0x11u8), Just(0x04u8), Just(0x14u8), any::<u8>()];
    // Sequence and acknowledgment numbers near each other (and across the wrap), so that some
    // segments fall inside a connection's windows and some outside.
    let num = || prop_oneof![Just(0u32), Just(1u32), Just(1000u32), Just(40_000u32), Just(u32::MAX - 500), any::<u32>()];
    let win = prop_oneof![Just(0u16), Just(1u16), Just(1000u16), Just(65535u16), any::<u16>()];
    let wscale = prop_oneof![2 => Just(None), 1 => prop_oneof![Just(0u8), Just(7u8), Just(14u8), Just(15u8)].prop_map(Some)];
    let flags = (flags, num(), num(), win, wscale).prop_map(|(flags, seq, ack, win, wscale)| TcpBits { flags, seq, ack, win, wscale });
    let et = move || prop_oneof![w => Just(0x0800u16), 1 => any::<u16>()];
    // Our end's port: mostly one, so that connections see several packets; sometimes a new one.
    let ours = prop_oneof![3 => Just(4000u16), 1 => any::<u16>()];
    let inner = ((ours, port.clone()), any::<bool>(), flags.clone(), host, ihl.clone(), frag.clone(), et(), proto.clone());
    let vxlan = prop_oneof![w => Just(0x08u8), 1 => any::<u8>()];
    let vni = prop_oneof![Just(100u32), Just(200u32), any::<u32>()];
    let body = proptest::collection::vec(any::<u8>(), 0..24);
    let outer_port = prop_oneof![w => Just(4789u16), 1 => port];
    let mutation = prop_oneof![w => Just(None), 1 => (any::<prop::sample::Index>(), any::<u8>()).prop_map(Some)];
    let cut = prop_oneof![w => Just(None), 1 => any::<prop::sample::Index>().prop_map(Some)];
    let frame = (
        (0u16..2, proto, outer_port, any::<bool>(), flags, ihl, frag),
        (prop::bool::weighted(tunnel), vxlan, vni, inner, body),
        (mutation, cut, et()),
    )
        .prop_map(|((p, proto, oport, orev, oflags, ihl, frag), (tunnel, vflags, vni, inner, body), (mutation, cut, et))| {
            let a = [10u8, 0, 0, 1];
            let payload = if tunnel {
                let (iports, irev, iflags, ihost, iihl, ifrag, iet, ip) = inner;
                let l4 = upper(ip, iports, irev, iflags, &body);
                let ends = if irev { (ihost, a) } else { (a, ihost) };
                let iip = ipv4(ip, iihl, ifrag, ends, &l4);
                let mut vx = vec![vflags, 0, 0, 0];
                vx.extend_from_slice(&(vni << 8).to_be_bytes());
                vx.extend(eth([2, 0, 0, 0, 0, 5], iet, &iip));
                let none = TcpBits { flags: 0, seq: 0, ack: 0, win: 0, wscale: None };
                upper(17, (4000, oport), false, none, &vx)
            } else {
                upper(proto, (4000, oport), orev, oflags, &body)
            };
            let proto = if tunnel { 17 } else { proto };
            let b = [10u8, 9, 9, 9];
            let ends = if orev && !tunnel { (b, a) } else { (a, b) };
            let mut f = eth([2, 0, 0, 0, 0, 1], et, &ipv4(proto, ihl, frag, ends, &payload));
            if let Some((i, v)) = mutation {
                let i = 14 + i.index(f.len() - 14);
                f[i] = v;
            }
            if let Some(c) = cut {
                f.truncate(14 + c.index(f.len() - 13));
            }
            (p, f)
        });
    proptest::collection::vec(frame, 1..24)
}

#[test]
fn ipv4_and_vxlan_parsing_agrees_with_the_engine() {
    if !root_or_skip() {
        return;
    }
    agree_on("ov", OVERLAY_PARSE, OVERLAY_PARSE_ENTRIES, 96, ip_frames());
}

/// VXLAN in both directions: a decap then an encap (in place, or with the outer options cut),
/// a decap alone (the frame cut at the end), an encap alone (the frame grown), `hash`.
const OVERLAY_TUNNEL: &str = r#"
name = "ovt"
[parser]
headers = ["eth", "ipv4", "udp", "tcp", "icmp", "vxlan", "inner_eth", "inner_ipv4", "inner_udp", "inner_tcp", "inner_icmp"]

[metadata]
vnet = 16
tun = 16

[[action]]
name = "set_vnet"
params = ["vnet"]
body = "set meta.vnet = vnet"

[[action]]
name = "to_tunnel"
params = ["tun"]
body = "set meta.tun = tun"

[[action]]
name = "encap"
params = ["dmac", "smac", "sip", "dip", "vni", "port"]
body = "vxlan_encap dmac smac sip dip vni; forward port"

[[table]]
name = "vni_map"
key = [{ field = "vxlan.vni", match = "exact" }]
actions = ["set_vnet"]
size = 64
default = "drop(table_miss)"

[[table]]
name = "ca_pa"
key = [{ field = "meta.vnet", match = "exact" }, { field = "ipv4.dst", match = "exact" }]
actions = ["to_tunnel"]
size = 64
default = "drop(no_route)"

[[table]]
name = "tunnels"
key = [{ field = "meta.tun", match = "exact" }]
actions = ["encap"]
size = 64
default = "encap(02:00:00:00:00:0e, 02:00:00:00:00:0f, 10.0.0.1, 10.0.0.2, 7, 0)"

[[table]]
name = "plain"
key = [{ field = "ipv4.dst", match = "exact" }]
actions = ["encap"]
size = 64
default = "drop(no_route)"

[control]
ingress = '''
if vxlan.valid:
    apply vni_map
    vxlan_decap
    if tcp.valid or icmp.valid:
        apply ca_pa
        apply tunnels
    elif udp.valid:
        forward 1
    else:
        hash
        forward 0
elif ipv4.valid:
    hash
    apply plain
else:
    drop not_ip
'''
"#;

const OVERLAY_TUNNEL_ENTRIES: &str = "\
table vni_map add 100 => set_vnet(1)
table vni_map add 200 => set_vnet(2)
table ca_pa add 1 10.1.0.2 => to_tunnel(5)
table ca_pa add 2 10.1.0.2 => to_tunnel(6)
table ca_pa add 1 10.1.0.3 => to_tunnel(9)
table plain add 10.9.9.9 => encap(02:00:00:00:0a:03, 02:00:00:00:0b:03, 192.168.0.1, 192.168.0.4, 300, 1)
table tunnels add 5 => encap(02:00:00:00:0a:01, 02:00:00:00:0b:01, 192.168.0.1, 192.168.0.2, 5000, 1)
table tunnels add 6 => encap(02:00:00:00:0a:02, 02:00:00:00:0b:02, 192.168.0.1, 192.168.0.3, 0xffffff, 0)
";

#[test]
fn vxlan_decap_and_encap_agree_with_the_engine() {
    if !root_or_skip() {
        return;
    }
    agree_on("ovt", OVERLAY_TUNNEL, OVERLAY_TUNNEL_ENTRIES, 96, ip_frames());
}

/// Connection tracking without window checks, as a stateful overlay uses it: the zone from the
/// VNI, ct.new / ct.invalid / ct.reply / ct.verdict, ct_commit and ct_load, and the
/// conntrack's flow hash carried into the VXLAN source port.
const OVERLAY_CONNTRACK: &str = r#"
name = "ovc"
[parser]
headers = ["eth", "ipv4", "udp", "tcp", "icmp", "vxlan", "inner_eth", "inner_ipv4", "inner_udp", "inner_tcp", "inner_icmp"]

[metadata]
vnet = 16

# Large enough never to fill: a full engine table drops a new flow, the eBPF datapath's LRU
# map evicts an old one.
[[conntrack]]
name = "flows"
size = 1048576
window_check = false

[[action]]
name = "set_vnet"
params = ["vnet"]
body = "set meta.vnet = vnet"

[[table]]
name = "vni_map"
key = [{ field = "vxlan.vni", match = "exact" }]
actions = ["set_vnet"]
size = 64
default = "drop(table_miss)"

[control]
ingress = '''
if vxlan.valid:
    apply vni_map
    vxlan_decap
conntrack flows meta.vnet
if ct.invalid:
    drop conntrack_invalid
elif ct.new:
    if tcp.valid and l4.dport == 80:
        ct_commit flows 2
    else:
        ct_commit flows 1
ct_load flows
if ct.verdict == 2:
    drop acl_deny
elif ct.reply:
    forward 1
elif ct.established:
    vxlan_encap 02:00:00:00:00:0e 02:00:00:00:00:0f 10.0.0.1 10.0.0.2 77
    forward 0
else:
    forward 1
'''
"#;

#[test]
fn conntrack_without_window_checks_agrees_with_the_engine() {
    if !root_or_skip() {
        return;
    }
    agree_on("ovc", OVERLAY_CONNTRACK, "table vni_map add 100 => set_vnet(1)\ntable vni_map add 200 => set_vnet(2)\n", 96, ip_frames());
}

/// The same with TCP window checks: sequence and acknowledgment numbers, windows and
/// window-scale options from a small set, so that segments fall both inside and outside.
#[test]
fn conntrack_with_window_checks_agrees_with_the_engine() {
    if !root_or_skip() {
        return;
    }
    let spec = OVERLAY_CONNTRACK.replace("window_check = false", "window_check = true");
    agree_on("ovw", &spec, "table vni_map add 100 => set_vnet(1)\ntable vni_map add 200 => set_vnet(2)\n", 96, ip_frames());
}

/// The shipped `sdn-overlay` pipeline (its conntrack smaller, so that neither table fills):
/// VXLAN decap, conntrack with TCP window checks, the stateful ACLs on the classifier, the
/// per-MAC policer (srTCM, yellow remarked, red dropped), CA → PA and the encap in place.
fn sdn_overlay() -> String {
    let spec = include_str!("../../../pipelines/sdn-overlay.toml");
    assert!(spec.contains("size = 5000000\n"));
    spec.replacen("size = 5000000\n", "size = 1048576\n", 1)
}

/// Entries in the lab's shape: two tenants (CA 10.0.0.1 behind VNI 100, 10.1.0.2 behind
/// VNI 200) in VNET 1, a deny rule for one port and allow rules on port ranges either side
/// of it, a one-port allow that only its range admits (TCP port 80 to 10.1.0.3), the policers with CIR 0 (the buckets only
/// drain, the same in the engine and in the kernel, whatever the clock), the tunnels.
const SDN_OVERLAY_ENTRIES: &str = "\
table vni_map add 100 => set_vnet(1)
table vni_map add 200 => set_vnet(1)
table acl_in add 10.0.0.1/32 10.1.0.2/32 80..80 6/0xff priority 5 => deny
table acl_in add 10.0.0.1/32 10.1.0.3/32 80..80 6/0xff priority 4 => allow
table acl_in add 10.0.0.0/8 10.0.0.0/8 0..79 * priority 10 => allow
table acl_in add 10.0.0.0/8 10.0.0.0/8 81..65535 * priority 11 => allow
table acl_out add * 10.1.0.3/32 * 1/0xff priority 5 => deny
table local_mac add 02:00:00:00:00:09 => local_mac(1)
meter policer 1 cir 0 cbs 2500 ebs 2500
table ca_pa add 1 10.1.0.2 => to_tunnel(1)
table ca_pa add 1 10.0.0.1 => to_tunnel(2)
table ca_pa add 1 10.1.0.3 => to_tunnel(2)
table tunnels add 1 => encap(02:00:00:00:0a:01, 02:00:00:00:0b:01, 192.168.0.1, 192.168.0.2, 200, 1)
table tunnels add 2 => encap(02:00:00:00:0a:02, 02:00:00:00:0b:02, 192.168.0.1, 192.168.0.3, 100, 0)
";

#[test]
fn sdn_overlay_agrees_with_the_engine() {
    if !root_or_skip() {
        return;
    }
    agree_on("ovs", &sdn_overlay(), SDN_OVERLAY_ENTRIES, 96, ip_frames_of(0.95, 0));
}

/// The meters' token clock against the kernel's clock: a bucket that a packet empties is full
/// again after long enough at the meter's rate (the differential tests use CIR 0, as the
/// engine's clock there stands still).
#[test]
fn a_meter_refills_at_its_rate() {
    if !root_or_skip() {
        return;
    }
    let spec = r#"
name = "m"
[parser]
headers = ["eth"]
[[meter]]
name = "pol"
kind = "srtcm"
size = 4
[control]
ingress = '''
meter pol 1 drop_red
forward 1
'''
"#;
    let ns = Netns::new("fpx-meter").unwrap();
    let _veth = VethPair::new(&ns, "x0", &ns, "x1").unwrap();
    ns.run(move || {
        let prog = fastpath_pipeline::compile("t.toml", spec).unwrap();
        let ports = [("p0", "x0"), ("p1", "x1")].map(|(n, i)| XdpPortSpec { name: n.into(), iface: i.into() });
        let mut dp = XdpDatapath::build(prog, &ports).unwrap();
        // 10 kB/s (a 1,000-byte bucket takes 100 ms to refill: a busy machine's pause between
        // two sends does not), no excess bucket to spill into.
        dp.load_entries("entries", "meter pol 1 cir 10000 cbs 1000 ebs 0\n").unwrap();
        dp.load_tc().unwrap();
        let frame = vec![0x02u8; 1000];
        let send = |dp: &XdpDatapath| bpf_outcome(dp, dp.tc_prog().unwrap(), Hook::Tc, 0, &frame);
        assert!(matches!(send(&dp), Outcome::Tx(1, _)), "the full bucket takes the first packet");
        assert_eq!(send(&dp), Outcome::Drop(DropReason::MeterRed), "an empty bucket drops the next at once");
        // 300 ms at 10 kB/s: 3,000 tokens, capped at the bucket's 1,000.
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(matches!(send(&dp), Outcome::Tx(1, _)), "refilled");
        assert_eq!(send(&dp), Outcome::Drop(DropReason::MeterRed), "and empty again");
    })
    .unwrap();
}
