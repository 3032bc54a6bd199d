//! Built-in stages that are not tables: the parser, the traffic manager's classifier, connection
//! tracking, primitive runs, VXLAN encapsulation.

pub mod classify;
pub mod conntrack;
pub mod parser;
pub mod prims;
pub mod vxlan;
