//! IEEE 802.1Q VLAN tag (C-tag, TPID 0x8100) and 802.1ad service tag (S-tag, TPID 0x88a8).
//!
//! The TPID sits where an untagged frame has its EtherType, so this view starts *after* it:
//! it covers the Tag Control Information and the EtherType that follows the tag.
//! ```text
//!  ... | TPID (in Eth::ethertype) | PCP(3) DEI(1) VID(12) | EtherType | payload
//!                                  \______ this view: 4 bytes ______/
//! ```
//! Q-in-Q (802.1ad): `Eth { ethertype: QINQ }`, then an S-tag whose EtherType is `VLAN`, then a
//! C-tag whose EtherType is the payload's. [`parse_tags`] walks such a stack.

use zerocopy::byteorder::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{room, BufferTooSmall, EtherType, Malformed};

/// Length of a tag (TCI + EtherType) in bytes.
pub const TAG_LEN: usize = 4;
/// Largest VLAN ID value (4095 is reserved, 0 means priority-tagged only).
pub const VID_MAX: u16 = 0x0fff;

#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Fixed {
    tci: U16,
    ethertype: U16,
}

/// A checked read view of one VLAN tag and what follows it.
#[derive(Debug, Clone, Copy)]
pub struct Vlan<'a> {
    fixed: &'a Fixed,
    payload: &'a [u8],
}

impl<'a> Vlan<'a> {
    /// Checks that `buf` (the bytes after a VLAN TPID) holds a 4-byte tag.
    ///
    /// # Errors
    /// [`Malformed::VlanTruncated`] when `buf` is shorter than 4 bytes.
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<Self, Malformed> {
        let (fixed, payload) = Fixed::ref_from_prefix(buf).map_err(|_| Malformed::VlanTruncated)?;
        Ok(Self { fixed, payload })
    }
    /// Priority code point (0..=7).
    #[inline]
    pub fn pcp(&self) -> u8 {
        (self.fixed.tci.get() >> 13) as u8
    }
    /// Drop eligible indicator.
    #[inline]
    pub fn dei(&self) -> bool {
        self.fixed.tci.get() & 0x1000 != 0
    }
    /// VLAN identifier (0..=4095).
    #[inline]
    pub fn vid(&self) -> u16 {
        self.fixed.tci.get() & VID_MAX
    }
    /// The whole tag control information.
    #[inline]
    pub fn tci(&self) -> u16 {
        self.fixed.tci.get()
    }
    /// The EtherType after the tag (another TPID for a stacked tag).
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(self.fixed.ethertype.get())
    }
    /// Bytes after the tag.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

/// Walks up to two VLAN tags after an Ethernet header whose EtherType is `first`:
/// returns `(outer, inner)` tags (either may be absent) and the offset, from the start of
/// `after_eth`, of the first byte after the last tag.
///
/// # Errors
/// [`Malformed::VlanTruncated`] when a tag is cut short.
#[inline]
pub fn parse_tags(first: EtherType, after_eth: &[u8]) -> Result<(Option<Vlan<'_>>, Option<Vlan<'_>>, usize), Malformed> {
    if !first.is_vlan_tag() {
        return Ok((None, None, 0));
    }
    let outer = Vlan::parse(after_eth)?;
    if !outer.ethertype().is_vlan_tag() {
        return Ok((Some(outer), None, TAG_LEN));
    }
    let inner = Vlan::parse(outer.payload())?;
    Ok((Some(outer), Some(inner), 2 * TAG_LEN))
}

/// A checked write view of one VLAN tag.
#[derive(Debug)]
pub struct VlanMut<'a> {
    fixed: &'a mut Fixed,
    payload: &'a mut [u8],
}

impl<'a> VlanMut<'a> {
    /// As [`Vlan::parse`], for in-place edits.
    ///
    /// # Errors
    /// [`Malformed::VlanTruncated`] when `buf` is shorter than 4 bytes.
    #[inline]
    pub fn parse(buf: &'a mut [u8]) -> Result<Self, Malformed> {
        let (fixed, payload) = Fixed::mut_from_prefix(buf).map_err(|_| Malformed::VlanTruncated)?;
        Ok(Self { fixed, payload })
    }
    /// VLAN identifier.
    #[inline]
    pub fn vid(&self) -> u16 {
        self.fixed.tci.get() & VID_MAX
    }
    /// Sets the VLAN identifier (masked to 12 bits).
    #[inline]
    pub fn set_vid(&mut self, vid: u16) {
        let t = self.fixed.tci.get();
        self.fixed.tci.set((t & !VID_MAX) | (vid & VID_MAX));
    }
    /// Sets the priority code point (masked to 3 bits).
    #[inline]
    pub fn set_pcp(&mut self, pcp: u8) {
        let t = self.fixed.tci.get();
        self.fixed.tci.set((t & 0x1fff) | (u16::from(pcp & 7) << 13));
    }
    /// Sets the drop eligible indicator.
    #[inline]
    pub fn set_dei(&mut self, dei: bool) {
        let t = self.fixed.tci.get();
        self.fixed.tci.set((t & !0x1000) | if dei { 0x1000 } else { 0 });
    }
    /// Sets the EtherType after the tag.
    #[inline]
    pub fn set_ethertype(&mut self, t: EtherType) {
        self.fixed.ethertype.set(t.0);
    }
    /// Bytes after the tag, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.payload
    }
}

/// An owned VLAN tag (TCI fields and the following EtherType).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct VlanRepr {
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (0..=4095).
    pub vid: u16,
    /// EtherType after the tag.
    pub ethertype: EtherType,
}

impl VlanRepr {
    /// The fields of a parsed tag.
    #[inline]
    pub fn from_view(v: &Vlan<'_>) -> Self {
        Self { pcp: v.pcp(), dei: v.dei(), vid: v.vid(), ethertype: v.ethertype() }
    }
    /// Bytes [`VlanRepr::emit`] writes: 4.
    #[inline]
    pub const fn header_len(&self) -> usize {
        TAG_LEN
    }
    /// Writes the tag (TCI, EtherType) into the start of `buf`; `pcp` and `vid` are masked to
    /// their widths. Returns 4.
    ///
    /// # Errors
    /// [`BufferTooSmall`] when `buf` is shorter than 4 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let b = room(buf, TAG_LEN)?;
        let tci = (u16::from(self.pcp & 7) << 13) | if self.dei { 0x1000 } else { 0 } | (self.vid & VID_MAX);
        let f = Fixed { tci: U16::new(tci), ethertype: U16::new(self.ethertype.0) };
        b.copy_from_slice(f.as_bytes());
        Ok(TAG_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Built by hand from IEEE 802.1Q-2018 §9.6: TCI = PCP 5, DEI 1, VID 0x123, then IPv4.
    const TAG: [u8; 6] = [
        0xb1, 0x23, // PCP 5 (101), DEI 1, VID 0x123
        0x08, 0x00, // EtherType IPv4
        0x45, 0x00, // payload (start of an IPv4 header)
    ];

    /// Q-in-Q stack after the outer TPID 0x88a8 (IEEE 802.1ad): S-tag VID 100, C-tag VID 200.
    const QINQ: [u8; 8] = [
        0x00, 0x64, 0x81, 0x00, // S-tag: PCP 0 VID 100, next TPID 0x8100
        0x00, 0xc8, 0x86, 0xdd, // C-tag: VID 200, then IPv6
    ];

    #[test]
    fn bytes_to_fields() {
        let v = Vlan::parse(&TAG).unwrap();
        assert_eq!((v.pcp(), v.dei(), v.vid()), (5, true, 0x123));
        assert_eq!(v.tci(), 0xb123);
        assert_eq!(v.ethertype(), EtherType::IPV4);
        assert_eq!(v.payload(), &[0x45, 0x00]);
    }

    #[test]
    fn qinq_stack() {
        let (o, i, off) = parse_tags(EtherType::QINQ, &QINQ).unwrap();
        assert_eq!(o.unwrap().vid(), 100);
        assert_eq!(i.unwrap().vid(), 200);
        assert_eq!(i.unwrap().ethertype(), EtherType::IPV6);
        assert_eq!(off, 8);
        let (o, i, off) = parse_tags(EtherType::VLAN, &TAG).unwrap();
        assert_eq!((o.unwrap().vid(), i.is_none(), off), (0x123, true, 4));
        let (o, i, off) = parse_tags(EtherType::IPV4, &TAG).unwrap();
        assert!(o.is_none() && i.is_none() && off == 0);
        assert_eq!(parse_tags(EtherType::QINQ, &QINQ[..6]).err(), Some(Malformed::VlanTruncated));
    }

    #[test]
    fn fields_to_bytes() {
        let mut buf = [0xa5u8; 6];
        let r = VlanRepr { pcp: 5, dei: true, vid: 0x123, ethertype: EtherType::IPV4 };
        assert_eq!(r.emit(&mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], &TAG[..4]);
        assert_eq!(&buf[4..], &[0xa5, 0xa5]);
        assert!(r.emit(&mut buf[..3]).is_err());
    }

    #[test]
    fn setters_edit_in_place() {
        let mut buf = TAG;
        let mut m = VlanMut::parse(&mut buf).unwrap();
        m.set_vid(0xfff);
        m.set_pcp(1);
        m.set_dei(false);
        m.set_ethertype(EtherType::IPV6);
        assert_eq!(m.vid(), 0xfff);
        let v = Vlan::parse(&buf).unwrap();
        assert_eq!((v.pcp(), v.dei(), v.vid(), v.ethertype()), (1, false, 0xfff, EtherType::IPV6));
    }

    #[test]
    fn repr_round_trip() {
        let r = VlanRepr::from_view(&Vlan::parse(&TAG).unwrap());
        let mut buf = [0u8; 4];
        r.emit(&mut buf).unwrap();
        assert_eq!(VlanRepr::from_view(&Vlan::parse(&buf).unwrap()), r);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for n in 0..TAG_LEN {
            assert_eq!(Vlan::parse(&TAG[..n]).err(), Some(Malformed::VlanTruncated));
        }
    }

    #[test]
    fn malformed_vlan_truncated() {
        assert_eq!(Vlan::parse(&[0x81]).err(), Some(Malformed::VlanTruncated));
    }

    proptest! {
        #[test]
        fn emit_then_parse(pcp in 0u8..8, dei in any::<bool>(), vid in 0u16..4096, t in any::<u16>()) {
            let r = VlanRepr { pcp, dei, vid, ethertype: EtherType(t) };
            let mut buf = [0u8; 4];
            r.emit(&mut buf).unwrap();
            prop_assert_eq!(VlanRepr::from_view(&Vlan::parse(&buf).unwrap()), r);
        }

        #[test]
        fn parse_never_panics(first in any::<u16>(), data in proptest::collection::vec(any::<u8>(), 0..12)) {
            if let Ok((o, i, off)) = parse_tags(EtherType(first), &data) {
                prop_assert!(off <= data.len());
                prop_assert!(i.is_none() || o.is_some());
            }
        }
    }
}
