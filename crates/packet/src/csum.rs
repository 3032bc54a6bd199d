//! Checksums: the RFC 1071 Internet checksum, the IPv4 header checksum, the UDP/TCP/ICMPv6
//! pseudo-header sums for IPv4 (RFC 768, RFC 9293 §3.1) and IPv6 (RFC 8200 §8.1), and the
//! RFC 1624 incremental update.
//!
//! # The sum
//! The Internet checksum is the ones'-complement of the ones'-complement sum of the data taken
//! as big-endian 16-bit words (an odd trailing byte is padded with a zero). RFC 1071 §2 notes
//! that the sum is byte-order independent ("(B) Byte Order Independence"): summing the words in
//! the machine's native order gives the byte-swapped sum, so we add native-endian 32-bit words
//! into a 64-bit accumulator (no carry handling needed for any packet; LLVM vectorises the loop)
//! and fold the carries back ("end-around carry", §2 (A)) once at the end:
//!
//! ```text
//!  bytes  b0 b1 b2 b3 | b4 b5 b6 b7 | ...       acc += u32::from_ne_bytes(chunk)
//!  fold   acc = (acc & 0xffff) + (acc >> 16) until it fits 16 bits
//!  value  u16::from_be_bytes(folded.to_ne_bytes())       (undo the native order)
//! ```
//!
//! # Partial sums
//! [`sum`] returns the folded (not complemented) ones'-complement sum of a slice; sums of slices
//! that each start at an even offset of the covered data are combined with [`add`], and
//! [`finish`] complements. A correct checksum makes the sum over the covered data, checksum
//! included, `0xffff`, so verification is `finish(..) == 0`.
//!
//! # Incremental update (RFC 1624 §3, eqn. 3)
//! `HC' = ~(~HC + ~m + m')`: when a 16-bit word `m` covered by checksum `HC` becomes `m'`, the
//! new checksum follows without touching the rest of the data. [`update16`], [`update32`] and
//! [`update`] (equal-length byte slices at an even offset) apply it. Eqn. 3 avoids the `-0`
//! problem of RFC 1141's eqn. 2 and agrees with a full recomputation whenever the covered data
//! is not all zeros.
//!
//! Thread: any. Never allocates, never panics.

/// Ones'-complement sum of `data` as big-endian 16-bit words, folded to 16 bits (RFC 1071).
/// An odd trailing byte is padded with zero. The empty slice sums to 0.
#[inline]
pub fn sum(data: &[u8]) -> u16 {
    // An IPv4 header without options: five words, unrolled (the parser's per-packet check).
    if let Ok(h) = <&[u8; 20]>::try_from(data) {
        let w = |k: usize| u64::from(u32::from_ne_bytes([h[k], h[k + 1], h[k + 2], h[k + 3]]));
        let acc = w(0) + w(4) + w(8) + w(12) + w(16);
        return u16::from_be_bytes(fold(acc).to_ne_bytes());
    }
    let mut acc: u64 = 0;
    let mut words = data.chunks_exact(4);
    for b in &mut words {
        acc += u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    }
    acc += u64::from(match *words.remainder() {
        [a] => u32::from_ne_bytes([a, 0, 0, 0]),
        [a, b] => u32::from_ne_bytes([a, b, 0, 0]),
        [a, b, c] => u32::from_ne_bytes([a, b, c, 0]),
        _ => 0,
    });
    u16::from_be_bytes(fold(acc).to_ne_bytes())
}

/// Folds a 64-bit accumulator of 16-bit words to 16 bits with end-around carry. Four fixed
/// steps suffice: 64 → 33 bits → 17+ → 16 + a carry → 16.
#[inline]
fn fold(acc: u64) -> u16 {
    let a = (acc & 0xffff_ffff) + (acc >> 32);
    let a = (a & 0xffff) + (a >> 16);
    let a = (a & 0xffff) + (a >> 16);
    let a = (a & 0xffff) + (a >> 16);
    a as u16
}

/// Ones'-complement addition of two partial sums.
#[inline]
pub fn add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// The checksum for a finished partial sum: its ones' complement.
#[inline]
pub fn finish(sum: u16) -> u16 {
    !sum
}

/// The Internet checksum of `data` (RFC 1071): `!sum(data)`. Over data that already holds a
/// correct checksum it returns 0.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(data))
}

/// Offset of the checksum field in an IPv4 header.
const IPV4_CSUM_OFF: usize = 10;

/// The IPv4 header checksum (RFC 791 §3.1) of `header` (the whole header, options included),
/// computed as if its checksum field (bytes 10..12) were zero. A header shorter than 12 bytes is
/// summed as it is.
#[inline]
pub fn ipv4_header(header: &[u8]) -> u16 {
    match (header.get(..IPV4_CSUM_OFF), header.get(IPV4_CSUM_OFF + 2..)) {
        (Some(a), Some(b)) => finish(add(sum(a), sum(b))),
        _ => checksum(header),
    }
}

/// True when the IPv4 header `header` (options included) carries a correct checksum.
#[inline]
pub fn ipv4_header_ok(header: &[u8]) -> bool {
    checksum(header) == 0
}

/// Partial sum of the IPv4 pseudo-header (RFC 768; RFC 9293 §3.1): source, destination, zero,
/// protocol, and the upper-layer length in bytes.
#[inline]
pub fn pseudo_v4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16) -> u16 {
    let mut p = [0u8; 12];
    p[..4].copy_from_slice(&src);
    p[4..8].copy_from_slice(&dst);
    p[9] = proto;
    p[10..].copy_from_slice(&len.to_be_bytes());
    sum(&p)
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 §8.1): source, destination, 32-bit
/// upper-layer length, three zero bytes and the next header value.
#[inline]
pub fn pseudo_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, len: u32) -> u16 {
    let mut p = [0u8; 40];
    p[..16].copy_from_slice(&src);
    p[16..32].copy_from_slice(&dst);
    p[32..36].copy_from_slice(&len.to_be_bytes());
    p[39] = next_header;
    sum(&p)
}

/// The UDP/TCP checksum over IPv4 of `segment` (header and data; its checksum field must be
/// zero to compute, or hold the transmitted value to verify: a correct one gives 0). Segments
/// longer than 65535 bytes are summed with a truncated length.
#[inline]
pub fn l4_v4(src: [u8; 4], dst: [u8; 4], proto: u8, segment: &[u8]) -> u16 {
    let len = u16::try_from(segment.len()).unwrap_or(u16::MAX);
    finish(add(pseudo_v4(src, dst, proto, len), sum(segment)))
}

/// The UDP/TCP/ICMPv6 checksum over IPv6 of `segment` (see [`l4_v4`]).
#[inline]
pub fn l4_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, segment: &[u8]) -> u16 {
    let len = u32::try_from(segment.len()).unwrap_or(u32::MAX);
    finish(add(pseudo_v6(src, dst, next_header, len), sum(segment)))
}

/// RFC 1624 eqn. 3: the checksum after the 16-bit word `old` became `new`.
#[inline]
pub fn update16(old_csum: u16, old: u16, new: u16) -> u16 {
    !add(add(!old_csum, !old), new)
}

/// RFC 1624 eqn. 3 for a 32-bit field (two adjacent 16-bit words at an even offset).
#[inline]
pub fn update32(old_csum: u16, old: u32, new: u32) -> u16 {
    let c = update16(old_csum, (old >> 16) as u16, (new >> 16) as u16);
    update16(c, old as u16, new as u16)
}

/// RFC 1624 eqn. 3 for a field given as bytes (an address, a MAC) that starts at an even offset
/// of the covered data. `old` and `new` should have the same length; the longer one's extra
/// bytes are ignored.
#[inline]
pub fn update(old_csum: u16, old: &[u8], new: &[u8]) -> u16 {
    let n = old.len().min(new.len());
    match (old.get(..n), new.get(..n)) {
        (Some(o), Some(w)) => !add(add(!old_csum, !sum(o)), sum(w)),
        _ => old_csum,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Naive twin: RFC 1071 §4.1 reference algorithm, big-endian 16-bit words.
    fn naive_sum(data: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        let mut i = 0;
        while i + 1 < data.len() {
            acc += u32::from(u16::from_be_bytes([data[i], data[i + 1]]));
            i += 2;
        }
        if i < data.len() {
            acc += u32::from(data[i]) << 8;
        }
        while acc >> 16 != 0 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    /// RFC 1071 §3 numerical example: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
    #[test]
    fn rfc1071_example() {
        assert_eq!(sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0xddf2);
        assert_eq!(checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
    }

    /// An IPv4 header whose checksum (0xb861) is the widely reproduced worked example
    /// (e.g. Wikipedia "IPv4 header checksum"): 4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7.
    #[test]
    fn ipv4_header_known_value() {
        let h: [u8; 20] =
            [0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7];
        assert_eq!(ipv4_header(&h), 0xb861);
        assert!(ipv4_header_ok(&h));
        let mut bad = h;
        bad[8] = 0x3f;
        assert!(!ipv4_header_ok(&bad));
    }

    #[test]
    fn odd_lengths_pad_with_zero() {
        assert_eq!(sum(&[0xab]), 0xab00);
        assert_eq!(sum(&[]), 0);
        assert_eq!(sum(&[0xff, 0xff, 0x00, 0x01]), 0x0001);
    }

    proptest! {
        #[test]
        fn sum_equals_naive(data in proptest::collection::vec(any::<u8>(), 0..1600)) {
            let a = sum(&data);
            let b = naive_sum(&data);
            prop_assert_eq!(a, b);
        }

        #[test]
        fn split_sums_combine(data in proptest::collection::vec(any::<u8>(), 0..600), cut in 0usize..300) {
            let cut = (cut * 2).min(data.len() & !1);
            let (a, b) = data.split_at(cut);
            prop_assert_eq!(add(sum(a), sum(b)) % 0xffff, sum(&data) % 0xffff);
        }

        #[test]
        fn incremental_equals_full(
            mut data in proptest::collection::vec(any::<u8>(), 4..200),
            at in 0usize..100, new16 in any::<u16>(), new32 in any::<u32>(),
        ) {
            data[0] |= 1; // not all zeros: eqn. 3 and the full sum agree then (see module doc)
            let at = (at * 2) % (data.len() & !1).max(2);
            let at = at.min(data.len().saturating_sub(4) & !1);
            let c0 = checksum(&data);
            let old16 = u16::from_be_bytes([data[at], data[at + 1]]);
            let mut d16 = data.clone();
            d16[at..at + 2].copy_from_slice(&new16.to_be_bytes());
            if d16.iter().any(|&b| b != 0) {
                prop_assert_eq!(update16(c0, old16, new16), checksum(&d16));
            }
            let old32 = u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
            let mut d32 = data.clone();
            d32[at..at + 4].copy_from_slice(&new32.to_be_bytes());
            if d32.iter().any(|&b| b != 0) {
                prop_assert_eq!(update32(c0, old32, new32), checksum(&d32));
                prop_assert_eq!(update(c0, &data[at..at + 4], &new32.to_be_bytes()), checksum(&d32));
            }
        }

        #[test]
        fn l4_verifies_to_zero(
            src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(),
            mut seg in proptest::collection::vec(any::<u8>(), 8..300),
        ) {
            seg[6] = 0; seg[7] = 0;
            let c = l4_v4(src, dst, 17, &seg);
            seg[6..8].copy_from_slice(&c.to_be_bytes());
            prop_assert_eq!(l4_v4(src, dst, 17, &seg), 0);
        }
    }
}
