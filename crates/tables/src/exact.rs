//! Exact-match hash table: bucketised cuckoo hashing with 16-bit signatures (DPDK `rte_hash`,
//! VPP `bihash`; Fan, Andersen, Kaminsky, "MemC3", NSDI 2013 for the signature + BFS scheme).
//!
//! ```text
//!   key ──hash──▶ h ─┬─ low bits ──▶ primary bucket p = h & mask
//!                    └─ top 16 bits | 1 ▶ signature s (never 0; 0 marks an empty slot)
//!   alternate bucket a = p ^ f(s)      (f(s) odd, so a != p; and p = a ^ f(s): a slot can be
//!                                       moved to its other bucket without the key)
//!
//!   bucket (one 64-byte line):  sig[0..8]: u16 (packed in two u64) | idx[0..8]: u32 | pad
//!   entries (separate array):   idx ──▶ { key, value }
//! ```
//!
//! A lookup touches at most two bucket lines plus one entry line per signature match (false
//! signature matches are 8/65536 per bucket). The lookup compares the 8 signatures of a bucket
//! at once with one 128-bit compare (`fastpath_packet::prefetch::lanes_eq16`, where the
//! intrinsics' `unsafe` lives, since this crate forbids it): about 5 instructions, where SWAR
//! arithmetic on the two `u64` words took about 17 and the compare loop, which LLVM does not
//! vectorise, 32. Inserts keep the SWAR form. [`ExactTable::lookup_batch`] runs the lookup as
//! passes over a window of keys — hash all and prefetch both buckets; compare signatures and
//! prefetch the candidate entries; compare keys — so the DRAM misses of one key overlap with
//! the work on the others.
//!
//! Insert puts the key in a free slot of either bucket; when both are full it searches
//! breadth-first (at most [`BFS_NODES`] buckets, about four levels) for a chain of entries each
//! of which can move to its alternate bucket, ending at a bucket with a free slot, then moves
//! the chain from the far end (each move writes the destination slot before clearing the
//! source, so the key being moved is never absent). If no chain exists it fails with
//! [`InsertError::Full`]; it never loops.
//!
//! Sizing: `with_capacity(n)` allocates `n` entries and the smallest power-of-two number of
//! buckets with at least `n / 0.9` slots, so the bucket array is at most 90 % full (bucketised
//! 2-choice cuckoo with 8-slot buckets fills past 95 % before BFS fails). Memory per entry:
//! `64 / 8 = 8` bytes per slot × between 1.1 and 2.2 slots per entry (9–18 bytes), plus
//! `size_of::<(K, V)>()` (16 bytes for `u64 → u32`): 25–34 bytes per entry for `u64` keys;
//! 10 M `u64 → u32` entries take 268 MB of buckets (2 M buckets) and 160 MB of entries.
//!
//! Measured (`cargo bench -p fastpath-tables --bench exact`, 2-vCPU KVM guest shared with
//! other builds, so a floor): random hitting lookups in batches of 256 run at 13–15 M/s with
//! 1 M entries (2.5 M/s one at a time) and 4–6 M/s with 10 M entries (DRAM and TLB bound);
//! windows of 64 or 256 beat 16 or 32. Building 10 M entries takes 5.6 s. 148 instructions
//! per lookup (callgrind, `EXACT_BENCH_INSTR`).
//!
//! Control path (`insert`, `remove`, `get_mut`) takes `&mut self`; readers share `&self`
//! snapshots (the pipeline swaps whole tables RCU-style). Lookups never allocate.

use fastpath_packet::batch::{Lanes, BATCH_MAX};
use fastpath_packet::each_lane;
use fastpath_packet::prefetch::{lanes_eq16, prefetch_read};

use crate::hash::{hash_bytes, hash_u128, hash_u64, hash_words};

/// Slots per bucket: 8 × (2-byte signature + 4-byte index) fit one 64-byte line.
pub const SLOTS: usize = 8;
/// Most buckets the cuckoo breadth-first search visits before giving up.
pub const BFS_NODES: usize = 512;
/// Keys per prefetch window in [`ExactTable::lookup_batch`].
pub const WINDOW: usize = 64;

/// A key the table can hold: copyable, comparable, hashable with [`crate::hash`].
pub trait Key: Copy + Eq {
    /// 64-bit hash of the key; the low bits pick the bucket, the top 16 the signature.
    fn hash(&self) -> u64;
}

impl Key for u16 {
    #[inline]
    fn hash(&self) -> u64 {
        hash_u64(u64::from(*self))
    }
}
impl Key for u32 {
    #[inline]
    fn hash(&self) -> u64 {
        hash_u64(u64::from(*self))
    }
}
impl Key for u64 {
    #[inline]
    fn hash(&self) -> u64 {
        hash_u64(*self)
    }
}
impl Key for u128 {
    #[inline]
    fn hash(&self) -> u64 {
        hash_u128(*self)
    }
}
impl<const N: usize> Key for [u8; N] {
    #[inline]
    fn hash(&self) -> u64 {
        hash_bytes(self)
    }
}
impl<const N: usize> Key for [u64; N] {
    #[inline]
    fn hash(&self) -> u64 {
        hash_words(self)
    }
}

/// Why an insert failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// All entries are used, or no cuckoo chain reaches a free slot. The table is unchanged.
    Full,
}

impl core::fmt::Display for InsertError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            InsertError::Full => f.write_str("exact-match table is full"),
        }
    }
}
impl std::error::Error for InsertError {}

/// One cache line: 8 signatures (four 16-bit lanes per `u64`, slot `i` in word `i / 4` at bit
/// `16 * (i % 4)`) and 8 entry indices. Signature 0 marks an empty slot.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket {
    sig: [u64; 2],
    idx: [u32; SLOTS],
}

/// Entries above which [`ExactTable::lookup_lanes`] prefetches: 4,096 entries touch at most
/// 4,096 buckets and entries, 320 KiB, within a server core's L2 (512 KiB–2 MiB).
const PREFETCH_MIN_LEN: usize = 4096;

/// `0x0001` in every 16-bit lane.
const LANE_ONE: u64 = 0x0001_0001_0001_0001;
/// The top bit of every 16-bit lane.
const LANE_TOP: u64 = 0x8000_8000_8000_8000;
/// Gathers bits 0, 16, 32, 48 into bits 48..=51 (partial products never collide, so no carry).
const GATHER: u64 = 1 << 48 | 1 << 33 | 1 << 18 | 1 << 3;

/// Bit `k` set when 16-bit lane `k` of `x` is zero (exact for every lane: the per-lane add
/// of 0x7fff cannot carry into the next lane).
#[inline]
fn zero_lanes(x: u64) -> u32 {
    let nonzero = ((x & !LANE_TOP).wrapping_add(!LANE_TOP) | x) & LANE_TOP;
    let zero = !nonzero & LANE_TOP;
    ((zero >> 15).wrapping_mul(GATHER) >> 48) as u32 & 0xf
}

/// Slot of set bit `p` of a [`Bucket::matches_sparse`] mask (bit `2s` for slot `s`).
#[inline]
fn slot_of_bit(p: u32) -> usize {
    (p / 2) as usize
}

impl Bucket {
    /// Slots holding signature `s`, one bit each in [`slot_of_bit`] order: the lookup's match,
    /// one vector compare ([`lanes_eq16`]; the SWAR form took about 17 instructions).
    #[inline]
    fn matches_sparse(&self, s: u16) -> u32 {
        lanes_eq16(&self.sig, s)
    }
    /// Bit `i` set when slot `i` holds signature `s`.
    #[inline]
    fn matches(&self, s: u16) -> u32 {
        let b = u64::from(s).wrapping_mul(LANE_ONE);
        zero_lanes(self.sig[0] ^ b) | zero_lanes(self.sig[1] ^ b) << 4
    }
    /// First empty slot.
    #[inline]
    fn free_slot(&self) -> Option<usize> {
        let m = self.matches(0);
        (m != 0).then(|| m.trailing_zeros() as usize)
    }
    /// Signature of slot `i`.
    #[inline]
    fn sig(&self, i: usize) -> u16 {
        (self.sig[(i / 4) % 2] >> (16 * (i % 4))) as u16
    }
    /// Sets the signature of slot `i`.
    #[inline]
    fn set_sig(&mut self, i: usize, s: u16) {
        let w = &mut self.sig[(i / 4) % 2];
        let sh = 16 * (i % 4);
        *w = (*w & !(0xffff << sh)) | u64::from(s) << sh;
    }
}

#[derive(Clone, Copy)]
struct Entry<K, V> {
    key: K,
    val: V,
}

/// A node of the cuckoo breadth-first search: a bucket reached by moving `slot` of the
/// parent node's bucket to its alternate bucket.
#[derive(Clone, Copy)]
struct Node {
    bucket: u32,
    parent: u32,
    slot: u8,
}
const ROOT: u32 = u32::MAX;

/// Signature of a hash: its top 16 bits with the lowest set, so never 0 (the empty mark). 15
/// bits of signature: 8 / 32768 false matches per bucket; one `or` instead of a compare and
/// an add (as the flow table's index).
#[inline]
fn sig(h: u64) -> u16 {
    ((h >> 48) as u16) | 1
}

/// The other bucket of a slot in bucket `b` holding signature `s` (an involution).
#[inline]
fn alt(b: usize, s: u16, mask: usize) -> usize {
    let f = (u64::from(s).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) | 1;
    (b ^ f as usize) & mask
}

/// Exact-match table from `K` to `V` (see the module doc for the layout and the algorithm).
#[derive(Clone)]
pub struct ExactTable<K, V> {
    buckets: Box<[Bucket]>,
    mask: usize,
    entries: Vec<Entry<K, V>>,
    free: Vec<u32>,
    capacity: usize,
    len: usize,
    bfs: Vec<Node>,
}

/// Where a batch lookup ([`ExactTable::lookup_into`]) puts each lane's result.
pub trait LaneSink<V: Copy> {
    /// Lane `i`'s result (`None`: a miss).
    fn put(&mut self, i: usize, r: Option<V>);
    /// The one result of every lane of `lanes` (a batch of one key).
    #[inline]
    fn all(&mut self, lanes: Lanes, r: Option<V>) {
        each_lane!(i in lanes => { self.put(i, r) });
    }
}

/// Results into an array, `miss` for a miss ([`ExactTable::lookup_lanes`]).
struct Results<'a, V> {
    out: &'a mut [V; BATCH_MAX],
    miss: V,
}

impl<V: Copy> LaneSink<V> for Results<'_, V> {
    #[inline(always)]
    fn put(&mut self, i: usize, r: Option<V>) {
        self.out[i % BATCH_MAX] = r.unwrap_or(self.miss);
    }
    #[inline(always)]
    fn all(&mut self, lanes: Lanes, r: Option<V>) {
        let v = r.unwrap_or(self.miss);
        each_lane!(i in lanes => { self.out[i % BATCH_MAX] = v });
    }
}

impl<K: Key, V: Copy> ExactTable<K, V> {
    /// An empty table that holds up to `n` entries (at least 1; `n` ≤ 2^31). Control thread.
    pub fn with_capacity(n: usize) -> Self {
        let n = n.clamp(1, 1 << 31);
        let slots = n + n / 9 + 1;
        let nb = slots.div_ceil(SLOTS).next_power_of_two();
        ExactTable {
            buckets: vec![Bucket::default(); nb].into_boxed_slice(),
            mask: nb - 1,
            entries: Vec::with_capacity(n),
            free: Vec::new(),
            capacity: n,
            len: 0,
            bfs: Vec::new(),
        }
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when the table holds no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Most entries the table can hold.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Number of 64-byte buckets.
    #[inline]
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }
    /// Bytes of memory held (buckets plus the entry array's allocation).
    pub fn memory_bytes(&self) -> usize {
        self.buckets.len() * core::mem::size_of::<Bucket>()
            + self.entries.capacity() * core::mem::size_of::<Entry<K, V>>()
            + self.free.capacity() * 4
    }

    /// The hash a key is looked up with; pass it to [`Self::prefetch`] and
    /// [`Self::lookup_hashed`] to pipeline lookups by hand.
    #[inline]
    pub fn hash(&self, k: &K) -> u64 {
        k.hash()
    }

    /// Prefetches both candidate buckets of hash `h`. Worker; never panics.
    #[inline]
    pub fn prefetch(&self, h: u64) {
        let p = h as usize & self.mask;
        if let Some(b) = self.buckets.get(p) {
            prefetch_read(b);
        }
        if let Some(b) = self.buckets.get(alt(p, sig(h), self.mask)) {
            prefetch_read(b);
        }
    }

    /// The value stored for `k`. Worker; never panics, never allocates.
    #[inline]
    pub fn lookup(&self, k: &K) -> Option<V> {
        self.lookup_hashed(k, k.hash())
    }

    /// The value stored for `k`, whose hash `h` the caller computed with [`Self::hash`].
    #[inline]
    pub fn lookup_hashed(&self, k: &K, h: u64) -> Option<V> {
        let s = sig(h);
        let p = h as usize & self.mask;
        let a = alt(p, s, self.mask);
        self.probe(p, s, k).or_else(|| self.probe(a, s, k))
    }

    /// Searches bucket `b` for key `k` with signature `s`.
    #[inline(always)]
    fn probe(&self, b: usize, s: u16, k: &K) -> Option<V> {
        let bucket = self.buckets.get(b)?;
        let mut m = bucket.matches_sparse(s);
        while m != 0 {
            let i = slot_of_bit(m.trailing_zeros());
            m &= m - 1;
            if let Some(e) = self.entries.get(bucket.idx[i % SLOTS] as usize) {
                if e.key == *k {
                    return Some(e.val);
                }
            }
        }
        None
    }

    /// Looks up every key: `out[i] = lookup(&keys[i])` for `i < min(keys.len(), out.len())`.
    /// Returns the number of hits. Runs in windows of [`WINDOW`] keys: hash and prefetch both
    /// buckets, compare signatures and prefetch entries, compare keys. Worker; never panics,
    /// never allocates.
    #[inline]
    pub fn lookup_batch(&self, keys: &[K], out: &mut [Option<V>]) -> u64 {
        self.lookup_batch_window::<WINDOW>(keys, out)
    }

    /// [`Self::lookup_batch`] with a chosen window size `W` (for benchmarks).
    #[doc(hidden)]
    pub fn lookup_batch_window<const W: usize>(&self, keys: &[K], out: &mut [Option<V>]) -> u64 {
        let n = keys.len().min(out.len());
        let mut hits = 0;
        for (kc, oc) in keys[..n].chunks(W).zip(out[..n].chunks_mut(W)) {
            hits += self.window::<W>(kc, oc);
        }
        hits
    }

    /// The three passes over one window of at most `W` keys (`keys.len() == out.len()`).
    #[inline]
    fn window<const W: usize>(&self, keys: &[K], out: &mut [Option<V>]) -> u64 {
        let mut sigs = [0u16; W];
        let mut prim = [0u32; W];
        let mut other = [0u32; W];
        let mut cand = [0u16; W];
        let mask = self.mask;
        // Pass 1: hash, prefetch both buckets.
        for (((k, s), p), a) in keys.iter().zip(&mut sigs).zip(&mut prim).zip(&mut other) {
            let h = k.hash();
            *s = sig(h);
            let b = h as usize & mask;
            *p = b as u32;
            *a = alt(b, *s, mask) as u32;
            if let Some(b) = self.buckets.get(b) {
                prefetch_read(b);
            }
            if let Some(b) = self.buckets.get(*a as usize) {
                prefetch_read(b);
            }
        }
        // Pass 2: signature compare in both buckets, prefetch the first candidate entry.
        for (((c, &s), &p), &a) in cand.iter_mut().zip(&sigs).zip(&prim).zip(&other) {
            let (Some(bp), Some(ba)) = (self.buckets.get(p as usize), self.buckets.get(a as usize)) else {
                continue;
            };
            let m = bp.matches(s) | ba.matches(s) << SLOTS;
            *c = m as u16;
            if m != 0 {
                let i = m.trailing_zeros() as usize;
                let b = if i < SLOTS { bp } else { ba };
                if let Some(e) = self.entries.get(b.idx[i % SLOTS] as usize) {
                    prefetch_read(e);
                }
            }
        }
        // Pass 3: key compare on the candidates.
        let mut hits = 0;
        for ((o, k), ((&c, &p), &a)) in out.iter_mut().zip(keys).zip(cand.iter().zip(&prim).zip(&other)) {
            *o = None;
            let mut m = u32::from(c);
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                let b = if i < SLOTS { p } else { a };
                let Some(bucket) = self.buckets.get(b as usize) else {
                    break;
                };
                if let Some(e) = self.entries.get(bucket.idx[i % SLOTS] as usize) {
                    if e.key == *k {
                        *o = Some(e.val);
                        hits += 1;
                        break;
                    }
                }
            }
        }
        hits
    }

    /// Looks up `keys[i]` for each slot `i` in `lanes`, writing `out[i]` (`miss` for a key with
    /// no entry, e.g. [`crate::MISS`]); other slots of `out` are untouched. Returns the number
    /// of hits. Worker; never panics, never allocates.
    pub fn lookup_lanes(&self, keys: &[K; BATCH_MAX], lanes: Lanes, out: &mut [V; BATCH_MAX], miss: V) -> u64 {
        self.lookup_into(keys, lanes, &mut Results { out, miss })
    }

    /// [`lookup_lanes`](Self::lookup_lanes) with each lane's result handed to `sink` instead of
    /// written to an array, so that a caller acts on it in the lookup's own loop (a table whose
    /// entries each set one register: no second loop over the results). Returns the number of
    /// hits.
    #[inline]
    pub fn lookup_into<S: LaneSink<V>>(&self, keys: &[K; BATCH_MAX], lanes: Lanes, sink: &mut S) -> u64 {
        // A batch whose keys are all one (one VNI or one tunnel endpoint, as a VXLAN gateway
        // sees from a peer; VPP's VXLAN input keeps its last tunnel for the same reason): one
        // lookup serves every lane. Any other batch stops at its first differing key, most
        // often the second.
        let mut it = lanes.into_iter();
        if let Some(first) = it.next() {
            let k0 = keys[first];
            // A full batch's keys are compared in one pass with no early exit, which the
            // compiler vectorises (the walk over the lane bits took about 9 instructions a
            // key of a batch of one VNI: `scripts/instructions sdn-overlay`).
            let uniform = match lanes.prefix_len() {
                Some(n) => keys[..n].iter().fold(true, |all, k| all & (*k == k0)),
                None => it.all(|i| keys[i] == k0),
            };
            if uniform {
                let r = self.lookup(&k0);
                sink.all(lanes, r);
                return if r.is_some() { lanes.count() as u64 } else { 0 };
            }
        }
        let mut hs = [0u64; BATCH_MAX];
        // A table of a few thousand entries stays in the L2 cache once warm: prefetching its
        // buckets only costs instructions (about 17 a key with both buckets). Past that, both
        // candidate buckets are fetched ahead for the whole batch.
        if self.len > PREFETCH_MIN_LEN {
            each_lane!(i in lanes => {
                hs[i] = keys[i].hash();
                self.prefetch(hs[i]);
            });
        } else {
            each_lane!(i in lanes => { hs[i] = keys[i].hash() });
        }
        // The probes inline here (out of line, `lookup_hashed` spent ~12 of its ~60
        // instructions on call, prologue and the `Option` return: callgrind, sdn-overlay).
        // Most keys sit in their primary bucket, so the alternate is only computed on a miss.
        let mask = self.mask;
        let mut hits = 0;
        each_lane!(i in lanes => {
            let h = hs[i];
            let (s, p) = (sig(h), h as usize & mask);
            let mut r = self.probe(p, s, &keys[i]);
            if r.is_none() {
                r = self.probe(alt(p, s, mask), s, &keys[i]);
            }
            hits += u64::from(r.is_some());
            sink.put(i, r);
        });
        hits
    }

    /// Finds `k`: (bucket, slot, entry index).
    fn find(&self, k: &K, h: u64) -> Option<(usize, usize, usize)> {
        let s = sig(h);
        let p = h as usize & self.mask;
        for b in [p, alt(p, s, self.mask)] {
            let bucket = self.buckets.get(b)?;
            let mut m = bucket.matches(s);
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                let idx = bucket.idx[i % SLOTS] as usize;
                if self.entries.get(idx).is_some_and(|e| e.key == *k) {
                    return Some((b, i, idx));
                }
            }
        }
        None
    }

    /// The value of `k`, writable (update in place). Control thread.
    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        let (_, _, idx) = self.find(k, k.hash())?;
        self.entries.get_mut(idx).map(|e| &mut e.val)
    }

    /// Inserts `k → v`, or updates the value in place if `k` is present; returns the old value.
    /// Control thread.
    ///
    /// # Errors
    /// [`InsertError::Full`] when all `capacity` entries are used or no cuckoo chain of at most
    /// [`BFS_NODES`] buckets frees a slot; the table is then unchanged.
    pub fn insert(&mut self, k: K, v: V) -> Result<Option<V>, InsertError> {
        let h = k.hash();
        if let Some((_, _, idx)) = self.find(&k, h) {
            let e = self.entries.get_mut(idx).ok_or(InsertError::Full)?;
            return Ok(Some(core::mem::replace(&mut e.val, v)));
        }
        if self.len >= self.capacity {
            return Err(InsertError::Full);
        }
        let s = sig(h);
        let p = h as usize & self.mask;
        let a = alt(p, s, self.mask);
        let (b, slot) = match (self.buckets[p].free_slot(), self.buckets[a].free_slot()) {
            (Some(i), _) => (p, i),
            (None, Some(i)) => (a, i),
            (None, None) => self.cuckoo(p, a).ok_or(InsertError::Full)?,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.entries[i as usize] = Entry { key: k, val: v };
                i
            }
            None => {
                self.entries.push(Entry { key: k, val: v });
                (self.entries.len() - 1) as u32
            }
        };
        let bucket = &mut self.buckets[b];
        bucket.idx[slot] = idx;
        bucket.set_sig(slot, s);
        self.len += 1;
        Ok(None)
    }

    /// Breadth-first search for a displacement chain from bucket `p` or `a` to a free slot;
    /// performs the moves and returns the freed (bucket, slot) in `p` or `a`.
    fn cuckoo(&mut self, p: usize, a: usize) -> Option<(usize, usize)> {
        let mask = self.mask;
        let mut q = core::mem::take(&mut self.bfs);
        q.clear();
        q.push(Node { bucket: p as u32, parent: ROOT, slot: 0 });
        if a != p {
            q.push(Node { bucket: a as u32, parent: ROOT, slot: 0 });
        }
        let mut found = None;
        let mut head = 0;
        'search: while head < q.len() && q.len() < BFS_NODES {
            let node = q[head];
            let bucket = self.buckets[node.bucket as usize];
            for slot in 0..SLOTS {
                let s = bucket.sig(slot);
                let to = alt(node.bucket as usize, s, mask);
                if to == node.bucket as usize || on_path(&q, head as u32, to as u32) {
                    continue;
                }
                q.push(Node { bucket: to as u32, parent: head as u32, slot: slot as u8 });
                if let Some(free) = self.buckets[to].free_slot() {
                    found = Some((q.len() - 1, free));
                    break 'search;
                }
            }
            head += 1;
        }
        let result = found.map(|(mut cur, mut empty)| loop {
            let node = q[cur];
            if node.parent == ROOT {
                break (node.bucket as usize, empty);
            }
            let from = q[node.parent as usize].bucket as usize;
            let i = node.slot as usize;
            let (s, idx) = (self.buckets[from].sig(i), self.buckets[from].idx[i]);
            let dst = &mut self.buckets[node.bucket as usize];
            dst.idx[empty] = idx;
            dst.set_sig(empty, s);
            self.buckets[from].set_sig(i, 0);
            empty = i;
            cur = node.parent as usize;
        });
        self.bfs = q;
        result
    }

    /// Removes `k`, returning its value. Control thread.
    pub fn remove(&mut self, k: &K) -> Option<V> {
        let (b, slot, idx) = self.find(k, k.hash())?;
        let bucket = &mut self.buckets[b];
        bucket.set_sig(slot, 0);
        bucket.idx[slot] = 0;
        self.free.push(idx as u32);
        self.len -= 1;
        self.entries.get(idx).map(|e| e.val)
    }

    /// Removes every entry. Control thread.
    pub fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
        self.entries.clear();
        self.free.clear();
        self.len = 0;
    }

    /// Every (key, value), in bucket order. Control thread.
    pub fn iter(&self) -> impl Iterator<Item = (K, V)> + '_ {
        self.buckets.iter().flat_map(move |b| {
            (0..SLOTS).filter(move |&i| b.sig(i) != 0).filter_map(move |i| self.entries.get(b.idx[i] as usize).map(|e| (e.key, e.val)))
        })
    }
}

/// True when bucket `b` is already on the path from node `n` back to a root.
fn on_path(q: &[Node], mut n: u32, b: u32) -> bool {
    while let Some(node) = q.get(n as usize) {
        if node.bucket == b {
            return true;
        }
        n = node.parent;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::exact::RefExact;
    use proptest::prelude::*;

    #[test]
    fn bucket_is_one_cache_line() {
        assert_eq!(core::mem::size_of::<Bucket>(), 64);
        assert_eq!(core::mem::align_of::<Bucket>(), 64);
    }

    /// The SWAR compare equals the obvious per-slot loop, for every slot pattern of
    /// matching / empty / other signatures and lane values near the carry boundaries.
    #[test]
    fn swar_matches_equals_scalar() {
        let vals = [0u16, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1234];
        let mut b = Bucket::default();
        for pattern in 0..(7u32.pow(8)) {
            let mut p = pattern;
            for i in 0..SLOTS {
                b.set_sig(i, vals[(p % 7) as usize]);
                p /= 7;
            }
            for &s in &vals {
                let want = (0..SLOTS).fold(0, |m, i| m | u32::from(b.sig(i) == s) << i);
                assert_eq!(b.matches(s), want, "pattern {pattern} s {s:#x}");
                let mut sparse = b.matches_sparse(s);
                let mut got = 0u32;
                while sparse != 0 {
                    got |= 1 << slot_of_bit(sparse.trailing_zeros());
                    sparse &= sparse - 1;
                }
                assert_eq!(got, want, "sparse: pattern {pattern} s {s:#x}");
            }
        }
    }

    #[test]
    fn alt_is_an_involution_and_differs() {
        for mask in [1usize, 7, 1023, (1 << 21) - 1] {
            for s in 1..=u16::MAX {
                let b = (usize::from(s) * 7919) & mask;
                let a = alt(b, s, mask);
                assert_ne!(a, b);
                assert_eq!(alt(a, s, mask), b);
            }
        }
    }

    #[test]
    fn insert_lookup_update_remove() {
        let mut t = ExactTable::<u64, u32>::with_capacity(100);
        assert_eq!(t.lookup(&5), None);
        assert_eq!(t.insert(5, 50), Ok(None));
        assert_eq!(t.insert(6, 60), Ok(None));
        assert_eq!(t.lookup(&5), Some(50));
        assert_eq!(t.insert(5, 51), Ok(Some(50)));
        assert_eq!(t.lookup(&5), Some(51));
        *t.get_mut(&6).unwrap_or(&mut 0) = 61;
        assert_eq!(t.lookup(&6), Some(61));
        assert_eq!(t.len(), 2);
        assert_eq!(t.remove(&5), Some(51));
        assert_eq!(t.remove(&5), None);
        assert_eq!(t.lookup(&5), None);
        assert_eq!(t.len(), 1);
        let mut all: Vec<_> = t.iter().collect();
        all.sort_unstable();
        assert_eq!(all, vec![(6, 61)]);
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.lookup(&6), None);
    }

    /// Filling to the stated capacity succeeds (the bucket array is then ≤ 90 % full, which
    /// needs cuckoo moves), one more fails with `Full`, and every key is still found.
    #[test]
    fn fills_to_capacity_then_reports_full() {
        for n in [1usize, 8, 100, 4096, 200_000] {
            let mut t = ExactTable::<u32, u32>::with_capacity(n);
            for k in 0..n as u32 {
                assert_eq!(t.insert(k.wrapping_mul(0x9E37_79B9), k), Ok(None), "n={n} k={k}");
            }
            assert_eq!(t.insert(u32::MAX, 0), Err(InsertError::Full));
            assert_eq!(t.len(), n);
            for k in 0..n as u32 {
                assert_eq!(t.lookup(&k.wrapping_mul(0x9E37_79B9)), Some(k));
            }
            // Remove one, and the slot is reusable.
            assert_eq!(t.remove(&0), Some(0));
            assert_eq!(t.insert(u32::MAX, 7), Ok(None));
            assert_eq!(t.lookup(&u32::MAX), Some(7));
        }
    }

    /// With more keys than slots in two buckets' worth of space, insert fails cleanly (no
    /// loop) and leaves every earlier key in place.
    #[test]
    fn bucket_array_full_fails_without_losing_keys() {
        // Capacity above the slot count: the bucket array itself runs out.
        let mut t = ExactTable::<u64, u64>::with_capacity(64);
        t.capacity = usize::MAX; // white-box: allow more entries than slots
        let slots = t.buckets() * SLOTS;
        let mut stored = Vec::new();
        for k in 0..(slots as u64 * 2) {
            match t.insert(k, !k) {
                Ok(_) => stored.push(k),
                Err(InsertError::Full) => {}
            }
        }
        assert!(stored.len() <= slots);
        assert!(stored.len() * 100 >= slots * 90, "load {} of {slots}", stored.len());
        for k in &stored {
            assert_eq!(t.lookup(k), Some(!k));
        }
        assert_eq!(t.iter().count(), stored.len());
    }

    #[test]
    fn key_types() {
        let mut a = ExactTable::<[u8; 6], u16>::with_capacity(16);
        a.insert([1, 2, 3, 4, 5, 6], 9).ok();
        assert_eq!(a.lookup(&[1, 2, 3, 4, 5, 6]), Some(9));
        assert_eq!(a.lookup(&[1, 2, 3, 4, 5, 7]), None);
        let mut b = ExactTable::<[u64; 4], u8>::with_capacity(16);
        b.insert([1, 2, 3, 4], 1).ok();
        assert_eq!(b.lookup(&[1, 2, 3, 4]), Some(1));
        assert_eq!(b.lookup(&[1, 2, 3, 5]), None);
        let mut c = ExactTable::<u128, u8>::with_capacity(16);
        c.insert(1 << 100, 3).ok();
        assert_eq!(c.lookup(&(1 << 100)), Some(3));
        let mut d = ExactTable::<u16, u8>::with_capacity(16);
        d.insert(7, 7).ok();
        assert_eq!(d.lookup(&7), Some(7));
    }

    #[test]
    fn lanes_lookup_only_touches_lanes() {
        let mut t = ExactTable::<u64, u32>::with_capacity(1000);
        for k in 0..500u64 {
            t.insert(k * 2, k as u32).ok();
        }
        let mut keys = [0u64; BATCH_MAX];
        for (i, k) in keys.iter_mut().enumerate() {
            *k = i as u64;
        }
        let mut lanes = Lanes::first(BATCH_MAX);
        lanes.remove(4);
        lanes.remove(5);
        let mut out = [7; BATCH_MAX];
        let hits = t.lookup_lanes(&keys, lanes, &mut out, crate::MISS);
        assert_eq!(hits, 127);
        assert_eq!(out[4], 7);
        assert_eq!(out[5], 7);
        assert_eq!(out[6], 3);
        assert_eq!(out[7], crate::MISS);
    }

    #[test]
    fn a_batch_of_one_key_is_looked_up_once_for_every_lane() {
        let mut t = ExactTable::<u64, u32>::with_capacity(64);
        t.insert(100, 9).ok();
        // A full batch (compared in one pass) and one with a hole at lane 3 (the lane walk).
        for hole in [None, Some(3)] {
            let mut lanes = Lanes::first(BATCH_MAX);
            if let Some(h) = hole {
                lanes.remove(h);
            }
            let n = lanes.count() as u64;
            let outside = |i: usize| hole == Some(i);
            for (key, want, hits) in [(100u64, 9u32, n), (101, crate::MISS, 0)] {
                let mut keys = [key; BATCH_MAX];
                if let Some(h) = hole {
                    keys[h] = 55; // outside the lanes: ignored
                }
                let mut out = [7; BATCH_MAX];
                assert_eq!(t.lookup_lanes(&keys, lanes, &mut out, crate::MISS), hits);
                assert!(out.iter().enumerate().all(|(i, &o)| o == if outside(i) { 7 } else { want }), "{key}");
                // One differing key anywhere, the last lane included, takes the per-key path.
                for odd in [0, 1, 200, BATCH_MAX - 1] {
                    let mut keys = keys;
                    keys[odd] = if key == 100 { 101 } else { 100 };
                    let mut out = [7; BATCH_MAX];
                    let got = t.lookup_lanes(&keys, lanes, &mut out, crate::MISS);
                    let each: Vec<u32> =
                        (0..BATCH_MAX).map(|i| if outside(i) { 7 } else { t.lookup(&keys[i]).unwrap_or(crate::MISS) }).collect();
                    assert_eq!(&out[..], &each[..], "{key} odd {odd} hole {hole:?}");
                    assert_eq!(got, each.iter().enumerate().filter(|&(i, &o)| !outside(i) && o != crate::MISS).count() as u64);
                }
            }
        }
        let mut out = [7; BATCH_MAX];
        assert_eq!(t.lookup_lanes(&[100; BATCH_MAX], Lanes::NONE, &mut out, crate::MISS), 0);
        assert_eq!(out, [7; BATCH_MAX]);
    }

    /// 10 M entries (the stated scale). Slow in the test profile: run with `--ignored`.
    #[test]
    #[ignore]
    fn ten_million_entries() {
        let n = 10_000_000u64;
        let mut t = ExactTable::<u64, u32>::with_capacity(n as usize);
        for k in 0..n {
            assert_eq!(t.insert(hash_u64(k), k as u32), Ok(None));
        }
        let keys: Vec<u64> = (0..n).map(hash_u64).collect();
        let mut out = vec![None; keys.len()];
        assert_eq!(t.lookup_batch(&keys, &mut out), n);
        assert!(out.iter().enumerate().all(|(i, o)| *o == Some(i as u32)));
        eprintln!("10M u64->u32: {} MB", t.memory_bytes() >> 20);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u16, u32),
        Remove(u16),
        Batch(Vec<u16>),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<u16>(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            2 => any::<u16>().prop_map(Op::Remove),
            1 => prop_oneof![
                Just(0usize), Just(1), Just(255), Just(256), 0usize..=256
            ].prop_flat_map(|n| proptest::collection::vec(any::<u16>(), n)).prop_map(Op::Batch),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Random inserts, removes and batch lookups (every batch length 0..=256 is
        /// reachable; 0, 1, 255, 256 are weighted in) agree with the `HashMap` twin. Keys are
        /// drawn from a small space so hits, updates and removals of present keys are common;
        /// the small capacity forces cuckoo moves and `Full`.
        #[test]
        fn matches_reference(cap in 1usize..600, ops in proptest::collection::vec(op(), 1..300)) {
            let mut t = ExactTable::<u64, u32>::with_capacity(cap);
            let mut r = RefExact::<u64, u32>::new();
            let space = 1u64 << 10;
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let k = u64::from(k) % space;
                        match t.insert(k, v) {
                            Ok(old) => prop_assert_eq!(old, r.insert(k, v)),
                            Err(InsertError::Full) => {
                                prop_assert!(r.lookup(&k).is_none());
                                // At most 90 % of slots are ever used: Full only at capacity.
                                prop_assert_eq!(r.len(), cap);
                            }
                        }
                    }
                    Op::Remove(k) => {
                        let k = u64::from(k) % space;
                        prop_assert_eq!(t.remove(&k), r.remove(&k));
                    }
                    Op::Batch(ks) => {
                        let ks: Vec<u64> = ks.into_iter().map(|k| u64::from(k) % space).collect();
                        let mut out = vec![Some(7); ks.len()];
                        let mut want = vec![None; ks.len()];
                        let hits = t.lookup_batch(&ks, &mut out);
                        let want_hits = r.lookup_batch(&ks, &mut want);
                        prop_assert_eq!(hits, want_hits);
                        prop_assert_eq!(&out, &want);
                        for (k, w) in ks.iter().zip(&want) {
                            prop_assert_eq!(t.lookup(k), *w);
                        }
                    }
                }
                prop_assert_eq!(t.len(), r.len());
            }
        }
    }
}
