//! The field catalog: every header and metadata field a spec can name, resolved once at compile
//! time to an offset-and-width extractor.
//!
//! A [`FieldRef`] says where a field lives: in a header layer (`Slot` of [`Meta::off`], byte
//! offset from that header's start, bit shift and width) or in the packet's metadata. Reading and
//! writing at run time is then a load, a shift and a mask — no names, no maps. Writes to fields
//! under a checksum (IPv4 header, UDP/TCP pseudo-header) keep the checksum right with RFC 1624
//! incremental updates.

use crate::ir::{Csum, FieldRef, Loc, MetaField, ValueKind};
use fastpath_packet::{csum, Hdr, HdrSet, Meta, Slot};

/// One catalog row: `(header name, field name, needs, byte, bits-from-msb start, width bits)`.
struct Row {
    hdr: &'static str,
    field: &'static str,
    needs: Hdr,
    or_needs: Option<Hdr>,
    slot: Slot,
    /// Bit offset of the field's most significant bit from the header's start.
    bit: u16,
    width: u8,
    csum: Csum,
}

const NO: Csum = Csum { ipv4_hdr: false, l4: false };
const IP4: Csum = Csum { ipv4_hdr: true, l4: false };
const IP4_L4: Csum = Csum { ipv4_hdr: true, l4: true };
const L4: Csum = Csum { ipv4_hdr: false, l4: true };

macro_rules! rows {
    ($( $hdr:literal . $f:literal : $needs:ident $(| $or:ident)? @ $slot:ident bit $bit:literal width $w:literal $cs:ident ;)*) => {
        &[ $( Row { hdr: $hdr, field: $f, needs: Hdr::$needs, or_needs: rows!(@or $($or)?),
                    slot: Slot::$slot, bit: $bit, width: $w, csum: $cs }, )* ]
    };
    (@or) => { None };
    (@or $or:ident) => { Some(Hdr::$or) };
}

/// Field offsets are from the RFCs' header diagrams: Ethernet (IEEE 802.3), 802.1Q tag (TPID,
/// PCP, DEI, VID, then the next EtherType), IPv4 (RFC 791 §3.1), IPv6 (RFC 8200 §3), UDP (RFC
/// 768), TCP (RFC 9293 §3.1), ICMP (RFC 792), VXLAN (RFC 7348 §5).
static CATALOG: &[Row] = rows! {
    "eth"."dst":  Eth @ Eth bit 0 width 48 NO;
    "eth"."src":  Eth @ Eth bit 48 width 48 NO;
    "eth"."type": Eth @ Eth bit 96 width 16 NO;
    "vlan"."pcp": Vlan @ Vlan0 bit 16 width 3 NO;
    "vlan"."dei": Vlan @ Vlan0 bit 19 width 1 NO;
    "vlan"."vid": Vlan @ Vlan0 bit 20 width 12 NO;
    "vlan"."tpid": Vlan @ Vlan0 bit 0 width 16 NO;
    "qinq"."pcp": Qinq @ Vlan1 bit 16 width 3 NO;
    "qinq"."vid": Qinq @ Vlan1 bit 20 width 12 NO;
    "arp"."op": Arp @ L3 bit 48 width 16 NO;
    "arp"."sha": Arp @ L3 bit 64 width 48 NO;
    "arp"."spa": Arp @ L3 bit 112 width 32 NO;
    "arp"."tha": Arp @ L3 bit 144 width 48 NO;
    "arp"."tpa": Arp @ L3 bit 192 width 32 NO;
    "ipv4"."dscp": Ipv4 @ L3 bit 8 width 6 IP4;
    "ipv4"."ecn": Ipv4 @ L3 bit 14 width 2 IP4;
    "ipv4"."total_len": Ipv4 @ L3 bit 16 width 16 IP4;
    "ipv4"."ident": Ipv4 @ L3 bit 32 width 16 IP4;
    "ipv4"."ttl": Ipv4 @ L3 bit 64 width 8 IP4;
    "ipv4"."proto": Ipv4 @ L3 bit 72 width 8 IP4;
    "ipv4"."src": Ipv4 @ L3 bit 96 width 32 IP4_L4;
    "ipv4"."dst": Ipv4 @ L3 bit 128 width 32 IP4_L4;
    "ipv6"."dscp": Ipv6 @ L3 bit 4 width 6 NO;
    "ipv6"."ecn": Ipv6 @ L3 bit 10 width 2 NO;
    "ipv6"."flow_label": Ipv6 @ L3 bit 12 width 20 NO;
    "ipv6"."payload_len": Ipv6 @ L3 bit 32 width 16 NO;
    "ipv6"."next_header": Ipv6 @ L3 bit 48 width 8 NO;
    "ipv6"."hop_limit": Ipv6 @ L3 bit 56 width 8 NO;
    "ipv6"."src": Ipv6 @ L3 bit 64 width 128 L4;
    "ipv6"."dst": Ipv6 @ L3 bit 192 width 128 L4;
    "udp"."sport": Udp @ L4 bit 0 width 16 L4;
    "udp"."dport": Udp @ L4 bit 16 width 16 L4;
    "tcp"."sport": Tcp @ L4 bit 0 width 16 L4;
    "tcp"."dport": Tcp @ L4 bit 16 width 16 L4;
    "tcp"."seq": Tcp @ L4 bit 32 width 32 L4;
    "tcp"."ack": Tcp @ L4 bit 64 width 32 L4;
    "tcp"."flags": Tcp @ L4 bit 104 width 8 L4;
    "l4"."sport": Udp | Tcp @ L4 bit 0 width 16 L4;
    "l4"."dport": Udp | Tcp @ L4 bit 16 width 16 L4;
    "icmp"."type": Icmp @ L4 bit 0 width 8 NO;
    "icmp"."code": Icmp @ L4 bit 8 width 8 NO;
    "icmp6"."type": Icmp6 @ L4 bit 0 width 8 NO;
    "icmp6"."code": Icmp6 @ L4 bit 8 width 8 NO;
    "vxlan"."vni": Vxlan @ Tunnel bit 32 width 24 NO;
    "inner_eth"."dst": InnerEth @ InnerEth bit 0 width 48 NO;
    "inner_eth"."src": InnerEth @ InnerEth bit 48 width 48 NO;
    "inner_eth"."type": InnerEth @ InnerEth bit 96 width 16 NO;
    "inner_ipv4"."dscp": InnerIpv4 @ InnerL3 bit 8 width 6 IP4;
    "inner_ipv4"."ttl": InnerIpv4 @ InnerL3 bit 64 width 8 IP4;
    "inner_ipv4"."proto": InnerIpv4 @ InnerL3 bit 72 width 8 IP4;
    "inner_ipv4"."src": InnerIpv4 @ InnerL3 bit 96 width 32 IP4_L4;
    "inner_ipv4"."dst": InnerIpv4 @ InnerL3 bit 128 width 32 IP4_L4;
    "inner_ipv6"."next_header": InnerIpv6 @ InnerL3 bit 48 width 8 NO;
    "inner_ipv6"."src": InnerIpv6 @ InnerL3 bit 64 width 128 L4;
    "inner_ipv6"."dst": InnerIpv6 @ InnerL3 bit 192 width 128 L4;
    "inner_l4"."sport": InnerUdp | InnerTcp @ InnerL4 bit 0 width 16 L4;
    "inner_l4"."dport": InnerUdp | InnerTcp @ InnerL4 bit 16 width 16 L4;
    "inner_tcp"."flags": InnerTcp @ InnerL4 bit 104 width 8 L4;
};

/// Names of metadata fields (`meta.<name>`), with widths.
static META: &[(&str, MetaField, u8)] = &[
    ("in_port", MetaField::InPort, 16),
    ("out_port", MetaField::OutPort, 16),
    ("color", MetaField::Color, 8),
    ("tc", MetaField::Tc, 8),
    ("hash", MetaField::Hash, 32),
];

/// Connection-tracking results (`ct.<name>`), with widths.
static CT: &[(&str, MetaField, u8)] = &[
    ("new", MetaField::CtFlag(0), 1),
    ("established", MetaField::CtFlag(1), 1),
    ("reply", MetaField::CtFlag(2), 1),
    ("invalid", MetaField::CtFlag(3), 1),
    ("verdict", MetaField::CtVerdict, 8),
];

/// A key-field extractor specialised once per table, so the per-packet loop has no match on
/// the field's shape (DESIGN: "monomorphised key extractors").
#[derive(Clone, Copy, Debug)]
pub enum Extract {
    /// `meta.in_port`.
    InPort,
    /// A whole big-endian 16-bit header field.
    Be16 {
        /// Header layer.
        slot: Slot,
        /// Byte offset in the layer.
        byte: u16,
        /// Headers that must be present.
        needs: HdrSet,
        /// Or these instead (`l4.dport`: UDP or TCP); empty for none.
        alt: HdrSet,
    },
    /// A whole big-endian 32-bit header field (IPv4 addresses).
    Be32 {
        /// Header layer.
        slot: Slot,
        /// Byte offset in the layer.
        byte: u16,
        /// Headers that must be present.
        needs: HdrSet,
        /// Or these instead (`l4.dport`: UDP or TCP); empty for none.
        alt: HdrSet,
    },
    /// A whole 128-bit header field (IPv6 addresses).
    Be128 {
        /// Header layer.
        slot: Slot,
        /// Byte offset in the layer.
        byte: u16,
        /// Headers that must be present.
        needs: HdrSet,
    },
    /// A whole big-endian header field of 1, 3, 5, 6 or 7 bytes (IP protocol, VXLAN VNI, MAC
    /// addresses): one 8-byte load and a shift when the frame has 8 bytes there, else byte by
    /// byte.
    Short {
        /// Header layer.
        slot: Slot,
        /// Byte offset in the layer.
        byte: u16,
        /// Field length in bytes.
        n: u8,
        /// Headers that must be present.
        needs: HdrSet,
        /// Or these instead (`l4.dport`: UDP or TCP); empty for none.
        alt: HdrSet,
    },
    /// A header field narrower than its bytes, of at most 8 bytes (`vlan.vid`, `vlan.pcp`,
    /// `ipv4.dscp`): the bytes as [`Extract::Short`] reads them, shifted right by `shift` and
    /// masked to `width` bits.
    Bits {
        /// Header layer.
        slot: Slot,
        /// Byte offset in the layer.
        byte: u16,
        /// Bytes that hold the field.
        n: u8,
        /// Right shift of those bytes' big-endian value.
        shift: u8,
        /// Field width in bits.
        width: u8,
        /// Headers that must be present.
        needs: HdrSet,
        /// Or these instead; empty for none.
        alt: HdrSet,
    },
    /// A user metadata register (`meta.NAME` of the spec's `[metadata]`).
    Reg(u8),
    /// A metadata field (no header, always present).
    Meta(MetaField),
    /// Anything else: [`FieldRef::read`].
    Generic(FieldRef),
}

/// A field is readable when its headers are present, or its alternative headers are.
#[inline(always)]
fn present(valid: HdrSet, needs: HdrSet, alt: HdrSet) -> bool {
    valid.has_all(needs) || (alt != HdrSet::EMPTY && valid.has_all(alt))
}

/// `n` (1..=8) big-endian bytes at `at`: one 8-byte load and a shift when the frame has 8 bytes
/// there, else byte by byte; `None` when the frame ends first.
#[inline(always)]
fn short(data: &[u8], at: usize, n: u8) -> Option<u64> {
    let n = usize::from(n.clamp(1, 8));
    match fastpath_packet::window::<8>(data, at) {
        Some(w) => Some(u64::from_be_bytes(*w) >> (64 - 8 * n)),
        None => Some(data.get(at..at + n)?.iter().fold(0u64, |v, &b| v << 8 | u64::from(b))),
    }
}

impl Extract {
    /// The field's value, `None` when the packet lacks its header or is cut short.
    #[inline(always)]
    pub fn read(&self, data: &[u8], m: &Meta) -> Option<u128> {
        match *self {
            Extract::Be128 { slot, byte, needs } => {
                if !m.valid.has_all(needs) {
                    return None;
                }
                let at = m.offset(slot) + usize::from(byte);
                Some(u128::from_be_bytes(*fastpath_packet::window::<16>(data, at)?))
            }
            Extract::Generic(f) => f.read(data, m),
            _ => self.read64(data, m).map(u128::from),
        }
    }

    /// [`Extract::read`] for fields of at most 64 bits, in 64-bit arithmetic (every key of an
    /// exact table of ≤ 64 bits; a 128-bit field gives its low half).
    #[inline(always)]
    pub fn read64(&self, data: &[u8], m: &Meta) -> Option<u64> {
        match *self {
            Extract::InPort => Some(u64::from(m.in_port)),
            Extract::Reg(r) => Some(u64::from(m.regs.get(usize::from(r)).copied().unwrap_or(0))),
            Extract::Be16 { slot, byte, needs, alt } => {
                if !present(m.valid, needs, alt) {
                    return None;
                }
                let at = m.offset(slot) + usize::from(byte);
                Some(u64::from(u16::from_be_bytes(*fastpath_packet::window::<2>(data, at)?)))
            }
            Extract::Be32 { slot, byte, needs, alt } => {
                if !present(m.valid, needs, alt) {
                    return None;
                }
                let at = m.offset(slot) + usize::from(byte);
                Some(u64::from(u32::from_be_bytes(*fastpath_packet::window::<4>(data, at)?)))
            }
            Extract::Short { slot, byte, n, needs, alt } => {
                if !present(m.valid, needs, alt) {
                    return None;
                }
                short(data, m.offset(slot) + usize::from(byte), n)
            }
            Extract::Bits { slot, byte, n, shift, width, needs, alt } => {
                if !present(m.valid, needs, alt) {
                    return None;
                }
                let v = short(data, m.offset(slot) + usize::from(byte), n)?;
                Some(v >> (shift % 64) & (u64::MAX >> (64 - u32::from(width.clamp(1, 64)))))
            }
            Extract::Meta(f) => Some(u64::from(read_meta(m, f))),
            Extract::Be128 { slot, byte, needs } => {
                if !m.valid.has_all(needs) {
                    return None;
                }
                let at = m.offset(slot) + usize::from(byte) + 8;
                Some(u64::from_be_bytes(*fastpath_packet::window::<8>(data, at)?))
            }
            Extract::Generic(f) => f.read(data, m).map(|v| v as u64),
        }
    }
}

impl FieldRef {
    /// The specialised extractor for this field.
    pub fn extractor(&self) -> Extract {
        match self.loc {
            Loc::Meta(MetaField::InPort) => Extract::InPort,
            Loc::Meta(MetaField::Reg(r)) => Extract::Reg(r),
            Loc::Meta(f) => Extract::Meta(f),
            // Whole bytes only: a field narrower than its bytes (vlan.vid) needs the mask.
            Loc::Hdr { slot, byte, bytes, shift: 0 } if u16::from(bytes) * 8 == u16::from(self.width) => {
                let byte = u16::from(byte);
                let (needs, alt) = (self.needs, self.or_needs);
                match bytes {
                    2 => Extract::Be16 { slot, byte, needs, alt },
                    4 => Extract::Be32 { slot, byte, needs, alt },
                    16 if alt == HdrSet::EMPTY => Extract::Be128 { slot, byte, needs },
                    1 | 3 | 5..=7 => Extract::Short { slot, byte, n: bytes, needs, alt },
                    _ => Extract::Generic(*self),
                }
            }
            Loc::Hdr { slot, byte, bytes, shift } if bytes <= 8 && self.width < 64 => {
                let (byte, needs, alt) = (u16::from(byte), self.needs, self.or_needs);
                Extract::Bits { slot, byte, n: bytes, shift, width: self.width, needs, alt }
            }
            _ => Extract::Generic(*self),
        }
    }

    /// Resolves `hdr.field` (or `meta.name`; user metadata names come from `user_meta`, each
    /// mapped to a register). `None` when unknown.
    pub fn resolve(name: &str, user_meta: &[(String, u8)]) -> Option<FieldRef> {
        let (h, f) = name.split_once('.')?;
        if h == "meta" {
            if let Some(&(_, m, w)) = META.iter().find(|(n, _, _)| *n == f) {
                return Some(FieldRef::meta(m, w));
            }
            let (i, (_, w)) = user_meta.iter().enumerate().find(|(_, (n, _))| n == f)?;
            return Some(FieldRef::meta(MetaField::Reg(i as u8), *w));
        }
        if h == "ct" {
            let &(_, m, w) = CT.iter().find(|(n, _, _)| *n == f)?;
            return Some(FieldRef::meta(m, w));
        }
        let r = CATALOG.iter().find(|r| r.hdr == h && r.field == f)?;
        let first_byte = (r.bit / 8) as u8;
        let last_bit = r.bit + u16::from(r.width); // exclusive
        let bytes = (last_bit.div_ceil(8) - u16::from(first_byte)) as u8;
        let shift = (u16::from(bytes) * 8 - (last_bit - u16::from(first_byte) * 8)) as u8;
        Some(FieldRef {
            loc: Loc::Hdr { slot: r.slot, byte: first_byte, bytes, shift },
            width: r.width,
            needs: HdrSet::EMPTY.with(r.needs),
            or_needs: r.or_needs.map_or(HdrSet::EMPTY, |h| HdrSet::EMPTY.with(h)),
            csum: r.csum,
            kind: match (r.hdr, r.field, r.width) {
                ("eth" | "inner_eth", "src" | "dst", _) | ("arp", "sha" | "tha", _) => ValueKind::Mac,
                ("arp", "spa" | "tpa", _) => ValueKind::Ipv4,
                (_, "src" | "dst", 32) => ValueKind::Ipv4,
                (_, "src" | "dst", 128) => ValueKind::Ipv6,
                (_, _, w) => ValueKind::Int(w),
            },
        })
    }

    fn meta(m: MetaField, width: u8) -> FieldRef {
        FieldRef { loc: Loc::Meta(m), width, needs: HdrSet::EMPTY, or_needs: HdrSet::EMPTY, csum: NO, kind: ValueKind::Int(width) }
    }

    /// Every field name the catalog knows (for "did you mean" suggestions and docs).
    pub fn all_names(user_meta: &[(String, u8)]) -> Vec<String> {
        let mut v: Vec<String> = CATALOG.iter().map(|r| format!("{}.{}", r.hdr, r.field)).collect();
        v.extend(META.iter().map(|(n, _, _)| format!("meta.{n}")));
        v.extend(user_meta.iter().map(|(n, _)| format!("meta.{n}")));
        v.extend(CT.iter().map(|(n, _, _)| format!("ct.{n}")));
        v
    }

    /// True when the headers this field needs were parsed for a packet.
    #[inline]
    pub fn present(&self, valid: HdrSet) -> bool {
        valid.has_all(self.needs) || (self.or_needs.0 != 0 && valid.has_all(self.or_needs))
    }

    /// Mask of the field's value bits.
    #[inline]
    pub fn mask(&self) -> u128 {
        if self.width >= 128 {
            u128::MAX
        } else {
            (1u128 << self.width) - 1
        }
    }

    /// Reads the field (right-aligned). `None` when the header is absent or cut short.
    #[inline]
    pub fn read(&self, data: &[u8], m: &Meta) -> Option<u128> {
        match self.loc {
            Loc::Meta(f) => Some(u128::from(read_meta(m, f))),
            Loc::Hdr { slot, byte, bytes, shift } => {
                if !self.present(m.valid) {
                    return None;
                }
                let start = m.offset(slot) + usize::from(byte);
                // Fixed-width loads for the common widths; the byte loop for the rest.
                let v = match bytes {
                    1 => u128::from(*data.get(start)?),
                    2 => u128::from(u16::from_be_bytes(data.get(start..start + 2)?.try_into().ok()?)),
                    4 => u128::from(u32::from_be_bytes(data.get(start..start + 4)?.try_into().ok()?)),
                    16 => u128::from_be_bytes(data.get(start..start + 16)?.try_into().ok()?),
                    n => {
                        let mut v = 0u128;
                        for &b in data.get(start..start + usize::from(n))? {
                            v = v << 8 | u128::from(b);
                        }
                        v
                    }
                };
                Some(v >> shift & self.mask())
            }
        }
    }

    /// Reads a field of at most 64 bits: the fast path for keys.
    #[inline]
    pub fn read64(&self, data: &[u8], m: &Meta) -> Option<u64> {
        self.read(data, m).map(|v| v as u64)
    }

    /// Writes the field, updating the IPv4 header and UDP/TCP checksums that cover it.
    /// Returns false (changing nothing) when the header is absent or cut short.
    pub fn write(&self, data: &mut [u8], m: &mut Meta, value: u128) -> bool {
        match self.loc {
            Loc::Meta(f) => {
                write_meta(m, f, value as u32);
                true
            }
            Loc::Hdr { slot, byte, bytes, shift } => {
                if !self.present(m.valid) {
                    return false;
                }
                let base = m.offset(slot);
                if shift == 0 && u16::from(self.width) == 8 * u16::from(bytes) && !self.csum.ipv4_hdr && !self.csum.l4 {
                    // Whole bytes and no checksum (MAC addresses, VLAN-free fields): a copy.
                    let start = base + usize::from(byte);
                    let Some(dst) = data.get_mut(start..start + usize::from(bytes)) else { return false };
                    dst.copy_from_slice(&value.to_be_bytes()[16 - usize::from(bytes)..]);
                    return true;
                }
                // The 16-bit-aligned span (relative to the header start, which is even for every
                // header we parse at an even offset; we align on absolute offsets to be safe)
                // covering the field, so the checksum delta can be computed on whole words.
                let start = base + usize::from(byte);
                let end = start + usize::from(bytes);
                let a_start = start & !1;
                let a_end = (end + 1) & !1;
                let Some(span) = data.get(a_start..a_end) else { return false };
                let mut old = [0u8; 18];
                old[..span.len()].copy_from_slice(span);
                let Some(dst) = data.get_mut(start..end) else { return false };
                let mut cur = 0u128;
                for &b in dst.iter() {
                    cur = cur << 8 | u128::from(b);
                }
                let fmask = self.mask() << shift;
                let new = (cur & !fmask) | ((value << shift) & fmask);
                for (k, b) in dst.iter_mut().rev().enumerate() {
                    *b = (new >> (8 * k)) as u8;
                }
                if cur != new && (self.csum.ipv4_hdr || self.csum.l4) {
                    let span_len = a_end - a_start;
                    let mut neww = [0u8; 18];
                    if let Some(s) = data.get(a_start..a_end) {
                        neww[..span_len].copy_from_slice(s);
                    }
                    fix_checksums(data, m, self.csum, is_inner(slot), &old[..span_len], &neww[..span_len]);
                }
                true
            }
        }
    }
}

/// Whether a field in `slot` belongs to a tunnel's inner packet (its checksums are the inner
/// headers').
fn is_inner(slot: Slot) -> bool {
    matches!(slot, Slot::InnerEth | Slot::InnerL3 | Slot::InnerL4)
}

/// Applies the checksum deltas of a header edit (`old` → `new`, both 16-bit aligned) to the
/// checksums that cover it: the outer packet's, or the inner packet's when `inner`.
fn fix_checksums(data: &mut [u8], m: &Meta, which: Csum, inner: bool, old: &[u8], new: &[u8]) {
    let (ip4, tcp, udp, l3, l4) = if inner {
        (Hdr::InnerIpv4, Hdr::InnerTcp, Hdr::InnerUdp, Slot::InnerL3, Slot::InnerL4)
    } else {
        (Hdr::Ipv4, Hdr::Tcp, Hdr::Udp, Slot::L3, Slot::L4)
    };
    if which.ipv4_hdr && m.valid.has(ip4) {
        adjust_at(data, m.offset(l3) + 10, old, new);
    }
    if which.l4 {
        let off = m.offset(l4);
        if m.valid.has(tcp) {
            adjust_at(data, off + 16, old, new);
        } else if m.valid.has(udp) {
            // RFC 768: a zero UDP checksum (IPv4 only) means "none"; leave it so.
            let zero = data.get(off + 6..off + 8).is_some_and(|c| c == [0, 0]);
            if !zero {
                adjust_at(data, off + 6, old, new);
                // RFC 768: a computed 0 is sent as all ones.
                if let Some(c) = data.get_mut(off + 6..off + 8) {
                    if c == [0, 0] {
                        c.copy_from_slice(&[0xff, 0xff]);
                    }
                }
            }
        }
    }
}

fn adjust_at(data: &mut [u8], at: usize, old: &[u8], new: &[u8]) {
    if let Some(c) = data.get_mut(at..at + 2) {
        let cur = u16::from_be_bytes([c[0], c[1]]);
        let upd = csum::update(cur, old, new);
        c.copy_from_slice(&upd.to_be_bytes());
    }
}

#[inline]
pub(crate) fn read_meta(m: &Meta, f: MetaField) -> u32 {
    match f {
        MetaField::InPort => u32::from(m.in_port),
        MetaField::OutPort => u32::from(m.out_port),
        MetaField::Color => u32::from(m.color),
        MetaField::Tc => u32::from(m.tc),
        MetaField::Hash => m.hash,
        MetaField::Reg(r) => m.regs.get(usize::from(r)).copied().unwrap_or(0),
        MetaField::CtFlag(n) => u32::from(m.reserved >> n & 1),
        MetaField::CtVerdict => u32::from(m.reserved >> 8),
    }
}

#[inline]
fn write_meta(m: &mut Meta, f: MetaField, v: u32) {
    match f {
        MetaField::InPort => m.in_port = v as u16,
        MetaField::OutPort => m.out_port = v as u16,
        MetaField::Color => m.color = v as u8,
        MetaField::Tc => m.tc = v as u8,
        MetaField::Hash => m.hash = v,
        MetaField::Reg(r) => {
            if let Some(x) = m.regs.get_mut(usize::from(r)) {
                *x = v;
            }
        }
        MetaField::CtFlag(n) => m.reserved = (m.reserved & !(1 << n)) | ((v as u16 & 1) << n),
        MetaField::CtVerdict => set_ct_verdict(m, v),
    }
}

/// Writes `ct.verdict` (the high byte of `Meta::reserved`; the conntrack flags keep the low
/// one): what `ct_commit` and `ct_load` leave for the conditions after them.
#[inline]
pub(crate) fn set_ct_verdict(m: &mut Meta, v: u32) {
    m.reserved = (m.reserved & 0xff) | ((v & 0xff) as u16) << 8;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Writing a tunnel's inner IPv4 and TCP fields keeps the inner packet's checksums right
    /// (they once went unchanged), and leaves the outer ones alone.
    #[test]
    fn inner_writes_update_the_inner_checksums() {
        use fastpath_packet::build::FrameBuilder;
        use fastpath_packet::hdr::TcpFlags;
        use std::net::Ipv4Addr;
        let mut f = FrameBuilder::eth([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4(Ipv4Addr::new(192, 168, 0, 1), Ipv4Addr::new(192, 168, 0, 2))
            .udp(40000, 4789)
            .vxlan(100)
            .inner_eth([2, 0, 0, 0, 0, 3], [2, 0, 0, 0, 0, 4])
            .ipv4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
            .tcp(1234, 80, TcpFlags::SYN, 7, 0)
            .payload(b"hello")
            .build();
        let mut m = Meta::arrived(0);
        for h in [Hdr::Eth, Hdr::Ipv4, Hdr::Udp, Hdr::Vxlan, Hdr::InnerEth, Hdr::InnerIpv4, Hdr::InnerTcp] {
            m.valid.insert(h);
        }
        for (slot, off) in
            [(Slot::L3, 14), (Slot::L4, 34), (Slot::Tunnel, 42), (Slot::InnerEth, 50), (Slot::InnerL3, 64), (Slot::InnerL4, 84)]
        {
            m.set_offset(slot, off);
        }
        let outer = f[14..34].to_vec();
        let tcp_ok = |f: &[u8]| {
            let (src, dst) = (f[76..80].try_into().unwrap(), f[80..84].try_into().unwrap());
            fastpath_packet::csum::l4_v4(src, dst, 6, &f[84..]) == 0
        };
        assert!(fastpath_packet::csum::ipv4_header_ok(&f[64..84]) && tcp_ok(&f));
        for (name, v) in [("inner_ipv4.ttl", 9u128), ("inner_ipv4.dscp", 46), ("inner_ipv4.dst", 0x0a00_0063), ("inner_l4.dport", 8080)] {
            let field = FieldRef::resolve(name, &[]).unwrap();
            assert!(field.write(&mut f, &mut m, v), "{name}");
            assert_eq!(field.read(&f, &m), Some(v), "{name}");
            assert!(fastpath_packet::csum::ipv4_header_ok(&f[64..84]), "{name}: the inner IPv4 header checksum");
            assert!(tcp_ok(&f), "{name}: the inner TCP checksum");
            assert_eq!(f[14..34], outer[..], "{name}: the outer IPv4 header is not touched");
        }
    }

    proptest! {
        /// Every field's specialised extractor reads what the generic reader reads, on any
        /// bytes, header set, offsets and metadata (including frames cut short).
        #[test]
        fn extractors_agree_with_the_generic_reader(
            data in proptest::collection::vec(any::<u8>(), 0..96),
            valid: u32,
            offs in proptest::collection::vec(0u16..96, 16),
            regs: [u32; 4],
            reserved: u16,
            in_port: u16,
            color in 0u8..3,
            hash: u32,
        ) {
            let mut m = Meta::arrived(in_port);
            m.valid = HdrSet(valid);
            for (o, v) in m.off.iter_mut().zip(&offs) {
                *o = *v;
            }
            for (r, v) in m.regs.iter_mut().zip(regs) {
                *r = v;
            }
            m.reserved = reserved;
            m.color = color;
            m.hash = hash;
            let user: Vec<(String, u8)> = (0..4).map(|i| (format!("r{i}"), 32)).collect();
            for name in FieldRef::all_names(&user) {
                let f = FieldRef::resolve(&name, &user).unwrap();
                prop_assert_eq!(f.extractor().read(&data, &m), f.read(&data, &m), "{}", name);
            }
        }
    }
}
