//! Values inside the rules and reports: SDF Filter, Apply Action, Reporting / Usage Report
//! Triggers, Gate Status, MBR / GBR and Volume Measurement (TS 29.244 clause 8.2).

use crate::error::DecodeError;
use crate::wire::{Cx, IeValue, Rd, W};

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
