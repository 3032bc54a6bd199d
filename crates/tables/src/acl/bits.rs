//! The classifier of small rule sets (at most [`MAX_RULES`] rules): one bit vector per field
//! value, ANDed (Lakshman and Stiliadis, "High-speed policy-based packet forwarding using
//! efficient multi-dimensional range matching", SIGCOMM 1998).
//!
//! Bit `r` of a 64-bit vector stands for the rule of rank `r`. For each field, a small trie
//! maps the key's value to the vector of the rules whose match of that field holds the value;
//! the AND over the fields is the set of rules that match the key, and its lowest set bit is
//! the best rule. A lookup costs one trie walk per field, whatever the rules are: no leaf scan,
//! no tree per partition.
//!
//! Each field's trie cuts the value from the top, `ROOT_BITS` or fewer bits at the root and
//! 8 at each level below. An entry is either a leaf (the vector itself: every value under the
//! entry meets the same rules) or `CHILD | offset` of a 256-entry table one level down. A
//! level is only made where some rule's match of the field begins or ends inside the entry's
//! block, so prefixes and ranges ending on byte boundaries stop early:
//!
//! ```text
//!  ipv4.src, rules 10.99.0.0/16 (rank 3) and 192.0.2.0/24 (rank 5), all others `*` (mask W):
//!    root[byte 0]:  0..9 → W   10 → child A   11..191 → W   192 → child B   193.. → W
//!    A[byte 1]:     99 → W|1<<3, else W       B[byte 1]: 0 → child C, else W
//!    C[byte 2]:     2 → W|1<<5, else W
//! ```
//!
//! A ternary match `v & mask == value` is handled the same way: a block of values either all
//! match it, none do, or the trie goes a level deeper. Masks with low bits set could make the
//! trie deep everywhere, so a build past [`MAX_ENTRIES`] gives up and the decision trees answer
//! alone. Values wider than their field match nothing, as in the trees.

use super::{width_max, FieldMatch};

/// Most rules a bit-vector classifier takes: bit 63 of an entry marks a child table.
pub(super) const MAX_RULES: usize = 63;
/// Entries (8 bytes each) a build may use before it gives up (256 KiB).
const MAX_ENTRIES: usize = 1 << 15;
/// Bits cut at a trie's root, at most.
const ROOT_BITS: u32 = 12;
/// Bits cut at each level below the root.
const STRIDE: u32 = 8;
/// An entry that points one level down (to `offset`, its low 32 bits).
const CHILD: u64 = 1 << 63;

/// One field's trie.
#[derive(Clone, Copy, Debug)]
struct FieldTrie {
    /// Offset of the root table in `Bits::entries`.
    root: u32,
    /// Shift of the value that gives the root index; `STRIDE` less at each level below.
    shift: u32,
    /// Largest value of the field: a larger one matches nothing.
    max: u32,
}

/// A compiled bit-vector classifier over at most [`MAX_RULES`] ranked rules.
#[derive(Clone, Debug)]
pub(super) struct Bits {
    fields: Box<[FieldTrie]>,
    /// Every trie's tables.
    entries: Box<[u64]>,
}

/// Which values of an aligned block a field match holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cover {
    None,
    Some,
    All,
}

/// How `m` covers the block of `2^bits` values starting at `base` (aligned to it).
fn cover(m: &FieldMatch, base: u32, bits: u32) -> Cover {
    let low = if bits >= 32 { u32::MAX } else { (1u32 << bits) - 1 };
    let last = base | low;
    match *m {
        FieldMatch::Range { lo, hi } => {
            if hi < base || lo > last {
                Cover::None
            } else if lo <= base && hi >= last {
                Cover::All
            } else {
                Cover::Some
            }
        }
        FieldMatch::Masked { value, mask } => {
            if base & mask & !low != value & !low {
                Cover::None
            } else if mask & low == 0 {
                Cover::All
            } else {
                Cover::Some
            }
        }
    }
}

impl Bits {
    /// Compiles the rules `ranked` (best first, at most [`MAX_RULES`]) over fields of `widths`;
    /// `None` when there are too many rules or the tries would pass [`MAX_ENTRIES`].
    pub(super) fn build(widths: &[u8], ranked: &[&[FieldMatch]]) -> Option<Bits> {
        if ranked.len() > MAX_RULES || ranked.iter().any(|r| r.len() != widths.len()) {
            return None;
        }
        let mut entries: Vec<u64> = Vec::new();
        let mut fields = Vec::with_capacity(widths.len());
        for (d, &w) in widths.iter().enumerate() {
            let w = u32::from(w.clamp(1, 32));
            let below = w.saturating_sub(ROOT_BITS).div_ceil(STRIDE) * STRIDE;
            let root = entries.len() as u32;
            let matches: Vec<Ranked> = ranked.iter().enumerate().filter_map(|(r, m)| Some(Ranked { bit: 1 << r, m: *m.get(d)? })).collect();
            table(&matches, 0, 0, w - below, below, &mut entries)?;
            fields.push(FieldTrie { root, shift: below, max: width_max(w as u8) });
        }
        Some(Bits { fields: fields.into(), entries: entries.into() })
    }

    /// The ranks of the rules matching `key` (one value per field), as a bit vector.
    #[inline]
    pub(super) fn matching(&self, key: &[u32]) -> u64 {
        let mut set = u64::MAX;
        for (t, &v) in self.fields.iter().zip(key) {
            set &= self.field(t, v);
        }
        set
    }

    /// The vector of the rules whose match of field `t` holds `v`.
    #[inline(always)]
    fn field(&self, t: &FieldTrie, v: u32) -> u64 {
        if v > t.max {
            return 0;
        }
        let mut s = t.shift;
        let mut e = self.entries.get(t.root as usize + (v >> s) as usize).copied().unwrap_or(0);
        while e & CHILD != 0 {
            s = s.wrapping_sub(STRIDE) & 31;
            e = self.entries.get(e as u32 as usize + (v >> s & 0xff) as usize).copied().unwrap_or(0);
        }
        e
    }

    /// Heap bytes of the tries.
    pub(super) fn bytes(&self) -> usize {
        self.entries.len() * 8 + self.fields.len() * std::mem::size_of::<FieldTrie>()
    }
}

/// A rule's match of one field, and the rule's bit.
#[derive(Clone, Copy)]
struct Ranked {
    bit: u64,
    m: FieldMatch,
}

/// Appends the table of `2^bits` entries for the block at `base` whose entries each cover
/// `2^below` values (`below` a multiple of `STRIDE`), and the tables under it; `None` past
/// [`MAX_ENTRIES`]. `held` is the bits of the rules that hold a block around this one.
///
/// A match that holds the whole block sets its bit in every entry, one that holds none of it
/// is left out, and only the rest are looked at entry by entry, over the entries their bounds
/// reach: a table under one byte of a /32 looks at the few rules that end inside it, not at
/// every rule of the field.
fn table(matches: &[Ranked], held: u64, base: u32, bits: u32, below: u32, out: &mut Vec<u64>) -> Option<()> {
    let at = out.len();
    let n = 1usize << bits;
    if at + n > MAX_ENTRIES {
        return None;
    }
    let mut fill = held;
    let mut some: Vec<Ranked> = Vec::new();
    for r in matches {
        match cover(&r.m, base, bits + below) {
            Cover::All => fill |= r.bit,
            Cover::Some => some.push(*r),
            Cover::None => {}
        }
    }
    out.resize(at + n, fill);
    let last = (n - 1) as u32;
    // The entries with a table under them: those where some match begins or ends.
    let mut split: Vec<u32> = Vec::new();
    for r in &some {
        let (lo, hi) = r.m.bounds(32);
        let first = lo.saturating_sub(base).checked_shr(below).unwrap_or(0).min(last);
        let end = hi.saturating_sub(base).checked_shr(below).unwrap_or(0).min(last);
        for j in first..=end {
            match cover(&r.m, base | j.checked_shl(below).unwrap_or(0), below) {
                Cover::All => {
                    if let Some(e) = out.get_mut(at + j as usize) {
                        *e |= r.bit;
                    }
                }
                Cover::Some => split.push(j),
                Cover::None => {}
            }
        }
    }
    split.sort_unstable();
    split.dedup();
    for j in split {
        // `below > 0` here: a block of one value is covered all or not at all.
        let child = out.len();
        table(&some, fill, base | j.checked_shl(below).unwrap_or(0), STRIDE, below.checked_sub(STRIDE)?, out)?;
        if let Some(e) = out.get_mut(at + j as usize) {
            *e = CHILD | child as u64;
        }
    }
    Some(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use FieldMatch as F;

    fn naive(ranked: &[&[FieldMatch]], key: &[u32], widths: &[u8]) -> u64 {
        let mut set = 0;
        for (r, fields) in ranked.iter().enumerate() {
            let ok = fields.iter().zip(key).zip(widths).all(|((f, &v), &w)| v <= width_max(w) && f.matches(v));
            if ok {
                set |= 1 << r;
            }
        }
        set
    }

    #[test]
    fn prefixes_stop_at_their_byte() {
        let a = [F::prefix(0x0a63_0000, 16, 32)];
        let b = [F::prefix(0xc000_0200, 24, 32)];
        let ranked: Vec<&[FieldMatch]> = vec![&a, &b];
        let bits = Bits::build(&[32], &ranked).unwrap();
        // Root, one table under 10, one under 192 and one under 192.0.
        assert_eq!(bits.entries.len(), 256 * 4);
        for (v, want) in [(0x0a63_1234, 1), (0x0a64_0000, 0), (0xc000_02ff, 2), (0xc000_0300, 0), (0, 0)] {
            assert_eq!(bits.matching(&[v]), want, "{v:#x}");
        }
    }

    #[test]
    fn ternary_and_narrow_fields() {
        let f = [F::Masked { value: 0x02, mask: 0x12 }, F::range(3, 300)];
        let g = [F::ANY, F::exact(511)];
        let ranked: Vec<&[FieldMatch]> = vec![&f, &g];
        let widths = [8, 9];
        let bits = Bits::build(&widths, &ranked).unwrap();
        for a in 0..=256u32 {
            for b in [0, 2, 3, 300, 301, 511, 512, 70000] {
                assert_eq!(bits.matching(&[a, b]), naive(&ranked, &[a, b], &widths), "{a} {b}");
            }
        }
    }

    /// One field's match: a prefix, a range, or a ternary match, of a `w`-bit field.
    fn field_match(w: u8) -> impl Strategy<Value = FieldMatch> {
        let max = width_max(w);
        prop_oneof![
            (any::<u32>(), 0..=w).prop_map(move |(a, len)| F::prefix(a, len, w)),
            (any::<u32>(), any::<u32>()).prop_map(move |(a, b)| F::range((a & max).min(b & max), (a & max).max(b & max))),
            // High mask bits only, so the tries stay within `MAX_ENTRIES`.
            (any::<u32>(), any::<u32>()).prop_map(move |(v, m)| {
                let mask = m & max & !(max >> 4);
                F::Masked { value: v & mask, mask }
            }),
            Just(F::ANY),
        ]
    }

    proptest::proptest! {
        /// The tries answer as the rules do, at random keys and at every rule's bounds.
        #[test]
        fn the_tries_match_the_rules(
            rules in proptest::collection::vec((field_match(32), field_match(16), field_match(8)), 1..=16),
            keys in proptest::collection::vec(any::<(u32, u16, u8)>(), 64),
        ) {
            let widths = [32, 16, 8];
            let rules: Vec<[FieldMatch; 3]> = rules.into_iter().map(|(a, b, c)| [a, b, c]).collect();
            let ranked: Vec<&[FieldMatch]> = rules.iter().map(|r| &r[..]).collect();
            // Random 32-bit ranges can need more than `MAX_ENTRIES`: such a build gives up.
            let bits = Bits::build(&widths, &ranked);
            proptest::prop_assume!(bits.is_some());
            let bits = bits.expect("assumed");
            let mut probes: Vec<[u32; 3]> = keys.iter().map(|&(a, b, c)| [a, b.into(), c.into()]).collect();
            for r in &rules {
                let ends: Vec<[u32; 2]> = r.iter().zip(widths).map(|(m, w)| { let (lo, hi) = m.bounds(w); [lo, hi] }).collect();
                for pick in 0..8usize {
                    let key: Vec<u32> = (0..3).map(|d| { let [lo, hi] = ends[d]; let v = if pick >> d & 1 == 0 { lo } else { hi }; v.wrapping_add(u32::from(pick >= 4)) }).collect();
                    probes.push([key[0], key[1], key[2]]);
                }
            }
            for key in probes {
                proptest::prop_assert_eq!(bits.matching(&key), naive(&ranked, &key, &widths), "{:?}", key);
            }
        }
    }

    #[test]
    fn too_many_rules_or_entries_give_up() {
        let one = [F::exact(1)];
        let ranked: Vec<&[FieldMatch]> = vec![&one; MAX_RULES + 1];
        assert!(Bits::build(&[8], &ranked).is_none());
        // An odd/even mask on a 32-bit field: a table under every entry at every level.
        let odd = [F::Masked { value: 1, mask: 1 }];
        assert!(Bits::build(&[32], &[&odd[..]]).is_none());
    }
}
