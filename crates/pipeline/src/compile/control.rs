//! The `[control]` blocks: `apply`, primitives and `if` / `elif` / `else` become lane-mask steps
//! ([`SymStep`]) over stages ([`StageDef`]); conditions become [`CondC`].

use super::{Compiler, Scope};
use crate::ir::{CondC, Prim, Program, StageDef, SymStep, ValueKind};
use crate::spec::suggest;
use crate::spec::syntax::{parse_block, Cond, Stmt};
use fastpath_packet::{Hdr, HdrSet};
use toml::Spanned;

impl Compiler<'_> {
    pub(super) fn control(&mut self, block: &Spanned<String>, p: &mut Program, applied: &mut Vec<usize>) -> Vec<SymStep> {
        let start = self.src.string_start(block.span());
        let stmts = match parse_block(self.src, start, block.get_ref(), true) {
            Ok(s) => s,
            Err(e) => {
                self.push(e);
                return vec![];
            }
        };
        let mut steps = Vec::new();
        self.block(&stmts, 0, p, applied, &mut steps);
        steps
    }

    pub(super) fn new_mask(p: &mut Program) -> u8 {
        // Past 254 registers the program is absurdly nested; reuse the last (wrong but bounded)
        // and let `program()` report it.
        p.n_masks = (p.n_masks + 1).min(255);
        (p.n_masks - 1) as u8
    }

    pub(super) fn block(&mut self, stmts: &[Stmt], mask: u8, p: &mut Program, applied: &mut Vec<usize>, steps: &mut Vec<SymStep>) {
        let mut pending: Vec<Prim> = Vec::new();
        let mut pending_name = String::new();
        let flush = |p: &mut Program, steps: &mut Vec<SymStep>, pending: &mut Vec<Prim>, name: &mut String| {
            if pending.is_empty() {
                return;
            }
            let base = name.replace('_', "-");
            let mut n = base.clone();
            let mut k = 2;
            while p.stages.iter().any(|(s, _)| *s == n) {
                n = format!("{base}-{k}");
                k += 1;
            }
            p.stages.push((n, StageDef::Prims(std::mem::take(pending))));
            steps.push(SymStep::Run(mask, p.stages.len() - 1));
        };
        for s in stmts {
            match s {
                Stmt::Prim { name, args } if name.text == "conntrack" => {
                    flush(p, steps, &mut pending, &mut pending_name);
                    let names = p.conntracks.iter().map(|c| c.name.as_str()).collect();
                    let Some(ct) = self.object(args.first(), names, "conntrack table", name.pos) else { continue };
                    if args.len() > 2 {
                        let e = self.err(name.pos, format!("'conntrack' takes 1 to 2 argument(s), {} given", args.len()));
                        self.push(e);
                        continue;
                    }
                    let zone = match args.get(1) {
                        Some(w) => {
                            let mut scope = Scope { params: None, prog: p };
                            let Some(z) = self.operand(w, ValueKind::Int(32), &mut scope) else { continue };
                            Some(z)
                        }
                        None => None,
                    };
                    let mut n = "conntrack".to_string();
                    let mut k = 2;
                    while p.stages.iter().any(|(s, _)| *s == n) {
                        n = format!("conntrack-{k}");
                        k += 1;
                    }
                    p.stages.push((n, StageDef::Conntrack(ct, zone)));
                    steps.push(SymStep::Run(mask, p.stages.len() - 1));
                }
                Stmt::Prim { name, args } if name.text == "l2_switch" => {
                    flush(p, steps, &mut pending, &mut pending_name);
                    let names = p.fdbs.iter().map(|c| c.name.as_str()).collect();
                    let Some(f) = self.object(args.first(), names, "fdb", name.pos) else { continue };
                    if args.len() > 1 {
                        let e = self.err(name.pos, format!("'l2_switch' takes 1 argument (an [[fdb]]), {} given", args.len()));
                        self.push(e);
                        continue;
                    }
                    let f = usize::from(f);
                    if p.stages.iter().any(|(_, s)| matches!(s, StageDef::L2Switch(_))) {
                        let e = self.err(name.pos, "a pipeline has one l2_switch (its fdb holds the flood domains)");
                        self.push(e);
                        continue;
                    }
                    if p.tm.is_none() {
                        let e = self.err(name.pos, "l2_switch floods frames to several ports, which needs a traffic manager");
                        self.push(e.hint("add a [tm] section"));
                        continue;
                    }
                    if !p.headers.has(Hdr::Vlan) && p.fdbs[f].vlans.iter().any(|(v, _)| *v != 0) {
                        let e = self.err(name.pos, format!("fdb \"{}\" has tagged VLANs, so the parser needs \"vlan\"", p.fdbs[f].name));
                        self.push(e);
                        continue;
                    }
                    p.stages.push((p.fdbs[f].name.clone(), StageDef::L2Switch(f)));
                    steps.push(SymStep::Run(mask, p.stages.len() - 1));
                }
                Stmt::Prim { name, args } => {
                    let mut scope = Scope { params: None, prog: p };
                    if let Some(x) = self.prim(name, args, &mut scope) {
                        if pending.is_empty() {
                            pending_name = name.text.clone();
                        }
                        pending.push(x);
                    }
                }
                Stmt::Apply(t) => {
                    flush(p, steps, &mut pending, &mut pending_name);
                    match p.tables.iter().position(|x| x.name == t.text) {
                        Some(ti) => {
                            if applied.contains(&ti) {
                                let e = self.err(t.pos, format!("table \"{}\" is applied twice", t.text));
                                self.push(e);
                                continue;
                            }
                            applied.push(ti);
                            p.stages.push((t.text.clone(), StageDef::Table(ti)));
                            steps.push(SymStep::Run(mask, p.stages.len() - 1));
                        }
                        None if self.broken.contains(&t.text) => {}
                        None => {
                            let e = self.err(t.pos, format!("unknown table \"{}\"", t.text));
                            let s = suggest(&t.text, p.tables.iter().map(|x| x.name.as_str()));
                            self.push(e.did_you_mean(s));
                        }
                    }
                }
                Stmt::If { arms, otherwise } => {
                    flush(p, steps, &mut pending, &mut pending_name);
                    // rest = mask; for each arm: m = rest ∩ cond; run; rest = rest ∖ m; else: rest.
                    let rest = Self::new_mask(p);
                    steps.push(SymStep::AndNot(rest, mask, u8::MAX));
                    for (cond, body) in arms {
                        let Some(c) = self.cond(cond, p, applied) else { continue };
                        let m = Self::new_mask(p);
                        steps.push(SymStep::Mask(m, rest, c));
                        self.block(body, m, p, applied, steps);
                        steps.push(SymStep::AndNot(rest, rest, m));
                    }
                    if !otherwise.is_empty() {
                        self.block(otherwise, rest, p, applied, steps);
                    }
                }
            }
        }
        flush(p, steps, &mut pending, &mut pending_name);
    }

    pub(super) fn cond(&mut self, c: &Cond, p: &Program, applied: &[usize]) -> Option<CondC> {
        Some(match c {
            Cond::Valid(h) => match Hdr::from_name(&h.text) {
                Some(x) if p.headers.has(x) => CondC::Valid(HdrSet::EMPTY.with(x)),
                Some(_) => {
                    let e = self.err(h.pos, format!("header \"{}\" is never parsed, so this is always false", h.text));
                    self.push(e.hint("add it to [parser] headers"));
                    return None;
                }
                None => {
                    let e = self.err(h.pos, format!("unknown header \"{}\"", h.text));
                    let s = suggest(&h.text, Hdr::ALL.iter().map(|h| h.name()));
                    self.push(e.did_you_mean(s));
                    return None;
                }
            },
            Cond::Hit(t) | Cond::Miss(t) => {
                let Some(ti) = p.tables.iter().position(|x| x.name == t.text) else {
                    if self.broken.contains(&t.text) {
                        return None;
                    }
                    let e = self.err(t.pos, format!("unknown table \"{}\"", t.text));
                    let s = suggest(&t.text, p.tables.iter().map(|x| x.name.as_str()));
                    self.push(e.did_you_mean(s));
                    return None;
                };
                if !applied.contains(&ti) {
                    let e = self.err(t.pos, format!("table \"{}\" is tested before it is applied", t.text));
                    self.push(e);
                    return None;
                }
                let hit = CondC::Hit(ti as u8);
                if matches!(c, Cond::Miss(_)) {
                    CondC::Not(Box::new(hit))
                } else {
                    hit
                }
            }
            Cond::Cmp(f, op, v) => {
                let field = self.field_at(&f.text, f.pos, p, None)?;
                if v.text.starts_with(|c: char| c.is_ascii_alphabetic()) && v.text.contains('.') {
                    let other = self.field_at(&v.text, v.pos, p, None)?;
                    if other.width != field.width {
                        let e = self.err(v.pos, format!("cannot compare a field of {} bits with one of {} bits", field.width, other.width));
                        self.push(e);
                        return None;
                    }
                    return Some(CondC::FieldCmp(field, *op, other));
                }
                match field.kind.parse(&v.text) {
                    Ok(val) => match field.loc {
                        crate::ir::Loc::Meta(m) if val <= u128::from(u32::MAX) => CondC::MetaCmp(m, *op, val as u32),
                        _ => CondC::Cmp(field, *op, val),
                    },
                    Err(m) => {
                        let e = self.err(v.pos, m);
                        self.push(e);
                        return None;
                    }
                }
            }
            Cond::Not(x) => CondC::Not(Box::new(self.cond(x, p, applied)?)),
            Cond::And(a, b) => {
                let (a, b) = (self.cond(a, p, applied), self.cond(b, p, applied));
                CondC::And(Box::new(a?), Box::new(b?))
            }
            Cond::Or(a, b) => {
                let (a, b) = (self.cond(a, p, applied), self.cond(b, p, applied));
                CondC::Or(Box::new(a?), Box::new(b?))
            }
        })
    }
}
