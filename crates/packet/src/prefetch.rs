//! CPU hints, the cycle counter and two instructions the tables use: software prefetch,
//! `rdtsc`, the 16-bit lane match of the hash tables' bucket signatures, and the CRC-32C step
//! that hashes the ACL result cache's keys.
//!
//! The only other home of `unsafe` in this crate besides `pool`. On targets without these
//! instructions the functions are no-ops (prefetch), return 0 (cycles) or run a scalar twin
//! (the lane match).

/// Hints the CPU to bring the cache line holding `p` into L1 for reading. Never faults.
#[inline(always)]
pub fn prefetch_read<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, and `p` is a valid reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>((p as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The CPU's time-stamp counter (constant-rate on every x86-64 of the last decade).
/// Benchmarks only: the packet path reads time once per batch through its caller.
#[inline]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `rdtsc` has no preconditions on x86-64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// Lanes of the eight 16-bit lanes of `words` (lane `k` is bits `16 * (k % 4)..` of
/// `words[k / 4]`) that equal `s`: bit `2k` set for each such lane `k`, every other bit clear
/// (decode a lane as `trailing_zeros() / 2`).
///
/// The exact and flow tables' buckets hold their eight signatures this way. On x86-64 this is
/// a 128-bit compare and a byte-mask move, about 5 instructions where the tables' SWAR match
/// took about 17 (`scripts/instructions`); elsewhere [`lanes_eq16_scalar`], which the tests
/// hold it equal to.
#[inline(always)]
pub fn lanes_eq16(words: &[u64; 2], s: u16) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, _mm_cmpeq_epi16, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi16};
        // SAFETY: SSE2 is part of the x86-64 baseline, so these instructions exist on every
        // CPU this code runs on; the unaligned load reads exactly the 16 bytes of `words`, a
        // valid reference.
        let bytes = unsafe {
            let v = _mm_loadu_si128((words as *const [u64; 2]).cast::<__m128i>());
            _mm_movemask_epi8(_mm_cmpeq_epi16(v, _mm_set1_epi16(s as i16)))
        };
        bytes as u32 & 0x5555
    }
    #[cfg(not(target_arch = "x86_64"))]
    lanes_eq16_scalar(words, s)
}

/// [`lanes_eq16`] in plain code: the reference twin and the fallback on other targets.
#[inline]
pub fn lanes_eq16_scalar(words: &[u64; 2], s: u16) -> u32 {
    let mut m = 0u32;
    for k in 0..8 {
        if (words[k / 4] >> (16 * (k % 4))) as u16 == s {
            m |= 1 << (2 * k);
        }
    }
    m
}

/// One CRC-32C (Castagnoli) step over the 8 bytes of `w`, least significant first, from the
/// running value `crc`: the SSE 4.2 `crc32` instruction (no initial or final inversion), one
/// instruction where the target has it (this workspace's x86-64-v3 baseline does), else
/// [`crc32c_u64_scalar`], which the tests hold it equal to.
#[inline(always)]
pub fn crc32c_u64(crc: u32, w: u64) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse4.2"))]
    // SAFETY: the instruction exists: this branch is built only for targets that have SSE 4.2.
    // It reads only its two register operands.
    unsafe {
        core::arch::x86_64::_mm_crc32_u64(u64::from(crc), w) as u32
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse4.2")))]
    crc32c_u64_scalar(crc, w)
}

/// [`crc32c_u64`] a bit at a time: the reference twin and the fallback on other targets.
#[inline]
pub fn crc32c_u64_scalar(crc: u32, w: u64) -> u32 {
    // Reflected CRC-32C: the polynomial 0x1EDC6F41 bit-reversed.
    const POLY: u32 = 0x82F6_3B78;
    let mut c = u64::from(crc) ^ w;
    for _ in 0..64 {
        c = (c >> 1) ^ (u64::from(POLY) & (c & 1).wrapping_neg());
    }
    c as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The vector compare equals the scalar twin, with lanes drawn from a few values so
        /// that matches, zeros and near misses (one bit apart, the sign bit) are common.
        #[test]
        fn lanes_eq16_equals_its_scalar_twin(picks in proptest::array::uniform8(0usize..7), s in 0usize..7) {
            let vals = [0u16, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1234];
            let mut words = [0u64; 2];
            for (k, &p) in picks.iter().enumerate() {
                words[k / 4] |= u64::from(vals[p]) << (16 * (k % 4));
            }
            prop_assert_eq!(lanes_eq16(&words, vals[s]), lanes_eq16_scalar(&words, vals[s]));
        }
    }

    proptest! {
        /// The instruction equals the bitwise twin.
        #[test]
        fn crc32c_equals_its_scalar_twin(crc: u32, w: u64) {
            prop_assert_eq!(crc32c_u64(crc, w), crc32c_u64_scalar(crc, w));
        }
    }

    /// The standard check value: CRC-32C of the 8 bytes "12345678", inverted before and after,
    /// is 0x6087_809A (and of "123456789" it is 0xE306_9283, the value every CRC-32C
    /// implementation is tested with; the ninth byte is one byte step: shift in 8 bits).
    #[test]
    fn crc32c_gives_the_standard_check_values() {
        let w = u64::from_le_bytes(*b"12345678");
        assert_eq!(!crc32c_u64(!0, w), 0x6087_809A);
        let byte = |c: u32, b: u8| {
            let mut c = c ^ u32::from(b);
            for _ in 0..8 {
                c = (c >> 1) ^ (0x82F6_3B78 & (c & 1).wrapping_neg());
            }
            c
        };
        assert_eq!(!byte(crc32c_u64(!0, w), b'9'), 0xE306_9283);
    }

    #[test]
    fn lanes_eq16_sets_bit_2k_for_lane_k() {
        let words = [0x0004_0003_0002_0001u64, 0x0003_0003_0000_0000];
        assert_eq!(lanes_eq16(&words, 3), 1 << 4 | 1 << 12 | 1 << 14);
        assert_eq!(lanes_eq16(&words, 0), 1 << 8 | 1 << 10);
        assert_eq!(lanes_eq16(&words, 9), 0);
    }
}
