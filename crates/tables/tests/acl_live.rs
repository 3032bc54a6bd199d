//! The incremental classifier ([`LiveAcl`]) against the linear scan of the rules live at each
//! commit: random adds, replaces and deletes, commits, folds started and finished at any point
//! (changes arriving while a fold runs), clears; and deletes of rules that pruned others.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fastpath_tables::acl::classbench::{self, Kind};
use fastpath_tables::acl::{Acl, AclConfig, AclRule, FieldMatch, FoldJob, LiveAcl};
use fastpath_tables::reference::acl::LinearAcl;
use proptest::prelude::*;

mod common;
use common::{field, keys};

#[derive(Clone, Debug)]
enum Op {
    /// Add (or replace the action of the rule with the same fields and priority).
    Add(u32, Vec<FieldMatch>),
    /// Give the `n`-th live rule (mod the count) a new action.
    Modify(usize),
    /// Delete every rule with the fields of the `n`-th live rule.
    Del(usize),
    /// Delete by fields that may match nothing.
    DelAny(Vec<FieldMatch>),
    Commit,
    StartFold,
    FinishFold,
    Clear,
}

fn ops(widths: Vec<u8>, max: usize) -> impl Strategy<Value = Vec<Op>> {
    let fields = || widths.iter().map(|&w| field(w)).collect::<Vec<_>>();
    let op = prop_oneof![
        12 => (0u32..6, fields()).prop_map(|(p, f)| Op::Add(p, f)),
        3 => any::<usize>().prop_map(Op::Modify),
        6 => any::<usize>().prop_map(Op::Del),
        1 => fields().prop_map(Op::DelAny),
        5 => Just(Op::Commit),
        3 => Just(Op::StartFold),
        3 => Just(Op::FinishFold),
        1 => (0u8..20).prop_filter_map("rare", |x| (x == 0).then_some(Op::Clear)),
    ];
    prop::collection::vec(op, 0..max)
}

fn config(widths: Vec<u8>) -> impl Strategy<Value = AclConfig> {
    (1usize..8, any::<bool>(), prop_oneof![3 => Just(1usize << 24), 1 => 16usize..400])
        .prop_map(move |(leaf_size, partition, max_words)| AclConfig { leaf_size, partition, max_words, ..AclConfig::new(widths.clone()) })
}

/// The rules live, in insertion order, as the reference semantics keep them: a replaced rule
/// keeps its place.
#[derive(Clone, Default)]
struct Model(Vec<AclRule>);

impl Model {
    fn add(&mut self, r: AclRule) {
        match self.0.iter_mut().find(|x| x.fields == r.fields && x.priority == r.priority) {
            Some(x) => x.action = r.action,
            None => self.0.push(r),
        }
    }

    fn del(&mut self, fields: &[FieldMatch]) -> usize {
        let before = self.0.len();
        self.0.retain(|r| r.fields != fields);
        before - self.0.len()
    }
}

/// Every key of `ks` classifies in `acl` as in the linear scan of `model` (actions are unique,
/// so the action names the rule).
fn same<const N: usize>(acl: &Acl, model: &Model, ks: &[[u32; N]]) -> Result<(), TestCaseError> {
    let twin = LinearAcl::new(model.0.clone());
    prop_assert_eq!(acl.len(), model.0.len());
    let mut out = vec![None; ks.len()];
    acl.classify_batch(ks, &mut out);
    for (k, got) in ks.iter().zip(&out) {
        let want = twin.classify(k).map(|x| x.0);
        prop_assert_eq!(acl.classify(k).map(|x| x.0), want, "key {:?}", k);
        prop_assert_eq!(got.map(|x| x.0), want, "batch, key {:?}", k);
    }
    Ok(())
}

fn run<const N: usize>(
    cfg: AclConfig,
    widths: &[u8; N],
    ops: &[Op],
    seeds: &[(u32, u32, u8)],
    limits: (usize, usize),
) -> Result<(), TestCaseError> {
    let mut live = LiveAcl::new(cfg).unwrap().with_limits(limits.0, limits.1);
    let mut model = Model::default();
    let mut action = 0u32;
    let mut job: Option<FoldJob> = None;
    // Every rule ever added, so keys also probe where deleted rules were.
    let mut seen: Vec<AclRule> = Vec::new();
    // Published classifiers with the rules they were published for: they must never change.
    let mut published: Vec<(Acl, Model)> = Vec::new();
    for op in ops {
        match op {
            Op::Add(p, f) => {
                action += 1;
                let r = AclRule { priority: *p, fields: f.clone(), action };
                let new = !model.0.iter().any(|x| x.fields == r.fields && x.priority == r.priority);
                prop_assert_eq!(live.insert(r.clone()).unwrap(), new);
                seen.push(r.clone());
                model.add(r);
            }
            Op::Modify(n) if !model.0.is_empty() => {
                action += 1;
                let mut r = model.0[n % model.0.len()].clone();
                r.action = action;
                prop_assert!(!live.insert(r.clone()).unwrap());
                model.add(r);
            }
            Op::Del(n) if !model.0.is_empty() => {
                let f = model.0[n % model.0.len()].fields.clone();
                prop_assert_eq!(live.remove(&f), model.del(&f));
            }
            Op::Modify(_) | Op::Del(_) => {}
            Op::DelAny(f) => prop_assert_eq!(live.remove(f), model.del(f)),
            Op::Commit => {
                let acl = live.commit();
                let ks = keys(&seen, widths, seeds);
                same(&acl, &model, &ks)?;
                published.push((acl, model.clone()));
            }
            Op::StartFold => {
                if job.is_none() {
                    job = live.fold_job();
                }
            }
            Op::FinishFold => {
                if let Some(j) = job.take() {
                    // A fold cut before a clear or a full rebuild is refused.
                    live.finish_fold(j.run());
                }
            }
            Op::Clear => {
                live.clear();
                model = Model::default();
            }
        }
        prop_assert_eq!(live.len(), model.0.len());
    }
    prop_assert_eq!(live.rules(), model.0.clone());
    let acl = live.commit();
    let ks = keys(&seen, widths, seeds);
    same(&acl, &model, &ks)?;
    for (acl, m) in &published {
        same(acl, m, &ks)?;
    }
    // A fold still under way finishes; the changes made after it was cut stay on top.
    if let Some(j) = job.take() {
        live.finish_fold(j.run());
        same(&live.commit(), &model, &ks)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Five-tuple keys; small fold and rebuild bounds, so most commits publish a delta and
    /// some rebuild in full.
    #[test]
    fn five_tuple_changes_equal_linear_scan(
        cfg in config(classbench::FIELD_WIDTHS.to_vec()),
        ops in ops(classbench::FIELD_WIDTHS.to_vec(), 160),
        seeds in prop::collection::vec(any::<(u32, u32, u8)>(), 1..=128),
        fold_at in 1usize..40, rebuild_at in prop_oneof![3 => Just(1_000_000usize), 1 => 8usize..60],
    ) {
        run(cfg, &classbench::FIELD_WIDTHS, &ops, &seeds, (fold_at, rebuild_at))?;
    }

    /// Narrow fields: rules overlap and cover each other often, so deleted rules have pruned
    /// others.
    #[test]
    fn narrow_field_changes_equal_linear_scan(
        cfg in config(vec![3, 8, 1]),
        ops in ops(vec![3, 8, 1], 120),
        seeds in prop::collection::vec(any::<(u32, u32, u8)>(), 1..=128),
        fold_at in 1usize..40,
    ) {
        run(cfg, &[3, 8, 1], &ops, &seeds, (fold_at, 1_000_000))?;
    }
}

/// A wide rule in front of 400 narrow ones (in the same partition: all are specific in the
/// first field) prunes them from every leaf it covers. Deleting it
/// leaves those leaves ending in a tombstone: lookups there take the exact fallback, which
/// finds each narrow rule again, and the delete asks for a fold at once; after the fold, no
/// lookup needs the fallback.
#[test]
fn deleting_a_rule_that_pruned_others_stays_exact() {
    let cfg = AclConfig::new(vec![32, 16]);
    let mut live = LiveAcl::new(cfg).unwrap();
    let wide = vec![FieldMatch::prefix(0x0a00_0000, 16, 32), FieldMatch::ANY];
    live.insert(AclRule { priority: 0, fields: wide.clone(), action: 9999 }).unwrap();
    let narrow: Vec<AclRule> = (0..400u32)
        .map(|i| AclRule {
            priority: 1,
            fields: vec![FieldMatch::exact(0x0a00_0000 | (i * 7919) & 0xffff), FieldMatch::exact(i as u16 as u32)],
            action: i,
        })
        .collect();
    for r in &narrow {
        live.insert(r.clone()).unwrap();
    }
    let before = live.rebuild();
    assert_eq!(before.stats().deleted, 0);
    for r in narrow.iter().step_by(37) {
        let FieldMatch::Range { lo, .. } = r.fields[0] else { panic!() };
        assert_eq!(before.classify(&[lo, 5]).map(|x| x.0), Some(9999));
    }
    assert_eq!(live.remove(&wide), 1);
    assert!(live.wants_fold(), "a deleted pruning rule brings the fold forward");
    let after = live.commit();
    let st = after.stats();
    assert_eq!((st.rules, st.added, st.deleted), (400, 0, 1), "{st:?}");
    let mut fallbacks = 0;
    for r in &narrow {
        let (FieldMatch::Range { lo: a, .. }, FieldMatch::Range { lo: p, .. }) = (r.fields[0], r.fields[1]) else { panic!() };
        let (got, scanned) = after.classify_counted(&[a, p]);
        assert_eq!(got.map(|x| x.0), Some(r.action), "{r:?}");
        assert_eq!(after.classify_counted(&[a, p ^ 1]).0, None);
        fallbacks += usize::from(scanned > 0);
    }
    assert!(fallbacks > 0, "the wide rule pruned nothing: the test no longer tests the fallback");
    let job = live.fold_job().unwrap();
    assert_eq!(job.len(), 400);
    assert!(live.finish_fold(job.run()));
    let folded = live.commit();
    assert_eq!(folded.stats().deleted, 0);
    for r in &narrow {
        let (FieldMatch::Range { lo: a, .. }, FieldMatch::Range { lo: p, .. }) = (r.fields[0], r.fields[1]) else { panic!() };
        assert_eq!(folded.classify_counted(&[a, p]), (Some((r.action, r.action + 1)), 0));
    }
}

/// ClassBench-like rule sets of every family: 2,000 rules built in full, then 300 changes in
/// commits of 10 with a fold cut after the first 160 and finished after the next 100; every
/// commit classifies a trace like the linear scan of the rules live then.
#[test]
fn generated_sets_through_changes_and_a_fold() {
    for kind in [Kind::Acl, Kind::Fw, Kind::Ipc] {
        let all = classbench::generate(kind, 2300, 5);
        let mut live = LiveAcl::new(AclConfig::five_tuple()).unwrap();
        let mut model = Model::default();
        for (i, r) in all.iter().take(2000).enumerate() {
            let r = AclRule { action: i as u32, ..r.clone() };
            live.insert(r.clone()).unwrap();
            model.add(r);
        }
        live.rebuild();
        let trace = classbench::trace(&all, 3000, 6);
        let mut job = None;
        for step in 0..30usize {
            for k in 0..10usize {
                let i = 2000 + step * 10 + k;
                if k % 3 == 0 {
                    // Delete an old rule (some of them prune others).
                    let f = model.0[(i * 7) % model.0.len()].fields.clone();
                    assert_eq!(live.remove(&f), model.del(&f));
                } else {
                    let r = AclRule { action: i as u32, ..all[i].clone() };
                    live.insert(r.clone()).unwrap();
                    model.add(r);
                }
            }
            if step == 15 {
                job = live.fold_job();
                assert!(job.is_some(), "{kind:?}: 160 changes are past the fold bound of 2,000 rules");
            }
            if step == 25 {
                assert!(live.finish_fold(job.take().unwrap().run()));
                let (added, deleted) = live.delta_len();
                assert!(added <= 67 && deleted <= 100, "{kind:?}: the delta is the 100 changes since the cut: {added} {deleted}");
            }
            let acl = live.commit();
            let twin = LinearAcl::new(model.0.clone());
            for k in &trace {
                assert_eq!(acl.classify(k).map(|x| x.0), twin.classify(k).map(|x| x.0), "{kind:?} step {step} key {k:?}");
            }
        }
    }
}

/// A fold handed out before a clear or a full rebuild is refused afterwards.
#[test]
fn a_stale_fold_is_refused() {
    let rule = |a: u32| AclRule { priority: a, fields: vec![FieldMatch::exact(a)], action: a };
    let mut live = LiveAcl::new(AclConfig::new(vec![32])).unwrap().with_limits(1, 1000);
    live.insert(rule(1)).unwrap();
    let job = live.fold_job().unwrap();
    live.clear();
    assert!(!live.finish_fold(job.run()));
    live.insert(rule(2)).unwrap();
    let job = live.fold_job().unwrap();
    live.rebuild();
    assert!(!live.finish_fold(job.run()));
    assert_eq!(live.commit().classify(&[2]).map(|x| x.0), Some(2));
    assert_eq!(live.commit().classify(&[1]), None);
}

/// The overlay kept in pieces (one per commit that added rules): many commits of a few rules
/// each (more pieces than are kept, so pieces merge), deletes and action changes of rules in
/// pieces and of rules not yet compiled, and a fold cut and finished among them (the pieces
/// compiled after the cut stay over the new base). After every commit the classifier answers
/// like the linear scan of the rules live, and its overlay holds exactly the rules added since
/// the base (none twice, none missing).
#[test]
fn an_overlay_in_pieces_stays_exact() {
    for kind in [Kind::Acl, Kind::Fw, Kind::Ipc] {
        let all = classbench::generate(kind, 1400, 11);
        // A fold is wanted from 40 changes on, and handed out only when asked for below.
        let mut live = LiveAcl::new(AclConfig::five_tuple()).unwrap().with_limits(40, 1_000_000);
        let mut model = Model::default();
        for (i, r) in all.iter().take(1000).enumerate() {
            let r = AclRule { action: i as u32, ..r.clone() };
            live.insert(r.clone()).unwrap();
            model.add(r);
        }
        live.rebuild();
        let trace = classbench::trace(&all, 2000, 12);
        let mut job = None;
        let mut added: Vec<AclRule> = Vec::new();
        let mut action = 100_000u32;
        for step in 0..40usize {
            for k in 0..10usize {
                let i = 1000 + step * 10 + k;
                let r = AclRule { action: i as u32, ..all[i].clone() };
                live.insert(r.clone()).unwrap();
                model.add(r.clone());
                added.push(r);
            }
            // Every fifth commit, delete one rule added two commits ago (in a piece) and one
            // added just now (not compiled yet); every seventh, give a rule of an earlier commit
            // a new action. The other pieces stay as compiled.
            for back in if step % 5 == 0 { [25usize, 1].as_slice() } else { &[] } {
                let back = *back;
                if let Some(r) = added.len().checked_sub(back).map(|j| added.remove(j)) {
                    assert_eq!(live.remove(&r.fields), model.del(&r.fields));
                }
            }
            if let Some(r) = added.len().checked_sub(15).and_then(|j| added.get(j)).filter(|_| step % 7 == 1) {
                if model.0.iter().any(|x| x.fields == r.fields && x.priority == r.priority) {
                    action += 1;
                    let r = AclRule { action, ..r.clone() };
                    live.insert(r.clone()).unwrap();
                    model.add(r);
                }
            }
            // Two folds: one finished two commits after its cut (pieces from before the cut are
            // still there), one ten commits after (pieces merged meanwhile).
            if step == 12 || step == 20 {
                job = live.fold_job();
                assert!(job.is_some());
            }
            if step == 14 || step == 30 {
                assert!(live.finish_fold(job.take().unwrap().run()));
            }
            let acl = live.commit();
            assert_eq!(acl.stats().added, live.delta_len().0, "{kind:?} step {step}: the pieces hold the added rules");
            let twin = LinearAcl::new(model.0.clone());
            for k in &trace {
                assert_eq!(acl.classify(k).map(|x| x.0), twin.classify(k).map(|x| x.0), "{kind:?} step {step} key {k:?}");
            }
        }
    }
}
