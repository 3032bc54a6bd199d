//! Table entries between P4Runtime and fastpath: a `p4.v1.TableEntry` becomes an [`EntryOp`]
//! (checked against the program: ids, widths, match kinds, the P4Runtime rules for don't-care
//! fields and priorities), and an entry read back from a table becomes a `TableEntry` again.
//!
//! Values are P4Runtime byte strings: big-endian, any length as long as the value fits the
//! field's width; what we send is canonical (no leading zero bytes, at least one byte).
//! Priorities: P4Runtime's larger number wins, fastpath's classifier's smaller; an entry's
//! fastpath priority is `i32::MAX - p` for P4Runtime priority `p` (1 ..= `i32::MAX`).

use crate::p4info::{self, has_priority};
use crate::proto::{self, field_match::FieldMatchType};
use fastpath_pipeline::entries::{EntryOp, EntrySpec};
use fastpath_pipeline::ir::{MatchKind, Program, MAX_ARGS};
use fastpath_pipeline::table::EntryView;
use fastpath_pipeline::value::{prefix_mask, Match};

/// A refused request part: a gRPC canonical code and a message naming what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// gRPC canonical code (`tonic::Code as i32`).
    pub code: tonic::Code,
    /// What is wrong, naming the table, field, action or parameter.
    pub msg: String,
}

impl Refused {
    /// `INVALID_ARGUMENT`.
    pub fn invalid(msg: impl Into<String>) -> Refused {
        Refused { code: tonic::Code::InvalidArgument, msg: msg.into() }
    }
    /// `NOT_FOUND`.
    pub fn not_found(msg: impl Into<String>) -> Refused {
        Refused { code: tonic::Code::NotFound, msg: msg.into() }
    }
    /// `UNIMPLEMENTED`.
    pub fn unimplemented(msg: impl Into<String>) -> Refused {
        Refused { code: tonic::Code::Unimplemented, msg: msg.into() }
    }
    /// `OUT_OF_RANGE`.
    pub fn out_of_range(msg: impl Into<String>) -> Refused {
        Refused { code: tonic::Code::OutOfRange, msg: msg.into() }
    }
}

/// All ones in a `width`-bit field.
fn all_ones(width: u8) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// Decodes a P4Runtime byte string for a `width`-bit field.
///
/// # Errors
/// Empty, or a value that does not fit `width` bits (`what` names the field).
pub fn decode(bytes: &[u8], width: u8, what: &str) -> Result<u128, Refused> {
    decode_named(bytes, width, || what.to_string())
}

/// [`decode`], naming the field only when the value is refused: a write decodes several
/// values per update, and formatting each one's name cost more than the decoding.
fn decode_named(bytes: &[u8], width: u8, what: impl FnOnce() -> String) -> Result<u128, Refused> {
    if bytes.is_empty() {
        let what = what();
        return Err(Refused::invalid(format!("{what}: empty byte string")));
    }
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len());
    let sig = bytes.get(first..).unwrap_or_default();
    if sig.len() > 16 {
        let what = what();
        return Err(Refused::out_of_range(format!("{what}: {} significant bytes do not fit {width} bits", sig.len())));
    }
    let v = sig.iter().fold(0u128, |v, &b| v << 8 | u128::from(b));
    if v & !all_ones(width) != 0 {
        let what = what();
        return Err(Refused::out_of_range(format!("{what}: value 0x{v:x} does not fit {width} bits")));
    }
    Ok(v)
}

/// Encodes `v` as a canonical byte string (big-endian, no leading zero bytes, ≥ 1 byte).
pub fn encode(v: u128, _width: u8) -> Vec<u8> {
    let b = v.to_be_bytes();
    let first = b.iter().position(|&x| x != 0).unwrap_or(15);
    b.get(first..).unwrap_or_default().to_vec()
}

/// A key match in one canonical form per match kind, so that two spellings of one key compare
/// equal: exact `Exact`; lpm `Prefix` (/0 for none); ternary `Masked` (or `Any` for mask 0);
/// range `Range` (or `Any` for the whole range). `None` when `m` cannot be written in `kind`.
pub fn canon(kind: MatchKind, width: u8, m: &Match) -> Option<Match> {
    let all = all_ones(width);
    match kind {
        MatchKind::Exact => match *m {
            Match::Exact(v) => Some(Match::Exact(v)),
            Match::Prefix(v, l) if l >= width => Some(Match::Exact(v)),
            Match::Masked(v, mk) if mk & all == all => Some(Match::Exact(v & all)),
            Match::Range(lo, hi) if lo == hi => Some(Match::Exact(lo)),
            _ => None,
        },
        MatchKind::Lpm => match *m {
            Match::Exact(v) => Some(Match::Prefix(v, width)),
            Match::Prefix(v, l) => Some(Match::Prefix(v & prefix_mask(l, width), l.min(width))),
            Match::Any => Some(Match::Prefix(0, 0)),
            _ => m.as_range(width).and_then(|(lo, hi)| {
                let host = hi ^ lo;
                (host & host.wrapping_add(1) == 0 && lo & host == 0).then(|| Match::Prefix(lo, width - host.count_ones() as u8))
            }),
        },
        MatchKind::Ternary => {
            let (v, mk) = match *m {
                Match::Exact(v) => (v, all),
                Match::Any => (0, 0),
                Match::Prefix(v, l) => (v, prefix_mask(l, width)),
                Match::Masked(v, mk) => (v, mk & all),
                Match::Range(lo, hi) if lo == hi => (lo, all),
                Match::Range(lo, hi) => {
                    let host = hi ^ lo;
                    if host & host.wrapping_add(1) != 0 || lo & host != 0 {
                        return None;
                    }
                    (lo, all & !host)
                }
            };
            Some(if mk == 0 { Match::Any } else { Match::Masked(v & mk, mk) })
        }
        MatchKind::Range => {
            let (lo, hi) = m.as_range(width)?;
            Some(if lo == 0 && hi == all { Match::Any } else { Match::Range(lo, hi) })
        }
    }
}

/// The canonical form of a whole key of table `t` (see [`canon`]); `None` if a field cannot be
/// written in its kind.
pub fn canon_key(prog: &Program, t: usize, key: &[Match]) -> Option<Vec<Match>> {
    let def = prog.tables.get(t)?;
    if key.len() != def.key.len() {
        return None;
    }
    def.key.iter().zip(key).map(|(k, m)| canon(k.kind, k.field.width, m)).collect()
}

/// The key of a `TableEntry` for table `t`, in canonical form.
///
/// # Errors
/// An unknown or repeated field id, a match type other than the field's, a value wider than
/// the field, value bits outside a ternary mask or an LPM prefix, a present don't-care field
/// (P4Runtime: omit it), a missing exact field.
pub fn key_of(prog: &Program, t: usize, matches: &[proto::FieldMatch]) -> Result<Vec<Match>, Refused> {
    let def = prog.tables.get(t).ok_or_else(|| Refused::not_found(format!("no table with index {t}")))?;
    let mut key: Vec<Option<Match>> = vec![None; def.key.len()];
    for fm in matches {
        let Some(k) = (fm.field_id as usize).checked_sub(1).and_then(|i| def.key.get(i).map(|k| (i, k))) else {
            return Err(Refused::invalid(format!(
                "table \"{}\": no match field with id {} (it has {}: ids 1..={})",
                def.name,
                fm.field_id,
                def.key.len(),
                def.key.len()
            )));
        };
        let (i, kd) = k;
        let name = || format!("table \"{}\" field \"{}\" (id {})", def.name, kd.name, fm.field_id);
        if key[i].is_some() {
            return Err(Refused::invalid(format!("{n}: given twice", n = name())));
        }
        let w = kd.field.width;
        let all = all_ones(w);
        let m = match (&fm.field_match_type, kd.kind) {
            (Some(FieldMatchType::Exact(e)), MatchKind::Exact) => Match::Exact(decode_named(&e.value, w, name)?),
            (Some(FieldMatchType::Lpm(l)), MatchKind::Lpm) => {
                let v = decode_named(&l.value, w, name)?;
                if l.prefix_len <= 0 || l.prefix_len > i32::from(w) {
                    return Err(Refused::invalid(format!(
                        "{n}: prefix length {} out of 1..={w} (a /0 is a don't-care: omit the field)",
                        l.prefix_len,
                        n = name()
                    )));
                }
                let len = l.prefix_len as u8;
                if v & !prefix_mask(len, w) != 0 {
                    return Err(Refused::invalid(format!("{n}: value 0x{v:x} has bits set beyond its /{len} prefix", n = name())));
                }
                Match::Prefix(v, len)
            }
            (Some(FieldMatchType::Ternary(tm)), MatchKind::Ternary) => {
                let v = decode_named(&tm.value, w, name)?;
                let mk = decode_named(&tm.mask, w, || format!("{} mask", name()))?;
                if mk == 0 {
                    return Err(Refused::invalid(format!("{n}: mask 0 is a don't-care: omit the field", n = name())));
                }
                if v & !mk != 0 {
                    return Err(Refused::invalid(format!("{n}: value 0x{v:x} has bits set outside mask 0x{mk:x}", n = name())));
                }
                Match::Masked(v, mk)
            }
            (Some(FieldMatchType::Optional(o)), MatchKind::Ternary) => Match::Masked(decode_named(&o.value, w, name)?, all),
            (Some(FieldMatchType::Range(r)), MatchKind::Range) => {
                let (lo, hi) =
                    (decode_named(&r.low, w, || format!("{} low", name()))?, decode_named(&r.high, w, || format!("{} high", name()))?);
                if lo > hi {
                    return Err(Refused::invalid(format!("{n}: range {lo}..{hi} is empty (low above high)", n = name())));
                }
                if lo == 0 && hi == all {
                    return Err(Refused::invalid(format!("{n}: the whole range is a don't-care: omit the field", n = name())));
                }
                Match::Range(lo, hi)
            }
            (None, _) => return Err(Refused::invalid(format!("{n}: no match given", n = name()))),
            (Some(other), kind) => {
                let given = match other {
                    FieldMatchType::Exact(_) => "exact",
                    FieldMatchType::Lpm(_) => "lpm",
                    FieldMatchType::Ternary(_) => "ternary",
                    FieldMatchType::Range(_) => "range",
                    FieldMatchType::Optional(_) => "optional",
                    FieldMatchType::Other(_) => "other",
                };
                return Err(Refused::invalid(format!("{n}: a {given} match given for a {} field", kind_name(kind), n = name())));
            }
        };
        key[i] = canon(kd.kind, w, &m);
    }
    def.key
        .iter()
        .zip(key)
        .map(|(kd, m)| match (m, kd.kind) {
            (Some(m), _) => Ok(m),
            (None, MatchKind::Exact) => {
                Err(Refused::invalid(format!("table \"{}\" field \"{}\": exact fields cannot be omitted", def.name, kd.name)))
            }
            (None, kind) => Ok(canon(kind, kd.field.width, &Match::Any).unwrap_or(Match::Any)),
        })
        .collect()
}

fn kind_name(k: MatchKind) -> &'static str {
    match k {
        MatchKind::Exact => "exact",
        MatchKind::Lpm => "lpm",
        MatchKind::Ternary => "ternary",
        MatchKind::Range => "range",
    }
}

/// The fastpath priority of P4Runtime priority `p` for table `t`.
///
/// # Errors
/// A priority on a table without ternary or range fields, or none (0) on one with them. A
/// classifier table of exact and lpm fields orders its entries by prefix length (`key`).
pub fn priority_of(prog: &Program, t: usize, p: i32, key: &[Match]) -> Result<u32, Refused> {
    let name = prog.tables.get(t).map_or("?", |d| d.name.as_str());
    match (has_priority(prog, t), p) {
        (true, p) if p > 0 => Ok((i32::MAX - p) as u32),
        (true, p) => {
            Err(Refused::invalid(format!("table \"{name}\" has ternary or range fields: its entries need a priority > 0 (got {p})")))
        }
        // A classifier table of exact and lpm fields: the longest prefix wins (P4Runtime's
        // rule for LPM), as the smaller classifier priority.
        (false, 0) if p4info::is_classifier(prog, t) => {
            let len: u32 = key.iter().map(|m| if let Match::Prefix(_, l) = m { u32::from(*l) } else { 0 }).sum();
            Ok(u32::MAX / 2 - len)
        }
        (false, 0) => Ok(u32::MAX / 2),
        (false, p) => Err(Refused::invalid(format!("table \"{name}\" has only exact and lpm fields: priority must be 0 (got {p})"))),
    }
}

/// The P4Runtime priority of fastpath priority `fp` (entries loaded from text without a
/// priority read back as 1, the lowest).
pub fn p4_priority(prog: &Program, t: usize, fp: u32) -> i32 {
    if !has_priority(prog, t) {
        return 0;
    }
    (i32::MAX as i64 - i64::from(fp)).clamp(1, i64::from(i32::MAX)) as i32
}

/// The action and arguments of a `TableAction` for table `t`.
///
/// # Errors
/// No action, an action profile (not supported), an action the table does not allow, a
/// missing, unknown, repeated or too wide parameter.
pub fn action_of(prog: &Program, t: usize, a: Option<&proto::TableAction>) -> Result<(usize, [u128; MAX_ARGS]), Refused> {
    let def = prog.tables.get(t).ok_or_else(|| Refused::not_found(format!("no table with index {t}")))?;
    let act = match a.and_then(|a| a.r#type.as_ref()) {
        Some(proto::table_action::Type::Action(act)) => act,
        Some(_) => return Err(Refused::unimplemented(format!("table \"{}\": action profiles are not supported", def.name))),
        None => return Err(Refused::invalid(format!("table \"{}\": the entry has no action", def.name))),
    };
    let Some(ai) = p4info::index(p4info::ACTION, act.action_id, prog.actions.len()) else {
        return Err(Refused::not_found(format!("table \"{}\": no action with id 0x{:08x}", def.name, act.action_id)));
    };
    let adef = &prog.actions[ai];
    if !def.actions.contains(&ai) {
        let names: Vec<&str> = def.actions.iter().filter_map(|&a| prog.actions.get(a)).map(|a| a.name.as_str()).collect();
        return Err(Refused::invalid(format!(
            "table \"{}\": action \"{}\" is not allowed here (allowed: {})",
            def.name,
            adef.name,
            names.join(", ")
        )));
    }
    let mut args = [0u128; MAX_ARGS];
    let mut seen = [false; MAX_ARGS];
    for p in &act.params {
        let Some(pi) = (p.param_id as usize).checked_sub(1).filter(|&i| i < adef.params.len()) else {
            return Err(Refused::invalid(format!(
                "action \"{}\": no parameter with id {} (it has {})",
                adef.name,
                p.param_id,
                adef.params.len()
            )));
        };
        let (pname, kind) = &adef.params[pi];
        let what = || format!("action \"{}\" parameter \"{pname}\" (id {})", adef.name, p.param_id);
        if seen[pi] {
            return Err(Refused::invalid(format!("{w}: given twice", w = what())));
        }
        seen[pi] = true;
        args[pi] = decode_named(&p.value, kind.width(), what)?;
    }
    if let Some(missing) = adef.params.iter().zip(seen).position(|(_, s)| !s) {
        return Err(Refused::invalid(format!(
            "action \"{}\": parameter \"{}\" (id {}) missing",
            adef.name,
            adef.params[missing].0,
            missing + 1
        )));
    }
    Ok((ai, args))
}

/// The table index a table id names.
///
/// # Errors
/// `NOT_FOUND` naming the id.
pub fn table_of(prog: &Program, table_id: u32) -> Result<usize, Refused> {
    p4info::index(p4info::TABLE, table_id, prog.tables.len()).ok_or_else(|| {
        Refused::not_found(format!(
            "no table with id 0x{table_id:08x} (tables have ids 0x02000001..=0x{:08x})",
            p4info::id(p4info::TABLE, prog.tables.len().saturating_sub(1))
        ))
    })
}

/// A canonical key of table `t` in the form the entries-file parser gives the same match: a
/// ternary mask that is a prefix (`255.255.255.255`, `255.255.0.0`) becomes the prefix
/// (`a.b.c.d/32`), which the classifier stores as a range; other masks stay masks. The
/// classifier identifies a rule by that stored form, so without this a P4Runtime DELETE would
/// not find a rule loaded as `10.0.0.1/32` from an entries file or `fastpath ctl` (nor the
/// reverse), and a full-mask rule would be built as a masked one.
pub fn install_key(prog: &Program, t: usize, key: &[Match]) -> Vec<Match> {
    let Some(def) = prog.tables.get(t) else { return key.to_vec() };
    key.iter()
        .zip(&def.key)
        .map(|(m, kd)| match *m {
            Match::Masked(v, mk) if kd.kind == MatchKind::Ternary => {
                let len = mk.count_ones() as u8;
                if mk == prefix_mask(len, kd.field.width) {
                    Match::Prefix(v, len)
                } else {
                    *m
                }
            }
            _ => *m,
        })
        .collect()
}

/// What an `Update` of a table entry asks for, checked against `prog`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableUpdate {
    /// INSERT (the key must not exist).
    Insert(EntrySpec),
    /// MODIFY (the key must exist).
    Modify(EntrySpec),
    /// DELETE (the key must exist).
    Delete { table: usize, key: Vec<Match> },
}

impl TableUpdate {
    /// The table and (canonical) key it names.
    pub fn key(&self) -> (usize, &[Match]) {
        match self {
            TableUpdate::Insert(e) | TableUpdate::Modify(e) => (e.table, &e.key),
            TableUpdate::Delete { table, key } => (*table, key),
        }
    }
    /// The op that carries it out (INSERT is an add once the key is known to be new), its key
    /// in the form the tables store ([`install_key`]).
    pub fn op(self, prog: &Program) -> EntryOp {
        match self {
            TableUpdate::Insert(mut e) => {
                e.key = install_key(prog, e.table, &e.key);
                EntryOp::Add(e)
            }
            TableUpdate::Modify(mut e) => {
                e.key = install_key(prog, e.table, &e.key);
                EntryOp::Modify(e)
            }
            TableUpdate::Delete { table, key } => EntryOp::Del { table, key: install_key(prog, table, &key) },
        }
    }
}

/// Maps one table-entry update of type `ty` (`p4.v1.Update.Type`).
///
/// # Errors
/// As [`key_of`], [`priority_of`], [`action_of`]; the default entry cannot be changed (the
/// spec fixes it); an unknown update type.
pub fn table_update(prog: &Program, ty: i32, te: &proto::TableEntry) -> Result<TableUpdate, Refused> {
    let t = table_of(prog, te.table_id)?;
    if te.is_default_action {
        return Err(Refused::unimplemented(format!(
            "table \"{}\": the default action is fixed by the spec and cannot be changed at run time",
            prog.tables[t].name
        )));
    }
    let key = key_of(prog, t, &te.r#match)?;
    let priority = priority_of(prog, t, te.priority, &key)?;
    use proto::update_type as u;
    match ty {
        u::INSERT | u::MODIFY => {
            let (action, args) = action_of(prog, t, te.action.as_ref())?;
            let e = EntrySpec { table: t, key, priority, action, args };
            Ok(if ty == u::INSERT { TableUpdate::Insert(e) } else { TableUpdate::Modify(e) })
        }
        u::DELETE => Ok(TableUpdate::Delete { table: t, key }),
        other => Err(Refused::invalid(format!("update type {other} (expected INSERT 1, MODIFY 2 or DELETE 3)"))),
    }
}

/// One entry of table `t` as a `TableEntry` (don't-care fields omitted, values canonical).
pub fn table_entry(prog: &Program, t: usize, e: &EntryView) -> proto::TableEntry {
    let def = &prog.tables[t];
    let mut matches = Vec::with_capacity(def.key.len());
    for (k, (kd, m)) in def.key.iter().zip(&e.key).enumerate() {
        let w = kd.field.width;
        let field_id = k as u32 + 1;
        let ty = match canon(kd.kind, w, m) {
            Some(Match::Exact(v)) => Some(FieldMatchType::Exact(proto::field_match::Exact { value: encode(v, w) })),
            Some(Match::Prefix(_, 0)) | Some(Match::Any) => None,
            Some(Match::Prefix(v, l)) => {
                Some(FieldMatchType::Lpm(proto::field_match::Lpm { value: encode(v, w), prefix_len: i32::from(l) }))
            }
            Some(Match::Masked(v, mk)) => {
                Some(FieldMatchType::Ternary(proto::field_match::Ternary { value: encode(v, w), mask: encode(mk, w) }))
            }
            Some(Match::Range(lo, hi)) => {
                Some(FieldMatchType::Range(proto::field_match::Range { low: encode(lo, w), high: encode(hi, w) }))
            }
            None => None,
        };
        if let Some(ty) = ty {
            matches.push(proto::FieldMatch { field_id, field_match_type: Some(ty) });
        }
    }
    let params = prog
        .actions
        .get(e.action)
        .map(|a| {
            a.params
                .iter()
                .enumerate()
                .map(|(p, (_, kind))| proto::ActionParam { param_id: p as u32 + 1, value: encode(e.args[p], kind.width()) })
                .collect()
        })
        .unwrap_or_default();
    proto::TableEntry {
        table_id: p4info::id(p4info::TABLE, t),
        r#match: matches,
        action: Some(proto::TableAction {
            r#type: Some(proto::table_action::Type::Action(proto::Action { action_id: p4info::id(p4info::ACTION, e.action), params })),
        }),
        priority: p4_priority(prog, t, e.priority),
        ..Default::default()
    }
}

/// The default entry of table `t` (`is_default_action` set, no match).
pub fn default_entry(prog: &Program, t: usize) -> proto::TableEntry {
    let def = &prog.tables[t];
    let view = EntryView { key: Vec::new(), priority: 0, action: def.default.0, args: def.default.1 };
    let mut e = table_entry(prog, t, &view);
    e.r#match.clear();
    e.priority = 0;
    e.is_default_action = true;
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::field_match as fm;

    fn prog(name: &str) -> Program {
        let text = std::fs::read_to_string(format!("{}/../../pipelines/{name}.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
        fastpath_pipeline::compile(name, &text).unwrap()
    }

    fn action(prog: &Program, name: &str, params: &[&[u8]]) -> proto::TableAction {
        let a = prog.actions.iter().position(|a| a.name == name).unwrap();
        proto::TableAction {
            r#type: Some(proto::table_action::Type::Action(proto::Action {
                action_id: p4info::id(p4info::ACTION, a),
                params: params.iter().enumerate().map(|(i, v)| proto::ActionParam { param_id: i as u32 + 1, value: v.to_vec() }).collect(),
            })),
        }
    }

    #[test]
    fn byte_strings_decode_any_length_that_fits_and_encode_canonically() {
        assert_eq!(decode(&[0, 0, 1, 2], 16, "x").unwrap(), 0x102);
        assert_eq!(decode(&[0], 9, "x").unwrap(), 0);
        assert_eq!(decode(&[2, 0], 9, "x").unwrap_err().code, tonic::Code::OutOfRange);
        assert_eq!(decode(&[], 9, "x").unwrap_err().code, tonic::Code::InvalidArgument);
        assert_eq!(decode(&[1; 17], 128, "x").unwrap_err().code, tonic::Code::OutOfRange);
        assert_eq!(encode(0, 16), [0]);
        assert_eq!(encode(0x102, 16), [1, 2]);
        assert_eq!(encode(u128::MAX, 128), [0xff; 16]);
    }

    #[test]
    fn a_route_maps_to_an_add_and_reads_back_the_same() {
        let p = prog("router");
        let te = proto::TableEntry {
            table_id: 0x0200_0001,
            r#match: vec![proto::FieldMatch {
                field_id: 1,
                field_match_type: Some(FieldMatchType::Lpm(fm::Lpm { value: vec![198, 18, 0, 0], prefix_len: 15 })),
            }],
            action: Some(action(&p, "nexthop", &[&[1], &[2, 0, 0, 0, 1, 1], &[2, 0, 0, 0, 0, 1]])),
            ..Default::default()
        };
        let u = table_update(&p, proto::update_type::INSERT, &te).unwrap();
        let TableUpdate::Insert(e) = &u else { panic!("{u:?}") };
        assert_eq!(e.key, [Match::Prefix(0xc612_0000, 15)]);
        assert_eq!(&e.args[..3], &[1, 0x0200_0000_0101, 0x0200_0000_0001]);
        let back = table_entry(&p, 0, &EntryView { key: e.key.clone(), priority: e.priority, action: e.action, args: e.args });
        assert_eq!(back, te);
    }

    #[test]
    fn refusals_name_the_offending_field() {
        let p = prog("router");
        let lpm = |v: Vec<u8>, l: i32| proto::FieldMatch {
            field_id: 1,
            field_match_type: Some(FieldMatchType::Lpm(fm::Lpm { value: v, prefix_len: l })),
        };
        let te = |m: Vec<proto::FieldMatch>, a: Option<proto::TableAction>| proto::TableEntry {
            table_id: 0x0200_0001,
            r#match: m,
            action: a,
            ..Default::default()
        };
        let drop = Some(action(&p, "drop", &[]));
        let cases: Vec<(proto::TableEntry, &str)> = vec![
            (te(vec![lpm(vec![10, 0, 0, 1], 8)], drop.clone()), "bits set beyond its /8"),
            (te(vec![lpm(vec![10, 0, 0, 0], 33)], drop.clone()), "prefix length 33 out of 1..=32"),
            (te(vec![lpm(vec![1, 10, 0, 0, 0], 8)], drop.clone()), "does not fit 32 bits"),
            (te(vec![lpm(vec![10, 0, 0, 0], 8), lpm(vec![10, 0, 0, 0], 8)], drop.clone()), "given twice"),
            (te(vec![proto::FieldMatch { field_id: 2, field_match_type: None }], drop.clone()), "no match field with id 2"),
            (
                te(
                    vec![proto::FieldMatch { field_id: 1, field_match_type: Some(FieldMatchType::Exact(fm::Exact { value: vec![1] })) }],
                    drop.clone(),
                ),
                "a exact match given for a lpm field",
            ),
            (te(vec![lpm(vec![10, 0, 0, 0], 8)], None), "has no action"),
            (te(vec![lpm(vec![10, 0, 0, 0], 8)], Some(action(&p, "nexthop", &[&[1], &[2]]))), "parameter \"smac\" (id 3) missing"),
            (
                te(vec![lpm(vec![10, 0, 0, 0], 8)], Some(action(&p, "forward", &[&[1]]))),
                "action \"forward\" is not allowed here (allowed: nexthop, drop)",
            ),
            (proto::TableEntry { table_id: 0x0200_0009, ..Default::default() }, "no table with id 0x02000009"),
            (proto::TableEntry { table_id: 0x0200_0001, priority: 5, ..Default::default() }, "priority must be 0"),
        ];
        for (e, want) in cases {
            let r = table_update(&p, proto::update_type::INSERT, &e).unwrap_err();
            assert!(r.msg.contains(want), "{e:?}: {r:?}");
        }
    }

    /// An exact + lpm table compiles to the classifier: without P4Runtime priorities, the
    /// longer prefix gets the smaller (winning) classifier priority.
    #[test]
    fn exact_and_lpm_classifier_entries_order_by_prefix_length() {
        let spec = r#"
name = "vrf"
[parser]
headers = ["eth", "ipv4"]
[[table]]
name = "vrf_fib"
key = [{ field = "meta.in_port", match = "exact" }, { field = "ipv4.dst", match = "lpm" }]
actions = ["forward", "drop"]
size = 16
default = "drop"
[control]
ingress = "apply vrf_fib"
"#;
        let p = fastpath_pipeline::compile("vrf.toml", spec).unwrap();
        assert!(p4info::is_classifier(&p, 0) && !has_priority(&p, 0));
        let prio = |len: u8| priority_of(&p, 0, 0, &[Match::Exact(1), Match::Prefix(0x0a00_0000, len)]).unwrap();
        assert!(prio(16) < prio(8));
        assert!(priority_of(&p, 0, 3, &[]).unwrap_err().msg.contains("priority must be 0"));
        assert_eq!(p4_priority(&p, 0, prio(16)), 0);
    }

    #[test]
    fn acl_entries_omit_dont_care_fields_and_flip_priorities() {
        let p = prog("switch-acl");
        let t = p.table_index("acl").unwrap();
        let tern = |id: u32, v: Vec<u8>, m: Vec<u8>| proto::FieldMatch {
            field_id: id,
            field_match_type: Some(FieldMatchType::Ternary(fm::Ternary { value: v, mask: m })),
        };
        let te = proto::TableEntry {
            table_id: p4info::id(p4info::TABLE, t),
            r#match: vec![
                tern(3, vec![10, 0, 0, 0], vec![255, 0, 0, 0]),
                proto::FieldMatch {
                    field_id: 5,
                    field_match_type: Some(FieldMatchType::Range(fm::Range { low: vec![23], high: vec![23] })),
                },
            ],
            action: Some(action(&p, "deny", &[])),
            priority: 10,
            ..Default::default()
        };
        let TableUpdate::Insert(e) = table_update(&p, proto::update_type::INSERT, &te).unwrap() else { panic!() };
        assert_eq!(e.key, [Match::Any, Match::Any, Match::Masked(0x0a00_0000, 0xff00_0000), Match::Any, Match::Range(23, 23)]);
        assert_eq!(e.priority, (i32::MAX - 10) as u32);
        // What the classifier reads back (a prefix for the address) maps to the same message.
        let view = EntryView {
            key: vec![Match::Any, Match::Any, Match::Prefix(0x0a00_0000, 8), Match::Any, Match::Exact(23)],
            priority: e.priority,
            action: e.action,
            args: e.args,
        };
        assert_eq!(table_entry(&p, t, &view), te);
        let no_prio = proto::TableEntry { priority: 0, ..te.clone() };
        assert!(table_update(&p, proto::update_type::INSERT, &no_prio).unwrap_err().msg.contains("need a priority > 0"));
        let bad = proto::TableEntry { r#match: vec![tern(3, vec![10, 0, 0, 1], vec![255, 0, 0, 0])], ..te.clone() };
        assert!(table_update(&p, proto::update_type::INSERT, &bad).unwrap_err().msg.contains("outside mask"));
        let zero = proto::TableEntry { r#match: vec![tern(3, vec![0], vec![0])], ..te.clone() };
        assert!(table_update(&p, proto::update_type::INSERT, &zero).unwrap_err().msg.contains("don't-care"));
        // The op carries the prefix the entries-file parser gives (`10.0.0.0/8`): a DELETE over
        // P4Runtime finds a rule loaded from text, which the classifier knows by that form.
        let mut pipe = p.instantiate();
        pipe.load_entries("text", "table acl add * * 10.0.0.0/8 * 23 priority 7 => deny").unwrap();
        let del = table_update(&p, proto::update_type::DELETE, &te).unwrap().op(&p);
        assert_eq!(
            del,
            EntryOp::Del { table: t, key: vec![Match::Any, Match::Any, Match::Prefix(0x0a00_0000, 8), Match::Any, Match::Range(23, 23)] }
        );
        pipe.apply_ops(&[del]).unwrap();
        assert_eq!(pipe.table("acl").unwrap().len(), 0);
    }
}
