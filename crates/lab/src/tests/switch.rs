//! What the switch tests (`incast`, `burst`, `fairness`) share: the two DUTs, the shaped
//! egress they are given, and the counters read from them.
//!
//! ```text
//!  senders ─▶ d0 … d(N-1) ─▶ [ DUT ] ─▶ dN (egress shaped to R, buffer B) ─▶ receiver
//! ```
//! (topology: [`crate::fanin_topo`]). DUTs, each in a fresh topology:
//!
//! | name | the DUT namespace | egress of port N |
//! |---|---|---|
//! | `fastpath` | `fastpath run <spec> --entries <entries> --port p0=afxdp:d0 … --port pN=afxdp:dN --core C --rx-ring 4096`: an exact table on `eth.dst` → `forward(port)` ([`fastpath_spec`], [`fastpath_entries`]) | the spec's `[tm]`: a shared buffer of B bytes with dynamic thresholds (α = 2^`alpha_log2`), port N shaped to R with bucket `burst_bytes` |
//! | `linux-tc` | a Linux bridge over the N + 1 ports with static FDB entries for every host (no flooding, no learning needed) | the best the kernel has ([`detect_qdiscs`], [`LinuxShaper::choose`]): HTB rate R ceil R, bucket `burst_bytes`, with a `bfifo` child of `linux_buffer_bytes`; else TBF rate R with that `limit` |
//!
//! Both get the same rate, bucket and buffer; what the burst test changes is how much of the
//! buffer the Linux port may use (the same total memory split evenly over its N + 1 ports, as a
//! switch with static per-port buffers would). fastpath's frames must fit its 2 KiB packet
//! buffers ([`FASTPATH_MAX_FRAME`]); the kernel takes jumbo frames.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::fanin_topo::FaninTopo;
use crate::topo::{self, fmt_mac, ns_exec, run_cmd};
use crate::LabError;

pub use fastpath_tm::jain_index;

/// The largest frame (without FCS) fastpath's packet buffers hold.
pub const FASTPATH_MAX_FRAME: usize = fastpath_packet::pool::MAX_FRAME;

/// The DUTs of the switch tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SwitchDut {
    /// fastpath: L2 forwarding into its traffic manager.
    Fastpath,
    /// A Linux bridge whose receiver-facing port is shaped by tc.
    LinuxTc,
}

impl SwitchDut {
    /// Both, in report order.
    pub const ALL: [SwitchDut; 2] = [SwitchDut::Fastpath, SwitchDut::LinuxTc];

    /// The name on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            SwitchDut::Fastpath => "fastpath",
            SwitchDut::LinuxTc => "linux-tc",
        }
    }

    /// Parses a name (`linux-bridge` and `bridge` mean `linux-tc`).
    ///
    /// # Errors
    /// [`LabError::Config`] listing the valid names.
    pub fn parse(s: &str) -> Result<SwitchDut, LabError> {
        match s {
            "fastpath" => Ok(SwitchDut::Fastpath),
            "linux-tc" | "linux-bridge" | "bridge" => Ok(SwitchDut::LinuxTc),
            _ => Err(LabError::Config(format!("unknown switch-test DUT \"{s}\" (one of: fastpath, linux-tc)"))),
        }
    }
}

/// The shaped egress both DUTs get on the receiver's port.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shaping {
    /// Rate R, bits per second of frame bytes (Ethernet header to payload, no FCS).
    pub rate_bps: u64,
    /// Token bucket depth of the shaper, bytes.
    pub burst_bytes: u64,
    /// fastpath's shared buffer (all ports), bytes.
    pub buffer_bytes: u64,
    /// The Linux port's queue limit (bfifo / TBF limit), bytes.
    pub linux_buffer_bytes: u64,
    /// fastpath's dynamic threshold exponent: a queue may hold up to 2^n × the free buffer.
    pub alpha_log2: i8,
    /// fastpath marks ECN-capable packets (RFC 3168) with a WRED profile between ⅓ and the whole
    /// of a queue's reachable share, and the hosts request ECN; Linux has no RED here.
    pub ecn: bool,
}

impl Shaping {
    /// R and buffer B for both DUTs, the default bucket ([`default_burst_bytes`]), α = 1, no ECN.
    pub fn new(rate_bps: u64, buffer_bytes: u64) -> Shaping {
        Shaping {
            rate_bps,
            burst_bytes: default_burst_bytes(rate_bps),
            buffer_bytes,
            linux_buffer_bytes: buffer_bytes,
            alpha_log2: 0,
            ecn: false,
        }
    }

    /// The most one congested queue can hold in fastpath's buffer when it is the only one:
    /// q = α (B − q) ⇒ q = α B / (1 + α) (Choudhury–Hahne).
    pub fn fastpath_queue_limit_bytes(&self) -> u64 {
        let a = 2f64.powi(i32::from(self.alpha_log2));
        (self.buffer_bytes as f64 * a / (1.0 + a)) as u64
    }

    /// Packet descriptors for the buffer: enough for it full of 64-byte frames, so bytes are
    /// the limit that binds, as in the Linux byte FIFO.
    pub fn buffer_pkts(&self) -> u64 {
        (self.buffer_bytes / 60 + 1).clamp(1024, 1 << 20)
    }
}

/// The shaper bucket the traffic manager uses by default (the spec compiler's own rule, so the
/// Linux baseline gets the same bucket as fastpath).
pub fn default_burst_bytes(rate_bps: u64) -> u64 {
    fastpath_pipeline::compile::tm::default_burst(rate_bps)
}

/// Parses a rate: bits per second as a number, or with `kbit`, `mbit`, `gbit` (also `k`, `m`,
/// `g`; decimal multiples, as tc).
///
/// # Errors
/// A message naming the bad input.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| format!("rate \"{s}\": not a number (bits/s: 200000000, 200mbit, 1gbit)"))?;
    let mult = match unit.trim() {
        "" | "bit" => 1e0,
        "k" | "kbit" => 1e3,
        "m" | "mbit" => 1e6,
        "g" | "gbit" => 1e9,
        u => return Err(format!("rate \"{s}\": unknown unit \"{u}\" (bits/s: 200000000, 200mbit, 1gbit)")),
    };
    let bps = (v * mult).round();
    if !(bps >= 1000.0 && bps.is_finite()) {
        return Err(format!("rate \"{s}\": give at least 1kbit"));
    }
    Ok(bps as u64)
}

/// Parses a size in bytes: a number, or with `k`/`kb`/`kib`, `m`/`mb`/`mib` (binary multiples).
///
/// # Errors
/// A message naming the bad input.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: u64 = num.parse().map_err(|_| format!("size \"{s}\": not a number (bytes: 1048576, 1024k, 1m)"))?;
    let mult: u64 = match unit.trim() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        u => return Err(format!("size \"{s}\": unknown unit \"{u}\" (bytes: 1048576, 1024k, 1m)")),
    };
    v.checked_mul(mult).filter(|&b| b > 0).ok_or_else(|| format!("size \"{s}\": give a positive size"))
}

/// A rate as the spec writes it: `"200mbit"`, `"1500kbit"` or the plain number.
pub fn rate_text(bps: u64) -> String {
    if bps.is_multiple_of(1_000_000_000) {
        format!("\"{}gbit\"", bps / 1_000_000_000)
    } else if bps.is_multiple_of(1_000_000) {
        format!("\"{}mbit\"", bps / 1_000_000)
    } else if bps.is_multiple_of(1000) {
        format!("\"{}kbit\"", bps / 1000)
    } else {
        bps.to_string()
    }
}

/// The spec the fastpath DUT runs on `ports` ports: L2 forwarding by destination MAC into the
/// traffic manager, port `shaped_port` shaped as `s` says, everything in class 0.
pub fn fastpath_spec(ports: usize, shaped_port: usize, s: &Shaping) -> String {
    let mut o = String::new();
    o.push_str("# Written by fastpath lab (switch tests): L2 forwarding by destination MAC into the traffic manager.\n");
    o.push_str("name = \"fanin-l2\"\n");
    o.push_str(&format!("description = \"{ports} ports; port {shaped_port} shaped\"\n\n"));
    o.push_str("[parser]\nheaders = [\"eth\", \"ipv4\"]\n\n");
    o.push_str("[[table]]\nname = \"mac\"\nkey = [{ field = \"eth.dst\", match = \"exact\" }]\n");
    o.push_str("actions = [\"forward\", \"drop\"]\nsize = 256\ndefault = \"drop(no_route)\"\n\n");
    o.push_str("[control]\ningress = '''\napply mac\n'''\n\n");
    o.push_str(&fastpath_tm_section(shaped_port, s));
    o
}

/// The `[tm]` section of [`fastpath_spec`].
pub fn fastpath_tm_section(shaped_port: usize, s: &Shaping) -> String {
    let pkts = s.buffer_pkts();
    let ring = pkts.next_power_of_two().min(1 << 20);
    let mut o = String::from("[tm]\n");
    o.push_str(&format!("buffer_bytes = {}\n", s.buffer_bytes));
    o.push_str(&format!("buffer_pkts = {pkts}\n"));
    o.push_str("classify = \"none\"\n");
    o.push_str(&format!("alpha_log2 = {}\n\n", s.alpha_log2));
    o.push_str("[[tm.port]]\n");
    o.push_str(&format!("port = {shaped_port}\nrate = {}\nburst_bytes = {}\n\n", rate_text(s.rate_bps), s.burst_bytes));
    o.push_str("[[tm.class]]\nclass = 0\n");
    o.push_str(&format!("ring_pkts = {ring}\nalpha_log2 = {}\n", s.alpha_log2));
    if s.ecn {
        let q = s.fastpath_queue_limit_bytes().max(3 * 9216);
        o.push_str("wred = \"ecn\"\n\n[[tm.wred]]\nname = \"ecn\"\n");
        o.push_str(&format!("min_bytes = {}\nmax_bytes = {q}\nmaxp_inv = 10\nweight_log2 = 9\necn = true\n", q / 3));
    }
    o
}

/// The fastpath DUT's entries: each host's MAC forwards to the port facing it.
pub fn fastpath_entries(t: &FaninTopo) -> String {
    let mut s = String::from("# fastpath lab switch tests: destination MAC => the port facing that host\n");
    for (port, h) in t.hosts().iter().enumerate() {
        s.push_str(&format!("table mac add {} => forward({port})\n", fmt_mac(&h.mac)));
    }
    s
}

/// Which qdiscs the kernel offers: each candidate is added as the root of `lo` in a scratch
/// namespace (removed again). Needs root.
///
/// # Errors
/// [`LabError::Io`] when the scratch namespace cannot be created.
pub fn detect_qdiscs() -> Result<Vec<&'static str>, LabError> {
    let ns = fastpath_io::netns::Netns::new(&format!("{}tcq", topo::PREFIX))?;
    let mut out = Vec::new();
    for (name, args) in QDISC_PROBES {
        let mut a = vec!["tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:"];
        a.extend_from_slice(args);
        if ns_exec(ns.name(), &a).is_ok() {
            out.push(*name);
            let _ = ns_exec(ns.name(), &["tc", "qdisc", "del", "dev", "lo", "root"]);
        }
    }
    Ok(out)
}

/// The qdiscs tried by [`detect_qdiscs`], with arguments that make each one valid.
const QDISC_PROBES: &[(&str, &[&str])] = &[
    ("htb", &["htb", "default", "1"]),
    ("tbf", &["tbf", "rate", "100mbit", "burst", "20kb", "limit", "100kb"]),
    ("bfifo", &["bfifo", "limit", "100000"]),
    ("pfifo", &["pfifo", "limit", "100"]),
    ("fq_codel", &["fq_codel"]),
    ("red", &["red", "limit", "400000", "min", "30000", "max", "90000", "avpkt", "1000", "burst", "55", "probability", "0.1"]),
    ("prio", &["prio"]),
    ("drr", &["drr"]),
];

/// How the Linux DUT shapes its receiver port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinuxShaper {
    /// HTB class at rate = ceil = R with a byte FIFO child: the shaper and the buffer apart.
    HtbBfifo,
    /// TBF at R, whose `limit` is the byte buffer.
    Tbf,
}

impl LinuxShaper {
    /// The best of what `available` lists: HTB + bfifo, else TBF; `None` without either.
    pub fn choose(available: &[&str]) -> Option<LinuxShaper> {
        let has = |q: &str| available.contains(&q);
        if has("htb") && has("bfifo") {
            Some(LinuxShaper::HtbBfifo)
        } else if has("tbf") {
            Some(LinuxShaper::Tbf)
        } else {
            None
        }
    }

    /// Parses `htb` (HTB + bfifo) or `tbf`.
    ///
    /// # Errors
    /// A message naming the choices.
    pub fn parse(s: &str) -> Result<LinuxShaper, String> {
        match s {
            "htb" | "htb+bfifo" => Ok(LinuxShaper::HtbBfifo),
            "tbf" => Ok(LinuxShaper::Tbf),
            _ => Err(format!("linux shaper \"{s}\": htb or tbf")),
        }
    }

    /// Its name in results.
    pub fn name(self) -> &'static str {
        match self {
            LinuxShaper::HtbBfifo => "htb+bfifo",
            LinuxShaper::Tbf => "tbf",
        }
    }

    /// The `tc` command lines (without `tc`) that shape `dev` as `s` says.
    pub fn commands(self, dev: &str, s: &Shaping) -> Vec<Vec<String>> {
        let (rate, burst, limit) = (format!("{}bit", s.rate_bps), format!("{}b", s.burst_bytes), s.linux_buffer_bytes.to_string());
        let v = |a: &[&str]| a.iter().map(|x| (*x).to_owned()).collect::<Vec<String>>();
        match self {
            LinuxShaper::HtbBfifo => vec![
                v(&["qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"]),
                v(&[
                    "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &rate, "ceil", &rate, "burst", &burst,
                    "cburst", &burst,
                ]),
                v(&["qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "bfifo", "limit", &limit]),
            ],
            LinuxShaper::Tbf => {
                vec![v(&[
                    "qdisc",
                    "replace",
                    "dev",
                    dev,
                    "root",
                    "handle",
                    "1:",
                    "tbf",
                    "rate",
                    &rate,
                    "burst",
                    &burst,
                    "limit",
                    &format!("{limit}b"),
                ])]
            }
        }
    }
}

/// One qdisc's counters from `tc -s qdisc show`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct QdiscStats {
    /// Kind and handle, e.g. `bfifo 10:`.
    pub qdisc: String,
    /// Packets sent.
    pub sent_pkts: u64,
    /// Packets dropped.
    pub dropped: u64,
    /// Times the shaper held a packet back.
    pub overlimits: u64,
}

/// Parses `tc -s qdisc show dev X`: one entry per qdisc.
pub fn parse_tc_stats(text: &str) -> Vec<QdiscStats> {
    let mut out: Vec<QdiscStats> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("qdisc ") {
            let name: Vec<&str> = rest.split_whitespace().take(2).collect();
            out.push(QdiscStats { qdisc: name.join(" "), ..QdiscStats::default() });
        } else if let (Some(q), Some(rest)) = (out.last_mut(), l.strip_prefix("Sent ")) {
            // Sent 123 bytes 4 pkt (dropped 0, overlimits 0 requeues 0)
            let w: Vec<&str> =
                rest.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')').filter(|s| !s.is_empty()).collect();
            let after = |k: &str| w.iter().position(|x| *x == k).and_then(|i| w.get(i + 1)).and_then(|x| x.parse().ok()).unwrap_or(0);
            q.sent_pkts = w.get(2).and_then(|x| x.parse().ok()).unwrap_or(0);
            q.dropped = after("dropped");
            q.overlimits = after("overlimits");
        }
    }
    out
}

/// The drops a fastpath `--counters-out` file names, summed per reason over every stage:
/// the lines `stage/reason: N`.
pub fn fastpath_drops(counters: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (k, n) in counters.lines().filter_map(|l| l.trim().split_once(": ")) {
        // `port P class C/reason: N` lines of the queue table repeat the `tm/reason` drops.
        if k.starts_with("port ") {
            continue;
        }
        let Some((_, reason)) = k.rsplit_once('/') else { continue };
        if let Ok(n) = n.trim().parse::<u64>() {
            if n > 0 && !reason.is_empty() && reason.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                *m.entry(reason.to_owned()).or_default() += n;
            }
        }
    }
    m
}

/// One queue of fastpath's traffic manager, from the queue table at the end of its counters
/// (`port class enq_pkts enq_bytes deq_pkts deq_bytes drops ecn_marks occ_pkts occ_bytes
/// hwm_bytes`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueRow {
    /// Port id.
    pub port: u32,
    /// Class.
    pub class: u8,
    /// Packets admitted.
    pub enq_pkts: u64,
    /// Packets sent.
    pub deq_pkts: u64,
    /// Packets refused (every reason).
    pub drops: u64,
    /// Packets marked CE.
    pub ecn_marks: u64,
    /// Most bytes queued at once.
    pub hwm_bytes: u64,
}

/// The queue table of a fastpath `--counters-out` file (or `ctl show queues`): every line
/// under the `port class enq_pkts …` header that has its eleven numbers.
pub fn parse_queue_table(text: &str) -> Vec<QueueRow> {
    let mut out = Vec::new();
    let mut cols: Vec<String> = Vec::new();
    for l in text.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.first() == Some(&"port") && w.get(1) == Some(&"class") {
            cols = w.iter().map(|x| (*x).to_owned()).collect();
            continue;
        }
        if cols.is_empty() || w.len() != cols.len() {
            continue;
        }
        let Ok(v) = w.iter().map(|x| x.parse::<u64>()).collect::<Result<Vec<u64>, _>>() else { continue };
        let get = |name: &str| cols.iter().position(|c| c == name).and_then(|i| v.get(i).copied()).unwrap_or(0);
        out.push(QueueRow {
            port: get("port") as u32,
            class: get("class") as u8,
            enq_pkts: get("enq_pkts"),
            deq_pkts: get("deq_pkts"),
            drops: get("drops"),
            ecn_marks: get("ecn_marks"),
            hwm_bytes: get("hwm_bytes"),
        });
    }
    out
}

/// How to start the DUTs of a switch test.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// The fastpath binary (the lab's caller passes its own executable).
    pub fastpath_exe: PathBuf,
    /// Extra arguments for `fastpath run`.
    pub fastpath_args: Vec<String>,
    /// fastpath's port kind: `afxdp` (default) or `afpacket`. AF_PACKET's TPACKET_V3 ring
    /// hands frames over in blocks: at these rates a block filled with ~120 frames before the
    /// worker saw it (101 batches for 12,388 frames in a 2 s fairness trial at 50 Mbit/s), so
    /// the traffic manager got bursts of ~180 KB every ~20 ms per port, refused what exceeded
    /// its threshold, and the port then idled until the next block: 32–37 of 50 Mbit/s
    /// delivered. AF_XDP delivers frame by frame.
    pub port_kind: String,
    /// AF_XDP rx and fill ring slots per port (`fastpath run --rx-ring`): frames waiting there
    /// are buffered outside the traffic manager, so it is kept small (4096).
    pub rx_ring: u32,
    /// The Linux DUT's shaper; `None` picks the best the kernel offers ([`LinuxShaper::choose`]).
    pub linux_shaper: Option<LinuxShaper>,
    /// The DUT's core (fastpath's worker; the lab's traffic threads keep off it).
    pub core: usize,
    /// How long to wait for a DUT to become ready.
    pub ready_timeout: Duration,
}

impl Default for SwitchConfig {
    fn default() -> SwitchConfig {
        SwitchConfig {
            fastpath_exe: PathBuf::from("fastpath"),
            fastpath_args: Vec::new(),
            port_kind: "afxdp".into(),
            rx_ring: 4096,
            linux_shaper: None,
            core: 1,
            ready_timeout: Duration::from_secs(20),
        }
    }
}

/// A running switch DUT. Stopped on drop (processes by PID, temp files removed, core released).
#[derive(Debug)]
pub struct Switch {
    kind: SwitchDut,
    dut_ns: String,
    shaped_dev: String,
    child: Option<Child>,
    tmp: Option<PathBuf>,
    /// What shapes the receiver port: `fastpath tm` or the Linux qdiscs.
    pub shaper: String,
    counters: Option<String>,
}

fn tmp_dir() -> Result<PathBuf, LabError> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("fp-switch-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

impl Switch {
    /// Starts `kind` in `t`'s DUT namespace with the receiver port shaped as `s` says, and
    /// waits until it forwards. Reserves the DUT core for it ([`topo::reserve_dut_core`]) for
    /// either kind, so the tester's threads are placed the same way for both.
    ///
    /// # Errors
    /// [`LabError::Unavailable`] when the fastpath binary or a usable qdisc is missing;
    /// [`LabError::Cmd`]/[`LabError::Io`] when it does not start (its log in the message).
    pub fn start(t: &FaninTopo, kind: SwitchDut, s: &Shaping, cfg: &SwitchConfig) -> Result<Switch, LabError> {
        let mut sw = Switch {
            kind,
            dut_ns: t.dut_ns.clone(),
            shaped_dev: t.receiver.dut_if.clone(),
            child: None,
            tmp: None,
            shaper: String::new(),
            counters: None,
        };
        topo::reserve_dut_core(Some(cfg.core));
        match kind {
            SwitchDut::Fastpath => sw.fastpath(t, s, cfg)?,
            SwitchDut::LinuxTc => sw.linux(t, s, cfg.linux_shaper)?,
        }
        Ok(sw)
    }

    /// Which DUT this is.
    pub fn kind(&self) -> SwitchDut {
        self.kind
    }

    fn fastpath(&mut self, t: &FaninTopo, s: &Shaping, cfg: &SwitchConfig) -> Result<(), LabError> {
        if !matches!(cfg.port_kind.as_str(), "afxdp" | "afpacket") {
            return Err(LabError::Config(format!("port kind \"{}\": afpacket or afxdp", cfg.port_kind)));
        }
        if !cfg.fastpath_exe.is_file() {
            return Err(LabError::Unavailable { dut: "fastpath".into(), why: format!("{} is not a file", cfg.fastpath_exe.display()) });
        }
        let tmp = tmp_dir()?;
        self.tmp = Some(tmp.clone());
        let (spec, entries, log) = (tmp.join("fanin-l2.toml"), tmp.join("entries.txt"), tmp.join("fastpath.log"));
        let ports = t.dut_ports();
        std::fs::write(&spec, fastpath_spec(ports.len(), t.receiver_port(), s))?;
        std::fs::write(&entries, fastpath_entries(t))?;
        let mut argv: Vec<String> =
            vec![cfg.fastpath_exe.to_string_lossy().into_owned(), "run".into(), spec.to_string_lossy().into_owned(), "--entries".into()];
        argv.push(entries.to_string_lossy().into_owned());
        for (i, p) in ports.iter().enumerate() {
            argv.extend(["--port".to_owned(), format!("p{i}={}:{p}", cfg.port_kind)]);
        }
        argv.extend(["--core".to_owned(), cfg.core.to_string(), "--no-ctl".to_owned()]);
        argv.extend(["--counters-out".to_owned(), tmp.join("counters.txt").to_string_lossy().into_owned()]);
        let ring = u64::from(cfg.rx_ring);
        if cfg.port_kind == "afxdp" && !cfg.fastpath_args.iter().any(|a| a.starts_with("--rx-ring")) {
            argv.push(format!("--rx-ring={ring}"));
        }
        if !cfg.fastpath_args.iter().any(|a| a.starts_with("--pool")) {
            // The traffic manager holds queued packets in the pool's buffers, on top of what
            // the ports' rings take (AF_XDP: fill + tx ring per port).
            let rings = if cfg.port_kind == "afxdp" { ports.len() as u64 * (ring + 2048) } else { 0 };
            argv.push(format!("--pool={}", rings + s.buffer_pkts() + 8192));
        }
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
        self.shaper = format!("fastpath tm ({} ports)", cfg.port_kind);
        let t0 = Instant::now();
        loop {
            if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                return Err(LabError::Io(format!("fastpath exited early ({st})\n--- {} ---\n{}", log.display(), log_tail(&log))));
            }
            // Ready when every port is open: an XDP program on each interface (AF_XDP), or one
            // packet socket per port in the DUT namespace (/proc/net/packet is per namespace).
            let ready = if cfg.port_kind == "afxdp" {
                ports.iter().all(|p| ns_exec(&t.dut_ns, &["ip", "link", "show", p]).map(|o| o.contains("xdp")).unwrap_or(false))
            } else {
                ns_exec(&t.dut_ns, &["cat", "/proc/net/packet"]).map(|o| o.lines().count() > ports.len()).unwrap_or(false)
            };
            if ready {
                break;
            }
            if t0.elapsed() > cfg.ready_timeout {
                return Err(LabError::Io(format!(
                    "fastpath: ports not open after {:?}\n--- {} ---\n{}",
                    cfg.ready_timeout,
                    log.display(),
                    log_tail(&log)
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.renice(topo::LAB_NICE);
        Ok(())
    }

    fn renice(&self, nice: i32) {
        let Some(c) = &self.child else { return };
        let tasks = std::fs::read_dir(format!("/proc/{}/task", c.id()));
        let tids: Vec<String> = tasks.into_iter().flatten().flatten().filter_map(|e| e.file_name().to_str().map(str::to_owned)).collect();
        if !tids.is_empty() {
            let n = nice.to_string();
            let mut args = vec!["-n", n.as_str(), "-p"];
            args.extend(tids.iter().map(String::as_str));
            let _ = run_cmd("renice", &args);
        }
    }

    fn linux(&mut self, t: &FaninTopo, s: &Shaping, want: Option<LinuxShaper>) -> Result<(), LabError> {
        let have = detect_qdiscs()?;
        let shaper = match want {
            Some(w) if LinuxShaper::choose(&have).is_some() && (w == LinuxShaper::Tbf || have.contains(&"htb")) => w,
            Some(w) => {
                return Err(LabError::Unavailable {
                    dut: "linux-tc".into(),
                    why: format!("the kernel has no {} (it has: {})", w.name(), have.join(", ")),
                })
            }
            None => LinuxShaper::choose(&have).ok_or_else(|| LabError::Unavailable {
                dut: "linux-tc".into(),
                why: "the kernel has neither htb with bfifo nor tbf (CONFIG_NET_SCH_HTB / _TBF / _FIFO)".into(),
            })?,
        };
        let ns = t.dut_ns.as_str();
        ns_exec(ns, &["ip", "link", "add", "br0", "type", "bridge", "forward_delay", "0", "stp_state", "0"])?;
        for h in t.hosts() {
            ns_exec(ns, &["ip", "link", "set", &h.dut_if, "master", "br0"])?;
            // Static FDB entries: like fastpath's table, no learning and no flooding.
            ns_exec(ns, &["bridge", "fdb", "replace", &fmt_mac(&h.mac), "dev", &h.dut_if, "master", "static"])?;
        }
        ns_exec(ns, &["ip", "link", "set", "br0", "up"])?;
        for c in shaper.commands(&self.shaped_dev, s) {
            let mut a = vec!["tc"];
            a.extend(c.iter().map(String::as_str));
            ns_exec(ns, &a)?;
        }
        self.shaper = shaper.name().to_owned();
        let t0 = Instant::now();
        loop {
            let out = ns_exec(ns, &["bridge", "link", "show"])?;
            if out.matches("state forwarding").count() >= t.hosts().len() {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(LabError::Io(format!("linux-tc: bridge ports not forwarding: {out}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// PIDs whose CPU time is the DUT's (none for the bridge, which runs in softirqs).
    pub fn pids(&self) -> Vec<u32> {
        self.child.iter().map(Child::id).collect()
    }

    /// The Linux DUT's qdisc counters on the receiver port (empty for fastpath).
    pub fn qdisc_stats(&self) -> Vec<QdiscStats> {
        if self.kind != SwitchDut::LinuxTc {
            return Vec::new();
        }
        ns_exec(&self.dut_ns, &["tc", "-s", "qdisc", "show", "dev", &self.shaped_dev]).map(|o| parse_tc_stats(&o)).unwrap_or_default()
    }

    /// Packets the DUT dropped so far by reason: the leaf qdisc's drops (Linux, `tc_bfifo` or
    /// `tc_tbf`), or
    /// after [`Switch::stop`] fastpath's drop counters.
    pub fn drops(&self) -> BTreeMap<String, u64> {
        match self.kind {
            // The leaf (listed last) holds the packets; HTB's root repeats its children's drops.
            SwitchDut::LinuxTc => self
                .qdisc_stats()
                .last()
                .filter(|q| q.dropped > 0)
                .map(|q| (format!("tc_{}", q.qdisc.split_whitespace().next().unwrap_or("qdisc")), q.dropped))
                .into_iter()
                .collect(),
            SwitchDut::Fastpath => self.counters.as_deref().map(fastpath_drops).unwrap_or_default(),
        }
    }

    /// fastpath's final counters (after [`Switch::stop`]; `None` for Linux and before).
    pub fn counters(&self) -> Option<&str> {
        self.counters.as_deref()
    }

    /// fastpath's queues at its stop (after [`Switch::stop`]; empty for Linux and before).
    pub fn queues(&self) -> Vec<QueueRow> {
        self.counters.as_deref().map(parse_queue_table).unwrap_or_default()
    }

    /// Stops the DUT (fastpath: SIGTERM, SIGKILL after 5 s, by PID; its final counters kept
    /// for [`Switch::drops`] and returned; Linux: the bridge and qdiscs removed) and releases
    /// the DUT core. Idempotent.
    pub fn stop(&mut self) -> Option<String> {
        if let Some(mut c) = self.child.take() {
            crate::topo::stop_child(&mut c, Duration::from_secs(5));
        }
        if let Some(d) = self.tmp.take() {
            self.counters = std::fs::read_to_string(d.join("counters.txt")).ok();
            let _ = std::fs::remove_dir_all(d);
        }
        if self.kind == SwitchDut::LinuxTc {
            let _ = ns_exec(&self.dut_ns, &["tc", "qdisc", "del", "dev", &self.shaped_dev, "root"]);
            let _ = ns_exec(&self.dut_ns, &["ip", "link", "del", "br0"]);
        }
        topo::reserve_dut_core(None);
        self.counters.clone()
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Per-sender counters of UDP frames arriving at the receiver: an nftables `netdev` ingress
/// chain on the receiver's interface with one `ip saddr S counter drop` rule per sender, so the
/// frames are counted exactly (kernel counters, no user-space receiver to fall behind) and go
/// no further (no ICMP port-unreachable back through the DUT). TCP and everything else pass.
#[derive(Debug)]
pub struct RxCounters {
    ns: String,
    senders: Vec<std::net::Ipv4Addr>,
}

/// The nftables table of [`RxCounters`].
pub const RX_TABLE: &str = "fp_rx";

/// The ruleset [`RxCounters::install`] loads.
pub fn rx_ruleset(ifname: &str, senders: &[std::net::Ipv4Addr], udp_dport: u16) -> String {
    let mut o = format!(
        "table netdev {RX_TABLE} {{\n  chain ingress {{\n    type filter hook ingress device \"{ifname}\" priority 0; policy accept;\n"
    );
    for ip in senders {
        o.push_str(&format!("    ip saddr {ip} udp dport {udp_dport} counter drop\n"));
    }
    o.push_str("  }\n}\n");
    o
}

/// Packets per sender from `nft list chain netdev fp_rx ingress` (0 for a sender without a
/// rule in the listing).
pub fn parse_nft_counters(text: &str, senders: &[std::net::Ipv4Addr]) -> Vec<u64> {
    senders
        .iter()
        .map(|ip| {
            let key = format!("ip saddr {ip} ");
            text.lines()
                .find(|l| l.contains(&key))
                .and_then(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    w.iter().position(|x| *x == "packets").and_then(|i| w.get(i + 1)).and_then(|n| n.parse().ok())
                })
                .unwrap_or(0)
        })
        .collect()
}

impl RxCounters {
    /// Loads the counting chain into the receiver's namespace of `t` for frames to `udp_dport`.
    ///
    /// # Errors
    /// [`LabError::Unavailable`] without `nft`; [`LabError::Cmd`] when the ruleset is refused.
    pub fn install(t: &FaninTopo, udp_dport: u16) -> Result<RxCounters, LabError> {
        need_programs(&["nft"])?;
        let senders: Vec<std::net::Ipv4Addr> = t.senders.iter().map(|h| h.ip).collect();
        let tmp = tmp_dir()?;
        let f = tmp.join("rx.nft");
        std::fs::write(&f, rx_ruleset(&t.receiver.ifname, &senders, udp_dport))?;
        let r = ns_exec(&t.receiver.ns, &["nft", "-f", &f.to_string_lossy()]);
        let _ = std::fs::remove_dir_all(&tmp);
        r?;
        Ok(RxCounters { ns: t.receiver.ns.clone(), senders })
    }

    /// Packets counted so far, per sender.
    ///
    /// # Errors
    /// [`LabError::Cmd`] when `nft` fails.
    pub fn read(&self) -> Result<Vec<u64>, LabError> {
        let out = ns_exec(&self.ns, &["nft", "list", "chain", "netdev", RX_TABLE, "ingress"])?;
        Ok(parse_nft_counters(&out, &self.senders))
    }

    /// Reads until the counts have not moved for `quiet` (at most `max`), after traffic
    /// stopped: the shaped queue drains at R. Returns the last counts.
    ///
    /// # Errors
    /// As [`RxCounters::read`].
    pub fn settle(&self, quiet: Duration, max: Duration) -> Result<Vec<u64>, LabError> {
        let t0 = Instant::now();
        let mut last = self.read()?;
        let mut still = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(25));
            let now = self.read()?;
            if now != last {
                last = now;
                still = Instant::now();
            } else if still.elapsed() >= quiet || t0.elapsed() >= max {
                return Ok(last);
            }
            if t0.elapsed() >= max {
                return Ok(last);
            }
        }
    }
}

/// Checks the programs a switch test needs.
///
/// # Errors
/// [`LabError::Unavailable`] naming the first missing one and the setup script.
pub fn need_programs(progs: &[&str]) -> Result<(), LabError> {
    for p in progs {
        if run_cmd("sh", &["-c", &format!("command -v {p}")]).is_err() {
            return Err(LabError::Unavailable {
                dut: (*p).into(),
                why: format!("`{p}` is not installed (run scripts/setup-lab.sh as root)"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shaping() -> Shaping {
        Shaping::new(200_000_000, 1 << 20)
    }

    #[test]
    fn rates_and_sizes_parse_like_tc() {
        assert_eq!(parse_rate("200mbit").unwrap(), 200_000_000);
        assert_eq!(parse_rate("1.5gbit").unwrap(), 1_500_000_000);
        assert_eq!(parse_rate("64000").unwrap(), 64_000);
        assert_eq!(parse_rate("100M").unwrap(), 100_000_000);
        assert!(parse_rate("fast").unwrap_err().contains("not a number"));
        assert!(parse_rate("10mbps").unwrap_err().contains("unknown unit"));
        assert!(parse_rate("10").unwrap_err().contains("at least"));
        assert_eq!(parse_bytes("1m").unwrap(), 1 << 20);
        assert_eq!(parse_bytes("512KiB").unwrap(), 512 << 10);
        assert_eq!(parse_bytes("30000").unwrap(), 30_000);
        assert!(parse_bytes("0").is_err() && parse_bytes("1t").is_err());
        assert_eq!(rate_text(200_000_000), "\"200mbit\"");
        assert_eq!(rate_text(1_000_000_000), "\"1gbit\"");
        assert_eq!(rate_text(1_500), "1500");
    }

    #[test]
    fn default_bucket_is_two_jumbo_frames_or_one_millisecond() {
        assert_eq!(default_burst_bytes(100_000_000), 50_000);
        assert_eq!(default_burst_bytes(1_000_000), 18_432);
        assert_eq!(default_burst_bytes(10_000_000_000), 5_000_000);
    }

    #[test]
    fn dynamic_threshold_share_of_one_queue() {
        let mut s = shaping();
        assert_eq!(s.fastpath_queue_limit_bytes(), 1 << 19, "α = 1: half");
        s.alpha_log2 = 3;
        assert_eq!(s.fastpath_queue_limit_bytes(), (1u64 << 20) * 8 / 9);
        s.alpha_log2 = -4;
        assert_eq!(s.fastpath_queue_limit_bytes(), (1u64 << 20) / 17);
    }

    #[test]
    fn spec_shapes_the_receiver_port_and_forwards_by_mac() {
        let mut s = shaping();
        s.alpha_log2 = 3;
        let spec = fastpath_spec(5, 4, &s);
        for want in [
            "[tm]\nbuffer_bytes = 1048576\nbuffer_pkts = 17477\nclassify = \"none\"\nalpha_log2 = 3\n",
            "[[tm.port]]\nport = 4\nrate = \"200mbit\"\nburst_bytes = 100000\n",
            "[[tm.class]]\nclass = 0\nring_pkts = 32768\nalpha_log2 = 3\n",
            "key = [{ field = \"eth.dst\", match = \"exact\" }]",
        ] {
            assert!(spec.contains(want), "missing {want:?} in\n{spec}");
        }
        assert!(!spec.contains("wred"), "{spec}");
        s.ecn = true;
        let spec = fastpath_spec(5, 4, &s);
        assert!(spec.contains("wred = \"ecn\"\n\n[[tm.wred]]\nname = \"ecn\"\nmin_bytes = 310689\nmax_bytes = 932067\n"), "{spec}");
    }

    #[test]
    fn spec_compiles_with_its_tm_and_entries_load() {
        let mut s = shaping();
        s.ecn = true;
        s.alpha_log2 = -4;
        let spec = fastpath_spec(3, 2, &s);
        let prog = fastpath_pipeline::compile("fanin-l2.toml", &spec).unwrap();
        let mut p = prog.instantiate();
        let mut entries = String::new();
        for (port, mac) in
            [crate::fanin_topo::sender_mac(0), crate::fanin_topo::sender_mac(1), crate::fanin_topo::RECEIVER_MAC].iter().enumerate()
        {
            entries.push_str(&format!("table mac add {} => forward({port})\n", fmt_mac(mac)));
        }
        assert_eq!(p.load_entries("e", &entries).unwrap(), 3);
    }

    #[test]
    fn tm_section_is_toml_with_the_values_written() {
        let mut s = shaping();
        s.ecn = true;
        let v: toml::Value = toml::from_str(&fastpath_tm_section(4, &s)).unwrap();
        let tm = &v["tm"];
        assert_eq!(tm["buffer_bytes"].as_integer(), Some(1 << 20));
        assert_eq!(tm["port"][0]["port"].as_integer(), Some(4));
        assert_eq!(tm["port"][0]["rate"].as_str(), Some("200mbit"));
        assert_eq!(tm["class"][0]["wred"].as_str(), Some("ecn"));
        assert_eq!(tm["wred"][0]["ecn"].as_bool(), Some(true));
    }

    #[test]
    fn linux_shaper_choice_and_commands() {
        assert_eq!(LinuxShaper::choose(&["htb", "tbf", "bfifo"]), Some(LinuxShaper::HtbBfifo));
        assert_eq!(LinuxShaper::choose(&["htb", "tbf"]), Some(LinuxShaper::Tbf));
        assert_eq!(LinuxShaper::choose(&["pfifo"]), None);
        let mut s = shaping();
        s.linux_buffer_bytes = 200_000;
        let c: Vec<String> = LinuxShaper::HtbBfifo.commands("d4", &s).iter().map(|c| c.join(" ")).collect();
        assert_eq!(c[1], "class add dev d4 parent 1: classid 1:1 htb rate 200000000bit ceil 200000000bit burst 100000b cburst 100000b");
        assert_eq!(c[2], "qdisc add dev d4 parent 1:1 handle 10: bfifo limit 200000");
        let t = LinuxShaper::Tbf.commands("d4", &s)[0].join(" ");
        assert_eq!(t, "qdisc replace dev d4 root handle 1: tbf rate 200000000bit burst 100000b limit 200000b");
    }

    #[test]
    fn tc_stats_parse() {
        let text = "qdisc htb 1: root refcnt 2 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000\n \
                    Sent 1514000 bytes 1000 pkt (dropped 0, overlimits 52 requeues 0)\n backlog 0b 0p requeues 0\n\
                    qdisc bfifo 10: parent 1:1 limit 200000b\n Sent 1514000 bytes 1000 pkt (dropped 17, overlimits 0 requeues 0)\n backlog 3028b 2p requeues 0\n";
        let s = parse_tc_stats(text);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0], QdiscStats { qdisc: "htb 1:".into(), sent_pkts: 1000, dropped: 0, overlimits: 52 });
        assert_eq!(s[1], QdiscStats { qdisc: "bfifo 10:".into(), sent_pkts: 1000, dropped: 17, overlimits: 0 });
    }

    #[test]
    fn fastpath_drops_sum_reasons_over_stages() {
        let c = "stage mac\n  mac/no_route: 3\n  tm/tm_threshold: 10\n  tm/tm_buffer_full: 0\nworker 0 (core 1): rx 5\n  egress/tm_threshold: 2\n";
        let d = fastpath_drops(c);
        assert_eq!(d.get("tm_threshold"), Some(&12));
        assert_eq!(d.get("no_route"), Some(&3));
        assert!(!d.contains_key("tm_buffer_full"));
    }

    #[test]
    fn qdisc_detection_finds_htb_and_tbf_here() {
        if !fastpath_io::sys::is_root() {
            assert!(std::env::var_os("CI").is_none(), "CI runs these tests as root");
            return;
        }
        let q = detect_qdiscs().unwrap();
        assert!(q.contains(&"tbf") || q.contains(&"htb"), "{q:?}");
        assert!(LinuxShaper::choose(&q).is_some());
        // The scratch namespace is gone again.
        assert!(crate::topo::namespaces(&format!("{}tcq", topo::PREFIX)).is_empty());
    }

    #[test]
    fn queue_table_parses_and_its_drop_lines_are_not_counted_twice() {
        let c = "traffic manager: queued 1000, still held by the shapers at exit 0 (freed)\n\
                 port  class     enq_pkts      enq_bytes     deq_pkts      deq_bytes      drops  ecn_marks  occ_pkts   occ_bytes   hwm_bytes\n\
                 4     0             1000        1514000         1000        1514000         25          3         0           0      787280\n\
                 refused by reason:\n  port 4 class 0/tm_threshold: 25\n  tm/tm_threshold: 25\n";
        let q = parse_queue_table(c);
        assert_eq!(q, vec![QueueRow { port: 4, class: 0, enq_pkts: 1000, deq_pkts: 1000, drops: 25, ecn_marks: 3, hwm_bytes: 787_280 }]);
        assert_eq!(fastpath_drops(c).get("tm_threshold"), Some(&25));
    }

    #[test]
    fn nft_ruleset_and_counters() {
        let ips = [crate::fanin_topo::sender_ip(0), crate::fanin_topo::sender_ip(1), crate::fanin_topo::sender_ip(2)];
        let r = rx_ruleset("r0", &ips[..2], 9);
        assert!(r.contains("hook ingress device \"r0\"") && r.contains("ip saddr 198.18.0.2 udp dport 9 counter drop"), "{r}");
        let listing =
            "table netdev fp_rx {\n\tchain ingress {\n\t\ttype filter hook ingress device \"r0\" priority filter; policy accept;\n\
                       \t\tip saddr 198.18.0.1 udp dport 9 counter packets 1200 bytes 69600 drop\n\
                       \t\tip saddr 198.18.0.2 udp dport 9 counter packets 1187 bytes 68846 drop\n\t}\n}\n";
        assert_eq!(parse_nft_counters(listing, &ips), vec![1200, 1187, 0]);
    }

    #[test]
    fn dut_names() {
        assert_eq!(SwitchDut::parse("bridge").unwrap(), SwitchDut::LinuxTc);
        for k in SwitchDut::ALL {
            assert_eq!(SwitchDut::parse(k.name()).unwrap(), k);
        }
        assert!(SwitchDut::parse("ovs").unwrap_err().to_string().contains("linux-tc"));
        assert_eq!(jain_index(&[1.0, 1.0]), 1.0);
    }
}
