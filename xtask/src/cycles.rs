//! File-level import cycles inside one crate.
//!
//! A crate's module files form a graph: file A has an edge to file B when A names a path that
//! B defines. A cycle in that graph (A uses B, B uses A, possibly through others) means neither
//! file can be read, tested or moved without the other, so `cargo xtask layering` refuses it in
//! the crates listed in `CYCLE_CHECK_CRATES` (in `main.rs`).
//!
//! The scan is a lexer, not a Rust parser, and errs towards simplicity:
//!
//! - Comments (line, nested block, doc), string, byte-string, raw-string and char literals are
//!   skipped, so paths in docs and messages do not count.
//! - Paths counted: `use` declarations, including `pub use`, nested groups
//!   (`use crate::{a, b::{c, d}}`), `self` in a group, globs and `as` renames; and paths in code
//!   (`crate::x::y(..)`, `super::X`, `self::m::f`, `$crate::..` in macros). A path may start with
//!   `crate`, `self`, `super` (any number, resolved against the module the path sits in, inline
//!   modules included), a module the file declares (`mod ring;` then `ring::Ring`), or a name a
//!   `use` of the file brought in (`use crate::bpf;` then `bpf::Insn`). Other paths (std,
//!   extern crates, local types) are ignored.
//! - `#[cfg(test)] mod tests` blocks are scanned like any other code: a test module that imports
//!   a file which imports back is a cycle too. Inside them, `super::*` is the file itself and
//!   adds no edge.
//! - A path maps to the file of its longest prefix that is a module file (`lib.rs`, `foo.rs`,
//!   `foo/mod.rs`), so a path into an inline module or to an item maps to the file holding it.
//!   When the rest of the path starts with a name that file imports (`pub use x::Name`, or a
//!   private `use` seen through `super::Name`), the import is followed to where the name is
//!   defined, so a re-export in `lib.rs` is not a cycle through `lib.rs`.
//! - A parent declaring `mod child;` is not an edge; only uses are. Files under `src/bin/` and
//!   `src/main.rs` next to a `lib.rs` are other crates and are skipped. `#[path]` is not
//!   supported.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// A module path from the crate root (`["af_xdp", "ring"]`; empty for the root).
type ModPath = Vec<String>;

/// The module path of the file at `rel` (relative to `src/`), or `None` for files that are not
/// modules of the library (`bin/`, `main.rs` beside `lib.rs`).
pub fn module_path(rel: &Path, has_lib: bool) -> Option<ModPath> {
    let parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let (last, dirs) = parts.split_last()?;
    if dirs.first().is_some_and(|d| d == "bin") {
        return None;
    }
    let stem = last.strip_suffix(".rs")?;
    let mut path: ModPath = dirs.to_vec();
    match (dirs.is_empty(), stem) {
        (true, "lib") => {}
        (true, "main") if !has_lib => {}
        (true, "main") => return None,
        (_, "mod") => {}
        _ => path.push(stem.to_string()),
    }
    Some(path)
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Pound,
    Dollar,
    Other,
}

/// Splits Rust source into the few tokens the scan needs; comments and literals disappear.
fn lex(src: &str) -> Vec<Tok> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let n = b.len();
    let ident_start = |c: u8| c == b'_' || c.is_ascii_alphabetic() || c >= 0x80;
    let ident_cont = |c: u8| c == b'_' || c.is_ascii_alphanumeric() || c >= 0x80;
    while i < n {
        let c = b[i];
        match c {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < n && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0usize;
                while i < n {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'"' => i = skip_string(b, i + 1),
            b'\'' => {
                // A char literal ('x', '\n', '\u{..}') or a lifetime/label ('a).
                if b.get(i + 1) == Some(&b'\\') {
                    i += 3;
                    while i < n && b[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else {
                    // Multi-byte char literal or a lifetime: find a closing quote before any
                    // character that cannot be in a one-char literal.
                    let mut j = i + 1;
                    while j < n && ident_cont(b[j]) {
                        j += 1;
                    }
                    let chars = std::str::from_utf8(&b[i + 1..j]).map_or(2, |s| s.chars().count());
                    i = if b.get(j) == Some(&b'\'') && chars == 1 { j + 1 } else { j };
                    out.push(Tok::Other);
                }
            }
            b'r' | b'b' if raw_or_byte_string(b, i).is_some() => {
                i = raw_or_byte_string(b, i).unwrap_or(n);
            }
            _ if ident_start(c) => {
                let s = i;
                while i < n && ident_cont(b[i]) {
                    i += 1;
                }
                let word = &src[s..i];
                // Raw identifiers: r#type.
                if word == "r" && b.get(i) == Some(&b'#') && b.get(i + 1).is_some_and(|&c| ident_start(c)) {
                    let s = i + 1;
                    i = s;
                    while i < n && ident_cont(b[i]) {
                        i += 1;
                    }
                    out.push(Tok::Ident(src[s..i].to_string()));
                } else {
                    out.push(Tok::Ident(word.to_string()));
                }
            }
            b':' if b.get(i + 1) == Some(&b':') => {
                out.push(Tok::PathSep);
                i += 2;
            }
            b'{' => {
                out.push(Tok::Open);
                i += 1;
            }
            b'}' => {
                out.push(Tok::Close);
                i += 1;
            }
            b',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            b';' => {
                out.push(Tok::Semi);
                i += 1;
            }
            b'*' => {
                out.push(Tok::Star);
                i += 1;
            }
            b'#' => {
                out.push(Tok::Pound);
                i += 1;
            }
            b'$' => {
                out.push(Tok::Dollar);
                i += 1;
            }
            _ if c.is_ascii_whitespace() => i += 1,
            _ => {
                out.push(Tok::Other);
                i += 1;
            }
        }
    }
    out
}

/// Index just past the closing `"` of a string whose body starts at `i`.
fn skip_string(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// If a byte string, raw string or byte char starts at `i` (`b"`, `r"`, `r#"`, `br#"`, `b'`,
/// `c"`), the index just past it.
fn raw_or_byte_string(b: &[u8], i: usize) -> Option<usize> {
    // An identifier that merely starts with r or b (`return`, `bpf`) is not a literal.
    if i > 0 && (b[i - 1] == b'_' || b[i - 1].is_ascii_alphanumeric()) {
        return None;
    }
    let mut j = i;
    if b.get(j) == Some(&b'b') {
        j += 1;
        match b.get(j) {
            Some(b'"') => return Some(skip_string(b, j + 1)),
            Some(b'\'') => {
                let mut k = j + 1;
                if b.get(k) == Some(&b'\\') {
                    k += 2;
                }
                while k < b.len() && b[k] != b'\'' {
                    k += 1;
                }
                return Some(k + 1);
            }
            _ => {}
        }
    }
    if b.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
    j += hashes;
    if b.get(j) != Some(&b'"') {
        return None;
    }
    j += 1;
    while j < b.len() {
        if b[j] == b'"' && b[j + 1..].iter().take(hashes).filter(|&&c| c == b'#').count() == hashes && j + hashes < b.len() {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(b.len())
}

/// One path a file names, before resolution: where it sits and its segments as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawPath {
    /// The module the path appears in (the file's module, or an inline module inside it).
    pub scope: ModPath,
    /// Segments as written (`["super", "ring", "Ring"]`); a glob or group ends the path.
    pub segs: Vec<String>,
}

/// What one file declares and names.
#[derive(Debug, Default)]
pub struct FileScan {
    /// Child modules declared in the file, by scope (`mod ring;` and inline `mod x { }`).
    pub mods: BTreeSet<(ModPath, String)>,
    /// Names brought in by `use`: (scope, local name, full path as written).
    pub uses: Vec<(ModPath, String, RawPath)>,
    /// Every path the file names (uses and code).
    pub paths: Vec<RawPath>,
}

/// Scans one file whose module path is `file_mod`.
pub fn scan(src: &str, file_mod: &ModPath) -> FileScan {
    let toks = lex(src);
    let mut out = FileScan::default();
    // Stack of (module path, brace depth at which it closes).
    let mut scopes: Vec<(ModPath, usize)> = vec![(file_mod.clone(), usize::MAX)];
    let mut depth = 0usize;
    let mut i = 0;
    let ident = |k: usize| match toks.get(k) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    while i < toks.len() {
        let scope = scopes.last().map(|s| s.0.clone()).unwrap_or_default();
        match &toks[i] {
            Tok::Open => {
                depth += 1;
                i += 1;
            }
            Tok::Close => {
                if scopes.last().is_some_and(|s| s.1 == depth) {
                    scopes.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(w) if w == "mod" && ident(i + 1).is_some() && prev(&toks, i) != Some(&Tok::PathSep) => {
                let name = ident(i + 1).unwrap_or_default().to_string();
                out.mods.insert((scope.clone(), name.clone()));
                if toks.get(i + 2) == Some(&Tok::Open) {
                    depth += 1;
                    let mut inner = scope.clone();
                    inner.push(name);
                    scopes.push((inner, depth));
                    i += 3;
                } else {
                    i += 2;
                }
            }
            Tok::Ident(w)
                if w == "use"
                    && prev(&toks, i) != Some(&Tok::PathSep)
                    && matches!(toks.get(i + 1), Some(Tok::Ident(_) | Tok::PathSep | Tok::Open)) =>
            {
                let mut leaves = Vec::new();
                let end = use_tree(&toks, i + 1, Vec::new(), &mut leaves);
                for (segs, alias) in leaves {
                    let rp = RawPath { scope: scope.clone(), segs };
                    if let Some(a) = alias {
                        out.uses.push((scope.clone(), a, rp.clone()));
                    }
                    out.paths.push(rp);
                }
                i = end;
            }
            Tok::Ident(w) if toks.get(i + 1) == Some(&Tok::PathSep) && prev(&toks, i) != Some(&Tok::PathSep) => {
                // A path in code: `a::b::c`, read up to its last segment.
                let mut segs = vec![w.clone()];
                let mut k = i + 1;
                while toks.get(k) == Some(&Tok::PathSep) {
                    match ident(k + 1) {
                        Some(s) => {
                            segs.push(s.to_string());
                            k += 2;
                        }
                        None => break,
                    }
                }
                out.paths.push(RawPath { scope: scope.clone(), segs });
                i = k;
            }
            _ => i += 1,
        }
    }
    out
}

/// The token before `i`, if any.
fn prev(toks: &[Tok], i: usize) -> Option<&Tok> {
    i.checked_sub(1).and_then(|k| toks.get(k))
}

/// Reads a use tree starting at `i` under `prefix`; pushes (full segments, local name) for each
/// leaf (`None` for globs). Returns the index after the tree (past `;` at the top level).
fn use_tree(toks: &[Tok], mut i: usize, prefix: Vec<String>, leaves: &mut Vec<(Vec<String>, Option<String>)>) -> usize {
    let mut segs = prefix;
    if toks.get(i) == Some(&Tok::PathSep) {
        i += 1; // `use ::std::..`: an extern path; the leading `::` is dropped.
    }
    loop {
        match toks.get(i) {
            Some(Tok::Ident(s)) if s == "as" => {
                let alias = match toks.get(i + 1) {
                    Some(Tok::Ident(a)) => a.clone(),
                    _ => "_".into(),
                };
                leaves.push((segs, Some(alias)));
                return finish(toks, i + 2);
            }
            Some(Tok::Ident(s)) => {
                segs.push(s.clone());
                i += 1;
                if toks.get(i) == Some(&Tok::PathSep) {
                    i += 1;
                    continue;
                }
                if toks.get(i) == Some(&Tok::Ident("as".into())) {
                    continue;
                }
                // `self` in a group names the group's prefix.
                let name = if segs.last().is_some_and(|l| l == "self") {
                    segs.pop();
                    segs.last().cloned()
                } else {
                    segs.last().cloned()
                };
                leaves.push((segs, name));
                return finish(toks, i);
            }
            Some(Tok::Star) => {
                leaves.push((segs, None));
                return finish(toks, i + 1);
            }
            Some(Tok::Open) => {
                i += 1;
                loop {
                    match toks.get(i) {
                        Some(Tok::Close) => {
                            i += 1;
                            break;
                        }
                        Some(Tok::Comma) => i += 1,
                        None => return i,
                        _ => i = use_tree_item(toks, i, &segs, leaves),
                    }
                }
                return finish(toks, i);
            }
            _ => return finish(toks, i),
        }
    }
}

/// One item of a use group: like [`use_tree`] but stops at `,` or `}` instead of `;`.
fn use_tree_item(toks: &[Tok], i: usize, prefix: &[String], leaves: &mut Vec<(Vec<String>, Option<String>)>) -> usize {
    // Find the end of this item (a `,` or `}` at this nesting level), parse that slice.
    let mut depth = 0usize;
    let mut end = i;
    while end < toks.len() {
        match toks[end] {
            Tok::Open => depth += 1,
            Tok::Close if depth == 0 => break,
            Tok::Close => depth -= 1,
            Tok::Comma if depth == 0 => break,
            _ => {}
        }
        end += 1;
    }
    let mut slice = toks[i..end].to_vec();
    slice.push(Tok::Semi);
    use_tree(&slice, 0, prefix.to_vec(), leaves);
    end.max(i + 1)
}

/// Past the `;` that ends a use declaration at `i`; anything else is left to the caller, so a
/// use tree this scan does not understand never swallows braces.
fn finish(toks: &[Tok], i: usize) -> usize {
    if toks.get(i) == Some(&Tok::Semi) {
        i + 1
    } else {
        i
    }
}

/// A crate's files and the edges between them.
#[derive(Debug, Default)]
pub struct Graph {
    /// Files by module path, as paths relative to `src/`.
    pub files: BTreeMap<ModPath, PathBuf>,
    /// Edges between files (relative paths), from the using file to the used one.
    pub edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

/// Builds the graph of a crate from `(path relative to src/, source)` pairs.
pub fn graph(sources: &[(PathBuf, String)]) -> Graph {
    let has_lib = sources.iter().any(|(p, _)| p == Path::new("lib.rs"));
    let mut g = Graph::default();
    let mut scans = Vec::new();
    for (rel, src) in sources {
        let Some(m) = module_path(rel, has_lib) else { continue };
        g.files.insert(m.clone(), rel.clone());
        scans.push((rel.clone(), scan(src, &m)));
    }
    // Names in scope per module: declared child modules and `use` aliases, as absolute paths.
    let mut names: BTreeMap<(ModPath, String), ModPath> = BTreeMap::new();
    for (_, s) in &scans {
        for (scope, m) in &s.mods {
            let mut p = scope.clone();
            p.push(m.clone());
            names.insert((scope.clone(), m.clone()), p);
        }
    }
    // Aliases can build on each other (`use crate::a; use a::b;`): resolve twice.
    for _ in 0..2 {
        for (_, s) in &scans {
            for (scope, alias, rp) in &s.uses {
                if let Some(abs) = absolute(rp, &names, &g.files) {
                    names.insert((scope.clone(), alias.clone()), abs);
                }
            }
        }
    }
    for (rel, s) in &scans {
        for rp in &s.paths {
            let Some(abs) = absolute(rp, &names, &g.files) else { continue };
            if let Some(target) = file_of(&abs, &g.files, &names) {
                if target != *rel {
                    g.edges.entry(rel.clone()).or_default().insert(target);
                }
            }
        }
    }
    g
}

/// The absolute module path a raw path names, or `None` when it leaves the crate. A name not
/// found in an inline module (a `mod tests` that did `use super::*`) is looked up in the
/// enclosing modules up to the file's own.
fn absolute(rp: &RawPath, names: &BTreeMap<(ModPath, String), ModPath>, files: &BTreeMap<ModPath, PathBuf>) -> Option<ModPath> {
    let first = rp.segs.first()?;
    let mut rest = &rp.segs[1..];
    let mut base: ModPath = match first.as_str() {
        "crate" => Vec::new(),
        "self" => rp.scope.clone(),
        "super" => {
            let mut b = rp.scope.clone();
            b.pop()?;
            while rest.first().is_some_and(|s| s == "super") {
                b.pop()?;
                rest = &rest[1..];
            }
            b
        }
        _ => {
            let mut scope = rp.scope.clone();
            loop {
                if let Some(p) = names.get(&(scope.clone(), first.clone())) {
                    break p.clone();
                }
                if files.contains_key(&scope) {
                    return None;
                }
                scope.pop()?;
            }
        }
    };
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// The file that defines `abs`: its longest prefix that is a file, following imports.
fn file_of(abs: &ModPath, files: &BTreeMap<ModPath, PathBuf>, imports: &BTreeMap<(ModPath, String), ModPath>) -> Option<PathBuf> {
    let mut abs = abs.clone();
    for _ in 0..8 {
        let n = (0..=abs.len()).rev().find(|&n| files.contains_key(&abs[..n]))?;
        let file_mod = abs[..n].to_vec();
        // An import (a re-export, or a private `use` reached through `super::`) in the file or
        // one of its inline modules: the name is defined where the import points.
        // (A child `mod` declaration maps a name to itself and is not a hop.)
        let hop = (n..abs.len())
            .find_map(|k| imports.get(&(abs[..k].to_vec(), abs[k].clone())).filter(|to| to.as_slice() != &abs[..=k]).map(|to| (k, to)));
        match hop {
            Some((k, to)) => {
                let mut next = to.clone();
                next.extend(abs[k + 1..].iter().cloned());
                abs = next;
            }
            _ => return files.get(&file_mod).cloned(),
        }
    }
    None
}

/// Cycles of the graph: for every edge inside a strongly connected component, the shortest
/// cycle through it, each listed once, starting at its smallest file and closing on it.
pub fn cycles(g: &Graph) -> Vec<Vec<PathBuf>> {
    let nodes: Vec<&PathBuf> = g.files.values().collect();
    let comp = scc(&nodes, &g.edges);
    let mut found: BTreeSet<Vec<PathBuf>> = BTreeSet::new();
    let mut covered: BTreeSet<(PathBuf, PathBuf)> = BTreeSet::new();
    for (u, vs) in &g.edges {
        for v in vs {
            if comp.get(u) != comp.get(v) || !comp.contains_key(u) || covered.contains(&(u.clone(), v.clone())) {
                continue;
            }
            // Shortest path v -> u inside the component.
            let Some(path) = bfs(v, u, &g.edges, |x| comp.get(x) == comp.get(u)) else { continue };
            let mut cyc: Vec<PathBuf> = vec![u.clone()];
            cyc.extend(path.iter().take(path.len() - 1).cloned());
            for w in 0..cyc.len() {
                covered.insert((cyc[w].clone(), cyc[(w + 1) % cyc.len()].clone()));
            }
            let start = (0..cyc.len()).min_by_key(|&k| &cyc[k]).unwrap_or(0);
            cyc.rotate_left(start);
            let first = cyc[0].clone();
            cyc.push(first);
            found.insert(cyc);
        }
    }
    found.into_iter().collect()
}

fn bfs(from: &Path, to: &Path, edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>, keep: impl Fn(&PathBuf) -> bool) -> Option<Vec<PathBuf>> {
    let mut prev: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    let mut queue = VecDeque::from([from.to_path_buf()]);
    let mut seen = BTreeSet::from([from.to_path_buf()]);
    while let Some(x) = queue.pop_front() {
        if x == *to {
            let mut path = vec![x.clone()];
            let mut cur = x;
            while let Some(p) = prev.get(&cur) {
                path.push(p.clone());
                cur = p.clone();
            }
            path.reverse();
            return Some(path);
        }
        for y in edges.get(&x).into_iter().flatten() {
            if keep(y) && seen.insert(y.clone()) {
                prev.insert(y.clone(), x.clone());
                queue.push_back(y.clone());
            }
        }
    }
    None
}

/// Component id of every node in a component of two or more nodes (Tarjan's algorithm).
fn scc(nodes: &[&PathBuf], edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> BTreeMap<PathBuf, usize> {
    struct St<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<PathBuf, usize>,
        low: BTreeMap<PathBuf, usize>,
        stack: Vec<PathBuf>,
        on: BTreeSet<PathBuf>,
        next: usize,
        comps: Vec<Vec<PathBuf>>,
    }
    fn visit(st: &mut St, v: &PathBuf) {
        st.index.insert(v.clone(), st.next);
        st.low.insert(v.clone(), st.next);
        st.next += 1;
        st.stack.push(v.clone());
        st.on.insert(v.clone());
        let succ: Vec<PathBuf> = st.edges.get(v).into_iter().flatten().cloned().collect();
        for w in succ {
            if !st.index.contains_key(&w) {
                visit(st, &w);
                let lw = st.low[&w];
                let lv = st.low[v];
                st.low.insert(v.clone(), lv.min(lw));
            } else if st.on.contains(&w) {
                let iw = st.index[&w];
                let lv = st.low[v];
                st.low.insert(v.clone(), lv.min(iw));
            }
        }
        if st.low[v] == st.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = st.stack.pop() {
                st.on.remove(&w);
                let done = w == *v;
                comp.push(w);
                if done {
                    break;
                }
            }
            st.comps.push(comp);
        }
    }
    let mut st =
        St { edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on: BTreeSet::new(), next: 0, comps: Vec::new() };
    for v in nodes {
        if !st.index.contains_key(*v) {
            visit(&mut st, v);
        }
    }
    let mut out = BTreeMap::new();
    for (id, c) in st.comps.iter().enumerate().filter(|(_, c)| c.len() > 1) {
        for v in c {
            out.insert(v.clone(), id);
        }
    }
    out
}

/// Reads every `.rs` file under `src` as (path relative to `src`, text).
///
/// # Errors
/// A directory or file that cannot be read.
pub fn read_sources(src: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    let mut out = Vec::new();
    let mut todo = vec![src.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for e in entries {
            let p = e.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                let rel = p.strip_prefix(src).map_err(|e| e.to_string())?.to_path_buf();
                out.push((rel, text));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A cycle as `crates/io/src/a.rs -> b.rs -> a.rs` (`crate_src` is the crate's `src` directory
/// relative to the workspace).
pub fn format_cycle(crate_src: &Path, cycle: &[PathBuf]) -> String {
    cycle
        .iter()
        .enumerate()
        .map(|(k, p)| if k == 0 { crate_src.join(p).display().to_string() } else { p.display().to_string() })
        .collect::<Vec<_>>()
        .join(" -> ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(files: &[(&str, &str)]) -> Vec<(PathBuf, String)> {
        files.iter().map(|(p, s)| (PathBuf::from(p), s.to_string())).collect()
    }

    fn edges(g: &Graph) -> Vec<(String, String)> {
        g.edges.iter().flat_map(|(u, vs)| vs.iter().map(move |v| (u.display().to_string(), v.display().to_string()))).collect()
    }

    fn e(a: &str, b: &str) -> (String, String) {
        (a.to_string(), b.to_string())
    }

    #[test]
    fn module_paths_follow_the_file_layout() {
        let m = |p: &str| module_path(Path::new(p), true);
        assert_eq!(m("lib.rs"), Some(vec![]));
        assert_eq!(m("port.rs"), Some(vec!["port".to_string()]));
        assert_eq!(m("af_xdp/mod.rs"), Some(vec!["af_xdp".to_string()]));
        assert_eq!(m("af_xdp/ring.rs"), Some(vec!["af_xdp".to_string(), "ring".to_string()]));
        assert_eq!(m("main.rs"), None);
        assert_eq!(m("bin/tool.rs"), None);
        assert_eq!(module_path(Path::new("main.rs"), false), Some(vec![]));
    }

    #[test]
    fn use_groups_self_renames_and_globs_are_read() {
        let s = scan("pub(crate) use crate::{a, b::{c, d::{self, E as F}}, g::*};\nuse super::h::I;", &vec!["m".to_string()]);
        let segs: Vec<Vec<&str>> = s.paths.iter().map(|p| p.segs.iter().map(String::as_str).collect()).collect();
        assert_eq!(
            segs,
            vec![
                vec!["crate", "a"],
                vec!["crate", "b", "c"],
                vec!["crate", "b", "d"],
                vec!["crate", "b", "d", "E"],
                vec!["crate", "g"],
                vec!["super", "h", "I"],
            ]
        );
        let aliases: Vec<&str> = s.uses.iter().map(|u| u.1.as_str()).collect();
        assert_eq!(aliases, vec!["a", "c", "d", "F", "I"]);
    }

    #[test]
    fn comments_and_literals_hide_paths() {
        let s = scan(
            "// use crate::a;\n/* crate::b /* nested crate::c */ */\n/// [`crate::d`]\n\
             fn f<'a>(x: &'a str) -> char { let _ = \"crate::e\"; let _ = r#\"crate::f\"#; let _ = b\"crate::g\"; \
             let _ = 'x'; let _ = '\\''; crate::h::i(); 'y' }",
            &vec![],
        );
        let segs: Vec<String> = s.paths.iter().map(|p| p.segs.join("::")).collect();
        assert_eq!(segs, vec!["crate::h::i"]);
    }

    #[test]
    fn a_two_file_cycle_is_found_and_printed() {
        let g = graph(&src(&[
            ("lib.rs", "pub mod compile;\npub mod exec;\n"),
            ("compile.rs", "use crate::exec::Stage;\npub struct Plan;"),
            ("exec.rs", "pub struct Stage;\nfn f(p: &crate::compile::Plan) {}"),
        ]));
        assert_eq!(edges(&g), vec![e("compile.rs", "exec.rs"), e("exec.rs", "compile.rs")]);
        let c = cycles(&g);
        assert_eq!(c.len(), 1);
        assert_eq!(format_cycle(Path::new("crates/pipeline/src"), &c[0]), "crates/pipeline/src/compile.rs -> exec.rs -> compile.rs");
    }

    #[test]
    fn super_in_a_child_file_and_a_use_of_the_child_make_a_cycle() {
        let g = graph(&src(&[
            ("lib.rs", "pub mod af_xdp;\n"),
            ("af_xdp/mod.rs", "mod ring;\nuse ring::Ring;\nconst N: u32 = 4;\nfn f() { ring::map(); }"),
            ("af_xdp/ring.rs", "pub struct Ring;\npub fn map() -> u32 { super::N }"),
        ]));
        assert_eq!(edges(&g), vec![e("af_xdp/mod.rs", "af_xdp/ring.rs"), e("af_xdp/ring.rs", "af_xdp/mod.rs")]);
        assert_eq!(cycles(&g).len(), 1);
    }

    #[test]
    fn declaring_a_child_module_is_not_an_edge_and_test_super_is_the_file_itself() {
        let g = graph(&src(&[
            ("lib.rs", "pub mod port;\npub mod worker;\npub use port::Port;\n"),
            ("port.rs", "pub trait Port {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    fn t() { super::Port::f(); }\n}\n"),
            ("worker.rs", "use crate::port::Port;\nmod inner { use super::super::port; }\n"),
        ]));
        assert_eq!(edges(&g), vec![e("lib.rs", "port.rs"), e("worker.rs", "port.rs")]);
        assert!(cycles(&g).is_empty());
    }

    #[test]
    fn paths_into_inline_modules_and_through_reexports_reach_the_defining_file() {
        let g = graph(&src(&[
            ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub use c::Thing;\n"),
            ("a.rs", "pub mod inner { pub fn f() {} }\nfn g() { crate::Thing::new(); }"),
            ("b.rs", "use crate::a::inner::f;"),
            ("c.rs", "pub struct Thing;"),
        ]));
        assert_eq!(edges(&g), vec![e("a.rs", "c.rs"), e("b.rs", "a.rs"), e("lib.rs", "c.rs")]);
    }

    #[test]
    fn aliases_of_modules_resolve_deeper_paths() {
        let g = graph(&src(&[
            ("lib.rs", "pub mod compile;\npub mod exec;\n"),
            ("compile/mod.rs", "pub mod parser;\n"),
            ("compile/parser.rs", "use crate::exec;\n"),
            ("exec.rs", "use crate::compile;\nfn f() { compile::parser::run(); }"),
        ]));
        assert_eq!(edges(&g), vec![e("compile/parser.rs", "exec.rs"), e("exec.rs", "compile/mod.rs"), e("exec.rs", "compile/parser.rs")]);
        let c: Vec<String> = cycles(&g).iter().map(|c| format_cycle(Path::new("src"), c)).collect();
        assert_eq!(c, vec!["src/compile/parser.rs -> exec.rs -> compile/parser.rs"]);
    }

    #[test]
    fn three_file_cycles_are_reported_once_each() {
        let g = graph(&src(&[
            ("lib.rs", "mod a; mod b; mod c;"),
            ("a.rs", "use crate::b::X;"),
            ("b.rs", "use crate::c::Y;"),
            ("c.rs", "use crate::a::Z; use crate::b::W;"),
        ]));
        let c: Vec<String> = cycles(&g).iter().map(|c| format_cycle(Path::new("src"), c)).collect();
        assert_eq!(c, vec!["src/a.rs -> b.rs -> c.rs -> a.rs", "src/b.rs -> c.rs -> b.rs"]);
    }
}
