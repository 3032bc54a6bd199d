//! `fastpath run` on live ports: l2fwd between two veth pairs in namespaces this test creates.
//!
//! ```text
//!   peer ns                         dut ns (fastpath run pipelines/l2fwd.toml)
//!   h0 (raw socket) ── veth ── d0  = port p0 ┐ port_pair: 0 => forward(1), 1 => forward(0)
//!   h1 (raw socket) ── veth ── d1  = port p1 ┘ swap eth.dst eth.src
//! ```
//! Frames carry a sequence number; every frame sent into h0 must come out of h1 (and back the
//! other way) exactly once, in order, with the MAC addresses swapped and the rest unchanged,
//! and the counters printed after SIGTERM (or the `--packets` bound) must match exactly.
//! Needs root; in CI (`CI` set) a missing root is a failure, not a skip. Namespaces and the
//! child process are removed on every exit path (drop guards).

mod common;

use common::{root_or_skip, ChildGuard};
use fastpath_io::af_packet::RawSocket;
use fastpath_io::netns::{Netns, VethPair};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
const MAC_A: [u8; 6] = [2, 0x18, 0, 0, 0, 0xaa];
const MAC_B: [u8; 6] = [2, 0x18, 0, 0, 0, 0xbb];
const CHUNK: u32 = 32;

fn frame(dir: u8, seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&MAC_B);
    f[6..12].copy_from_slice(&MAC_A);
    f[12..14].copy_from_slice(&ETHERTYPE);
    f[14..20].copy_from_slice(b"FPLIVE");
    f[20] = dir;
    f[21..25].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[25..].iter_mut().enumerate() {
        *b = (i as u8) ^ (seq as u8);
    }
    f
}

/// Sends `n` frames into `tx` in chunks and checks each arrives on `rx` once, in order, swapped.
fn send_and_check(peer: &Netns, tx_if: &str, rx_if: &str, dir: u8, n: u32, len: usize) {
    let (tx_if, rx_if) = (tx_if.to_string(), rx_if.to_string());
    peer.run(move || {
        let tx = RawSocket::open(&tx_if).unwrap();
        let rx = RawSocket::open(&rx_if).unwrap();
        let mut buf = vec![0u8; 2048];
        let mut next = 0u32;
        // Chunks small enough for the receiving socket's default buffer (~212 KB) at 1514 B.
        for chunk in 0..n.div_ceil(CHUNK) {
            let hi = ((chunk + 1) * CHUNK).min(n);
            for seq in chunk * CHUNK..hi {
                tx.send(&frame(dir, seq, len)).unwrap();
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while next < hi {
                assert!(Instant::now() < deadline, "dir {dir}: frame {next} of {n} did not come out of {rx_if}");
                let Some(got) = rx.recv(&mut buf, 200).unwrap() else { continue };
                let f = &buf[..got];
                if f.len() < 25 || f[12..14] != ETHERTYPE || &f[14..20] != b"FPLIVE" || f[20] != dir {
                    continue;
                }
                let mut want = frame(dir, next, len);
                want[..6].copy_from_slice(&MAC_A);
                want[6..12].copy_from_slice(&MAC_B);
                assert_eq!(f, &want[..], "dir {dir}: frame {next} differs (expected the MACs swapped, nothing else)");
                next += 1;
            }
        }
        // Nothing extra (no duplicates) shortly after.
        while let Some(got) = rx.recv(&mut buf, 100).unwrap() {
            let f = &buf[..got];
            assert!(!(f.len() >= 21 && &f[14..20] == b"FPLIVE" && f[20] == dir), "dir {dir}: a frame came out twice");
        }
    })
    .unwrap();
}

/// Parses the `id port rx_pkts rx_bytes rx_drop tx_pkts tx_bytes tx_drop errors` rows.
fn port_row(out: &str, name: &str) -> Vec<u64> {
    let line = out
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name) && l.split_whitespace().next().is_some_and(|x| x.parse::<u32>().is_ok()))
        .unwrap_or_else(|| panic!("no counter row for port {name} in:\n{out}"));
    line.split_whitespace().skip(2).map(|x| x.parse().unwrap()).collect()
}

struct Setup {
    peer: Netns,
    dut: Netns,
    _v0: VethPair,
    _v1: VethPair,
    entries: std::path::PathBuf,
}

fn setup() -> Setup {
    setup_queues(1)
}

fn setup_queues(q: u32) -> Setup {
    let peer = Netns::new("fpl-peer").unwrap();
    let dut = Netns::new("fpl-dut").unwrap();
    let _v0 = VethPair::with_queues(&peer, "h0", &dut, "d0", q).unwrap();
    let _v1 = VethPair::with_queues(&peer, "h1", &dut, "d1", q).unwrap();
    let entries = std::env::temp_dir().join(format!("fpl-l2fwd-{}-{}.txt", std::process::id(), dut.name()));
    std::fs::write(&entries, "table port_pair add 0 => forward(1)\ntable port_pair add 1 => forward(0)\n").unwrap();
    Setup { peer, dut, _v0, _v1, entries }
}

/// The tcx BPF links process `pid` holds (from `/proc/PID/fdinfo`).
fn tcx_links(pid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else { return 0 };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
        .filter(|info| info.lines().any(|l| l.split_whitespace().eq(["link_type:", "tcx"])))
        .count()
}

fn start(s: &Setup, ports: [&str; 2], extra: &[&str]) -> ChildGuard {
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/l2fwd.toml");
    let mut c = Command::new("ip");
    c.args(["netns", "exec", s.dut.name(), env!("CARGO_BIN_EXE_fastpath"), "run", spec, "--entries"])
        .arg(&s.entries)
        .args(["--port", ports[0], "--port", ports[1], "--idle-sleep", "50", "--no-pin"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = ChildGuard::new(c.spawn().unwrap());
    // Ready: both ports opened (an XDP program shows on d0 for afxdp and xdp ports) and, for
    // socket ports, every worker polling: a counters request on the control socket is answered
    // only once each worker has started and read its mailbox. (`ip netns exec` execs fastpath,
    // so the child's PID is fastpath's, and so is its default socket's name.)
    let t0 = Instant::now();
    let tc = extra.windows(2).any(|w| w == ["--mode", "tc"]);
    loop {
        let link = s.dut.ip(&["link", "show", "d0"]).unwrap();
        if tc {
            // tcx links show in no `ip link` output: count the process's BPF links of that type.
            if tcx_links(child.child().id()) == 2 {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "fastpath did not attach its tc program to both ports");
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        if !(ports[0].contains("afxdp") || ports[0].contains("=xdp:")) || link.contains("xdp") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "fastpath did not attach XDP to d0: {link}");
        std::thread::sleep(Duration::from_millis(20));
    }
    if ports[0].contains("=xdp:") {
        std::thread::sleep(Duration::from_millis(500));
        return child;
    }
    let sock = format!("/run/fastpath/{}.sock", child.child().id());
    loop {
        let ok = Command::new(env!("CARGO_BIN_EXE_fastpath")).args(["ctl", "--socket", &sock, "show", "counters"]).output().unwrap();
        if ok.status.success() {
            break;
        }
        assert!(child.child().try_wait().unwrap().is_none(), "fastpath stopped before it was ready");
        assert!(t0.elapsed() < Duration::from_secs(20), "fastpath's workers did not answer on {sock}");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn finish(mut g: ChildGuard, term: bool) -> String {
    let (status, out, err) = g.stop(term);
    assert!(status.success(), "fastpath failed: {status}\nstdout:\n{out}\nstderr:\n{err}");
    out
}

fn forward_both_ways(p0: &str, p1: &str, n: u32, len: usize) {
    forward_both_ways_on(setup(), p0, p1, n, len, &[]);
}

fn forward_both_ways_on(s: Setup, p0: &str, p1: &str, n: u32, len: usize, extra: &[&str]) {
    let g = start(&s, [&format!("p0={p0}:d0"), &format!("p1={p1}:d1")], extra);
    send_and_check(&s.peer, "h0", "h1", 0, n, len);
    send_and_check(&s.peer, "h1", "h0", 1, n, len);
    let out = finish(g, true);
    let _ = std::fs::remove_file(&s.entries);
    assert!(out.contains("stopped by signal"), "{out}");
    if let Some(w) = extra.iter().position(|x| *x == "--workers").and_then(|i| extra.get(i + 1)) {
        let last: usize = w.parse::<usize>().unwrap() - 1;
        assert!(out.contains(&format!("worker {last} (")), "every worker reports:\n{out}");
    }
    let (r0, r1) = (port_row(&out, "p0"), port_row(&out, "p1"));
    let (n, b) = (u64::from(n), u64::from(n) * len as u64);
    // rx_pkts rx_bytes rx_drop tx_pkts tx_bytes tx_drop errors
    assert_eq!(r0, vec![n, b, 0, n, b, 0, 0], "p0\n{out}");
    assert_eq!(r1, vec![n, b, 0, n, b, 0, 0], "p1\n{out}");
    // Per-stage counters: every packet went through the port_pair table, none dropped.
    let stage = out.lines().find(|l| l.starts_with("port_pair")).unwrap_or_else(|| panic!("{out}"));
    let cols: Vec<&str> = stage.split_whitespace().collect();
    assert_eq!(cols[2], (2 * n).to_string(), "{out}");
    assert_eq!(cols[4], "0", "{out}");
    assert!(!out.contains("drops by reason"), "{out}");
}

#[test]
fn afxdp_to_afpacket_forwards_exactly_and_sigterm_prints_counters() {
    if !root_or_skip() {
        return;
    }
    forward_both_ways("afxdp", "afpacket", 1000, 64);
}

#[test]
fn afxdp_both_ports_forward_exactly() {
    if !root_or_skip() {
        return;
    }
    forward_both_ways("afxdp", "afxdp", 1000, 1514);
}

#[test]
fn two_workers_on_two_queues_and_a_fanout_group_forward_exactly() {
    if !root_or_skip() {
        return;
    }
    // Worker w opens AF_XDP queue w on d0 and joins d1's PACKET_FANOUT_HASH group; the per-port
    // rows and the per-stage counters are sums over both workers.
    forward_both_ways_on(setup_queues(2), "afxdp", "afpacket", 600, 64, &["--workers", "2"]);
}

#[test]
fn afpacket_packets_bound_stops_by_itself() {
    if !root_or_skip() {
        return;
    }
    let s = setup();
    let g = start(&s, ["p0=afpacket:d0", "p1=afpacket:d1"], &["--packets", "300", "--duration", "20"]);
    send_and_check(&s.peer, "h0", "h1", 0, 300, 128);
    let out = finish(g, false);
    let _ = std::fs::remove_file(&s.entries);
    assert!(out.contains("stopped by --packets"), "{out}");
    assert_eq!(port_row(&out, "p0")[0], 300, "{out}");
    assert_eq!(port_row(&out, "p1")[3], 300, "{out}");
}

#[test]
fn a_port_that_cannot_open_is_named() {
    if !root_or_skip() {
        return;
    }
    let s = setup();
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/l2fwd.toml");
    let out = Command::new("ip")
        .args(["netns", "exec", s.dut.name(), env!("CARGO_BIN_EXE_fastpath"), "run", spec])
        .args(["--port", "p0=afpacket:d0", "--port", "up=afxdp:nosuch0", "--duration", "5"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&s.entries);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("port up (afxdp:nosuch0"), "{err}");
    assert!(err.contains("nosuch0"), "{err}");
}

/// The XDP datapath (`xdp:` ports): l2fwd compiled to eBPF forwards every frame exactly, MACs
/// swapped, in both directions, and prints its per-port and per-table counters. In native mode
/// a veth hands redirected frames to its peer only when the peer has NAPI (GRO on, as the lab's
/// hosts have); generic mode needs nothing of the peer, nor does tc mode (the program at tcx
/// ingress, counting in the same maps).
/// `extra` goes on fastpath's command line. In tc mode the start line names the ports whose
/// frames go straight into their veth peer (the hosts' namespace), unless `--tc-redirect xmit`.
fn xdp_forwards(mode: &str, gro_on_hosts: bool, extra: &[&str]) {
    let s = setup();
    if gro_on_hosts {
        for h in ["h0", "h1"] {
            s.peer.exec("ethtool", &["-K", h, "gro", "on"]).unwrap();
        }
    }
    let mut g = start(&s, ["p0=xdp:d0", "p1=xdp:d1"], &[&["--mode", mode], extra].concat());
    let link = s.dut.ip(&["link", "show", "d1"]).unwrap();
    match mode {
        "tc" => assert!(!link.contains("xdp"), "tc mode attaches no XDP program: {link}"),
        "skb" => assert!(link.contains("xdpgeneric"), "{link}"),
        _ => assert!(link.contains("xdp"), "{link}"),
    }
    let (n, len) = (500u32, 128usize);
    send_and_check(&s.peer, "h0", "h1", 0, n, len);
    send_and_check(&s.peer, "h1", "h0", 1, n, len);
    let (status, out, err) = g.stop(true);
    assert!(status.success(), "fastpath failed: {status}\nstdout:\n{out}\nstderr:\n{err}");
    let _ = std::fs::remove_file(&s.entries);
    assert!(out.contains("stopped by signal"), "{out}");
    let into_peer = mode == "tc" && !extra.contains(&"xmit");
    for p in ["p0=d0", "p1=d1"] {
        assert_eq!(err.contains(&format!("{p} ({mode} mode, sent into its peer)")), into_peer, "{err}");
    }
    // id port rx_pkts tx_pkts: every frame in, every frame out the other port.
    let n = u64::from(n);
    assert_eq!(port_row(&out, "p0"), vec![n, n], "{out}");
    assert_eq!(port_row(&out, "p1"), vec![n, n], "{out}");
    let table = out.lines().find(|l| l.starts_with("port_pair")).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(table.split_whitespace().collect::<Vec<_>>(), ["port_pair", &(2 * n).to_string(), "0"], "{out}");
    assert!(!out.contains("drops by reason"), "{out}");
    // Detached at exit: the kernel stack has the ports back.
    assert!(!s.dut.ip(&["link", "show", "d0"]).unwrap().contains("prog/xdp"), "XDP program left attached");
}

#[test]
fn xdp_datapath_native_mode_forwards_exactly() {
    if !root_or_skip() {
        return;
    }
    xdp_forwards("native", true, &[]);
}

#[test]
fn xdp_datapath_generic_mode_forwards_exactly() {
    if !root_or_skip() {
        return;
    }
    xdp_forwards("skb", false, &[]);
}

#[test]
fn xdp_datapath_tc_mode_forwards_exactly() {
    if !root_or_skip() {
        return;
    }
    xdp_forwards("tc", false, &[]);
}

#[test]
fn xdp_datapath_tc_mode_out_of_the_ports_forwards_exactly() {
    if !root_or_skip() {
        return;
    }
    xdp_forwards("tc", false, &["--tc-redirect", "xmit"]);
}

#[test]
fn tc_redirect_is_refused_outside_tc_mode() {
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/l2fwd.toml");
    for (ports, want) in [
        (["p0=xdp:nosuch0", "p1=xdp:nosuch1"], "--tc-redirect is for --mode tc"),
        (["p0=afpacket:nosuch0", "p1=afpacket:nosuch1"], "--tc-redirect is for xdp: ports with --mode tc"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_fastpath"))
            .args(["run", spec, "--port", ports[0], "--port", ports[1], "--mode", "skb", "--tc-redirect", "xmit"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn xdp_datapath_attaches_natively_on_jumbo_mtu_ports() {
    if !root_or_skip() {
        return;
    }
    // A native XDP program on a veth whose MTU exceeds a page must declare multi-buffer support
    // (BPF_F_XDP_HAS_FRAGS), or the kernel refuses the attach with ERANGE.
    let s = setup();
    for (ns, ifs) in [(&s.peer, ["h0", "h1"]), (&s.dut, ["d0", "d1"])] {
        for i in ifs {
            ns.set_mtu(i, 9000).unwrap();
        }
    }
    for h in ["h0", "h1"] {
        s.peer.exec("ethtool", &["-K", h, "gro", "on"]).unwrap();
    }
    let g = start(&s, ["p0=xdp:d0", "p1=xdp:d1"], &["--mode", "native"]);
    send_and_check(&s.peer, "h0", "h1", 0, 100, 1514);
    let out = finish(g, true);
    let _ = std::fs::remove_file(&s.entries);
    assert_eq!(port_row(&out, "p0"), vec![100, 0], "{out}");
    assert_eq!(port_row(&out, "p1"), vec![0, 100], "{out}");
}

#[test]
fn xdp_datapath_refuses_a_pipeline_it_cannot_compile_and_names_why() {
    if !root_or_skip() {
        return;
    }
    let s = setup();
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/router.toml");
    let out = Command::new("ip")
        .args(["netns", "exec", s.dut.name(), env!("CARGO_BIN_EXE_fastpath"), "run", spec])
        .args(["--port", "p0=xdp:d0", "--port", "p1=xdp:d1", "--duration", "5"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&s.entries);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("the XDP datapath cannot run this pipeline: parser header(s) vlan, ipv6 ("), "{err}");
    assert!(!s.dut.ip(&["link", "show", "d0"]).unwrap().contains("xdp"), "nothing attached");
}

#[test]
fn check_says_whether_xdp_ports_can_run_a_spec() {
    let check = |spec: &str| {
        let path = format!("{}/../../pipelines/{spec}", env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(env!("CARGO_BIN_EXE_fastpath")).args(["check", &path]).output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(check("l2fwd.toml").contains("xdp ports: yes"));
    let r = check("router.toml");
    assert!(
        r.contains(
            "xdp ports: no, parser header(s) vlan, ipv6 (the XDP datapath parses eth, ipv4, udp, tcp, icmp, vxlan and their inner_ twins)"
        ),
        "{r}"
    );
}
