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
            let matches: Vec<FieldMatch> = ranked.iter().filter_map(|r| r.get(d).copied()).collect();
            table(&matches, 0, w - below, below, &mut entries)?;
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

/// Appends the table of `2^bits` entries for the block at `base` whose entries each cover
/// `2^below` values (`below` a multiple of `STRIDE`), and the tables under it; `None` past
/// [`MAX_ENTRIES`].
fn table(matches: &[FieldMatch], base: u32, bits: u32, below: u32, out: &mut Vec<u64>) -> Option<()> {
    let at = out.len();
    let n = 1usize << bits;
    if at + n > MAX_ENTRIES {
        return None;
    }
    out.resize(at + n, 0);
    for j in 0..n {
        let start = base | ((j as u32).checked_shl(below).unwrap_or(0));
        let mut set = 0u64;
        let mut split = false;
        for (r, m) in matches.iter().enumerate() {
            match cover(m, start, below) {
                Cover::All => set |= 1 << r,
                Cover::Some => split = true,
                Cover::None => {}
            }
        }
        let e = if split {
            // `below > 0` here: a block of one value is covered all or not at all.
            let child = out.len();
            table(matches, start, STRIDE, below.checked_sub(STRIDE)?, out)?;
            CHILD | child as u64
        } else {
            set
        };
        if let Some(slot) = out.get_mut(at + j) {
            *slot = e;
        }
    }
    Some(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
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
