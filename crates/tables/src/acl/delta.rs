//! Lookups through a classifier with changes on top of its trees (the parent module's
//! "Incremental changes").
//!
//! A [`Delta`] holds the rules added since the trees were built, compiled on their own into
//! small classifiers (the *overlay*, in [`Piece`]s: one per commit, so a commit compiles only
//! its own rules), and one bit per built rule that was deleted since (a
//! *tombstone*; a replaced rule is a tombstone plus an overlay rule). Every rule has one place in
//! the global order (priority, then insertion): the best rule of the overlay is the one of
//! smallest (priority, seq) among each piece's best, and it is placed among the built ranks by
//! `pos`: it beats built rank `r` exactly when `pos <= r`.
//!
//! ```text
//!   walk each piece ─▶ best added rule o (pos p)      built walk, bound p, skipping tombstones
//!                                                   └─ a tombstone that had pruned lower rules
//!                                                      from this leaf ─▶ linear scan after it
//!   answer: the built rank if it is < p, else o
//! ```
//! Pruning (the parent module's step 5) drops from a leaf the rules after one that covers the
//! leaf's box; that rule stays the leaf's last entry. When the walk finds that entry deleted
//! and it had pruned rules (`Acl::pruner`), the rules after it may be missing from the leaf, so
//! the lookup scans the ranks after it linearly, up to the best found so far: exact, and paid
//! only by keys that meet a deleted pruning rule, until the next full build (which
//! [`LiveAcl`](super::LiveAcl) brings forward when such a rule is deleted).

use super::{Acl, KeyView, Packed, Tree, Wide, END};
use std::sync::Arc;

/// A compiled piece of the overlay: some of the added rules, compiled on their own (its ranks
/// are its own), with each rank's place in the global order. [`LiveAcl`](super::LiveAcl)
/// compiles the rules of each commit into a piece of their own, so a commit costs its own
/// rules, not every rule added since the build. Immutable once published.
#[derive(Debug)]
pub(super) struct Piece {
    /// The piece's rules, compiled (no delta of its own).
    pub(super) acl: Acl,
    /// Per piece rank: (priority, insertion seq), ascending: the global order, which decides
    /// between pieces.
    pub(super) keys: Arc<[(u32, u64)]>,
    /// Per piece rank: how many built ranks come before it.
    pub(super) pos: Box<[u32]>,
}

impl Piece {
    /// Rules in the piece.
    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }
}

/// Changes on top of the built trees. Immutable once published; shared by every worker.
#[derive(Debug)]
pub(super) struct Delta {
    /// Per built rank, one bit: deleted (or replaced) since the build.
    pub(super) dead: Box<[u64]>,
    /// Tombstones set in `dead`.
    pub(super) deleted: usize,
    /// The rules added since the build, compiled in pieces (no rule in two).
    pub(super) added: Box<[Arc<Piece>]>,
    /// Rules live: built ones not deleted plus added ones.
    pub(super) live: usize,
}

impl Delta {
    /// Rules in the overlay.
    pub(super) fn added_len(&self) -> usize {
        self.added.iter().map(|p| p.len()).sum()
    }
}

/// Bit `i` of a bitset (false past its end).
#[inline]
pub(super) fn bit(set: &[u64], i: u32) -> bool {
    set.get(i as usize / 64).is_some_and(|w| w >> (i % 64) & 1 != 0)
}

impl Acl {
    /// As [`Acl::classify`], and how many rules the exact fallback checked for this key (0
    /// unless the key met a deleted rule that had pruned others; see the module doc's
    /// "Incremental changes"). For tests and measurements. Worker; never allocates.
    pub fn classify_counted(&self, key: &[u32]) -> (Option<(u32, u32)>, usize) {
        if key.len() != self.nf {
            return (None, 0);
        }
        match &self.delta {
            Some(d) => self.classify_delta(d, key),
            None => (self.classify(key), 0),
        }
    }

    /// The best live rule for `key` (`key.len() == nf`) over the trees, the tombstones and the
    /// overlay, and the rules the fallback checked.
    pub(super) fn classify_delta(&self, d: &Delta, key: &[u32]) -> (Option<(u32, u32)>, usize) {
        // The best added rule: the smallest (priority, seq) over the pieces.
        let mut over: Option<(&Piece, u32)> = None;
        let mut over_key = (u32::MAX, u64::MAX);
        for p in d.added.iter() {
            let r = p.acl.best_rank(key);
            if let Some(&k) = p.keys.get(r as usize) {
                if k < over_key {
                    over_key = k;
                    over = Some((p, r));
                }
            }
        }
        let bound = over.and_then(|(p, r)| p.pos.get(r as usize).copied()).unwrap_or(END);
        let (best, scanned) =
            if self.rows.is_empty() { self.walk_delta(&Wide(key), d, bound) } else { self.walk_delta(&Packed::new(key), d, bound) };
        if best < bound {
            (self.result.get(best as usize).copied(), scanned)
        } else {
            (over.and_then(|(p, r)| p.acl.result.get(r as usize).copied()), scanned)
        }
    }

    /// Best rank of a classifier without a delta (the overlay), `END` for none.
    #[inline]
    fn best_rank(&self, key: &[u32]) -> u32 {
        if let Some(b) = &self.bits {
            let set = b.matching(key);
            return if set == 0 { END } else { set.trailing_zeros() };
        }
        if self.rows.is_empty() {
            self.walk(&Wide(key))
        } else {
            self.walk(&Packed::new(key))
        }
    }

    /// Best live built rank below `bound` for `key` (`END` when none), and the rules the
    /// fallback checked.
    fn walk_delta<K: KeyView>(&self, key: &K, d: &Delta, bound: u32) -> (u32, usize) {
        let mut best = bound;
        let mut from = END;
        for t in self.trees.iter() {
            if t.min_rank >= best {
                break;
            }
            if let Some(leaf) = self.descend(t, key, best) {
                self.scan_delta(t, leaf, key, d, &mut best, &mut from);
            }
        }
        let mut scanned = 0;
        if from < best {
            for r in from..best.min(self.result.len() as u32) {
                scanned += 1;
                if !bit(&d.dead, r) && key.matches(self, r) {
                    best = r;
                    break;
                }
            }
        }
        (if best < bound { best } else { END }, scanned)
    }

    /// Scans a leaf skipping tombstones; lowers `best` to the first live match, and `from` to
    /// the rank after a deleted pruning rule that ends the leaf and matches the key.
    #[inline]
    fn scan_delta<K: KeyView>(&self, t: &Tree, start: u32, key: &K, d: &Delta, best: &mut u32, from: &mut u32) {
        let leaf = t.leaf_ranks.get(start as usize..).unwrap_or(&[]);
        for (i, &rank) in leaf.iter().enumerate() {
            if rank >= *best {
                break;
            }
            if key.matches(self, rank) {
                if !bit(&d.dead, rank) {
                    *best = rank;
                    return;
                }
                if bit(&self.pruner, rank) && leaf.get(i + 1) == Some(&END) {
                    *from = (*from).min(rank + 1);
                }
            }
        }
    }
}
