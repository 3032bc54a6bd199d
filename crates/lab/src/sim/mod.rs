//! `fastpath sim`: the traffic manager ([`fastpath_tm::Tm`], the data plane's own code) in
//! virtual time, behind modelled links, at the scale of a switch that veth cannot carry
//! (32 × 100 Gbit/s, a 32 MiB buffer). See `docs/sim.md` for the model and its limits.
//!
//! ```text
//!   engine   a binary heap of (time ps, seq, event): earliest first, FIFO among equals
//!   switch   P ports of rate L, one Tm; buffer shared (dynamic thresholds) or split statically
//!   tcp      NewReno sender (+ ECN / DCTCP reaction), cumulative-ACK receiver
//!   incast   N hosts × M flows → port 0: goodput over time, JCT, retransmits, drops, Jain
//!   burst    K senders at line rate → port 0: largest burst with zero loss
//! ```
//!
//! Everything is deterministic: no clock, no threads, and the only randomness (start times,
//! the TM's WRED draws) comes from seeds in the configs.
//!
//! ```
//! use fastpath_lab::sim::incast::{self, IncastConfig};
//! use fastpath_lab::sim::switch::{BufferModel, SwitchConfig};
//! // 4 senders × 2 flows of 200 kB through a 10 Gbit/s, 8-port switch with 1 MiB of buffer.
//! let cfg = IncastConfig {
//!     switch: SwitchConfig { ports: 8, rate_bps: 10_000_000_000, buffer_bytes: 1 << 20, ..SwitchConfig::default() },
//!     senders: 4,
//!     flows_per_sender: 2,
//!     bytes_per_flow: 200_000,
//!     ..IncastConfig::default()
//! };
//! let r = incast::run(&cfg, BufferModel::Shared, &mut |_| {})?;
//! assert_eq!(r.delivered_bytes, 1_600_000);
//! assert!(r.jct_ps.is_some());
//! # Ok::<(), fastpath_lab::sim::SimError>(())
//! ```

pub mod burst;
pub mod engine;
pub mod incast;
pub mod report;
pub mod switch;
pub mod tcp;

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The traffic manager refused the switch's configuration.
    #[error("traffic manager: {0}")]
    Tm(fastpath_tm::config::ConfigError),
    /// A parameter out of range.
    #[error("{0}")]
    Config(String),
}
