//! fastpath-pfcp: the PFCP codec (3GPP TS 29.244, UDP port 8805) shared by the user plane's
//! PFCP endpoint and the broadband control plane, with the Broadband Forum TR-459 vendor IEs
//! (enterprise 3561).
//!
//! It owns the wire format only: no sockets, timers, retransmission or session state. It
//! depends on no other fastpath crate (and on nothing outside `std`).
//!
//! - [`decode`] turns one message into a typed [`Message`]; [`encode`] writes one.
//! - Every message and grouped IE is a struct with one field per IE it types ([`message`],
//!   [`group`], leaf IEs in [`ie`], BBF IEs in [`bbf`]). IEs it does not type, vendor IEs of
//!   other enterprises, and repeats of single IEs are kept as [`RawIe`] in each struct's
//!   `unknown` and written back unchanged; [`bbf::BbfIe::from_raw`] reads a BBF IE found
//!   there.
//! - [`samples`] holds one populated message of every kind (a TR-459 IPoE session), used by
//!   the tests and as an example of filling the structs.
//! - A [`DecodeError`] says what was wrong, at which byte offset and in which IE, and
//!   [`DecodeError::cause`] gives the cause the responder sends.
//!
//! **Invariants.** `decode` never panics on any input and never reads outside it; the crate
//! has no `unsafe`. `decode(encode(decode(x)))` equals `decode(x)` whenever `decode(x)`
//! succeeds (the fuzz test checks it). Encoding writes IEs in a fixed order (typed fields in
//! declaration order, then the raw ones), so it is canonical rather than byte-identical to
//! the input.
//!
//! Control thread only: this is a control-plane codec and it allocates. Interop with
//! independent implementations (tshark, scapy) and the IE table are in `docs/pfcp.md`.
//!
//! ```
//! use fastpath_pfcp::{decode, encode, Message, NodeHeader};
//! use fastpath_pfcp::message::HeartbeatRequest;
//! use fastpath_pfcp::ie::RecoveryTimeStamp;
//!
//! let msg = Message::HeartbeatRequest(
//!     NodeHeader { seq: 7 },
//!     HeartbeatRequest { recovery_time_stamp: RecoveryTimeStamp(3_900_000_000), ..Default::default() },
//! );
//! let mut buf = Vec::new();
//! encode(&msg, &mut buf).unwrap();
//! assert_eq!(buf.len(), 16); // 8-byte node header + one 8-byte IE
//! assert_eq!(decode(&buf).unwrap(), msg);
//!
//! // A truncated message names the cause to answer with: Invalid length (68).
//! let err = decode(&buf[..12]).unwrap_err();
//! assert_eq!(err.cause().map(|c| c.0), Some(68));
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

pub mod bbf;
pub mod error;
pub mod group;
pub mod gtpu;
pub mod ie;
pub mod message;
pub mod samples;
mod wire;

pub use error::{DecodeError, EncodeError, ErrorKind};
pub use message::{decode, encode, Message, NodeHeader, SessionHeader};
pub use wire::{IeKey, RawIe};

/// The UDP port PFCP uses (TS 29.244 clause 4.2.2).
pub const PFCP_PORT: u16 = 8805;
