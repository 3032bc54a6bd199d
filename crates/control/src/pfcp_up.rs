//! The user plane's PFCP endpoint (3GPP TS 29.244 over UDP, port 8805, with the BBF TR-459
//! IEs): a control plane associates with this user plane and creates, changes and deletes
//! subscriber sessions, which become [`SessionCmd`]s on the session API ([`crate::session`]).
//!
//! ```text
//!  CP ──UDP 8805──▶ PfcpServer (one thread) ─▶ Endpoint::handle_datagram ─decode─▶ Endpoint::handle
//!                        ▲                          │ retransmission cache      │ PFCP sessions, SEIDs,
//!                        └──────── response ◀──────┘ (peer, type, seq, bytes)   │ session ids (free list)
//!                                                                               ▼
//!                                               UserPlane::apply(&[SessionCmd]) = Control::apply_sessions
//!                                               (the Mutex<Control> is locked only for that call)
//! ```
//! [`Endpoint`] is a state machine over decoded messages: no socket, no clock (the caller
//! passes the time), no lock. [`PfcpServer`] is the small UDP loop around it.
//!
//! **Mapping** (docs/pfcp.md, "The user plane's endpoint"): Create Traffic Endpoint ▸ the
//! session's identity (BBF Logical Port ▸ port, S-TAG ▸ S-VLAN, C-TAG ▸ C-VLAN, MAC address
//! (source) ▸ MAC, UE IP address (IPv4) ▸ address); QER UL MBR ▸ upstream peak rate, UL GBR ▸
//! committed rate (none: the MBR); QER DL MBR ▸ the tier whose `[[tm.profile]]` rate equals
//! it. PDRs, FARs and URRs are taken as the codec checked them: the pipeline's fixed session
//! shape carries them, and the URRs name the usage reports of a deletion, built from the
//! session's `sub_up` / `sub_down` counters.
//!
//! **Session ids** come from a free list (ids from 1: pipe 0 is where packets of no session,
//! such as ARP replies, are queued). A failed establishment returns its id; a deletion returns
//! it after reading the final counters, which become the baseline of the id's next session
//! (counters are never reset).
//!
//! **Errors.** Nothing a peer sends can make this panic. Every response's cause is counted
//! ([`Stats`]); the causes and when each is sent are in [`Reject`]'s constructors and in
//! docs/pfcp.md.

use crate::api::CtlError;
use crate::session::{Session, SessionCmd, Sessions};
use crate::state::Control;
use fastpath_pfcp::bbf::{bbf_type, BbfUpFunctionFeatures, LogicalPort};
use fastpath_pfcp::group::{CreateQer, UsageReport};
use fastpath_pfcp::ie::{ie_type as t, *};
use fastpath_pfcp::message::*;
use fastpath_pfcp::{decode, encode, DecodeError, ErrorKind, Message, NodeHeader, SessionHeader};
use fastpath_pipeline::Program;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Responses kept for answering retransmitted requests (TS 29.244 clause 6.4).
const CACHE_LEN: usize = 4096;

/// Seconds from 1900-01-01 (NTP era 0) to 1970-01-01.
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// The time now in NTP seconds (what Recovery Time Stamp, Start and End Time carry).
pub fn ntp_now() -> u32 {
    let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    (unix + NTP_UNIX_OFFSET) as u32
}

/// What the endpoint needs to know of its user plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The address the control plane reaches us at: our Node ID and the UP F-SEID's address.
    pub addr: IpAddr,
    /// Our Recovery Time Stamp (NTP seconds): when this user plane started.
    pub recovery_ntp: u32,
    /// Port names by port number: a BBF Logical Port is one of these names, or a port number
    /// in decimal.
    pub ports: Vec<String>,
    /// The downstream rate of each tier (`[[tm.profile]]`, bits/s; `None`: unshaped).
    pub tiers: Vec<Option<u64>>,
    /// Session ids go from 1 to `max_sessions - 1` (the smallest per-session array).
    pub max_sessions: u32,
    /// The ACL profile of new sessions (no PFCP IE carries it).
    pub acl: u8,
}

impl Config {
    /// The configuration for `prog` (which must have the session tables of
    /// `pipelines/vbng.toml`): tiers from its `[tm]` profiles, the id range from its
    /// per-session arrays.
    ///
    /// # Errors
    /// When the program has no subscriber sessions.
    pub fn for_program(prog: &Program, addr: IpAddr, ports: Vec<String>, recovery_ntp: u32) -> Result<Config, String> {
        Sessions::new(prog).map_err(|e| format!("PFCP endpoint: {e}"))?;
        let hqos = prog.tm.as_ref().and_then(|t| t.hqos.first());
        let tiers = hqos.map(|(_, h)| h.profiles.iter().map(|p| p.shaper.map(|s| s.rate_bps)).collect()).unwrap_or_default();
        let pipes = prog.tm.iter().flat_map(|t| t.hqos.iter().map(|(_, h)| h.groups.iter().map(|g| g.pipes as usize).sum::<usize>()));
        let sizes = prog.meters.iter().filter(|m| m.name == "police").map(|m| m.size).chain(prog.counters.iter().map(|c| c.size));
        let max_sessions = sizes.chain(pipes).min().unwrap_or(1 << 24).min(1 << 24) as u32;
        Ok(Config { addr, recovery_ntp, ports, tiers, max_sessions, acl: 0 })
    }
}

/// A session's usage: the `sub_up` and `sub_down` counters of its id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Upstream packets.
    pub up_pkts: u64,
    /// Upstream bytes.
    pub up_bytes: u64,
    /// Downstream packets.
    pub down_pkts: u64,
    /// Downstream bytes.
    pub down_bytes: u64,
}

impl Usage {
    fn since(self, base: Usage) -> Usage {
        Usage {
            up_pkts: self.up_pkts.saturating_sub(base.up_pkts),
            up_bytes: self.up_bytes.saturating_sub(base.up_bytes),
            down_pkts: self.down_pkts.saturating_sub(base.down_pkts),
            down_bytes: self.down_bytes.saturating_sub(base.down_bytes),
        }
    }
}

/// Why the user plane refused session changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The id is held by a session this endpoint did not create (`fastpath ctl session add`).
    IdTaken(u32),
    /// The session API refused (a duplicate identity or address, a value out of range).
    Rejected(String),
    /// A worker did not apply it.
    Failed(String),
}

/// What the endpoint changes and reads: the session API of a [`Control`]. Tests put a double
/// in its place.
pub trait UserPlane {
    /// Applies `cmds` as one transaction (all or nothing).
    ///
    /// # Errors
    /// [`Refusal`].
    fn apply(&mut self, cmds: &[SessionCmd]) -> Result<(), Refusal>;
    /// The counters of session id `id`, `None` when they cannot be read.
    fn usage(&mut self, id: u32) -> Option<Usage>;
}

impl UserPlane for Control<'_> {
    fn apply(&mut self, cmds: &[SessionCmd]) -> Result<(), Refusal> {
        if let Some(s) = self.sessions() {
            for (k, c) in cmds.iter().enumerate() {
                if let SessionCmd::Add(x) = c {
                    let freed_here = cmds.get(..k).is_some_and(|b| b.contains(&SessionCmd::Del(x.id)));
                    if s.get(x.id).is_some() && !freed_here {
                        return Err(Refusal::IdTaken(x.id));
                    }
                }
            }
        }
        match self.apply_sessions(cmds) {
            Ok(_) => Ok(()),
            Err(CtlError::Rejected(e)) => Err(Refusal::Rejected(e.msg)),
            Err(e) => Err(Refusal::Failed(e.to_string())),
        }
    }

    fn usage(&mut self, id: u32) -> Option<Usage> {
        let (up_pkts, up_bytes) = self.read_counter("sub_up", id as usize).ok()?;
        let (down_pkts, down_bytes) = self.read_counter("sub_down", id as usize).ok()?;
        Some(Usage { up_pkts, up_bytes, down_pkts, down_bytes })
    }
}

/// The shared control plane of `fastpath run`: locked for each call only.
impl UserPlane for &Mutex<Control<'_>> {
    fn apply(&mut self, cmds: &[SessionCmd]) -> Result<(), Refusal> {
        UserPlane::apply(&mut *self.lock().unwrap_or_else(PoisonError::into_inner), cmds)
    }

    fn usage(&mut self, id: u32) -> Option<Usage> {
        self.lock().unwrap_or_else(PoisonError::into_inner).usage(id)
    }
}

/// Counters of the endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams received.
    pub rx: u64,
    /// Responses sent.
    pub tx: u64,
    /// Datagrams that did not decode (answered with their cause when they were requests).
    pub malformed: u64,
    /// Messages of an unknown type, discarded (TS 29.244 clause 7.6.2).
    pub unknown_type: u64,
    /// Responses (we send no requests) and Heartbeat Requests that did not decode: discarded.
    pub discarded: u64,
    /// Retransmitted requests, answered with the response already sent.
    pub retransmitted: u64,
    /// Version Not Supported Responses sent.
    pub version_not_supported: u64,
    /// Association Setup Requests from a control plane that was associated already.
    pub reassociations: u64,
    /// Control planes seen to restart: an Association Setup Request or a Heartbeat Request
    /// with another Recovery Time Stamp than the association's.
    pub cp_restarts: u64,
    /// Sessions kept across a restarted control plane's new association (it sent PFCP
    /// Session Retention Information).
    pub sessions_retained: u64,
    /// Sessions deleted because a restarted control plane associated without asking to keep
    /// them (TS 29.244 clause 6.2.6.2.2).
    pub sessions_dropped: u64,
    /// Session Establishment Requests for a session we have (same control plane, CP SEID and
    /// subscriber), answered with it.
    pub reestablished: u64,
    /// Session Report Requests sent (periodic usage reports).
    pub reports_sent: u64,
    /// Session Report Responses that accepted a report.
    pub reports_acked: u64,
    /// Responses sent, by cause.
    pub causes: BTreeMap<u8, u64>,
}

impl Stats {
    /// One counter per line: `pfcp/rx 12`, `pfcp/cause/64_request_rejected 1`.
    pub fn render(&self) -> String {
        let mut o = String::new();
        for (k, v) in [
            ("rx", self.rx),
            ("tx", self.tx),
            ("malformed", self.malformed),
            ("unknown_type", self.unknown_type),
            ("discarded", self.discarded),
            ("retransmitted", self.retransmitted),
            ("version_not_supported", self.version_not_supported),
            ("reassociations", self.reassociations),
            ("cp_restarts", self.cp_restarts),
            ("sessions_retained", self.sessions_retained),
            ("sessions_dropped", self.sessions_dropped),
            ("reestablished", self.reestablished),
            ("reports_sent", self.reports_sent),
            ("reports_acked", self.reports_acked),
        ] {
            o.push_str(&format!("pfcp/{k} {v}\n"));
        }
        for (c, v) in &self.causes {
            o.push_str(&format!("pfcp/cause/{c}_{} {v}\n", cause_name(Cause(*c))));
        }
        o
    }
}

/// The snake_case name of a cause (TS 29.244 Table 8.2.1-1).
pub fn cause_name(c: Cause) -> &'static str {
    match c.0 {
        1 => "request_accepted",
        64 => "request_rejected",
        65 => "session_context_not_found",
        66 => "mandatory_ie_missing",
        67 => "conditional_ie_missing",
        68 => "invalid_length",
        69 => "mandatory_ie_incorrect",
        72 => "no_established_association",
        73 => "rule_creation_failure",
        75 => "no_resources_available",
        76 => "service_not_supported",
        77 => "system_failure",
        _ => "other",
    }
}

/// A refused request: the cause and the IE to blame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reject {
    /// The cause sent.
    pub cause: Cause,
    /// The Offending IE sent, if any.
    pub ie: Option<u16>,
}

impl Reject {
    /// 67: an IE our mapping needs and TS 29.244 makes conditional is absent (Create Traffic
    /// Endpoint; in it the Logical Port, S-TAG, C-TAG, MAC address, UE IP address).
    fn missing(ie: u16) -> Reject {
        Reject { cause: Cause::CONDITIONAL_IE_MISSING, ie: Some(ie) }
    }
    /// 69: an IE has a value we cannot use (unknown logical port, VLAN ID not 1-4094 or absent,
    /// no source MAC, no IPv4 address, an Update Traffic Endpoint for another endpoint).
    fn incorrect(ie: u16) -> Reject {
        Reject { cause: Cause::MANDATORY_IE_INCORRECT, ie: Some(ie) }
    }
    /// 73: rules that do not fit the session (a DL MBR equal to no tier's rate, GBR above MBR,
    /// two QERs with different rates for one direction, an Update QER of no QER).
    fn rule(ie: u16) -> Reject {
        Reject { cause: Cause::RULE_CREATION_FAILURE, ie: Some(ie) }
    }
    /// 76: what this user plane does not do (several traffic endpoints per session, creating or
    /// removing one later, PPPoE, a closed gate, choosing the UE address).
    fn unsupported(ie: u16) -> Reject {
        Reject { cause: Cause::SERVICE_NOT_SUPPORTED, ie: Some(ie) }
    }
    fn cause(cause: Cause, ie: Option<u16>) -> Reject {
        Reject { cause, ie }
    }
}

/// A QER as the session holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Qer {
    id: u32,
    gate: GateStatus,
    mbr: Option<BitRate>,
    gbr: Option<BitRate>,
}

impl Qer {
    fn of(q: &CreateQer) -> Qer {
        Qer { id: q.qer_id.0, gate: q.gate_status, mbr: q.mbr, gbr: q.gbr }
    }
}

/// One PFCP session: a subscriber session and what PFCP knows of it.
#[derive(Clone, Debug)]
struct PfcpSession {
    /// The control plane that created it (its association).
    node: NodeId,
    /// The control plane's SEID.
    cp_seid: u64,
    sub: Session,
    te_id: u8,
    qers: Vec<Qer>,
    urrs: Vec<u32>,
    /// Periodic reporting: the URR and its period (seconds), from a Create URR with PERIO.
    periodic: Option<(u32, u32)>,
    /// When the next periodic report is due (NTP seconds).
    next_report_ntp: u32,
    /// The session's counters as far as a report has been acknowledged (or, with none yet,
    /// at its start): each report carries the usage since then.
    acked: Usage,
    /// Start of the usage not yet acknowledged (NTP seconds).
    acked_ntp: u32,
    /// UR-SEQN of the next report; it advances only when a report is acknowledged, so a report
    /// sent again (its answer lost) keeps its number and the control plane replaces it.
    ur_seqn: u32,
    /// The report in flight: its sequence number, the counters and the time it covers up to.
    in_flight: Option<(u32, Usage, u32)>,
}

/// A control plane's association.
#[derive(Clone, Copy, Debug)]
struct Assoc {
    /// Its Recovery Time Stamp, as its last Association Setup Request said.
    recovery_ntp: u32,
    /// Where its requests came from: Session Report Requests go there.
    peer: SocketAddr,
    /// The Recovery Time Stamp its heartbeats last gave (a restart is counted once).
    heartbeat_ntp: u32,
}

/// Session ids: fresh ones from 1 upwards, then the freed ones.
#[derive(Clone, Debug)]
struct IdPool {
    next: u32,
    max: u32,
    free: Vec<u32>,
    /// Ids found taken by sessions someone else created: never handed out again.
    lost: u32,
}

impl IdPool {
    fn alloc(&mut self) -> Option<u32> {
        if let Some(id) = self.free.pop() {
            return Some(id);
        }
        (self.next < self.max).then(|| {
            self.next += 1;
            self.next - 1
        })
    }

    fn release(&mut self, id: u32) {
        self.free.push(id);
    }

    fn in_use(&self) -> usize {
        (self.next.saturating_sub(1 + self.lost) as usize).saturating_sub(self.free.len())
    }
}

/// The responses last sent, by request, for retransmissions.
#[derive(Default)]
struct Cache {
    map: HashMap<RequestKey, Vec<u8>>,
    order: VecDeque<RequestKey>,
}

/// A request: peer, message type, sequence number and a hash of its bytes (a new request that
/// reuses a sequence number after it wraps is not a retransmission).
type RequestKey = (SocketAddr, u8, u32, u64);

impl Cache {
    fn insert(&mut self, k: RequestKey, v: Vec<u8>) {
        if self.map.insert(k, v).is_none() {
            self.order.push_back(k);
        }
        while self.order.len() > CACHE_LEN {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }
}

fn is_request(ty: u8) -> bool {
    matches!(ty, 1 | 5 | 7 | 9 | 50 | 52 | 54 | 56)
}

/// Type and sequence number from a header, `None` when too short.
fn header_of(buf: &[u8]) -> Option<(u8, u32, Option<u64>)> {
    let (&flags, &ty) = (buf.first()?, buf.get(1)?);
    let session = flags & 0x01 != 0;
    let at = if session { 12 } else { 4 };
    let s = buf.get(at..at + 3)?;
    let seq = u32::from_be_bytes([0, s[0], s[1], s[2]]);
    let seid = if session { buf.get(4..12).map(|b| b.iter().fold(0u64, |a, x| a << 8 | u64::from(*x))) } else { None };
    Some((ty, seq, seid))
}

/// The user plane's PFCP state: associations, PFCP sessions and their subscriber sessions.
/// Control thread only (one PFCP thread).
pub struct Endpoint {
    cfg: Config,
    node_id: NodeId,
    /// The control planes associated, by Node ID.
    assocs: HashMap<NodeId, Assoc>,
    sessions: HashMap<u64, PfcpSession>,
    by_cp: HashMap<(NodeId, u64), u64>,
    ids: IdPool,
    /// Counters of a freed id when it was freed: the next session's usage starts there.
    base: HashMap<u32, Usage>,
    generation: u32,
    /// Sequence numbers of our own requests (Session Report Requests).
    seq: u32,
    /// Session Report Requests in flight: sequence number ▸ our SEID.
    reports: HashMap<u32, u64>,
    cache: Cache,
    stats: Stats,
}

impl Endpoint {
    /// An endpoint with no association.
    pub fn new(cfg: Config) -> Endpoint {
        let node_id = match cfg.addr {
            IpAddr::V4(a) => NodeId::Ipv4(a),
            IpAddr::V6(a) => NodeId::Ipv6(a),
        };
        let ids = IdPool { next: 1, max: cfg.max_sessions.max(1), free: Vec::new(), lost: 0 };
        Endpoint {
            cfg,
            node_id,
            assocs: HashMap::new(),
            sessions: HashMap::new(),
            by_cp: HashMap::new(),
            ids,
            base: HashMap::new(),
            generation: 0,
            seq: 0,
            reports: HashMap::new(),
            cache: Cache::default(),
            stats: Stats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// PFCP sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// True with no PFCP session.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Session ids handed out and not returned (equals [`Endpoint::len`]: none leak).
    pub fn ids_in_use(&self) -> usize {
        self.ids.in_use()
    }

    /// Control planes associated.
    pub fn associations(&self) -> usize {
        self.assocs.len()
    }

    /// The subscriber session behind our SEID `seid`.
    pub fn session(&self, seid: u64) -> Option<&Session> {
        self.sessions.get(&seid).map(|s| &s.sub)
    }

    fn f_seid(&self, seid: u64) -> FSeid {
        match self.cfg.addr {
            IpAddr::V4(a) => FSeid { seid, ipv4: Some(a), ipv6: None },
            IpAddr::V6(a) => FSeid { seid, ipv4: None, ipv6: Some(a) },
        }
    }

    /// Counts the response's cause.
    fn respond(&mut self, m: Message) -> Message {
        let cause = match &m {
            Message::AssociationSetupResponse(_, r) => Some(r.cause),
            Message::AssociationUpdateResponse(_, r) => Some(r.cause),
            Message::AssociationReleaseResponse(_, r) => Some(r.cause),
            Message::SessionEstablishmentResponse(_, r) => Some(r.cause),
            Message::SessionModificationResponse(_, r) => Some(r.cause),
            Message::SessionDeletionResponse(_, r) => Some(r.cause),
            Message::SessionReportResponse(_, r) => Some(r.cause),
            _ => None,
        };
        if let Some(c) = cause {
            *self.stats.causes.entry(c.0).or_default() += 1;
        }
        m
    }

    /// Handles one datagram from `peer` and returns the response to send, if any: a
    /// retransmitted request gets the response it got before (and changes nothing); a message
    /// that does not decode gets the cause the codec names, in the response to its type.
    ///
    /// # Panics
    /// Never, on any input.
    pub fn handle_datagram(&mut self, peer: SocketAddr, buf: &[u8], now_ntp: u32, up: &mut impl UserPlane) -> Option<Vec<u8>> {
        self.stats.rx += 1;
        let key = header_of(buf).filter(|(ty, ..)| is_request(*ty)).map(|(ty, seq, _)| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            buf.hash(&mut h);
            (peer, ty, seq, h.finish())
        });
        if let Some(r) = key.and_then(|k| self.cache.map.get(&k)) {
            self.stats.retransmitted += 1;
            self.stats.tx += 1;
            return Some(r.clone());
        }
        let out = match decode(buf) {
            Ok(msg) => {
                let resp = self.handle(peer, &msg, now_ntp, up)?;
                let mut out = Vec::new();
                encode(&resp, &mut out).ok()?;
                out
            }
            Err(e) => self.error_response(buf, &e)?,
        };
        if let Some(k) = key {
            self.cache.insert(k, out.clone());
        }
        self.stats.tx += 1;
        Some(out)
    }

    /// The answer to a message that did not decode.
    fn error_response(&mut self, buf: &[u8], e: &DecodeError) -> Option<Vec<u8>> {
        self.stats.malformed += 1;
        let (ty, seq, seid) = match (e.kind, header_of(buf)) {
            (ErrorKind::UnknownMessageType(_), _) => {
                self.stats.unknown_type += 1;
                return None;
            }
            (ErrorKind::UnsupportedVersion(_), h) => {
                // TS 29.244 clause 7.4.4.7: a header only, version 1, with the request's
                // sequence number.
                self.stats.version_not_supported += 1;
                let seq = h.map_or(0, |(_, s, _)| s).to_be_bytes();
                return Some(vec![0x20, 11, 0, 4, seq[1], seq[2], seq[3], 0]);
            }
            (_, Some(h)) if is_request(h.0) && h.0 != msg_type::HEARTBEAT_REQUEST => h,
            _ => {
                // A response, a heartbeat (its response has no cause) or no header at all.
                self.stats.discarded += 1;
                return None;
            }
        };
        let cause = e.cause()?;
        let offending_ie = e.offending_ie().map(OffendingIe);
        let node = NodeHeader { seq };
        let cp_seid = seid.and_then(|s| self.sessions.get(&s)).map_or(0, |s| s.cp_seid);
        let sh = SessionHeader { seid: cp_seid, seq, priority: None };
        let node_id = self.node_id.clone();
        let m = match ty {
            msg_type::ASSOCIATION_SETUP_REQUEST => Message::AssociationSetupResponse(
                node,
                AssociationSetupResponse {
                    node_id,
                    cause,
                    recovery_time_stamp: RecoveryTimeStamp(self.cfg.recovery_ntp),
                    ..Default::default()
                },
            ),
            msg_type::ASSOCIATION_UPDATE_REQUEST => {
                Message::AssociationUpdateResponse(node, AssociationUpdateResponse { node_id, cause, ..Default::default() })
            }
            msg_type::ASSOCIATION_RELEASE_REQUEST => {
                Message::AssociationReleaseResponse(node, AssociationReleaseResponse { node_id, cause, unknown: vec![] })
            }
            msg_type::SESSION_ESTABLISHMENT_REQUEST => Message::SessionEstablishmentResponse(
                sh,
                SessionEstablishmentResponse { node_id, cause, offending_ie, up_f_seid: None, unknown: vec![] },
            ),
            msg_type::SESSION_MODIFICATION_REQUEST => {
                Message::SessionModificationResponse(sh, SessionModificationResponse { cause, offending_ie, ..Default::default() })
            }
            msg_type::SESSION_DELETION_REQUEST => {
                Message::SessionDeletionResponse(sh, SessionDeletionResponse { cause, offending_ie, ..Default::default() })
            }
            _ => Message::SessionReportResponse(sh, SessionReportResponse { cause, offending_ie, unknown: vec![] }),
        };
        let m = self.respond(m);
        let mut out = Vec::new();
        encode(&m, &mut out).ok()?;
        Some(out)
    }

    /// Handles one decoded message from `peer` and returns the response, if any (responses
    /// and messages a user plane does not take get none). `now_ntp` is the time in NTP
    /// seconds. Retransmissions are [`Endpoint::handle_datagram`]'s business.
    pub fn handle(&mut self, peer: SocketAddr, msg: &Message, now_ntp: u32, up: &mut impl UserPlane) -> Option<Message> {
        let node_id = self.node_id.clone();
        let m = match msg {
            Message::HeartbeatRequest(h, r) => {
                self.heartbeat_from(peer, r.recovery_time_stamp.0);
                Message::HeartbeatResponse(
                    *h,
                    HeartbeatResponse { recovery_time_stamp: RecoveryTimeStamp(self.cfg.recovery_ntp), unknown: vec![] },
                )
            }
            Message::AssociationSetupRequest(h, r) => {
                let retained = self.associate(peer, r, up);
                Message::AssociationSetupResponse(
                    *h,
                    AssociationSetupResponse {
                        node_id,
                        cause: Cause::REQUEST_ACCEPTED,
                        recovery_time_stamp: RecoveryTimeStamp(self.cfg.recovery_ntp),
                        // No optional 3GPP UP feature (octets 5 and 6 all zero).
                        up_function_features: Some(UpFunctionFeatures(vec![0, 0])),
                        cp_function_features: None,
                        bbf_up_function_features: Some(BbfUpFunctionFeatures(BbfUpFunctionFeatures::IPOE)),
                        pfcpasrsp_flags: retained.then_some(PfcpasRspFlags(PfcpasRspFlags::PSREI)),
                        unknown: vec![],
                    },
                )
            }
            Message::AssociationUpdateRequest(h, r) => {
                let cause = if self.assocs.contains_key(&r.node_id) { Cause::REQUEST_ACCEPTED } else { Cause::NO_ESTABLISHED_ASSOCIATION };
                Message::AssociationUpdateResponse(*h, AssociationUpdateResponse { node_id, cause, ..Default::default() })
            }
            Message::AssociationReleaseRequest(h, r) => {
                let cause = self.release(&r.node_id, up);
                Message::AssociationReleaseResponse(*h, AssociationReleaseResponse { node_id, cause, unknown: vec![] })
            }
            Message::SessionEstablishmentRequest(h, r) => {
                let hdr = SessionHeader { seid: r.cp_f_seid.seid, seq: h.seq, priority: None };
                let body = match self.establish(r, now_ntp, up) {
                    Ok(seid) => SessionEstablishmentResponse {
                        node_id,
                        cause: Cause::REQUEST_ACCEPTED,
                        offending_ie: None,
                        up_f_seid: Some(self.f_seid(seid)),
                        unknown: vec![],
                    },
                    Err(e) => SessionEstablishmentResponse {
                        node_id,
                        cause: e.cause,
                        offending_ie: e.ie.map(OffendingIe),
                        up_f_seid: None,
                        unknown: vec![],
                    },
                };
                Message::SessionEstablishmentResponse(hdr, body)
            }
            Message::SessionModificationRequest(h, r) => {
                let cp_seid = self.sessions.get(&h.seid).map_or(0, |s| s.cp_seid);
                let (cause, offending_ie) = match self.modify(h.seid, r, up) {
                    Ok(()) => (Cause::REQUEST_ACCEPTED, None),
                    Err(e) => (e.cause, e.ie.map(OffendingIe)),
                };
                let hdr = SessionHeader { seid: cp_seid, seq: h.seq, priority: None };
                Message::SessionModificationResponse(hdr, SessionModificationResponse { cause, offending_ie, ..Default::default() })
            }
            Message::SessionDeletionRequest(h, _) => {
                let cp_seid = self.sessions.get(&h.seid).map_or(0, |s| s.cp_seid);
                let hdr = SessionHeader { seid: cp_seid, seq: h.seq, priority: None };
                let body = match self.delete(h.seid, now_ntp, up) {
                    Ok(usage_report) => SessionDeletionResponse { cause: Cause::REQUEST_ACCEPTED, usage_report, ..Default::default() },
                    Err(e) => SessionDeletionResponse { cause: e.cause, offending_ie: e.ie.map(OffendingIe), ..Default::default() },
                };
                Message::SessionDeletionResponse(hdr, body)
            }
            Message::SessionReportRequest(h, _) => {
                // Reports go from the user plane to the control plane, not to us.
                let hdr = SessionHeader { seid: 0, seq: h.seq, priority: None };
                Message::SessionReportResponse(
                    hdr,
                    SessionReportResponse { cause: Cause::REQUEST_REJECTED, offending_ie: None, unknown: vec![] },
                )
            }
            Message::SessionReportResponse(h, r) => {
                self.report_answered(h.seq, r.cause);
                return None;
            }
            _ => {
                // Another response: we send no other requests, so nothing waits for it.
                self.stats.discarded += 1;
                return None;
            }
        };
        Some(self.respond(m))
    }

    /// Applies the identity IEs of a (Create or Update) Traffic Endpoint to `sub`. With
    /// `create`, each one is required.
    #[allow(clippy::too_many_arguments)]
    fn identity(
        &self,
        sub: &mut Session,
        create: bool,
        lport: Option<&LogicalPort>,
        s_tag: Option<&VlanTag>,
        c_tag: Option<&VlanTag>,
        mac: Option<&MacAddress>,
        ue_ip: &[UeIpAddress],
        pppoe: bool,
    ) -> Result<(), Reject> {
        if pppoe {
            return Err(Reject::unsupported(bbf_type::PPPOE_SESSION_ID));
        }
        match lport {
            Some(p) => sub.port = self.port_of(p).ok_or(Reject::incorrect(bbf_type::LOGICAL_PORT))?,
            None if create => return Err(Reject::missing(bbf_type::LOGICAL_PORT)),
            None => {}
        }
        let vid = |tag: Option<&VlanTag>, ie: u16| -> Result<Option<u16>, Reject> {
            match tag {
                Some(t) => t.vid.filter(|v| (1..=4094).contains(v)).map(Some).ok_or(Reject::incorrect(ie)),
                None if create => Err(Reject::missing(ie)),
                None => Ok(None),
            }
        };
        if let Some(v) = vid(s_tag, t::S_TAG)? {
            sub.svlan = v;
        }
        if let Some(v) = vid(c_tag, t::C_TAG)? {
            sub.cvlan = v;
        }
        match mac {
            Some(m) => sub.mac = m.source.ok_or(Reject::incorrect(t::MAC_ADDRESS))?,
            None if create => return Err(Reject::missing(t::MAC_ADDRESS)),
            None => {}
        }
        match ue_ip.iter().find_map(|u| u.ipv4) {
            Some(a) => sub.ip = a,
            None if ue_ip.iter().any(|u| u.choose_ipv4) => return Err(Reject::unsupported(t::UE_IP_ADDRESS)),
            None if !ue_ip.is_empty() => return Err(Reject::incorrect(t::UE_IP_ADDRESS)),
            None if create => return Err(Reject::missing(t::UE_IP_ADDRESS)),
            None => {}
        }
        Ok(())
    }

    /// A logical port: one of our port names, or a port number in decimal.
    fn port_of(&self, p: &LogicalPort) -> Option<u16> {
        if let Some(i) = self.cfg.ports.iter().position(|n| n.as_bytes() == p.0.as_slice()) {
            return u16::try_from(i).ok();
        }
        let n: u16 = std::str::from_utf8(&p.0).ok()?.parse().ok()?;
        (self.cfg.ports.is_empty() || usize::from(n) < self.cfg.ports.len()).then_some(n)
    }

    /// Upstream rates and tier from a session's QERs.
    fn rates(&self, qers: &[Qer]) -> Result<(Option<(u64, u64)>, u16), Reject> {
        let (mut ul, mut dl): (Option<(u64, Option<u64>)>, Option<u64>) = (None, None);
        for q in qers {
            if q.gate != GateStatus::OPEN {
                return Err(Reject::unsupported(t::GATE_STATUS));
            }
            let Some(m) = q.mbr else { continue };
            if m.ul_kbps > 0 {
                let g = q.gbr.map(|g| g.ul_kbps).filter(|&g| g > 0);
                if ul.is_some_and(|x| x != (m.ul_kbps, g)) {
                    return Err(Reject::rule(t::CREATE_QER));
                }
                ul = Some((m.ul_kbps, g));
            }
            if m.dl_kbps > 0 {
                if dl.is_some_and(|x| x != m.dl_kbps) {
                    return Err(Reject::rule(t::CREATE_QER));
                }
                dl = Some(m.dl_kbps);
            }
        }
        let up = match ul {
            None => None,
            Some((mbr, gbr)) => {
                let pir = mbr.saturating_mul(1000);
                let cir = gbr.map_or(pir, |g| g.saturating_mul(1000));
                if cir > pir {
                    return Err(Reject::rule(t::GBR));
                }
                Some((cir, pir))
            }
        };
        let tier = match dl {
            None => 0,
            Some(kbps) => {
                let bps = kbps.saturating_mul(1000);
                let k = self.cfg.tiers.iter().position(|r| *r == Some(bps)).ok_or(Reject::rule(t::MBR))?;
                u16::try_from(k).map_err(|_| Reject::rule(t::MBR))?
            }
        };
        Ok((up, tier))
    }

    fn establish(&mut self, r: &SessionEstablishmentRequest, now_ntp: u32, up: &mut impl UserPlane) -> Result<u64, Reject> {
        if !self.assocs.contains_key(&r.node_id) {
            return Err(Reject::cause(Cause::NO_ESTABLISHED_ASSOCIATION, None));
        }
        let cp_key = (r.node_id.clone(), r.cp_f_seid.seid);
        let te = match r.create_traffic_endpoint.as_slice() {
            [] => return Err(Reject::missing(t::CREATE_TRAFFIC_ENDPOINT)),
            [te] => te,
            _ => return Err(Reject::unsupported(t::CREATE_TRAFFIC_ENDPOINT)),
        };
        let mut sub = Session {
            id: 0,
            port: 0,
            svlan: 0,
            cvlan: 0,
            mac: [0; 6],
            ip: std::net::Ipv4Addr::UNSPECIFIED,
            tier: 0,
            acl: self.cfg.acl,
            up: None,
        };
        self.identity(
            &mut sub,
            true,
            te.logical_port.as_ref(),
            te.s_tag.as_ref(),
            te.c_tag.as_ref(),
            te.mac_address.as_ref(),
            &te.ue_ip_address,
            te.pppoe_session_id.is_some(),
        )?;
        let qers: Vec<Qer> = r.create_qer.iter().map(Qer::of).collect();
        (sub.up, sub.tier) = self.rates(&qers)?;
        if let Some(&seid) = self.by_cp.get(&cp_key) {
            // The same CP F-SEID again. For the same subscriber it is a control plane that
            // restarted between our answer and its record of it, asking again: the session we
            // have is the answer. Anything else reuses a CP SEID: refused.
            let same = self.sessions.get(&seid).is_some_and(|s| {
                let (a, b) = (&s.sub, &sub);
                (a.port, a.svlan, a.cvlan, a.mac, a.ip) == (b.port, b.svlan, b.cvlan, b.mac, b.ip)
            });
            if same {
                self.stats.reestablished += 1;
                return Ok(seid);
            }
            return Err(Reject::cause(Cause::REQUEST_REJECTED, Some(t::F_SEID)));
        }
        loop {
            let id = self.ids.alloc().ok_or(Reject::cause(Cause::NO_RESOURCES_AVAILABLE, None))?;
            sub.id = id;
            match up.apply(&[SessionCmd::Add(sub.clone())]) {
                Ok(()) => break,
                Err(Refusal::IdTaken(_)) => self.ids.lost += 1,
                Err(Refusal::Rejected(_)) => {
                    self.ids.release(id);
                    return Err(Reject::cause(Cause::REQUEST_REJECTED, Some(t::CREATE_TRAFFIC_ENDPOINT)));
                }
                Err(Refusal::Failed(_)) => {
                    self.ids.release(id);
                    return Err(Reject::cause(Cause::SYSTEM_FAILURE, None));
                }
            }
        }
        self.generation = self.generation.wrapping_add(1);
        let seid = u64::from(self.generation) << 32 | u64::from(sub.id);
        let periodic = r
            .create_urr
            .iter()
            .filter(|u| u.reporting_triggers.0 & Triggers::PERIO != 0)
            .find_map(|u| u.measurement_period.filter(|p| p.0 > 0).map(|p| (u.urr_id.0, p.0)));
        let s = PfcpSession {
            node: r.node_id.clone(),
            cp_seid: r.cp_f_seid.seid,
            te_id: te.traffic_endpoint_id.0,
            qers,
            urrs: r.create_urr.iter().map(|u| u.urr_id.0).collect(),
            periodic,
            next_report_ntp: now_ntp.wrapping_add(periodic.map_or(0, |p| p.1)),
            acked: self.base.get(&sub.id).copied().unwrap_or_default(),
            acked_ntp: now_ntp,
            ur_seqn: 0,
            in_flight: None,
            sub,
        };
        self.sessions.insert(seid, s);
        self.by_cp.insert(cp_key, seid);
        Ok(seid)
    }

    fn modify(&mut self, seid: u64, r: &SessionModificationRequest, up: &mut impl UserPlane) -> Result<(), Reject> {
        let s = self.sessions.get(&seid).ok_or(Reject::cause(Cause::SESSION_CONTEXT_NOT_FOUND, None))?;
        if !r.create_traffic_endpoint.is_empty() {
            return Err(Reject::unsupported(t::CREATE_TRAFFIC_ENDPOINT));
        }
        if !r.remove_traffic_endpoint.is_empty() {
            return Err(Reject::unsupported(t::REMOVE_TRAFFIC_ENDPOINT));
        }
        let mut sub = s.sub.clone();
        for te in &r.update_traffic_endpoint {
            if te.traffic_endpoint_id.0 != s.te_id {
                return Err(Reject::incorrect(t::TRAFFIC_ENDPOINT_ID));
            }
            self.identity(
                &mut sub,
                false,
                te.logical_port.as_ref(),
                te.s_tag.as_ref(),
                te.c_tag.as_ref(),
                te.mac_address.as_ref(),
                &te.ue_ip_address,
                te.pppoe_session_id.is_some(),
            )?;
        }
        let mut qers = s.qers.clone();
        for q in &r.remove_qer {
            qers.retain(|x| x.id != q.qer_id.0);
        }
        for q in &r.create_qer {
            qers.retain(|x| x.id != q.qer_id.0);
            qers.push(Qer::of(q));
        }
        for u in &r.update_qer {
            let q = qers.iter_mut().find(|x| x.id == u.qer_id.0).ok_or(Reject::rule(t::UPDATE_QER))?;
            q.gate = u.gate_status.unwrap_or(q.gate);
            q.mbr = u.mbr.or(q.mbr);
            q.gbr = u.gbr.or(q.gbr);
        }
        (sub.up, sub.tier) = self.rates(&qers)?;
        let old = &s.sub;
        let same_identity = (old.port, old.svlan, old.cvlan, old.mac, old.ip) == (sub.port, sub.svlan, sub.cvlan, sub.mac, sub.ip);
        let cmds = if !same_identity {
            // The session API changes no identity in place: delete and add under the same id,
            // in one transaction.
            vec![SessionCmd::Del(sub.id), SessionCmd::Add(sub.clone())]
        } else if sub != *old {
            vec![SessionCmd::Modify {
                id: sub.id,
                tier: (sub.tier != old.tier).then_some(sub.tier),
                acl: None,
                up: (sub.up != old.up).then_some(sub.up),
            }]
        } else {
            Vec::new()
        };
        if !cmds.is_empty() {
            match up.apply(&cmds) {
                Ok(()) => {}
                Err(Refusal::Rejected(_) | Refusal::IdTaken(_)) => {
                    return Err(Reject::cause(Cause::REQUEST_REJECTED, Some(t::UPDATE_TRAFFIC_ENDPOINT)))
                }
                Err(Refusal::Failed(_)) => return Err(Reject::cause(Cause::SYSTEM_FAILURE, None)),
            }
        }
        let new_cp = r.cp_f_seid.map(|f| f.seid);
        let Some(s) = self.sessions.get_mut(&seid) else { return Ok(()) };
        s.sub = sub;
        s.qers = qers;
        if let Some(cp) = new_cp.filter(|&c| c != s.cp_seid) {
            let node = s.node.clone();
            self.by_cp.remove(&(node.clone(), s.cp_seid));
            s.cp_seid = cp;
            self.by_cp.insert((node, cp), seid);
        }
        Ok(())
    }

    fn delete(&mut self, seid: u64, now_ntp: u32, up: &mut impl UserPlane) -> Result<Vec<UsageReport>, Reject> {
        let s = self.sessions.get(&seid).ok_or(Reject::cause(Cause::SESSION_CONTEXT_NOT_FOUND, None))?;
        match up.apply(&[SessionCmd::Del(s.sub.id)]) {
            // Refused: the session is gone already (`fastpath ctl session del`).
            Ok(()) | Err(Refusal::Rejected(_) | Refusal::IdTaken(_)) => {}
            Err(Refusal::Failed(_)) => return Err(Reject::cause(Cause::SYSTEM_FAILURE, None)),
        }
        let Some(s) = self.sessions.remove(&seid) else { return Ok(Vec::new()) };
        self.by_cp.remove(&(s.node.clone(), s.cp_seid));
        Ok(self.final_usage(&s, now_ntp, up))
    }

    /// Reads a deleted session's counters, frees its id and returns its usage reports (one
    /// per URR, each with the whole session's usage: there is one counter pair per session).
    fn final_usage(&mut self, s: &PfcpSession, now_ntp: u32, up: &mut impl UserPlane) -> Vec<UsageReport> {
        let id = s.sub.id;
        let now = up.usage(id);
        self.base.remove(&id);
        if let Some(n) = now {
            self.base.insert(id, n);
        }
        self.ids.release(id);
        if let Some((seq, ..)) = s.in_flight {
            self.reports.remove(&seq);
        }
        let Some(u) = now.map(|n| n.since(s.acked)) else { return Vec::new() };
        s.urrs.iter().map(|&urr| usage_report(urr, s.ur_seqn, Triggers::TERMR, s.acked_ntp, now_ntp, u)).collect()
    }

    /// A Heartbeat Request from `peer`: a control plane whose association came from the same
    /// address and that now gives another Recovery Time Stamp has restarted. Its sessions
    /// stay until it associates again (clause 6.2.6.2.2 decides then).
    fn heartbeat_from(&mut self, peer: SocketAddr, recovery_ntp: u32) {
        for a in self.assocs.values_mut() {
            if a.peer.ip() == peer.ip() && a.heartbeat_ntp != recovery_ntp {
                self.stats.cp_restarts += 1;
                a.heartbeat_ntp = recovery_ntp;
            }
        }
    }

    /// An Association Setup Request; true when the sessions of a former association were
    /// kept (PSREI in the response): at the control plane's request, or because it did not
    /// restart (the same Recovery Time Stamp: a repeat).
    ///
    /// TS 29.244 clause 6.2.6.2.2: a request from a Node ID already associated replaces the
    /// association; when the control plane restarted (another Recovery Time Stamp), the UP
    /// function keeps the former association's sessions if the request carries PFCP Session
    /// Retention Information, and deletes them otherwise. A repeat with the same Recovery Time
    /// Stamp changes nothing.
    fn associate(&mut self, peer: SocketAddr, r: &AssociationSetupRequest, up: &mut impl UserPlane) -> bool {
        let rts = r.recovery_time_stamp.0;
        let new = Assoc { recovery_ntp: rts, peer, heartbeat_ntp: rts };
        let Some(old) = self.assocs.insert(r.node_id.clone(), new) else { return false };
        self.stats.reassociations += 1;
        let mine: Vec<u64> = self.sessions.iter().filter(|(_, s)| s.node == r.node_id).map(|(k, _)| *k).collect();
        if old.recovery_ntp == rts && old.peer == peer {
            // A repeat: everything stays, and PSREI says so (a control plane that sees no
            // PSREI would establish its sessions again).
            return !mine.is_empty();
        }
        if old.heartbeat_ntp != rts {
            // Not counted yet by a heartbeat.
            self.stats.cp_restarts += 1;
        }
        if r.pfcp_session_retention_information.is_some() || old.recovery_ntp == rts {
            self.stats.sessions_retained += mine.len() as u64;
            return !mine.is_empty();
        }
        for k in mine {
            let cmd = self.sessions.get(&k).map(|s| SessionCmd::Del(s.sub.id));
            if let Some(cmd) = cmd {
                if let Err(Refusal::Failed(_)) = up.apply(&[cmd]) {
                    continue;
                }
            }
            if let Some(s) = self.sessions.remove(&k) {
                self.by_cp.remove(&(s.node.clone(), s.cp_seid));
                self.final_usage(&s, 0, up);
                self.stats.sessions_dropped += 1;
            }
        }
        false
    }

    /// Session Report Requests that are due at `now_ntp`: one per session whose periodic URR's
    /// period has passed, with the usage since the last acknowledged report, to the address
    /// its control plane's association came from. A report not acknowledged by the next period
    /// is replaced by one covering both (same UR-SEQN). Call it about once a second.
    pub fn poll(&mut self, now_ntp: u32, up: &mut impl UserPlane) -> Vec<(SocketAddr, Vec<u8>)> {
        let due: Vec<u64> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.periodic.is_some() && now_ntp.wrapping_sub(s.next_report_ntp) < 1 << 31)
            .map(|(k, _)| *k)
            .collect();
        let mut out = Vec::new();
        for seid in due {
            let Some(s) = self.sessions.get(&seid) else { continue };
            let (Some((urr, period)), Some(a)) = (s.periodic, self.assocs.get(&s.node)) else { continue };
            let peer = a.peer;
            let Some(now) = up.usage(s.sub.id) else { continue };
            self.seq = (self.seq + 1) & 0x00ff_ffff;
            let seq = self.seq;
            let report = usage_report(urr, s.ur_seqn, Triggers::PERIO, s.acked_ntp, now_ntp, now.since(s.acked));
            let m = Message::SessionReportRequest(
                SessionHeader { seid: s.cp_seid, seq, priority: None },
                SessionReportRequest { report_type: ReportType(ReportType::USAR), usage_report: vec![report], unknown: vec![] },
            );
            let mut bytes = Vec::new();
            if encode(&m, &mut bytes).is_err() {
                continue;
            }
            let Some(s) = self.sessions.get_mut(&seid) else { continue };
            if let Some((old, ..)) = s.in_flight.replace((seq, now, now_ntp)) {
                self.reports.remove(&old);
            }
            // Due again a period after this one was, so reports stay on their grid.
            while now_ntp.wrapping_sub(s.next_report_ntp) < 1 << 31 {
                s.next_report_ntp = s.next_report_ntp.wrapping_add(period.max(1));
            }
            self.reports.insert(seq, seid);
            self.stats.reports_sent += 1;
            out.push((peer, bytes));
        }
        out
    }

    /// A Session Report Response: an accepted report moves the session's baseline on.
    fn report_answered(&mut self, seq: u32, cause: Cause) {
        let Some(seid) = self.reports.remove(&seq) else {
            self.stats.discarded += 1;
            return;
        };
        let Some(s) = self.sessions.get_mut(&seid) else { return };
        match s.in_flight {
            Some((q, usage, end)) if q == seq && cause == Cause::REQUEST_ACCEPTED => {
                s.acked = usage;
                s.acked_ntp = end;
                s.ur_seqn = s.ur_seqn.wrapping_add(1);
                s.in_flight = None;
                self.stats.reports_acked += 1;
            }
            _ => s.in_flight = None,
        }
    }

    /// Association Release (TS 29.244 clause 6.2.8.3: the user plane deletes the sessions of
    /// the association locally).
    fn release(&mut self, node: &NodeId, up: &mut impl UserPlane) -> Cause {
        if !self.assocs.contains_key(node) {
            return Cause::NO_ESTABLISHED_ASSOCIATION;
        }
        let seids: Vec<u64> = self.sessions.iter().filter(|(_, s)| s.node == *node).map(|(k, _)| *k).collect();
        let cmds: Vec<SessionCmd> = seids.iter().filter_map(|k| self.sessions.get(k)).map(|s| SessionCmd::Del(s.sub.id)).collect();
        match up.apply(&cmds) {
            Ok(()) => {}
            Err(Refusal::Failed(_)) => return Cause::SYSTEM_FAILURE,
            // One of them is gone already: delete the others one by one.
            Err(_) => {
                for c in &cmds {
                    if let Err(Refusal::Failed(_)) = up.apply(std::slice::from_ref(c)) {
                        return Cause::SYSTEM_FAILURE;
                    }
                }
            }
        }
        for k in seids {
            if let Some(s) = self.sessions.remove(&k) {
                self.by_cp.remove(&(s.node.clone(), s.cp_seid));
                self.final_usage(&s, 0, up);
            }
        }
        self.assocs.remove(node);
        Cause::REQUEST_ACCEPTED
    }
}

/// One Usage Report: `u` between `start_ntp` and `end_ntp`, for `trigger`.
fn usage_report(urr: u32, seqn: u32, trigger: u32, start_ntp: u32, end_ntp: u32, u: Usage) -> UsageReport {
    let volume = VolumeMeasurement {
        total_bytes: Some(u.up_bytes.saturating_add(u.down_bytes)),
        ul_bytes: Some(u.up_bytes),
        dl_bytes: Some(u.down_bytes),
        total_pkts: Some(u.up_pkts.saturating_add(u.down_pkts)),
        ul_pkts: Some(u.up_pkts),
        dl_pkts: Some(u.down_pkts),
    };
    UsageReport {
        urr_id: UrrId(urr),
        ur_seqn: UrSeqn(seqn),
        usage_report_trigger: Triggers(trigger),
        start_time: Some(StartTime(start_ntp)),
        end_time: Some(EndTime(end_ntp)),
        volume_measurement: Some(volume),
        duration_measurement: Some(DurationMeasurement(end_ntp.wrapping_sub(start_ntp))),
        unknown: vec![],
    }
}

/// The endpoint on a UDP socket: one thread, one datagram at a time.
pub struct PfcpServer {
    sock: UdpSocket,
    endpoint: Endpoint,
}

impl PfcpServer {
    /// Binds `addr` (port 0: any free port).
    ///
    /// # Errors
    /// When the socket cannot be bound.
    pub fn bind(addr: SocketAddr, endpoint: Endpoint) -> Result<PfcpServer, String> {
        let sock = UdpSocket::bind(addr).map_err(|e| format!("PFCP endpoint: binding {addr}: {e}"))?;
        sock.set_read_timeout(Some(Duration::from_millis(50))).map_err(|e| format!("PFCP endpoint: {e}"))?;
        Ok(PfcpServer { sock, endpoint })
    }

    /// The socket (to size its buffers).
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// The address bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.sock.local_addr().ok()
    }

    /// The state machine (its counters, its sessions).
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Serves until `stop`, locking `control` only to apply changes and read counters.
    pub fn serve_until(&mut self, control: &Mutex<Control<'_>>, stop: &AtomicBool) {
        let mut up = control;
        self.serve_with(&mut up, stop);
    }

    /// Serves until `stop` over any [`UserPlane`].
    pub fn serve_with(&mut self, up: &mut impl UserPlane, stop: &AtomicBool) {
        let mut buf = vec![0u8; 65_536];
        let mut last_err = None;
        let mut last_poll = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if last_poll.elapsed() >= Duration::from_millis(250) {
                last_poll = Instant::now();
                for (to, r) in self.endpoint.poll(ntp_now(), up) {
                    if let Err(e) = self.sock.send_to(&r, to) {
                        if last_err.replace(e.kind()) != Some(e.kind()) {
                            eprintln!("fastpath: PFCP: sending a usage report to {to}: {e}");
                        }
                    }
                }
            }
            match self.sock.recv_from(&mut buf) {
                Ok((n, peer)) => {
                    let msg = buf.get(..n).unwrap_or_default();
                    if let Some(r) = self.endpoint.handle_datagram(peer, msg, ntp_now(), up) {
                        if let Err(e) = self.sock.send_to(&r, peer) {
                            if last_err.replace(e.kind()) != Some(e.kind()) {
                                eprintln!("fastpath: PFCP: sending to {peer}: {e}");
                            }
                        }
                    }
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => {
                    if last_err.replace(e.kind()) != Some(e.kind()) {
                        eprintln!("fastpath: PFCP: receiving: {e}");
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_pfcp::group::{UpdateQer, UpdateTrafficEndpoint};
    use fastpath_pfcp::samples;
    use fastpath_pipeline::Pipeline;
    use std::net::Ipv4Addr;

    fn vbng() -> Pipeline {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/vbng.toml")).unwrap();
        let mut p = fastpath_pipeline::compile("vbng.toml", &text).unwrap().instantiate();
        p.set_ports(2).unwrap();
        p
    }

    /// A real control plane with no worker (changes reach its replica only) and counters the
    /// test sets.
    struct Up {
        c: Control<'static>,
        usage: HashMap<u32, Usage>,
        fail: bool,
    }

    impl UserPlane for Up {
        fn apply(&mut self, cmds: &[SessionCmd]) -> Result<(), Refusal> {
            if self.fail {
                return Err(Refusal::Failed("worker 0: has stopped".into()));
            }
            UserPlane::apply(&mut self.c, cmds)
        }
        fn usage(&mut self, id: u32) -> Option<Usage> {
            Some(self.usage.get(&id).copied().unwrap_or_default())
        }
    }

    fn setup() -> (Endpoint, Up) {
        let p = vbng();
        let cfg = Config::for_program(p.program(), IpAddr::V4(samples::UP_ADDR), vec!["port-1".into(), "core".into()], 77).unwrap();
        assert_eq!(cfg.tiers, [Some(100_000_000), Some(1_000_000_000), Some(20_000_000)]);
        assert_eq!(cfg.max_sessions, 262_144);
        let c = Control::new(p, Box::new(|| Ok(vbng())), Vec::new());
        (Endpoint::new(cfg), Up { c, usage: HashMap::new(), fail: false })
    }

    const PEER: SocketAddr = SocketAddr::new(IpAddr::V4(samples::CP_ADDR), 8805);

    fn sample(k: usize) -> Message {
        samples::all().swap_remove(k)
    }

    fn associate(e: &mut Endpoint, up: &mut Up) {
        let r = e.handle(PEER, &sample(2), 1, up).unwrap();
        let Message::AssociationSetupResponse(_, r) = r else { panic!("{r:?}") };
        assert_eq!(r.cause, Cause::REQUEST_ACCEPTED);
    }

    /// The sample establishment (samples::all()[8]), with CP SEID `cp` and the identity
    /// changed by `f`.
    fn est(cp: u64, f: impl FnOnce(&mut SessionEstablishmentRequest)) -> Message {
        let Message::SessionEstablishmentRequest(h, mut r) = sample(8) else { panic!() };
        // The samples' association is set up by the UP's node id; sessions come from the CP's.
        r.node_id = NodeId::Ipv4(samples::UP_ADDR);
        r.cp_f_seid.seid = cp;
        f(&mut r);
        Message::SessionEstablishmentRequest(h, r)
    }

    fn establish(e: &mut Endpoint, up: &mut Up, m: &Message) -> SessionEstablishmentResponse {
        match e.handle(PEER, m, 100, up) {
            Some(Message::SessionEstablishmentResponse(_, r)) => r,
            other => panic!("{other:?}"),
        }
    }

    fn reject(r: &SessionEstablishmentResponse) -> (u8, Option<u16>) {
        (r.cause.0, r.offending_ie.map(|o| o.0))
    }

    #[test]
    fn heartbeat_and_association_setup_answer_with_our_features() {
        let (mut e, mut up) = setup();
        let Some(Message::HeartbeatResponse(h, r)) = e.handle(PEER, &sample(0), 1, &mut up) else { panic!() };
        assert_eq!((h.seq, r.recovery_time_stamp), (1, RecoveryTimeStamp(77)));
        let Some(Message::AssociationSetupResponse(h, r)) = e.handle(PEER, &sample(2), 1, &mut up) else { panic!() };
        assert_eq!(h.seq, 2);
        assert_eq!((r.node_id, r.cause, r.recovery_time_stamp), (NodeId::Ipv4(samples::UP_ADDR), Cause(1), RecoveryTimeStamp(77)));
        assert!(r.up_function_features.is_some());
        assert_eq!(r.bbf_up_function_features, Some(BbfUpFunctionFeatures(BbfUpFunctionFeatures::IPOE)));
        assert_eq!(e.associations(), 1);
        // Update: accepted when associated, 72 from a stranger.
        let Some(Message::AssociationUpdateResponse(_, r)) = e.handle(PEER, &sample(4), 1, &mut up) else { panic!() };
        assert_eq!(r.cause, Cause::NO_ESTABLISHED_ASSOCIATION);
        let Message::AssociationUpdateRequest(h, mut u) = sample(4) else { panic!() };
        u.node_id = NodeId::Ipv4(samples::UP_ADDR);
        let Some(Message::AssociationUpdateResponse(_, r)) = e.handle(PEER, &Message::AssociationUpdateRequest(h, u), 1, &mut up) else {
            panic!()
        };
        assert_eq!(r.cause, Cause::REQUEST_ACCEPTED);
        assert_eq!(e.stats().causes, BTreeMap::from([(1, 2), (72, 1)]));
    }

    #[test]
    fn establishment_maps_the_traffic_endpoint_and_qer_onto_a_session() {
        let (mut e, mut up) = setup();
        // No association yet: 72, and no id is spent.
        assert_eq!(reject(&establish(&mut e, &mut up, &est(0x1000, |_| {}))), (72, None));
        assert_eq!(e.ids_in_use(), 0);
        associate(&mut e, &mut up);
        let r = establish(&mut e, &mut up, &est(0x1000, |_| {}));
        assert_eq!(r.cause, Cause::REQUEST_ACCEPTED, "{r:?}");
        let f = r.up_f_seid.unwrap();
        assert_eq!(f.ipv4, Some(samples::UP_ADDR));
        let s = e.session(f.seid).unwrap().clone();
        assert_eq!(
            s,
            Session {
                id: 1,
                port: 0,
                svlan: 100,
                cvlan: 200,
                mac: samples::UE_MAC,
                ip: samples::UE_ADDR,
                tier: 0,
                acl: 0,
                up: Some((1_000_000, 20_000_000)),
            }
        );
        assert_eq!(up.c.sessions().unwrap().get(1), Some(&s));
        assert_eq!(up.c.shadow().table("up_session").unwrap().len(), 1);
        assert_eq!(up.c.shadow().table("down_session").unwrap().len(), 1);
    }

    #[test]
    fn bad_establishments_get_their_cause_and_spend_no_id() {
        let (mut e, mut up) = setup();
        associate(&mut e, &mut up);
        assert_eq!(establish(&mut e, &mut up, &est(1, |_| {})).cause, Cause(1));
        let other = |r: &mut SessionEstablishmentRequest| {
            let te = &mut r.create_traffic_endpoint[0];
            te.mac_address = Some(MacAddress { source: Some([2, 0, 0, 0, 0, 9]), ..Default::default() });
            te.ue_ip_address[0].ipv4 = Some(Ipv4Addr::new(100, 64, 0, 9));
        };
        type Edit = Box<dyn Fn(&mut SessionEstablishmentRequest)>;
        let cases: Vec<(Edit, (u8, Option<u16>))> = vec![
            // The same CP F-SEID again for another subscriber (for the same one it is a control
            // plane asking again: `a_repeated_establishment_is_answered_with_the_session_we_have`).
            (Box::new(move |r| (other(r), r.cp_f_seid.seid = 1).1), (64, Some(t::F_SEID))),
            // The same identity (port, tags, MAC) with another address; the same address.
            (Box::new(|r| r.create_traffic_endpoint[0].ue_ip_address[0].ipv4 = Some(Ipv4Addr::new(100, 64, 0, 9))), (64, Some(127))),
            (
                Box::new(|r| {
                    r.create_traffic_endpoint[0].mac_address = Some(MacAddress { source: Some([2, 0, 0, 0, 0, 9]), ..Default::default() })
                }),
                (64, Some(127)),
            ),
            (Box::new(move |r| (other(r), r.create_traffic_endpoint.clear()).1), (67, Some(127))),
            (Box::new(move |r| (other(r), r.create_traffic_endpoint[0].s_tag = None).1), (67, Some(t::S_TAG))),
            (Box::new(move |r| (other(r), r.create_traffic_endpoint[0].logical_port = None).1), (67, Some(bbf_type::LOGICAL_PORT))),
            (
                Box::new(move |r| (other(r), r.create_traffic_endpoint[0].logical_port = Some(LogicalPort(b"port-9".to_vec()))).1),
                (69, Some(bbf_type::LOGICAL_PORT)),
            ),
            (Box::new(move |r| (other(r), r.create_traffic_endpoint[0].c_tag.as_mut().unwrap().vid = Some(4095)).1), (69, Some(t::C_TAG))),
            (Box::new(move |r| (other(r), r.create_traffic_endpoint[0].ue_ip_address[0].ipv4 = None).1), (69, Some(t::UE_IP_ADDRESS))),
            // 300 Mbit/s down is no tier's rate; GBR above MBR; a closed gate.
            (Box::new(move |r| (other(r), r.create_qer[0].mbr.as_mut().unwrap().dl_kbps = 300_000).1), (73, Some(t::MBR))),
            (Box::new(move |r| (other(r), r.create_qer[0].gbr.as_mut().unwrap().ul_kbps = 30_000).1), (73, Some(t::GBR))),
            (Box::new(move |r| (other(r), r.create_qer[0].gate_status.dl = 1).1), (76, Some(t::GATE_STATUS))),
            (Box::new(move |r| (other(r), r.create_traffic_endpoint.push(samples::traffic_endpoint())).1), (76, Some(127))),
        ];
        for (k, (edit, want)) in cases.iter().enumerate() {
            let r = establish(&mut e, &mut up, &est(100 + k as u64, edit));
            assert_eq!(reject(&r), *want, "case {k}");
            assert!(r.up_f_seid.is_none());
            assert_eq!((e.len(), e.ids_in_use(), up.c.sessions().unwrap().len()), (1, 1, 1), "case {k}");
        }
        // A worker failure: 77, no id spent.
        up.fail = true;
        assert_eq!(reject(&establish(&mut e, &mut up, &est(999, other))), (77, None));
        up.fail = false;
        assert_eq!(e.ids_in_use(), 1);
        // 1 Gbit/s down is tier 1; the next free id is 2.
        let r = establish(&mut e, &mut up, &est(998, |r| (other(r), r.create_qer[0].mbr.as_mut().unwrap().dl_kbps = 1_000_000).1));
        let s = e.session(r.up_f_seid.unwrap().seid).unwrap();
        assert_eq!((s.id, s.tier), (2, 1));
        assert_eq!(e.stats().causes[&64], 3);
    }

    #[test]
    fn modification_changes_rates_tier_and_identity() {
        let (mut e, mut up) = setup();
        associate(&mut e, &mut up);
        let seid = establish(&mut e, &mut up, &est(0x1000, |_| {})).up_f_seid.unwrap().seid;
        let modify = |e: &mut Endpoint, up: &mut Up, seid: u64, r: SessionModificationRequest| match e.handle(
            PEER,
            &Message::SessionModificationRequest(SessionHeader { seid, seq: 11, priority: None }, r),
            200,
            up,
        ) {
            Some(Message::SessionModificationResponse(h, r)) => (h.seid, r.cause.0, r.offending_ie.map(|o| o.0)),
            other => panic!("{other:?}"),
        };
        let qer = |ul_kbps, dl_kbps| UpdateQer {
            qer_id: QerId(1),
            mbr: Some(BitRate { ul_kbps, dl_kbps }),
            gbr: Some(BitRate { ul_kbps: 0, dl_kbps: 0 }),
            ..Default::default()
        };
        let r = SessionModificationRequest { update_qer: vec![qer(50_000, 1_000_000)], ..Default::default() };
        assert_eq!(modify(&mut e, &mut up, seid, r), (0x1000, 1, None));
        let s = up.c.sessions().unwrap().get(1).unwrap();
        assert_eq!((s.tier, s.up), (1, Some((50_000_000, 50_000_000))));
        // No tier at 5 Mbit/s: refused, nothing changed.
        let r = SessionModificationRequest { update_qer: vec![qer(50_000, 5_000)], ..Default::default() };
        assert_eq!(modify(&mut e, &mut up, seid, r), (0x1000, 73, Some(t::MBR)));
        assert_eq!(up.c.sessions().unwrap().get(1).unwrap().tier, 1);
        // A new address: the session moves to it under the same id.
        let te = UpdateTrafficEndpoint {
            traffic_endpoint_id: TrafficEndpointId(1),
            ue_ip_address: vec![UeIpAddress { ipv4: Some(Ipv4Addr::new(100, 64, 0, 77)), ..Default::default() }],
            ..Default::default()
        };
        let r = SessionModificationRequest { update_traffic_endpoint: vec![te], ..Default::default() };
        assert_eq!(modify(&mut e, &mut up, seid, r), (0x1000, 1, None));
        let s = up.c.sessions().unwrap().get(1).unwrap();
        assert_eq!((s.ip, s.tier, s.svlan), (Ipv4Addr::new(100, 64, 0, 77), 1, 100));
        assert_eq!(up.c.sessions().unwrap().len(), 1);
        // An unknown SEID: 65, header SEID 0.
        assert_eq!(modify(&mut e, &mut up, seid + 1, SessionModificationRequest::default()), (0, 65, None));
        // The codec's sample removes a traffic endpoint (and closes a gate): 76.
        let Message::SessionModificationRequest(_, r) = sample(10) else { panic!() };
        assert_eq!(modify(&mut e, &mut up, seid, r).1, 76);
    }

    #[test]
    fn deletion_reports_usage_since_the_session_began_and_frees_the_id() {
        let (mut e, mut up) = setup();
        associate(&mut e, &mut up);
        let seid = establish(&mut e, &mut up, &est(0x1000, |_| {})).up_f_seid.unwrap().seid;
        up.usage.insert(1, Usage { up_pkts: 10, up_bytes: 1000, down_pkts: 30, down_bytes: 9000 });
        let del = |e: &mut Endpoint, up: &mut Up, seid: u64| match e.handle(
            PEER,
            &Message::SessionDeletionRequest(SessionHeader { seid, seq: 12, priority: None }, SessionDeletionRequest::default()),
            400,
            up,
        ) {
            Some(Message::SessionDeletionResponse(h, r)) => (h.seid, r),
            other => panic!("{other:?}"),
        };
        let (cp, r) = del(&mut e, &mut up, seid);
        assert_eq!((cp, r.cause), (0x1000, Cause(1)));
        let [ur] = r.usage_report.as_slice() else { panic!("{r:?}") };
        assert_eq!((ur.urr_id, ur.usage_report_trigger), (UrrId(1), Triggers(Triggers::TERMR)));
        assert_eq!(
            (ur.start_time, ur.end_time, ur.duration_measurement),
            (Some(StartTime(100)), Some(EndTime(400)), Some(DurationMeasurement(300)))
        );
        let v = ur.volume_measurement.unwrap();
        assert_eq!((v.total_bytes, v.ul_bytes, v.dl_bytes, v.total_pkts), (Some(10_000), Some(1000), Some(9000), Some(40)));
        assert!(up.c.sessions().unwrap().is_empty());
        assert_eq!((e.len(), e.ids_in_use()), (0, 0));
        assert_eq!(del(&mut e, &mut up, seid).1.cause, Cause::SESSION_CONTEXT_NOT_FOUND);
        // The id comes back; its next session reports from where the last one ended.
        let seid = establish(&mut e, &mut up, &est(0x1001, |_| {})).up_f_seid.unwrap().seid;
        assert_eq!(e.session(seid).unwrap().id, 1);
        up.usage.insert(1, Usage { up_pkts: 11, up_bytes: 1100, down_pkts: 30, down_bytes: 9000 });
        let v = del(&mut e, &mut up, seid).1.usage_report[0].volume_measurement.unwrap();
        assert_eq!((v.ul_pkts, v.ul_bytes, v.dl_bytes), (Some(1), Some(100), Some(0)));
    }

    #[test]
    fn ids_taken_by_ctl_are_skipped_and_release_deletes_the_associations_sessions() {
        let (mut e, mut up) = setup();
        up.c.execute("session add 1 port 0 s-vlan 5 c-vlan 5 mac 02:00:00:00:05:05 ip 100.64.5.5 tier 0").unwrap();
        associate(&mut e, &mut up);
        let seid = establish(&mut e, &mut up, &est(7, |_| {})).up_f_seid.unwrap().seid;
        assert_eq!(e.session(seid).unwrap().id, 2);
        assert_eq!((e.len(), e.ids_in_use()), (1, 1));
        let Message::AssociationReleaseRequest(h, _) = sample(6) else { panic!() };
        let rel =
            Message::AssociationReleaseRequest(h, AssociationReleaseRequest { node_id: NodeId::Ipv4(samples::UP_ADDR), unknown: vec![] });
        let Some(Message::AssociationReleaseResponse(_, r)) = e.handle(PEER, &rel, 1, &mut up) else { panic!() };
        assert_eq!(r.cause, Cause(1));
        assert_eq!((e.len(), e.ids_in_use(), e.associations()), (0, 0, 0));
        // ctl's session stays.
        assert_eq!(up.c.sessions().unwrap().len(), 1);
        let Some(Message::AssociationReleaseResponse(_, r)) = e.handle(PEER, &rel, 1, &mut up) else { panic!() };
        assert_eq!(r.cause, Cause::NO_ESTABLISHED_ASSOCIATION);
    }

    fn bytes(m: &Message) -> Vec<u8> {
        let mut v = Vec::new();
        encode(m, &mut v).unwrap();
        v
    }

    #[test]
    fn a_retransmission_gets_the_same_answer_and_changes_nothing() {
        let (mut e, mut up) = setup();
        e.handle_datagram(PEER, &bytes(&sample(2)), 1, &mut up).unwrap();
        let req = bytes(&est(5, |_| {}));
        let a = e.handle_datagram(PEER, &req, 1, &mut up).unwrap();
        let b = e.handle_datagram(PEER, &req, 1, &mut up).unwrap();
        assert_eq!(a, b);
        assert_eq!((e.len(), e.stats().retransmitted, up.c.sessions().unwrap().len()), (1, 1, 1));
        // The same sequence number with other contents is a new request: a duplicate session.
        let again = bytes(&est(6, |_| {}));
        let c = decode(&e.handle_datagram(PEER, &again, 1, &mut up).unwrap()).unwrap();
        let Message::SessionEstablishmentResponse(_, r) = c else { panic!() };
        assert_eq!(r.cause, Cause::REQUEST_REJECTED);
        // From another peer it is not a retransmission: it is handled again, and found to be a
        // repeat of the session we have (same CP F-SEID, same subscriber), which is the answer.
        let other = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9)), 8805);
        assert_eq!(e.handle_datagram(other, &req, 1, &mut up).unwrap(), a);
        assert_eq!((e.stats().retransmitted, e.stats().reestablished), (1, 1));
        assert_eq!((e.len(), up.c.sessions().unwrap().len()), (1, 1));
    }

    #[test]
    fn a_repeated_establishment_is_answered_with_the_session_we_have() {
        let (mut e, mut up) = setup();
        e.handle(PEER, &sample(2), 1, &mut up).unwrap();
        let first = establish(&mut e, &mut up, &est(1, |_| {}));
        assert_eq!(first.cause, Cause(1));
        // A control plane that restarted before it recorded our answer asks again (a new
        // sequence number): the same session, nothing created twice.
        let Message::SessionEstablishmentRequest(mut h, r) = est(1, |_| {}) else { panic!() };
        h.seq += 1;
        let again = establish(&mut e, &mut up, &Message::SessionEstablishmentRequest(h, r));
        assert_eq!((again.cause, again.up_f_seid), (Cause(1), first.up_f_seid));
        assert_eq!((e.len(), e.ids_in_use(), up.c.sessions().unwrap().len(), e.stats().reestablished), (1, 1, 1, 1));
    }

    #[test]
    fn undecodable_requests_get_the_codecs_cause() {
        let (mut e, mut up) = setup();
        let mut ask = |b: &[u8]| e.handle_datagram(PEER, b, 1, &mut up).map(|r| (r.clone(), decode(&r)));
        // A truncated establishment: 68 in an Establishment Response.
        let est = bytes(&sample(8));
        let mut cut = est[..40].to_vec();
        cut[2..4].copy_from_slice(&36u16.to_be_bytes());
        let (_, r) = ask(&cut).unwrap();
        let Ok(Message::SessionEstablishmentResponse(h, r)) = r else { panic!("{r:?}") };
        assert_eq!((h.seq, r.cause), (10, Cause::INVALID_LENGTH));
        // An Association Setup Request without its Node ID: 66, offending IE 60.
        let Message::AssociationSetupRequest(h, a) = sample(2) else { panic!() };
        let mut b = bytes(&Message::AssociationSetupRequest(h, a));
        b[9] = 250; // retype the Node ID (the first IE) as an unknown IE
        let (_, r) = ask(&b).unwrap();
        let Ok(Message::AssociationSetupResponse(_, r)) = r else { panic!("{r:?}") };
        assert_eq!(r.cause, Cause::MANDATORY_IE_MISSING);
        // Unknown type, a response, a bare heartbeat and noise: discarded.
        assert!(ask(&[0x20, 3, 0, 4, 0, 0, 1, 0]).is_none());
        assert!(ask(&bytes(&sample(1))).is_none());
        assert!(ask(&[0x20, 1, 0, 4, 0, 0, 1, 0]).is_none());
        assert!(ask(&[0xff]).is_none());
        // A session message type without the S flag: 64, in the response to its type.
        let (_, r) = ask(&[0x20, 54, 0, 4, 0, 0, 8, 0]).unwrap();
        let Ok(Message::SessionDeletionResponse(h, r)) = r else { panic!("{r:?}") };
        assert_eq!((h.seid, h.seq, r.cause), (0, 8, Cause::REQUEST_REJECTED));
        // A Session Report Request (reports go the other way): 64.
        let (_, r) = ask(&bytes(&sample(14))).unwrap();
        let Ok(Message::SessionReportResponse(h, r)) = r else { panic!("{r:?}") };
        assert_eq!((h.seq, r.cause), (13, Cause::REQUEST_REJECTED));
        // Version 2: a Version Not Supported Response with the request's sequence number.
        let (raw, _) = ask(&[0x40, 1, 0, 4, 0, 0, 9, 0]).unwrap();
        assert_eq!(raw, [0x20, 11, 0, 4, 0, 0, 9, 0]);
        let s = e.stats();
        assert_eq!((s.unknown_type, s.discarded, s.version_not_supported, s.malformed), (1, 3, 1, 7));
        assert_eq!(s.causes, BTreeMap::from([(64, 2), (66, 1), (68, 1)]));
        assert!(s.render().contains("pfcp/cause/68_invalid_length 1"), "{}", s.render());
    }

    /// Every truncation of every sample, and 20 random byte flips of each: no panic, and no id
    /// outlives its session.
    /// An Association Setup Request from the samples' control plane with Recovery Time Stamp
    /// `rts`, asking to keep its sessions when `retain`.
    fn setup_req(rts: u32, retain: bool) -> Message {
        let Message::AssociationSetupRequest(h, mut r) = sample(2) else { panic!() };
        r.recovery_time_stamp = RecoveryTimeStamp(rts);
        if !retain {
            r.pfcp_session_retention_information = None;
        }
        Message::AssociationSetupRequest(h, r)
    }

    fn psrei(e: &mut Endpoint, up: &mut Up, m: &Message) -> bool {
        let Some(Message::AssociationSetupResponse(_, r)) = e.handle(PEER, m, 1, up) else { panic!() };
        assert_eq!(r.cause, Cause::REQUEST_ACCEPTED);
        r.pfcpasrsp_flags.is_some_and(|f| f.0 & PfcpasRspFlags::PSREI != 0)
    }

    #[test]
    fn a_restarted_control_plane_keeps_its_sessions_only_when_it_asks() {
        let (mut e, mut up) = setup();
        assert!(!psrei(&mut e, &mut up, &setup_req(10, true)), "a first association keeps nothing");
        let first = establish(&mut e, &mut up, &est(0x1000, |_| {}));
        assert_eq!(first.cause, Cause::REQUEST_ACCEPTED);
        // A repeat (same Recovery Time Stamp) changes nothing.
        assert!(psrei(&mut e, &mut up, &setup_req(10, false)));
        assert_eq!((e.len(), e.stats().cp_restarts), (1, 0));
        // A heartbeat with another time stamp: a restart, counted once; the sessions stay.
        let hb = |rts| {
            Message::HeartbeatRequest(
                NodeHeader { seq: 9 },
                HeartbeatRequest { recovery_time_stamp: RecoveryTimeStamp(rts), unknown: vec![] },
            )
        };
        e.handle(PEER, &hb(20), 1, &mut up).unwrap();
        e.handle(PEER, &hb(20), 1, &mut up).unwrap();
        assert_eq!((e.len(), e.stats().cp_restarts), (1, 1));
        // The restarted control plane associates asking to keep them: kept, PSREI.
        assert!(psrei(&mut e, &mut up, &setup_req(20, true)));
        assert_eq!((e.len(), e.stats().cp_restarts, e.stats().sessions_retained), (1, 1, 1));
        assert!(up.c.sessions().unwrap().get(1).is_some());
        // The same establishment again, under a new sequence number (a control plane that
        // restarted before it recorded our answer): the session we have is the answer.
        let again = establish(&mut e, &mut up, &est(0x1000, |_| {}));
        assert_eq!((again.cause, again.up_f_seid), (Cause::REQUEST_ACCEPTED, first.up_f_seid));
        assert_eq!((e.len(), e.ids_in_use(), e.stats().reestablished), (1, 1, 1));
        // Restarted again, not asking: its sessions go (TS 29.244 clause 6.2.6.2.2).
        assert!(!psrei(&mut e, &mut up, &setup_req(30, false)));
        assert_eq!((e.len(), e.ids_in_use(), e.stats().cp_restarts, e.stats().sessions_dropped), (0, 0, 2, 1));
        assert!(up.c.sessions().unwrap().get(1).is_none());
    }

    #[test]
    fn periodic_reports_carry_the_usage_since_the_last_acknowledged_one() {
        let (mut e, mut up) = setup();
        associate(&mut e, &mut up);
        let m = est(0x1000, |r| r.create_urr[0].measurement_period = Some(MeasurementPeriod(10)));
        let Some(Message::SessionEstablishmentResponse(_, r)) = e.handle(PEER, &m, 100, &mut up) else { panic!() };
        let seid = r.up_f_seid.unwrap().seid;
        let id = e.session(seid).unwrap().id;
        let set = |up: &mut Up, b| {
            up.usage.insert(id, Usage { up_pkts: b / 100, up_bytes: b, down_pkts: 1, down_bytes: 60 });
        };
        set(&mut up, 300);
        assert!(e.poll(109, &mut up).is_empty(), "not due yet");
        let report = |out: &[(SocketAddr, Vec<u8>)]| {
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].0, PEER, "to the control plane's address");
            let Ok(Message::SessionReportRequest(h, r)) = decode(&out[0].1) else { panic!() };
            assert_eq!((h.seid, r.report_type), (0x1000, ReportType(ReportType::USAR)));
            let u = &r.usage_report[0];
            let v = u.volume_measurement.unwrap();
            (h.seq, u.ur_seqn.0, u.usage_report_trigger.0, u.start_time.unwrap().0, u.end_time.unwrap().0, v.ul_bytes.unwrap())
        };
        let first = e.poll(110, &mut up);
        let (seq, seqn, trig, start, end, ul) = report(&first);
        assert_eq!((seqn, trig, start, end, ul), (0, Triggers::PERIO, 100, 110, 300));
        // Not acknowledged: the next one covers both, under the same UR-SEQN and start.
        set(&mut up, 500);
        let (seq2, seqn, _, start, end, ul) = report(&e.poll(120, &mut up));
        assert_eq!((seqn, start, end, ul), (0, 100, 120, 500));
        // The late answer to the first is stale; the answer to the second moves the baseline.
        let ack = |seq| {
            Message::SessionReportResponse(
                SessionHeader { seid, seq, priority: None },
                SessionReportResponse { cause: Cause::REQUEST_ACCEPTED, offending_ie: None, unknown: vec![] },
            )
        };
        assert!(e.handle(PEER, &ack(seq), 121, &mut up).is_none());
        assert!(e.handle(PEER, &ack(seq2), 121, &mut up).is_none());
        assert_eq!((e.stats().reports_sent, e.stats().reports_acked), (2, 1));
        set(&mut up, 800);
        let third = e.poll(130, &mut up);
        let (_, seqn, _, start, _, ul) = report(&third);
        assert_eq!((seqn, start, ul), (1, 120, 300));
        // The deletion's final report: since the last acknowledged one, TERMR.
        let del = Message::SessionDeletionRequest(SessionHeader { seid, seq: 77, priority: None }, SessionDeletionRequest::default());
        let Some(Message::SessionDeletionResponse(_, r)) = e.handle(PEER, &del, 131, &mut up) else { panic!() };
        let u = &r.usage_report[0];
        assert_eq!(
            (u.ur_seqn.0, u.usage_report_trigger.0, u.start_time, u.volume_measurement.unwrap().ul_bytes),
            (1, Triggers::TERMR, Some(StartTime(120)), Some(300))
        );
        assert!(e.poll(200, &mut up).is_empty(), "no session, no report");

        // tshark reads the reports we send (Session Report Request, Usage Report with its
        // volume, trigger, times and UR-SEQN) with no warning.
        use fastpath_packet::testutil::{assert_field, tshark_check, tshark_or_skip, tshark_problems, write_pcap, EXPERT_WARN};
        if !tshark_or_skip("periodic_reports tshark") {
            return;
        }
        let frames: Vec<Vec<u8>> = [&first[0].1, &third[0].1]
            .iter()
            .map(|p| {
                fastpath_packet::build::FrameBuilder::eth([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
                    .ipv4(samples::UP_ADDR, samples::CP_ADDR)
                    .udp(8805, 8805)
                    .payload(p)
                    .build()
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("fastpath-pfcp-up-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pcap = dir.join("reports.pcap");
        write_pcap(&pcap, &frames).unwrap();
        let fields = [
            "pfcp.msg_type",
            "pfcp.seid",
            "pfcp.report_type.usar",
            "pfcp.urr_id",
            "pfcp.ur_seqn",
            "pfcp.usage_report_trigger_flags.perio",
            "pfcp.volume_measurement.ulvol",
            "pfcp.volume_measurement.dlvol",
        ];
        let (rows, problems) = tshark_check(&pcap, &fields).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert!(tshark_problems(&pcap, EXPERT_WARN).unwrap().is_empty());
        assert_field(&rows, 0, "pfcp.msg_type", &["56"]);
        assert_field(&rows, 0, "pfcp.seid", &["0x0000000000001000"]);
        assert_field(&rows, 0, "pfcp.report_type.usar", &["1"]);
        assert_field(&rows, 0, "pfcp.urr_id", &["1"]);
        assert_field(&rows, 0, "pfcp.ur_seqn", &["0"]);
        assert_field(&rows, 0, "pfcp.usage_report_trigger_flags.perio", &["1"]);
        assert_field(&rows, 0, "pfcp.volume_measurement.ulvol", &["300"]);
        assert_field(&rows, 1, "pfcp.ur_seqn", &["1"]);
        assert_field(&rows, 1, "pfcp.volume_measurement.ulvol", &["300"]);
        assert_field(&rows, 1, "pfcp.volume_measurement.dlvol", &["0"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_input_panics_or_leaks() {
        let (mut e, mut up) = setup();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for m in samples::all() {
            let b = bytes(&m);
            for n in 0..b.len() {
                let mut cut = b[..n].to_vec();
                e.handle_datagram(PEER, &cut, 1, &mut up);
                for _ in 0..20 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    if let Some(x) = cut.get_mut(rng as usize % n.max(1)) {
                        *x ^= (rng >> 32) as u8;
                    }
                    e.handle_datagram(PEER, &cut, 1, &mut up);
                }
            }
            e.handle_datagram(PEER, &b, 1, &mut up);
        }
        assert_eq!(e.ids_in_use(), e.len());
        assert_eq!(up.c.sessions().unwrap().len(), e.len());
    }
}
