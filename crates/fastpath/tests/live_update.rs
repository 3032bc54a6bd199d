//! `fastpath lab update-under-load` end to end, small: fastpath forwards at a given rate through
//! an ACL and an LPM table while ACL rules and routes change, first through P4Runtime (the
//! default: the lab's controller writes to the DUT's `--p4rt` unix socket as the primary, two
//! writes in flight), then through its control socket (`--via ctl`). Checks, for each, that no
//! frame was lost while the tables changed, that every write was accepted and timed, that the
//! DUT's own per-stage times (`show writes`) came back for every write, that the row names the
//! front end, and that nothing is left behind. (The rates and times of a real run are figures
//! for docs/lab.md, not assertions: this machine is shared.)
//! Needs root; in CI (`CI` set) a missing root is a failure, not a skip.

mod common;

use std::process::Command;

#[test]
fn tables_change_under_traffic_with_no_loss_through_p4runtime_and_the_control_socket() {
    if !common::root_or_skip() {
        return;
    }
    // One after the other: the runs' files and namespaces are named after the process.
    for via in [None, Some("ctl")] {
        run(via);
    }
}

/// One run through `--via` (`None`: the default, P4Runtime).
fn run(via: Option<&str>) {
    let dir = std::env::temp_dir().join(format!("fpl-update-{}-{}", std::process::id(), via.unwrap_or("default")));
    std::fs::create_dir_all(&dir).unwrap();
    let html = dir.join("report.html");
    // A modest rate: the workers must forward everything, whatever else the machine runs.
    let out = Command::new("timeout")
        .args(["180", env!("CARGO_BIN_EXE_fastpath"), "lab", "update-under-load", "--mpps", "0.02", "--load", "1"])
        .args(["--seconds", "3", "--updates", "2000", "--batch", "20", "--base-entries", "2000", "--json", "--report"])
        .arg(&html)
        .args(match via {
            None => ["--in-flight", "2"],
            Some(v) => ["--via", v],
        })
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let report = std::fs::read_to_string(&html).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "fastpath lab failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    let row: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap_or_default()).unwrap();
    assert_eq!(row["test"], "update-under-load", "{row}");
    assert_eq!(row["via"], via.unwrap_or("p4rt"), "{row}");
    let front = if via == Some("ctl") { "updates through control socket" } else { "updates through P4Runtime (the primary" };
    assert!(stderr.contains(front), "{stderr}");
    // The base routes, and the traffic's /32 plus one route covering it per write in flight
    // beyond the first.
    let in_flight: u64 = if via.is_none() { 2 } else { 1 };
    assert_eq!(row["in_flight"], in_flight, "{row}");
    assert_eq!(row["base_routes"], 2000 + in_flight, "{row}");
    let (sent, received) = (row["sent"].as_u64().unwrap(), row["received"].as_u64().unwrap());
    assert!(sent > 10_000, "the generator sent too little to judge: {row}\n{stderr}");
    assert_eq!(received, sent, "frames lost while the tables changed: {row}\n{stderr}");
    assert_eq!(row["refused"], 0, "a write was refused: {row}\n{stderr}");
    let writes = row["writes"].as_u64().unwrap();
    assert!(writes >= 10, "the updater wrote too little: {row}\n{stderr}");
    // A write adds 20 changes (and deletes the 20 of the write 100 before it, once there is
    // one: about a second of changes stays live) and replaces the traffic's route.
    let keep = 2000 / 20;
    let expect = writes.min(keep) * 21 + writes.saturating_sub(keep) * 41;
    assert_eq!(row["updates"].as_u64().unwrap(), expect, "{row}");
    // Inside fastpath: every acknowledged write timed at each hand-off.
    let stages = row["stages_us"].as_array().unwrap();
    assert_eq!(stages.len(), 10, "{row}");
    assert!(stages[9]["stage"].as_str().unwrap().starts_with("total"), "{row}");
    assert!(stages[9]["p50"].as_u64().unwrap() > 0, "{row}");
    assert!(stderr.contains(&format!("writes timed: {writes} ")), "every acknowledged write timed inside: {stderr}");
    let ms = &row["write_to_effect_ms"];
    assert!(ms["p50"].as_f64().unwrap() > 0.0 && ms["p99"].as_f64().unwrap() >= ms["p50"].as_f64().unwrap(), "{row}");
    assert!(report.contains("update-under-load") && report.contains("<svg"), "the report has the table and the chart");
    // Torn down: the run's namespaces are gone.
    let ns = fastpath_io::netns::ip(&["netns", "list"]).unwrap();
    let created: Vec<&str> = stderr.lines().filter_map(|l| l.split("started in ").nth(1)?.split_whitespace().next()).collect();
    assert_eq!(created.len(), 1, "{stderr}");
    assert!(!ns.contains(created[0]), "namespace {} left behind:\n{ns}", created[0]);
}
