//! Broadband Forum vendor-specific IEs (enterprise ID 3561), BBF TR-459 clause 6.6.
//!
//! TR-459 is not public. The IE numbers and layouts here are the ones Wireshark's PFCP
//! dissector (4.0, `packet-pfcp.c`, "Enterprise IE decoding Broadband Forum") decodes, which
//! is what the tshark interop test checks against. The IEs we do not type (PPP protocol,
//! verification timers, LCP magic number, L2TP endpoint/type, the grouped PPP LCP
//! connectivity and L2TP tunnel) are kept raw like any unknown IE.
//!
//! ```text
//!  Octets 1-2  Type = 32768 + n      Octets 3-4  Length (includes the Enterprise ID)
//!  Octets 5-6  Enterprise ID = 3561  Octets 7..  data
//! ```

use crate::error::DecodeError;
use crate::wire::{Cx, IeKey, IeValue, Rd, W};

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
