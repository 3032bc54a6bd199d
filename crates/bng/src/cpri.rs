//! The control plane's end of the Control Packet Redirect interface (CPRi): the Ethernet
//! frames a user plane punts to us inside GTP-U G-PDUs, and the frames we send back.
//!
//! A subscriber's DHCP frame arrives as the user plane received it on its access port:
//! ```text
//!  dst MAC | src MAC | 88a8 S-tag (S-VLAN) | 8100 C-tag (C-VLAN) | 0800 | IPv4 | UDP 68→67 | DHCP
//! ```
//! (an outer tag of type 8100 is taken as the S-tag too, as the user plane's parser does). The
//! G-PDU's TEID names the port (`fastpath_pfcp::gtpu::cpri_port`), so the subscriber identity
//! is (port, S-VLAN, C-VLAN, chaddr). A reply is the same shape from the gateway's MAC and
//! address, UDP 67→68, to the client's MAC (or broadcast, as the server's destination says),
//! and goes back in a G-PDU with the same TEID: the user plane sends it out of that port.
//!
//! Control thread only; parsing never panics.

use std::net::Ipv4Addr;

use crate::dhcp::server::{Destination, Identity, Reply};
use crate::dhcp::wire::DhcpRepr;

/// 802.1ad S-tag TPID.
pub const TPID_S: u16 = 0x88a8;
/// 802.1Q C-tag TPID.
pub const TPID_C: u16 = 0x8100;
const ETH_IPV4: u16 = 0x0800;
const UDP: u8 = 17;
const DHCP_SERVER_PORT: u16 = 67;
const DHCP_CLIENT_PORT: u16 = 68;

/// Why a punted frame is not a subscriber's DHCP message (counted by the process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotDhcp {
    /// Shorter than its headers say.
    Truncated,
    /// Not two VLAN tags then IPv4.
    NotQinQ,
    /// Not IPv4 / UDP to port 67 (or fragmented).
    NotDhcp,
    /// The DHCP message does not decode.
    Malformed,
}

/// A subscriber's DHCP message from a punted frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Punted {
    /// Port (from the TEID), tags and the client hardware address.
    pub identity: Identity,
    /// The message.
    pub msg: DhcpRepr,
}

fn be16(b: &[u8], at: usize) -> Result<u16, NotDhcp> {
    match b.get(at..at + 2) {
        Some([x, y]) => Ok(u16::from_be_bytes([*x, *y])),
        _ => Err(NotDhcp::Truncated),
    }
}

/// Reads a punted frame that came in on `port`.
///
/// # Errors
/// [`NotDhcp`]; never panics.
pub fn parse_frame(frame: &[u8], port: u32) -> Result<Punted, NotDhcp> {
    let outer = be16(frame, 12)?;
    if outer != TPID_S && outer != TPID_C {
        return Err(NotDhcp::NotQinQ);
    }
    let svlan = be16(frame, 14)? & 0x0fff;
    if be16(frame, 16)? != TPID_C {
        return Err(NotDhcp::NotQinQ);
    }
    let cvlan = be16(frame, 18)? & 0x0fff;
    if be16(frame, 20)? != ETH_IPV4 {
        return Err(NotDhcp::NotDhcp);
    }
    let ip = frame.get(22..).ok_or(NotDhcp::Truncated)?;
    let vihl = *ip.first().ok_or(NotDhcp::Truncated)?;
    let ihl = usize::from(vihl & 0x0f) * 4;
    if vihl >> 4 != 4 || ihl < 20 {
        return Err(NotDhcp::NotDhcp);
    }
    let total = usize::from(be16(ip, 2)?);
    let frag = be16(ip, 6)?;
    if ip.get(9) != Some(&UDP) || frag & 0x3fff != 0 || total < ihl + 8 {
        return Err(NotDhcp::NotDhcp);
    }
    let ip = ip.get(..total).ok_or(NotDhcp::Truncated)?;
    let udp = ip.get(ihl..).ok_or(NotDhcp::Truncated)?;
    if be16(udp, 2)? != DHCP_SERVER_PORT {
        return Err(NotDhcp::NotDhcp);
    }
    let udp_len = usize::from(be16(udp, 4)?);
    let body = udp.get(8..udp_len.max(8)).ok_or(NotDhcp::Truncated)?;
    let msg = DhcpRepr::parse(body).map_err(|_| NotDhcp::Malformed)?;
    Ok(Punted { identity: Identity { port, svlan, cvlan, mac: msg.mac() }, msg })
}

fn sum16(b: &[u8]) -> u32 {
    b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c.first().copied().unwrap_or(0), c.get(1).copied().unwrap_or(0)]))).sum()
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// The frame carrying `reply` to subscriber `id`: from `gw_mac` / `server_ip`, with the
/// subscriber's two tags. `None` for a reply to a relay (giaddr), which the CPRi does not carry.
pub fn build_reply(id: &Identity, reply: &Reply, gw_mac: [u8; 6], server_ip: Ipv4Addr) -> Option<Vec<u8>> {
    let (dst_mac, dst_ip) = match reply.dst {
        Destination::Broadcast => ([0xff; 6], Ipv4Addr::BROADCAST),
        Destination::UnicastToMac(ip, mac) => (mac, ip),
        Destination::Unicast(ip) => (id.mac, ip),
        Destination::Relay(_) => return None,
    };
    let mut dhcp = Vec::with_capacity(300);
    reply.msg.emit(&mut dhcp);
    let udp_len = u16::try_from(8 + dhcp.len()).ok()?;
    let mut f = Vec::with_capacity(42 + dhcp.len() + 8);
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&gw_mac);
    f.extend_from_slice(&TPID_S.to_be_bytes());
    f.extend_from_slice(&id.svlan.to_be_bytes());
    f.extend_from_slice(&TPID_C.to_be_bytes());
    f.extend_from_slice(&id.cvlan.to_be_bytes());
    f.extend_from_slice(&ETH_IPV4.to_be_bytes());
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
    ip[8] = 64;
    ip[9] = UDP;
    ip[12..16].copy_from_slice(&server_ip.octets());
    ip[16..20].copy_from_slice(&dst_ip.octets());
    let c = fold(sum16(&ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let mut udp = Vec::with_capacity(8 + dhcp.len());
    udp.extend_from_slice(&DHCP_SERVER_PORT.to_be_bytes());
    udp.extend_from_slice(&DHCP_CLIENT_PORT.to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&dhcp);
    let mut pseudo = [0u8; 12];
    pseudo[..4].copy_from_slice(&server_ip.octets());
    pseudo[4..8].copy_from_slice(&dst_ip.octets());
    pseudo[9] = UDP;
    pseudo[10..12].copy_from_slice(&udp_len.to_be_bytes());
    let c = fold(sum16(&pseudo) + sum16(&udp));
    udp[6..8].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    f.extend_from_slice(&udp);
    Some(f)
}

/// A subscriber's DHCP frame as a user plane would punt it (for tests and tools): broadcast,
/// from `id.mac`, tagged with `id`'s S-VLAN and C-VLAN, 0.0.0.0:68 → 255.255.255.255:67.
pub fn client_frame(id: &Identity, msg: &DhcpRepr) -> Vec<u8> {
    let mut f =
        build_reply(id, &Reply { msg: msg.clone(), dst: Destination::Broadcast }, id.mac, Ipv4Addr::UNSPECIFIED).unwrap_or_default();
    // Swap the UDP ports (68 → 67) and fix the checksum: the same ones's-complement sum.
    if let Some(p) = f.get_mut(42..46) {
        p.copy_from_slice(&[0, 68, 0, 67]);
    }
    f
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing)]
    use super::*;
    use crate::dhcp::wire::{MessageType, Op};

    fn id() -> Identity {
        Identity { port: 3, svlan: 100, cvlan: 200, mac: [2, 0, 0, 0, 0x12, 0x34] }
    }

    fn discover() -> DhcpRepr {
        let mut m = DhcpRepr::empty(Op::BOOTREQUEST);
        m.chaddr[..6].copy_from_slice(&id().mac);
        m.options.message_type = Some(MessageType::DISCOVER);
        m
    }

    #[test]
    fn a_client_frame_reads_back_as_its_identity_and_message() {
        let f = client_frame(&id(), &discover());
        assert_eq!(&f[12..22], &[0x88, 0xa8, 0, 100, 0x81, 0, 0, 200, 8, 0]);
        let p = parse_frame(&f, 3).unwrap();
        assert_eq!(p.identity, id());
        assert_eq!(p.msg.options.message_type, Some(MessageType::DISCOVER));
        // The UDP checksum is right after the port swap (ports sum the same).
        let udp = &f[42..];
        let mut pseudo = vec![0, 0, 0, 0, 255, 255, 255, 255, 0, 17];
        pseudo.extend_from_slice(&udp[4..6]);
        assert_eq!(fold(sum16(&pseudo) + sum16(udp)), 0);
    }

    #[test]
    fn replies_go_to_the_client_with_its_tags() {
        let mut offer = discover();
        offer.op = Op::BOOTREPLY;
        let gw = [2, 0xfa, 0, 0, 0, 1];
        let r = Reply { msg: offer.clone(), dst: Destination::UnicastToMac(Ipv4Addr::new(100, 64, 0, 10), id().mac) };
        let f = build_reply(&id(), &r, gw, Ipv4Addr::new(100, 64, 0, 1)).unwrap();
        assert_eq!((&f[..6], &f[6..12]), (&id().mac[..], &gw[..]));
        assert_eq!(&f[12..22], &[0x88, 0xa8, 0, 100, 0x81, 0, 0, 200, 8, 0]);
        assert_eq!(&f[22 + 12..22 + 20], &[100, 64, 0, 1, 100, 64, 0, 10]);
        assert_eq!(fold(sum16(&f[22..42])), 0, "IPv4 header checksum");
        let b = Reply { msg: offer.clone(), dst: Destination::Broadcast };
        assert_eq!(&build_reply(&id(), &b, gw, Ipv4Addr::new(100, 64, 0, 1)).unwrap()[..6], &[0xff; 6]);
        let relay = Reply { msg: offer, dst: Destination::Relay(Ipv4Addr::new(10, 0, 0, 1)) };
        assert_eq!(build_reply(&id(), &relay, gw, Ipv4Addr::new(100, 64, 0, 1)), None);
    }

    #[test]
    fn what_is_not_a_subscribers_dhcp_frame() {
        let f = client_frame(&id(), &discover());
        for n in 0..f.len() {
            assert!(parse_frame(&f[..n], 3).is_err(), "{n}");
        }
        let mut untagged = f.clone();
        untagged.drain(12..20);
        assert_eq!(parse_frame(&untagged, 3), Err(NotDhcp::NotQinQ));
        let mut to68 = f.clone();
        to68[45] = 68;
        assert_eq!(parse_frame(&to68, 3), Err(NotDhcp::NotDhcp));
        let mut tcp = f.clone();
        tcp[22 + 9] = 6;
        assert_eq!(parse_frame(&tcp, 3), Err(NotDhcp::NotDhcp));
        let mut bad = f;
        bad[50 + 236..50 + 240].copy_from_slice(&[0; 4]); // magic cookie
        assert_eq!(parse_frame(&bad, 3), Err(NotDhcp::Malformed));
    }
}
