//! GTP-U (3GPP TS 29.281, UDP port 2152): the wire format of the Control Packet Redirect
//! interface (CPRi) between a `vbng` user plane and the broadband control plane, where each
//! G-PDU carries one whole Ethernet frame (BBF TR-459).
//!
//! TS 29.281 §5.1, the header:
//! ```text
//!   octet 1   | Version (3) | PT | (*) | E | S | PN |
//!   octet 2   | Message Type                         |
//!   octet 3-4 | Length (octets after the first 8)    |
//!   octet 5-8 | Tunnel Endpoint Identifier           |
//!   octet 9-10| Sequence Number          ┐ present when any
//!   octet 11  | N-PDU Number             │ of E, S, PN is set
//!   octet 12  | Next Extension Header Type┘
//! ```
//! An extension header (§5.2.1) is `length (4-octet units) | content | next type`. We keep the
//! chain as raw bytes and skip over it; the CPRi uses none.
//!
//! **The CPRi's use of the TEID.** A G-PDU's TEID is `(user plane number << 16) | port`: the
//! low 16 bits name the user plane's port the frame came in on (punt) or must leave through
//! (packet-out), the high 16 bits the user plane (1 for the first). TEID 0 is never used for a
//! G-PDU, so it stays the echo's TEID as §5.1 requires.
//!
//! `parse` never panics and never reads outside its input. Control thread only (the encoders
//! allocate).

use std::fmt;

/// The UDP port of GTP-U (TS 29.281 §4.4.2.3).
pub const GTPU_PORT: u16 = 2152;

/// Length of the mandatory header.
pub const HEADER_LEN: usize = 8;

/// A GTP-U message type (TS 29.281 §6.1). Unknown values are data, not errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MessageType(pub u8);

impl MessageType {
    /// Echo Request.
    pub const ECHO_REQUEST: MessageType = MessageType(1);
    /// Echo Response.
    pub const ECHO_RESPONSE: MessageType = MessageType(2);
    /// Error Indication.
    pub const ERROR_INDICATION: MessageType = MessageType(26);
    /// Supported Extension Headers Notification.
    pub const SUPPORTED_EXT_HEADERS: MessageType = MessageType(31);
    /// End Marker.
    pub const END_MARKER: MessageType = MessageType(254);
    /// G-PDU: a tunnelled packet (here, an Ethernet frame).
    pub const G_PDU: MessageType = MessageType(255);
}

/// The Recovery IE (TS 29.281 §8.2, TV, type 14) an Echo Response carries.
pub const IE_RECOVERY: u8 = 14;

/// Why bytes are not a GTP-U message. Small and `Copy`, with the offset of the fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GtpuError {
    /// Shorter than the header, its optional fields or an extension header.
    Truncated,
    /// Version is not 1.
    Version(u8),
    /// PT is 0: GTP' (TS 32.295), not GTP-U.
    NotGtpu,
    /// The Length field and the bytes given disagree (`length`, bytes after octet 8).
    Length {
        /// The Length field.
        field: u16,
        /// Bytes present after the mandatory header.
        present: usize,
    },
    /// An extension header with length 0 (§5.2.1: "shall not be 0"), at this offset.
    ExtensionLength(usize),
}

impl fmt::Display for GtpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GtpuError::Truncated => write!(f, "GTP-U: truncated"),
            GtpuError::Version(v) => write!(f, "GTP-U: version {v}, not 1"),
            GtpuError::NotGtpu => write!(f, "GTP-U: PT flag 0 (GTP')"),
            GtpuError::Length { field, present } => {
                write!(f, "GTP-U: length field {field} but {present} bytes follow the header")
            }
            GtpuError::ExtensionLength(at) => write!(f, "GTP-U: extension header of length 0 at offset {at}"),
        }
    }
}

impl std::error::Error for GtpuError {}

/// A parsed GTP-U message: a checked view over the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gtpu<'a> {
    /// Message type.
    pub msg_type: MessageType,
    /// Tunnel endpoint identifier.
    pub teid: u32,
    /// Sequence number, when S is set.
    pub seq: Option<u16>,
    /// N-PDU number, when PN is set.
    pub npdu: Option<u8>,
    /// The extension header chain, raw (empty when E is clear).
    pub extensions: &'a [u8],
    /// What follows the header: the T-PDU of a G-PDU, the IEs of other messages.
    pub payload: &'a [u8],
}

impl<'a> Gtpu<'a> {
    /// Checks the header, its optional fields, the extension chain and the length against
    /// `buf`. Bytes after `8 + length` are refused (UDP gives the exact size).
    ///
    /// # Errors
    /// A [`GtpuError`]. Never panics.
    pub fn parse(buf: &'a [u8]) -> Result<Gtpu<'a>, GtpuError> {
        let hdr = buf.get(..HEADER_LEN).ok_or(GtpuError::Truncated)?;
        let (flags, ty, len, teid) = match hdr {
            [f, t, l0, l1, a, b, c, d] => (*f, *t, u16::from_be_bytes([*l0, *l1]), u32::from_be_bytes([*a, *b, *c, *d])),
            _ => return Err(GtpuError::Truncated),
        };
        if flags >> 5 != 1 {
            return Err(GtpuError::Version(flags >> 5));
        }
        if flags & 0x10 == 0 {
            return Err(GtpuError::NotGtpu);
        }
        let rest = buf.get(HEADER_LEN..).unwrap_or_default();
        if usize::from(len) != rest.len() {
            return Err(GtpuError::Length { field: len, present: rest.len() });
        }
        let (e, s, pn) = (flags & 0x04 != 0, flags & 0x02 != 0, flags & 0x01 != 0);
        if !(e || s || pn) {
            return Ok(Gtpu { msg_type: MessageType(ty), teid, seq: None, npdu: None, extensions: &[], payload: rest });
        }
        let (seq, npdu, mut next) = match rest.get(..4) {
            Some([s0, s1, n, x]) => (u16::from_be_bytes([*s0, *s1]), *n, *x),
            _ => return Err(GtpuError::Truncated),
        };
        let mut at = 4usize;
        if e {
            while next != 0 {
                let units = *rest.get(at).ok_or(GtpuError::Truncated)?;
                if units == 0 {
                    return Err(GtpuError::ExtensionLength(HEADER_LEN + at));
                }
                let end = at + usize::from(units) * 4;
                next = *rest.get(end - 1).ok_or(GtpuError::Truncated)?;
                at = end;
            }
        }
        let extensions = if e { rest.get(4..at).unwrap_or_default() } else { &[] };
        Ok(Gtpu {
            msg_type: MessageType(ty),
            teid,
            seq: s.then_some(seq),
            npdu: pn.then_some(npdu),
            extensions,
            payload: rest.get(at..).unwrap_or_default(),
        })
    }

    /// The restart counter of an Echo Response's Recovery IE, if it has one first.
    pub fn recovery(&self) -> Option<u8> {
        match self.payload {
            [IE_RECOVERY, v, ..] => Some(*v),
            _ => None,
        }
    }
}

/// An owned GTP-U message without extension headers, for building messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GtpuRepr {
    /// Message type.
    pub msg_type: MessageType,
    /// Tunnel endpoint identifier.
    pub teid: u32,
    /// Sequence number (sets S).
    pub seq: Option<u16>,
    /// T-PDU or IEs.
    pub payload: Vec<u8>,
}

impl GtpuRepr {
    /// Appends the message to `out`.
    ///
    /// # Errors
    /// The message would be longer than the 16-bit Length can say; `out` is unchanged.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), GtpuError> {
        emit(self.msg_type, self.teid, self.seq, &self.payload, out)
    }

    /// The owned copy of a parsed message (extension headers are dropped).
    pub fn from_view(v: &Gtpu<'_>) -> GtpuRepr {
        GtpuRepr { msg_type: v.msg_type, teid: v.teid, seq: v.seq, payload: v.payload.to_vec() }
    }
}

/// Appends one message (no extension headers, S set when `seq` is given) to `out`.
///
/// # Errors
/// The body would not fit the Length field ([`GtpuError::Length`]); `out` is unchanged.
pub fn emit(msg_type: MessageType, teid: u32, seq: Option<u16>, payload: &[u8], out: &mut Vec<u8>) -> Result<(), GtpuError> {
    let opt = if seq.is_some() { 4 } else { 0 };
    let len = u16::try_from(payload.len() + opt).map_err(|_| GtpuError::Length { field: u16::MAX, present: payload.len() + opt })?;
    out.push(0x30 | if seq.is_some() { 0x02 } else { 0 }); // version 1, PT 1
    out.push(msg_type.0);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&teid.to_be_bytes());
    if let Some(s) = seq {
        out.extend_from_slice(&s.to_be_bytes());
        out.extend_from_slice(&[0, 0]); // N-PDU number, no extension header
    }
    out.extend_from_slice(payload);
    Ok(())
}

/// A G-PDU carrying `frame` (a whole Ethernet frame on the CPRi).
///
/// # Errors
/// As [`emit`].
pub fn emit_gpdu(teid: u32, frame: &[u8], out: &mut Vec<u8>) -> Result<(), GtpuError> {
    emit(MessageType::G_PDU, teid, None, frame, out)
}

/// An Echo Request (TEID 0, sequence number set, §7.2.1).
pub fn echo_request(seq: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(12);
    let _ = emit(MessageType::ECHO_REQUEST, 0, Some(seq), &[], &mut out);
    out
}

/// The Echo Response to a request with `seq` (TEID 0, the request's sequence number, a
/// Recovery IE whose restart counter "shall be set to zero", §7.2.2 / §8.2).
pub fn echo_response(seq: u16) -> Vec<u8> {
    let mut out = Vec::with_capacity(14);
    let _ = emit(MessageType::ECHO_RESPONSE, 0, Some(seq), &[IE_RECOVERY, 0], &mut out);
    out
}

/// The CPRi TEID of port `port` on user plane `up` (see the module doc).
pub fn cpri_teid(up: u16, port: u16) -> u32 {
    (u32::from(up) << 16) | u32::from(port)
}

/// The (user plane, port) a CPRi TEID names.
pub fn cpri_port(teid: u32) -> (u16, u16) {
    ((teid >> 16) as u16, teid as u16)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    /// An Echo Request as TS 29.281 lays it out, written by hand.
    const ECHO_REQ: [u8; 12] = [
        0x32, // version 1, PT 1, S
        0x01, // Echo Request
        0x00, 0x04, // length: the 4 optional octets
        0, 0, 0, 0, // TEID 0
        0x12, 0x34, // sequence number
        0x00, // N-PDU number
        0x00, // no extension header
    ];

    #[test]
    fn bytes_to_fields() {
        let g = Gtpu::parse(&ECHO_REQ).unwrap();
        assert_eq!((g.msg_type, g.teid, g.seq, g.npdu), (MessageType::ECHO_REQUEST, 0, Some(0x1234), None));
        assert!(g.payload.is_empty() && g.extensions.is_empty());
    }

    #[test]
    fn fields_to_bytes() {
        assert_eq!(echo_request(0x1234), ECHO_REQ);
        let r = echo_response(0x1234);
        assert_eq!(r, [0x32, 0x02, 0, 6, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 14, 0]);
        assert_eq!(Gtpu::parse(&r).unwrap().recovery(), Some(0));
        let mut out = vec![0xA5];
        emit_gpdu(0x0001_0003, &[1, 2, 3], &mut out).unwrap();
        assert_eq!(out, [0xA5, 0x30, 0xff, 0, 3, 0, 1, 0, 3, 1, 2, 3]);
    }

    #[test]
    fn repr_round_trip() {
        for r in [
            GtpuRepr { msg_type: MessageType::G_PDU, teid: 7, seq: None, payload: vec![9; 64] },
            GtpuRepr { msg_type: MessageType(200), teid: u32::MAX, seq: Some(1), payload: vec![] },
        ] {
            let mut b = Vec::new();
            r.emit(&mut b).unwrap();
            assert_eq!(GtpuRepr::from_view(&Gtpu::parse(&b).unwrap()), r);
        }
    }

    #[test]
    fn every_truncation_is_refused() {
        let mut b = Vec::new();
        emit(MessageType::G_PDU, 5, Some(3), &[1, 2, 3, 4], &mut b).unwrap();
        for n in 0..b.len() {
            assert!(Gtpu::parse(&b[..n]).is_err(), "{n}");
        }
    }

    #[test]
    fn each_error() {
        assert_eq!(Gtpu::parse(&[0x30, 0xff, 0, 0]), Err(GtpuError::Truncated));
        assert_eq!(Gtpu::parse(&[0x50, 0xff, 0, 0, 0, 0, 0, 0]), Err(GtpuError::Version(2)));
        assert_eq!(Gtpu::parse(&[0x20, 0xff, 0, 0, 0, 0, 0, 0]), Err(GtpuError::NotGtpu));
        assert_eq!(Gtpu::parse(&[0x30, 0xff, 0, 2, 0, 0, 0, 0, 1]), Err(GtpuError::Length { field: 2, present: 1 }));
        assert_eq!(Gtpu::parse(&[0x30, 0xff, 0, 1, 0, 0, 0, 0]), Err(GtpuError::Length { field: 1, present: 0 }));
        // E set, one extension of length 0.
        assert_eq!(Gtpu::parse(&[0x34, 0xff, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0x85, 0]), Err(GtpuError::ExtensionLength(12)));
        // E set, extension claims 8 octets, 4 present.
        assert_eq!(Gtpu::parse(&[0x34, 0xff, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0x85, 2, 0, 0, 0]), Err(GtpuError::Truncated));
        assert!(emit(MessageType::G_PDU, 1, None, &vec![0; 70_000], &mut Vec::new()).is_err());
    }

    #[test]
    fn extension_chain_is_skipped() {
        // PDU session container (0x85), 4 octets, then no more; payload 0xEE.
        let b = [0x34, 0xff, 0, 9, 0, 0, 0, 1, 0, 7, 0, 0x85, 1, 0x10, 0x01, 0, 0xEE];
        let g = Gtpu::parse(&b).unwrap();
        assert_eq!((g.seq, g.extensions, g.payload), (None, &[0, 7, 0, 0x85, 1, 0x10, 0x01, 0][4..], &[0xEE][..]));
    }

    #[test]
    fn teid_names_user_plane_and_port() {
        assert_eq!(cpri_teid(1, 3), 0x0001_0003);
        assert_eq!(cpri_port(0x0001_0003), (1, 3));
    }
}
