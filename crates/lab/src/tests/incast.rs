//! The `incast` test: N senders × M TCP flows each send a fixed amount into one receiver
//! behind an egress shaped to R, all starting at once — the switch reports' TCP incast
//! (16 senders × 16 flows into one port, where the aggregate and the job's completion time
//! show how well the buffer handles the synchronised start).
//!
//! ```text
//!  sender i: M TCP connections, bytes/M each ─▶ d_i ─▶ [DUT] ─▶ d_N (R, buffer B) ─▶ r0: one reader per connection
//!  (every connection opened first, then all start writing together)      sampled every 100 ms
//! ```
//!
//! The transfers are the lab's own (std TCP sockets in the namespaces), not iperf3: iperf3's
//! `-n` ends a test when the client has *written* its bytes, and the server then closes its
//! sockets with data still in flight (a 10 MB, 2-stream check on loopback: the receiver
//! counted 2.6 MB), so neither the job's completion nor the bytes delivered can come from it.
//! Here a connection is done when the receiver has read everything and the sender's EOF; the
//! job is done when the last connection is. Reported per DUT and N:
//! - the aggregate and each flow's received rate over time (100 ms samples, 0.5 s intervals);
//! - the job completion time against the ideal `N × bytes × 8 / R` (payload only: TCP/IP
//!   and Ethernet headers take another ~4.6 % of R at a 1500-byte MTU);
//! - each flow's rate (its bytes over its own completion time) and Jain's index over them;
//! - retransmitted segments (`TcpRetransSegs` of each sender's namespace, `/proc/net/snmp`),
//!   CE marks the senders were told of (`TCPDeliveredCE`, `/proc/net/netstat`; with `--ecn`),
//!   and the DUT's drops (tc's qdisc counters, or fastpath's drop counters by reason).
//!
//! The hosts send without TSO/GSO/checksum offload (fastpath forwards frames as they are; the
//! bridge gets the same frames) and, with `ecn`, request ECN (`net.ipv4.tcp_ecn = 1`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::switch::{jain_index, Shaping, Switch, SwitchConfig, SwitchDut};
use crate::fanin_topo::{FaninConfig, FaninTopo, RECEIVER_IP};
use crate::report::{Chart, Report};
use crate::topo::{self, ns_exec};
use crate::LabError;

/// The receiver's TCP port.
pub const INCAST_PORT: u16 = 5301;

/// Configuration of an incast run.
#[derive(Clone, Debug)]
pub struct IncastConfig {
    /// DUTs, each in its own topology.
    pub duts: Vec<SwitchDut>,
    /// Sender counts N.
    pub senders: Vec<usize>,
    /// TCP connections per sender, M.
    pub flows_per_sender: usize,
    /// Bytes each sender transfers (split evenly over its M connections).
    pub bytes_per_sender: u64,
    /// Shaped rate and buffer of the receiver port.
    pub shaping: Shaping,
    /// The whole job must end within this multiple of its ideal time, plus 20 s.
    pub timeout_factor: f64,
    /// How to start the DUTs.
    pub switch: SwitchConfig,
}

impl Default for IncastConfig {
    fn default() -> IncastConfig {
        IncastConfig {
            duts: SwitchDut::ALL.to_vec(),
            senders: vec![2, 4, 8, 16],
            flows_per_sender: 2,
            bytes_per_sender: 8 << 20,
            shaping: Shaping::new(100_000_000, 1 << 20),
            timeout_factor: 4.0,
            switch: SwitchConfig::default(),
        }
    }
}

/// One flow of an incast job.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Flow {
    /// Sender index.
    pub sender: usize,
    /// Bytes the receiver read.
    pub bytes: u64,
    /// Seconds from the job's start to the receiver's EOF of this flow.
    pub completion_s: f64,
    /// `bytes × 8 / completion_s`, Mbit/s.
    pub mbps: f64,
    /// Received Mbit/s per interval: (interval end s, Mbit/s).
    pub mbps_over_time: Vec<(f64, f64)>,
}

/// One incast result (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IncastRow {
    /// `incast`.
    pub test: &'static str,
    /// DUT name.
    pub dut: String,
    /// What shaped the receiver port.
    pub shaper: String,
    /// Senders N.
    pub senders: usize,
    /// Connections per sender M.
    pub flows_per_sender: usize,
    /// Bytes per sender.
    pub bytes_per_sender: u64,
    /// R, bits per second.
    pub rate_bps: u64,
    /// Buffer B (the Linux port's FIFO and fastpath's shared buffer), bytes.
    pub buffer_bytes: u64,
    /// The job's completion time: the last flow's, seconds.
    pub completion_s: f64,
    /// `N × bytes × 8 / R`, seconds.
    pub ideal_s: f64,
    /// `completion_s / ideal_s`.
    pub completion_vs_ideal: f64,
    /// Mean aggregate received rate over the job, Mbit/s.
    pub aggregate_mbps: f64,
    /// Aggregate received Mbit/s per interval.
    pub aggregate_over_time: Vec<(f64, f64)>,
    /// Jain's index over the flows' rates.
    pub jain: f64,
    /// Retransmitted segments, all senders.
    pub retransmits: u64,
    /// Segments delivered with CE that the senders learnt of (ECN echo), all senders.
    pub ecn_ce: u64,
    /// The DUT's drops by reason during this job.
    pub dut_drops: BTreeMap<String, u64>,
    /// Every flow.
    pub flows: Vec<Flow>,
}

/// Results of an incast run.
#[derive(Clone, Debug, Default)]
pub struct IncastResults {
    /// One per (N, DUT).
    pub rows: Vec<IncastRow>,
    /// DUTs that could not run, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// The value of `field` in a `/proc/net/snmp` or `/proc/net/netstat` table of `group`
/// (`Tcp:`, `TcpExt:`): a header line of names followed by a line of values.
pub fn proc_net_counter(text: &str, group: &str, field: &str) -> Option<u64> {
    let lines: Vec<&str> = text.lines().collect();
    for w in lines.windows(2) {
        let (names, values) = (w[0], w[1]);
        if names.starts_with(group) && values.starts_with(group) && names.split_whitespace().next() == Some(group) {
            let i = names.split_whitespace().position(|n| n == field)?;
            return values.split_whitespace().nth(i).and_then(|v| v.parse().ok());
        }
    }
    None
}

/// (retransmitted segments, CE deliveries) counted by the TCP stack of namespace `ns`.
fn tcp_counters(ns: &str) -> (u64, u64) {
    let snmp = ns_exec(ns, &["cat", "/proc/net/snmp"]).unwrap_or_default();
    let netstat = ns_exec(ns, &["cat", "/proc/net/netstat"]).unwrap_or_default();
    (proc_net_counter(&snmp, "Tcp:", "RetransSegs").unwrap_or(0), proc_net_counter(&netstat, "TcpExt:", "TCPDeliveredCE").unwrap_or(0))
}

/// Rates per interval from cumulative byte samples `(t, bytes)`: `(interval end, Mbit/s)`.
pub fn rates(samples: &[(f64, u64)], interval_s: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let (mut t0, mut b0) = (0.0, 0u64);
    let mut next = interval_s;
    for &(t, b) in samples {
        if t + 1e-9 >= next {
            let dt = t - t0;
            if dt > 0.0 {
                out.push((t, b.saturating_sub(b0) as f64 * 8.0 / dt / 1e6));
            }
            (t0, b0) = (t, b);
            next = t + interval_s;
        }
    }
    out
}

/// One connection at the receiver: who sent it, bytes read, when it ended.
struct RxFlow {
    sender: usize,
    bytes: AtomicU64,
    done_ns: AtomicU64,
}

/// Writes `bytes` on `c`, closes its sending side, and waits for the receiver's close (it has
/// read everything). Returns early when `stop` is set.
fn send_all(mut c: TcpStream, bytes: u64, stop: &AtomicBool) -> Result<(), LabError> {
    c.set_write_timeout(Some(Duration::from_millis(500)))?;
    let chunk = vec![0x5au8; 1 << 16];
    let mut left = bytes;
    while left > 0 {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let k = left.min(chunk.len() as u64) as usize;
        match c.write(&chunk[..k]) {
            Ok(w) => left -= w as u64,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(LabError::Io(format!("write: {e}"))),
        }
    }
    c.shutdown(Shutdown::Write)?;
    c.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut b = [0u8; 64];
    loop {
        match c.read(&mut b) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
            }
            Err(_) => return Ok(()),
        }
    }
}

/// A job's flows, its aggregate received rate per interval, and its ideal time in seconds.
type JobResult = (Vec<Flow>, Vec<(f64, f64)>, f64);

/// Runs one job through the started DUT of `t`; returns the flows and the aggregate series.
fn job(t: &FaninTopo, cfg: &IncastConfig, progress: &mut dyn FnMut(&str)) -> Result<JobResult, LabError> {
    let n = t.senders.len();
    let m = cfg.flows_per_sender.max(1);
    let per_flow = cfg.bytes_per_sender / m as u64;
    let ideal = (n as u64 * per_flow * m as u64) as f64 * 8.0 / cfg.shaping.rate_bps as f64;
    let timeout = Duration::from_secs_f64(ideal * cfg.timeout_factor + 20.0);
    let listener = topo::in_netns(&t.receiver.ns, || TcpListener::bind((RECEIVER_IP, INCAST_PORT)))??;
    listener.set_nonblocking(true)?;
    let flows: Mutex<Vec<std::sync::Arc<RxFlow>>> = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    let failed: Mutex<Option<LabError>> = Mutex::new(None);
    let go = Barrier::new(n * m + 1);
    let start: Mutex<Option<Instant>> = Mutex::new(None);
    let sender_of = |a: SocketAddr| t.senders.iter().position(|h| std::net::IpAddr::V4(h.ip) == a.ip()).unwrap_or(usize::MAX);
    let mut samples: Vec<(f64, Vec<u64>)> = Vec::new();
    std::thread::scope(|s| -> Result<(), LabError> {
        // Receiver: accept every connection and read each to EOF on its own thread.
        let acceptor = s.spawn(|| {
            let mut accepted = 0;
            let t0 = Instant::now();
            while accepted < n * m && !stop.load(Ordering::Relaxed) && t0.elapsed() < timeout {
                match listener.accept() {
                    Ok((mut c, from)) => {
                        accepted += 1;
                        let f =
                            std::sync::Arc::new(RxFlow { sender: sender_of(from), bytes: AtomicU64::new(0), done_ns: AtomicU64::new(0) });
                        flows.lock().unwrap_or_else(|p| p.into_inner()).push(f.clone());
                        let (start, stop) = (&start, &stop);
                        s.spawn(move || {
                            let _ = c.set_nonblocking(false);
                            let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                            let mut buf = vec![0u8; 1 << 16];
                            loop {
                                match c.read(&mut buf) {
                                    Ok(0) => break,
                                    Ok(k) => {
                                        f.bytes.fetch_add(k as u64, Ordering::Relaxed);
                                    }
                                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                                        if stop.load(Ordering::Relaxed) {
                                            break;
                                        }
                                    }
                                    Err(_) => break,
                                }
                            }
                            let t0 = *start.lock().unwrap_or_else(|p| p.into_inner());
                            let ns = t0.map_or(0, |t0| t0.elapsed().as_nanos() as u64);
                            f.done_ns.store(ns.max(1), Ordering::Relaxed);
                            let _ = c.shutdown(Shutdown::Both);
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(2)),
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        // Senders: M connections each, connected first; then everyone writes at the barrier.
        for h in &t.senders {
            for _ in 0..m {
                let (go, stop, failed) = (&go, &stop, &failed);
                s.spawn(move || {
                    // The socket is made in the sender's namespace; using it needs no namespace.
                    let sock = topo::in_netns(&h.ns, || {
                        TcpStream::connect_timeout(&SocketAddr::from((RECEIVER_IP, INCAST_PORT)), Duration::from_secs(5))
                    });
                    go.wait();
                    let r = match sock {
                        Ok(Ok(c)) => send_all(c, per_flow, stop),
                        Ok(Err(e)) => Err(LabError::Io(format!("sender {}: connect: {e}", h.ip))),
                        Err(e) => Err(e),
                    };
                    if let Err(e) = r {
                        stop.store(true, Ordering::Relaxed);
                        failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                    }
                });
            }
        }
        // Every sender thread is at the barrier once connected (or failed to connect).
        go.wait();
        let t0 = Instant::now();
        *start.lock().unwrap_or_else(|p| p.into_inner()) = Some(t0);
        let mut last_print = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let fl = flows.lock().unwrap_or_else(|p| p.into_inner()).clone();
            samples.push((t0.elapsed().as_secs_f64(), fl.iter().map(|f| f.bytes.load(Ordering::Relaxed)).collect()));
            let done = fl.len() == n * m && fl.iter().all(|f| f.done_ns.load(Ordering::Relaxed) > 0);
            if done || stop.load(Ordering::Relaxed) {
                break;
            }
            if t0.elapsed() > timeout || topo::interrupted() {
                stop.store(true, Ordering::Relaxed);
                let e = if topo::interrupted() {
                    LabError::Interrupted
                } else {
                    LabError::Io(format!("incast job not done after {:.0} s (ideal {ideal:.1} s)", timeout.as_secs_f64()))
                };
                failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                break;
            }
            if last_print.elapsed() > Duration::from_secs(5) {
                let got: u64 = fl.iter().map(|f| f.bytes.load(Ordering::Relaxed)).sum();
                progress(&format!(
                    "  {:.0} s: {:.1} of {:.1} MB received",
                    t0.elapsed().as_secs_f64(),
                    got as f64 / 1e6,
                    (per_flow * (n * m) as u64) as f64 / 1e6
                ));
                last_print = Instant::now();
            }
        }
        stop.store(true, Ordering::Relaxed);
        let _ = acceptor.join();
        Ok(())
    })?;
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let fl = flows.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::new();
    for (i, f) in fl.iter().enumerate() {
        let series: Vec<(f64, u64)> = samples.iter().map(|(t, v)| (*t, v.get(i).copied().unwrap_or(0))).collect();
        let bytes = f.bytes.load(Ordering::Relaxed);
        let done = f.done_ns.load(Ordering::Relaxed) as f64 / 1e9;
        out.push(Flow {
            sender: f.sender,
            bytes,
            completion_s: done,
            mbps: if done > 0.0 { bytes as f64 * 8.0 / done / 1e6 } else { 0.0 },
            mbps_over_time: rates(&series, 0.5),
        });
    }
    out.sort_by_key(|f| f.sender);
    let total: Vec<(f64, u64)> = samples.iter().map(|(t, v)| (*t, v.iter().sum())).collect();
    Ok((out, rates(&total, 0.5), ideal))
}

/// Runs the incast test for every N and DUT.
///
/// # Errors
/// [`LabError::NotRoot`], [`LabError::Interrupted`], [`LabError::Config`], [`LabError::Unavailable`]
/// without `ethtool`/`tc`, or a failing job (a connection refused, the job's timeout).
pub fn run(cfg: &IncastConfig, progress: &mut dyn FnMut(&str)) -> Result<IncastResults, LabError> {
    if cfg.duts.is_empty() || cfg.senders.is_empty() || cfg.flows_per_sender == 0 || cfg.bytes_per_sender == 0 {
        return Err(LabError::Config("incast needs at least one DUT, sender count, flow and byte".into()));
    }
    if !fastpath_io::sys::is_root() {
        return Err(LabError::NotRoot);
    }
    super::switch::need_programs(&["ethtool", "tc"])?;
    for ns in topo::cleanup_stale() {
        progress(&format!("removed {ns}, left behind by a lab run that no longer exists"));
    }
    let mut out = IncastResults::default();
    for &n in &cfg.senders {
        for &kind in &cfg.duts {
            let name = kind.name();
            let t = FaninTopo::create(&FaninConfig { senders: n, mtu: 1500, dut_gro: false, host_offloads: false })?;
            let ecn = if cfg.shaping.ecn { "1" } else { "2" };
            for h in t.hosts() {
                ns_exec(&h.ns, &["sysctl", "-qw", &format!("net.ipv4.tcp_ecn={ecn}")])?;
            }
            let mut sw = match Switch::start(&t, kind, &cfg.shaping, &cfg.switch) {
                Ok(sw) => sw,
                Err(e @ LabError::Unavailable { .. }) => {
                    progress(&format!("{name}: skipped: {e}"));
                    out.skipped.push((name.to_owned(), e.to_string()));
                    continue;
                }
                Err(e) => return Err(e),
            };
            let m = cfg.flows_per_sender;
            progress(&format!(
                "{name} {n}×{m} flows, {:.1} MB per sender: started ({}), R {} Mbit/s, buffer {} B",
                cfg.bytes_per_sender as f64 / 1e6,
                sw.shaper,
                cfg.shaping.rate_bps / 1_000_000,
                cfg.shaping.buffer_bytes
            ));
            let before: Vec<(u64, u64)> = t.senders.iter().map(|h| tcp_counters(&h.ns)).collect();
            let (flows, aggregate, ideal) = job(&t, cfg, progress)?;
            let after: Vec<(u64, u64)> = t.senders.iter().map(|h| tcp_counters(&h.ns)).collect();
            let mut drops = sw.drops();
            sw.stop();
            if kind == SwitchDut::Fastpath {
                drops = sw.drops();
            }
            let row = row(name, &sw.shaper, cfg, n, flows, aggregate, ideal, &before, &after, drops);
            progress(&format!(
                "{name} {n}×{m}: done in {:.2} s ({:.2} × ideal {:.2} s), {:.1} Mbit/s, Jain {:.4}, {} retransmits, {} CE, DUT drops {:?}",
                row.completion_s,
                row.completion_vs_ideal,
                row.ideal_s,
                row.aggregate_mbps,
                row.jain,
                row.retransmits,
                row.ecn_ce,
                row.dut_drops
            ));
            out.rows.push(row);
            drop(sw);
            drop(t);
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn row(
    dut: &str,
    shaper: &str,
    cfg: &IncastConfig,
    n: usize,
    flows: Vec<Flow>,
    aggregate: Vec<(f64, f64)>,
    ideal: f64,
    before: &[(u64, u64)],
    after: &[(u64, u64)],
    dut_drops: BTreeMap<String, u64>,
) -> IncastRow {
    let completion = flows.iter().map(|f| f.completion_s).fold(0.0, f64::max);
    let bytes: u64 = flows.iter().map(|f| f.bytes).sum();
    let rates: Vec<f64> = flows.iter().map(|f| f.mbps).collect();
    let delta = |k: fn(&(u64, u64)) -> u64| after.iter().zip(before).map(|(a, b)| k(a).saturating_sub(k(b))).sum();
    IncastRow {
        test: "incast",
        dut: dut.to_owned(),
        shaper: shaper.to_owned(),
        senders: n,
        flows_per_sender: cfg.flows_per_sender,
        bytes_per_sender: cfg.bytes_per_sender,
        rate_bps: cfg.shaping.rate_bps,
        buffer_bytes: cfg.shaping.buffer_bytes,
        completion_s: completion,
        ideal_s: ideal,
        completion_vs_ideal: if ideal > 0.0 { completion / ideal } else { 0.0 },
        aggregate_mbps: if completion > 0.0 { bytes as f64 * 8.0 / completion / 1e6 } else { 0.0 },
        aggregate_over_time: aggregate,
        jain: jain_index(&rates),
        retransmits: delta(|x| x.0),
        ecn_ce: delta(|x| x.1),
        dut_drops,
        flows,
    }
}

impl IncastResults {
    /// One JSON object per line per (N, DUT).
    pub fn json_lines(&self) -> String {
        super::json_lines(&self.rows)
    }

    /// Adds the table, completion time against N, the aggregate over time and the per-flow
    /// rates over time of the largest N.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("TCP incast: N senders × M flows into one shaped port");
        report.para(
            "Every sender opens its connections, then all write their bytes at once into one receiver behind an egress \
             shaped to R. Completion time is when the receiver has read the last byte of the last flow; the ideal is the \
             payload at R (headers take ~4.6 % more). Targets: Jain ≥ 0.95, completion within 10 % of the ideal and no \
             slower than Linux.",
        );
        for (d, why) in &self.skipped {
            report.para(format!("{d} skipped: {why}"));
        }
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let drops: Vec<String> = r.dut_drops.iter().map(|(k, v)| format!("{k} {v}")).collect();
                vec![
                    r.dut.clone(),
                    format!("{}×{}", r.senders, r.flows_per_sender),
                    format!("{:.2}", r.completion_s),
                    format!("{:.2}", r.ideal_s),
                    format!("{:.3}", r.completion_vs_ideal),
                    format!("{:.1}", r.aggregate_mbps),
                    format!("{:.4}", r.jain),
                    r.retransmits.to_string(),
                    r.ecn_ce.to_string(),
                    if drops.is_empty() { "0".into() } else { drops.join(", ") },
                ]
            })
            .collect();
        report.table(
            &["DUT", "N×M", "completion s", "ideal s", "÷ ideal", "aggregate Mbit/s", "Jain", "retransmits", "CE", "DUT drops"],
            rows,
        );
        let mut duts: Vec<&str> = self.rows.iter().map(|r| r.dut.as_str()).collect();
        duts.sort_unstable();
        duts.dedup();
        let mut c = Chart::new("Job completion time ÷ ideal").x_label("senders N").y_label("completion ÷ (bytes × 8 / R)");
        let mut a = Chart::new("Aggregate received rate over time").x_label("time (s)").y_label("Mbit/s");
        for d in &duts {
            c = c.series(*d, self.rows.iter().filter(|r| r.dut == *d).map(|r| (r.senders as f64, r.completion_vs_ideal)).collect());
            for r in self.rows.iter().filter(|r| r.dut == *d) {
                a = a.series(format!("{d} N={}", r.senders), r.aggregate_over_time.clone());
            }
        }
        report.line_chart(c);
        report.line_chart(a);
        let max_n = self.rows.iter().map(|r| r.senders).max().unwrap_or(0);
        for r in self.rows.iter().filter(|r| r.senders == max_n) {
            let mut f = Chart::new(format!("{} {}×{}: each flow's rate over time", r.dut, r.senders, r.flows_per_sender))
                .x_label("time (s)")
                .y_label("Mbit/s");
            for (i, fl) in r.flows.iter().enumerate() {
                f = f.series(format!("s{} #{i}", fl.sender), fl.mbps_over_time.clone());
            }
            report.line_chart(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tables_are_read_by_name() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin ActiveOpens RetransSegs InErrs\nTcp: 1 200 4 17 0\nUdp: InDatagrams\nUdp: 5\n";
        assert_eq!(proc_net_counter(snmp, "Tcp:", "RetransSegs"), Some(17));
        assert_eq!(proc_net_counter(snmp, "Udp:", "InDatagrams"), Some(5));
        assert_eq!(proc_net_counter(snmp, "Tcp:", "Nope"), None);
        let netstat = "TcpExt: SyncookiesSent TCPDeliveredCE\nTcpExt: 0 42\nIpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(proc_net_counter(netstat, "TcpExt:", "TCPDeliveredCE"), Some(42));
        // The real tables of this machine parse.
        let real = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
        if !real.is_empty() {
            assert!(proc_net_counter(&real, "Tcp:", "RetransSegs").is_some());
        }
    }

    #[test]
    fn rates_per_interval_from_cumulative_samples() {
        let s: Vec<(f64, u64)> = (1..=10).map(|i| (i as f64 * 0.1, i * 125_000)).collect();
        let r = rates(&s, 0.5);
        assert_eq!(r.len(), 2);
        assert!((r[0].0 - 0.5).abs() < 1e-9 && (r[0].1 - 10.0).abs() < 1e-9, "{r:?}");
        assert!((r[1].0 - 1.0).abs() < 1e-9 && (r[1].1 - 10.0).abs() < 1e-9, "{r:?}");
        assert!(rates(&[], 0.5).is_empty());
    }

    #[test]
    fn rows_summarise_the_job() {
        let cfg = IncastConfig { bytes_per_sender: 1_000_000, flows_per_sender: 1, ..IncastConfig::default() };
        let f = |sender, secs: f64| Flow { sender, bytes: 1_000_000, completion_s: secs, mbps: 8.0 / secs, mbps_over_time: Vec::new() };
        let r = row(
            "linux-tc",
            "htb+bfifo",
            &cfg,
            2,
            vec![f(0, 0.1), f(1, 0.2)],
            Vec::new(),
            0.16,
            &[(5, 0), (1, 0)],
            &[(9, 2), (1, 3)],
            BTreeMap::new(),
        );
        assert!((r.completion_s - 0.2).abs() < 1e-12);
        assert!((r.completion_vs_ideal - 1.25).abs() < 1e-12);
        assert!((r.aggregate_mbps - 80.0).abs() < 1e-9);
        assert!((r.jain - jain_index(&[80.0, 40.0])).abs() < 1e-12);
        assert_eq!((r.retransmits, r.ecn_ce), (4, 5));
    }
}
