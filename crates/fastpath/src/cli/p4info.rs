//! `fastpath p4info SPEC`: the P4Info of a spec in the protobuf text format, for P4Runtime
//! clients that push a new pipeline with `SetForwardingPipelineConfig` (the spec file itself is
//! the device config), e.g. p4runtime-shell's `FwdPipeConfig("p4info.txt", "spec.toml")`.

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct P4InfoArgs {
    /// The pipeline spec (TOML), e.g. pipelines/router.toml.
    spec: PathBuf,
    /// Write it to this file instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

pub fn run(a: P4InfoArgs) -> Result<(), String> {
    let prog = fastpath_pipeline::compile_file(&a.spec).map_err(|e| e.to_string())?;
    let text = fastpath_p4rt::p4info::to_text(&fastpath_p4rt::p4info::p4info(&prog, ""));
    match a.output {
        Some(p) => std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}
