//! Table entries and object settings as text: the `--entries` bulk-load file and the commands of
//! `fastpath ctl`. One command per line; `#` starts a comment.
//!
//! ```text
//! table fib4 add 198.18.0.0/15 => nexthop(1, 02:00:00:00:00:02, 02:00:00:00:00:01)
//! table fib4 modify 198.18.0.0/15 => drop                 # the key must exist
//! table acl add 10.0.0.0/8 * 80..90 6/0xff priority 10 => deny
//! table acl del 10.0.0.0/8 * 80..90 6/0xff                # 'delete' too; the key must exist
//! table l2 add 02:00:00:00:00:09 => forward(port=3)
//! table l2 clear                                           # every entry
//! meter policer 7 cir 1250000 cbs 15000 ebs 15000            # srTCM, bytes/s and bytes
//! meter shaper 0 cir 1250000 cbs 15000 pir 2500000 pbs 30000 # trTCM
//! ```
//! Key fields are positional, in the table's key order, written per match kind: exact `v`,
//! lpm `v/len`, ternary `v/0xmask` (or `v&&&mask`, `*`), range `lo..hi` (or `*`).
//!
//! Parsing and applying are separate steps: [`Program::parse_entry`] checks a command against
//! the compiled spec's table schemas, actions and meter arrays and turns it into a typed
//! [`EntryOp`] (no text is left to interpret); [`Pipeline::apply_ops`] applies a list of them to
//! one pipeline instance and then commits every classifier it touched once. The control plane
//! parses once, on its own thread, and sends the same typed ops to every worker's replica.

use crate::exec::Pipeline;
use crate::ir::{Program, StageDef, TableImpl, MAX_ARGS};
use crate::objects::MeterRates;
use crate::spec::suggest;
use crate::table::{Acl, Adopt, BuiltClassifier, EntryView, FoldJob, Folded, TableOps};
use crate::value::Match;
use std::sync::Arc;

/// A rejected entry command: where, what was given, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct EntryError {
    /// File name (or `ctl`).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column of the offending token in `input` (0: the command as a whole).
    pub col: usize,
    /// The command as given.
    pub input: String,
    /// What is wrong.
    pub msg: String,
}

impl EntryError {
    fn render(&self) -> String {
        if self.col == 0 {
            return format!("{}:{}: {}\n    {}", self.file, self.line, self.msg, self.input);
        }
        format!("{}:{}:{}: {}\n    {}\n    {}^", self.file, self.line, self.col, self.msg, self.input, " ".repeat(self.col - 1))
    }
}

/// A parse failure inside one command: the message and the offending token (a sub-slice of the
/// command, so its column can be computed), if there is one.
#[derive(Debug)]
pub struct ParseFail<'a> {
    /// What is wrong.
    pub msg: String,
    /// The offending token.
    pub token: Option<&'a str>,
}

impl<'a> ParseFail<'a> {
    fn at(token: &'a str, msg: impl Into<String>) -> Self {
        ParseFail { msg: msg.into(), token: Some(token) }
    }
    fn whole(msg: impl Into<String>) -> Self {
        ParseFail { msg: msg.into(), token: None }
    }
    /// The error for command `input` (whose sub-slice `token` is), at `file:line`.
    pub fn into_error(self, file: &str, line: usize, input: &str) -> EntryError {
        let col = self
            .token
            .and_then(|t| (t.as_ptr() as usize).checked_sub(input.as_ptr() as usize))
            .filter(|&off| off <= input.len())
            .map_or(0, |off| input[..off].chars().count() + 1);
        EntryError { file: file.to_string(), line, col, input: input.to_string(), msg: self.msg }
    }
}

/// One table entry as the control plane gives it, checked against the table's schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntrySpec {
    /// Index into `Program::tables`.
    pub table: usize,
    /// One match per key field.
    pub key: Vec<Match>,
    /// Classifier priority (lower wins); the default for other engines.
    pub priority: u32,
    /// Index into `Program::actions` (one the table allows).
    pub action: usize,
    /// The action's arguments, by parameter position.
    pub args: [u128; MAX_ARGS],
}

/// A typed entries / control command. Parsed once ([`Program::parse_entry`]), applied to any
/// number of pipeline instances of that program ([`Pipeline::apply_ops`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryOp {
    /// `table T add KEY… [priority P] => ACTION(ARGS)`: adds, or replaces the entry with that key.
    Add(EntrySpec),
    /// `table T modify KEY… [priority P] => ACTION(ARGS)`: replaces the action of an existing entry.
    Modify(EntrySpec),
    /// `table T del KEY…`: removes an existing entry.
    Del {
        /// Index into `Program::tables`.
        table: usize,
        /// The key.
        key: Vec<Match>,
    },
    /// `table T clear`: removes every entry.
    Clear {
        /// Index into `Program::tables`.
        table: usize,
    },
    /// `meter M I cir … cbs … (ebs … | pir … pbs …)`: configures one meter.
    Meter {
        /// Meter array name.
        bank: String,
        /// Index in the array.
        index: usize,
        /// Rates.
        rates: MeterRates,
    },
    /// `tm pipe PORT PIPE profile N`: gives a pipe (subscriber) of a hierarchical port the
    /// profile (service tier) `N`, with a full shaper bucket.
    Pipe {
        /// Hierarchical port.
        port: u16,
        /// Pipe on that port.
        pipe: u32,
        /// `[[tm.profile]]` index.
        profile: u16,
    },
}

impl EntryOp {
    /// The table the op changes, if any.
    pub fn table(&self) -> Option<usize> {
        match self {
            EntryOp::Add(e) | EntryOp::Modify(e) => Some(e.table),
            EntryOp::Del { table, .. } | EntryOp::Clear { table } => Some(*table),
            EntryOp::Meter { .. } | EntryOp::Pipe { .. } => None,
        }
    }
}

/// The commands of an entries file with their 1-based line numbers: comments (`#` to the end of
/// the line) and blank lines removed, each command trimmed.
pub fn entry_commands(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter_map(|(k, line)| {
        let cmd = line.split('#').next().unwrap_or("").trim();
        (!cmd.is_empty()).then_some((k + 1, cmd))
    })
}

/// Words of `s` with their positions (sub-slices of `s`).
fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

impl Program {
    /// Parses one command (`table …` or `meter …`, no comment) and checks it against this
    /// program's tables, actions and meter arrays. Control thread only.
    ///
    /// # Errors
    /// What is wrong, with the offending token when there is one (and a "did you mean").
    pub fn parse_entry<'a>(&self, cmd: &'a str) -> Result<EntryOp, ParseFail<'a>> {
        let w = words(cmd);
        match w.first().copied() {
            Some("table") => self.parse_table(cmd, &w),
            Some("meter") => self.parse_meter(&w),
            Some("tm") => self.parse_pipe(&w),
            Some(other) => {
                let hint = suggest(other, ["table", "meter", "tm"]).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
                Err(ParseFail::at(other, format!("unknown command \"{other}\"{hint} (expected 'table', 'meter' or 'tm')")))
            }
            None => Err(ParseFail::whole("empty command")),
        }
    }

    fn parse_table<'a>(&self, cmd: &'a str, w: &[&'a str]) -> Result<EntryOp, ParseFail<'a>> {
        let usage = "expected 'table NAME add|modify|del|clear KEY… [priority P] [=> ACTION(ARGS)]'";
        let (Some(&name), Some(&verb)) = (w.get(1), w.get(2)) else {
            return Err(ParseFail::whole(usage));
        };
        let Some(ti) = self.table_index(name) else {
            let hint =
                suggest(name, self.tables.iter().map(|t| t.name.as_str())).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
            let known: Vec<&str> = self.tables.iter().map(|t| t.name.as_str()).collect();
            return Err(ParseFail::at(name, format!("no table \"{name}\"{hint} (tables: {})", known.join(", "))));
        };
        const VERBS: [&str; 5] = ["add", "modify", "del", "delete", "clear"];
        if !VERBS.contains(&verb) {
            let hint = suggest(verb, VERBS).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
            return Err(ParseFail::at(verb, format!("unknown table verb \"{verb}\"{hint} (expected add, modify, del or clear)")));
        }
        let def = &self.tables[ti];
        // Everything after the verb, split at `=>`.
        let verb_end = (verb.as_ptr() as usize - cmd.as_ptr() as usize) + verb.len();
        let after_verb = cmd.get(verb_end..).unwrap_or("");
        let (lhs, rhs) = match after_verb.find("=>") {
            Some(p) => (&after_verb[..p], Some((&after_verb[p..p + 2], &after_verb[p + 2..]))),
            None => (after_verb, None),
        };
        let mut kw = words(lhs);
        if verb == "clear" {
            if let Some(extra) = kw.first().copied().or(rhs.map(|r| r.0)) {
                return Err(ParseFail::at(extra, "'clear' takes no key or action"));
            }
            return Ok(EntryOp::Clear { table: ti });
        }
        let mut priority = None;
        if let Some(p) = kw.iter().position(|w| *w == "priority") {
            let Some(v) = kw.get(p + 1).copied() else { return Err(ParseFail::at(kw[p], "'priority' needs a number")) };
            priority = Some(v.parse::<u32>().map_err(|_| ParseFail::at(v, format!("priority '{v}' is not a number")))?);
            kw.drain(p..p + 2);
        }
        if kw.len() != def.key.len() {
            let names: Vec<&str> = def.key.iter().map(|k| k.name.as_str()).collect();
            let msg = format!("table \"{name}\" has {} key field(s) ({}), {} given", def.key.len(), names.join(", "), kw.len());
            return Err(match kw.get(def.key.len()) {
                Some(extra) => ParseFail::at(extra, msg),
                None => ParseFail::at(verb, msg),
            });
        }
        let mut key = Vec::with_capacity(kw.len());
        for (word, k) in kw.iter().zip(&def.key) {
            key.push(Match::parse(k.field.kind, word).map_err(|e| ParseFail::at(word, format!("key field {}: {e}", k.name)))?);
        }
        if matches!(verb, "del" | "delete") {
            if let Some((arrow, _)) = rhs {
                return Err(ParseFail::at(arrow, "'del' takes a key only, no '=> ACTION'"));
            }
            return Ok(EntryOp::Del { table: ti, key });
        }
        let Some((arrow, call)) = rhs else {
            return Err(ParseFail::at(verb, format!("'{verb}' needs '=> ACTION(ARGS)' after the key")));
        };
        let call = call.trim();
        let (action, args) = parse_call(if call.is_empty() { arrow } else { call }, call, self, &def.actions)?;
        let e = EntrySpec { table: ti, key, priority: priority.unwrap_or(u32::MAX / 2), action, args };
        Ok(if verb == "add" { EntryOp::Add(e) } else { EntryOp::Modify(e) })
    }

    fn parse_pipe<'a>(&self, w: &[&'a str]) -> Result<EntryOp, ParseFail<'a>> {
        let usage = "expected 'tm pipe PORT PIPE profile N'";
        let [_, sub, port, pipe, kw, profile] = w else { return Err(ParseFail::whole(usage)) };
        if *sub != "pipe" || *kw != "profile" {
            return Err(ParseFail::at(if *sub != "pipe" { sub } else { kw }, usage));
        }
        let num = |t: &'a str, what: &str| t.parse::<u64>().map_err(|_| ParseFail::at(t, format!("{what} '{t}' is not a number")));
        let (p, pi, pr) = (num(port, "port")?, num(pipe, "pipe")?, num(profile, "profile")?);
        let Some((_, h)) = self.tm.as_ref().and_then(|t| t.hqos.iter().find(|(x, _)| u64::from(*x) == p)) else {
            return Err(ParseFail::at(port, format!("port {p} is not a hierarchical port of [tm] (one with pipes = …)")));
        };
        let pipes: u64 = h.groups.iter().map(|g| u64::from(g.pipes)).sum();
        if pi >= pipes {
            return Err(ParseFail::at(pipe, format!("pipe {pi} out of range (port {p} has {pipes})")));
        }
        if pr >= h.profiles.len() as u64 {
            return Err(ParseFail::at(profile, format!("profile {pr} out of range ([tm] has {} profiles)", h.profiles.len())));
        }
        Ok(EntryOp::Pipe { port: p as u16, pipe: pi as u32, profile: pr as u16 })
    }

    fn parse_meter<'a>(&self, w: &[&'a str]) -> Result<EntryOp, ParseFail<'a>> {
        let (Some(&name), Some(&idx)) = (w.get(1), w.get(2)) else {
            return Err(ParseFail::whole("expected 'meter NAME INDEX cir R cbs B (ebs B | pir R pbs B)'"));
        };
        let Some(def) = self.meters.iter().find(|m| m.name == name) else {
            let hint =
                suggest(name, self.meters.iter().map(|m| m.name.as_str())).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
            return Err(ParseFail::at(name, format!("no meter array \"{name}\"{hint}")));
        };
        let index: usize = idx.parse().map_err(|_| ParseFail::at(idx, format!("meter index '{idx}' is not a number")))?;
        if index >= def.size {
            return Err(ParseFail::at(idx, format!("meter index {index} out of range (\"{name}\" has {})", def.size)));
        }
        let mut r = MeterRates { cir_bytes_per_s: 0, cbs_bytes: 0, ebs_or_pbs_bytes: 0, pir_bytes_per_s: 0 };
        for kv in w[3..].chunks(2) {
            let [k, v] = kv else { return Err(ParseFail::at(kv[0], format!("'{}' needs a value", kv[0]))) };
            let n: u64 = v.replace('_', "").parse().map_err(|_| ParseFail::at(v, format!("{k} '{v}' is not a number")))?;
            match *k {
                "cir" => r.cir_bytes_per_s = n,
                "cbs" => r.cbs_bytes = n,
                "ebs" | "pbs" => r.ebs_or_pbs_bytes = n,
                "pir" => r.pir_bytes_per_s = n,
                other => {
                    let hint = suggest(other, ["cir", "cbs", "ebs", "pir", "pbs"])
                        .map(|s| format!(" (did you mean \"{s}\"?)"))
                        .unwrap_or_default();
                    return Err(ParseFail::at(k, format!("unknown meter setting \"{other}\"{hint} (cir, cbs, ebs, pir, pbs)")));
                }
            }
        }
        Ok(EntryOp::Meter { bank: name.to_string(), index, rates: r })
    }
}

impl Pipeline {
    /// The compiled program this pipeline was instantiated from (table schemas, actions).
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The table named `name`, for the control plane.
    pub fn table_mut(&mut self, name: &str) -> Option<&mut dyn TableOps> {
        let i = self.stage_names.iter().position(|n| n == name)?;
        self.stages[i].table()
    }

    /// The table named `name`, read-only.
    pub fn table(&self, name: &str) -> Option<&dyn TableOps> {
        let i = self.stage_names.iter().position(|n| n == name)?;
        self.stages[i].table_ref()
    }

    /// Every entry of table `name` as an entry command (`table T add KEY… [priority P] =>
    /// ACTION(ARGS)`), sorted by priority and key: the text loads back as an entries file and
    /// gives the same table. `None` when there is no such table. Control thread.
    pub fn entry_lines(&self, name: &str) -> Option<Vec<String>> {
        let t = self.program.table_index(name)?;
        let def = &self.program.tables[t];
        let classifier = def.imp == TableImpl::Acl;
        let lines = self
            .table_entries(t)?
            .iter()
            .map(|e| {
                let mut l = format!("table {name} add");
                for (m, k) in e.key.iter().zip(&def.key) {
                    l.push(' ');
                    l.push_str(&m.format(k.field.kind));
                }
                if classifier {
                    l.push_str(&format!(" priority {}", e.priority));
                }
                let a = &self.program.actions[e.action];
                l.push_str(" => ");
                l.push_str(&a.name);
                if !a.params.is_empty() {
                    let args: Vec<String> = a.params.iter().zip(&e.args).map(|((_, kind), &v)| kind.format(v)).collect();
                    l.push_str(&format!("({})", args.join(", ")));
                }
                l
            })
            .collect();
        Some(lines)
    }

    /// Every entry of table `t` (index into `Program::tables`), sorted by priority and key;
    /// `None` when no stage applies it. Control thread.
    pub fn table_entries(&self, t: usize) -> Option<Vec<EntryView>> {
        let first = self.stages_of(t).next()?;
        Some(self.stages[first].table_ref()?.dump())
    }

    /// Entries in table `t` (index into `Program::tables`); 0 when no stage applies it.
    pub fn table_len(&self, t: usize) -> usize {
        self.stages_of(t).next().and_then(|s| self.stages[s].table_ref()).map_or(0, |tab| tab.len())
    }

    /// Stage indices that apply table `t` (a table applied twice has two stages).
    fn stages_of(&self, t: usize) -> impl Iterator<Item = usize> + '_ {
        self.program.stages.iter().enumerate().filter(move |(_, (_, s))| matches!(s, StageDef::Table(x) if *x == t)).map(|(i, _)| i)
    }

    /// Loads an entries file: every line is a command; classifier tables are built in full once
    /// at the end (no delta). Stops at the first error (which names file and line). Returns commands applied.
    ///
    /// # Errors
    /// The first bad line, with file, line, column and the command.
    pub fn load_entries(&mut self, file: &str, text: &str) -> Result<usize, EntryError> {
        let mut n = 0;
        for (line, cmd) in entry_commands(text) {
            let op = self.program.parse_entry(cmd).map_err(|e| e.into_error(file, line, cmd))?;
            self.apply_op(&op).map_err(|msg| EntryError { file: file.to_string(), line, col: 0, input: cmd.to_string(), msg })?;
            n += 1;
        }
        self.commit_all_full().map_err(|msg| EntryError { file: file.to_string(), line: 0, col: 0, input: String::new(), msg })?;
        Ok(n)
    }

    /// Parses and runs one control command (`table …`, `meter …`) and makes it live.
    ///
    /// # Errors
    /// A parse error (with the offending token) or what the table refused.
    pub fn apply_command(&mut self, cmd: &str) -> Result<(), EntryError> {
        let cmd = cmd.trim();
        let op = self.program.parse_entry(cmd).map_err(|e| e.into_error("ctl", 1, cmd))?;
        self.apply_ops(std::slice::from_ref(&op)).map_err(|(_, msg)| EntryError {
            file: "ctl".into(),
            line: 1,
            col: 0,
            input: cmd.to_string(),
            msg,
        })
    }

    /// Applies `ops` in order, then commits every classifier table they touched, once (the
    /// last full build plus the changes since: see [`TableOps::commit`]).
    /// Control plane or worker (at a batch boundary).
    ///
    /// # Errors
    /// The index of the first op that failed and why; ops before it stay applied (staged
    /// classifier changes are committed), the failed op changed nothing.
    pub fn apply_ops(&mut self, ops: &[EntryOp]) -> Result<(), (usize, String)> {
        self.apply_ops_prebuilt(ops, &[], &mut Vec::new())
    }

    /// The classifiers of the tables `ops` touch, as this replica built them when it applied
    /// `ops` — for [`Pipeline::apply_ops_prebuilt`] on the other replicas. Control plane.
    pub fn built_classifiers(&mut self, ops: &[EntryOp]) -> Vec<(usize, BuiltClassifier)> {
        let mut out: Vec<(usize, BuiltClassifier)> = Vec::new();
        for t in ops.iter().filter_map(EntryOp::table) {
            if out.iter().any(|(u, _)| *u == t) {
                continue;
            }
            let first = self.stages_of(t).next();
            if let Some(acl) = first.and_then(|s| self.stages[s].table()).and_then(|tab| tab.built_classifier()) {
                out.push((t, acl));
            }
        }
        out
    }

    /// [`Pipeline::apply_ops`], where the classifier tables listed in `prebuilt` adopt the
    /// given classifier (built by another replica from the same ops,
    /// [`Pipeline::built_classifiers`], or a finished fold, [`Pipeline::finish_fold`]) instead
    /// of committing their own: a worker then swaps pointers between two batches. A listed table
    /// the ops do not touch adopts too (a fold published with unrelated changes); if it refuses,
    /// its own classifier stays, which answers the same. Within one replica, a table applied by
    /// several stages is committed by the first and adopted by the others. The classifiers
    /// replaced go to `retired`, for the caller to free off the packet path.
    ///
    /// # Errors
    /// As [`Pipeline::apply_ops`].
    pub fn apply_ops_prebuilt(
        &mut self,
        ops: &[EntryOp],
        prebuilt: &[(usize, BuiltClassifier)],
        retired: &mut Vec<Arc<Acl>>,
    ) -> Result<(), (usize, String)> {
        let mut result = Ok(());
        let mut touched = 0u64;
        for (k, op) in ops.iter().enumerate() {
            if let Err(e) = self.apply_op(op) {
                result = Err((k, e));
                break;
            }
            if let Some(t) = op.table() {
                touched |= 1u64 << (t % 64);
            }
        }
        for t in 0..self.program.tables.len() {
            let touches = touched & (1u64 << (t % 64)) != 0;
            let built = prebuilt.iter().find(|(u, _)| *u == t).map(|(_, a)| a);
            if !touches && built.is_none() {
                continue;
            }
            let stages: Vec<usize> = self.stages_of(t).collect();
            // What the first stage committed, for the others to adopt.
            let mut own: Option<BuiltClassifier> = None;
            for s in stages {
                if let Some(tab) = self.stages[s].table() {
                    // A failed op leaves the replica unlike the one that built `built`;
                    // a refused one (other action entries) commits its own.
                    let adopted = match built.or(own.as_ref()) {
                        Some(b) if result.is_ok() => tab.adopt_classifier(b),
                        _ => Adopt::Refused,
                    };
                    if let Adopt::Adopted(old) = adopted {
                        retired.extend(old);
                    } else if touches {
                        if let Err(e) = tab.commit() {
                            let k = ops.iter().position(|o| o.table() == Some(t)).unwrap_or(0);
                            return Err((k, e.to_string()));
                        }
                        if own.is_none() && built.is_none() {
                            own = tab.built_classifier();
                        }
                    }
                }
            }
        }
        result
    }

    /// Applies one op without committing classifier tables (see [`Pipeline::apply_ops`]).
    ///
    /// # Errors
    /// What the table or meter refused; the op then changed nothing.
    pub fn apply_op(&mut self, op: &EntryOp) -> Result<(), String> {
        let Some(t) = op.table() else {
            return match op {
                EntryOp::Meter { bank, index, rates } => self.objects.set_meter(bank, *index, *rates),
                EntryOp::Pipe { port, pipe, profile } => match self.tm.as_mut() {
                    Some(tm) => tm.set_pipe_profile(usize::from(*port), *pipe, *profile).map_err(|e| e.to_string()),
                    None => Err("the pipeline has no [tm]".into()),
                },
                _ => Ok(()),
            };
        };
        let stages: Vec<usize> = self.stages_of(t).collect();
        if stages.is_empty() {
            return Err(format!(
                "table \"{}\" is not applied by the pipeline",
                self.program.tables.get(t).map_or("?", |d| d.name.as_str())
            ));
        }
        for s in stages {
            let Some(tab) = self.stages[s].table() else { continue };
            match op {
                EntryOp::Add(e) => tab.insert(&e.key, e.priority, e.action, e.args).map_err(|e| e.to_string())?,
                EntryOp::Modify(e) => {
                    let before = tab.len();
                    tab.insert(&e.key, e.priority, e.action, e.args).map_err(|e| e.to_string())?;
                    if tab.len() > before {
                        // It was not there: take the new entry out again.
                        let _ = tab.remove(&e.key);
                        return Err(format!("table \"{}\": no entry with that key to modify (use add)", tab.def().name));
                    }
                }
                EntryOp::Del { key, .. } => tab.remove(key).map_err(|e| e.to_string())?,
                EntryOp::Clear { .. } => tab.clear(),
                EntryOp::Meter { .. } | EntryOp::Pipe { .. } => {}
            }
        }
        Ok(())
    }

    fn commit_all_full(&mut self) -> Result<(), String> {
        for st in &mut self.stages {
            if let Some(t) = st.table() {
                t.commit_full().map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// Full builds that classifier tables want run off the write path (their changes since
    /// the last full build outgrew the bound), by table index: run each
    /// ([`FoldJob::run`], any thread) and hand the result to [`Pipeline::finish_fold`]. Control
    /// plane, on its replica; changes may be applied meanwhile.
    pub fn fold_jobs(&mut self) -> Vec<(usize, FoldJob)> {
        let mut out = Vec::new();
        for t in 0..self.program.tables.len() {
            if self.program.tables[t].imp != TableImpl::Acl {
                continue;
            }
            let first = self.stages_of(t).next();
            if let Some(job) = first.and_then(|s| self.stages[s].table()).and_then(|tab| tab.fold_job()) {
                out.push((t, job));
            }
        }
        out
    }

    /// Installs a finished fold of table `t` ([`Pipeline::fold_jobs`]) with the changes made
    /// since on top, and returns the classifier to publish to the other replicas
    /// ([`Pipeline::apply_ops_prebuilt`]); `None` when the fold is stale (the table was
    /// cleared or rebuilt since). Control plane; costs the changes made during the fold.
    pub fn finish_fold(&mut self, t: usize, f: Folded) -> Option<BuiltClassifier> {
        let stages: Vec<usize> = self.stages_of(t).collect();
        let (&first, rest) = stages.split_first()?;
        let tab = self.stages[first].table()?;
        if !tab.finish_fold(f) {
            return None;
        }
        let built = tab.built_classifier()?;
        for s in rest {
            // A stage that refuses (other action entries) keeps its own classifier: the same
            // rules, so the same answers.
            if let Some(tab) = self.stages[*s].table() {
                let _ = tab.adopt_classifier(&built);
            }
        }
        Some(built)
    }
}

/// Parses `name(arg, …)` (or `name` alone; `name(k=v, …)` with parameter names) against the
/// actions a table allows. `at` is the token to blame when `s` is empty.
fn parse_call<'a>(at: &'a str, s: &'a str, prog: &Program, allowed: &[usize]) -> Result<(usize, [u128; MAX_ARGS]), ParseFail<'a>> {
    if s.is_empty() {
        return Err(ParseFail::at(at, "expected an action after '=>'"));
    }
    let (name, inner) = match s.split_once('(') {
        Some((n, rest)) => (n.trim(), rest.trim_end().strip_suffix(')').ok_or_else(|| ParseFail::at(s, "missing ')'"))?),
        None => (s.trim(), ""),
    };
    let Some(ai) = allowed.iter().copied().find(|&a| prog.actions[a].name == name) else {
        let names: Vec<&str> = allowed.iter().map(|&a| prog.actions[a].name.as_str()).collect();
        let hint = suggest(name, names.iter().copied()).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
        return Err(ParseFail::at(name, format!("action \"{name}\" is not allowed here{hint} (allowed: {})", names.join(", "))));
    };
    let a = &prog.actions[ai];
    let given: Vec<&str> = inner.split(',').map(str::trim).filter(|x| !x.is_empty()).collect();
    if given.len() != a.params.len() {
        let ps: Vec<&str> = a.params.iter().map(|p| p.0.as_str()).collect();
        return Err(ParseFail::at(
            name,
            format!("action \"{name}\" takes {} argument(s) ({}), {} given", a.params.len(), ps.join(", "), given.len()),
        ));
    }
    let mut args = [0u128; MAX_ARGS];
    for (k, g) in given.iter().enumerate() {
        let (pi, text) = match g.split_once('=') {
            Some((pn, v)) => {
                let pn = pn.trim();
                let Some(pi) = a.params.iter().position(|p| p.0 == pn) else {
                    let hint =
                        suggest(pn, a.params.iter().map(|p| p.0.as_str())).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
                    return Err(ParseFail::at(g, format!("action \"{name}\" has no parameter \"{pn}\"{hint}")));
                };
                (pi, v.trim())
            }
            None => (k, *g),
        };
        let (pn, kind) = &a.params[pi];
        args[pi] = kind.parse(text).map_err(|e| ParseFail::at(g, format!("argument {pn}: {e}")))?;
    }
    Ok((ai, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"
name = "t"
[parser]
headers = ["eth", "ipv4"]
[[action]]
name = "nexthop"
params = ["port", "dmac"]
body = """
set eth.dst = dmac
forward port
"""
[[table]]
name = "fib4"
key = [{ field = "ipv4.dst", match = "lpm" }]
actions = ["nexthop", "drop"]
size = 4
default = "drop"
[[table]]
name = "acl"
key = [{ field = "ipv4.src", match = "ternary" }, { field = "ipv4.dst", match = "ternary" }]
actions = ["drop", "forward"]
size = 16
default = "drop"
[[meter]]
name = "pol"
kind = "srtcm"
size = 2
[control]
ingress = """
apply acl
apply fib4
"""
"#;

    fn prog() -> Program {
        crate::compile("t.toml", SPEC).unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(cmd: &str) -> EntryError {
        let p = prog();
        match p.parse_entry(cmd) {
            Ok(op) => panic!("{cmd} parsed as {op:?}"),
            Err(e) => e.into_error("ctl", 1, cmd),
        }
    }

    #[test]
    fn commands_parse_into_typed_ops() {
        let p = prog();
        let op = p.parse_entry("table fib4 add 198.18.0.0/15 => nexthop(1, 02:00:00:00:00:02)").unwrap();
        let EntryOp::Add(e) = op else { panic!("{op:?}") };
        assert_eq!((e.table, e.key.clone()), (0, vec![Match::Prefix(0xc612_0000, 15)]));
        assert_eq!(p.actions[e.action].name, "nexthop");
        assert_eq!((e.args[0], e.args[1]), (1, 0x0200_0000_0002));
        assert!(matches!(p.parse_entry("table fib4 modify 198.18.0.0/15 => drop").unwrap(), EntryOp::Modify(_)));
        assert_eq!(
            p.parse_entry("table fib4 del 198.18.0.0/15").unwrap(),
            EntryOp::Del { table: 0, key: vec![Match::Prefix(0xc612_0000, 15)] }
        );
        assert_eq!(p.parse_entry("table acl clear").unwrap(), EntryOp::Clear { table: 1 });
        let EntryOp::Add(a) = p.parse_entry("table acl add 10.0.0.0/0xff000000 * priority 3 => forward(2)").unwrap() else { panic!() };
        assert_eq!((a.priority, a.key[1]), (3, Match::Any));
        let m = p.parse_entry("meter pol 1 cir 1000 cbs 100 ebs 100").unwrap();
        assert!(matches!(m, EntryOp::Meter { index: 1, rates: MeterRates { cir_bytes_per_s: 1000, .. }, .. }));
    }

    #[test]
    fn errors_point_at_the_offending_token_with_a_suggestion() {
        let e = err("table fib add 10.0.0.0/8 => drop");
        assert_eq!(e.col, 7);
        assert!(e.msg.contains("no table \"fib\" (did you mean \"fib4\"?)"), "{e}");
        assert!(e.to_string().ends_with("table fib add 10.0.0.0/8 => drop\n          ^"), "{e}");
        // (command, part of the message, column of the offending token where it is checked)
        let cases: &[(&str, &str, Option<usize>)] = &[
            ("table fib4 ad 10.0.0.0/8 => drop", "did you mean \"add\"", Some(12)),
            ("table fib4 add 10.0.0.1/8 => drop", "beyond its /8", Some(16)),
            ("table fib4 add 10.0.0.0/8 => nexthp(1, 02:00:00:00:00:01)", "did you mean \"nexthop\"", Some(30)),
            ("table fib4 add 10.0.0.0/8 => nexthop(port=1, dmc=02:00:00:00:00:01)", "no parameter \"dmc\" (did you mean \"dmac\"?)", None),
            ("table fib4 add 10.0.0.0/8 => nexthop(1)", "takes 2 argument(s) (port, dmac), 1 given", None),
            ("table fib4 add 10.0.0.0/8", "needs '=> ACTION(ARGS)'", None),
            ("table fib4 del 10.0.0.0/8 => drop", "key only", None),
            ("table acl add 1.2.3.4 => drop", "2 key field(s) (ipv4.src, ipv4.dst), 1 given", None),
            ("tabel fib4 clear", "did you mean \"table\"", Some(1)),
            ("meter pl 0 cir 1 cbs 1 ebs 1", "did you mean \"pol\"", None),
            ("meter pol 2 cir 1 cbs 1 ebs 1", "out of range", None),
            ("meter pol 0 cri 1 cbs 1 ebs 1", "did you mean \"cir\"", None),
        ];
        for &(cmd, msg, col) in cases {
            let e = err(cmd);
            assert!(e.msg.contains(msg), "{cmd}: {e}");
            if let Some(col) = col {
                assert_eq!(e.col, col, "{cmd}: {e}");
            }
        }
    }

    #[test]
    fn ops_apply_modify_needs_the_key_and_clear_empties() {
        let p = prog();
        let mut pipe = p.instantiate();
        let parse = |c: &str| p.parse_entry(c).unwrap();
        let ops = [
            parse("table fib4 add 10.0.0.0/8 => drop"),
            parse("table acl add 10.0.0.0/0xff000000 * => forward(1)"),
            parse("table acl add * * priority 9 => drop"),
        ];
        pipe.apply_ops(&ops).unwrap();
        assert_eq!((pipe.table("fib4").unwrap().len(), pipe.table("acl").unwrap().len()), (1, 2));
        let e = pipe.apply_ops(&[parse("table fib4 modify 11.0.0.0/8 => drop")]).unwrap_err();
        assert!(e.1.contains("no entry with that key to modify"), "{e:?}");
        assert_eq!(pipe.table("fib4").unwrap().len(), 1, "a failed modify leaves nothing behind");
        pipe.apply_ops(&[parse("table fib4 modify 10.0.0.0/8 => nexthop(1, 02:00:00:00:00:07)")]).unwrap();
        let e = pipe.apply_ops(&[parse("table fib4 del 10.0.0.0/8"), parse("table fib4 del 10.0.0.0/8")]).unwrap_err();
        assert_eq!(e.0, 1);
        assert!(e.1.contains("no entry"), "{e:?}");
        pipe.apply_ops(&[parse("table acl clear")]).unwrap();
        assert_eq!(pipe.table("acl").unwrap().len(), 0);
        // Capacity: the fifth route does not fit a table of 4.
        let five: Vec<EntryOp> = (1..=5).map(|k| parse(&format!("table fib4 add 10.{k}.0.0/16 => drop"))).collect();
        let e = pipe.apply_ops(&five).unwrap_err();
        assert_eq!(e.0, 4);
        assert!(e.1.contains("full"), "{e:?}");
    }
}
