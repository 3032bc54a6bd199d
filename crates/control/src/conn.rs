//! Serving stream connections for the control front ends (the ctl socket, `/metrics`): one
//! thread per connection up to a bound, and a request read in full — bounded in size and time —
//! before anything takes the [`Control`](crate::Control).
//!
//! ```text
//!  accept loop (fp-ctl / fp-metrics) ──▶ at most `max_conns` connection threads, each:
//!     read the whole request (≤ max bytes, ≤ timeout, watching the stop flag)
//!     ─▶ lock Control, execute, unlock ─▶ write the reply (≤ timeout) ─▶ close
//!  connection max_conns + 1 ──▶ "busy" reply at once, closed
//! ```
//! A client that connects and sends nothing, or sends slowly, holds only its own connection
//! thread: the Control is taken after the request is complete and released before the reply
//! is written, so neither a slow writer nor a slow reader delays anyone else's request.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How much a connection may send and how long it may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; one more is answered "busy" and closed.
    pub max_conns: usize,
    /// Longest request accepted (bytes).
    pub max_request_bytes: usize,
    /// Time a client has to send its whole request, and to take the reply.
    pub timeout: Duration,
}

/// How often a blocked read looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// A stream socket the front ends serve (unix or TCP).
pub(crate) trait Conn: Read + Write + Send {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    fn set_nonblocking(&self, on: bool) -> io::Result<()>;
    fn shutdown(&self, how: Shutdown) -> io::Result<()>;
}

macro_rules! impl_conn {
    ($t:ty) => {
        impl Conn for $t {
            fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
                <$t>::set_read_timeout(self, t)
            }
            fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
                <$t>::set_write_timeout(self, t)
            }
            fn set_nonblocking(&self, on: bool) -> io::Result<()> {
                <$t>::set_nonblocking(self, on)
            }
            fn shutdown(&self, how: Shutdown) -> io::Result<()> {
                <$t>::shutdown(self, how)
            }
        }
    };
}
impl_conn!(UnixStream);
impl_conn!(TcpStream);

/// How reading a request ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadEnd {
    /// The client shut down its write half (or `complete` said the request is whole).
    Complete,
    /// More than the limit arrived.
    TooLarge,
    /// The request was not complete within the timeout.
    TimedOut,
    /// The server is stopping.
    Stopped,
}

/// Reads into `buf` until EOF or until `complete(buf)`, at most `limits.max_request_bytes`
/// bytes, within `limits.timeout` in all (not per read: a client sending a byte now and then
/// cannot stretch it), looking at `stop` every 100 ms.
pub(crate) fn read_request<C: Conn>(
    conn: &mut C,
    buf: &mut Vec<u8>,
    limits: &Limits,
    stop: &AtomicBool,
    complete: impl Fn(&[u8]) -> bool,
) -> io::Result<ReadEnd> {
    conn.set_nonblocking(false)?;
    let deadline = Instant::now() + limits.timeout;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(ReadEnd::Stopped);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(ReadEnd::TimedOut);
        }
        conn.set_read_timeout(Some(left.min(STOP_CHECK)))?;
        match conn.read(&mut chunk) {
            Ok(0) => return Ok(ReadEnd::Complete),
            Ok(n) => {
                if buf.len() + n > limits.max_request_bytes {
                    return Ok(ReadEnd::TooLarge);
                }
                buf.extend_from_slice(&chunk[..n]);
                if complete(buf) {
                    return Ok(ReadEnd::Complete);
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes `reply` (within `limits.timeout`) and closes the connection. Closing a TCP socket
/// with unread input sends a reset, which can destroy the reply before the client reads it
/// (a refused, over-long request), so the write half is shut first and what the client still
/// sends is read and discarded until it closes too (at most 1 s, 1 MiB).
pub(crate) fn reply_and_close<C: Conn>(conn: &mut C, reply: &[u8], limits: &Limits) -> io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_write_timeout(Some(limits.timeout))?;
    conn.write_all(reply)?;
    conn.shutdown(Shutdown::Write)?;
    let t0 = Instant::now();
    let (mut scratch, mut drained) = ([0u8; 4096], 0usize);
    conn.set_read_timeout(Some(Duration::from_millis(100)))?;
    while t0.elapsed() < Duration::from_secs(1) && drained < 1 << 20 {
        match conn.read(&mut scratch) {
            Ok(0) => break,
            Ok(n) => drained += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// Writes `reply` and closes at once, on the accept thread: for a connection over the limit
/// (the client may see a reset instead of the reply; it fails either way).
pub(crate) fn refuse<C: Conn>(mut conn: C, reply: &[u8]) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_write_timeout(Some(Duration::from_millis(200)));
    let _ = conn.write_all(reply);
    let _ = conn.shutdown(Shutdown::Both);
}

/// Decrements the connection count when a connection thread ends (also on a panic).
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Waits until `listener` has a connection to accept, or `STOP_CHECK` has passed (to look at
/// the stop flag): poll(2), so a connection is accepted as soon as it arrives and an idle
/// server wakes ten times a second.
fn wait_for_connection(listener: &impl std::os::fd::AsFd) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let t = Timespec { tv_sec: 0, tv_nsec: STOP_CHECK.as_nanos() as _ };
    let mut fds = [PollFd::new(listener, PollFlags::IN)];
    // An error (EINTR) just means another look at the flag and the listener.
    let _ = poll(&mut fds, Some(&t));
}

/// Accepts connections on `listener` with `accept` (non-blocking: `WouldBlock` when none
/// waits) until `stop` is set, and serves each on a thread of its own named `name` with
/// `handle`; over `limits.max_conns` connections at once, `busy` answers the new one instead.
/// Returns once the stop flag is set and every connection thread has ended (each looks at the
/// flag every 100 ms while it reads).
pub(crate) fn serve<C: Conn>(
    name: &str,
    limits: &Limits,
    stop: &AtomicBool,
    listener: &impl std::os::fd::AsFd,
    mut accept: impl FnMut() -> io::Result<C>,
    busy: impl Fn(C),
    handle: impl Fn(C) + Sync,
) {
    let active = AtomicUsize::new(0);
    std::thread::scope(|s| {
        while !stop.load(Ordering::Relaxed) {
            match accept() {
                Ok(conn) => {
                    if active.load(Ordering::Acquire) >= limits.max_conns {
                        busy(conn);
                        continue;
                    }
                    active.fetch_add(1, Ordering::AcqRel);
                    let (active, handle) = (&active, &handle);
                    let spawned = std::thread::Builder::new().name(name.into()).spawn_scoped(s, move || {
                        let _slot = Slot(active);
                        handle(conn);
                    });
                    if let Err(e) = spawned {
                        // The closure (and its Slot) never ran: give the slot back.
                        active.fetch_sub(1, Ordering::AcqRel);
                        eprintln!("fastpath: {name}: no thread for a connection: {e}");
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => wait_for_connection(listener),
                Err(e) => {
                    eprintln!("fastpath: {name}: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: usize, ms: u64) -> Limits {
        Limits { max_conns: 4, max_request_bytes: max, timeout: Duration::from_millis(ms) }
    }

    #[test]
    fn a_request_is_read_to_eof_within_its_limits() {
        let stop = AtomicBool::new(false);
        let (mut a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"show tables\n").unwrap();
        b.shutdown(Shutdown::Write).unwrap();
        let mut buf = Vec::new();
        assert_eq!(read_request(&mut a, &mut buf, &limits(64, 5000), &stop, |_| false).unwrap(), ReadEnd::Complete);
        assert_eq!(buf, b"show tables\n");

        // One byte too many.
        let (mut a, mut b) = UnixStream::pair().unwrap();
        b.write_all(&[b'x'; 65]).unwrap();
        let mut buf = Vec::new();
        assert_eq!(read_request(&mut a, &mut buf, &limits(64, 5000), &stop, |_| false).unwrap(), ReadEnd::TooLarge);

        // Nothing sent: the deadline ends it; with the stop flag set, that ends it first.
        let (mut a, _b) = UnixStream::pair().unwrap();
        let mut buf = Vec::new();
        assert_eq!(read_request(&mut a, &mut buf, &limits(64, 250), &stop, |_| false).unwrap(), ReadEnd::TimedOut);
        stop.store(true, Ordering::Relaxed);
        assert_eq!(read_request(&mut a, &mut buf, &limits(64, 60_000), &stop, |_| false).unwrap(), ReadEnd::Stopped);
    }

    #[test]
    fn a_request_can_end_before_eof() {
        let stop = AtomicBool::new(false);
        let (mut a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        let end = read_request(&mut a, &mut buf, &limits(64, 5000), &stop, |b| b.ends_with(b"\r\n\r\n")).unwrap();
        assert_eq!(end, ReadEnd::Complete);
    }
}
