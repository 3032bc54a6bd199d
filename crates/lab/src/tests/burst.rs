//! The `burst` test: the largest burst an N-to-1 DUT absorbs without loss into an egress
//! shaped to R, by frame size — the switch reports' burst-absorption figure (2-to-1 and 4-to-1,
//! frames of 192 to 9216 bytes).
//!
//! ```text
//!  sender i: AF_PACKET, k/N frames back to back ─▶ d_i ─▶ [DUT] ─▶ d_N (R, buffer) ─▶ r0: nftables counters
//!  (all senders start together)                          ▲ the burst piles up here
//! ```
//!
//! A trial sends a burst of k frames in all (k/N from each sender, started together through a
//! barrier, each as fast as its socket goes), waits for the shaped queue to drain, and counts
//! what arrived (one nftables counter per sender on the receiver's ingress). The burst is
//! absorbed when nothing was lost. A binary search ([`search`]) finds the largest absorbed k:
//! first a guess from the buffer the DUT may use, doubled while it is absorbed, then halving
//! the interval until it is within `resolution` (2 %) or `max_trials` are spent. The result is
//! that k in frame bytes (Ethernet frame without FCS: what both buffers count), in MB (10⁶).
//!
//! The buffers compared (what the issue asks): fastpath's shared buffer B for all N + 1 ports,
//! where one congested queue may take α B / (1 + α) (dynamic threshold, α = 2^`alpha_log2`,
//! 8 by default as in SONiC's lossy profile); the Linux bridge with the same total memory split
//! evenly, B / (N + 1) bytes of byte FIFO on the receiver's port. During the burst the port
//! also drains at R, so a DUT absorbs a little more than its buffer: the row gives the burst's
//! arrival rate. Frames must fit the DUT: fastpath's 2 KiB packet buffers hold frames up to
//! [`super::switch::FASTPATH_MAX_FRAME`] bytes, so it has no result at 2048 B and up (the row
//! says so); the veths carry 9216-byte frames.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::switch::{RxCounters, Shaping, Switch, SwitchConfig, SwitchDut, FASTPATH_MAX_FRAME};
use crate::fanin_topo::{FaninConfig, FaninTopo};
use crate::gen::{build_jumbo_frame, FrameSpec, BASE_PORT, DATA_PORT, FCS_LEN, MAX_JUMBO_FRAME};
use crate::report::{Chart, Report};
use crate::topo;
use crate::LabError;
use fastpath_io::af_packet::RawSocket;

/// The frame sizes of the switch reports' burst tests.
pub const BURST_SIZES: [u16; 7] = [192, 512, 1024, 1518, 2048, 4096, 9216];

/// The veths' MTU in the burst test: a 9216-byte frame (with FCS) is a 9198-byte IP packet.
pub const JUMBO_MTU: u32 = 9216;

/// Configuration of a burst run.
#[derive(Clone, Debug)]
pub struct BurstConfig {
    /// DUTs, each in its own topology.
    pub duts: Vec<SwitchDut>,
    /// Sender counts N (2 and 4: 2-to-1 and 4-to-1).
    pub senders: Vec<usize>,
    /// RFC 2544 frame sizes (with FCS), 64..=9216.
    pub frame_sizes: Vec<u16>,
    /// Shaped rate and fastpath's shared buffer; the Linux port gets `buffer_bytes / (N + 1)`.
    pub shaping: Shaping,
    /// Most trials of one search.
    pub max_trials: u32,
    /// The search stops when the lossy and absorbed sizes are this close (relative).
    pub resolution: f64,
    /// How to start the DUTs.
    pub switch: SwitchConfig,
}

impl Default for BurstConfig {
    fn default() -> BurstConfig {
        let mut shaping = Shaping::new(100_000_000, 1 << 20);
        shaping.alpha_log2 = 3;
        BurstConfig {
            duts: SwitchDut::ALL.to_vec(),
            senders: vec![2, 4],
            frame_sizes: BURST_SIZES.to_vec(),
            shaping,
            max_trials: 12,
            resolution: 0.02,
            switch: SwitchConfig::default(),
        }
    }
}

/// One burst result (one JSON line).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BurstRow {
    /// `burst`.
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
    /// The buffer this DUT's congested port may use, bytes: α B / (1 + α) for fastpath, its
    /// byte FIFO for Linux.
    pub port_buffer_bytes: u64,
    /// The memory configured in all (fastpath's shared buffer; the Linux FIFO × (N + 1)).
    pub total_buffer_bytes: u64,
    /// Largest burst absorbed with zero loss, frames (all senders).
    pub absorbed_frames: u64,
    /// The same in frame bytes (without FCS), MB = 10⁶ bytes.
    pub absorbed_mb: f64,
    /// `absorbed` in bytes ÷ `port_buffer_bytes`.
    pub absorbed_of_port_buffer: f64,
    /// Smallest burst that lost frames, frames (None: every burst tried was absorbed, up to 8
    /// times the port buffer — the senders did not outpace R; `absorbed` is then a lower bound).
    pub lossy_frames: Option<u64>,
    /// Aggregate arrival rate of the largest absorbed burst, Mbit/s.
    pub arrival_mbps: f64,
    /// Trials of the search: (frames, lost).
    pub trials: Vec<(u64, u64)>,
    /// Why there is no result (frame too large for the DUT), if so.
    pub unsupported: Option<String>,
}

/// Results of a burst run.
#[derive(Clone, Debug, Default)]
pub struct BurstResults {
    /// One per (N, frame size, DUT).
    pub rows: Vec<BurstRow>,
    /// DUTs that could not run, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// What a [`search`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Search {
    /// Largest size that passed (0 if none did).
    pub pass: u64,
    /// Smallest size that failed (None if none did).
    pub fail: Option<u64>,
    /// Every trial: (size, passed).
    pub trials: Vec<(u64, bool)>,
}

/// Binary search for the largest size that passes `trial`, assuming larger sizes fail once
/// one does. Starts at `guess` (≥ 1), doubles while it passes, then bisects until the failing
/// and passing sizes are within `resolution` × the failing one (or 1), or `max_trials` ran.
///
/// # Errors
/// The first error of `trial`.
pub fn search<E>(guess: u64, max_trials: u32, resolution: f64, trial: impl FnMut(u64) -> Result<bool, E>) -> Result<Search, E> {
    search_upto(guess, u64::MAX, max_trials, resolution, trial)
}

/// [`search`] that never tries a size above `cap` (when `cap` passes, it is the result).
///
/// # Errors
/// The first error of `trial`.
pub fn search_upto<E>(
    guess: u64,
    cap: u64,
    max_trials: u32,
    resolution: f64,
    mut trial: impl FnMut(u64) -> Result<bool, E>,
) -> Result<Search, E> {
    let mut s = Search::default();
    let mut k = guess.max(1).min(cap.max(1));
    while (s.trials.len() as u32) < max_trials {
        let ok = trial(k)?;
        s.trials.push((k, ok));
        if ok {
            s.pass = s.pass.max(k);
        } else {
            s.fail = Some(s.fail.map_or(k, |f| f.min(k)));
        }
        k = match s.fail {
            None if k >= cap => break,
            None => k.saturating_mul(2).min(cap),
            Some(f) => {
                let gap = f.saturating_sub(s.pass);
                if gap <= 1 || (gap as f64) <= resolution * f as f64 {
                    break;
                }
                s.pass + gap / 2
            }
        };
    }
    Ok(s)
}

/// Sends `counts[i]` frames of `frame_size` from every sender at once; returns (sent, seconds
/// from the first sender's start to the last one's end).
fn send_burst(t: &FaninTopo, frame_size: u16, counts: &[u64]) -> Result<(Vec<u64>, f64), LabError> {
    let barrier = Barrier::new(t.senders.len());
    let res: Vec<Result<(u64, Instant, Instant), LabError>> = std::thread::scope(|s| {
        let hs: Vec<_> = t
            .senders
            .iter()
            .zip(counts)
            .map(|(h, &n)| {
                let barrier = &barrier;
                let to = &t.receiver;
                s.spawn(move || {
                    topo::in_netns(&h.ns, || -> Result<(u64, Instant, Instant), LabError> {
                        let spec = FrameSpec {
                            src_mac: h.mac,
                            dst_mac: to.mac,
                            src_ip: h.ip,
                            dst_ip: to.ip,
                            src_port: BASE_PORT,
                            dst_port: DATA_PORT,
                        };
                        let frame = build_jumbo_frame(&spec, frame_size);
                        let sock = RawSocket::open(&h.ifname).map_err(|e| LabError::Io(format!("burst socket on {}: {e}", h.ifname)));
                        barrier.wait();
                        let sock = sock?;
                        let t0 = Instant::now();
                        let (mut sent, mut fails) = (0u64, 0u32);
                        while sent < n {
                            if sock.send(&frame).is_ok() {
                                sent += 1;
                            } else {
                                // ENOBUFS: the sender's own queue is full; give it a moment.
                                fails += 1;
                                if fails > 10_000 {
                                    break;
                                }
                                std::thread::yield_now();
                            }
                        }
                        Ok((sent, t0, Instant::now()))
                    })?
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(LabError::Io("a burst sender panicked".into())))).collect()
    });
    let res = res.into_iter().collect::<Result<Vec<_>, _>>()?;
    let first = res.iter().map(|r| r.1).min();
    let last = res.iter().map(|r| r.2).max();
    let secs = match (first, last) {
        (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    Ok((res.iter().map(|r| r.0).collect(), secs))
}

/// `total` frames split over `n` senders (the first ones take the remainder).
pub fn split(total: u64, n: usize) -> Vec<u64> {
    let n64 = n.max(1) as u64;
    (0..n64).map(|i| total / n64 + u64::from(i < total % n64)).collect()
}

/// One trial: returns (frames lost, arrival seconds).
fn trial(t: &FaninTopo, rx: &RxCounters, s: &Shaping, frame_size: u16, k: u64) -> Result<(u64, f64), LabError> {
    let before = rx.read()?;
    let (sent, secs) = send_burst(t, frame_size, &split(k, t.senders.len()))?;
    let bytes = k as f64 * (usize::from(frame_size) - FCS_LEN) as f64;
    let drain = Duration::from_secs_f64(bytes * 8.0 / s.rate_bps as f64);
    std::thread::sleep(drain.min(Duration::from_secs(5)));
    let after = rx.settle(Duration::from_millis(150), Duration::from_secs(3))?;
    let got: u64 = after.iter().zip(&before).map(|(a, b)| a.saturating_sub(*b)).sum();
    // Frames the senders could not even send count as lost.
    Ok((k.saturating_sub(got.min(sent.iter().sum::<u64>())), secs))
}

/// Runs the burst test for every N, DUT and frame size.
///
/// # Errors
/// [`LabError::NotRoot`], [`LabError::Interrupted`], [`LabError::Config`], [`LabError::Unavailable`]
/// without `nft`/`ethtool`/`tc`, or a failing trial.
pub fn run(cfg: &BurstConfig, progress: &mut dyn FnMut(&str)) -> Result<BurstResults, LabError> {
    if cfg.duts.is_empty() || cfg.senders.is_empty() || cfg.frame_sizes.is_empty() || cfg.max_trials == 0 {
        return Err(LabError::Config("burst needs at least one DUT, sender count, frame size and trial".into()));
    }
    if let Some(&s) = cfg.frame_sizes.iter().find(|&&s| !(64..=MAX_JUMBO_FRAME).contains(&s)) {
        return Err(LabError::Config(format!("burst frame size {s}: give 64 to {MAX_JUMBO_FRAME} bytes")));
    }
    if !fastpath_io::sys::is_root() {
        return Err(LabError::NotRoot);
    }
    super::switch::need_programs(&["nft", "ethtool", "tc"])?;
    for ns in topo::cleanup_stale() {
        progress(&format!("removed {ns}, left behind by a lab run that no longer exists"));
    }
    let mut out = BurstResults::default();
    for &n in &cfg.senders {
        for &kind in &cfg.duts {
            let name = kind.name();
            let mut s = cfg.shaping;
            // The same total memory: the Linux port gets its even share of it.
            s.linux_buffer_bytes = cfg.shaping.buffer_bytes / (n as u64 + 1);
            let (port_buf, total) = match kind {
                SwitchDut::Fastpath => (s.fastpath_queue_limit_bytes(), s.buffer_bytes),
                SwitchDut::LinuxTc => (s.linux_buffer_bytes, s.linux_buffer_bytes * (n as u64 + 1)),
            };
            // fastpath takes no frame above FASTPATH_MAX_FRAME, and an XDP program (AF_XDP
            // ports) attaches to a veth only with an MTU that fits a page: its topology keeps 1500.
            let mtu = if kind == SwitchDut::Fastpath { 1500 } else { JUMBO_MTU };
            let t = FaninTopo::create(&FaninConfig { senders: n, mtu, dut_gro: false, host_offloads: false })?;
            let rx = RxCounters::install(&t, DATA_PORT)?;
            let sw = match Switch::start(&t, kind, &s, &cfg.switch) {
                Ok(sw) => sw,
                Err(e @ LabError::Unavailable { .. }) => {
                    progress(&format!("{name}: skipped: {e}"));
                    out.skipped.push((name.to_owned(), e.to_string()));
                    continue;
                }
                Err(e) => return Err(e),
            };
            progress(&format!(
                "{name} {n}-to-1: started ({}), port buffer {port_buf} B of {total} B, R {} Mbit/s",
                sw.shaper,
                s.rate_bps / 1_000_000
            ));
            for &size in &cfg.frame_sizes {
                let frame_bytes = (usize::from(size) - FCS_LEN) as u64;
                let mut row = BurstRow {
                    test: "burst",
                    dut: name.to_owned(),
                    shaper: sw.shaper.clone(),
                    senders: n,
                    frame_size: size,
                    rate_bps: s.rate_bps,
                    port_buffer_bytes: port_buf,
                    total_buffer_bytes: total,
                    ..BurstRow::default()
                };
                if kind == SwitchDut::Fastpath && frame_bytes as usize > FASTPATH_MAX_FRAME {
                    row.unsupported = Some(format!("frames above {FASTPATH_MAX_FRAME} bytes do not fit fastpath's 2 KiB packet buffers"));
                    progress(&format!("{name} {n}-to-1 {size} B: not supported ({})", row.unsupported.as_deref().unwrap_or("")));
                    out.rows.push(row);
                    continue;
                }
                let guess = (port_buf / frame_bytes).max(2);
                // A burst 8 times the buffer that is still absorbed means the senders did not
                // outpace R (the row's arrival rate shows it): no point in larger ones.
                let cap = guess.saturating_mul(8);
                let mut arrival = Vec::new();
                let found = search_upto(guess, cap, cfg.max_trials, cfg.resolution, |k| -> Result<bool, LabError> {
                    if topo::interrupted() {
                        return Err(LabError::Interrupted);
                    }
                    let (lost, secs) = trial(&t, &rx, &s, size, k)?;
                    row.trials.push((k, lost));
                    arrival.push((k, secs));
                    Ok(lost == 0)
                })?;
                row.absorbed_frames = found.pass;
                row.lossy_frames = found.fail;
                let bytes = found.pass * frame_bytes;
                row.absorbed_mb = bytes as f64 / 1e6;
                row.absorbed_of_port_buffer = bytes as f64 / port_buf.max(1) as f64;
                if let Some(&(_, secs)) = arrival.iter().find(|a| a.0 == found.pass) {
                    row.arrival_mbps = if secs > 0.0 { bytes as f64 * 8.0 / secs / 1e6 } else { 0.0 };
                }
                progress(&format!(
                    "{name} {n}-to-1 {size} B: absorbed {} frames = {:.3} MB ({:.2} × its port buffer), arriving at {:.0} Mbit/s; {} trials",
                    row.absorbed_frames,
                    row.absorbed_mb,
                    row.absorbed_of_port_buffer,
                    row.arrival_mbps,
                    row.trials.len()
                ));
                out.rows.push(row);
            }
            drop(sw);
            drop(rx);
            drop(t);
        }
    }
    Ok(out)
}

impl BurstResults {
    /// One JSON object per line per (N, frame size, DUT).
    pub fn json_lines(&self) -> String {
        super::json_lines(&self.rows)
    }

    /// Adds the table, the absorbed-burst chart per N and the fastpath / Linux ratio.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("Burst absorption: N-to-1 bursts into a shaped port");
        report.para(
            "The largest burst (all senders together, started at once) that crossed the DUT with zero loss, found by binary \
             search, in MB of frame bytes. fastpath shares one buffer among all ports with dynamic thresholds; the Linux \
             bridge has the same total memory split evenly across its N+1 ports. Target: fastpath ≥ 90 % of its shared \
             buffer less reservations, ≥ 1.5× Linux.",
        );
        for (d, why) in &self.skipped {
            report.para(format!("{d} skipped: {why}"));
        }
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let ratio = self.ratio(r).map_or("—".to_owned(), |x| format!("{x:.2}"));
                match &r.unsupported {
                    Some(why) => vec![
                        r.dut.clone(),
                        r.senders.to_string(),
                        r.frame_size.to_string(),
                        "—".into(),
                        "—".into(),
                        "—".into(),
                        why.clone(),
                    ],
                    None => vec![
                        r.dut.clone(),
                        r.senders.to_string(),
                        r.frame_size.to_string(),
                        format!("{}{:.3}", if r.lossy_frames.is_none() { "≥ " } else { "" }, r.absorbed_mb),
                        format!("{:.3}", r.port_buffer_bytes as f64 / 1e6),
                        format!("{:.2}", r.absorbed_of_port_buffer),
                        format!("{ratio} (arrival {:.0} Mbit/s)", r.arrival_mbps),
                    ],
                }
            })
            .collect();
        report.table(&["DUT", "N", "frame B", "absorbed MB", "port buffer MB", "absorbed / buffer", "fastpath ÷ linux"], rows);
        let mut ns: Vec<usize> = self.rows.iter().map(|r| r.senders).collect();
        ns.sort_unstable();
        ns.dedup();
        for n in ns {
            let mut c =
                Chart::new(format!("{n}-to-1: largest burst absorbed without loss")).x_label("frame size (bytes)").y_label("burst (MB)");
            let mut duts: Vec<&str> = self.rows.iter().map(|r| r.dut.as_str()).collect();
            duts.sort_unstable();
            duts.dedup();
            for d in duts {
                let bars = self
                    .rows
                    .iter()
                    .filter(|r| r.senders == n && r.dut == d && r.unsupported.is_none())
                    .map(|r| (r.frame_size.to_string(), r.absorbed_mb))
                    .collect();
                c = c.bars(d, bars);
            }
            report.bar_chart(c);
        }
    }

    /// fastpath's absorbed burst ÷ Linux's at the same N and frame size (on either row).
    pub fn ratio(&self, r: &BurstRow) -> Option<f64> {
        let get = |d: &str| {
            self.rows.iter().find(|x| x.dut == d && x.senders == r.senders && x.frame_size == r.frame_size && x.unsupported.is_none())
        };
        match (get("fastpath"), get("linux-tc")) {
            (Some(f), Some(l)) if l.absorbed_mb > 0.0 => Some(f.absorbed_mb / l.absorbed_mb),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_finds_the_threshold_from_below_and_above() {
        for (guess, limit) in [(10u64, 1000u64), (5000, 1000), (1, 1), (1000, 1000), (64, 65)] {
            let s = search::<()>(guess, 40, 0.0, |k| Ok(k <= limit)).unwrap();
            assert_eq!((s.pass, s.fail), (limit, Some(limit + 1)), "guess {guess} limit {limit}: {:?}", s.trials);
        }
        // Capped: every size passes up to the cap.
        let s = search_upto::<()>(10, 50, 40, 0.0, |_| Ok(true)).unwrap();
        assert_eq!(s.trials, vec![(10, true), (20, true), (40, true), (50, true)]);
        assert_eq!((s.pass, s.fail), (50, None));
        // Nothing passes.
        let s = search::<()>(8, 40, 0.0, |_| Ok(false)).unwrap();
        assert_eq!((s.pass, s.fail), (0, Some(1)));
    }

    #[test]
    fn search_stops_at_the_resolution_and_the_trial_budget() {
        let s = search::<()>(100, 40, 0.02, |k| Ok(k <= 777)).unwrap();
        let f = s.fail.unwrap();
        assert!(s.pass <= 777 && f > 777 && (f - s.pass) as f64 <= 0.02 * f as f64, "{s:?}");
        assert!(s.trials.len() < 12, "{s:?}");
        let s = search::<()>(1, 3, 0.0, |_| Ok(true)).unwrap();
        assert_eq!(s.trials, vec![(1, true), (2, true), (4, true)]);
        assert_eq!((s.pass, s.fail), (4, None));
        let e = search(1, 3, 0.0, |_| Err::<bool, &str>("boom"));
        assert_eq!(e, Err("boom"));
    }

    #[test]
    fn bursts_split_evenly_over_senders() {
        assert_eq!(split(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(split(3, 2), vec![2, 1]);
        assert_eq!(split(0, 2), vec![0, 0]);
        assert_eq!(split(7, 1), vec![7]);
    }

    #[test]
    fn ratio_pairs_rows_of_the_same_n_and_size() {
        let row = |dut: &str, mb: f64| BurstRow { dut: dut.into(), senders: 2, frame_size: 1518, absorbed_mb: mb, ..BurstRow::default() };
        let r = BurstResults { rows: vec![row("fastpath", 0.9), row("linux-tc", 0.3)], skipped: Vec::new() };
        assert!((r.ratio(&r.rows[1]).unwrap() - 3.0).abs() < 1e-12);
        let mut html = Report::new("t");
        r.add_to(&mut html);
        assert!(html.to_html().contains("3.00"));
    }
}
