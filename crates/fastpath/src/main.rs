//! `fastpath`: the command line of the fastpath data plane.
//!
//! - `run`    process packets through a pipeline spec (capture files, or live AF_XDP/AF_PACKET ports)
//! - `bench`  measure a reference pipeline in memory (Mpps, ns and cycles per packet, per stage)
//! - `check`  compile a spec and show its plan, or its errors
//! - `ctl`    change tables and read counters of a running `fastpath run`
//! - `gen`    generate route files and ClassBench-style rule sets
//! - `lab`    end-to-end tests through real ports between network namespaces
//! - `sim`    the traffic manager in virtual time at switch scale: incast, burst absorption
//! - `bng-cp` the broadband control plane: DHCP from a user plane over GTP-U, sessions over PFCP

mod cli;
mod scenario;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "fastpath",
    version,
    about = "A programmable software data plane",
    long_about = "\
fastpath runs packet pipelines described by a spec file (parser ▸ match-action tables ▸ actions), \
batch at a time, and measures them.\n\n\
Quick start:\n  fastpath bench                       benchmark every reference pipeline, write an HTML report\n  \
fastpath bench router --routes 1000000 --flows 65536 --json\n  \
fastpath check pipelines/router.toml  compile a spec and print its plan\n  \
fastpath run pipelines/router.toml --entries routes.txt --port p0=pcap:in.pcap --port p1=pcap::out.pcap"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Process packets through a pipeline: capture files, or live AF_XDP / AF_PACKET ports.
    Run(cli::run::RunArgs),
    /// Benchmark reference pipelines in memory (no arguments: all of them, with a report).
    Bench(cli::bench::BenchArgs),
    /// Compile a pipeline spec; print its plan, or every error with file:line:column.
    Check(cli::check::CheckArgs),
    /// Print a spec's P4Info (protobuf text format), for P4Runtime clients that load a new spec.
    P4info(cli::p4info::P4InfoArgs),
    /// Change tables and read counters of a running `fastpath run` (over its control socket).
    Ctl(cli::ctl::CtlArgs),
    /// Generate entry files (routes) and rule sets (ClassBench format).
    #[command(subcommand)]
    Gen(cli::gen::GenCmd),
    /// End-to-end tests between network namespaces: rfc2544, tcp, gen (needs root).
    Lab(cli::lab::LabArgs),
    /// The traffic manager in virtual time at switch scale (32 × 100G): incast, burst.
    Sim(cli::sim::SimArgs),
    /// The broadband control plane: DHCP from a user plane over GTP-U (CPRi), sessions over PFCP.
    BngCp(cli::bng_cp::BngCpArgs),
}

/// Large tables (a 64 MiB DIR-24-8 root, million-entry hash and flow tables) are read at random
/// on every packet; with 4 KiB pages nearly every lookup also misses the TLB. glibc backs large
/// allocations with transparent huge pages when `glibc.malloc.hugetlb=1` (glibc ≥ 2.35; this
/// machine's THP mode is `madvise`), which roughly doubles router lookups. The tunable is read
/// at process start, so the data-plane commands re-execute themselves once with it set.
/// `FASTPATH_NO_HUGEPAGES=1` opts out; under valgrind (callgrind counts) we never re-execute.
fn with_huge_pages() {
    use std::os::unix::process::CommandExt;
    let data_plane = matches!(std::env::args().nth(1).as_deref(), Some("run" | "bench"));
    let set = std::env::var_os("GLIBC_TUNABLES").is_some() || std::env::var_os("FASTPATH_NO_HUGEPAGES").is_some();
    let valgrind = std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("vgpreload"));
    if !data_plane || set || valgrind {
        return;
    }
    if let Ok(exe) = std::env::current_exe() {
        let err = std::process::Command::new(exe).args(std::env::args_os().skip(1)).env("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1").exec();
        eprintln!("note: running without huge pages ({err})");
    }
}

fn main() -> ExitCode {
    with_huge_pages();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Run(a) => cli::run::run(a),
        Cmd::Bench(a) => cli::bench::run(a),
        Cmd::Check(a) => cli::check::run(a),
        Cmd::P4info(a) => cli::p4info::run(a),
        Cmd::BngCp(a) => cli::bng_cp::run(a),
        Cmd::Ctl(a) => cli::ctl::run(a),
        Cmd::Gen(g) => cli::gen::run(g),
        Cmd::Lab(a) => cli::lab::run(a),
        Cmd::Sim(a) => cli::sim::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
