//! Tables with ternary, range or prefix keys in the generated program: a linear classifier
//! over the table's rules, in the order the engine's classifier ranks them (lower priority
//! first, ties to the rule added first; a prefix table's longest prefix first).
//!
//! ```text
//!  sel map   [table] ▸ which of the two rule sets is live (the control side writes the other,
//!            then flips: a packet sees one whole set, never a half-written one)
//!  rules     an array map of two values, each: count (u64) ▸ count × rule
//!  rule      per key field (a, b): ternary/prefix/exact `key & b == a`, range `a ≤ key ≤ b`
//!            ▸ action index (u64) ▸ MAX_ARGS arguments (u64 each)
//!  loop      for i in 0..min(count, size) (an open-coded `bpf_iter_num` iterator, kernel ≥
//!            6.4): the first rule that matches; its action and arguments are copied to the
//!            stack (`r9` points there, as at a hash table's hit)
//! ```
//! A lookup walks the rules one by one: fine for the ACLs a connection's first packet meets,
//! not for a routing table (at most [`MAX_RULES`] rules).

use super::{Gen, CNT_KEY, ITER, KEY, VALUE_SIZE};
use crate::asm::{Alu, Jmp, Label, Size};
use fastpath_io::bpf::{Insn, R0, R1, R10, R2, R3, R4, R9};
use fastpath_pipeline::ir::{MatchKind, TableDef, MAX_ARGS};
use fastpath_pipeline::value::Match;

/// Most rules of a classifier table the XDP datapath compiles (a lookup walks them one by
/// one).
pub const MAX_RULES: usize = 4096;

/// Bytes of one rule of `t`.
pub fn rule_size(t: &TableDef) -> u32 {
    16 * t.key.len() as u32 + VALUE_SIZE
}

/// Bytes of one rule set of `t` (a value of its rules map): the count and the rules.
pub fn set_size(t: &TableDef) -> u32 {
    8 + rule_size(t) * t.size.min(MAX_RULES) as u32
}

/// Whether `t` runs on the classifier (not a hash map).
pub fn is_classifier(t: &TableDef) -> bool {
    t.key.iter().any(|k| k.kind != MatchKind::Exact)
}

/// The (a, b) words of one key field's match, as the loop tests them; `width` is the field's.
///
/// # Errors
/// A match the field's kind does not take, or a value wider than 64 bits.
pub fn encode(kind: MatchKind, width: u8, m: &Match) -> Result<(u64, u64), String> {
    let all = if width >= 64 { u64::MAX } else { (1u64 << width) - 1 };
    let narrow = |v: u128| u64::try_from(v).map_err(|_| format!("key value {v:#x} wider than 64 bits"));
    Ok(match (kind, *m) {
        (MatchKind::Range, Match::Exact(v)) => (narrow(v)?, narrow(v)?),
        (MatchKind::Range, Match::Range(lo, hi)) => (narrow(lo)?, narrow(hi)?),
        (MatchKind::Range, Match::Any) => (0, u64::MAX),
        (MatchKind::Range, other) => return Err(format!("a range field takes lo..hi, a value or *, not {other:?}")),
        (_, Match::Exact(v)) => (narrow(v)? & all, all),
        (_, Match::Masked(v, mask)) => {
            let mask = narrow(mask & u128::from(all))?;
            (narrow(v & u128::from(mask))?, mask)
        }
        (_, Match::Prefix(v, len)) => {
            // The top `len` of the field's `w` bits.
            let w = u32::from(width.min(64));
            let len = u32::from(len).min(w);
            let mask = if len == 0 { 0 } else { (all >> (w - len)) << (w - len) };
            (narrow(v)? & mask, mask)
        }
        (_, Match::Any) => (0, 0),
        (_, Match::Range(..)) => return Err("only a range field takes lo..hi".into()),
    })
}

impl Gen<'_> {
    /// The classifier lookup of table `t` (its keys at KEY): on a match `r9` points at the
    /// rule's action and arguments (copied to KEY) and the code goes on to `hit`; else `miss`.
    /// The loop is an open-coded iterator (`bpf_iter_num_*`), which the verifier checks by
    /// convergence, not rule by rule.
    pub(super) fn classify(&mut self, t: usize, hit: Label, miss: Label) {
        let def = &self.p.tables[t];
        let n = def.size.min(MAX_RULES) as i32;
        let (k, rs) = (def.key.len() as i16, rule_size(def) as i32);
        let [new, next_fn, destroy] = self.maps.iter_num;
        let (lp, next, none, capped) = (self.a.label(), self.a.label(), self.a.label(), self.a.label());
        // The live set: sel[t] & 1.
        self.a.st(Size::W, R10, CNT_KEY, t as i32);
        self.map_lookup(self.maps.acl_sel, CNT_KEY);
        self.a.jmp_imm(Jmp::Eq, R0, 0, miss);
        self.a.ldx(Size::W, R1, R0, 0);
        self.a.alu_imm(Alu::And, R1, 1);
        self.a.stx(Size::W, R10, CNT_KEY, R1);
        self.map_lookup(self.maps.tables[t], CNT_KEY);
        self.a.jmp_imm(Jmp::Eq, R0, 0, miss);
        self.a.alu_reg(Alu::Mov, R9, R0);
        // for i in 0..min(count, n)
        self.a.ldx(Size::Dw, R3, R9, 0);
        self.a.jmp_imm(Jmp::Le, R3, n, capped);
        self.a.alu_imm(Alu::Mov, R3, n);
        self.a.bind(capped);
        self.a.alu_reg(Alu::Mov, R1, R10);
        self.a.alu_imm(Alu::Add, R1, i32::from(ITER));
        self.a.alu_imm(Alu::Mov, R2, 0);
        self.a.raw(&[Insn::call_kfunc(new)]);
        self.a.bind(lp);
        self.a.alu_reg(Alu::Mov, R1, R10);
        self.a.alu_imm(Alu::Add, R1, i32::from(ITER));
        self.a.raw(&[Insn::call_kfunc(next_fn)]);
        self.a.jmp_imm(Jmp::Eq, R0, 0, none);
        self.a.ldx(Size::W, R2, R0, 0);
        self.a.jmp_imm(Jmp::Ge, R2, n, none);
        // r4 = the rule.
        self.a.alu_imm(Alu::Mul, R2, rs);
        self.a.alu_reg(Alu::Mov, R4, R9);
        self.a.alu_imm(Alu::Add, R4, 8);
        self.a.alu_reg(Alu::Add, R4, R2);
        for (i, key) in def.key.iter().enumerate() {
            let at = 16 * i as i16;
            self.a.ldx(Size::Dw, R1, R10, KEY + 8 * i as i16);
            self.a.ldx(Size::Dw, R0, R4, at);
            self.a.ldx(Size::Dw, R3, R4, at + 8);
            if key.kind == MatchKind::Range {
                self.a.jmp_reg(Jmp::Lt, R1, R0, next);
                self.a.jmp_reg(Jmp::Gt, R1, R3, next);
            } else {
                self.a.alu_reg(Alu::And, R1, R3);
                self.a.jmp_reg(Jmp::Ne, R1, R0, next);
            }
        }
        // A match: the action and its arguments to KEY (the keys are done with).
        for w in 0..=MAX_ARGS as i16 {
            self.a.ldx(Size::Dw, R1, R4, 16 * k + 8 * w);
            self.a.stx(Size::Dw, R10, KEY + 8 * w, R1);
        }
        self.a.alu_reg(Alu::Mov, R1, R10);
        self.a.alu_imm(Alu::Add, R1, i32::from(ITER));
        self.a.raw(&[Insn::call_kfunc(destroy)]);
        self.a.alu_reg(Alu::Mov, R9, R10);
        self.a.alu_imm(Alu::Add, R9, i32::from(KEY));
        self.a.ja(hit);
        self.a.bind(next);
        self.a.ja(lp);
        self.a.bind(none);
        self.a.alu_reg(Alu::Mov, R1, R10);
        self.a.alu_imm(Alu::Add, R1, i32::from(ITER));
        self.a.raw(&[Insn::call_kfunc(destroy)]);
        self.a.ja(miss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_encode_as_the_loop_tests_them() {
        assert_eq!(encode(MatchKind::Ternary, 32, &Match::Prefix(0x0a00_0000, 8)), Ok((0x0a00_0000, 0xff00_0000)));
        assert_eq!(encode(MatchKind::Ternary, 32, &Match::Prefix(0x0a01_0203, 32)), Ok((0x0a01_0203, 0xffff_ffff)));
        assert_eq!(encode(MatchKind::Ternary, 32, &Match::Prefix(0x0a01_0203, 0)), Ok((0, 0)));
        assert_eq!(encode(MatchKind::Lpm, 64, &Match::Prefix(u128::from(u64::MAX), 64)), Ok((u64::MAX, u64::MAX)));
        assert_eq!(encode(MatchKind::Ternary, 8, &Match::Masked(0x1ff, 0xf0)), Ok((0xf0, 0xf0)));
        assert_eq!(encode(MatchKind::Ternary, 8, &Match::Any), Ok((0, 0)));
        assert_eq!(encode(MatchKind::Range, 16, &Match::Range(80, 90)), Ok((80, 90)));
        assert_eq!(encode(MatchKind::Range, 16, &Match::Exact(22)), Ok((22, 22)));
        assert_eq!(encode(MatchKind::Range, 16, &Match::Any), Ok((0, u64::MAX)));
        assert!(encode(MatchKind::Range, 16, &Match::Masked(1, 1)).is_err());
        assert!(encode(MatchKind::Ternary, 16, &Match::Range(1, 2)).is_err());
        assert!(encode(MatchKind::Exact, 128, &Match::Exact(1 << 70)).is_err());
    }
}
