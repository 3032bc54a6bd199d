//! IPv6 longest-prefix match: a 24-8-8-… multibit trie (DPDK `rte_lpm6` layout; see the
//! [`crate::lpm`] module doc).
//!
//! A /48 (the common IPv6 routing-table length) resolves in 4 loads, a /32 in 2, a /24 or
//! shorter in 1, a /128 in 14.

use std::net::Ipv6Addr;

use fastpath_packet::batch::{Lanes, BATCH_MAX};
use fastpath_packet::prefetch::prefetch_read;

use super::{Dir, LpmError, EXT};
use crate::MISS;

/// Default most groups (1.25 KiB each, allocated on demand).
pub const LPM6_MAX_GROUPS: u32 = 1 << 20;
/// Bits below the root's 24: `addr >> ROOT_SHIFT` is the root index.
const ROOT_SHIFT: u32 = 128 - 24;

/// IPv6 LPM table mapping prefixes to `u32` values (0 ..= [`super::VALUE_MAX`]).
#[derive(Clone)]
pub struct Lpm6 {
    dir: Dir<{ 1 << 24 }>,
}

impl Default for Lpm6 {
    fn default() -> Self {
        Self::new()
    }
}

impl Lpm6 {
    /// An empty table with at most [`LPM6_MAX_GROUPS`] groups. Allocates 80 MiB (zeroed
    /// lazily by the OS). Control thread.
    pub fn new() -> Self {
        Self::with_max_groups(LPM6_MAX_GROUPS)
    }
    /// An empty table with at most `groups` groups. Control thread.
    pub fn with_max_groups(groups: u32) -> Self {
        Lpm6 { dir: Dir::new(128, groups) }
    }

    /// Adds `prefix/len → value`, replacing the value if the route exists. Host bits beyond
    /// `len` are ignored. Control thread.
    ///
    /// # Errors
    /// `BadLength` (len > 128), `ValueTooLarge` (value > `VALUE_MAX`), `TableFull` (no group
    /// left); the table is unchanged.
    pub fn insert(&mut self, prefix: u128, len: u8, value: u32) -> Result<(), LpmError> {
        self.dir.insert(prefix, len, value)
    }
    /// [`Self::insert`] taking an [`Ipv6Addr`].
    ///
    /// # Errors
    /// As [`Self::insert`].
    pub fn insert_addr(&mut self, prefix: Ipv6Addr, len: u8, value: u32) -> Result<(), LpmError> {
        self.insert(u128::from(prefix), len, value)
    }
    /// Removes `prefix/len`, returning its value. Control thread.
    ///
    /// # Errors
    /// `NotFound` if the route is absent, `BadLength` if len > 128.
    pub fn remove(&mut self, prefix: u128, len: u8) -> Result<u32, LpmError> {
        self.dir.remove(prefix, len)
    }
    /// The value of exactly the route `prefix/len`, if present. Control thread.
    pub fn get(&self, prefix: u128, len: u8) -> Option<u32> {
        self.dir.get(prefix, len)
    }
    /// Number of routes.
    pub fn len(&self) -> usize {
        self.dir.len()
    }
    /// True when there is no route.
    pub fn is_empty(&self) -> bool {
        self.dir.len() == 0
    }
    /// Groups in use.
    pub fn groups(&self) -> usize {
        self.dir.groups()
    }
    /// Bytes of memory held (approximately).
    pub fn memory_bytes(&self) -> usize {
        self.dir.memory_bytes()
    }
    /// Every route as (prefix, len, value), in no particular order. Control thread.
    pub fn routes(&self) -> impl Iterator<Item = (u128, u8, u32)> + '_ {
        self.dir.rules()
    }

    /// The value of the longest prefix matching `addr`. Worker; never panics, never allocates.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        let mut e = self.dir.root[root_index(addr)];
        let mut shift = ROOT_SHIFT;
        while e & EXT != 0 && shift >= 8 {
            shift -= 8;
            let word = if shift >= 64 { (addr >> 64) as u64 } else { addr as u64 };
            e = self.dir.tbl8.get(group_index(e, word, shift)).copied().unwrap_or(0);
        }
        entry_value(e)
    }

    /// `out[i] = lookup(addrs[i])` for `i < min(addrs.len(), out.len())`; returns the number
    /// of hits. Walks [`BATCH_MAX`] addresses at a time level by level (see
    /// [`Self::lookup_lanes`]). Worker; never panics, never allocates.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<u32>]) -> u64 {
        let mut hits = 0;
        let mut keys = [0u128; BATCH_MAX];
        let mut res = [MISS; BATCH_MAX];
        for (ac, oc) in addrs.chunks(BATCH_MAX).zip(out.chunks_mut(BATCH_MAX)) {
            keys[..ac.len()].copy_from_slice(ac);
            hits += self.lookup_lanes(&keys, Lanes::first(ac.len()), &mut res);
            for (o, r) in oc.iter_mut().zip(res) {
                *o = (r != MISS).then_some(r);
            }
        }
        hits
    }

    /// Looks up `addrs[i]` for each slot `i` in `lanes`, writing `out[i]`; other slots are
    /// untouched. Returns the number of hits. The pipeline's table stage calls this once per
    /// batch, as it calls [`super::Lpm4::lookup_lanes`].
    ///
    /// The batch is walked level by level, software-pipelined: one pass prefetches every
    /// lane's root entry; each later pass loads, for every lane still inside a group, the entry
    /// prefetched by the previous pass, and prefetches the next level's. The dependent loads of
    /// one address (a /48 is 4 of them, each a likely cache miss) so overlap with those of the
    /// whole batch instead of serialising, and each load comes a whole pass after its prefetch.
    /// Every lane still inside a group at pass `k` is at trie level `k`, so a pass has one shift
    /// for all lanes. Worker; never panics, never allocates.
    pub fn lookup_lanes(&self, addrs: &[u128; BATCH_MAX], lanes: Lanes, out: &mut [u32; BATCH_MAX]) -> u64 {
        // Pass 0: prefetch every lane's root entry.
        for i in lanes {
            prefetch_read(&self.dir.root[root_index(addrs[i])]);
        }
        // Pass 1: load the root entries; prefetch the first group entry of the lanes that go on.
        let mut e = [0u32; BATCH_MAX];
        let mut at = [0usize; BATCH_MAX];
        let mut pending = Lanes::NONE;
        let mut shift = ROOT_SHIFT - 8;
        for i in lanes {
            let x = self.dir.root[root_index(addrs[i])];
            e[i] = x;
            if x & EXT != 0 {
                let g = group_index(x, (addrs[i] >> 64) as u64, shift - 64);
                at[i] = g;
                if let Some(r) = self.dir.tbl8.get(g) {
                    prefetch_read(r);
                }
                pending.insert(i);
            }
        }
        // Pass k: load level k, prefetch level k + 1. Groups exist only above the last 8 bits,
        // so `shift` never needs to go below 0; the bound keeps a broken invariant finite.
        while !pending.is_empty() && shift >= 8 {
            shift -= 8;
            let mut next = Lanes::NONE;
            for i in pending {
                let x = self.dir.tbl8.get(at[i]).copied().unwrap_or(0);
                e[i] = x;
                if x & EXT != 0 {
                    // The byte at `shift` lies in one 64-bit half of the address.
                    let word = if shift >= 64 { (addrs[i] >> 64) as u64 } else { addrs[i] as u64 };
                    let g = group_index(x, word, shift);
                    at[i] = g;
                    if let Some(r) = self.dir.tbl8.get(g) {
                        prefetch_read(r);
                    }
                    next.insert(i);
                }
            }
            pending = next;
        }
        // The last level's loads (lanes whose last prefetch was a group entry).
        for i in pending {
            e[i] = self.dir.tbl8.get(at[i]).copied().unwrap_or(0);
        }
        let mut hits = 0;
        for i in lanes {
            let v = entry_value(e[i]);
            out[i] = v.unwrap_or(MISS);
            hits += u64::from(v.is_some());
        }
        hits
    }
}

/// Index of `addr`'s root entry (its top 24 bits; always in range).
#[inline]
fn root_index(addr: u128) -> usize {
    (addr >> ROOT_SHIFT) as usize
}

/// Index in `tbl8` of the entry, in the group that `e` (an EXT entry) points to, for the byte
/// of `word` at bit `shift` (taken mod 64).
#[inline]
fn group_index(e: u32, word: u64, shift: u32) -> usize {
    ((e & !EXT) as usize) << 8 | ((word >> (shift & 63)) as usize & 0xff)
}

/// The route value of a final entry (0 = no route; an EXT entry left by a broken invariant
/// reads as a miss).
#[inline]
fn entry_value(e: u32) -> Option<u32> {
    if e & EXT != 0 {
        None
    } else {
        e.checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::lpm::RefLpm;
    use proptest::prelude::*;

    fn ip(s: &str) -> u128 {
        s.parse::<Ipv6Addr>().map(u128::from).unwrap_or(0)
    }

    #[test]
    fn nested_routes_down_to_host() {
        let mut t = Lpm6::new();
        t.insert(ip("2001:db8::"), 32, 1).ok();
        t.insert(ip("2001:db8:1::"), 48, 2).ok();
        t.insert(ip("2001:db8:1:2::"), 64, 3).ok();
        t.insert(ip("2001:db8:1:2::1"), 128, 4).ok();
        t.insert(ip("2001:db8:1:2::"), 127, 5).ok();
        assert_eq!(t.lookup(ip("2001:db8:ffff::1")), Some(1));
        assert_eq!(t.lookup(ip("2001:db8:1:ffff::1")), Some(2));
        assert_eq!(t.lookup(ip("2001:db8:1:2::7")), Some(3));
        assert_eq!(t.lookup(ip("2001:db8:1:2::1")), Some(4));
        assert_eq!(t.lookup(ip("2001:db8:1:2::")), Some(5));
        assert_eq!(t.lookup(ip("2001:db9::")), None);
        assert_eq!(t.remove(ip("2001:db8:1:2::1"), 128), Ok(4));
        assert_eq!(t.lookup(ip("2001:db8:1:2::1")), Some(5));
        assert_eq!(t.remove(ip("2001:db8:1:2::"), 127), Ok(5));
        assert_eq!(t.remove(ip("2001:db8:1:2::"), 64), Ok(3));
        assert_eq!(t.lookup(ip("2001:db8:1:2::1")), Some(2));
        assert_eq!(t.remove(ip("2001:db8:1::"), 48), Ok(2));
        assert_eq!(t.groups(), 1, "only the /32 keeps its group (root covers 24 bits)");
        assert_eq!(t.lookup(ip("2001:db8:1:2::1")), Some(1));
        assert_eq!(t.insert(0, 129, 1), Err(LpmError::BadLength { len: 129, max: 128 }));
        t.insert_addr(Ipv6Addr::UNSPECIFIED, 0, 8).ok();
        assert_eq!(t.lookup(ip("ff02::1")), Some(8));
        assert_eq!(t.len(), 2);
    }

    /// Every length from /0 to /128 nested on one address: lane `i` of a full batch looks up
    /// the address with bit `i % 128` flipped, whose longest match is the route of length
    /// `i % 128` (the routes down to /128 take all 13 group levels).
    #[test]
    fn lanes_walk_every_level() {
        let mut t = Lpm6::new();
        let a = ip("2001:db8:1234:5678:9abc:def0:1357:9bdf");
        for l in 0..=128u8 {
            assert_eq!(t.insert(a, l, u32::from(l)), Ok(()));
        }
        let mut keys = [0u128; BATCH_MAX];
        for (i, k) in keys.iter_mut().enumerate() {
            *k = a ^ (1u128 << 127 >> (i % 128));
        }
        keys[255] = a;
        let mut out = [MISS; BATCH_MAX];
        assert_eq!(t.lookup_lanes(&keys, Lanes::first(BATCH_MAX), &mut out), 256);
        for i in 0..255 {
            assert_eq!(out[i], (i % 128) as u32, "lane {i}");
            assert_eq!(t.lookup(keys[i]), Some((i % 128) as u32));
        }
        assert_eq!(out[255], 128);
        assert_eq!(t.remove(a, 128), Ok(128));
        assert_eq!(t.lookup(a), Some(127));
        assert_eq!(t.remove(a, 0), Ok(0));
        assert_eq!(t.lookup(!a), None);
        let mut out = [7; BATCH_MAX];
        assert_eq!(t.lookup_lanes(&keys, Lanes::NONE, &mut out), 0);
        assert_eq!(out, [7; BATCH_MAX]);
    }

    /// Lookups per second of `lookup_lanes` (full 256-lane batches) and of `lookup`, with 100 k
    /// and 200 k routes of the public table's length mix and 65,536 destinations inside them
    /// (`LPM6_ADDRS` changes the count). Prints build time, groups and memory. Timing, so
    /// ignored by default:
    /// `cargo test --release -p fastpath-tables --lib lpm6_lookup_rate -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn lpm6_lookup_rate() {
        let n_addrs: usize = std::env::var("LPM6_ADDRS").ok().and_then(|v| v.parse().ok()).unwrap_or(65_536);
        for n in [100_000usize, 200_000] {
            let routes = crate::lpm::tests::random_routes6(n, 7);
            let t0 = std::time::Instant::now();
            let mut t = Lpm6::new();
            for &(p, l, v) in &routes {
                assert_eq!(t.insert(p, l, v), Ok(()));
            }
            let build = t0.elapsed();
            let mut s = 99u64;
            let mut next = move || {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                s
            };
            let addrs: Vec<u128> = (0..n_addrs)
                .map(|_| {
                    let (p, l, _) = routes[next() as usize % routes.len()];
                    p | (u128::from(next()) << 64 | u128::from(next())).checked_shr(u32::from(l)).unwrap_or(0)
                })
                .collect();
            let mut keys = [0u128; BATCH_MAX];
            let mut out = [MISS; BATCH_MAX];
            let rounds = (20_000_000 / n_addrs).max(1);
            let (mut hits, t0) = (0u64, std::time::Instant::now());
            for _ in 0..rounds {
                for c in addrs.chunks(BATCH_MAX) {
                    keys[..c.len()].copy_from_slice(c);
                    hits += t.lookup_lanes(std::hint::black_box(&keys), Lanes::first(c.len()), &mut out);
                }
            }
            let lanes_ns = t0.elapsed().as_nanos() as f64;
            let t0 = std::time::Instant::now();
            for _ in 0..rounds {
                for &a in &addrs {
                    hits += u64::from(t.lookup(std::hint::black_box(a)).is_some());
                }
            }
            let scalar_ns = t0.elapsed().as_nanos() as f64;
            let total = (rounds * addrs.len()) as f64;
            assert_eq!(hits, 2 * total as u64);
            println!(
                "lpm6 {n} routes: built in {:.0} ms, {} groups, {} MiB; {n_addrs} addresses: lookup_lanes {:.1} M/s, lookup {:.1} M/s",
                build.as_secs_f64() * 1e3,
                t.groups(),
                t.memory_bytes() >> 20,
                total / lanes_ns * 1e3,
                total / scalar_ns * 1e3
            );
        }
    }

    #[test]
    fn table_full_is_reported_and_rolled_back() {
        let mut t = Lpm6::with_max_groups(3);
        // A /128 needs 13 groups: fails, and the 3 groups made on the way down are freed.
        assert_eq!(t.insert(ip("2001:db8::1"), 128, 1), Err(LpmError::TableFull { groups: 3 }));
        assert_eq!(t.groups(), 0);
        assert_eq!(t.lookup(ip("2001:db8::1")), None);
        assert_eq!(t.insert(ip("2001:db8:1::"), 48, 2), Ok(()));
        assert_eq!(t.groups(), 3);
        assert_eq!(t.lookup(ip("2001:db8:1::9")), Some(2));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u128, u8, u32),
        Remove(usize),
        Batch(Vec<u128>, [u64; 4]),
    }

    /// Prefixes mostly under 2001:db8::/32 with few distinct bits (so routes nest and overlap),
    /// sometimes anywhere; lengths favour 25..=128 with the boundaries /0, /24, /32, /64, /127
    /// and /128 weighted in (/0 and short prefixes rewrite up to 2^24 root entries: rarer).
    fn op() -> impl Strategy<Value = Op> {
        let len = prop_oneof![
            1 => Just(0u8),
            1 => 1u8..=24,
            2 => prop_oneof![Just(24u8), Just(32), Just(64), Just(127), Just(128)],
            2 => Just(128u8),
            10 => 25u8..=128,
        ];
        let near = (0u128..4, 0u128..4, 0u128..4, any::<u8>())
            .prop_map(|(a, b, c, d)| ip("2001:db8::") | a << 88 | b << 64 | c << 40 | u128::from(d) << (d % 40));
        let addr = prop_oneof![6 => near, 1 => any::<u128>()];
        prop_oneof![
            5 => (addr, len, 0u32..1000).prop_map(|(p, l, v)| Op::Insert(p, l, v)),
            3 => any::<usize>().prop_map(Op::Remove),
            2 => (prop_oneof![Just(0usize), Just(1), Just(255), Just(256), 0usize..=256], any::<[u64; 4]>())
                .prop_flat_map(|(n, lanes)| (proptest::collection::vec(any::<u128>(), n), Just(lanes)))
                .prop_map(|(v, lanes)| Op::Batch(v, lanes)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random inserts, removes and lookups agree with the sorted-prefix twin: `lookup`,
        /// `lookup_batch` (lengths 0..=256), `lookup_lanes` (random lane masks; other slots
        /// untouched) and the generic walk.
        #[test]
        fn matches_reference(ops in proptest::collection::vec(op(), 1..120)) {
            let mut t = Lpm6::new();
            let mut r = RefLpm::v6();
            let mut live: Vec<(u128, u8)> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(p, l, v) => {
                        prop_assert_eq!(t.insert(p, l, v), Ok(()));
                        r.insert(p, l, v);
                        live.push((p, l));
                    }
                    Op::Remove(i) => {
                        if live.is_empty() { continue; }
                        let (p, l) = live.swap_remove(i % live.len());
                        prop_assert_eq!(t.remove(p, l).ok(), r.remove(p, l));
                    }
                    Op::Batch(raw, mask) => {
                        // Half the addresses inside live routes (host bits random, or all
                        // zero / all one), half anywhere.
                        let addrs: Vec<u128> = raw.iter().enumerate().map(|(i, &x)| {
                            match live.get(i % (live.len() + 1)) {
                                Some(&(p, l)) if i % 2 == 0 => {
                                    let host = u128::MAX.checked_shr(u32::from(l)).unwrap_or(0);
                                    p | [x & host, 0, host][i % 3]
                                }
                                _ => x,
                            }
                        }).collect();
                        let mut out = vec![Some(u32::MAX); addrs.len()];
                        let hits = t.lookup_batch(&addrs, &mut out);
                        let mut want_hits = 0;
                        for (a, o) in addrs.iter().zip(&out) {
                            let w = r.lookup(*a);
                            want_hits += u64::from(w.is_some());
                            prop_assert_eq!(*o, w, "addr {:#x}", a);
                            prop_assert_eq!(t.lookup(*a), w);
                            prop_assert_eq!(t.dir.lookup_raw(*a).checked_sub(1), w);
                        }
                        prop_assert_eq!(hits, want_hits);
                        let mut keys = [0u128; BATCH_MAX];
                        for (k, a) in keys.iter_mut().zip(addrs.iter().chain(raw.iter()).cycle()) {
                            *k = *a;
                        }
                        let lanes = Lanes(mask);
                        let mut lout = [7; BATCH_MAX];
                        let lhits = t.lookup_lanes(&keys, lanes, &mut lout);
                        let mut want_lhits = 0;
                        for i in 0..BATCH_MAX {
                            if lanes.contains(i) {
                                let w = r.lookup(keys[i]);
                                want_lhits += u64::from(w.is_some());
                                prop_assert_eq!(lout[i], w.unwrap_or(MISS), "lane {} addr {:#x}", i, keys[i]);
                            } else {
                                prop_assert_eq!(lout[i], 7, "lane {} written", i);
                            }
                        }
                        prop_assert_eq!(lhits, want_lhits);
                    }
                }
            }
            for (p, l) in live.drain(..) {
                prop_assert_eq!(t.remove(p, l).ok(), r.remove(p, l));
            }
            prop_assert_eq!(t.len(), 0);
            prop_assert_eq!(t.groups(), 0);
        }
    }
}
