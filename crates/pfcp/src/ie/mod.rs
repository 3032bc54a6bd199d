//! Leaf IEs of TS 29.244 clause 8.2 that TR-459 IPoE sessions use, and the IE type numbers
//! (TS 29.244 Table 8.1.2-1). This file holds the one-number, interface and octet-string IEs;
//! `address.rs` the addresses and encapsulation headers (Node ID, F-SEID, UE IP address, MAC,
//! VLAN tags, outer header creation/removal); `rule.rs` the values inside PDR/FAR/QER/URR rules
//! and usage reports (SDF filter, apply action, triggers, gate, bit rates, volumes).
//!
//! Each type decodes from the IE data and encodes it back. An IE longer than its fields is
//! accepted and its extra octets are ignored (TS 29.244 clause 8.1.1: IEs are extendable,
//! "the receiver shall ignore" octets it does not know); one shorter than its fields is
//! `InvalidLength`. Spare bits are written as zero.

use crate::error::DecodeError;
use crate::wire::{Cx, IeKey, IeValue, Rd, W};

mod address;
mod rule;

pub use address::*;
pub use rule::*;

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
    pub const PFCP_ASSOCIATION_RELEASE_REQUEST: u16 = 111;
    pub const GRACEFUL_RELEASE_PERIOD: u16 = 112;
    pub const CREATE_TRAFFIC_ENDPOINT: u16 = 127;
    pub const UPDATE_TRAFFIC_ENDPOINT: u16 = 129;
    pub const REMOVE_TRAFFIC_ENDPOINT: u16 = 130;
    pub const TRAFFIC_ENDPOINT_ID: u16 = 131;
    pub const ETHERNET_PACKET_FILTER: u16 = 132;
    pub const MAC_ADDRESS: u16 = 133;
    pub const C_TAG: u16 = 134;
    pub const S_TAG: u16 = 135;
    pub const ETHERTYPE: u16 = 136;
    pub const ETHERNET_FILTER_ID: u16 = 138;
    pub const ETHERNET_FILTER_PROPERTIES: u16 = 139;
    pub const PFCP_SESSION_RETENTION_INFORMATION: u16 = 183;
    pub const PFCPASRSP_FLAGS: u16 = 184;
    pub const CP_PFCP_ENTITY_IP_ADDRESS: u16 = 185;
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
    /// PFCPASRsp-Flags (clause 8.2.149): [`PfcpasRspFlags::PSREI`] in an Association Setup
    /// Response says the UP function kept the sessions of the former association.
    PfcpasRspFlags(u8) via u8 / u8
);
impl PfcpasRspFlags {
    /// PFCP Session Retained Indication.
    pub const PSREI: u8 = 0x01;
}
number_ie!(
    /// PFCP Association Release Request (clause 8.2.77), the IE:
    /// [`PfcpAssociationReleaseRequest::SARR`] asks the CP function to release the association.
    PfcpAssociationReleaseRequest(u8) via u8 / u8
);
impl PfcpAssociationReleaseRequest {
    /// PFCP Association Release Request.
    pub const SARR: u8 = 0x01;
    /// Non-Zero Usage Reports for the released sessions.
    pub const URSS: u8 = 0x02;
}

/// A timer as TS 29.244 clause 8.2.35 (via TS 24.008 GPRS Timer) encodes it, e.g. the
/// Graceful Release Period (clause 8.2.78): a 3-bit unit and a 5-bit value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Timer {
    /// Unit: 0 = 2 s, 1 = 1 min, 2 = 10 min, 3 = 1 h, 4 = 10 h, 7 = infinite.
    pub unit: u8,
    /// Value (0-31) in that unit.
    pub value: u8,
}

impl Timer {
    /// The duration in seconds (`None` for the infinite unit 7; units 5 and 6 are read as
    /// 1 minute, as TS 24.008 says for unknown units).
    pub fn seconds(&self) -> Option<u32> {
        let unit_s = match self.unit {
            0 => 2,
            1 | 5 | 6 => 60,
            2 => 600,
            3 => 3600,
            4 => 36_000,
            _ => return None,
        };
        Some(unit_s * u32::from(self.value))
    }
}

impl IeValue for Timer {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let b = Rd::new(v, cx).u8()?;
        Ok(Self { unit: b >> 5, value: b & 0x1f })
    }
    fn encode_value(&self, w: &mut W) {
        w.u8((self.unit & 0x07) << 5 | (self.value & 0x1f));
    }
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
}
