//! The HTTP endpoints of a live run: `/metrics` (`fastpath run --metrics ADDR`) and the live
//! page with its JSON (`fastpath run --web ADDR`, [`crate::web`]). A minimal HTTP/1.1 server on a
//! TCP socket, enough for a Prometheus scraper, a browser and `curl`.
//!
//! ```text
//!  GET /metrics ──▶ read the request head (≤ 8 KiB, ≤ 10 s) ──▶ route ──▶ lock Control: Scrape::take
//!               ◀── 200, text format 0.0.4, Connection: close  ◀── unlock, render
//!  GET /        ──▶ (--web) the page, a constant: no Control taken
//!  GET /api/counters ──▶ (--web) Scrape::take as above ──▶ unlock, JSON (web::counters_json)
//! ```
//! Written on `std::net` rather than with an HTTP crate: it answers a few paths with one body
//! each and closes every connection, and the front ends' connection handling ([`crate::conn`]:
//! a thread per connection up to a bound, the request read in full within a size and time limit
//! before the Control is taken) is shared with the control socket. A scrape or a poll of the page
//! costs the workers what `ctl show counters` costs them: one mailbox message, answered at a
//! batch boundary.
//!
//! Which paths a server answers is its [`Site`]:
//!
//! | path | [`Site::Metrics`] | [`Site::Web`] |
//! |---|---|---|
//! | `/` | 200, a pointer to `/metrics` | 200, the live page (HTML) |
//! | `/metrics` | 200, the exposition | 200, the exposition |
//! | `/api/counters` | 404 | 200, JSON ([`crate::web`]) |
//!
//! `GET` and `HEAD` only; a data path answers 503 with the reason when a worker does not answer,
//! other paths 404, other methods 405, a malformed head 400, an over-long one 431, a slow one
//! 408. Request bodies are not read.

use crate::conn::{self, Limits, ReadEnd};
use crate::prom::{Scrape, CONTENT_TYPE};
use crate::state::Control;
use crate::web;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Longest request head accepted (bytes).
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// Time a client has to send its request head (and to take the reply).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 8;

/// Which paths a server answers (see the table in the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    /// `--metrics`: `/metrics`, and a pointer to it at `/`.
    Metrics,
    /// `--web`: the live page at `/`, its JSON at `/api/counters`, and `/metrics`.
    Web,
}

impl Site {
    /// The command-line option that asks for it (for error messages).
    fn flag(self) -> &'static str {
        match self {
            Site::Metrics => "--metrics",
            Site::Web => "--web",
        }
    }
}

/// A resource a request names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// `/` of the metrics site: a line of text pointing at `/metrics`.
    Pointer,
    /// `/metrics`: the Prometheus exposition.
    Metrics,
    /// `/` of the web site: the page.
    Page,
    /// `/api/counters`: the counters as JSON.
    Counters,
}

impl Route {
    fn of(site: Site, path: &str) -> Option<Route> {
        match (site, path) {
            (Site::Metrics, "/") => Some(Route::Pointer),
            (Site::Web, "/" | "/index.html") => Some(Route::Page),
            (Site::Web, "/api/counters") => Some(Route::Counters),
            (_, "/metrics") => Some(Route::Metrics),
            _ => None,
        }
    }
}

/// A bound HTTP endpoint: `/metrics` ([`MetricsServer::bind`]) or the live page
/// ([`MetricsServer::bind_web`]).
pub struct MetricsServer {
    listener: TcpListener,
    addr: SocketAddr,
    limits: Limits,
    site: Site,
    /// The origin of the JSON's `t_ms` (monotonic).
    started: Instant,
}

impl MetricsServer {
    /// Binds `addr` (`HOST:PORT`, e.g. `127.0.0.1:9464`; port 0 picks a free one) for
    /// `/metrics` ([`Site::Metrics`]).
    ///
    /// # Errors
    /// When the address does not resolve or cannot be bound.
    pub fn bind(addr: &str) -> Result<MetricsServer, String> {
        MetricsServer::bind_site(addr, Site::Metrics)
    }

    /// Binds `addr` for the live page, its JSON and `/metrics` ([`Site::Web`]).
    ///
    /// # Errors
    /// When the address does not resolve or cannot be bound.
    pub fn bind_web(addr: &str) -> Result<MetricsServer, String> {
        MetricsServer::bind_site(addr, Site::Web)
    }

    /// Binds `addr` to serve `site`.
    ///
    /// # Errors
    /// When the address does not resolve or cannot be bound.
    pub fn bind_site(addr: &str, site: Site) -> Result<MetricsServer, String> {
        let err = |e: String| format!("{} {addr}: {e}", site.flag());
        let addrs: Vec<SocketAddr> =
            addr.to_socket_addrs().map_err(|e| err(format!("{e} (expected HOST:PORT, e.g. 127.0.0.1:9464)")))?.collect();
        let listener = TcpListener::bind(&addrs[..]).map_err(|e| err(e.to_string()))?;
        listener.set_nonblocking(true).map_err(|e| err(e.to_string()))?;
        let addr = listener.local_addr().map_err(|e| err(e.to_string()))?;
        let limits = Limits { max_conns: MAX_CONNECTIONS, max_request_bytes: MAX_HEAD_BYTES, timeout: HEAD_TIMEOUT };
        Ok(MetricsServer { listener, addr, limits, site, started: Instant::now() })
    }

    /// The address bound (with the port picked when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it serves.
    pub fn site(&self) -> Site {
        self.site
    }

    /// Serves requests with `control` until `stop` is set, a thread per connection (see
    /// [`crate::conn`]). Never runs on a worker.
    pub fn serve_until(&self, control: &Mutex<Control<'_>>, stop: &AtomicBool) {
        let limits = self.limits;
        let name = match self.site {
            Site::Metrics => "fp-metrics-conn",
            Site::Web => "fp-web-conn",
        };
        conn::serve(
            name,
            &limits,
            stop,
            &self.listener,
            || self.listener.accept().map(|(c, _)| c),
            |c| conn::refuse(c, &response(503, "Service Unavailable", "text/plain", "too many connections\n", false)),
            |c| {
                if let Err(e) = self.serve_one(c, control, &limits, stop) {
                    eprintln!("fastpath: {} connection: {e}", &self.site.flag()[2..]);
                }
            },
        );
    }

    fn serve_one(&self, mut c: TcpStream, control: &Mutex<Control<'_>>, limits: &Limits, stop: &AtomicBool) -> std::io::Result<()> {
        let mut head = Vec::new();
        let end = conn::read_request(&mut c, &mut head, limits, stop, |b| b.windows(4).any(|w| w == b"\r\n\r\n"))?;
        let reply = match end {
            ReadEnd::Stopped => return Ok(()),
            ReadEnd::TooLarge => response(431, "Request Header Fields Too Large", "text/plain", "request head too large\n", false),
            ReadEnd::TimedOut => response(408, "Request Timeout", "text/plain", "request head not complete in time\n", false),
            ReadEnd::Complete => answer(&head, self.site, |route| {
                let scrape = Scrape::take(&mut control.lock().unwrap_or_else(PoisonError::into_inner)).map_err(|e| e.to_string())?;
                // The moment the workers were read; the Control is released already.
                let t_ms = self.started.elapsed().as_millis() as u64;
                Ok(match route {
                    Route::Counters => web::counters_json(&scrape, t_ms, web::unix_ms()),
                    _ => scrape.render(),
                })
            }),
        };
        conn::reply_and_close(&mut c, &reply, limits)
    }
}

/// The response to request head `head` on `site`; `read` produces the body of a data route
/// (`/metrics`, `/api/counters`) — the only ones that take the Control.
fn answer(head: &[u8], site: Site, read: impl FnOnce(Route) -> Result<String, String>) -> Vec<u8> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) = (words.next(), words.next(), words.next(), words.next()) else {
        return response(400, "Bad Request", "text/plain", "malformed request line\n", false);
    };
    if !version.starts_with("HTTP/1.") {
        return response(400, "Bad Request", "text/plain", "HTTP/1.x only\n", false);
    }
    let path = target.split(['?', '#']).next().unwrap_or_default();
    let head_only = method == "HEAD";
    let Some(route) = Route::of(site, path) else {
        let msg = match site {
            Site::Metrics => "not found: the metrics are at /metrics\n",
            Site::Web => "not found: the live page is at /, its counters at /api/counters, the metrics at /metrics\n",
        };
        return response(404, "Not Found", "text/plain", msg, head_only);
    };
    if !matches!(method, "GET" | "HEAD") {
        let mut r = response(405, "Method Not Allowed", "text/plain", "GET or HEAD only\n", false);
        insert_header(&mut r, "Allow: GET, HEAD");
        return r;
    }
    match route {
        Route::Pointer => response(200, "OK", "text/plain; charset=utf-8", "fastpath: Prometheus metrics at /metrics\n", head_only),
        Route::Page => {
            let mut r = response(200, "OK", "text/html; charset=utf-8", web::PAGE, head_only);
            insert_header(&mut r, web::PAGE_POLICY);
            r
        }
        Route::Metrics | Route::Counters => {
            let content_type = if route == Route::Metrics { CONTENT_TYPE } else { web::JSON_CONTENT_TYPE };
            match read(route) {
                Ok(body) => response(200, "OK", content_type, &body, head_only),
                Err(e) => response(503, "Service Unavailable", "text/plain; charset=utf-8", &format!("{e}\n"), head_only),
            }
        }
    }
}

/// Inserts `header` (without its line end) after the status line of `r`.
fn insert_header(r: &mut Vec<u8>, header: &str) {
    let at = r.windows(2).position(|w| w == b"\r\n").map_or(0, |i| i + 2);
    r.splice(at..at, format!("{header}\r\n").into_bytes());
}

/// A complete HTTP/1.1 response that closes the connection. Nothing is cached: every answer
/// is a reading of live counters, or the page that polls them.
fn response(code: u16, reason: &str, content_type: &str, body: &str, head_only: bool) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        r.extend_from_slice(body.as_bytes());
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mailbox::mailbox;
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering;

    fn ok(_: Route) -> Result<String, String> {
        Ok("fastpath_workers 1\n".into())
    }

    fn status(r: &[u8]) -> String {
        let s = String::from_utf8_lossy(r);
        s.lines().next().unwrap_or_default().to_string()
    }

    #[test]
    fn requests_are_answered_by_path_and_method() {
        let r = answer(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", Site::Metrics, ok);
        let text = String::from_utf8(r.clone()).unwrap();
        assert_eq!(status(&r), "HTTP/1.1 200 OK");
        assert!(text.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{text}");
        assert!(text.contains("Content-Length: 19\r\n") && text.ends_with("\r\n\r\nfastpath_workers 1\n"), "{text}");
        assert_eq!(status(&answer(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", Site::Metrics, ok)), "HTTP/1.1 200 OK");
        let head = answer(b"HEAD /metrics HTTP/1.1\r\n\r\n", Site::Metrics, ok);
        assert!(head.ends_with(b"\r\n\r\n"), "HEAD: no body");
        assert_eq!(status(&answer(b"GET /nope HTTP/1.1\r\n\r\n", Site::Metrics, ok)), "HTTP/1.1 404 Not Found");
        let r = answer(b"POST /metrics HTTP/1.1\r\n\r\n", Site::Metrics, ok);
        assert_eq!(status(&r), "HTTP/1.1 405 Method Not Allowed");
        assert!(String::from_utf8_lossy(&r).contains("\r\nAllow: GET, HEAD\r\n"));
        assert_eq!(status(&answer(b"GARBAGE\r\n\r\n", Site::Metrics, ok)), "HTTP/1.1 400 Bad Request");
        assert_eq!(status(&answer(b"GET /metrics SPDY/3\r\n\r\n", Site::Metrics, ok)), "HTTP/1.1 400 Bad Request");
        let r = answer(b"GET /metrics HTTP/1.1\r\n\r\n", Site::Metrics, |_| Err("worker 0: has stopped".into()));
        assert_eq!(status(&r), "HTTP/1.1 503 Service Unavailable");
        assert!(String::from_utf8_lossy(&r).ends_with("worker 0: has stopped\n"));
    }

    /// Over TCP on loopback: a scrape next to an idle connection, and an over-long head.
    #[test]
    fn a_scrape_over_loopback_returns_the_exposition() {
        let server = MetricsServer::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr();
        let pipe = || crate::testutil::port_map(8, "drop");
        let (c, mut w) = mailbox();
        let stop = AtomicBool::new(false);
        let control = Mutex::new(Control::new(pipe(), Box::new(|| Ok(pipe())), vec![c]));
        let get = |req: &[u8]| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(req).unwrap();
            let mut r = Vec::new();
            let _ = s.read_to_end(&mut r);
            String::from_utf8_lossy(&r).into_owned()
        };
        let (scrape, long) = std::thread::scope(|s| {
            s.spawn(|| {
                let mut p = pipe();
                while !stop.load(Ordering::Relaxed) {
                    w.poll(&mut p, |snap| snap.totals.rx_pkts = 42);
                    std::thread::sleep(Duration::from_micros(200));
                }
            });
            s.spawn(|| server.serve_until(&control, &stop));
            let _idle = TcpStream::connect(addr).unwrap();
            let scrape = get(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip\r\n\r\n");
            let long = get(&[b"GET /metrics HTTP/1.1\r\nX: ".as_slice(), &[b'a'; MAX_HEAD_BYTES], b"\r\n\r\n"].concat());
            stop.store(true, Ordering::Relaxed);
            (scrape, long)
        });
        assert!(scrape.starts_with("HTTP/1.1 200 OK\r\n"), "{scrape}");
        assert!(scrape.contains("\nfastpath_worker_rx_packets_total{worker=\"0\"} 42\n"), "{scrape}");
        assert!(scrape.contains("\nfastpath_table_capacity_entries{table=\"port_map\",engine=\"direct\"} 8\n"), "{scrape}");
        assert!(long.starts_with("HTTP/1.1 431 "), "{long}");
    }
}
