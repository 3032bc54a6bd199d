//! Strict priority: class 7 first, 0 last.
//!
//! ```text
//!   non-empty & strict mask   0b1010_0000
//!   highest set bit           7 − lzcnt = 7  → class 7 goes next
//! ```
//!
//! A strict class starves everything below it while it has packets and is eligible: that is the
//! point (voice, control), and why the strict classes usually carry a shaper.

/// The highest class whose bit is set in `mask`, or `None` for an empty mask. One `lzcnt`.
#[inline]
pub fn highest(mask: u8) -> Option<usize> {
    if mask == 0 {
        None
    } else {
        Some(7 - mask.leading_zeros() as usize)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_highest_set_bit() {
        assert_eq!(highest(0), None);
        for c in 0..8 {
            assert_eq!(highest(1 << c), Some(c));
            assert_eq!(highest((1u16 << c) as u8 | 1), Some(c));
        }
        assert_eq!(highest(0b1010_0000), Some(7));
        assert_eq!(highest(0b0010_0110), Some(5));
    }
}
