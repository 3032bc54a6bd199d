//! The small statement language of `[control]` blocks and action bodies.
//!
//! ```text
//! block := stmt*                                   (one statement per line, or split by ';')
//! stmt  := 'apply' TABLE
//!        | 'if' cond ':' block ('elif' cond ':' block)* ('else' ':' block)?   (blocks indented)
//!        | PRIMITIVE arg*                          (forward port, set eth.dst = dmac, drop not_ip …)
//! cond  := conj ('or' conj)* ;  conj := atom ('and' atom)*
//! atom  := 'not' atom | '(' cond ')' | HDR '.valid' | TABLE '.hit' | TABLE '.miss'
//!        | FIELD ('=='|'!='|'<'|'<='|'>'|'>=') VALUE
//! ```
//! Every word keeps its byte position in the spec file, so the compiler can point at it.

use super::{Source, SpecError};
use crate::ir::CmpOp;

/// A word of the program and where it stands in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The text.
    pub text: String,
    /// Byte offset in the spec file.
    pub pos: usize,
}

/// A branch condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// `hdr.valid`
    Valid(Word),
    /// `table.hit`
    Hit(Word),
    /// `table.miss`
    Miss(Word),
    /// `field op value`
    Cmp(Word, CmpOp, Word),
    /// `not c`
    Not(Box<Cond>),
    /// `a and b`
    And(Box<Cond>, Box<Cond>),
    /// `a or b`
    Or(Box<Cond>, Box<Cond>),
}

/// A statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stmt {
    /// `apply TABLE`
    Apply(Word),
    /// `if … elif … else …`
    If {
        /// Conditions and their blocks, in order.
        arms: Vec<(Cond, Vec<Stmt>)>,
        /// The `else` block.
        otherwise: Vec<Stmt>,
    },
    /// A primitive with its arguments (`=` and `,` separators removed).
    Prim {
        /// Primitive name.
        name: Word,
        /// Arguments.
        args: Vec<Word>,
    },
}

struct Line {
    indent: usize,
    toks: Vec<Word>,
    pos: usize,
}

/// Parses a block of statements from the string value whose contents start at byte `start` of
/// `src`. `allow_control`: whether `if` and `apply` may appear (not in action bodies).
pub fn parse_block(src: &Source, start: usize, text: &str, allow_control: bool) -> Result<Vec<Stmt>, SpecError> {
    let mut lines = Vec::new();
    let mut off = start;
    for raw in text.split_inclusive('\n') {
        let body = raw.split('#').next().unwrap_or("");
        let trimmed = body.trim_end();
        let indent = trimmed.len() - trimmed.trim_start().len();
        if trimmed.trim().is_empty() {
            off += raw.len();
            continue;
        }
        if trimmed[..indent].contains('\t') {
            return Err(src.error(off, "tabs are not allowed in indentation; use spaces"));
        }
        // ';' splits statements that share a line (and its indentation).
        let mut seg_off = off + indent;
        for seg in trimmed[indent..].split(';') {
            let toks = tokenize(src, seg, seg_off)?;
            if !toks.is_empty() {
                lines.push(Line { indent, pos: seg_off, toks });
            }
            seg_off += seg.len() + 1;
        }
        off += raw.len();
    }
    let mut p = Parser { src, lines, i: 0, allow_control };
    let base = p.lines.first().map_or(0, |l| l.indent);
    let stmts = p.block(base)?;
    if let Some(l) = p.lines.get(p.i) {
        return Err(src.error(l.pos, "unexpected indentation"));
    }
    Ok(stmts)
}

fn tokenize(src: &Source, s: &str, base: usize) -> Result<Vec<Word>, SpecError> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let word_char = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b':' | b'/' | b'-');
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if word_char(c) {
            while i < b.len() && word_char(b[i]) {
                i += 1;
            }
        } else if matches!(c, b'=' | b'!' | b'<' | b'>') {
            i += 1;
            if i < b.len() && b[i] == b'=' {
                i += 1;
            }
        } else if matches!(c, b'(' | b')' | b',') {
            i += 1;
        } else {
            return Err(src.error(base + i, format!("unexpected character '{}'", c as char)));
        }
        out.push(Word { text: s[start..i].to_string(), pos: base + start });
    }
    Ok(out)
}

struct Parser<'a> {
    src: &'a Source,
    lines: Vec<Line>,
    i: usize,
    allow_control: bool,
}

impl Parser<'_> {
    fn block(&mut self, indent: usize) -> Result<Vec<Stmt>, SpecError> {
        let mut out = Vec::new();
        while let Some(l) = self.lines.get(self.i) {
            if l.indent < indent {
                break;
            }
            if l.indent > indent {
                return Err(self.src.error(l.pos, "unexpected indentation"));
            }
            // `else:` lexes as one word; keywords are compared without the colon.
            let first = l.toks[0].text.trim_end_matches(':');
            match first {
                "if" => out.push(self.if_stmt(indent)?),
                "elif" | "else" => return Err(self.src.error(l.pos, format!("'{first}' without a matching 'if'"))),
                "apply" => {
                    let l = &self.lines[self.i];
                    if !self.allow_control {
                        return Err(self.src.error(l.pos, "'apply' is not allowed inside an action"));
                    }
                    if l.toks.len() != 2 {
                        return Err(self.src.error(l.pos, "expected 'apply TABLE'"));
                    }
                    out.push(Stmt::Apply(l.toks[1].clone()));
                    self.i += 1;
                }
                _ => {
                    let l = &self.lines[self.i];
                    let name = l.toks[0].clone();
                    let args = l.toks[1..].iter().filter(|w| !matches!(w.text.as_str(), "=" | "," | "(" | ")")).cloned().collect();
                    out.push(Stmt::Prim { name, args });
                    self.i += 1;
                }
            }
        }
        Ok(out)
    }

    fn if_stmt(&mut self, indent: usize) -> Result<Stmt, SpecError> {
        let mut arms = Vec::new();
        let mut otherwise = Vec::new();
        let mut kw = "if";
        loop {
            let l = &self.lines[self.i];
            if !self.allow_control {
                return Err(self.src.error(l.pos, "'if' is not allowed inside an action"));
            }
            let toks = &l.toks;
            let (head, last) = split_colon(toks);
            let Some(last) = last else {
                return Err(self.src.error(toks[toks.len() - 1].pos, format!("expected ':' at the end of '{kw}'")));
            };
            let pos = l.pos;
            let cond = if kw == "else" {
                if head.len() != 1 {
                    return Err(self.src.error(head[1].pos, "'else' takes no condition"));
                }
                None
            } else {
                if head.len() < 2 {
                    return Err(self.src.error(last.pos, format!("'{kw}' needs a condition")));
                }
                let mut cp = CondParser { src: self.src, toks: &head[1..], i: 0 };
                let c = cp.or()?;
                if let Some(w) = cp.toks.get(cp.i) {
                    return Err(self.src.error(w.pos, format!("unexpected '{}' in condition", w.text)));
                }
                Some(c)
            };
            self.i += 1;
            let inner = match self.lines.get(self.i) {
                Some(n) if n.indent > indent => n.indent,
                _ => return Err(self.src.error(pos, format!("'{kw}' needs an indented block below it"))),
            };
            let body = self.block(inner)?;
            match cond {
                Some(c) => arms.push((c, body)),
                None => {
                    otherwise = body;
                    break;
                }
            }
            match self.lines.get(self.i) {
                Some(n) if n.indent == indent && n.toks[0].text == "elif" => kw = "elif",
                Some(n) if n.indent == indent && n.toks[0].text.trim_end_matches(':') == "else" => kw = "else",
                _ => break,
            }
        }
        Ok(Stmt::If { arms, otherwise })
    }
}

/// Splits a trailing ':' off the last token (`ipv4.valid:` or a lone `:`).
fn split_colon(toks: &[Word]) -> (Vec<Word>, Option<Word>) {
    let mut v = toks.to_vec();
    let Some(last) = v.pop() else { return (v, None) };
    if last.text == ":" {
        return (v, Some(last));
    }
    if let Some(stripped) = last.text.strip_suffix(':') {
        let colon = Word { text: ":".into(), pos: last.pos + stripped.len() };
        if !stripped.is_empty() {
            v.push(Word { text: stripped.to_string(), pos: last.pos });
        }
        return (v, Some(colon));
    }
    v.push(last);
    (v, None)
}

struct CondParser<'a> {
    src: &'a Source,
    toks: &'a [Word],
    i: usize,
}

impl CondParser<'_> {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.i).map(|w| w.text.as_str())
    }
    fn or(&mut self) -> Result<Cond, SpecError> {
        let mut c = self.and()?;
        while self.peek() == Some("or") {
            self.i += 1;
            c = Cond::Or(Box::new(c), Box::new(self.and()?));
        }
        Ok(c)
    }
    fn and(&mut self) -> Result<Cond, SpecError> {
        let mut c = self.atom()?;
        while self.peek() == Some("and") {
            self.i += 1;
            c = Cond::And(Box::new(c), Box::new(self.atom()?));
        }
        Ok(c)
    }
    fn atom(&mut self) -> Result<Cond, SpecError> {
        let end = self.toks.last().map_or(0, |w| w.pos + w.text.len());
        let Some(w) = self.toks.get(self.i).cloned() else {
            return Err(self.src.error(end, "condition ends too early"));
        };
        self.i += 1;
        match w.text.as_str() {
            "not" => return Ok(Cond::Not(Box::new(self.atom()?))),
            "(" => {
                let c = self.or()?;
                if self.peek() != Some(")") {
                    return Err(self.src.error(end, "expected ')'"));
                }
                self.i += 1;
                return Ok(c);
            }
            _ => {}
        }
        let op = match self.peek() {
            Some("==") => Some(CmpOp::Eq),
            Some("!=") => Some(CmpOp::Ne),
            Some("<") => Some(CmpOp::Lt),
            Some("<=") => Some(CmpOp::Le),
            Some(">") => Some(CmpOp::Gt),
            Some(">=") => Some(CmpOp::Ge),
            _ => None,
        };
        if let Some(op) = op {
            self.i += 1;
            let Some(v) = self.toks.get(self.i).cloned() else {
                return Err(self.src.error(end, "expected a value after the comparison"));
            };
            self.i += 1;
            return Ok(Cond::Cmp(w, op, v));
        }
        let name_len = |s: &str| s.len();
        if let Some(h) = w.text.strip_suffix(".valid") {
            return Ok(Cond::Valid(Word { text: h.to_string(), pos: w.pos }));
        }
        if let Some(t) = w.text.strip_suffix(".hit") {
            return Ok(Cond::Hit(Word { text: t.to_string(), pos: w.pos }));
        }
        if let Some(t) = w.text.strip_suffix(".miss") {
            return Ok(Cond::Miss(Word { text: t.to_string(), pos: w.pos }));
        }
        // Connection-tracking flags (`ct.new`, `ct.established`, …) are 1-bit fields: `ct.x`
        // alone means `ct.x == 1`.
        if w.text.starts_with("ct.") {
            let one = Word { text: "1".to_string(), pos: w.pos };
            return Ok(Cond::Cmp(w, CmpOp::Eq, one));
        }
        Err(self
            .src
            .error(w.pos + name_len(""), format!("expected HEADER.valid, TABLE.hit, TABLE.miss or a comparison, found '{}'", w.text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Stmt>, SpecError> {
        let src = Source { file: "t.toml".into(), text: text.into() };
        parse_block(&src, 0, text, true)
    }

    #[test]
    fn nested_if_elif_else() {
        let s = parse(
            "if ipv4.valid:\n  ttl_dec\n  apply fib4\nelif ipv6.valid and not acl.hit:\n  apply fib6\nelse:\n  drop not_ip\nforward 1\n",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        let Stmt::If { arms, otherwise } = &s[0] else { panic!() };
        assert_eq!(arms.len(), 2);
        assert_eq!(arms[0].1.len(), 2);
        assert!(matches!(&arms[1].0, Cond::And(_, b) if matches!(**b, Cond::Not(_))));
        assert_eq!(otherwise.len(), 1);
        assert!(matches!(&s[1], Stmt::Prim { name, args } if name.text == "forward" && args[0].text == "1"));
    }

    #[test]
    fn set_with_equals_and_semicolons() {
        let s = parse("set eth.dst = dmac; set eth.src = smac; forward port").unwrap();
        assert_eq!(s.len(), 3);
        let Stmt::Prim { args, .. } = &s[0] else { panic!() };
        assert_eq!(args.iter().map(|w| w.text.as_str()).collect::<Vec<_>>(), ["eth.dst", "dmac"]);
    }

    #[test]
    fn comparison_with_mac_value() {
        let s = parse("if eth.dst == 02:00:00:00:00:01:\n  drop\n").unwrap();
        let Stmt::If { arms, .. } = &s[0] else { panic!() };
        assert!(matches!(&arms[0].0, Cond::Cmp(f, CmpOp::Eq, v) if f.text == "eth.dst" && v.text == "02:00:00:00:00:01"));
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = parse("if ipv4.valid\n  drop\n").unwrap_err();
        assert!(e.msg.contains("expected ':'"), "{e}");
        let e = parse("  drop\n forward 1\n").unwrap_err();
        assert!(e.msg.contains("indentation"), "{e}");
        let e = parse("if ipv4.valid:\ndrop\n").unwrap_err();
        assert!(e.msg.contains("indented block"), "{e}");
        assert_eq!((e.line, e.col), (1, 1));
        let e = parse("else:\n  drop\n").unwrap_err();
        assert!(e.msg.contains("without a matching"), "{e}");
        let e = parse("if ipv4.bogus:\n  drop\n").unwrap_err();
        assert!(e.msg.contains("expected HEADER.valid"), "{e}");
        assert_eq!(e.col, 4);
    }

    #[test]
    fn no_control_in_actions() {
        let src = Source { file: "t".into(), text: "apply x".into() };
        assert!(parse_block(&src, 0, "apply x", false).is_err());
    }
}
