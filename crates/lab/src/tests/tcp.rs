//! TCP throughput through each DUT with iperf3 or iperf 2, the way a switch-server is measured:
//! N sender ▸ receiver pairs at once (`pairs`), throughput per pair and summed at every
//! interval, file-transfer completion times (iperf3 `-n`), and the CPU load per core of the DUT
//! and of the machine, with CPU per Gbit/s.
//!
//! ```text
//!  pair i: ns tsnd  iperf client ──▶ snd0 ─▶ d2i [DUT] d2i+1 ─▶ rcv0 ──▶ iperf server  ns trcv
//!  every interval: /proc/stat per core (machine), /proc/PID/task/*/stat (the DUT's threads),
//!                  each receiver's rx_bytes (the progress line)
//! ```
//!
//! The endpoints keep their offloads on (checksum offload, TSO, GSO, and GRO) for every DUT, as
//! a host would ([`TcpConfig::offloads`]); each DUT is set up so that it carries the result
//! ([`dut_setup`]): the XDP datapath in generic mode with its veths at MTU 65,535 (the 64 KB
//! GSO segments cross whole), fastpath on AF_XDP with multi-buffer receive (the segments are cut
//! into MTU-sized ones and their partial checksums completed in the port; docs/tcp-gso.md). A
//! DUT that cannot carry offloaded TCP fails a short probe transfer before anything is measured
//! and is reported with the evidence ([`UnsupportedRow`]), not skipped in silence.
//!
//! `check`: the probe transfer (a few MB) is captured at the first receiver and read with
//! tshark: bad IP or TCP checksums, retransmissions, the largest frame; the receiving stack's
//! own checksum-error counter decides what a capture cannot (see [`CheckRow`]).
//!
//! CPU is given in percent of one core (so 2 busy cores = 200 %). The DUT's share counts its
//! threads' user + system time; the kernel DUTs (the bridge, the XDP datapath) have no thread
//! of their own — they run in the senders' softirqs — so for them the machine and per-core
//! softirq figures are the ones that mean something.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::median;
use super::tcp_cpu::{mean_columns, CpuSample, Sampler};
use super::tcp_pairs::{PairsConfig, PairsTopo};
use crate::dut::{Dut, DutConfig, DutKind};
use crate::report::{Chart, Report};
use crate::topo::{self, if_counter, ns_exec, run_cmd};
use crate::LabError;

/// Which TCP benchmark program to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpTool {
    /// iperf3 (JSON output).
    Iperf3,
    /// iperf 2 (CSV output), as the switch-server report used.
    Iperf2,
}

impl TcpTool {
    /// `iperf3` or `iperf2`.
    pub fn name(self) -> &'static str {
        match self {
            TcpTool::Iperf3 => "iperf3",
            TcpTool::Iperf2 => "iperf2",
        }
    }
}

/// Configuration of a TCP run.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// DUTs, one after the other.
    pub duts: Vec<DutConfig>,
    /// Parallel stream counts per pair, e.g. `[1, 4]`.
    pub streams: Vec<u32>,
    /// Seconds per throughput run (0: no throughput runs, only transfers and the check).
    pub duration_s: u32,
    /// Programs to run.
    pub tools: Vec<TcpTool>,
    /// Sender ▸ receiver pairs through the DUT at once, 1..=[`super::tcp_pairs::MAX_PAIRS`].
    pub pairs: usize,
    /// Seconds between throughput and CPU samples (iperf `-i`).
    pub interval_s: u32,
    /// File transfers, bytes each (iperf3 `-n`, one connection per pair, all pairs at once).
    pub transfers: Vec<u64>,
    /// Capture the probe transfer and check it with tshark ([`CheckRow`]).
    pub check: bool,
    /// Bytes of the probe transfer that precedes every DUT's measurements.
    pub probe_bytes: u64,
    /// The endpoints keep checksum offload, TSO, GSO and GRO on (default); off: all four off,
    /// for every DUT (the lab's behaviour before the DUTs carried offloaded TCP).
    pub offloads: bool,
    /// Times every DUT's throughput runs are repeated, the DUTs in the order given on odd runs
    /// and reversed on even ones; with more than one, [`MedianRow`]s summarise them. The probe
    /// runs every time; the check and the transfers on the first run only.
    pub runs: u32,
}

impl Default for TcpConfig {
    fn default() -> TcpConfig {
        TcpConfig {
            duts: Vec::new(),
            streams: vec![1, 4],
            duration_s: 10,
            tools: vec![TcpTool::Iperf3],
            pairs: 1,
            interval_s: 1,
            transfers: Vec::new(),
            check: false,
            probe_bytes: 4 << 20,
            offloads: true,
            runs: 1,
        }
    }
}

/// Throughput and CPU of one iperf run, shared by the `tcp` and `overlay` rows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TcpMeasure {
    /// Mean throughput over the run, Gbps (summed over the pairs).
    pub gbps: f64,
    /// Throughput per interval: (seconds since start, Gbps), summed over the pairs.
    pub gbps_over_time: Vec<(f64, f64)>,
    /// Mean CPU of the DUT's processes, % of one core.
    pub dut_cpu_pct: f64,
    /// Mean CPU of the machine, % of one core.
    pub machine_cpu_pct: f64,
    /// DUT CPU per interval: (seconds, %).
    pub dut_cpu_over_time: Vec<(f64, f64)>,
    /// Machine CPU per interval: (seconds, %).
    pub machine_cpu_over_time: Vec<(f64, f64)>,
}

/// One pair's share of a throughput run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PairMeasure {
    /// Pair index (DUT ports 2i and 2i + 1).
    pub pair: usize,
    /// Mean throughput at its receiver, Gbps.
    pub gbps: f64,
    /// Per interval: (seconds since start, Gbps).
    pub gbps_over_time: Vec<(f64, f64)>,
    /// Its sender's retransmitted segments (iperf3; 0 for iperf 2, which does not report them).
    pub retransmits: u64,
}

/// One TCP throughput result (one JSON line): summed over the pairs, with each pair's share.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TcpRow {
    /// Test name, `tcp`.
    pub test: &'static str,
    /// DUT name.
    pub dut: String,
    /// `iperf3` or `iperf2`.
    pub tool: &'static str,
    /// Parallel streams per pair.
    pub streams: u32,
    /// Which run (1-based; see [`TcpConfig::runs`]).
    pub run: u32,
    /// Summed throughput and CPU (flattened: `gbps`, `gbps_over_time`, `dut_cpu_pct`, …).
    #[serde(flatten)]
    pub m: TcpMeasure,
    /// Pairs that ran at once.
    pub pairs: usize,
    /// Seconds between samples.
    pub interval_s: u32,
    /// The endpoints kept their offloads on.
    pub offloads: bool,
    /// MTU of the DUT's interfaces.
    pub dut_mtu: u32,
    /// Each pair's throughput.
    pub per_pair: Vec<PairMeasure>,
    /// Retransmitted segments, all pairs.
    pub retransmits: u64,
    /// Mean load of each core, %.
    pub core_cpu_pct: Vec<f64>,
    /// Mean interrupt + softirq load of each core, % (where the kernel DUTs work).
    pub core_softirq_pct: Vec<f64>,
    /// Mean load of the DUT's threads on each core, %.
    pub dut_core_cpu_pct: Vec<f64>,
    /// Machine CPU (% of one core) per Gbit/s carried; null when nothing was carried.
    pub machine_cpu_pct_per_gbps: Option<f64>,
    /// The DUT's threads' CPU per Gbit/s; null when nothing was carried.
    pub dut_cpu_pct_per_gbps: Option<f64>,
    /// Every interval's CPU sample.
    pub cpu: Vec<CpuSample>,
    /// The summed throughput of every later interval against the first (the switch-server's
    /// stability test); null with fewer than two intervals.
    pub vs_first_interval: Option<VsFirst>,
}

/// How a run's summed throughput held against its first interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct VsFirst {
    /// The first interval's summed throughput, Gbit/s.
    pub first_gbps: f64,
    /// The lowest later interval ÷ the first.
    pub min_ratio: f64,
    /// When that interval ended, seconds since the start.
    pub min_at_s: f64,
    /// The largest |later interval ÷ the first − 1|.
    pub max_deviation: f64,
    /// The last interval ÷ the first.
    pub last_ratio: f64,
}

impl VsFirst {
    /// Of a (seconds, Gbit/s) series; `None` with fewer than two intervals or a first of 0.
    pub fn of(series: &[(f64, f64)]) -> Option<VsFirst> {
        let (&(_, first), rest) = series.split_first()?;
        if rest.is_empty() || first <= 0.0 {
            return None;
        }
        let (mut min_ratio, mut min_at_s, mut max_deviation) = (f64::INFINITY, 0.0, 0.0f64);
        for &(t, g) in rest {
            let r = g / first;
            if r < min_ratio {
                (min_ratio, min_at_s) = (r, t);
            }
            max_deviation = max_deviation.max((r - 1.0).abs());
        }
        Some(VsFirst { first_gbps: first, min_ratio, min_at_s, max_deviation, last_ratio: rest[rest.len() - 1].1 / first })
    }
}

/// One (DUT, tool, streams) over every run (one JSON line, `"measurement":"median"`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MedianRow {
    /// `tcp`.
    pub test: &'static str,
    /// `median`.
    pub measurement: &'static str,
    /// DUT name.
    pub dut: String,
    /// `iperf3` or `iperf2`.
    pub tool: &'static str,
    /// Parallel streams per pair.
    pub streams: u32,
    /// Runs it had.
    pub runs: usize,
    /// Median summed throughput, Gbit/s, and the lowest and highest run.
    pub gbps: f64,
    /// See `gbps`.
    pub gbps_min: f64,
    /// See `gbps`.
    pub gbps_max: f64,
    /// Median machine CPU (% of one core) per Gbit/s.
    pub machine_cpu_pct_per_gbps: Option<f64>,
    /// The baseline: the first DUT named that is not fastpath (null when none ran).
    pub baseline: Option<String>,
    /// Median over the runs of this DUT's Gbit/s ÷ the baseline's in the same run.
    pub vs_baseline_gbps: Option<f64>,
    /// Median over the runs of this DUT's machine CPU per Gbit/s ÷ the baseline's.
    pub vs_baseline_cpu_per_gbps: Option<f64>,
}

/// One [`MedianRow`] per (DUT, tool, streams) of `rows`, in first-seen order, against
/// `baseline` (a DUT name) where it ran in the same run.
fn medians(rows: &[TcpRow], baseline: Option<&str>) -> Vec<MedianRow> {
    let mut out: Vec<MedianRow> = Vec::new();
    for r in rows {
        if out.iter().any(|m| m.dut == r.dut && m.tool == r.tool && m.streams == r.streams) {
            continue;
        }
        let mine: Vec<&TcpRow> = rows.iter().filter(|x| x.dut == r.dut && x.tool == r.tool && x.streams == r.streams).collect();
        let base_of = |x: &TcpRow| {
            rows.iter().find(|b| Some(b.dut.as_str()) == baseline && b.tool == x.tool && b.streams == x.streams && b.run == x.run)
        };
        let ratio = |f: &dyn Fn(&TcpRow) -> Option<f64>| {
            median(mine.iter().filter_map(|x| Some(f(x)? / f(base_of(x)?)?)).filter(|v| v.is_finite()).collect())
        };
        let g: Vec<f64> = mine.iter().map(|x| x.m.gbps).collect();
        out.push(MedianRow {
            test: "tcp",
            measurement: "median",
            dut: r.dut.clone(),
            tool: r.tool,
            streams: r.streams,
            runs: mine.len(),
            gbps: median(g.clone()).unwrap_or(0.0),
            gbps_min: g.iter().copied().fold(f64::INFINITY, f64::min),
            gbps_max: g.iter().copied().fold(0.0, f64::max),
            machine_cpu_pct_per_gbps: median(mine.iter().filter_map(|x| x.machine_cpu_pct_per_gbps).collect()),
            baseline: baseline.map(str::to_owned),
            vs_baseline_gbps: ratio(&|x| Some(x.m.gbps)),
            vs_baseline_cpu_per_gbps: ratio(&|x| x.machine_cpu_pct_per_gbps),
        });
    }
    out
}

/// File transfers of one size through one DUT, one per pair at once (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TransferRow {
    /// `tcp`.
    pub test: &'static str,
    /// `transfer`.
    pub measurement: &'static str,
    /// DUT name.
    pub dut: String,
    /// Bytes each pair transferred.
    pub bytes: u64,
    /// Each pair's completion time at its receiver, seconds (iperf3's own clock).
    pub completion_s: Vec<f64>,
    /// Until the last pair finished, seconds (iperf3's receiver clock: from the first byte to
    /// the sender's end of the test, which it signals once it has written the last byte into
    /// its socket; at most a socket buffer, a few MB, is still in flight then).
    pub all_done_s: f64,
    /// Wall clock from starting the iperf3 servers until the last client exited, seconds: an
    /// upper bound that adds start-up, connecting and iperf3's result exchange.
    pub wall_s: f64,
    /// All pairs' bytes over `all_done_s`, Gbit/s.
    pub gbps: f64,
    /// Retransmitted segments, all pairs.
    pub retransmits: u64,
    /// Mean machine CPU during the transfers, % of one core.
    pub machine_cpu_pct: f64,
    /// Mean CPU of the DUT's threads, % of one core.
    pub dut_cpu_pct: f64,
}

/// The probe transfer of one DUT as the first receiver saw it (one JSON line, with `check`).
///
/// The capture is taken on the receiver's interface with its GRO off for the probe (GRO would
/// merge the DUT's frames, and a merged frame's checksum field is its first segment's). A DUT
/// that hands the receiver the sender's GSO skb (the bridge, the XDP datapath) delivers frames
/// whose TCP checksum holds only the pseudo-header sum the sender's stack left for the offload:
/// on veth the receiver's stack trusts such an skb (`CHECKSUM_PARTIAL`), so they are counted
/// apart (`partial_tcp_checksums`), not as errors. A DUT that copies frames (AF_XDP) must deliver
/// full checksums: there every frame must verify. The receiver's `TcpInCsumErrors` counts
/// what its stack threw away, capture or not.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CheckRow {
    /// `tcp`.
    pub test: &'static str,
    /// `check`.
    pub measurement: &'static str,
    /// DUT name.
    pub dut: String,
    /// Bytes of the transfer.
    pub bytes: u64,
    /// iperf3 finished the transfer.
    pub completed: bool,
    /// Its duration, seconds.
    pub seconds: f64,
    /// Frames from the sender that the capture holds.
    pub frames: u64,
    /// The largest of them, bytes.
    pub largest_frame: u64,
    /// Frames whose IPv4 header checksum is wrong.
    pub bad_ip_checksums: u64,
    /// Frames whose TCP checksum is wrong and is not the sender's partial sum.
    pub bad_tcp_checksums: u64,
    /// Frames whose TCP checksum is the sender's partial (pseudo-header) sum.
    pub partial_tcp_checksums: u64,
    /// Frames tshark marks as retransmissions (`tcp.analysis.retransmission` or
    /// `tcp.analysis.fast_retransmission`).
    pub retransmissions: u64,
    /// Of those, the spurious ones (`tcp.analysis.spurious_retransmission`): data the receiver
    /// had already received and acknowledged, resent by a sender timer (a tail-loss probe, a
    /// timeout) while an acknowledgement was on its way; the DUT lost nothing.
    pub spurious_retransmissions: u64,
    /// Frames after a gap in the sequence (`tcp.analysis.lost_segment`): data that never reached
    /// the receiver's interface (lost in the sender, the DUT, or by the capture itself).
    pub lost_segments: u64,
    /// Frames the capture itself dropped (tshark's "N packets dropped from IFACE", the packet
    /// socket's overruns on a busy machine): when not 0, a gap may be the capture's.
    pub capture_dropped: u64,
    /// The receiver's `Tcp: InCsumErrors` over the transfer (segments its stack dropped).
    pub receiver_csum_errors: u64,
    /// The sender's `Tcp: RetransSegs` over the transfer: what was really sent twice (tshark
    /// also labels an original that arrives late, overtaken on veth by a segment the sender's
    /// ACK-driven softirq sent from the other CPU, a retransmission).
    pub sender_retrans_segs: u64,
    /// Duplicates the receiver reported back (`TcpExt: TCPDSACKOldSent + TCPDSACKOfoSent`):
    /// retransmitted data it already had. `sender_retrans_segs` above this filled real gaps.
    pub receiver_duplicates: u64,
    /// Frames the DUT's interfaces counted as dropped (rx + tx) over the transfer.
    pub dut_if_drops: u64,
}

/// A DUT that started but could not carry offloaded TCP (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UnsupportedRow {
    /// `tcp`.
    pub test: &'static str,
    /// `unsupported`.
    pub measurement: &'static str,
    /// DUT name.
    pub dut: String,
    /// What failed, with the counters that show why.
    pub why: String,
}

/// Results of a TCP run.
#[derive(Clone, Debug, Default)]
pub struct TcpResults {
    /// One per (DUT, tool, streams, run).
    pub rows: Vec<TcpRow>,
    /// With more than one run: one per (DUT, tool, streams).
    pub medians: Vec<MedianRow>,
    /// One per (DUT, transfer size).
    pub transfers: Vec<TransferRow>,
    /// One per DUT, with `check`.
    pub checks: Vec<CheckRow>,
    /// DUTs that ran but could not carry the probe transfer.
    pub unsupported: Vec<UnsupportedRow>,
    /// DUTs that could not start, with the reason.
    pub skipped: Vec<(String, String)>,
    /// How each DUT was set up for offloaded TCP.
    pub setups: Vec<(String, String)>,
    /// Pairs, interval and offloads of the run.
    pub pairs: usize,
}

/// Parses a size in bytes: a number with an optional `k`, `m`, `g` or `t` (binary multiples,
/// as iperf3's `-n` reads them), e.g. `16G`, `512m`, `1048576`.
///
/// # Errors
/// A message naming the bad input.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: u64 = num.parse().map_err(|_| format!("size \"{s}\": not a number (e.g. 1G, 512M, 1048576)"))?;
    let shift = match unit.trim_end_matches(['b', 'i']) {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        u => return Err(format!("size \"{s}\": unknown unit \"{u}\" (k, m, g, t)")),
    };
    v.checked_mul(1 << shift).filter(|&b| b > 0).ok_or_else(|| format!("size \"{s}\": give a positive size below 16 EiB"))
}

/// `1G`, `512M`, `1048576`: the shortest exact binary-multiple spelling of `bytes`.
pub fn size_text(bytes: u64) -> String {
    for (shift, u) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{u}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// The MTU of a DUT's interfaces for TCP: 65,535 for the XDP datapath with offloaded senders
/// (generic XDP's redirect refuses any skb longer than the egress MTU, GSO or not:
/// `xdp_ok_fwd_dev` in `dev_map_generic_redirect`; with the large MTU the sender's 64 KB GSO skb
/// crosses whole and reaches the receiver with its `gso_size` and checksum state), else 1500:
/// the AF_XDP port cuts segments to its own MTU, and the other DUTs take the hosts' MTU.
pub fn dut_mtu(kind: DutKind, offloads: bool) -> u32 {
    if offloads && kind == DutKind::FastpathXdp {
        65535
    } else {
        1500
    }
}

/// `dc` set up to carry offloaded TCP, and a sentence saying how: the AF_XDP DUT gets
/// `--multi-buffer` (a 64 KB segment arrives as a chain of buffers and leaves as MTU-sized
/// segments with full checksums), the XDP datapath stays in generic mode on veths at
/// [`dut_mtu`]; the others run as they are.
pub fn dut_setup(dc: &DutConfig, offloads: bool) -> (DutConfig, String) {
    let mut c = dc.clone();
    let note = match (dc.kind, offloads) {
        (_, false) => "endpoints' checksum offload, TSO, GSO and GRO off: MTU-sized frames with full checksums".to_owned(),
        (DutKind::Fastpath, true) => {
            if !c.fastpath_cmd.iter().any(|a| a == "--multi-buffer") {
                c.fastpath_cmd.push("--multi-buffer".into());
            }
            // Generic XDP under the sockets: a native program on a veth turns the peer's TSO off
            // (`veth_fix_features`), and the sender would segment in software itself.
            if !c.fastpath_cmd.iter().any(|a| a.starts_with("--mode")) {
                c.fastpath_cmd.extend(["--mode".into(), "skb".into()]);
            }
            "AF_XDP ports in skb mode with multi-buffer receive (--multi-buffer --mode skb): each 64 KB GSO segment \
             arrives as a chain of buffers and is cut into MTU-sized segments with full checksums in the port \
             (software GSO; the pipeline sees each segment); partial checksums of short segments are completed"
                .to_owned()
        }
        (DutKind::FastpathXdp, true) => {
            let native = c.fastpath_cmd.iter().any(|a| a == "--mode=native" || a == "native");
            if native {
                "XDP datapath in native mode: on veth this turns the sender's TSO off and loses every segment's \
                 checksum state (docs/tcp-gso.md); expect it to fail the probe"
                    .to_owned()
            } else {
                format!(
                    "XDP datapath in generic (skb) mode, DUT veths at MTU {}: each 64 KB GSO skb is one packet to the \
                     program and reaches the receiver whole, its segment size and checksum state intact",
                    dut_mtu(dc.kind, true)
                )
            }
        }
        (DutKind::FastpathTc, true) => "eBPF datapath at tc ingress (tcx, --mode tc): each skb, a 64 KB GSO segment \
                                         included, goes on whole by bpf_redirect, nothing copied, its segment size and \
                                         checksum state intact; DUT veths at the hosts' MTU"
            .to_owned(),
        (DutKind::LinuxBridge | DutKind::LinuxBridgeTuned, true) => "forwards the GSO skbs as they are".to_owned(),
        (_, true) => "runs as it is (no large-frame or checksum-offload setting)".to_owned(),
    };
    (c, note)
}

/// A counter of `/proc/net/snmp` (`Tcp`, `InCsumErrors`): the header line names the columns,
/// the next line with the same prefix holds the values.
pub fn snmp_counter(text: &str, proto: &str, name: &str) -> Option<u64> {
    let prefix = format!("{proto}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&prefix));
    let head = lines.next()?;
    let vals = lines.next()?;
    let col = head.split_whitespace().position(|c| c == name)?;
    vals.split_whitespace().nth(col)?.parse().ok()
}

fn ns_snmp(ns: &str, proto: &str, name: &str) -> u64 {
    ns_exec(ns, &["cat", "/proc/net/snmp"]).ok().and_then(|t| snmp_counter(&t, proto, name)).unwrap_or(0)
}

/// D-SACKs a host sent (`/proc/net/netstat`, same layout as `/proc/net/snmp`): duplicates it
/// received, old or out of order.
fn ns_dsacks(ns: &str) -> u64 {
    let t = ns_exec(ns, &["cat", "/proc/net/netstat"]).unwrap_or_default();
    ["TCPDSACKOldSent", "TCPDSACKOfoSent"].iter().filter_map(|k| snmp_counter(&t, "TcpExt", k)).sum()
}

/// The folded 16-bit one's-complement sum of the IPv4 TCP pseudo-header (source, destination,
/// protocol 6, TCP length): what a sender with checksum offload leaves in the TCP checksum
/// field (`CHECKSUM_PARTIAL`, `__tcp_v4_send_check`).
pub fn partial_tcp_csum(src: std::net::Ipv4Addr, dst: std::net::Ipv4Addr, tcp_len: u32) -> u16 {
    let (s, d) = (src.octets(), dst.octets());
    let mut sum: u32 = 0;
    for w in [[s[0], s[1]], [s[2], s[3]], [d[0], d[1]], [d[2], d[3]]] {
        sum += u32::from(u16::from_be_bytes(w));
    }
    sum += 6 + (tcp_len & 0xffff) + (tcp_len >> 16);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The frames a capture dropped, from tshark's closing lines (`12 packets dropped from rcv0`).
pub fn capture_drops(stderr: &str) -> u64 {
    stderr.lines().filter(|l| l.contains("dropped")).filter_map(|l| l.split_whitespace().find_map(|w| w.parse::<u64>().ok())).sum()
}

/// Counts the lines of tshark's `-T fields` output for `filter` over `pcap`, with IP and TCP
/// checksum validation on; `fields` are printed comma-separated.
fn tshark_fields(pcap: &str, filter: &str, fields: &[&str]) -> Result<Vec<String>, LabError> {
    let mut args = vec!["-r", pcap, "-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE", "-T", "fields", "-E", "separator=,"];
    for f in fields {
        args.extend(["-e", f]);
    }
    args.extend(["-Y", filter]);
    Ok(run_cmd("tshark", &args)?.lines().map(str::to_owned).collect())
}

/// One iperf client ▸ server of a run.
struct Job {
    server_ns: String,
    client_ns: String,
    /// The server's address.
    ip: String,
    /// The server's interface, whose `rx_bytes` the progress line reads.
    server_if: String,
}

/// What an iperf client ran for.
#[derive(Clone, Copy)]
enum Load {
    /// `-t` seconds.
    Seconds(u32),
    /// `-n` bytes.
    Bytes(u64),
}

/// One client's outcome.
#[derive(Clone, Debug, Default)]
struct ClientOut {
    series: Vec<(f64, f64)>,
    gbps: f64,
    retransmits: u64,
    /// Seconds the transfer took at the receiver (iperf3).
    seconds: f64,
    /// Bytes the receiver had counted when the sender's end of the test reached it (iperf3;
    /// with `-n`, what was still in flight then arrives after and is not counted).
    bytes: u64,
    /// Bytes the sender wrote (iperf3).
    sent: u64,
}

/// Stops and reaps the iperf servers on every exit path.
struct Servers(Vec<Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            topo::stop_child(c, Duration::from_secs(2));
        }
    }
}

/// The longest a client may run: its seconds, or its bytes at no less than 100 Mbit/s, plus
/// 30 s for connecting and the final exchange.
fn client_limit_s(load: Load) -> u64 {
    match load {
        Load::Seconds(s) => u64::from(s) + 30,
        Load::Bytes(b) => b.saturating_mul(8) / 100_000_000 + 30,
    }
}

/// Runs one client per job at once (servers started first), sampling the CPU of `pids` and of
/// the machine, and the servers' received bytes, every `interval_s`; `tick` gets each sample
/// with the Gbit/s the receivers took in over it.
fn run_iperf(
    tool: TcpTool,
    jobs: &[Job],
    streams: u32,
    load: Load,
    interval_s: u32,
    pids: &[u32],
    tick: &mut dyn FnMut(&CpuSample, f64),
) -> Result<(Vec<ClientOut>, Vec<CpuSample>), LabError> {
    let prefix = topo::tester_prefix();
    let pre: Vec<&str> = prefix.iter().map(String::as_str).collect();
    let (n_s, i_s) = (streams.to_string(), interval_s.max(1).to_string());
    let mut servers = Servers(Vec::new());
    for j in jobs {
        let mut a: Vec<&str> = vec!["netns", "exec", &j.server_ns];
        a.extend(&pre);
        match tool {
            TcpTool::Iperf3 => a.extend(["iperf3", "-s", "-1", "-B", &j.ip]),
            TcpTool::Iperf2 => a.extend(["iperf", "-s", "-B", &j.ip]),
        }
        let c = Command::new("ip")
            .args(&a)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| LabError::Cmd { cmd: a.join(" "), status: -1, stderr: e.to_string() })?;
        servers.0.push(c);
    }
    // Wait for every server's listening socket.
    let port = if tool == TcpTool::Iperf3 { ":5201" } else { ":5001" };
    for j in jobs {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) && !ns_exec(&j.server_ns, &["ss", "-ltn"]).unwrap_or_default().contains(port) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let limit = client_limit_s(load).to_string();
    let amount = match load {
        Load::Seconds(s) => ["-t".to_owned(), s.to_string()],
        Load::Bytes(b) => ["-n".to_owned(), b.to_string()],
    };
    let mut clients = Vec::new();
    let rx0: Vec<u64> = jobs.iter().map(|j| if_counter(&j.server_ns, &j.server_if, "rx_bytes").unwrap_or(0)).collect();
    let mut sampler = Sampler::start(pids);
    for j in jobs {
        let mut a: Vec<&str> = vec!["netns", "exec", &j.client_ns];
        a.extend(&pre);
        a.extend(["timeout", "-k", "5", &limit]);
        match tool {
            TcpTool::Iperf3 => {
                a.extend(["iperf3", "-c", &j.ip, &amount[0], &amount[1], "-P", &n_s, "-i", &i_s, "-J", "--connect-timeout", "5000"])
            }
            TcpTool::Iperf2 => a.extend(["iperf", "-c", &j.ip, &amount[0], &amount[1], "-P", &n_s, "-i", &i_s, "-y", "C"]),
        }
        let c = Command::new("ip")
            .args(&a)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| LabError::Cmd { cmd: a.join(" "), status: -1, stderr: e.to_string() })?;
        clients.push(c);
    }
    // Sample at every interval until every client has exited (each is bounded by `timeout`).
    let iv = Duration::from_secs(u64::from(interval_s.max(1)));
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut rx_last = rx0;
    let mut next = start + iv;
    let mut t_last = start;
    loop {
        let all_done = clients.iter_mut().all(|c| matches!(c.try_wait(), Ok(Some(_)) | Err(_)));
        let now = Instant::now();
        if now >= next || all_done {
            // A last partial interval shorter than half an interval says little: not sampled,
            // unless it is the only one (a transfer shorter than the interval).
            if !all_done || now.duration_since(t_last) >= iv / 2 || samples.is_empty() {
                let s = sampler.sample();
                let rx: Vec<u64> = jobs.iter().map(|j| if_counter(&j.server_ns, &j.server_if, "rx_bytes").unwrap_or(0)).collect();
                let bytes: u64 = rx.iter().zip(&rx_last).map(|(a, b)| a.saturating_sub(*b)).sum();
                let gbps = bytes as f64 * 8.0 / now.duration_since(t_last).as_secs_f64().max(1e-3) / 1e9;
                tick(&s, gbps);
                samples.push(s);
                rx_last = rx;
                t_last = now;
            }
            next += iv;
        }
        if all_done {
            break;
        }
        if topo::interrupted() {
            for c in &mut clients {
                topo::stop_child(c, Duration::from_secs(1));
            }
            return Err(LabError::Interrupted);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut outs = Vec::new();
    for (j, c) in jobs.iter().zip(clients) {
        let o = c.wait_with_output().map_err(|e| LabError::Io(format!("iperf client in {}: {e}", j.client_ns)))?;
        let text = String::from_utf8_lossy(&o.stdout);
        let out = match tool {
            TcpTool::Iperf3 => parse_iperf3_full(&text).map_err(|e| {
                let err = String::from_utf8_lossy(&o.stderr);
                let err = if err.trim().is_empty() { String::new() } else { format!(" ({})", err.trim()) };
                LabError::Io(format!("iperf3 to {} ({}): {e}{err}", j.ip, o.status))
            })?,
            TcpTool::Iperf2 => {
                let (series, gbps) = parse_iperf2(&text, f64::from(interval_s.max(1)));
                if series.is_empty() && gbps == 0.0 {
                    let err = String::from_utf8_lossy(&o.stderr);
                    return Err(LabError::Io(format!("iperf to {} (exit {}) reported nothing: {}", j.ip, o.status, err.trim())));
                }
                ClientOut { series, gbps, ..ClientOut::default() }
            }
        };
        outs.push(out);
    }
    drop(servers);
    Ok((outs, samples))
}

/// Runs `tool` with `streams` streams for `secs` seconds, server in `server_ns` bound to `ip`,
/// client in `client_ns`, both on the tester's CPUs at the lab's priority (like the generator),
/// sampling the CPU of `pids` and of the machine every second meanwhile; with the sender's
/// retransmitted segments. The overlay test's measurement.
///
/// # Errors
/// An iperf failure, [`LabError::Interrupted`].
pub(crate) fn measure(
    tool: TcpTool,
    server_ns: &str,
    client_ns: &str,
    ip: &str,
    streams: u32,
    secs: u32,
    pids: &[u32],
) -> Result<(TcpMeasure, u64), LabError> {
    // The server's interface, for the received-bytes figure (none found: it reads 0).
    let server_if = ns_exec(server_ns, &["ip", "-o", "-4", "addr", "show", "to", ip])
        .ok()
        .and_then(|o| o.split_whitespace().nth(1).map(str::to_owned))
        .unwrap_or_default();
    let jobs = [Job { server_ns: server_ns.to_owned(), client_ns: client_ns.to_owned(), ip: ip.to_owned(), server_if }];
    let (outs, cpu) = run_iperf(tool, &jobs, streams, Load::Seconds(secs), 1, pids, &mut |_, _| {})?;
    Ok((summed(&outs, &cpu), outs.iter().map(|o| o.retransmits).sum()))
}

/// The pairs' outcomes summed per interval, with the CPU samples' means.
fn summed(outs: &[ClientOut], cpu: &[CpuSample]) -> TcpMeasure {
    let mut by_end: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for o in outs {
        for (i, &(t, g)) in o.series.iter().enumerate() {
            let e = by_end.entry(i as u64).or_insert((t, 0.0));
            e.1 += g;
        }
    }
    let mean = |v: &[(f64, f64)]| if v.is_empty() { 0.0 } else { v.iter().map(|x| x.1).sum::<f64>() / v.len() as f64 };
    let dut_cpu: Vec<(f64, f64)> = cpu.iter().map(|c| (c.t_s, c.dut_pct)).collect();
    let machine_cpu: Vec<(f64, f64)> = cpu.iter().map(|c| (c.t_s, c.machine_pct)).collect();
    TcpMeasure {
        gbps: outs.iter().map(|o| o.gbps).sum(),
        gbps_over_time: by_end.into_values().collect(),
        dut_cpu_pct: mean(&dut_cpu),
        machine_cpu_pct: mean(&machine_cpu),
        dut_cpu_over_time: dut_cpu,
        machine_cpu_over_time: machine_cpu,
    }
}

fn per_gbps(cpu: f64, gbps: f64) -> Option<f64> {
    (gbps > 0.0).then(|| cpu / gbps)
}

fn jobs_of(t: &PairsTopo) -> Vec<Job> {
    t.pairs
        .iter()
        .map(|p| Job {
            server_ns: p.receiver.ns.clone(),
            client_ns: p.sender.ns.clone(),
            ip: p.receiver.ip.to_string(),
            server_if: p.receiver.ifname.clone(),
        })
        .collect()
}

/// The sum of the DUT interfaces' `rx_dropped` and `tx_dropped`.
fn dut_if_drops(t: &PairsTopo) -> u64 {
    let site = t.site();
    let mut n = 0;
    for p in site.ports() {
        for c in ["rx_dropped", "tx_dropped"] {
            n += if_counter(&t.dut_ns, p, c).unwrap_or(0);
        }
    }
    n
}

/// The probe transfer through pair 0 (captured and read with tshark when `capture`): tells
/// whether the DUT carries offloaded TCP (`Ok(Ok(row))`) or not (`Ok(Err(why))`, with the
/// counters that say why).
///
/// # Errors
/// The lab's own failures: a capture that tshark cannot take or read, [`LabError::Interrupted`].
fn probe(t: &PairsTopo, dut: &Dut, name: &str, bytes: u64, capture: bool, offloads: bool) -> Result<Result<CheckRow, String>, LabError> {
    let p = &t.pairs[0];
    let (rns, rif, sip) = (&p.receiver.ns, &p.receiver.ifname, p.sender.ip.to_string());
    let csum0 = ns_snmp(rns, "Tcp", "InCsumErrors");
    let retr0 = ns_snmp(&p.sender.ns, "Tcp", "RetransSegs");
    let dup0 = ns_dsacks(rns);
    let drops0 = dut_if_drops(t);
    let dir = std::env::temp_dir().join(format!("fp-tcpcheck-{}-{name}", std::process::id()));
    let pcap = dir.join("rcv.pcap");
    let pcap_s = pcap.to_string_lossy().into_owned();
    let mut shark = None;
    if capture {
        std::fs::create_dir_all(&dir)?;
        if offloads {
            ns_exec(rns, &["ethtool", "-K", rif, "gro", "off"])?;
        }
        // Bounded: at most 200,000 frames and the transfer's own limit.
        let dur = format!("duration:{}", client_limit_s(Load::Bytes(bytes)));
        let errf = std::fs::File::create(dir.join("tshark.err"))?;
        let c = Command::new("ip")
            .args(["netns", "exec", rns, "tshark", "-q", "-i", rif, "-B", "64", "-c", "200000", "-a", &dur, "-w", &pcap_s, "-f", "tcp"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(errf)
            .spawn()
            .map_err(|e| LabError::Cmd { cmd: "tshark".into(), status: -1, stderr: e.to_string() })?;
        let mut guard = Servers(vec![c]);
        // tshark creates its file once it captures; on a loaded machine its start takes seconds.
        let end = Instant::now() + Duration::from_secs(60);
        while !pcap.exists() && Instant::now() < end && matches!(guard.0[0].try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if !pcap.exists() {
            drop(guard);
            let err = std::fs::read_to_string(dir.join("tshark.err")).unwrap_or_default();
            let _ = std::fs::remove_dir_all(&dir);
            let _ = ns_exec(rns, &["ethtool", "-K", rif, "gro", if offloads { "on" } else { "off" }]);
            return Err(LabError::Io(format!("tshark did not start capturing on {rif} within 60 s: {}", err.trim())));
        }
        shark = Some(guard);
        std::thread::sleep(Duration::from_millis(300));
    }
    let jobs = vec![jobs_of(t).remove(0)];
    let r = run_iperf(TcpTool::Iperf3, &jobs, 1, Load::Bytes(bytes), 1, &dut.pids(), &mut |_, _| {});
    // Let the last frames reach the capture, then stop tshark (SIGTERM flushes its file).
    std::thread::sleep(Duration::from_millis(300));
    drop(shark);
    if capture && offloads {
        ns_exec(rns, &["ethtool", "-K", rif, "gro", "on"])?;
    }
    let mut row = CheckRow {
        test: "tcp",
        measurement: "check",
        dut: name.to_owned(),
        bytes,
        receiver_csum_errors: ns_snmp(rns, "Tcp", "InCsumErrors").saturating_sub(csum0),
        sender_retrans_segs: ns_snmp(&p.sender.ns, "Tcp", "RetransSegs").saturating_sub(retr0),
        receiver_duplicates: ns_dsacks(rns).saturating_sub(dup0),
        dut_if_drops: dut_if_drops(t).saturating_sub(drops0),
        ..CheckRow::default()
    };
    let err = match r {
        Ok((outs, _)) => {
            let o = outs.first().cloned().unwrap_or_default();
            // iperf3 ended without an error once the sender had written every byte and the
            // receiver confirmed the end of the test.
            row.completed = o.sent >= bytes;
            row.seconds = o.seconds;
            (!row.completed).then(|| format!("iperf3 sent {} of {bytes} bytes", o.sent))
        }
        Err(LabError::Interrupted) => return Err(LabError::Interrupted),
        Err(e) => Some(e.to_string()),
    };
    if capture {
        let from = format!("ip.src == {sip}");
        let all = tshark_fields(&pcap_s, &format!("tcp && {from}"), &["frame.len"])?;
        row.frames = all.len() as u64;
        row.largest_frame = all.iter().filter_map(|l| l.trim().parse().ok()).max().unwrap_or(0);
        row.bad_ip_checksums = tshark_fields(&pcap_s, &format!("{from} && ip.checksum.status == 0"), &["frame.number"])?.len() as u64;
        let bad = tshark_fields(
            &pcap_s,
            &format!("{from} && tcp.checksum.status == 0"),
            &["ip.src", "ip.dst", "ip.len", "ip.hdr_len", "tcp.checksum"],
        )?;
        for l in &bad {
            let f: Vec<&str> = l.split(',').collect();
            let partial = (|| {
                let src: std::net::Ipv4Addr = f.first()?.parse().ok()?;
                let dst: std::net::Ipv4Addr = f.get(1)?.parse().ok()?;
                let len: u32 = f.get(2)?.parse().ok()?;
                let hl: u32 = f.get(3)?.parse().ok()?;
                let field = u16::from_str_radix(f.get(4)?.trim_start_matches("0x"), 16).ok()?;
                Some(field == partial_tcp_csum(src, dst, len.checked_sub(hl)?))
            })();
            if partial == Some(true) {
                row.partial_tcp_checksums += 1;
            } else {
                row.bad_tcp_checksums += 1;
            }
        }
        row.retransmissions = tshark_fields(
            &pcap_s,
            &format!("{from} && (tcp.analysis.retransmission || tcp.analysis.fast_retransmission)"),
            &["frame.number"],
        )?
        .len() as u64;
        row.spurious_retransmissions =
            tshark_fields(&pcap_s, &format!("{from} && tcp.analysis.spurious_retransmission"), &["frame.number"])?.len() as u64;
        row.lost_segments = tshark_fields(&pcap_s, &format!("{from} && tcp.analysis.lost_segment"), &["frame.number"])?.len() as u64;
        row.capture_dropped = capture_drops(&std::fs::read_to_string(dir.join("tshark.err")).unwrap_or_default());
        let _ = std::fs::remove_dir_all(&dir);
    }
    if let Some(e) = err {
        let tso = ns_exec(&p.sender.ns, &["ethtool", "-k", &p.sender.ifname])
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("tcp-segmentation-offload"))
            .map(|l| l.trim().to_owned())
            .unwrap_or_default();
        return Ok(Err(format!(
            "the probe transfer of {} did not complete: {e}; the receiver's stack dropped {} segment(s) on a bad checksum \
             (TcpInCsumErrors), the DUT's interfaces dropped {} frame(s), the sender retransmitted {} segment(s); sender {tso}",
            size_text(bytes),
            row.receiver_csum_errors,
            row.dut_if_drops,
            row.sender_retrans_segs
        )));
    }
    Ok(Ok(row))
}

/// Runs the TCP test: for every DUT, a probe transfer, then every tool and stream count for
/// `duration_s` on all pairs at once, then every transfer size.
///
/// # Errors
/// [`LabError::NotRoot`], [`LabError::Interrupted`], [`LabError::Config`] for a bad
/// configuration, [`LabError::Unavailable`] when iperf (or tshark, for `check`) is not
/// installed, or an iperf failure during a measurement. A DUT that does not start, or cannot
/// carry the probe, is reported in the results, and the run goes on with the next.
pub fn run(cfg: &TcpConfig, progress: &mut dyn FnMut(&str)) -> Result<TcpResults, LabError> {
    if cfg.duts.is_empty() || cfg.tools.is_empty() {
        return Err(LabError::Config("tcp needs at least one DUT and tool".into()));
    }
    if cfg.duration_s > 0 && cfg.streams.is_empty() {
        return Err(LabError::Config("tcp needs at least one stream count".into()));
    }
    if let Some(&s) = cfg.streams.iter().find(|&&s| s == 0 || s > 128) {
        return Err(LabError::Config(format!("{s} streams: give 1 to 128 (iperf3 -P)")));
    }
    if cfg.interval_s == 0 || (cfg.duration_s > 0 && cfg.interval_s > cfg.duration_s) {
        return Err(LabError::Config(format!("interval {} s: give 1 s up to the duration ({} s)", cfg.interval_s, cfg.duration_s)));
    }
    if cfg.pairs == 0 || cfg.pairs > super::tcp_pairs::MAX_PAIRS {
        return Err(LabError::Config(format!("{} pairs: give 1 to {}", cfg.pairs, super::tcp_pairs::MAX_PAIRS)));
    }
    let mut progs: Vec<&str> = cfg.tools.iter().map(|t| if *t == TcpTool::Iperf3 { "iperf3" } else { "iperf" }).collect();
    progs.push("iperf3"); // the probe and the transfers
    if cfg.check {
        progs.push("tshark");
    }
    for prog in progs {
        if run_cmd("sh", &["-c", &format!("command -v {prog}")]).is_err() {
            return Err(LabError::Unavailable {
                dut: "tcp".into(),
                why: format!(
                    "`{prog}` is not installed (run scripts/setup-lab.sh as root{})",
                    if prog == "tshark" { "; tshark: apt-get install tshark" } else { "" }
                ),
            });
        }
    }
    for ns in topo::cleanup_stale() {
        progress(&format!("removed {ns}, left behind by a lab run that no longer exists"));
    }
    if cfg.runs == 0 {
        return Err(LabError::Config("tcp needs at least one run".into()));
    }
    let mut out = TcpResults { pairs: cfg.pairs, ..TcpResults::default() };
    for run in 1..=cfg.runs {
        let mut order: Vec<&DutConfig> = cfg.duts.iter().collect();
        if run % 2 == 0 {
            order.reverse();
        }
        if cfg.runs > 1 {
            let names: Vec<&str> = order.iter().map(|d| d.name()).collect();
            progress(&format!("run {run} of {}: {}", cfg.runs, names.join(", ")));
        }
        for dc in order {
            one_dut(cfg, dc, run, &mut out, progress)?;
        }
    }
    if cfg.runs > 1 {
        let baseline = cfg.duts.iter().find(|d| !d.kind.is_fastpath()).map(DutConfig::name);
        out.medians = medians(&out.rows, baseline);
        for m in &out.medians {
            progress(&format!(
                "{} {} ×{}: median of {} runs {:.2} Gbit/s ({:.2}–{:.2}){}",
                m.dut,
                m.tool,
                m.streams,
                m.runs,
                m.gbps,
                m.gbps_min,
                m.gbps_max,
                match (&m.baseline, m.vs_baseline_gbps, m.vs_baseline_cpu_per_gbps) {
                    (Some(b), Some(g), c) if *b != m.dut => format!(
                        ", {g:.3}× {b}'s Gbit/s at {}× its CPU per Gbit/s (medians of the runs' ratios)",
                        c.map_or("–".into(), |c| format!("{c:.3}"))
                    ),
                    _ => String::new(),
                }
            ));
        }
    }
    Ok(out)
}

/// Everything `run` measures of one DUT in run `run`: its topology, start, the probe (and on the
/// first run the check), the throughput runs, and on the first run the transfers.
fn one_dut(cfg: &TcpConfig, dc: &DutConfig, run: u32, out: &mut TcpResults, progress: &mut dyn FnMut(&str)) -> Result<(), LabError> {
    let first = run == 1;
    if topo::interrupted() {
        return Err(LabError::Interrupted);
    }
    let name = dc.name().to_owned();
    let (dc, how) = dut_setup(dc, cfg.offloads);
    let mtu = dut_mtu(dc.kind, cfg.offloads);
    let t = PairsTopo::create(&PairsConfig { pairs: cfg.pairs, dut_mtu: mtu, host_offloads: cfg.offloads, ..PairsConfig::default() })?;
    let dut = match Dut::start_at(&t.site(), &dc) {
        Ok(d) => d,
        Err(e) => {
            progress(&format!("{name}: skipped: {e}"));
            if first {
                out.skipped.push((name, e.to_string()));
            }
            return Ok(());
        }
    };
    progress(&format!("{name}: DUT namespace {}, {} pair(s), DUT interfaces at MTU {mtu}", t.dut_ns, cfg.pairs));
    progress(&format!("{name}: {how}"));
    if first {
        out.setups.push((name.clone(), how));
    }
    let check = cfg.check && first;
    match probe(&t, &dut, &name, cfg.probe_bytes, check, cfg.offloads)? {
        Ok(c) => {
            progress(&format!(
                "{name}: probe of {} done in {:.2} s{}",
                size_text(c.bytes),
                c.seconds,
                if check {
                    format!(
                        "; capture: {} frames (largest {} B, {} dropped by the capture), bad IP/TCP checksums {}/{}, partial {}, \
                             retransmissions {} ({} spurious), segments lost before the receiver {}; sender RetransSegs {}, receiver \
                             D-SACKs {}, TcpInCsumErrors {}",
                        c.frames,
                        c.largest_frame,
                        c.capture_dropped,
                        c.bad_ip_checksums,
                        c.bad_tcp_checksums,
                        c.partial_tcp_checksums,
                        c.retransmissions,
                        c.spurious_retransmissions,
                        c.lost_segments,
                        c.sender_retrans_segs,
                        c.receiver_duplicates,
                        c.receiver_csum_errors
                    )
                } else {
                    String::new()
                }
            ));
            if check {
                out.checks.push(c);
            }
        }
        Err(e) => {
            let why = format!("cannot carry {}TCP: {e}", if cfg.offloads { "offloaded " } else { "" });
            progress(&format!("{name}: {why}"));
            if !out.unsupported.iter().any(|u| u.dut == name) {
                out.unsupported.push(UnsupportedRow { test: "tcp", measurement: "unsupported", dut: name, why });
            }
            return Ok(());
        }
    }
    let jobs = jobs_of(&t);
    let pids = dut.pids();
    for &tool in &cfg.tools {
        for &n in cfg.streams.iter().filter(|_| cfg.duration_s > 0) {
            if topo::interrupted() {
                return Err(LabError::Interrupted);
            }
            let secs = cfg.duration_s;
            let mut tick = |s: &CpuSample, g: f64| {
                progress(&format!(
                    "{name} {} ×{n}, {} pair(s): {:>4.0}/{secs} s  {g:.2} Gbit/s at the receivers  machine CPU {:.0} %  DUT CPU {:.0} %",
                    tool.name(),
                    cfg.pairs,
                    s.t_s,
                    s.machine_pct,
                    s.dut_pct
                ))
            };
            let (outs, cpu) = run_iperf(tool, &jobs, n, Load::Seconds(secs), cfg.interval_s, &pids, &mut tick)?;
            let m = summed(&outs, &cpu);
            let row = TcpRow {
                test: "tcp",
                dut: name.clone(),
                tool: tool.name(),
                streams: n,
                run,
                pairs: cfg.pairs,
                interval_s: cfg.interval_s,
                offloads: cfg.offloads,
                dut_mtu: mtu,
                per_pair: outs
                    .iter()
                    .enumerate()
                    .map(|(i, o)| PairMeasure { pair: i, gbps: o.gbps, gbps_over_time: o.series.clone(), retransmits: o.retransmits })
                    .collect(),
                retransmits: outs.iter().map(|o| o.retransmits).sum(),
                core_cpu_pct: mean_columns(cpu.iter().map(|c| c.core_pct.clone())),
                core_softirq_pct: mean_columns(cpu.iter().map(|c| c.core_softirq_pct.clone())),
                dut_core_cpu_pct: mean_columns(cpu.iter().map(|c| c.dut_core_pct.clone())),
                machine_cpu_pct_per_gbps: per_gbps(m.machine_cpu_pct, m.gbps),
                dut_cpu_pct_per_gbps: per_gbps(m.dut_cpu_pct, m.gbps),
                vs_first_interval: VsFirst::of(&m.gbps_over_time),
                cpu,
                m,
            };
            let each: Vec<String> = row.per_pair.iter().map(|p| format!("{:.2}", p.gbps)).collect();
            progress(&format!(
                "{name} {} ×{n}: {:.2} Gbit/s (pairs {}), {} retransmits, DUT CPU {:.0} %, machine CPU {:.0} % ({} % per Gbit/s)",
                tool.name(),
                row.m.gbps,
                each.join(" + "),
                row.retransmits,
                row.m.dut_cpu_pct,
                row.m.machine_cpu_pct,
                row.machine_cpu_pct_per_gbps.map_or("–".into(), |x| format!("{x:.1}"))
            ));
            if let Some(v) = row.vs_first_interval {
                progress(&format!(
                    "{name} {} ×{n}: against the first interval ({:.2} Gbit/s): lowest {:.3} (at {:.0} s), last {:.3}, \
                         largest deviation {:.1} %",
                    tool.name(),
                    v.first_gbps,
                    v.min_ratio,
                    v.min_at_s,
                    v.last_ratio,
                    v.max_deviation * 100.0
                ));
            }
            out.rows.push(row);
        }
    }
    for &bytes in cfg.transfers.iter().filter(|_| first) {
        if topo::interrupted() {
            return Err(LabError::Interrupted);
        }
        let t0 = Instant::now();
        let mut tick = |s: &CpuSample, g: f64| {
            progress(&format!("{name} transfer of {} per pair: {:>4.0} s  {g:.2} Gbit/s at the receivers", size_text(bytes), s.t_s))
        };
        let (outs, cpu) = run_iperf(TcpTool::Iperf3, &jobs, 1, Load::Bytes(bytes), cfg.interval_s, &pids, &mut tick)?;
        let wall = t0.elapsed().as_secs_f64();
        let completion_s: Vec<f64> = outs.iter().map(|o| o.seconds).collect();
        let all_done_s = completion_s.iter().copied().fold(0.0, f64::max);
        let m = summed(&outs, &cpu);
        let row = TransferRow {
            test: "tcp",
            measurement: "transfer",
            dut: name.clone(),
            bytes,
            gbps: if all_done_s > 0.0 { outs.iter().map(|o| o.bytes).sum::<u64>() as f64 * 8.0 / all_done_s / 1e9 } else { 0.0 },
            completion_s,
            all_done_s,
            wall_s: wall,
            retransmits: outs.iter().map(|o| o.retransmits).sum(),
            machine_cpu_pct: m.machine_cpu_pct,
            dut_cpu_pct: m.dut_cpu_pct,
        };
        progress(&format!(
            "{name} transfer of {} per pair: all done in {:.2} s ({:.2} Gbit/s; wall clock {wall:.1} s with connecting)",
            size_text(bytes),
            row.all_done_s,
            row.gbps
        ));
        out.transfers.push(row);
    }
    Ok(())
}

/// Parses iperf3 `-J` output: the summed interval series (interval end s, Gbps), the mean Gbps at
/// the receiver, the sender's retransmits, and the seconds and bytes at the receiver.
fn parse_iperf3_full(json: &str) -> Result<ClientOut, LabError> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| LabError::Io(format!("iperf3 JSON: {e}")))?;
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        return Err(LabError::Io(format!("iperf3: {e}")));
    }
    let mut series = Vec::new();
    for i in v["intervals"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let s = &i["sum"];
        if let (Some(end), Some(bps)) = (s["end"].as_f64(), s["bits_per_second"].as_f64()) {
            series.push((end, bps / 1e9));
        }
    }
    let rx = &v["end"]["sum_received"];
    let tx = &v["end"]["sum_sent"];
    let seconds = rx["seconds"].as_f64().filter(|&s| s > 0.0).or_else(|| tx["seconds"].as_f64()).unwrap_or(0.0);
    Ok(ClientOut {
        series,
        gbps: rx["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9,
        retransmits: tx["retransmits"].as_u64().unwrap_or(0),
        seconds,
        bytes: rx["bytes"].as_u64().unwrap_or(0),
        sent: tx["bytes"].as_u64().unwrap_or(0),
    })
}

/// Parses iperf3 `-J` output into (interval end s, Gbps) and the mean Gbps at the receiver.
#[cfg(test)]
fn parse_iperf3(json: &str) -> Result<(Vec<(f64, f64)>, f64), LabError> {
    parse_iperf3_full(json).map(|o| (o.series, o.gbps))
}

/// Parses iperf 2 `-y C` output: one line per stream and interval (iperf 2.1 prints no sum
/// lines in CSV; older versions print them with stream id -1, and then only those are used),
/// summed per interval of `interval_s`; the whole-run lines (longer than 1.5 intervals) give
/// the mean.
fn parse_iperf2(csv: &str, interval_s: f64) -> (Vec<(f64, f64)>, f64) {
    let rows: Vec<(i64, f64, f64, f64)> = csv
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let id: i64 = f.get(5)?.parse().ok()?;
            let (a, b) = f.get(6)?.split_once('-')?;
            Some((id, a.parse().ok()?, b.parse().ok()?, f.get(8)?.parse().ok()?))
        })
        .collect();
    let has_sums = rows.iter().any(|r| r.0 == -1);
    let mut per: BTreeMap<(u64, u64), f64> = BTreeMap::new();
    let mut total = 0.0;
    for &(id, a, b, bps) in &rows {
        if has_sums && id != -1 {
            continue;
        }
        if b - a > 1.5 * interval_s {
            total += bps;
        } else {
            *per.entry(((a * 1000.0) as u64, (b * 1000.0) as u64)).or_default() += bps;
        }
    }
    let series: Vec<(f64, f64)> = per.into_iter().map(|((_, b), bps)| (b as f64 / 1000.0, bps / 1e9)).collect();
    let mean = if total > 0.0 {
        total / 1e9
    } else if series.is_empty() {
        0.0
    } else {
        series.iter().map(|x| x.1).sum::<f64>() / series.len() as f64
    };
    (series, mean)
}

impl TcpResults {
    /// One JSON object per line: a row per (DUT, tool, streams), then the transfers, the checks
    /// and the DUTs that could not carry offloaded TCP.
    pub fn json_lines(&self) -> String {
        let mut s = super::json_lines(&self.rows);
        s.push_str(&super::json_lines(&self.medians));
        s.push_str(&super::json_lines(&self.transfers));
        s.push_str(&super::json_lines(&self.checks));
        s.push_str(&super::json_lines(&self.unsupported));
        s
    }

    /// Adds the tables and the throughput-over-time, CPU, CPU-per-Gbit/s and transfer-time
    /// charts to `report`.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("TCP throughput and CPU");
        let offloads = self.rows.first().is_none_or(|r| r.offloads);
        report.para(format!(
            "iperf through the DUT, {} sender ▸ receiver pair(s) at once, each pair on its own two DUT ports. \
             The endpoints {}. CPU in % of one core, sampled at every interval from /proc/stat (the machine, each core, \
             each core's softirq time) and /proc/PID/task/*/stat (the DUT's threads, by the core each last ran on). The \
             kernel DUTs (bridge, XDP datapath) have no thread: their work is the senders' softirq time.",
            self.pairs,
            if offloads {
                "keep checksum offload, TSO, GSO and GRO on, as a host would"
            } else {
                "run with checksum offload, TSO, GSO and GRO off"
            }
        ));
        if !self.setups.is_empty() {
            report.table(&["DUT", "set up for TCP"], self.setups.iter().map(|(d, h)| vec![d.clone(), h.clone()]).collect());
        }
        for u in &self.unsupported {
            report.para(format!("{}: {}", u.dut, u.why));
        }
        for (d, why) in &self.skipped {
            report.para(format!("{d} skipped: {why}"));
        }
        if !self.rows.is_empty() {
            let f1 = |x: Option<f64>| x.map_or("–".to_owned(), |v| format!("{v:.1}"));
            let rows = self
                .rows
                .iter()
                .map(|r| {
                    vec![
                        r.dut.clone(),
                        r.tool.to_owned(),
                        r.streams.to_string(),
                        format!("{:.2}", r.m.gbps),
                        r.per_pair.iter().map(|p| format!("{:.2}", p.gbps)).collect::<Vec<_>>().join(" / "),
                        r.retransmits.to_string(),
                        format!("{:.0}", r.m.dut_cpu_pct),
                        format!("{:.0}", r.m.machine_cpu_pct),
                        r.core_cpu_pct
                            .iter()
                            .zip(&r.core_softirq_pct)
                            .map(|(c, s)| format!("{c:.0} ({s:.0})"))
                            .collect::<Vec<_>>()
                            .join(" / "),
                        f1(r.dut_cpu_pct_per_gbps),
                        f1(r.machine_cpu_pct_per_gbps),
                        r.vs_first_interval.map_or("–".to_owned(), |v| format!("{:.3} / {:.3}", v.min_ratio, v.last_ratio)),
                    ]
                })
                .collect();
            report.table(
                &[
                    "DUT",
                    "tool",
                    "streams per pair",
                    "Gbit/s (sum)",
                    "Gbit/s per pair",
                    "retransmits",
                    "DUT CPU %",
                    "machine CPU %",
                    "per core % (softirq)",
                    "DUT CPU % per Gbit/s",
                    "machine CPU % per Gbit/s",
                    "vs the first interval: lowest / last",
                ],
                rows,
            );
            if !self.medians.is_empty() {
                report.para(format!(
                    "Over {} runs, the DUTs in the order given on odd runs and reversed on even ones: the median run and the \
                     spread; ratios are medians of each run's ratio to the baseline measured in that run.",
                    self.medians.iter().map(|m| m.runs).max().unwrap_or(0)
                ));
                let f3 = |x: Option<f64>| x.map_or("–".to_owned(), |v| format!("{v:.3}"));
                let rows = self
                    .medians
                    .iter()
                    .map(|m| {
                        vec![
                            m.dut.clone(),
                            m.tool.to_owned(),
                            m.streams.to_string(),
                            format!("{:.2}", m.gbps),
                            format!("{:.2}–{:.2}", m.gbps_min, m.gbps_max),
                            f1(m.machine_cpu_pct_per_gbps),
                            m.baseline.clone().unwrap_or_else(|| "–".into()),
                            f3(m.vs_baseline_gbps),
                            f3(m.vs_baseline_cpu_per_gbps),
                        ]
                    })
                    .collect();
                report.table(
                    &[
                        "DUT",
                        "tool",
                        "streams per pair",
                        "Gbit/s, median",
                        "lowest–highest run",
                        "machine CPU % per Gbit/s, median",
                        "baseline",
                        "Gbit/s ÷ baseline's",
                        "CPU per Gbit/s ÷ baseline's",
                    ],
                    rows,
                );
            }
            let label = |r: &TcpRow| format!("{} {} ×{}", r.dut, r.tool, r.streams);
            let mut c = Chart::new("TCP throughput over time").x_label("time (s)").y_label("throughput (Gbit/s)");
            for r in &self.rows {
                let sum = if r.pairs > 1 { " sum" } else { "" };
                c = c.series(format!("{}{sum}", label(r)), r.m.gbps_over_time.clone());
                if r.pairs > 1 {
                    for p in &r.per_pair {
                        c = c.series(format!("{} pair {}", label(r), p.pair), p.gbps_over_time.clone());
                    }
                }
            }
            report.line_chart(c);
            let mut c = Chart::new("Machine CPU over time").x_label("time (s)").y_label("CPU busy (% of one core)");
            for r in &self.rows {
                c = c.series(label(r), r.m.machine_cpu_over_time.clone());
            }
            report.line_chart(c);
            let mut c = Chart::new("CPU per core over time").x_label("time (s)").y_label("core busy (%)");
            for r in &self.rows {
                let ncores = r.cpu.iter().map(|s| s.core_pct.len()).max().unwrap_or(0);
                for k in 0..ncores {
                    c = c.series(
                        format!("{} core {k}", label(r)),
                        r.cpu.iter().filter_map(|s| s.core_pct.get(k).map(|&v| (s.t_s, v))).collect(),
                    );
                }
            }
            report.line_chart(c);
            let mut c = Chart::new("DUT CPU over time").x_label("time (s)").y_label("CPU of the DUT's threads (% of one core)");
            for r in &self.rows {
                c = c.series(label(r), r.m.dut_cpu_over_time.clone());
            }
            report.line_chart(c);
            let per =
                |f: fn(&TcpRow) -> Option<f64>| self.rows.iter().map(move |r| (format!("{} ×{}", r.tool, r.streams), f(r).unwrap_or(0.0)));
            let mut by_dut: Vec<(String, Vec<(String, f64)>)> = Vec::new();
            for (r, b) in self.rows.iter().zip(per(|r| r.machine_cpu_pct_per_gbps)) {
                match by_dut.iter_mut().find(|(d, _)| *d == r.dut) {
                    Some((_, v)) => v.push(b),
                    None => by_dut.push((r.dut.clone(), vec![b])),
                }
            }
            if !by_dut.is_empty() {
                let mut c = Chart::new("Machine CPU per Gbit/s").x_label("run").y_label("% of one core per Gbit/s (lower is better)");
                for (d, bars) in by_dut {
                    c = c.bars(d, bars);
                }
                report.bar_chart(c);
            }
        }
        if !self.transfers.is_empty() {
            report.heading("File transfers");
            report.para("iperf3 -n: every pair transfers the size at once, one connection each; completion time at the receiver.");
            let rows = self
                .transfers
                .iter()
                .map(|t| {
                    vec![
                        t.dut.clone(),
                        size_text(t.bytes),
                        t.completion_s.iter().map(|s| format!("{s:.2}")).collect::<Vec<_>>().join(" / "),
                        format!("{:.2}", t.all_done_s),
                        format!("{:.2}", t.gbps),
                        t.retransmits.to_string(),
                        format!("{:.0}", t.dut_cpu_pct),
                        format!("{:.0}", t.machine_cpu_pct),
                    ]
                })
                .collect();
            report.table(
                &[
                    "DUT",
                    "size per pair",
                    "completion s per pair",
                    "all done s",
                    "Gbit/s (all pairs)",
                    "retransmits",
                    "DUT CPU %",
                    "machine CPU %",
                ],
                rows,
            );
            let mut c = Chart::new("File transfer completion time").x_label("size per pair").y_label("seconds until all pairs finished");
            let mut duts: Vec<&str> = Vec::new();
            for t in &self.transfers {
                if !duts.contains(&t.dut.as_str()) {
                    duts.push(&t.dut);
                }
            }
            for d in duts {
                c = c.bars(d, self.transfers.iter().filter(|t| t.dut == d).map(|t| (size_text(t.bytes), t.all_done_s)).collect());
            }
            report.bar_chart(c);
        }
        if !self.checks.is_empty() {
            report.heading("What the receiver saw (probe transfer, tshark)");
            report.para(
                "Captured on the first receiver's interface (its GRO off for the probe). A TCP checksum that holds only the \
                 sender's pseudo-header sum is the offload's partial checksum, which the receiver's stack trusts on veth \
                 (the GSO skb arrives as it left); a DUT that copies frames must deliver full checksums. TcpInCsumErrors: \
                 segments the receiver's stack dropped.",
            );
            let rows = self
                .checks
                .iter()
                .map(|c| {
                    vec![
                        c.dut.clone(),
                        size_text(c.bytes),
                        format!("{:.2}", c.seconds),
                        c.frames.to_string(),
                        c.largest_frame.to_string(),
                        c.bad_ip_checksums.to_string(),
                        c.bad_tcp_checksums.to_string(),
                        c.partial_tcp_checksums.to_string(),
                        format!("{} ({} spurious)", c.retransmissions, c.spurious_retransmissions),
                        c.lost_segments.to_string(),
                        format!("{} / {}", c.sender_retrans_segs, c.receiver_duplicates),
                        c.receiver_csum_errors.to_string(),
                        c.dut_if_drops.to_string(),
                    ]
                })
                .collect();
            report.table(
                &[
                    "DUT",
                    "bytes",
                    "seconds",
                    "frames",
                    "largest frame",
                    "bad IP csum",
                    "bad TCP csum",
                    "partial TCP csum",
                    "retransmissions",
                    "lost before the receiver",
                    "sender RetransSegs / receiver D-SACKs",
                    "TcpInCsumErrors",
                    "DUT if drops",
                ],
                rows,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf2_csv_sums_and_summary() {
        let csv = "20261122,198.18.0.1,5000,198.18.0.2,5001,-1,0.0-1.0,1250000000,10000000000\n\
                   20261122,198.18.0.1,5000,198.18.0.2,5001,3,0.0-1.0,625000000,5000000000\n\
                   20261122,198.18.0.1,5000,198.18.0.2,5001,-1,1.0-2.0,1500000000,12000000000\n\
                   20261122,198.18.0.1,5000,198.18.0.2,5001,-1,0.0-2.0,2750000000,11000000000\n";
        let (s, mean) = parse_iperf2(csv, 1.0);
        assert_eq!(s, vec![(1.0, 10.0), (2.0, 12.0)]);
        assert!((mean - 11.0).abs() < 1e-9);
    }

    #[test]
    fn iperf2_intervals_longer_than_a_second() {
        // -i 5 over 10 s: two 5 s intervals and the 10 s summary.
        let csv = "1,198.18.0.1,5000,198.18.0.2,5001,-1,0.0-5.0,1,10000000000\n\
                   1,198.18.0.1,5000,198.18.0.2,5001,-1,5.0-10.0,1,12000000000\n\
                   1,198.18.0.1,5000,198.18.0.2,5001,-1,0.0-10.0,1,11000000000\n";
        let (s, mean) = parse_iperf2(csv, 5.0);
        assert_eq!(s, vec![(5.0, 10.0), (10.0, 12.0)]);
        assert!((mean - 11.0).abs() < 1e-9);
    }

    #[test]
    fn iperf21_csv_without_sum_lines() {
        // iperf 2.1.8, -P 2: per-stream lines only.
        let csv = "20261122063107,127.0.0.1,35590,127.0.0.1,5001,2,0.0-1.0,1535770684,12286165472\n\
                   20261122063107,127.0.0.1,35586,127.0.0.1,5001,1,0.0-1.0,1432748092,11461984736\n\
                   20261122063108,127.0.0.1,35586,127.0.0.1,5001,1,1.0-2.0,865337344,6922698752\n\
                   20261122063108,127.0.0.1,35590,127.0.0.1,5001,2,1.0-2.0,2813722624,22509780992\n\
                   20261122063108,127.0.0.1,35586,127.0.0.1,5001,1,0.0-2.0,2298216508,9132522887\n\
                   20261122063108,127.0.0.1,35590,127.0.0.1,5001,2,0.0-2.0,4349624380,17239027892\n";
        let (s, mean) = parse_iperf2(csv, 1.0);
        assert_eq!(s.len(), 2);
        assert!((s[0].1 - 23.748150208).abs() < 1e-6 && (s[1].1 - 29.432479744).abs() < 1e-6, "{s:?}");
        assert!((mean - 26.371550779).abs() < 1e-6);
    }

    #[test]
    fn iperf3_json_intervals() {
        let j = r#"{"intervals":[{"sum":{"end":1.0,"bits_per_second":2e10}},{"sum":{"end":2.0,"bits_per_second":3e10}}],
                   "end":{"sum_received":{"bits_per_second":2.5e10}}}"#;
        let (s, mean) = parse_iperf3(j).unwrap();
        assert_eq!(s, vec![(1.0, 20.0), (2.0, 30.0)]);
        assert!((mean - 25.0).abs() < 1e-9);
        assert!(parse_iperf3(r#"{"error":"unable to connect"}"#).unwrap_err().to_string().contains("unable"));
        assert!(parse_iperf3("").is_err(), "a killed client prints nothing");
    }

    #[test]
    fn iperf3_json_of_a_transfer() {
        // The end of `iperf3 -n 4M -J` (3.12), trimmed.
        let j = r#"{"intervals":[],"end":{"sum_sent":{"start":0,"end":0.0042,"seconds":0.0042,"bytes":4194304,
                   "bits_per_second":7.9e12,"retransmits":3,"sender":true},
                   "sum_received":{"start":0,"end":0.0125,"seconds":0.0125,"bytes":4194304,"bits_per_second":2.68e9,"sender":true}}}"#;
        let o = parse_iperf3_full(j).unwrap();
        assert_eq!((o.bytes, o.retransmits), (4194304, 3));
        assert!((o.seconds - 0.0125).abs() < 1e-12 && (o.gbps - 2.68).abs() < 1e-9, "{o:?}");
    }

    #[test]
    fn pairs_sum_per_interval() {
        let a = ClientOut { series: vec![(1.0, 2.0), (2.0, 3.0)], gbps: 2.5, ..ClientOut::default() };
        let b = ClientOut { series: vec![(1.0, 1.0), (2.0, 1.5)], gbps: 1.25, ..ClientOut::default() };
        let cpu = vec![
            CpuSample { t_s: 1.0, machine_pct: 150.0, dut_pct: 90.0, ..CpuSample::default() },
            CpuSample { t_s: 2.0, machine_pct: 170.0, dut_pct: 100.0, ..CpuSample::default() },
        ];
        let m = summed(&[a, b], &cpu);
        assert_eq!(m.gbps_over_time, vec![(1.0, 3.0), (2.0, 4.5)]);
        assert!((m.gbps - 3.75).abs() < 1e-12);
        assert_eq!((m.machine_cpu_pct, m.dut_cpu_pct), (160.0, 95.0));
        assert_eq!(per_gbps(m.machine_cpu_pct, m.gbps), Some(160.0 / 3.75));
        assert_eq!(per_gbps(100.0, 0.0), None);
    }

    #[test]
    fn medians_take_each_runs_ratio_to_the_baseline_of_that_run() {
        let row = |dut: &str, run: u32, gbps: f64, cpu: f64| TcpRow {
            test: "tcp",
            dut: dut.into(),
            tool: "iperf3",
            streams: 1,
            run,
            m: TcpMeasure { gbps, ..TcpMeasure::default() },
            machine_cpu_pct_per_gbps: Some(cpu),
            ..TcpRow::default()
        };
        // Run 3 is the bridge's best and fastpath's best, so the median of the ratios (1.1)
        // is not the ratio of the medians (11 / 10).
        let rows = [
            row("fastpath-tc", 1, 11.0, 8.0),
            row("linux-bridge", 1, 10.0, 8.0),
            row("linux-bridge", 2, 9.0, 9.0),
            row("fastpath-tc", 2, 9.0, 9.0),
            row("fastpath-tc", 3, 14.0, 7.0),
            row("linux-bridge", 3, 12.0, 7.0),
        ];
        let m = medians(&rows, Some("linux-bridge"));
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].dut.as_str(), m[0].runs, m[0].gbps, m[0].gbps_min, m[0].gbps_max), ("fastpath-tc", 3, 11.0, 9.0, 14.0));
        assert!((m[0].vs_baseline_gbps.unwrap() - 1.1).abs() < 1e-12, "{:?}", m[0]);
        assert_eq!(m[0].vs_baseline_cpu_per_gbps, Some(1.0));
        assert_eq!((m[1].dut.as_str(), m[1].gbps, m[1].vs_baseline_gbps), ("linux-bridge", 10.0, Some(1.0)));
        let none = medians(&rows, None);
        assert_eq!(none[0].vs_baseline_gbps, None, "no baseline, no ratio");
        assert_eq!(median(vec![3.0, 1.0]), Some(3.0), "the upper middle of an even count");
        assert_eq!(median(vec![]), None);
    }

    #[test]
    fn later_intervals_are_judged_against_the_first() {
        let v = VsFirst::of(&[(60.0, 10.0), (120.0, 9.0), (180.0, 10.8), (240.0, 9.5)]).unwrap();
        assert_eq!((v.first_gbps, v.min_at_s), (10.0, 120.0));
        assert!((v.min_ratio - 0.9).abs() < 1e-12 && (v.last_ratio - 0.95).abs() < 1e-12, "{v:?}");
        assert!((v.max_deviation - 0.1).abs() < 1e-12, "the lowest (-10 %) outweighs the highest (+8 %): {v:?}");
        assert_eq!(VsFirst::of(&[(60.0, 10.0)]), None, "one interval: nothing to compare");
        assert_eq!(VsFirst::of(&[(60.0, 0.0), (120.0, 1.0)]), None, "a first interval of nothing");
        assert_eq!(VsFirst::of(&[]), None);
    }
    #[test]
    fn sizes_parse_in_binary_multiples_like_iperf3() {
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("16g").unwrap(), 16 << 30);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert!(parse_size("1x").unwrap_err().contains("\"1x\""));
        assert!(parse_size("G").unwrap_err().contains("not a number"));
        assert!(parse_size("0").unwrap_err().contains("positive"));
        assert!(parse_size("99999999999T").is_err());
        for b in [1 << 30, 16 << 30, 3 << 20, 1000, 1 << 40] {
            assert_eq!(parse_size(&size_text(b)).unwrap(), b);
        }
        assert_eq!(size_text(4 << 20), "4M");
        assert_eq!(size_text(1536), "1536");
    }

    #[test]
    fn report_draws_what_was_measured() {
        let check = CheckRow { test: "tcp", measurement: "check", dut: "fastpath".into(), frames: 2068, ..CheckRow::default() };
        let only_check = TcpResults { checks: vec![check.clone()], pairs: 1, ..TcpResults::default() };
        let mut r = Report::new("t");
        only_check.add_to(&mut r);
        let html = r.to_html();
        assert!(html.contains("What the receiver saw") && html.contains("2068"), "the check table");
        assert!(!html.contains("TCP throughput over time") && !html.contains("File transfer completion time"), "no empty charts");
        let row = TcpRow {
            test: "tcp",
            dut: "linux-bridge".into(),
            tool: "iperf3",
            streams: 1,
            pairs: 2,
            m: TcpMeasure { gbps: 10.0, gbps_over_time: vec![(5.0, 10.0)], ..TcpMeasure::default() },
            per_pair: vec![
                PairMeasure { pair: 0, gbps: 5.0, gbps_over_time: vec![(5.0, 5.0)], retransmits: 0 },
                PairMeasure { pair: 1, gbps: 5.0, gbps_over_time: vec![(5.0, 5.0)], retransmits: 0 },
            ],
            machine_cpu_pct_per_gbps: Some(20.0),
            ..TcpRow::default()
        };
        let transfer = TransferRow {
            test: "tcp",
            measurement: "transfer",
            dut: "linux-bridge".into(),
            bytes: 1 << 30,
            all_done_s: 1.2,
            ..TransferRow::default()
        };
        let all = TcpResults { rows: vec![row], transfers: vec![transfer], checks: vec![check], pairs: 2, ..TcpResults::default() };
        let mut r = Report::new("t");
        all.add_to(&mut r);
        let html = r.to_html();
        for want in [
            "TCP throughput over time",
            "linux-bridge iperf3 ×1 sum",
            "linux-bridge iperf3 ×1 pair 1",
            "Machine CPU per Gbit/s",
            "File transfer completion time",
            "1G",
        ] {
            assert!(html.contains(want), "{want} missing");
        }
        let lines = all.json_lines();
        assert_eq!(lines.lines().count(), 3);
        assert!(lines.contains("\"measurement\":\"transfer\"") && lines.contains("\"per_pair\""));
    }

    #[test]
    fn capture_drops_from_tsharks_closing_lines() {
        let err = "Capturing on 'rcv0'\n ** (tshark:3399) [Main MESSAGE] -- Capture started.\ntshark: \n2049 packets captured\n12 packets dropped from rcv0\n";
        assert_eq!(capture_drops(err), 12);
        assert_eq!(capture_drops("Capturing on 'rcv0'\n0 packets captured\n"), 0);
    }

    #[test]
    fn snmp_counters_by_column_name() {
        let t = "Ip: Forwarding DefaultTTL InReceives\nIp: 2 64 1000\n\
                 Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n\
                 Tcp: 1 200 120000 -1 5 3 0 0 1 9000 8000 12 0 2 7\n";
        assert_eq!(snmp_counter(t, "Tcp", "InCsumErrors"), Some(7));
        assert_eq!(snmp_counter(t, "Tcp", "RetransSegs"), Some(12));
        assert_eq!(snmp_counter(t, "Ip", "InReceives"), Some(1000));
        assert_eq!(snmp_counter(t, "Tcp", "Nope"), None);
        assert_eq!(snmp_counter(t, "Udp", "InErrors"), None);
        assert_eq!(snmp_counter(t, "Tcp", "MaxConn"), None, "-1 is not a counter");
    }

    #[test]
    fn partial_checksum_is_the_folded_pseudo_header_sum() {
        use std::net::Ipv4Addr;
        // c612 + 0001 + c612 + 0002 + 0006 + 05c8 = 0x191f5, folded 0x91f6.
        assert_eq!(partial_tcp_csum(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2), 1480), 0x91f6);
        // A TCP segment of zeros with this pseudo-header: its full checksum is the complement.
        let p = partial_tcp_csum(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 20);
        let mut sum = 0x0a00u32 + 0x0001 + 0x0a00 + 0x0002 + 6 + 20;
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(p as u32, sum);
        // A 64 KB GSO frame's length carries into the fold.
        let big = partial_tcp_csum(Ipv4Addr::new(255, 255, 255, 255), Ipv4Addr::new(255, 255, 255, 255), 65515);
        assert_eq!(big, {
            let mut s = 4 * 0xffffu32 + 6 + 65515;
            while s > 0xffff {
                s = (s & 0xffff) + (s >> 16);
            }
            s as u16
        });
    }

    #[test]
    fn each_dut_is_set_up_for_offloaded_tcp() {
        let mut fp = DutConfig::new(DutKind::Fastpath);
        let (c, note) = dut_setup(&fp, true);
        assert_eq!(c.fastpath_cmd.iter().filter(|a| *a == "--multi-buffer").count(), 1, "{:?}", c.fastpath_cmd);
        assert!(note.contains("multi-buffer"), "{note}");
        assert!(c.fastpath_cmd.windows(2).any(|w| w[0] == "--mode" && w[1] == "skb"), "{:?}", c.fastpath_cmd);
        fp.fastpath_cmd.push("--multi-buffer".into());
        fp.fastpath_cmd.push("--mode=native".into());
        assert!(!dut_setup(&fp, true).0.fastpath_cmd.contains(&"skb".to_owned()), "a --mode given stays");
        assert_eq!(dut_setup(&fp, true).0.fastpath_cmd.iter().filter(|a| *a == "--multi-buffer").count(), 1, "not twice");
        assert!(!dut_setup(&DutConfig::new(DutKind::Fastpath), false).0.fastpath_cmd.contains(&"--multi-buffer".to_owned()));
        let (x, note) = dut_setup(&DutConfig::new(DutKind::FastpathXdp), true);
        assert!(x.fastpath_cmd.windows(2).any(|w| w[0] == "--mode" && w[1] == "skb"), "{:?}", x.fastpath_cmd);
        assert!(note.contains("65535"), "{note}");
        assert_eq!((dut_mtu(DutKind::FastpathXdp, true), dut_mtu(DutKind::FastpathXdp, false)), (65535, 1500));
        assert_eq!(
            (
                dut_mtu(DutKind::Fastpath, true),
                dut_mtu(DutKind::FastpathTc, true),
                dut_mtu(DutKind::LinuxBridge, true),
                dut_mtu(DutKind::OvsAfXdp, true)
            ),
            (1500, 1500, 1500, 1500)
        );
        let (t, note) = dut_setup(&DutConfig::new(DutKind::FastpathTc), true);
        assert!(t.fastpath_cmd.windows(2).any(|w| w[0] == "--mode" && w[1] == "tc"), "{:?}", t.fastpath_cmd);
        assert!(note.contains("bpf_redirect"), "{note}");
        let mut nat = DutConfig::new(DutKind::FastpathXdp);
        nat.fastpath_cmd.push("--mode=native".into());
        assert!(dut_setup(&nat, true).1.contains("native"));
    }

    #[test]
    fn client_limits_are_bounded_by_the_load() {
        assert_eq!(client_limit_s(Load::Seconds(600)), 630);
        assert_eq!(client_limit_s(Load::Bytes(4 << 20)), 30);
        // 16 GiB at no less than 100 Mbit/s.
        assert_eq!(client_limit_s(Load::Bytes(16 << 30)), (16u64 << 30) * 8 / 100_000_000 + 30);
    }

    proptest::proptest! {
        /// What iperf, /proc and the command line hand the parsers is never trusted: any text
        /// gives a value or an error, never a panic.
        #[test]
        fn parsers_never_panic_on_any_text(text in ".{0,400}", lines in proptest::collection::vec("[-0-9a-z:,. ]{0,60}", 0..8)) {
            let joined = lines.join("\n");
            for t in [text.as_str(), joined.as_str()] {
                let _ = parse_iperf3_full(t);
                let _ = parse_iperf2(t, 1.0);
                let _ = parse_size(t);
                let _ = snmp_counter(t, "Tcp", "InCsumErrors");
                let _ = super::super::tcp_cpu::parse_proc_stat(t);
                let _ = super::super::tcp_cpu::parse_task_stat(t);
            }
        }
    }

    #[test]
    fn bad_configs_are_refused_before_anything_starts() {
        let base = TcpConfig { duts: vec![DutConfig::new(DutKind::LinuxBridge)], ..TcpConfig::default() };
        let err = |c: TcpConfig| run(&c, &mut |_| {}).unwrap_err().to_string();
        assert!(err(TcpConfig { duts: vec![], ..base.clone() }).contains("at least one DUT"));
        assert!(err(TcpConfig { pairs: 0, ..base.clone() }).contains("0 pairs"));
        assert!(err(TcpConfig { pairs: 65, ..base.clone() }).contains("65 pairs"));
        assert!(err(TcpConfig { interval_s: 0, ..base.clone() }).contains("interval 0"));
        assert!(err(TcpConfig { interval_s: 11, ..base.clone() }).contains("interval 11"));
        assert!(err(TcpConfig { streams: vec![0], ..base.clone() }).contains("0 streams"));
    }
}
