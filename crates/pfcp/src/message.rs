//! PFCP messages (TS 29.244 clause 7): the header (clause 7.2.2) and the typed body of each
//! node and session message a TR-459 control and user plane exchange.
//!
//! ```text
//!  Octet 1      Version (3 bits) | Spare | Spare | FO | MP | S
//!  Octet 2      Message Type
//!  Octets 3-4   Message Length (after octet 4)
//!  Octets 5-12  SEID (S = 1 only)
//!  next 3       Sequence Number
//!  next 1       Message Priority (bits 8-5, MP = 1) | Spare
//! ```

use crate::bbf::{b, bbf_type as bt, BbfUpFunctionFeatures};
use crate::error::{DecodeError, EncodeError, ErrorKind};
use crate::group::*;
use crate::ie::{ie_type as t, k, *};
use crate::wire::{ies, W};

/// Message type numbers (TS 29.244 Table 7.3-1).
pub mod msg_type {
    #![allow(missing_docs)]
    pub const HEARTBEAT_REQUEST: u8 = 1;
    pub const HEARTBEAT_RESPONSE: u8 = 2;
    pub const ASSOCIATION_SETUP_REQUEST: u8 = 5;
    pub const ASSOCIATION_SETUP_RESPONSE: u8 = 6;
    pub const ASSOCIATION_UPDATE_REQUEST: u8 = 7;
    pub const ASSOCIATION_UPDATE_RESPONSE: u8 = 8;
    pub const ASSOCIATION_RELEASE_REQUEST: u8 = 9;
    pub const ASSOCIATION_RELEASE_RESPONSE: u8 = 10;
    pub const SESSION_ESTABLISHMENT_REQUEST: u8 = 50;
    pub const SESSION_ESTABLISHMENT_RESPONSE: u8 = 51;
    pub const SESSION_MODIFICATION_REQUEST: u8 = 52;
    pub const SESSION_MODIFICATION_RESPONSE: u8 = 53;
    pub const SESSION_DELETION_REQUEST: u8 = 54;
    pub const SESSION_DELETION_RESPONSE: u8 = 55;
    pub const SESSION_REPORT_REQUEST: u8 = 56;
    pub const SESSION_REPORT_RESPONSE: u8 = 57;
}

/// The header of a node message (S = 0, clause 7.2.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NodeHeader {
    /// Sequence number (24 bits).
    pub seq: u32,
}

/// The header of a session message (S = 1, clause 7.2.2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SessionHeader {
    /// The receiver's SEID (0 in a Session Establishment Request).
    pub seid: u64,
    /// Sequence number (24 bits).
    pub seq: u32,
    /// Message priority (4 bits, 0 highest; the MP flag is set when present).
    pub priority: Option<u8>,
}

ies! {
    /// Heartbeat Request (clause 7.4.2.1).
    pub struct HeartbeatRequest {
        /// Recovery Time Stamp (M).
        recovery_time_stamp: RecoveryTimeStamp = k(t::RECOVERY_TIME_STAMP),
    }
}

ies! {
    /// Heartbeat Response (clause 7.4.2.2).
    pub struct HeartbeatResponse {
        /// Recovery Time Stamp (M).
        recovery_time_stamp: RecoveryTimeStamp = k(t::RECOVERY_TIME_STAMP),
    }
}

ies! {
    /// Association Setup Request (clause 7.4.4.1). TR-459 adds the BBF UP Function Features.
    pub struct AssociationSetupRequest {
        /// Node ID (M).
        node_id: NodeId = k(t::NODE_ID),
        /// Recovery Time Stamp (M).
        recovery_time_stamp: RecoveryTimeStamp = k(t::RECOVERY_TIME_STAMP),
        /// UP Function Features (C: sent by a UP function).
        up_function_features: Option<UpFunctionFeatures> = k(t::UP_FUNCTION_FEATURES),
        /// CP Function Features (C: sent by a CP function).
        cp_function_features: Option<CpFunctionFeatures> = k(t::CP_FUNCTION_FEATURES),
        /// BBF UP Function Features.
        bbf_up_function_features: Option<BbfUpFunctionFeatures> = b(bt::UP_FUNCTION_FEATURES),
        /// PFCP Session Retention Information (O: sent by a CP function that wants the sessions
        /// of its former association kept).
        pfcp_session_retention_information: Option<PfcpSessionRetentionInformation> = k(t::PFCP_SESSION_RETENTION_INFORMATION),
    }
}

ies! {
    /// Association Setup Response (clause 7.4.4.2).
    pub struct AssociationSetupResponse {
        /// Node ID (M).
        node_id: NodeId = k(t::NODE_ID),
        /// Cause (M).
        cause: Cause = k(t::CAUSE),
        /// Recovery Time Stamp (M).
        recovery_time_stamp: RecoveryTimeStamp = k(t::RECOVERY_TIME_STAMP),
        /// UP Function Features.
        up_function_features: Option<UpFunctionFeatures> = k(t::UP_FUNCTION_FEATURES),
        /// CP Function Features.
        cp_function_features: Option<CpFunctionFeatures> = k(t::CP_FUNCTION_FEATURES),
        /// BBF UP Function Features.
        bbf_up_function_features: Option<BbfUpFunctionFeatures> = b(bt::UP_FUNCTION_FEATURES),
        /// PFCPASRsp-Flags (O: PSREI when the UP function kept the former association's sessions).
        pfcpasrsp_flags: Option<PfcpasRspFlags> = k(t::PFCPASRSP_FLAGS),
    }
}

ies! {
    /// Association Update Request (clause 7.4.4.3).
    pub struct AssociationUpdateRequest {
        /// Node ID (M).
        node_id: NodeId = k(t::NODE_ID),
        /// UP Function Features.
        up_function_features: Option<UpFunctionFeatures> = k(t::UP_FUNCTION_FEATURES),
        /// CP Function Features.
        cp_function_features: Option<CpFunctionFeatures> = k(t::CP_FUNCTION_FEATURES),
        /// PFCP Association Release Request (a UP function asking to be released).
        association_release_request: Option<PfcpAssociationReleaseRequest> = k(t::PFCP_ASSOCIATION_RELEASE_REQUEST),
        /// Graceful Release Period.
        graceful_release_period: Option<Timer> = k(t::GRACEFUL_RELEASE_PERIOD),
        /// BBF UP Function Features.
        bbf_up_function_features: Option<BbfUpFunctionFeatures> = b(bt::UP_FUNCTION_FEATURES),
    }
}

ies! {
    /// Association Update Response (clause 7.4.4.4).
    pub struct AssociationUpdateResponse {
        /// Node ID (M).
        node_id: NodeId = k(t::NODE_ID),
        /// Cause (M).
        cause: Cause = k(t::CAUSE),
        /// UP Function Features.
        up_function_features: Option<UpFunctionFeatures> = k(t::UP_FUNCTION_FEATURES),
        /// CP Function Features.
        cp_function_features: Option<CpFunctionFeatures> = k(t::CP_FUNCTION_FEATURES),
        /// BBF UP Function Features.
        bbf_up_function_features: Option<BbfUpFunctionFeatures> = b(bt::UP_FUNCTION_FEATURES),
    }
}

ies! {
    /// Association Release Request (clause 7.4.4.5).
    pub struct AssociationReleaseRequest {
        /// Node ID (M).
        node_id: NodeId = k(t::NODE_ID),
    }
}

ies! {
    /// Association Release Response (clause 7.4.4.6).
    pub struct AssociationReleaseResponse {
        /// Node ID (M).
        node_id: NodeId = k(t::NODE_ID),
        /// Cause (M).
        cause: Cause = k(t::CAUSE),
    }
}

ies! {
    /// Session Establishment Request (clause 7.5.2). At least one Create PDR and one Create
    /// FAR are mandatory.
    pub struct SessionEstablishmentRequest {
        /// Node ID (M).
        node_id: NodeId = k(t::NODE_ID),
        /// CP F-SEID (M).
        cp_f_seid: FSeid = k(t::F_SEID),
        /// Create PDR (M, one or more).
        create_pdr: Vec<CreatePdr> = k(t::CREATE_PDR),
        /// Create FAR (M, one or more).
        create_far: Vec<CreateFar> = k(t::CREATE_FAR),
        /// Create URR.
        create_urr: Vec<CreateUrr> = k(t::CREATE_URR),
        /// Create QER.
        create_qer: Vec<CreateQer> = k(t::CREATE_QER),
        /// Create Traffic Endpoint.
        create_traffic_endpoint: Vec<CreateTrafficEndpoint> = k(t::CREATE_TRAFFIC_ENDPOINT),
    }
}

ies! {
    /// Session Establishment Response (clause 7.5.3). The UP F-SEID is conditional: present
    /// when the cause is "Request accepted".
    pub struct SessionEstablishmentResponse {
        /// Node ID (M).
        node_id: NodeId = k(t::NODE_ID),
        /// Cause (M).
        cause: Cause = k(t::CAUSE),
        /// Offending IE (C: on a rejection caused by an IE).
        offending_ie: Option<OffendingIe> = k(t::OFFENDING_IE),
        /// UP F-SEID (C: on success).
        up_f_seid: Option<FSeid> = k(t::F_SEID),
    }
}

ies! {
    /// Session Modification Request (clause 7.5.4).
    pub struct SessionModificationRequest {
        /// CP F-SEID (C: when the CP function changes it).
        cp_f_seid: Option<FSeid> = k(t::F_SEID),
        /// Remove PDR.
        remove_pdr: Vec<RemovePdr> = k(t::REMOVE_PDR),
        /// Remove FAR.
        remove_far: Vec<RemoveFar> = k(t::REMOVE_FAR),
        /// Remove URR.
        remove_urr: Vec<RemoveUrr> = k(t::REMOVE_URR),
        /// Remove QER.
        remove_qer: Vec<RemoveQer> = k(t::REMOVE_QER),
        /// Remove Traffic Endpoint.
        remove_traffic_endpoint: Vec<RemoveTrafficEndpoint> = k(t::REMOVE_TRAFFIC_ENDPOINT),
        /// Create PDR.
        create_pdr: Vec<CreatePdr> = k(t::CREATE_PDR),
        /// Create FAR.
        create_far: Vec<CreateFar> = k(t::CREATE_FAR),
        /// Create URR.
        create_urr: Vec<CreateUrr> = k(t::CREATE_URR),
        /// Create QER.
        create_qer: Vec<CreateQer> = k(t::CREATE_QER),
        /// Update PDR.
        update_pdr: Vec<UpdatePdr> = k(t::UPDATE_PDR),
        /// Update FAR.
        update_far: Vec<UpdateFar> = k(t::UPDATE_FAR),
        /// Update URR.
        update_urr: Vec<UpdateUrr> = k(t::UPDATE_URR),
        /// Update QER.
        update_qer: Vec<UpdateQer> = k(t::UPDATE_QER),
        /// Create Traffic Endpoint.
        create_traffic_endpoint: Vec<CreateTrafficEndpoint> = k(t::CREATE_TRAFFIC_ENDPOINT),
        /// Update Traffic Endpoint.
        update_traffic_endpoint: Vec<UpdateTrafficEndpoint> = k(t::UPDATE_TRAFFIC_ENDPOINT),
    }
}

ies! {
    /// Session Modification Response (clause 7.5.5).
    pub struct SessionModificationResponse {
        /// Cause (M).
        cause: Cause = k(t::CAUSE),
        /// Offending IE.
        offending_ie: Option<OffendingIe> = k(t::OFFENDING_IE),
        /// Usage Report (IE type 78).
        usage_report: Vec<UsageReport> = k(t::USAGE_REPORT_SMR),
    }
}

ies! {
    /// Session Deletion Request (clause 7.5.6): no IEs of its own; the header's SEID names
    /// the session.
    pub struct SessionDeletionRequest {}
}

ies! {
    /// Session Deletion Response (clause 7.5.7): the final usage of each URR.
    pub struct SessionDeletionResponse {
        /// Cause (M).
        cause: Cause = k(t::CAUSE),
        /// Offending IE.
        offending_ie: Option<OffendingIe> = k(t::OFFENDING_IE),
        /// Usage Report (IE type 79).
        usage_report: Vec<UsageReport> = k(t::USAGE_REPORT_SDR),
    }
}

ies! {
    /// Session Report Request (clause 7.5.8). With USAR in the Report Type, at least one
    /// Usage Report is required.
    pub struct SessionReportRequest {
        /// Report Type (M).
        report_type: ReportType = k(t::REPORT_TYPE),
        /// Usage Report (IE type 80; C: when USAR is set).
        usage_report: Vec<UsageReport> = k(t::USAGE_REPORT_SRR),
    }
}

ies! {
    /// Session Report Response (clause 7.5.9).
    pub struct SessionReportResponse {
        /// Cause (M).
        cause: Cause = k(t::CAUSE),
        /// Offending IE.
        offending_ie: Option<OffendingIe> = k(t::OFFENDING_IE),
    }
}

/// One PFCP message: its header and its typed body.
///
/// The Session Modification Request variant is a few hundred bytes (its many rule lists); it is
/// not boxed, since messages are control-plane values built and matched far more often than
/// moved, and a `Box` would make every construction and pattern noisier.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs, clippy::large_enum_variant)]
pub enum Message {
    HeartbeatRequest(NodeHeader, HeartbeatRequest),
    HeartbeatResponse(NodeHeader, HeartbeatResponse),
    AssociationSetupRequest(NodeHeader, AssociationSetupRequest),
    AssociationSetupResponse(NodeHeader, AssociationSetupResponse),
    AssociationUpdateRequest(NodeHeader, AssociationUpdateRequest),
    AssociationUpdateResponse(NodeHeader, AssociationUpdateResponse),
    AssociationReleaseRequest(NodeHeader, AssociationReleaseRequest),
    AssociationReleaseResponse(NodeHeader, AssociationReleaseResponse),
    SessionEstablishmentRequest(SessionHeader, SessionEstablishmentRequest),
    SessionEstablishmentResponse(SessionHeader, SessionEstablishmentResponse),
    SessionModificationRequest(SessionHeader, SessionModificationRequest),
    SessionModificationResponse(SessionHeader, SessionModificationResponse),
    SessionDeletionRequest(SessionHeader, SessionDeletionRequest),
    SessionDeletionResponse(SessionHeader, SessionDeletionResponse),
    SessionReportRequest(SessionHeader, SessionReportRequest),
    SessionReportResponse(SessionHeader, SessionReportResponse),
}

/// Node message header length (octets 1-8).
const NODE_HDR_LEN: usize = 8;
/// Session message header length (octets 1-16).
const SESSION_HDR_LEN: usize = 16;

impl Message {
    /// The message type number ([`msg_type`]).
    pub fn msg_type(&self) -> u8 {
        use msg_type as m;
        match self {
            Message::HeartbeatRequest(..) => m::HEARTBEAT_REQUEST,
            Message::HeartbeatResponse(..) => m::HEARTBEAT_RESPONSE,
            Message::AssociationSetupRequest(..) => m::ASSOCIATION_SETUP_REQUEST,
            Message::AssociationSetupResponse(..) => m::ASSOCIATION_SETUP_RESPONSE,
            Message::AssociationUpdateRequest(..) => m::ASSOCIATION_UPDATE_REQUEST,
            Message::AssociationUpdateResponse(..) => m::ASSOCIATION_UPDATE_RESPONSE,
            Message::AssociationReleaseRequest(..) => m::ASSOCIATION_RELEASE_REQUEST,
            Message::AssociationReleaseResponse(..) => m::ASSOCIATION_RELEASE_RESPONSE,
            Message::SessionEstablishmentRequest(..) => m::SESSION_ESTABLISHMENT_REQUEST,
            Message::SessionEstablishmentResponse(..) => m::SESSION_ESTABLISHMENT_RESPONSE,
            Message::SessionModificationRequest(..) => m::SESSION_MODIFICATION_REQUEST,
            Message::SessionModificationResponse(..) => m::SESSION_MODIFICATION_RESPONSE,
            Message::SessionDeletionRequest(..) => m::SESSION_DELETION_REQUEST,
            Message::SessionDeletionResponse(..) => m::SESSION_DELETION_RESPONSE,
            Message::SessionReportRequest(..) => m::SESSION_REPORT_REQUEST,
            Message::SessionReportResponse(..) => m::SESSION_REPORT_RESPONSE,
        }
    }

    /// The sequence number, which a response copies from its request.
    pub fn seq(&self) -> u32 {
        match self.header() {
            Ok(h) => h.seq,
            Err(h) => h.seq,
        }
    }

    /// The session header (`Err`: the node header of a node message).
    pub fn header(&self) -> Result<SessionHeader, NodeHeader> {
        match self {
            Message::HeartbeatRequest(h, _)
            | Message::HeartbeatResponse(h, _)
            | Message::AssociationSetupRequest(h, _)
            | Message::AssociationSetupResponse(h, _)
            | Message::AssociationUpdateRequest(h, _)
            | Message::AssociationUpdateResponse(h, _)
            | Message::AssociationReleaseRequest(h, _)
            | Message::AssociationReleaseResponse(h, _) => Err(*h),
            Message::SessionEstablishmentRequest(h, _)
            | Message::SessionEstablishmentResponse(h, _)
            | Message::SessionModificationRequest(h, _)
            | Message::SessionModificationResponse(h, _)
            | Message::SessionDeletionRequest(h, _)
            | Message::SessionDeletionResponse(h, _)
            | Message::SessionReportRequest(h, _)
            | Message::SessionReportResponse(h, _) => Ok(*h),
        }
    }

    fn encode_body(&self, w: &mut W) {
        match self {
            Message::HeartbeatRequest(_, m) => m.encode_ies(w),
            Message::HeartbeatResponse(_, m) => m.encode_ies(w),
            Message::AssociationSetupRequest(_, m) => m.encode_ies(w),
            Message::AssociationSetupResponse(_, m) => m.encode_ies(w),
            Message::AssociationUpdateRequest(_, m) => m.encode_ies(w),
            Message::AssociationUpdateResponse(_, m) => m.encode_ies(w),
            Message::AssociationReleaseRequest(_, m) => m.encode_ies(w),
            Message::AssociationReleaseResponse(_, m) => m.encode_ies(w),
            Message::SessionEstablishmentRequest(_, m) => m.encode_ies(w),
            Message::SessionEstablishmentResponse(_, m) => m.encode_ies(w),
            Message::SessionModificationRequest(_, m) => m.encode_ies(w),
            Message::SessionModificationResponse(_, m) => m.encode_ies(w),
            Message::SessionDeletionRequest(_, m) => m.encode_ies(w),
            Message::SessionDeletionResponse(_, m) => m.encode_ies(w),
            Message::SessionReportRequest(_, m) => m.encode_ies(w),
            Message::SessionReportResponse(_, m) => m.encode_ies(w),
        }
    }
}

fn is_session(msg_type: u8) -> bool {
    msg_type >= 50
}

/// Decodes one PFCP message.
///
/// `buf` holds the message, starting at its header. Bytes after the message are accepted
/// only when the FO (follow-on) flag says another message follows; they are not decoded.
///
/// # Errors
/// A [`DecodeError`] with the offset, the IE and the cause to answer with.
///
/// # Panics
/// Never, on any input.
pub fn decode(buf: &[u8]) -> Result<Message, DecodeError> {
    use msg_type as m;
    let short = |at| DecodeError::new(ErrorKind::InvalidLength, at, None);
    let (flags, ty, len) = match buf {
        [f, ty, l0, l1, ..] => (*f, *ty, usize::from(u16::from_be_bytes([*l0, *l1]))),
        _ => return Err(short(buf.len())),
    };
    if flags >> 5 != 1 {
        return Err(DecodeError::new(ErrorKind::UnsupportedVersion(flags >> 5), 0, None));
    }
    let known = matches!(ty, 1 | 2 | 5..=10 | 50..=57);
    if !known {
        return Err(DecodeError::new(ErrorKind::UnknownMessageType(ty), 1, None));
    }
    let s_flag = flags & 0x01 != 0;
    if s_flag != is_session(ty) {
        return Err(DecodeError::new(ErrorKind::SeidFlag, 0, None));
    }
    let total = 4 + len;
    let msg = buf.get(..total).ok_or(short(2))?;
    if buf.len() > total && flags & 0x04 == 0 {
        return Err(short(2));
    }
    let hdr_len = if s_flag { SESSION_HDR_LEN } else { NODE_HDR_LEN };
    let hdr = msg.get(..hdr_len).ok_or(short(2))?;
    let body = msg.get(hdr_len..).unwrap_or_default();
    let at = hdr_len;
    let (seq, prio_octet) = match hdr {
        [.., a, b, c, p] => (u32::from_be_bytes([0, *a, *b, *c]), *p),
        _ => return Err(short(2)),
    };
    let nh = NodeHeader { seq };
    let sh = || {
        let mut seid = [0u8; 8];
        if let Some(s) = hdr.get(4..12) {
            seid.copy_from_slice(s);
        }
        let priority = (flags & 0x02 != 0).then_some(prio_octet >> 4);
        SessionHeader { seid: u64::from_be_bytes(seid), seq, priority }
    };
    let msg = match ty {
        m::HEARTBEAT_REQUEST => Message::HeartbeatRequest(nh, HeartbeatRequest::decode_ies(body, at, at)?),
        m::HEARTBEAT_RESPONSE => Message::HeartbeatResponse(nh, HeartbeatResponse::decode_ies(body, at, at)?),
        m::ASSOCIATION_SETUP_REQUEST => Message::AssociationSetupRequest(nh, AssociationSetupRequest::decode_ies(body, at, at)?),
        m::ASSOCIATION_SETUP_RESPONSE => Message::AssociationSetupResponse(nh, AssociationSetupResponse::decode_ies(body, at, at)?),
        m::ASSOCIATION_UPDATE_REQUEST => Message::AssociationUpdateRequest(nh, AssociationUpdateRequest::decode_ies(body, at, at)?),
        m::ASSOCIATION_UPDATE_RESPONSE => Message::AssociationUpdateResponse(nh, AssociationUpdateResponse::decode_ies(body, at, at)?),
        m::ASSOCIATION_RELEASE_REQUEST => Message::AssociationReleaseRequest(nh, AssociationReleaseRequest::decode_ies(body, at, at)?),
        m::ASSOCIATION_RELEASE_RESPONSE => Message::AssociationReleaseResponse(nh, AssociationReleaseResponse::decode_ies(body, at, at)?),
        m::SESSION_ESTABLISHMENT_REQUEST => {
            let b = SessionEstablishmentRequest::decode_ies(body, at, at)?;
            let missing = |ie| DecodeError::new(ErrorKind::MandatoryIeMissing, at, Some(ie));
            if b.create_pdr.is_empty() {
                return Err(missing(t::CREATE_PDR));
            }
            if b.create_far.is_empty() {
                return Err(missing(t::CREATE_FAR));
            }
            Message::SessionEstablishmentRequest(sh(), b)
        }
        m::SESSION_ESTABLISHMENT_RESPONSE => {
            let b = SessionEstablishmentResponse::decode_ies(body, at, at)?;
            if b.cause == Cause::REQUEST_ACCEPTED && b.up_f_seid.is_none() {
                return Err(DecodeError::new(ErrorKind::ConditionalIeMissing, at, Some(t::F_SEID)));
            }
            Message::SessionEstablishmentResponse(sh(), b)
        }
        m::SESSION_MODIFICATION_REQUEST => Message::SessionModificationRequest(sh(), SessionModificationRequest::decode_ies(body, at, at)?),
        m::SESSION_MODIFICATION_RESPONSE => {
            Message::SessionModificationResponse(sh(), SessionModificationResponse::decode_ies(body, at, at)?)
        }
        m::SESSION_DELETION_REQUEST => Message::SessionDeletionRequest(sh(), SessionDeletionRequest::decode_ies(body, at, at)?),
        m::SESSION_DELETION_RESPONSE => Message::SessionDeletionResponse(sh(), SessionDeletionResponse::decode_ies(body, at, at)?),
        m::SESSION_REPORT_REQUEST => {
            let b = SessionReportRequest::decode_ies(body, at, at)?;
            if b.report_type.0 & ReportType::USAR != 0 && b.usage_report.is_empty() {
                return Err(DecodeError::new(ErrorKind::ConditionalIeMissing, at, Some(t::USAGE_REPORT_SRR)));
            }
            Message::SessionReportRequest(sh(), b)
        }
        m::SESSION_REPORT_RESPONSE => Message::SessionReportResponse(sh(), SessionReportResponse::decode_ies(body, at, at)?),
        _ => return Err(DecodeError::new(ErrorKind::UnknownMessageType(ty), 1, None)),
    };
    Ok(msg)
}

/// Appends the encoding of `msg` to `out`.
///
/// # Errors
/// [`EncodeError`] when an IE or the message would exceed the 16-bit length field; `out` is
/// then left as it was.
///
/// # Panics
/// Never.
pub fn encode(msg: &Message, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let start = out.len();
    let mut w = W { out, overflow: None };
    let (s, mp, seid, seq, prio) = match msg.header() {
        Ok(h) => (1u8, h.priority.is_some(), Some(h.seid), h.seq, h.priority.unwrap_or(0)),
        Err(h) => (0u8, false, None, h.seq, 0),
    };
    w.u8(1 << 5 | u8::from(mp) << 1 | s);
    w.u8(msg.msg_type());
    w.u16(0);
    if let Some(seid) = seid {
        w.u64(seid);
    }
    w.u24(seq & 0x00ff_ffff);
    w.u8((prio & 0x0f) << 4);
    msg.encode_body(&mut w);
    w.patch_len(start + 2, start + 4, None);
    match w.overflow {
        None => Ok(()),
        Some(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
mod tests {
    use super::*;
    use crate::bbf::{bbf_type, BbfOuterHeaderCreation, LogicalPort, ENTERPRISE_BBF};
    use crate::samples;
    use crate::wire::RawIe;

    fn enc(m: &Message) -> Vec<u8> {
        let mut v = Vec::new();
        encode(m, &mut v).unwrap();
        v
    }

    fn err(buf: &[u8]) -> DecodeError {
        decode(buf).unwrap_err()
    }

    /// Each sample message: encode, decode, equal; the length field matches the bytes; the
    /// header carries the right type, S flag and sequence number.
    #[test]
    fn round_trip_every_message() {
        let all = samples::all();
        assert_eq!(all.len(), 16, "one sample per message kind");
        for m in &all {
            let b = enc(m);
            assert_eq!(usize::from(u16::from_be_bytes([b[2], b[3]])) + 4, b.len(), "{m:?}");
            assert_eq!(b[1], m.msg_type());
            assert_eq!(b[0] & 0x01 == 1, m.header().is_ok());
            assert_eq!(decode(&b).unwrap(), *m, "type {}", m.msg_type());
            // Encoding is canonical: a second pass writes the same bytes.
            assert_eq!(enc(&decode(&b).unwrap()), b);
        }
    }

    /// Bytes written by hand from TS 29.244 clause 7.2.2 / 8.2.65, not by our encoder.
    #[test]
    fn heartbeat_request_bytes_to_fields() {
        let b = [
            0x20, 0x01, 0x00, 0x0c, // version 1, S=0; type 1; length 12
            0x00, 0x12, 0x34, 0x00, // sequence 0x001234, spare
            0x00, 0x60, 0x00, 0x04, // IE 96 Recovery Time Stamp, length 4
            0xed, 0x00, 0x00, 0x01, // 0xed000001
        ];
        let m = decode(&b).unwrap();
        let Message::HeartbeatRequest(h, body) = &m else { panic!("{m:?}") };
        assert_eq!(h.seq, 0x1234);
        assert_eq!(body.recovery_time_stamp, RecoveryTimeStamp(0xed00_0001));
        assert_eq!(enc(&m), b);
    }

    /// A session header with the MP flag and a priority (clause 7.2.2.3).
    #[test]
    fn session_header_bytes_to_fields() {
        let b = [
            0x23, 0x36, 0x00, 0x0c, // version 1, MP=1, S=1; type 54 (Session Deletion Req); len 12
            0, 0, 0, 0, 0, 0, 0x20, 0x00, // SEID 0x2000
            0x00, 0x00, 0x05, 0x70, // sequence 5, priority 7
        ];
        let m = decode(&b).unwrap();
        assert_eq!(m.header(), Ok(SessionHeader { seid: 0x2000, seq: 5, priority: Some(7) }));
        assert_eq!(enc(&m), b);
    }

    /// A BBF IE written by hand (TR-459 6.6.3 as Wireshark decodes it) inside Forwarding
    /// Parameters inside a Create FAR.
    #[test]
    fn bbf_outer_header_creation_bytes_to_fields() {
        let far = [
            0x00, 0x03, 0x00, 0x22, // Create FAR, length 34
            0x00, 0x6c, 0x00, 0x04, 0, 0, 0, 2, // FAR ID 2
            0x00, 0x2c, 0x00, 0x01, 0x02, // Apply Action FORW
            0x00, 0x04, 0x00, 0x11, // Forwarding Parameters, length 17
            0x00, 0x2a, 0x00, 0x01, 0x00, // Destination Interface: Access
            0x80, 0x02, 0x00, 0x08, 0x0d, 0xe9, // BBF OHC (32770), length 8, enterprise 3561
            0x02, 0x00, 0x00, 0x00, 0x00, 0x00, // Traffic-Endpoint, tunnel 0, session 0
        ];
        let mut b = vec![0x21, 50, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0];
        b.extend_from_slice(&[0, 60, 0, 5, 0, 192, 0, 2, 1]); // Node ID
        b.extend_from_slice(&[0, 57, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0x10, 0]); // F-SEID, no address
        b.extend_from_slice(&[0, 1, 0, 0x17]); // Create PDR, length 23
        b.extend_from_slice(&[0, 56, 0, 2, 0, 1, 0, 29, 0, 4, 0, 0, 0, 1, 0, 2, 0, 5, 0, 20, 0, 1, 0]);
        b.extend_from_slice(&far);
        let len = (b.len() - 4) as u16;
        b[2..4].copy_from_slice(&len.to_be_bytes());
        let m = decode(&b).unwrap();
        let Message::SessionEstablishmentRequest(_, s) = &m else { panic!() };
        let fp = s.create_far[0].forwarding_parameters.as_ref().unwrap();
        assert_eq!(
            fp.bbf_outer_header_creation,
            Some(BbfOuterHeaderCreation { description: BbfOuterHeaderCreation::TRAFFIC_ENDPOINT, tunnel_id: 0, session_id: 0 })
        );
        assert_eq!(s.create_pdr[0].pdi.source_interface, SourceInterface::ACCESS);
        assert_eq!(enc(&m), b);
    }

    /// An unknown IE and a vendor IE of another enterprise are kept raw and written back
    /// byte for byte; a BBF IE the codec does not type (MTU inside a PDI) too.
    #[test]
    fn unknown_ies_round_trip() {
        let mut m = samples::all().remove(0);
        let Message::HeartbeatRequest(_, hb) = &mut m else { panic!() };
        hb.unknown.push(RawIe { ie_type: 999, value: vec![1, 2, 3] });
        hb.unknown.push(RawIe { ie_type: 0x8123, value: vec![0x7e, 0xd9, 9] });
        hb.unknown.push(RawIe { ie_type: bbf_type::MTU, value: vec![0x0d, 0xe9, 0x05, 0xdc] });
        let b = enc(&m);
        assert_eq!(&b[16..23], &[0x03, 0xe7, 0, 3, 1, 2, 3]);
        let d = decode(&b).unwrap();
        assert_eq!(d, m);
        let Message::HeartbeatRequest(_, hb) = &d else { panic!() };
        assert_eq!(hb.unknown[1].enterprise(), Some(0x7ed9));
        assert_eq!(hb.unknown[2].enterprise(), Some(ENTERPRISE_BBF));
    }

    /// A second Recovery Time Stamp is not an error: the first is used and the repeat kept
    /// raw (clause 7.6.3).
    #[test]
    fn repeated_single_ie_is_kept_raw() {
        let b = [0x20, 1, 0, 20, 0, 0, 1, 0, 0, 96, 0, 4, 0, 0, 0, 1, 0, 96, 0, 4, 0, 0, 0, 2];
        let m = decode(&b).unwrap();
        let Message::HeartbeatRequest(_, hb) = &m else { panic!() };
        assert_eq!(hb.recovery_time_stamp, RecoveryTimeStamp(1));
        assert_eq!(hb.unknown, vec![RawIe { ie_type: 96, value: vec![0, 0, 0, 2] }]);
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        for m in samples::all() {
            let b = enc(&m);
            for n in 0..b.len() {
                let e = err(&b[..n]);
                assert_eq!(e.kind, ErrorKind::InvalidLength, "type {} cut at {n}: {e}", m.msg_type());
            }
        }
    }

    #[test]
    fn mandatory_ie_missing_is_66_with_the_ie() {
        let b = [0x20, 1, 0, 4, 0, 0, 1, 0]; // Heartbeat Request without Recovery Time Stamp
        let e = err(&b);
        assert_eq!(e, DecodeError::new(ErrorKind::MandatoryIeMissing, 8, Some(t::RECOVERY_TIME_STAMP)));
        assert_eq!(e.cause(), Some(Cause(66)));
        // Inside a group: a Create PDR without its PDI.
        let mut m = samples::all().remove(8);
        let Message::SessionEstablishmentRequest(_, s) = &mut m else { panic!() };
        s.create_pdr.truncate(1);
        let mut b = enc(&m);
        let pdr_at = find_ie(&b, 16, t::CREATE_PDR).unwrap();
        let pdi_at = find_ie(&b, pdr_at + 4, t::PDI).unwrap();
        b[pdi_at + 1] = 200; // retype the PDI as an unknown IE
        let e = err(&b);
        assert_eq!((e.kind, e.ie_type, e.offset), (ErrorKind::MandatoryIeMissing, Some(t::PDI), pdr_at + 4));
        // A Session Establishment Request with no Create FAR at all.
        let Message::SessionEstablishmentRequest(_, s) = &mut m else { panic!() };
        s.create_far.clear();
        assert_eq!(err(&enc(&m)).ie_type, Some(t::CREATE_FAR));
    }

    #[test]
    fn conditional_ie_missing_is_67() {
        let mut m = samples::all().remove(9);
        let Message::SessionEstablishmentResponse(_, r) = &mut m else { panic!() };
        r.up_f_seid = None;
        let e = err(&enc(&m));
        assert_eq!((e.kind, e.ie_type, e.cause()), (ErrorKind::ConditionalIeMissing, Some(t::F_SEID), Some(Cause(67))));
        let Message::SessionEstablishmentResponse(_, r) = &mut m else { panic!() };
        r.cause = Cause::NO_RESOURCES_AVAILABLE; // a rejection needs no F-SEID
        assert!(decode(&enc(&m)).is_ok());
        let mut m = samples::all().remove(14);
        let Message::SessionReportRequest(_, r) = &mut m else { panic!() };
        r.usage_report.clear();
        assert_eq!(err(&enc(&m)).ie_type, Some(t::USAGE_REPORT_SRR));
    }

    #[test]
    fn short_ie_is_68_at_the_ie() {
        // Recovery Time Stamp with length 3.
        let b = [0x20, 1, 0, 11, 0, 0, 1, 0, 0, 96, 0, 3, 0, 0, 1];
        let e = err(&b);
        assert_eq!((e.kind, e.offset, e.ie_type, e.cause()), (ErrorKind::InvalidLength, 12 + 3, Some(96), Some(Cause(68))));
        // An IE length that runs past the message.
        let b = [0x20, 1, 0, 8, 0, 0, 1, 0, 0, 96, 0, 9];
        let e = err(&b);
        assert_eq!((e.kind, e.offset, e.ie_type), (ErrorKind::InvalidLength, 10, Some(96)));
        // A vendor IE too short for its Enterprise ID.
        let b = [0x20, 1, 0, 9, 0, 0, 1, 0, 0x80, 0, 0, 1, 0x0d];
        assert_eq!(err(&b).ie_type, Some(0x8000));
        // The message length runs past the datagram.
        let b = [0x20, 1, 0, 100, 0, 0, 1, 0];
        assert_eq!(err(&b).offset, 2);
    }

    #[test]
    fn bad_node_id_is_69() {
        let b = [0x20, 9, 0, 9, 0, 0, 1, 0, 0, 60, 0, 1, 7]; // Node ID type 7
        let e = err(&b);
        assert_eq!((e.kind, e.ie_type, e.offset, e.cause()), (ErrorKind::IeIncorrect, Some(60), 12, Some(Cause(69))));
        let b = [0x20, 9, 0, 11, 0, 0, 1, 0, 0, 60, 0, 3, 2, 1, b'.']; // FQDN label "."
        assert_eq!(err(&b).kind, ErrorKind::IeIncorrect);
    }

    #[test]
    fn header_errors() {
        assert_eq!(err(&[0x40, 1, 0, 0]).kind, ErrorKind::UnsupportedVersion(2));
        assert_eq!(err(&[0x40, 1, 0, 0]).cause(), None);
        assert_eq!(err(&[0x20, 3, 0, 4, 0, 0, 1, 0]).kind, ErrorKind::UnknownMessageType(3));
        assert_eq!(err(&[0x21, 1, 0, 4, 0, 0, 1, 0]).kind, ErrorKind::SeidFlag);
        assert_eq!(err(&[0x20, 54, 0, 4, 0, 0, 1, 0]).kind, ErrorKind::SeidFlag);
        // Trailing bytes without FO are an error; with FO they are the next message.
        let mut b = enc(&samples::all()[0]);
        b.push(0);
        assert_eq!(err(&b).kind, ErrorKind::InvalidLength);
        b[0] |= 0x04;
        assert!(decode(&b).is_ok());
    }

    #[test]
    fn encode_refuses_an_ie_over_64k() {
        let mut m = samples::all().remove(0);
        let Message::HeartbeatRequest(_, hb) = &mut m else { panic!() };
        hb.unknown.push(RawIe { ie_type: 999, value: vec![0; 70_000] });
        let mut out = vec![9];
        assert_eq!(encode(&m, &mut out), Err(EncodeError { ie_type: Some(999) }));
        assert_eq!(out, vec![9]);
        let _ = LogicalPort::default();
    }

    fn find_ie(b: &[u8], mut at: usize, ty: u16) -> Option<usize> {
        while at + 4 <= b.len() {
            let t = u16::from_be_bytes([b[at], b[at + 1]]);
            if t == ty {
                return Some(at);
            }
            at += 4 + usize::from(u16::from_be_bytes([b[at + 2], b[at + 3]]));
        }
        None
    }
}
