//! `fastpath lab bng-dhcp` end to end: real DHCP clients (busybox udhcpc, one ISC dhclient) in
//! subscriber namespaces, each behind its own S-VLAN/C-VLAN pair (tc taggers), lease through
//! the vbng user plane (`fastpath run --cpri --pfcp`) and the control plane (`fastpath
//! bng-cp`), both this binary, started by the lab. The lab reports what it saw; these tests
//! check the report: every lease, every session with the client's line, every ping, the
//! spoofing drop, release, expiry and restarts, perfdhcp's exchanges with no drop, and that no
//! namespace of the run is left. Needs root (in CI a missing root is a failure).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `fastpath lab bng-dhcp ARGS --json --json-out … --report …` (bounded by `limit`) and
/// returns (exit ok, JSON rows, stderr, report).
fn lab(args: &[&str], limit: Duration) -> (bool, Vec<serde_json::Value>, String, String) {
    let dir = std::env::temp_dir().join(format!("fpl-bngdhcp-{}-{}", std::process::id(), args.join("").len()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, html, err) = (dir.join("out.jsonl"), dir.join("report.html"), dir.join("stderr.txt"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["lab", "bng-dhcp"])
        .args(args)
        .args(["--json", "--json-out"])
        .arg(&json)
        .arg("--report")
        .arg(&html)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if t0.elapsed() > limit {
            // SIGTERM: the lab tears its namespaces down on the way out.
            let _ = Command::new("kill").arg(pid.to_string()).status();
            std::thread::sleep(Duration::from_secs(10));
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let rows = std::fs::read_to_string(&json).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let report = std::fs::read_to_string(&html).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    // Torn down: no namespace of that process is left.
    let ns = fastpath_io::netns::ip(&["netns", "list"]).unwrap();
    let left: Vec<&str> = ns.lines().filter(|l| l.contains(&format!("-{pid}-"))).collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    assert!(status.is_some(), "fastpath lab bng-dhcp did not finish within {limit:?}:\n{stderr}");
    (status.is_some_and(|s| s.success()), rows, stderr, report)
}

fn check_ok(row: &serde_json::Value, k: &str, stderr: &str) {
    assert_eq!(row[k]["ok"], true, "{k}: {}\n{stderr}", row[k]);
}

#[test]
fn a_hundred_dhcp_clients_lease_forward_and_lose_their_sessions_as_they_should() {
    if !common::root_or_skip() {
        return;
    }
    let (ok, rows, stderr, report) = lab(
        &["--subscribers", "100", "--restart", "cp", "--expiry-lease-s", "6", "--perfdhcp-rate", "200", "--perfdhcp-s", "2"],
        Duration::from_secs(300),
    );
    assert!(ok, "the lab reported a failure:\n{stderr}");
    assert_eq!(rows.len(), 2, "the run and perfdhcp: {rows:?}");
    let r = &rows[0];
    assert_eq!(r["measurement"], "bng-dhcp");
    assert_eq!(r["subscribers"], 100);
    // 99 start together; the short-lease one leases alone later (its check below).
    assert_eq!(r["leases"], 99, "{r}\n{stderr}");
    assert_eq!(r["lease_failures"], 0, "{r}\n{stderr}");
    assert_eq!(r["sessions_matching"], 99, "each lease's session, with the client's port, S-VLAN, C-VLAN and MAC: {r}");
    assert_eq!(r["pings_ok"], 99, "{r}\n{stderr}");
    let (p50, p99) = (r["lease_latency_p50_s"].as_f64().unwrap(), r["lease_latency_p99_s"].as_f64().unwrap());
    assert!(p50 > 0.0 && p99 >= p50 && r["leases_per_s"].as_f64().unwrap() > 0.0, "{r}");
    let iperf = r["iperf"].as_array().unwrap();
    assert_eq!(iperf.len(), 2, "{r}");
    for run in iperf {
        assert!(run["mbps"].as_f64().unwrap() > 1.0, "iperf3 through the user plane: {run}\n{stderr}");
    }
    for k in ["spoofing", "release_udhcpc", "release_dhclient", "expiry", "cp_restart"] {
        check_ok(r, k, &stderr);
    }
    assert!(r["spoofing"]["detail"].as_str().unwrap().contains("0/3 pings answered"), "{}", r["spoofing"]);
    let p = &rows[1];
    assert_eq!(p["measurement"], "bng-dhcp-perfdhcp");
    assert!(p["acks_received"].as_u64().unwrap() > 0, "perfdhcp completed no exchange: {p}\n{stderr}");
    assert_eq!(p["drops"], 0, "{p}\n{stderr}");
    assert_eq!(p["acks_received"], p["discovers_sent"], "{p}");
    assert_eq!(r["perfdhcp_zero_drop_rate"], 200, "{r}");
    assert!(report.contains("bng-dhcp") && report.contains("<svg"), "the HTML report");
}

/// A user plane killed mid-run must get every session back from the control plane's store
/// (PFCP re-association and refill, docs/bng.md), and its subscribers must forward again.
#[test]
fn a_restarted_user_plane_gets_every_session_back() {
    if !common::root_or_skip() {
        return;
    }
    let (_, rows, stderr, _) = lab(
        &["--subscribers", "6", "--restart", "up", "--expiry-lease-s", "0", "--iperf-clients", "0", "--perfdhcp-rate", "0"],
        Duration::from_secs(120),
    );
    let r = rows.first().unwrap_or_else(|| panic!("no result:\n{stderr}"));
    assert_eq!(r["lease_failures"], 0, "{r}\n{stderr}");
    check_ok(r, "up_restart", &stderr);
}
