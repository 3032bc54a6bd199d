//! `fastpath check SPEC`: compile and show the plan.

use clap::Args;
use std::path::PathBuf;

/// Arguments of `fastpath check`.
#[derive(Args)]
pub struct CheckArgs {
    /// The pipeline spec (TOML), e.g. pipelines/router.toml.
    spec: PathBuf,
}

pub fn run(a: CheckArgs) -> Result<(), String> {
    let prog = fastpath_pipeline::compile_file(&a.spec).map_err(|e| e.to_string())?;
    let pipe = prog.instantiate();
    println!("{}: pipeline \"{}\" compiles: {} stages, {} tables", a.spec.display(), pipe.name(), pipe.stage_names().len(), prog.tables.len());
    print!("{}", pipe.show_plan());
    Ok(())
}
