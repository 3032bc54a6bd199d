//! IPv4 header (RFC 791 §3.1), options kept as raw bytes.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Version|  IHL  |   DSCP    |ECN|          Total Length         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Identification        |Flags|      Fragment Offset    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Time to Live |    Protocol   |         Header Checksum       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                       Source Address                          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Destination Address                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Options                    |    Padding    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! DSCP/ECN split the old TOS byte (RFC 2474 §3, RFC 3168 §5). The payload is bounded by Total
//! Length: bytes after it (Ethernet padding) are not part of the packet. Parsing does not verify
//! the header checksum ([`Ipv4::verify_checksum`] does), so a stage can choose to skip it.
//! [`Ipv4Mut`] setters keep the checksum right with RFC 1624 incremental updates; changing an
//! address also changes the UDP/TCP pseudo-header, which the caller fixes with
//! `UdpMut::update_pseudo` / `TcpMut::update_pseudo`.

use std::net::Ipv4Addr;

use zerocopy::byteorder::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{room, BufferTooSmall, IpProto, Malformed};
use crate::csum;

/// Length of the fixed part of the header (IHL 5).
pub const MIN_HEADER_LEN: usize = 20;
/// Longest header (IHL 15).
pub const MAX_HEADER_LEN: usize = 60;
/// Most option bytes a header can carry.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - MIN_HEADER_LEN;
/// Default TTL of builders (RFC 1700's recommended 64).
pub const DEFAULT_TTL: u8 = 64;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_MASK: u16 = 0x1fff;

#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Fixed {
    ver_ihl: u8,
    tos: u8,
    total_len: U16,
    ident: U16,
    frag: U16,
    ttl: u8,
    proto: u8,
    csum: U16,
    src: [u8; 4],
    dst: [u8; 4],
}

/// Checks version, IHL and total length; returns (options length, payload length).
#[inline]
fn check(fixed: &Fixed, rest_len: usize) -> Result<(usize, usize), Malformed> {
    if fixed.ver_ihl >> 4 != 4 {
        return Err(Malformed::Ipv4Version);
    }
    let opt_len = (usize::from(fixed.ver_ihl & 0xf) * 4).checked_sub(MIN_HEADER_LEN).ok_or(Malformed::Ipv4BadIhl)?;
    let body_len = usize::from(fixed.total_len.get()).checked_sub(MIN_HEADER_LEN + opt_len).ok_or(Malformed::Ipv4BadTotalLen)?;
    if opt_len + body_len > rest_len {
        return Err(Malformed::Ipv4Truncated);
    }
    Ok((opt_len, body_len))
}

/// A checked read view of an IPv4 packet.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4<'a> {
    fixed: &'a Fixed,
    options: &'a [u8],
    payload: &'a [u8],
}

impl<'a> Ipv4<'a> {
    /// Checks version, IHL and total length against `buf`. After `Ok`, no accessor can fail.
    /// Bytes past Total Length are ignored.
    ///
    /// # Errors
    /// [`Malformed::Ipv4Truncated`], [`Malformed::Ipv4Version`], [`Malformed::Ipv4BadIhl`],
    /// [`Malformed::Ipv4BadTotalLen`].
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<Self, Malformed> {
        let (fixed, rest) = Fixed::ref_from_prefix(buf).map_err(|_| Malformed::Ipv4Truncated)?;
        let (opt_len, body_len) = check(fixed, rest.len())?;
        let (options, rest) = rest.split_at_checked(opt_len).ok_or(Malformed::Ipv4Truncated)?;
        let payload = rest.get(..body_len).ok_or(Malformed::Ipv4Truncated)?;
        Ok(Self { fixed, options, payload })
    }
    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        MIN_HEADER_LEN + self.options.len()
    }
    /// The TOS byte (DSCP << 2 | ECN).
    #[inline]
    pub fn tos(&self) -> u8 {
        self.fixed.tos
    }
    /// Differentiated services code point (RFC 2474).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.fixed.tos >> 2
    }
    /// ECN field (RFC 3168): 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE.
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.fixed.tos & 3
    }
    /// Total length (header and payload) in bytes.
    #[inline]
    pub fn total_len(&self) -> u16 {
        self.fixed.total_len.get()
    }
    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        self.fixed.ident.get()
    }
    /// Don't Fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.fixed.frag.get() & FLAG_DF != 0
    }
    /// More Fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.fixed.frag.get() & FLAG_MF != 0
    }
    /// Fragment offset in 8-byte units.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        self.fixed.frag.get() & FRAG_MASK
    }
    /// True for any fragment (MF set or non-zero offset): L4 ports may be absent.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.fixed.frag.get() & (FLAG_MF | FRAG_MASK) != 0
    }
    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.fixed.ttl
    }
    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> IpProto {
        IpProto(self.fixed.proto)
    }
    /// Header checksum as received.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.fixed.csum.get()
    }
    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.fixed.src)
    }
    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.fixed.dst)
    }
    /// Source address as bytes.
    #[inline]
    pub fn src_bytes(&self) -> [u8; 4] {
        self.fixed.src
    }
    /// Destination address as bytes.
    #[inline]
    pub fn dst_bytes(&self) -> [u8; 4] {
        self.fixed.dst
    }
    /// Raw option bytes (IHL × 4 − 20 of them, padding included).
    #[inline]
    pub fn options(&self) -> &'a [u8] {
        self.options
    }
    /// The payload: Total Length − header length bytes.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
    /// True when the header checksum verifies.
    #[inline]
    pub fn checksum_ok(&self) -> bool {
        csum::finish(csum::add(csum::sum(self.fixed.as_bytes()), csum::sum(self.options))) == 0
    }
    /// Verifies the header checksum.
    ///
    /// # Errors
    /// [`Malformed::Ipv4BadChecksum`] when it does not verify.
    #[inline]
    pub fn verify_checksum(&self) -> Result<(), Malformed> {
        if self.checksum_ok() {
            Ok(())
        } else {
            Err(Malformed::Ipv4BadChecksum)
        }
    }
    /// The pseudo-header partial sum for this packet's UDP/TCP payload
    /// ([`csum::pseudo_v4`] with this header's addresses, protocol and payload length).
    #[inline]
    pub fn pseudo_sum(&self) -> u16 {
        let len = u16::try_from(self.payload.len()).unwrap_or(u16::MAX);
        csum::pseudo_v4(self.fixed.src, self.fixed.dst, self.fixed.proto, len)
    }
}

/// A checked write view of an IPv4 packet. Setters keep the header checksum right
/// incrementally (RFC 1624), provided it was right before.
#[derive(Debug)]
pub struct Ipv4Mut<'a> {
    fixed: &'a mut Fixed,
    options: &'a mut [u8],
    payload: &'a mut [u8],
}

impl<'a> Ipv4Mut<'a> {
    /// As [`Ipv4::parse`], for in-place edits.
    ///
    /// # Errors
    /// As [`Ipv4::parse`].
    #[inline]
    pub fn parse(buf: &'a mut [u8]) -> Result<Self, Malformed> {
        let (fixed, rest) = Fixed::mut_from_prefix(buf).map_err(|_| Malformed::Ipv4Truncated)?;
        let (opt_len, body_len) = check(fixed, rest.len())?;
        let (options, rest) = rest.split_at_mut_checked(opt_len).ok_or(Malformed::Ipv4Truncated)?;
        let payload = rest.get_mut(..body_len).ok_or(Malformed::Ipv4Truncated)?;
        Ok(Self { fixed, options, payload })
    }
    /// A read view of the same bytes.
    #[inline]
    pub fn as_view(&self) -> Ipv4<'_> {
        Ipv4 { fixed: self.fixed, options: self.options, payload: self.payload }
    }
    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.fixed.ttl
    }
    /// Protocol of the payload.
    #[inline]
    pub fn protocol(&self) -> IpProto {
        IpProto(self.fixed.proto)
    }
    /// Source address.
    #[inline]
    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.fixed.src)
    }
    /// Destination address.
    #[inline]
    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.fixed.dst)
    }
    /// Header checksum.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.fixed.csum.get()
    }

    #[inline]
    fn word_ttl_proto(&self) -> u16 {
        u16::from_be_bytes([self.fixed.ttl, self.fixed.proto])
    }
    #[inline]
    fn word_ver_tos(&self) -> u16 {
        u16::from_be_bytes([self.fixed.ver_ihl, self.fixed.tos])
    }
    #[inline]
    fn patch(&mut self, old: u16, new: u16) {
        self.fixed.csum.set(csum::update16(self.fixed.csum.get(), old, new));
    }

    /// Sets the TTL.
    #[inline]
    pub fn set_ttl(&mut self, ttl: u8) {
        let old = self.word_ttl_proto();
        self.fixed.ttl = ttl;
        let new = self.word_ttl_proto();
        self.patch(old, new);
    }
    /// Decrements the TTL for forwarding and returns the new value, or `None` (header
    /// unchanged) when it would reach zero (RFC 1812 §5.3.1: the packet must then be dropped).
    #[inline]
    pub fn decrement_ttl(&mut self) -> Option<u8> {
        let t = self.fixed.ttl.checked_sub(1).filter(|&t| t > 0)?;
        self.set_ttl(t);
        Some(t)
    }
    /// Sets the protocol field.
    #[inline]
    pub fn set_protocol(&mut self, p: IpProto) {
        let old = self.word_ttl_proto();
        self.fixed.proto = p.0;
        let new = self.word_ttl_proto();
        self.patch(old, new);
    }
    /// Sets the whole TOS byte.
    #[inline]
    pub fn set_tos(&mut self, tos: u8) {
        let old = self.word_ver_tos();
        self.fixed.tos = tos;
        let new = self.word_ver_tos();
        self.patch(old, new);
    }
    /// Sets the DSCP (masked to 6 bits), keeping ECN.
    #[inline]
    pub fn set_dscp(&mut self, dscp: u8) {
        self.set_tos(((dscp & 0x3f) << 2) | (self.fixed.tos & 3));
    }
    /// Sets the ECN field (masked to 2 bits), keeping DSCP.
    #[inline]
    pub fn set_ecn(&mut self, ecn: u8) {
        self.set_tos((self.fixed.tos & !3) | (ecn & 3));
    }
    /// Sets the identification.
    #[inline]
    pub fn set_ident(&mut self, ident: u16) {
        let old = self.fixed.ident.get();
        self.fixed.ident.set(ident);
        self.patch(old, ident);
    }
    /// Sets or clears Don't Fragment.
    #[inline]
    pub fn set_dont_frag(&mut self, df: bool) {
        let old = self.fixed.frag.get();
        let new = (old & !FLAG_DF) | if df { FLAG_DF } else { 0 };
        self.fixed.frag.set(new);
        self.patch(old, new);
    }
    /// Sets the source address (the L4 pseudo-header changes too: see the module doc).
    #[inline]
    pub fn set_src(&mut self, a: Ipv4Addr) {
        let new = a.octets();
        let c = csum::update(self.fixed.csum.get(), &self.fixed.src, &new);
        self.fixed.src = new;
        self.fixed.csum.set(c);
    }
    /// Sets the destination address (the L4 pseudo-header changes too: see the module doc).
    #[inline]
    pub fn set_dst(&mut self, a: Ipv4Addr) {
        let new = a.octets();
        let c = csum::update(self.fixed.csum.get(), &self.fixed.dst, &new);
        self.fixed.dst = new;
        self.fixed.csum.set(c);
    }
    /// Recomputes the header checksum from scratch.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.fixed.csum.set(0);
        let s = csum::add(csum::sum(self.fixed.as_bytes()), csum::sum(self.options));
        self.fixed.csum.set(csum::finish(s));
    }
    /// The payload, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.payload
    }
    /// Gives up the view, keeping the payload borrow.
    #[inline]
    pub fn into_payload(self) -> &'a mut [u8] {
        self.payload
    }
}

/// An owned IPv4 header. Control thread, fixtures and builders only.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol of the payload.
    pub protocol: IpProto,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits).
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
    /// More Fragments.
    pub more_frags: bool,
    /// Fragment offset in 8-byte units (13 bits).
    pub frag_offset: u16,
    /// Raw options; emit pads them with zeros (End of Option List) to a multiple of 4 and
    /// writes at most 40 bytes.
    pub options: Vec<u8>,
    /// Payload length in bytes (Total Length − header length).
    pub payload_len: usize,
}

impl Ipv4Repr {
    /// A header with builder defaults: TTL 64, DSCP/ECN 0, ident 0, no flags, no options.
    pub fn new(src: Ipv4Addr, dst: Ipv4Addr, protocol: IpProto, payload_len: usize) -> Self {
        Self {
            src,
            dst,
            protocol,
            ttl: DEFAULT_TTL,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
            options: Vec::new(),
            payload_len,
        }
    }
    /// The fields of a parsed header.
    pub fn from_view(v: &Ipv4<'_>) -> Self {
        Self {
            src: v.src(),
            dst: v.dst(),
            protocol: v.protocol(),
            ttl: v.ttl(),
            dscp: v.dscp(),
            ecn: v.ecn(),
            ident: v.ident(),
            dont_frag: v.dont_frag(),
            more_frags: v.more_frags(),
            frag_offset: v.frag_offset(),
            options: v.options().to_vec(),
            payload_len: v.payload().len(),
        }
    }
    /// Header bytes [`Ipv4Repr::emit`] writes: 20 + options rounded up to 4, at most 60.
    #[inline]
    pub fn header_len(&self) -> usize {
        MIN_HEADER_LEN + self.options.len().div_ceil(4).saturating_mul(4).min(MAX_OPTIONS_LEN)
    }
    /// Writes the header with a correct checksum into the start of `buf` (the payload is not
    /// written); returns the header length. Total Length saturates at 65535.
    ///
    /// # Errors
    /// [`BufferTooSmall`] when `buf` is shorter than [`Ipv4Repr::header_len`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let hlen = self.header_len();
        let b = room(buf, hlen)?;
        let total = u16::try_from(hlen + self.payload_len).unwrap_or(u16::MAX);
        let frag = if self.dont_frag { FLAG_DF } else { 0 } | if self.more_frags { FLAG_MF } else { 0 } | (self.frag_offset & FRAG_MASK);
        let f = Fixed {
            ver_ihl: 0x40 | (hlen / 4) as u8,
            tos: ((self.dscp & 0x3f) << 2) | (self.ecn & 3),
            total_len: U16::new(total),
            ident: U16::new(self.ident),
            frag: U16::new(frag),
            ttl: self.ttl,
            proto: self.protocol.0,
            csum: U16::new(0),
            src: self.src.octets(),
            dst: self.dst.octets(),
        };
        let (head, opts) = b.split_at_mut(MIN_HEADER_LEN);
        head.copy_from_slice(f.as_bytes());
        opts.fill(0);
        let n = self.options.len().min(opts.len());
        if let (Some(d), Some(s)) = (opts.get_mut(..n), self.options.get(..n)) {
            d.copy_from_slice(s);
        }
        let c = csum::checksum(b);
        if let Some(x) = b.get_mut(10..12) {
            x.copy_from_slice(&c.to_be_bytes());
        }
        Ok(hlen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Built by hand from RFC 791 §3.1, checksum computed with RFC 1071 and cross-checked with
    /// tshark (`ip.checksum.status == Good`): UDP 198.18.0.1 → 198.18.0.2, TTL 64, DSCP 46 (EF),
    /// ECN 1, DF, with one 4-byte option (NOP NOP NOP EOL) and 4 payload bytes, then 2 bytes of
    /// Ethernet padding that are not part of the packet.
    const PKT: [u8; 30] = [
        0x46, 0xb9, 0x00, 0x1c, // version 4, IHL 6; DSCP 46 ECN 1; total length 28
        0x12, 0x34, 0x40, 0x00, // ident 0x1234; DF, offset 0
        0x40, 0x11, 0x98, 0xbb, // TTL 64, proto UDP; checksum
        198, 18, 0, 1, // src
        198, 18, 0, 2, // dst
        0x01, 0x01, 0x01, 0x00, // options: NOP NOP NOP EOL
        0xca, 0xfe, 0xba, 0xbe, // payload
        0x00, 0x00, // trailer (Ethernet padding)
    ];

    fn repr() -> Ipv4Repr {
        Ipv4Repr {
            dscp: 46,
            ecn: 1,
            ident: 0x1234,
            dont_frag: true,
            options: vec![1, 1, 1, 0],
            ..Ipv4Repr::new(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2), IpProto::UDP, 4)
        }
    }

    #[test]
    fn bytes_to_fields() {
        let p = Ipv4::parse(&PKT).unwrap();
        assert_eq!(p.header_len(), 24);
        assert_eq!((p.dscp(), p.ecn(), p.tos()), (46, 1, 0xb9));
        assert_eq!(p.total_len(), 28);
        assert_eq!(p.ident(), 0x1234);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), IpProto::UDP);
        assert_eq!(p.checksum(), 0x98bb);
        assert!(p.checksum_ok());
        assert_eq!(p.verify_checksum(), Ok(()));
        assert_eq!(p.src(), Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(p.dst(), Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[0xca, 0xfe, 0xba, 0xbe]);
    }

    #[test]
    fn fields_to_bytes() {
        let mut buf = [0xa5u8; 30];
        assert_eq!(repr().emit(&mut buf).unwrap(), 24);
        assert_eq!(&buf[..24], &PKT[..24]);
        assert!(buf[24..].iter().all(|&b| b == 0xa5));
        assert_eq!(repr().emit(&mut buf[..23]), Err(BufferTooSmall { needed: 24 }));
    }

    #[test]
    fn repr_round_trip() {
        let r = Ipv4Repr::from_view(&Ipv4::parse(&PKT).unwrap());
        assert_eq!(r, repr());
        let mut buf = [0u8; 28];
        r.emit(&mut buf).unwrap();
        assert_eq!(Ipv4Repr::from_view(&Ipv4::parse(&buf).unwrap()), r);
    }

    #[test]
    fn options_are_padded_and_capped() {
        let r = Ipv4Repr { options: vec![1; 5], ..repr() };
        assert_eq!(r.header_len(), 28);
        let r = Ipv4Repr { options: vec![1; 50], ..repr() };
        assert_eq!(r.header_len(), 60);
        let mut buf = [0u8; 64];
        r.emit(&mut buf).unwrap();
        let p = Ipv4::parse(&buf).unwrap();
        assert_eq!(p.options(), &[1u8; 40][..]);
        assert!(p.checksum_ok());
    }

    #[test]
    fn setters_keep_checksum() {
        let mut b = PKT;
        let mut m = Ipv4Mut::parse(&mut b).unwrap();
        m.set_ttl(1);
        assert_eq!(m.decrement_ttl(), None);
        assert_eq!(m.ttl(), 1);
        m.set_ttl(9);
        assert_eq!(m.decrement_ttl(), Some(8));
        m.set_dscp(10);
        m.set_ecn(3);
        m.set_ident(0xfedc);
        m.set_dont_frag(false);
        m.set_protocol(IpProto::TCP);
        m.set_src(Ipv4Addr::new(10, 1, 2, 3));
        m.set_dst(Ipv4Addr::new(192, 0, 2, 99));
        m.payload_mut()[0] = 0;
        assert!(m.as_view().checksum_ok());
        let incremental = m.checksum();
        m.fill_checksum();
        assert_eq!(m.checksum(), incremental);
        let p = Ipv4::parse(&b).unwrap();
        assert_eq!((p.ttl(), p.dscp(), p.ecn(), p.ident()), (8, 10, 3, 0xfedc));
        assert!(!p.dont_frag());
        assert_eq!(p.protocol(), IpProto::TCP);
        assert_eq!((p.src(), p.dst()), (Ipv4Addr::new(10, 1, 2, 3), Ipv4Addr::new(192, 0, 2, 99)));
        assert_eq!(p.payload()[0], 0);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for n in 0..28 {
            assert_eq!(Ipv4::parse(&PKT[..n]).err(), Some(Malformed::Ipv4Truncated), "len {n}");
            let mut b = PKT;
            assert!(Ipv4Mut::parse(&mut b[..n]).is_err());
        }
    }

    #[test]
    fn malformed_ipv4_truncated() {
        assert_eq!(Ipv4::parse(&PKT[..27]).err(), Some(Malformed::Ipv4Truncated));
    }

    #[test]
    fn malformed_ipv4_version() {
        let mut b = PKT;
        b[0] = 0x66;
        assert_eq!(Ipv4::parse(&b).err(), Some(Malformed::Ipv4Version));
    }

    #[test]
    fn malformed_ipv4_bad_ihl() {
        let mut b = PKT;
        b[0] = 0x44;
        assert_eq!(Ipv4::parse(&b).err(), Some(Malformed::Ipv4BadIhl));
    }

    #[test]
    fn malformed_ipv4_bad_total_len() {
        let mut b = PKT;
        b[2..4].copy_from_slice(&23u16.to_be_bytes()); // below the 24-byte header
        assert_eq!(Ipv4::parse(&b).err(), Some(Malformed::Ipv4BadTotalLen));
        assert_eq!(Ipv4Mut::parse(&mut b).err(), Some(Malformed::Ipv4BadTotalLen));
    }

    #[test]
    fn malformed_ipv4_bad_checksum() {
        let mut b = PKT;
        b[11] ^= 1;
        assert_eq!(Ipv4::parse(&b).unwrap().verify_checksum(), Err(Malformed::Ipv4BadChecksum));
    }

    fn arb_repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<u8>(),
            any::<u8>(),
            0u8..64,
            0u8..4,
            any::<u16>(),
            any::<(bool, bool)>(),
            0u16..0x2000,
            0usize..11,
            0usize..100,
        )
            .prop_map(|(s, d, p, ttl, dscp, ecn, ident, (df, mf), off, optw, plen)| Ipv4Repr {
                src: s.into(),
                dst: d.into(),
                protocol: IpProto(p),
                ttl,
                dscp,
                ecn,
                ident,
                dont_frag: df,
                more_frags: mf,
                frag_offset: off,
                options: (0..optw * 4).map(|i| i as u8).collect(),
                payload_len: plen,
            })
    }

    proptest! {
        #[test]
        fn emit_then_parse(r in arb_repr()) {
            let mut buf = vec![0u8; r.header_len() + r.payload_len];
            r.emit(&mut buf).unwrap();
            let p = Ipv4::parse(&buf).unwrap();
            prop_assert!(p.checksum_ok());
            prop_assert_eq!(Ipv4Repr::from_view(&p), r);
        }

        #[test]
        fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Ipv4::parse(&data) {
                let _ = (p.src(), p.dst(), p.options(), p.payload(), p.checksum_ok(), p.pseudo_sum());
                prop_assert!(p.header_len() + p.payload().len() <= data.len());
            }
        }

        #[test]
        fn incremental_equals_full(r in arb_repr(), ttl in any::<u8>(), tos in any::<u8>(),
                                   ident in any::<u16>(), df in any::<bool>(),
                                   src in any::<[u8; 4]>(), dst in any::<[u8; 4]>()) {
            let mut buf = vec![0u8; r.header_len() + r.payload_len];
            r.emit(&mut buf).unwrap();
            let mut m = Ipv4Mut::parse(&mut buf).unwrap();
            m.set_ttl(ttl);
            m.set_tos(tos);
            m.set_ident(ident);
            m.set_dont_frag(df);
            m.set_src(src.into());
            m.set_dst(dst.into());
            let inc = m.checksum();
            m.fill_checksum();
            prop_assert_eq!(inc, m.checksum());
        }
    }
}
