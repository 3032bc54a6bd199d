//! An exact key of several fields read a packet at a time ([`RowKey`]): vbng's upstream
//! session key (input port, S-VLAN, C-VLAN, source MAC) and any other of the input port,
//! registers and header fields of at most 8 bytes.
//!
//! Built column by column (a loop over the lanes per field, the field's extractor matched once
//! per batch), that key cost about 180 instructions a packet: each column pays again for the
//! packet's buffer, its metadata and the loop. Here every header field is the same operation
//! with other constants (an 8-byte big-endian load at the header's offset plus a byte offset,
//! a shift and a mask), so one loop over the packets runs them all without a jump on the
//! field's kind, each field ORed in at its place in the key.

use crate::field::Extract;
use crate::ir::MAX_KEY_FIELDS;
use fastpath_packet::{each_lane, Batch, HdrSet, Lanes, Meta, Pool, Slot, BATCH_MAX};

/// The key fields packed into one value (most significant first); `None` when one is missing.
/// The reference build's reader of every exact key, and [`RowKey`]'s near a frame's end.
pub(crate) fn key128(key: &[(Extract, u8, bool)], data: &[u8], m: &Meta) -> Option<u128> {
    let mut k = 0u128;
    for &(x, width, _) in key {
        let v = x.read(data, m)?;
        k = if width >= 128 { v } else { k << width | v };
    }
    Some(k)
}

/// A header field of at most 8 bytes, as the key reads it.
#[derive(Clone, Copy, Debug)]
struct HdrPart {
    slot: Slot,
    /// (16 bits, so that the sum with the header's offset cannot overflow: one bounds check.)
    byte: u16,
    /// Right shift of the 8 big-endian bytes at the field's first byte that leaves it.
    sh: u32,
    /// Its width's mask.
    mask: u64,
    /// Its bit position in the key (the widths of the fields after it).
    pos: u32,
    needs: HdrSet,
    alt: HdrSet,
}

/// A metadata field of the key: the input port (`reg` = `None`) or a register.
#[derive(Clone, Copy, Debug)]
struct MetaPart {
    reg: Option<usize>,
    pos: u32,
}

/// How a table reads a key of several fields a packet at a time: the value is the one
/// [`key128`] gives (each field shifted in after the ones before it, the first most
/// significant), `None` when a field's header is missing.
#[derive(Clone, Debug)]
pub(crate) struct RowKey {
    hdrs: [HdrPart; MAX_KEY_FIELDS],
    nh: usize,
    metas: [MetaPart; MAX_KEY_FIELDS],
    nm: usize,
    /// The fields, for a packet whose fields do not all lie 8 bytes before its end.
    key: Vec<(Extract, u8, bool)>,
}

impl RowKey {
    /// The reader of a key of these fields (extractor, width, range flag), when it has at
    /// least two, each the input port, a register or a header field of at most 8 bytes, and
    /// at most 4 header fields.
    pub(crate) fn new(key: &[(Extract, u8, bool)]) -> Option<RowKey> {
        if key.len() < 2 || key.len() > MAX_KEY_FIELDS {
            return None;
        }
        let none = HdrPart { slot: Slot::Eth, byte: 0, sh: 0, mask: 0, pos: 0, needs: HdrSet::EMPTY, alt: HdrSet::EMPTY };
        let mut rk = RowKey {
            hdrs: [none; MAX_KEY_FIELDS],
            nh: 0,
            metas: [MetaPart { reg: None, pos: 0 }; MAX_KEY_FIELDS],
            nm: 0,
            key: key.to_vec(),
        };
        let mut pos = 0u32;
        for &(x, width, _) in key.iter().rev() {
            if width >= 128 || pos >= 128 {
                return None;
            }
            let width_mask = u64::MAX >> (64 - u32::from(width.clamp(1, 64)));
            let hdr = |slot, byte: u16, n: u8, shift: u8, mask, needs, alt| HdrPart {
                slot,
                byte,
                sh: 64 - 8 * u32::from(n) + u32::from(shift),
                mask,
                pos,
                needs,
                alt,
            };
            let bytes_mask = |n: u8| u64::MAX >> (64 - 8 * u32::from(n));
            let part = match x {
                Extract::InPort | Extract::Reg(_) => {
                    rk.metas[rk.nm] = MetaPart { reg: if let Extract::Reg(r) = x { Some(usize::from(r)) } else { None }, pos };
                    rk.nm += 1;
                    None
                }
                Extract::Be16 { slot, byte, needs, alt } => Some(hdr(slot, byte, 2, 0, bytes_mask(2), needs, alt)),
                Extract::Be32 { slot, byte, needs, alt } => Some(hdr(slot, byte, 4, 0, bytes_mask(4), needs, alt)),
                Extract::Short { slot, byte, n: n @ 1..=8, needs, alt } => Some(hdr(slot, byte, n, 0, bytes_mask(n), needs, alt)),
                Extract::Bits { slot, byte, n: n @ 1..=8, shift, needs, alt, .. } if u32::from(shift) < 8 * u32::from(n) => {
                    Some(hdr(slot, byte, n, shift, width_mask, needs, alt))
                }
                _ => return None,
            };
            if let Some(p) = part {
                if rk.nh == 4 {
                    return None;
                }
                rk.hdrs[rk.nh] = p;
                rk.nh += 1;
            }
            pos += u32::from(width);
        }
        (rk.nh > 0).then_some(rk)
    }

    /// Each lane's key into `keys`; returns the lanes whose key is missing a field. Out of
    /// line: inlined into `TableStage::run_special`, vbng cost 1 instruction a packet more
    /// (647.7 against 646.7, `scripts/instructions -n 100000 vbng --subscribers 256000 --size
    /// 1400 --mix 8:1`).
    #[inline(never)]
    pub(crate) fn pass(&self, pool: &Pool, b: &Batch, lanes: Lanes, keys: &mut [u128; BATCH_MAX]) -> Lanes {
        let mut missing = Lanes::NONE;
        macro_rules! row {
            ($h:literal) => {
                each_lane!(i in lanes => {
                    match self.read::<$h>(pool.data(b.handle(i)), b.meta(i)) {
                        Some(k) => keys[i] = k,
                        None => missing.insert(i),
                    }
                })
            };
        }
        match self.nh {
            1 => row!(1),
            2 => row!(2),
            3 => row!(3),
            _ => row!(4),
        }
        missing
    }

    /// The key of one packet (`H`: its header fields, 1 to 4), `None` when a field's header is
    /// missing.
    #[inline(always)]
    pub(crate) fn read<const H: usize>(&self, d: &[u8], m: &Meta) -> Option<u128> {
        let mut k = 0u128;
        let mut ok = true;
        for p in &self.hdrs[..H] {
            ok &= m.valid.has_all(p.needs) || (p.alt != HdrSet::EMPTY && m.valid.has_all(p.alt));
            let at = m.offset(p.slot) + usize::from(p.byte);
            let Some(w) = fastpath_packet::window::<8>(d, at) else { return self.near_end(d, m) };
            k |= u128::from(u64::from_be_bytes(*w) >> (p.sh % 64) & p.mask) << (p.pos % 128);
        }
        if !ok {
            return None;
        }
        for p in &self.metas[..self.nm.min(MAX_KEY_FIELDS)] {
            let v = match p.reg {
                None => u32::from(m.in_port),
                Some(r) => m.regs.get(r).copied().unwrap_or(0),
            };
            k |= u128::from(v) << (p.pos % 128);
        }
        Some(k)
    }

    /// [`RowKey::read`] of a packet with a field in its last 8 bytes (or past them): field by
    /// field.
    #[cold]
    #[inline(never)]
    fn near_end(&self, d: &[u8], m: &Meta) -> Option<u128> {
        key128(&self.key, d, m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_packet::Hdr;
    use proptest::prelude::*;

    fn hs(h: &[Hdr]) -> HdrSet {
        h.iter().fold(HdrSet::EMPTY, |s, &h| s.with(h))
    }

    /// vbng's upstream session key: input port, S-VLAN id, C-VLAN id, source MAC.
    fn vbng_key() -> Vec<(Extract, u8, bool)> {
        let vid = |slot| Extract::Bits { slot, byte: 2, n: 2, shift: 0, width: 12, needs: hs(&[Hdr::Vlan]), alt: HdrSet::EMPTY };
        let mut q = vid(Slot::Vlan1);
        if let Extract::Bits { needs, .. } = &mut q {
            *needs = hs(&[Hdr::Qinq]);
        }
        vec![
            (Extract::InPort, 16, false),
            (vid(Slot::Vlan0), 12, false),
            (q, 12, false),
            (Extract::Short { slot: Slot::Eth, byte: 6, n: 6, needs: hs(&[Hdr::Eth]), alt: HdrSet::EMPTY }, 48, false),
        ]
    }

    /// The row reader gives the field-by-field key on any frame (cut anywhere, headers
    /// present or not, at any offsets, any port and registers), for vbng's key and keys with
    /// registers, 16- and 32-bit fields, a field with alternative headers, and widths that
    /// overlap (a register wider than its field).
    #[test]
    fn row_keys_are_the_field_keys() {
        let l4 = Extract::Be16 { slot: Slot::L4, byte: 2, needs: hs(&[Hdr::Udp]), alt: hs(&[Hdr::Tcp]) };
        let src = Extract::Be32 { slot: Slot::L3, byte: 12, needs: hs(&[Hdr::Ipv4]), alt: HdrSet::EMPTY };
        let dscp = Extract::Bits { slot: Slot::L3, byte: 1, n: 1, shift: 2, width: 6, needs: hs(&[Hdr::Ipv4]), alt: HdrSet::EMPTY };
        let keys = [
            vbng_key(),
            vec![(Extract::Reg(1), 8, false), (src, 32, false), (l4, 16, true)],
            vec![(src, 32, false), (Extract::Reg(4), 4, false), (dscp, 6, false), (Extract::InPort, 9, false)],
            vec![(l4, 16, false), (src, 32, false), (src, 32, false), (dscp, 6, false), (Extract::Reg(0), 32, false)],
        ];
        let all = [Hdr::Eth, Hdr::Vlan, Hdr::Qinq, Hdr::Ipv4, Hdr::Udp, Hdr::Tcp];
        for key in &keys {
            let rk = RowKey::new(key).expect("a row key");
            let strat = (
                proptest::collection::vec(any::<u8>(), 64),
                0usize..=64,
                proptest::collection::vec(any::<bool>(), all.len()),
                proptest::collection::vec(0u16..60, 5),
                any::<u16>(),
                any::<[u32; 5]>(),
            );
            proptest::test_runner::TestRunner::default()
                .run(&strat, |(bytes, cut, valid, offs, port, regs)| {
                    let mut m = Meta::arrived(port);
                    m.regs = regs;
                    m.valid = all.iter().zip(&valid).filter(|(_, &v)| v).fold(HdrSet::EMPTY, |s, (&h, _)| s.with(h));
                    for (s, &o) in [Slot::Eth, Slot::Vlan0, Slot::Vlan1, Slot::L3, Slot::L4].into_iter().zip(&offs) {
                        m.set_offset(s, usize::from(o));
                    }
                    let d = &bytes[..cut];
                    let row = match rk.nh {
                        1 => rk.read::<1>(d, &m),
                        2 => rk.read::<2>(d, &m),
                        3 => rk.read::<3>(d, &m),
                        _ => rk.read::<4>(d, &m),
                    };
                    prop_assert_eq!(row, key128(key, d, &m));
                    Ok(())
                })
                .expect("the row and field readers agree");
        }
    }

    #[test]
    fn which_keys_are_read_a_row_at_a_time() {
        let key = vbng_key();
        assert_eq!(RowKey::new(&key).expect("vbng's key").nh, 3);
        // One field, no header field, a field over 8 bytes, five header fields.
        assert!(RowKey::new(&key[..1]).is_none());
        assert!(RowKey::new(&[(Extract::InPort, 16, false), (Extract::Reg(0), 32, false)]).is_none());
        let v6 = Extract::Be128 { slot: Slot::L3, byte: 8, needs: hs(&[Hdr::Ipv6]) };
        assert!(RowKey::new(&[(Extract::InPort, 16, false), (v6, 128, false)]).is_none());
        let b = |byte| (Extract::Be16 { slot: Slot::L4, byte, needs: hs(&[Hdr::Udp]), alt: HdrSet::EMPTY }, 16, false);
        assert!(RowKey::new(&[b(0), b(2), b(4), b(6)]).is_some());
        assert!(RowKey::new(&[b(0), b(2), b(4), b(6), b(8)]).is_none());
    }
}
