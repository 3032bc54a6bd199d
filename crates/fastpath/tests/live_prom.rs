//! `fastpath run --metrics` scraped by a real Prometheus server, which then answers a rate query.
//!
//! ```text
//!   peer ns                          dut ns (its own loopback, so fixed ports are free)
//!   h0 (raw socket, a UDP burst) ── veth ── d0 = p0 ┐ fastpath run pipelines/switch-acl.toml
//!   h1                           ── veth ── d1 = p1 ┘ (flood ▸ traffic manager ▸ p1)
//!                                           --metrics 127.0.0.1:9464 ◀── prometheus (1 s scrapes,
//!                                                                        127.0.0.1:9090, temp dir)
//! ```
//! 1. One scrape by hand: the text passes `promtool check metrics` (Prometheus's own linter) and
//!    carries the port, stage, table and worker families (ports are named by their interface,
//!    as in `ctl show counters`). fastpath runs under umask 000; its control socket is 0600.
//! 2. Prometheus scrapes it every second while h0 sends; `rate(fastpath_port_rx_packets_total
//!    {port="d0"}[5s])` through its HTTP API turns positive, and the queue counters and
//!    `up{job="fastpath"}` reached it too.
//!
//! Needs root and Debian's `prometheus` (scripts/setup-lab.sh installs it); in CI a missing
//! root or prometheus is a failure. Prometheus and fastpath are stopped by PID, and the
//! namespaces and the temp dir removed, on every exit path (drop guards).

mod common;

use common::{flood_frame, have, http_get, root_or_skip, wait_for, ChildGuard, TempDir};
use fastpath_io::af_packet::RawSocket;
use fastpath_io::netns::{Netns, VethPair};
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const METRICS: &str = "127.0.0.1:9464";
const PROMETHEUS: &str = "127.0.0.1:9090";

/// The first value of an instant query through Prometheus's HTTP API, if it has one.
fn query(ns: &Netns, promql: &str) -> Option<f64> {
    let mut q = String::new();
    for b in promql.bytes() {
        if b.is_ascii_alphanumeric() || b"_.-~".contains(&b) {
            q.push(char::from(b));
        } else {
            q.push_str(&format!("%{b:02X}"));
        }
    }
    let (code, body) = http_get(ns, PROMETHEUS, &format!("/api/v1/query?query={q}"))?;
    if code != 200 {
        return None;
    }
    let v: Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn prometheus_scrapes_the_metrics_endpoint_and_sees_a_rate() {
    if !root_or_skip() {
        return;
    }
    if !have("prometheus") || !have("promtool") {
        assert!(std::env::var_os("CI").is_none(), "CI has prometheus (scripts/setup-lab.sh installs it)");
        eprintln!("no prometheus/promtool (apt-get install prometheus): skipped");
        return;
    }
    let tmp = TempDir(std::env::temp_dir().join(format!("fp-prom-{}", std::process::id())));
    std::fs::create_dir_all(tmp.0.join("data")).unwrap();
    let peer = Netns::new("fpm-peer").unwrap();
    let dut = Netns::new("fpm-dut").unwrap();
    let _veths = [VethPair::new(&peer, "h0", &dut, "d0").unwrap(), VethPair::new(&peer, "h1", &dut, "d1").unwrap()];
    let sock = tmp.0.join("ctl.sock");
    let spec = format!("{}/../../pipelines/switch-acl.toml", env!("CARGO_MANIFEST_DIR"));
    // Under umask 000 (issue 18: the control socket came out srwxrwxrwx); `exec` keeps the PID.
    let child = Command::new("sh")
        .args(["-c", "umask 000 && exec \"$0\" \"$@\"", "ip"])
        .args(["netns", "exec", dut.name(), env!("CARGO_BIN_EXE_fastpath"), "run", &spec])
        .args(["--port", "p0=afpacket:d0", "--port", "p1=afpacket:d1", "--idle-sleep", "50", "--no-pin"])
        .args(["--metrics", METRICS, "--ctl"])
        .arg(&sock)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut fastpath = ChildGuard::new(child);

    // 1. One scrape by hand, checked by promtool.
    let text = wait_for("the metrics endpoint answers", Duration::from_secs(10), || {
        assert!(fastpath.child().try_wait().unwrap().is_none(), "fastpath run exited early");
        http_get(&dut, METRICS, "/metrics").filter(|(code, _)| *code == 200).map(|(_, body)| body)
    });
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let lint = lint.wait_with_output().unwrap();
    assert!(
        lint.status.success() && lint.stdout.is_empty() && lint.stderr.is_empty(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    let mode = std::fs::metadata(&sock).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777);
    assert_eq!(mode.ok(), Some(0o600), "the control socket is the owner's only, whatever the umask");
    for family in [
        "fastpath_port_rx_packets_total{port=\"d0\"}",
        "fastpath_stage_packets_in_total{stage=",
        "fastpath_table_capacity_entries{table=\"acl\",engine=\"acl\"} 16384",
        "fastpath_worker_batches_total{worker=\"0\"}",
    ] {
        assert!(text.contains(family), "{family} missing:\n{text}");
    }

    // 2. A real Prometheus server, scraping every second.
    let config = tmp.0.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: fastpath\n    static_configs:\n      - targets: ['{METRICS}']\n"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(tmp.0.join("prometheus.log")).unwrap();
    let prom = Command::new("ip")
        .args(["netns", "exec", dut.name(), "prometheus"])
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", tmp.0.join("data").display()))
        .arg(format!("--web.listen-address={PROMETHEUS}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut prometheus = ChildGuard::new(prom);
    let prom_log = || std::fs::read_to_string(tmp.0.join("prometheus.log")).unwrap_or_default();

    let stop = AtomicBool::new(false);
    let (rate, queued, up) = std::thread::scope(|s| {
        // h0 sends a burst of 100 frames every 100 ms until the queries are answered (bounded).
        let sender = s.spawn(|| {
            peer.run(|| {
                let tx = RawSocket::open("h0").unwrap();
                let t0 = Instant::now();
                let mut seq = 0u32;
                while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(60) {
                    for _ in 0..100 {
                        tx.send(&flood_frame(seq, false)).unwrap();
                        seq += 1;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                seq
            })
            .unwrap()
        });
        struct StopOnDrop<'s>(&'s AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _guard = StopOnDrop(&stop);
        let rate = wait_for("a positive rate in Prometheus", Duration::from_secs(45), || {
            assert!(prometheus.child().try_wait().unwrap().is_none(), "prometheus exited:\n{}", prom_log());
            query(&dut, "rate(fastpath_port_rx_packets_total{port=\"d0\"}[5s])").filter(|&r| r > 0.0)
        });
        let queued = wait_for("queue counters in Prometheus", Duration::from_secs(10), || {
            query(&dut, "sum(fastpath_queue_enqueued_packets_total{port=\"d1\"})").filter(|&n| n > 0.0)
        });
        let up = query(&dut, "up{job=\"fastpath\"}");
        stop.store(true, Ordering::Relaxed);
        let sent = sender.join().unwrap();
        assert!(sent > 0);
        (rate, queued, up)
    });
    eprintln!("prometheus: rate(fastpath_port_rx_packets_total{{port=\"d0\"}}[5s]) = {rate:.1}/s, d1 queues enqueued {queued}");
    assert!(rate > 0.0);
    assert_eq!(up, Some(1.0), "the scrape target is up");
    drop(prometheus);
    let (status, out, err) = fastpath.stop(true);
    assert!(status.success(), "{status}\n{out}\n{err}");
    assert!(err.contains(&format!("Prometheus metrics at http://{METRICS}/metrics")), "{err}");
    assert!(!Path::new(&sock).exists(), "the socket file is removed at exit");
}
