//! TCP header (RFC 9293 §3.1), options kept as raw bytes.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          Source Port          |       Destination Port        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                        Sequence Number                        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                    Acknowledgment Number                      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Data |       |C|E|U|A|P|R|S|F|                               |
//! | Offset| Rsrvd |W|C|R|C|S|S|Y|I|            Window             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |           Checksum            |         Urgent Pointer        |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                           [Options]                           |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! TCP has no length field: the segment is whatever the IP layer hands over, so pass exactly
//! the IP payload to `parse`. The checksum covers the pseudo-header ([`crate::csum`]).

use std::ops::{BitAnd, BitOr, BitOrAssign};

use zerocopy::byteorder::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{room, BufferTooSmall, IpProto, Malformed};
use crate::csum;

/// Length of the fixed header (data offset 5).
pub const MIN_HEADER_LEN: usize = 20;
/// Longest header (data offset 15).
pub const MAX_HEADER_LEN: usize = 60;
/// Most option bytes a header can carry.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - MIN_HEADER_LEN;

/// TCP control bits (the low 8 bits of the offset/flags word, RFC 9293 §3.1, RFC 3168 §6.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    /// No bits.
    pub const NONE: TcpFlags = TcpFlags(0);
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push function.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// Acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// Urgent pointer field is significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN-Echo (RFC 3168).
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion window reduced (RFC 3168).
    pub const CWR: TcpFlags = TcpFlags(0x80);

    /// True when every bit of `other` is set.
    #[inline]
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for TcpFlags {
    type Output = TcpFlags;
    #[inline]
    fn bitor(self, o: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | o.0)
    }
}

impl BitOrAssign for TcpFlags {
    #[inline]
    fn bitor_assign(&mut self, o: TcpFlags) {
        self.0 |= o.0;
    }
}

impl BitAnd for TcpFlags {
    type Output = TcpFlags;
    #[inline]
    fn bitand(self, o: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & o.0)
    }
}

#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Fixed {
    src_port: U16,
    dst_port: U16,
    seq: U32,
    ack: U32,
    off_flags: U16,
    window: U16,
    csum: U16,
    urgent: U16,
}

#[inline]
fn opt_len(fixed: &Fixed, rest_len: usize) -> Result<usize, Malformed> {
    let hlen = usize::from(fixed.off_flags.get() >> 12) * 4;
    let opt = hlen.checked_sub(MIN_HEADER_LEN).ok_or(Malformed::TcpTruncated)?;
    if opt > rest_len {
        return Err(Malformed::TcpTruncated);
    }
    Ok(opt)
}

/// A checked read view of a TCP segment.
#[derive(Debug, Clone, Copy)]
pub struct Tcp<'a> {
    fixed: &'a Fixed,
    options: &'a [u8],
    payload: &'a [u8],
}

impl<'a> Tcp<'a> {
    /// Checks the fixed header and the data offset (≥ 5, within `buf`). `buf` is the whole
    /// segment (the IP payload).
    ///
    /// # Errors
    /// [`Malformed::TcpTruncated`] when the header is cut short or the data offset is below 5
    /// or past the end of `buf`.
    #[inline]
    pub fn parse(buf: &'a [u8]) -> Result<Self, Malformed> {
        let (fixed, rest) = Fixed::ref_from_prefix(buf).map_err(|_| Malformed::TcpTruncated)?;
        let n = opt_len(fixed, rest.len())?;
        let (options, payload) = rest.split_at_checked(n).ok_or(Malformed::TcpTruncated)?;
        Ok(Self { fixed, options, payload })
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
    /// Sequence number.
    #[inline]
    pub fn seq(&self) -> u32 {
        self.fixed.seq.get()
    }
    /// Acknowledgment number.
    #[inline]
    pub fn ack(&self) -> u32 {
        self.fixed.ack.get()
    }
    /// Header length in bytes (data offset × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        MIN_HEADER_LEN + self.options.len()
    }
    /// Control bits.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags(self.fixed.off_flags.get() as u8)
    }
    /// The four reserved bits between data offset and flags (as received).
    #[inline]
    pub fn reserved(&self) -> u8 {
        ((self.fixed.off_flags.get() >> 8) & 0xf) as u8
    }
    /// Receive window.
    #[inline]
    pub fn window(&self) -> u16 {
        self.fixed.window.get()
    }
    /// Checksum as received.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.fixed.csum.get()
    }
    /// Urgent pointer.
    #[inline]
    pub fn urgent(&self) -> u16 {
        self.fixed.urgent.get()
    }
    /// Raw option bytes.
    #[inline]
    pub fn options(&self) -> &'a [u8] {
        self.options
    }
    /// Segment data.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
    fn segment_sum(&self) -> u16 {
        csum::add(csum::sum(self.fixed.as_bytes()), csum::add(csum::sum(self.options), csum::sum(self.payload)))
    }
    fn segment_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }
    /// True when the checksum verifies over IPv4.
    #[inline]
    pub fn checksum_ok_v4(&self, src: [u8; 4], dst: [u8; 4]) -> bool {
        let len = u16::try_from(self.segment_len()).unwrap_or(u16::MAX);
        csum::finish(csum::add(csum::pseudo_v4(src, dst, IpProto::TCP.0, len), self.segment_sum())) == 0
    }
    /// True when the checksum verifies over IPv6.
    #[inline]
    pub fn checksum_ok_v6(&self, src: [u8; 16], dst: [u8; 16]) -> bool {
        let len = u32::try_from(self.segment_len()).unwrap_or(u32::MAX);
        csum::finish(csum::add(csum::pseudo_v6(src, dst, IpProto::TCP.0, len), self.segment_sum())) == 0
    }
}

/// A checked write view of a TCP segment.
#[derive(Debug)]
pub struct TcpMut<'a> {
    fixed: &'a mut Fixed,
    options: &'a mut [u8],
    payload: &'a mut [u8],
}

impl<'a> TcpMut<'a> {
    /// As [`Tcp::parse`], for in-place edits.
    ///
    /// # Errors
    /// As [`Tcp::parse`].
    #[inline]
    pub fn parse(buf: &'a mut [u8]) -> Result<Self, Malformed> {
        let (fixed, rest) = Fixed::mut_from_prefix(buf).map_err(|_| Malformed::TcpTruncated)?;
        let n = opt_len(fixed, rest.len())?;
        let (options, payload) = rest.split_at_mut_checked(n).ok_or(Malformed::TcpTruncated)?;
        Ok(Self { fixed, options, payload })
    }
    /// A read view of the same bytes.
    #[inline]
    pub fn as_view(&self) -> Tcp<'_> {
        Tcp { fixed: self.fixed, options: self.options, payload: self.payload }
    }
    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        self.fixed.csum.get()
    }
    #[inline]
    fn patch16(&mut self, old: u16, new: u16) {
        self.fixed.csum.set(csum::update16(self.fixed.csum.get(), old, new));
    }
    #[inline]
    fn patch32(&mut self, old: u32, new: u32) {
        self.fixed.csum.set(csum::update32(self.fixed.csum.get(), old, new));
    }
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, p: u16) {
        let old = self.fixed.src_port.get();
        self.fixed.src_port.set(p);
        self.patch16(old, p);
    }
    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, p: u16) {
        let old = self.fixed.dst_port.get();
        self.fixed.dst_port.set(p);
        self.patch16(old, p);
    }
    /// Sets the sequence number.
    #[inline]
    pub fn set_seq(&mut self, v: u32) {
        let old = self.fixed.seq.get();
        self.fixed.seq.set(v);
        self.patch32(old, v);
    }
    /// Sets the acknowledgment number.
    #[inline]
    pub fn set_ack(&mut self, v: u32) {
        let old = self.fixed.ack.get();
        self.fixed.ack.set(v);
        self.patch32(old, v);
    }
    /// Sets the control bits.
    #[inline]
    pub fn set_flags(&mut self, f: TcpFlags) {
        let old = self.fixed.off_flags.get();
        let new = (old & 0xff00) | u16::from(f.0);
        self.fixed.off_flags.set(new);
        self.patch16(old, new);
    }
    /// Sets the window.
    #[inline]
    pub fn set_window(&mut self, w: u16) {
        let old = self.fixed.window.get();
        self.fixed.window.set(w);
        self.patch16(old, w);
    }
    /// Adjusts the checksum for a pseudo-header field that changed from `old` to `new` (an IP
    /// address rewritten by NAT: 4 or 16 bytes).
    #[inline]
    pub fn update_pseudo(&mut self, old: &[u8], new: &[u8]) {
        self.fixed.csum.set(csum::update(self.fixed.csum.get(), old, new));
    }
    fn fill(&mut self, pseudo: u16) {
        self.fixed.csum.set(0);
        let s = csum::add(csum::sum(self.fixed.as_bytes()), csum::add(csum::sum(self.options), csum::sum(self.payload)));
        self.fixed.csum.set(csum::finish(csum::add(pseudo, s)));
    }
    fn segment_len(&self) -> usize {
        MIN_HEADER_LEN + self.options.len() + self.payload.len()
    }
    /// Computes the checksum over IPv4 from scratch.
    #[inline]
    pub fn fill_checksum_v4(&mut self, src: [u8; 4], dst: [u8; 4]) {
        let len = u16::try_from(self.segment_len()).unwrap_or(u16::MAX);
        self.fill(csum::pseudo_v4(src, dst, IpProto::TCP.0, len));
    }
    /// Computes the checksum over IPv6 from scratch.
    #[inline]
    pub fn fill_checksum_v6(&mut self, src: [u8; 16], dst: [u8; 16]) {
        let len = u32::try_from(self.segment_len()).unwrap_or(u32::MAX);
        self.fill(csum::pseudo_v6(src, dst, IpProto::TCP.0, len));
    }
    /// Segment data, writable (the checksum is then stale: refill it).
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.payload
    }
}

/// An owned TCP header. Control thread, fixtures and builders only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Control bits.
    pub flags: TcpFlags,
    /// Receive window.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Raw options; emit pads them with zeros (End of Option List) to a multiple of 4 and
    /// writes at most 40 bytes.
    pub options: Vec<u8>,
}

impl TcpRepr {
    /// A header with builder defaults: window 65535, no urgent data, no options.
    pub fn new(src_port: u16, dst_port: u16, flags: TcpFlags, seq: u32, ack: u32) -> Self {
        Self { src_port, dst_port, seq, ack, flags, window: 0xffff, urgent: 0, options: Vec::new() }
    }
    /// The fields of a parsed segment.
    pub fn from_view(v: &Tcp<'_>) -> Self {
        Self {
            src_port: v.src_port(),
            dst_port: v.dst_port(),
            seq: v.seq(),
            ack: v.ack(),
            flags: v.flags(),
            window: v.window(),
            urgent: v.urgent(),
            options: v.options().to_vec(),
        }
    }
    /// Header bytes [`TcpRepr::emit`] writes: 20 + options rounded up to 4, at most 60.
    #[inline]
    pub fn header_len(&self) -> usize {
        MIN_HEADER_LEN + self.options.len().div_ceil(4).saturating_mul(4).min(MAX_OPTIONS_LEN)
    }
    /// Writes the header with a zero checksum (fill it with `TcpMut::fill_checksum_v4/v6`
    /// once the data is in place); returns the header length.
    ///
    /// # Errors
    /// [`BufferTooSmall`] when `buf` is shorter than [`TcpRepr::header_len`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let hlen = self.header_len();
        let b = room(buf, hlen)?;
        let f = Fixed {
            src_port: U16::new(self.src_port),
            dst_port: U16::new(self.dst_port),
            seq: U32::new(self.seq),
            ack: U32::new(self.ack),
            off_flags: U16::new(((hlen as u16 / 4) << 12) | u16::from(self.flags.0)),
            window: U16::new(self.window),
            csum: U16::new(0),
            urgent: U16::new(self.urgent),
        };
        let (head, opts) = b.split_at_mut(MIN_HEADER_LEN);
        head.copy_from_slice(f.as_bytes());
        opts.fill(0);
        let n = self.options.len().min(opts.len());
        if let (Some(d), Some(s)) = (opts.get_mut(..n), self.options.get(..n)) {
            d.copy_from_slice(s);
        }
        Ok(hlen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: [u8; 4] = [198, 18, 0, 1];
    const DST: [u8; 4] = [198, 18, 0, 2];

    /// Built by hand from RFC 9293 §3.1: SYN 40000 → 80, seq 1000, window 64240, with an MSS
    /// option (kind 2 len 4 value 1460) and 2 data bytes, over 198.18.0.1 → 198.18.0.2;
    /// checksum by RFC 1071, cross-checked with tshark (`tcp.checksum.status == Good`).
    const SEG: [u8; 26] = [
        0x9c, 0x40, 0x00, 0x50, // src 40000, dst 80
        0x00, 0x00, 0x03, 0xe8, // seq 1000
        0x00, 0x00, 0x00, 0x00, // ack 0
        0x60, 0x02, 0xfa, 0xf0, // data offset 6, SYN; window 64240
        0x08, 0x2a, 0x00, 0x00, // checksum, urgent 0
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x68, 0x69, // data "hi"
    ];

    fn repr() -> TcpRepr {
        TcpRepr { window: 64240, options: vec![2, 4, 5, 0xb4], ..TcpRepr::new(40000, 80, TcpFlags::SYN, 1000, 0) }
    }

    #[test]
    fn bytes_to_fields() {
        let t = Tcp::parse(&SEG).unwrap();
        assert_eq!((t.src_port(), t.dst_port()), (40000, 80));
        assert_eq!((t.seq(), t.ack()), (1000, 0));
        assert_eq!(t.header_len(), 24);
        assert_eq!(t.flags(), TcpFlags::SYN);
        assert_eq!(t.reserved(), 0);
        assert_eq!(t.window(), 64240);
        assert_eq!(t.checksum(), 0x082a);
        assert_eq!(t.urgent(), 0);
        assert_eq!(t.options(), &[2, 4, 5, 0xb4]);
        assert_eq!(t.payload(), b"hi");
        assert!(t.checksum_ok_v4(SRC, DST));
    }

    #[test]
    fn fields_to_bytes() {
        let mut buf = [0xa5u8; 26];
        assert_eq!(repr().emit(&mut buf).unwrap(), 24);
        assert_eq!(&buf[..16], &SEG[..16]);
        assert_eq!(&buf[16..18], &[0, 0]);
        assert_eq!(&buf[18..24], &SEG[18..24]);
        assert_eq!(&buf[24..], &[0xa5, 0xa5]);
        buf[24..].copy_from_slice(b"hi");
        TcpMut::parse(&mut buf).unwrap().fill_checksum_v4(SRC, DST);
        assert_eq!(buf, SEG);
        assert!(repr().emit(&mut buf[..23]).is_err());
    }

    #[test]
    fn repr_round_trip() {
        let r = TcpRepr::from_view(&Tcp::parse(&SEG).unwrap());
        assert_eq!(r, repr());
        let mut buf = [0u8; 24];
        r.emit(&mut buf).unwrap();
        assert_eq!(TcpRepr::from_view(&Tcp::parse(&buf).unwrap()), r);
    }

    #[test]
    fn flags_ops() {
        let f = TcpFlags::SYN | TcpFlags::ACK;
        assert!(f.contains(TcpFlags::ACK) && !f.contains(TcpFlags::FIN));
        assert_eq!(f & TcpFlags::SYN, TcpFlags::SYN);
        let mut g = TcpFlags::NONE;
        g |= TcpFlags::CWR;
        assert_eq!(g.0, 0x80);
    }

    #[test]
    fn setters_keep_checksum() {
        let mut b = SEG;
        let mut m = TcpMut::parse(&mut b).unwrap();
        m.set_src_port(1);
        m.set_dst_port(2);
        m.set_seq(0xdead_beef);
        m.set_ack(7);
        m.set_flags(TcpFlags::SYN | TcpFlags::ACK | TcpFlags::ECE);
        m.set_window(3);
        m.update_pseudo(&DST, &[10, 9, 8, 7]);
        let t = m.as_view();
        assert!(t.checksum_ok_v4(SRC, [10, 9, 8, 7]));
        assert_eq!((t.src_port(), t.dst_port(), t.seq(), t.ack(), t.window()), (1, 2, 0xdead_beef, 7, 3));
        assert_eq!(t.flags(), TcpFlags(0x52));
        assert_eq!(t.header_len(), 24, "flags setter keeps the data offset");
    }

    #[test]
    fn every_truncation_is_an_error() {
        for n in 0..24 {
            assert_eq!(Tcp::parse(&SEG[..n]).err(), Some(Malformed::TcpTruncated), "len {n}");
            let mut b = SEG;
            assert!(TcpMut::parse(&mut b[..n]).is_err());
        }
    }

    #[test]
    fn malformed_tcp_truncated() {
        let mut b = SEG;
        b[12] = 0x40; // data offset 4: below the fixed header
        assert_eq!(Tcp::parse(&b).err(), Some(Malformed::TcpTruncated));
        b[12] = 0xf0; // data offset 15: past the segment
        assert_eq!(Tcp::parse(&b).err(), Some(Malformed::TcpTruncated));
    }

    proptest! {
        #[test]
        fn emit_then_parse(sp in any::<u16>(), dp in any::<u16>(), seq in any::<u32>(), ack in any::<u32>(),
                           flags in any::<u8>(), win in any::<u16>(), urg in any::<u16>(), optw in 0usize..11,
                           data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let r = TcpRepr { src_port: sp, dst_port: dp, seq, ack, flags: TcpFlags(flags), window: win,
                              urgent: urg, options: (0..optw * 4).map(|i| i as u8).collect() };
            let mut buf = vec![0u8; r.header_len() + data.len()];
            let h = r.emit(&mut buf).unwrap();
            buf[h..].copy_from_slice(&data);
            TcpMut::parse(&mut buf).unwrap().fill_checksum_v4(SRC, DST);
            let t = Tcp::parse(&buf).unwrap();
            prop_assert!(t.checksum_ok_v4(SRC, DST));
            prop_assert_eq!(TcpRepr::from_view(&t), r);
            prop_assert_eq!(t.payload(), &data[..]);
        }

        #[test]
        fn parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(t) = Tcp::parse(&data) {
                prop_assert!(t.header_len() + t.payload().len() == data.len());
                let _ = (t.flags(), t.options(), t.checksum_ok_v4(SRC, DST), t.checksum_ok_v6([0; 16], [0; 16]));
            }
        }

        #[test]
        fn incremental_equals_full(seq in any::<u32>(), ack in any::<u32>(), flags in any::<u8>(),
                                   win in any::<u16>(), sp in any::<u16>(), new_dst in any::<[u8; 4]>()) {
            let mut b = SEG;
            let mut m = TcpMut::parse(&mut b).unwrap();
            m.set_seq(seq);
            m.set_ack(ack);
            m.set_flags(TcpFlags(flags));
            m.set_window(win);
            m.set_src_port(sp);
            m.update_pseudo(&DST, &new_dst);
            let inc = m.checksum();
            m.fill_checksum_v4(SRC, new_dst);
            prop_assert_eq!(inc, m.checksum());
        }
    }
}
