//! The per-worker mailbox: how typed control ops reach a worker without a lock on its path.
//!
//! ```text
//!   control thread                                   worker w (at a batch boundary)
//!   ─────────────                                    ──────────────────────────────
//!   ops ─▶ to_worker.try_send(msg) ─┐                if posted.load() == seen: return   ◀─ idle: 1 load
//!          posted += 1  (Release) ──┼──▶ posted ──▶  while let Ok(msg) = to_worker.try_recv():
//!                                   └──▶ channel ──▶     seen += 1; apply to own pipeline
//!   wait for replies (epoch = seq) ◀──── channel ◀──     from_worker.try_send(reply(seq))
//! ```
//! Each worker owns one [`WorkerEnd`]; the control thread owns the matching [`ControlEnd`]. The
//! transport is two bounded `std::sync::mpsc::sync_channel`s, used only through `try_send` /
//! `try_recv`: since Rust 1.67 that is crossbeam's array channel, lock-free for those calls (a
//! stamp per slot, no mutex unless a thread blocks). The worker never blocks and never touches
//! the channel while idle: it compares one atomic, `posted` (on its own cache line, written only
//! by the control thread), with its local count of messages taken, so an idle poll costs one
//! `Acquire` load of a line that stays in its cache until a message is posted.
//!
//! Ordering: the control thread sends before it bumps `posted` (Release), so a worker that sees
//! the new count (Acquire) finds the message in the channel. Replies carry the request's `seq`,
//! so the control thread can tell a late reply to an earlier request (after a timeout) from the
//! current one.

use crate::metrics::{ControlLoad, WorkerSnapshot};
use fastpath_pipeline::entries::EntryOp;
use fastpath_pipeline::table::{Acl, BuiltClassifier};
use fastpath_pipeline::Pipeline;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Instant;

/// Messages waiting per direction: the control thread has at most one request in flight per
/// worker, so this only absorbs late replies.
const DEPTH: usize = 16;

/// A message to a worker.
#[derive(Debug)]
pub enum ToWorker {
    /// Apply these ops to the worker's pipeline, in order, then commit (one transaction).
    Apply {
        /// Request number.
        seq: u64,
        /// The ops (one allocation shared by every worker).
        ops: Arc<[EntryOp]>,
        /// Classifiers the control replica built from these ops, by table: the worker adopts
        /// them instead of rebuilding (shared by every worker).
        prebuilt: Arc<[(usize, BuiltClassifier)]>,
    },
    /// Send a copy of the worker's counters.
    Snapshot {
        /// Request number.
        seq: u64,
    },
    /// Replace the worker's pipeline by this one (a pipeline reload: a new spec, built on the
    /// control thread for this worker). The worker switches between two batches; packets the old
    /// pipeline's traffic manager still holds leave through it first (it keeps draining, then
    /// goes back to the control thread to be freed).
    Replace {
        /// Request number.
        seq: u64,
        /// The new pipeline (this worker's own instance).
        pipe: Box<Pipeline>,
    },
    /// Send one entry of a counter array (a session's usage).
    ReadCounter {
        /// Request number.
        seq: u64,
        /// Counter array, in spec order.
        bank: usize,
        /// Entry.
        index: usize,
    },
}

/// A worker's answer.
#[derive(Debug)]
pub enum FromWorker {
    /// The result of an `Apply`: the index of the failed op and why.
    Applied {
        /// Request number.
        seq: u64,
        /// `Err((op index, message))` if the worker's pipeline refused an op.
        result: Result<(), (usize, String)>,
        /// The classifiers the worker replaced, handed back so that the control thread, not
        /// the worker, frees them.
        retired: Vec<Arc<Acl>>,
        /// When the worker took the message from its mailbox, and when it had applied it
        /// ([`crate::writes`]).
        picked: Instant,
        /// See `picked`.
        applied: Instant,
    },
    /// The worker's counters.
    Snapshot {
        /// Request number.
        seq: u64,
        /// The counters.
        snap: Box<WorkerSnapshot>,
    },
    /// The result of a `Replace`, sent once the old pipeline has drained: `Ok(old)` when the
    /// worker switched (the control thread frees the old pipeline), `Err(new)` when it refused
    /// because an earlier replaced pipeline is still draining.
    Replaced {
        /// Request number.
        seq: u64,
        /// The pipeline handed back.
        result: Result<Box<Pipeline>, Box<Pipeline>>,
    },
    /// One counter entry: (packets, bytes); zero when there is no such entry.
    Counter {
        /// Request number.
        seq: u64,
        /// The value.
        value: (u64, u64),
    },
}

impl FromWorker {
    fn seq(&self) -> u64 {
        match self {
            FromWorker::Applied { seq, .. }
            | FromWorker::Snapshot { seq, .. }
            | FromWorker::Replaced { seq, .. }
            | FromWorker::Counter { seq, .. } => *seq,
        }
    }
}

/// Messages posted to one worker, on its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct Posted(AtomicU64);

/// The control thread's end of one worker's mailbox.
pub struct ControlEnd {
    posted: Arc<Posted>,
    to: SyncSender<ToWorker>,
    from: Receiver<FromWorker>,
}

/// A worker's end of its mailbox. Worker only.
pub struct WorkerEnd {
    posted: Arc<Posted>,
    seen: u64,
    /// Messages answered and the cycles that took (read only when a message waits).
    load: ControlLoad,
    from: Receiver<ToWorker>,
    to: SyncSender<FromWorker>,
    /// A replaced pipeline whose traffic manager still holds packets, and the `Replace` request
    /// it answers once empty.
    draining: Option<(u64, Box<Pipeline>)>,
}

/// A new mailbox: the control thread keeps the first end, worker gets the second.
pub fn mailbox() -> (ControlEnd, WorkerEnd) {
    let posted = Arc::new(Posted::default());
    let (to_w, from_c) = mpsc::sync_channel(DEPTH);
    let (to_c, from_w) = mpsc::sync_channel(DEPTH);
    (
        ControlEnd { posted: posted.clone(), to: to_w, from: from_w },
        WorkerEnd { posted, seen: 0, load: ControlLoad::default(), from: from_c, to: to_c, draining: None },
    )
}

/// Why a message could not be delivered or answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailError {
    /// The worker has stopped (its end was dropped).
    Gone,
    /// The worker's queue is full (it has not polled for a long time).
    Full,
    /// No answer before the deadline.
    Timeout,
}

impl ControlEnd {
    /// Posts `msg`. Control thread only; never blocks.
    ///
    /// # Errors
    /// [`MailError::Gone`] or [`MailError::Full`].
    pub fn post(&self, msg: ToWorker) -> Result<(), MailError> {
        match self.to.try_send(msg) {
            Ok(()) => {
                self.posted.0.fetch_add(1, Ordering::Release);
                Ok(())
            }
            Err(TrySendError::Full(_)) => Err(MailError::Full),
            Err(TrySendError::Disconnected(_)) => Err(MailError::Gone),
        }
    }

    /// Waits until `deadline` for the reply to request `seq`, discarding late replies to older
    /// requests. Control thread only.
    ///
    /// # Errors
    /// [`MailError::Gone`] or [`MailError::Timeout`].
    pub fn reply(&self, seq: u64, deadline: Instant) -> Result<FromWorker, MailError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from.recv_timeout(left) {
                Ok(r) if r.seq() == seq => return Ok(r),
                Ok(_) => continue,
                Err(RecvTimeoutError::Timeout) => return Err(MailError::Timeout),
                Err(RecvTimeoutError::Disconnected) => return Err(MailError::Gone),
            }
        }
    }
}

impl WorkerEnd {
    /// True when a message waits (one atomic load). Worker only.
    #[inline]
    pub fn pending(&self) -> bool {
        self.posted.0.load(Ordering::Acquire) != self.seen
    }

    /// At a batch boundary: applies every waiting message to `pipe` and answers it. `extra`
    /// fills in the worker's port and loop counters for a snapshot (called only then, once per
    /// snapshot: two readers whose requests wait in the same poll, a Prometheus scrape and the
    /// web page, both get them). Costs one atomic load when nothing waits. Worker only; never
    /// blocks.
    #[inline]
    pub fn poll(&mut self, pipe: &mut Pipeline, extra: impl FnMut(&mut WorkerSnapshot)) {
        if self.pending() {
            self.serve(pipe, extra);
        }
    }

    fn serve(&mut self, pipe: &mut Pipeline, mut extra: impl FnMut(&mut WorkerSnapshot)) {
        // What answering costs the worker, in TSC cycles: read here, only when a message waits.
        let c0 = fastpath_packet::prefetch::cycles();
        while let Ok(msg) = self.from.try_recv() {
            self.seen += 1;
            let reply = match msg {
                ToWorker::Apply { seq, ops, prebuilt } => {
                    let picked = Instant::now();
                    let mut retired = Vec::new();
                    let result = pipe.apply_ops_prebuilt(&ops, &prebuilt, &mut retired);
                    FromWorker::Applied { seq, result, retired, picked, applied: Instant::now() }
                }
                ToWorker::Snapshot { seq } => {
                    let mut snap = Box::new(WorkerSnapshot::of(pipe));
                    extra(&mut snap);
                    snap.control = self.load;
                    FromWorker::Snapshot { seq, snap }
                }
                ToWorker::Replace { seq, pipe: mut new } => {
                    if self.draining.is_some() {
                        FromWorker::Replaced { seq, result: Err(new) }
                    } else {
                        std::mem::swap(pipe, &mut new);
                        if new.tm_backlog() > 0 {
                            // Answered once drained (`drain`).
                            self.draining = Some((seq, new));
                            self.load.messages += 1;
                            continue;
                        }
                        FromWorker::Replaced { seq, result: Ok(new) }
                    }
                }
                ToWorker::ReadCounter { seq, bank, index } => {
                    let value = pipe.objects().counters.get(bank).and_then(|c| c.values.get(index)).copied().unwrap_or_default();
                    FromWorker::Counter { seq, value }
                }
            };
            // The control thread waits for at most one reply per worker; a full queue means it
            // gave up on earlier ones, which it discards anyway.
            let _ = self.to.try_send(reply);
            self.load.messages += 1;
        }
        self.load.cycles += fastpath_packet::prefetch::cycles().wrapping_sub(c0);
    }
}

impl WorkerEnd {
    /// True while a replaced pipeline still holds packets ([`WorkerEnd::drain`] sends them).
    #[inline]
    pub fn draining(&self) -> bool {
        self.draining.is_some()
    }

    /// Packets the replaced pipeline still holds (0 when none is draining).
    pub fn draining_held(&self) -> u64 {
        self.draining.as_ref().map_or(0, |(_, p)| p.tm_backlog())
    }

    /// When the replaced pipeline's traffic manager may next send (`None`: nothing draining).
    pub fn draining_due_ns(&self) -> Option<u64> {
        self.draining.as_ref().and_then(|(_, p)| p.next_due_ns())
    }

    /// The replaced pipeline's egress on `port`, as [`Pipeline::egress`]: packets it queued
    /// before the switch leave in its scheduling order. Once it holds none, it goes back to the
    /// control thread with the answer to its `Replace`. Returns how many packets it took.
    /// Worker only; never blocks.
    pub fn drain(&mut self, port: u16, pool: &mut fastpath_packet::Pool, b: &mut fastpath_packet::Batch, now_ns: u64) -> usize {
        let Some((_, old)) = &mut self.draining else { return 0 };
        let n = old.egress(port, pool, b, now_ns);
        if old.tm_backlog() == 0 {
            if let Some((seq, old)) = self.draining.take() {
                let _ = self.to.try_send(FromWorker::Replaced { seq, result: Ok(old) });
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Room for every key the tests add (up to 40).
    fn pipe() -> Pipeline {
        crate::testutil::port_map(64, "drop")
    }

    #[test]
    fn idle_poll_touches_nothing_and_a_post_is_applied_at_the_next_poll() {
        let (c, mut w) = mailbox();
        let mut p = pipe();
        assert!(!w.pending());
        w.poll(&mut p, |_| panic!("no snapshot asked"));
        let op = p.program().parse_entry("table port_map add 3 => forward(1)").unwrap();
        c.post(ToWorker::Apply { seq: 7, ops: Arc::from(vec![op]), prebuilt: Arc::from(Vec::new()) }).unwrap();
        assert!(w.pending());
        assert_eq!(p.table("port_map").unwrap().len(), 0, "nothing happens before the worker polls");
        w.poll(&mut p, |_| {});
        assert!(!w.pending());
        assert_eq!(p.table("port_map").unwrap().len(), 1);
        let r = c.reply(7, Instant::now() + Duration::from_secs(1)).unwrap();
        assert!(matches!(r, FromWorker::Applied { seq: 7, result: Ok(()), .. }), "{r:?}");
    }

    /// A reload switches at the next poll; what the old traffic manager holds leaves through it
    /// before the old pipeline goes back to the control thread, and a second reload meanwhile
    /// is handed back unused.
    #[test]
    fn a_replaced_pipeline_drains_its_queues_then_goes_back() {
        const TM: &str = "name = \"q\"\n[parser]\nheaders = [\"eth\"]\n[control]\ningress = \"forward 1\"\n[tm]\nbuffer_pkts = 8\n";
        let (c, mut w) = mailbox();
        let mut old = fastpath_pipeline::compile("q.toml", TM).unwrap_or_else(|e| panic!("{e}")).instantiate();
        old.set_ports(2).unwrap();
        let mut p = old;
        let mut pool = fastpath_packet::Pool::new(16);
        let mut b = fastpath_packet::Batch::new();
        for _ in 0..3 {
            let h = pool.alloc().unwrap();
            pool.set_data(h, &[0u8; 60]);
            b.push(h, 0);
        }
        p.process(&mut pool, &mut b, 0);
        assert_eq!(p.tm_backlog(), 3);
        c.post(ToWorker::Replace { seq: 1, pipe: Box::new(pipe()) }).unwrap();
        w.poll(&mut p, |_| {});
        assert!(!p.has_tm(), "the worker runs the new pipeline after the poll");
        assert!(w.draining());
        assert_eq!(w.draining_held(), 3);
        let soon = || Instant::now() + Duration::from_millis(20);
        assert_eq!(c.reply(1, soon()).unwrap_err(), MailError::Timeout, "no answer while the old pipeline holds packets");
        c.post(ToWorker::Replace { seq: 2, pipe: Box::new(pipe()) }).unwrap();
        w.poll(&mut p, |_| {});
        let r = c.reply(2, soon()).unwrap();
        assert!(matches!(r, FromWorker::Replaced { seq: 2, result: Err(_) }), "a reload while draining is refused: {r:?}");
        assert_eq!(w.drain(0, &mut pool, &mut b, 0), 0, "nothing queued for port 0");
        assert_eq!(w.drain(1, &mut pool, &mut b, 0), 3);
        assert!(b.verdicts().iter().all(|&v| v == fastpath_packet::Verdict::Tx(1)), "{:?}", b.verdicts());
        assert!(!w.draining());
        let r = c.reply(1, soon()).unwrap();
        let FromWorker::Replaced { seq: 1, result: Ok(back) } = r else { panic!("{r:?}") };
        assert!(back.has_tm() && back.tm_backlog() == 0, "the old pipeline comes back, empty");
    }

    #[test]
    fn a_snapshot_carries_what_answering_earlier_messages_cost_the_worker() {
        let (c, mut w) = mailbox();
        let mut p = pipe();
        let snap = |w: &mut WorkerEnd, p: &mut Pipeline, seq| {
            c.post(ToWorker::Snapshot { seq }).unwrap();
            w.poll(p, |_| {});
            match c.reply(seq, Instant::now() + Duration::from_secs(1)).unwrap() {
                FromWorker::Snapshot { snap, .. } => snap.control,
                r => panic!("{r:?}"),
            }
        };
        assert_eq!(snap(&mut w, &mut p, 1), ControlLoad::default(), "nothing answered before the first");
        c.post(ToWorker::ReadCounter { seq: 2, bank: 0, index: 0 }).unwrap();
        w.poll(&mut p, |_| panic!("no snapshot asked"));
        let load = snap(&mut w, &mut p, 3);
        assert_eq!(load.messages, 2, "the first snapshot and the counter read");
        assert!(load.cycles > 0, "{load:?}");
        let later = snap(&mut w, &mut p, 4);
        assert_eq!(later.messages, 3);
        assert!(later.cycles > load.cycles, "{later:?} after {load:?}");
        // An idle poll counts nothing.
        w.poll(&mut p, |_| panic!("no snapshot asked"));
        assert_eq!(snap(&mut w, &mut p, 5).messages, 4);
    }

    #[test]
    fn late_replies_are_skipped_and_a_dropped_worker_is_gone() {
        let (c, mut w) = mailbox();
        let mut p = pipe();
        c.post(ToWorker::Snapshot { seq: 1 }).unwrap();
        c.post(ToWorker::Snapshot { seq: 2 }).unwrap();
        w.poll(&mut p, |s| s.worker = 5);
        let r = c.reply(2, Instant::now() + Duration::from_secs(1)).unwrap();
        let FromWorker::Snapshot { seq: 2, snap } = r else { panic!("{r:?}") };
        assert_eq!(snap.stages.len(), p.stats().len());
        // The second snapshot of one poll has the worker's own counters too (it had none, so a
        // scrape that met another reader's in one poll read every port at 0).
        assert_eq!(snap.worker, 5);
        assert_eq!(c.reply(3, Instant::now() + Duration::from_millis(10)).unwrap_err(), MailError::Timeout);
        drop(w);
        assert_eq!(c.post(ToWorker::Snapshot { seq: 3 }).unwrap_err(), MailError::Gone);
        assert_eq!(c.reply(3, Instant::now() + Duration::from_millis(10)).unwrap_err(), MailError::Gone);
    }

    #[test]
    fn a_full_queue_is_reported_not_blocked_on() {
        let (c, _w) = mailbox();
        for s in 0..DEPTH as u64 {
            c.post(ToWorker::Snapshot { seq: s }).unwrap();
        }
        assert_eq!(c.post(ToWorker::Snapshot { seq: 99 }).unwrap_err(), MailError::Full);
    }

    #[test]
    fn a_worker_thread_applies_every_post_in_order() {
        let (c, mut w) = mailbox();
        let prog = pipe().program().clone();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                let mut p = pipe();
                while !stop.load(Ordering::Relaxed) {
                    w.poll(&mut p, |_| {});
                    std::thread::yield_now();
                }
                p.table("port_map").map(|t| t.len())
            });
            for k in 0..40u64 {
                let verb =
                    if k % 4 == 3 { format!("table port_map del {}", k - 1) } else { format!("table port_map add {k} => forward(1)") };
                let op = prog.parse_entry(&verb).unwrap();
                c.post(ToWorker::Apply { seq: k, ops: Arc::from(vec![op]), prebuilt: Arc::from(Vec::new()) }).unwrap();
                let r = c.reply(k, Instant::now() + Duration::from_secs(5)).unwrap();
                assert!(matches!(r, FromWorker::Applied { result: Ok(()), .. }), "{k}: {r:?}");
            }
            stop.store(true, Ordering::Relaxed);
            assert_eq!(t.join().unwrap(), Some(20));
        });
    }
}
