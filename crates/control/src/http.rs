//! The `/metrics` endpoint (`fastpath run --metrics ADDR`): a minimal HTTP/1.1 server on a TCP
//! socket, enough for a Prometheus scraper and `curl`.
//!
//! ```text
//!  GET /metrics ──▶ read the request head (≤ 8 KiB, ≤ 10 s) ──▶ lock Control: Scrape::take
//!               ◀── 200, text format 0.0.4, Connection: close  ◀── unlock, render
//! ```
//! Written on `std::net` rather than with an HTTP crate: it answers one path with one body and
//! closes every connection, and the front ends' connection handling ([`crate::conn`]: a thread
//! per connection up to a bound, the request read in full within a size and time limit before
//! the Control is taken) is shared with the control socket. A scrape costs the workers what
//! `ctl show counters` costs them: one mailbox message, answered at a batch boundary.
//!
//! Answers: `GET`/`HEAD /metrics` 200 (503 with the reason when a worker does not answer),
//! `/` 200 with a pointer to `/metrics`, other paths 404, other methods 405, a malformed head
//! 400, an over-long one 431, a slow one 408. Request bodies are not read.

use crate::conn::{self, Limits, ReadEnd};
use crate::prom::{Scrape, CONTENT_TYPE};
use crate::state::Control;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Longest request head accepted (bytes).
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// Time a client has to send its request head (and to take the reply).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 8;

/// A bound metrics endpoint.
pub struct MetricsServer {
    listener: TcpListener,
    addr: SocketAddr,
    limits: Limits,
}

impl MetricsServer {
    /// Binds `addr` (`HOST:PORT`, e.g. `127.0.0.1:9464`; port 0 picks a free one).
    ///
    /// # Errors
    /// When the address does not resolve or cannot be bound.
    pub fn bind(addr: &str) -> Result<MetricsServer, String> {
        let err = |e: String| format!("--metrics {addr}: {e}");
        let addrs: Vec<SocketAddr> =
            addr.to_socket_addrs().map_err(|e| err(format!("{e} (expected HOST:PORT, e.g. 127.0.0.1:9464)")))?.collect();
        let listener = TcpListener::bind(&addrs[..]).map_err(|e| err(e.to_string()))?;
        listener.set_nonblocking(true).map_err(|e| err(e.to_string()))?;
        let addr = listener.local_addr().map_err(|e| err(e.to_string()))?;
        let limits = Limits { max_conns: MAX_CONNECTIONS, max_request_bytes: MAX_HEAD_BYTES, timeout: HEAD_TIMEOUT };
        Ok(MetricsServer { listener, addr, limits })
    }

    /// The address bound (with the port picked when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves scrapes with `control` until `stop` is set, a thread per connection (see
    /// [`crate::conn`]). Never runs on a worker.
    pub fn serve_until(&self, control: &Mutex<Control<'_>>, stop: &AtomicBool) {
        let limits = self.limits;
        conn::serve(
            "fp-metrics-conn",
            &limits,
            stop,
            || self.listener.accept().map(|(c, _)| c),
            |c| conn::refuse(c, &response(503, "Service Unavailable", "text/plain", "too many connections\n", false)),
            |c| {
                if let Err(e) = serve_one(c, control, &limits, stop) {
                    eprintln!("fastpath: metrics connection: {e}");
                }
            },
        );
    }
}

fn serve_one(mut c: TcpStream, control: &Mutex<Control<'_>>, limits: &Limits, stop: &AtomicBool) -> std::io::Result<()> {
    let mut head = Vec::new();
    let end = conn::read_request(&mut c, &mut head, limits, stop, |b| b.windows(4).any(|w| w == b"\r\n\r\n"))?;
    let reply = match end {
        ReadEnd::Stopped => return Ok(()),
        ReadEnd::TooLarge => response(431, "Request Header Fields Too Large", "text/plain", "request head too large\n", false),
        ReadEnd::TimedOut => response(408, "Request Timeout", "text/plain", "request head not complete in time\n", false),
        ReadEnd::Complete => answer(&head, || {
            let scrape = Scrape::take(&mut control.lock().unwrap_or_else(PoisonError::into_inner));
            scrape.map(|s| s.render()).map_err(|e| e.to_string())
        }),
    };
    conn::reply_and_close(&mut c, &reply, limits)
}

/// The response to request head `head`; `metrics` produces the `/metrics` body.
fn answer(head: &[u8], metrics: impl FnOnce() -> Result<String, String>) -> Vec<u8> {
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
    if !matches!(path, "/metrics" | "/") {
        return response(404, "Not Found", "text/plain", "not found: the metrics are at /metrics\n", head_only);
    }
    if !matches!(method, "GET" | "HEAD") {
        let mut r = response(405, "Method Not Allowed", "text/plain", "GET or HEAD only\n", false);
        // Insert the Allow header after the status line.
        let at = r.windows(2).position(|w| w == b"\r\n").map_or(0, |i| i + 2);
        r.splice(at..at, b"Allow: GET, HEAD\r\n".iter().copied());
        return r;
    }
    if path == "/" {
        return response(200, "OK", "text/plain; charset=utf-8", "fastpath: Prometheus metrics at /metrics\n", head_only);
    }
    match metrics() {
        Ok(body) => response(200, "OK", CONTENT_TYPE, &body, head_only),
        Err(e) => response(503, "Service Unavailable", "text/plain; charset=utf-8", &format!("{e}\n"), head_only),
    }
}

/// A complete HTTP/1.1 response that closes the connection.
fn response(code: u16, reason: &str, content_type: &str, body: &str, head_only: bool) -> Vec<u8> {
    let mut r =
        format!("HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len())
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

    fn ok() -> Result<String, String> {
        Ok("fastpath_workers 1\n".into())
    }

    fn status(r: &[u8]) -> String {
        let s = String::from_utf8_lossy(r);
        s.lines().next().unwrap_or_default().to_string()
    }

    #[test]
    fn requests_are_answered_by_path_and_method() {
        let r = answer(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", ok);
        let text = String::from_utf8(r.clone()).unwrap();
        assert_eq!(status(&r), "HTTP/1.1 200 OK");
        assert!(text.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{text}");
        assert!(text.contains("Content-Length: 19\r\n") && text.ends_with("\r\n\r\nfastpath_workers 1\n"), "{text}");
        assert_eq!(status(&answer(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", ok)), "HTTP/1.1 200 OK");
        let head = answer(b"HEAD /metrics HTTP/1.1\r\n\r\n", ok);
        assert!(head.ends_with(b"\r\n\r\n"), "HEAD: no body");
        assert_eq!(status(&answer(b"GET /nope HTTP/1.1\r\n\r\n", ok)), "HTTP/1.1 404 Not Found");
        let r = answer(b"POST /metrics HTTP/1.1\r\n\r\n", ok);
        assert_eq!(status(&r), "HTTP/1.1 405 Method Not Allowed");
        assert!(String::from_utf8_lossy(&r).contains("\r\nAllow: GET, HEAD\r\n"));
        assert_eq!(status(&answer(b"GARBAGE\r\n\r\n", ok)), "HTTP/1.1 400 Bad Request");
        assert_eq!(status(&answer(b"GET /metrics SPDY/3\r\n\r\n", ok)), "HTTP/1.1 400 Bad Request");
        let r = answer(b"GET /metrics HTTP/1.1\r\n\r\n", || Err("worker 0: has stopped".into()));
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
