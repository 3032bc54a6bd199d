//! A flat port: 8 classes, each one [`Ring`] queue, strict priority above DRR, optional
//! shapers on the port and on each queue, WRED/ECN per class, all in the shared buffer.
//!
//! ```text
//!   enqueue: class → queue ─▶ oversize for a shaper? ─▶ ring full? ─▶ WRED (avg, ECN)
//!                           ─▶ shared buffer (min, α) ─▶ ring push
//!   end of burst: DRR classes that were empty join the tail of the active list, highest first
//!   dequeue: strict mask ─lzcnt─▶ class   else DRR head ─▶ queue shaper ok? ─▶ port shaper ok?
//!                                                         ─▶ pop, account, next
//! ```
//!
//! **Whole bursts at once.** A port without WRED and shapers (`plain`) takes a burst in one
//! pass: every packet is written past its ring's tail, and the bytes per class are summed.
//! Then, once per class, the burst is checked against the ring sizes and the shared buffer
//! and committed (tail, occupancy, watermarks, buffer) — or, if any packet could be refused,
//! dropped (the tails do not move) and the burst goes through the per-packet path, which
//! decides every refusal. The burst check is *sufficient*: it passes only when no packet of
//! the burst would be refused one at a time, so results never differ. Occupancy only grows
//! during an enqueue, so one watermark update per class and burst is the exact maximum.
//!
//! **Held-back bursts.** A plain port that is empty when a burst arrives does not write it into
//! its rings: it keeps the burst (and the next ones, up to 64 packets) in arrival order in a
//! small batch, moves the tails and does all the accounting as above, and gives each packet a
//! *cell*: its class and, for a DRR class, the DRR round it leaves in. From an empty port every
//! deficit is 0, so a DRR packet whose class has `s` bytes up to and including it in the batch
//! leaves in round ⌈s / quantum⌉ (one multiply by a precomputed inverse). A dequeue that takes
//! everything then needs no turns: the strict classes from 7 down, then round by round the DRR
//! classes in active-list order, is exactly the order DRR would send; each cell's start is the
//! sum of the cells before it, and each packet is copied once, from the batch to its place.
//! Any other call (a smaller budget, a burst that may be refused, a round past 7) first writes
//! the batch into the rings, where the general paths take over.
//!
//! **A burst is one arrival instant.** DRR classes that become non-empty during one enqueue
//! burst join the tail of the active list together at its end, highest class first (they
//! used to join in the order of their first packet). Bursts of one packet keep arrival
//! order. Finding first-packet order cost a scan of the burst, about 9 of the 103
//! instructions per packet of `tm_cost a`; byte shares are unchanged (they follow the
//! deficits, not the order of first turns).

use crate::buffer::{alpha_times, SharedBuffer};
use crate::config::{ClassSched, FlatPortConfig, CLASSES};
use crate::counters::QueueCounters;
use crate::queue::{scatter, ClassRings};
use crate::sched::drr::Drr;
use crate::sched::sp;
use crate::shaper::{ShaperParams, TokenBucket};
use crate::wred::{RedAction, Rng, WredParams};
use crate::{Desc, Enq, TmDrop};

/// The packets per class of a batch's cell counts, one byte per class (class `c` in byte
/// `c`): the sum over rounds of each round's 8 counts read as one little-endian word; a batch
/// holds at most 64 packets, so no byte carries.
#[inline]
fn lanes(count: &[u8; 256]) -> u64 {
    let mut s = 0u64;
    for r in count.chunks_exact(CLASSES).take(CELLS / CLASSES) {
        let mut w = [0u8; 8];
        w.copy_from_slice(r);
        s = s.wrapping_add(u64::from_le_bytes(w));
    }
    s
}

/// Bit `i` set for each non-zero byte `i` of `x` (the bytes' bits folded into bit 0 of each
/// byte, then gathered into the top byte by one multiply).
#[inline]
fn nonzero_bytes(x: u64) -> u8 {
    let y = x | x >> 4;
    let y = y | y >> 2;
    let y = (y | y >> 1) & 0x0101_0101_0101_0101;
    (y.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

#[derive(Clone, Debug)]
struct FlatQueue {
    /// Dequeue, drop, ECN and watermark counters (occupancy lives in `FlatPort`).
    ctr: QueueCounters,
    avg_fp: u64,
    alpha_log2: i8,
    /// Longest packet accepted: the smallest burst of the port's and the queue's shapers.
    max_len: u32,
    wred: Option<WredParams>,
    shaper: Option<ShaperParams>,
    tb: TokenBucket,
}

/// The head packet's length of class `c` if the queue's shaper lets it go at `now_ns`.
#[inline]
fn head_if_eligible(rings: &ClassRings, queues: &mut [FlatQueue; CLASSES], c: usize, now_ns: u64) -> Option<u32> {
    let len = rings.peek(c)?.len_bytes;
    let q = &mut queues[c & 7];
    if let Some(p) = &q.shaper {
        q.tb.refill(p, now_ns);
        if !q.tb.conforms(len) {
            return None;
        }
    }
    Some(len)
}

/// One DRR turn of class `c`, the head of `list` (`len` classes), with `credit` bytes, in a
/// plain dequeue: sends its head packets into `out[*n..]` while they fit, then the class leaves
/// the list (empty), or keeps its turn open (the budget ran out: returns true), or moves to the
/// tail. The bytes sent are added to `taken[c]`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn drr_turn(
    rings: &mut ClassRings,
    deficit: &mut [u32; CLASSES],
    taken: &mut [u64; CLASSES],
    out: &mut [Desc],
    n: &mut usize,
    list: &mut u32,
    len: &mut u8,
    c: usize,
    credit: u64,
) -> bool {
    let c = c & 7;
    let (m, left, empty) = rings.pop_into(c, out, *n, credit);
    *n = m;
    taken[c] += credit - left;
    if empty {
        deficit[c] = 0;
        *list >>= 4;
        *len -= 1;
        false
    } else if m == out.len() {
        deficit[c] = u32::try_from(left).unwrap_or(u32::MAX);
        true
    } else {
        deficit[c] = left as u32; // below the head packet's length
        *list = (*list >> 4) | (c as u32) << ((u32::from(*len).wrapping_sub(1) * 4) & 31);
        false
    }
}

/// One flat port's queues and schedulers. Worker only.
#[derive(Clone, Debug)]
pub struct FlatPort {
    rings: ClassRings,
    /// Bytes queued per class: the queue length the buffer and WRED use.
    occ_bytes: [u64; CLASSES],
    /// Packets and bytes sent, and the high watermarks, per class (kept here rather than in
    /// each queue's `QueueCounters`, so a burst settles them with one pass over arrays).
    deq_pkts: [u64; CLASSES],
    deq_bytes: [u64; CLASSES],
    hwm_bytes: [u64; CLASSES],
    hwm_pkts: [u32; CLASSES],
    min_bytes: [u64; CLASSES],
    queues: [FlatQueue; CLASSES],
    nonempty: u8,
    sp_mask: u8,
    /// No WRED and no shaper anywhere on the port: bursts take the batched paths.
    plain: bool,
    /// The smallest α exponent of the port's classes (the batched threshold check).
    alpha_log2_min: i8,
    drr: Drr,
    shaper: Option<ShaperParams>,
    tb: TokenBucket,
    no_queue: u64,
    /// Whole bursts held back from the rings (plain ports; see "Held-back bursts").
    pend: Pending,
    /// Bursts may be held back: a plain port whose DRR quanta are all at least 2.
    pend_ok: bool,
    /// No class has a reservation (`min_bytes` all 0).
    no_min: bool,
}

/// Most descriptors a plain port holds back in [`Pending`].
const PEND: usize = 64;
/// Cells of a held-back batch: rounds 0..=7 × classes 0..=7 (`8 × round + class`); round 0
/// holds the strict classes, round `r` ≥ 1 the DRR packets that leave in DRR round `r`.
const CELLS: usize = 64;

/// Bursts accepted while the port was empty and not yet written to the rings (see the module
/// doc): their descriptors in arrival order, each one's cell, the packets per cell, and the
/// bytes per class so far. The rings' tails already count them; their slots are written by
/// [`FlatPort::flush`] (or never, when one dequeue takes them all).
#[derive(Clone, Debug)]
struct Pending {
    descs: [Desc; PEND],
    key: [u8; PEND],
    n: usize,
    /// Packets per cell, indexed by a whole `u8` (no mask; cells past 63 are never counted).
    count: [u8; 256],
    /// Each cell's next place in the output, during a drain.
    off: [u8; 256],
    /// Bytes per class in the batch. This and the two tables below are indexed by the
    /// packet's whole class byte, so the cell pass needs no mask and no separate check of
    /// the class: entries 8..=255 (no such class) give any packet a round past 7, which
    /// sends the burst to the per-packet path (they are back at 0 after it).
    cum: [u64; 256],
    /// Per class, quantum − 1 and `u64::MAX / quantum + 1`, so that the round of a DRR
    /// packet, ⌈bytes / quantum⌉, is one multiply (Lemire, Kaser and Kurz, "Faster remainder
    /// by direct computation", 2019: exact for 32-bit dividends and divisors ≥ 2); both 0 for
    /// strict classes (round 0); [`NO_CLASS_LESS1`] and `u64::MAX` past class 7.
    q_less1: [u64; 256],
    q_inv: [u64; 256],
    /// The batch's bytes, all classes (Σ `cum`), kept on ports without reservations, its one
    /// reader, so that a burst's bytes are one subtraction rather than a second sum.
    bytes: u64,
    /// The largest `q_less1`.
    q_less1_max: u64,
    /// 0xff in the byte of each DRR class: round-0 cells of DRR classes (a class's bytes
    /// still 0 after a zero-length packet, which leaves in round 1) send a batch to the rings.
    drr_lanes: u64,
}

impl Pending {
    fn new(sp_mask: u8, quantum: [u32; CLASSES]) -> Pending {
        let drr = |c: usize| sp_mask >> c & 1 == 0;
        Pending {
            descs: [Desc::default(); PEND],
            key: [0; PEND],
            n: 0,
            count: [0; 256],
            off: [0; 256],
            cum: [0; 256],
            bytes: 0,
            q_less1: std::array::from_fn(|c| match c {
                CLASSES.. => NO_CLASS_LESS1,
                _ if drr(c) => u64::from(quantum[c].max(2) - 1),
                _ => 0,
            }),
            q_inv: std::array::from_fn(|c| match c {
                CLASSES.. => u64::MAX,
                _ if drr(c) => u64::MAX / u64::from(quantum[c].max(2)) + 1,
                _ => 0,
            }),
            q_less1_max: (0..CLASSES).filter(|&c| drr(c)).map(|c| u64::from(quantum[c].max(2) - 1)).max().unwrap_or(0),
            drr_lanes: (0..CLASSES).filter(|&c| drr(c)).fold(0, |m, c| m | 0xff << (8 * c)),
        }
    }

    /// Empties the batch.
    #[inline]
    fn reset(&mut self) {
        self.n = 0;
        if let Some(c) = self.count.get_mut(..CELLS) {
            c.fill(0);
        }
        if let Some(c) = self.cum.get_mut(..CLASSES) {
            c.fill(0);
        }
        self.bytes = 0;
    }

    /// The batch's bytes per class.
    #[inline]
    fn class_bytes(&self) -> [u64; CLASSES] {
        let mut b = [0u64; CLASSES];
        b.copy_from_slice(self.cum.get(..CLASSES).unwrap_or(&[0; CLASSES]));
        b
    }

    /// Takes the cells and bytes of the last `n` packets of the cell pass back out (`pkts`
    /// those packets): the batch is as before the pass, invalid classes' bytes at 0 again.
    #[cold]
    fn undo(&mut self, pkts: &[Desc]) {
        let keys = self.key.get(self.n..self.n + pkts.len()).unwrap_or_default();
        for (d, &k) in pkts.iter().zip(keys) {
            self.count[usize::from(k)] -= 1;
            self.cum[usize::from(d.class)] -= u64::from(d.len_bytes);
        }
    }
}

/// `q_less1` of a class byte past 7: with `q_inv` = `u64::MAX` the "round" is
/// bytes + `NO_CLASS_LESS1` − 1 or more, past 7 (and no product overflows: the bytes of one
/// batch are below 2^38).
const NO_CLASS_LESS1: u64 = 1 << 32;

impl FlatPort {
    /// Builds a port from a validated config.
    pub fn new(cfg: &FlatPortConfig) -> FlatPort {
        let shaper = cfg.shaper.as_ref().map(ShaperParams::new);
        let port_max = shaper.as_ref().map_or(u32::MAX, |p| p.burst_bytes());
        let mut sp_mask = 0u8;
        let mut quantum = [0u32; CLASSES];
        for (c, cc) in cfg.classes.iter().enumerate() {
            match cc.sched {
                ClassSched::Strict => sp_mask |= 1 << c,
                ClassSched::Drr { weight } => quantum[c] = weight.saturating_mul(cfg.drr_quantum_bytes),
            }
        }
        let queues = std::array::from_fn(|c| {
            let cc = &cfg.classes[c];
            let qs = cc.shaper.as_ref().map(ShaperParams::new);
            FlatQueue {
                ctr: QueueCounters::default(),
                avg_fp: 0,
                alpha_log2: cc.alpha_log2,
                max_len: port_max.min(qs.as_ref().map_or(u32::MAX, |p| p.burst_bytes())),
                wred: cc.wred.as_ref().map(WredParams::new),
                tb: qs.as_ref().map(TokenBucket::full).unwrap_or_default(),
                shaper: qs,
            }
        });
        let plain = shaper.is_none() && cfg.classes.iter().all(|c| c.wred.is_none() && c.shaper.is_none());
        FlatPort {
            rings: ClassRings::new(cfg.classes.map(|c| c.ring_pkts)),
            occ_bytes: [0; CLASSES],
            deq_pkts: [0; CLASSES],
            deq_bytes: [0; CLASSES],
            hwm_bytes: [0; CLASSES],
            hwm_pkts: [0; CLASSES],
            min_bytes: std::array::from_fn(|c| cfg.classes[c].min_bytes),
            queues,
            nonempty: 0,
            sp_mask,
            plain,
            alpha_log2_min: cfg.classes.iter().map(|c| c.alpha_log2).min().unwrap_or(0),
            drr: Drr::new(quantum),
            tb: shaper.as_ref().map(TokenBucket::full).unwrap_or_default(),
            shaper,
            no_queue: 0,
            pend: Pending::new(sp_mask, quantum),
            no_min: cfg.classes.iter().all(|c| c.min_bytes == 0),
            pend_ok: plain && (0..CLASSES).all(|c| sp_mask >> c & 1 != 0 || quantum[c] >= 2),
        }
    }

    /// Offers `pkts` to their classes' queues; writes one result per packet into `res` and
    /// returns how many packets it handled (`min(pkts.len(), res.len())`).
    pub fn enqueue_burst(&mut self, buf: &mut SharedBuffer, rng: &mut Rng, pkts: &[Desc], res: &mut [Enq]) -> usize {
        let n = pkts.len().min(res.len());
        let (pkts, res) = (&pkts[..n], &mut res[..n]);
        let before = self.nonempty;
        if self.plain && self.enqueue_plain(buf, pkts) {
            res.fill(Enq::Queued);
        } else {
            for (d, r) in pkts.iter().zip(res.iter_mut()) {
                *r = self.enqueue_one(buf, rng, d);
            }
        }
        self.join_drr(before);
        n
    }

    /// DRR classes that became non-empty during a burst (were not in `before`) join the tail
    /// of the active list, highest class first: a burst is one arrival instant for the
    /// scheduler (see the module doc).
    #[inline]
    fn join_drr(&mut self, before: u8) {
        self.drr.activate_all(self.nonempty & !before & !self.sp_mask);
    }

    /// A plain port's burst: held back (see "Held-back bursts") when the port was empty or holds
    /// only held-back bursts, else written to the rings; false, with nothing changed but the
    /// held-back bursts written to the rings, when some packet could be refused.
    #[inline(never)]
    fn enqueue_plain(&mut self, buf: &mut SharedBuffer, pkts: &[Desc]) -> bool {
        let p = &self.pend;
        if (p.n > 0 || self.nonempty == 0) && p.n + pkts.len() <= PEND && self.pend_ok && self.enqueue_pending(buf, pkts) {
            return true;
        }
        self.flush();
        self.enqueue_whole(buf, pkts)
    }

    /// [`enqueue_whole`](Self::enqueue_whole) into the held-back batch: one pass sums the
    /// bytes per class and gives each packet its cell (its class and, for DRR, the round it
    /// leaves in), then the same burst check, then the descriptors are copied in one block.
    /// False, with nothing changed, when some packet could be refused or a DRR round is past
    /// 7 (the caller writes the batch to the rings and tries the burst there).
    fn enqueue_pending(&mut self, buf: &mut SharedBuffer, pkts: &[Desc]) -> bool {
        let n = pkts.len();
        let pd = &mut self.pend;
        // The batch began at an empty port: no ring holds more than the batch.
        if pd.n + n > self.rings.min_cap() as usize || buf.free_pkts() < n as u64 {
            return false;
        }
        let cum0 = pd.class_bytes();
        let was = if self.no_min { 0 } else { lanes(&pd.count) };
        let mut rounds = 0u64;
        let (q1, qi) = (&pd.q_less1, &pd.q_inv);
        let Some(keys) = pd.key.get_mut(pd.n..pd.n + n) else { return false };
        // The descriptors are copied in the same pass, four at a time; the slots past `n`
        // are scratch until the burst is committed.
        let Some(descs) = pd.descs.get_mut(pd.n..pd.n + n) else { return false };
        let (cum, count) = (&mut pd.cum, &mut pd.count);
        // DRR round r gives credit r × quantum (the deficits of an empty port are 0): a packet
        // leaves in round ⌈s / quantum⌉, s its class's bytes up to and including it, the first
        // round whose credit covers them; strict classes are round 0. The tables are indexed
        // by the whole class byte: no mask, and a class past 7 shows as a round past 7.
        let mut cell = |d: &Desc| {
            let c = usize::from(d.class);
            let s = cum[c] + u64::from(d.len_bytes);
            cum[c] = s;
            let r = ((u128::from(s + q1[c]) * u128::from(qi[c])) >> 64) as u64;
            rounds |= r;
            let k = (r as u8).wrapping_mul(CLASSES as u8).wrapping_add(d.class);
            count[usize::from(k)] += 1;
            k
        };
        // Four packets a step (the loop's own work is a quarter of a packet's).
        let mut quads = pkts.chunks_exact(4);
        let mut kquads = keys.chunks_exact_mut(4);
        let mut dquads = descs.chunks_exact_mut(4);
        for ((p, k), dq) in (&mut quads).zip(&mut kquads).zip(&mut dquads) {
            if let ([a, b, c, d], [ka, kb, kc, kd]) = (p, k) {
                *ka = cell(a);
                *kb = cell(b);
                *kc = cell(c);
                *kd = cell(d);
            }
            dq.copy_from_slice(p);
        }
        for ((d, k), slot) in quads.remainder().iter().zip(kquads.into_remainder()).zip(dquads.into_remainder()) {
            *k = cell(d);
            *slot = *d;
        }
        let mut round0 = [0u8; 8];
        round0.copy_from_slice(pd.count.get(..CLASSES).unwrap_or(&[0; 8]));
        // The multiply is exact while bytes + quantum − 1 < 2^32 (the fullest class bounds it).
        let top = pd.class_bytes().into_iter().fold(0, u64::max);
        // A round past 7 (or a class past 7), an inexact multiply, or a DRR packet in round 0.
        if rounds >= (CELLS / CLASSES) as u64 || (top + pd.q_less1_max) >> 32 != 0 || u64::from_le_bytes(round0) & pd.drr_lanes != 0 {
            pd.undo(pkts);
            return false;
        }
        let now = lanes(&pd.count);
        if self.no_min {
            return self.commit_pending_no_min(buf, pkts, now, top);
        }
        let burst = now - was; // packets per class, a byte each (no byte borrows)
        let mut add = [0u64; CLASSES];
        for c in 0..CLASSES {
            add[c] = pd.cum[c] - cum0[c];
        }
        let seen = nonzero_bytes(burst);
        if !self.admit_whole(buf, &add, seen) {
            self.pend.undo(pkts);
            return false;
        }
        // The batch began at an empty port: each tail is its head plus the batch's packets.
        for c in 0..CLASSES {
            self.rings.tail[c] = self.rings.head[c].wrapping_add(u32::from((now >> (8 * c)) as u8));
        }
        self.commit_whole(buf, &add, seen, n);
        self.pend.n += n;
        true
    }

    /// The burst check and commit of [`enqueue_pending`](Self::enqueue_pending) on a port
    /// with no reservations, where a class's occupancy is its bytes in the batch (`cum`): the
    /// burst's bytes `need` (Σ cum less the batch's bytes before it) must be free, and the
    /// fullest class of the batch below α_min × what is free after (a class of an earlier
    /// burst makes this only stricter: still sufficient). `now` holds the batch's packets per
    /// class, a byte each.
    #[inline]
    fn commit_pending_no_min(&mut self, buf: &mut SharedBuffer, pkts: &[Desc], now: u64, top: u64) -> bool {
        let n = pkts.len();
        let pd = &mut self.pend;
        let cum = pd.class_bytes();
        let total = cum.iter().sum::<u64>();
        let need = total - pd.bytes;
        let free = buf.free_bytes();
        if need > free || top >= alpha_times(free - need, self.alpha_log2_min) {
            pd.undo(pkts);
            return false;
        }
        let cnt = now.to_le_bytes();
        for c in 0..CLASSES {
            let k = u32::from(cnt[c]);
            self.rings.tail[c] = self.rings.head[c].wrapping_add(k);
            self.occ_bytes[c] = cum[c];
            self.hwm_bytes[c] = self.hwm_bytes[c].max(cum[c]);
            self.hwm_pkts[c] = self.hwm_pkts[c].max(k);
        }
        buf.take_shared(need, n as u32);
        self.nonempty = nonzero_bytes(now);
        pd.bytes = total;
        pd.n += n;
        true
    }

    /// The burst check of [`enqueue_whole`](Self::enqueue_whole): `add[c]` bytes joining each
    /// class (`seen` the classes with packets) would all pass one at a time.
    #[inline]
    fn admit_whole(&self, buf: &SharedBuffer, add: &[u64; CLASSES], seen: u8) -> bool {
        let free = buf.free_bytes();
        let (mut need, mut top) = (0u64, 0u64);
        for (c, ((&min, &q0), &a)) in self.min_bytes.iter().zip(&self.occ_bytes).zip(add).enumerate() {
            let s0 = q0.saturating_sub(min);
            let s1 = (q0 + a).saturating_sub(min);
            need += s1 - s0;
            top = top.max(if seen >> c & 1 != 0 { s1 } else { 0 });
        }
        need <= free && top < alpha_times(free - need, self.alpha_log2_min)
    }

    /// Commits a burst that passed [`admit_whole`](Self::admit_whole), the tails already moved.
    #[inline]
    fn commit_whole(&mut self, buf: &mut SharedBuffer, add: &[u64; CLASSES], seen: u8, n: usize) {
        let mut need = 0u64;
        for (c, &a) in add.iter().enumerate() {
            let (min, q0) = (self.min_bytes[c], self.occ_bytes[c]);
            let q1 = q0 + a;
            need += q1.saturating_sub(min) - q0.saturating_sub(min);
            self.occ_bytes[c] = q1;
            self.hwm_bytes[c] = self.hwm_bytes[c].max(q1);
            self.hwm_pkts[c] = self.hwm_pkts[c].max(self.rings.tail[c].wrapping_sub(self.rings.head[c]));
        }
        buf.take_shared(need, n as u32);
        self.nonempty |= seen;
    }

    /// Writes the held-back batch into the rings (it began at an empty port, so each class's
    /// packets go from its head on). Nothing to do when none is held.
    #[cold]
    fn flush(&mut self) {
        let n = self.pend.n;
        if n == 0 {
            return;
        }
        let mut t = self.rings.head;
        if let Some((slots, all, base, mask)) = self.rings.all_slots_mut() {
            for d in self.pend.descs.get(..n).unwrap_or_default() {
                let c = usize::from(d.class & 7);
                if let Some(slot) = slots.get_mut((base[c] + (t[c] & mask[c])) as usize & all) {
                    *slot = *d;
                }
                t[c] = t[c].wrapping_add(1);
            }
        }
        debug_assert_eq!(t, self.rings.tail);
        self.pend.reset();
    }

    /// Takes all of `pkts` if none of them would be refused one at a time (see the module
    /// doc); false, with nothing changed, otherwise. Plain ports only.
    fn enqueue_whole(&mut self, buf: &mut SharedBuffer, pkts: &[Desc]) -> bool {
        let n = pkts.len();
        // The writes past each tail must stay inside the ring's free slots.
        if !self.rings.all_have_room(n) || buf.free_pkts() < n as u64 {
            return false;
        }
        let tail0 = self.rings.tail;
        let mut tail = tail0;
        // One pass: each packet is written past its class's tail and its bytes are summed per
        // class (two passes used to measure better; with the rest as it is now, one does).
        let mut add = [0u64; CLASSES];
        let mut any_class = 0u8;
        let Some((slots, all, base, mask)) = self.rings.all_slots_mut() else { return false };
        for d in pkts {
            let c = usize::from(d.class & 7);
            let t = tail[c];
            tail[c] = t.wrapping_add(1);
            add[c] += u64::from(d.len_bytes);
            any_class |= d.class;
            if let Some(slot) = slots.get_mut((base[c] + (t & mask[c])) as usize & all) {
                *slot = *d;
            }
        }
        if usize::from(any_class) >= CLASSES {
            return false;
        }
        let mut seen = 0u8;
        for c in 0..CLASSES {
            seen |= u8::from(tail[c] != tail0[c]) << c;
        }
        // Sufficient for every packet: the bytes fit in what is free now, and the fullest
        // queue of the burst, at its end, is below α_min × what is free at the end (free only
        // shrinks and queues only grow during an enqueue, so every earlier check had more room).
        let free = buf.free_bytes();
        let (mut need, mut top) = (0u64, 0u64);
        for (c, ((&min, &q0), &a)) in self.min_bytes.iter().zip(&self.occ_bytes).zip(&add).enumerate() {
            let s0 = q0.saturating_sub(min);
            let s1 = (q0 + a).saturating_sub(min);
            need += s1 - s0;
            top = top.max(if seen >> c & 1 != 0 { s1 } else { 0 });
        }
        if need > free || top >= alpha_times(free - need, self.alpha_log2_min) {
            return false;
        }
        self.rings.tail = tail;
        for c in 0..CLASSES {
            self.occ_bytes[c] += add[c];
            self.hwm_bytes[c] = self.hwm_bytes[c].max(self.occ_bytes[c]);
            self.hwm_pkts[c] = self.hwm_pkts[c].max(tail[c].wrapping_sub(self.rings.head[c]));
        }
        buf.take_shared(need, n as u32);
        self.nonempty |= seen;
        true
    }

    #[inline]
    fn enqueue_one(&mut self, buf: &mut SharedBuffer, rng: &mut Rng, d: &Desc) -> Enq {
        let c = usize::from(d.class);
        let Some(q) = self.queues.get_mut(c) else {
            self.no_queue += 1;
            return Enq::Dropped(TmDrop::NoQueue);
        };
        let c = c & 7;
        let ring = &mut self.rings;
        let len = u64::from(d.len_bytes);
        let qlen = self.occ_bytes[c];
        let min = self.min_bytes[c];
        let mut marked = false;
        let verdict = if d.len_bytes > q.max_len {
            Err(TmDrop::Shaper)
        } else if ring.is_full(c) {
            Err(TmDrop::QueueFull)
        } else {
            // WRED first (rte_sched's order), then the shared buffer takes the bytes.
            let red = match &q.wred {
                None => RedAction::Pass,
                Some(w) => w.decide(&mut q.avg_fp, qlen, d.ecn, rng),
            };
            match red {
                RedAction::Drop => Err(TmDrop::Wred),
                RedAction::Mark => {
                    marked = true;
                    buf.try_take(qlen, min, q.alpha_log2, len)
                }
                RedAction::Pass => buf.try_take(qlen, min, q.alpha_log2, len),
            }
        };
        if let Err(r) = verdict {
            q.ctr.on_drop(r, len);
            return Enq::Dropped(r);
        }
        ring.push(c, *d);
        self.occ_bytes[c] += len;
        self.hwm_bytes[c] = self.hwm_bytes[c].max(self.occ_bytes[c]);
        self.hwm_pkts[c] = self.hwm_pkts[c].max(ring.len(c));
        self.nonempty |= 1 << c;
        if marked {
            q.ctr.ecn_marks += 1;
            Enq::Marked
        } else {
            Enq::Queued
        }
    }

    /// Sends up to `budget` packets (at most `out.len()`) into `out` in scheduling order at
    /// `now_ns`; returns how many. Stops early when the queues are empty or the shapers refuse.
    pub fn dequeue_burst(&mut self, buf: &mut SharedBuffer, budget: usize, now_ns: u64, out: &mut [Desc]) -> usize {
        let budget = budget.min(out.len());
        if self.plain {
            return self.dequeue_plain(buf, &mut out[..budget]);
        }
        self.dequeue_each(buf, budget, now_ns, out)
    }

    /// [`dequeue_burst`](Self::dequeue_burst) of a port with WRED or shapers: packet by packet.
    /// Out of line, as [`dequeue_plain`](Self::dequeue_plain) is (measured: `tm_cost b`).
    #[inline(never)]
    fn dequeue_each(&mut self, buf: &mut SharedBuffer, budget: usize, now_ns: u64, out: &mut [Desc]) -> usize {
        if let Some(p) = &self.shaper {
            self.tb.refill(p, now_ns);
        }
        let mut blocked = 0u8;
        let mut n = 0;
        while n < budget {
            let strict = self.nonempty & self.sp_mask & !blocked;
            let (c, len) = if let Some(c) = sp::highest(strict) {
                let c = c & 7;
                match head_if_eligible(&self.rings, &mut self.queues, c, now_ns) {
                    Some(len) => (c, len),
                    None => {
                        blocked |= 1 << c;
                        continue;
                    }
                }
            } else {
                let (rings, queues) = (&self.rings, &mut self.queues);
                match self.drr.select(|c| head_if_eligible(rings, queues, c, now_ns)) {
                    Some(c) => (c & 7, self.rings.peek(c).map_or(0, |d| d.len_bytes)),
                    None => break,
                }
            };
            if self.shaper.is_some() {
                if !self.tb.conforms(len) {
                    break;
                }
                self.tb.consume(len);
            }
            let (q, ring) = (&mut self.queues[c], &mut self.rings);
            let Some(d) = ring.pop(c) else { break };
            if q.shaper.is_some() {
                q.tb.consume(len);
            }
            let len64 = u64::from(len);
            buf.give(self.occ_bytes[c], self.min_bytes[c], len64);
            self.occ_bytes[c] -= len64;
            self.deq_pkts[c] += 1;
            self.deq_bytes[c] += len64;
            if let Some(slot) = out.get_mut(n) {
                *slot = d;
            }
            n += 1;
            let empty = ring.is_empty(c);
            let bit = 1u8 << c;
            if empty {
                self.nonempty &= !bit;
            }
            if self.sp_mask & bit == 0 {
                self.drr.served(c, len, empty);
            }
        }
        n
    }

    /// [`dequeue_burst`](Self::dequeue_burst) of a plain port: no shaper can refuse, so each
    /// strict class drains in one run and each DRR turn sends its packets in one run; the
    /// buffer and the counters are settled once per class at the end.
    #[inline(never)]
    fn dequeue_plain(&mut self, buf: &mut SharedBuffer, out: &mut [Desc]) -> usize {
        if self.pend.n > 0 {
            if self.pend.n <= out.len() {
                return self.drain_pending(buf, out);
            }
            self.flush();
        }
        let heads = self.rings.head;
        let mut taken = [0u64; CLASSES];
        let mut n = 0;
        let rings = &mut self.rings;
        let mut strict = self.nonempty & self.sp_mask;
        while let Some(c) = sp::highest(strict) {
            let c = c & 7;
            let (m, left, empty) = rings.pop_into(c, out, n, u64::MAX);
            n = m;
            taken[c] += u64::MAX - left;
            if !empty {
                break; // the budget ran out
            }
            strict &= !(1 << c);
        }
        // DRR turns, the active list in registers (see `sched::drr`): a turn ends with the
        // class empty (it leaves), the budget spent (the turn stays open) or a head packet
        // longer than the credit left (the class moves to the tail). A turn left open by the
        // last call resumes first, without a new quantum.
        let drr = &mut self.drr;
        let (mut list, mut len) = (drr.list, drr.len);
        let cap = out.len();
        let mut open = drr.granted;
        if len == 1 && n < cap {
            // One class in the round robin: its turns follow one another, so it sends all that
            // fits `out` in one run (with quanta of about an MTU, a turn per packet had cost the
            // vbng bench's core port about 60 instructions a packet). Its deficit is what
            // those turns leave: the first turn's credit (its deficit, plus a quantum unless
            // the turn was open), a quantum for each turn after it that the run needed, less
            // the bytes sent.
            let c = (list & 7) as usize;
            let quantum = u64::from(drr.quantum[c]).max(1);
            let first = u64::from(drr.deficit[c]) + if open { 0 } else { quantum };
            let (m, left, empty) = rings.pop_into(c, out, n, u64::MAX);
            n = m;
            let sent = u64::MAX - left;
            taken[c] += sent;
            if empty {
                drr.deficit[c] = 0;
                (list, len, open) = (0, 0, false);
            } else {
                let credit = first + sent.saturating_sub(first).div_ceil(quantum) * quantum;
                drr.deficit[c] = u32::try_from(credit - sent).unwrap_or(u32::MAX);
                open = true;
            }
        }
        if open && len > 0 && n < cap {
            let c = (list & 7) as usize;
            let credit = u64::from(drr.deficit[c]);
            open = drr_turn(rings, &mut drr.deficit, &mut taken, out, &mut n, &mut list, &mut len, c, credit);
        }
        while !open && len > 0 && n < cap {
            let c = (list & 7) as usize;
            let credit = u64::from(drr.deficit[c]) + u64::from(drr.quantum[c]);
            open = drr_turn(rings, &mut drr.deficit, &mut taken, out, &mut n, &mut list, &mut len, c, credit);
        }
        (drr.list, drr.len, drr.granted) = (list, len, open);
        let mut released = 0;
        let mut nonempty = 0u8;
        for c in 0..CLASSES {
            let (min, q0) = (self.min_bytes[c], self.occ_bytes[c]);
            let q1 = q0 - taken[c];
            self.occ_bytes[c] = q1;
            released += q0.saturating_sub(min) - q1.saturating_sub(min);
            let head = self.rings.head[c];
            self.deq_pkts[c] += u64::from(head.wrapping_sub(heads[c]));
            self.deq_bytes[c] += taken[c];
            nonempty |= u8::from(head != self.rings.tail[c]) << c;
        }
        self.nonempty = nonempty;
        buf.give_shared(released, n as u32);
        n
    }

    /// A dequeue that takes everything a plain port holds, all of it held back (see "Held-back
    /// bursts"): each cell's place in the output is the sum of the cells before it (the strict
    /// classes from 7 down, then round by round the DRR classes in active-list order), and each
    /// packet is copied once, from the batch to its place. The port is empty after.
    fn drain_pending(&mut self, buf: &mut SharedBuffer, out: &mut [Desc]) -> usize {
        let pd = &mut self.pend;
        let n = pd.n;
        let count = &pd.count;
        // Every cell a key of the batch names is written below before the copy reads it, so
        // the array is kept from call to call rather than zeroed.
        let off = &mut pd.off;
        debug_assert!(!self.drr.granted && self.drr.deficit == [0; CLASSES]);
        let (list, len) = (self.drr.list, self.drr.len);
        if self.drr.is_descending(self.nonempty & !self.sp_mask) {
            // With the DRR classes listed highest first (one burst, or bursts that added no
            // class), the order to send is round by round, class 7 to 0 within a round: each
            // cell's start is a prefix sum over the rounds' words with their bytes reversed,
            // 8 cells per word (bytes: a batch holds ≤ 64).
            const ONES: u64 = 0x0101_0101_0101_0101;
            let mut base = 0u64;
            for (src, dst) in count.chunks_exact(CLASSES).zip(off.chunks_exact_mut(CLASSES)).take(CELLS / CLASSES) {
                let mut w = [0u8; 8];
                w.copy_from_slice(src);
                let x = u64::from_be_bytes(w);
                let incl = x.wrapping_mul(ONES);
                dst.copy_from_slice(&((incl - x) + base * ONES).to_be_bytes());
                base += incl >> 56;
                if base >= n as u64 {
                    break;
                }
            }
        } else {
            let mut at = 0u8;
            let mut strict = self.nonempty & self.sp_mask;
            while let Some(c) = sp::highest(strict) {
                let c = c & 7;
                off[c] = at;
                at += count[c];
                strict &= !(1 << c);
            }
            let mut round = CLASSES;
            while usize::from(at) < n && round < CELLS {
                let mut l = list;
                for _ in 0..len {
                    let k = (round | (l & 7) as usize) & 255;
                    off[k] = at;
                    at += count[k];
                    l >>= 4;
                }
                round += CLASSES;
            }
        }
        scatter(pd.descs.get(..n).unwrap_or_default(), pd.key.get(..n).unwrap_or_default(), off, out);
        // Every queued byte leaves; without reservations all of them were shared.
        let released = if self.no_min {
            self.occ_bytes.iter().sum()
        } else {
            self.occ_bytes.iter().zip(&self.min_bytes).map(|(&q, &min)| q.saturating_sub(min)).sum()
        };
        for c in 0..CLASSES {
            self.deq_pkts[c] += u64::from(self.rings.tail[c].wrapping_sub(self.rings.head[c]));
            self.deq_bytes[c] += self.occ_bytes[c];
        }
        self.occ_bytes = [0; CLASSES];
        self.rings.head = self.rings.tail;
        self.nonempty = 0;
        (self.drr.list, self.drr.len) = (0, 0);
        buf.give_shared(released, n as u32);
        self.pend.reset();
        n
    }

    /// Earliest time at which [`dequeue_burst`](Self::dequeue_burst) could send a packet, given
    /// no new arrivals: the smallest, over non-empty queues, of the time the head packet
    /// conforms to both the queue's and the port's shaper. A time ≤ now means now. `None` when
    /// every queue is empty. Control path or idle worker.
    pub fn next_eligible_ns(&self) -> Option<u64> {
        let mut best: Option<u64> = None;
        for (c, q) in self.queues.iter().enumerate() {
            if self.nonempty >> c & 1 == 0 {
                continue;
            }
            let Some(d) = self.rings.peek(c) else { continue };
            let mut t = self.shaper.as_ref().map_or(0, |p| self.tb.ready_ns(p, d.len_bytes));
            if let Some(p) = &q.shaper {
                t = t.max(q.tb.ready_ns(p, d.len_bytes));
            }
            best = Some(best.map_or(t, |b| b.min(t)));
        }
        best
    }

    /// A copy of class `c`'s counters (`None` past class 7).
    pub fn queue_counters(&self, c: usize) -> Option<QueueCounters> {
        let q = self.queues.get(c)?;
        let mut k = q.ctr;
        let c = c & 7;
        k.occ_bytes = self.occ_bytes[c];
        k.occ_pkts = u64::from(self.rings.len(c));
        (k.deq_pkts, k.deq_bytes) = (self.deq_pkts[c], self.deq_bytes[c]);
        (k.hwm_bytes, k.hwm_pkts) = (self.hwm_bytes[c], u64::from(self.hwm_pkts[c]));
        Some(k.read())
    }

    /// The sum of the port's queue counters; packets for a class the port does not have are
    /// counted under `TmDrop::NoQueue`.
    pub fn port_counters(&self) -> QueueCounters {
        let mut s = QueueCounters::default();
        for c in 0..CLASSES {
            if let Some(k) = self.queue_counters(c) {
                s.add(&k);
            }
        }
        s.drop_pkts[TmDrop::NoQueue as usize] += self.no_queue;
        s
    }

    /// The WRED average of class `c`, bytes.
    pub fn wred_avg_bytes(&self, c: usize) -> u64 {
        self.queues.get(c).map_or(0, |q| WredParams::avg_bytes(q.avg_fp))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use crate::config::ClassConfig;
    use crate::shaper::ShaperConfig;
    use crate::wred::{WredConfig, ECT0, NOT_ECT};
    use fastpath_packet::PktId;

    fn desc(id: u32, class: u8, len: u32) -> Desc {
        Desc { pkt: PktId(id), len_bytes: len, class, ..Desc::default() }
    }

    fn port(cfg: &FlatPortConfig) -> (FlatPort, SharedBuffer, Rng) {
        (FlatPort::new(cfg), SharedBuffer::new(1 << 30, 1 << 20, 0), Rng::new(1))
    }

    fn drain(p: &mut FlatPort, b: &mut SharedBuffer, now: u64) -> Vec<Desc> {
        let mut out = vec![Desc::default(); 64];
        let mut all = vec![];
        loop {
            let n = p.dequeue_burst(b, 64, now, &mut out);
            if n == 0 {
                return all;
            }
            all.extend_from_slice(&out[..n]);
        }
    }

    #[test]
    fn strict_priority_order() {
        let mut cfg = FlatPortConfig::default();
        for c in &mut cfg.classes {
            c.sched = ClassSched::Strict;
        }
        let (mut p, mut b, mut r) = port(&cfg);
        let pkts: Vec<Desc> = (0..24).map(|i| desc(i, (i * 5 % 8) as u8, 100)).collect();
        let mut res = vec![Enq::Queued; 24];
        assert_eq!(p.enqueue_burst(&mut b, &mut r, &pkts, &mut res), 24);
        let out = drain(&mut p, &mut b, 0);
        assert_eq!(out.len(), 24);
        // Classes in descending order; FIFO within a class.
        for w in out.windows(2) {
            assert!(w[0].class > w[1].class || (w[0].class == w[1].class && w[0].pkt < w[1].pkt));
        }
        assert_eq!(b.used_pkts(), 0);
    }

    #[test]
    fn strict_classes_preempt_drr() {
        let (mut p, mut b, mut r) = port(&FlatPortConfig::default()); // 7, 6 strict
        let mut res = [Enq::Queued; 4];
        p.enqueue_burst(&mut b, &mut r, &[desc(0, 0, 100), desc(1, 3, 100), desc(2, 6, 100), desc(3, 7, 100)], &mut res);
        let out: Vec<u32> = drain(&mut p, &mut b, 0).iter().map(|d| d.pkt.0).collect();
        // 7, 6 strict; then the DRR classes that joined in that burst, highest class first.
        assert_eq!(out, vec![3, 2, 1, 0]);
        // One burst each: DRR classes join in arrival order.
        p.enqueue_burst(&mut b, &mut r, &[desc(4, 0, 100)], &mut res[..1]);
        p.enqueue_burst(&mut b, &mut r, &[desc(5, 3, 100)], &mut res[..1]);
        let out: Vec<u32> = drain(&mut p, &mut b, 0).iter().map(|d| d.pkt.0).collect();
        assert_eq!(out, vec![4, 5]);
    }

    #[test]
    fn drr_byte_shares_follow_weights_through_the_port() {
        let mut cfg = FlatPortConfig::default();
        let weights = [1u32, 2, 3, 4, 1, 1];
        for (c, w) in weights.iter().enumerate() {
            cfg.classes[c].sched = ClassSched::Drr { weight: *w };
        }
        let (mut p, mut b, mut r) = port(&cfg);
        let mut sent = [0u64; 6];
        let mut res = vec![Enq::Queued; 12];
        let mut out = vec![Desc::default(); 32];
        let mut id = 0;
        let mut seed = 7u64;
        // Two arrivals per class for three departures in all: every class stays backlogged.
        for _ in 0..20_000 {
            // Keep every class backlogged with random sizes.
            let batch: Vec<Desc> = (0..12)
                .map(|c| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    id += 1;
                    desc(id, (c % 6) as u8, 64 + (seed >> 33) as u32 % 1437)
                })
                .collect();
            p.enqueue_burst(&mut b, &mut r, &batch, &mut res);
            let n = p.dequeue_burst(&mut b, 3, 0, &mut out);
            for d in &out[..n] {
                sent[usize::from(d.class)] += u64::from(d.len_bytes);
            }
        }
        let total: u64 = sent.iter().sum();
        let wsum: u32 = weights.iter().sum();
        for c in 0..6 {
            let ideal = total as f64 * f64::from(weights[c]) / f64::from(wsum);
            assert!((sent[c] as f64 - ideal).abs() <= 1500.0 + f64::from(weights[c] * 1536), "class {c}: {} vs {ideal}", sent[c]);
        }
    }

    #[test]
    fn port_shaper_paces_and_reports_next_eligible() {
        let cfg = FlatPortConfig { shaper: Some(ShaperConfig::new(8_000_000, 1000)), ..FlatPortConfig::default() }; // 1 B/µs
        let (mut p, mut b, mut r) = port(&cfg);
        let pkts: Vec<Desc> = (0..5).map(|i| desc(i, 0, 500)).collect();
        let mut res = [Enq::Queued; 5];
        p.enqueue_burst(&mut b, &mut r, &pkts, &mut res);
        let mut out = [Desc::default(); 8];
        assert_eq!(p.dequeue_burst(&mut b, 8, 0, &mut out), 2, "burst of 1000 bytes");
        assert_eq!(p.next_eligible_ns(), Some(500_000));
        assert_eq!(p.dequeue_burst(&mut b, 8, 499_999, &mut out), 0);
        assert_eq!(p.dequeue_burst(&mut b, 8, 500_000, &mut out), 1);
        assert_eq!(p.dequeue_burst(&mut b, 8, 10_000_000, &mut out), 2);
        assert_eq!(p.next_eligible_ns(), None);
        // Longer than the burst: refused at enqueue, it could never leave.
        let mut res = [Enq::Queued; 1];
        p.enqueue_burst(&mut b, &mut r, &[desc(9, 0, 1001)], &mut res);
        assert_eq!(res[0], Enq::Dropped(TmDrop::Shaper));
        assert_eq!(p.port_counters().drops(TmDrop::Shaper), 1);
    }

    #[test]
    fn shaped_strict_queue_lets_lower_classes_through() {
        let mut cfg = FlatPortConfig::default();
        cfg.classes[7].shaper = Some(ShaperConfig::new(8_000_000, 100));
        let (mut p, mut b, mut r) = port(&cfg);
        let mut res = [Enq::Queued; 4];
        p.enqueue_burst(&mut b, &mut r, &[desc(0, 7, 100), desc(1, 7, 100), desc(2, 0, 100), desc(3, 0, 100)], &mut res);
        let out: Vec<u32> = drain(&mut p, &mut b, 0).iter().map(|d| d.pkt.0).collect();
        assert_eq!(out, vec![0, 2, 3]);
        assert_eq!(p.next_eligible_ns(), Some(100_000));
        assert_eq!(drain(&mut p, &mut b, 100_000).len(), 1);
    }

    #[test]
    fn wred_marks_ect_and_drops_not_ect_between_thresholds_and_drops_all_above() {
        let mut cfg = FlatPortConfig::default();
        cfg.classes[0] = ClassConfig {
            wred: Some(WredConfig { min_bytes: 10_000, max_bytes: 20_000, maxp_inv: 1, weight_log2: 1, ecn: true }),
            ring_pkts: 4096,
            ..ClassConfig::default()
        };
        let (mut p, mut b, mut r) = port(&cfg);
        let mut res = [Enq::Queued; 1];
        // Fill to 15,000 bytes (the average follows closely with weight 1/2).
        let mut id = 0;
        while p.queue_counters(0).unwrap().occ_bytes < 15_000 {
            p.enqueue_burst(&mut b, &mut r, &[desc(id, 0, 100)], &mut res);
            id += 1;
        }
        let before = p.queue_counters(0).unwrap();
        let (mut marked, mut dropped) = (0, 0);
        for i in 0..2000 {
            let ect = i % 2 == 0;
            let d = Desc { ecn: if ect { ECT0 } else { NOT_ECT }, ..desc(100_000 + i, 0, 100) };
            p.enqueue_burst(&mut b, &mut r, &[d], &mut res);
            match res[0] {
                Enq::Marked => {
                    assert!(ect);
                    marked += 1;
                    // Keep the queue where it is.
                    let mut out = [Desc::default(); 1];
                    p.dequeue_burst(&mut b, 1, 0, &mut out);
                }
                Enq::Dropped(TmDrop::Wred) => {
                    assert!(!ect, "ECT dropped between thresholds");
                    dropped += 1;
                }
                Enq::Queued => {
                    let mut out = [Desc::default(); 1];
                    p.dequeue_burst(&mut b, 1, 0, &mut out);
                }
                other => panic!("{other:?}"),
            }
        }
        // p ≈ (15000 − 10000)/10000 = 0.5 for each half.
        assert!((400..=600).contains(&marked) && (400..=600).contains(&dropped), "marked {marked} dropped {dropped}");
        let after = p.queue_counters(0).unwrap();
        assert_eq!(after.ecn_marks - before.ecn_marks, marked);
        assert_eq!(after.drops(TmDrop::Wred) - before.drops(TmDrop::Wred), dropped);
        // Above max: everything is dropped, ECT or not.
        while p.wred_avg_bytes(0) < 20_000 {
            p.enqueue_burst(&mut b, &mut r, &[desc(id, 0, 100)], &mut res);
            id += 1;
        }
        for ecn in [ECT0, NOT_ECT] {
            p.enqueue_burst(&mut b, &mut r, &[Desc { ecn, ..desc(id, 0, 100) }], &mut res);
            assert_eq!(res[0], Enq::Dropped(TmDrop::Wred));
        }
    }

    #[test]
    fn tail_drop_threshold_and_counters() {
        let mut cfg = FlatPortConfig::default();
        cfg.classes[1].ring_pkts = 4;
        cfg.classes[2].alpha_log2 = -1; // α = 1/2
        let mut p = FlatPort::new(&cfg);
        let mut b = SharedBuffer::new(3000, 1000, 0);
        let mut r = Rng::new(1);
        let mut res = [Enq::Queued; 6];
        let pk: Vec<Desc> = (0..6).map(|i| desc(i, 1, 10)).collect();
        p.enqueue_burst(&mut b, &mut r, &pk, &mut res);
        assert_eq!(res[4], Enq::Dropped(TmDrop::QueueFull));
        // Class 2 alone with α = 1/2 stops at about a third of the (almost) free buffer.
        let pk: Vec<Desc> = (10..40).map(|i| desc(i, 2, 100)).collect();
        let mut res = [Enq::Queued; 30];
        p.enqueue_burst(&mut b, &mut r, &pk, &mut res);
        let c2 = p.queue_counters(2).unwrap();
        assert_eq!(c2.occ_bytes, 1000);
        assert_eq!(c2.drops(TmDrop::Threshold), 20);
        assert_eq!(c2.hwm_bytes, 1000);
        p.enqueue_burst(&mut b, &mut r, &[desc(50, 9, 100)], &mut res);
        assert_eq!(res[0], Enq::Dropped(TmDrop::NoQueue));
        let pc = p.port_counters();
        assert_eq!((pc.enq_pkts, pc.drops(TmDrop::QueueFull), pc.drops(TmDrop::NoQueue)), (14, 2, 1));
    }
}
