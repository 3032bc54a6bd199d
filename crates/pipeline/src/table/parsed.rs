//! The parser's record of the 5-tuple ([`ParsedTuple`]): written by the parser's fast path
//! (`stages/parser.rs`) as it meets the headers, read by the classifier table right after it
//! (`aclkey::ParsedForm`). A module of its own, which both use and which uses neither.

use fastpath_packet::{Hdr, Meta, Slot};

/// The parser's record of a packet's 5-tuple, for a classifier table that runs right after it
/// (`KeyShare::Parsed`, chosen by [`crate::build::special::parsed_tuple`]), in the batch's lane
/// words ([`fastpath_packet::Batch::words`]; the `KeyMemo` says for which lanes of the batch
/// the parser wrote them). The parser has the headers' bytes at hand and has checked their
/// lengths, so it copies them as they are, in two stores, where the table, reading the packet
/// again, paid a validity test, an offset load, a bounds check and a load per header (about 20
/// instructions a packet). Two `u64`s:
/// - the IPv4 header's bytes 12..20 (source, destination), loaded little-endian;
/// - the L4 header's bytes 0..4 (the ports), loaded little-endian, in bits 0..32 (0 without a
///   UDP or TCP header); the protocol in bits 32..40, the input port in 40..56, and
///   [`ParsedTuple::L3`] (the top bit) when the packet has an IPv4 header (else the word is 0
///   but the ports).
///
/// The cache needs keys equal exactly when the key words are, not in any order: the table
/// looks the record up as it is (`aclkey::ParsedForm`) and turns it into words only on a miss.
/// The `L3` bit keeps a record from equalling a key `aclkey::Tuple::read_raw` reads (whose top
/// bits are 0), should both ever meet in one cache.
pub(crate) struct ParsedTuple;

impl ParsedTuple {
    /// The packet has an IPv4 header: the sign bit, one test.
    pub(crate) const L3: u64 = 1 << 63;

    /// The record's second word for an IPv4 header of protocol `proto` on a packet from `port`.
    #[inline(always)]
    pub(crate) fn l3_word(port: u16, proto: u8) -> u64 {
        const { assert!(ParsedTuple::L3 == 1 << 31 << 32) };
        // The port, the protocol and the header's bit in one shift.
        u64::from(u32::from(port) << 8 | u32::from(proto) | 1 << 31) << 32
    }

    /// The record of a parsed packet from its metadata: for the frames the parser's fast path
    /// leaves to the full parser. The parser has checked that each header it marks valid is
    /// whole.
    pub(crate) fn of(d: &[u8], m: &Meta) -> [u64; 2] {
        let (mut lo, mut hi) = (0, 0);
        let mut t = [&mut lo, &mut hi];
        if m.valid.has(Hdr::Ipv4) {
            if let Some(h) = d.get(m.offset(Slot::L3)..).and_then(|s| s.first_chunk::<20>()) {
                t.l3(u64::from_le_bytes([h[12], h[13], h[14], h[15], h[16], h[17], h[18], h[19]]), h[9], m.in_port);
            }
        }
        if m.valid.has(Hdr::Udp) || m.valid.has(Hdr::Tcp) {
            if let Some(p) = d.get(m.offset(Slot::L4)..).and_then(|s| s.first_chunk::<4>()) {
                t.l4(u32::from_le_bytes(*p));
            }
        }
        [lo, hi]
    }

    /// A record as `aclkey::Tuple::read_raw` would have read the packet (for the classifier, on a
    /// miss): the addresses and ports in big-endian order, the header bit dropped.
    pub(crate) fn raw(t: &[u64; 2]) -> [u64; 2] {
        [t[0].swap_bytes(), (t[1] & 0x00ff_ffff_0000_0000) | u64::from((t[1] as u32).swap_bytes())]
    }
}

/// Where the parser puts the outer headers' parts of the 5-tuple as it meets them: a lane's
/// record ([`ParsedTuple`], its lane words written in place; the second 0 beforehand), or
/// nowhere (`()`: a parser that records nothing, whose calls then cost nothing).
pub(crate) trait TupleSink {
    /// An IPv4 header: its bytes 12..20 (the addresses) as one little-endian load, its
    /// protocol, and the packet's input port.
    fn l3(&mut self, addrs: u64, proto: u8, port: u16);
    /// A UDP or TCP header: its first four bytes (the ports), little-endian.
    fn l4(&mut self, ports: u32);
}

impl TupleSink for () {
    #[inline(always)]
    fn l3(&mut self, _: u64, _: u8, _: u16) {}
    #[inline(always)]
    fn l4(&mut self, _: u32) {}
}

impl TupleSink for [&mut u64; 2] {
    #[inline(always)]
    fn l3(&mut self, addrs: u64, proto: u8, port: u16) {
        *self[0] = addrs;
        *self[1] = ParsedTuple::l3_word(port, proto);
    }
    #[inline(always)]
    fn l4(&mut self, ports: u32) {
        *self[1] |= u64::from(ports);
    }
}
