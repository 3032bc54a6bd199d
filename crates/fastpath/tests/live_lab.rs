//! `fastpath lab rfc2544` end to end: one frame size, short trials, the `fastpath` DUT (this
//! binary, started by the lab in the DUT namespace) and the Linux bridge in one invocation, two runs.
//! Checks the JSON lines (one per DUT, the required fields, traffic actually forwarded), the
//! HTML report, and that no lab namespace of this run is left behind.
//! Needs root; in CI (`CI` set) a missing root is a failure, not a skip.

mod common;

use std::process::Command;

#[test]
fn rfc2544_fastpath_and_linux_bridge_in_one_run() {
    if !common::root_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("fpl-lab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, html) = (dir.join("out.jsonl"), dir.join("report.html"));
    let out = Command::new("timeout")
        .args(["120", env!("CARGO_BIN_EXE_fastpath"), "lab", "rfc2544", "--dut", "fastpath", "--dut", "linux-bridge"])
        .args(["--sizes", "64", "--trial-s", "0.3", "--max-trials", "2", "--latency-s", "0.3", "--runs", "2", "--json", "--json-out"])
        .arg(&json)
        .arg("--report")
        .arg(&html)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let report = std::fs::read_to_string(&html).unwrap_or_default();
    let file = std::fs::read_to_string(&json).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "fastpath lab failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert_eq!(file, stdout, "--json prints what --json-out writes");
    let rows: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    for (row, dut) in rows.iter().zip(["fastpath", "linux-bridge"]) {
        assert_eq!(row["dut"], dut, "{row}");
        assert_eq!(row["frame_size"], 64, "{row}");
        assert_eq!(row["flows"], 1, "{row}");
        assert_eq!(row["loss_threshold"], 0.0, "{row}");
        for k in ["throughput_mpps", "throughput_gbps"] {
            assert!(row[k].as_f64().is_some_and(|x| x >= 0.0), "{k}: {row}");
        }
        for k in ["min", "p50", "p99", "max"] {
            assert!(row["latency_us"][k].as_f64().is_some_and(|x| x > 0.0), "latency {k}: {row}");
        }
        assert_eq!(row["runs"].as_array().map(Vec::len), Some(2), "--runs 2: {row}");
        // The DUT forwarded traffic when offered more than it could take.
        assert!(row["overload_rx_mpps"].as_f64().is_some_and(|x| x > 0.01), "nothing forwarded: {row}\n{stderr}");
    }
    assert!(stderr.contains("fastpath: started in") && stderr.contains("linux-bridge: started in"), "{stderr}");
    // The second run measures the DUTs in reverse order.
    let second = |d: &str| stderr.lines().position(|l| l.starts_with(&format!("{d}: started in")) && l.ends_with("(run 2/2)"));
    assert!(second("linux-bridge").unwrap() < second("fastpath").unwrap(), "{stderr}");
    assert!(report.contains("<svg") && report.contains("fastpath") && report.contains("linux-bridge"));
    // Torn down: none of this run's namespaces remain.
    let ns = fastpath_io::netns::ip(&["netns", "list"]).unwrap();
    let created: Vec<&str> = stderr.lines().filter_map(|l| l.split("started in ").nth(1)?.split_whitespace().next()).collect();
    assert_eq!(created.len(), 4, "two DUTs, two runs: {stderr}");
    for n in created {
        assert!(!ns.contains(n), "namespace {n} left behind:\n{ns}");
    }
}

/// `fastpath lab rfc2544 --dut fastpath-xdp`: the l2fwd spec compiled to XDP forwards the lab's
/// traffic (its counters, printed by the DUT at stop, show every frame through the `port_pair`
/// table and none dropped) and the latency probes come through; nothing is left attached or behind.
#[test]
fn rfc2544_fastpath_xdp_forwards_the_labs_traffic() {
    if !common::root_or_skip() {
        return;
    }
    let out = Command::new("timeout")
        .args(["120", env!("CARGO_BIN_EXE_fastpath"), "lab", "rfc2544", "--dut", "fastpath-xdp", "--dut", "linux-bridge"])
        .args(["--sizes", "64", "--trial-s", "0.3", "--max-trials", "2", "--latency-s", "0.3", "--json", "--report", "/dev/null"])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "fastpath lab failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    let rows: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert_eq!(rows[0]["dut"], "fastpath-xdp", "{}", rows[0]);
    assert!(rows[0]["throughput_mpps"].as_f64().is_some_and(|x| x > 0.01), "{}\n{stderr}", rows[0]);
    assert!(rows[0]["latency_us"]["p50"].as_f64().is_some_and(|x| x > 0.0), "{}", rows[0]);
    // The DUT's own counters: frames in on p0, out on p1, all through the table, no drops.
    let line = |name: &str| {
        stderr.lines().find(|l| l.split_whitespace().nth(1) == Some(name)).unwrap_or_else(|| panic!("no {name} row:\n{stderr}"))
    };
    let cols = |l: &str| l.split_whitespace().skip(2).map(|x| x.parse::<u64>().unwrap()).collect::<Vec<_>>();
    let (p0, p1) = (cols(line("p0")), cols(line("p1")));
    assert!(p0[0] > 1000 && p0[0] == p1[1], "p0 {p0:?} p1 {p1:?}\n{stderr}");
    let table = stderr.lines().find(|l| l.starts_with("port_pair")).unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(table.split_whitespace().nth(1), Some(p0[0].to_string().as_str()), "{stderr}");
    assert!(!stderr.contains("drops by reason"), "{stderr}");
    assert!(stderr.contains("(skb mode)"), "the lab runs fastpath-xdp in generic mode on veth:\n{stderr}");
    let ns = fastpath_io::netns::ip(&["netns", "list"]).unwrap();
    for n in stderr.lines().filter_map(|l| l.split("started in ").nth(1)?.split_whitespace().next()) {
        assert!(!ns.contains(n), "namespace {n} left behind:\n{ns}");
    }
}

/// `fastpath lab tcp`: iperf3 through the `fastpath` DUT (io forwarding) and the Linux bridge in
/// one invocation; both carry TCP, and the DUT's CPU is sampled.
#[test]
fn tcp_through_fastpath_and_linux_bridge_in_one_run() {
    if !common::root_or_skip() {
        return;
    }
    let out = Command::new("timeout")
        .args(["120", env!("CARGO_BIN_EXE_fastpath"), "lab", "tcp", "--dut", "fastpath", "--dut", "linux-bridge"])
        .args(["--seconds", "2", "--streams", "1", "--json", "--report", "/dev/null"])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "fastpath lab tcp failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    let rows: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    for (row, dut) in rows.iter().zip(["fastpath", "linux-bridge"]) {
        assert_eq!(row["dut"], dut, "{row}");
        assert!(row["gbps"].as_f64().is_some_and(|g| g > 0.01), "no TCP throughput: {row}\n{stderr}");
        assert!(row["gbps_over_time"].as_array().is_some_and(|v| !v.is_empty()), "{row}");
    }
    assert!(rows[0]["dut_cpu_pct"].as_f64().is_some_and(|c| c > 1.0), "the fastpath DUT's CPU was not sampled: {}", rows[0]);
}
