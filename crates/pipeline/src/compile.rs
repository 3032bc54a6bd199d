//! The compiler: spec file ▸ checked [`Program`] ▸ runnable [`Pipeline`].
//!
//! Compilation resolves every name once: header fields become offset/width extractors, parameters
//! become argument indices, tables pick their implementation from their key (a direct array for
//! ≤ 16-bit exact keys, a bucketised cuckoo hash for wider exact keys, DIR-24-8 / multibit trie
//! for a single LPM field, the decision-tree classifier for anything with ternary or range
//! fields), and `if`/`elif`/`else` become lane-mask steps. Every problem is reported with its
//! place in the file; compilation goes on after an error to report as many as it can.

use crate::action::{Operand, Prim, MAX_ARGS};
use crate::cond::CondC;
use crate::exec::{Pipeline, PrimStage, Stage, StageStats, Step};
use crate::field::{FieldRef, Loc};
use crate::objects::Objects;
use crate::spec::syntax::{parse_block, Cond, Stmt, Word};
use crate::spec::{suggest, Source, SpecError, SpecErrors, SpecFile};
use crate::value::ValueKind;
use fastpath_packet::meta::REGS;
use fastpath_packet::{DropReason, Hdr, HdrSet, Lanes};
use toml::Spanned;

/// How a key field matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    /// Equal value.
    Exact,
    /// Longest prefix.
    Lpm,
    /// Value and mask.
    Ternary,
    /// Inclusive range.
    Range,
}

/// The data structure a table compiles to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableImpl {
    /// Exact key of ≤ 16 bits: an array indexed by the key.
    Direct,
    /// Exact key of ≤ 128 bits: bucketised cuckoo hash.
    Exact,
    /// One LPM field (IPv4 or IPv6 address).
    Lpm,
    /// Ternary / range / mixed keys: the multi-field classifier.
    Acl,
}

/// A resolved key field.
#[derive(Clone, Debug)]
pub struct KeyDef {
    /// Field name as written.
    pub name: String,
    /// Where it is.
    pub field: FieldRef,
    /// How it matches.
    pub kind: MatchKind,
}

/// A resolved table.
#[derive(Clone, Debug)]
pub struct TableDef {
    /// Name.
    pub name: String,
    /// Key fields.
    pub key: Vec<KeyDef>,
    /// Allowed actions (indices into `Program::actions`).
    pub actions: Vec<usize>,
    /// Capacity.
    pub size: usize,
    /// Action and arguments on a miss.
    pub default: (usize, [u128; MAX_ARGS]),
    /// Drop reason when the default is `drop`.
    pub default_drop: Option<DropReason>,
    /// Chosen implementation.
    pub imp: TableImpl,
}

/// A resolved action.
#[derive(Clone, Debug)]
pub struct ActionDef {
    /// Name.
    pub name: String,
    /// Parameters with their inferred kinds.
    pub params: Vec<(String, ValueKind)>,
    /// Primitives.
    pub body: Vec<Prim>,
}

/// A meter array.
#[derive(Clone, Debug)]
pub struct MeterDef {
    /// Name.
    pub name: String,
    /// RFC 2698 (true) or RFC 2697 (false).
    pub two_rate: bool,
    /// Number of meters.
    pub size: usize,
    /// Colour-aware.
    pub color_aware: bool,
}

/// A counter array.
#[derive(Clone, Debug)]
pub struct CounterDef {
    /// Name.
    pub name: String,
    /// Number of counters.
    pub size: usize,
}

/// A connection-tracking table.
#[derive(Clone, Debug)]
pub struct ConntrackDef {
    /// Name.
    pub name: String,
    /// Capacity, timeouts, window checks.
    pub config: fastpath_tables::flow::FlowConfig,
}

/// What a stage of the plan is.
#[derive(Clone, Debug)]
pub enum StageDef {
    /// The parser.
    Parser,
    /// Apply table `t`.
    Table(usize),
    /// Run these primitives.
    Prims(Vec<Prim>),
    /// `conntrack CT [ZONE]`: track the packets in conntrack table `CT`, zone from the operand.
    Conntrack(u16, Option<Operand>),
}

/// A checked spec, ready to instantiate.
#[derive(Clone, Debug)]
pub struct Program {
    /// Pipeline name.
    pub name: String,
    /// Headers the parser recognises.
    pub headers: HdrSet,
    /// Verify IPv4 header checksums.
    pub verify_ipv4_checksum: bool,
    /// User metadata fields and widths.
    pub user_meta: Vec<(String, u8)>,
    /// Tables.
    pub tables: Vec<TableDef>,
    /// Actions (built-ins first).
    pub actions: Vec<ActionDef>,
    /// Meters.
    pub meters: Vec<MeterDef>,
    /// Counters.
    pub counters: Vec<CounterDef>,
    /// Connection-tracking tables.
    pub conntracks: Vec<ConntrackDef>,
    /// Stages with their names, in plan order.
    pub stages: Vec<(String, StageDef)>,
    /// Ingress steps.
    pub ingress: Vec<SymStep>,
    /// Egress steps.
    pub egress: Vec<SymStep>,
    /// Mask registers needed.
    pub n_masks: usize,
}

/// A step before instantiation (same shape as [`Step`]).
#[derive(Clone, Debug)]
pub enum SymStep {
    /// See [`Step::Mask`].
    Mask(u8, u8, CondC),
    /// See [`Step::AndNot`].
    AndNot(u8, u8, u8),
    /// See [`Step::Run`].
    Run(u8, usize),
}

/// Most key fields a table may have.
pub const MAX_KEY_FIELDS: usize = 8;

const BUILTINS: &[&str] = &["no_action", "drop", "forward", "to_control"];
const PRIMS: &[&str] = &[
    "forward",
    "drop",
    "to_control",
    "set",
    "swap",
    "ttl_dec",
    "hop_limit_dec",
    "push_vlan",
    "pop_vlan",
    "set_dscp",
    "count",
    "meter",
    "vxlan_decap",
    "vxlan_encap",
    "hash",
    "ct_commit",
    "ct_load",
    "conntrack",
];

/// Compiles spec text. `file` is the name shown in errors.
pub fn compile(file: &str, text: &str) -> Result<Program, SpecErrors> {
    let src = Source { file: file.to_string(), text: text.to_string() };
    let spec = SpecFile::parse(&src)?;
    let mut c = Compiler { src: &src, errs: Vec::new(), broken: Vec::new() };
    let prog = c.program(&spec);
    if c.errs.is_empty() {
        Ok(prog)
    } else {
        c.errs.sort_by_key(|e| (e.line, e.col));
        Err(SpecErrors(c.errs))
    }
}

/// Reads and compiles a spec file.
pub fn compile_file(path: &std::path::Path) -> Result<Program, SpecErrors> {
    let name = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(t) => compile(&name, &t),
        Err(e) => Err(SpecErrors(vec![SpecError {
            file: name,
            line: 0,
            col: 0,
            msg: format!("cannot read the spec: {e}"),
            source_line: String::new(),
            hint: None,
        }])),
    }
}

struct Compiler<'a> {
    src: &'a Source,
    errs: Vec<SpecError>,
    /// Tables whose definition had errors: later references to them are not errors again.
    broken: Vec<String>,
}

/// What the compiler knows while compiling primitives.
struct Scope<'a> {
    params: Option<&'a mut Vec<(String, Option<ValueKind>)>>,
    prog: &'a Program,
}

impl Compiler<'_> {
    fn err(&mut self, pos: usize, msg: impl Into<String>) -> SpecError {
        self.src.error(pos, msg)
    }
    fn push(&mut self, e: SpecError) {
        self.errs.push(e);
    }

    fn program(&mut self, spec: &SpecFile) -> Program {
        let mut p = Program {
            name: spec.name.get_ref().clone(),
            headers: HdrSet::EMPTY,
            verify_ipv4_checksum: spec.parser.verify_ipv4_checksum,
            user_meta: Vec::new(),
            tables: Vec::new(),
            actions: Vec::new(),
            meters: Vec::new(),
            counters: Vec::new(),
            conntracks: Vec::new(),
            stages: vec![("parser".to_string(), StageDef::Parser)],
            ingress: Vec::new(),
            egress: Vec::new(),
            n_masks: 1,
        };
        self.parser(spec, &mut p);
        self.metadata(spec, &mut p);
        self.objects(spec, &mut p);
        self.actions(spec, &mut p);
        self.tables(spec, &mut p);
        let mut applied = Vec::new();
        let ing = &spec.control.ingress;
        p.ingress = self.control(ing, &mut p, &mut applied);
        if let Some(eg) = &spec.control.egress {
            p.egress = self.control(eg, &mut p, &mut applied);
        }
        if p.n_masks >= 255 {
            let e = self.err(spec.control.ingress.span().start, "control flow nests too many branches (more than 254)");
            self.push(e);
        }
        for (t, def) in p.tables.iter().enumerate() {
            if !applied.contains(&t) {
                let pos = spec.tables[t].name.span().start;
                let e = self.err(pos, format!("table \"{}\" is never applied", def.name));
                self.push(e.hint("add 'apply NAME' to [control] ingress or egress"));
            }
        }
        p
    }

    fn parser(&mut self, spec: &SpecFile, p: &mut Program) {
        for h in spec.parser.headers.get_ref() {
            match Hdr::from_name(h.get_ref()) {
                Some(x) => p.headers.insert(x),
                None => {
                    let e = self.err(h.span().start + 1, format!("unknown header \"{}\"", h.get_ref()));
                    let s = suggest(h.get_ref(), Hdr::ALL.iter().map(|h| h.name()));
                    self.push(e.did_you_mean(s));
                }
            }
        }
        let hs = p.headers;
        let needs: &[(Hdr, &[Hdr])] = &[
            (Hdr::Vlan, &[Hdr::Eth]),
            (Hdr::Qinq, &[Hdr::Vlan]),
            (Hdr::Arp, &[Hdr::Eth]),
            (Hdr::Ipv4, &[Hdr::Eth]),
            (Hdr::Ipv6, &[Hdr::Eth]),
            (Hdr::Icmp, &[Hdr::Ipv4]),
            (Hdr::Icmp6, &[Hdr::Ipv6]),
            (Hdr::Udp, &[Hdr::Ipv4, Hdr::Ipv6]),
            (Hdr::Tcp, &[Hdr::Ipv4, Hdr::Ipv6]),
            (Hdr::Vxlan, &[Hdr::Udp]),
            (Hdr::InnerEth, &[Hdr::Vxlan]),
            (Hdr::InnerIpv4, &[Hdr::InnerEth]),
            (Hdr::InnerIpv6, &[Hdr::InnerEth]),
            (Hdr::InnerUdp, &[Hdr::InnerIpv4, Hdr::InnerIpv6]),
            (Hdr::InnerTcp, &[Hdr::InnerIpv4, Hdr::InnerIpv6]),
            (Hdr::InnerIcmp, &[Hdr::InnerIpv4, Hdr::InnerIpv6]),
        ];
        for (h, below) in needs {
            if hs.has(*h) && !below.iter().any(|b| hs.has(*b)) {
                let pos = spec.parser.headers.get_ref().iter().find(|x| x.get_ref() == h.name()).map_or(0, |x| x.span().start + 1);
                let names: Vec<&str> = below.iter().map(|b| b.name()).collect();
                let e = self.err(pos, format!("header \"{}\" can only follow {}", h.name(), names.join(" or ")));
                self.push(e.hint(format!("add \"{}\" to the parser's headers", names[0])));
            }
        }
        if !hs.has(Hdr::Eth) && !spec.parser.headers.get_ref().is_empty() {
            let e = self.err(spec.parser.headers.span().start, "the parser must include \"eth\"");
            self.push(e);
        }
    }

    fn metadata(&mut self, spec: &SpecFile, p: &mut Program) {
        for (name, v) in &spec.metadata {
            let w = v.as_integer().unwrap_or(0);
            let pos = self.src.text.find(&format!("{name} ")).or_else(|| self.src.text.find(name.as_str())).unwrap_or(0);
            if !(1..=32).contains(&w) {
                let e = self.err(pos, format!("metadata \"{name}\": width must be 1..=32 bits, got {v}"));
                self.push(e);
                continue;
            }
            if p.user_meta.len() == REGS {
                let e = self.err(pos, format!("at most {REGS} metadata fields"));
                self.push(e);
                continue;
            }
            p.user_meta.push((name.clone(), w as u8));
        }
    }

    fn objects(&mut self, spec: &SpecFile, p: &mut Program) {
        for m in &spec.meters {
            let two_rate = match m.kind.get_ref().as_str() {
                "srtcm" => false,
                "trtcm" => true,
                other => {
                    let e =
                        self.err(m.kind.span().start + 1, format!("meter kind \"{other}\" is not srtcm (RFC 2697) or trtcm (RFC 2698)"));
                    self.push(e);
                    false
                }
            };
            let size = self.size(&m.size, 1 << 24);
            p.meters.push(MeterDef { name: m.name.get_ref().clone(), two_rate, size, color_aware: m.color_aware });
        }
        for c in &spec.counters {
            let size = self.size(&c.size, 1 << 24);
            p.counters.push(CounterDef { name: c.name.get_ref().clone(), size });
        }
        for c in &spec.conntracks {
            let size = self.size(&c.size, 1 << 30);
            let mut config = fastpath_tables::flow::FlowConfig::with_capacity(size as u32);
            config.window_check = c.window_check;
            if let Some(t) = &c.timeouts {
                for (k, v) in t.get_ref() {
                    let secs = v.as_float().or_else(|| v.as_integer().map(|i| i as f64)).filter(|s| *s > 0.0 && *s < 1e9);
                    let to = &mut config.timeouts;
                    let slot = match k.as_str() {
                        "syn_sent" => &mut to.syn_sent_ns,
                        "syn_recv" => &mut to.syn_recv_ns,
                        "established" => &mut to.established_ns,
                        "fin_wait" => &mut to.fin_wait_ns,
                        "close_wait" => &mut to.close_wait_ns,
                        "last_ack" => &mut to.last_ack_ns,
                        "time_wait" => &mut to.time_wait_ns,
                        "closed" => &mut to.closed_ns,
                        "unreplied" => &mut to.unreplied_ns,
                        "replied" => &mut to.replied_ns,
                        "icmp" => &mut to.icmp_ns,
                        other => {
                            let e = self.err(t.span().start, format!("conntrack \"{}\": unknown timeout \"{other}\"", c.name.get_ref()));
                            self.push(e.hint("one of syn_sent, syn_recv, established, fin_wait, close_wait, last_ack, time_wait, closed, unreplied, replied, icmp"));
                            continue;
                        }
                    };
                    match secs {
                        Some(s) => *slot = (s * 1e9) as u64,
                        None => {
                            let e = self.err(
                                t.span().start,
                                format!("conntrack \"{}\": timeout \"{k}\" must be a positive number of seconds", c.name.get_ref()),
                            );
                            self.push(e);
                        }
                    }
                }
            }
            if fastpath_tables::flow::FlowTable::new(fastpath_tables::flow::FlowConfig { capacity: 1, ..config }).is_err() {
                let e = self.err(c.size.span().start, "conntrack configuration refused");
                self.push(e);
            }
            p.conntracks.push(ConntrackDef { name: c.name.get_ref().clone(), config });
        }
    }

    fn size(&mut self, s: &Spanned<u64>, max: u64) -> usize {
        let v = *s.get_ref();
        if v == 0 || v > max {
            let e = self.err(s.span().start, format!("size {v} out of range 1..={max}"));
            self.push(e);
            return 1;
        }
        v as usize
    }

    fn actions(&mut self, spec: &SpecFile, p: &mut Program) {
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

    fn tables(&mut self, spec: &SpecFile, p: &mut Program) {
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

    fn table(&mut self, t: &crate::spec::TableSpec, name: &str, p: &Program) -> Option<TableDef> {
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
                Some(d) => match self.default_call(d, &name, &actions, p) {
                    Some(x) => x,
                    None => return None,
                },
            };
            Some(TableDef { name, key, actions, size, default, default_drop, imp })
        }
    }

    /// Parses `name(arg, …)` for a table's default action.
    fn default_call(
        &mut self,
        d: &Spanned<String>,
        table: &str,
        allowed: &[usize],
        p: &Program,
    ) -> Option<((usize, [u128; MAX_ARGS]), Option<DropReason>)> {
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
    fn field(&mut self, w: &Spanned<String>, p: &Program, table: Option<&str>) -> Option<FieldRef> {
        self.field_at(w.get_ref(), w.span().start + 1, p, table)
    }

    fn field_at(&mut self, name: &str, pos: usize, p: &Program, table: Option<&str>) -> Option<FieldRef> {
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

    fn control(&mut self, block: &Spanned<String>, p: &mut Program, applied: &mut Vec<usize>) -> Vec<SymStep> {
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

    fn new_mask(p: &mut Program) -> u8 {
        // Past 254 registers the program is absurdly nested; reuse the last (wrong but bounded)
        // and let `program()` report it.
        p.n_masks = (p.n_masks + 1).min(255);
        (p.n_masks - 1) as u8
    }

    fn block(&mut self, stmts: &[Stmt], mask: u8, p: &mut Program, applied: &mut Vec<usize>, steps: &mut Vec<SymStep>) {
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

    fn cond(&mut self, c: &Cond, p: &Program, applied: &[usize]) -> Option<CondC> {
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
                match field.kind.parse(&v.text) {
                    Ok(val) => match field.loc {
                        crate::field::Loc::Meta(m) if val <= u128::from(u32::MAX) => CondC::MetaCmp(m, *op, val as u32),
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

    /// An operand of expected kind `want`: a parameter (its kind is inferred), a field, or a
    /// constant.
    fn operand(&mut self, w: &Word, want: ValueKind, scope: &mut Scope<'_>) -> Option<Operand> {
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

    fn object(&mut self, w: Option<&Word>, names: Vec<&str>, what: &str, at: usize) -> Option<u16> {
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

    fn prim(&mut self, name: &Word, args: &[Word], scope: &mut Scope<'_>) -> Option<Prim> {
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
            "swap" => {
                argc(2..=2, self).then_some(())?;
                let a = self.field_at(&args[0].text, args[0].pos, scope.prog, None)?;
                let b = self.field_at(&args[1].text, args[1].pos, scope.prog, None)?;
                if a.width != b.width {
                    let e = self.err(args[1].pos, format!("cannot swap fields of {} and {} bits", a.width, b.width));
                    self.push(e);
                    return None;
                }
                let macs = |x: &FieldRef| x.kind == ValueKind::Mac && matches!(x.loc, Loc::Hdr { slot: fastpath_packet::Slot::Eth, .. });
                if macs(&a) && macs(&b) && a.loc != b.loc {
                    return Some(Prim::MacSwap);
                }
                Some(Prim::Swap(a, b))
            }
            "push_vlan" => {
                argc(1..=2, self).then_some(())?;
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
                Some(Prim::PushVlan(vid, pcp))
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

fn fmt_range(r: &std::ops::RangeInclusive<usize>) -> String {
    if r.start() == r.end() {
        r.start().to_string()
    } else {
        format!("{} to {}", r.start(), r.end())
    }
}

impl Program {
    /// Builds the runnable pipeline: empty tables of the chosen kinds, zeroed objects.
    pub fn instantiate(&self) -> Pipeline {
        let mut stages: Vec<Box<dyn Stage>> = Vec::new();
        for (_, s) in &self.stages {
            stages.push(match s {
                StageDef::Parser => Box::new(crate::stages::parser::Parser::new(self.headers, self.verify_ipv4_checksum)),
                StageDef::Table(t) => crate::table::build_stage(self, *t),
                StageDef::Prims(p) => Box::new(PrimStage { prims: p.clone() }),
                StageDef::Conntrack(ct, zone) => Box::new(crate::stages::conntrack::ConntrackStage::new(*ct, *zone)),
            });
        }
        let steps = |v: &[SymStep]| -> Vec<Step> {
            v.iter()
                .map(|s| match s {
                    SymStep::Mask(d, src, c) => Step::Mask { dst: *d, src: *src, cond: c.clone() },
                    SymStep::AndNot(d, s, sub) => Step::AndNot { dst: *d, src: *s, sub: *sub },
                    SymStep::Run(m, st) => Step::Run { mask: *m, stage: *st },
                })
                .collect()
        };
        let mut ingress = vec![Step::Run { mask: 0, stage: 0 }]; // the parser
        ingress.extend(steps(&self.ingress));
        // 256 registers: the compiler uses fewer than 255, and register 255 (u8::MAX) stays
        // empty — it is the `∅` of the first `rest = mask ∖ ∅` of every `if`.
        let masks = vec![Lanes::NONE; 256];
        Pipeline {
            name: self.name.clone(),
            stage_names: self.stages.iter().map(|(n, _)| n.clone()).collect(),
            stats: vec![StageStats::default(); stages.len()],
            stages,
            ingress,
            egress: steps(&self.egress),
            masks,
            objects: Objects::new(self),
            end_stats: StageStats::default(),
            trace: Default::default(),
            trace_buf: Vec::new(),
            program: self.clone(),
        }
    }

    /// Index of the table named `name`.
    pub fn table_index(&self, name: &str) -> Option<usize> {
        self.tables.iter().position(|t| t.name == name)
    }
}
