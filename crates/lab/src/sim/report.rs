//! The simulation's results as text tables (for stdout) and as sections of the lab's HTML
//! report ([`crate::report`]).

use super::burst::BurstResult;
use super::engine::PS_PER_S;
use super::incast::IncastResult;
use super::switch::BufferModel;
use crate::report::{Chart, Report};
use std::fmt::Write as _;

const MB: f64 = 1e6;

fn ms(ps: u64) -> f64 {
    ps as f64 / 1e9
}

/// min / median / max of `v` (0s for an empty slice).
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match (s.first(), s.get(s.len() / 2), s.last()) {
        (Some(&a), Some(&m), Some(&b)) => (a, m, b),
        _ => (0.0, 0.0, 0.0),
    }
}

const INCAST_HEADERS: [&str; 18] = [
    "buffer",
    "N",
    "flows",
    "MB/flow",
    "JCT ms",
    "ideal ms",
    "JCT/ideal",
    "mean Gb/s",
    "steady Gb/s",
    "steady % L",
    "min Gb/s",
    "flow Gb/s min/med/max",
    "Jain",
    "retx",
    "fast rtx",
    "RTOs",
    "drops",
    "peak MB",
];

fn incast_row(r: &IncastResult, rate_bps: u64) -> Vec<String> {
    let (lo, med, hi) = spread(&r.flow_rates_bps);
    let per_flow = if r.flows > 0 { r.bytes_total / u64::from(r.flows) } else { 0 };
    vec![
        r.model.name().to_owned(),
        r.senders.to_string(),
        r.flows.to_string(),
        if per_flow == 0 { "∞".to_owned() } else { format!("{:.1}", per_flow as f64 / MB) },
        r.jct_ps.map_or_else(|| format!(">{:.1}", ms(r.end_ps)), |j| format!("{:.1}", ms(j))),
        format!("{:.1}", ms(r.ideal_ps)),
        r.jct_ps.map_or_else(|| "-".to_owned(), |j| format!("{:.2}", j as f64 / r.ideal_ps.max(1) as f64)),
        format!("{:.1}", r.mean_gbps()),
        format!("{:.1}", r.steady_gbps()),
        format!("{:.1}", r.steady_gbps() * 1e9 * 100.0 / rate_bps as f64),
        format!("{:.1}", r.min_gbps()),
        format!("{:.2}/{:.2}/{:.2}", lo / 1e9, med / 1e9, hi / 1e9),
        format!("{:.3}", r.jain),
        r.tcp.retx_segs.to_string(),
        r.tcp.fast_retx.to_string(),
        r.tcp.timeouts.to_string(),
        r.drops.to_string(),
        format!("{:.2}", r.hwm_bytes as f64 / MB),
    ]
}

/// Aligned text table of incast results, one row per run; ECN marks are added as a column
/// when any run marked.
pub fn incast_table(rows: &[IncastResult], rate_bps: u64) -> String {
    let mut headers: Vec<&str> = INCAST_HEADERS.to_vec();
    let marks = rows.iter().any(|r| r.marks > 0 || r.tcp.ecn_cuts > 0);
    let mut cells: Vec<Vec<String>> = rows.iter().map(|r| incast_row(r, rate_bps)).collect();
    if marks {
        headers.push("ECN marks");
        for (c, r) in cells.iter_mut().zip(rows) {
            c.push(r.marks.to_string());
        }
    }
    text_table(&headers, &cells)
}

/// Columns: frame size, then MB absorbed per (fan-in, model), then static ÷ shared per fan-in.
fn burst_pivot(rows: &[BurstResult]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut fanins: Vec<u32> = rows.iter().map(|r| r.senders).collect();
    fanins.sort_unstable();
    fanins.dedup();
    let mut frames: Vec<u32> = rows.iter().map(|r| r.frame_bytes).collect();
    frames.sort_unstable();
    frames.dedup();
    let get = |k: u32, f: u32, m: BufferModel| rows.iter().find(|r| r.senders == k && r.frame_bytes == f && r.model == m);
    let mut headers = vec!["frame B".to_owned()];
    for &k in &fanins {
        headers.push(format!("{k}:1 shared MB"));
        headers.push(format!("{k}:1 static MB"));
        headers.push(format!("{k}:1 shared/static"));
    }
    let cells = frames
        .iter()
        .map(|&f| {
            let mut row = vec![f.to_string()];
            for &k in &fanins {
                let s = get(k, f, BufferModel::Shared);
                let t = get(k, f, BufferModel::Static);
                let mb = |r: Option<&BurstResult>| r.map_or_else(|| "-".to_owned(), |r| format!("{:.2}", r.burst_bytes as f64 / MB));
                row.push(mb(s));
                row.push(mb(t));
                row.push(match (s, t) {
                    (Some(s), Some(t)) if t.burst_bytes > 0 => format!("{:.1}", s.burst_bytes as f64 / t.burst_bytes as f64),
                    _ => "-".to_owned(),
                });
            }
            row
        })
        .collect();
    (headers, cells)
}

/// Aligned text table of burst results: one row per frame size, MB absorbed with zero loss per
/// fan-in and buffer model (MB = 10⁶ bytes, the whole burst, all senders).
pub fn burst_table(rows: &[BurstResult]) -> String {
    let (h, c) = burst_pivot(rows);
    let h: Vec<&str> = h.iter().map(String::as_str).collect();
    text_table(&h, &c)
}

/// A text table: columns padded to their widest cell, numbers right-aligned.
pub fn text_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let cols = headers.len();
    let width =
        |c: usize| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).chain([headers[c].chars().count()]).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols).map(width).collect();
    let mut o = String::new();
    let line = |o: &mut String, cells: &[String]| {
        let mut first = true;
        for (c, w) in widths.iter().enumerate() {
            let v = cells.get(c).map(String::as_str).unwrap_or("");
            if !first {
                o.push_str("  ");
            }
            first = false;
            let numeric = v.starts_with(|ch: char| ch.is_ascii_digit() || ch == '>' || ch == '-' || ch == '∞');
            let pad = w.saturating_sub(v.chars().count());
            if numeric && c > 0 {
                let _ = write!(o, "{}{v}", " ".repeat(pad));
            } else {
                let _ = write!(o, "{v}{}", " ".repeat(pad));
            }
        }
        o.push('\n');
    };
    line(&mut o, &headers.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>());
    for r in rows {
        line(&mut o, r);
    }
    o
}

/// Adds the incast section: the table, goodput over time per fan-in, completion time against
/// fan-in, and the per-flow rates of the largest fan-in.
pub fn add_incast(report: &mut Report, rows: &[IncastResult], rate_bps: u64, about: &str) {
    report.heading("Incast: N senders × M TCP flows into one port");
    report.para(about);
    let headers: Vec<&str> = INCAST_HEADERS.to_vec();
    report.table(&headers, rows.iter().map(|r| incast_row(r, rate_bps)).collect());
    let mut fanins: Vec<u32> = rows.iter().map(|r| r.senders).collect();
    fanins.sort_unstable();
    fanins.dedup();
    for &n in &fanins {
        let mut c = Chart::new(format!("Aggregate goodput over time, {n}-to-1")).x_label("time (ms)").y_label("goodput (Gbit/s)");
        for r in rows.iter().filter(|r| r.senders == n) {
            c = c.series(r.model.name(), r.series_gbps(400));
        }
        report.line_chart(c);
    }
    let mut c = Chart::new("Job completion time ÷ (bytes ÷ line rate)").x_label("senders").y_label("JCT / ideal");
    for m in BufferModel::ALL {
        let bars: Vec<(String, f64)> = rows
            .iter()
            .filter(|r| r.model == m)
            .map(|r| (format!("{}-to-1", r.senders), r.jct_ps.unwrap_or(r.end_ps) as f64 / r.ideal_ps.max(1) as f64))
            .collect();
        if !bars.is_empty() {
            c = c.bars(m.name(), bars);
        }
    }
    report.bar_chart(c);
    if let Some(&n) = fanins.last() {
        let mut c = Chart::new(format!("Per-flow goodput (bytes ÷ completion time), {n}-to-1, sorted"))
            .x_label("flow (rank)")
            .y_label("goodput (Gbit/s)");
        for r in rows.iter().filter(|r| r.senders == n) {
            let mut v = r.flow_rates_bps.clone();
            v.sort_by(f64::total_cmp);
            c = c.series(
                format!("{} (Jain {:.3})", r.model.name(), r.jain),
                v.iter().enumerate().map(|(i, b)| (i as f64, b / 1e9)).collect(),
            );
        }
        report.line_chart(c);
    }
}

/// Adds the burst section: the table and MB absorbed against frame size per fan-in.
pub fn add_burst(report: &mut Report, rows: &[BurstResult], about: &str) {
    report.heading("Burst absorption: the largest burst with zero loss");
    report.para(about);
    let (h, c) = burst_pivot(rows);
    let h: Vec<&str> = h.iter().map(String::as_str).collect();
    report.table(&h, c);
    let mut frames: Vec<f64> = rows.iter().map(|r| f64::from(r.frame_bytes)).collect();
    frames.sort_by(f64::total_cmp);
    frames.dedup();
    let mut c = Chart::new("Largest burst absorbed without loss")
        .x_label("frame size (bytes)")
        .y_label("burst (MB, all senders)")
        .log_x()
        .x_ticks(&frames);
    let mut keys: Vec<(u32, BufferModel)> = rows.iter().map(|r| (r.senders, r.model)).collect();
    keys.sort_by_key(|&(k, m)| (k, m == BufferModel::Static));
    keys.dedup();
    for (k, m) in keys {
        let pts =
            rows.iter().filter(|r| r.senders == k && r.model == m).map(|r| (f64::from(r.frame_bytes), r.burst_bytes as f64 / MB)).collect();
        c = c.series(format!("{k}-to-1 {}", m.name()), pts);
    }
    report.line_chart(c);
}

/// Seconds of virtual time as a short label (`93.3 ms`, `1.20 s`).
pub fn fmt_ps(ps: u64) -> String {
    if ps >= PS_PER_S {
        format!("{:.2} s", ps as f64 / PS_PER_S as f64)
    } else {
        format!("{:.1} ms", ms(ps))
    }
}
