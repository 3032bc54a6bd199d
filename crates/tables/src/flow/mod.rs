//! Connection tracking: a per-worker flow table keyed by the bidirectional 5-tuple plus zone.
//!
//! # Layout
//! ```text
//!  index: 2^k buckets x 64 B                    entries: capacity x 128 B (pre-allocated)
//!  ┌ sig[8] (u16) ┬ idx[8] (u32) ┐              ┌ line 0: key (44 B) action expires state ┐
//!  │ 8 slots per cache line      │ ──idx──▶     └ line 1: TCP windows, per-dir counters   ┘
//!  └─────────────────────────────┘              free list: stack of u32; wheel links: 8 B
//! ```
//! The index is bucketised cuckoo hashing with signatures, as DPDK's `rte_hash` (Fan, Andersen,
//! Kaminsky, "MemC3", NSDI 2013; Li et al., "Algorithmic improvements for fast concurrent cuckoo
//! hashing", EuroSys 2014): a key's 64-bit hash picks a primary bucket (low bits) and a 32-bit
//! signature (high bits); its alternative bucket is `primary ^ f(sig)`, so either bucket can
//! compute the other. Signatures are 16 bits (as rte_hash), compared 8 at a time with one vector compare. Inserts go to the primary bucket, else the alternative, else a
//! breadth-first search (depth ≤ 3) for a chain of displacements ending in a free slot. The index
//! is sized for ≤ 80 % load, so a full table means "no free entry", with cuckoo failure only as a
//! theoretical backstop (both are reported as [`InsertError::Full`]).
//!
//! # Keys and directions
//! [`FlowKey`] stores the two endpoints ordered (lower `(addr, port)` first), so both directions
//! of a connection build the same key; the builder also reports which [`Side`] sent the packet.
//! The entry remembers the initiator's side, so [`FlowTable::dir`] tells original from reply.
//! IPv4 addresses are stored IPv4-mapped (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2): one 44-byte key
//! for both families. ICMP echo uses the identifier as both ports.
//!
//! # Bulk lookup
//! [`FlowTable::lookup_batch`] runs a three-stage software pipeline over the batch, `D` packets
//! apart: hash + prefetch the primary bucket; compare signatures + prefetch the entry (or the
//! alternative bucket); compare keys. The DRAM misses of `2D` packets overlap, which is what
//! keeps 5M flows close to 1k flows in speed.
//!
//! # Ageing
//! Each entry stores its deadline (`now + timeout(state)`); a packet only rewrites it. A timer
//! wheel ([`wheel`]) holds every entry at a tick no later than its deadline; [`FlowTable::expire`]
//! (called once per batch with a small budget) pops due entries and either frees them or, when
//! their deadline moved on, re-links them. Lookups treat a passed deadline as a miss and free the
//! entry at once, so expiry is exact even when the wheel lags behind. All O(1), no allocation.
//!
//! # Sharding
//! The table has one owner (a worker) and takes no lock. Workers must receive both directions of
//! a connection: spread packets over workers by [`symmetric_hash`] of the normalised key (or any
//! other symmetric hash, e.g. RSS with a symmetric Toeplitz key).
//!
//! # Full table
//! DASH's flow-table test fills the table past its size: new connections fail with
//! [`InsertError::Full`] (counted in [`FlowStats::full`]; the caller drops the packet with
//! `flow_table_full`), while established connections keep hitting.

// cost: lookup hit ~139 instr/pkt (hash, 3-stage prefetch pipeline, key compare); lookup + track
//       of an established ACK with window checks ~280; new connection (insert SYN, track
//       SYN+ACK, age one out) ~700 — callgrind, `FLOW_BENCH_INSTR` mode of benches/flow.rs.

pub mod tcp;
pub mod wheel;

pub use tcp::{flags, proto, Conn, Dir, Invalid, Segment, State, TcpVerdict, Timeouts};

use fastpath_packet::prefetch::{lanes_eq16, prefetch_read};
use wheel::Wheel;
use zerocopy::{Immutable, IntoBytes};

/// Index of an entry; `u32::MAX` ([`NO_FLOW`]) means none (same convention as `Meta::flow`).
pub type FlowId = u32;

/// "No flow" in [`FlowTable::lookup_batch`] output.
pub const NO_FLOW: FlowId = u32::MAX;

/// Which endpoint of a normalised [`FlowKey`] sent a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Side {
    /// The packet's source is the key's lower endpoint.
    Lo = 0,
    /// The packet's source is the key's higher endpoint.
    Hi = 1,
}

/// A bidirectional connection key: zone (VNI / VNET), protocol and the two endpoints in order.
/// 44 bytes with no implicit padding, so keys compare as bytes. Build it with [`FlowKey::new`],
/// [`FlowKey::v4`] or [`FlowKey::v6`].
#[derive(Clone, Copy, Debug, Default, Eq, PartialOrd, Ord, IntoBytes, Immutable)]
#[repr(C)]
pub struct FlowKey {
    /// Zone / VNI / VNET: flows in different zones never match.
    pub zone: u32,
    /// Lower endpoint's address (IPv6, or IPv4-mapped), as four big-endian words.
    pub lo_addr: [u32; 4],
    /// Higher endpoint's address.
    pub hi_addr: [u32; 4],
    /// Lower endpoint's port (ICMP: echo identifier).
    pub lo_port: u16,
    /// Higher endpoint's port (ICMP: echo identifier).
    pub hi_port: u16,
    /// IP protocol number.
    pub proto: u8,
    /// 1 for IPv6, 0 for IPv4.
    pub v6: u8,
    /// Always 0: the tail padding made explicit, so [`IntoBytes`] holds and equality is a
    /// compare of the 44 bytes.
    pad: u16,
}

/// Equality of every field, as one compare of the key's 44 bytes (two overlapping 32-byte
/// vector compares with AVX2) instead of the derived seven field tests and branches (stage 3 of the bulk lookup; about 14
/// fewer instructions per packet, callgrind, `sdn-overlay`).
impl PartialEq for FlowKey {
    #[inline]
    fn eq(&self, other: &FlowKey) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// Hashes the bytes [`PartialEq`] compares (the padding is always 0).
impl core::hash::Hash for FlowKey {
    #[inline]
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        state.write(self.as_bytes());
    }
}

impl FlowKey {
    /// The all-zero key (array initialiser).
    pub const ZERO: FlowKey = FlowKey { zone: 0, lo_addr: [0; 4], hi_addr: [0; 4], lo_port: 0, hi_port: 0, proto: 0, v6: 0, pad: 0 };

    /// Normalises a packet's tuple: returns the key and the side its source is on.
    #[inline]
    pub fn new(zone: u32, proto: u8, v6: bool, src: [u32; 4], sport: u16, dst: [u32; 4], dport: u16) -> (FlowKey, Side) {
        let (lo, lp, hi, hp, side) =
            if (src, sport) <= (dst, dport) { (src, sport, dst, dport, Side::Lo) } else { (dst, dport, src, sport, Side::Hi) };
        (FlowKey { zone, lo_addr: lo, hi_addr: hi, lo_port: lp, hi_port: hp, proto, v6: u8::from(v6), pad: 0 }, side)
    }

    /// IPv4 tuple (addresses in network byte order). ICMP echo: pass the identifier as both ports.
    #[inline]
    pub fn v4(zone: u32, proto: u8, src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> (FlowKey, Side) {
        Self::v4_words(zone, proto, u32::from_be_bytes(src), sport, u32::from_be_bytes(dst), dport)
    }

    /// [`v4`](Self::v4) with the addresses as host-order words (`u32::from_be_bytes` of the
    /// wire bytes).
    #[inline]
    pub fn v4_words(zone: u32, proto: u8, s: u32, sport: u16, d: u32, dport: u16) -> (FlowKey, Side) {
        // Same order as `new` on the mapped addresses (their first three words are equal), in
        // one 64-bit compare of (address, port).
        let (lo, lp, hi, hp, side) = if (u64::from(s) << 16 | u64::from(sport)) <= (u64::from(d) << 16 | u64::from(dport)) {
            (s, sport, d, dport, Side::Lo)
        } else {
            (d, dport, s, sport, Side::Hi)
        };
        let key =
            FlowKey { zone, lo_addr: [0, 0, 0xffff, lo], hi_addr: [0, 0, 0xffff, hi], lo_port: lp, hi_port: hp, proto, v6: 0, pad: 0 };
        (key, side)
    }

    /// IPv6 tuple (addresses in network byte order). ICMPv6 echo: the identifier as both ports.
    #[inline]
    pub fn v6(zone: u32, proto: u8, src: [u8; 16], sport: u16, dst: [u8; 16], dport: u16) -> (FlowKey, Side) {
        let w = |a: [u8; 16]| {
            let mut o = [0u32; 4];
            for (i, c) in a.chunks_exact(4).enumerate() {
                o[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
            }
            o
        };
        Self::new(zone, proto, true, w(src), sport, w(dst), dport)
    }
}

const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;
const P2: u64 = 0x8ebc_6af0_9c88_c6e3;
const P3: u64 = 0x5899_65cc_7537_4cc3;
const SYM_SEED: u64 = 0x1d8e_4e27_c47d_124f;
/// [`hash_key`]'s four mixing constants, for code that computes the same hash elsewhere (the
/// eBPF datapath's conntrack).
pub const HASH_PRIMES: [u64; 4] = [P0, P1, P2, P3];
/// Default table seed (any value other than the symmetric-hash seed keeps the bucket bits
/// independent of the worker-selection bits).
pub const DEFAULT_SEED: u64 = 0x2d35_8dcc_aa6c_78a5;

/// 64x64 -> 128 multiply folded to 64 bits (wyhash's `mum`).
#[inline(always)]
fn mum(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

/// 64-bit hash of a key with `seed` (wyhash-style). IPv4 keys (`v6 == 0`, addresses mapped, so
/// only the last address words vary) take two chained 128-bit multiplies over the two varying
/// words, as wyhash does for 16 bytes (~12 instructions); IPv6 keys three independent multiplies
/// and a final mix (~35). Kept apart from `crate::hash::hash_words` on purpose: it takes a seed
/// (the worker-spreading [`symmetric_hash`] must be independent of the bucket bits).
#[inline]
pub fn hash_key(k: &FlowKey, seed: u64) -> u64 {
    let ports = (u64::from(k.zone) << 32) | (u64::from(k.lo_port) << 16) | u64::from(k.hi_port);
    let tail = u64::from(k.proto) | (u64::from(k.v6) << 8);
    if k.v6 == 0 {
        // The address words a v4 key shares with every other one are left out. A key built
        // with `new(.., v6: false, ..)` from unmapped addresses still hashes (worse) and
        // compares correctly.
        let addrs = (u64::from(k.lo_addr[3]) << 32) | u64::from(k.hi_addr[3]);
        let a = mum(addrs ^ P0 ^ seed, ports ^ P1);
        return mum(a ^ P2, tail ^ seed ^ P3);
    }
    // Little-endian word order, so each pair is one 8-byte load.
    let w = |a: &[u32; 4], i: usize| u64::from(a[i]) | (u64::from(a[i + 1]) << 32);
    let a = mum(w(&k.lo_addr, 0) ^ P0 ^ seed, w(&k.lo_addr, 2) ^ P1);
    let b = mum(w(&k.hi_addr, 0) ^ P2, w(&k.hi_addr, 2) ^ P3 ^ seed);
    let c = mum(ports ^ P1, tail ^ P0 ^ seed);
    mum(a ^ b.rotate_left(23) ^ P2, c ^ seed ^ P3)
}

/// Symmetric flow hash for spreading packets over workers: both directions of a connection
/// (which normalise to the same key) get the same value. Independent of the table's hash.
#[inline]
pub fn symmetric_hash(k: &FlowKey) -> u32 {
    (hash_key(k, SYM_SEED) >> 32) as u32
}

/// What a bulk lookup ([`FlowTable::lookup_batch_into`]) does with each key's answer.
pub trait FlowSink {
    /// Key `j` is live entry `id`; `table` is there to track it.
    fn hit(&mut self, table: &mut FlowTable, j: usize, id: FlowId);
    /// Key `j` has no entry.
    fn miss(&mut self, j: usize);
}

/// Table configuration (control path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowConfig {
    /// Most concurrent flows (entries are pre-allocated). 1 ..= 2^31 - 1.
    pub capacity: u32,
    /// Per-state timeouts.
    pub timeouts: Timeouts,
    /// Check TCP sequence/ack numbers against the tracked windows.
    pub window_check: bool,
    /// Timer-wheel tick is `2^tick_shift` ns (default 30: ~1.07 s).
    pub tick_shift: u32,
    /// Timer-wheel slots (power of two; default 4096: a ~73-minute horizon at the default tick).
    pub wheel_slots: u32,
    /// Hash seed.
    pub seed: u64,
}

impl FlowConfig {
    /// Defaults for a table of `capacity` flows: netfilter-like timeouts, window checks on.
    pub fn with_capacity(capacity: u32) -> FlowConfig {
        FlowConfig { capacity, timeouts: Timeouts::default(), window_check: true, tick_shift: 30, wheel_slots: 4096, seed: DEFAULT_SEED }
    }
}

/// Why a configuration was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowConfigError {
    /// `capacity` is 0.
    ZeroCapacity,
    /// `capacity` is 2^31 or more.
    TooLarge(u32),
    /// `tick_shift` is above 40 (ticks longer than ~18 minutes make no sense).
    BadTick(u32),
}

impl core::fmt::Display for FlowConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::ZeroCapacity => write!(f, "flow table capacity must be at least 1"),
            Self::TooLarge(n) => write!(f, "flow table capacity {n} is above 2^31 - 1"),
            Self::BadTick(s) => write!(f, "timer tick 2^{s} ns is above 2^40 ns"),
        }
    }
}

impl std::error::Error for FlowConfigError {}

/// Why an insert failed. Small and `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// No free entry (or, never in practice, no cuckoo path): drop with `flow_table_full`.
    Full,
    /// The key is already tracked (live) at this id; track the packet on it instead.
    Exists(FlowId),
    /// The packet cannot open a connection (e.g. a TCP packet that is not a SYN).
    Invalid(Invalid),
}

/// Event counters of one table (plain integers: one owner).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Connections inserted.
    pub inserted: u64,
    /// Inserts refused because the table was full (`flow_table_full`).
    pub full: u64,
    /// Entries freed because their deadline passed (by the wheel or a lookup).
    pub expired: u64,
    /// Entries removed explicitly.
    pub removed: u64,
    /// Packets the tracker judged invalid (including refused first packets).
    pub invalid: u64,
}

/// One tracked connection: 128 bytes, two cache lines; a lookup reads only the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct FlowEntry {
    key: FlowKey,
    action: u32,
    expires_ns: u64,
    conn: Conn,
    initiator: Side,
    pkts: [u32; 2],
    bytes: [u64; 2],
}

impl FlowEntry {
    const FREE: FlowEntry =
        FlowEntry { key: FlowKey::ZERO, action: 0, expires_ns: 0, conn: Conn::NONE, initiator: Side::Lo, pkts: [0; 2], bytes: [0; 2] };

    /// The connection's key.
    #[inline]
    pub fn key(&self) -> &FlowKey {
        &self.key
    }
    /// Connection state.
    #[inline]
    pub fn state(&self) -> State {
        self.conn.state
    }
    /// Full tracking state (state and TCP windows).
    #[inline]
    pub fn conn(&self) -> &Conn {
        &self.conn
    }
    /// Cached action / verdict word written by the pipeline (0 after insert).
    #[inline]
    pub fn action(&self) -> u32 {
        self.action
    }
    /// Deadline in ns: the entry is gone at or after it.
    #[inline]
    pub fn expires_ns(&self) -> u64 {
        self.expires_ns
    }
    /// The side of the key that opened the connection.
    #[inline]
    pub fn initiator(&self) -> Side {
        self.initiator
    }
    /// Packets seen in direction `d` (wrapping).
    #[inline]
    pub fn pkts(&self, d: Dir) -> u32 {
        self.pkts[d as usize]
    }
    /// Bytes seen in direction `d`.
    #[inline]
    pub fn bytes(&self, d: Dir) -> u64 {
        self.bytes[d as usize]
    }
}

const SLOTS: usize = 8;
const EMPTY: u32 = u32::MAX;

/// One index bucket: 8 (signature, entry) slots in one cache line. Signature 0 = empty slot.
/// Signatures are packed four 16-bit lanes per word (slot `s` in word `s / 4`, lane `s % 4`).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Bucket {
    sig: [u64; 2],
    idx: [u32; SLOTS],
}

/// Slot of a set bit `p` of a [`Bucket::matches`] mask (bit `2s` for slot `s`).
#[inline(always)]
fn slot_of_bit(p: u32) -> usize {
    (p / 2) as usize
}

impl Bucket {
    const EMPTY: Bucket = Bucket { sig: [0; 2], idx: [EMPTY; SLOTS] };

    /// Mask with one bit per slot holding signature `sig` (decode with [`slot_of_bit`]): one
    /// vector compare ([`lanes_eq16`]; the SWAR form over two words took about 12
    /// instructions).
    #[inline(always)]
    fn matches(&self, sig: u16) -> u32 {
        lanes_eq16(&self.sig, sig)
    }

    #[inline]
    fn sig_at(&self, s: usize) -> u16 {
        (self.sig[(s >> 2) & 1] >> ((s & 3) * 16)) as u16
    }

    #[inline]
    fn set(&mut self, s: usize, sig: u16, idx: u32) {
        let (w, sh) = ((s >> 2) & 1, (s & 3) * 16);
        self.sig[w] = (self.sig[w] & !(0xffff << sh)) | (u64::from(sig) << sh);
        self.idx[s & (SLOTS - 1)] = idx;
    }

    #[inline]
    fn empty_slot(&self) -> Option<usize> {
        let m = self.matches(0);
        (m != 0).then(|| slot_of_bit(m.trailing_zeros()))
    }
}

/// Stages are this many packets apart in [`FlowTable::lookup_batch`].
const PIPE_D: usize = 16;
/// Candidate ring between stages 2 and 3 (a power of two > `PIPE_D`).
const CAND: usize = 32;
/// Entries [`FlowTable::expire`] handles per prefetch group.
const EXPIRE_W: usize = 16;
/// Nodes in the cuckoo breadth-first search (2 roots + 16 + 128 + headroom).
const BFS_NODES: usize = 160;

/// The connection-tracking table of one worker. See the module doc.
#[derive(Clone, Debug)]
pub struct FlowTable {
    buckets: Vec<Bucket>,
    mask: usize,
    entries: Vec<FlowEntry>,
    free: Vec<u32>,
    wheel: Wheel,
    len: usize,
    cfg: FlowConfig,
    /// `cfg.timeouts.of(state)` by `state as usize`: one load where the match on the state
    /// cost a jump table (~8 instructions a tracked packet, callgrind).
    timeout_ns: [u64; State::ALL.len()],
    stats: FlowStats,
}

#[inline]
fn sig_of(h: u64) -> u16 {
    ((h >> 48) as u16) | 1
}

impl FlowTable {
    /// Builds an empty table; allocates everything up front (control thread).
    ///
    /// # Errors
    /// [`FlowConfigError`] for a zero or too large capacity or an absurd tick.
    pub fn new(cfg: FlowConfig) -> Result<FlowTable, FlowConfigError> {
        // ≤ 80 % load: capacity / (8 * 0.8) buckets, rounded up to a power of two, at least 2.
        let nb = (cfg.capacity as usize * 5).div_ceil(SLOTS * 4).max(2).next_power_of_two();
        Self::with_buckets(cfg, nb)
    }

    /// [`new`](Self::new) with an explicit power-of-two bucket count (tests load the index).
    fn with_buckets(cfg: FlowConfig, nb: usize) -> Result<FlowTable, FlowConfigError> {
        if cfg.capacity == 0 {
            return Err(FlowConfigError::ZeroCapacity);
        }
        if cfg.capacity >= 1 << 31 {
            return Err(FlowConfigError::TooLarge(cfg.capacity));
        }
        if cfg.tick_shift > 40 {
            return Err(FlowConfigError::BadTick(cfg.tick_shift));
        }
        Ok(FlowTable {
            buckets: vec![Bucket::EMPTY; nb],
            mask: nb - 1,
            entries: vec![FlowEntry::FREE; cfg.capacity as usize],
            // Popped from the end: entry 0 is used first.
            free: (0..cfg.capacity).rev().collect(),
            wheel: Wheel::new(cfg.capacity, cfg.wheel_slots, cfg.tick_shift),
            len: 0,
            cfg,
            timeout_ns: State::ALL.map(|st| cfg.timeouts.of(st)),
            stats: FlowStats::default(),
        })
    }

    /// Live entries (including ones whose deadline passed but that nobody collected yet).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when no entry is in use.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Most entries.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }
    /// The configuration.
    pub fn config(&self) -> &FlowConfig {
        &self.cfg
    }
    /// Event counters.
    #[inline]
    pub fn stats(&self) -> FlowStats {
        self.stats
    }
    /// Bytes of memory the table holds (index, entries, free list, wheel).
    pub fn memory_bytes(&self) -> usize {
        self.buckets.len() * core::mem::size_of::<Bucket>()
            + self.entries.len() * core::mem::size_of::<FlowEntry>()
            + self.free.capacity() * 4
            + self.wheel.memory_bytes()
    }
    /// Memory per flow at full capacity, in bytes.
    pub fn bytes_per_flow(&self) -> usize {
        self.memory_bytes() / self.capacity().max(1)
    }

    /// The table's hash of `key`.
    #[inline]
    pub fn hash(&self, key: &FlowKey) -> u64 {
        hash_key(key, self.cfg.seed)
    }

    /// Prefetches the primary bucket of `hash`.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        prefetch_read(&self.buckets[hash as usize & self.mask]);
    }

    #[inline]
    fn alt(&self, b: usize, sig: u16) -> usize {
        let x = (u32::from(sig).wrapping_mul(0x9e37_79b1) as usize) & self.mask;
        (b ^ x.max(1)) & self.mask
    }

    // inline(always): out of line, its register save/restore was 15 of its 42 instructions
    // per call on the insert path (callgrind, churn bench).
    #[inline(always)]
    fn find_in(&self, b: usize, sig: u16, key: &FlowKey) -> Option<(usize, usize, u32)> {
        let bk = &self.buckets[b];
        let mut m = bk.matches(sig);
        while m != 0 {
            let s = slot_of_bit(m.trailing_zeros());
            let idx = bk.idx[s];
            if self.entries[idx as usize].key == *key {
                return Some((b, s, idx));
            }
            m &= m - 1;
        }
        None
    }

    /// Bucket, slot and entry of `key`, expired or not.
    #[inline]
    fn find(&self, key: &FlowKey, h: u64) -> Option<(usize, usize, u32)> {
        let sig = sig_of(h);
        let b1 = h as usize & self.mask;
        self.find_in(b1, sig, key).or_else(|| self.find_in(self.alt(b1, sig), sig, key))
    }

    /// Looks up one key with its hash. A passed deadline is a miss (and frees the entry).
    /// Worker only; never allocates or panics.
    #[inline]
    pub fn lookup(&mut self, key: &FlowKey, hash: u64, now_ns: u64) -> Option<FlowId> {
        let found = self.find(key, hash)?;
        self.live(found, now_ns)
    }

    /// The entry `found` (bucket, slot, entry) if its deadline is after `now_ns`; else frees
    /// it, counts it expired and misses.
    #[inline(always)]
    fn live(&mut self, (b, s, idx): (usize, usize, u32), now_ns: u64) -> Option<FlowId> {
        if self.entries[idx as usize].expires_ns <= now_ns {
            self.free_slot(b, s, idx);
            self.stats.expired += 1;
            return None;
        }
        Some(idx)
    }

    /// [`lookup`](Self::lookup) of a key whose signature is in no slot of its primary bucket:
    /// searches the alternative bucket only.
    // inline(always): every new connection's first packet comes here from the bulk lookup's
    // stage 3; out of line, its register saves and restores were 14 of its 53 instructions,
    // and inlined the cps scenario costs 46.5 fewer instructions a packet (callgrind).
    #[inline(always)]
    fn lookup_alt(&mut self, key: &FlowKey, hash: u64, now_ns: u64) -> Option<FlowId> {
        let sig = sig_of(hash);
        let b1 = hash as usize & self.mask;
        debug_assert_eq!(self.buckets[b1].matches(sig), 0);
        let found = self.find_in(self.alt(b1, sig), sig, key)?;
        self.live(found, now_ns)
    }

    /// Looks up `keys` (any number; processed 256 at a time), writing each hit's id or
    /// [`NO_FLOW`] to `out` (up to `min(keys.len(), out.len())`). Returns the number of hits.
    /// Hashing, bucket and entry prefetch are pipelined across the batch. Worker only.
    pub fn lookup_batch(&mut self, keys: &[FlowKey], now_ns: u64, out: &mut [FlowId]) -> usize {
        let n = keys.len().min(out.len());
        let mut hashes = [0u64; fastpath_packet::BATCH_MAX];
        let mut hits = 0;
        for (kc, oc) in keys[..n].chunks(fastpath_packet::BATCH_MAX).zip(out[..n].chunks_mut(fastpath_packet::BATCH_MAX)) {
            let hs = &mut hashes[..kc.len()];
            for (h, k) in hs.iter_mut().zip(kc) {
                *h = self.hash(k);
            }
            hits += self.lookup_batch_hashed(kc, hs, now_ns, oc);
        }
        hits
    }

    /// [`lookup_batch`](Self::lookup_batch) with precomputed hashes (from [`FlowTable::hash`]);
    /// handles `min(keys, hashes, out)` packets. Returns the number of hits. Worker only.
    pub fn lookup_batch_hashed(&mut self, keys: &[FlowKey], hashes: &[u64], now_ns: u64, out: &mut [FlowId]) -> usize {
        struct Out<'a>(&'a mut [FlowId]);
        impl FlowSink for Out<'_> {
            #[inline(always)]
            fn hit(&mut self, _: &mut FlowTable, j: usize, id: FlowId) {
                if let Some(o) = self.0.get_mut(j) {
                    *o = id;
                }
            }
            #[inline(always)]
            fn miss(&mut self, j: usize) {
                if let Some(o) = self.0.get_mut(j) {
                    *o = NO_FLOW;
                }
            }
        }
        let n = keys.len().min(hashes.len()).min(out.len());
        self.lookup_batch_into(&keys[..n], &hashes[..n], now_ns, &mut Out(&mut out[..n]))
    }

    /// [`lookup_batch_hashed`](Self::lookup_batch_hashed) with each key's answer handed to
    /// `sink` in the lookup's own loop, in key order, while the entry of a hit is in the cache
    /// (conntrack tracks an established connection's packet there). Handles `min(keys,
    /// hashes)` keys; returns the number of hits. Worker only.
    #[inline]
    pub fn lookup_batch_into<S: FlowSink>(&mut self, keys: &[FlowKey], hashes: &[u64], now_ns: u64, sink: &mut S) -> usize {
        let n = keys.len().min(hashes.len());
        let (keys, hashes) = (&keys[..n], &hashes[..n]);
        let mut cand = [EMPTY; CAND];
        let mut hits = 0;
        // Prologue, steady state (all three stages, no per-stage bounds tests), epilogue.
        let d = PIPE_D.min(n);
        for &h in &hashes[..d] {
            self.stage_bucket(h);
        }
        for i in d..n.min(2 * PIPE_D) {
            self.stage_bucket(hashes[i]);
            cand[(i - PIPE_D) % CAND] = self.stage_entry(hashes[i - PIPE_D]);
        }
        for i in 2 * PIPE_D..n {
            self.stage_bucket(hashes[i]);
            cand[(i - PIPE_D) % CAND] = self.stage_entry(hashes[i - PIPE_D]);
            let j = i - 2 * PIPE_D;
            hits += self.stage_key(&keys[j], hashes[j], cand[j % CAND], now_ns, j, sink);
        }
        for j in n.saturating_sub(PIPE_D)..n {
            cand[j % CAND] = self.stage_entry(hashes[j]);
        }
        for j in n.saturating_sub(2 * PIPE_D)..n {
            hits += self.stage_key(&keys[j], hashes[j], cand[j % CAND], now_ns, j, sink);
        }
        hits
    }

    /// Stage 1 of the bulk lookup: prefetch the primary bucket.
    #[inline(always)]
    fn stage_bucket(&self, h: u64) {
        prefetch_read(&self.buckets[h as usize & self.mask]);
    }

    /// Stage 2: first signature match in the primary bucket; prefetch its entry (or, with no
    /// match, the alternative bucket). Returns the candidate entry or `EMPTY`.
    #[inline(always)]
    fn stage_entry(&self, h: u64) -> u32 {
        let sig = sig_of(h);
        let b1 = h as usize & self.mask;
        let bk = &self.buckets[b1];
        let m = bk.matches(sig);
        let c = if m != 0 { bk.idx[slot_of_bit(m.trailing_zeros()) & (SLOTS - 1)] } else { EMPTY };
        match self.entries.get(c as usize) {
            Some(e) => prefetch_read(e),
            None => prefetch_read(&self.buckets[self.alt(b1, sig)]),
        }
        c
    }

    /// Stage 3: confirm the candidate (live, same key, not expired) or fall back to the full
    /// lookup. A freed entry (lazily expired earlier in this batch) keeps its key but has state
    /// `None`, so a stale candidate never hits.
    #[inline(always)]
    fn stage_key<S: FlowSink>(&mut self, key: &FlowKey, h: u64, c: u32, now_ns: u64, j: usize, sink: &mut S) -> usize {
        let r = match self.entries.get(c as usize) {
            Some(e) if e.conn.state != State::None && e.key == *key && e.expires_ns > now_ns => {
                // The hit of the fast path, handed over here where its entry was just checked.
                sink.hit(self, j, c);
                return 1;
            }
            Some(_) => self.lookup(key, h, now_ns),
            // No signature matched in the primary bucket (stage 2 looked): only the alternative
            // bucket, which stage 2 prefetched, can hold the key.
            None => self.lookup_alt(key, h, now_ns),
        };
        match r {
            Some(id) => {
                sink.hit(self, j, id);
                1
            }
            None => {
                sink.miss(j);
                0
            }
        }
    }

    /// Which way a packet from `side` travels on connection `id`.
    #[inline]
    pub fn dir(&self, id: FlowId, side: Side) -> Dir {
        match self.entries.get(id as usize) {
            Some(e) if e.initiator != side => Dir::Reply,
            _ => Dir::Original,
        }
    }

    /// The entry `id`, or `None` when it is free. (An entry past its deadline is still
    /// returned until a lookup or `expire` frees it.)
    #[inline]
    pub fn entry(&self, id: FlowId) -> Option<&FlowEntry> {
        self.entries.get(id as usize).filter(|e| e.conn.state != State::None)
    }

    /// Writes the cached action word of `id` (no-op for a free entry). Worker only.
    #[inline]
    pub fn set_action(&mut self, id: FlowId, action: u32) {
        if let Some(e) = self.entries.get_mut(id as usize) {
            if e.conn.state != State::None {
                e.action = action;
            }
        }
    }

    /// Opens a connection for `key` with its first packet, sent by `side` at `now_ns`.
    /// Worker only; O(1), never allocates.
    ///
    /// # Errors
    /// `Exists(id)` when the key is live, `Invalid` when the packet cannot open a connection,
    /// `Full` when no entry is free (counted in [`FlowStats::full`]).
    pub fn insert(&mut self, key: &FlowKey, hash: u64, side: Side, seg: &Segment, now_ns: u64) -> Result<FlowId, InsertError> {
        if let Some(id) = self.find(key, hash).and_then(|found| self.live(found, now_ns)) {
            return Err(InsertError::Exists(id));
        }
        self.insert_absent(key, hash, side, seg, now_ns)
    }

    /// [`insert`](Self::insert) of a key the caller knows is not in the table: a lookup of it
    /// at `now_ns` missed (which frees an expired entry) and nothing inserted it since. Skips
    /// the search of both buckets (two of a new connection's four bucket searches). Inserting
    /// a key that is in the table breaks the index (two entries for one key); debug builds
    /// assert. Worker only; O(1), never allocates.
    ///
    /// # Errors
    /// `Invalid` when the packet cannot open a connection, `Full` when no entry is free.
    pub fn insert_absent(&mut self, key: &FlowKey, hash: u64, side: Side, seg: &Segment, now_ns: u64) -> Result<FlowId, InsertError> {
        debug_assert!(self.find(key, hash).is_none(), "insert_absent of a key in the table");
        let conn = match Conn::open(key.proto, seg) {
            Ok(c) => c,
            Err(e) => {
                self.stats.invalid += 1;
                return Err(InsertError::Invalid(e));
            }
        };
        let Some(idx) = self.free.pop() else {
            self.stats.full += 1;
            return Err(InsertError::Full);
        };
        if !self.index_insert(hash, idx) {
            self.free.push(idx);
            self.stats.full += 1;
            return Err(InsertError::Full);
        }
        let expires_ns = now_ns.saturating_add(self.timeout_ns[conn.state as usize]);
        if self.wheel.is_empty() {
            // Nothing scheduled: move the wheel's cursor to `now` at once, so a clock that
            // starts far from 0 (uptime in ns) is not walked tick by tick later.
            let _ = self.wheel.pop_due(now_ns);
        }
        self.entries[idx as usize] =
            FlowEntry { key: *key, action: 0, expires_ns, conn, initiator: side, pkts: [1, 0], bytes: [u64::from(seg.wire_len), 0] };
        self.wheel.schedule(idx, expires_ns);
        self.len += 1;
        self.stats.inserted += 1;
        Ok(idx)
    }

    /// Tracks a packet from `side` on connection `id` (found by a lookup at `now_ns`): runs the
    /// state machine, counts it and, when accepted, pushes the deadline to
    /// `now + timeout(new state)`. Invalid packets change nothing but [`FlowStats::invalid`].
    /// Worker only; never panics (a free or unknown `id` is `Invalid(NotInitial)`).
    #[inline]
    pub fn track(&mut self, id: FlowId, side: Side, seg: &Segment, now_ns: u64) -> TcpVerdict {
        match self.track_action(id, side, seg, now_ns) {
            Ok(_) => TcpVerdict::Accept,
            Err(e) => TcpVerdict::Invalid(e),
        }
    }

    /// [`track`](Self::track), returning on `Accept` what the pipeline writes to the packet's
    /// metadata: the packet's direction and the entry's cached action word. One bounds and
    /// state check instead of three calls (`track`, `dir`, `entry`). Worker only.
    ///
    /// # Errors
    /// The tracker's reason when the packet is invalid (nothing changes but
    /// [`FlowStats::invalid`]); `NotInitial` for a free or unknown `id`.
    #[inline(always)]
    pub fn track_action(&mut self, id: FlowId, side: Side, seg: &Segment, now_ns: u64) -> Result<(Dir, u32), Invalid> {
        let window_check = self.cfg.window_check;
        let Some(e) = self.entries.get_mut(id as usize).filter(|e| e.conn.state != State::None) else {
            self.stats.invalid += 1;
            return Err(Invalid::NotInitial);
        };
        let dir = if e.initiator == side { Dir::Original } else { Dir::Reply };
        if let TcpVerdict::Invalid(why) = e.conn.step(dir, seg, window_check) {
            self.stats.invalid += 1;
            return Err(why);
        }
        e.pkts[dir as usize] = e.pkts[dir as usize].wrapping_add(1);
        e.bytes[dir as usize] = e.bytes[dir as usize].wrapping_add(u64::from(seg.wire_len));
        let new = now_ns.saturating_add(self.timeout_ns[e.conn.state as usize]);
        let old = e.expires_ns;
        e.expires_ns = new;
        // A later deadline is found lazily when the wheel reaches the entry; an earlier one
        // (FIN, RST: shorter timeouts) must move the entry, or it would linger.
        let action = e.action;
        if new < old {
            self.wheel.reschedule(id, new);
        }
        Ok((dir, action))
    }

    /// Removes connection `id`. Returns false when it was not in use. Control or worker.
    pub fn remove(&mut self, id: FlowId) -> bool {
        let Some(e) = self.entry(id) else { return false };
        let h = self.hash(&e.key);
        match self.slot_of(h, id) {
            Some((b, s)) => {
                self.free_slot(b, s, id);
                self.stats.removed += 1;
                true
            }
            None => false,
        }
    }

    /// Frees connections whose deadline passed, examining at most `budget` wheel entries.
    /// After a call with an unlimited budget, every entry with a deadline at or before
    /// `now_ns` rounded down to the tick is gone. Returns the number freed. Worker only,
    /// once per batch; O(budget + ticks passed).
    pub fn expire(&mut self, now_ns: u64, budget: usize) -> usize {
        // Work in groups of EXPIRE_W: pop due entries and prefetch them, then hash the expired
        // ones and prefetch their buckets, then free or re-link. The misses of a group overlap
        // instead of costing one DRAM round trip each.
        // Freed: deadline at or before the start of `now`'s tick (the twin's rule). Anything
        // popped but alive goes back at its deadline's tick, which is after `now`'s tick, so
        // no entry is looked at twice in one call.
        let edge = (now_ns >> self.cfg.tick_shift) << self.cfg.tick_shift;
        let mut freed = 0;
        let mut left = budget;
        loop {
            let mut due = [0u32; EXPIRE_W];
            let mut n = 0;
            while n < EXPIRE_W && left > 0 {
                let Some((idx, _)) = self.wheel.pop_due(now_ns) else { break };
                if let Some(e) = self.entries.get(idx as usize) {
                    prefetch_read(e);
                }
                due[n] = idx;
                n += 1;
                left -= 1;
            }
            let mut hs = [0u64; EXPIRE_W];
            for (h, &idx) in hs.iter_mut().zip(&due[..n]) {
                if let Some(e) = self.entries.get(idx as usize).filter(|e| e.expires_ns <= edge) {
                    *h = self.hash(&e.key);
                    self.prefetch(*h);
                }
            }
            for (&h, &idx) in hs.iter().zip(&due[..n]) {
                let Some(e) = self.entries.get(idx as usize) else { continue };
                if e.expires_ns <= edge {
                    if let Some((b, s)) = self.slot_of(h, idx) {
                        self.free_slot(b, s, idx);
                        freed += 1;
                    }
                } else {
                    let d = e.expires_ns;
                    self.wheel.schedule(idx, d);
                }
            }
            if n < EXPIRE_W {
                break;
            }
        }
        self.stats.expired += freed as u64;
        freed
    }

    /// Iterates over entries in use (control thread: `show table`, tests).
    pub fn iter(&self) -> impl Iterator<Item = (FlowId, &FlowEntry)> + '_ {
        self.entries.iter().enumerate().filter(|(_, e)| e.conn.state != State::None).map(|(i, e)| (i as FlowId, e))
    }

    /// Bucket and slot that point at entry `idx` (whose key hashes to `h`): only the slots
    /// holding the key's signature are compared, as in [`find_in`](Self::find_in).
    fn slot_of(&self, h: u64, idx: u32) -> Option<(usize, usize)> {
        let sig = sig_of(h);
        let b1 = h as usize & self.mask;
        for b in [b1, self.alt(b1, sig)] {
            let bk = &self.buckets[b];
            let mut m = bk.matches(sig);
            while m != 0 {
                let s = slot_of_bit(m.trailing_zeros());
                if bk.idx[s & (SLOTS - 1)] == idx {
                    return Some((b, s));
                }
                m &= m - 1;
            }
        }
        None
    }

    /// Clears index slot (b, s), unschedules and frees entry `idx`.
    fn free_slot(&mut self, b: usize, s: usize, idx: u32) {
        self.buckets[b].set(s, 0, EMPTY);
        self.wheel.unschedule(idx);
        self.entries[idx as usize].conn.state = State::None;
        self.free.push(idx);
        self.len -= 1;
    }

    /// Puts `idx` (hash `h`) into the index: primary, alternative, or a displacement chain.
    fn index_insert(&mut self, h: u64, idx: u32) -> bool {
        let sig = sig_of(h);
        let b1 = h as usize & self.mask;
        let b2 = self.alt(b1, sig);
        for b in [b1, b2] {
            if let Some(s) = self.buckets[b].empty_slot() {
                self.buckets[b].set(s, sig, idx);
                return true;
            }
        }
        match self.cuckoo_path(b1, b2) {
            Some((b, s)) => {
                self.buckets[b].set(s, sig, idx);
                true
            }
            None => false,
        }
    }

    /// Breadth-first search for a displacement chain from `b1`/`b2` to a bucket with a free
    /// slot; performs the moves (deepest first) and returns the freed root slot.
    fn cuckoo_path(&mut self, b1: usize, b2: usize) -> Option<(usize, usize)> {
        #[derive(Clone, Copy)]
        struct Node {
            bucket: u32,
            parent: u16,
            slot: u8,
        }
        const ROOT: u16 = u16::MAX;
        let mut q = [Node { bucket: 0, parent: ROOT, slot: 0 }; BFS_NODES];
        q[0] = Node { bucket: b1 as u32, parent: ROOT, slot: 0 };
        q[1] = Node { bucket: b2 as u32, parent: ROOT, slot: 0 };
        let (mut head, mut tail) = (0usize, 2usize);
        while head < tail {
            let node = q[head];
            let nb = node.bucket as usize;
            if head >= 2 {
                if let Some(es) = self.buckets[nb].empty_slot() {
                    // Walk back to the root, moving each displaced occupant one step down.
                    let (mut db, mut ds, mut cur) = (nb, es, head);
                    while q[cur].parent != ROOT {
                        let p = q[cur].parent as usize;
                        let (sb, ss) = (q[p].bucket as usize, q[cur].slot as usize);
                        let (sig, idx) = (self.buckets[sb].sig_at(ss), self.buckets[sb].idx[ss]);
                        self.buckets[db].set(ds, sig, idx);
                        (db, ds, cur) = (sb, ss, p);
                    }
                    return Some((db, ds));
                }
            }
            for s in 0..SLOTS {
                if tail == BFS_NODES {
                    break;
                }
                let child = self.alt(nb, self.buckets[nb].sig_at(s));
                // Skip buckets already on this path: moves along a cycle would clobber slots.
                let mut a = head;
                let mut on_path = false;
                loop {
                    if q[a].bucket as usize == child {
                        on_path = true;
                        break;
                    }
                    if q[a].parent == ROOT {
                        break;
                    }
                    a = q[a].parent as usize;
                }
                if on_path || child == b1 || child == b2 {
                    continue;
                }
                q[tail] = Node { bucket: child as u32, parent: head as u16, slot: s as u8 };
                tail += 1;
            }
            head += 1;
        }
        None
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use flags::*;

    const SEC: u64 = 1_000_000_000;

    fn key(i: u32) -> (FlowKey, Side) {
        FlowKey::v4(7, proto::TCP, [198, 18, (i >> 8) as u8, i as u8], 1024 + (i >> 16) as u16, [198, 19, 0, 1], 80)
    }

    fn syn() -> Segment {
        Segment::tcp(SYN, 1000, 0, 65535, 0)
    }

    #[test]
    fn entry_and_bucket_sizes() {
        assert_eq!(core::mem::size_of::<FlowKey>(), 44);
        assert_eq!(core::mem::size_of::<FlowEntry>(), 128);
        assert_eq!(core::mem::size_of::<Bucket>(), 64);
        // State byte sits in the first cache line, with key, action and deadline.
        let t = FlowTable::new(FlowConfig::with_capacity(5_000_000)).unwrap();
        assert!(t.bytes_per_flow() <= 200, "{} B/flow", t.bytes_per_flow());
    }

    #[test]
    fn both_directions_normalise_to_one_key() {
        let (k1, s1) = FlowKey::v4(1, proto::UDP, [198, 18, 0, 1], 5000, [198, 18, 0, 2], 53);
        let (k2, s2) = FlowKey::v4(1, proto::UDP, [198, 18, 0, 2], 53, [198, 18, 0, 1], 5000);
        assert_eq!(k1, k2);
        assert_ne!(s1, s2);
        assert_eq!(symmetric_hash(&k1), symmetric_hash(&k2));
        let (k3, _) = FlowKey::v4(2, proto::UDP, [198, 18, 0, 1], 5000, [198, 18, 0, 2], 53);
        assert_ne!(k1, k3, "zones separate flows");
        let a6 = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let b6 = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let (k4, _) = FlowKey::v6(1, proto::TCP, b6, 80, a6, 40000);
        let (k5, _) = FlowKey::v6(1, proto::TCP, a6, 40000, b6, 80);
        assert_eq!(k4, k5);
        assert_eq!(k4.v6, 1);
    }

    /// The derived field-by-field equality that `FlowKey`'s byte compare replaces.
    fn fields_eq(a: &FlowKey, b: &FlowKey) -> bool {
        (a.zone, a.lo_addr, a.hi_addr, a.lo_port, a.hi_port, a.proto, a.v6)
            == (b.zone, b.lo_addr, b.hi_addr, b.lo_port, b.hi_port, b.proto, b.v6)
    }

    proptest::proptest! {
        /// Byte equality of keys is field equality, on random pairs of IPv4 and IPv6 keys that
        /// differ in at most one field (from values narrow enough that equal pairs are common).
        #[test]
        fn key_equality_is_field_equality(
            v6: bool,
            zone in 0u32..3, proto in proptest::prop_oneof![proptest::strategy::Just(proto::TCP), proptest::strategy::Just(proto::UDP)],
            s in proptest::array::uniform16(0u8..2), d in proptest::array::uniform16(0u8..2),
            sp in 0u16..2, dp in 0u16..2,
            field in 0usize..9, bit in 0u32..32,
        ) {
            let (a, _) = if v6 { FlowKey::v6(zone, proto, s, sp, d, dp) } else { FlowKey::v4(zone, proto, [s[0], s[1], s[2], s[3]], sp, [d[0], d[1], d[2], d[3]], dp) };
            let mut b = a;
            match field {
                0 => b.zone ^= 1 << bit,
                1 => b.lo_addr[bit as usize % 4] ^= 1 << bit,
                2 => b.hi_addr[bit as usize % 4] ^= 1 << bit,
                3 => b.lo_port ^= 1 << (bit % 16),
                4 => b.hi_port ^= 1 << (bit % 16),
                5 => b.proto ^= 1 << (bit % 8),
                6 => b.v6 ^= 1 << (bit % 8),
                _ => {}
            }
            proptest::prop_assert_eq!(a == b, fields_eq(&a, &b));
            proptest::prop_assert_eq!(a == b, field == 7 || field == 8);
            // Two keys built from possibly different tuples.
            let (c, _) = if v6 { FlowKey::v6(zone, proto, d, dp, s, sp) } else { FlowKey::v4(zone, proto, [d[0], d[1], d[2], d[3]], dp, [s[0], s[1], s[2], s[3]], sp) };
            proptest::prop_assert!(a == c && fields_eq(&a, &c), "both directions build one key");
            let (e, _) = FlowKey::v4(zone, proto, [s[0], s[1], s[2], s[3]], sp, [s[0], s[1], s[2], s[3]], dp);
            proptest::prop_assert_eq!(a == e, fields_eq(&a, &e));
        }
    }

    #[test]
    fn handshake_through_the_table_sets_direction_and_counters() {
        let mut t = FlowTable::new(FlowConfig::with_capacity(64)).unwrap();
        let (k, client) = FlowKey::v4(0, proto::TCP, [198, 18, 0, 9], 40000, [198, 18, 0, 1], 80);
        let (k2, server) = FlowKey::v4(0, proto::TCP, [198, 18, 0, 1], 80, [198, 18, 0, 9], 40000);
        assert_eq!(k, k2);
        let h = t.hash(&k);
        let id = t.insert(&k, h, client, &Segment::tcp(SYN, 100, 0, 65535, 0), 0).unwrap();
        assert_eq!(t.insert(&k, h, client, &syn(), 1), Err(InsertError::Exists(id)));
        assert_eq!(t.lookup(&k, h, 1), Some(id));
        assert_eq!(t.dir(id, server), Dir::Reply);
        assert_eq!(t.track(id, server, &Segment::tcp(SYN | ACK, 900, 101, 65535, 0), 2), TcpVerdict::Accept);
        assert_eq!(t.track(id, client, &Segment::tcp(ACK, 101, 901, 65535, 0), 3), TcpVerdict::Accept);
        let e = t.entry(id).unwrap();
        assert_eq!(e.state(), State::Established);
        assert_eq!((e.pkts(Dir::Original), e.pkts(Dir::Reply)), (2, 1));
        assert_eq!(e.bytes(Dir::Original), 80);
        assert_eq!(e.expires_ns(), 3 + Timeouts::default().established_ns);
        t.set_action(id, 0xabcd);
        assert_eq!(t.entry(id).unwrap().action(), 0xabcd);
        // Invalid packets are counted and change nothing.
        assert_eq!(t.track(id, client, &Segment::tcp(SYN, 5, 0, 1, 0), 4), TcpVerdict::Invalid(Invalid::UnexpectedSyn));
        assert_eq!(t.stats().invalid, 1);
        assert_eq!(t.entry(id).unwrap().expires_ns(), 3 + Timeouts::default().established_ns);
        assert!(t.remove(id));
        assert!(!t.remove(id));
        assert_eq!(t.lookup(&k, h, 5), None);
        assert!(t.is_empty());
        // First packet that cannot open a TCP connection.
        assert_eq!(t.insert(&k, h, client, &Segment::tcp(ACK, 1, 1, 1, 0), 6), Err(InsertError::Invalid(Invalid::NotInitial)));
        assert!(t.is_empty());
    }

    #[test]
    fn full_table_refuses_new_flows_and_keeps_established_ones() {
        let cap = 1000;
        let mut t = FlowTable::new(FlowConfig::with_capacity(cap)).unwrap();
        for i in 0..cap {
            let (k, s) = key(i);
            let id = t.insert(&k, t.hash(&k), s, &syn(), 0).unwrap();
            // Complete the handshake on half of them.
            if i % 2 == 0 {
                let r = if s == Side::Lo { Side::Hi } else { Side::Lo };
                assert_eq!(t.track(id, r, &Segment::tcp(SYN | ACK, 7, 1001, 65535, 0), 0), TcpVerdict::Accept);
                assert_eq!(t.track(id, s, &Segment::tcp(ACK, 1001, 8, 65535, 0), 0), TcpVerdict::Accept);
            }
        }
        assert_eq!(t.len(), cap as usize);
        for i in cap..cap + 500 {
            let (k, s) = key(i);
            assert_eq!(t.insert(&k, t.hash(&k), s, &syn(), SEC), Err(InsertError::Full));
        }
        assert_eq!(t.stats().full, 500);
        // Every existing flow still hits, in a batch.
        let keys: Vec<FlowKey> = (0..cap).map(|i| key(i).0).collect();
        let mut out = vec![NO_FLOW; keys.len()];
        assert_eq!(t.lookup_batch(&keys, SEC, &mut out), cap as usize);
        for (i, id) in out.iter().enumerate() {
            assert_eq!(t.entry(*id).unwrap().key(), &keys[i]);
        }
        // After the SYN timeout, half-open flows age out and new ones fit again.
        let later = 31 * SEC + (1 << 30);
        t.expire(later, usize::MAX);
        assert_eq!(t.len(), cap as usize / 2);
        let (k, s) = key(cap + 1);
        assert!(t.insert(&k, t.hash(&k), s, &syn(), later).is_ok());
    }

    #[test]
    fn ageing_on_simulated_time() {
        let mut cfg = FlowConfig::with_capacity(256);
        cfg.tick_shift = 20; // ~1 ms ticks
        cfg.wheel_slots = 64; // ~67 ms horizon: long timeouts wrap around
        let mut t = FlowTable::new(cfg).unwrap();
        let (ku, su) = FlowKey::v4(0, proto::UDP, [198, 18, 0, 1], 5000, [198, 18, 0, 2], 53);
        let (kt, st) = key(1);
        let (hu, ht) = (t.hash(&ku), t.hash(&kt));
        let u = t.insert(&ku, hu, su, &Segment::datagram(60), 0).unwrap();
        let tc = t.insert(&kt, ht, st, &syn(), 0).unwrap();
        // Keep the UDP flow alive with a packet every 20 s (its unreplied timeout is 30 s).
        let mut now = 0;
        for _ in 0..10 {
            now += 20 * SEC;
            t.expire(now, usize::MAX);
            assert_eq!(t.lookup(&ku, hu, now), Some(u));
            assert_eq!(t.track(u, su, &Segment::datagram(60), now), TcpVerdict::Accept);
        }
        // The SYN-only flow is gone (30 s), freed by the wheel, not by a lookup.
        assert_eq!(t.len(), 1);
        assert!(t.stats().expired >= 1);
        assert_eq!(t.lookup(&kt, ht, now), None);
        let _ = tc;
        // Exactly at the deadline the flow is a miss.
        let deadline = t.entry(u).unwrap().expires_ns();
        assert_eq!(t.lookup(&ku, hu, deadline - 1), Some(u));
        assert_eq!(t.lookup(&ku, hu, deadline), None);
        assert!(t.is_empty());
    }

    #[test]
    fn fin_and_rst_shorten_the_deadline_and_the_wheel_follows() {
        let mut t = FlowTable::new(FlowConfig::with_capacity(16)).unwrap();
        let (k, c) = key(3);
        let s = if c == Side::Lo { Side::Hi } else { Side::Lo };
        let h = t.hash(&k);
        let id = t.insert(&k, h, c, &Segment::tcp(SYN, 1000, 0, 65535, 0), 0).unwrap();
        t.track(id, s, &Segment::tcp(SYN | ACK, 5000, 1001, 65535, 0), 0);
        t.track(id, c, &Segment::tcp(ACK, 1001, 5001, 65535, 0), 0);
        assert_eq!(t.entry(id).unwrap().state(), State::Established);
        assert_eq!(t.track(id, s, &Segment::tcp(RST | ACK, 5001, 1001, 0, 0), SEC), TcpVerdict::Accept);
        assert_eq!(t.entry(id).unwrap().state(), State::Closed);
        // Closed lasts 10 s: the wheel frees it then, without any lookup.
        assert_eq!(t.expire(10 * SEC, usize::MAX), 0);
        assert_eq!(t.expire(13 * SEC, usize::MAX), 1);
        assert!(t.is_empty());
    }

    #[test]
    fn expire_respects_its_budget() {
        let mut t = FlowTable::new(FlowConfig::with_capacity(1000)).unwrap();
        for i in 0..1000 {
            let (k, s) = key(i);
            t.insert(&k, t.hash(&k), s, &syn(), 0).unwrap();
        }
        let now = 100 * SEC;
        let mut calls = 0;
        loop {
            let n = t.expire(now, 64);
            assert!(n <= 64);
            if n == 0 {
                break;
            }
            calls += 1;
        }
        assert_eq!(calls, 16);
        assert!(t.is_empty());
        assert_eq!(t.stats().expired, 1000);
    }

    #[test]
    fn a_clock_far_from_zero_costs_no_catch_up_walk() {
        let mut t = FlowTable::new(FlowConfig::with_capacity(4)).unwrap();
        let start = 86_400 * SEC; // one day of uptime: ~80k ticks
        let (k, s) = key(1);
        let id = t.insert(&k, t.hash(&k), s, &syn(), start).unwrap();
        // One budget unit is enough to look at the entry: no empty-tick backlog in between.
        assert_eq!(t.expire(start + 31 * SEC + (1 << 30), 1), 1);
        assert!(t.entry(id).is_none());
    }

    #[test]
    fn insert_absent_equals_insert_for_absent_keys_and_expired_alt_entries_miss() {
        // Two tables, one filled with `insert`, one with `insert_absent`, at a load that puts
        // keys in alternative buckets: same ids, same lookups.
        let cap = 3000;
        let mut a = FlowTable::with_buckets(FlowConfig::with_capacity(cap), 512).unwrap();
        let mut b = a.clone();
        let mut keys = Vec::new();
        for i in 0..cap {
            let (k, s) = key(i);
            let h = a.hash(&k);
            let ra = a.insert(&k, h, s, &syn(), 0);
            assert_eq!(ra, b.insert_absent(&k, h, s, &syn(), 0));
            if ra.is_ok() {
                keys.push(k);
            }
        }
        let (mut oa, mut ob) = (vec![NO_FLOW; keys.len()], vec![NO_FLOW; keys.len()]);
        assert_eq!(a.lookup_batch(&keys, 1, &mut oa), keys.len());
        assert_eq!(b.lookup_batch(&keys, 1, &mut ob), keys.len());
        assert_eq!(oa, ob);
        // After the SYN timeout every bulk lookup misses and frees its entry, wherever it sits.
        let later = 31 * SEC;
        assert_eq!(b.lookup_batch(&keys, later, &mut ob), 0);
        assert!(b.is_empty(), "{} left", b.len());
        assert_eq!(b.stats().expired, keys.len() as u64);
    }

    #[test]
    fn per_state_timeouts_follow_the_config() {
        // `timeout_ns` is indexed by `state as usize`: `State::ALL` must be in that order.
        for (i, st) in State::ALL.iter().enumerate() {
            assert_eq!(*st as usize, i);
        }
        let mut cfg = FlowConfig::with_capacity(16);
        cfg.timeouts = Timeouts {
            syn_sent_ns: 1,
            syn_recv_ns: 2,
            established_ns: 3,
            fin_wait_ns: 4,
            close_wait_ns: 5,
            last_ack_ns: 6,
            time_wait_ns: 7,
            closed_ns: 8,
            unreplied_ns: 9,
            replied_ns: 10,
            icmp_ns: 11,
        };
        let t = FlowTable::new(cfg).unwrap();
        for st in State::ALL {
            assert_eq!(t.timeout_ns[st as usize], cfg.timeouts.of(st), "{st:?}");
        }
        // Through the table: a UDP flow's deadline follows its state.
        let mut t = t;
        let (k, s) = FlowKey::v4(0, proto::UDP, [198, 18, 0, 1], 5000, [198, 18, 0, 2], 53);
        let id = t.insert(&k, t.hash(&k), s, &Segment::datagram(60), 100).unwrap();
        assert_eq!(t.entry(id).unwrap().expires_ns(), 109);
        let r = if s == Side::Lo { Side::Hi } else { Side::Lo };
        assert_eq!(t.track(id, r, &Segment::datagram(60), 105), TcpVerdict::Accept);
        assert_eq!(t.entry(id).unwrap().expires_ns(), 115);
    }

    #[test]
    fn config_errors() {
        assert_eq!(FlowTable::new(FlowConfig::with_capacity(0)).err(), Some(FlowConfigError::ZeroCapacity));
        assert_eq!(FlowTable::new(FlowConfig::with_capacity(1 << 31)).err(), Some(FlowConfigError::TooLarge(1 << 31)));
        let mut c = FlowConfig::with_capacity(1);
        c.tick_shift = 41;
        assert_eq!(FlowTable::new(c).err(), Some(FlowConfigError::BadTick(41)));
    }

    #[test]
    fn heavy_load_uses_cuckoo_moves_and_stays_consistent() {
        // 4096 entries offered to 512 buckets * 8 slots: loads the index to ~100 %, so most
        // late inserts need displacement chains; whatever got in must stay findable.
        let cap = 4096;
        let mut t = FlowTable::with_buckets(FlowConfig::with_capacity(cap), 512).unwrap();
        let mut inserted = Vec::new();
        for i in 0..cap {
            let (k, s) = key(i);
            match t.insert(&k, t.hash(&k), s, &syn(), 0) {
                Ok(id) => inserted.push((k, id)),
                Err(e) => assert_eq!(e, InsertError::Full),
            }
        }
        assert!(inserted.len() >= cap as usize * 95 / 100, "only {} fit", inserted.len());
        assert_eq!(t.stats().full as usize, cap as usize - inserted.len());
        for (k, id) in &inserted {
            assert_eq!(t.lookup(k, t.hash(k), 1), Some(*id));
        }
        // The bulk lookup finds them too: at this load many keys sit in their alternative
        // bucket, some with no signature in the primary (stage 3 then searches only the
        // alternative), some behind a signature twin.
        let keys: Vec<FlowKey> = inserted.iter().map(|(k, _)| *k).collect();
        let mut out = vec![NO_FLOW; keys.len()];
        assert_eq!(t.lookup_batch(&keys, 1, &mut out), keys.len());
        assert!(inserted.iter().zip(&out).all(|((_, id), o)| id == o));
        let alt_only = inserted
            .iter()
            .filter(|(k, _)| {
                let h = t.hash(k);
                t.buckets[h as usize & t.mask].matches(sig_of(h)) == 0
            })
            .count();
        assert!(alt_only > 100, "only {alt_only} keys with no signature in their primary bucket");
        // Freed index slots are reusable: down to ~90 % load, then back up to ~97 %.
        for (_, id) in inserted.iter().take(400) {
            assert!(t.remove(*id));
        }
        for (k, _) in inserted.iter().take(300) {
            let s = if k.lo_port == 80 { Side::Hi } else { Side::Lo };
            let r = t.insert(k, t.hash(k), s, &syn(), 2);
            assert!(r.is_ok(), "{r:?} {:?} len {}", t.stats(), t.len());
        }
    }
}
