//! `fastpath lab fairness | burst | incast` end to end at a small size: the `fastpath` DUT
//! (this binary on the generated L2 spec with its `[tm]` section, started by the lab in the DUT
//! namespace) and `linux-tc` (the bridge shaped by tc) in one invocation each. Checks the JSON
//! lines (both DUTs, the fields, traffic through the shaper), that fastpath's shared buffer
//! absorbs a larger burst than Linux's per-port share of the same memory, that every incast
//! byte arrives, the HTML report, and that no lab namespace of the run is left behind. The
//! bounds are loose: the machine is shared, and a polling DUT loses shaper tokens whenever
//! something takes its core (docs/lab.md). Needs root; in CI a missing root is a failure.

mod common;

use std::process::Command;

/// Runs `fastpath lab ARGS --json --report …`; returns the rows (panics with the output if it
/// fails) and checks the report and the namespaces.
fn lab(test: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let dir = std::env::temp_dir().join(format!("fpl-switch-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("report.html");
    let out = Command::new("timeout")
        .args(["240", env!("CARGO_BIN_EXE_fastpath"), "lab", test, "--rate", "50mbit", "--buffer", "256k", "--json", "--report"])
        .arg(&html)
        .args(args)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    let report = std::fs::read_to_string(&html).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "fastpath lab {test} failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(report.contains("<svg") && report.contains("fastpath") && report.contains("linux-tc"), "report of {test}");
    // Only the switch tests create these namespaces.
    let left: Vec<String> = fastpath_lab::topo::namespaces("fp-")
        .into_iter()
        .filter(|n| n.starts_with("fp-snd") || n.starts_with("fp-rcv") || n.starts_with("fp-fdut"))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}\n{stderr}");
    stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn row<'a>(rows: &'a [serde_json::Value], dut: &str, size: u64) -> &'a serde_json::Value {
    rows.iter()
        .find(|r| r["dut"] == dut && r["frame_size"].as_u64().unwrap_or(0) == size)
        .unwrap_or_else(|| panic!("no {dut} {size} B row: {rows:?}"))
}

#[test]
fn switch_tests_with_fastpath_and_linux_tc() {
    if !common::root_or_skip() {
        return;
    }
    // Fairness: 2-to-1 at 1518 B, offered 1.5 × R.
    let rows = lab("fairness", &["--senders", "2", "--sizes", "1518", "--trial-s", "1"]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for dut in ["fastpath", "linux-tc"] {
        let r = row(&rows, dut, 1518);
        assert_eq!(r["test"], "fairness");
        assert_eq!(r["share"].as_array().map(Vec::len), Some(2), "{r}");
        let got = r["received_total_mbps"].as_f64().unwrap_or(0.0);
        assert!(got > 5.0 && got < 1.1 * 50.0, "through the shaper, not above R: {r}");
        assert!(r["jain"].as_f64().is_some_and(|j| (0.5..=1.0).contains(&j)), "{r}");
        assert!(r["sent"].as_u64() > r["received"].as_u64(), "offered above R, some frames refused: {r}");
    }
    // Burst: 2-to-1 at 1518 B. fastpath's one queue may take 8/9 of 256 KiB; Linux's port a
    // third of it.
    let rows = lab("burst", &["--senders", "2", "--sizes", "1518,4096", "--max-trials", "7"]);
    assert_eq!(rows.len(), 4, "{rows:?}");
    let (f, l) = (row(&rows, "fastpath", 1518), row(&rows, "linux-tc", 1518));
    assert_eq!(f["port_buffer_bytes"], 233_016, "{f}");
    assert_eq!(l["port_buffer_bytes"], 87_381, "{l}");
    let (fm, lm) = (f["absorbed_mb"].as_f64().unwrap_or(0.0), l["absorbed_mb"].as_f64().unwrap_or(0.0));
    assert!(lm > 0.05 && fm > 1.5 * lm, "fastpath {fm} MB, linux {lm} MB");
    assert!(row(&rows, "fastpath", 4096)["unsupported"].is_string(), "{rows:?}");
    assert!(row(&rows, "linux-tc", 4096)["absorbed_mb"].as_f64().is_some_and(|x| x > 0.05), "{rows:?}");
    // Incast: 2 senders × 2 flows of 512 KiB each.
    let rows = lab("incast", &["--senders", "2", "--flows-per-sender", "2", "--bytes", "1m"]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in &rows {
        let flows = r["flows"].as_array().cloned().unwrap_or_default();
        assert_eq!(flows.len(), 4, "{r}");
        assert!(flows.iter().all(|f| f["bytes"] == 512 * 1024), "every byte arrived: {r}");
        assert!(r["completion_vs_ideal"].as_f64().is_some_and(|x| x > 0.95), "not faster than R allows: {r}");
        assert!(r["aggregate_over_time"].as_array().is_some(), "{r}");
    }
}

#[test]
fn acl_invariance_measures_switch_acl_with_0_24_and_10000_rules() {
    if !common::root_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("fpl-aclinv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("report.html");
    let out = Command::new("timeout")
        .args(["240", env!("CARGO_BIN_EXE_fastpath"), "lab", "acl-invariance", "--sizes", "64", "--trial-s", "0.5"])
        .args(["--max-trials", "3", "--latency-s", "1", "--json", "--report"])
        .arg(&html)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    let report = std::fs::read_to_string(&html).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "fastpath lab acl-invariance failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    let rows: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    // Three RFC 2544 rows (one per rule count), then the two ratios to no rules.
    for n in [0, 24, 10000] {
        let r = rows.iter().find(|r| r["test"] == "rfc2544" && r["dut"] == format!("switch-acl/{n}")).unwrap_or_else(|| panic!("{rows:?}"));
        assert!(r["throughput_mpps"].as_f64().unwrap_or(0.0) > 0.0, "the switch forwarded with {n} rules: {r}\n{stderr}");
        assert!(report.contains(&format!("switch-acl/{n}")), "report names switch-acl/{n}");
    }
    let ratios: Vec<&serde_json::Value> = rows.iter().filter(|r| r["test"] == "acl-invariance").collect();
    assert_eq!(ratios.len(), 2, "{rows:?}");
    for r in ratios {
        assert!(r["throughput_vs_no_rules"].as_f64().is_some_and(|x| x > 0.0), "{r}");
        assert!(r["p99_vs_no_rules"].as_f64().is_some_and(|x| x > 0.0), "{r}");
    }
}
