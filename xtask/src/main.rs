//! Repository checks, run by `scripts/test` before the tests:
//!
//! - `cargo xtask layering` reads `cargo metadata` and fails on any dependency edge between
//!   workspace crates that the layer table of the design does not allow (a layer may use the
//!   layers listed for it and, transitively, what those use). It also fails on file-level
//!   import cycles (file A uses file B, which uses A, possibly through others) inside the crates
//!   of [`CYCLE_CHECK_CRATES`]; see `cycles.rs` for what the scan counts as a use.
//! - `cargo xtask docs [--check]` writes the generated docs (`docs/drop-reasons.md`, from the
//!   one declaration of the drop reasons); `--check` fails instead when they are stale.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use fastpath_packet::drop::{DropReason, Severity};

mod cycles;

/// The layer table: each crate and the layers it may use directly.
const LAYERS: &[(&str, &[&str])] = &[
    ("fastpath-packet", &[]),
    ("fastpath-tables", &["fastpath-packet"]),
    ("fastpath-tm", &["fastpath-packet"]),
    ("fastpath-io", &["fastpath-packet"]),
    ("fastpath-pipeline", &["fastpath-packet", "fastpath-tables", "fastpath-tm"]),
    ("fastpath-control", &["fastpath-pipeline", "fastpath-pfcp"]),
    // The lab drives a DUT as a P4Runtime controller would (`update-under-load`): the p4rt
    // crate's client.
    ("fastpath-lab", &["fastpath-io", "fastpath-pipeline", "fastpath-tm", "fastpath-p4rt"]),
    ("fastpath-xdp", &["fastpath-io", "fastpath-pipeline"]),
    ("fastpath-bng", &["fastpath-packet", "fastpath-pfcp"]),
    ("fastpath-pfcp", &[]),
    ("fastpath-runtime", &["fastpath-packet", "fastpath-pipeline", "fastpath-io", "fastpath-control"]),
    // P4Runtime: a front end of the control plane; the workers' exception path (io) for
    // packet-in and packet-out.
    ("fastpath-p4rt", &["fastpath-control", "fastpath-pipeline", "fastpath-io"]),
    (
        "fastpath",
        &[
            "fastpath-packet",
            "fastpath-tables",
            "fastpath-tm",
            "fastpath-io",
            "fastpath-pipeline",
            "fastpath-control",
            "fastpath-lab",
            "fastpath-xdp",
            "fastpath-bng",
            "fastpath-pfcp",
            "fastpath-runtime",
            "fastpath-p4rt",
        ],
    ),
];

/// Crates whose module files must not import each other in a cycle.
const CYCLE_CHECK_CRATES: &[&str] = &["fastpath-pipeline", "fastpath-io"];

/// Crates of [`CYCLE_CHECK_CRATES`] whose cycles are printed as warnings instead of failing
/// (none: a crate can go here while a split that removes its cycles is under way).
const CYCLE_WARN_ONLY: &[&str] = &[];

const USAGE: &str = "usage: cargo xtask <command>

commands:
  layering        fail if a workspace crate depends on a layer the design does not allow, or
                  if module files of a checked crate import each other in a cycle
  docs [--check]  regenerate docs/drop-reasons.md (--check: fail if it is stale instead)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace_root();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["layering"] => layering(&root),
        ["docs"] => docs(&root, false),
        ["docs", "--check"] => docs(&root, true),
        ["-h" | "--help" | "help"] => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown command {:?}\n\n{USAGE}", args.join(" "))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives one level below the workspace root").to_path_buf()
}

/// Every layer `name` may use: the transitive closure of the layer table.
fn allowed(name: &str) -> BTreeSet<&'static str> {
    let table: BTreeMap<&str, &[&'static str]> = LAYERS.iter().copied().collect();
    let mut out = BTreeSet::new();
    let mut todo: Vec<&str> = table.get(name).map(|d| d.to_vec()).unwrap_or_default();
    while let Some(d) = todo.pop() {
        if out.insert(d) {
            todo.extend(table.get(d).copied().unwrap_or_default());
        }
    }
    out
}

fn layering(root: &Path) -> Result<(), String> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata output: {e}"))?;
    let packages = meta["packages"].as_array().ok_or("cargo metadata: no packages")?;
    let members: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut errors = Vec::new();
    for p in packages {
        let name = p["name"].as_str().unwrap_or_default();
        if name == "xtask" {
            continue;
        }
        if !LAYERS.iter().any(|(l, _)| *l == name) {
            errors.push(format!("{name}: not in the layer table (add it to xtask/src/main.rs and DESIGN's table)"));
            continue;
        }
        let ok = allowed(name);
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let dep = d["name"].as_str().unwrap_or_default();
            if members.contains(dep) && dep != name && !ok.contains(dep) {
                let kind = d["kind"].as_str().unwrap_or("normal");
                errors.push(format!(
                    "{name} depends on {dep} ({kind}); {name} may use only: {}",
                    if ok.is_empty() { "nothing".to_owned() } else { ok.iter().copied().collect::<Vec<_>>().join(", ") }
                ));
            }
        }
    }
    if errors.is_empty() {
        println!("layering: {} crates follow the layer table", members.len() - 1);
    }
    for &name in CYCLE_CHECK_CRATES {
        let Some(manifest) = packages.iter().find(|p| p["name"] == name).and_then(|p| p["manifest_path"].as_str()) else {
            errors.push(format!("{name}: in CYCLE_CHECK_CRATES but not a workspace member"));
            continue;
        };
        let src = Path::new(manifest).parent().unwrap_or(root).join("src");
        let shown = src.strip_prefix(root).unwrap_or(&src).to_path_buf();
        let graph = cycles::graph(&cycles::read_sources(&src)?);
        let found = cycles::cycles(&graph);
        let lines: Vec<String> = found.iter().map(|c| cycles::format_cycle(&shown, c)).collect();
        if lines.is_empty() {
            println!("layering: {name}: {} module files, no import cycles", graph.files.len());
        } else if CYCLE_WARN_ONLY.contains(&name) {
            println!("layering: warning: {name}: {} import cycles (warn only until its split lands):", lines.len());
            for l in &lines {
                println!("  {l}");
            }
        } else {
            errors.push(format!("{name}: {} import cycles between module files:\n    {}", lines.len(), lines.join("\n    ")));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("layering violations:\n  {}", errors.join("\n  ")))
    }
}

/// The drop-reason table as Markdown, generated from `DropReason::ALL`.
fn drop_reasons_md() -> String {
    let mut s = String::from(
        "# Drop reasons\n\n\
         Generated by `cargo xtask docs` from `crates/packet/src/drop.rs`; do not edit by hand.\n\n\
         Every dropped packet is counted under one of these names, per stage (for example\n\
         `ip4-forward/ttl_expired` in `fastpath run` and `fastpath bench` output and in JSON).\n\
         Severity: `error` = malformed input, `warn` = a resource ran out, `info` = policy.\n\n\
         | name | severity | when |\n|---|---|---|\n",
    );
    for r in DropReason::ALL {
        let sev = match r.severity() {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Error => "error",
        };
        s.push_str(&format!("| `{}` | {sev} | {} |\n", r.name(), r.description()));
    }
    s
}

fn docs(root: &Path, check: bool) -> Result<(), String> {
    let path = root.join("docs/drop-reasons.md");
    let want = drop_reasons_md();
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have == want {
        println!("docs: {} is up to date", path.display());
        return Ok(());
    }
    if check {
        return Err(format!("{} is stale: run `cargo xtask docs` and commit it", path.display()));
    }
    std::fs::write(&path, want).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("docs: wrote {}", path.display());
    Ok(())
}
