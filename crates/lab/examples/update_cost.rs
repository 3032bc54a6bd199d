//! The work of `fastpath lab update-under-load`'s writes inside the DUT, without the lab: the
//! control replica applies each write of the schedule (`update::write_changes`, defaults:
//! writes of 100, about a second of changes live) as the control socket's text, commits the
//! classifier, and a worker replica applies the same ops and adopts the commit. Full builds
//! (folds) run on a thread of their own and are installed with a later write, as
//! `Control::transact` does; so does the change log's (`fastpath_control::changelog`), whose
//! push is timed on its own. Prints p50 / p99 / max per stage in µs.
//!
//! `cargo run --release -p fastpath-lab --example update_cost -- [WRITES] [BATCH] [sync]`, or under
//! `valgrind --tool=callgrind` for exact instruction counts per function (divide by WRITES).
use fastpath_lab::tests::update::{base_entries, change_text, write_changes, UpdateConfig, SPEC};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let writes: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(400);
    let batch: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    // `sync`: each fold runs at once on this thread (outside the stages timed) and is installed
    // with the next write, as on a quiet machine (a fold of ~8 ms between writes 10 ms apart);
    // deterministic, for callgrind.
    let sync = args.next().is_some_and(|s| s == "sync");
    let cfg = UpdateConfig { batch, ..UpdateConfig::default() };
    let keep = cfg.keep();
    let prog = fastpath_pipeline::compile("update", SPEC).expect("spec compiles");
    let sink_ip = Ipv4Addr::new(10, 255, 0, 2);
    let sink_mac = [2, 0, 0, 0, 0, 2];
    let base = base_entries(sink_ip, sink_mac, cfg.base_routes, cfg.base_acl, cfg.in_flight);
    let mut shadow = prog.instantiate();
    let mut worker = prog.instantiate();
    shadow.load_entries("base", &base).expect("base loads");
    worker.load_entries("base", &base).expect("base loads");

    let names = ["parse", "replica", "commit", "worker", "total"];
    // The control plane's change log, as `Control` keeps it: once it holds more than 65,536
    // ops and twice its last net snapshot, a thread of its own folds it.
    let c0 = Instant::now();
    let mut log = fastpath_control::changelog::ChangeLog::new(&shadow, 65_536);
    let log_start = c0.elapsed();
    let mut pushes: Vec<Duration> = Vec::new();
    let mut fold_times: Vec<Duration> = Vec::new();
    let mut log_max = 0usize;
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); names.len()];
    let mut folds: Vec<(usize, std::thread::JoinHandle<fastpath_pipeline::table::Folded>)> = Vec::new();
    let mut retired = Vec::new();
    let mut done: Vec<(usize, fastpath_pipeline::table::Folded)> = Vec::new();
    for w in 0..writes {
        let text: Vec<String> = write_changes(&cfg, w, keep, true).into_iter().map(|c| change_text(sink_ip, sink_mac, c)).collect();
        let t0 = Instant::now();
        let ops: std::sync::Arc<[_]> = text.iter().map(|l| prog.parse_entry(l).expect("change parses")).collect();
        let t1 = Instant::now();
        shadow.apply_ops(&ops).expect("replica applies");
        let t2 = Instant::now();
        let mut prebuilt = shadow.built_classifiers(&ops);
        for (t, f) in done.drain(..) {
            if let Some(b) = shadow.finish_fold(t, f) {
                prebuilt.retain(|(u, _)| *u != t);
                prebuilt.push((t, b));
            }
        }
        let mut k = 0;
        while k < folds.len() {
            if folds[k].1.is_finished() {
                let (t, h) = folds.swap_remove(k);
                if let Some(b) = h.join().ok().and_then(|f| shadow.finish_fold(t, f)) {
                    prebuilt.retain(|(u, _)| *u != t);
                    prebuilt.push((t, b));
                }
            } else {
                k += 1;
            }
        }
        let t3 = Instant::now();
        worker.apply_ops_prebuilt(&ops, &prebuilt, &mut retired).expect("worker applies");
        let t4 = Instant::now();
        retired.clear();
        let (log_folds, c0) = (log.folds(), Instant::now());
        let old = log.push(ops.clone(), || {});
        pushes.push(c0.elapsed());
        // `Control` retires these to its reaper thread.
        drop(old);
        if sync {
            drop(log.settle());
        }
        if log.folds() > log_folds {
            fold_times.push(log.last_fold_time());
        }
        log_max = log_max.max(log.len());
        for (t, job) in shadow.fold_jobs() {
            if sync {
                done.push((t, job.run()));
            } else {
                folds.push((t, std::thread::spawn(move || job.run())));
            }
        }
        for (i, d) in [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0].into_iter().enumerate() {
            times[i].push(d);
        }
        // The lab's pace: 100 writes a second leaves the folds time to finish.
        if !sync {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    println!("{writes} writes of {batch}, µs p50 / p99 / max:");
    println!(
        "  change log: start-up classes {log_start:?}, folds (on their thread) {fold_times:?}, longest {log_max} ops, now {}",
        log.len()
    );
    pushes.sort();
    let at = |q: f64| pushes.get(((pushes.len() as f64 - 1.0) * q).round() as usize).map_or(0.0, |d| d.as_secs_f64() * 1e6);
    println!("  log push {:8.1} {:8.1} {:8.1}", at(0.5), at(0.99), at(1.0));
    for (n, mut v) in names.iter().zip(times) {
        v.sort();
        let at = |q: f64| v.get(((v.len() as f64 - 1.0) * q).round() as usize).map_or(0.0, |d| d.as_secs_f64() * 1e6);
        println!("  {n:8} {:8.1} {:8.1} {:8.1}", at(0.5), at(0.99), at(1.0));
    }
}
