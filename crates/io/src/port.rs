//! The port interface every packet source and sink implements, and the error log ports share.

use std::io;

use fastpath_packet::{Batch, PktId, Pool};

/// Counters a port keeps about itself. Summed over queues; read by the control thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets received and handed to the pipeline.
    pub rx_pkts: u64,
    /// Bytes received (frame bytes, no FCS).
    pub rx_bytes: u64,
    /// Packets the port (or the kernel under it) dropped before we saw them.
    pub rx_dropped: u64,
    /// Packets transmitted.
    pub tx_pkts: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Packets that could not be transmitted (ring full, error).
    pub tx_dropped: u64,
    /// Failed system calls or I/O errors (logged at most once a second).
    pub errors: u64,
}

/// A packet port: a source, a sink, or both.
///
/// Thread: a port belongs to one worker. Burst calls never allocate and never block.
pub trait Port: Send {
    /// The port's name as given on the command line (`wan`, `p0`, ...).
    fn name(&self) -> &str;

    /// Receives as many packets as fit in `batch` (`_burst`: possibly none), allocating buffers
    /// from `pool`, and appends them with `in_port = port_id`. Returns how many it appended.
    fn rx_burst(&mut self, pool: &mut Pool, batch: &mut Batch, port_id: u16) -> usize;

    /// Transmits `pkts`. The port takes ownership of the first `n` packets it returns (and
    /// frees them to `pool` once sent); the caller still owns, counts and frees the rest.
    fn tx_burst(&mut self, pool: &mut Pool, pkts: &[PktId]) -> usize;

    /// Pushes out anything buffered (pending descriptors, file buffers). Called when the worker
    /// is idle and at stop.
    fn flush(&mut self, _pool: &mut Pool) -> std::io::Result<()> {
        Ok(())
    }

    /// True when a finite source (a capture file) has nothing more to give.
    fn is_exhausted(&self) -> bool {
        false
    }

    /// The port's counters.
    fn stats(&self) -> PortStats;

    /// What stopped the port early (a damaged capture file, a failed write), so the caller can
    /// report it after a run. `None` when all is well.
    fn error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        None
    }
}

/// One port id made of a receive side and a transmit side (e.g. `pcap:in.pcap:out.pcap`: a
/// capture file read as input, another written as output). Either side may be absent: a port
/// with no transmit side refuses every packet (the worker counts them as `tx_dropped`).
pub struct Duplex {
    name: String,
    rx: Option<Box<dyn Port>>,
    tx: Option<Box<dyn Port>>,
}

impl Duplex {
    /// A port named `name` reading from `rx` and writing to `tx`.
    pub fn new(name: &str, rx: Option<Box<dyn Port>>, tx: Option<Box<dyn Port>>) -> Duplex {
        Duplex { name: name.to_string(), rx, tx }
    }
}

impl Port for Duplex {
    fn name(&self) -> &str {
        &self.name
    }
    fn rx_burst(&mut self, pool: &mut Pool, batch: &mut Batch, port_id: u16) -> usize {
        self.rx.as_mut().map_or(0, |p| p.rx_burst(pool, batch, port_id))
    }
    fn tx_burst(&mut self, pool: &mut Pool, pkts: &[PktId]) -> usize {
        self.tx.as_mut().map_or(0, |p| p.tx_burst(pool, pkts))
    }
    fn flush(&mut self, pool: &mut Pool) -> std::io::Result<()> {
        if let Some(p) = self.rx.as_mut() {
            p.flush(pool)?;
        }
        if let Some(p) = self.tx.as_mut() {
            p.flush(pool)?;
        }
        Ok(())
    }
    fn is_exhausted(&self) -> bool {
        self.rx.as_ref().is_none_or(|p| p.is_exhausted())
    }
    fn stats(&self) -> PortStats {
        let r = self.rx.as_ref().map(|p| p.stats()).unwrap_or_default();
        let t = self.tx.as_ref().map(|p| p.stats()).unwrap_or_default();
        PortStats {
            rx_pkts: r.rx_pkts,
            rx_bytes: r.rx_bytes,
            rx_dropped: r.rx_dropped,
            tx_pkts: t.tx_pkts,
            tx_bytes: t.tx_bytes,
            tx_dropped: t.tx_dropped,
            errors: r.errors + t.errors,
        }
    }
    fn error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.rx.as_ref().and_then(|p| p.error()).or_else(|| self.tx.as_ref().and_then(|p| p.error()))
    }
}

/// Logs a port's failed system calls to stderr at most once a second (they are always counted
/// in `PortStats::errors`; the log says which call and the OS error).
#[derive(Debug, Default)]
pub(crate) struct ErrorLog {
    last: Option<std::time::Instant>,
    suppressed: u64,
}

impl ErrorLog {
    /// Records one failure of `what` on `port`; prints when a second has passed since the last
    /// print. Reads the clock only on failures.
    pub(crate) fn error(&mut self, port: &str, what: &str, err: &io::Error) {
        let now = std::time::Instant::now();
        if self.last.is_some_and(|t| now.duration_since(t) < std::time::Duration::from_secs(1)) {
            self.suppressed += 1;
            return;
        }
        eprintln!("fastpath: port {port}: {what}: {err} ({} similar errors suppressed)", self.suppressed);
        self.last = Some(now);
        self.suppressed = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_log_prints_at_most_once_a_second() {
        let mut log = ErrorLog::default();
        let e = io::Error::from_raw_os_error(libc::ENETDOWN);
        log.error("p0", "sendmmsg", &e);
        assert!(log.last.is_some());
        assert_eq!(log.suppressed, 0);
        for _ in 0..5 {
            log.error("p0", "sendmmsg", &e);
        }
        assert_eq!(log.suppressed, 5);
    }
}
