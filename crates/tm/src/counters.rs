//! Counters of a queue (flat ports) or of a group × class (HQoS ports).
//!
//! Plain `u64`s owned by the worker that owns the traffic manager. The packet path keeps its own
//! compact forms (a flat port's per-class arrays, an HQoS group's per-class record; drops in a
//! `QueueCounters` each) and this is the form they are read in: the control thread reads a copy
//! through `Tm::queue_counters` / `Tm::port_counters`; port figures are sums computed on read.

use crate::TmDrop;

/// What happened in one queue (or one HQoS group × class).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Packets accepted.
    pub enq_pkts: u64,
    /// Bytes accepted.
    pub enq_bytes: u64,
    /// Packets sent.
    pub deq_pkts: u64,
    /// Bytes sent.
    pub deq_bytes: u64,
    /// Packets dropped, by reason (index `TmDrop as usize`).
    pub drop_pkts: [u64; TmDrop::COUNT],
    /// Bytes dropped, all reasons.
    pub drop_bytes: u64,
    /// Packets accepted with a CE mark to write.
    pub ecn_marks: u64,
    /// Bytes queued now.
    pub occ_bytes: u64,
    /// Packets queued now.
    pub occ_pkts: u64,
    /// Most bytes ever queued at once.
    pub hwm_bytes: u64,
    /// Most packets ever queued at once.
    pub hwm_pkts: u64,
}

impl QueueCounters {
    /// The counters as read: `enq_*` are not kept on the packet path but follow from
    /// `deq_* + occ_*` (what entered either left or is still there).
    pub fn read(&self) -> QueueCounters {
        let mut c = *self;
        c.enq_pkts = c.deq_pkts + c.occ_pkts;
        c.enq_bytes = c.deq_bytes + c.occ_bytes;
        c
    }

    /// Packets dropped for `r`.
    pub fn drops(&self, r: TmDrop) -> u64 {
        self.drop_pkts[r as usize]
    }

    /// Packets dropped for any reason.
    pub fn total_drops(&self) -> u64 {
        self.drop_pkts.iter().sum()
    }

    /// Adds `o` into `self`. Occupancies add up; high watermarks take the larger one (a port's
    /// queues do not peak at the same moment, so a sum would overstate).
    pub fn add(&mut self, o: &QueueCounters) {
        self.enq_pkts += o.enq_pkts;
        self.enq_bytes += o.enq_bytes;
        self.deq_pkts += o.deq_pkts;
        self.deq_bytes += o.deq_bytes;
        for (a, b) in self.drop_pkts.iter_mut().zip(o.drop_pkts) {
            *a += b;
        }
        self.drop_bytes += o.drop_bytes;
        self.ecn_marks += o.ecn_marks;
        self.occ_bytes += o.occ_bytes;
        self.occ_pkts += o.occ_pkts;
        self.hwm_bytes = self.hwm_bytes.max(o.hwm_bytes);
        self.hwm_pkts = self.hwm_pkts.max(o.hwm_pkts);
    }

    /// Counts a dropped packet of `len` bytes.
    #[inline]
    pub(crate) fn on_drop(&mut self, r: TmDrop, len: u64) {
        self.drop_pkts[r as usize] += 1;
        self.drop_bytes += len;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn sums_add_and_watermarks_take_the_max() {
        // a: two packets of 100 in, one out, one dropped; b: one packet of 300 in.
        let mut a = QueueCounters {
            deq_pkts: 1,
            deq_bytes: 100,
            occ_bytes: 100,
            occ_pkts: 1,
            hwm_bytes: 200,
            hwm_pkts: 2,
            ..QueueCounters::default()
        };
        a.on_drop(TmDrop::Wred, 64);
        let b = QueueCounters { occ_bytes: 300, occ_pkts: 1, hwm_bytes: 300, hwm_pkts: 1, ..QueueCounters::default() };
        let mut s = QueueCounters::default();
        s.add(&a.read());
        s.add(&b.read());
        assert_eq!((s.enq_pkts, s.enq_bytes, s.deq_pkts, s.occ_bytes, s.occ_pkts), (3, 500, 1, 400, 2));
        assert_eq!((s.hwm_bytes, s.hwm_pkts), (300, 2));
        assert_eq!((s.drops(TmDrop::Wred), s.total_drops(), s.drop_bytes), (1, 1, 64));
    }
}
