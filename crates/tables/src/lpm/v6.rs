//! IPv6 longest-prefix match: a 24-8-8-… multibit trie (DPDK `rte_lpm6` layout; see the
//! [`crate::lpm`] module doc).
//!
//! A /48 (the common IPv6 routing-table length) resolves in 4 loads, a /32 in 2, a /24 or
//! shorter in 1, a /128 in 14.

use std::net::Ipv6Addr;

use fastpath_packet::prefetch::prefetch_read;

use super::{Dir, LpmError, EXT};

/// Default most groups (1.25 KiB each, allocated on demand).
pub const LPM6_MAX_GROUPS: u32 = 1 << 20;
/// Addresses per prefetch window in [`Lpm6::lookup_batch`].
const WINDOW: usize = 64;

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
        let mut e = self.dir.root[(addr >> 104) as usize];
        let mut shift = 104u32;
        while e & EXT != 0 {
            // Groups exist only above the last 8 bits, so `shift` stays ≥ 0; `& 127` keeps a
            // broken invariant from becoming a shift panic.
            shift = shift.wrapping_sub(8) & 127;
            let i = ((e & !EXT) as usize) << 8 | ((addr >> shift) as usize & 0xff);
            e = self.dir.tbl8.get(i).copied().unwrap_or(0);
        }
        e.checked_sub(1)
    }

    /// `out[i] = lookup(addrs[i])` for `i < min(addrs.len(), out.len())`; returns the number
    /// of hits. Walks a window of addresses level by level — prefetch every lane's next entry,
    /// then load them all — so the dependent loads of one address overlap with those of the
    /// others instead of serialising (a /48 is 4 dependent DRAM misses). Worker; never panics,
    /// never allocates.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<u32>]) -> u64 {
        let mut hits = 0;
        for (ac, oc) in addrs.chunks(WINDOW).zip(out.chunks_mut(WINDOW)) {
            hits += self.window(ac, oc);
        }
        hits
    }

    /// One window of [`Self::lookup_batch`]. Every lane still in a group at step `k` is at
    /// trie level `k`, so all lanes share one shift.
    fn window(&self, addrs: &[u128], out: &mut [Option<u32>]) -> u64 {
        let mut e = [0u32; WINDOW];
        for &a in addrs {
            prefetch_read(&self.dir.root[(a >> 104) as usize]);
        }
        let mut pending = false;
        for (x, &a) in e.iter_mut().zip(addrs) {
            *x = self.dir.root[(a >> 104) as usize];
            pending |= *x & EXT != 0;
        }
        let index = |x: u32, a: u128, shift: u32| ((x & !EXT) as usize) << 8 | ((a >> shift) as usize & 0xff);
        let mut shift = 104u32;
        while pending && shift >= 8 {
            shift -= 8;
            for (&x, &a) in e.iter().zip(addrs) {
                if x & EXT != 0 {
                    if let Some(r) = self.dir.tbl8.get(index(x, a, shift)) {
                        prefetch_read(r);
                    }
                }
            }
            pending = false;
            for (x, &a) in e.iter_mut().zip(addrs) {
                if *x & EXT != 0 {
                    *x = self.dir.tbl8.get(index(*x, a, shift)).copied().unwrap_or(0);
                    pending |= *x & EXT != 0;
                }
            }
        }
        let mut hits = 0;
        for (o, &x) in out.iter_mut().zip(&e) {
            *o = if x & EXT != 0 { None } else { x.checked_sub(1) };
            hits += u64::from(o.is_some());
        }
        hits
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
        Batch(Vec<u128>),
    }

    /// Prefixes under 2001:db8::/32 with few distinct bits, lengths favouring 25..=128 (::/0 is
    /// covered by `nested_routes_down_to_host`).
    fn op() -> impl Strategy<Value = Op> {
        let len = prop_oneof![1 => 8u8..=24, 10 => 25u8..=128];
        let addr = (0u128..4, 0u128..4, 0u128..4, any::<u8>())
            .prop_map(|(a, b, c, d)| ip("2001:db8::") | a << 88 | b << 64 | c << 40 | u128::from(d) << (d % 40));
        prop_oneof![
            5 => (addr, len, 0u32..1000).prop_map(|(p, l, v)| Op::Insert(p, l, v)),
            3 => any::<usize>().prop_map(Op::Remove),
            2 => prop_oneof![Just(0usize), Just(1), Just(255), Just(256), 0usize..=256]
                .prop_flat_map(|n| proptest::collection::vec(any::<u128>(), n))
                .prop_map(Op::Batch),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random inserts, removes and batch lookups (lengths 0..=256) agree with the
        /// sorted-prefix twin and with the generic walk.
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
                    Op::Batch(raw) => {
                        let addrs: Vec<u128> = raw.iter().enumerate().map(|(i, &x)| {
                            match live.get(i % (live.len() + 1)) {
                                Some(&(p, l)) if i % 2 == 0 => {
                                    p | (x >> u32::from(l).clamp(1, 127)) >> (i % 3)
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
