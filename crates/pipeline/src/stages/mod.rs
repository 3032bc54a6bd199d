//! Built-in stages that are not tables: the parser, the traffic manager's classifier, connection
//! tracking, the L2 switch (MAC learning), primitive runs, VXLAN encapsulation.

pub mod classify;
pub mod conntrack;
pub mod l2;
pub mod l2edit;
pub mod parser;
pub mod prims;
pub mod vxlan;
