//! Stages that run primitives from a control block itself (outside any table): the general
//! interpreter and the dedicated loops [`crate::build::special`] picks for common shapes.

use crate::action;
pub use crate::exec::TtlDec;
use crate::exec::{count_pass, PreOp, Stage, StageCx};
use crate::ir::{Prim, MAX_ARGS};
use fastpath_packet::each_lane;
use fastpath_packet::{Batch, DropReason, Lanes, Meta, Pool};
use fastpath_tables::meter::Color;

/// A stage that runs primitives from the control block itself (outside any table).
pub struct PrimStage {
    pub(crate) prims: Vec<Prim>,
}

impl Stage for PrimStage {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        let args = [0u128; MAX_ARGS];
        let mut acx = cx.action_ctx();
        for i in lanes {
            for p in &self.prims {
                if !action::apply(p, &args, pool, b, i, &mut acx) {
                    break;
                }
            }
        }
    }
    fn describe(&self) -> String {
        self.prims.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join("; ")
    }
}

/// `swap eth.dst eth.src`: l2fwd's whole per-packet work, one tight loop with no dispatch.
pub struct MacSwapStage;

impl Stage for MacSwapStage {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, _cx: &mut StageCx<'_>) {
        each_lane!(i in lanes => {
            // The parser guarantees 14 bytes of Ethernet at offset 0.
            if let Some(h) = pool.data_mut(b.handle(i)).first_chunk_mut::<12>() {
                // Two loads and two stores: x = dst[0..6] src[0..2], y = src[2..6] (little
                // endian), written back as src[0..6] dst[0..2] and dst[2..6].
                let (lo, hi) = h.split_at_mut(8);
                let x = u64::from_le_bytes([lo[0], lo[1], lo[2], lo[3], lo[4], lo[5], lo[6], lo[7]]);
                let y = u64::from(u32::from_le_bytes([hi[0], hi[1], hi[2], hi[3]]));
                let (dst, src) = (x & 0xffff_ffff_ffff, x >> 48 | y << 16);
                lo.copy_from_slice(&(src | dst << 48).to_le_bytes());
                hi.copy_from_slice(&((dst >> 16) as u32).to_le_bytes());
            }
        });
    }
    fn describe(&self) -> String {
        "swap eth.dst eth.src (MAC swap loop)".into()
    }
}

/// A lone `ttl_dec` / `hop_limit_dec` (the router's): one loop, drops counted `ttl_expired`.
pub struct TtlDecStage;

impl Stage for TtlDecStage {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        PreOp::TtlDec.run(pool, b, lanes, cx.drops);
    }
    fn describe(&self) -> String {
        "ttl_dec (IPv4 TTL / IPv6 hop limit, RFC 1624 checksum update)".into()
    }
}

/// `forward P` with a constant port (the ladder's and simple pipelines' last step).
pub struct ForwardStage(pub u16);

impl Stage for ForwardStage {
    fn run(&mut self, _pool: &mut Pool, b: &mut Batch, lanes: Lanes, _cx: &mut StageCx<'_>) {
        let p = self.0;
        each_lane!(i in lanes => {
            b.meta_mut(i).out_port = p;
        });
    }
    fn describe(&self) -> String {
        format!("forward {}", self.0)
    }
}

/// `vxlan_decap`: the outer headers go, the inner ones move up (drops `vxlan_truncated`).
pub struct VxlanDecapStage;

impl Stage for VxlanDecapStage {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        each_lane!(i in lanes => {
            if !action::vxlan_decap(pool, b.handle(i), b, i) {
                cx.drop(b, i, DropReason::VxlanTruncated);
            }
        });
    }
    fn describe(&self) -> String {
        "vxlan_decap".into()
    }
}

/// `ct_load CT`: the flow's cached verdict into `ct.verdict`.
pub struct CtLoadStage {
    /// Conntrack table.
    pub ct: u16,
    /// The program has this one conntrack table and nothing writes `ct.verdict` but conntrack
    /// and `ct_commit`: a packet's `ct.verdict` then differs from its flow's cached verdict only
    /// after a commit or a freed flow in its batch, and a batch with neither is left as it is
    /// (the overlay's established flows).
    pub skip_unchanged: bool,
}

impl Stage for CtLoadStage {
    fn run(&mut self, _pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        if self.skip_unchanged && cx.objects.ct_changes == 0 {
            return;
        }
        let ct = self.ct;
        each_lane!(i in lanes => {
            let m = b.meta_mut(i);
            crate::field::set_ct_verdict(m, cx.objects.ct_verdict(ct, m.flow));
        });
    }
    fn describe(&self) -> String {
        format!(
            "ct_load conntrack #{}{}",
            self.ct,
            if self.skip_unchanged { " (skipped in a batch with no commit or freed flow)" } else { "" }
        )
    }
}

/// `meter M meta.REG [drop_red]` (a meter indexed by a metadata register, e.g. the policer of
/// a source MAC) or `meter M CONST [drop_red]`.
pub struct MeterStage {
    /// Meter array.
    pub meter: u16,
    /// Index: a user register, or a constant when `None`.
    pub reg: Option<u8>,
    /// The constant index when `reg` is `None`.
    pub index: u32,
    /// Drop red packets (`meter_red`).
    pub drop_red: bool,
}

impl Stage for MeterStage {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        let now = cx.now_ns;
        // The array once per batch, and the marker inlined into the loop (through
        // `Objects::meter`, a call per packet: about 25 instructions a packet of the overlay).
        // An index out of range or an unconfigured meter gives green, as there.
        let Some(bank) = cx.objects.meters.get_mut(usize::from(self.meter)) else { return };
        let (two, aware) = (bank.two_rate, bank.color_aware);
        let (meters, drops) = (&mut bank.meters[..], &mut *cx.drops);
        // The index source, drop_red and the bank's kind are tested once per batch, not per
        // packet.
        macro_rules! pass {
            ($index:expr, $drop_red:expr, $two:literal, $aware:literal) => {
                each_lane!(i in lanes => {
                    let m = b.meta(i);
                    let (len, pre) = (pool.len(b.handle(i)) as u32, m.color);
                    let color = meters.get_mut($index(m) as usize).map_or(Color::Green, |mt| mt.mark_in::<$two, $aware>(now, len, pre)) as u8;
                    b.meta_mut(i).color = color;
                    if $drop_red && color == 2 {
                        b.drop(i, DropReason::MeterRed);
                        drops[DropReason::MeterRed as usize] += 1;
                    }
                })
            };
        }
        macro_rules! kinds {
            ($index:expr, $drop_red:expr) => {
                match (two, aware) {
                    (false, false) => pass!($index, $drop_red, false, false),
                    (false, true) => pass!($index, $drop_red, false, true),
                    (true, false) => pass!($index, $drop_red, true, false),
                    (true, true) => pass!($index, $drop_red, true, true),
                }
            };
        }
        let reg_of = |r: u8| move |m: &Meta| m.regs.get(usize::from(r)).copied().unwrap_or(0);
        let index = self.index;
        match (self.reg, self.drop_red) {
            (Some(r), true) => kinds!(reg_of(r), true),
            (Some(r), false) => kinds!(reg_of(r), false),
            (None, true) => kinds!(|_: &Meta| index, true),
            (None, false) => kinds!(|_: &Meta| index, false),
        }
    }
    fn describe(&self) -> String {
        format!("meter #{} index {:?}/{}{}", self.meter, self.reg, self.index, if self.drop_red { " drop_red" } else { "" })
    }
}

/// `count C meta.REG` (a per-session counter) or `count C CONST`, with a `ttl_dec` right before
/// or after it in the same loop when the control block has one there (vbng's downstream
/// `ttl_dec; count sub_down meta.sub` and upstream `count sub_up meta.sub; ttl_dec`): one pass
/// over the packets instead of two, the same results (a counter is not the packet's).
pub struct CountStage {
    /// Counter array.
    pub counter: u16,
    /// Index: a user register, or the constant `index` when `None`.
    pub reg: Option<u8>,
    /// The constant index when `reg` is `None`.
    pub index: u32,
    /// Where a `ttl_dec` runs in the loop.
    pub ttl: TtlDec,
}

impl CountStage {
    /// The loop for one index source and `ttl_dec` placement (`TTL`: 0 none, 1 before, 2 after).
    #[inline(always)]
    fn pass<const TTL: u8>(&self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>, index: impl Fn(&Meta) -> u32) {
        // The array found once per batch.
        let Some(bank) = cx.objects.counters.get_mut(usize::from(self.counter)) else { return };
        let expired = count_pass::<TTL>(&mut bank.values, pool, b, lanes, index);
        cx.drops[DropReason::TtlExpired as usize] += expired.count() as u64;
    }
}

impl Stage for CountStage {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        macro_rules! by_ttl {
            ($index:expr) => {
                match self.ttl {
                    TtlDec::No => self.pass::<0>(pool, b, lanes, cx, $index),
                    TtlDec::Before => self.pass::<1>(pool, b, lanes, cx, $index),
                    TtlDec::After => self.pass::<2>(pool, b, lanes, cx, $index),
                }
            };
        }
        match self.reg.map(usize::from) {
            Some(r) => by_ttl!(|m: &Meta| m.regs.get(r).copied().unwrap_or(0)),
            None => {
                let index = self.index;
                by_ttl!(|_: &Meta| index)
            }
        }
    }
    fn describe(&self) -> String {
        let count = format!("count #{} index {:?}/{}", self.counter, self.reg, self.index);
        match self.ttl {
            TtlDec::No => count,
            TtlDec::Before => format!("ttl_dec ▸ {count} (one loop)"),
            TtlDec::After => format!("{count} ▸ ttl_dec (one loop)"),
        }
    }
}

/// A run of primitives as a chain of stages, each a dedicated loop where there is one: the
/// next stage sees the lanes the previous one left live (a drop or a punt ends a packet's run,
/// as in [`PrimStage`]).
pub struct ChainStage(pub Vec<Box<dyn Stage>>);

impl Stage for ChainStage {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        let mut lanes = lanes;
        for s in &mut self.0 {
            lanes = lanes.and(b.live());
            s.run(pool, b, lanes, cx);
        }
    }
    fn describe(&self) -> String {
        self.0.iter().map(|s| s.describe()).collect::<Vec<_>>().join(" ▸ ")
    }
}
