//! The live page (`fastpath run --web ADDR`): one self-contained HTML page — its script and
//! style inline, nothing fetched from elsewhere, no build step — and the JSON it polls, served by
//! [`crate::http`] ([`Site::Web`](crate::http::Site::Web)).
//!
//! ```text
//!  browser ── GET / ──────────────▶ PAGE (a constant; the Control is not taken)
//!     every second:
//!          ── GET /api/counters ──▶ Scrape::take (one mailbox round trip, as ctl show counters)
//!          ◀── JSON: totals since start + t_ms ──┘
//!     rate = (this sample − the one ~1 s before) / (t_ms difference), computed in the page
//! ```
//! The server sends totals, never rates: the page keeps the previous sample and divides the
//! difference by the difference of `t_ms`, a monotonic clock read when the workers answered, so
//! a slow network or a late timer in the browser does not skew a rate. The page shows per-port
//! rx/tx packet and bit rates, per-stage packet rates and drops, table fill, the top drop reasons
//! (stage/reason, port and queue refusals, by rate) and, with a `[tm]` section, the traffic
//! manager's queues. Each figure's cell carries its raw value in `data-v` under a key in `data-k`
//! (`port/d0/rx_pps`, `stage/acl/drops`, `table/fib4/entries`, `drop/acl/acl_deny/pps`), for tests
//! and scrapers of the page.
//!
//! The JSON is what `fastpath ctl show counters json` prints ([`Counters`]: `workers`, `ports`,
//! `stages`, `queues`), plus:
//!
//! | field | meaning |
//! |---|---|
//! | `pipeline` | the spec's name |
//! | `t_ms` | milliseconds since the server started (monotonic), when the workers answered |
//! | `unix_ms` | wall-clock time of the same moment (for display) |
//! | `has_tm` | the spec has a traffic manager (`[tm]`) |
//! | `tables` | per table: `name`, `engine`, `entries`, `capacity`, `hits`, `misses` (summed over workers) |

use crate::metrics::Counters;
use crate::prom::Scrape;
use serde::Serialize;
use std::time::{SystemTime, UNIX_EPOCH};

/// The page (HTML with inline script and style).
pub const PAGE: &str = include_str!("web/page.html");

/// The page's content security policy: its own inline script and style, requests to its own
/// origin only. The browser refuses anything else, so the page cannot load from a CDN.
pub const PAGE_POLICY: &str =
    "Content-Security-Policy: default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'";

/// The content type of `/api/counters`.
pub const JSON_CONTENT_TYPE: &str = "application/json";

/// One table's fill and lookups.
#[derive(Serialize)]
struct TableFill<'a> {
    name: &'a str,
    engine: &'a str,
    entries: usize,
    capacity: usize,
    hits: u64,
    misses: u64,
}

/// The body of `/api/counters`.
#[derive(Serialize)]
struct Sample<'a> {
    pipeline: &'a str,
    t_ms: u64,
    unix_ms: u64,
    has_tm: bool,
    #[serde(flatten)]
    counters: Counters,
    tables: Vec<TableFill<'a>>,
}

/// The JSON of `/api/counters` for `scrape`, read at `t_ms` (monotonic, since the server
/// started) and `unix_ms` (wall clock). Control thread (any thread; it does not touch workers).
pub fn counters_json(scrape: &Scrape, t_ms: u64, unix_ms: u64) -> String {
    let tables = scrape
        .tables
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (hits, misses) = scrape.snaps.iter().filter_map(|s| s.tables.get(i)).fold((0, 0), |(h, m), &(a, b)| (h + a, m + b));
            TableFill { name: &t.name, engine: &t.engine, entries: t.entries, capacity: t.capacity, hits, misses }
        })
        .collect();
    let sample =
        Sample { pipeline: &scrape.pipeline, t_ms, unix_ms, has_tm: scrape.has_tm, counters: Counters::sum(&scrape.snaps), tables };
    // Strings, integers and booleans only: serializing cannot fail.
    serde_json::to_string(&sample).unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()))
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{MetricsServer, Site};
    use crate::mailbox::mailbox;
    use crate::metrics::{LoopCounters, PortCounters, QueueRow, WorkerSnapshot};
    use crate::prom::TableInfo;
    use crate::state::Control;
    use fastpath_packet::DropReason;
    use fastpath_pipeline::StageStats;
    use serde_json::Value;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    use std::time::Duration;

    fn snap(worker: usize, rx: u64) -> WorkerSnapshot {
        let mut st = StageStats { calls: 2, pkts_in: rx, pkts_out: rx - 2, ..StageStats::default() };
        st.drops[DropReason::NoRoute as usize] = 2;
        WorkerSnapshot {
            worker,
            stages: vec![("fib4".into(), st), ("end".into(), StageStats::default())],
            tables: vec![(rx - 2, 2)],
            conntrack: Vec::new(),
            ports: vec![
                PortCounters { name: "d0".into(), rx_pkts: rx, rx_bytes: 64 * rx, ..PortCounters::default() },
                PortCounters { name: "d1".into(), tx_pkts: rx - 2, tx_bytes: 64 * (rx - 2), ..PortCounters::default() },
            ],
            totals: LoopCounters { worker, rx_pkts: rx, tx_pkts: rx - 2, dropped: 2, batches: 1, ..LoopCounters::default() },
            queues: vec![QueueRow {
                port: 1,
                class: 3,
                enq_pkts: rx,
                drops: [("tm_threshold".to_string(), 1)].into(),
                ..QueueRow::default()
            }],
            ..WorkerSnapshot::default()
        }
    }

    fn scrape() -> Scrape {
        Scrape {
            pipeline: "router".into(),
            snaps: vec![snap(0, 10), snap(1, 7)],
            tables: vec![TableInfo { name: "fib4".into(), engine: "lpm".into(), entries: 5, capacity: 1024 }],
            has_tm: true,
        }
    }

    #[test]
    fn the_json_is_the_summed_counters_plus_table_fill_and_time() {
        let s = scrape();
        let v: Value = serde_json::from_str(&counters_json(&s, 1234, 1_700_000_000_000)).unwrap();
        assert_eq!(
            (v["pipeline"].as_str(), v["t_ms"].as_u64(), v["unix_ms"].as_u64()),
            (Some("router"), Some(1234), Some(1_700_000_000_000))
        );
        assert_eq!(v["has_tm"], Value::Bool(true));
        // The counters part is exactly what `ctl show counters json` prints.
        let ctl: Value = serde_json::to_value(Counters::sum(&s.snaps)).unwrap();
        for key in ["workers", "ports", "stages", "queues"] {
            assert_eq!(v[key], ctl[key], "{key}");
        }
        assert_eq!(v["ports"][0]["name"], "d0");
        assert_eq!(v["ports"][0]["rx_pkts"].as_u64(), Some(17), "summed over workers");
        assert_eq!(v["ports"][0]["rx_bytes"].as_u64(), Some(17 * 64));
        assert_eq!(v["stages"][0]["drops"]["no_route"].as_u64(), Some(4));
        assert_eq!(v["queues"][0]["drops"]["tm_threshold"].as_u64(), Some(2));
        assert_eq!(v["workers"].as_array().map(Vec::len), Some(2));
        let t = &v["tables"][0];
        assert_eq!((t["name"].as_str(), t["engine"].as_str()), (Some("fib4"), Some("lpm")));
        assert_eq!((t["entries"].as_u64(), t["capacity"].as_u64()), (Some(5), Some(1024)));
        assert_eq!((t["hits"].as_u64(), t["misses"].as_u64()), (Some(8 + 5), Some(4)));
    }

    #[test]
    fn the_page_is_self_contained() {
        assert!(PAGE.starts_with("<!doctype html>"));
        for external in ["http:", "https:", "src=", "href=", "@import", "url(", "//cdn"] {
            assert!(!PAGE.contains(external), "the page refers to something outside it: {external}");
        }
        // It polls its own server, relative to where it was loaded.
        assert!(PAGE.contains("fetch(\"api/counters\""));
        assert!(PAGE_POLICY.contains("default-src 'none'") && PAGE_POLICY.contains("connect-src 'self'"));
    }

    fn status(r: &[u8]) -> String {
        String::from_utf8_lossy(r).lines().next().unwrap_or_default().to_string()
    }

    fn get(addr: std::net::SocketAddr, req: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut r = Vec::new();
        let _ = s.read_to_end(&mut r);
        String::from_utf8_lossy(&r).into_owned()
    }

    /// The web site over TCP on loopback, routed by path and method; the metrics site next to
    /// it does not serve the page.
    #[test]
    fn the_web_site_routes_its_paths_over_loopback() {
        let web = MetricsServer::bind_web("127.0.0.1:0").unwrap();
        let metrics = MetricsServer::bind("127.0.0.1:0").unwrap();
        assert_eq!((web.site(), metrics.site()), (Site::Web, Site::Metrics));
        let (wa, ma) = (web.local_addr(), metrics.local_addr());
        let pipe = || crate::testutil::port_map(8, "drop");
        let (c, mut w) = mailbox();
        let stop = AtomicBool::new(false);
        let control = Mutex::new(Control::new(pipe(), Box::new(|| Ok(pipe())), vec![c]));
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                let mut p = pipe();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    w.poll(&mut p, |snap| {
                        n += 42;
                        snap.totals.rx_pkts = n;
                    });
                    std::thread::sleep(Duration::from_micros(200));
                }
            });
            s.spawn(|| web.serve_until(&control, &stop));
            s.spawn(|| metrics.serve_until(&control, &stop));
            let r = [
                get(wa, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
                get(wa, "GET /api/counters HTTP/1.1\r\n\r\n"),
                get(wa, "GET /api/counters?t=1 HTTP/1.0\r\n\r\n"),
                get(wa, "HEAD / HTTP/1.1\r\n\r\n"),
                get(wa, "GET /metrics HTTP/1.1\r\n\r\n"),
                get(wa, "POST /api/counters HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
                get(wa, "GET /api/nope HTTP/1.1\r\n\r\n"),
                get(ma, "GET /api/counters HTTP/1.1\r\n\r\n"),
                get(ma, "GET / HTTP/1.1\r\n\r\n"),
            ];
            stop.store(true, Ordering::Relaxed);
            r
        });
        let [page, json1, json2, head, prom, post, nope, on_metrics, pointer] = r;
        assert!(page.starts_with("HTTP/1.1 200 OK\r\n"), "{page}");
        assert!(page.contains("\r\nContent-Type: text/html; charset=utf-8\r\n"), "{page}");
        assert!(page.contains(&format!("\r\n{PAGE_POLICY}\r\n")), "{page}");
        assert!(page.ends_with(PAGE));
        let body = |r: &str| r.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
        assert!(json1.contains("\r\nContent-Type: application/json\r\n") && json1.contains("\r\nCache-Control: no-store\r\n"), "{json1}");
        let (a, b): (Value, Value) = (serde_json::from_str(&body(&json1)).unwrap(), serde_json::from_str(&body(&json2)).unwrap());
        assert_eq!(a["pipeline"], "m");
        assert_eq!(a["tables"][0]["capacity"].as_u64(), Some(8));
        let rx = |v: &Value| v["workers"][0]["rx_pkts"].as_u64().unwrap();
        assert!(rx(&b) > rx(&a) && rx(&a) > 0, "each poll reads the workers again: {} then {}", rx(&a), rx(&b));
        assert!(b["t_ms"].as_u64() >= a["t_ms"].as_u64());
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"), "HEAD: no body: {head}");
        assert!(prom.starts_with("HTTP/1.1 200 OK\r\n") && prom.contains("\nfastpath_workers{pipeline=\"m\"} 1\n"), "{prom}");
        assert_eq!(status(post.as_bytes()), "HTTP/1.1 405 Method Not Allowed");
        assert!(post.contains("\r\nAllow: GET, HEAD\r\n"), "{post}");
        assert_eq!(status(nope.as_bytes()), "HTTP/1.1 404 Not Found");
        assert!(nope.ends_with("the live page is at /, its counters at /api/counters, the metrics at /metrics\n"), "{nope}");
        assert_eq!(status(on_metrics.as_bytes()), "HTTP/1.1 404 Not Found", "--metrics serves no page");
        assert!(pointer.ends_with("fastpath: Prometheus metrics at /metrics\n"), "{pointer}");
    }
}
