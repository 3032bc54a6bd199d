//! IPv4 longest-prefix match, DIR-24-8 (see the [`crate::lpm`] module doc).
//!
//! The data path is [`Lpm4::lookup`] and [`Lpm4::lookup_batch`]: one load from the 64 MiB
//! root indexed by `addr >> 8` (no bounds check: the root's type has a fixed length), and a
//! second load only when that /24 holds a longer prefix.

use std::net::Ipv4Addr;

use fastpath_packet::batch::{Lanes, BATCH_MAX};
use fastpath_packet::each_lane;
use fastpath_packet::prefetch::prefetch_read;

use super::{Dir, LpmError, EXT};
use crate::MISS;

/// Default most second-level groups (each covers one /24 that holds longer prefixes; 1.25 KiB
/// each, allocated on demand).
pub const LPM4_MAX_GROUPS: u32 = 1 << 17;
/// Addresses per prefetch window in [`Lpm4::lookup_batch`].
const WINDOW: usize = 64;

/// IPv4 LPM table mapping prefixes to `u32` values (0 ..= [`super::VALUE_MAX`]).
#[derive(Clone)]
pub struct Lpm4 {
    dir: Dir<{ 1 << 24 }>,
}

impl Default for Lpm4 {
    fn default() -> Self {
        Self::new()
    }
}

impl Lpm4 {
    /// An empty table with at most [`LPM4_MAX_GROUPS`] groups. Allocates 80 MiB (zeroed
    /// lazily by the OS). Control thread.
    pub fn new() -> Self {
        Self::with_max_groups(LPM4_MAX_GROUPS)
    }
    /// An empty table with at most `groups` second-level groups. Control thread.
    pub fn with_max_groups(groups: u32) -> Self {
        Lpm4 { dir: Dir::new(32, groups) }
    }

    /// Adds `prefix/len → value`, replacing the value if the route exists. Host bits beyond
    /// `len` are ignored. Control thread.
    ///
    /// # Errors
    /// `BadLength` (len > 32), `ValueTooLarge` (value > `VALUE_MAX`), `TableFull` (no group
    /// left); the table is unchanged.
    pub fn insert(&mut self, prefix: u32, len: u8, value: u32) -> Result<(), LpmError> {
        self.dir.insert(u128::from(prefix) << 96, len, value)
    }
    /// [`Self::insert`] taking an [`Ipv4Addr`].
    ///
    /// # Errors
    /// As [`Self::insert`].
    pub fn insert_addr(&mut self, prefix: Ipv4Addr, len: u8, value: u32) -> Result<(), LpmError> {
        self.insert(u32::from(prefix), len, value)
    }
    /// Removes `prefix/len`, returning its value; addresses it covered fall back to the next
    /// shorter route. Control thread.
    ///
    /// # Errors
    /// `NotFound` if the route is absent, `BadLength` if len > 32.
    pub fn remove(&mut self, prefix: u32, len: u8) -> Result<u32, LpmError> {
        self.dir.remove(u128::from(prefix) << 96, len)
    }
    /// The value of exactly the route `prefix/len`, if present. Control thread.
    pub fn get(&self, prefix: u32, len: u8) -> Option<u32> {
        self.dir.get(u128::from(prefix) << 96, len)
    }
    /// Number of routes.
    pub fn len(&self) -> usize {
        self.dir.len()
    }
    /// True when there is no route.
    pub fn is_empty(&self) -> bool {
        self.dir.len() == 0
    }
    /// Second-level groups in use.
    pub fn groups(&self) -> usize {
        self.dir.groups()
    }
    /// Bytes of memory held (both levels, depths and the rule list, approximately).
    pub fn memory_bytes(&self) -> usize {
        self.dir.memory_bytes()
    }
    /// Every route as (prefix, len, value), in no particular order. Control thread.
    pub fn routes(&self) -> impl Iterator<Item = (u32, u8, u32)> + '_ {
        self.dir.rules().map(|(p, l, v)| ((p >> 96) as u32, l, v))
    }

    /// The value of the longest prefix matching `addr`. Worker; never panics, never allocates.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        self.entry(addr).checked_sub(1)
    }

    /// The trie entry `addr` ends at: 0 for no route, else the value + 1.
    #[inline(always)]
    fn entry(&self, addr: u32) -> u32 {
        let e = self.dir.root[(addr >> 8) as usize];
        if e & EXT != 0 {
            let i = ((e & !EXT) as usize) << 8 | (addr & 0xff) as usize;
            self.dir.tbl8.get(i).copied().unwrap_or(0)
        } else {
            e
        }
    }

    /// `out[i] = lookup(addrs[i])` for `i < min(addrs.len(), out.len())`; returns the number
    /// of hits. Prefetches the root entries of a window of addresses before resolving them.
    /// Worker; never panics, never allocates.
    #[inline]
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [Option<u32>]) -> u64 {
        let mut hits = 0;
        for (ac, oc) in addrs.chunks(WINDOW).zip(out.chunks_mut(WINDOW)) {
            for &a in ac {
                prefetch_read(&self.dir.root[(a >> 8) as usize]);
            }
            for (o, &a) in oc.iter_mut().zip(ac) {
                *o = self.lookup(a);
                hits += u64::from(o.is_some());
            }
        }
        hits
    }

    /// [`Self::lookup_batch`] without the prefetch pass (for benchmarks).
    #[doc(hidden)]
    pub fn lookup_batch_plain(&self, addrs: &[u32], out: &mut [Option<u32>]) -> u64 {
        let mut hits = 0;
        for (o, &a) in out.iter_mut().zip(addrs) {
            *o = self.lookup(a);
            hits += u64::from(o.is_some());
        }
        hits
    }

    /// Looks up `addrs[i]` for each slot `i` in `lanes`, writing `out[i]`; other slots are
    /// untouched. Returns the number of hits. Worker; never panics, never allocates.
    pub fn lookup_lanes(&self, addrs: &[u32; BATCH_MAX], lanes: Lanes, out: &mut [u32; BATCH_MAX]) -> u64 {
        each_lane!(i in lanes => {
            prefetch_read(&self.dir.root[(addrs[i] >> 8) as usize]);
        });
        let mut hits = 0;
        each_lane!(i in lanes => {
            // Entry 0 (no route) wraps to `MISS`; a value is at most `VALUE_MAX`.
            let v = self.entry(addrs[i]).wrapping_sub(1);
            out[i] = v;
            hits += u64::from(v != MISS);
        });
        hits
    }

    /// The generic trie walk (the same walk [`super::Lpm6`] does); tests compare it with
    /// [`Self::lookup`].
    #[cfg(test)]
    fn lookup_generic(&self, addr: u32) -> Option<u32> {
        self.dir.lookup_raw(u128::from(addr) << 96).checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lpm::VALUE_MAX;
    use crate::reference::lpm::RefLpm;
    use proptest::prelude::*;

    fn ip(s: &str) -> u32 {
        s.parse::<Ipv4Addr>().map(u32::from).unwrap_or(0)
    }

    #[test]
    fn longest_prefix_wins_and_remove_falls_back() {
        let mut t = Lpm4::new();
        assert_eq!(t.lookup(ip("10.1.2.3")), None);
        t.insert(ip("10.0.0.0"), 8, 1).ok();
        t.insert(ip("10.1.0.0"), 16, 2).ok();
        t.insert(ip("10.1.2.0"), 24, 3).ok();
        t.insert(ip("10.1.2.128"), 25, 4).ok();
        t.insert(ip("10.1.2.3"), 32, 5).ok();
        assert_eq!(t.lookup(ip("10.9.9.9")), Some(1));
        assert_eq!(t.lookup(ip("10.1.9.9")), Some(2));
        assert_eq!(t.lookup(ip("10.1.2.9")), Some(3));
        assert_eq!(t.lookup(ip("10.1.2.200")), Some(4));
        assert_eq!(t.lookup(ip("10.1.2.3")), Some(5));
        assert_eq!(t.lookup(ip("11.0.0.0")), None);
        assert_eq!(t.groups(), 1);
        assert_eq!(t.remove(ip("10.1.2.3"), 32), Ok(5));
        assert_eq!(t.lookup(ip("10.1.2.3")), Some(3));
        assert_eq!(t.remove(ip("10.1.2.0"), 24), Ok(3));
        assert_eq!(t.lookup(ip("10.1.2.3")), Some(2));
        assert_eq!(t.lookup(ip("10.1.2.200")), Some(4));
        assert_eq!(t.remove(ip("10.1.2.128"), 25), Ok(4));
        assert_eq!(t.lookup(ip("10.1.2.200")), Some(2));
        assert_eq!(t.groups(), 0, "group folded back once only short prefixes remain");
        assert_eq!(t.remove(ip("10.1.2.128"), 25), Err(LpmError::NotFound));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn default_route_host_bits_and_update() {
        let mut t = Lpm4::new();
        t.insert(ip("192.0.2.77"), 0, 9).ok();
        assert_eq!(t.lookup(0), Some(9));
        assert_eq!(t.lookup(u32::MAX), Some(9));
        t.insert(ip("198.18.7.7"), 15, 1).ok(); // host bits ignored: 198.18.0.0/15
        assert_eq!(t.get(ip("198.18.0.0"), 15), Some(1));
        assert_eq!(t.lookup(ip("198.19.255.255")), Some(1));
        t.insert(ip("198.18.0.0"), 15, 2).ok();
        assert_eq!(t.lookup(ip("198.19.0.1")), Some(2));
        assert_eq!(t.len(), 2);
        assert_eq!(t.remove(0, 0), Ok(9));
        assert_eq!(t.lookup(0), None);
        let mut routes: Vec<_> = t.routes().collect();
        routes.sort_unstable();
        assert_eq!(routes, vec![(ip("198.18.0.0"), 15, 2)]);
    }

    #[test]
    fn errors_leave_table_unchanged() {
        let mut t = Lpm4::with_max_groups(1);
        assert_eq!(t.insert(0, 33, 1), Err(LpmError::BadLength { len: 33, max: 32 }));
        assert_eq!(t.insert(0, 8, VALUE_MAX + 1), Err(LpmError::ValueTooLarge { value: VALUE_MAX + 1 }));
        assert_eq!(t.insert(ip("1.1.1.1"), 32, VALUE_MAX), Ok(()));
        assert_eq!(t.lookup(ip("1.1.1.1")), Some(VALUE_MAX));
        assert_eq!(t.insert(ip("2.2.2.2"), 32, 1), Err(LpmError::TableFull { groups: 1 }));
        assert_eq!(t.lookup(ip("2.2.2.2")), None);
        assert_eq!(t.get(ip("2.2.2.2"), 32), None);
        assert_eq!(t.insert(ip("1.1.1.0"), 31, 4), Ok(()), "same group still usable");
        assert_eq!(t.lookup(ip("1.1.1.0")), Some(4));
        assert_eq!(t.remove(0, 40), Err(LpmError::BadLength { len: 40, max: 32 }));
    }

    #[test]
    fn lanes_and_batches() {
        let mut t = Lpm4::new();
        t.insert(ip("198.18.0.0"), 16, 7).ok();
        let mut addrs = [0u32; BATCH_MAX];
        for (i, a) in addrs.iter_mut().enumerate() {
            *a = ip("198.18.0.0") + (i as u32) * 0x100 * (i as u32 % 2);
        }
        let mut lanes = Lanes::first(BATCH_MAX);
        lanes.remove(2);
        let mut out = [0; BATCH_MAX];
        assert_eq!(t.lookup_lanes(&addrs, lanes, &mut out), 255);
        assert_eq!(out[2], 0);
        assert!(out.iter().enumerate().all(|(i, o)| i == 2 || *o == 7));
    }

    /// Builds 1 M random routes (stated scale) and checks a sample against the reference.
    /// Slow in the test profile: run with `--ignored`.
    #[test]
    #[ignore]
    fn one_million_routes() {
        let routes = crate::lpm::tests::random_routes4(1_000_000, 1);
        let t0 = std::time::Instant::now();
        let mut t = Lpm4::new();
        for &(p, l, v) in &routes {
            assert_eq!(t.insert(p, l, v), Ok(()));
        }
        eprintln!("1M routes: built in {:?}, {} groups, {} MB", t0.elapsed(), t.groups(), t.memory_bytes() >> 20);
        let mut r = RefLpm::v4();
        for &(p, l, v) in routes.iter().take(2000) {
            r.insert(u128::from(p), l, v);
        }
        let mut t2 = Lpm4::new();
        for &(p, l, v) in routes.iter().take(2000) {
            assert_eq!(t2.insert(p, l, v), Ok(()));
        }
        for k in 0..20_000u32 {
            let a = k.wrapping_mul(0x9E37_79B9);
            assert_eq!(t2.lookup(a), r.lookup(u128::from(a)));
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u32, u8, u32),
        Remove(usize),
        Batch(Vec<u32>),
    }

    /// Prefixes cluster in 10.0-3.0-3.x and 11.0-3.0-3.x and lengths favour 16..=32, so routes
    /// nest and overlap often. Short prefixes rewrite up to 2^24 entries each, so they are
    /// rarer (test time).
    fn op() -> impl Strategy<Value = Op> {
        let len = prop_oneof![1 => 0u8..=15, 12 => 16u8..=32];
        let addr = (0u32..2, 0u32..4, 0u32..4, any::<u8>()).prop_map(|(a, b, c, d)| (10 + a) << 24 | b << 16 | c << 8 | u32::from(d));
        prop_oneof![
            5 => (addr, len, 0u32..1000).prop_map(|(p, l, v)| Op::Insert(p, l, v)),
            3 => any::<usize>().prop_map(Op::Remove),
            2 => prop_oneof![Just(0usize), Just(1), Just(255), Just(256), 0usize..=256]
                .prop_flat_map(|n| proptest::collection::vec(any::<u32>(), n))
                .prop_map(Op::Batch),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Random inserts, removes (of present routes) and batch lookups (lengths 0..=256,
        /// with 0, 1, 255, 256 weighted in) agree with the sorted-prefix twin, through both the
        /// DIR-24-8 fast path and the generic walk.
        #[test]
        fn matches_reference(ops in proptest::collection::vec(op(), 1..120)) {
            let mut t = Lpm4::new();
            let mut r = RefLpm::v4();
            let mut live: Vec<(u32, u8)> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(p, l, v) => {
                        prop_assert_eq!(t.insert(p, l, v), Ok(()));
                        r.insert(u128::from(p), l, v);
                        live.push((p, l));
                    }
                    Op::Remove(i) => {
                        if live.is_empty() { continue; }
                        let (p, l) = live.swap_remove(i % live.len());
                        let want = r.remove(u128::from(p), l);
                        let got = t.remove(p, l).ok();
                        prop_assert_eq!(got, want);
                    }
                    Op::Batch(raw) => {
                        // Mix random addresses with addresses inside live routes.
                        let addrs: Vec<u32> = raw.iter().enumerate().map(|(i, &x)| {
                            match live.get(i % (live.len() + 1)) {
                                Some(&(p, _)) if i % 2 == 0 => p | (x & 0x0000_3fff),
                                _ => x,
                            }
                        }).collect();
                        let mut out = vec![Some(u32::MAX); addrs.len()];
                        let mut plain = vec![None; addrs.len()];
                        let hits = t.lookup_batch(&addrs, &mut out);
                        prop_assert_eq!(hits, t.lookup_batch_plain(&addrs, &mut plain));
                        prop_assert_eq!(&out, &plain);
                        let mut want_hits = 0;
                        for (a, o) in addrs.iter().zip(&out) {
                            let w = r.lookup(u128::from(*a));
                            want_hits += u64::from(w.is_some());
                            prop_assert_eq!(*o, w, "addr {:#x}", a);
                            prop_assert_eq!(t.lookup_generic(*a), w);
                        }
                        prop_assert_eq!(hits, want_hits);
                    }
                }
            }
            // Removing everything empties the table and frees every group.
            for (p, l) in live.drain(..) {
                prop_assert_eq!(t.remove(p, l).ok(), r.remove(u128::from(p), l));
            }
            prop_assert_eq!(t.len(), 0);
            prop_assert_eq!(t.groups(), 0);
        }
    }
}
