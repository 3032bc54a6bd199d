//! The build step's special cases, in one place: shapes of action bodies and primitive sequences
//! that get a dedicated code path instead of the general primitive interpreter
//! ([`crate::action::apply`], which stays the reference they are tested against).
//!
//! - [`fast_form`]: a table entry whose body is `forward P`, a next-hop rewrite, a register write,
//!   nothing, or a constant VXLAN encap is pre-digested at insert time into a [`Fast`].
//! - [`prim_stage`]: a control-block primitive run that is l2fwd's MAC swap, a lone `ttl_dec`,
//!   `forward CONST`, `vxlan_decap`, `ct_load`, a meter or a counter indexed by a register or a
//!   constant (the counter with a `ttl_dec` before or after it) becomes a tight loop with no
//!   dispatch.
//! - [`fuse_steps`]: a lone `ttl_dec` run just before a table on the same lanes runs inside the
//!   table's key pass; a count by a register (with its `ttl_dec`) run just after a table of
//!   layer-2 edits runs inside the table's action pass.
//! - [`parser_classes`]: the traffic manager's DSCP classifier runs in the parser's loop.
//! - [`share_acl_keys`]: two classifier tables run one after the other with the same key read
//!   it from the packets once.
//! - [`parsed_tuple`]: a classifier table on the 5-tuple right after the parser takes its key
//!   from the parser.

use crate::exec::{KeyShare, PostCount, PreOp, Stage, Step};
use crate::ir::{
    Classify, CondC, FieldRef, Loc, MatchKind, MetaField, Operand, Prim, Program, StageDef, SymStep, TableImpl, ValueKind, MAX_ARGS,
};
use crate::stages::l2edit::{L2Edit, MAX_PUSH, MAX_REGS};
use crate::stages::parser::Parser;
use crate::stages::prims::{
    ChainStage, CountStage, CtLoadStage, ForwardStage, MacSwapStage, MeterStage, PrimStage, TtlDec, TtlDecStage, VxlanDecapStage,
};
use crate::stages::vxlan::{EncapTemplate, Tunnel};
use fastpath_packet::{HdrSet, Slot};

/// An action entry pre-digested at insert time when its body is one of the common shapes, so
/// the packet loop does one small `match` instead of interpreting primitives.
#[derive(Clone, Copy, Debug)]
pub enum Fast {
    /// `forward P`.
    Forward(u16),
    /// `set eth.dst = D; set eth.src = S; forward P` (a router's next hop).
    Rewrite { macs: [u8; 12], port: u16 },
    /// `set meta.NAME = V` (a user metadata register): the overlay's mapping tables.
    SetReg { reg: u8, value: u32 },
    /// An empty body (`permit`, `no_action`).
    Nop,
    /// `vxlan_encap D S SIP DIP VNI; forward P` with constant operands: the tunnel's outer
    /// headers prebuilt (template `tpl` of the stage).
    Encap { tpl: u32, port: u16 },
    /// Register writes, VLAN pops and pushes, MAC writes and a port with constant operands
    /// (a subscriber session's entry, a next hop with a VLAN): edit `edit` of the stage.
    L2 { edit: u32 },
    /// `ct_commit CT V` with a constant verdict (a stateful ACL's `allow`): the verdict cached
    /// in the packet's flow and in `ct.verdict`.
    CtCommit { ct: u16, verdict: u8 },
    /// Anything else: run the primitives.
    General,
}

impl Fast {
    /// [`Fast::kind_bit`] of `Forward`.
    pub const FORWARD: u8 = 1;
    /// Of `Rewrite`.
    pub const REWRITE: u8 = 2;
    /// Of `SetReg`.
    pub const SET_REG: u8 = 4;
    /// Of `Encap`.
    pub const ENCAP: u8 = 16;
    /// Of `L2`.
    pub const L2: u8 = 64;
    /// Of `CtCommit`.
    pub const CT_COMMIT: u8 = 128;

    /// One bit per kind (the table stage keeps the union over its entries).
    pub fn kind_bit(&self) -> u8 {
        match self {
            Fast::Forward(_) => Self::FORWARD,
            Fast::Rewrite { .. } => Self::REWRITE,
            Fast::SetReg { .. } => Self::SET_REG,
            Fast::Nop => 8,
            Fast::Encap { .. } => Self::ENCAP,
            Fast::General => 32,
            Fast::L2 { .. } => Self::L2,
            Fast::CtCommit { .. } => Self::CT_COMMIT,
        }
    }
}

pub fn fast_form(body: &[Prim], args: &[u128; MAX_ARGS], templates: &mut Vec<EncapTemplate>, edits: &mut Vec<L2Edit>) -> Fast {
    let val = |o: &Operand| match o {
        Operand::Arg(k) => Some(args[usize::from(*k) % MAX_ARGS]),
        Operand::Const(c) => Some(*c),
        Operand::Field(_) => None,
    };
    let eth_at = |f: &FieldRef, byte: u8| f.width == 48 && matches!(f.loc, Loc::Hdr { slot: Slot::Eth, byte: b, .. } if b == byte);
    match body {
        [] => Fast::Nop,
        [Prim::Forward(p)] => val(p).map_or(Fast::General, |p| Fast::Forward(p as u16)),
        [Prim::CtCommit(ct, v)] => val(v).map_or(Fast::General, |v| Fast::CtCommit { ct: *ct, verdict: v as u8 }),
        [Prim::VxlanEncap(ops), Prim::Forward(p)] => match (ops.iter().map(val).collect::<Option<Vec<u128>>>(), val(p)) {
            (Some(v), Some(p)) => {
                let t = Tunnel { dmac: v[0] as u64, smac: v[1] as u64, src: v[2] as u32, dst: v[3] as u32, vni: v[4] as u32 };
                templates.push(EncapTemplate::new(&t));
                Fast::Encap { tpl: templates.len() as u32 - 1, port: p as u16 }
            }
            _ => Fast::General,
        },
        [Prim::Set(f, v)] => match (f.loc, val(v)) {
            (Loc::Meta(MetaField::Reg(reg)), Some(v)) => Fast::SetReg { reg, value: v as u32 },
            _ => Fast::General,
        },
        [Prim::Set(d, dv), Prim::Set(s, sv), Prim::Forward(p)] if eth_at(d, 0) && eth_at(s, 6) => match (val(dv), val(sv), val(p)) {
            (Some(dv), Some(sv), Some(p)) => {
                let mut macs = [0u8; 12];
                macs[..6].copy_from_slice(&(dv as u64).to_be_bytes()[2..]);
                macs[6..].copy_from_slice(&(sv as u64).to_be_bytes()[2..]);
                Fast::Rewrite { macs, port: p as u16 }
            }
            _ => Fast::General,
        },
        _ => match l2_edit(body, val, eth_at) {
            Some(e) => {
                edits.push(e);
                Fast::L2 { edit: edits.len() as u32 - 1 }
            }
            None => Fast::General,
        },
    }
}

/// `set meta.R = V`…, `pop_vlan`…, `push_vlan V [P [T]]`…, `set eth.dst = D`, `set eth.src =
/// S`, `forward P`, each optional but in that order, every operand a constant or an argument.
fn l2_edit(body: &[Prim], val: impl Fn(&Operand) -> Option<u128>, eth_at: impl Fn(&FieldRef, u8) -> bool) -> Option<L2Edit> {
    let mac = |v: u128| -> [u8; 6] { std::array::from_fn(|k| (v >> (40 - 8 * k)) as u8) };
    let mut e = L2Edit::default();
    let mut pushed: Vec<[u8; 4]> = Vec::new();
    let mut phase = 0;
    for p in body {
        let (at, ok) = match p {
            Prim::Set(FieldRef { loc: Loc::Meta(MetaField::Reg(r)), .. }, v) if usize::from(e.n_regs) < MAX_REGS => {
                e.regs[usize::from(e.n_regs)] = (*r, val(v)? as u32);
                e.n_regs += 1;
                (0, true)
            }
            Prim::PopVlan if e.pops < 2 => {
                e.pops += 1;
                (1, true)
            }
            Prim::PushVlan(vid, pcp, tpid) if pushed.len() < MAX_PUSH => {
                let tci = ((val(pcp)? as u16 & 7) << 13) | (val(vid)? as u16 & 0x0fff);
                let [a, b] = tpid.to_be_bytes();
                let [c, d] = tci.to_be_bytes();
                pushed.push([a, b, c, d]);
                (2, true)
            }
            Prim::Set(f, v) if eth_at(f, 0) => {
                e.dst = Some(mac(val(v)?));
                (3, true)
            }
            Prim::Set(f, v) if eth_at(f, 6) => {
                e.src = Some(mac(val(v)?));
                (4, true)
            }
            Prim::Forward(v) => {
                e.port = Some(u16::try_from(val(v)?).ok()?);
                (5, true)
            }
            _ => (0, false),
        };
        if !ok || at < phase {
            return None;
        }
        phase = at;
    }
    // The last pushed is the outermost.
    for (k, t) in pushed.iter().rev().enumerate() {
        e.push[k] = *t;
    }
    e.n_push = pushed.len() as u8;
    Some(e.sealed())
}

/// The stage for a run of primitives in a control block: a dedicated loop for one primitive
/// (or a pair, such as a counter next to a `ttl_dec`) that has one; for a longer run where
/// some have, a chain of dedicated loops and interpreted runs.
///
/// `ct_exact`: `ct_load` may skip a batch with no commit or freed flow ([`ct_load_exact`]).
pub fn prim_stage(prims: &[Prim], ct_exact: bool) -> Box<dyn Stage> {
    let dedicated = |prims: &[Prim]| dedicated(prims, ct_exact);
    if let Some(s) = dedicated(prims) {
        return s;
    }
    if prims.len() < 2 || !chainable(prims) {
        return Box::new(PrimStage { prims: prims.to_vec() });
    }
    let mut chain: Vec<Box<dyn Stage>> = Vec::new();
    let mut run: Vec<Prim> = Vec::new();
    let mut k = 0;
    while let Some(p) = prims.get(k) {
        let (s, used) = match prims.get(k..k + 2).and_then(dedicated) {
            Some(s) => (Some(s), 2),
            None => (dedicated(std::slice::from_ref(p)), 1),
        };
        match s {
            Some(s) => {
                if !run.is_empty() {
                    chain.push(Box::new(PrimStage { prims: std::mem::take(&mut run) }));
                }
                chain.push(s);
            }
            None => run.push(p.clone()),
        }
        k += used;
    }
    if chain.is_empty() {
        return Box::new(PrimStage { prims: run });
    }
    if !run.is_empty() {
        chain.push(Box::new(PrimStage { prims: run }));
    }
    Box::new(ChainStage(chain))
}

/// A chain runs each primitive over the whole batch before the next, where the interpreter runs
/// all of them on one packet before the next packet: the same results as long as no two of them
/// touch the same stateful object (two meters of one array may be one meter; a `ct_load` reads
/// what a `ct_commit` wrote).
fn chainable(prims: &[Prim]) -> bool {
    let mut seen: Vec<(u8, u16)> = Vec::new();
    for p in prims {
        let obj = match p {
            Prim::Meter(m, ..) => (0, *m),
            Prim::Count(c, _) => (1, *c),
            Prim::CtCommit(..) | Prim::CtLoad(_) => return false,
            _ => continue,
        };
        if seen.contains(&obj) {
            return false;
        }
        seen.push(obj);
    }
    true
}

/// Whether a packet's `ct.verdict` can differ from its flow's cached verdict only after a
/// `ct_commit` or a freed flow: the program has one conntrack table (so every packet's flow is
/// one of its flows) and no `set` or `swap` writes `ct.verdict` (a packet no conntrack saw
/// has no flow and verdict 0, which is what `ct_load` gives it).
pub fn ct_load_exact(p: &Program) -> bool {
    let writes_verdict = |prim: &Prim| {
        let v = |f: &FieldRef| f.loc == Loc::Meta(MetaField::CtVerdict);
        match prim {
            Prim::Set(f, _) => v(f),
            Prim::Swap(a, b) => v(a) || v(b),
            _ => false,
        }
    };
    let prims = p.stages.iter().filter_map(|(_, s)| match s {
        StageDef::Prims(v) => Some(v.as_slice()),
        _ => None,
    });
    p.conntracks.len() == 1 && !p.actions.iter().map(|a| a.body.as_slice()).chain(prims).flatten().any(writes_verdict)
}

/// A dedicated loop for `prims`, if there is one.
fn dedicated(prims: &[Prim], ct_exact: bool) -> Option<Box<dyn Stage>> {
    let reg_or_const = |o: &Operand| match o {
        Operand::Field(FieldRef { loc: Loc::Meta(MetaField::Reg(r)), .. }) => Some((Some(*r), 0)),
        Operand::Const(c) if *c <= u128::from(u32::MAX) => Some((None, *c as u32)),
        _ => None,
    };
    Some(match prims {
        [Prim::Swap(a, b)] if is_mac_swap(a, b) => Box::new(MacSwapStage),
        [Prim::TtlDec] => Box::new(TtlDecStage),
        [Prim::Forward(Operand::Const(p))] if *p <= u128::from(u16::MAX) => Box::new(ForwardStage(*p as u16)),
        [Prim::VxlanDecap] => Box::new(VxlanDecapStage),
        [Prim::CtLoad(ct)] => Box::new(CtLoadStage { ct: *ct, skip_unchanged: ct_exact }),
        [Prim::Meter(meter, idx, drop_red)] => {
            let (reg, index) = reg_or_const(idx)?;
            Box::new(MeterStage { meter: *meter, reg, index, drop_red: *drop_red })
        }
        [Prim::Count(counter, idx)] => {
            let (reg, index) = reg_or_const(idx)?;
            Box::new(CountStage { counter: *counter, reg, index, ttl: TtlDec::No })
        }
        [Prim::TtlDec, Prim::Count(counter, idx)] => {
            let (reg, index) = reg_or_const(idx)?;
            Box::new(CountStage { counter: *counter, reg, index, ttl: TtlDec::Before })
        }
        [Prim::Count(counter, idx), Prim::TtlDec] => {
            let (reg, index) = reg_or_const(idx)?;
            Box::new(CountStage { counter: *counter, reg, index, ttl: TtlDec::After })
        }
        _ => return None,
    })
}

/// The DSCP classifier the parser runs in its own loop ([`Step::Absorbed`]): the traffic
/// manager's `classify = "dscp"` stage, which the compiler puts first in ingress on every
/// packet, when the parser can read the DSCP (`Parser::can_classify`). Its stage and table.
pub fn parser_classes(p: &Program) -> Option<(usize, [u8; 64])> {
    let Some(&SymStep::Run(0, c)) = p.ingress.first() else { return None };
    match p.stages.get(c) {
        Some((_, StageDef::Classify(Classify::Dscp(map)))) if Parser::can_classify(p.headers) => Some((c, *map)),
        _ => None,
    }
}

/// `a.valid and b.valid` as one test of both headers' bits (one pass over the lanes, not two),
/// through every conjunction: `And(Valid(a), And(Valid(b), x))` becomes `And(Valid(a ∪ b), x)`.
pub fn merge_valid(c: CondC) -> CondC {
    match c {
        CondC::And(x, y) => match (merge_valid(*x), merge_valid(*y)) {
            (CondC::Valid(a), CondC::Valid(b)) => CondC::Valid(HdrSet(a.0 | b.0)),
            (CondC::Valid(a), CondC::And(y0, y1)) => match *y0 {
                CondC::Valid(b) => CondC::And(Box::new(CondC::Valid(HdrSet(a.0 | b.0))), y1),
                y0 => CondC::And(Box::new(CondC::Valid(a)), Box::new(CondC::And(Box::new(y0), y1))),
            },
            (x, y) => CondC::And(Box::new(x), Box::new(y)),
        },
        CondC::Or(x, y) => CondC::Or(Box::new(merge_valid(*x)), Box::new(merge_valid(*y))),
        CondC::Not(x) => CondC::Not(Box::new(merge_valid(*x))),
        c => c,
    }
}

/// `swap eth.dst eth.src` (either order): l2fwd's whole per-packet work.
fn is_mac_swap(a: &FieldRef, b: &FieldRef) -> bool {
    let mac = |x: &FieldRef| x.kind == ValueKind::Mac && matches!(x.loc, Loc::Hdr { slot: Slot::Eth, .. });
    mac(a) && mac(b) && a.loc != b.loc
}

/// Fuses two runs on the same lanes into one pass over the packets (a frame's address, its
/// metadata and the loop once, not twice), when a stage folds the other into its own pass:
/// - a lone `ttl_dec` and the run right after it ([`Stage::folds`], [`Step::Fused`]: a
///   router's `ttl_dec; apply fib4`, 37 instructions per packet down to about 12);
/// - a run and the count by a register right after it, with its `ttl_dec` if any
///   ([`Stage::folds_post`], [`Step::Tailed`]: vbng's `apply down_session; ttl_dec; count
///   sub_down meta.sub`).
pub fn fuse_steps(p: &Program, stages: &[Box<dyn Stage>], steps: Vec<Step>) -> Vec<Step> {
    let prims = |s: usize| match p.stages.get(s) {
        Some((_, StageDef::Prims(v))) => v.as_slice(),
        _ => &[],
    };
    let pre_of = |s: usize| matches!(prims(s), [Prim::TtlDec]).then_some(PreOp::TtlDec);
    let post_of = |s: usize| {
        let count = |c: &u16, i: &Operand, ttl| match i {
            Operand::Field(FieldRef { loc: Loc::Meta(MetaField::Reg(r)), .. }) => Some(PostCount { counter: *c, reg: *r, ttl }),
            _ => None,
        };
        match prims(s) {
            [Prim::Count(c, i)] => count(c, i, TtlDec::No),
            [Prim::TtlDec, Prim::Count(c, i)] => count(c, i, TtlDec::Before),
            [Prim::Count(c, i), Prim::TtlDec] => count(c, i, TtlDec::After),
            _ => None,
        }
    };
    let mut out = Vec::with_capacity(steps.len());
    let mut it = steps.into_iter().peekable();
    while let Some(step) = it.next() {
        if let (&Step::Run { mask, stage: first }, Some(&Step::Run { mask: m, stage: next })) = (&step, it.peek()) {
            if m == mask {
                if let Some(pre) = pre_of(first).filter(|&pre| stages.get(next).is_some_and(|s| s.folds(pre))) {
                    it.next();
                    out.push(Step::Fused { mask, pre, pre_stage: first, stage: next });
                    continue;
                }
                if let Some(post) = post_of(next).filter(|&post| stages.get(first).is_some_and(|s| s.folds_post(post))) {
                    it.next();
                    out.push(Step::Tailed { mask, stage: first, post, post_stage: next });
                    continue;
                }
            }
        }
        out.push(step);
    }
    out
}

/// Pairs of classifier tables that read one key for both: table stage `a` run by a step, table
/// stage `b` by the next run step of the same list (only mask steps, which read no packet data
/// they could change, in between), where
/// - both are classifier tables with the same key: the same fields, in the same order, with
///   the same `range` flags (a `range` field of a packet without its header reads as 0);
/// - every key field is a header field or the input port;
/// - no action of `a`, its default included, can change a packet's headers or its input port:
///   each primitive is `drop`, `to_control`, `count`, `ct_commit` or `ct_load`;
/// - `b` is run by that step only: the compiler refuses a table applied twice, so nowhere else
///   could it find `a`'s keys of the batch.
///
/// `b` then runs on some of the packets `a` ran on (those `a` left live and `b`'s guard takes),
/// which have the keys `a` read. `a` records them and `b` takes them ([`KeyShare`]). The
/// overlay's `acl_in` and `acl_out` are such a pair: the second key read cost about 110
/// instructions per connection's first packet. A stage is in at most one pair.
pub fn share_acl_keys(p: &Program, stages: &mut [Box<dyn Stage>], lists: [&[Step]; 2]) {
    let table_of = |s: usize| match p.stages.get(s) {
        Some((_, StageDef::Table(t))) => p.tables.get(*t).filter(|d| d.imp == TableImpl::Acl),
        _ => None,
    };
    let keeps_key = |prims: &[Prim]| {
        prims.iter().all(|x| matches!(x, Prim::Drop(_) | Prim::ToControl | Prim::Count(..) | Prim::CtCommit(..) | Prim::CtLoad(_)))
    };
    let pairs_with = |a: usize, b: usize| -> bool {
        let (Some(ta), Some(tb)) = (table_of(a), table_of(b)) else { return false };
        let same = ta.key.len() == tb.key.len()
            && ta.key.iter().zip(&tb.key).all(|(x, y)| x.field == y.field && (x.kind == MatchKind::Range) == (y.kind == MatchKind::Range));
        let readable = ta.key.iter().all(|k| matches!(k.field.loc, Loc::Hdr { .. } | Loc::Meta(MetaField::InPort)));
        let actions = ta.actions.iter().chain(std::iter::once(&ta.default.0));
        same && readable && actions.into_iter().all(|&x| p.actions.get(x).is_some_and(|d| keeps_key(&d.body)))
    };
    let mut taken = vec![false; stages.len()];
    for steps in lists {
        let mut last: Option<usize> = None;
        for step in steps {
            let run = match step {
                Step::Mask { .. } | Step::AndNot { .. } => continue,
                Step::Run { stage, .. } => Some(*stage),
                _ => None,
            };
            if let (Some(a), Some(b)) = (last, run) {
                if !taken[a] && !taken[b] && a != b && pairs_with(a, b) {
                    let lent = stages[a].share_acl_key(KeyShare::Lend(a));
                    if lent && stages[b].share_acl_key(KeyShare::Borrow(a)) {
                        taken[a] = true;
                        taken[b] = true;
                    } else if lent {
                        stages[a].share_acl_key(KeyShare::Alone);
                    }
                }
            }
            last = run;
        }
    }
}

/// Whether the parser records each packet's 5-tuple for the table that runs right after it,
/// which then takes its key from the record ([`KeyShare::Parsed`]): the first step after the
/// parser's that runs a stage (only mask steps, which change no packet, in between) runs a
/// classifier table whose key is parts of the 5-tuple and the input port, with the record's
/// header tests (IPv4; UDP or TCP). Nothing runs between the two, so the record is the packet
/// as the table would read it. The parser fills it from the bytes its fast path has loaded and
/// checked, for about 12 instructions a packet; the switch's ACL then reads no packet, and its
/// pass went from about 65 instructions a packet to about 40.
pub fn parsed_tuple(p: &Program, stages: &mut [Box<dyn Stage>], ingress: &[Step]) -> bool {
    if !crate::stages::parser::Parser::can_classify(p.headers) {
        return false;
    }
    let mut runs = ingress.iter().filter(|s| !matches!(s, Step::Mask { .. } | Step::AndNot { .. }));
    // The parser, alone or with the class it absorbed (which writes the class only).
    if !matches!(runs.next(), Some(Step::Run { stage: 0, .. } | Step::Absorbed { stage: 0, .. })) {
        return false;
    }
    match runs.next() {
        Some(&Step::Run { stage, .. }) => stage != 0 && stages.get_mut(stage).is_some_and(|s| s.share_acl_key(KeyShare::Parsed)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_packet::Hdr;

    #[test]
    fn valid_tests_of_a_conjunction_merge() {
        let v = |h: Hdr| CondC::Valid(HdrSet::EMPTY.with(h));
        let both = CondC::Valid(HdrSet::EMPTY.with(Hdr::Vlan).with(Hdr::Ipv4));
        let and = |x: CondC, y: CondC| CondC::And(Box::new(x), Box::new(y));
        assert_eq!(merge_valid(and(v(Hdr::Vlan), v(Hdr::Ipv4))), both);
        assert_eq!(merge_valid(and(v(Hdr::Vlan), and(v(Hdr::Ipv4), CondC::Hit(1)))), and(both.clone(), CondC::Hit(1)));
        // Inside `not` and `or`; an `or` of two is not a conjunction.
        let or = CondC::Or(Box::new(v(Hdr::Vlan)), Box::new(v(Hdr::Ipv4)));
        assert_eq!(merge_valid(or.clone()), or);
        assert_eq!(merge_valid(CondC::Not(Box::new(and(v(Hdr::Vlan), v(Hdr::Ipv4))))), CondC::Not(Box::new(both)));
        // A comparison first keeps its place.
        let c = and(CondC::Hit(2), v(Hdr::Vlan));
        assert_eq!(merge_valid(c.clone()), c);
    }

    fn fused_steps(file: &str) -> Vec<(PreOp, String)> {
        let text = std::fs::read_to_string(format!("{}/../../pipelines/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap_or_default();
        let Ok(p) = crate::compile::compile(file, &text) else { return Vec::new() };
        let pl = p.instantiate();
        pl.ingress
            .iter()
            .filter_map(|s| match s {
                Step::Fused { pre, stage, .. } => Some((*pre, pl.stage_names[*stage].clone())),
                _ => None,
            })
            .collect()
    }

    /// The router's `ttl_dec; apply fib4` and `hop_limit_dec; apply fib6` run as one pass each
    /// (the differential tests compare them with the reference, which never fuses).
    #[test]
    fn router_runs_ttl_dec_in_its_fib_key_passes() {
        let f = fused_steps("router.toml");
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f.iter().all(|(pre, t)| *pre == PreOp::TtlDec && t.contains("fib")), "{f:?}");
    }

    /// vbng's downstream `apply down_session; ttl_dec; count sub_down meta.sub` runs the count
    /// in the session table's edit pass; the upstream count after the class ACL runs apart
    /// (a classifier has no edit pass).
    #[test]
    fn vbng_counts_downstream_in_the_session_tables_pass() {
        let text = std::fs::read_to_string(format!("{}/../../pipelines/vbng.toml", env!("CARGO_MANIFEST_DIR"))).unwrap_or_default();
        let pl = crate::compile::compile("vbng.toml", &text).map(|p| p.instantiate());
        let tailed: Vec<(String, PostCount)> = pl
            .map(|pl| {
                let name = |s: usize| pl.stage_names[s].clone();
                pl.ingress
                    .iter()
                    .filter_map(|s| if let Step::Tailed { stage, post, .. } = s { Some((name(*stage), *post)) } else { None })
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(tailed.len(), 1, "{tailed:?}");
        assert!(tailed[0].0.contains("down_session") && tailed[0].1.ttl == TtlDec::Before, "{tailed:?}");
    }

    /// Only a count by a register, with at most its `ttl_dec`, right after a table on the same
    /// lanes runs in the table's pass; in a specialised build only.
    #[test]
    fn only_a_register_count_right_after_a_table_fuses() {
        let spec = |ctl: &str| {
            let head = r#"name = "t"
[parser]
headers = ["eth", "vlan", "ipv4"]
[metadata]
sub = 8
[[counter]]
name = "c"
size = 16
[[action]]
name = "tag"
params = ["s"]
body = "set meta.sub = s; push_vlan 7; forward 1"
[[table]]
name = "t"
key = [{ field = "ipv4.dst", match = "exact" }]
actions = ["tag"]
size = 16
[control]
"#;
            format!("{head}ingress = '''\n{ctl}'''\n")
        };
        let tailed = |ctl: &str, special: bool| {
            let p = crate::compile::compile("t.toml", &spec(ctl)).map_err(|e| e.to_string());
            let pl = p.map(|p| if special { p.instantiate() } else { p.instantiate_reference() });
            pl.map(|pl| {
                pl.ingress.iter().filter_map(|s| if let Step::Tailed { post, .. } = s { Some(post.ttl) } else { None }).collect::<Vec<_>>()
            })
        };
        assert_eq!(tailed("apply t\ncount c meta.sub\n", true), Ok(vec![TtlDec::No]));
        assert_eq!(tailed("apply t\nttl_dec\ncount c meta.sub\n", true), Ok(vec![TtlDec::Before]));
        assert_eq!(tailed("apply t\ncount c meta.sub\nttl_dec\n", true), Ok(vec![TtlDec::After]));
        assert_eq!(tailed("apply t\ncount c meta.sub\n", false), Ok(vec![]));
        assert_eq!(tailed("apply t\ncount c 3\n", true), Ok(vec![]));
        assert_eq!(tailed("apply t\nttl_dec\n", true), Ok(vec![]));
        assert_eq!(tailed("apply t\nhash\ncount c meta.sub\n", true), Ok(vec![]));
        assert_eq!(tailed("if ipv4.valid:\n    apply t\ncount c meta.sub\n", true), Ok(vec![]));
    }

    /// A `ttl_dec` with more primitives after it in the same run is not fused, nor is one the
    /// reference build sees.
    #[test]
    fn only_a_lone_ttl_dec_before_a_table_fuses() {
        let spec = |ctl: &str| {
            format!(
                "name = \"t\"\n[parser]\nheaders = [\"eth\", \"ipv4\"]\n[[table]]\nname = \"fib\"\nkey = [{{ field = \"ipv4.dst\", match = \"lpm\" }}]\nactions = [\"forward\"]\nsize = 16\n[control]\ningress = '''\n{ctl}'''\n"
            )
        };
        let fused = |ctl: &str, special: bool| {
            let p = crate::compile::compile("t.toml", &spec(ctl)).map_err(|e| e.to_string());
            let pl = p.map(|p| if special { p.instantiate() } else { p.instantiate_reference() });
            pl.map(|pl| pl.ingress.iter().filter(|s| matches!(s, Step::Fused { .. })).count())
        };
        assert_eq!(fused("ttl_dec\napply fib\n", true), Ok(1));
        assert_eq!(fused("ttl_dec\napply fib\n", false), Ok(0));
        assert_eq!(fused("ttl_dec\nhash\napply fib\n", true), Ok(0));
        assert_eq!(fused("apply fib\nttl_dec\n", true), Ok(0));
    }
}
