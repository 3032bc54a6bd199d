//! The parser stage: walks the standard header graph, limited to the headers the spec lists,
//! and records which headers are present and where they start (`Meta::valid`, `Meta::off`).
//!
//! ```text
//! eth ─▶ vlan ─▶ qinq ─┬▶ ipv4 ─┬▶ udp ─▶ vxlan (dport 4789) ─▶ inner_eth ─▶ inner_ipv4/6 ─▶ inner l4
//!                      ├▶ ipv6 ─┼▶ tcp
//!                      └▶ arp   └▶ icmp / icmp6
//! ```
//! A header the spec does not list ends the walk (the packet is not malformed, just not parsed
//! further). A listed header that is cut short or inconsistent is dropped under its named reason
//! (`ipv4_truncated`, `udp_truncated`, …) — never a panic. Non-first IPv4 fragments have no L4.
//!
//! Uses the checked views of `fastpath_packet::hdr`, so every length is validated once here and
//! later stages can read fields at the recorded offsets.
// cost: see `fastpath bench` per-stage figures (parser row).

use crate::exec::{Stage, StageCx};
use crate::table::{ParsedTuple, TupleSink};
use crate::trace::TraceRec;
use fastpath_packet::each_lane;
use fastpath_packet::hdr::{self, EtherType, IpProto, Malformed, VXLAN_PORT};
use fastpath_packet::{Batch, Hdr, HdrSet, Lanes, Meta, Pool, Slot};

/// An upper-layer protocol, its frame offset and its bytes.
type Upper<'a> = (IpProto, usize, &'a [u8]);

/// The parser stage.
pub struct Parser {
    hs: HdrSet,
    verify_ipv4_checksum: bool,
    special: bool,
    /// The traffic manager's DSCP ▸ class table, when the classifier runs in the parse loop
    /// ([`Parser::with_dscp_classes`]).
    dscp: Option<[u8; 64]>,
    /// Whether each parsed packet's 5-tuple is recorded for the table after the parser
    /// ([`Parser::with_tuples`]).
    tuple: bool,
}

impl Parser {
    /// A parser for the headers in `hs`.
    /// `special`: use the fast paths for common header sets (the reference parser when false).
    pub fn new(hs: HdrSet, verify_ipv4_checksum: bool, special: bool) -> Parser {
        Parser { hs, verify_ipv4_checksum, special, dscp: None, tuple: false }
    }

    /// This parser also records each parsed packet's 5-tuple (`aclkey::ParsedTuple`) during the
    /// ingress, for the classifier table that runs right after it: in the fast path the
    /// headers' bytes are at hand and their lengths checked. Only a parser with the fast paths
    /// and headers past Ethernet ([`Parser::can_classify`]) records them.
    pub fn with_tuples(mut self) -> Parser {
        self.tuple = self.special && Parser::can_classify(self.hs);
        self
    }

    /// This parser also sets `meta.tc` from each parsed packet's DSCP by `map`, as the
    /// classifier stage that runs right after it would ([`crate::stages::classify`]), in the
    /// same pass. Only a parser with the fast paths and headers past Ethernet
    /// ([`Parser::can_classify`]) takes the table.
    pub fn with_dscp_classes(mut self, map: [u8; 64]) -> Parser {
        self.dscp = (self.special && Parser::can_classify(self.hs)).then_some(map);
        self
    }

    /// Whether a parser of `hs` with the fast paths can set the class in its loop (the
    /// Ethernet-only loop reads no IP header).
    pub fn can_classify(hs: HdrSet) -> bool {
        hs != HdrSet::EMPTY.with(Hdr::Eth)
    }

    /// Parses one frame into `m`.
    #[inline]
    pub fn parse(&self, data: &[u8], m: &mut Meta) -> Result<(), Malformed> {
        let hs = self.hs;
        let eth = hdr::Eth::parse(data)?;
        m.valid.insert(Hdr::Eth);
        m.set_offset(Slot::Eth, 0);
        let mut et = eth.ethertype();
        let mut off = 14usize;
        if hs.has(Hdr::Vlan) && et.is_vlan_tag() {
            let rest = data.get(off..).unwrap_or_default();
            let (outer, inner, len) = hdr::vlan::parse_tags(et, rest)?;
            if let Some(o) = outer {
                m.valid.insert(Hdr::Vlan);
                m.set_offset(Slot::Vlan0, off - 2);
                et = o.ethertype();
            }
            if let Some(i) = inner {
                if !hs.has(Hdr::Qinq) {
                    return Ok(());
                }
                m.valid.insert(Hdr::Qinq);
                m.set_offset(Slot::Vlan1, off + 2);
                et = i.ethertype();
            }
            off += len;
        }
        let Some(l3) = data.get(off..) else { return Ok(()) };
        let Some((proto, l4_off, l4)) = self.l3(et, l3, off, m, false)? else { return Ok(()) };
        m.l4_proto = proto.0;
        let Some(udp_payload_off) = self.l4(proto, l4, l4_off, m, false)? else { return Ok(()) };
        // VXLAN: UDP destination port 4789 (RFC 7348 §5).
        if !hs.has(Hdr::Vxlan) || !m.valid.has(Hdr::Udp) {
            return Ok(());
        }
        let dport = hdr::Udp::parse(l4).map(|u| u.dst_port()).unwrap_or(0);
        if dport != VXLAN_PORT {
            return Ok(());
        }
        let vx = hdr::Vxlan::parse(l4.get(8..).unwrap_or_default())?;
        m.valid.insert(Hdr::Vxlan);
        m.set_offset(Slot::Tunnel, udp_payload_off);
        if !hs.has(Hdr::InnerEth) {
            return Ok(());
        }
        let inner_off = udp_payload_off + 8;
        let ieth = hdr::Eth::parse(vx.payload()).map_err(|_| Malformed::VxlanTruncated)?;
        m.valid.insert(Hdr::InnerEth);
        m.set_offset(Slot::InnerEth, inner_off);
        let Some(il3) = data.get(inner_off + 14..) else { return Ok(()) };
        let Some((iproto, il4_off, il4)) = self.l3(ieth.ethertype(), il3, inner_off + 14, m, true)? else { return Ok(()) };
        self.l4(iproto, il4, il4_off, m, true)?;
        Ok(())
    }

    /// The fast path for the common shapes: Ethernet ▸ up to two VLAN tags ▸ IPv4 without
    /// options or IPv6 without extension headers ▸ UDP / TCP (or an upper protocol the spec does not parse) ▸ VXLAN ▸ the
    /// same inside. Straight-line loads at offsets known from the previous header, the IPv4
    /// checksum in three loads. Returns false at the first thing it does not handle — a third
    /// VLAN tag, ARP, options, extension headers, ICMP, fragments, anything malformed — and the caller
    /// parses the frame again with [`Parser::parse`], which decides every drop. When it returns
    /// true, `m` is exactly what `parse` would have written (tested below on mutated frames).
    /// Always inlined into the stage's loop (a call cost about 10 instructions per packet).
    #[inline(always)]
    pub fn parse_fast(&self, d: &[u8], m: &mut Meta) -> bool {
        self.fast_as(self.hs, self.verify_ipv4_checksum, d, m, &mut ())
    }

    /// [`Parser::parse_fast`] for the header set `hs` and checksum option `csum`, which the
    /// specialised loops ([`SPECIALISED`]) pass as constants: every `hs.has(..)` test and the
    /// branches of the headers the set lacks then fold away. The outer headers' 5-tuple goes to
    /// `t` (`aclkey::ParsedTuple`; when the caller does not read it, its loads and stores
    /// fold away too).
    #[inline(always)]
    fn fast_as(&self, hs: HdrSet, csum: bool, d: &[u8], m: &mut Meta, t: &mut impl TupleSink) -> bool {
        let Some(eth) = d.first_chunk::<14>() else { return false };
        let mut et = u16::from_be_bytes([eth[12], eth[13]]);
        let mut valid = HdrSet::EMPTY.with(Hdr::Eth);
        m.set_offset(Slot::Eth, 0);
        let done = |m: &mut Meta, valid: HdrSet| {
            m.valid = valid;
            true
        };
        // Untagged IPv4 first: tested before the tags, it takes one compare where the tag tests
        // and IPv6 cost three more, and `l3_fast` sees `et` as a constant.
        if et == EtherType::IPV4.0 {
            return self.fast_from_l3(hs, csum, d, 14, et, valid, m, t);
        }
        let is_tag = |et: u16| et == EtherType::VLAN.0 || et == EtherType::QINQ.0;
        if !(hs.has(Hdr::Vlan) && is_tag(et)) {
            // Untagged, the common case: the rest inlined with the L3 offset a constant.
            return self.fast_from_l3(hs, csum, d, 14, et, valid, m, t);
        }
        // One tag, or two (Q-in-Q: 0x88a8 or 0x8100, then the C-tag); as `parse_tags`.
        let Some(tags) = d.get(14..).and_then(|s| s.first_chunk::<8>()) else { return false };
        valid.insert(Hdr::Vlan);
        m.set_offset(Slot::Vlan0, 12);
        et = u16::from_be_bytes([tags[2], tags[3]]);
        if !is_tag(et) {
            return self.fast_from_l3(hs, csum, d, 18, et, valid, m, t);
        }
        if !hs.has(Hdr::Qinq) {
            return done(m, valid);
        }
        valid.insert(Hdr::Qinq);
        m.set_offset(Slot::Vlan1, 16);
        self.fast_from_l3(hs, csum, d, 22, u16::from_be_bytes([tags[6], tags[7]]), valid, m, t)
    }

    /// [`Parser::parse_fast`] from the outer L3 header (EtherType `et` at offset `l3`) on.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn fast_from_l3(
        &self,
        hs: HdrSet,
        csum: bool,
        d: &[u8],
        l3: usize,
        et: u16,
        mut valid: HdrSet,
        m: &mut Meta,
        t: &mut impl TupleSink,
    ) -> bool {
        let done = |m: &mut Meta, valid: HdrSet| {
            m.valid = valid;
            true
        };
        let Some((proto, l4, end)) = (match Self::l3_fast(hs, csum, d, l3, et, false, &mut valid, m, t) {
            L3Fast::Bail => return false,
            L3Fast::Done => return done(m, valid),
            L3Fast::Upper(p, l4, end) => Some((p, l4, end)),
        }) else {
            return false;
        };
        m.l4_proto = proto;
        let udp_payload = match Self::l4_fast(hs, d, proto, l4, end, false, &mut valid, m, t) {
            L4Fast::Bail => return false,
            L4Fast::Done => return done(m, valid),
            L4Fast::Udp(p) => p,
        };
        if !hs.has(Hdr::Vxlan) {
            return done(m, valid);
        }
        // UDP destination port 4789 (RFC 7348 §5); the VXLAN header must fit the IP payload.
        let Some(&[_, _, p0, p1]) = d.get(l4..).and_then(|s| s.first_chunk::<4>()) else { return false };
        let dport = u16::from_be_bytes([p0, p1]);
        if dport != VXLAN_PORT {
            return done(m, valid);
        }
        let Some(vx) = d.get(udp_payload..end).and_then(|s| s.first_chunk::<8>()) else { return false };
        if vx[0] & 0x08 == 0 {
            return false;
        }
        valid.insert(Hdr::Vxlan);
        m.set_offset(Slot::Tunnel, udp_payload);
        if !hs.has(Hdr::InnerEth) {
            return done(m, valid);
        }
        let inner = udp_payload + 8;
        if inner + 14 > end {
            return false;
        }
        valid.insert(Hdr::InnerEth);
        m.set_offset(Slot::InnerEth, inner);
        let Some(ie) = d.get(inner..).and_then(|s| s.first_chunk::<14>()) else { return false };
        let iet = u16::from_be_bytes([ie[12], ie[13]]);
        let (iproto, il4, iend) = match Self::l3_fast(hs, csum, d, inner + 14, iet, true, &mut valid, m, t) {
            L3Fast::Bail => return false,
            L3Fast::Done => return done(m, valid),
            L3Fast::Upper(p, l4, end) => (p, l4, end),
        };
        match Self::l4_fast(hs, d, iproto, il4, iend, true, &mut valid, m, t) {
            L4Fast::Bail => false,
            L4Fast::Done | L4Fast::Udp(_) => done(m, valid),
        }
    }

    /// IPv4 (IHL 5) or IPv6 (no extension header) at `off`: the upper protocol, its offset and
    /// the end of the IP payload.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn l3_fast(
        hs: HdrSet,
        csum: bool,
        d: &[u8],
        off: usize,
        et: u16,
        inner: bool,
        valid: &mut HdrSet,
        m: &mut Meta,
        t: &mut impl TupleSink,
    ) -> L3Fast {
        let (v4, v6, slot) = if inner { (Hdr::InnerIpv4, Hdr::InnerIpv6, Slot::InnerL3) } else { (Hdr::Ipv4, Hdr::Ipv6, Slot::L3) };
        if et == EtherType::IPV4.0 {
            if !hs.has(v4) {
                return L3Fast::Done;
            }
            let Some(h) = d.get(off..).and_then(|s| s.first_chunk::<20>()) else { return L3Fast::Bail };
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            // 20 <= total <= what the frame holds from `off` (at least the 20 bytes of `h`), in
            // one compare: a total below 20 wraps past any room.
            if h[0] != 0x45 || total.wrapping_sub(20) > d.len() - off - 20 {
                return L3Fast::Bail;
            }
            if csum && !inner && !ipv4_checksum_ok(h) {
                return L3Fast::Bail;
            }
            valid.insert(v4);
            m.set_offset(slot, off);
            if !inner {
                t.l3(u64::from_le_bytes([h[12], h[13], h[14], h[15], h[16], h[17], h[18], h[19]]), h[9], m.in_port);
            }
            // A non-first fragment has no L4 header: the 13-bit offset, tested in the bytes'
            // own order (flags and the offset's high bits in h[6], its low bits in h[7]).
            if u16::from_le_bytes([h[6], h[7]]) & 0xff1f != 0 {
                return L3Fast::Done;
            }
            L3Fast::Upper(h[9], off + 20, off + total)
        } else if et == EtherType::IPV6.0 {
            if !hs.has(v6) {
                return L3Fast::Done;
            }
            let Some(h) = d.get(off..).and_then(|s| s.first_chunk::<40>()) else { return L3Fast::Bail };
            let end = off + 40 + usize::from(u16::from_be_bytes([h[4], h[5]]));
            if h[0] >> 4 != 6 || end > d.len() || IpProto(h[6]).is_ipv6_ext() {
                return L3Fast::Bail;
            }
            valid.insert(v6);
            m.set_offset(slot, off);
            L3Fast::Upper(h[6], off + 40, end)
        } else if inner {
            // The parser parses no inner ARP or VLAN: the walk ends at the inner Ethernet.
            L3Fast::Done
        } else {
            L3Fast::Bail
        }
    }

    /// UDP or TCP at `off` (the IP payload ends at `end`); ICMP the spec parses is left to the
    /// full parser.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn l4_fast(
        hs: HdrSet,
        d: &[u8],
        proto: u8,
        off: usize,
        end: usize,
        inner: bool,
        valid: &mut HdrSet,
        m: &mut Meta,
        t: &mut impl TupleSink,
    ) -> L4Fast {
        let (udp, tcp, slot) = if inner { (Hdr::InnerUdp, Hdr::InnerTcp, Slot::InnerL4) } else { (Hdr::Udp, Hdr::Tcp, Slot::L4) };
        let room = end.saturating_sub(off);
        if proto == IpProto::UDP.0 && hs.has(udp) {
            let Some(u) = d.get(off..end).and_then(|s| s.first_chunk::<8>()) else { return L4Fast::Bail };
            let len = usize::from(u16::from_be_bytes([u[4], u[5]]));
            if len < 8 || len > room {
                return L4Fast::Bail;
            }
            valid.insert(udp);
            m.set_offset(slot, off);
            if !inner {
                t.l4(u32::from_le_bytes([u[0], u[1], u[2], u[3]]));
            }
            return L4Fast::Udp(off + 8);
        }
        if proto == IpProto::TCP.0 && hs.has(tcp) {
            let Some(h) = d.get(off..end).and_then(|s| s.first_chunk::<20>()) else { return L4Fast::Bail };
            let hlen = usize::from(h[12] >> 4) * 4;
            if hlen < 20 || hlen > room {
                return L4Fast::Bail;
            }
            valid.insert(tcp);
            m.set_offset(slot, off);
            if !inner {
                t.l4(u32::from_le_bytes([h[0], h[1], h[2], h[3]]));
            }
            return L4Fast::Done;
        }
        // ICMP the spec parses is left to the full parser; unparsed, the walk ends (as there).
        let icmp = if inner {
            Hdr::InnerIcmp
        } else if proto == IpProto::ICMP.0 {
            Hdr::Icmp
        } else {
            Hdr::Icmp6
        };
        if (proto == IpProto::ICMP.0 || proto == IpProto::ICMPV6.0) && hs.has(icmp) {
            return L4Fast::Bail;
        }
        L4Fast::Done
    }

    /// Parses an L3 header of type `et` at `l3` (frame offset `off`). Returns the upper protocol,
    /// its frame offset and its bytes (bounded by the IP length fields), if there is one to parse.
    #[inline]
    fn l3<'a>(&self, et: EtherType, l3: &'a [u8], off: usize, m: &mut Meta, inner: bool) -> Result<Option<Upper<'a>>, Malformed> {
        let hs = self.hs;
        let (v4, v6, slot) = if inner { (Hdr::InnerIpv4, Hdr::InnerIpv6, Slot::InnerL3) } else { (Hdr::Ipv4, Hdr::Ipv6, Slot::L3) };
        if et == EtherType::IPV4 && hs.has(v4) {
            let ip = hdr::Ipv4::parse(l3)?;
            if self.verify_ipv4_checksum && !inner {
                ip.verify_checksum()?;
            }
            m.valid.insert(v4);
            m.set_offset(slot, off);
            if ip.frag_offset() != 0 {
                return Ok(None);
            }
            return Ok(Some((ip.protocol(), off + ip.header_len(), ip.payload())));
        }
        if et == EtherType::IPV6 && hs.has(v6) {
            let ip = hdr::Ipv6::parse(l3)?;
            m.valid.insert(v6);
            m.set_offset(slot, off);
            if ip.fragment().is_some_and(|f| f.offset != 0) {
                return Ok(None);
            }
            return Ok(Some((ip.upper_proto(), off + ip.upper_offset(), ip.upper_payload())));
        }
        if et == EtherType::ARP && hs.has(Hdr::Arp) && !inner {
            hdr::Arp::parse(l3)?;
            m.valid.insert(Hdr::Arp);
            m.set_offset(Slot::L3, off);
        }
        Ok(None)
    }

    /// Parses the L4 header. Returns the frame offset of a UDP payload (for VXLAN), if UDP.
    #[inline]
    fn l4(&self, proto: IpProto, l4: &[u8], off: usize, m: &mut Meta, inner: bool) -> Result<Option<usize>, Malformed> {
        let hs = self.hs;
        let slot = if inner { Slot::InnerL4 } else { Slot::L4 };
        let (udp, tcp) = if inner { (Hdr::InnerUdp, Hdr::InnerTcp) } else { (Hdr::Udp, Hdr::Tcp) };
        if proto == IpProto::UDP && hs.has(udp) {
            hdr::Udp::parse(l4)?;
            m.valid.insert(udp);
            m.set_offset(slot, off);
            return Ok(Some(off + 8));
        }
        if proto == IpProto::TCP && hs.has(tcp) {
            hdr::Tcp::parse(l4)?;
            m.valid.insert(tcp);
            m.set_offset(slot, off);
            return Ok(None);
        }
        let icmp = if inner {
            hs.has(Hdr::InnerIcmp).then_some(Hdr::InnerIcmp)
        } else if proto == IpProto::ICMP {
            hs.has(Hdr::Icmp).then_some(Hdr::Icmp)
        } else {
            hs.has(Hdr::Icmp6).then_some(Hdr::Icmp6)
        };
        if let Some(h) = icmp {
            if proto == IpProto::ICMP || proto == IpProto::ICMPV6 {
                hdr::Icmp::parse(l4)?;
                m.valid.insert(h);
                m.set_offset(slot, off);
            }
        }
        Ok(None)
    }
}

/// What [`Parser::l3_fast`] found.
enum L3Fast {
    /// Not a shape of the fast path: parse again with the full parser.
    Bail,
    /// The walk ends here (a header the spec does not parse, a non-first fragment).
    Done,
    /// The upper protocol, its offset and the end of the IP payload.
    Upper(u8, usize, usize),
}

/// What [`Parser::l4_fast`] found.
enum L4Fast {
    /// Parse again with the full parser.
    Bail,
    /// The walk ends here.
    Done,
    /// A UDP header; its payload starts here.
    Udp(usize),
}

/// RFC 1071 over an IPv4 header without options, 32 bits at a time: the ones'-complement sum
/// is the same in either byte order, and a correct header sums to 0xffff (tested against
/// `Ipv4::checksum_ok` below).
#[inline(always)]
fn ipv4_checksum_ok(h: &[u8; 20]) -> bool {
    let w = |k: usize| u64::from(u32::from_ne_bytes([h[k], h[k + 1], h[k + 2], h[k + 3]]));
    // The folded sum of a non-zero s is s mod 0xffff, written 1..=0xffff: it is 0xffff exactly
    // when 0xffff divides s (a multiply and a shift, instead of four folds).
    let s = w(0) + w(4) + w(8) + w(12) + w(16);
    s != 0 && s % 0xffff == 0
}

/// The header sets whose parse loop is monomorphised, each with the IPv4 checksum option its
/// pipeline uses ([`SPECIALISED`]): the shipped pipelines' (a test checks that each of
/// `pipelines/*.toml` is listed). Any other set runs the same code with the set read at run time.
const fn set(hs: &[Hdr]) -> HdrSet {
    let mut s = HdrSet::EMPTY;
    let mut k = 0;
    while k < hs.len() {
        s = s.with(hs[k]);
        k += 1;
    }
    s
}
const ROUTER: HdrSet = set(&[Hdr::Eth, Hdr::Vlan, Hdr::Ipv4, Hdr::Ipv6]);
const SWITCH_ACL: HdrSet = set(&[Hdr::Eth, Hdr::Vlan, Hdr::Arp, Hdr::Ipv4, Hdr::Ipv6, Hdr::Icmp, Hdr::Icmp6, Hdr::Udp, Hdr::Tcp]);
const SDN_OVERLAY: HdrSet = set(&[
    Hdr::Eth,
    Hdr::Ipv4,
    Hdr::Udp,
    Hdr::Tcp,
    Hdr::Icmp,
    Hdr::Vxlan,
    Hdr::InnerEth,
    Hdr::InnerIpv4,
    Hdr::InnerUdp,
    Hdr::InnerTcp,
    Hdr::InnerIcmp,
]);
const VBNG: HdrSet = set(&[Hdr::Eth, Hdr::Vlan, Hdr::Qinq, Hdr::Arp, Hdr::Ipv4, Hdr::Icmp, Hdr::Udp, Hdr::Tcp]);
/// Calls macro `$m` with the (header set, verify IPv4 checksum) pairs that have a loop of
/// their own: the one list that both the dispatch and [`SPECIALISED`] are written from.
macro_rules! with_specialised {
    ($m:ident) => {
        $m!((ROUTER, true), (SWITCH_ACL, false), (SDN_OVERLAY, false), (VBNG, false))
    };
}
macro_rules! pairs {
    ($(($hs:expr, $csum:literal)),*) => {
        &[$(($hs, $csum)),*]
    };
}
/// The (header set, verify IPv4 checksum) pairs with a loop of their own.
pub const SPECIALISED: &[(HdrSet, bool)] = with_specialised!(pairs);

impl Parser {
    /// True when the parser of header set `hs` with checksum option `csum` runs a loop
    /// monomorphised for it.
    pub fn specialised(hs: HdrSet, csum: bool) -> bool {
        SPECIALISED.contains(&(hs, csum))
    }

    /// [`Parser::parse`] into metadata that may hold a fast path's partial writes.
    #[inline]
    fn parse_anew(&self, data: &[u8], m: &mut Meta) -> Result<(), Malformed> {
        m.valid = HdrSet::EMPTY;
        m.l4_proto = 0;
        self.parse(data, m)
    }

    /// The fast-path loop with the header set and checksum option as constants.
    #[inline(never)]
    fn run_as<const HS: u32, const CSUM: bool, const DSCP: bool, const TUPLE: bool>(
        &self,
        pool: &mut Pool,
        b: &mut Batch,
        lanes: Lanes,
        cx: &mut StageCx<'_>,
    ) {
        self.run_fast::<DSCP, TUPLE>(HdrSet(HS), CSUM, pool, b, lanes, cx);
    }

    /// The fast path for every lane, the full parser where it bails (which decides every drop);
    /// with `DSCP`, each parsed packet's class from [`Parser::dscp`]; with `TUPLE`, each parsed
    /// packet's 5-tuple recorded ([`Parser::with_tuples`]) while the records are open.
    #[inline(always)]
    fn run_fast<const DSCP: bool, const TUPLE: bool>(
        &self,
        hs: HdrSet,
        csum: bool,
        pool: &mut Pool,
        b: &mut Batch,
        lanes: Lanes,
        cx: &mut StageCx<'_>,
    ) {
        if TUPLE && !cx.acl_keys.open() {
            return self.run_fast::<DSCP, false>(hs, csum, pool, b, lanes, cx);
        }
        if TUPLE {
            // As stage 0: the table after the parser checks that the records cover its lanes.
            cx.acl_keys.begin(0, lanes);
        }
        let map = self.dscp.unwrap_or([0; 64]);
        each_lane!(i in lanes => {
            let data = pool.data(b.handle(i));
            let (m, mut t) = b.meta_and_words_mut(i);
            // The record is written in the lane's words as the headers come (kept in
            // registers, it made the loop spill others).
            let fast = if TUPLE {
                *t[1] = 0;
                self.fast_as(hs, csum, data, m, &mut t)
            } else {
                self.fast_as(hs, csum, data, m, &mut ())
            };
            if !fast {
                if let Err(e) = self.parse_anew(data, m) {
                    cx.drop(b, i, e.drop_reason());
                    continue;
                }
                if TUPLE {
                    [*t[0], *t[1]] = ParsedTuple::of(data, m);
                }
            }
            if DSCP {
                m.tc = crate::stages::classify::dscp(data, m).map_or(0, |d| map[d & 63]);
            }
        });
    }
}

impl Stage for Parser {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        let tracing = cx.tracing();
        if self.special && self.hs == HdrSet::EMPTY.with(Hdr::Eth) {
            // Ethernet only (l2fwd): a length check is the whole parse.
            each_lane!(i in lanes => {
                if pool.len(b.handle(i)) < hdr::eth::HEADER_LEN {
                    cx.drop(b, i, Malformed::EthTruncated.drop_reason());
                } else {
                    b.meta_mut(i).valid = HdrSet::EMPTY.with(Hdr::Eth);
                }
            });
        } else {
            // The fast path or the full parser only: the build option is tested once per batch.
            if self.special {
                // The loop monomorphised for the shipped pipelines' header sets, generic for
                // any other.
                macro_rules! dispatch {
                    ($(($hs:expr, $csum:literal)),*) => {
                        match (self.hs, self.verify_ipv4_checksum, self.dscp.is_some(), self.tuple) {
                            $((h, $csum, false, false) if h == $hs => self.run_as::<{ $hs.0 }, $csum, false, false>(pool, b, lanes, cx),)*
                            $((h, $csum, true, false) if h == $hs => self.run_as::<{ $hs.0 }, $csum, true, false>(pool, b, lanes, cx),)*
                            $((h, $csum, false, true) if h == $hs => self.run_as::<{ $hs.0 }, $csum, false, true>(pool, b, lanes, cx),)*
                            $((h, $csum, true, true) if h == $hs => self.run_as::<{ $hs.0 }, $csum, true, true>(pool, b, lanes, cx),)*
                            (hs, csum, false, false) => self.run_fast::<false, false>(hs, csum, pool, b, lanes, cx),
                            (hs, csum, true, false) => self.run_fast::<true, false>(hs, csum, pool, b, lanes, cx),
                            (hs, csum, false, true) => self.run_fast::<false, true>(hs, csum, pool, b, lanes, cx),
                            (hs, csum, true, true) => self.run_fast::<true, true>(hs, csum, pool, b, lanes, cx),
                        }
                    };
                }
                with_specialised!(dispatch);
            } else {
                each_lane!(i in lanes => {
                    if let Err(e) = self.parse_anew(pool.data(b.handle(i)), b.meta_mut(i)) {
                        cx.drop(b, i, e.drop_reason());
                    }
                });
            }
        }
        if tracing {
            for i in lanes {
                let len = pool.len(b.handle(i)) as u16;
                cx.trace(i, TraceRec::Parsed { valid: b.meta(i).valid.0, len });
            }
        }
    }

    fn describe(&self) -> String {
        let hs: Vec<&str> = Hdr::ALL.iter().filter(|h| self.hs.has(**h)).map(|h| h.name()).collect();
        format!("parse [{}]{}", hs.join(", "), if self.verify_ipv4_checksum { ", verify IPv4 checksum" } else { "" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_packet::build::FrameBuilder;
    use fastpath_packet::hdr::TcpFlags;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 0xb];

    /// Frames of every shape the fast path handles and of several it leaves to the full parser.
    fn shapes() -> Vec<Vec<u8>> {
        let (s, d) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 19, 0, 2));
        let (s6, d6) = (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
        let e = || FrameBuilder::eth(A, B);
        vec![
            e().ipv4(s, d).udp(1, 2).payload(&[7; 18]).build(),
            e().ipv4(s, d).tcp(1, 80, TcpFlags::SYN, 5, 0).build(),
            e().ipv4(s, d).icmp_echo(1, 2).build(),
            e().ipv6(s6, d6).udp(1, 2).payload(&[1; 10]).build(),
            e().ipv6(s6, d6).tcp(1, 2, TcpFlags::ACK, 1, 1).build(),
            e().vlan(5, 0).ipv4(s, d).udp(1, 2).build(),
            e().qinq(100, 7).ipv4(s, d).udp(68, 67).payload(&[3; 12]).build(),
            e().qinq(100, 7).ipv6(s6, d6).tcp(1, 2, TcpFlags::ACK, 1, 1).build(),
            e().qinq(100, 7).arp(hdr::arp::ArpRepr { op: hdr::arp::ArpOp::REQUEST, sha: B, spa: s, tha: [0; 6], tpa: d }).build(),
            e().ipv4(s, d).udp(9, 4789).vxlan(77).inner_eth(B, A).ipv4(d, s).tcp(3, 4, TcpFlags::ACK, 1, 2).build(),
            e().ipv4(s, d).udp(9, 4789).vxlan(77).inner_eth(B, A).ipv6(s6, d6).udp(3, 4).build(),
            e().ipv4(s, d).udp(9, 4789).vxlan(77).inner_eth(B, A).ipv4(d, s).icmp_echo(1, 1).build(),
        ]
    }

    fn parsers() -> Vec<Parser> {
        let all = Hdr::ALL.iter().fold(HdrSet::EMPTY, |s, h| s.with(*h));
        let some = [Hdr::Eth, Hdr::Ipv4, Hdr::Udp, Hdr::Vxlan, Hdr::InnerEth, Hdr::InnerIpv4, Hdr::InnerTcp];
        let some = some.iter().fold(HdrSet::EMPTY, |s, h| s.with(*h));
        let l3 = HdrSet::EMPTY.with(Hdr::Eth).with(Hdr::Ipv4).with(Hdr::Ipv6);
        let one_tag = l3.with(Hdr::Vlan).with(Hdr::Udp);
        let shipped = SPECIALISED.iter().map(|&(hs, _)| hs);
        [all, some, l3, one_tag]
            .into_iter()
            .chain(shipped)
            .flat_map(|hs| [Parser::new(hs, true, true), Parser::new(hs, false, true)])
            .collect()
    }

    proptest! {
        /// Whenever the fast path claims a frame, it leaves exactly the metadata the full parser
        /// writes (and the full parser accepts the frame): on every shape, truncated anywhere and
        /// with any byte of the headers changed.
        #[test]
        fn fast_path_agrees_with_the_full_parser(shape in 0usize..12, cut in 0usize..200, flips in proptest::collection::vec((0usize..120, any::<u8>()), 0..3)) {
            let mut f = shapes()[shape].clone();
            for (at, v) in flips {
                if let Some(b) = f.get_mut(at) { *b = v; }
            }
            f.truncate(f.len().saturating_sub(cut % 40));
            for p in parsers() {
                let mut fast = Meta::arrived(3);
                // From a record that holds garbage: the fast path must write every word that
                // matters (the second always, the first with an IPv4 header).
                let (mut lo, mut hi) = (0x5a5a_5a5a_5a5a_5a5a, 0);
                if p.fast_as(p.hs, p.verify_ipv4_checksum, &f, &mut fast, &mut [&mut lo, &mut hi]) {
                    let mut full = Meta::arrived(3);
                    prop_assert!(p.parse(&f, &mut full).is_ok(), "fast path accepted a frame the parser drops: {f:02x?}");
                    prop_assert_eq!(fast.valid, full.valid);
                    prop_assert_eq!(fast.l4_proto, full.l4_proto);
                    for h in Hdr::ALL.iter().filter(|h| full.valid.has(**h)) {
                        prop_assert_eq!(fast.offset(h.slot()), full.offset(h.slot()), "{:?}", h);
                    }
                    // The 5-tuple the fast path recorded on the way is the one read from the
                    // full parser's metadata (what the full parser's frames get).
                    let want = ParsedTuple::of(&f, &full);
                    prop_assert_eq!(hi, want[1], "{:02x?}", f);
                    if full.valid.has(Hdr::Ipv4) {
                        prop_assert_eq!(lo, want[0], "{:02x?}", f);
                    }
                }
            }
        }
    }

    proptest! {
        /// The divisibility form of the checksum test agrees with the folding one.
        #[test]
        fn checksum_check_agrees_with_the_header_view(h in proptest::array::uniform20(any::<u8>()), fix in any::<bool>()) {
            let mut h = h;
            h[0] = 0x45;
            h[2] = 0;
            h[3] = 20; // total length: the header alone, so the view parses it
            if fix {
                h[10] = 0;
                h[11] = 0;
                let c = fastpath_packet::csum::checksum(&h);
                h[10..12].copy_from_slice(&c.to_be_bytes());
            }
            let ours = ipv4_checksum_ok(&h);
            prop_assert_eq!(Some(ours), hdr::Ipv4::parse(&h).ok().map(|v| v.checksum_ok()));
        }
    }

    #[test]
    fn fast_path_takes_the_common_shapes() {
        let p = Parser::new(Hdr::ALL.iter().fold(HdrSet::EMPTY, |s, h| s.with(*h)), true, true);
        let took: Vec<bool> = shapes().iter().map(|f| p.parse_fast(f, &mut Meta::arrived(0))).collect();
        // ICMP and ARP frames go to the full parser.
        assert_eq!(took, [true, true, false, true, true, true, true, true, false, true, true, false]);
    }
}
