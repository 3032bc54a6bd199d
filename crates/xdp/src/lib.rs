//! fastpath-xdp: a pipeline compiled to one eBPF program that runs at the kernel's XDP hook of
//! each port, so frames are forwarded inside the receive path (the sender's softirq on veth, the
//! NIC's NAPI poll on hardware) with no copy to user space and no second `sendto`.
//!
//! This is the datapath for where a user-space poller cannot win: latency on virtual links,
//! where the AF_XDP copy mode's extra copy, core crossing and transmit syscall are most of a
//! frame's time. It compiles a subset of the spec language ([`codegen::check`] names what is
//! outside it) from the same [`Program`](fastpath_pipeline::Program) the batch executor runs,
//! and the tests hold the two to the same verdicts and bytes.
//!
//! Uses `packet`, `pipeline` and `io` (the raw `bpf(2)` toolkit).
#![deny(missing_docs)]

pub mod asm;
pub mod codegen;
pub mod datapath;

pub use codegen::{check, Hook, Unsupported};
pub use datapath::{AttachMode, TcRedirect, XdpCounters, XdpDatapath, XdpDpError, XdpPortSpec};
