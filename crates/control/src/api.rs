//! The control commands, parsed once on the control thread, and the control API's errors.
//!
//! A request is text, one command per line (`#` comments and blank lines are skipped):
//!
//! ```text
//! table fib4 add 198.18.0.0/15 => nexthop(1, 02:00:00:00:00:02, 02:00:00:00:00:01)
//! table fib4 modify 198.18.0.0/15 => drop
//! table fib4 del 198.18.0.0/15          # or delete; the key must exist
//! table fib4 clear
//! meter policer 7 cir 1250000 cbs 15000 ebs 15000
//! show tables | table NAME | counters [json] | meters | conntrack | queues | plan | writes
//! help
//! ```
//! Changes use the entries-file grammar (`fastpath_pipeline::entries`) and are checked against
//! the compiled spec's table schemas. Every line of a request is parsed before anything is
//! applied, so one bad line rejects the whole request and changes nothing.

use crate::session::{parse_session, SessionCmd};
use fastpath_pipeline::entries::{EntryError, EntryOp};
use fastpath_pipeline::spec::suggest;
use fastpath_pipeline::Program;

/// What a `show` command shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Show {
    /// Tables: name, engine, entries, size, hits and misses (summed over workers).
    Tables,
    /// Counters per worker, per port and per stage with drop reasons (summed over workers).
    Counters {
        /// As one JSON object instead of text.
        json: bool,
    },
    /// Meter arrays: kind, size, how many are configured.
    Meters,
    /// Conntrack tables: live flows per worker and capacity.
    Conntrack,
    /// The traffic manager's queues: per port and class, what entered, left, was refused (by
    /// reason) and is queued, with the high watermark (summed over workers).
    Queues,
    /// The compiled plan.
    Plan,
    /// Every entry of one table, as entry commands that load back as an entries file.
    Table {
        /// Table name (checked against the spec when parsed).
        name: String,
    },
    /// Subscriber sessions: how many, per tier.
    Sessions,
    /// One session and its counters (summed over workers).
    Session(u32),
    /// Where the time of the last writes went, per stage ([`crate::writes`]).
    Writes,
}

/// One parsed command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// A table or meter change.
    Change(EntryOp),
    /// A subscriber-session change (see [`crate::session`]).
    Session(SessionCmd),
    /// A read.
    Show(Show),
    /// The command summary.
    Help,
}

/// A command with where it came from in the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// 1-based line in the request.
    pub no: usize,
    /// The command text (comment stripped).
    pub text: String,
    /// The parsed command.
    pub cmd: Command,
}

/// The command summary `help` prints.
pub const HELP: &str = "\
table T add KEY… [priority P] => ACTION(ARGS)   add or replace an entry
table T modify KEY… [priority P] => ACTION(ARGS) change an existing entry's action
table T del KEY…                                 delete an existing entry (also: delete)
table T clear                                    delete every entry
meter M I cir R cbs B (ebs B | pir R pbs B)      configure meter I of array M (bytes/s, bytes)
tm pipe PORT PIPE profile N                      give an HQoS pipe (subscriber) profile (tier) N
session add ID port P s-vlan S c-vlan C mac M ip A tier T [acl K] [up CIR[/PIR]]
session modify ID [tier T] [acl K] [up CIR[/PIR]|none]
session del ID                                   subscriber sessions (pipelines/vbng.toml)
show tables | counters [json] | meters | conntrack | queues | plan | sessions | session ID
show writes                                      where the last writes' time went, per stage
show table T                                     T's entries, as commands that load back
help
Changes in one request are applied together: every worker switches between two batches.";

/// Errors of the control API. Each has a stable code ([`CtlError::code`]) that the socket
/// protocol carries, and echoes the input it rejected.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// One or more lines of the request do not parse or do not fit the spec.
    #[error("{}", join(.0))]
    BadCommand(Vec<EntryError>),
    /// A change parsed, but the table or meter refused it (full, no such key, classifier
    /// build); nothing of the request was applied.
    #[error("{0}\n(nothing of this request was applied)")]
    Rejected(EntryError),
    /// A worker did not confirm or has stopped.
    #[error("worker {worker}: {msg}")]
    Worker {
        /// Worker index.
        worker: usize,
        /// What happened.
        msg: String,
    },
    /// A pipeline reload was refused: the new spec does not compile or fit (nothing changed).
    #[error("the new pipeline: {0}\n(the running pipeline is unchanged)")]
    Reload(String),
    /// Nothing listens on the control socket.
    #[error("{0}")]
    NotListening(String),
    /// The socket conversation failed or was malformed.
    #[error("control socket: {0}")]
    Protocol(String),
    /// An error the server reported (client side).
    #[error("{msg}")]
    Remote {
        /// The server's code.
        code: String,
        /// The server's message.
        msg: String,
    },
}

fn join(v: &[EntryError]) -> String {
    v.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}

impl CtlError {
    /// The stable code: `bad_command`, `rejected`, `reload`, `worker`, `not_listening`, `protocol`, or
    /// the server's code for [`CtlError::Remote`].
    pub fn code(&self) -> &str {
        match self {
            CtlError::BadCommand(_) => "bad_command",
            CtlError::Rejected(_) => "rejected",
            CtlError::Reload(_) => "reload",
            CtlError::Worker { .. } => "worker",
            CtlError::NotListening(_) => "not_listening",
            CtlError::Protocol(_) => "protocol",
            CtlError::Remote { code, .. } => code,
        }
    }
}

fn parse_show<'a>(prog: &Program, words: &[&'a str]) -> Result<Show, (String, &'a str)> {
    const WHAT: [&str; 7] = ["tables", "counters", "meters", "conntrack", "queues", "plan", "writes"];
    let Some(&what) = words.get(1) else {
        return Err(("'show' needs what: tables, table NAME, counters, meters, conntrack, queues, plan or writes".into(), words[0]));
    };
    if let ("session", Some(&id)) = (what, words.get(2)) {
        return id.parse().map(Show::Session).map_err(|_| (format!("session id '{id}' is not a number"), id));
    }
    if let ("table", Some(&name)) = (what, words.get(2)) {
        if let Some(&extra) = words.get(3) {
            return Err((format!("unexpected \"{extra}\""), extra));
        }
        if prog.table_index(name).is_none() {
            let hint =
                suggest(name, prog.tables.iter().map(|t| t.name.as_str())).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
            let known: Vec<&str> = prog.tables.iter().map(|t| t.name.as_str()).collect();
            return Err((format!("no table \"{name}\"{hint} (tables: {})", known.join(", ")), name));
        }
        return Ok(Show::Table { name: name.to_string() });
    }
    let json = match words.get(2) {
        None => false,
        Some(&"json") if what == "counters" => true,
        Some(&extra) => return Err((format!("unexpected \"{extra}\""), extra)),
    };
    Ok(match what {
        "tables" | "table" => Show::Tables,
        "counters" | "counter" | "stats" => Show::Counters { json },
        "meters" | "meter" => Show::Meters,
        "conntrack" | "ct" => Show::Conntrack,
        "queues" | "queue" | "tm" => Show::Queues,
        "plan" => Show::Plan,
        "sessions" => Show::Sessions,
        "writes" => Show::Writes,
        other => {
            let hint = suggest(other, WHAT).map(|s| format!(" (did you mean \"{s}\"?)")).unwrap_or_default();
            return Err((
                format!("cannot show \"{other}\"{hint} (tables, table NAME, counters, meters, conntrack, queues, plan, writes)"),
                other,
            ));
        }
    })
}

/// Parses every line of a request against `prog`. Control thread only.
///
/// # Errors
/// [`CtlError::BadCommand`] with every bad line (file `ctl`, line, column, a suggestion).
pub fn parse_request(prog: &Program, text: &str) -> Result<Vec<Line>, CtlError> {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for (k, raw) in text.lines().enumerate() {
        let t = raw.split('#').next().unwrap_or("").trim();
        if t.is_empty() {
            continue;
        }
        let words: Vec<&str> = t.split_whitespace().collect();
        // An error at word `tok` of the line.
        let blame = |(msg, tok): (String, &str)| {
            let col = (tok.as_ptr() as usize).saturating_sub(t.as_ptr() as usize);
            EntryError { file: "ctl".into(), line: k + 1, col: t[..col.min(t.len())].chars().count() + 1, input: t.to_string(), msg }
        };
        let cmd = match words[0] {
            "show" => parse_show(prog, &words).map(Command::Show).map_err(blame),
            "help" if words.len() == 1 => Ok(Command::Help),
            "table" | "meter" | "tm" => prog.parse_entry(t).map(Command::Change).map_err(|e| e.into_error("ctl", k + 1, t)),
            "session" => parse_session(&words).map(Command::Session).map_err(blame),
            other => {
                let hint = suggest(other, ["table", "meter", "tm", "session", "show", "help"])
                    .map(|s| format!(" (did you mean \"{s}\"?)"))
                    .unwrap_or_default();
                Err(EntryError {
                    file: "ctl".into(),
                    line: k + 1,
                    col: 1,
                    input: t.to_string(),
                    msg: format!("unknown command \"{other}\"{hint} (table, meter, tm, session, show, help)"),
                })
            }
        };
        match cmd {
            Ok(cmd) => out.push(Line { no: k + 1, text: t.to_string(), cmd }),
            Err(e) => bad.push(e),
        }
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(CtlError::BadCommand(bad))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog() -> Program {
        let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/router.toml");
        fastpath_pipeline::compile_file(std::path::Path::new(spec)).unwrap()
    }

    #[test]
    fn a_request_parses_line_by_line_skipping_comments() {
        let p = prog();
        let r =
            parse_request(&p, "# routes\ntable fib4 add 198.18.0.0/15 => drop   # a comment\n\nshow counters json\nshow tables\nhelp\n")
                .unwrap();
        assert_eq!(r.len(), 4);
        assert_eq!(r[0].no, 2);
        assert!(matches!(r[0].cmd, Command::Change(EntryOp::Add(_))));
        assert_eq!(r[1].cmd, Command::Show(Show::Counters { json: true }));
        assert_eq!(r[2].cmd, Command::Show(Show::Tables));
        assert_eq!(r[3].cmd, Command::Help);
        assert_eq!(parse_request(&p, "show writes").unwrap()[0].cmd, Command::Show(Show::Writes));
        let e = parse_request(&p, "show wrtes").unwrap_err().to_string();
        assert!(e.contains("did you mean \"writes\""), "{e}");
    }

    proptest::proptest! {
        /// Any text, including multi-byte characters and stray `=>`, `(`, `/`: an answer, never
        /// a panic (columns are computed from token positions).
        #[test]
        fn parsing_never_panics(text in "[ -~\u{e9}\u{2192}\n]{0,80}", words in proptest::collection::vec(proptest::sample::select(vec!["table", "fib4", "add", "del", "modify", "clear", "=>", "nexthop(", ")", "1,", "10.0.0.0/8", "show", "counters", "meter", "priority", "\u{e9}"]), 0..10)) {
            let p = prog();
            let _ = parse_request(&p, &text);
            let _ = parse_request(&p, &words.join(" "));
        }
    }

    #[test]
    fn every_bad_line_is_reported_with_its_line_column_and_a_suggestion() {
        let p = prog();
        let e =
            parse_request(&p, "table fib4 add 198.18.0.0/15 => drop\nshow countres\ntable fib44 del 10.0.0.0/8\nsho tables\n").unwrap_err();
        assert_eq!(e.code(), "bad_command");
        let CtlError::BadCommand(v) = &e else { panic!("{e}") };
        assert_eq!(v.iter().map(|e| (e.line, e.col)).collect::<Vec<_>>(), vec![(2, 6), (3, 7), (4, 1)]);
        let text = e.to_string();
        assert!(text.contains("ctl:2:6: cannot show \"countres\" (did you mean \"counters\"?)"), "{text}");
        assert!(text.contains("ctl:3:7: no table \"fib44\" (did you mean \"fib4\"?)"), "{text}");
        assert!(text.contains("ctl:4:1: unknown command \"sho\" (did you mean \"show\"?)"), "{text}");
    }
}
