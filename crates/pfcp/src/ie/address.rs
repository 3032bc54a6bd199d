//! Addresses and encapsulation headers: Node ID, F-SEID, UE IP Address, MAC address, C-TAG /
//! S-TAG, Outer Header Creation and Removal (TS 29.244 clause 8.2).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::DecodeError;
use crate::wire::{Cx, IeValue, Rd, W};

/// Node ID (clause 8.2.38).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NodeId {
    /// Type 0.
    Ipv4(Ipv4Addr),
    /// Type 1.
    Ipv6(Ipv6Addr),
    /// Type 2: an FQDN, written as DNS labels (RFC 1035 clause 3.1, no root label).
    Fqdn(String),
}

impl Default for NodeId {
    fn default() -> Self {
        NodeId::Ipv4(Ipv4Addr::UNSPECIFIED)
    }
}

impl IeValue for NodeId {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        match r.u8()? & 0x0f {
            0 => Ok(NodeId::Ipv4(Ipv4Addr::from(r.array::<4>()?))),
            1 => Ok(NodeId::Ipv6(Ipv6Addr::from(r.array::<16>()?))),
            2 => {
                let mut labels = r.rest();
                let mut name = String::new();
                if labels.is_empty() {
                    return Err(cx.short(1));
                }
                while let [len, rest @ ..] = labels {
                    let at = v.len() - labels.len();
                    let len = usize::from(*len);
                    let label = rest.get(..len).ok_or(cx.short(v.len()))?;
                    // Labels are letters, digits and hyphens (RFC 1035 clause 2.3.1); we
                    // also allow '_' but nothing that would not survive the dotted form.
                    // RFC 1035 clause 2.3.4: "labels 63 octets or less".
                    if len == 0 || len > 63 || !label.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_') {
                        return Err(cx.bad(at));
                    }
                    if !name.is_empty() {
                        name.push('.');
                    }
                    name.extend(label.iter().map(|b| char::from(*b)));
                    labels = rest.get(len..).unwrap_or_default();
                }
                Ok(NodeId::Fqdn(name))
            }
            _ => Err(cx.bad(0)),
        }
    }
    fn encode_value(&self, w: &mut W) {
        match self {
            NodeId::Ipv4(a) => {
                w.u8(0);
                w.bytes(&a.octets());
            }
            NodeId::Ipv6(a) => {
                w.u8(1);
                w.bytes(&a.octets());
            }
            NodeId::Fqdn(name) => {
                w.u8(2);
                for label in name.split('.') {
                    let b = label.as_bytes();
                    let b = b.get(..63).unwrap_or(b);
                    w.u8(b.len() as u8);
                    w.bytes(b);
                }
            }
        }
    }
}

/// F-SEID (clause 8.2.37): a session endpoint identifier and the node's address(es).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FSeid {
    /// SEID.
    pub seid: u64,
    /// IPv4 address (flag V4).
    pub ipv4: Option<Ipv4Addr>,
    /// IPv6 address (flag V6).
    pub ipv6: Option<Ipv6Addr>,
}

impl IeValue for FSeid {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let flags = r.u8()?;
        let seid = r.u64()?;
        let ipv4 = if flags & 0x02 != 0 { Some(Ipv4Addr::from(r.array::<4>()?)) } else { None };
        let ipv6 = if flags & 0x01 != 0 { Some(Ipv6Addr::from(r.array::<16>()?)) } else { None };
        Ok(Self { seid, ipv4, ipv6 })
    }
    fn encode_value(&self, w: &mut W) {
        w.u8(u8::from(self.ipv4.is_some()) << 1 | u8::from(self.ipv6.is_some()));
        w.u64(self.seid);
        if let Some(a) = self.ipv4 {
            w.bytes(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            w.bytes(&a.octets());
        }
    }
}

/// UE IP Address (clause 8.2.62).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UeIpAddress {
    /// IPv4 address (flag V4).
    pub ipv4: Option<Ipv4Addr>,
    /// IPv6 address (flag V6).
    pub ipv6: Option<Ipv6Addr>,
    /// S/D: set when the address is a destination address (downlink PDI).
    pub destination: bool,
    /// IPv6 Prefix Delegation Bits (flag IPv6D).
    pub ipv6_prefix_delegation_bits: Option<u8>,
    /// CHV4: the UP function chooses the IPv4 address.
    pub choose_ipv4: bool,
    /// CHV6: the UP function chooses the IPv6 address.
    pub choose_ipv6: bool,
    /// IPv6 Prefix Length (flag IP6PL).
    pub ipv6_prefix_length: Option<u8>,
}

impl IeValue for UeIpAddress {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let f = r.u8()?;
        let ipv4 = if f & 0x02 != 0 { Some(Ipv4Addr::from(r.array::<4>()?)) } else { None };
        let ipv6 = if f & 0x01 != 0 { Some(Ipv6Addr::from(r.array::<16>()?)) } else { None };
        let ipv6_prefix_delegation_bits = if f & 0x08 != 0 { Some(r.u8()?) } else { None };
        let ipv6_prefix_length = if f & 0x40 != 0 { Some(r.u8()?) } else { None };
        Ok(Self {
            ipv4,
            ipv6,
            destination: f & 0x04 != 0,
            ipv6_prefix_delegation_bits,
            choose_ipv4: f & 0x10 != 0,
            choose_ipv6: f & 0x20 != 0,
            ipv6_prefix_length,
        })
    }
    fn encode_value(&self, w: &mut W) {
        let f = u8::from(self.ipv6.is_some())
            | u8::from(self.ipv4.is_some()) << 1
            | u8::from(self.destination) << 2
            | u8::from(self.ipv6_prefix_delegation_bits.is_some()) << 3
            | u8::from(self.choose_ipv4) << 4
            | u8::from(self.choose_ipv6) << 5
            | u8::from(self.ipv6_prefix_length.is_some()) << 6;
        w.u8(f);
        if let Some(a) = self.ipv4 {
            w.bytes(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            w.bytes(&a.octets());
        }
        if let Some(b) = self.ipv6_prefix_delegation_bits {
            w.u8(b);
        }
        if let Some(b) = self.ipv6_prefix_length {
            w.u8(b);
        }
    }
}

/// MAC address (clause 8.2.93).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MacAddress {
    /// Source MAC address (SOUR).
    pub source: Option<[u8; 6]>,
    /// Destination MAC address (DEST).
    pub destination: Option<[u8; 6]>,
    /// Upper source MAC address of a range (USOU).
    pub upper_source: Option<[u8; 6]>,
    /// Upper destination MAC address of a range (UDES).
    pub upper_destination: Option<[u8; 6]>,
}

impl IeValue for MacAddress {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let f = r.u8()?;
        let mut vals = [None; 4];
        for (i, slot) in vals.iter_mut().enumerate() {
            if f & (1 << i) != 0 {
                *slot = Some(r.array::<6>()?);
            }
        }
        let [source, destination, upper_source, upper_destination] = vals;
        Ok(Self { source, destination, upper_source, upper_destination })
    }
    fn encode_value(&self, w: &mut W) {
        let vals = [self.source, self.destination, self.upper_source, self.upper_destination];
        let f = vals.iter().enumerate().fold(0u8, |f, (i, v)| f | u8::from(v.is_some()) << i);
        w.u8(f);
        for v in vals.into_iter().flatten() {
            w.bytes(&v);
        }
    }
}

/// C-TAG (clause 8.2.94) and S-TAG (clause 8.2.95): each part present or not.
///
/// ```text
///  Octet 5  Spare | VID | DEI | PCP          (flags)
///  Octet 6  VID bits 12-9 | DEI | PCP value
///  Octet 7  VID bits 8-1
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Priority code point (3 bits).
    pub pcp: Option<u8>,
    /// Drop eligible indicator.
    pub dei: Option<bool>,
    /// VLAN ID (12 bits).
    pub vid: Option<u16>,
}

impl IeValue for VlanTag {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let f = r.u8()?;
        let b6 = r.u8()?;
        let b7 = r.u8()?;
        Ok(Self {
            pcp: (f & 0x01 != 0).then_some(b6 & 0x07),
            dei: (f & 0x02 != 0).then_some(b6 & 0x08 != 0),
            vid: (f & 0x04 != 0).then_some(u16::from(b6 >> 4) << 8 | u16::from(b7)),
        })
    }
    fn encode_value(&self, w: &mut W) {
        let f = u8::from(self.pcp.is_some()) | u8::from(self.dei.is_some()) << 1 | u8::from(self.vid.is_some()) << 2;
        let vid = self.vid.unwrap_or(0) & 0x0fff;
        let b6 = ((vid >> 8) as u8) << 4 | u8::from(self.dei.unwrap_or(false)) << 3 | (self.pcp.unwrap_or(0) & 0x07);
        w.u8(f);
        w.u8(b6);
        w.u8(vid as u8);
    }
}

/// Outer Header Creation (clause 8.2.56). Which fields are on the wire follows from
/// `description`; a field the description calls for but that is `None` is written as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OuterHeaderCreation {
    /// Outer Header Creation Description, octet 5 in the high byte: [`Self::GTPU_UDP_IPV4`]…
    pub description: u16,
    /// TEID (GTP-U descriptions).
    pub teid: Option<u32>,
    /// IPv4 address.
    pub ipv4: Option<Ipv4Addr>,
    /// IPv6 address.
    pub ipv6: Option<Ipv6Addr>,
    /// UDP port (UDP/IP descriptions).
    pub port: Option<u16>,
    /// C-TAG, 3 octets as in [`VlanTag`].
    pub c_tag: Option<[u8; 3]>,
    /// S-TAG, 3 octets as in [`VlanTag`].
    pub s_tag: Option<[u8; 3]>,
}

impl OuterHeaderCreation {
    /// GTP-U/UDP/IPv4.
    pub const GTPU_UDP_IPV4: u16 = 0x0100;
    /// GTP-U/UDP/IPv6.
    pub const GTPU_UDP_IPV6: u16 = 0x0200;
    /// UDP/IPv4.
    pub const UDP_IPV4: u16 = 0x0400;
    /// UDP/IPv6.
    pub const UDP_IPV6: u16 = 0x0800;
    /// IPv4.
    pub const IPV4: u16 = 0x1000;
    /// IPv6.
    pub const IPV6: u16 = 0x2000;
    /// C-TAG.
    pub const C_TAG: u16 = 0x4000;
    /// S-TAG.
    pub const S_TAG: u16 = 0x8000;

    fn has(&self, bits: u16) -> bool {
        self.description & bits != 0
    }
}

impl IeValue for OuterHeaderCreation {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let mut o = Self { description: r.u16()?, ..Self::default() };
        if o.has(Self::GTPU_UDP_IPV4 | Self::GTPU_UDP_IPV6) {
            o.teid = Some(r.u32()?);
        }
        if o.has(Self::GTPU_UDP_IPV4 | Self::UDP_IPV4 | Self::IPV4) {
            o.ipv4 = Some(Ipv4Addr::from(r.array::<4>()?));
        }
        if o.has(Self::GTPU_UDP_IPV6 | Self::UDP_IPV6 | Self::IPV6) {
            o.ipv6 = Some(Ipv6Addr::from(r.array::<16>()?));
        }
        if o.has(Self::UDP_IPV4 | Self::UDP_IPV6) {
            o.port = Some(r.u16()?);
        }
        if o.has(Self::C_TAG) {
            o.c_tag = Some(r.array()?);
        }
        if o.has(Self::S_TAG) {
            o.s_tag = Some(r.array()?);
        }
        Ok(o)
    }
    fn encode_value(&self, w: &mut W) {
        w.u16(self.description);
        if self.has(Self::GTPU_UDP_IPV4 | Self::GTPU_UDP_IPV6) {
            w.u32(self.teid.unwrap_or(0));
        }
        if self.has(Self::GTPU_UDP_IPV4 | Self::UDP_IPV4 | Self::IPV4) {
            w.bytes(&self.ipv4.unwrap_or(Ipv4Addr::UNSPECIFIED).octets());
        }
        if self.has(Self::GTPU_UDP_IPV6 | Self::UDP_IPV6 | Self::IPV6) {
            w.bytes(&self.ipv6.unwrap_or(Ipv6Addr::UNSPECIFIED).octets());
        }
        if self.has(Self::UDP_IPV4 | Self::UDP_IPV6) {
            w.u16(self.port.unwrap_or(0));
        }
        if self.has(Self::C_TAG) {
            w.bytes(&self.c_tag.unwrap_or_default());
        }
        if self.has(Self::S_TAG) {
            w.bytes(&self.s_tag.unwrap_or_default());
        }
    }
}

/// Outer Header Removal (clause 8.2.64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OuterHeaderRemoval {
    /// Outer Header Removal Description: 0 GTP-U/UDP/IPv4, 1 GTP-U/UDP/IPv6, 2 UDP/IPv4,
    /// 3 UDP/IPv6, 4 IPv4, 5 IPv6, 6 GTP-U/UDP/IP, 7 VLAN S-TAG, 8 S-TAG and C-TAG.
    pub description: u8,
    /// GTP-U Extension Header Deletion (octet 6), when present.
    pub gtpu_extension_header_deletion: Option<u8>,
}

impl OuterHeaderRemoval {
    /// GTP-U/UDP/IPv4.
    pub const GTPU_UDP_IPV4: u8 = 0;
    /// VLAN S-TAG.
    pub const S_TAG: u8 = 7;
    /// S-TAG and C-TAG.
    pub const S_TAG_AND_C_TAG: u8 = 8;
}

impl IeValue for OuterHeaderRemoval {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let description = r.u8()?;
        let ext = if v.len() > 1 { Some(r.u8()?) } else { None };
        Ok(Self { description, gtpu_extension_header_deletion: ext })
    }
    fn encode_value(&self, w: &mut W) {
        w.u8(self.description);
        if let Some(e) = self.gtpu_extension_header_deletion {
            w.u8(e);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::ie::ie_type;

    /// A 64-octet label is refused: the encoder could not write it back (labels are at most
    /// 63 octets), so accepting it would break decode(encode(decode(x))) == decode(x).
    #[test]
    fn node_id_fqdn_label_limits() {
        let cx = Cx { ie_type: ie_type::NODE_ID, off: 12 };
        let mut v = vec![2, 63];
        v.extend([b'a'; 63]);
        assert_eq!(NodeId::decode_value(&v, cx), Ok(NodeId::Fqdn("a".repeat(63))));
        v[1] = 64;
        v.push(b'a');
        let e = NodeId::decode_value(&v, cx).unwrap_err();
        assert_eq!((e.kind, e.offset), (crate::ErrorKind::IeIncorrect, 13));
    }
}
