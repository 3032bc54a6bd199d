//! Typed zero-copy header views, one protocol per file.
//!
//! Each protocol module has four parts (the smoltcp pattern):
//! - a private fixed layout deriving `zerocopy` traits, with network-endian fields;
//! - a read view `Foo<'a>`, built only by `Foo::parse(&'a [u8])`, which checks every length an
//!   accessor relies on, so that no accessor can fail or panic afterwards;
//! - a write view `FooMut<'a>` (`FooMut::parse(&'a mut [u8])`) whose setters edit in place and
//!   keep the header's own checksum right with the RFC 1624 helpers of [`crate::csum`];
//! - an owned `FooRepr` with `emit` (and `from_view`), for fixtures, builders and control-plane
//!   packets, never for the packet path.
//!
//! Code points are newtypes with constants ([`EtherType`], [`IpProto`]): unknown values are
//! data that round-trips, not errors. Parse failures are one small `Copy` enum, [`Malformed`],
//! whose every variant names exactly one [`DropReason`].
//!
//! For every view and setter here: **Panics:** never (packet bytes cannot cause one).
//! **Thread:** any (views borrow a buffer; workers use them on the packet path). **Allocates:**
//! never, except `Repr::from_view` of the IPv4/TCP/IPv6-extension Reprs that own option bytes
//! (fixtures and control plane only). Lengths are in bytes; ports, addresses and sequence
//! numbers are in host order in the API and network order on the wire.
//!
//! ```
//! use fastpath_packet::build::FrameBuilder;
//! use fastpath_packet::hdr::{Eth, EtherType, Ipv4, Ipv4Mut, Udp};
//! let mut f = FrameBuilder::eth([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
//!     .ipv4([198, 18, 0, 1].into(), [198, 18, 0, 2].into())
//!     .udp(1024, 4789)
//!     .build();
//! let eth = Eth::parse(&f).unwrap();
//! assert_eq!(eth.ethertype(), EtherType::IPV4);
//! let ip = Ipv4::parse(eth.payload()).unwrap();
//! assert_eq!(Udp::parse(ip.payload()).unwrap().dst_port(), 4789);
//! // Forwarding: decrement the TTL in place; the header checksum follows (RFC 1624).
//! let mut ip = Ipv4Mut::parse(&mut f[14..]).unwrap();
//! assert_eq!(ip.decrement_ttl(), Some(63));
//! assert!(ip.as_view().checksum_ok());
//! ```
//!
//! No `unsafe` here: zerocopy does the casting. Indexing with values from packet bytes is
//! denied (`clippy::indexing_slicing`); the fuzz tests in `tests/fuzz_parsers.rs` enforce that
//! parsed views never panic. Unit tests index their fixtures freely (`cfg(test)` is exempt).
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
#![forbid(unsafe_code)]

pub mod arp;
pub mod eth;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vxlan;

pub use arp::{Arp, ArpMut, ArpOp, ArpRepr};
pub use eth::{Eth, EthMut, EthRepr, Mac};
pub use icmp::{Icmp, IcmpMut, IcmpRepr, IcmpType};
pub use ipv4::{Ipv4, Ipv4Mut, Ipv4Repr};
pub use ipv6::{Ipv6, Ipv6ExtRepr, Ipv6Frag, Ipv6Mut, Ipv6Repr};
pub use tcp::{Tcp, TcpFlags, TcpMut, TcpRepr};
pub use udp::{Udp, UdpMut, UdpRepr};
pub use vlan::{Vlan, VlanMut, VlanRepr};
pub use vxlan::{Vxlan, VxlanMut, VxlanRepr, VXLAN_PORT};

use crate::drop::DropReason;

/// An EtherType (IEEE 802.3 Length/Type field), including the 802.1Q/802.1ad tag identifiers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4 (RFC 894).
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP (RFC 826).
    pub const ARP: EtherType = EtherType(0x0806);
    /// IEEE 802.1Q customer VLAN tag (C-tag).
    pub const VLAN: EtherType = EtherType(0x8100);
    /// IPv6 (RFC 2464).
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// IEEE 802.1ad service VLAN tag (S-tag), the outer tag of Q-in-Q.
    pub const QINQ: EtherType = EtherType(0x88a8);
    /// IEEE 802 local experimental EtherType 1 (builders use it for raw payloads).
    pub const LOCAL_EXPERIMENTAL: EtherType = EtherType(0x88b5);

    /// True for a VLAN tag protocol identifier (0x8100 C-tag or 0x88a8 S-tag).
    #[inline]
    pub const fn is_vlan_tag(self) -> bool {
        self.0 == Self::VLAN.0 || self.0 == Self::QINQ.0
    }
}

/// An IP protocol number / IPv6 next-header value (IANA "Assigned Internet Protocol Numbers").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpProto(pub u8);

impl IpProto {
    /// IPv6 hop-by-hop options extension header (RFC 8200 §4.3).
    pub const HOPOPT: IpProto = IpProto(0);
    /// ICMP for IPv4 (RFC 792).
    pub const ICMP: IpProto = IpProto(1);
    /// IPv4 encapsulation (IP in IP, RFC 2003).
    pub const IPIP: IpProto = IpProto(4);
    /// TCP (RFC 9293).
    pub const TCP: IpProto = IpProto(6);
    /// UDP (RFC 768).
    pub const UDP: IpProto = IpProto(17);
    /// IPv6 encapsulation (RFC 2473).
    pub const IPV6: IpProto = IpProto(41);
    /// IPv6 routing extension header (RFC 8200 §4.4).
    pub const ROUTING: IpProto = IpProto(43);
    /// IPv6 fragment extension header (RFC 8200 §4.5).
    pub const FRAGMENT: IpProto = IpProto(44);
    /// Encapsulating security payload (RFC 4303): ends the parseable chain.
    pub const ESP: IpProto = IpProto(50);
    /// Authentication header (RFC 4302), an IPv6 extension header.
    pub const AH: IpProto = IpProto(51);
    /// ICMP for IPv6 (RFC 4443).
    pub const ICMPV6: IpProto = IpProto(58);
    /// No next header (RFC 8200 §4.7).
    pub const NO_NEXT: IpProto = IpProto(59);
    /// IPv6 destination options extension header (RFC 8200 §4.6).
    pub const DSTOPTS: IpProto = IpProto(60);
    /// Reserved for experimentation (RFC 3692); builders use it for raw payloads.
    pub const EXPERIMENTAL: IpProto = IpProto(253);

    /// True for the IPv6 extension headers the parser skips: hop-by-hop, routing, fragment,
    /// destination options and AH.
    #[inline]
    pub const fn is_ipv6_ext(self) -> bool {
        matches!(self.0, 0 | 43 | 44 | 51 | 60)
    }
}

/// Why a header did not parse. Small and `Copy`; each variant is exactly one [`DropReason`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Malformed {
    /// Frame shorter than an Ethernet header (14 bytes).
    EthTruncated,
    /// 802.1Q/802.1ad tag shorter than 4 bytes.
    VlanTruncated,
    /// ARP packet shorter than its Ethernet/IPv4 fixed part (28 bytes).
    ArpTruncated,
    /// ARP address lengths are not Ethernet/IPv4 (hlen 6, plen 4).
    ArpUnsupported,
    /// IPv4 header or payload shorter than its length fields.
    Ipv4Truncated,
    /// IPv4 version field is not 4.
    Ipv4Version,
    /// IPv4 IHL below 5.
    Ipv4BadIhl,
    /// IPv4 total length smaller than the header length.
    Ipv4BadTotalLen,
    /// IPv4 header checksum does not verify ([`Ipv4::verify_checksum`]).
    Ipv4BadChecksum,
    /// IPv6 fixed header or payload shorter than its length fields.
    Ipv6Truncated,
    /// IPv6 version field is not 6.
    Ipv6Version,
    /// An IPv6 extension header runs past the payload.
    Ipv6ExtTruncated,
    /// More IPv6 extension headers than [`ipv6::MAX_EXT_HEADERS`].
    TooManyHeaders,
    /// ICMP/ICMPv6 message shorter than its 8-byte header.
    IcmpTruncated,
    /// UDP header cut short, or its length field below 8 or past the data.
    UdpTruncated,
    /// TCP header cut short, or its data offset below 5 or past the data.
    TcpTruncated,
    /// VXLAN header shorter than 8 bytes.
    VxlanTruncated,
    /// VXLAN I flag not set (RFC 7348 §5).
    VxlanBadFlags,
}

impl Malformed {
    /// Every variant (for tests and docs).
    pub const ALL: &'static [Malformed] = &[
        Malformed::EthTruncated,
        Malformed::VlanTruncated,
        Malformed::ArpTruncated,
        Malformed::ArpUnsupported,
        Malformed::Ipv4Truncated,
        Malformed::Ipv4Version,
        Malformed::Ipv4BadIhl,
        Malformed::Ipv4BadTotalLen,
        Malformed::Ipv4BadChecksum,
        Malformed::Ipv6Truncated,
        Malformed::Ipv6Version,
        Malformed::Ipv6ExtTruncated,
        Malformed::TooManyHeaders,
        Malformed::IcmpTruncated,
        Malformed::UdpTruncated,
        Malformed::TcpTruncated,
        Malformed::VxlanTruncated,
        Malformed::VxlanBadFlags,
    ];

    /// The drop reason a stage records for this failure.
    #[inline]
    pub const fn drop_reason(self) -> DropReason {
        match self {
            Malformed::EthTruncated => DropReason::EthTruncated,
            Malformed::VlanTruncated => DropReason::VlanTruncated,
            Malformed::ArpTruncated => DropReason::ArpTruncated,
            Malformed::ArpUnsupported => DropReason::ArpUnsupported,
            Malformed::Ipv4Truncated => DropReason::Ipv4Truncated,
            Malformed::Ipv4Version => DropReason::Ipv4Version,
            Malformed::Ipv4BadIhl => DropReason::Ipv4BadIhl,
            Malformed::Ipv4BadTotalLen => DropReason::Ipv4BadTotalLen,
            Malformed::Ipv4BadChecksum => DropReason::Ipv4BadChecksum,
            Malformed::Ipv6Truncated => DropReason::Ipv6Truncated,
            Malformed::Ipv6Version => DropReason::Ipv6Version,
            Malformed::Ipv6ExtTruncated => DropReason::Ipv6ExtTruncated,
            Malformed::TooManyHeaders => DropReason::TooManyHeaders,
            Malformed::IcmpTruncated => DropReason::IcmpTruncated,
            Malformed::UdpTruncated => DropReason::UdpTruncated,
            Malformed::TcpTruncated => DropReason::TcpTruncated,
            Malformed::VxlanTruncated => DropReason::VxlanTruncated,
            Malformed::VxlanBadFlags => DropReason::VxlanBadFlags,
        }
    }
}

impl From<Malformed> for DropReason {
    #[inline]
    fn from(m: Malformed) -> DropReason {
        m.drop_reason()
    }
}

/// A `Repr::emit` target buffer was too short: `needed` bytes are required.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferTooSmall {
    /// Bytes the emitter needs.
    pub needed: usize,
}

/// Returns `buf[..n]` or a [`BufferTooSmall`].
#[inline]
pub(crate) fn room(buf: &mut [u8], n: usize) -> Result<&mut [u8], BufferTooSmall> {
    buf.get_mut(..n).ok_or(BufferTooSmall { needed: n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_maps_one_to_one() {
        let mut seen = std::collections::HashSet::new();
        for m in Malformed::ALL {
            assert!(seen.insert(m.drop_reason()), "{m:?} shares a drop reason");
            assert_eq!(m.drop_reason().severity(), crate::drop::Severity::Error);
            assert_eq!(DropReason::from(*m), m.drop_reason());
        }
    }

    #[test]
    fn code_points() {
        assert!(EtherType::VLAN.is_vlan_tag() && EtherType::QINQ.is_vlan_tag());
        assert!(!EtherType::IPV4.is_vlan_tag());
        for p in [IpProto::HOPOPT, IpProto::ROUTING, IpProto::FRAGMENT, IpProto::DSTOPTS, IpProto::AH] {
            assert!(p.is_ipv6_ext());
        }
        assert!(!IpProto::ESP.is_ipv6_ext() && !IpProto::TCP.is_ipv6_ext());
    }
}
