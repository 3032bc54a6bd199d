//! RFC 2544 throughput (§26.1) and latency (§26.2) through each DUT, per frame size and flow
//! count, in one run so that the ratios between DUTs are measured under the same conditions.
//!
//! ```text
//!  per DUT: topology ▸ start DUT ▸ attach generator + sink counter
//!    per (frame size, flows):
//!      trial at full generator speed ──pass──▶ throughput = offered rate
//!        │ fail
//!        ▼ binary search on the offered rate, first probe at the rate the DUT delivered
//!      lo = 0 ≤ … ≤ hi = full speed; a trial passes when loss ≤ threshold and the generator
//!      offered ≥ 95 % of the asked rate; stop when (hi − lo) / hi < resolution or after
//!      max_trials
//!      latency: probes at `latency_probe_pps` on top of a background load: a fraction of
//!      this DUT's throughput (RFC 2544 §26.2), or one fixed rate for every DUT; repeated
//!      for each load asked (latency against load, as CSIT reports it at 10/50/90 % of NDR)
//! ```
//!
//! With `runs` > 1 the whole measurement repeats (every DUT once per run, in reverse order on
//! every other run so that no DUT always goes first), and each row reports the median run and
//! the spread, as a noisy shared machine needs.
//!
//! RFC 2544 asks for 0 % loss; CSIT's MLRsearch also reports a partial-drop rate (0.5 %): set
//! `loss_threshold` accordingly. Trials are shorter than the RFC's 60 s by default because veth
//! on a shared 2-core machine is noisy well beyond what longer trials would fix; CI uses 1 s.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::dut::DutConfig;
use crate::gen::{self, FrameSpec, GenMode, Latency, ProbeConfig, Traffic, Trial, PROBE_PORT};
use crate::report::{Chart, Report};
use crate::topo::{self, TopoConfig, Topology};
use crate::LabError;

/// Configuration of an RFC 2544 run.
#[derive(Clone, Debug)]
pub struct Rfc2544Config {
    /// DUTs, measured one after the other in the same run.
    pub duts: Vec<DutConfig>,
    /// Frame sizes (bytes, with FCS).
    pub frame_sizes: Vec<u16>,
    /// Flow counts (UDP source ports), e.g. `[1, 1024]`.
    pub flows: Vec<u32>,
    /// Highest acceptable loss ratio, 0..1 (0 = RFC 2544; 0.005 = 0.5 %).
    pub loss_threshold: f64,
    /// Seconds per trial.
    pub trial_s: f64,
    /// Stop the search when (hi − lo) / hi falls below this.
    pub resolution: f64,
    /// Most trials per (frame size, flows), the first full-speed one included.
    pub max_trials: u32,
    /// Background loads of the latency test, measured in this order (at least one).
    pub latency_loads: Vec<LatencyLoad>,
    /// Probe rate of the latency test, packets per second.
    pub latency_probe_pps: u64,
    /// Seconds of the latency test.
    pub latency_s: f64,
    /// How the generator sends.
    pub mode: GenMode,
    /// Times the whole measurement runs (at least 1); rows report the median and the spread.
    pub runs: u32,
}

impl Default for Rfc2544Config {
    fn default() -> Rfc2544Config {
        Rfc2544Config {
            duts: Vec::new(),
            frame_sizes: gen::RFC2544_SIZES.to_vec(),
            flows: vec![1, 1024],
            loss_threshold: 0.0,
            trial_s: 5.0,
            resolution: 0.02,
            max_trials: 10,
            latency_loads: vec![LatencyLoad::Fraction(0.5)],
            latency_probe_pps: 1000,
            latency_s: 3.0,
            mode: GenMode::XdpLive,
            runs: 1,
        }
    }
}

/// The background load under the latency probes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LatencyLoad {
    /// This fraction of the DUT's own found throughput (RFC 2544 §26.2 measures at the
    /// throughput rate; a fraction keeps the DUT out of its own overload).
    Fraction(f64),
    /// The same rate for every DUT, packets per second (capped at the DUT's found throughput):
    /// latency compared at equal load.
    Pps(u64),
}

impl LatencyLoad {
    /// Background packets per second for a DUT whose found throughput is `found_pps`.
    pub fn pps(self, found_pps: f64) -> u64 {
        match self {
            LatencyLoad::Fraction(f) => (found_pps * f) as u64,
            LatencyLoad::Pps(p) => p.min(found_pps as u64),
        }
    }
}

/// Latency summary in the JSON output, microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencyUs {
    /// Smallest.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl From<Latency> for LatencyUs {
    fn from(l: Latency) -> LatencyUs {
        LatencyUs { min: l.min, mean: l.mean, p50: l.p50, p99: l.p99, p999: l.p999, max: l.max }
    }
}

/// The latency test at one background load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LoadLatency {
    /// Background load the generator offered, Mpps (the asked load, less what a stall of the
    /// evenly paced generator skipped).
    pub load_mpps: f64,
    /// Probe latency.
    pub latency_us: LatencyUs,
    /// Probe loss ratio.
    pub probe_loss: f64,
    /// Probes that arrived out of order.
    pub reordered: u64,
}

/// One result: a DUT at one frame size and flow count (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rfc2544Row {
    /// Test name, `rfc2544`.
    pub test: &'static str,
    /// DUT name.
    pub dut: String,
    /// Frame size, bytes with FCS.
    pub frame_size: u16,
    /// Flows.
    pub flows: u32,
    /// Loss threshold used, ratio 0..1.
    pub loss_threshold: f64,
    /// Highest offered rate that passed, Mpps.
    pub throughput_mpps: f64,
    /// The same in Gbps (frame bytes with FCS, no preamble or gap).
    pub throughput_gbps: f64,
    /// Loss ratio of the passing trial.
    pub loss: f64,
    /// What the DUT delivered when offered the generator's full speed, Mpps.
    pub overload_rx_mpps: f64,
    /// The generator's full speed in that trial, Mpps.
    pub max_offered_mpps: f64,
    /// Latency at `latency_load_mpps` (the first load asked).
    pub latency_us: LatencyUs,
    /// Background load the generator offered during the (first) latency test, Mpps (the asked
    /// load, less what a stall of the evenly paced generator skipped).
    pub latency_load_mpps: f64,
    /// Probe loss ratio during the (first) latency test.
    pub latency_probe_loss: f64,
    /// Probes that arrived out of order.
    pub latency_reordered: u64,
    /// The latency test at every load asked, in order (the first repeats the fields above).
    pub latency_by_load: Vec<LoadLatency>,
    /// Trials run (in all runs).
    pub trials: u32,
    /// The full-speed trial already passed (in any run): the DUT was not saturated, the
    /// throughput is a lower bound set by the generator (on veth the DUT's receive work may
    /// share its core).
    pub generator_limited: bool,
    /// Lowest throughput of the runs, Mpps.
    pub throughput_min_mpps: f64,
    /// Highest throughput of the runs, Mpps.
    pub throughput_max_mpps: f64,
    /// Every run's own figures, in the order run. The row's throughput, loss and overload
    /// figures are those of the median run (by throughput; the upper middle one for an even
    /// count); each latency figure is the median of the runs' figures at that load.
    pub runs: Vec<RunResult>,
}

/// One run's figures for a (DUT, frame size, flows).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunResult {
    /// Highest offered rate that passed, Mpps.
    pub throughput_mpps: f64,
    /// Loss ratio of the passing trial.
    pub loss: f64,
    /// What the DUT delivered when offered the generator's full speed, Mpps.
    pub overload_rx_mpps: f64,
    /// Trials run.
    pub trials: u32,
    /// The full-speed trial passed.
    pub generator_limited: bool,
    /// The latency test at every load asked, in order.
    pub latency_by_load: Vec<LoadLatency>,
}

/// Results of an RFC 2544 run.
#[derive(Clone, Debug, Default)]
pub struct Rfc2544Results {
    /// One row per (DUT, frame size, flows).
    pub rows: Vec<Rfc2544Row>,
    /// DUTs that could not run, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Latency samples (µs) of each row at each of its loads, for the distribution chart.
    pub latency_samples: Vec<Vec<Vec<f64>>>,
}

/// Runs RFC 2544 throughput and latency for every DUT, frame size and flow count.
///
/// # Errors
/// [`LabError::NotRoot`], [`LabError::Interrupted`] (after tearing down), or the first
/// generator/topology failure. A DUT that cannot start is skipped and listed in `skipped`.
pub fn run(cfg: &Rfc2544Config, progress: &mut dyn FnMut(&str)) -> Result<Rfc2544Results, LabError> {
    if cfg.duts.is_empty() || cfg.frame_sizes.is_empty() || cfg.flows.is_empty() || cfg.latency_loads.is_empty() {
        return Err(LabError::Config("rfc2544 needs at least one DUT, frame size, flow count and latency load".into()));
    }
    if !(0.0..1.0).contains(&cfg.loss_threshold) {
        return Err(LabError::Config(format!("loss threshold {} is not a ratio in 0..1", cfg.loss_threshold)));
    }
    for ns in topo::cleanup_stale() {
        progress(&format!("removed {ns}, left behind by a lab run that no longer exists"));
    }
    if cfg.runs == 0 {
        return Err(LabError::Config("rfc2544 needs at least one run".into()));
    }
    let mut out = Rfc2544Results::default();
    // Per DUT (in config order): its rows of every run, in measurement order.
    let mut measured: Vec<Vec<(Rfc2544Row, Vec<Vec<f64>>)>> = vec![Vec::new(); cfg.duts.len()];
    for run in 0..cfg.runs {
        let order: Vec<usize> = if run % 2 == 0 { (0..cfg.duts.len()).collect() } else { (0..cfg.duts.len()).rev().collect() };
        let of = if cfg.runs > 1 { format!(" (run {}/{})", run + 1, cfg.runs) } else { String::new() };
        for i in order {
            let dc = &cfg.duts[i];
            let name = dc.name();
            if out.skipped.iter().any(|(d, _)| d == name) {
                continue;
            }
            let t = Topology::create(&TopoConfig::default())?;
            let Some(dut) = super::start_or_skip(&t, dc, &mut out.skipped, progress) else {
                continue;
            };
            progress(&format!("{name}: started in {}{of}", t.dut_ns));
            let traffic = Traffic::attach(&t, cfg.mode)?;
            for &size in &cfg.frame_sizes {
                for &flows in &cfg.flows {
                    let (row, samples) = measure(cfg, &t, &traffic, name, size, flows, progress)?;
                    progress(&format!(
                        "{name} {size} B {flows} flow(s){of}: {:.3} Mpps ({:.2} Gbps), latency p50 {:.1} µs p99 {:.1} µs at {:.3} Mpps",
                        row.throughput_mpps, row.throughput_gbps, row.latency_us.p50, row.latency_us.p99, row.latency_load_mpps
                    ));
                    measured[i].push((row, samples));
                }
            }
            drop(traffic);
            drop(dut);
            drop(t);
        }
    }
    for per_dut in measured {
        // Rows of one DUT: run after run, each in the same (size, flows) order.
        let per_run = cfg.frame_sizes.len() * cfg.flows.len();
        let mut by_key: Vec<Vec<(Rfc2544Row, Vec<Vec<f64>>)>> = vec![Vec::new(); per_run];
        for (k, r) in per_dut.into_iter().enumerate() {
            by_key[k % per_run].push(r);
        }
        for runs in by_key.into_iter().filter(|r| !r.is_empty()) {
            let (row, samples) = combine_runs(runs);
            out.rows.push(row);
            out.latency_samples.push(samples);
        }
    }
    Ok(out)
}

/// One row from the runs of a (DUT, frame size, flows): the median run's throughput and the
/// spread, the median of each latency figure per load, and the runs' latency samples pooled.
fn combine_runs(runs: Vec<(Rfc2544Row, Vec<Vec<f64>>)>) -> (Rfc2544Row, Vec<Vec<f64>>) {
    let mut by_tput: Vec<&Rfc2544Row> = runs.iter().map(|(r, _)| r).collect();
    by_tput.sort_by(|a, b| a.throughput_mpps.total_cmp(&b.throughput_mpps));
    let mut row = by_tput[by_tput.len() / 2].clone();
    row.throughput_min_mpps = by_tput[0].throughput_mpps;
    row.throughput_max_mpps = by_tput[by_tput.len() - 1].throughput_mpps;
    row.trials = runs.iter().map(|(r, _)| r.trials).sum();
    row.generator_limited = runs.iter().any(|(r, _)| r.generator_limited);
    row.latency_by_load = (0..row.latency_by_load.len())
        .map(|l| {
            let at: Vec<&LoadLatency> = runs.iter().filter_map(|(r, _)| r.latency_by_load.get(l)).collect();
            let med = |f: fn(&LoadLatency) -> f64| median(at.iter().map(|x| f(x)).collect());
            LoadLatency {
                load_mpps: med(|x| x.load_mpps),
                latency_us: LatencyUs {
                    min: med(|x| x.latency_us.min),
                    mean: med(|x| x.latency_us.mean),
                    p50: med(|x| x.latency_us.p50),
                    p99: med(|x| x.latency_us.p99),
                    p999: med(|x| x.latency_us.p999),
                    max: med(|x| x.latency_us.max),
                },
                probe_loss: med(|x| x.probe_loss),
                reordered: med(|x| x.reordered as f64) as u64,
            }
        })
        .collect();
    let first = row.latency_by_load[0];
    (row.latency_us, row.latency_load_mpps, row.latency_probe_loss, row.latency_reordered) =
        (first.latency_us, first.load_mpps, first.probe_loss, first.reordered);
    row.runs = runs
        .iter()
        .map(|(r, _)| RunResult {
            throughput_mpps: r.throughput_mpps,
            loss: r.loss,
            overload_rx_mpps: r.overload_rx_mpps,
            trials: r.trials,
            generator_limited: r.generator_limited,
            latency_by_load: r.latency_by_load.clone(),
        })
        .collect();
    let loads = row.latency_by_load.len();
    let samples = (0..loads).map(|l| runs.iter().filter_map(|(_, s)| s.get(l)).flatten().copied().collect()).collect();
    (row, samples)
}

/// The median (the upper middle value for an even count; 0 for none).
fn median(v: Vec<f64>) -> f64 {
    super::median(v).unwrap_or(0.0)
}

fn check_interrupt() -> Result<(), LabError> {
    if topo::interrupted() {
        Err(LabError::Interrupted)
    } else {
        Ok(())
    }
}

/// The throughput search below an overloaded full-speed trial (RFC 2544 §26.1): bisect between
/// 0 and `hi` packets/s, starting at `first`, until the bracket is narrower than `resolution`
/// of `hi` or `max_trials` trials were run. A trial passes when the test says so and the
/// generator offered at least 95 % of the rate (else it is the generator's failure, reported as
/// such, and the rate is not believed).
pub(crate) struct Bisect {
    pub hi: f64,
    pub first: f64,
    pub max_trials: u32,
    pub resolution: f64,
    pub trial_s: f64,
}

impl Bisect {
    /// Runs the search, counting trials in `trials`; `judge(trial)` gives (frames sent, passed);
    /// `report(rate, trial, verdict)` sees every trial. Returns the best passing trial.
    pub(crate) fn run<T>(
        &self,
        trials: &mut u32,
        mut trial: impl FnMut(f64) -> Result<T, LabError>,
        judge: impl Fn(&T) -> (u64, bool),
        mut report: impl FnMut(f64, &T, &str),
    ) -> Result<Option<T>, LabError> {
        let (mut lo, mut hi) = (0f64, self.hi);
        let mut rate = self.first;
        let mut best = None;
        while *trials < self.max_trials && hi > 0.0 && (hi - lo) / hi >= self.resolution {
            check_interrupt()?;
            let tr = trial(rate)?;
            *trials += 1;
            let (sent, passed) = judge(&tr);
            let offered_ok = sent as f64 >= 0.95 * rate * self.trial_s;
            let ok = passed && offered_ok;
            report(
                rate,
                &tr,
                if ok {
                    "pass"
                } else if !offered_ok {
                    "fail (generator short)"
                } else {
                    "fail"
                },
            );
            if ok {
                lo = rate;
                best = Some(tr);
            } else {
                hi = rate;
            }
            rate = (lo + hi) / 2.0;
        }
        Ok(best)
    }
}

/// Throughput search and latency for one (DUT, size, flows).
fn measure(
    cfg: &Rfc2544Config,
    t: &Topology,
    traffic: &Traffic,
    name: &str,
    size: u16,
    flows: u32,
    progress: &mut dyn FnMut(&str),
) -> Result<(Rfc2544Row, Vec<Vec<f64>>), LabError> {
    let dur = Duration::from_secs_f64(cfg.trial_s);
    let passes = |tr: &Trial| tr.loss() <= cfg.loss_threshold;
    check_interrupt()?;
    let full = traffic.trial(size, flows, 0, dur)?;
    let mut trials = 1u32;
    progress(&format!(
        "  {name} {size} B: full speed offered {:.3} Mpps, delivered {:.3} Mpps (loss {:.2} %)",
        full.offered_mpps(),
        full.received_mpps(),
        full.loss() * 100.0
    ));
    let mut best: Option<Trial> = if passes(&full) { Some(full) } else { None };
    if best.is_none() {
        let hi = full.offered_mpps() * 1e6;
        // First guess: what the DUT delivered under overload.
        let first = (full.received_mpps() * 1e6).clamp(1000.0, hi.max(1000.0));
        let search = Bisect { hi, first, max_trials: cfg.max_trials, resolution: cfg.resolution, trial_s: cfg.trial_s };
        best = search.run(
            &mut trials,
            |rate| traffic.trial(size, flows, rate as u64, dur),
            |tr| (tr.sent, passes(tr)),
            |rate, tr, verdict| {
                progress(&format!(
                    "  {name} {size} B: trial at {:.3} Mpps: sent {} received {} loss {:.3} % {verdict}",
                    rate / 1e6,
                    tr.sent,
                    tr.received,
                    tr.loss() * 100.0
                ))
            },
        )?;
    }
    let best = best.unwrap_or_default();
    let mpps = best.offered_mpps();
    let bytes = if size == 0 { 362.0 } else { f64::from(size) };
    let mut by_load = Vec::with_capacity(cfg.latency_loads.len());
    let mut samples = Vec::with_capacity(cfg.latency_loads.len());
    for load in &cfg.latency_loads {
        check_interrupt()?;
        let (lat, s, load_mpps) = latency(cfg, t, traffic, size, flows, load.pps(mpps * 1e6))?;
        let l = LoadLatency {
            load_mpps,
            latency_us: lat.latency_us.map(LatencyUs::from).unwrap_or_default(),
            probe_loss: lat.loss_ratio,
            reordered: lat.reordered,
        };
        if cfg.latency_loads.len() > 1 {
            progress(&format!(
                "  {name} {size} B: latency at {load_mpps:.3} Mpps: p50 {:.1} µs p99 {:.1} µs max {:.1} µs",
                l.latency_us.p50, l.latency_us.p99, l.latency_us.max
            ));
        }
        by_load.push(l);
        samples.push(s);
    }
    let first = by_load[0];
    let row = Rfc2544Row {
        test: "rfc2544",
        dut: name.to_owned(),
        frame_size: size,
        flows,
        loss_threshold: cfg.loss_threshold,
        throughput_mpps: mpps,
        throughput_gbps: mpps * bytes * 8.0 / 1e3,
        loss: best.loss(),
        overload_rx_mpps: full.received_mpps(),
        max_offered_mpps: full.offered_mpps(),
        latency_us: first.latency_us,
        latency_load_mpps: first.load_mpps,
        latency_probe_loss: first.probe_loss,
        latency_reordered: first.reordered,
        latency_by_load: by_load,
        trials,
        generator_limited: passes(&full),
        throughput_min_mpps: mpps,
        throughput_max_mpps: mpps,
        runs: Vec::new(),
    };
    Ok((row, samples))
}

/// Probes at `cfg.latency_probe_pps` on top of `load_pps` of evenly paced background traffic.
/// Returns the probes' statistics, their latencies (µs) and the load offered (Mpps).
fn latency(
    cfg: &Rfc2544Config,
    t: &Topology,
    traffic: &Traffic,
    size: u16,
    flows: u32,
    load_pps: u64,
) -> Result<(gen::StreamStats, Vec<f64>, f64), LabError> {
    let clock = gen::ProbeClock::start();
    let (stop_rx, stop_tx, ready) = (AtomicBool::new(false), AtomicBool::new(false), AtomicBool::new(false));
    let count = (cfg.latency_probe_pps as f64 * cfg.latency_s).max(1.0) as u64;
    let probe = ProbeConfig {
        iface: t.gen_if.to_owned(),
        spec: FrameSpec::for_topology(t, PROBE_PORT),
        frame_size: if size == 0 { 64 } else { size },
        stream: 1,
        count,
        rate_pps: cfg.latency_probe_pps,
    };
    let (sink_ns, sink_if, sink_ip, gen_ns) = (t.sink_ns.clone(), t.sink_if, t.sink_ip, t.gen_ns.clone());
    let (sent, rx, load_mpps) = std::thread::scope(|s| -> Result<(u64, _, f64), LabError> {
        let rx = s.spawn(|| {
            topo::in_netns(&sink_ns, || gen::receive_probes(sink_if, sink_ip, clock, &stop_rx, &ready, Duration::from_millis(300)))
        });
        let t0 = Instant::now();
        while !ready.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let bg = s.spawn(|| {
            if load_pps > 0 {
                traffic
                    .trial_paced(size, flows, load_pps, Duration::from_secs_f64(cfg.latency_s), gen::Pacing::Smooth)
                    .map(|tr| tr.offered_mpps())
            } else {
                Ok(0.0)
            }
        });
        let sent = topo::in_netns(&gen_ns, || gen::send_probes(&probe, clock, &stop_tx));
        let bg = bg.join();
        stop_rx.store(true, Ordering::SeqCst);
        let rx = rx.join();
        let sent = sent??;
        let load_mpps = match bg {
            Ok(r) => r?,
            Err(p) => std::panic::resume_unwind(p),
        };
        let rx = match rx {
            Ok(r) => r??,
            Err(p) => std::panic::resume_unwind(p),
        };
        Ok((sent, rx, load_mpps))
    })?;
    let mut rx = rx;
    let probes = rx.remove(&1);
    let samples: Vec<f64> = probes.as_ref().map(|s| s.latency_ns.iter().map(|&n| n as f64 / 1e3).collect()).unwrap_or_default();
    Ok((gen::stream_stats(1, sent, probes), samples, load_mpps))
}

impl Rfc2544Results {
    /// One JSON object per line per (DUT, frame size, flows).
    pub fn json_lines(&self) -> String {
        super::json_lines(&self.rows)
    }

    /// Adds this run's sections to `report`: a table, throughput vs frame size (Mpps and Gbps)
    /// per DUT and flow count, and the latency percentiles per DUT.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("RFC 2544 throughput and latency");
        if let Some(r) = self.rows.first() {
            report.para(format!(
                "Highest offered rate with loss ≤ {} % (binary search over trials), then one-way latency of \
                 AF_PACKET probes (sent at a known time, stamped by the sink's kernel on arrival) on top of an \
                 evenly paced background load: a fraction of that rate, or one rate for every DUT (the \"load\" \
                 column, as offered). Frame sizes include the FCS; Gbps counts frame bytes without preamble \
                 and gap.",
                r.loss_threshold * 100.0
            ));
        }
        for (d, why) in &self.skipped {
            report.para(format!("{d} skipped: {why}"));
        }
        let runs = self.rows.iter().map(|r| r.runs.len()).max().unwrap_or(1);
        if runs > 1 {
            report.para(format!(
                "Each DUT was measured in {runs} runs (DUT order reversed on every other run). Mpps, Gbps and \
                 overload are the median run's; \"Mpps min–max\" is the spread over the runs; each latency figure \
                 is the median of the runs' figures."
            ));
        }
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let mut v = vec![
                    r.dut.clone(),
                    r.frame_size.to_string(),
                    r.flows.to_string(),
                    format!("{}{:.3}", if r.generator_limited { "≥ " } else { "" }, r.throughput_mpps),
                ];
                if runs > 1 {
                    v.push(format!("{:.3}–{:.3}", r.throughput_min_mpps, r.throughput_max_mpps));
                }
                v.extend([
                    format!("{:.2}", r.throughput_gbps),
                    format!("{:.3}", r.overload_rx_mpps),
                    format!("{:.3}", r.latency_load_mpps),
                    format!("{:.1}", r.latency_us.p50),
                    format!("{:.1}", r.latency_us.p99),
                    format!("{:.1}", r.latency_us.max),
                    r.trials.to_string(),
                ]);
                v
            })
            .collect();
        let mut head = vec!["DUT", "frame (B)", "flows", "Mpps"];
        if runs > 1 {
            head.push("Mpps min–max");
        }
        head.extend(["Gbps", "overload rx Mpps", "load Mpps", "p50 (µs)", "p99 (µs)", "max (µs)", "trials"]);
        report.table(&head, rows);
        if runs > 1 {
            let mut c = Chart::new("Throughput of each run")
                .x_label("run")
                .y_label("throughput (Mpps)")
                .x_ticks(&(1..=runs).map(|k| k as f64).collect::<Vec<_>>());
            for r in &self.rows {
                let pts = r.runs.iter().enumerate().map(|(k, x)| ((k + 1) as f64, x.throughput_mpps)).collect();
                c = c.series(format!("{} {} B {} fl", r.dut, r.frame_size, r.flows), pts);
            }
            report.line_chart(c);
        }
        let mut keys: Vec<(String, u32)> = Vec::new();
        for r in &self.rows {
            if !keys.contains(&(r.dut.clone(), r.flows)) {
                keys.push((r.dut.clone(), r.flows));
            }
        }
        let series = |f: &dyn Fn(&Rfc2544Row) -> f64| -> Vec<(String, Vec<(f64, f64)>)> {
            keys.iter()
                .map(|(d, fl)| {
                    let pts = self
                        .rows
                        .iter()
                        .filter(|r| &r.dut == d && r.flows == *fl && r.frame_size > 0)
                        .map(|r| (f64::from(r.frame_size), f(r)))
                        .collect();
                    (format!("{d}, {fl} flow{}", if *fl == 1 { "" } else { "s" }), pts)
                })
                .collect()
        };
        let sizes: Vec<f64> = gen::RFC2544_SIZES.iter().map(|&s| f64::from(s)).collect();
        let mut c =
            Chart::new("Throughput vs frame size").x_label("frame size (bytes)").y_label("throughput (Mpps)").log_x().x_ticks(&sizes);
        for (n, p) in series(&|r| r.throughput_mpps) {
            c = c.series(n, p);
        }
        report.line_chart(c);
        let mut c = Chart::new("Throughput vs frame size (bits)")
            .x_label("frame size (bytes)")
            .y_label("throughput (Gbps)")
            .log_x()
            .x_ticks(&sizes);
        for (n, p) in series(&|r| r.throughput_gbps) {
            c = c.series(n, p);
        }
        report.line_chart(c);
        let mut c = Chart::new("Latency under the background load").x_label("percentile").y_label("one-way latency (µs)");
        for r in &self.rows {
            let l = r.latency_us;
            c = c.bars(
                format!("{} {} B {} fl", r.dut, r.frame_size, r.flows),
                vec![("min".into(), l.min), ("p50".into(), l.p50), ("p99".into(), l.p99), ("p99.9".into(), l.p999), ("max".into(), l.max)],
            );
        }
        report.bar_chart(c);
        let several_loads = self.rows.iter().any(|r| r.latency_by_load.len() > 1);
        if several_loads {
            self.add_latency_by_load(report);
        }
        // Latency distribution: percentile spectrum per row and load (x: percentile on a log
        // scale of 1/(1−p)).
        let mut c = Chart::new("Latency distribution")
            .x_label("percentile (1 / (1 − p), log scale: 10 = p90, 100 = p99)")
            .y_label("one-way latency (µs)")
            .log_x();
        for (r, per_load) in self.rows.iter().zip(&self.latency_samples) {
            for (l, s) in r.latency_by_load.iter().zip(per_load) {
                if s.is_empty() {
                    continue;
                }
                let at = if several_loads { format!(" at {:.3} Mpps", l.load_mpps) } else { String::new() };
                c = c.series(format!("{} {} B {} fl{at}", r.dut, r.frame_size, r.flows), percentile_spectrum(s));
            }
        }
        report.line_chart(c);
    }

    /// A table of the latency at every load, and p50 / p99 against load per (DUT, size, flows).
    fn add_latency_by_load(&self, report: &mut Report) {
        let rows = self
            .rows
            .iter()
            .flat_map(|r| {
                r.latency_by_load.iter().map(move |l| {
                    vec![
                        r.dut.clone(),
                        r.frame_size.to_string(),
                        r.flows.to_string(),
                        format!("{:.3}", l.load_mpps),
                        format!("{:.1}", l.latency_us.min),
                        format!("{:.1}", l.latency_us.p50),
                        format!("{:.1}", l.latency_us.p99),
                        format!("{:.1}", l.latency_us.p999),
                        format!("{:.1}", l.latency_us.max),
                        format!("{:.2}", l.probe_loss * 100.0),
                    ]
                })
            })
            .collect();
        report.table(
            &["DUT", "frame (B)", "flows", "load Mpps", "min (µs)", "p50 (µs)", "p99 (µs)", "p99.9 (µs)", "max (µs)", "probe loss %"],
            rows,
        );
        type Pick = fn(&LatencyUs) -> f64;
        let percentiles: [(&str, Pick); 2] = [("p99", |l| l.p99), ("p50", |l| l.p50)];
        for (what, pick) in percentiles {
            let mut c = Chart::new(format!("{what} latency vs background load"))
                .x_label("background load (Mpps)")
                .y_label(format!("{what} one-way latency (µs)"));
            for r in &self.rows {
                let pts = r.latency_by_load.iter().map(|l| (l.load_mpps, pick(&l.latency_us))).collect();
                c = c.series(format!("{} {} B {} fl", r.dut, r.frame_size, r.flows), pts);
            }
            report.line_chart(c);
        }
    }
}

/// Latency samples (any order) as a percentile spectrum: points (1 / (1 − p), latency at p), 15
/// per decade of 1 / (1 − p) from p = 0 up to the largest sample.
fn percentile_spectrum(samples: &[f64]) -> Vec<(f64, f64)> {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let mut pts = Vec::new();
    for k in 0..60 {
        let p = 1.0 - 10f64.powf(-(k as f64) / 15.0);
        let idx = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
        pts.push((1.0 / (1.0 - p).max(1e-9), s[idx]));
        if p * n as f64 >= n as f64 - 1.0 {
            break;
        }
    }
    pts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_row(mpps: f64, p99s: [f64; 2], trials: u32) -> (Rfc2544Row, Vec<Vec<f64>>) {
        let at = |load_mpps: f64, p99: f64| LoadLatency {
            load_mpps,
            latency_us: LatencyUs { min: 1.0, mean: 2.0, p50: 2.0, p99, p999: p99 + 1.0, max: p99 + 2.0 },
            probe_loss: 0.0,
            reordered: 0,
        };
        let by_load = vec![at(0.02, p99s[0]), at(mpps / 2.0, p99s[1])];
        let row = Rfc2544Row {
            dut: "fastpath".into(),
            throughput_mpps: mpps,
            throughput_gbps: mpps * 0.512,
            loss: mpps / 100.0,
            overload_rx_mpps: mpps + 0.1,
            latency_us: by_load[0].latency_us,
            latency_load_mpps: 0.02,
            latency_by_load: by_load,
            trials,
            ..Rfc2544Row::default()
        };
        (row, vec![vec![mpps; 3], vec![mpps; 2]])
    }

    #[test]
    fn runs_combine_into_the_median_run_with_its_spread() {
        let runs = vec![run_row(0.9, [20.0, 11.0], 5), run_row(0.6, [10.0, 30.0], 6), run_row(0.7, [15.0, 12.0], 7)];
        let (row, samples) = combine_runs(runs);
        // Throughput and what goes with it come from the median run, not an average.
        assert_eq!((row.throughput_mpps, row.throughput_gbps, row.loss), (0.7, 0.7 * 0.512, 0.7 / 100.0));
        assert!((row.overload_rx_mpps - 0.8).abs() < 1e-12);
        assert_eq!((row.throughput_min_mpps, row.throughput_max_mpps), (0.6, 0.9));
        assert_eq!(row.trials, 18, "trials of every run");
        // Each latency figure is the median of the runs' figures at that load.
        assert_eq!(row.latency_by_load[0].latency_us.p99, 15.0);
        assert_eq!(row.latency_by_load[1].latency_us.p99, 12.0);
        assert_eq!(row.latency_by_load[1].load_mpps, 0.35);
        assert_eq!(row.latency_us, row.latency_by_load[0].latency_us, "the row repeats the first load");
        // Every run kept, in the order run.
        let each: Vec<f64> = row.runs.iter().map(|r| r.throughput_mpps).collect();
        assert_eq!(each, [0.9, 0.6, 0.7]);
        assert_eq!(row.runs[1].latency_by_load[1].latency_us.p99, 30.0);
        // Samples pooled per load.
        assert_eq!(samples.iter().map(Vec::len).collect::<Vec<_>>(), [9, 6]);
    }

    #[test]
    fn one_run_is_reported_as_it_was_measured() {
        let (one, _) = run_row(0.5, [9.0, 10.0], 4);
        let (row, _) = combine_runs(vec![(one.clone(), vec![vec![], vec![]])]);
        assert_eq!((row.throughput_mpps, row.throughput_min_mpps, row.throughput_max_mpps), (0.5, 0.5, 0.5));
        assert_eq!(row.latency_by_load, one.latency_by_load);
        assert_eq!(row.runs.len(), 1);
    }

    #[test]
    fn median_takes_the_upper_middle_of_an_even_count() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median(Vec::new()), 0.0);
    }
}
