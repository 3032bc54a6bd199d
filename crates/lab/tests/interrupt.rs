//! Ctrl-C during a lab run: the runner stops with `Interrupted` and leaves nothing behind. Its
//! own test binary, because the interrupted flag is process-wide.

use fastpath_lab::dut::{DutConfig, DutKind};
use fastpath_lab::tests::rfc2544::{self, Rfc2544Config};
use fastpath_lab::{topo, LabError};

#[test]
fn interrupted_run_tears_everything_down() {
    let before = topo::namespaces(&format!("{}dut-{}-", topo::PREFIX, std::process::id()));
    assert!(before.is_empty());
    let cfg = Rfc2544Config {
        duts: vec![DutConfig::new(DutKind::LinuxBridge)],
        frame_sizes: vec![64, 128],
        flows: vec![1],
        trial_s: 0.3,
        ..Rfc2544Config::default()
    };
    let mut lines = 0;
    let r = rfc2544::run(&cfg, &mut |l| {
        eprintln!("{l}");
        lines += 1;
        // "Ctrl-C" as soon as the DUT is up: the next trial boundary must stop the run.
        topo::set_interrupted(true);
    });
    topo::set_interrupted(false);
    assert!(matches!(r, Err(LabError::Interrupted)), "{r:?}");
    assert!(lines >= 1);
    let mine = format!("-{}-", std::process::id());
    let left: Vec<String> = topo::namespaces(topo::PREFIX).into_iter().filter(|n| n.contains(&mine)).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
