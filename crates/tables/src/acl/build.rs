//! Compiling a validated rule set: ranking, CutSplit-style partitioning and HyperSplit trees
//! (the algorithm is described in the parent module's doc).

use super::{bits, Acl, AclConfig, AclRule, FieldMatch, Node, Row, Tree, END, FANOUT, LEAF, PACKED};
use std::sync::Arc;

/// Size of an inner node in 32-bit words.
const NODE_WORDS: usize = std::mem::size_of::<Node>() / 4;
/// Smallest partition kept on its own; smaller ones join the wide partition.
const MIN_PARTITION: usize = 32;
/// Fields narrower than this never define a partition (a protocol byte separates little).
const PARTITION_MIN_WIDTH: u8 = 16;
/// Widest root cut table: 2^16 cells.
const MAX_CUT_BITS: u32 = 16;

/// Compiles rules that `validate` accepted; a match reports the rule's index in `rules`.
pub(super) fn build(cfg: &AclConfig, rules: &[AclRule]) -> Acl {
    build_with_ids(cfg, rules, None)
}

/// Compiles rules that `validate` accepted; a match of rule `i` reports `ids[i]` as its rule
/// index (`i` without `ids`). Ties of priority still go to the rule earlier in `rules`.
pub(super) fn build_with_ids(cfg: &AclConfig, rules: &[AclRule], ids: Option<&[u32]>) -> Acl {
    let nf = cfg.field_widths.len();
    let mut order: Vec<usize> = (0..rules.len()).collect();
    order.sort_by_key(|&i| (rules.get(i).map_or(0, |r| r.priority), i));

    let n = rules.len();
    let mut bounds = Vec::with_capacity(2 * nf * n);
    let mut tern = Vec::with_capacity(2 * nf * n);
    let mut has_tern = Vec::with_capacity(n);
    let mut result = Vec::with_capacity(n);
    for &i in &order {
        let Some(r) = rules.get(i) else { continue };
        let mut t = false;
        for (f, &w) in r.fields.iter().zip(&cfg.field_widths) {
            let (lo, hi) = f.bounds(w);
            bounds.extend([lo, hi]);
            match *f {
                super::FieldMatch::Masked { value, mask } if !f.is_range(w) => {
                    tern.extend([mask, value]);
                    t = true;
                }
                _ => tern.extend([0, 0]),
            }
        }
        has_tern.push(t);
        result.push((r.action, ids.and_then(|ids| ids.get(i).copied()).unwrap_or(i as u32)));
    }

    let rows = if nf <= PACKED {
        bounds
            .chunks_exact(2 * nf)
            .map(|b| {
                let mut row = Row { lo: [0; PACKED], span: [u32::MAX; PACKED] };
                for (d, lh) in b.chunks_exact(2).enumerate().take(PACKED) {
                    if let (Some(l), Some(sp), &[lo, hi]) = (row.lo.get_mut(d), row.span.get_mut(d), lh) {
                        *l = lo;
                        *sp = hi - lo;
                    }
                }
                row
            })
            .collect()
    } else {
        Vec::new()
    };
    let ctx = Ctx { cfg, nf, bounds: &bounds, has_tern: &has_tern };
    let mut pruner = vec![0u64; n.div_ceil(64)];
    let mut trees: Vec<Tree> = partition(&ctx, n).into_iter().map(|part| build_tree(&ctx, part, &mut pruner)).collect();
    trees.sort_by_key(|t| t.min_rank);
    Acl {
        nf,
        bounds: bounds.into(),
        tern: tern.into(),
        has_tern: has_tern.into(),
        result: result.into(),
        rows: rows.into(),
        trees: trees.into(),
        pruner: pruner.into(),
        delta: None,
        bits: small(cfg, rules, &order),
    }
}

/// The bit-vector classifier of `rules` ranked by `order`, when they are few enough.
fn small(cfg: &AclConfig, rules: &[AclRule], order: &[usize]) -> Option<Arc<bits::Bits>> {
    if !cfg.bit_vectors || rules.is_empty() || rules.len() > bits::MAX_RULES {
        return None;
    }
    let ranked: Vec<&[FieldMatch]> = order.iter().filter_map(|&i| rules.get(i)).map(|r| &r.fields[..]).collect();
    bits::Bits::build(&cfg.field_widths, &ranked).map(Arc::new)
}

struct Ctx<'a> {
    cfg: &'a AclConfig,
    nf: usize,
    bounds: &'a [u32],
    has_tern: &'a [bool],
}

impl Ctx<'_> {
    /// Bounding range of rule `rank` in field `d`.
    #[inline]
    fn range(&self, rank: u32, d: usize) -> (u32, u32) {
        let at = 2 * (self.nf * rank as usize + d);
        match self.bounds.get(at..at + 2) {
            Some(&[lo, hi]) => (lo, hi),
            _ => (0, u32::MAX),
        }
    }
}

/// Splits ranks `0..n` into partitions (CutSplit), each ascending. Level 1 groups rules by
/// their most specific wide field among those with at least half their bits fixed; the rest
/// go through level 2 with a quarter of the bits; what remains forms the wide partition.
/// Partitions below `max(MIN_PARTITION, n / 64)` rules fall through to the next level; a
/// level-2 partition joins the level-1 partition of the same field when there is one.
fn partition(ctx: &Ctx<'_>, n: usize) -> Vec<Vec<u32>> {
    let nf = ctx.nf;
    if !ctx.cfg.partition {
        return if n == 0 { Vec::new() } else { vec![(0..n as u32).collect()] };
    }
    let min = MIN_PARTITION.max(n / 64);
    let mut rest: Vec<u32> = (0..n as u32).collect();
    let mut out: Vec<Vec<u32>> = Vec::new();
    let mut by_field: Vec<Option<usize>> = vec![None; nf];
    for level in [2u32, 4] {
        let mut parts: Vec<Vec<u32>> = vec![Vec::new(); nf];
        let mut next = Vec::new();
        for &rank in &rest {
            let mut best: Option<(u32, usize)> = None;
            for (d, &w) in ctx.cfg.field_widths.iter().enumerate() {
                if w < PARTITION_MIN_WIDTH {
                    continue;
                }
                let (lo, hi) = ctx.range(rank, d);
                let free = 32 - (hi - lo).leading_zeros(); // ceil(log2(values))
                let fixed = u32::from(w).saturating_sub(free);
                if level * fixed >= u32::from(w) && best.is_none_or(|(b, _)| fixed > b) {
                    best = Some((fixed, d));
                }
            }
            match best.and_then(|(_, d)| parts.get_mut(d)) {
                Some(p) => p.push(rank),
                None => next.push(rank),
            }
        }
        for (d, p) in parts.into_iter().enumerate() {
            if p.len() < min {
                next.extend(p);
            } else if let Some(&Some(i)) = by_field.get(d) {
                // Same field as a level-1 subset: one tree for both (fewer trees per lookup).
                if let Some(q) = out.get_mut(i) {
                    q.extend(p);
                    q.sort_unstable();
                }
            } else {
                if let Some(b) = by_field.get_mut(d) {
                    *b = Some(out.len());
                }
                out.push(p);
            }
        }
        next.sort_unstable();
        rest = next;
    }
    out.push(rest);
    out.retain(|p| !p.is_empty());
    out
}

/// Where a finished subtree's pointer goes.
#[derive(Clone, Copy)]
enum Slot {
    Root,
    Child(usize, usize),
}

struct Work {
    ranks: Vec<u32>,
    region: Vec<(u32, u32)>,
    depth: usize,
    slot: Slot,
}

/// Root cut cells that share a rule list: the hull `lo, hi` of their values, and the cells.
type CellGroup = (u32, u32, Vec<usize>);

/// Builds one tree over `ranks` (ascending): a root cut table on the top bits of one field,
/// then a HyperSplit subtree per distinct cell rule list, depth first.
fn build_tree(ctx: &Ctx<'_>, ranks: Vec<u32>, pruner: &mut [u64]) -> Tree {
    let region: Vec<(u32, u32)> = ctx.cfg.field_widths.iter().map(|&w| (0, super::width_max(w))).collect();
    let min_rank = ranks.first().copied().unwrap_or(END);
    let nrules = ranks.len();
    let max_words = ctx.cfg.max_words.min(ctx.cfg.words_per_rule.saturating_mul(nrules) + 4096).min(1 << 30);
    let mut tree = Tree { cut_field: 0, cut_shift: 31, cut: Vec::new(), min_rank, nodes: Vec::new(), leaf_ranks: Vec::new(), depth: 0 };
    let Some((d, shift)) = choose_cut(ctx, &ranks) else {
        // No cut: both cells of `field 0 >> 31` (any width) lead to one subtree.
        let root = grow(ctx, &mut tree, ranks, region, max_words, pruner);
        tree.cut = vec![root; 2];
        return tree;
    };
    let w = u32::from(ctx.cfg.field_widths.get(d).copied().unwrap_or(32));
    let cells = 1usize << (w - shift);
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); cells];
    for &r in &ranks {
        let (lo, hi) = ctx.range(r, d);
        for l in lists.iter_mut().take((hi >> shift) as usize + 1).skip((lo >> shift) as usize) {
            l.push(r);
        }
    }
    // Cells with the same rule list share one subtree, built over the hull of those cells:
    // every rule of the list meets every cell of the group, and keys outside the group's cells
    // never reach the subtree, so pruning and leaf lists stay exact.
    let mut groups: std::collections::HashMap<&[u32], CellGroup> = std::collections::HashMap::new();
    for (c, l) in lists.iter().enumerate() {
        let lo = (c as u32) << shift;
        let hi = lo | super::width_max(shift as u8);
        let g = groups.entry(l.as_slice()).or_insert((lo, hi, Vec::new()));
        g.0 = g.0.min(lo);
        g.1 = g.1.max(hi);
        g.2.push(c);
    }
    let mut order: Vec<(&[u32], CellGroup)> = groups.into_iter().collect();
    order.sort_by_key(|(_, g)| g.2.first().copied().unwrap_or(0));
    tree.cut = vec![LEAF; cells];
    for (l, (lo, hi, cs)) in order {
        let mut reg = region.clone();
        if let Some(b) = reg.get_mut(d) {
            *b = (lo, hi);
        }
        let ptr = grow(ctx, &mut tree, l.to_vec(), reg, max_words, pruner);
        for c in cs {
            if let Some(slot) = tree.cut.get_mut(c) {
                *slot = ptr;
            }
        }
    }
    tree.cut_field = d as u32;
    tree.cut_shift = shift;
    tree
}

/// The root cut of a tree: `(field, shift)` so that cell `v >> shift` of the field splits the
/// rules best, by the average cell list a rule's key meets (Σ size² / Σ size), while the
/// copies stay below `2n` and the table below `4n` cells.
///
/// When no cut shortens the lists (the rules crowd into one cell of every field, as 1,000
/// rules on destinations inside 192.168.0.0/16 do), the cut that leaves the largest share of a
/// field's values in cells no rule meets: a key there misses at the root, where without a cut
/// it walked the whole subtree to an empty leaf (5 levels for that set). Keys inside the
/// rules' cells walk the same subtree as without it. `None` when no cut leaves an empty cell
/// either.
fn choose_cut(ctx: &Ctx<'_>, ranks: &[u32]) -> Option<(usize, u32)> {
    let n = ranks.len();
    if n <= ctx.cfg.leaf_size.max(1) {
        return None;
    }
    let kmax = (usize::BITS - n.leading_zeros() + 2).min(MAX_CUT_BITS);
    let mut best: Option<(f64, usize, u32)> = None;
    // Share of the field's values in empty cells, as (empty cells, cells); fewer cells on ties.
    let mut hull: Option<((usize, usize), usize, u32)> = None;
    let mut count: Vec<u32> = Vec::new();
    for (d, &w) in ctx.cfg.field_widths.iter().enumerate() {
        let w = u32::from(w);
        for k in 1..=kmax.min(w) {
            let shift = w - k;
            let cells = 1usize << k;
            if cells > 4 * n {
                break;
            }
            count.clear();
            count.resize(cells + 1, 0);
            let mut refs = 0usize;
            for &r in ranks {
                let (lo, hi) = ctx.range(r, d);
                let (a, b) = ((lo >> shift) as usize, (hi >> shift) as usize);
                refs += b - a + 1;
                if let Some(x) = count.get_mut(a) {
                    *x = x.wrapping_add(1);
                }
                if let Some(x) = count.get_mut(b + 1) {
                    *x = x.wrapping_sub(1);
                }
            }
            if refs > 2 * n {
                break;
            }
            let mut run = 0u32;
            let mut sq = 0f64;
            let mut empty = 0usize;
            for &x in count.iter().take(cells) {
                run = run.wrapping_add(x);
                sq += f64::from(run) * f64::from(run);
                empty += usize::from(run == 0);
            }
            let cost = sq / refs as f64;
            if best.is_none_or(|(c, _, _)| cost < c) {
                best = Some((cost, d, shift));
            }
            // empty / cells > e / c, in integers.
            if empty > 0 && hull.is_none_or(|((e, c), _, _)| empty * c > e * cells) {
                hull = Some(((empty, cells), d, shift));
            }
        }
    }
    match (best, hull) {
        (Some((cost, d, shift)), _) if cost < n as f64 => Some((d, shift)),
        (_, Some((_, d, shift))) => Some((d, shift)),
        _ => None,
    }
}

/// Builds a HyperSplit subtree over `ranks` (ascending) inside `region`, depth first, into
/// `tree`; returns its root pointer. Sets the `pruner` bit of every rule that cut lower rules
/// from a box it covers.
fn grow(ctx: &Ctx<'_>, tree: &mut Tree, ranks: Vec<u32>, region: Vec<(u32, u32)>, max_words: usize, pruner: &mut [u64]) -> u32 {
    let nf = ctx.nf;
    let leaf_size = ctx.cfg.leaf_size.max(1);
    let mut root = LEAF;
    let mut stack = vec![Work { ranks, region, depth: 1, slot: Slot::Root }];
    while let Some(Work { mut ranks, region, depth, slot }) = stack.pop() {
        // Redundancy removal: nothing after a rule that covers the whole box can win in it.
        if let Some(cut) = ranks.iter().position(|&r| {
            !ctx.has_tern.get(r as usize).copied().unwrap_or(true)
                && (0..nf).all(|d| {
                    let (lo, hi) = ctx.range(r, d);
                    let (blo, bhi) = region.get(d).copied().unwrap_or((0, 0));
                    lo <= blo && bhi <= hi
                })
        }) {
            // The covering rule stays the last entry of every leaf below (children keep the
            // rules that meet their box, and it meets all of them): a lookup that finds it
            // deleted knows the rules after it may be missing there (`delta`).
            if cut + 1 < ranks.len() {
                if let Some(&r) = ranks.get(cut) {
                    if let Some(w) = pruner.get_mut(r as usize / 64) {
                        *w |= 1 << (r % 64);
                    }
                }
            }
            ranks.truncate(cut + 1);
        }
        let words = NODE_WORDS * tree.nodes.len() + tree.leaf_ranks.len() + tree.cut.len();
        let split = if ranks.len() <= leaf_size || depth >= ctx.cfg.max_depth || words + ranks.len() + 1 >= max_words {
            None
        } else {
            best_split(ctx, &ranks, &region, None)
        };
        let ptr = match split {
            None => {
                let start = tree.leaf_ranks.len() as u32;
                tree.leaf_ranks.extend_from_slice(&ranks);
                tree.leaf_ranks.push(END);
                tree.depth = tree.depth.max(depth);
                LEAF | start
            }
            Some((d, t)) => {
                let (blo, bhi) = region.get(d).copied().unwrap_or((0, 0));
                let ts = refine(ctx, &ranks, &region, d, t, leaf_size);
                let idx = tree.nodes.len();
                let min_rank = ranks.first().copied().unwrap_or(END);
                let mut node = Node { field: d as u32, min_rank, thresh: [u32::MAX; FANOUT - 1], child: [LEAF; FANOUT] };
                for (slot, &t) in node.thresh.iter_mut().zip(&ts) {
                    *slot = t;
                }
                tree.nodes.push(node);
                // Children in reverse so the first child is laid out right after its parent.
                for k in (0..=ts.len()).rev() {
                    let (lo, hi, sub) = child_interval(ctx, &ranks, d, &ts, k, (blo, bhi));
                    let mut reg = region.clone();
                    if let Some(b) = reg.get_mut(d) {
                        *b = (lo, hi);
                    }
                    stack.push(Work { ranks: sub, region: reg, depth: depth + 1, slot: Slot::Child(idx, k) });
                }
                idx as u32
            }
        };
        match slot {
            Slot::Root => root = ptr,
            Slot::Child(p, side) => {
                if let Some(c) = tree.nodes.get_mut(p).and_then(|n| n.child.get_mut(side)) {
                    *c = ptr;
                }
            }
        }
    }
    root
}

/// Interval `k` of field `d` cut by the ascending thresholds `ts` inside `(blo, bhi)` (interval
/// `k` ends at `ts[k]`, inclusive), and the rules of `ranks` that overlap it.
fn child_interval(ctx: &Ctx<'_>, ranks: &[u32], d: usize, ts: &[u32], k: usize, (blo, bhi): (u32, u32)) -> (u32, u32, Vec<u32>) {
    let lo = if k == 0 { blo } else { ts.get(k - 1).map_or(blo, |&t| t + 1) };
    let hi = ts.get(k).copied().unwrap_or(bhi);
    let sub = ranks
        .iter()
        .copied()
        .filter(|&r| {
            let (rlo, rhi) = ctx.range(r, d);
            rlo <= hi && rhi >= lo
        })
        .collect();
    (lo, hi, sub)
}

/// Up to `FANOUT - 1` ascending thresholds on field `d`, starting from `t`: each round splits
/// every interval that still holds more than `leaf_size` rules at its own best point on `d`
/// (1, then 3, then up to 6 thresholds: a binary tree on one field folded into one node).
fn refine(ctx: &Ctx<'_>, ranks: &[u32], region: &[(u32, u32)], d: usize, t: u32, leaf_size: usize) -> Vec<u32> {
    let (blo, bhi) = region.get(d).copied().unwrap_or((0, 0));
    let mut ts = vec![t];
    while ts.len() < FANOUT - 1 {
        let mut add = Vec::new();
        for k in 0..=ts.len() {
            let (lo, hi, sub) = child_interval(ctx, ranks, d, &ts, k, (blo, bhi));
            if sub.len() <= leaf_size || lo == hi {
                continue;
            }
            let mut reg = region.to_vec();
            if let Some(b) = reg.get_mut(d) {
                *b = (lo, hi);
            }
            if let Some((_, t2)) = best_split(ctx, &sub, &reg, Some(d)) {
                add.push(t2);
            }
        }
        add.truncate(FANOUT - 1 - ts.len());
        if add.is_empty() {
            break;
        }
        ts.extend(add);
        ts.sort_unstable();
    }
    ts
}

/// The (field, threshold) minimising (max(L, R), L + R), where L and R count the rules that
/// intersect `[lo, t]` and `[t + 1, hi]` of the box. `None` when no split shrinks both sides.
fn best_split(ctx: &Ctx<'_>, ranks: &[u32], region: &[(u32, u32)], only: Option<usize>) -> Option<(usize, u32)> {
    let n = ranks.len();
    let mut best: Option<((usize, usize), usize, u32)> = None;
    let mut los = Vec::with_capacity(n);
    let mut his = Vec::with_capacity(n);
    for (d, &(blo, bhi)) in region.iter().enumerate() {
        if blo == bhi || only.is_some_and(|o| o != d) {
            continue;
        }
        los.clear();
        his.clear();
        for &r in ranks {
            let (lo, hi) = ctx.range(r, d);
            los.push(lo.max(blo));
            his.push(hi.min(bhi));
        }
        los.sort_unstable();
        his.sort_unstable();
        let mut consider = |t: u32| {
            if t < blo || t >= bhi {
                return;
            }
            let l = los.partition_point(|&x| x <= t);
            let r = n - his.partition_point(|&x| x <= t);
            let cost = (l.max(r), l + r);
            if best.is_none_or(|(c, _, _)| cost < c) {
                best = Some((cost, d, t));
            }
        };
        let mut prev = None;
        for &h in &his {
            if prev != Some(h) {
                consider(h);
                prev = Some(h);
            }
        }
        prev = None;
        for &l in &los {
            if l > blo && prev != Some(l) {
                consider(l - 1);
                prev = Some(l);
            }
        }
    }
    match best {
        Some(((m, _), d, t)) if m < n => Some((d, t)),
        _ => None,
    }
}
