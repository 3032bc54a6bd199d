//! The intermediate representation: a checked pipeline as plain data.
//!
//! The compiler ([`mod@crate::compile`]) turns a spec into a [`Program`]; the build step
//! ([`crate::build`]) turns a `Program` into a runnable [`crate::Pipeline`]; the XDP back end
//! (`fastpath-xdp`) compiles the same `Program` to eBPF. Everything here is data with every name
//! resolved — fields are offsets and widths, parameters are argument indices, tables and objects
//! are indices — and this module depends on nothing else in the crate, so every consumer can
//! read it without pulling in the compiler or the executor.
//!
//! ```text
//!  spec (TOML) ─▶ compile ─▶ ir::Program ─┬▶ build ─▶ Pipeline (batch executor)
//!                                          └▶ fastpath-xdp ─▶ one eBPF program
//! ```

use fastpath_packet::{DropReason, HdrSet, Slot};

/// Most parameters an action may take.
pub const MAX_ARGS: usize = 6;

/// Most key fields a table may have.
pub const MAX_KEY_FIELDS: usize = 8;

/// How a field's value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// An unsigned integer of this many bits (decimal or 0x-hex).
    Int(u8),
    /// A MAC address `02:00:00:00:00:01`.
    Mac,
    /// An IPv4 address.
    Ipv4,
    /// An IPv6 address.
    Ipv6,
}

/// Where a field's bits come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    /// In a header: `bytes` bytes (1..=16) starting `byte` bytes after the header layer's start;
    /// the field is those bytes read big-endian, shifted right by `shift`, masked to `width`.
    Hdr { slot: Slot, byte: u8, bytes: u8, shift: u8 },
    /// A metadata field.
    Meta(MetaField),
}

/// Metadata a spec can read and write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaField {
    /// Input port.
    InPort,
    /// Output port chosen so far.
    OutPort,
    /// Meter colour (0 green, 1 yellow, 2 red).
    Color,
    /// Traffic class.
    Tc,
    /// Flow hash.
    Hash,
    /// User register `n`.
    Reg(u8),
    /// Connection-tracking flag bit `n` of the last `conntrack` stage (see
    /// the `conntrack` stage; kept in `Meta::reserved`, low byte).
    CtFlag(u8),
    /// The flow's cached verdict written by `ct_commit` (`Meta::reserved`, high byte).
    CtVerdict,
}

/// A resolved field: where it is, how wide, and which header must be valid to read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldRef {
    /// Location.
    pub loc: Loc,
    /// Width in bits (1..=128).
    pub width: u8,
    /// Headers that must all be present (empty for metadata).
    pub needs: HdrSet,
    /// Alternative header set: the field is also readable when all of these are present
    /// (e.g. `l4.dport` is valid for UDP or TCP). Empty when there is no alternative.
    pub or_needs: HdrSet,
    /// Which checksums cover it.
    pub csum: Csum,
    /// How its values are written (integer, MAC, IPv4, IPv6).
    pub kind: ValueKind,
}

/// Checksums that must follow a write to a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Csum {
    /// The IPv4 header checksum covers it.
    pub ipv4_hdr: bool,
    /// The UDP/TCP checksum covers it (ports, or addresses via the pseudo-header).
    pub l4: bool,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// A condition with every name resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CondC {
    /// All of these headers were parsed.
    Valid(HdrSet),
    /// Table bit `t` of `Meta::hits` is set.
    Hit(u8),
    /// `field op constant`.
    Cmp(FieldRef, CmpOp, u128),
    /// `meta.field op constant` (also `ct.*`): metadata only, no header read.
    MetaCmp(MetaField, CmpOp, u32),
    /// `field op field` (equal widths), e.g. `ipv4.src != meta.sub_ip`; false when either
    /// field is missing.
    FieldCmp(FieldRef, CmpOp, FieldRef),
    /// Negation.
    Not(Box<CondC>),
    /// Conjunction.
    And(Box<CondC>, Box<CondC>),
    /// Disjunction.
    Or(Box<CondC>, Box<CondC>),
}

/// An operand: a constant, an action parameter, or a packet field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// A constant from the spec.
    Const(u128),
    /// Parameter `n` of the table entry's action.
    Arg(u8),
    /// A field of the packet or its metadata.
    Field(FieldRef),
}

/// One compiled primitive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prim {
    /// `forward P`: choose the output port (the packet goes on through the pipeline).
    Forward(Operand),
    /// `drop [reason]`.
    Drop(DropReason),
    /// `to_control`: punt to the control plane.
    ToControl,
    /// `set FIELD = VALUE`.
    Set(FieldRef, Operand),
    /// `swap A B` (fields of equal width).
    Swap(FieldRef, FieldRef),
    /// `ttl_dec`: IPv4 TTL or IPv6 hop limit minus one (RFC 1812 §5.3.1), dropping with
    /// `ttl_expired` when it would reach zero; IPv4 checksum updated incrementally (RFC 1624).
    TtlDec,
    /// `push_vlan VID [PCP [TPID]]`: insert a tag after the MAC addresses (TPID 0x8100, 802.1Q,
    /// unless given: 0x88a8 for an 802.1ad S-tag).
    PushVlan(Operand, Operand, u16),
    /// `pop_vlan`: remove the outer 802.1Q / 802.1ad tag.
    PopVlan,
    /// `count COUNTERS INDEX`: add the packet and its bytes to a counter.
    Count(u16, Operand),
    /// `meter METERS INDEX`: colour the packet (`meta.color`); red is dropped (`meter_red`)
    /// when `drop_red` is set (`meter … drop_red`), yellow remarked by the caller's spec.
    Meter(u16, Operand, bool),
    /// `vxlan_decap`: remove outer Ethernet/IP/UDP/VXLAN; inner headers become the outer ones.
    VxlanDecap,
    /// `vxlan_encap DMAC SMAC SRC DST VNI` (RFC 7348): prepend outer Ethernet/IPv4/UDP/VXLAN;
    /// the old headers become the inner ones.
    VxlanEncap([Operand; 5]),
    /// `hash`: a hash of the IPv4/IPv6 5-tuple into `meta.hash` (kept when already set).
    Hash,
    /// `ct_commit CT [VERDICT]`: cache `VERDICT` (default 1) in the packet's flow of conntrack
    /// table `CT` and in `ct.verdict`.
    CtCommit(u16, Operand),
    /// `ct_load CT`: reload `ct.verdict` from the packet's flow (after this batch's commits:
    /// later packets of a flow opened earlier in the same batch see the ACL's verdict).
    CtLoad(u16),
}

/// How a key field matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    /// Equal value.
    Exact,
    /// Longest prefix.
    Lpm,
    /// Value and mask.
    Ternary,
    /// Inclusive range.
    Range,
}

/// The data structure a table compiles to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableImpl {
    /// Exact key of ≤ 16 bits: an array indexed by the key.
    Direct,
    /// Exact key of ≤ 128 bits: bucketised cuckoo hash.
    Exact,
    /// One LPM field (IPv4 or IPv6 address).
    Lpm,
    /// Ternary / range / mixed keys: the multi-field classifier.
    Acl,
}

/// A resolved key field.
#[derive(Clone, Debug)]
pub struct KeyDef {
    /// Field name as written.
    pub name: String,
    /// Where it is.
    pub field: FieldRef,
    /// How it matches.
    pub kind: MatchKind,
}

/// A resolved table.
#[derive(Clone, Debug)]
pub struct TableDef {
    /// Name.
    pub name: String,
    /// Key fields.
    pub key: Vec<KeyDef>,
    /// Allowed actions (indices into `Program::actions`).
    pub actions: Vec<usize>,
    /// Capacity.
    pub size: usize,
    /// Action and arguments on a miss.
    pub default: (usize, [u128; MAX_ARGS]),
    /// Drop reason when the default is `drop`.
    pub default_drop: Option<DropReason>,
    /// Chosen implementation.
    pub imp: TableImpl,
}

/// A resolved action.
#[derive(Clone, Debug)]
pub struct ActionDef {
    /// Name.
    pub name: String,
    /// Parameters with their inferred kinds.
    pub params: Vec<(String, ValueKind)>,
    /// Primitives.
    pub body: Vec<Prim>,
}

/// A meter array.
#[derive(Clone, Debug)]
pub struct MeterDef {
    /// Name.
    pub name: String,
    /// RFC 2698 (true) or RFC 2697 (false).
    pub two_rate: bool,
    /// Number of meters.
    pub size: usize,
    /// Colour-aware.
    pub color_aware: bool,
}

/// A counter array.
#[derive(Clone, Debug)]
pub struct CounterDef {
    /// Name.
    pub name: String,
    /// Number of counters.
    pub size: usize,
}

/// A connection-tracking table.
#[derive(Clone, Debug)]
pub struct ConntrackDef {
    /// Name.
    pub name: String,
    /// Capacity, timeouts, window checks.
    pub config: fastpath_tables::flow::FlowConfig,
}

/// What a stage of the plan is.
#[derive(Clone, Debug)]
pub enum StageDef {
    /// The parser.
    Parser,
    /// Apply table `t`.
    Table(usize),
    /// Run these primitives.
    Prims(Vec<Prim>),
    /// `conntrack CT [ZONE]`: track the packets in conntrack table `CT`, zone from the operand.
    Conntrack(u16, Option<Operand>),
    /// `l2_switch FDB`: learn source MACs into MAC table `FDB` and forward by destination MAC,
    /// flooding broadcast, multicast and unknown unicast.
    L2Switch(usize),
    /// The traffic manager's classifier (`[tm] classify`): `meta.tc` from DSCP or PCP, before
    /// the ingress program runs (which may still override it with `set_queue`).
    Classify(Classify),
}

/// A MAC learning table (`[[fdb]]`) and its VLANs' flood domains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdbDef {
    /// Name.
    pub name: String,
    /// Most MAC addresses it learns (over all VLANs).
    pub size: usize,
    /// An entry not refreshed for this long is forgotten (IEEE 802.1Q ageing time).
    pub ageing_ns: u64,
    /// VLAN id (0: untagged) ▸ bitmap of member ports (ids below 64). Empty: one VLAN-blind
    /// flood domain of every port.
    pub vlans: Vec<(u16, u64)>,
}

impl FdbDef {
    /// The member ports of VLAN `vid` as a bitmap (every port when there are no VLANs), `None`
    /// for a VLAN the table does not know.
    #[inline]
    pub fn members(&self, vid: u16) -> Option<u64> {
        if self.vlans.is_empty() {
            return Some(u64::MAX);
        }
        self.vlans.iter().find(|(v, _)| *v == vid).map(|(_, m)| *m)
    }
}

/// How packets get their traffic class before ingress (`[tm] classify`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Classify {
    /// Ingress sets `meta.tc` itself (`set_queue`); untouched packets are class 0.
    None,
    /// IPv4 / IPv6 DSCP ▸ class, by this table (index = DSCP).
    Dscp([u8; 64]),
    /// The outer 802.1Q PCP ▸ class, by this table (index = PCP); untagged packets are class 0.
    Pcp([u8; 8]),
}

/// The traffic manager between ingress and egress (`[tm]`): what the build step needs to make
/// a [`fastpath_tm::Tm`] once the number of ports is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmDef {
    /// The shared buffer of all ports.
    pub buffer: fastpath_tm::config::BufferConfig,
    /// WRED random seed.
    pub seed: u64,
    /// Every port's classes, schedulers and quantum, with no port shaper.
    pub port: fastpath_tm::config::FlatPortConfig,
    /// Port shapers by port id (`[[tm.port]]`); other ports are unshaped.
    pub shapers: Vec<(u16, fastpath_tm::shaper::ShaperConfig)>,
    /// Hierarchical ports by port id, their shaper included; other ports are flat.
    pub hqos: Vec<(u16, fastpath_tm::config::HqosConfig)>,
    /// The metadata field whose value is a packet's pipe on hierarchical ports.
    pub pipe: Option<MetaField>,
    /// How packets are classified before ingress.
    pub classify: Classify,
}

impl TmDef {
    /// Ports the spec itself implies: one past the largest `[[tm.port]]`, at least 1. The
    /// compiler validates the configuration for this many; the running count comes later
    /// (`Pipeline::set_ports`), and is validated then.
    pub fn ports_named(&self) -> usize {
        self.shapers.iter().map(|(p, _)| *p).chain(self.hqos.iter().map(|(p, _)| *p)).map(|p| usize::from(p) + 1).max().unwrap_or(1)
    }

    /// The traffic manager's configuration for `ports` ports.
    pub fn config(&self, ports: usize) -> fastpath_tm::config::TmConfig {
        let ports = (0..ports)
            .map(|i| {
                if let Some((_, h)) = self.hqos.iter().find(|(p, _)| usize::from(*p) == i) {
                    return fastpath_tm::config::PortConfig::Hqos(h.clone());
                }
                let mut c = self.port;
                c.shaper = self.shapers.iter().find(|(p, _)| usize::from(*p) == i).map(|(_, s)| *s);
                fastpath_tm::config::PortConfig::Flat(c)
            })
            .collect();
        fastpath_tm::config::TmConfig { buffer: self.buffer, seed: self.seed, ports }
    }
}

/// A checked spec, ready to instantiate.
#[derive(Clone, Debug)]
pub struct Program {
    /// Pipeline name.
    pub name: String,
    /// Headers the parser recognises.
    pub headers: HdrSet,
    /// Verify IPv4 header checksums.
    pub verify_ipv4_checksum: bool,
    /// User metadata fields and widths.
    pub user_meta: Vec<(String, u8)>,
    /// Tables.
    pub tables: Vec<TableDef>,
    /// Actions (built-ins first).
    pub actions: Vec<ActionDef>,
    /// Meters.
    pub meters: Vec<MeterDef>,
    /// Counters.
    pub counters: Vec<CounterDef>,
    /// Connection-tracking tables.
    pub conntracks: Vec<ConntrackDef>,
    /// MAC learning tables.
    pub fdbs: Vec<FdbDef>,
    /// Stages with their names, in plan order.
    pub stages: Vec<(String, StageDef)>,
    /// Ingress steps.
    pub ingress: Vec<SymStep>,
    /// Egress steps.
    pub egress: Vec<SymStep>,
    /// Mask registers needed.
    pub n_masks: usize,
    /// The traffic manager, when the spec has a `[tm]` section.
    pub tm: Option<TmDef>,
}

/// One step of a compiled control block, over lane-mask registers (register 255 is always
/// empty). The executor runs them in order once per batch.
#[derive(Clone, Debug)]
pub enum SymStep {
    /// `masks[dst] = masks[src] ∩ live ∩ cond` (dst, src, cond).
    Mask(u8, u8, CondC),
    /// `masks[dst] = masks[src] ∖ masks[sub]` (dst, src, sub).
    AndNot(u8, u8, u8),
    /// Run stage `stage` over `masks[mask] ∩ live` (mask, stage).
    Run(u8, usize),
}

impl CondC {
    /// True when the condition reads table `t`'s hit bit (`hit(t)` / `miss(t)`).
    pub fn tests_hit(&self, t: u8) -> bool {
        match self {
            CondC::Hit(x) => *x == t,
            CondC::Not(c) => c.tests_hit(t),
            CondC::And(a, b) | CondC::Or(a, b) => a.tests_hit(t) || b.tests_hit(t),
            CondC::Valid(_) | CondC::Cmp(..) | CondC::MetaCmp(..) | CondC::FieldCmp(..) => false,
        }
    }
}

impl Program {
    /// True when a condition of either control block reads table `t`'s hit bit: only then must
    /// the table set it for the packets that hit.
    pub fn hit_tested(&self, t: usize) -> bool {
        let Ok(t) = u8::try_from(t) else { return true };
        self.ingress.iter().chain(&self.egress).any(|s| matches!(s, SymStep::Mask(_, _, c) if c.tests_hit(t)))
    }

    /// Index of the table named `name`.
    pub fn table_index(&self, name: &str) -> Option<usize> {
        self.tables.iter().position(|t| t.name == name)
    }
}
