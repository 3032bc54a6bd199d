//! perfdhcp (Kea's DHCP load generator, Debian `kea-admin`) through the user plane.
//!
//! ```text
//!  ns fp-bperf-P-n              access ns (bng-dhcp's)                                        user plane ▸ CPRi ▸ bng-cp
//!  perfdhcp 198.19.0.2 ══ veth ══ pf0 198.19.0.1:67 ┐ lab relay line ┌ rl0 (raw) ══ veth ══ rl1 ─ br0 ─ upl0 ══ acc0 …
//!  relayed DHCP (giaddr)         UDP  ◀────────────┘   S-VLAN 98,    └─ Q-in-Q client frames (src MAC = chaddr)
//!                                                       C-VLAN 1
//! ```
//!
//! perfdhcp speaks DHCPv4 as a relay agent only: every message carries its `giaddr` and goes to
//! port 67 of the server it is given, and it expects the replies relayed back. The control
//! plane takes DHCP only as subscribers' frames from a user plane. So the lab puts a relay line
//! between them, as an access node would: each relayed message becomes the client frame of a
//! subscriber on S-VLAN 98 / C-VLAN 1 with perfdhcp's client MAC (`chaddr`) as its source —
//! `giaddr` and `hops` cleared, from 0.0.0.0:68 to 255.255.255.255:67 — and enters the user
//! plane's access port through the same bridge as the real clients; the reply frame (to that
//! MAC, tagged) is turned back into a relayed reply (`giaddr` restored) to perfdhcp. So what is
//! measured is the whole path of a real client's lease: the user plane's punt, the CPRi in both
//! directions, the DHCP server, the store, and the PFCP session establishment on the user plane,
//! for every simulated client. The relay line itself is two packet copies in the lab.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use fastpath_io::af_packet::RawSocket;
use fastpath_io::netns::{Netns, VethPair};
use fastpath_packet::build::FrameBuilder;

use super::dhcp_hosts::Hosts;
use crate::LabError;

/// The relay line's S-VLAN.
pub const RELAY_SVLAN: u16 = 98;
/// The relay line's C-VLAN.
pub const RELAY_CVLAN: u16 = 1;
/// The lab relay's address (perfdhcp's server).
pub const RELAY_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);
/// perfdhcp's address (its giaddr).
pub const PERFDHCP_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);

/// BOOTP fields (RFC 2131 §2).
const HOPS: usize = 3;
const GIADDR: usize = 24;
const CHADDR: usize = 28;
/// The fixed part and the magic cookie.
const MIN_DHCP: usize = 240;

/// What perfdhcp reported.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PerfdhcpResult {
    /// `"bng-dhcp-perfdhcp"`.
    pub measurement: &'static str,
    /// Offered rate, exchanges per second (`-r`).
    pub rate: u32,
    /// Test period, seconds (`-p`).
    pub seconds: u32,
    /// Complete 4-way exchanges (ACKs received) per second of the test period.
    pub dora_per_s: f64,
    /// perfdhcp's own "Rate:" line (its elapsed time includes the 1 s wait for late answers).
    pub perfdhcp_rate: f64,
    /// DISCOVERs sent.
    pub discovers_sent: u64,
    /// OFFERs received.
    pub offers_received: u64,
    /// REQUESTs sent.
    pub requests_sent: u64,
    /// ACKs received (complete exchanges).
    pub acks_received: u64,
    /// Exchanges perfdhcp counted as lost (both kinds).
    pub drops: u64,
    /// UDP datagrams the kernel dropped in the user plane's namespace during the run because a
    /// socket's receive buffer was full (`/proc/net/snmp` Udp RcvbufErrors): the control
    /// plane's CPRi socket is the one that receives there at these rates.
    pub udp_rcvbuf_errors: u64,
    /// UDP losses per socket during the run (`/proc/net/udp` drops) in the user plane's
    /// namespace (`up`: both processes), the access namespace (`access`: the lab relay's
    /// 198.19.0.1:67) and perfdhcp's (`perfdhcp`): the namespace, the local address:port (and
    /// the peer's when connected), and the datagrams dropped. Only sockets that dropped any.
    pub udp_drops_by_socket: Vec<(String, u64)>,
    /// Messages the lab relay carried up and down.
    pub relayed_up: u64,
    /// Replies relayed back.
    pub relayed_down: u64,
    /// The command.
    pub command: String,
}

/// A relayed message as the subscriber frame the user plane takes; None when it is too short
/// to be DHCP.
pub fn client_frame(relayed: &[u8]) -> Option<Vec<u8>> {
    if relayed.len() < MIN_DHCP || relayed.first() != Some(&1) {
        return None;
    }
    let mut m = relayed.to_vec();
    m[HOPS] = 0;
    m[GIADDR..GIADDR + 4].fill(0);
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&m[CHADDR..CHADDR + 6]);
    Some(
        FrameBuilder::eth([0xff; 6], mac)
            .qinq(RELAY_SVLAN, RELAY_CVLAN)
            .ipv4(Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST)
            .udp(68, 67)
            .payload(&m)
            .build(),
    )
}

/// The DHCP message of a reply frame from the user plane (Q-in-Q, IPv4, UDP 67 ▸ 68, our
/// line's tags), with `giaddr` set; None for any other frame.
pub fn relayed_reply(frame: &[u8], giaddr: Ipv4Addr) -> Option<Vec<u8>> {
    let tag = |at: usize| frame.get(at..at + 4).map(|t| (u16::from_be_bytes([t[0], t[1]]), u16::from_be_bytes([t[2], t[3]]) & 0xfff));
    if tag(12)? != (0x88a8, RELAY_SVLAN) || tag(16)? != (0x8100, RELAY_CVLAN) || frame.get(20..22)? != [0x08, 0x00] {
        return None;
    }
    let ip = frame.get(22..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    if ip.first()? >> 4 != 4 || ihl < 20 || *ip.get(9)? != 17 {
        return None;
    }
    let udp = ip.get(ihl..)?;
    if udp.get(0..4)? != [0, 67, 0, 68] {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([*udp.get(4)?, *udp.get(5)?]));
    let m = udp.get(8..len.max(8))?;
    if m.len() < MIN_DHCP || m[0] != 2 {
        return None;
    }
    let mut m = m.to_vec();
    m[GIADDR..GIADDR + 4].copy_from_slice(&giaddr.octets());
    Some(m)
}

/// Each UDP socket (IPv4) of the namespaces `ns`: (inode, "name local" or "name local ▸ peer",
/// drops).
fn udp_socket_drops(ns: &[(&str, &Netns)]) -> Vec<(u64, String, u64)> {
    let mut v = Vec::new();
    for (name, n) in ns {
        let t = n.exec("cat", &["/proc/net/udp"]).unwrap_or_default();
        v.extend(parse_proc_net_udp(&t).into_iter().map(|(i, s, d)| (i, format!("{name} {s}"), d)));
    }
    v
}

/// `/proc/net/udp` lines: `sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref ptr
/// drops`, addresses as `0100007F:0868` (the IPv4 address in host order, little-endian here).
fn parse_proc_net_udp(text: &str) -> Vec<(u64, String, u64)> {
    let addr = |h: &str| -> Option<String> {
        let (ip, port) = h.split_once(':')?;
        let ip = u32::from_str_radix(ip, 16).ok()?;
        let port = u16::from_str_radix(port, 16).ok()?;
        Some(format!("{}:{port}", Ipv4Addr::from(ip.swap_bytes())))
    };
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (local, peer) = (addr(f.get(1)?)?, addr(f.get(2)?)?);
            let inode = f.get(9)?.parse().ok()?;
            let drops = f.get(12)?.parse().ok()?;
            let name = if peer == "0.0.0.0:0" { local } else { format!("{local} ▸ {peer}") };
            Some((inode, name, drops))
        })
        .collect()
}

/// What each socket dropped between `before` and `after` (sockets that dropped any).
fn drops_between(before: &[(u64, String, u64)], after: &[(u64, String, u64)]) -> Vec<(String, u64)> {
    after
        .iter()
        .filter_map(|(inode, name, n)| {
            let was = before.iter().find(|b| b.0 == *inode).map_or(0, |b| b.2);
            (*n > was).then(|| (name.clone(), n - was))
        })
        .collect()
}

/// `Udp: … RcvbufErrors` of namespace `ns` (0 when it cannot be read).
fn udp_rcvbuf_errors(ns: &Netns) -> u64 {
    ns.exec("cat", &["/proc/net/snmp"]).map_or(0, |t| snmp_udp(&t, "RcvbufErrors"))
}

/// A `Udp:` counter of `/proc/net/snmp` text (a header line of names, then one of values).
fn snmp_udp(text: &str, name: &str) -> u64 {
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else { return 0 };
    names.split_whitespace().zip(values.split_whitespace()).find(|(n, _)| *n == name).and_then(|(_, v)| v.parse().ok()).unwrap_or(0)
}

/// Parses perfdhcp's final statistics.
pub fn parse_perfdhcp(out: &str, r: &mut PerfdhcpResult) {
    let mut section = "";
    for l in out.lines() {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("Rate:") {
            r.dora_per_s = rest.split_whitespace().next().and_then(|x| x.parse().ok()).unwrap_or(0.0);
        } else if l.starts_with("***Statistics for:") {
            section = if l.contains("DISCOVER-OFFER") {
                "do"
            } else if l.contains("REQUEST-ACK") {
                "ra"
            } else {
                ""
            };
        } else if let Some((k, v)) = l.split_once(':') {
            let Ok(n) = v.trim().parse::<u64>() else { continue };
            match (section, k.trim()) {
                ("do", "sent packets") => r.discovers_sent = n,
                ("do", "received packets") => r.offers_received = n,
                ("ra", "sent packets") => r.requests_sent = n,
                ("ra", "received packets") => r.acks_received = n,
                ("do" | "ra", "drops") => r.drops += n,
                _ => {}
            }
        }
    }
}

/// Runs perfdhcp at each of `rates` exchanges per second, `seconds` each, through the relay line
/// of `hosts` (see the module doc).
///
/// # Errors
/// [`LabError::Unavailable`] when perfdhcp is not installed; namespace or socket failures.
pub fn run_perfdhcp(
    hosts: &Hosts,
    rates: &[u32],
    seconds: u32,
    dir: &std::path::Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<PerfdhcpResult>, LabError> {
    if std::process::Command::new("perfdhcp").arg("-h").output().is_err() {
        return Err(LabError::Unavailable {
            dut: "perfdhcp".into(),
            why: "not installed; scripts/setup-lab.sh installs it (Debian kea-admin)".into(),
        });
    }
    let perf = Netns::new("fp-bperf")?;
    let _v1 = VethPair::new(&perf, "eth0", &hosts.access, "pf0")?;
    let _v2 = VethPair::new(&hosts.access, "rl0", &hosts.access, "rl1")?;
    perf.link_up("eth0")?;
    perf.add_addr("eth0", &format!("{PERFDHCP_IP}/24"))?;
    for i in ["pf0", "rl0", "rl1"] {
        hosts.access.link_up(i)?;
    }
    hosts.access.add_addr("pf0", &format!("{RELAY_IP}/24"))?;
    hosts.access.ip(&["link", "set", "rl1", "master", "br0"])?;
    // The new bridge port forwards after a moment: perfdhcp starts once the line works.
    let line = (RELAY_SVLAN, RELAY_CVLAN, [0x02, 0x5b, 0xff, 0xff, 0xff, 0xfd]);
    if !super::dhcp_hosts::gateway_answers(&hosts.access, "rl0", line, Duration::from_secs(10))? {
        return Err(LabError::Io("the relay line: no ARP answer from the user plane within 10 s".into()));
    }
    let (udp, raw) = hosts.access.run(|| -> Result<(UdpSocket, RawSocket), LabError> {
        let u = UdpSocket::bind(SocketAddrV4::new(RELAY_IP, 67)).map_err(|e| LabError::Io(format!("relay {RELAY_IP}:67: {e}")))?;
        u.set_read_timeout(Some(Duration::from_millis(100))).map_err(|e| LabError::Io(e.to_string()))?;
        let r = RawSocket::open("rl0").map_err(|e| LabError::Io(format!("relay rl0: {e}")))?;
        Ok((u, r))
    })??;
    let stop = AtomicBool::new(false);
    let (up_n, down_n) = (AtomicU64::new(0), AtomicU64::new(0));
    let mut results = Vec::new();
    std::thread::scope(|sc| -> Result<(), LabError> {
        sc.spawn(|| {
            let mut buf = vec![0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                let Ok((n, _)) = udp.recv_from(&mut buf) else { continue };
                if let Some(f) = buf.get(..n).and_then(client_frame) {
                    if raw.send(&f).is_ok() {
                        up_n.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        sc.spawn(|| {
            let mut buf = vec![0u8; 2048];
            let to = SocketAddrV4::new(PERFDHCP_IP, 67);
            while !stop.load(Ordering::Relaxed) {
                let Ok(Some(n)) = raw.recv(&mut buf, 100) else { continue };
                if let Some(m) = buf.get(..n).and_then(|f| relayed_reply(f, PERFDHCP_IP)) {
                    if udp.send_to(&m, to).is_ok() {
                        down_n.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        let res = (|| {
            for (k, &rate) in rates.iter().enumerate() {
                if crate::topo::interrupted() {
                    return Err(LabError::Interrupted);
                }
                let clients = (u64::from(rate) * u64::from(seconds)).clamp(1, 50_000);
                // Each rate its own clients (MAC base 00:0c:0k:…), so none renews a lease of
                // the rate before. -W: after the period, wait 1 s for answers still on their
                // way (else counted lost).
                let cmd = format!(
                    "perfdhcp -4 -r {rate} -p {seconds} -R {clients} -b mac=00:0c:{:02x}:00:00:00 -W 1000000 -l {PERFDHCP_IP} {RELAY_IP}",
                    k + 1
                );
                progress(&format!("bng-dhcp: {cmd}"));
                up_n.store(0, Ordering::Relaxed);
                down_n.store(0, Ordering::Relaxed);
                let overflows_before = udp_rcvbuf_errors(&hosts.up);
                let namespaces = [("up", &hosts.up), ("access", &hosts.access), ("perfdhcp", &perf)];
                let sockets_before = udp_socket_drops(&namespaces);
                let limit = (seconds + 30).to_string();
                let out = std::process::Command::new("ip")
                    .args(["netns", "exec", perf.name(), "timeout", &limit])
                    .args(cmd.split_whitespace())
                    .output()
                    .map_err(|e| LabError::Io(format!("perfdhcp: {e}")))?;
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                let _ = std::fs::write(dir.join(format!("perfdhcp-{rate}.txt")), &text);
                let mut r = PerfdhcpResult {
                    measurement: "bng-dhcp-perfdhcp",
                    rate,
                    seconds,
                    relayed_up: up_n.load(Ordering::Relaxed),
                    relayed_down: down_n.load(Ordering::Relaxed),
                    udp_rcvbuf_errors: udp_rcvbuf_errors(&hosts.up).saturating_sub(overflows_before),
                    udp_drops_by_socket: drops_between(&sockets_before, &udp_socket_drops(&namespaces)),
                    command: cmd,
                    ..PerfdhcpResult::default()
                };
                parse_perfdhcp(&text, &mut r);
                // perfdhcp's own rate divides by the wait (-W) too; the figure is the exchanges
                // completed in the test period.
                r.perfdhcp_rate = r.dora_per_s;
                r.dora_per_s = r.acks_received as f64 / f64::from(seconds.max(1));
                progress(&format!(
                    "bng-dhcp: perfdhcp at {rate}/s: {:.0} DORA/s ({} DISCOVERs, {} OFFERs, {} REQUESTs, {} ACKs, {} drops; relayed {} up, {} down; {} UDP receive-buffer overflows in the user plane's namespace; UDP drops by socket: {})",
                    r.dora_per_s,
                    r.discovers_sent,
                    r.offers_received,
                    r.requests_sent,
                    r.acks_received,
                    r.drops,
                    r.relayed_up,
                    r.relayed_down,
                    r.udp_rcvbuf_errors,
                    if r.udp_drops_by_socket.is_empty() {
                        "none".to_string()
                    } else {
                        r.udp_drops_by_socket.iter().map(|(s, n)| format!("{n} at {s}")).collect::<Vec<_>>().join(", ")
                    }
                ));
                if r.discovers_sent == 0 {
                    progress(&format!("bng-dhcp: perfdhcp said:\n{}\n{}", text.trim(), String::from_utf8_lossy(&out.stderr).trim()));
                }
                results.push(r);
            }
            Ok(())
        })();
        stop.store(true, Ordering::Relaxed);
        res
    })?;
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relayed_discover() -> Vec<u8> {
        let mut m = vec![0u8; 244];
        m[0] = 1; // BOOTREQUEST
        m[1] = 1;
        m[2] = 6;
        m[3] = 1; // one hop
        m[GIADDR..GIADDR + 4].copy_from_slice(&PERFDHCP_IP.octets());
        m[CHADDR..CHADDR + 6].copy_from_slice(&[0x00, 0x0c, 0x01, 0x02, 0x03, 0x04]);
        m[236..240].copy_from_slice(&[99, 130, 83, 99]);
        m[240..244].copy_from_slice(&[53, 1, 1, 255]);
        m
    }

    #[test]
    fn a_relayed_message_becomes_the_tagged_client_frame_and_its_reply_comes_back_relayed() {
        let f = client_frame(&relayed_discover()).unwrap();
        assert_eq!(&f[..6], &[0xff; 6]);
        assert_eq!(&f[6..12], &[0x00, 0x0c, 0x01, 0x02, 0x03, 0x04], "from the client's MAC");
        assert_eq!(&f[12..22], &[0x88, 0xa8, 0, 98, 0x81, 0x00, 0, 1, 0x08, 0x00]);
        assert_eq!(&f[22 + 12..22 + 20], &[0, 0, 0, 0, 255, 255, 255, 255]);
        assert_eq!(&f[42..46], &[0, 68, 0, 67]);
        let m = &f[50..];
        assert_eq!(m[HOPS], 0);
        assert_eq!(&m[GIADDR..GIADDR + 4], &[0; 4], "giaddr cleared: a client's own message");
        // The reply the user plane sends back: the same frame turned around.
        let mut reply = m.to_vec();
        reply[0] = 2;
        let back = FrameBuilder::eth([0x00, 0x0c, 0x01, 0x02, 0x03, 0x04], [0x02, 0xfa, 0, 0, 0, 1])
            .qinq(RELAY_SVLAN, RELAY_CVLAN)
            .ipv4(Ipv4Addr::new(100, 64, 0, 1), Ipv4Addr::new(100, 64, 1, 9))
            .udp(67, 68)
            .payload(&reply)
            .build();
        let r = relayed_reply(&back, PERFDHCP_IP).unwrap();
        assert_eq!(r.len(), reply.len());
        assert_eq!(&r[GIADDR..GIADDR + 4], &PERFDHCP_IP.octets());
        // Not ours: another line, a request, junk.
        let other = FrameBuilder::eth([0; 6], [0; 6])
            .qinq(100, 1)
            .ipv4(Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST)
            .udp(67, 68)
            .payload(&reply)
            .build();
        assert!(relayed_reply(&other, PERFDHCP_IP).is_none());
        assert!(relayed_reply(&f, PERFDHCP_IP).is_none(), "a client's frame is not a reply");
        assert!(client_frame(&reply).is_none(), "a reply is not relayed up");
    }

    #[test]
    fn no_frame_breaks_the_reply_parser() {
        // A bounded fuzz loop: every truncation and byte flip of a good reply frame.
        let mut reply = relayed_discover();
        reply[0] = 2;
        let good = FrameBuilder::eth([2; 6], [2; 6])
            .qinq(RELAY_SVLAN, RELAY_CVLAN)
            .ipv4(Ipv4Addr::new(100, 64, 0, 1), Ipv4Addr::new(100, 64, 1, 9))
            .udp(67, 68)
            .payload(&reply)
            .build();
        for n in 0..good.len() {
            let _ = relayed_reply(&good[..n], PERFDHCP_IP);
            let _ = client_frame(&good[..n]);
        }
        let mut x: u32 = 0x1234_5678;
        for _ in 0..20_000 {
            let mut f = good.clone();
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let at = x as usize % f.len();
                f[at] = (x >> 8) as u8;
            }
            let _ = relayed_reply(&f, PERFDHCP_IP);
            let _ = client_frame(&f[50..]);
        }
    }

    #[test]
    fn snmp_udp_counters_parse() {
        let t = "Ip: Forwarding\nIp: 1\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdp: 22565 0 2288 24853 2288\nUdpLite: InDatagrams\nUdpLite: 0\n";
        // /proc/net/udp as this kernel writes it: a listening socket on 127.0.0.1:2152 and one
        // connected from 127.0.0.1:40000 to it.
        let before = parse_proc_net_udp(concat!(
            "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n",
            " 1: 0100007F:0868 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 5001 2 0000000000000000 10\n",
            " 2: 0100007F:9C40 0100007F:0868 01 00000000:00000000 00:00000000 00000000     0        0 5002 2 0000000000000000 0\n",
        ));
        assert_eq!(before, [(5001, "127.0.0.1:2152".to_string(), 10), (5002, "127.0.0.1:40000 ▸ 127.0.0.1:2152".to_string(), 0)]);
        let mut after = before.clone();
        after[0].2 = 25;
        assert_eq!(drops_between(&before, &after), [("127.0.0.1:2152".to_string(), 15)]);
        assert_eq!(snmp_udp(t, "RcvbufErrors"), 2288);
        assert_eq!(snmp_udp(t, "NoSuch"), 0);
        assert_eq!(snmp_udp("", "RcvbufErrors"), 0);
    }

    #[test]
    fn perfdhcp_statistics_parse() {
        let out = "***Rate statistics***\nRate: 4987.5 4-way exchanges/second, expected rate: 5000\n\n\
            ***Statistics for: DISCOVER-OFFER***\nsent packets: 25000\nreceived packets: 24990\ndrops: 10\n\
            drops ratio: 0.04 %\norphans: 0\n\n***Statistics for: REQUEST-ACK***\nsent packets: 24990\n\
            received packets: 24990\ndrops: 0\n";
        let mut r = PerfdhcpResult::default();
        parse_perfdhcp(out, &mut r);
        assert_eq!((r.discovers_sent, r.offers_received, r.requests_sent, r.acks_received, r.drops), (25000, 24990, 24990, 24990, 10));
        assert_eq!(r.dora_per_s, 4987.5);
    }
}
