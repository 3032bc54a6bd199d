//! `fastpath lab bng-rfc2544` end to end, small and short: 200 Q-in-Q subscribers through the
//! fastpath gateway (this binary running `pipelines/vbng.toml` on AF_XDP ports, every session
//! loaded at start) and through the Linux baseline (per-subscriber routes and HTB classes,
//! untagged), 1400-byte frames 8:1 downstream:upstream, one-second trials. Checks the JSON
//! lines (both gateways set up; frames forwarded in both directions at full speed; Linux found
//! a rate at < 0.5 % loss with upstream probes arriving; any rate fastpath found comes with its
//! latency and CPU), the HTML report's section, and that no namespace of the run is left
//! behind. Throughput figures from a debug build on a shared machine mean nothing; the run
//! proves the plumbing. Needs root; in CI a missing root is a failure, not a skip.

mod common;

use std::process::Command;

#[test]
fn bng_rfc2544_fastpath_vbng_and_linux_with_200_subscribers() {
    if !common::root_or_skip() {
        return;
    }
    let html = std::env::temp_dir().join(format!("fpl-bng-{}.html", std::process::id()));
    let out = Command::new("timeout")
        .args(["150", env!("CARGO_BIN_EXE_fastpath"), "lab", "bng-rfc2544", "--subscribers", "200"])
        .args(["--trial-s", "1", "--max-trials", "4", "--latency-s", "1", "--json", "--report"])
        .arg(&html)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    let report = std::fs::read_to_string(&html).unwrap_or_default();
    let _ = std::fs::remove_file(&html);
    let check = || -> Result<(), String> {
        if !out.status.success() {
            return Err(format!("fastpath lab bng-rfc2544 failed: {}", out.status));
        }
        let rows: Vec<serde_json::Value> =
            stdout.lines().map(|l| serde_json::from_str(l).map_err(|e| format!("{e}: {l}"))).collect::<Result<_, _>>()?;
        for dut in ["fastpath-vbng", "linux-routes-htb"] {
            let r = rows.iter().find(|r| r["dut"] == dut).ok_or(format!("no {dut} row"))?;
            if r["subscribers"] != 200 || r["frame_size"] != 1400 {
                return Err(format!("{dut}: {r}"));
            }
            if r["fell_over"].as_str().is_some_and(|w| w.starts_with("setup")) {
                return Err(format!("{dut}: setup failed: {r}"));
            }
            let f = &r["full_speed"];
            let n = |k: &str| f[k].as_u64().unwrap_or(0);
            if n("received_up") == 0 || n("received_down") == 0 || n("sent_down") < 7 * n("sent_up") {
                return Err(format!("{dut}: not forwarded both ways at 8:1: {f}"));
            }
            let mpps = r["throughput_mpps"].as_f64().unwrap_or(0.0);
            if dut == "linux-routes-htb" && mpps <= 0.0 {
                return Err(format!("{dut}: no rate at < 0.5 % loss: {r}"));
            }
            if mpps > 0.0 && (r["probes"][1].as_u64().unwrap_or(0) == 0 || r["latency_us"]["p99"].as_f64().is_none()) {
                return Err(format!("{dut}: a rate without latency: {r}"));
            }
        }
        if !(report.contains("bng-rfc2544") && report.contains("200 subscribers") && report.contains("linux-routes-htb")) {
            return Err("report lacks the bng section".into());
        }
        Ok(())
    };
    let verdict = check();
    let pid = stderr.lines().find_map(|l| l.split(" in fp-dut-").nth(1)).and_then(|r| r.split('-').next()).map(str::to_owned);
    let ns = fastpath_io::netns::ip(&["netns", "list"]).unwrap();
    if let Err(e) = verdict {
        panic!("{e}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    }
    let pid = pid.unwrap_or_else(|| panic!("no `in fp-dut-` line:\n{stderr}"));
    let mine: Vec<&str> = ns.lines().filter(|l| l.contains(&format!("-{pid}-"))).collect();
    assert!(mine.is_empty(), "namespaces left behind: {mine:?}");
}

/// Above 65,535 subscribers the Linux baseline cannot be built (16-bit HTB class ids): the row
/// says where and why it fell over, at once, and the run still succeeds.
#[test]
fn bng_rfc2544_linux_falls_over_above_65535_subscribers() {
    if !common::root_or_skip() {
        return;
    }
    let out = Command::new("timeout")
        .args(["60", env!("CARGO_BIN_EXE_fastpath"), "lab", "bng-rfc2544", "--dut", "linux", "--subscribers", "70000", "--json"])
        .args(["--report", "/dev/null"])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let r: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap_or("")).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!((r["dut"].as_str(), r["subscribers"].as_u64()), (Some("linux-routes-htb"), Some(70000)));
    let why = r["fell_over"].as_str().unwrap_or("");
    assert!(why.starts_with("setup: 70000 HTB classes: class ids are 16 bits"), "{r}");
    assert_eq!(r["throughput_mpps"], 0.0);
}
