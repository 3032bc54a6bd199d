//! Action primitives: the short sequences that table actions and control blocks run on a packet.
//!
//! A compiled [`Prim`] has every name resolved: fields are [`FieldRef`]s, parameters are indices
//! into the entry's argument array, objects (meters, counters) are indices into [`Objects`].
//! [`apply`] runs one primitive on one packet; callers loop over a batch's lanes.

use crate::field::set_ct_verdict;
use crate::ir::{FieldRef, Operand, Prim, MAX_ARGS};
use crate::objects::Objects;
use fastpath_packet::{Batch, DropReason, Hdr, HdrSet, Pool, PuntReason, Slot};

impl Operand {
    /// The operand's value for this packet (0 for a field the packet lacks).
    #[inline]
    pub fn value(&self, args: &[u128; MAX_ARGS], data: &[u8], m: &fastpath_packet::Meta) -> u128 {
        match self {
            Operand::Const(v) => *v,
            Operand::Arg(a) => args[usize::from(*a) % MAX_ARGS],
            Operand::Field(f) => f.read(data, m).unwrap_or(0),
        }
    }
}

impl Prim {
    /// The primitive's spec name (trace and `show plan`).
    pub fn name(&self) -> &'static str {
        match self {
            Prim::Forward(_) => "forward",
            Prim::Drop(_) => "drop",
            Prim::ToControl => "to_control",
            Prim::Set(..) => "set",
            Prim::Swap(..) => "swap",
            Prim::TtlDec => "ttl_dec",
            Prim::PushVlan(..) => "push_vlan",
            Prim::PopVlan => "pop_vlan",
            Prim::Count(..) => "count",
            Prim::Meter(..) => "meter",
            Prim::VxlanDecap => "vxlan_decap",
            Prim::VxlanEncap(_) => "vxlan_encap",
            Prim::Hash => "hash",
            Prim::CtCommit(..) => "ct_commit",
            Prim::CtLoad(_) => "ct_load",
        }
    }
}

/// Where an action runs: the packet's slot in the batch and the per-stage drop counters.
pub struct Ctx<'a> {
    /// Per-reason drop counters of the running stage.
    pub drops: &'a mut [u64; DropReason::COUNT],
    /// Meters and counters.
    pub objects: &'a mut Objects,
    /// Time of this batch.
    pub now_ns: u64,
}

/// Runs `p` on slot `i`. Returns false when the packet stopped (dropped or punted).
#[inline]
pub fn apply(p: &Prim, args: &[u128; MAX_ARGS], pool: &mut Pool, b: &mut Batch, i: usize, cx: &mut Ctx<'_>) -> bool {
    let h = b.handle(i);
    match p {
        Prim::Forward(op) => {
            let port = op.value(args, pool.data(h), b.meta(i));
            b.meta_mut(i).out_port = port as u16;
        }
        Prim::Drop(r) => {
            drop_pkt(b, i, *r, cx);
            return false;
        }
        Prim::ToControl => {
            b.punt(i, PuntReason::ACTION);
            return false;
        }
        Prim::Set(f, op) => {
            let v = op.value(args, pool.data(h), b.meta(i));
            let mut m = *b.meta(i);
            f.write(pool.data_mut(h), &mut m, v);
            *b.meta_mut(i) = m;
        }
        Prim::Swap(x, y) => swap(x, y, pool.data_mut(h), b, i),
        Prim::TtlDec => {
            if !ttl_dec(pool.data_mut(h), b.meta(i)) {
                drop_pkt(b, i, DropReason::TtlExpired, cx);
                return false;
            }
        }
        Prim::PushVlan(vid, pcp, tpid) => {
            let data = pool.data(h);
            let (vid, pcp) = (vid.value(args, data, b.meta(i)), pcp.value(args, data, b.meta(i)));
            if !push_vlan(pool, h, b, i, vid as u16, pcp as u8, *tpid) {
                drop_pkt(b, i, DropReason::NoHeadroom, cx);
                return false;
            }
        }
        Prim::PopVlan => pop_vlan(pool, h, b, i),
        Prim::Count(c, idx) => {
            let k = idx.value(args, pool.data(h), b.meta(i)) as usize;
            cx.objects.count(*c, k, pool.len(h) as u64);
        }
        Prim::Meter(mt, idx, drop_red) => {
            let k = idx.value(args, pool.data(h), b.meta(i)) as usize;
            let pre = b.meta(i).color;
            let color = cx.objects.meter(*mt, k, cx.now_ns, pool.len(h) as u32, pre);
            b.meta_mut(i).color = color;
            if *drop_red && color == 2 {
                drop_pkt(b, i, DropReason::MeterRed, cx);
                return false;
            }
        }
        Prim::VxlanDecap => {
            if !vxlan_decap(pool, h, b, i) {
                drop_pkt(b, i, DropReason::VxlanTruncated, cx);
                return false;
            }
        }
        Prim::VxlanEncap(ops) => {
            let (data, m) = (pool.data(h), b.meta(i));
            let v = ops.map(|o| o.value(args, data, m));
            let t =
                crate::stages::vxlan::Tunnel { dmac: v[0] as u64, smac: v[1] as u64, src: v[2] as u32, dst: v[3] as u32, vni: v[4] as u32 };
            if !crate::stages::vxlan::encap(pool, h, b.meta_mut(i), &t) {
                drop_pkt(b, i, DropReason::NoHeadroom, cx);
                return false;
            }
        }
        Prim::Hash => {
            if b.meta(i).hash == 0 {
                let x = crate::stages::vxlan::flow_hash(pool.data(h), b.meta(i));
                b.meta_mut(i).hash = x;
            }
        }
        Prim::CtCommit(ct, op) => {
            let v = op.value(args, pool.data(h), b.meta(i)) as u32 & 0xff;
            ct_commit(cx.objects, *ct, b.meta_mut(i), v);
        }
        Prim::CtLoad(ct) => {
            let m = b.meta_mut(i);
            set_ct_verdict(m, cx.objects.ct_verdict(*ct, m.flow));
        }
    }
    true
}

#[inline]
fn drop_pkt(b: &mut Batch, i: usize, r: DropReason, cx: &mut Ctx<'_>) {
    b.drop(i, r);
    cx.drops[r as usize] += 1;
}

fn swap(x: &FieldRef, y: &FieldRef, data: &mut [u8], b: &mut Batch, i: usize) {
    let mut m = *b.meta(i);
    let (Some(a), Some(c)) = (x.read(data, &m), y.read(data, &m)) else { return };
    x.write(data, &mut m, c);
    y.write(data, &mut m, a);
    *b.meta_mut(i) = m;
}

/// Decrements IPv4 TTL / IPv6 hop limit. False when it would reach zero (RFC 1812 §5.3.1: a
/// router "MUST NOT forward" a packet whose TTL is 0 or becomes 0).
#[inline]
pub fn ttl_dec(data: &mut [u8], m: &fastpath_packet::Meta) -> bool {
    let l3 = m.offset(Slot::L3);
    if m.valid.has(Hdr::Ipv4) {
        let Some(hdr) = fastpath_packet::window_mut::<12>(data, l3) else { return false };
        let ttl = hdr[8];
        if ttl <= 1 {
            return false;
        }
        hdr[8] = ttl - 1;
        // The word holding TTL (high byte) and protocol drops by 0x0100, so the checksum rises
        // by 0x0100 with the end-around carry, and a sum of 0xffff becomes 0 (as Linux's
        // `ip_decrease_ttl`). The same bytes as RFC 1624 eqn. 3 (`csum::update16`) for every HC,
        // TTL and protocol (the test below), in 4 instructions fewer than the complements.
        let c = u32::from(u16::from_be_bytes([hdr[10], hdr[11]])) + 0x0100;
        let c = c + u32::from(c >= 0xffff);
        hdr[10..12].copy_from_slice(&(c as u16).to_be_bytes());
        true
    } else if m.valid.has(Hdr::Ipv6) {
        let Some(hl) = data.get_mut(l3 + 7) else { return false };
        if *hl <= 1 {
            return false;
        }
        *hl -= 1;
        true
    } else {
        true
    }
}

/// Offsets of every slot that starts at or after `from` move by `delta` bytes.
fn shift_offsets(m: &mut fastpath_packet::Meta, from: usize, delta: isize) {
    for o in m.off.iter_mut() {
        if usize::from(*o) >= from {
            *o = (*o as isize + delta) as u16;
        }
    }
}

fn push_vlan(pool: &mut Pool, h: fastpath_packet::PktId, b: &mut Batch, i: usize, vid: u16, pcp: u8, tpid: u16) -> bool {
    let Some(f) = pool.prepend(h, 4) else { return false };
    if f.len() < 18 {
        return false;
    }
    f.copy_within(4..16, 0);
    let tci = (u16::from(pcp & 7) << 13) | (vid & 0x0fff);
    f[12..14].copy_from_slice(&tpid.to_be_bytes());
    f[14..16].copy_from_slice(&tci.to_be_bytes());
    let m = b.meta_mut(i);
    shift_offsets(m, 1, 4); // everything after the Ethernet start moves; Eth stays at 0
    if m.valid.has(Hdr::Vlan) {
        m.valid.insert(Hdr::Qinq);
        m.set_offset(Slot::Vlan1, m.offset(Slot::Vlan0));
    }
    m.valid.insert(Hdr::Vlan);
    m.set_offset(Slot::Vlan0, 12);
    true
}

fn pop_vlan(pool: &mut Pool, h: fastpath_packet::PktId, b: &mut Batch, i: usize) {
    if !b.meta(i).valid.has(Hdr::Vlan) {
        return;
    }
    let data = pool.data_mut(h);
    if data.len() < 18 {
        return;
    }
    data.copy_within(0..12, 4);
    pool.strip(h, 4);
    let m = b.meta_mut(i);
    shift_offsets(m, 13, -4);
    if m.valid.has(Hdr::Qinq) {
        m.valid.remove(Hdr::Qinq);
        m.set_offset(Slot::Vlan0, 12);
    } else {
        m.valid.remove(Hdr::Vlan);
    }
}

/// `ct_commit CT V`: verdict `v` (0..=255) cached in the packet's flow and in its `ct.verdict`.
#[inline]
pub(crate) fn ct_commit(objects: &mut Objects, ct: u16, m: &mut fastpath_packet::Meta, v: u32) {
    objects.ct_commit(ct, m.flow, v);
    set_ct_verdict(m, v);
}

/// `vxlan_decap` on slot `i`: false (changing nothing) when the packet has no VXLAN with an
/// inner Ethernet frame.
pub(crate) fn vxlan_decap(pool: &mut Pool, h: fastpath_packet::PktId, b: &mut Batch, i: usize) -> bool {
    let m = b.meta_mut(i);
    if !m.valid.has(Hdr::Vxlan) || !m.valid.has(Hdr::InnerEth) {
        return false;
    }
    let cut = m.offset(Slot::InnerEth);
    if !pool.strip(h, cut) {
        return false;
    }
    let (l3, l4) = (m.offset(Slot::InnerL3).saturating_sub(cut), m.offset(Slot::InnerL4).saturating_sub(cut));
    m.valid = decapped(m.valid);
    m.off = [0; Slot::COUNT];
    m.set_offset(Slot::L3, l3);
    m.set_offset(Slot::L4, l4);
    true
}

/// The headers a VXLAN frame with headers `v` has once decapsulated: Ethernet, and each inner
/// header as its outer kind (inner ICMP as ICMPv6 over inner IPv6). Shifts and masks on the
/// set's bits, where a loop over the pairs cost about 20 instructions a packet (callgrind,
/// `sdn-overlay`); the test holds it to that loop over every set.
#[inline]
fn decapped(v: HdrSet) -> HdrSet {
    const fn bit(h: Hdr) -> u32 {
        1 << h as u32
    }
    // Inner IPv4/IPv6 sit 8 bits above IPv4/IPv6, inner UDP/TCP 6 above UDP/TCP.
    const _: () = assert!(Hdr::InnerIpv4 as u32 == Hdr::Ipv4 as u32 + 8 && Hdr::InnerIpv6 as u32 == Hdr::Ipv6 as u32 + 8);
    const _: () = assert!(Hdr::InnerUdp as u32 == Hdr::Udp as u32 + 6 && Hdr::InnerTcp as u32 == Hdr::Tcp as u32 + 6);
    const _: () = assert!(Hdr::Icmp6 as u32 == Hdr::Icmp as u32 + 1);
    let x = v.0;
    let l3 = (x >> 8) & (bit(Hdr::Ipv4) | bit(Hdr::Ipv6));
    let l4 = (x >> 6) & (bit(Hdr::Udp) | bit(Hdr::Tcp));
    let v6 = (x >> Hdr::InnerIpv6 as u32) & 1;
    let icmp = ((x >> Hdr::InnerIcmp as u32) & 1) << (Hdr::Icmp as u32 + v6);
    HdrSet(bit(Hdr::Eth) | l3 | l4 | icmp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_packet::{csum, HdrSet, Meta};

    /// The decapsulated header set equals the pair-by-pair mapping for every set of headers.
    #[test]
    fn decapped_headers_are_the_inner_ones_as_outer_kinds() {
        let map = [(Hdr::InnerIpv4, Hdr::Ipv4), (Hdr::InnerIpv6, Hdr::Ipv6), (Hdr::InnerUdp, Hdr::Udp), (Hdr::InnerTcp, Hdr::Tcp)];
        for x in 0..1u32 << Hdr::ALL.len() {
            let v = HdrSet(x);
            let mut want = HdrSet::EMPTY.with(Hdr::Eth);
            for (inner, outer) in map {
                if v.has(inner) {
                    want.insert(outer);
                }
            }
            if v.has(Hdr::InnerIcmp) {
                want.insert(if v.has(Hdr::InnerIpv6) { Hdr::Icmp6 } else { Hdr::Icmp });
            }
            assert_eq!(decapped(v), want, "{x:#x}");
        }
    }

    /// `ttl_dec`'s constant-folded checksum update writes the same bytes as RFC 1624's general
    /// update (`csum::update16`) for every checksum, TTL and protocol.
    #[test]
    fn ttl_dec_checksum_matches_the_general_update() {
        let mut m = Meta::arrived(0);
        m.valid = HdrSet::EMPTY.with(Hdr::Ipv4);
        m.set_offset(Slot::L3, 0);
        for c in 0..=u16::MAX {
            for ttl in [2u8, 3, 64, 128, 255] {
                for proto in [0u8, 1, 6, 17, 255] {
                    let mut h = [0u8; 20];
                    h[8] = ttl;
                    h[9] = proto;
                    h[10..12].copy_from_slice(&c.to_be_bytes());
                    assert!(ttl_dec(&mut h, &m));
                    let old = u16::from_be_bytes([ttl, proto]);
                    let want = csum::update16(c, old, old - 0x0100);
                    assert_eq!(u16::from_be_bytes([h[10], h[11]]), want, "checksum {c:#06x} ttl {ttl} proto {proto}");
                    assert_eq!(h[8], ttl - 1);
                }
            }
        }
    }
}
