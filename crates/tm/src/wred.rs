//! WRED (Floyd and Jacobson 1993) with ECN marking (RFC 3168), and the CE write itself.
//!
//! At each enqueue the queue's average length is updated as rte_sched/rte_red do, an EWMA with
//! weight w = 2^−n of the instantaneous length in bytes, kept in fixed point (16 fraction bits):
//!
//! ```text
//!   avg ← avg + (q − avg) · 2^−n
//!
//!   drop/mark probability
//!     1 ┤                         ┌──────── avg ≥ max: drop (ECT or not)
//!  maxp ┤                   ╱     │
//!       │             ╱           │         min ≤ avg < max: with probability
//!     0 ┼───────────┴─────────────┴──▶ avg     p = maxp · (avg − min) / (max − min)
//!                  min           max          ECT(0)/ECT(1)/CE: mark CE; Not-ECT: drop
//! ```
//!
//! RFC 3168 §5: "If the packet has the ECT(0) or ECT(1) codepoint set in the IP header … the
//! router MAY set the CE codepoint in the packet's IP header instead of dropping it"; above the
//! max threshold the queue is out of control and every packet is dropped (§7: "routers should
//! drop rather than mark packets" when the queue "is persistently above the maximum").
//!
//! p is computed without a division: `p · 2³² = (avg − min) · k >> 16` with
//! `k = 2⁴⁸ / (maxp⁻¹ · (max − min))` precomputed, and compared with a 32-bit draw of a xorshift
//! generator seeded by the config ([`Rng`]), so runs are reproducible. The draw is made only
//! between the thresholds. Not modelled: RED's `count` since the last drop (the probability is
//! the plain linear one the issue asks for), and rte_red's decay of the average over idle time.

use crate::config::Problem;
use fastpath_packet::csum;

/// WRED for one class. Thresholds apply to the EWMA of the queue length, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WredConfig {
    /// Below this average nothing is dropped or marked, bytes.
    pub min_bytes: u64,
    /// At or above this average everything is dropped, bytes (≥ `min_bytes`).
    pub max_bytes: u64,
    /// 1/maxp: the probability just below `max_bytes` is 1/`maxp_inv` (≥ 1).
    pub maxp_inv: u32,
    /// EWMA weight 2^−`weight_log2` (1..=16).
    pub weight_log2: u8,
    /// Mark CE on ECN-capable packets instead of dropping them (between the thresholds).
    pub ecn: bool,
}

impl Default for WredConfig {
    /// rte_sched's defaults for a 64 KiB queue: min ¼, max ½, maxp 1/10, weight 2^−9, ECN on.
    fn default() -> WredConfig {
        WredConfig::rte_sched_default(64 << 10)
    }
}

impl WredConfig {
    /// DPDK rte_sched's RED defaults for a queue of `queue_bytes`: min ¼ of the queue, max ½,
    /// maxp 1/10, weight 2^−9; ECN marking on.
    pub fn rte_sched_default(queue_bytes: u64) -> WredConfig {
        WredConfig { min_bytes: queue_bytes / 4, max_bytes: queue_bytes / 2, maxp_inv: 10, weight_log2: 9, ecn: true }
    }

    /// Checks thresholds, maxp and weight.
    ///
    /// # Errors
    /// The first bad value.
    pub fn validate(&self) -> Result<(), Problem> {
        if self.min_bytes > self.max_bytes {
            return Err(Problem::WredMinAboveMax { min: self.min_bytes, max: self.max_bytes });
        }
        if self.maxp_inv == 0 {
            return Err(Problem::WredMaxpInvZero);
        }
        if !(1..=16).contains(&self.weight_log2) {
            return Err(Problem::WredWeightOutOfRange(self.weight_log2));
        }
        Ok(())
    }
}

/// What WRED says about one arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedAction {
    /// Enqueue it.
    Pass,
    /// Enqueue it and set CE.
    Mark,
    /// Drop it.
    Drop,
}

/// Fixed-point fraction bits of the average.
const AVG_FRAC: u32 = 16;
/// Largest average kept (bytes), so `q << 16` fits.
const AVG_MAX_BYTES: u64 = 1 << 46;

/// A validated WRED config's constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WredParams {
    min: u64,
    max: u64,
    k: u64,
    wq_log2: u32,
    ecn: bool,
}

impl WredParams {
    /// Constants for a validated config.
    pub fn new(c: &WredConfig) -> WredParams {
        let min = c.min_bytes.min(AVG_MAX_BYTES);
        let max = c.max_bytes.clamp(min, AVG_MAX_BYTES);
        let span = u128::from(max - min).max(1) * u128::from(c.maxp_inv.max(1));
        let k = u64::try_from((1u128 << 48) / span).unwrap_or(u64::MAX);
        WredParams { min, max, k, wq_log2: u32::from(c.weight_log2.clamp(1, 16)), ecn: c.ecn }
    }

    /// Updates the average `avg_fp` (fixed point, 16 fraction bits) with the queue length
    /// `q_bytes` and decides for a packet whose ECN field is `ecn` (RFC 3168 codepoint). Worker
    /// only; never panics; draws from `rng` only between the thresholds.
    #[inline]
    pub fn decide(&self, avg_fp: &mut u64, q_bytes: u64, ecn: u8, rng: &mut Rng) -> RedAction {
        let q = (q_bytes.min(AVG_MAX_BYTES) << AVG_FRAC) as i64;
        let a = *avg_fp as i64;
        let a = a + ((q - a) >> self.wq_log2);
        *avg_fp = a as u64;
        let avg = (a as u64) >> AVG_FRAC;
        if avg < self.min {
            return RedAction::Pass;
        }
        if avg >= self.max {
            return RedAction::Drop;
        }
        let p32 = (u128::from(avg - self.min) * u128::from(self.k)) >> 16;
        if u128::from(rng.next_u32()) >= p32 {
            RedAction::Pass
        } else if self.ecn && ecn & ECN_MASK != NOT_ECT {
            RedAction::Mark
        } else {
            RedAction::Drop
        }
    }

    /// The average in whole bytes, from its fixed-point form.
    pub fn avg_bytes(avg_fp: u64) -> u64 {
        avg_fp >> AVG_FRAC
    }
}

/// A xorshift64* generator (Marsaglia 2003; Vigna 2016): small, fast, deterministic per seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced by a fixed odd constant: xorshift never leaves 0).
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 { 0x9e37_79b9_7f4a_7c15 } else { seed })
    }

    /// The next 64-bit value.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The next 32-bit value (the high half, the better bits of xorshift64*).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
}

/// The two ECN bits (RFC 3168 §5) in the IPv4 TOS / IPv6 traffic-class byte.
pub const ECN_MASK: u8 = 0b11;
/// Not-ECT: not ECN-capable.
pub const NOT_ECT: u8 = 0b00;
/// ECT(1).
pub const ECT1: u8 = 0b01;
/// ECT(0).
pub const ECT0: u8 = 0b10;
/// CE: congestion experienced.
pub const CE: u8 = 0b11;

/// The ECN codepoint of the IPv4 or IPv6 header at `l3_off` of `frame` (by its version nibble),
/// or [`NOT_ECT`] when there is no such header. Never panics.
#[inline]
pub fn ecn_of(frame: &[u8], l3_off: usize) -> u8 {
    match (frame.get(l3_off), frame.get(l3_off + 1)) {
        (Some(&b0), Some(&b1)) if b0 >> 4 == 4 => b1 & ECN_MASK,
        (Some(&b0), Some(&b1)) if b0 >> 4 == 6 => (b1 >> 4) & ECN_MASK,
        _ => NOT_ECT,
    }
}

/// Sets CE in the IPv4 or IPv6 header at `l3_off` of `frame` if the packet is ECN-capable
/// (ECT(0), ECT(1), or already CE), fixing the IPv4 header checksum incrementally
/// (RFC 1624 eqn. 3 over the version/IHL + TOS word). Returns true when the packet was
/// ECN-capable (it now carries CE); false, and the frame untouched, for Not-ECT, a version
/// other than 4 or 6, or a header cut short (IPv4 needs 12 bytes, IPv6 2). Worker only; never
/// panics.
///
/// RFC 3168 §5: "Routers treat the ECT(0) and ECT(1) codepoints as equivalent"; a CE packet is
/// left as it is.
pub fn mark_ce(frame: &mut [u8], l3_off: usize) -> bool {
    let Some(h) = frame.get_mut(l3_off..) else { return false };
    match h.first().map(|b| b >> 4) {
        Some(4) if h.len() >= 12 => {
            let ecn = h[1] & ECN_MASK;
            if ecn == NOT_ECT {
                return false;
            }
            if ecn != CE {
                let old = u16::from_be_bytes([h[0], h[1]]);
                h[1] |= CE;
                let new = u16::from_be_bytes([h[0], h[1]]);
                let c = csum::update16(u16::from_be_bytes([h[10], h[11]]), old, new);
                h[10..12].copy_from_slice(&c.to_be_bytes());
            }
            true
        }
        Some(6) if h.len() >= 2 => {
            // Version(4) | Traffic Class(8) | Flow Label(20): the ECN bits are bits 4-5 of byte 1.
            if (h[1] >> 4) & ECN_MASK == NOT_ECT {
                return false;
            }
            h[1] |= CE << 4;
            true
        }
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::Rng;
    use super::*;
    use proptest::prelude::{any, prop_assert_eq, proptest};

    fn params(min: u64, max: u64, maxp_inv: u32, ecn: bool) -> WredParams {
        WredParams::new(&WredConfig { min_bytes: min, max_bytes: max, maxp_inv, weight_log2: 1, ecn })
    }

    /// Drives the average to exactly `avg` (weight 1/2 converges in ~50 steps from below).
    fn settle(p: &WredParams, avg: u64) -> u64 {
        let mut a = avg << AVG_FRAC;
        let mut rng = Rng::new(1);
        p.decide(&mut a, avg, NOT_ECT, &mut rng);
        a
    }

    #[test]
    fn below_min_passes_above_max_drops_even_ect() {
        let p = params(1000, 2000, 10, true);
        let mut rng = Rng::new(7);
        for _ in 0..1000 {
            let mut a = settle(&p, 999);
            assert_eq!(p.decide(&mut a, 999, ECT0, &mut rng), RedAction::Pass);
            let mut a = settle(&p, 2000);
            assert_eq!(p.decide(&mut a, 2000, ECT0, &mut rng), RedAction::Drop);
            assert_eq!(p.decide(&mut a, 5000, CE, &mut rng), RedAction::Drop);
        }
    }

    /// Between the thresholds the action rate follows maxp·(avg−min)/(max−min); ECT packets
    /// are marked where Not-ECT ones are dropped, with the same draws.
    #[test]
    fn probability_is_linear_between_thresholds_and_ect_is_marked() {
        let p = params(10_000, 20_000, 4, true);
        for &(avg, expect) in &[(12_500u64, 0.0625f64), (15_000, 0.125), (19_999, 0.25)] {
            let n = 200_000;
            let (mut r1, mut r2) = (Rng::new(99), Rng::new(99));
            let (mut drops, mut marks) = (0, 0);
            for _ in 0..n {
                let mut a = avg << AVG_FRAC;
                match p.decide(&mut a, avg, NOT_ECT, &mut r1) {
                    RedAction::Drop => drops += 1,
                    RedAction::Mark => panic!("Not-ECT marked"),
                    RedAction::Pass => {}
                }
                let mut a = avg << AVG_FRAC;
                match p.decide(&mut a, avg, ECT1, &mut r2) {
                    RedAction::Mark => marks += 1,
                    RedAction::Drop => panic!("ECT dropped between the thresholds"),
                    RedAction::Pass => {}
                }
            }
            assert_eq!(drops, marks, "same draws, same decisions");
            let rate = f64::from(drops) / f64::from(n);
            assert!((rate - expect).abs() < 0.005, "avg {avg}: rate {rate} expected {expect}");
        }
        // ECN off: ECT packets are dropped too.
        let p = params(10_000, 20_000, 1, false);
        let mut a = 19_999 << AVG_FRAC;
        let mut rng = Rng::new(3);
        assert_eq!(p.decide(&mut a, 19_999, ECT0, &mut rng), RedAction::Drop);
    }

    #[test]
    fn ewma_weight_is_a_shift() {
        let p = WredParams::new(&WredConfig { weight_log2: 9, ..WredConfig::rte_sched_default(1 << 30) });
        let mut a = 0;
        let mut rng = Rng::new(1);
        p.decide(&mut a, 512, NOT_ECT, &mut rng);
        assert_eq!(a, 1 << AVG_FRAC); // 512 / 512 = 1 byte
        for _ in 0..20_000 {
            p.decide(&mut a, 512, NOT_ECT, &mut rng);
        }
        assert!(WredParams::avg_bytes(a) >= 511);
    }

    /// IPv4 header 4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7 (the checksum worked
    /// example also used in packet::csum), with TOS changed to ECT(0).
    #[test]
    fn ipv4_mark_fixes_checksum() {
        let mut h: [u8; 20] =
            [0x45, 0x02, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7];
        let c = csum::ipv4_header(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let mut f = [0u8; 14].to_vec();
        f.extend_from_slice(&h);
        assert_eq!(ecn_of(&f, 14), ECT0);
        assert!(mark_ce(&mut f, 14));
        assert_eq!(ecn_of(&f, 14), CE);
        assert!(csum::ipv4_header_ok(&f[14..34]));
        assert!(mark_ce(&mut f, 14), "CE stays CE and counts as ECN-capable");
        assert!(csum::ipv4_header_ok(&f[14..34]));
        // Not-ECT: untouched.
        f[15] = 0xb8;
        let before = f.clone();
        assert!(!mark_ce(&mut f, 14));
        assert_eq!(f, before);
        // Truncated, wrong version, offset past the end: false, no panic.
        assert!(!mark_ce(&mut f[..20], 14));
        assert!(!mark_ce(&mut f, 100));
        f[14] = 0x55;
        assert!(!mark_ce(&mut f, 14));
    }

    #[test]
    fn ipv6_mark_sets_traffic_class_ecn_bits() {
        // 6 | TC 0x01 (DSCP 0, ECT(1)) | flow 0x12345
        let mut h = [0x60, 0x11, 0x23, 0x45, 0, 8, 17, 64];
        assert_eq!(ecn_of(&h, 0), ECT1);
        assert!(mark_ce(&mut h, 0));
        assert_eq!(h[..4], [0x60, 0x31, 0x23, 0x45]);
        assert_eq!(ecn_of(&h, 0), CE);
        let mut n = [0x6e, 0x01, 0, 0];
        assert!(!mark_ce(&mut n, 0), "TC 0xe0: Not-ECT");
        assert_eq!(n, [0x6e, 0x01, 0, 0]);
    }

    proptest! {
        /// After a CE mark the incremental IPv4 checksum equals a full recomputation, for any
        /// header (options included) with a valid checksum.
        #[test]
        fn ipv4_checksum_after_mark_equals_full(
            mut h in proptest::collection::vec(any::<u8>(), 20..=60), ihl in 5u8..=15, ecn in 0u8..4,
        ) {
            let ihl = ihl.min((h.len() / 4) as u8);
            h.truncate(usize::from(ihl) * 4);
            h[0] = 0x40 | ihl;
            h[1] = (h[1] & !ECN_MASK) | ecn;
            h[10] = 0; h[11] = 0;
            let c = csum::ipv4_header(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            let was = mark_ce(&mut h, 0);
            prop_assert_eq!(was, ecn != NOT_ECT);
            prop_assert_eq!(h[1] & ECN_MASK, if was { CE } else { NOT_ECT });
            prop_assert_eq!(u16::from_be_bytes([h[10], h[11]]), csum::ipv4_header(&h));
        }
    }
}
