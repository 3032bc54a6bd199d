//! Strategies and key generators shared by the classifier tests.
#![allow(dead_code)]

use fastpath_tables::acl::{AclRule, FieldMatch};
use proptest::prelude::*;

pub fn wmax(w: u8) -> u32 {
    if w >= 32 {
        u32::MAX
    } else {
        (1 << w) - 1
    }
}

/// A value of a `w`-bit field, clustered on a few anchors so rules overlap.
pub fn value(w: u8) -> impl Strategy<Value = u32> {
    let m = wmax(w);
    prop_oneof![
        3 => (0usize..4, any::<u32>()).prop_map(move |(a, noise)| {
            let anchor = [0u32, m / 3, m / 2, m][a];
            (anchor ^ (noise & 0xff)) & m
        }),
        1 => any::<u32>().prop_map(move |v| v & m),
    ]
}

/// One field match of a `w`-bit field: wildcard, exact, prefix, range or arbitrary mask.
pub fn field(w: u8) -> impl Strategy<Value = FieldMatch> {
    let m = wmax(w);
    prop_oneof![
        2 => Just(FieldMatch::ANY),
        1 => Just(FieldMatch::range(0, m)),
        2 => value(w).prop_map(FieldMatch::exact),
        3 => (value(w), 0..=w).prop_map(move |(v, len)| FieldMatch::prefix(v, len, w)),
        3 => (value(w), value(w)).prop_map(|(a, b)| FieldMatch::range(a.min(b), a.max(b))),
        2 => (value(w), any::<u32>()).prop_map(move |(v, mask)| {
            let mask = mask & m;
            FieldMatch::Masked { value: v & mask, mask }
        }),
    ]
}

/// Keys: uniform random, rule-derived (inside a rule; on and just past its edges).
pub fn keys<const N: usize>(rules: &[AclRule], widths: &[u8; N], seeds: &[(u32, u32, u8)]) -> Vec<[u32; N]> {
    seeds
        .iter()
        .map(|&(pick, noise, how)| {
            let mut k = [0u32; N];
            let rule = rules.get(pick as usize % rules.len().max(1));
            for (d, v) in k.iter_mut().enumerate() {
                let m = wmax(widths[d]);
                let noise = noise.rotate_left(7 * d as u32);
                *v = match (rule.map(|r| r.fields[d]), how % 4) {
                    (None, _) | (_, 0) => noise & m,
                    (Some(f), 1) => {
                        let (lo, hi) = f.bounds(widths[d]);
                        match f {
                            FieldMatch::Masked { value, mask } => value | (noise & !mask & m),
                            _ => lo + (noise % (hi - lo).saturating_add(1).max(1)),
                        }
                    }
                    (Some(f), 2) => f.bounds(widths[d]).0.wrapping_sub(noise & 1) & m,
                    (Some(f), _) => f.bounds(widths[d]).1.wrapping_add(noise & 1) & m,
                };
            }
            k
        })
        .collect()
}
