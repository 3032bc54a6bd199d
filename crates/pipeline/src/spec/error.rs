//! Spec errors: where (file, line, column), what, and a cheap suggestion.

use std::fmt;

/// One problem in a spec, at a place in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// File name as given.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What is wrong.
    pub msg: String,
    /// The offending line, shown under the message.
    pub source_line: String,
    /// A suggestion (`did you mean "ipv4.dst"?`).
    pub hint: Option<String>,
}

impl SpecError {
    /// The same error with a "did you mean" hint when one is known.
    pub fn did_you_mean(mut self, s: Option<String>) -> SpecError {
        self.hint = s.map(|s| format!("did you mean \"{s}\"?"));
        self
    }
    /// The same error with a free-form hint.
    pub fn hint(mut self, h: impl Into<String>) -> SpecError {
        self.hint = Some(h.into());
        self
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.col, self.msg)?;
        if let Some(h) = &self.hint {
            write!(f, " ({h})")?;
        }
        if !self.source_line.is_empty() {
            let caret = " ".repeat(self.col.saturating_sub(1));
            write!(f, "\n    {}\n    {caret}^", self.source_line)?;
        }
        Ok(())
    }
}

/// Every problem found in a spec, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecErrors(pub Vec<SpecError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        if self.0.len() > 1 {
            write!(f, "\n{} errors", self.0.len())?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecErrors {}
