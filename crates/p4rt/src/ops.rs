//! `Write` and `Read` against the control plane: a `WriteRequest` becomes one
//! [`Control::apply`] call (one transaction, atomic with respect to packets), a `ReadRequest`
//! reads the control replica and the workers' counters. Runs on the control thread.
//!
//! P4Runtime's INSERT must fail on a key that exists and MODIFY / DELETE on one that does not,
//! where fastpath's `add` replaces. So the server keeps the keys of each table it has written
//! ([`KeyCache`], filled from [`Control::read`] the first time a table is written, then kept
//! by its own writes) and checks every update against it before anything is applied; when
//! anyone else changed the tables (a `fastpath ctl` request: [`Control::changes`] moved), the
//! cache is dropped and filled again.
//!
//! A classifier entry's identity is its match; P4Runtime's also includes the priority, so an
//! INSERT of a match that exists at another priority is refused (`ALREADY_EXISTS`).

use crate::entry::{self, Refused, TableUpdate};
use crate::p4info;
use crate::proto::{self, entity::Entity as E};
use fastpath_control::{Control, CtlError};
use fastpath_pipeline::entries::EntryOp;
use fastpath_pipeline::ir::Program;
use fastpath_pipeline::objects::MeterRates;
use fastpath_pipeline::value::Match;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tonic::Code;

/// The hasher of the keys: a write looks up each of its keys (an entry's match, a few
/// `u128`s) in a set of every key of its table.
type Hasher = foldhash::fast::RandomState;

/// One table's keys.
type Keys = HashSet<Vec<Match>, Hasher>;

/// The keys of the tables the server has written (module docs).
#[derive(Debug, Default)]
pub struct KeyCache {
    tables: HashMap<usize, Keys>,
    /// `Control::changes()` when the cache was last right.
    at: usize,
}

impl KeyCache {
    fn sync(&mut self, ctl: &Control<'_>) {
        if ctl.changes() != self.at {
            self.tables.clear();
            self.at = ctl.changes();
        }
    }

    fn table(&mut self, ctl: &Control<'_>, prog: &Program, t: usize) -> &mut Keys {
        self.tables
            .entry(t)
            .or_insert_with(|| ctl.read(t, None).unwrap_or_default().iter().filter_map(|e| entry::canon_key(prog, t, &e.key)).collect())
    }
}

/// One update's outcome for the `p4.v1.Error` details of a failed `Write`.
pub type Outcome = Option<Refused>;

/// What a meter update asks for.
fn meter_update(prog: &Program, ty: i32, m: &proto::MeterEntry) -> Result<EntryOp, Refused> {
    let Some(bank) = p4info::index(p4info::METER, m.meter_id, prog.meters.len()) else {
        return Err(Refused::not_found(format!("no meter array with id 0x{:08x}", m.meter_id)));
    };
    let def = &prog.meters[bank];
    if ty != proto::update_type::MODIFY {
        return Err(Refused::invalid(format!("meter \"{}\": meters are only MODIFYed (update type {ty})", def.name)));
    }
    let index = index_in(m.index, def.size, &def.name)?.ok_or_else(|| {
        Refused::unimplemented(format!("meter \"{}\": a write needs an index (wildcard writes are not supported)", def.name))
    })?;
    let Some(c) = m.config else {
        return Err(Refused::unimplemented(format!("meter \"{}\" {index}: resetting a meter to unconfigured is not supported", def.name)));
    };
    let nonneg = |v: i64, what: &str| {
        u64::try_from(v).map_err(|_| Refused::invalid(format!("meter \"{}\" {index}: {what} {v} is negative", def.name)))
    };
    let rates = if def.two_rate {
        MeterRates {
            cir_bytes_per_s: nonneg(c.cir, "cir")?,
            cbs_bytes: nonneg(c.cburst, "cburst")?,
            pir_bytes_per_s: nonneg(c.pir, "pir")?,
            ebs_or_pbs_bytes: nonneg(c.pburst, "pburst")?,
        }
    } else {
        // srTCM (RFC 2697): CIR, CBS and EBS; EBS from `eburst`, or `pburst` from clients that
        // predate `eburst`.
        let ebs = if c.eburst != 0 { c.eburst } else { c.pburst };
        MeterRates {
            cir_bytes_per_s: nonneg(c.cir, "cir")?,
            cbs_bytes: nonneg(c.cburst, "cburst")?,
            pir_bytes_per_s: 0,
            ebs_or_pbs_bytes: nonneg(ebs, "eburst")?,
        }
    };
    Ok(EntryOp::Meter { bank: def.name.clone(), index, rates })
}

/// `Some(index)` within `size`, `None` for a wildcard (no index).
fn index_in(i: Option<proto::Index>, size: usize, name: &str) -> Result<Option<usize>, Refused> {
    match i {
        None => Ok(None),
        Some(proto::Index { index }) => match usize::try_from(index) {
            Ok(x) if x < size => Ok(Some(x)),
            _ => Err(Refused::out_of_range(format!("\"{name}\": index {index} out of range 0..{size}"))),
        },
    }
}

/// What an `Update` asks for, checked against the program.
enum Planned {
    Table(TableUpdate),
    Meter(EntryOp),
}

fn plan(prog: &Program, u: &proto::Update) -> Result<Planned, Refused> {
    match u.entity.as_ref().and_then(|e| e.entity.as_ref()) {
        Some(E::TableEntry(te)) => entry::table_update(prog, u.r#type, te).map(Planned::Table),
        Some(E::MeterEntry(m)) => meter_update(prog, u.r#type, m).map(Planned::Meter),
        Some(E::CounterEntry(_)) => Err(Refused::unimplemented("writing counters is not supported (read them)")),
        Some(other) => Err(Refused::unimplemented(format!("{} entities are not supported by fastpath", entity_kind(other)))),
        None => Err(Refused::invalid("update without an entity")),
    }
}

fn entity_kind(e: &E) -> &'static str {
    match e {
        E::ExternEntry(_) => "extern",
        E::TableEntry(_) => "table",
        E::ActionProfileMember(_) => "action profile member",
        E::ActionProfileGroup(_) => "action profile group",
        E::MeterEntry(_) => "meter",
        E::DirectMeterEntry(_) => "direct meter",
        E::CounterEntry(_) => "counter",
        E::DirectCounterEntry(_) => "direct counter",
        E::PacketReplicationEngineEntry(_) => "packet replication engine",
        E::ValueSetEntry(_) => "value set",
        E::RegisterEntry(_) => "register",
        E::DigestEntry(_) => "digest",
    }
}

/// How many times a CONTINUE_ON_ERROR write is retried without the op the tables refused.
const MAX_RETRIES: usize = 8;

/// Carries out a `Write`: every update checked, then the accepted ones applied in one
/// [`Control::apply`]. With atomicity CONTINUE_ON_ERROR (the default) the good updates are
/// applied and the bad ones reported; with ROLLBACK_ON_ERROR or DATAPLANE_ATOMIC one bad update
/// leaves everything as it was (the others are reported `ABORTED`). Control thread.
///
/// # Errors
/// One outcome per update (in order) when any update failed.
pub fn write(ctl: &mut Control<'_>, cache: &mut KeyCache, req: &proto::WriteRequest) -> Result<usize, Vec<Outcome>> {
    let n = req.updates.len();
    let mut outcome: Vec<Outcome> = vec![None; n];
    // The accepted updates: their positions in the request, and their ops (moved into one
    // shared slice for `Control::apply_shared`, not copied).
    let mut at: Vec<usize> = Vec::with_capacity(n);
    let mut ops: Vec<EntryOp> = Vec::with_capacity(n);
    cache.sync(ctl);
    // The keys this request adds (true) or removes (false), over the cache; once the write is
    // applied, the cache takes them as they are.
    // By table, so that a key is looked up without a copy of it.
    let mut delta: HashMap<usize, HashMap<Vec<Match>, bool, Hasher>> = HashMap::new();
    {
        // Planning only reads the control plane: its program is borrowed, not copied.
        let prog = ctl.pipeline_info();
        for (k, u) in req.updates.iter().enumerate() {
            match plan(prog, u) {
                Err(r) => outcome[k] = Some(r),
                Ok(Planned::Meter(op)) => {
                    at.push(k);
                    ops.push(op);
                }
                Ok(Planned::Table(tu)) => {
                    let (t, key) = tu.key();
                    let present = match delta.get(&t).and_then(|d| d.get(key)) {
                        Some(&p) => p,
                        None => cache.table(ctl, prog, t).contains(key),
                    };
                    let name = &prog.tables[t].name;
                    let refused = match (&tu, present) {
                        (TableUpdate::Insert(_), true) => Some(Refused {
                            code: Code::AlreadyExists,
                            msg: format!("table \"{name}\": an entry with this match exists (MODIFY it)"),
                        }),
                        (TableUpdate::Modify(_) | TableUpdate::Delete { .. }, false) => {
                            Some(Refused::not_found(format!("table \"{name}\": no entry with this match")))
                        }
                        _ => None,
                    };
                    if let Some(r) = refused {
                        outcome[k] = Some(r);
                        continue;
                    }
                    delta.entry(t).or_default().insert(key.to_vec(), !matches!(tu, TableUpdate::Delete { .. }));
                    at.push(k);
                    ops.push(tu.op(prog));
                }
            }
        }
    }
    let atomic = req.atomicity != proto::atomicity::CONTINUE_ON_ERROR;
    if atomic && outcome.iter().any(Option::is_some) {
        return Err(abort_rest(outcome));
    }
    let mut retries = 0;
    let mut refused_any = false;
    while !ops.is_empty() {
        let batch: Arc<[EntryOp]> = std::mem::take(&mut ops).into();
        match ctl.apply_shared(batch.clone()) {
            Ok(_) => {
                // The cache follows what was applied: the planned keys, unless an op was taken
                // out on the way (then from the ops, as the tables store them).
                if refused_any {
                    let prog = ctl.pipeline_info().clone();
                    for op in batch.iter() {
                        let (t, key, present) = match op {
                            EntryOp::Add(e) | EntryOp::Modify(e) => (e.table, &e.key, true),
                            EntryOp::Del { table, key } => (*table, key, false),
                            _ => continue,
                        };
                        let key = entry::canon_key(&prog, t, key).unwrap_or_else(|| key.clone());
                        let set = cache.table(ctl, &prog, t);
                        if present {
                            set.insert(key);
                        } else {
                            set.remove(&key);
                        }
                    }
                } else {
                    for (t, keys) in delta {
                        // Tables the planning read are in the cache already.
                        if let Some(set) = cache.tables.get_mut(&t) {
                            for (key, present) in keys {
                                if present {
                                    set.insert(key);
                                } else {
                                    set.remove(&key);
                                }
                            }
                        }
                    }
                }
                cache.at = ctl.changes();
                break;
            }
            Err(CtlError::Rejected(e)) => {
                // `line` is the refused op's position in `batch`, from 1.
                cache.tables.clear();
                refused_any = true;
                let pos = e.line.saturating_sub(1).min(batch.len() - 1);
                let code = if e.msg.contains("full") { Code::ResourceExhausted } else { Code::InvalidArgument };
                let k = at.remove(pos);
                outcome[k] = Some(Refused { code, msg: format!("{}: {}", e.input, e.msg) });
                if atomic || retries >= MAX_RETRIES {
                    return Err(abort_rest(outcome));
                }
                retries += 1;
                ops = batch.iter().enumerate().filter(|&(j, _)| j != pos).map(|(_, op)| op.clone()).collect();
            }
            Err(other) => {
                cache.tables.clear();
                let msg = other.to_string();
                for &k in &at {
                    outcome[k] = Some(Refused { code: Code::Internal, msg: msg.clone() });
                }
                return Err(outcome);
            }
        }
    }
    if outcome.iter().any(Option::is_some) {
        return Err(outcome);
    }
    Ok(n)
}

/// Marks every update without an outcome `ABORTED` (nothing was applied).
fn abort_rest(mut outcome: Vec<Outcome>) -> Vec<Outcome> {
    for o in outcome.iter_mut().filter(|o| o.is_none()) {
        *o = Some(Refused { code: Code::Aborted, msg: "not applied: another update of this atomic write failed".into() });
    }
    outcome
}

/// Carries out a `Read`: table entries (one table or all; all entries, one key, or the
/// default entry), counters and meters (one array or all; one index or all). Control thread.
///
/// # Errors
/// The first entity that names something the program does not have, or asks for an entity
/// kind fastpath does not support.
pub fn read(ctl: &mut Control<'_>, req: &proto::ReadRequest) -> Result<Vec<proto::Entity>, Refused> {
    let prog = ctl.pipeline_info().clone();
    let mut out = Vec::new();
    let wrap = |e: E| proto::Entity { entity: Some(e) };
    for ent in &req.entities {
        match ent.entity.as_ref() {
            Some(E::TableEntry(te)) => {
                let tables: Vec<usize> =
                    if te.table_id == 0 { (0..prog.tables.len()).collect() } else { vec![entry::table_of(&prog, te.table_id)?] };
                for t in tables {
                    if te.is_default_action {
                        out.push(wrap(E::TableEntry(entry::default_entry(&prog, t))));
                        continue;
                    }
                    let key = if te.r#match.is_empty() { None } else { Some(entry::key_of(&prog, t, &te.r#match)?) };
                    let entries = ctl.read(t, None).map_err(|e| Refused::not_found(e.to_string()))?;
                    for e in entries {
                        if key.as_ref().is_some_and(|k| entry::canon_key(&prog, t, &e.key).as_ref() != Some(k)) {
                            continue;
                        }
                        out.push(wrap(E::TableEntry(entry::table_entry(&prog, t, &e))));
                    }
                }
            }
            Some(E::CounterEntry(c)) => {
                let banks: Vec<usize> = if c.counter_id == 0 {
                    (0..prog.counters.len()).collect()
                } else {
                    vec![p4info::index(p4info::COUNTER, c.counter_id, prog.counters.len())
                        .ok_or_else(|| Refused::not_found(format!("no counter array with id 0x{:08x}", c.counter_id)))?]
                };
                for b in banks {
                    let def = &prog.counters[b];
                    let indices: Vec<usize> = match index_in(c.index, def.size, &def.name)? {
                        Some(i) => vec![i],
                        None => (0..def.size).collect(),
                    };
                    for i in indices {
                        let (pkts, bytes) =
                            ctl.read_counter(&def.name, i).map_err(|e| Refused { code: Code::Unavailable, msg: e.to_string() })?;
                        out.push(wrap(E::CounterEntry(proto::CounterEntry {
                            counter_id: p4info::id(p4info::COUNTER, b),
                            index: Some(proto::Index { index: i as i64 }),
                            data: Some(proto::CounterData { byte_count: bytes as i64, packet_count: pkts as i64 }),
                        })));
                    }
                }
            }
            Some(E::MeterEntry(m)) => {
                let banks: Vec<usize> = if m.meter_id == 0 {
                    (0..prog.meters.len()).collect()
                } else {
                    vec![p4info::index(p4info::METER, m.meter_id, prog.meters.len())
                        .ok_or_else(|| Refused::not_found(format!("no meter array with id 0x{:08x}", m.meter_id)))?]
                };
                for b in banks {
                    let def = &prog.meters[b];
                    let indices: Vec<usize> = match index_in(m.index, def.size, &def.name)? {
                        Some(i) => vec![i],
                        None => (0..def.size).collect(),
                    };
                    for i in indices {
                        let rates = ctl.meter(b, i).map_err(|e| Refused::not_found(e.to_string()))?;
                        let config = rates.map(|r| {
                            let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                            if def.two_rate {
                                proto::MeterConfig {
                                    cir: as_i64(r.cir_bytes_per_s),
                                    cburst: as_i64(r.cbs_bytes),
                                    pir: as_i64(r.pir_bytes_per_s),
                                    pburst: as_i64(r.ebs_or_pbs_bytes),
                                    eburst: 0,
                                }
                            } else {
                                proto::MeterConfig {
                                    cir: as_i64(r.cir_bytes_per_s),
                                    cburst: as_i64(r.cbs_bytes),
                                    pir: 0,
                                    pburst: 0,
                                    eburst: as_i64(r.ebs_or_pbs_bytes),
                                }
                            }
                        });
                        out.push(wrap(E::MeterEntry(proto::MeterEntry {
                            meter_id: p4info::id(p4info::METER, b),
                            index: Some(proto::Index { index: i as i64 }),
                            config,
                        })));
                    }
                }
            }
            Some(other) => {
                return Err(Refused::unimplemented(format!("reading {} entities is not supported by fastpath", entity_kind(other))))
            }
            None => return Err(Refused::invalid("read of an empty entity")),
        }
    }
    Ok(out)
}
