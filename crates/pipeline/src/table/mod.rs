//! Table stages: extract keys for the batch ▸ bulk lookup ▸ apply each packet's action.
//!
//! One stage type serves every table; the lookup engine is chosen by the compiler from the key
//! (see [`TableImpl`]) and matched once per batch, not per packet. Entries point at interned
//! action entries (action + arguments), so a million routes to a hundred next hops share a
//! hundred action entries. The ACL engine is immutable once published: inserts and removes are
//! staged in a [`LiveAcl`] and take effect at [`TableOps::commit`], in one swap, as the last
//! full build plus a small delta (commit cost follows the change, not the table); full builds
//! ("folds") run off the write path ([`TableOps::fold_job`], [`TableOps::finish_fold`]).

mod aclkey;
pub mod ops;
mod parsed;
#[cfg(test)]
mod parsed_tests;
mod rowkey;

/// A full classifier build handed out by a table, to run on another thread, and its result.
pub use fastpath_tables::acl::{FoldJob, Folded};
pub use ops::{Adopt, BuiltClassifier, EntryView, TableError, TableOps};

use crate::action;
use crate::build::special::{fast_form, Fast};
use crate::exec::{count_ttl, KeyShare, Post, PostCount, Pre, PreOp, Stage, StageCx, TtlDec};
use crate::field::Extract;
use crate::ir::{MatchKind, Prim, Program, TableDef, TableImpl, ValueKind, MAX_ARGS, MAX_KEY_FIELDS};
use crate::stages::l2edit::{L2Edit, Then};
use crate::stages::vxlan::EncapTemplate;
use crate::trace::TraceRec;
use crate::value::Match;
pub(crate) use aclkey::KeyMemo;
use aclkey::{AclCache, AclKey, MISS};
use fastpath_packet::each_lane;
use fastpath_packet::{Batch, DropReason, Lanes, Pool, BATCH_MAX};
/// A built classifier (the engine of `acl` tables), shared read-only between replicas.
pub use fastpath_tables::acl::Acl;
use fastpath_tables::acl::{AclConfig, AclRule, FieldMatch, LiveAcl};
use fastpath_tables::exact::{ExactTable, LaneSink};
use fastpath_tables::lpm::{Lpm4, Lpm6};
pub(crate) use parsed::{ParsedTuple, TupleSink};
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ActionEntry {
    action: u16,
    args: [u128; MAX_ARGS],
}

enum Engine {
    Direct(Vec<u32>),
    Exact64(ExactTable<u64, u32>),
    Exact128(ExactTable<u128, u32>),
    Lpm4(Box<Lpm4>),
    /// An exact table of one IPv4 address with room for at least [`HOST4_MIN_SIZE`] entries (a
    /// broadband gateway's sessions by subscriber address): its keys as /32 routes of a
    /// DIR-24-8, as VPP's IPv4 FIB holds subscribers' host routes. A lookup is one load, two
    /// when the key's /24 holds entries, against a hash table's hash, two bucket reads and a
    /// key compare (`scripts/instructions vbng`: see docs/benchmarks.md). With only /32s in it
    /// a lookup finds the key's own entry or nothing: exact match.
    Host4(Box<Lpm4>),
    Lpm6(Box<Lpm6>),
    /// The rules (staged changes included), the classifier workers read, and whether changes
    /// are staged.
    Acl {
        rules: Box<LiveAcl>,
        live: Option<Arc<Acl>>,
        dirty: bool,
    },
}

/// A table and the stage that applies it.
pub struct TableStage {
    def: TableDef,
    /// This table's bit in `Meta::hits`, set on a hit; 0 in a specialised build when no
    /// condition tests it ([`Program::hit_tested`]): any new reader of `Meta::hits` must be
    /// counted there.
    bit: u32,
    table_index: u16,
    engine: Engine,
    entries: Vec<ActionEntry>,
    fast: Vec<Fast>,
    default_fast: Fast,
    /// Specialised passes (false: the reference interpreter).
    special: bool,
    /// The [`Fast`] kinds of every action entry interned so far (a bit each; entries are only
    /// ever appended, so this only grows): one kind means the action pass needs no dispatch.
    kinds: u8,
    /// Outer headers of the `Fast::Encap` entries.
    templates: Vec<EncapTemplate>,
    /// Layer-2 edits of the `Fast::L2` entries.
    edits: Vec<L2Edit>,
    /// The register every entry sets, while each one is a `Fast::SetReg` of the same register
    /// (`ONE_REG_NONE` before the first entry, `ONE_REG_MIXED` once two differ), and entry
    /// `r`'s value in `reg_values[r]`: the action pass of such a table (the overlay's VNI,
    /// policer and tunnel mappings) stores the value with no look at the entry's form. Empty
    /// once mixed.
    one_reg: u16,
    reg_values: Vec<u32>,
    /// Action entry ▸ index; foldhash: every entry a control plane adds is hashed here (a
    /// session's entry is unique to it), and SipHash made that most of a session's setup.
    /// (A fixed-seed hash: building a table costs the same instructions every run.)
    intern: HashMap<ActionEntry, u32, foldhash::fast::FixedState>,
    /// FNV-1a over `entries` in index order, kept as they are interned (they are only ever
    /// appended), so that comparing replicas' entries costs nothing between two batches.
    entries_digest: u64,
    bodies: Vec<Vec<Prim>>,
    default: ActionEntry,
    len: usize,
    hits: u64,
    misses: u64,
    /// ACL key layout: for each key field, its 32-bit chunk widths (most significant first).
    chunks: Vec<Vec<u8>>,
    /// Per-batch scratch, allocated once: keys and lookup results by slot. Slots outside the
    /// batch's lanes hold stale values that no pass reads.
    scratch: Box<Scratch>,
    /// The specialised extractor when the key is one field.
    extract: Option<Extract>,
    /// Every key field's extractor, width and whether it is a `range` field, in key order.
    key_x: Vec<(Extract, u8, bool)>,
    /// A key of several fields read a packet at a time (specialised build only).
    row_key: Option<rowkey::RowKey>,
    /// Classifier tables: the results of recent keys (specialised build only).
    acl_cache: Option<Box<AclCache>>,
    /// Classifier tables whose fields are the input port or whole header fields of 1, 2 or 4
    /// bytes: how to read the key a header at a time (specialised build only).
    acl_key: Option<AclKey>,
    /// Whether this classifier table reads its key once with its neighbour's (specialised
    /// build only).
    key_share: KeyShare,
    /// Port-indexed tables (specialised build only): each input port's output port when its
    /// entry is `forward P`, else `MISS`, kept with the entries. While every entry is a
    /// `forward` (l2fwd's port pairs) and a miss drops, the stage is one load per packet: no
    /// bounds checks (a `u16` indexes 2^16 slots), no entry index, no form.
    port_out: Option<Box<[u32; PORTS]>>,
}

/// Slots of a port-indexed table: every `meta.in_port`.
const PORTS: usize = 1 << 16;

struct Scratch {
    keys: [u128; BATCH_MAX],
    k32: [u32; BATCH_MAX],
    k64: [u64; BATCH_MAX],
    out: [u32; BATCH_MAX],
}

/// Builds the stage for table `t` of `p`.
/// `special`: pre-digest entries into fast forms and use the monomorphised passes; when false the
/// stage is the plain interpreter (`TableStage::run_reference`).
pub fn build_stage(p: &Program, t: usize, special: bool) -> Box<dyn Stage> {
    let def = p.tables[t].clone();
    let width: u32 = def.key.iter().map(|k| u32::from(k.field.width)).sum();
    let chunks: Vec<Vec<u8>> = def.key.iter().map(|k| chunk_widths(k.field.width)).collect();
    let engine = match def.imp {
        TableImpl::Direct => Engine::Direct(vec![MISS; 1usize << width]),
        TableImpl::Exact if host_table(&def) => Engine::Host4(Box::new(host4(def.size))),
        TableImpl::Exact if width <= 64 => Engine::Exact64(ExactTable::with_capacity(def.size)),
        TableImpl::Exact => Engine::Exact128(ExactTable::with_capacity(def.size)),
        TableImpl::Lpm if def.key[0].field.width == 32 => Engine::Lpm4(Box::new(Lpm4::new())),
        TableImpl::Lpm => Engine::Lpm6(Box::new(Lpm6::new())),
        TableImpl::Acl => Engine::Acl { rules: Box::new(live_acl(chunks.iter().flatten().copied().collect())), live: None, dirty: false },
    };
    let (da, dargs) = def.default;
    // Every key field's extractor, width and whether it is a `range` field.
    let key_x: Vec<(Extract, u8, bool)> =
        def.key.iter().map(|k| (k.field.extractor(), k.field.width, k.kind == MatchKind::Range)).collect();
    let bodies: Vec<Vec<Prim>> = p.actions.iter().map(|a| a.body.clone()).collect();
    let (mut templates, mut edits) = (Vec::new(), Vec::new());
    let default_fast =
        if special { bodies.get(da).map_or(Fast::General, |b| fast_form(b, &dargs, &mut templates, &mut edits)) } else { Fast::General };
    Box::new(TableStage {
        // The hit bit, for conditions that test it; none when nothing does (the specialised
        // action passes then skip the write).
        bit: if special && !p.hit_tested(t) { 0 } else { 1 << t },
        table_index: t as u16,
        engine,
        entries: Vec::new(),
        fast: Vec::new(),
        default_fast,
        special,
        kinds: 0,
        templates,
        edits,
        one_reg: ONE_REG_NONE,
        reg_values: Vec::new(),
        intern: HashMap::default(),
        entries_digest: FNV_OFFSET,
        bodies,
        default: ActionEntry { action: da as u16, args: dargs },
        len: 0,
        hits: 0,
        misses: 0,
        chunks,
        extract: (def.key.len() == 1).then(|| def.key[0].field.extractor()),
        row_key: (special && def.imp != TableImpl::Acl).then(|| rowkey::RowKey::new(&key_x)).flatten(),
        scratch: Box::new(Scratch { keys: [0; BATCH_MAX], k32: [0; BATCH_MAX], k64: [0; BATCH_MAX], out: [MISS; BATCH_MAX] }),
        acl_cache: (special && def.imp == TableImpl::Acl).then(|| Box::new(AclCache::new())),
        port_out: (special
            && def.imp == TableImpl::Direct
            && matches!(def.key.as_slice(), [k] if matches!(k.field.extractor(), Extract::InPort)))
        .then(|| vec![MISS; PORTS].into_boxed_slice().try_into().ok())
        .flatten(),
        acl_key: (special && def.imp == TableImpl::Acl).then(|| AclKey::new(&key_x)).flatten(),
        key_x,
        key_share: KeyShare::Alone,
        def,
    })
}

/// An empty incremental classifier over fields of these widths (each 1..=32 by
/// [`chunk_widths`]). A table with no key fields (which the compiler does not produce) gets a
/// one-field classifier that refuses every rule as having the wrong field count.
fn live_acl(widths: Vec<u8>) -> LiveAcl {
    match LiveAcl::new(AclConfig::new(widths)) {
        Ok(l) => l,
        Err(_) => match LiveAcl::new(AclConfig::new(vec![32])) {
            Ok(l) => l,
            Err(e) => unreachable!("a one-field 32-bit config is valid: {e}"),
        },
    }
}

/// Splits a field of `width` bits into chunks of at most 32 bits, most significant first.
fn chunk_widths(width: u8) -> Vec<u8> {
    let mut v = Vec::new();
    let mut w = width;
    let first = w % 32;
    if first != 0 {
        v.push(first);
        w -= first;
    }
    while w > 0 {
        v.push(32);
        w -= 32;
    }
    v
}

impl TableStage {
    fn bad_key(&self, msg: String) -> TableError {
        TableError::BadKey { table: self.def.name.clone(), msg }
    }

    fn intern(&mut self, e: ActionEntry) -> u32 {
        if let Some(&i) = self.intern.get(&e) {
            return i;
        }
        let i = self.entries.len() as u32;
        self.entries.push(e);
        self.entries_digest = std::iter::once(u128::from(e.action)).chain(e.args).fold(self.entries_digest, fnv1a);
        let f = match self.bodies.get(usize::from(e.action)) {
            Some(b) if self.special => fast_form(b, &e.args, &mut self.templates, &mut self.edits),
            _ => Fast::General,
        };
        self.kinds |= f.kind_bit();
        let (reg, value) = match f {
            Fast::SetReg { reg, value } => (u16::from(reg), value),
            _ => (ONE_REG_MIXED, 0),
        };
        self.one_reg = if self.one_reg == ONE_REG_NONE || self.one_reg == reg { reg } else { ONE_REG_MIXED };
        // Once mixed, always mixed (entries are only appended): the list is not kept, so a table
        // of other actions (vbng's 256k session edits) does not carry 4 bytes an entry for it.
        if self.one_reg == ONE_REG_MIXED {
            self.reg_values = Vec::new();
        } else {
            self.reg_values.push(value);
        }
        self.fast.push(f);
        self.intern.insert(e, i);
        i
    }

    /// The classifier fields of a key (each key field split into ≤ 32-bit chunks).
    fn acl_fields(&self, key: &[Match]) -> Result<Vec<FieldMatch>, TableError> {
        let mut out = Vec::new();
        for ((m, f), chunks) in key.iter().zip(&self.def.key).zip(&self.chunks) {
            let w = f.field.width;
            if f.kind == MatchKind::Exact && !matches!(m, Match::Exact(_)) {
                return Err(self.bad_key(format!("field {} matches exactly; give a single value", f.name)));
            }
            if f.kind == MatchKind::Lpm && !matches!(m, Match::Prefix(..) | Match::Exact(_) | Match::Any) {
                return Err(self.bad_key(format!("field {} is an lpm field; give a prefix", f.name)));
            }
            if chunks.len() == 1 {
                out.push(match *m {
                    Match::Masked(v, mask) => FieldMatch::Masked { value: (v & mask) as u32, mask: mask as u32 },
                    other => {
                        let Some((lo, hi)) = other.as_range(w) else {
                            return Err(self.bad_key(format!("field {}: bad match", f.name)));
                        };
                        FieldMatch::range(lo as u32, hi as u32)
                    }
                });
                continue;
            }
            // Wide field: per-chunk value and mask (ranges only as prefixes).
            let all = if w >= 128 { u128::MAX } else { (1u128 << w) - 1 };
            let (v, mask) = match *m {
                Match::Exact(v) => (v, all),
                Match::Any => (0, 0),
                Match::Prefix(v, l) => (v, crate::value::prefix_mask(l, w)),
                Match::Masked(v, mk) => (v & mk, mk),
                Match::Range(lo, hi) if lo == hi => (lo, all),
                Match::Range(..) => {
                    return Err(self.bad_key(format!("field {} is wider than 32 bits: use a prefix or mask, not a range", f.name)))
                }
            };
            let mut shift = u32::from(w);
            for &cw in chunks {
                shift -= u32::from(cw);
                let cm = ((mask >> shift) as u32) & width_max(cw);
                let cv = ((v >> shift) as u32) & cm;
                out.push(if cm == width_max(cw) { FieldMatch::exact(cv) } else { FieldMatch::Masked { value: cv, mask: cm } });
            }
        }
        Ok(out)
    }
}

impl TableStage {
    /// The key a classifier rule was added with, back from its per-chunk matches: the inverse
    /// of `acl_fields` (adding the result again gives the same chunks).
    fn acl_key(&self, fields: &[FieldMatch]) -> Vec<Match> {
        let mut out = Vec::with_capacity(self.def.key.len());
        let mut at = 0;
        for (f, chunks) in self.def.key.iter().zip(&self.chunks) {
            let w = f.field.width;
            let part = fields.get(at..at + chunks.len()).unwrap_or(&[]);
            at += chunks.len();
            if let [one] = part {
                out.push(match *one {
                    // Shown as given: `v/0xmask` adds back as the same masked chunk.
                    FieldMatch::Masked { value, mask } => Match::Masked(u128::from(value), u128::from(mask)),
                    FieldMatch::Range { lo, hi } => range_match(u128::from(lo), u128::from(hi), w, f.kind == MatchKind::Range),
                });
                continue;
            }
            // Wide field: exact or masked chunks, most significant first.
            let (mut v, mut m) = (0u128, 0u128);
            for (&cw, fm) in chunks.iter().zip(part) {
                let (cv, cm) = match *fm {
                    FieldMatch::Range { lo, hi } if lo == hi => (lo, width_max(cw)),
                    FieldMatch::Range { .. } => (0, 0),
                    FieldMatch::Masked { value, mask } => (value, mask),
                };
                v = v << cw | u128::from(cv);
                m = m << cw | u128::from(cm);
            }
            let all = if w >= 128 { u128::MAX } else { (1u128 << w) - 1 };
            out.push(if m == 0 {
                Match::Any
            } else if m == all {
                Match::Exact(v)
            } else if m == crate::value::prefix_mask(m.count_ones() as u8, w) {
                Match::Prefix(v, m.count_ones() as u8)
            } else {
                Match::Masked(v, m)
            });
        }
        out
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a of `h` continued over the 16 bytes of `x`.
fn fnv1a(h: u64, x: u128) -> u64 {
    x.to_le_bytes().iter().fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A single-chunk classifier range shown the way it was most likely given: `*`, one value, a
/// prefix (not for `range` fields), or `lo..hi`. Each adds back as the same range.
fn range_match(lo: u128, hi: u128, width: u8, range_field: bool) -> Match {
    let max = if width >= 128 { u128::MAX } else { (1u128 << width) - 1 };
    let host = hi - lo;
    if lo == 0 && hi == max {
        Match::Any
    } else if lo == hi {
        Match::Exact(lo)
    } else if !range_field && host & host.wrapping_add(1) == 0 && lo & host == 0 {
        Match::Prefix(lo, width - host.count_ones() as u8)
    } else {
        Match::Range(lo, hi)
    }
}

/// The key fields of a packed exact or direct key, first field highest (the inverse of
/// `self_pack`).
fn unpack_key(def: &TableDef, mut k: u128) -> Vec<Match> {
    let mut out = vec![Match::Any; def.key.len()];
    for (m, f) in out.iter_mut().zip(&def.key).rev() {
        let w = f.field.width;
        if w >= 128 {
            *m = Match::Exact(k);
            k = 0;
        } else {
            *m = Match::Exact(k & ((1u128 << w) - 1));
            k >>= w;
        }
    }
    out
}

/// Packs the key fields of one packet into a u128 (concatenated, first field highest).
#[inline]
fn width_max(w: u8) -> u32 {
    if w >= 32 {
        u32::MAX
    } else {
        (1 << w) - 1
    }
}

impl TableOps for TableStage {
    fn def(&self) -> &TableDef {
        &self.def
    }

    fn insert(&mut self, key: &[Match], priority: u32, action: usize, args: [u128; MAX_ARGS]) -> Result<(), TableError> {
        if key.len() != self.def.key.len() {
            return Err(self.bad_key(format!("expected {} key fields, got {}", self.def.key.len(), key.len())));
        }
        if !self.def.actions.contains(&action) {
            return Err(TableError::BadAction { table: self.def.name.clone(), msg: "action not allowed in this table".into() });
        }
        let full = TableError::Full { table: self.def.name.clone(), size: self.def.size };
        let at_capacity = self.len >= self.def.size;
        let entry = ActionEntry { action: action as u16, args };
        let idx = self.intern(entry);
        let added;
        match &mut self.engine {
            Engine::Direct(v) => {
                let k = self_pack(&self.def, key)?;
                let slot = v
                    .get_mut(k as usize)
                    .ok_or_else(|| TableError::BadKey { table: self.def.name.clone(), msg: "key out of range".into() })?;
                added = *slot == MISS;
                if added && at_capacity {
                    return Err(full);
                }
                *slot = idx;
                if let Some(po) = self.port_out.as_deref_mut().and_then(|po| po.get_mut(k as usize)) {
                    *po = match self.fast.get(idx as usize) {
                        Some(Fast::Forward(p)) => u32::from(*p),
                        _ => MISS,
                    };
                }
            }
            Engine::Exact64(t) => {
                let k = self_pack(&self.def, key)? as u64;
                if at_capacity && t.lookup(&k).is_none() {
                    return Err(full);
                }
                added = t.insert(k, idx).map_err(|_| full)?.is_none();
            }
            Engine::Exact128(t) => {
                let k = self_pack(&self.def, key)?;
                if at_capacity && t.lookup(&k).is_none() {
                    return Err(full);
                }
                added = t.insert(k, idx).map_err(|_| full)?.is_none();
            }
            Engine::Lpm4(t) => {
                let (v, l) = prefix_of(&self.def, key, 32)?;
                added = t.get(v as u32, l).is_none();
                if added && at_capacity {
                    return Err(full);
                }
                t.insert(v as u32, l, idx).map_err(|e| TableError::BadKey { table: self.def.name.clone(), msg: e.to_string() })?;
            }
            Engine::Host4(t) => {
                let k = host_key(&self.def, key)?;
                added = t.get(k, 32).is_none();
                if added && at_capacity {
                    return Err(full);
                }
                t.insert(k, 32, idx).map_err(|e| TableError::BadKey { table: self.def.name.clone(), msg: e.to_string() })?;
            }
            Engine::Lpm6(t) => {
                let (v, l) = prefix_of(&self.def, key, 128)?;
                added = t.get(v, l).is_none();
                if added && at_capacity {
                    return Err(full);
                }
                t.insert(v, l, idx).map_err(|e| TableError::BadKey { table: self.def.name.clone(), msg: e.to_string() })?;
            }
            Engine::Acl { .. } => {
                let fields = self.acl_fields(key)?;
                let Engine::Acl { rules, dirty, .. } = &mut self.engine else { return Ok(()) };
                added = !rules.contains(&fields, priority);
                if added && at_capacity {
                    return Err(full);
                }
                rules
                    .insert(AclRule { priority, fields, action: idx })
                    .map_err(|e| TableError::Build { table: self.def.name.clone(), msg: e.to_string() })?;
                *dirty = true;
            }
        }
        if added {
            self.len += 1;
        }
        Ok(())
    }

    fn remove(&mut self, key: &[Match]) -> Result<(), TableError> {
        let nf = || TableError::NotFound { table: self.def.name.clone() };
        let found = match &mut self.engine {
            Engine::Direct(v) => {
                let k = self_pack(&self.def, key)? as usize;
                if let Some(po) = self.port_out.as_deref_mut().and_then(|po| po.get_mut(k)) {
                    *po = MISS;
                }
                match v.get_mut(k) {
                    Some(s) if *s != MISS => {
                        *s = MISS;
                        true
                    }
                    _ => false,
                }
            }
            Engine::Exact64(t) => t.remove(&(self_pack(&self.def, key)? as u64)).is_some(),
            Engine::Exact128(t) => t.remove(&self_pack(&self.def, key)?).is_some(),
            Engine::Lpm4(t) => {
                let (v, l) = prefix_of(&self.def, key, 32)?;
                t.remove(v as u32, l).is_ok()
            }
            Engine::Host4(t) => t.remove(host_key(&self.def, key)?, 32).is_ok(),
            Engine::Lpm6(t) => {
                let (v, l) = prefix_of(&self.def, key, 128)?;
                t.remove(v, l).is_ok()
            }
            Engine::Acl { .. } => {
                let fields = self.acl_fields(key)?;
                let Engine::Acl { rules, dirty, .. } = &mut self.engine else { return Err(nf()) };
                // The key has no priority: every rule with these fields goes.
                let removed = rules.remove(&fields);
                *dirty |= removed > 0;
                self.len -= removed.saturating_sub(1);
                removed > 0
            }
        };
        if !found {
            return Err(nf());
        }
        self.len -= 1;
        Ok(())
    }

    fn commit(&mut self) -> Result<(), TableError> {
        if let Engine::Acl { rules, live, dirty } = &mut self.engine {
            if *dirty {
                *live = Some(Arc::new(rules.commit()));
                *dirty = false;
                if let Some(c) = &mut self.acl_cache {
                    c.forget();
                }
            }
        }
        Ok(())
    }

    fn commit_full(&mut self) -> Result<(), TableError> {
        if let Engine::Acl { rules, live, dirty } = &mut self.engine {
            if *dirty || live.as_ref().is_some_and(|a| a.has_delta()) {
                *live = Some(Arc::new(rules.rebuild()));
                *dirty = false;
                if let Some(c) = &mut self.acl_cache {
                    c.forget();
                }
            }
        }
        Ok(())
    }

    fn fold_job(&mut self) -> Option<FoldJob> {
        match &mut self.engine {
            Engine::Acl { rules, dirty: false, .. } => rules.fold_job(),
            _ => None,
        }
    }

    fn finish_fold(&mut self, f: Folded) -> bool {
        let Engine::Acl { rules, live, dirty } = &mut self.engine else { return false };
        if !rules.finish_fold(f) {
            return false;
        }
        *live = Some(Arc::new(rules.commit()));
        *dirty = false;
        if let Some(c) = &mut self.acl_cache {
            c.forget();
        }
        true
    }

    fn built_classifier(&self) -> Option<BuiltClassifier> {
        match &self.engine {
            Engine::Acl { live: Some(acl), dirty: false, .. } => {
                Some(BuiltClassifier { acl: Arc::clone(acl), actions: self.entries_digest })
            }
            _ => None,
        }
    }

    fn adopt_classifier(&mut self, b: &BuiltClassifier) -> Adopt {
        let same = self.entries_digest == b.actions;
        match &mut self.engine {
            Engine::Acl { live, dirty, .. } if same => {
                *dirty = false;
                if let Some(c) = &mut self.acl_cache {
                    c.forget();
                }
                Adopt::Adopted(live.replace(Arc::clone(&b.acl)))
            }
            _ => Adopt::Refused,
        }
    }

    fn dump(&self) -> Vec<EntryView> {
        let view = |key: Vec<Match>, priority: u32, r: u32| {
            let e = self.entries.get(r as usize).copied().unwrap_or(self.default);
            EntryView { key, priority, action: usize::from(e.action), args: e.args }
        };
        let unpack = |k: u128| unpack_key(&self.def, k);
        let mut out = Vec::with_capacity(self.len);
        match &self.engine {
            Engine::Direct(v) => out.extend(v.iter().enumerate().filter(|(_, &r)| r != MISS).map(|(i, &r)| view(unpack(i as u128), 0, r))),
            Engine::Exact64(t) => out.extend(t.iter().map(|(k, r)| view(unpack(u128::from(k)), 0, r))),
            Engine::Exact128(t) => out.extend(t.iter().map(|(k, r)| view(unpack(k), 0, r))),
            Engine::Lpm4(t) => out.extend(t.routes().map(|(p, l, r)| view(vec![Match::Prefix(u128::from(p), l)], 0, r))),
            Engine::Host4(t) => out.extend(t.routes().map(|(p, _, r)| view(unpack(u128::from(p)), 0, r))),
            Engine::Lpm6(t) => out.extend(t.routes().map(|(p, l, r)| view(vec![Match::Prefix(p, l)], 0, r))),
            Engine::Acl { rules, .. } => out.extend(rules.rules().iter().map(|r| view(self.acl_key(&r.fields), r.priority, r.action))),
        }
        out.sort_by(|a, b| (a.priority, &a.key).cmp(&(b.priority, &b.key)));
        out
    }

    fn clear(&mut self) {
        match &mut self.engine {
            Engine::Direct(v) => {
                v.fill(MISS);
                if let Some(po) = self.port_out.as_deref_mut() {
                    po.fill(MISS);
                }
            }
            Engine::Exact64(t) => *t = ExactTable::with_capacity(self.def.size),
            Engine::Exact128(t) => *t = ExactTable::with_capacity(self.def.size),
            Engine::Lpm4(t) => **t = Lpm4::new(),
            Engine::Host4(t) => **t = host4(self.def.size),
            Engine::Lpm6(t) => **t = Lpm6::new(),
            Engine::Acl { rules, live, dirty, .. } => {
                rules.clear();
                *live = None;
                *dirty = false;
                if let Some(c) = &mut self.acl_cache {
                    c.forget();
                }
            }
        }
        self.len = 0;
    }

    fn len(&self) -> usize {
        self.len
    }

    fn hit_miss(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }
}

fn self_pack(def: &TableDef, key: &[Match]) -> Result<u128, TableError> {
    let mut k = 0u128;
    for (m, f) in key.iter().zip(&def.key) {
        let Match::Exact(v) = m else {
            return Err(TableError::BadKey {
                table: def.name.clone(),
                msg: format!("field {} matches exactly; give a single value", f.name),
            });
        };
        k = if f.field.width >= 128 { *v } else { k << f.field.width | v };
    }
    Ok(k)
}

/// The smallest exact table of one IPv4 address kept as /32 routes ([`Engine::Host4`]): its
/// DIR-24-8 root takes 64 MiB of address space (touched only where keys fall), which a small
/// table's hash does not need.
const HOST4_MIN_SIZE: usize = 1 << 16;

/// Whether exact table `def` is kept as /32 routes ([`Engine::Host4`]): one IPv4 address, at
/// least [`HOST4_MIN_SIZE`] entries. Addresses, not any 32-bit key: each /24 that holds keys
/// takes a 1.25 KiB group, which addresses handed out from pools share, and keys spread over
/// the whole space (tunnel ids, hashes) would not.
fn host_table(def: &TableDef) -> bool {
    matches!(def.key.as_slice(), [k] if k.field.kind == ValueKind::Ipv4) && def.size >= HOST4_MIN_SIZE
}

/// The DIR-24-8 of an [`Engine::Host4`] table of `size` entries: each key needs at most one
/// second-level group, so it is never full before `size` keys.
fn host4(size: usize) -> Lpm4 {
    Lpm4::with_max_groups(u32::try_from(size).unwrap_or(u32::MAX))
}

/// The 32-bit key of an [`Engine::Host4`] table.
fn host_key(def: &TableDef, key: &[Match]) -> Result<u32, TableError> {
    let k = self_pack(def, key)?;
    u32::try_from(k).map_err(|_| TableError::BadKey { table: def.name.clone(), msg: format!("{k:#x} is wider than 32 bits") })
}

fn prefix_of(def: &TableDef, key: &[Match], width: u8) -> Result<(u128, u8), TableError> {
    match key.first() {
        Some(Match::Prefix(v, l)) => Ok((*v, *l)),
        Some(Match::Exact(v)) => Ok((*v, width)),
        Some(Match::Any) => Ok((0, 0)),
        _ => Err(TableError::BadKey {
            table: def.name.clone(),
            msg: format!("field {} is an lpm field; give a prefix like 10.0.0.0/8", def.key[0].name),
        }),
    }
}

impl TableStage {
    /// Pass 1 of a classifier table: every lane's result into the scratch `out`; the lanes
    /// that hit when that is known (the specialised reader and the empty table), less those
    /// whose entry does nothing (`no_action`, `permit`) when a miss does nothing either: such
    /// a hit is done here (its hit bit set and counted, the count returned with the lanes), and
    /// the action pass need not visit it. Out of line: inlined, its registers cost the other
    /// engines' loops instructions.
    #[inline(never)]
    fn acl_pass(&mut self, pool: &Pool, b: &mut Batch, lanes: Lanes, memo: &mut KeyMemo) -> Option<(Lanes, u64)> {
        let Engine::Acl { live, .. } = &self.engine else { return None };
        // Hits on an empty entry are finished here when the action pass would only visit the
        // other hits (a miss neither drops nor acts): measured on `switch-acl --rules 10000`,
        // whose traffic hits `no_action` rules, the action pass cost 36 instructions a packet.
        let nop_done = self.def.default_drop.is_none() && matches!(self.default_fast, Fast::Nop);
        let (fast, bit): (&[Fast], u32) = (&self.fast, self.bit);
        let sc = &mut *self.scratch;
        // The classifier reads each field once, straight into its 32-bit parts (a missing
        // port range reads as 0: see `keys_fields`).
        let live = live.as_ref().filter(|a| !a.is_empty());
        let mut flat = [0u32; 4 * MAX_KEY_FIELDS];
        match (live, self.acl_cache.as_deref_mut()) {
            // No rules: every packet misses, whatever its key.
            (None, _) => {
                each_lane!(i in lanes => { sc.out[i] = MISS });
                return Some((Lanes::NONE, 0));
            }
            // Every field fits one 32-bit part (the 5-tuple, ports, VLANs): each is read
            // with its own extractor straight into the key, which the cache looks up first.
            (Some(acl), Some(cache)) if self.acl_key.is_some() => {
                cache.belong_to(acl);
                let Some(ak) = &self.acl_key else { return None };
                let nf = ak.fields();
                let nop = nop_done.then_some((fast, bit));
                if cache.in_use() {
                    // Through the cache: the raw key when the key has one (no per-word work),
                    // in a pass monomorphised for the key's form and width in `u64`s.
                    let out = &mut sc.out;
                    macro_rules! cached {
                        ($k:literal, $form:expr) => {
                            cached_pass::<$k, _>(cache, acl, nf, nop, pool, b, lanes, out, &$form)
                        };
                    }
                    let parsed = matches!(self.key_share, KeyShare::Parsed) && memo.covers(0, lanes);
                    let r = match (ak.tuple(), ak.raw_groups(), nf.div_ceil(2)) {
                        // Parts of the 5-tuple, the input port and a register: two `u64`s,
                        // from the parser's record when it made one for every lane (and the
                        // key has no register).
                        (Some(t), _, _) => match parsed.then(|| aclkey::ParsedForm::new(t)).flatten() {
                            Some(form) => cached!(2, form),
                            None if t.has_reg() => cached!(2, aclkey::TupleForm::<true>(t, ak)),
                            None => cached!(2, aclkey::TupleForm::<false>(t, ak)),
                        },
                        // Up to two headers: a masked window each.
                        (None, Some(2), _) => cached!(5, aclkey::RawForm::<2>(ak)),
                        (None, Some(1), _) => cached!(3, aclkey::RawForm::<1>(ak)),
                        (None, Some(_), _) => cached!(1, aclkey::RawForm::<0>(ak)),
                        (None, None, 1) => cached!(1, aclkey::WordForm(ak)),
                        (None, None, 2) => cached!(2, aclkey::WordForm(ak)),
                        (None, None, 3) => cached!(3, aclkey::WordForm(ak)),
                        (None, None, _) => cached!(4, aclkey::WordForm(ak)),
                    };
                    cache.judge(lanes.count());
                    return Some(r);
                }
                // The cache stands aside (keys do not repeat): the words, straight to the
                // classifier, in a loop of its own.
                // With a neighbour reading the same key, the first records the keys it reads
                // and the second takes them, when they cover its lanes (see `KeyShare`).
                let share = self.key_share;
                let lend = match share {
                    KeyShare::Lend(me) => {
                        memo.begin(me, lanes);
                        true
                    }
                    _ => false,
                };
                let borrow = matches!(share, KeyShare::Borrow(from) if memo.covers(from, lanes));
                macro_rules! direct {
                    ($k:literal) => {
                        if borrow {
                            direct_pass::<$k, true>(ak, acl, nop, pool, b, lanes, &mut sc.out, memo, false)
                        } else {
                            direct_pass::<$k, false>(ak, acl, nop, pool, b, lanes, &mut sc.out, memo, lend)
                        }
                    };
                }
                let r = match nf.div_ceil(2) {
                    1 => direct!(1),
                    2 => direct!(2),
                    3 => direct!(3),
                    _ => direct!(4),
                };
                if borrow {
                    // Used once: nothing later reads them.
                    memo.clear();
                }
                return Some(r);
            }
            (Some(acl), _) => {
                for i in lanes {
                    sc.out[i] = match keys_fields(&self.key_x, pool.data(b.handle(i)), b.meta(i)) {
                        Some(vals) => {
                            let n = split_chunks(vals, &self.chunks, &mut flat);
                            acl.classify(&flat[..n]).map_or(MISS, |(a, _)| a)
                        }
                        None => MISS,
                    };
                }
            }
        }
        None
    }

    /// The plain interpreter: per packet, read every key field, look the key up, run the entry's
    /// primitives. The reference the specialised passes are tested against; no fast forms.
    fn run_reference(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        let mut hits = 0u64;
        let mut flat = [0u32; 4 * MAX_KEY_FIELDS];
        for i in lanes {
            let data = pool.data(b.handle(i));
            let m = b.meta(i);
            let r = match &self.engine {
                Engine::Acl { live, .. } => match (live.as_deref(), keys_fields(&self.key_x, data, m)) {
                    (Some(acl), Some(vals)) => {
                        let n = split_chunks(vals, &self.chunks, &mut flat);
                        acl.classify(&flat[..n]).map(|(a, _)| a)
                    }
                    _ => None,
                },
                engine => match rowkey::key128(&self.key_x, data, m) {
                    None => None,
                    Some(k) => match engine {
                        Engine::Direct(v) => v.get(k as usize).copied().filter(|&r| r != MISS),
                        Engine::Exact64(t) => t.lookup(&(k as u64)),
                        Engine::Exact128(t) => t.lookup(&k),
                        Engine::Lpm4(t) | Engine::Host4(t) => t.lookup(k as u32),
                        Engine::Lpm6(t) => t.lookup(k),
                        Engine::Acl { .. } => None,
                    },
                },
            };
            let entry = match r {
                Some(r) => {
                    hits += 1;
                    b.meta_mut(i).hits |= self.bit;
                    self.entries.get(r as usize).copied().unwrap_or(self.default)
                }
                None => self.default,
            };
            if cx.tracing() {
                let mut key = [0u128; 4];
                let data = pool.data(b.handle(i));
                for (k, f) in key.iter_mut().zip(&self.def.key) {
                    *k = f.field.read(data, b.meta(i)).unwrap_or(0);
                }
                let action = self.def.actions.iter().position(|&a| a == usize::from(entry.action)).unwrap_or(usize::MAX) as u16;
                cx.trace(i, TraceRec::Lookup { table: self.table_index, key, hit: r.is_some(), action });
            }
            if r.is_none() {
                if let Some(reason) = self.def.default_drop {
                    cx.drop(b, i, reason);
                    continue;
                }
            }
            let mut acx = cx.action_ctx();
            if let Some(body) = self.bodies.get(usize::from(entry.action)) {
                for p in body {
                    if !action::apply(p, &entry.args, pool, b, i, &mut acx) {
                        break;
                    }
                }
            }
        }
        self.hits += hits;
        self.misses += lanes.count() as u64 - hits;
    }
}

impl TableStage {
    /// The specialised stage. With `PRE`, `pre`'s primitive runs on each packet in the key pass,
    /// before the key is read (only for the shapes [`Stage::folds`] accepts: one key field, not a
    /// classifier, not a port-indexed table); returns the lanes it kept. `post` runs on each
    /// packet the stage leaves live: in the action pass of a table of layer-2 edits, in a pass
    /// of its own otherwise.
    fn run_special<const PRE: bool>(
        &mut self,
        pool: &mut Pool,
        b: &mut Batch,
        mut lanes: Lanes,
        cx: &mut StageCx<'_>,
        mut pre: Option<Pre<'_>>,
        mut post: Option<&mut Post<'_>>,
    ) -> Lanes {
        // Pass 1: keys (straight into the engine's key width). A packet missing a key field
        // misses. Results go to `sc.out` (`MISS` = miss) for every lane.
        // The lanes that hit, when pass 1 knows them (classifier tables).
        let is_acl = matches!(self.engine, Engine::Acl { .. });
        // With the hits the classifier pass finished itself (empty entries).
        let (known_hits, acl_hits) = match if is_acl { self.acl_pass(pool, b, lanes, cx.acl_keys) } else { None } {
            Some((h, n)) => (Some(h), n),
            None => (None, 0),
        };
        let sc = &mut *self.scratch;
        // Lanes whose key could not be read (a header missing): rare, so recorded on a branch
        // that is almost never taken, and `have` is the lanes minus these.
        let mut missing = Lanes::NONE;
        let mut fused = false;
        // A direct table keyed by the input port or a register looks its packets up in the
        // action pass (`Some(register)`, `None` for the port).
        let mut direct_fused: Option<Option<u8>> = None;
        // A host-route table with nothing folded before it and no trace to write looks its
        // packets up in the action pass, one loop over the packets instead of two (measured on
        // `scripts/instructions -n 100000 vbng --subscribers 256000 --size 1400 --mix 8:1`:
        // 622.8 -> 600.4 instructions a packet).
        let host_in_act = !PRE && !cx.tracing() && matches!((self.extract, &self.engine), (Some(Extract::Be32 { .. }), Engine::Host4(_)));
        // Runs the loop macro `$pass` with extractor `$x`'s variant named in the loop, for the
        // common variants (`e @ Extract::Reg(_)` did not do: the compiler kept a jump on the
        // variant for every packet); the tokens after `$pass` follow the extractor in its call.
        macro_rules! by_variant {
            ($x:expr, $pass:ident $($rest:tt)*) => {
                match $x {
                    Extract::InPort => $pass!(Extract::InPort $($rest)*),
                    Extract::Reg(r) => $pass!(Extract::Reg(r) $($rest)*),
                    Extract::Meta(f) => $pass!(Extract::Meta(f) $($rest)*),
                    Extract::Short { slot, byte, n, needs, alt } => $pass!(Extract::Short { slot, byte, n, needs, alt } $($rest)*),
                    Extract::Be16 { slot, byte, needs, alt } => $pass!(Extract::Be16 { slot, byte, needs, alt } $($rest)*),
                    Extract::Be32 { slot, byte, needs, alt } => $pass!(Extract::Be32 { slot, byte, needs, alt } $($rest)*),
                    Extract::Bits { slot, byte, n, shift, width, needs, alt } => {
                        $pass!(Extract::Bits { slot, byte, n, shift, width, needs, alt } $($rest)*)
                    }
                    e => $pass!(e $($rest)*),
                }
            };
        }
        if is_acl {
            fused = true;
        } else if let Some(x) = self.extract {
            // One key field: the loop is monomorphised per extractor shape and key width.
            // `pre` first when folded (the packet it drops leaves `lanes` after the pass).
            let mut dropped = Lanes::NONE;
            macro_rules! frame {
                ($i:ident) => {{
                    let d = pool.data_mut(b.handle($i));
                    if let (true, Some(pre)) = (PRE, pre.as_mut()) {
                        if let Err(reason) = pre.op.apply(d, b.meta($i)) {
                            b.drop($i, reason);
                            pre.drops[reason as usize] += 1;
                            dropped.insert($i);
                            continue;
                        }
                    }
                    &*d
                }};
            }
            macro_rules! pass {
                ($x:expr, $keys:expr, $ty:ty) => {
                    each_lane!(i in lanes => {
                        let v = $x.read64(frame!(i), b.meta(i));
                        $keys[i] = v.unwrap_or(0) as $ty;
                        if v.is_none() {
                            missing.insert(i);
                        }
                    })
                };
            }
            match (x, &self.engine) {
                (Extract::InPort, Engine::Direct(_)) => {
                    // Port-indexed table (l2fwd): key and lookup happen in the action pass.
                    fused = true;
                    direct_fused = Some(None);
                }
                // Register-indexed (the overlay's tunnels by `meta.tun`): the same, when no
                // pre-op needs the key pass (`scripts/instructions -n 100000 sdn-overlay`:
                // 909.8 -> 902.8 instructions a packet).
                (Extract::Reg(r), Engine::Direct(_)) if !PRE => {
                    fused = true;
                    direct_fused = Some(Some(r));
                }
                (e @ Extract::Be128 { .. }, _) => {
                    each_lane!(i in lanes => {
                        let v = e.read(frame!(i), b.meta(i));
                        sc.keys[i] = v.unwrap_or(0);
                        if v.is_none() {
                            missing.insert(i);
                        }
                    })
                }
                // A host-route table's lookup happens in the action pass ([`HostGet`]); with a
                // pre-op or a trace, the keys here and the bulk lookup below.
                (Extract::Be32 { .. }, Engine::Host4(_)) if host_in_act => fused = true,
                (Extract::Be32 { slot, byte, needs, alt }, Engine::Lpm4(_) | Engine::Host4(_)) => {
                    pass!(Extract::Be32 { slot, byte, needs, alt }, sc.k32, u32)
                }
                (x, Engine::Exact64(_) | Engine::Direct(_)) => by_variant!(x, pass, sc.k64, u64),
                (e, Engine::Lpm4(_) | Engine::Host4(_)) => pass!(e, sc.k32, u32),
                (e, _) => pass!(e, sc.keys, u128),
            }
            if PRE && !dropped.is_empty() {
                lanes = lanes.and_not(dropped);
                if lanes.is_empty() {
                    return lanes;
                }
            }
        } else if let (Engine::Exact64(_), [(x0, _, _), (x1, w1, _)]) = (&self.engine, self.key_x.as_slice()) {
            // Two fields in 64 bits (VNET or VRF + address): both reads inlined, u64 arithmetic.
            let (x0, x1, w1) = (*x0, *x1, u32::from(*w1));
            macro_rules! two {
                ($x0:expr, $x1:expr) => {
                    each_lane!(i in lanes => {
                        let (d, m) = (pool.data(b.handle(i)), b.meta(i));
                        let k = match ($x0.read64(d, m), $x1.read64(d, m)) {
                            (Some(a), Some(c)) => Some(a << w1 | c),
                            _ => None,
                        };
                        sc.k64[i] = k.unwrap_or(0);
                        if k.is_none() {
                            missing.insert(i);
                        }
                    })
                };
            }
            match (x0, x1) {
                // A register and an IPv4 address (the overlay's VNET + destination), the
                // variants named so the loop has no jump on them.
                (Extract::Reg(r), Extract::Be32 { slot, byte, needs, alt }) => {
                    two!(Extract::Reg(r), Extract::Be32 { slot, byte, needs, alt })
                }
                _ => two!(x0, x1),
            }
        } else if let Some(rk) = &self.row_key {
            // The input port, registers and up to 4 header fields of at most 8 bytes (vbng's
            // upstream session: port, two VLAN ids, MAC), a packet at a time.
            missing = rk.pass(pool, b, lanes, &mut sc.keys);
            if matches!(self.engine, Engine::Exact64(_) | Engine::Direct(_)) {
                each_lane!(i in lanes => { sc.k64[i] = sc.keys[i] as u64 });
            }
        } else {
            // Any other key, built column by column: each field's extractor variant is matched
            // once per batch and named in its loop, not matched per field of every packet. A
            // lane that lacks a field is missing; the fields after it still shift its (unused)
            // key.
            each_lane!(i in lanes => { sc.keys[i] = 0 });
            for &(x, width, _) in &self.key_x {
                let shift = u32::from(width.min(127));
                macro_rules! column {
                    ($x:expr) => {
                        each_lane!(i in lanes => {
                            match $x.read(pool.data(b.handle(i)), b.meta(i)) {
                                Some(v) if width >= 128 => sc.keys[i] = v,
                                Some(v) => sc.keys[i] = sc.keys[i] << shift | v,
                                None => missing.insert(i),
                            }
                        })
                    };
                }
                by_variant!(x, column)
            }
            if matches!(self.engine, Engine::Exact64(_) | Engine::Direct(_)) {
                each_lane!(i in lanes => { sc.k64[i] = sc.keys[i] as u64 });
            }
        }
        let have = lanes.and_not(missing);
        let mut in_lookup_hits = None;
        if !fused && !missing.is_empty() {
            for i in missing {
                sc.out[i] = MISS;
            }
        }
        // Pass 2: bulk lookup.
        match &self.engine {
            _ if fused => {}
            Engine::Direct(v) => {
                each_lane!(i in have => {
                    sc.out[i] = v.get(sc.k64[i] as usize).copied().unwrap_or(MISS);
                });
            }
            // Every entry sets one register (the overlay's VNI, MAC and CA → PA mappings) and a
            // miss drops, with no trace to write: the register is set in the lookup's own loop,
            // and no action pass runs (`scripts/instructions -n 100000 sdn-overlay`: 874.0 ->
            // 851.0 instructions a packet).
            Engine::Exact64(t)
                if self.def.default_drop.is_some() && usize::from(self.one_reg) < fastpath_packet::meta::REGS && !cx.tracing() =>
            {
                if let Some(reason) = self.def.default_drop {
                    let set = SetInLookup { values: &self.reg_values, reg: usize::from(self.one_reg), reason, missing };
                    in_lookup_hits = Some(if self.bit != 0 {
                        set_in_lookup::<true>(t, &sc.k64, have, b, self.bit, cx, set)
                    } else {
                        set_in_lookup::<false>(t, &sc.k64, have, b, 0, cx, set)
                    });
                }
            }
            Engine::Exact64(t) => {
                t.lookup_lanes(&sc.k64, have, &mut sc.out, MISS);
            }
            Engine::Exact128(t) => {
                t.lookup_lanes(&sc.keys, have, &mut sc.out, MISS);
            }
            Engine::Lpm4(t) | Engine::Host4(t) => {
                t.lookup_lanes(&sc.k32, have, &mut sc.out);
            }
            Engine::Lpm6(t) => {
                t.lookup_lanes(&sc.keys, have, &mut sc.out);
            }
            // Classifier tables were resolved in pass 1.
            Engine::Acl { .. } => {}
        }
        let out = &sc.out;
        // Pass 3: actions (the common shapes pre-digested in `fast`).
        if cx.tracing() {
            for i in lanes {
                let r = match (direct_fused, &self.engine) {
                    (Some(by), Engine::Direct(v)) => direct_get(v, by, b.meta(i)),
                    _ => out[i],
                };
                let entry = if r != MISS { self.entries.get(r as usize).unwrap_or(&self.default) } else { &self.default };
                let mut key = [0u128; 4];
                let data = pool.data(b.handle(i));
                for (k, f) in key.iter_mut().zip(&self.def.key) {
                    *k = f.field.read(data, b.meta(i)).unwrap_or(0);
                }
                let action = self.def.actions.iter().position(|&a| a == usize::from(entry.action)).unwrap_or(usize::MAX) as u16;
                cx.trace(i, TraceRec::Lookup { table: self.table_index, key, hit: r != MISS, action });
            }
        }
        let mut hits = acl_hits;
        // A miss that does nothing (an ACL's `no_action` default) needs no action pass.
        let act_lanes = match known_hits {
            Some(h) if self.def.default_drop.is_none() && matches!(self.default_fast, Fast::Nop) => h,
            _ => lanes,
        };
        // The action pass, monomorphised over where the lookup result is read from.
        macro_rules! act {
            ($get:expr) => {
                each_lane!(i in act_lanes => {
                    let r: u32 = $get.get(&*pool, &*b, i);
                    let fast = if r != MISS {
                        hits += 1;
                        b.meta_mut(i).hits |= self.bit;
                        self.fast.get(r as usize).unwrap_or(&Fast::General)
                    } else {
                        if let Some(reason) = self.def.default_drop {
                            cx.drop(b, i, reason);
                            continue;
                        }
                        &self.default_fast
                    };
                    match *fast {
                        Fast::General => {
                            let entry = if r != MISS { self.entries.get(r as usize).unwrap_or(&self.default) } else { &self.default };
                            run_body(self.bodies.get(usize::from(entry.action)), entry, pool, b, i, cx);
                        }
                        f => apply_fast(f, &self.templates, &self.edits, pool, b, i, cx),
                    }
                })
            };
        }
        // Entries of one kind and a miss that drops (most tables: l2fwd's port pairs, a FIB of
        // next hops, the overlay's mappings and tunnels): a loop per kind with no dispatch, out
        // of line ([`uniform_pass`]); the miss (`MISS` is past the end of `fast`) is the only
        // branch.
        macro_rules! dispatch {
            ($get:expr) => {{
                let (fast, bit, edits, templates) = (&self.fast[..], self.bit, &self.edits[..], &self.templates[..]);
                // [`uniform_pass`] over `forms` (one per entry), with or without the hit bit.
                macro_rules! pass {
                    ($forms:expr, $reason:expr, $apply:expr) => {{
                        let get = $get;
                        hits = if bit != 0 {
                            uniform_pass::<_, _, _, true>($forms, bit, $reason, get, pool, b, act_lanes, cx, $apply)
                        } else {
                            uniform_pass::<_, _, _, false>($forms, bit, $reason, get, pool, b, act_lanes, cx, $apply)
                        }
                    }};
                }
                macro_rules! uniform {
                    ($reason:expr, |$f:ident, $pool:ident, $b:ident, $i:ident, $cx:ident, $edits:ident, $templates:ident| $pat:pat => $body:expr) => {{
                        // A type rather than a closure, so that its method is inlined into the
                        // loop: LLVM kept the layer-2 edit's closure out of line (a call and
                        // seven saved registers per packet, `scripts/instructions vbng`).
                        struct Apply<'a> {
                            edits: &'a [L2Edit],
                            templates: &'a [EncapTemplate],
                        }
                        impl ApplyFast for Apply<'_> {
                            #[inline(always)]
                            fn apply(&mut self, $f: &Fast, $pool: &mut Pool, $b: &mut Batch, $i: usize, $cx: &mut StageCx<'_>) -> bool {
                                let ($edits, $templates) = (self.edits, self.templates);
                                match $f {
                                    $pat => {
                                        $body;
                                        true
                                    }
                                    _ => false,
                                }
                            }
                        }
                        pass!(fast, Some($reason), &mut Apply { edits, templates })
                    }};
                }
                match (self.def.default_drop, self.kinds) {
                    (Some(reason), Fast::FORWARD) => uniform!(reason, |f, _p, b, i, _c, _e, _t| &Fast::Forward(p) => b.meta_mut(i).out_port = p),
                    (Some(reason), Fast::REWRITE) => {
                        uniform!(reason, |f, pool, b, i, _c, _e, _t| Fast::Rewrite { macs, port } => rewrite(macs, *port, pool, b, i))
                    }
                    // Every entry sets one register: entry `r`'s value is `reg_values[r]`, stored
                    // with no look at its form (`scripts/instructions -n 100000 sdn-overlay`:
                    // 902.6 -> 887.9 instructions a packet, three such tables).
                    (Some(reason), Fast::SET_REG) if usize::from(self.one_reg) < fastpath_packet::meta::REGS => {
                        pass!(&self.reg_values[..], Some(reason), &mut SetOneReg(usize::from(self.one_reg)))
                    }
                    (Some(reason), Fast::SET_REG) => {
                        uniform!(reason, |f, _p, b, i, _c, _e, _t| &Fast::SetReg { reg, value } => set_reg(b, i, reg, value))
                    }
                    // Every entry an edit and no other edit (the default drops, or runs nothing
                    // as vbng's `up_session`, whose miss the control block tests): entry `r`'s
                    // edit is `edits[r]`, found with no look at `fast` (measured on
                    // `scripts/instructions vbng`: 707.7 -> 696.7 instructions a packet, and
                    // 688.7 -> 684.5 for the miss that runs nothing).
                    (reason, Fast::L2) if edits.len() == fast.len() && (reason.is_some() || matches!(self.default_fast, Fast::Nop)) => {
                        match post.take() {
                            // The count after the table in this pass, on the frame and metadata
                            // the edit leaves (`scripts/instructions vbng`: 684.5 -> 673.6
                            // instructions a packet). Its array leaves `cx` for the pass, which
                            // hands `cx` to the edits (they count nothing).
                            Some(post) => {
                                let c = usize::from(post.op.counter);
                                let mut values = cx.objects.counters.get_mut(c).map(|k| std::mem::take(&mut k.values)).unwrap_or_default();
                                let reg = usize::from(post.op.reg);
                                macro_rules! counted {
                                    ($ttl:literal) => {{
                                        let mut apply = EditApply::new(CountAfter::<$ttl> { values: &mut values, reg });
                                        pass!(edits, reason, &mut apply);
                                        apply.expired
                                    }};
                                }
                                let expired = match post.op.ttl {
                                    TtlDec::No => counted!(0),
                                    TtlDec::Before => counted!(1),
                                    TtlDec::After => counted!(2),
                                };
                                if let Some(k) = cx.objects.counters.get_mut(c) {
                                    k.values = values;
                                }
                                post.expired(expired);
                            }
                            None => pass!(edits, reason, &mut EditApply::new(())),
                        }
                    }
                    (Some(reason), Fast::L2) => {
                        uniform!(reason, |f, pool, b, i, cx, edits, _t| &Fast::L2 { edit } => l2(edits.get(edit as usize), pool, b, i, cx))
                    }
                    (Some(reason), Fast::ENCAP) => {
                        uniform!(reason, |f, pool, b, i, cx, _e, templates| &Fast::Encap { tpl, port } => encap(templates.get(tpl as usize), port, pool, b, i, cx))
                    }
                    _ => act!($get),
                }
            }};
        }
        if let Some(h) = in_lookup_hits {
            hits = h;
        } else if let Some(by) = direct_fused {
            match (by, self.port_out.as_deref(), self.def.default_drop, self.kinds, &self.engine) {
                // Every entry forwards and a miss drops: the output port straight from the input's.
                (None, Some(po), Some(reason), Fast::FORWARD, _) => hits = port_forward(po, self.bit, reason, b, act_lanes, cx),
                (None, _, _, _, Engine::Direct(v)) => dispatch!(|_: &Pool, b: &Batch, i: usize| direct_get(v, None, b.meta(i))),
                // The register's bound tested once, not per packet (9 instructions a packet of
                // the overlay's tunnels).
                (Some(r), _, _, _, Engine::Direct(v)) if usize::from(r) < fastpath_packet::meta::REGS => {
                    let r = usize::from(r);
                    dispatch!(|_: &Pool, b: &Batch, i: usize| v.get(b.meta(i).regs[r] as usize).copied().unwrap_or(MISS))
                }
                // A register past the metadata's (the build refuses one): every packet misses.
                (Some(r), _, _, _, Engine::Direct(v)) => dispatch!(|_: &Pool, b: &Batch, i: usize| direct_get(v, Some(r), b.meta(i))),
                _ => {} // `direct_fused` is a direct engine's
            }
        } else if let (true, Some(Extract::Be32 { slot, byte, needs, alt }), Engine::Host4(t)) = (host_in_act, self.extract, &self.engine) {
            // The host-route lookup in the action pass: one loop over the packets, not two.
            dispatch!(HostGet { t, at: (slot, byte, needs, alt) });
        } else {
            dispatch!(|_: &Pool, _: &Batch, i: usize| out[i]);
        }
        let misses = lanes.count() as u64 - hits;
        self.hits += hits;
        self.misses += misses;
        if let Some(post) = post {
            post.run(cx.objects, pool, b, lanes.and(b.live()));
        }
        lanes
    }
}

impl Stage for TableStage {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        if self.special {
            self.run_special::<false>(pool, b, lanes, cx, None, None);
        } else {
            self.run_reference(pool, b, lanes, cx);
        }
    }

    fn folds(&self, _pre: PreOp) -> bool {
        self.special
            && self.extract.is_some_and(|x| !matches!((x, &self.engine), (Extract::InPort, Engine::Direct(_))))
            && !matches!(self.engine, Engine::Acl { .. })
    }

    fn run_with_pre(&mut self, pre: Pre<'_>, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) -> Lanes {
        if self.folds(pre.op) {
            self.run_special::<true>(pool, b, lanes, cx, Some(pre), None)
        } else {
            crate::exec::run_apart(self, pre, pool, b, lanes, cx)
        }
    }

    fn folds_post(&self, _post: PostCount) -> bool {
        // A classifier's action pass is never the edit pass, and a fused step would hide the
        // table from the classifier key sharing, which looks for plain runs.
        self.special && !matches!(self.engine, Engine::Acl { .. })
    }

    fn run_with_post(&mut self, post: &mut Post<'_>, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        if self.special {
            self.run_special::<false>(pool, b, lanes, cx, None, Some(post));
        } else {
            self.run_reference(pool, b, lanes, cx);
            post.run(cx.objects, pool, b, lanes.and(b.live()));
        }
    }

    fn describe(&self) -> String {
        let keys: Vec<String> = self.def.key.iter().map(|k| format!("{} {:?} @{:?}", k.name, k.kind, k.field.loc)).collect();
        let share = match self.key_share {
            KeyShare::Alone => "",
            KeyShare::Lend(_) => " (key kept for the next table)",
            KeyShare::Borrow(_) => " (key from the previous table)",
            KeyShare::Parsed => " (key from the parser)",
        };
        let host = if matches!(self.engine, Engine::Host4(_)) { " as /32 routes (DIR-24-8)" } else { "" };
        format!("table {:?}{host} size {} key [{}] entries {}{share}", self.def.imp, self.def.size, keys.join(", "), self.len)
    }

    fn share_acl_key(&mut self, share: KeyShare) -> bool {
        if !(self.special && self.acl_key.is_some()) {
            return false;
        }
        // The parser records the 5-tuple only; a table that lends its keys reads them itself.
        let tuple = self.acl_key.as_ref().and_then(|k| k.tuple()).and_then(|t| t.parsed_masks());
        if matches!(share, KeyShare::Parsed) && (tuple.is_none() || !matches!(self.key_share, KeyShare::Alone)) {
            return false;
        }
        self.key_share = share;
        true
    }

    fn table(&mut self) -> Option<&mut dyn TableOps> {
        Some(self)
    }

    fn table_ref(&self) -> Option<&dyn TableOps> {
        Some(self)
    }
}

/// One kind of pre-digested action, as [`uniform_pass`] applies it: false when `f` is of
/// another kind.
trait ApplyFast<T = Fast> {
    fn apply(&mut self, f: &T, pool: &mut Pool, b: &mut Batch, i: usize, cx: &mut StageCx<'_>) -> bool;
    /// On a packet that missed, in a table whose miss runs nothing.
    #[inline(always)]
    fn missed(&mut self, _pool: &mut Pool, _b: &mut Batch, _i: usize) {}
}

/// `one_reg` before a table's first entry, and once its entries set different registers or do
/// something else.
const ONE_REG_NONE: u16 = u16::MAX - 1;
const ONE_REG_MIXED: u16 = u16::MAX;

/// A table whose entries all set register `.0` (below `REGS`): [`uniform_pass`] over their
/// values.
struct SetOneReg(usize);

impl ApplyFast<u32> for SetOneReg {
    #[inline(always)]
    fn apply(&mut self, value: &u32, _pool: &mut Pool, b: &mut Batch, i: usize, _cx: &mut StageCx<'_>) -> bool {
        if let Some(r) = b.meta_mut(i).regs.get_mut(self.0) {
            *r = *value;
        }
        true
    }
}

/// A table's layer-2 edits, each run by [`uniform_pass`] straight from the edit list, and
/// `after` on each packet the table leaves live; the packets `after` drops (`ttl_expired`) go to
/// `expired`.
struct EditApply<A> {
    after: A,
    expired: Lanes,
}

impl<A: Then> EditApply<A> {
    fn new(after: A) -> Self {
        EditApply { after, expired: Lanes::NONE }
    }

    #[inline(always)]
    fn settle(&mut self, kept: bool, b: &mut Batch, i: usize) {
        if !kept {
            b.drop(i, DropReason::TtlExpired);
            self.expired.insert(i);
        }
    }
}

impl<A: Then> ApplyFast<L2Edit> for EditApply<A> {
    #[inline(always)]
    fn apply(&mut self, e: &L2Edit, pool: &mut Pool, b: &mut Batch, i: usize, cx: &mut StageCx<'_>) -> bool {
        match e.run_then(pool, b, i, &mut self.after) {
            Some(kept) => self.settle(kept, b, i),
            None => cx.drop(b, i, DropReason::NoHeadroom),
        }
        true
    }

    #[inline(always)]
    fn missed(&mut self, pool: &mut Pool, b: &mut Batch, i: usize) {
        if A::NOTHING {
            return;
        }
        let kept = self.after.frame(pool.data_mut(b.handle(i)), b.meta(i));
        self.settle(kept, b, i);
    }
}

/// A folded [`PostCount`]: [`count_ttl`], the index in register `reg`.
struct CountAfter<'a, const TTL: u8> {
    values: &'a mut [(u64, u64)],
    reg: usize,
}

impl<const TTL: u8> Then for CountAfter<'_, TTL> {
    #[inline(always)]
    fn frame(&mut self, data: &mut [u8], m: &fastpath_packet::Meta) -> bool {
        let k = m.regs.get(self.reg).copied().unwrap_or(0) as usize;
        count_ttl::<TTL>(self.values, k, data, m)
    }
}

/// A direct table's result for a packet: entry `v[key]` (`MISS` past the end), the key the
/// input port (`by` is `None`) or register `by`.
#[inline(always)]
fn direct_get(v: &[u32], by: Option<u8>, m: &fastpath_packet::Meta) -> u32 {
    let k = match by {
        None => usize::from(m.in_port),
        Some(r) => match m.regs.get(usize::from(r)) {
            Some(&k) => k as usize,
            None => return MISS,
        },
    };
    v.get(k).copied().unwrap_or(MISS)
}

/// Where an action pass finds lane `i`'s lookup result (an entry's index, `MISS` for none).
trait GetResult {
    fn get(&self, pool: &Pool, b: &Batch, i: usize) -> u32;
}

impl<F: Fn(&Pool, &Batch, usize) -> u32> GetResult for F {
    #[inline(always)]
    fn get(&self, pool: &Pool, b: &Batch, i: usize) -> u32 {
        self(pool, b, i)
    }
}

/// A host-route table's lookup, done in the action pass: the packet's 32-bit key (an
/// `Extract::Be32` field: slot, byte, needed and alternative headers) in `t`. A type and not a
/// closure so that it is inlined into the pass (LLVM kept the closure out of line: a call per
/// packet).
struct HostGet<'a> {
    t: &'a Lpm4,
    at: (fastpath_packet::Slot, u16, fastpath_packet::HdrSet, fastpath_packet::HdrSet),
}

impl GetResult for HostGet<'_> {
    #[inline(always)]
    fn get(&self, pool: &Pool, b: &Batch, i: usize) -> u32 {
        let (slot, byte, needs, alt) = self.at;
        match (Extract::Be32 { slot, byte, needs, alt }).read64(pool.data(b.handle(i)), b.meta(i)) {
            Some(k) => self.t.lookup(k as u32).unwrap_or(MISS),
            None => MISS,
        }
    }
}

/// The action pass of a table whose entries are all of one kind and whose miss drops `reason`
/// (`None`: runs nothing): `apply` runs an entry's form in `forms` (false when it is of another
/// kind, which then counts as a miss) on each lane of `lanes` whose result, `get`, is a hit,
/// and sets the hit bit `bit` when `HIT` (some condition tests it); returns the hits. Out of
/// line and generic over `get` and `apply`: inlined into [`TableStage::run_special`], this
/// loop shared the registers of the stage's other passes and spilled and reloaded about 8 of
/// them for every packet (router).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn uniform_pass<T, G, F, const HIT: bool>(
    forms: &[T],
    bit: u32,
    reason: Option<DropReason>,
    get: G,
    pool: &mut Pool,
    b: &mut Batch,
    lanes: Lanes,
    cx: &mut StageCx<'_>,
    apply: &mut F,
) -> u64
where
    G: GetResult,
    F: ApplyFast<T>,
{
    // The misses are counted (the rare branch), the hits are the rest.
    let mut missed = 0u64;
    each_lane!(i in lanes => {
        let r = get.get(pool, b, i);
        match forms.get(r as usize) {
            Some(f) if apply.apply(f, pool, b, i, cx) => {
                if HIT {
                    b.meta_mut(i).hits |= bit;
                }
            }
            _ => {
                missed += 1;
                match reason {
                    Some(reason) => cx.drop(b, i, reason),
                    None => apply.missed(pool, b, i),
                }
            }
        }
    });
    lanes.count() as u64 - missed
}

/// What [`set_in_lookup`] sets and drops: entry `r` sets register `reg` to `values[r]`; a
/// miss, and a lane of `missing` (a key field absent), drops `reason`.
struct SetInLookup<'a> {
    values: &'a [u32],
    reg: usize,
    reason: DropReason,
    missing: Lanes,
}

/// The bulk lookup of a table whose entries all set one register, setting it on each lane of
/// `lanes` that hits, with the hit bit `bit` when `HIT`, then dropping the misses; returns the
/// hits. Out of line, as [`uniform_pass`] is, and with the drops of the misses inside: in
/// [`TableStage::run_special`], they moved the key passes' registers (+20 instructions a
/// packet of the overlay).
#[inline(never)]
fn set_in_lookup<const HIT: bool>(
    t: &ExactTable<u64, u32>,
    keys: &[u64; BATCH_MAX],
    lanes: Lanes,
    b: &mut Batch,
    bit: u32,
    cx: &mut StageCx<'_>,
    set: SetInLookup<'_>,
) -> u64 {
    struct SetReg<'a, const HIT: bool> {
        b: &'a mut Batch,
        values: &'a [u32],
        reg: usize,
        bit: u32,
        missed: Lanes,
    }
    impl<const HIT: bool> LaneSink<u32> for SetReg<'_, HIT> {
        #[inline(always)]
        fn put(&mut self, i: usize, r: Option<u32>) {
            match r.and_then(|r| self.values.get(r as usize)) {
                Some(&v) => {
                    let m = self.b.meta_mut(i);
                    if let Some(x) = m.regs.get_mut(self.reg) {
                        *x = v;
                    }
                    if HIT {
                        m.hits |= self.bit;
                    }
                }
                None => self.missed.insert(i),
            }
        }
    }
    let mut sink = SetReg::<HIT> { b, values: set.values, reg: set.reg, bit, missed: set.missing };
    t.lookup_into(keys, lanes, &mut sink);
    let missed = sink.missed;
    for i in missed {
        cx.drop(b, i, set.reason);
    }
    (lanes.or(set.missing).count() - missed.count()) as u64
}

/// The action pass of a port-indexed table whose entries all forward and whose miss drops
/// `reason`: each lane's output port from `port_out` by its input port; returns the hits.
/// Out of line (measured: inlined, the loop moved the router's registers in the stage's other
/// loops, +4 instructions per packet on `scripts/instructions router`).
#[inline(never)]
fn port_forward(port_out: &[u32; PORTS], bit: u32, reason: DropReason, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) -> u64 {
    // Misses are counted, as they are the rare branch.
    let mut missed = 0u64;
    each_lane!(i in lanes => {
        let p = port_out[usize::from(b.meta(i).in_port)];
        if p != MISS {
            let m = b.meta_mut(i);
            m.hits |= bit;
            m.out_port = p as u16;
        } else {
            missed += 1;
            cx.drop(b, i, reason);
        }
    });
    lanes.count() as u64 - missed
}

/// Applies a pre-digested action ([`Fast`], every form but `General`) to slot `i`: the action
/// pass over mixed forms.
#[inline(always)]
fn apply_fast(f: Fast, templates: &[EncapTemplate], edits: &[L2Edit], pool: &mut Pool, b: &mut Batch, i: usize, cx: &mut StageCx<'_>) {
    match f {
        Fast::L2 { edit } => l2_outlined(edits.get(edit as usize), pool, b, i, cx),
        Fast::Forward(p) => b.meta_mut(i).out_port = p,
        Fast::SetReg { reg, value } => set_reg(b, i, reg, value),
        Fast::Nop | Fast::General => {}
        Fast::Encap { tpl, port } => encap(templates.get(tpl as usize), port, pool, b, i, cx),
        Fast::Rewrite { macs, port } => rewrite(&macs, port, pool, b, i),
        Fast::CtCommit { ct, verdict } => action::ct_commit(cx.objects, ct, b.meta_mut(i), u32::from(verdict)),
    }
}

/// A pre-digested layer-2 edit on slot `i` (drops `no_headroom` when the tags do not fit).
#[inline(always)]
fn l2(e: Option<&L2Edit>, pool: &mut Pool, b: &mut Batch, i: usize, cx: &mut StageCx<'_>) {
    if !e.is_some_and(|e| e.run(pool, b, i)) {
        cx.drop(b, i, DropReason::NoHeadroom);
    }
}

/// [`l2`] as a call, for the action pass over mixed forms, which every table's stage holds:
/// the edit's fast path inlined there grew that function for tables without one.
#[inline(never)]
fn l2_outlined(e: Option<&L2Edit>, pool: &mut Pool, b: &mut Batch, i: usize, cx: &mut StageCx<'_>) {
    l2(e, pool, b, i, cx);
}

/// `set meta.R = V` on slot `i`.
#[inline(always)]
fn set_reg(b: &mut Batch, i: usize, reg: u8, value: u32) {
    if let Some(r) = b.meta_mut(i).regs.get_mut(usize::from(reg)) {
        *r = value;
    }
}

/// A next hop on slot `i`: both MAC addresses, then the output port.
#[inline(always)]
fn rewrite(macs: &[u8; 12], port: u16, pool: &mut Pool, b: &mut Batch, i: usize) {
    let off = b.meta(i).offset(fastpath_packet::Slot::Eth);
    if let Some(h) = fastpath_packet::window_mut::<12>(pool.data_mut(b.handle(i)), off) {
        *h = *macs;
    }
    b.meta_mut(i).out_port = port;
}

/// A prebuilt VXLAN encapsulation on slot `i`, then the output port (drops `no_headroom`).
#[inline(always)]
fn encap(tpl: Option<&EncapTemplate>, port: u16, pool: &mut Pool, b: &mut Batch, i: usize, cx: &mut StageCx<'_>) {
    let ok = match tpl {
        Some(t) => crate::stages::vxlan::encap_with(pool, b.handle(i), b.meta_mut(i), t),
        None => false,
    };
    if ok {
        b.meta_mut(i).out_port = port;
    } else {
        cx.drop(b, i, DropReason::NoHeadroom);
    }
}

/// Runs an entry's primitives on slot `i` through the interpreter: the action shapes
/// [`fast_form`] does not pre-digest. Out of line (measured: inlined into the action pass, the
/// interpreter's body made the loop spill registers for every packet, fast forms included).
#[inline(never)]
fn run_body(body: Option<&Vec<Prim>>, entry: &ActionEntry, pool: &mut Pool, b: &mut Batch, i: usize, cx: &mut StageCx<'_>) {
    let mut acx = cx.action_ctx();
    for p in body.map_or(&[][..], |v| v.as_slice()) {
        if !action::apply(p, &entry.args, pool, b, i, &mut acx) {
            break;
        }
    }
}

/// Reads each key field of a packet; `None` when one is missing. A missing `range` field (the
/// L4 ports of an ICMP packet) reads as 0, as in Open vSwitch's flow key, so a rule with a
/// wildcard port range still applies to protocols without ports (ping through a stateful ACL).
fn keys_fields(key: &[(Extract, u8, bool)], data: &[u8], m: &fastpath_packet::Meta) -> Option<[u128; MAX_KEY_FIELDS]> {
    let mut v = [0u128; MAX_KEY_FIELDS];
    for (out, &(x, _, range)) in v.iter_mut().zip(key) {
        *out = match x.read(data, m) {
            Some(val) => val,
            None if range => 0,
            None => return None,
        };
    }
    Some(v)
}

/// Splits field values into the classifier's 32-bit chunks; returns how many.
fn split_chunks(vals: [u128; MAX_KEY_FIELDS], chunks: &[Vec<u8>], out: &mut [u32; 4 * MAX_KEY_FIELDS]) -> usize {
    let mut n = 0;
    for (v, cw) in vals.iter().zip(chunks) {
        let total: u32 = cw.iter().map(|&c| u32::from(c)).sum();
        let mut shift = total;
        for &c in cw {
            shift -= u32::from(c);
            if let Some(o) = out.get_mut(n) {
                *o = ((v >> shift) as u32) & width_max(c);
            }
            n += 1;
        }
    }
    n.min(out.len())
}

/// A classifier hit on lane `i` (entry `r`): finished here when `nop` is given and the entry is
/// empty (counted in `nop_hits`), else left to the action pass (in `hits`).
#[inline(always)]
fn settle_hit(nop: Option<(&[Fast], u32)>, b: &mut Batch, i: usize, r: u32, hits: &mut Lanes, nop_hits: &mut u64) {
    match nop {
        Some((fast, bit)) if matches!(fast.get(r as usize), Some(Fast::Nop)) => {
            b.meta_mut(i).hits |= bit;
            *nop_hits += 1;
        }
        _ => hits.insert(i),
    }
}

/// The classifier pass of a table through its result cache: each lane's key in `form` (`K`
/// `u64`s), looked up in `cache`. With `nop`, a hit on an empty entry is finished here (as in
/// [`direct_pass`]). Returns the other hits and the count of finished ones. Out of line, one
/// instance per key form: a new form inside `TableStage::acl_pass` moved the overlay's
/// exact-table passes (in `run_special`, which calls it) by 12 instructions a packet.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn cached_pass<const K: usize, F: aclkey::CacheKey<K>>(
    cache: &mut AclCache,
    acl: &fastpath_tables::acl::Acl,
    nf: usize,
    nop: Option<(&[Fast], u32)>,
    pool: &Pool,
    b: &mut Batch,
    lanes: Lanes,
    out: &mut [u32; BATCH_MAX],
    form: &F,
) -> (Lanes, u64) {
    cache.hold::<K>();
    let (mut hits, mut nop_hits) = (Lanes::NONE, 0u64);
    // With `nop`, a hit on an entry that does nothing is finished here (its hit bit set and
    // counted), known from the cached tag: an entry index names one action and its arguments
    // for the table's life, so whether the entry does nothing is cached with it.
    let (done, bit, fast) = match nop {
        Some((fast, bit)) => (aclkey::CACHED_NOP, bit, fast),
        None => (0, 0, &[][..]),
    };
    let classify = |k: &[u64; K]| {
        let r = aclkey::classify_words(acl, &form.words(k), nf).unwrap_or(MISS);
        (r, matches!(fast.get(r as usize), Some(Fast::Nop)))
    };
    each_lane!(i in lanes => {
        let t = match form.read(pool, b, i) {
            Some(k) => cache.classify(k, F::NONZERO, &classify),
            None => u64::from(MISS),
        };
        let r = t as u32;
        out[i] = r;
        if t & done != 0 {
            b.meta_mut(i).hits |= bit;
            nop_hits += 1;
        } else if r != MISS {
            hits.insert(i);
        }
    });
    (hits, nop_hits)
}

/// The classifier pass of a table whose result cache stands aside (keys that do not repeat:
/// a connection's first packet): each lane's key words straight to the classifier. `K` is the
/// key's width in `u64`s. With `nop` (the table's fast forms and hit bit), a hit on an empty
/// entry is finished here, as in the cached pass. Returns the other hits and the count of
/// finished ones. Out of line: inside `TableStage::acl_pass`, whose frame holds every
/// variant's state, this loop kept its values on the stack.
/// `BORROW`: the keys come from `memo` (which covers `lanes`), not from the packets; `lend`:
/// the keys read are recorded in `memo` for the next table.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn direct_pass<const K: usize, const BORROW: bool>(
    ak: &AclKey,
    acl: &fastpath_tables::acl::Acl,
    nop: Option<(&[Fast], u32)>,
    pool: &Pool,
    b: &mut Batch,
    lanes: Lanes,
    out: &mut [u32; BATCH_MAX],
    memo: &mut KeyMemo,
    lend: bool,
) -> (Lanes, u64) {
    let nf = ak.fields();
    let (mut hits, mut nop_hits) = (Lanes::NONE, 0u64);
    each_lane!(i in lanes => {
        let key = if BORROW { memo.get::<K>(i) } else { ak.read::<K>(pool.data(b.handle(i)), b.meta(i)) };
        if lend {
            memo.put(i, key.as_ref());
        }
        let r = match key {
            Some(k) => aclkey::classify_words(acl, &aclkey::unpack(&k), nf).unwrap_or(MISS),
            None => MISS,
        };
        out[i] = r;
        if r != MISS {
            settle_hit(nop, b, i, r, &mut hits, &mut nop_hits);
        }
    });
    (hits, nop_hits)
}
