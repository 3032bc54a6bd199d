//! Compiled branch conditions, evaluated per packet into lane masks.

use crate::field::FieldRef;
use crate::spec::syntax::CmpOp;
use fastpath_packet::{HdrSet, Meta};

/// A condition with every name resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CondC {
    /// All of these headers were parsed.
    Valid(HdrSet),
    /// Table bit `t` of `Meta::hits` is set.
    Hit(u8),
    /// `field op constant`.
    Cmp(FieldRef, CmpOp, u128),
    /// Negation.
    Not(Box<CondC>),
    /// Conjunction.
    And(Box<CondC>, Box<CondC>),
    /// Disjunction.
    Or(Box<CondC>, Box<CondC>),
}

impl CondC {
    /// True when the packet satisfies the condition. A comparison on a field the packet lacks
    /// is false.
    #[inline]
    pub fn eval(&self, data: &[u8], m: &Meta) -> bool {
        match self {
            CondC::Valid(s) => m.valid.has_all(*s),
            CondC::Hit(t) => m.hits >> t & 1 != 0,
            CondC::Cmp(f, op, v) => match f.read(data, m) {
                None => false,
                Some(x) => match op {
                    CmpOp::Eq => x == *v,
                    CmpOp::Ne => x != *v,
                    CmpOp::Lt => x < *v,
                    CmpOp::Le => x <= *v,
                    CmpOp::Gt => x > *v,
                    CmpOp::Ge => x >= *v,
                },
            },
            CondC::Not(c) => !c.eval(data, m),
            CondC::And(a, b) => a.eval(data, m) && b.eval(data, m),
            CondC::Or(a, b) => a.eval(data, m) || b.eval(data, m),
        }
    }
}
