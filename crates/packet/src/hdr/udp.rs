//! UDP header (RFC 768).
//!
//! ```text
//!  0      7 8     15 16    23 24    31
//! +--------+--------+--------+--------+
//! |   Source Port   |  Dest. Port     |
//! +--------+--------+--------+--------+
//! |     Length      |    Checksum     |
//! +--------+--------+--------+--------+
//! ```
//! Length covers header and data; parse bounds the payload by it (bytes after it are ignored).
//! The checksum covers a pseudo-header (see [`crate::csum`]). Over IPv4 "an all zero transmitted
//! checksum value means that the transmitter generated no checksum" (RFC 768), so a computed 0
//! is sent as 0xffff and a zero checksum is left alone by the incremental setters. Over IPv6 the
//! checksum is mandatory (RFC 8200 §8.1).

use zerocopy::byteorder::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{room, BufferTooSmall, IpProto, Malformed};
use crate::csum;

/// Length of the UDP header in bytes.
pub const HEADER_LEN: usize = 8;

#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Fixed {
    src_port: U16,
    dst_port: U16,
    len: U16,
    csum: U16,
}

#[inline]
fn check(fixed: &Fixed, rest_len: usize) -> Result<usize, Malformed> {
    let body = usize::from(fixed.len.get()).checked_sub(HEADER_LEN).ok_or(Malformed::UdpTruncated)?;
    if body > rest_len {
        return Err(Malformed::UdpTruncated);
    }
    Ok(body)
}

/// A checked read view of a UDP datagram.
#[derive(Debug, Clone, Copy)]
pub struct Udp<'a> {
    fixed: &'a Fixed,
    payload: &'a [u8],
}

impl<'a> Udp<'a> {
    /// Checks the header and the length field (≥ 8 and within `buf`).
    ///
    /// # Errors
    /// [`Malformed::UdpTruncated`] when the header is cut short or the length field is below 8
    /// or past the end of `buf`.
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<Self, Malformed> {
        let (fixed, rest) = Fixed::ref_from_prefix(buf).map_err(|_| Malformed::UdpTruncated)?;
        let body = check(fixed, rest.len())?;
        let payload = rest.get(..body).ok_or(Malformed::UdpTruncated)?;
        Ok(Self { fixed, payload })
    }
    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        self.fixed.src_port.get()
    }
    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        self.fixed.dst_port.get()
    }
    /// Length field (header and data) in bytes.
    #[inline]
    pub fn len(&self) -> u16 {
        self.fixed.len.get()
    }
    /// True when the datagram carries no data.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }
    /// Checksum as received (0: none over IPv4).
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.fixed.csum.get()
    }
    /// The data.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
    fn segment_sum(&self) -> u16 {
        csum::add(csum::sum(self.fixed.as_bytes()), csum::sum(self.payload))
    }
    /// True when the checksum verifies over IPv4 (or is 0, meaning none).
    #[inline]
    pub fn checksum_ok_v4(&self, src: [u8; 4], dst: [u8; 4]) -> bool {
        self.checksum() == 0 || csum::finish(csum::add(csum::pseudo_v4(src, dst, IpProto::UDP.0, self.len()), self.segment_sum())) == 0
    }
    /// True when the checksum verifies over IPv6 (0 is invalid there).
    #[inline]
    pub fn checksum_ok_v6(&self, src: [u8; 16], dst: [u8; 16]) -> bool {
        let p = csum::pseudo_v6(src, dst, IpProto::UDP.0, u32::from(self.len()));
        self.checksum() != 0 && csum::finish(csum::add(p, self.segment_sum())) == 0
    }
}

/// A checked write view of a UDP datagram.
#[derive(Debug)]
pub struct UdpMut<'a> {
    fixed: &'a mut Fixed,
    payload: &'a mut [u8],
}

impl<'a> UdpMut<'a> {
    /// As [`Udp::parse`], for in-place edits.
    ///
    /// # Errors
    /// As [`Udp::parse`].
    #[inline]
    pub fn parse(buf: &'a mut [u8]) -> Result<Self, Malformed> {
        let (fixed, rest) = Fixed::mut_from_prefix(buf).map_err(|_| Malformed::UdpTruncated)?;
        let body = check(fixed, rest.len())?;
        let payload = rest.get_mut(..body).ok_or(Malformed::UdpTruncated)?;
        Ok(Self { fixed, payload })
    }
    /// A read view of the same bytes.
    #[inline]
    pub fn as_view(&self) -> Udp<'_> {
        Udp { fixed: self.fixed, payload: self.payload }
    }
    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.fixed.csum.get()
    }
    /// Applies an RFC 1624 update unless the datagram has no checksum (0); never writes 0.
    #[inline]
    fn patch_with(&mut self, f: impl FnOnce(u16) -> u16) {
        let c = self.fixed.csum.get();
        if c != 0 {
            let n = f(c);
            self.fixed.csum.set(if n == 0 { 0xffff } else { n });
        }
    }
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, p: u16) {
        let old = self.fixed.src_port.get();
        self.fixed.src_port.set(p);
        self.patch_with(|c| csum::update16(c, old, p));
    }
    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, p: u16) {
        let old = self.fixed.dst_port.get();
        self.fixed.dst_port.set(p);
        self.patch_with(|c| csum::update16(c, old, p));
    }
    /// Adjusts the checksum for a pseudo-header field that changed from `old` to `new` (an IP
    /// address rewritten by NAT: 4 or 16 bytes).
    #[inline]
    pub fn update_pseudo(&mut self, old: &[u8], new: &[u8]) {
        self.patch_with(|c| csum::update(c, old, new));
    }
    /// Sets the checksum field directly (0 disables it over IPv4).
    #[inline]
    pub fn set_checksum(&mut self, c: u16) {
        self.fixed.csum.set(c);
    }
    fn fill(&mut self, pseudo: u16) {
        self.fixed.csum.set(0);
        let s = csum::add(pseudo, csum::add(csum::sum(self.fixed.as_bytes()), csum::sum(self.payload)));
        let c = csum::finish(s);
        self.fixed.csum.set(if c == 0 { 0xffff } else { c });
    }
    /// Computes the checksum over IPv4 from scratch.
    #[inline]
    pub fn fill_checksum_v4(&mut self, src: [u8; 4], dst: [u8; 4]) {
        let len = self.fixed.len.get();
        self.fill(csum::pseudo_v4(src, dst, IpProto::UDP.0, len));
    }
    /// Computes the checksum over IPv6 from scratch.
    #[inline]
    pub fn fill_checksum_v6(&mut self, src: [u8; 16], dst: [u8; 16]) {
        let len = u32::from(self.fixed.len.get());
        self.fill(csum::pseudo_v6(src, dst, IpProto::UDP.0, len));
    }
    /// The data, writable (the checksum is then stale: refill it).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.payload
    }
}

/// An owned UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Data length in bytes (the length field is this + 8).
    pub payload_len: usize,
}

impl UdpRepr {
    /// The fields of a parsed datagram.
    #[inline]
    pub fn from_view(v: &Udp<'_>) -> Self {
        Self { src_port: v.src_port(), dst_port: v.dst_port(), payload_len: v.payload().len() }
    }
    /// Bytes [`UdpRepr::emit`] writes: 8.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header with a zero checksum (fill it with `UdpMut::fill_checksum_v4/v6`
    /// once the data is in place); the length field saturates at 65535. Returns 8.
    ///
    /// # Errors
    /// [`BufferTooSmall`] when `buf` is shorter than 8 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let b = room(buf, HEADER_LEN)?;
        let len = u16::try_from(HEADER_LEN + self.payload_len).unwrap_or(u16::MAX);
        let f = Fixed { src_port: U16::new(self.src_port), dst_port: U16::new(self.dst_port), len: U16::new(len), csum: U16::new(0) };
        b.copy_from_slice(f.as_bytes());
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: [u8; 4] = [198, 18, 0, 1];
    const DST: [u8; 4] = [198, 18, 0, 2];

    /// Built by hand from RFC 768: 1024 → 4789 with 4 data bytes over 198.18.0.1 → 198.18.0.2;
    /// checksum by RFC 1071 over the pseudo-header, cross-checked with tshark
    /// (`udp.checksum.status == Good`). Two trailing bytes lie past the length field.
    const DGRAM: [u8; 14] = [
        0x04, 0x00, 0x12, 0xb5, // src port 1024, dst port 4789
        0x00, 0x0c, 0x58, 0xf3, // length 12, checksum
        0x01, 0x02, 0x03, 0x04, // data
        0xee, 0xee, // not part of the datagram
    ];

    #[test]
    fn bytes_to_fields() {
        let u = Udp::parse(&DGRAM).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (1024, 4789, 12));
        assert_eq!(u.checksum(), 0x58f3);
        assert_eq!(u.payload(), &[1, 2, 3, 4]);
        assert!(!u.is_empty());
        assert!(u.checksum_ok_v4(SRC, DST));
        assert!(!u.checksum_ok_v4(DST, [1, 1, 1, 1]));
    }

    #[test]
    fn fields_to_bytes() {
        let mut buf = [0xa5u8; 12];
        let r = UdpRepr { src_port: 1024, dst_port: 4789, payload_len: 4 };
        assert_eq!(r.emit(&mut buf).unwrap(), 8);
        assert_eq!(&buf[..6], &DGRAM[..6]);
        assert_eq!(&buf[6..8], &[0, 0]);
        assert_eq!(&buf[8..], &[0xa5; 4]);
        buf[8..].copy_from_slice(&[1, 2, 3, 4]);
        UdpMut::parse(&mut buf).unwrap().fill_checksum_v4(SRC, DST);
        assert_eq!(&buf[..], &DGRAM[..12]);
        assert!(r.emit(&mut buf[..7]).is_err());
    }

    #[test]
    fn repr_round_trip() {
        let r = UdpRepr::from_view(&Udp::parse(&DGRAM).unwrap());
        assert_eq!(r, UdpRepr { src_port: 1024, dst_port: 4789, payload_len: 4 });
        let mut buf = [0u8; 12];
        r.emit(&mut buf).unwrap();
        assert_eq!(UdpRepr::from_view(&Udp::parse(&buf).unwrap()), r);
    }

    #[test]
    fn setters_keep_checksum() {
        let mut b = DGRAM;
        let mut m = UdpMut::parse(&mut b).unwrap();
        m.set_src_port(5353);
        m.set_dst_port(53);
        m.update_pseudo(&SRC, &[10, 0, 0, 1]);
        assert!(m.as_view().checksum_ok_v4([10, 0, 0, 1], DST));
        // A zero checksum (none) stays zero.
        m.set_checksum(0);
        m.set_dst_port(54);
        assert_eq!(m.checksum(), 0);
    }

    #[test]
    fn v6_checksum() {
        let (s, d) = ([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], [0xfe; 16]);
        let mut b = DGRAM;
        let mut m = UdpMut::parse(&mut b).unwrap();
        m.fill_checksum_v6(s, d);
        assert!(m.as_view().checksum_ok_v6(s, d));
        m.set_checksum(0);
        assert!(!m.as_view().checksum_ok_v6(s, d), "zero UDP checksum is invalid over IPv6");
    }

    #[test]
    fn every_truncation_is_an_error() {
        for n in 0..12 {
            assert_eq!(Udp::parse(&DGRAM[..n]).err(), Some(Malformed::UdpTruncated), "len {n}");
            let mut b = DGRAM;
            assert!(UdpMut::parse(&mut b[..n]).is_err());
        }
    }

    #[test]
    fn malformed_udp_truncated() {
        let mut b = DGRAM;
        b[4..6].copy_from_slice(&7u16.to_be_bytes()); // length below the header
        assert_eq!(Udp::parse(&b).err(), Some(Malformed::UdpTruncated));
        b[4..6].copy_from_slice(&15u16.to_be_bytes()); // length past the data
        assert_eq!(Udp::parse(&b).err(), Some(Malformed::UdpTruncated));
    }

    proptest! {
        #[test]
        fn emit_then_parse(sp in any::<u16>(), dp in any::<u16>(), data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let r = UdpRepr { src_port: sp, dst_port: dp, payload_len: data.len() };
            let mut buf = vec![0u8; 8 + data.len()];
            r.emit(&mut buf).unwrap();
            buf[8..].copy_from_slice(&data);
            UdpMut::parse(&mut buf).unwrap().fill_checksum_v4(SRC, DST);
            let u = Udp::parse(&buf).unwrap();
            prop_assert!(u.checksum_ok_v4(SRC, DST));
            prop_assert_eq!(UdpRepr::from_view(&u), r);
            prop_assert_eq!(u.payload(), &data[..]);
        }

        #[test]
        fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(u) = Udp::parse(&data) {
                prop_assert!(8 + u.payload().len() <= data.len());
                let _ = (u.checksum_ok_v4(SRC, DST), u.checksum_ok_v6([0; 16], [1; 16]));
            }
        }

        #[test]
        fn incremental_equals_full(sp in any::<u16>(), dp in any::<u16>(), new_src in any::<[u8; 4]>(),
                                   data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut buf = vec![0u8; 8 + data.len()];
            UdpRepr { src_port: 1, dst_port: 2, payload_len: data.len() }.emit(&mut buf).unwrap();
            buf[8..].copy_from_slice(&data);
            let mut m = UdpMut::parse(&mut buf).unwrap();
            m.fill_checksum_v4(SRC, DST);
            m.set_src_port(sp);
            m.set_dst_port(dp);
            m.update_pseudo(&SRC, &new_src);
            let inc = m.checksum();
            m.fill_checksum_v4(new_src, DST);
            prop_assert_eq!(inc, m.checksum());
        }
    }
}
