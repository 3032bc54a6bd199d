//! The ACL classifier against its linear-scan twin on random rule sets and keys.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fastpath_tables::acl::classbench::{self, Kind};
use fastpath_tables::acl::{Acl, AclConfig, AclRule};
use fastpath_tables::reference::acl::LinearAcl;
use proptest::prelude::*;

mod common;
use common::{field, keys};

fn rules(widths: Vec<u8>, max: usize) -> impl Strategy<Value = Vec<AclRule>> {
    let one = (0u32..8, widths.iter().map(|&w| field(w)).collect::<Vec<_>>(), any::<u32>())
        .prop_map(|(priority, fields, action)| AclRule { priority, fields, action });
    prop::collection::vec(one, 0..max)
}

fn config(widths: Vec<u8>) -> impl Strategy<Value = AclConfig> {
    (1usize..10, any::<bool>(), prop_oneof![3 => Just(1usize << 24), 1 => 16usize..400])
        .prop_map(move |(leaf_size, partition, max_words)| AclConfig { leaf_size, partition, max_words, ..AclConfig::new(widths.clone()) })
}

fn check<const N: usize>(cfg: &AclConfig, rules: &[AclRule], seeds: &[(u32, u32, u8)], widths: &[u8; N]) -> Result<(), TestCaseError> {
    agree(&Acl::build(cfg, rules).unwrap(), None, rules, seeds, widths)
}

/// `fast` (one key at a time and in a batch) and `other` (one key at a time) classify the keys
/// made from `seeds` as the linear scan of `rules` does.
fn agree<const N: usize>(
    fast: &Acl,
    other: Option<&Acl>,
    rules: &[AclRule],
    seeds: &[(u32, u32, u8)],
    widths: &[u8; N],
) -> Result<(), TestCaseError> {
    let twin = LinearAcl::new(rules.to_vec());
    let ks = keys(rules, widths, seeds);
    let mut out = vec![None; ks.len()];
    prop_assert_eq!(fast.classify_batch(&ks, &mut out), ks.len());
    for (k, got) in ks.iter().zip(&out) {
        let want = twin.classify(k);
        prop_assert_eq!(fast.classify(k), want, "key {:?}", k);
        prop_assert_eq!(*got, want, "batch, key {:?}", k);
        if let Some(other) = other {
            prop_assert_eq!(other.classify(k), want, "other, key {:?}", k);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn five_tuple_equals_linear_scan(
        cfg in config(classbench::FIELD_WIDTHS.to_vec()),
        rules in rules(classbench::FIELD_WIDTHS.to_vec(), 120),
        seeds in prop::collection::vec(any::<(u32, u32, u8)>(), 0..=256),
    ) {
        check(&cfg, &rules, &seeds, &classbench::FIELD_WIDTHS)?;
    }

    #[test]
    fn narrow_fields_equal_linear_scan(
        cfg in config(vec![3, 8, 1]),
        rules in rules(vec![3, 8, 1], 60),
        seeds in prop::collection::vec(any::<(u32, u32, u8)>(), 0..=256),
    ) {
        check(&cfg, &rules, &seeds, &[3, 8, 1])?;
    }

    #[test]
    fn one_wide_field_equals_linear_scan(
        cfg in config(vec![32]),
        rules in rules(vec![32], 200),
        seeds in prop::collection::vec(any::<(u32, u32, u8)>(), 0..=256),
    ) {
        check(&cfg, &rules, &seeds, &[32])?;
    }

    /// Sets of up to 63 rules over the switch's key (port, source, destination, protocol,
    /// destination port) take the bit-vector classifier; it equals the linear scan and the
    /// trees of the same rules built without it, one key at a time and in batches.
    #[test]
    fn bit_vectors_equal_linear_scan_and_trees(
        rules in rules(vec![9, 32, 32, 8, 16], 64),
        seeds in prop::collection::vec(any::<(u32, u32, u8)>(), 0..=256),
    ) {
        const W: [u8; 5] = [9, 32, 32, 8, 16];
        let fast = Acl::build(&AclConfig::new(W.to_vec()), &rules).unwrap();
        let trees = Acl::build(&AclConfig { bit_vectors: false, ..AclConfig::new(W.to_vec()) }, &rules).unwrap();
        prop_assert!(!trees.is_bit_vector());
        // A mask with free bits above a set one (not a range) can split every block of a trie,
        // a 16-bit port's as well as an address's, and the build may give up. Ranges and
        // prefixes split at most two blocks per level; with values clustered as `value` makes
        // them, sets of them stay within the budget.
        let plain = rules.iter().all(|r| r.fields.iter().zip(W).all(|(f, w)| f.is_range(w)));
        if (1..=63).contains(&rules.len()) && plain {
            prop_assert!(fast.is_bit_vector());
        }
        agree(&fast, Some(&trees), &rules, &seeds, &W)?;
    }

    /// Generated ClassBench-like sets of every family, traces included, at batch lengths
    /// 0..=256 (the batch form handles 16-key lanes and the remainder).
    #[test]
    fn generated_sets_equal_linear_scan(
        kind in prop_oneof![Just(Kind::Acl), Just(Kind::Fw), Just(Kind::Ipc)],
        n in 0usize..400, seed in any::<u64>(), batch in 0usize..=256,
    ) {
        let rules = classbench::generate(kind, n, seed);
        let trace = classbench::trace(&rules, batch, seed);
        let fast = classbench::build(&rules).unwrap();
        let twin = LinearAcl::new(rules);
        let mut out = vec![Some((0, 0)); batch];
        prop_assert_eq!(fast.classify_batch(&trace, &mut out), batch);
        for (k, got) in trace.iter().zip(&out) {
            prop_assert_eq!(*got, twin.classify(k), "key {:?}", k);
        }
    }
}

/// The committed 1k-rule file is what the generator makes (see testdata/rules/README.md), and
/// it classifies like the linear scan. `REGENERATE_RULES=1` rewrites it.
#[test]
fn acl1k_file_matches_generator() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/rules/acl1k.txt");
    let rules = classbench::generate(Kind::Acl, 1000, 1);
    let text = classbench::format(&rules).unwrap();
    if std::env::var_os("REGENERATE_RULES").is_some() {
        std::fs::write(path, &text).unwrap();
    }
    let file = std::fs::read_to_string(path).unwrap();
    assert_eq!(file, text, "testdata/rules/acl1k.txt is stale");
    let parsed = classbench::parse(&file).unwrap();
    assert_eq!(parsed, rules);
    let acl = classbench::build(&parsed).unwrap();
    let twin = LinearAcl::new(parsed.clone());
    let trace = classbench::trace(&parsed, 5000, 7);
    let mut hits = 0;
    for k in &trace {
        let got = acl.classify(k);
        assert_eq!(got, twin.classify(k), "{k:?}");
        hits += usize::from(got.is_some());
    }
    assert!(hits > 4000, "{hits}");
}

/// 10k rules of each family: tree depth stays small and memory within the documented bound.
#[test]
fn ten_thousand_rules_stay_shallow() {
    for kind in [Kind::Acl, Kind::Fw, Kind::Ipc] {
        let (acl, trace, _) = fastpath_tables::acl::bench_setup(kind, 10_000, 2000, 11);
        let st = acl.stats();
        assert!(st.max_depth <= 48, "{kind:?} {st:?}");
        assert!(st.leaf_refs < 40 * 10_000, "{kind:?} {st:?}");
        let twin = LinearAcl::new(classbench::generate(kind, 10_000, 11));
        for k in trace.iter().step_by(10) {
            assert_eq!(acl.classify(k), twin.classify(k));
        }
    }
}
