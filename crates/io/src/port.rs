//! The port interface every packet source and sink implements.

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
