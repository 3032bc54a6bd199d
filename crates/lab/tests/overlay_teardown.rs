//! The overlay runner leaves nothing behind when it stops early: after a DUT that fails to
//! start (a "fastpath" binary that exits at once) and after Ctrl-C (the interrupted flag set as
//! soon as the kernel gateway is up). Its own test binary, because the interrupted flag is
//! process-wide; one test, so no other run of this process owns namespaces meanwhile.

use fastpath_lab::tests::overlay::{self, OverlayConfig, OverlayDut};
use fastpath_lab::{topo, LabError};

fn mine() -> Vec<String> {
    let pid = format!("-{}-", std::process::id());
    topo::namespaces(topo::PREFIX).into_iter().filter(|n| n.contains(&pid)).collect()
}

fn processes_in_temp_dirs() -> Vec<String> {
    let tag = format!("fp-overlay-{}-", std::process::id());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&tag))
        .collect()
}

#[test]
fn failed_start_and_ctrl_c_tear_the_overlay_down() {
    if !fastpath_io::sys::is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI runs these tests as root");
        return;
    }
    assert!(mine().is_empty());
    // A DUT that dies at start: the error carries its log, the topology is gone.
    let cfg = OverlayConfig { duts: vec![OverlayDut::Fastpath], fastpath_exe: "/bin/false".into(), ..OverlayConfig::default() };
    let r = overlay::run(&cfg, &mut |l| eprintln!("{l}"));
    let e = r.expect_err("a DUT that exits at once must fail the run").to_string();
    assert!(e.contains("exited early"), "{e}");
    assert!(mine().is_empty(), "left behind after a failed start: {:?}", mine());
    assert!(processes_in_temp_dirs().is_empty());
    // Ctrl-C as soon as the gateway is up: the next measurement boundary stops the run.
    let cfg = OverlayConfig { duts: vec![OverlayDut::LinuxVxlan], duration_s: 1, pings: 3, ..OverlayConfig::default() };
    let mut lines = 0;
    let r = overlay::run(&cfg, &mut |l| {
        eprintln!("{l}");
        lines += 1;
        if l.contains("started in") {
            topo::set_interrupted(true);
        }
    });
    topo::set_interrupted(false);
    assert!(matches!(r, Err(LabError::Interrupted)), "{r:?}");
    assert!(lines >= 1);
    assert!(mine().is_empty(), "left behind after Ctrl-C: {:?}", mine());
}
