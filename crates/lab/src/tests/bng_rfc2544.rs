//! `bng-rfc2544`: the broadband gateway under RFC 2544, per subscriber count, against Linux.
//!
//! ```text
//!  ns access (gen0) ══ dut0 [gateway] dut1 ══ ns core (sink0)
//!  N subscribers, Q-in-Q          fastpath vbng             254 endpoints, VLAN 10
//!  (untagged for Linux)      or Linux routes + HTB          (untagged for Linux)
//!  8 downstream frames : 1 upstream, 1400 B, one sender thread (crate::bng::traffic)
//! ```
//!
//! Per subscriber count and DUT: set the gateway up (fastpath: `fastpath run
//! pipelines/vbng.toml` with every session in its entries, timed to ready; Linux:
//! [`crate::bng::linux`], timed and bounded), a trial at the generator's full speed, then a
//! binary search on the offered rate for the highest with loss below the threshold (0.5 % by
//! default, the broadband figure), loss counted over both directions. Then latency of upstream
//! probes on top of 90 % of that rate, and the DUT's CPU over those seconds: fastpath's process
//! time (a polling worker: its whole core whatever the load), Linux's softirq time over all CPUs
//! (it forwards in the senders' softirqs; `/proc/stat` samples it at each tick), each per
//! Gbit/s delivered. A count at which the DUT cannot be set up within the bound, or cannot
//! forward at the lowest rate tried, is reported as where it fell over.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::bng::linux::{self, LinuxSetup};
use crate::bng::plan;
use crate::bng::traffic::{BngTraffic, BngTrial, Encap};
use crate::dut::{Dut, DutConfig, DutKind};
use crate::gen::Latency;
use crate::report::{Chart, Report};
use crate::tests::rfc2544::Bisect;
use crate::topo::{self, TopoConfig, Topology};
use crate::LabError;

/// The gateways measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum BngDut {
    /// fastpath running `pipelines/vbng.toml` on AF_XDP (or AF_PACKET) ports.
    Fastpath,
    /// The Linux kernel with per-subscriber routes and HTB classes, untagged ([`crate::bng::linux`]).
    Linux,
}

impl BngDut {
    /// Its name in results.
    pub fn name(self) -> &'static str {
        match self {
            BngDut::Fastpath => "fastpath-vbng",
            BngDut::Linux => "linux-routes-htb",
        }
    }
}

/// Configuration of a run.
#[derive(Clone, Debug)]
pub struct BngConfig {
    /// Subscriber counts, each a separate setup.
    pub subscribers: Vec<u32>,
    /// Gateways, each measured at every count.
    pub duts: Vec<BngDut>,
    /// RFC 2544 frame size (with FCS).
    pub frame_size: u16,
    /// Seconds per trial.
    pub trial_s: f64,
    /// Most trials of the search.
    pub max_trials: u32,
    /// The search stops when (high − low) / high is below this.
    pub resolution: f64,
    /// Acceptable loss ratio.
    pub loss_threshold: f64,
    /// Background load of the latency run, as a fraction of the found rate.
    pub latency_load: f64,
    /// Seconds of the latency run.
    pub latency_s: f64,
    /// Probes per second.
    pub probe_pps: u64,
    /// Bound on each setup step (fastpath to ready; each of Linux's batches).
    pub setup_bound_s: u64,
    /// The `fastpath` binary.
    pub fastpath_exe: PathBuf,
    /// `pipelines/vbng.toml` (a path the DUT can read).
    pub vbng_spec: PathBuf,
    /// Port kind of the fastpath DUT (`afxdp` or `afpacket`).
    pub port_kind: String,
    /// Extra arguments of `fastpath run`.
    pub fastpath_args: Vec<String>,
    /// Where entries and batch files are written (removed by the caller).
    pub work_dir: PathBuf,
}

impl Default for BngConfig {
    fn default() -> BngConfig {
        BngConfig {
            subscribers: vec![1000],
            duts: vec![BngDut::Fastpath, BngDut::Linux],
            frame_size: 1400,
            trial_s: 2.0,
            max_trials: 8,
            resolution: 0.05,
            loss_threshold: 0.005,
            latency_load: 0.9,
            latency_s: 3.0,
            probe_pps: 1000,
            setup_bound_s: 300,
            fastpath_exe: PathBuf::from("fastpath"),
            vbng_spec: PathBuf::from("pipelines/vbng.toml"),
            port_kind: "afxdp".into(),
            fastpath_args: Vec::new(),
            work_dir: std::env::temp_dir(),
        }
    }
}

/// One (subscriber count, DUT).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct BngRow {
    /// `"bng-rfc2544"`.
    pub measurement: &'static str,
    /// DUT name.
    pub dut: String,
    /// Subscribers.
    pub subscribers: u32,
    /// Frame size (with FCS).
    pub frame_size: u16,
    /// Seconds from start to forwarding-ready (fastpath: process start to ports up with every
    /// session loaded; Linux: both batches).
    pub setup_s: f64,
    /// fastpath only: seconds `fastpath ctl -f` took to add every session and route (one
    /// request).
    pub sessions_s: f64,
    /// Linux only: the two batches' times.
    pub linux_setup: Option<LinuxSetup>,
    /// Where this DUT fell over at this count (setup failed or overran, or no rate passed).
    pub fell_over: Option<String>,
    /// Highest offered rate with loss below the threshold, Mpps (both directions).
    pub throughput_mpps: f64,
    /// The same in Gbit/s of frames (FCS counted).
    pub throughput_gbps: f64,
    /// Loss of that trial.
    pub loss: f64,
    /// The full-speed trial already passed: the generator, not the DUT, was the limit.
    pub generator_limited: bool,
    /// Trials run.
    pub trials: u32,
    /// The trial at the generator's full speed, per direction.
    pub full_speed: BngTrial,
    /// Latency run: the background load offered, Mpps.
    pub latency_load_mpps: f64,
    /// Upstream probe latency (µs), when probes arrived.
    pub latency_us: Option<Latency>,
    /// Probes sent and received.
    pub probes: (u64, u64),
    /// The DUT's CPU during the latency run, % of one core.
    pub dut_cpu_pct: f64,
    /// `dut_cpu_pct` per Gbit/s delivered during the latency run.
    pub cpu_pct_per_gbps: f64,
    /// The loss threshold.
    pub loss_threshold: f64,
}

/// Results of a run.
#[derive(Clone, Debug, Default)]
pub struct BngResults {
    /// One per (count, DUT), in measurement order.
    pub rows: Vec<BngRow>,
}

fn check_interrupt() -> Result<(), LabError> {
    if topo::interrupted() {
        Err(LabError::Interrupted)
    } else {
        Ok(())
    }
}

/// `/proc/stat`'s first line: (busy ticks, softirq ticks, total ticks) over all CPUs.
fn stat_ticks() -> (u64, u64, u64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = s.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), v.get(6).copied().unwrap_or(0), total)
}

/// User + system ticks of a process (all its threads).
fn proc_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let g = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    g(11) + g(12)
}

/// USER_HZ.
const HZ: f64 = 100.0;

/// Runs the test.
///
/// # Errors
/// [`LabError::Config`] for a bad configuration, [`LabError::NotRoot`], [`LabError::Interrupted`],
/// or a failure of the lab itself (namespaces, sockets). A DUT that cannot be set up is a row
/// with `fell_over`, not an error.
pub fn run(cfg: &BngConfig, progress: &mut dyn FnMut(&str)) -> Result<BngResults, LabError> {
    if cfg.subscribers.is_empty() || cfg.duts.is_empty() {
        return Err(LabError::Config("bng-rfc2544 needs at least one subscriber count and one DUT".into()));
    }
    for &n in &cfg.subscribers {
        plan::check_count(n)?;
    }
    if !(0.0..1.0).contains(&cfg.loss_threshold) || !(0.0..=1.0).contains(&cfg.latency_load) {
        return Err(LabError::Config("loss threshold and latency load are ratios in 0..1".into()));
    }
    for ns in topo::cleanup_stale() {
        progress(&format!("removed {ns}, left behind by a lab run that no longer exists"));
    }
    let mut out = BngResults::default();
    for &n in &cfg.subscribers {
        for &d in &cfg.duts {
            check_interrupt()?;
            let row = measure(cfg, d, n, progress)?;
            progress(&format!(
                "{} {n} subscribers: setup {:.1} s, {}{:.3} Mpps ({:.2} Gbit/s), p99 {:.1} µs, CPU {:.0} % ({:.1} %/Gbit/s){}",
                d.name(),
                row.setup_s,
                if row.generator_limited { "≥ " } else { "" },
                row.throughput_mpps,
                row.throughput_gbps,
                row.latency_us.map_or(f64::NAN, |l| l.p99),
                row.dut_cpu_pct,
                row.cpu_pct_per_gbps,
                row.fell_over.as_ref().map(|w| format!(" — fell over: {w}")).unwrap_or_default()
            ));
            out.rows.push(row);
        }
    }
    Ok(out)
}

/// The fastpath DUT's command line.
fn fastpath_cmd(cfg: &BngConfig, entries: &str, counters: &str, ctl: &str) -> Vec<String> {
    let k = &cfg.port_kind;
    let mut v: Vec<String> = vec![
        cfg.fastpath_exe.to_string_lossy().into_owned(),
        "run".into(),
        cfg.vbng_spec.to_string_lossy().into_owned(),
        "--entries".into(),
        entries.into(),
        "--port".into(),
        format!("p0={k}:{{in}}"),
        "--port".into(),
        format!("p1={k}:{{out}}"),
        "--core".into(),
        "1".into(),
        "--counters-out".into(),
        counters.into(),
        "--ctl".into(),
        ctl.into(),
    ];
    v.extend(cfg.fastpath_args.iter().cloned());
    v
}

/// Sets up `d` for `n` subscribers and measures it.
fn measure(cfg: &BngConfig, d: BngDut, n: u32, progress: &mut dyn FnMut(&str)) -> Result<BngRow, LabError> {
    let mut row = BngRow {
        measurement: "bng-rfc2544",
        dut: d.name().into(),
        subscribers: n,
        frame_size: cfg.frame_size,
        loss_threshold: cfg.loss_threshold,
        ..BngRow::default()
    };
    let t = Topology::create(&TopoConfig::default())?;
    let bound = Duration::from_secs(cfg.setup_bound_s);
    let t0 = Instant::now();
    let counters = cfg.work_dir.join(format!("vbng-{n}-counters.txt"));
    let (dut, encap) = match d {
        BngDut::Fastpath => {
            let file = |name: String, text: String| -> Result<PathBuf, LabError> {
                let p = cfg.work_dir.join(name);
                std::fs::write(&p, text).map_err(|e| LabError::Io(format!("{}: {e}", p.display())))?;
                Ok(p)
            };
            let entries = file(format!("vbng-{n}-base.txt"), plan::base_entries())?;
            let sessions = file(format!("vbng-{n}-sessions.txt"), plan::session_commands(n))?;
            let routes = file(format!("vbng-{n}-routes.txt"), plan::route_commands())?;
            let ctl = cfg.work_dir.join(format!("vbng-{n}.sock"));
            let mut dc = DutConfig::new(DutKind::Fastpath);
            dc.fastpath_cmd = fastpath_cmd(cfg, &entries.to_string_lossy(), &counters.to_string_lossy(), &ctl.to_string_lossy());
            dc.ready_timeout = bound;
            dc.label = Some(d.name().into());
            let dut = match Dut::start(&t, &dc) {
                Ok(dut) => dut,
                Err(e) => {
                    row.setup_s = t0.elapsed().as_secs_f64();
                    row.fell_over = Some(format!("setup: {e}"));
                    return Ok(row);
                }
            };
            // The sessions and routes through the control socket, as one request.
            let mut c = std::process::Command::new(&cfg.fastpath_exe);
            c.arg("ctl").arg("--socket").arg(&ctl).arg("-f").arg(&sessions).arg("-f").arg(&routes);
            let waited = Instant::now();
            while !ctl.exists() && waited.elapsed() < bound {
                std::thread::sleep(Duration::from_millis(20));
            }
            let loaded = linux::run_bounded(c, bound.saturating_sub(t0.elapsed()).max(Duration::from_secs(5)));
            // The base entries stay until the DUT stops: each worker reads them as it starts.
            for f in [&sessions, &routes] {
                let _ = std::fs::remove_file(f);
            }
            match loaded {
                Ok(s) => row.sessions_s = s,
                Err(e) => {
                    row.setup_s = t0.elapsed().as_secs_f64();
                    row.fell_over = Some(format!("setup: sessions: {e}"));
                    return Ok(row);
                }
            }
            (Some(dut), Encap::Tagged)
        }
        BngDut::Linux => {
            let s = linux::setup(&t, n, bound, &cfg.work_dir)?;
            row.setup_s = s.total_s();
            let failed = s.failed.clone();
            row.linux_setup = Some(s);
            if let Some(why) = failed {
                row.fell_over = Some(format!("setup: {why}"));
                return Ok(row);
            }
            (None, Encap::Untagged)
        }
    };
    let traffic = BngTraffic::attach(&t, n, encap, cfg.frame_size)?;
    // Ready when a frame of the last subscriber crosses both ways (fastpath's workers load the
    // sessions after its ports are up).
    let left = bound.saturating_sub(t0.elapsed());
    if !traffic.wait_forwarding(left.max(Duration::from_secs(5)))? {
        row.setup_s = t0.elapsed().as_secs_f64();
        row.fell_over = Some(format!("setup: not forwarding both ways within the {} s bound", cfg.setup_bound_s));
        return Ok(row);
    }
    if d == BngDut::Fastpath {
        row.setup_s = t0.elapsed().as_secs_f64();
    }
    progress(&format!("{} {n} subscribers: forwarding after {:.1} s in {}", d.name(), row.setup_s, t.dut_ns));
    search(cfg, &traffic, &mut row, progress)?;
    if row.throughput_mpps > 0.0 {
        check_interrupt()?;
        let load_pps = (row.throughput_mpps * 1e6 * cfg.latency_load) as u64;
        let pids = dut.as_ref().map(Dut::pids).unwrap_or_default();
        let (m0, p0) = (stat_ticks(), pids.iter().map(|&p| proc_ticks(p)).sum::<u64>());
        let w0 = Instant::now();
        let (lat, sent, received, bg) = traffic.latency(load_pps, cfg.probe_pps, Duration::from_secs_f64(cfg.latency_s))?;
        let secs = w0.elapsed().as_secs_f64();
        let (m1, p1) = (stat_ticks(), pids.iter().map(|&p| proc_ticks(p)).sum::<u64>());
        row.dut_cpu_pct = match d {
            BngDut::Fastpath => p1.saturating_sub(p0) as f64 / HZ / secs * 100.0,
            BngDut::Linux => m1.1.saturating_sub(m0.1) as f64 / HZ / secs * 100.0,
        };
        let gbps = bg.received() as f64 * f64::from(cfg.frame_size) * 8.0 / bg.elapsed_s.max(1e-9) / 1e9;
        row.cpu_pct_per_gbps = if gbps > 0.0 { row.dut_cpu_pct / gbps } else { 0.0 };
        row.latency_load_mpps = bg.offered_pps() / 1e6;
        row.latency_us = lat;
        row.probes = (sent, received);
        progress(&format!(
            "  {} {n}: latency at {:.3} Mpps: {received}/{sent} probes, p50 {:.1} µs p99 {:.1} µs; DUT CPU {:.0} % at {gbps:.2} Gbit/s (machine busy {:.0} %)",
            d.name(),
            row.latency_load_mpps,
            lat.map_or(f64::NAN, |l| l.p50),
            lat.map_or(f64::NAN, |l| l.p99),
            row.dut_cpu_pct,
            m1.0.saturating_sub(m0.0) as f64 / m1.2.saturating_sub(m0.2).max(1) as f64 * 100.0
        ));
    }
    drop(traffic);
    drop(dut);
    drop(t);
    let _ = std::fs::remove_file(cfg.work_dir.join(format!("vbng-{n}-base.txt")));
    if let Ok(c) = std::fs::read_to_string(&counters) {
        // Where the DUT's packets went, by stage and drop reason.
        progress(&format!("  {} {n}: DUT counters:\n{}", d.name(), c.trim_end()));
        let _ = std::fs::remove_file(&counters);
    }
    Ok(row)
}

/// The RFC 2544 search (as `tests::rfc2544`): a trial at full speed; if it loses too much, a
/// binary search between 0 and what it offered, starting at what the DUT delivered.
fn search(cfg: &BngConfig, traffic: &BngTraffic, row: &mut BngRow, progress: &mut dyn FnMut(&str)) -> Result<(), LabError> {
    let dur = Duration::from_secs_f64(cfg.trial_s);
    let name = row.dut.clone();
    let passes = |tr: &BngTrial| tr.loss() <= cfg.loss_threshold;
    check_interrupt()?;
    let full = traffic.trial(0, dur)?;
    row.trials = 1;
    row.full_speed = full;
    progress(&format!(
        "  {name}: full speed offered {:.3} Mpps, loss {:.2} % (up {}/{} down {}/{})",
        full.offered_pps() / 1e6,
        full.loss() * 100.0,
        full.received_up,
        full.sent_up,
        full.received_down,
        full.sent_down
    ));
    let mut best = passes(&full).then_some(full);
    row.generator_limited = best.is_some();
    if best.is_none() {
        let hi = full.offered_pps();
        let delivered = full.received() as f64 / full.elapsed_s.max(1e-9);
        let first = delivered.clamp(1000.0, hi.max(1000.0));
        let search = Bisect { hi, first, max_trials: cfg.max_trials, resolution: cfg.resolution, trial_s: cfg.trial_s };
        best = search.run(
            &mut row.trials,
            |rate| traffic.trial(rate as u64, dur),
            |tr| (tr.sent(), passes(tr)),
            |rate, tr, verdict| {
                progress(&format!(
                    "  {name}: trial at {:.3} Mpps: sent {} received {} loss {:.3} % {verdict}",
                    rate / 1e6,
                    tr.sent(),
                    tr.received(),
                    tr.loss() * 100.0
                ))
            },
        )?;
    }
    match best {
        Some(b) => {
            row.throughput_mpps = b.offered_pps() / 1e6;
            row.throughput_gbps = row.throughput_mpps * f64::from(cfg.frame_size) * 8.0 / 1e3;
            row.loss = b.loss();
        }
        None => row.fell_over = Some(format!("forwarding: no trial passed at ≤ {:.2} % loss", cfg.loss_threshold * 100.0)),
    }
    Ok(())
}

impl BngResults {
    /// One JSON object per row.
    pub fn json_lines(&self) -> String {
        super::json_lines(&self.rows)
    }

    /// Adds a section per subscriber count (a table per DUT, fastpath's ratio to Linux) and a
    /// throughput-against-subscribers chart.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("Broadband gateway: RFC 2544 per subscriber count (bng-rfc2544)");
        if let Some(r) = self.rows.first() {
            report.para(format!(
                "{} B frames, 8 downstream : 1 upstream, N subscribers (Q-in-Q S-VLAN 100 + i/4000 over 0x88a8, \
                 C-VLAN 1 + i%4000) and 254 core endpoints on VLAN 10. Throughput: the highest offered rate \
                 (both directions) with loss ≤ {} %, by binary search. Latency: upstream probes at {:.0} % of that \
                 rate. DUT CPU: fastpath's process time (its worker polls, so a whole core at any load); Linux's \
                 softirq time over all CPUs. The Linux baseline (per-subscriber /32 routes, permanent neighbours, \
                 HTB classes with hashed u32 filters) forwards the same traffic untagged: this kernel has no VLAN \
                 devices, so Linux is spared the per-subscriber VLAN interfaces, the session lookup, \
                 anti-spoofing, policer and ACL that fastpath runs — generous to Linux.",
                r.frame_size,
                r.loss_threshold * 100.0,
                90.0
            ));
        }
        let mut counts: Vec<u32> = self.rows.iter().map(|r| r.subscribers).collect();
        counts.dedup();
        for n in &counts {
            report.heading(format!("{n} subscribers"));
            let rows: Vec<&BngRow> = self.rows.iter().filter(|r| r.subscribers == *n).collect();
            let f = |x: f64| if x.is_finite() { format!("{x:.1}") } else { "–".into() };
            let table = rows
                .iter()
                .map(|r| {
                    vec![
                        r.dut.clone(),
                        format!("{:.1}", r.setup_s),
                        format!("{}{:.3}", if r.generator_limited { "≥ " } else { "" }, r.throughput_mpps),
                        format!("{:.2}", r.throughput_gbps),
                        f(r.latency_us.map_or(f64::NAN, |l| l.p50)),
                        f(r.latency_us.map_or(f64::NAN, |l| l.p99)),
                        f(r.latency_us.map_or(f64::NAN, |l| l.p999)),
                        format!("{:.0}", r.dut_cpu_pct),
                        format!("{:.1}", r.cpu_pct_per_gbps),
                        r.fell_over.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            report.table(
                &["DUT", "setup (s)", "Mpps", "Gbit/s", "p50 (µs)", "p99 (µs)", "p99.9 (µs)", "CPU %", "CPU % per Gbit/s", "fell over"],
                table,
            );
            let fp = rows.iter().find(|r| r.dut == BngDut::Fastpath.name());
            let lx = rows.iter().find(|r| r.dut == BngDut::Linux.name());
            if let (Some(fp), Some(lx)) = (fp, lx) {
                let ratio = if lx.throughput_mpps > 0.0 {
                    format!("{:.2}×", fp.throughput_mpps / lx.throughput_mpps)
                } else {
                    "∞ (Linux fell over)".into()
                };
                report.para(format!("fastpath / Linux throughput at {n} subscribers: {ratio}"));
            }
        }
        for d in [BngDut::Fastpath, BngDut::Linux] {
            let mine: Vec<&BngRow> = self.rows.iter().filter(|r| r.dut == d.name()).collect();
            if mine.is_empty() {
                continue;
            }
            let fell = mine.iter().find(|r| r.fell_over.is_some());
            report.para(match fell {
                Some(r) => format!("{} fell over at {} subscribers: {}", d.name(), r.subscribers, r.fell_over.as_deref().unwrap_or("")),
                None => {
                    format!("{} held at every count measured (up to {}).", d.name(), mine.iter().map(|r| r.subscribers).max().unwrap_or(0))
                }
            });
        }
        let mut c = Chart::new("Throughput against subscribers").x_label("subscribers").y_label("Gbit/s at ≤ threshold loss").log_x();
        for d in [BngDut::Fastpath, BngDut::Linux] {
            let pts: Vec<(f64, f64)> =
                self.rows.iter().filter(|r| r.dut == d.name()).map(|r| (f64::from(r.subscribers), r.throughput_gbps)).collect();
            if !pts.is_empty() {
                c = c.series(d.name(), pts);
            }
        }
        report.line_chart(c);
    }
}
