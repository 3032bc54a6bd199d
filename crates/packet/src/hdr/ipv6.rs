//! IPv6 header (RFC 8200 §3) and extension-header skipping (RFC 8200 §4, RFC 4302).
//!
//! ```text
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version| Traffic Class |           Flow Label                  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Payload Length        |  Next Header  |   Hop Limit   |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                 Source Address (128 bits)                     |
//! |                 Destination Address (128 bits)                |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! # Extension headers
//! `parse` walks the chain that follows the fixed header while the next-header value is one of
//! hop-by-hop (0), routing (43), fragment (44), destination options (60) or AH (51), and
//! records the upper-layer protocol and where it starts. Lengths:
//! ```text
//!  hop-by-hop, routing, dest. options:  | next | hdr ext len | ... |  (hdr ext len + 1) × 8 bytes
//!  fragment:                            | next | rsvd | offset,M | ident |    8 bytes
//!  AH (RFC 4302 §2.2):                  | next | payload len | ... |  (payload len + 2) × 4 bytes
//! ```
//! At most [`MAX_EXT_HEADERS`] are walked (a longer chain is `TooManyHeaders`: RFC 8200 §4.1
//! allows each at most once or twice, so 8 is generous). ESP (50) and No Next Header (59) end
//! the walk like any upper-layer protocol. For a non-first fragment ([`Ipv6::fragment`] with a
//! non-zero offset) the upper-layer header is not in this packet. Jumbograms (RFC 2675) are not
//! supported: a zero payload length means an empty payload.

use std::net::Ipv6Addr;

use zerocopy::byteorder::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{room, BufferTooSmall, IpProto, Malformed};
use crate::csum;

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;
/// Most extension headers `parse` walks before giving up with `TooManyHeaders`.
pub const MAX_EXT_HEADERS: usize = 8;
/// Default hop limit of builders.
pub const DEFAULT_HOP_LIMIT: u8 = 64;

#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Fixed {
    ver_tc_flow: U32,
    payload_len: U16,
    next_header: u8,
    hop_limit: u8,
    src: [u8; 16],
    dst: [u8; 16],
}

/// The fields of an IPv6 fragment header (RFC 8200 §4.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ipv6Frag {
    /// Fragment offset in 8-byte units.
    pub offset: u16,
    /// More fragments follow.
    pub more: bool,
    /// Identification.
    pub ident: u32,
}

/// Length of the extension header of kind `kind` whose first 8 bytes are `h`.
#[inline]
fn ext_len(kind: IpProto, h: &[u8; 8]) -> usize {
    match kind {
        IpProto::FRAGMENT => 8,
        IpProto::AH => (usize::from(h[1]) + 2) * 4,
        _ => (usize::from(h[1]) + 1) * 8,
    }
}

struct Walk {
    upper: IpProto,
    ext_len: usize,
    frag: Option<Ipv6Frag>,
    count: u8,
}

/// Walks the extension-header chain starting with `first` over `payload`.
#[inline]
fn walk(first: u8, payload: &[u8]) -> Result<Walk, Malformed> {
    let mut next = IpProto(first);
    let mut off = 0usize;
    let mut count = 0u8;
    let mut frag = None;
    while next.is_ipv6_ext() {
        if usize::from(count) == MAX_EXT_HEADERS {
            return Err(Malformed::TooManyHeaders);
        }
        let h: &[u8; 8] = payload.get(off..off + 8).and_then(|s| s.try_into().ok()).ok_or(Malformed::Ipv6ExtTruncated)?;
        let len = ext_len(next, h);
        if next == IpProto::FRAGMENT {
            let w = u16::from_be_bytes([h[2], h[3]]);
            frag = Some(Ipv6Frag { offset: w >> 3, more: w & 1 != 0, ident: u32::from_be_bytes([h[4], h[5], h[6], h[7]]) });
        }
        if off + len > payload.len() {
            return Err(Malformed::Ipv6ExtTruncated);
        }
        next = IpProto(h[0]);
        off += len;
        count += 1;
    }
    Ok(Walk { upper: next, ext_len: off, frag, count })
}

#[inline]
fn check(fixed: &Fixed, rest_len: usize) -> Result<usize, Malformed> {
    if fixed.ver_tc_flow.get() >> 28 != 6 {
        return Err(Malformed::Ipv6Version);
    }
    let n = usize::from(fixed.payload_len.get());
    if n > rest_len {
        return Err(Malformed::Ipv6Truncated);
    }
    Ok(n)
}

/// A checked read view of an IPv6 packet with its extension headers walked.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6<'a> {
    fixed: &'a Fixed,
    payload: &'a [u8],
    ext: &'a [u8],
    upper: &'a [u8],
    upper_proto: IpProto,
    frag: Option<Ipv6Frag>,
    ext_count: u8,
}

impl<'a> Ipv6<'a> {
    /// Checks version and payload length against `buf` and walks the extension headers (see
    /// the module doc). Bytes past the payload length are ignored.
    ///
    /// # Errors
    /// [`Malformed::Ipv6Truncated`], [`Malformed::Ipv6Version`],
    /// [`Malformed::Ipv6ExtTruncated`], [`Malformed::TooManyHeaders`].
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<Self, Malformed> {
        let (fixed, rest) = Fixed::ref_from_prefix(buf).map_err(|_| Malformed::Ipv6Truncated)?;
        let n = check(fixed, rest.len())?;
        let payload = rest.get(..n).ok_or(Malformed::Ipv6Truncated)?;
        let w = walk(fixed.next_header, payload)?;
        let (ext, upper) = payload.split_at_checked(w.ext_len).ok_or(Malformed::Ipv6ExtTruncated)?;
        Ok(Self { fixed, payload, ext, upper, upper_proto: w.upper, frag: w.frag, ext_count: w.count })
    }
    /// Traffic class (DSCP << 2 | ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.fixed.ver_tc_flow.get() >> 20) as u8
    }
    /// DSCP (RFC 2474).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }
    /// ECN (RFC 3168).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 3
    }
    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.fixed.ver_tc_flow.get() & 0x000f_ffff
    }
    /// Payload length field (extension headers and upper layer) in bytes.
    #[inline]
    pub fn payload_len(&self) -> u16 {
        self.fixed.payload_len.get()
    }
    /// Next header of the fixed header (an extension header or the upper layer).
    #[inline]
    pub fn next_header(&self) -> IpProto {
        IpProto(self.fixed.next_header)
    }
    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.fixed.hop_limit
    }
    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.fixed.src)
    }
    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.fixed.dst)
    }
    /// Source address as bytes.
    #[inline]
    pub fn src_bytes(&self) -> [u8; 16] {
        self.fixed.src
    }
    /// Destination address as bytes.
    #[inline]
    pub fn dst_bytes(&self) -> [u8; 16] {
        self.fixed.dst
    }
    /// The whole payload (extension headers and upper layer).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
    /// The extension headers, raw.
    #[inline]
    pub fn ext_headers(&self) -> &'a [u8] {
        self.ext
    }
    /// Number of extension headers walked.
    #[inline]
    pub fn ext_count(&self) -> usize {
        usize::from(self.ext_count)
    }
    /// Iterates over the extension headers: (kind, whole header bytes).
    #[inline]
    pub fn exts(&self) -> Exts<'a> {
        Exts { next: self.next_header(), rest: self.ext }
    }
    /// The upper-layer protocol (after the extension headers).
    #[inline]
    pub fn upper_proto(&self) -> IpProto {
        self.upper_proto
    }
    /// Offset of the upper-layer header from the start of the IPv6 header.
    #[inline]
    pub fn upper_offset(&self) -> usize {
        HEADER_LEN + self.ext.len()
    }
    /// The upper-layer bytes (after the extension headers).
    #[inline]
    pub fn upper_payload(&self) -> &'a [u8] {
        self.upper
    }
    /// The fragment header's fields, if there is one.
    #[inline]
    pub fn fragment(&self) -> Option<Ipv6Frag> {
        self.frag
    }
    /// The pseudo-header partial sum for the upper layer (RFC 8200 §8.1).
    #[inline]
    pub fn pseudo_sum(&self) -> u16 {
        let len = u32::try_from(self.upper.len()).unwrap_or(u32::MAX);
        csum::pseudo_v6(self.fixed.src, self.fixed.dst, self.upper_proto.0, len)
    }
}

/// Iterator over already-validated IPv6 extension headers.
#[derive(Debug, Clone)]
pub struct Exts<'a> {
    next: IpProto,
    rest: &'a [u8],
}

impl<'a> Iterator for Exts<'a> {
    type Item = (IpProto, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        let h: &[u8; 8] = self.rest.get(..8).and_then(|s| s.try_into().ok())?;
        let kind = self.next;
        let (this, rest) = self.rest.split_at_checked(ext_len(kind, h))?;
        self.next = IpProto(h[0]);
        self.rest = rest;
        Some((kind, this))
    }
}

/// A checked write view of an IPv6 packet. IPv6 has no header checksum; changing an address
/// changes the upper layer's pseudo-header (fix it with `UdpMut::update_pseudo` and friends).
#[derive(Debug)]
pub struct Ipv6Mut<'a> {
    fixed: &'a mut Fixed,
    ext: &'a mut [u8],
    upper: &'a mut [u8],
    upper_proto: IpProto,
}

impl<'a> Ipv6Mut<'a> {
    /// As [`Ipv6::parse`], for in-place edits.
    ///
    /// # Errors
    /// As [`Ipv6::parse`].
    #[inline]
    pub fn parse(buf: &'a mut [u8]) -> Result<Self, Malformed> {
        let (fixed, rest) = Fixed::mut_from_prefix(buf).map_err(|_| Malformed::Ipv6Truncated)?;
        let n = check(fixed, rest.len())?;
        let payload = rest.get_mut(..n).ok_or(Malformed::Ipv6Truncated)?;
        let w = walk(fixed.next_header, payload)?;
        let (ext, upper) = payload.split_at_mut_checked(w.ext_len).ok_or(Malformed::Ipv6ExtTruncated)?;
        Ok(Self { fixed, ext, upper, upper_proto: w.upper })
    }
    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.fixed.hop_limit
    }
    /// Sets the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, h: u8) {
        self.fixed.hop_limit = h;
    }
    /// Decrements the hop limit for forwarding and returns the new value, or `None` (header
    /// unchanged) when it would reach zero (RFC 8200 §3: the packet must then be discarded).
    #[inline]
    pub fn decrement_hop_limit(&mut self) -> Option<u8> {
        let h = self.fixed.hop_limit.checked_sub(1).filter(|&h| h > 0)?;
        self.fixed.hop_limit = h;
        Some(h)
    }
    /// Sets the traffic class byte.
    #[inline]
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = self.fixed.ver_tc_flow.get();
        self.fixed.ver_tc_flow.set((w & 0xf00f_ffff) | (u32::from(tc) << 20));
    }
    /// Traffic class byte.
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.fixed.ver_tc_flow.get() >> 20) as u8
    }
    /// Sets the DSCP (masked to 6 bits), keeping ECN.
    #[inline]
    pub fn set_dscp(&mut self, dscp: u8) {
        let tc = self.traffic_class();
        self.set_traffic_class(((dscp & 0x3f) << 2) | (tc & 3));
    }
    /// Sets the ECN field (masked to 2 bits), keeping DSCP.
    #[inline]
    pub fn set_ecn(&mut self, ecn: u8) {
        let tc = self.traffic_class();
        self.set_traffic_class((tc & !3) | (ecn & 3));
    }
    /// Sets the flow label (masked to 20 bits).
    #[inline]
    pub fn set_flow_label(&mut self, fl: u32) {
        let w = self.fixed.ver_tc_flow.get();
        self.fixed.ver_tc_flow.set((w & 0xfff0_0000) | (fl & 0x000f_ffff));
    }
    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.fixed.src)
    }
    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.fixed.dst)
    }
    /// Sets the source address.
    #[inline]
    pub fn set_src(&mut self, a: Ipv6Addr) {
        self.fixed.src = a.octets();
    }
    /// Sets the destination address.
    #[inline]
    pub fn set_dst(&mut self, a: Ipv6Addr) {
        self.fixed.dst = a.octets();
    }
    /// The upper-layer protocol.
    #[inline]
    pub fn upper_proto(&self) -> IpProto {
        self.upper_proto
    }
    /// The extension headers, writable.
    #[inline]
    pub fn ext_headers_mut(&mut self) -> &mut [u8] {
        self.ext
    }
    /// The upper-layer bytes, writable.
    #[inline]
    pub fn upper_payload_mut(&mut self) -> &mut [u8] {
        self.upper
    }
}

/// An owned IPv6 fixed header. Control thread, fixtures and builders only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Next header (first extension header or the upper layer).
    pub next_header: IpProto,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class (DSCP << 2 | ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Payload length in bytes (extension headers and upper layer); saturates at 65535.
    pub payload_len: usize,
}

impl Ipv6Repr {
    /// A header with builder defaults: hop limit 64, traffic class 0, flow label 0.
    pub fn new(src: Ipv6Addr, dst: Ipv6Addr, next_header: IpProto, payload_len: usize) -> Self {
        Self { src, dst, next_header, hop_limit: DEFAULT_HOP_LIMIT, traffic_class: 0, flow_label: 0, payload_len }
    }
    /// The fields of a parsed header.
    pub fn from_view(v: &Ipv6<'_>) -> Self {
        Self {
            src: v.src(),
            dst: v.dst(),
            next_header: v.next_header(),
            hop_limit: v.hop_limit(),
            traffic_class: v.traffic_class(),
            flow_label: v.flow_label(),
            payload_len: usize::from(v.payload_len()),
        }
    }
    /// Bytes [`Ipv6Repr::emit`] writes: 40.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the fixed header into the start of `buf`; returns 40.
    ///
    /// # Errors
    /// [`BufferTooSmall`] when `buf` is shorter than 40 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let b = room(buf, HEADER_LEN)?;
        let f = Fixed {
            ver_tc_flow: U32::new((6 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0x000f_ffff)),
            payload_len: U16::new(u16::try_from(self.payload_len).unwrap_or(u16::MAX)),
            next_header: self.next_header.0,
            hop_limit: self.hop_limit,
            src: self.src.octets(),
            dst: self.dst.octets(),
        };
        b.copy_from_slice(f.as_bytes());
        Ok(HEADER_LEN)
    }
}

/// An owned IPv6 extension header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ipv6ExtRepr {
    /// Which extension header: HOPOPT, ROUTING, FRAGMENT, DSTOPTS or AH.
    pub kind: IpProto,
    /// The next header after this one.
    pub next_header: IpProto,
    /// The bytes after the first two (next header, length). Emit pads them with zeros to the
    /// header's unit (Pad1 options for hop-by-hop and destination options). For a fragment
    /// header, use [`Ipv6ExtRepr::fragment`].
    pub data: Vec<u8>,
}

impl Ipv6ExtRepr {
    /// A fragment header (RFC 8200 §4.5).
    pub fn fragment(next_header: IpProto, f: Ipv6Frag) -> Self {
        let w = (f.offset << 3) | u16::from(f.more);
        let mut data = w.to_be_bytes().to_vec();
        data.extend_from_slice(&f.ident.to_be_bytes());
        Self { kind: IpProto::FRAGMENT, next_header, data }
    }
    /// A hop-by-hop or destination options header holding only padding (6 bytes of PadN).
    pub fn padding(kind: IpProto, next_header: IpProto) -> Self {
        Self { kind, next_header, data: vec![1, 4, 0, 0, 0, 0] }
    }
    /// Bytes [`Ipv6ExtRepr::emit`] writes: 8 for a fragment header, otherwise 2 + data padded to
    /// a multiple of 8 (at most 2048; AH at most 1028).
    pub fn header_len(&self) -> usize {
        match self.kind {
            IpProto::FRAGMENT => 8,
            IpProto::AH => (2 + self.data.len()).div_ceil(8).max(1).saturating_mul(8).min(1024),
            _ => (2 + self.data.len()).div_ceil(8).max(1).saturating_mul(8).min(2048),
        }
    }
    /// Writes the header into the start of `buf`; returns its length.
    ///
    /// # Errors
    /// [`BufferTooSmall`] when `buf` is shorter than [`Ipv6ExtRepr::header_len`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let n = self.header_len();
        let b = room(buf, n)?;
        b.fill(0);
        let len_field = match self.kind {
            IpProto::FRAGMENT => 0,
            IpProto::AH => (n / 4 - 2) as u8,
            _ => (n / 8 - 1) as u8,
        };
        if let Some([nh, l]) = b.get_mut(..2).and_then(|s| <&mut [u8; 2]>::try_from(s).ok()) {
            *nh = self.next_header.0;
            *l = len_field;
        }
        let body = b.get_mut(2..).unwrap_or_default();
        let k = self.data.len().min(body.len());
        if let (Some(d), Some(s)) = (body.get_mut(..k), self.data.get(..k)) {
            d.copy_from_slice(s);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Built by hand from RFC 8200 §3/§4: 2001:db8::1 → 2001:db8::2, traffic class 0xb8 (EF),
    /// flow label 0x12345, hop limit 64, with a hop-by-hop header (PadN), a fragment header
    /// (offset 0, M=1, ident 0xdeadbeef) and then UDP (8 bytes, checksum not filled).
    const PKT: [u8; 66] = [
        0x6b, 0x81, 0x23, 0x45, // version 6, TC 0xb8, flow 0x12345
        0x00, 0x18, 0x00, 0x40, // payload length 24, next HOPOPT, hop limit 64
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, // src 2001:db8::1
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, // dst 2001:db8::2
        0x2c, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, // HBH: next FRAGMENT, len 0, PadN(4)
        0x11, 0x00, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef, // fragment: next UDP, offset 0, M, ident
        0x04, 0x00, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00, // UDP 1024 → 53, length 8
        0xee, 0xee, // trailer past the payload length
    ];

    #[test]
    fn bytes_to_fields() {
        let p = Ipv6::parse(&PKT).unwrap();
        assert_eq!((p.traffic_class(), p.dscp(), p.ecn()), (0xb8, 46, 0));
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 24);
        assert_eq!(p.next_header(), IpProto::HOPOPT);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src(), "2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.ext_count(), 2);
        assert_eq!(p.upper_proto(), IpProto::UDP);
        assert_eq!(p.upper_offset(), 56);
        assert_eq!(p.upper_payload(), &PKT[56..64]);
        assert_eq!(p.ext_headers(), &PKT[40..56]);
        assert_eq!(p.payload(), &PKT[40..64]);
        assert_eq!(p.fragment(), Some(Ipv6Frag { offset: 0, more: true, ident: 0xdead_beef }));
        let exts: Vec<_> = p.exts().map(|(k, b)| (k, b.len())).collect();
        assert_eq!(exts, vec![(IpProto::HOPOPT, 8), (IpProto::FRAGMENT, 8)]);
    }

    #[test]
    fn ah_and_routing_lengths() {
        // fixed header, then routing (len 1 → 16 bytes), AH (payload len 4 → 24 bytes), TCP.
        let mut b = vec![0u8; 40 + 16 + 24];
        Ipv6Repr::new(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST, IpProto::ROUTING, 40).emit(&mut b).unwrap();
        b[40] = IpProto::AH.0;
        b[41] = 1;
        b[56] = IpProto::TCP.0;
        b[57] = 4;
        let p = Ipv6::parse(&b).unwrap();
        assert_eq!((p.upper_proto(), p.upper_offset(), p.ext_count()), (IpProto::TCP, 80, 2));
        assert!(p.upper_payload().is_empty());
        assert!(p.fragment().is_none());
    }

    #[test]
    fn fields_to_bytes() {
        let mut buf = [0xa5u8; 66];
        let r = Ipv6Repr {
            traffic_class: 0xb8,
            flow_label: 0x12345,
            ..Ipv6Repr::new("2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap(), IpProto::HOPOPT, 24)
        };
        assert_eq!(r.emit(&mut buf).unwrap(), 40);
        let hbh = Ipv6ExtRepr { kind: IpProto::HOPOPT, next_header: IpProto::FRAGMENT, data: vec![1, 4] };
        assert_eq!(hbh.emit(&mut buf[40..]).unwrap(), 8);
        let fr = Ipv6ExtRepr::fragment(IpProto::UDP, Ipv6Frag { offset: 0, more: true, ident: 0xdead_beef });
        assert_eq!(fr.emit(&mut buf[48..]).unwrap(), 8);
        assert_eq!(&buf[..56], &PKT[..56]);
        assert!(buf[56..].iter().all(|&b| b == 0xa5));
        assert!(r.emit(&mut buf[..39]).is_err());
        assert!(hbh.emit(&mut buf[..7]).is_err());
    }

    #[test]
    fn repr_round_trip() {
        let r = Ipv6Repr::from_view(&Ipv6::parse(&PKT).unwrap());
        let mut buf = PKT;
        r.emit(&mut buf).unwrap();
        assert_eq!(buf, PKT);
        assert_eq!(Ipv6Repr::from_view(&Ipv6::parse(&buf).unwrap()), r);
    }

    #[test]
    fn setters_edit_in_place() {
        let mut b = PKT;
        let mut m = Ipv6Mut::parse(&mut b).unwrap();
        assert_eq!(m.upper_proto(), IpProto::UDP);
        m.set_hop_limit(1);
        assert_eq!(m.decrement_hop_limit(), None);
        m.set_hop_limit(10);
        assert_eq!(m.decrement_hop_limit(), Some(9));
        m.set_dscp(10);
        m.set_ecn(3);
        m.set_flow_label(0xfffff);
        m.set_src(Ipv6Addr::LOCALHOST);
        m.set_dst(Ipv6Addr::UNSPECIFIED);
        m.upper_payload_mut()[0] = 0x99;
        m.ext_headers_mut()[3] = 4;
        let p = Ipv6::parse(&b).unwrap();
        assert_eq!((p.hop_limit(), p.dscp(), p.ecn(), p.flow_label()), (9, 10, 3, 0xfffff));
        assert_eq!((p.src(), p.dst()), (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED));
        assert_eq!(p.upper_payload()[0], 0x99);
        assert_eq!(b[0] >> 4, 6, "version kept");
    }

    #[test]
    fn every_truncation_is_an_error() {
        for n in 0..64 {
            let e = Ipv6::parse(&PKT[..n]).err();
            assert!(e == Some(Malformed::Ipv6Truncated), "len {n}: {e:?}");
            let mut b = PKT;
            assert!(Ipv6Mut::parse(&mut b[..n]).is_err());
        }
    }

    #[test]
    fn malformed_ipv6_truncated() {
        assert_eq!(Ipv6::parse(&PKT[..39]).err(), Some(Malformed::Ipv6Truncated));
    }

    #[test]
    fn malformed_ipv6_version() {
        let mut b = PKT;
        b[0] = 0x4b;
        assert_eq!(Ipv6::parse(&b).err(), Some(Malformed::Ipv6Version));
    }

    #[test]
    fn malformed_ipv6_ext_truncated() {
        let mut b = PKT;
        b[41] = 3; // HBH claims 32 bytes, only 24 in the payload
        assert_eq!(Ipv6::parse(&b).err(), Some(Malformed::Ipv6ExtTruncated));
        let mut b = PKT;
        b[5] = 12; // payload length 12: the fragment header's 8 bytes do not fit
        assert_eq!(Ipv6::parse(&b).err(), Some(Malformed::Ipv6ExtTruncated));
    }

    #[test]
    fn malformed_too_many_headers() {
        let n = MAX_EXT_HEADERS + 1;
        let mut b = vec![0u8; 40 + 8 * n];
        Ipv6Repr::new(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST, IpProto::DSTOPTS, 8 * n).emit(&mut b).unwrap();
        for i in 0..n {
            b[40 + 8 * i] = IpProto::DSTOPTS.0; // each points at another
        }
        assert_eq!(Ipv6::parse(&b).err(), Some(Malformed::TooManyHeaders));
        b[40 + 8 * (n - 2)] = IpProto::NO_NEXT.0; // exactly MAX_EXT_HEADERS is fine
        assert_eq!(Ipv6::parse(&b).unwrap().ext_count(), MAX_EXT_HEADERS);
    }

    proptest! {
        #[test]
        fn emit_then_parse(s in any::<[u8; 16]>(), d in any::<[u8; 16]>(), nh in any::<u8>(), hl in any::<u8>(),
                           tc in any::<u8>(), fl in 0u32..0x10_0000, plen in 0usize..64) {
            let nh = if IpProto(nh).is_ipv6_ext() { 59 } else { nh };
            let r = Ipv6Repr { src: s.into(), dst: d.into(), next_header: IpProto(nh), hop_limit: hl,
                               traffic_class: tc, flow_label: fl, payload_len: plen };
            let mut buf = vec![0u8; 40 + plen];
            r.emit(&mut buf).unwrap();
            let p = Ipv6::parse(&buf).unwrap();
            prop_assert_eq!(Ipv6Repr::from_view(&p), r);
            prop_assert_eq!(p.upper_payload().len(), plen);
        }

        #[test]
        fn ext_chain_round_trip(kinds in proptest::collection::vec(0usize..5, 0..6),
                                lens in proptest::collection::vec(0usize..30, 6)) {
            const K: [IpProto; 5] = [IpProto::HOPOPT, IpProto::ROUTING, IpProto::FRAGMENT, IpProto::DSTOPTS, IpProto::AH];
            let exts: Vec<Ipv6ExtRepr> = kinds.iter().enumerate().map(|(i, &k)| {
                let next = kinds.get(i + 1).map_or(IpProto::TCP, |&n| K[n]);
                if K[k] == IpProto::FRAGMENT {
                    Ipv6ExtRepr::fragment(next, Ipv6Frag { offset: 5, more: false, ident: 9 })
                } else {
                    Ipv6ExtRepr { kind: K[k], next_header: next, data: vec![0; lens[i]] }
                }
            }).collect();
            let ext_len: usize = exts.iter().map(Ipv6ExtRepr::header_len).sum();
            let first = exts.first().map_or(IpProto::TCP, |e| e.kind);
            let mut buf = vec![0u8; 40 + ext_len + 3];
            Ipv6Repr::new(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST, first, ext_len + 3).emit(&mut buf).unwrap();
            let mut off = 40;
            for e in &exts { off += e.emit(&mut buf[off..]).unwrap(); }
            let p = Ipv6::parse(&buf).unwrap();
            prop_assert_eq!(p.upper_proto(), IpProto::TCP);
            prop_assert_eq!(p.upper_offset(), 40 + ext_len);
            prop_assert_eq!(p.ext_count(), exts.len());
            prop_assert_eq!(p.upper_payload().len(), 3);
            let walked: Vec<IpProto> = p.exts().map(|(k, _)| k).collect();
            let want: Vec<IpProto> = exts.iter().map(|e| e.kind).collect();
            prop_assert_eq!(walked, want);
        }

        #[test]
        fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(p) = Ipv6::parse(&data) {
                prop_assert!(p.upper_offset() + p.upper_payload().len() <= data.len());
                let _ = (p.payload(), p.exts().count(), p.pseudo_sum(), p.fragment());
            }
        }
    }
}
