//! The batch executor: runs a compiled plan over a batch, one dynamic dispatch per stage.
//!
//! ```text
//!  batch ─▶ parser ─▶ ingress steps ─▶ (traffic manager) ─▶ egress steps ─▶ end: Tx(out_port)
//!                     │ Mask{dst,src,cond}: dst = src ∩ live ∩ {i | cond(i)}     or Drop(no_verdict)
//!                     │ AndNot{dst,src,sub}: dst = src ∖ sub        (if / elif / else)
//!                     │ Run{mask, stage}: stage.run(batch, mask ∩ live)
//!                     │ Fused{mask, pre, stage}: pre then stage in stage's own pass
//!                     │ Tailed{mask, stage, post}: stage then post in stage's own pass
//!                     └ Absorbed{mask, stage, absorbed}: stage, which does absorbed's work too
//! ```
//! Branches become lane masks, so every stage still runs once per batch over the packets its
//! guard selects. Per stage the executor keeps calls, packets in and out, drops by reason and
//! TSC cycles (two `rdtsc` per stage per batch).

use crate::action;
use crate::field::Extract;
use crate::ir::FdbDef;
use crate::ir::{CmpOp, CondC, MetaField, Program};
use crate::objects::Objects;
use crate::table::ops::TableOps;
use crate::table::KeyMemo;
use crate::trace::{Trace, TraceRec};
use fastpath_packet::each_lane;
use fastpath_packet::prefetch::cycles;
use fastpath_packet::{Batch, DropReason, Hdr, Lanes, Meta, PktId, Pool, Slot, Verdict, BATCH_MAX, FLOOD_PORT, NO_PORT};
use fastpath_tm::{Desc, Enq, Tm};

/// Everything a stage may touch besides the batch and the pool.
pub struct StageCx<'a> {
    /// Time of this batch (ns, from the worker's clock).
    pub now_ns: u64,
    /// The running stage's drop counters.
    pub drops: &'a mut [u64; DropReason::COUNT],
    /// Meters and counters.
    pub objects: &'a mut Objects,
    /// Lanes being traced in this batch (empty when tracing is off).
    pub trace_lanes: Lanes,
    /// Trace records of this batch (only written for `trace_lanes`).
    pub trace: &'a mut Vec<(usize, TraceRec)>,
    /// Classifier keys one table read for the next ([`Stage::share_acl_key`]).
    pub(crate) acl_keys: &'a mut KeyMemo,
}

impl StageCx<'_> {
    /// Drops slot `i` for `reason`, counting it.
    #[inline]
    pub fn drop(&mut self, b: &mut Batch, i: usize, reason: DropReason) {
        b.drop(i, reason);
        self.drops[reason as usize] += 1;
    }
    /// True when some packet of this batch is traced.
    #[inline]
    pub fn tracing(&self) -> bool {
        !self.trace_lanes.is_empty()
    }
    /// Records `rec` for slot `i` if it is traced.
    #[inline]
    pub fn trace(&mut self, i: usize, rec: TraceRec) {
        if self.trace_lanes.contains(i) {
            self.trace.push((i, rec));
        }
    }
    /// The action-primitive context for this stage.
    #[inline]
    pub fn action_ctx(&mut self) -> action::Ctx<'_> {
        action::Ctx { drops: self.drops, objects: self.objects, now_ns: self.now_ns }
    }
}

/// A pipeline stage: takes the lanes of a batch its guard selected, writes verdicts.
pub trait Stage: Send {
    /// Processes `lanes` (all live) of the batch.
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>);
    /// One line for `show plan`: what the stage does, with resolved offsets.
    fn describe(&self) -> String;
    /// The table behind this stage, for the control plane.
    fn table(&mut self) -> Option<&mut dyn TableOps> {
        None
    }
    /// The table behind this stage, read-only.
    fn table_ref(&self) -> Option<&dyn TableOps> {
        None
    }
    /// Whether [`Stage::run_with_pre`] runs `pre` inside this stage's own per-packet pass (the
    /// build step then fuses a `pre` stage that runs just before this one on the same lanes:
    /// [`Step::Fused`]).
    fn folds(&self, _pre: PreOp) -> bool {
        false
    }
    /// Runs `pre` on each packet of `lanes` and this stage on the packets `pre` kept, counting
    /// `pre`'s drops in its stage's counters; returns the lanes `pre` kept. The same results as
    /// running `pre`'s stage over `lanes` and then this one, packet for packet: `pre` touches
    /// only its own packet, and each packet still meets `pre` before this stage reads it.
    fn run_with_pre(&mut self, pre: Pre<'_>, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) -> Lanes {
        run_apart(self, pre, pool, b, lanes, cx)
    }
    /// Whether [`Stage::run_with_post`] may run `post` inside this stage's own per-packet pass
    /// (the build step then fuses a `post` stage that runs just after this one on the same
    /// lanes: [`Step::Tailed`]).
    fn folds_post(&self, _post: PostCount) -> bool {
        false
    }
    /// Runs this stage on `lanes` and `post` on each packet it leaves live, counting `post`'s
    /// drops in `post.drops` and its lanes in `post.dropped`. The same results as running this
    /// stage over `lanes` and then `post`'s stage over the lanes left live, packet for packet:
    /// `post` touches only its own packet, after this stage is done with it.
    fn run_with_post(&mut self, post: &mut Post<'_>, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        self.run(pool, b, lanes, cx);
        post.run(cx.objects, pool, b, lanes.and(b.live()));
    }
    /// Takes the part `share` gives this stage in reading a classifier key once for two tables
    /// (chosen by [`crate::build::special::share_acl_keys`]); false when the stage cannot (it is
    /// not a classifier table on the specialised path), and then nothing changed.
    fn share_acl_key(&mut self, _share: KeyShare) -> bool {
        false
    }
}

/// A classifier table's part in reading one key for two tables ([`Stage::share_acl_key`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyShare {
    /// Reads its own keys.
    Alone,
    /// Records the keys it reads, as stage `.0`, for the next table.
    Lend(usize),
    /// Takes its keys from stage `.0`'s record when it covers the lanes.
    Borrow(usize),
    /// Takes its 5-tuple from the parser's record (`aclkey::ParsedTuple`) when it covers the
    /// lanes: the table runs right after the parser.
    Parsed,
}

/// [`Stage::run_with_pre`] for a stage that does not fold `pre`: `pre` over `lanes`, then the
/// stage over the lanes it kept.
pub(crate) fn run_apart<S: Stage + ?Sized>(
    s: &mut S,
    pre: Pre<'_>,
    pool: &mut Pool,
    b: &mut Batch,
    lanes: Lanes,
    cx: &mut StageCx<'_>,
) -> Lanes {
    let kept = pre.op.run(pool, b, lanes, pre.drops);
    if !kept.is_empty() {
        s.run(pool, b, kept, cx);
    }
    kept
}

/// The primitive a fused step runs first, and its stage's drop counters.
pub struct Pre<'a> {
    /// The primitive.
    pub op: PreOp,
    /// Its stage's drops by reason.
    pub drops: &'a mut [u64; DropReason::COUNT],
}

/// A per-packet primitive that a stage may run in its own pass ([`Stage::folds`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreOp {
    /// `ttl_dec` / `hop_limit_dec` ([`action::ttl_dec`]; drops `ttl_expired`).
    TtlDec,
}

impl PreOp {
    /// Applies the primitive to one packet; `Err(reason)` when the packet is to be dropped.
    #[inline(always)]
    pub fn apply(self, data: &mut [u8], m: &Meta) -> Result<(), DropReason> {
        match self {
            PreOp::TtlDec => action::ttl_dec(data, m).then_some(()).ok_or(DropReason::TtlExpired),
        }
    }

    /// Applies it to every packet of `lanes` on its own; returns the lanes it kept.
    pub fn run(self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, drops: &mut [u64; DropReason::COUNT]) -> Lanes {
        let mut kept = lanes;
        each_lane!(i in lanes => {
            if let Err(reason) = self.apply(pool.data_mut(b.handle(i)), b.meta(i)) {
                b.drop(i, reason);
                drops[reason as usize] += 1;
                kept.remove(i);
            }
        });
        kept
    }
}

/// Where a `ttl_dec` runs beside a count ([`PostCount`], [`crate::stages::prims::CountStage`]):
/// a packet it drops (`ttl_expired`) is counted only when the count came first, as when the
/// two run apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TtlDec {
    /// No `ttl_dec`.
    No,
    /// `ttl_dec; count`.
    Before,
    /// `count; ttl_dec`.
    After,
}

/// One packet's count in `values[k]` (an index out of range counts nothing) and its `ttl_dec`
/// (`TTL`: 0 none, 1 before the count, 2 after); false when the `ttl_dec` drops it.
#[inline(always)]
pub fn count_ttl<const TTL: u8>(values: &mut [(u64, u64)], k: usize, data: &mut [u8], m: &Meta) -> bool {
    let len = data.len() as u64;
    let count = |values: &mut [(u64, u64)]| {
        if let Some(v) = values.get_mut(k) {
            v.0 += 1;
            v.1 += len;
        }
    };
    if TTL == 2 {
        count(values);
    }
    if TTL != 0 && !action::ttl_dec(data, m) {
        return false;
    }
    if TTL != 2 {
        count(values);
    }
    true
}

/// [`count_ttl`] on each packet of `lanes`, counter index `index`; drops the packets whose
/// `ttl_dec` fails (`ttl_expired`) and returns them.
#[inline(always)]
pub fn count_pass<const TTL: u8>(
    values: &mut [(u64, u64)],
    pool: &mut Pool,
    b: &mut Batch,
    lanes: Lanes,
    index: impl Fn(&Meta) -> u32,
) -> Lanes {
    let mut expired = Lanes::NONE;
    each_lane!(i in lanes => {
        let m = b.meta(i);
        if !count_ttl::<TTL>(values, index(m) as usize, pool.data_mut(b.handle(i)), m) {
            b.drop(i, DropReason::TtlExpired);
            expired.insert(i);
        }
    });
    expired
}

/// `count C meta.R`, with a `ttl_dec` before or after it or none: the work of a
/// [`crate::stages::prims::CountStage`] indexed by a register, which a stage may run at the end
/// of its own per-packet pass ([`Stage::folds_post`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostCount {
    /// Counter array.
    pub counter: u16,
    /// The register that holds the index.
    pub reg: u8,
    /// Where a `ttl_dec` runs.
    pub ttl: TtlDec,
}

/// The count a fused step runs last, its stage's drop counters and the packets it dropped.
pub struct Post<'a> {
    /// The count.
    pub op: PostCount,
    /// Its stage's drops by reason.
    pub drops: &'a mut [u64; DropReason::COUNT],
    /// The packets its `ttl_dec` dropped.
    pub dropped: Lanes,
}

impl Post<'_> {
    /// Runs the count on `lanes` in a pass of its own.
    pub fn run(&mut self, objects: &mut Objects, pool: &mut Pool, b: &mut Batch, lanes: Lanes) {
        let Some(bank) = objects.counters.get_mut(usize::from(self.op.counter)) else { return };
        let r = usize::from(self.op.reg);
        let index = |m: &Meta| m.regs.get(r).copied().unwrap_or(0);
        let expired = match self.op.ttl {
            TtlDec::No => count_pass::<0>(&mut bank.values, pool, b, lanes, index),
            TtlDec::Before => count_pass::<1>(&mut bank.values, pool, b, lanes, index),
            TtlDec::After => count_pass::<2>(&mut bank.values, pool, b, lanes, index),
        };
        self.expired(expired);
    }

    /// Records the packets the count's `ttl_dec` dropped.
    #[inline]
    pub fn expired(&mut self, lanes: Lanes) {
        self.drops[DropReason::TtlExpired as usize] += lanes.count() as u64;
        self.dropped = self.dropped.or(lanes);
    }
}

/// One step of a compiled control block.
pub enum Step {
    /// `masks[dst] = masks[src] ∩ live ∩ cond`.
    Mask {
        /// Destination register.
        dst: u8,
        /// Source register.
        src: u8,
        /// The condition.
        cond: CondC,
    },
    /// `masks[dst] = masks[src] ∖ masks[sub]`.
    AndNot {
        /// Destination register.
        dst: u8,
        /// Source register.
        src: u8,
        /// Register to remove.
        sub: u8,
    },
    /// Run stage `stage` over `masks[mask] ∩ live`.
    Run {
        /// Guard register.
        mask: u8,
        /// Index into the pipeline's stages.
        stage: usize,
    },
    /// `Run { mask, stage: pre_stage }` then `Run { mask, stage }`, where `pre_stage` is the
    /// primitive `pre` and `stage` folds it into its own pass ([`Stage::run_with_pre`]; chosen by
    /// [`crate::build::special::fuse_steps`]). Counters are kept for both stages as if they ran
    /// apart; `pre`'s cycles count in `stage`'s. A traced batch runs them apart.
    Fused {
        /// Guard register.
        mask: u8,
        /// The primitive.
        pre: PreOp,
        /// Its stage (for counters and traces).
        pre_stage: usize,
        /// The stage that runs it.
        stage: usize,
    },
    /// `Run { mask, stage }` then `Run { mask, stage: post_stage }`, where `post_stage` is the
    /// count `post` and `stage` runs it in its own pass ([`Stage::run_with_post`]; chosen by
    /// [`crate::build::special::fuse_steps`]). Counters are kept for both stages as if they ran
    /// apart; `post`'s cycles count in `stage`'s. A traced batch runs them apart.
    Tailed {
        /// Guard register.
        mask: u8,
        /// The stage that runs.
        stage: usize,
        /// The count.
        post: PostCount,
        /// Its stage (for counters and traces).
        post_stage: usize,
    },
    /// `Run { mask, stage }` then `Run { mask, stage: absorbed }`, where `stage` does
    /// `absorbed`'s work in its own pass and `absorbed` drops nothing (the parser that sets
    /// the traffic manager's class: [`crate::stages::parser::Parser::with_dscp_classes`]).
    /// `absorbed`'s counters are kept as if it ran on the packets `stage` left live. A traced
    /// batch runs both, so each has its trace record.
    Absorbed {
        /// Guard register.
        mask: u8,
        /// The stage that runs.
        stage: usize,
        /// The stage whose work it did.
        absorbed: usize,
    },
}

/// Counters of one stage. Summed by whoever reads them; written only by the worker.
#[derive(Clone, Debug)]
pub struct StageStats {
    /// Times the stage ran (batches with at least one lane for it).
    pub calls: u64,
    /// Packets handed to it.
    pub pkts_in: u64,
    /// Packets still live after it.
    pub pkts_out: u64,
    /// TSC cycles spent in it.
    pub cycles: u64,
    /// Drops by reason.
    pub drops: [u64; DropReason::COUNT],
}

impl Default for StageStats {
    fn default() -> Self {
        StageStats { calls: 0, pkts_in: 0, pkts_out: 0, cycles: 0, drops: [0; DropReason::COUNT] }
    }
}

/// A compiled, runnable pipeline: stages, the two control programs, objects and counters.
pub struct Pipeline {
    pub(crate) name: String,
    pub(crate) stages: Vec<Box<dyn Stage>>,
    pub(crate) stage_names: Vec<String>,
    pub(crate) stats: Vec<StageStats>,
    pub(crate) ingress: Vec<Step>,
    pub(crate) egress: Vec<Step>,
    pub(crate) masks: Vec<Lanes>,
    pub(crate) objects: Objects,
    pub(crate) end_stats: StageStats,
    pub(crate) trace: Trace,
    pub(crate) trace_buf: Vec<(usize, TraceRec)>,
    /// Classifier keys one table read for the next, this batch ([`KeyShare`]).
    pub(crate) acl_keys: KeyMemo,
    pub(crate) program: Program,
    /// Built with the specialised paths ([`crate::build::BuildOptions`]).
    pub(crate) special: bool,
    /// The traffic manager (`[tm]`), between ingress and egress.
    pub(crate) tm: Option<Tm>,
    /// The traffic manager's row of the counters: offered, queued, refused by reason, and the
    /// cycles of enqueue and dequeue.
    pub(crate) tm_stats: StageStats,
    /// Scratch for one port's enqueue burst, and for one dequeue.
    pub(crate) tm_in: Box<[Desc; BATCH_MAX]>,
    pub(crate) tm_res: Box<[Enq; BATCH_MAX]>,
    pub(crate) tm_out: Box<[Desc; BATCH_MAX]>,
    /// The `l2_switch` table's VLANs, for flooding at enqueue.
    pub(crate) flood: Option<FdbDef>,
    /// Some class has WRED: the enqueue reads each packet's ECN field.
    pub(crate) tm_ecn: bool,
    /// The metadata field that holds a packet's HQoS pipe (`[tm] pipe`).
    pub(crate) tm_pipe: Option<crate::ir::MetaField>,
}

/// Its name and stages (the tables and objects are too big to print; see
/// [`Pipeline::show_plan`]).
impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline").field("name", &self.name).field("stages", &self.stage_names).finish_non_exhaustive()
    }
}

impl Pipeline {
    /// The pipeline's name from its spec.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs one received batch: the parser and the ingress program, then
    /// - without a traffic manager, the egress program on the same batch: afterwards every
    ///   packet has a final verdict (`Tx`, `Drop` or `Punt`);
    /// - with one (`[tm]`), the forwarded packets go to their port's queues instead: each is
    ///   `Queued(port)` or dropped with the traffic manager's reason, and leaves later through
    ///   [`Pipeline::egress`].
    ///
    /// The caller acts on the verdicts. Worker only; never allocates unless tracing is on.
    pub fn process(&mut self, pool: &mut Pool, b: &mut Batch, now_ns: u64) {
        let trace_lanes = self.trace.lanes_for(b.len());
        if !trace_lanes.is_empty() {
            self.trace.begin_batch(pool, b, trace_lanes);
        }
        self.masks[0] = b.live();
        self.objects.ct_changes = 0;
        run_steps(self, false, pool, b, now_ns, trace_lanes);
        if self.tm.is_some() {
            let t0 = cycles();
            self.enqueue(pool, b, now_ns, trace_lanes);
            self.tm_stats.cycles += cycles().wrapping_sub(t0);
        } else {
            self.run_egress(pool, b, now_ns, trace_lanes);
        }
        if !trace_lanes.is_empty() {
            self.trace.end_batch(b, trace_lanes, &self.trace_buf, &self.stage_names, &self.program);
            self.trace_buf.clear();
        }
    }

    /// Takes the packets that may leave `port` now from the traffic manager (at most a batch,
    /// in its scheduling order, within the shapers' rates), runs the egress program on them
    /// (after parsing them again, when there is one: egress has its own parser, as in PSA) and
    /// leaves each with a final verdict, `Tx(port)` for those egress kept. Returns how many it
    /// took; 0 without a traffic manager. `b` is cleared first. Worker only; never allocates.
    pub fn egress(&mut self, port: u16, pool: &mut Pool, b: &mut Batch, now_ns: u64) -> usize {
        b.clear();
        let Some(tm) = self.tm.as_mut() else { return 0 };
        let t0 = cycles();
        let n = tm.dequeue_burst(usize::from(port), BATCH_MAX, now_ns, &mut self.tm_out[..]);
        if self.egress.is_empty() {
            // Nothing runs after the traffic manager: each packet leaves as it is, so the batch
            // gets handles and verdicts and no metadata.
            b.set_finished(self.tm_out[..n].iter().map(|d| d.pkt), Verdict::Tx(port));
            self.end_stats.pkts_in += n as u64;
            self.tm_stats.cycles += cycles().wrapping_sub(t0);
            return n;
        }
        for d in &self.tm_out[..n] {
            b.push(d.pkt, d.user);
        }
        self.tm_stats.cycles += cycles().wrapping_sub(t0);
        if n == 0 {
            return 0;
        }
        self.objects.ct_changes = 0;
        // Egress parses the packets again first (stage 0, the parser).
        let st = &mut self.stats[0];
        let mut trace = Vec::new();
        let mut cx = StageCx {
            now_ns,
            drops: &mut st.drops,
            objects: &mut self.objects,
            trace_lanes: Lanes::NONE,
            trace: &mut trace,
            acl_keys: &mut self.acl_keys,
        };
        self.stages[0].run(pool, b, b.live(), &mut cx);
        for (i, d) in self.tm_out[..n].iter().enumerate() {
            let m = b.meta_mut(i);
            m.out_port = port;
            m.tc = d.class;
        }
        self.run_egress(pool, b, now_ns, Lanes::NONE);
        n
    }

    /// True when the spec has a traffic manager (`[tm]`): forwarded packets leave through
    /// [`Pipeline::egress`].
    pub fn has_tm(&self) -> bool {
        self.tm.is_some()
    }

    /// The traffic manager, read-only (counters, occupancy).
    pub fn tm(&self) -> Option<&Tm> {
        self.tm.as_ref()
    }

    /// The earliest time (ns) at which a packet the traffic manager holds may leave, over all
    /// ports; `None` when it holds none (or there is no `[tm]`).
    pub fn next_due_ns(&self) -> Option<u64> {
        let tm = self.tm.as_ref()?;
        (0..tm.ports()).filter_map(|p| tm.next_eligible_ns(p)).min()
    }

    /// Packets the traffic manager holds, over all ports.
    pub fn tm_backlog(&self) -> u64 {
        self.tm.as_ref().map_or(0, |t| u64::from(t.buffer().used_pkts()))
    }

    /// Rebuilds the traffic manager for `ports` ports (port ids 0..ports). Call before traffic
    /// flows; packets still queued are forgotten (the caller frees its pool). Without `[tm]`,
    /// nothing happens.
    ///
    /// # Errors
    /// A `[[tm.port]]` naming a port at or above `ports`, or a configuration the traffic
    /// manager refuses.
    pub fn set_ports(&mut self, ports: usize) -> Result<(), String> {
        let Some(def) = &self.program.tm else { return Ok(()) };
        if let Some((p, _)) = def.shapers.iter().find(|(p, _)| usize::from(*p) >= ports) {
            return Err(format!("[[tm.port]] port {p}: there are only {ports} ports (ids 0 to {})", ports.saturating_sub(1)));
        }
        self.tm = Some(Tm::build(&def.config(ports)).map_err(|e| format!("[tm]: {e}"))?);
        Ok(())
    }

    /// Egress and the end of the pipeline over the forwarded live packets of `b`.
    fn run_egress(&mut self, pool: &mut Pool, b: &mut Batch, now_ns: u64, trace_lanes: Lanes) {
        // Egress sees only forwarded packets.
        if !self.egress.is_empty() {
            let mut fwd = Lanes::NONE;
            for i in b.live() {
                if b.meta(i).out_port != NO_PORT {
                    fwd.insert(i);
                }
            }
            self.masks[0] = fwd;
            run_steps(self, true, pool, b, now_ns, trace_lanes);
        }
        // End: forwarded packets leave; the rest had no verdict.
        let live = b.live();
        let e = &mut self.end_stats;
        e.pkts_in += live.count() as u64;
        let mut unforwarded = 0u64;
        each_lane!(i in live => {
            let p = b.meta(i).out_port;
            let v = if p != NO_PORT { Verdict::Tx(p) } else { Verdict::Drop(DropReason::NoVerdict) };
            unforwarded += u64::from(p == NO_PORT);
            b.finish(i, v);
        });
        b.clear_live();
        e.drops[DropReason::NoVerdict as usize] += unforwarded;
    }

    /// The traffic manager's enqueue, after ingress: forwarded packets are offered to their
    /// port's queues, one burst per port; the rest had no verdict.
    fn enqueue(&mut self, pool: &mut Pool, b: &mut Batch, now_ns: u64, trace_lanes: Lanes) {
        let Some(tm) = self.tm.as_mut() else { return };
        let mut todo = b.live();
        let s = &mut self.tm_stats;
        s.calls += 1;
        let ecn = self.tm_ecn;
        // Most batches go to one port: one pass per port in the batch gathers its packets'
        // descriptors densely and leaves the other ports' lanes for the next pass.
        while let Some(first) = todo.into_iter().next() {
            let port = b.meta(first).out_port;
            if port == NO_PORT {
                let mut rest = Lanes::NONE;
                let mut unforwarded = 0u64;
                for i in todo {
                    if b.meta(i).out_port == NO_PORT {
                        b.finish(i, Verdict::Drop(DropReason::NoVerdict));
                        unforwarded += 1;
                    } else {
                        rest.insert(i);
                    }
                }
                todo = rest;
                self.end_stats.pkts_in += unforwarded;
                self.end_stats.drops[DropReason::NoVerdict as usize] += unforwarded;
                continue;
            }
            if port == FLOOD_PORT {
                todo.remove(first);
                s.pkts_in += 1;
                let to = FloodTo { tm, stats: s, fdb: self.flood.as_ref(), ecn };
                let r = flood(to, pool, b, first, now_ns);
                if let (true, Some((port, class, enq))) = (trace_lanes.contains(first), r) {
                    let queue_bytes = tm.queue_counters(usize::from(port), usize::from(class)).map_or(0, |c| c.occ_bytes);
                    self.trace_buf.push((first, TraceRec::Tm { port, class, enq, queue_bytes }));
                }
                continue;
            }
            let mut lanes = [0u8; BATCH_MAX];
            let tm_in = &mut *self.tm_in;
            macro_rules! by_ecn {
                ($pipe:expr) => {
                    if ecn {
                        gather::<true>(pool, b, todo, port, $pipe, tm_in, &mut lanes)
                    } else {
                        gather::<false>(pool, b, todo, port, $pipe, tm_in, &mut lanes)
                    }
                };
            }
            let (n, rest) = match self.tm_pipe {
                None => by_ecn!(|_| 0),
                // A subscriber's pipe in a register (vbng's `meta.sub`): one load.
                Some(crate::ir::MetaField::Reg(r)) => {
                    let r = usize::from(r);
                    by_ecn!(|m| m.regs.get(r).copied().unwrap_or(0))
                }
                Some(f) => by_ecn!(|m| crate::field::read_meta(m, f)),
            };
            todo = rest;
            s.pkts_in += n as u64;
            let (tm_in, res) = (&self.tm_in[..n], &mut self.tm_res[..n]);
            tm.enqueue_burst(usize::from(port), tm_in, now_ns, res);
            let lanes = &lanes[..n];
            // A fold, not `all`: without the early exit the test is a few vector instructions
            // per 32 results instead of a compare and branch per packet.
            if res.iter().fold(true, |all, &r| all & (r == Enq::Queued)) {
                // Every packet taken, none marked (an uncongested port): only verdicts to write.
                for &i in lanes {
                    b.finish(usize::from(i), Verdict::Queued(port));
                }
                s.pkts_out += n as u64;
            } else {
                for (&i, &r) in lanes.iter().zip(res.iter()) {
                    let i = usize::from(i);
                    let v = match settle(s, pool, b.handle(i), b.meta(i), r) {
                        None => Verdict::Queued(port),
                        Some(reason) => Verdict::Drop(reason),
                    };
                    b.finish(i, v);
                }
            }
            if !trace_lanes.is_empty() {
                for (k, &i) in lanes.iter().enumerate() {
                    let i = usize::from(i);
                    if trace_lanes.contains(i) {
                        let class = tm_in[k].class;
                        let queue_bytes = tm.queue_counters(usize::from(port), usize::from(class)).map_or(0, |c| c.occ_bytes);
                        self.trace_buf.push((i, TraceRec::Tm { port, class, enq: res[k], queue_bytes }));
                    }
                }
            }
        }
        b.clear_live();
    }

    /// Names of the stages in plan order.
    pub fn stage_names(&self) -> &[String] {
        &self.stage_names
    }

    /// Counters of each stage, in plan order, then the traffic manager's (`tm`, when there is
    /// one) and the final `end` pseudo-stage.
    pub fn stats(&self) -> Vec<(String, StageStats)> {
        let mut v: Vec<_> = self.stage_names.iter().cloned().zip(self.stats.iter().cloned()).collect();
        if self.tm.is_some() {
            v.push(("tm".to_string(), self.tm_stats.clone()));
        }
        v.push(("end".to_string(), self.end_stats.clone()));
        v
    }

    /// Zeroes every stage counter.
    pub fn reset_stats(&mut self) {
        for s in &mut self.stats {
            *s = StageStats::default();
        }
        self.end_stats = StageStats::default();
        self.tm_stats = StageStats::default();
    }

    /// Asks for the next `n` packets to be traced.
    pub fn trace_next(&mut self, n: usize) {
        self.trace.arm(n);
    }

    /// Formatted trace of the packets traced so far (VPP style), and clears it.
    pub fn take_trace(&mut self) -> String {
        self.trace.take()
    }

    /// The meters and counters, for the control plane.
    pub fn objects_mut(&mut self) -> &mut Objects {
        &mut self.objects
    }

    /// The meters and counters.
    pub fn objects(&self) -> &Objects {
        &self.objects
    }

    /// One line per stage: name and description (offsets, tables, actions).
    pub fn show_plan(&self) -> String {
        let mut s = String::new();
        for (n, st) in self.stage_names.iter().zip(&self.stages) {
            s.push_str(&format!("{n:<16} {}\n", st.describe()));
        }
        s
    }
}

/// The lanes of `src` whose packet satisfies `cond`, as [`CondC::eval`] decides, with the
/// condition taken apart once per batch instead of per packet: `not`, `and` and `or` become
/// lane-mask algebra (`and` and `or` evaluate their second operand only on the lanes that still
/// need it, as the short-circuit does), and each leaf runs a loop of its own shape: header
/// validity, a table's hit bit, a metadata comparison, or a comparison of fields of at most 64
/// bits (with a constant or with another field) read by their extractors in 64-bit arithmetic.
/// Anything else is evaluated per packet.
fn cond_mask(cond: &CondC, src: Lanes, pool: &Pool, b: &Batch) -> Lanes {
    if src.is_empty() {
        return src;
    }
    // A comparison operator matched once per batch, the loop monomorphised for it.
    // `$meta`: the test reads only metadata ([`lanes_where`]'s `META_ONLY`).
    macro_rules! by_op {
        ($meta:literal, $op:expr, |$i:ident, $o:ident| $holds:expr) => {
            match $op {
                CmpOp::Eq => lanes_where::<$meta>(src, |$i| {
                    let $o = |x, y| x == y;
                    $holds
                }),
                CmpOp::Ne => lanes_where::<$meta>(src, |$i| {
                    let $o = |x, y| x != y;
                    $holds
                }),
                op => lanes_where::<$meta>(src, |$i| {
                    let $o = |x, y| op.holds(x, y);
                    $holds
                }),
            }
        };
    }
    let narrow = |f: &crate::ir::FieldRef| f.width <= 64;
    match cond {
        CondC::Not(c) => src.and_not(cond_mask(c, src, pool, b)),
        CondC::And(x, y) => cond_mask(y, cond_mask(x, src, pool, b), pool, b),
        CondC::Or(x, y) => {
            let first = cond_mask(x, src, pool, b);
            first.or(cond_mask(y, src.and_not(first), pool, b))
        }
        CondC::Valid(need) => {
            let need = *need;
            lanes_where::<true>(src, |i| b.meta(i).valid.has_all(need))
        }
        CondC::Hit(t) => {
            let t = u32::from(*t);
            lanes_where::<true>(src, |i| b.meta(i).hits >> t & 1 != 0)
        }
        // `ct.new`, `meta.color == 1`: metadata only, one comparison.
        CondC::MetaCmp(f, op, v) => {
            let (f, v) = (*f, *v);
            match f {
                MetaField::CtFlag(n) => by_op!(true, *op, |i, o| o(u32::from(b.meta(i).reserved >> n & 1), v)),
                MetaField::CtVerdict => by_op!(true, *op, |i, o| o(u32::from(b.meta(i).reserved >> 8), v)),
                MetaField::Color => by_op!(true, *op, |i, o| o(u32::from(b.meta(i).color), v)),
                MetaField::Reg(r) => by_op!(true, *op, |i, o| o(b.meta(i).regs.get(usize::from(r)).copied().unwrap_or(0), v)),
                _ => by_op!(true, *op, |i, o| o(crate::field::read_meta(b.meta(i), f), v)),
            }
        }
        // `udp.dport == 67`: a missing field is false.
        CondC::Cmp(f, op, v) if narrow(f) && *v <= u128::from(u64::MAX) => {
            let (x, v) = (f.extractor(), *v as u64);
            match x {
                // A 16-bit field (a port): the variant named, so the read is inline in the
                // loop, without a jump on the extractor per packet.
                Extract::Be16 { slot, byte, needs, alt } => by_op!(false, *op, |i, o| {
                    let x = Extract::Be16 { slot, byte, needs, alt };
                    x.read64(pool.data(b.handle(i)), b.meta(i)).is_some_and(|a| o(a, v))
                }),
                x => by_op!(false, *op, |i, o| x.read64(pool.data(b.handle(i)), b.meta(i)).is_some_and(|a| o(a, v))),
            }
        }
        // `ipv4.src != meta.sip`: false when either is missing.
        CondC::FieldCmp(fa, op, fb) if narrow(fa) && narrow(fb) => match (fa.extractor(), fb.extractor()) {
            // A 32-bit header field against a register (vbng's anti-spoofing, `ipv4.src !=
            // meta.sip`): the variants named, so both reads are inline in the loop. With the
            // generic arm below its closure stayed out of line, a call per packet and a jump on
            // the extractor (`scripts/instructions -n 100000 vbng --subscribers 256000 --size
            // 1400`: 734.2 → 730.6, about 32 instructions per upstream packet).
            (Extract::Be32 { slot, byte, needs, alt }, Extract::Reg(r)) => {
                let r = usize::from(r);
                by_op!(false, *op, |i, o| {
                    let m = b.meta(i);
                    // Built here, in the closure, so that its variant is a constant there.
                    let xa = Extract::Be32 { slot, byte, needs, alt };
                    xa.read64(pool.data(b.handle(i)), m).is_some_and(|a| o(a, u64::from(m.regs.get(r).copied().unwrap_or(0))))
                })
            }
            (xa, xb) => by_op!(false, *op, |i, o| {
                let (d, m) = (pool.data(b.handle(i)), b.meta(i));
                match (xa.read64(d, m), xb.read64(d, m)) {
                    (Some(a), Some(c)) => o(a, c),
                    _ => false,
                }
            }),
        },
        _ => lanes_where::<false>(src, |i| cond.eval(pool.data(b.handle(i)), b.meta(i))),
    }
}

/// The lanes of `src` that `keep` keeps. Out of line, one copy per leaf shape: inside the
/// condition's dispatch, the loops shared its registers and spilled per packet.
/// Each 64-lane word is built in a register and stored once, instead of a read-modify-write
/// of the mask per lane: over `0..n` when the mask is dense (most batches), else over the set
/// bits of each word of `src` (a branch's lanes, such as the 8 in 9 downstream frames behind
/// vbng's `qinq.valid`).
///
/// With `META_ONLY` (`keep` reads only the lane's metadata, which every slot of the batch has,
/// live or not), a sparse `src` that still holds at least half the slots below its last one is
/// tested densely up to there and masked: the 8 in 9 downstream frames cost no bit walk.
#[inline(never)]
fn lanes_where<const META_ONLY: bool>(src: Lanes, mut keep: impl FnMut(usize) -> bool) -> Lanes {
    let mut out = Lanes::NONE;
    let dense = match src.prefix_len() {
        Some(n) => Some(n),
        None if META_ONLY => {
            let end = src.end();
            (2 * src.count() >= end).then_some(end)
        }
        None => None,
    };
    if let Some(n) = dense {
        for (w, word) in out.0.iter_mut().enumerate() {
            let lo = w * 64;
            let mut acc = 0u64;
            for j in 0..n.saturating_sub(lo).min(64) {
                acc |= u64::from(keep(lo + j)) << j;
            }
            *word = acc;
        }
        if META_ONLY {
            out = out.and(src);
        }
    } else {
        for (w, (word, &from)) in out.0.iter_mut().zip(&src.0).enumerate() {
            let (lo, mut bits, mut acc) = (w * 64, from, 0u64);
            while bits != 0 {
                let j = bits.trailing_zeros();
                bits &= bits - 1;
                acc |= u64::from(keep(lo + j as usize)) << j;
            }
            *word = acc;
        }
    }
    out
}

/// Runs stage `stage` over `lanes` (all live), keeping its counters and the traced lanes' records.
fn run_stage(p: &mut Pipeline, stage: usize, pool: &mut Pool, b: &mut Batch, lanes: Lanes, now_ns: u64, trace_lanes: Lanes) {
    if lanes.is_empty() {
        return;
    }
    let st = &mut p.stats[stage];
    let mut cx = StageCx {
        now_ns,
        drops: &mut st.drops,
        objects: &mut p.objects,
        trace_lanes: trace_lanes.and(lanes),
        trace: &mut p.trace_buf,
        acl_keys: &mut p.acl_keys,
    };
    let t0 = cycles();
    p.stages[stage].run(pool, b, lanes, &mut cx);
    let t1 = cycles();
    st.calls += 1;
    st.pkts_in += lanes.count() as u64;
    st.pkts_out += lanes.and(b.live()).count() as u64;
    st.cycles += t1.wrapping_sub(t0);
    if !trace_lanes.is_empty() {
        for i in trace_lanes.and(lanes) {
            p.trace_buf.push((i, TraceRec::Stage { stage: stage as u16, verdict: b.verdict(i) }));
        }
    }
}

/// The two stages of a fused step (`Fused`, `Tailed`), `first` then `second` on `lanes`, as one:
/// `run` calls stage `host` (one of the two) with the other's drop counters and returns the
/// lanes live between the two. The counters are kept per stage as if they ran apart; the
/// cycles count in `host`'s row. A batch with traced packets runs the two apart, so each gets
/// its trace record.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn run_pair(
    p: &mut Pipeline,
    [first, second]: [usize; 2],
    host: usize,
    pool: &mut Pool,
    b: &mut Batch,
    lanes: Lanes,
    now_ns: u64,
    trace_lanes: Lanes,
    run: impl FnOnce(&mut dyn Stage, &mut [u64; DropReason::COUNT], &mut Pool, &mut Batch, &mut StageCx<'_>) -> Lanes,
) {
    if lanes.is_empty() {
        return;
    }
    let both = if trace_lanes.and(lanes).is_empty() { p.stats.get_disjoint_mut([first, second]).ok() } else { None };
    let Some([s1, s2]) = both else {
        run_stage(p, first, pool, b, lanes, now_ns, trace_lanes);
        let lanes = lanes.and(b.live());
        run_stage(p, second, pool, b, lanes, now_ns, trace_lanes);
        return;
    };
    let between = {
        let (h, other) = if host == second { (&mut *s2, &mut *s1) } else { (&mut *s1, &mut *s2) };
        let mut cx = StageCx {
            now_ns,
            drops: &mut h.drops,
            objects: &mut p.objects,
            trace_lanes: Lanes::NONE,
            trace: &mut p.trace_buf,
            acl_keys: &mut p.acl_keys,
        };
        let t0 = cycles();
        let between = run(&mut *p.stages[host], &mut other.drops, pool, b, &mut cx);
        h.cycles += cycles().wrapping_sub(t0);
        between
    };
    s1.calls += 1;
    s1.pkts_in += lanes.count() as u64;
    s1.pkts_out += between.count() as u64;
    if !between.is_empty() {
        s2.calls += 1;
        s2.pkts_in += between.count() as u64;
        s2.pkts_out += between.and(b.live()).count() as u64;
    }
}

fn run_steps(p: &mut Pipeline, is_egress: bool, pool: &mut Pool, b: &mut Batch, now_ns: u64, trace_lanes: Lanes) {
    // The steps are a field of `p`, which the loop also borrows mutably for stages and stats:
    // take them out for the duration (a pointer swap, no allocation).
    let steps = std::mem::take(if is_egress { &mut p.egress } else { &mut p.ingress });
    // Keys recorded for another batch are not this one's. The parser records 5-tuples for
    // the ingress only (the egress parses again, before its steps, for stages that read no
    // record).
    p.acl_keys.clear();
    p.acl_keys.set_open(!is_egress);
    for step in &steps {
        match step {
            Step::Mask { dst, src, cond } => {
                let src = p.masks[usize::from(*src)].and(b.live());
                let out = if p.special {
                    cond_mask(cond, src, pool, b)
                } else {
                    let mut out = Lanes::NONE;
                    for i in src {
                        if cond.eval(pool.data(b.handle(i)), b.meta(i)) {
                            out.insert(i);
                        }
                    }
                    out
                };
                p.masks[usize::from(*dst)] = out;
            }
            Step::AndNot { dst, src, sub } => {
                p.masks[usize::from(*dst)] = p.masks[usize::from(*src)].and_not(p.masks[usize::from(*sub)]);
            }
            Step::Run { mask, stage } => {
                let lanes = p.masks[usize::from(*mask)].and(b.live());
                run_stage(p, *stage, pool, b, lanes, now_ns, trace_lanes);
            }
            Step::Fused { mask, pre, pre_stage, stage } => {
                let lanes = p.masks[usize::from(*mask)].and(b.live());
                run_pair(p, [*pre_stage, *stage], *stage, pool, b, lanes, now_ns, trace_lanes, |s, drops, pool, b, cx| {
                    s.run_with_pre(Pre { op: *pre, drops }, pool, b, lanes, cx)
                });
            }
            Step::Tailed { mask, stage, post, post_stage } => {
                let lanes = p.masks[usize::from(*mask)].and(b.live());
                run_pair(p, [*stage, *post_stage], *stage, pool, b, lanes, now_ns, trace_lanes, |s, drops, pool, b, cx| {
                    let mut post = Post { op: *post, drops, dropped: Lanes::NONE };
                    s.run_with_post(&mut post, pool, b, lanes, cx);
                    lanes.and(b.live()).or(post.dropped)
                });
            }
            Step::Absorbed { mask, stage, absorbed } => {
                let lanes = p.masks[usize::from(*mask)].and(b.live());
                run_stage(p, *stage, pool, b, lanes, now_ns, trace_lanes);
                let left = lanes.and(b.live());
                if !trace_lanes.and(left).is_empty() {
                    run_stage(p, *absorbed, pool, b, left, now_ns, trace_lanes);
                } else if !left.is_empty() {
                    let st = &mut p.stats[*absorbed];
                    st.calls += 1;
                    st.pkts_in += left.count() as u64;
                    st.pkts_out += left.count() as u64;
                }
            }
        }
    }
    p.acl_keys.set_open(false);
    if is_egress {
        p.egress = steps;
    } else {
        p.ingress = steps;
    }
}

/// Gathers the descriptors of `todo`'s packets bound for `port`, each with its pipe, densely
/// into `tm_in` and their lanes into `lanes`; returns how many, and the lanes bound elsewhere.
/// Out of line, one body per way of reading the pipe and per ECN setting: inside `enqueue`,
/// the loop kept its counters on the stack (`scripts/instructions -n 100000 vbng --subscribers
/// 256000 --size 1400 --mix 8:1`: 723.0 -> 710.3 instructions a packet).
#[inline(never)]
fn gather<const ECN: bool>(
    pool: &Pool,
    b: &Batch,
    todo: Lanes,
    port: u16,
    pipe: impl Fn(&Meta) -> u32,
    tm_in: &mut [Desc; BATCH_MAX],
    lanes: &mut [u8; BATCH_MAX],
) -> (usize, Lanes) {
    let mut rest = Lanes::NONE;
    let mut n = 0;
    each_lane!(i in todo => {
        let m = b.meta(i);
        if m.out_port != port {
            rest.insert(i);
            continue;
        }
        tm_in[n % BATCH_MAX] = Desc { pipe: pipe(m), ..desc(pool, b.handle(i), m, ECN) };
        lanes[n % BATCH_MAX] = i as u8;
        n += 1;
    });
    (n, rest)
}

/// The traffic manager's view of a packet; `ecn`: read its ECN field (only WRED looks at it).
#[inline(always)]
fn desc(pool: &Pool, h: PktId, m: &Meta, ecn: bool) -> Desc {
    let ip = m.valid.has(Hdr::Ipv4) || m.valid.has(Hdr::Ipv6);
    // The frame's bytes only for WRED's ECN field; its length alone otherwise.
    let ecn = if ecn && ip { fastpath_tm::wred::ecn_of(pool.data(h), m.offset(Slot::L3)) } else { 0 };
    Desc { pkt: h, len_bytes: pool.len(h) as u32, pipe: 0, class: m.tc & 7, ecn, user: m.in_port }
}

/// Counts an enqueue result under the `tm` row and writes the CE mark of a marked packet;
/// returns the drop reason of a refused one.
#[inline]
fn settle(s: &mut StageStats, pool: &mut Pool, h: PktId, m: &Meta, r: Enq) -> Option<DropReason> {
    match r {
        Enq::Queued => {}
        Enq::Marked => {
            fastpath_tm::wred::mark_ce(pool.data_mut(h), m.offset(Slot::L3));
        }
        Enq::Dropped(why) => {
            let reason = why.drop_reason();
            s.drops[reason as usize] += 1;
            return Some(reason);
        }
    }
    s.pkts_out += 1;
    None
}

/// Where [`flood`] sends copies and what it counts them in.
struct FloodTo<'a> {
    tm: &'a mut Tm,
    stats: &'a mut StageStats,
    fdb: Option<&'a FdbDef>,
    ecn: bool,
}

/// Floods lane `i`: a copy to every member port of its VLAN but the input port (and ports the
/// traffic manager has), the frame itself to the last one. Copies count under `tm` as packets
/// in and out; a refused copy is freed and counted by reason, a copy that finds no buffer as
/// `flood_no_buffer`. Leaves the lane with the last port's verdict; returns that enqueue for
/// the trace.
fn flood(to: FloodTo<'_>, pool: &mut Pool, b: &mut Batch, i: usize, now_ns: u64) -> Option<(u16, u8, Enq)> {
    let FloodTo { tm, stats: s, fdb, ecn } = to;
    let m = *b.meta(i);
    let h = b.handle(i);
    let vid = m.vid(pool.data(h));
    let all = if tm.ports() >= 64 { u64::MAX } else { (1u64 << tm.ports()) - 1 };
    let mut targets = fdb.map_or(Some(u64::MAX), |f| f.members(vid)).unwrap_or(0) & all;
    if m.in_port < 64 {
        targets &= !(1u64 << m.in_port);
    }
    if targets == 0 {
        s.drops[DropReason::NoRoute as usize] += 1;
        b.finish(i, Verdict::Drop(DropReason::NoRoute));
        return None;
    }
    let d = desc(pool, h, &m, ecn);
    let mut res = [Enq::Queued];
    while targets & (targets - 1) != 0 {
        let port = targets.trailing_zeros() as u16;
        targets &= targets - 1;
        s.pkts_in += 1;
        let Some(c) = pool.clone_pkt(h) else {
            s.drops[DropReason::FloodNoBuffer as usize] += 1;
            continue;
        };
        tm.enqueue_burst(usize::from(port), &[Desc { pkt: c, ..d }], now_ns, &mut res);
        if settle(s, pool, c, &m, res[0]).is_some() {
            pool.free(c);
        }
    }
    let port = targets.trailing_zeros() as u16;
    tm.enqueue_burst(usize::from(port), &[d], now_ns, &mut res);
    match settle(s, pool, h, &m, res[0]) {
        None => b.finish(i, Verdict::Queued(port)),
        Some(reason) => b.finish(i, Verdict::Drop(reason)),
    }
    Some((port, d.class, res[0]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The dense test of a metadata predicate over a sparse mask finds the lanes the bit
        /// walk finds, at every density and span.
        #[test]
        fn meta_only_lanes_match_the_bit_walk(
            keep in proptest::collection::vec(any::<bool>(), BATCH_MAX),
            end in 1usize..=BATCH_MAX,
            density in 0u64..=16,
            bits in proptest::collection::vec(0u64..16, BATCH_MAX),
        ) {
            let mut src = Lanes::NONE;
            for i in (0..end).filter(|&i| bits[i] < density) {
                src.insert(i);
            }
            let mut want = Lanes::NONE;
            for i in src.into_iter().filter(|&i| keep[i]) {
                want.insert(i);
            }
            prop_assert_eq!(lanes_where::<true>(src, |i| keep[i]), want);
            prop_assert_eq!(lanes_where::<false>(src, |i| keep[i]), want);
        }
    }
}
