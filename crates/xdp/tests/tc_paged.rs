//! The tc program on skbs whose headers are not all in the linear part, as a NIC that splits
//! headers from payload hands them up (and, for a tunnel, leaves the inner headers in page
//! fragments). `BPF_PROG_TEST_RUN` builds linear skbs only, so these frames are real: a packet
//! socket with `PACKET_VNET_HDR` sends them into a veth with the program at the peer's tc
//! ingress, the first 14 bytes linear and the rest in page fragments.
//!
//! Needs root (CI runs it as root; a missing root fails there rather than skipping).

mod common;

use common::root_or_skip;
use fastpath_io::af_packet::RawSocket;
use fastpath_io::netns::{Netns, VethPair};
use fastpath_packet::DropReason;
use fastpath_xdp::{AttachMode, XdpDatapath, XdpPortSpec};
use std::time::{Duration, Instant};

const SPEC: &str = r#"
name = "paged"
[parser]
headers = ["eth", "ipv4", "tcp"]

[[conntrack]]
name = "flows"
size = 1024
window_check = true

[control]
ingress = '''
conntrack flows
if ct.invalid:
    drop conntrack_invalid
elif ct.new:
    ct_commit flows 1
forward 1
'''
"#;

const C_ISN: u32 = 1_000;
const S_ISN: u32 = 5_000;

/// A TCP frame between 10.0.0.1:40000 (the client) and 10.0.0.2:80. A SYN carries Linux's
/// options (MSS, SACK permitted, timestamps, NOP, window scale 7: 20 bytes).
fn tcp(from_client: bool, flags: u8, seq: u32, ack: u32, win: u16, payload: usize) -> Vec<u8> {
    let (src, dst, sport, dport) =
        if from_client { ([10, 0, 0, 1], [10, 0, 0, 2], 40_000u16, 80u16) } else { ([10, 0, 0, 2], [10, 0, 0, 1], 80, 40_000) };
    let opts: Vec<u8> = if flags & SYN != 0 { vec![2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7] } else { Vec::new() };
    let tcp_len = 20 + opts.len();
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0];
    ip[2..4].copy_from_slice(&((20 + tcp_len + payload) as u16).to_be_bytes());
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    f.extend(ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&ack.to_be_bytes());
    f.push(((tcp_len / 4) << 4) as u8);
    f.push(flags);
    f.extend_from_slice(&win.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend(opts);
    f.resize(f.len() + payload, 0xab);
    f
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

/// A SYN whose options sit in page fragments still gives conntrack its window scale. Without
/// it the tracker would take both windows as unscaled, and the client's segment 100,000 bytes
/// into the server's scaled window (1,000 << 7 = 128,000 bytes) would be refused as out of
/// window, as would, on a live connection, every ACK more than 64 KB behind.
#[test]
fn a_syn_with_its_options_in_page_fragments_keeps_its_window_scale() {
    if !root_or_skip() {
        return;
    }
    let ns = Netns::new("fpx-paged").unwrap();
    let _a = VethPair::new(&ns, "a0", &ns, "d0").unwrap();
    let _b = VethPair::new(&ns, "b0", &ns, "d1").unwrap();
    // A packet socket pages only a frame longer than a page: the SYN carries 4,200 bytes of
    // data (as a TCP Fast Open SYN may), so the MTUs must let it through.
    for i in ["a0", "d0"] {
        ns.ip(&["link", "set", i, "mtu", "9000"]).unwrap();
    }
    ns.run(move || {
        let prog = fastpath_pipeline::compile("paged.toml", SPEC).unwrap();
        let ports = [("p0", "d0"), ("p1", "d1")].map(|(n, i)| XdpPortSpec { name: n.into(), iface: i.into() });
        let mut dp = XdpDatapath::build(prog, &ports).unwrap();
        dp.attach(AttachMode::Tc).unwrap();
        let sock = RawSocket::open_split("a0").unwrap();
        let data = 4_200usize;
        let c1 = C_ISN + data as u32 + 1;
        sock.send_split(&tcp(true, SYN, C_ISN, 0, 65_535, data), 14).unwrap();
        for f in [
            tcp(false, SYN | ACK, S_ISN, c1, 65_535, 0),
            tcp(true, ACK, c1, S_ISN + 1, 65_535, 0),
            // The server's first scaled window: 1,000 << 7 bytes.
            tcp(false, ACK, S_ISN + 1, c1, 1_000, 0),
            tcp(true, ACK, c1 + 100_000, S_ISN + 1, 65_535, 100),
        ] {
            sock.send(&f).unwrap();
        }
        // The frames cross in the senders' softirq; give the counters a moment.
        let t0 = Instant::now();
        let c = loop {
            let c = dp.counters();
            if c.rx[0] >= 5 || t0.elapsed() > Duration::from_secs(2) {
                break c;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(c.rx[0], 5, "the five frames reached the program: {c:?}");
        let refused = c.drops.iter().find(|d| d.0 == DropReason::ConntrackInvalid).map_or(0, |d| d.1);
        assert_eq!(refused, 0, "conntrack refused a segment inside the scaled window: {c:?}");
        assert_eq!(c.tx[1], 5, "all five forwarded: {c:?}");
    })
    .unwrap();
}
