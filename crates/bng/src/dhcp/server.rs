//! The DHCPv4 server state machine (RFC 2131 §4.3): pure, with no sockets and no clock.
//!
//! The caller passes each decoded client message with the subscriber's [`Identity`] (where it
//! arrived: access port, S-VLAN, C-VLAN, and its `chaddr`) and the time `now_s` (seconds on a
//! clock that survives restarts, e.g. Unix time), and sends the [`Reply`] it gets back to the
//! [`Destination`] named. Lease changes come out as [`Event`]s, drained with
//! [`Server::drain_events`], for the store and for the session layer that installs and removes
//! user-plane sessions.
//!
//! ```text
//!  DISCOVER ──► OFFER (address held for offer_hold_s)
//!  REQUEST  ──► selecting    (server id = ours, requested IP = our offer) ──► ACK, Bound
//!               init-reboot  (requested IP, no server id, ciaddr 0)       ──► ACK or NAK
//!               renewing /   (ciaddr set, no server id, no requested IP)  ──► ACK, Renewed, or NAK
//!               rebinding
//!  RELEASE  ──► lease removed, Released            DECLINE ──► address quarantined, Declined
//!  INFORM   ──► ACK with configuration, no lease   expire(now_s) ──► Expired
//! ```
//!
//! A subscriber is its line, not its client identifier: the identity is (access port, S-VLAN,
//! C-VLAN, chaddr), so a client that changes its client-id on the same line keeps its address,
//! and the same MAC on two lines gets two leases. The server is authoritative for its pools: a
//! renewal or init-reboot for an address that is not this subscriber's current lease gets a NAK.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use fastpath_packet::hdr::Mac;

use super::wire::{DhcpRepr, MessageType, Op, RelayAgentInfo, FLAG_BROADCAST};

/// A subscriber: the line it arrives on and its hardware address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    /// Access port number on the user plane.
    pub port: u32,
    /// Outer (service) VLAN id, 0 when untagged.
    pub svlan: u16,
    /// Inner (customer) VLAN id, 0 when single-tagged or untagged.
    pub cvlan: u16,
    /// Client hardware address (`chaddr`).
    pub mac: Mac,
}

impl Identity {
    /// Option 82 circuit-id: `"<port>/<svlan>/<cvlan>"` in decimal ASCII, e.g. `"3/100/42"`.
    pub fn circuit_id(&self) -> String {
        format!("{}/{}/{}", self.port, self.svlan, self.cvlan)
    }

    /// Option 82 remote-id: the MAC as lower-case hex with colons, e.g. `"02:00:00:00:00:01"`.
    pub fn remote_id(&self) -> String {
        let m = self.mac;
        format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }

    /// Relay agent information carrying [`Identity::circuit_id`] and [`Identity::remote_id`].
    pub fn relay_agent_info(&self) -> RelayAgentInfo {
        RelayAgentInfo {
            circuit_id: Some(self.circuit_id().into_bytes()),
            remote_id: Some(self.remote_id().into_bytes()),
            other: Vec::new(),
        }
    }

    /// The identity in a relayed message's option 82, as [`Identity::relay_agent_info`] writes
    /// it. `None` when the circuit-id is not `port/svlan/cvlan` in decimal.
    pub fn from_relay_agent_info(info: &RelayAgentInfo, mac: Mac) -> Option<Identity> {
        let text = std::str::from_utf8(info.circuit_id.as_deref()?).ok()?;
        let mut it = text.split('/');
        let port = it.next()?.parse().ok()?;
        let svlan = it.next()?.parse().ok()?;
        let cvlan = it.next()?.parse().ok()?;
        if it.next().is_some() {
            return None;
        }
        Some(Identity { port, svlan, cvlan, mac })
    }
}

/// One address pool: a range, the subnet it sits in and what clients are told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// A name for errors and logs (the service).
    pub name: String,
    /// S-VLANs served from this pool; empty means "every S-VLAN no other pool names".
    pub svlans: Vec<u16>,
    /// First address handed out.
    pub first: Ipv4Addr,
    /// Last address handed out (inclusive).
    pub last: Ipv4Addr,
    /// Subnet mask (option 1).
    pub mask: Ipv4Addr,
    /// Default gateway (option 3); never handed out.
    pub gateway: Ipv4Addr,
    /// DNS servers (option 6).
    pub dns: Vec<Ipv4Addr>,
    /// Lease time (option 51), seconds. T1 is half of it, T2 seven eighths (RFC 2131 §4.4.5).
    pub lease_time_s: u32,
}

/// Server configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Server identifier (option 54): an address of ours the clients can reach.
    pub server_id: Ipv4Addr,
    pub pools: Vec<PoolConfig>,
    /// How long an offered address is held for the client, seconds.
    pub offer_hold_s: u64,
    /// How long a declined address stays out of use, seconds.
    pub decline_quarantine_s: u64,
}

/// A configuration the server refuses, naming the pool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("pool \"{0}\": first address is after last")]
    EmptyRange(String),
    #[error("pool \"{0}\": range and gateway are not in one subnet of the mask")]
    OutsideSubnet(String),
    #[error("pool \"{0}\": mask is not contiguous")]
    BadMask(String),
    #[error("pool \"{0}\": lease time must be at least 2 s")]
    ShortLease(String),
    #[error("pools \"{0}\" and \"{1}\" overlap")]
    Overlap(String, String),
    #[error("pools \"{0}\" and \"{1}\" both serve S-VLAN {2} (or both are the default)")]
    DuplicateSvlan(String, String, u16),
    #[error("no pools")]
    NoPools,
}

/// What happened to a lease, for the store and the session layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// A new lease (ACK after selecting or init-reboot of an address with no active lease). A
    /// subscriber that moves to another address gets Released (or Expired) for the old one first.
    Bound,
    /// An active lease extended (renewing, rebinding, or init-reboot of the same address).
    Renewed,
    /// The client released it.
    Released,
    /// Its time ran out.
    Expired,
    /// The client declined the address: it is quarantined until `expires_s`. Raised also for an
    /// address that was only offered (so the quarantine is stored); it ends a lease only when
    /// the subscriber held one on that address.
    Declined,
}

/// A lease change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub identity: Identity,
    pub ip: Ipv4Addr,
    /// The lease's (or quarantine's) end, on the caller's clock; `now_s` for Released/Expired.
    pub expires_s: u64,
}

/// A lease the server holds (also the record the store keeps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub identity: Identity,
    pub ip: Ipv4Addr,
    pub expires_s: u64,
}

/// Where a reply goes (RFC 2131 §4.1, "If the 'giaddr' field ... is nonzero").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// To the relay agent at giaddr, server port 67.
    Relay(Ipv4Addr),
    /// To the client's configured address (ciaddr), port 68.
    Unicast(Ipv4Addr),
    /// To 255.255.255.255 port 68.
    Broadcast,
    /// To yiaddr at the client's MAC, port 68, without ARP (the client has no address yet).
    /// A sender that cannot write the ARP entry or the frame itself may broadcast instead.
    UnicastToMac(Ipv4Addr, Mac),
}

/// A message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub msg: DhcpRepr,
    pub dst: Destination,
}

/// Why a client message got no reply, for counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// Not a BOOTREQUEST, or no message type.
    NotARequest,
    /// A message type a server does not take (OFFER, ACK, ...).
    UnexpectedType,
    /// The client selected another server.
    OtherServer,
    /// No free address in the subscriber's pool.
    PoolExhausted,
    /// No pool serves the subscriber's S-VLAN.
    NoPool,
    /// An init-reboot from a client we have no record of (RFC 2131 §4.3.2: "MUST remain silent").
    UnknownClient,
    /// A RELEASE or DECLINE for an address that is not this subscriber's.
    NotTheirs,
}

/// What [`Server::handle`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Boxed: a reply is ~540 bytes and most outcomes are not replies.
    Reply(Box<Reply>),
    /// Handled with no reply (RELEASE, DECLINE).
    Done,
    Ignored(Ignored),
}

#[derive(Debug, Clone)]
struct Pool {
    cfg: PoolConfig,
    first: u32,
    last: u32,
    /// Where the search for a free address starts: just after the last one handed out, so
    /// allocation does not rescan the taken start of the range each time (next-fit).
    next: u32,
}

/// The server. Control thread only.
#[derive(Debug)]
pub struct Server {
    server_id: Ipv4Addr,
    offer_hold_s: u64,
    quarantine_s: u64,
    pools: Vec<Pool>,
    /// Bound leases by address.
    leases: HashMap<Ipv4Addr, Lease>,
    /// Bound lease address by subscriber.
    by_identity: HashMap<Identity, Ipv4Addr>,
    /// Offered address and the end of its hold, by subscriber.
    offers: HashMap<Identity, (Ipv4Addr, u64)>,
    /// The subscriber each offered address is held for (the reverse of `offers`).
    offered: HashMap<Ipv4Addr, Identity>,
    /// Declined addresses and the end of their quarantine.
    quarantine: HashMap<Ipv4Addr, u64>,
    events: Vec<Event>,
}

fn mask_len(mask: Ipv4Addr) -> Option<u32> {
    let m = u32::from(mask);
    let ones = m.leading_ones();
    (m.checked_shl(ones).unwrap_or(0) == 0).then_some(ones)
}

impl ServerConfig {
    /// Checks the configuration and builds a server with no leases.
    ///
    /// # Errors
    /// The first problem found, naming the pool.
    pub fn build(&self) -> Result<Server, ConfigError> {
        if self.pools.is_empty() {
            return Err(ConfigError::NoPools);
        }
        let mut pools: Vec<Pool> = Vec::new();
        for p in &self.pools {
            let (first, last) = (u32::from(p.first), u32::from(p.last));
            if first > last {
                return Err(ConfigError::EmptyRange(p.name.clone()));
            }
            mask_len(p.mask).ok_or_else(|| ConfigError::BadMask(p.name.clone()))?;
            let m = u32::from(p.mask);
            if first & m != last & m || u32::from(p.gateway) & m != first & m {
                return Err(ConfigError::OutsideSubnet(p.name.clone()));
            }
            if p.lease_time_s < 2 {
                return Err(ConfigError::ShortLease(p.name.clone()));
            }
            for q in &pools {
                if first <= q.last && q.first <= last {
                    return Err(ConfigError::Overlap(q.cfg.name.clone(), p.name.clone()));
                }
                let dup = if p.svlans.is_empty() {
                    q.cfg.svlans.is_empty().then_some(0)
                } else {
                    p.svlans.iter().copied().find(|s| q.cfg.svlans.contains(s))
                };
                if let Some(s) = dup {
                    return Err(ConfigError::DuplicateSvlan(q.cfg.name.clone(), p.name.clone(), s));
                }
            }
            pools.push(Pool { cfg: p.clone(), first, last, next: first });
        }
        Ok(Server {
            server_id: self.server_id,
            offer_hold_s: self.offer_hold_s,
            quarantine_s: self.decline_quarantine_s,
            pools,
            leases: HashMap::new(),
            by_identity: HashMap::new(),
            offers: HashMap::new(),
            offered: HashMap::new(),
            quarantine: HashMap::new(),
            events: Vec::new(),
        })
    }
}

impl Server {
    /// Restores leases and quarantined addresses (from the store after a restart). Records
    /// already past `now_s`, or outside every pool, are skipped; no events are raised.
    pub fn restore(&mut self, leases: &[Lease], quarantined: &[(Ipv4Addr, u64)], now_s: u64) {
        for l in leases {
            if l.expires_s > now_s && self.pool_of_ip(l.ip).is_some() {
                if let Some(old) = self.by_identity.insert(l.identity, l.ip) {
                    self.leases.remove(&old);
                }
                self.leases.insert(l.ip, *l);
            }
        }
        for &(ip, until) in quarantined {
            if until > now_s {
                self.quarantine.insert(ip, until);
            }
        }
    }

    /// Every bound lease, in address order.
    pub fn leases(&self) -> Vec<Lease> {
        let mut v: Vec<Lease> = self.leases.values().copied().collect();
        v.sort_by_key(|l| l.ip);
        v
    }

    /// The subscriber's bound lease.
    pub fn lease_of(&self, id: &Identity) -> Option<Lease> {
        self.by_identity.get(id).and_then(|ip| self.leases.get(ip)).copied()
    }

    /// Quarantined addresses and the end of their quarantine, in address order.
    pub fn quarantined(&self) -> Vec<(Ipv4Addr, u64)> {
        let mut v: Vec<_> = self.quarantine.iter().map(|(a, t)| (*a, *t)).collect();
        v.sort();
        v
    }

    /// Takes the events raised since the last call, oldest first.
    pub fn drain_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Ends leases, offers and quarantines whose time is up (`<= now_s`); an ended lease raises
    /// [`EventKind::Expired`].
    pub fn expire(&mut self, now_s: u64) {
        let mut gone: Vec<Lease> = self.leases.values().filter(|l| l.expires_s <= now_s).copied().collect();
        gone.sort_by_key(|l| l.ip);
        for l in gone {
            self.drop_lease(l.ip);
            self.events.push(Event { kind: EventKind::Expired, identity: l.identity, ip: l.ip, expires_s: now_s });
        }
        let stale: Vec<Identity> = self.offers.iter().filter(|(_, (_, until))| *until <= now_s).map(|(id, _)| *id).collect();
        for id in stale {
            self.withdraw_offer(&id);
        }
        self.quarantine.retain(|_, until| *until > now_s);
    }

    fn hold_offer(&mut self, id: Identity, ip: Ipv4Addr, until_s: u64) {
        self.withdraw_offer(&id);
        // An earlier holder's offer of this address ran out (or it would not be free).
        if let Some(old) = self.offered.get(&ip).copied() {
            self.withdraw_offer(&old);
        }
        self.offers.insert(id, (ip, until_s));
        self.offered.insert(ip, id);
    }

    fn withdraw_offer(&mut self, id: &Identity) {
        if let Some((ip, _)) = self.offers.remove(id) {
            if self.offered.get(&ip) == Some(id) {
                self.offered.remove(&ip);
            }
        }
    }

    fn drop_lease(&mut self, ip: Ipv4Addr) {
        if let Some(l) = self.leases.remove(&ip) {
            self.by_identity.remove(&l.identity);
        }
    }

    fn pool_of_ip(&self, ip: Ipv4Addr) -> Option<usize> {
        let a = u32::from(ip);
        self.pools.iter().position(|p| p.first <= a && a <= p.last)
    }

    fn pool_of(&self, id: &Identity) -> Option<usize> {
        self.pools.iter().position(|p| p.cfg.svlans.contains(&id.svlan)).or_else(|| self.pools.iter().position(|p| p.cfg.svlans.is_empty()))
    }

    /// True when `ip` is in pool `pool` and nobody else holds, is offered, or has declined it.
    fn free_for(&self, pool: usize, ip: Ipv4Addr, id: &Identity, now_s: u64) -> bool {
        let Some(p) = self.pools.get(pool) else { return false };
        let a = u32::from(ip);
        if a < p.first || a > p.last || ip == p.cfg.gateway || ip == self.server_id {
            return false;
        }
        if self.quarantine.get(&ip).is_some_and(|&t| t > now_s) {
            return false;
        }
        if self.leases.get(&ip).is_some_and(|l| l.identity != *id && l.expires_s > now_s) {
            return false;
        }
        match self.offered.get(&ip) {
            Some(holder) if holder != id => !self.offers.get(holder).is_some_and(|&(oip, until)| oip == ip && until > now_s),
            _ => true,
        }
    }

    fn pick(&self, pool: usize, id: &Identity, wanted: Option<Ipv4Addr>, now_s: u64) -> Option<Ipv4Addr> {
        if let Some(l) = self.lease_of(id).filter(|l| l.expires_s > now_s && self.pool_of_ip(l.ip) == Some(pool)) {
            return Some(l.ip);
        }
        if let Some(&(ip, until)) = self.offers.get(id) {
            if until > now_s && self.free_for(pool, ip, id, now_s) {
                return Some(ip);
            }
        }
        if let Some(ip) = wanted.filter(|&ip| self.free_for(pool, ip, id, now_s)) {
            return Some(ip);
        }
        let p = self.pools.get(pool)?;
        let (first, size) = (u64::from(p.first), u64::from(p.last - p.first) + 1);
        let start = u64::from(p.next).saturating_sub(first) % size;
        (0..size).map(|k| Ipv4Addr::from((first + (start + k) % size) as u32)).find(|&ip| self.free_for(pool, ip, id, now_s))
    }

    /// A reply with the fields every server message shares (RFC 2131 §4.3.1 table 3).
    fn reply_to(&self, req: &DhcpRepr, t: MessageType) -> DhcpRepr {
        let mut m = DhcpRepr::empty(Op::BOOTREPLY);
        m.htype = req.htype;
        m.hlen = req.hlen;
        m.xid = req.xid;
        m.flags = req.flags;
        m.giaddr = req.giaddr;
        m.chaddr = req.chaddr;
        m.options.message_type = Some(t);
        m.options.server_id = Some(self.server_id);
        // RFC 3046 §2.2: "DHCP servers ... MUST copy the Relay Agent Information option as the
        // last DHCP option in the response".
        m.options.relay_agent_info = req.options.relay_agent_info.clone();
        m
    }

    fn configure(&self, m: &mut DhcpRepr, pool: usize, with_lease: bool) {
        let Some(p) = self.pools.get(pool) else { return };
        m.options.subnet_mask = Some(p.cfg.mask);
        m.options.routers = vec![p.cfg.gateway];
        m.options.dns = p.cfg.dns.clone();
        if with_lease {
            let t = p.cfg.lease_time_s;
            m.options.lease_time_s = Some(t);
            m.options.renewal_time_s = Some(t / 2);
            m.options.rebinding_time_s = Some((u64::from(t) * 7 / 8) as u32);
        }
    }

    fn destination(req: &DhcpRepr, reply: &DhcpRepr, nak: bool) -> Destination {
        if !req.giaddr.is_unspecified() {
            Destination::Relay(req.giaddr)
        } else if nak {
            // §4.3.2: "the server broadcasts the DHCPNAK message to the 0xffffffff broadcast address".
            Destination::Broadcast
        } else if !req.ciaddr.is_unspecified() {
            Destination::Unicast(req.ciaddr)
        } else if req.flags & FLAG_BROADCAST != 0 {
            Destination::Broadcast
        } else {
            Destination::UnicastToMac(reply.yiaddr, req.mac())
        }
    }

    fn ack(&mut self, req: &DhcpRepr, id: Identity, pool: usize, ip: Ipv4Addr, now_s: u64) -> Outcome {
        let lease_s = self.pools.get(pool).map_or(0, |p| u64::from(p.cfg.lease_time_s));
        let expires_s = now_s.saturating_add(lease_s);
        let kind = match self.lease_of(&id) {
            Some(l) if l.ip == ip && l.expires_s > now_s => EventKind::Renewed,
            _ => EventKind::Bound,
        };
        // The subscriber moves to another address (its old lease lapsed, or it took a new offer).
        if let Some(old) = self.lease_of(&id).filter(|l| l.ip != ip) {
            self.drop_lease(old.ip);
            let kind = if old.expires_s <= now_s { EventKind::Expired } else { EventKind::Released };
            self.events.push(Event { kind, identity: id, ip: old.ip, expires_s: now_s });
        }
        // Another subscriber's lease of this address that ran out but was not yet swept by
        // `expire` (else the address would not be free): it ends now.
        if let Some(prev) = self.leases.get(&ip).copied().filter(|l| l.identity != id) {
            self.drop_lease(ip);
            self.events.push(Event { kind: EventKind::Expired, identity: prev.identity, ip, expires_s: now_s });
        }
        self.withdraw_offer(&id);
        // A quarantine of this address that ended but was not yet swept by `expire`.
        self.quarantine.remove(&ip);
        self.leases.insert(ip, Lease { identity: id, ip, expires_s });
        self.by_identity.insert(id, ip);
        self.events.push(Event { kind, identity: id, ip, expires_s });
        let mut m = self.reply_to(req, MessageType::ACK);
        m.ciaddr = req.ciaddr;
        m.yiaddr = ip;
        self.configure(&mut m, pool, true);
        let dst = Self::destination(req, &m, false);
        Outcome::Reply(Box::new(Reply { msg: m, dst }))
    }

    fn nak(&self, req: &DhcpRepr, why: &str) -> Outcome {
        let mut m = self.reply_to(req, MessageType::NAK);
        m.options.message = Some(why.as_bytes().to_vec());
        // Table 3: a NAK carries no yiaddr, no lease time and, of the option 82 copy, nothing else.
        let dst = Self::destination(req, &m, true);
        Outcome::Reply(Box::new(Reply { msg: m, dst }))
    }

    /// Handles one client message from subscriber `id` at time `now_s` (seconds).
    ///
    /// Control thread only. Never panics on any message.
    pub fn handle(&mut self, req: &DhcpRepr, id: Identity, now_s: u64) -> Outcome {
        if req.op != Op::BOOTREQUEST {
            return Outcome::Ignored(Ignored::NotARequest);
        }
        let Some(t) = req.options.message_type else { return Outcome::Ignored(Ignored::NotARequest) };
        match t {
            MessageType::DISCOVER => self.discover(req, id, now_s),
            MessageType::REQUEST => self.request(req, id, now_s),
            MessageType::RELEASE => self.release(req, id, now_s),
            MessageType::DECLINE => self.decline(req, id, now_s),
            MessageType::INFORM => self.inform(req, id),
            _ => Outcome::Ignored(Ignored::UnexpectedType),
        }
    }

    fn discover(&mut self, req: &DhcpRepr, id: Identity, now_s: u64) -> Outcome {
        let Some(pool) = self.pool_of(&id) else { return Outcome::Ignored(Ignored::NoPool) };
        let Some(ip) = self.pick(pool, &id, req.options.requested_ip, now_s) else {
            return Outcome::Ignored(Ignored::PoolExhausted);
        };
        self.hold_offer(id, ip, now_s.saturating_add(self.offer_hold_s));
        if let Some(p) = self.pools.get_mut(pool) {
            let a = u32::from(ip);
            p.next = if a >= p.last { p.first } else { a + 1 };
        }
        let mut m = self.reply_to(req, MessageType::OFFER);
        m.yiaddr = ip;
        self.configure(&mut m, pool, true);
        let dst = Self::destination(req, &m, false);
        Outcome::Reply(Box::new(Reply { msg: m, dst }))
    }

    fn request(&mut self, req: &DhcpRepr, id: Identity, now_s: u64) -> Outcome {
        let o = &req.options;
        let Some(pool) = self.pool_of(&id) else { return Outcome::Ignored(Ignored::NoPool) };
        let current = self.lease_of(&id).filter(|l| l.expires_s > now_s);
        if let Some(sid) = o.server_id {
            // SELECTING (§4.3.2): the client answers one server's offer.
            if sid != self.server_id {
                self.withdraw_offer(&id);
                return Outcome::Ignored(Ignored::OtherServer);
            }
            let Some(ip) = o.requested_ip else { return self.nak(req, "no requested address") };
            let offered = self.offers.get(&id).is_some_and(|&(oip, until)| oip == ip && until > now_s);
            let renewing_own = current.is_some_and(|l| l.ip == ip);
            if (offered || renewing_own) && self.free_for(pool, ip, &id, now_s) {
                return self.ack(req, id, pool, ip, now_s);
            }
            return self.nak(req, "offer no longer valid");
        }
        if let Some(ip) = o.requested_ip {
            // INIT-REBOOT: "the server SHOULD send a DHCPNAK ... if the requested IP address is
            // incorrect, or is on the wrong network"; "If the DHCP server has no record of this
            // client, then it MUST remain silent".
            return match current {
                Some(l) if l.ip == ip => self.ack(req, id, pool, ip, now_s),
                Some(_) => self.nak(req, "not your address"),
                None if self.pool_of_ip(ip) != Some(pool) => self.nak(req, "wrong network"),
                None if self.leases.get(&ip).is_some_and(|l| l.expires_s > now_s) => self.nak(req, "address in use"),
                None => Outcome::Ignored(Ignored::UnknownClient),
            };
        }
        if req.ciaddr.is_unspecified() {
            return self.nak(req, "no address to confirm");
        }
        // RENEWING (unicast) or REBINDING (broadcast): the same check, as we are authoritative.
        match current {
            Some(l) if l.ip == req.ciaddr => self.ack(req, id, pool, l.ip, now_s),
            _ => self.nak(req, "lease unknown or expired"),
        }
    }

    fn release(&mut self, req: &DhcpRepr, id: Identity, now_s: u64) -> Outcome {
        match self.lease_of(&id) {
            Some(l) if l.ip == req.ciaddr => {
                self.drop_lease(l.ip);
                self.events.push(Event { kind: EventKind::Released, identity: id, ip: l.ip, expires_s: now_s });
                Outcome::Done
            }
            _ => Outcome::Ignored(Ignored::NotTheirs),
        }
    }

    fn decline(&mut self, req: &DhcpRepr, id: Identity, now_s: u64) -> Outcome {
        if req.options.server_id.is_some_and(|s| s != self.server_id) {
            return Outcome::Ignored(Ignored::OtherServer);
        }
        let Some(ip) = req.options.requested_ip else { return Outcome::Ignored(Ignored::NotTheirs) };
        // Its lease, or an address still offered to it (and so nobody's lease).
        let ours = self.lease_of(&id).is_some_and(|l| l.ip == ip)
            || (self.offers.get(&id).is_some_and(|&(oip, until)| oip == ip && until > now_s) && !self.leases.contains_key(&ip));
        if !ours {
            return Outcome::Ignored(Ignored::NotTheirs);
        }
        // §4.3.3: "the server MUST mark the network address as not available".
        self.drop_lease(ip);
        self.withdraw_offer(&id);
        let until = now_s.saturating_add(self.quarantine_s);
        self.quarantine.insert(ip, until);
        self.events.push(Event { kind: EventKind::Declined, identity: id, ip, expires_s: until });
        Outcome::Done
    }

    fn inform(&mut self, req: &DhcpRepr, id: Identity) -> Outcome {
        let pool = self.pool_of_ip(req.ciaddr).or_else(|| self.pool_of(&id));
        let Some(pool) = pool else { return Outcome::Ignored(Ignored::NoPool) };
        // §4.3.5: "The server MUST NOT send a lease expiration time to the client and SHOULD
        // NOT fill in 'yiaddr'".
        let mut m = self.reply_to(req, MessageType::ACK);
        m.ciaddr = req.ciaddr;
        self.configure(&mut m, pool, false);
        let dst = if req.ciaddr.is_unspecified() { Self::destination(req, &m, false) } else { Destination::Unicast(req.ciaddr) };
        Outcome::Reply(Box::new(Reply { msg: m, dst }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SID: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const T0: u64 = 1_000_000;

    fn cfg() -> ServerConfig {
        ServerConfig {
            server_id: SID,
            pools: vec![
                PoolConfig {
                    name: "residential".into(),
                    svlans: vec![100],
                    first: Ipv4Addr::new(198, 18, 0, 10),
                    last: Ipv4Addr::new(198, 18, 0, 12),
                    mask: Ipv4Addr::new(255, 255, 255, 0),
                    gateway: Ipv4Addr::new(198, 18, 0, 1),
                    dns: vec![Ipv4Addr::new(198, 18, 0, 2)],
                    lease_time_s: 3600,
                },
                PoolConfig {
                    name: "business".into(),
                    svlans: vec![200],
                    first: Ipv4Addr::new(198, 19, 0, 10),
                    last: Ipv4Addr::new(198, 19, 0, 200),
                    mask: Ipv4Addr::new(255, 255, 255, 0),
                    gateway: Ipv4Addr::new(198, 19, 0, 1),
                    dns: vec![],
                    lease_time_s: 800,
                },
            ],
            offer_hold_s: 30,
            decline_quarantine_s: 600,
        }
    }

    fn id(n: u8, svlan: u16) -> Identity {
        Identity { port: 3, svlan, cvlan: 40 + u16::from(n), mac: [2, 0, 0, 0, 0, n] }
    }

    fn msg(t: MessageType, id: &Identity) -> DhcpRepr {
        let mut m = DhcpRepr::empty(Op::BOOTREQUEST);
        m.xid = 0x1000 + u32::from(id.mac[5]);
        m.chaddr[..6].copy_from_slice(&id.mac);
        m.options.message_type = Some(t);
        m
    }

    fn reply(o: Outcome) -> Reply {
        match o {
            Outcome::Reply(r) => *r,
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    /// DISCOVER, OFFER, REQUEST (selecting), ACK; returns the address.
    fn dora(s: &mut Server, c: &Identity, now: u64) -> Ipv4Addr {
        let offer = reply(s.handle(&msg(MessageType::DISCOVER, c), *c, now));
        let mut req = msg(MessageType::REQUEST, c);
        req.options.server_id = Some(SID);
        req.options.requested_ip = Some(offer.msg.yiaddr);
        let ack = reply(s.handle(&req, *c, now));
        assert_eq!(ack.msg.options.message_type, Some(MessageType::ACK));
        ack.msg.yiaddr
    }

    #[test]
    fn discover_gets_offer_with_pool_options() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 100);
        let mut d = msg(MessageType::DISCOVER, &c);
        d.flags = FLAG_BROADCAST;
        d.options.relay_agent_info = Some(c.relay_agent_info());
        let r = reply(s.handle(&d, c, T0));
        let o = &r.msg.options;
        assert_eq!(r.msg.op, Op::BOOTREPLY);
        assert_eq!(r.msg.xid, d.xid);
        assert_eq!(r.msg.yiaddr, Ipv4Addr::new(198, 18, 0, 10));
        assert_eq!(r.dst, Destination::Broadcast);
        assert_eq!(o.message_type, Some(MessageType::OFFER));
        assert_eq!(o.server_id, Some(SID));
        assert_eq!((o.lease_time_s, o.renewal_time_s, o.rebinding_time_s), (Some(3600), Some(1800), Some(3150)));
        assert_eq!(o.subnet_mask, Some(Ipv4Addr::new(255, 255, 255, 0)));
        assert_eq!(o.routers, vec![Ipv4Addr::new(198, 18, 0, 1)]);
        assert_eq!(o.dns, vec![Ipv4Addr::new(198, 18, 0, 2)]);
        assert_eq!(o.relay_agent_info, Some(c.relay_agent_info()), "option 82 is echoed");
        assert!(s.drain_events().is_empty(), "an offer binds nothing");
        // Without the broadcast bit the offer goes to yiaddr at chaddr.
        let c2 = id(2, 100);
        let r = reply(s.handle(&msg(MessageType::DISCOVER, &c2), c2, T0));
        assert_eq!(r.dst, Destination::UnicastToMac(Ipv4Addr::new(198, 18, 0, 11), c2.mac));
    }

    #[test]
    fn pools_follow_the_svlan() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 200);
        let r = reply(s.handle(&msg(MessageType::DISCOVER, &c), c, T0));
        assert_eq!(r.msg.yiaddr, Ipv4Addr::new(198, 19, 0, 10));
        assert_eq!(r.msg.options.lease_time_s, Some(800));
        assert_eq!(r.msg.options.rebinding_time_s, Some(700));
        let stranger = id(2, 300);
        assert_eq!(s.handle(&msg(MessageType::DISCOVER, &stranger), stranger, T0), Outcome::Ignored(Ignored::NoPool));
    }

    #[test]
    fn selecting_binds_and_raises_bound() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 100);
        let ip = dora(&mut s, &c, T0);
        assert_eq!(ip, Ipv4Addr::new(198, 18, 0, 10));
        assert_eq!(s.drain_events(), vec![Event { kind: EventKind::Bound, identity: c, ip, expires_s: T0 + 3600 }]);
        assert_eq!(s.lease_of(&c), Some(Lease { identity: c, ip, expires_s: T0 + 3600 }));
        // A second discover from the bound subscriber gets the same address.
        let r = reply(s.handle(&msg(MessageType::DISCOVER, &c), c, T0 + 5));
        assert_eq!(r.msg.yiaddr, ip);
    }

    #[test]
    fn selecting_another_server_or_a_stale_offer() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 100);
        let offer = reply(s.handle(&msg(MessageType::DISCOVER, &c), c, T0));
        let mut req = msg(MessageType::REQUEST, &c);
        req.options.server_id = Some(Ipv4Addr::new(198, 18, 0, 99));
        req.options.requested_ip = Some(offer.msg.yiaddr);
        assert_eq!(s.handle(&req, c, T0), Outcome::Ignored(Ignored::OtherServer));
        // The offer was withdrawn: asking us for it now is a NAK, broadcast.
        req.options.server_id = Some(SID);
        let nak = reply(s.handle(&req, c, T0));
        assert_eq!(nak.msg.options.message_type, Some(MessageType::NAK));
        assert_eq!(nak.dst, Destination::Broadcast);
        assert_eq!(nak.msg.yiaddr, Ipv4Addr::UNSPECIFIED);
        assert_eq!(nak.msg.options.lease_time_s, None);
        // An offer past its hold time is gone too.
        let offer = reply(s.handle(&msg(MessageType::DISCOVER, &c), c, T0));
        req.options.requested_ip = Some(offer.msg.yiaddr);
        let late = reply(s.handle(&req, c, T0 + 31));
        assert_eq!(late.msg.options.message_type, Some(MessageType::NAK));
        assert!(s.drain_events().is_empty());
    }

    #[test]
    fn offers_are_held_apart_and_pool_runs_out() {
        let mut s = cfg().build().unwrap();
        let ips: Vec<_> = (1..=3).map(|n| reply(s.handle(&msg(MessageType::DISCOVER, &id(n, 100)), id(n, 100), T0)).msg.yiaddr).collect();
        assert_eq!(ips, vec![Ipv4Addr::new(198, 18, 0, 10), Ipv4Addr::new(198, 18, 0, 11), Ipv4Addr::new(198, 18, 0, 12)]);
        let c4 = id(4, 100);
        assert_eq!(s.handle(&msg(MessageType::DISCOVER, &c4), c4, T0), Outcome::Ignored(Ignored::PoolExhausted));
        // After the holds run out the address is free again.
        s.expire(T0 + 30);
        assert_eq!(reply(s.handle(&msg(MessageType::DISCOVER, &c4), c4, T0 + 30)).msg.yiaddr, ips[0]);
    }

    #[test]
    fn requested_address_is_honoured_when_free() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 100);
        let mut d = msg(MessageType::DISCOVER, &c);
        d.options.requested_ip = Some(Ipv4Addr::new(198, 18, 0, 12));
        assert_eq!(reply(s.handle(&d, c, T0)).msg.yiaddr, Ipv4Addr::new(198, 18, 0, 12));
        d.options.requested_ip = Some(Ipv4Addr::new(198, 18, 0, 1)); // the gateway
        let c2 = id(2, 100);
        assert_eq!(reply(s.handle(&d, c2, T0)).msg.yiaddr, Ipv4Addr::new(198, 18, 0, 10));
    }

    #[test]
    fn renewing_and_rebinding() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 100);
        let ip = dora(&mut s, &c, T0);
        s.drain_events();
        let mut renew = msg(MessageType::REQUEST, &c);
        renew.ciaddr = ip;
        let ack = reply(s.handle(&renew, c, T0 + 1800));
        assert_eq!(ack.msg.options.message_type, Some(MessageType::ACK));
        assert_eq!(ack.msg.yiaddr, ip);
        assert_eq!(ack.msg.ciaddr, ip);
        assert_eq!(ack.dst, Destination::Unicast(ip));
        assert_eq!(s.drain_events(), vec![Event { kind: EventKind::Renewed, identity: c, ip, expires_s: T0 + 5400 }]);
        // Rebinding (broadcast, same fields) at T2 of the new lease.
        renew.flags = FLAG_BROADCAST;
        let ack = reply(s.handle(&renew, c, T0 + 1800 + 3150));
        assert_eq!(ack.msg.options.message_type, Some(MessageType::ACK));
        assert_eq!(s.lease_of(&c).unwrap().expires_s, T0 + 1800 + 3150 + 3600);
        // Renewing somebody else's address, or an expired lease: NAK.
        let other = id(2, 100);
        let nak = reply(s.handle(&renew, other, T0 + 5000));
        assert_eq!(nak.msg.options.message_type, Some(MessageType::NAK));
        let late = T0 + 1800 + 3150 + 3600;
        let nak = reply(s.handle(&renew, c, late));
        assert_eq!(nak.msg.options.message_type, Some(MessageType::NAK));
    }

    #[test]
    fn init_reboot() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 100);
        let ip = dora(&mut s, &c, T0);
        s.drain_events();
        let mut reboot = msg(MessageType::REQUEST, &c);
        reboot.options.requested_ip = Some(ip);
        let ack = reply(s.handle(&reboot, c, T0 + 10));
        assert_eq!(ack.msg.options.message_type, Some(MessageType::ACK));
        assert_eq!(s.drain_events()[0].kind, EventKind::Renewed);
        // Wrong address for this subscriber, or from another network: NAK.
        reboot.options.requested_ip = Some(Ipv4Addr::new(198, 18, 0, 11));
        assert_eq!(reply(s.handle(&reboot, c, T0 + 10)).msg.options.message_type, Some(MessageType::NAK));
        let c2 = id(2, 100);
        reboot.options.requested_ip = Some(Ipv4Addr::new(10, 0, 0, 5));
        assert_eq!(reply(s.handle(&reboot, c2, T0 + 10)).msg.options.message_type, Some(MessageType::NAK));
        // In our pool but no record of this client: silent.
        reboot.options.requested_ip = Some(Ipv4Addr::new(198, 18, 0, 12));
        assert_eq!(s.handle(&reboot, c2, T0 + 10), Outcome::Ignored(Ignored::UnknownClient));
        // Someone else's current address: NAK.
        reboot.options.requested_ip = Some(ip);
        assert_eq!(reply(s.handle(&reboot, c2, T0 + 10)).msg.options.message_type, Some(MessageType::NAK));
    }

    #[test]
    fn release_frees_the_address() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 100);
        let ip = dora(&mut s, &c, T0);
        s.drain_events();
        let mut rel = msg(MessageType::RELEASE, &c);
        rel.ciaddr = ip;
        rel.options.server_id = Some(SID);
        // Another subscriber cannot release it.
        assert_eq!(s.handle(&rel, id(2, 100), T0 + 5), Outcome::Ignored(Ignored::NotTheirs));
        assert_eq!(s.handle(&rel, c, T0 + 5), Outcome::Done);
        assert_eq!(s.drain_events(), vec![Event { kind: EventKind::Released, identity: c, ip, expires_s: T0 + 5 }]);
        assert_eq!(s.lease_of(&c), None);
        // The pool (three addresses) has room for three more, the released one last (next-fit).
        let got: Vec<_> =
            (2..=4).map(|n| reply(s.handle(&msg(MessageType::DISCOVER, &id(n, 100)), id(n, 100), T0 + 6)).msg.yiaddr).collect();
        assert_eq!(got, vec![Ipv4Addr::new(198, 18, 0, 11), Ipv4Addr::new(198, 18, 0, 12), ip]);
    }

    #[test]
    fn decline_quarantines() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 100);
        let ip = dora(&mut s, &c, T0);
        s.drain_events();
        let mut dec = msg(MessageType::DECLINE, &c);
        dec.options.requested_ip = Some(ip);
        dec.options.server_id = Some(SID);
        assert_eq!(s.handle(&dec, c, T0 + 1), Outcome::Done);
        assert_eq!(s.drain_events(), vec![Event { kind: EventKind::Declined, identity: c, ip, expires_s: T0 + 601 }]);
        assert_eq!(s.quarantined(), vec![(ip, T0 + 601)]);
        // The decliner and everyone else get another address while the quarantine lasts.
        let r = reply(s.handle(&msg(MessageType::DISCOVER, &c), c, T0 + 2));
        assert_eq!(r.msg.yiaddr, Ipv4Addr::new(198, 18, 0, 11));
        s.expire(T0 + 601);
        assert!(s.quarantined().is_empty());
        // After the quarantine the address is handed out again (after .12: next-fit wraps).
        let got: Vec<_> =
            (3..=4).map(|n| reply(s.handle(&msg(MessageType::DISCOVER, &id(n, 100)), id(n, 100), T0 + 602)).msg.yiaddr).collect();
        assert_eq!(got, vec![Ipv4Addr::new(198, 18, 0, 12), ip]);
    }

    /// Found by `random_clients_keep_the_invariants`: a subscriber whose offer of an address ran
    /// out must not be able to decline it once it is someone else's lease. Two guards: offering
    /// the address again withdraws the stale offer, and a DECLINE counts only a live offer.
    #[test]
    fn a_stale_offer_cannot_decline_another_lease() {
        let mut s = cfg().build().unwrap();
        let (a, b) = (id(1, 100), id(2, 100));
        let x = reply(s.handle(&msg(MessageType::DISCOVER, &a), a, T0)).msg.yiaddr;
        let mut d = msg(MessageType::DISCOVER, &b);
        d.options.requested_ip = Some(x);
        let later = T0 + 31; // a's offer has run out, not yet swept by expire
        assert_eq!(reply(s.handle(&d, b, later)).msg.yiaddr, x);
        let mut req = msg(MessageType::REQUEST, &b);
        req.options.server_id = Some(SID);
        req.options.requested_ip = Some(x);
        assert_eq!(reply(s.handle(&req, b, later)).msg.options.message_type, Some(MessageType::ACK));
        let mut dec = msg(MessageType::DECLINE, &a);
        dec.options.requested_ip = Some(x);
        assert_eq!(s.handle(&dec, a, later), Outcome::Ignored(Ignored::NotTheirs));
        assert_eq!(s.lease_of(&b).map(|l| l.ip), Some(x));
        assert!(s.quarantined().is_empty());
    }

    #[test]
    fn inform_gets_configuration_and_no_lease() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 100);
        let mut inf = msg(MessageType::INFORM, &c);
        inf.ciaddr = Ipv4Addr::new(198, 18, 0, 77);
        let r = reply(s.handle(&inf, c, T0));
        assert_eq!(r.msg.options.message_type, Some(MessageType::ACK));
        assert_eq!(r.msg.yiaddr, Ipv4Addr::UNSPECIFIED);
        assert_eq!(r.msg.options.lease_time_s, None);
        assert_eq!(r.msg.options.renewal_time_s, None);
        assert_eq!(r.msg.options.routers, vec![Ipv4Addr::new(198, 18, 0, 1)]);
        assert_eq!(r.dst, Destination::Unicast(inf.ciaddr));
        assert!(s.drain_events().is_empty());
        assert!(s.leases().is_empty());
    }

    #[test]
    fn expiry_raises_expired() {
        let mut s = cfg().build().unwrap();
        let (a, b) = (id(1, 100), id(2, 200));
        let ipa = dora(&mut s, &a, T0);
        let ipb = dora(&mut s, &b, T0);
        s.drain_events();
        s.expire(T0 + 799);
        assert!(s.drain_events().is_empty());
        s.expire(T0 + 800);
        assert_eq!(s.drain_events(), vec![Event { kind: EventKind::Expired, identity: b, ip: ipb, expires_s: T0 + 800 }]);
        s.expire(T0 + 3600);
        assert_eq!(s.drain_events(), vec![Event { kind: EventKind::Expired, identity: a, ip: ipa, expires_s: T0 + 3600 }]);
        assert!(s.leases().is_empty());
    }

    #[test]
    fn relayed_messages_go_back_to_the_relay() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 100);
        let mut d = msg(MessageType::DISCOVER, &c);
        d.giaddr = Ipv4Addr::new(198, 18, 0, 254);
        assert_eq!(reply(s.handle(&d, c, T0)).dst, Destination::Relay(d.giaddr));
    }

    #[test]
    fn ignores_what_a_server_does_not_take() {
        let mut s = cfg().build().unwrap();
        let c = id(1, 100);
        assert_eq!(s.handle(&msg(MessageType::OFFER, &c), c, T0), Outcome::Ignored(Ignored::UnexpectedType));
        let mut m = msg(MessageType::DISCOVER, &c);
        m.op = Op::BOOTREPLY;
        assert_eq!(s.handle(&m, c, T0), Outcome::Ignored(Ignored::NotARequest));
        m.op = Op::BOOTREQUEST;
        m.options.message_type = None;
        assert_eq!(s.handle(&m, c, T0), Outcome::Ignored(Ignored::NotARequest));
    }

    #[test]
    fn restore_keeps_live_leases_only() {
        let mut s = cfg().build().unwrap();
        let (a, b) = (id(1, 100), id(2, 100));
        let live = Lease { identity: a, ip: Ipv4Addr::new(198, 18, 0, 11), expires_s: T0 + 10 };
        let dead = Lease { identity: b, ip: Ipv4Addr::new(198, 18, 0, 12), expires_s: T0 };
        s.restore(&[live, dead], &[(Ipv4Addr::new(198, 18, 0, 10), T0 + 5)], T0);
        assert_eq!(s.leases(), vec![live]);
        // b cannot get the quarantined .10 or a's .11.
        assert_eq!(reply(s.handle(&msg(MessageType::DISCOVER, &b), b, T0)).msg.yiaddr, Ipv4Addr::new(198, 18, 0, 12));
    }

    impl Server {
        /// The server's internal invariants; panics naming the first one broken.
        fn check(&self, now: u64) {
            for (ip, l) in &self.leases {
                assert_eq!(*ip, l.ip);
                assert_eq!(self.by_identity.get(&l.identity), Some(ip), "lease index");
                assert!(self.pool_of_ip(*ip).is_some(), "{ip} outside every pool");
                assert!(!self.quarantine.contains_key(ip), "{ip} leased and quarantined");
                // A lapsed lease not yet swept may coexist with a new offer of its address.
                if let Some(holder) = self.offered.get(ip).filter(|_| l.expires_s > now) {
                    let live = self.offers.get(holder).is_some_and(|&(o, t)| o == *ip && t > now);
                    assert!(!live || *holder == l.identity, "{ip} leased to one subscriber and offered to another");
                }
            }
            assert_eq!(self.by_identity.len(), self.leases.len(), "one lease per subscriber");
            for (id, (ip, _)) in &self.offers {
                assert_eq!(self.offered.get(ip), Some(id), "offer index");
            }
            assert_eq!(self.offered.len(), self.offers.len());
        }
    }

    /// Random clients on a small pool (DISCOVER, REQUEST in every state, RELEASE, DECLINE,
    /// INFORM, clock steps, rare expiry sweeps): the invariants hold after every step, every ACK
    /// names the address the server then holds for that subscriber, and the lease events, applied
    /// in order, always give exactly the server's lease table.
    #[test]
    fn random_clients_keep_the_invariants() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        // Short leases, so they lapse (and linger unswept) many times during the walk.
        let mut c = cfg();
        c.pools[0].lease_time_s = 40;
        let mut s = c.build().unwrap();
        let mut now = T0;
        let mut seen = [0u32; 5];
        let mut offered: HashMap<Identity, Ipv4Addr> = HashMap::new();
        // What a session layer would hold, built from the events only.
        let mut model: HashMap<Identity, Ipv4Addr> = HashMap::new();
        for step in 0..50_000 {
            let c = id((next() % 6) as u8, if next() % 4 == 0 { 200 } else { 100 });
            let ip = Ipv4Addr::new(198, if c.svlan == 200 { 19 } else { 18 }, 0, 9 + (next() % 5) as u8);
            let mut m = msg(MessageType((next() % 9) as u8), &c);
            match next() % 4 {
                0 => m.options.server_id = Some(SID),
                1 => m.options.server_id = Some(Ipv4Addr::new(198, 18, 0, 99)),
                _ => {}
            }
            if next() % 2 == 0 {
                m.options.requested_ip = Some(ip);
            }
            if next() % 2 == 0 {
                m.ciaddr = ip;
            }
            // Half the time, a well-formed SELECTING request for the last offer.
            if m.options.message_type == Some(MessageType::REQUEST) && next() % 2 == 0 {
                if let Some(&o) = offered.get(&c) {
                    m.options.server_id = Some(SID);
                    m.options.requested_ip = Some(o);
                    m.ciaddr = Ipv4Addr::UNSPECIFIED;
                }
            }
            if let Outcome::Reply(r) = s.handle(&m, c, now) {
                if r.msg.options.message_type == Some(MessageType::OFFER) {
                    offered.insert(c, r.msg.yiaddr);
                }
                if r.msg.options.message_type == Some(MessageType::ACK) && m.options.message_type != Some(MessageType::INFORM) {
                    assert_eq!(s.lease_of(&c).map(|l| l.ip), Some(r.msg.yiaddr), "step {step}");
                }
            }
            now += next() % 3;
            // Sweep rarely, so lapsed leases, offers and quarantines linger between sweeps.
            if step % 500 == 0 {
                s.expire(now);
            }
            for e in s.drain_events() {
                seen[e.kind as usize] += 1;
                match e.kind {
                    EventKind::Bound | EventKind::Renewed => {
                        // A subscriber's old address is ended by its own event before a new one
                        // is bound (a table keyed by address would otherwise keep it).
                        let held = model.insert(e.identity, e.ip);
                        assert!(held.is_none_or(|h| h == e.ip), "step {step}: {e:?} while {held:?} was not ended");
                        assert!(e.kind == EventKind::Bound || held.is_some(), "step {step}: renewal of nothing");
                    }
                    // A decline of an address that was only offered ends no lease.
                    EventKind::Declined if model.get(&e.identity) != Some(&e.ip) => {}
                    _ => assert_eq!(model.remove(&e.identity), Some(e.ip), "step {step}: {e:?} ends a lease the events never made"),
                }
            }
            s.check(now);
            // The events alone describe the lease table: what a session layer keeps is right.
            let table: HashMap<Identity, Ipv4Addr> = s.leases().iter().map(|l| (l.identity, l.ip)).collect();
            assert_eq!(model, table, "step {step}: the lease table and the events disagree");
        }
        // The walk reached every kind of lease change, or it proves little.
        assert!(seen.iter().all(|&n| n > 0), "events seen (Bound, Renewed, Released, Expired, Declined): {seen:?}");
    }

    #[test]
    fn option82_format() {
        let c = Identity { port: 3, svlan: 100, cvlan: 42, mac: [2, 0, 0, 0, 0xab, 1] };
        assert_eq!(c.circuit_id(), "3/100/42");
        assert_eq!(c.remote_id(), "02:00:00:00:ab:01");
        assert_eq!(Identity::from_relay_agent_info(&c.relay_agent_info(), c.mac), Some(c));
        let bad = RelayAgentInfo { circuit_id: Some(b"3/100".to_vec()), ..Default::default() };
        assert_eq!(Identity::from_relay_agent_info(&bad, c.mac), None);
    }

    #[test]
    fn config_errors() {
        let mut c = cfg();
        c.pools[1].first = Ipv4Addr::new(198, 18, 0, 12);
        c.pools[1].last = Ipv4Addr::new(198, 18, 0, 20);
        c.pools[1].gateway = Ipv4Addr::new(198, 18, 0, 1);
        assert_eq!(c.build().unwrap_err(), ConfigError::Overlap("residential".into(), "business".into()));
        let mut c = cfg();
        c.pools[1].svlans = vec![100];
        assert!(matches!(c.build().unwrap_err(), ConfigError::DuplicateSvlan(_, _, 100)));
        let mut c = cfg();
        c.pools[0].mask = Ipv4Addr::new(255, 0, 255, 0);
        assert_eq!(c.build().unwrap_err(), ConfigError::BadMask("residential".into()));
        let mut c = cfg();
        c.pools[0].gateway = Ipv4Addr::new(198, 19, 0, 1);
        assert_eq!(c.build().unwrap_err(), ConfigError::OutsideSubnet("residential".into()));
        let mut c = cfg();
        c.pools[0].last = Ipv4Addr::new(198, 18, 0, 9);
        assert_eq!(c.build().unwrap_err(), ConfigError::EmptyRange("residential".into()));
    }
}
