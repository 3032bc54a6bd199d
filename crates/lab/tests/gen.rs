//! The generator and its sink in real namespaces (needs root, as CI runs it).

use std::time::Duration;

use fastpath_lab::gen::{self, GenConfig, GenMode, Sizes};

#[test]
fn generator_alone_sends_and_the_sink_counts() {
    let cfg = GenConfig { sizes: Sizes::Sweep(vec![64, 1518]), duration_s: 1.0, ..GenConfig::default() };
    let r = gen::run(&cfg, &mut |l| eprintln!("{l}")).unwrap();
    assert_eq!(r.trials.len(), 2);
    for t in &r.trials {
        assert!(t.sent > 100_000, "{t:?}");
        assert!(t.received > 0 && t.received <= t.sent, "{t:?}");
        // The sink counts bytes of exactly the frames it counted.
        assert_eq!(t.received_bytes, t.received * u64::from(t.frame_size), "{t:?}");
    }
}

#[test]
fn paced_generator_sends_exactly_its_budget() {
    let cfg = GenConfig { rate_pps: 20_000, duration_s: 0.5, flows: 16, ..GenConfig::default() };
    let r = gen::run(&cfg, &mut |l| eprintln!("{l}")).unwrap();
    let t = r.trials[0];
    assert_eq!(t.sent, 10_000, "{t:?}");
    assert_eq!(t.received, t.sent, "a paced 20 kpps stream into an XDP sink loses nothing: {t:?}");
    let _ = Duration::ZERO;
}

#[test]
fn af_packet_fallback_sends() {
    let cfg = GenConfig { rate_pps: 20_000, duration_s: 0.5, mode: GenMode::AfPacket, ..GenConfig::default() };
    let r = gen::run(&cfg, &mut |l| eprintln!("{l}")).unwrap();
    let t = r.trials[0];
    assert!(t.sent > 1000 && t.sent <= 10_000, "{t:?}");
    assert_eq!(t.received, t.sent, "{t:?}");
}

#[test]
fn imix_mixes_sizes() {
    let cfg = GenConfig { sizes: Sizes::Imix, rate_pps: 100_000, duration_s: 0.5, ..GenConfig::default() };
    let r = gen::run(&cfg, &mut |l| eprintln!("{l}")).unwrap();
    let t = r.trials[0];
    assert!(t.received > 0, "{t:?}");
    let avg = t.received_bytes as f64 / t.received as f64;
    // 7 × 64 + 4 × 594 + 1 × 1518 over 12 frames = 362 bytes on average.
    assert!((300.0..420.0).contains(&avg), "average frame {avg} B: {t:?}");
}
