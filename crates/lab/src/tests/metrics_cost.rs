//! `metrics-cost`: what a Prometheus scrape of `/metrics` costs the workers. fastpath forwards
//! traffic offered above its capacity, in windows that alternate between no scraping and
//! scraping at a steady rate; the forwarded rate of each kind of window is compared.
//!
//! ```text
//!  ns gen (gen0) ══ dut0 [fastpath run l2fwd --metrics 127.0.0.1:9464] dut1 ══ ns sink (sink0)
//!                                    ▲ GET /metrics (inside the DUT's namespace)
//!  scraper: none │ R₁ scrapes/s │ R₂ scrapes/s │ R₁ │ R₂ │ none │ …   one window each per round
//! ```
//!
//! **Why above capacity.** The generator offers as fast as it can (or `offered_pps`), far more
//! than the DUT forwards, so the one worker is busy all the time and every cycle a scrape takes
//! from it is a packet it does not forward: the forwarded rate measures the cost directly. At
//! the zero-loss rate the worker has slack, and a small cost would hide in it (or show as a
//! loss in one window, which a binary search cannot resolve finely).
//!
//! **What a scrape does to a worker.** The control thread posts one `Snapshot` message to
//! every worker's mailbox; the worker sees it at its next batch boundary (one atomic load per
//! poll, whether or not anything waits), copies its plain counters into a `WorkerSnapshot`
//! (allocating) and sends it back; summing, the table sizes and rendering the text happen on
//! the control thread, with the workers already back at their packets. That copy is the cost
//! this test measures; the HTTP server, the renderer and the scraper run on the other core.
//!
//! Per round, one window per scrape rate and one without (`0`), each `window_s` long, in an
//! order rotated every round and reversed in every other n rounds ([`window_order`]), so that
//! neither drift over the run nor a window's neighbour favours one kind. A scraper
//! thread runs through every window, pinned and prioritised like the generator, and wakes the
//! same way in each; only in the scraping windows does it scrape (from just before the
//! generator starts until the sink's count has settled). Before and after each window one
//! scrape reads the workers' counters (outside the window's traffic).
//! Reported per kind of window: the forwarded rate at the sink (median of the rounds), the
//! workers' transmitted rate and packets per batch from their own counters, the ratio to the
//! windows without scraping, and the spread of the windows without scraping (max − min over
//! their median) as the noise figure; for scraping windows also the scrapes done, their
//! latency (connect to last byte) and size.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::dut::{Dut, DutConfig, DutKind};
use crate::gen::{GenMode, Traffic, Trial};
use crate::report::{Chart, Report};
use crate::topo::{self, TopoConfig, Topology};
use crate::LabError;

/// The DUT's spec: the repository's l2fwd pipeline (port pairs with a MAC swap).
pub const SPEC: &str = include_str!("../../../../pipelines/l2fwd.toml");

/// Its entries: each port forwards to the other.
pub const ENTRIES: &str = "table port_pair add 0 => forward(1)\ntable port_pair add 1 => forward(0)\n";

/// Where the DUT serves `/metrics`, inside its own namespace.
pub const METRICS_ADDR: &str = "127.0.0.1:9464";

/// Time a scrape may take before it counts as failed.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// Configuration of a run.
#[derive(Clone, Debug)]
pub struct MetricsCostConfig {
    /// The `fastpath` binary.
    pub fastpath_exe: PathBuf,
    /// Extra `fastpath run` arguments.
    pub fastpath_args: Vec<String>,
    /// Port kind of the DUT (`afxdp` or `afpacket`).
    pub port_kind: String,
    /// Frame size (with FCS).
    pub frame_size: u16,
    /// Flows (UDP source ports).
    pub flows: u32,
    /// Scrape rates of the scraping windows, scrapes per second (each > 0).
    pub scrape_rates: Vec<f64>,
    /// Seconds per window.
    pub window_s: f64,
    /// Rounds: every kind of window once per round.
    pub rounds: u32,
    /// Offered rate, packets per second (0: as fast as the generator goes).
    pub offered_pps: u64,
    /// How the generator sends.
    pub mode: GenMode,
    /// Where the spec and entries files go.
    pub work_dir: PathBuf,
}

impl Default for MetricsCostConfig {
    fn default() -> MetricsCostConfig {
        MetricsCostConfig {
            fastpath_exe: PathBuf::from("fastpath"),
            fastpath_args: Vec::new(),
            port_kind: "afxdp".into(),
            frame_size: 64,
            flows: 1,
            scrape_rates: vec![10.0, 1.0],
            window_s: 3.0,
            rounds: 6,
            offered_pps: 0,
            mode: GenMode::XdpLive,
            work_dir: std::env::temp_dir(),
        }
    }
}

/// Milliseconds a scrape took, from connect to the last byte of the answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ScrapeMs {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// One window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Window {
    /// Round (from 0).
    pub round: u32,
    /// Scrape rate asked for (0: none).
    pub scrapes_per_s: f64,
    /// Frames the generator sent.
    pub sent: u64,
    /// Frames the sink counted.
    pub received: u64,
    /// Seconds the generator sent.
    pub elapsed_s: f64,
    /// Offered rate, Mpps.
    pub offered_mpps: f64,
    /// Forwarded rate at the sink, Mpps.
    pub sink_mpps: f64,
    /// Packets the workers transmitted in the window (their counters).
    pub worker_tx_pkts: u64,
    /// The same as a rate over the generator's sending time, Mpps.
    pub worker_mpps: f64,
    /// Packets per batch the workers processed (a saturated worker fills its batches).
    pub pkts_per_batch: f64,
    /// Frames the DUT's ports dropped before the pipeline (the overload).
    pub port_rx_drops: u64,
    /// Scrapes answered during the window.
    pub scrapes: u64,
    /// Scrapes that failed (refused, timed out, not 200).
    pub scrape_failures: u64,
    /// Seconds the scraper ran: from just before the generator started until the sink's count
    /// settled (a little longer than the generator sent).
    pub scraper_s: f64,
    /// Seconds between the scrapes that read the workers' counters before and after.
    pub between_s: f64,
    /// Control messages the workers answered in that time (the window's scrapes and the one
    /// before it), from `fastpath_worker_control_messages_total`.
    pub control_messages: u64,
    /// TSC cycles the workers spent answering them, from `fastpath_worker_control_cycles_total`.
    pub control_cycles: u64,
}

/// One kind of window over every round (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MetricsCostRow {
    /// `metrics-cost`.
    pub test: &'static str,
    /// Scrape rate (0: the windows without scraping).
    pub scrapes_per_s: f64,
    /// Frame size, bytes with FCS.
    pub frame_size: u16,
    /// Flows.
    pub flows: u32,
    /// Rounds (windows of this kind).
    pub rounds: u32,
    /// Seconds per window.
    pub window_s: f64,
    /// Offered rate, median over the windows, Mpps.
    pub offered_mpps: f64,
    /// Forwarded rate at the sink, median over the windows, Mpps.
    pub sink_mpps: f64,
    /// Smallest and largest window.
    pub sink_mpps_min: f64,
    /// Largest window.
    pub sink_mpps_max: f64,
    /// The workers' transmitted rate, median, Mpps.
    pub worker_mpps: f64,
    /// Packets per batch, median.
    pub pkts_per_batch: f64,
    /// `sink_mpps` over the windows without scraping's.
    pub ratio_vs_none: f64,
    /// Spread of the windows without scraping, (max − min) / median, percent: the noise.
    pub noise_pct: f64,
    /// |1 − ratio| within the noise (`None` with one round: no noise figure).
    pub within_noise: Option<bool>,
    /// Scrapes answered in these windows.
    pub scrapes: u64,
    /// Scrapes that failed.
    pub scrape_failures: u64,
    /// Scrapes answered per second of the scraper's running time (the rate achieved).
    pub scrapes_per_s_achieved: f64,
    /// What one scrape cost a worker, measured by the worker: TSC cycles spent answering
    /// control messages over the messages answered, over the windows of this kind.
    pub worker_cycles_per_scrape: f64,
    /// The same in microseconds (at the TSC's rate, calibrated by the lab).
    pub worker_us_per_scrape: f64,
    /// Share of the workers' time spent answering control messages in these windows, percent
    /// (cycles over the time between the readings at the TSC's rate, summed over the windows).
    pub worker_control_pct: f64,
    /// Scrape latency.
    pub scrape_ms: ScrapeMs,
    /// Size of a scrape's body, bytes (the last one).
    pub scrape_bytes: u64,
    /// The windows.
    pub windows: Vec<Window>,
}

/// Results of a run.
#[derive(Clone, Debug, Default)]
pub struct MetricsCostResults {
    /// One row per kind of window, no scraping first.
    pub rows: Vec<MetricsCostRow>,
    /// The DUT namespace the run used (gone at the end).
    pub dut_ns: String,
}

impl MetricsCostResults {
    /// One JSON object per row.
    pub fn json_lines(&self) -> String {
        super::json_lines(&self.rows)
    }

    /// Adds the table and two charts: the median forwarded rate per kind of window, and every
    /// window's rate by round.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("Cost of a /metrics scrape (metrics-cost)");
        report.para(
            "fastpath (l2fwd, one worker) forwards traffic offered above its capacity, so its worker is never \
             idle; windows without scraping alternate with windows in which a scraper reads /metrics at a \
             steady rate. A scrape posts one message to each worker, which copies its counters at its next \
             batch boundary; any cost shows as fewer packets forwarded. The noise is the spread of the windows \
             without scraping. The worker also counts the TSC cycles it spends answering control messages: \
             the last two columns are that direct measurement (the windows without scraping have one message each, \
             the reading before the window).",
        );
        let mode = |r: f64| if r == 0.0 { "no scraping".to_owned() } else { format!("{r} scrapes/s") };
        let rows = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    mode(r.scrapes_per_s),
                    format!("{:.3} ({:.3}–{:.3})", r.sink_mpps, r.sink_mpps_min, r.sink_mpps_max),
                    format!("{:.3}", r.worker_mpps),
                    format!("{:.1}", r.pkts_per_batch),
                    format!("{:.4}", r.ratio_vs_none),
                    format!("{:.1} %", r.noise_pct),
                    match r.within_noise {
                        Some(true) => "yes".into(),
                        Some(false) => "no".into(),
                        None => "– (one round)".into(),
                    },
                    if r.scrapes_per_s == 0.0 { "–".into() } else { format!("{} ({} failed)", r.scrapes, r.scrape_failures) },
                    if r.scrapes_per_s == 0.0 {
                        "–".into()
                    } else {
                        format!("{:.2} / {:.2} / {:.2}", r.scrape_ms.p50, r.scrape_ms.p99, r.scrape_ms.max)
                    },
                    r.scrape_bytes.to_string(),
                    format!("{:.0} cycles ({:.2} µs)", r.worker_cycles_per_scrape, r.worker_us_per_scrape),
                    format!("{:.4} %", r.worker_control_pct),
                ]
            })
            .collect();
        report.table(
            &[
                "windows",
                "forwarded Mpps, median (min–max)",
                "worker tx Mpps",
                "pkts/batch",
                "ratio to none",
                "noise",
                "within noise",
                "scrapes",
                "scrape ms p50 / p99 / max",
                "scrape bytes",
                "worker time per scrape",
                "worker time on scrapes",
            ],
            rows,
        );
        report.bar_chart(
            Chart::new("Forwarded rate, median of the rounds")
                .x_label("windows")
                .y_label("Mpps at the sink")
                .bars("fastpath l2fwd", self.rows.iter().map(|r| (mode(r.scrapes_per_s), r.sink_mpps)).collect()),
        );
        let mut chart = Chart::new("Forwarded rate of every window").x_label("round").y_label("Mpps at the sink");
        for r in &self.rows {
            chart = chart.series(mode(r.scrapes_per_s), r.windows.iter().map(|w| (f64::from(w.round), w.sink_mpps)).collect());
        }
        report.line_chart(chart);
    }
}

/// One answered scrape.
#[derive(Clone, Debug)]
pub struct Scraped {
    /// Connect to last byte.
    pub took: Duration,
    /// The body (the exposition text).
    pub body: String,
}

/// `GET /metrics` from `addr`, as a Prometheus server does (HTTP/1.1, the server closes).
///
/// # Errors
/// The connection failing or timing out, a status other than 200, or a body whose length
/// differs from its `Content-Length`.
pub fn scrape(addr: SocketAddr, timeout: Duration) -> Result<Scraped, String> {
    let t0 = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: fastpath\r\nAccept: text/plain;version=0.0.4\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("send to {addr}: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("read from {addr}: {e}"))?;
    let took = t0.elapsed();
    let text = String::from_utf8(raw).map_err(|_| format!("{addr}: the answer is not UTF-8"))?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("{addr}: no end of the response head in {} bytes", text.len()))?;
    let status = head.lines().next().unwrap_or_default();
    if !status.starts_with("HTTP/1.1 200 ") {
        return Err(format!("{addr}: {status}: {}", body.trim()));
    }
    let len = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")).map(|(_, v)| v.trim()))
        .and_then(|v| v.parse::<usize>().ok());
    if len != Some(body.len()) {
        return Err(format!("{addr}: body of {} bytes, Content-Length {len:?}", body.len()));
    }
    Ok(Scraped { took, body: body.to_owned() })
}

/// The samples of a Prometheus text exposition (format 0.0.4): `series → value`, where the
/// series is the metric name with its label set as written (`name{a="b"}`). Comments, blank
/// lines and lines that do not parse are skipped; a timestamp after the value is ignored.
pub fn parse_samples(text: &str) -> BTreeMap<String, f64> {
    text.lines().filter_map(parse_sample).map(|(k, v)| (k.to_owned(), v)).collect()
}

/// One sample line: (series, value).
fn parse_sample(line: &str) -> Option<(&str, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    if name_end == 0 {
        return None;
    }
    let series_end = if line[name_end..].starts_with('{') {
        // Label values are quoted, with `\\`, `\"` and `\n` escaped: find the unquoted `}`.
        let (mut quoted, mut escaped) = (false, false);
        let mut end = None;
        for (i, c) in line[name_end..].char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                '}' if !quoted => {
                    end = Some(name_end + i + 1);
                    break;
                }
                _ => {}
            }
        }
        end?
    } else {
        name_end
    };
    let mut rest = line[series_end..].split_whitespace();
    let value = match rest.next()? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse::<f64>().ok()?,
    };
    match (rest.next(), rest.next()) {
        (None, _) => {}
        (Some(ts), None) if ts.parse::<i64>().is_ok() => {}
        _ => return None,
    }
    Some((&line[..series_end], value))
}

/// The sum of every sample of family `name` (any labels).
pub fn family_sum(samples: &BTreeMap<String, f64>, name: &str) -> f64 {
    samples.iter().filter(|(k, _)| k.as_str() == name || k.strip_prefix(name).is_some_and(|r| r.starts_with('{'))).map(|(_, v)| v).sum()
}

/// What the workers' counters said at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Reading {
    tx_pkts: u64,
    batches: u64,
    rx_pkts: u64,
    port_rx_drops: u64,
    control_messages: u64,
    control_cycles: u64,
}

impl Reading {
    fn of(body: &str) -> Reading {
        let s = parse_samples(body);
        let n = |f: &str| family_sum(&s, f) as u64;
        Reading {
            tx_pkts: n("fastpath_worker_tx_packets_total"),
            batches: n("fastpath_worker_batches_total"),
            rx_pkts: n("fastpath_worker_rx_packets_total"),
            port_rx_drops: n("fastpath_port_rx_drops_total"),
            control_messages: n("fastpath_worker_control_messages_total"),
            control_cycles: n("fastpath_worker_control_cycles_total"),
        }
    }
}

/// What the scraper did in one window.
#[derive(Debug, Default)]
struct Scrapes {
    ms: Vec<f64>,
    bytes: u64,
    failures: u64,
    first_error: Option<String>,
    secs: f64,
}

/// Scrapes `addr` every `1 / rate` seconds until `stop` (a scraper that falls behind does not
/// catch up in a burst). With `rate` 0 it runs the same loop without scraping: the windows
/// without scraping have the same thread waking as often on the tester's CPU, so the scrapes
/// are the only difference between the windows.
fn scraper(addr: SocketAddr, rate: f64, stop: &AtomicBool) -> Scrapes {
    // The longest nap: `stop` is seen within it.
    const NAP: Duration = Duration::from_millis(5);
    let period = (rate > 0.0).then(|| Duration::from_secs_f64(1.0 / rate));
    let mut out = Scrapes::default();
    let t0 = Instant::now();
    let mut next = t0;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        match period {
            Some(p) if now >= next => {
                match scrape(addr, SCRAPE_TIMEOUT) {
                    Ok(s) => {
                        out.ms.push(s.took.as_secs_f64() * 1e3);
                        out.bytes = s.body.len() as u64;
                    }
                    Err(e) => {
                        out.failures += 1;
                        out.first_error.get_or_insert(e);
                    }
                }
                next = (next + p).max(Instant::now() - p);
            }
            Some(_) => std::thread::sleep((next - now).min(NAP)),
            None => std::thread::sleep(NAP),
        }
    }
    out.secs = t0.elapsed().as_secs_f64();
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let k = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[k.min(sorted.len() - 1)]
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    percentile(&s, 0.5)
}

/// The kinds of window (0 first), in the order of round `round`: rotated by one each round,
/// and backwards in the second n of every 2n rounds (n kinds). With up to two scrape rates,
/// 2n rounds put every kind right after every other kind equally often (a Williams design):
/// a window's neighbour then cannot favour one kind. Without it, a position effect on this
/// shared machine (the second kind of each rotation always beat the third, whichever it was)
/// was larger than the scrapes' cost.
pub fn window_order(rates: &[f64], round: u32) -> Vec<f64> {
    let mut v = vec![0.0];
    v.extend_from_slice(rates);
    let n = v.len();
    v.rotate_left(round as usize % n);
    if (round as usize / n) % 2 == 1 {
        v.reverse();
    }
    v
}

/// TSC ticks per second, measured against the monotonic clock over 100 ms.
fn tsc_hz() -> f64 {
    let (t0, c0) = (Instant::now(), fastpath_packet::prefetch::cycles());
    std::thread::sleep(Duration::from_millis(100));
    let (s, c) = (t0.elapsed().as_secs_f64(), fastpath_packet::prefetch::cycles().wrapping_sub(c0) as f64);
    if c > 0.0 && s > 0.0 {
        c / s
    } else {
        0.0
    }
}

/// Summarises the windows: one row per kind, no scraping first. `tsc_hz` converts the
/// workers' cycles to time (0: unknown).
fn rows(cfg: &MetricsCostConfig, windows: &[Window], scrapes: &BTreeMap<u64, Scrapes>, tsc_hz: f64) -> Vec<MetricsCostRow> {
    let kinds = window_order(&cfg.scrape_rates, 0);
    let of = |rate: f64| windows.iter().filter(move |w| w.scrapes_per_s == rate);
    let none: Vec<f64> = of(0.0).map(|w| w.sink_mpps).collect();
    let none_median = median(&none);
    let (lo, hi) = none.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    let noise_pct = if none_median > 0.0 && none.len() > 1 { (hi - lo) / none_median * 100.0 } else { 0.0 };
    kinds
        .iter()
        .map(|&rate| {
            let ws: Vec<Window> = of(rate).cloned().collect();
            let sink: Vec<f64> = ws.iter().map(|w| w.sink_mpps).collect();
            let sink_mpps = median(&sink);
            let ratio = if none_median > 0.0 { sink_mpps / none_median } else { 0.0 };
            let sc = scrapes.get(&rate.to_bits());
            let (msgs, cycles, secs) =
                ws.iter().fold((0u64, 0u64, 0.0), |(m, c, t), w| (m + w.control_messages, c + w.control_cycles, t + w.between_s));
            let per_scrape = if msgs > 0 { cycles as f64 / msgs as f64 } else { 0.0 };
            let mut ms = sc.map(|s| s.ms.clone()).unwrap_or_default();
            ms.sort_by(f64::total_cmp);
            MetricsCostRow {
                test: "metrics-cost",
                scrapes_per_s: rate,
                frame_size: cfg.frame_size,
                flows: cfg.flows,
                rounds: ws.len() as u32,
                window_s: cfg.window_s,
                offered_mpps: median(&ws.iter().map(|w| w.offered_mpps).collect::<Vec<_>>()),
                sink_mpps,
                sink_mpps_min: sink.iter().copied().fold(f64::INFINITY, f64::min).min(sink_mpps),
                sink_mpps_max: sink.iter().copied().fold(0.0, f64::max),
                worker_mpps: median(&ws.iter().map(|w| w.worker_mpps).collect::<Vec<_>>()),
                pkts_per_batch: median(&ws.iter().map(|w| w.pkts_per_batch).collect::<Vec<_>>()),
                ratio_vs_none: ratio,
                noise_pct,
                within_noise: (none.len() > 1).then(|| (1.0 - ratio).abs() * 100.0 <= noise_pct),
                scrapes: ws.iter().map(|w| w.scrapes).sum(),
                scrape_failures: ws.iter().map(|w| w.scrape_failures).sum(),
                scrapes_per_s_achieved: {
                    let secs: f64 = ws.iter().map(|w| w.scraper_s).sum();
                    if secs > 0.0 {
                        ws.iter().map(|w| w.scrapes).sum::<u64>() as f64 / secs
                    } else {
                        0.0
                    }
                },
                worker_cycles_per_scrape: per_scrape,
                worker_us_per_scrape: if tsc_hz > 0.0 { per_scrape / tsc_hz * 1e6 } else { 0.0 },
                worker_control_pct: if tsc_hz > 0.0 && secs > 0.0 { cycles as f64 / (tsc_hz * secs) * 100.0 } else { 0.0 },
                scrape_ms: ScrapeMs { p50: percentile(&ms, 0.5), p99: percentile(&ms, 0.99), max: ms.last().copied().unwrap_or(0.0) },
                scrape_bytes: sc.map_or(0, |s| s.bytes),
                windows: ws,
            }
        })
        .collect()
}

/// Runs the test.
///
/// # Errors
/// [`LabError::NotRoot`], a bad config, the DUT not starting or not answering `/metrics`, or a
/// generator failure.
pub fn run(cfg: &MetricsCostConfig, progress: &mut dyn FnMut(&str)) -> Result<MetricsCostResults, LabError> {
    if let Some(r) = cfg.scrape_rates.iter().find(|r| !(r.is_finite() && **r > 0.0 && **r <= 10_000.0)) {
        return Err(LabError::Config(format!("--scrape-rate {r}: give scrapes per second above 0 and at most 10000")));
    }
    if cfg.scrape_rates.is_empty() {
        return Err(LabError::Config("--scrape-rate: give at least one rate".into()));
    }
    if cfg.rounds == 0 || !(cfg.window_s >= 0.2 && cfg.window_s <= 600.0) {
        return Err(LabError::Config(format!(
            "--repeat {} and --trial-s {}: at least one round of windows of 0.2 to 600 s",
            cfg.rounds, cfg.window_s
        )));
    }
    for ns in topo::cleanup_stale() {
        progress(&format!("removed {ns}, left behind by a lab run that no longer exists"));
    }
    let t = Topology::create(&TopoConfig::default())?;
    let tag = format!("fp-metrics-cost-{}", std::process::id());
    let (spec, entries) = (cfg.work_dir.join(format!("{tag}.toml")), cfg.work_dir.join(format!("{tag}.txt")));
    let files = Cleanup(vec![spec.clone(), entries.clone()]);
    let write = |p: &Path, s: &str| std::fs::write(p, s).map_err(|e| LabError::Io(format!("{}: {e}", p.display())));
    write(&spec, SPEC)?;
    write(&entries, ENTRIES)?;
    let k = &cfg.port_kind;
    let mut dc = DutConfig::new(DutKind::Fastpath);
    let p = |s: &Path| s.to_string_lossy().into_owned();
    dc.fastpath_cmd = vec![p(&cfg.fastpath_exe), "run".into(), p(&spec), "--entries".into(), p(&entries)];
    dc.fastpath_cmd.extend(["--port".into(), format!("p0={k}:{{in}}"), "--port".into(), format!("p1={k}:{{out}}")]);
    dc.fastpath_cmd.extend(["--core".into(), "1".into(), "--metrics".into(), METRICS_ADDR.into()]);
    dc.fastpath_cmd.extend(cfg.fastpath_args.iter().cloned());
    dc.label = Some("fastpath".into());
    let dut = Dut::start(&t, &dc)?;
    let addr: SocketAddr = METRICS_ADDR.parse().map_err(|e| LabError::Config(format!("{METRICS_ADDR}: {e}")))?;
    let ns = t.dut_ns.clone();
    let scrape_in_dut = || -> Result<Scraped, LabError> { topo::in_netns(&ns, || scrape(addr, SCRAPE_TIMEOUT))?.map_err(LabError::Io) };
    let waited = Instant::now();
    let first = loop {
        match scrape_in_dut() {
            Ok(s) => break s,
            Err(e) if waited.elapsed() > Duration::from_secs(20) => {
                return Err(LabError::Io(format!("fastpath does not answer /metrics 20 s after start: {e}")))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    progress(&format!(
        "fastpath: started in {} with --metrics {METRICS_ADDR} (a scrape: {} bytes, {:.2} ms)",
        t.dut_ns,
        first.body.len(),
        first.took.as_secs_f64() * 1e3
    ));
    let traffic = Traffic::attach(&t, cfg.mode)?;
    let (size, flows) = (cfg.frame_size, cfg.flows);
    let ready = Instant::now();
    loop {
        let tr = traffic.trial(size, flows, 10_000, Duration::from_millis(200))?;
        if tr.received > 0 {
            break;
        }
        if ready.elapsed() > Duration::from_secs(20) {
            return Err(LabError::Io("fastpath forwards nothing 20 s after start".into()));
        }
    }
    // Warm-up at the run's load, not measured (caches, the kernel's socket buffers).
    let warm = traffic.trial(size, flows, cfg.offered_pps, Duration::from_secs_f64(cfg.window_s.min(1.0)))?;
    progress(&format!("warm-up: offered {:.3} Mpps, forwarded {:.3} Mpps", warm.offered_mpps(), warm.received_mpps()));
    let dur = Duration::from_secs_f64(cfg.window_s);
    let mut windows = Vec::new();
    let mut scrapes: BTreeMap<u64, Scrapes> = BTreeMap::new();
    for round in 0..cfg.rounds {
        for rate in window_order(&cfg.scrape_rates, round) {
            if topo::interrupted() {
                return Err(LabError::Interrupted);
            }
            let before = Reading::of(&scrape_in_dut()?.body);
            let t_before = Instant::now();
            let stop = AtomicBool::new(false);
            let (tr, sc) = std::thread::scope(|s| -> Result<(Trial, Scrapes), LabError> {
                let h = s.spawn(|| topo::in_netns(&ns, || scraper(addr, rate, &stop)));
                let tr = traffic.trial(size, flows, cfg.offered_pps, dur);
                stop.store(true, Ordering::Relaxed);
                let sc = h.join().map_err(|_| LabError::Io("the scraper thread panicked".into()))??;
                Ok((tr?, sc))
            })?;
            let after = Reading::of(&scrape_in_dut()?.body);
            let between_s = t_before.elapsed().as_secs_f64();
            let secs = tr.elapsed_s.max(1e-9);
            let tx = after.tx_pkts.saturating_sub(before.tx_pkts);
            let batches = after.batches.saturating_sub(before.batches);
            let w = Window {
                round,
                scrapes_per_s: rate,
                sent: tr.sent,
                received: tr.received,
                elapsed_s: tr.elapsed_s,
                offered_mpps: tr.offered_mpps(),
                sink_mpps: tr.received_mpps(),
                worker_tx_pkts: tx,
                worker_mpps: tx as f64 / secs / 1e6,
                pkts_per_batch: if batches > 0 { after.rx_pkts.saturating_sub(before.rx_pkts) as f64 / batches as f64 } else { 0.0 },
                port_rx_drops: after.port_rx_drops.saturating_sub(before.port_rx_drops),
                scrapes: sc.ms.len() as u64,
                scrape_failures: sc.failures,
                scraper_s: sc.secs,
                between_s,
                control_messages: after.control_messages.saturating_sub(before.control_messages),
                control_cycles: after.control_cycles.saturating_sub(before.control_cycles),
            };
            let mut line = format!(
                "  round {round} {:>12}: offered {:.3} Mpps, forwarded {:.3} Mpps (workers {:.3} Mpps, {:.1} pkts/batch, {} dropped at the port)",
                if rate == 0.0 { "no scraping".to_owned() } else { format!("{rate} scrapes/s") },
                w.offered_mpps,
                w.sink_mpps,
                w.worker_mpps,
                w.pkts_per_batch,
                w.port_rx_drops
            );
            if rate > 0.0 {
                let mut ms = sc.ms.clone();
                ms.sort_by(f64::total_cmp);
                line.push_str(&format!(", {} scrapes in {:.2} s, p50 {:.2} ms", ms.len(), sc.secs, percentile(&ms, 0.5)));
            }
            progress(&line);
            if let Some(e) = &sc.first_error {
                progress(&format!("  {} scrape(s) failed; the first: {e}", sc.failures));
            }
            let acc = scrapes.entry(rate.to_bits()).or_default();
            acc.ms.extend(sc.ms);
            if sc.bytes > 0 {
                acc.bytes = sc.bytes;
            }
            acc.failures += sc.failures;
            windows.push(w);
        }
    }
    let rows = rows(cfg, &windows, &scrapes, tsc_hz());
    for r in &rows {
        progress(&format!(
            "{:>12}: forwarded {:.3} Mpps median ({:.3}–{:.3}), ratio to none {:.4}, noise {:.1} %{}",
            if r.scrapes_per_s == 0.0 { "no scraping".to_owned() } else { format!("{} scrapes/s", r.scrapes_per_s) },
            r.sink_mpps,
            r.sink_mpps_min,
            r.sink_mpps_max,
            r.ratio_vs_none,
            r.noise_pct,
            if r.scrapes_per_s > 0.0 {
                format!(
                    "; {} scrapes of {} bytes, p50 {:.2} ms p99 {:.2} ms; a scrape took the worker {:.0} cycles ({:.2} µs), {:.4} % of its time",
                    r.scrapes,
                    r.scrape_bytes,
                    r.scrape_ms.p50,
                    r.scrape_ms.p99,
                    r.worker_cycles_per_scrape,
                    r.worker_us_per_scrape,
                    r.worker_control_pct
                )
            } else {
                String::new()
            }
        ));
    }
    drop(traffic);
    drop(dut);
    drop(files);
    Ok(MetricsCostResults { rows, dut_ns: t.dut_ns.clone() })
}

/// Removes the run's files when it ends, however it ends.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TEXT: &str = "# HELP fastpath_worker_tx_packets_total Packets.\n\
        # TYPE fastpath_worker_tx_packets_total counter\n\
        fastpath_worker_tx_packets_total{worker=\"0\"} 100\n\
        fastpath_worker_tx_packets_total{worker=\"1\"} 23\n\
        fastpath_worker_tx_packets_total_extra 7\n\
        fastpath_port_rx_drops_total{port=\"a }\\\"b\"} 5 1700000000000\n\
        fastpath_workers{pipeline=\"l2fwd\"} 2\n\
        \n\
        bad line\n\
        fastpath_x{unclosed=\"} 3\n";

    #[test]
    fn samples_parse_with_labels_escapes_and_timestamps() {
        let s = parse_samples(TEXT);
        assert_eq!(s.get("fastpath_worker_tx_packets_total{worker=\"0\"}"), Some(&100.0));
        assert_eq!(s.get("fastpath_port_rx_drops_total{port=\"a }\\\"b\"}"), Some(&5.0), "{s:?}");
        assert_eq!(family_sum(&s, "fastpath_worker_tx_packets_total"), 123.0, "another family with the prefix is not summed");
        assert_eq!(family_sum(&s, "fastpath_worker_tx_packets_total_extra"), 7.0);
        assert_eq!(s.len(), 5, "the bad and unclosed lines are skipped: {s:?}");
        let r = Reading::of(TEXT);
        assert_eq!((r.tx_pkts, r.port_rx_drops, r.batches), (123, 5, 0));
    }

    #[test]
    fn windows_rotate_every_round() {
        assert_eq!(window_order(&[10.0, 1.0], 0), vec![0.0, 10.0, 1.0]);
        assert_eq!(window_order(&[10.0, 1.0], 1), vec![10.0, 1.0, 0.0]);
        assert_eq!(window_order(&[10.0, 1.0], 3), vec![1.0, 10.0, 0.0], "backwards in rounds 3..6");
        assert_eq!(window_order(&[10.0, 1.0], 6), vec![0.0, 10.0, 1.0]);
        assert_eq!(window_order(&[10.0], 1), vec![10.0, 0.0]);
    }

    #[test]
    fn over_2n_rounds_every_kind_follows_every_other_equally_often() {
        for rates in [vec![10.0], vec![10.0, 1.0]] {
            let n = rates.len() as u32 + 1;
            let mut after: BTreeMap<(u64, u64), u32> = BTreeMap::new();
            for round in 0..2 * n {
                for w in window_order(&rates, round).windows(2) {
                    *after.entry((w[0].to_bits(), w[1].to_bits())).or_default() += 1;
                }
            }
            assert_eq!(after.len() as u32, n * (n - 1), "every ordered pair occurs: {rates:?}");
            let counts: Vec<u32> = after.values().copied().collect();
            assert!(counts.iter().all(|&c| c == counts[0]), "{rates:?}: {after:?}");
        }
    }

    fn window(round: u32, rate: f64, mpps: f64) -> Window {
        Window {
            round,
            scrapes_per_s: rate,
            sink_mpps: mpps,
            scrapes: if rate > 0.0 { 30 } else { 0 },
            scraper_s: 3.0,
            between_s: 4.0,
            // The window's scrapes and the reading before it, 4,000 cycles each.
            control_messages: if rate > 0.0 { 31 } else { 1 },
            control_cycles: if rate > 0.0 { 31 * 4000 } else { 4000 },
            ..Window::default()
        }
    }

    #[test]
    fn rows_take_medians_ratios_and_the_noise_of_the_unscraped_windows() {
        let cfg = MetricsCostConfig { scrape_rates: vec![10.0], ..MetricsCostConfig::default() };
        let ws = [
            window(0, 0.0, 1.0),
            window(0, 10.0, 0.9),
            window(1, 0.0, 1.1),
            window(1, 10.0, 0.8),
            window(2, 0.0, 0.9),
            window(2, 10.0, 1.0),
        ];
        let mut sc = BTreeMap::new();
        sc.insert(10f64.to_bits(), Scrapes { ms: vec![3.0, 1.0, 2.0], bytes: 4096, ..Scrapes::default() });
        let r = rows(&cfg, &ws, &sc, 2e9);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].scrapes_per_s, r[0].sink_mpps, r[0].ratio_vs_none), (0.0, 1.0, 1.0));
        assert!((r[0].noise_pct - 20.0).abs() < 1e-9, "(1.1 - 0.9) / 1.0: {}", r[0].noise_pct);
        assert_eq!((r[1].sink_mpps, r[1].sink_mpps_min, r[1].sink_mpps_max), (0.9, 0.8, 1.0));
        assert!((r[1].ratio_vs_none - 0.9).abs() < 1e-9);
        assert_eq!(r[1].within_noise, Some(true), "10 % off, 20 % noise");
        assert_eq!((r[1].scrapes, r[1].scrape_bytes, r[1].scrape_ms.p50, r[1].scrape_ms.max), (90, 4096, 2.0, 3.0));
        assert_eq!((r[1].scrapes_per_s_achieved, r[0].scrapes_per_s_achieved), (10.0, 0.0));
        assert_eq!((r[1].worker_cycles_per_scrape, r[1].worker_us_per_scrape), (4000.0, 2.0), "4,000 cycles at 2 GHz");
        // 31 × 4,000 cycles in 4 s at 2 GHz, in each window.
        assert!((r[1].worker_control_pct - 31.0 * 4000.0 / 8e9 * 100.0).abs() < 1e-12, "{}", r[1].worker_control_pct);
        assert_eq!(r[1].windows.len(), 3);
        // One round: no noise figure.
        let r = rows(&cfg, &ws[..2], &sc, 0.0);
        assert_eq!(r[1].within_noise, None);
    }

    #[test]
    fn a_scrape_checks_status_and_length() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let answers = [
            "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nfastpath 1\r\n".to_owned(),
            "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\n\r\nslow\n".to_owned(),
            "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nshort".to_owned(),
        ];
        std::thread::scope(|s| {
            s.spawn(|| {
                for a in &answers {
                    let (mut c, _) = l.accept().unwrap();
                    let mut buf = [0u8; 512];
                    let _ = c.read(&mut buf).unwrap();
                    c.write_all(a.as_bytes()).unwrap();
                }
            });
            assert_eq!(scrape(addr, Duration::from_secs(5)).unwrap().body, "fastpath 1\r\n");
            assert!(scrape(addr, Duration::from_secs(5)).unwrap_err().contains("503 Service Unavailable: slow"));
            assert!(scrape(addr, Duration::from_secs(5)).unwrap_err().contains("Content-Length Some(99)"));
        });
    }

    #[test]
    fn bad_configs_are_refused_before_anything_starts() {
        let bad = |c: MetricsCostConfig| run(&c, &mut |_| {}).unwrap_err().to_string();
        assert!(bad(MetricsCostConfig { scrape_rates: vec![0.0], ..MetricsCostConfig::default() }).contains("--scrape-rate 0"));
        assert!(bad(MetricsCostConfig { scrape_rates: vec![], ..MetricsCostConfig::default() }).contains("at least one rate"));
        assert!(bad(MetricsCostConfig { rounds: 0, ..MetricsCostConfig::default() }).contains("--repeat 0"));
        assert!(bad(MetricsCostConfig { window_s: 0.0, ..MetricsCostConfig::default() }).contains("--trial-s 0"));
    }

    proptest! {
        /// The exposition parser never panics, whatever the bytes.
        #[test]
        fn the_parser_takes_any_text(text in "\\PC{0,200}", raw in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_samples(&text);
            let _ = parse_samples(&String::from_utf8_lossy(&raw));
        }

        /// A sample written with any label values (escaped as the exposition format says) reads
        /// back with its value.
        #[test]
        fn written_samples_read_back(
            name in "[a-z_][a-z0-9_]{0,20}",
            labels in prop::collection::vec(("[a-z_]{1,8}", "\\PC{0,12}"), 0..4),
            value in any::<u64>(),
        ) {
            let esc = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
            let set: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", esc(v))).collect();
            let series = if set.is_empty() { name.clone() } else { format!("{name}{{{}}}", set.join(",")) };
            let s = parse_samples(&format!("# TYPE {name} counter\n{series} {value}\n"));
            prop_assert_eq!(s.get(&series).copied(), Some(value as f64));
            prop_assert_eq!(family_sum(&s, &name), value as f64);
        }
    }
}
