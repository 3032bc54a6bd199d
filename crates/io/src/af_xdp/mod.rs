//! AF_XDP ports.

pub mod bpf;
