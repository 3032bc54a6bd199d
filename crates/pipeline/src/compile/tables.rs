//! Tables: key fields resolved to field references, match kinds checked, the implementation chosen
//! from the key ([`TableImpl`]), allowed actions and the default action with its arguments.

use super::Compiler;
use crate::ir::{FieldRef, KeyDef, Loc, MatchKind, Program, TableDef, TableImpl, MAX_ARGS, MAX_KEY_FIELDS};
use crate::spec::{suggest, SpecFile, TableSpec};
use fastpath_packet::{DropReason, Hdr};
use toml::Spanned;

/// A default action and its arguments.
type DefaultCall = (usize, [u128; MAX_ARGS]);

impl Compiler<'_> {
    pub(super) fn tables(&mut self, spec: &SpecFile, p: &mut Program) {
        for t in &spec.tables {
            let name = t.name.get_ref().clone();
            let errs_before = self.errs.len();
            if let Some(def) = self.table(t, &name, p) {
                if self.errs.len() == errs_before {
                    p.tables.push(def);
                    continue;
                }
            }
            self.broken.push(name);
        }
        if p.tables.len() > 32 {
            let e = self.err(0, "at most 32 tables per pipeline");
            self.push(e);
        }
    }

    pub(super) fn table(&mut self, t: &TableSpec, name: &str, p: &Program) -> Option<TableDef> {
        let name = name.to_string();
        {
            if p.tables.iter().any(|x| x.name == name) {
                let e = self.err(t.name.span().start + 1, format!("table \"{name}\" is defined twice"));
                self.push(e);
                return None;
            }
            let mut key = Vec::new();
            for k in &t.key {
                let Some(field) = self.field(&k.field, p, Some(&name)) else { continue };
                let kind = match k.kind.get_ref().as_str() {
                    "exact" => MatchKind::Exact,
                    "lpm" => MatchKind::Lpm,
                    "ternary" => MatchKind::Ternary,
                    "range" => MatchKind::Range,
                    other => {
                        let e = self.err(
                            k.kind.span().start + 1,
                            format!("table \"{name}\": match kind \"{other}\" is not exact, lpm, ternary or range"),
                        );
                        let s = suggest(other, ["exact", "lpm", "ternary", "range"]);
                        self.push(e.did_you_mean(s));
                        return None;
                    }
                };
                key.push(KeyDef { name: k.field.get_ref().clone(), field, kind });
            }
            if key.is_empty() && t.key.is_empty() {
                let e = self.err(t.name.span().start, format!("table \"{name}\" has no key fields"));
                self.push(e);
                return None;
            }
            if key.len() != t.key.len() {
                return None;
            }
            if key.len() > MAX_KEY_FIELDS {
                let e = self.err(t.key[0].field.span().start, format!("table \"{name}\": at most {MAX_KEY_FIELDS} key fields"));
                self.push(e);
                return None;
            }
            let lpm = key.iter().filter(|k| k.kind == MatchKind::Lpm).count();
            let width: u32 = key.iter().map(|k| u32::from(k.field.width)).sum();
            let imp = if key.iter().all(|k| k.kind == MatchKind::Exact) {
                if width <= 16 {
                    TableImpl::Direct
                } else if width <= 128 {
                    TableImpl::Exact
                } else {
                    TableImpl::Acl
                }
            } else if lpm == 1 && key.len() == 1 {
                TableImpl::Lpm
            } else {
                TableImpl::Acl
            };
            if lpm == 1 && key.len() == 1 && !matches!(key[0].field.width, 32 | 128) {
                let e = self.err(t.key[0].field.span().start + 1, format!("table \"{name}\": an lpm key must be a 32- or 128-bit address"));
                self.push(e);
                return None;
            }
            if imp == TableImpl::Acl
                && key.iter().any(|k| k.field.width > 32 && k.field.width != 48 && k.field.width != 128 && k.field.width != 64)
            {
                let e = self.err(t.key[0].field.span().start + 1, format!("table \"{name}\": unsupported key width for the classifier"));
                self.push(e);
                return None;
            }
            let mut actions = Vec::new();
            for a in t.actions.get_ref() {
                match p.actions.iter().position(|x| &x.name == a.get_ref()) {
                    Some(i) => actions.push(i),
                    None => {
                        let e = self.err(a.span().start + 1, format!("table \"{name}\": unknown action \"{}\"", a.get_ref()));
                        let s = suggest(a.get_ref(), p.actions.iter().map(|x| x.name.as_str()));
                        self.push(e.did_you_mean(s));
                    }
                }
            }
            let size = self.size(&t.size, 1 << 27);
            let (default, default_drop) = match &t.default {
                None => ((0, [0; MAX_ARGS]), None), // no_action
                Some(d) => self.default_call(d, &name, &actions, p)?,
            };
            Some(TableDef { name, key, actions, size, default, default_drop, imp })
        }
    }

    /// Parses `name(arg, …)` for a table's default action: the action, its arguments and, for
    /// `drop(reason)`, the reason.
    pub(super) fn default_call(
        &mut self,
        d: &Spanned<String>,
        table: &str,
        allowed: &[usize],
        p: &Program,
    ) -> Option<(DefaultCall, Option<DropReason>)> {
        let pos = d.span().start + 1;
        let text = d.get_ref().trim();
        let (name, args) = match text.split_once('(') {
            Some((n, rest)) => {
                let Some(inner) = rest.trim_end().strip_suffix(')') else {
                    let e = self.err(pos, format!("table \"{table}\": default \"{text}\" lacks a closing ')'"));
                    self.push(e);
                    return None;
                };
                let args: Vec<&str> = inner.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
                (n.trim(), args)
            }
            None => (text, vec![]),
        };
        let Some(ai) = p.actions.iter().position(|a| a.name == name) else {
            let e = self.err(pos, format!("table \"{table}\": unknown default action \"{name}\""));
            self.push(e);
            return None;
        };
        if name == "drop" {
            let reason = match args.first() {
                None => DropReason::TableMiss,
                Some(r) => match DropReason::from_name(r) {
                    Some(r) => r,
                    None => {
                        let e = self.err(pos, format!("unknown drop reason \"{r}\""));
                        let s = suggest(r, DropReason::ALL.iter().map(|r| r.name()));
                        self.push(e.did_you_mean(s));
                        return None;
                    }
                },
            };
            return Some(((ai, [0; MAX_ARGS]), Some(reason)));
        }
        if !allowed.contains(&ai) && ai != 0 {
            let e = self.err(pos, format!("table \"{table}\": default action \"{name}\" is not in the table's actions"));
            self.push(e);
            return None;
        }
        let a = &p.actions[ai];
        if args.len() != a.params.len() {
            let e = self.err(pos, format!("action \"{name}\" takes {} arguments, {} given", a.params.len(), args.len()));
            self.push(e);
            return None;
        }
        let mut out = [0u128; MAX_ARGS];
        for (k, (arg, (pn, kind))) in args.iter().zip(&a.params).enumerate() {
            match kind.parse(arg) {
                Ok(v) => out[k] = v,
                Err(m) => {
                    let e = self.err(pos, format!("argument \"{pn}\": {m}"));
                    self.push(e);
                    return None;
                }
            }
        }
        Some(((ai, out), None))
    }

    /// Resolves a field name written at `w`; reports unknown or unparsed fields.
    pub(super) fn field(&mut self, w: &Spanned<String>, p: &Program, table: Option<&str>) -> Option<FieldRef> {
        self.field_at(w.get_ref(), w.span().start + 1, p, table)
    }

    pub(super) fn field_at(&mut self, name: &str, pos: usize, p: &Program, table: Option<&str>) -> Option<FieldRef> {
        let ctx = table.map_or(String::new(), |t| format!("table \"{t}\": key field "));
        let Some(f) = FieldRef::resolve(name, &p.user_meta) else {
            let what = table.map_or("unknown field".to_string(), |t| format!("table \"{t}\": unknown key field"));
            let e = self.err(pos, format!("{what} \"{name}\""));
            let all = FieldRef::all_names(&p.user_meta);
            let s = suggest(name, all.iter().map(String::as_str));
            self.push(e.did_you_mean(s));
            return None;
        };
        if let Loc::Hdr { .. } = f.loc {
            let ok = p.headers.has_all(f.needs) || (f.or_needs.0 != 0 && p.headers.has_all(f.or_needs));
            if !ok {
                let hdr = name.split('.').next().unwrap_or("");
                let e = self.err(pos, format!("{ctx}\"{name}\" is not parsed"));
                let need: Vec<&str> = Hdr::ALL.iter().filter(|h| f.needs.has(**h) || f.or_needs.has(**h)).map(|h| h.name()).collect();
                let hint = if hdr == "l4" || hdr == "inner_l4" { need.join(" or ") } else { need.join(", ") };
                self.push(e.hint(format!("add {hint} to [parser] headers")));
                return None;
            }
        }
        Some(f)
    }
}
