//! fastpath-io: ports and the run-to-completion worker loop.
//!
//! Owns the [`Port`] trait and its implementations: `mem` (synthetic source and sink that behave
//! like a NIC ring), `pcap` (capture files in and out), `af_packet` (TPACKET_V3 rings) and
//! `af_xdp` (XSK sockets whose UMEM is the packet pool); and `worker`, which moves batches from
//! ports through a [`worker::Processor`] (the pipeline, glued in by the binary) and back out;
//! `multi` runs one pinned worker per core with flows spread by hash; `netns` builds
//! namespace/veth test topologies that clean up after themselves; `signals` is the process's one
//! Ctrl-C mechanism (SIGINT/SIGTERM set a stop flag, via signal-hook). Two toolkits sit under
//! the ports and are used by other crates too: `bpf` (the raw `bpf(2)` calls: maps, program
//! load, links, test runs, and an instruction encoder; used by `af_xdp`, `fastpath-xdp` and the
//! lab's generator) and `sys` (interface indexes, network namespaces, CPU pinning, priority, the
//! real-time clock, the root check).
//! Depends only on `fastpath-packet`.
//!
//! `unsafe` lives only in `af_xdp`, `af_packet`, `bpf` and `sys` (syscalls, mmap'd rings).
//! Module files import each other without cycles (`cargo xtask layering` fails on one): `sys`
//! uses no other module and `bpf` only `sys`; the ports use them and `port`; `multi` uses the
//! ports.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod af_packet;
#[allow(unsafe_code)]
pub mod af_xdp;
#[allow(unsafe_code)]
pub mod bpf;
pub mod mem;
pub mod multi;
pub mod netns;
pub mod pcap;
pub mod port;
pub mod signals;
#[allow(unsafe_code)]
pub mod sys;
pub mod worker;

pub use port::{Port, PortStats};
