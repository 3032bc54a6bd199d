//! The control plane of one user plane, as `fastpath bng-cp` runs it: DHCP from the CPRi,
//! leases in the store, sessions over PFCP. Pure apart from the store: datagrams in, datagrams
//! out, time passed in as `now_s` (UNIX seconds, so stored expiries mean the same after a
//! restart).
//!
//! ```text
//!  GTP-U G-PDU (TEID = UP << 16 | port) ─▶ cpri::parse_frame ─▶ dhcp::server ─▶ reply frame ─▶ G-PDU back
//!                                                                  │ lease events
//!                                                                  ▼
//!                                               store (leases) ─▶ pfcp_cp ─▶ PFCP requests to the UP
//!                                                                  ▲ responses: sessions table
//! ```
//!
//! **Restart.** [`ControlPlane::open`] restores the leases (the server's own restore) and, from
//! the `pfcp_session` table of the same SQLite file, every session the user plane accepted with
//! its CP and UP SEIDs. After the association (a user plane keeps a re-associating control
//! plane's sessions), nothing is re-created: a session whose lease is still there is simply
//! known again, so its later release deletes it with the right SEID. A session whose lease
//! expired while we were down is deleted; a lease with no accepted session (we stopped between
//! the ACK and the answer) is established.
//!
//! Control thread only.

use std::net::Ipv4Addr;
use std::path::Path;

use fastpath_pfcp::gtpu::{self, Gtpu, MessageType};
use rusqlite::{params, Connection};

use crate::cpri::{self, NotDhcp};
use crate::dhcp::server::{ConfigError, Event, EventKind, Identity, Outcome as Dhcp, Server, ServerConfig};
use crate::pfcp_cp::{CpConfig, Outcome, PfcpCp};
use crate::store::{Store, StoreError};

/// What the process is told.
#[derive(Debug, Clone)]
pub struct Params {
    /// The DHCP server: pools, server id (the gateway address replies come from).
    pub server: ServerConfig,
    /// The gateway MAC replies come from.
    pub gw_mac: [u8; 6],
    /// The SQLite store.
    pub store: std::path::PathBuf,
    /// The PFCP side (our node address, rates).
    pub pfcp: CpConfig,
    /// The user plane's number in the TEID's high half.
    pub up_id: u16,
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
    /// The session table.
    #[error("session store: {0}")]
    Sessions(#[from] rusqlite::Error),
}

/// What to send, and what happened worth a line in the log.
#[derive(Debug, Default)]
pub struct Out {
    /// GTP-U datagrams for the user plane's CPRi address.
    pub gtpu: Vec<Vec<u8>>,
    /// PFCP datagrams for the user plane's PFCP address.
    pub pfcp: Vec<Vec<u8>>,
    /// Log lines.
    pub notes: Vec<String>,
}

/// Counters, for `--stats` lines and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// G-PDUs taken in.
    pub gpdu_in: u64,
    /// G-PDUs sent (DHCP replies).
    pub gpdu_out: u64,
    /// Datagrams that are not GTP-U, or a message type we do not take.
    pub gtpu_bad: u64,
    /// G-PDUs with another user plane's TEID.
    pub wrong_up: u64,
    /// Punted frames that are not a subscriber's DHCP message.
    pub not_dhcp: u64,
    /// DHCP messages the server ignored.
    pub dhcp_ignored: u64,
    /// Echo requests answered.
    pub echo: u64,
    /// Sessions established.
    pub established: u64,
    /// Sessions deleted.
    pub deleted: u64,
    /// Session requests refused.
    pub rejected: u64,
    /// PFCP datagrams that answer nothing of ours.
    pub pfcp_bad: u64,
}

/// The control plane of one user plane.
#[derive(Debug)]
pub struct ControlPlane {
    server: Server,
    store: Store,
    sessions: Connection,
    pfcp: PfcpCp,
    gw_mac: [u8; 6],
    server_ip: Ipv4Addr,
    up_id: u16,
    /// Lease events waiting for the association.
    queued: Vec<Event>,
    /// Counters.
    pub counters: Counters,
}

impl ControlPlane {
    /// Opens the store, restores leases and sessions (module doc).
    ///
    /// # Errors
    /// [`OpenError`].
    pub fn open(p: &Params, now_s: u64) -> Result<ControlPlane, OpenError> {
        let mut server = p.server.build().map_err(OpenError::Config)?;
        let store = Store::open(&p.store)?;
        let snap = store.load()?;
        server.restore(&snap.leases, &snap.quarantined, now_s);
        let sessions = open_sessions(&p.store)?;
        let mut pfcp = PfcpCp::new(p.pfcp.clone());
        let mut queued = Vec::new();
        let saved = load_sessions(&sessions)?;
        for (id, ip, cp_seid, up_seid) in &saved {
            pfcp.restore(*id, *ip, *cp_seid, *up_seid);
            if server.lease_of(id).is_none_or(|l| l.ip != *ip) {
                queued.push(Event { kind: EventKind::Expired, identity: *id, ip: *ip, expires_s: now_s });
            }
        }
        for l in server.leases() {
            if pfcp.session(&l.identity).is_none() {
                queued.push(Event { kind: EventKind::Bound, identity: l.identity, ip: l.ip, expires_s: l.expires_s });
            }
        }
        let server_ip = p.server.server_id;
        Ok(ControlPlane {
            server,
            store,
            sessions,
            pfcp,
            gw_mac: p.gw_mac,
            server_ip,
            up_id: p.up_id,
            queued,
            counters: Counters::default(),
        })
    }

    /// The Association Setup Request to send first (and again until it is answered).
    pub fn association_setup(&mut self) -> Vec<u8> {
        self.pfcp.association_setup()
    }

    /// A Heartbeat Request.
    pub fn heartbeat(&mut self) -> Vec<u8> {
        self.pfcp.heartbeat()
    }

    /// True once the user plane accepted the association.
    pub fn is_associated(&self) -> bool {
        self.pfcp.is_associated()
    }

    /// The DHCP server (leases, for tests and `show`).
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Sessions the user plane accepted.
    pub fn established(&self) -> usize {
        self.pfcp.established()
    }

    /// Takes one datagram from the CPRi socket.
    ///
    /// # Errors
    /// The store failed: the process must stop rather than lose a lease.
    pub fn on_gtpu(&mut self, buf: &[u8], now_s: u64) -> Result<Out, StoreError> {
        let mut out = Out::default();
        let g = match Gtpu::parse(buf) {
            Ok(g) => g,
            Err(_) => {
                self.counters.gtpu_bad += 1;
                return Ok(out);
            }
        };
        match g.msg_type {
            MessageType::ECHO_REQUEST => {
                self.counters.echo += 1;
                out.gtpu.push(gtpu::echo_response(g.seq.unwrap_or(0)));
                return Ok(out);
            }
            MessageType::G_PDU => {}
            _ => {
                self.counters.gtpu_bad += 1;
                return Ok(out);
            }
        }
        self.counters.gpdu_in += 1;
        let (up, port) = gtpu::cpri_port(g.teid);
        if up != self.up_id {
            self.counters.wrong_up += 1;
            return Ok(out);
        }
        let p = match cpri::parse_frame(g.payload, u32::from(port)) {
            Ok(p) => p,
            Err(NotDhcp::Truncated | NotDhcp::NotQinQ | NotDhcp::NotDhcp | NotDhcp::Malformed) => {
                self.counters.not_dhcp += 1;
                return Ok(out);
            }
        };
        match self.server.handle(&p.msg, p.identity, now_s) {
            Dhcp::Reply(r) => {
                if let Some(frame) = cpri::build_reply(&p.identity, &r, self.gw_mac, self.server_ip) {
                    let mut d = Vec::with_capacity(frame.len() + gtpu::HEADER_LEN);
                    if gtpu::emit_gpdu(g.teid, &frame, &mut d).is_ok() {
                        self.counters.gpdu_out += 1;
                        out.gtpu.push(d);
                    }
                }
            }
            Dhcp::Done => {}
            Dhcp::Ignored(_) => self.counters.dhcp_ignored += 1,
        }
        self.events(&mut out)?;
        Ok(out)
    }

    /// Ends leases, offers and quarantines due by `now_s` (their sessions are deleted).
    ///
    /// # Errors
    /// The store failed.
    pub fn tick(&mut self, now_s: u64) -> Result<Out, StoreError> {
        let mut out = Out::default();
        self.server.expire(now_s);
        self.events(&mut out)?;
        self.store.prune(now_s)?;
        Ok(out)
    }

    /// Lease events: into the store (before anything is sent), then to PFCP (or the queue).
    fn events(&mut self, out: &mut Out) -> Result<(), StoreError> {
        let evs = self.server.drain_events();
        self.store.apply(&evs)?;
        for e in evs {
            out.notes.push(format!("lease {:?} {} {}", e.kind, e.identity.circuit_id(), e.ip));
            if self.pfcp.is_associated() {
                out.pfcp.extend(self.pfcp.on_event(&e));
            } else {
                self.queued.push(e);
            }
        }
        Ok(())
    }

    /// Takes one datagram from the PFCP socket.
    ///
    /// # Errors
    /// The session table could not be written.
    pub fn on_pfcp(&mut self, buf: &[u8]) -> Result<Out, rusqlite::Error> {
        let mut out = Out::default();
        let (o, next) = match self.pfcp.on_response(buf) {
            Ok(x) => x,
            Err(e) => {
                self.counters.pfcp_bad += 1;
                out.notes.push(format!("PFCP: {e}"));
                return Ok(out);
            }
        };
        out.pfcp.extend(next);
        match o {
            Outcome::Associated { cause } => {
                out.notes.push(format!("PFCP association: cause {cause}"));
                if cause == 1 {
                    for e in std::mem::take(&mut self.queued) {
                        out.pfcp.extend(self.pfcp.on_event(&e));
                    }
                }
            }
            Outcome::Established { identity, up_seid } => {
                self.counters.established += 1;
                if let Some((cp_seid, ip, _)) = self.pfcp.session(&identity) {
                    self.sessions.execute(
                        "INSERT OR REPLACE INTO pfcp_session (port, svlan, cvlan, mac, ip, cp_seid, up_seid)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                        params![
                            identity.port,
                            identity.svlan,
                            identity.cvlan,
                            &identity.mac[..],
                            i64::from(u32::from(ip)),
                            cp_seid as i64,
                            up_seid as i64
                        ],
                    )?;
                }
                out.notes.push(format!("session up {} (UP SEID {up_seid:#x})", identity.circuit_id()));
            }
            Outcome::Deleted { identity, usage } => {
                self.counters.deleted += 1;
                self.sessions.execute(
                    "DELETE FROM pfcp_session WHERE port = ?1 AND svlan = ?2 AND cvlan = ?3 AND mac = ?4",
                    params![identity.port, identity.svlan, identity.cvlan, &identity.mac[..]],
                )?;
                out.notes.push(format!("session down {} usage {usage:?}", identity.circuit_id()));
            }
            Outcome::Rejected { identity, request, cause, offending_ie } => {
                self.counters.rejected += 1;
                out.notes.push(format!(
                    "PFCP request type {request} for {} refused: cause {cause}, offending IE {offending_ie:?}",
                    identity.circuit_id()
                ));
            }
            Outcome::Heartbeat => {}
        }
        Ok(out)
    }
}

fn open_sessions(path: &Path) -> Result<Connection, rusqlite::Error> {
    let db = Connection::open(path)?;
    db.pragma_update(None, "synchronous", "FULL")?;
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS pfcp_session (
             port INTEGER NOT NULL, svlan INTEGER NOT NULL, cvlan INTEGER NOT NULL, mac BLOB NOT NULL,
             ip INTEGER NOT NULL, cp_seid INTEGER NOT NULL, up_seid INTEGER NOT NULL,
             PRIMARY KEY (port, svlan, cvlan, mac));",
    )?;
    Ok(db)
}

type Saved = (Identity, Ipv4Addr, u64, u64);

fn load_sessions(db: &Connection) -> Result<Vec<Saved>, rusqlite::Error> {
    let mut st = db.prepare("SELECT port, svlan, cvlan, mac, ip, cp_seid, up_seid FROM pfcp_session")?;
    let rows = st.query_map([], |r| {
        Ok((
            r.get::<_, u32>(0)?,
            r.get::<_, u16>(1)?,
            r.get::<_, u16>(2)?,
            r.get::<_, Vec<u8>>(3)?,
            r.get::<_, i64>(4)?,
            r.get::<_, i64>(5)?,
            r.get::<_, i64>(6)?,
        ))
    })?;
    let mut v = Vec::new();
    for row in rows {
        let (port, svlan, cvlan, mac, ip, cp, up) = row?;
        // A record that does not decode is skipped: its lease (if any) is established again.
        let (Ok(mac), Ok(ip)) = (<[u8; 6]>::try_from(mac), u32::try_from(ip)) else { continue };
        v.push((Identity { port, svlan, cvlan, mac }, Ipv4Addr::from(ip), cp as u64, up as u64));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]
    use super::*;
    use crate::dhcp::server::PoolConfig;
    use crate::dhcp::wire::{DhcpRepr, MessageType, Op};
    use fastpath_pfcp::ie::*;
    use fastpath_pfcp::message::*;
    use fastpath_pfcp::{decode, encode, Message, NodeHeader, SessionHeader};

    fn params(dir: &Path) -> Params {
        let gw = Ipv4Addr::new(100, 64, 0, 1);
        Params {
            server: ServerConfig {
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
            },
            gw_mac: [2, 0xfa, 0, 0, 0, 1],
            store: dir.join("cp.db"),
            pfcp: CpConfig::new(Ipv4Addr::LOCALHOST),
            up_id: 1,
        }
    }

    fn enc(m: &Message) -> Vec<u8> {
        let mut v = Vec::new();
        encode(m, &mut v).unwrap();
        v
    }

    /// A user plane that accepts everything, with UP SEID 1000 + n.
    fn answer(req: &[u8], n: u64) -> Vec<u8> {
        let node_id = NodeId::Ipv4(Ipv4Addr::LOCALHOST);
        match decode(req).unwrap() {
            Message::AssociationSetupRequest(h, _) => enc(&Message::AssociationSetupResponse(
                NodeHeader { seq: h.seq },
                AssociationSetupResponse { node_id, cause: Cause::REQUEST_ACCEPTED, ..Default::default() },
            )),
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

    fn gpdu(id: &Identity, ty: MessageType, req_ip: Option<Ipv4Addr>) -> Vec<u8> {
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
        gtpu::emit_gpdu(gtpu::cpri_teid(1, id.port as u16), &cpri::client_frame(id, &m), &mut d).unwrap();
        d
    }

    fn reply(out: &Out) -> (Identity, DhcpRepr) {
        let g = Gtpu::parse(&out.gtpu[0]).unwrap();
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

    #[test]
    fn dora_makes_a_session_that_survives_a_restart_and_release_deletes_it() {
        let dir = std::env::temp_dir().join(format!("fastpath-bng-cp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = params(&dir);
        let sub = Identity { port: 3, svlan: 100, cvlan: 7, mac: [2, 0, 0, 0, 0, 9] };
        let mut cp = ControlPlane::open(&p, 1000).unwrap();
        let a = cp.association_setup();
        assert!(cp.on_pfcp(&answer(&a, 0)).unwrap().pfcp.is_empty());
        let o = cp.on_gtpu(&gpdu(&sub, MessageType::DISCOVER, None), 1000).unwrap();
        let (id, offer) = reply(&o);
        assert_eq!((id, offer.options.message_type), (sub, Some(MessageType::OFFER)));
        let o = cp.on_gtpu(&gpdu(&sub, MessageType::REQUEST, Some(offer.yiaddr)), 1000).unwrap();
        assert_eq!(reply(&o).1.options.message_type, Some(MessageType::ACK));
        assert_eq!(o.pfcp.len(), 1, "the bound lease is an establishment");
        cp.on_pfcp(&answer(&o.pfcp[0], 1)).unwrap();
        assert_eq!(cp.established(), 1);
        drop(cp);

        // Restart: the lease and the session are back; nothing is established again.
        let mut cp = ControlPlane::open(&p, 1010).unwrap();
        assert_eq!(cp.server().lease_of(&sub).map(|l| l.ip), Some(offer.yiaddr));
        let a = cp.association_setup();
        assert!(cp.on_pfcp(&answer(&a, 0)).unwrap().pfcp.is_empty(), "no re-creation");
        let o = cp.on_gtpu(&gpdu(&sub, MessageType::RELEASE, Some(offer.yiaddr)), 1020).unwrap();
        assert_eq!(o.pfcp.len(), 1, "the release is a deletion");
        cp.on_pfcp(&answer(&o.pfcp[0], 1)).unwrap();
        assert_eq!((cp.established(), cp.counters.deleted), (0, 1));
        drop(cp);
        let cp = ControlPlane::open(&p, 1030).unwrap();
        assert!(cp.server().leases().is_empty());
        assert!(cp.queued.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn echo_and_junk() {
        let dir = std::env::temp_dir().join(format!("fastpath-bng-cp-junk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cp = ControlPlane::open(&params(&dir), 0).unwrap();
        let o = cp.on_gtpu(&gtpu::echo_request(5), 0).unwrap();
        assert_eq!(Gtpu::parse(&o.gtpu[0]).unwrap().seq, Some(5));
        assert!(cp.on_gtpu(&[1, 2, 3], 0).unwrap().gtpu.is_empty());
        let mut d = Vec::new();
        gtpu::emit_gpdu(gtpu::cpri_teid(2, 1), &[0; 60], &mut d).unwrap();
        cp.on_gtpu(&d, 0).unwrap();
        d.clear();
        gtpu::emit_gpdu(gtpu::cpri_teid(1, 1), &[0; 60], &mut d).unwrap();
        cp.on_gtpu(&d, 0).unwrap();
        assert_eq!((cp.counters.echo, cp.counters.gtpu_bad, cp.counters.wrong_up, cp.counters.not_dhcp), (1, 1, 1, 1));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
