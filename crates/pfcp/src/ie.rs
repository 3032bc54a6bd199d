//! Leaf IEs of TS 29.244 clause 8.2 that TR-459 IPoE sessions use, and the IE type numbers
//! (TS 29.244 Table 8.1.2-1).
//!
//! Each type decodes from the IE data and encodes it back. An IE longer than its fields is
//! accepted and its extra octets are ignored (TS 29.244 clause 8.1.1: IEs are extendable,
//! "the receiver shall ignore" octets it does not know); one shorter than its fields is
//! `InvalidLength`. Spare bits are written as zero.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::DecodeError;
use crate::wire::{Cx, IeKey, IeValue, Rd, W};

/// IE type numbers (TS 29.244 Table 8.1.2-1).
pub mod ie_type {
    #![allow(missing_docs)]
    pub const CREATE_PDR: u16 = 1;
    pub const PDI: u16 = 2;
    pub const CREATE_FAR: u16 = 3;
    pub const FORWARDING_PARAMETERS: u16 = 4;
    pub const CREATE_URR: u16 = 6;
    pub const CREATE_QER: u16 = 7;
    pub const UPDATE_PDR: u16 = 9;
    pub const UPDATE_FAR: u16 = 10;
    pub const UPDATE_FORWARDING_PARAMETERS: u16 = 11;
    pub const UPDATE_URR: u16 = 13;
    pub const UPDATE_QER: u16 = 14;
    pub const REMOVE_PDR: u16 = 15;
    pub const REMOVE_FAR: u16 = 16;
    pub const REMOVE_URR: u16 = 17;
    pub const REMOVE_QER: u16 = 18;
    pub const CAUSE: u16 = 19;
    pub const SOURCE_INTERFACE: u16 = 20;
    pub const NETWORK_INSTANCE: u16 = 22;
    pub const SDF_FILTER: u16 = 23;
    pub const GATE_STATUS: u16 = 25;
    pub const MBR: u16 = 26;
    pub const GBR: u16 = 27;
    pub const PRECEDENCE: u16 = 29;
    pub const REPORTING_TRIGGERS: u16 = 37;
    pub const REPORT_TYPE: u16 = 39;
    pub const OFFENDING_IE: u16 = 40;
    pub const DESTINATION_INTERFACE: u16 = 42;
    pub const UP_FUNCTION_FEATURES: u16 = 43;
    pub const APPLY_ACTION: u16 = 44;
    pub const PDR_ID: u16 = 56;
    pub const F_SEID: u16 = 57;
    pub const NODE_ID: u16 = 60;
    pub const MEASUREMENT_METHOD: u16 = 62;
    pub const USAGE_REPORT_TRIGGER: u16 = 63;
    pub const MEASUREMENT_PERIOD: u16 = 64;
    pub const VOLUME_MEASUREMENT: u16 = 66;
    pub const DURATION_MEASUREMENT: u16 = 67;
    pub const START_TIME: u16 = 75;
    pub const END_TIME: u16 = 76;
    pub const USAGE_REPORT_SMR: u16 = 78;
    pub const USAGE_REPORT_SDR: u16 = 79;
    pub const USAGE_REPORT_SRR: u16 = 80;
    pub const URR_ID: u16 = 81;
    pub const OUTER_HEADER_CREATION: u16 = 84;
    pub const CP_FUNCTION_FEATURES: u16 = 89;
    pub const UE_IP_ADDRESS: u16 = 93;
    pub const OUTER_HEADER_REMOVAL: u16 = 95;
    pub const RECOVERY_TIME_STAMP: u16 = 96;
    pub const UR_SEQN: u16 = 104;
    pub const FAR_ID: u16 = 108;
    pub const QER_ID: u16 = 109;
    pub const CREATE_TRAFFIC_ENDPOINT: u16 = 127;
    pub const TRAFFIC_ENDPOINT_ID: u16 = 131;
    pub const ETHERNET_PACKET_FILTER: u16 = 132;
    pub const MAC_ADDRESS: u16 = 133;
    pub const C_TAG: u16 = 134;
    pub const S_TAG: u16 = 135;
    pub const ETHERTYPE: u16 = 136;
    pub const ETHERNET_FILTER_ID: u16 = 138;
    pub const ETHERNET_FILTER_PROPERTIES: u16 = 139;
}

pub(crate) const fn k(t: u16) -> IeKey {
    IeKey::tgpp(t)
}

/// Declares a one-number IE: a newtype over an unsigned integer of the given width.
macro_rules! number_ie {
    ($(#[$m:meta])* $name:ident($t:ty) via $rd:ident / $wr:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
        pub struct $name(pub $t);
        impl IeValue for $name {
            fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
                Ok(Self(Rd::new(v, cx).$rd()?))
            }
            fn encode_value(&self, w: &mut W) {
                w.$wr(self.0)
            }
        }
    };
}

number_ie!(
    /// Cause (clause 8.2.1).
    Cause(u8) via u8 / u8
);
impl Cause {
    /// Request accepted (success).
    pub const REQUEST_ACCEPTED: Cause = Cause(1);
    /// Request rejected (reason not specified).
    pub const REQUEST_REJECTED: Cause = Cause(64);
    /// Session context not found.
    pub const SESSION_CONTEXT_NOT_FOUND: Cause = Cause(65);
    /// Mandatory IE missing.
    pub const MANDATORY_IE_MISSING: Cause = Cause(66);
    /// Conditional IE missing.
    pub const CONDITIONAL_IE_MISSING: Cause = Cause(67);
    /// Invalid length.
    pub const INVALID_LENGTH: Cause = Cause(68);
    /// Mandatory IE incorrect.
    pub const MANDATORY_IE_INCORRECT: Cause = Cause(69);
    /// No established PFCP Association.
    pub const NO_ESTABLISHED_ASSOCIATION: Cause = Cause(72);
    /// Rule creation / modification failure.
    pub const RULE_CREATION_FAILURE: Cause = Cause(73);
    /// No resources available.
    pub const NO_RESOURCES_AVAILABLE: Cause = Cause(75);
    /// Service not supported.
    pub const SERVICE_NOT_SUPPORTED: Cause = Cause(76);
    /// System failure.
    pub const SYSTEM_FAILURE: Cause = Cause(77);
}

number_ie!(
    /// Recovery Time Stamp (clause 8.2.65): seconds since 1900-01-01 (NTP era 0).
    RecoveryTimeStamp(u32) via u32 / u32
);
number_ie!(
    /// PDR ID (clause 8.2.36).
    PdrId(u16) via u16 / u16
);
number_ie!(
    /// Precedence (clause 8.2.11): lower values match first.
    Precedence(u32) via u32 / u32
);
number_ie!(
    /// FAR ID (clause 8.2.74). Bit 32 set: predefined by the UP function.
    FarId(u32) via u32 / u32
);
number_ie!(
    /// QER ID (clause 8.2.75).
    QerId(u32) via u32 / u32
);
number_ie!(
    /// URR ID (clause 8.2.54).
    UrrId(u32) via u32 / u32
);
number_ie!(
    /// Measurement Period (clause 8.2.42), seconds.
    MeasurementPeriod(u32) via u32 / u32
);
number_ie!(
    /// Traffic Endpoint ID (clause 8.2.92).
    TrafficEndpointId(u8) via u8 / u8
);
number_ie!(
    /// Ethertype (clause 8.2.96).
    Ethertype(u16) via u16 / u16
);
number_ie!(
    /// Ethernet Filter ID (clause 8.2.98).
    EthernetFilterId(u32) via u32 / u32
);
number_ie!(
    /// Offending IE (clause 8.2.22): the type of the IE that caused a rejection.
    OffendingIe(u16) via u16 / u16
);
number_ie!(
    /// UR-SEQN (clause 8.2.71).
    UrSeqn(u32) via u32 / u32
);
number_ie!(
    /// Start Time (clause 8.2.52), NTP seconds.
    StartTime(u32) via u32 / u32
);
number_ie!(
    /// End Time (clause 8.2.53), NTP seconds.
    EndTime(u32) via u32 / u32
);
number_ie!(
    /// Duration Measurement (clause 8.2.45), seconds.
    DurationMeasurement(u32) via u32 / u32
);
number_ie!(
    /// Measurement Method (clause 8.2.40): [`MeasurementMethod::DURAT`] and friends.
    MeasurementMethod(u8) via u8 / u8
);
impl MeasurementMethod {
    /// Duration.
    pub const DURAT: u8 = 0x01;
    /// Volume.
    pub const VOLUM: u8 = 0x02;
    /// Event.
    pub const EVENT: u8 = 0x04;
}
number_ie!(
    /// Report Type (clause 8.2.21): [`ReportType::USAR`] and friends.
    ReportType(u8) via u8 / u8
);
impl ReportType {
    /// Downlink Data Report.
    pub const DLDR: u8 = 0x01;
    /// Usage Report.
    pub const USAR: u8 = 0x02;
    /// Error Indication Report.
    pub const ERIR: u8 = 0x04;
    /// User Plane Inactivity Report.
    pub const UPIR: u8 = 0x08;
}
number_ie!(
    /// Ethernet Filter Properties (clause 8.2.99): bit 1 BIDE (bidirectional).
    EthernetFilterProperties(u8) via u8 / u8
);

/// Declares an IE whose value is one 4-bit code in the low nibble (interfaces).
macro_rules! nibble_ie {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub u8);
        impl IeValue for $name {
            fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
                Ok(Self(Rd::new(v, cx).u8()? & 0x0f))
            }
            fn encode_value(&self, w: &mut W) {
                w.u8(self.0 & 0x0f)
            }
        }
        impl $name {
            /// Access (towards the subscriber).
            pub const ACCESS: $name = $name(0);
            /// Core (towards the network).
            pub const CORE: $name = $name(1);
            /// SGi-LAN / N6-LAN.
            pub const SGI_LAN: $name = $name(2);
            /// CP-function (the control plane, e.g. DHCP redirected over CPRi).
            pub const CP_FUNCTION: $name = $name(3);
        }
    };
}

nibble_ie!(
    /// Source Interface (clause 8.2.2).
    SourceInterface
);
nibble_ie!(
    /// Destination Interface (clause 8.2.24).
    DestinationInterface
);

/// Declares an IE whose value is opaque bytes.
macro_rules! bytes_ie {
    ($(#[$m:meta])* $name:ident, min $min:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub Vec<u8>);
        impl IeValue for $name {
            #[allow(unused_comparisons, clippy::absurd_extreme_comparisons)]
            fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
                if v.len() < $min {
                    return Err(cx.short(v.len()));
                }
                Ok(Self(v.to_vec()))
            }
            fn encode_value(&self, w: &mut W) {
                w.bytes(&self.0)
            }
        }
    };
}

bytes_ie!(
    /// Network Instance (clause 8.2.4): an octet string, usually a name in DNS-label form
    /// ("it may be encoded as a Domain Name or an Access Point Name (APN)"); see
    /// [`NetworkInstance::from_name`].
    NetworkInstance, min 0
);

impl NetworkInstance {
    /// `name` in DNS-label form (TS 23.003 clause 9.1), as scapy and most peers send it.
    /// Labels longer than 63 bytes are cut.
    pub fn from_name(name: &str) -> Self {
        let mut v = Vec::with_capacity(name.len() + 1);
        for label in name.split('.') {
            let b = label.as_bytes();
            let b = b.get(..63).unwrap_or(b);
            v.push(b.len() as u8);
            v.extend_from_slice(b);
        }
        Self(v)
    }

    /// The name: the labels joined by dots when the bytes are DNS labels, otherwise the bytes
    /// as text (some peers send a plain string).
    pub fn name(&self) -> String {
        let mut out = String::new();
        let mut rest = self.0.as_slice();
        while let [len, tail @ ..] = rest {
            match tail.get(..usize::from(*len)) {
                Some(label) if *len > 0 && *len < 64 => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(&String::from_utf8_lossy(label));
                    rest = tail.get(usize::from(*len)..).unwrap_or_default();
                }
                _ => return String::from_utf8_lossy(&self.0).into_owned(),
            }
        }
        out
    }
}
bytes_ie!(
    /// UP Function Features (clause 8.2.25): the feature octets as sent (octet 5 bit 1 is
    /// BUCP, …); at least 2 octets.
    UpFunctionFeatures, min 2
);
bytes_ie!(
    /// CP Function Features (clause 8.2.58): the feature octets as sent (bit 1 LOAD, bit 2
    /// OVRL, …); at least 1 octet.
    CpFunctionFeatures, min 1
);

/// Node ID (clause 8.2.38).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NodeId {
    /// Type 0.
    Ipv4(Ipv4Addr),
    /// Type 1.
    Ipv6(Ipv6Addr),
    /// Type 2: an FQDN, written as DNS labels (RFC 1035 clause 3.1, no root label).
    Fqdn(String),
}

impl Default for NodeId {
    fn default() -> Self {
        NodeId::Ipv4(Ipv4Addr::UNSPECIFIED)
    }
}

impl IeValue for NodeId {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        match r.u8()? & 0x0f {
            0 => Ok(NodeId::Ipv4(Ipv4Addr::from(r.array::<4>()?))),
            1 => Ok(NodeId::Ipv6(Ipv6Addr::from(r.array::<16>()?))),
            2 => {
                let mut labels = r.rest();
                let mut name = String::new();
                if labels.is_empty() {
                    return Err(cx.short(1));
                }
                while let [len, rest @ ..] = labels {
                    let at = v.len() - labels.len();
                    let len = usize::from(*len);
                    let label = rest.get(..len).ok_or(cx.short(v.len()))?;
                    // Labels are letters, digits and hyphens (RFC 1035 clause 2.3.1); we
                    // also allow '_' but nothing that would not survive the dotted form.
                    // RFC 1035 clause 2.3.4: "labels 63 octets or less".
                    if len == 0 || len > 63 || !label.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_') {
                        return Err(cx.bad(at));
                    }
                    if !name.is_empty() {
                        name.push('.');
                    }
                    name.extend(label.iter().map(|b| char::from(*b)));
                    labels = rest.get(len..).unwrap_or_default();
                }
                Ok(NodeId::Fqdn(name))
            }
            _ => Err(cx.bad(0)),
        }
    }
    fn encode_value(&self, w: &mut W) {
        match self {
            NodeId::Ipv4(a) => {
                w.u8(0);
                w.bytes(&a.octets());
            }
            NodeId::Ipv6(a) => {
                w.u8(1);
                w.bytes(&a.octets());
            }
            NodeId::Fqdn(name) => {
                w.u8(2);
                for label in name.split('.') {
                    let b = label.as_bytes();
                    let b = b.get(..63).unwrap_or(b);
                    w.u8(b.len() as u8);
                    w.bytes(b);
                }
            }
        }
    }
}

/// F-SEID (clause 8.2.37): a session endpoint identifier and the node's address(es).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FSeid {
    /// SEID.
    pub seid: u64,
    /// IPv4 address (flag V4).
    pub ipv4: Option<Ipv4Addr>,
    /// IPv6 address (flag V6).
    pub ipv6: Option<Ipv6Addr>,
}

impl IeValue for FSeid {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let flags = r.u8()?;
        let seid = r.u64()?;
        let ipv4 = if flags & 0x02 != 0 { Some(Ipv4Addr::from(r.array::<4>()?)) } else { None };
        let ipv6 = if flags & 0x01 != 0 { Some(Ipv6Addr::from(r.array::<16>()?)) } else { None };
        Ok(Self { seid, ipv4, ipv6 })
    }
    fn encode_value(&self, w: &mut W) {
        w.u8(u8::from(self.ipv4.is_some()) << 1 | u8::from(self.ipv6.is_some()));
        w.u64(self.seid);
        if let Some(a) = self.ipv4 {
            w.bytes(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            w.bytes(&a.octets());
        }
    }
}

/// UE IP Address (clause 8.2.62).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UeIpAddress {
    /// IPv4 address (flag V4).
    pub ipv4: Option<Ipv4Addr>,
    /// IPv6 address (flag V6).
    pub ipv6: Option<Ipv6Addr>,
    /// S/D: set when the address is a destination address (downlink PDI).
    pub destination: bool,
    /// IPv6 Prefix Delegation Bits (flag IPv6D).
    pub ipv6_prefix_delegation_bits: Option<u8>,
    /// CHV4: the UP function chooses the IPv4 address.
    pub choose_ipv4: bool,
    /// CHV6: the UP function chooses the IPv6 address.
    pub choose_ipv6: bool,
    /// IPv6 Prefix Length (flag IP6PL).
    pub ipv6_prefix_length: Option<u8>,
}

impl IeValue for UeIpAddress {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let f = r.u8()?;
        let ipv4 = if f & 0x02 != 0 { Some(Ipv4Addr::from(r.array::<4>()?)) } else { None };
        let ipv6 = if f & 0x01 != 0 { Some(Ipv6Addr::from(r.array::<16>()?)) } else { None };
        let ipv6_prefix_delegation_bits = if f & 0x08 != 0 { Some(r.u8()?) } else { None };
        let ipv6_prefix_length = if f & 0x40 != 0 { Some(r.u8()?) } else { None };
        Ok(Self {
            ipv4,
            ipv6,
            destination: f & 0x04 != 0,
            ipv6_prefix_delegation_bits,
            choose_ipv4: f & 0x10 != 0,
            choose_ipv6: f & 0x20 != 0,
            ipv6_prefix_length,
        })
    }
    fn encode_value(&self, w: &mut W) {
        let f = u8::from(self.ipv6.is_some())
            | u8::from(self.ipv4.is_some()) << 1
            | u8::from(self.destination) << 2
            | u8::from(self.ipv6_prefix_delegation_bits.is_some()) << 3
            | u8::from(self.choose_ipv4) << 4
            | u8::from(self.choose_ipv6) << 5
            | u8::from(self.ipv6_prefix_length.is_some()) << 6;
        w.u8(f);
        if let Some(a) = self.ipv4 {
            w.bytes(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            w.bytes(&a.octets());
        }
        if let Some(b) = self.ipv6_prefix_delegation_bits {
            w.u8(b);
        }
        if let Some(b) = self.ipv6_prefix_length {
            w.u8(b);
        }
    }
}

/// SDF Filter (clause 8.2.5).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SdfFilter {
    /// Flow Description (flag FD): an IPFilterRule (RFC 6733), e.g. `permit out ip from any
    /// to assigned`.
    pub flow_description: Option<Vec<u8>>,
    /// ToS Traffic Class (flag TTC): type-of-service and mask.
    pub tos_traffic_class: Option<u16>,
    /// Security Parameter Index (flag SPI).
    pub security_parameter_index: Option<u32>,
    /// Flow Label (flag FL), 20 bits in 3 octets.
    pub flow_label: Option<u32>,
    /// SDF Filter ID (flag BID).
    pub sdf_filter_id: Option<u32>,
}

impl IeValue for SdfFilter {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let f = r.u8()?;
        r.u8()?; // spare
        let flow_description = if f & 0x01 != 0 {
            let n = usize::from(r.u16()?);
            Some(r.bytes(n)?.to_vec())
        } else {
            None
        };
        let tos_traffic_class = if f & 0x02 != 0 { Some(r.u16()?) } else { None };
        let security_parameter_index = if f & 0x04 != 0 { Some(r.u32()?) } else { None };
        let flow_label = if f & 0x08 != 0 { Some(r.u24()?) } else { None };
        let sdf_filter_id = if f & 0x10 != 0 { Some(r.u32()?) } else { None };
        Ok(Self { flow_description, tos_traffic_class, security_parameter_index, flow_label, sdf_filter_id })
    }
    fn encode_value(&self, w: &mut W) {
        let f = u8::from(self.flow_description.is_some())
            | u8::from(self.tos_traffic_class.is_some()) << 1
            | u8::from(self.security_parameter_index.is_some()) << 2
            | u8::from(self.flow_label.is_some()) << 3
            | u8::from(self.sdf_filter_id.is_some()) << 4;
        w.u8(f);
        w.u8(0);
        if let Some(d) = &self.flow_description {
            let d = d.get(..usize::from(u16::MAX)).unwrap_or(d);
            w.u16(d.len() as u16);
            w.bytes(d);
        }
        if let Some(v) = self.tos_traffic_class {
            w.u16(v);
        }
        if let Some(v) = self.security_parameter_index {
            w.u32(v);
        }
        if let Some(v) = self.flow_label {
            w.u24(v & 0x00ff_ffff);
        }
        if let Some(v) = self.sdf_filter_id {
            w.u32(v);
        }
    }
}

/// Outer Header Removal (clause 8.2.64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OuterHeaderRemoval {
    /// Outer Header Removal Description: 0 GTP-U/UDP/IPv4, 1 GTP-U/UDP/IPv6, 2 UDP/IPv4,
    /// 3 UDP/IPv6, 4 IPv4, 5 IPv6, 6 GTP-U/UDP/IP, 7 VLAN S-TAG, 8 S-TAG and C-TAG.
    pub description: u8,
    /// GTP-U Extension Header Deletion (octet 6), when present.
    pub gtpu_extension_header_deletion: Option<u8>,
}

impl OuterHeaderRemoval {
    /// GTP-U/UDP/IPv4.
    pub const GTPU_UDP_IPV4: u8 = 0;
    /// VLAN S-TAG.
    pub const S_TAG: u8 = 7;
    /// S-TAG and C-TAG.
    pub const S_TAG_AND_C_TAG: u8 = 8;
}

impl IeValue for OuterHeaderRemoval {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let description = r.u8()?;
        let ext = if v.len() > 1 { Some(r.u8()?) } else { None };
        Ok(Self { description, gtpu_extension_header_deletion: ext })
    }
    fn encode_value(&self, w: &mut W) {
        w.u8(self.description);
        if let Some(e) = self.gtpu_extension_header_deletion {
            w.u8(e);
        }
    }
}

/// Apply Action (clause 8.2.26): octet 5 in the low byte, octet 6 in the high byte (written
/// only when non-zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ApplyAction(pub u16);

impl ApplyAction {
    /// Drop.
    pub const DROP: u16 = 0x01;
    /// Forward.
    pub const FORW: u16 = 0x02;
    /// Buffer.
    pub const BUFF: u16 = 0x04;
    /// Notify the CP function.
    pub const NOCP: u16 = 0x08;
    /// Duplicate.
    pub const DUPL: u16 = 0x10;
}

impl IeValue for ApplyAction {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let lo = r.u8()?;
        let hi = if v.len() > 1 { r.u8()? } else { 0 };
        Ok(Self(u16::from_le_bytes([lo, hi])))
    }
    fn encode_value(&self, w: &mut W) {
        let [lo, hi] = self.0.to_le_bytes();
        w.u8(lo);
        if hi != 0 {
            w.u8(hi);
        }
    }
}

/// Reporting Triggers (clause 8.2.19) and Usage Report Trigger (clause 8.2.41): octet 5 in
/// bits 0-7, octet 6 in bits 8-15, octet 7 in bits 16-23.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Triggers(pub u32);

impl Triggers {
    /// PERIO: periodic reporting.
    pub const PERIO: u32 = 0x01;
    /// VOLTH: volume threshold.
    pub const VOLTH: u32 = 0x02;
    /// TIMTH: time threshold.
    pub const TIMTH: u32 = 0x04;
    /// START: start of traffic.
    pub const START: u32 = 0x10;
    /// STOPT: stop of traffic.
    pub const STOPT: u32 = 0x20;
    /// VOLQU: volume quota (octet 6 bit 1).
    pub const VOLQU: u32 = 0x0100;
    /// TERMR: termination report (Usage Report Trigger octet 6 bit 4).
    pub const TERMR: u32 = 0x0800;
}

impl IeValue for Triggers {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let a = r.u8()?;
        let b = r.u8()?;
        let c = if v.len() > 2 { r.u8()? } else { 0 };
        Ok(Self(u32::from_le_bytes([a, b, c, 0])))
    }
    fn encode_value(&self, w: &mut W) {
        let [a, b, c, _] = self.0.to_le_bytes();
        w.u8(a);
        w.u8(b);
        w.u8(c);
    }
}

/// Gate Status (clause 8.2.7): 0 open, 1 closed, per direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GateStatus {
    /// UL gate (bits 4-3).
    pub ul: u8,
    /// DL gate (bits 2-1).
    pub dl: u8,
}

impl GateStatus {
    /// Both gates open.
    pub const OPEN: GateStatus = GateStatus { ul: 0, dl: 0 };
}

impl IeValue for GateStatus {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let b = Rd::new(v, cx).u8()?;
        Ok(Self { ul: (b >> 2) & 0x03, dl: b & 0x03 })
    }
    fn encode_value(&self, w: &mut W) {
        w.u8((self.ul & 0x03) << 2 | (self.dl & 0x03));
    }
}

/// MBR (clause 8.2.8) and GBR (clause 8.2.9): uplink and downlink rates in kbit/s, 40 bits
/// each on the wire (higher bits are not sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BitRate {
    /// Uplink, kbit/s.
    pub ul_kbps: u64,
    /// Downlink, kbit/s.
    pub dl_kbps: u64,
}

impl IeValue for BitRate {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        Ok(Self { ul_kbps: r.u40()?, dl_kbps: r.u40()? })
    }
    fn encode_value(&self, w: &mut W) {
        w.u40(self.ul_kbps);
        w.u40(self.dl_kbps);
    }
}

/// Volume Measurement (clause 8.2.44): bytes and packets, each present or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VolumeMeasurement {
    /// Total volume, bytes (TOVOL).
    pub total_bytes: Option<u64>,
    /// Uplink volume, bytes (ULVOL).
    pub ul_bytes: Option<u64>,
    /// Downlink volume, bytes (DLVOL).
    pub dl_bytes: Option<u64>,
    /// Total packets (TONOP).
    pub total_pkts: Option<u64>,
    /// Uplink packets (ULNOP).
    pub ul_pkts: Option<u64>,
    /// Downlink packets (DLNOP).
    pub dl_pkts: Option<u64>,
}

impl VolumeMeasurement {
    fn fields(&self) -> [Option<u64>; 6] {
        [self.total_bytes, self.ul_bytes, self.dl_bytes, self.total_pkts, self.ul_pkts, self.dl_pkts]
    }
}

impl IeValue for VolumeMeasurement {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let f = r.u8()?;
        let mut vals = [None; 6];
        for (i, slot) in vals.iter_mut().enumerate() {
            if f & (1 << i) != 0 {
                *slot = Some(r.u64()?);
            }
        }
        let [total_bytes, ul_bytes, dl_bytes, total_pkts, ul_pkts, dl_pkts] = vals;
        Ok(Self { total_bytes, ul_bytes, dl_bytes, total_pkts, ul_pkts, dl_pkts })
    }
    fn encode_value(&self, w: &mut W) {
        let vals = self.fields();
        let f = vals.iter().enumerate().fold(0u8, |f, (i, v)| f | u8::from(v.is_some()) << i);
        w.u8(f);
        for v in vals.into_iter().flatten() {
            w.u64(v);
        }
    }
}

/// MAC address (clause 8.2.93).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MacAddress {
    /// Source MAC address (SOUR).
    pub source: Option<[u8; 6]>,
    /// Destination MAC address (DEST).
    pub destination: Option<[u8; 6]>,
    /// Upper source MAC address of a range (USOU).
    pub upper_source: Option<[u8; 6]>,
    /// Upper destination MAC address of a range (UDES).
    pub upper_destination: Option<[u8; 6]>,
}

impl IeValue for MacAddress {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let f = r.u8()?;
        let mut vals = [None; 4];
        for (i, slot) in vals.iter_mut().enumerate() {
            if f & (1 << i) != 0 {
                *slot = Some(r.array::<6>()?);
            }
        }
        let [source, destination, upper_source, upper_destination] = vals;
        Ok(Self { source, destination, upper_source, upper_destination })
    }
    fn encode_value(&self, w: &mut W) {
        let vals = [self.source, self.destination, self.upper_source, self.upper_destination];
        let f = vals.iter().enumerate().fold(0u8, |f, (i, v)| f | u8::from(v.is_some()) << i);
        w.u8(f);
        for v in vals.into_iter().flatten() {
            w.bytes(&v);
        }
    }
}

/// C-TAG (clause 8.2.94) and S-TAG (clause 8.2.95): each part present or not.
///
/// ```text
///  Octet 5  Spare | VID | DEI | PCP          (flags)
///  Octet 6  VID bits 12-9 | DEI | PCP value
///  Octet 7  VID bits 8-1
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Priority code point (3 bits).
    pub pcp: Option<u8>,
    /// Drop eligible indicator.
    pub dei: Option<bool>,
    /// VLAN ID (12 bits).
    pub vid: Option<u16>,
}

impl IeValue for VlanTag {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let f = r.u8()?;
        let b6 = r.u8()?;
        let b7 = r.u8()?;
        Ok(Self {
            pcp: (f & 0x01 != 0).then_some(b6 & 0x07),
            dei: (f & 0x02 != 0).then_some(b6 & 0x08 != 0),
            vid: (f & 0x04 != 0).then_some(u16::from(b6 >> 4) << 8 | u16::from(b7)),
        })
    }
    fn encode_value(&self, w: &mut W) {
        let f = u8::from(self.pcp.is_some()) | u8::from(self.dei.is_some()) << 1 | u8::from(self.vid.is_some()) << 2;
        let vid = self.vid.unwrap_or(0) & 0x0fff;
        let b6 = ((vid >> 8) as u8) << 4 | u8::from(self.dei.unwrap_or(false)) << 3 | (self.pcp.unwrap_or(0) & 0x07);
        w.u8(f);
        w.u8(b6);
        w.u8(vid as u8);
    }
}

/// Outer Header Creation (clause 8.2.56). Which fields are on the wire follows from
/// `description`; a field the description calls for but that is `None` is written as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OuterHeaderCreation {
    /// Outer Header Creation Description, octet 5 in the high byte: [`Self::GTPU_UDP_IPV4`]…
    pub description: u16,
    /// TEID (GTP-U descriptions).
    pub teid: Option<u32>,
    /// IPv4 address.
    pub ipv4: Option<Ipv4Addr>,
    /// IPv6 address.
    pub ipv6: Option<Ipv6Addr>,
    /// UDP port (UDP/IP descriptions).
    pub port: Option<u16>,
    /// C-TAG, 3 octets as in [`VlanTag`].
    pub c_tag: Option<[u8; 3]>,
    /// S-TAG, 3 octets as in [`VlanTag`].
    pub s_tag: Option<[u8; 3]>,
}

impl OuterHeaderCreation {
    /// GTP-U/UDP/IPv4.
    pub const GTPU_UDP_IPV4: u16 = 0x0100;
    /// GTP-U/UDP/IPv6.
    pub const GTPU_UDP_IPV6: u16 = 0x0200;
    /// UDP/IPv4.
    pub const UDP_IPV4: u16 = 0x0400;
    /// UDP/IPv6.
    pub const UDP_IPV6: u16 = 0x0800;
    /// IPv4.
    pub const IPV4: u16 = 0x1000;
    /// IPv6.
    pub const IPV6: u16 = 0x2000;
    /// C-TAG.
    pub const C_TAG: u16 = 0x4000;
    /// S-TAG.
    pub const S_TAG: u16 = 0x8000;

    fn has(&self, bits: u16) -> bool {
        self.description & bits != 0
    }
}

impl IeValue for OuterHeaderCreation {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let mut o = Self { description: r.u16()?, ..Self::default() };
        if o.has(Self::GTPU_UDP_IPV4 | Self::GTPU_UDP_IPV6) {
            o.teid = Some(r.u32()?);
        }
        if o.has(Self::GTPU_UDP_IPV4 | Self::UDP_IPV4 | Self::IPV4) {
            o.ipv4 = Some(Ipv4Addr::from(r.array::<4>()?));
        }
        if o.has(Self::GTPU_UDP_IPV6 | Self::UDP_IPV6 | Self::IPV6) {
            o.ipv6 = Some(Ipv6Addr::from(r.array::<16>()?));
        }
        if o.has(Self::UDP_IPV4 | Self::UDP_IPV6) {
            o.port = Some(r.u16()?);
        }
        if o.has(Self::C_TAG) {
            o.c_tag = Some(r.array()?);
        }
        if o.has(Self::S_TAG) {
            o.s_tag = Some(r.array()?);
        }
        Ok(o)
    }
    fn encode_value(&self, w: &mut W) {
        w.u16(self.description);
        if self.has(Self::GTPU_UDP_IPV4 | Self::GTPU_UDP_IPV6) {
            w.u32(self.teid.unwrap_or(0));
        }
        if self.has(Self::GTPU_UDP_IPV4 | Self::UDP_IPV4 | Self::IPV4) {
            w.bytes(&self.ipv4.unwrap_or(Ipv4Addr::UNSPECIFIED).octets());
        }
        if self.has(Self::GTPU_UDP_IPV6 | Self::UDP_IPV6 | Self::IPV6) {
            w.bytes(&self.ipv6.unwrap_or(Ipv6Addr::UNSPECIFIED).octets());
        }
        if self.has(Self::UDP_IPV4 | Self::UDP_IPV6) {
            w.u16(self.port.unwrap_or(0));
        }
        if self.has(Self::C_TAG) {
            w.bytes(&self.c_tag.unwrap_or_default());
        }
        if self.has(Self::S_TAG) {
            w.bytes(&self.s_tag.unwrap_or_default());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn network_instance_names() {
        let n = NetworkInstance::from_name("access.isp");
        assert_eq!(n.0, b"\x06access\x03isp");
        assert_eq!(n.name(), "access.isp");
        assert_eq!(NetworkInstance(b"vrf-1".to_vec()).name(), "vrf-1");
    }

    /// A 64-octet label is refused: the encoder could not write it back (labels are at most
    /// 63 octets), so accepting it would break decode(encode(decode(x))) == decode(x).
    #[test]
    fn node_id_fqdn_label_limits() {
        let cx = Cx { ie_type: ie_type::NODE_ID, off: 12 };
        let mut v = vec![2, 63];
        v.extend([b'a'; 63]);
        assert_eq!(NodeId::decode_value(&v, cx), Ok(NodeId::Fqdn("a".repeat(63))));
        v[1] = 64;
        v.push(b'a');
        let e = NodeId::decode_value(&v, cx).unwrap_err();
        assert_eq!((e.kind, e.offset), (crate::ErrorKind::IeIncorrect, 13));
    }
}
