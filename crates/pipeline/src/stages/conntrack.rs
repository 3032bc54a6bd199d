//! The `conntrack CT [ZONE]` stage: stateful connection tracking over a batch.
//!
//! ```text
//!  pass 1  per lane: parse IPv4/IPv6 + TCP/UDP/ICMP ▸ normalised FlowKey (zone, proto, lo, hi)
//!          + Segment (flags, seq, ack, win, payload) + table hash
//!  pass 2  FlowTable::lookup_batch_hashed: hash ▸ prefetch bucket ▸ prefetch entry ▸ compare
//!          (a 3-stage software pipeline, so 5M flows cost about what 1k flows cost)
//!  pass 3  per lane: hit ▸ track (TCP state machine, window checks, deadline refresh)
//!                    miss ▸ insert (first packet; a full table drops it `flow_table_full`)
//!          results ▸ meta: ct.new / ct.established / ct.reply / ct.invalid, ct.verdict (the
//!          flow's cached action word, written by `ct_commit`), meta.flow, meta.hash
//!  then    FlowTable::expire(now_ns, budget): ages at most `budget` timer-wheel entries
//! ```
//! The flow table (`crates/tables/src/flow`) follows Linux netfilter's TCP tracker (states and
//! timeouts, window tracking after G. van Rooij, "Real Stateful TCP Packet Filtering in IP
//! Filter", 2000) and DPDK `rte_hash`'s bulk lookup. Flags live in the spare `Meta::reserved`
//! word: low byte bit 0 new, 1 established, 2 reply, 3 invalid; high byte the cached verdict.
//!
//! `ct.established` means "this packet belongs to a connection the table already tracked and
//! the tracker accepted it" (any direction, any state after the first packet) — the question a
//! stateful ACL asks. `ct.invalid` packets change no state; the spec decides whether to drop
//! them (`drop conntrack_invalid`). Packets that are not IPv4/IPv6 with TCP, UDP or ICMP are
//! not tracked: every flag stays 0.

use crate::exec::{Stage, StageCx};
use crate::field::Extract;
use crate::ir::Operand;
use fastpath_packet::each_lane;
use fastpath_packet::{Batch, DropReason, Hdr, Lanes, Meta, Pool, Slot, BATCH_MAX};
use fastpath_tables::flow::{hash_key, proto, Dir, FlowId, FlowKey, FlowSink, FlowTable, InsertError, Segment, Side, NO_FLOW};

/// `ct.new` bit of `Meta::reserved`.
pub const CT_NEW: u16 = 1;
/// `ct.established` bit.
pub const CT_ESTABLISHED: u16 = 2;
/// `ct.reply` bit.
pub const CT_REPLY: u16 = 4;
/// `ct.invalid` bit.
pub const CT_INVALID: u16 = 8;

/// Timer-wheel entries examined per batch at least (and twice the batch's packets, so expiry
/// keeps up with one insert per packet).
const EXPIRE_BUDGET: usize = 64;

/// Words of pass 3's filter of hashes inserted in this batch (1024 classes: with 256 inserts,
/// about one miss in five is a false "maybe", which only costs the insert's bucket search).
const OPENED_WORDS: usize = 16;

/// Class of hash `h` in pass 3's filter, `0..64 * OPENED_WORDS` (bits 32..42: the bucket index
/// takes the low bits, the signature the top 16, so keys that share a bucket are still spread).
#[inline]
fn opened_class(h: u64) -> usize {
    (h >> 32) as usize & (64 * OPENED_WORDS - 1)
}

/// The stage: scratch arrays for one batch (allocated once, at instantiation).
pub struct ConntrackStage {
    ct: u16,
    /// Where each packet's zone comes from.
    zone: Zone,
    keys: Box<[FlowKey; BATCH_MAX]>,
    hashes: Box<[u64; BATCH_MAX]>,
    ids: Box<[u32; BATCH_MAX]>,
    sides: Box<[Side; BATCH_MAX]>,
    segs: Box<[Segment; BATCH_MAX]>,
    slots: Box<[u8; BATCH_MAX]>,
    /// Per class of pass 3's filter, the entry this batch opened last in it (meaningful only
    /// while the class's bit is set, so never cleared).
    last: Box<[u32; 64 * OPENED_WORDS]>,
}

/// A conntrack stage's zone: a constant, or a field read with its specialised extractor (the
/// generic `FieldRef::read` cost about 34 instructions a packet for `meta.vnet`).
#[derive(Clone, Copy, Debug)]
enum Zone {
    Const(u32),
    /// A metadata register (the overlay's `meta.vnet`): one load, where the extractor's
    /// dispatch cost about 10 instructions a packet.
    Reg(usize),
    Read(Extract),
}

impl Zone {
    fn of(zone: Option<Operand>) -> Zone {
        match zone {
            // The stage has no action arguments: an argument reads as 0, as it did.
            None | Some(Operand::Arg(_)) => Zone::Const(0),
            Some(Operand::Const(v)) => Zone::Const(v as u32),
            Some(Operand::Field(f)) => match f.extractor() {
                Extract::Reg(r) => Zone::Reg(usize::from(r)),
                x => Zone::Read(x),
            },
        }
    }
}

impl ConntrackStage {
    /// A stage for conntrack table `ct` of the pipeline's objects, zone read from `zone`.
    pub fn new(ct: u16, zone: Option<Operand>) -> ConntrackStage {
        ConntrackStage {
            ct,
            zone: Zone::of(zone),
            keys: Box::new([FlowKey::ZERO; BATCH_MAX]),
            hashes: Box::new([0; BATCH_MAX]),
            ids: Box::new([NO_FLOW; BATCH_MAX]),
            sides: Box::new([Side::Lo; BATCH_MAX]),
            segs: Box::new([Segment::default(); BATCH_MAX]),
            slots: Box::new([0; BATCH_MAX]),
            last: Box::new([NO_FLOW; 64 * OPENED_WORDS]),
        }
    }
}

/// The flow key and segment of one packet, written in place (the stage's scratch arrays: no
/// 70-byte temporary to copy), or `None` when it is not trackable (or cut short). Returns the
/// sender's side and the key's hash with `seed`
/// ([`hash_key`]; an IPv4 key is hashed from its words while they are in registers, not
/// reloaded from the array); `key`/`seg` are garbage on `None`.
#[inline(always)]
fn key_into(data: &[u8], m: &Meta, zone: u32, seed: u64, key: &mut FlowKey, seg: &mut Segment) -> Option<(Side, u64)> {
    let l3 = m.offset(Slot::L3);
    let l4 = m.offset(Slot::L4);
    let v = m.valid;
    let wire_len = data.len() as u32;
    let l4h = data.get(l4..)?;
    // The parser validated the headers: the first L4 word holds both ports (TCP, UDP).
    let (p, ports) = if v.has(Hdr::Tcp) {
        let t = l4h.get(..20)?;
        let doff = usize::from(t[12] >> 4) * 4;
        let ip_end = if v.has(Hdr::Ipv4) {
            l3 + usize::from(u16::from_be_bytes([*data.get(l3 + 2)?, *data.get(l3 + 3)?]))
        } else {
            l3 + 40 + usize::from(u16::from_be_bytes([*data.get(l3 + 4)?, *data.get(l3 + 5)?]))
        };
        let payload = ip_end.saturating_sub(l4 + doff) as u32;
        *seg = Segment::tcp(t[13], be32(&t[4..8]), be32(&t[8..12]), u16::from_be_bytes([t[14], t[15]]), payload);
        seg.wire_len = wire_len;
        if t[13] & fastpath_tables::flow::flags::SYN != 0 {
            seg.wscale = wscale(l4h.get(20..doff.max(20))?);
        }
        (proto::TCP, be32(t))
    } else if v.has(Hdr::Udp) {
        *seg = Segment::datagram(wire_len);
        (proto::UDP, be32(l4h.get(..4)?))
    } else if v.has(Hdr::Icmp) || v.has(Hdr::Icmp6) {
        // ICMP echo (types 8/0, ICMPv6 128/129): the identifier is both "ports".
        let c = l4h.get(..8)?;
        let id = if matches!(c[0], 0 | 8 | 128 | 129) { u32::from(u16::from_be_bytes([c[4], c[5]])) } else { 0 };
        *seg = Segment::datagram(wire_len);
        (if v.has(Hdr::Icmp) { proto::ICMP } else { proto::ICMPV6 }, id << 16 | id)
    } else {
        return None;
    };
    let (sport, dport) = ((ports >> 16) as u16, ports as u16);
    if v.has(Hdr::Ipv4) {
        let a = data.get(l3 + 12..l3 + 20)?;
        let (k, side) = FlowKey::v4_words(zone, p, be32(&a[..4]), sport, be32(&a[4..]), dport);
        let h = hash_key(&k, seed);
        *key = k;
        Some((side, h))
    } else if v.has(Hdr::Ipv6) {
        let side = v6_key_into(data.get(l3 + 8..l3 + 40)?, zone, p, sport, dport, key)?;
        Some((side, hash_key(key, seed)))
    } else {
        None
    }
}

/// The IPv6 half of [`key_into`]: the key of addresses `a` (source then destination), written
/// to `key`. Out of line on purpose: when both families stored their key at the end of
/// `key_into`, the compiler merged the two stores and carried the eleven words of either key
/// through the stack, about 20 instructions of every IPv4 packet (callgrind, `sdn-overlay`).
#[inline(never)]
fn v6_key_into(a: &[u8], zone: u32, p: u8, sport: u16, dport: u16, key: &mut FlowKey) -> Option<Side> {
    let s = *a.first_chunk::<16>()?;
    let d = *a.get(16..)?.first_chunk::<16>()?;
    let (k, side) = FlowKey::v6(zone, p, s, sport, d, dport);
    *key = k;
    Some(side)
}

#[inline]
fn be32(s: &[u8]) -> u32 {
    s.first_chunk::<4>().map_or(0, |w| u32::from_be_bytes(*w))
}

/// The window-scale shift of a SYN's options (RFC 7323 §2.2), or `Segment::NO_WSCALE`.
fn wscale(opts: &[u8]) -> u8 {
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => break,
            1 => i += 1,
            kind => {
                let Some(&len) = opts.get(i + 1) else { break };
                if kind == 3 && len == 3 {
                    return opts.get(i + 2).map_or(Segment::NO_WSCALE, |s| (*s).min(14));
                }
                if len < 2 {
                    break;
                }
                i += usize::from(len);
            }
        }
    }
    Segment::NO_WSCALE
}

/// Pass 2's answers ([`FlowSink`]): a hit is tracked and its packet's metadata written there
/// and then; a miss is listed in `missed` for pass 3. Indexed by the batch's key number `j`.
struct Track<'a> {
    b: &'a mut Batch,
    slots: &'a [u8],
    sides: &'a [Side],
    segs: &'a [Segment],
    hashes: &'a [u64],
    now: u64,
    missed: &'a mut [u32; BATCH_MAX],
    nmissed: usize,
}

impl FlowSink for Track<'_> {
    #[inline(always)]
    fn hit(&mut self, table: &mut FlowTable, j: usize, id: FlowId) {
        let (Some(&slot), Some(&side), Some(seg), Some(&h)) = (self.slots.get(j), self.sides.get(j), self.segs.get(j), self.hashes.get(j))
        else {
            return;
        };
        let (flags, verdict) = tracked(table, id, side, seg, self.now);
        settle(self.b.meta_mut(usize::from(slot)), flags, verdict, id, h);
    }

    #[inline(always)]
    fn miss(&mut self, j: usize) {
        self.missed[self.nmissed % BATCH_MAX] = j as u32;
        self.nmissed += 1;
    }
}

/// Tracks a packet of connection `id` from `side`: its `ct` flags and the connection's cached
/// verdict (`ct.verdict`).
#[inline(always)]
fn tracked(table: &mut FlowTable, id: FlowId, side: Side, seg: &Segment, now: u64) -> (u16, u16) {
    match table.track_action(id, side, seg, now) {
        Ok((dir, action)) => (CT_ESTABLISHED | if dir == Dir::Reply { CT_REPLY } else { 0 }, action as u16 & 0xff),
        Err(_) => (CT_INVALID, 0),
    }
}

/// Writes a tracked packet's metadata: its flags and verdict, its flow (none when invalid) and
/// its key's hash (never 0: the encap's entropy).
#[inline(always)]
fn settle(m: &mut Meta, flags: u16, verdict: u16, id: FlowId, hash: u64) {
    m.reserved = flags | verdict << 8;
    m.flow = if flags & CT_INVALID == 0 { id } else { NO_FLOW };
    m.hash = (hash >> 32) as u32 | 1;
}

impl Stage for ConntrackStage {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        let now = cx.now_ns;
        let drops = &mut *cx.drops;
        let Some(ct) = cx.objects.conntracks.get_mut(usize::from(self.ct)) else { return };
        let table = &mut ct.table;
        let seed = table.config().seed;
        // Pass 1: keys and hashes. The zone's source is matched once per batch, and a batch
        // whose packets are all live runs a counted loop (`each_lane!`), not a walk of the lane
        // bits; `key_into` is inlined into each loop. Together 27.6 fewer instructions a packet
        // of the overlay's conntrack (callgrind, `scripts/instructions sdn-overlay`).
        let mut n = 0;
        macro_rules! keys {
            ($zone:expr) => {
                each_lane!(i in lanes => {
                    let (data, m) = (pool.data(b.handle(i)), b.meta(i));
                    // `n` counts keys written, so it is at most `i` (below BATCH_MAX): the mask
                    // only says so to the compiler.
                    let k = n & (BATCH_MAX - 1);
                    if let Some((side, h)) = key_into(data, m, $zone(data, m), seed, &mut self.keys[k], &mut self.segs[k]) {
                        self.hashes[k] = h;
                        self.sides[k] = side;
                        self.slots[k] = i as u8;
                        n += 1;
                    } else {
                        b.meta_mut(i).reserved = 0;
                    }
                })
            };
        }
        match self.zone {
            Zone::Const(z) => keys!(|_: &[u8], _: &Meta| z),
            Zone::Reg(r) => keys!(|_: &[u8], m: &Meta| m.regs.get(r).copied().unwrap_or(0)),
            Zone::Read(x) => keys!(|d: &[u8], m: &Meta| x.read64(d, m).unwrap_or(0) as u32),
        }
        // Pass 2: bulk lookup with prefetch. A packet of a connection the table holds is
        // tracked in the lookup's own loop, while its entry is in the cache; the others are
        // listed (in `ids`) for pass 3. In a pass of their own, the tracked packets paid a loop
        // and the reloads of their entry, their key's fields and the batch's arrays again.
        let mut track = Track {
            b: &mut *b,
            slots: &self.slots[..n],
            sides: &self.sides[..n],
            segs: &self.segs[..n],
            hashes: &self.hashes[..n],
            now,
            missed: &mut self.ids,
            nmissed: 0,
        };
        table.lookup_batch_into(&self.keys[..n], &self.hashes[..n], now, &mut track);
        let nmissed = track.nmissed;
        // Pass 3: the packets whose key the table did not hold, in lane order. `opened` has a
        // bit per hash class of the keys this pass inserted: a miss whose class is clear cannot
        // have been opened by an earlier packet of the batch, so the lookup's miss still holds
        // and the insert skips its bucket search. A miss whose class is set is most often the
        // same connection's next packet (a SYN and its SYN-ACK in one batch): the class's last
        // opening is checked first, one key compare where the insert's search of both buckets
        // cost about 75 instructions.
        let mut opened = [0u64; OPENED_WORDS];
        for &k in &self.ids[..nmissed] {
            let k = k as usize % BATCH_MAX;
            let i = usize::from(self.slots[k]);
            let (side, seg, h) = (self.sides[k], &self.segs[k], self.hashes[k]);
            let c = opened_class(h);
            let (w, bit) = (c / 64, 1u64 << (c % 64));
            let r = if opened[w] & bit == 0 {
                opened[w] |= bit;
                table.insert_absent(&self.keys[k], h, side, seg, now)
            } else {
                let x = self.last[c];
                if table.entry(x).is_some_and(|e| *e.key() == self.keys[k]) {
                    Err(InsertError::Exists(x))
                } else {
                    table.insert(&self.keys[k], h, side, seg, now)
                }
            };
            let (id, flags, verdict) = match r {
                // A new entry's cached action is 0.
                Ok(x) => {
                    self.last[c] = x;
                    (x, CT_NEW, 0)
                }
                // An earlier packet of this batch opened it.
                Err(InsertError::Exists(x)) => {
                    let (flags, verdict) = tracked(table, x, side, seg, now);
                    (x, flags, verdict)
                }
                Err(InsertError::Full) => {
                    b.drop(i, DropReason::FlowTableFull);
                    drops[DropReason::FlowTableFull as usize] += 1;
                    continue;
                }
                Err(InsertError::Invalid(_)) => (NO_FLOW, CT_INVALID, 0),
            };
            settle(b.meta_mut(i), flags, verdict, id, h);
        }
        // Ageing with a small budget. A flow freed here may be a packet's of this batch (one
        // whose deadline has passed the moment it was tracked): `ct_load` must then run.
        let freed = table.expire(now, EXPIRE_BUDGET.max(2 * n));
        cx.objects.ct_changes += freed as u64;
    }

    fn describe(&self) -> String {
        format!("conntrack table #{} zone {:?}: bulk lookup, TCP/UDP/ICMP tracking, ageing", self.ct, self.zone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_keys_are_built_out_of_line_as_flowkey_v6() {
        let src = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
        let dst = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut a = [0u8; 32];
        a[..16].copy_from_slice(&src);
        a[16..].copy_from_slice(&dst);
        for (sport, dport) in [(40000, 80), (80, 40000), (7, 7)] {
            let mut key = FlowKey::ZERO;
            let side = v6_key_into(&a, 3, proto::TCP, sport, dport, &mut key);
            let (k, s) = FlowKey::v6(3, proto::TCP, src, sport, dst, dport);
            assert_eq!((key, side), (k, Some(s)));
        }
        // Both directions meet in one key.
        let (mut k1, mut k2) = (FlowKey::ZERO, FlowKey::ZERO);
        let s1 = v6_key_into(&a, 0, proto::UDP, 5000, 53, &mut k1);
        let mut b = [0u8; 32];
        b[..16].copy_from_slice(&dst);
        b[16..].copy_from_slice(&src);
        let s2 = v6_key_into(&b, 0, proto::UDP, 53, 5000, &mut k2);
        assert_eq!(k1, k2);
        assert_ne!(s1, s2);
        // Cut short: no key.
        assert_eq!(v6_key_into(&a[..31], 0, proto::UDP, 1, 2, &mut k1), None);
    }

    #[test]
    fn wscale_option_is_found_and_bounded() {
        assert_eq!(wscale(&[2, 4, 5, 0xb4, 1, 3, 3, 7]), 7);
        assert_eq!(wscale(&[1, 1, 3, 3, 20]), 14);
        assert_eq!(wscale(&[2, 4, 5, 0xb4]), Segment::NO_WSCALE);
        assert_eq!(wscale(&[2, 0, 3, 3, 7]), Segment::NO_WSCALE); // bad length stops the walk
        assert_eq!(wscale(&[3]), Segment::NO_WSCALE);
    }
}
