//! The control thread's state: a shadow replica of the pipeline that decides whether a change
//! is accepted, the log of accepted changes, and one mailbox per worker.
//!
//! Its typed surface is what every front end calls: [`Control::apply`] (a list of
//! [`EntryOp`]s as one all-or-nothing transaction), [`Control::read`], [`Control::tables`],
//! [`Control::pipeline_info`], [`Control::meter`], [`Control::read_counter`] and
//! [`Control::counters`]; the text protocol ([`Control::execute`]) parses lines into the same
//! ops and commits them through the same transaction, P4Runtime (`fastpath-p4rt`) maps its
//! requests onto them.
//!
//! ```text
//!  request ─▶ parse every line (api) ─▶ changes, in order ─▶ shadow.apply_ops ──refused──▶ error,
//!                                                                  │ ok         shadow restored
//!                                                                  ▼
//!                          log.push(ops); post Apply{seq, ops, classifiers built} to every worker
//!                                         wait for every worker's Applied{seq} (or time out)
//! ```
//! The shadow is one more instance of the same program with the same entries and every
//! accepted change. Workers' replicas receive exactly the ops the shadow accepted, in the same
//! order, and the tables are deterministic (fixed hash seeds), so what succeeds on the shadow
//! succeeds on every worker: "table full" or "no such key" is found out before anything reaches
//! a worker, and a refused request leaves every replica unchanged. When a multi-op request
//! fails part-way, the shadow — already changed by the ops before
//! the failure — is rebuilt from the spec, the entries files and the log. The log stays
//! bounded: once it outgrows what it changed, a thread of its own folds it into the net effect
//! of its ops, which a later write swaps in ([`crate::changelog`]); no write waits for it.
//!
//! Classifier (ACL) tables commit each request as their last full build plus a delta of the
//! changes since, so no request waits for a full build: once a table's delta outgrows its
//! bound, `transact` hands its full build to a thread of its own (`fp-acl-fold`), and the first
//! request after it finished installs it in the shadow, with the changes made meanwhile on top,
//! and posts it to the workers with that request's ops (`Control::settle_folds` does so at
//! once). See the pipeline crate's `table` module and `fastpath_tables::acl::LiveAcl`.

use crate::api::{parse_request, Command, CtlError, Line, Show, HELP};
use crate::background::{Background, Pending};
use crate::changelog::ChangeLog;
use crate::mailbox::{ControlEnd, FromWorker, MailError, ToWorker};
use crate::metrics::{Counters, WorkerSnapshot};
use crate::session::{SessionCmd, Sessions};
use crate::writes::{ApplyStamps, WriteLog};
use fastpath_pipeline::entries::{EntryError, EntryOp};
use fastpath_pipeline::ir::{Program, TableImpl};
use fastpath_pipeline::objects::{Meter, MeterRates};
use fastpath_pipeline::table::{BuiltClassifier, EntryView, Folded};
use fastpath_pipeline::value::Match;
use fastpath_pipeline::Pipeline;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Builds a fresh pipeline from the spec and the start-up entries files.
pub type Rebuild<'a> = Box<dyn FnMut() -> Result<Pipeline, String> + Send + 'a>;

/// The change log is folded once it holds more ops than this and more than twice as many as
/// its last net snapshot ([`crate::changelog`]).
const LOG_COMPACT_AT: usize = 65_536;

/// The control plane of one running data plane. Control thread only.
pub struct Control<'a> {
    shadow: Pipeline,
    rebuild: Rebuild<'a>,
    log: ChangeLog,
    accepted: usize,
    workers: Vec<ControlEnd>,
    seq: u64,
    timeout: Duration,
    /// Subscriber sessions, when the program has the session tables (`pipelines/vbng.toml`).
    sessions: Option<Sessions>,
    /// Full classifier builds under way on the build thread, by table (`transact`).
    folds: Vec<(usize, Pending<Folded>)>,
    /// The thread of the full classifier builds.
    builder: Background,
    /// Ports of the running data plane, which a pipeline reloaded from spec text is sized for.
    ports: usize,
    /// The stamps of the last transaction that succeeded, until a front end takes them.
    stamps: Option<ApplyStamps>,
    /// Where the front ends' writes spent their time.
    writes: WriteLog,
    /// Run first on each background thread ([`Control::set_background_setup`]).
    background_setup: fn(),
    /// The thread that frees what the control thread retires ([`Control::retire`]).
    reaper: Background,
}

/// Something the control thread is done with, for [`Control::retire`] to free elsewhere.
pub type Garbage = Box<dyn Send>;

/// One table of the program, for [`Control::tables`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableInfo {
    /// Index into the program's tables (what [`EntryOp`]s and [`Control::read`] name).
    pub index: usize,
    /// Name from the spec.
    pub name: String,
    /// The engine it compiled to.
    pub imp: TableImpl,
    /// Entries now.
    pub entries: usize,
    /// Capacity.
    pub size: usize,
}

/// Why a transaction was refused.
enum Refusal {
    /// The shadow refused op `k` (nothing applied anywhere).
    Op(usize, String),
    /// A worker refused an op the shadow accepted (a bug).
    Worker { worker: usize, op: usize, msg: String },
    /// A worker did not answer, or the shadow could not be restored.
    Ctl(CtlError),
}

/// `op` written as the entries command that parses to it (`table T add KEY… => ACTION(ARGS)`),
/// for error messages.
pub fn op_text(prog: &Program, op: &EntryOp) -> String {
    let table = |t: usize| prog.tables.get(t);
    let key_text = |t: usize, key: &[Match]| -> String {
        let kinds = table(t).map(|d| d.key.iter().map(|k| k.field.kind).collect::<Vec<_>>()).unwrap_or_default();
        key.iter()
            .enumerate()
            .map(|(i, m)| m.format(kinds.get(i).copied().unwrap_or(fastpath_pipeline::ir::ValueKind::Int(128))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let name = |t: usize| table(t).map_or_else(|| format!("#{t}"), |d| d.name.clone());
    match op {
        EntryOp::Add(e) | EntryOp::Modify(e) => {
            let verb = if matches!(op, EntryOp::Add(_)) { "add" } else { "modify" };
            let mut l = format!("table {} {verb} {}", name(e.table), key_text(e.table, &e.key));
            if table(e.table).is_some_and(|d| d.imp == TableImpl::Acl) {
                let _ = write!(l, " priority {}", e.priority);
            }
            match prog.actions.get(e.action) {
                Some(a) if a.params.is_empty() => {
                    let _ = write!(l, " => {}", a.name);
                }
                Some(a) => {
                    let args: Vec<String> = a.params.iter().zip(&e.args).map(|((_, kind), &v)| kind.format(v)).collect();
                    let _ = write!(l, " => {}({})", a.name, args.join(", "));
                }
                None => {
                    let _ = write!(l, " => action #{}", e.action);
                }
            }
            l
        }
        EntryOp::Del { table, key } => format!("table {} del {}", name(*table), key_text(*table, key)),
        EntryOp::Clear { table } => format!("table {} clear", name(*table)),
        EntryOp::Meter { bank, index, rates } => {
            let two_rate = prog.meters.iter().find(|m| &m.name == bank).is_some_and(|m| m.two_rate);
            if two_rate {
                format!(
                    "meter {bank} {index} cir {} cbs {} pir {} pbs {}",
                    rates.cir_bytes_per_s, rates.cbs_bytes, rates.pir_bytes_per_s, rates.ebs_or_pbs_bytes
                )
            } else {
                format!("meter {bank} {index} cir {} cbs {} ebs {}", rates.cir_bytes_per_s, rates.cbs_bytes, rates.ebs_or_pbs_bytes)
            }
        }
        EntryOp::Pipe { port, pipe, profile } => format!("tm pipe {port} {pipe} profile {profile}"),
    }
}

impl<'a> Control<'a> {
    /// A control plane over `workers` (mailbox ends, by worker index). `shadow` must be built
    /// the way every worker's pipeline was (same spec and entries); `rebuild` builds another.
    pub fn new(shadow: Pipeline, rebuild: Rebuild<'a>, workers: Vec<ControlEnd>) -> Control<'a> {
        let log = ChangeLog::new(&shadow, LOG_COMPACT_AT);
        let sessions = Sessions::new(shadow.program()).ok();
        Control {
            shadow,
            rebuild,
            log,
            accepted: 0,
            workers,
            seq: 0,
            timeout: Duration::from_secs(5),
            sessions,
            folds: Vec::new(),
            builder: Background::new("fp-acl-fold"),
            ports: 1,
            stamps: None,
            writes: WriteLog::default(),
            background_setup: || {},
            reaper: Background::new("fp-reaper"),
        }
    }

    /// Folds the change log once it holds more than `ops` (default 65,536), on a thread of
    /// its own ([`crate::changelog`]).
    pub fn with_log_limit(mut self, ops: usize) -> Self {
        self.log.set_compact_at(ops);
        self
    }

    /// The number of ports the data plane runs (default 1): what [`Control::reload_spec`]
    /// sizes a new pipeline for.
    pub fn with_ports(mut self, ports: usize) -> Self {
        self.ports = ports;
        self
    }

    /// Runs `setup` first on every background thread the control plane starts (the full
    /// classifier builds). A data plane whose control threads are real-time
    /// (`fastpath run --control-rt`) gives its builds back the ordinary scheduler this way:
    /// threads inherit their creator's policy, and a build of some milliseconds at real-time
    /// priority would hold the control threads' core for that long.
    pub fn set_background_setup(&mut self, setup: fn()) {
        self.background_setup = setup;
    }

    /// Frees `garbage` on a background thread of the control plane (set up like the full
    /// classifier builds, [`Control::set_background_setup`]) instead of on the caller's: a front
    /// end hands over a request it has carried out (a P4Runtime `WriteRequest` is a thousand
    /// small allocations at 200 updates), so that the control thread answers first. Frees it
    /// here when no thread can be started. Control thread.
    pub fn retire(&mut self, garbage: Garbage) {
        // Each item is dropped as it arrives; the thread ends with the control plane.
        let _ = self.reaper.submit(self.background_setup, Box::new(move || drop(garbage)));
    }

    /// Ops held in the change log (bounded; see [`Control::with_log_limit`]).
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// Waits for the change log's fold under way, if any, and installs it (a write installs a
    /// finished one without waiting). For tests and an orderly idle.
    pub fn settle_log(&mut self) {
        if let Some(old) = self.log.settle() {
            self.retire(Box::new(old));
        }
    }

    /// How long to wait for every worker's answer (default 5 s).
    pub fn with_timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }

    /// The shadow replica (every accepted change applied).
    pub fn shadow(&self) -> &Pipeline {
        &self.shadow
    }

    /// The stamps of the last transaction that succeeded ([`crate::writes`]), taken: a front
    /// end that took them after its request ran knows they are its own.
    pub fn take_apply_stamps(&mut self) -> Option<ApplyStamps> {
        self.stamps.take()
    }

    /// The log of where the front ends' writes spent their time (shared; `show writes`).
    pub fn write_log(&self) -> WriteLog {
        self.writes.clone()
    }

    /// Changes accepted since start (ops, over all requests).
    pub fn changes(&self) -> usize {
        self.accepted
    }

    /// Runs a request (one command per line) and returns its output. Every line is parsed
    /// first; then the commands run in order, and consecutive changes are applied as one
    /// transaction (every worker switches between two batches). Returns once every worker has
    /// applied the changes.
    ///
    /// # Errors
    /// [`CtlError`]: a bad line (nothing applied), a refused change (nothing of that transaction
    /// applied), or a worker that did not answer.
    pub fn execute(&mut self, request: &str) -> Result<String, CtlError> {
        let lines = parse_request(self.shadow.program(), request)?;
        let mut out = String::new();
        let mut pending: Vec<Line> = Vec::new();
        let mut applied = 0usize;
        for l in lines {
            match l.cmd {
                Command::Change(_) | Command::Session(_) => pending.push(l),
                Command::Show(what) => {
                    applied += self.commit(&mut pending)?;
                    out.push_str(&self.show(what)?);
                }
                Command::Help => {
                    applied += self.commit(&mut pending)?;
                    out.push_str(HELP);
                    out.push('\n');
                }
            }
        }
        applied += self.commit(&mut pending)?;
        if applied > 0 {
            let _ = writeln!(out, "ok: {applied} change(s) applied on {} worker(s)", self.workers.len());
        }
        Ok(out)
    }

    /// Applies `pending` as one transaction: shadow first, then every worker.
    fn commit(&mut self, pending: &mut Vec<Line>) -> Result<usize, CtlError> {
        if pending.is_empty() {
            return Ok(0);
        }
        let lines = std::mem::take(pending);
        // Each op's line, to blame it.
        let mut line_of: Vec<usize> = Vec::with_capacity(lines.len());
        let mut ops: Vec<EntryOp> = Vec::with_capacity(lines.len());
        let mut undo = Vec::new();
        for (k, l) in lines.iter().enumerate() {
            match &l.cmd {
                Command::Change(op) => ops.push(op.clone()),
                Command::Session(cmd) => {
                    let planned = match self.sessions.as_mut() {
                        Some(s) => s.plan(cmd, &mut ops, &mut undo),
                        None => Err("this pipeline has no subscriber sessions (it needs the up_session and down_session tables of pipelines/vbng.toml)".into()),
                    };
                    if let Err(msg) = planned {
                        if let Some(s) = self.sessions.as_mut() {
                            s.undo(undo);
                        }
                        return Err(CtlError::Rejected(EntryError { file: "ctl".into(), line: l.no, col: 0, input: l.text.clone(), msg }));
                    }
                }
                _ => {}
            }
            line_of.resize(ops.len(), k);
        }
        let ops: Arc<[EntryOp]> = ops.into();
        let lines: Vec<Line> = line_of.iter().map(|&k| lines[k].clone()).collect();
        if lines.is_empty() {
            return Ok(0);
        }
        let blame = |k: usize| lines[k.min(lines.len() - 1)].clone();
        match self.transact(ops) {
            Ok(n) => Ok(n),
            Err(Refusal::Op(k, msg)) => {
                if let Some(s) = self.sessions.as_mut() {
                    s.undo(undo);
                }
                let l = blame(k);
                Err(CtlError::Rejected(EntryError { file: "ctl".into(), line: l.no, col: 0, input: l.text, msg }))
            }
            Err(Refusal::Worker { worker, op, msg }) => {
                // The shadow accepted it, so a worker refusing it is a bug: say so loudly.
                let l = blame(op);
                Err(CtlError::Worker {
                    worker,
                    msg: format!("refused line {} ({}) that the control replica accepted: {msg}", l.no, l.text),
                })
            }
            Err(Refusal::Ctl(e)) => Err(e),
        }
    }

    /// Applies `ops` as one transaction, all or nothing: the shadow replica first; when it
    /// accepts every op, one `Apply` to each worker, which switches to the new tables between
    /// two batches (a batch sees the tables entirely before or entirely after the call). Returns
    /// the number of ops applied, once every worker has confirmed. This is the typed surface the
    /// front ends share (the text protocol's changes and P4Runtime's `Write` both end here).
    /// Control thread only.
    ///
    /// # Errors
    /// [`CtlError::Rejected`] when an op is refused (full table, no such key to modify or
    /// delete, a classifier build failure, a table or action the program does not have): its
    /// `line` is the op's 1-based position in `ops`, its `input` the op written as an entry
    /// command, and nothing of `ops` is applied anywhere. [`CtlError::Worker`] when a worker
    /// did not answer.
    pub fn apply(&mut self, ops: &[EntryOp]) -> Result<usize, CtlError> {
        if ops.is_empty() {
            return Ok(0);
        }
        self.apply_shared(ops.into())
    }

    /// [`Control::apply`] with the ops already in the shared slice every worker gets (no copy
    /// of them is made). Control thread only.
    ///
    /// # Errors
    /// As [`Control::apply`].
    pub fn apply_shared(&mut self, ops: Arc<[EntryOp]>) -> Result<usize, CtlError> {
        if ops.is_empty() {
            return Ok(0);
        }
        let result = self.transact(ops.clone());
        let what = |k: usize| ops.get(k).map_or_else(String::new, |op| op_text(self.shadow.program(), op));
        match result {
            Ok(n) => Ok(n),
            Err(Refusal::Op(k, msg)) => {
                Err(CtlError::Rejected(EntryError { file: "apply".into(), line: k + 1, col: 0, input: what(k), msg }))
            }
            Err(Refusal::Worker { worker, op, msg }) => Err(CtlError::Worker {
                worker,
                msg: format!("refused op {} ({}) that the control replica accepted: {msg}", op + 1, what(op)),
            }),
            Err(Refusal::Ctl(e)) => Err(e),
        }
    }

    /// The entries of table `table` (index into the program's tables), sorted by priority and
    /// key, as every worker holds them (read from the shadow replica): all of them, or only the
    /// one whose key is `key`. Control thread only.
    ///
    /// # Errors
    /// [`CtlError::Protocol`] naming the table index when the program has no such table.
    pub fn read(&self, table: usize, key: Option<&[Match]>) -> Result<Vec<EntryView>, CtlError> {
        let Some(def) = self.shadow.program().tables.get(table) else {
            return Err(CtlError::Protocol(format!(
                "no table with index {table} (the program has {})",
                self.shadow.program().tables.len()
            )));
        };
        let mut all = self.shadow.table_entries(table).unwrap_or_default();
        if let Some(k) = key {
            if k.len() != def.key.len() {
                return Err(CtlError::Protocol(format!("table \"{}\" has {} key field(s), {} given", def.name, def.key.len(), k.len())));
            }
            all.retain(|e| e.key == k);
        }
        Ok(all)
    }

    /// Every table of the program: name, engine, entries now and capacity, in program order.
    pub fn tables(&self) -> Vec<TableInfo> {
        let prog = self.shadow.program();
        prog.tables
            .iter()
            .enumerate()
            .map(|(i, t)| TableInfo { index: i, name: t.name.clone(), imp: t.imp, entries: self.shadow.table_len(i), size: t.size })
            .collect()
    }

    /// The compiled program every replica runs (tables with their key fields, match kinds and
    /// widths; actions and their parameters; meters; counters): what a front end describes to
    /// its clients (P4Runtime's P4Info).
    pub fn pipeline_info(&self) -> &Program {
        self.shadow.program()
    }

    /// The rates meter `index` of array `bank` is configured with, `None` while unconfigured
    /// (it passes everything green). Read from the shadow replica.
    ///
    /// # Errors
    /// [`CtlError::Protocol`] when there is no such array or index.
    pub fn meter(&self, bank: usize, index: usize) -> Result<Option<MeterRates>, CtlError> {
        let b = self.shadow.objects().meters.get(bank).ok_or_else(|| CtlError::Protocol(format!("no meter array with index {bank}")))?;
        let m = b
            .meters
            .get(index)
            .ok_or_else(|| CtlError::Protocol(format!("meter index {index} out of range (\"{}\" has {})", b.name, b.meters.len())))?;
        Ok(match m {
            Meter::Unset => None,
            Meter::Sr(s) => {
                let c = s.config();
                Some(MeterRates {
                    cir_bytes_per_s: c.cir_bytes_per_s,
                    cbs_bytes: c.cbs_bytes,
                    ebs_or_pbs_bytes: c.ebs_bytes,
                    pir_bytes_per_s: 0,
                })
            }
            Meter::Tr(t) => {
                let c = t.config();
                Some(MeterRates {
                    cir_bytes_per_s: c.cir_bytes_per_s,
                    cbs_bytes: c.cbs_bytes,
                    ebs_or_pbs_bytes: c.pbs_bytes,
                    pir_bytes_per_s: c.pir_bytes_per_s,
                })
            }
        })
    }

    /// Workers this control plane drives.
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// The transaction behind [`Control::apply`] and the text protocol's changes.
    fn transact(&mut self, ops: Arc<[EntryOp]>) -> Result<usize, Refusal> {
        let start = Instant::now();
        self.stamps = None;
        if let Err((k, msg)) = self.shadow.apply_ops(&ops) {
            let dirty_classifier =
                ops.iter().filter_map(EntryOp::table).any(|t| self.shadow.program().tables.get(t).is_some_and(|d| d.imp == TableImpl::Acl));
            if k > 0 || dirty_classifier {
                self.restore_shadow().map_err(Refusal::Ctl)?;
            }
            return Err(Refusal::Op(k.min(ops.len().saturating_sub(1)), msg));
        }
        self.accepted += ops.len();
        if let Some(old) = self.log.push(ops.clone(), self.background_setup) {
            self.retire(Box::new(old));
        }
        // Classifiers are committed once, here (the last full build plus the changes since);
        // workers adopt the result, and with it any full build finished in the background.
        let mut prebuilt = self.shadow.built_classifiers(&ops);
        self.finish_folds(&mut prebuilt);
        let prebuilt: Arc<[_]> = prebuilt.into();
        let seq = self.next_seq();
        let shadowed = Instant::now();
        let replies =
            self.broadcast_timed(std::iter::repeat_with(|| ToWorker::Apply { seq, ops: ops.clone(), prebuilt: prebuilt.clone() }), seq);
        let replied = Instant::now();
        self.start_folds();
        let (replies, posted) = replies.map_err(Refusal::Ctl)?;
        let (mut picked, mut applied) = (posted, posted);
        for r in replies {
            match r {
                (worker, FromWorker::Applied { result: Err((op, msg)), .. }) => return Err(Refusal::Worker { worker, op, msg }),
                (_, FromWorker::Applied { picked: p, applied: a, .. }) => {
                    picked = picked.max(p);
                    applied = applied.max(a);
                }
                _ => {}
            }
        }
        self.stamps = Some(ApplyStamps { start, shadowed, posted, picked, applied, replied, returned: Instant::now() });
        Ok(ops.len())
    }

    /// Installs the full classifier builds that finished in the background into the shadow
    /// (the changes made while they ran go on top) and adds what they publish to `prebuilt`,
    /// in place of the table's incremental commit. Costs the changes made during the build.
    fn finish_folds(&mut self, prebuilt: &mut Vec<(usize, BuiltClassifier)>) {
        let mut k = 0;
        while k < self.folds.len() {
            if !self.folds[k].1.is_finished() {
                k += 1;
                continue;
            }
            let (t, h) = self.folds.swap_remove(k);
            // A build that panicked is a bug in the classifier; the table keeps its delta and
            // its rebuild bound.
            let Some(f) = h.join() else { continue };
            if let Some(b) = self.shadow.finish_fold(t, f) {
                prebuilt.retain(|(u, _)| *u != t);
                prebuilt.push((t, b));
            }
        }
    }

    /// Hands the classifier tables whose changes outgrew their bound to background threads
    /// for a full build (one per table at a time). No write waits for one: a finished build
    /// is published with the next write (`finish_folds`); until then the delta answers.
    fn start_folds(&mut self) {
        for (t, job) in self.shadow.fold_jobs() {
            let spawned = self.builder.run(self.background_setup, move || job.run());
            // No thread: the table keeps its delta until a commit past the rebuild bound
            // builds in full.
            if let Ok(h) = spawned {
                self.folds.push((t, h));
            }
        }
    }

    /// Waits for the background classifier builds under way and publishes them to every
    /// worker; returns how many tables changed. For tests and an orderly idle (a finished
    /// build is otherwise published with the next write).
    ///
    /// # Errors
    /// A worker that did not answer.
    pub fn settle_folds(&mut self) -> Result<usize, CtlError> {
        self.wait_folds();
        let mut prebuilt: Vec<(usize, BuiltClassifier)> = Vec::new();
        self.finish_folds(&mut prebuilt);
        if prebuilt.is_empty() {
            return Ok(0);
        }
        let n = prebuilt.len();
        let prebuilt: Arc<[_]> = prebuilt.into();
        let seq = self.next_seq();
        for r in
            self.broadcast(std::iter::repeat_with(|| ToWorker::Apply { seq, ops: Arc::from(Vec::new()), prebuilt: prebuilt.clone() }), seq)?
        {
            if let (worker, FromWorker::Applied { result: Err((_, msg)), .. }) = r {
                return Err(CtlError::Worker { worker, msg: format!("refused a classifier build: {msg}") });
            }
        }
        Ok(n)
    }

    /// Waits until every background build under way has finished, without installing them.
    fn wait_folds(&mut self) {
        for (_, h) in &mut self.folds {
            while !h.is_finished() {
                std::thread::yield_now();
            }
        }
    }

    /// Replaces the running pipeline (a new spec): `build` makes the new control replica and
    /// one instance per worker, all here on the control thread, and then each worker switches
    /// to its own between two batches. Packets the old pipeline's traffic manager still holds
    /// leave through it first; the call returns once every worker has switched and drained.
    /// The new pipeline starts with what `build` loads (the change log starts again, and
    /// later restores of the replica use `build`). Counters start from zero.
    ///
    /// # Errors
    /// `build` failed (nothing changed), or a worker did not switch (it stopped, timed out,
    /// or was still draining an earlier reload): the workers that answered run the new
    /// pipeline, and the error names the first that did not.
    pub fn reload(&mut self, mut build: Rebuild<'a>) -> Result<(), CtlError> {
        let shadow = build().map_err(CtlError::Reload)?;
        let mut fresh = Vec::with_capacity(self.workers.len());
        for _ in 0..self.workers.len() {
            fresh.push(Box::new(build().map_err(CtlError::Reload)?));
        }
        let seq = self.next_seq();
        let replies = self.broadcast(fresh.into_iter().map(|pipe| ToWorker::Replace { seq, pipe }), seq);
        // From here the workers that answered run the new pipeline: so does the control plane.
        // Classifier builds under way belong to the old one: left to finish, their results
        // dropped.
        self.folds.clear();
        self.shadow = shadow;
        self.rebuild = build;
        // A fold under way covers the old pipeline's log: its thread finishes unobserved.
        self.log = ChangeLog::new(&self.shadow, self.log.compact_at());
        self.sessions = Sessions::new(self.shadow.program()).ok();
        for (worker, r) in replies? {
            if let FromWorker::Replaced { result: Err(_), .. } = r {
                return Err(CtlError::Worker { worker, msg: "is still draining the pipeline of an earlier reload; try again".into() });
            }
        }
        Ok(())
    }

    /// [`Control::reload`] with the pipeline of a spec given as text (`name` is how errors
    /// name it), sized for the data plane's ports, with empty tables.
    ///
    /// # Errors
    /// As [`Control::reload`]; a spec that does not compile is [`CtlError::Reload`] with the
    /// compiler's message (line and column).
    pub fn reload_spec(&mut self, name: &str, text: &str) -> Result<(), CtlError> {
        let prog = fastpath_pipeline::compile(name, text).map_err(|e| CtlError::Reload(e.to_string()))?;
        let ports = self.ports;
        self.reload(Box::new(move || {
            let mut p = prog.instantiate();
            p.set_ports(ports)?;
            Ok(p)
        }))
    }

    fn restore_shadow(&mut self) -> Result<(), CtlError> {
        let mut p = (self.rebuild)()
            .map_err(|msg| CtlError::Worker { worker: usize::MAX, msg: format!("rebuilding the control replica: {msg}") })?;
        self.log.replay(&mut p).map_err(|msg| CtlError::Worker { worker: usize::MAX, msg: format!("replaying the change log: {msg}") })?;
        self.shadow = p;
        // Builds under way belong to the replica replaced: their threads finish unobserved.
        self.folds.clear();
        Ok(())
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Posts one message to each worker (in worker order) and collects every answer to `seq`.
    fn broadcast(&self, msgs: impl IntoIterator<Item = ToWorker>, seq: u64) -> Result<Vec<(usize, FromWorker)>, CtlError> {
        self.broadcast_timed(msgs, seq).map(|r| r.0)
    }

    /// [`Control::broadcast`], and when the last message was posted.
    fn broadcast_timed(&self, msgs: impl IntoIterator<Item = ToWorker>, seq: u64) -> Result<(Vec<(usize, FromWorker)>, Instant), CtlError> {
        let mut posted = Vec::with_capacity(self.workers.len());
        let mut first_err = None;
        for ((w, end), msg) in self.workers.iter().enumerate().zip(msgs) {
            match end.post(msg) {
                Ok(()) => posted.push(w),
                Err(e) => {
                    first_err.get_or_insert((w, e));
                }
            }
        }
        let posted_at = Instant::now();
        let deadline = posted_at + self.timeout;
        let mut out = Vec::with_capacity(posted.len());
        for w in posted {
            match self.workers[w].reply(seq, deadline) {
                Ok(r) => out.push((w, r)),
                Err(e) => {
                    first_err.get_or_insert((w, e));
                }
            }
        }
        match first_err {
            None => Ok((out, posted_at)),
            Some((worker, e)) => Err(CtlError::Worker {
                worker,
                msg: match e {
                    MailError::Gone => "has stopped".into(),
                    MailError::Full => "is not taking control messages (its queue is full)".into(),
                    MailError::Timeout => {
                        format!("did not answer within {:?} (a change stays queued and is applied at its next poll)", self.timeout)
                    }
                },
            }),
        }
    }

    /// Every worker's counters (one round trip).
    ///
    /// # Errors
    /// A worker that did not answer.
    pub fn snapshots(&mut self) -> Result<Vec<WorkerSnapshot>, CtlError> {
        let seq = self.next_seq();
        let mut v = Vec::with_capacity(self.workers.len());
        for (w, r) in self.broadcast(std::iter::repeat_with(|| ToWorker::Snapshot { seq }), seq)? {
            if let FromWorker::Snapshot { mut snap, .. } = r {
                snap.worker = w;
                snap.totals.worker = w;
                v.push(*snap);
            }
        }
        Ok(v)
    }

    /// Counters summed over workers.
    ///
    /// # Errors
    /// A worker that did not answer.
    pub fn counters(&mut self) -> Result<Counters, CtlError> {
        Ok(Counters::sum(&self.snapshots()?))
    }

    fn show(&mut self, what: Show) -> Result<String, CtlError> {
        let mut o = String::new();
        match what {
            Show::Counters { json: false } => o = self.counters()?.render(),
            Show::Counters { json: true } => {
                o = serde_json::to_string(&self.counters()?).map_err(|e| CtlError::Protocol(e.to_string()))?;
                o.push('\n');
            }
            Show::Tables => {
                let snaps = self.snapshots()?;
                let _ = writeln!(o, "{:<16} {:<8} {:>10} {:>10} {:>14} {:>14}", "table", "engine", "entries", "size", "hits", "misses");
                for (i, t) in self.shadow.program().tables.iter().enumerate() {
                    let len = self.shadow.table(&t.name).map_or(0, |t| t.len());
                    let (h, m) = snaps.iter().filter_map(|s| s.tables.get(i)).fold((0, 0), |(h, m), &(a, b)| (h + a, m + b));
                    let engine = format!("{:?}", t.imp).to_lowercase();
                    let _ = writeln!(o, "{:<16} {:<8} {:>10} {:>10} {:>14} {:>14}", t.name, engine, len, t.size, h, m);
                }
            }
            Show::Meters => {
                let _ = writeln!(o, "{:<16} {:<6} {:>8} {:>11}", "meter", "kind", "size", "configured");
                for b in &self.shadow.objects().meters {
                    let set = b.meters.iter().filter(|m| !matches!(m, fastpath_pipeline::objects::Meter::Unset)).count();
                    let _ =
                        writeln!(o, "{:<16} {:<6} {:>8} {:>11}", b.name, if b.two_rate { "trtcm" } else { "srtcm" }, b.meters.len(), set);
                }
            }
            Show::Conntrack => {
                let snaps = self.snapshots()?;
                let _ = writeln!(o, "{:<16} {:>8} {:>12} {:>12}", "conntrack", "worker", "flows", "capacity");
                for s in &snaps {
                    for (name, len, cap) in &s.conntrack {
                        let _ = writeln!(o, "{name:<16} {:>8} {len:>12} {cap:>12}", s.worker);
                    }
                }
            }
            Show::Queues if !self.shadow.has_tm() => o = "no traffic manager: the spec has no [tm] section\n".into(),
            Show::Queues => o = self.counters()?.render_queues(),
            Show::Plan => o = self.shadow.show_plan(),
            Show::Sessions => o = self.show_sessions(),
            Show::Writes => o = self.writes.render(),
            Show::Session(id) => o = self.show_session(id)?,
            Show::Table { name } => {
                // The control replica holds exactly what every worker holds.
                let lines = self.shadow.entry_lines(&name).unwrap_or_default();
                for l in &lines {
                    let _ = writeln!(o, "{l}");
                }
                let _ = writeln!(o, "# {} entr{} in table \"{name}\"", lines.len(), if lines.len() == 1 { "y" } else { "ies" });
            }
        }
        Ok(o)
    }
}

impl Control<'_> {
    /// The subscriber sessions, when the pipeline has them.
    pub fn sessions(&self) -> Option<&Sessions> {
        self.sessions.as_ref()
    }

    /// Applies session changes as one transaction (the library form of `session …` lines):
    /// all of them on every worker, or none.
    ///
    /// # Errors
    /// As [`Control::execute`]; the line numbers are positions in `cmds`, from 1.
    pub fn apply_sessions(&mut self, cmds: &[SessionCmd]) -> Result<usize, CtlError> {
        let mut pending: Vec<Line> =
            cmds.iter().enumerate().map(|(k, c)| Line { no: k + 1, text: format!("{c:?}"), cmd: Command::Session(c.clone()) }).collect();
        self.commit(&mut pending)
    }

    /// `(packets, bytes)` of entry `index` of counter array `name`, summed over workers.
    ///
    /// # Errors
    /// A worker that did not answer, or no such array.
    pub fn read_counter(&mut self, name: &str, index: usize) -> Result<(u64, u64), CtlError> {
        let Some(bank) = self.shadow.program().counters.iter().position(|c| c.name == name) else {
            return Err(CtlError::Protocol(format!("no counter array \"{name}\"")));
        };
        let seq = self.next_seq();
        let mut sum = (0, 0);
        for (_, r) in self.broadcast(std::iter::repeat_with(|| ToWorker::ReadCounter { seq, bank, index }), seq)? {
            if let FromWorker::Counter { value: (p, b), .. } = r {
                sum = (sum.0 + p, sum.1 + b);
            }
        }
        Ok(sum)
    }

    fn show_sessions(&self) -> String {
        let Some(s) = &self.sessions else { return "no subscriber sessions: the pipeline has no session tables\n".into() };
        let mut tiers: BTreeMap<u16, usize> = BTreeMap::new();
        for x in s.iter() {
            *tiers.entry(x.tier).or_default() += 1;
        }
        let mut o = format!("{} session(s)\n", s.len());
        for (t, n) in tiers {
            let _ = writeln!(o, "  tier {t}: {n}");
        }
        o
    }

    fn show_session(&mut self, id: u32) -> Result<String, CtlError> {
        let Some(x) = self.sessions.as_ref().and_then(|s| s.get(id)).cloned() else {
            return Err(CtlError::Protocol(format!("no session {id}")));
        };
        let up = x.up.map_or("unpoliced".to_string(), |(c, p)| format!("{c}/{p} bit/s"));
        let mut o = format!(
            "session {id}: port {} s-vlan {} c-vlan {} mac {} ip {} tier {} acl {} up {up}\n",
            x.port,
            x.svlan,
            x.cvlan,
            crate::session::mac_text(&x.mac),
            x.ip,
            x.tier,
            x.acl
        );
        for name in ["sub_up", "sub_down"] {
            if self.shadow.program().counters.iter().any(|c| c.name == name) {
                let (p, b) = self.read_counter(name, id as usize)?;
                let _ = writeln!(o, "  {name}: {p} packets, {b} bytes");
            }
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mailbox::{mailbox, WorkerEnd};
    use fastpath_packet::{Batch, Pool, Verdict};
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The port-indexed table with room for 6 of the 8 ports, so it can fill up (the model's
    /// capacity); a miss drops as `no_route`.
    fn pipe() -> Pipeline {
        crate::testutil::port_map(6, "drop(no_route)")
    }

    fn vbng() -> Pipeline {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/vbng.toml")).unwrap();
        let mut p = fastpath_pipeline::compile("vbng.toml", &text).unwrap().instantiate();
        p.set_ports(2).unwrap();
        p
    }

    #[test]
    fn sessions_reach_every_worker_and_a_refused_request_changes_nothing() {
        let add = |i: u32| {
            format!("session add {i} port 0 s-vlan 100 c-vlan {} mac 02:5b:00:00:00:{i:02x} ip 100.64.1.{i} tier 0 up 10mbit", i + 1)
        };
        let ((), lens) = with_workers_of(
            2,
            vbng,
            |p| (p.table("up_session").unwrap().len(), p.table("down_session").unwrap().len()),
            |c| {
                let req: String = (1..=20).map(|i| add(i) + "\n").collect();
                c.execute(&req).unwrap();
                assert_eq!(c.sessions().unwrap().len(), 20);
                // One bad line (a duplicate address) in a request: nothing of it is applied and
                // the sessions are as before.
                let bad = format!("{}\nsession add 30 port 0 s-vlan 100 c-vlan 99 mac 02:5b:00:00:00:99 ip 100.64.1.5 tier 0", add(21));
                let e = c.execute(&bad).unwrap_err().to_string();
                assert!(e.contains("belongs to session 5"), "{e}");
                assert_eq!(c.sessions().unwrap().len(), 20);
                assert!(c.sessions().unwrap().get(21).is_none());
                c.execute("session modify 3 tier 2\nsession del 4").unwrap();
                assert_eq!(c.sessions().unwrap().get(3).unwrap().tier, 2);
                let shown = c.execute("show session 3").unwrap();
                assert!(shown.contains("sub_up: 0 packets"), "{shown}");
                assert!(c.execute("show sessions").unwrap().starts_with("19 session(s)"));
            },
        );
        assert_eq!(lens, [(19, 19), (19, 19)]);
    }

    /// A downstream frame to the subscriber of session `id` (address 100.64.0.0 + 256 + id).
    fn to_session(id: u32) -> Vec<u8> {
        let ip = std::net::Ipv4Addr::from(0x6440_0100 + id);
        fastpath_packet::build::FrameBuilder::eth([2, 0xfa, 0, 0, 0, 1], [2, 0xc0, 0, 0, 0, 1])
            .vlan(10, 0)
            .ipv4(std::net::Ipv4Addr::new(198, 18, 0, 1), ip)
            .udp(9, 9)
            .frame_len(200)
            .build()
    }

    fn session_line(id: u32) -> String {
        let ip = std::net::Ipv4Addr::from(0x6440_0100 + id);
        format!(
            "session add {id} port 0 s-vlan {} c-vlan {} mac 02:5b:00:00:{:02x}:{:02x} ip {ip} tier 0\n",
            100 + id / 4000,
            1 + id % 4000,
            id >> 8 & 0xff,
            id & 0xff
        )
    }

    /// Two workers forward a steady session's traffic while the control plane adds and deletes
    /// thousands of other sessions: not one of its packets is lost, and the session added last
    /// forwards in each worker's first batch after the request returned.
    #[test]
    fn sessions_change_under_traffic_with_no_loss_and_are_live_at_the_next_batch() {
        use std::sync::atomic::AtomicU32;
        let (ends, wends): (Vec<ControlEnd>, Vec<WorkerEnd>) = (0..2).map(|_| mailbox()).unzip();
        let stop = AtomicBool::new(false);
        let newest = AtomicU32::new(0);
        // Set once the steady session (0) is in: workers count its packets from then on.
        let live = AtomicBool::new(false);
        std::thread::scope(|s| {
            let hs: Vec<_> = wends
                .into_iter()
                .map(|mut end| {
                    let (stop, newest, live) = (&stop, &newest, &live);
                    s.spawn(move || {
                        let mut p = vbng();
                        let mut pool = Pool::new(256);
                        let mut b = Batch::new();
                        let (mut steady_sent, mut steady_lost, mut newest_checked) = (0u64, 0u64, 0u64);
                        let mut first_loss = None;
                        // Virtual time, 1 ms a batch: the subscribers' shapers let it all out.
                        let mut now = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            now += 1_000_000;
                            end.poll(&mut p, |_| {});
                            // Read after the poll: a session published here was applied by it.
                            let n = newest.load(Ordering::Acquire);
                            let counting = live.load(Ordering::Acquire);
                            b.clear();
                            for k in 0..16u32 {
                                let h = pool.alloc().unwrap();
                                pool.set_data(h, &to_session(if k == 0 && n > 0 { n } else { 0 }));
                                b.push(h, 1);
                            }
                            p.process(&mut pool, &mut b, now);
                            for i in 0..b.len() {
                                let ok = b.verdict(i) == Verdict::Queued(0);
                                if i == 0 && n > 0 {
                                    assert!(ok, "session {n} not forwarding at the next batch: {:?}", b.verdict(i));
                                    newest_checked += 1;
                                } else if counting {
                                    steady_sent += 1;
                                    if !ok {
                                        steady_lost += 1;
                                        first_loss.get_or_insert(b.verdict(i));
                                    }
                                }
                                if !matches!(b.verdict(i), Verdict::Queued(_)) {
                                    pool.free(b.handle(i));
                                }
                            }
                            while p.egress(0, &mut pool, &mut b, now) > 0 {
                                pool.free_bulk(b.handles());
                            }
                        }
                        (steady_sent, steady_lost, newest_checked, first_loss)
                    })
                })
                .collect();
            let mut c = Control::new(vbng(), Box::new(|| Ok(vbng())), ends);
            c.execute(&session_line(0)).unwrap();
            live.store(true, Ordering::Release);
            for round in 0..10u32 {
                let ids = (1 + round * 500)..(1 + (round + 1) * 500);
                let req: String = ids.clone().map(session_line).collect();
                c.execute(&req).unwrap();
                newest.store(ids.end - 1, Ordering::Release);
                std::thread::sleep(std::time::Duration::from_millis(5));
                if round % 2 == 1 {
                    let del: String = ids.map(|i| format!("session del {i}\n")).collect();
                    newest.store(0, Ordering::Release);
                    c.execute(&del).unwrap();
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            stop.store(true, Ordering::Relaxed);
            for h in hs {
                let (sent, lost, checked, first) = h.join().unwrap();
                assert!(sent > 1000, "the worker forwarded too little to show anything: {sent}");
                assert_eq!(lost, 0, "{lost} of {sent} packets of the steady session lost while sessions changed (first: {first:?})");
                assert!(checked > 0, "no batch checked a newly added session");
            }
        });
    }

    /// Verdicts of one packet from each of ports 0..8.
    fn verdicts(p: &mut Pipeline) -> Vec<Verdict> {
        let mut pool = Pool::new(16);
        let mut b = Batch::new();
        for port in 0..8u16 {
            let h = pool.alloc().unwrap();
            pool.set_data(h, &[0u8; 60]);
            b.push(h, port);
        }
        p.process(&mut pool, &mut b, 0);
        (0..8).map(|i| b.verdict(i)).collect()
    }

    /// Runs `f` with a control plane over `n` worker threads that poll their mailboxes; returns
    /// what `f` returns and each worker's final verdicts.
    fn with_workers<R>(n: usize, f: impl FnOnce(&mut Control<'_>) -> R) -> (R, Vec<Vec<Verdict>>) {
        with_workers_of(n, pipe, verdicts, f)
    }

    /// [`with_workers`] with pipelines from `make`; returns what `fin` reads from each worker's
    /// pipeline after the workers stop.
    fn with_workers_of<R, T: Send>(
        n: usize,
        make: fn() -> Pipeline,
        fin: fn(&mut Pipeline) -> T,
        f: impl FnOnce(&mut Control<'_>) -> R,
    ) -> (R, Vec<T>) {
        let (ends, wends): (Vec<ControlEnd>, Vec<WorkerEnd>) = (0..n).map(|_| mailbox()).unzip();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let hs: Vec<_> = wends
                .into_iter()
                .enumerate()
                .map(|(w, mut end)| {
                    let stop = &stop;
                    s.spawn(move || {
                        let mut p = make();
                        while !stop.load(Ordering::Relaxed) {
                            end.poll(&mut p, |snap| snap.totals.rx_pkts = 100 + w as u64);
                            std::thread::yield_now();
                        }
                        fin(&mut p)
                    })
                })
                .collect();
            /// Stops the workers also when `f` panics (a failing assertion), so the scope ends.
            struct StopOnDrop<'s>(&'s AtomicBool);
            impl Drop for StopOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
            let guard = StopOnDrop(&stop);
            // A tiny log limit, so that every test also runs on compacted logs.
            let mut c = Control::new(make(), Box::new(move || Ok(make())), ends).with_log_limit(2);
            let r = f(&mut c);
            drop(guard);
            (r, hs.into_iter().map(|h| h.join().unwrap()).collect())
        })
    }

    /// A reload puts the new pipeline on every worker and in the replica, with a fresh change
    /// log; a pipeline that does not build changes nothing.
    #[test]
    fn a_reload_replaces_every_workers_pipeline_and_a_bad_one_changes_nothing() {
        let ((), finals) = with_workers(2, |c| {
            c.execute("table port_map add 2 => forward(5)").unwrap();
            let bad = crate::testutil::port_map_spec(64, "forward(3)").replace("\"eth\"", "\"eth\", \"ipv9\"");
            let e = c.reload_spec("new.toml", &bad).unwrap_err();
            assert_eq!(e.code(), "reload");
            assert!(e.to_string().contains("new.toml") && e.to_string().contains("ipv9") && e.to_string().contains("unchanged"), "{e}");
            assert_eq!(c.shadow().table("port_map").map(|t| t.len()), Some(1), "a refused reload keeps the entries");
            c.reload_spec("new.toml", &crate::testutil::port_map_spec(64, "forward(3)")).unwrap();
            assert_eq!(c.shadow().table("port_map").map(|t| t.len()), Some(0), "the new pipeline starts empty");
            assert_eq!(c.log_len(), 0);
            c.execute("table port_map add 4 => forward(6)").unwrap();
        });
        for v in finals {
            let want: Vec<Verdict> = (0..8).map(|p| Verdict::Tx(if p == 4 { 6 } else { 3 })).collect();
            assert_eq!(v, want, "every worker runs the reloaded pipeline with the change made after it");
        }
    }

    #[test]
    fn a_change_reaches_every_worker_before_execute_returns() {
        let (out, finals) = with_workers(3, |c| {
            let out = c.execute("table port_map add 2 => forward(5)\ntable port_map add 3 => forward(6)").unwrap();
            assert!(out.contains("ok: 2 change(s) applied on 3 worker(s)"), "{out}");
            let counters = c.execute("show counters json").unwrap();
            assert!(counters.contains("\"rx_pkts\":102"), "{counters}");
            c.execute("show tables").unwrap()
        });
        assert!(out.contains("port_map") && out.contains("direct"), "{out}");
        for v in finals {
            assert_eq!((v[2], v[3], v[4]), (Verdict::Tx(5), Verdict::Tx(6), Verdict::Drop(fastpath_packet::DropReason::NoRoute)));
        }
    }

    /// The typed surface: one `apply` is all or nothing, a refused op is named by its position
    /// and its text, and `read`, `tables` and `pipeline_info` show what every worker holds.
    #[test]
    fn apply_is_all_or_nothing_and_read_shows_the_entries() {
        let (r, finals) = with_workers(2, |c| {
            let prog = c.pipeline_info().clone();
            let op = |t: &str| prog.parse_entry(t).unwrap_or_else(|e| panic!("{t}: {}", e.msg));
            assert_eq!(c.apply(&[op("table port_map add 1 => forward(4)"), op("table port_map add 2 => forward(5)")]).unwrap(), 2);
            // The third op deletes a key that is not there: nothing of the call is applied.
            let e = c
                .apply(&[op("table port_map add 3 => forward(6)"), op("table port_map modify 1 => drop"), op("table port_map del 7")])
                .unwrap_err();
            assert_eq!(e.code(), "rejected");
            let CtlError::Rejected(ee) = &e else { panic!("{e}") };
            assert_eq!((ee.line, ee.input.as_str()), (3, "table port_map del 7"), "{e}");
            assert!(ee.msg.contains("no entry"), "{e}");
            assert_eq!(c.apply(&[]).unwrap(), 0);
            let all = c.read(0, None).unwrap();
            assert_eq!(
                all.iter().map(|e| (e.key.clone(), e.args[0])).collect::<Vec<_>>(),
                [(vec![Match::Exact(1)], 4), (vec![Match::Exact(2)], 5)]
            );
            let one = c.read(0, Some(&[Match::Exact(2)])).unwrap();
            assert_eq!(one.len(), 1);
            assert!(c.read(0, Some(&[Match::Exact(3)])).unwrap().is_empty());
            assert!(c.read(5, None).unwrap_err().to_string().contains("no table with index 5"));
            assert!(c.read(0, Some(&[])).unwrap_err().to_string().contains("1 key field(s), 0 given"));
            let t = c.tables();
            assert_eq!(t, [TableInfo { index: 0, name: "port_map".into(), imp: TableImpl::Direct, entries: 2, size: 6 }]);
            assert_eq!(c.pipeline_info().tables[0].key[0].name, "meta.in_port");
            // The text path goes through the same transaction.
            c.execute("table port_map del 2").unwrap();
            c.read(0, None).unwrap().len()
        });
        assert_eq!(r, 1);
        for v in finals {
            assert_eq!(
                (v[1], v[2], v[3]),
                (Verdict::Tx(4), Verdict::Drop(fastpath_packet::DropReason::NoRoute), Verdict::Drop(fastpath_packet::DropReason::NoRoute))
            );
        }
    }

    #[test]
    fn meters_read_back_their_rates_and_ops_print_as_commands() {
        const METERED: &str = r#"
name = "m"
[parser]
headers = ["eth"]
[[meter]]
name = "pol"
kind = "trtcm"
size = 2
[control]
ingress = "forward 1"
"#;
        let make = || fastpath_pipeline::compile("m.toml", METERED).unwrap_or_else(|e| panic!("{e}")).instantiate();
        let mut c = Control::new(make(), Box::new(move || Ok(make())), Vec::new());
        assert_eq!(c.meter(0, 1).unwrap(), None);
        let op = c.pipeline_info().parse_entry("meter pol 1 cir 1000 cbs 100 pir 2000 pbs 200").unwrap();
        assert_eq!(op_text(c.pipeline_info(), &op), "meter pol 1 cir 1000 cbs 100 pir 2000 pbs 200");
        c.apply(&[op]).unwrap();
        let r = c.meter(0, 1).unwrap().unwrap();
        assert_eq!((r.cir_bytes_per_s, r.cbs_bytes, r.pir_bytes_per_s, r.ebs_or_pbs_bytes), (1000, 100, 2000, 200));
        assert!(c.meter(0, 2).unwrap_err().to_string().contains("out of range"));
        assert!(c.meter(1, 0).is_err());
    }

    #[test]
    fn a_bad_or_refused_request_changes_nothing_anywhere() {
        let ((), finals) = with_workers(2, |c| {
            c.execute("table port_map add 1 => forward(4)").unwrap();
            // One bad line: nothing of the request is applied.
            let e = c.execute("table port_map add 2 => forward(4)\ntable port_mapp add 3 => forward(4)").unwrap_err();
            assert_eq!(e.code(), "bad_command");
            assert!(e.to_string().contains("ctl:2:7: no table \"port_mapp\" (did you mean \"port_map\"?)"), "{e}");
            // Refused part-way (the second delete finds nothing): the first op is undone too.
            let e = c.execute("table port_map del 1\ntable port_map del 1").unwrap_err();
            assert_eq!(e.code(), "rejected");
            assert!(e.to_string().contains("ctl:2: table \"port_map\": no entry with that key"), "{e}");
            assert_eq!(c.shadow().table("port_map").unwrap().len(), 1);
            assert_eq!(c.changes(), 1);
        });
        for v in finals {
            assert_eq!(
                (v[1], v[2], v[3]),
                (Verdict::Tx(4), Verdict::Drop(fastpath_packet::DropReason::NoRoute), Verdict::Drop(fastpath_packet::DropReason::NoRoute))
            );
        }
    }

    /// A pipeline of one two-field classifier table `acl` of `size` entries.
    fn two_field_acl(size: usize) -> Pipeline {
        let spec = format!(
            r#"
name = "a"
[parser]
headers = ["eth", "ipv4"]
[[table]]
name = "acl"
key = [{{ field = "ipv4.src", match = "ternary" }}, {{ field = "ipv4.dst", match = "ternary" }}]
actions = ["forward", "drop"]
size = {size}
default = "drop"
[control]
ingress = "apply acl"
"#
        );
        fastpath_pipeline::compile("a.toml", &spec).unwrap_or_else(|e| panic!("{e}")).instantiate()
    }

    /// A classifier change is built once, on the control thread: every worker ends up with
    /// the control replica's classifier itself (the same allocation), not a rebuild of its own.
    #[test]
    fn workers_adopt_the_classifier_the_control_thread_built() {
        let acl = || two_field_acl(16);
        let (ours, theirs) = with_workers_of(
            2,
            acl,
            |p| p.table("acl").unwrap().built_classifier(),
            |c| {
                c.execute("table acl add 10.0.0.0/8 * priority 1 => forward(1)\ntable acl add * 192.0.2.0/24 priority 2 => forward(2)")
                    .unwrap();
                c.shadow().table("acl").unwrap().built_classifier().expect("built")
            },
        );
        for t in theirs {
            assert!(Arc::ptr_eq(&ours.acl, &t.expect("adopted").acl), "a worker rebuilt the classifier instead of adopting it");
        }
    }

    /// What the control thread retires is freed on the reaper thread, after the background
    /// setup ran there, in the order retired; never on the caller's thread.
    #[test]
    fn retired_garbage_is_freed_on_the_reaper_thread() {
        struct Noted(u32, std::sync::mpsc::Sender<(u32, Option<String>)>);
        impl Drop for Noted {
            fn drop(&mut self) {
                let _ = self.1.send((self.0, std::thread::current().name().map(str::to_string)));
            }
        }
        static SETUPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let pipe = || two_field_acl(16);
        let mut c = Control::new(pipe(), Box::new(move || Ok(pipe())), Vec::new());
        c.set_background_setup(|| {
            SETUPS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        let (tx, rx) = std::sync::mpsc::channel();
        for k in 0..3 {
            c.retire(Box::new(Noted(k, tx.clone())));
        }
        let freed: Vec<(u32, Option<String>)> = (0..3).map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap()).collect();
        assert_eq!(freed, (0..3).map(|k| (k, Some("fp-reaper".to_string()))).collect::<Vec<_>>());
        assert_eq!(SETUPS.load(std::sync::atomic::Ordering::SeqCst), 1, "one reaper thread, set up once");
    }

    /// Classifier writes commit as a delta; once it outgrows its bound a full build runs on a
    /// thread of its own, and is published to every worker with a later write (or by
    /// `settle_folds`): afterwards the workers read the control replica's classifier, with no
    /// delta left.
    #[test]
    fn full_classifier_builds_run_in_the_background_and_reach_every_worker() {
        fn add(i: u32) -> String {
            format!("table acl add 10.{}.{}.0/24 * priority {} => forward({})\n", i / 256, i % 256, i % 5, i % 7)
        }
        fn acl() -> Pipeline {
            let mut p = two_field_acl(4096);
            p.load_entries("base", &(0..300).map(add).collect::<String>()).unwrap();
            p
        }
        let (ours, theirs) = with_workers_of(
            2,
            acl,
            |p| p.table("acl").unwrap().built_classifier(),
            |c| {
                static SETUPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                c.set_background_setup(|| {
                    SETUPS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                });
                assert!(!c.shadow().table("acl").unwrap().built_classifier().unwrap().acl.has_delta(), "a bulk load builds in full");
                let mut next = 300;
                let delta = |c: &Control<'_>| {
                    let st = c.shadow().table("acl").unwrap().built_classifier().unwrap().acl.stats();
                    st.added + st.deleted
                };
                let mut settled = 0;
                for round in 0..20u32 {
                    let mut req = String::new();
                    for _ in 0..10 {
                        req.push_str(&add(next));
                        next += 1;
                    }
                    for k in 0..5 {
                        let i = round * 5 + k;
                        req.push_str(&format!("table acl del 10.{}.{}.0/24 *\n", i / 256, i % 256));
                    }
                    c.execute(&req).unwrap();
                    assert!(delta(c) > 0, "round {round}: a write commits as a delta");
                    match round {
                        // 75 changes: past the fold bound of 64, so a build is under way.
                        4 => c.wait_folds(),
                        // Finished before this write, so published with it: only this write's
                        // 15 changes (10 added, 5 deleted) are left on top.
                        5 => assert_eq!(delta(c), 15),
                        6.. => {
                            let n = c.settle_folds().unwrap();
                            if n > 0 {
                                assert_eq!(delta(c), 0, "round {round}: the fold started after the last write");
                            }
                            settled += n;
                        }
                        _ => {}
                    }
                }
                assert!(settled >= 2, "{settled}");
                let setups = SETUPS.load(std::sync::atomic::Ordering::SeqCst);
                // One build thread for every build, beside the change log's folder and the reaper.
                assert!(
                    (1..=3).contains(&setups),
                    "each background thread runs the setup first, once: {setups} for {settled} builds settled"
                );
                assert_eq!(c.shadow().table_len(0), 300 + 200 - 100);
                c.shadow().table("acl").unwrap().built_classifier().expect("built")
            },
        );
        for t in theirs {
            assert!(Arc::ptr_eq(&ours.acl, &t.expect("adopted").acl), "a worker did not adopt the fold");
        }
    }

    #[test]
    fn show_table_lists_entries_as_commands_that_load_back() {
        let (out, _) = with_workers(1, |c| {
            c.execute("table port_map add 3 => forward(6)\ntable port_map add 2 => forward(5)").unwrap();
            let e = c.execute("show table port_mapp").unwrap_err();
            assert!(e.to_string().contains("no table \"port_mapp\" (did you mean \"port_map\"?)"), "{e}");
            c.execute("show table port_map").unwrap()
        });
        assert_eq!(out, "table port_map add 2 => forward(5)\ntable port_map add 3 => forward(6)\n# 2 entries in table \"port_map\"\n");
        let mut fresh = pipe();
        fresh.load_entries("shown", &out).unwrap();
        assert_eq!(fresh.table("port_map").unwrap().len(), 2);
    }

    /// Churn on one key keeps the change log at the size of what it changed, and a request that
    /// fails part-way afterwards restores the replica from the folded log exactly.
    #[test]
    fn the_change_log_stays_bounded_and_still_restores_the_replica() {
        // Start-up entries (port 7) are what the rebuild starts from: the snapshot must delete them.
        fn with_startup_entry() -> Pipeline {
            let mut p = pipe();
            p.load_entries("startup", "table port_map add 7 => forward(1)").unwrap();
            p
        }
        let (shown, finals) = with_workers_of(2, with_startup_entry, verdicts, |c| {
            c.execute("table port_map add 1 => forward(4)\ntable port_map del 7").unwrap();
            for k in 0..500 {
                c.execute(&format!("table port_map add 2 => forward({})\ntable port_map del 2", k % 7)).unwrap();
                // Folds run on a thread of their own: wait for this one, to check the bound.
                c.settle_log();
                assert!(c.log_len() <= 2 * 3 + 2, "after {k} requests the log holds {} ops", c.log_len());
            }
            assert_eq!(c.changes(), 2 + 1000);
            let before = c.execute("show table port_map").unwrap();
            // Refused at its second op: the replica is rebuilt from the spec and the log.
            let e = c.execute("table port_map add 3 => forward(5)\ntable port_map del 6").unwrap_err();
            assert_eq!(e.code(), "rejected");
            let after = c.execute("show table port_map").unwrap();
            assert_eq!(before, after);
            after
        });
        assert_eq!(shown, "table port_map add 1 => forward(4)\n# 1 entry in table \"port_map\"\n");
        for v in finals {
            assert_eq!(
                (v[1], v[2], v[3], v[7]),
                (
                    Verdict::Tx(4),
                    Verdict::Drop(fastpath_packet::DropReason::NoRoute),
                    Verdict::Drop(fastpath_packet::DropReason::NoRoute),
                    Verdict::Drop(fastpath_packet::DropReason::NoRoute)
                )
            );
        }
    }

    #[test]
    fn a_stopped_worker_is_reported() {
        let (a, wa) = mailbox();
        drop(wa);
        let mut c = Control::new(pipe(), Box::new(|| Ok(pipe())), vec![a]).with_timeout(Duration::from_millis(50));
        let e = c.execute("show counters").unwrap_err();
        assert_eq!(e.to_string(), "worker 0: has stopped");
    }

    #[test]
    fn show_meters_conntrack_and_plan_read_the_replicas() {
        const STATEFUL: &str = r#"
name = "s"
[parser]
headers = ["eth", "ipv4", "udp", "tcp"]
[[meter]]
name = "pol"
kind = "trtcm"
size = 4
[[conntrack]]
name = "flows"
size = 1024
[control]
ingress = '''
conntrack flows
forward 1
'''
"#;
        let build = || fastpath_pipeline::compile("s.toml", STATEFUL).map(|p| p.instantiate()).map_err(|e| e.to_string());
        let (end, mut w) = mailbox();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut p = build().unwrap();
                while !stop.load(Ordering::Relaxed) {
                    w.poll(&mut p, |_| {});
                    std::thread::yield_now();
                }
            });
            let mut c = Control::new(build().unwrap(), Box::new(build), vec![end]);
            let r = c.execute("meter pol 2 cir 1000 cbs 100 pir 2000 pbs 200\nshow meters\nshow conntrack\nshow plan");
            stop.store(true, Ordering::Relaxed);
            let out = r.unwrap();
            let meter = out.lines().find(|l| l.starts_with("pol ")).unwrap_or_else(|| panic!("{out}"));
            assert_eq!(meter.split_whitespace().collect::<Vec<_>>(), vec!["pol", "trtcm", "4", "1"], "{out}");
            let ct = out.lines().find(|l| l.starts_with("flows ")).unwrap_or_else(|| panic!("{out}"));
            assert_eq!(ct.split_whitespace().take(3).collect::<Vec<_>>(), vec!["flows", "0", "0"], "{out}");
            assert!(out.contains("ok: 1 change(s) applied on 1 worker(s)"), "{out}");
            assert!(out.contains("conntrack"), "show plan lists the conntrack stage: {out}");
        });
    }

    #[test]
    fn show_queues_sums_the_workers_traffic_managers() {
        const TM: &str = r#"
name = "q"
[parser]
headers = ["eth", "ipv4"]
[control]
ingress = "forward 1"
[tm]
buffer_pkts = 4
"#;
        let build = || fastpath_pipeline::compile("q.toml", TM).map(|p| p.instantiate()).map_err(|e| e.to_string());
        let (ends, wends): (Vec<ControlEnd>, Vec<WorkerEnd>) = (0..2).map(|_| mailbox()).unzip();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            for mut w in wends {
                let stop = &stop;
                s.spawn(move || {
                    // Six 60-byte frames into a 4-descriptor buffer: 4 queued, 2 refused.
                    let mut p = build().unwrap();
                    p.set_ports(2).unwrap();
                    let mut pool = Pool::new(16);
                    let mut b = Batch::new();
                    for _ in 0..6 {
                        let h = pool.alloc().unwrap();
                        pool.set_data(h, &[0u8; 60]);
                        b.push(h, 0);
                    }
                    p.process(&mut pool, &mut b, 0);
                    while !stop.load(Ordering::Relaxed) {
                        w.poll(&mut p, |_| {});
                        std::thread::yield_now();
                    }
                });
            }
            let mut c = Control::new(build().unwrap(), Box::new(build), ends);
            let r = c.execute("show queues");
            stop.store(true, Ordering::Relaxed);
            let out = r.unwrap();
            let row = out.lines().find(|l| l.starts_with("1 ")).unwrap_or_else(|| panic!("{out}"));
            let cols: Vec<&str> = row.split_whitespace().collect();
            // port, class, enq_pkts, enq_bytes, deq_pkts, deq_bytes, drops, ecn, occ_pkts, ...
            assert_eq!((cols[1], cols[2], cols[3], cols[6], cols[8]), ("0", "8", "480", "4", "8"), "{out}");
            assert!(out.contains("port 1 class 0/tm_buffer_full: 4"), "{out}");
        });
        let mut plain = Control::new(pipe(), Box::new(|| Ok(pipe())), Vec::new());
        assert!(plain.execute("show queues").unwrap().contains("no traffic manager"));
    }

    /// An exact table and a two-field classifier, both small enough to fill up, and two
    /// meters: what the change-log property test changes.
    fn exact_acl_meters() -> Pipeline {
        const SPEC: &str = r#"
name = "xa"
[parser]
headers = ["eth", "ipv4"]
[[meter]]
name = "pol"
kind = "srtcm"
size = 2
[[table]]
name = "ex"
key = [{ field = "ipv4.dst", match = "exact" }]
actions = ["forward", "drop"]
size = 5
default = "drop"
[[table]]
name = "acl"
key = [{ field = "ipv4.src", match = "ternary" }, { field = "ipv4.dst", match = "ternary" }]
actions = ["forward", "drop"]
size = 5
default = "drop"
[control]
ingress = '''
apply ex
apply acl
'''
"#;
        let mut p = fastpath_pipeline::compile("xa.toml", SPEC).unwrap_or_else(|e| panic!("{e}")).instantiate();
        // Start-up entries: the replay starts from them, so deleting one must survive a fold.
        p.load_entries(
            "startup",
            "table ex add 10.0.0.1 => forward(1)\ntable ex add 10.0.0.2 => forward(2)\ntable acl add 10.0.0.1 * priority 2 => forward(3)",
        )
        .unwrap();
        p
    }

    /// One change to [`exact_acl_meters`], as a ctl line. Classifier keys come in several
    /// spellings of one table key (`10.0.0.1`, `10.0.0.1/32`, `10.0.0.1..10.0.0.1`), so that
    /// the log's alias classes are exercised.
    fn xa_change() -> impl Strategy<Value = String> {
        let acl_src = prop_oneof![
            Just("10.0.0.1"),
            Just("10.0.0.1/32"),
            Just("10.0.0.1..10.0.0.1"),
            Just("10.0.0.0/24"),
            Just("10.0.0.0&&&0xffffff00"),
            Just("*"),
        ];
        let acl_key = (acl_src, prop_oneof![Just("*"), Just("192.0.2.1")]).prop_map(|(s, d)| format!("{s} {d}"));
        prop_oneof![
            4 => (1u8..9, 0u8..4).prop_map(|(k, p)| format!("table ex add 10.0.0.{k} => forward({p})")),
            2 => (1u8..9, 0u8..4).prop_map(|(k, p)| format!("table ex modify 10.0.0.{k} => forward({p})")),
            3 => (1u8..9).prop_map(|k| format!("table ex del 10.0.0.{k}")),
            1 => Just("table ex clear".to_string()),
            4 => (acl_key.clone(), 1u8..4, 0u8..4).prop_map(|(k, pr, p)| format!("table acl add {k} priority {pr} => forward({p})")),
            1 => (acl_key.clone(), 1u8..4, 0u8..4).prop_map(|(k, pr, p)| format!("table acl modify {k} priority {pr} => forward({p})")),
            3 => acl_key.prop_map(|k| format!("table acl del {k}")),
            1 => Just("table acl clear".to_string()),
            2 => (0u8..2, 1u32..1000).prop_map(|(m, cir)| format!("meter pol {m} cir {cir} cbs 100 ebs 100")),
        ]
    }

    /// What a restore must give back: every table's entries and every meter's rates.
    fn xa_state(c: &Control<'_>) -> (Vec<Vec<EntryView>>, Vec<Option<MeterRates>>) {
        let tables = (0..2).map(|t| c.shadow().table_entries(t).unwrap()).collect();
        (tables, (0..2).map(|m| c.meter(0, m).unwrap()).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random requests against a log folded at random points (a fold waited for after
        /// some requests; the others finish whenever their thread does): every request
        /// refused part-way restores the replica from the log to exactly what it was (every
        /// table's entries, every meter), and so does a forced part-way failure at the end;
        /// afterwards a worker still holds what the replica holds.
        #[test]
        fn a_restore_from_the_folded_log_gives_the_replica_back_exactly(
            reqs in prop::collection::vec((prop::collection::vec(xa_change(), 1..4), any::<bool>()), 1..40),
        ) {
            let ((ours, restores), theirs) = with_workers_of(
                2,
                exact_acl_meters,
                |p| (0..2).map(|t| p.table_entries(t).unwrap()).collect::<Vec<_>>(),
                |c| {
                    let mut restores = 0;
                    for (req, settle) in &reqs {
                        let before = xa_state(c);
                        if c.execute(&req.join("\n")).is_err() {
                            assert_eq!(xa_state(c), before, "a refused request changed the replica: {req:?}");
                            restores += 1;
                        }
                        if *settle {
                            c.settle_log();
                        }
                    }
                    // Refused at its second op, after the first changed a meter: a restore.
                    let before = xa_state(c);
                    let e = c.execute("meter pol 0 cir 7 cbs 7 ebs 7\ntable ex del 10.0.0.250").unwrap_err();
                    assert_eq!(e.code(), "rejected");
                    assert_eq!(xa_state(c), before, "the forced failure's restore differs");
                    // One more change reaches the workers, then they stop.
                    c.execute("meter pol 1 cir 9 cbs 9 ebs 9").unwrap();
                    ((0..2).map(|t| c.shadow().table_entries(t).unwrap()).collect::<Vec<_>>(), restores)
                },
            );
            for t in theirs {
                prop_assert_eq!(&t, &ours, "a worker disagrees with the restored replica ({} restores)", restores);
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(u16, u16),
        Modify(u16, u16),
        Del(u16),
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u16..8, 0u16..4).prop_map(|(k, p)| Op::Add(k, p)),
            2 => (0u16..8, 0u16..4).prop_map(|(k, p)| Op::Modify(k, p)),
            3 => (0u16..8).prop_map(Op::Del),
            1 => Just(Op::Clear),
        ]
    }

    fn text(o: &Op) -> String {
        match o {
            Op::Add(k, p) => format!("table port_map add {k} => forward({p})"),
            Op::Modify(k, p) => format!("table port_map modify {k} => forward({p})"),
            Op::Del(k) => format!("table port_map del {k}"),
            Op::Clear => "table port_map clear".into(),
        }
    }

    /// The naive twin: a map, capacity 6; a request applies all or nothing.
    fn model(m: &BTreeMap<u16, u16>, req: &[Op]) -> Option<BTreeMap<u16, u16>> {
        let mut m = m.clone();
        for o in req {
            match *o {
                Op::Add(k, p) => {
                    if !m.contains_key(&k) && m.len() >= 6 {
                        return None;
                    }
                    m.insert(k, p);
                }
                Op::Modify(k, p) => *m.get_mut(&k)? = p,
                Op::Del(k) => {
                    m.remove(&k)?;
                }
                Op::Clear => m.clear(),
            }
        }
        Some(m)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Random requests of 1–4 changes against two workers: each request is accepted exactly
        /// when the naive model accepts it, and afterwards every worker forwards exactly as the
        /// model says (refused requests change nothing).
        #[test]
        fn workers_follow_the_naive_model(reqs in prop::collection::vec(prop::collection::vec(op(), 1..5), 1..12)) {
            let (model_final, finals) = with_workers(2, |c| {
                let mut m = BTreeMap::new();
                for req in &reqs {
                    let body: Vec<String> = req.iter().map(text).collect();
                    let got = c.execute(&body.join("\n"));
                    match model(&m, req) {
                        Some(next) => {
                            assert!(got.is_ok(), "{body:?}: {got:?}");
                            m = next;
                        }
                        None => assert_eq!(got.map_err(|e| e.code().to_string()).unwrap_err(), "rejected", "{body:?}"),
                    }
                    assert_eq!(c.shadow().table("port_map").unwrap().len(), m.len());
                }
                m
            });
            let want: Vec<Verdict> = (0..8u16).map(|k| model_final.get(&k).map_or(Verdict::Drop(fastpath_packet::DropReason::NoRoute), |&p| Verdict::Tx(p))).collect();
            for v in finals {
                prop_assert_eq!(&v, &want);
            }
        }
    }
}
