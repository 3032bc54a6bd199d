//! Compiled branch conditions, evaluated per packet into lane masks.

use crate::field::{read_meta, FieldRef, MetaField};
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
    /// `meta.field op constant` (also `ct.*`): metadata only, no header read.
    MetaCmp(MetaField, CmpOp, u32),
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
            CondC::Cmp(f, op, v) => f.read(data, m).is_some_and(|x| op.holds(x, *v)),
            CondC::MetaCmp(f, op, v) => op.holds(read_meta(m, *f), *v),
            CondC::Not(c) => !c.eval(data, m),
            CondC::And(a, b) => a.eval(data, m) && b.eval(data, m),
            CondC::Or(a, b) => a.eval(data, m) || b.eval(data, m),
        }
    }
}

impl CmpOp {
    /// `a op b`.
    #[inline]
    pub fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}
