//! Relay mode: the control plane relays subscribers' DHCP to an external server (Kea, dnsmasq)
//! instead of serving leases itself (RFC 1542 §4, RFC 2131 §4.1, RFC 3046). Pure, like the
//! server: messages and `now_s` in, messages and lease events out.
//!
//! ```text
//!  subscriber ──► from_client: hops + 1, giaddr = ours, option 82 from the Identity,
//!                 server id "ours" put back to the real server's          ──► server:67
//!  subscriber ◄── from_server: subscriber found by the echoed option 82 (or the
//!                 transaction), option 82 removed, server id rewritten to ours,
//!                 ACK / NAK / RELEASE / DECLINE turned into lease events   ◄── server → giaddr:67
//! ```
//!
//! The server identifier is rewritten to our giaddr in replies (and back in requests), so a
//! renewing client unicasts to the relay and the relay sees every lease change: the same
//! effect as RFC 5107's server identifier override, without needing the server to support it.
//! The lease events are the server's ([`EventKind`]); a NAK that ends a lease is reported as
//! `Released`.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use fastpath_packet::hdr::Mac;

use super::server::{Destination, Event, EventKind, Identity, Lease, Reply};
use super::wire::{DhcpRepr, MessageType, Op, FLAG_BROADCAST};

/// Relay configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayConfig {
    /// Our address on the subscriber side: written into giaddr (the server chooses the pool by
    /// it and sends its replies there) and shown to clients as the server identifier.
    pub giaddr: Ipv4Addr,
    /// The DHCP servers each request is relayed to.
    pub servers: Vec<Ipv4Addr>,
    /// Requests that already crossed this many relays are dropped (RFC 1542 §4.1.1 suggests 4,
    /// and at most 16).
    pub max_hops: u8,
}

/// Why a message was not relayed, for counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayIgnored {
    /// A reply from a client, or a request from a server.
    WrongOp,
    /// Already relayed `max_hops` times.
    TooManyHops,
    /// A subscriber's message that already has giaddr or option 82: RFC 3046 §2.1 "the DHCP
    /// relay agent SHOULD discard the packet and increment an error count".
    UntrustedRelayInfo,
    /// A reply for another relay (giaddr is not ours).
    NotOurs,
    /// A reply we cannot match to a subscriber (no usable option 82, unknown transaction).
    UnknownSubscriber,
}

#[derive(Debug, Clone, Copy, Default)]
struct Binding {
    /// The real server's identifier, from its last reply.
    server_id: Option<Ipv4Addr>,
    lease: Option<Lease>,
}

/// How long a relayed transaction is remembered for replies without option 82, seconds.
const TRANSACTION_HOLD_S: u64 = 60;

/// The relay. Control thread only.
#[derive(Debug)]
pub struct Relay {
    cfg: RelayConfig,
    bindings: HashMap<Identity, Binding>,
    /// Subscriber of each relayed transaction (xid, chaddr), and when it was relayed.
    transactions: HashMap<(u32, Mac), (Identity, u64)>,
    events: Vec<Event>,
}

impl Relay {
    /// A relay with no leases.
    pub fn new(cfg: RelayConfig) -> Self {
        Relay { cfg, bindings: HashMap::new(), transactions: HashMap::new(), events: Vec::new() }
    }

    /// The servers requests go to.
    pub fn servers(&self) -> &[Ipv4Addr] {
        &self.cfg.servers
    }

    /// Restores leases from the store (those ending after `now_s`); no events.
    pub fn restore(&mut self, leases: &[Lease], now_s: u64) {
        for l in leases.iter().filter(|l| l.expires_s > now_s) {
            self.bindings.entry(l.identity).or_default().lease = Some(*l);
        }
    }

    /// Leases seen in the server's ACKs and not yet ended, in address order.
    pub fn leases(&self) -> Vec<Lease> {
        let mut v: Vec<Lease> = self.bindings.values().filter_map(|b| b.lease).collect();
        v.sort_by_key(|l| l.ip);
        v
    }

    /// The lease of subscriber `id`, if the servers granted one that has not ended.
    pub fn lease_of(&self, id: &Identity) -> Option<Lease> {
        self.bindings.get(id).and_then(|b| b.lease)
    }

    /// Takes the events raised since the last call, oldest first.
    pub fn drain_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Ends leases whose time is up (`Expired`) and forgets old transactions.
    pub fn expire(&mut self, now_s: u64) {
        let mut gone: Vec<Lease> = self.bindings.values().filter_map(|b| b.lease).filter(|l| l.expires_s <= now_s).collect();
        gone.sort_by_key(|l| l.ip);
        for l in gone {
            self.end_lease(l.identity, EventKind::Expired, now_s);
        }
        self.transactions.retain(|_, (_, at)| now_s.saturating_sub(*at) < TRANSACTION_HOLD_S);
        self.bindings.retain(|_, b| b.lease.is_some() || b.server_id.is_some());
    }

    fn end_lease(&mut self, id: Identity, kind: EventKind, now_s: u64) {
        if let Some(l) = self.bindings.get_mut(&id).and_then(|b| b.lease.take()) {
            self.events.push(Event { kind, identity: id, ip: l.ip, expires_s: now_s });
        }
    }

    /// A subscriber's message: the message to send to every server in [`Relay::servers`], port 67.
    ///
    /// # Errors
    /// Why it is not relayed.
    pub fn from_client(&mut self, req: &DhcpRepr, id: Identity, now_s: u64) -> Result<DhcpRepr, RelayIgnored> {
        if req.op != Op::BOOTREQUEST {
            return Err(RelayIgnored::WrongOp);
        }
        if !req.giaddr.is_unspecified() || req.options.relay_agent_info.is_some() {
            return Err(RelayIgnored::UntrustedRelayInfo);
        }
        if req.hops >= self.cfg.max_hops {
            return Err(RelayIgnored::TooManyHops);
        }
        let mut m = req.clone();
        m.hops += 1;
        m.giaddr = self.cfg.giaddr;
        m.options.relay_agent_info = Some(id.relay_agent_info());
        let binding = self.bindings.get(&id).copied().unwrap_or_default();
        if m.options.server_id == Some(self.cfg.giaddr) {
            // The client answers "us": give the server its own identifier back. Not seen since
            // we started (a RELEASE after our restart): with one server, its address is the best
            // guess, and a server that ignores a foreign server id would ignore ours anyway.
            let only = match self.cfg.servers.as_slice() {
                [one] => Some(*one),
                _ => None,
            };
            m.options.server_id = binding.server_id.or(only).or(m.options.server_id);
        }
        self.transactions.insert((req.xid, req.mac()), (id, now_s));
        match req.options.message_type {
            Some(MessageType::RELEASE) if binding.lease.is_some_and(|l| l.ip == req.ciaddr) => {
                self.end_lease(id, EventKind::Released, now_s);
            }
            Some(MessageType::DECLINE) if binding.lease.is_some_and(|l| Some(l.ip) == req.options.requested_ip) => {
                self.end_lease(id, EventKind::Declined, now_s);
            }
            _ => {}
        }
        Ok(m)
    }

    /// A server's reply (it arrives at giaddr, port 67): the subscriber it is for, and the
    /// message to send to that subscriber with its destination.
    ///
    /// # Errors
    /// Why it is not relayed.
    pub fn from_server(&mut self, rep: &DhcpRepr, now_s: u64) -> Result<(Identity, Reply), RelayIgnored> {
        if rep.op != Op::BOOTREPLY {
            return Err(RelayIgnored::WrongOp);
        }
        if rep.giaddr != self.cfg.giaddr {
            return Err(RelayIgnored::NotOurs);
        }
        // Trusted only when it is exactly what we wrote: circuit-id of the line and remote-id of
        // this chaddr.
        let by_82 = rep
            .options
            .relay_agent_info
            .as_ref()
            .and_then(|info| Identity::from_relay_agent_info(info, rep.mac()).filter(|id| id.relay_agent_info() == *info));
        let id =
            by_82.or_else(|| self.transactions.get(&(rep.xid, rep.mac())).map(|(id, _)| *id)).ok_or(RelayIgnored::UnknownSubscriber)?;
        let mut m = rep.clone();
        // RFC 3046 §2.1: "The Relay Agent MUST remove the Relay Agent Information option from
        // the DHCP response before forwarding it to the client."
        m.options.relay_agent_info = None;
        let binding = self.bindings.entry(id).or_default();
        if let Some(sid) = rep.options.server_id {
            binding.server_id = Some(sid);
            m.options.server_id = Some(self.cfg.giaddr);
        }
        let t = rep.options.message_type;
        if t == Some(MessageType::ACK) && !rep.yiaddr.is_unspecified() {
            if let Some(lease_s) = rep.options.lease_time_s {
                let expires_s = now_s.saturating_add(u64::from(lease_s));
                let kind = match binding.lease {
                    Some(l) if l.ip == rep.yiaddr && l.expires_s > now_s => EventKind::Renewed,
                    Some(old) => {
                        self.events.push(Event { kind: EventKind::Released, identity: id, ip: old.ip, expires_s: now_s });
                        EventKind::Bound
                    }
                    None => EventKind::Bound,
                };
                binding.lease = Some(Lease { identity: id, ip: rep.yiaddr, expires_s });
                self.events.push(Event { kind, identity: id, ip: rep.yiaddr, expires_s });
            }
        } else if t == Some(MessageType::NAK) {
            self.end_lease(id, EventKind::Released, now_s);
        }
        if matches!(t, Some(MessageType::ACK) | Some(MessageType::NAK)) {
            self.transactions.remove(&(rep.xid, rep.mac()));
        }
        let dst = if t == Some(MessageType::NAK) {
            Destination::Broadcast
        } else if !rep.ciaddr.is_unspecified() {
            Destination::Unicast(rep.ciaddr)
        } else if rep.flags & FLAG_BROADCAST != 0 {
            Destination::Broadcast
        } else {
            Destination::UnicastToMac(rep.yiaddr, rep.mac())
        };
        Ok((id, Reply { msg: m, dst }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const SERVER: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);
    const T0: u64 = 5_000;

    fn relay() -> Relay {
        Relay::new(RelayConfig { giaddr: GI, servers: vec![SERVER], max_hops: 4 })
    }

    fn id(n: u8) -> Identity {
        Identity { port: 7, svlan: 300, cvlan: u16::from(n), mac: [2, 0, 0, 0, 9, n] }
    }

    fn msg(op: Op, t: MessageType, c: &Identity) -> DhcpRepr {
        let mut m = DhcpRepr::empty(op);
        m.xid = 0x7700 + u32::from(c.mac[5]);
        m.chaddr[..6].copy_from_slice(&c.mac);
        m.options.message_type = Some(t);
        m
    }

    /// What the server answers: the request's xid, chaddr, giaddr and option 82 echoed.
    fn answer(req: &DhcpRepr, t: MessageType, yiaddr: Ipv4Addr, lease_s: Option<u32>) -> DhcpRepr {
        let mut m = DhcpRepr::empty(Op::BOOTREPLY);
        m.xid = req.xid;
        m.chaddr = req.chaddr;
        m.giaddr = req.giaddr;
        m.ciaddr = req.ciaddr;
        m.flags = req.flags;
        m.yiaddr = yiaddr;
        m.options.message_type = Some(t);
        m.options.server_id = Some(SERVER);
        m.options.lease_time_s = lease_s;
        m.options.relay_agent_info = req.options.relay_agent_info.clone();
        m
    }

    #[test]
    fn dora_through_the_relay() {
        let mut r = relay();
        let c = id(1);
        let ip = Ipv4Addr::new(198, 18, 0, 20);
        let fwd = r.from_client(&msg(Op::BOOTREQUEST, MessageType::DISCOVER, &c), c, T0).unwrap();
        assert_eq!(fwd.giaddr, GI);
        assert_eq!(fwd.hops, 1);
        assert_eq!(fwd.options.relay_agent_info, Some(c.relay_agent_info()));
        let (who, offer) = r.from_server(&answer(&fwd, MessageType::OFFER, ip, Some(120)), T0).unwrap();
        assert_eq!(who, c);
        assert_eq!(offer.msg.options.relay_agent_info, None, "option 82 is removed");
        assert_eq!(offer.msg.options.server_id, Some(GI), "the client sees us as the server");
        assert_eq!(offer.dst, Destination::UnicastToMac(ip, c.mac));
        assert!(r.drain_events().is_empty());

        let mut req = msg(Op::BOOTREQUEST, MessageType::REQUEST, &c);
        req.options.server_id = Some(GI);
        req.options.requested_ip = Some(ip);
        let fwd = r.from_client(&req, c, T0 + 1).unwrap();
        assert_eq!(fwd.options.server_id, Some(SERVER), "the server sees its own identifier");
        let (_, ack) = r.from_server(&answer(&fwd, MessageType::ACK, ip, Some(120)), T0 + 1).unwrap();
        assert_eq!(ack.msg.options.message_type, Some(MessageType::ACK));
        assert_eq!(r.drain_events(), vec![Event { kind: EventKind::Bound, identity: c, ip, expires_s: T0 + 121 }]);

        // Renewal: unicast to us, relayed, the ACK goes back to ciaddr.
        let mut renew = msg(Op::BOOTREQUEST, MessageType::REQUEST, &c);
        renew.ciaddr = ip;
        let fwd = r.from_client(&renew, c, T0 + 60).unwrap();
        let (_, ack) = r.from_server(&answer(&fwd, MessageType::ACK, ip, Some(120)), T0 + 60).unwrap();
        assert_eq!(ack.dst, Destination::Unicast(ip));
        assert_eq!(r.drain_events(), vec![Event { kind: EventKind::Renewed, identity: c, ip, expires_s: T0 + 180 }]);

        let mut rel = msg(Op::BOOTREQUEST, MessageType::RELEASE, &c);
        rel.ciaddr = ip;
        rel.options.server_id = Some(GI);
        let fwd = r.from_client(&rel, c, T0 + 70).unwrap();
        assert_eq!(fwd.options.server_id, Some(SERVER));
        assert_eq!(r.drain_events(), vec![Event { kind: EventKind::Released, identity: c, ip, expires_s: T0 + 70 }]);
        assert!(r.leases().is_empty());
    }

    #[test]
    fn replies_without_option82_are_matched_by_transaction() {
        let mut r = relay();
        let c = id(2);
        let fwd = r.from_client(&msg(Op::BOOTREQUEST, MessageType::DISCOVER, &c), c, T0).unwrap();
        let mut offer = answer(&fwd, MessageType::OFFER, Ipv4Addr::new(198, 18, 0, 21), Some(120));
        offer.options.relay_agent_info = None;
        assert_eq!(r.from_server(&offer, T0).unwrap().0, c);
        // Unknown transaction and no option 82: dropped.
        offer.xid ^= 1;
        assert_eq!(r.from_server(&offer, T0).unwrap_err(), RelayIgnored::UnknownSubscriber);
        // After the hold the transaction is forgotten.
        offer.xid ^= 1;
        r.expire(T0 + TRANSACTION_HOLD_S);
        assert_eq!(r.from_server(&offer, T0 + TRANSACTION_HOLD_S).unwrap_err(), RelayIgnored::UnknownSubscriber);
    }

    #[test]
    fn nak_and_expiry_end_leases() {
        let mut r = relay();
        let (a, b) = (id(3), id(4));
        let ipa = Ipv4Addr::new(198, 18, 0, 30);
        let ipb = Ipv4Addr::new(198, 18, 0, 31);
        for (c, ip) in [(a, ipa), (b, ipb)] {
            let fwd = r.from_client(&msg(Op::BOOTREQUEST, MessageType::REQUEST, &c), c, T0).unwrap();
            r.from_server(&answer(&fwd, MessageType::ACK, ip, Some(100)), T0).unwrap();
        }
        r.drain_events();
        let fwd = r.from_client(&msg(Op::BOOTREQUEST, MessageType::REQUEST, &a), a, T0 + 10).unwrap();
        let (_, nak) = r.from_server(&answer(&fwd, MessageType::NAK, Ipv4Addr::UNSPECIFIED, None), T0 + 10).unwrap();
        assert_eq!(nak.dst, Destination::Broadcast);
        assert_eq!(r.drain_events(), vec![Event { kind: EventKind::Released, identity: a, ip: ipa, expires_s: T0 + 10 }]);
        r.expire(T0 + 100);
        assert_eq!(r.drain_events(), vec![Event { kind: EventKind::Expired, identity: b, ip: ipb, expires_s: T0 + 100 }]);
    }

    #[test]
    fn refuses_what_it_must_not_relay() {
        let mut r = relay();
        let c = id(5);
        let mut m = msg(Op::BOOTREQUEST, MessageType::DISCOVER, &c);
        m.options.relay_agent_info = Some(id(6).relay_agent_info()); // a client forging option 82
        assert_eq!(r.from_client(&m, c, T0).unwrap_err(), RelayIgnored::UntrustedRelayInfo);
        m.options.relay_agent_info = None;
        m.giaddr = Ipv4Addr::new(10, 0, 0, 1);
        assert_eq!(r.from_client(&m, c, T0).unwrap_err(), RelayIgnored::UntrustedRelayInfo);
        m.giaddr = Ipv4Addr::UNSPECIFIED;
        m.hops = 4;
        assert_eq!(r.from_client(&m, c, T0).unwrap_err(), RelayIgnored::TooManyHops);
        m.hops = 0;
        m.op = Op::BOOTREPLY;
        assert_eq!(r.from_client(&m, c, T0).unwrap_err(), RelayIgnored::WrongOp);
        let mut rep = answer(&m, MessageType::OFFER, Ipv4Addr::new(198, 18, 0, 9), Some(60));
        rep.giaddr = Ipv4Addr::new(198, 18, 0, 254);
        assert_eq!(r.from_server(&rep, T0).unwrap_err(), RelayIgnored::NotOurs);
        rep.giaddr = GI;
        rep.op = Op::BOOTREQUEST;
        assert_eq!(r.from_server(&rep, T0).unwrap_err(), RelayIgnored::WrongOp);
    }

    #[test]
    fn option82_of_another_mac_is_not_trusted() {
        let mut r = relay();
        let c = id(7);
        let fwd = r.from_client(&msg(Op::BOOTREQUEST, MessageType::DISCOVER, &c), c, T0).unwrap();
        let mut offer = answer(&fwd, MessageType::OFFER, Ipv4Addr::new(198, 18, 0, 40), Some(60));
        // The circuit is c's but the remote-id names another MAC than chaddr: fall back to the
        // transaction, which names c.
        offer.options.relay_agent_info = Some(id(8).relay_agent_info());
        assert_eq!(r.from_server(&offer, T0).unwrap().0, c);
    }
}
