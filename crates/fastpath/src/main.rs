//! `fastpath`: the command line of the fastpath data plane.
//!
//! - `run`    process packets through a pipeline spec (capture files, or live AF_XDP/AF_PACKET ports)
//! - `bench`  measure a reference pipeline in memory (Mpps, ns and cycles per packet, per stage)
//! - `check`  compile a spec and show its plan, or its errors
//! - `gen`    generate route files and ClassBench-style rule sets
//! - `lab`    end-to-end tests through real ports between network namespaces

mod cli;
mod scenario;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "fastpath", version, about = "A programmable software data plane", long_about = "\
fastpath runs packet pipelines described by a spec file (parser ▸ match-action tables ▸ actions), \
batch at a time, and measures them.\n\n\
Quick start:\n  fastpath bench                       benchmark every reference pipeline, write an HTML report\n  \
fastpath bench router --routes 1000000 --flows 65536 --json\n  \
fastpath check pipelines/router.toml  compile a spec and print its plan\n  \
fastpath run pipelines/router.toml --entries routes.txt --port p0=pcap:in.pcap --port p1=pcap::out.pcap")]
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
    /// Generate entry files (routes) and rule sets (ClassBench format).
    #[command(subcommand)]
    Gen(cli::gen::GenCmd),
    /// End-to-end tests between network namespaces: rfc2544, tcp, gen (needs root).
    Lab(cli::lab::LabArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Run(a) => cli::run::run(a),
        Cmd::Bench(a) => cli::bench::run(a),
        Cmd::Check(a) => cli::check::run(a),
        Cmd::Gen(g) => cli::gen::run(g),
        Cmd::Lab(a) => cli::lab::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
