//! The XDP datapath against the batch executor: the same spec and entries, the same frames;
//! every frame must get the same verdict (the same output port, or a drop for the same reason)
//! and leave with the same bytes, at both hooks the datapath compiles for (XDP and tc). Each
//! program runs through `BPF_PROG_TEST_RUN` on the ports of a veth pair in a namespace this
//! test creates; its verdict is read from its return value and from which counter moved.
//!
//! Needs root (CI runs it as root; a missing root fails there rather than skipping).

use fastpath_io::bpf::{tc_action, xdp_action, Prog, TestRun};
use fastpath_io::netns::{Netns, VethPair};
use fastpath_io::sys::is_root;
use fastpath_packet::{Batch, DropReason, Pool, Verdict};
use fastpath_xdp::{Hook, XdpCounters, XdpDatapath, XdpPortSpec};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn root_or_skip() -> bool {
    if is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs these tests as root");
    eprintln!("not root: skipped");
    false
}

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
    let ns = Netns::new(&format!("fpx-{tag}")).unwrap();
    let _veth = VethPair::new(&ns, "x0", &ns, "x1").unwrap();
    let (spec, entries) = (spec.to_string(), entries.to_string());
    ns.run(move || {
        let prog = fastpath_pipeline::compile("t.toml", &spec).unwrap();
        let ports = [("p0", "x0"), ("p1", "x1")].map(|(n, i)| XdpPortSpec { name: n.into(), iface: i.into() });
        let mut dp = XdpDatapath::build(prog.clone(), &ports).unwrap();
        dp.load_entries("entries", &entries).unwrap();
        dp.load_tc().unwrap();
        let mut pipe = prog.instantiate();
        pipe.load_entries("entries", &entries).unwrap();
        // The runner's closure is `Fn`: the engine and its pool live in a cell.
        let engine = std::cell::RefCell::new((pipe, Pool::new(8)));
        let tc_runs = std::cell::Cell::new(0u32);
        let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
        runner
            .run(&frames(), |fs| {
                let mut e = engine.borrow_mut();
                let (pipe, pool) = &mut *e;
                for (port, f) in fs {
                    let want = engine_outcome(pipe, pool, 2, port, &f);
                    for (hook, prog) in [(Hook::Xdp, dp.prog()), (Hook::Tc, dp.tc_prog().unwrap())] {
                        if hook == Hook::Tc && !skb_test_run_takes(&f) {
                            continue;
                        }
                        tc_runs.set(tc_runs.get() + u32::from(hook == Hook::Tc));
                        let got = bpf_outcome(&dp, prog, hook, port, &f);
                        prop_assert_eq!(&got, &want, "{:?}: port {} frame {:02x?}", hook, port, f);
                    }
                }
                Ok(())
            })
            .unwrap();
        assert!(tc_runs.get() >= cases, "the tc program ran on {} frames only", tc_runs.get());
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
