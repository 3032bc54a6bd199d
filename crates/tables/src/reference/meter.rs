//! Reference twin of `meter`: RFC 2697 and RFC 2698 read literally.
//!
//! Each bucket is "incremented by one CIR times per second" (RFC 2697 §3.1): the n-th token
//! arrives at the instant `n / CIR` seconds, i.e. it has arrived by `t` ns when
//! `n * 10⁹ <= t * CIR`. At each packet we count, in exact `u128` arithmetic from time 0, how
//! many tokens have arrived in total, and hand over the new ones **one at a time** with the
//! RFC's rule ("if Tc < CBS, Tc is incremented by one, else if Te < EBS, Te is incremented by
//! one, else neither"). Then the RFC's colour decision is applied as written. The loop stops
//! handing over tokens once every bucket is full, since further tokens change nothing. Slow
//! (one step per token); tests only.

use crate::meter::{Color, ColorMode, SrTcmConfig, TrTcmConfig};

/// Tokens that have arrived in `[0, t_ns]` at `rate` per second.
fn arrived(t_ns: u64, rate: u64) -> u128 {
    u128::from(t_ns) * u128::from(rate) / 1_000_000_000
}

/// Literal RFC 2697 single-rate three-colour marker.
#[derive(Clone, Debug)]
pub struct RefSrTcm {
    cfg: SrTcmConfig,
    tc: u64,
    te: u64,
    given: u128,
    last_ns: u64,
}

impl RefSrTcm {
    /// Both buckets full at time 0 (RFC 2697 §3.1).
    pub fn new(cfg: SrTcmConfig) -> Self {
        RefSrTcm { cfg, tc: cfg.cbs_bytes, te: cfg.ebs_bytes, given: 0, last_ns: 0 }
    }

    /// Current (Tc, Te).
    pub fn tokens(&self) -> (u64, u64) {
        (self.tc, self.te)
    }

    /// Colours a packet of `len` bytes at `now_ns`.
    pub fn mark(&mut self, now_ns: u64, len: u32, in_color: Color) -> Color {
        if now_ns > self.last_ns {
            self.last_ns = now_ns;
            let total = arrived(now_ns, self.cfg.cir_bytes_per_s);
            while self.given < total {
                self.given += 1;
                if self.tc < self.cfg.cbs_bytes {
                    self.tc += 1;
                } else if self.te < self.cfg.ebs_bytes {
                    self.te += 1;
                } else {
                    self.given = total; // both full: the remaining tokens are discarded
                }
            }
        }
        let b = i128::from(len);
        let (tc, te) = (i128::from(self.tc), i128::from(self.te));
        let aware = self.cfg.mode == ColorMode::Aware;
        // RFC 2697 §3.2 (blind) and §3.3 (aware), in the RFC's own form "Tc(t)-B >= 0".
        if (!aware || in_color == Color::Green) && tc - b >= 0 {
            self.tc -= u64::from(len);
            Color::Green
        } else if (!aware || in_color != Color::Red) && te - b >= 0 {
            self.te -= u64::from(len);
            Color::Yellow
        } else {
            Color::Red
        }
    }
}

/// Literal RFC 2698 two-rate three-colour marker.
#[derive(Clone, Debug)]
pub struct RefTrTcm {
    cfg: TrTcmConfig,
    tp: u64,
    tc: u64,
    given_p: u128,
    given_c: u128,
    last_ns: u64,
}

impl RefTrTcm {
    /// Both buckets full at time 0 (RFC 2698 §3.1).
    pub fn new(cfg: TrTcmConfig) -> Self {
        RefTrTcm { cfg, tp: cfg.pbs_bytes, tc: cfg.cbs_bytes, given_p: 0, given_c: 0, last_ns: 0 }
    }

    /// Current (Tp, Tc).
    pub fn tokens(&self) -> (u64, u64) {
        (self.tp, self.tc)
    }

    /// Colours a packet of `len` bytes at `now_ns`.
    pub fn mark(&mut self, now_ns: u64, len: u32, in_color: Color) -> Color {
        if now_ns > self.last_ns {
            self.last_ns = now_ns;
            // "The token count Tp is incremented by one PIR times per second up to PBS and the
            // token count Tc is incremented by one CIR times per second up to CBS."
            let total_p = arrived(now_ns, self.cfg.pir_bytes_per_s);
            while self.given_p < total_p {
                self.given_p += 1;
                if self.tp < self.cfg.pbs_bytes {
                    self.tp += 1;
                } else {
                    self.given_p = total_p;
                }
            }
            let total_c = arrived(now_ns, self.cfg.cir_bytes_per_s);
            while self.given_c < total_c {
                self.given_c += 1;
                if self.tc < self.cfg.cbs_bytes {
                    self.tc += 1;
                } else {
                    self.given_c = total_c;
                }
            }
        }
        let b = i128::from(len);
        let (tp, tc) = (i128::from(self.tp), i128::from(self.tc));
        let aware = self.cfg.mode == ColorMode::Aware;
        // RFC 2698 §3.2 (blind) and §3.3 (aware).
        if (aware && in_color == Color::Red) || tp - b < 0 {
            Color::Red
        } else if (aware && in_color == Color::Yellow) || tc - b < 0 {
            self.tp -= u64::from(len);
            Color::Yellow
        } else {
            self.tp -= u64::from(len);
            self.tc -= u64::from(len);
            Color::Green
        }
    }
}
