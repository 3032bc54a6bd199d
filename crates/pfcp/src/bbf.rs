//! Broadband Forum vendor-specific IEs (enterprise ID 3561), BBF TR-459 clause 6.6.
//!
//! TR-459 is not public. The IE numbers and layouts here are the ones Wireshark's PFCP
//! dissector (4.0, `packet-pfcp.c`, "Enterprise IE decoding Broadband Forum") decodes, which
//! is what the tshark interop test checks against.
//!
//! The IPoE IEs have fields in the messages and groups that carry them ([`crate::group`],
//! [`crate::message`]). The PPPoE and L2TP ones (PPP Protocol, Verification Timers, PPP LCP
//! Magic Number, L2TP Tunnel Endpoint / Session ID / Type, and the grouped PPP LCP
//! Connectivity and L2TP Tunnel) have types too, but no place in our structs: they arrive in
//! `unknown`, and [`BbfIe::from_raw`] reads any BBF IE found there.
//!
//! ```text
//!  Octets 1-2  Type = 32768 + n      Octets 3-4  Length (includes the Enterprise ID)
//!  Octets 5-6  Enterprise ID = 3561  Octets 7..  data
//! ```

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::DecodeError;
use crate::wire::{grouped, ies, Cx, IeKey, IeValue, RawIe, Rd, W};

/// IANA enterprise number of the Broadband Forum.
pub const ENTERPRISE_BBF: u16 = 3561;

/// BBF IE type numbers (TR-459 clause 6.6, as Wireshark numbers them).
pub mod bbf_type {
    #![allow(missing_docs)]
    pub const UP_FUNCTION_FEATURES: u16 = 32768;
    pub const LOGICAL_PORT: u16 = 32769;
    pub const OUTER_HEADER_CREATION: u16 = 32770;
    pub const OUTER_HEADER_REMOVAL: u16 = 32771;
    pub const PPPOE_SESSION_ID: u16 = 32772;
    pub const PPP_PROTOCOL: u16 = 32773;
    pub const VERIFICATION_TIMERS: u16 = 32774;
    pub const PPP_LCP_MAGIC_NUMBER: u16 = 32775;
    pub const MTU: u16 = 32776;
    pub const L2TP_TUNNEL_ENDPOINT: u16 = 32777;
    pub const L2TP_SESSION_ID: u16 = 32778;
    pub const L2TP_TYPE: u16 = 32779;
    pub const PPP_LCP_CONNECTIVITY: u16 = 32780;
    pub const L2TP_TUNNEL: u16 = 32781;
}

pub(crate) const fn b(t: u16) -> IeKey {
    IeKey::vendor(ENTERPRISE_BBF, t)
}

/// BBF UP Function Features (TR-459 6.6.1): 4 octets, the first holding the flags; octet 7
/// of the IE is the most significant byte of the `u32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BbfUpFunctionFeatures(pub u32);

impl BbfUpFunctionFeatures {
    /// PPPoE supported.
    pub const PPPOE: u32 = 0x0100_0000;
    /// IPoE supported.
    pub const IPOE: u32 = 0x0200_0000;
    /// L2TP access concentrator.
    pub const LAC: u32 = 0x0400_0000;
    /// L2TP network server.
    pub const LNS: u32 = 0x0800_0000;
    /// LCP keepalive offload.
    pub const LCP_KEEPALIVE_OFFLOAD: u32 = 0x1000_0000;
}

impl IeValue for BbfUpFunctionFeatures {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        // Shorter senders are padded with zero octets; at least the flag octet is needed.
        let mut r = Rd::new(v, cx);
        let mut o = [r.u8()?, 0, 0, 0];
        for (slot, byte) in o.iter_mut().skip(1).zip(r.rest()) {
            *slot = *byte;
        }
        Ok(Self(u32::from_be_bytes(o)))
    }
    fn encode_value(&self, w: &mut W) {
        w.u32(self.0);
    }
}

/// Logical Port (TR-459 6.6.2): the access port's name, an octet string (printable ASCII in
/// practice).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LogicalPort(pub Vec<u8>);

impl IeValue for LogicalPort {
    fn decode_value(v: &[u8], _: Cx) -> Result<Self, DecodeError> {
        Ok(Self(v.to_vec()))
    }
    fn encode_value(&self, w: &mut W) {
        w.bytes(&self.0);
    }
}

/// BBF Outer Header Creation (TR-459 6.6.3): description, then L2TP tunnel and session IDs
/// (zero when not L2TP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BbfOuterHeaderCreation {
    /// [`Self::TRAFFIC_ENDPOINT`] and friends.
    pub description: u16,
    /// L2TP Tunnel ID.
    pub tunnel_id: u16,
    /// L2TP Session ID.
    pub session_id: u16,
}

impl BbfOuterHeaderCreation {
    /// CPR-NSH.
    pub const CPR_NSH: u16 = 0x0100;
    /// Traffic-Endpoint: rebuild the access headers (MAC, S-TAG, C-TAG) of the traffic
    /// endpoint the PDR names.
    pub const TRAFFIC_ENDPOINT: u16 = 0x0200;
    /// L2TP.
    pub const L2TP: u16 = 0x0300;
    /// PPP.
    pub const PPP: u16 = 0x0400;
}

impl IeValue for BbfOuterHeaderCreation {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        Ok(Self { description: r.u16()?, tunnel_id: r.u16()?, session_id: r.u16()? })
    }
    fn encode_value(&self, w: &mut W) {
        w.u16(self.description);
        w.u16(self.tunnel_id);
        w.u16(self.session_id);
    }
}

/// BBF Outer Header Removal (TR-459 6.6.4): which access headers to strip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BbfOuterHeaderRemoval(pub u8);

impl BbfOuterHeaderRemoval {
    /// Ethernet (with its VLAN tags).
    pub const ETHERNET: BbfOuterHeaderRemoval = BbfOuterHeaderRemoval(1);
    /// PPPoE/Ethernet.
    pub const PPPOE_ETHERNET: BbfOuterHeaderRemoval = BbfOuterHeaderRemoval(2);
    /// PPP/PPPoE/Ethernet.
    pub const PPP_PPPOE_ETHERNET: BbfOuterHeaderRemoval = BbfOuterHeaderRemoval(3);
    /// L2TP.
    pub const L2TP: BbfOuterHeaderRemoval = BbfOuterHeaderRemoval(4);
    /// PPP/L2TP.
    pub const PPP_L2TP: BbfOuterHeaderRemoval = BbfOuterHeaderRemoval(5);
}

impl IeValue for BbfOuterHeaderRemoval {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        Ok(Self(Rd::new(v, cx).u8()?))
    }
    fn encode_value(&self, w: &mut W) {
        w.u8(self.0);
    }
}

/// PPPoE Session ID (TR-459 6.6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PppoeSessionId(pub u16);

impl IeValue for PppoeSessionId {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        Ok(Self(Rd::new(v, cx).u16()?))
    }
    fn encode_value(&self, w: &mut W) {
        w.u16(self.0);
    }
}

/// MTU (TR-459 6.6.9), bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Mtu(pub u16);

impl IeValue for Mtu {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        Ok(Self(Rd::new(v, cx).u16()?))
    }
    fn encode_value(&self, w: &mut W) {
        w.u16(self.0);
    }
}

/// PPP Protocol (TR-459 6.6.6): which PPP traffic a PDR matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PppProtocol {
    /// Control packets (flag bit 3).
    pub control: bool,
    /// Data packets (flag bit 2).
    pub data: bool,
    /// One specific PPP protocol number (flag bit 1 and the 2-octet protocol field).
    pub protocol: Option<u16>,
}

impl IeValue for PppProtocol {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let f = r.u8()?;
        let protocol = if f & 0x01 != 0 { Some(r.u16()?) } else { None };
        Ok(Self { control: f & 0x04 != 0, data: f & 0x02 != 0, protocol })
    }
    fn encode_value(&self, w: &mut W) {
        w.u8(u8::from(self.control) << 2 | u8::from(self.data) << 1 | u8::from(self.protocol.is_some()));
        if let Some(p) = self.protocol {
            w.u16(p);
        }
    }
}

/// Verification Timers (TR-459 6.6.7): LCP echo interval and retry count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VerificationTimers {
    /// Interval, seconds.
    pub interval_s: u16,
    /// Count.
    pub count: u8,
}

impl IeValue for VerificationTimers {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        Ok(Self { interval_s: r.u16()?, count: r.u8()? })
    }
    fn encode_value(&self, w: &mut W) {
        w.u16(self.interval_s);
        w.u8(self.count);
    }
}

/// PPP LCP Magic Number (TR-459 6.6.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PppLcpMagicNumber {
    /// Our magic number.
    pub tx: u32,
    /// The peer's magic number.
    pub rx: u32,
}

impl IeValue for PppLcpMagicNumber {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        Ok(Self { tx: r.u32()?, rx: r.u32()? })
    }
    fn encode_value(&self, w: &mut W) {
        w.u32(self.tx);
        w.u32(self.rx);
    }
}

/// L2TP Tunnel Endpoint (TR-459 6.6.10): flags (CH, V6, V4), tunnel ID, then the IPv4 and
/// IPv6 addresses their flags announce. (Wireshark 4.0 reads both addresses whatever the
/// flags say, so it agrees with this layout when both are present.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct L2tpTunnelEndpoint {
    /// CH: the UP function chooses the endpoint.
    pub choose: bool,
    /// Tunnel ID.
    pub tunnel_id: u16,
    /// IPv4 address (V4).
    pub ipv4: Option<Ipv4Addr>,
    /// IPv6 address (V6).
    pub ipv6: Option<Ipv6Addr>,
}

impl IeValue for L2tpTunnelEndpoint {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        let mut r = Rd::new(v, cx);
        let f = r.u8()?;
        let tunnel_id = r.u16()?;
        let ipv4 = if f & 0x01 != 0 { Some(Ipv4Addr::from(r.array::<4>()?)) } else { None };
        let ipv6 = if f & 0x02 != 0 { Some(Ipv6Addr::from(r.array::<16>()?)) } else { None };
        Ok(Self { choose: f & 0x04 != 0, tunnel_id, ipv4, ipv6 })
    }
    fn encode_value(&self, w: &mut W) {
        w.u8(u8::from(self.choose) << 2 | u8::from(self.ipv6.is_some()) << 1 | u8::from(self.ipv4.is_some()));
        w.u16(self.tunnel_id);
        if let Some(a) = self.ipv4 {
            w.bytes(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            w.bytes(&a.octets());
        }
    }
}

/// L2TP Session ID (TR-459 6.6.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct L2tpSessionId(pub u16);

impl IeValue for L2tpSessionId {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        Ok(Self(Rd::new(v, cx).u16()?))
    }
    fn encode_value(&self, w: &mut W) {
        w.u16(self.0);
    }
}

/// L2TP Type (TR-459 6.6.12): the T flag, set for control messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct L2tpType {
    /// T: control (set) or data (clear).
    pub control: bool,
}

impl IeValue for L2tpType {
    fn decode_value(v: &[u8], cx: Cx) -> Result<Self, DecodeError> {
        Ok(Self { control: Rd::new(v, cx).u8()? & 0x01 != 0 })
    }
    fn encode_value(&self, w: &mut W) {
        w.u8(u8::from(self.control));
    }
}

ies! {
    /// PPP LCP Connectivity (TR-459 6.6.13, grouped). Its IE table is not public; the LCP
    /// keepalive offload needs the two typed here, anything else stays in `unknown`.
    pub struct PppLcpConnectivity {
        /// Verification Timers.
        verification_timers: Option<VerificationTimers> = b(bbf_type::VERIFICATION_TIMERS),
        /// PPP LCP Magic Number.
        ppp_lcp_magic_number: Option<PppLcpMagicNumber> = b(bbf_type::PPP_LCP_MAGIC_NUMBER),
    }
}

ies! {
    /// L2TP Tunnel (TR-459 6.6.14, grouped). Its IE table is not public; the tunnel endpoint
    /// is typed, anything else stays in `unknown`.
    pub struct L2tpTunnel {
        /// L2TP Tunnel Endpoint.
        l2tp_tunnel_endpoint: Option<L2tpTunnelEndpoint> = b(bbf_type::L2TP_TUNNEL_ENDPOINT),
    }
}

grouped!(PppLcpConnectivity, L2tpTunnel);

/// Any BBF IE, typed: what [`BbfIe::from_raw`] makes of a BBF IE found in an `unknown` list.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum BbfIe {
    UpFunctionFeatures(BbfUpFunctionFeatures),
    LogicalPort(LogicalPort),
    OuterHeaderCreation(BbfOuterHeaderCreation),
    OuterHeaderRemoval(BbfOuterHeaderRemoval),
    PppoeSessionId(PppoeSessionId),
    PppProtocol(PppProtocol),
    VerificationTimers(VerificationTimers),
    PppLcpMagicNumber(PppLcpMagicNumber),
    Mtu(Mtu),
    L2tpTunnelEndpoint(L2tpTunnelEndpoint),
    L2tpSessionId(L2tpSessionId),
    L2tpType(L2tpType),
    PppLcpConnectivity(PppLcpConnectivity),
    L2tpTunnel(L2tpTunnel),
}

impl BbfIe {
    /// Reads a raw IE as a BBF IE: `None` when it is not a BBF IE (another enterprise, a 3GPP
    /// type) or a BBF type Wireshark does not know either.
    ///
    /// # Errors
    /// The inner `Err` is a BBF IE whose data does not fit its layout; offsets count from the
    /// first data octet (after the Enterprise ID).
    pub fn from_raw(raw: &RawIe) -> Option<Result<BbfIe, DecodeError>> {
        use bbf_type as t;
        if raw.enterprise() != Some(ENTERPRISE_BBF) {
            return None;
        }
        let data = raw.value.get(2..)?;
        let cx = Cx { ie_type: raw.ie_type, off: 0 };
        fn d<T: IeValue>(data: &[u8], cx: Cx, f: fn(T) -> BbfIe) -> Option<Result<BbfIe, DecodeError>> {
            Some(T::decode_value(data, cx).map(f))
        }
        match raw.ie_type {
            t::UP_FUNCTION_FEATURES => d(data, cx, BbfIe::UpFunctionFeatures),
            t::LOGICAL_PORT => d(data, cx, BbfIe::LogicalPort),
            t::OUTER_HEADER_CREATION => d(data, cx, BbfIe::OuterHeaderCreation),
            t::OUTER_HEADER_REMOVAL => d(data, cx, BbfIe::OuterHeaderRemoval),
            t::PPPOE_SESSION_ID => d(data, cx, BbfIe::PppoeSessionId),
            t::PPP_PROTOCOL => d(data, cx, BbfIe::PppProtocol),
            t::VERIFICATION_TIMERS => d(data, cx, BbfIe::VerificationTimers),
            t::PPP_LCP_MAGIC_NUMBER => d(data, cx, BbfIe::PppLcpMagicNumber),
            t::MTU => d(data, cx, BbfIe::Mtu),
            t::L2TP_TUNNEL_ENDPOINT => d(data, cx, BbfIe::L2tpTunnelEndpoint),
            t::L2TP_SESSION_ID => d(data, cx, BbfIe::L2tpSessionId),
            t::L2TP_TYPE => d(data, cx, BbfIe::L2tpType),
            t::PPP_LCP_CONNECTIVITY => d(data, cx, BbfIe::PppLcpConnectivity),
            t::L2TP_TUNNEL => d(data, cx, BbfIe::L2tpTunnel),
            _ => None,
        }
    }

    /// The IE as raw bytes (type, Enterprise ID 3561 and data), to put in an `unknown` list.
    pub fn to_raw(&self) -> RawIe {
        use bbf_type as t;
        fn put<T: IeValue>(ie_type: u16, v: &T) -> RawIe {
            let mut value = ENTERPRISE_BBF.to_be_bytes().to_vec();
            v.encode_value(&mut W { out: &mut value, overflow: None });
            RawIe { ie_type, value }
        }
        match self {
            BbfIe::UpFunctionFeatures(v) => put(t::UP_FUNCTION_FEATURES, v),
            BbfIe::LogicalPort(v) => put(t::LOGICAL_PORT, v),
            BbfIe::OuterHeaderCreation(v) => put(t::OUTER_HEADER_CREATION, v),
            BbfIe::OuterHeaderRemoval(v) => put(t::OUTER_HEADER_REMOVAL, v),
            BbfIe::PppoeSessionId(v) => put(t::PPPOE_SESSION_ID, v),
            BbfIe::PppProtocol(v) => put(t::PPP_PROTOCOL, v),
            BbfIe::VerificationTimers(v) => put(t::VERIFICATION_TIMERS, v),
            BbfIe::PppLcpMagicNumber(v) => put(t::PPP_LCP_MAGIC_NUMBER, v),
            BbfIe::Mtu(v) => put(t::MTU, v),
            BbfIe::L2tpTunnelEndpoint(v) => put(t::L2TP_TUNNEL_ENDPOINT, v),
            BbfIe::L2tpSessionId(v) => put(t::L2TP_SESSION_ID, v),
            BbfIe::L2tpType(v) => put(t::L2TP_TYPE, v),
            BbfIe::PppLcpConnectivity(v) => put(t::PPP_LCP_CONNECTIVITY, v),
            BbfIe::L2tpTunnel(v) => put(t::L2TP_TUNNEL, v),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Bytes by hand, as Wireshark's BBF dissector lays them out.
    #[test]
    fn bbf_ie_bytes_to_fields_and_back() {
        let cases: [(u16, &[u8], BbfIe); 4] = [
            (
                bbf_type::PPP_PROTOCOL,
                &[0x05, 0xc0, 0x21],
                BbfIe::PppProtocol(PppProtocol { control: true, data: false, protocol: Some(0xc021) }),
            ),
            (
                bbf_type::VERIFICATION_TIMERS,
                &[0x00, 0x1e, 0x03],
                BbfIe::VerificationTimers(VerificationTimers { interval_s: 30, count: 3 }),
            ),
            (
                bbf_type::PPP_LCP_MAGIC_NUMBER,
                &[1, 2, 3, 4, 5, 6, 7, 8],
                BbfIe::PppLcpMagicNumber(PppLcpMagicNumber { tx: 0x0102_0304, rx: 0x0506_0708 }),
            ),
            (bbf_type::L2TP_TYPE, &[0x01], BbfIe::L2tpType(L2tpType { control: true })),
        ];
        for (ty, data, ie) in cases {
            let raw = RawIe { ie_type: ty, value: [&[0x0d, 0xe9][..], data].concat() };
            assert_eq!(BbfIe::from_raw(&raw), Some(Ok(ie.clone())));
            assert_eq!(ie.to_raw(), raw);
        }
        // Not BBF: another enterprise, or a BBF type nobody knows.
        assert_eq!(BbfIe::from_raw(&RawIe { ie_type: bbf_type::MTU, value: vec![0x7e, 0xd9, 5, 0xdc] }), None);
        assert_eq!(BbfIe::from_raw(&RawIe { ie_type: 32900, value: vec![0x0d, 0xe9] }), None);
        // Too short for its layout.
        let e = BbfIe::from_raw(&RawIe { ie_type: bbf_type::MTU, value: vec![0x0d, 0xe9, 5] }).unwrap().unwrap_err();
        assert_eq!((e.kind, e.ie_type), (crate::ErrorKind::InvalidLength, Some(bbf_type::MTU)));
    }
}
