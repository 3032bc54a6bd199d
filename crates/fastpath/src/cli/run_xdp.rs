//! `fastpath run` with `xdp:` ports: the pipeline compiled to one eBPF program
//! (`fastpath_xdp`), attached to every port, its tables filled from the entries files.
//!
//! The process then only watches: it reads the program's per-CPU counters once a second for
//! the rate line (when stdout is a terminal) and the `--duration` / `--packets` bounds, and on
//! SIGINT/SIGTERM detaches the program (frames that arrive afterwards go to the kernel stack)
//! and prints per-port, per-table and per-reason counters. The program is detached by the
//! kernel also when the process dies, since it is held by BPF links.

use super::run::{Mode, RunArgs, TcRedirectArg};
use fastpath_xdp::{AttachMode, TcRedirect, XdpCounters, XdpDatapath, XdpPortSpec};
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Formats the final counters.
fn report(c: &XdpCounters, ports: &[XdpPortSpec], ended_by: &str, secs: f64) -> String {
    let (rx, tx): (u64, u64) = (c.rx.iter().sum(), c.tx.iter().sum());
    let mut o = String::new();
    let _ = writeln!(
        o,
        "stopped by {ended_by} after {secs:.2} s: rx {rx} tx {tx} dropped {} ({:.3} Mpps rx average)",
        c.dropped(),
        rx as f64 / secs.max(1e-9) / 1e6
    );
    let _ = writeln!(o, "{:<4} {:<12} {:>12} {:>12}", "id", "port", "rx_pkts", "tx_pkts");
    for (i, p) in ports.iter().enumerate() {
        let _ = writeln!(o, "{i:<4} {:<12} {:>12} {:>12}", p.name, c.rx[i], c.tx[i]);
    }
    if !c.tables.is_empty() {
        let _ = writeln!(o, "{:<16} {:>12} {:>12}", "table", "hits", "misses");
        for (name, hits, misses) in &c.tables {
            let _ = writeln!(o, "{name:<16} {hits:>12} {misses:>12}");
        }
    }
    if !c.drops.is_empty() {
        let _ = writeln!(o, "drops by reason:");
        for (r, n) in &c.drops {
            let _ = writeln!(o, "  {:<20} {n:>12}  {}", r.name(), r.description());
        }
    }
    o
}

/// Runs the pipeline of `a` as an XDP program on `ports` (name, interface).
pub fn run(a: &RunArgs, ports: &[(String, String)]) -> Result<(), String> {
    if a.trace > 0 {
        return Err("--trace works on capture ports only".into());
    }
    if a.workers != 1 {
        return Err("xdp: ports run on whichever CPU receives (use threaded NAPI or RSS to place them); drop --workers".into());
    }
    if a.ctl.is_some() || a.ctl_group.is_some() || a.metrics.is_some() {
        return Err("xdp: ports have no control socket or metrics endpoint yet; give the tables with --entries".into());
    }
    let prog = fastpath_pipeline::compile_file(&a.spec).map_err(|e| e.to_string())?;
    let specs: Vec<XdpPortSpec> = ports.iter().map(|(name, iface)| XdpPortSpec { name: name.clone(), iface: iface.clone() }).collect();
    let redirect = match (a.tc_redirect, a.mode) {
        (None, _) | (Some(TcRedirectArg::Auto), Mode::Tc) => TcRedirect::Auto,
        (Some(TcRedirectArg::Xmit), Mode::Tc) => TcRedirect::Xmit,
        (Some(_), _) => return Err("--tc-redirect is for --mode tc (XDP redirects through the port map)".into()),
    };
    let mut dp = XdpDatapath::build(prog, &specs).map_err(|e| e.to_string())?.with_tc_redirect(redirect);
    for e in &a.entries {
        let text = std::fs::read_to_string(e).map_err(|err| format!("{}: {err}", e.display()))?;
        let n = dp.load_entries(&e.display().to_string(), &text).map_err(|err| err.to_string())?;
        eprintln!("loaded {n} entries from {}", e.display());
    }
    let stop = fastpath_io::multi::stop_on_signals().map_err(|e| format!("installing signal handlers: {e}"))?;
    let mode = match a.mode {
        Mode::Auto => AttachMode::Auto,
        Mode::Native => AttachMode::Native,
        Mode::Skb => AttachMode::Skb,
        Mode::Tc => AttachMode::Tc,
    };
    let modes = dp.attach(mode).map_err(|e| e.to_string())?;
    let list: Vec<String> = specs
        .iter()
        .zip(&modes)
        .enumerate()
        .map(|(i, (p, m))| {
            let to_peer = if dp.tc_peer().get(i) == Some(&true) { ", sent into its peer" } else { "" };
            format!("{}={} ({m} mode{to_peer})", p.name, p.iface)
        })
        .collect();
    let hook = if matches!(a.mode, Mode::Tc) { "a tc" } else { "an XDP" };
    eprintln!("fastpath: {} as {hook} program of {} instructions on {} (Ctrl-C stops)", a.spec.display(), dp.insns(), list.join(" "));
    let t0 = Instant::now();
    let tty = std::io::stdout().is_terminal();
    let mut ended_by = "signal";
    let (mut last_t, mut last) = (Instant::now(), XdpCounters::default());
    let sum = |v: &[u64]| v.iter().sum::<u64>();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(if a.packets.is_some() { 20 } else { 100 }));
        if a.duration.is_some_and(|d| t0.elapsed().as_secs_f64() >= d) {
            ended_by = "--duration";
            break;
        }
        let need_counts = a.packets.is_some() || (tty && last_t.elapsed() >= Duration::from_secs(1));
        if !need_counts {
            continue;
        }
        let c = dp.counters();
        if a.packets.is_some_and(|n| sum(&c.rx) >= n) {
            ended_by = "--packets";
            break;
        }
        if tty && last_t.elapsed() >= Duration::from_secs(1) {
            let dt = last_t.elapsed().as_secs_f64();
            let mpps = |x: u64, y: u64| x.saturating_sub(y) as f64 / dt / 1e6;
            print!(
                "\r{:>7.1}s  rx {:>7.3} Mpps  tx {:>7.3} Mpps  drops {:>7.3} Mpps  total rx {} tx {} drops {}   ",
                t0.elapsed().as_secs_f64(),
                mpps(sum(&c.rx), sum(&last.rx)),
                mpps(sum(&c.tx), sum(&last.tx)),
                mpps(c.dropped(), last.dropped()),
                sum(&c.rx),
                sum(&c.tx),
                c.dropped()
            );
            let _ = std::io::stdout().flush();
            last = c;
            last_t = Instant::now();
        }
    }
    if tty {
        println!();
    }
    dp.detach();
    let o = report(&dp.counters(), &specs, ended_by, t0.elapsed().as_secs_f64());
    print!("{o}");
    if let Some(p) = &a.counters_out {
        std::fs::write(p, &o).map_err(|e| format!("--counters-out {}: {e}", p.display()))?;
    }
    Ok(())
}
