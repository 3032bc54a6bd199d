//! fastpath-pipeline: the programmable part of the data plane.
//!
//! Owns the pipeline spec (a TOML file, [`spec`]), its compiler ([`mod@compile`]) into the IR, a
//! checked program as plain data ([`ir`]), the build step that makes the IR runnable and holds
//! every special case ([`build`]), the batch executor ([`exec`]), the built-in stages (the
//! parser, table stages, primitive stages), the action primitives ([`action`]), per-stage
//! counters with named drop reasons, the packet trace ([`trace`]) and the entries / control
//! commands ([`entries`]). Uses `packet`, `tables` and `tm`. `docs/pipeline.md` draws the files
//! and lists the special cases; [`Program::instantiate_reference`] builds the plain interpreter
//! of a program, the twin the specialised build is tested against (`tests/differential.rs`).
//!
//! Invariants: a spec is checked completely before any packet flows (errors name file, line and
//! column); [`Pipeline::process`] never panics on packet data and never allocates unless tracing
//! is on; every packet leaves a batch with a final verdict, and every drop is counted under a
//! stage and a reason.
//!
//! ```
//! use fastpath_packet::{Batch, Pool, Verdict};
//! let spec = r#"
//! name = "demo"
//! [parser]
//! headers = ["eth"]
//! [control]
//! ingress = "forward 1"
//! "#;
//! let mut pipe = fastpath_pipeline::compile("demo.toml", spec).unwrap().instantiate();
//! let mut pool = Pool::new(8);
//! let h = pool.alloc().unwrap();
//! pool.set_data(h, &[0u8; 60]);
//! let mut b = Batch::new();
//! b.push(h, 0);
//! pipe.process(&mut pool, &mut b, 0);
//! assert_eq!(b.verdict(0), Verdict::Tx(1));
//! ```
#![forbid(unsafe_code)]

pub mod action;
pub mod build;
pub mod compile;
pub mod cond;
pub mod entries;
pub mod exec;
pub mod field;
pub mod ir;
pub mod objects;
pub mod spec;
pub mod stages;
pub mod table;
pub mod trace;
pub mod value;

pub use compile::{compile, compile_file};
pub use exec::{Pipeline, Stage, StageCx, StageStats};
pub use ir::Program;
pub use spec::{SpecError, SpecErrors};
