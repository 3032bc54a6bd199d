//! One control plane, two user planes, as deployed: two `fastpath run pipelines/vbng.toml
//! --cpri … --cpri-up N --pfcp …` processes and one `fastpath bng-cp` with two `[[user_plane]]`
//! entries, in a namespace of their own, each user plane with its own access and core veth.
//!
//! ```text
//!   peer ns                                 dut ns
//!   s1 (subscriber A) ── veth ── a1 access ┐ fastpath run (UP 1) --pfcp 127.0.0.1:8805 ─┐
//!   c1 (core, counts) ── veth ── k1 core   ┘                                             ├─ PFCP, CPRi ── fastpath bng-cp
//!   s2 (subscriber B) ── veth ── a2 access ┐ fastpath run (UP 2) --pfcp 127.0.0.1:8806 ─┘  (--metrics 127.0.0.1:9189)
//!   c2 (core, counts) ── veth ── k2 core   ┘
//! ```
//! A and B have the same port number, tags and MAC, behind different user planes: two lines.
//! The test, in order:
//! 1. each leases (crafted DHCP frames, as `live_cpri.rs`) and its session is on its own user
//!    plane, not the other;
//! 2. A sends 200 frames upstream, all 200 leave the core port, and usage records with A's
//!    packets and bytes appear in the control plane's metrics (periodic reports, every 2 s);
//! 3. user plane 1 is killed (SIGKILL): the control plane marks it down after three missed
//!    heartbeats; started again, it is associated again and has A's session back, and no DHCP
//!    reached the control plane meanwhile (A did not lease again); A's traffic flows again;
//! 4. B sends 600 frames upstream, one every 5 ms, while the control plane is killed (SIGKILL)
//!    and started again: all 600 leave the core port, B's session is the same one on user
//!    plane 2, and the restarted control plane established nothing (the user planes kept
//!    their sessions).
//!
//! Bounded: each wait has its limit (about 40 s in all); every process is stopped by PID and
//! the namespaces are removed on every exit path.

mod common;

use common::{dhcp_client_frame, http_get, qinq_dhcp_exchange, root_or_skip, wait_for, ChildGuard, TempDir};
use fastpath_bng::dhcp::server::Identity;
use fastpath_bng::dhcp::wire::MessageType;
use fastpath_io::af_packet::RawSocket;
use fastpath_io::netns::{Netns, VethPair};
use fastpath_packet::build::FrameBuilder;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const GW: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);
const GW_MAC: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 1];
const METRICS: &str = "127.0.0.1:9189";
/// The UDP port of the test's upstream frames (their marker at the core).
const DPORT: u16 = 9999;
/// Upstream frame length on the access side (Q-in-Q), bytes.
const FRAME_LEN: usize = 200;

/// A subscriber's upstream frame: Q-in-Q, from its MAC and leased address, UDP to `DPORT`,
/// `FRAME_LEN` bytes, `seq` in the payload.
fn upstream(sub: &Identity, ip: Ipv4Addr, seq: u32) -> Vec<u8> {
    FrameBuilder::eth(GW_MAC, sub.mac)
        .qinq(sub.svlan, sub.cvlan)
        .ipv4(ip, Ipv4Addr::new(198, 18, 0, 2))
        .udp(40000, DPORT)
        .payload(&seq.to_be_bytes())
        .frame_len(FRAME_LEN)
        .build()
}

/// Sends `n` upstream frames of `sub` on `tx`, one every `gap`, while counting on `rx` the
/// frames that leave the core (VLAN 10, UDP to `DPORT`) until `idle` passes with none after the
/// last was sent; returns how many arrived. `during` runs on the calling thread meanwhile.
fn send_and_count(peer: &Netns, tx: &str, rx: &str, frames: Vec<Vec<u8>>, gap: Duration, during: impl FnOnce()) -> usize {
    let (tx, rx) = (tx.to_string(), rx.to_string());
    std::thread::scope(|sc| {
        let counter = sc.spawn(|| {
            peer.run(move || {
                let s = RawSocket::open(&rx).unwrap();
                let mut buf = vec![0u8; 2048];
                let (mut got, mut last) = (0usize, Instant::now());
                let t0 = Instant::now();
                while last.elapsed() < Duration::from_millis(1500) && t0.elapsed() < Duration::from_secs(30) {
                    let Some(n) = s.recv(&mut buf, 100).unwrap() else { continue };
                    let f = &buf[..n];
                    // 802.1Q VLAN 10, IPv4, UDP to DPORT.
                    if n > 42 && f[12..16] == [0x81, 0x00, 0, 10] && f[16..18] == [8, 0] && f[18 + 22..18 + 24] == DPORT.to_be_bytes() {
                        got += 1;
                        last = Instant::now();
                    }
                }
                got
            })
            .unwrap()
        });
        std::thread::sleep(Duration::from_millis(200));
        let sender = sc.spawn(|| {
            peer.run(move || {
                let s = RawSocket::open(&tx).unwrap();
                let t0 = Instant::now();
                for (k, f) in frames.iter().enumerate() {
                    // Paced on the clock, not on sleeps, so a slow wake-up does not stretch the run.
                    while t0.elapsed() < gap * k as u32 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    s.send(f).unwrap();
                }
            })
            .unwrap()
        });
        during();
        sender.join().unwrap();
        counter.join().unwrap()
    })
}

/// The value of the metric line that starts with `name` (its labels included), if any.
fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')).and_then(|v| v.trim().parse().ok()))
}

struct Procs {
    root: String,
    dir: PathBuf,
    ns: String,
}

impl Procs {
    /// User plane `n`: access aN, core kN, PFCP 127.0.0.1:880(4+n), ctl socket upN.sock.
    fn user_plane(&self, n: u16, log: &str) -> ChildGuard {
        let c = Command::new("ip")
            .args(["netns", "exec", &self.ns, env!("CARGO_BIN_EXE_fastpath"), "run"])
            .arg(format!("{}/pipelines/vbng.toml", self.root))
            .arg("--entries")
            .arg(format!("{}/testdata/vbng/demo.txt", self.root))
            .args(["--port", &format!("access=afpacket:a{n}"), "--port", &format!("core=afpacket:k{n}")])
            .args(["--idle-sleep", "50", "--no-pin", "--cpri", "127.0.0.1:2152", "--cpri-up", &n.to_string()])
            .args(["--pfcp", &format!("127.0.0.1:{}", 8804 + n), "--ctl"])
            .arg(self.ctl(n))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join(log)).unwrap())
            .spawn()
            .unwrap();
        ChildGuard::new(c)
    }

    fn ctl(&self, n: u16) -> PathBuf {
        self.dir.join(format!("up{n}.sock"))
    }

    fn control_plane(&self, log: &str) -> ChildGuard {
        let c = Command::new("ip")
            .args(["netns", "exec", &self.ns, env!("CARGO_BIN_EXE_fastpath"), "bng-cp", "--config"])
            .arg(self.dir.join("cp.toml"))
            .args(["--metrics", METRICS])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join(log)).unwrap())
            .spawn()
            .unwrap();
        ChildGuard::new(c)
    }

    fn show(&self, n: u16, what: &str) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_fastpath")).args(["ctl", "--socket"]).arg(self.ctl(n)).arg(what).output().unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    fn log(&self, f: &str) -> String {
        std::fs::read_to_string(self.dir.join(f)).unwrap_or_default()
    }
}

fn config(store: &Path) -> String {
    format!(
        r#"store = "{}"
[cpri]
listen = "127.0.0.1:2152"
[pfcp]
local = "127.0.0.1:8800"
heartbeat_s = 1
max_missed = 3
urr_period_s = 2
[[user_plane]]
id = 1
pfcp = "127.0.0.1:8805"
ports = [0]
[[user_plane]]
id = 2
pfcp = "127.0.0.1:8806"
ports = [0]
{}"#,
        store.display(),
        common::BNG_CP_DHCP
    )
}

/// DISCOVER ▸ OFFER, REQUEST ▸ ACK on `iface`; the leased address.
fn lease(peer: &Netns, iface: &str, sub: &Identity, logs: &dyn Fn() -> String) -> Ipv4Addr {
    let (_, offer) = qinq_dhcp_exchange(peer, iface, &dhcp_client_frame(sub, MessageType::DISCOVER, |_| {}), MessageType::OFFER)
        .unwrap_or_else(|| panic!("no OFFER on {iface} in 15 s\n{}", logs()));
    let req = dhcp_client_frame(sub, MessageType::REQUEST, |m| {
        m.options.requested_ip = Some(offer.yiaddr);
        m.options.server_id = Some(GW);
    });
    let (_, ack) =
        qinq_dhcp_exchange(peer, iface, &req, MessageType::ACK).unwrap_or_else(|| panic!("no ACK on {iface} in 15 s\n{}", logs()));
    assert_eq!(ack.yiaddr, offer.yiaddr);
    ack.yiaddr
}

#[test]
fn two_user_planes_survive_restarts_of_either_side_and_report_usage() {
    if !root_or_skip() {
        return;
    }
    let tmp = TempDir(std::env::temp_dir().join(format!("fp-bng-multi-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();
    let peer = Netns::new("fpm-peer").unwrap();
    let dut = Netns::new("fpm-dut").unwrap();
    let _veths = [
        VethPair::new(&peer, "s1", &dut, "a1").unwrap(),
        VethPair::new(&peer, "c1", &dut, "k1").unwrap(),
        VethPair::new(&peer, "s2", &dut, "a2").unwrap(),
        VethPair::new(&peer, "c2", &dut, "k2").unwrap(),
    ];
    let p = Procs { root: concat!(env!("CARGO_MANIFEST_DIR"), "/../..").into(), dir: tmp.0.clone(), ns: dut.name().into() };
    std::fs::write(tmp.0.join("cp.toml"), config(&tmp.0.join("cp.db"))).unwrap();
    let mut up1 = p.user_plane(1, "up1.log");
    let _up2 = p.user_plane(2, "up2.log");
    let mut cp = p.control_plane("cp.log");
    let metrics = || http_get(&dut, METRICS, "/metrics").map(|(_, b)| b).unwrap_or_default();
    let logs = || {
        format!(
            "metrics:\n{}\nbng-cp:\n{}\nbng-cp (restarted):\n{}\nUP 1:\n{}\nUP 1 (restarted):\n{}\nUP 2:\n{}",
            metrics(),
            p.log("cp.log"),
            p.log("cp2.log"),
            p.log("up1.log"),
            p.log("up1b.log"),
            p.log("up2.log")
        )
    };
    wait_for("both user planes associated", Duration::from_secs(15), || {
        let m = metrics();
        (metric(&m, "fastpath_bng_user_plane_associated{up=\"1\"}") == Some(1)
            && metric(&m, "fastpath_bng_user_plane_associated{up=\"2\"}") == Some(1))
        .then_some(())
    });

    // 1. The same port, tags and MAC behind each user plane: two lines, two leases, each
    // session on its own user plane.
    let sub = Identity { port: 0, svlan: 100, cvlan: 7, mac: [0x02, 0, 0, 0, 0x12, 0x34] };
    let ip_a = lease(&peer, "s1", &sub, &logs);
    let ip_b = lease(&peer, "s2", &sub, &logs);
    assert_ne!(ip_a, ip_b);
    for (n, ip) in [(1, ip_a), (2, ip_b)] {
        let s = wait_for("the session on its user plane", Duration::from_secs(10), || {
            let s = p.show(n, "show session 1");
            s.contains(&format!("ip {ip}")).then_some(s)
        });
        assert!(s.contains("s-vlan 100 c-vlan 7 mac 02:00:00:00:12:34"), "{s}");
        // Only ours (the demo entries are table entries, not sessions of the session API).
        assert!(p.show(n, "show sessions").starts_with("1 session(s)"), "UP {n}: {}", p.show(n, "show sessions"));
    }

    // 2. Traffic and usage.
    let frames: Vec<Vec<u8>> = (0..200).map(|k| upstream(&sub, ip_a, k)).collect();
    let got = send_and_count(&peer, "s1", "c1", frames, Duration::from_millis(2), || {});
    assert_eq!(got, 200, "A's frames through user plane 1\n{}", logs());
    let usage = wait_for("A's usage in the metrics", Duration::from_secs(10), || {
        let m = metrics();
        let l = "{up=\"1\",port=\"0\",svlan=\"100\",cvlan=\"7\",mac=\"02:00:00:00:12:34\",direction=\"up\"}";
        let pkts = metric(&m, &format!("fastpath_bng_subscriber_packets_total{l}"))?;
        (pkts >= 200).then(|| (pkts, metric(&m, &format!("fastpath_bng_subscriber_bytes_total{l}")).unwrap()))
    });
    assert_eq!(usage.0, 200, "packets counted once\n{}", logs());
    // The frames are counted as they arrive (both tags) or without the tags: nothing else.
    let bytes = usage.1 as usize;
    assert!((200 * (FRAME_LEN - 8)..=200 * FRAME_LEN).contains(&bytes), "{bytes} bytes for 200 × {FRAME_LEN}");

    // 3. User plane 1 dies and comes back: its session is back, without DHCP.
    let m = metrics();
    let gpdu_before = metric(&m, "fastpath_bng_gpdu_in_total").unwrap();
    up1.child().kill().unwrap();
    up1.child().wait().unwrap();
    wait_for("user plane 1 marked down", Duration::from_secs(10), || {
        (metric(&metrics(), "fastpath_bng_user_plane_down{up=\"1\"}") == Some(1)).then_some(())
    });
    let _up1b = p.user_plane(1, "up1b.log");
    let s = wait_for("A's session back on the restarted user plane 1", Duration::from_secs(15), || {
        let s = p.show(1, "show session 1");
        s.contains(&format!("ip {ip_a}")).then_some(s)
    });
    assert!(s.contains("s-vlan 100 c-vlan 7 mac 02:00:00:00:12:34"), "{s}");
    let m = metrics();
    assert_eq!(metric(&m, "fastpath_bng_gpdu_in_total"), Some(gpdu_before), "no DHCP reached the control plane: A did not lease again");
    assert_eq!(metric(&m, "fastpath_bng_sessions_reestablished_total"), Some(1), "{m}");
    assert_eq!(metric(&m, "fastpath_bng_user_plane_restarts_total"), Some(1), "{m}");
    assert_eq!(metric(&m, "fastpath_bng_user_plane_down{up=\"1\"}"), Some(0), "{m}");
    let frames: Vec<Vec<u8>> = (0..50).map(|k| upstream(&sub, ip_a, k)).collect();
    assert_eq!(send_and_count(&peer, "s1", "c1", frames, Duration::from_millis(2), || {}), 50, "A's traffic again\n{}", logs());

    // 4. The control plane dies and comes back while B's traffic flows: no frame is lost.
    let before = p.show(2, "show session 1");
    let frames: Vec<Vec<u8>> = (0..600).map(|k| upstream(&sub, ip_b, k)).collect();
    let mut cp2 = None;
    let got = send_and_count(&peer, "s2", "c2", frames, Duration::from_millis(5), || {
        std::thread::sleep(Duration::from_millis(500));
        cp.child().kill().unwrap();
        cp.child().wait().unwrap();
        std::thread::sleep(Duration::from_millis(500));
        cp2 = Some(p.control_plane("cp2.log"));
    });
    assert_eq!(got, 600, "B's frames through user plane 2 while the control plane restarted\n{}", logs());
    wait_for("the restarted control plane associated with both", Duration::from_secs(15), || {
        let m = metrics();
        (metric(&m, "fastpath_bng_user_plane_sessions{up=\"1\"}") == Some(1)
            && metric(&m, "fastpath_bng_user_plane_sessions{up=\"2\"}") == Some(1))
        .then_some(())
    });
    let m = metrics();
    assert_eq!(metric(&m, "fastpath_bng_leases"), Some(2), "{m}");
    assert_eq!(metric(&m, "fastpath_bng_sessions_established_total"), Some(0), "nothing re-created\n{}", logs());
    assert_eq!(metric(&m, "fastpath_bng_sessions_reestablished_total"), Some(0), "{m}");
    assert_eq!(p.show(2, "show session 1").lines().next(), before.lines().next(), "the same session on user plane 2");
    let log = p.log("cp2.log");
    assert!(log.contains("2 leases restored") && log.contains("it kept our sessions"), "{log}");
    drop(cp2);
}
