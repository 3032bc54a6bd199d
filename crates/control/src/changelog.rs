//! The change log: every accepted transaction since start (or the last reload), enough to
//! rebuild the control replica from the spec and the start-up entries after a request failed
//! part-way (`Control::restore_shadow`: a fresh pipeline, then [`ChangeLog::replay`]).
//!
//! The log stays bounded without stalling a write: its items are transactions' ops (shared
//! with the workers, so appending one is a reference count) or one *net snapshot* of a
//! prefix of them. Once the ops since the snapshot outnumber it (and the log its bound), the
//! items are handed — cloned `Arc`s — to a thread of their own (`fp-log-fold`), which folds
//! them into a new net snapshot; a later [`ChangeLog::push`] that finds it finished swaps it
//! in for exactly the items it covers and returns them to be freed off the write's path.
//!
//! ```text
//!  items:  [net₀][ops][ops][ops][ops]             push: append; fold due? hand out a prefix
//!           └──── prefix, to fp-log-fold ────┘
//!  later:  [net₁                     ][ops][ops]  a push after the fold finished swaps it in
//! ```
//!
//! A net snapshot holds, per table, whether a `Clear` is in the folded history, and per key
//! (as the ops spell it) the last thing that happened to it: present with its entry (a
//! classifier key may hold one per priority) or deleted, each with its position (`seq`) in
//! the history; per meter and per HQoS pipe the last op. Replaying it: per table, `Clear` if
//! cleared; every deleted key's `Del` (phase 1: the table only shrinks, so one near capacity
//! does not overflow); then the keys' last ops in history order (phase 2: the adds, and the
//! deletes of keys whose spelling may alias another's). A `Del` whose key is not there is
//! ignored on replay: the op was accepted once by the same program, so absence is the only
//! thing that can refuse it.
//!
//! **Aliases.** A table may take two spellings of one key (`10.0.0.1` and `10.0.0.1/32` in an
//! LPM table; an exact value and a full mask in a classifier field), and only the table knows
//! its identity. The fold never merges two spellings; it groups them by an *alias class*, a
//! hash of what the spellings share (the packed value of an exact key, the masked prefix of
//! an LPM key, each classifier field's lowest value) that is equal for every two spellings the
//! table takes as one key — and may be equal for others. Replaying the last ops of the keys
//! in history order gives each table key its last op, whatever the spellings. A deleted key
//! is dropped from the snapshot (a tombstone that would otherwise grow with every fresh key
//! added and deleted) only when no other spelling of its class is in the snapshot and the
//! class can hold nothing the replay starts from: the table was cleared earlier in the folded
//! history, or no start-up entry is in that class (the start-up classes are hashed once, when
//! the log starts, [`ChangeLog::new`]). The snapshot then holds the keys changed and present,
//! the deleted keys that may be start-up entries or aliases, and the meters and pipes set.

use crate::background::{Background, Pending};
use fastpath_pipeline::entries::{EntryOp, EntrySpec};
use fastpath_pipeline::ir::TableImpl;
use fastpath_pipeline::value::{prefix_mask, Match};
use fastpath_pipeline::Pipeline;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One item of the log.
#[derive(Clone)]
pub enum Item {
    /// One accepted transaction's ops, as the workers got them.
    Ops(Arc<[EntryOp]>),
    /// The net effect of the items it replaced.
    Net(Arc<NetLog>),
}

/// The accepted changes since the log started, bounded (see the module doc). Control thread.
pub struct ChangeLog {
    items: Vec<Item>,
    /// Ops a replay applies (a net snapshot counts what it replays).
    len: usize,
    /// Of which the leading net snapshot's.
    net_len: usize,
    /// Fold once the log holds more ops than this.
    compact_at: usize,
    basis: Arc<Basis>,
    /// The fold under way: how many leading items it covers, and its result to come.
    fold: Option<(usize, Pending<Folded>)>,
    /// The thread that folds.
    folder: Background,
    /// Folds installed, for tests and `update_cost`.
    folds: usize,
    /// How long the last fold installed took on its thread.
    last_fold: Duration,
}

/// A fold's result (`None`: not a prefix the log handed out) and how long it took.
type Folded = (Option<NetLog>, Duration);

/// What folding needs to know of the program besides the ops: each table's key shape (for
/// alias classes) and the alias classes of its start-up entries.
struct Basis {
    tables: Vec<KeyShape>,
    startup: Vec<HashSet<u64>>,
}

#[derive(Clone)]
struct KeyShape {
    imp: TableImpl,
    widths: Vec<u8>,
}

/// The net effect of a prefix of the log (see the module doc).
#[derive(Clone, Default)]
pub struct NetLog {
    tables: BTreeMap<usize, NetTable>,
    /// The last op that configured each meter, by (array, index).
    meters: BTreeMap<(String, usize), EntryOp>,
    /// The last profile op of each HQoS pipe, by (port, pipe).
    pipes: BTreeMap<(u16, u32), EntryOp>,
    /// Position of the next op in the history.
    seq: u64,
    /// Ops a replay applies, counted when the fold ends (on its thread).
    len: usize,
}

/// Keys hash with foldhash: a fold looks up one per op (65,536 ops a fold at the default bound;
/// a `BTreeMap` of the keys took ~1.5 µs an op, the fold 90–200 ms in `update_cost`).
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

#[derive(Clone, Default)]
struct NetTable {
    cleared: bool,
    keys: Map<Key, Slot>,
    /// Keys in the snapshot per alias class.
    classes: Map<u64, u32>,
}

/// A key as the ops spell it, hashable (`Match` is not `Hash`).
#[derive(Clone, PartialEq, Eq)]
struct Key(Vec<Match>);

impl Hash for Key {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for m in &self.0 {
            match *m {
                Match::Exact(v) => (0u8, v).hash(h),
                Match::Prefix(v, l) => (1u8, v, l).hash(h),
                Match::Masked(v, mk) => (2u8, v, mk).hash(h),
                Match::Range(lo, hi) => (3u8, lo, hi).hash(h),
                Match::Any => 4u8.hash(h),
            }
        }
    }
}

#[derive(Clone)]
struct Slot {
    class: u64,
    /// Deleted at this position (before `adds`, if any).
    del: Option<u64>,
    /// Present with these entries (one, or one per priority in a classifier), each added at
    /// its position.
    adds: Vec<(u64, EntrySpec)>,
}

impl KeyShape {
    /// A hash of what every spelling the table takes as the same key shares (see the module
    /// doc): equal for aliases, possibly equal for others. Mirrors how `TableStage` reads a
    /// key (`self_pack`, `prefix_of`, `acl_fields` in the pipeline's `table` module), coarsened
    /// wherever that is simpler: a coarser class only keeps more tombstones.
    fn class(&self, key: &[Match]) -> u64 {
        let mut h = std::hash::DefaultHasher::new();
        let all = |w: u8| if w >= 128 { u128::MAX } else { (1u128 << w) - 1 };
        match self.imp {
            TableImpl::Direct | TableImpl::Exact => {
                // The packed key, truncated as the 64-bit engines do.
                let mut k = 0u128;
                for (m, &w) in key.iter().zip(&self.widths) {
                    let v = match *m {
                        Match::Exact(v) => v,
                        _ => 0,
                    };
                    k = if w >= 128 { v } else { k << w | v };
                }
                (k as u64).hash(&mut h);
            }
            TableImpl::Lpm => {
                let w = self.widths.first().copied().unwrap_or(32);
                let (v, l) = match key.first() {
                    Some(Match::Prefix(v, l)) => (*v, *l),
                    Some(Match::Exact(v)) => (*v, w),
                    _ => (0, 0),
                };
                (v & prefix_mask(l, w) & all(w), l.min(w)).hash(&mut h);
            }
            TableImpl::Acl => {
                for (m, &w) in key.iter().zip(&self.widths) {
                    // The lowest value the field matches, as the classifier stores it.
                    let low = match *m {
                        Match::Masked(v, mk) => v & mk,
                        Match::Prefix(v, l) if w > 32 => v & prefix_mask(l, w),
                        other => other.as_range(w).map_or(0, |(lo, _)| lo),
                    };
                    (low & all(w)).hash(&mut h);
                }
            }
        }
        h.finish()
    }
}

impl NetLog {
    /// Folds one op in.
    fn fold(&mut self, basis: &Basis, op: &EntryOp) {
        let seq = self.seq;
        self.seq += 1;
        match op {
            EntryOp::Meter { bank, index, .. } => {
                self.meters.insert((bank.clone(), *index), op.clone());
            }
            EntryOp::Pipe { port, pipe, .. } => {
                self.pipes.insert((*port, *pipe), op.clone());
            }
            EntryOp::Clear { table } => {
                let nt = self.tables.entry(*table).or_default();
                nt.cleared = true;
                nt.keys.clear();
                nt.classes.clear();
            }
            EntryOp::Add(e) | EntryOp::Modify(e) => {
                let Some(shape) = basis.tables.get(e.table) else { return };
                let nt = self.tables.entry(e.table).or_default();
                let slot = nt.slot(shape, &e.key);
                if shape.imp == TableImpl::Acl {
                    // A classifier holds one rule per (key, priority); a delete before it still
                    // matters (it took the key's other priorities).
                    slot.adds.retain(|(_, a)| a.priority != e.priority);
                    slot.adds.push((seq, e.clone()));
                } else {
                    // Adding replaces, whatever was there.
                    slot.del = None;
                    slot.adds.clear();
                    slot.adds.push((seq, e.clone()));
                }
            }
            EntryOp::Del { table, key } => {
                let Some(shape) = basis.tables.get(*table) else { return };
                let nt = self.tables.entry(*table).or_default();
                let cleared = nt.cleared;
                let class = {
                    let slot = nt.slot(shape, key);
                    slot.adds.clear();
                    slot.del = Some(seq);
                    slot.class
                };
                let alone = nt.classes.get(&class) == Some(&1);
                let startup = basis.startup.get(*table).is_some_and(|s| s.contains(&class));
                if alone && (cleared || !startup) {
                    nt.keys.remove(&Key(key.clone()));
                    nt.classes.remove(&class);
                }
            }
        }
    }

    /// Ops a replay applies.
    fn count(&self) -> usize {
        let tables: usize = self
            .tables
            .values()
            .map(|nt| usize::from(nt.cleared) + nt.keys.values().map(|s| usize::from(s.del.is_some()) + s.adds.len()).sum::<usize>())
            .sum();
        tables + self.meters.len() + self.pipes.len()
    }

    /// Applies the snapshot to `p` (see the module doc for the order).
    ///
    /// # Errors
    /// An op other than a delete that `p` refused.
    fn replay(&self, p: &mut Pipeline) -> Result<(), String> {
        let run = |p: &mut Pipeline, batch: &mut Vec<EntryOp>| -> Result<(), String> {
            let r = p.apply_ops(batch).map_err(|(_, msg)| msg);
            batch.clear();
            r
        };
        let mut batch: Vec<EntryOp> = Vec::new();
        for (&table, nt) in &self.tables {
            if nt.cleared {
                batch.push(EntryOp::Clear { table });
            }
            run(p, &mut batch)?;
            // Phase 1: the table only shrinks. (In history order, as phase 2: the keys' map has
            // no order of its own.)
            let mut dels: Vec<(u64, &Key)> = nt.keys.iter().filter_map(|(key, s)| Some((s.del?, key))).collect();
            dels.sort_unstable_by_key(|&(at, _)| at);
            for (_, key) in dels {
                let _ = p.apply_ops(&[EntryOp::Del { table, key: key.0.clone() }]);
            }
            // Phase 2: each key's last ops in history order. A delete matters here only when
            // another spelling of its class may have added the same table key before it.
            let mut last: Vec<(u64, Option<&EntrySpec>, &Key)> = Vec::new();
            for (key, s) in &nt.keys {
                if let Some(d) = s.del.filter(|_| nt.classes.get(&s.class).is_some_and(|&n| n > 1)) {
                    last.push((d, None, key));
                }
                last.extend(s.adds.iter().map(|(at, e)| (*at, Some(e), key)));
            }
            last.sort_unstable_by_key(|&(at, _, _)| at);
            for (_, e, key) in last {
                match e {
                    Some(e) => batch.push(EntryOp::Add(e.clone())),
                    None => {
                        run(p, &mut batch)?;
                        let _ = p.apply_ops(&[EntryOp::Del { table, key: key.0.clone() }]);
                    }
                }
            }
            run(p, &mut batch)?;
        }
        batch.extend(self.meters.values().cloned());
        batch.extend(self.pipes.values().cloned());
        run(p, &mut batch)
    }
}

impl NetTable {
    /// The slot of `key`, made (and counted in its class) if new.
    fn slot(&mut self, shape: &KeyShape, key: &[Match]) -> &mut Slot {
        let classes = &mut self.classes;
        self.keys.entry(Key(key.to_vec())).or_insert_with(|| {
            let class = shape.class(key);
            *classes.entry(class).or_default() += 1;
            Slot { class, del: None, adds: Vec::new() }
        })
    }
}

/// Folds `items` (a net snapshot first, if any, then transactions) into one net snapshot.
/// `None` when a net snapshot is not first (not a prefix the log handed out).
fn fold(basis: &Basis, items: &[Item]) -> Option<NetLog> {
    let mut net = match items.first() {
        Some(Item::Net(n)) => NetLog::clone(n),
        _ => NetLog::default(),
    };
    for (k, item) in items.iter().enumerate() {
        match item {
            Item::Net(_) if k == 0 => {}
            Item::Net(_) => return None,
            Item::Ops(ops) => ops.iter().for_each(|op| net.fold(basis, op)),
        }
    }
    net.len = net.count();
    Some(net)
}

impl ChangeLog {
    /// An empty log for the replica `startup` as it starts (spec and start-up entries, what
    /// a restore rebuilds): hashes the alias class of every start-up entry (a walk over every
    /// table, once, before any write: 11,000 entries in some milliseconds).
    pub fn new(startup: &Pipeline, compact_at: usize) -> ChangeLog {
        let prog = startup.program();
        let tables: Vec<KeyShape> =
            prog.tables.iter().map(|t| KeyShape { imp: t.imp, widths: t.key.iter().map(|k| k.field.width).collect() }).collect();
        let classes = tables
            .iter()
            .enumerate()
            .map(|(t, shape)| startup.table_entries(t).unwrap_or_default().iter().map(|e| shape.class(&e.key)).collect())
            .collect();
        ChangeLog {
            items: Vec::new(),
            len: 0,
            net_len: 0,
            compact_at,
            basis: Arc::new(Basis { tables, startup: classes }),
            fold: None,
            folder: Background::new("fp-log-fold"),
            folds: 0,
            last_fold: Duration::ZERO,
        }
    }

    /// Sets the bound: fold once the log holds more than `ops` ops.
    pub fn set_compact_at(&mut self, ops: usize) {
        self.compact_at = ops;
    }

    /// The bound.
    pub fn compact_at(&self) -> usize {
        self.compact_at
    }

    /// Ops a replay applies.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Net snapshots installed so far.
    pub fn folds(&self) -> usize {
        self.folds
    }

    /// How long the last fold installed took, on its own thread.
    pub fn last_fold_time(&self) -> Duration {
        self.last_fold
    }

    /// Appends a transaction's ops; installs a fold that finished (never waits for one) and
    /// starts the next when due, on a thread that runs `setup` first (folds in line when no
    /// thread can be started). Returns the items a fold replaced, to free off the write's
    /// path. Costs the append, a check, and when a fold starts a copy of the items' `Arc`s.
    pub fn push(&mut self, ops: Arc<[EntryOp]>, setup: fn()) -> Option<Vec<Item>> {
        self.len += ops.len();
        self.items.push(Item::Ops(ops));
        let old = self.finish(false);
        if self.fold.is_none() && self.len > self.compact_at && self.len - self.net_len > self.net_len {
            let (basis, items) = (Arc::clone(&self.basis), self.items.clone());
            let covers = items.len();
            let spawned = self.folder.run(setup, move || {
                let start = Instant::now();
                (fold(&basis, &items), start.elapsed())
            });
            match spawned {
                Ok(h) => self.fold = Some((covers, h)),
                Err(_) => {
                    let start = Instant::now();
                    let net = fold(&self.basis, &self.items);
                    return merge(old, self.install(covers, net, start.elapsed()));
                }
            }
        }
        old
    }

    /// Waits for the fold under way, if any, and installs it; returns the items it replaced.
    /// For tests and tools (a push installs a finished fold without waiting).
    pub fn settle(&mut self) -> Option<Vec<Item>> {
        self.finish(true)
    }

    fn finish(&mut self, wait: bool) -> Option<Vec<Item>> {
        if !wait && !self.fold.as_mut().is_some_and(|(_, h)| h.is_finished()) {
            return None;
        }
        let (covers, h) = self.fold.take()?;
        // A fold that panicked is a bug; the log keeps its items and folds again when due.
        let (net, took) = h.join()?;
        self.install(covers, net, took)
    }

    fn install(&mut self, covers: usize, net: Option<NetLog>, took: Duration) -> Option<Vec<Item>> {
        let net = net?;
        self.last_fold = took;
        self.net_len = net.len;
        let old: Vec<Item> = self.items.splice(..covers, [Item::Net(Arc::new(net))]).collect();
        self.len = self.net_len + self.items.iter().skip(1).map(|i| if let Item::Ops(o) = i { o.len() } else { 0 }).sum::<usize>();
        self.folds += 1;
        Some(old)
    }

    /// Applies every item to `p`, a pipeline as the log started (spec and start-up entries).
    ///
    /// # Errors
    /// What `p` refused (a bug: every op was accepted once by the same program).
    pub fn replay(&self, p: &mut Pipeline) -> Result<(), String> {
        for item in &self.items {
            match item {
                Item::Ops(ops) => p.apply_ops(ops).map_err(|(_, msg)| msg)?,
                Item::Net(net) => net.replay(p)?,
            }
        }
        Ok(())
    }

    /// The items, in order (tests).
    #[cfg(test)]
    pub(crate) fn items(&self) -> &[Item] {
        &self.items
    }
}

fn merge(a: Option<Vec<Item>>, b: Option<Vec<Item>>) -> Option<Vec<Item>> {
    match (a, b) {
        (Some(mut a), Some(b)) => {
            a.extend(b);
            Some(a)
        }
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const METERED: &str = r#"
name = "m"
[parser]
headers = ["eth"]
[[meter]]
name = "pol"
kind = "srtcm"
size = 4
[control]
ingress = "forward 1"
"#;

    /// Reconfiguring meters keeps one op per meter in the log: the last one.
    #[test]
    fn a_folded_log_keeps_each_meters_last_rates() {
        let shadow = fastpath_pipeline::compile("m.toml", METERED).unwrap_or_else(|e| panic!("{e}")).instantiate();
        let mut log = ChangeLog::new(&shadow, 4);
        for k in 1..=1000u64 {
            let op = shadow.program().parse_entry(&format!("meter pol {} cir {k} cbs 100 ebs 100", k % 2)).unwrap();
            log.push(Arc::from(vec![op]), || {});
            log.settle();
            assert!(log.len() <= 2 * 2 + 1, "after {k} ops the log holds {}", log.len());
        }
        assert!(log.folds() > 100, "{}", log.folds());
        // Replayed in order, the log leaves each meter at its last rates.
        let mut replayed = BTreeMap::new();
        for item in log.items() {
            let ops: Vec<EntryOp> = match item {
                Item::Ops(o) => o.to_vec(),
                Item::Net(n) => n.meters.values().cloned().collect(),
            };
            for op in ops {
                if let EntryOp::Meter { index, .. } = op {
                    replayed.insert(index, format!("{op:?}"));
                }
            }
        }
        let last = |i: usize, cir: u64| {
            format!("{:?}", shadow.program().parse_entry(&format!("meter pol {i} cir {cir} cbs 100 ebs 100")).unwrap())
        };
        assert_eq!(replayed.into_values().collect::<Vec<_>>(), [last(0, 1000), last(1, 999)]);
    }

    const TABLES: &str = r#"
name = "t"
[parser]
headers = ["eth", "ipv4", "udp"]
[[table]]
name = "ex"
key = [{ field = "ipv4.dst", match = "exact" }, { field = "udp.dport", match = "exact" }]
actions = ["forward", "drop"]
size = 4096
default = "drop"
[[table]]
name = "routes"
key = [{ field = "ipv4.dst", match = "lpm" }]
actions = ["forward", "drop"]
size = 4096
default = "drop"
[[table]]
name = "acl"
key = [{ field = "ipv4.src", match = "ternary" }, { field = "udp.dport", match = "range" }]
actions = ["forward", "drop"]
size = 4096
default = "drop"
[control]
ingress = '''
apply ex
apply routes
apply acl
'''
"#;

    fn tables() -> Pipeline {
        fastpath_pipeline::compile("t.toml", TABLES).unwrap_or_else(|e| panic!("{e}")).instantiate()
    }

    /// The update-under-load schedule's shape: every change a fresh key, added and deleted a
    /// few writes later, in tables never cleared, with start-up entries some of which are
    /// deleted and added again. The folded log holds the keys live and the start-up keys
    /// deleted, not one tombstone per fresh key.
    #[test]
    fn fresh_keys_added_and_deleted_leave_no_tombstones() {
        let mut startup = tables();
        let base: String = (0..200u32)
            .map(|i| format!("table routes add 10.1.{i}.0/24 => forward(1)\ntable acl add 10.1.{i}.0/24 80 priority {i} => drop\n"))
            .collect();
        startup.load_entries("base", &base).unwrap();
        let mut log = ChangeLog::new(&startup, 64);
        let prog = startup.program().clone();
        let change = |w: u32, k: u32, del: bool| -> Vec<EntryOp> {
            let i = w * 10 + k;
            let (a, b) = (i / 256 % 256, i % 256);
            let lines = if del {
                [
                    format!("table routes del 10.200.{a}.{b}/32"),
                    format!("table acl del 10.200.{a}.{b} 1000..2000"),
                    format!("table ex del 10.200.{a}.{b} {i}"),
                ]
            } else {
                [
                    format!("table routes add 10.200.{a}.{b}/32 => forward(2)"),
                    format!("table acl add 10.200.{a}.{b} 1000..2000 priority 7 => forward(2)"),
                    format!("table ex add 10.200.{a}.{b} {i} => forward(2)"),
                ]
            };
            lines.iter().map(|l| prog.parse_entry(l).unwrap_or_else(|e| panic!("{l}: {}", e.msg))).collect()
        };
        let write = |w: u32| -> Vec<EntryOp> {
            let mut ops = Vec::new();
            for k in 0..10 {
                ops.extend(change(w, k, false));
                if w >= 5 {
                    ops.extend(change(w - 5, k, true));
                }
            }
            // Churn on start-up entries: deleted, added back two writes later.
            let s = w % 200;
            ops.push(prog.parse_entry(&format!("table routes del 10.1.{s}.0/24")).unwrap());
            if w >= 2 {
                ops.push(prog.parse_entry(&format!("table routes add 10.1.{}.0/24 => forward(1)", (w - 2) % 200)).unwrap());
            }
            ops
        };
        for w in 0..400u32 {
            log.push(Arc::from(write(w)), || {});
            log.settle();
        }
        // Live: 5 writes × 10 keys × 3 tables, 2 start-up routes deleted (tombstones) and the
        // start-up routes added back (up to 200, those churned so far). Nothing grows with
        // the 12,000 fresh keys.
        assert!(log.folds() > 10, "{}", log.folds());
        let Some(Item::Net(net)) = log.items().first() else { panic!("no net snapshot") };
        assert!(net.len <= 150 + 2 + 200 + 10, "the net snapshot holds {} ops", net.len);
        // And it replays to what the ops did.
        let mut direct = tables();
        direct.load_entries("base", &base).unwrap();
        let mut replayed = tables();
        replayed.load_entries("base", &base).unwrap();
        for w in 0..400u32 {
            direct.apply_ops(&write(w)).unwrap();
        }
        log.replay(&mut replayed).unwrap();
        for t in 0..3 {
            assert_eq!(replayed.table_entries(t), direct.table_entries(t), "table {t}");
        }
    }

    fn spelling(kind: u8, v: u32, len: u8) -> Match {
        let v = u128::from(v);
        let mask = prefix_mask(len, 32);
        match kind % 5 {
            0 => Match::Exact(v),
            1 => Match::Prefix(v & mask, len),
            2 => Match::Masked(v & mask, mask),
            3 => Match::Range(v & mask, (v & mask) | (!mask & 0xffff_ffff)),
            _ => Match::Any,
        }
    }

    /// Two spellings the table takes as one key (adding one and deleting the other leaves it
    /// empty) have one alias class, over every pair of spellings of a few keys: the mirror of
    /// the tables' key reading in `KeyShape::class` agrees with the tables themselves.
    #[test]
    fn spellings_of_one_table_key_share_an_alias_class() {
        let mut p = tables();
        let log = ChangeLog::new(&p, 64);
        let ports = [Match::Exact(80), Match::Range(80, 80), Match::Prefix(80, 16), Match::Range(0, 65535), Match::Any];
        let mut keys: Vec<(usize, Vec<Match>)> = Vec::new();
        for kind in 0..5 {
            for v in [0x0a00_0000u32, 0x0a00_0001, 0x0a00_0003] {
                for len in [32u8, 30, 24] {
                    for port in ports {
                        keys.push((0, vec![spelling(kind, v, len), port]));
                        keys.push((2, vec![spelling(kind, v, len), port]));
                    }
                    keys.push((1, vec![spelling(kind, v, len)]));
                }
            }
        }
        keys.sort();
        keys.dedup();
        let (mut aliases, mut distinct) = (0, 0);
        for (t, x) in &keys {
            let action = p.program().tables[*t].actions[0];
            let add =
                EntryOp::Add(EntrySpec { table: *t, key: x.clone(), priority: 1, action, args: [0; fastpath_pipeline::ir::MAX_ARGS] });
            if p.apply_ops(&[add]).is_err() {
                continue;
            }
            for (u, y) in keys.iter().filter(|(u, _)| u == t) {
                if p.apply_ops(&[EntryOp::Del { table: *u, key: y.clone() }]).is_ok() {
                    assert_eq!(p.table_len(*t), 0);
                    let shape = &log.basis.tables[*t];
                    assert_eq!(shape.class(x), shape.class(y), "table {t}: {x:?} and {y:?} are one key");
                    aliases += usize::from(x != y);
                    let action = p.program().tables[*t].actions[0];
                    let add = EntryOp::Add(EntrySpec {
                        table: *t,
                        key: x.clone(),
                        priority: 1,
                        action,
                        args: [0; fastpath_pipeline::ir::MAX_ARGS],
                    });
                    p.apply_ops(&[add]).unwrap();
                } else {
                    distinct += 1;
                }
            }
            p.apply_ops(&[EntryOp::Clear { table: *t }]).unwrap();
        }
        assert!(aliases > 100 && distinct > 1000, "{aliases} alias pairs, {distinct} distinct: the check checked little");
    }
}
