//! The `overlay` test: the `sdn-overlay` pipeline as the VXLAN gateway between two tenant hosts
//! whose kernels run real VXLAN interfaces — real peers on both sides — against a kernel VXLAN
//! gateway in the same run.
//!
//! ```text
//!  tenant A (vx0, VNI 100) ══ VXLAN/UDP 4789 ══▶ DUT ══ VXLAN/UDP 4789 ══▶ tenant B (vx0, VNI 200)
//!  ping, iperf3 -c, connect(B:5202)                                        iperf3 -s, listeners
//! ```
//! (topology: [`crate::overlay_topo`]). DUTs, each in a fresh topology:
//!
//! | name | the gateway in the DUT namespace |
//! |---|---|
//! | `fastpath` | `fastpath run sdn-overlay.toml --entries <generated> --port p0=afxdp:d0 --port p1=afxdp:d1 --core C`: VXLAN decap ▸ conntrack + stateful inbound ACL ▸ per-MAC srTCM policer ▸ CA→PA ▸ outbound ACL ▸ VXLAN encap ([`fastpath_entries`]) |
//! | `linux-vxlan` | one kernel VXLAN device per tunnel (`vxa` VNI 100 towards A, `vxb` VNI 200 towards B) enslaved to a Linux bridge; the same ACL as stateful nftables rules on the bridged traffic (`br_netfilter` + conntrack) when `nft` is installed |
//!
//! Measurements per DUT: (1) `ping` A→B: sent, received, loss, RTT min / avg / p99 / max;
//! (2) `iperf3` TCP A→B with 1 and N streams: throughput per second, CPU of the DUT's processes
//! and of the machine per second (the `tcp` runner's sampler); (3) the stateful ACL: with a TCP
//! listener on port [`DENIED_PORT`] in both tenants, A→B connects (its SYN-ACK is return traffic
//! of an A-initiated connection, allowed by conntrack) while B→A times out (an explicit deny
//! rule; no rule allows B-initiated traffic). Optionally (4) a capture of the frames the DUT
//! wrote towards B during a short ping, taken with tshark in B's namespace, for an independent
//! decoder to check.
//!
//! With the fastpath DUT the tenants send without checksum offload, TSO and GSO (fastpath
//! forwards frames as they are, so their checksums must be real and their size ≤ the MTU); the
//! kernel gateway keeps the offloads, as the `tcp` test does for the Linux bridge.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::overlay_topo::{OverlayTopo, Tenant, VXLAN_PORT};
use crate::report::{Chart, Report};
use crate::topo::{self, fmt_mac, in_netns, ns_exec, run_cmd};
use crate::LabError;

/// The `sdn-overlay` reference pipeline (the repository's `pipelines/sdn-overlay.toml`).
pub const SPEC: &str = include_str!("../../../../pipelines/sdn-overlay.toml");

/// The TCP port whose B→A connections the ACL denies (A→B ones are allowed).
pub const DENIED_PORT: u16 = 5202;

/// Each tenant MAC's srTCM policer: committed rate in bytes per second, the highest the meters
/// take (1.6·10¹⁰ B/s, 128 Gbit/s), so that it polices nothing away here. A 10 Gbit/s policer
/// with 1 MB buckets, as this was, cut TCP through the eBPF datapath to 0.2 Gbit/s: the tenants'
/// 64 KB segments arrive in bursts at memory speed, a red segment is 45 lost MSS, and the
/// kernel gateway it is compared with polices nothing.
pub const POLICER_CIR_BYTES_PER_S: u64 = 16_000_000_000;
/// Committed and excess burst size of the policers, bytes (64 MiB).
pub const POLICER_BURST_BYTES: u64 = 64 << 20;

/// The gateways the overlay test can measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverlayDut {
    /// fastpath running `pipelines/sdn-overlay.toml` on AF_XDP ports.
    Fastpath,
    /// fastpath's eBPF datapath at tc ingress (`--mode tc`) running the same `sdn-overlay`:
    /// each skb, a tenant's 64 KB VXLAN GSO segment among them, through the whole pipeline
    /// once, its outer headers rewritten in place.
    FastpathTc,
    /// Two kernel VXLAN devices on a Linux bridge (+ nftables for the ACL).
    LinuxVxlan,
}

impl OverlayDut {
    /// Every kind, in report order.
    pub const ALL: [OverlayDut; 3] = [OverlayDut::Fastpath, OverlayDut::FastpathTc, OverlayDut::LinuxVxlan];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            OverlayDut::Fastpath => "fastpath",
            OverlayDut::FastpathTc => "fastpath-tc",
            OverlayDut::LinuxVxlan => "linux-vxlan",
        }
    }

    /// Whether the tenants keep their offloads (checksum, TSO, GSO) for this gateway when the
    /// run allows it: every gateway but the AF_XDP one, which forwards frames as they are.
    pub fn takes_offloads(self) -> bool {
        self != OverlayDut::Fastpath
    }

    /// Parses a name.
    ///
    /// # Errors
    /// [`LabError::Config`] listing the valid names.
    pub fn parse(s: &str) -> Result<OverlayDut, LabError> {
        OverlayDut::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| LabError::Config(format!("unknown overlay DUT \"{s}\" (one of: fastpath, fastpath-tc, linux-vxlan)")))
    }
}

/// Configuration of an overlay run.
#[derive(Clone, Debug)]
pub struct OverlayConfig {
    /// Gateways, one after the other, each in its own topology.
    pub duts: Vec<OverlayDut>,
    /// The fastpath binary (the CLI passes `std::env::current_exe()`).
    pub fastpath_exe: PathBuf,
    /// Extra arguments for `fastpath run`.
    pub fastpath_args: Vec<String>,
    /// The CPU the fastpath worker is pinned to.
    pub core: usize,
    /// The fastpath DUT's port kind: `afxdp` (default) or `afpacket`.
    pub port_kind: String,
    /// Conntrack entries of the fastpath DUT (the spec's 5,000,000 take ~640 MB; the test has
    /// a handful of connections).
    pub conntrack_size: u32,
    /// Pings A→B.
    pub pings: u32,
    /// Seconds between pings.
    pub ping_interval_s: f64,
    /// iperf3 parallel stream counts; 1 is always measured too.
    pub streams: Vec<u32>,
    /// Seconds per iperf3 run.
    pub duration_s: u32,
    /// When set, the frames the DUT sends towards B during a short ping are captured (tshark
    /// in B's namespace) to `<dir>/<dut>-underlay-b.pcap`.
    pub capture_dir: Option<PathBuf>,
    /// How long to wait for a DUT to become ready.
    pub ready_timeout: Duration,
    /// Tenants keep checksum offload, TSO and GSO when the gateway is the kernel's (false: every
    /// DUT gets the MTU-sized, software-checksummed frames fastpath needs — the like-for-like
    /// comparison).
    pub kernel_offloads: bool,
}

impl Default for OverlayConfig {
    fn default() -> OverlayConfig {
        OverlayConfig {
            duts: vec![OverlayDut::Fastpath, OverlayDut::LinuxVxlan],
            fastpath_exe: PathBuf::from("fastpath"),
            fastpath_args: Vec::new(),
            core: 1,
            port_kind: "afxdp".into(),
            conntrack_size: 65536,
            pings: 50,
            ping_interval_s: 0.05,
            streams: vec![1, 4],
            duration_s: 10,
            capture_dir: None,
            ready_timeout: Duration::from_secs(20),
            kernel_offloads: true,
        }
    }
}

/// Round-trip times in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RttMs {
    /// Fastest.
    pub min: f64,
    /// Mean.
    pub avg: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Slowest.
    pub max: f64,
}

/// The ping measurement (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PingRow {
    /// `overlay`.
    pub test: &'static str,
    /// DUT name.
    pub dut: String,
    /// `ping`.
    pub measurement: &'static str,
    /// Echo requests sent.
    pub sent: u32,
    /// Echo replies received.
    pub received: u32,
    /// Loss in percent.
    pub loss_pct: f64,
    /// RTT statistics over the replies.
    pub rtt_ms: RttMs,
    /// Every reply's RTT, in sequence order.
    pub rtts_ms: Vec<f64>,
}

/// One iperf3 run (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TcpRow {
    /// `overlay`.
    pub test: &'static str,
    /// DUT name.
    pub dut: String,
    /// `tcp`.
    pub measurement: &'static str,
    /// `iperf3`.
    pub tool: &'static str,
    /// Parallel streams.
    pub streams: u32,
    /// The tenants sent with checksum offload, TSO and GSO (large segments to the gateway).
    pub tenant_offloads: bool,
    /// Throughput at the receiver (inner TCP payload) and CPU (flattened; the kernel gateway
    /// has no DUT process, so its `dut_cpu_pct` is 0).
    #[serde(flatten)]
    pub m: super::tcp::TcpMeasure,
    /// The sender's retransmitted segments (iperf3's count: losses, and reordering that TCP
    /// took for loss).
    pub retransmits: u64,
}

/// The stateful ACL check (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AclRow {
    /// `overlay`.
    pub test: &'static str,
    /// DUT name.
    pub dut: String,
    /// `acl`.
    pub measurement: &'static str,
    /// What enforced the ACL (`sdn-overlay acl_in + conntrack`, `nftables + conntrack`, or `none`).
    pub acl: String,
    /// The TCP port of both connection attempts.
    pub port: u16,
    /// A→B connected (A-initiated; B's SYN-ACK passed as return traffic).
    pub allowed_connect: bool,
    /// B→A did not connect within the timeout (denied).
    pub denied_connect_blocked: bool,
    /// Packets the fastpath DUT dropped as `acl_deny` over the whole run (its counters).
    pub acl_deny_drops: Option<u64>,
}

/// The capture of the DUT's frames towards B (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CaptureRow {
    /// `overlay`.
    pub test: &'static str,
    /// DUT name.
    pub dut: String,
    /// `capture`.
    pub measurement: &'static str,
    /// The pcap file.
    pub pcap: String,
    /// The capture filter.
    pub filter: String,
}

/// One result line.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum OverlayRow {
    /// Ping A→B.
    Ping(PingRow),
    /// iperf3 A→B.
    Tcp(TcpRow),
    /// Stateful ACL check.
    Acl(AclRow),
    /// Capture towards B.
    Capture(CaptureRow),
}

/// Results of an overlay run.
#[derive(Clone, Debug, Default)]
pub struct OverlayResults {
    /// Rows in measurement order, per DUT.
    pub rows: Vec<OverlayRow>,
    /// DUTs that could not run, with the reason.
    pub skipped: Vec<(String, String)>,
    /// The fastpath DUT's final counters (per port and stage), if it ran.
    pub fastpath_counters: Option<String>,
}

/// The spec the fastpath DUT runs: `sdn-overlay` with `conntrack_size` flow entries.
pub fn fastpath_spec(conntrack_size: u32) -> String {
    SPEC.replace("size = 5000000\n", &format!("size = {conntrack_size}\n"))
}

/// The fastpath DUT's entries for tenants `a` (DUT port 0) and `b` (DUT port 1): both VNIs map
/// to VNET 1; the inbound ACL allows A→B (any protocol, port 0 for ICMP) and denies B→A TCP to
/// [`DENIED_PORT`] explicitly (everything else B-initiated falls to the table's default deny);
/// each tenant MAC gets a policer; each CA maps to its tenant's tunnel, whose outer headers go
/// from the DUT's PA on that side to the tenant's PA with the tenant's VNI.
pub fn fastpath_entries(a: &Tenant, b: &Tenant) -> String {
    let mut s = String::from("# fastpath lab overlay: tenant A on port 0, tenant B on port 1\n");
    for t in [a, b] {
        s.push_str(&format!("table vni_map add {} => set_vnet(1)\n", t.vni));
    }
    s.push_str(&format!("table acl_in add {}/32 {}/32 {DENIED_PORT}..{DENIED_PORT} 6/0xff priority 5 => deny\n", b.ca, a.ca));
    s.push_str(&format!("table acl_in add {}/32 {}/32 * * priority 10 => allow\n", a.ca, b.ca));
    for (k, t) in [a, b].iter().enumerate() {
        let (pol, port) = (k + 1, k);
        s.push_str(&format!("table local_mac add {} => local_mac({pol})\n", fmt_mac(&t.vxlan_mac)));
        s.push_str(&format!("meter policer {pol} cir {POLICER_CIR_BYTES_PER_S} cbs {POLICER_BURST_BYTES} ebs {POLICER_BURST_BYTES}\n"));
        s.push_str(&format!("table ca_pa add 1 {} => to_tunnel({pol})\n", t.ca));
        s.push_str(&format!(
            "table tunnels add {pol} => encap({}, {}, {}, {}, {}, {port})\n",
            fmt_mac(&t.underlay_mac),
            fmt_mac(&t.dut_mac),
            t.dut_pa,
            t.pa,
            t.vni
        ));
    }
    s
}

/// The nftables ruleset of the kernel gateway: the same policy as [`fastpath_entries`]'s ACL,
/// stateful (conntrack on the bridged inner packets).
pub fn nft_ruleset(a: &Tenant, b: &Tenant) -> String {
    format!(
        "table inet fp_overlay_acl {{\n  chain forward {{\n    type filter hook forward priority 0; policy accept;\n    \
         ct state established,related accept\n    \
         ip saddr {b} ip daddr {a} tcp dport {DENIED_PORT} drop\n    \
         ip saddr {a} ip daddr {b} accept\n    \
         drop\n  }}\n}}\n",
        a = a.ca,
        b = b.ca
    )
}

/// Runs `args` in `ns` and returns (success, stdout, stderr) whatever the exit status.
fn ns_output(ns: &str, args: &[&str]) -> Result<(bool, String, String), LabError> {
    let out = Command::new("ip").args(["netns", "exec", ns]).args(args).stdin(Stdio::null()).output().map_err(|e| LabError::Cmd {
        cmd: args.join(" "),
        status: -1,
        stderr: e.to_string(),
    })?;
    Ok((out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned()))
}

/// Parses iputils `ping` output: (transmitted, received, RTTs in ms in sequence order).
pub fn parse_ping(out: &str) -> (u32, u32, Vec<f64>) {
    let mut rtts = Vec::new();
    let (mut sent, mut recv) = (0, 0);
    for l in out.lines() {
        if let Some(t) = l.split("time=").nth(1) {
            if let Some(ms) = t.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()) {
                let ms = if t.contains(" us") { ms / 1000.0 } else { ms };
                rtts.push(ms);
            }
        }
        if l.contains("packets transmitted") {
            let num = |key: &str| -> u32 {
                l.split(',').find(|p| p.contains(key)).and_then(|p| p.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap_or(0)
            };
            sent = num("transmitted");
            recv = num("received");
        }
    }
    (sent, recv, rtts)
}

/// min / mean / p99 (nearest rank) / max of `v`; zeros when empty.
pub fn rtt_stats(v: &[f64]) -> RttMs {
    if v.is_empty() {
        return RttMs::default();
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((0.99 * s.len() as f64).ceil() as usize).clamp(1, s.len());
    RttMs { min: s[0], avg: s.iter().sum::<f64>() / s.len() as f64, p99: s[rank - 1], max: s[s.len() - 1] }
}

/// The sum of the `…/acl_deny: N` lines of a `fastpath run --counters-out` file.
pub fn acl_deny_drops(counters: &str) -> u64 {
    let stages: u64 = counters
        .lines()
        .filter_map(|l| l.trim().split_once(": "))
        .filter(|(k, _)| k.ends_with("/acl_deny"))
        .filter_map(|(_, n)| n.trim().parse::<u64>().ok())
        .sum();
    // The eBPF datapath's report: `  acl_deny   N  description`.
    let ebpf: u64 = counters
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("acl_deny")).then(|| w.next().and_then(|n| n.parse::<u64>().ok())).flatten()
        })
        .sum();
    stages + ebpf
}

/// A started gateway. Stopped on drop (processes by PID, temp files removed).
struct Gateway {
    child: Option<Child>,
    tmp: Option<PathBuf>,
    acl: String,
    ports: String,
}

fn tmp_dir() -> Result<PathBuf, LabError> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("fp-overlay-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

fn have(prog: &str) -> bool {
    run_cmd("sh", &["-c", &format!("command -v {prog}")]).is_ok()
}

impl Gateway {
    fn start(t: &OverlayTopo, kind: OverlayDut, cfg: &OverlayConfig) -> Result<Gateway, LabError> {
        let mut g = Gateway { child: None, tmp: None, acl: "none".into(), ports: "kernel".into() };
        match kind {
            OverlayDut::Fastpath => g.fastpath(t, cfg, false)?,
            OverlayDut::FastpathTc => g.fastpath(t, cfg, true)?,
            OverlayDut::LinuxVxlan => g.linux_vxlan(t, cfg)?,
        }
        Ok(g)
    }

    /// fastpath on socket ports (`cfg.port_kind`), or the eBPF datapath at tc ingress.
    fn fastpath(&mut self, t: &OverlayTopo, cfg: &OverlayConfig, tc: bool) -> Result<(), LabError> {
        if !tc && !matches!(cfg.port_kind.as_str(), "afxdp" | "afpacket") {
            return Err(LabError::Config(format!("port kind \"{}\": afxdp or afpacket", cfg.port_kind)));
        }
        if !cfg.fastpath_exe.is_file() {
            return Err(LabError::Unavailable { dut: "fastpath".into(), why: format!("{} is not a file", cfg.fastpath_exe.display()) });
        }
        let tmp = tmp_dir()?;
        self.tmp = Some(tmp.clone());
        let (spec, entries, log) = (tmp.join("sdn-overlay.toml"), tmp.join("entries.txt"), tmp.join("fastpath.log"));
        std::fs::write(&spec, fastpath_spec(cfg.conntrack_size))?;
        let kind = if tc { "xdp" } else { cfg.port_kind.as_str() };
        std::fs::write(&entries, fastpath_entries(&t.a, &t.b))?;
        let mut argv: Vec<String> = vec![
            cfg.fastpath_exe.to_string_lossy().into_owned(),
            "run".into(),
            spec.to_string_lossy().into_owned(),
            "--entries".into(),
            entries.to_string_lossy().into_owned(),
            "--port".into(),
            format!("p0={kind}:{}", t.a.dut_if),
            "--port".into(),
            format!("p1={kind}:{}", t.b.dut_if),
            "--counters-out".into(),
            tmp.join("counters.txt").to_string_lossy().into_owned(),
        ];
        // The eBPF datapath runs in the receiving CPU's softirq: no worker to pin.
        argv.extend(if tc { ["--mode".to_string(), "tc".to_string()] } else { ["--core".to_string(), cfg.core.to_string()] });
        argv.extend(cfg.fastpath_args.iter().cloned());
        let logf = std::fs::File::create(&log)?;
        // `ip netns exec` execs the program, so the child's PID is fastpath's.
        let child = Command::new("ip")
            .args(["netns", "exec", &t.dut_ns])
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(logf.try_clone()?)
            .stderr(logf)
            .spawn()
            .map_err(|e| LabError::Cmd { cmd: argv.join(" "), status: -1, stderr: e.to_string() })?;
        self.child = Some(child);
        self.acl = "sdn-overlay acl_in + conntrack".into();
        self.ports = if tc { "eBPF at tc ingress".into() } else { cfg.port_kind.clone() };
        let t0 = Instant::now();
        loop {
            if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                return Err(LabError::Io(format!("fastpath exited early ({st})\n--- {} ---\n{}", log.display(), log_tail(&log))));
            }
            // Ready when both ports are open: the program attached (its log line, at tc), an
            // XDP program on each interface (AF_XDP), or two packet sockets in the DUT
            // namespace (AF_PACKET; /proc/net/packet is per namespace).
            let ready = if tc {
                std::fs::read_to_string(&log).is_ok_and(|l| l.contains("as a tc program"))
            } else if cfg.port_kind == "afxdp" {
                [t.a.dut_if, t.b.dut_if]
                    .iter()
                    .all(|p| ns_exec(&t.dut_ns, &["ip", "link", "show", p]).map(|o| o.contains("xdp")).unwrap_or(false))
            } else {
                ns_exec(&t.dut_ns, &["cat", "/proc/net/packet"]).map(|o| o.lines().count() > 2).unwrap_or(false)
            };
            if ready {
                return Ok(());
            }
            if t0.elapsed() > cfg.ready_timeout {
                return Err(LabError::Io(format!(
                    "fastpath: ports on {} and {} not open after {:?}\n--- {} ---\n{}",
                    t.a.dut_if,
                    t.b.dut_if,
                    cfg.ready_timeout,
                    log.display(),
                    log_tail(&log)
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn linux_vxlan(&mut self, t: &OverlayTopo, cfg: &OverlayConfig) -> Result<(), LabError> {
        let ns = t.dut_ns.as_str();
        let port = VXLAN_PORT.to_string();
        ns_exec(ns, &["ip", "link", "add", "br0", "type", "bridge", "forward_delay", "0", "stp_state", "0"])?;
        for (tn, vx) in [(&t.a, "vxa"), (&t.b, "vxb")] {
            ns_exec(ns, &["ip", "addr", "add", &format!("{}/24", tn.dut_pa), "dev", tn.dut_if])?;
            let (vni, local, remote) = (tn.vni.to_string(), tn.dut_pa.to_string(), tn.pa.to_string());
            ns_exec(
                ns,
                &[
                    "ip",
                    "link",
                    "add",
                    vx,
                    "type",
                    "vxlan",
                    "id",
                    &vni,
                    "dstport",
                    &port,
                    "local",
                    &local,
                    "remote",
                    &remote,
                    "dev",
                    tn.dut_if,
                    "nolearning",
                ],
            )?;
            ns_exec(ns, &["ip", "link", "set", vx, "master", "br0", "up"])?;
        }
        ns_exec(ns, &["ip", "link", "set", "br0", "up"])?;
        if have("nft") {
            // Bridged IPv4 through the inet hooks (and conntrack): br_netfilter's per-namespace switch.
            ns_exec(ns, &["sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"])?;
            let rules = nft_ruleset(&t.a, &t.b);
            let tmp = tmp_dir()?;
            self.tmp = Some(tmp.clone());
            let f = tmp.join("acl.nft");
            std::fs::write(&f, rules)?;
            ns_exec(ns, &["nft", "-f", &f.to_string_lossy()])?;
            self.acl = "nftables + conntrack (br_netfilter)".into();
        }
        let t0 = Instant::now();
        loop {
            let out = ns_exec(ns, &["bridge", "link", "show"])?;
            if out.matches("state forwarding").count() >= 2 {
                return Ok(());
            }
            if t0.elapsed() > cfg.ready_timeout {
                return Err(LabError::Io(format!("linux-vxlan: bridge ports not forwarding after {:?}: {out}", cfg.ready_timeout)));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn pids(&self) -> Vec<u32> {
        self.child.iter().map(Child::id).collect()
    }

    /// Stops the gateway (SIGTERM, SIGKILL after 5 s) and returns the fastpath DUT's counters.
    fn stop(&mut self) -> Option<String> {
        if let Some(mut c) = self.child.take() {
            crate::topo::stop_child(&mut c, Duration::from_secs(5));
        }
        let counters = self.tmp.as_ref().and_then(|d| std::fs::read_to_string(d.join("counters.txt")).ok());
        if let Some(d) = self.tmp.take() {
            let _ = std::fs::remove_dir_all(d);
        }
        counters
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Runs the overlay test for every DUT.
///
/// # Errors
/// [`LabError::NotRoot`], [`LabError::Interrupted`], [`LabError::Unavailable`] when iperf3 or
/// ping is missing, [`LabError::Config`] for an empty DUT list, or a failing measurement.
pub fn run(cfg: &OverlayConfig, progress: &mut dyn FnMut(&str)) -> Result<OverlayResults, LabError> {
    if cfg.duts.is_empty() {
        return Err(LabError::Config("overlay needs at least one DUT (fastpath, linux-vxlan)".into()));
    }
    for prog in ["iperf3", "ping", "ethtool"] {
        if !have(prog) {
            return Err(LabError::Unavailable {
                dut: "overlay".into(),
                why: format!("`{prog}` is not installed (run scripts/setup-lab.sh as root)"),
            });
        }
    }
    if cfg.capture_dir.is_some() && !have("tshark") {
        return Err(LabError::Unavailable { dut: "overlay capture".into(), why: "`tshark` is not installed".into() });
    }
    if !fastpath_io::sys::is_root() {
        return Err(LabError::NotRoot);
    }
    for ns in topo::cleanup_stale() {
        progress(&format!("removed {ns}, left behind by a lab run that no longer exists"));
    }
    let mut streams = cfg.streams.clone();
    if !streams.contains(&1) {
        streams.insert(0, 1);
    }
    let mut out = OverlayResults::default();
    for &kind in &cfg.duts {
        let name = kind.name();
        let t = OverlayTopo::create(kind.takes_offloads() && cfg.kernel_offloads)?;
        let t0 = Instant::now();
        let mut gw = match Gateway::start(&t, kind, cfg) {
            Ok(g) => g,
            Err(e @ LabError::Unavailable { .. }) => {
                progress(&format!("{name}: skipped: {e}"));
                out.skipped.push((name.to_owned(), e.to_string()));
                continue;
            }
            Err(e) => return Err(e),
        };
        let offl = if kind.takes_offloads() && cfg.kernel_offloads { "on" } else { "off" };
        progress(&format!(
            "{name}: started in {} ({:.1} s); ports: {}; ACL: {}; tenant offloads {offl}",
            t.dut_ns,
            t0.elapsed().as_secs_f64(),
            gw.ports,
            gw.acl
        ));
        let check = || if topo::interrupted() { Err(LabError::Interrupted) } else { Ok(()) };
        if let Some(dir) = &cfg.capture_dir {
            check()?;
            let row = capture(&t, name, dir)?;
            progress(&format!("{name}: captured the frames towards B in {}", row.pcap));
            out.rows.push(OverlayRow::Capture(row));
        }
        check()?;
        let ping = ping(&t, name, cfg.pings, cfg.ping_interval_s)?;
        progress(&format!(
            "{name} ping A→B: {}/{} replies ({:.1} % loss), RTT ms min {:.3} avg {:.3} p99 {:.3} max {:.3}",
            ping.received, ping.sent, ping.loss_pct, ping.rtt_ms.min, ping.rtt_ms.avg, ping.rtt_ms.p99, ping.rtt_ms.max
        ));
        out.rows.push(OverlayRow::Ping(ping));
        check()?;
        let mut acl = acl_check(&t, name)?;
        acl.acl = gw.acl.clone();
        progress(&format!(
            "{name} ACL ({}): A→B connect to port {DENIED_PORT} {}, B→A {}",
            acl.acl,
            if acl.allowed_connect { "succeeded" } else { "FAILED" },
            if acl.denied_connect_blocked { "blocked" } else { "NOT blocked" }
        ));
        let acl_at = out.rows.len();
        out.rows.push(OverlayRow::Acl(acl));
        for &n in &streams {
            check()?;
            let mut row = iperf(&t, name, &gw.pids(), n, cfg.duration_s)?;
            row.tenant_offloads = offl == "on";
            progress(&format!(
                "{name} iperf3 A→B {n} stream(s): {:.2} Gbps, DUT CPU {:.0} %, machine CPU {:.0} %, {} retransmits",
                row.m.gbps, row.m.dut_cpu_pct, row.m.machine_cpu_pct, row.retransmits
            ));
            out.rows.push(OverlayRow::Tcp(row));
        }
        if let Some(c) = gw.stop() {
            if let Some(OverlayRow::Acl(a)) = out.rows.get_mut(acl_at) {
                a.acl_deny_drops = Some(acl_deny_drops(&c));
            }
            out.fastpath_counters = Some(c);
        }
        drop(gw);
        drop(t);
    }
    Ok(out)
}

fn ping(t: &OverlayTopo, dut: &str, count: u32, interval_s: f64) -> Result<PingRow, LabError> {
    let (c, i, dst) = (count.to_string(), format!("{interval_s}"), t.b.ca.to_string());
    let (_, stdout, stderr) = ns_output(&t.a.ns, &["ping", "-n", "-c", &c, "-i", &i, "-W", "2", &dst])?;
    let (sent, received, rtts) = parse_ping(&stdout);
    if sent == 0 {
        return Err(LabError::Io(format!("ping printed no summary: {stdout}{stderr}")));
    }
    Ok(PingRow {
        test: "overlay",
        dut: dut.to_owned(),
        measurement: "ping",
        sent,
        received,
        loss_pct: 100.0 * f64::from(sent - received.min(sent)) / f64::from(sent),
        rtt_ms: rtt_stats(&rtts),
        rtts_ms: rtts,
    })
}

/// A TCP listener on `ip:port` inside `ns` (the socket stays in that namespace).
fn listen(ns: &str, ip: Ipv4Addr, port: u16) -> Result<TcpListener, LabError> {
    in_netns(ns, move || TcpListener::bind(SocketAddr::from((ip, port))))?
        .map_err(|e| LabError::Io(format!("listen on {ip}:{port} in {ns}: {e}")))
}

/// Whether a TCP connection from `ns` to `ip:port` completes within `timeout`.
fn connects(ns: &str, ip: Ipv4Addr, port: u16, timeout: Duration) -> Result<bool, LabError> {
    in_netns(ns, move || TcpStream::connect_timeout(&SocketAddr::from((ip, port)), timeout).is_ok())
}

fn acl_check(t: &OverlayTopo, dut: &str) -> Result<AclRow, LabError> {
    // Listeners on both sides; the kernel completes handshakes into the backlog without accept().
    let _la = listen(&t.a.ns, t.a.ca, DENIED_PORT)?;
    let _lb = listen(&t.b.ns, t.b.ca, DENIED_PORT)?;
    // 3 s lets a lost SYN be retransmitted (after 1 s) on a busy machine; 1.5 s of silence is
    // enough to call the denied direction blocked.
    let allowed = connects(&t.a.ns, t.b.ca, DENIED_PORT, Duration::from_secs(3))?;
    let denied_ok = !connects(&t.b.ns, t.a.ca, DENIED_PORT, Duration::from_millis(1500))?;
    Ok(AclRow {
        test: "overlay",
        dut: dut.to_owned(),
        measurement: "acl",
        acl: String::new(),
        port: DENIED_PORT,
        allowed_connect: allowed,
        denied_connect_blocked: denied_ok,
        acl_deny_drops: None,
    })
}

fn capture(t: &OverlayTopo, dut: &str, dir: &Path) -> Result<CaptureRow, LabError> {
    std::fs::create_dir_all(dir)?;
    let pcap = dir.join(format!("{dut}-underlay-b.pcap"));
    let errf = dir.join(format!("{dut}-tshark.log"));
    let filter = format!("udp dst port {VXLAN_PORT} and dst host {}", t.b.pa);
    let pcap_s = pcap.to_string_lossy().into_owned();
    // Bounded: 5 frames or 8 seconds, whichever comes first.
    let mut child = Command::new("ip")
        .args([
            "netns",
            "exec",
            &t.b.ns,
            "tshark",
            "-i",
            t.b.underlay_if,
            "-f",
            &filter,
            "-c",
            "5",
            "-a",
            "duration:8",
            "-F",
            "pcap",
            "-w",
            &pcap_s,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&errf)?)
        .spawn()
        .map_err(|e| LabError::Cmd { cmd: "tshark".into(), status: -1, stderr: e.to_string() })?;
    let t0 = Instant::now();
    while !std::fs::read_to_string(&errf).unwrap_or_default().contains("Capturing on") {
        if t0.elapsed() > Duration::from_secs(8) || matches!(child.try_wait(), Ok(Some(_))) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(LabError::Io(format!("tshark did not start: {}", log_tail(&errf))));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // "Capturing on" is printed a moment before the capture filter is in place.
    std::thread::sleep(Duration::from_millis(300));
    let _ = ns_output(&t.a.ns, &["ping", "-n", "-c", "5", "-i", "0.1", "-W", "1", &t.b.ca.to_string()])?;
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => break,
            Ok(None) if t0.elapsed() > Duration::from_secs(9) => {
                let _ = run_cmd("kill", &["-INT", &child.id().to_string()]);
                let _ = child.wait();
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let _ = std::fs::remove_file(&errf);
    Ok(CaptureRow { test: "overlay", dut: dut.to_owned(), measurement: "capture", pcap: pcap_s, filter })
}

fn iperf(t: &OverlayTopo, dut: &str, pids: &[u32], streams: u32, secs: u32) -> Result<TcpRow, LabError> {
    let (m, retransmits) = super::tcp::measure(super::tcp::TcpTool::Iperf3, &t.b.ns, &t.a.ns, &t.b.ca.to_string(), streams, secs, pids)
        .map_err(|e| LabError::Io(format!("{dut} iperf3 -P {streams}: {e}")))?;
    Ok(TcpRow { test: "overlay", dut: dut.to_owned(), measurement: "tcp", tool: "iperf3", streams, tenant_offloads: false, m, retransmits })
}

impl OverlayResults {
    /// One JSON object per line per (DUT, measurement).
    pub fn json_lines(&self) -> String {
        super::json_lines(&self.rows)
    }

    fn pings(&self) -> impl Iterator<Item = &PingRow> {
        self.rows.iter().filter_map(|r| if let OverlayRow::Ping(p) = r { Some(p) } else { None })
    }

    fn tcps(&self) -> impl Iterator<Item = &TcpRow> {
        self.rows.iter().filter_map(|r| if let OverlayRow::Tcp(p) = r { Some(p) } else { None })
    }

    fn acls(&self) -> impl Iterator<Item = &AclRow> {
        self.rows.iter().filter_map(|r| if let OverlayRow::Acl(p) = r { Some(p) } else { None })
    }

    /// Adds the overlay section (tables; throughput, CPU and RTT charts) to `report`.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("SDN overlay: VXLAN tenants through the gateway");
        report.para(
            "Two tenant namespaces whose kernels run real VXLAN interfaces (A: VNI 100, B: VNI 200, MTU 1450 on a \
             1500-byte underlay) talk through the DUT, their VXLAN gateway. fastpath runs pipelines/sdn-overlay.toml \
             (VXLAN decap ▸ conntrack + stateful inbound ACL ▸ per-MAC srTCM policer ▸ CA→PA ▸ outbound ACL ▸ VXLAN \
             encap) on AF_XDP ports; linux-vxlan is one kernel VXLAN device per tunnel on a Linux bridge, with the \
             same ACL in nftables when nft is installed. For fastpath the tenants send without checksum offload, TSO \
             and GSO; the kernel gateway keeps them unless the run says otherwise (--no-offloads). CPU in % of one \
             core; the kernel gateway has no process of its own, so only the machine's CPU counts for it.",
        );
        report
            .pre("tenant A vx0 198.19.100.1 ══VXLAN══▶ a0 198.18.1.1 ── d0 [DUT] d1 ── b0 198.18.2.1 ══VXLAN══▶ tenant B vx0 198.19.100.2");
        for (d, why) in &self.skipped {
            report.para(format!("{d} skipped: {why}"));
        }
        let rows = self
            .pings()
            .map(|p| {
                vec![
                    p.dut.clone(),
                    p.sent.to_string(),
                    p.received.to_string(),
                    format!("{:.1}", p.loss_pct),
                    format!("{:.3}", p.rtt_ms.min),
                    format!("{:.3}", p.rtt_ms.avg),
                    format!("{:.3}", p.rtt_ms.p99),
                    format!("{:.3}", p.rtt_ms.max),
                ]
            })
            .collect();
        report.table(&["DUT", "pings", "replies", "loss %", "RTT min ms", "avg ms", "p99 ms", "max ms"], rows);
        let rows = self
            .tcps()
            .map(|r| {
                vec![
                    r.dut.clone(),
                    r.streams.to_string(),
                    if r.tenant_offloads { "on" } else { "off" }.to_owned(),
                    format!("{:.2}", r.m.gbps),
                    format!("{:.0}", r.m.dut_cpu_pct),
                    format!("{:.0}", r.m.machine_cpu_pct),
                    r.retransmits.to_string(),
                ]
            })
            .collect();
        report.table(&["DUT", "iperf3 streams", "tenant offloads", "Gbps", "DUT CPU %", "machine CPU %", "retransmits"], rows);
        let yes = |b: bool| if b { "yes" } else { "NO" }.to_owned();
        let rows = self
            .acls()
            .map(|a| {
                vec![
                    a.dut.clone(),
                    a.acl.clone(),
                    a.port.to_string(),
                    yes(a.allowed_connect),
                    yes(a.denied_connect_blocked),
                    a.acl_deny_drops.map_or_else(|| "–".into(), |n| n.to_string()),
                ]
            })
            .collect();
        report.table(&["DUT", "ACL", "TCP port", "A→B connects", "B→A blocked", "acl_deny drops"], rows);
        let label = |r: &TcpRow| format!("{} ×{}", r.dut, r.streams);
        let mut c = Chart::new("Overlay TCP throughput over time (iperf3 A→B)").x_label("time (s)").y_label("throughput (Gbps)");
        for r in self.tcps() {
            c = c.series(label(r), r.m.gbps_over_time.clone());
        }
        report.line_chart(c);
        let mut c = Chart::new("Machine CPU over time").x_label("time (s)").y_label("CPU busy (% of one core)");
        for r in self.tcps() {
            c = c.series(label(r), r.m.machine_cpu_over_time.clone());
        }
        report.line_chart(c);
        let mut c = Chart::new("DUT CPU over time").x_label("time (s)").y_label("CPU of the DUT's processes (% of one core)");
        for r in self.tcps().filter(|r| r.dut != "linux-vxlan") {
            c = c.series(label(r), r.m.dut_cpu_over_time.clone());
        }
        report.line_chart(c);
        let mut c = Chart::new("Ping RTT through the gateway (A→B)").x_label("ping number").y_label("RTT (ms)");
        for p in self.pings() {
            c = c.series(p.dut.clone(), p.rtts_ms.iter().enumerate().map(|(i, &v)| ((i + 1) as f64, v)).collect());
        }
        report.line_chart(c);
        let mut c = Chart::new("Ping RTT percentiles").x_label("").y_label("RTT (ms)");
        for p in self.pings() {
            c = c.bars(
                p.dut.clone(),
                vec![
                    ("min".into(), p.rtt_ms.min),
                    ("avg".into(), p.rtt_ms.avg),
                    ("p99".into(), p.rtt_ms.p99),
                    ("max".into(), p.rtt_ms.max),
                ],
            );
        }
        report.bar_chart(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_packet::build::FrameBuilder;
    use fastpath_packet::hdr::{self, TcpFlags};
    use fastpath_packet::{Batch, DropReason, Pool, Verdict};

    fn tenants() -> (Tenant, Tenant) {
        let t = |side: u8, host: u8, vni: u32, ul: &'static str, d: &'static str| Tenant {
            ns: format!("ns{side}"),
            underlay_if: ul,
            pa: Ipv4Addr::new(198, 18, side, 1),
            underlay_mac: [2, 0, 0, 0, side, 1],
            vxlan_if: "vx0",
            vni,
            ca: Ipv4Addr::new(198, 19, 100, host),
            vxlan_mac: [2, 0, 0xc6, 0x13, 0x64, host],
            dut_if: d,
            dut_pa: Ipv4Addr::new(198, 18, side, 254),
            dut_mac: [2, 0, 0, 0, side, 0xfe],
        };
        (t(1, 1, 100, "a0", "d0"), t(2, 2, 200, "b0", "d1"))
    }

    /// What tenant `from`'s kernel sends to the DUT: its VXLAN frame around `l4`.
    fn from_tenant(from: &Tenant, to: &Tenant, l4: impl Fn(FrameBuilder) -> FrameBuilder) -> Vec<u8> {
        let b = FrameBuilder::eth(from.dut_mac, from.underlay_mac)
            .ipv4(from.pa, from.dut_pa)
            .udp(40000, VXLAN_PORT)
            .vxlan(from.vni)
            .inner_eth(to.vxlan_mac, from.vxlan_mac)
            .ipv4(from.ca, to.ca);
        l4(b).build()
    }

    fn one(p: &mut fastpath_pipeline::Pipeline, f: &[u8], now_ns: u64) -> (Verdict, Vec<u8>) {
        let mut pool = Pool::new(8);
        let mut b = Batch::new();
        let h = pool.alloc().unwrap();
        pool.set_data(h, f);
        assert!(b.push(h, 0));
        p.process(&mut pool, &mut b, now_ns);
        (b.verdict(0), pool.data(b.handle(0)).to_vec())
    }

    #[test]
    fn generated_entries_carry_ping_and_tcp_between_the_tenants_and_deny_b_initiated_connections() {
        let (a, b) = tenants();
        let mut p = fastpath_pipeline::compile("sdn-overlay.toml", &fastpath_spec(1024)).unwrap().instantiate();
        let n = p.load_entries("entries", &fastpath_entries(&a, &b)).unwrap();
        assert!(n >= 10, "{n} entries");
        // Ping A→B leaves towards B: outer from the DUT's B-side PA to B's PA, B's VNI, B's MAC.
        let (v, out) = one(&mut p, &from_tenant(&a, &b, |f| f.icmp_echo(1, 1)), 1_000);
        assert_eq!(v, Verdict::Tx(1));
        let eth = hdr::Eth::parse(&out).unwrap();
        assert_eq!((eth.dst(), eth.src()), (b.underlay_mac, b.dut_mac));
        let ip = hdr::Ipv4::parse(eth.payload()).unwrap();
        assert_eq!((ip.src(), ip.dst()), (b.dut_pa, b.pa));
        assert!(ip.checksum_ok());
        let udp = hdr::Udp::parse(ip.payload()).unwrap();
        assert_eq!(udp.dst_port(), VXLAN_PORT);
        let vx = hdr::Vxlan::parse(udp.payload()).unwrap();
        assert_eq!(vx.vni(), 200);
        // The inner frame is A's, unchanged.
        let sent = from_tenant(&a, &b, |f| f.icmp_echo(1, 1));
        assert_eq!(&out[50..], &sent[50..]);
        // Echo reply B→A returns to port 0 with A's VNI (established by the request).
        let reply = from_tenant(&b, &a, |f| f.icmp(hdr::IcmpRepr::echo(hdr::IcmpType::ECHO_REPLY, 1, 1)));
        let (v, out) = one(&mut p, &reply, 2_000);
        assert_eq!(v, Verdict::Tx(0));
        let ip = hdr::Ipv4::parse(hdr::Eth::parse(&out).unwrap().payload()).unwrap();
        assert_eq!(ip.dst(), a.pa);
        // A→B TCP to the denied port connects (SYN out, SYN-ACK back) ...
        let syn = from_tenant(&a, &b, |f| f.tcp(40001, DENIED_PORT, TcpFlags::SYN, 100, 0));
        assert_eq!(one(&mut p, &syn, 3_000).0, Verdict::Tx(1));
        let synack = from_tenant(&b, &a, |f| f.tcp(DENIED_PORT, 40001, TcpFlags(0x12), 500, 101));
        assert_eq!(one(&mut p, &synack, 4_000).0, Verdict::Tx(0));
        // ... B→A to the same port is denied by the explicit rule, other B→A by the default.
        let syn = from_tenant(&b, &a, |f| f.tcp(40002, DENIED_PORT, TcpFlags::SYN, 100, 0));
        assert_eq!(one(&mut p, &syn, 5_000).0, Verdict::Drop(DropReason::AclDeny));
        let syn = from_tenant(&b, &a, |f| f.tcp(40003, 22, TcpFlags::SYN, 100, 0));
        assert_eq!(one(&mut p, &syn, 6_000).0, Verdict::Drop(DropReason::AclDeny));
    }

    #[test]
    fn nft_ruleset_mirrors_the_acl() {
        let (a, b) = tenants();
        let r = nft_ruleset(&a, &b);
        assert!(r.contains("ct state established,related accept"), "{r}");
        assert!(r.contains("ip saddr 198.19.100.2 ip daddr 198.19.100.1 tcp dport 5202 drop"), "{r}");
        assert!(r.contains("ip saddr 198.19.100.1 ip daddr 198.19.100.2 accept"), "{r}");
    }

    #[test]
    fn ping_output_parses_with_loss_and_percentiles() {
        let out = "PING 198.19.100.2 (198.19.100.2) 56(84) bytes of data.\n\
                   64 bytes from 198.19.100.2: icmp_seq=1 ttl=64 time=0.399 ms\n\
                   64 bytes from 198.19.100.2: icmp_seq=2 ttl=64 time=2.75 ms\n\
                   64 bytes from 198.19.100.2: icmp_seq=4 ttl=64 time=0.361 ms\n\n\
                   --- 198.19.100.2 ping statistics ---\n\
                   4 packets transmitted, 3 received, 25% packet loss, time 810ms\n\
                   rtt min/avg/max/mdev = 0.361/1.170/2.750/0.950 ms\n";
        let (s, r, rtts) = parse_ping(out);
        assert_eq!((s, r), (4, 3));
        assert_eq!(rtts, vec![0.399, 2.75, 0.361]);
        let st = rtt_stats(&rtts);
        assert_eq!((st.min, st.p99, st.max), (0.361, 2.75, 2.75));
        assert!((st.avg - 1.17).abs() < 1e-9);
        let (s, r, _) = parse_ping("3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 2000ms\n");
        assert_eq!((s, r), (3, 0));
        let st = rtt_stats(&(1..=200).map(f64::from).collect::<Vec<_>>());
        assert_eq!(st.p99, 198.0);
    }

    #[test]
    fn acl_deny_drops_sums_every_stage() {
        let c = "drops by reason:\n  acl_in/acl_deny: 3\n  drop-3/acl_deny: 4\n  vni_map/table_miss: 9\n";
        assert_eq!(acl_deny_drops(c), 7);
        assert_eq!(acl_deny_drops(""), 0);
        let ebpf = "drops by reason:\n  acl_deny                        5  a stateful ACL denied the connection\n";
        assert_eq!(acl_deny_drops(ebpf), 5);
    }

    #[test]
    fn json_lines_name_dut_and_measurement() {
        let r = OverlayResults {
            rows: vec![
                OverlayRow::Ping(PingRow {
                    test: "overlay",
                    dut: "fastpath".into(),
                    measurement: "ping",
                    sent: 2,
                    received: 2,
                    ..PingRow::default()
                }),
                OverlayRow::Acl(AclRow { test: "overlay", dut: "linux-vxlan".into(), measurement: "acl", port: 5202, ..AclRow::default() }),
            ],
            ..OverlayResults::default()
        };
        let lines: Vec<serde_json::Value> = r.json_lines().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0]["dut"].as_str(), lines[0]["measurement"].as_str()), (Some("fastpath"), Some("ping")));
        assert_eq!(lines[0]["rtt_ms"]["p99"], 0.0);
        assert_eq!((lines[1]["dut"].as_str(), lines[1]["measurement"].as_str()), (Some("linux-vxlan"), Some("acl")));
        let mut rep = Report::new("t");
        r.add_to(&mut rep);
        let html = rep.to_html();
        assert!(html.contains("SDN overlay") && html.contains("<svg"), "{html}");
    }
}
