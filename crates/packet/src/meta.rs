//! Per-packet metadata: which headers were parsed and where they start, plus the fields that
//! stages read and write (input port, flow hash, colour, table hits, user registers).
//!
//! Offsets are from the start of the frame's data. The parser fills `valid` and `off`; a stage
//! that moves the frame's start (decapsulation, encapsulation) re-parses or adjusts them.

/// A header the parser can recognise. Its bit in [`HdrSet`] is `1 << (self as u32)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Hdr {
    /// Ethernet II.
    Eth,
    /// At least one 802.1Q / 802.1ad tag (the outer one is in `Slot::Vlan0`).
    Vlan,
    /// Two tags: Q-in-Q (the inner one is in `Slot::Vlan1`).
    Qinq,
    /// ARP over Ethernet/IPv4.
    Arp,
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
    /// ICMP (over IPv4).
    Icmp,
    /// ICMPv6.
    Icmp6,
    /// UDP.
    Udp,
    /// TCP.
    Tcp,
    /// VXLAN (UDP port 4789).
    Vxlan,
    /// Ethernet inside a tunnel.
    InnerEth,
    /// IPv4 inside a tunnel.
    InnerIpv4,
    /// IPv6 inside a tunnel.
    InnerIpv6,
    /// UDP inside a tunnel.
    InnerUdp,
    /// TCP inside a tunnel.
    InnerTcp,
    /// ICMP / ICMPv6 inside a tunnel.
    InnerIcmp,
}

impl Hdr {
    /// Every header kind, in bit order.
    pub const ALL: &'static [Hdr] = &[
        Hdr::Eth,
        Hdr::Vlan,
        Hdr::Qinq,
        Hdr::Arp,
        Hdr::Ipv4,
        Hdr::Ipv6,
        Hdr::Icmp,
        Hdr::Icmp6,
        Hdr::Udp,
        Hdr::Tcp,
        Hdr::Vxlan,
        Hdr::InnerEth,
        Hdr::InnerIpv4,
        Hdr::InnerIpv6,
        Hdr::InnerUdp,
        Hdr::InnerTcp,
        Hdr::InnerIcmp,
    ];

    /// The name used in pipeline specs (`ipv4`, `inner_ipv4`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Hdr::Eth => "eth",
            Hdr::Vlan => "vlan",
            Hdr::Qinq => "qinq",
            Hdr::Arp => "arp",
            Hdr::Ipv4 => "ipv4",
            Hdr::Ipv6 => "ipv6",
            Hdr::Icmp => "icmp",
            Hdr::Icmp6 => "icmp6",
            Hdr::Udp => "udp",
            Hdr::Tcp => "tcp",
            Hdr::Vxlan => "vxlan",
            Hdr::InnerEth => "inner_eth",
            Hdr::InnerIpv4 => "inner_ipv4",
            Hdr::InnerIpv6 => "inner_ipv6",
            Hdr::InnerUdp => "inner_udp",
            Hdr::InnerTcp => "inner_tcp",
            Hdr::InnerIcmp => "inner_icmp",
        }
    }

    /// The header with this spec name.
    pub fn from_name(s: &str) -> Option<Hdr> {
        Hdr::ALL.iter().copied().find(|h| h.name() == s)
    }

    /// Where this header's offset is kept in [`Meta::off`].
    pub const fn slot(self) -> Slot {
        match self {
            Hdr::Eth => Slot::Eth,
            Hdr::Vlan => Slot::Vlan0,
            Hdr::Qinq => Slot::Vlan1,
            Hdr::Arp | Hdr::Ipv4 | Hdr::Ipv6 => Slot::L3,
            Hdr::Icmp | Hdr::Icmp6 | Hdr::Udp | Hdr::Tcp => Slot::L4,
            Hdr::Vxlan => Slot::Tunnel,
            Hdr::InnerEth => Slot::InnerEth,
            Hdr::InnerIpv4 | Hdr::InnerIpv6 => Slot::InnerL3,
            Hdr::InnerUdp | Hdr::InnerTcp | Hdr::InnerIcmp => Slot::InnerL4,
        }
    }

    /// This header's bit.
    #[inline]
    pub const fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// A set of parsed headers: bit `h as u32` set when header `h` is valid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct HdrSet(pub u32);

impl HdrSet {
    /// No header.
    pub const EMPTY: HdrSet = HdrSet(0);

    /// True when `h` was parsed.
    #[inline]
    pub const fn has(self, h: Hdr) -> bool {
        self.0 & h.bit() != 0
    }
    /// True when every header in `other` was parsed.
    #[inline]
    pub const fn has_all(self, other: HdrSet) -> bool {
        self.0 & other.0 == other.0
    }
    /// Marks `h` as parsed.
    #[inline]
    pub fn insert(&mut self, h: Hdr) {
        self.0 |= h.bit();
    }
    /// Marks `h` as not present.
    #[inline]
    pub fn remove(&mut self, h: Hdr) {
        self.0 &= !h.bit();
    }
    /// The set with `h` added.
    #[inline]
    pub const fn with(self, h: Hdr) -> HdrSet {
        HdrSet(self.0 | h.bit())
    }
}

/// Index into [`Meta::off`]: one offset per header layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Slot {
    /// Outer Ethernet (normally 0).
    Eth,
    /// Outer VLAN tag (the 4 bytes TPID+TCI).
    Vlan0,
    /// Inner VLAN tag of a Q-in-Q pair.
    Vlan1,
    /// Outer L3 (ARP, IPv4 or IPv6).
    L3,
    /// Outer L4 (UDP, TCP, ICMP, ICMPv6), after IPv6 extension headers.
    L4,
    /// Tunnel header (VXLAN).
    Tunnel,
    /// Inner Ethernet.
    InnerEth,
    /// Inner L3.
    InnerL3,
    /// Inner L4.
    InnerL4,
}

impl Slot {
    /// Number of slots.
    pub const COUNT: usize = 9;
}

/// `Meta::out_port` of a packet no action has forwarded yet.
pub const NO_PORT: u16 = u16::MAX;

/// `out_port` of a frame to flood: to every port of its VLAN but the one it came in on
/// (an `l2_switch` stage sets it for broadcast, multicast and unknown unicast).
pub const FLOOD_PORT: u16 = u16::MAX - 1;

/// Number of 32-bit user registers per packet (spec `metadata` fields live here).
pub const REGS: usize = 5;

/// Per-packet metadata, 64 bytes: one cache line per packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Meta {
    /// Headers the parser found.
    pub valid: HdrSet,
    /// Offset of each header layer from the frame's first byte (valid only if its header is).
    pub off: [u16; Slot::COUNT],
    /// Port the packet arrived on.
    pub in_port: u16,
    /// IP protocol / next header of the outer L4 (0 when none).
    pub l4_proto: u8,
    /// Colour given by the last meter: 0 green, 1 yellow, 2 red.
    pub color: u8,
    /// Traffic class chosen for the traffic manager (0 = best effort).
    pub tc: u8,
    /// Set by `VLAN`/tunnel stages: the VNI/VNET or other 8-bit context a later stage reads.
    pub ctx: u8,
    /// Flow hash (for spreading over workers and VXLAN entropy); 0 until computed.
    pub hash: u32,
    /// Bit `t` set when table `t` of the plan hit on this packet.
    pub hits: u32,
    /// User metadata registers (spec `metadata` fields, action results).
    pub regs: [u32; REGS],
    /// Output port chosen by `forward` ([`NO_PORT`] until one is); becomes `Verdict::Tx` at the
    /// end of the pipeline, so egress stages still see the packet.
    pub out_port: u16,
    /// Spare, keeps the struct at 64 bytes.
    pub reserved: u16,
    /// Index of the packet's flow-table entry (connection tracking), `u32::MAX` for none.
    pub flow: u32,
}

impl Meta {
    /// Metadata of a packet that just arrived on `port`.
    #[inline]
    pub fn arrived(port: u16) -> Meta {
        Meta { in_port: port, out_port: NO_PORT, flow: u32::MAX, ..Meta::default() }
    }

    /// The frame's VLAN id: its outer 802.1Q tag's VID, 0 when untagged (or cut short).
    #[inline]
    pub fn vid(&self, frame: &[u8]) -> u16 {
        if !self.valid.has(Hdr::Vlan) {
            return 0;
        }
        let at = self.offset(Slot::Vlan0) + 2;
        frame.get(at..at + 2).map_or(0, |t| u16::from_be_bytes([t[0], t[1]]) & 0x0fff)
    }

    /// Offset of a header layer.
    #[inline]
    pub fn offset(&self, s: Slot) -> usize {
        self.off[s as usize] as usize
    }

    /// Sets the offset of a header layer.
    #[inline]
    pub fn set_offset(&mut self, s: Slot, off: usize) {
        self.off[s as usize] = off as u16;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Meta>(), 64);
    }

    #[test]
    fn header_names_round_trip() {
        for (i, h) in Hdr::ALL.iter().enumerate() {
            assert_eq!(*h as usize, i);
            assert_eq!(Hdr::from_name(h.name()), Some(*h));
        }
    }
}
