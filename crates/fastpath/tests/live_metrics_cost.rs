//! `fastpath lab metrics-cost` end to end, small: fastpath forwards a modest rate with
//! `--metrics` on, in windows without scraping and with scraping at 20 per second. Checks the
//! report's structure, that the scraper's scrapes were answered (with a plausible exposition
//! size and latency), that the windows' forwarded rates and the workers' own counters agree,
//! and that nothing is left behind. (Whether scraping costs anything is a figure of a real run
//! for docs/lab.md, not an assertion: this machine is shared.)
//! Needs root; in CI (`CI` set) a missing root is a failure, not a skip.

mod common;

use std::process::Command;

#[test]
fn scraping_windows_alternate_with_quiet_ones_and_are_reported() {
    if !common::root_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("fpl-metrics-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("report.html");
    // 0.02 Mpps: the worker forwards everything, whatever else the machine runs.
    let out = Command::new("timeout")
        .args(["180", env!("CARGO_BIN_EXE_fastpath"), "lab", "metrics-cost", "--mpps", "0.02", "--trial-s", "1"])
        .args(["--repeat", "2", "--scrape-rate", "20", "--json", "--report"])
        .arg(&html)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let report = std::fs::read_to_string(&html).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "fastpath lab failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    let rows: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2, "no scraping, then 20/s:\n{stdout}");
    let (none, scraped) = (&rows[0], &rows[1]);
    for r in &rows {
        assert_eq!(r["test"], "metrics-cost", "{r}");
        assert_eq!((r["rounds"].as_u64(), r["frame_size"].as_u64()), (Some(2), Some(64)), "{r}");
        let ws = r["windows"].as_array().unwrap();
        assert_eq!(ws.len(), 2, "one window per round: {r}");
        for w in ws {
            let (sent, received) = (w["sent"].as_u64().unwrap(), w["received"].as_u64().unwrap());
            assert!(sent >= 10_000, "the generator sent too little to judge: {w}\n{stderr}");
            assert_eq!(received, sent, "below capacity nothing is lost: {w}\n{stderr}");
            // The workers' own counters (read by scrapes around the window) saw the same packets,
            // give or take a few the hosts' kernels send by themselves (the sink counts only the
            // generator's frames).
            let tx = w["worker_tx_pkts"].as_u64().unwrap();
            assert!((received..=received + 20).contains(&tx), "workers sent {tx}, the sink counted {received}: {w}");
            assert!(w["pkts_per_batch"].as_f64().unwrap() >= 1.0, "{w}");
        }
        assert!(r["sink_mpps"].as_f64().unwrap() > 0.015, "{r}");
        assert!(r["noise_pct"].as_f64().unwrap() >= 0.0 && r["within_noise"].is_boolean(), "two rounds give a noise figure: {r}");
    }
    assert_eq!((none["scrapes_per_s"].as_f64(), none["scrapes"].as_u64(), none["ratio_vs_none"].as_f64()), (Some(0.0), Some(0), Some(1.0)));
    assert_eq!(scraped["scrapes_per_s"].as_f64(), Some(20.0));
    // 20/s while the scraper ran (a little longer than the generator sent), each answered.
    let (scrapes, achieved) = (scraped["scrapes"].as_u64().unwrap(), scraped["scrapes_per_s_achieved"].as_f64().unwrap());
    assert!(scrapes >= 20 && (10.0..=21.0).contains(&achieved), "{scraped}\n{stderr}");
    assert_eq!(scraped["scrape_failures"], 0, "{scraped}\n{stderr}");
    // l2fwd's exposition: ports, stages, the table and the workers — some kilobytes.
    let bytes = scraped["scrape_bytes"].as_u64().unwrap();
    assert!((1_000..1_000_000).contains(&bytes), "{scraped}");
    // The workers counted each scrape they answered, and the cycles it took them.
    for w in scraped["windows"].as_array().unwrap() {
        assert_eq!(w["control_messages"].as_u64().unwrap(), w["scrapes"].as_u64().unwrap() + 1, "the window's and the one before: {w}");
        assert!(w["control_cycles"].as_u64().unwrap() > 0, "{w}");
    }
    let us = scraped["worker_us_per_scrape"].as_f64().unwrap();
    assert!(us > 0.0 && us < 10_000.0, "{scraped}");
    let ms = &scraped["scrape_ms"];
    let (p50, p99, max) = (ms["p50"].as_f64().unwrap(), ms["p99"].as_f64().unwrap(), ms["max"].as_f64().unwrap());
    assert!(p50 > 0.0 && p50 <= p99 && p99 <= max && max < 5_000.0, "{scraped}");
    assert!(report.contains("metrics-cost") && report.matches("<svg").count() >= 2, "the report has the table and both charts");
    // Torn down: the run's namespaces are gone.
    let ns = fastpath_io::netns::ip(&["netns", "list"]).unwrap();
    let created: Vec<&str> = stderr.lines().filter_map(|l| l.split("started in ").nth(1)?.split_whitespace().next()).collect();
    assert_eq!(created.len(), 1, "{stderr}");
    assert!(!ns.contains(created[0]), "namespace {} left behind:\n{ns}", created[0]);
}
