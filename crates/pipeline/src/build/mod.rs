//! The build step: IR ([`Program`]) ▸ runnable [`Pipeline`]. Empty tables of the kinds the
//! compiler chose, zeroed stateful objects, one stage per [`StageDef`], the control blocks as
//! executor steps. Every special case (dedicated loops for common action shapes) is decided in
//! [`special`], the one place for them.

pub mod special;

use crate::exec::{Pipeline, Stage, StageStats, Step};
use crate::ir::{Program, StageDef, SymStep};
use crate::objects::Objects;
use fastpath_packet::{Lanes, BATCH_MAX};
use fastpath_tm::{Desc, Enq, Tm};

/// How to build a pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildOptions {
    /// Use the specialised code paths ([`special`]): dedicated loops, table fast forms, the
    /// parser's fast path, monomorphised key extractors and condition loops. Off, every stage runs
    /// the plain interpreter — the reference twin the specialised pipeline is tested against
    /// (`tests/differential.rs`).
    pub specialise: bool,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions { specialise: true }
    }
}

impl Program {
    /// Builds the runnable pipeline: empty tables of the chosen kinds, zeroed objects.
    pub fn instantiate(&self) -> Pipeline {
        self.instantiate_with(BuildOptions::default())
    }

    /// Builds the plain interpreter of this program: no special case anywhere. Same results as
    /// [`Program::instantiate`], packet for packet and counter for counter; slower.
    pub fn instantiate_reference(&self) -> Pipeline {
        self.instantiate_with(BuildOptions { specialise: false })
    }

    /// Builds the runnable pipeline with `opts`.
    pub fn instantiate_with(&self, opts: BuildOptions) -> Pipeline {
        let special = opts.specialise;
        let absorbed_dscp = if special { special::parser_classes(self) } else { None };
        let ct_exact = special && special::ct_load_exact(self);
        let parser = |tuples: bool| -> Box<dyn Stage> {
            let p = crate::stages::parser::Parser::new(self.headers, self.verify_ipv4_checksum, special);
            let p = if tuples { p.with_tuples() } else { p };
            Box::new(match absorbed_dscp {
                Some((_, map)) => p.with_dscp_classes(map),
                None => p,
            })
        };
        let mut stages: Vec<Box<dyn Stage>> = Vec::new();
        for (_, s) in &self.stages {
            stages.push(match s {
                StageDef::Parser => parser(false),
                StageDef::Table(t) => crate::table::build_stage(self, *t, special),
                StageDef::Prims(p) if special => special::prim_stage(p, ct_exact),
                StageDef::Prims(p) => Box::new(crate::stages::prims::PrimStage { prims: p.clone() }),
                StageDef::Conntrack(ct, zone) => Box::new(crate::stages::conntrack::ConntrackStage::new(*ct, *zone)),
                StageDef::L2Switch(f) => Box::new(crate::stages::l2::L2Switch::new(&self.fdbs[*f])),
                StageDef::Classify(how) => Box::new(crate::stages::classify::ClassifyStage { how: *how }),
            });
        }
        let steps = |v: &[SymStep]| -> Vec<Step> {
            v.iter()
                .map(|s| match s {
                    SymStep::Mask(d, src, c) if special => Step::Mask { dst: *d, src: *src, cond: special::merge_valid(c.clone()) },
                    SymStep::Mask(d, src, c) => Step::Mask { dst: *d, src: *src, cond: c.clone() },
                    SymStep::AndNot(d, s, sub) => Step::AndNot { dst: *d, src: *s, sub: *sub },
                    SymStep::Run(m, st) => Step::Run { mask: *m, stage: *st },
                })
                .collect()
        };
        let mut ingress = vec![Step::Run { mask: 0, stage: 0 }]; // the parser
        ingress.extend(steps(&self.ingress));
        if let Some((c, _)) = absorbed_dscp {
            ingress.splice(0..2, [Step::Absorbed { mask: 0, stage: 0, absorbed: c }]);
        }
        let mut egress = steps(&self.egress);
        if special {
            ingress = special::fuse_steps(self, &stages, ingress);
            egress = special::fuse_steps(self, &stages, egress);
            special::share_acl_keys(self, &mut stages, [&ingress, &egress]);
            if special::parsed_tuple(self, &mut stages, &ingress) {
                stages[0] = parser(true);
            }
        }
        // 256 registers: the compiler uses fewer than 255, and register 255 (u8::MAX) stays
        // empty — it is the `∅` of the first `rest = mask ∖ ∅` of every `if`.
        let masks = vec![Lanes::NONE; 256];
        Pipeline {
            name: self.name.clone(),
            stage_names: self.stages.iter().map(|(n, _)| n.clone()).collect(),
            stats: vec![StageStats::default(); stages.len()],
            stages,
            ingress,
            egress,
            masks,
            special,
            objects: Objects::new(self),
            end_stats: StageStats::default(),
            trace: Default::default(),
            trace_buf: Vec::new(),
            acl_keys: Default::default(),
            program: self.clone(),
            // Until `set_ports` says how many ports there are, the ports the spec names: the
            // configuration the compiler validated, so building it cannot fail.
            tm: self.tm.as_ref().and_then(|t| Tm::build(&t.config(t.ports_named())).ok()),
            tm_stats: StageStats::default(),
            tm_ecn: self.tm.as_ref().is_some_and(|t| t.port.classes.iter().any(|c| c.wred.is_some())),
            tm_pipe: self.tm.as_ref().and_then(|t| t.pipe),
            flood: self.stages.iter().find_map(|(_, s)| if let StageDef::L2Switch(f) = s { Some(self.fdbs[*f].clone()) } else { None }),
            tm_in: Box::new([Desc::default(); BATCH_MAX]),
            tm_res: Box::new([Enq::Queued; BATCH_MAX]),
            tm_out: Box::new([Desc::default(); BATCH_MAX]),
        }
    }
}
