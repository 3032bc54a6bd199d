//! The control plane of one or more user planes, as `fastpath bng-cp` runs it: DHCP from the
//! CPRi, leases in the store, sessions over PFCP, heartbeats, restarts and accounting. Pure
//! apart from the store: datagrams in, datagrams out, time passed in as `now_s` (UNIX seconds,
//! so stored expiries mean the same after a restart).
//!
//! ```text
//!  GTP-U G-PDU (TEID = UP << 16 | port) ─▶ cpri::parse_frame ─▶ dhcp::server ─▶ reply frame ─▶ G-PDU back
//!                                                                  │ lease events (by UP: TEID >> 16)
//!                                                                  ▼
//!                              store (leases) ─▶ pfcp_cp of that UP ─▶ PFCP requests to the UP
//!                                                                  ▲ responses: sessions table
//!                                                                  ▲ Session Report Requests: usage table
//! ```
//!
//! **Several user planes.** Each `[[user_plane]]` has its own [`PfcpCp`]. A subscriber's line
//! port is the CPRi TEID it arrived with (`UP << 16 | port`), so the same port, tags and MAC
//! behind two user planes are two subscribers, and a lease's session goes to the user plane in
//! the TEID's high half. The `pfcp_session` table records the owner (`up_id`).
//!
//! **Heartbeats.** [`ControlPlane::tick`] sends each associated user plane a Heartbeat Request
//! every `heartbeat_s`; `max_missed` unanswered in a row mark it down (logged, counted, in
//! [`ControlPlane::user_planes`] and the metrics). Lease events for a user plane that is down
//! wait, and go out when it answers again with the same Recovery Time Stamp.
//!
//! **A user plane that restarts** answers a heartbeat with another Recovery Time Stamp (or
//! refuses a session request with cause 72): the association is set up again, and every
//! session the store has for it is established again under its CP SEID (its UP SEID is new),
//! with no DHCP from the clients.
//!
//! **Relay mode** ([`DhcpMode::Relay`]). Instead of its own server, the control plane relays the
//! subscribers' DHCP to external servers ([`crate::dhcp::relay`]: giaddr = the gateway, option
//! 82 from the line). What the servers answer comes back through
//! [`ControlPlane::on_dhcp_server`]: the subscriber is found by the echoed option 82, and the
//! reply goes down in a G-PDU with the line's TEID, to the CPRi address the subscriber's last
//! message came from. The lease events of the server's ACKs (and of RELEASE, DECLINE, NAK and
//! expiry) go to the store and to PFCP exactly as the server's own.
//!
//! **Group commit.** Every entry point ([`ControlPlane::on_gtpu_batch`],
//! [`ControlPlane::on_pfcp_batch`], [`ControlPlane::on_dhcp_server_batch`],
//! [`ControlPlane::tick`]) writes what its datagrams change — leases, session rows, usage
//! records — in one transaction of the store's one connection, and returns what is to be sent
//! only after that commit: one `fsync` per batch, and nothing acknowledged before it is durable.
//!
//! **A control plane that restarts** ([`ControlPlane::open`]) restores the leases and, from the
//! `pfcp_session` table, every session with its SEIDs. Its Association Setup Request carries
//! PFCP Session Retention Information; a user plane that kept the sessions says so (PSREI), and
//! nothing is re-created: a session whose lease is still there is simply known again, one whose
//! lease expired while we were down is deleted, a lease with no session (we stopped between the
//! ACK and the answer) is established. Without PSREI the user plane has none of them: all are
//! established again.
//!
//! Control thread only.

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};

use fastpath_pfcp::gtpu::{self, Gtpu, MessageType};
use rusqlite::{params, Connection};

use crate::accounting::Accounting;
use crate::cpri::{self, NotDhcp};
use crate::dhcp::relay::{Relay, RelayConfig};
use crate::dhcp::server::{ConfigError, Event, EventKind, Identity, Lease, Outcome as Dhcp, Reply, Server, ServerConfig};
use crate::dhcp::wire::DhcpRepr;
use crate::pfcp_cp::{CpConfig, Outcome, PfcpCp, UsageRecord};
use crate::store::{Store, StoreError};

/// A user plane the control plane drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpParams {
    /// Its number: the high 16 bits of its CPRi TEIDs (1 to 65535).
    pub id: u16,
    /// Its access ports (the TEIDs' low 16 bits); empty: any.
    pub ports: Vec<u16>,
}

/// How the control plane answers its subscribers' DHCP.
#[derive(Debug, Clone)]
pub enum DhcpMode {
    /// Its own server: pools, server id (the gateway address replies come from).
    Server(ServerConfig),
    /// A relay to external DHCP servers; giaddr is the gateway address replies come from.
    Relay(RelayConfig),
}

impl DhcpMode {
    /// The gateway: the address the subscribers' replies come from (and their server id).
    pub fn gateway(&self) -> Ipv4Addr {
        match self {
            DhcpMode::Server(c) => c.server_id,
            DhcpMode::Relay(c) => c.giaddr,
        }
    }
}

/// What the process is told.
#[derive(Debug, Clone)]
pub struct Params {
    /// The DHCP server, or the relay to external ones.
    pub dhcp: DhcpMode,
    /// The gateway MAC replies come from.
    pub gw_mac: [u8; 6],
    /// The SQLite store.
    pub store: std::path::PathBuf,
    /// The PFCP side (our node address, rates, usage reporting period).
    pub pfcp: CpConfig,
    /// The user planes.
    pub user_planes: Vec<UpParams>,
    /// Heartbeat period, seconds (0: none).
    pub heartbeat_s: u64,
    /// Heartbeats missed in a row that mark a user plane down.
    pub max_missed: u32,
}

/// Why the control plane cannot start.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The DHCP configuration.
    #[error("DHCP configuration: {0:?}")]
    Config(ConfigError),
    /// The store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The session or usage table.
    #[error("session store: {0}")]
    Sessions(#[from] rusqlite::Error),
}

/// What to send, and what happened worth a line in the log.
#[derive(Debug, Default)]
pub struct Out {
    /// GTP-U datagrams, each for a CPRi address: the source of the datagram it answers (or, for
    /// a relayed reply, of the subscriber's last message).
    pub gtpu: Vec<(SocketAddr, Vec<u8>)>,
    /// PFCP datagrams, each for the user plane of that number.
    pub pfcp: Vec<(u16, Vec<u8>)>,
    /// Relay mode: DHCP messages for the external servers, each to that address, UDP port 67.
    pub dhcp: Vec<(Ipv4Addr, Vec<u8>)>,
    /// Log lines.
    pub notes: Vec<String>,
}

/// Counters, for `--stats` lines, the metrics and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// G-PDUs taken in.
    pub gpdu_in: u64,
    /// G-PDUs sent (DHCP replies).
    pub gpdu_out: u64,
    /// Datagrams that are not GTP-U, or a message type we do not take.
    pub gtpu_bad: u64,
    /// G-PDUs with the TEID of a user plane we do not drive.
    pub wrong_up: u64,
    /// G-PDUs for a port that is not one of its user plane's access ports.
    pub wrong_port: u64,
    /// Punted frames that are not a subscriber's DHCP message.
    pub not_dhcp: u64,
    /// DHCP messages the server ignored, or the relay would not relay (either way).
    pub dhcp_ignored: u64,
    /// Relay mode: subscribers' messages relayed to the servers.
    pub relayed_up: u64,
    /// Relay mode: servers' replies relayed to a subscriber.
    pub relayed_down: u64,
    /// Relay mode: datagrams on the servers' side that are not a DHCP message, that come from an
    /// address that is not a configured server, or a reply for a subscriber whose line we no
    /// longer know.
    pub relay_bad: u64,
    /// Echo requests answered.
    pub echo: u64,
    /// Sessions established.
    pub established: u64,
    /// Sessions established again on a user plane that had lost them.
    pub reestablished: u64,
    /// Sessions deleted.
    pub deleted: u64,
    /// Session requests refused.
    pub rejected: u64,
    /// PFCP datagrams that answer nothing of ours, or come from no user plane of ours.
    pub pfcp_bad: u64,
    /// Session Report Requests taken (their usage recorded).
    pub reports: u64,
    /// Session Report Requests for a session we do not know.
    pub reports_unknown: u64,
    /// Usage records written (periodic and final reports).
    pub usage_records: u64,
    /// Times a user plane was marked down (heartbeats missed).
    pub up_down: u64,
    /// Times a user plane was found restarted.
    pub up_restarts: u64,
}

/// How a user plane is, for status lines and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpStatus {
    /// Its number.
    pub id: u16,
    /// Associated with us.
    pub associated: bool,
    /// Marked down: `max_missed` heartbeats in a row got no answer.
    pub down: bool,
    /// Heartbeats unanswered in a row now.
    pub missed: u32,
    /// Sessions in place there.
    pub sessions: usize,
    /// Times marked down.
    pub downs: u64,
    /// Times found restarted.
    pub restarts: u64,
    /// Its Recovery Time Stamp (NTP seconds), once associated.
    pub recovery_ntp: Option<u32>,
}

/// One user plane's state.
#[derive(Debug)]
struct UserPlane {
    params: UpParams,
    pfcp: PfcpCp,
    /// Lease events waiting while it is down.
    queued: Vec<Event>,
    down: bool,
    downs: u64,
    restarts: u64,
    last_heartbeat_s: u64,
}

impl UserPlane {
    fn live(&self) -> bool {
        self.pfcp.is_associated() && !self.down
    }
}

/// The DHCP side: the server, or the relay.
#[derive(Debug)]
enum Dhcp4 {
    Server(Server),
    Relay(Relay),
}

impl Dhcp4 {
    fn leases(&self) -> Vec<Lease> {
        match self {
            Dhcp4::Server(s) => s.leases(),
            Dhcp4::Relay(r) => r.leases(),
        }
    }

    fn lease_of(&self, id: &Identity) -> Option<Lease> {
        match self {
            Dhcp4::Server(s) => s.lease_of(id),
            Dhcp4::Relay(r) => r.lease_of(id),
        }
    }

    fn drain_events(&mut self) -> Vec<Event> {
        match self {
            Dhcp4::Server(s) => s.drain_events(),
            Dhcp4::Relay(r) => r.drain_events(),
        }
    }

    fn expire(&mut self, now_s: u64) {
        match self {
            Dhcp4::Server(s) => s.expire(now_s),
            Dhcp4::Relay(r) => r.expire(now_s),
        }
    }
}

/// How long the CPRi address of a relayed subscriber's last message is kept for the servers'
/// replies, seconds (a DHCP exchange takes seconds; a renewal refreshes it).
const LINE_HOLD_S: u64 = 300;

/// The control plane of its user planes.
#[derive(Debug)]
pub struct ControlPlane {
    dhcp: Dhcp4,
    store: Store,
    ups: BTreeMap<u16, UserPlane>,
    /// Relay mode: the CPRi address each subscriber's last message came from, and when.
    lines: HashMap<Identity, (SocketAddr, u64)>,
    /// Establishments sent whose answer we never recorded (we stopped in between): their CP
    /// SEIDs, to ask again under the same one (the user plane answers with the session it has).
    unanswered: HashMap<Identity, (Ipv4Addr, u64)>,
    gw_mac: [u8; 6],
    server_ip: Ipv4Addr,
    heartbeat_s: u64,
    max_missed: u32,
    /// Counters.
    pub counters: Counters,
}

/// The user plane a subscriber is behind: the high half of its port (the CPRi TEID).
pub fn up_of(id: &Identity) -> u16 {
    (id.port >> 16) as u16
}

impl ControlPlane {
    /// Opens the store, restores leases and sessions (module doc).
    ///
    /// # Errors
    /// [`OpenError`].
    pub fn open(p: &Params, now_s: u64) -> Result<ControlPlane, OpenError> {
        let store = Store::open(&p.store)?;
        let snap = store.load()?;
        let dhcp = match &p.dhcp {
            DhcpMode::Server(c) => {
                let mut server = c.build().map_err(OpenError::Config)?;
                server.restore(&snap.leases, &snap.quarantined, now_s);
                Dhcp4::Server(server)
            }
            DhcpMode::Relay(c) => {
                let mut relay = Relay::new(c.clone());
                relay.restore(&snap.leases, now_s);
                Dhcp4::Relay(relay)
            }
        };
        create_sessions(store.db())?;
        Accounting::open(&store)?;
        let mut ups: BTreeMap<u16, UserPlane> = p
            .user_planes
            .iter()
            .map(|u| {
                let up = UserPlane {
                    params: u.clone(),
                    pfcp: PfcpCp::new(p.pfcp.clone()),
                    queued: Vec::new(),
                    down: false,
                    downs: 0,
                    restarts: 0,
                    last_heartbeat_s: now_s,
                };
                (u.id, up)
            })
            .collect();
        let mut unanswered = HashMap::new();
        for (up_id, id, ip, cp_seid, up_seid) in load_sessions(store.db())? {
            // A user plane no longer in the config keeps its rows until it comes back.
            let Some(u) = ups.get_mut(&up_id) else { continue };
            if up_seid == 0 {
                u.pfcp.reserve(cp_seid);
                unanswered.insert(id, (ip, cp_seid));
            } else {
                u.pfcp.restore(id, ip, cp_seid, up_seid);
            }
        }
        Ok(ControlPlane {
            dhcp,
            store,
            ups,
            lines: HashMap::new(),
            unanswered,
            gw_mac: p.gw_mac,
            server_ip: p.dhcp.gateway(),
            heartbeat_s: p.heartbeat_s,
            max_missed: p.max_missed.max(1),
            counters: Counters::default(),
        })
    }

    /// True once every user plane accepted the association.
    pub fn is_associated(&self) -> bool {
        self.ups.values().all(|u| u.pfcp.is_associated())
    }

    /// The DHCP server (none in relay mode).
    pub fn server(&self) -> Option<&Server> {
        match &self.dhcp {
            Dhcp4::Server(s) => Some(s),
            Dhcp4::Relay(_) => None,
        }
    }

    /// The bound leases (the server's, or those the relay saw the servers grant), in address
    /// order.
    pub fn leases(&self) -> Vec<Lease> {
        self.dhcp.leases()
    }

    /// Relay mode: the servers requests are relayed to (empty for the built-in server).
    pub fn relay_servers(&self) -> &[Ipv4Addr] {
        match &self.dhcp {
            Dhcp4::Server(_) => &[],
            Dhcp4::Relay(r) => r.servers(),
        }
    }

    /// Sessions the user planes accepted, all of them.
    pub fn established(&self) -> usize {
        self.ups.values().map(|u| u.pfcp.established()).sum()
    }

    /// Every user plane's state.
    pub fn user_planes(&self) -> Vec<UpStatus> {
        self.ups
            .values()
            .map(|u| UpStatus {
                id: u.params.id,
                associated: u.pfcp.is_associated(),
                down: u.down,
                missed: u.pfcp.missed(),
                sessions: u.pfcp.established(),
                downs: u.downs,
                restarts: u.restarts,
                recovery_ntp: u.pfcp.peer_recovery(),
            })
            .collect()
    }

    /// The usage records (for the metrics and tests).
    pub fn accounting(&self) -> Accounting<'_> {
        Accounting::new(&self.store)
    }

    /// Runs `f` in one batch of the store (module doc: group commit): committed before this
    /// returns, so what `f` put in `out` may then be sent; on an error, rolled back and nothing
    /// may be sent.
    fn batch(&mut self, f: impl FnOnce(&mut ControlPlane, &mut Out) -> Result<(), StoreError>) -> Result<Out, StoreError> {
        let mut out = Out::default();
        self.store.begin()?;
        match f(self, &mut out) {
            Ok(()) => self.store.commit()?,
            Err(e) => {
                self.store.rollback();
                return Err(e);
            }
        }
        Ok(out)
    }

    /// Takes one datagram from the CPRi socket, from `from`.
    ///
    /// # Errors
    /// The store failed: the process must stop rather than lose a lease.
    pub fn on_gtpu(&mut self, buf: &[u8], from: SocketAddr, now_s: u64) -> Result<Out, StoreError> {
        self.on_gtpu_batch([(buf, from)], now_s)
    }

    /// [`ControlPlane::on_gtpu`] for several datagrams at once: each is served in turn, then
    /// their lease events go to the store in one transaction (one `fsync` for the lot, a group
    /// commit) before any reply or PFCP request is returned to be sent.
    ///
    /// # Errors
    /// The store failed: nothing of this batch may be sent.
    pub fn on_gtpu_batch<'b>(&mut self, bufs: impl IntoIterator<Item = (&'b [u8], SocketAddr)>, now_s: u64) -> Result<Out, StoreError> {
        self.batch(|cp, out| {
            for (buf, from) in bufs {
                cp.gtpu_one(buf, from, now_s, out);
            }
            cp.events(out)
        })
    }

    /// Relay mode: takes one datagram sent to our giaddr, port 67, from `from`. Only the
    /// configured servers are heard: a datagram from any other address is counted
    /// (`relay_bad`) and dropped.
    ///
    /// # Errors
    /// The store failed: the process must stop rather than lose a lease.
    pub fn on_dhcp_server(&mut self, buf: &[u8], from: Ipv4Addr, now_s: u64) -> Result<Out, StoreError> {
        self.on_dhcp_server_batch([(buf, from)], now_s)
    }

    /// [`ControlPlane::on_dhcp_server`] for several datagrams, with one commit for their lease
    /// events before any reply or PFCP request is returned to be sent.
    ///
    /// # Errors
    /// The store failed: nothing of this batch may be sent.
    pub fn on_dhcp_server_batch<'b>(
        &mut self,
        bufs: impl IntoIterator<Item = (&'b [u8], Ipv4Addr)>,
        now_s: u64,
    ) -> Result<Out, StoreError> {
        self.batch(|cp, out| {
            for (buf, from) in bufs {
                cp.server_reply(buf, from, now_s, out);
            }
            cp.events(out)
        })
    }

    /// A server's reply ▸ the subscriber's frame in a G-PDU with its line's TEID, to where its
    /// last message came from.
    fn server_reply(&mut self, buf: &[u8], from: Ipv4Addr, now_s: u64, out: &mut Out) {
        let Dhcp4::Relay(relay) = &mut self.dhcp else {
            self.counters.relay_bad += 1;
            return;
        };
        if !relay.servers().contains(&from) {
            self.counters.relay_bad += 1;
            out.notes.push(format!("relay: a datagram from {from}, which is not a configured server, dropped"));
            return;
        }
        let Ok(rep) = DhcpRepr::parse(buf) else {
            self.counters.relay_bad += 1;
            return;
        };
        let (id, reply) = match relay.from_server(&rep, now_s) {
            Ok(x) => x,
            Err(why) => {
                self.counters.dhcp_ignored += 1;
                out.notes.push(format!("relay: a {:?} from the servers not relayed: {why:?}", rep.options.message_type));
                return;
            }
        };
        let Some(&(to, _)) = self.lines.get(&id) else {
            self.counters.relay_bad += 1;
            out.notes.push(format!("relay: a reply for {} whose line sent nothing lately", circuit(&id)));
            return;
        };
        self.counters.relayed_down += 1;
        self.send_reply(&id, &reply, to, out);
    }

    /// `reply` to subscriber `id` in a G-PDU with the line's TEID (its port), for `to`.
    fn send_reply(&mut self, id: &Identity, reply: &Reply, to: SocketAddr, out: &mut Out) {
        if let Some(frame) = cpri::build_reply(id, reply, self.gw_mac, self.server_ip) {
            let mut d = Vec::with_capacity(frame.len() + gtpu::HEADER_LEN);
            if gtpu::emit_gpdu(id.port, &frame, &mut d).is_ok() {
                self.counters.gpdu_out += 1;
                out.gtpu.push((to, d));
            }
        }
    }

    /// Serves one CPRi datagram; its replies go to `out`, its lease events wait in the server.
    fn gtpu_one(&mut self, buf: &[u8], from: SocketAddr, now_s: u64, out: &mut Out) {
        let g = match Gtpu::parse(buf) {
            Ok(g) => g,
            Err(_) => {
                self.counters.gtpu_bad += 1;
                return;
            }
        };
        match g.msg_type {
            MessageType::ECHO_REQUEST => {
                self.counters.echo += 1;
                out.gtpu.push((from, gtpu::echo_response(g.seq.unwrap_or(0))));
                return;
            }
            MessageType::G_PDU => {}
            _ => {
                self.counters.gtpu_bad += 1;
                return;
            }
        }
        self.counters.gpdu_in += 1;
        let (up, port) = gtpu::cpri_port(g.teid);
        let Some(u) = self.ups.get(&up) else {
            self.counters.wrong_up += 1;
            return;
        };
        if !u.params.ports.is_empty() && !u.params.ports.contains(&port) {
            self.counters.wrong_port += 1;
            return;
        }
        // The line's port is the whole TEID: the same port number behind two user planes is
        // two lines.
        let p = match cpri::parse_frame(g.payload, g.teid) {
            Ok(p) => p,
            Err(NotDhcp::Truncated | NotDhcp::NotQinQ | NotDhcp::NotDhcp | NotDhcp::Malformed) => {
                self.counters.not_dhcp += 1;
                return;
            }
        };
        let server = match &mut self.dhcp {
            Dhcp4::Server(server) => server,
            Dhcp4::Relay(relay) => {
                match relay.from_client(&p.msg, p.identity, now_s) {
                    Ok(m) => {
                        self.counters.relayed_up += 1;
                        self.lines.insert(p.identity, (from, now_s));
                        let bytes = m.to_bytes();
                        for &s in relay.servers() {
                            out.dhcp.push((s, bytes.clone()));
                        }
                    }
                    Err(_) => self.counters.dhcp_ignored += 1,
                }
                return;
            }
        };
        match server.handle(&p.msg, p.identity, now_s) {
            Dhcp::Reply(r) => self.send_reply(&p.identity, &r, from, out),
            Dhcp::Done => {}
            Dhcp::Ignored(_) => self.counters.dhcp_ignored += 1,
        }
    }

    /// Once a second: Association Setup Requests to the user planes not associated, heartbeats
    /// (and marking down) every `heartbeat_s`, session requests unanswered for 3 s sent again,
    /// and the end of leases, offers and quarantines due by `now_s` (their sessions are
    /// deleted).
    ///
    /// # Errors
    /// The store failed.
    pub fn tick(&mut self, now_s: u64) -> Result<Out, StoreError> {
        self.batch(|cp, out| cp.tick_in_batch(now_s, out))
    }

    fn tick_in_batch(&mut self, now_s: u64, out: &mut Out) -> Result<(), StoreError> {
        let (hb, max_missed) = (self.heartbeat_s, self.max_missed);
        for (&id, u) in self.ups.iter_mut() {
            if !u.pfcp.is_associated() {
                out.pfcp.push((id, u.pfcp.association_setup()));
                continue;
            }
            for r in u.pfcp.retransmit(3) {
                out.pfcp.push((id, r));
            }
            if hb > 0 && now_s.saturating_sub(u.last_heartbeat_s) >= hb {
                u.last_heartbeat_s = now_s;
                out.pfcp.push((id, u.pfcp.heartbeat()));
                if u.pfcp.missed() >= max_missed && !u.down {
                    u.down = true;
                    u.downs += 1;
                    self.counters.up_down += 1;
                    out.notes.push(format!("user plane {id} is down: {} heartbeats unanswered", u.pfcp.missed()));
                }
            }
        }
        self.dhcp.expire(now_s);
        self.lines.retain(|_, (_, at)| now_s.saturating_sub(*at) < LINE_HOLD_S);
        self.events(out)?;
        self.store.prune(now_s)
    }

    /// Lease events: into the store (before anything is sent), then to the PFCP of the
    /// subscriber's user plane, or its queue while that is down. A user plane not associated
    /// gets the leases as they are then, when it associates ([`ControlPlane::resync`]).
    /// Called inside a batch: the leases and the session rows these events write are committed
    /// with it, before the requests leave.
    fn events(&mut self, out: &mut Out) -> Result<(), StoreError> {
        let evs = self.dhcp.drain_events();
        if evs.is_empty() {
            return Ok(());
        }
        self.store.apply(&evs)?;
        for e in evs {
            out.notes.push(format!("lease {:?} {} {}", e.kind, circuit(&e.identity), e.ip));
            let up = up_of(&e.identity);
            let Some(u) = self.ups.get_mut(&up) else { continue };
            if u.live() {
                send_event(self.store.db(), up, &mut u.pfcp, &e, out)?;
            } else if u.pfcp.is_associated() {
                u.queued.push(e);
            }
        }
        Ok(())
    }

    /// After an association of user plane `up`: it kept our sessions (PSREI) ▸ delete those
    /// whose lease ended, establish leases with no session; it did not ▸ establish every
    /// session whose lease is still there again, under its CP SEID, and forget the others.
    fn resync(&mut self, up: u16, out: &mut Out) -> Result<(), rusqlite::Error> {
        let Some(u) = self.ups.get_mut(&up) else { return Ok(()) };
        u.queued.clear();
        u.down = false;
        if u.pfcp.retained() {
            for (id, ip, _, _) in u.pfcp.sessions() {
                if self.dhcp.lease_of(&id).is_none_or(|l| l.ip != ip) {
                    let e = Event { kind: EventKind::Expired, identity: id, ip, expires_s: 0 };
                    send_event(self.store.db(), up, &mut u.pfcp, &e, out)?;
                }
            }
        } else {
            let lost = u.pfcp.take_sessions();
            if !lost.is_empty() {
                out.notes.push(format!("user plane {up} has none of our {} sessions: establishing them again", lost.len()));
            }
            for (id, ip, cp_seid) in lost {
                if self.dhcp.lease_of(&id).is_some_and(|l| l.ip == ip) {
                    self.counters.reestablished += 1;
                    out.pfcp.push((up, u.pfcp.reestablish(id, ip, cp_seid)));
                    write_session(self.store.db(), up, &id, ip, cp_seid, 0)?;
                } else {
                    delete_session(self.store.db(), &id)?;
                }
            }
        }
        for l in self.dhcp.leases() {
            if up_of(&l.identity) != up || u.pfcp.session(&l.identity).is_some() {
                continue;
            }
            match self.unanswered.remove(&l.identity) {
                // Asked before we stopped: ask again under the same CP SEID.
                Some((ip, cp_seid)) if ip == l.ip => out.pfcp.push((up, u.pfcp.reestablish(l.identity, ip, cp_seid))),
                _ => {
                    let e = Event { kind: EventKind::Bound, identity: l.identity, ip: l.ip, expires_s: l.expires_s };
                    send_event(self.store.db(), up, &mut u.pfcp, &e, out)?;
                }
            }
        }
        // Asked for leases that ended while we were stopped: the rows go (a session the user
        // plane made of them has no lease; it is what a release would have deleted).
        let gone: Vec<Identity> = self.unanswered.keys().filter(|id| up_of(id) == up).copied().collect();
        for id in gone {
            self.unanswered.remove(&id);
            delete_session(self.store.db(), &id)?;
        }
        Ok(())
    }

    /// Takes one datagram from user plane `up`'s PFCP address.
    ///
    /// # Errors
    /// The session or usage table could not be written (the report is then not answered).
    pub fn on_pfcp(&mut self, up: u16, buf: &[u8]) -> Result<Out, StoreError> {
        self.on_pfcp_batch([(up, buf)])
    }

    /// [`ControlPlane::on_pfcp`] for several datagrams (each with its user plane's number): the
    /// session rows and usage records they write are one transaction, committed before any
    /// answer or request is returned to be sent (a group commit, as for the CPRi).
    ///
    /// # Errors
    /// The store failed: nothing of this batch may be sent.
    pub fn on_pfcp_batch<'b>(&mut self, dgrams: impl IntoIterator<Item = (u16, &'b [u8])>) -> Result<Out, StoreError> {
        self.batch(|cp, out| {
            for (up, buf) in dgrams {
                cp.pfcp_one(up, buf, out)?;
            }
            Ok(())
        })
    }

    fn pfcp_one(&mut self, up: u16, buf: &[u8], out: &mut Out) -> Result<(), StoreError> {
        let Some(u) = self.ups.get_mut(&up) else {
            self.counters.pfcp_bad += 1;
            return Ok(());
        };
        let (o, next) = match u.pfcp.on_response(buf) {
            Ok(x) => x,
            Err(e) => {
                self.counters.pfcp_bad += 1;
                out.notes.push(format!("PFCP from user plane {up}: {e}"));
                return Ok(());
            }
        };
        let next = next.map(|r| (up, r));
        match o {
            Outcome::Associated { cause } => {
                let kept = if u.pfcp.retained() { ", it kept our sessions" } else { "" };
                out.notes.push(format!("PFCP association with user plane {up}: cause {cause}{kept}"));
                if cause == 1 {
                    self.resync(up, out)?;
                }
            }
            Outcome::Established { identity, up_seid } => {
                self.counters.established += 1;
                if let Some((cp_seid, ip, _)) = u.pfcp.session(&identity) {
                    write_session(self.store.db(), up, &identity, ip, cp_seid, up_seid)?;
                }
                out.notes.push(format!("session up {} on user plane {up} (UP SEID {up_seid:#x})", circuit(&identity)));
            }
            Outcome::Deleted { identity, usage, up_seid, reports } => {
                self.counters.deleted += 1;
                let ip = load_ip(self.store.db(), &identity)?.unwrap_or(Ipv4Addr::UNSPECIFIED);
                self.record(up, up_seid, &identity, ip, &reports)?;
                delete_session(self.store.db(), &identity)?;
                out.notes.push(format!("session down {} usage {usage:?}", circuit(&identity)));
            }
            Outcome::Report { identity, up_seid, reports } => {
                self.counters.reports += 1;
                let ip = u.pfcp.session(&identity).map_or(Ipv4Addr::UNSPECIFIED, |s| s.1);
                self.record(up, up_seid, &identity, ip, &reports)?;
            }
            Outcome::UnknownReport { cp_seid } => {
                self.counters.reports_unknown += 1;
                out.notes.push(format!("usage report from user plane {up} for unknown CP SEID {cp_seid:#x}"));
            }
            Outcome::Rejected { identity, request, cause, offending_ie } => {
                self.counters.rejected += 1;
                if request == fastpath_pfcp::message::msg_type::SESSION_ESTABLISHMENT_REQUEST {
                    delete_session(self.store.db(), &identity)?;
                }
                out.notes.push(format!(
                    "PFCP request type {request} for {} refused by user plane {up}: cause {cause}, offending IE {offending_ie:?}",
                    circuit(&identity)
                ));
                if cause == 72 {
                    // It has no association with us: it restarted. Associate again (next tick).
                    self.counters.up_restarts += 1;
                    u.restarts += 1;
                    u.pfcp.reset();
                    out.notes.push(format!("user plane {up} has no association with us: associating again"));
                }
            }
            Outcome::Heartbeat => {
                if u.down {
                    u.down = false;
                    out.notes.push(format!("user plane {up} answers again (same Recovery Time Stamp: sessions intact)"));
                    for e in std::mem::take(&mut u.queued) {
                        send_event(self.store.db(), up, &mut u.pfcp, &e, out)?;
                    }
                }
            }
            Outcome::PeerRestarted { recovery_ntp } => {
                self.counters.up_restarts += 1;
                u.restarts += 1;
                u.down = false;
                u.pfcp.reset();
                out.pfcp.push((up, u.pfcp.association_setup()));
                out.notes.push(format!("user plane {up} restarted (Recovery Time Stamp {recovery_ntp}): associating again"));
            }
        }
        // Answers to the user plane's own requests leave after the batch is committed.
        out.pfcp.extend(next);
        Ok(())
    }

    fn record(&mut self, up: u16, up_seid: u64, id: &Identity, ip: Ipv4Addr, reports: &[UsageRecord]) -> Result<(), rusqlite::Error> {
        self.accounting().record(up, up_seid, id, ip, reports)?;
        self.counters.usage_records += reports.len() as u64;
        Ok(())
    }

    /// The Prometheus text exposition (format 0.0.4): counters, each user plane's state, and
    /// each subscriber's usage summed from the records.
    ///
    /// # Errors
    /// The usage table could not be read.
    pub fn metrics(&self) -> Result<String, rusqlite::Error> {
        use std::fmt::Write;
        let mut o = String::new();
        let c = &self.counters;
        let counters: [(&str, u64, &str); 21] = [
            ("gpdu_in", c.gpdu_in, "G-PDUs taken from the CPRi"),
            ("gpdu_out", c.gpdu_out, "G-PDUs sent (DHCP replies)"),
            ("gtpu_bad", c.gtpu_bad, "CPRi datagrams that are not GTP-U we take"),
            ("wrong_up", c.wrong_up, "G-PDUs with the TEID of a user plane we do not drive"),
            ("wrong_port", c.wrong_port, "G-PDUs for a port that is not an access port of its user plane"),
            ("not_dhcp", c.not_dhcp, "punted frames that are not a subscriber's DHCP"),
            ("dhcp_ignored", c.dhcp_ignored, "DHCP messages the server ignored"),
            ("echo", c.echo, "GTP-U echo requests answered"),
            ("relayed_up", c.relayed_up, "relay mode: subscribers' messages relayed to the DHCP servers"),
            ("relayed_down", c.relayed_down, "relay mode: servers' replies relayed to a subscriber"),
            (
                "relay_bad",
                c.relay_bad,
                "relay mode: server-side datagrams that are not DHCP, from an address that is not a server, or for a line unknown",
            ),
            ("sessions_established", c.established, "PFCP sessions established"),
            ("sessions_reestablished", c.reestablished, "sessions established again on a user plane that lost them"),
            ("sessions_deleted", c.deleted, "PFCP sessions deleted"),
            ("session_requests_rejected", c.rejected, "session requests a user plane refused"),
            ("pfcp_bad", c.pfcp_bad, "PFCP datagrams that answer nothing of ours"),
            ("usage_reports", c.reports, "Session Report Requests taken"),
            ("usage_reports_unknown", c.reports_unknown, "Session Report Requests for an unknown session"),
            ("usage_records", c.usage_records, "usage records written"),
            ("user_plane_down", c.up_down, "times a user plane was marked down"),
            ("user_plane_restarts", c.up_restarts, "times a user plane was found restarted"),
        ];
        for (name, v, help) in counters {
            let _ = writeln!(
                o,
                "# HELP fastpath_bng_{name}_total {help}\n# TYPE fastpath_bng_{name}_total counter\nfastpath_bng_{name}_total {v}"
            );
        }
        let _ = writeln!(
            o,
            "# HELP fastpath_bng_leases bound leases\n# TYPE fastpath_bng_leases gauge\nfastpath_bng_leases {}",
            self.dhcp.leases().len()
        );
        let ups = self.user_planes();
        let gauges: [(&str, &str, Gauge); 5] = [
            ("user_plane_associated", "1 when the user plane accepted our association", |u| u64::from(u.associated)),
            ("user_plane_down", "1 when the user plane missed max_missed heartbeats in a row", |u| u64::from(u.down)),
            ("user_plane_missed_heartbeats", "heartbeats unanswered in a row", |u| u64::from(u.missed)),
            ("user_plane_sessions", "sessions in place on the user plane", |u| u.sessions as u64),
            ("user_plane_recovery_time_stamp", "the user plane's Recovery Time Stamp (NTP seconds)", |u| {
                u64::from(u.recovery_ntp.unwrap_or(0))
            }),
        ];
        for (name, help, f) in gauges {
            let _ = writeln!(o, "# HELP fastpath_bng_{name} {help}\n# TYPE fastpath_bng_{name} gauge");
            for u in &ups {
                let _ = writeln!(o, "fastpath_bng_{name}{{up=\"{}\"}} {}", u.id, f(u));
            }
        }
        let totals = self.accounting().totals()?;
        for (name, help, f) in [
            (
                "subscriber_bytes_total",
                "bytes a subscriber sent (up) and received (down), from usage reports",
                (|v| (v.ul_bytes, v.dl_bytes)) as fn(&crate::pfcp_cp::Volume) -> (u64, u64),
            ),
            ("subscriber_packets_total", "packets, likewise", |v| (v.ul_pkts, v.dl_pkts)),
        ] {
            let _ = writeln!(o, "# HELP fastpath_bng_{name} {help}\n# TYPE fastpath_bng_{name} counter");
            for t in &totals {
                let (up, down) = f(&t.volume);
                let l = format!(
                    "up=\"{}\",port=\"{}\",svlan=\"{}\",cvlan=\"{}\",mac=\"{}\"",
                    t.up_id,
                    t.identity.port & 0xffff,
                    t.identity.svlan,
                    t.identity.cvlan,
                    t.identity.remote_id()
                );
                let _ =
                    writeln!(o, "fastpath_bng_{name}{{{l},direction=\"up\"}} {up}\nfastpath_bng_{name}{{{l},direction=\"down\"}} {down}");
            }
        }
        Ok(o)
    }
}

/// A user plane's gauge, read from its status.
type Gauge = fn(&UpStatus) -> u64;

/// `UP:port/S-VLAN/C-VLAN MAC`, for log lines.
fn circuit(id: &Identity) -> String {
    format!("{}:{}/{}/{} {}", up_of(id), id.port & 0xffff, id.svlan, id.cvlan, id.remote_id())
}

/// The `pfcp_session` table, in the store's connection.
fn create_sessions(db: &Connection) -> Result<(), rusqlite::Error> {
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS pfcp_session (
             port INTEGER NOT NULL, svlan INTEGER NOT NULL, cvlan INTEGER NOT NULL, mac BLOB NOT NULL,
             ip INTEGER NOT NULL, cp_seid INTEGER NOT NULL, up_seid INTEGER NOT NULL,
             up_id INTEGER NOT NULL DEFAULT 1,
             PRIMARY KEY (port, svlan, cvlan, mac));",
    )?;
    // A store from before several user planes: its sessions are user plane 1's.
    let has_up: bool =
        db.query_row("SELECT COUNT(*) FROM pragma_table_info('pfcp_session') WHERE name = 'up_id'", [], |r| r.get::<_, i64>(0))? > 0;
    if !has_up {
        db.execute_batch("ALTER TABLE pfcp_session ADD COLUMN up_id INTEGER NOT NULL DEFAULT 1;")?;
    }
    Ok(())
}

/// The PFCP request a lease event calls for. An establishment's row (UP SEID 0 until the answer)
/// is written before the request leaves, so a restart asks again under the same CP SEID.
fn send_event(db: &Connection, up: u16, pfcp: &mut PfcpCp, e: &Event, out: &mut Out) -> Result<(), rusqlite::Error> {
    let Some(req) = pfcp.on_event(e) else { return Ok(()) };
    if e.kind == EventKind::Bound {
        if let Some((cp_seid, ip, None)) = pfcp.session(&e.identity) {
            write_session(db, up, &e.identity, ip, cp_seid, 0)?;
        }
    }
    out.pfcp.push((up, req));
    Ok(())
}

fn write_session(db: &Connection, up: u16, id: &Identity, ip: Ipv4Addr, cp_seid: u64, up_seid: u64) -> Result<(), rusqlite::Error> {
    db.prepare_cached(
        "INSERT OR REPLACE INTO pfcp_session (port, svlan, cvlan, mac, ip, cp_seid, up_seid, up_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![id.port, id.svlan, id.cvlan, &id.mac[..], i64::from(u32::from(ip)), cp_seid as i64, up_seid as i64, up])?;
    Ok(())
}

fn delete_session(db: &Connection, id: &Identity) -> Result<(), rusqlite::Error> {
    db.prepare_cached("DELETE FROM pfcp_session WHERE port = ?1 AND svlan = ?2 AND cvlan = ?3 AND mac = ?4")?.execute(params![
        id.port,
        id.svlan,
        id.cvlan,
        &id.mac[..]
    ])?;
    Ok(())
}

fn load_ip(db: &Connection, id: &Identity) -> Result<Option<Ipv4Addr>, rusqlite::Error> {
    let mut st = db.prepare_cached("SELECT ip FROM pfcp_session WHERE port = ?1 AND svlan = ?2 AND cvlan = ?3 AND mac = ?4")?;
    let mut rows = st.query(params![id.port, id.svlan, id.cvlan, &id.mac[..]])?;
    Ok(match rows.next()? {
        Some(r) => u32::try_from(r.get::<_, i64>(0)?).ok().map(Ipv4Addr::from),
        None => None,
    })
}

type Saved = (u16, Identity, Ipv4Addr, u64, u64);

fn load_sessions(db: &Connection) -> Result<Vec<Saved>, rusqlite::Error> {
    let mut st = db.prepare("SELECT port, svlan, cvlan, mac, ip, cp_seid, up_seid, up_id FROM pfcp_session")?;
    let rows = st.query_map([], |r| {
        Ok((
            r.get::<_, u32>(0)?,
            r.get::<_, u16>(1)?,
            r.get::<_, u16>(2)?,
            r.get::<_, Vec<u8>>(3)?,
            r.get::<_, i64>(4)?,
            r.get::<_, i64>(5)?,
            r.get::<_, i64>(6)?,
            r.get::<_, u16>(7)?,
        ))
    })?;
    let mut v = Vec::new();
    for row in rows {
        let (port, svlan, cvlan, mac, ip, cp, up, up_id) = row?;
        // A record that does not decode is skipped: its lease (if any) is established again.
        let (Ok(mac), Ok(ip)) = (<[u8; 6]>::try_from(mac), u32::try_from(ip)) else { continue };
        v.push((up_id, Identity { port, svlan, cvlan, mac }, Ipv4Addr::from(ip), cp as u64, up as u64));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
    use super::*;
    use crate::dhcp::server::PoolConfig;
    use crate::dhcp::wire::{DhcpRepr, MessageType, Op};
    use fastpath_pfcp::group::UsageReport;
    use fastpath_pfcp::ie::*;
    use fastpath_pfcp::message::*;
    use fastpath_pfcp::{decode, encode, Message, NodeHeader, SessionHeader};
    use std::path::Path;

    /// The CPRi address of user plane 1's worker, in the tests.
    const UP1: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), 2152));

    fn params(dir: &Path, ups: &[u16]) -> Params {
        let gw = Ipv4Addr::new(100, 64, 0, 1);
        Params {
            dhcp: DhcpMode::Server(ServerConfig {
                server_id: gw,
                pools: vec![PoolConfig {
                    name: "s100".into(),
                    svlans: vec![100],
                    first: Ipv4Addr::new(100, 64, 0, 10),
                    last: Ipv4Addr::new(100, 64, 0, 20),
                    mask: Ipv4Addr::new(255, 255, 255, 0),
                    gateway: gw,
                    dns: vec![],
                    lease_time_s: 600,
                }],
                offer_hold_s: 30,
                decline_quarantine_s: 600,
            }),
            gw_mac: [2, 0xfa, 0, 0, 0, 1],
            store: dir.join("cp.db"),
            pfcp: CpConfig::new(Ipv4Addr::LOCALHOST),
            user_planes: ups.iter().map(|&id| UpParams { id, ports: vec![] }).collect(),
            heartbeat_s: 1,
            max_missed: 3,
        }
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("fastpath-bng-cp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn enc(m: &Message) -> Vec<u8> {
        let mut v = Vec::new();
        encode(m, &mut v).unwrap();
        v
    }

    /// A user plane that accepts everything: UP SEID 1000 + n, Recovery Time Stamp `rts`, PSREI
    /// on an association when `kept`.
    fn answer_with(req: &[u8], n: u64, rts: u32, kept: bool) -> Vec<u8> {
        let node_id = NodeId::Ipv4(Ipv4Addr::LOCALHOST);
        match decode(req).unwrap() {
            Message::AssociationSetupRequest(h, r) => {
                assert!(r.pfcp_session_retention_information.is_some(), "we always ask to keep our sessions");
                enc(&Message::AssociationSetupResponse(
                    NodeHeader { seq: h.seq },
                    AssociationSetupResponse {
                        node_id,
                        cause: Cause::REQUEST_ACCEPTED,
                        recovery_time_stamp: RecoveryTimeStamp(rts),
                        pfcpasrsp_flags: kept.then_some(PfcpasRspFlags(PfcpasRspFlags::PSREI)),
                        ..Default::default()
                    },
                ))
            }
            Message::HeartbeatRequest(h, _) => {
                enc(&Message::HeartbeatResponse(h, HeartbeatResponse { recovery_time_stamp: RecoveryTimeStamp(rts), unknown: vec![] }))
            }
            Message::SessionEstablishmentRequest(h, r) => enc(&Message::SessionEstablishmentResponse(
                SessionHeader { seid: r.cp_f_seid.seid, seq: h.seq, priority: None },
                SessionEstablishmentResponse {
                    node_id,
                    cause: Cause::REQUEST_ACCEPTED,
                    offending_ie: None,
                    up_f_seid: Some(FSeid { seid: 1000 + n, ipv4: Some(Ipv4Addr::LOCALHOST), ipv6: None }),
                    unknown: vec![],
                },
            )),
            Message::SessionDeletionRequest(h, _) => {
                assert_eq!(h.seid, 1000 + n, "deleted with the UP SEID it was given");
                enc(&Message::SessionDeletionResponse(
                    SessionHeader { seid: 1, seq: h.seq, priority: None },
                    SessionDeletionResponse { cause: Cause::REQUEST_ACCEPTED, ..Default::default() },
                ))
            }
            m => panic!("{m:?}"),
        }
    }

    fn answer(req: &[u8], n: u64) -> Vec<u8> {
        answer_with(req, n, 7, true)
    }

    /// Associates every user plane of `cp` (they keep our sessions).
    fn associate(cp: &mut ControlPlane, now_s: u64) -> Out {
        let mut rest = Out::default();
        for (up, req) in cp.tick(now_s).unwrap().pfcp {
            let o = cp.on_pfcp(up, &answer(&req, 0)).unwrap();
            rest.pfcp.extend(o.pfcp);
        }
        rest
    }

    fn gpdu_on(up: u16, id: &Identity, ty: MessageType, req_ip: Option<Ipv4Addr>) -> Vec<u8> {
        let mut m = DhcpRepr::empty(Op::BOOTREQUEST);
        m.chaddr[..6].copy_from_slice(&id.mac);
        m.options.message_type = Some(ty);
        m.options.requested_ip = req_ip;
        if ty == MessageType::REQUEST {
            m.options.server_id = Some(Ipv4Addr::new(100, 64, 0, 1));
        }
        if ty == MessageType::RELEASE {
            m.ciaddr = req_ip.unwrap();
            m.options.requested_ip = None;
            m.options.server_id = Some(Ipv4Addr::new(100, 64, 0, 1));
        }
        let mut d = Vec::new();
        gtpu::emit_gpdu(gtpu::cpri_teid(up, id.port as u16), &cpri::client_frame(id, &m), &mut d).unwrap();
        d
    }

    fn gpdu(id: &Identity, ty: MessageType, req_ip: Option<Ipv4Addr>) -> Vec<u8> {
        gpdu_on(1, id, ty, req_ip)
    }

    /// The reply's line (port as the TEID's low half) and message.
    fn reply(out: &Out) -> (Identity, DhcpRepr) {
        let g = Gtpu::parse(&out.gtpu[0].1).unwrap();
        let f = g.payload;
        let dhcp = DhcpRepr::parse(&f[50..]).unwrap();
        let id = Identity {
            port: gtpu::cpri_port(g.teid).1.into(),
            svlan: u16::from_be_bytes([f[14], f[15]]),
            cvlan: u16::from_be_bytes([f[18], f[19]]),
            mac: dhcp.mac(),
        };
        (id, dhcp)
    }

    /// DISCOVER and REQUEST on user plane `up`; returns the leased address and the PFCP
    /// request the bound lease made (with its user plane).
    fn dora(cp: &mut ControlPlane, up: u16, sub: &Identity, now_s: u64) -> (Ipv4Addr, (u16, Vec<u8>)) {
        let o = cp.on_gtpu(&gpdu_on(up, sub, MessageType::DISCOVER, None), UP1, now_s).unwrap();
        let (id, offer) = reply(&o);
        assert_eq!((id, offer.options.message_type), (*sub, Some(MessageType::OFFER)));
        let mut o = cp.on_gtpu(&gpdu_on(up, sub, MessageType::REQUEST, Some(offer.yiaddr)), UP1, now_s).unwrap();
        assert_eq!(reply(&o).1.options.message_type, Some(MessageType::ACK));
        assert_eq!(o.pfcp.len(), 1, "the bound lease is an establishment");
        (offer.yiaddr, o.pfcp.remove(0))
    }

    #[test]
    fn dora_makes_a_session_that_survives_a_restart_and_release_deletes_it() {
        let dir = tmp("restart");
        let p = params(&dir, &[1]);
        let sub = Identity { port: 3, svlan: 100, cvlan: 7, mac: [2, 0, 0, 0, 0, 9] };
        let mut cp = ControlPlane::open(&p, 1000).unwrap();
        assert!(associate(&mut cp, 1000).pfcp.is_empty());
        let (ip, (up, est)) = dora(&mut cp, 1, &sub, 1000);
        assert_eq!(up, 1);
        cp.on_pfcp(1, &answer(&est, 1)).unwrap();
        assert_eq!(cp.established(), 1);
        drop(cp);

        // Restart: the lease and the session are back; the user plane kept the session, so
        // nothing is established again.
        let mut cp = ControlPlane::open(&p, 1010).unwrap();
        let line = Identity { port: 1 << 16 | 3, ..sub };
        assert_eq!(cp.server().unwrap().lease_of(&line).map(|l| l.ip), Some(ip));
        assert!(associate(&mut cp, 1010).pfcp.is_empty(), "no re-creation");
        let o = cp.on_gtpu(&gpdu(&sub, MessageType::RELEASE, Some(ip)), UP1, 1020).unwrap();
        assert_eq!(o.pfcp.len(), 1, "the release is a deletion");
        cp.on_pfcp(1, &answer(&o.pfcp[0].1, 1)).unwrap();
        assert_eq!((cp.established(), cp.counters.deleted), (0, 1));
        drop(cp);
        let mut cp = ControlPlane::open(&p, 1030).unwrap();
        assert!(cp.leases().is_empty());
        assert!(associate(&mut cp, 1030).pfcp.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_establishment_unanswered_when_we_stopped_is_asked_again_under_its_cp_seid() {
        let dir = tmp("unanswered");
        let p = params(&dir, &[1]);
        let sub = Identity { port: 1, svlan: 100, cvlan: 5, mac: [2, 0, 0, 0, 0, 5] };
        let mut cp = ControlPlane::open(&p, 0).unwrap();
        associate(&mut cp, 0);
        let (ip, (_, est)) = dora(&mut cp, 1, &sub, 0);
        let Message::SessionEstablishmentRequest(_, first) = decode(&est).unwrap() else { panic!() };
        // Stopped before the answer was recorded.
        drop(cp);
        let mut cp = ControlPlane::open(&p, 1).unwrap();
        let again = associate(&mut cp, 1).pfcp;
        assert_eq!(again.len(), 1);
        let Message::SessionEstablishmentRequest(_, r) = decode(&again[0].1).unwrap() else { panic!() };
        assert_eq!(r.cp_f_seid.seid, first.cp_f_seid.seid, "the same CP SEID: the user plane answers with what it has");
        assert_eq!(r.create_traffic_endpoint[0].ue_ip_address[0].ipv4, Some(ip));
        cp.on_pfcp(1, &answer(&again[0].1, 4)).unwrap();
        assert_eq!(cp.established(), 1);
        // A new lease does not take that CP SEID.
        let other = Identity { cvlan: 6, mac: [2, 0, 0, 0, 0, 6], ..sub };
        let (_, (_, est)) = dora(&mut cp, 1, &other, 1);
        let Message::SessionEstablishmentRequest(_, r) = decode(&est).unwrap() else { panic!() };
        assert!(r.cp_f_seid.seid > first.cp_f_seid.seid);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_lease_goes_to_the_user_plane_of_its_teid() {
        let dir = tmp("two");
        let mut cp = ControlPlane::open(&params(&dir, &[1, 2]), 0).unwrap();
        associate(&mut cp, 0);
        assert!(cp.is_associated());
        // The same port, tags and MAC behind two user planes: two lines, two leases.
        let sub = Identity { port: 0, svlan: 100, cvlan: 7, mac: [2, 0, 0, 0, 0, 7] };
        let (ip1, (up1, est1)) = dora(&mut cp, 1, &sub, 0);
        let (ip2, (up2, est2)) = dora(&mut cp, 2, &sub, 0);
        assert_eq!((up1, up2), (1, 2));
        assert_ne!(ip1, ip2);
        // The logical port in the request is the user plane's own port number.
        let Message::SessionEstablishmentRequest(_, r) = decode(&est2).unwrap() else { panic!() };
        assert_eq!(r.create_traffic_endpoint[0].logical_port.as_ref().unwrap().0, b"0");
        cp.on_pfcp(1, &answer(&est1, 1)).unwrap();
        cp.on_pfcp(2, &answer(&est2, 2)).unwrap();
        let st = cp.user_planes();
        assert_eq!(st.iter().map(|u| (u.id, u.sessions)).collect::<Vec<_>>(), [(1, 1), (2, 1)]);
        // The store says which user plane owns each session.
        let owners: Vec<(u16, u32)> = load_sessions(cp.store.db()).unwrap().iter().map(|s| (s.0, s.1.port)).collect();
        assert_eq!(owners.len(), 2);
        assert!(owners.contains(&(1, 1 << 16)) && owners.contains(&(2, 2 << 16)), "{owners:?}");
        // A TEID of a user plane we do not drive, and a port that is not an access port.
        cp.on_gtpu(&gpdu_on(3, &sub, MessageType::DISCOVER, None), UP1, 0).unwrap();
        assert_eq!(cp.counters.wrong_up, 1);
        drop(cp);
        let mut p = params(&dir, &[1, 2]);
        p.user_planes[0].ports = vec![5];
        let mut cp = ControlPlane::open(&p, 0).unwrap();
        cp.on_gtpu(&gpdu_on(1, &sub, MessageType::DISCOVER, None), UP1, 0).unwrap();
        assert_eq!(cp.counters.wrong_port, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missed_heartbeats_mark_down_and_a_restarted_user_plane_gets_its_sessions_again() {
        let dir = tmp("hb");
        let mut cp = ControlPlane::open(&params(&dir, &[1]), 100).unwrap();
        associate(&mut cp, 100);
        let a = Identity { port: 0, svlan: 100, cvlan: 1, mac: [2, 0, 0, 0, 0, 1] };
        let b = Identity { port: 0, svlan: 100, cvlan: 2, mac: [2, 0, 0, 0, 0, 2] };
        let (ip_a, (_, est)) = dora(&mut cp, 1, &a, 100);
        cp.on_pfcp(1, &answer(&est, 1)).unwrap();
        let Message::SessionEstablishmentRequest(_, r) = decode(&est).unwrap() else { panic!() };
        let cp_seid_a = r.cp_f_seid.seid;
        // Heartbeats go unanswered: after three in a row the user plane is down.
        let mut t = 100;
        for k in 1..=4u32 {
            t += 1;
            let o = cp.tick(t).unwrap();
            assert_eq!(decode(&o.pfcp[0].1).unwrap().msg_type(), 1, "a heartbeat request");
            assert_eq!(cp.user_planes()[0].down, k >= 4, "tick {k}");
        }
        assert_eq!((cp.counters.up_down, cp.user_planes()[0].missed), (1, 3));
        // A lease while it is down waits.
        let o = cp.on_gtpu(&gpdu(&b, MessageType::DISCOVER, None), UP1, t).unwrap();
        let offer = reply(&o).1;
        let o = cp.on_gtpu(&gpdu(&b, MessageType::REQUEST, Some(offer.yiaddr)), UP1, t).unwrap();
        assert!(o.pfcp.is_empty(), "queued while down");
        // It answers with another Recovery Time Stamp: it restarted.
        t += 1;
        let hb = cp.tick(t).unwrap().pfcp.remove(0).1;
        let o = cp.on_pfcp(1, &answer_with(&hb, 0, 99, false)).unwrap();
        assert_eq!(cp.counters.up_restarts, 1);
        assert_eq!(decode(&o.pfcp[0].1).unwrap().msg_type(), 5, "an association setup");
        // It has none of our sessions: both leases are established, a's under its CP SEID.
        let o = cp.on_pfcp(1, &answer_with(&o.pfcp[0].1, 0, 99, false)).unwrap();
        assert_eq!(o.pfcp.len(), 2, "{:?}", o.notes);
        let mut ips = Vec::new();
        for (k, (up, req)) in o.pfcp.iter().enumerate() {
            let Message::SessionEstablishmentRequest(_, r) = decode(req).unwrap() else { panic!() };
            let ip = r.create_traffic_endpoint[0].ue_ip_address[0].ipv4.unwrap();
            if ip == ip_a {
                assert_eq!(r.cp_f_seid.seid, cp_seid_a, "the same CP SEID");
            }
            ips.push(ip);
            cp.on_pfcp(*up, &answer(req, 10 + k as u64)).unwrap();
        }
        assert!(ips.contains(&ip_a) && ips.contains(&offer.yiaddr));
        assert_eq!((cp.counters.reestablished, cp.established()), (1, 2));
        assert!(!cp.user_planes()[0].down);
        // The store has the new UP SEIDs: a restart of ours knows them.
        drop(cp);
        let mut cp = ControlPlane::open(&params(&dir, &[1]), t).unwrap();
        associate(&mut cp, t);
        assert_eq!(cp.established(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_down_user_plane_that_answers_again_with_its_old_time_stamp_gets_what_waited() {
        let dir = tmp("blip");
        let mut cp = ControlPlane::open(&params(&dir, &[1]), 0).unwrap();
        associate(&mut cp, 0);
        for t in 1..=4 {
            cp.tick(t).unwrap();
        }
        assert!(cp.user_planes()[0].down);
        let a = Identity { port: 0, svlan: 100, cvlan: 1, mac: [2, 0, 0, 0, 0, 1] };
        let o = cp.on_gtpu(&gpdu(&a, MessageType::DISCOVER, None), UP1, 4).unwrap();
        let ip = reply(&o).1.yiaddr;
        assert!(cp.on_gtpu(&gpdu(&a, MessageType::REQUEST, Some(ip)), UP1, 4).unwrap().pfcp.is_empty());
        let hb = cp.tick(5).unwrap().pfcp.remove(0).1;
        let o = cp.on_pfcp(1, &answer_with(&hb, 0, 7, true)).unwrap();
        assert!(!cp.user_planes()[0].down);
        assert_eq!(o.pfcp.len(), 1, "the waiting establishment");
        assert_eq!(decode(&o.pfcp[0].1).unwrap().msg_type(), 50);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 7, 2);

    /// What a DHCP server answers a relayed request: xid, chaddr, giaddr and option 82 echoed.
    fn server_answer(req: &[u8], t: MessageType, yiaddr: Ipv4Addr) -> Vec<u8> {
        let req = DhcpRepr::parse(req).unwrap();
        let mut m = DhcpRepr::empty(Op::BOOTREPLY);
        m.xid = req.xid;
        m.chaddr = req.chaddr;
        m.giaddr = req.giaddr;
        m.ciaddr = req.ciaddr;
        m.yiaddr = yiaddr;
        m.options.message_type = Some(t);
        m.options.server_id = Some(SERVER);
        m.options.lease_time_s = Some(120);
        m.options.relay_agent_info = req.options.relay_agent_info.clone();
        m.to_bytes()
    }

    #[test]
    fn relay_mode_relays_with_option_82_and_makes_sessions_of_the_servers_acks() {
        let dir = tmp("relay");
        let mut p = params(&dir, &[1]);
        p.dhcp = DhcpMode::Relay(RelayConfig { giaddr: Ipv4Addr::new(100, 64, 0, 1), servers: vec![SERVER], max_hops: 4 });
        let mut cp = ControlPlane::open(&p, 100).unwrap();
        associate(&mut cp, 100);
        let sub = Identity { port: 3, svlan: 100, cvlan: 7, mac: [2, 0, 0, 0, 0, 9] };
        let line = Identity { port: 1 << 16 | 3, ..sub };
        // DISCOVER ▸ to the server, with giaddr and the line in option 82; nothing to the line yet.
        let o = cp.on_gtpu(&gpdu(&sub, MessageType::DISCOVER, None), UP1, 100).unwrap();
        assert!(o.gtpu.is_empty() && o.pfcp.is_empty());
        assert_eq!(o.dhcp.len(), 1);
        let (to, relayed) = &o.dhcp[0];
        let m = DhcpRepr::parse(relayed).unwrap();
        assert_eq!((*to, m.giaddr, m.hops), (SERVER, Ipv4Addr::new(100, 64, 0, 1), 1));
        let info = m.options.relay_agent_info.clone().unwrap();
        assert_eq!(info.circuit_id.as_deref(), Some(&b"65539/100/7"[..]), "TEID/S-VLAN/C-VLAN");
        assert_eq!(info.remote_id.as_deref(), Some(&b"02:00:00:00:00:09"[..]));
        // OFFER ▸ down the line: the TEID it came up with, to the address it came from.
        let ip = Ipv4Addr::new(100, 64, 0, 55);
        let o = cp.on_dhcp_server(&server_answer(relayed, MessageType::OFFER, ip), SERVER, 100).unwrap();
        assert_eq!(o.gtpu.len(), 1);
        assert_eq!(o.gtpu[0].0, UP1);
        let (id, offer) = reply(&o);
        assert_eq!(id, sub);
        assert_eq!(Gtpu::parse(&o.gtpu[0].1).unwrap().teid, line.port);
        assert_eq!((offer.yiaddr, offer.options.server_id, offer.options.relay_agent_info), (ip, Some(Ipv4Addr::new(100, 64, 0, 1)), None));
        assert!(o.pfcp.is_empty(), "an offer is no lease");
        // REQUEST ▸ relayed with the real server's id; ACK ▸ the lease, stored, and a session.
        let o = cp.on_gtpu(&gpdu(&sub, MessageType::REQUEST, Some(ip)), UP1, 101).unwrap();
        let req = DhcpRepr::parse(&o.dhcp[0].1).unwrap();
        assert_eq!(req.options.server_id, Some(SERVER), "the server sees its own id");
        let relayed_req = o.dhcp[0].1.clone();
        let o = cp.on_dhcp_server(&server_answer(&relayed_req, MessageType::ACK, ip), SERVER, 101).unwrap();
        assert_eq!(reply(&o).1.options.message_type, Some(MessageType::ACK));
        assert_eq!(o.pfcp.len(), 1, "the server's lease is an establishment");
        let Message::SessionEstablishmentRequest(_, r) = decode(&o.pfcp[0].1).unwrap() else { panic!() };
        assert_eq!(r.create_traffic_endpoint[0].ue_ip_address[0].ipv4, Some(ip));
        cp.on_pfcp(1, &answer(&o.pfcp[0].1, 1)).unwrap();
        assert_eq!((cp.counters.relayed_up, cp.counters.relayed_down, cp.established()), (2, 2, 1));
        // A reply for a line that sent nothing, and junk, from the servers' side.
        let stranger = Identity { cvlan: 99, mac: [2, 0, 0, 0, 0, 99], ..line };
        let mut m = DhcpRepr::empty(Op::BOOTREPLY);
        m.chaddr[..6].copy_from_slice(&stranger.mac);
        m.giaddr = Ipv4Addr::new(100, 64, 0, 1);
        m.options.message_type = Some(MessageType::OFFER);
        m.options.relay_agent_info = Some(stranger.relay_agent_info());
        assert!(cp.on_dhcp_server(&m.to_bytes(), SERVER, 101).unwrap().gtpu.is_empty());
        assert!(cp.on_dhcp_server(&[1, 2, 3], SERVER, 101).unwrap().gtpu.is_empty());
        assert_eq!(cp.counters.relay_bad, 2);
        // The server's own ACK again, but from an address that is no configured server: dropped.
        let spoofed = cp.on_dhcp_server(&server_answer(&relayed_req, MessageType::ACK, ip), Ipv4Addr::new(192, 0, 2, 66), 102).unwrap();
        assert!(spoofed.gtpu.is_empty() && spoofed.pfcp.is_empty(), "{spoofed:?}");
        assert_eq!(cp.counters.relay_bad, 3);
        assert!(spoofed.notes.iter().any(|n| n.contains("192.0.2.66")), "{:?}", spoofed.notes);
        drop(cp);

        // Restarted: the lease is back from the store, the session known again; a RELEASE is
        // relayed (with the server's id, which the relay learnt before from nobody: its one
        // server) and deletes the session.
        let mut cp = ControlPlane::open(&p, 110).unwrap();
        assert_eq!(cp.leases().iter().map(|l| (l.identity, l.ip)).collect::<Vec<_>>(), [(line, ip)]);
        assert!(associate(&mut cp, 110).pfcp.is_empty(), "nothing re-created");
        let o = cp.on_gtpu(&gpdu(&sub, MessageType::RELEASE, Some(ip)), UP1, 111).unwrap();
        assert_eq!(DhcpRepr::parse(&o.dhcp[0].1).unwrap().options.server_id, Some(SERVER));
        assert_eq!(o.pfcp.len(), 1);
        assert_eq!(decode(&o.pfcp[0].1).unwrap().msg_type(), 54, "a deletion");
        assert!(cp.leases().is_empty());
        drop(cp);
        let mut cp = ControlPlane::open(&p, 112).unwrap();
        assert!(cp.leases().is_empty(), "the release is stored");
        // The line speaks again (so replies for it have somewhere to go).
        cp.on_gtpu(&gpdu(&sub, MessageType::DISCOVER, None), UP1, 112).unwrap();
        // Whatever the servers' side sends — mutations of a real answer — is relayed, counted or
        // refused, never a panic, and every G-PDU it makes parses.
        let seed = server_answer(&relayed_req, MessageType::ACK, ip);
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut batch = Vec::new();
        for _ in 0..20_000 {
            let mut d = seed.clone();
            for _ in 0..1 + x % 4 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x % (d.len() as u64 + 1)) as usize;
                match (x >> 32) % 3 {
                    0 if at < d.len() => d[at] ^= 1 << (x % 8),
                    1 if at < d.len() => d[at] = (x >> 40) as u8,
                    _ => d.truncate(at),
                }
            }
            batch.push(d);
            if batch.len() == 64 {
                // In batches, as bng-cp serves them: one commit each.
                for (_, g) in cp.on_dhcp_server_batch(batch.iter().map(|d| (&d[..], SERVER)), 112).unwrap().gtpu {
                    assert!(Gtpu::parse(&g).is_ok());
                }
                batch.clear();
            }
        }
        assert!(cp.counters.relayed_down > 1_000, "mutations reached the line: {:?}", cp.counters);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The PFCP group commit: establishment answers and usage reports in one batch share one
    /// transaction of the store's one connection. With the usage table on a second connection,
    /// the report's write failed as busy while the batch held its transaction (and stopped
    /// bng-cp); here everything of the batch is stored, and answered after the commit.
    #[test]
    fn a_pfcp_batch_of_answers_and_usage_reports_is_one_commit() {
        let dir = tmp("pfcp-batch");
        let p = params(&dir, &[1]);
        let mut cp = ControlPlane::open(&p, 0).unwrap();
        associate(&mut cp, 0);
        let subs: Vec<Identity> = (1..=3).map(|k| Identity { port: 0, svlan: 100, cvlan: k, mac: [2, 0, 0, 0, 0, k as u8] }).collect();
        let ests: Vec<Vec<u8>> = subs.iter().map(|s| dora(&mut cp, 1, s, 0).1 .1).collect();
        let mut batch: Vec<Vec<u8>> = ests.iter().enumerate().map(|(k, e)| answer(e, k as u64)).collect();
        for (k, e) in ests.iter().enumerate() {
            let Message::SessionEstablishmentRequest(_, r) = decode(e).unwrap() else { panic!() };
            let report = fastpath_pfcp::samples::all().into_iter().find(|m| m.msg_type() == 56).unwrap();
            let Message::SessionReportRequest(h, body) = report else { panic!() };
            batch.push(enc(&Message::SessionReportRequest(SessionHeader { seid: r.cp_f_seid.seid, seq: 500 + k as u32, ..h }, body)));
        }
        let o = cp.on_pfcp_batch(batch.iter().map(|d| (1, &d[..]))).unwrap();
        assert_eq!((cp.established(), cp.counters.reports), (3, 3), "{:?}", o.notes);
        assert_eq!(o.pfcp.len(), 3, "the three report answers");
        for (_, a) in &o.pfcp {
            let Message::SessionReportResponse(_, r) = decode(a).unwrap() else { panic!() };
            assert_eq!(r.cause, Cause::REQUEST_ACCEPTED);
        }
        let records = cp.accounting().records().unwrap();
        assert!(records >= 3, "{records}");
        drop(cp);
        // Durable: a restart has every session's UP SEID and every record.
        let mut cp = ControlPlane::open(&p, 1).unwrap();
        assert!(associate(&mut cp, 1).pfcp.is_empty(), "nothing to establish again");
        assert_eq!((cp.established(), cp.accounting().records().unwrap()), (3, records));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn usage_reports_are_recorded_answered_and_exported() {
        let dir = tmp("usage");
        let mut cp = ControlPlane::open(&params(&dir, &[1]), 0).unwrap();
        associate(&mut cp, 0);
        let a = Identity { port: 2, svlan: 100, cvlan: 1, mac: [2, 0, 0, 0, 0, 1] };
        let (_, (_, est)) = dora(&mut cp, 1, &a, 0);
        let Message::SessionEstablishmentRequest(_, r) = decode(&est).unwrap() else { panic!() };
        assert_eq!(r.create_urr[0].measurement_period, Some(MeasurementPeriod(300)));
        cp.on_pfcp(1, &answer(&est, 1)).unwrap();
        let report = |seq, seid, ul| {
            enc(&Message::SessionReportRequest(
                SessionHeader { seid, seq, priority: None },
                SessionReportRequest {
                    report_type: ReportType(ReportType::USAR),
                    usage_report: vec![UsageReport {
                        urr_id: UrrId(1),
                        ur_seqn: UrSeqn(0),
                        usage_report_trigger: Triggers(Triggers::PERIO),
                        start_time: Some(StartTime(10)),
                        end_time: Some(EndTime(20)),
                        volume_measurement: Some(VolumeMeasurement {
                            ul_bytes: Some(ul),
                            dl_bytes: Some(5),
                            ul_pkts: Some(2),
                            dl_pkts: Some(1),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    unknown: vec![],
                },
            ))
        };
        let o = cp.on_pfcp(1, &report(40, r.cp_f_seid.seid, 1400)).unwrap();
        let Message::SessionReportResponse(h, resp) = decode(&o.pfcp[0].1).unwrap() else { panic!() };
        assert_eq!((h.seid, h.seq, resp.cause), (1001, 40, Cause::REQUEST_ACCEPTED));
        // Sent again, grown (its answer lost): replaces the record.
        cp.on_pfcp(1, &report(41, r.cp_f_seid.seid, 2800)).unwrap();
        // Unknown session: cause 65, nothing recorded.
        let o = cp.on_pfcp(1, &report(42, 999, 1)).unwrap();
        let Message::SessionReportResponse(_, resp) = decode(&o.pfcp[0].1).unwrap() else { panic!() };
        assert_eq!(resp.cause, Cause::SESSION_CONTEXT_NOT_FOUND);
        assert_eq!((cp.counters.reports, cp.counters.reports_unknown, cp.accounting().records().unwrap()), (2, 1, 1));
        let m = cp.metrics().unwrap();
        let line = "fastpath_bng_subscriber_bytes_total{up=\"1\",port=\"2\",svlan=\"100\",cvlan=\"1\",mac=\"02:00:00:00:00:01\",direction=\"up\"} 2800";
        assert!(m.contains(line), "{m}");
        assert!(m.contains("fastpath_bng_user_plane_sessions{up=\"1\"} 1"), "{m}");
        assert!(m.contains("fastpath_bng_usage_reports_total 2"), "{m}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Whatever comes from a user plane's address — every sample message, our own requests
    /// answered, and mutations of them (bit flips, truncations, splices) — is answered, counted
    /// or refused, never a panic, and leaves the control plane working.
    #[test]
    fn no_pfcp_datagram_panics_the_control_plane() {
        let dir = tmp("fuzz");
        let mut cp = ControlPlane::open(&params(&dir, &[1]), 0).unwrap();
        associate(&mut cp, 0);
        let sub = Identity { port: 0, svlan: 100, cvlan: 3, mac: [2, 0, 0, 0, 0, 3] };
        let (_, (_, est)) = dora(&mut cp, 1, &sub, 0);
        let mut seeds: Vec<Vec<u8>> = fastpath_pfcp::samples::all().iter().map(enc).collect();
        seeds.push(answer(&est, 1));
        // The sample usage report, for our session.
        let Message::SessionEstablishmentRequest(_, r) = decode(&est).unwrap() else { panic!() };
        let report = fastpath_pfcp::samples::all().into_iter().find(|m| m.msg_type() == 56).unwrap();
        let Message::SessionReportRequest(h, body) = report else { panic!() };
        seeds.push(enc(&Message::SessionReportRequest(SessionHeader { seid: r.cp_f_seid.seid, ..h }, body)));
        seeds.push(answer_with(&cp.tick(5).unwrap().pfcp[0].1, 0, 8, false));
        let iters: u64 = std::env::var("FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
        let mut x: u64 = std::env::var("FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x9e37_79b9_7f4a_7c15);
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..iters {
            let mut d = seeds[(next() % seeds.len() as u64) as usize].clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() % (d.len() as u64 + 1)) as usize;
                match next() % 5 {
                    0 if at < d.len() => d[at] ^= 1 << (next() % 8),
                    1 if at < d.len() => d[at] = next() as u8,
                    2 => d.truncate(at),
                    3 => d.insert(at.min(d.len()), next() as u8),
                    _ => {
                        let other = &seeds[(next() % seeds.len() as u64) as usize];
                        let from = (next() % (other.len() as u64)) as usize;
                        d.splice(at.min(d.len())..at.min(d.len()), other[from..].iter().copied());
                    }
                }
            }
            let up = if next() % 8 == 0 { 2 } else { 1 };
            cp.on_pfcp(up, &d).unwrap();
            if next() % 64 == 0 {
                cp.tick(next() % 1000).unwrap();
            }
        }
        assert!(cp.counters.reports > 0 && cp.counters.usage_records > 0, "reports reached the store: {:?}", cp.counters);
        // Still working: the metrics render and a lease is still served.
        assert!(cp.metrics().unwrap().contains("fastpath_bng_pfcp_bad_total"));
        let other = Identity { cvlan: 4, mac: [2, 0, 0, 0, 0, 4], ..sub };
        let o = cp.on_gtpu(&gpdu(&other, MessageType::DISCOVER, None), UP1, 0).unwrap();
        assert_eq!(reply(&o).1.options.message_type, Some(MessageType::OFFER));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn echo_and_junk() {
        let dir = tmp("junk");
        let mut cp = ControlPlane::open(&params(&dir, &[1]), 0).unwrap();
        let o = cp.on_gtpu(&gtpu::echo_request(5), UP1, 0).unwrap();
        assert_eq!(o.gtpu[0].0, UP1, "to the sender");
        assert_eq!(Gtpu::parse(&o.gtpu[0].1).unwrap().seq, Some(5));
        assert!(cp.on_gtpu(&[1, 2, 3], UP1, 0).unwrap().gtpu.is_empty());
        let mut d = Vec::new();
        gtpu::emit_gpdu(gtpu::cpri_teid(2, 1), &[0; 60], &mut d).unwrap();
        cp.on_gtpu(&d, UP1, 0).unwrap();
        d.clear();
        gtpu::emit_gpdu(gtpu::cpri_teid(1, 1), &[0; 60], &mut d).unwrap();
        cp.on_gtpu(&d, UP1, 0).unwrap();
        assert_eq!((cp.counters.echo, cp.counters.gtpu_bad, cp.counters.wrong_up, cp.counters.not_dhcp), (1, 1, 1, 1));
        // PFCP from no user plane of ours, and junk from one.
        cp.on_pfcp(9, &[0x20, 1, 0, 4, 0, 0, 1, 0]).unwrap();
        cp.on_pfcp(1, &[1, 2, 3]).unwrap();
        assert_eq!(cp.counters.pfcp_bad, 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
