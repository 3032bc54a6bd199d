//! Multi-field ACL classifier: prefixes, ranges and ternary fields with priorities.
//!
//! A rule has one [`FieldMatch`] per field (each field ≤ 32 bits; an IPv6 address is four
//! fields): a `Range { lo, hi }` (prefixes, port ranges, exact values and wildcards all become
//! ranges) or a ternary `Masked { value, mask }` (e.g. TCP flags). The lowest `priority` wins;
//! ties go to the rule added first.
//!
//! # Algorithm: partitioned HyperSplit
//!
//! Lookup cost must not grow with the rule count, so the rules are compiled into binary
//! decision trees over the field space — HyperSplit (Qi, Xu, Yang, Li; "Packet Classification
//! Algorithms: From Theory to Practice", INFOCOM 2009), with CutSplit's pre-partitioning (Li,
//! Li, Lu, Zheng, Xie; INFOCOM 2018) to keep memory bounded:
//!
//! 1. **Rank.** Rules are sorted by (priority, insertion index); a rule's position is its *rank*,
//!    and "best match" becomes "smallest rank".
//! 2. **Partition** (CutSplit). Each rule goes to the subset of its most *specific* wide field
//!    (a field of ≥ 16 bits whose range fixes at least half its bits: an IPv4 prefix of length
//!    ≥ 16, a port range of ≤ 256 ports). Rules specific in no such field get a second chance
//!    with a quarter of the bits (an IPv4 /8) and join that field's subset; what is left forms
//!    a "wide" subset. Subsets smaller than `max(32, n/64)` rules fall through to the next
//!    level. Within a subset every
//!    rule is narrow in one common field, so splitting on it separates rules without copying
//!    them into both halves — the copying is what blows up a single tree on firewall-style sets
//!    (measured: one tree over 10k fw rules needed 15.7M leaf entries; partitioned, 23k).
//! 3. **Split** (HyperSplit, folded into 7-way nodes). A node owns a box of the field space and
//!    the rules that intersect it. For every field we try the thresholds `t` at rule edges
//!    (inside the box) and count the rules that intersect each half, `L(t)` and `R(t)`; we pick
//!    the field and `t` minimising `max(L, R)`, then `L + R` (least copying). The halves are
//!    split again on the same field, twice, giving up to 6 thresholds in one 64-byte node, so a
//!    lookup touches one cache line per three binary levels. A node becomes a leaf when it holds
//!    ≤ `leaf_size` rules or no split makes progress. Ternary fields take part in splitting
//!    through their bounding range; the leaf verifies them exactly.
//! 4. **Root cut** (HiCuts at the root). Each tree starts with a table of `2^k` cells indexed
//!    by the top `k` bits of one field (`v >> shift`): the field and `k` that minimise the
//!    average cell list a rule's key meets, while copies stay below `2n` and cells below `4n`.
//!    Cells with the same rule list share one HyperSplit subtree built over their hull (every
//!    rule of the list meets every such cell, so pruning stays exact). Measured on 10k fw
//!    rules: 12.8 → 2.5 inner nodes and 7.0 → 4.2 rule checks per lookup.
//! 5. **Prune.** At every node, rules after the first (best) rule that covers the whole box
//!    exactly can never win there and are dropped (HyperSplit's redundancy removal).
//!
//! ```text
//!        [dip: t1 < t2 < .. < t6]                  inner node: one 64-byte line
//!        /     |      |       \                   (field, best rank below, 6 thresholds,
//!   [dport: ..]  leaf: 3 7 9 ∎  ..  leaf: 2 ∎       7 children)
//!     /  |  \                                      leaf: ranks ascending, ∎ = u32::MAX
//!  leaf: 0 4 ∎ ..
//! ```
//!
//! **Lookup** walks each subset's tree (six branch-free compares per node) and scans its leaf in
//! rank order, stopping at the first full match or at a rank no better than the best so far;
//! every node records the best rank below it, so a walk stops as soon as it cannot improve on
//! a match found in an earlier tree. Cost is
//! O(depth + leaf_size) per tree, independent of the rule count for the rule sets measured
//! (`benches/acl.rs`). The batch form walks 16 keys through a tree in lock step with prefetch,
//! so the cache misses of different keys overlap.
//!
//! **Memory bound.** The build is depth-first and stops splitting once a tree holds
//! `min(max_words, words_per_rule × n + 4096)` 32-bit words for its `n` rules (nodes are 16
//! words, leaf entries 1); every node still pending then becomes a leaf. A depth-first stack
//! holds at most 6 pending siblings per level, so a tree is at most that budget plus
//! `6 × max_depth × n` words. Past the budget lookups stay exact and only get
//! slower (longer leaves). The reference twin is `reference::acl` (a linear scan).
//!
//! **Small sets.** A set of at most 63 rules is also compiled into per-field bit vectors
//! (`bits.rs`: one trie per field gives the rules that hold the key's value, the AND over the
//! fields is the rules that match, the lowest bit the best), which lookups use instead of the
//! trees: a walk per field and no leaf scan. Measured on the switch's 24 rules (`fastpath
//! bench switch-acl`, the cache's misses), a lookup through the trees took about 255 instructions,
//! through the bit vectors about 185.
//! The trees are still built: the incremental form below walks them.
//!
//! # Incremental changes
//!
//! A build costs milliseconds at thousands of rules, so a table that changes under traffic
//! holds its rules in a [`LiveAcl`]: a commit publishes the last full build's trees (shared)
//! plus a *delta* — the rules added since, compiled on their own into a small overlay, and a
//! tombstone bit per built rule deleted since. A lookup takes the best of the overlay and the
//! built trees with tombstoned ranks skipped; where a deleted rule had pruned lower rules from a
//! leaf (step 5), an exact linear fallback covers what the leaf no longer lists (`delta.rs`).
//! Full builds ("folds") run on another thread and are swapped in with the changes made
//! meanwhile re-applied on top (`live.rs`). With no delta, lookups run the code above unchanged.

mod bits;
mod build;
pub mod classbench;
mod delta;
mod live;

pub use live::{FoldJob, Folded, LiveAcl};
use std::fmt;
use std::sync::Arc;

/// How one field of a rule matches a key value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldMatch {
    /// `lo <= v <= hi` (prefixes, ranges, exact values, wildcards).
    Range {
        /// Lowest matching value.
        lo: u32,
        /// Highest matching value.
        hi: u32,
    },
    /// `v & mask == value` (ternary; `value` has no bits outside `mask`).
    Masked {
        /// Required bits.
        value: u32,
        /// Which bits are compared.
        mask: u32,
    },
}

impl FieldMatch {
    /// Matches every value, in a field of any width (a ternary match with no bits compared).
    pub const ANY: FieldMatch = FieldMatch::Masked { value: 0, mask: 0 };

    /// Matches exactly `v`.
    pub fn exact(v: u32) -> FieldMatch {
        FieldMatch::Range { lo: v, hi: v }
    }

    /// Matches `lo..=hi`.
    pub fn range(lo: u32, hi: u32) -> FieldMatch {
        FieldMatch::Range { lo, hi }
    }

    /// The prefix `addr/len` of a `width`-bit field (host bits of `addr` are ignored).
    pub fn prefix(addr: u32, len: u8, width: u8) -> FieldMatch {
        let w = width.min(32);
        let host = width_max(w).checked_shr(u32::from(len.min(w))).unwrap_or(0);
        let lo = addr & !host & width_max(w);
        FieldMatch::Range { lo, hi: lo | host }
    }

    /// True when `v` matches.
    #[inline]
    pub fn matches(&self, v: u32) -> bool {
        match *self {
            FieldMatch::Range { lo, hi } => lo <= v && v <= hi,
            FieldMatch::Masked { value, mask } => v & mask == value,
        }
    }

    /// The smallest range holding every value that matches, within a `width`-bit field.
    pub fn bounds(&self, width: u8) -> (u32, u32) {
        match *self {
            FieldMatch::Range { lo, hi } => (lo, hi),
            FieldMatch::Masked { value, mask } => (value, value | (!mask & width_max(width))),
        }
    }

    /// True when the match is exactly its bounding range (a `Range`, or a mask whose don't-care
    /// bits are the low bits of the field).
    pub fn is_range(&self, width: u8) -> bool {
        match *self {
            FieldMatch::Range { .. } => true,
            FieldMatch::Masked { mask, .. } => {
                let free = !mask & width_max(width);
                free & free.wrapping_add(1) == 0
            }
        }
    }
}

/// All-ones value of a `width`-bit field.
#[inline]
pub(crate) fn width_max(width: u8) -> u32 {
    if width >= 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    }
}

/// One classifier rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AclRule {
    /// Lower wins; ties go to the rule added first.
    pub priority: u32,
    /// One match per field, in the order of [`AclConfig::field_widths`].
    pub fields: Vec<FieldMatch>,
    /// Opaque result returned on a match.
    pub action: u32,
}

impl AclRule {
    /// True when every field matches `key` (which must have one value per field).
    pub fn matches(&self, key: &[u32]) -> bool {
        self.fields.len() == key.len() && self.fields.iter().zip(key).all(|(f, &v)| f.matches(v))
    }
}

/// Classifier layout and build knobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclConfig {
    /// Width in bits (1..=32) of each key field.
    pub field_widths: Vec<u8>,
    /// Rules a leaf may hold before it is split (default 4; 2, 4 and 8 measured within 10 %).
    pub leaf_size: usize,
    /// Pre-partition rules by their most specific field (default true).
    pub partition: bool,
    /// Deepest tree level (default 48).
    pub max_depth: usize,
    /// Per-tree memory budget in 32-bit words (default 2²⁴ = 64 MiB).
    pub max_words: usize,
    /// Per-tree memory budget per rule of the tree, in 32-bit words (default 64): a tree of
    /// `n` rules gets `min(max_words, words_per_rule × n + 4096)`.
    pub words_per_rule: usize,
    /// Rule sets of at most 63 rules are also compiled into bit vectors (`bits.rs`), which
    /// lookups then use instead of the trees (default true; false leaves the trees alone, for
    /// tests that compare the two).
    pub bit_vectors: bool,
}

impl AclConfig {
    /// Default knobs for keys of the given field widths.
    pub fn new(field_widths: Vec<u8>) -> AclConfig {
        AclConfig { field_widths, leaf_size: 4, partition: true, max_depth: 48, max_words: 1 << 24, words_per_rule: 64, bit_vectors: true }
    }

    /// The ClassBench 5-tuple: source and destination IPv4 address, source and destination
    /// port, protocol (widths 32, 32, 16, 16, 8).
    pub fn five_tuple() -> AclConfig {
        AclConfig::new(classbench::FIELD_WIDTHS.to_vec())
    }
}

/// Why a rule set was rejected; `rule` is the index in insertion order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The config has no fields, or a field width outside 1..=32.
    BadWidth {
        /// Field index.
        field: usize,
    },
    /// The rule has a different number of fields than the config.
    FieldCount {
        /// Rule index.
        rule: usize,
        /// Fields in the config.
        expected: usize,
        /// Fields in the rule.
        got: usize,
    },
    /// A range with `lo > hi`.
    RangeInverted {
        /// Rule index.
        rule: usize,
        /// Field index.
        field: usize,
    },
    /// A value or mask with bits above the field's width.
    OutsideWidth {
        /// Rule index.
        rule: usize,
        /// Field index.
        field: usize,
    },
    /// A ternary `value` with bits outside its `mask` (could never match).
    ValueOutsideMask {
        /// Rule index.
        rule: usize,
        /// Field index.
        field: usize,
    },
    /// More than 2³¹ − 1 rules.
    TooManyRules,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BuildError::BadWidth { field } => write!(f, "field {field}: width must be 1..=32"),
            BuildError::FieldCount { rule, expected, got } => {
                write!(f, "rule {rule}: has {got} fields, the ACL has {expected}")
            }
            BuildError::RangeInverted { rule, field } => {
                write!(f, "rule {rule}, field {field}: range low end above high end")
            }
            BuildError::OutsideWidth { rule, field } => {
                write!(f, "rule {rule}, field {field}: value wider than the field")
            }
            BuildError::ValueOutsideMask { rule, field } => {
                write!(f, "rule {rule}, field {field}: value has bits outside the mask")
            }
            BuildError::TooManyRules => f.write_str("more than 2^31 - 1 rules"),
        }
    }
}

impl std::error::Error for BuildError {}

/// Collects rules, then compiles them into an [`Acl`]. Control thread only.
#[derive(Clone, Debug)]
pub struct AclBuilder {
    cfg: AclConfig,
    rules: Vec<AclRule>,
}

impl AclBuilder {
    /// An empty builder.
    pub fn new(cfg: AclConfig) -> AclBuilder {
        AclBuilder { cfg, rules: Vec::new() }
    }

    /// Adds a rule and returns its index (the `rule_index` reported on a match).
    pub fn push(&mut self, rule: AclRule) -> usize {
        self.rules.push(rule);
        self.rules.len() - 1
    }

    /// Adds many rules.
    pub fn extend(&mut self, rules: impl IntoIterator<Item = AclRule>) {
        self.rules.extend(rules);
    }

    /// The rules added so far.
    pub fn rules(&self) -> &[AclRule] {
        &self.rules
    }

    /// Validates every rule and compiles the classifier.
    /// # Errors
    /// The first invalid rule, as a [`BuildError`] naming its index and field.
    pub fn build(&self) -> Result<Acl, BuildError> {
        validate(&self.cfg, &self.rules)?;
        Ok(build::build(&self.cfg, &self.rules))
    }
}

fn validate(cfg: &AclConfig, rules: &[AclRule]) -> Result<(), BuildError> {
    if cfg.field_widths.is_empty() {
        return Err(BuildError::BadWidth { field: 0 });
    }
    if let Some(field) = cfg.field_widths.iter().position(|&w| w == 0 || w > 32) {
        return Err(BuildError::BadWidth { field });
    }
    if rules.len() >= (1 << 31) {
        return Err(BuildError::TooManyRules);
    }
    for (rule, r) in rules.iter().enumerate() {
        validate_rule(cfg, rule, r)?;
    }
    Ok(())
}

/// Checks one rule against a config that [`validate`] accepted; errors name it `rule`.
fn validate_rule(cfg: &AclConfig, rule: usize, r: &AclRule) -> Result<(), BuildError> {
    let nf = cfg.field_widths.len();
    if r.fields.len() != nf {
        return Err(BuildError::FieldCount { rule, expected: nf, got: r.fields.len() });
    }
    for (field, (m, &w)) in r.fields.iter().zip(&cfg.field_widths).enumerate() {
        let max = width_max(w);
        match *m {
            FieldMatch::Range { lo, hi } => {
                if lo > hi {
                    return Err(BuildError::RangeInverted { rule, field });
                }
                if hi > max {
                    return Err(BuildError::OutsideWidth { rule, field });
                }
            }
            FieldMatch::Masked { value, mask } => {
                if value > max || mask > max {
                    return Err(BuildError::OutsideWidth { rule, field });
                }
                if value & !mask != 0 {
                    return Err(BuildError::ValueOutsideMask { rule, field });
                }
            }
        }
    }
    Ok(())
}

/// Leaf marker in a child pointer: the rest is an index into `Tree::leaf_ranks`.
const LEAF: u32 = 1 << 31;
/// Ends every leaf's rank list; never a real rank.
const END: u32 = u32::MAX;
/// Keys walked through a tree together by the batch lookup.
const LANES: usize = 16;

/// Stands in for a missing node (never happens: the builder emits only valid indices).
static DEAD_END: Node = Node { field: 0, min_rank: 0, thresh: [u32::MAX; FANOUT - 1], child: [LEAF; FANOUT] };

/// Children per inner node (with the rest of the node, one 64-byte line).
const FANOUT: usize = 7;

/// Inner node, one cache line: go to `child[#{k : key[field] > thresh[k]}]`. Thresholds are
/// ascending; unused ones are `u32::MAX` (never exceeded), so the count stays in range.
/// `min_rank` is the best rank below the node: a walk stops as soon as it cannot improve on
/// the best match found in an earlier tree.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Node {
    field: u32,
    min_rank: u32,
    thresh: [u32; FANOUT - 1],
    child: [u32; FANOUT],
}

impl Node {
    /// The child for key value `v`: branch-free, 6 compares the compiler vectorises.
    #[inline]
    fn next(&self, v: u32) -> u32 {
        let idx: usize = self.thresh.iter().map(|&t| usize::from(v > t)).sum();
        self.child[idx.min(FANOUT - 1)]
    }
}

/// One partition's decision tree.
#[derive(Clone, Debug)]
struct Tree {
    /// Field of the root cut table.
    cut_field: u32,
    /// The root cut's cell for key value `v` is `v >> cut_shift`.
    cut_shift: u32,
    /// Root cut table: per cell, a node index or `LEAF | leaf start`.
    cut: Vec<u32>,
    /// Best rank in the tree: the tree is skipped when it cannot beat the best match so far.
    min_rank: u32,
    nodes: Vec<Node>,
    /// Leaves: ascending ranks, each list ended by `END`.
    leaf_ranks: Vec<u32>,
    depth: usize,
}

/// Size figures of a compiled classifier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AclStats {
    /// Rules live (compiled and still live, plus those added since).
    pub rules: usize,
    /// Rules added (or replaced) since the trees were built: the delta's overlay.
    pub added: usize,
    /// Built rules deleted (or replaced) since the trees were built: the delta's tombstones.
    pub deleted: usize,
    /// Decision trees (partitions).
    pub trees: usize,
    /// Inner nodes over all trees.
    pub nodes: usize,
    /// Rule references in leaves (each rule appears ≥ once), without terminators.
    pub leaf_refs: usize,
    /// Deepest leaf.
    pub max_depth: usize,
    /// Heap bytes used by trees and rule tables.
    pub bytes: usize,
}

/// A compiled, immutable classifier. `Send + Sync`: share it between workers.
///
/// The compiled tables are shared (`Arc`), so a clone is a few reference counts: the
/// incremental form ([`LiveAcl`]) publishes each change as the same trees plus a small
/// [`delta`](self#incremental-changes) of rules added and deleted since they were built.
#[derive(Clone, Debug)]
pub struct Acl {
    nf: usize,
    /// Per rank, per field: bounding `lo, hi`.
    bounds: Arc<[u32]>,
    /// Per rank, per field: `mask, value` (0, 0 where the field is a plain range).
    tern: Arc<[u32]>,
    /// Per rank: some field is ternary and must be checked with `tern`.
    has_tern: Arc<[bool]>,
    /// Per rank: (action, rule index).
    result: Arc<[(u32, u32)]>,
    /// Per rank: packed bounds, when there are at most [`PACKED`] fields (else empty).
    rows: Arc<[Row]>,
    trees: Arc<[Tree]>,
    /// Per rank, one bit: the rule pruned lower rules from a leaf it covers (it is that leaf's
    /// last entry); deleting it sends lookups that land there to the exact fallback.
    pruner: Arc<[u64]>,
    /// Rules added and deleted since the trees were built; `None` in the steady state.
    delta: Option<Arc<delta::Delta>>,
    /// The bit-vector classifier of the same rules, when there are few enough (`bits.rs`);
    /// without a delta, lookups use it instead of the trees.
    bits: Option<Arc<bits::Bits>>,
}

impl Acl {
    /// Compiles `rules` with `cfg` (shorthand for an [`AclBuilder`]). Control thread only.
    /// # Errors
    /// As [`AclBuilder::build`].
    pub fn build(cfg: &AclConfig, rules: &[AclRule]) -> Result<Acl, BuildError> {
        validate(cfg, rules)?;
        Ok(build::build(cfg, rules))
    }

    /// Number of key fields.
    pub fn fields(&self) -> usize {
        self.nf
    }

    /// Number of rules (with the delta: the built ones still live plus those added since).
    pub fn len(&self) -> usize {
        match &self.delta {
            None => self.result.len(),
            Some(d) => d.live,
        }
    }

    /// True when there are no rules (every lookup misses).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when rules were added or deleted since the trees were built (lookups then also
    /// walk the delta; see [`LiveAcl`]).
    pub fn has_delta(&self) -> bool {
        self.delta.is_some()
    }

    /// True when lookups use the bit-vector classifier of small rule sets (`bits.rs`) rather
    /// than the trees.
    pub fn is_bit_vector(&self) -> bool {
        self.delta.is_none() && self.bits.is_some()
    }

    /// Size figures.
    pub fn stats(&self) -> AclStats {
        let nodes: usize = self.trees.iter().map(|t| t.nodes.len()).sum();
        let slots: usize = self.trees.iter().map(|t| t.leaf_ranks.len()).sum();
        let cells: usize = self.trees.iter().map(|t| t.cut.len()).sum();
        let ends: usize = self.trees.iter().map(|t| t.leaf_ranks.iter().filter(|&&r| r == END).count()).sum();
        AclStats {
            rules: self.len(),
            added: self.delta.as_ref().map_or(0, |d| d.added_len()),
            deleted: self.delta.as_ref().map_or(0, |d| d.deleted),
            trees: self.trees.len(),
            nodes,
            leaf_refs: slots - ends,
            max_depth: self.trees.iter().map(|t| t.depth).max().unwrap_or(0),
            bytes: nodes * std::mem::size_of::<Node>()
                + (slots + cells) * 4
                + (self.bounds.len() + self.tern.len()) * 4
                + self.has_tern.len()
                + self.rows.len() * std::mem::size_of::<Row>()
                + self.result.len() * 8
                + self.bits.as_ref().map_or(0, |b| b.bytes()),
        }
    }

    /// The best rule matching `key` as `(action, rule_index)`, or `None`. A key whose length
    /// is not the number of fields matches nothing. Worker; never panics, never allocates.
    #[inline]
    pub fn classify(&self, key: &[u32]) -> Option<(u32, u32)> {
        if key.len() != self.nf {
            return None;
        }
        if let Some(d) = &self.delta {
            return self.classify_delta(d, key).0;
        }
        if let Some(b) = &self.bits {
            return self.result.get(b.matching(key).trailing_zeros() as usize).copied();
        }
        let best = if self.rows.is_empty() { self.walk(&Wide(key)) } else { self.walk(&Packed::new(key)) };
        self.result.get(best as usize).copied()
    }

    /// [`classify`](Self::classify) of a key of `nf` fields held in the first `nf` of eight
    /// words (what follows them is ignored). A fixed-size key goes into the lookup as it is:
    /// the copy of a slice into the packed form compiled to a call of `memcpy` (see
    /// docs/benchmarks.md, "Exact counts"). Worker; never panics, never allocates.
    #[inline]
    pub fn classify_words(&self, key: &[u32; KEY_WORDS], nf: usize) -> Option<(u32, u32)> {
        if nf != self.nf || self.delta.is_some() || self.bits.is_some() || self.rows.is_empty() {
            return self.classify(key.get(..nf)?);
        }
        // Rows check every field of the eight, and a field past `nf` has `lo = 0` and
        // `span = u32::MAX` there: it matches whatever the word holds.
        let k = Packed(*key);
        // A key outside the rules of a one-tree classifier most often ends in an empty cell
        // of the root cut: answered here, without the walk's call and set-up (about 35
        // instructions; the overlay's outbound ACL on a connection's first packet).
        if let [t] = &*self.trees {
            let c = Self::root(t, &k);
            if c & LEAF != 0 && t.leaf_ranks.get((c & !LEAF) as usize).is_none_or(|&r| r == END) {
                return None;
            }
        }
        self.result.get(self.walk(&k) as usize).copied()
    }

    /// `key`'s leaf in tree `t`, or `None` when a node on the way holds no rank below `best`
    /// (the tree cannot improve on it).
    #[inline(always)]
    fn descend<K: KeyView>(&self, t: &Tree, key: &K, best: u32) -> Option<u32> {
        let mut c = Self::root(t, key);
        while c & LEAF == 0 {
            let n = self.node(t, c);
            if n.min_rank >= best {
                return None;
            }
            c = n.next(key.field(n.field));
        }
        Some(c & !LEAF)
    }

    /// Best rank for `key` over every tree.
    #[inline]
    fn walk<K: KeyView>(&self, key: &K) -> u32 {
        let mut best = END;
        for t in self.trees.iter() {
            if t.min_rank >= best {
                break;
            }
            if let Some(leaf) = self.descend(t, key, best) {
                best = self.scan(t, leaf, key, best);
            }
        }
        best
    }

    /// Classifies `min(keys.len(), out.len())` keys; returns how many. `N` must equal the
    /// number of fields, else every result is `None`. Worker; never panics, never allocates.
    pub fn classify_batch<const N: usize>(&self, keys: &[[u32; N]], out: &mut [Option<(u32, u32)>]) -> usize {
        let n = keys.len().min(out.len());
        if N != self.nf {
            out.iter_mut().take(n).for_each(|o| *o = None);
            return n;
        }
        if self.delta.is_some() || self.bits.is_some() {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.classify(k);
            }
            return n;
        }
        for (k, o) in keys.chunks(LANES).zip(out.chunks_mut(LANES)) {
            if self.rows.is_empty() {
                let views: [Wide<'_>; LANES] = std::array::from_fn(|i| Wide(k.get(i).map_or(&[][..], |k| &k[..])));
                self.classify_lanes(&views, k.len(), o);
            } else {
                let views: [Packed; LANES] = std::array::from_fn(|i| Packed::new(k.get(i).map_or(&[][..], |k| &k[..])));
                self.classify_lanes(&views, k.len(), o);
            }
        }
        n
    }

    /// As [`classify_batch`](Self::classify_batch) for keys stored flat, `fields()` values
    /// per key. Returns how many keys were classified.
    pub fn classify_flat(&self, keys: &[u32], out: &mut [Option<(u32, u32)>]) -> usize {
        let n = (keys.len() / self.nf.max(1)).min(out.len());
        for (k, o) in keys.chunks_exact(self.nf.max(1)).zip(out.iter_mut()).take(n) {
            *o = self.classify(k);
        }
        n
    }

    /// Up to `LANES` keys through every tree in lock step.
    #[inline]
    fn classify_lanes<K: KeyView>(&self, keys: &[K; LANES], m: usize, out: &mut [Option<(u32, u32)>]) {
        let m = m.min(out.len()).min(LANES);
        let mut best = [END; LANES];
        let mut cur = [0u32; LANES];
        for t in self.trees.iter() {
            let mut pending = 0u32;
            for i in 0..m {
                if t.min_rank >= best[i] {
                    continue;
                }
                let root = Self::root(t, &keys[i]);
                if root & LEAF != 0 {
                    best[i] = self.scan(t, root & !LEAF, &keys[i], best[i]);
                } else {
                    cur[i] = root;
                    pending |= 1 << i;
                }
            }
            // One level per round for every lane still inside the tree; prefetch where it lands
            // so the misses of different lanes overlap.
            while pending != 0 {
                let mut bits = pending;
                while bits != 0 {
                    let i = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let n = self.node(t, cur[i]);
                    if n.min_rank >= best[i] {
                        pending &= !(1 << i);
                        continue;
                    }
                    let c = n.next(keys[i].field(n.field));
                    cur[i] = c;
                    if c & LEAF != 0 {
                        pending &= !(1 << i);
                        best[i] = self.scan(t, c & !LEAF, &keys[i], best[i]);
                    } else if let Some(next) = t.nodes.get(c as usize) {
                        fastpath_packet::prefetch::prefetch_read(next);
                    }
                }
            }
        }
        for i in 0..m {
            out[i] = self.result.get(best[i] as usize).copied();
        }
    }

    /// The root cut's pointer for `key` in tree `t`.
    #[inline]
    fn root<K: KeyView>(t: &Tree, key: &K) -> u32 {
        let v = key.field(t.cut_field);
        t.cut.get((v >> (t.cut_shift & 31)) as usize).copied().unwrap_or(LEAF)
    }

    /// Inner node `c` of tree `t` (the builder only emits valid indices).
    #[inline]
    fn node<'t>(&self, t: &'t Tree, c: u32) -> &'t Node {
        t.nodes.get(c as usize).unwrap_or(&DEAD_END)
    }

    /// Scans the leaf starting at `start`; returns the best rank ≤ `best` that matches.
    #[inline]
    fn scan<K: KeyView>(&self, t: &Tree, start: u32, key: &K, best: u32) -> u32 {
        for &rank in t.leaf_ranks.get(start as usize..).unwrap_or(&[]) {
            if rank >= best {
                break;
            }
            if key.matches(self, rank) {
                return rank;
            }
        }
        best
    }

    /// Full check of rule `rank` against `key` (`key.len() == nf`) from the unpacked tables.
    #[inline]
    fn rule_matches(&self, rank: u32, key: &[u32]) -> bool {
        let r = rank as usize;
        let nf = self.nf;
        let Some(b) = self.bounds.get(2 * nf * r..2 * nf * (r + 1)) else {
            return false;
        };
        for (bd, &v) in b.chunks_exact(2).zip(key) {
            if v < bd[0] || v > bd[1] {
                return false;
            }
        }
        self.tern_matches(r, key)
    }

    /// [`tern_matches`](Self::tern_matches) of a packed key, out of line: few rules have a
    /// ternary field, and inlined into [`walk`](Self::walk) its loop's bounds were loaded and
    /// kept on the stack at every call (about 20 instructions a walk, callgrind, cps).
    #[cold]
    #[inline(never)]
    fn tern_packed(&self, r: usize, key: &[u32; PACKED]) -> bool {
        self.tern_matches(r, &key[..self.nf.min(PACKED)])
    }

    /// The ternary part of rule `r`'s check (true when it has none).
    #[inline]
    fn tern_matches(&self, r: usize, key: &[u32]) -> bool {
        let nf = self.nf;
        if self.has_tern.get(r).copied().unwrap_or(false) {
            let Some(t) = self.tern.get(2 * nf * r..2 * nf * (r + 1)) else {
                return false;
            };
            for (mv, &v) in t.chunks_exact(2).zip(key) {
                if v & mv[0] != mv[1] {
                    return false;
                }
            }
        }
        true
    }
}

/// Most fields a key may have for the packed rule check ([`Row`]).
const PACKED: usize = 8;
/// Words of the fixed-size key of [`Acl::classify_words`] (keys of more fields take
/// [`Acl::classify`]).
pub const KEY_WORDS: usize = PACKED;

/// One rule's bounds, packed for a branch-free check: field `d` matches when
/// `v - lo[d] <= span[d]` (wrapping), so all fields are checked at once with a few SIMD
/// compares. Unused fields are `lo = 0, span = u32::MAX`. One cache line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Row {
    lo: [u32; PACKED],
    span: [u32; PACKED],
}

/// A lookup key as the walk sees it.
trait KeyView {
    /// Value of field `d` (0 past the key).
    fn field(&self, d: u32) -> u32;
    /// Full check of rule `rank`.
    fn matches(&self, acl: &Acl, rank: u32) -> bool;
}

/// A key of at most [`PACKED`] fields, zero-padded, checked against [`Row`]s.
#[derive(Clone, Copy)]
struct Packed([u32; PACKED]);

impl Packed {
    #[inline]
    fn new(key: &[u32]) -> Packed {
        let mut k = [0u32; PACKED];
        for (d, &v) in k.iter_mut().zip(key) {
            *d = v;
        }
        Packed(k)
    }
}

impl KeyView for Packed {
    #[inline]
    fn field(&self, d: u32) -> u32 {
        self.0[d as usize % PACKED]
    }

    #[inline]
    fn matches(&self, acl: &Acl, rank: u32) -> bool {
        let r = rank as usize;
        let Some(row) = acl.rows.get(r) else {
            return false;
        };
        let mut out = 0u32;
        for d in 0..PACKED {
            out |= u32::from(self.0[d].wrapping_sub(row.lo[d]) > row.span[d]);
        }
        out == 0 && (!acl.has_tern.get(r).copied().unwrap_or(false) || acl.tern_packed(r, &self.0))
    }
}

/// A key of any length, checked against the unpacked tables.
struct Wide<'a>(&'a [u32]);

impl KeyView for Wide<'_> {
    #[inline]
    fn field(&self, d: u32) -> u32 {
        self.0.get(d as usize).copied().unwrap_or(0)
    }

    #[inline]
    fn matches(&self, acl: &Acl, rank: u32) -> bool {
        acl.rule_matches(rank, self.0)
    }
}

/// Everything `fastpath bench acl` needs: a compiled classifier for a generated rule set of
/// `kind`, a trace of `n_trace` keys for it, and the time the build took. Control thread only.
pub fn bench_setup(kind: classbench::Kind, n_rules: usize, n_trace: usize, seed: u64) -> (Acl, Vec<[u32; 5]>, std::time::Duration) {
    let rules = classbench::generate(kind, n_rules, seed);
    let trace = classbench::trace(&rules, n_trace, seed ^ 0x7ace);
    let t0 = std::time::Instant::now();
    // Generated rules are valid by construction; an empty classifier is the harmless fallback.
    let acl = Acl::build(&AclConfig::five_tuple(), &rules).unwrap_or_else(|_| build::build(&AclConfig::five_tuple(), &[]));
    (acl, trace, t0.elapsed())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use FieldMatch as F;

    fn rule(priority: u32, fields: Vec<FieldMatch>, action: u32) -> AclRule {
        AclRule { priority, fields, action }
    }

    #[test]
    fn prefix_and_masks() {
        assert_eq!(F::prefix(0xC612_3456, 16, 32), F::range(0xC612_0000, 0xC612_FFFF));
        assert_eq!(F::prefix(0xC612_3456, 0, 32), F::range(0, u32::MAX));
        assert_eq!(F::ANY.bounds(8), (0, 255));
        assert!(F::ANY.is_range(32) && F::ANY.matches(u32::MAX));
        assert_eq!(F::prefix(0xC612_3456, 32, 32), F::exact(0xC612_3456));
        assert_eq!(F::prefix(0xAB, 4, 8), F::range(0xA0, 0xAF));
        let proto = F::Masked { value: 6, mask: 0xff };
        assert!(proto.is_range(8));
        assert_eq!(proto.bounds(8), (6, 6));
        let syn = F::Masked { value: 0x02, mask: 0x12 };
        assert!(!syn.is_range(8));
        assert_eq!(syn.bounds(8), (0x02, 0xEF));
        assert!(syn.matches(0x02) && syn.matches(0xE3) && !syn.matches(0x12));
        assert!(F::Masked { value: 0, mask: 0 }.is_range(16));
    }

    #[test]
    fn build_errors_name_the_rule() {
        let cfg = AclConfig::new(vec![8, 16]);
        let good = rule(0, vec![F::ANY, F::exact(7)], 1);
        let cases = [
            (rule(0, vec![F::exact(1)], 0), BuildError::FieldCount { rule: 1, expected: 2, got: 1 }),
            (rule(0, vec![F::range(5, 4), F::exact(1)], 0), BuildError::RangeInverted { rule: 1, field: 0 }),
            (rule(0, vec![F::exact(1), F::exact(70_000)], 0), BuildError::OutsideWidth { rule: 1, field: 1 }),
            (rule(0, vec![F::Masked { value: 0x100, mask: 0x1ff }, F::exact(1)], 0), BuildError::OutsideWidth { rule: 1, field: 0 }),
            (rule(0, vec![F::exact(1), F::Masked { value: 3, mask: 1 }], 0), BuildError::ValueOutsideMask { rule: 1, field: 1 }),
        ];
        for (bad, want) in cases {
            let mut b = AclBuilder::new(cfg.clone());
            b.push(good.clone());
            b.push(bad);
            assert_eq!(b.build().err(), Some(want));
        }
        assert_eq!(Acl::build(&AclConfig::new(vec![8, 33]), &[]).err(), Some(BuildError::BadWidth { field: 1 }));
        assert_eq!(Acl::build(&AclConfig::new(vec![]), &[]).err(), Some(BuildError::BadWidth { field: 0 }));
        assert!(BuildError::RangeInverted { rule: 3, field: 1 }.to_string().contains("rule 3"));
    }

    #[test]
    fn priority_then_insertion_order() {
        let cfg = AclConfig::new(vec![16, 8]);
        let rules = vec![
            rule(5, vec![F::range(0, 100), F::range(0, 255)], 10),
            rule(1, vec![F::range(50, 60), F::exact(6)], 11),
            rule(1, vec![F::range(0, 65535), F::exact(6)], 12), // same priority, added later
            rule(0, vec![F::exact(55), F::Masked { value: 0x10, mask: 0x10 }], 13),
        ];
        let acl = Acl::build(&cfg, &rules).unwrap();
        assert_eq!(acl.classify(&[55, 6]), Some((11, 1)));
        assert_eq!(acl.classify(&[55, 0x16]), Some((13, 3)));
        assert_eq!(acl.classify(&[70, 6]), Some((12, 2)));
        assert_eq!(acl.classify(&[70, 7]), Some((10, 0)));
        assert_eq!(acl.classify(&[700, 7]), None);
        assert_eq!(acl.classify(&[55]), None); // wrong key length
        let keys = [[55, 6], [55, 0x16], [70, 6], [70, 7], [700, 7]];
        let mut out = [Some((9, 9)); 5];
        assert_eq!(acl.classify_batch(&keys, &mut out), 5);
        assert_eq!(out, [Some((11, 1)), Some((13, 3)), Some((12, 2)), Some((10, 0)), None]);
        let mut out3 = [None; 3];
        assert_eq!(acl.classify_batch(&[[55, 6, 0]], &mut out3), 1);
        assert_eq!(out3[0], None);
        let flat: Vec<u32> = keys.iter().flatten().copied().collect();
        let mut out = [None; 5];
        assert_eq!(acl.classify_flat(&flat, &mut out), 5);
        assert_eq!(out[2], Some((12, 2)));
    }

    #[test]
    fn empty_acl_misses() {
        let acl = Acl::build(&AclConfig::five_tuple(), &[]).unwrap();
        assert!(acl.is_empty());
        assert_eq!(acl.classify(&[1, 2, 3, 4, 5]), None);
        let mut out = [Some((1, 1)); 2];
        acl.classify_batch(&[[1, 2, 3, 4, 5]; 2], &mut out);
        assert_eq!(out, [None, None]);
    }

    #[test]
    fn many_rules_make_a_tree_not_a_list() {
        // 4096 disjoint exact rules: a tree must be built, and lookups must find each rule.
        let cfg = AclConfig::new(vec![32, 16]);
        let rules: Vec<AclRule> = (0..4096u32).map(|i| rule(i, vec![F::exact(i * 7919), F::ANY], i)).collect();
        let acl = Acl::build(&cfg, &rules).unwrap();
        let st = acl.stats();
        // Enough 7-way nodes that every leaf holds at most leaf_size rules, and shallow.
        assert!(st.nodes * (FANOUT - 1) + 1 >= 4096 / cfg.leaf_size, "{st:?}");
        assert!(st.max_depth <= 8, "{st:?}");
        assert!(st.leaf_refs < 2 * 4096, "{st:?}");
        for i in (0..4096u32).step_by(97) {
            assert_eq!(acl.classify(&[i * 7919, 80]), Some((i, i)));
        }
    }

    #[test]
    fn rules_crowded_into_one_cell_still_get_a_root_cut_for_misses() {
        // 1,000 rules on /24s inside 192.168.0.0/16: every cut of every field puts them in one
        // cell, so none shortens the lists; the root cut must still send a key outside
        // 192.168.0.0/16 straight to an empty leaf, and keys inside must find their rule.
        let cfg = AclConfig::new(vec![32, 32, 16, 8]);
        let dst = |k: u32| 0xC0A8_0000 | ((k * 37) % 256) << 8;
        let rules: Vec<AclRule> = (0..1000u32).map(|k| rule(k, vec![F::ANY, F::prefix(dst(k), 24, 32), F::ANY, F::ANY], k)).collect();
        let acl = Acl::build(&cfg, &rules).unwrap();
        assert_eq!(acl.trees.len(), 1);
        let t = &acl.trees[0];
        assert_eq!(t.cut_field, 1, "the cut is on the destination");
        for miss in [[1, 0x0A02_0001, 80, 6], [0, 0xC200_0000, 0, 0], [0, u32::MAX, 0, 0]] {
            let root = Acl::root(t, &Packed::new(&miss));
            assert_ne!(root & LEAF, 0, "{miss:x?} reaches a node");
            assert_eq!(t.leaf_ranks.get((root & !LEAF) as usize), Some(&END), "{miss:x?}");
            assert_eq!(acl.classify(&miss), None);
        }
        for k in (0..1000u32).step_by(7) {
            // The first rule of the lowest priority on that /24 wins.
            let want = (0..1000u32).find(|&j| dst(j) == dst(k)).unwrap();
            assert_eq!(acl.classify(&[9, dst(k) | 5, 443, 17]), Some((want, want)));
        }
    }

    #[test]
    fn one_tree_keys_ending_at_the_root_are_answered_there() {
        // `classify_words` answers a key whose root cell is an empty leaf without the walk.
        // A root cell that is a leaf holding rules must still be scanned: three rules and no
        // bit vectors give one tree whose root is such a leaf.
        let cfg = AclConfig { bit_vectors: false, ..AclConfig::new(vec![32, 32, 16, 8]) };
        let rules = vec![
            rule(0, vec![F::ANY, F::prefix(0x0A02_0000, 16, 32), F::range(22, 22), F::exact(6)], 0),
            rule(1, vec![F::prefix(0x0A01_0000, 16, 32), F::ANY, F::ANY, F::ANY], 1),
            rule(2, vec![F::ANY, F::ANY, F::range(5000, 5010), F::ANY], 2),
        ];
        let acl = Acl::build(&cfg, &rules).unwrap();
        assert_eq!(acl.trees.len(), 1);
        let keys =
            [[0x0A01_0005, 0x0A02_0007, 22, 6], [0x0A01_0005, 9, 80, 17], [7, 9, 5005, 17], [7, 9, 80, 17], [7, 0x0A02_0001, 22, 17]];
        let mut at_root = 0;
        for k in keys {
            let root = Acl::root(&acl.trees[0], &Packed::new(&k));
            at_root += usize::from(root & LEAF != 0 && acl.trees[0].leaf_ranks.get((root & !LEAF) as usize) != Some(&END));
            let mut w = [0xA5A5_A5A5; KEY_WORDS];
            w[..4].copy_from_slice(&k);
            assert_eq!(acl.classify_words(&w, 4), acl.classify(&k), "{k:x?}");
            assert_eq!(acl.classify(&k), rules.iter().find(|r| r.matches(&k)).map(|r| (r.action, r.priority)), "{k:x?}");
        }
        assert!(at_root >= 3, "the hits should end in a root leaf with rules");
        // The crowded set's misses end in an empty root cell; its hits walk on.
        let dst = |k: u32| 0xC0A8_0000 | ((k * 37) % 256) << 8;
        let crowded: Vec<AclRule> = (0..1000u32).map(|k| rule(k, vec![F::ANY, F::prefix(dst(k), 24, 32), F::ANY, F::ANY], k)).collect();
        let acl = Acl::build(&cfg, &crowded).unwrap();
        for k in [[1, 0x0A02_0001, 80, 6], [9, dst(5) | 5, 443, 17], [0, u32::MAX, 0, 0], [9, dst(700), 1, 1]] {
            let mut w = [0x5A5A_5A5A; KEY_WORDS];
            w[..4].copy_from_slice(&k);
            assert_eq!(acl.classify_words(&w, 4), acl.classify(&k), "{k:x?}");
        }
    }

    #[test]
    fn classify_words_is_classify_whatever_follows_the_key() {
        let rules = classbench::generate(classbench::Kind::Acl, 300, 5);
        let trace = classbench::trace(&rules, 500, 6);
        for small in [false, true] {
            let cfg = AclConfig { bit_vectors: small, ..AclConfig::five_tuple() };
            let acl = Acl::build(&cfg, if small { &rules[..40] } else { &rules }).unwrap();
            for (i, k) in trace.iter().enumerate() {
                let mut w = [(i as u32).wrapping_mul(0x9E37_79B9); KEY_WORDS];
                w[..5].copy_from_slice(k);
                assert_eq!(acl.classify_words(&w, 5), acl.classify(k), "{k:?}");
                assert_eq!(acl.classify_words(&w, 4), None, "wrong field count");
            }
        }
    }

    #[test]
    fn budget_exceeded_stays_exact() {
        let mut cfg = AclConfig::five_tuple();
        cfg.max_words = 64;
        let (rules, trace) = {
            let r = classbench::generate(classbench::Kind::Fw, 500, 3);
            let t = classbench::trace(&r, 2000, 4);
            (r, t)
        };
        let small = Acl::build(&cfg, &rules).unwrap();
        let full = Acl::build(&AclConfig::five_tuple(), &rules).unwrap();
        assert!(small.stats().nodes < full.stats().nodes);
        for k in &trace {
            assert_eq!(small.classify(k), full.classify(k));
        }
    }
}
