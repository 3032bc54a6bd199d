//! TCP throughput through each DUT with iperf3 or iperf 2, with 1 and N parallel streams,
//! reported per second over time together with the CPU the DUT and the whole machine used.
//!
//! ```text
//!  gen ns: iperf client ──▶ gen0 ─▶ DUT ─▶ sink0 ──▶ sink ns: iperf server
//!  sampler thread, every second: /proc/stat (machine) and /proc/PID/stat of the DUT's processes
//! ```
//!
//! CPU is given in percent of one core (so 2 busy cores = 200 %). The DUT's share counts its
//! processes' user + system time; the untuned Linux bridge has no process of its own (it runs in
//! the senders' softirqs), so for it only the machine figure means something.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::dut::{Dut, DutConfig, DutKind};
use crate::report::{Chart, Report};
use crate::topo::{self, run_cmd, TopoConfig, Topology};
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
    /// Parallel stream counts, e.g. `[1, 4]`.
    pub streams: Vec<u32>,
    /// Seconds per run.
    pub duration_s: u32,
    /// Programs to run.
    pub tools: Vec<TcpTool>,
}

impl Default for TcpConfig {
    fn default() -> TcpConfig {
        TcpConfig { duts: Vec::new(), streams: vec![1, 4], duration_s: 10, tools: vec![TcpTool::Iperf3] }
    }
}

/// One TCP result (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TcpRow {
    /// Test name, `tcp`.
    pub test: &'static str,
    /// DUT name.
    pub dut: String,
    /// `iperf3` or `iperf2`.
    pub tool: &'static str,
    /// Parallel streams.
    pub streams: u32,
    /// Throughput and CPU (flattened: `gbps`, `gbps_over_time`, `dut_cpu_pct`, …).
    #[serde(flatten)]
    pub m: TcpMeasure,
}

/// Throughput and CPU of one iperf run, shared by the `tcp` and `overlay` rows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TcpMeasure {
    /// Mean throughput over the run, Gbps.
    pub gbps: f64,
    /// Throughput per interval: (seconds since start, Gbps).
    pub gbps_over_time: Vec<(f64, f64)>,
    /// Mean CPU of the DUT's processes, % of one core.
    pub dut_cpu_pct: f64,
    /// Mean CPU of the machine, % of one core.
    pub machine_cpu_pct: f64,
    /// DUT CPU per second: (seconds, %).
    pub dut_cpu_over_time: Vec<(f64, f64)>,
    /// Machine CPU per second: (seconds, %).
    pub machine_cpu_over_time: Vec<(f64, f64)>,
}

/// Results of a TCP run.
#[derive(Clone, Debug, Default)]
pub struct TcpResults {
    /// One per (DUT, tool, streams).
    pub rows: Vec<TcpRow>,
    /// DUTs that could not run, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// Machine CPU counters: (busy ticks, total ticks) from the first line of `/proc/stat`.
fn machine_ticks() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = s.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

/// User + system ticks of a process (all its threads), from `/proc/PID/stat` fields 14 and 15.
fn proc_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may contain spaces; fields after it start after the last ')'.
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let g = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    g(11) + g(12) // utime, stime are fields 14, 15 overall = 12th, 13th after the ')'
}

fn ncpus() -> f64 {
    std::thread::available_parallelism().map(|n| n.get() as f64).unwrap_or(1.0)
}

/// Samples machine and DUT CPU once a second until `stop`; returns (t, dut %, machine %).
fn sample_cpu(pids: &[u32], stop: &AtomicBool) -> Vec<(f64, f64, f64)> {
    let hz = 100.0; // USER_HZ on Linux
    let t0 = Instant::now();
    let mut out = Vec::new();
    let mut last_m = machine_ticks();
    let mut last_p: u64 = pids.iter().map(|&p| proc_ticks(p)).sum();
    let mut last_t = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1000));
        let m = machine_ticks();
        let p: u64 = pids.iter().map(|&p| proc_ticks(p)).sum();
        let dt = last_t.elapsed().as_secs_f64();
        last_t = Instant::now();
        let machine = if m.1 > last_m.1 { (m.0 - last_m.0) as f64 / (m.1 - last_m.1) as f64 * ncpus() * 100.0 } else { 0.0 };
        let dut = p.saturating_sub(last_p) as f64 / hz / dt * 100.0;
        out.push((t0.elapsed().as_secs_f64(), dut, machine));
        last_m = m;
        last_p = p;
    }
    out
}

/// Parses iperf3 `-J` output into (interval end s, Gbps) and the mean Gbps at the receiver.
fn parse_iperf3(json: &str) -> Result<(Vec<(f64, f64)>, f64), LabError> {
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
    let mean = v["end"]["sum_received"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e9;
    Ok((series, mean))
}

/// Parses iperf 2 `-y C` output: one line per stream and interval (iperf 2.1 prints no sum
/// lines in CSV; older versions print them with stream id -1, and then only those are used),
/// summed per interval; the whole-run lines (longer than an interval) give the mean.
fn parse_iperf2(csv: &str) -> (Vec<(f64, f64)>, f64) {
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
        if b - a > 1.5 {
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

/// Runs the TCP test for every DUT, tool and stream count.
///
/// # Errors
/// [`LabError::NotRoot`], [`LabError::Interrupted`], [`LabError::Unavailable`] when the tool is
/// not installed, or an iperf failure.
pub fn run(cfg: &TcpConfig, progress: &mut dyn FnMut(&str)) -> Result<TcpResults, LabError> {
    if cfg.duts.is_empty() || cfg.streams.is_empty() || cfg.tools.is_empty() {
        return Err(LabError::Config("tcp needs at least one DUT, stream count and tool".into()));
    }
    for tool in &cfg.tools {
        let prog = if *tool == TcpTool::Iperf3 { "iperf3" } else { "iperf" };
        if run_cmd("sh", &["-c", &format!("command -v {prog}")]).is_err() {
            return Err(LabError::Unavailable {
                dut: tool.name().into(),
                why: format!("`{prog}` is not installed (run scripts/setup-lab.sh as root)"),
            });
        }
    }
    for ns in topo::cleanup_stale() {
        progress(&format!("removed {ns}, left behind by a lab run that no longer exists"));
    }
    let mut out = TcpResults::default();
    for dc in &cfg.duts {
        let name = dc.name();
        let t = Topology::create(&TopoConfig::default())?;
        let Some(dut) = super::start_or_skip(&t, dc, &mut out.skipped, progress) else {
            continue;
        };
        if !matches!(dc.kind, DutKind::LinuxBridge | DutKind::LinuxBridgeTuned) {
            // A user-space DUT forwards frames as they are: the endpoints must put real checksums
            // in them and send MTU-sized segments (no checksum offload, TSO or GSO on veth). The
            // XDP datapath too: with the offloads on, the endpoints' 64 KB GSO segments never
            // reached its program (generic XDP on veth, also with multi-buffer support declared)
            // and iperf3 carried nothing (tried 2026-11-24).
            for (ns, ifn) in [(&t.gen_ns, t.gen_if), (&t.sink_ns, t.sink_if)] {
                topo::ns_exec(ns, &["ethtool", "-K", ifn, "tx", "off", "tso", "off", "gso", "off"])?;
            }
        }
        for &tool in &cfg.tools {
            for &n in &cfg.streams {
                if topo::interrupted() {
                    return Err(LabError::Interrupted);
                }
                let row = one(&t, &dut, tool, n, cfg.duration_s)?;
                progress(&format!(
                    "{name} {} {n} stream(s): {:.2} Gbps, DUT CPU {:.0} %, machine CPU {:.0} %",
                    tool.name(),
                    row.m.gbps,
                    row.m.dut_cpu_pct,
                    row.m.machine_cpu_pct
                ));
                out.rows.push(row);
            }
        }
    }
    Ok(out)
}

fn one(t: &Topology, dut: &Dut, tool: TcpTool, streams: u32, secs: u32) -> Result<TcpRow, LabError> {
    let m = measure(tool, &t.sink_ns, &t.gen_ns, &t.sink_ip.to_string(), streams, secs, &dut.pids())?;
    Ok(TcpRow { test: "tcp", dut: dut.kind().name().to_owned(), tool: tool.name(), streams, m })
}

/// Runs `tool` with `streams` streams for `secs` seconds, server in `server_ns` bound to `ip`,
/// client in `client_ns`, both on the tester's CPUs at the lab's priority (like the generator),
/// sampling the CPU of `pids` and of the machine meanwhile.
pub(crate) fn measure(
    tool: TcpTool,
    server_ns: &str,
    client_ns: &str,
    ip: &str,
    streams: u32,
    secs: u32,
    pids: &[u32],
) -> Result<TcpMeasure, LabError> {
    let (secs_s, n_s) = (secs.to_string(), streams.to_string());
    let prefix = topo::tester_prefix();
    let mut server_args: Vec<&str> = prefix.iter().map(String::as_str).collect();
    let mut client_args = server_args.clone();
    match tool {
        TcpTool::Iperf3 => {
            server_args.extend(["iperf3", "-s", "-1", "-B", ip]);
            client_args.extend(["iperf3", "-c", ip, "-t", &secs_s, "-P", &n_s, "-i", "1", "-J"]);
        }
        TcpTool::Iperf2 => {
            server_args.extend(["iperf", "-s", "-B", ip]);
            client_args.extend(["iperf", "-c", ip, "-t", &secs_s, "-P", &n_s, "-i", "1", "-y", "C"]);
        }
    }
    let mut server = Command::new("ip")
        .args(["netns", "exec", server_ns])
        .args(&server_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| LabError::Cmd { cmd: server_args.join(" "), status: -1, stderr: e.to_string() })?;
    // Wait for the server's listening socket.
    let port = if tool == TcpTool::Iperf3 { ":5201" } else { ":5001" };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        if topo::ns_exec(server_ns, &["ss", "-ltn"]).unwrap_or_default().contains(port) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stop = AtomicBool::new(false);
    let (client, cpu) = std::thread::scope(|s| {
        let sampler = s.spawn(|| sample_cpu(pids, &stop));
        let r = topo::ns_exec(client_ns, &client_args);
        stop.store(true, Ordering::SeqCst);
        (r, sampler.join().unwrap_or_default())
    });
    let _ = run_cmd("kill", &["-TERM", &server.id().to_string()]);
    let _ = server.wait();
    let client = client?;
    let (series, gbps) = match tool {
        TcpTool::Iperf3 => parse_iperf3(&client)?,
        TcpTool::Iperf2 => parse_iperf2(&client),
    };
    let mean = |v: &[(f64, f64)]| if v.is_empty() { 0.0 } else { v.iter().map(|x| x.1).sum::<f64>() / v.len() as f64 };
    let dut_cpu: Vec<(f64, f64)> = cpu.iter().map(|c| (c.0, c.1)).collect();
    let machine_cpu: Vec<(f64, f64)> = cpu.iter().map(|c| (c.0, c.2)).collect();
    Ok(TcpMeasure {
        gbps,
        gbps_over_time: series,
        dut_cpu_pct: mean(&dut_cpu),
        machine_cpu_pct: mean(&machine_cpu),
        dut_cpu_over_time: dut_cpu,
        machine_cpu_over_time: machine_cpu,
    })
}

impl TcpResults {
    /// One JSON object per line per (DUT, tool, streams).
    pub fn json_lines(&self) -> String {
        super::json_lines(&self.rows)
    }

    /// Adds a table and the throughput-over-time and CPU-over-time charts to `report`.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("TCP throughput and CPU");
        report.para(
            "iperf through the DUT between the generator and sink namespaces. CPU in % of one core, \
             sampled every second from /proc/stat (machine) and /proc/PID/stat (the DUT's processes). \
             For user-space DUTs the endpoints run without checksum offload, TSO and GSO (the DUT \
             forwards frames as they are); the kernel bridge keeps them.",
        );
        for (d, why) in &self.skipped {
            report.para(format!("{d} skipped: {why}"));
        }
        let rows = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.dut.clone(),
                    r.tool.to_owned(),
                    r.streams.to_string(),
                    format!("{:.2}", r.m.gbps),
                    format!("{:.0}", r.m.dut_cpu_pct),
                    format!("{:.0}", r.m.machine_cpu_pct),
                ]
            })
            .collect();
        report.table(&["DUT", "tool", "streams", "Gbps", "DUT CPU %", "machine CPU %"], rows);
        let label = |r: &TcpRow| format!("{} {} ×{}", r.dut, r.tool, r.streams);
        let mut c = Chart::new("TCP throughput over time").x_label("time (s)").y_label("throughput (Gbps)");
        for r in &self.rows {
            c = c.series(label(r), r.m.gbps_over_time.clone());
        }
        report.line_chart(c);
        let mut c = Chart::new("Machine CPU over time").x_label("time (s)").y_label("CPU busy (% of one core)");
        for r in &self.rows {
            c = c.series(label(r), r.m.machine_cpu_over_time.clone());
        }
        report.line_chart(c);
        let mut c = Chart::new("DUT CPU over time").x_label("time (s)").y_label("CPU of the DUT's processes (% of one core)");
        for r in &self.rows {
            c = c.series(label(r), r.m.dut_cpu_over_time.clone());
        }
        report.line_chart(c);
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
        let (s, mean) = parse_iperf2(csv);
        assert_eq!(s, vec![(1.0, 10.0), (2.0, 12.0)]);
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
        let (s, mean) = parse_iperf2(csv);
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
    }

    #[test]
    fn proc_stat_of_self_counts() {
        // Burn a little CPU, then our own utime+stime must be readable (not necessarily > 0 at
        // 100 Hz ticks, but the machine counters must move).
        let (b0, t0) = machine_ticks();
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let (b1, t1) = machine_ticks();
        assert!(t1 > t0 && b1 >= b0);
        let _ = proc_ticks(std::process::id());
    }
}
