//! The traffic manager inside the pipeline (`[tm]`): spec errors with their place, DSCP / PCP
//! classification and `set_queue`, `Queued` verdicts, strict priority at egress, port shapers in
//! virtual time, refusals counted under the `tm` row, WRED/ECN marks written into the frames
//! (checked with the header views and an independent checksum), and egress running on what
//! leaves. The tshark-checked pcap test is `crates/fastpath/tests/pcap_tm.rs`.

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{self, IpProto, Ipv4Repr};
use fastpath_packet::{Batch, DropReason, Pool, Verdict};
use fastpath_pipeline::Pipeline;
use std::net::Ipv4Addr;

const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

const BASE: &str = r#"
name = "tm-test"
[parser]
headers = ["eth", "vlan", "ipv4", "ipv6", "udp"]
[control]
ingress = "forward 1"
"#;

fn spec(tm: &str) -> String {
    format!("{BASE}\n{tm}")
}

fn build(tm: &str) -> Pipeline {
    let mut p = fastpath_pipeline::compile("tm.toml", &spec(tm)).unwrap_or_else(|e| panic!("{e}")).instantiate();
    p.set_ports(2).unwrap();
    p
}

fn errors(tm: &str) -> String {
    fastpath_pipeline::compile("tm.toml", &spec(tm)).map(|_| ()).unwrap_err().to_string()
}

fn udp(dscp: u8, ecn: u8, len: usize) -> Vec<u8> {
    let mut r = Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), IpProto::UDP, 0);
    r.dscp = dscp;
    r.ecn = ecn;
    FrameBuilder::eth(B, A).ipv4_with(r).udp(1000, 2000).frame_len(len).build()
}

/// Offers `frames` as one received batch; returns the verdicts.
fn offer(p: &mut Pipeline, pool: &mut Pool, frames: &[Vec<u8>], now_ns: u64) -> Vec<Verdict> {
    let mut b = Batch::new();
    for f in frames {
        let h = pool.alloc().unwrap();
        pool.set_data(h, f);
        b.push(h, 0);
    }
    p.process(pool, &mut b, now_ns);
    let v: Vec<Verdict> = b.verdicts().to_vec();
    for i in 0..b.len() {
        if matches!(b.verdict(i), Verdict::Drop(_)) {
            pool.free(b.handle(i));
        }
    }
    v
}

/// Drains what may leave `port` at `now_ns`: (verdict, frame) per packet, freed.
fn drain(p: &mut Pipeline, pool: &mut Pool, port: u16, now_ns: u64) -> Vec<(Verdict, Vec<u8>)> {
    let mut out = Vec::new();
    let mut b = Batch::new();
    while p.egress(port, pool, &mut b, now_ns) > 0 {
        for i in 0..b.len() {
            out.push((b.verdict(i), pool.data(b.handle(i)).to_vec()));
            pool.free(b.handle(i));
        }
    }
    out
}

fn row(p: &Pipeline, name: &str) -> fastpath_pipeline::StageStats {
    p.stats().into_iter().find(|(n, _)| n == name).map(|(_, s)| s).unwrap_or_else(|| panic!("no stage {name}"))
}

fn dscp_of(frame: &[u8]) -> u8 {
    hdr::Ipv4::parse(hdr::Eth::parse(frame).unwrap().payload()).unwrap().dscp()
}

#[test]
fn spec_errors_point_at_the_value() {
    let e = errors("[tm]\nclassify = \"tos\"\n");
    assert!(e.contains("tm.toml:9:12") && e.contains("classify \"tos\" is not one of dscp, pcp, none"), "{e}");
    let e = errors("[tm]\n[[tm.port]]\nport = 1\nrate = \"fast\"\n");
    assert!(e.contains("tm.toml:11:8") && e.contains("rate \"fast\""), "{e}");
    let e = errors("[tm]\n[[tm.class]]\nclass = 9\n");
    assert!(e.contains("tm.toml:10:9") && e.contains("class 9 is not 0 to 7"), "{e}");
    let e = errors("[tm]\n[[tm.class]]\nclass = 2\nwred = \"ecm\"\n[[tm.wred]]\nname = \"ecn\"\nmin_bytes = 1\nmax_bytes = 2\n");
    assert!(e.contains("tm.toml:11:8") && e.contains("no [[tm.wred]] profile \"ecm\"") && e.contains("did you mean \"ecn\""), "{e}");
    let e = errors("[tm]\nalpha_log2 = 5\n");
    assert!(e.contains("alpha_log2 5 is out of range -4..=3"), "{e}");
    let e = errors("[tm]\n[[tm.class]]\nclass = 3\nring_pkts = 1000\n");
    assert!(e.contains("tm.toml:10:9") && e.contains("[tm] class 3:"), "{e}");
    let e = errors("[tm]\n[tm.dscp]\n\"70\" = 1\n");
    assert!(e.contains("key \"70\" is not a dscp value"), "{e}");
    let e = errors("[tm]\nclassify = \"pcp\"\n[tm.dscp]\n1 = 1\n");
    assert!(e.contains("[tm.dscp] is given but classify is \"pcp\""), "{e}");
    let mut p = fastpath_pipeline::compile("tm.toml", &spec("[tm]\n[[tm.port]]\nport = 3\nrate = \"1mbit\"\n")).unwrap().instantiate();
    assert!(p.set_ports(2).unwrap_err().contains("port 3: there are only 2 ports"));
}

#[test]
fn reservations_are_checked_again_for_the_running_port_count() {
    // 300 kB reserved per port fits a 1 MB buffer on one port, not on eight: the spec compiles
    // and instantiates, and setting eight ports is refused with the traffic manager's reason.
    let tm = "[tm]\nbuffer_bytes = 1000000\n[[tm.class]]\nclass = 0\nmin_bytes = 300000\n";
    let mut p = fastpath_pipeline::compile("tm.toml", &spec(tm)).unwrap_or_else(|e| panic!("{e}")).instantiate();
    assert!(p.has_tm());
    p.set_ports(3).unwrap();
    let e = p.set_ports(8).unwrap_err();
    assert!(e.starts_with("[tm]:") && e.contains("reserv"), "{e}");
}

#[test]
fn strict_priority_leaves_first_and_verdicts_are_queued() {
    let mut p = build("[tm]\n[tm.dscp]\n46 = 7\n");
    let mut pool = Pool::new(256);
    // DSCP 0 ▸ class 0 (DRR), DSCP 46 ▸ class 7 (strict); alternate them.
    let frames: Vec<Vec<u8>> = (0..20).map(|k| udp(if k % 2 == 0 { 0 } else { 46 }, 0, 200)).collect();
    let v = offer(&mut p, &mut pool, &frames, 0);
    assert!(v.iter().all(|v| *v == Verdict::Queued(1)), "{v:?}");
    assert_eq!(p.tm_backlog(), 20);
    let out = drain(&mut p, &mut pool, 1, 0);
    assert_eq!(out.len(), 20);
    assert!(out.iter().all(|(v, _)| *v == Verdict::Tx(1)));
    let order: Vec<u8> = out.iter().map(|(_, f)| dscp_of(f)).collect();
    assert_eq!(order[..10], [46; 10], "class 7 is strict: it leaves first ({order:?})");
    assert_eq!(order[10..], [0; 10]);
    assert_eq!(p.tm_backlog(), 0);
    let t = row(&p, "tm");
    assert_eq!((t.pkts_in, t.pkts_out), (20, 20));
    assert!(drain(&mut p, &mut pool, 0, 0).is_empty(), "nothing was queued for port 0");
}

#[test]
fn set_queue_overrides_the_dscp_class() {
    let text = r#"
name = "q"
[parser]
headers = ["eth", "ipv4", "udp"]
[control]
ingress = '''
if udp.dport == 9:
    set_queue 7
forward 1
'''
[tm]
"#;
    let mut p = fastpath_pipeline::compile("q.toml", text).unwrap_or_else(|e| panic!("{e}")).instantiate();
    p.set_ports(2).unwrap();
    let mut pool = Pool::new(64);
    let mut r = Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), IpProto::UDP, 0);
    r.dscp = 8; // class 1 by the default map
    let low = FrameBuilder::eth(B, A).ipv4_with(r.clone()).udp(1, 2).frame_len(100).build();
    let high = FrameBuilder::eth(B, A).ipv4_with(r).udp(1, 9).frame_len(100).build();
    offer(&mut p, &mut pool, &[low.clone(), low, high], 0);
    let out = drain(&mut p, &mut pool, 1, 0);
    let dports: Vec<u16> = out.iter().map(|(_, f)| u16::from_be_bytes([f[36], f[37]])).collect();
    assert_eq!(dports, [9, 2, 2]);
    let c7 = p.tm().unwrap().queue_counters(1, 7).unwrap();
    assert_eq!(c7.deq_pkts, 1);
}

#[test]
fn a_batch_for_two_ports_and_none_is_split_lane_by_lane() {
    // Interleaved lanes for port 0, port 1 and no port at all: each port's queue gets its
    // packets in arrival order, the unforwarded ones are dropped as `no_verdict`, and the
    // counters split the same way.
    let text = r#"
name = "split"
[parser]
headers = ["eth", "ipv4", "udp"]
[control]
ingress = '''
if udp.dport == 1:
    forward 0
elif udp.dport == 2:
    forward 1
'''
[tm]
"#;
    let mut p = fastpath_pipeline::compile("split.toml", text).unwrap_or_else(|e| panic!("{e}")).instantiate();
    p.set_ports(2).unwrap();
    let mut pool = Pool::new(64);
    let dports = [1u16, 2, 0, 1, 0, 2, 2, 1, 1];
    let frames: Vec<Vec<u8>> = dports
        .iter()
        .enumerate()
        .map(|(k, &d)| FrameBuilder::eth(B, A).ipv4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)).udp(100 + k as u16, d).build())
        .collect();
    let v = offer(&mut p, &mut pool, &frames, 0);
    let want: Vec<Verdict> = dports
        .iter()
        .map(|&d| match d {
            0 => Verdict::Drop(DropReason::NoVerdict),
            d => Verdict::Queued(d - 1),
        })
        .collect();
    assert_eq!(v, want);
    let sports = |out: Vec<(Verdict, Vec<u8>)>| -> Vec<u16> { out.iter().map(|(_, f)| u16::from_be_bytes([f[34], f[35]])).collect() };
    assert_eq!(sports(drain(&mut p, &mut pool, 0, 0)), [100, 103, 107, 108]);
    assert_eq!(sports(drain(&mut p, &mut pool, 1, 0)), [101, 105, 106]);
    let t = row(&p, "tm");
    assert_eq!((t.pkts_in, t.pkts_out), (7, 7));
    assert_eq!(row(&p, "end").drops[DropReason::NoVerdict as usize], 2);
}

#[test]
fn pcp_classification_reads_the_outer_tag() {
    let mut p = build("[tm]\nclassify = \"pcp\"\n");
    let mut pool = Pool::new(64);
    let tagged = |pcp| FrameBuilder::eth(B, A).vlan(5, pcp).ipv4(Ipv4Addr::new(1, 1, 1, 1), Ipv4Addr::new(2, 2, 2, 2)).udp(1, 2).build();
    offer(&mut p, &mut pool, &[tagged(1), tagged(6), tagged(1)], 0);
    let tm = p.tm().unwrap();
    let occ = |c| tm.queue_counters(1, c).unwrap().occ_pkts;
    assert_eq!((occ(1), occ(6), occ(0)), (2, 1, 0));
    drain(&mut p, &mut pool, 1, 0);
}

#[test]
fn a_port_shaper_paces_egress_in_virtual_time() {
    // 8 Mbit/s = 1 byte per µs; bucket 2000 bytes; 1000-byte frames.
    let mut p = build("[tm]\n[[tm.port]]\nport = 1\nrate = \"8mbit\"\nburst_bytes = 2000\n");
    let mut pool = Pool::new(64);
    let frames: Vec<Vec<u8>> = (0..10).map(|_| udp(0, 0, 1000)).collect();
    offer(&mut p, &mut pool, &frames, 0);
    assert_eq!(drain(&mut p, &mut pool, 1, 0).len(), 2, "the full bucket lets two frames out at once");
    assert_eq!(drain(&mut p, &mut pool, 1, 500_000).len(), 0, "half a frame of credit is not enough");
    assert_eq!(drain(&mut p, &mut pool, 1, 1_000_000).len(), 1);
    assert_eq!(drain(&mut p, &mut pool, 1, 4_000_000).len(), 2, "the bucket holds at most 2000 bytes");
    assert_eq!(p.tm_backlog(), 5);
    assert_eq!(drain(&mut p, &mut pool, 1, 9_000_000).len(), 2);
    assert_eq!(drain(&mut p, &mut pool, 1, 20_000_000).len(), 2);
    assert_eq!(drain(&mut p, &mut pool, 1, 21_000_000).len(), 1);
    assert_eq!(p.tm_backlog(), 0);
}

#[test]
fn refusals_are_counted_under_tm_with_their_reason() {
    // A 16-packet ring on class 0 and a buffer of 10 descriptors.
    let mut p = build("[tm]\nbuffer_pkts = 10\n[[tm.class]]\nclass = 0\nring_pkts = 16\n");
    let mut pool = Pool::new(64);
    let frames: Vec<Vec<u8>> = (0..14).map(|_| udp(0, 0, 100)).collect();
    let v = offer(&mut p, &mut pool, &frames, 0);
    let queued = v.iter().filter(|v| matches!(v, Verdict::Queued(1))).count();
    let refused = v.iter().filter(|v| **v == Verdict::Drop(DropReason::TmBufferFull)).count();
    assert_eq!((queued, refused), (10, 4), "{v:?}");
    let t = row(&p, "tm");
    assert_eq!(t.drops[DropReason::TmBufferFull as usize], 4);
    assert_eq!((t.pkts_in, t.pkts_out), (14, 10));
    assert_eq!(drain(&mut p, &mut pool, 1, 0).len(), 10);
}

#[test]
fn wred_marks_ect_packets_and_drops_not_ect_ones() {
    // Everything above 1 byte of average is between the thresholds; the average follows the
    // queue closely (weight 1/2), so after a few packets marking is likely and, with maxp 1,
    // certain near max.
    let mut p = build(
        "[tm]\n[[tm.class]]\nclass = 0\nwred = \"e\"\n[[tm.wred]]\nname = \"e\"\nmin_bytes = 1\nmax_bytes = 40000\nmaxp_inv = 1\nweight_log2 = 1\n",
    );
    let mut pool = Pool::new(256);
    let frames: Vec<Vec<u8>> = (0..32).map(|k| udp(0, if k % 4 == 3 { 0 } else { 2 }, 1000)).collect();
    let v = offer(&mut p, &mut pool, &frames, 0);
    let wred_drops = v.iter().filter(|v| **v == Verdict::Drop(DropReason::TmWred)).count();
    assert!(wred_drops > 0, "Not-ECT packets in the marking region are dropped: {v:?}");
    for (k, v) in v.iter().enumerate() {
        if frames[k][15] & 3 == 2 {
            assert!(matches!(v, Verdict::Queued(1) | Verdict::Drop(DropReason::TmWred)), "ECT packets are marked, not dropped, below max");
        }
    }
    let out = drain(&mut p, &mut pool, 1, 0);
    let marks = p.tm().unwrap().queue_counters(1, 0).unwrap().ecn_marks;
    let mut ce = 0;
    for (_, f) in &out {
        let ip = hdr::Ipv4::parse(hdr::Eth::parse(f).unwrap().payload()).unwrap();
        assert!(ip.checksum_ok(), "the checksum must verify after a CE mark");
        ce += u64::from(f[15] & 3 == 3);
    }
    assert!(marks > 0 && ce == marks, "{ce} CE frames, {marks} marks counted");
}

#[test]
fn egress_runs_on_what_leaves_the_traffic_manager() {
    let text = r#"
name = "e"
[parser]
headers = ["eth", "ipv4", "udp"]
[control]
ingress = "forward 1"
egress = '''
if ipv4.valid:
    set_dscp 10
'''
[tm]
"#;
    let mut p = fastpath_pipeline::compile("e.toml", text).unwrap_or_else(|e| panic!("{e}")).instantiate();
    p.set_ports(2).unwrap();
    let mut pool = Pool::new(64);
    offer(&mut p, &mut pool, &[udp(0, 0, 100), udp(46, 0, 100)], 0);
    let out = drain(&mut p, &mut pool, 1, 0);
    assert_eq!(out.len(), 2);
    for (v, f) in &out {
        assert_eq!(*v, Verdict::Tx(1));
        assert_eq!(dscp_of(f), 10);
        let ip = hdr::Ipv4::parse(hdr::Eth::parse(f).unwrap().payload()).unwrap();
        assert!(ip.checksum_ok());
    }
}

#[test]
fn the_plan_and_the_trace_show_the_traffic_manager() {
    let mut p = build("[tm]\n[tm.dscp]\n46 = 7\n");
    assert!(p.show_plan().contains("classify: meta.tc = dscp map 0-7:0"), "{}", p.show_plan());
    let mut pool = Pool::new(64);
    p.trace_next(2);
    offer(&mut p, &mut pool, &[udp(46, 0, 100), udp(0, 0, 100)], 0);
    let t = p.take_trace();
    assert!(t.contains("tm: port 1 class 7: queued, queue 100 bytes"), "{t}");
    assert!(t.contains("tm: port 1 class 0: queued"), "{t}");
    assert!(t.contains("verdict: queued for port 1"), "{t}");
    drain(&mut p, &mut pool, 1, 0);
}

/// The parser of the specialised build sets the DSCP class in its own loop (the `classify`
/// stage absorbed): every DSCP of IPv4, IPv6 and tagged IPv4 frames gets its table's class, a
/// frame without IP class 0, as in the reference build, whose classifier runs as a stage; the
/// `classify` row counts the same packets in both.
#[test]
fn the_parser_classifies_as_the_classify_stage_does() {
    let text = r#"
name = "c"
[parser]
headers = ["eth", "vlan", "ipv4", "ipv6", "udp"]
[[counter]]
name = "by_class"
size = 8
[control]
ingress = '''
count by_class meta.tc
forward 1
'''
[tm]
[tm.dscp]
"0-63" = 0
"8-15" = 1
"16-31" = 2
"32-45" = 5
46 = 7
"#;
    let class = |d: u8| match d {
        46 => 7,
        8..=15 => 1,
        16..=31 => 2,
        32..=45 => 5,
        _ => 0,
    };
    let prog = fastpath_pipeline::compile("c.toml", text).unwrap_or_else(|e| panic!("{e}"));
    let mut frames = Vec::new();
    let mut want = [0u64; 8];
    // DSCP d in d + 1 IPv4 frames, so that a class table read at the wrong index gives other
    // counts (a shift that keeps each class's size would not show in one frame each).
    for d in 0..64u8 {
        for _ in 0..d {
            frames.push(udp(d, d & 3, 100));
        }
        want[class(d)] += u64::from(d);
        frames.push(udp(d, d & 3, 100));
        let mut r6 = hdr::ipv6::Ipv6Repr::new("2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap(), IpProto::UDP, 0);
        r6.traffic_class = d << 2 | 1;
        frames.push(FrameBuilder::eth(B, A).ipv6_with(r6).udp(1, 2).build());
        let mut r4 = Ipv4Repr::new(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), IpProto::UDP, 0);
        r4.dscp = d;
        frames.push(FrameBuilder::eth(B, A).vlan(7, 0).ipv4_with(r4).udp(1, 2).build());
        want[class(d)] += 3;
    }
    // No IP: class 0. Cut short: dropped by the parser, never counted.
    frames.push([&B[..], &A[..], &[0x88, 0xb5], &[0; 46]].concat());
    want[0] += 1;
    frames.push(udp(46, 0, 100)[..20].to_vec());
    let mut rows = Vec::new();
    for mut p in [prog.instantiate(), prog.instantiate_reference()] {
        p.set_ports(2).unwrap();
        let mut pool = Pool::new(8192);
        for chunk in frames.chunks(200) {
            offer(&mut p, &mut pool, chunk, 0);
        }
        let got: Vec<u64> = p.objects().counter("by_class").unwrap().values.iter().map(|v| v.0).collect();
        assert_eq!(got, want, "classes by counter");
        let c = row(&p, "classify");
        rows.push((c.calls, c.pkts_in, c.pkts_out, c.drops));
    }
    assert_eq!(rows[0], rows[1], "the classify row, specialised against reference");
    assert_eq!(rows[0].1, frames.len() as u64 - 1);
}
