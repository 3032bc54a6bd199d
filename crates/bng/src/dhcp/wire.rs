//! DHCPv4 messages: the BOOTP fixed header (RFC 2131 §2) and the options of RFC 2132 the control
//! plane uses, with the relay agent information option of RFC 3046.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +---------------+---------------+---------------+---------------+
//! |     op (1)    |   htype (1)   |   hlen (1)    |   hops (1)    |
//! +---------------+---------------+---------------+---------------+
//! |                            xid (4)                            |
//! +-------------------------------+-------------------------------+
//! |           secs (2)            |           flags (2)           |
//! +-------------------------------+-------------------------------+
//! |          ciaddr (4)  yiaddr (4)  siaddr (4)  giaddr (4)       |
//! +---------------------------------------------------------------+
//! |          chaddr (16)  sname (64)  file (128)                  |
//! +---------------------------------------------------------------+
//! |          magic cookie 99.130.83.99, then options (variable)   |
//! +---------------------------------------------------------------+
//! ```
//!
//! [`DhcpRepr::parse`] checks the whole message and returns an owned [`DhcpRepr`]: this is the
//! control plane, one message per subscriber event, not the packet path. It never panics on any
//! bytes; an error is a small `Copy` [`Malformed`] naming what was wrong and the byte offset.
//!
//! Options: a code that occurs more than once is concatenated in order before it is interpreted,
//! as RFC 3396 §7 requires ("the agent receiving the options MUST concatenate them"), and
//! [`DhcpRepr::emit`] splits any option longer than 255 bytes the same way. Option overload
//! (52, RFC 2132 §9.3) would move options into `sname` / `file`; we do not support it and refuse
//! such a message with [`MalformedKind::OptionOverload`]. Options we do not interpret are kept
//! raw, in order, and emitted again. Relay agent information (82) is emitted last, as RFC 3046
//! §2.1 asks of relay agents.

use std::net::Ipv4Addr;

/// Length of the fixed BOOTP header before the magic cookie.
pub const FIXED_LEN: usize = 236;
/// The magic cookie that starts the options (RFC 2131 §3).
pub const MAGIC_COOKIE: [u8; 4] = [99, 130, 83, 99];
/// Offset of the first option.
pub const OPTIONS_OFFSET: usize = FIXED_LEN + 4;
/// Minimum BOOTP message length on the wire: RFC 1542 §3.4 notes that some relay agents and
/// clients drop shorter messages, so [`DhcpRepr::emit`] pads to it.
pub const MIN_MESSAGE_LEN: usize = 300;
/// Server port (RFC 2131 §4.1).
pub const SERVER_PORT: u16 = 67;
/// Client port.
pub const CLIENT_PORT: u16 = 68;
/// The BROADCAST bit of `flags` (RFC 2131 §2, figure 2).
pub const FLAG_BROADCAST: u16 = 0x8000;

/// BOOTP `op` (RFC 2131 §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Op(pub u8);
impl Op {
    /// A message from a client.
    pub const BOOTREQUEST: Op = Op(1);
    /// A message from a server.
    pub const BOOTREPLY: Op = Op(2);
}

/// DHCP message type, option 53 (RFC 2132 §9.6). Unknown values round-trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageType(pub u8);
impl MessageType {
    pub const DISCOVER: MessageType = MessageType(1);
    pub const OFFER: MessageType = MessageType(2);
    pub const REQUEST: MessageType = MessageType(3);
    pub const DECLINE: MessageType = MessageType(4);
    pub const ACK: MessageType = MessageType(5);
    pub const NAK: MessageType = MessageType(6);
    pub const RELEASE: MessageType = MessageType(7);
    pub const INFORM: MessageType = MessageType(8);
}

/// Option codes this module interprets (RFC 2132 section in the comment).
pub mod code {
    /// §3.1 Pad.
    pub const PAD: u8 = 0;
    /// §3.3 Subnet Mask.
    pub const SUBNET_MASK: u8 = 1;
    /// §3.5 Router.
    pub const ROUTER: u8 = 3;
    /// §3.8 Domain Name Server.
    pub const DNS: u8 = 6;
    /// §3.14 Host Name.
    pub const HOST_NAME: u8 = 12;
    /// §9.1 Requested IP Address.
    pub const REQUESTED_IP: u8 = 50;
    /// §9.2 IP Address Lease Time.
    pub const LEASE_TIME: u8 = 51;
    /// §9.3 Option Overload (refused).
    pub const OVERLOAD: u8 = 52;
    /// §9.6 DHCP Message Type.
    pub const MESSAGE_TYPE: u8 = 53;
    /// §9.7 Server Identifier.
    pub const SERVER_ID: u8 = 54;
    /// §9.8 Parameter Request List.
    pub const PARAMETER_LIST: u8 = 55;
    /// §9.9 Message.
    pub const MESSAGE: u8 = 56;
    /// §9.11 Renewal (T1) Time Value.
    pub const RENEWAL_TIME: u8 = 58;
    /// §9.12 Rebinding (T2) Time Value.
    pub const REBINDING_TIME: u8 = 59;
    /// §9.14 Client-identifier.
    pub const CLIENT_ID: u8 = 61;
    /// RFC 3046 Relay Agent Information.
    pub const RELAY_AGENT_INFO: u8 = 82;
    /// §3.2 End.
    pub const END: u8 = 255;
}

/// What was wrong with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MalformedKind {
    /// Shorter than the fixed header and cookie.
    Truncated,
    /// `hlen` above 16, the size of `chaddr`.
    BadHlen,
    /// The magic cookie is not 99.130.83.99.
    BadCookie,
    /// An option's length byte, or its data, runs past the end of the message.
    OptionTruncated,
    /// An option's length does not fit its format (e.g. a lease time that is not 4 bytes).
    BadOptionLength,
    /// Option overload (52): options in `sname` / `file`, which we do not support.
    OptionOverload,
    /// A relay agent sub-option runs past the end of option 82.
    BadRelayAgentInfo,
}

/// A decode error: what was wrong and the byte offset in the message where it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed {
    /// What was wrong.
    pub kind: MalformedKind,
    /// Offset from the start of the DHCP message (the BOOTP `op` byte).
    pub offset: usize,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} at byte {}", self.kind, self.offset)
    }
}

impl std::error::Error for Malformed {}

fn bad(kind: MalformedKind, offset: usize) -> Malformed {
    Malformed { kind, offset }
}

/// Relay agent information, option 82 (RFC 3046 §2.0): sub-options 1 (Agent Circuit ID) and 2
/// (Agent Remote ID); others are kept raw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayAgentInfo {
    /// Sub-option 1.
    pub circuit_id: Option<Vec<u8>>,
    /// Sub-option 2.
    pub remote_id: Option<Vec<u8>>,
    /// Other sub-options, `(code, data)`, in order.
    pub other: Vec<(u8, Vec<u8>)>,
}

/// Sub-option 1 of option 82.
pub const SUBOPT_CIRCUIT_ID: u8 = 1;
/// Sub-option 2 of option 82.
pub const SUBOPT_REMOTE_ID: u8 = 2;

impl RelayAgentInfo {
    /// Parses the data of option 82; `base` is its offset in the message, for errors.
    fn parse(data: &[u8], base: usize) -> Result<Self, Malformed> {
        let mut info = RelayAgentInfo::default();
        let mut i = 0usize;
        while i < data.len() {
            let code = data.get(i).copied().unwrap_or(0);
            let len = usize::from(*data.get(i + 1).ok_or(bad(MalformedKind::BadRelayAgentInfo, base + i))?);
            let value = data.get(i + 2..i + 2 + len).ok_or(bad(MalformedKind::BadRelayAgentInfo, base + i))?.to_vec();
            match code {
                SUBOPT_CIRCUIT_ID if info.circuit_id.is_none() => info.circuit_id = Some(value),
                SUBOPT_REMOTE_ID if info.remote_id.is_none() => info.remote_id = Some(value),
                _ => info.other.push((code, value)),
            }
            i += 2 + len;
        }
        Ok(info)
    }

    /// Appends the option's data (the sub-options). A sub-option longer than 255 bytes is cut to
    /// 255: sub-options have a one-byte length and no concatenation rule.
    fn emit(&self, out: &mut Vec<u8>) {
        let mut sub = |code: u8, v: &[u8]| {
            let v = v.get(..v.len().min(255)).unwrap_or(&[]);
            out.push(code);
            out.push(v.len() as u8);
            out.extend_from_slice(v);
        };
        if let Some(c) = &self.circuit_id {
            sub(SUBOPT_CIRCUIT_ID, c);
        }
        if let Some(r) = &self.remote_id {
            sub(SUBOPT_REMOTE_ID, r);
        }
        for (code, v) in &self.other {
            sub(*code, v);
        }
    }
}

/// The options of a message. `None` / empty means absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// 53.
    pub message_type: Option<MessageType>,
    /// 1.
    pub subnet_mask: Option<Ipv4Addr>,
    /// 3, in preference order.
    pub routers: Vec<Ipv4Addr>,
    /// 6, in preference order.
    pub dns: Vec<Ipv4Addr>,
    /// 12.
    pub host_name: Option<Vec<u8>>,
    /// 50.
    pub requested_ip: Option<Ipv4Addr>,
    /// 51, seconds.
    pub lease_time_s: Option<u32>,
    /// 54.
    pub server_id: Option<Ipv4Addr>,
    /// 55: the option codes the client asks for.
    pub parameter_list: Option<Vec<u8>>,
    /// 56: a text message (a NAK's reason).
    pub message: Option<Vec<u8>>,
    /// 58, seconds.
    pub renewal_time_s: Option<u32>,
    /// 59, seconds.
    pub rebinding_time_s: Option<u32>,
    /// 61: type byte then identifier.
    pub client_id: Option<Vec<u8>>,
    /// 82.
    pub relay_agent_info: Option<RelayAgentInfo>,
    /// Every other option, `(code, data)`, in order of first occurrence.
    pub unknown: Vec<(u8, Vec<u8>)>,
}

/// A DHCPv4 message, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DhcpRepr {
    pub op: Op,
    /// Hardware type (1 = Ethernet).
    pub htype: u8,
    /// Hardware address length, at most 16.
    pub hlen: u8,
    pub hops: u8,
    /// Transaction id.
    pub xid: u32,
    pub secs: u16,
    /// [`FLAG_BROADCAST`] and reserved bits.
    pub flags: u16,
    /// Client IP address (set by a client in BOUND, RENEWING or REBINDING).
    pub ciaddr: Ipv4Addr,
    /// 'your' (client) IP address.
    pub yiaddr: Ipv4Addr,
    /// Next server (TFTP).
    pub siaddr: Ipv4Addr,
    /// Relay agent IP address.
    pub giaddr: Ipv4Addr,
    /// Client hardware address, `hlen` bytes used.
    pub chaddr: [u8; 16],
    /// Server host name (kept raw).
    pub sname: [u8; 64],
    /// Boot file name (kept raw).
    pub file: [u8; 128],
    pub options: Options,
}

fn ip_at(buf: &[u8], off: usize) -> Ipv4Addr {
    let mut a = [0u8; 4];
    if let Some(s) = buf.get(off..off + 4) {
        a.copy_from_slice(s);
    }
    Ipv4Addr::from(a)
}

fn u32_of(data: &[u8], offset: usize) -> Result<u32, Malformed> {
    let a: [u8; 4] = data.try_into().map_err(|_| bad(MalformedKind::BadOptionLength, offset))?;
    Ok(u32::from_be_bytes(a))
}

fn ip_of(data: &[u8], offset: usize) -> Result<Ipv4Addr, Malformed> {
    u32_of(data, offset).map(Ipv4Addr::from)
}

fn ips_of(data: &[u8], offset: usize) -> Result<Vec<Ipv4Addr>, Malformed> {
    if data.is_empty() || !data.len().is_multiple_of(4) {
        return Err(bad(MalformedKind::BadOptionLength, offset));
    }
    Ok(data.chunks_exact(4).map(|c| Ipv4Addr::new(c[0], c[1], c[2], c[3])).collect())
}

fn nonempty(data: &[u8], min: usize, offset: usize) -> Result<Vec<u8>, Malformed> {
    if data.len() < min {
        return Err(bad(MalformedKind::BadOptionLength, offset));
    }
    Ok(data.to_vec())
}

impl DhcpRepr {
    /// A message with every field zero, `htype` Ethernet and no options.
    pub fn empty(op: Op) -> Self {
        DhcpRepr {
            op,
            htype: 1,
            hlen: 6,
            hops: 0,
            xid: 0,
            secs: 0,
            flags: 0,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            yiaddr: Ipv4Addr::UNSPECIFIED,
            siaddr: Ipv4Addr::UNSPECIFIED,
            giaddr: Ipv4Addr::UNSPECIFIED,
            chaddr: [0; 16],
            sname: [0; 64],
            file: [0; 128],
            options: Options::default(),
        }
    }

    /// The used part of `chaddr` (`hlen` bytes).
    pub fn chaddr(&self) -> &[u8] {
        self.chaddr.get(..usize::from(self.hlen).min(16)).unwrap_or(&[])
    }

    /// The client's Ethernet address: the first six bytes of `chaddr`.
    pub fn mac(&self) -> [u8; 6] {
        let mut m = [0u8; 6];
        m.copy_from_slice(&self.chaddr[..6]);
        m
    }

    /// Decodes a DHCP message (the UDP payload).
    ///
    /// # Errors
    /// [`Malformed`] with the kind and the offset of the first problem found.
    ///
    /// # Panics
    /// Never.
    pub fn parse(buf: &[u8]) -> Result<Self, Malformed> {
        if buf.len() < OPTIONS_OFFSET {
            return Err(bad(MalformedKind::Truncated, buf.len()));
        }
        let b = |i: usize| buf.get(i).copied().unwrap_or(0);
        let be16 = |i: usize| u16::from_be_bytes([b(i), b(i + 1)]);
        let hlen = b(2);
        if hlen > 16 {
            return Err(bad(MalformedKind::BadHlen, 2));
        }
        if buf.get(FIXED_LEN..OPTIONS_OFFSET) != Some(&MAGIC_COOKIE[..]) {
            return Err(bad(MalformedKind::BadCookie, FIXED_LEN));
        }
        let mut m = DhcpRepr::empty(Op(b(0)));
        m.htype = b(1);
        m.hlen = hlen;
        m.hops = b(3);
        m.xid = u32::from_be_bytes([b(4), b(5), b(6), b(7)]);
        m.secs = be16(8);
        m.flags = be16(10);
        m.ciaddr = ip_at(buf, 12);
        m.yiaddr = ip_at(buf, 16);
        m.siaddr = ip_at(buf, 20);
        m.giaddr = ip_at(buf, 24);
        m.chaddr.copy_from_slice(buf.get(28..44).unwrap_or(&[0; 16]));
        m.sname.copy_from_slice(buf.get(44..108).unwrap_or(&[0; 64]));
        m.file.copy_from_slice(buf.get(108..236).unwrap_or(&[0; 128]));

        // Pass 1: the raw options, same codes concatenated (RFC 3396), each with the offset of
        // its first occurrence.
        let mut raw: Vec<(u8, usize, Vec<u8>)> = Vec::new();
        let mut i = OPTIONS_OFFSET;
        while let Some(&c) = buf.get(i) {
            match c {
                code::PAD => i += 1,
                code::END => break,
                _ => {
                    let len = usize::from(*buf.get(i + 1).ok_or(bad(MalformedKind::OptionTruncated, i))?);
                    let data = buf.get(i + 2..i + 2 + len).ok_or(bad(MalformedKind::OptionTruncated, i))?;
                    if c == code::OVERLOAD {
                        return Err(bad(MalformedKind::OptionOverload, i));
                    }
                    match raw.iter_mut().find(|(rc, _, _)| *rc == c) {
                        Some((_, _, v)) => v.extend_from_slice(data),
                        None => raw.push((c, i, data.to_vec())),
                    }
                    i += 2 + len;
                }
            }
        }

        // Pass 2: interpret.
        let o = &mut m.options;
        for (c, off, data) in raw {
            match c {
                code::MESSAGE_TYPE => {
                    let [t] = data[..] else { return Err(bad(MalformedKind::BadOptionLength, off)) };
                    o.message_type = Some(MessageType(t));
                }
                code::SUBNET_MASK => o.subnet_mask = Some(ip_of(&data, off)?),
                code::ROUTER => o.routers = ips_of(&data, off)?,
                code::DNS => o.dns = ips_of(&data, off)?,
                code::HOST_NAME => o.host_name = Some(nonempty(&data, 1, off)?),
                code::REQUESTED_IP => o.requested_ip = Some(ip_of(&data, off)?),
                code::LEASE_TIME => o.lease_time_s = Some(u32_of(&data, off)?),
                code::SERVER_ID => o.server_id = Some(ip_of(&data, off)?),
                code::PARAMETER_LIST => o.parameter_list = Some(nonempty(&data, 1, off)?),
                code::MESSAGE => o.message = Some(nonempty(&data, 1, off)?),
                code::RENEWAL_TIME => o.renewal_time_s = Some(u32_of(&data, off)?),
                code::REBINDING_TIME => o.rebinding_time_s = Some(u32_of(&data, off)?),
                code::CLIENT_ID => o.client_id = Some(nonempty(&data, 2, off)?),
                code::RELAY_AGENT_INFO => {
                    // Sub-option errors point into the option data (2 bytes after its code).
                    o.relay_agent_info = Some(RelayAgentInfo::parse(&nonempty(&data, 2, off)?, off + 2)?)
                }
                _ => o.unknown.push((c, data)),
            }
        }
        Ok(m)
    }

    /// Appends the encoded message to `out`: fixed header, cookie, options, End, zero padding
    /// up to [`MIN_MESSAGE_LEN`].
    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[self.op.0, self.htype, self.hlen, self.hops]);
        out.extend_from_slice(&self.xid.to_be_bytes());
        out.extend_from_slice(&self.secs.to_be_bytes());
        out.extend_from_slice(&self.flags.to_be_bytes());
        for a in [self.ciaddr, self.yiaddr, self.siaddr, self.giaddr] {
            out.extend_from_slice(&a.octets());
        }
        out.extend_from_slice(&self.chaddr);
        out.extend_from_slice(&self.sname);
        out.extend_from_slice(&self.file);
        out.extend_from_slice(&MAGIC_COOKIE);

        let o = &self.options;
        if let Some(t) = o.message_type {
            put(out, code::MESSAGE_TYPE, &[t.0]);
        }
        if let Some(a) = o.server_id {
            put(out, code::SERVER_ID, &a.octets());
        }
        if let Some(t) = o.lease_time_s {
            put(out, code::LEASE_TIME, &t.to_be_bytes());
        }
        if let Some(t) = o.renewal_time_s {
            put(out, code::RENEWAL_TIME, &t.to_be_bytes());
        }
        if let Some(t) = o.rebinding_time_s {
            put(out, code::REBINDING_TIME, &t.to_be_bytes());
        }
        if let Some(a) = o.subnet_mask {
            put(out, code::SUBNET_MASK, &a.octets());
        }
        put_ips(out, code::ROUTER, &o.routers);
        put_ips(out, code::DNS, &o.dns);
        if let Some(a) = o.requested_ip {
            put(out, code::REQUESTED_IP, &a.octets());
        }
        for (c, v) in [
            (code::HOST_NAME, &o.host_name),
            (code::PARAMETER_LIST, &o.parameter_list),
            (code::MESSAGE, &o.message),
            (code::CLIENT_ID, &o.client_id),
        ] {
            if let Some(v) = v {
                put(out, c, v);
            }
        }
        for (c, v) in &o.unknown {
            put(out, *c, v);
        }
        if let Some(info) = &o.relay_agent_info {
            let mut data = Vec::new();
            info.emit(&mut data);
            put(out, code::RELAY_AGENT_INFO, &data);
        }
        out.push(code::END);
        while out.len() - start < MIN_MESSAGE_LEN {
            out.push(code::PAD);
        }
    }

    /// The encoded message in a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(MIN_MESSAGE_LEN);
        self.emit(&mut v);
        v
    }
}

/// Writes one option; data longer than 255 bytes is split into consecutive instances of the same
/// code (RFC 3396 §6). An empty value is written with length 0.
fn put(out: &mut Vec<u8>, c: u8, data: &[u8]) {
    if data.is_empty() {
        out.extend_from_slice(&[c, 0]);
        return;
    }
    for chunk in data.chunks(255) {
        out.push(c);
        out.push(chunk.len() as u8);
        out.extend_from_slice(chunk);
    }
}

fn put_ips(out: &mut Vec<u8>, c: u8, ips: &[Ipv4Addr]) {
    if ips.is_empty() {
        return;
    }
    let data: Vec<u8> = ips.iter().flat_map(|a| a.octets()).collect();
    put(out, c, &data);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DHCPDISCOVER as busybox udhcpc 1.35 sends it (fields from RFC 2131 §2; options: 53
    /// DISCOVER, 61 client id, 57 max size, 55 parameter list), padded after End.
    fn discover_bytes() -> Vec<u8> {
        let mut v = vec![
            1, 1, 6, 0, // op BOOTREQUEST, htype Ethernet, hlen 6, hops 0
            0x12, 0x34, 0x56, 0x78, // xid
            0, 3, 0x80, 0, // secs 3, flags BROADCAST
        ];
        v.extend_from_slice(&[0; 16]); // ciaddr, yiaddr, siaddr, giaddr
        v.extend_from_slice(&[2, 0, 0, 0, 0, 1]); // chaddr
        v.extend_from_slice(&[0; 10 + 64 + 128]); // chaddr padding, sname, file
        v.extend_from_slice(&MAGIC_COOKIE);
        v.extend_from_slice(&[53, 1, 1]); // message type DISCOVER
        v.extend_from_slice(&[61, 7, 1, 2, 0, 0, 0, 0, 1]); // client id: type 1 + MAC
        v.extend_from_slice(&[57, 2, 0x02, 0x40]); // max message size 576 (kept raw)
        v.extend_from_slice(&[55, 4, 1, 3, 6, 51]); // parameter list
        v.extend_from_slice(&[50, 4, 198, 18, 0, 20]); // requested IP
        v.extend_from_slice(&[82, 14, 1, 6, b'1', b'/', b'2', b'/', b'3', b'4', 2, 4, 2, 0, 0, 1]); // 82
        v.push(255);
        v.resize(300, 0);
        v
    }

    #[test]
    fn bytes_to_fields() {
        let m = DhcpRepr::parse(&discover_bytes()).unwrap();
        assert_eq!(m.op, Op::BOOTREQUEST);
        assert_eq!(m.xid, 0x1234_5678);
        assert_eq!(m.secs, 3);
        assert_eq!(m.flags, FLAG_BROADCAST);
        assert_eq!(m.chaddr(), &[2, 0, 0, 0, 0, 1]);
        assert_eq!(m.options.message_type, Some(MessageType::DISCOVER));
        assert_eq!(m.options.client_id.as_deref(), Some(&[1, 2, 0, 0, 0, 0, 1][..]));
        assert_eq!(m.options.parameter_list.as_deref(), Some(&[1, 3, 6, 51][..]));
        assert_eq!(m.options.requested_ip, Some(Ipv4Addr::new(198, 18, 0, 20)));
        assert_eq!(m.options.unknown, vec![(57, vec![0x02, 0x40])]);
        let info = m.options.relay_agent_info.unwrap();
        assert_eq!(info.circuit_id.as_deref(), Some(&b"1/2/34"[..]));
        assert_eq!(info.remote_id.as_deref(), Some(&[2, 0, 0, 1][..]));
    }

    #[test]
    fn fields_to_bytes() {
        let mut m = DhcpRepr::empty(Op::BOOTREPLY);
        m.xid = 0xdead_beef;
        m.yiaddr = Ipv4Addr::new(198, 18, 0, 10);
        m.chaddr[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        m.options.message_type = Some(MessageType::OFFER);
        m.options.server_id = Some(Ipv4Addr::new(198, 18, 0, 1));
        m.options.lease_time_s = Some(3600);
        m.options.routers = vec![Ipv4Addr::new(198, 18, 0, 1)];
        let mut out = vec![0xA5; 3]; // emit appends: what was there stays
        m.emit(&mut out);
        assert_eq!(&out[..3], &[0xA5; 3]);
        let b = &out[3..];
        assert_eq!(b.len(), MIN_MESSAGE_LEN);
        assert_eq!(&b[..4], &[2, 1, 6, 0]);
        assert_eq!(&b[4..8], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(&b[16..20], &[198, 18, 0, 10]);
        assert_eq!(&b[236..240], &MAGIC_COOKIE);
        assert_eq!(&b[240..243], &[53, 1, 2]);
        assert_eq!(&b[243..249], &[54, 4, 198, 18, 0, 1]);
        assert_eq!(&b[249..255], &[51, 4, 0, 0, 0x0e, 0x10]);
        assert_eq!(&b[255..261], &[3, 4, 198, 18, 0, 1]);
        assert_eq!(b[261], 255);
        assert!(b[262..].iter().all(|&x| x == 0));
    }

    #[test]
    fn repr_round_trip() {
        let m = DhcpRepr::parse(&discover_bytes()).unwrap();
        let again = DhcpRepr::parse(&m.to_bytes()).unwrap();
        assert_eq!(m, again);
    }

    #[test]
    fn every_truncation_is_an_error_or_a_prefix() {
        let full = discover_bytes();
        // Cutting inside the fixed header or inside an option is an error; cutting between two
        // options or after the last one still parses (we do not insist on End).
        let boundaries = [240, 243, 252, 256, 262, 268];
        for n in 0..full.len() {
            match DhcpRepr::parse(&full[..n]) {
                Ok(_) => assert!(boundaries.contains(&n) || n >= 284, "prefix of {n} bytes parsed"),
                Err(e) => {
                    assert!(n < 284 && !boundaries.contains(&n), "prefix of {n} bytes refused: {e}");
                    assert!(e.offset <= n, "offset {} past the {n} bytes", e.offset);
                }
            }
        }
    }

    #[test]
    fn each_malformed_kind() {
        let good = discover_bytes();
        assert_eq!(DhcpRepr::parse(&good[..100]), Err(Malformed { kind: MalformedKind::Truncated, offset: 100 }));
        let mut v = good.clone();
        v[2] = 17;
        assert_eq!(DhcpRepr::parse(&v).unwrap_err(), Malformed { kind: MalformedKind::BadHlen, offset: 2 });
        let mut v = good.clone();
        v[237] = 0;
        assert_eq!(DhcpRepr::parse(&v).unwrap_err(), Malformed { kind: MalformedKind::BadCookie, offset: 236 });
        let mut v = good[..240].to_vec();
        v.extend_from_slice(&[53, 5, 1]); // says 5 bytes, has 1
        assert_eq!(DhcpRepr::parse(&v).unwrap_err(), Malformed { kind: MalformedKind::OptionTruncated, offset: 240 });
        let mut v = good[..240].to_vec();
        v.push(53); // no length byte
        assert_eq!(DhcpRepr::parse(&v).unwrap_err(), Malformed { kind: MalformedKind::OptionTruncated, offset: 240 });
        let mut v = good[..240].to_vec();
        v.extend_from_slice(&[53, 1, 1, 51, 2, 0, 1, 255]); // lease time of 2 bytes
        assert_eq!(DhcpRepr::parse(&v).unwrap_err(), Malformed { kind: MalformedKind::BadOptionLength, offset: 243 });
        let mut v = good[..240].to_vec();
        v.extend_from_slice(&[53, 1, 1, 52, 1, 3, 255]); // overload: options in sname and file
        assert_eq!(DhcpRepr::parse(&v).unwrap_err(), Malformed { kind: MalformedKind::OptionOverload, offset: 243 });
        let mut v = good[..240].to_vec();
        v.extend_from_slice(&[82, 4, 1, 6, b'a', b'b', 255]); // circuit id says 6, has 2
        assert_eq!(DhcpRepr::parse(&v).unwrap_err(), Malformed { kind: MalformedKind::BadRelayAgentInfo, offset: 242 });
    }

    #[test]
    fn repeated_options_concatenate_and_long_options_split() {
        let mut v = discover_bytes()[..240].to_vec();
        v.extend_from_slice(&[12, 3, b'a', b'b', b'c', 53, 1, 3, 12, 2, b'd', b'e', 255]);
        let m = DhcpRepr::parse(&v).unwrap();
        assert_eq!(m.options.host_name.as_deref(), Some(&b"abcde"[..]));
        let mut long = m.clone();
        long.options.host_name = Some(vec![b'x'; 300]);
        let bytes = long.to_bytes();
        // 300 bytes go out as 255 + 45 under the same code.
        let i = bytes.windows(2).position(|w| w == [12, 255]).unwrap();
        assert_eq!(&bytes[i + 257..i + 259], &[12, 45]);
        assert_eq!(DhcpRepr::parse(&bytes).unwrap(), long);
    }

    #[test]
    fn unknown_message_type_round_trips() {
        let mut m = DhcpRepr::empty(Op::BOOTREQUEST);
        m.options.message_type = Some(MessageType(200));
        m.options.unknown = vec![(224, vec![]), (43, vec![1, 2, 3])];
        assert_eq!(DhcpRepr::parse(&m.to_bytes()).unwrap(), m);
    }
}
