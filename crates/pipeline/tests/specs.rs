//! Every bad spec in `testdata/specs/bad/` fails to compile with exactly the message in its
//! `.err` file (file:line:column, what, suggestion, the offending line). Every spec in
//! `pipelines/` and `testdata/specs/good/` compiles.
//!
//! To re-bless after an intended message change: `BLESS=1 cargo test -p fastpath-pipeline --test specs`.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn specs(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    v
}

#[test]
fn bad_specs_report_their_errors_exactly() {
    let bad = specs("testdata/specs/bad");
    assert!(bad.len() >= 10, "expected the bad-spec corpus, found {}", bad.len());
    let bless = std::env::var_os("BLESS").is_some();
    let mut failures = Vec::new();
    for p in bad {
        let name = format!("testdata/specs/bad/{}", p.file_name().unwrap().to_string_lossy());
        let text = std::fs::read_to_string(&p).unwrap();
        let err = match fastpath_pipeline::compile(&name, &text) {
            Ok(_) => {
                failures.push(format!("{name}: compiled, but it is in the bad corpus"));
                continue;
            }
            Err(e) => e.to_string() + "\n",
        };
        let expect_path = p.with_extension("err");
        if bless {
            std::fs::write(&expect_path, &err).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&expect_path).unwrap_or_default();
        if want != err {
            failures.push(format!("{name}:\n--- want\n{want}--- got\n{err}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn reference_and_good_specs_compile() {
    let mut all = specs("pipelines");
    all.extend(specs("testdata/specs/good"));
    assert!(!all.is_empty());
    for p in all {
        let text = std::fs::read_to_string(&p).unwrap();
        if let Err(e) = fastpath_pipeline::compile(&p.display().to_string(), &text) {
            panic!("{e}");
        }
    }
}

/// Every shipped pipeline's parser runs a loop monomorphised for its header set
/// (`stages::parser::SPECIALISED`): a pipeline whose headers change must be listed again there.
#[test]
fn shipped_parsers_are_specialised() {
    use fastpath_packet::{Hdr, HdrSet};
    for p in specs("pipelines") {
        let text = std::fs::read_to_string(&p).unwrap();
        let prog = fastpath_pipeline::compile(&p.display().to_string(), &text).unwrap();
        // Ethernet alone (l2fwd) has a loop of its own: a length check.
        if prog.headers == HdrSet::EMPTY.with(Hdr::Eth) {
            continue;
        }
        assert!(
            fastpath_pipeline::stages::parser::Parser::specialised(prog.headers, prog.verify_ipv4_checksum),
            "{}: its header set {:#x} (verify IPv4 checksum: {}) is not in SPECIALISED",
            p.display(),
            prog.headers.0,
            prog.verify_ipv4_checksum
        );
    }
}

/// Which exact tables are kept as /32 routes of a DIR-24-8 (`fastpath check` says so): one
/// IPv4 address with room for 65,536 entries or more; not a smaller one, and not a 32-bit key
/// that is not an address (its keys could take a 1.25 KiB group each).
#[test]
fn large_exact_tables_of_one_ipv4_address_are_host_routes() {
    let spec = r#"
name = "hosts"
[parser]
headers = ["eth", "ipv4"]
[metadata]
teid = 32
[[table]]
name = "by_addr"
key = [{ field = "ipv4.src", match = "exact" }]
actions = ["forward"]
size = 65536
[[table]]
name = "few_addrs"
key = [{ field = "ipv4.dst", match = "exact" }]
actions = ["forward"]
size = 65535
[[table]]
name = "by_id"
key = [{ field = "meta.teid", match = "exact" }]
actions = ["forward"]
size = 1048576
[control]
ingress = '''
apply by_addr
apply few_addrs
apply by_id
'''
"#;
    let plan = fastpath_pipeline::compile("hosts.toml", spec).unwrap_or_else(|e| panic!("{e}")).instantiate().show_plan();
    let line = |t: &str| plan.lines().find(|l| l.starts_with(t)).unwrap_or_else(|| panic!("no {t} in {plan}")).to_string();
    assert!(line("by_addr").contains("as /32 routes"), "{plan}");
    assert!(!line("few_addrs").contains("as /32 routes"), "{plan}");
    assert!(!line("by_id").contains("as /32 routes"), "{plan}");
}
