//! The front of a classifier (`acl`) table on the specialised path: reading a packet's key
//! ([`AclKey`]) and the exact-match cache of recent keys ([`AclCache`]).
//!
//! A classifier key is up to [`MAX_KEY_FIELDS`] 32-bit words: metadata (the input port, a
//! register) or 1, 2 or 4 big-endian bytes of a header (the 5-tuple, VLANs, DSCP…). Read word by
//! word, each header word costs a validity test, an offset load, a bounds check and a shift,
//! about 20 instructions. [`AclKey`] is built once per table: the words of the same header and
//! test, within 16 bytes of each other, form a group, and a packet pays the validity test, the
//! offset load and the bounds check once per group; each word is then a load and a shift. The
//! IPv4 5-tuple plus the input port is two groups (IPv4, L4) and the port.
//!
//! The cache does not need the words, only something equal exactly when they are: a key of at
//! most two groups goes to it raw ([`AclKey::read_raw`]), each group's 16 bytes masked to the
//! bytes its words occupy. The words are made from the raw key only on a cache miss.

use super::parsed::ParsedTuple;
use crate::field::Extract;
use crate::ir::MAX_KEY_FIELDS;
use fastpath_packet::{Batch, Hdr, HdrSet, Lanes, Meta, Pool, Slot, BATCH_MAX};
use fastpath_tables::acl::Acl;
use std::sync::Arc;

/// A lookup that found no entry (the table's results are entry indices).
pub(crate) const MISS: u32 = fastpath_tables::MISS;

/// One word of a classifier key: `n` big-endian bytes at `byte` of header `slot`, which the
/// packet has when it has every header of `needs` (or of `alt`, when not empty). A `range`
/// field of a packet without the header reads as 0 (a port range matches "any" then); any other
/// field makes the key miss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Word {
    slot: usize,
    byte: usize,
    n: usize,
    needs: HdrSet,
    alt: HdrSet,
    range: bool,
}

impl Word {
    /// True when the packet has the header this word reads.
    #[inline(always)]
    fn present(&self, m: &Meta) -> bool {
        m.valid.has_all(self.needs) || (self.alt != HdrSet::EMPTY && m.valid.has_all(self.alt))
    }
}

/// Bytes a group reads with one bounds check: its words lie within them.
const WINDOW: usize = 16;

/// Words of one header read together: one validity test, one offset load and one bounds check
/// (the [`WINDOW`] bytes at `lo` of the header hold a 4-byte load at each word).
#[derive(Clone, Copy, Debug)]
struct Group {
    /// The header, its test and its range flag (as [`Word`]; `byte` and `n` unused).
    hdr: Word,
    /// Offset of the group's first byte inside the header.
    lo: usize,
    /// Per word: its index in the key, its offset from `lo` (at most `WINDOW - 4`), its length
    /// in bytes and the right shift of a 4-byte load that leaves it.
    words: [(usize, usize, usize, u32); MAX_KEY_FIELDS],
    nw: usize,
}

/// How a table reads its classifier key, built once from the key's extractors.
#[derive(Clone, Debug)]
pub(crate) struct AclKey {
    /// Key words holding the input port (a bit each).
    ports: u32,
    /// Key words holding a metadata field or register: (word, field, mask of its width).
    metas: [(usize, Extract, u32); MAX_KEY_FIELDS],
    nm: usize,
    groups: [Group; MAX_KEY_FIELDS],
    ng: usize,
    /// Words of the key.
    nf: usize,
    /// Per group: the bytes of its window its words read (the raw form's mask).
    masks: [u128; 2],
    /// The raw form's metadata word: each metadata key word's shift in it (the input port, when
    /// in the key, is bits 0..16).
    meta_shift: [u32; MAX_KEY_FIELDS],
    /// Whether the key has a raw form (at most two groups; port and metadata in 64 bits).
    raw: bool,
    /// The IPv4 5-tuple form, when the key is made of its parts (for the cache's raw keys).
    tuple: Option<Tuple>,
    /// The same without a register: [`AclKey::read`]'s fixed-offset reader (a key with a
    /// register takes the group reader, so that the others' reads test nothing more: the
    /// test had cost the overlay's new connections, which read their keys this way, 1.3
    /// instructions a packet).
    word_tuple: Option<Tuple>,
}

/// A key made of parts of the IPv4 5-tuple and the input port (`acl_in` and `acl_out` of the
/// overlay, a switch's ACL), and at most one register where the key lacks an address (vbng's
/// `class_acl`: the subscriber's ACL profile, protocol and destination port), read with fixed
/// offsets: per header one test, one bounds check and a load per part, no loop over groups and
/// words. (The group reader cost about 110 instructions for the overlay's 4-field key: its
/// loops' bounds, and a descriptor's four fields loaded per word. vbng's key through the
/// two-window raw form cost 166 a packet to read, hash and look up in the cache.)
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tuple {
    /// Key word of each part, [`TUPLE_NONE`] when the key lacks it: input port, protocol,
    /// source, destination, source port, destination port.
    at: [usize; 6],
    /// The IPv4 header's test (the L3 group's).
    l3: Word,
    /// The L4 header's test when a port is in the key, else one that no packet passes (read
    /// as an absent range), so that the readers have no `Option` to look at.
    l4_test: Word,
    /// The bits of the raw form ([`Tuple::read_raw`]) that hold the key's parts (the
    /// register's apart).
    mask_lo: u64,
    mask_hi: u64,
    /// The register, when the key has one.
    reg: RegPart,
}

/// A [`Tuple`] key's register: its key word ([`TUPLE_NONE`] when the key has none), its index,
/// the mask of its width, and its shift in the raw form's first `u64` (the half of the address
/// the key lacks).
#[derive(Clone, Copy, Debug)]
struct RegPart {
    at: usize,
    index: usize,
    mask: u32,
    shift: u32,
}

impl RegPart {
    const NONE: RegPart = RegPart { at: TUPLE_NONE, index: 0, mask: 0, shift: 0 };

    /// The register's value in a packet, masked to its width.
    #[inline(always)]
    fn read(&self, m: &Meta) -> u32 {
        m.regs.get(self.index).copied().unwrap_or(0) & self.mask
    }
}

/// A [`Tuple`] part that is not in the key: written to a word past the key's.
const TUPLE_NONE: usize = MAX_KEY_FIELDS;

impl Tuple {
    /// The tuple form of a key of these header groups, the port and these metadata words (at
    /// most one register, in a key without one of the addresses).
    fn of(groups: &[Group], ports: u32, metas: &[(usize, Extract, u32)]) -> Option<Tuple> {
        let mut at = [TUPLE_NONE; 6];
        match ports.count_ones() {
            0 => {}
            1 => at[0] = ports.trailing_zeros() as usize,
            _ => return None,
        }
        let (mut l3, mut l4) = (None, None);
        for g in groups {
            let (slot, parts): (&mut Option<Word>, &[(usize, usize, usize)]) = match g.hdr.slot {
                s if s == Slot::L3 as usize => (&mut l3, &[(9, 1, 1), (12, 4, 2), (16, 4, 3)]),
                s if s == Slot::L4 as usize => (&mut l4, &[(0, 2, 4), (2, 2, 5)]),
                _ => return None,
            };
            if slot.replace(g.hdr).is_some() {
                return None;
            }
            for &(k, rel, n, _) in &g.words[..g.nw] {
                let &(_, _, part) = parts.iter().find(|&&(byte, len, _)| (byte, len) == (g.lo + rel, n))?;
                // A part in two words of the key: the group reader fills both.
                if at[part] != TUPLE_NONE {
                    return None;
                }
                at[part] = k;
            }
        }
        let mut masks = [0u64; 2];
        for (&(word, shift, bits), &k) in TUPLE_RAW.iter().zip(&at) {
            if k != TUPLE_NONE {
                masks[word] |= ((1u64 << bits) - 1) << shift;
            }
        }
        let reg = match metas {
            [] => RegPart::NONE,
            // In the half of the first `u64` that the absent address leaves.
            &[(k, Extract::Reg(r), mask)] => {
                let shift = match (at[2], at[3]) {
                    (_, TUPLE_NONE) => 0,
                    (TUPLE_NONE, _) => 32,
                    _ => return None,
                };
                RegPart { at: k, index: usize::from(r), mask, shift }
            }
            _ => return None,
        };
        let never = Word { needs: HdrSet(u32::MAX), alt: HdrSet::EMPTY, range: true, ..l3? };
        Some(Tuple { at, l3: l3?, l4_test: l4.unwrap_or(never), mask_lo: masks[0], mask_hi: masks[1], reg })
    }

    /// The key of one packet in its raw form, for the cache: two `u64`s, each part at its
    /// place in [`TUPLE_RAW`] (the source and destination are one big-endian load, the ports
    /// another), the parts the key lacks zero. Equal exactly when the key words are
    /// ([`Tuple::raw_words`] turns one into the other). `None` when the key misses (as
    /// [`AclKey::read`]). Measured on `switch-acl --rules 24`, the two-window raw form cost
    /// about 75 instructions a packet to read, hash and compare (five `u64`s); this one about
    /// 50.
    /// `REG`: the key has a register ([`Tuple::has_reg`]), in the first `u64`.
    #[inline(always)]
    pub(crate) fn read_raw<const REG: bool>(&self, k: &AclKey, d: &[u8], m: &Meta) -> Option<[u64; 2]> {
        // A miss is a bit no part uses, so that the key stays in two registers (an `Option`
        // of the cold path's result went through the stack).
        let mut raw = self.raw_or_miss(k, d, m);
        if REG {
            raw[0] |= u64::from(self.reg.read(m)) << (self.reg.shift % 64);
        }
        (raw[1] & RAW_MISS == 0).then_some(raw)
    }

    /// Whether the key has a register.
    pub(crate) fn has_reg(&self) -> bool {
        self.reg.at != TUPLE_NONE
    }

    /// The raw form without the register (the near-end path's has it).
    #[inline(always)]
    fn raw_or_miss(&self, k: &AclKey, d: &[u8], m: &Meta) -> [u64; 2] {
        let mut lo = 0u64;
        let mut hi = u64::from(m.in_port) << 40;
        if self.l3.present(m) {
            // One length check each (the parser has checked both headers are whole).
            let at = usize::from(m.off[Slot::L3 as usize]) + 9;
            let Some(h) = d.get(at..at + 11).and_then(|h| <&[u8; 11]>::try_from(h).ok()) else { return self.raw_near_end(k, d, m) };
            hi |= u64::from(h[0]) << 32;
            // Masked here, apart from the other word: masked together, the two words became
            // one vector, and the key went through the stack to the hash.
            lo = u64::from_be_bytes([h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10]]) & self.mask_lo;
        } else if !self.l3.range {
            return [0, RAW_MISS];
        }
        if self.l4_test.present(m) {
            let at = usize::from(m.off[Slot::L4 as usize]);
            let Some(p) = d.get(at..at + 4).and_then(|p| <&[u8; 4]>::try_from(p).ok()) else { return self.raw_near_end(k, d, m) };
            hi |= u64::from(u32::from_be_bytes(*p));
        } else if !self.l4_test.range {
            return [0, RAW_MISS];
        }
        [lo, hi & self.mask_hi]
    }

    /// [`Tuple::read_raw`] of a frame that ends inside the headers: the words from the group
    /// reader, packed.
    #[cold]
    #[inline(never)]
    fn raw_near_end(&self, k: &AclKey, d: &[u8], m: &Meta) -> [u64; 2] {
        let Some(key) = k.read_groups::<{ MAX_KEY_FIELDS / 2 }>(d, m) else { return [0, RAW_MISS] };
        let w = unpack(&key);
        let mut raw = [0u64; 2];
        for (&(word, shift, _), &at) in TUPLE_RAW.iter().zip(&self.at) {
            if let Some(&x) = w.get(at) {
                raw[word] |= u64::from(x) << shift;
            }
        }
        // `read_raw` adds the register.
        raw
    }

    /// The key words of a raw key (as [`Tuple::read_raw`] gives it): what the classifier is
    /// asked on a cache miss.
    pub(crate) fn raw_words(&self, raw: &[u64; 2]) -> [u32; MAX_KEY_FIELDS] {
        let mut w = [0u32; MAX_KEY_FIELDS];
        for (&(word, shift, bits), &at) in TUPLE_RAW.iter().zip(&self.at) {
            if let Some(x) = w.get_mut(at) {
                *x = (raw[word] >> shift & ((1u64 << bits) - 1)) as u32;
            }
        }
        if let Some(x) = w.get_mut(self.reg.at) {
            *x = (raw[0] >> (self.reg.shift % 64)) as u32 & self.reg.mask;
        }
        w
    }
}

/// The raw form's miss (above the input port's bits in the second `u64`).
const RAW_MISS: u64 = 1 << 63;

impl Tuple {
    /// The masks of the parser's record ([`ParsedTuple`]) that keep this key's parts and the
    /// header bit, when the record holds the key: its IPv4 test is the record's and not a
    /// range's, its ports, if any, are `range` fields of a UDP or TCP header (which the
    /// record reads as 0 without one, as the key does), and it has no register. `None`
    /// otherwise.
    pub(crate) fn parsed_masks(&self) -> Option<[u64; 2]> {
        if self.has_reg() {
            return None;
        }
        let v4 = HdrSet::EMPTY.with(Hdr::Ipv4);
        let (udp, tcp) = (HdrSet::EMPTY.with(Hdr::Udp), HdrSet::EMPTY.with(Hdr::Tcp));
        let l3 = self.l3.slot == Slot::L3 as usize && self.l3.needs == v4 && self.l3.alt == HdrSet::EMPTY && !self.l3.range;
        let t = &self.l4_test;
        let never = t.needs == HdrSet(u32::MAX) && t.alt == HdrSet::EMPTY;
        let l4 = never || (t.slot == Slot::L4 as usize && t.range && ((t.needs, t.alt) == (udp, tcp) || (t.needs, t.alt) == (tcp, udp)));
        let hi = self.mask_hi;
        (l3 && l4).then(|| [self.mask_lo.swap_bytes(), (hi & !0xffff_ffff) | u64::from((hi as u32).swap_bytes()) | ParsedTuple::L3])
    }
}

/// Where each [`Tuple`] part lies in its raw form: (`u64`, shift, bits). Input port, protocol,
/// source, destination, source port, destination port.
const TUPLE_RAW: [(usize, u32, u32); 6] = [(1, 40, 16), (1, 32, 8), (0, 32, 32), (0, 0, 32), (1, 16, 16), (1, 0, 16)];

impl AclKey {
    /// The reader of a key made of these fields (extractor, width in bits and whether it is a
    /// `range` field),
    /// when every field is metadata (the input port, a register, a metadata field of at most 32
    /// bits) or a header field of 1, 2 or 4 bytes.
    pub(crate) fn new(fields: &[(Extract, u8, bool)]) -> Option<AclKey> {
        if fields.is_empty() || fields.len() > MAX_KEY_FIELDS {
            return None;
        }
        let mut ports = 0u32;
        let (mut metas, mut nm) = ([(0, Extract::InPort, 0); MAX_KEY_FIELDS], 0);
        let mut words: Vec<(usize, Word)> = Vec::new();
        for (k, &(x, width, range)) in fields.iter().enumerate() {
            let w =
                |slot: Slot, byte: u16, n: usize, needs, alt| Word { slot: slot as usize, byte: usize::from(byte), n, needs, alt, range };
            match x {
                Extract::InPort => ports |= 1 << k,
                Extract::Reg(_) | Extract::Meta(_) if width <= 32 => {
                    metas[nm] = (k, x, if width >= 32 { u32::MAX } else { (1 << width) - 1 });
                    nm += 1;
                }
                Extract::Be16 { slot, byte, needs, alt } => words.push((k, w(slot, byte, 2, needs, alt))),
                Extract::Be32 { slot, byte, needs, alt } => words.push((k, w(slot, byte, 4, needs, alt))),
                Extract::Short { slot, byte, n: 1, needs, alt } => words.push((k, w(slot, byte, 1, needs, alt))),
                _ => return None,
            }
        }
        // One group per header and test, while the words fit the window.
        words.sort_by_key(|&(k, w)| (w.slot, w.needs.0, w.alt.0, w.range, w.byte, k));
        let none = Group {
            hdr: Word { slot: 0, byte: 0, n: 0, needs: HdrSet::EMPTY, alt: HdrSet::EMPTY, range: true },
            lo: 0,
            words: [(0, 0, 0, 0); MAX_KEY_FIELDS],
            nw: 0,
        };
        let mut groups = [none; MAX_KEY_FIELDS];
        let mut ng = 0;
        for (k, w) in words {
            let same = ng > 0 && Word { byte: w.byte, n: w.n, ..groups[ng - 1].hdr } == w && w.byte + 4 <= groups[ng - 1].lo + WINDOW;
            if !same {
                groups[ng] = Group { hdr: w, lo: w.byte, ..none };
                ng += 1;
            }
            let g = &mut groups[ng - 1];
            g.words[g.nw] = (k, w.byte - g.lo, w.n, 32 - 8 * w.n as u32);
            g.nw += 1;
        }
        // The raw form: at most two groups, the metadata words packed in one u64.
        let mut masks = [0u128; 2];
        for (g, mask) in groups.iter().zip(masks.iter_mut()).take(ng) {
            for &(_, rel, n, _) in &g.words[..g.nw] {
                *mask |= ((1u128 << (8 * n)) - 1) << (8 * rel);
            }
        }
        let mut meta_shift = [0u32; MAX_KEY_FIELDS];
        let mut bits = if ports != 0 { 16 } else { 0 };
        for (&(_, _, mask), sh) in metas[..nm].iter().zip(meta_shift.iter_mut()) {
            *sh = bits;
            bits += 32 - mask.leading_zeros();
        }
        let raw = ng <= 2 && bits <= 64;
        let tuple = Tuple::of(&groups[..ng], ports, &metas[..nm]);
        let word_tuple = tuple.filter(|t| !t.has_reg());
        Some(AclKey { ports, metas, nm, groups, ng, nf: fields.len(), masks, meta_shift, raw, tuple, word_tuple })
    }

    /// The IPv4 5-tuple form, when the key is made of its parts and the input port.
    pub(crate) fn tuple(&self) -> Option<&Tuple> {
        self.tuple.as_ref()
    }

    /// Header groups of the raw form (0, 1 or 2), when the key has one.
    pub(crate) fn raw_groups(&self) -> Option<usize> {
        self.raw.then_some(self.ng)
    }

    /// The key of one packet in its raw form, for the cache: per header group (`G` of them,
    /// as [`AclKey::raw_groups`]), the [`WINDOW`] bytes at the group's first word masked to the
    /// bytes its words read (two `u64`s, little-endian), then the metadata word (the input port
    /// in bits 0..16, each metadata field at its shift); `N` is `2 * G + 1`. Two packets have
    /// the same raw key exactly when they have the same key words ([`AclKey::raw_words`] turns
    /// one into the other). No per-word work: a 16-byte load and a mask per header. `None`
    /// when the key misses (as [`AclKey::read`]).
    #[inline(always)]
    pub(crate) fn read_raw<const G: usize, const N: usize>(&self, d: &[u8], m: &Meta) -> Option<[u64; N]> {
        let mut out = [0u64; N];
        let mut meta = if self.ports != 0 { u64::from(m.in_port) } else { 0 };
        for (j, &(_, x, mask)) in self.metas[..self.nm.min(MAX_KEY_FIELDS)].iter().enumerate() {
            let v = u64::from(x.read64(d, m).unwrap_or(0) as u32 & mask);
            meta |= v << (self.meta_shift[j % MAX_KEY_FIELDS] % 64);
        }
        if let Some(last) = out.last_mut() {
            *last = meta;
        }
        for gi in 0..G {
            let g = &self.groups[gi % MAX_KEY_FIELDS];
            if !g.hdr.present(m) {
                if g.hdr.range {
                    continue;
                }
                return None;
            }
            let at = usize::from(m.off[g.hdr.slot % m.off.len()]) + g.lo;
            let win = match d.get(at..).and_then(|s| s.first_chunk::<WINDOW>()) {
                Some(w) => u128::from_le_bytes(*w),
                None => partial_window(g, d.get(at..).unwrap_or_default())?,
            } & self.masks[gi % 2];
            out[(2 * gi) % N] = win as u64;
            out[(2 * gi + 1) % N] = (win >> 64) as u64;
        }
        Some(out)
    }

    /// The key words of a raw key (as [`AclKey::read_raw`] gives it), in key order: what the
    /// classifier is asked on a cache miss.
    pub(crate) fn raw_words<const N: usize>(&self, raw: &[u64; N]) -> [u32; MAX_KEY_FIELDS] {
        let mut w = [0u32; MAX_KEY_FIELDS];
        let meta = raw.last().copied().unwrap_or(0);
        let mut p = self.ports;
        while p != 0 {
            w[p.trailing_zeros() as usize % MAX_KEY_FIELDS] = meta as u32 & 0xffff;
            p &= p - 1;
        }
        for (j, &(k, _, mask)) in self.metas[..self.nm].iter().enumerate() {
            w[k % MAX_KEY_FIELDS] = (meta >> (self.meta_shift[j] % 64)) as u32 & mask;
        }
        for (gi, g) in self.groups[..self.ng.min(N / 2)].iter().enumerate() {
            let win = (u128::from(raw[2 * gi]) | u128::from(raw[2 * gi + 1]) << 64).to_le_bytes();
            for &(k, rel, _, shift) in &g.words[..g.nw] {
                let r = rel.min(WINDOW - 4);
                w[k % MAX_KEY_FIELDS] = u32::from_be_bytes([win[r], win[r + 1], win[r + 2], win[r + 3]]) >> shift;
            }
        }
        w
    }

    /// Words of the key.
    pub(crate) fn fields(&self) -> usize {
        self.nf
    }

    /// The key of one packet, two words per `u64` (word `k` in bits `32 * (k % 2)` of
    /// `key[k / 2]`, unused words 0); `None` when it misses. `K` is `(fields + 1) / 2`.
    #[inline(always)]
    pub(crate) fn read<const K: usize>(&self, d: &[u8], m: &Meta) -> Option<[u64; K]> {
        match &self.word_tuple {
            Some(t) => self.read_tuple(t, d, m),
            None => self.read_groups(d, m),
        }
    }

    /// [`AclKey::read`] of a [`Tuple`] key without a register (the group reader near the
    /// frame's end).
    #[inline(always)]
    fn read_tuple<const K: usize>(&self, t: &Tuple, d: &[u8], m: &Meta) -> Option<[u64; K]> {
        // Words past the key's take the parts it lacks.
        let mut w = [0u32; 2 * MAX_KEY_FIELDS];
        let mask = 2 * MAX_KEY_FIELDS - 1;
        w[t.at[0] & mask] = u32::from(m.in_port);
        if t.l3.present(m) {
            let at = usize::from(m.off[Slot::L3 as usize]);
            let Some(h) = d.get(at..).and_then(|s| s.first_chunk::<20>()) else { return self.read_groups(d, m) };
            w[t.at[1] & mask] = u32::from(h[9]);
            w[t.at[2] & mask] = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
            w[t.at[3] & mask] = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
        } else if !t.l3.range {
            return None;
        }
        if t.l4_test.present(m) {
            let at = usize::from(m.off[Slot::L4 as usize]);
            let Some(p) = d.get(at..).and_then(|s| s.first_chunk::<4>()) else { return self.read_groups(d, m) };
            w[t.at[4] & mask] = u32::from(u16::from_be_bytes([p[0], p[1]]));
            w[t.at[5] & mask] = u32::from(u16::from_be_bytes([p[2], p[3]]));
        } else if !t.l4_test.range {
            return None;
        }
        Some(std::array::from_fn(|j| {
            let lo = w.get(2 * j).copied().unwrap_or(0);
            let hi = w.get(2 * j + 1).copied().unwrap_or(0);
            u64::from(lo) | u64::from(hi) << 32
        }))
    }

    /// [`AclKey::read`] a header group at a time.
    #[inline(always)]
    fn read_groups<const K: usize>(&self, d: &[u8], m: &Meta) -> Option<[u64; K]> {
        let mut w = [0u32; MAX_KEY_FIELDS];
        let mut p = self.ports;
        while p != 0 {
            w[p.trailing_zeros() as usize % MAX_KEY_FIELDS] = u32::from(m.in_port);
            p &= p - 1;
        }
        for &(k, x, mask) in &self.metas[..self.nm.min(MAX_KEY_FIELDS)] {
            w[k % MAX_KEY_FIELDS] = x.read64(d, m).unwrap_or(0) as u32 & mask;
        }
        for g in &self.groups[..self.ng.min(MAX_KEY_FIELDS)] {
            if !g.hdr.present(m) {
                if g.hdr.range {
                    continue;
                }
                return None;
            }
            let at = usize::from(m.off[g.hdr.slot]) + g.lo;
            match d.get(at..).and_then(|s| s.first_chunk::<WINDOW>()) {
                Some(win) => {
                    for &(k, rel, _, shift) in &g.words[..g.nw.min(MAX_KEY_FIELDS)] {
                        // `rel <= WINDOW - 4` by construction; the `min` lets the compiler see it.
                        let r = rel.min(WINDOW - 4);
                        let x = u32::from_be_bytes([win[r], win[r + 1], win[r + 2], win[r + 3]]);
                        w[k % MAX_KEY_FIELDS] = x >> shift;
                    }
                }
                // Near the frame's end: byte by byte, and the key misses when a word's bytes
                // are not all there.
                None => {
                    for &(k, rel, n, _) in &g.words[..g.nw.min(MAX_KEY_FIELDS)] {
                        let bytes = d.get(at + rel..at + rel + n)?;
                        w[k % MAX_KEY_FIELDS] = bytes.iter().fold(0u32, |v, &x| v << 8 | u32::from(x));
                    }
                }
            }
        }
        Some(std::array::from_fn(|j| {
            let lo = w.get(2 * j).copied().unwrap_or(0);
            let hi = w.get(2 * j + 1).copied().unwrap_or(0);
            u64::from(lo) | u64::from(hi) << 32
        }))
    }
}

/// A group's window near the frame's end (`rest` is the frame from the window's start): the
/// bytes that are there, zeros after; `None` (the key misses) when one of its words is cut short.
#[cold]
#[inline(never)]
fn partial_window(g: &Group, rest: &[u8]) -> Option<u128> {
    if g.words[..g.nw].iter().any(|&(_, rel, n, _)| rel + n > rest.len()) {
        return None;
    }
    let mut win = [0u8; WINDOW];
    let n = rest.len().min(WINDOW);
    win[..n].copy_from_slice(&rest[..n]);
    Some(u128::from_le_bytes(win))
}

/// A form of classifier key the cache looks up: `K` `u64`s read from a packet, and the key
/// words they stand for, asked on a cache miss. One type per form, so that the cached pass is
/// monomorphised with the reader inlined (a closure was not: a call a packet).
pub(crate) trait CacheKey<const K: usize> {
    /// Lane `i`'s key, `None` when it misses.
    fn read(&self, pool: &Pool, b: &Batch, i: usize) -> Option<[u64; K]>;
    /// The key words of a key `read` gave.
    fn words(&self, key: &[u64; K]) -> [u32; MAX_KEY_FIELDS];
    /// Every key `read` gives has a bit set, so that an empty slot (all its words 0, see
    /// [`AclCache::forget`]) never equals one, and the probe need not test the slot's tag.
    const NONZERO: bool = false;
}

/// The 5-tuple's raw form ([`Tuple::read_raw`]); `REG`: with its register.
pub(crate) struct TupleForm<'a, const REG: bool>(pub &'a Tuple, pub &'a AclKey);

impl<const REG: bool> CacheKey<2> for TupleForm<'_, REG> {
    #[inline(always)]
    fn read(&self, pool: &Pool, b: &Batch, i: usize) -> Option<[u64; 2]> {
        self.0.read_raw::<REG>(self.1, pool.data(b.handle(i)), b.meta(i))
    }
    fn words(&self, key: &[u64; 2]) -> [u32; MAX_KEY_FIELDS] {
        self.0.raw_words(key)
    }
}

/// A 5-tuple key taken from the parser's record ([`ParsedTuple`]): the same `u64`s as
/// [`TupleForm`] reads from the packet.
pub(crate) struct ParsedForm<'a> {
    tuple: &'a Tuple,
    /// The record's bits that hold the key ([`Tuple::parsed_masks`]).
    masks: [u64; 2],
}

impl<'a> ParsedForm<'a> {
    /// The form of `tuple`'s key from the parser's records, when the key can be read from them.
    pub(crate) fn new(tuple: &'a Tuple) -> Option<ParsedForm<'a>> {
        Some(ParsedForm { tuple, masks: tuple.parsed_masks()? })
    }
}

impl CacheKey<2> for ParsedForm<'_> {
    /// A record of an IPv4 packet has [`ParsedTuple::L3`], and the masks keep it.
    const NONZERO: bool = true;
    #[inline(always)]
    fn read(&self, _: &Pool, b: &Batch, i: usize) -> Option<[u64; 2]> {
        let [lo, hi] = b.words(i);
        (hi & ParsedTuple::L3 != 0).then_some([lo & self.masks[0], hi & self.masks[1]])
    }
    fn words(&self, key: &[u64; 2]) -> [u32; MAX_KEY_FIELDS] {
        self.tuple.raw_words(&ParsedTuple::raw(key))
    }
}

/// The raw form of `G` header groups ([`AclKey::read_raw`]).
pub(crate) struct RawForm<'a, const G: usize>(pub &'a AclKey);

macro_rules! raw_form {
    ($g:literal, $n:literal) => {
        impl CacheKey<$n> for RawForm<'_, $g> {
            #[inline(always)]
            fn read(&self, pool: &Pool, b: &Batch, i: usize) -> Option<[u64; $n]> {
                self.0.read_raw::<$g, $n>(pool.data(b.handle(i)), b.meta(i))
            }
            fn words(&self, key: &[u64; $n]) -> [u32; MAX_KEY_FIELDS] {
                self.0.raw_words(key)
            }
        }
    };
}
raw_form!(0, 1);
raw_form!(1, 3);
raw_form!(2, 5);

/// The word form, two key words a `u64` ([`AclKey::read`]).
pub(crate) struct WordForm<'a>(pub &'a AclKey);

impl<const K: usize> CacheKey<K> for WordForm<'_> {
    #[inline(always)]
    fn read(&self, pool: &Pool, b: &Batch, i: usize) -> Option<[u64; K]> {
        self.0.read::<K>(pool.data(b.handle(i)), b.meta(i))
    }
    fn words(&self, key: &[u64; K]) -> [u32; MAX_KEY_FIELDS] {
        unpack(key)
    }
}

/// Slots of a classifier table's result cache (a power of two), in pairs: a key may live in
/// either slot of its pair.
const ACL_CACHE_SLOTS: usize = 8192;

/// A direct-mapped cache of classifier results by exact key, in front of the decision trees, as
/// Open vSwitch's exact-match cache sits in front of its megaflow classifier: a packet of a
/// recently seen key costs a hash and a compare instead of a tree walk. It belongs to one
/// classifier build: when the live classifier changes (a commit, an adopted build, a clear) the
/// cache is emptied then and there, so it never answers for rules that changed.
///
/// A cache only pays when keys repeat. Where nearly every key is new (a table consulted on a
/// connection's first packet only, as the overlay's ACLs; a flood of new connections), every
/// lookup would pay a probe and an insert for nothing. So the cache watches its own hit rate:
/// after a batch in which at least 15 of 16 lookups missed it stands aside (the table
/// classifies directly) for [`RETRY_FIRST`] batches, then is tried on one. Each retry that
/// misses as much doubles the wait, up to [`RETRY_MAX`]; a batch through it that does not
/// brings the wait back to the first. (A retry costs its misses' probes and inserts: at every
/// 16th batch, about 25 instructions a packet of the cps scenario's two ACLs.)
pub(crate) struct AclCache {
    /// The classifier the entries came from (`Arc::as_ptr`), 0 for none.
    owner: usize,
    /// The slots, packed at the stride of the table's key form: slot `s` of a `K`-word key is
    /// words `s·(K+1) ..= s·(K+1) + K`, its key then its tag (0: empty; else [`FILLED`], the
    /// result in the low 32 bits, `MISS` for a miss, and [`CACHED_NOP`] when the caller
    /// marks the entry a no-op). A 5-tuple's slot is 24 bytes against 48 before, whatever the
    /// key: one slot in four spans two cache lines instead of one in two, so 1024 flows spread
    /// over the slots touch about 1,280 lines instead of about 1,540 (both more than a
    /// first-level data cache holds). A fixed length, so that an index masked to the slot
    /// count needs no bounds check.
    slots: Box<[u64; ACL_CACHE_SLOTS * SLOT_WORDS]>,
    /// `K + 1` of the key form the slots hold (0 before the first batch).
    stride: usize,
    /// Misses of the current batch.
    misses: u32,
    /// Batches left before the cache, standing aside, is tried again (0: in use).
    aside: u32,
    /// Batches it stands aside next time.
    wait: u32,
}

/// A slot's tag when it holds a key.
const FILLED: u64 = 1 << 32;
/// In a cached answer: the entry does nothing (`no_action`, `permit`), so a table that
/// finishes such hits in its classifier pass need not look the entry up.
pub(crate) const CACHED_NOP: u64 = 1 << 33;

/// Batches a cache that stood aside waits before it is first tried again.
const RETRY_FIRST: u32 = 16;
/// The longest wait (512 batches of 256 are about 17 ms at 8 Mpps).
const RETRY_MAX: u32 = 512;

impl AclCache {
    pub(crate) fn new() -> AclCache {
        AclCache {
            owner: 0,
            slots: vec![0; ACL_CACHE_SLOTS * SLOT_WORDS].into_boxed_slice().try_into().expect("ACL_CACHE_SLOTS slots"),
            stride: 0,
            misses: 0,
            aside: 0,
            wait: RETRY_FIRST,
        }
    }

    /// Whether this batch goes through the cache (once per batch, before its lookups).
    #[inline]
    pub(crate) fn in_use(&mut self) -> bool {
        self.misses = 0;
        if self.aside > 0 {
            self.aside -= 1;
        }
        self.aside == 0
    }

    /// After a batch of `looked` lookups through the cache: stand aside when nearly all missed.
    #[inline]
    pub(crate) fn judge(&mut self, looked: usize) {
        if looked >= 16 && self.misses as usize * 16 >= looked * 15 {
            self.aside = self.wait;
            self.wait = (self.wait * 2).min(RETRY_MAX);
        } else {
            self.wait = RETRY_FIRST;
        }
    }

    /// Keys of `K` words from here on (once per batch through the cache): a cache that held
    /// keys of another width is emptied.
    #[inline]
    pub(crate) fn hold<const K: usize>(&mut self) {
        const { assert!(K < SLOT_WORDS, "a key form as wide as the cache's slots leaves no room for the tag") };
        if self.stride != K + 1 {
            self.slots.fill(0);
            self.stride = K + 1;
        }
    }

    /// Empties the cache: the live classifier changed. (Checking the owner alone could be
    /// fooled by a new build allocated where a freed one was.) The keys too, not only the
    /// tags: a form whose keys are never 0 ([`CacheKey::NONZERO`]) is probed without a look
    /// at the tag.
    pub(crate) fn forget(&mut self) {
        self.slots.fill(0);
        self.owner = 0;
    }

    /// Empties the cache unless its entries came from `acl`.
    #[inline]
    pub(crate) fn belong_to(&mut self, acl: &Arc<Acl>) {
        let p = Arc::as_ptr(acl) as usize;
        if self.owner != p {
            self.forget();
            self.owner = p;
        }
    }

    /// Slot `s` of a `K`-word key: its key and its tag.
    #[inline(always)]
    fn slot<const K: usize>(&self, s: usize) -> (&[u64; K], u64) {
        let w = s * (K + 1);
        let (key, tag) = (self.slots[w..].first_chunk::<K>(), self.slots[w + K]);
        (key.unwrap_or(&[0; K]), tag)
    }

    /// The cached answer in slot `s` when it holds `key`; `nonzero`: `key` is not 0
    /// ([`CacheKey::NONZERO`]), so an empty slot's words differ from it.
    #[inline(always)]
    fn holds<const K: usize>(&self, s: usize, key: &[u64; K], nonzero: bool) -> Option<u64> {
        let (k, tag) = self.slot::<K>(s);
        // An empty slot (tag 0) never matches: by its tag, or, for a key never 0, by its key
        // words, which are 0 in an empty slot. Word by word, in registers (an array compare
        // took the key through the stack).
        let differ = k.iter().zip(key).fold(0, |d, (a, b)| d | (a ^ b));
        ((nonzero || tag != 0) && differ == 0).then_some(tag)
    }

    /// The cached answer for `key` (by value, so that a key of two words stays in registers)
    /// as a tag: the entry index or `MISS` in the low 32 bits, with [`CACHED_NOP`] when
    /// `classify` said the entry does nothing (the caller says so only when it finishes such
    /// hits itself). `K` words of a word key ([`AclKey::read`]) or a raw key
    /// ([`AclKey::read_raw`]). On a miss `classify` gives the classifier's answer (its owner's)
    /// and whether the entry does nothing; it is one reference, made once per batch, so that
    /// what it needs is not kept in registers through the lookup loop. A key may live in two
    /// pairs of slots (two choices, from two parts of its hash): the first is looked at first,
    /// the second when the first does not hold it. A new key takes a free slot of its first
    /// pair, else of its second, else the first pair's first slot, whose key moves to the
    /// second (dropping the one there). With one pair per key, three keys of one pair took
    /// turns evicting each other: 1024 flows missed 4.3 % of the time in 8192 slots.
    /// `nonzero`: the key is never 0 ([`CacheKey::NONZERO`]).
    #[inline(always)]
    pub(crate) fn classify<const K: usize>(&mut self, key: [u64; K], nonzero: bool, classify: &impl Fn(&[u64; K]) -> (u32, bool)) -> u64 {
        let (i, j) = pairs(&key);
        if let Some(t) = self.holds(i, &key, nonzero).or_else(|| self.holds(i | 1, &key, nonzero)) {
            return t;
        }
        self.second(key, classify, i, j)
    }

    /// A key not in its first pair `i`: its second pair `j`, else a miss.
    #[inline(never)]
    fn second<const K: usize>(&mut self, key: [u64; K], classify: &impl Fn(&[u64; K]) -> (u32, bool), i: usize, j: usize) -> u64 {
        if let Some(t) = self.holds(j, &key, false).or_else(|| self.holds(j | 1, &key, false)) {
            return t;
        }
        let (r, nop) = classify(&key);
        let tag = FILLED | u64::from(r) | if r != MISS && nop { CACHED_NOP } else { 0 };
        self.fill(&key, tag, i, j);
        tag
    }

    /// A cache miss: stores `key` and its `tag` in pair `i` or `j`.
    #[cold]
    #[inline(never)]
    fn fill<const K: usize>(&mut self, key: &[u64; K], tag: u64, i: usize, j: usize) {
        self.misses += 1;
        let s = [i, i | 1, j, j | 1].into_iter().find(|&s| self.slot::<K>(s).1 == 0).unwrap_or_else(|| {
            // Both pairs full: the first slot's key moves to the second.
            let w = i * (K + 1);
            self.slots.copy_within(w..w + K + 1, w + K + 1);
            i
        });
        let w = s * (K + 1);
        self.slots[w..w + K].copy_from_slice(key);
        self.slots[w + K] = tag;
    }
}

/// The first slots of a key's two pairs.
#[inline(always)]
fn pairs<const K: usize>(key: &[u64; K]) -> (usize, usize) {
    let h = slot_hash(key);
    (h as usize & (ACL_CACHE_SLOTS - 2), (h >> 16) as usize & (ACL_CACHE_SLOTS - 2))
}

/// A key's 32-bit slot hash: CRC-32C over its words, one instruction a word on x86-64
/// ([`fastpath_packet::prefetch::crc32c_u64`]), as DPDK's `rte_hash` hashes its keys by
/// default. A 32-bit CRC tells apart any two inputs that differ only within 32 consecutive
/// bits (it detects every burst error that long), so keys that differ in one address or in
/// the ports never share a hash, and addresses handed out in sequence spread over the slots.
/// A folded 128-bit multiply took about 6 instructions more a packet of the switch's ACL. Keys
/// crafted to share slots cost their sender cache misses, which the classifier answers: the
/// cache needs no secret seed.
#[inline(always)]
fn slot_hash<const K: usize>(key: &[u64; K]) -> u32 {
    key.iter().fold(0, |h, &w| fastpath_packet::prefetch::crc32c_u64(h, w))
}

/// `u64`s of a slot at most: the widest key (a raw key's two windows and metadata word) and
/// its tag.
const SLOT_WORDS: usize = 5 + 1;

/// The key words of a word key (as [`AclKey::read`] gives it).
#[inline]
pub(crate) fn unpack<const K: usize>(key: &[u64; K]) -> [u32; MAX_KEY_FIELDS] {
    std::array::from_fn(|k| key.get(k / 2).map_or(0, |w| (w >> (32 * (k & 1))) as u32))
}

/// The classifier's answer for the first `nf` of `words`, uncached.
#[inline]
pub(crate) fn classify_words(acl: &Acl, words: &[u32; MAX_KEY_FIELDS], nf: usize) -> Option<u32> {
    const _: () = assert!(MAX_KEY_FIELDS == fastpath_tables::acl::KEY_WORDS);
    acl.classify_words(words, nf).map(|(a, _)| a)
}

/// Words of the longest key in `u64`s (two key words each).
const MEMO_WORDS: usize = MAX_KEY_FIELDS / 2;

/// Classifier keys one table read for the next table of the batch, when both read the same key
/// and nothing between them can change it (the overlay's `acl_in` then `acl_out`, on a
/// connection's first packet: the build decides, [`crate::build::special::share_acl_keys`]).
/// The second table then takes each packet's key from here instead of reading the packet
/// again (`AclKey::read`, about 110 instructions for the 4-field key). The parser's records of
/// the 5-tuple ([`ParsedTuple`]) are vouched for here the same way, as stage 0's, though they
/// lie in the batch.
///
/// It holds keys of one batch only: it is emptied when a batch starts, and the reader checks
/// that the keys came from its own writer and cover every lane it runs on (a writer that went
/// through its cache, or did not run, wrote nothing: the reader reads the packets itself).
pub struct KeyMemo {
    /// Stage that wrote the keys (`usize::MAX`: none in this batch).
    from: usize,
    /// Lanes with a key here; `missed`: of those, the lanes whose key missed (a field absent).
    lanes: Lanes,
    missed: Lanes,
    keys: Box<[[u64; MEMO_WORDS]; BATCH_MAX]>,
    /// Whether the parser records its 5-tuples here ([`KeyMemo::open`]).
    open: bool,
}

impl Default for KeyMemo {
    fn default() -> Self {
        KeyMemo { from: usize::MAX, lanes: Lanes::NONE, missed: Lanes::NONE, keys: Box::new([[0; MEMO_WORDS]; BATCH_MAX]), open: false }
    }
}

impl KeyMemo {
    /// Forgets the keys (a new batch).
    #[inline]
    pub fn clear(&mut self) {
        self.from = usize::MAX;
    }

    /// Starts stage `from`'s keys of `lanes` for this batch (replacing any other's); each lane's
    /// key is then [`KeyMemo::put`].
    #[inline]
    pub(crate) fn begin(&mut self, from: usize, lanes: Lanes) {
        self.from = from;
        self.lanes = lanes;
        self.missed = Lanes::NONE;
    }

    /// Records lane `i`'s key (`None`: it missed). After [`KeyMemo::begin`].
    #[inline(always)]
    pub(crate) fn put<const K: usize>(&mut self, i: usize, key: Option<&[u64; K]>) {
        match key {
            Some(k) => {
                if let Some(w) = self.keys[i % BATCH_MAX].first_chunk_mut::<K>() {
                    *w = *k;
                }
            }
            None => self.missed.insert(i),
        }
    }

    /// Whether stage `from` recorded a key for every lane of `lanes` in this batch.
    #[inline]
    pub(crate) fn covers(&self, from: usize, lanes: Lanes) -> bool {
        self.from == from && lanes.and_not(self.lanes).is_empty()
    }

    /// Whether the parser may record its 5-tuples ([`ParsedTuple`]): only while a batch's
    /// ingress runs (the egress parses its packets again, and no table reads records there).
    #[inline]
    pub(crate) fn open(&self) -> bool {
        self.open
    }

    /// Opens (`true`, an ingress starts) or closes the parser's records.
    #[inline]
    pub(crate) fn set_open(&mut self, open: bool) {
        self.open = open;
    }

    /// Lane `i`'s recorded key (`None`: it missed); only for lanes [`KeyMemo::covers`] vouched for.
    #[inline(always)]
    pub(crate) fn get<const K: usize>(&self, i: usize) -> Option<[u64; K]> {
        if self.missed.contains(i) {
            return None;
        }
        self.keys[i % BATCH_MAX].first_chunk::<K>().copied()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use fastpath_packet::{Hdr, Meta};
    use fastpath_tables::acl::{AclConfig, AclRule, FieldMatch};

    /// An IPv4 header word at `byte` (the addresses at 12 and 16).
    pub(crate) fn v4(byte: u16) -> Extract {
        Extract::Be32 { slot: Slot::L3, byte, needs: HdrSet::EMPTY.with(Hdr::Ipv4), alt: HdrSet::EMPTY }
    }

    /// The switch's key: port, source, destination, protocol, destination port (a range).
    pub(crate) fn five_tuple() -> Vec<(Extract, u8, bool)> {
        let dport = Extract::Be16 { slot: Slot::L4, byte: 2, needs: HdrSet::EMPTY.with(Hdr::Udp), alt: HdrSet::EMPTY.with(Hdr::Tcp) };
        let proto = Extract::Short { slot: Slot::L3, byte: 9, n: 1, needs: HdrSet::EMPTY.with(Hdr::Ipv4), alt: HdrSet::EMPTY };
        vec![(Extract::InPort, 9, false), (v4(12), 32, false), (v4(16), 32, false), (proto, 8, false), (dport, 16, true)]
    }

    /// A 64-byte UDP frame's metadata and bytes: L3 at 14, L4 at 34.
    fn frame(udp: bool) -> (Vec<u8>, Meta) {
        let mut d = vec![0u8; 64];
        d[14 + 9] = 17;
        d[14 + 12..14 + 16].copy_from_slice(&[10, 0, 0, 1]);
        d[14 + 16..14 + 20].copy_from_slice(&[10, 0, 0, 2]);
        d[34 + 2..34 + 4].copy_from_slice(&[0x12, 0x34]);
        let mut m = Meta::arrived(3);
        m.valid = HdrSet::EMPTY.with(Hdr::Eth).with(Hdr::Ipv4);
        if udp {
            m.valid.insert(Hdr::Udp);
        }
        m.set_offset(Slot::L3, 14);
        m.set_offset(Slot::L4, 34);
        (d, m)
    }

    #[test]
    fn the_five_tuple_is_read_in_two_header_groups() {
        let k = AclKey::new(&five_tuple()).expect("a uniform key");
        assert_eq!((k.ng, k.ports, k.fields()), (2, 1, 5));
        let (d, m) = frame(true);
        let key = k.read::<3>(&d, &m).expect("all headers there");
        assert_eq!(key, [3 | 0x0a00_0001 << 32, 0x0a00_0002 | 17 << 32, 0x1234]);
        // No L4 header: the range field reads 0; no IPv4 header: the key misses.
        let (d, mut m) = frame(false);
        assert_eq!(k.read::<3>(&d, &m).map(|k| k[2]), Some(0));
        m.valid = HdrSet::EMPTY.with(Hdr::Eth);
        assert_eq!(k.read::<3>(&d, &m), None);
    }

    #[test]
    fn near_the_frame_end_words_are_read_byte_by_byte_or_miss() {
        let k = AclKey::new(&five_tuple()).expect("a uniform key");
        let (d, m) = frame(true);
        let whole = k.read::<3>(&d, &m);
        // 38 bytes: less than a window after L4 + 2, but the port's bytes are there.
        assert_eq!(k.read::<3>(&d[..38], &m), whole);
        // 37: the destination port is cut short, so the key misses.
        assert_eq!(k.read::<3>(&d[..37], &m), None);
    }

    /// The raw form gives the same key words as the word form, on any frame (cut anywhere,
    /// with or without its L4 header), and two frames share a raw key exactly when they share
    /// the key words.
    #[test]
    fn raw_keys_are_the_word_keys() {
        use proptest::prelude::*;
        let k = AclKey::new(&five_tuple()).expect("a uniform key");
        assert_eq!(k.raw_groups(), Some(2));
        let mut runner = proptest::test_runner::TestRunner::default();
        let strat = (
            proptest::collection::vec(any::<u8>(), 64),
            14usize..=64,
            any::<bool>(),
            any::<u16>(),
            proptest::collection::vec(any::<u8>(), 64),
            14usize..=64,
        );
        runner
            .run(&strat, |(bytes, cut, udp, port, bytes2, cut2)| {
                let (_, mut m) = frame(udp);
                m.in_port = port;
                let words = k.read::<3>(&bytes[..cut], &m).map(|w| unpack(&w));
                let raw = k.read_raw::<2, 5>(&bytes[..cut], &m);
                prop_assert_eq!(raw.map(|r| k.raw_words(&r)), words);
                let raw2 = k.read_raw::<2, 5>(&bytes2[..cut2], &m);
                let words2 = k.read::<3>(&bytes2[..cut2], &m).map(|w| unpack(&w));
                prop_assert_eq!(raw == raw2, words == words2);
                Ok(())
            })
            .expect("raw and word keys agree");
        // The key only: bytes outside its words do not enter the raw key.
        let (mut d, m) = frame(true);
        let before = k.read_raw::<2, 5>(&d, &m);
        d[14 + 10] ^= 0xff; // the IPv4 checksum
        d[34] ^= 0xff; // the source port
        assert_eq!(k.read_raw::<2, 5>(&d, &m), before);
    }

    /// The 5-tuple reader gives the group reader's key on any frame (cut anywhere, with or
    /// without its IPv4 and L4 headers, ports read as a range or not), for the keys it takes:
    /// the overlay's (source, destination, destination port, protocol), the switch's (port
    /// first) and the full 5-tuple; keys with other fields keep the group reader, and so do
    /// keys with a register, whose tuple form is for the cache's raw keys only.
    #[test]
    fn five_tuple_keys_read_as_the_groups_do() {
        use proptest::prelude::*;
        let l4 = |byte, range| {
            let x = Extract::Be16 { slot: Slot::L4, byte, needs: HdrSet::EMPTY.with(Hdr::Udp), alt: HdrSet::EMPTY.with(Hdr::Tcp) };
            (x, 16, range)
        };
        let proto = (Extract::Short { slot: Slot::L3, byte: 9, n: 1, needs: HdrSet::EMPTY.with(Hdr::Ipv4), alt: HdrSet::EMPTY }, 8, false);
        let (src, dst) = ((v4(12), 32, false), (v4(16), 32, false));
        let keys = [
            vec![src, dst, l4(2, true), proto],
            five_tuple(),
            vec![proto, dst, l4(0, false), src, l4(2, false)],
            vec![dst, (Extract::InPort, 9, false)],
        ];
        for fields in &keys {
            let k = AclKey::new(fields).expect("a uniform key");
            assert!(k.word_tuple.is_some(), "{fields:?}");
            let mut runner = proptest::test_runner::TestRunner::default();
            let strat = (proptest::collection::vec(any::<u8>(), 64), 0usize..=64, any::<bool>(), any::<bool>(), any::<u16>());
            runner
                .run(&strat, |(bytes, cut, ip, udp, port)| {
                    let (_, mut m) = frame(udp);
                    m.in_port = port;
                    if !ip {
                        m.valid = HdrSet::EMPTY.with(Hdr::Eth);
                    }
                    let t = k.word_tuple.as_ref().expect("tuple");
                    prop_assert_eq!(k.read_tuple::<3>(t, &bytes[..cut], &m), k.read_groups::<3>(&bytes[..cut], &m));
                    Ok(())
                })
                .expect("the tuple and group readers agree");
        }
        // Not a 5-tuple: an address at another offset, a part twice, a register with both
        // addresses, two registers, a metadata field that is not a register.
        assert!(AclKey::new(&[(v4(0), 32, false), (v4(12), 32, false)]).expect("uniform").tuple.is_none());
        assert!(AclKey::new(&[src, dst, src]).expect("uniform").tuple.is_none());
        assert!(AclKey::new(&[src, dst, (Extract::Reg(1), 8, false)]).expect("uniform").tuple.is_none());
        assert!(AclKey::new(&[proto, (Extract::Reg(1), 8, false), (Extract::Reg(2), 8, false)]).expect("uniform").tuple.is_none());
        assert!(AclKey::new(&[proto, (Extract::Meta(crate::ir::MetaField::Color), 8, false)]).expect("uniform").tuple.is_none());
        // A register where an address is missing: a tuple form for the cache, not for words.
        for fields in [
            vec![(Extract::Reg(2), 8, false), proto, l4(2, true)],
            vec![(Extract::InPort, 9, false), src, (Extract::Reg(0), 32, false)],
            vec![dst, (Extract::Reg(4), 12, false), l4(0, true)],
        ] {
            let k = AclKey::new(&fields).expect("uniform");
            assert!(k.tuple.is_some() && k.word_tuple.is_none(), "{fields:?}");
        }
    }

    /// The 5-tuple's raw form gives the word form's key words, on any frame (cut anywhere,
    /// with or without its IPv4 and L4 headers, any register values), and a frame with one
    /// byte or one register changed keeps its raw key exactly when it keeps its key words:
    /// parts outside the key (the source port of the switch's key, both ports of a key
    /// without them, a register's bits past its width, other registers) do not enter it.
    #[test]
    fn tuple_raw_keys_are_the_word_keys() {
        use proptest::prelude::*;
        let sport = Extract::Be16 { slot: Slot::L4, byte: 0, needs: HdrSet::EMPTY.with(Hdr::Udp), alt: HdrSet::EMPTY.with(Hdr::Tcp) };
        let proto = (Extract::Short { slot: Slot::L3, byte: 9, n: 1, needs: HdrSet::EMPTY.with(Hdr::Ipv4), alt: HdrSet::EMPTY }, 8, false);
        let dport =
            (Extract::Be16 { slot: Slot::L4, byte: 2, needs: HdrSet::EMPTY.with(Hdr::Udp), alt: HdrSet::EMPTY.with(Hdr::Tcp) }, 16, true);
        let keys = [
            five_tuple(),
            vec![(v4(16), 32, false), (Extract::InPort, 9, false)],
            vec![(sport, 16, false), (v4(12), 32, true)],
            // vbng's class_acl: ACL profile, protocol, destination port.
            vec![(Extract::Reg(2), 8, false), proto, dport],
            vec![(v4(16), 32, false), (Extract::Reg(0), 32, false), (Extract::InPort, 9, false)],
            vec![(Extract::Reg(4), 3, false), (v4(12), 32, true)],
        ];
        for fields in &keys {
            let k = AclKey::new(fields).expect("a uniform key");
            let t = k.tuple().expect("a 5-tuple key");
            let frame_strat =
                || (proptest::collection::vec(any::<u8>(), 64), 0usize..=64, any::<bool>(), any::<bool>(), any::<u16>(), any::<[u32; 5]>());
            let mut runner = proptest::test_runner::TestRunner::default();
            runner
                .run(&(frame_strat(), 0usize..69, 1u8..), |(a, at, flip)| {
                    // The same frame with one byte or register changed, in or out of the key.
                    let mut b = a.clone();
                    match at.checked_sub(64) {
                        None => b.0[at] ^= flip,
                        Some(r) => b.5[r] ^= u32::from(flip) << (at % 4 * 8),
                    }
                    let read = |(bytes, cut, ip, udp, port, regs): &(Vec<u8>, usize, bool, bool, u16, [u32; 5])| {
                        let (_, mut m) = frame(*udp);
                        m.in_port = *port;
                        m.regs = *regs;
                        if !ip {
                            m.valid = HdrSet::EMPTY.with(Hdr::Eth);
                        }
                        let words = k.read::<4>(&bytes[..*cut], &m).map(|w| unpack(&w));
                        let raw = if t.has_reg() {
                            t.read_raw::<true>(&k, &bytes[..*cut], &m)
                        } else {
                            t.read_raw::<false>(&k, &bytes[..*cut], &m)
                        };
                        (raw, words)
                    };
                    let ((raw_a, words_a), (raw_b, words_b)) = (read(&a), read(&b));
                    prop_assert_eq!(raw_a.map(|r| t.raw_words(&r)), words_a);
                    prop_assert_eq!(raw_a == raw_b, words_a == words_b);
                    Ok(())
                })
                .expect("raw and word keys agree");
        }
        // The switch's key: a frame's source port and checksum stay out of it.
        let k = AclKey::new(&five_tuple()).expect("a uniform key");
        let t = k.tuple().expect("a 5-tuple key");
        let (mut d, m) = frame(true);
        let before = t.read_raw::<false>(&k, &d, &m);
        assert_eq!(before, Some([0x0a00_0001_0a00_0002, 3 << 40 | 17 << 32 | 0x1234]));
        d[14 + 10] ^= 0xff;
        d[34] ^= 0xff;
        assert_eq!(t.read_raw::<false>(&k, &d, &m), before);
        // vbng's key: the register where the addresses would be, in the half the key lacks.
        let k = AclKey::new(&[(Extract::Reg(2), 8, false), proto, dport]).expect("a uniform key");
        let t = k.tuple().expect("a 5-tuple key");
        let mut m = m;
        m.regs[2] = 0x1_07;
        assert_eq!(t.read_raw::<true>(&k, &d, &m), Some([7, 17 << 32 | 0x1234]));
    }

    #[test]
    fn words_more_than_a_window_apart_are_separate_groups() {
        let k = AclKey::new(&[(v4(0), 32, false), (v4(12), 32, false), (v4(16), 32, false)]).expect("uniform");
        assert_eq!(k.ng, 2);
        assert!(AclKey::new(&[(Extract::Be128 { slot: Slot::L3, byte: 8, needs: HdrSet::EMPTY }, 128, false)]).is_none());
        // A register keeps to its width, as the classifier's chunk does.
        let k = AclKey::new(&[(Extract::Reg(1), 4, false)]).expect("uniform");
        let (d, mut m) = frame(true);
        m.regs[1] = 0x1f;
        assert_eq!(k.read::<1>(&d, &m), Some([0xf]));
    }

    #[test]
    fn the_cache_keeps_each_pair_s_newest_keys_its_width_and_the_no_op_flag() {
        // Entry 5 for key word 7, entry 6 (a no-op) for 9; every other key misses.
        let rules = [(7, 5), (9, 6)].map(|(k, a)| AclRule { priority: a, fields: vec![FieldMatch::exact(k)], action: a });
        let acl = Arc::new(Acl::build(&AclConfig::new(vec![32]), &rules).expect("builds"));
        let mut c = AclCache::new();
        c.belong_to(&acl);
        // Says yes for anything but entry 5: a miss is not an entry, whatever it says.
        let nop = |r: u32| r != 5;
        let answer = |k: &[u64; 2]| {
            let r = classify_words(&acl, &unpack(k), 1).unwrap_or(MISS);
            (r, nop(r))
        };
        let answer1 = |k: &[u64; 1]| (classify_words(&acl, &unpack(k), 1).unwrap_or(MISS), false);
        let look = |c: &mut AclCache, key: [u64; 2]| {
            c.hold::<2>();
            let misses = c.misses;
            let t = c.classify(key, false, &answer);
            (t, c.misses > misses)
        };
        assert_eq!(look(&mut c, [7, 0]), (FILLED | 5, true));
        assert_eq!(look(&mut c, [7, 0]), (FILLED | 5, false), "cached");
        assert_eq!(look(&mut c, [9, 0]), (FILLED | CACHED_NOP | 6, true));
        assert_eq!(look(&mut c, [9, 0]), (FILLED | CACHED_NOP | 6, false), "cached, with the no-op flag");
        assert_eq!(look(&mut c, [8, 0]), (FILLED | u64::from(MISS), true), "a miss is cached too, never as a no-op");
        // A key `x` whose four slots are all taken: two keys of its first pair, then two whose
        // first pair is its second.
        let key = |n: u64| [1000 + n, 1];
        let (i, j) = pairs(&key(0));
        let with_first = |p: usize, skip: usize| (1..).map(key).filter(|k| pairs(k).0 == p).nth(skip).expect("a key");
        let [a, b, d, e] = [with_first(i, 0), with_first(i, 1), with_first(j, 0), with_first(j, 1)];
        for k in [a, b, d, e] {
            assert!(look(&mut c, k).1);
        }
        for k in [a, b, d, e] {
            assert!(!look(&mut c, k).1, "four slots, four keys: {k:?}");
        }
        // `x` goes to its first pair's first slot; the key there moves to the second, and the
        // one that was there is gone. The second pair is untouched.
        assert!(look(&mut c, key(0)).1);
        let [x_missed, moved_missed, dropped_missed] = [key(0), a, b].map(|k| look(&mut c, k).1);
        assert!(!x_missed && !moved_missed, "the new key and the first slot's stay");
        assert!(dropped_missed, "the second slot's key was dropped");
        assert!(!look(&mut c, d).1 && !look(&mut c, e).1);
        // Keys of another width empty the cache first: a one-word key is not answered from
        // two-word slots.
        c.hold::<1>();
        assert!(c.slots.iter().all(|&w| w == 0));
        let misses = c.misses;
        assert_eq!(c.classify([7], false, &answer1), FILLED | 5);
        assert_eq!(c.misses, misses + 1);
        // A new classifier empties it too.
        c.forget();
        let misses = c.misses;
        assert_eq!(c.classify([7], false, &answer1), FILLED | 5);
        assert_eq!(c.misses, misses + 1);
        // Keys never 0 are probed without the tag: after a new classifier, the slot that held
        // one must not answer it (with the tag alone cleared, it gave tag 0, entry 0).
        c.hold::<2>();
        assert_eq!(c.classify([7, 1 << 63], true, &answer), FILLED | 5);
        c.forget();
        let misses = c.misses;
        assert_eq!(c.classify([7, 1 << 63], true, &answer), FILLED | 5);
        assert_eq!(c.misses, misses + 1);
    }

    #[test]
    fn the_cache_stands_aside_while_keys_do_not_repeat_and_comes_back() {
        let rule = AclRule { priority: 1, fields: vec![FieldMatch::exact(7)], action: 5 };
        let acl = Arc::new(Acl::build(&AclConfig::new(vec![32]), &[rule]).expect("builds"));
        let mut c = AclCache::new();
        c.belong_to(&acl);
        let answer = |k: &[u64; 1]| (classify_words(&acl, &unpack(k), 1).unwrap_or(MISS), false);
        let batch = |c: &mut AclCache, first: u64| {
            let used = c.in_use();
            c.hold::<1>();
            if used {
                for k in first..first + 32 {
                    assert_eq!(c.classify([k], false, &answer) as u32, if k == 7 { 5 } else { MISS });
                }
                c.judge(32);
            }
            used
        };
        // New keys every batch: after each batch through it the cache stands aside, for
        // RETRY_FIRST - 1 batches, then twice as long after each retry, up to RETRY_MAX.
        let flood = |c: &mut AclCache, next: &mut u64, waits: &[u32]| {
            for &w in waits {
                assert!(batch(c, *next));
                *next += 32;
                for _ in 0..w - 1 {
                    assert!(!batch(c, *next));
                    *next += 32;
                }
            }
        };
        let mut next = 100;
        flood(&mut c, &mut next, &[16, 32, 64, 128, 256, 512, 512]);
        // Keys that come back (those of its last batch through it): the retry hits them, it
        // stays, and the wait starts again from the first.
        let back = next - 32 * u64::from(RETRY_MAX);
        assert!(batch(&mut c, back));
        assert_eq!(c.misses, 0);
        assert!(batch(&mut c, back));
        assert_eq!(c.misses, 0);
        flood(&mut c, &mut next, &[16, 32]);
    }
}
