//! fastpath-io: ports and the run-to-completion worker loop.
//!
//! Owns the [`Port`] trait and its implementations: `mem` (synthetic source and sink that behave
//! like a NIC ring), `pcap` (capture files in and out), `af_packet` (TPACKET_V3 rings) and
//! `af_xdp` (XSK sockets whose UMEM is the packet pool); and `worker`, which moves batches from
//! ports through a [`worker::Processor`] (the pipeline, glued in by the binary) and back out;
//! `multi` runs one pinned worker per core with flows spread by hash; `netns` builds
//! namespace/veth test topologies that clean up after themselves; `signals` is the process's one
//! Ctrl-C mechanism (SIGINT/SIGTERM set a stop flag, via signal-hook).
//! Depends only on `fastpath-packet`.
//!
//! `unsafe` lives only in `af_xdp` and `af_packet` (syscalls, mmap'd rings).
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod af_packet;
#[allow(unsafe_code)]
pub mod af_xdp;
pub mod mem;
pub mod multi;
pub mod netns;
pub mod pcap;
pub mod port;
pub mod signals;
pub mod worker;

pub use port::{Port, PortStats};
