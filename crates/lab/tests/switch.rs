//! Short live runs of the switch tests (`fairness`, `burst`, `incast`) against the Linux
//! bridge shaped by tc, in namespaces (needs root, as CI runs it; without root the tests are
//! skipped, except in CI). The fastpath DUT's runs are in `crates/fastpath/tests/live_switch.rs`,
//! which has the binary.

use fastpath_lab::tests::fairness::{self, FairnessConfig};
use fastpath_lab::tests::switch::{Shaping, SwitchDut};
use fastpath_lab::topo;

/// The runs load both cores; one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn root_or_skip() -> bool {
    if fastpath_io::sys::is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs these tests as root");
    eprintln!("not root: skipped");
    false
}

#[test]
fn fairness_two_and_four_to_one_through_the_shaped_bridge() {
    if !root_or_skip() {
        return;
    }
    let _g = serial();
    let cfg = FairnessConfig {
        duts: vec![SwitchDut::LinuxTc],
        senders: vec![2, 4],
        frame_sizes: vec![1518],
        shaping: Shaping::new(50_000_000, 256 << 10),
        duration_s: 2.0,
        ..FairnessConfig::default()
    };
    let r = fairness::run(&cfg, &mut |l| eprintln!("{l}")).unwrap();
    assert_eq!(r.rows.len(), 2, "{:?}", r.rows);
    for row in &r.rows {
        // The shaper lets through about R (±15 % for a 2 s trial on a busy machine), no more.
        assert!(row.received_total_mbps > 0.85 * 50.0 && row.received_total_mbps < 1.1 * 50.0, "{row:?}");
        assert!(row.sent > row.received, "offered above R, so some frames were dropped: {row:?}");
        assert!(row.jain > 0.5, "{row:?}");
        assert_eq!(row.share.len(), row.senders);
    }
    assert!(r.drops.iter().all(|(_, _, d)| d.values().sum::<u64>() > 0), "the qdisc counted drops: {:?}", r.drops);
    assert!(topo::namespaces("fp-").iter().all(|n| !n.contains(&format!("-{}-", std::process::id()))), "namespaces left");
}
