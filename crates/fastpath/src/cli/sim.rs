//! `fastpath sim incast|burst`: the traffic manager in virtual time behind modelled links, at
//! switch scale (32 × 100 Gbit/s, 32 MiB by default), shared buffer against a static split in
//! the same invocation. Tables on stdout, progress on stderr, charts in an HTML report. The
//! model is `fastpath_lab::sim` (docs/sim.md).

use clap::{Args, Subcommand, ValueEnum};
use fastpath_lab::sim::burst::{self, BurstConfig};
use fastpath_lab::sim::incast::{self, IncastConfig};
use fastpath_lab::sim::report as simreport;
use fastpath_lab::sim::switch::{BufferModel, SwitchConfig};
use fastpath_lab::sim::tcp::{EcnMode, Recovery, TcpConfig};
use fastpath_tm::wred::WredConfig;
use std::path::PathBuf;
use std::time::Instant;

/// `fastpath sim`.
#[derive(Args)]
#[command(after_help = "\
Examples:
  fastpath sim incast                               16/8/4/2-to-1, 16 flows each, shared vs static
  fastpath sim incast --senders 16 --bytes 256MB    one fan-in, longer transfers
  fastpath sim incast --ecn dctcp --ecn-min 400KB   DCTCP with marking from 400 KB
  fastpath sim burst --report burst.html            2:1 and 4:1 bursts, 192..9216-byte frames
  fastpath sim incast --ports 128 --buffer 32MiB --alpha 1")]
pub struct SimArgs {
    #[command(subcommand)]
    cmd: SimCmd,
}

#[derive(Subcommand)]
enum SimCmd {
    /// N senders × M TCP flows (Reno; SACK or NewReno recovery) into one port: goodput over time, JCT,
    /// retransmits, drops, Jain's index; shared buffer vs static split.
    Incast(IncastArgs),
    /// K senders at line rate into one port: the largest burst absorbed with zero loss per frame
    /// size; shared buffer vs static split.
    Burst(BurstArgs),
}

/// The switch, shared by both experiments.
#[derive(Args, Clone)]
struct SwitchArgs {
    /// Switch ports (each sender has one; the receiver is on port 0).
    #[arg(long, default_value_t = 32)]
    ports: u32,
    /// Rate of every link (bits per second on the wire: 100G, 25G, 400e9).
    #[arg(long, default_value = "100G", value_parser = parse_rate)]
    rate: u64,
    /// Packet memory of the whole switch (32MiB, 16MB, 12000000).
    #[arg(long, default_value = "32MiB", value_parser = parse_bytes)]
    buffer: u64,
    /// Dynamic threshold α of the shared buffer, a power of two from 1/16 to 8 (SONiC lossy: 8).
    #[arg(long, default_value = "8", value_parser = parse_alpha)]
    alpha: i8,
    /// Propagation delay of each link (2.5us is 500 m of fibre).
    #[arg(long, default_value = "2.5us", value_parser = parse_time)]
    prop: u64,
    /// Buffer cell size: each frame occupies whole cells (e.g. 208 or 256 as in switch ASICs;
    /// 0: exact bytes).
    #[arg(long, default_value = "0", value_parser = parse_bytes)]
    cell: u64,
    /// Buffer models to compare.
    #[arg(long, value_delimiter = ',', default_value = "shared,static")]
    models: Vec<Model>,
    /// Write the HTML report here.
    #[arg(long, default_value = "sim-report.html")]
    report: PathBuf,
    /// Do not write the HTML report.
    #[arg(long = "no-report")]
    no_report: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Model {
    Shared,
    Static,
}

impl From<Model> for BufferModel {
    fn from(m: Model) -> BufferModel {
        match m {
            Model::Shared => BufferModel::Shared,
            Model::Static => BufferModel::Static,
        }
    }
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Ecn {
    /// Not-ECT packets, drops only.
    Off,
    /// RFC 3168: WRED marks CE; the sender halves its window once per round trip.
    On,
    /// DCTCP: WRED marks CE; the sender cuts by α/2, α the marked fraction's running average.
    Dctcp,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum RecoveryArg {
    /// SACK with RACK loss detection (as Linux): every hole resent within a round trip.
    Sack,
    /// NewReno: 3 duplicate ACKs, then one hole per round trip.
    Newreno,
}

#[derive(Args)]
struct IncastArgs {
    #[command(flatten)]
    sw: SwitchArgs,
    /// Sender hosts, one run per value (each N < ports).
    #[arg(long, value_delimiter = ',', default_value = "2,4,8,16")]
    senders: Vec<u32>,
    /// TCP flows per sender.
    #[arg(long, default_value_t = 16)]
    flows: u32,
    /// Bytes each flow transfers (0: flows without end, for --duration).
    #[arg(long, default_value = "64MB", value_parser = parse_bytes)]
    bytes: u64,
    /// Virtual time after which a run stops, finished or not.
    #[arg(long, default_value = "10s", value_parser = parse_time)]
    duration: u64,
    /// Minimum retransmission timeout (Linux: 200ms).
    #[arg(long = "min-rto", default_value = "200ms", value_parser = parse_time)]
    min_rto: u64,
    /// TCP payload bytes per segment (1460: 1500-byte MTU; 8960: 9000-byte MTU).
    #[arg(long, default_value_t = 1460)]
    mss: u32,
    /// Initial congestion window, segments.
    #[arg(long = "init-cwnd", default_value_t = 10)]
    init_cwnd: u32,
    /// Loss recovery: sack (SACK + RACK, as Linux) or newreno (3 dup ACKs, a hole per RTT).
    #[arg(long, value_enum, default_value_t = RecoveryArg::Sack)]
    recovery: RecoveryArg,
    /// ECN: off, on (RFC 3168 halving) or dctcp.
    #[arg(long, value_enum, default_value_t = Ecn::Off)]
    ecn: Ecn,
    /// WRED/ECN marking starts at this average queue (with --ecn).
    #[arg(long = "ecn-min", default_value = "200KB", value_parser = parse_bytes)]
    ecn_min: u64,
    /// Marking probability reaches 1 here, and above it WRED drops (with --ecn).
    #[arg(long = "ecn-max", default_value = "4MB", value_parser = parse_bytes)]
    ecn_max: u64,
    /// Flows start at random times within this window (seeded).
    #[arg(long, default_value = "10us", value_parser = parse_time)]
    jitter: u64,
    /// After each frame a sender's link idles for a random time up to this (seeded): breaks
    /// the fixed phase of equal-rate senders that would lock one of them out at a full queue.
    #[arg(long = "host-gap", default_value = "25ns", value_parser = parse_time)]
    host_gap: u64,
    /// Goodput-over-time bin (default: about 1/100 of the ideal job time).
    #[arg(long, value_parser = parse_time)]
    bin: Option<u64>,
    /// Seed of start times and WRED draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
struct BurstArgs {
    #[command(flatten)]
    sw: SwitchArgs,
    /// Fan-ins: senders per burst, one run per value (each 2 ≤ K < ports).
    #[arg(long, value_delimiter = ',', default_value = "2,4")]
    senders: Vec<u32>,
    /// Frame sizes, bytes.
    #[arg(long, value_delimiter = ',', default_value = "192,512,1024,1518,2048,4096,9216")]
    sizes: Vec<u32>,
}

pub fn run(a: SimArgs) -> Result<(), String> {
    match a.cmd {
        SimCmd::Incast(i) => run_incast(i),
        SimCmd::Burst(b) => run_burst(b),
    }
}

fn switch_config(s: &SwitchArgs) -> SwitchConfig {
    SwitchConfig {
        ports: s.ports,
        rate_bps: s.rate,
        buffer_bytes: s.buffer,
        alpha_log2: s.alpha,
        prop_ps: s.prop,
        cell_bytes: u32::try_from(s.cell).unwrap_or(u32::MAX),
        ..SwitchConfig::default()
    }
}

fn command_line() -> String {
    std::iter::once("fastpath".to_owned()).chain(std::env::args().skip(1)).collect::<Vec<_>>().join(" ")
}

fn alpha_text(log2: i8) -> String {
    if log2 >= 0 {
        format!("{}", 1u32 << log2)
    } else {
        format!("1/{}", 1u32 << log2.unsigned_abs())
    }
}

fn describe(sw: &SwitchConfig) -> String {
    format!(
        "{} ports × {:.0} Gbit/s, {:.2} MB of buffer{}: shared with α = {} (one congested queue may hold {:.2} MB) or split statically ({:.3} MB per port); links {} µs of propagation each",
        sw.ports,
        sw.rate_bps as f64 / 1e9,
        sw.buffer_bytes as f64 / 1e6,
        if sw.cell_bytes > 0 { format!(" in {}-byte cells", sw.cell_bytes) } else { String::new() },
        alpha_text(sw.alpha_log2),
        sw.queue_cap_bytes(BufferModel::Shared) as f64 / 1e6,
        sw.queue_cap_bytes(BufferModel::Static) as f64 / 1e6,
        sw.prop_ps as f64 / 1e6,
    )
}

fn write_report(s: &SwitchArgs, report: &fastpath_lab::report::Report) -> Result<(), String> {
    if s.no_report {
        return Ok(());
    }
    report.write(&s.report).map_err(|e| format!("{}: {e}", s.report.display()))?;
    eprintln!("report: {}", s.report.display());
    Ok(())
}

fn run_incast(a: IncastArgs) -> Result<(), String> {
    let mut sw = switch_config(&a.sw);
    let ecn = match a.ecn {
        Ecn::Off => EcnMode::Off,
        Ecn::On => EcnMode::Classic,
        Ecn::Dctcp => EcnMode::Dctcp,
    };
    if ecn != EcnMode::Off {
        sw.wred = Some(WredConfig { min_bytes: a.ecn_min, max_bytes: a.ecn_max, maxp_inv: 1, weight_log2: 1, ecn: true });
    }
    let recovery = match a.recovery {
        RecoveryArg::Sack => Recovery::Sack,
        RecoveryArg::Newreno => Recovery::NewReno,
    };
    let tcp = TcpConfig { mss_bytes: a.mss, init_cwnd_segs: a.init_cwnd, min_rto_ps: a.min_rto, ecn, recovery, ..TcpConfig::default() };
    let started = Instant::now();
    let mut rows = Vec::new();
    for &n in &a.senders {
        let total = a.bytes * u64::from(n) * u64::from(a.flows);
        let ideal = fastpath_lab::sim::engine::ser_ps(total, sw.rate_bps);
        let bin = a.bin.unwrap_or_else(|| nice_bin(if a.bytes == 0 { a.duration } else { ideal }));
        let cfg = IncastConfig {
            switch: sw,
            tcp,
            senders: n,
            flows_per_sender: a.flows,
            bytes_per_flow: a.bytes,
            duration_ps: a.duration,
            start_jitter_ps: a.jitter,
            host_gap_ps: a.host_gap,
            bin_ps: bin,
            seed: a.seed,
        };
        for &m in &a.sw.models {
            let t0 = Instant::now();
            let r = incast::run(&cfg, m.into(), &mut |l| eprintln!("{l}")).map_err(|e| e.to_string())?;
            eprintln!(
                "{} {n}x{}: JCT {} ({} events, {:.1} s)",
                r.model.name(),
                a.flows,
                r.jct_ps.map_or_else(|| "unfinished".to_owned(), simreport::fmt_ps),
                r.events,
                t0.elapsed().as_secs_f64()
            );
            rows.push(r);
        }
    }
    let about = format!(
        "{}. Each sender has its own port; every flow is a Reno transfer of {} bytes ({} recovery, MSS {}, IW {}, min RTO {}, ECN {}) to one receiver on port 0. \
         Goodput is TCP payload in order at the receiver; line rate L counts the wire (a 1500-byte MTU carries at most 1460/1538 = 94.9 % of L as payload). \
         JCT: last byte delivered; ideal: bytes ÷ L. Steady: median bin between 10 % and 90 % of the job; min: lowest such bin. Per-flow rates and Jain's index: \
         each flow's bytes ÷ its completion time, as iperf3 reports them. Virtual time; {:.1} s of wall time.",
        describe(&sw),
        a.bytes,
        match a.recovery {
            RecoveryArg::Sack => "SACK + RACK",
            RecoveryArg::Newreno => "NewReno",
        },
        a.mss,
        a.init_cwnd,
        simreport::fmt_ps(a.min_rto),
        match a.ecn {
            Ecn::Off => "off",
            Ecn::On => "RFC 3168",
            Ecn::Dctcp => "DCTCP",
        },
        started.elapsed().as_secs_f64()
    );
    println!("{}", about);
    print!("{}", simreport::incast_table(&rows, sw.rate_bps));
    let mut report = fastpath_lab::report::Report::new("fastpath sim incast");
    report.pre(command_line());
    simreport::add_incast(&mut report, &rows, sw.rate_bps, &about);
    write_report(&a.sw, &report)
}

fn run_burst(a: BurstArgs) -> Result<(), String> {
    let sw = switch_config(&a.sw);
    let started = Instant::now();
    let mut rows = Vec::new();
    for &k in &a.senders {
        for &f in &a.sizes {
            for &m in &a.sw.models {
                let r =
                    burst::max_lossless(&BurstConfig { switch: sw, senders: k, frame_bytes: f }, m.into()).map_err(|e| e.to_string())?;
                rows.push(r);
            }
        }
        eprintln!("burst {k}-to-1 done ({:.1} s)", started.elapsed().as_secs_f64());
    }
    let about = format!(
        "{}. K senders on their own ports send back-to-back frames at line rate, starting together, to port 0; the table gives the whole burst \
         (all senders, MB = 10⁶ bytes) of the largest one with zero loss. A K-to-1 burst of B bytes peaks at (K − 1)/K · B in the queue, so 2-to-1 \
         absorbs twice the queue's room and 4-to-1 4/3 of it. Virtual time; {:.1} s of wall time.",
        describe(&sw),
        started.elapsed().as_secs_f64()
    );
    println!("{about}");
    print!("{}", simreport::burst_table(&rows));
    let mut report = fastpath_lab::report::Report::new("fastpath sim burst");
    report.pre(command_line());
    simreport::add_burst(&mut report, &rows, &about);
    write_report(&a.sw, &report)
}

/// A bin of about 1/100 of `job_ps`, rounded down to 1, 2 or 5 × 10ⁿ ps, at least 1 µs.
fn nice_bin(job_ps: u64) -> u64 {
    let want = (job_ps / 100).max(1_000_000);
    let mut p = 1u64;
    while p.saturating_mul(10) <= want {
        p *= 10;
    }
    [5, 2, 1].into_iter().map(|m| m * p).find(|&b| b <= want).unwrap_or(p)
}

/// Splits `s` into a number and the rest (the unit), trimmed.
fn split_num(s: &str) -> Result<(f64, String), String> {
    let s = s.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')).unwrap_or(s.len());
    // "1e" would swallow a unit starting with e; none of ours does.
    let (n, u) = s.split_at(end);
    let v: f64 = n.parse().map_err(|_| format!("{s:?}: not a number"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("{s:?}: must be a finite number ≥ 0"));
    }
    Ok((v, u.trim().to_owned()))
}

/// Bytes: a number with an optional unit B, KB, MB, GB (10³ⁿ) or KiB, MiB, GiB (2¹⁰ⁿ).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let (v, u) = split_num(s)?;
    let m: f64 = match u.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1048576.0,
        "gib" => 1073741824.0,
        _ => return Err(format!("{s:?}: unknown unit {u:?} (B, KB, MB, GB, KiB, MiB, GiB)")),
    };
    Ok((v * m).round() as u64)
}

/// Bits per second: a number with an optional unit K, M, G, T (with or without `bit/s`, `bps`).
fn parse_rate(s: &str) -> Result<u64, String> {
    let (v, u) = split_num(s)?;
    let u = u.to_ascii_lowercase();
    let u = u.trim_end_matches("bit/s").trim_end_matches("bps").trim_end_matches("bit");
    let m: f64 = match u {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        _ => return Err(format!("{s:?}: unknown unit (e.g. 100G, 25Gbit/s, 400e9)")),
    };
    let r = (v * m).round() as u64;
    if r == 0 {
        return Err(format!("{s:?}: a rate must be above 0"));
    }
    Ok(r)
}

/// A time to picoseconds: a number with a unit s, ms, us (µs), ns, ps.
fn parse_time(s: &str) -> Result<u64, String> {
    let (v, u) = split_num(s)?;
    let m: f64 = match u.as_str() {
        "s" => 1e12,
        "ms" => 1e9,
        "us" | "µs" => 1e6,
        "ns" => 1e3,
        "ps" => 1.0,
        _ => return Err(format!("{s:?}: give a unit: s, ms, us, ns or ps")),
    };
    let t = v * m;
    if t > (u64::MAX / 2) as f64 {
        return Err(format!("{s:?}: too long"));
    }
    Ok(t.round() as u64)
}

/// α as a power of two (`8`, `1`, `0.25`, `1/16`) to its exponent, −4..=3.
fn parse_alpha(s: &str) -> Result<i8, String> {
    let v = match s.split_once('/') {
        Some((a, b)) => {
            let (a, b): (f64, f64) = (
                a.trim().parse().map_err(|_| format!("{s:?}: not a number"))?,
                b.trim().parse().map_err(|_| format!("{s:?}: not a number"))?,
            );
            a / b
        }
        None => s.trim().parse::<f64>().map_err(|_| format!("{s:?}: not a number"))?,
    };
    (-4..=3i8)
        .find(|&n| (2f64.powi(i32::from(n)) - v).abs() < 1e-9)
        .ok_or_else(|| format!("{s:?}: α must be a power of two from 1/16 to 8 (SAI SHARED_DYNAMIC_TH)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_lab::sim::engine::PS_PER_S;

    #[test]
    fn units() {
        assert_eq!(parse_bytes("32MiB"), Ok(32 << 20));
        assert_eq!(parse_bytes("8MB"), Ok(8_000_000));
        assert_eq!(parse_bytes("1460"), Ok(1460));
        assert!(parse_bytes("3 furlongs").is_err());
        assert_eq!(parse_rate("100G"), Ok(100_000_000_000));
        assert_eq!(parse_rate("25Gbit/s"), Ok(25_000_000_000));
        assert_eq!(parse_rate("400e9"), Ok(400_000_000_000));
        assert!(parse_rate("0").is_err());
        assert_eq!(parse_time("200ms"), Ok(200_000_000_000));
        assert_eq!(parse_time("2.5us"), Ok(2_500_000));
        assert_eq!(parse_time("10s"), Ok(10 * PS_PER_S));
        assert!(parse_time("10").is_err());
        assert_eq!(parse_alpha("8"), Ok(3));
        assert_eq!(parse_alpha("1/16"), Ok(-4));
        assert_eq!(parse_alpha("0.5"), Ok(-1));
        assert!(parse_alpha("3").is_err() && parse_alpha("16").is_err());
        assert_eq!(nice_bin(100 * 1_000_000_000), 1_000_000_000);
        assert_eq!(nice_bin(340 * 1_000_000_000), 2_000_000_000);
        assert_eq!(nice_bin(1000), 1_000_000);
    }
}
