//! Ethernet II header (IEEE 802.3 clause 3.2.6 Length/Type interpreted as a Type; RFC 894).
//!
//! ```text
//!  0                   6                   12      14
//! +-------------------+-------------------+-------+----------
//! | destination MAC   | source MAC        | type  | payload
//! +-------------------+-------------------+-------+----------
//! ```
//! The FCS is not part of frames handled here (ports strip it).

use zerocopy::byteorder::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{room, BufferTooSmall, EtherType, Malformed};

/// A MAC address.
pub type Mac = [u8; 6];

/// Length of the Ethernet header in bytes.
pub const HEADER_LEN: usize = 14;

#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Fixed {
    dst: [u8; 6],
    src: [u8; 6],
    ethertype: U16,
}

/// A checked read view of an Ethernet frame.
#[derive(Debug, Clone, Copy)]
pub struct Eth<'a> {
    fixed: &'a Fixed,
    payload: &'a [u8],
}

impl<'a> Eth<'a> {
    /// Checks that `buf` holds a 14-byte header; the rest is the payload.
    ///
    /// # Errors
    /// [`Malformed::EthTruncated`] when `buf` is shorter than 14 bytes.
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<Self, Malformed> {
        let (fixed, payload) = Fixed::ref_from_prefix(buf).map_err(|_| Malformed::EthTruncated)?;
        Ok(Self { fixed, payload })
    }
    /// Destination MAC.
    #[inline]
    pub fn dst(&self) -> Mac {
        self.fixed.dst
    }
    /// Source MAC.
    #[inline]
    pub fn src(&self) -> Mac {
        self.fixed.src
    }
    /// The EtherType (a VLAN TPID when the frame is tagged).
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(self.fixed.ethertype.get())
    }
    /// Header length: 14.
    #[inline]
    pub fn header_len(&self) -> usize {
        HEADER_LEN
    }
    /// Bytes after the header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

/// A checked write view of an Ethernet frame.
#[derive(Debug)]
pub struct EthMut<'a> {
    fixed: &'a mut Fixed,
    payload: &'a mut [u8],
}

impl<'a> EthMut<'a> {
    /// As [`Eth::parse`], for in-place edits.
    ///
    /// # Errors
    /// [`Malformed::EthTruncated`] when `buf` is shorter than 14 bytes.
    #[inline]
    pub fn parse(buf: &'a mut [u8]) -> Result<Self, Malformed> {
        let (fixed, payload) = Fixed::mut_from_prefix(buf).map_err(|_| Malformed::EthTruncated)?;
        Ok(Self { fixed, payload })
    }
    /// Destination MAC.
    #[inline]
    pub fn dst(&self) -> Mac {
        self.fixed.dst
    }
    /// Source MAC.
    #[inline]
    pub fn src(&self) -> Mac {
        self.fixed.src
    }
    /// The EtherType.
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(self.fixed.ethertype.get())
    }
    /// Sets the destination MAC.
    #[inline]
    pub fn set_dst(&mut self, mac: Mac) {
        self.fixed.dst = mac;
    }
    /// Sets the source MAC.
    #[inline]
    pub fn set_src(&mut self, mac: Mac) {
        self.fixed.src = mac;
    }
    /// Swaps source and destination MACs (l2fwd MAC swap).
    #[inline]
    pub fn swap_macs(&mut self) {
        std::mem::swap(&mut self.fixed.dst, &mut self.fixed.src);
    }
    /// Sets the EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, t: EtherType) {
        self.fixed.ethertype.set(t.0);
    }
    /// Bytes after the header, writable.
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

/// An owned Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct EthRepr {
    /// Destination MAC.
    pub dst: Mac,
    /// Source MAC.
    pub src: Mac,
    /// EtherType.
    pub ethertype: EtherType,
}

impl EthRepr {
    /// The fields of a parsed header.
    #[inline]
    pub fn from_view(v: &Eth<'_>) -> Self {
        Self { dst: v.dst(), src: v.src(), ethertype: v.ethertype() }
    }
    /// Bytes [`EthRepr::emit`] writes: 14.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header into the start of `buf`; returns its length.
    ///
    /// # Errors
    /// [`BufferTooSmall`] when `buf` is shorter than 14 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let b = room(buf, HEADER_LEN)?;
        let fixed = Fixed { dst: self.dst, src: self.src, ethertype: U16::new(self.ethertype.0) };
        b.copy_from_slice(fixed.as_bytes());
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Built by hand from IEEE 802.3 / RFC 894: an IPv4-carrying frame head + 2 payload bytes.
    const FRAME: [u8; 16] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // dst 02:00:00:00:00:02 (locally administered)
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src 02:00:00:00:00:01
        0x08, 0x00, // type IPv4
        0xde, 0xad, // payload
    ];

    #[test]
    fn bytes_to_fields() {
        let e = Eth::parse(&FRAME).unwrap();
        assert_eq!(e.dst(), [2, 0, 0, 0, 0, 2]);
        assert_eq!(e.src(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(e.ethertype(), EtherType::IPV4);
        assert_eq!(e.header_len(), 14);
        assert_eq!(e.payload(), &[0xde, 0xad]);
    }

    #[test]
    fn fields_to_bytes() {
        let mut buf = [0xa5u8; 16];
        let r = EthRepr { dst: [2, 0, 0, 0, 0, 2], src: [2, 0, 0, 0, 0, 1], ethertype: EtherType::IPV4 };
        assert_eq!(r.emit(&mut buf).unwrap(), 14);
        assert_eq!(&buf[..14], &FRAME[..14]);
        assert_eq!(&buf[14..], &[0xa5, 0xa5], "emit must not write past the header");
        assert_eq!(r.emit(&mut buf[..13]), Err(BufferTooSmall { needed: 14 }));
    }

    #[test]
    fn setters_edit_in_place() {
        let mut buf = FRAME;
        let mut m = EthMut::parse(&mut buf).unwrap();
        m.swap_macs();
        assert_eq!(m.dst(), [2, 0, 0, 0, 0, 1]);
        m.set_src([0xaa; 6]);
        m.set_ethertype(EtherType::IPV6);
        m.payload_mut()[0] = 0;
        let e = Eth::parse(&buf).unwrap();
        assert_eq!((e.dst(), e.src(), e.ethertype()), ([2, 0, 0, 0, 0, 1], [0xaa; 6], EtherType::IPV6));
        assert_eq!(e.payload(), &[0, 0xad]);
    }

    #[test]
    fn repr_round_trip() {
        let e = Eth::parse(&FRAME).unwrap();
        let r = EthRepr::from_view(&e);
        let mut buf = [0u8; 14];
        r.emit(&mut buf).unwrap();
        assert_eq!(EthRepr::from_view(&Eth::parse(&buf).unwrap()), r);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for n in 0..HEADER_LEN {
            assert_eq!(Eth::parse(&FRAME[..n]).err(), Some(Malformed::EthTruncated), "len {n}");
            let mut b = FRAME;
            assert!(EthMut::parse(&mut b[..n]).is_err());
        }
        assert!(Eth::parse(&FRAME[..HEADER_LEN]).is_ok());
    }

    #[test]
    fn malformed_eth_truncated() {
        assert_eq!(Eth::parse(&[0u8; 13]).err(), Some(Malformed::EthTruncated));
    }

    proptest! {
        #[test]
        fn emit_then_parse(dst in any::<[u8; 6]>(), src in any::<[u8; 6]>(), t in any::<u16>(), extra in 0usize..20) {
            let r = EthRepr { dst, src, ethertype: EtherType(t) };
            let mut buf = vec![0u8; 14 + extra];
            r.emit(&mut buf).unwrap();
            let e = Eth::parse(&buf).unwrap();
            prop_assert_eq!(EthRepr::from_view(&e), r);
            prop_assert_eq!(e.payload().len(), extra);
        }

        #[test]
        fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(e) = Eth::parse(&data) {
                prop_assert_eq!(e.header_len() + e.payload().len(), data.len());
            } else {
                prop_assert!(data.len() < 14);
            }
        }
    }
}
