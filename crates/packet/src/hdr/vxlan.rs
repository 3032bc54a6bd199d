//! VXLAN header (RFC 7348 §5).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |R|R|R|R|I|R|R|R|            Reserved                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                VXLAN Network Identifier (VNI) |   Reserved    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! "Flags (8 bits): where the I flag MUST be set to 1 for a valid VXLAN Network ID (VNI). The
//! other 7 bits (designated "R") are reserved fields and MUST be set to zero on transmission and
//! ignored on receipt." So parse rejects a clear I flag and ignores the R bits. The payload is
//! the inner Ethernet frame; this view does not require it to be non-empty.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{room, BufferTooSmall, Malformed};

/// Length of the VXLAN header in bytes.
pub const HEADER_LEN: usize = 8;
/// IANA-assigned UDP destination port for VXLAN (RFC 7348 §5).
pub const VXLAN_PORT: u16 = 4789;
/// The I flag: the VNI is valid.
pub const FLAG_I: u8 = 0x08;
/// Largest VNI (24 bits).
pub const VNI_MAX: u32 = 0x00ff_ffff;

#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Fixed {
    flags: u8,
    reserved1: [u8; 3],
    vni: [u8; 3],
    reserved2: u8,
}

fn vni_of(f: &Fixed) -> u32 {
    let [a, b, c] = f.vni;
    u32::from_be_bytes([0, a, b, c])
}

/// A checked read view of a VXLAN header and the inner frame.
#[derive(Debug, Clone, Copy)]
pub struct Vxlan<'a> {
    fixed: &'a Fixed,
    payload: &'a [u8],
}

impl<'a> Vxlan<'a> {
    /// Checks the length (8 bytes) and the I flag.
    ///
    /// # Errors
    /// [`Malformed::VxlanTruncated`] when shorter than 8 bytes; [`Malformed::VxlanBadFlags`]
    /// when the I flag is clear.
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<Self, Malformed> {
        let (fixed, payload) = Fixed::ref_from_prefix(buf).map_err(|_| Malformed::VxlanTruncated)?;
        if fixed.flags & FLAG_I == 0 {
            return Err(Malformed::VxlanBadFlags);
        }
        Ok(Self { fixed, payload })
    }
    /// The flags byte (I flag plus reserved bits as received).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.fixed.flags
    }
    /// The 24-bit VXLAN network identifier.
    #[inline]
    pub fn vni(&self) -> u32 {
        vni_of(self.fixed)
    }
    /// The inner Ethernet frame.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
}

/// A checked write view of a VXLAN header.
#[derive(Debug)]
pub struct VxlanMut<'a> {
    fixed: &'a mut Fixed,
    payload: &'a mut [u8],
}

impl<'a> VxlanMut<'a> {
    /// As [`Vxlan::parse`], for in-place edits.
    ///
    /// # Errors
    /// As [`Vxlan::parse`].
    #[inline]
    pub fn parse(buf: &'a mut [u8]) -> Result<Self, Malformed> {
        let (fixed, payload) = Fixed::mut_from_prefix(buf).map_err(|_| Malformed::VxlanTruncated)?;
        if fixed.flags & FLAG_I == 0 {
            return Err(Malformed::VxlanBadFlags);
        }
        Ok(Self { fixed, payload })
    }
    /// The VNI.
    #[inline]
    pub fn vni(&self) -> u32 {
        vni_of(self.fixed)
    }
    /// Sets the VNI (masked to 24 bits).
    #[inline]
    pub fn set_vni(&mut self, vni: u32) {
        let [_, a, b, c] = (vni & VNI_MAX).to_be_bytes();
        self.fixed.vni = [a, b, c];
    }
    /// The inner frame, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.payload
    }
}

/// An owned VXLAN header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct VxlanRepr {
    /// VXLAN network identifier (24 bits).
    pub vni: u32,
}

impl VxlanRepr {
    /// The fields of a parsed header.
    #[inline]
    pub fn from_view(v: &Vxlan<'_>) -> Self {
        Self { vni: v.vni() }
    }
    /// Bytes [`VxlanRepr::emit`] writes: 8.
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header (I flag set, reserved bits zero, VNI masked to 24 bits); returns 8.
    ///
    /// # Errors
    /// [`BufferTooSmall`] when `buf` is shorter than 8 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let b = room(buf, HEADER_LEN)?;
        let [_, x, y, z] = (self.vni & VNI_MAX).to_be_bytes();
        let f = Fixed { flags: FLAG_I, reserved1: [0; 3], vni: [x, y, z], reserved2: 0 };
        b.copy_from_slice(f.as_bytes());
        Ok(HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Built by hand from RFC 7348 §5: I flag, VNI 0x123456, then 2 bytes of inner frame.
    const HDR: [u8; 10] = [
        0x08, 0x00, 0x00, 0x00, // flags: I; reserved
        0x12, 0x34, 0x56, 0x00, // VNI 0x123456; reserved
        0x02, 0x00, // inner frame starts
    ];

    #[test]
    fn bytes_to_fields() {
        let v = Vxlan::parse(&HDR).unwrap();
        assert_eq!(v.vni(), 0x123456);
        assert_eq!(v.flags(), FLAG_I);
        assert_eq!(v.payload(), &[0x02, 0x00]);
        // Reserved bits are ignored on receipt.
        let mut b = HDR;
        b[0] = 0xff;
        b[7] = 0xff;
        assert_eq!(Vxlan::parse(&b).unwrap().vni(), 0x123456);
    }

    #[test]
    fn fields_to_bytes() {
        let mut buf = [0xa5u8; 10];
        assert_eq!(VxlanRepr { vni: 0x123456 }.emit(&mut buf).unwrap(), 8);
        assert_eq!(&buf[..8], &HDR[..8]);
        assert_eq!(&buf[8..], &[0xa5, 0xa5]);
        assert_eq!(VxlanRepr { vni: 0xff12_3456 }.emit(&mut buf).unwrap(), 8);
        assert_eq!(&buf[..8], &HDR[..8], "VNI masked to 24 bits");
        assert!(VxlanRepr { vni: 1 }.emit(&mut buf[..7]).is_err());
    }

    #[test]
    fn set_vni_in_place() {
        let mut b = HDR;
        let mut m = VxlanMut::parse(&mut b).unwrap();
        m.set_vni(0xabcdef);
        assert_eq!(m.vni(), 0xabcdef);
        m.payload_mut()[0] = 0xee;
        let v = Vxlan::parse(&b).unwrap();
        assert_eq!((v.vni(), v.payload()[0]), (0xabcdef, 0xee));
        assert_eq!(b[7], 0, "reserved byte untouched");
    }

    #[test]
    fn repr_round_trip() {
        let r = VxlanRepr::from_view(&Vxlan::parse(&HDR).unwrap());
        let mut buf = [0u8; 8];
        r.emit(&mut buf).unwrap();
        assert_eq!(VxlanRepr::from_view(&Vxlan::parse(&buf).unwrap()), r);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for n in 0..HEADER_LEN {
            assert_eq!(Vxlan::parse(&HDR[..n]).err(), Some(Malformed::VxlanTruncated));
        }
    }

    #[test]
    fn malformed_vxlan_truncated() {
        assert_eq!(Vxlan::parse(&HDR[..7]).err(), Some(Malformed::VxlanTruncated));
    }

    #[test]
    fn malformed_vxlan_bad_flags() {
        let mut b = HDR;
        b[0] = 0xf7; // every bit but I
        assert_eq!(Vxlan::parse(&b).err(), Some(Malformed::VxlanBadFlags));
        assert_eq!(VxlanMut::parse(&mut b).err(), Some(Malformed::VxlanBadFlags));
    }

    proptest! {
        #[test]
        fn emit_then_parse(vni in 0u32..=VNI_MAX, extra in 0usize..20) {
            let r = VxlanRepr { vni };
            let mut buf = vec![0u8; 8 + extra];
            r.emit(&mut buf).unwrap();
            let v = Vxlan::parse(&buf).unwrap();
            prop_assert_eq!(VxlanRepr::from_view(&v), r);
            prop_assert_eq!(v.payload().len(), extra);
        }

        #[test]
        fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..20)) {
            if let Ok(v) = Vxlan::parse(&data) {
                prop_assert!(v.vni() <= VNI_MAX);
                prop_assert_eq!(8 + v.payload().len(), data.len());
            }
        }
    }
}
