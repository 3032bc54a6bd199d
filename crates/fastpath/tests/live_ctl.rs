//! `fastpath ctl` against a running `fastpath run`: table changes reach both workers while
//! traffic flows.
//!
//! ```text
//!   peer ns                              dut ns: fastpath run pipelines/router.toml --workers 2
//!   h0 (raw socket) ── veth ── d0 = p0 (afpacket, fanout hash over 2 workers) ┐ ttl_dec
//!   h1 (raw socket) ── veth ── d1 = p1 (afpacket)                             ┘ apply fib4
//!                                 control socket (a temp file) ◀── fastpath ctl (this process)
//! ```
//! 1. No route: 64 UDP flows to 198.19.1.0/24 are all dropped as `fib4/no_route`.
//! 2. `ctl table fib4 add 198.19.1.0/24 => nexthop(…)`: the same 64 frames come out of h1
//!    exactly once, with the next hop's MACs, TTL − 1 and a correct IPv4 checksum; both workers
//!    forwarded some; `show counters` agrees with what the sink saw.
//! 3. A bad command and a refused one fail with a useful error and change nothing.
//! 4. `ctl table fib4 del …`: the traffic is dropped again.
//!
//! Also: with a worker pinned to the last core, no other thread of the process may run there.
//!
//! Needs root; in CI a missing root is a failure. Namespaces, the child and the socket file
//! are removed on every exit path (drop guards).

mod common;

use common::{root_or_skip, ChildGuard};
use fastpath_io::af_packet::RawSocket;
use fastpath_io::netns::{Netns, VethPair};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MAC_H0: [u8; 6] = [2, 0x18, 0, 0, 0, 0xa0];
const MAC_D0: [u8; 6] = [2, 0x18, 0, 0, 0, 0xd0];
const NH_DMAC: &str = "02:18:00:00:00:b1";
const NH_SMAC: &str = "02:18:00:00:00:d1";
const FLOWS: u16 = 64;
const ROUTE: &str = "table fib4 add 198.19.1.0/24 => nexthop(1, 02:18:00:00:00:b1, 02:18:00:00:00:d1)";

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An Ethernet/IPv4/UDP frame from h0 to 198.19.1.(1 + flow % 200), UDP source port
/// 10000 + flow, TTL `ttl`, with `seq` in the payload.
fn frame(flow: u16, seq: u32, ttl: u8, macs: ([u8; 6], [u8; 6])) -> Vec<u8> {
    let payload_len = 32usize;
    let mut f = Vec::with_capacity(14 + 20 + 8 + payload_len);
    f.extend_from_slice(&macs.0);
    f.extend_from_slice(&macs.1);
    f.extend_from_slice(&[0x08, 0x00]);
    let total = (20 + 8 + payload_len) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    ip[8] = ttl;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 0, 2]);
    ip[16..20].copy_from_slice(&[198, 19, 1, 1 + (flow % 200) as u8]);
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&(10000 + flow).to_be_bytes());
    f.extend_from_slice(&7u16.to_be_bytes());
    f.extend_from_slice(&(8 + payload_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]); // no UDP checksum
    f.extend_from_slice(b"FPCTL");
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(14 + usize::from(total), 0x5a);
    f
}

fn mac(s: &str) -> [u8; 6] {
    let v: Vec<u8> = s.split(':').map(|x| u8::from_str_radix(x, 16).unwrap()).collect();
    v.try_into().unwrap()
}

/// Sends one frame per flow (seq = base + flow) into h0 and returns what came out of h1 within
/// `wait` (our frames only, by seq).
fn send_round(peer: &Netns, base: u32, expect: usize, wait: Duration) -> BTreeMap<u32, Vec<Vec<u8>>> {
    peer.run(move || {
        let tx = RawSocket::open("h0").unwrap();
        let rx = RawSocket::open("h1").unwrap();
        for flow in 0..FLOWS {
            tx.send(&frame(flow, base + u32::from(flow), 64, (MAC_D0, MAC_H0))).unwrap();
        }
        let mut got: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
        let mut buf = vec![0u8; 2048];
        let t0 = Instant::now();
        let mut n = 0;
        while t0.elapsed() < wait {
            let Some(len) = rx.recv(&mut buf, 50).unwrap() else {
                if n >= expect && expect > 0 {
                    break;
                }
                continue;
            };
            let f = &buf[..len];
            if f.len() >= 51 && &f[42..47] == b"FPCTL" {
                let seq = u32::from_be_bytes(f[47..51].try_into().unwrap());
                got.entry(seq).or_default().push(f.to_vec());
                n += 1;
            }
        }
        // A short extra wait catches duplicates.
        while let Some(len) = rx.recv(&mut buf, 100).unwrap() {
            let f = &buf[..len];
            if f.len() >= 51 && &f[42..47] == b"FPCTL" {
                got.entry(u32::from_be_bytes(f[47..51].try_into().unwrap())).or_default().push(f.to_vec());
            }
        }
        got
    })
    .unwrap()
}

/// Runs `fastpath ctl --socket S ARGS` (stdin: `input`) → (success, stdout, stderr).
fn ctl(sock: &Path, args: &[&str], input: Option<&str>) -> (bool, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fastpath"));
    c.arg("ctl").arg("--socket").arg(sock).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if let Some(i) = input {
        stdin.write_all(i.as_bytes()).unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn counters(sock: &Path) -> Value {
    let (ok, out, err) = ctl(sock, &["show", "counters", "json"], None);
    assert!(ok, "show counters json failed: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn stage<'a>(c: &'a Value, name: &str) -> &'a Value {
    c["stages"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no stage {name}: {c}"))
}

fn no_route(c: &Value) -> u64 {
    stage(c, "fib4")["drops"]["no_route"].as_u64().unwrap_or(0)
}

/// Polls the counters until `f` holds (bounded), so the test never races the workers.
fn wait_counters(sock: &Path, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        let c = counters(sock);
        if f(&c) {
            return c;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "counters never showed {what}: {c}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn fib4_entries(sock: &Path) -> u64 {
    let (ok, out, err) = ctl(sock, &["show", "tables"], None);
    assert!(ok, "{err}");
    let line = out.lines().find(|l| l.starts_with("fib4 ")).unwrap_or_else(|| panic!("{out}"));
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// `fastpath run pipelines/SPEC` in a DUT namespace with two afpacket ports (d0, d1; their peers
/// h0, h1 in `peer`), extra `args`, and a control socket; ready once the socket answers.
struct Rig {
    guard: ChildGuard,
    sock: std::path::PathBuf,
    peer: Netns,
    _veths: [VethPair; 2],
    _dut: Netns,
}

impl Rig {
    fn start(tag: &str, spec: &str, args: &[&str]) -> Rig {
        let peer = Netns::new(&format!("{tag}-peer")).unwrap();
        let dut = Netns::new(&format!("{tag}-dut")).unwrap();
        let veths = [VethPair::new(&peer, "h0", &dut, "d0").unwrap(), VethPair::new(&peer, "h1", &dut, "d1").unwrap()];
        let sock = std::env::temp_dir().join(format!("{tag}-{}.sock", std::process::id()));
        let spec = format!("{}/../../pipelines/{spec}", env!("CARGO_MANIFEST_DIR"));
        let child = Command::new("ip")
            .args(["netns", "exec", dut.name(), env!("CARGO_BIN_EXE_fastpath"), "run", &spec])
            .args(["--port", "p0=afpacket:d0", "--port", "p1=afpacket:d1", "--idle-sleep", "50"])
            .args(args)
            .arg("--ctl")
            .arg(&sock)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut guard = ChildGuard::new(child).removing(&sock);
        let t0 = Instant::now();
        while !ctl(&sock, &["show", "tables"], None).0 {
            assert!(guard.child().try_wait().unwrap().is_none(), "fastpath run exited early");
            assert!(t0.elapsed() < Duration::from_secs(10), "the control socket never answered");
            std::thread::sleep(Duration::from_millis(50));
        }
        Rig { guard, sock, peer, _veths: veths, _dut: dut }
    }
}

#[test]
fn ctl_adds_and_deletes_a_route_on_both_workers_while_traffic_flows() {
    if !root_or_skip() {
        return;
    }
    let mut rig = Rig::start("fpc", "router.toml", &["--workers", "2", "--no-pin"]);
    let (peer, sock) = (&rig.peer, rig.sock.clone());
    assert_eq!(fib4_entries(&sock), 0);
    let n = u64::from(FLOWS);

    // 1. No route: every frame is dropped and counted.
    let got = send_round(peer, 0, 0, Duration::from_millis(300));
    assert!(got.is_empty(), "nothing may be forwarded without a route: {:?}", got.keys());
    wait_counters(&sock, "64 no_route drops", |c| no_route(c) == n);

    // 2. Add the route while running: the same traffic is forwarded, by both workers.
    let (ok, out, err) = ctl(&sock, &[ROUTE], None);
    assert!(ok, "{err}");
    assert!(out.contains("ok: 1 change(s) applied on 2 worker(s)"), "{out}");
    assert_eq!(fib4_entries(&sock), 1);
    let got = send_round(peer, 1000, FLOWS as usize, Duration::from_secs(5));
    assert_eq!(got.len(), FLOWS as usize, "every flow comes out once: {:?}", got.keys());
    for flow in 0..FLOWS {
        let seq = 1000 + u32::from(flow);
        let frames = &got[&seq];
        assert_eq!(frames.len(), 1, "seq {seq} came out {} times", frames.len());
        let want = frame(flow, seq, 63, (mac(NH_DMAC), mac(NH_SMAC)));
        assert_eq!(frames[0], want, "seq {seq}: next-hop MACs, TTL 63 and a recomputed checksum, nothing else");
    }
    let c = wait_counters(&sock, "64 packets sent on p1", |c| c["ports"][1]["tx_pkts"].as_u64() == Some(n));
    let workers = c["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2, "{c}");
    let per_worker_tx: Vec<u64> = workers.iter().map(|w| w["tx_pkts"].as_u64().unwrap()).collect();
    assert!(per_worker_tx.iter().all(|&t| t > 0), "flows spread over both workers: {per_worker_tx:?}\n{c}");
    assert_eq!(per_worker_tx.iter().sum::<u64>(), n, "{c}");
    assert_eq!(c["ports"][0]["rx_pkts"].as_u64(), Some(2 * n), "{c}");
    assert_eq!(no_route(&c), n, "no new drops once the route is in: {c}");
    assert_eq!(stage(&c, "fib4")["pkts_out"].as_u64(), Some(n), "{c}");

    // 3. A bad command (a typo) and a refused one: useful errors, nothing changes.
    let (ok, _, err) = ctl(&sock, &["table fib4 add 198.19.2.0/24 => nexthp(1, 02:18:00:00:00:b1, 02:18:00:00:00:d1)"], None);
    assert!(!ok);
    assert!(err.contains("did you mean \"nexthop\""), "{err}");
    assert!(err.contains("ctl:1:33:"), "the offending token's column: {err}");
    let (ok, _, err) = ctl(&sock, &[], Some("table fib4 add 198.19.3.0/24 => drop\ntable fib5 del 198.19.1.0/24\n"));
    assert!(!ok);
    assert!(err.contains("ctl:2:7: no table \"fib5\" (did you mean \"fib4\"?)"), "{err}");
    let (ok, _, err) = ctl(&sock, &[], Some("table fib4 add 198.19.3.0/24 => drop\ntable fib4 del 198.19.9.0/24\n"));
    assert!(!ok);
    assert!(err.contains("no entry with that key") && err.contains("nothing of this request was applied"), "{err}");
    assert_eq!(fib4_entries(&sock), 1, "failed requests changed nothing");
    let (ok, out, err) = ctl(&sock, &["show", "table", "fib4"], None);
    assert!(ok, "{err}");
    assert_eq!(out.lines().next(), Some(ROUTE), "the running table reads back as the command that filled it: {out}");

    // 4. Delete the route: dropped again.
    let (ok, out, err) = ctl(&sock, &["table", "fib4", "del", "198.19.1.0/24"], None);
    assert!(ok, "{err}");
    assert!(out.contains("ok: 1 change(s)"), "{out}");
    let got = send_round(peer, 2000, 0, Duration::from_millis(300));
    assert!(got.is_empty(), "nothing may be forwarded after the delete: {:?}", got.keys());
    let c = wait_counters(&sock, "128 no_route drops", |c| no_route(c) == 2 * n);
    assert_eq!(c["ports"][1]["tx_pkts"].as_u64(), Some(n), "{c}");

    // Stop; the final report agrees.
    let (status, out, err) = rig.guard.stop(true);
    assert!(status.success(), "{status}\n{out}\n{err}");
    assert!(err.contains(&format!("control socket {}", sock.display())), "the socket is printed at start: {err}");
    assert!(out.contains(&format!("fib4/no_route: {}", 2 * n)), "{out}");
    assert!(!sock.exists(), "the socket file is removed at exit");
}

#[test]
fn ctl_without_a_running_fastpath_says_so() {
    let sock = std::env::temp_dir().join(format!("fpc-none-{}.sock", std::process::id()));
    let (ok, _, err) = ctl(&sock, &["show", "counters"], None);
    assert!(!ok);
    assert!(err.contains("no control socket at"), "{err}");
}

/// The CPUs a thread of `pid` may run on, by thread name (`/proc/PID/task/*/status`).
fn thread_cpus(pid: u32) -> BTreeMap<String, Vec<usize>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        // A thread that ended between the listing and this read has no status: skip it.
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else { continue };
        let field = |k: &str| status.lines().find_map(|l| l.strip_prefix(k)).map(str::trim).unwrap_or("").to_string();
        let mut cpus = Vec::new();
        for part in field("Cpus_allowed_list:").split(',').filter(|p| !p.is_empty()) {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            cpus.extend(a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap());
        }
        out.insert(field("Name:"), cpus);
    }
    out
}

#[test]
fn a_pinned_worker_has_its_core_to_itself() {
    if !root_or_skip() {
        return;
    }
    let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if n < 2 {
        eprintln!("one CPU: no core to keep the other threads on");
        return;
    }
    let last = (n - 1).to_string();
    let mut rig = Rig::start("fpp", "l2fwd.toml", &["--core", &last]);
    let pid = rig.guard.child().id();
    let t0 = Instant::now();
    let threads = loop {
        let t = thread_cpus(pid);
        if t.contains_key("fp-worker-0") && t.contains_key("fp-ctl") {
            break t;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "the worker and control threads never showed: {t:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let others: Vec<usize> = (0..n - 1).collect();
    assert_eq!(threads["fp-worker-0"], vec![n - 1], "{threads:?}");
    for (name, cpus) in &threads {
        if name != "fp-worker-0" {
            assert_eq!(cpus, &others, "thread {name} stays off the worker's core: {threads:?}");
        }
    }
    let (status, _, err) = rig.guard.stop(true);
    assert!(status.success(), "{status}\n{err}");
    assert!(err.contains(&format!("worker core(s) {}, other threads on ", n - 1)), "{err}");
}
