//! Reference twin of `acl`: a linear scan in priority order.
//!
//! Obviously correct and O(rules) per lookup: the best rule is the matching one with the lowest
//! `(priority, insertion index)`. Tests and `ctl explain` only, never the packet path.

use crate::acl::AclRule;

/// Rules kept in insertion order; every lookup scans all of them.
#[derive(Clone, Debug, Default)]
pub struct LinearAcl {
    rules: Vec<AclRule>,
}

impl LinearAcl {
    /// A scanner over `rules` (rule index = position).
    pub fn new(rules: Vec<AclRule>) -> Self {
        LinearAcl { rules }
    }

    /// The best matching rule as `(action, rule_index)`, or `None`.
    pub fn classify(&self, key: &[u32]) -> Option<(u32, u32)> {
        self.rules
            .iter()
            .enumerate()
            .filter(|(_, r)| r.matches(key))
            .min_by_key(|&(i, r)| (r.priority, i))
            .map(|(i, r)| (r.action, i as u32))
    }
}
