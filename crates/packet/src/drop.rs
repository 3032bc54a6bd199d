//! Every named reason a packet can be dropped for, declared once.
//!
//! The macro generates the enum, its snake_case names (used in counter paths such as
//! `ip4-forward/ttl_expired`, in JSON and in docs), severities and descriptions. Names are API:
//! a rename keeps the old name as an alias for a release.

/// How bad a drop is: `Error` for malformed input, `Warn` for resource exhaustion, `Info` for
/// policy (a rule said so).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The packet was policy-dropped (ACL deny, TTL expiry, no route): normal operation.
    Info,
    /// A resource ran out (queue full, flow table full, pool empty).
    Warn,
    /// The packet was malformed.
    Error,
}

macro_rules! drop_reasons {
    ($( $(#[$doc:meta])* $variant:ident $name:literal $sev:ident $desc:literal; )*) => {
        /// A named reason for dropping a packet. `Copy`, two bytes.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum DropReason { $( $(#[$doc])* $variant, )* }

        impl DropReason {
            /// Every reason, in declaration order (index = `self as usize`).
            pub const ALL: &'static [DropReason] = &[ $( DropReason::$variant, )* ];
            /// Number of reasons: size of per-stage drop counter arrays.
            pub const COUNT: usize = Self::ALL.len();

            /// The snake_case name used in counters, JSON and docs.
            pub const fn name(self) -> &'static str {
                match self { $( DropReason::$variant => $name, )* }
            }
            /// How serious the drop is.
            pub const fn severity(self) -> Severity {
                match self { $( DropReason::$variant => Severity::$sev, )* }
            }
            /// One sentence on when it happens.
            pub const fn description(self) -> &'static str {
                match self { $( DropReason::$variant => $desc, )* }
            }
            /// The reason with this name, if any.
            pub fn from_name(name: &str) -> Option<DropReason> {
                Self::ALL.iter().copied().find(|r| r.name() == name)
            }
        }
    };
}

drop_reasons! {
    EthTruncated     "eth_truncated"     Error "frame shorter than an Ethernet header";
    VlanTruncated    "vlan_truncated"    Error "802.1Q/802.1ad tag cut short";
    ArpTruncated     "arp_truncated"     Error "ARP packet shorter than its fixed part";
    ArpUnsupported   "arp_unsupported"   Error "ARP address lengths are not Ethernet/IPv4 (6 and 4)";
    Ipv4Truncated    "ipv4_truncated"    Error "IPv4 header or payload shorter than its length fields";
    Ipv4Version      "ipv4_version"      Error "IPv4 version field is not 4";
    Ipv4BadIhl       "ipv4_bad_ihl"      Error "IPv4 IHL below 5 (20 bytes)";
    Ipv4BadTotalLen  "ipv4_bad_total_len" Error "IPv4 total length smaller than the header";
    Ipv4BadChecksum  "ipv4_bad_checksum" Error "IPv4 header checksum does not verify";
    Ipv6Truncated    "ipv6_truncated"    Error "IPv6 header or payload shorter than its length fields";
    Ipv6Version      "ipv6_version"      Error "IPv6 version field is not 6";
    Ipv6ExtTruncated "ipv6_ext_truncated" Error "IPv6 extension header chain cut short";
    IcmpTruncated    "icmp_truncated"    Error "ICMP/ICMPv6 header cut short";
    UdpTruncated     "udp_truncated"     Error "UDP header cut short or length field inconsistent";
    TcpTruncated     "tcp_truncated"     Error "TCP header cut short or data offset inconsistent";
    VxlanTruncated   "vxlan_truncated"   Error "VXLAN header or inner frame cut short";
    VxlanBadFlags    "vxlan_bad_flags"   Error "VXLAN I flag not set";
    TooManyHeaders   "too_many_headers"  Error "header stack deeper than the parser allows";
    NotIp            "not_ip"            Info  "not an IPv4 or IPv6 packet where one was required";
    TtlExpired       "ttl_expired"       Info  "TTL or hop limit would reach zero while forwarding";
    NoRoute          "no_route"          Info  "no route or forwarding entry matched";
    TableMiss        "table_miss"        Info  "a table missed and its default action drops";
    ActionDrop       "action_drop"       Info  "an action dropped the packet";
    AclDeny          "acl_deny"          Info  "a deny rule matched";
    MeterRed         "meter_red"         Info  "a meter coloured the packet red";
    FlowTableFull    "flow_table_full"   Warn  "a new connection found the flow table full";
    ConntrackInvalid "conntrack_invalid" Info  "connection tracking refused the packet (out of window, unexpected TCP flags, not a SYN)";
    QueueFull        "queue_full"        Warn  "egress queue or shared buffer had no room";
    TmThreshold      "tm_threshold"      Info  "traffic manager: the queue is at its dynamic share of the shared buffer";
    TmWred           "tm_wred"           Info  "traffic manager: WRED dropped a packet that is not ECN-capable, or the average is above the maximum";
    TmBufferFull     "tm_buffer_full"    Warn  "traffic manager: the shared buffer has no bytes or descriptors left";
    TmOversize       "tm_oversize"       Warn  "traffic manager: longer than the burst of a shaper on its path, so it could never leave";
    TmNoQueue        "tm_no_queue"       Warn  "traffic manager: no such port, class or pipe";
    VlanFiltered     "vlan_filtered"     Info  "the input port is not a member of the frame's VLAN (802.1Q ingress filtering)";
    L2SamePort       "l2_same_port"      Info  "the destination MAC was learned on the input port (802.1D filtering)";
    FloodNoBuffer    "flood_no_buffer"   Warn  "no free buffer for a flooded copy";
    NoHeadroom       "no_headroom"       Warn  "no headroom left in the buffer to encapsulate";
    PortDown         "port_down"         Warn  "the output port does not exist or is down";
    TxFailed         "tx_failed"         Warn  "the port's transmit ring had no room";
    NoVerdict        "no_verdict"        Info  "the pipeline ended without forwarding or dropping the packet";
    PuntFull         "punt_full"         Warn  "the control-plane queue had no room";
    NoSession        "no_session"        Info  "no subscriber session matched the frame";
    SpoofedSource    "spoofed_source"    Info  "the source address is not the one of the frame's subscriber session";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_snake_case_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
            assert!(seen.insert(r.name()), "duplicate {}", r.name());
            assert!(r.name().bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'));
            assert_eq!(DropReason::from_name(r.name()), Some(*r));
        }
        assert_eq!(DropReason::COUNT, DropReason::ALL.len());
    }
}
