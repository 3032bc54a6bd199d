//! `fastpath bench`: in-memory pipeline speed, measured as BENCHMARKS.md says.
//!
//! A `mem` source behaving like a NIC receive ring (pre-built frames, headers restored each
//! pass) feeds the pipeline on one pinned core; a sink frees what leaves. The source's own cost
//! is measured with an empty pipeline (every packet straight to the sink) and reported apart.
//! After a warm-up (at least one packet per flow, so connections are open), the run is timed with `Instant` and the TSC; per-stage cycles come from the
//! executor's two `rdtsc` per stage per batch.

use super::PipeProc;
use crate::scenario::{self, Opts};
use clap::Args;
use fastpath_io::mem::{FrameSizes, MemSink, MemSource, Templates};
use fastpath_io::port::Port;
use fastpath_io::worker::{Processor, TxAll, Worker};
use fastpath_lab::report::{Chart, Report};
use fastpath_packet::prefetch::cycles;
use fastpath_packet::{DropReason, Pool};
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Arguments of `fastpath bench`.
#[derive(Args, Clone)]
#[command(after_help = "\
With no PIPELINE, benchmarks every reference pipeline and the ACL classifier with their defaults \
(3 runs each, median and spread), prints a table and writes an HTML report (--report).\n\n\
Examples:\n  fastpath bench l2fwd --packets 20000000\n  \
fastpath bench router --routes 1000000 --flows 65536 --json\n  \
fastpath bench router --routes 1000000 --routes6 200000 --v6 100 --repeat 3\n  \
fastpath bench acl --kind fw --rules 10000\n  \
fastpath bench switch-acl --rules 10000\n  \
fastpath bench vbng --subscribers 256000 --size 1400 --mix 8:1 --repeat 3\n  \
fastpath bench tm --scenario hqos --repeat 5\n\n\
`fastpath bench tm` times the traffic manager alone (enqueue + dequeue in bursts of 32, wall clock, \
median of --repeat runs, 3 by default): --scenario flat (64 ports x 8 classes, SP+DRR), hqos \
(262,144 pipes x 8 classes), flat-wred, hqos-shaped; both flat and hqos when omitted. Its \
instructions per packet, exact even on a busy machine, come from scripts/tm-instructions.")]
pub struct BenchArgs {
    /// l2fwd, router, sdn-overlay, switch-acl, vbng, acl (the classifier alone), tm (the
    /// traffic manager alone) or bng-cp (PFCP session establishments per second, control plane
    /// to user plane on loopback, --subscribers of them). Omit to run every pipeline and the
    /// classifier.
    pipeline: Option<String>,
    /// Packets per measured run (after a warm-up).
    #[arg(long, default_value_t = 10_000_000)]
    packets: u64,
    /// Warm-up packets before the measured run [default: a tenth of --packets, 100k to 2M];
    /// never fewer than one per flow. `scripts/instructions` pins it, so that runs of N and 2N
    /// packets warm up alike.
    #[arg(long)]
    warmup: Option<u64>,
    /// Run the worker on a virtual clock that advances NS nanoseconds per packet received,
    /// instead of the monotonic clock. What depends on time (conntrack ageing, meters, the
    /// traffic manager's shapers) then does the same work in every run, so callgrind's counts
    /// are exact; `scripts/instructions` sets 250 (4 Mpps). The timing figures stay wall clock.
    #[arg(long, value_name = "NS")]
    virtual_clock: Option<u64>,
    /// Frame size in bytes, without the 4-byte FCS (64 = the smallest Ethernet frame).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Concurrent flows in the traffic [default: l2fwd 1, router 65536, sdn-overlay 100000,
    /// switch-acl 1024 host pairs].
    #[arg(long)]
    flows: Option<u32>,
    /// IPv4 routes in the router's FIB.
    #[arg(long, default_value_t = 1_000_000)]
    routes: usize,
    /// IPv6 routes in the router's FIB [default: 200000 when --v6 > 0, else 0].
    #[arg(long)]
    routes6: Option<usize>,
    /// Router: percentage of the flows that are IPv6 (Ethernet/IPv6/UDP, routed by fib6), 0..=100.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    v6: u8,
    /// ACL bench: rule-set flavour (acl, fw, ipc), ClassBench style.
    #[arg(long, default_value = "acl")]
    kind: String,
    /// Rules: the ACL bench's rule set [default 10000]; switch-acl's ACL: 0, 24 (the switch
    /// tests' rules, testdata/switch-acl/acl24.txt) or that many ClassBench rules [default 24].
    #[arg(long)]
    rules: Option<usize>,
    /// vbng: subscribers (sessions created through the session API before the run).
    #[arg(long, default_value_t = 40_000)]
    subscribers: u32,
    /// vbng: downstream:upstream frames, `D:U`, or `down` / `up` alone.
    #[arg(long, default_value = "8:1")]
    mix: String,
    /// Runs to take the median of.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Print one JSON object per run instead of text.
    #[arg(long)]
    json: bool,
    /// Where to write the HTML report [default with no PIPELINE: bench/out/report.html].
    #[arg(long)]
    report: Option<PathBuf>,
    /// CPU core to pin the benchmark thread to [default: the last core].
    #[arg(long)]
    core: Option<usize>,
    /// Seed for generated tables and traffic.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// sdn-overlay scenario: ladder (feature steps), scale (1k..5M flows), cps (connections per
    /// second), sizes (64..1518 B); omit for one run of the full pipeline. tm scenario: flat,
    /// hqos, flat-wred, hqos-shaped; omit for flat and hqos.
    #[arg(long)]
    scenario: Option<String>,
    /// With `--scenario ladder`: run only this step (0 = VXLAN forward … 5 = full), e.g. to
    /// count its instructions per packet under callgrind (scripts/instructions).
    #[arg(long)]
    ladder_step: Option<usize>,
    /// The overlay form of this run (set by the scenarios).
    #[arg(skip)]
    variant: scenario::overlay::Variant,
}

/// One stage's share of a run.
#[derive(Serialize, Clone, Debug)]
pub struct StageResult {
    name: String,
    ns_per_packet: f64,
    cycles_per_packet: f64,
    packets_in: u64,
    packets_out: u64,
    drops: serde_json::Map<String, serde_json::Value>,
}

/// One run, in the JSON shape of BENCHMARKS.md.
#[derive(Serialize, Clone, Debug)]
pub struct BenchResult {
    pipeline: String,
    packets: u64,
    frame_size: usize,
    flows: u32,
    mpps: f64,
    ns_per_packet: f64,
    cycles_per_packet: f64,
    source_ns_per_packet: f64,
    pipeline_ns_per_packet: f64,
    stages: Vec<StageResult>,
    config: serde_json::Value,
    /// Connections per second (`--scenario cps`: each connection is two packets).
    #[serde(skip_serializing_if = "Option::is_none")]
    cps: Option<f64>,
    /// Scenario step (`ladder`, `scale`, `sizes`, `cps`).
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<String>,
}

/// TSC ticks per nanosecond, measured against the monotonic clock over 50 ms.
fn tsc_per_ns() -> f64 {
    let (t0, c0) = (Instant::now(), cycles());
    std::thread::sleep(Duration::from_millis(50));
    let (ns, c) = (t0.elapsed().as_nanos() as f64, cycles().wrapping_sub(c0) as f64);
    if c > 0.0 {
        c / ns
    } else {
        1.0
    }
}

struct Timed {
    packets: u64,
    ns: f64,
    cycles: f64,
}

/// The warm-up of a run of `n` packets when `--warmup` is not given.
fn default_warmup(n: u64) -> u64 {
    (n / 10).clamp(100_000, 2_000_000)
}

/// Runs `warm + n` packets of `templates` through `proc` (ports: 0 = source, 1 = sink), timing
/// the last `n` (`warm` packets of warm-up). `reset` is called on the processor
/// after the warm-up.
/// With `clock` (ns per packet: `--virtual-clock`), the worker's clock is the packets received
/// so far times it, set after every poll.
fn drive<P: Processor>(
    label: &str,
    templates: Templates,
    n: u64,
    warm: u64,
    clock: Option<u64>,
    proc: P,
    reset: impl Fn(&mut P),
) -> (Timed, Worker<P>) {
    let src = MemSource::from_templates("mem0", templates).with_limit(warm + n);
    let sink = MemSink::new("sink");
    let ports: Vec<Box<dyn Port>> = vec![Box::new(src), Box::new(sink)];
    let mut w = Worker::new(Pool::new(4096), ports, proc);
    let rx = |w: &Worker<P>| w.ports()[0].stats().rx_pkts;
    let now = Arc::new(AtomicU64::new(0));
    if clock.is_some() {
        let now = Arc::clone(&now);
        w = w.with_clock(move || now.load(Ordering::Relaxed));
    }
    let poll = |w: &mut Worker<P>| {
        w.poll_once();
        if let Some(ns) = clock {
            now.store(rx(w).saturating_mul(ns), Ordering::Relaxed);
        }
    };
    while rx(&w) < warm {
        poll(&mut w);
    }
    reset(w.processor_mut());
    let start_pkts = rx(&w);
    let tty = std::io::stderr().is_terminal();
    let (t0, c0) = (Instant::now(), cycles());
    let mut last = t0;
    let mut polls = 0u32;
    while !w.ports()[0].is_exhausted() {
        poll(&mut w);
        polls += 1;
        if tty && polls.is_multiple_of(1024) && last.elapsed() > Duration::from_millis(500) {
            last = Instant::now();
            let done = rx(&w) - start_pkts;
            eprint!(
                "\r  {label}: {:>3.0}% ({:.1}M of {:.1}M packets)   ",
                done as f64 * 100.0 / n as f64,
                done as f64 / 1e6,
                n as f64 / 1e6
            );
        }
    }
    let (ns, cyc) = (t0.elapsed().as_nanos() as f64, cycles().wrapping_sub(c0) as f64);
    if tty && polls >= 1024 {
        eprint!("\r{:60}\r", "");
    }
    let packets = rx(&w) - start_pkts;
    (Timed { packets, ns, cycles: cyc }, w)
}

/// Frame size of `vbng` in the run of every pipeline: the published broadband test's.
const VBNG_SIZE: usize = 1400;

/// Rules of the ACL classifier bench unless `--rules` says.
const ACL_RULES: usize = 10_000;

/// Packets of the empty-pipeline run that measures the source.
const SOURCE_PACKETS: u64 = 2_000_000;

fn default_flows(pipeline: &str) -> u32 {
    match pipeline {
        "router" => 65536,
        "sdn-overlay" => 100_000,
        "switch-acl" => 1024,
        _ => 1,
    }
}

/// One measured run of a reference pipeline.
pub fn bench_pipeline(name: &str, a: &BenchArgs, tsc: f64) -> Result<BenchResult, String> {
    let mix = scenario::vbng::Mix::parse(&a.mix)?;
    let flows = if name == "vbng" { mix.flows(a.subscribers) } else { a.flows.unwrap_or_else(|| default_flows(name)) };
    let routes6 = a.routes6.unwrap_or(if a.v6 > 0 { 200_000 } else { 0 });
    let rules = a.rules.unwrap_or(24);
    let opts =
        Opts { flows, routes: a.routes, routes6, v6_pct: a.v6, seed: a.seed, overlay: a.variant, rules, subscribers: a.subscribers, mix };
    let scn = scenario::build(name, &opts)?;
    let templ = || Templates::build(&scn.frame, flows, &FrameSizes::Fixed(a.size)).map_err(|e| e.to_string());
    // The source's own cost: the same traffic straight to the sink. A fixed count, so that it
    // cancels out of the callgrind instructions-per-packet difference between two `--packets`.
    let (src, _) = drive("source", templ()?, SOURCE_PACKETS, default_warmup(SOURCE_PACKETS), a.virtual_clock, TxAll(1), |_| {});
    // Every flow has passed once before the timing starts (its connection is open), so the
    // figure is the steady state at that flow count; the CPS scenario times openings instead.
    let min_warm = if a.variant == scenario::overlay::Variant::Cps { 0 } else { u64::from(flows) };
    let warm = a.warmup.unwrap_or_else(|| default_warmup(a.packets)).max(min_warm);
    let (t, w) = drive(name, templ()?, a.packets, warm, a.virtual_clock, PipeProc(scn.pipe), |p| p.0.reset_stats());
    let pipe = &w.processor().0;
    let per = |x: f64| x / t.packets.max(1) as f64;
    let stages = pipe
        .stats()
        .into_iter()
        .filter(|(_, s)| s.pkts_in > 0)
        .map(|(n, s)| {
            let mut drops = serde_json::Map::new();
            for (r, &c) in DropReason::ALL.iter().zip(s.drops.iter()) {
                if c > 0 {
                    drops.insert(r.name().to_string(), c.into());
                }
            }
            let cyc = s.cycles as f64 / s.pkts_in.max(1) as f64;
            StageResult { name: n, ns_per_packet: cyc / tsc, cycles_per_packet: cyc, packets_in: s.pkts_in, packets_out: s.pkts_out, drops }
        })
        .collect();
    let ns = per(t.ns);
    let src_ns = src.ns / src.packets.max(1) as f64;
    Ok(BenchResult {
        pipeline: name.to_string(),
        packets: t.packets,
        frame_size: a.size,
        flows,
        mpps: t.packets as f64 / t.ns * 1e3,
        ns_per_packet: ns,
        cycles_per_packet: per(t.cycles),
        source_ns_per_packet: src_ns,
        pipeline_ns_per_packet: (ns - src_ns).max(0.0),
        stages,
        config: scn.config,
        cps: (a.variant == scenario::overlay::Variant::Cps).then(|| t.packets as f64 / 2.0 / t.ns * 1e9),
        step: None,
    })
}

fn median_of(mut runs: Vec<BenchResult>) -> (BenchResult, f64, f64) {
    runs.sort_by(|x, y| x.mpps.total_cmp(&y.mpps));
    let lo = runs.first().map_or(0.0, |r| r.mpps);
    let hi = runs.last().map_or(0.0, |r| r.mpps);
    let m = runs.swap_remove(runs.len() / 2);
    (m, lo, hi)
}

fn print_text(r: &BenchResult, spread: Option<(f64, f64)>) {
    let sp = spread.map_or(String::new(), |(lo, hi)| format!(" (min {lo:.2}, max {hi:.2})"));
    println!(
        "{}: {:.2} Mpps{sp}, {:.1} ns/packet, {:.1} cycles/packet ({} packets, {} B, {} flows)",
        r.pipeline, r.mpps, r.ns_per_packet, r.cycles_per_packet, r.packets, r.frame_size, r.flows
    );
    println!(
        "  source (empty pipeline): {:.1} ns/packet; pipeline alone: {:.1} ns/packet",
        r.source_ns_per_packet, r.pipeline_ns_per_packet
    );
    if let Some(rate) = r.config.get("sessions_per_s").and_then(serde_json::Value::as_f64) {
        println!("  sessions: {} created through the session API at {:.0} per second", r.config["subscribers"], rate);
    }
    println!("  {:<16} {:>9} {:>9} {:>12} {:>12}  drops", "stage", "ns/pkt", "cyc/pkt", "packets in", "packets out");
    for s in &r.stages {
        let d: Vec<String> = s.drops.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "  {:<16} {:>9.2} {:>9.1} {:>12} {:>12}  {}",
            s.name,
            s.ns_per_packet,
            s.cycles_per_packet,
            s.packets_in,
            s.packets_out,
            d.join(" ")
        );
    }
}

/// Result of the classifier benchmark.
#[derive(Serialize, Clone, Debug)]
pub struct AclResult {
    pipeline: String,
    kind: String,
    rules: usize,
    lookups: u64,
    mlookups_per_s: f64,
    ns_per_lookup: f64,
    build_ms: f64,
}

fn bench_acl(a: &BenchArgs) -> Result<AclResult, String> {
    use fastpath_tables::acl::{bench_setup, classbench::Kind};
    let kind = match a.kind.as_str() {
        "acl" => Kind::Acl,
        "fw" => Kind::Fw,
        "ipc" => Kind::Ipc,
        k => return Err(format!("--kind {k}: expected acl, fw or ipc")),
    };
    let rules = a.rules.unwrap_or(ACL_RULES);
    let (acl, trace, build) = bench_setup(kind, rules, 1 << 16, a.seed);
    let mut out = vec![None; 256];
    let mut done = 0u64;
    let target = a.packets.max(1_000_000);
    let t0 = Instant::now();
    while done < target {
        for chunk in trace.chunks(256) {
            acl.classify_batch(chunk, &mut out[..chunk.len()]);
            std::hint::black_box(&out);
            done += chunk.len() as u64;
        }
    }
    let ns = t0.elapsed().as_nanos() as f64;
    Ok(AclResult {
        pipeline: "acl".into(),
        kind: a.kind.clone(),
        rules,
        lookups: done,
        mlookups_per_s: done as f64 / ns * 1e3,
        ns_per_lookup: ns / done as f64,
        build_ms: build.as_secs_f64() * 1e3,
    })
}

/// One scenario of `fastpath bench tm`.
#[derive(Serialize, Clone, Debug)]
pub struct TmResult {
    pipeline: String,
    scenario: String,
    describe: String,
    packets: u64,
    runs: usize,
    /// Enqueue + dequeue, wall clock, the median run.
    ns_per_packet: f64,
    ns_per_packet_min: f64,
    ns_per_packet_max: f64,
    mpps: f64,
    sent: u64,
    dropped: u64,
}

/// `fastpath bench tm`: the traffic manager alone, on the workloads of `fastpath_tm::workload`
/// (the ones `crates/tm/examples/tm_cost.rs` runs under callgrind for instructions per packet).
/// Building the traffic manager and its traffic is not timed.
fn bench_tm(a: &BenchArgs) -> Result<(), String> {
    use fastpath_tm::workload::{Scenario, BURST};
    let scenarios = match a.scenario.as_deref() {
        None => vec![Scenario::Flat, Scenario::Hqos],
        Some(s) => vec![Scenario::parse(s).ok_or_else(|| format!("--scenario {s}: expected flat, hqos, flat-wred or hqos-shaped"))?],
    };
    let repeat = if a.repeat > 1 { a.repeat } else { 3 };
    let packets = (a.packets as usize).max(BURST) / BURST * BURST;
    for s in scenarios {
        let cfg = s.config();
        let w = s.workload();
        let mut ns = Vec::with_capacity(repeat);
        let (mut sent, mut dropped) = (0, 0);
        for _ in 0..repeat {
            let mut tm = fastpath_tm::Tm::build(&cfg).map_err(|e| e.to_string())?;
            let warm = packets.min(1 << 16); // warm-up: touch the state the run will use
            w.run(&mut tm, warm);
            let t0 = Instant::now();
            (sent, dropped) = w.run_at(&mut tm, packets, fastpath_tm::workload::Workload::duration_ns(warm));
            ns.push(t0.elapsed().as_nanos() as f64 / packets as f64);
        }
        ns.sort_by(f64::total_cmp);
        let median = ns[ns.len() / 2];
        let r = TmResult {
            pipeline: "tm".into(),
            scenario: s.name().into(),
            describe: s.describe().into(),
            packets: packets as u64,
            runs: repeat,
            ns_per_packet: median,
            ns_per_packet_min: ns[0],
            ns_per_packet_max: ns[ns.len() - 1],
            mpps: 1e3 / median,
            sent,
            dropped,
        };
        if a.json {
            println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
        } else {
            println!(
                "tm {} ({}): {:.1} ns/packet enqueue+dequeue (min {:.1}, max {:.1}; median of {}), {:.2} Mpps, {} packets, {} dropped",
                r.scenario, r.describe, r.ns_per_packet, r.ns_per_packet_min, r.ns_per_packet_max, r.runs, r.mpps, r.packets, r.dropped
            );
            println!("  instructions/packet: scripts/tm-instructions {}", s.letter());
        }
    }
    Ok(())
}

fn pin(a: &BenchArgs) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let core = a.core.unwrap_or(n - 1);
    if let Err(e) = fastpath_io::sys::pin_to_core(core) {
        eprintln!("note: could not pin to core {core}: {e}");
    }
}

pub fn run(a: BenchArgs) -> Result<(), String> {
    pin(&a);
    let tsc = tsc_per_ns();
    match a.pipeline.as_deref() {
        Some("acl") => {
            let r = bench_acl(&a)?;
            if a.json {
                println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
            } else {
                println!(
                    "acl classifier ({} rules, {}): {:.2} M lookups/s, {:.1} ns/lookup; built in {:.0} ms",
                    r.rules, r.kind, r.mlookups_per_s, r.ns_per_lookup, r.build_ms
                );
            }
            Ok(())
        }
        Some("sdn-overlay") if a.scenario.is_some() => overlay_scenario(&a, tsc),
        Some("bng-cp") => super::bench_bng::run(a.subscribers, a.json),
        Some("tm") => bench_tm(&a),
        Some(name) => {
            let mut runs = Vec::new();
            for _ in 0..a.repeat.max(1) {
                let r = bench_pipeline(name, &a, tsc)?;
                if a.json {
                    println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
                }
                runs.push(r);
            }
            let n = runs.len();
            let (m, lo, hi) = median_of(runs);
            if !a.json {
                print_text(&m, (n > 1).then_some((lo, hi)));
            }
            if let Some(path) = &a.report {
                write_report(path, &[(m, lo, hi)], &[])?;
            }
            Ok(())
        }
        None => run_all(a, tsc),
    }
}

fn run_all(a: BenchArgs, tsc: f64) -> Result<(), String> {
    let repeat = if a.repeat > 1 { a.repeat } else { 3 };
    let mut rows = Vec::new();
    for (name, _) in scenario::PIPELINES {
        eprintln!("bench {name}: {repeat} runs of {} packets…", a.packets);
        // The broadband gateway at the published test's frame size.
        let args = if *name == "vbng" { BenchArgs { size: VBNG_SIZE, ..a.clone() } } else { a.clone() };
        let mut runs = Vec::new();
        for _ in 0..repeat {
            runs.push(bench_pipeline(name, &args, tsc)?);
        }
        let (m, lo, hi) = median_of(runs);
        if a.json {
            println!("{}", serde_json::to_string(&m).map_err(|e| e.to_string())?);
        } else {
            print_text(&m, Some((lo, hi)));
        }
        rows.push((m, lo, hi));
    }
    eprintln!("bench acl: {} rules of each ClassBench flavour…", a.rules.unwrap_or(ACL_RULES));
    let mut acls = Vec::new();
    for kind in ["acl", "fw", "ipc"] {
        let r = bench_acl(&BenchArgs { kind: kind.into(), ..a.clone() })?;
        if a.json {
            println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
        } else {
            println!("acl classifier ({} rules, {kind}): {:.2} M lookups/s, built in {:.0} ms", r.rules, r.mlookups_per_s, r.build_ms);
        }
        acls.push(r);
    }
    let path = a.report.clone().unwrap_or_else(|| PathBuf::from("bench/out/report.html"));
    write_report(&path, &rows, &acls)?;
    eprintln!("report: {}", path.display());
    Ok(())
}

fn write_report(path: &std::path::Path, rows: &[(BenchResult, f64, f64)], acls: &[AclResult]) -> Result<(), String> {
    let mut rep = Report::new("fastpath bench");
    let host = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_default();
    rep.para(format!(
        "In-memory pipeline speed on one pinned core of {host} ({} cores). Packets come from a NIC-like \
         memory ring and leave through a sink; the source's own cost (an empty pipeline) is shown apart. \
         Median of the runs; the spread is min–max.",
        // Counted from /proc/cpuinfo: after pinning, available_parallelism() sees one core.
        std::fs::read_to_string("/proc/cpuinfo").map_or(0, |c| c.lines().filter(|l| l.starts_with("processor")).count())
    ));
    rep.heading("Pipelines");
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|(r, lo, hi)| {
            vec![
                r.pipeline.clone(),
                format!("{:.2}", r.mpps),
                format!("{lo:.2}–{hi:.2}"),
                format!("{:.1}", r.ns_per_packet),
                format!("{:.1}", r.cycles_per_packet),
                format!("{:.1}", r.source_ns_per_packet),
                r.frame_size.to_string(),
                r.flows.to_string(),
            ]
        })
        .collect();
    rep.table(&["pipeline", "Mpps", "spread", "ns/pkt", "cycles/pkt", "source ns/pkt", "frame B", "flows"], table);
    rep.bar_chart(
        Chart::new("Packets per second, one core")
            .y_label("Mpps")
            .bars("median", rows.iter().map(|(r, _, _)| (r.pipeline.clone(), r.mpps)).collect()),
    );
    for (r, _, _) in rows {
        rep.bar_chart(
            Chart::new(format!("{}: where the time goes", r.pipeline)).y_label("ns per packet").bars(
                "stage",
                r.stages
                    .iter()
                    .filter(|s| s.name != "end")
                    .map(|s| (s.name.clone(), s.ns_per_packet))
                    .chain([("source".to_string(), r.source_ns_per_packet)])
                    .collect(),
            ),
        );
    }
    if !acls.is_empty() {
        rep.heading("ACL classifier");
        rep.table(
            &["flavour", "rules", "M lookups/s", "ns/lookup", "build ms"],
            acls.iter()
                .map(|r| {
                    vec![
                        r.kind.clone(),
                        r.rules.to_string(),
                        format!("{:.2}", r.mlookups_per_s),
                        format!("{:.1}", r.ns_per_lookup),
                        format!("{:.0}", r.build_ms),
                    ]
                })
                .collect(),
        );
        rep.bar_chart(
            Chart::new("ACL lookups per second")
                .y_label("M lookups/s")
                .bars("rules", acls.iter().map(|r| (format!("{} {}", r.kind, r.rules), r.mlookups_per_s)).collect()),
        );
    }
    rep.heading("Reproduce");
    rep.pre(format!(
        "fastpath bench            # this report\n{}",
        rows.iter()
            .map(|(r, _, _)| match r.pipeline.as_str() {
                "vbng" => format!(
                    "fastpath bench vbng --subscribers {} --mix {} --size {} --json",
                    r.config["subscribers"],
                    r.config["mix"].as_str().and_then(|m| m.split(' ').next()).unwrap_or("8:1"),
                    r.frame_size
                ),
                _ => format!("fastpath bench {} --flows {} --size {} --json", r.pipeline, r.flows, r.frame_size),
            })
            .collect::<Vec<_>>()
            .join("\n")
    ));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    rep.write(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `fastpath bench sdn-overlay --scenario ladder|scale|cps|sizes`: one measured run (median of
/// `--repeat`) per step, a table, the JSON lines, and charts in the report.
fn overlay_scenario(a: &BenchArgs, tsc: f64) -> Result<(), String> {
    use scenario::overlay::{Variant, LADDER};
    let which = a.scenario.clone().unwrap_or_default();
    let base_flows = a.flows.unwrap_or(100_000);
    let steps: Vec<(String, BenchArgs)> = match which.as_str() {
        "ladder" => LADDER
            .iter()
            .enumerate()
            .filter(|(k, _)| a.ladder_step.is_none_or(|s| s == *k))
            .map(|(k, n)| (n.to_string(), BenchArgs { variant: Variant::Ladder(k), flows: Some(base_flows), ..a.clone() }))
            .collect(),
        "scale" => [1_000u32, 10_000, 100_000, 1_000_000, 5_000_000]
            .iter()
            .map(|&f| (f.to_string(), BenchArgs { flows: Some(f), ..a.clone() }))
            .collect(),
        "sizes" => [64usize, 128, 256, 512, 1024, 1518]
            .iter()
            .map(|&s| (s.to_string(), BenchArgs { size: s, flows: Some(base_flows), ..a.clone() }))
            .collect(),
        "cps" => vec![("cps".to_string(), BenchArgs { variant: Variant::Cps, flows: Some(a.flows.unwrap_or(2_000_000)), ..a.clone() })],
        other => return Err(format!("--scenario {other}: expected ladder, scale, cps or sizes")),
    };
    let mut rows = Vec::new();
    for (label, args) in steps {
        let mut runs = Vec::new();
        for _ in 0..a.repeat.max(1) {
            let mut r = bench_pipeline("sdn-overlay", &args, tsc)?;
            r.step = Some(format!("{which}:{label}"));
            if a.json {
                println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
            }
            runs.push(r);
        }
        let (m, lo, hi) = median_of(runs);
        rows.push((label, m, lo, hi));
    }
    if !a.json {
        println!("sdn-overlay --scenario {which} ({} B frames unless stepped, median of {} run(s))", a.size, a.repeat.max(1));
        println!("  {:<14} {:>8} {:>15} {:>9} {:>10} {:>9} {:>10}", "step", "Mpps", "spread", "ns/pkt", "cycles/pkt", "flows", "Mconn/s");
        for (l, r, lo, hi) in &rows {
            let cps = r.cps.map_or(String::from("-"), |c| format!("{:.2}", c / 1e6));
            println!(
                "  {l:<14} {:>8.2} {:>15} {:>9.1} {:>10.1} {:>9} {cps:>10}",
                r.mpps,
                format!("{lo:.2}–{hi:.2}"),
                r.ns_per_packet,
                r.cycles_per_packet,
                r.flows
            );
        }
    }
    let path = a.report.clone().unwrap_or_else(|| PathBuf::from(format!("bench/out/sdn-overlay-{which}.html")));
    let mut rep = Report::new(format!("fastpath bench sdn-overlay --scenario {which}"));
    rep.table(
        &["step", "Mpps", "ns/pkt", "cycles/pkt", "flows", "frame B", "conn/s"],
        rows.iter()
            .map(|(l, r, _, _)| {
                vec![
                    l.clone(),
                    format!("{:.2}", r.mpps),
                    format!("{:.1}", r.ns_per_packet),
                    format!("{:.1}", r.cycles_per_packet),
                    r.flows.to_string(),
                    r.frame_size.to_string(),
                    r.cps.map_or("-".into(), |c| format!("{c:.0}")),
                ]
            })
            .collect(),
    );
    let chart = match which.as_str() {
        "ladder" => Chart::new("Mpps per feature step, one core")
            .y_label("Mpps")
            .bars("median", rows.iter().map(|(l, r, _, _)| (l.clone(), r.mpps)).collect()),
        "scale" => Chart::new("Flow scale, one core")
            .x_label("concurrent flows")
            .y_label("Mpps")
            .log_x()
            .series("median", rows.iter().map(|(_, r, _, _)| (f64::from(r.flows), r.mpps)).collect()),
        "sizes" => Chart::new("Frame sizes, one core")
            .x_label("frame bytes")
            .y_label("Mpps")
            .series("median", rows.iter().map(|(_, r, _, _)| (r.frame_size as f64, r.mpps)).collect()),
        _ => Chart::new("Connections per second, one core")
            .y_label("M connections/s")
            .bars("median", rows.iter().map(|(l, r, _, _)| (l.clone(), r.cps.unwrap_or(0.0) / 1e6)).collect()),
    };
    if which == "scale" || which == "sizes" {
        rep.line_chart(chart);
    } else {
        rep.bar_chart(chart);
    }
    if which == "ladder" {
        rep.bar_chart(
            Chart::new("Cycles per packet per feature step")
                .y_label("cycles/packet")
                .bars("median", rows.iter().map(|(l, r, _, _)| (l.clone(), r.cycles_per_packet)).collect()),
        );
    }
    rep.pre(format!("fastpath bench sdn-overlay --scenario {which} --size {} --repeat {} --json", a.size, a.repeat.max(1)));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    rep.write(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("report: {}", path.display());
    Ok(())
}
