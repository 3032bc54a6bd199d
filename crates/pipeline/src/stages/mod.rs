//! Built-in stages that are not tables: the parser, connection tracking, VXLAN encapsulation.

pub mod conntrack;
pub mod parser;
pub mod vxlan;
