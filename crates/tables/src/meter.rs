//! Three-colour meters: RFC 2697 srTCM and RFC 2698 trTCM, colour-blind and colour-aware.
//!
//! **Units.** Rates are in *bytes per second* (RFC 2697 §1: "CIR is measured in bytes of IP
//! packets per second"), bursts and packet lengths in bytes, time in nanoseconds passed in by the
//! caller as `now_ns` (meters never read a clock).
//!
//! **Model.** The RFCs define each bucket as a counter "incremented by one CIR times per second"
//! up to its size. We keep that discrete model exactly, in integers: besides the whole tokens of
//! each bucket we keep `frac`, the progress towards the next token in units of 1/10⁹ token
//! (a token arrives every 10⁹/CIR ns). Buckets are refilled lazily when a packet arrives:
//!
//! ```text
//!   frac + elapsed_ns * CIR  =  k * 10^9 + frac'      k = tokens that arrived since last packet
//!   srTCM: Tc += k up to CBS, the overflow goes to Te up to EBS (RFC 2697 §3.1)
//!   trTCM: Tp += kp up to PBS;  Tc += kc up to CBS               (RFC 2698 §3.1)
//! ```
//!
//! `elapsed_ns * CIR` is split as `(elapsed / 10⁹) * CIR * 10⁹ + (elapsed % 10⁹) * CIR`, so no
//! product exceeds `10⁹ * MAX_RATE_BYTES_PER_S < 2⁶⁴`, and whole seconds are added with a
//! saturating multiply: an idle gap of any length cannot overflow (the buckets are simply full).
//! The token sequence is therefore identical to the RFCs' one-token-at-a-time definition, which
//! `reference::meter` implements literally and the tests compare against. Tokens arrive on the
//! grid `k * 10⁹ / CIR` ns counted from `now_ns = 0`; buckets start full (RFC 2697 §3.1). Time
//! that goes backwards adds no tokens.
//!
//! A [`MeterArray`] holds many meters by index (e.g. "1,000 policers") with a batch form.

/// A packet colour. `repr(u8)`: Green = 0, Yellow = 1, Red = 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Color {
    /// Conforms to CIR / CBS.
    Green = 0,
    /// Exceeds CBS but not EBS (srTCM), or exceeds CIR but not PIR (trTCM).
    Yellow = 1,
    /// Exceeds EBS (srTCM) or PIR (trTCM).
    Red = 2,
}

impl Color {
    /// The colour with this `u8` value (3..=255 are treated as Red).
    #[inline]
    pub fn from_u8(v: u8) -> Color {
        match v {
            0 => Color::Green,
            1 => Color::Yellow,
            _ => Color::Red,
        }
    }
}

/// Whether a meter looks at the colour a packet already carries (RFC 2697 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ColorMode {
    /// The incoming colour is ignored (treated as Green).
    #[default]
    Blind,
    /// A pre-coloured packet is never re-marked to a better colour.
    Aware,
}

/// Highest rate accepted, in bytes per second (1.6·10¹⁰ B/s = 128 Gbit/s): keeps
/// `10⁹ * rate` below 2⁶⁴.
pub const MAX_RATE_BYTES_PER_S: u64 = 16_000_000_000;
/// Largest bucket accepted, in bytes (2⁴⁰ ≈ 1.1 TB).
pub const MAX_BURST_BYTES: u64 = 1 << 40;

const NS_PER_S: u64 = 1_000_000_000;

/// RFC 2697 single-rate three-colour marker parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrTcmConfig {
    /// Committed information rate, bytes per second.
    pub cir_bytes_per_s: u64,
    /// Committed burst size, bytes.
    pub cbs_bytes: u64,
    /// Excess burst size, bytes.
    pub ebs_bytes: u64,
    /// Colour-blind or colour-aware.
    pub mode: ColorMode,
}

/// RFC 2698 two-rate three-colour marker parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrTcmConfig {
    /// Committed information rate, bytes per second.
    pub cir_bytes_per_s: u64,
    /// Committed burst size, bytes.
    pub cbs_bytes: u64,
    /// Peak information rate, bytes per second (≥ CIR).
    pub pir_bytes_per_s: u64,
    /// Peak burst size, bytes.
    pub pbs_bytes: u64,
    /// Colour-blind or colour-aware.
    pub mode: ColorMode,
}

/// Why a meter configuration was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeterError {
    /// A rate is above [`MAX_RATE_BYTES_PER_S`].
    RateTooHigh,
    /// A burst is above [`MAX_BURST_BYTES`].
    BurstTooLarge,
    /// RFC 2697 §2: "at least one of [CBS, EBS] MUST be larger than 0".
    BothBurstsZero,
    /// RFC 2698 §2: "The PIR MUST be equal to or greater than the CIR."
    PirBelowCir,
}

impl std::fmt::Display for MeterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MeterError::RateTooHigh => "rate above 16e9 bytes/s",
            MeterError::BurstTooLarge => "burst above 2^40 bytes",
            MeterError::BothBurstsZero => "CBS and EBS are both 0",
            MeterError::PirBelowCir => "PIR is below CIR",
        })
    }
}

impl std::error::Error for MeterError {}

/// Common interface of the two markers, for [`MeterArray`].
pub trait Meter {
    /// Colours a packet of `len_bytes` arriving at `now_ns`; `in_color` is used in colour-aware
    /// mode only. Worker only; never panics, never allocates.
    fn mark(&mut self, now_ns: u64, len_bytes: u32, in_color: Color) -> Color;
}

/// A token generator at `rate` tokens/s on the 10⁹/rate ns grid: returns how many tokens arrived
/// since the last call and advances `frac` and `last_ns`.
#[derive(Clone, Copy, Debug)]
struct Clock {
    last_ns: u64,
    frac: u64,
}

impl Clock {
    #[inline]
    fn tokens(&mut self, now_ns: u64, rate: u64) -> u64 {
        let Some(elapsed) = now_ns.checked_sub(self.last_ns) else {
            return 0;
        };
        if elapsed == 0 {
            // Another packet of the same batch (one clock reading per batch): nothing to add.
            return 0;
        }
        self.last_ns = now_ns;
        // Under a second since the last packet (the steady state): no whole seconds to
        // split off, one division instead of two.
        let (secs, sub) = if elapsed < NS_PER_S { (0, elapsed) } else { (elapsed / NS_PER_S, elapsed % NS_PER_S) };
        // frac < 1e9 and sub * rate < 1e9 * 1.6e10: the sum fits in u64.
        let acc = self.frac + sub * rate;
        self.frac = acc % NS_PER_S;
        let k = acc / NS_PER_S;
        if secs == 0 {
            k
        } else {
            k.saturating_add(secs.saturating_mul(rate))
        }
    }
}

/// Adds `k` tokens to a bucket of size `cap`; returns the overflow.
#[inline]
fn fill(bucket: &mut u64, cap: u64, k: u64) -> u64 {
    let room = cap - *bucket;
    if k <= room {
        *bucket += k;
        0
    } else {
        *bucket = cap;
        k - room
    }
}

/// RFC 2697 single-rate three-colour marker.
#[derive(Clone, Debug)]
pub struct SrTcm {
    cfg: SrTcmConfig,
    clock: Clock,
    tc: u64,
    te: u64,
}

impl SrTcm {
    /// A meter with both buckets full, its token grid anchored at `now_ns = 0`.
    /// # Errors
    /// A rate or burst above the limits, or CBS = EBS = 0.
    pub fn new(cfg: SrTcmConfig) -> Result<SrTcm, MeterError> {
        if cfg.cir_bytes_per_s > MAX_RATE_BYTES_PER_S {
            return Err(MeterError::RateTooHigh);
        }
        if cfg.cbs_bytes > MAX_BURST_BYTES || cfg.ebs_bytes > MAX_BURST_BYTES {
            return Err(MeterError::BurstTooLarge);
        }
        if cfg.cbs_bytes == 0 && cfg.ebs_bytes == 0 {
            return Err(MeterError::BothBurstsZero);
        }
        Ok(SrTcm { cfg, clock: Clock { last_ns: 0, frac: 0 }, tc: cfg.cbs_bytes, te: cfg.ebs_bytes })
    }

    /// The configuration.
    pub fn config(&self) -> &SrTcmConfig {
        &self.cfg
    }

    /// Current tokens (Tc, Te) in bytes, as of the last packet.
    pub fn tokens(&self) -> (u64, u64) {
        (self.tc, self.te)
    }

    /// Colours a packet (RFC 2697 §3.2 / §3.3). Worker only; never panics.
    #[inline]
    pub fn mark(&mut self, now_ns: u64, len_bytes: u32, in_color: Color) -> Color {
        let k = self.clock.tokens(now_ns, self.cfg.cir_bytes_per_s);
        if k != 0 {
            let over = fill(&mut self.tc, self.cfg.cbs_bytes, k);
            fill(&mut self.te, self.cfg.ebs_bytes, over);
        }
        let b = u64::from(len_bytes);
        let in_color = match self.cfg.mode {
            ColorMode::Blind => Color::Green,
            ColorMode::Aware => in_color,
        };
        if in_color == Color::Green && self.tc >= b {
            self.tc -= b;
            Color::Green
        } else if in_color != Color::Red && self.te >= b {
            self.te -= b;
            Color::Yellow
        } else {
            Color::Red
        }
    }
}

impl Meter for SrTcm {
    #[inline]
    fn mark(&mut self, now_ns: u64, len_bytes: u32, in_color: Color) -> Color {
        SrTcm::mark(self, now_ns, len_bytes, in_color)
    }
}

/// RFC 2698 two-rate three-colour marker.
#[derive(Clone, Debug)]
pub struct TrTcm {
    cfg: TrTcmConfig,
    pclock: Clock,
    cclock: Clock,
    tp: u64,
    tc: u64,
}

impl TrTcm {
    /// A meter with both buckets full, its token grids anchored at `now_ns = 0`.
    /// # Errors
    /// A rate or burst above the limits, or PIR < CIR.
    pub fn new(cfg: TrTcmConfig) -> Result<TrTcm, MeterError> {
        if cfg.cir_bytes_per_s > MAX_RATE_BYTES_PER_S || cfg.pir_bytes_per_s > MAX_RATE_BYTES_PER_S {
            return Err(MeterError::RateTooHigh);
        }
        if cfg.cbs_bytes > MAX_BURST_BYTES || cfg.pbs_bytes > MAX_BURST_BYTES {
            return Err(MeterError::BurstTooLarge);
        }
        if cfg.pir_bytes_per_s < cfg.cir_bytes_per_s {
            return Err(MeterError::PirBelowCir);
        }
        let clock = Clock { last_ns: 0, frac: 0 };
        Ok(TrTcm { cfg, pclock: clock, cclock: clock, tp: cfg.pbs_bytes, tc: cfg.cbs_bytes })
    }

    /// The configuration.
    pub fn config(&self) -> &TrTcmConfig {
        &self.cfg
    }

    /// Current tokens (Tp, Tc) in bytes, as of the last packet.
    pub fn tokens(&self) -> (u64, u64) {
        (self.tp, self.tc)
    }

    /// Colours a packet (RFC 2698 §3.2 / §3.3). Worker only; never panics.
    #[inline]
    pub fn mark(&mut self, now_ns: u64, len_bytes: u32, in_color: Color) -> Color {
        let kp = self.pclock.tokens(now_ns, self.cfg.pir_bytes_per_s);
        fill(&mut self.tp, self.cfg.pbs_bytes, kp);
        let kc = self.cclock.tokens(now_ns, self.cfg.cir_bytes_per_s);
        fill(&mut self.tc, self.cfg.cbs_bytes, kc);
        let b = u64::from(len_bytes);
        let in_color = match self.cfg.mode {
            ColorMode::Blind => Color::Green,
            ColorMode::Aware => in_color,
        };
        if in_color == Color::Red || self.tp < b {
            Color::Red
        } else if in_color == Color::Yellow || self.tc < b {
            self.tp -= b;
            Color::Yellow
        } else {
            self.tp -= b;
            self.tc -= b;
            Color::Green
        }
    }
}

impl Meter for TrTcm {
    #[inline]
    fn mark(&mut self, now_ns: u64, len_bytes: u32, in_color: Color) -> Color {
        TrTcm::mark(self, now_ns, len_bytes, in_color)
    }
}

/// Many meters addressed by index (one per policer).
#[derive(Clone, Debug)]
pub struct MeterArray<M> {
    meters: Vec<M>,
}

impl<M: Meter> MeterArray<M> {
    /// An array of the given meters; index = position. Control thread only.
    pub fn new(meters: Vec<M>) -> Self {
        MeterArray { meters }
    }

    /// Number of meters.
    pub fn len(&self) -> usize {
        self.meters.len()
    }

    /// True when there are no meters.
    pub fn is_empty(&self) -> bool {
        self.meters.is_empty()
    }

    /// Meter `idx`, if any.
    pub fn get(&self, idx: u32) -> Option<&M> {
        self.meters.get(idx as usize)
    }

    /// Colours one packet with meter `idx`; an unknown index gives Red. Worker only.
    #[inline]
    pub fn mark(&mut self, idx: u32, now_ns: u64, len_bytes: u32, in_color: Color) -> Color {
        match self.meters.get_mut(idx as usize) {
            Some(m) => m.mark(now_ns, len_bytes, in_color),
            None => Color::Red,
        }
    }

    /// Colours `min(idx.len(), len_bytes.len(), colors.len())` packets of one batch, all at
    /// `now_ns`, in order: `colors[i]` holds the incoming colour and receives the result.
    /// Unknown indices give Red. Returns how many were marked. Worker only; never panics.
    pub fn mark_batch(&mut self, now_ns: u64, idx: &[u32], len_bytes: &[u32], colors: &mut [Color]) -> usize {
        let n = idx.len().min(len_bytes.len()).min(colors.len());
        for ((&i, &len), c) in idx.iter().zip(len_bytes).zip(colors.iter_mut()).take(n) {
            *c = self.mark(i, now_ns, len, *c);
        }
        n
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use Color::*;

    fn sr(cir: u64, cbs: u64, ebs: u64, mode: ColorMode) -> SrTcm {
        SrTcm::new(SrTcmConfig { cir_bytes_per_s: cir, cbs_bytes: cbs, ebs_bytes: ebs, mode }).unwrap()
    }
    fn tr(cir: u64, cbs: u64, pir: u64, pbs: u64, mode: ColorMode) -> TrTcm {
        TrTcm::new(TrTcmConfig { cir_bytes_per_s: cir, cbs_bytes: cbs, pir_bytes_per_s: pir, pbs_bytes: pbs, mode }).unwrap()
    }

    #[test]
    fn color_is_u8() {
        assert_eq!(Green as u8, 0);
        assert_eq!(Yellow as u8, 1);
        assert_eq!(Red as u8, 2);
        assert_eq!(Color::from_u8(1), Yellow);
        assert_eq!(Color::from_u8(9), Red);
    }

    #[test]
    fn config_errors() {
        let ok = SrTcmConfig { cir_bytes_per_s: 1, cbs_bytes: 1, ebs_bytes: 0, mode: ColorMode::Blind };
        assert!(SrTcm::new(ok).is_ok());
        assert_eq!(SrTcm::new(SrTcmConfig { cbs_bytes: 0, ..ok }).err(), Some(MeterError::BothBurstsZero));
        assert_eq!(SrTcm::new(SrTcmConfig { cir_bytes_per_s: MAX_RATE_BYTES_PER_S + 1, ..ok }).err(), Some(MeterError::RateTooHigh));
        assert_eq!(SrTcm::new(SrTcmConfig { ebs_bytes: MAX_BURST_BYTES + 1, ..ok }).err(), Some(MeterError::BurstTooLarge));
        let t = TrTcmConfig { cir_bytes_per_s: 10, cbs_bytes: 1, pir_bytes_per_s: 9, pbs_bytes: 1, mode: ColorMode::Blind };
        assert_eq!(TrTcm::new(t).err(), Some(MeterError::PirBelowCir));
    }

    // RFC 2697 §3.2, colour-blind: Tc first, then Te, else red; each bucket debited alone.
    #[test]
    fn srtcm_blind_rules() {
        let mut m = sr(0, 1000, 500, ColorMode::Blind);
        assert_eq!(m.mark(0, 600, Red), Green); // in_color ignored when blind
        assert_eq!(m.tokens(), (400, 500));
        assert_eq!(m.mark(0, 500, Green), Yellow); // Tc 400 < 500, Te 500 >= 500
        assert_eq!(m.tokens(), (400, 0));
        assert_eq!(m.mark(0, 401, Green), Red); // neither
        assert_eq!(m.tokens(), (400, 0));
        assert_eq!(m.mark(0, 400, Green), Green); // exactly Tc
        assert_eq!(m.tokens(), (0, 0));
    }

    // RFC 2697 §3.3, colour-aware: yellow packets never use Tc, red stay red.
    #[test]
    fn srtcm_aware_rules() {
        let mut m = sr(0, 1000, 500, ColorMode::Aware);
        assert_eq!(m.mark(0, 100, Yellow), Yellow);
        assert_eq!(m.tokens(), (1000, 400));
        assert_eq!(m.mark(0, 100, Red), Red);
        assert_eq!(m.tokens(), (1000, 400));
        assert_eq!(m.mark(0, 100, Green), Green);
        assert_eq!(m.mark(0, 950, Green), Red); // Tc 900 < 950 and Te 400 < 950
        assert_eq!(m.mark(0, 300, Green), Green);
        assert_eq!(m.mark(0, 700, Green), Red); // Tc 600, Te 400: both short
        assert_eq!(m.mark(0, 400, Yellow), Yellow);
        assert_eq!(m.tokens(), (600, 0));
    }

    // RFC 2697 §3.1: tokens go to Tc until full, then overflow into Te.
    #[test]
    fn srtcm_refill_overflows_into_te() {
        let mut m = sr(1000, 100, 100, ColorMode::Blind); // 1000 B/s: one token per ms
        assert_eq!(m.mark(0, 100, Green), Green);
        assert_eq!(m.mark(0, 100, Green), Yellow);
        assert_eq!(m.tokens(), (0, 0));
        // 150 ms later: 150 tokens; 100 fill Tc, 50 overflow to Te.
        assert_eq!(m.mark(150_000_000, 1, Red), Green);
        assert_eq!(m.tokens(), (99, 50));
        // 0.999 ms later: no new token yet (grid at 1 ms).
        m.mark(150_999_999, 0, Green);
        assert_eq!(m.tokens(), (99, 50));
        m.mark(151_000_000, 0, Green);
        assert_eq!(m.tokens(), (100, 50));
    }

    // RFC 2698 §3.2 colour-blind.
    #[test]
    fn trtcm_blind_rules() {
        let mut m = tr(0, 500, 0, 1000, ColorMode::Blind);
        assert_eq!(m.mark(0, 400, Red), Green); // both debited
        assert_eq!(m.tokens(), (600, 100));
        assert_eq!(m.mark(0, 200, Green), Yellow); // Tc 100 < 200: yellow, Tp debited
        assert_eq!(m.tokens(), (400, 100));
        assert_eq!(m.mark(0, 401, Green), Red); // Tp < B: red, nothing debited
        assert_eq!(m.tokens(), (400, 100));
    }

    // RFC 2698 §3.3 colour-aware.
    #[test]
    fn trtcm_aware_rules() {
        let mut m = tr(0, 500, 0, 1000, ColorMode::Aware);
        assert_eq!(m.mark(0, 10, Red), Red);
        assert_eq!(m.tokens(), (1000, 500));
        assert_eq!(m.mark(0, 10, Yellow), Yellow);
        assert_eq!(m.tokens(), (990, 500));
        assert_eq!(m.mark(0, 10, Green), Green);
        assert_eq!(m.tokens(), (980, 490));
        assert_eq!(m.mark(0, 981, Green), Red);
    }

    #[test]
    fn trtcm_two_rates_refill_independently() {
        let mut m = tr(1000, 100, 4000, 400, ColorMode::Blind);
        assert_eq!(m.mark(0, 400, Green), Yellow); // Tc 100 < 400
        assert_eq!(m.mark(0, 100, Green), Red); // Tp 0
        assert_eq!(m.tokens(), (0, 100));
        m.mark(10_000_000, 0, Green); // 10 ms: +40 Tp, +10 Tc (Tc full already)
        assert_eq!(m.tokens(), (40, 100));
    }

    #[test]
    fn long_idle_gap_does_not_overflow() {
        let mut m = sr(MAX_RATE_BYTES_PER_S, MAX_BURST_BYTES, MAX_BURST_BYTES, ColorMode::Blind);
        assert_eq!(m.mark(0, u32::MAX, Green), Green);
        assert_eq!(m.mark(u64::MAX, u32::MAX, Green), Green);
        assert_eq!(m.tokens().1, MAX_BURST_BYTES);
        let mut t = tr(MAX_RATE_BYTES_PER_S, 10, MAX_RATE_BYTES_PER_S, 10, ColorMode::Blind);
        assert_eq!(t.mark(u64::MAX - 1, 10, Green), Green);
        assert_eq!(t.mark(u64::MAX, 10, Green), Green); // 1 ns at 16 B/ns refills 10
        assert_eq!(t.mark(3, 10, Green), Red); // time went back: no tokens
    }

    #[test]
    fn meter_array_batch() {
        let ms = (0..3).map(|_| sr(0, 100, 0, ColorMode::Aware)).collect();
        let mut a = MeterArray::new(ms);
        let mut colors = [Green, Green, Yellow, Green, Green];
        let n = a.mark_batch(0, &[0, 0, 1, 7, 2], &[60, 60, 10, 1, 100], &mut colors);
        assert_eq!(n, 5);
        assert_eq!(colors, [Green, Red, Red, Red, Green]);
        assert_eq!(a.get(0).unwrap().tokens(), (40, 0));
        assert_eq!(a.mark_batch(0, &[0], &[], &mut colors), 0);
    }
}
