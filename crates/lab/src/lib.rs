//! fastpath-lab: the traffic generator, namespace topologies, test runners, baseline DUTs and
//! the HTML report with SVG charts, and the switch-scale simulation. Uses `io`, `pipeline` and
//! `tm` (the simulation runs the traffic manager itself; the switch tests take Jain's index).
//!
//! Layout: [`topo`] builds generator ▸ DUT ▸ sink namespaces; [`gen`] offers traffic (XDP live
//! frames at millions of packets per second, AF_PACKET probes for latency) and counts what
//! arrives; [`dut`] starts and stops the devices under test (Linux bridge, DPDK testpmd, Open
//! vSwitch, fastpath); [`overlay_topo`] builds tenant A ▸ DUT ▸ tenant B namespaces whose kernels
//! run real VXLAN interfaces; [`fanin_topo`] builds N senders ▸ DUT ▸ one receiver for the switch
//! tests (incast, burst, fairness); [`tests`] holds the runners (`rfc2544`, `tcp`, `overlay`, the last
//! with its own gateways: fastpath on `sdn-overlay`, a kernel VXLAN bridge; and the switch tests
//! `incast`, `burst`, `fairness` with theirs: fastpath's traffic manager, a bridge shaped by tc);
//! [`report`] writes HTML; [`sim`] runs the traffic manager in virtual time at switch scale
//! (`fastpath sim`).
//! Every runner takes a plain config struct and a progress callback and returns results:
//! `run(&config, &mut |line| eprintln!("{line}")) -> Result<Results, LabError>`.
//!
//! Invariants: traffic only inside namespaces the lab created, addresses from 198.18.0.0/15;
//! everything created is removed on drop (also after a panic); processes are killed by PID only.
#![forbid(unsafe_code)]

pub mod bng;
pub mod dut;
pub mod fanin_topo;
pub mod gen;
pub mod overlay_topo;
pub mod report;
pub mod sim;
pub mod tests;
pub mod topo;

/// Errors of the lab: rich, for the operator; none of them is on a packet path.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The lab needs root (namespaces, BPF, raw sockets).
    #[error("the lab needs root (network namespaces, BPF and raw sockets); run it with sudo")]
    NotRoot,
    /// An external command failed.
    #[error("`{cmd}` failed (status {status}): {stderr}")]
    Cmd {
        /// The command line.
        cmd: String,
        /// Exit status (-1: could not start or killed).
        status: i32,
        /// Its standard error, trimmed.
        stderr: String,
    },
    /// A system call or file operation failed.
    #[error("{0}")]
    Io(String),
    /// A BPF program or map operation failed.
    #[error("bpf: {0}")]
    Bpf(String),
    /// A DUT cannot run here (package missing); the runner skips it.
    #[error("{dut} skipped: {why}")]
    Unavailable {
        /// DUT name.
        dut: String,
        /// What is missing and how to get it.
        why: String,
    },
    /// Bad configuration.
    #[error("bad lab config: {0}")]
    Config(String),
    /// Ctrl-C or SIGTERM arrived; everything was torn down.
    #[error("interrupted")]
    Interrupted,
}

impl From<std::io::Error> for LabError {
    fn from(e: std::io::Error) -> LabError {
        LabError::Io(e.to_string())
    }
}
