//! Built-in stages that are not tables: the parser, connection tracking, primitive runs, VXLAN
//! encapsulation.

pub mod conntrack;
pub mod parser;
pub mod prims;
pub mod vxlan;
