//! Table entries and object settings as text: the `--entries` bulk-load file and the commands of
//! `fastpath ctl`. One command per line; `#` starts a comment.
//!
//! ```text
//! table fib4 add 198.18.0.0/15 => nexthop(1, 02:00:00:00:00:02, 02:00:00:00:00:01)
//! table acl add 10.0.0.0/8 * 80..90 6/0xff priority 10 => deny
//! table acl del 10.0.0.0/8 * 80..90 6/0xff
//! table l2 add 02:00:00:00:00:09 => forward(port=3)
//! meter policer 7 cir 1250000 cbs 15000 ebs 15000            # srTCM, bytes/s and bytes
//! meter shaper 0 cir 1250000 cbs 15000 pir 2500000 pbs 30000 # trTCM
//! ```
//! Key fields are positional, in the table's key order, written per match kind: exact `v`,
//! lpm `v/len`, ternary `v/0xmask` (or `v&&&mask`, `*`), range `lo..hi` (or `*`).

use crate::action::MAX_ARGS;
use crate::exec::Pipeline;
use crate::objects::MeterRates;
use crate::spec::suggest;
use crate::table::TableOps;
use crate::value::Match;

/// A rejected entry command: where, what was given, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {msg}\n    {input}")]
pub struct EntryError {
    /// File name (or `ctl`).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// The command as given.
    pub input: String,
    /// What is wrong.
    pub msg: String,
}

impl Pipeline {
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

    /// Loads an entries file: every line is a command; classifier tables are rebuilt once at
    /// the end. Stops at the first error (which names file and line). Returns commands applied.
    pub fn load_entries(&mut self, file: &str, text: &str) -> Result<usize, EntryError> {
        let mut n = 0;
        for (k, line) in text.lines().enumerate() {
            let cmd = line.split('#').next().unwrap_or("").trim();
            if cmd.is_empty() {
                continue;
            }
            self.command(cmd, false).map_err(|msg| EntryError { file: file.to_string(), line: k + 1, input: cmd.to_string(), msg })?;
            n += 1;
        }
        self.commit_all().map_err(|msg| EntryError { file: file.to_string(), line: 0, input: String::new(), msg })?;
        Ok(n)
    }

    /// Runs one control command (`table …`, `meter …`) and makes it live.
    pub fn apply_command(&mut self, cmd: &str) -> Result<(), EntryError> {
        self.command(cmd.trim(), true).map_err(|msg| EntryError { file: "ctl".into(), line: 1, input: cmd.to_string(), msg })
    }

    fn commit_all(&mut self) -> Result<(), String> {
        for st in &mut self.stages {
            if let Some(t) = st.table() {
                t.commit().map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    fn command(&mut self, cmd: &str, commit: bool) -> Result<(), String> {
        let (head, rest) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
        match head {
            "table" => self.table_command(rest.trim(), commit),
            "meter" => self.meter_command(rest.trim()),
            other => Err(format!("unknown command \"{other}\" (expected 'table' or 'meter')")),
        }
    }

    fn table_command(&mut self, s: &str, commit: bool) -> Result<(), String> {
        let mut words = s.split_whitespace();
        let (Some(name), Some(verb)) = (words.next(), words.next()) else {
            return Err("expected 'table NAME add|del KEY… [priority P] [=> ACTION(ARGS)]'".into());
        };
        let names: Vec<String> = self.program.tables.iter().map(|t| t.name.clone()).collect();
        let Some(ti) = self.program.table_index(name) else {
            let hint = suggest(name, names.iter().map(String::as_str)).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
            return Err(format!("no table \"{name}\"{hint}"));
        };
        let def = self.program.tables[ti].clone();
        let after_verb = s.splitn(3, char::is_whitespace).nth(2).unwrap_or("");
        let (lhs, rhs) = match after_verb.split_once("=>") {
            Some((l, r)) => (l.trim(), Some(r.trim())),
            None => (after_verb.trim(), None),
        };
        let mut kw: Vec<&str> = lhs.split_whitespace().collect();
        let mut priority = None;
        if let Some(p) = kw.iter().position(|w| *w == "priority") {
            let v = kw.get(p + 1).ok_or("'priority' needs a number")?;
            priority = Some(v.parse::<u32>().map_err(|_| format!("priority '{v}' is not a number"))?);
            kw.drain(p..p + 2);
        }
        if kw.len() != def.key.len() {
            let names: Vec<&str> = def.key.iter().map(|k| k.name.as_str()).collect();
            return Err(format!("table \"{name}\" has {} key field(s) ({}), {} given", def.key.len(), names.join(", "), kw.len()));
        }
        let mut key = Vec::new();
        for (w, k) in kw.iter().zip(&def.key) {
            key.push(Match::parse(k.field.kind, w).map_err(|e| format!("key field {}: {e}", k.name))?);
        }
        let prio = priority.unwrap_or(u32::MAX / 2);
        match verb {
            "add" => {
                let rhs = rhs.ok_or("expected '=> ACTION(ARGS)' after the key")?;
                let (ai, args) = parse_call(rhs, &self.program, &def.actions)?;
                let table = self.table_mut(name).ok_or("table has no stage")?;
                table.insert(&key, prio, ai, args).map_err(|e| e.to_string())?;
            }
            "del" | "delete" => self.table_mut(name).ok_or("table has no stage")?.remove(&key).map_err(|e| e.to_string())?,
            other => return Err(format!("unknown table verb \"{other}\" (expected add or del)")),
        }
        if commit {
            self.table_mut(name).ok_or("table has no stage")?.commit().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn meter_command(&mut self, s: &str) -> Result<(), String> {
        let w: Vec<&str> = s.split_whitespace().collect();
        let (Some(name), Some(idx)) = (w.first(), w.get(1)) else {
            return Err("expected 'meter NAME INDEX cir R cbs B (ebs B | pir R pbs B)'".into());
        };
        let idx: usize = idx.parse().map_err(|_| format!("meter index '{idx}' is not a number"))?;
        let mut r = MeterRates { cir_bytes_per_s: 0, cbs_bytes: 0, ebs_or_pbs_bytes: 0, pir_bytes_per_s: 0 };
        let mut it = w[2..].chunks(2);
        for kv in &mut it {
            let [k, v] = kv else { return Err(format!("'{}' needs a value", kv[0])) };
            let v: u64 = v.replace('_', "").parse().map_err(|_| format!("{k} '{v}' is not a number"))?;
            match *k {
                "cir" => r.cir_bytes_per_s = v,
                "cbs" => r.cbs_bytes = v,
                "ebs" | "pbs" => r.ebs_or_pbs_bytes = v,
                "pir" => r.pir_bytes_per_s = v,
                other => return Err(format!("unknown meter setting \"{other}\" (cir, cbs, ebs, pir, pbs)")),
            }
        }
        self.objects.set_meter(name, idx, r)
    }
}

/// Parses `name(arg, …)` (or `name` alone; `name(k=v, …)` with parameter names) against the
/// actions a table allows.
fn parse_call(s: &str, prog: &crate::compile::Program, allowed: &[usize]) -> Result<(usize, [u128; MAX_ARGS]), String> {
    let (name, inner) = match s.split_once('(') {
        Some((n, rest)) => (n.trim(), rest.trim_end().strip_suffix(')').ok_or("missing ')'")?),
        None => (s.trim(), ""),
    };
    let Some(ai) = allowed.iter().copied().find(|&a| prog.actions[a].name == name) else {
        let names: Vec<&str> = allowed.iter().map(|&a| prog.actions[a].name.as_str()).collect();
        return Err(format!("action \"{name}\" is not allowed here (allowed: {})", names.join(", ")));
    };
    let a = &prog.actions[ai];
    let given: Vec<&str> = inner.split(',').map(str::trim).filter(|x| !x.is_empty()).collect();
    if given.len() != a.params.len() {
        let ps: Vec<&str> = a.params.iter().map(|p| p.0.as_str()).collect();
        return Err(format!("action \"{name}\" takes {} argument(s) ({}), {} given", a.params.len(), ps.join(", "), given.len()));
    }
    let mut args = [0u128; MAX_ARGS];
    for (k, g) in given.iter().enumerate() {
        let (pi, text) = match g.split_once('=') {
            Some((pn, v)) => {
                let pi = a.params.iter().position(|p| p.0 == pn.trim()).ok_or_else(|| format!("action \"{name}\" has no parameter \"{}\"", pn.trim()))?;
                (pi, v.trim())
            }
            None => (k, *g),
        };
        let (pn, kind) = &a.params[pi];
        args[pi] = kind.parse(text).map_err(|e| format!("argument {pn}: {e}"))?;
    }
    Ok((ai, args))
}
