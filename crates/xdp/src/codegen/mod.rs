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
//!                     else bpf_redirect_map(devmap, out_port) at XDP; at tc, bpf_redirect(ifindex)
//!                     or, into a veth port's peer in another namespace, bpf_redirect_peer(ifindex)
//! ```
//!
//! A drop returns `XDP_DROP` at once, so "live lanes" need no register. Every packet, drop and
//! table hit or miss is counted in one per-CPU array ([`Layout`]), summed by the control side.
//!
//! What compiles (docs/xdp.md has the list): the header walk of `parse` (Ethernet, IPv4,
//! UDP/TCP/ICMP, VXLAN and the inner frame), exact tables on BPF hash maps, classifier tables
//! (`acl`), conntrack with TCP window checks (`ct`, `tcpwin`), meters (`meter`), VXLAN decap and
//! encap (`vxlan`), field writes, conditions and the control flow. [`check`] names anything
//! else before a map exists.
//!
//! Registers: `r6` the context, `r7`/`r8` the frame's start and end (reloaded after any helper
//! that moves the packet), `r9` the matched table entry while its action runs (a header's
//! offset while parsing); `r0`–`r5` are scratch (helper calls clobber them). A packet's
//! metadata and header offsets live on the stack (the layout below).

mod acl;
mod ct;
mod meter;
mod parse;
mod tcpwin;
mod vxlan;

use crate::asm::{Alu, Asm, Jmp, Label, Size};
use fastpath_io::bpf::{helper, sk_buff, tc_action, xdp_action, xdp_md, Insn, Reg, R0, R1, R10, R2, R3, R4, R5, R6, R7, R8, R9};
use fastpath_packet::{DropReason, Hdr, HdrSet, Slot, NO_PORT};
use fastpath_pipeline::ir::{ActionDef, CmpOp, CondC, FieldRef, Loc, MatchKind, MetaField, Operand, Prim, StageDef, SymStep, MAX_ARGS};
use fastpath_pipeline::Program;
use std::os::fd::RawFd;

/// `bpf_map_lookup_elem(map, key)`.
const HELPER_MAP_LOOKUP: i32 = 1;

// Stack layout (offsets from r10). The mask registers the steps name take one byte each below
// MASKS, numbered densely in the order of their register number.
const OUT_PORT: i16 = -8;
const IN_PORT: i16 = -16;
const HITS: i16 = -24;
const CNT_KEY: i16 = -32;
const KEY: i16 = -96;
/// The frame's length (an skb's whole length at tc, every buffer's at XDP).
const FLEN: i16 = -104;
/// The headers the parser found (`HdrSet` bits).
const VALID: i16 = -112;
/// While parsing: the upper protocol of the IP header just parsed.
const PROTO: i16 = -120;
/// While parsing: the frame offset where that IP header's payload ends.
const PEND: i16 = -128;
/// Slot `s`'s frame offset is at `SLOTS - 8 * s`.
const SLOTS: i16 = -136;
/// User register `r` is at `REGS - 8 * r`.
const REGS: i16 = SLOTS - 8 * Slot::COUNT as i16;
/// `meta.hash` (the flow hash `hash` and `vxlan_encap` compute once).
const HASH: i16 = REGS - 8 * fastpath_packet::meta::REGS as i16;
/// Bytes in front of the frame's logical start: a `vxlan_decap` is carried out on the frame
/// only when the packet leaves without a `vxlan_encap` to fill that room again.
const START: i16 = HASH - 8;
/// The last `conntrack` stage's flags and the cached verdict (`Meta::reserved`: flags in the
/// low byte, the verdict in the high byte).
const CT: i16 = START - 8;
/// 1 when the packet has a flow (new or established) in that stage's table.
const FLOW: i16 = CT - 8;
/// That flow's key (24 bytes).
const CTKEY: i16 = FLOW - 24;
/// Scratch words of the stages (conntrack: the packet's side and the clock; a meter: the clock
/// and the saved `r9`).
const LOOP_I: i16 = CTKEY - 8;
const COUNT: i16 = LOOP_I - 8;
/// `meta.color`.
const COLOR: i16 = COUNT - 8;
/// A classifier's loop iterator (`struct bpf_iter_num`, 8 bytes).
const ITER: i16 = COLOR - 8;
/// The TCP segment conntrack's window checks look at (24 bytes, `tcpwin`).
const SEG: i16 = ITER - 24;
/// Scratch words of the TCP tracker (40 bytes, `tcpwin`).
const TMP: i16 = SEG - 40;
const MASKS: i16 = TMP - 8;
/// Most mask registers the stack holds below [`MASKS`].
const MAX_MASKS: usize = (512 + MASKS as isize) as usize;

/// `bpf_xdp_adjust_head(xdp_md, delta)`.
const HELPER_XDP_ADJUST_HEAD: i32 = 44;
/// `bpf_skb_adjust_room(skb, len_diff, mode, flags)`.
const HELPER_SKB_ADJUST_ROOM: i32 = 50;
/// `BPF_ADJ_ROOM_MAC`: room is made or taken right after the Ethernet header.
const ADJ_ROOM_MAC: i32 = 1;
/// `BPF_F_ADJ_ROOM_FIXED_GSO`: a GSO packet keeps its segment size.
const ADJ_FIXED_GSO: u64 = 1;
/// The flags of a VXLAN encapsulation's room (`BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | _ENCAP_L4_UDP |
/// _ENCAP_L2_ETH | _ENCAP_L2(14)`): a GSO packet becomes a UDP-tunnel GSO packet.
const ADJ_ENCAP_VXLAN: u64 = ADJ_FIXED_GSO | 1 << 1 | 1 << 4 | 1 << 6 | 14 << 56;

/// Most key fields of a table the XDP datapath compiles (8 bytes each on the stack).
pub const MAX_KEY_FIELDS: usize = 8;
/// Most tables (a hit bit each in one stack word, as `Meta::hits`; bit 31 would sign-extend).
pub const MAX_TABLES: usize = 31;
/// Size of a table map's value: the action index (u32, padded to 8) and `MAX_ARGS` u64 arguments.
pub const VALUE_SIZE: u32 = 8 + 8 * MAX_ARGS as u32;

/// `bpf_skb_pull_data(skb, len)`: makes the first `len` bytes of a tc program's packet linear.
const HELPER_SKB_PULL_DATA: i32 = 39;
/// `bpf_xdp_get_buff_len(xdp_md)`: the frame's length over all its buffers.
const HELPER_XDP_GET_BUFF_LEN: i32 = 188;

/// The headers the generated parser walks: Ethernet ▸ IPv4 ▸ UDP / TCP / ICMP ▸ VXLAN ▸ the
/// same inside (the shapes of an IPv4 overlay).
const PARSED: HdrSet = HdrSet::EMPTY
    .with(Hdr::Eth)
    .with(Hdr::Ipv4)
    .with(Hdr::Udp)
    .with(Hdr::Tcp)
    .with(Hdr::Icmp)
    .with(Hdr::Vxlan)
    .with(Hdr::InnerEth)
    .with(Hdr::InnerIpv4)
    .with(Hdr::InnerUdp)
    .with(Hdr::InnerTcp)
    .with(Hdr::InnerIcmp);

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
    /// One LRU hash map of flows per conntrack table ([`CT_KEY_SIZE`] / [`CT_VALUE_SIZE`]).
    pub conntracks: Vec<RawFd>,
    /// Per table, which of a classifier table's two rule sets is live (a u32 array).
    pub acl_sel: RawFd,
    /// One array map of meter states per meter array ([`METER_VALUE_SIZE`]).
    pub meters: Vec<RawFd>,
    /// BTF ids of the kfuncs `bpf_iter_num_new`, `_next` and `_destroy` (the classifier's
    /// loop); zeros when no table needs them.
    pub iter_num: [u32; 3],
}

/// The kfuncs of [`MapFds::iter_num`], by name.
pub const ITER_NUM_KFUNCS: [&str; 3] = ["bpf_iter_num_new", "bpf_iter_num_next", "bpf_iter_num_destroy"];

pub use acl::{encode as encode_match, is_classifier, rule_size, set_size, MAX_RULES};
pub use ct::{CT_KEY_SIZE, CT_VALUE_SIZE};
pub use meter::{AWARE, CBS, CIR, EBS_PBS, KIND, METER_VALUE_SIZE, PIR, TOKENS_A, TOKENS_B};

fn meta_ok(m: MetaField, what: &str) -> Result<(), Unsupported> {
    match m {
        MetaField::InPort | MetaField::OutPort => Ok(()),
        MetaField::Reg(r) if usize::from(r) < fastpath_packet::meta::REGS => Ok(()),
        MetaField::CtFlag(_) | MetaField::CtVerdict | MetaField::Color => Ok(()),
        m => Err(Unsupported(format!(
            "{what}: metadata {m:?} (the XDP datapath keeps meta.in_port, meta.out_port and the spec's registers)"
        ))),
    }
}

fn field_ok(f: &FieldRef, what: &str) -> Result<(), Unsupported> {
    match f.loc {
        Loc::Meta(m) => meta_ok(m, what),
        Loc::Hdr { bytes, .. } if bytes <= 8 && f.width <= 64 => Ok(()),
        Loc::Hdr { .. } => Err(Unsupported(format!("{what}: a field wider than 64 bits"))),
    }
}

/// The 16-bit-aligned span of header bytes a write to `f` rewrites (from, to), relative to its
/// header's start; headers start at even frame offsets in every shape the parser walks.
fn span(byte: u8, bytes: u8) -> (u8, u8) {
    (byte & !1, (byte + bytes + 1) & !1)
}

fn writable(f: &FieldRef, what: &str) -> Result<(), Unsupported> {
    field_ok(f, what)?;
    match f.loc {
        Loc::Meta(MetaField::InPort | MetaField::CtFlag(_) | MetaField::CtVerdict) => {
            Err(Unsupported(format!("{what}: meta.in_port and ct.* cannot be written")))
        }
        Loc::Meta(_) => Ok(()),
        _ if f.csum.l4 => Err(Unsupported(format!("{what}: a field the UDP/TCP checksum covers (addresses and ports)"))),
        Loc::Hdr { byte, bytes, .. } if span(byte, bytes).1 - span(byte, bytes).0 <= 8 => Ok(()),
        Loc::Hdr { .. } => Err(Unsupported(format!("{what}: a field spanning more than 8 bytes"))),
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
        Prim::VxlanDecap | Prim::Hash | Prim::CtLoad(_) => Ok(()),
        Prim::CtCommit(_, o) | Prim::Meter(_, o, _) => operand_ok(o, what),
        Prim::VxlanEncap(ops) => ops.iter().try_for_each(|o| operand_ok(o, what)),
        other => Err(Unsupported(format!(
            "{what}: primitive \"{}\" (the XDP datapath runs forward, drop, set, swap, hash, vxlan_decap and vxlan_encap)",
            other.name()
        ))),
    }
}

fn cond_ok(c: &CondC, what: &str) -> Result<(), Unsupported> {
    match c {
        CondC::Valid(_) => Ok(()),
        CondC::Hit(_) => Ok(()),
        CondC::Cmp(f, _, v) => {
            field_ok(f, what)?;
            operand_ok(&Operand::Const(*v), what)
        }
        CondC::MetaCmp(m, _, _) => meta_ok(*m, what),
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
    if !PARSED.has_all(p.headers) {
        let extra: Vec<&str> = Hdr::ALL.iter().filter(|h| p.headers.has(**h) && !PARSED.has(**h)).map(|h| h.name()).collect();
        return Err(Unsupported(format!(
            "parser header(s) {} (the XDP datapath parses eth, ipv4, udp, tcp, icmp, vxlan and their inner_ twins)",
            extra.join(", ")
        )));
    }
    if p.verify_ipv4_checksum {
        return Err(Unsupported("[parser] verify_ipv4_checksum (the XDP datapath does not verify IPv4 header checksums)".into()));
    }
    if p.tables.len() > MAX_TABLES {
        return Err(Unsupported(format!("{} tables (at most {MAX_TABLES})", p.tables.len())));
    }
    for t in &p.tables {
        let what = format!("table \"{}\"", t.name);
        if acl::is_classifier(t) && t.size > acl::MAX_RULES {
            return Err(Unsupported(format!(
                "{what}: {} rules of lpm, ternary or range keys (the XDP datapath's classifier takes at most {})",
                t.size,
                acl::MAX_RULES
            )));
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
            StageDef::Conntrack(_, zone) => {
                if p.conntracks.len() > 1 {
                    return Err(Unsupported(format!("{} conntrack tables (the XDP datapath keeps one)", p.conntracks.len())));
                }
                if let Some(z) = zone {
                    operand_ok(z, &format!("stage \"{name}\": the zone"))?;
                }
            }
        }
    }
    for s in p.ingress.iter().chain(&p.egress) {
        if let SymStep::Mask(_, _, c) = s {
            cond_ok(c, "a branch condition")?;
        }
    }
    if mask_regs(p).len() > MAX_MASKS {
        return Err(Unsupported(format!("{} branch masks (at most {MAX_MASKS} fit the BPF stack)", mask_regs(p).len())));
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
    /// Stack offset of each mask register the steps name.
    masks: Vec<i16>,
    /// The program decapsulates or encapsulates: header addresses count from START.
    moves: bool,
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
    fn mask_off(&self, m: u8) -> i16 {
        self.masks[usize::from(m)]
    }

    /// Loads metadata field `m` (checked by [`meta_ok`]) into `dst`.
    fn read_meta(&mut self, m: MetaField, dst: Reg) {
        match m {
            MetaField::CtFlag(n) => {
                self.a.ldx(Size::Dw, dst, R10, CT);
                self.a.alu_imm(Alu::Rsh, dst, i32::from(n));
                self.a.alu_imm(Alu::And, dst, 1);
            }
            MetaField::CtVerdict => {
                self.a.ldx(Size::Dw, dst, R10, CT);
                self.a.alu_imm(Alu::Rsh, dst, 8);
            }
            m => self.a.ldx(Size::Dw, dst, R10, Self::meta_off(m)),
        }
    }

    /// Where metadata field `m` (checked by [`meta_ok`]) lives on the stack.
    fn meta_off(m: MetaField) -> i16 {
        match m {
            MetaField::InPort => IN_PORT,
            MetaField::Reg(r) => REGS - 8 * i16::from(r),
            MetaField::Color => COLOR,
            _ => OUT_PORT,
        }
    }

    /// Points `r5` at the header in `slot` when the packet has the headers `needs` (or `alt`,
    /// when not empty) and `len` bytes of it are in the linear data; else jumps to `absent`.
    /// Clobbers `t1` and `t2`. The Ethernet header is always there: `r7` itself.
    fn header(&mut self, (slot, needs, alt): (Slot, HdrSet, HdrSet), len: u8, (t1, t2): (Reg, Reg), absent: Label) -> Reg {
        if slot == Slot::Eth && !self.moves {
            return R7;
        }
        if slot != Slot::Eth {
            let ok = self.a.label();
            for set in [needs, alt] {
                if set == HdrSet::EMPTY {
                    continue;
                }
                self.a.ldx(Size::Dw, t1, R10, VALID);
                self.a.mov_const(t2, u64::from(set.0));
                self.a.alu_reg(Alu::And, t1, t2);
                self.a.jmp_reg(Jmp::Eq, t1, t2, ok);
            }
            self.a.ja(absent);
            self.a.bind(ok);
        }
        self.a.alu_reg(Alu::Mov, R5, R7);
        if slot != Slot::Eth {
            self.a.ldx(Size::Dw, t1, R10, SLOTS - 8 * slot as i16);
            self.a.alu_reg(Alu::Add, R5, t1);
        }
        if self.moves {
            self.a.ldx(Size::Dw, t1, R10, START);
            self.a.alu_reg(Alu::Add, R5, t1);
        }
        self.a.alu_reg(Alu::Mov, t1, R5);
        self.a.alu_imm(Alu::Add, t1, i32::from(len));
        self.a.jmp_reg(Jmp::Gt, t1, R8, absent);
        R5
    }

    /// Loads `n` (1..=8) big-endian bytes at `base + at` into `dst`, using `tmp`.
    fn load_be(&mut self, base: Reg, at: u8, n: u8, dst: Reg, tmp: Reg) {
        for (i, (off, k)) in chunks(n).into_iter().enumerate() {
            let r = if i == 0 { dst } else { tmp };
            self.a.ldx(Size::of(usize::from(k)), r, base, i16::from(at + off));
            if k > 1 {
                self.a.be(r, i32::from(k) * 8);
            }
            if i > 0 {
                self.a.alu_imm(Alu::Lsh, dst, i32::from(k) * 8);
                self.a.alu_reg(Alu::Or, dst, tmp);
            }
        }
    }

    /// Stores the low `n` (1..=8) bytes of `src` big-endian at `base + at`, using `tmp`; `src`
    /// is kept.
    fn store_be(&mut self, base: Reg, at: u8, n: u8, src: Reg, tmp: Reg) {
        for (off, k) in chunks(n) {
            let after = n - off - k;
            self.a.alu_reg(Alu::Mov, tmp, src);
            if after > 0 {
                self.a.alu_imm(Alu::Rsh, tmp, i32::from(after) * 8);
            }
            if k > 1 {
                self.a.be(tmp, i32::from(k) * 8);
            }
            self.a.stx(Size::of(usize::from(k)), base, i16::from(at + off), tmp);
        }
    }

    /// Loads field `f` (checked by [`field_ok`]) into `dst`, using `tmp` and `r5`. A field of a
    /// header the packet lacks reads 0, or jumps to `absent` when given (as the engine's
    /// comparisons on such a field are false).
    fn read_field(&mut self, f: &FieldRef, dst: Reg, tmp: Reg, absent: Option<Label>) {
        match f.loc {
            Loc::Meta(m) => self.read_meta(m, dst),
            Loc::Hdr { slot, byte, bytes, shift } => {
                let (zero, end) = (self.a.label(), self.a.label());
                let base = self.header((slot, f.needs, f.or_needs), byte + bytes, (dst, tmp), absent.unwrap_or(zero));
                self.load_be(base, byte, bytes, dst, tmp);
                if shift > 0 {
                    self.a.alu_imm(Alu::Rsh, dst, i32::from(shift));
                }
                if u16::from(f.width) < u16::from(bytes) * 8 {
                    self.and_width(dst, tmp, f.width);
                }
                if absent.is_none() && base != R7 {
                    self.a.ja(end);
                    self.a.bind(zero);
                    self.a.alu_imm(Alu::Mov, dst, 0);
                }
                self.a.bind(end);
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

    /// `x` = the ones'-complement sum of its four 16-bit words (RFC 1071's fold), using `t`.
    fn fold(&mut self, x: Reg, t: Reg) {
        self.a.alu_reg(Alu::Mov, t, x);
        self.a.alu_imm(Alu::Rsh, t, 32);
        self.a.alu_imm(Alu::Lsh, x, 32);
        self.a.alu_imm(Alu::Rsh, x, 32);
        self.a.alu_reg(Alu::Add, x, t);
        for _ in 0..3 {
            self.a.alu_reg(Alu::Mov, t, x);
            self.a.alu_imm(Alu::Rsh, t, 16);
            self.a.alu_imm(Alu::And, x, 0xffff);
            self.a.alu_reg(Alu::Add, x, t);
        }
    }

    /// Stores `src` (`r3` or `r4`, kept) into field `f` (checked by [`writable`]), as the
    /// engine's `FieldRef::write`: nothing when the header is absent; the IPv4 header checksum
    /// updated by RFC 1624 when the field is under it and its bytes changed. Clobbers `r0`–`r2`
    /// and `r5`.
    fn write_field(&mut self, f: &FieldRef, src: Reg, tmp: Reg) {
        debug_assert!(src == R3 || src == R4);
        let Loc::Hdr { slot, byte, bytes, shift } = f.loc else {
            let Loc::Meta(m) = f.loc else { unreachable!() };
            self.a.alu_reg(Alu::Mov, tmp, src);
            if m == MetaField::OutPort {
                self.a.alu_imm(Alu::And, tmp, 0xffff);
            } else {
                self.a.alu_imm(Alu::Lsh, tmp, 32);
                self.a.alu_imm(Alu::Rsh, tmp, 32);
            }
            self.a.stx(Size::Dw, R10, Self::meta_off(m), tmp);
            return;
        };
        let skip = self.a.label();
        let whole = shift == 0 && u16::from(bytes) * 8 == u16::from(f.width);
        if whole && !f.csum.ipv4_hdr {
            let base = self.header((slot, f.needs, f.or_needs), byte + bytes, (R0, tmp), skip);
            self.store_be(base, byte, bytes, src, tmp);
            self.a.bind(skip);
            return;
        }
        // The aligned span around the field: old in r0, new in r1.
        let (a0, a1) = span(byte, bytes);
        let n = a1 - a0;
        let base = self.header((slot, f.needs, f.or_needs), a1, (R0, R1), skip);
        self.load_be(base, a0, n, R0, R1);
        let sh = u32::from(a1 - byte - bytes) * 8 + u32::from(shift);
        let fmask = if f.width >= 64 { u64::MAX } else { (1u64 << f.width) - 1 } << sh;
        self.a.alu_reg(Alu::Mov, R2, src);
        if sh > 0 {
            self.a.alu_imm(Alu::Lsh, R2, sh as i32);
        }
        self.a.mov_const(R1, fmask);
        self.a.alu_reg(Alu::And, R2, R1);
        self.a.mov_const(R1, !fmask);
        self.a.alu_reg(Alu::And, R1, R0);
        self.a.alu_reg(Alu::Or, R1, R2);
        self.a.jmp_reg(Jmp::Eq, R1, R0, skip);
        self.store_be(base, a0, n, R1, R2);
        if f.csum.ipv4_hdr {
            // RFC 1624 eqn. 3 at the checksum of the IPv4 header the field is in (the inner
            // one for an inner field): !(!HC + !sum(old) + sum(new)), ones'-complement
            // additions (one fold of the three gives the same sum as two adds).
            self.fold(R0, R2);
            self.fold(R1, R2);
            self.a.alu_imm(Alu::Xor, R0, 0xffff);
            self.a.alu_reg(Alu::Add, R0, R1);
            let (l3, ip4) = if slot == Slot::InnerL3 { (Slot::InnerL3, Hdr::InnerIpv4) } else { (Slot::L3, Hdr::Ipv4) };
            let base = self.header((l3, HdrSet::EMPTY.with(ip4), HdrSet::EMPTY), 12, (R1, R2), skip);
            self.a.ldx(Size::H, R2, base, 10);
            self.a.be(R2, 16);
            self.a.alu_imm(Alu::Xor, R2, 0xffff);
            self.a.alu_reg(Alu::Add, R2, R0);
            self.fold(R2, R0);
            self.a.alu_imm(Alu::Xor, R2, 0xffff);
            self.a.be(R2, 16);
            self.a.stx(Size::H, base, 10, R2);
        }
        self.a.bind(skip);
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
            Operand::Field(f) => self.read_field(&f, dst, tmp, None),
        }
    }

    /// `r0` = `bpf_map_lookup_elem(map fd, r10 + key)`: the value's address, or 0 (clobbers
    /// r0–r5).
    fn map_lookup(&mut self, fd: RawFd, key: i16) {
        self.a.raw(&Insn::ld_map_fd(R1, fd));
        self.a.alu_reg(Alu::Mov, R2, R10);
        self.a.alu_imm(Alu::Add, R2, i32::from(key));
        self.a.call(HELPER_MAP_LOOKUP);
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
        self.map_lookup(self.maps.counters, CNT_KEY);
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
            Prim::Hash => self.hash(),
            Prim::VxlanDecap => self.vxlan_decap(),
            Prim::VxlanEncap(ops) => self.vxlan_encap(ops, args),
            Prim::CtCommit(ct, v) => self.ct_commit(*ct, v, args),
            Prim::CtLoad(ct) => self.ct_load(*ct),
            Prim::Meter(m, idx, drop_red) => self.meter(*m, idx, *drop_red, args),
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
        self.read_field(x, R3, R1, None);
        self.read_field(y, R4, R1, None);
        self.write_field(x, R4, R1);
        self.write_field(y, R3, R1);
    }

    fn cond(&mut self, c: &CondC, t: Label, f: Label) {
        match c {
            CondC::Valid(s) if HdrSet::EMPTY.with(Hdr::Eth).has_all(*s) => self.a.ja(t),
            CondC::Valid(s) => {
                self.a.ldx(Size::Dw, R1, R10, VALID);
                self.a.mov_const(R2, u64::from(s.0));
                self.a.alu_reg(Alu::And, R1, R2);
                self.a.jmp_reg(Jmp::Eq, R1, R2, t);
                self.a.ja(f);
            }
            CondC::Hit(bit) => {
                self.a.ldx(Size::Dw, R1, R10, HITS);
                self.a.alu_imm(Alu::Rsh, R1, i32::from(*bit));
                self.a.alu_imm(Alu::And, R1, 1);
                self.a.jmp_imm(Jmp::Ne, R1, 0, t);
                self.a.ja(f);
            }
            CondC::Cmp(fld, op, v) => {
                self.read_field(fld, R1, R2, Some(f));
                self.a.mov_const(R2, *v as u64);
                self.a.jmp_reg(jmp_of(*op), R1, R2, t);
                self.a.ja(f);
            }
            CondC::MetaCmp(m, op, v) => {
                self.read_meta(*m, R1);
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
        self.a.st(Size::B, R10, self.mask_off(dst), 1);
        self.a.ja(end);
        self.a.bind(no);
        self.a.st(Size::B, R10, self.mask_off(dst), 0);
        self.a.bind(end);
    }

    fn steps(&mut self, steps: &[SymStep]) {
        for s in steps {
            match s {
                SymStep::Mask(dst, src, c) => {
                    let (yes, no) = (self.a.label(), self.a.label());
                    self.a.ldx(Size::B, R1, R10, self.mask_off(*src));
                    self.a.jmp_imm(Jmp::Eq, R1, 0, no);
                    self.cond(c, yes, no);
                    self.set_mask(*dst, yes, no);
                }
                SymStep::AndNot(dst, src, sub) => {
                    let (yes, no) = (self.a.label(), self.a.label());
                    self.a.ldx(Size::B, R1, R10, self.mask_off(*src));
                    self.a.jmp_imm(Jmp::Eq, R1, 0, no);
                    self.a.ldx(Size::B, R1, R10, self.mask_off(*sub));
                    self.a.jmp_imm(Jmp::Ne, R1, 0, no);
                    self.a.ja(yes);
                    self.set_mask(*dst, yes, no);
                }
                SymStep::Run(mask, stage) => {
                    let skip = self.a.label();
                    self.a.ldx(Size::B, R1, R10, self.mask_off(*mask));
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
            StageDef::Conntrack(ct, zone) => self.conntrack(*ct, zone.as_ref()),
            StageDef::Classify(_) | StageDef::L2Switch(_) => unreachable!("[tm] and l2_switch do not pass the XDP check"),
        }
    }

    fn table(&mut self, t: usize) {
        let p = self.p;
        let def = &p.tables[t];
        // A packet that lacks a key field's header misses, as in the engine; a classifier's
        // range field reads 0 then (the L4 ports of an ICMP packet).
        let (miss, end, hit) = (self.a.label(), self.a.label(), self.a.label());
        for (i, k) in def.key.iter().enumerate() {
            let absent = (k.kind != MatchKind::Range).then_some(miss);
            self.read_field(&k.field, R3, R1, absent);
            self.a.stx(Size::Dw, R10, KEY + 8 * i as i16, R3);
        }
        if acl::is_classifier(def) {
            self.classify(t, hit, miss);
        } else {
            self.map_lookup(self.maps.tables[t], KEY);
            self.a.jmp_imm(Jmp::Eq, R0, 0, miss);
            self.a.alu_reg(Alu::Mov, R9, R0);
        }
        self.a.bind(hit);
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

/// The mask registers `p`'s steps name, register 0 among them, in order.
fn mask_regs(p: &Program) -> Vec<u8> {
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
    regs
}

/// Generates the program for `p` (which must pass [`check`]) over ports whose ifindexes are
/// `ifindexes` (port `i` is `ifindexes[i]`), referring to the maps in `maps`, for `hook`. At tc,
/// a packet forwarded to port `i` enters the ingress of that device's peer when `peer[i]`
/// (`bpf_redirect_peer`: a veth whose peer is in another namespace), else leaves by the
/// device's egress (`bpf_redirect`); XDP ignores `peer`.
pub fn generate(p: &Program, ifindexes: &[u32], maps: &MapFds, hook: Hook, peer: &[bool]) -> Vec<Insn> {
    let layout = Layout { ports: ifindexes.len(), tables: p.tables.len() };
    let hits = p.ingress.iter().chain(&p.egress).any(|s| matches!(s, SymStep::Mask(_, _, c) if reads_hits(c)));
    // Every mask register the steps name (the compiler's "empty" register 255 among them)
    // starts empty, register 0 (all lanes) full: one stack byte each, numbered densely.
    let regs = mask_regs(p);
    let mut masks = vec![0i16; 256];
    for (i, &m) in regs.iter().enumerate() {
        masks[usize::from(m)] = MASKS - i as i16;
    }
    let prims = || {
        p.actions.iter().flat_map(|a| a.body.iter()).chain(p.stages.iter().flat_map(|(_, s)| match s {
            StageDef::Prims(v) => v.as_slice(),
            _ => &[],
        }))
    };
    let moves = prims().any(|x| matches!(x, Prim::VxlanDecap | Prim::VxlanEncap(_)));
    let mut g = Gen { a: Asm::new(), p, maps, layout, hits, hook, masks, moves };
    let (ctx_ifindex, ctx_data, ctx_data_end) = hook.ctx();
    let a = &mut g.a;
    a.alu_reg(Alu::Mov, R6, R1);
    if !p.meters.is_empty() {
        // r9 holds a table entry while its action runs; a meter saves and restores it anywhere.
        a.alu_imm(Alu::Mov, R9, 0);
    }
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
    for &m in &regs {
        a.st(Size::B, R10, g.masks[usize::from(m)], i32::from(m == 0));
    }
    for r in 0..p.user_meta.len().min(fastpath_packet::meta::REGS) {
        a.st(Size::Dw, R10, REGS - 8 * r as i16, 0);
    }
    // The metadata words a packet starts with, where the program reads them before any write:
    // the hash (`hash`, an encap), the logical start (header reads after a decap, a meter's
    // length), the flow flag (`ct_commit` / `ct_load`); `ct.*` and `meta.color` always (a
    // condition may read them in any program).
    let hashes = moves || prims().any(|x| matches!(x, Prim::Hash));
    let zeroed = [(HASH, hashes), (START, moves || !p.meters.is_empty()), (FLOW, !p.conntracks.is_empty()), (CT, true), (COLOR, true)];
    for (w, _) in zeroed.iter().filter(|z| z.1) {
        a.st(Size::Dw, R10, *w, 0);
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
    if p.headers != HdrSet::EMPTY.with(Hdr::Eth) || moves || !p.meters.is_empty() {
        let a = &mut g.a;
        a.st(Size::Dw, R10, VALID, Hdr::Eth.bit() as i32);
        for s in 0..Slot::COUNT as i16 {
            a.st(Size::Dw, R10, SLOTS - 8 * s, 0);
        }
        match hook {
            Hook::Tc => a.ldx(Size::W, R1, R6, sk_buff::LEN),
            Hook::Xdp => {
                a.alu_reg(Alu::Mov, R1, R6);
                a.call(HELPER_XDP_GET_BUFF_LEN);
                a.alu_reg(Alu::Mov, R1, R0);
            }
        }
        a.stx(Size::Dw, R10, FLEN, R1);
        g.parse();
    }
    g.steps(&p.ingress);
    // Egress sees forwarded packets only; the others end as no_verdict either way.
    if !p.egress.is_empty() {
        g.drop_unless_forwarded();
        g.steps(&p.egress);
    }
    if moves {
        g.cut_to_start();
    }
    g.drop_unless_forwarded();
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
            a.exit();
        }
        Hook::Tc => {
            // Per port (in range, checked above): its ifindex, then into its peer's ingress
            // (`peer[port]`) or out of the device's egress.
            for (port, &ifx) in ifindexes.iter().enumerate() {
                let next = a.label();
                a.jmp_imm(Jmp::Ne, R2, port as i32, next);
                a.alu_imm(Alu::Mov, R1, ifx as i32);
                a.alu_imm(Alu::Mov, R2, 0);
                a.call(if peer.get(port) == Some(&true) { helper::REDIRECT_PEER } else { helper::REDIRECT });
                a.exit();
                a.bind(next);
            }
            a.ret(tc_action::SHOT);
        }
    }
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
        let l2 = prog(include_str!("../../../../pipelines/l2fwd.toml"));
        check(&l2).unwrap();
        let r = prog(include_str!("../../../../pipelines/router.toml"));
        let e = check(&r).unwrap_err().to_string();
        assert!(e.contains("parser header(s) vlan, ipv6"), "{e}");
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
