//! The broadband (vBNG) lab: Q-in-Q subscribers on an access port, a VLAN-tagged core with
//! endpoints behind it, and the gateway between them.
//!
//! [`plan`] numbers the subscribers and core endpoints, builds their frames and writes the
//! `fastpath ctl` lines that load them into `pipelines/vbng.toml`; every other part of the
//! broadband lab (generators, the Linux baseline, the `bng-rfc2544` runner) takes its addresses
//! from there, so the traffic and the sessions agree by construction. [`dhcp_hosts`] builds
//! the `bng-dhcp` test's real subscriber hosts (DHCP clients in namespaces, tagged by the
//! [`tagger`] tc programs), and [`dhcp_relay`] carries perfdhcp's load through the user plane.

pub mod dhcp_hosts;
pub mod dhcp_relay;
pub mod linux;
pub mod plan;
pub mod tagger;
pub mod traffic;
