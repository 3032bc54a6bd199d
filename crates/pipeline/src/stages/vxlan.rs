//! VXLAN encapsulation (RFC 7348) and the inner-flow hash that feeds its UDP source port.
//!
//! ```text
//!  headroom ◀── 50 bytes ──▶ │ old frame (becomes inner_eth …)
//!  ┌ Ethernet 14 ┬ IPv4 20 ┬ UDP 8 ┬ VXLAN 8 ┐
//!  │ dmac smac   │ DF ttl64│ sport │ I flag  │   sport = 0xC000 | hash[13:0]  (RFC 7348 §5:
//!  │ 0x0800      │ proto 17│ 4789  │ VNI<<8  │   entropy from the inner flow, ephemeral range)
//!  └─────────────┴─────────┴ csum 0┴─────────┘   UDP checksum 0 is allowed over IPv4 (§5)
//! ```
//! The outer headers of a tunnel are built once ([`EncapTemplate`]: the 50 bytes and the
//! ones'-complement sum of the IPv4 header without its length); per packet the template is copied
//! and the length, header checksum (one add, RFC 1071), UDP source port and length are written.
//! Metadata offsets move by 50: the old outer layers become the `inner_*` layers, so later
//! stages see the new outer headers and the tenant frame as inner.

use fastpath_packet::{csum, Hdr, HdrSet, Meta, PktId, Pool, Slot};

/// Bytes `encap` prepends: Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8.
pub const ENCAP_BYTES: usize = 50;
/// VXLAN's IANA UDP port (RFC 7348 §5).
pub const VXLAN_PORT: u16 = 4789;

/// One tunnel's outer header values (addresses right-aligned as the spec's values are).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tunnel {
    /// Outer destination MAC (48 bits).
    pub dmac: u64,
    /// Outer source MAC (48 bits).
    pub smac: u64,
    /// Outer source IPv4 address (the local VTEP).
    pub src: u32,
    /// Outer destination IPv4 address (the remote VTEP).
    pub dst: u32,
    /// VXLAN network identifier (24 bits).
    pub vni: u32,
}

/// The outer headers of one tunnel, built once (at entry insert time for table actions): the 50
/// bytes with every per-packet field zero, and the ones'-complement sum of the IPv4 header without
/// its length, so a packet's header checksum is one add (RFC 1071 / RFC 1624).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncapTemplate {
    bytes: [u8; ENCAP_BYTES],
    ip_sum: u16,
}

impl EncapTemplate {
    /// The template of tunnel `t`.
    pub fn new(t: &Tunnel) -> EncapTemplate {
        let mut o = [0u8; ENCAP_BYTES];
        o[0..6].copy_from_slice(&t.dmac.to_be_bytes()[2..]);
        o[6..12].copy_from_slice(&t.smac.to_be_bytes()[2..]);
        o[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut o[14..34];
        ip[0] = 0x45;
        ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&t.src.to_be_bytes());
        ip[16..20].copy_from_slice(&t.dst.to_be_bytes());
        let ip_sum = csum::sum(ip);
        o[36..38].copy_from_slice(&VXLAN_PORT.to_be_bytes());
        o[42] = 0x08;
        o[46..50].copy_from_slice(&(t.vni << 8).to_be_bytes());
        EncapTemplate { bytes: o, ip_sum }
    }
}

/// Prepends the outer headers of `t` to frame `h` and rewrites `m` so the old layers are the
/// inner ones. False, changing nothing, when the headroom is too small. Uses `m.hash` (computing
/// it from the 5-tuple when still 0) for the UDP source port.
#[inline]
pub fn encap(pool: &mut Pool, h: PktId, m: &mut Meta, t: &Tunnel) -> bool {
    encap_with(pool, h, m, &EncapTemplate::new(t))
}

/// [`encap`] from a prebuilt template: a 50-byte copy and four per-packet fields. Inlined into
/// the table's action pass: as a call it saved and restored five registers a packet (about 12
/// instructions of the overlay's 75 here).
#[inline(always)]
pub fn encap_with(pool: &mut Pool, h: PktId, m: &mut Meta, t: &EncapTemplate) -> bool {
    if m.hash == 0 {
        m.hash = flow_hash(pool.data(h), m);
    }
    let inner_len = pool.len(h);
    let Some(f) = pool.prepend(h, ENCAP_BYTES) else { return false };
    let Some(o) = f.first_chunk_mut::<ENCAP_BYTES>() else { return false };
    *o = t.bytes;
    let ip_len = (inner_len + 36) as u16;
    o[16..18].copy_from_slice(&ip_len.to_be_bytes());
    o[24..26].copy_from_slice(&csum::finish(csum::add(t.ip_sum, ip_len)).to_be_bytes());
    let sport = 0xc000 | (m.hash as u16 & 0x3fff);
    o[34..36].copy_from_slice(&sport.to_be_bytes());
    o[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    // Old outer layers become the inner ones.
    let old = *m;
    let mut valid = HdrSet::EMPTY.with(Hdr::Eth).with(Hdr::Ipv4).with(Hdr::Udp).with(Hdr::Vxlan).with(Hdr::InnerEth);
    let map = [(Hdr::Ipv4, Hdr::InnerIpv4), (Hdr::Ipv6, Hdr::InnerIpv6), (Hdr::Udp, Hdr::InnerUdp), (Hdr::Tcp, Hdr::InnerTcp)];
    for (outer, inner) in map {
        if old.valid.has(outer) {
            valid.insert(inner);
        }
    }
    if old.valid.has(Hdr::Icmp) || old.valid.has(Hdr::Icmp6) {
        valid.insert(Hdr::InnerIcmp);
    }
    m.valid = valid;
    m.l4_proto = 17;
    m.set_offset(Slot::Eth, 0);
    m.set_offset(Slot::Vlan0, 0);
    m.set_offset(Slot::Vlan1, 0);
    m.set_offset(Slot::L3, 14);
    m.set_offset(Slot::L4, 34);
    m.set_offset(Slot::Tunnel, 42);
    m.set_offset(Slot::InnerEth, ENCAP_BYTES);
    m.set_offset(Slot::InnerL3, old.offset(Slot::L3) + ENCAP_BYTES);
    m.set_offset(Slot::InnerL4, old.offset(Slot::L4) + ENCAP_BYTES);
    true
}

/// A hash of the outer IPv4/IPv6 5-tuple (addresses, protocol, ports), never 0. Packets without
/// an IP header hash their first 12 bytes (the MAC addresses).
#[inline]
pub fn flow_hash(data: &[u8], m: &Meta) -> u32 {
    let l3 = m.offset(Slot::L3);
    let l4 = m.offset(Slot::L4);
    let ports = if m.valid.has(Hdr::Udp) || m.valid.has(Hdr::Tcp) { rd32(data, l4) } else { 0 };
    let (a, b, proto) = if m.valid.has(Hdr::Ipv4) {
        (u64::from(rd32(data, l3 + 12)), u64::from(rd32(data, l3 + 16)), u64::from(data.get(l3 + 9).copied().unwrap_or(0)))
    } else if m.valid.has(Hdr::Ipv6) {
        let f = |o: usize| {
            u64::from(rd32(data, o)) << 32
                | u64::from(rd32(data, o + 4)) ^ u64::from(rd32(data, o + 8)) ^ u64::from(rd32(data, o + 12)).rotate_left(17)
        };
        (f(l3 + 8), f(l3 + 24), u64::from(data.get(l3 + 6).copied().unwrap_or(0)))
    } else {
        (u64::from(rd32(data, 0)) << 16 | u64::from(rd32(data, 4)), u64::from(rd32(data, 8)), 0)
    };
    // Two rounds of multiply-xorshift (a wyhash-like mix).
    let x = (a ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(b ^ 0xbf58_476d_1ce4_e5b9 ^ (proto << 32 | u64::from(ports)));
    let x = (x ^ x >> 29).wrapping_mul(0x94d0_49bb_1331_11eb);
    let h = (x ^ x >> 32) as u32;
    h.max(1)
}

#[inline]
fn rd32(d: &[u8], o: usize) -> u32 {
    d.get(o..o + 4).map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_packet::build::FrameBuilder;
    use std::net::Ipv4Addr;

    #[test]
    fn encap_builds_valid_outer_headers_and_moves_offsets() {
        let mut pool = Pool::new(4);
        let h = pool.alloc().unwrap();
        let inner = FrameBuilder::eth([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2))
            .udp(1000, 2000)
            .frame_len(100)
            .build();
        pool.set_data(h, &inner);
        let mut m = Meta::arrived(0);
        m.valid = HdrSet::EMPTY.with(Hdr::Eth).with(Hdr::Ipv4).with(Hdr::Udp);
        m.set_offset(Slot::L3, 14);
        m.set_offset(Slot::L4, 34);
        let t = Tunnel { dmac: 0x0200_0000_0a01, smac: 0x0200_0000_0b01, src: 0xc612_0101, dst: 0xc612_0202, vni: 0x12_3456 };
        assert!(encap(&mut pool, h, &mut m, &t));
        let f = pool.data(h);
        assert_eq!(f.len(), 150);
        assert_eq!(&f[50..], &inner[..]);
        assert!(csum::ipv4_header_ok(&f[14..34]));
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 136);
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), 4789);
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 116);
        assert!(u16::from_be_bytes([f[34], f[35]]) >= 0xc000);
        assert_eq!(&f[42..50], &[0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
        assert_eq!(m.offset(Slot::InnerL3), 64);
        assert_eq!(m.offset(Slot::InnerL4), 84);
        assert!(m.valid.has(Hdr::InnerUdp) && m.valid.has(Hdr::Vxlan) && !m.valid.has(Hdr::Tcp));
    }

    proptest::proptest! {
        /// The template's one-add header checksum equals RFC 1071 over the whole built header.
        #[test]
        fn template_checksum_matches_a_full_computation(dmac: u64, smac: u64, src: u32, dst: u32, vni in 0u32..1 << 24, len in 14usize..1500) {
            let mut pool = Pool::new(2);
            let h = pool.alloc().unwrap();
            pool.set_data(h, &vec![0xab; len]);
            let mut m = Meta::arrived(0);
            m.hash = 7;
            let t = Tunnel { dmac: dmac & 0xffff_ffff_ffff, smac: smac & 0xffff_ffff_ffff, src, dst, vni };
            proptest::prop_assert!(encap(&mut pool, h, &mut m, &t));
            let f = pool.data(h);
            proptest::prop_assert!(csum::ipv4_header_ok(&f[14..34]));
            proptest::prop_assert_eq!(usize::from(u16::from_be_bytes([f[16], f[17]])), len + 36);
            proptest::prop_assert_eq!(&f[26..30], &src.to_be_bytes()[..]);
            proptest::prop_assert_eq!(&f[0..6], &dmac.to_be_bytes()[2..]);
        }
    }

    #[test]
    fn flow_hash_differs_per_port_and_is_nonzero() {
        let f = |sport| {
            FrameBuilder::eth([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
                .ipv4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2))
                .udp(sport, 2000)
                .build()
        };
        let mut m = Meta::arrived(0);
        m.valid = HdrSet::EMPTY.with(Hdr::Eth).with(Hdr::Ipv4).with(Hdr::Udp);
        m.set_offset(Slot::L3, 14);
        m.set_offset(Slot::L4, 34);
        let hs: std::collections::HashSet<u32> = (0..1000).map(|p| flow_hash(&f(p), &m)).collect();
        assert!(hs.len() > 990);
        assert!(!hs.contains(&0));
        assert_ne!(flow_hash(&[], &Meta::arrived(0)), 0);
    }
}
