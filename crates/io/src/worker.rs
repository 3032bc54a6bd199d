//! The run-to-completion loop of one worker thread.
//!
//! ```text
//!   for each port p:   rx_burst(p) ─▶ Batch ─▶ Processor::process(now_ns) ─▶ verdicts
//!                                                                              │
//!        Tx(q)  ─▶ per-port tx array[q] ─▶ ports[q].tx_burst ─▶ refused: free, tx_dropped
//!        Drop   ─▶ free (the pipeline counted the reason)
//!        Punt   ─▶ punt ring (bounded; full: free, punt_dropped) or free when there is none
//!        Continue (the processor left it undecided) ─▶ free, unfinished
//!        Queued (a traffic manager holds it) ─▶ nothing; counted as queued
//!
//!   then, when the processor has queues, for each port q:
//!        Processor::egress(q) ─▶ Batch of what the shapers let out now ─▶ verdicts as above
//! ```
//!
//! Each poll starts at the port after the one the previous poll started at.
//!
//! This is the DPDK/VPP run-to-completion model: one thread owns a pool, its ports and a batch,
//! polls each port in turn and carries each batch all the way through before the next.
//! Everything the loop needs (the batch, one tx array per port, the free array, the punt ring)
//! is allocated in [`Worker::new`]; a poll allocates nothing. Time is read once per batch and
//! handed to the processor as `now_ns` (from a clock the caller may inject).
//!
//! Thread: a `Worker` runs on one thread; it is `Send` so it can be moved onto that thread.

// cost: poll loop + TxAll + dispatch ≈ 2.3 instr/pkt when the whole batch leaves through one
// port (incl. the clock read per batch), ≈ 15 more otherwise; mem source + TxAll + dispatch +
// mem sink = 29.1 instr/pkt (64 B, 1 or 64k flows) — tests/mem_cost.rs under callgrind,
// (Ir(2N)−Ir(N))/N, N = 1M, commit 5fe5ba3+.

use std::time::Instant;

use fastpath_packet::{Batch, PktId, Pool, PuntReason, Verdict, BATCH_MAX};

use crate::port::Port;

/// Most batches a port may release from the processor's queues per poll.
pub const EGRESS_BATCHES: usize = 4;

/// What runs between receive and transmit: the pipeline, or a test stand-in.
///
/// It must leave each packet it decided on with a verdict; packets it leaves `Continue` are
/// freed and counted as `unfinished`. It must not free packets of the batch itself.
pub trait Processor {
    /// Processes one batch. `now_ns` is the worker's clock, read once for this batch.
    fn process(&mut self, pool: &mut Pool, batch: &mut Batch, now_ns: u64);

    /// Called by the worker thread once per [`Worker::poll_once`], before receiving: a batch
    /// boundary, where a processor applies queued control-plane changes (one atomic load when
    /// none are queued). `ports` and `stats` are this worker's counters, for control-plane
    /// snapshots. Default: nothing. Must not block.
    #[inline]
    fn between_batches(&mut self, _ports: &[Box<dyn Port>], _stats: &WorkerStats) {}

    /// True when the processor keeps packets between batches (a traffic manager leaves them
    /// `Queued`): the worker then calls [`Processor::egress`] for every port after each poll.
    /// Must not change while the worker runs. Default: false.
    #[inline]
    fn has_queues(&self) -> bool {
        false
    }

    /// Fills `batch` (cleared first) with packets that may leave `port` at `now_ns`, each with
    /// its final verdict, and returns how many; at most a batch. Default: none.
    #[inline]
    fn egress(&mut self, _pool: &mut Pool, _port: u16, _batch: &mut Batch, _now_ns: u64) -> usize {
        0
    }

    /// Packets the processor holds right now (queued, waiting for a shaper). Default: 0.
    #[inline]
    fn held(&self) -> u64 {
        0
    }

    /// The earliest time (the worker's clock, ns) at which a held packet may leave, if any: an
    /// idle worker that sleeps wakes by then. Default: none.
    #[inline]
    fn next_due_ns(&self) -> Option<u64> {
        None
    }
}

impl<F: FnMut(&mut Pool, &mut Batch, u64)> Processor for F {
    fn process(&mut self, pool: &mut Pool, batch: &mut Batch, now_ns: u64) {
        self(pool, batch, now_ns)
    }
}

/// The empty pipeline: sends every live packet to one port. Used to measure a source's own
/// cost and as the identity processor in tests.
#[derive(Clone, Copy, Debug)]
pub struct TxAll(pub u16);

impl Processor for TxAll {
    fn process(&mut self, _pool: &mut Pool, batch: &mut Batch, _now_ns: u64) {
        batch.set_live_verdicts(Verdict::Tx(self.0));
    }
}

/// The exception path of a worker: where punted packets go, and where packets the control plane
/// sends out of a port (packet-out) come from — a socket to a control plane, say (the broadband
/// gateway's CPRi). Called on the worker thread; must not block.
pub trait Exception: Send {
    /// A punted packet: its bytes and where it came from. The worker frees it afterwards.
    fn punt(&mut self, frame: &[u8], p: &Punted);
    /// Hands every packet-out waiting now to `send(port, frame)` (false: the port did not take
    /// it). Called once per poll.
    fn packet_out(&mut self, send: &mut dyn FnMut(u16, &[u8]) -> bool);
    /// Hands every frame the control plane sends back into the pipeline to
    /// `inject(in_port, frame)` (false: not taken now — the batch is full, the pool is empty or
    /// there is no such port; keep it for the next poll or count it lost). Injected frames are
    /// processed as if they had arrived on `in_port`, as one batch, before the ports' own
    /// packets. Called once per poll. Default: none.
    fn packet_in_pipeline(&mut self, _inject: &mut dyn FnMut(u16, &[u8]) -> bool) {}
}

/// A packet handed to the control plane, with why and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Punted {
    /// The packet; whoever pops it owns it and must free it to the worker's pool.
    pub pkt: PktId,
    /// Why it was punted.
    pub reason: PuntReason,
    /// The port it arrived on.
    pub in_port: u16,
}

/// A bounded FIFO of punted packets, allocated once.
#[derive(Debug)]
pub struct PuntRing {
    slots: Vec<Punted>,
    head: usize,
    len: usize,
}

impl PuntRing {
    /// A ring holding at most `cap` packets (at least 1).
    pub fn new(cap: usize) -> PuntRing {
        let none = Punted { pkt: PktId(0), reason: PuntReason::ACTION, in_port: 0 };
        PuntRing { slots: vec![none; cap.max(1)], head: 0, len: 0 }
    }
    /// Most packets it holds.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when no packet waits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Appends `p`; false (the caller keeps `p`) when full.
    #[inline]
    pub fn push(&mut self, p: Punted) -> bool {
        let cap = self.slots.len();
        if self.len == cap {
            return false;
        }
        let at = (self.head + self.len) % cap;
        self.slots[at] = p;
        self.len += 1;
        true
    }
    /// Takes the oldest packet.
    #[inline]
    pub fn pop(&mut self) -> Option<Punted> {
        if self.len == 0 {
            return None;
        }
        let p = self.slots[self.head];
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        Some(p)
    }
}

/// A worker's counters. Per-reason drop counts live in the pipeline, not here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Calls of [`Worker::poll_once`].
    pub polls: u64,
    /// Polls that received nothing.
    pub idle_polls: u64,
    /// Batches processed (non-empty receives).
    pub batches: u64,
    /// Packets received from all ports.
    pub rx_pkts: u64,
    /// Packets ports accepted for transmission.
    pub tx_pkts: u64,
    /// Packets with a `Tx` verdict that the port refused, its tx ring being full (freed here).
    pub tx_dropped: u64,
    /// Packets with a `Tx` verdict for a port that does not exist (freed here).
    pub tx_bad_port: u64,
    /// Packets with a `Drop` verdict (freed here; reasons counted by the pipeline).
    pub dropped: u64,
    /// Packets put on the punt ring.
    pub punted: u64,
    /// Punted packets freed because the ring was full or there is none.
    pub punt_dropped: u64,
    /// Packets the processor left `Continue` (freed here).
    pub unfinished: u64,
    /// Packets the processor kept in its queues (`Queued`: a traffic manager holds them; they
    /// come back through [`Processor::egress`]). Its refusals are `Drop`s with their reasons.
    pub queued: u64,
    /// Batches of packets the processor released from its queues.
    pub egress_batches: u64,
    /// Failed port flushes.
    pub flush_errors: u64,
    /// Frames the exception path sent into the pipeline ([`Exception::packet_in_pipeline`]).
    pub injected: u64,
    /// Frames it offered for a port that does not exist or when the pool was empty.
    pub inject_refused: u64,
}

/// Why [`Worker::run_until_exhausted`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// Every port reports `is_exhausted`.
    Exhausted,
    /// Nothing was received and the pool has no free buffer (all held by the punt ring or a
    /// port), so no source could make progress.
    PoolEmpty,
}

/// One run-to-completion worker: a pool, its ports, a batch and a processor.
pub struct Worker<P> {
    // Ports before the pool: fields drop in order, and an AF_XDP port's UMEM is the pool's
    // memory, so its socket must close before the pool's region is freed.
    ports: Vec<Box<dyn Port>>,
    pool: Pool,
    batch: Box<Batch>,
    processor: P,
    /// Packets gathered for output port `q` during a batch: `tx[q * BATCH_MAX..][..tx_n[q]]`.
    tx: Box<[PktId]>,
    tx_n: Box<[usize]>,
    free: Box<[PktId; BATCH_MAX]>,
    punt: Option<PuntRing>,
    /// Punted packets leave through this port (the control plane's), when set.
    punt_port: Option<u16>,
    /// Punted packets go to this exception path, and its packet-outs leave through ports.
    exception: Option<Box<dyn Exception>>,
    clock: Box<dyn FnMut() -> u64 + Send>,
    stats: WorkerStats,
    /// The port the next poll receives from first.
    first_port: usize,
}

impl<P: Processor> Worker<P> {
    /// A worker over `ports` (port id = index in the vector, as `Tx(id)` names it).
    /// Allocates everything the loop needs; punted packets are freed until
    /// [`Worker::with_punt_ring`] is called. The clock is monotonic ns since this call.
    pub fn new(pool: Pool, ports: Vec<Box<dyn Port>>, processor: P) -> Worker<P> {
        let tx = vec![PktId(0); ports.len() * BATCH_MAX].into_boxed_slice();
        let tx_n = vec![0; ports.len()].into_boxed_slice();
        let start = Instant::now();
        Worker {
            pool,
            ports,
            batch: Box::new(Batch::new()),
            processor,
            tx,
            tx_n,
            free: Box::new([PktId(0); BATCH_MAX]),
            punt: None,
            punt_port: None,
            exception: None,
            clock: Box::new(move || start.elapsed().as_nanos() as u64),
            stats: WorkerStats::default(),
            first_port: 0,
        }
    }

    /// Hands punted packets to `ex` (counted as `punted`) and sends its packet-outs, once per
    /// poll, out of the ports they name (counted in `tx_pkts`, or `tx_bad_port` / `tx_dropped`).
    pub fn with_exception(mut self, ex: Box<dyn Exception>) -> Worker<P> {
        self.exception = Some(ex);
        self
    }

    /// Sends the exception path's packet-outs.
    fn packet_outs(&mut self) {
        let Some(ex) = self.exception.as_mut() else { return };
        let (pool, ports, stats) = (&mut self.pool, &mut self.ports, &mut self.stats);
        ex.packet_out(&mut |port, frame| {
            let Some(p) = ports.get_mut(usize::from(port)) else {
                stats.tx_bad_port += 1;
                return false;
            };
            let Some(h) = pool.alloc() else {
                stats.tx_dropped += 1;
                return false;
            };
            pool.set_data(h, frame);
            if p.tx_burst(pool, &[h]) == 1 {
                stats.tx_pkts += 1;
                true
            } else {
                pool.free(h);
                stats.tx_dropped += 1;
                false
            }
        });
    }

    /// Processes the frames the exception path sends back into the pipeline, as one batch.
    fn injections(&mut self) -> usize {
        let Some(ex) = self.exception.as_mut() else { return 0 };
        self.batch.clear();
        let (pool, batch, stats, n_ports) = (&mut self.pool, &mut self.batch, &mut self.stats, self.ports.len());
        ex.packet_in_pipeline(&mut |in_port, frame| {
            if usize::from(in_port) >= n_ports {
                stats.inject_refused += 1;
                return false;
            }
            if batch.len() >= BATCH_MAX {
                return false;
            }
            let Some(h) = pool.alloc() else {
                stats.inject_refused += 1;
                return false;
            };
            pool.set_data(h, frame);
            batch.push(h, in_port);
            true
        });
        let n = self.batch.len();
        if n > 0 {
            let now_ns = (self.clock)();
            self.processor.process(&mut self.pool, &mut self.batch, now_ns);
            self.stats.batches += 1;
            self.stats.injected += n as u64;
            self.dispatch();
        }
        n
    }

    /// How long an idle worker may sleep, at most `max`: until the processor's next held packet
    /// is due (zero when one is due now), else `max`.
    pub fn idle_sleep(&mut self, max: std::time::Duration) -> std::time::Duration {
        match self.processor.next_due_ns() {
            Some(due) => max.min(std::time::Duration::from_nanos(due.saturating_sub((self.clock)()))),
            None => max,
        }
    }

    /// Keeps punted packets on a ring of `cap` packets instead of freeing them.
    pub fn with_punt_ring(mut self, cap: usize) -> Worker<P> {
        self.punt = Some(PuntRing::new(cap));
        self
    }

    /// Sends punted packets out of port `port` (a link to the control plane: the TR-459
    /// control-packet redirect), counted as `punted`; a full port drops them as `tx_dropped`.
    pub fn with_punt_port(mut self, port: u16) -> Worker<P> {
        self.punt_port = Some(port);
        self
    }

    /// Replaces the clock read once per batch (ns; tests inject a fake one).
    pub fn with_clock(mut self, clock: impl FnMut() -> u64 + Send + 'static) -> Worker<P> {
        self.clock = Box::new(clock);
        self
    }

    /// The worker's counters.
    pub fn stats(&self) -> WorkerStats {
        self.stats
    }
    /// The pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
    /// The pool, writable (to free popped punts, or inject packets).
    pub fn pool_mut(&mut self) -> &mut Pool {
        &mut self.pool
    }
    /// The ports, by id.
    pub fn ports(&self) -> &[Box<dyn Port>] {
        &self.ports
    }
    /// The processor.
    pub fn processor(&self) -> &P {
        &self.processor
    }
    /// The processor, writable.
    pub fn processor_mut(&mut self) -> &mut P {
        &mut self.processor
    }
    /// The punt ring, if any. Popped packets belong to the caller (free them to `pool_mut`).
    pub fn punt_ring(&mut self) -> Option<&mut PuntRing> {
        self.punt.as_mut()
    }

    /// Pops every punted packet, shows it (with its bytes) to `f`, then frees it.
    /// Returns how many there were.
    pub fn drain_punts(&mut self, mut f: impl FnMut(&[u8], Punted)) -> usize {
        let Some(ring) = self.punt.as_mut() else { return 0 };
        let mut n = 0;
        while let Some(p) = ring.pop() {
            f(self.pool.data(p.pkt), p);
            self.pool.free(p.pkt);
            n += 1;
        }
        n
    }

    /// Polls every port once: receive a batch, process it, act on the verdicts.
    /// Returns the packets received. Never allocates.
    pub fn poll_once(&mut self) -> usize {
        self.processor.between_batches(&self.ports, &self.stats);
        self.packet_outs();
        let mut total = self.injections();
        // Each poll starts one port further, so that after a stall no port's batch always
        // reaches a shared queue first (with a traffic manager, the first batch in takes the
        // buffer and later ports' packets are refused).
        let n_ports = self.ports.len();
        let mut p = self.first_port;
        for _ in 0..n_ports {
            let here = p;
            p = if p + 1 == n_ports { 0 } else { p + 1 };
            let p = here;
            self.batch.clear();
            let n = self.ports[p].rx_burst(&mut self.pool, &mut self.batch, p as u16);
            if self.batch.is_empty() {
                continue;
            }
            debug_assert_eq!(n, self.batch.len());
            total += self.batch.len();
            let now_ns = (self.clock)();
            self.processor.process(&mut self.pool, &mut self.batch, now_ns);
            self.stats.batches += 1;
            self.stats.rx_pkts += self.batch.len() as u64;
            self.dispatch();
        }
        self.first_port = if self.first_port + 1 >= n_ports { 0 } else { self.first_port + 1 };
        if self.processor.has_queues() {
            self.egress();
        }
        self.stats.polls += 1;
        if total == 0 {
            self.stats.idle_polls += 1;
        }
        total
    }

    /// Asks the processor for what may leave each port now: up to [`EGRESS_BATCHES`] batches
    /// per port per poll, so that one port's backlog cannot starve receiving.
    fn egress(&mut self) {
        let now_ns = (self.clock)();
        for p in 0..self.ports.len() {
            for _ in 0..EGRESS_BATCHES {
                let n = self.processor.egress(&mut self.pool, p as u16, &mut self.batch, now_ns);
                if n == 0 {
                    break;
                }
                self.stats.egress_batches += 1;
                self.dispatch();
                if n < BATCH_MAX {
                    break;
                }
            }
        }
    }

    /// Acts on the verdicts of the current batch; afterwards the worker owns none of its
    /// packets (those `Queued` belong to the processor).
    fn dispatch(&mut self) {
        let b = &*self.batch;
        let s = &mut self.stats;
        // Fast path: the whole batch leaves through one port (l2fwd, a single uplink). One
        // compare per packet, then the batch's own handle array goes to tx_burst.
        if let Some(&Verdict::Tx(q)) = b.verdicts().first() {
            let v = Verdict::Tx(q);
            if let Some(port) = self.ports.get_mut(usize::from(q)) {
                if b.verdicts().iter().fold(true, |same, &x| same & (x == v)) {
                    let pkts = b.handles();
                    let sent = port.tx_burst(&mut self.pool, pkts).min(pkts.len());
                    if sent < pkts.len() {
                        self.pool.free_bulk(&pkts[sent..]);
                        s.tx_dropped += (pkts.len() - sent) as u64;
                    }
                    s.tx_pkts += sent as u64;
                    return;
                }
            }
        }
        // A batch the traffic manager took whole (every packet `Queued`): nothing to send or
        // free, one count.
        // A fold, not `all`: without the early exit it is a few vector instructions per 8
        // verdicts instead of a compare and branch per packet.
        if b.verdicts().iter().fold(true, |all, v| all & matches!(v, Verdict::Queued(_))) {
            s.queued += b.len() as u64;
            return;
        }
        // General path: gather per output port (one slot write per packet), free the rest.
        // Counters add up in locals and are stored once per batch.
        let punt_port = self.punt_port.map(usize::from);
        let (exception, punt_ring, pool) = (&mut self.exception, &mut self.punt, &self.pool);
        let (tx, tx_n, free) = (&mut self.tx[..], &mut self.tx_n[..], &mut self.free[..]);
        let (mut nfree, mut dropped, mut bad_port, mut unfinished) = (0usize, 0u64, 0u64, 0u64);
        let (mut punted, mut punt_dropped, mut queued) = (0u64, 0u64, 0u64);
        for (i, (&h, &v)) in b.handles().iter().zip(b.verdicts()).enumerate() {
            if let Verdict::Tx(q) = v {
                let q = usize::from(q);
                if let Some(n) = tx_n.get_mut(q) {
                    // At most BATCH_MAX packets per batch, so `*n < BATCH_MAX` here.
                    if let Some(slot) = tx.get_mut(q * BATCH_MAX + *n) {
                        *slot = h;
                        *n += 1;
                    }
                    continue;
                }
                bad_port += 1;
            } else if let Verdict::Punt(reason) = v {
                let p = Punted { pkt: h, reason, in_port: b.meta(i).in_port };
                if let Some(ex) = exception.as_mut() {
                    // The exception path copies what it needs; the packet is freed below.
                    ex.punt(pool.data(h), &p);
                    punted += 1;
                } else {
                    if let Some(q) = punt_port {
                        if let Some(n) = tx_n.get_mut(q) {
                            if let Some(slot) = tx.get_mut(q * BATCH_MAX + *n) {
                                *slot = h;
                                *n += 1;
                                punted += 1;
                                continue;
                            }
                        }
                    }
                    if punt_ring.as_mut().is_some_and(|r| r.push(p)) {
                        punted += 1;
                        continue;
                    }
                    punt_dropped += 1;
                }
            } else if let Verdict::Drop(_) = v {
                dropped += 1;
            } else if let Verdict::Queued(_) = v {
                queued += 1;
                continue;
            } else {
                unfinished += 1;
            }
            if let Some(slot) = free.get_mut(nfree) {
                *slot = h;
                nfree += 1;
            }
        }
        s.dropped += dropped;
        s.tx_bad_port += bad_port;
        s.unfinished += unfinished;
        s.punted += punted;
        s.punt_dropped += punt_dropped;
        s.queued += queued;
        for ((q, n), port) in tx_n.iter_mut().enumerate().zip(self.ports.iter_mut()) {
            if *n == 0 {
                continue;
            }
            let pkts = &tx[q * BATCH_MAX..q * BATCH_MAX + *n];
            let sent = port.tx_burst(&mut self.pool, pkts).min(pkts.len());
            if sent < pkts.len() {
                self.pool.free_bulk(&pkts[sent..]);
                s.tx_dropped += (pkts.len() - sent) as u64;
            }
            s.tx_pkts += sent as u64;
            *n = 0;
        }
        if nfree > 0 {
            self.pool.free_bulk(&free[..nfree]);
        }
    }

    /// Flushes every port (counting failures in `flush_errors`).
    pub fn flush(&mut self) {
        for port in &mut self.ports {
            if port.flush(&mut self.pool).is_err() {
                self.stats.flush_errors += 1;
            }
        }
    }

    /// Polls until every port is exhausted (finite sources drained; sinks always are) and the
    /// processor holds no packet, flushing the ports whenever a poll is idle and at the end.
    /// Never returns while a port that is not finite (a live interface, an unlimited mem
    /// source) is attached. Queued packets leave at their shapers' rates, so the drain takes
    /// as long as the backlog needs on the worker's clock.
    pub fn run_until_exhausted(&mut self) -> RunEnd {
        loop {
            if self.poll_once() > 0 {
                continue;
            }
            self.flush();
            let held = self.processor.held();
            if held == 0 && self.ports.iter().all(|p| p.is_exhausted()) {
                return RunEnd::Exhausted;
            }
            if held == 0 && self.pool.available() == 0 {
                return RunEnd::PoolEmpty;
            }
        }
    }
}

#[cfg(test)]
mod tests {

    /// A processor holding one packet due at `due`.
    struct Due(Option<u64>);

    impl Processor for Due {
        fn process(&mut self, _pool: &mut Pool, _batch: &mut Batch, _now_ns: u64) {}
        fn next_due_ns(&self) -> Option<u64> {
            self.0
        }
    }

    #[test]
    fn an_idle_worker_sleeps_no_longer_than_its_next_shaped_packet_waits() {
        use std::time::Duration;
        let max = Duration::from_micros(100);
        let w = |due| Worker::new(Pool::new(8), Vec::new(), Due(due)).with_clock(|| 1_000_000);
        assert_eq!(w(None).idle_sleep(max), max, "nothing held: the configured sleep");
        assert_eq!(w(Some(1_030_000)).idle_sleep(max), Duration::from_micros(30), "due in 30 us");
        assert_eq!(w(Some(900_000)).idle_sleep(max), Duration::ZERO, "overdue: no sleep");
        assert_eq!(w(Some(9_000_000)).idle_sleep(max), max, "due later than the sleep");
    }

    use super::*;

    #[test]
    fn a_worker_can_move_to_its_thread() {
        fn send<T: Send>() {}
        send::<Worker<TxAll>>();
    }

    #[test]
    fn between_batches_runs_once_per_poll_even_when_idle() {
        struct Count(u32);
        impl Processor for Count {
            fn process(&mut self, _: &mut Pool, b: &mut Batch, _: u64) {
                b.set_live_verdicts(Verdict::Tx(0));
            }
            fn between_batches(&mut self, ports: &[Box<dyn Port>], _: &WorkerStats) {
                assert!(ports.is_empty());
                self.0 += 1;
            }
        }
        let mut w = Worker::new(Pool::new(8), Vec::new(), Count(0));
        for _ in 0..3 {
            assert_eq!(w.poll_once(), 0);
        }
        assert_eq!(w.processor().0, 3);
    }

    /// Holds every packet and lets `per_poll` of them out per port per call, to port 0.
    struct Hold {
        held: Vec<PktId>,
        per_call: usize,
    }
    impl Processor for Hold {
        fn process(&mut self, _: &mut Pool, b: &mut Batch, _: u64) {
            for i in 0..b.len() {
                self.held.push(b.handle(i));
            }
            b.set_live_verdicts(Verdict::Queued(0));
        }
        fn has_queues(&self) -> bool {
            true
        }
        fn egress(&mut self, _: &mut Pool, port: u16, b: &mut Batch, _: u64) -> usize {
            b.clear();
            if port != 0 {
                return 0;
            }
            let n = self.per_call.min(self.held.len());
            for h in self.held.drain(..n) {
                b.push(h, 0);
            }
            b.set_live_verdicts(Verdict::Tx(0));
            n
        }
        fn held(&self) -> u64 {
            self.held.len() as u64
        }
    }

    #[test]
    fn queued_packets_leave_through_egress_and_the_run_waits_for_them() {
        use crate::mem::{MemSink, MemSource};
        let src = MemSource::new("src", &crate::mem::TrafficProfile::default()).unwrap().with_limit(100);
        let ports: Vec<Box<dyn Port>> = vec![Box::new(MemSink::new("sink")), Box::new(src)];
        let mut w = Worker::new(Pool::new(256), ports, Hold { held: Vec::new(), per_call: 3 });
        assert_eq!(w.run_until_exhausted(), RunEnd::Exhausted);
        let s = w.stats();
        assert_eq!(s.rx_pkts, 100);
        assert_eq!(s.queued, 100, "every received packet was queued, none freed");
        assert_eq!(s.tx_pkts, 100, "and every one left through egress");
        assert_eq!((s.dropped, s.unfinished), (0, 0));
        assert!(s.egress_batches >= 34, "three packets per egress batch: {}", s.egress_batches);
        assert_eq!(w.processor().held(), 0);
        assert_eq!(w.pool().available(), 256);
    }

    #[test]
    fn a_batch_partly_queued_frees_only_what_was_not() {
        // Verdicts Queued, Queued, Drop, Queued, ...: the queued packets stay with the processor,
        // the dropped ones are freed and counted, batch by batch.
        struct Some3(Vec<PktId>);
        impl Processor for Some3 {
            fn process(&mut self, _: &mut Pool, b: &mut Batch, _: u64) {
                for i in 0..b.len() {
                    if i % 3 == 2 {
                        b.drop(i, fastpath_packet::DropReason::ActionDrop);
                    } else {
                        self.0.push(b.handle(i));
                        b.set_verdict(i, Verdict::Queued(0));
                    }
                }
            }
        }
        use crate::mem::{MemSink, MemSource};
        let src = MemSource::new("src", &crate::mem::TrafficProfile::default()).unwrap().with_limit(90);
        let ports: Vec<Box<dyn Port>> = vec![Box::new(MemSink::new("sink")), Box::new(src)];
        let mut w = Worker::new(Pool::new(256), ports, Some3(Vec::new()));
        while w.poll_once() > 0 {}
        let s = w.stats();
        assert_eq!(s.rx_pkts, 90);
        let held = w.processor().0.len() as u64;
        assert_eq!((s.queued, s.dropped), (held, 90 - held));
        assert!(held >= 58, "{held}");
        assert_eq!(w.pool().available(), 256 - held as usize, "the dropped ones were freed, the queued not");
    }

    /// An exception path that keeps what was punted and has packet-outs to send.
    struct Cp {
        punted: std::sync::Arc<std::sync::Mutex<Vec<(u16, usize)>>>,
        outs: Vec<(u16, Vec<u8>)>,
    }

    impl Exception for Cp {
        fn punt(&mut self, frame: &[u8], p: &Punted) {
            self.punted.lock().unwrap().push((p.in_port, frame.len()));
        }
        fn packet_out(&mut self, send: &mut dyn FnMut(u16, &[u8]) -> bool) {
            for (port, f) in self.outs.drain(..) {
                send(port, &f);
            }
        }
    }

    #[test]
    fn an_exception_path_takes_the_punts_and_sends_its_packet_outs() {
        use crate::mem::{MemSink, MemSource};
        let src = MemSource::new("src", &crate::mem::TrafficProfile::default()).unwrap().with_limit(10);
        let ports: Vec<Box<dyn Port>> = vec![Box::new(src), Box::new(MemSink::new("sink"))];
        let punted = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let cp = Cp { punted: punted.clone(), outs: vec![(1, vec![0u8; 60]), (1, vec![1u8; 70]), (9, vec![2u8; 60])] };
        let punt_all = |_: &mut Pool, b: &mut Batch, _: u64| b.set_live_verdicts(Verdict::Punt(PuntReason::ACTION));
        let mut w = Worker::new(Pool::new(64), ports, punt_all).with_exception(Box::new(cp));
        w.run_until_exhausted();
        let s = w.stats();
        assert_eq!(s.punted, 10, "every packet went to the exception path");
        assert_eq!(punted.lock().unwrap().iter().filter(|(port, len)| *port == 0 && *len > 0).count(), 10, "with its port and bytes");
        assert_eq!(w.ports()[1].stats().tx_pkts, 2, "the two packet-outs to port 1 left through it");
        assert_eq!((s.tx_pkts, s.tx_bad_port), (2, 1), "the one to a port that does not exist is counted");
        assert_eq!(w.pool().available(), 64, "every buffer came back");
    }

    /// An exception path that sends frames back into the pipeline.
    struct Injector(Vec<(u16, Vec<u8>)>);

    impl Exception for Injector {
        fn punt(&mut self, _frame: &[u8], _p: &Punted) {}
        fn packet_out(&mut self, _send: &mut dyn FnMut(u16, &[u8]) -> bool) {}
        fn packet_in_pipeline(&mut self, inject: &mut dyn FnMut(u16, &[u8]) -> bool) {
            // Keep what was not taken for the next poll, as a real exception path would.
            self.0.retain(|(port, f)| !inject(*port, f));
        }
    }

    #[test]
    fn frames_sent_back_into_the_pipeline_are_processed_as_arriving_on_their_port() {
        use crate::mem::MemSink;
        let ports: Vec<Box<dyn Port>> = vec![Box::new(MemSink::new("a")), Box::new(MemSink::new("b"))];
        // The pipeline sends what arrives on port 1 to port 0 and drops the rest.
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let proc = move |_: &mut Pool, b: &mut Batch, _: u64| {
            for i in 0..b.len() {
                let port = b.meta(i).in_port;
                log.lock().unwrap().push(port);
                b.set_verdict(i, if port == 1 { Verdict::Tx(0) } else { Verdict::Drop(fastpath_packet::DropReason::ActionDrop) });
            }
        };
        let mut frames: Vec<(u16, Vec<u8>)> = (0..BATCH_MAX + 3).map(|k| (1, vec![k as u8; 64])).collect();
        frames.push((7, vec![0u8; 64]));
        let mut w = Worker::new(Pool::new(256), ports, proc).with_exception(Box::new(Injector(frames)));
        assert_eq!(w.poll_once(), BATCH_MAX, "one batch per poll");
        assert_eq!(w.poll_once(), 3, "the rest at the next poll");
        let s = w.stats();
        assert_eq!(s.injected, BATCH_MAX as u64 + 3);
        assert!(s.inject_refused >= 2, "the frame for port 7 is refused at every poll: {}", s.inject_refused);
        assert_eq!(w.ports()[0].stats().tx_pkts, BATCH_MAX as u64 + 3, "and left where the pipeline sent them");
        assert!(seen.lock().unwrap().iter().all(|&p| p == 1), "each with its in-port");
        assert_eq!(w.pool().available(), 256, "every buffer came back");
    }

    #[test]
    fn each_poll_starts_one_port_further() {
        use crate::mem::{MemSource, TrafficProfile};
        use std::sync::{Arc, Mutex};
        let src = || Box::new(MemSource::new("s", &TrafficProfile::default()).unwrap().with_limit(1000)) as Box<dyn Port>;
        let order = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&order);
        let proc = move |_: &mut Pool, b: &mut Batch, _: u64| {
            seen.lock().unwrap().push(b.meta(0).in_port);
            b.set_live_verdicts(Verdict::Drop(fastpath_packet::DropReason::ActionDrop));
        };
        let mut w = Worker::new(Pool::new(1024), vec![src(), src(), src()], proc);
        for _ in 0..3 {
            w.poll_once();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 1, 2, 0, 2, 0, 1]);
    }

    #[test]
    fn punt_ring_is_fifo_and_bounded() {
        let mut r = PuntRing::new(3);
        let p = |k| Punted { pkt: PktId(k), reason: PuntReason::NEW_FLOW, in_port: 1 };
        assert!(r.push(p(1)) && r.push(p(2)) && r.push(p(3)));
        assert!(!r.push(p(4)));
        assert_eq!(r.pop(), Some(p(1)));
        assert!(r.push(p(5)));
        let rest: Vec<_> = std::iter::from_fn(|| r.pop()).map(|x| x.pkt.0).collect();
        assert_eq!(rest, vec![2, 3, 5]);
        assert!(r.is_empty());
    }
}
