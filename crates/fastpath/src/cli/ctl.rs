//! `fastpath ctl`: talks to a running `fastpath run` over its control socket.
//!
//! The command comes from the arguments (`fastpath ctl show counters`), from files (`-f FILE`,
//! `-` for stdin) or, with neither, from stdin when it is not a terminal. Everything sent in one
//! call is one request: every line is checked before anything is applied, and its changes reach
//! every worker together (see `fastpath_control`). The socket is `--socket PATH`, else
//! `$FASTPATH_CTL`, else the only live socket under `/run/fastpath/`.

use clap::Args;
use fastpath_control::server::SOCKET_DIR;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;

/// Arguments of `fastpath ctl`.
#[derive(Args)]
#[command(after_help = "\
Commands (one per line; quote `=>` from the shell):\n  \
table T add KEY… [priority P] => ACTION(ARGS)     add or replace an entry\n  \
table T modify KEY… [priority P] => ACTION(ARGS)  change an existing entry\n  \
table T del KEY…                                  delete an existing entry\n  \
table T clear                                     delete every entry\n  \
meter M I cir R cbs B (ebs B | pir R pbs B)       configure a meter (bytes/s, bytes)\n  \
show tables | counters [json] | meters | conntrack | queues | plan\n  \
show table T                                      T's entries, as commands that load back\n\n\
Examples:\n  fastpath ctl show counters\n  \
fastpath ctl show table fib4 > fib4.txt   # save a running table as an entries file\n  \
fastpath ctl 'table fib4 add 198.18.0.0/15 => nexthop(1, 02:00:00:00:01:01, 02:00:00:00:00:01)'\n  \
fastpath ctl -f routes.txt            # one request: all or nothing\n  \
echo 'show tables' | fastpath ctl --socket /run/fastpath/1234.sock")]
pub struct CtlArgs {
    /// The control socket of the running `fastpath run` [default: $FASTPATH_CTL, else the only
    /// one in /run/fastpath].
    #[arg(long, short = 's')]
    socket: Option<PathBuf>,
    /// Read commands from FILE (`-`: stdin). Repeatable; all files form one request.
    #[arg(long = "file", short = 'f')]
    files: Vec<PathBuf>,
    /// The command, e.g. `show counters` (words are joined with spaces).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

fn socket(a: &CtlArgs) -> Result<PathBuf, String> {
    if let Some(s) = &a.socket {
        return Ok(s.clone());
    }
    if let Some(s) = std::env::var_os("FASTPATH_CTL") {
        return Ok(PathBuf::from(s));
    }
    let live = fastpath_control::running_sockets();
    match live.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(format!("no running fastpath found (no live socket in {SOCKET_DIR}/): start one with `fastpath run … --port …` (live ports), or give --socket PATH")),
        many => Err(format!(
            "several fastpath processes are running; choose one with --socket:\n{}",
            many.iter().map(|p| format!("  {}", p.display())).collect::<Vec<_>>().join("\n")
        )),
    }
}

/// The request text from arguments, files and stdin.
fn request_text(a: &CtlArgs) -> Result<String, String> {
    let mut text = String::new();
    for f in &a.files {
        if f.as_os_str() == "-" {
            std::io::stdin().read_to_string(&mut text).map_err(|e| format!("stdin: {e}"))?;
        } else {
            text.push_str(&std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?);
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if !a.command.is_empty() {
        text.push_str(&a.command.join(" "));
        text.push('\n');
    }
    if a.files.is_empty() && a.command.is_empty() {
        if std::io::stdin().is_terminal() {
            return Err("nothing to send: give a command (fastpath ctl show counters), -f FILE, or commands on stdin (see --help)".into());
        }
        std::io::stdin().read_to_string(&mut text).map_err(|e| format!("stdin: {e}"))?;
    }
    Ok(text)
}

/// Runs `fastpath ctl`.
pub fn run(a: CtlArgs) -> Result<(), String> {
    let text = request_text(&a)?;
    let path = socket(&a)?;
    match fastpath_control::request(&path, &text) {
        Ok(out) => {
            print!("{out}");
            Ok(())
        }
        Err(e) => {
            // With one file and nothing else, request lines are that file's lines: name it.
            let file = match (a.files.as_slice(), a.command.is_empty()) {
                ([f], true) if f.as_os_str() != "-" => Some(f.display().to_string()),
                _ => None,
            };
            Err(match file {
                Some(f) => name_file(&e.to_string(), &f),
                None => e.to_string(),
            })
        }
    }
}

/// Replaces the `ctl:` of `ctl:LINE[:COL]:` at the start of error lines with `file:`.
fn name_file(msg: &str, file: &str) -> String {
    msg.lines()
        .map(|l| match l.strip_prefix("ctl:") {
            Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => format!("{file}:{rest}"),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_from_a_file_name_the_file() {
        let m = "ctl:3:7: no table \"fib5\" (did you mean \"fib4\"?)\n    table fib5 del 1.0.0.0/8\n          ^";
        let out = super::name_file(m, "routes.txt");
        assert!(out.starts_with("routes.txt:3:7: no table"), "{out}");
        assert!(out.ends_with("\n          ^"), "{out}");
        assert_eq!(super::name_file("ctl: not a line", "f"), "ctl: not a line");
    }
}
