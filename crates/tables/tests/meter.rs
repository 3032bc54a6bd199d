//! Meters against the literal RFC 2697/2698 twins on simulated time, and rate accuracy.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fastpath_tables::meter::{Color, ColorMode, MeterArray, SrTcm, SrTcmConfig, TrTcm, TrTcmConfig};
use fastpath_tables::reference::meter::{RefSrTcm, RefTrTcm};
use proptest::prelude::*;

fn color() -> impl Strategy<Value = Color> {
    prop_oneof![Just(Color::Green), Just(Color::Yellow), Just(Color::Red)]
}
fn mode() -> impl Strategy<Value = ColorMode> {
    prop_oneof![Just(ColorMode::Blind), Just(ColorMode::Aware)]
}
/// Packet arrivals: (gap_ns, len_bytes, pre-colour). Gaps are mostly small, sometimes long idle
/// periods, sometimes zero (several packets in one batch), sometimes backwards (u64 wraps are
/// avoided by the accumulation below).
fn arrivals() -> impl Strategy<Value = Vec<(u64, u32, Color)>> {
    let gap = prop_oneof![
        4 => 0u64..2_000_000,
        2 => Just(0u64),
        1 => 0u64..3_000_000_000,
    ];
    let len = prop_oneof![3 => 40u32..1600, 1 => 0u32..20_000];
    prop::collection::vec((gap, len, color()), 0..200)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn srtcm_equals_rfc2697_twin(
        cir in prop_oneof![0u64..10_000, 10_000u64..2_000_000],
        cbs in 0u64..20_000, ebs in 0u64..20_000, mode in mode(),
        start in 0u64..5_000_000_000, seq in arrivals(),
    ) {
        prop_assume!(cbs + ebs > 0);
        let cfg = SrTcmConfig { cir_bytes_per_s: cir, cbs_bytes: cbs, ebs_bytes: ebs, mode };
        let mut fast = SrTcm::new(cfg).unwrap();
        let mut twin = RefSrTcm::new(cfg);
        let mut t = start;
        for (i, &(gap, len, c)) in seq.iter().enumerate() {
            t += gap;
            let (a, b) = (fast.mark(t, len, c), twin.mark(t, len, c));
            prop_assert_eq!(a, b, "packet {} at {} ns", i, t);
            prop_assert_eq!(fast.tokens(), twin.tokens(), "packet {}", i);
        }
    }

    #[test]
    fn trtcm_equals_rfc2698_twin(
        cir in 0u64..1_000_000, extra in 0u64..1_000_000,
        cbs in 0u64..20_000, pbs in 0u64..20_000, mode in mode(),
        start in 0u64..5_000_000_000, seq in arrivals(),
    ) {
        let cfg = TrTcmConfig {
            cir_bytes_per_s: cir, cbs_bytes: cbs, pir_bytes_per_s: cir + extra, pbs_bytes: pbs, mode,
        };
        let mut fast = TrTcm::new(cfg).unwrap();
        let mut twin = RefTrTcm::new(cfg);
        let mut t = start;
        for (i, &(gap, len, c)) in seq.iter().enumerate() {
            t += gap;
            let (a, b) = (fast.mark(t, len, c), twin.mark(t, len, c));
            prop_assert_eq!(a, b, "packet {} at {} ns", i, t);
            prop_assert_eq!(fast.tokens(), twin.tokens(), "packet {}", i);
        }
    }

    /// Time going backwards (two workers' clocks, a reordered batch) adds no tokens in either.
    #[test]
    fn non_monotonic_time_matches_twin(
        times in prop::collection::vec(0u64..50_000_000, 0..100),
        lens in prop::collection::vec(0u32..3000, 100),
    ) {
        let cfg = SrTcmConfig { cir_bytes_per_s: 125_000, cbs_bytes: 3000, ebs_bytes: 3000,
                                mode: ColorMode::Blind };
        let mut fast = SrTcm::new(cfg).unwrap();
        let mut twin = RefSrTcm::new(cfg);
        for (&t, &len) in times.iter().zip(&lens) {
            prop_assert_eq!(fast.mark(t, len, Color::Green), twin.mark(t, len, Color::Green));
        }
    }
}

/// Offers `load_bytes_per_s` of `len`-byte packets, evenly spaced, for `secs` simulated
/// seconds and returns the bytes of each colour.
fn offer(m: &mut impl FnMut(u64, u32) -> Color, load_bytes_per_s: u64, len: u32, secs: u64) -> [u64; 3] {
    let n = load_bytes_per_s * secs / u64::from(len);
    let gap_ns = secs * 1_000_000_000 / n;
    let mut out = [0u64; 3];
    for i in 0..n {
        let c = m(i * gap_ns, len);
        out[c as usize] += u64::from(len);
    }
    out
}

#[test]
fn srtcm_green_rate_within_one_percent_of_cir() {
    for (cir, cbs, ebs, len) in
        [(1_250_000u64, 15_000u64, 30_000u64, 1500u32), (12_500_000, 100_000, 0, 64), (125_000_000, 1_000_000, 1_000_000, 512)]
    {
        let mut m = SrTcm::new(SrTcmConfig { cir_bytes_per_s: cir, cbs_bytes: cbs, ebs_bytes: ebs, mode: ColorMode::Blind }).unwrap();
        let got = offer(&mut |t, l| m.mark(t, l, Color::Green), 4 * cir, len, 1);
        let want = (cir + cbs) as f64;
        let err = (got[0] as f64 - want).abs() / want;
        assert!(err <= 0.01, "cir {cir}: green {} vs {want} ({:.3} %)", got[0], err * 100.0);
        // Yellow gets only the initial EBS (Tc never fills while overloaded).
        assert!(got[1] <= ebs, "yellow {} > ebs {ebs}", got[1]);
        assert!(got[2] > 0);
    }
}

#[test]
fn trtcm_rates_within_one_percent() {
    let (cir, cbs, pir, pbs, len) = (1_000_000u64, 10_000u64, 3_000_000u64, 20_000u64, 1000u32);
    let mut m =
        TrTcm::new(TrTcmConfig { cir_bytes_per_s: cir, cbs_bytes: cbs, pir_bytes_per_s: pir, pbs_bytes: pbs, mode: ColorMode::Blind })
            .unwrap();
    let got = offer(&mut |t, l| m.mark(t, l, Color::Green), 10 * pir, len, 1);
    let green_want = (cir + cbs) as f64;
    let green_yellow_want = (pir + pbs) as f64;
    assert!((got[0] as f64 - green_want).abs() / green_want <= 0.01, "green {}", got[0]);
    let gy = (got[0] + got[1]) as f64;
    assert!((gy - green_yellow_want).abs() / green_yellow_want <= 0.01, "green+yellow {gy}");
}

/// Colour-aware: packets pre-marked yellow never consume committed tokens, so all-green traffic
/// mixed with pre-yellow traffic still gets CIR of green.
#[test]
fn srtcm_aware_yellow_does_not_steal_committed() {
    let cir = 1_000_000u64;
    let mut m = SrTcm::new(SrTcmConfig { cir_bytes_per_s: cir, cbs_bytes: 10_000, ebs_bytes: 10_000, mode: ColorMode::Aware }).unwrap();
    let mut green = 0u64;
    let mut k = 0u64;
    let got = offer(
        &mut |t, l| {
            k += 1;
            let c = if k.is_multiple_of(2) { Color::Yellow } else { Color::Green };
            let out = m.mark(t, l, c);
            if c == Color::Yellow {
                assert_ne!(out, Color::Green);
            }
            if out == Color::Green {
                green += u64::from(l);
            }
            out
        },
        8 * cir,
        500,
        1,
    );
    assert_eq!(got[0], green);
    let want = (cir + 10_000) as f64;
    assert!((green as f64 - want).abs() / want <= 0.01, "green {green}");
}

#[test]
fn thousand_policers_are_independent() {
    let cfg = SrTcmConfig { cir_bytes_per_s: 1000, cbs_bytes: 1500, ebs_bytes: 0, mode: ColorMode::Blind };
    let mut a = MeterArray::new((0..1000).map(|_| SrTcm::new(cfg).unwrap()).collect());
    let idx: Vec<u32> = (0..1000).collect();
    let lens = vec![1500u32; 1000];
    let mut colors = vec![Color::Green; 1000];
    assert_eq!(a.mark_batch(0, &idx, &lens, &mut colors), 1000);
    assert!(colors.iter().all(|&c| c == Color::Green));
    // Hit policer 7 again immediately: red; the others were untouched.
    assert_eq!(a.mark(7, 0, 1, Color::Green), Color::Red);
    assert_eq!(a.mark(8, 1_000_000_000, 1000, Color::Green), Color::Green);
    assert_eq!(a.mark(7, 1_000_000_000, 1001, Color::Green), Color::Red);
}
