//! A TCP stream whose endpoints keep their offloads on (checksum offload, TSO, GSO: veth's
//! defaults) through two AF_XDP ports with multi-buffer receive (`XdpConfig::multi_buffer`):
//!
//! ```text
//!  ns A                    ns D (this process)                      ns B
//!  a0 198.18.0.1 ──veth── d0 ─[rx: chains ▸ segments]─▶ d1 ──veth── b0 198.18.0.2
//!  iperf3 -c                  ◀────────── ACKs ──────────            iperf3 -s, tshark
//! ```
//!
//! The sender's 64 KB GSO segments reach d0 in generic XDP whole and arrive as descriptor
//! chains; the port cuts them into MTU-sized segments with their checksums, and completes the
//! checksums the sender left partial. tshark on b0 checks the first frames: IP and TCP
//! checksums good, no frame above 1514 bytes; B's kernel counts no checksum errors; iperf3
//! completes. Root, iperf3 and tshark needed (skipped without the tools outside CI).
//!
//! `cargo test -p fastpath-io --test tcp_gso -- --ignored --nocapture` measures instead:
//! 3 runs of `FP_TCP_GSO_SECS` (default 5) seconds with and without multi-buffer receive, in
//! generic XDP mode (`FP_TCP_GSO_MODE=native`: native; `FP_TCP_GSO_GRO=1`: GRO on at both
//! endpoints).

mod netns_common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fastpath_io::af_xdp::{MultiBufferStats, XdpConfig, XdpMode, XdpPort, ZeroCopy};
use fastpath_io::netns::{Netns, VethPair};
use fastpath_io::Port;
use fastpath_packet::{Batch, Pool};
use netns_common::skip_unless_root;

fn have(tool: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {tool}")]).stdout(Stdio::null()).status().is_ok_and(|s| s.success())
}

fn mac(ns: &Netns, ifn: &str) -> String {
    let out = ns.ip(&["-o", "link", "show", ifn]).unwrap();
    out.split("link/ether ").nth(1).and_then(|r| r.split_whitespace().next()).unwrap().to_string()
}

/// A child process killed and reaped when dropped, so that no exit path (a failed assertion
/// included) leaves it running. `ip netns exec` execs the program: the child is the program.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_in(ns: &Netns, args: &[&str], stdout: Stdio) -> Child {
    let mut a = vec!["netns", "exec", ns.name()];
    a.extend_from_slice(args);
    Command::new("ip").args(&a).stdout(stdout).stderr(Stdio::null()).spawn().unwrap()
}

/// The number after `"key":` following `after` in iperf3's JSON.
fn json_num(json: &str, after: &str, key: &str) -> Option<f64> {
    let rest = &json[json.find(after)?..];
    let rest = &rest[rest.find(&format!("\"{key}\":"))? + key.len() + 3..];
    let end = rest.find([',', '\n', '}'])?;
    rest[..end].trim().parse().ok()
}

/// `Tcp: InCsumErrors` of the namespace.
fn tcp_in_csum_errors(ns: &Netns) -> u64 {
    let snmp = ns.exec("cat", &["/proc/net/snmp"]).unwrap();
    let tcp: Vec<&str> = snmp.lines().filter(|l| l.starts_with("Tcp:")).collect();
    let names: Vec<&str> = tcp[0].split_whitespace().collect();
    let vals: Vec<&str> = tcp[1].split_whitespace().collect();
    names.iter().position(|n| *n == "InCsumErrors").map_or(0, |i| vals[i].parse().unwrap())
}

#[derive(Debug)]
struct Outcome {
    gbps: f64,
    retransmits: f64,
    mb: Option<MultiBufferStats>,
    /// Frames from A that tshark captured on b0, those with a bad IP or TCP checksum, the
    /// largest, and the retransmissions it saw among them.
    captured: usize,
    bad_csum: usize,
    max_frame: usize,
    retrans_seen: usize,
    csum_errors_b: u64,
    port_drops: u64,
}

fn run(secs: u32, multi_buffer: bool, capture: bool) -> Outcome {
    let a = Netns::new("fp-ta").unwrap();
    let d = Netns::new("fp-td").unwrap();
    let b = Netns::new("fp-tb").unwrap();
    let _v0 = VethPair::new(&a, "a0", &d, "d0").unwrap();
    let _v1 = VethPair::new(&d, "d1", &b, "b0").unwrap();
    for (ns, ifn) in [(&a, "a0"), (&d, "d0"), (&d, "d1"), (&b, "b0")] {
        ns.link_up(ifn).unwrap();
    }
    a.add_addr("a0", "198.18.0.1/24").unwrap();
    b.add_addr("b0", "198.18.0.2/24").unwrap();
    let (ma, mb_) = (mac(&a, "a0"), mac(&b, "b0"));
    a.ip(&["neigh", "replace", "198.18.0.2", "lladdr", &mb_, "dev", "a0", "nud", "permanent"]).unwrap();
    b.ip(&["neigh", "replace", "198.18.0.1", "lladdr", &ma, "dev", "b0", "nud", "permanent"]).unwrap();
    // FP_TCP_GSO_GRO=1: GRO on at both endpoints (their stacks take merged segments).
    if std::env::var("FP_TCP_GSO_GRO").is_ok_and(|v| v == "1") {
        a.exec("ethtool", &["-K", "a0", "gro", "on"]).unwrap();
        b.exec("ethtool", &["-K", "b0", "gro", "on"]).unwrap();
    }
    let offloads = a.exec("ethtool", &["-k", "a0"]).unwrap_or_default();
    assert!(offloads.contains("tcp-segmentation-offload: on"), "the sender has TSO on:\n{offloads}");

    // Generic XDP: the sender's GSO segments arrive whole (native XDP on veth would turn the
    // sender's TSO off, `veth_fix_features`).
    // FP_TCP_GSO_MODE=native measures the other mode.
    let mode = if std::env::var("FP_TCP_GSO_MODE").is_ok_and(|m| m == "native") { XdpMode::Native } else { XdpMode::Skb };
    let cfg = XdpConfig { mode, zero_copy: ZeroCopy::No, multi_buffer, ..XdpConfig::default() };
    let mut pool = Pool::new(16384);
    let (mut p0, mut p1) =
        d.run(|| (XdpPort::open("d0", 0, &cfg, &mut pool).unwrap(), XdpPort::open("d1", 0, &cfg, &mut pool).unwrap())).unwrap();

    let dir = std::env::temp_dir().join(format!("fp-tcp-gso-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("b0.pcap");
    let pcap_s = pcap.to_str().unwrap().to_string();
    let dur = (secs + 4).to_string();
    let mut shark = capture.then(|| {
        Reaped(spawn_in(&b, &["tshark", "-q", "-i", "b0", "-c", "20000", "-a", &format!("duration:{dur}"), "-w", &pcap_s], Stdio::null()))
    });
    if shark.is_some() {
        let end = Instant::now() + Duration::from_secs(10);
        while !pcap.exists() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let _server = Reaped(spawn_in(&b, &["iperf3", "-s", "-1", "-B", "198.18.0.2"], Stdio::null()));
    std::thread::sleep(Duration::from_millis(400));
    let t = secs.to_string();
    let mut client = spawn_in(&a, &["timeout", &(secs + 12).to_string(), "iperf3", "-c", "198.18.0.2", "-t", &t, "-J"], Stdio::piped());

    // Forward both ways until the client is done (bounded).
    let mut batch = Batch::new();
    let end = Instant::now() + Duration::from_secs(u64::from(secs) + 14);
    let mut done_at: Option<Instant> = None;
    while Instant::now() < end {
        let mut moved = 0;
        for dir in 0..2 {
            let (src, dst) = if dir == 0 { (&mut p0, &mut p1) } else { (&mut p1, &mut p0) };
            batch.clear();
            src.rx_burst(&mut pool, &mut batch, 0);
            let hs = batch.handles();
            let n = dst.tx_burst(&mut pool, hs);
            pool.free_bulk(&hs[n..]);
            dst.flush(&mut pool).unwrap();
            moved += hs.len();
        }
        if moved == 0 {
            std::thread::yield_now();
        }
        if done_at.is_none() && client.try_wait().unwrap().is_some() {
            done_at = Some(Instant::now());
        }
        if done_at.is_some_and(|t| t.elapsed() > Duration::from_millis(300)) {
            break;
        }
    }
    let out = client.wait_with_output().unwrap();
    let json = String::from_utf8_lossy(&out.stdout).to_string();
    if let Some(s) = shark.as_mut() {
        let _ = s.0.wait();
    }
    let mb = p0.multi_buffer_stats();
    let port_drops = p0.stats().rx_dropped + p1.stats().rx_dropped + p0.stats().tx_dropped + p1.stats().tx_dropped;
    p1.close(&mut pool);
    p0.close(&mut pool);

    let (mut captured, mut bad_csum, mut max_frame, mut retrans_seen) = (0, 0, 0, 0);
    if capture {
        let f = |filter: &str| -> String {
            let o = Command::new("tshark")
                .args([
                    "-r",
                    &pcap_s,
                    "-o",
                    "tcp.check_checksum:TRUE",
                    "-o",
                    "ip.check_checksum:TRUE",
                    "-T",
                    "fields",
                    "-e",
                    "frame.len",
                    "-Y",
                    filter,
                ])
                .stderr(Stdio::null())
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).to_string()
        };
        // Frames B received (its own ACKs leave with partial checksums, as offload leaves them).
        let all = f("tcp && ip.src == 198.18.0.1");
        captured = all.lines().count();
        max_frame = all.lines().filter_map(|l| l.trim().parse().ok()).max().unwrap_or(0);
        bad_csum = f("ip.src == 198.18.0.1 && (tcp.checksum.status == 0 || ip.checksum.status == 0)").lines().count();
        retrans_seen = f("ip.src == 198.18.0.1 && (tcp.analysis.retransmission || tcp.analysis.fast_retransmission)").lines().count();
    }
    let _ = std::fs::remove_dir_all(&dir);
    Outcome {
        gbps: json_num(&json, "\"sum_received\"", "bits_per_second").unwrap_or(0.0) / 1e9,
        retransmits: json_num(&json, "\"sum_sent\"", "retransmits").unwrap_or(-1.0),
        mb,
        captured,
        bad_csum,
        max_frame,
        retrans_seen,
        csum_errors_b: tcp_in_csum_errors(&b),
        port_drops,
    }
}

#[test]
fn tcp_with_offloads_on_crosses_multi_buffer_afxdp_ports_intact() {
    if skip_unless_root() {
        return;
    }
    if !(have("iperf3") && have("tshark") && have("ethtool")) {
        assert!(std::env::var_os("CI").is_none(), "iperf3, tshark and ethtool are needed in CI");
        eprintln!("iperf3/tshark/ethtool missing: test skipped");
        return;
    }
    let o = run(2, true, true);
    eprintln!("{o:?}");
    let mb = o.mb.expect("multi-buffer receive on");
    assert!(o.gbps > 0.05, "iperf3 carried data: {o:?}");
    assert!(mb.chains > 0, "64 KB segments arrived as descriptor chains: {o:?}");
    assert!(mb.segments > 10 * mb.segmented, "each was cut into many segments: {o:?}");
    assert!(mb.csum_completed > 0, "the handshake's partial checksums were completed: {o:?}");
    assert_eq!(mb.dropped, 0, "{o:?}");
    assert!(o.captured > 1000, "tshark saw the stream: {o:?}");
    assert_eq!(o.bad_csum, 0, "no bad IP or TCP checksum at the receiver: {o:?}");
    assert!(o.max_frame <= 1514, "every frame fits the MTU: {o:?}");
    assert_eq!(o.csum_errors_b, 0, "the receiver's kernel counted no checksum error: {o:?}");
    assert_eq!(o.port_drops, 0, "the ports dropped nothing: {o:?}");
    assert_eq!(o.retrans_seen, 0, "no retransmission among the frames captured: {o:?}");
}

#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn measure_tcp_through_afxdp_with_and_without_multi_buffer() {
    if skip_unless_root() {
        return;
    }
    let secs = std::env::var("FP_TCP_GSO_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    for mb in [true, false] {
        let mut g: Vec<f64> = (0..3)
            .map(|_| {
                let o = run(secs, mb, false);
                eprintln!("multi_buffer {mb}: {:.2} Gbit/s, {} retransmits; {o:?}", o.gbps, o.retransmits);
                o.gbps
            })
            .collect();
        g.sort_by(f64::total_cmp);
        eprintln!("multi_buffer {mb}: median {:.2} Gbit/s (min {:.2}, max {:.2}), {secs} s runs", g[1], g[0], g[2]);
    }
}

/// Transmit of a multi-buffer frame in copy mode: a chain of up to 18 buffers leaves as one
/// frame; a chain of 19 is dropped by the kernel (`xsk_build_skb`: `MAX_SKB_FRAGS`).
#[test]
fn a_chain_of_buffers_leaves_as_one_frame_up_to_the_kernels_frag_limit() {
    if skip_unless_root() {
        return;
    }
    let x = Netns::new("fp-tx").unwrap();
    let y = Netns::new("fp-ty").unwrap();
    let _v = VethPair::new(&x, "x0", &y, "y0").unwrap();
    for (ns, ifn) in [(&x, "x0"), (&y, "y0")] {
        ns.set_mtu(ifn, 65535).unwrap();
        ns.link_up(ifn).unwrap();
    }
    let cfg = XdpConfig { mode: XdpMode::Skb, zero_copy: ZeroCopy::No, multi_buffer: true, ..XdpConfig::default() };
    let mut pool = Pool::new(8192);
    let mut port = x.run(|| XdpPort::open("x0", 0, &cfg, &mut pool).unwrap()).unwrap();
    let rx = y.run(|| fastpath_io::af_packet::RawSocket::open("y0").unwrap()).unwrap();
    let mut buf = vec![0u8; 70_000];
    // (frame size, buffers): 2, 18 and 19 buffers of at most 1792 bytes.
    for (seq, (size, parts)) in [(3000usize, 2usize), (18 * 1792, 18), (19 * 1792, 19)].into_iter().enumerate() {
        let f = netns_common::frame(0, seq as u32, size);
        let hs: Vec<_> = f
            .chunks(size.div_ceil(parts))
            .map(|c| {
                let h = pool.alloc().unwrap();
                pool.set_data(h, c);
                h
            })
            .collect();
        assert_eq!(hs.len(), parts);
        assert!(port.tx_chain(&mut pool, &hs));
        let end = Instant::now() + Duration::from_millis(1500);
        let mut got = None;
        while got.is_none() && Instant::now() < end {
            if let Ok(Some(len)) = rx.recv(&mut buf, 50) {
                if netns_common::marked_seq(&buf[..len]) == Some(seq as u32) {
                    got = Some(buf[..len].to_vec());
                }
            }
            port.flush(&mut pool).unwrap();
        }
        let st = port.stats();
        eprintln!("{parts} buffers, {size} bytes: received {:?} bytes; tx_dropped {}", got.as_ref().map(Vec::len), st.tx_dropped);
        if parts <= 18 {
            assert_eq!(got.as_deref(), Some(&f[..]), "{parts} buffers arrive as one frame, unchanged");
        } else {
            assert!(got.is_none(), "{parts} buffers exceed the kernel's frag limit");
            assert!(st.tx_dropped > 0, "and the kernel counts the frame's descriptors invalid");
        }
    }
    port.close(&mut pool);
}
