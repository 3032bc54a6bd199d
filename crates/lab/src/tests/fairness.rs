//! The `fairness` test: N senders offer UDP above the shaped rate R into one receiver; how
//! evenly does the DUT share R between them?
//!
//! ```text
//!  sender i: XDP live frames, paced at overload × R / N ─▶ d_i ─▶ [DUT] ─▶ d_N (R, buffer B) ─▶ r0
//!  receiver: nftables netdev ingress, one counter per sender's address, frames dropped there
//! ```
//!
//! Per (N, frame size, DUT) one trial of `duration_s`: every sender's generator runs at once
//! (one thread each, in its own namespace, on the tester's CPUs), each paced to offer
//! `overload` × R / N of frame bytes (the Ethernet frame without FCS, the bytes both shapers
//! count). When the senders stop and the shaped queue has drained, each sender's received
//! share is its frames ÷ all frames received, and Jain's fairness index over the received
//! rates is J = (Σx)² / (N Σx²): 1 when every sender gets R / N, 1/N when one gets it all
//! (R. Jain, D. Chiu, W. Hawe, DEC-TR-301, 1984). The row also carries what each generator
//! really offered, so a generator that fell short (a tester core shared by N threads) shows.
//!
//! Everything is in one class: the DUT shares by how its single queue admits packets (tail
//! drop at the buffer or the dynamic threshold), exactly what a bridge with a byte FIFO does.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::switch::{jain_index, RxCounters, Shaping, Switch, SwitchConfig, SwitchDut};
use crate::fanin_topo::{FaninConfig, FaninTopo, Host};
use crate::gen::{build_frame, FrameSpec, GenProg, Pacing, BASE_PORT, DATA_PORT, FCS_LEN};
use crate::report::{Chart, Report};
use crate::topo::{self};
use crate::LabError;

/// Configuration of a fairness run.
#[derive(Clone, Debug)]
pub struct FairnessConfig {
    /// DUTs, each in its own topology.
    pub duts: Vec<SwitchDut>,
    /// Sender counts N.
    pub senders: Vec<usize>,
    /// RFC 2544 frame sizes (with FCS), at most 1518 (the XDP generator's frames).
    pub frame_sizes: Vec<u16>,
    /// Shaped rate and buffer of the receiver port.
    pub shaping: Shaping,
    /// Total offered load as a multiple of R (> 1).
    pub overload: f64,
    /// Seconds per trial.
    pub duration_s: f64,
    /// How to start the DUTs.
    pub switch: SwitchConfig,
}

impl Default for FairnessConfig {
    fn default() -> FairnessConfig {
        FairnessConfig {
            duts: SwitchDut::ALL.to_vec(),
            senders: vec![2, 4, 8, 16],
            frame_sizes: vec![64, 1518],
            shaping: Shaping::new(100_000_000, 1 << 20),
            overload: 1.5,
            duration_s: 5.0,
            switch: SwitchConfig::default(),
        }
    }
}

/// One fairness result (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FairnessRow {
    /// `fairness`.
    pub test: &'static str,
    /// DUT name.
    pub dut: String,
    /// What shaped the receiver port.
    pub shaper: String,
    /// Senders N.
    pub senders: usize,
    /// RFC 2544 frame size (with FCS).
    pub frame_size: u16,
    /// R, bits per second.
    pub rate_bps: u64,
    /// Offered load asked for, × R.
    pub overload: f64,
    /// What each sender's generator offered, Mbit/s of frame bytes.
    pub offered_mbps: Vec<f64>,
    /// The senders together did not offer more than R (within 5 %): the DUT's egress was not
    /// congested, and the shares say nothing about it. Happens with the Linux bridge at small
    /// frames and high R: its forwarding runs in the generators' softirq, on their core.
    pub generator_limited: bool,
    /// What arrived from each sender, Mbit/s of frame bytes over the trial.
    pub received_mbps: Vec<f64>,
    /// Each sender's share of what arrived, 0..1.
    pub share: Vec<f64>,
    /// Jain's index over the received rates.
    pub jain: f64,
    /// All that arrived, Mbit/s (R is the most the shaper lets through).
    pub received_total_mbps: f64,
    /// Frames sent, all senders.
    pub sent: u64,
    /// Frames received, all senders.
    pub received: u64,
    /// Seconds of sending (the slowest sender's).
    pub duration_s: f64,
}

/// Results of a fairness run.
#[derive(Clone, Debug, Default)]
pub struct FairnessResults {
    /// One per (N, frame size, DUT).
    pub rows: Vec<FairnessRow>,
    /// DUTs that could not run, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Per (DUT, N): the DUT's drops by reason over all its trials.
    pub drops: Vec<(String, usize, std::collections::BTreeMap<String, u64>)>,
}

/// Frames per second that fill `rate_bps` with frames of RFC 2544 size `frame_size`.
pub fn frames_per_s(rate_bps: u64, frame_size: u16) -> f64 {
    rate_bps as f64 / (8.0 * (usize::from(frame_size) - FCS_LEN) as f64)
}

/// Offers frames of `frame_size` from sender `h` to `to` at `rate_pps` for `duration` (the
/// calling thread enters the sender's namespace). Returns (sent, seconds).
fn offer(h: &Host, to: &Host, frame_size: u16, rate_pps: u64, duration: Duration) -> Result<(u64, f64), LabError> {
    let spec = FrameSpec { src_mac: h.mac, dst_mac: to.mac, src_ip: h.ip, dst_ip: to.ip, src_port: BASE_PORT, dst_port: DATA_PORT };
    let ifname = h.ifname.clone();
    topo::in_netns(&h.ns, move || -> Result<(u64, f64), LabError> {
        let g = GenProg::load()?;
        let idx = fastpath_io::sys::ifindex(&ifname)?;
        let frame = build_frame(&spec, frame_size, 0, 0, 0);
        let limit = (rate_pps as f64 * duration.as_secs_f64()).ceil() as u64;
        // Paced by the program, which catches up after waiting for the other generators on
        // the tester's core (up to 50 ms). Paced from user space instead (calls sending what
        // is due), each call took ~50 ms and delivered bursts of ~60 frames per sender.
        g.arm(limit, rate_pps, 1, BASE_PORT, Pacing::CatchUpWithin(Duration::from_millis(50)))?;
        let start = Instant::now();
        // Long calls: a call costs milliseconds to set up, and the program must keep running
        // to pace (2^20 repetitions, mostly "not yet", ~30 ms). With 2^15 per call 8 senders
        // offered 39 of 100 Mbit/s; capping a call at the frames left starved them the same
        // way. Where the DUT's forwarding runs inside the call (the bridge, in the sender's
        // softirq) sending is slower than planned; the trial then takes longer, and the row's
        // rates are over the real time.
        while g.sent()? < limit && start.elapsed() < duration {
            g.run(idx, &frame, 1 << 20)?;
        }
        Ok((g.sent()?, start.elapsed().as_secs_f64().max(1e-3)))
    })?
}

/// Per sender: (frames sent, seconds of sending), and frames received.
type TrialCounts = (Vec<(u64, f64)>, Vec<u64>);

/// One trial: every sender at once, then the receiver's counts.
fn trial(t: &FaninTopo, rx: &RxCounters, cfg: &FairnessConfig, frame_size: u16) -> Result<TrialCounts, LabError> {
    let n = t.senders.len();
    let per = (cfg.overload * frames_per_s(cfg.shaping.rate_bps, frame_size) / n as f64).ceil() as u64;
    let before = rx.read()?;
    let dur = Duration::from_secs_f64(cfg.duration_s);
    let sent: Vec<Result<(u64, f64), LabError>> = std::thread::scope(|s| {
        let hs: Vec<_> = t.senders.iter().map(|h| s.spawn(move || offer(h, &t.receiver, frame_size, per, dur))).collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(LabError::Io("a generator thread panicked".into())))).collect()
    });
    let sent = sent.into_iter().collect::<Result<Vec<_>, _>>()?;
    // The shaped queue drains at R: at most buffer × 8 / R, plus slack.
    let drain = Duration::from_secs_f64(cfg.shaping.buffer_bytes as f64 * 8.0 / cfg.shaping.rate_bps as f64);
    let after = rx.settle(Duration::from_millis(150), drain + Duration::from_secs(2))?;
    let got = after.iter().zip(&before).map(|(a, b)| a.saturating_sub(*b)).collect();
    Ok((sent, got))
}

/// Runs the fairness test for every N, DUT and frame size.
///
/// # Errors
/// [`LabError::NotRoot`], [`LabError::Interrupted`], [`LabError::Config`] for a bad
/// configuration, [`LabError::Unavailable`] without `nft`/`ethtool`, or a failing trial.
pub fn run(cfg: &FairnessConfig, progress: &mut dyn FnMut(&str)) -> Result<FairnessResults, LabError> {
    if cfg.duts.is_empty() || cfg.senders.is_empty() || cfg.frame_sizes.is_empty() {
        return Err(LabError::Config("fairness needs at least one DUT, sender count and frame size".into()));
    }
    if let Some(&s) = cfg.frame_sizes.iter().find(|&&s| !(64..=1518).contains(&s)) {
        return Err(LabError::Config(format!("fairness frame size {s}: give 64 to 1518 bytes (the XDP generator's frames)")));
    }
    if !(cfg.overload > 1.0 && cfg.overload.is_finite()) {
        return Err(LabError::Config(format!("overload {}: give a factor above 1 (offered load above R)", cfg.overload)));
    }
    if !fastpath_io::sys::is_root() {
        return Err(LabError::NotRoot);
    }
    super::switch::need_programs(&["nft", "ethtool", "tc"])?;
    for ns in topo::cleanup_stale() {
        progress(&format!("removed {ns}, left behind by a lab run that no longer exists"));
    }
    let mut out = FairnessResults::default();
    for &n in &cfg.senders {
        for &kind in &cfg.duts {
            let name = kind.name();
            // GRO on the DUT's ports: a veth takes the XDP generator's frames only with GRO on
            // (or an XDP program); UDP is not merged.
            let t = FaninTopo::create(&FaninConfig { senders: n, mtu: 1500, dut_gro: true, host_offloads: false })?;
            let rx = RxCounters::install(&t, DATA_PORT)?;
            let mut sw = match Switch::start(&t, kind, &cfg.shaping, &cfg.switch) {
                Ok(s) => s,
                Err(e @ LabError::Unavailable { .. }) => {
                    progress(&format!("{name}: skipped: {e}"));
                    out.skipped.push((name.to_owned(), e.to_string()));
                    continue;
                }
                Err(e) => return Err(e),
            };
            progress(&format!("{name} {n}-to-1: started ({}), R {} Mbit/s", sw.shaper, cfg.shaping.rate_bps / 1_000_000));
            for &size in &cfg.frame_sizes {
                if topo::interrupted() {
                    return Err(LabError::Interrupted);
                }
                let (sent, got) = trial(&t, &rx, cfg, size)?;
                let row = row(name, &sw.shaper, cfg, size, &sent, &got);
                progress(&format!(
                    "{name} {n}-to-1 {size} B: offered {:.1}{}, received {:.1} Mbit/s of R {:.0}, Jain {:.4}, shares {}",
                    row.offered_mbps.iter().sum::<f64>(),
                    if row.generator_limited { " (generator-limited: not above R)" } else { "" },
                    row.received_total_mbps,
                    cfg.shaping.rate_bps as f64 / 1e6,
                    row.jain,
                    row.share.iter().map(|s| format!("{:.3}", s)).collect::<Vec<_>>().join(" ")
                ));
                out.rows.push(row);
            }
            let mut drops = sw.drops();
            sw.stop();
            if kind == SwitchDut::Fastpath {
                drops = sw.drops();
            }
            let queues: Vec<String> = sw
                .queues()
                .iter()
                .map(|q| {
                    format!(
                        "port {} class {}: {} in, {} out, {} refused, high watermark {} B",
                        q.port, q.class, q.enq_pkts, q.deq_pkts, q.drops, q.hwm_bytes
                    )
                })
                .collect();
            progress(&format!("{name} {n}-to-1: DUT drops {drops:?}{}{}", if queues.is_empty() { "" } else { "; " }, queues.join("; ")));
            if let Some(c) = sw.counters() {
                progress(&format!("{name} {n}-to-1: DUT counters at its stop:\n{}", c.trim_end()));
            }
            out.drops.push((name.to_owned(), n, drops));
            drop(sw);
            drop(rx);
            drop(t);
        }
    }
    Ok(out)
}

/// The row of one trial: `sent` = (frames, seconds) and `got` = frames, per sender.
fn row(dut: &str, shaper: &str, cfg: &FairnessConfig, frame_size: u16, sent: &[(u64, f64)], got: &[u64]) -> FairnessRow {
    let bits = 8.0 * (usize::from(frame_size) - FCS_LEN) as f64;
    // The senders' real time: a generator whose frames cost the DUT's forwarding (the bridge
    // runs in its softirq) may need longer than planned, and then offered less.
    let secs = sent.iter().map(|x| x.1).fold(1e-3, f64::max);
    let received_mbps: Vec<f64> = got.iter().map(|&g| g as f64 * bits / secs / 1e6).collect();
    let total: u64 = got.iter().sum();
    let share = got.iter().map(|&g| if total == 0 { 0.0 } else { g as f64 / total as f64 }).collect();
    let offered_mbps: Vec<f64> = sent.iter().map(|&(n, s)| n as f64 * bits / s / 1e6).collect();
    let offered_total: f64 = offered_mbps.iter().sum();
    FairnessRow {
        test: "fairness",
        dut: dut.to_owned(),
        shaper: shaper.to_owned(),
        senders: got.len(),
        frame_size,
        rate_bps: cfg.shaping.rate_bps,
        overload: cfg.overload,
        generator_limited: offered_total < 1.05 * cfg.shaping.rate_bps as f64 / 1e6,
        offered_mbps,
        jain: jain_index(&received_mbps),
        received_total_mbps: received_mbps.iter().sum(),
        received_mbps,
        share,
        sent: sent.iter().map(|x| x.0).sum(),
        received: total,
        duration_s: secs,
    }
}

impl FairnessResults {
    /// One JSON object per line per (N, frame size, DUT).
    pub fn json_lines(&self) -> String {
        super::json_lines(&self.rows)
    }

    /// Adds the table, Jain's index against N and each sender's share to `report`.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("Fairness: N-to-1 UDP above the shaped rate");
        report.para(
            "Every sender offers the same UDP load, together above R, into one receiver behind an egress shaped to R. \
             Received rates are counted per sender at the receiver (nftables counters); Jain's index is 1 when every \
             sender gets R/N and 1/N when one gets everything. Target: ≥ 0.99 for 2/4/8/16-to-1 at 64 and 1518 B.",
        );
        for (d, why) in &self.skipped {
            report.para(format!("{d} skipped: {why}"));
        }
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let (lo, hi) = r.share.iter().fold((f64::INFINITY, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
                vec![
                    r.dut.clone(),
                    r.shaper.clone(),
                    r.senders.to_string(),
                    r.frame_size.to_string(),
                    format!("{:.1}{}", r.offered_mbps.iter().sum::<f64>(), if r.generator_limited { " (generator-limited)" } else { "" }),
                    format!("{:.1}", r.received_total_mbps),
                    format!("{:.4}", r.jain),
                    format!("{:.3}", lo * r.senders as f64),
                    format!("{:.3}", hi * r.senders as f64),
                ]
            })
            .collect();
        report
            .table(&["DUT", "shaper", "N", "frame B", "offered Mbit/s", "received Mbit/s", "Jain", "min share × N", "max share × N"], rows);
        for (d, n, drops) in &self.drops {
            if !drops.is_empty() {
                let list: Vec<String> = drops.iter().map(|(k, v)| format!("{k} {v}")).collect();
                report.para(format!("{d}, {n}-to-1, drops reported by the DUT over all its trials: {}", list.join(", ")));
            }
        }
        let mut sizes: Vec<u16> = self.rows.iter().map(|r| r.frame_size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let mut c = Chart::new("Jain's fairness index against senders").x_label("senders N").y_label("Jain's index");
        for &size in &sizes {
            let mut duts: Vec<&str> = self.rows.iter().map(|r| r.dut.as_str()).collect();
            duts.dedup();
            for d in duts {
                let pts = self.rows.iter().filter(|r| r.dut == d && r.frame_size == size).map(|r| (r.senders as f64, r.jain)).collect();
                c = c.series(format!("{d} {size} B"), pts);
            }
        }
        report.line_chart(c);
        for r in &self.rows {
            if r.senders == self.rows.iter().map(|x| x.senders).max().unwrap_or(0) {
                let bars = r.share.iter().enumerate().map(|(i, s)| (format!("s{i}"), s * r.senders as f64)).collect();
                report.bar_chart(
                    Chart::new(format!("{} {}-to-1, {} B: each sender's share × N (1 = fair)", r.dut, r.senders, r.frame_size))
                        .x_label("sender")
                        .y_label("share × N")
                        .bars(r.dut.clone(), bars),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_rate_counts_frame_bytes_without_fcs() {
        assert!((frames_per_s(100_000_000, 64) - 100e6 / 480.0).abs() < 1e-6);
        assert!((frames_per_s(100_000_000, 1518) - 100e6 / (8.0 * 1514.0)).abs() < 1e-6);
    }

    #[test]
    fn rows_give_shares_and_jain() {
        let cfg = FairnessConfig { duration_s: 2.0, ..FairnessConfig::default() };
        let r = row("fastpath", "tm", &cfg, 1518, &[(20_000, 2.0), (20_000, 1.9)], &[6000, 2000]);
        assert!(!r.generator_limited, "offered 2 × 121 Mbit/s above R 100: {r:?}");
        assert_eq!(r.share, vec![0.75, 0.25]);
        assert!((r.jain - 0.8).abs() < 1e-12, "(3+1)^2 / (2 (9+1)) = 0.8: {}", r.jain);
        assert!((r.received_total_mbps - 8000.0 * 1514.0 * 8.0 / 2.0 / 1e6).abs() < 1e-9);
        assert!((r.offered_mbps[0] - 20_000.0 * 1514.0 * 8.0 / 2.0 / 1e6).abs() < 1e-9);
        let z = row("x", "y", &cfg, 64, &[(1, 1.0)], &[0]);
        assert_eq!((z.share[0], z.jain), (0.0, 1.0));
        assert!(z.generator_limited);
        // A slow sender stretches the trial: rates are over its real time.
        let slow = row("linux-tc", "htb+bfifo", &cfg, 64, &[(100_000, 3.0)], &[100_000]);
        assert!((slow.duration_s - 3.0).abs() < 1e-12 && (slow.received_total_mbps - 16.0).abs() < 1e-9, "{slow:?}");
    }

    #[test]
    fn bad_configs_are_refused_before_anything_starts() {
        let big = FairnessConfig { frame_sizes: vec![9216], ..FairnessConfig::default() };
        assert!(run(&big, &mut |_| {}).unwrap_err().to_string().contains("64 to 1518"));
        let under = FairnessConfig { overload: 0.9, ..FairnessConfig::default() };
        assert!(run(&under, &mut |_| {}).unwrap_err().to_string().contains("above 1"));
    }
}
