//! The lab's test runners. Each takes a plain config and a progress callback, builds its own
//! topology per DUT, and returns results that print as JSON lines and add themselves to a
//! [`Report`]:
//!
//! ```no_run
//! use fastpath_lab::dut::{DutConfig, DutKind};
//! use fastpath_lab::tests::rfc2544::{self, Rfc2544Config};
//! let cfg = Rfc2544Config {
//!     duts: vec![DutConfig::new(DutKind::LinuxBridge)],
//!     frame_sizes: vec![64],
//!     flows: vec![1],
//!     trial_s: 1.0,
//!     ..Rfc2544Config::default()
//! };
//! let res = rfc2544::run(&cfg, &mut |line| eprintln!("{line}")).unwrap();
//! print!("{}", res.json_lines());
//! let mut report = fastpath_lab::tests::report("fastpath lab", "fastpath lab rfc2544 --dut linux-bridge");
//! res.add_to(&mut report);
//! report.write("lab-report.html").unwrap();
//! ```

pub mod bng_dhcp;
pub mod bng_rfc2544;
pub mod burst;
pub mod fairness;
pub mod incast;
pub mod metrics_cost;
pub mod overlay;
pub mod rfc2544;
pub mod switch;
pub mod tcp;
pub mod tcp_cpu;
pub mod tcp_pairs;
pub mod update;

use crate::dut::{Dut, DutConfig};
use crate::report::Report;
use crate::topo::Topology;

/// A report headed with the command line that produced it and the machine it ran on.
pub fn report(title: &str, command: &str) -> Report {
    let mut r = Report::new(title);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|x| x.1.trim().to_owned())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    r.para(format!(
        "Machine: {cpu}, {cores} CPUs, Linux {}. Traffic runs between network namespaces over veth pairs; \
         absolute rates depend on the machine, so compare DUTs measured in the same run.",
        kernel.trim()
    ))
    .pre(command);
    r
}

/// Starts `dc` in `t`; a DUT that cannot start is reported and added to `skipped`.
pub(crate) fn start_or_skip(
    t: &Topology,
    dc: &DutConfig,
    skipped: &mut Vec<(String, String)>,
    progress: &mut dyn FnMut(&str),
) -> Option<Dut> {
    match Dut::start(t, dc) {
        Ok(d) => Some(d),
        Err(e) => {
            let name = dc.name();
            progress(&format!("{name}: skipped: {e}"));
            skipped.push((name.to_owned(), e.to_string()));
            None
        }
    }
}

/// The median of `v` (the upper middle value of an even count); `None` when empty.
pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// One JSON object per line, one line per row (rows that fail to serialise are left out).
pub(crate) fn json_lines<T: serde::Serialize>(rows: &[T]) -> String {
    let mut s = String::new();
    for r in rows {
        if let Ok(j) = serde_json::to_string(r) {
            s.push_str(&j);
            s.push('\n');
        }
    }
    s
}
