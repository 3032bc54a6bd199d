//! The build step: IR ([`Program`]) ▸ runnable [`Pipeline`]. Empty tables of the kinds the
//! compiler chose, zeroed stateful objects, one stage per [`StageDef`], the control blocks as
//! executor steps. Every special case (dedicated loops for common action shapes) is decided in
//! [`special`], the one place for them.

pub mod special;

use crate::exec::{Pipeline, Stage, StageStats, Step};
use crate::ir::{Program, StageDef, SymStep};
use crate::objects::Objects;
use fastpath_packet::Lanes;

impl Program {
    /// Builds the runnable pipeline: empty tables of the chosen kinds, zeroed objects.
    pub fn instantiate(&self) -> Pipeline {
        let mut stages: Vec<Box<dyn Stage>> = Vec::new();
        for (_, s) in &self.stages {
            stages.push(match s {
                StageDef::Parser => Box::new(crate::stages::parser::Parser::new(self.headers, self.verify_ipv4_checksum)),
                StageDef::Table(t) => crate::table::build_stage(self, *t),
                StageDef::Prims(p) => special::prim_stage(p),
                StageDef::Conntrack(ct, zone) => Box::new(crate::stages::conntrack::ConntrackStage::new(*ct, *zone)),
            });
        }
        let steps = |v: &[SymStep]| -> Vec<Step> {
            v.iter()
                .map(|s| match s {
                    SymStep::Mask(d, src, c) => Step::Mask { dst: *d, src: *src, cond: c.clone() },
                    SymStep::AndNot(d, s, sub) => Step::AndNot { dst: *d, src: *s, sub: *sub },
                    SymStep::Run(m, st) => Step::Run { mask: *m, stage: *st },
                })
                .collect()
        };
        let mut ingress = vec![Step::Run { mask: 0, stage: 0 }]; // the parser
        ingress.extend(steps(&self.ingress));
        // 256 registers: the compiler uses fewer than 255, and register 255 (u8::MAX) stays
        // empty — it is the `∅` of the first `rest = mask ∖ ∅` of every `if`.
        let masks = vec![Lanes::NONE; 256];
        Pipeline {
            name: self.name.clone(),
            stage_names: self.stages.iter().map(|(n, _)| n.clone()).collect(),
            stats: vec![StageStats::default(); stages.len()],
            stages,
            ingress,
            egress: steps(&self.egress),
            masks,
            objects: Objects::new(self),
            end_stats: StageStats::default(),
            trace: Default::default(),
            trace_buf: Vec::new(),
            program: self.clone(),
        }
    }
}
