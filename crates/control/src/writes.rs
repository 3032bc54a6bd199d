//! Where a write's time goes. Every write that reaches the tables through a front end (the
//! text protocol's changes, a P4Runtime `Write`) is stamped at each hand-off inside the data
//! plane's process, and the last [`CAPACITY`] writes are kept for `show writes` (`fastpath ctl
//! show writes`; `fastpath lab update-under-load` prints it after its run).
//!
//! ```text
//!  front end has the whole request ──1 queue──▶ control thread has the request (lock taken)
//!  ──2 front──▶ Control::apply starts ──3 replica──▶ control replica changed, classifiers
//!  committed ──4 post──▶ posted to every worker ──5 pick-up──▶ the last worker takes it (between
//!  two batches) ──6 worker──▶ the last worker has applied it ──7 reply──▶ the control thread
//!  has every reply ──8 finish──▶ apply returns ──9 answer──▶ the front end has its answer
//! ```
//! 1: P4Runtime: the tokio handler ▸ the p4rt control thread; the ctl socket: waiting for the
//! `Mutex<Control>`. 2: the front end's own work under the lock (parsing the text; P4Runtime's
//! checks against its key cache). 5 and 6 are the latest over the workers. 9: P4Runtime: the
//! key cache, then the control thread ▸ the tokio handler; the ctl socket: unlock, format.
//! What is not here is the transport: the client's send and the reply's way back.
//!
//! Stamps are `Instant`s, a few per write (tens of ns each); the workers take two only when a
//! change waits in their mailbox, never on the per-packet path.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Writes kept (the most recent).
pub const CAPACITY: usize = 16_384;

/// The stages, in order, then the total (names as `show writes` prints them).
pub const STAGES: [&str; 10] = [
    "1 queue: front end to control thread",
    "2 front: front end's work under the lock",
    "3 replica: control replica + classifier commit",
    "4 post: to every worker's mailbox",
    "5 pick-up: until the last worker takes it",
    "6 worker: applying it (slowest worker)",
    "7 reply: back to the control thread",
    "8 finish: after the replies (log, folds)",
    "9 answer: back to the front end",
    "total: request in to answer out",
];

/// What [`Control::apply`](crate::Control::apply) stamps on its way (the latest
/// transaction's).
#[derive(Clone, Copy, Debug)]
pub struct ApplyStamps {
    /// `apply` called.
    pub start: Instant,
    /// The control replica took every op; classifiers committed.
    pub shadowed: Instant,
    /// Posted to every worker.
    pub posted: Instant,
    /// The last worker took it from its mailbox.
    pub picked: Instant,
    /// The last worker had applied it.
    pub applied: Instant,
    /// Every reply was in.
    pub replied: Instant,
    /// `apply` returned.
    pub returned: Instant,
}

/// The times of the last [`CAPACITY`] writes, per stage, in µs (shared by the front ends;
/// cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct WriteLog(Arc<Mutex<VecDeque<[u32; STAGES.len()]>>>);

/// One stage's figures over the writes kept, µs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageUs {
    /// Median.
    pub p50: u32,
    /// 99th percentile.
    pub p99: u32,
    /// Largest.
    pub max: u32,
}

fn us(a: Instant, b: Instant) -> u32 {
    u32::try_from(b.saturating_duration_since(a).as_micros()).unwrap_or(u32::MAX)
}

impl WriteLog {
    /// Records a write: the front end had it at `received`, the control thread from `locked`,
    /// `apply` stamped `s`, the front end had the answer at `done`.
    pub fn push(&self, received: Instant, locked: Instant, s: &ApplyStamps, done: Instant) {
        let row = [
            us(received, locked),
            us(locked, s.start),
            us(s.start, s.shadowed),
            us(s.shadowed, s.posted),
            us(s.posted, s.picked),
            us(s.picked, s.applied),
            us(s.applied, s.replied),
            us(s.replied, s.returned),
            us(s.returned, done),
            us(received, done),
        ];
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if q.len() == CAPACITY {
            q.pop_front();
        }
        q.push_back(row);
    }

    /// Writes kept.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// True when no write was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every write.
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// p50 / p99 / max of each stage ([`STAGES`] order), over the writes kept.
    pub fn summary(&self) -> Vec<StageUs> {
        let q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (0..STAGES.len())
            .map(|k| {
                let mut v: Vec<u32> = q.iter().map(|r| r[k]).collect();
                v.sort_unstable();
                let at = |p: f64| v.get(((v.len().saturating_sub(1)) as f64 * p).round() as usize).copied().unwrap_or(0);
                StageUs { p50: at(0.5), p99: at(0.99), max: v.last().copied().unwrap_or(0) }
            })
            .collect()
    }

    /// The `show writes` table.
    pub fn render(&self) -> String {
        let n = self.len();
        let mut o = format!("writes timed: {n} (the last {CAPACITY} at most), µs per stage\n");
        let _ = writeln!(o, "{:<48} {:>9} {:>9} {:>9}", "stage", "p50", "p99", "max");
        for (name, s) in STAGES.iter().zip(self.summary()) {
            let _ = writeln!(o, "{name:<48} {:>9} {:>9} {:>9}", s.p50, s.p99, s.max);
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stages_are_the_gaps_between_stamps_and_the_log_keeps_the_latest() {
        let t = Instant::now();
        let at = |us: u64| t + Duration::from_micros(us);
        let s = ApplyStamps {
            start: at(30),
            shadowed: at(230),
            posted: at(240),
            picked: at(1240),
            applied: at(1300),
            replied: at(3300),
            returned: at(3310),
        };
        let log = WriteLog::default();
        assert!(log.is_empty());
        log.push(t, at(10), &s, at(3400));
        let sum = log.summary();
        let p50: Vec<u32> = sum.iter().map(|x| x.p50).collect();
        assert_eq!(p50, [10, 20, 200, 10, 1000, 60, 2000, 10, 90, 3400]);
        // A stamp out of order counts 0, not a wrap.
        log.push(at(100), at(50), &s, at(3400));
        assert_eq!(log.summary()[0].max, 10);
        assert_eq!(log.summary()[0].p50, 10, "of 0 and 10, the upper median");
        for _ in 0..CAPACITY {
            log.push(t, t, &ApplyStamps { start: t, shadowed: t, posted: t, picked: t, applied: t, replied: t, returned: t }, t);
        }
        assert_eq!(log.len(), CAPACITY);
        assert_eq!(log.summary()[9].max, 0, "the slow ones fell out");
        let text = log.render();
        assert!(text.contains("5 pick-up") && text.contains("writes timed: 16384"), "{text}");
        log.clear();
        assert!(log.is_empty());
    }
}
