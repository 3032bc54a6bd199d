//! ACL lookup throughput and build time on generated ClassBench-like rule sets.
//!
//! `cargo bench -p fastpath-tables --bench acl`: 1k and 10k rules of the acl, fw and ipc
//! families; lookups of a 64k-key trace, batch form in batches of 256 and one key at a time.
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use fastpath_tables::acl::classbench::{self, Kind};
use fastpath_tables::acl::{bench_setup, Acl};

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

criterion_group!(benches, lookups, build);
criterion_main!(benches);
