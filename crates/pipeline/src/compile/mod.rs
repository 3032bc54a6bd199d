//! The compiler: spec file ▸ checked [`Program`] (the IR, [`crate::ir`]). The build step
//! ([`crate::build`]) makes it runnable.
//!
//! One file per concern: `parser` (headers, metadata), `objects` (meters, counters,
//! conntrack), `actions` (action bodies and primitives), `tables` (keys, match kinds, the
//! implementation, defaults), `control` (the ingress / egress blocks and conditions) and `tm`
//! (the traffic manager).
//!
//! Compilation resolves every name once: header fields become offset/width extractors, parameters
//! become argument indices, tables pick their implementation from their key (a direct array for
//! ≤ 16-bit exact keys, a bucketised cuckoo hash for wider exact keys (the build keeps a large
//! table of one IPv4 address as /32 routes of a DIR-24-8 instead), DIR-24-8 / multibit trie
//! for a single LPM field, the decision-tree classifier for anything with ternary or range
//! fields), and `if`/`elif`/`else` become lane-mask steps. Every problem is reported with its
//! place in the file; compilation goes on after an error to report as many as it can.

mod actions;
mod control;
mod objects;
mod parser;
mod tables;
pub mod tm;

use crate::ir::{Program, StageDef, ValueKind};
use crate::spec::{Source, SpecError, SpecErrors, SpecFile};
use fastpath_packet::HdrSet;

pub(crate) const BUILTINS: &[&str] = &["no_action", "drop", "forward", "to_control"];
pub(crate) const PRIMS: &[&str] = &[
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
    "set_queue",
    "count",
    "meter",
    "vxlan_decap",
    "vxlan_encap",
    "hash",
    "ct_commit",
    "ct_load",
    "conntrack",
    "l2_switch",
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
            fdbs: Vec::new(),
            stages: vec![("parser".to_string(), StageDef::Parser)],
            ingress: Vec::new(),
            egress: Vec::new(),
            n_masks: 1,
            tm: None,
        };
        self.parser(spec, &mut p);
        self.metadata(spec, &mut p);
        self.tm(spec, &mut p);
        self.objects(spec, &mut p);
        self.fdbs(spec, &mut p);
        self.actions(spec, &mut p);
        self.tables(spec, &mut p);
        let mut applied = Vec::new();
        let ing = &spec.control.ingress;
        let steps = self.control(ing, &mut p, &mut applied);
        p.ingress.extend(steps);
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
}

pub(crate) fn fmt_range(r: &std::ops::RangeInclusive<usize>) -> String {
    if r.start() == r.end() {
        r.start().to_string()
    } else {
        format!("{} to {}", r.start(), r.end())
    }
}
