//! Decode and encode errors. A decode error names what went wrong, where (byte offset from the
//! start of the message) and which IE, and maps to the cause a responder puts in its response
//! (TS 29.244 clause 8.2.1, Table 8.2.1-1; the error handling of clause 7.6).

use std::fmt;

use crate::ie::Cause;

/// What was wrong with a PFCP message. `Copy`, no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The header's version is not 1. The responder sends a Version Not Supported Response
    /// (TS 29.244 clause 7.4.4.7), not a cause.
    UnsupportedVersion(u8),
    /// A message type this codec does not decode. TS 29.244 clause 7.6.2: "If a PFCP entity
    /// receives a message with an unknown Message Type value, it shall silently discard it."
    UnknownMessageType(u8),
    /// The S flag does not match the message type (a node message with an SEID, or a session
    /// message without one).
    SeidFlag,
    /// A length field runs past its container, or an IE is shorter than its fixed fields.
    InvalidLength,
    /// A mandatory IE is absent.
    MandatoryIeMissing,
    /// A conditional IE is absent although its condition holds.
    ConditionalIeMissing,
    /// An IE has a value this codec cannot accept (e.g. an unknown Node ID type).
    IeIncorrect,
}

/// A PFCP message that could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecodeError {
    /// What was wrong.
    pub kind: ErrorKind,
    /// Byte offset from the start of the message where the problem was found.
    pub offset: usize,
    /// The IE at fault (the missing IE for the two "missing" kinds), if any.
    pub ie_type: Option<u16>,
}

impl DecodeError {
    pub(crate) fn new(kind: ErrorKind, offset: usize, ie_type: Option<u16>) -> Self {
        Self { kind, offset, ie_type }
    }

    /// The cause the responder should send (TS 29.244 Table 8.2.1-1), or `None` when the
    /// message gets no response with a cause (unknown message type: discard; bad version:
    /// Version Not Supported Response).
    pub fn cause(&self) -> Option<Cause> {
        match self.kind {
            ErrorKind::UnsupportedVersion(_) | ErrorKind::UnknownMessageType(_) => None,
            ErrorKind::SeidFlag => Some(Cause::REQUEST_REJECTED),
            ErrorKind::InvalidLength => Some(Cause::INVALID_LENGTH),
            ErrorKind::MandatoryIeMissing => Some(Cause::MANDATORY_IE_MISSING),
            ErrorKind::ConditionalIeMissing => Some(Cause::CONDITIONAL_IE_MISSING),
            ErrorKind::IeIncorrect => Some(Cause::MANDATORY_IE_INCORRECT),
        }
    }

    /// The IE type for the Offending IE in the response (TS 29.244 clause 8.2.22).
    pub fn offending_ie(&self) -> Option<u16> {
        self.ie_type
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ErrorKind::UnsupportedVersion(v) => return write!(f, "PFCP version {v} is not supported (offset {})", self.offset),
            ErrorKind::UnknownMessageType(t) => return write!(f, "unknown PFCP message type {t} (offset {})", self.offset),
            ErrorKind::SeidFlag => "S flag does not match the message type",
            ErrorKind::InvalidLength => "invalid length",
            ErrorKind::MandatoryIeMissing => "mandatory IE missing",
            ErrorKind::ConditionalIeMissing => "conditional IE missing",
            ErrorKind::IeIncorrect => "IE incorrect",
        };
        write!(f, "{what} at offset {}", self.offset)?;
        if let Some(t) = self.ie_type {
            write!(f, " (IE type {t})")?;
        }
        Ok(())
    }
}

impl std::error::Error for DecodeError {}

/// A message that cannot be written: an IE (or the message) whose contents exceed the 16-bit
/// length field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EncodeError {
    /// The IE whose length overflowed, or `None` for the message itself.
    pub ie_type: Option<u16>,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ie_type {
            Some(t) => write!(f, "IE type {t} is longer than 65535 bytes"),
            None => write!(f, "message is longer than 65535 bytes"),
        }
    }
}

impl std::error::Error for EncodeError {}
