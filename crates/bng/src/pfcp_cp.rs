//! The control plane's side of PFCP (3GPP TS 29.244 with the BBF TR-459 IEs): it associates
//! with one user plane and keeps one PFCP session per DHCP lease there — a lease that is bound
//! becomes a Session Establishment Request, one that is released, expires or is declined a
//! Session Deletion Request.
//!
//! Pure, like the DHCP server: lease [`Event`]s in, encoded requests out; responses (and the
//! user plane's Session Report Requests) in, [`Outcome`]s out. The caller owns the socket and
//! the clock; [`PfcpCp::retransmit`] gives the session requests still unanswered, whose bytes
//! can be sent again as they are (the user plane answers a repeat with its first answer).
//!
//! **Restarts.** Every Association Setup Request carries PFCP Session Retention Information
//! (TS 29.244 clause 6.2.6.2.2): a user plane that still holds our sessions keeps them and says
//! so with PSREI ([`PfcpCp::retained`]). A user plane whose Recovery Time Stamp changes in a
//! heartbeat has restarted ([`Outcome::PeerRestarted`]): [`PfcpCp::reset`] forgets the
//! association, and after the next one [`PfcpCp::take_sessions`] hands back every session, to
//! be established again with [`PfcpCp::reestablish`] under the same CP SEID.
//!
//! What a session carries (the user plane's mapping is in docs/pfcp.md):
//!
//! | lease | PFCP |
//! |---|---|
//! | access port | Create Traffic Endpoint: BBF Logical Port, the port number in decimal (the low half of the line's CPRi TEID) |
//! | S-VLAN, C-VLAN | S-TAG, C-TAG (VID) |
//! | MAC | MAC address (source) |
//! | address | UE IP address (IPv4), also in both PDRs |
//! | service rates ([`CpConfig`]) | one QER: MBR UL/DL; one URR (volume, periodic) |
//!
//! plus PDR 1 (upstream: from access, the traffic endpoint and the address) with FAR 1 (to
//! core), and PDR 2 (downstream: to the address) with FAR 2 (to access, the BBF outer header
//! creation that rebuilds the subscriber's headers from the traffic endpoint).
//!
//! ```
//! use std::net::Ipv4Addr;
//! use fastpath_bng::dhcp::server::{Event, EventKind, Identity};
//! use fastpath_bng::pfcp_cp::{CpConfig, PfcpCp};
//!
//! let mut cp = PfcpCp::new(CpConfig::new(Ipv4Addr::new(192, 0, 2, 1)));
//! let setup = cp.association_setup();
//! assert_eq!(setup[1], 5); // Association Setup Request
//! let identity = Identity { port: 0, svlan: 100, cvlan: 7, mac: [2, 0, 0, 0, 0, 7] };
//! let bound = Event { kind: EventKind::Bound, identity, ip: Ipv4Addr::new(100, 64, 0, 7), expires_s: 3600 };
//! let req = cp.on_event(&bound).unwrap();
//! assert_eq!(req[1], 50); // Session Establishment Request
//! assert_eq!(cp.pending(), 2);
//! ```

use std::collections::HashMap;
use std::net::Ipv4Addr;

use fastpath_pfcp::bbf::{BbfOuterHeaderCreation, BbfOuterHeaderRemoval, LogicalPort};
use fastpath_pfcp::group::*;
use fastpath_pfcp::ie::*;
use fastpath_pfcp::message::*;
use fastpath_pfcp::{decode, encode, DecodeError, Message, NodeHeader, SessionHeader};

use crate::dhcp::server::{Event, EventKind, Identity};

/// What the control plane puts in its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpConfig {
    /// Our address: the Node ID and the CP F-SEID's address.
    pub addr: Ipv4Addr,
    /// Our Recovery Time Stamp (NTP seconds).
    pub recovery_ntp: u32,
    /// Upstream maximum bit rate of every session, kbit/s (0: unpoliced).
    pub ul_kbps: u64,
    /// Downstream maximum bit rate of every session, kbit/s: the user plane picks the tier
    /// with this rate.
    pub dl_kbps: u64,
    /// Usage reporting period, seconds.
    pub urr_period_s: u32,
}

impl CpConfig {
    /// 100 Mbit/s down, 20 Mbit/s up (`pipelines/vbng.toml`'s tier 0), reports every 300 s.
    pub fn new(addr: Ipv4Addr) -> CpConfig {
        CpConfig { addr, recovery_ntp: 0, ul_kbps: 20_000, dl_kbps: 100_000, urr_period_s: 300 }
    }
}

/// A session's usage, from a deletion's usage report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Volume {
    /// Upstream bytes.
    pub ul_bytes: u64,
    /// Downstream bytes.
    pub dl_bytes: u64,
    /// Upstream packets.
    pub ul_pkts: u64,
    /// Downstream packets.
    pub dl_pkts: u64,
}

/// One Usage Report, as the control plane records it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageRecord {
    /// URR ID.
    pub urr_id: u32,
    /// UR-SEQN: a report sent again under the same number replaces the first.
    pub ur_seqn: u32,
    /// Usage Report Trigger (`Triggers::PERIO`, `Triggers::TERMR`, …).
    pub trigger: u32,
    /// Start and end of the measurement (NTP seconds; 0 when absent).
    pub start_ntp: u32,
    /// End of the measurement.
    pub end_ntp: u32,
    /// The volume.
    pub volume: Volume,
}

impl UsageRecord {
    fn of(u: &UsageReport) -> UsageRecord {
        let v = u.volume_measurement.unwrap_or_default();
        UsageRecord {
            urr_id: u.urr_id.0,
            ur_seqn: u.ur_seqn.0,
            trigger: u.usage_report_trigger.0,
            start_ntp: u.start_time.map_or(0, |t| t.0),
            end_ntp: u.end_time.map_or(0, |t| t.0),
            volume: Volume {
                ul_bytes: v.ul_bytes.unwrap_or(0),
                dl_bytes: v.dl_bytes.unwrap_or(0),
                ul_pkts: v.ul_pkts.unwrap_or(0),
                dl_pkts: v.dl_pkts.unwrap_or(0),
            },
        }
    }
}

/// What a response meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The association is set up (cause 1) or refused (any other cause).
    Associated {
        /// The cause.
        cause: u8,
    },
    /// A subscriber's session is in place on the user plane.
    Established {
        /// The subscriber.
        identity: Identity,
        /// The user plane's SEID.
        up_seid: u64,
    },
    /// A subscriber's session is gone (also when the user plane no longer knew it, cause 65).
    Deleted {
        /// The subscriber.
        identity: Identity,
        /// Its usage, when the user plane reported it.
        usage: Option<Volume>,
        /// The user plane's SEID it had.
        up_seid: u64,
        /// The final usage reports (trigger TERMR).
        reports: Vec<UsageRecord>,
    },
    /// The user plane reported usage (a Session Report Request, answered by the request the
    /// call returns next to this).
    Report {
        /// The subscriber.
        identity: Identity,
        /// The user plane's SEID.
        up_seid: u64,
        /// The reports.
        reports: Vec<UsageRecord>,
    },
    /// A Session Report Request for a CP SEID we do not know (answered with cause 65).
    UnknownReport {
        /// The SEID it named.
        cp_seid: u64,
    },
    /// A heartbeat answer with another Recovery Time Stamp than the association's: the user
    /// plane restarted and lost our sessions; call [`PfcpCp::reset`].
    PeerRestarted {
        /// Its new Recovery Time Stamp.
        recovery_ntp: u32,
    },
    /// The user plane refused a session request.
    Rejected {
        /// The subscriber.
        identity: Identity,
        /// The request's message type.
        request: u8,
        /// The cause.
        cause: u8,
        /// The IE it blamed.
        offending_ie: Option<u16>,
    },
    /// A heartbeat answered.
    Heartbeat,
}

/// A response that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpError {
    /// It does not decode.
    Undecodable(DecodeError),
    /// It answers no request of ours (unknown sequence number, or the wrong message type).
    Unexpected {
        /// Its sequence number.
        seq: u32,
        /// Its message type.
        msg_type: u8,
    },
}

impl std::fmt::Display for CpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpError::Undecodable(e) => write!(f, "undecodable PFCP response: {e}"),
            CpError::Unexpected { seq, msg_type } => write!(f, "PFCP message type {msg_type} with sequence {seq} answers no request"),
        }
    }
}

impl std::error::Error for CpError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Association,
    Heartbeat,
    Establish(Identity),
    Delete(Identity),
}

#[derive(Debug, Clone, Copy)]
enum State {
    /// Requested; delete as soon as it is in place when the lease ended meanwhile.
    Establishing {
        delete_after: bool,
    },
    Established {
        up_seid: u64,
    },
}

#[derive(Debug, Clone, Copy)]
struct Sub {
    cp_seid: u64,
    ip: Ipv4Addr,
    state: State,
}

/// A request sent and not answered: what it was, its bytes and how many ticks it has waited.
#[derive(Debug, Clone)]
struct Sent {
    what: Pending,
    bytes: Vec<u8>,
    ticks: u32,
}

/// The control plane's PFCP state towards one user plane. Control thread only.
#[derive(Debug)]
pub struct PfcpCp {
    cfg: CpConfig,
    seq: u32,
    next_seid: u64,
    pending: HashMap<u32, Sent>,
    subs: HashMap<Identity, Sub>,
    associated: bool,
    /// The user plane's Recovery Time Stamp from its Association Setup Response.
    peer_recovery_ntp: Option<u32>,
    /// It kept our former sessions (PSREI).
    retained: bool,
    /// Heartbeats sent in a row without an answer.
    missed: u32,
}

impl PfcpCp {
    /// No association, no session.
    pub fn new(cfg: CpConfig) -> PfcpCp {
        PfcpCp {
            cfg,
            seq: 0,
            next_seid: 1,
            pending: HashMap::new(),
            subs: HashMap::new(),
            associated: false,
            peer_recovery_ntp: None,
            retained: false,
            missed: 0,
        }
    }

    /// Heartbeats sent in a row that got no answer (0 after any answer).
    pub fn missed(&self) -> u32 {
        self.missed
    }

    /// The user plane's Recovery Time Stamp, once associated.
    pub fn peer_recovery(&self) -> Option<u32> {
        self.peer_recovery_ntp
    }

    /// The last association kept the sessions we had there (the user plane set PSREI).
    pub fn retained(&self) -> bool {
        self.retained
    }

    /// Every session this control plane knows on this user plane: identity, address, CP SEID
    /// and UP SEID (0 while establishing).
    pub fn sessions(&self) -> Vec<(Identity, Ipv4Addr, u64, u64)> {
        let mut v: Vec<_> = self
            .subs
            .iter()
            .map(|(id, s)| {
                let up = match s.state {
                    State::Established { up_seid } => up_seid,
                    State::Establishing { .. } => 0,
                };
                (*id, s.ip, s.cp_seid, up)
            })
            .collect();
        v.sort_by_key(|x| x.2);
        v
    }

    /// The user plane lost our association (it restarted): the association and every request
    /// in flight are forgotten. The sessions stay known until the next association says
    /// whether the user plane kept them ([`PfcpCp::retained`], else [`PfcpCp::take_sessions`]).
    pub fn reset(&mut self) {
        self.associated = false;
        self.retained = false;
        self.peer_recovery_ntp = None;
        self.pending.clear();
        self.missed = 0;
    }

    /// Hands back every session (identity, address, CP SEID, in CP SEID order) and forgets
    /// them: for [`PfcpCp::reestablish`], or for the store to drop.
    pub fn take_sessions(&mut self) -> Vec<(Identity, Ipv4Addr, u64)> {
        let mut v: Vec<_> = self.subs.drain().map(|(id, s)| (id, s.ip, s.cp_seid)).collect();
        v.sort_by_key(|x| x.2);
        v
    }

    /// A Session Establishment Request for a session the user plane lost, under its CP SEID.
    pub fn reestablish(&mut self, id: Identity, ip: Ipv4Addr, cp_seid: u64) -> Vec<u8> {
        self.next_seid = self.next_seid.max(cp_seid.saturating_add(1));
        self.subs.insert(id, Sub { cp_seid, ip, state: State::Establishing { delete_after: false } });
        let m = self.establishment(cp_seid, &id, ip);
        self.send(Pending::Establish(id), m)
    }

    /// Keeps CP SEIDs up to `cp_seid` from new sessions (one whose establishment may be on the
    /// user plane without our record of its answer, to be asked again under it).
    pub fn reserve(&mut self, cp_seid: u64) {
        self.next_seid = self.next_seid.max(cp_seid.saturating_add(1));
    }

    /// Forgets a session without telling the user plane (it does not hold it).
    pub fn forget(&mut self, id: &Identity) {
        self.subs.remove(id);
    }

    /// Session requests unanswered for `ticks` calls of this function or more, to send again
    /// (the same bytes: the user plane answers a repeat with its first answer).
    pub fn retransmit(&mut self, ticks: u32) -> Vec<Vec<u8>> {
        let mut v: Vec<(u32, Vec<u8>)> = Vec::new();
        for (seq, p) in self.pending.iter_mut() {
            if matches!(p.what, Pending::Establish(_) | Pending::Delete(_)) {
                p.ticks += 1;
                if p.ticks >= ticks {
                    p.ticks = 0;
                    v.push((*seq, p.bytes.clone()));
                }
            }
        }
        v.sort_by_key(|x| x.0);
        v.into_iter().map(|x| x.1).collect()
    }

    /// Requests sent and not answered.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Sessions in place on the user plane.
    pub fn established(&self) -> usize {
        self.subs.values().filter(|s| matches!(s.state, State::Established { .. })).count()
    }

    /// A subscriber's session as the control plane keeps it: CP SEID, address, and the UP
    /// SEID once the user plane accepted it.
    pub fn session(&self, id: &Identity) -> Option<(u64, Ipv4Addr, Option<u64>)> {
        self.subs.get(id).map(|s| {
            let up = match s.state {
                State::Established { up_seid } => Some(up_seid),
                State::Establishing { .. } => None,
            };
            (s.cp_seid, s.ip, up)
        })
    }

    /// Takes back a session the user plane holds (after a control-plane restart, from the
    /// store): later lease events delete it with `up_seid`, and new CP SEIDs start above
    /// `cp_seid`. Nothing is sent.
    pub fn restore(&mut self, id: Identity, ip: Ipv4Addr, cp_seid: u64, up_seid: u64) {
        self.next_seid = self.next_seid.max(cp_seid.saturating_add(1));
        self.subs.insert(id, Sub { cp_seid, ip, state: State::Established { up_seid } });
    }

    /// True once the user plane accepted the association.
    pub fn is_associated(&self) -> bool {
        self.associated
    }

    fn node_id(&self) -> NodeId {
        NodeId::Ipv4(self.cfg.addr)
    }

    fn send(&mut self, p: Pending, m: impl FnOnce(u32) -> Message) -> Vec<u8> {
        self.seq = (self.seq + 1) & 0x00ff_ffff;
        let mut out = Vec::new();
        // Our messages are a few hundred bytes: far from the 64 KiB an IE or message may hold.
        let _ = encode(&m(self.seq), &mut out);
        // Only session requests are sent again; node requests are re-made by the caller.
        let bytes = if matches!(p, Pending::Establish(_) | Pending::Delete(_)) { out.clone() } else { Vec::new() };
        self.pending.insert(self.seq, Sent { what: p, bytes, ticks: 0 });
        out
    }

    /// An Association Setup Request.
    pub fn association_setup(&mut self) -> Vec<u8> {
        let (node_id, rts) = (self.node_id(), RecoveryTimeStamp(self.cfg.recovery_ntp));
        self.send(Pending::Association, |seq| {
            Message::AssociationSetupRequest(
                NodeHeader { seq },
                AssociationSetupRequest {
                    node_id,
                    recovery_time_stamp: rts,
                    cp_function_features: Some(CpFunctionFeatures(vec![0])),
                    // Keep what we had there, if the user plane still has it (clause 6.2.6.2.2).
                    pfcp_session_retention_information: Some(PfcpSessionRetentionInformation::default()),
                    ..Default::default()
                },
            )
        })
    }

    /// A Heartbeat Request. A heartbeat still unanswered counts as missed ([`PfcpCp::missed`]).
    pub fn heartbeat(&mut self) -> Vec<u8> {
        let before = self.pending.len();
        self.pending.retain(|_, p| p.what != Pending::Heartbeat);
        if self.pending.len() < before {
            self.missed += 1;
        }
        let rts = RecoveryTimeStamp(self.cfg.recovery_ntp);
        self.send(Pending::Heartbeat, |seq| {
            Message::HeartbeatRequest(NodeHeader { seq }, HeartbeatRequest { recovery_time_stamp: rts, unknown: vec![] })
        })
    }

    /// The request a lease event calls for, if any: Bound ▸ establishment (unless the
    /// subscriber has a session already); Released, Expired, or Declined on the session's
    /// address ▸ deletion (deferred until the establishment is answered, when it is pending);
    /// Renewed ▸ nothing.
    pub fn on_event(&mut self, ev: &Event) -> Option<Vec<u8>> {
        match ev.kind {
            EventKind::Bound => {
                if self.subs.contains_key(&ev.identity) {
                    return None;
                }
                let cp_seid = self.next_seid;
                self.next_seid += 1;
                self.subs.insert(ev.identity, Sub { cp_seid, ip: ev.ip, state: State::Establishing { delete_after: false } });
                let m = self.establishment(cp_seid, &ev.identity, ev.ip);
                Some(self.send(Pending::Establish(ev.identity), m))
            }
            EventKind::Renewed => None,
            EventKind::Released | EventKind::Expired | EventKind::Declined => {
                let sub = self.subs.get_mut(&ev.identity).filter(|s| ev.kind != EventKind::Declined || s.ip == ev.ip)?;
                match sub.state {
                    State::Establishing { .. } => {
                        sub.state = State::Establishing { delete_after: true };
                        None
                    }
                    State::Established { up_seid } => Some(self.deletion(ev.identity, up_seid)),
                }
            }
        }
    }

    fn deletion(&mut self, identity: Identity, up_seid: u64) -> Vec<u8> {
        self.send(Pending::Delete(identity), |seq| {
            Message::SessionDeletionRequest(SessionHeader { seid: up_seid, seq, priority: None }, SessionDeletionRequest::default())
        })
    }

    fn establishment(&self, cp_seid: u64, id: &Identity, ip: Ipv4Addr) -> impl FnOnce(u32) -> Message {
        // The line's port is the CPRi TEID (user plane << 16 | port): the user plane knows its own
        // port number, the low half.
        let port = Some(LogicalPort((id.port & 0xffff).to_string().into_bytes()));
        let tag = |vid| Some(VlanTag { pcp: None, dei: None, vid: Some(vid) });
        let ue = vec![UeIpAddress { ipv4: Some(ip), ..Default::default() }];
        let ue_dst = vec![UeIpAddress { ipv4: Some(ip), destination: true, ..Default::default() }];
        let te = CreateTrafficEndpoint {
            traffic_endpoint_id: TrafficEndpointId(1),
            ue_ip_address: ue.clone(),
            mac_address: Some(MacAddress { source: Some(id.mac), ..Default::default() }),
            s_tag: tag(id.svlan),
            c_tag: tag(id.cvlan),
            logical_port: port.clone(),
            ..Default::default()
        };
        let pdr_up = CreatePdr {
            pdr_id: PdrId(1),
            precedence: Precedence(100),
            pdi: Pdi {
                source_interface: SourceInterface::ACCESS,
                ue_ip_address: ue,
                traffic_endpoint_id: vec![TrafficEndpointId(1)],
                logical_port: port.clone(),
                ..Default::default()
            },
            far_id: Some(FarId(1)),
            urr_id: vec![UrrId(1)],
            qer_id: vec![QerId(1)],
            bbf_outer_header_removal: Some(BbfOuterHeaderRemoval::ETHERNET),
            ..Default::default()
        };
        let pdr_down = CreatePdr {
            pdr_id: PdrId(2),
            precedence: Precedence(100),
            pdi: Pdi { source_interface: SourceInterface::CORE, ue_ip_address: ue_dst, ..Default::default() },
            far_id: Some(FarId(2)),
            urr_id: vec![UrrId(1)],
            qer_id: vec![QerId(1)],
            ..Default::default()
        };
        let far = |far_id, destination_interface, bbf_outer_header_creation, logical_port| CreateFar {
            far_id: FarId(far_id),
            apply_action: ApplyAction(ApplyAction::FORW),
            forwarding_parameters: Some(ForwardingParameters {
                destination_interface,
                bbf_outer_header_creation,
                logical_port,
                ..Default::default()
            }),
            unknown: vec![],
        };
        let ohc = BbfOuterHeaderCreation { description: BbfOuterHeaderCreation::TRAFFIC_ENDPOINT, tunnel_id: 0, session_id: 0 };
        let body = SessionEstablishmentRequest {
            node_id: self.node_id(),
            cp_f_seid: FSeid { seid: cp_seid, ipv4: Some(self.cfg.addr), ipv6: None },
            create_pdr: vec![pdr_up, pdr_down],
            create_far: vec![far(1, DestinationInterface::CORE, None, None), far(2, DestinationInterface::ACCESS, Some(ohc), port)],
            create_urr: vec![CreateUrr {
                urr_id: UrrId(1),
                measurement_method: MeasurementMethod(MeasurementMethod::VOLUM),
                reporting_triggers: Triggers(Triggers::PERIO),
                measurement_period: Some(MeasurementPeriod(self.cfg.urr_period_s)),
                unknown: vec![],
            }],
            create_qer: vec![CreateQer {
                qer_id: QerId(1),
                gate_status: GateStatus::OPEN,
                mbr: Some(BitRate { ul_kbps: self.cfg.ul_kbps, dl_kbps: self.cfg.dl_kbps }),
                gbr: None,
                unknown: vec![],
            }],
            create_traffic_endpoint: vec![te],
            unknown: vec![],
        };
        move |seq| Message::SessionEstablishmentRequest(SessionHeader { seid: 0, seq, priority: None }, body)
    }

    /// Takes a response: what it meant, and a request to send next (a deletion that waited for
    /// its establishment).
    ///
    /// # Errors
    /// [`CpError`]: undecodable, or not an answer to a request of ours (nothing changes).
    pub fn on_response(&mut self, buf: &[u8]) -> Result<(Outcome, Option<Vec<u8>>), CpError> {
        let msg = decode(buf).map_err(CpError::Undecodable)?;
        let seq = msg.seq();
        let unexpected = CpError::Unexpected { seq, msg_type: msg.msg_type() };
        if let Message::SessionReportRequest(h, r) = &msg {
            return Ok(self.report(h, r));
        }
        let p = self.pending.get(&seq).ok_or(unexpected.clone())?.what;
        // An accepted session response is addressed to the session's CP SEID.
        if let (Pending::Establish(id) | Pending::Delete(id), Ok(h)) = (p, msg.header()) {
            let accepted = match &msg {
                Message::SessionEstablishmentResponse(_, r) => r.cause == Cause::REQUEST_ACCEPTED,
                Message::SessionDeletionResponse(_, r) => r.cause == Cause::REQUEST_ACCEPTED,
                _ => false,
            };
            if accepted && self.subs.get(&id).is_some_and(|s| s.cp_seid != h.seid) {
                return Err(unexpected);
            }
        }
        let out = match (p, msg) {
            (Pending::Association, Message::AssociationSetupResponse(_, r)) => {
                self.associated = r.cause == Cause::REQUEST_ACCEPTED;
                if self.associated {
                    self.peer_recovery_ntp = Some(r.recovery_time_stamp.0);
                    self.retained = r.pfcpasrsp_flags.is_some_and(|f| f.0 & PfcpasRspFlags::PSREI != 0);
                }
                (Outcome::Associated { cause: r.cause.0 }, None)
            }
            (Pending::Heartbeat, Message::HeartbeatResponse(_, r)) => {
                self.missed = 0;
                match self.peer_recovery_ntp {
                    Some(known) if known != r.recovery_time_stamp.0 => {
                        (Outcome::PeerRestarted { recovery_ntp: r.recovery_time_stamp.0 }, None)
                    }
                    _ => (Outcome::Heartbeat, None),
                }
            }
            (Pending::Establish(identity), Message::SessionEstablishmentResponse(_, r)) => {
                let up_seid = r.up_f_seid.map(|f| f.seid).filter(|_| r.cause == Cause::REQUEST_ACCEPTED);
                match (up_seid, self.subs.get_mut(&identity)) {
                    (Some(up_seid), Some(sub)) => {
                        let later = matches!(sub.state, State::Establishing { delete_after: true });
                        sub.state = State::Established { up_seid };
                        self.pending.remove(&seq);
                        let next = later.then(|| self.deletion(identity, up_seid));
                        return Ok((Outcome::Established { identity, up_seid }, next));
                    }
                    _ => {
                        self.subs.remove(&identity);
                        let request = msg_type::SESSION_ESTABLISHMENT_REQUEST;
                        (Outcome::Rejected { identity, request, cause: r.cause.0, offending_ie: r.offending_ie.map(|o| o.0) }, None)
                    }
                }
            }
            (Pending::Delete(identity), Message::SessionDeletionResponse(_, r)) => {
                if r.cause == Cause::REQUEST_ACCEPTED || r.cause == Cause::SESSION_CONTEXT_NOT_FOUND {
                    let up_seid = match self.subs.remove(&identity).map(|s| s.state) {
                        Some(State::Established { up_seid }) => up_seid,
                        _ => 0,
                    };
                    let reports: Vec<UsageRecord> = r.usage_report.iter().map(UsageRecord::of).collect();
                    let usage = r.usage_report.first().filter(|u| u.volume_measurement.is_some()).map(|u| UsageRecord::of(u).volume);
                    (Outcome::Deleted { identity, usage, up_seid, reports }, None)
                } else {
                    let request = msg_type::SESSION_DELETION_REQUEST;
                    (Outcome::Rejected { identity, request, cause: r.cause.0, offending_ie: r.offending_ie.map(|o| o.0) }, None)
                }
            }
            _ => return Err(unexpected),
        };
        self.pending.remove(&seq);
        Ok(out)
    }

    /// A Session Report Request from the user plane: its usage reports, and the response
    /// (cause 1, or 65 for a CP SEID we do not know: the caller records the reports first).
    fn report(&mut self, h: &SessionHeader, r: &SessionReportRequest) -> (Outcome, Option<Vec<u8>>) {
        let found = self.subs.iter().find(|(_, s)| s.cp_seid == h.seid).map(|(id, s)| (*id, s.state));
        let (cause, up_seid, outcome) = match found {
            Some((identity, State::Established { up_seid })) => {
                let reports = r.usage_report.iter().map(UsageRecord::of).collect();
                (Cause::REQUEST_ACCEPTED, up_seid, Some(Outcome::Report { identity, up_seid, reports }))
            }
            _ => (Cause::SESSION_CONTEXT_NOT_FOUND, 0, None),
        };
        let m = Message::SessionReportResponse(
            SessionHeader { seid: up_seid, seq: h.seq, priority: None },
            SessionReportResponse { cause, offending_ie: None, unknown: vec![] },
        );
        let mut out = Vec::new();
        let _ = encode(&m, &mut out);
        (outcome.unwrap_or(Outcome::UnknownReport { cp_seid: h.seid }), Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

    fn id(n: u16) -> Identity {
        Identity { port: 3, svlan: 100, cvlan: n, mac: [2, 0, 0, 0, 0, n as u8] }
    }

    fn ev(kind: EventKind, n: u16) -> Event {
        Event { kind, identity: id(n), ip: Ipv4Addr::new(100, 64, 0, n as u8), expires_s: 0 }
    }

    fn encoded(m: &Message) -> Vec<u8> {
        let mut v = Vec::new();
        encode(m, &mut v).unwrap();
        v
    }

    /// The user plane's answer to an establishment: accepted with UP SEID `up`.
    fn accept(req: &[u8], up: u64) -> Vec<u8> {
        let Message::SessionEstablishmentRequest(h, r) = decode(req).unwrap() else { panic!() };
        encoded(&Message::SessionEstablishmentResponse(
            SessionHeader { seid: r.cp_f_seid.seid, seq: h.seq, priority: None },
            SessionEstablishmentResponse {
                node_id: NodeId::Ipv4(Ipv4Addr::LOCALHOST),
                cause: Cause::REQUEST_ACCEPTED,
                offending_ie: None,
                up_f_seid: Some(FSeid { seid: up, ipv4: Some(Ipv4Addr::LOCALHOST), ipv6: None }),
                unknown: vec![],
            },
        ))
    }

    #[test]
    fn a_bound_lease_is_an_establishment_with_the_subscribers_identity() {
        let mut cp = PfcpCp::new(CpConfig::new(CP));
        let req = cp.on_event(&ev(EventKind::Bound, 7)).unwrap();
        let Message::SessionEstablishmentRequest(h, r) = decode(&req).unwrap() else { panic!() };
        assert_eq!((h.seid, h.seq), (0, 1));
        assert_eq!(r.cp_f_seid, FSeid { seid: 1, ipv4: Some(CP), ipv6: None });
        let te = &r.create_traffic_endpoint[0];
        assert_eq!(te.logical_port, Some(LogicalPort(b"3".to_vec())));
        assert_eq!((te.s_tag.unwrap().vid, te.c_tag.unwrap().vid), (Some(100), Some(7)));
        assert_eq!(te.mac_address.unwrap().source, Some([2, 0, 0, 0, 0, 7]));
        assert_eq!(te.ue_ip_address[0].ipv4, Some(Ipv4Addr::new(100, 64, 0, 7)));
        assert_eq!(r.create_qer[0].mbr, Some(BitRate { ul_kbps: 20_000, dl_kbps: 100_000 }));
        assert_eq!((r.create_pdr.len(), r.create_far.len(), r.create_urr.len()), (2, 2, 1));
        // A renewal sends nothing; a second Bound for the same subscriber neither.
        assert!(cp.on_event(&ev(EventKind::Renewed, 7)).is_none());
        assert!(cp.on_event(&ev(EventKind::Bound, 7)).is_none());
        let (o, next) = cp.on_response(&accept(&req, 0x99)).unwrap();
        assert_eq!((o, next), (Outcome::Established { identity: id(7), up_seid: 0x99 }, None));
        assert_eq!((cp.established(), cp.pending()), (1, 0));
        // A release: a deletion for the UP SEID.
        let del = cp.on_event(&ev(EventKind::Released, 7)).unwrap();
        let Message::SessionDeletionRequest(h, _) = decode(&del).unwrap() else { panic!() };
        assert_eq!(h.seid, 0x99);
        let resp = encoded(&Message::SessionDeletionResponse(
            SessionHeader { seid: 1, seq: h.seq, priority: None },
            SessionDeletionResponse {
                cause: Cause::REQUEST_ACCEPTED,
                usage_report: vec![UsageReport {
                    volume_measurement: Some(VolumeMeasurement { ul_bytes: Some(5), dl_bytes: Some(6), ..Default::default() }),
                    ..Default::default()
                }],
                ..Default::default()
            },
        ));
        let (o, _) = cp.on_response(&resp).unwrap();
        let Outcome::Deleted { identity, usage, up_seid, reports } = o else { panic!("{o:?}") };
        assert_eq!((identity, usage, up_seid), (id(7), Some(Volume { ul_bytes: 5, dl_bytes: 6, ul_pkts: 0, dl_pkts: 0 }), 0x99));
        assert_eq!(reports.len(), 1);
        assert_eq!(cp.established(), 0);
        // The same answer again answers nothing.
        assert!(matches!(cp.on_response(&resp), Err(CpError::Unexpected { .. })));
    }

    #[test]
    fn a_lease_that_ends_while_establishing_is_deleted_once_established() {
        let mut cp = PfcpCp::new(CpConfig::new(CP));
        let req = cp.on_event(&ev(EventKind::Bound, 1)).unwrap();
        assert!(cp.on_event(&ev(EventKind::Expired, 1)).is_none());
        let (o, next) = cp.on_response(&accept(&req, 5)).unwrap();
        assert!(matches!(o, Outcome::Established { .. }));
        let Message::SessionDeletionRequest(h, _) = decode(&next.unwrap()).unwrap() else { panic!() };
        assert_eq!(h.seid, 5);
        // A decline of another address leaves the session alone.
        let mut cp = PfcpCp::new(CpConfig::new(CP));
        let req = cp.on_event(&ev(EventKind::Bound, 2)).unwrap();
        cp.on_response(&accept(&req, 6)).unwrap();
        let mut other = ev(EventKind::Declined, 2);
        other.ip = Ipv4Addr::new(100, 64, 9, 9);
        assert!(cp.on_event(&other).is_none());
        assert!(cp.on_event(&ev(EventKind::Declined, 2)).is_some());
    }

    /// Ethernet / IPv4 / UDP 8805 → 8805 with both checksums, around `pfcp`.
    fn frame(pfcp: &[u8]) -> Vec<u8> {
        fastpath_packet::build::FrameBuilder::eth([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
            .ipv4(CP, Ipv4Addr::new(192, 0, 2, 2))
            .udp(8805, 8805)
            .payload(pfcp)
            .build()
    }

    /// tshark decodes every request the control plane sends, BBF IEs included, with the
    /// values we set and no malformed field or warning.
    #[test]
    fn tshark_reads_every_request_we_send() {
        use fastpath_packet::testutil::{assert_field, tshark_check, tshark_or_skip, tshark_problems, write_pcap, EXPERT_WARN};
        if !tshark_or_skip("tshark_reads_every_request_we_send") {
            return;
        }
        let mut cp = PfcpCp::new(CpConfig::new(CP));
        let est = cp.on_event(&ev(EventKind::Bound, 42)).unwrap();
        cp.on_response(&accept(&est, 0x77)).unwrap();
        let reqs = [cp.association_setup(), cp.heartbeat(), est, cp.on_event(&ev(EventKind::Released, 42)).unwrap()];
        let frames: Vec<Vec<u8>> = reqs.iter().map(|r| frame(r)).collect();
        let dir = std::env::temp_dir().join(format!("fastpath-bng-pfcp-cp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pcap = dir.join("requests.pcap");
        write_pcap(&pcap, &frames).unwrap();
        let fields =
            ["pfcp.msg_type", "pfcp.seid", "pfcp.bbf.logical_port_id_str", "pfcp.s_tag.svid", "pfcp.c_tag.cvid", "pfcp.ue_ip_addr_ipv4"];
        let (rows, problems) = tshark_check(&pcap, &fields).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert!(tshark_problems(&pcap, EXPERT_WARN).unwrap().is_empty());
        assert_eq!(rows.len(), 4);
        for (k, t) in ["5", "1", "50", "54"].iter().enumerate() {
            assert_field(&rows, k, "pfcp.msg_type", &[t]);
        }
        // The logical port in the traffic endpoint, the upstream PDI and the downstream FAR.
        assert_field(&rows, 2, "pfcp.bbf.logical_port_id_str", &["3", "3", "3"]);
        assert_field(&rows, 2, "pfcp.s_tag.svid", &["0x0064"]); // 100
        assert_field(&rows, 2, "pfcp.c_tag.cvid", &["0x002a"]); // 42
        assert_field(&rows, 2, "pfcp.ue_ip_addr_ipv4", &["100.64.0.42", "100.64.0.42", "100.64.0.42"]);
        assert_field(&rows, 3, "pfcp.seid", &["0x0000000000000077"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_refusal_forgets_the_session_and_names_the_cause() {
        let mut cp = PfcpCp::new(CpConfig::new(CP));
        let setup = cp.association_setup();
        let Message::AssociationSetupRequest(h, r) = decode(&setup).unwrap() else { panic!() };
        assert_eq!(r.node_id, NodeId::Ipv4(CP));
        let resp = encoded(&Message::AssociationSetupResponse(
            h,
            AssociationSetupResponse { node_id: NodeId::Ipv4(Ipv4Addr::LOCALHOST), cause: Cause::REQUEST_ACCEPTED, ..Default::default() },
        ));
        assert_eq!(cp.on_response(&resp).unwrap().0, Outcome::Associated { cause: 1 });
        assert!(cp.is_associated());
        let req = cp.on_event(&ev(EventKind::Bound, 3)).unwrap();
        let Message::SessionEstablishmentRequest(h, _) = decode(&req).unwrap() else { panic!() };
        let resp = encoded(&Message::SessionEstablishmentResponse(
            SessionHeader { seid: 1, seq: h.seq, priority: None },
            SessionEstablishmentResponse {
                cause: Cause::REQUEST_REJECTED,
                offending_ie: Some(OffendingIe(127)),
                node_id: NodeId::Ipv4(Ipv4Addr::LOCALHOST),
                up_f_seid: None,
                unknown: vec![],
            },
        ));
        let (o, _) = cp.on_response(&resp).unwrap();
        assert_eq!(o, Outcome::Rejected { identity: id(3), request: 50, cause: 64, offending_ie: Some(127) });
        assert_eq!((cp.established(), cp.pending()), (0, 0));
        // The lease can be tried again.
        assert!(cp.on_event(&ev(EventKind::Bound, 3)).is_some());
        assert!(matches!(cp.on_response(&[0x20, 2]), Err(CpError::Undecodable(_))));
    }
}
