//! Frame builders for tests, fixtures and traffic generators: a stack of owned header
//! `Repr`s, outermost first, written into a buffer with every length and checksum filled in.
//!
//! ```
//! use fastpath_packet::build::FrameBuilder;
//! use std::net::Ipv4Addr;
//! let frame = FrameBuilder::eth([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
//!     .vlan(100, 0)
//!     .ipv4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 19, 0, 1))
//!     .udp(1024, 1025)
//!     .frame_len(64)
//!     .build();
//! assert_eq!(frame.len(), 64);
//! ```
//!
//! How a frame is laid out:
//! - each layer's type field (EtherType, IP protocol / next header) is taken from the layer
//!   that follows it (a raw payload gets [`EtherType::LOCAL_EXPERIMENTAL`] /
//!   [`IpProto::EXPERIMENTAL`], or the protocol given in [`FrameBuilder::ipv4_with`]);
//! - each length field (IPv4 total length, IPv6 payload length, UDP length) covers everything
//!   after its header, including the padding that [`FrameBuilder::frame_len`] adds to the
//!   payload (so a 64-byte frame is a valid 64-byte frame, not a short packet plus trailer);
//! - checksums are filled innermost first (so an outer UDP checksum over a VXLAN packet covers
//!   the finished inner frame): IPv4 header, UDP and TCP over IPv4 and IPv6, ICMP, and ICMPv6
//!   with its pseudo-header. A UDP or TCP layer with no IP layer around it keeps a zero checksum.
//!
//! Sizes exclude the 4-byte FCS, as RFC 2544 generators count frames (64 to 1518 bytes).
//! [`FrameBuilder::emit`] does not allocate, so a generator can build a template once and
//! re-emit or patch it (with the `hdr` write views) per packet.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::csum;
use crate::hdr::{
    ArpRepr, EthRepr, EtherType, IcmpMut, IcmpRepr, IcmpType, IpProto, Ipv4Repr, Ipv6ExtRepr, Ipv6Frag, Ipv6Repr, Mac, TcpFlags, TcpMut,
    TcpRepr, UdpMut, UdpRepr, VlanRepr, VxlanRepr,
};

/// EtherType of an Ethernet frame carried directly in another (Transparent Ethernet Bridging).
const ETHERTYPE_TEB: EtherType = EtherType(0x6558);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Layer {
    Eth {
        dst: Mac,
        src: Mac,
    },
    Vlan {
        tpid: EtherType,
        vid: u16,
        pcp: u8,
    },
    Arp(ArpRepr),
    Ipv4(Ipv4Repr),
    Ipv6(Ipv6Repr),
    Ipv6Ext(Ipv6ExtRepr),
    Udp {
        src_port: u16,
        dst_port: u16,
    },
    Tcp(TcpRepr),
    /// `auto_echo`: the type is an echo request of the enclosing IP version.
    Icmp {
        repr: IcmpRepr,
        auto_echo: bool,
    },
    Vxlan {
        vni: u32,
    },
}

impl Layer {
    fn header_len(&self) -> usize {
        match self {
            Layer::Eth { .. } => crate::hdr::eth::HEADER_LEN,
            Layer::Vlan { .. } => crate::hdr::vlan::TAG_LEN,
            Layer::Arp(_) => crate::hdr::arp::PACKET_LEN,
            Layer::Ipv4(r) => r.header_len(),
            Layer::Ipv6(_) => crate::hdr::ipv6::HEADER_LEN,
            Layer::Ipv6Ext(e) => e.header_len(),
            Layer::Udp { .. } => crate::hdr::udp::HEADER_LEN,
            Layer::Tcp(t) => t.header_len(),
            Layer::Icmp { .. } => crate::hdr::icmp::HEADER_LEN,
            Layer::Vxlan { .. } => crate::hdr::vxlan::HEADER_LEN,
        }
    }

    /// The EtherType a layer below writes when this layer follows it.
    fn ethertype(next: Option<&Layer>) -> EtherType {
        match next {
            Some(Layer::Vlan { tpid, .. }) => *tpid,
            Some(Layer::Ipv4(_)) => EtherType::IPV4,
            Some(Layer::Ipv6(_)) => EtherType::IPV6,
            Some(Layer::Arp(_)) => EtherType::ARP,
            Some(Layer::Eth { .. }) => ETHERTYPE_TEB,
            _ => EtherType::LOCAL_EXPERIMENTAL,
        }
    }

    /// The IP protocol / next header a layer below writes when this layer follows it.
    fn ip_proto(next: Option<&Layer>, v6: bool) -> Option<IpProto> {
        match next {
            Some(Layer::Udp { .. }) => Some(IpProto::UDP),
            Some(Layer::Tcp(_)) => Some(IpProto::TCP),
            Some(Layer::Icmp { .. }) => Some(if v6 { IpProto::ICMPV6 } else { IpProto::ICMP }),
            Some(Layer::Ipv6Ext(e)) => Some(e.kind),
            Some(Layer::Ipv4(_)) => Some(IpProto::IPIP),
            Some(Layer::Ipv6(_)) => Some(IpProto::IPV6),
            _ => None,
        }
    }
}

/// A frame under construction: a stack of layers, outermost first, then a payload.
/// Control thread, tests and generators' set-up only (building allocates; [`FrameBuilder::emit`]
/// does not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameBuilder {
    layers: Vec<Layer>,
    payload: Vec<u8>,
    frame_len: Option<usize>,
}

impl FrameBuilder {
    /// A frame starting with an Ethernet header.
    pub fn eth(dst: Mac, src: Mac) -> Self {
        Self { layers: vec![Layer::Eth { dst, src }], payload: Vec::new(), frame_len: None }
    }

    fn push(mut self, l: Layer) -> Self {
        self.layers.push(l);
        self
    }

    /// Adds an inner Ethernet header (after [`FrameBuilder::vxlan`]).
    pub fn inner_eth(self, dst: Mac, src: Mac) -> Self {
        self.push(Layer::Eth { dst, src })
    }
    /// Adds an 802.1Q C-tag (TPID 0x8100) with VLAN ID `vid` (12 bits) and priority `pcp`.
    pub fn vlan(self, vid: u16, pcp: u8) -> Self {
        self.push(Layer::Vlan { tpid: EtherType::VLAN, vid, pcp })
    }
    /// Adds a Q-in-Q pair: an 802.1ad S-tag (TPID 0x88a8) then an 802.1Q C-tag (0x8100).
    pub fn qinq(self, s_vid: u16, c_vid: u16) -> Self {
        self.push(Layer::Vlan { tpid: EtherType::QINQ, vid: s_vid, pcp: 0 }).push(Layer::Vlan { tpid: EtherType::VLAN, vid: c_vid, pcp: 0 })
    }
    /// Adds an ARP packet.
    pub fn arp(self, repr: ArpRepr) -> Self {
        self.push(Layer::Arp(repr))
    }
    /// Adds an IPv4 header: TTL 64, no options; protocol from the next layer.
    pub fn ipv4(self, src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        self.push(Layer::Ipv4(Ipv4Repr::new(src, dst, IpProto::EXPERIMENTAL, 0)))
    }
    /// Adds an IPv4 header with full control (TTL, DSCP, ECN, ident, flags, options). Its
    /// `payload_len` is replaced by the real one; its `protocol` is kept only when the next
    /// layer does not imply one (a raw payload).
    pub fn ipv4_with(self, repr: Ipv4Repr) -> Self {
        self.push(Layer::Ipv4(repr))
    }
    /// Adds an IPv6 header: hop limit 64; next header from the next layer.
    pub fn ipv6(self, src: Ipv6Addr, dst: Ipv6Addr) -> Self {
        self.push(Layer::Ipv6(Ipv6Repr::new(src, dst, IpProto::EXPERIMENTAL, 0)))
    }
    /// Adds an IPv6 header with full control (hop limit, traffic class, flow label); lengths
    /// and next header are filled in as for [`FrameBuilder::ipv4_with`].
    pub fn ipv6_with(self, repr: Ipv6Repr) -> Self {
        self.push(Layer::Ipv6(repr))
    }
    /// Adds an IPv6 extension header of kind `kind` (HOPOPT, ROUTING, DSTOPTS, AH) whose bytes
    /// after the first two are `data` (zero-padded to the header's unit; zeros are Pad1
    /// options in hop-by-hop and destination options). Next header is filled in.
    pub fn ipv6_ext(self, kind: IpProto, data: &[u8]) -> Self {
        self.push(Layer::Ipv6Ext(Ipv6ExtRepr { kind, next_header: IpProto::EXPERIMENTAL, data: data.to_vec() }))
    }
    /// Adds an IPv6 fragment header.
    pub fn ipv6_frag(self, frag: Ipv6Frag) -> Self {
        self.push(Layer::Ipv6Ext(Ipv6ExtRepr::fragment(IpProto::EXPERIMENTAL, frag)))
    }
    /// Adds a UDP header.
    pub fn udp(self, src_port: u16, dst_port: u16) -> Self {
        self.push(Layer::Udp { src_port, dst_port })
    }
    /// Adds a TCP header: window 65535, no options.
    pub fn tcp(self, src_port: u16, dst_port: u16, flags: TcpFlags, seq: u32, ack: u32) -> Self {
        self.push(Layer::Tcp(TcpRepr::new(src_port, dst_port, flags, seq, ack)))
    }
    /// Adds a TCP header with full control (window, urgent pointer, options).
    pub fn tcp_with(self, repr: TcpRepr) -> Self {
        self.push(Layer::Tcp(repr))
    }
    /// Adds an echo request: ICMP over IPv4, ICMPv6 over IPv6.
    pub fn icmp_echo(self, id: u16, seq: u16) -> Self {
        self.push(Layer::Icmp { repr: IcmpRepr::echo(IcmpType::ECHO_REQUEST, id, seq), auto_echo: true })
    }
    /// Adds any ICMP/ICMPv6 header as given (the checksum is filled in).
    pub fn icmp(self, repr: IcmpRepr) -> Self {
        self.push(Layer::Icmp { repr, auto_echo: false })
    }
    /// Adds a VXLAN header (RFC 7348). The layer below should be UDP to port 4789; the next
    /// should be [`FrameBuilder::inner_eth`].
    pub fn vxlan(self, vni: u32) -> Self {
        self.push(Layer::Vxlan { vni })
    }
    /// Appends bytes to the payload after the last header.
    pub fn payload(mut self, bytes: &[u8]) -> Self {
        self.payload.extend_from_slice(bytes);
        self
    }
    /// Pads the payload with zeros so that the whole frame is `total` bytes (FCS excluded). A
    /// frame whose headers and payload are already longer is left as it is.
    pub fn frame_len(mut self, total: usize) -> Self {
        self.frame_len = Some(total);
        self
    }

    fn unpadded_len(&self) -> usize {
        self.layers.iter().map(Layer::header_len).sum::<usize>() + self.payload.len()
    }

    /// Length of the frame [`FrameBuilder::emit`] writes.
    pub fn len(&self) -> usize {
        self.unpadded_len().max(self.frame_len.unwrap_or(0))
    }

    /// True when the frame would be empty (never: it always has an Ethernet header).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame as a new vector.
    pub fn build(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len()];
        let n = self.emit(&mut v);
        v.truncate(n);
        v
    }

    /// Writes the frame into the start of `out` and returns its length, or returns 0 (writing
    /// nothing) when `out` is shorter than [`FrameBuilder::len`]. Does not allocate.
    pub fn emit(&self, out: &mut [u8]) -> usize {
        let total = self.len();
        let Some(out) = out.get_mut(..total) else { return 0 };
        let mut off = 0usize;
        for (i, l) in self.layers.iter().enumerate() {
            let next = self.layers.get(i + 1);
            let hlen = l.header_len();
            let rest = total - off - hlen;
            let Some(b) = out.get_mut(off..) else { return 0 };
            let ok = match l {
                Layer::Eth { dst, src } => EthRepr { dst: *dst, src: *src, ethertype: Layer::ethertype(next) }.emit(b).is_ok(),
                Layer::Vlan { vid, pcp, .. } => {
                    VlanRepr { pcp: *pcp, dei: false, vid: *vid, ethertype: Layer::ethertype(next) }.emit(b).is_ok()
                }
                Layer::Arp(r) => r.emit(b).is_ok(),
                Layer::Ipv4(r) => emit_ipv4(r, Layer::ip_proto(next, false), rest, b),
                Layer::Ipv6(r) => {
                    let nh = Layer::ip_proto(next, true).unwrap_or(r.next_header);
                    Ipv6Repr { next_header: nh, payload_len: rest, ..*r }.emit(b).is_ok()
                }
                Layer::Ipv6Ext(e) => {
                    let ok = e.emit(b).is_ok();
                    if let (Some(nh), Some(p)) = (Layer::ip_proto(next, true), b.first_mut()) {
                        *p = nh.0;
                    }
                    ok
                }
                Layer::Udp { src_port, dst_port } => {
                    UdpRepr { src_port: *src_port, dst_port: *dst_port, payload_len: rest }.emit(b).is_ok()
                }
                Layer::Tcp(r) => r.emit(b).is_ok(),
                Layer::Icmp { repr, auto_echo } => {
                    let mut r = *repr;
                    if *auto_echo && self.enclosing_ip_is_v6(i) == Some(true) {
                        r.msg_type = IcmpType::V6_ECHO_REQUEST;
                    }
                    r.emit(b).is_ok()
                }
                Layer::Vxlan { vni } => VxlanRepr { vni: *vni }.emit(b).is_ok(),
            };
            if !ok {
                return 0;
            }
            off += hlen;
        }
        let Some(tail) = out.get_mut(off..) else { return 0 };
        let (pl, pad) = tail.split_at_mut(self.payload.len().min(tail.len()));
        pl.copy_from_slice(self.payload.get(..pl.len()).unwrap_or_default());
        pad.fill(0);
        self.fill_checksums(out);
        total
    }

    /// Offset of layer `i`.
    fn offset(&self, i: usize) -> usize {
        self.layers.iter().take(i).map(Layer::header_len).sum()
    }

    /// Index of the nearest IP layer below layer `i`, and whether it is IPv6.
    fn enclosing_ip(&self, i: usize) -> Option<(usize, bool)> {
        self.layers.iter().enumerate().take(i).rev().find_map(|(j, l)| match l {
            Layer::Ipv4(_) => Some((j, false)),
            Layer::Ipv6(_) => Some((j, true)),
            _ => None,
        })
    }

    fn enclosing_ip_is_v6(&self, i: usize) -> Option<bool> {
        self.enclosing_ip(i).map(|(_, v6)| v6)
    }

    /// Fills L4 checksums, innermost first. `out` is exactly the frame.
    fn fill_checksums(&self, out: &mut [u8]) {
        for (i, l) in self.layers.iter().enumerate().rev() {
            if !matches!(l, Layer::Udp { .. } | Layer::Tcp(_) | Layer::Icmp { .. }) {
                continue;
            }
            let ip = self.enclosing_ip(i).and_then(|(j, v6)| {
                let o = self.offset(j);
                if v6 {
                    let a: [u8; 16] = out.get(o + 8..o + 24)?.try_into().ok()?;
                    let b: [u8; 16] = out.get(o + 24..o + 40)?.try_into().ok()?;
                    Some(Addrs::V6(a, b))
                } else {
                    let a: [u8; 4] = out.get(o + 12..o + 16)?.try_into().ok()?;
                    let b: [u8; 4] = out.get(o + 16..o + 20)?.try_into().ok()?;
                    Some(Addrs::V4(a, b))
                }
            });
            let Some(seg) = out.get_mut(self.offset(i)..) else { continue };
            match (l, ip) {
                (Layer::Udp { .. }, Some(Addrs::V4(s, d))) => {
                    if let Ok(mut u) = UdpMut::parse(seg) {
                        u.fill_checksum_v4(s, d);
                    }
                }
                (Layer::Udp { .. }, Some(Addrs::V6(s, d))) => {
                    if let Ok(mut u) = UdpMut::parse(seg) {
                        u.fill_checksum_v6(s, d);
                    }
                }
                (Layer::Tcp(_), Some(Addrs::V4(s, d))) => {
                    if let Ok(mut t) = TcpMut::parse(seg) {
                        t.fill_checksum_v4(s, d);
                    }
                }
                (Layer::Tcp(_), Some(Addrs::V6(s, d))) => {
                    if let Ok(mut t) = TcpMut::parse(seg) {
                        t.fill_checksum_v6(s, d);
                    }
                }
                (Layer::Icmp { .. }, Some(Addrs::V6(s, d))) => {
                    if let Ok(mut m) = IcmpMut::parse(seg) {
                        m.fill_checksum_v6(s, d);
                    }
                }
                (Layer::Icmp { .. }, _) => {
                    if let Ok(mut m) = IcmpMut::parse(seg) {
                        m.fill_checksum_v4();
                    }
                }
                _ => {}
            }
        }
    }
}

enum Addrs {
    V4([u8; 4], [u8; 4]),
    V6([u8; 16], [u8; 16]),
}

/// Emits `r` with the real payload length and (when known) protocol, without cloning it.
fn emit_ipv4(r: &Ipv4Repr, proto: Option<IpProto>, payload_len: usize, b: &mut [u8]) -> bool {
    let Ok(hlen) = r.emit(b) else { return false };
    let total = u16::try_from(hlen + payload_len).unwrap_or(u16::MAX);
    let Some(h) = b.get_mut(..hlen) else { return false };
    if let Some(x) = h.get_mut(2..4) {
        x.copy_from_slice(&total.to_be_bytes());
    }
    if let (Some(p), Some(x)) = (proto, h.get_mut(9)) {
        *x = p.0;
    }
    let c = csum::ipv4_header(h);
    if let Some(x) = h.get_mut(10..12) {
        x.copy_from_slice(&c.to_be_bytes());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hdr::{Arp, ArpOp, Eth, Icmp, Ipv4, Ipv6, Tcp, Udp, Vlan, Vxlan};

    const DMAC: Mac = [2, 0, 0, 0, 0, 2];
    const SMAC: Mac = [2, 0, 0, 0, 0, 1];
    const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);

    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn udp_over_ipv4_with_padding() {
        let f = FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).udp(1024, 1025).payload(b"xy").frame_len(64).build();
        assert_eq!(f.len(), 64);
        let e = Eth::parse(&f).unwrap();
        assert_eq!((e.dst(), e.src(), e.ethertype()), (DMAC, SMAC, EtherType::IPV4));
        let ip = Ipv4::parse(e.payload()).unwrap();
        assert!(ip.checksum_ok());
        assert_eq!((ip.src(), ip.dst(), ip.ttl(), ip.protocol()), (A, B, 64, IpProto::UDP));
        assert_eq!(ip.total_len(), 50);
        let u = Udp::parse(ip.payload()).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.len()), (1024, 1025, 30));
        assert!(u.checksum() != 0 && u.checksum_ok_v4(ip.src_bytes(), ip.dst_bytes()));
        assert_eq!(&u.payload()[..2], b"xy");
        assert!(u.payload()[2..].iter().all(|&b| b == 0));
    }

    #[test]
    fn frame_len_sizes() {
        for size in [60, 64, 128, 256, 512, 1024, 1280, 1518] {
            let fb = FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).udp(1, 2).frame_len(size);
            assert_eq!(fb.len(), size);
            assert_eq!(fb.build().len(), size);
        }
        // Already longer than asked: unchanged.
        let f = FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).udp(1, 2).frame_len(10).build();
        assert_eq!(f.len(), 42);
    }

    #[test]
    fn emit_into_short_buffer_writes_nothing() {
        let fb = FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).udp(1, 2).frame_len(64);
        let mut buf = [0xa5u8; 63];
        assert_eq!(fb.emit(&mut buf), 0);
        assert!(buf.iter().all(|&b| b == 0xa5));
        let mut big = [0xa5u8; 100];
        assert_eq!(fb.emit(&mut big), 64);
        assert_eq!(&big[..64], &fb.build()[..]);
        assert!(big[64..].iter().all(|&b| b == 0xa5));
    }

    #[test]
    fn tcp_and_icmp() {
        let f = FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).tcp(40000, 80, TcpFlags::SYN | TcpFlags::ACK, 7, 9).payload(b"hello").build();
        let ip = Ipv4::parse(&f[14..]).unwrap();
        assert_eq!(ip.protocol(), IpProto::TCP);
        let t = Tcp::parse(ip.payload()).unwrap();
        assert_eq!((t.seq(), t.ack(), t.flags()), (7, 9, TcpFlags(0x12)));
        assert!(t.checksum_ok_v4(ip.src_bytes(), ip.dst_bytes()));
        assert_eq!(t.payload(), b"hello");

        let f = FrameBuilder::eth(DMAC, SMAC).ipv4(A, B).icmp_echo(5, 6).payload(b"ping").build();
        let ip = Ipv4::parse(&f[14..]).unwrap();
        assert_eq!(ip.protocol(), IpProto::ICMP);
        let m = Icmp::parse(ip.payload()).unwrap();
        assert_eq!((m.msg_type(), m.echo_id(), m.echo_seq()), (IcmpType::ECHO_REQUEST, 5, 6));
        assert!(m.checksum_ok_v4());
    }

    #[test]
    fn ipv6_with_ext_headers() {
        let (s, d) = (v6("2001:db8::1"), v6("2001:db8::2"));
        let f = FrameBuilder::eth(DMAC, SMAC)
            .ipv6(s, d)
            .ipv6_ext(IpProto::HOPOPT, &[1, 4, 0, 0, 0, 0])
            .ipv6_ext(IpProto::DSTOPTS, &[])
            .ipv6_frag(Ipv6Frag { offset: 0, more: false, ident: 77 })
            .udp(5000, 53)
            .payload(b"q")
            .build();
        let e = Eth::parse(&f).unwrap();
        assert_eq!(e.ethertype(), EtherType::IPV6);
        let ip = Ipv6::parse(e.payload()).unwrap();
        assert_eq!(ip.next_header(), IpProto::HOPOPT);
        assert_eq!(ip.upper_proto(), IpProto::UDP);
        assert_eq!(ip.ext_count(), 3);
        assert_eq!(ip.payload_len() as usize, 24 + 9);
        let u = Udp::parse(ip.upper_payload()).unwrap();
        assert!(u.checksum_ok_v6(ip.src_bytes(), ip.dst_bytes()));

        let f = FrameBuilder::eth(DMAC, SMAC).ipv6(s, d).icmp_echo(1, 2).build();
        let ip = Ipv6::parse(&f[14..]).unwrap();
        assert_eq!(ip.upper_proto(), IpProto::ICMPV6);
        let m = Icmp::parse(ip.upper_payload()).unwrap();
        assert_eq!(m.msg_type(), IcmpType::V6_ECHO_REQUEST);
        assert!(m.checksum_ok_v6(ip.src_bytes(), ip.dst_bytes()));
    }

    #[test]
    fn vlan_qinq_and_arp() {
        let f = FrameBuilder::eth(DMAC, SMAC).qinq(100, 200).arp(ArpRepr::request(SMAC, A, B)).build();
        let e = Eth::parse(&f).unwrap();
        assert_eq!(e.ethertype(), EtherType::QINQ);
        let s = Vlan::parse(e.payload()).unwrap();
        assert_eq!((s.vid(), s.ethertype()), (100, EtherType::VLAN));
        let c = Vlan::parse(s.payload()).unwrap();
        assert_eq!((c.vid(), c.ethertype()), (200, EtherType::ARP));
        let a = Arp::parse(c.payload()).unwrap();
        assert_eq!((a.op(), a.spa(), a.tpa()), (ArpOp::REQUEST, A, B));

        let f = FrameBuilder::eth(DMAC, SMAC).vlan(4095, 7).ipv4(A, B).build();
        let v = Vlan::parse(&f[14..]).unwrap();
        assert_eq!((v.vid(), v.pcp(), v.ethertype()), (4095, 7, EtherType::IPV4));
        let ip = Ipv4::parse(v.payload()).unwrap();
        assert_eq!(ip.protocol(), IpProto::EXPERIMENTAL);
    }

    #[test]
    fn vxlan_checksums_cover_inner_frame() {
        let f = FrameBuilder::eth(DMAC, SMAC)
            .ipv4(A, B)
            .udp(49152, crate::hdr::VXLAN_PORT)
            .vxlan(0xabcdef)
            .inner_eth([2, 0, 0, 0, 1, 2], [2, 0, 0, 0, 1, 1])
            .ipv4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
            .tcp(1, 2, TcpFlags::ACK, 1, 1)
            .frame_len(200)
            .build();
        let ip = Ipv4::parse(&f[14..]).unwrap();
        let u = Udp::parse(ip.payload()).unwrap();
        assert!(u.checksum_ok_v4(ip.src_bytes(), ip.dst_bytes()));
        let x = Vxlan::parse(u.payload()).unwrap();
        assert_eq!(x.vni(), 0xabcdef);
        let ie = Eth::parse(x.payload()).unwrap();
        let iip = Ipv4::parse(ie.payload()).unwrap();
        assert!(iip.checksum_ok());
        let t = Tcp::parse(iip.payload()).unwrap();
        assert!(t.checksum_ok_v4(iip.src_bytes(), iip.dst_bytes()));
        assert_eq!(f.len(), 200);
    }

    #[test]
    fn ipv4_with_keeps_fields() {
        let r = Ipv4Repr {
            ttl: 3,
            dscp: 46,
            ecn: 2,
            ident: 99,
            dont_frag: true,
            options: vec![1, 1, 1, 1],
            ..Ipv4Repr::new(A, B, IpProto(200), 0)
        };
        let f = FrameBuilder::eth(DMAC, SMAC).ipv4_with(r).payload(&[1, 2, 3]).build();
        let ip = Ipv4::parse(&f[14..]).unwrap();
        assert_eq!((ip.ttl(), ip.dscp(), ip.ecn(), ip.ident(), ip.dont_frag()), (3, 46, 2, 99, true));
        assert_eq!((ip.protocol(), ip.header_len(), ip.payload()), (IpProto(200), 24, &[1u8, 2, 3][..]));
        assert!(ip.checksum_ok());
    }

    /// IPv6 (src, dst) when the L4 sits on IPv6.
    type V6Addrs = Option<([u8; 16], [u8; 16])>;

    /// Parses a built frame with the views and checks every length and checksum; returns
    /// (L3 kind, L4 protocol, payload bytes after the innermost header).
    fn verify(f: &[u8], depth: u32) -> (EtherType, Option<IpProto>, usize) {
        let e = Eth::parse(f).unwrap();
        let (o, i, off) = crate::hdr::vlan::parse_tags(e.ethertype(), e.payload()).unwrap();
        let et = i.or(o).map_or(e.ethertype(), |v| v.ethertype());
        let l3 = &e.payload()[off..];
        let (proto, l4, addrs): (IpProto, &[u8], V6Addrs) = if et == EtherType::IPV4 {
            let ip = Ipv4::parse(l3).unwrap();
            assert!(ip.checksum_ok());
            assert_eq!(usize::from(ip.total_len()), l3.len());
            (ip.protocol(), ip.payload(), None)
        } else if et == EtherType::IPV6 {
            let ip = Ipv6::parse(l3).unwrap();
            assert_eq!(40 + usize::from(ip.payload_len()), l3.len());
            (ip.upper_proto(), ip.upper_payload(), Some((ip.src_bytes(), ip.dst_bytes())))
        } else if et == EtherType::ARP {
            Arp::parse(l3).unwrap();
            return (et, None, l3.len() - 28);
        } else {
            return (et, None, l3.len());
        };
        let v4 = |b: &[u8]| -> ([u8; 4], [u8; 4]) {
            let ip = Ipv4::parse(b).unwrap();
            (ip.src_bytes(), ip.dst_bytes())
        };
        match proto {
            IpProto::UDP => {
                let u = Udp::parse(l4).unwrap();
                assert_eq!(usize::from(u.len()), l4.len());
                match addrs {
                    Some((s, d)) => assert!(u.checksum_ok_v6(s, d)),
                    None => {
                        let (s, d) = v4(l3);
                        assert!(u.checksum() != 0 && u.checksum_ok_v4(s, d));
                    }
                }
                if u.dst_port() == crate::hdr::VXLAN_PORT && depth == 0 {
                    let x = Vxlan::parse(u.payload()).unwrap();
                    return verify(x.payload(), 1);
                }
                (et, Some(proto), u.payload().len())
            }
            IpProto::TCP => {
                let t = Tcp::parse(l4).unwrap();
                match addrs {
                    Some((s, d)) => assert!(t.checksum_ok_v6(s, d)),
                    None => {
                        let (s, d) = v4(l3);
                        assert!(t.checksum_ok_v4(s, d));
                    }
                }
                (et, Some(proto), t.payload().len())
            }
            IpProto::ICMP | IpProto::ICMPV6 => {
                let m = Icmp::parse(l4).unwrap();
                match addrs {
                    Some((s, d)) => assert!(m.checksum_ok_v6(s, d)),
                    None => assert!(m.checksum_ok_v4()),
                }
                (et, Some(proto), m.data().len())
            }
            _ => (et, Some(proto), l4.len()),
        }
    }

    fn add_inner(fb: FrameBuilder, l2: u8, l3: u8, l4: u8, exts: u8) -> FrameBuilder {
        let fb = match l2 {
            1 => fb.vlan(7, 1),
            2 => fb.qinq(8, 9),
            _ => fb,
        };
        let fb = match l3 {
            0 => return fb.arp(ArpRepr::request(SMAC, A, B)),
            1 => fb.ipv4(A, B),
            _ => {
                let mut fb = fb.ipv6(v6("2001:db8::1"), v6("2001:db8::2"));
                for k in 0..exts {
                    fb = match k % 3 {
                        0 => fb.ipv6_ext(IpProto::HOPOPT, &[1, 0]),
                        1 => fb.ipv6_frag(Ipv6Frag { offset: 0, more: false, ident: u32::from(k) }),
                        _ => fb.ipv6_ext(IpProto::DSTOPTS, &[0; 9]),
                    };
                }
                fb
            }
        };
        match l4 {
            0 => fb.udp(1000, 2000),
            1 => fb.tcp(3000, 4000, TcpFlags::PSH | TcpFlags::ACK, 1, 2),
            2 => fb.icmp_echo(5, 6),
            _ => fb,
        }
    }

    proptest::proptest! {
        #[test]
        fn any_stack_builds_valid_frames(
            tunnel in proptest::bool::ANY, l2 in 0u8..3, l3 in 0u8..3, l4 in 0u8..4, exts in 0u8..4,
            payload in proptest::collection::vec(proptest::num::u8::ANY, 0..100), pad_to in 0usize..300,
        ) {
            let mut fb = FrameBuilder::eth(DMAC, SMAC);
            if tunnel {
                fb = fb.ipv4(A, B).udp(4000, crate::hdr::VXLAN_PORT).vxlan(3).inner_eth(DMAC, SMAC);
            }
            let fb = add_inner(fb, l2, l3, l4, exts).payload(&payload).frame_len(pad_to);
            let f = fb.build();
            proptest::prop_assert_eq!(f.len(), fb.len());
            proptest::prop_assert!(f.len() >= pad_to);
            let (et, proto, rest) = verify(&f, 0);
            let want_et = [EtherType::ARP, EtherType::IPV4, EtherType::IPV6][usize::from(l3)];
            proptest::prop_assert_eq!(et, want_et);
            if l3 != 0 {
                let want = [IpProto::UDP, IpProto::TCP, if l3 == 1 { IpProto::ICMP } else { IpProto::ICMPV6 }, IpProto::EXPERIMENTAL];
                proptest::prop_assert_eq!(proto, Some(want[usize::from(l4)]));
                proptest::prop_assert!(rest >= payload.len());
            }
        }
    }
}
