//! Compiled branch conditions, evaluated per packet into lane masks.

use crate::field::read_meta;
use crate::ir::{CmpOp, CondC};
use fastpath_packet::Meta;

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
            CondC::FieldCmp(a, op, b) => match (a.read(data, m), b.read(data, m)) {
                (Some(x), Some(y)) => op.holds(x, y),
                _ => false,
            },
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
