//! ICMP (RFC 792) and ICMPv6 (RFC 4443) messages: one view for both, since they share the
//! layout of their first 8 bytes.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Type      |     Code      |          Checksum             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     rest of header (echo: Identifier | Sequence Number)       |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     data ...
//! ```
//! ICMP's checksum covers the message only; ICMPv6's also covers the IPv6 pseudo-header
//! (RFC 4443 §2.3). Every message type of both protocols has at least these 8 bytes, so parse
//! requires them.

use zerocopy::byteorder::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{room, BufferTooSmall, IpProto, Malformed};
use crate::csum;

/// Length of the ICMP header (type, code, checksum, 4 bytes rest-of-header).
pub const HEADER_LEN: usize = 8;

/// An ICMP or ICMPv6 message type. ICMPv6 constants carry a `V6_` prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IcmpType(pub u8);

impl IcmpType {
    /// ICMP echo reply.
    pub const ECHO_REPLY: IcmpType = IcmpType(0);
    /// ICMP destination unreachable.
    pub const DEST_UNREACHABLE: IcmpType = IcmpType(3);
    /// ICMP echo request.
    pub const ECHO_REQUEST: IcmpType = IcmpType(8);
    /// ICMP time exceeded.
    pub const TIME_EXCEEDED: IcmpType = IcmpType(11);
    /// ICMPv6 destination unreachable.
    pub const V6_DEST_UNREACHABLE: IcmpType = IcmpType(1);
    /// ICMPv6 packet too big.
    pub const V6_PACKET_TOO_BIG: IcmpType = IcmpType(2);
    /// ICMPv6 time exceeded.
    pub const V6_TIME_EXCEEDED: IcmpType = IcmpType(3);
    /// ICMPv6 echo request.
    pub const V6_ECHO_REQUEST: IcmpType = IcmpType(128);
    /// ICMPv6 echo reply.
    pub const V6_ECHO_REPLY: IcmpType = IcmpType(129);
    /// ICMPv6 neighbor solicitation (RFC 4861).
    pub const V6_NEIGHBOR_SOLICIT: IcmpType = IcmpType(135);
    /// ICMPv6 neighbor advertisement (RFC 4861).
    pub const V6_NEIGHBOR_ADVERT: IcmpType = IcmpType(136);
}

#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Fixed {
    msg_type: u8,
    code: u8,
    csum: U16,
    rest: [u8; 4],
}

/// A checked read view of an ICMP or ICMPv6 message.
#[derive(Debug, Clone, Copy)]
pub struct Icmp<'a> {
    fixed: &'a Fixed,
    data: &'a [u8],
}

impl<'a> Icmp<'a> {
    /// Checks that `buf` (the whole message: the IP payload) holds the 8-byte header.
    ///
    /// # Errors
    /// [`Malformed::IcmpTruncated`] when shorter than 8 bytes.
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<Self, Malformed> {
        let (fixed, data) = Fixed::ref_from_prefix(buf).map_err(|_| Malformed::IcmpTruncated)?;
        Ok(Self { fixed, data })
    }
    /// Message type.
    #[inline]
    pub fn msg_type(&self) -> IcmpType {
        IcmpType(self.fixed.msg_type)
    }
    /// Code.
    #[inline]
    pub fn code(&self) -> u8 {
        self.fixed.code
    }
    /// Checksum as received.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.fixed.csum.get()
    }
    /// The 4 bytes after the checksum (meaning depends on the type).
    #[inline]
    pub fn rest_of_header(&self) -> [u8; 4] {
        self.fixed.rest
    }
    /// Echo identifier (bytes 4..6; meaningful for echo request/reply).
    #[inline]
    pub fn echo_id(&self) -> u16 {
        let [a, b, _, _] = self.fixed.rest;
        u16::from_be_bytes([a, b])
    }
    /// Echo sequence number (bytes 6..8; meaningful for echo request/reply).
    #[inline]
    pub fn echo_seq(&self) -> u16 {
        let [_, _, a, b] = self.fixed.rest;
        u16::from_be_bytes([a, b])
    }
    /// Bytes after the 8-byte header.
    #[inline]
    pub fn data(&self) -> &'a [u8] {
        self.data
    }
    fn msg_sum(&self) -> u16 {
        csum::add(csum::sum(self.fixed.as_bytes()), csum::sum(self.data))
    }
    /// True when the ICMP (IPv4) checksum verifies.
    #[inline]
    pub fn checksum_ok_v4(&self) -> bool {
        csum::finish(self.msg_sum()) == 0
    }
    /// True when the ICMPv6 checksum (with the pseudo-header) verifies.
    #[inline]
    pub fn checksum_ok_v6(&self, src: [u8; 16], dst: [u8; 16]) -> bool {
        let len = u32::try_from(HEADER_LEN + self.data.len()).unwrap_or(u32::MAX);
        csum::finish(csum::add(csum::pseudo_v6(src, dst, IpProto::ICMPV6.0, len), self.msg_sum())) == 0
    }
}

/// A checked write view of an ICMP or ICMPv6 message.
#[derive(Debug)]
pub struct IcmpMut<'a> {
    fixed: &'a mut Fixed,
    data: &'a mut [u8],
}

impl<'a> IcmpMut<'a> {
    /// As [`Icmp::parse`], for in-place edits.
    ///
    /// # Errors
    /// [`Malformed::IcmpTruncated`] when shorter than 8 bytes.
    #[inline]
    pub fn parse(buf: &'a mut [u8]) -> Result<Self, Malformed> {
        let (fixed, data) = Fixed::mut_from_prefix(buf).map_err(|_| Malformed::IcmpTruncated)?;
        Ok(Self { fixed, data })
    }
    /// A read view of the same bytes.
    #[inline]
    pub fn as_view(&self) -> Icmp<'_> {
        Icmp { fixed: self.fixed, data: self.data }
    }
    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.fixed.csum.get()
    }
    #[inline]
    fn word0(&self) -> u16 {
        u16::from_be_bytes([self.fixed.msg_type, self.fixed.code])
    }
    #[inline]
    fn patch(&mut self, old: u16, new: u16) {
        self.fixed.csum.set(csum::update16(self.fixed.csum.get(), old, new));
    }
    /// Sets the type (e.g. echo request → reply).
    #[inline]
    pub fn set_msg_type(&mut self, t: IcmpType) {
        let old = self.word0();
        self.fixed.msg_type = t.0;
        let new = self.word0();
        self.patch(old, new);
    }
    /// Sets the code.
    #[inline]
    pub fn set_code(&mut self, c: u8) {
        let old = self.word0();
        self.fixed.code = c;
        let new = self.word0();
        self.patch(old, new);
    }
    /// Sets the echo identifier.
    #[inline]
    pub fn set_echo_id(&mut self, id: u16) {
        let [a, b, c, d] = self.fixed.rest;
        let old = u16::from_be_bytes([a, b]);
        let [x, y] = id.to_be_bytes();
        self.fixed.rest = [x, y, c, d];
        self.patch(old, id);
    }
    /// Sets the echo sequence number.
    #[inline]
    pub fn set_echo_seq(&mut self, seq: u16) {
        let [a, b, c, d] = self.fixed.rest;
        let old = u16::from_be_bytes([c, d]);
        let [x, y] = seq.to_be_bytes();
        self.fixed.rest = [a, b, x, y];
        self.patch(old, seq);
    }
    /// Adjusts an ICMPv6 checksum for a pseudo-header address change (16 bytes).
    #[inline]
    pub fn update_pseudo(&mut self, old: &[u8], new: &[u8]) {
        self.fixed.csum.set(csum::update(self.fixed.csum.get(), old, new));
    }
    fn fill(&mut self, pseudo: u16) {
        self.fixed.csum.set(0);
        let s = csum::add(csum::sum(self.fixed.as_bytes()), csum::sum(self.data));
        self.fixed.csum.set(csum::finish(csum::add(pseudo, s)));
    }
    /// Computes the ICMP (IPv4) checksum from scratch.
    #[inline]
    pub fn fill_checksum_v4(&mut self) {
        self.fill(0);
    }
    /// Computes the ICMPv6 checksum from scratch.
    #[inline]
    pub fn fill_checksum_v6(&mut self, src: [u8; 16], dst: [u8; 16]) {
        let len = u32::try_from(HEADER_LEN + self.data.len()).unwrap_or(u32::MAX);
        self.fill(csum::pseudo_v6(src, dst, IpProto::ICMPV6.0, len));
    }
    /// Bytes after the header, writable (the checksum is then stale: refill it).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.data
    }
}

/// An owned ICMP/ICMPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct IcmpRepr {
    /// Message type.
    pub msg_type: IcmpType,
    /// Code.
    pub code: u8,
    /// The 4 bytes after the checksum.
    pub rest: [u8; 4],
}

impl IcmpRepr {
    /// An echo request or reply header (`msg_type` chooses ICMP or ICMPv6, request or reply).
    pub fn echo(msg_type: IcmpType, id: u16, seq: u16) -> Self {
        let [a, b] = id.to_be_bytes();
        let [c, d] = seq.to_be_bytes();
        Self { msg_type, code: 0, rest: [a, b, c, d] }
    }
    /// The fields of a parsed message.
    #[inline]
    pub fn from_view(v: &Icmp<'_>) -> Self {
        Self { msg_type: v.msg_type(), code: v.code(), rest: v.rest_of_header() }
    }
    /// Bytes [`IcmpRepr::emit`] writes: 8.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header with a zero checksum (fill it with `IcmpMut::fill_checksum_v4/v6`
    /// once the data is in place); returns 8.
    ///
    /// # Errors
    /// [`BufferTooSmall`] when `buf` is shorter than 8 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let b = room(buf, HEADER_LEN)?;
        let f = Fixed { msg_type: self.msg_type.0, code: self.code, csum: U16::new(0), rest: self.rest };
        b.copy_from_slice(f.as_bytes());
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Built by hand from RFC 792 "Echo or Echo Reply Message": request id 0x1234 seq 1 with
    /// 4 data bytes; checksum by RFC 1071, cross-checked with tshark
    /// (`icmp.checksum.status == Good`).
    const ECHO: [u8; 12] = [
        0x08, 0x00, 0x21, 0x04, // type 8 (echo request), code 0, checksum
        0x12, 0x34, 0x00, 0x01, // id 0x1234, seq 1
        0x61, 0x62, 0x63, 0x64, // data "abcd"
    ];

    #[test]
    fn bytes_to_fields() {
        let m = Icmp::parse(&ECHO).unwrap();
        assert_eq!(m.msg_type(), IcmpType::ECHO_REQUEST);
        assert_eq!(m.code(), 0);
        assert_eq!(m.checksum(), 0x2104);
        assert_eq!((m.echo_id(), m.echo_seq()), (0x1234, 1));
        assert_eq!(m.rest_of_header(), [0x12, 0x34, 0, 1]);
        assert_eq!(m.data(), b"abcd");
        assert!(m.checksum_ok_v4());
    }

    #[test]
    fn fields_to_bytes() {
        let mut buf = [0xa5u8; 12];
        let r = IcmpRepr::echo(IcmpType::ECHO_REQUEST, 0x1234, 1);
        assert_eq!(r.emit(&mut buf).unwrap(), 8);
        assert_eq!(&buf[..2], &ECHO[..2]);
        assert_eq!(&buf[2..4], &[0, 0]);
        assert_eq!(&buf[4..8], &ECHO[4..8]);
        assert_eq!(&buf[8..], &[0xa5; 4]);
        buf[8..].copy_from_slice(b"abcd");
        IcmpMut::parse(&mut buf).unwrap().fill_checksum_v4();
        assert_eq!(buf, ECHO);
        assert!(r.emit(&mut buf[..7]).is_err());
    }

    #[test]
    fn repr_round_trip() {
        let r = IcmpRepr::from_view(&Icmp::parse(&ECHO).unwrap());
        assert_eq!(r, IcmpRepr::echo(IcmpType::ECHO_REQUEST, 0x1234, 1));
        let mut buf = [0u8; 8];
        r.emit(&mut buf).unwrap();
        assert_eq!(IcmpRepr::from_view(&Icmp::parse(&buf).unwrap()), r);
    }

    #[test]
    fn echo_reply_in_place() {
        let mut b = ECHO;
        let mut m = IcmpMut::parse(&mut b).unwrap();
        m.set_msg_type(IcmpType::ECHO_REPLY);
        m.set_code(0);
        m.set_echo_id(7);
        m.set_echo_seq(9);
        let v = m.as_view();
        assert!(v.checksum_ok_v4());
        assert_eq!((v.msg_type(), v.echo_id(), v.echo_seq()), (IcmpType::ECHO_REPLY, 7, 9));
    }

    #[test]
    fn icmpv6_checksum() {
        let s = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let d = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let mut b = [0u8; 12];
        IcmpRepr::echo(IcmpType::V6_ECHO_REQUEST, 1, 2).emit(&mut b).unwrap();
        let mut m = IcmpMut::parse(&mut b).unwrap();
        m.fill_checksum_v6(s, d);
        assert!(m.as_view().checksum_ok_v6(s, d));
        assert!(!m.as_view().checksum_ok_v6(d, [0; 16]));
        m.update_pseudo(&d, &[9; 16]);
        assert!(m.as_view().checksum_ok_v6(s, [9; 16]));
    }

    #[test]
    fn every_truncation_is_an_error() {
        for n in 0..HEADER_LEN {
            assert_eq!(Icmp::parse(&ECHO[..n]).err(), Some(Malformed::IcmpTruncated));
            let mut b = ECHO;
            assert!(IcmpMut::parse(&mut b[..n]).is_err());
        }
    }

    #[test]
    fn malformed_icmp_truncated() {
        assert_eq!(Icmp::parse(&ECHO[..4]).err(), Some(Malformed::IcmpTruncated));
    }

    proptest! {
        #[test]
        fn emit_then_parse(t in any::<u8>(), code in any::<u8>(), rest in any::<[u8; 4]>(),
                           data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let r = IcmpRepr { msg_type: IcmpType(t), code, rest };
            let mut buf = vec![0u8; 8 + data.len()];
            r.emit(&mut buf).unwrap();
            buf[8..].copy_from_slice(&data);
            IcmpMut::parse(&mut buf).unwrap().fill_checksum_v4();
            let v = Icmp::parse(&buf).unwrap();
            prop_assert!(v.checksum_ok_v4());
            prop_assert_eq!(IcmpRepr::from_view(&v), r);
            prop_assert_eq!(v.data(), &data[..]);
        }

        #[test]
        fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Ok(v) = Icmp::parse(&data) {
                prop_assert_eq!(8 + v.data().len(), data.len());
                let _ = (v.echo_id(), v.echo_seq(), v.checksum_ok_v4(), v.checksum_ok_v6([0; 16], [0; 16]));
            }
        }

        #[test]
        fn incremental_equals_full(t in any::<u8>(), code in any::<u8>(), id in any::<u16>(), seq in any::<u16>()) {
            let mut b = ECHO;
            let mut m = IcmpMut::parse(&mut b).unwrap();
            m.set_msg_type(IcmpType(t));
            m.set_code(code);
            m.set_echo_id(id);
            m.set_echo_seq(seq);
            let inc = m.checksum();
            m.fill_checksum_v4();
            prop_assert_eq!(inc, m.checksum());
        }
    }
}
