//! Naive reference twins: obviously-correct, slow implementations that the fast structures are
//! property-tested against (ACL vs linear scan, LPM vs sorted prefixes, meters vs RFC arithmetic).
//! Control and test use only.

pub mod acl;
pub mod exact;
pub mod flow;
pub mod lpm;
pub mod meter;
