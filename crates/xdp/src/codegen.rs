//! The code generator: a compiled [`Program`] ▸ one eBPF XDP program.
//!
//! The batch executor's plan runs here one packet at a time, with the same meaning:
//!
//! ```text
//!  ingress ifindex ─▶ in_port (a compare chain over the ports' ifindexes; other devices: XDP_PASS)
//!  parser          ─▶ 14 bytes of Ethernet or drop(eth_truncated)
//!  ingress steps   ─▶ lane masks become one byte each on the stack; Run(mask, stage) is a guarded
//!                     block; a table is key ▸ bpf_map_lookup_elem(hash) ▸ jump on the entry's action
//!  egress steps    ─▶ likewise, for forwarded packets only (the others: drop(no_verdict))
//!  end             ─▶ no out_port: drop(no_verdict); out_port ≥ ports: drop(port_down);
//!                     else bpf_redirect_map(devmap, out_port)
//! ```
//!
//! A drop returns `XDP_DROP` at once, so "live lanes" need no register. Every packet, drop and
//! table hit or miss is counted in one per-CPU array ([`Layout`]), summed by the control side.
//!
//! What compiles: the parser's Ethernet header; exact-match tables whose key fields are
//! Ethernet fields or `meta.in_port` / `meta.out_port`; conditions on validity, table hits,
//! those fields and metadata; the primitives `forward`, `drop`, `set` (of whole-byte Ethernet
//! fields and `meta.out_port`) and `swap`. [`check`] names anything else before a map exists.
//!
//! Registers: `r6` the context, `r7`/`r8` the frame's start and end, `r9` the matched table
//! entry while its action runs; `r0`–`r5` are scratch (helper calls clobber them).

use crate::asm::{Alu, Asm, Jmp, Label, Size};
use fastpath_io::bpf::{helper, sk_buff, tc_action, xdp_action, xdp_md, Insn, Reg, R0, R1, R10, R2, R3, R4, R6, R7, R8, R9};
use fastpath_packet::{DropReason, Hdr, HdrSet, Slot, NO_PORT};
use fastpath_pipeline::ir::{
    ActionDef, CmpOp, CondC, FieldRef, Loc, MatchKind, MetaField, Operand, Prim, StageDef, SymStep, TableImpl, MAX_ARGS,
};
use fastpath_pipeline::Program;
use std::os::fd::RawFd;

/// `bpf_map_lookup_elem(map, key)`.
const HELPER_MAP_LOOKUP: i32 = 1;

// Stack layout (offsets from r10): masks take one byte each below MASKS, down to -352.
const OUT_PORT: i16 = -8;
const IN_PORT: i16 = -16;
const HITS: i16 = -24;
const CNT_KEY: i16 = -32;
const KEY: i16 = -96;
const MASKS: i16 = -97;

/// Most key fields of a table the XDP datapath compiles (8 bytes each on the stack).
pub const MAX_KEY_FIELDS: usize = 8;
/// Most tables (a hit bit each in one stack word, as `Meta::hits`; bit 31 would sign-extend).
pub const MAX_TABLES: usize = 31;
/// Size of a table map's value: the action index (u32, padded to 8) and `MAX_ARGS` u64 arguments.
pub const VALUE_SIZE: u32 = 8 + 8 * MAX_ARGS as u32;

/// `bpf_skb_pull_data(skb, len)`: makes the first `len` bytes of a tc program's packet linear.
const HELPER_SKB_PULL_DATA: i32 = 39;

/// The kernel hook a generated program runs at. The pipeline's code is the same at both; the
/// context, the verdicts and the way a frame leaves differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// XDP (driver or generic): an `xdp_md` context, `XDP_*` verdicts, and a redirect through
    /// the port map (`bpf_redirect_map`).
    Xdp,
    /// tc ingress (tcx): an `__sk_buff` context, `TC_ACT_*` verdicts, and `bpf_redirect` to the
    /// output port's ifindex. The skb goes on whole: a 64 KB GSO segment keeps its segment size
    /// and its checksum state, and nothing is copied on the way in.
    Tc,
}

impl Hook {
    fn pass(self) -> i32 {
        match self {
            Hook::Xdp => xdp_action::PASS,
            Hook::Tc => tc_action::OK,
        }
    }
    fn drop(self) -> i32 {
        match self {
            Hook::Xdp => xdp_action::DROP,
            Hook::Tc => tc_action::SHOT,
        }
    }
    /// Context offsets of the receiving device's ifindex, the frame's start and its end.
    fn ctx(self) -> (i16, i16, i16) {
        match self {
            Hook::Xdp => (xdp_md::INGRESS_IFINDEX, xdp_md::DATA, xdp_md::DATA_END),
            Hook::Tc => (sk_buff::IFINDEX, sk_buff::DATA, sk_buff::DATA_END),
        }
    }
}

/// What the XDP datapath cannot run, and where it is in the spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);

/// Where each counter lives in the per-CPU counter array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Number of ports.
    pub ports: usize,
    /// Number of tables.
    pub tables: usize,
}

impl Layout {
    /// Frames received on port `p`.
    pub fn rx(&self, p: usize) -> u32 {
        p as u32
    }
    /// Frames handed to the redirect towards port `p`.
    pub fn tx(&self, p: usize) -> u32 {
        (self.ports + p) as u32
    }
    /// Frames dropped for `r`.
    pub fn drop(&self, r: DropReason) -> u32 {
        (2 * self.ports + r as usize) as u32
    }
    /// Lookups of table `t` that found an entry.
    pub fn hit(&self, t: usize) -> u32 {
        (2 * self.ports + DropReason::COUNT + 2 * t) as u32
    }
    /// Lookups of table `t` that did not.
    pub fn miss(&self, t: usize) -> u32 {
        self.hit(t) + 1
    }
    /// Number of counters (the size of the array).
    pub fn slots(&self) -> u32 {
        self.hit(self.tables)
    }
}

/// The maps a generated program refers to, by fd.
#[derive(Clone, Debug)]
pub struct MapFds {
    /// One hash map per table, in `Program::tables` order.
    pub tables: Vec<RawFd>,
    /// The device map: port index ▸ ifindex.
    pub devmap: RawFd,
    /// The per-CPU counter array ([`Layout`]).
    pub counters: RawFd,
}

fn field_ok(f: &FieldRef, what: &str) -> Result<(), Unsupported> {
    match f.loc {
        Loc::Meta(MetaField::InPort | MetaField::OutPort) => Ok(()),
        Loc::Meta(m) => Err(Unsupported(format!("{what}: metadata {m:?} (the XDP datapath keeps meta.in_port and meta.out_port only)"))),
        Loc::Hdr { slot: Slot::Eth, bytes, .. } if bytes <= 8 && f.width <= 64 => Ok(()),
        Loc::Hdr { .. } => Err(Unsupported(format!("{what}: a field outside the Ethernet header or wider than 64 bits"))),
    }
}

fn writable(f: &FieldRef, what: &str) -> Result<(), Unsupported> {
    field_ok(f, what)?;
    match f.loc {
        Loc::Meta(MetaField::OutPort) => Ok(()),
        Loc::Hdr { shift: 0, bytes, .. } if u16::from(bytes) * 8 == u16::from(f.width) => Ok(()),
        _ => Err(Unsupported(format!("{what}: only whole-byte Ethernet fields and meta.out_port can be written"))),
    }
}

fn operand_ok(o: &Operand, what: &str) -> Result<(), Unsupported> {
    match o {
        Operand::Const(v) if *v > u128::from(u64::MAX) => Err(Unsupported(format!("{what}: a constant wider than 64 bits"))),
        Operand::Field(f) => field_ok(f, what),
        _ => Ok(()),
    }
}

fn prim_ok(p: &Prim, what: &str) -> Result<(), Unsupported> {
    match p {
        Prim::Forward(o) => operand_ok(o, what),
        Prim::Drop(_) => Ok(()),
        Prim::Set(f, o) => {
            writable(f, what)?;
            operand_ok(o, what)
        }
        Prim::Swap(a, b) => {
            writable(a, what)?;
            writable(b, what)
        }
        other => Err(Unsupported(format!("{what}: primitive \"{}\" (the XDP datapath runs forward, drop, set and swap)", other.name()))),
    }
}

fn cond_ok(c: &CondC, what: &str) -> Result<(), Unsupported> {
    match c {
        CondC::Valid(s) if HdrSet::EMPTY.with(Hdr::Eth).has_all(*s) => Ok(()),
        CondC::Valid(_) => Err(Unsupported(format!("{what}: a header other than eth (the XDP datapath parses Ethernet only)"))),
        CondC::Hit(_) => Ok(()),
        CondC::Cmp(f, _, v) => {
            field_ok(f, what)?;
            operand_ok(&Operand::Const(*v), what)
        }
        CondC::MetaCmp(MetaField::InPort | MetaField::OutPort, _, _) => Ok(()),
        CondC::MetaCmp(m, _, _) => Err(Unsupported(format!("{what}: metadata {m:?} in a condition"))),
        CondC::FieldCmp(..) => Err(Unsupported(format!("{what}: a comparison of two fields"))),
        CondC::Not(a) => cond_ok(a, what),
        CondC::And(a, b) | CondC::Or(a, b) => {
            cond_ok(a, what)?;
            cond_ok(b, what)
        }
    }
}

fn action_ok(a: &ActionDef, what: &str) -> Result<(), Unsupported> {
    let what = format!("{what}, action \"{}\"", a.name);
    a.body.iter().try_for_each(|p| prim_ok(p, &what))
}

/// Checks that every part of `p` compiles to XDP; the error names the first part that does not.
///
/// # Errors
/// [`Unsupported`] naming the header, table, action, primitive or condition.
pub fn check(p: &Program) -> Result<(), Unsupported> {
    let only_eth = HdrSet::EMPTY.with(Hdr::Eth);
    if !only_eth.has_all(p.headers) {
        let extra: Vec<&str> = Hdr::ALL.iter().filter(|h| p.headers.has(**h) && **h != Hdr::Eth).map(|h| h.name()).collect();
        return Err(Unsupported(format!("parser header(s) {} (the XDP datapath parses Ethernet only)", extra.join(", "))));
    }
    if p.tables.len() > MAX_TABLES {
        return Err(Unsupported(format!("{} tables (at most {MAX_TABLES})", p.tables.len())));
    }
    for t in &p.tables {
        let what = format!("table \"{}\"", t.name);
        if !matches!(t.imp, TableImpl::Direct | TableImpl::Exact) || t.key.iter().any(|k| k.kind != MatchKind::Exact) {
            return Err(Unsupported(format!("{what}: lpm, ternary and range keys (the XDP datapath compiles exact-match tables)")));
        }
        if t.key.len() > MAX_KEY_FIELDS {
            return Err(Unsupported(format!("{what}: more than {MAX_KEY_FIELDS} key fields")));
        }
        for k in &t.key {
            field_ok(&k.field, &format!("{what}, key field {}", k.name))?;
        }
        for &a in t.actions.iter().chain(std::iter::once(&t.default.0)) {
            action_ok(&p.actions[a], &what)?;
        }
        if let Some(v) = t.default.1.iter().find(|v| **v > u128::from(u64::MAX)) {
            return Err(Unsupported(format!("{what}: default argument {v:#x} wider than 64 bits")));
        }
    }
    if p.tm.is_some() {
        return Err(Unsupported(
            "[tm]: a traffic manager (XDP sends each packet as it is decided; run it on afxdp or afpacket ports)".into(),
        ));
    }
    for (name, s) in &p.stages {
        match s {
            StageDef::Classify(_) | StageDef::L2Switch(_) => {}
            StageDef::Parser | StageDef::Table(_) => {}
            StageDef::Prims(v) => v.iter().try_for_each(|x| prim_ok(x, &format!("stage \"{name}\"")))?,
            StageDef::Conntrack(..) => return Err(Unsupported(format!("stage \"{name}\": conntrack (the XDP datapath is stateless)"))),
        }
    }
    for s in p.ingress.iter().chain(&p.egress) {
        if let SymStep::Mask(_, _, c) = s {
            cond_ok(c, "a branch condition")?;
        }
    }
    Ok(())
}

/// Where an action's `Arg(n)` operands come from.
#[derive(Clone, Copy)]
enum Args<'a> {
    /// The matched entry (`r9` points at its value).
    Entry,
    /// Constants: a table's default action.
    Const(&'a [u128; MAX_ARGS]),
    /// No arguments (a control block).
    None,
}

struct Gen<'a> {
    a: Asm,
    p: &'a Program,
    maps: &'a MapFds,
    layout: Layout,
    /// Some condition reads a table's hit bit: only then are the bits kept (per packet).
    hits: bool,
    hook: Hook,
}

/// True when `c` reads a table's hit bit.
fn reads_hits(c: &CondC) -> bool {
    match c {
        CondC::Hit(_) => true,
        CondC::Not(a) => reads_hits(a),
        CondC::And(a, b) | CondC::Or(a, b) => reads_hits(a) || reads_hits(b),
        _ => false,
    }
}

fn jmp_of(op: CmpOp) -> Jmp {
    match op {
        CmpOp::Eq => Jmp::Eq,
        CmpOp::Ne => Jmp::Ne,
        CmpOp::Lt => Jmp::Lt,
        CmpOp::Le => Jmp::Le,
        CmpOp::Gt => Jmp::Gt,
        CmpOp::Ge => Jmp::Ge,
    }
}

/// Splits `n` bytes (1..=8) into loads of 8, 4, 2 or 1 bytes: (offset from the first, size).
fn chunks(n: u8) -> Vec<(u8, u8)> {
    if n == 8 {
        return vec![(0, 8)];
    }
    let mut out = Vec::new();
    let mut off = 0;
    for size in [4u8, 2, 1] {
        if n - off >= size {
            out.push((off, size));
            off += size;
        }
    }
    out
}

impl Gen<'_> {
    fn mask_off(m: u8) -> i16 {
        MASKS - i16::from(m)
    }

    /// Loads field `f` (checked by [`field_ok`]) into `dst`, using `tmp`.
    fn read_field(&mut self, f: &FieldRef, dst: Reg, tmp: Reg) {
        match f.loc {
            Loc::Meta(MetaField::InPort) => self.a.ldx(Size::Dw, dst, R10, IN_PORT),
            Loc::Meta(_) => self.a.ldx(Size::Dw, dst, R10, OUT_PORT),
            Loc::Hdr { byte, bytes, shift, .. } => {
                for (i, (off, n)) in chunks(bytes).into_iter().enumerate() {
                    let r = if i == 0 { dst } else { tmp };
                    self.a.ldx(Size::of(usize::from(n)), r, R7, i16::from(byte + off));
                    if n > 1 {
                        self.a.be(r, i32::from(n) * 8);
                    }
                    if i > 0 {
                        self.a.alu_imm(Alu::Lsh, dst, i32::from(n) * 8);
                        self.a.alu_reg(Alu::Or, dst, tmp);
                    }
                }
                if shift > 0 {
                    self.a.alu_imm(Alu::Rsh, dst, i32::from(shift));
                }
                if u16::from(f.width) < u16::from(bytes) * 8 {
                    self.and_width(dst, tmp, f.width);
                }
            }
        }
    }

    /// `dst &= (1 << width) - 1`.
    fn and_width(&mut self, dst: Reg, tmp: Reg, width: u8) {
        if width >= 64 {
            return;
        }
        let m = (1u64 << width) - 1;
        if m <= i32::MAX as u64 {
            self.a.alu_imm(Alu::And, dst, m as i32);
        } else {
            self.a.mov_const(tmp, m);
            self.a.alu_reg(Alu::And, dst, tmp);
        }
    }

    /// Stores `src` into field `f` (checked by [`writable`]), using `tmp`; `src` is kept.
    fn write_field(&mut self, f: &FieldRef, src: Reg, tmp: Reg) {
        match f.loc {
            Loc::Meta(_) => {
                self.a.alu_reg(Alu::Mov, tmp, src);
                self.a.alu_imm(Alu::And, tmp, 0xffff);
                self.a.stx(Size::Dw, R10, OUT_PORT, tmp);
            }
            Loc::Hdr { byte, bytes, .. } => {
                for (off, n) in chunks(bytes) {
                    let after = bytes - off - n;
                    self.a.alu_reg(Alu::Mov, tmp, src);
                    if after > 0 {
                        self.a.alu_imm(Alu::Rsh, tmp, i32::from(after) * 8);
                    }
                    if n > 1 {
                        self.a.be(tmp, i32::from(n) * 8);
                    }
                    self.a.stx(Size::of(usize::from(n)), R7, i16::from(byte + off), tmp);
                }
            }
        }
    }

    /// Loads operand `o` into `dst` (`tmp` is scratch).
    fn operand(&mut self, o: &Operand, args: Args<'_>, dst: Reg, tmp: Reg) {
        match *o {
            Operand::Const(v) => self.a.mov_const(dst, v as u64),
            Operand::Arg(n) => match args {
                Args::Entry => self.a.ldx(Size::Dw, dst, R9, 8 + 8 * i16::from(n)),
                Args::Const(v) => self.a.mov_const(dst, v[usize::from(n) % MAX_ARGS] as u64),
                Args::None => self.a.mov_const(dst, 0),
            },
            Operand::Field(f) => self.read_field(&f, dst, tmp),
        }
    }

    /// Adds one to counter `idx` (clobbers r0–r5).
    fn count(&mut self, idx: u32) {
        self.a.st(Size::W, R10, CNT_KEY, idx as i32);
        self.count_tail();
    }

    /// Adds one to the counter whose index is in `r` (clobbers r0–r5).
    fn count_reg(&mut self, r: Reg) {
        self.a.stx(Size::W, R10, CNT_KEY, r);
        self.count_tail();
    }

    fn count_tail(&mut self) {
        let skip = self.a.label();
        self.a.raw(&Insn::ld_map_fd(R1, self.maps.counters));
        self.a.alu_reg(Alu::Mov, R2, R10);
        self.a.alu_imm(Alu::Add, R2, i32::from(CNT_KEY));
        self.a.call(HELPER_MAP_LOOKUP);
        self.a.jmp_imm(Jmp::Eq, R0, 0, skip);
        self.a.ldx(Size::Dw, R1, R0, 0);
        self.a.alu_imm(Alu::Add, R1, 1);
        self.a.stx(Size::Dw, R0, 0, R1);
        self.a.bind(skip);
    }

    fn drop(&mut self, r: DropReason) {
        self.count(self.layout.drop(r));
        self.a.ret(self.hook.drop());
    }

    /// Drops the packet as `no_verdict` unless an output port was chosen; leaves it in `r1`.
    fn drop_unless_forwarded(&mut self) {
        let have_out = self.a.label();
        self.a.ldx(Size::Dw, R1, R10, OUT_PORT);
        self.a.jmp_imm(Jmp::Ne, R1, i32::from(NO_PORT), have_out);
        self.drop(DropReason::NoVerdict);
        self.a.bind(have_out);
    }

    fn prim(&mut self, p: &Prim, args: Args<'_>) {
        match p {
            Prim::Forward(o) => {
                self.operand(o, args, R1, R2);
                self.a.alu_imm(Alu::And, R1, 0xffff);
                self.a.stx(Size::Dw, R10, OUT_PORT, R1);
            }
            Prim::Drop(r) => self.drop(*r),
            Prim::Set(f, o) => {
                self.operand(o, args, R3, R1);
                self.and_width(R3, R1, f.width);
                self.write_field(f, R3, R1);
            }
            Prim::Swap(x, y) => self.swap(x, y),
            // `check` refused every other primitive.
            _ => unreachable!("primitive {} passed the XDP check", p.name()),
        }
    }

    /// Runs `body`; false when it ends the packet (a drop: nothing after it is reachable, and
    /// the verifier refuses unreachable code).
    fn body(&mut self, body: &[Prim], args: Args<'_>) -> bool {
        for x in body {
            self.prim(x, args);
            if matches!(x, Prim::Drop(_)) {
                return false;
            }
        }
        true
    }

    fn swap(&mut self, x: &FieldRef, y: &FieldRef) {
        self.read_field(x, R3, R1);
        self.read_field(y, R4, R1);
        self.write_field(x, R4, R1);
        self.write_field(y, R3, R1);
    }

    fn cond(&mut self, c: &CondC, t: Label, f: Label) {
        match c {
            CondC::Valid(_) => self.a.ja(t),
            CondC::Hit(bit) => {
                self.a.ldx(Size::Dw, R1, R10, HITS);
                self.a.alu_imm(Alu::Rsh, R1, i32::from(*bit));
                self.a.alu_imm(Alu::And, R1, 1);
                self.a.jmp_imm(Jmp::Ne, R1, 0, t);
                self.a.ja(f);
            }
            CondC::Cmp(fld, op, v) => {
                self.read_field(fld, R1, R2);
                self.a.mov_const(R2, *v as u64);
                self.a.jmp_reg(jmp_of(*op), R1, R2, t);
                self.a.ja(f);
            }
            CondC::MetaCmp(m, op, v) => {
                let off = if *m == MetaField::InPort { IN_PORT } else { OUT_PORT };
                self.a.ldx(Size::Dw, R1, R10, off);
                self.a.mov_const(R2, u64::from(*v));
                self.a.jmp_reg(jmp_of(*op), R1, R2, t);
                self.a.ja(f);
            }
            // Refused by `cond_ok` before code is generated.
            CondC::FieldCmp(..) => self.a.ja(f),
            CondC::Not(x) => self.cond(x, f, t),
            CondC::And(x, y) => {
                let mid = self.a.label();
                self.cond(x, mid, f);
                self.a.bind(mid);
                self.cond(y, t, f);
            }
            CondC::Or(x, y) => {
                let mid = self.a.label();
                self.cond(x, t, mid);
                self.a.bind(mid);
                self.cond(y, t, f);
            }
        }
    }

    fn set_mask(&mut self, dst: u8, yes: Label, no: Label) {
        let end = self.a.label();
        self.a.bind(yes);
        self.a.st(Size::B, R10, Self::mask_off(dst), 1);
        self.a.ja(end);
        self.a.bind(no);
        self.a.st(Size::B, R10, Self::mask_off(dst), 0);
        self.a.bind(end);
    }

    fn steps(&mut self, steps: &[SymStep]) {
        for s in steps {
            match s {
                SymStep::Mask(dst, src, c) => {
                    let (yes, no) = (self.a.label(), self.a.label());
                    self.a.ldx(Size::B, R1, R10, Self::mask_off(*src));
                    self.a.jmp_imm(Jmp::Eq, R1, 0, no);
                    self.cond(c, yes, no);
                    self.set_mask(*dst, yes, no);
                }
                SymStep::AndNot(dst, src, sub) => {
                    let (yes, no) = (self.a.label(), self.a.label());
                    self.a.ldx(Size::B, R1, R10, Self::mask_off(*src));
                    self.a.jmp_imm(Jmp::Eq, R1, 0, no);
                    self.a.ldx(Size::B, R1, R10, Self::mask_off(*sub));
                    self.a.jmp_imm(Jmp::Ne, R1, 0, no);
                    self.a.ja(yes);
                    self.set_mask(*dst, yes, no);
                }
                SymStep::Run(mask, stage) => {
                    let skip = self.a.label();
                    self.a.ldx(Size::B, R1, R10, Self::mask_off(*mask));
                    self.a.jmp_imm(Jmp::Eq, R1, 0, skip);
                    self.stage(*stage);
                    self.a.bind(skip);
                }
            }
        }
    }

    fn stage(&mut self, s: usize) {
        let p = self.p;
        match &p.stages[s].1 {
            StageDef::Parser => {}
            StageDef::Table(t) => self.table(*t),
            StageDef::Prims(v) => {
                self.body(v, Args::None);
            }
            StageDef::Conntrack(..) | StageDef::Classify(_) | StageDef::L2Switch(_) => {
                unreachable!("conntrack and [tm] do not pass the XDP check")
            }
        }
    }

    fn table(&mut self, t: usize) {
        let p = self.p;
        let def = &p.tables[t];
        for (i, k) in def.key.iter().enumerate() {
            self.read_field(&k.field, R3, R1);
            self.a.stx(Size::Dw, R10, KEY + 8 * i as i16, R3);
        }
        let (miss, end) = (self.a.label(), self.a.label());
        self.a.raw(&Insn::ld_map_fd(R1, self.maps.tables[t]));
        self.a.alu_reg(Alu::Mov, R2, R10);
        self.a.alu_imm(Alu::Add, R2, i32::from(KEY));
        self.a.call(HELPER_MAP_LOOKUP);
        self.a.jmp_imm(Jmp::Eq, R0, 0, miss);
        self.a.alu_reg(Alu::Mov, R9, R0);
        self.count(self.layout.hit(t));
        if self.hits {
            self.a.ldx(Size::Dw, R1, R10, HITS);
            self.a.alu_imm(Alu::Or, R1, 1 << t);
            self.a.stx(Size::Dw, R10, HITS, R1);
        }
        self.a.ldx(Size::W, R1, R9, 0);
        for &ai in &def.actions {
            let next = self.a.label();
            self.a.jmp_imm(Jmp::Ne, R1, ai as i32, next);
            if self.body(&p.actions[ai].body, Args::Entry) {
                self.a.ja(end);
            }
            self.a.bind(next);
        }
        // An entry naming an action the table does not allow cannot be written (the entries
        // parser refuses it); were it there, it would count as a miss.
        self.a.bind(miss);
        self.count(self.layout.miss(t));
        match def.default_drop {
            Some(r) => self.drop(r),
            None => {
                self.body(&p.actions[def.default.0].body, Args::Const(&def.default.1));
            }
        }
        self.a.bind(end);
    }
}

/// The kfunc through which a driver hands over a VLAN tag it keeps outside the frame (kernel
/// ≥ 6.8; veth, mlx5, ice, …): `int bpf_xdp_metadata_rx_vlan_tag(const struct xdp_md *ctx,
/// __be16 *vlan_proto, u16 *vlan_tci)`. Callable only from a program bound to the device.
pub const RX_VLAN_TAG_KFUNC: &str = "bpf_xdp_metadata_rx_vlan_tag";

/// Instructions of [`vlan_restore_prologue`].
pub const VLAN_PROLOGUE_LEN: usize = 34;

/// A prologue that puts back the VLAN tag a driver holds outside the frame, so the pipeline
/// sees (and forwards) the frame as it was on the wire: on veth, a tag that crossed as skb
/// metadata (a VLAN device or tc `bpf_skb_vlan_push` on the sender with tx-vlan offload on); on
/// a NIC, a tag its rx-vlan offload stripped into the descriptor. `kfunc_id` is the BTF id of
/// [`RX_VLAN_TAG_KFUNC`]; the program must be loaded bound to the port's device. It ends with
/// `r1` = the context, as at entry, so [`generate`]'s code follows it unchanged (BPF jumps are
/// relative). Uses the stack at `r10 - 8` before the pipeline's code initialises it.
///
/// ```text
///   if rx_vlan_tag(ctx, &proto, &tci) == 0:          (no tag held outside the frame: this call only)
///       if adjust_head(ctx, -4) == 0:
///           if data + 16 > data_end                  -> adjust_head(ctx, 4)  (cannot happen)
///           else data[0..12] = data[4..16]; data[12..14] = proto; data[14..16] = htons(tci)
///   r1 = ctx
/// ```
pub fn vlan_restore_prologue(kfunc_id: u32) -> [Insn; VLAN_PROLOGUE_LEN] {
    let head = [
        Insn::mov64_reg(R6, R1), // 0: r6 = ctx
        Insn::st_w(R10, -8, 0),  // 1: proto at fp-8, tci at fp-6
        Insn::mov64_reg(R1, R6),
        Insn::mov64_reg(R2, R10),
        Insn::add64_imm(R2, -8),
        Insn::mov64_reg(R3, R10),
        Insn::add64_imm(R3, -6),
        Insn::call_kfunc(kfunc_id),
        Insn::jne_imm(R0, 0, 24), // 8: no tag held outside the frame -> 33
    ];
    let mut out = [Insn::default(); VLAN_PROLOGUE_LEN];
    out[..9].copy_from_slice(&head);
    out[9..33].copy_from_slice(&fastpath_io::bpf::reinsert_vlan_tag());
    out[33] = Insn::mov64_reg(R1, R6); // 33: r1 = ctx for the pipeline's code
    out
}

/// A compare chain: for the first `(from, to)` with `r2 == from`, `r1 = to` and a jump to
/// `found`; falls through when none matches.
fn translate(a: &mut Asm, pairs: impl Iterator<Item = (i32, i32)>, found: Label) {
    for (from, to) in pairs {
        let next = a.label();
        a.jmp_imm(Jmp::Ne, R2, from, next);
        a.alu_imm(Alu::Mov, R1, to);
        a.ja(found);
        a.bind(next);
    }
}

/// Generates the program for `p` (which must pass [`check`]) over ports whose ifindexes are
/// `ifindexes` (port `i` is `ifindexes[i]`), referring to the maps in `maps`, for `hook`.
pub fn generate(p: &Program, ifindexes: &[u32], maps: &MapFds, hook: Hook) -> Vec<Insn> {
    let layout = Layout { ports: ifindexes.len(), tables: p.tables.len() };
    let hits = p.ingress.iter().chain(&p.egress).any(|s| matches!(s, SymStep::Mask(_, _, c) if reads_hits(c)));
    let mut g = Gen { a: Asm::new(), p, maps, layout, hits, hook };
    let (ctx_ifindex, ctx_data, ctx_data_end) = hook.ctx();
    let a = &mut g.a;
    a.alu_reg(Alu::Mov, R6, R1);
    // in_port from the receiving device.
    a.ldx(Size::W, R2, R6, ctx_ifindex);
    let have = a.label();
    translate(a, ifindexes.iter().enumerate().map(|(port, &ifx)| (ifx as i32, port as i32)), have);
    a.ret(hook.pass());
    a.bind(have);
    a.stx(Size::Dw, R10, IN_PORT, R1);
    a.st(Size::Dw, R10, OUT_PORT, i32::from(NO_PORT));
    if g.hits {
        a.st(Size::Dw, R10, HITS, 0);
    }
    // Every mask register the steps name (the compiler's "empty" register 255 among them)
    // starts empty, register 0 (all lanes) full: one stack byte each, at most 256.
    let mut regs = vec![0u8];
    for s in p.ingress.iter().chain(&p.egress) {
        match *s {
            SymStep::Mask(d, x, _) => regs.extend([d, x]),
            SymStep::AndNot(d, x, y) => regs.extend([d, x, y]),
            SymStep::Run(m, _) => regs.push(m),
        }
    }
    regs.sort_unstable();
    regs.dedup();
    for m in regs {
        a.st(Size::B, R10, Gen::mask_off(m), i32::from(m == 0));
    }
    g.count_reg(R1);
    let a = &mut g.a;
    let parsed = a.label();
    a.ldx(Size::W, R7, R6, ctx_data);
    a.ldx(Size::W, R8, R6, ctx_data_end);
    a.alu_reg(Alu::Mov, R1, R7);
    a.alu_imm(Alu::Add, R1, 14);
    a.jmp_reg(Jmp::Le, R1, R8, parsed);
    if hook == Hook::Tc {
        // An skb's linear part may end before the Ethernet header does (a frame built of
        // pages): pull 14 bytes into it and look again.
        a.alu_reg(Alu::Mov, R1, R6);
        a.alu_imm(Alu::Mov, R2, 14);
        a.call(HELPER_SKB_PULL_DATA);
        a.ldx(Size::W, R7, R6, ctx_data);
        a.ldx(Size::W, R8, R6, ctx_data_end);
        a.alu_reg(Alu::Mov, R1, R7);
        a.alu_imm(Alu::Add, R1, 14);
        a.jmp_reg(Jmp::Le, R1, R8, parsed);
    }
    g.drop(DropReason::EthTruncated);
    g.a.bind(parsed);
    g.steps(&p.ingress);
    // Egress sees forwarded packets only; the others end as no_verdict either way.
    g.drop_unless_forwarded();
    if !p.egress.is_empty() {
        g.steps(&p.egress);
        g.drop_unless_forwarded();
    }
    // The verdict.
    let a = &mut g.a;
    let in_range = a.label();
    a.jmp_imm(Jmp::Lt, R1, ifindexes.len() as i32, in_range);
    g.drop(DropReason::PortDown);
    let a = &mut g.a;
    a.bind(in_range);
    a.alu_imm(Alu::Add, R1, layout.ports as i32);
    g.count_reg(R1);
    let a = &mut g.a;
    a.ldx(Size::Dw, R2, R10, OUT_PORT);
    match hook {
        Hook::Xdp => {
            a.raw(&Insn::ld_map_fd(R1, maps.devmap));
            a.alu_imm(Alu::Mov, R3, xdp_action::DROP);
            a.call(helper::REDIRECT_MAP);
        }
        Hook::Tc => {
            // The port's ifindex by a compare chain (the port is in range, checked above), then
            // out of that device's egress.
            let found = a.label();
            translate(a, ifindexes.iter().enumerate().map(|(port, &ifx)| (port as i32, ifx as i32)), found);
            a.ret(tc_action::SHOT);
            a.bind(found);
            a.alu_imm(Alu::Mov, R2, 0);
            a.call(helper::REDIRECT);
        }
    }
    a.exit();
    g.a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_width() {
        for n in 1..=8u8 {
            let c = chunks(n);
            let mut at = 0;
            for (off, size) in &c {
                assert_eq!(*off, at);
                at += size;
            }
            assert_eq!(at, n, "{c:?}");
        }
        assert_eq!(chunks(6), vec![(0, 4), (4, 2)]);
    }

    fn prog(spec: &str) -> Program {
        fastpath_pipeline::compile("t.toml", spec).unwrap()
    }

    #[test]
    fn l2fwd_passes_the_check_and_the_router_is_refused_with_its_reason() {
        let l2 = prog(include_str!("../../../pipelines/l2fwd.toml"));
        check(&l2).unwrap();
        let r = prog(include_str!("../../../pipelines/router.toml"));
        let e = check(&r).unwrap_err().to_string();
        assert!(e.contains("parser header(s) vlan, ipv4, ipv6"), "{e}");
        let ct = prog(
            r#"
name = "x"
[parser]
headers = ["eth"]
[[table]]
name = "l2"
key = [{ field = "eth.dst", match = "exact" }]
actions = ["forward", "to_control"]
size = 4
default = "drop"
[control]
ingress = "apply l2"
"#,
        );
        let e = check(&ct).unwrap_err().to_string();
        assert!(e.contains("table \"l2\", action \"to_control\": primitive \"to_control\""), "{e}");
    }

    #[test]
    fn layout_puts_every_counter_in_its_own_slot() {
        let l = Layout { ports: 2, tables: 3 };
        let mut all: Vec<u32> = (0..2).flat_map(|p| [l.rx(p), l.tx(p)]).collect();
        all.extend(DropReason::ALL.iter().map(|r| l.drop(*r)));
        all.extend((0..3).flat_map(|t| [l.hit(t), l.miss(t)]));
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
        assert_eq!(*all.last().unwrap() + 1, l.slots());
    }
}
