//! Where the tc program sends a forwarded frame, live: with [`TcRedirect::Auto`] a port that is
//! a veth whose peer lives in another namespace gets the frame straight into that peer's
//! ingress (`bpf_redirect_peer`), skipping the port's own transmit; with [`TcRedirect::Xmit`]
//! it leaves by the port's egress (`bpf_redirect`). Either way the receiver gets every frame as
//! it was sent.
//!
//! ```text
//!  ns A: RawSocket ── pa0 ═ veth ═ pb0 [tc datapath, ns B] pb1 ═ veth ═ pc0 ── RawSocket (ns C)
//!  program: forward(1)
//! ```
//!
//! The port's statistics tell the two roads apart: a frame sent out of pb1 counts in pb1's
//! `tx_packets`; one handed into pc0's ingress does not (the peer counts it as received).
//! Root only (CI runs as root); namespaces are removed on every path, panics included.

#[path = "../../io/tests/netns_common/mod.rs"]
mod netns_common;

use std::time::Duration;

use fastpath_io::af_packet::RawSocket;
use fastpath_io::netns::{Netns, VethPair};
use fastpath_xdp::{AttachMode, TcRedirect, XdpDatapath, XdpPortSpec};
use netns_common::{frame, recv_marked, skip_unless_root};

const SPEC: &str = r#"
name = "one_way"
[parser]
headers = ["eth"]
[control]
ingress = "forward 1"
"#;

/// Frames per run.
const N: u32 = 200;

/// Sends `N` frames through the tc datapath with `redirect`; returns the ports' `tc_peer`,
/// the frames pb1 transmitted and the frames pc0 received (by the devices' statistics), after
/// checking that every frame reached ns C as sent.
fn run(redirect: TcRedirect, prefix: &str) -> (Vec<bool>, u64, u64) {
    let a = Netns::new(&format!("{prefix}a")).unwrap();
    let b = Netns::new(&format!("{prefix}b")).unwrap();
    let c = Netns::new(&format!("{prefix}c")).unwrap();
    let _v0 = VethPair::new(&a, "pa0", &b, "pb0").unwrap();
    let _v1 = VethPair::new(&b, "pb1", &c, "pc0").unwrap();
    let program = fastpath_pipeline::compile("one_way.toml", SPEC).unwrap();
    let ports = [("p0", "pb0"), ("p1", "pb1")].map(|(n, i)| XdpPortSpec { name: n.into(), iface: i.into() });
    let dp = b
        .run(|| {
            let mut dp = XdpDatapath::build(program, &ports).unwrap().with_tc_redirect(redirect);
            dp.attach(AttachMode::Tc).unwrap();
            dp
        })
        .unwrap();
    let tx = a.run(|| RawSocket::open("pa0")).unwrap().unwrap();
    let rx = c.run(|| RawSocket::open("pc0")).unwrap().unwrap();
    let (tx0, rx0) = (b.if_counter("pb1", "tx_packets").unwrap(), c.if_counter("pc0", "rx_packets").unwrap());
    let sent: Vec<Vec<u8>> = (0..N).map(|s| frame((s % 5) as u16, s, 60 + (s as usize * 53) % 1400)).collect();
    let mut got = Vec::new();
    for chunk in sent.chunks(25) {
        for f in chunk {
            tx.send(f).unwrap();
        }
        got.extend(recv_marked(&rx, sent.len() - got.len(), Duration::from_millis(300)));
    }
    got.extend(recv_marked(&rx, sent.len() - got.len(), Duration::from_secs(2)));
    let counters = dp.counters();
    assert_eq!(counters.tx[1], u64::from(N), "{redirect:?}: the program forwarded every frame: {counters:?}");
    assert_eq!(got.len(), sent.len(), "{redirect:?}: every frame arrived in ns C");
    for (k, (g, w)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(g, w, "{redirect:?}: frame {k} arrived as sent");
    }
    // Frames the stacks themselves send on these links (none expected; IPv6 is off) would
    // only add to both counters alike.
    (dp.tc_peer().to_vec(), b.if_counter("pb1", "tx_packets").unwrap() - tx0, c.if_counter("pc0", "rx_packets").unwrap() - rx0)
}

#[test]
fn auto_hands_frames_into_the_peer_namespace_without_the_port_transmitting() {
    if skip_unless_root() {
        return;
    }
    let (peer, port_tx, peer_rx) = run(TcRedirect::Auto, "fp-tpa");
    assert_eq!(peer, [true, true], "both ports are veths whose peers live in other namespaces");
    assert_eq!(port_tx, 0, "pb1 transmitted nothing: the frames went straight into pc0's ingress");
    assert!(peer_rx >= u64::from(N), "pc0 counted the frames as received: {peer_rx}");
}

#[test]
fn xmit_sends_frames_out_of_the_port() {
    if skip_unless_root() {
        return;
    }
    let (peer, port_tx, peer_rx) = run(TcRedirect::Xmit, "fp-tpx");
    assert_eq!(peer, [false, false]);
    assert!(port_tx >= u64::from(N), "pb1 transmitted every frame: {port_tx}");
    assert!(peer_rx >= u64::from(N), "pc0 received every frame: {peer_rx}");
}
