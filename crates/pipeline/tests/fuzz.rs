//! Bounded, deterministic fuzzing (nightly cargo-fuzz is not available here): the spec loader
//! on mutated specs, and every reference pipeline on arbitrary and mutated frames. Neither may
//! panic; every packet must leave with a final verdict, and every drop must be counted.
//! `FUZZ_ITERS` scales the number of inputs, `FUZZ_SEED` changes them; a failure prints the seed
//! and the input so it can be kept in `testdata/fuzz-regressions/` with a replaying test.

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{IpProto, Ipv4Repr, TcpFlags};
use fastpath_packet::{Batch, Pool, Verdict, BATCH_MAX};
use std::path::Path;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn iters(default: usize) -> usize {
    std::env::var("FUZZ_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn seed() -> u64 {
    std::env::var("FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed)
}

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn corpus(dir: &str) -> Vec<String> {
    let mut v: Vec<_> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    v.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect()
}

const TOKENS: &[&str] = &[
    "if ",
    "elif ",
    "else:",
    ":",
    "\n",
    "    ",
    "apply ",
    "ipv4.valid",
    "ipv4.dst",
    "meta.in_port",
    "==",
    "forward 1",
    "drop",
    "set ",
    "=",
    "swap eth.dst eth.src",
    "(",
    ")",
    "[",
    "]",
    "\"",
    "'''",
    "#",
    "lpm",
    "exact",
    "ternary",
    "range",
    "size = 0",
    "9999999999999999999",
    "ttl_dec",
    "push_vlan 4095",
    "pop_vlan",
    "meter m 0",
    "count c",
    "and ",
    "or ",
    "not ",
    ".hit",
    "é",
    "\t",
];

fn mutate_text(r: &mut Rng, s: &str) -> String {
    let mut b: Vec<u8> = s.as_bytes().to_vec();
    for _ in 0..1 + r.below(4) {
        match r.below(5) {
            0 if !b.is_empty() => {
                let i = r.below(b.len());
                b[i] = r.next() as u8;
            }
            1 if !b.is_empty() => {
                let i = r.below(b.len());
                let n = r.below(40).min(b.len() - i);
                b.drain(i..i + n);
            }
            2 => {
                let i = r.below(b.len() + 1);
                let t = TOKENS[r.below(TOKENS.len())];
                b.splice(i..i, t.bytes());
            }
            3 if !b.is_empty() => {
                let n = r.below(b.len());
                b.truncate(n);
            }
            _ => {
                let i = r.below(b.len() + 1);
                let j = r.below(b.len() + 1);
                let (i, j) = (i.min(j), i.max(j));
                let dup = b[i..j].to_vec();
                b.splice(i..i, dup);
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

#[test]
fn spec_loader_never_panics_on_mutated_specs() {
    let mut base = corpus("pipelines");
    base.extend(corpus("testdata/specs/bad"));
    let mut r = Rng(seed());
    let (mut ok, mut err) = (0, 0);
    for k in 0..iters(6_000) {
        let text = mutate_text(&mut r, &base[k % base.len()]);
        let res = std::panic::catch_unwind(|| match fastpath_pipeline::compile("fuzz.toml", &text) {
            Ok(p) => {
                let _ = p.instantiate();
                true
            }
            Err(e) => {
                assert!(!e.0.is_empty(), "an error result must carry at least one error");
                false
            }
        });
        match res {
            Ok(true) => ok += 1,
            Ok(false) => err += 1,
            Err(_) => panic!("spec loader panicked (seed {}, input {k}):\n{text}", seed()),
        }
    }
    // The mutations must exercise both paths, or the fuzzer is not reaching the compiler.
    assert!(ok > 0 && err > 0, "ok {ok}, err {err}");
}

fn entries_for(name: &str) -> &'static str {
    match name {
        "l2fwd" => "table port_pair add 0 => forward(1)\ntable port_pair add 1 => forward(0)\n",
        "router" => include_str!("../../../testdata/routes/small.txt"),
        "switch-acl" => include_str!("../../../testdata/switch-acl/acl24.txt"),
        "vbng" => concat!(include_str!("../../../testdata/vbng/demo.txt"), include_str!("../../../testdata/vbng/fuzz.txt")),
        _ => "",
    }
}

fn valid_frames(r: &mut Rng) -> Vec<u8> {
    let a = [2, 0, 0, 0, 0, 1];
    let ip = |r: &mut Rng| std::net::Ipv4Addr::from(0xc612_0000 | (r.next() as u32 & 0x1ffff));
    match r.below(6) {
        0 => FrameBuilder::eth(a, a)
            .ipv4(ip(r), ip(r))
            .udp(r.next() as u16, 4789)
            .vxlan(r.next() as u32 & 0xffffff)
            .inner_eth(a, a)
            .ipv4(ip(r), ip(r))
            .tcp(1, 2, TcpFlags::SYN, 1, 0)
            .build(),
        1 => FrameBuilder::eth(a, a).qinq(10, 20).ipv4(ip(r), ip(r)).udp(1, 2).build(),
        2 => FrameBuilder::eth(a, a)
            .ipv6("2001:2::1".parse::<std::net::Ipv6Addr>().unwrap(), "2001:2::2".parse().unwrap())
            .ipv6_ext(IpProto(0), &[0; 6])
            .udp(1, 2)
            .build(),
        3 => {
            let mut v = Ipv4Repr::new(ip(r), ip(r), IpProto::TCP, 0);
            v.options = vec![1, 1, 1, 0];
            v.ttl = r.below(3) as u8;
            FrameBuilder::eth(a, a).ipv4_with(v).tcp(5, 6, TcpFlags(r.next() as u8), 0, 0).build()
        }
        4 => FrameBuilder::eth(a, a).vlan(5, 1).ipv4(ip(r), ip(r)).icmp_echo(1, 1).build(),
        _ => FrameBuilder::eth(a, a).ipv4(ip(r), ip(r)).udp(7, 8).frame_len(64 + r.below(1400)).build(),
    }
}

fn frame(r: &mut Rng) -> Vec<u8> {
    if r.below(4) == 0 {
        let n = r.below(200);
        return (0..n).map(|_| r.next() as u8).collect();
    }
    let mut f = valid_frames(r);
    for _ in 0..r.below(4) {
        match r.below(3) {
            0 if !f.is_empty() => {
                let i = r.below(f.len().min(80));
                f[i] ^= 1 << r.below(8);
            }
            1 => {
                let n = r.below(f.len() + 1);
                f.truncate(n);
            }
            _ if f.len() > 20 => {
                // Length-field edits: IPv4 total length, IHL, UDP length.
                let i = [16, 17, 14, 38, 39][r.below(5)].min(f.len() - 1);
                f[i] = r.next() as u8;
            }
            _ => {}
        }
    }
    f
}

#[test]
fn reference_pipelines_never_panic_and_account_for_every_packet() {
    let specs = std::fs::read_dir(root().join("pipelines"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"));
    let mut r = Rng(seed() ^ 0xf00d);
    let mut total = 0usize;
    for path in specs {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut pipe = fastpath_pipeline::compile(&path.display().to_string(), &text).unwrap().instantiate();
        pipe.load_entries("fuzz-entries", entries_for(&name)).unwrap();
        pipe.set_ports(4).unwrap();
        // Room for a batch flooded to every port while the last one is still queued.
        let mut pool = Pool::new(8 * BATCH_MAX);
        let mut b = Batch::new();
        let mut sent = 0u64;
        let mut dropped = 0u64;
        let mut now = 0u64;
        while sent < iters(15_000) as u64 {
            b.clear();
            let n = r.below(BATCH_MAX + 1);
            let mut frames = Vec::new();
            for _ in 0..n {
                let f = frame(&mut r);
                let h = pool.alloc().unwrap();
                pool.set_data(h, &f);
                b.push(h, r.below(4) as u16);
                frames.push(f);
            }
            now += r.next() % 1_000_000_000;
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pipe.process(&mut pool, &mut b, now))).is_err() {
                panic!("{name} panicked (seed {}); batch frames: {frames:02x?}", seed());
            }
            for i in 0..b.len() {
                assert_ne!(b.verdict(i), Verdict::Continue, "{name}: packet left without a verdict");
                dropped += u64::from(matches!(b.verdict(i), Verdict::Drop(_)));
                if !matches!(b.verdict(i), Verdict::Queued(_)) {
                    pool.free(b.handle(i));
                }
            }
            // What a traffic manager queued leaves through egress (flooded copies too).
            for port in 0..4 {
                while pipe.egress(port, &mut pool, &mut b, now) > 0 {
                    for i in 0..b.len() {
                        assert!(matches!(b.verdict(i), Verdict::Tx(_) | Verdict::Drop(_)), "{name}: egress verdict {:?}", b.verdict(i));
                        dropped += u64::from(matches!(b.verdict(i), Verdict::Drop(_)));
                    }
                    pool.free_bulk(b.handles());
                }
            }
            assert_eq!(pipe.tm_backlog(), 0);
            sent += n as u64;
        }
        let dropped_in_stats: u64 = pipe.stats().iter().map(|(_, s)| s.drops.iter().sum::<u64>()).sum();
        assert!(dropped > 0, "{name}: malformed input must have been dropped");
        assert_eq!(dropped_in_stats, dropped, "{name}: every drop is counted under a stage and a reason");
        assert_eq!(pool.available(), pool.capacity(), "{name}: every buffer came back, flooded copies included");
        total += sent as usize;
    }
    assert!(total > 0);
}
