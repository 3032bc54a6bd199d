//! Token-bucket shapers (per port, per queue, per HQoS group and pipe).
//!
//! **Units.** A rate is in bits per second (`rate_bps`), a burst in bytes, time in nanoseconds
//! passed in as `now_ns`. The bucket counts *credit units* of 1/(8·10⁹) byte, so that `dt` ns at
//! `rate_bps` add exactly `dt × rate_bps` units and a packet of `len` bytes costs
//! `len × 8·10⁹` units: no division and no rounding on the packet path, and the shaped rate is
//! exact (the 1 % test is a check on the arithmetic, not a tolerance it needs).
//!
//! ```text
//!   tokens ──(+ dt·rate_bps, capped at burst·8e9)──▶ tokens      refill: once per `now_ns`
//!   head packet of L bytes may leave  ⇔  tokens ≥ L·8e9           conforms
//!   it leaves:  tokens −= L·8e9                                    consume
//!   next eligible:  last_ns + ⌈(L·8e9 − tokens) / rate_bps⌉        ready_ns (control path)
//! ```
//!
//! Elapsed time is capped at the time that fills an empty bucket (`fill_ns`), so an idle gap of
//! any length cannot overflow. With [`MAX_BURST_BYTES`] = 2³⁰ the cap is below 2⁶³. A bucket
//! starts full. Time that goes backwards adds no tokens. A shaper never drops; the traffic
//! manager refuses at enqueue a packet longer than a burst on its path (`TmDrop::Shaper`),
//! because such a packet would never conform and would block its queue for ever.

use crate::config::Problem;

/// Credit units per byte: 8 bits × 10⁹ ns/s.
pub const UNITS_PER_BYTE: u64 = 8_000_000_000;
/// Highest rate accepted, bits per second (1.6 Tbit/s).
pub const MAX_RATE_BPS: u64 = 1_600_000_000_000;
/// Largest burst accepted, bytes (1 GiB): keeps the bucket below 2⁶³ units.
pub const MAX_BURST_BYTES: u64 = 1 << 30;

/// A shaper: sustained rate and bucket size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShaperConfig {
    /// Sustained rate, bits per second (1..=[`MAX_RATE_BPS`]).
    pub rate_bps: u64,
    /// Bucket size, bytes (1..=[`MAX_BURST_BYTES`]); also the longest packet that can pass.
    pub burst_bytes: u64,
}

impl ShaperConfig {
    /// A shaper at `rate_bps` with a `burst_bytes` bucket.
    pub const fn new(rate_bps: u64, burst_bytes: u64) -> ShaperConfig {
        ShaperConfig { rate_bps, burst_bytes }
    }

    /// Checks the ranges.
    ///
    /// # Errors
    /// The first value out of range, named.
    pub fn validate(&self) -> Result<(), Problem> {
        if self.rate_bps == 0 {
            return Err(Problem::RateZero);
        }
        if self.rate_bps > MAX_RATE_BPS {
            return Err(Problem::RateTooHigh(self.rate_bps));
        }
        if self.burst_bytes == 0 {
            return Err(Problem::BurstZero);
        }
        if self.burst_bytes > MAX_BURST_BYTES {
            return Err(Problem::BurstTooLarge(self.burst_bytes));
        }
        Ok(())
    }
}

/// A validated shaper's constants, shared by every bucket that uses it (e.g. a pipe profile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShaperParams {
    rate_bps: u64,
    cap: u64,
    fill_ns: u64,
    burst_bytes: u32,
}

impl ShaperParams {
    /// Constants for a validated `cfg` (see [`ShaperConfig::validate`]; out-of-range values are
    /// clamped into range here).
    pub fn new(cfg: &ShaperConfig) -> ShaperParams {
        let rate_bps = cfg.rate_bps.clamp(1, MAX_RATE_BPS);
        let burst = cfg.burst_bytes.clamp(1, MAX_BURST_BYTES);
        let cap = burst * UNITS_PER_BYTE;
        ShaperParams { rate_bps, cap, fill_ns: cap.div_ceil(rate_bps), burst_bytes: burst as u32 }
    }

    /// The rate, bits per second.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// The burst, bytes: the longest packet that can ever conform.
    #[inline]
    pub fn burst_bytes(&self) -> u32 {
        self.burst_bytes
    }
}

/// One token bucket's state: 16 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenBucket {
    tokens: u64,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket at time 0.
    pub fn full(p: &ShaperParams) -> TokenBucket {
        TokenBucket { tokens: p.cap, last_ns: 0 }
    }

    /// Adds the credit earned since the last refill. Idempotent for one `now_ns`; worker only;
    /// never panics. No sum overflows: the tokens are at most the cap (below 2⁶³, see the
    /// module doc) and `dt · rate_bps` at most the cap plus one rate, so their sum stays below
    /// 2⁶⁴ and is not saturated.
    #[inline]
    pub fn refill(&mut self, p: &ShaperParams, now_ns: u64) {
        if now_ns > self.last_ns {
            let dt = (now_ns - self.last_ns).min(p.fill_ns);
            self.tokens = (self.tokens + dt * p.rate_bps).min(p.cap);
            self.last_ns = now_ns;
        }
    }

    /// True when a packet of `len_bytes` may leave now (after [`refill`](Self::refill)).
    #[inline]
    pub fn conforms(&self, len_bytes: u32) -> bool {
        self.tokens >= u64::from(len_bytes) * UNITS_PER_BYTE
    }

    /// Takes the credit of a packet of `len_bytes` (saturating at empty).
    #[inline]
    pub fn consume(&mut self, len_bytes: u32) {
        self.tokens = self.tokens.saturating_sub(u64::from(len_bytes) * UNITS_PER_BYTE);
    }

    /// Gives back the credit of a packet of `len_bytes` that [`consume`](Self::consume) took
    /// from a bucket it conformed to, with no refill between (so the sum is exact).
    #[inline]
    pub fn refund(&mut self, len_bytes: u32) {
        self.tokens += u64::from(len_bytes) * UNITS_PER_BYTE;
    }

    /// Earliest time at which a packet of `len_bytes` conforms, assuming no refill happened
    /// since the last one; at most the last refill time when it conforms already. Control path
    /// (one division).
    pub fn ready_ns(&self, p: &ShaperParams, len_bytes: u32) -> u64 {
        let need = u64::from(len_bytes) * UNITS_PER_BYTE;
        if self.tokens >= need {
            self.last_ns
        } else {
            self.last_ns.saturating_add((need - self.tokens).div_ceil(p.rate_bps))
        }
    }

    /// Credit held now, in whole bytes (for tests and `show`).
    pub fn tokens_bytes(&self) -> u64 {
        self.tokens / UNITS_PER_BYTE
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn validate_names_the_bad_value() {
        assert_eq!(ShaperConfig::new(0, 1).validate(), Err(Problem::RateZero));
        assert_eq!(ShaperConfig::new(MAX_RATE_BPS + 1, 1).validate(), Err(Problem::RateTooHigh(MAX_RATE_BPS + 1)));
        assert_eq!(ShaperConfig::new(1, 0).validate(), Err(Problem::BurstZero));
        assert_eq!(ShaperConfig::new(1, MAX_BURST_BYTES + 1).validate(), Err(Problem::BurstTooLarge(MAX_BURST_BYTES + 1)));
        assert_eq!(ShaperConfig::new(MAX_RATE_BPS, MAX_BURST_BYTES).validate(), Ok(()));
    }

    /// A saturated shaper at 100 Mbit/s, polled every 10 µs for 10 simulated seconds with
    /// 1500-byte packets, passes 100 Mbit/s within 1 % (exactly, give or take a burst).
    #[test]
    fn rate_within_one_percent_over_simulated_seconds() {
        for &(rate, burst) in &[(100_000_000u64, 3000u64), (1_000_000_000, 15_000), (2_500_000, 1500), (40_000_000_000, 64_000)] {
            let p = ShaperParams::new(&ShaperConfig::new(rate, burst));
            let mut tb = TokenBucket::full(&p);
            let mut sent_bytes = 0u64;
            let end_ns = 10_000_000_000u64;
            let mut now = 0;
            while now <= end_ns {
                tb.refill(&p, now);
                while tb.conforms(1500) {
                    tb.consume(1500);
                    sent_bytes += 1500;
                }
                now += 10_000;
            }
            let expect = (rate / 8) as f64 * 10.0;
            let err = (sent_bytes as f64 - expect).abs() / expect;
            assert!(err < 0.01, "rate {rate}: sent {sent_bytes} expected {expect} err {err}");
            assert!(sent_bytes as f64 <= expect + burst as f64);
        }
    }

    #[test]
    fn ready_ns_is_when_it_conforms() {
        let p = ShaperParams::new(&ShaperConfig::new(8_000_000, 1000)); // 1 byte/µs
        let mut tb = TokenBucket::full(&p);
        tb.refill(&p, 5_000);
        tb.consume(1000);
        assert!(!tb.conforms(100));
        let t = tb.ready_ns(&p, 100);
        assert_eq!(t, 5_000 + 100_000);
        tb.refill(&p, t - 1);
        assert!(!tb.conforms(100));
        tb.refill(&p, t);
        assert!(tb.conforms(100));
        // Idle for an hour: the bucket is just full, no overflow.
        tb.refill(&p, 3_600_000_000_000);
        assert_eq!(tb.tokens_bytes(), 1000);
        // Time going backwards adds nothing.
        tb.consume(1000);
        tb.refill(&p, 1);
        assert_eq!(tb.tokens_bytes(), 0);
    }
}
