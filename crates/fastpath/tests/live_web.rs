//! `fastpath run --web`: the live page, opened in headless Chromium while traffic flows, shows
//! figures that change on their own.
//!
//! ```text
//!   peer ns                          dut ns (its own loopback, so a fixed port is free)
//!   h0 (raw socket, UDP bursts, ── veth ── d0 = p0 ┐ fastpath run pipelines/switch-acl.toml
//!       1 in 10 with a bad         ── veth ── d1 = p1 ┘ (ACL ▸ flood ▸ traffic manager ▸ p1)
//!       IPv4 header length)                   --web 127.0.0.1:8080 ◀── chromium --headless
//!   h1                                                                 (DevTools protocol on a pipe)
//! ```
//! Chromium is driven over the DevTools protocol on `--remote-debugging-pipe` (JSON messages
//! ending in a NUL byte, read from its fd 3 and written to its fd 4): the test opens the page in a
//! tab, waits until it has taken two samples, reads every figure the page rendered (each cell's
//! `data-k` key and `data-v` value) and its visible text, waits 3.5 seconds, and reads them again
//! from the same tab — no reload: the page must have polled and re-rendered by itself. Asserted:
//! the page took more samples in between; d0's rx packet count grew and its rx packet and bit
//! rates are positive; d1 transmits; the stages show packet rates; the ACL table shows its fill
//! (24 / 16,384); the queue of d1 appears (the spec has `[tm]`); and the top drop reasons name the
//! parser's `ipv4_bad_ihl` with a count.
//!
//! Needs root and Debian's `chromium` (scripts/setup-lab.sh installs it); in CI a missing root or
//! chromium is a failure. Chromium and fastpath are stopped by PID, and the namespaces and the
//! temp dir removed, on every exit path (drop guards).

mod common;

use common::{flood_frame, have, http_get, root_or_skip, wait_for, ChildGuard, TempDir};
use fastpath_io::af_packet::RawSocket;
use fastpath_io::netns::{Netns, VethPair};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const WEB: &str = "127.0.0.1:8080";

/// Sets the flag on drop, so the sender stops also when an assertion fails.
struct StopOnDrop<'s>(&'s AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A browser driven over the DevTools protocol on a pipe.
struct Browser {
    to: std::io::PipeWriter,
    from: mpsc::Receiver<Value>,
    next_id: u64,
}

impl Browser {
    /// Sends `method` (to the page of `session`, or to the browser) and waits for its answer,
    /// skipping events. Panics on a protocol error or after 20 s.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let m = self.from.recv_timeout(left).unwrap_or_else(|e| panic!("chromium: no answer to {method}: {e}"));
            if m["id"].as_u64() == Some(id) {
                assert!(m.get("error").is_none(), "chromium: {method}: {m}");
                return m["result"].clone();
            }
        }
    }
}

/// Everything the page rendered: each `data-k` cell's `data-v`, plus the visible text (`text`; empty
/// while the tab has no body yet, so the first reading waits instead of failing).
const READ_PAGE: &str = r#"JSON.stringify(Object.assign(
  Object.fromEntries([...document.querySelectorAll("[data-k]")].map(e => [e.dataset.k, e.dataset.v])),
  { text: document.body ? document.body.innerText : "" }))"#;

fn read_page(b: &mut Browser, session: &str) -> BTreeMap<String, String> {
    let r = b.call(Some(session), "Runtime.evaluate", json!({ "expression": READ_PAGE, "returnByValue": true }));
    serde_json::from_str(r["result"]["value"].as_str().unwrap_or_else(|| panic!("evaluate: {r}"))).unwrap()
}

fn num(page: &BTreeMap<String, String>, key: &str) -> f64 {
    let v = page.get(key).unwrap_or_else(|| panic!("the page shows no {key}: {page:#?}"));
    v.parse().unwrap_or_else(|_| panic!("{key} = {v:?} is not a number: {page:#?}"))
}

#[test]
fn the_live_page_in_chromium_shows_figures_that_change_while_traffic_flows() {
    if !root_or_skip() {
        return;
    }
    if !have("chromium") {
        assert!(std::env::var_os("CI").is_none(), "CI has chromium (scripts/setup-lab.sh installs it)");
        eprintln!("no chromium (apt-get install chromium): skipped");
        return;
    }
    let tmp = TempDir(std::env::temp_dir().join(format!("fp-web-{}", std::process::id())));
    std::fs::create_dir_all(tmp.0.join("profile")).unwrap();
    let peer = Netns::new("fpw-peer").unwrap();
    let dut = Netns::new("fpw-dut").unwrap();
    let _veths = [VethPair::new(&peer, "h0", &dut, "d0").unwrap(), VethPair::new(&peer, "h1", &dut, "d1").unwrap()];
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let child = Command::new("ip")
        .args(["netns", "exec", dut.name(), env!("CARGO_BIN_EXE_fastpath"), "run"])
        .arg(format!("{root}/pipelines/switch-acl.toml"))
        .arg("--entries")
        .arg(format!("{root}/testdata/switch-acl/acl24.txt"))
        .args(["--port", "p0=afpacket:d0", "--port", "p1=afpacket:d1", "--idle-sleep", "50", "--no-pin", "--no-ctl"])
        .args(["--web", WEB])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut fastpath = ChildGuard::new(child);
    wait_for("the page's JSON answers", Duration::from_secs(10), || {
        assert!(fastpath.child().try_wait().unwrap().is_none(), "fastpath run exited early");
        http_get(&dut, WEB, "/api/counters").filter(|(code, _)| *code == 200)
    });

    let stop = AtomicBool::new(false);
    let (first, second) = std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        // h0 sends 50 frames every 20 ms (one in ten malformed) until the page has been read,
        // at most 60 s.
        s.spawn(|| {
            peer.run(|| {
                let tx = RawSocket::open("h0").unwrap();
                let t0 = Instant::now();
                let mut seq = 0u32;
                while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(60) {
                    for _ in 0..50 {
                        tx.send(&flood_frame(seq, seq % 10 == 9)).unwrap();
                        seq += 1;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
            .unwrap()
        });

        // Chromium in the DUT's namespace; its fd 3 reads our commands, its fd 4 writes answers.
        let (cmd_rx, cmd_tx) = std::io::pipe().unwrap();
        let (ans_rx, ans_tx) = std::io::pipe().unwrap();
        let log = std::fs::File::create(tmp.0.join("chromium.log")).unwrap();
        let chromium = Command::new("ip")
            .args(["netns", "exec", dut.name(), "sh", "-c", "exec \"$0\" \"$@\" 3<&0 4>&1 0</dev/null 1>/dev/null", "chromium"])
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe"])
            .arg(format!("--user-data-dir={}", tmp.0.join("profile").display()))
            .arg("about:blank")
            .stdin(cmd_rx)
            .stdout(ans_tx)
            .stderr(log)
            .spawn()
            .unwrap();
        let mut chromium = ChildGuard::new(chromium);
        let (tx, from) = mpsc::channel();
        // Detached, not scoped: it ends when the pipe closes, whatever Chromium leaves behind.
        std::thread::spawn(move || {
            let mut ans_rx = ans_rx;
            let (mut buf, mut chunk) = (Vec::new(), [0u8; 64 * 1024]);
            while let Ok(n @ 1..) = ans_rx.read(&mut chunk) {
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|&b| b == 0) {
                    let msg: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&msg[..end]) {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let mut b = Browser { to: cmd_tx, from, next_id: 0 };
        let target = b.call(None, "Target.createTarget", json!({ "url": format!("http://{WEB}/") }));
        let attached = b.call(None, "Target.attachToTarget", json!({ "targetId": target["targetId"], "flatten": true }));
        let session = attached["sessionId"].as_str().unwrap().to_string();

        // Two samples make the first rates; then read, wait, read again from the same tab.
        let first = wait_for("the page took two samples", Duration::from_secs(20), || {
            let p = read_page(&mut b, &session);
            p.get("page/samples").and_then(|n| n.parse::<u32>().ok()).filter(|&n| n >= 2).map(|_| p)
        });
        std::thread::sleep(Duration::from_millis(3500));
        let second = read_page(&mut b, &session);
        stop.store(true, Ordering::Relaxed);
        b.call(None, "Browser.close", json!({}));
        let t0 = Instant::now();
        while chromium.child().try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(b);
        (first, second)
    });

    let text = &second["text"];
    eprintln!("the page, second reading:\n{text}");
    assert!(!text.contains("no answer"), "{text}");
    assert!(num(&second, "page/samples") >= num(&first, "page/samples") + 2.0, "the page polled every second by itself");
    let (rx1, rx2) = (num(&first, "port/d0/rx_pkts"), num(&second, "port/d0/rx_pkts"));
    assert!(rx1 > 0.0 && rx2 > rx1, "d0 rx packets: {rx1} then {rx2}");
    for key in ["port/d0/rx_pps", "port/d0/rx_bps", "port/d1/tx_pps", "total/rx_pps"] {
        assert!(num(&first, key) > 0.0 && num(&second, key) > 0.0, "{key}: {first:#?}\n{second:#?}");
    }
    assert!(num(&second, "port/d1/tx_pkts") > num(&first, "port/d1/tx_pkts"), "d1 transmits");
    assert!(second.iter().any(|(k, v)| k.starts_with("stage/") && k.ends_with("/in_pps") && v.parse().is_ok_and(|x: f64| x > 0.0)));
    assert_eq!(num(&second, "table/acl/entries"), 24.0);
    assert!(text.contains("24 / 16,384"), "the ACL's fill: {text}");
    assert!(second.keys().any(|k| k.starts_with("queue/d1/") && k.ends_with("/enq_pps")), "the traffic manager's queues");
    let bad = second
        .iter()
        .find(|(k, _)| k.starts_with("drop/") && k.contains("/ipv4_bad_ihl/") && k.ends_with("/drops"))
        .unwrap_or_else(|| panic!("no ipv4_bad_ihl among the top drop reasons: {second:#?}"));
    assert!(bad.1.parse::<f64>().is_ok_and(|n| n > 0.0), "{bad:?}");

    let (status, _, err) = fastpath.stop(true);
    assert!(status.success(), "{status}\n{err}");
    assert!(err.contains(&format!("live page at http://{WEB}/")), "{err}");
}
