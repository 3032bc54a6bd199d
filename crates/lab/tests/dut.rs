//! Each baseline DUT forwards generated frames from gen0 to sink0 (needs root, as CI runs it).
//! A DUT whose package is missing fails with `Unavailable`, which these tests report as a
//! failure: scripts/setup-lab.sh installs them in CI.

use std::time::Duration;

use fastpath_lab::dut::{Dut, DutConfig, DutKind};
use fastpath_lab::gen::{GenMode, Traffic};
use fastpath_lab::topo::{TopoConfig, Topology};

/// One DUT at a time: testpmd and OVS busy-poll a core each.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn forwards(kind: DutKind) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let t = Topology::create(&TopoConfig::default()).unwrap();
    let dut = Dut::start(&t, &DutConfig::new(kind)).unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
    let traffic = Traffic::attach(&t, GenMode::XdpLive).unwrap();
    let tr = traffic.trial(64, 4, 20_000, Duration::from_millis(500)).unwrap();
    eprintln!("{}: {tr:?}", kind.name());
    // On a busy machine the paced generator may fall short of its budget; it never exceeds it.
    assert!(tr.sent > 2_000 && tr.sent <= 10_000, "{}: {tr:?}", kind.name());
    assert!(tr.received >= tr.sent * 9 / 10, "{} forwards at 20 kpps: {tr:?}", kind.name());
    drop(traffic);
    drop(dut);
    let ns = t.dut_ns.clone();
    drop(t);
    assert!(!fastpath_lab::topo::namespaces(&ns).contains(&ns));
}

#[test]
fn linux_bridge_forwards() {
    forwards(DutKind::LinuxBridge);
}

#[test]
fn linux_bridge_tuned_forwards() {
    forwards(DutKind::LinuxBridgeTuned);
}

#[test]
fn testpmd_afxdp_forwards() {
    forwards(DutKind::TestpmdAfXdp);
}

#[test]
fn testpmd_afpacket_forwards() {
    forwards(DutKind::TestpmdAfPacket);
}

#[test]
fn ovs_afxdp_forwards() {
    forwards(DutKind::OvsAfXdp);
}
