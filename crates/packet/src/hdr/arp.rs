//! ARP for Ethernet and IPv4 (RFC 826).
//!
//! ```text
//!  0       2       4   5   6       8            14       18           24       28
//! +-------+-------+---+---+-------+------------+--------+------------+--------+
//! | htype | ptype |hln|pln| oper  | sender MAC | sndr IP| target MAC | tgt IP |
//! +-------+-------+---+---+-------+------------+--------+------------+--------+
//! ```
//! Only 6-byte hardware and 4-byte protocol addresses are accepted (the accessors rely on those
//! lengths); `htype` and `ptype` are data and round-trip.

use std::net::Ipv4Addr;

use zerocopy::byteorder::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{room, BufferTooSmall, EtherType, Mac, Malformed};

/// Length of an Ethernet/IPv4 ARP packet in bytes.
pub const PACKET_LEN: usize = 28;
/// Hardware type Ethernet (RFC 826, IANA ARP parameters).
pub const HTYPE_ETHERNET: u16 = 1;

/// ARP operation code (IANA "ARP Operation Codes").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ArpOp(pub u16);

impl ArpOp {
    /// Request.
    pub const REQUEST: ArpOp = ArpOp(1);
    /// Reply.
    pub const REPLY: ArpOp = ArpOp(2);
}

#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Fixed {
    htype: U16,
    ptype: U16,
    hlen: u8,
    plen: u8,
    oper: U16,
    sha: [u8; 6],
    spa: [u8; 4],
    tha: [u8; 6],
    tpa: [u8; 4],
}

fn check(fixed: &Fixed) -> Result<(), Malformed> {
    if fixed.hlen != 6 || fixed.plen != 4 {
        return Err(Malformed::ArpUnsupported);
    }
    Ok(())
}

/// A checked read view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy)]
pub struct Arp<'a> {
    fixed: &'a Fixed,
}

impl<'a> Arp<'a> {
    /// Checks length (28 bytes) and address lengths (6 and 4). Trailing bytes (Ethernet padding)
    /// are ignored.
    ///
    /// # Errors
    /// [`Malformed::ArpTruncated`] when shorter than 28 bytes; [`Malformed::ArpUnsupported`]
    /// when hlen is not 6 or plen not 4.
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<Self, Malformed> {
        let (fixed, _) = Fixed::ref_from_prefix(buf).map_err(|_| Malformed::ArpTruncated)?;
        check(fixed)?;
        Ok(Self { fixed })
    }
    /// Hardware type (1 = Ethernet).
    #[inline]
    pub fn htype(&self) -> u16 {
        self.fixed.htype.get()
    }
    /// Protocol type (an EtherType, IPv4 normally).
    #[inline]
    pub fn ptype(&self) -> EtherType {
        EtherType(self.fixed.ptype.get())
    }
    /// Operation.
    #[inline]
    pub fn op(&self) -> ArpOp {
        ArpOp(self.fixed.oper.get())
    }
    /// Sender hardware address.
    #[inline]
    pub fn sha(&self) -> Mac {
        self.fixed.sha
    }
    /// Sender protocol address.
    #[inline]
    pub fn spa(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.fixed.spa)
    }
    /// Target hardware address.
    #[inline]
    pub fn tha(&self) -> Mac {
        self.fixed.tha
    }
    /// Target protocol address.
    #[inline]
    pub fn tpa(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.fixed.tpa)
    }
}

/// A checked write view of an ARP packet.
#[derive(Debug)]
pub struct ArpMut<'a> {
    fixed: &'a mut Fixed,
}

impl<'a> ArpMut<'a> {
    /// As [`Arp::parse`], for in-place edits.
    ///
    /// # Errors
    /// As [`Arp::parse`].
    #[inline]
    pub fn parse(buf: &'a mut [u8]) -> Result<Self, Malformed> {
        let (fixed, _) = Fixed::mut_from_prefix(buf).map_err(|_| Malformed::ArpTruncated)?;
        check(fixed)?;
        Ok(Self { fixed })
    }
    /// Sets the operation.
    #[inline]
    pub fn set_op(&mut self, op: ArpOp) {
        self.fixed.oper.set(op.0);
    }
    /// Sets the sender hardware address.
    #[inline]
    pub fn set_sha(&mut self, mac: Mac) {
        self.fixed.sha = mac;
    }
    /// Sets the sender protocol address.
    #[inline]
    pub fn set_spa(&mut self, ip: Ipv4Addr) {
        self.fixed.spa = ip.octets();
    }
    /// Sets the target hardware address.
    #[inline]
    pub fn set_tha(&mut self, mac: Mac) {
        self.fixed.tha = mac;
    }
    /// Sets the target protocol address.
    #[inline]
    pub fn set_tpa(&mut self, ip: Ipv4Addr) {
        self.fixed.tpa = ip.octets();
    }
    /// Turns a request into a reply from `mac` in place (RFC 826 "Packet Reception": swap
    /// sender and target, fill in the local hardware address, set the opcode to reply).
    #[inline]
    pub fn make_reply(&mut self, mac: Mac) {
        let (spa, tpa) = (self.fixed.spa, self.fixed.tpa);
        self.fixed.tha = self.fixed.sha;
        self.fixed.tpa = spa;
        self.fixed.sha = mac;
        self.fixed.spa = tpa;
        self.fixed.oper.set(ArpOp::REPLY.0);
    }
}

/// An owned Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Operation.
    pub op: ArpOp,
    /// Sender hardware address.
    pub sha: Mac,
    /// Sender protocol address.
    pub spa: Ipv4Addr,
    /// Target hardware address.
    pub tha: Mac,
    /// Target protocol address.
    pub tpa: Ipv4Addr,
}

impl ArpRepr {
    /// A who-has request from (`sha`, `spa`) for `tpa`.
    pub fn request(sha: Mac, spa: Ipv4Addr, tpa: Ipv4Addr) -> Self {
        Self { op: ArpOp::REQUEST, sha, spa, tha: [0; 6], tpa }
    }
    /// The fields of a parsed packet (htype/ptype are implied: Ethernet/IPv4).
    #[inline]
    pub fn from_view(v: &Arp<'_>) -> Self {
        Self { op: v.op(), sha: v.sha(), spa: v.spa(), tha: v.tha(), tpa: v.tpa() }
    }
    /// Bytes [`ArpRepr::emit`] writes: 28.
    #[inline]
    pub const fn header_len(&self) -> usize {
        PACKET_LEN
    }
    /// Writes the packet (htype 1, ptype IPv4) into the start of `buf`; returns 28.
    ///
    /// # Errors
    /// [`BufferTooSmall`] when `buf` is shorter than 28 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let b = room(buf, PACKET_LEN)?;
        let f = Fixed {
            htype: U16::new(HTYPE_ETHERNET),
            ptype: U16::new(EtherType::IPV4.0),
            hlen: 6,
            plen: 4,
            oper: U16::new(self.op.0),
            sha: self.sha,
            spa: self.spa.octets(),
            tha: self.tha,
            tpa: self.tpa.octets(),
        };
        b.copy_from_slice(f.as_bytes());
        Ok(PACKET_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Built by hand from RFC 826: who-has 198.18.0.2 tell 198.18.0.1, + 2 bytes of padding.
    const REQ: [u8; 30] = [
        0x00, 0x01, // htype Ethernet
        0x08, 0x00, // ptype IPv4
        0x06, 0x04, // hlen 6, plen 4
        0x00, 0x01, // op request
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // sha
        198, 18, 0, 1, // spa
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // tha (unknown)
        198, 18, 0, 2, // tpa
        0x00, 0x00, // Ethernet padding (ignored)
    ];

    #[test]
    fn bytes_to_fields() {
        let a = Arp::parse(&REQ).unwrap();
        assert_eq!(a.htype(), 1);
        assert_eq!(a.ptype(), EtherType::IPV4);
        assert_eq!(a.op(), ArpOp::REQUEST);
        assert_eq!(a.sha(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(a.spa(), Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(a.tha(), [0; 6]);
        assert_eq!(a.tpa(), Ipv4Addr::new(198, 18, 0, 2));
    }

    #[test]
    fn fields_to_bytes() {
        let mut buf = [0xa5u8; 30];
        let r = ArpRepr::request([2, 0, 0, 0, 0, 1], Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        assert_eq!(r.emit(&mut buf).unwrap(), 28);
        assert_eq!(&buf[..28], &REQ[..28]);
        assert_eq!(&buf[28..], &[0xa5, 0xa5]);
        assert!(r.emit(&mut buf[..27]).is_err());
    }

    #[test]
    fn make_reply_in_place() {
        let mut buf = REQ;
        ArpMut::parse(&mut buf).unwrap().make_reply([2, 0, 0, 0, 0, 2]);
        let a = Arp::parse(&buf).unwrap();
        assert_eq!(a.op(), ArpOp::REPLY);
        assert_eq!((a.sha(), a.spa()), ([2, 0, 0, 0, 0, 2], Ipv4Addr::new(198, 18, 0, 2)));
        assert_eq!((a.tha(), a.tpa()), ([2, 0, 0, 0, 0, 1], Ipv4Addr::new(198, 18, 0, 1)));
        let mut m = ArpMut::parse(&mut buf).unwrap();
        m.set_op(ArpOp(7));
        m.set_sha([1; 6]);
        m.set_spa(Ipv4Addr::new(1, 2, 3, 4));
        m.set_tha([3; 6]);
        m.set_tpa(Ipv4Addr::new(5, 6, 7, 8));
        let a = Arp::parse(&buf).unwrap();
        assert_eq!((a.op(), a.sha(), a.tha()), (ArpOp(7), [1; 6], [3; 6]));
        assert_eq!((a.spa(), a.tpa()), (Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(5, 6, 7, 8)));
    }

    #[test]
    fn repr_round_trip() {
        let r = ArpRepr::from_view(&Arp::parse(&REQ).unwrap());
        let mut buf = [0u8; 28];
        r.emit(&mut buf).unwrap();
        assert_eq!(ArpRepr::from_view(&Arp::parse(&buf).unwrap()), r);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for n in 0..PACKET_LEN {
            assert_eq!(Arp::parse(&REQ[..n]).err(), Some(Malformed::ArpTruncated), "len {n}");
        }
    }

    #[test]
    fn malformed_arp_truncated() {
        assert_eq!(Arp::parse(&REQ[..27]).err(), Some(Malformed::ArpTruncated));
    }

    #[test]
    fn malformed_arp_unsupported() {
        let mut b = REQ;
        b[4] = 8; // hlen 8 (not Ethernet)
        assert_eq!(Arp::parse(&b).err(), Some(Malformed::ArpUnsupported));
        let mut b = REQ;
        b[5] = 16; // plen 16 (IPv6-sized)
        assert_eq!(ArpMut::parse(&mut b).err(), Some(Malformed::ArpUnsupported));
    }

    proptest! {
        #[test]
        fn emit_then_parse(op in any::<u16>(), sha in any::<[u8; 6]>(), spa in any::<[u8; 4]>(),
                           tha in any::<[u8; 6]>(), tpa in any::<[u8; 4]>()) {
            let r = ArpRepr { op: ArpOp(op), sha, spa: spa.into(), tha, tpa: tpa.into() };
            let mut buf = [0u8; 28];
            r.emit(&mut buf).unwrap();
            prop_assert_eq!(ArpRepr::from_view(&Arp::parse(&buf).unwrap()), r);
        }

        #[test]
        fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(a) = Arp::parse(&data) {
                let _ = (a.htype(), a.ptype(), a.op(), a.sha(), a.spa(), a.tha(), a.tpa());
                prop_assert!(data.len() >= 28);
            }
        }
    }
}
