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
use crate::trace::TraceRec;
use fastpath_packet::hdr::{self, EtherType, IpProto, Malformed, VXLAN_PORT};
use fastpath_packet::{Batch, Hdr, HdrSet, Lanes, Meta, Pool, Slot};

/// The parser stage.
pub struct Parser {
    hs: HdrSet,
    verify_ipv4_checksum: bool,
    special: bool,
}

impl Parser {
    /// A parser for the headers in `hs`.
    /// `special`: use the fast paths for common header sets (the reference parser when false).
    pub fn new(hs: HdrSet, verify_ipv4_checksum: bool, special: bool) -> Parser {
        Parser { hs, verify_ipv4_checksum, special }
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

    /// Parses an L3 header of type `et` at `l3` (frame offset `off`). Returns the upper protocol,
    /// its frame offset and its bytes (bounded by the IP length fields), if there is one to parse.
    #[inline]
    fn l3<'a>(
        &self,
        et: EtherType,
        l3: &'a [u8],
        off: usize,
        m: &mut Meta,
        inner: bool,
    ) -> Result<Option<(IpProto, usize, &'a [u8])>, Malformed> {
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

impl Stage for Parser {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        let tracing = cx.tracing();
        if self.special && self.hs == HdrSet::EMPTY.with(Hdr::Eth) {
            // Ethernet only (l2fwd): a length check is the whole parse.
            for i in lanes {
                if pool.len(b.handle(i)) < hdr::eth::HEADER_LEN {
                    cx.drop(b, i, Malformed::EthTruncated.drop_reason());
                } else {
                    b.meta_mut(i).valid = HdrSet::EMPTY.with(Hdr::Eth);
                }
            }
        } else {
            for i in lanes {
                let data = pool.data(b.handle(i));
                let m = b.meta_mut(i);
                m.valid = HdrSet::EMPTY;
                if let Err(e) = self.parse(data, m) {
                    cx.drop(b, i, e.drop_reason());
                }
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
