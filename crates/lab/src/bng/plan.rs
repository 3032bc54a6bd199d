//! The numbering of the broadband lab: subscriber `i` on the access side, core endpoint `e` on
//! the core side, the gateway between them, and the frames each sends.
//!
//! ```text
//!  access (fastpath port 0)                 gateway                 core (fastpath port 1)
//!  subscriber i                         02:fa:00:00:00:01            endpoint e = 1..=254
//!  S-VLAN 100 + i/4000 (TPID 0x88a8)      100.64.0.1                 VLAN 10 (TPID 0x8100)
//!  C-VLAN 1 + i%4000   (TPID 0x8100)                                 198.18.0.e
//!  02:5b:00:ii:ii:ii, 100.64.1.0 + i                                 02:c0:00:00:00:ee
//!
//!  upstream:   [gw | sub.mac | 88a8 S | 8100 C | sub.ip  → 198.18.0.e | UDP] ──▶
//!  downstream: ◀── [gw | ep.mac | 8100 10 | 198.18.0.e → sub.ip | UDP]
//! ```
//!
//! Upstream frames are addressed to the gateway at layer 2 and to the endpoint at layer 3;
//! downstream frames come from the core to the gateway's MAC on VLAN 10, addressed to the
//! subscriber's IPv4 address. Sessions and core routes are loaded with `fastpath ctl -f` from
//! [`session_commands`] and [`route_commands`] before traffic starts.
//!
//! Frame sizes follow RFC 2544 as in [`crate::gen`]: the size counts the 4-byte FCS, which is
//! not part of the bytes handed to the kernel. The UDP payload starts with the generator's
//! payload header ([`crate::gen::write_header`]'s layout) so probes can be recognised.

use std::fmt::Write as _;
use std::net::Ipv4Addr;

use fastpath_packet::build::FrameBuilder;

use crate::gen::{FCS_LEN, HDR_LEN, MAGIC};

/// The gateway's MAC address (the DUT's, on both sides).
pub const GATEWAY_MAC: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 1];
/// The gateway's IPv4 address on the access side.
pub const GATEWAY_IP: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);
/// The core VLAN (TPID 0x8100).
pub const CORE_VLAN: u16 = 10;
/// The gateway's access port (fastpath port 0).
pub const ACCESS_PORT: u16 = 0;
/// The gateway's core port (fastpath port 1).
pub const CORE_PORT: u16 = 1;
/// The first S-VLAN.
pub const FIRST_SVID: u16 = 100;
/// Subscribers per S-VLAN (C-VLANs `1..=4000`).
pub const PER_SVLAN: u32 = 4000;
/// How many subscribers the numbering can express: S-VLANs `100..=4094` (4095 is reserved,
/// IEEE 802.1Q §9.6), 4000 each. Below the 2^24 the MAC numbering allows.
pub const MAX_SUBSCRIBERS: u32 = (4094 - FIRST_SVID as u32 + 1) * PER_SVLAN;
/// First subscriber address: 100.64.0.0 + 256 (the first /24 is the gateway's).
pub const FIRST_SUBSCRIBER_IP: Ipv4Addr = Ipv4Addr::new(100, 64, 1, 0);
/// Core endpoints are `1..=ENDPOINTS`.
pub const ENDPOINTS: u8 = 254;
/// UDP destination port of data frames in both directions: the generator's [`crate::gen::DATA_PORT`].
pub const DATA_PORT: u16 = crate::gen::DATA_PORT;
/// UDP source port of data frames.
pub const SRC_PORT: u16 = crate::gen::BASE_PORT;
/// Header bytes before the UDP payload of an upstream frame: Ethernet 14, two tags 8, IPv4 20,
/// UDP 8.
pub const UPSTREAM_PAYLOAD_OFF: usize = 14 + 8 + 20 + 8;
/// Header bytes before the UDP payload of a downstream frame: Ethernet 14, one tag 4, IPv4 20,
/// UDP 8.
pub const DOWNSTREAM_PAYLOAD_OFF: usize = 14 + 4 + 20 + 8;
/// Smallest RFC 2544 frame size (with FCS) the builders honour: headers of an upstream frame,
/// the payload header and the FCS; a smaller size gives a frame of this size.
pub const MIN_FRAME: u16 = (UPSTREAM_PAYLOAD_OFF + HDR_LEN + FCS_LEN) as u16;

/// One subscriber of the access side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subscriber {
    /// Its number `i` (the session ID).
    pub id: u32,
    /// The gateway port it is on ([`ACCESS_PORT`]).
    pub port: u16,
    /// Outer tag, TPID 0x88a8: `100 + i / 4000`.
    pub svid: u16,
    /// Inner tag, TPID 0x8100: `1 + i % 4000`.
    pub cvid: u16,
    /// `02:5b:00` followed by the low 24 bits of `i`.
    pub mac: [u8; 6],
    /// `100.64.0.0 + 256 + i`.
    pub ipv4: Ipv4Addr,
}

impl Subscriber {
    /// Subscriber `i` (0-based).
    ///
    /// # Panics
    /// When `i >= MAX_SUBSCRIBERS` (the S-VLAN would pass 4094): a configuration error that
    /// callers check up front (see [`check_count`]).
    pub fn nth(i: u32) -> Subscriber {
        assert!(i < MAX_SUBSCRIBERS, "subscriber {i}: the numbering stops at {MAX_SUBSCRIBERS}");
        Subscriber {
            id: i,
            port: ACCESS_PORT,
            svid: FIRST_SVID + (i / PER_SVLAN) as u16,
            cvid: 1 + (i % PER_SVLAN) as u16,
            mac: [0x02, 0x5b, 0, (i >> 16) as u8, (i >> 8) as u8, i as u8],
            ipv4: Ipv4Addr::from(u32::from(FIRST_SUBSCRIBER_IP) + i),
        }
    }
}

/// Checks that `n` subscribers can be numbered.
///
/// # Errors
/// [`crate::LabError::Config`] when `n` is 0 or above [`MAX_SUBSCRIBERS`].
pub fn check_count(n: u32) -> Result<(), crate::LabError> {
    if n == 0 || n > MAX_SUBSCRIBERS {
        return Err(crate::LabError::Config(format!("{n} subscribers: the numbering allows 1..={MAX_SUBSCRIBERS}")));
    }
    Ok(())
}

/// One endpoint of the core side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Its number `e` (1..=254).
    pub id: u8,
    /// `198.18.0.e`.
    pub ipv4: Ipv4Addr,
    /// `02:c0:00:00:00:e`.
    pub mac: [u8; 6],
}

/// Core endpoint `e`. `e` is taken as given; the lab uses `1..=ENDPOINTS`.
pub fn endpoint(e: u8) -> Endpoint {
    Endpoint { id: e, ipv4: Ipv4Addr::new(198, 18, 0, e), mac: [0x02, 0xc0, 0, 0, 0, e] }
}

/// The endpoint subscriber `i`'s `k`-th upstream flow goes to: the subscribers are spread over
/// all endpoints, so consecutive subscribers talk to different ones.
pub fn endpoint_for(i: u32, k: u32) -> Endpoint {
    endpoint(1 + ((i.wrapping_add(k)) % u32::from(ENDPOINTS)) as u8)
}

/// `aa:bb:cc:dd:ee:ff`, lower case.
pub fn mac_text(m: [u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

fn payload_header(stream: u16, seq: u32) -> [u8; HDR_LEN] {
    let mut h = [0u8; HDR_LEN];
    h[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    h[2..4].copy_from_slice(&stream.to_be_bytes());
    h[4..8].copy_from_slice(&seq.to_be_bytes());
    h
}

/// An upstream frame of RFC 2544 size `frame_size` (FCS counted, raised to [`MIN_FRAME`]):
/// subscriber `sub` to endpoint `ep` through the gateway, double-tagged (S-tag 0x88a8, C-tag
/// 0x8100), IPv4/UDP from [`SRC_PORT`] to [`DATA_PORT`] with valid IPv4 and UDP checksums and
/// the payload header (stream, sequence 0, time 0) at [`UPSTREAM_PAYLOAD_OFF`].
pub fn upstream_frame(sub: &Subscriber, ep: &Endpoint, frame_size: u16, stream: u16) -> Vec<u8> {
    FrameBuilder::eth(GATEWAY_MAC, sub.mac)
        .qinq(sub.svid, sub.cvid)
        .ipv4(sub.ipv4, ep.ipv4)
        .udp(SRC_PORT, DATA_PORT)
        .payload(&payload_header(stream, 0))
        .frame_len(usize::from(frame_size.max(MIN_FRAME)) - FCS_LEN)
        .build()
}

/// A downstream frame of RFC 2544 size `frame_size` (FCS counted, raised to [`MIN_FRAME`]):
/// endpoint `ep` to subscriber `sub` as it arrives on the core port — to the gateway's MAC,
/// tagged with [`CORE_VLAN`] (0x8100), IPv4/UDP from [`SRC_PORT`] to [`DATA_PORT`] with valid
/// checksums and the payload header at [`DOWNSTREAM_PAYLOAD_OFF`].
pub fn downstream_frame(ep: &Endpoint, sub: &Subscriber, frame_size: u16, stream: u16) -> Vec<u8> {
    FrameBuilder::eth(GATEWAY_MAC, ep.mac)
        .vlan(CORE_VLAN, 0)
        .ipv4(ep.ipv4, sub.ipv4)
        .udp(SRC_PORT, DATA_PORT)
        .payload(&payload_header(stream, 0))
        .frame_len(usize::from(frame_size.max(MIN_FRAME)) - FCS_LEN)
        .build()
}

/// The `fastpath ctl` line that adds subscriber `sub`'s session.
pub fn session_command(sub: &Subscriber) -> String {
    format!(
        "session add {} port {} s-vlan {} c-vlan {} mac {} ip {} tier 0\n",
        sub.id,
        sub.port,
        sub.svid,
        sub.cvid,
        mac_text(sub.mac),
        sub.ipv4
    )
}

/// `fastpath ctl -f` input adding the sessions of subscribers `0..n`, one line each.
///
/// # Panics
/// When `n > MAX_SUBSCRIBERS` (see [`check_count`]).
pub fn session_commands(n: u32) -> String {
    let mut s = String::with_capacity(n as usize * 80);
    for i in 0..n {
        s.push_str(&session_command(&Subscriber::nth(i)));
    }
    s
}

/// `fastpath ctl -f` input adding a /32 core route with its VLAN-10 next hop for every
/// endpoint `1..=254`.
pub fn route_commands() -> String {
    let mut s = String::new();
    for e in 1..=ENDPOINTS {
        let ep = endpoint(e);
        let _ = writeln!(s, "table core_route add {}/32 => core_nh({CORE_PORT}, {CORE_VLAN}, {})", ep.ipv4, mac_text(ep.mac));
    }
    s
}

/// `fastpath run --entries` input for what is not a session or a route: ACL profile 0 (allow
/// everything), the gateway's ARP answer and the punt limit.
pub fn base_entries() -> String {
    let mut s = String::from("table class_acl add 0/0xff * * priority 10 => no_action\n");
    let _ = writeln!(s, "table arp_gw add {GATEWAY_IP} => arp_reply({})", mac_text(GATEWAY_MAC));
    s.push_str("meter punt_limit 0 cir 1000 cbs 200 ebs 0\n");
    s
}

/// `n` subscribers' sessions written straight into `pipelines/vbng.toml`'s tables, as the
/// session API does for [`session_commands`] (without an upstream policer: unpoliced), then
/// [`base_entries`] and [`route_commands`]: for in-memory tests that have no control plane.
///
/// # Panics
/// When `n > MAX_SUBSCRIBERS` (see [`check_count`]).
pub fn table_entries(n: u32) -> String {
    let mut s = String::with_capacity(n as usize * 180 + 30_000);
    for i in 0..n {
        let sub = Subscriber::nth(i);
        let mac = mac_text(sub.mac);
        let _ = writeln!(s, "table up_session add {} {} {} {mac} => session_up({i}, {}, 0)", sub.port, sub.svid, sub.cvid, sub.ipv4);
        let _ = writeln!(s, "table down_session add {} => session_down({i}, {}, {}, {}, {mac})", sub.ipv4, sub.port, sub.svid, sub.cvid);
        let _ = writeln!(s, "tm pipe {} {i} profile 0", sub.port);
    }
    s.push_str(&base_entries());
    s.push_str(&route_commands());
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::path::Path;
    use std::process::Command;

    #[test]
    fn numbering_follows_the_contract() {
        let s = Subscriber::nth(0);
        assert_eq!((s.port, s.svid, s.cvid), (0, 100, 1));
        assert_eq!(s.mac, [0x02, 0x5b, 0, 0, 0, 0]);
        assert_eq!(s.ipv4, Ipv4Addr::new(100, 64, 1, 0));
        let s = Subscriber::nth(3999);
        assert_eq!((s.svid, s.cvid), (100, 4000));
        let s = Subscriber::nth(4000);
        assert_eq!((s.svid, s.cvid), (101, 1));
        let s = Subscriber::nth(255_999);
        assert_eq!((s.svid, s.cvid), (163, 4000));
        assert_eq!(s.mac, [0x02, 0x5b, 0, 0x03, 0xe7, 0xff]);
        assert_eq!(s.ipv4, Ipv4Addr::from(u32::from(Ipv4Addr::new(100, 64, 0, 0)) + 256 + 255_999));
        let last = Subscriber::nth(MAX_SUBSCRIBERS - 1);
        assert_eq!((last.svid, last.cvid), (4094, 4000));
        assert!(check_count(MAX_SUBSCRIBERS).is_ok());
        assert!(check_count(MAX_SUBSCRIBERS + 1).is_err());
        assert!(check_count(0).is_err());
        let e = endpoint(254);
        assert_eq!((e.ipv4, e.mac), (Ipv4Addr::new(198, 18, 0, 254), [0x02, 0xc0, 0, 0, 0, 0xfe]));
        assert!((0..1000).all(|i| (1..=254).contains(&endpoint_for(i, 0).id)));
    }

    #[test]
    fn identities_are_unique_at_256k() {
        let (mut tags, mut macs, mut ips) = (HashSet::new(), HashSet::new(), HashSet::new());
        for i in 0..256_000 {
            let s = Subscriber::nth(i);
            assert!(tags.insert((s.svid, s.cvid)) && macs.insert(s.mac) && ips.insert(s.ipv4), "subscriber {i}");
        }
    }

    #[test]
    fn ctl_lines() {
        let s = session_commands(4001);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 4001);
        assert_eq!(lines[0], "session add 0 port 0 s-vlan 100 c-vlan 1 mac 02:5b:00:00:00:00 ip 100.64.1.0 tier 0");
        assert_eq!(lines[4000], "session add 4000 port 0 s-vlan 101 c-vlan 1 mac 02:5b:00:00:0f:a0 ip 100.64.16.160 tier 0");
        let r = route_commands();
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines.len(), 254);
        assert_eq!(lines[0], "table core_route add 198.18.0.1/32 => core_nh(1, 10, 02:c0:00:00:00:01)");
        assert_eq!(lines[253], "table core_route add 198.18.0.254/32 => core_nh(1, 10, 02:c0:00:00:00:fe)");
    }

    #[test]
    fn frame_sizes_and_layout() {
        let (s, e) = (Subscriber::nth(4001), endpoint(7));
        let up = upstream_frame(&s, &e, 1400, 3);
        assert_eq!(up.len(), 1396);
        assert_eq!(&up[12..14], &[0x88, 0xa8]);
        assert_eq!(&up[16..18], &[0x81, 0x00]);
        assert_eq!(&up[20..22], &[0x08, 0x00]);
        assert_eq!(crate::gen::parse_probe_payload(&up[UPSTREAM_PAYLOAD_OFF..]).map(|p| p.stream), Some(3));
        let down = downstream_frame(&e, &s, 1400, 4);
        assert_eq!(down.len(), 1396);
        assert_eq!(&down[12..14], &[0x81, 0x00]);
        assert_eq!(&down[16..18], &[0x08, 0x00]);
        assert_eq!(crate::gen::parse_probe_payload(&down[DOWNSTREAM_PAYLOAD_OFF..]).map(|p| p.stream), Some(4));
        assert_eq!(upstream_frame(&s, &e, 0, 0).len(), usize::from(MIN_FRAME) - FCS_LEN);
    }

    #[test]
    fn table_entries_load_into_the_vbng_pipeline() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/vbng.toml")).unwrap();
        let mut p = fastpath_pipeline::compile("vbng.toml", &text).unwrap().instantiate();
        p.set_ports(2).unwrap();
        let e = table_entries(5000);
        assert_eq!(p.load_entries("bng.txt", &e).unwrap(), 3 * 5000 + 3 + 254);
        // The plan's frames through the pipeline: upstream leaves the core port on VLAN 10 to
        // the endpoint's MAC, downstream the access port with the subscriber's two tags.
        use fastpath_packet::{Batch, Pool, Verdict};
        let mut pool = Pool::new(64);
        let (sub, ep) = (Subscriber::nth(4001), endpoint(77));
        let mut through = |port: u16, f: Vec<u8>| -> (u16, Vec<u8>) {
            let mut b = Batch::new();
            let h = pool.alloc().unwrap();
            pool.set_data(h, &f);
            b.push(h, port);
            p.process(&mut pool, &mut b, 0);
            assert!(!matches!(b.verdict(0), Verdict::Drop(_) | Verdict::Punt(_)), "{:?}", b.verdict(0));
            for q in 0..2u16 {
                if p.egress(q, &mut pool, &mut b, 0) > 0 {
                    let out = pool.data(b.handle(0)).to_vec();
                    pool.free(b.handle(0));
                    return (q, out);
                }
            }
            panic!("nothing left the pipeline");
        };
        let (q, up) = through(0, upstream_frame(&sub, &ep, 1400, 0));
        assert_eq!(q, CORE_PORT);
        assert_eq!((&up[0..6], &up[6..12]), (&ep.mac[..], &GATEWAY_MAC[..]));
        assert_eq!((&up[12..14], &up[14..16], &up[16..18]), (&[0x81, 0x00][..], &CORE_VLAN.to_be_bytes()[..], &[0x08, 0x00][..]));
        assert_eq!(up.len(), 1396 - 4, "two tags popped, one pushed");
        let (q, down) = through(1, downstream_frame(&ep, &sub, 1400, 0));
        assert_eq!(q, ACCESS_PORT);
        assert_eq!((&down[0..6], &down[6..12]), (&sub.mac[..], &GATEWAY_MAC[..]));
        assert_eq!(&down[12..22], &[0x88, 0xa8, 0, 101, 0x81, 0x00, 0, 2, 0x08, 0x00]);
    }

    /// Classic pcap (LINKTYPE_ETHERNET) of `frames`.
    fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
        let mut b = Vec::new();
        b.extend(0xa1b2_c3d4u32.to_le_bytes());
        b.extend(2u16.to_le_bytes());
        b.extend(4u16.to_le_bytes());
        b.extend([0u8; 8]);
        b.extend(65535u32.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        for (k, f) in frames.iter().enumerate() {
            b.extend((k as u32).to_le_bytes());
            b.extend(0u32.to_le_bytes());
            b.extend((f.len() as u32).to_le_bytes());
            b.extend((f.len() as u32).to_le_bytes());
            b.extend(f);
        }
        std::fs::write(path, b).unwrap();
    }

    /// tshark's fields of each frame (`|`-joined occurrences), with checksum validation on, and
    /// its expert warnings and errors. `None` when tshark is not installed (outside CI).
    fn tshark(frames: &[Vec<u8>], fields: &[&str]) -> Option<(Vec<Vec<String>>, String)> {
        if Command::new("tshark").arg("--version").output().map_or(true, |o| !o.status.success()) {
            assert!(std::env::var_os("CI").is_none(), "tshark is required in CI");
            eprintln!("tshark not installed, skipping the tshark check");
            return None;
        }
        let p = std::env::temp_dir().join(format!("fastpath-bng-plan-{}-{}.pcap", std::process::id(), fields.len()));
        write_pcap(&p, frames);
        let prefs = ["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"];
        let mut cmd = Command::new("tshark");
        cmd.arg("-r").arg(&p).arg("-n").args(prefs).args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|"]);
        for f in fields {
            cmd.args(["-e", f]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let rows = String::from_utf8_lossy(&out.stdout).lines().map(|l| l.split('\t').map(str::to_owned).collect()).collect();
        let expert = Command::new("tshark")
            .arg("-r")
            .arg(&p)
            .arg("-n")
            .args(prefs)
            .args([
                "-Y",
                "_ws.malformed || _ws.expert.severity >= 0x600000",
                "-T",
                "fields",
                "-e",
                "frame.number",
                "-e",
                "_ws.expert.message",
            ])
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&p);
        Some((rows, String::from_utf8_lossy(&expert.stdout).trim().to_owned()))
    }

    #[test]
    fn frames_checked_by_tshark() {
        let (s, e) = (Subscriber::nth(4001), endpoint(200));
        let frames = vec![
            upstream_frame(&s, &e, 1400, 1),
            downstream_frame(&e, &s, 1400, 2),
            upstream_frame(&Subscriber::nth(0), &endpoint(1), 64, 0),
        ];
        let fields = [
            "eth.dst",
            "eth.src",
            "vlan.etype",
            "vlan.id",
            "ip.src",
            "ip.dst",
            "ip.checksum.status",
            "udp.dstport",
            "udp.checksum.status",
            "frame.len",
            "eth.type",
            "ieee8021ad.id",
            "frame.protocols",
        ];
        let Some((rows, expert)) = tshark(&frames, &fields) else { return };
        assert_eq!(expert, "", "tshark warnings");
        assert_eq!(rows.len(), 3);
        let up = &rows[0];
        assert_eq!(up[0], "02:fa:00:00:00:01");
        assert_eq!(up[1], "02:5b:00:00:0f:a1");
        // The outer tag's TPID is the Ethernet type (0x88a8, dissected as an 802.1ad S-tag); the
        // S-tag's type field, 0x8100, hands the rest to the 802.1Q dissector (the C-tag).
        assert_eq!(up[10], "0x88a8");
        assert_eq!(up[11], "101");
        assert_eq!((up[2].as_str(), up[3].as_str()), ("0x0800", "2"));
        assert!(up[12].starts_with("eth:ethertype:ieee8021ad:ethertype:vlan:ethertype:ip:udp"), "{}", up[12]);
        assert_eq!((up[4].as_str(), up[5].as_str()), ("100.64.16.161", "198.18.0.200"));
        assert_eq!((up[6].as_str(), up[7].as_str(), up[8].as_str()), ("1", "9", "1"), "checksums good (1 = good)");
        assert_eq!(up[9], "1396");
        let down = &rows[1];
        assert_eq!((down[0].as_str(), down[1].as_str()), ("02:fa:00:00:00:01", "02:c0:00:00:00:c8"));
        assert_eq!((down[10].as_str(), down[2].as_str(), down[3].as_str()), ("0x8100", "0x0800", "10"));
        assert_eq!(down[11], "");
        assert!(down[12].starts_with("eth:ethertype:vlan:ethertype:ip:udp"), "{}", down[12]);
        assert_eq!((down[4].as_str(), down[5].as_str()), ("198.18.0.200", "100.64.16.161"));
        assert_eq!((down[6].as_str(), down[8].as_str()), ("1", "1"));
        assert_eq!(down[9], "1396");
        assert_eq!(rows[2][9], (MIN_FRAME - 4).to_string());
    }
}
