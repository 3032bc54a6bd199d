//! [`LiveAcl`]: a classifier that changes one rule at a time, at a cost that follows the
//! change, not the rule count.
//!
//! A full build (ranking, partitioning, trees) costs milliseconds at thousands of rules. A
//! change instead goes into a *delta* over the last full build (the *base*): added rules into an
//! overlay (compiled on its own, small, in pieces: each commit compiles only the rules added
//! since the one before, and a piece that loses a rule is compiled again without it), deleted
//! ones as tombstones on the base's ranks; a replaced rule is both. [`LiveAcl::commit`] publishes the base plus the delta as an [`Acl`]
//! that answers exactly as a full build of the live rules would (`delta.rs` shows how). Once the
//! delta outgrows a bound, [`LiveAcl::fold_job`] hands out a full build to run on another thread
//! ([`FoldJob::run`]); [`LiveAcl::finish_fold`] installs its result as the new base and
//! re-applies the changes made meanwhile as the new delta. No commit waits for a full build
//! unless the delta grows past a second, larger bound (or the table is small enough that a full
//! build is as cheap as the overlay).
//!
//! ```text
//!   insert/remove ─▶ rules by key, delta          commit ─▶ Acl { base trees (shared), delta }
//!                                │ past fold bound
//!                                ▼
//!   fold_job ─▶ (other thread) FoldJob::run ─▶ Folded ─▶ finish_fold: base = built,
//!                                                         delta = changes since the job
//! ```
//! Rules are identified by fields and priority (adding the same fields and priority again
//! replaces the action), and ordered by priority, then insertion: a replaced rule keeps its
//! place. Control thread only; the published [`Acl`] is what workers read.

use super::delta::{bit, Delta, Piece};
use super::{build, validate, validate_rule, Acl, AclConfig, AclRule, BuildError, FieldMatch};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The delta is folded into a new base once it holds this many changes (added plus deleted
/// rules), or `live / FOLD_DIV` if more. A delta costs lookups a walk of each overlay piece
/// and the tombstone checks; the fold costs a full build on another core.
const FOLD_MIN: usize = 64;
/// See [`FOLD_MIN`].
const FOLD_DIV: usize = 16;
/// A commit rebuilds in full, on the spot, once the delta holds this many changes, or
/// `live / REBUILD_DIV` if more: folds are not keeping up (or a bulk load), and the overlay
/// would cost as much as the base.
const REBUILD_MIN: usize = 1024;
/// See [`REBUILD_MIN`].
const REBUILD_DIV: usize = 4;
/// Tables of at most this many rules are rebuilt in full at every commit: a build of this size
/// costs no more than compiling an overlay, and the lookup stays delta-free.
const SMALL: usize = 64;
/// Most pieces the overlay is kept in ([`Piece`]: one per commit that added rules); past it
/// a commit merges the two smallest. Each piece costs a lookup through the delta one small
/// tree walk; the folds normally empty the overlay long before.
const MAX_PIECES: usize = 8;

/// Distinguishes fold jobs across every [`LiveAcl`] of the process.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// A full build and the rule data behind its ranks.
#[derive(Clone, Debug)]
struct Base {
    /// The trees (never with a delta).
    acl: Acl,
    /// Per rank, `nf` field matches each, as given.
    fields: Arc<[FieldMatch]>,
    /// Per rank: (priority, insertion sequence number), ascending.
    keys: Arc<[(u32, u64)]>,
    /// Per rank: the action.
    actions: Arc<[u32]>,
}

impl Base {
    /// Builds rules given as `(priority, seq, rule)` in ascending `(priority, seq)` order.
    fn build(cfg: &AclConfig, entries: Vec<(u32, u64, AclRule)>) -> Base {
        let nf = cfg.field_widths.len();
        let mut fields = Vec::with_capacity(nf * entries.len());
        let mut keys = Vec::with_capacity(entries.len());
        let mut actions = Vec::with_capacity(entries.len());
        let mut ids = Vec::with_capacity(entries.len());
        let mut rules = Vec::with_capacity(entries.len());
        for (p, s, r) in entries {
            fields.extend_from_slice(&r.fields);
            keys.push((p, s));
            actions.push(r.action);
            ids.push(s as u32);
            rules.push(r);
        }
        // In (priority, seq) order, so the build's ranks are the input order.
        let acl = build::build_with_ids(cfg, &rules, Some(&ids));
        Base { acl, fields: fields.into(), keys: keys.into(), actions: actions.into() }
    }

    fn len(&self) -> usize {
        self.keys.len()
    }

    /// The rank of rule (priority, seq), if the base holds it.
    fn rank(&self, priority: u32, seq: u64) -> Option<u32> {
        self.keys.binary_search(&(priority, seq)).ok().map(|r| r as u32)
    }

    /// Rule `rank` with its priority and seq.
    fn entry(&self, rank: usize, nf: usize) -> Option<(u32, u64, AclRule)> {
        let &(priority, seq) = self.keys.get(rank)?;
        let fields = self.fields.get(nf * rank..nf * (rank + 1))?.to_vec();
        Some((priority, seq, AclRule { priority, fields, action: *self.actions.get(rank)? }))
    }
}

/// A running fold: which job, and the rules changed since it was handed out.
#[derive(Debug)]
struct Fold {
    token: u64,
    touched: HashSet<(u32, u64)>,
}

/// A classifier that takes changes one rule at a time (module doc). Control thread only.
#[derive(Debug)]
pub struct LiveAcl {
    cfg: AclConfig,
    nf: usize,
    next_seq: u64,
    /// Live rules by fields: (priority, seq) of each.
    by_fields: HashMap<Vec<FieldMatch>, Vec<(u32, u64)>>,
    live: usize,
    base: Base,
    /// Per base rank, one bit: deleted or replaced since the base was built.
    dead: Vec<u64>,
    deleted: usize,
    /// Tombstones on rules that had pruned others (their lookups take the fallback).
    dead_pruners: usize,
    /// Live rules not in the base (added or replaced since), by seq.
    added: BTreeMap<u64, AclRule>,
    /// `added` compiled: every rule of `added` is in one piece or in `pending`, and every rule
    /// of a piece is in `added` with the action it was compiled with (a piece that loses a
    /// rule or whose rule changes action is dissolved back into `pending`).
    pieces: Vec<Arc<Piece>>,
    /// Seqs of the rules of `added` in no piece yet: the next commit compiles them into one.
    pending: BTreeSet<u64>,
    fold: Option<Fold>,
    fold_at: Option<usize>,
    rebuild_at: Option<usize>,
    /// Tables of at most this many rules rebuild in full at every commit.
    small: usize,
}

/// A full build of a [`LiveAcl`]'s rules, to run on any thread ([`FoldJob::run`]).
#[derive(Debug)]
pub struct FoldJob {
    cfg: AclConfig,
    token: u64,
    base: Base,
    dead: Vec<u64>,
    added: Vec<(u64, AclRule)>,
}

/// A finished [`FoldJob`], for [`LiveAcl::finish_fold`].
#[derive(Debug)]
pub struct Folded {
    token: u64,
    base: Base,
}

impl FoldJob {
    /// Builds the classifier of the rules live when the job was handed out. Any thread; takes
    /// as long as a full build.
    pub fn run(self) -> Folded {
        let nf = self.cfg.field_widths.len();
        let mut entries: Vec<(u32, u64, AclRule)> = Vec::with_capacity(self.base.len() + self.added.len());
        entries.extend((0..self.base.len()).filter(|&r| !bit(&self.dead, r as u32)).filter_map(|r| self.base.entry(r, nf)));
        entries.extend(self.added.into_iter().map(|(s, r)| (r.priority, s, r)));
        entries.sort_by_key(|e| (e.0, e.1));
        Folded { token: self.token, base: Base::build(&self.cfg, entries) }
    }

    /// Rules the job builds.
    pub fn len(&self) -> usize {
        self.base.len() - self.dead.iter().map(|w| w.count_ones() as usize).sum::<usize>() + self.added.len()
    }

    /// True when the job builds no rules.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl LiveAcl {
    /// An empty classifier with keys of `cfg`'s fields.
    /// # Errors
    /// [`BuildError::BadWidth`] for a config with no fields or a width outside 1..=32.
    pub fn new(cfg: AclConfig) -> Result<LiveAcl, BuildError> {
        validate(&cfg, &[])?;
        let base = Base::build(&cfg, Vec::new());
        Ok(LiveAcl {
            nf: cfg.field_widths.len(),
            cfg,
            next_seq: 0,
            by_fields: HashMap::new(),
            live: 0,
            base,
            dead: Vec::new(),
            deleted: 0,
            dead_pruners: 0,
            added: BTreeMap::new(),
            pieces: Vec::new(),
            pending: BTreeSet::new(),
            fold: None,
            fold_at: None,
            rebuild_at: None,
            small: SMALL,
        })
    }

    /// Folds once the delta holds `fold_at` changes and rebuilds on commit past `rebuild_at`,
    /// instead of the defaults that scale with the rule count, at any table size (small tables
    /// included): for tests of the delta and the fold.
    pub fn with_limits(mut self, fold_at: usize, rebuild_at: usize) -> LiveAcl {
        self.fold_at = Some(fold_at.max(1));
        self.rebuild_at = Some(rebuild_at.max(1));
        self.small = 0;
        self
    }

    /// The key layout.
    pub fn config(&self) -> &AclConfig {
        &self.cfg
    }

    /// Rules live.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no rule is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Rules added and deleted since the base was built (a replaced rule is both).
    pub fn delta_len(&self) -> (usize, usize) {
        (self.added.len(), self.deleted)
    }

    /// True when a rule with these fields and this priority is live.
    pub fn contains(&self, fields: &[FieldMatch], priority: u32) -> bool {
        self.by_fields.get(fields).is_some_and(|v| v.iter().any(|&(p, _)| p == priority))
    }

    /// Adds `rule`, or gives the live rule with the same fields and priority `rule`'s action
    /// (it keeps its place among rules of its priority). Returns true when the rule is new.
    /// Staged until [`LiveAcl::commit`].
    /// # Errors
    /// A [`BuildError`] for a malformed rule, naming it by the number of rules live; nothing
    /// changes.
    pub fn insert(&mut self, rule: AclRule) -> Result<bool, BuildError> {
        validate_rule(&self.cfg, self.live, &rule)?;
        let p = rule.priority;
        let existing = self.by_fields.get(&rule.fields).and_then(|v| v.iter().find(|&&(q, _)| q == p)).map(|&(_, s)| s);
        if let Some(s) = existing {
            if let Some(r) = self.added.get_mut(&s) {
                if r.action != rule.action {
                    r.action = rule.action;
                    self.recompile(p, s);
                    self.touch(p, s);
                }
            } else if let Some(rank) = self.base.rank(p, s) {
                if self.base.actions.get(rank as usize) != Some(&rule.action) {
                    self.kill(rank);
                    self.added.insert(s, rule);
                    self.pending.insert(s);
                    self.touch(p, s);
                }
            }
            return Ok(false);
        }
        let s = self.next_seq;
        self.next_seq += 1;
        self.by_fields.entry(rule.fields.clone()).or_default().push((p, s));
        self.added.insert(s, rule);
        self.pending.insert(s);
        self.live += 1;
        self.touch(p, s);
        Ok(true)
    }

    /// Removes every live rule with these fields, whatever its priority; returns how many.
    /// Staged until [`LiveAcl::commit`].
    pub fn remove(&mut self, fields: &[FieldMatch]) -> usize {
        let Some(gone) = self.by_fields.remove(fields) else {
            return 0;
        };
        for &(p, s) in &gone {
            if self.added.remove(&s).is_some() {
                self.recompile(p, s);
            }
            // A replaced rule has a tombstone already; `kill` counts each rank once.
            if let Some(rank) = self.base.rank(p, s) {
                self.kill(rank);
            }
            self.touch(p, s);
        }
        self.live -= gone.len();
        gone.len()
    }

    /// Removes every rule; the next commit publishes an empty classifier. A fold under way is
    /// forgotten.
    pub fn clear(&mut self) {
        self.by_fields.clear();
        self.live = 0;
        self.base = Base::build(&self.cfg, Vec::new());
        self.dead.clear();
        self.deleted = 0;
        self.dead_pruners = 0;
        self.added.clear();
        self.pieces.clear();
        self.pending.clear();
        self.fold = None;
    }

    /// Every live rule, in insertion order.
    pub fn rules(&self) -> Vec<AclRule> {
        let mut all = self.entries();
        all.sort_by_key(|e| e.1);
        all.into_iter().map(|e| e.2).collect()
    }

    /// Every live rule as (priority, seq, rule), in rank order.
    fn entries(&self) -> Vec<(u32, u64, AclRule)> {
        let mut all: Vec<(u32, u64, AclRule)> = Vec::with_capacity(self.live);
        all.extend((0..self.base.len()).filter(|&r| !bit(&self.dead, r as u32)).filter_map(|r| self.base.entry(r, self.nf)));
        all.extend(self.added.iter().map(|(&s, r)| (r.priority, s, r.clone())));
        all.sort_by_key(|e| (e.0, e.1));
        all
    }

    /// Publishes the rules live now: the base's trees (shared) with the delta on top. Costs
    /// a build of the rules added since the last commit (one more piece of the overlay; past
    /// [`MAX_PIECES`], also a build of the two smallest pieces' rules) and a copy of the
    /// tombstone bits, not a full build, unless the delta is past the rebuild bound or the
    /// table is small (then it builds in full).
    pub fn commit(&mut self) -> Acl {
        let changes = self.added.len() + self.deleted;
        if changes == 0 {
            return self.base.acl.clone();
        }
        if self.live <= self.small || changes > self.rebuild_limit() {
            return self.rebuild();
        }
        if !self.pending.is_empty() {
            let seqs: Vec<u64> = std::mem::take(&mut self.pending).into_iter().collect();
            let piece = self.compile_piece(&seqs);
            self.pieces.push(piece);
        }
        while self.pieces.len() > MAX_PIECES {
            // Merge the two smallest.
            let mut by_len: Vec<usize> = (0..self.pieces.len()).collect();
            by_len.sort_by_key(|&i| self.pieces.get(i).map_or(0, |p| p.len()));
            let (Some(&a), Some(&b)) = (by_len.first(), by_len.get(1)) else { break };
            let (lo, hi) = (a.min(b), a.max(b));
            let pb = self.pieces.swap_remove(hi);
            let pa = self.pieces.swap_remove(lo);
            let seqs: Vec<u64> = pa.keys.iter().chain(pb.keys.iter()).map(|&(_, s)| s).collect();
            let piece = self.compile_piece(&seqs);
            self.pieces.push(piece);
        }
        let mut acl = self.base.acl.clone();
        acl.delta = Some(Arc::new(Delta {
            dead: self.dead.clone().into_boxed_slice(),
            deleted: self.deleted,
            added: self.pieces.clone().into_boxed_slice(),
            live: self.live,
        }));
        acl
    }

    /// Builds the live rules in full, now, as the new base (a fold under way is forgotten);
    /// returns it, with no delta. For bulk loads: costs a full build.
    pub fn rebuild(&mut self) -> Acl {
        let entries = self.entries();
        self.base = Base::build(&self.cfg, entries);
        self.dead = vec![0; self.base.len().div_ceil(64)];
        self.deleted = 0;
        self.dead_pruners = 0;
        self.added.clear();
        self.pieces.clear();
        self.pending.clear();
        self.fold = None;
        self.base.acl.clone()
    }

    /// True when the delta should be folded into a new base and no fold is under way: it is
    /// past the fold bound, or it deleted a rule that had pruned others (whose lookups take the
    /// slower exact fallback until the fold).
    pub fn wants_fold(&self) -> bool {
        self.fold.is_none() && (self.added.len() + self.deleted >= self.fold_limit() || self.dead_pruners > 0)
    }

    /// A full build of the rules live now, to run on another thread, when
    /// [`LiveAcl::wants_fold`]; changes keep coming meanwhile and are recorded to re-apply on
    /// top of the result. Costs copies of the delta, not of the rules.
    pub fn fold_job(&mut self) -> Option<FoldJob> {
        if !self.wants_fold() {
            return None;
        }
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        self.fold = Some(Fold { token, touched: HashSet::new() });
        Some(FoldJob {
            cfg: self.cfg.clone(),
            token,
            base: self.base.clone(),
            dead: self.dead.clone(),
            added: self.added.iter().map(|(&s, r)| (s, r.clone())).collect(),
        })
    }

    /// Installs a finished fold as the new base; the rules changed since its job was handed
    /// out become the new delta. Returns false (and changes nothing) when `f` is not the
    /// fold under way (the rules were cleared or rebuilt since). Commit afterwards to publish.
    /// Costs the changes made during the fold and a fresh tombstone bitset.
    pub fn finish_fold(&mut self, f: Folded) -> bool {
        if self.fold.as_ref().is_none_or(|x| x.token != f.token) {
            return false;
        }
        let Some(fold) = self.fold.take() else {
            return false;
        };
        self.base = f.base;
        self.dead = vec![0; self.base.len().div_ceil(64)];
        self.deleted = 0;
        self.dead_pruners = 0;
        let before = std::mem::take(&mut self.added);
        for (p, s) in fold.touched {
            // Changed after the job was cut: the base's copy (if any) is stale, the live
            // version (if any) is in `before`.
            if let Some(rank) = self.base.rank(p, s) {
                self.kill(rank);
            }
            if let Some(r) = before.get(&s) {
                self.added.insert(s, r.clone());
            }
        }
        // Pieces compiled after the job was cut hold only rules changed since, all in the new
        // `added` as compiled: they stay, placed among the new base's ranks. The others' rules
        // are in the new base; any of theirs still added is compiled again.
        let old = std::mem::take(&mut self.pieces);
        for p in old {
            if p.keys.iter().all(|&(_, s)| self.added.contains_key(&s)) {
                let pos = p.keys.iter().map(|&k| self.base.keys.partition_point(|&b| b < k) as u32).collect();
                self.pieces.push(Arc::new(Piece { acl: p.acl.clone(), keys: p.keys.clone(), pos }));
            }
        }
        let compiled: HashSet<u64> = self.pieces.iter().flat_map(|p| p.keys.iter().map(|&(_, s)| s)).collect();
        self.pending = self.added.keys().copied().filter(|s| !compiled.contains(s)).collect();
        true
    }

    fn fold_limit(&self) -> usize {
        self.fold_at.unwrap_or(FOLD_MIN.max(self.live / FOLD_DIV))
    }

    fn rebuild_limit(&self) -> usize {
        self.rebuild_at.unwrap_or(REBUILD_MIN.max(self.live / REBUILD_DIV))
    }

    /// Tombstones base rank `r` (once).
    fn kill(&mut self, r: u32) {
        if bit(&self.dead, r) {
            return;
        }
        if let Some(w) = self.dead.get_mut(r as usize / 64) {
            *w |= 1 << (r % 64);
            self.deleted += 1;
            if bit(&self.base.acl.pruner, r) {
                self.dead_pruners += 1;
            }
        }
    }

    /// Records a change for the fold under way.
    fn touch(&mut self, priority: u32, seq: u64) {
        if let Some(f) = &mut self.fold {
            f.touched.insert((priority, seq));
        }
    }

    /// Rule `seq` (priority `priority`) was removed from `added` or changed action: if a piece
    /// holds it, that piece is dissolved and its other rules (still in `added`) go back to
    /// `pending`, with `seq` if it is still added. Costs one search per piece.
    fn recompile(&mut self, priority: u32, seq: u64) {
        if self.pending.contains(&seq) {
            if !self.added.contains_key(&seq) {
                self.pending.remove(&seq);
            }
            return;
        }
        if let Some(i) = self.pieces.iter().position(|p| p.keys.binary_search(&(priority, seq)).is_ok()) {
            let p = self.pieces.swap_remove(i);
            for &(_, s) in p.keys.iter() {
                if self.added.contains_key(&s) {
                    self.pending.insert(s);
                }
            }
        }
    }

    /// Compiles the rules of `added` with these seqs into a piece placed among the base's
    /// ranks. Costs a build of those rules only.
    fn compile_piece(&self, seqs: &[u64]) -> Arc<Piece> {
        let mut order: Vec<(u32, u64, &AclRule)> = seqs.iter().filter_map(|s| self.added.get(s).map(|r| (r.priority, *s, r))).collect();
        order.sort_by_key(|e| (e.0, e.1));
        let keys: Arc<[(u32, u64)]> = order.iter().map(|&(p, s, _)| (p, s)).collect();
        let pos: Box<[u32]> = keys.iter().map(|&k| self.base.keys.partition_point(|&b| b < k) as u32).collect();
        let ids: Vec<u32> = order.iter().map(|e| e.1 as u32).collect();
        let rules: Vec<AclRule> = order.into_iter().map(|e| e.2.clone()).collect();
        Arc::new(Piece { acl: build::build_with_ids(&self.cfg, &rules, Some(&ids)), keys, pos })
    }
}
