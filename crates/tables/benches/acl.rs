//! ACL lookup throughput and build time on generated ClassBench-like rule sets.
//!
//! `cargo bench -p fastpath-tables --bench acl`: 1k and 10k rules of the acl, fw and ipc
//! families; lookups of a 64k-key trace, batch form in batches of 256 and one key at a time.
//! `-- acl-commit`: the cost of committing a change to a [`LiveAcl`] of 6,000 rules (the
//! lab's `update-under-load` table) against a full build of the same rules. `-- acl-delta`:
//! lookups through a delta (10k rules, 100 deleted and 100 added since the build), with how
//! often the exact fallback for deleted pruning rules runs and how much it checks (printed).
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use fastpath_tables::acl::classbench::{self, Kind};
use fastpath_tables::acl::{bench_setup, Acl, AclConfig, AclRule, FieldMatch, LiveAcl};

const TRACE: usize = 1 << 16;

fn lookups(c: &mut Criterion) {
    for kind in [Kind::Acl, Kind::Fw, Kind::Ipc] {
        for n in [1_000, 10_000] {
            let (acl, trace, build) = bench_setup(kind, n, TRACE, 1);
            let st = acl.stats();
            eprintln!(
                "{}{}: build {:?}, {} trees, {} nodes, {} leaf refs, depth {}, {} KiB",
                kind.name(),
                n,
                build,
                st.trees,
                st.nodes,
                st.leaf_refs,
                st.max_depth,
                st.bytes / 1024
            );
            let mut g = c.benchmark_group(format!("acl/{}{}", kind.name(), n));
            g.throughput(Throughput::Elements(TRACE as u64));
            let mut out = vec![None; 256];
            g.bench_function("batch256", |b| {
                b.iter(|| {
                    let mut hits = 0usize;
                    for keys in trace.chunks(256) {
                        acl.classify_batch(keys, &mut out);
                        hits += out.iter().filter(|o| o.is_some()).count();
                    }
                    black_box(hits)
                })
            });
            g.bench_function("single", |b| {
                b.iter(|| {
                    let mut hits = 0usize;
                    for k in &trace {
                        hits += usize::from(acl.classify(black_box(k)).is_some());
                    }
                    black_box(hits)
                })
            });
            g.finish();
        }
    }
}

fn build(c: &mut Criterion) {
    let mut g = c.benchmark_group("acl-build");
    g.sample_size(10);
    for kind in [Kind::Acl, Kind::Fw, Kind::Ipc] {
        let rules = classbench::generate(kind, 10_000, 1);
        g.bench_function(format!("{}10000", kind.name()), |b| {
            b.iter_batched(|| rules.clone(), |r| black_box(classbench::build(&r).map(|a: Acl| a.len())), BatchSize::LargeInput)
        });
    }
    g.finish();
}

/// Rule `k` of `update-under-load`: deny UDP to one /32 in 10.128.0.0/9, ports 1000..1999.
fn lab_rule(k: u32, priority: u32) -> AclRule {
    let dst = 0x0a80_0000 | (k & 0x7f_ffff);
    AclRule {
        priority,
        fields: vec![FieldMatch::ANY, FieldMatch::exact(dst), FieldMatch::Masked { value: 17, mask: 0xff }, FieldMatch::range(1000, 1999)],
        action: 1,
    }
}

/// One write of `update-under-load` (50 rules added, the 50 added `keep` writes earlier
/// deleted, as `crates/lab/src/tests/update.rs` writes them) and what the control thread does
/// for it: the changes, the commit, installing a full build that finished in the background
/// (and committing again), handing out the next one. The full builds themselves run outside
/// the timing, between writes, as on their own thread. A table of 1,000 base rules and 5,000
/// written ones; against a full build of the same 6,000 rules.
fn commit(c: &mut Criterion) {
    let cfg = AclConfig::new(vec![32, 32, 8, 16]);
    let mut live = LiveAcl::new(cfg.clone()).unwrap();
    for k in 0..1000 {
        live.insert(lab_rule(k, 1000 + k)).unwrap();
    }
    let keep = 100u32;
    let mut w = 0u32;
    let write = |live: &mut LiveAcl, w: u32| {
        if w >= keep {
            for k in 0..50 {
                live.remove(&lab_rule(1000 + (w - keep) * 50 + k, 0).fields);
            }
        }
        for k in 0..50 {
            let id = w * 50 + k;
            live.insert(lab_rule(1000 + id, 100_000 + id)).unwrap();
        }
    };
    while w < keep {
        write(&mut live, w);
        w += 1;
    }
    live.rebuild();
    let mut g = c.benchmark_group("acl-commit");
    g.sample_size(20);
    let mut finished = None;
    g.bench_function("write100-live6000", |b| {
        b.iter_custom(|iters| {
            let mut took = std::time::Duration::ZERO;
            for _ in 0..iters {
                let t0 = std::time::Instant::now();
                write(&mut live, w);
                w += 1;
                black_box(live.commit().len());
                if let Some(f) = finished.take() {
                    if live.finish_fold(f) {
                        black_box(live.commit().len());
                    }
                }
                let job = live.fold_job();
                took += t0.elapsed();
                finished = job.map(|j| j.run());
            }
            took
        })
    });
    g.bench_function("one-rule-live6000", |b| {
        b.iter(|| {
            live.insert(lab_rule(9_000_000, 7)).unwrap();
            let a = black_box(live.commit()).len();
            live.remove(&lab_rule(9_000_000, 7).fields);
            a + black_box(live.commit()).len()
        })
    });
    let rules = live.rules();
    g.bench_function("full-build-live6000", |b| b.iter(|| black_box(Acl::build(&cfg, &rules).map(|a| a.len()))));
    g.finish();
}

/// Lookups of a 64k-key trace through a 10k-rule classifier with a delta: 100 rules deleted
/// (every 100th; some had pruned others) and 100 added since the build.
fn delta_lookups(c: &mut Criterion) {
    for kind in [Kind::Acl, Kind::Fw, Kind::Ipc] {
        let rules = classbench::generate(kind, 10_000, 1);
        let trace = classbench::trace(&rules, TRACE, 2);
        let mut live = LiveAcl::new(AclConfig::five_tuple()).unwrap();
        for (i, r) in rules.iter().enumerate() {
            live.insert(AclRule { action: i as u32, ..r.clone() }).unwrap();
        }
        live.rebuild();
        for r in rules.iter().step_by(100) {
            live.remove(&r.fields);
        }
        for (i, r) in classbench::generate(kind, 100, 3).into_iter().enumerate() {
            live.insert(AclRule { priority: (i * 97) as u32, action: 20_000 + i as u32, ..r }).unwrap();
        }
        let acl = live.commit();
        let (mut fell, mut checked) = (0usize, 0usize);
        for k in &trace {
            let (_, n) = acl.classify_counted(k);
            fell += usize::from(n > 0);
            checked += n;
        }
        let st = acl.stats();
        eprintln!(
            "{}10000 delta ({} added, {} deleted): {:.2} % of lookups take the fallback, checking {:.0} rules each on average",
            kind.name(),
            st.added,
            st.deleted,
            100.0 * fell as f64 / TRACE as f64,
            checked as f64 / fell.max(1) as f64
        );
        let mut g = c.benchmark_group(format!("acl-delta/{}10000", kind.name()));
        g.throughput(Throughput::Elements(TRACE as u64));
        g.bench_function("single", |b| {
            b.iter(|| {
                let mut hits = 0usize;
                for k in &trace {
                    hits += usize::from(acl.classify(black_box(k)).is_some());
                }
                black_box(hits)
            })
        });
        g.finish();
    }
}

criterion_group!(benches, lookups, build, commit, delta_lookups);
criterion_main!(benches);
