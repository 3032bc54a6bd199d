//! Actions and their primitives: every name in an action body resolved to a [`Prim`] with field
//! references, argument indices and object indices; parameter kinds inferred from their use.

use super::{fmt_range, Compiler, Scope, BUILTINS, PRIMS};
use crate::ir::{ActionDef, Operand, Prim, Program, ValueKind, MAX_ARGS};
use crate::spec::syntax::{parse_block, Stmt, Word};
use crate::spec::{suggest, SpecFile};
use fastpath_packet::{DropReason, Hdr};

impl Compiler<'_> {
    pub(super) fn actions(&mut self, spec: &SpecFile, p: &mut Program) {
        // Built-ins: usable in any table without a definition.
        p.actions.push(ActionDef { name: "no_action".into(), params: vec![], body: vec![] });
        p.actions.push(ActionDef { name: "drop".into(), params: vec![], body: vec![Prim::Drop(DropReason::ActionDrop)] });
        p.actions.push(ActionDef {
            name: "forward".into(),
            params: vec![("port".into(), ValueKind::Int(16))],
            body: vec![Prim::Forward(Operand::Arg(0))],
        });
        p.actions.push(ActionDef { name: "to_control".into(), params: vec![], body: vec![Prim::ToControl] });
        for a in &spec.actions {
            let name = a.name.get_ref();
            if p.actions.iter().any(|x| &x.name == name) {
                let what = if BUILTINS.contains(&name.as_str()) { "is a built-in action" } else { "is defined twice" };
                let e = self.err(a.name.span().start + 1, format!("action \"{name}\" {what}"));
                self.push(e);
                continue;
            }
            if a.params.len() > MAX_ARGS {
                let e = self.err(a.params[MAX_ARGS].span().start, format!("at most {MAX_ARGS} parameters"));
                self.push(e);
                continue;
            }
            let mut params: Vec<(String, Option<ValueKind>)> = a.params.iter().map(|x| (x.get_ref().clone(), None)).collect();
            let start = self.src.string_start(a.body.span());
            let body = match parse_block(self.src, start, a.body.get_ref(), false) {
                Ok(stmts) => {
                    let mut prims = Vec::new();
                    for s in &stmts {
                        if let Stmt::Prim { name, args } = s {
                            let mut scope = Scope { params: Some(&mut params), prog: p };
                            if let Some(x) = self.prim(name, args, &mut scope) {
                                prims.push(x);
                            }
                        }
                    }
                    prims
                }
                Err(e) => {
                    self.push(e);
                    vec![]
                }
            };
            let mut resolved = Vec::new();
            for (k, (n, kind)) in params.into_iter().enumerate() {
                match kind {
                    Some(kind) => resolved.push((n, kind)),
                    None => {
                        let e = self.err(a.params[k].span().start + 1, format!("parameter \"{n}\" of action \"{name}\" is never used"));
                        self.push(e);
                    }
                }
            }
            p.actions.push(ActionDef { name: name.clone(), params: resolved, body });
        }
    }

    /// An operand of expected kind `want`: a parameter (its kind is inferred), a field, or a
    /// constant.
    pub(super) fn operand(&mut self, w: &Word, want: ValueKind, scope: &mut Scope<'_>) -> Option<Operand> {
        if let Some(params) = scope.params.as_deref_mut() {
            if let Some(k) = params.iter().position(|(n, _)| *n == w.text) {
                match params[k].1 {
                    None => params[k].1 = Some(want),
                    Some(have) if have.width() != want.width() => {
                        let e = self.err(
                            w.pos,
                            format!("parameter \"{}\" is used as {} bits here and {} bits elsewhere", w.text, want.width(), have.width()),
                        );
                        self.push(e);
                        return None;
                    }
                    Some(_) => {}
                }
                return Some(Operand::Arg(k as u8));
            }
        }
        if w.text.contains('.') && !w.text.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            let f = self.field_at(&w.text, w.pos, scope.prog, None)?;
            return Some(Operand::Field(f));
        }
        match want.parse(&w.text) {
            Ok(v) => Some(Operand::Const(v)),
            Err(m) => {
                let extra = if scope.params.is_some() { " (nor a parameter of this action)" } else { "" };
                let e = self.err(w.pos, format!("{m}{extra}"));
                self.push(e);
                None
            }
        }
    }

    pub(super) fn object(&mut self, w: Option<&Word>, names: Vec<&str>, what: &str, at: usize) -> Option<u16> {
        let Some(w) = w else {
            let e = self.err(at, format!("expected a {what} name"));
            self.push(e);
            return None;
        };
        match names.iter().position(|n| *n == w.text) {
            Some(i) => Some(i as u16),
            None => {
                let e = self.err(w.pos, format!("unknown {what} \"{}\"", w.text));
                let s = suggest(&w.text, names);
                self.push(e.did_you_mean(s));
                None
            }
        }
    }

    pub(super) fn prim(&mut self, name: &Word, args: &[Word], scope: &mut Scope<'_>) -> Option<Prim> {
        let argc = |n: std::ops::RangeInclusive<usize>, this: &mut Self| -> bool {
            if n.contains(&args.len()) {
                true
            } else {
                let e = this.err(name.pos, format!("'{}' takes {} argument(s), {} given", name.text, fmt_range(&n), args.len()));
                this.push(e);
                false
            }
        };
        let u16k = ValueKind::Int(16);
        match name.text.as_str() {
            "forward" => {
                argc(1..=1, self).then_some(())?;
                Some(Prim::Forward(self.operand(&args[0], u16k, scope)?))
            }
            "drop" => {
                argc(0..=1, self).then_some(())?;
                match args.first() {
                    None => Some(Prim::Drop(DropReason::ActionDrop)),
                    Some(r) => match DropReason::from_name(&r.text) {
                        Some(r) => Some(Prim::Drop(r)),
                        None => {
                            let e = self.err(r.pos, format!("unknown drop reason \"{}\"", r.text));
                            let s = suggest(&r.text, DropReason::ALL.iter().map(|r| r.name()));
                            self.push(e.did_you_mean(s));
                            None
                        }
                    },
                }
            }
            "to_control" => argc(0..=0, self).then_some(Prim::ToControl),
            "ttl_dec" | "hop_limit_dec" => argc(0..=0, self).then_some(Prim::TtlDec),
            "pop_vlan" => argc(0..=0, self).then_some(Prim::PopVlan),
            "vxlan_decap" => {
                argc(0..=0, self).then_some(())?;
                if !scope.prog.headers.has(Hdr::InnerEth) {
                    let e = self.err(name.pos, "vxlan_decap needs vxlan and inner_eth in [parser] headers");
                    self.push(e);
                    return None;
                }
                Some(Prim::VxlanDecap)
            }
            "vxlan_encap" => {
                argc(5..=5, self).then_some(())?;
                if !scope.prog.headers.has(Hdr::InnerEth) || !scope.prog.headers.has(Hdr::Ipv4) {
                    let e = self.err(name.pos, "vxlan_encap needs ipv4, udp, vxlan and inner_eth in [parser] headers");
                    self.push(e);
                    return None;
                }
                let dmac = self.operand(&args[0], ValueKind::Mac, scope)?;
                let smac = self.operand(&args[1], ValueKind::Mac, scope)?;
                let sip = self.operand(&args[2], ValueKind::Ipv4, scope)?;
                let dip = self.operand(&args[3], ValueKind::Ipv4, scope)?;
                let vni = self.operand(&args[4], ValueKind::Int(24), scope)?;
                Some(Prim::VxlanEncap([dmac, smac, sip, dip, vni]))
            }
            "hash" => argc(0..=0, self).then_some(Prim::Hash),
            "ct_commit" => {
                argc(1..=2, self).then_some(())?;
                let names = scope.prog.conntracks.iter().map(|c| c.name.as_str()).collect();
                let c = self.object(args.first(), names, "conntrack table", name.pos)?;
                let v = match args.get(1) {
                    Some(w) => self.operand(w, ValueKind::Int(8), scope)?,
                    None => Operand::Const(1),
                };
                Some(Prim::CtCommit(c, v))
            }
            "ct_load" => {
                argc(1..=1, self).then_some(())?;
                let names = scope.prog.conntracks.iter().map(|c| c.name.as_str()).collect();
                Some(Prim::CtLoad(self.object(args.first(), names, "conntrack table", name.pos)?))
            }
            "conntrack" => {
                let e = self.err(name.pos, "'conntrack' is a statement of [control], not an action primitive");
                self.push(e);
                None
            }
            "set" => {
                argc(2..=2, self).then_some(())?;
                let f = self.field_at(&args[0].text, args[0].pos, scope.prog, None)?;
                let v = self.operand(&args[1], f.kind, scope)?;
                Some(Prim::Set(f, v))
            }
            "set_dscp" => {
                argc(1..=1, self).then_some(())?;
                let f = self.field_at("ipv4.dscp", name.pos, scope.prog, None)?;
                let v = self.operand(&args[0], f.kind, scope)?;
                Some(Prim::Set(f, v))
            }
            "set_queue" => {
                // The traffic class the traffic manager queues the packet in (0..=7, 7 highest).
                argc(1..=1, self).then_some(())?;
                let f = self.field_at("meta.tc", name.pos, scope.prog, None)?;
                let v = self.operand(&args[0], ValueKind::Int(3), scope)?;
                Some(Prim::Set(f, v))
            }
            "swap" => {
                argc(2..=2, self).then_some(())?;
                let a = self.field_at(&args[0].text, args[0].pos, scope.prog, None)?;
                let b = self.field_at(&args[1].text, args[1].pos, scope.prog, None)?;
                if a.width != b.width {
                    let e = self.err(args[1].pos, format!("cannot swap fields of {} and {} bits", a.width, b.width));
                    self.push(e);
                    return None;
                }
                Some(Prim::Swap(a, b))
            }
            "push_vlan" => {
                argc(1..=3, self).then_some(())?;
                if !scope.prog.headers.has(Hdr::Vlan) {
                    let e = self.err(name.pos, "push_vlan needs vlan in [parser] headers");
                    self.push(e);
                    return None;
                }
                let vid = self.operand(&args[0], ValueKind::Int(12), scope)?;
                let pcp = match args.get(1) {
                    Some(w) => self.operand(w, ValueKind::Int(3), scope)?,
                    None => Operand::Const(0),
                };
                let tpid = match args.get(2) {
                    None => 0x8100,
                    Some(w) => match ValueKind::Int(16).parse(&w.text) {
                        Ok(t @ (0x8100 | 0x88a8 | 0x9100)) => t as u16,
                        _ => {
                            let e = self.err(w.pos, format!("TPID \"{}\" is not 0x8100 (802.1Q), 0x88a8 (802.1ad) or 0x9100", w.text));
                            self.push(e);
                            return None;
                        }
                    },
                };
                Some(Prim::PushVlan(vid, pcp, tpid))
            }
            "count" => {
                argc(1..=2, self).then_some(())?;
                let names = scope.prog.counters.iter().map(|c| c.name.as_str()).collect();
                let c = self.object(args.first(), names, "counter", name.pos)?;
                let idx = match args.get(1) {
                    Some(w) => self.operand(w, ValueKind::Int(32), scope)?,
                    None => Operand::Const(0),
                };
                Some(Prim::Count(c, idx))
            }
            "meter" => {
                argc(2..=3, self).then_some(())?;
                let names = scope.prog.meters.iter().map(|c| c.name.as_str()).collect();
                let m = self.object(args.first(), names, "meter", name.pos)?;
                let idx = self.operand(&args[1], ValueKind::Int(32), scope)?;
                let drop_red = match args.get(2) {
                    None => false,
                    Some(w) if w.text == "drop_red" => true,
                    Some(w) => {
                        let e = self.err(w.pos, format!("expected 'drop_red', found '{}'", w.text));
                        self.push(e);
                        return None;
                    }
                };
                Some(Prim::Meter(m, idx, drop_red))
            }
            other => {
                let e = self.err(name.pos, format!("unknown primitive \"{other}\""));
                let s = suggest(other, PRIMS.iter().copied());
                self.push(e.did_you_mean(s));
                None
            }
        }
    }
}
