//! The tc program on skbs whose headers are not all in the linear part, as a NIC that splits
//! headers from payload hands them up (and, for a tunnel, leaves the inner headers in page
//! fragments). `BPF_PROG_TEST_RUN` builds linear skbs only, so these frames are real: a packet
//! socket with `PACKET_VNET_HDR` sends them into a veth with the program at the peer's tc
//! ingress, the first 14 bytes linear and the rest in page fragments.
//!
//! Needs root (CI runs it as root; a missing root fails there rather than skipping).

mod common;

use common::{root_or_skip, tcp_frame, Seg, ACK, CONNTRACK_SPEC, SYN};
use fastpath_io::af_packet::RawSocket;
use fastpath_io::netns::{Netns, VethPair};
use fastpath_packet::DropReason;
use fastpath_xdp::{AttachMode, XdpDatapath, XdpPortSpec};
use std::time::{Duration, Instant};

const C_ISN: u32 = 1_000;
const S_ISN: u32 = 5_000;

/// A frame of the test's connection (10.0.0.1:40000 to 10.0.0.2:80); a SYN carries Linux's
/// options, window scale 7 among them.
fn tcp(from_client: bool, flags: u8, seq: u32, ack: u32, win: u16, payload: usize) -> Vec<u8> {
    let wscale = (flags & SYN != 0).then_some(7);
    tcp_frame((40_000, 80), Seg { from_client, flags, seq, ack, win, wscale, payload })
}

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
        let prog = fastpath_pipeline::compile("ct.toml", CONNTRACK_SPEC).unwrap();
        let ports = [("p0", "d0"), ("p1", "d1")].map(|(n, i)| XdpPortSpec { name: n.into(), iface: i.into() });
        let mut dp = XdpDatapath::build(prog, &ports).unwrap();
        dp.attach(AttachMode::Tc).unwrap();
        // Both ends of each veth are in this one namespace: the frames leave by the port.
        assert_eq!(dp.tc_peer(), [false, false]);
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
