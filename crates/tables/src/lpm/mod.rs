//! Longest-prefix match: DIR-24-8 for IPv4 ([`Lpm4`]) and a 24-8-8-… multibit trie for IPv6
//! ([`Lpm6`]), sharing one control-path engine (`Dir`).
//!
//! DIR-24-8 (Gupta, Lin, McKeown, "Routing lookups in hardware at memory access speeds",
//! INFOCOM 1998; DPDK `rte_lpm`): a 2^24-entry first-level table indexed by the top 24 bits of
//! the address, and 256-entry second-level groups ("tbl8") for /24s that hold longer prefixes.
//! IPv6 uses the same scheme deepened (DPDK `rte_lpm6`): a 2^24 root, then one 256-entry group
//! per further 8 bits, up to 13 levels for a /128.
//!
//! ```text
//!  addr: [ 24 bits ──────────────── | 8 ─── | 8 ─── | … ]
//!          │                          │       │
//!          ▼                          ▼       ▼
//!   root[2^24]: u32 ──EXT──▶ tbl8[g·256 + byte] ──EXT──▶ tbl8[g'·256 + byte] …
//!
//!   entry u32:  0            no route
//!               1 ..= 2^31-1 route, value = entry - 1   (values 0 ..= VALUE_MAX)
//!               EXT | g      go to group g
//! ```
//!
//! A lookup is one load for any prefix of length ≤ 24 (IPv4: nearly every routing-table entry),
//! two for longer; no bounds check on the root (its type is `Box<[u32; 2^24]>`, so `addr >> 8`
//! is provably in range). Memory: the root is 64 MiB; each group is 1 KiB (+256 B of depths on
//! the control side); groups are allocated on demand up to a configured maximum.
//!
//! The control path keeps, beside every entry, the length ("depth") of the prefix that wrote
//! it, plus the rule list (a hash map of (prefix, length) → value). Insert of a /len writes every
//! entry of its range whose depth ≤ len (longer prefixes already there keep their entries),
//! descending into groups, allocating a group when a prefix ends below an entry that has none.
//! Remove finds the longest remaining rule that covers the removed prefix (the "parent", from
//! the rule list) and rewrites the entries whose depth equals the removed length with the
//! parent's value and depth; afterwards a group whose entries all come from prefixes no longer
//! than the group's first bit is uniform, and is folded back into its parent entry and freed.
//! Host bits of a prefix beyond its length are ignored (`10.1.2.3/8` is `10.0.0.0/8`).
//!
//! Measured (`cargo bench -p fastpath-tables --bench lpm`, 2-vCPU KVM guest shared with other
//! builds, so throughput is a floor): building 1 M IPv4 routes with a BGP-like length mix takes
//! 1.7–3.2 s (29.6 k groups, 205 MB including the rule list); batch lookups of random addresses
//! run at 36–38 M/s with 4 KiB pages (20 M/s without the prefetch pass) and 39–70 M/s with
//! transparent huge pages (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`: the 64 MiB root otherwise
//! misses the TLB on almost every lookup). IPv6 (`lpm6_lookup_rate` in v6.rs, 65,536
//! destinations): 200 k routes of the public table's length mix (half /48) take 196 k groups,
//! 410 MiB with the rule list, built in 0.4–0.6 s; `lookup_lanes` (level-synchronous prefetch
//! across the batch) runs at 14–36 M/s, `lookup` one at a time at 5–9 M/s (100 k routes: 245
//! MiB, 13–36 M/s); the spread is the other builds on the machine. Instructions (callgrind, `LPM_BENCH_INSTR`): 19 per IPv4 lookup in
//! `lookup_batch`, 146 per IPv6 lookup of /32–/48 routes.

mod v4;
mod v6;

pub use v4::{Lpm4, LPM4_MAX_GROUPS};
pub use v6::{Lpm6, LPM6_MAX_GROUPS};

use std::collections::HashMap;

/// Largest value a route can carry (values are stored as `value + 1` beside a 1-bit tag).
pub const VALUE_MAX: u32 = EXT - 2;
/// Tag bit of an entry that points to a group.
const EXT: u32 = 1 << 31;
/// Entries per group (8 address bits).
const GROUP: usize = 256;

/// Why an LPM update failed. The table is unchanged after any error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LpmError {
    /// The prefix length exceeds the address width.
    BadLength {
        /// The length given.
        len: u8,
        /// The address width (32 or 128).
        max: u8,
    },
    /// The value is above [`VALUE_MAX`].
    ValueTooLarge {
        /// The value given.
        value: u32,
    },
    /// No second-level group is left (the configured maximum is reached).
    TableFull {
        /// The configured maximum number of groups.
        groups: u32,
    },
    /// `remove` of a prefix that is not in the table.
    NotFound,
}

impl core::fmt::Display for LpmError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LpmError::BadLength { len, max } => {
                write!(f, "prefix length {len} is longer than the address ({max} bits)")
            }
            LpmError::ValueTooLarge { value } => {
                write!(f, "route value {value} is above the maximum {VALUE_MAX}")
            }
            LpmError::TableFull { groups } => {
                write!(f, "LPM table is out of second-level groups (maximum {groups})")
            }
            LpmError::NotFound => f.write_str("prefix not in the table"),
        }
    }
}
impl std::error::Error for LpmError {}

/// `p` with all bits after the first `len` cleared (addresses are left-aligned in a `u128`).
#[inline]
fn mask(p: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        p & (u128::MAX << (128 - u32::from(len.min(128))))
    }
}

/// Bits `start .. start + stride` of the left-aligned `p`, as an index.
#[inline]
fn chunk(p: u128, start: u32, stride: u32) -> usize {
    ((p << start) >> (128 - stride)) as usize
}

/// Which table an entry lives in.
#[derive(Clone, Copy)]
enum Tbl {
    Root,
    Group(u32),
}

/// The shared trie: a root of `ROOT` (a power of two) entries and 256-entry groups, over
/// addresses left-aligned in a `u128` of which the first `width` bits are significant.
pub(crate) struct Dir<const ROOT: usize> {
    pub(crate) root: Box<[u32; ROOT]>,
    root_depth: Box<[u8]>,
    pub(crate) tbl8: Vec<u32>,
    tbl8_depth: Vec<u8>,
    free: Vec<u32>,
    max_groups: u32,
    width: u8,
    /// Every rule by (prefix, length). A fixed-seed hash: the routes come from the operator, and
    /// a table built twice costs the same instructions (instruction counts are compared exactly).
    rules: HashMap<(u128, u8), u32, foldhash::fast::FixedState>,
    /// How many rules have each length (`width + 1` counts): a removal looks for the route
    /// that covers the removed one only at the lengths some rule has, not at every shorter
    /// length (each a probe of `rules`, a cache miss in a large table).
    lens: Box<[u32]>,
}

impl<const ROOT: usize> Clone for Dir<ROOT> {
    /// Copies through the heap (`Box<[u32; 2^24]>::clone` may build the array on the stack).
    fn clone(&self) -> Self {
        let mut root = zeroed_root::<ROOT>();
        root.copy_from_slice(&self.root[..]);
        Dir {
            root,
            root_depth: self.root_depth.clone(),
            tbl8: self.tbl8.clone(),
            tbl8_depth: self.tbl8_depth.clone(),
            free: self.free.clone(),
            max_groups: self.max_groups,
            width: self.width,
            rules: self.rules.clone(),
            lens: self.lens.clone(),
        }
    }
}

/// A zeroed `Box<[u32; N]>` allocated directly on the heap.
fn zeroed_root<const N: usize>() -> Box<[u32; N]> {
    match vec![0u32; N].into_boxed_slice().try_into() {
        Ok(b) => b,
        // A boxed slice of length N always converts to a boxed [u32; N].
        Err(_) => unreachable!(),
    }
}

impl<const ROOT: usize> Dir<ROOT> {
    const ROOT_BITS: u32 = ROOT.trailing_zeros();

    pub(crate) fn new(width: u8, max_groups: u32) -> Self {
        Dir {
            root: zeroed_root::<ROOT>(),
            root_depth: vec![0u8; ROOT].into_boxed_slice(),
            tbl8: Vec::new(),
            tbl8_depth: Vec::new(),
            free: Vec::new(),
            max_groups: max_groups.min(EXT - 1),
            width,
            rules: HashMap::default(),
            lens: vec![0; usize::from(width) + 1].into_boxed_slice(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.rules.len()
    }
    /// Groups in use.
    pub(crate) fn groups(&self) -> usize {
        self.tbl8.len() / GROUP - self.free.len()
    }
    pub(crate) fn memory_bytes(&self) -> usize {
        ROOT * 5
            + self.tbl8.capacity() * 5
            + self.free.capacity() * 4
            + self.rules.capacity() * (core::mem::size_of::<((u128, u8), u32)>() + 1)
    }
    pub(crate) fn get(&self, p: u128, len: u8) -> Option<u32> {
        self.rules.get(&(mask(p, len), len)).copied()
    }
    pub(crate) fn rules(&self) -> impl Iterator<Item = (u128, u8, u32)> + '_ {
        self.rules.iter().map(|(&(p, l), &v)| (p, l, v))
    }

    /// The raw entry for left-aligned `p` (0 = no route); the generic, slower walk that the
    /// tests hold the specialised lookups against.
    #[cfg(test)]
    pub(crate) fn lookup_raw(&self, p: u128) -> u32 {
        let mut e = self.root[chunk(p, 0, Self::ROOT_BITS) % ROOT];
        let mut start = Self::ROOT_BITS;
        while e & EXT != 0 && start < 128 {
            let i = ((e & !EXT) as usize) << 8 | chunk(p, start, 8);
            e = self.tbl8.get(i).copied().unwrap_or(0);
            start += 8;
        }
        e
    }

    #[inline]
    fn ent(&self, t: Tbl, j: usize) -> (u32, u8) {
        match t {
            Tbl::Root => (self.root[j % ROOT], self.root_depth[j]),
            Tbl::Group(g) => {
                let i = (g as usize) << 8 | j;
                (self.tbl8[i], self.tbl8_depth[i])
            }
        }
    }
    #[inline]
    fn set(&mut self, t: Tbl, j: usize, e: u32, d: u8) {
        match t {
            Tbl::Root => {
                self.root[j % ROOT] = e;
                self.root_depth[j] = d;
            }
            Tbl::Group(g) => {
                let i = (g as usize) << 8 | j;
                self.tbl8[i] = e;
                self.tbl8_depth[i] = d;
            }
        }
    }

    /// Adds or updates a route. `p` is left-aligned.
    pub(crate) fn insert(&mut self, p: u128, len: u8, value: u32) -> Result<(), LpmError> {
        if len > self.width {
            return Err(LpmError::BadLength { len, max: self.width });
        }
        if value > VALUE_MAX {
            return Err(LpmError::ValueTooLarge { value });
        }
        let p = mask(p, len);
        self.add(Tbl::Root, 0, Self::ROOT_BITS, p, len, value + 1)?;
        if self.rules.insert((p, len), value).is_none() {
            if let Some(n) = self.lens.get_mut(usize::from(len)) {
                *n += 1;
            }
        }
        Ok(())
    }

    /// Removes a route, returning its value. `p` is left-aligned.
    pub(crate) fn remove(&mut self, p: u128, len: u8) -> Result<u32, LpmError> {
        if len > self.width {
            return Err(LpmError::BadLength { len, max: self.width });
        }
        let p = mask(p, len);
        let value = self.rules.remove(&(p, len)).ok_or(LpmError::NotFound)?;
        if let Some(n) = self.lens.get_mut(usize::from(len)) {
            *n -= 1;
        }
        let (pe, pd) = (0..len)
            .rev()
            .filter(|&l| self.lens.get(usize::from(l)).is_some_and(|&n| n > 0))
            .find_map(|l| self.rules.get(&(mask(p, l), l)).map(|&v| (v + 1, l)))
            .unwrap_or((0, 0));
        self.del(Tbl::Root, 0, Self::ROOT_BITS, p, len, pe, pd);
        Ok(value)
    }

    /// Writes entry `e` (depth `len`) over the range of `p/len` in table `t`, whose entries
    /// cover bits `start .. start + stride`.
    fn add(&mut self, t: Tbl, start: u32, stride: u32, p: u128, len: u8, e: u32) -> Result<(), LpmError> {
        let end = start + stride;
        let j = chunk(p, start, stride);
        if u32::from(len) <= end {
            let span = 1usize << (end - u32::from(len));
            self.paint_range(t, j & !(span - 1), span, end, e, len, len, false);
            return Ok(());
        }
        let (cur, d) = self.ent(t, j);
        let g = if cur & EXT != 0 {
            cur & !EXT
        } else {
            let g = self.alloc_group(cur, d)?;
            self.set(t, j, EXT | g, 0);
            g
        };
        let r = self.add(Tbl::Group(g), end, 8, p, len, e);
        if r.is_err() {
            // Undo groups allocated on the way down (they are uniform copies of their parent).
            self.collapse(t, j, end);
        }
        r
    }

    /// Rewrites entries of the range of `p/len` whose depth is `len` with the parent route.
    #[allow(clippy::too_many_arguments)]
    fn del(&mut self, t: Tbl, start: u32, stride: u32, p: u128, len: u8, pe: u32, pd: u8) {
        let end = start + stride;
        let j = chunk(p, start, stride);
        if u32::from(len) <= end {
            let span = 1usize << (end - u32::from(len));
            self.paint_range(t, j & !(span - 1), span, end, pe, pd, len, true);
            return;
        }
        let (cur, _) = self.ent(t, j);
        if cur & EXT != 0 {
            self.del(Tbl::Group(cur & !EXT), end, 8, p, len, pe, pd);
            self.collapse(t, j, end);
        }
    }

    /// Sets entry `x` of `t` (and, through a group pointer, every entry below it) to `(e, d)`
    /// where its depth is at most `max_d`. `child` is the first bit a group below `x` covers.
    #[allow(clippy::too_many_arguments)]
    fn paint(&mut self, t: Tbl, x: usize, child: u32, e: u32, d: u8, max_d: u8, fold: bool) {
        let (cur, cd) = self.ent(t, x);
        if cur & EXT != 0 {
            self.paint_range(Tbl::Group(cur & !EXT), 0, GROUP, child + 8, e, d, max_d, fold);
            if fold {
                self.collapse(t, x, child);
            }
        } else if cd <= max_d {
            self.set(t, x, e, d);
        }
    }

    /// [`Self::paint`] over entries `first .. first + span` of `t`: one tight pass over the
    /// plain entries, then a recursive pass over group pointers if there were any. (A /8
    /// rewrites 65,536 root entries; this keeps 1 M-route builds to about a second.)
    #[allow(clippy::too_many_arguments)]
    fn paint_range(&mut self, t: Tbl, first: usize, span: usize, child: u32, e: u32, d: u8, max_d: u8, fold: bool) {
        let (es, ds) = match t {
            Tbl::Root => (&mut self.root[..], &mut self.root_depth[..]),
            Tbl::Group(g) => {
                let base = (g as usize) << 8;
                (&mut self.tbl8[base..base + GROUP], &mut self.tbl8_depth[base..base + GROUP])
            }
        };
        let (Some(es), Some(ds)) = (es.get_mut(first..first + span), ds.get_mut(first..first + span)) else {
            return;
        };
        let mut ext = false;
        for (ent, dep) in es.iter_mut().zip(ds.iter_mut()) {
            let is_ext = *ent & EXT != 0;
            ext |= is_ext;
            if !is_ext && *dep <= max_d {
                *ent = e;
                *dep = d;
            }
        }
        if ext {
            for x in first..first + span {
                if self.ent(t, x).0 & EXT != 0 {
                    self.paint(t, x, child, e, d, max_d, fold);
                }
            }
        }
    }

    /// Folds the group below entry `j` of `t` back into the entry if all its entries come from
    /// prefixes of length ≤ `start` (the group's first bit): they are then all equal.
    fn collapse(&mut self, t: Tbl, j: usize, start: u32) {
        let (cur, _) = self.ent(t, j);
        if cur & EXT == 0 {
            return;
        }
        let g = cur & !EXT;
        let base = (g as usize) << 8;
        let (Some(es), Some(ds)) = (self.tbl8.get(base..base + GROUP), self.tbl8_depth.get(base..base + GROUP)) else {
            return;
        };
        if es.iter().all(|&e| e & EXT == 0) && ds.iter().all(|&d| u32::from(d) <= start) {
            let (e0, d0) = (es[0], ds[0]);
            self.set(t, j, e0, d0);
            self.free.push(g);
        }
    }

    /// A group filled with `(e, d)`.
    fn alloc_group(&mut self, e: u32, d: u8) -> Result<u32, LpmError> {
        let g = match self.free.pop() {
            Some(g) => g,
            None => {
                let n = (self.tbl8.len() / GROUP) as u32;
                if n >= self.max_groups {
                    return Err(LpmError::TableFull { groups: self.max_groups });
                }
                self.tbl8.resize(self.tbl8.len() + GROUP, 0);
                self.tbl8_depth.resize(self.tbl8_depth.len() + GROUP, 0);
                n
            }
        };
        let base = (g as usize) << 8;
        self.tbl8[base..base + GROUP].fill(e);
        self.tbl8_depth[base..base + GROUP].fill(d);
        Ok(g)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `n` IPv4 routes (prefix, len, value) with a BGP-like length mix (about 55 % /24, 40 %
    /// /17–/23, 1.5 % /16, 0.5 % /8–/15, 3 % /25–/32, after the public IPv4 table's length
    /// histogram), deterministic in `seed` (splitmix64).
    pub(crate) fn random_routes4(n: usize, seed: u64) -> Vec<(u32, u8, u32)> {
        let mut s = seed;
        let mut next = move || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        (0..n)
            .map(|i| {
                let r = next();
                let len = match r % 1000 {
                    0..=549 => 24,
                    550..=949 => 17 + (r >> 16) as u8 % 7,
                    950..=964 => 16,
                    965..=969 => 8 + (r >> 16) as u8 % 8,
                    _ => 25 + (r >> 16) as u8 % 8,
                };
                let p = (r >> 32) as u32;
                (p & (u32::MAX << (32 - u32::from(len))), len, i as u32)
            })
            .collect()
    }

    /// `n` distinct IPv6 routes inside 2000::/3 with the public IPv6 table's length mix (about
    /// 50 % /48, 10 % /32, 8 % /44, 7 % /40, 5 % /36, 5 % /29, 10 % /33–/47, 5 % /49–/64),
    /// nested under `n / 10` random /32 allocations; deterministic in `seed`. The same mix as
    /// `fastpath bench router --routes6`.
    pub(crate) fn random_routes6(n: usize, seed: u64) -> Vec<(u128, u8, u32)> {
        let mut s = seed;
        let mut next = move || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let allocs: Vec<u128> = (0..(n / 10).max(1)).map(|_| u128::from((next() as u32 >> 3) | 1 << 29) << 96).collect();
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let r = next();
            let len: u8 = match r % 100 {
                0..=49 => 48,
                50..=59 => 32,
                60..=67 => 44,
                68..=74 => 40,
                75..=79 => 36,
                80..=84 => 29,
                85..=94 => 33 + (r >> 16) as u8 % 15,
                _ => 49 + (r >> 16) as u8 % 16,
            };
            let p = (allocs[(r >> 32) as usize % allocs.len()] | u128::from(next()) << 32) & (u128::MAX << (128 - u32::from(len)));
            if seen.insert((p, len)) {
                out.push((p, len, out.len() as u32));
            }
        }
        out
    }

    #[test]
    fn mask_and_chunk() {
        assert_eq!(mask(u128::MAX, 0), 0);
        assert_eq!(mask(u128::MAX, 128), u128::MAX);
        assert_eq!(mask(u128::MAX, 1), 1 << 127);
        let p = 0x0a01_0203u128 << 96;
        assert_eq!(chunk(p, 0, 24), 0x0a0102);
        assert_eq!(chunk(p, 24, 8), 0x03);
        assert_eq!(chunk(u128::MAX, 120, 8), 0xff);
    }
}
