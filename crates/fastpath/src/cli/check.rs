//! `fastpath check SPEC`: compile and show the plan, and whether `xdp:` ports can run it.

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
    println!(
        "{}: pipeline \"{}\" compiles: {} stages, {} tables",
        a.spec.display(),
        pipe.name(),
        pipe.stage_names().len(),
        prog.tables.len()
    );
    print!("{}", pipe.show_plan());
    match fastpath_xdp::check(&prog) {
        Ok(()) => println!("xdp ports: yes, this pipeline compiles to an XDP program (docs/xdp.md)"),
        Err(e) => println!("xdp ports: no, {e}; afxdp and afpacket ports run it"),
    }
    Ok(())
}
