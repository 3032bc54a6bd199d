//! VLAN tags on receive, live: every receive path delivers a frame exactly as it was on the wire.
//!
//! The frames are written by the test itself (this kernel has no 802.1Q/802.1ad devices): a
//! raw AF_PACKET socket in one namespace sends hand-built Ethernet frames on one end of a veth
//! pair, untagged and in three tag shapes, and a port in the other namespace receives them:
//!
//! ```text
//!   ns A: RawSocket ── va0 ═══ veth ═══ vb0 ── port under test (ns B), VLAN rx offload on or off
//!   shapes: untagged │ 802.1Q (0x8100) │ Q-in-Q 0x88a8/0x8100 │ Q-in-Q 0x8100/0x8100
//! ```
//!
//! What the kernel does with them (kernel 6.18, veth): the receive path takes the outer tag out
//! of the frame (`skb_vlan_untag` in `__netif_receive_skb_core`, done in software whatever the
//! device's rx-vlan-offload / rx-vlan-stag-hw-parse say) before packet sockets see it, and hands
//! it over as metadata: in the TPACKET_V3 ring header (`TP_STATUS_VLAN_VALID`, `tp_vlan_tci`,
//! `tp_vlan_tpid`) or as a `PACKET_AUXDATA` control message. An inner tag stays in the frame.
//! XDP, native or generic (skb), runs before that step and sees the frame as sent. The AF_PACKET
//! port and [`RawSocket`] put the tag back; these tests compare whole frames, byte for byte, for
//! each port kind, each shape, and with the veth's VLAN rx offload on and off (`ethtool -K`).
//!
//! A tag can also cross the veth outside the frame, as skb metadata: pushed on the sender by a
//! tc program (`bpf_skb_vlan_push`, as a lab generator may tag frames here) or a VLAN device
//! while the sender's tx-vlan offload is on (veth's default). The AF_PACKET port and
//! [`RawSocket`] get it from the same metadata and restore it. XDP does not see it in the frame:
//! in native mode fastpath's XDP program fetches it from the driver and writes it back; in skb
//! mode it is lost. With the sender's tx-vlan offload off the kernel writes the tag into the
//! frame before it crosses, and every path receives it.
//! The XDP datapath (`xdp:` ports) has the same checks in `crates/xdp/tests/vlan_live.rs`.
//! Root only (CI runs as root); namespaces are removed on every path, panics included.

mod netns_common;

use std::time::Duration;

use fastpath_io::af_packet::{AfPacketConfig, PacketPort, RawSocket};
use fastpath_io::af_xdp::{XdpConfig, XdpMode, XdpPort, ZeroCopy};
use fastpath_io::bpf::{helper, tc_action, Insn, Link, Prog, ProgType, XdpAttachMode, BPF_TCX_EGRESS, R0, R2, R3};
use fastpath_io::netns::{Netns, VethPair};
use fastpath_io::Port;
use fastpath_packet::Pool;
use netns_common::{frame, marked_seq, recv_marked, rx_marked, skip_unless_root, tagged};

/// 802.1Q C-tag TPID.
const TPID_C: u16 = 0x8100;
/// 802.1ad S-tag TPID.
const TPID_S: u16 = 0x88a8;
/// Frames per run (cycling through the four shapes).
const N: u32 = 240;
/// Frames sent before the port is polled.
const CHUNK: usize = 48;

/// Whole frames, in order.
type Frames = Vec<Vec<u8>>;

/// The tag shapes, in the order frames cycle through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Untagged,
    Dot1q,
    QinqS,
    QinqC,
}

const SHAPES: [Shape; 4] = [Shape::Untagged, Shape::Dot1q, Shape::QinqS, Shape::QinqC];

/// Test frame `seq` in shape `SHAPES[seq % 4]`. The TCIs carry PCP and DEI bits and a VID that
/// changes with `seq`, so a lost or rewritten TCI bit shows up.
fn shaped(seq: u32) -> (Shape, Vec<u8>) {
    let shape = SHAPES[(seq % 4) as usize];
    let f = frame((seq % 3) as u16, seq, 60 + (seq as usize * 37) % 1380);
    let vid = 1 + (seq % 4000) as u16;
    let c_tci = 0x3000 | vid; // PCP 1, DEI 1
    let s_tci = 0xa000 | (4095 - vid); // PCP 5, DEI 0
    let f = match shape {
        Shape::Untagged => f,
        Shape::Dot1q => tagged(&f, TPID_C, c_tci),
        Shape::QinqS => tagged(&tagged(&f, TPID_C, c_tci), TPID_S, s_tci),
        Shape::QinqC => tagged(&tagged(&f, TPID_C, c_tci), TPID_C, s_tci),
    };
    (shape, f)
}

/// The receive path under test.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// fastpath's AF_PACKET port (TPACKET_V3 ring).
    AfPacket,
    /// fastpath's AF_XDP port with its XDP program attached in this mode.
    AfXdp(XdpMode),
    /// The plain packet socket the lab's receivers use (`recvmsg`, `PACKET_AUXDATA`).
    Raw,
}

/// Sets the receiving veth's VLAN rx offloads (C-tag and S-tag) and checks that they took.
fn set_rx_vlan_offload(ns: &Netns, iface: &str, on: bool) {
    let v = if on { "on" } else { "off" };
    ns.exec("ethtool", &["-K", iface, "rxvlan", v, "rx-vlan-stag-hw-parse", v])
        .unwrap_or_else(|e| panic!("ethtool -K failed (is ethtool installed?): {e}"));
    let k = ns.exec("ethtool", &["-k", iface]).unwrap();
    for feature in ["rx-vlan-offload", "rx-vlan-stag-hw-parse"] {
        assert!(k.lines().any(|l| l.trim() == format!("{feature}: {v}")), "{feature} is not {v}:\n{k}");
    }
}

/// Sends `frames` from `tx` in chunks and receives them on `vb0` in ns `b` through `kind`;
/// returns what arrived (marked test frames, in order) and, for the AF_PACKET port, how many
/// frames had their outer tag put back.
fn send_and_receive(kind: Kind, b: &Netns, tx: &RawSocket, frames: &[Vec<u8>]) -> (Frames, Option<u64>) {
    let mut got = Vec::new();
    let mut restored = None;
    match kind {
        Kind::AfPacket => {
            let mut pool = Pool::new(1024);
            let mut port = b.run(|| PacketPort::open("vb0", &AfPacketConfig::default())).unwrap().unwrap();
            for chunk in frames.chunks(CHUNK) {
                for f in chunk {
                    tx.send(f).unwrap();
                }
                got.extend(rx_marked(&mut port, &mut pool, 1, chunk.len(), Duration::from_secs(5)));
            }
            let st = port.stats();
            assert_eq!((st.rx_dropped, st.errors), (0, 0));
            assert_eq!(pool.available(), 1024, "every buffer back");
            restored = Some(port.vlan_restored_pkts());
        }
        Kind::AfXdp(mode) => {
            let mut pool = Pool::new(4096);
            let cfg = XdpConfig { mode, zero_copy: ZeroCopy::No, ..XdpConfig::default() };
            let mut port = b.run(|| XdpPort::open("vb0", 0, &cfg, &mut pool)).unwrap().unwrap();
            let want = if mode == XdpMode::Skb { XdpAttachMode::Skb } else { XdpAttachMode::Native };
            assert_eq!(port.mode_info().attach, want);
            // veth has the VLAN metadata kfunc (kernel ≥ 6.8); a device-bound program runs in
            // native mode only.
            assert_eq!(port.mode_info().vlan_restore, mode == XdpMode::Native);
            for chunk in frames.chunks(CHUNK) {
                for f in chunk {
                    tx.send(f).unwrap();
                }
                got.extend(rx_marked(&mut port, &mut pool, 2, chunk.len(), Duration::from_secs(5)));
            }
            let st = port.stats();
            assert_eq!((st.rx_dropped, st.errors), (0, 0));
            port.close(&mut pool);
            assert_eq!(pool.available(), 4096, "every buffer back");
        }
        Kind::Raw => {
            let rx = b.run(|| RawSocket::open("vb0")).unwrap().unwrap();
            for chunk in frames.chunks(CHUNK) {
                for f in chunk {
                    tx.send(f).unwrap();
                }
                got.extend(recv_marked(&rx, chunk.len(), Duration::from_secs(5)));
            }
        }
    }
    (got, restored)
}

/// Sends `N` frames of every shape from ns A and returns (sent, received), plus the number of
/// frames whose outer tag the AF_PACKET port had to put back.
fn run(kind: Kind, rx_offload: bool, prefix: &str) -> (Frames, Frames, Option<u64>) {
    let a = Netns::new(&format!("{prefix}a")).unwrap();
    let b = Netns::new(&format!("{prefix}b")).unwrap();
    let _v = VethPair::new(&a, "va0", &b, "vb0").unwrap();
    set_rx_vlan_offload(&b, "vb0", rx_offload);
    let tx = a.run(|| RawSocket::open("va0")).unwrap().unwrap();
    let sent: Vec<Vec<u8>> = (0..N).map(|s| shaped(s).1).collect();
    let (got, restored) = send_and_receive(kind, &b, &tx, &sent);
    (sent, got, restored)
}

/// Runs `kind` and asserts that every frame arrived whole, with a message per shape that says
/// what differs.
fn check(kind: Kind, rx_offload: bool, prefix: &str) -> Option<u64> {
    let (sent, got, restored) = run(kind, rx_offload, prefix);
    assert_eq!(got.len(), sent.len(), "{kind:?}: frames lost");
    for (seq, (s, g)) in sent.iter().zip(&got).enumerate() {
        let shape = SHAPES[seq % 4];
        assert_eq!(
            g,
            s,
            "{kind:?}, rx offload {rx_offload}, {shape:?} frame {seq}: received {} bytes (ethertype {:02x?}), sent {} (ethertype {:02x?})",
            g.len(),
            g.get(12..14),
            s.len(),
            &s[12..14]
        );
    }
    restored
}

/// Tagged frames among the `N` sent: the kernel moves the outer tag of each out of the frame.
fn tagged_frames() -> u64 {
    (0..N).filter(|&s| shaped(s).0 != Shape::Untagged).count() as u64
}

#[test]
fn af_packet_port_delivers_tagged_frames_as_sent_rx_vlan_offload_on() {
    if skip_unless_root() {
        return;
    }
    let restored = check(Kind::AfPacket, true, "fp-vp1");
    // The kernel took the outer tag out of every tagged shape; the port put each one back.
    assert_eq!(restored, Some(tagged_frames()));
}

#[test]
fn af_packet_port_delivers_tagged_frames_as_sent_rx_vlan_offload_off() {
    if skip_unless_root() {
        return;
    }
    let restored = check(Kind::AfPacket, false, "fp-vp0");
    // Offload off changes nothing on veth: the untagging is the stack's, not the device's.
    assert_eq!(restored, Some(tagged_frames()));
}

#[test]
fn af_xdp_native_delivers_tagged_frames_as_sent_rx_vlan_offload_on() {
    if skip_unless_root() {
        return;
    }
    check(Kind::AfXdp(XdpMode::Native), true, "fp-vn1");
}

#[test]
fn af_xdp_native_delivers_tagged_frames_as_sent_rx_vlan_offload_off() {
    if skip_unless_root() {
        return;
    }
    check(Kind::AfXdp(XdpMode::Native), false, "fp-vn0");
}

#[test]
fn af_xdp_skb_mode_delivers_tagged_frames_as_sent_rx_vlan_offload_on() {
    if skip_unless_root() {
        return;
    }
    check(Kind::AfXdp(XdpMode::Skb), true, "fp-vs1");
}

#[test]
fn af_xdp_skb_mode_delivers_tagged_frames_as_sent_rx_vlan_offload_off() {
    if skip_unless_root() {
        return;
    }
    check(Kind::AfXdp(XdpMode::Skb), false, "fp-vs0");
}

#[test]
fn raw_socket_delivers_tagged_frames_as_sent_rx_vlan_offload_on() {
    if skip_unless_root() {
        return;
    }
    check(Kind::Raw, true, "fp-vr1");
}

#[test]
fn raw_socket_delivers_tagged_frames_as_sent_rx_vlan_offload_off() {
    if skip_unless_root() {
        return;
    }
    check(Kind::Raw, false, "fp-vr0");
}

/// A tc program for the sender's egress that pushes one tag (`tpid`, `tci`) with
/// `bpf_skb_vlan_push`, as a lab generator may tag frames on this kernel. With the sender's
/// tx-vlan offload on (veth's default) the kernel keeps the tag in the skb's metadata, not in
/// the frame, and veth hands it to the peer that way; with it off, the tag is written into the
/// frame before it crosses.
fn vlan_push_prog(tpid: u16, tci: u16) -> Prog {
    let insns = [
        Insn::mov64_imm(R2, i32::from(tpid.to_be())), // __be16 vlan_proto
        Insn::mov64_imm(R3, i32::from(tci)),
        Insn::call(helper::SKB_VLAN_PUSH),
        Insn::mov64_imm(R0, tc_action::OK),
        Insn::exit(),
    ];
    Prog::load(ProgType::SCHED_CLS, &insns, "GPL", BPF_TCX_EGRESS, "fp_vlan_push").unwrap()
}

/// S-tag the sender's tc program pushes: PCP 5, VID 10.
const PUSHED_TCI: u16 = 0xa00a;

/// Frames sent untagged or with one inline C-tag while a tc program on the sender's egress
/// pushes an S-tag outside it. Returns (frames as sent by the socket, frames as they are on the
/// wire, frames received).
fn run_pushed(kind: Kind, tx_offload: bool, rx_offload: bool, prefix: &str) -> (Frames, Frames, Frames) {
    let a = Netns::new(&format!("{prefix}a")).unwrap();
    let b = Netns::new(&format!("{prefix}b")).unwrap();
    let _v = VethPair::new(&a, "va0", &b, "vb0").unwrap();
    set_rx_vlan_offload(&b, "vb0", rx_offload);
    let v = if tx_offload { "on" } else { "off" };
    a.exec("ethtool", &["-K", "va0", "txvlan", v, "tx-vlan-stag-hw-insert", v]).unwrap();
    let prog = vlan_push_prog(TPID_S, PUSHED_TCI);
    // Linked from inside ns A: an ifindex names an interface of the caller's namespace.
    let _link = a.run(|| Link::tcx_egress(&prog, fastpath_io::sys::ifindex("va0").unwrap())).unwrap().unwrap();
    let tx = a.run(|| RawSocket::open("va0")).unwrap().unwrap();
    let inner: Vec<Vec<u8>> = (0..N)
        .map(|s| {
            let f = frame(0, s, 60 + (s as usize * 37) % 1380);
            if s % 2 == 0 {
                f
            } else {
                tagged(&f, TPID_C, 0x0100 | (s % 4000) as u16)
            }
        })
        .collect();
    let wire: Vec<Vec<u8>> = inner.iter().map(|f| tagged(f, TPID_S, PUSHED_TCI)).collect();
    let (got, _) = send_and_receive(kind, &b, &tx, &inner);
    (inner, wire, got)
}

#[test]
fn af_packet_port_and_raw_socket_restore_a_tag_that_crosses_veth_as_skb_metadata() {
    if skip_unless_root() {
        return;
    }
    for (i, kind) in [Kind::AfPacket, Kind::Raw].into_iter().enumerate() {
        for (j, (tx_offload, rx_offload)) in [(true, true), (true, false), (false, true), (false, false)].into_iter().enumerate() {
            let (_, wire, got) = run_pushed(kind, tx_offload, rx_offload, &format!("fp-vm{i}{j}"));
            assert_eq!(got, wire, "{kind:?}, sender tx-vlan offload {tx_offload}, receiver rx offload {rx_offload}");
        }
    }
}

/// A tag that crossed the veth as skb metadata (a tc program or VLAN device on the sender,
/// tx-vlan offload on) is not in the frame XDP sees. In native mode fastpath's XDP program asks
/// the driver for it (`bpf_xdp_metadata_rx_vlan_tag`) and writes it back into the frame; in skb
/// mode no such call exists and the AF_XDP port receives the frame without that tag — pinned
/// here so a kernel that starts to hand it over shows up (docs/cli.md, "VLAN tags").
#[test]
fn af_xdp_restores_a_tag_held_as_skb_metadata_in_native_mode_only() {
    if skip_unless_root() {
        return;
    }
    for (i, mode) in [XdpMode::Native, XdpMode::Skb].into_iter().enumerate() {
        for (j, rx_offload) in [true, false].into_iter().enumerate() {
            // Sender's tx-vlan offload off: the tag is written into the frame, XDP sees it.
            let (_, wire, got) = run_pushed(Kind::AfXdp(mode), false, rx_offload, &format!("fp-vx{i}{j}"));
            assert_eq!(got, wire, "{mode:?}, sender tx-vlan offload off, receiver rx offload {rx_offload}");
            // On: the tag stays in the skb's metadata.
            let (inner, wire, got) = run_pushed(Kind::AfXdp(mode), true, rx_offload, &format!("fp-vy{i}{j}"));
            if mode == XdpMode::Native {
                assert_eq!(got, wire, "native, sender tx-vlan offload on, receiver rx offload {rx_offload}: restored by the program");
            } else {
                assert_eq!(got, inner, "skb mode, sender tx-vlan offload on, receiver rx offload {rx_offload}: the pushed tag is lost");
            }
        }
    }
}

/// Frames on a queue without a socket go to the kernel stack as they came: the native-mode
/// program writes a tag back only into frames it redirects, so the stack never sees a tag twice
/// (once in the frame, once in the metadata). Two queues, a socket on queue 0 only; flows spread
/// over both; a packet socket on the same interface sees the queue-1 frames.
#[test]
fn af_xdp_native_leaves_frames_for_queues_without_a_socket_untouched() {
    if skip_unless_root() {
        return;
    }
    let a = Netns::new("fp-vqa").unwrap();
    let b = Netns::new("fp-vqb").unwrap();
    let _v = VethPair::with_queues(&a, "va0", &b, "vb0", 2).unwrap();
    a.exec("ethtool", &["-K", "va0", "txvlan", "on", "tx-vlan-stag-hw-insert", "on"]).unwrap();
    let prog = vlan_push_prog(TPID_S, PUSHED_TCI);
    let _link = a.run(|| Link::tcx_egress(&prog, fastpath_io::sys::ifindex("va0").unwrap())).unwrap().unwrap();
    let tx = a.run(|| RawSocket::open("va0")).unwrap().unwrap();
    let mut pool = Pool::new(4096);
    let cfg = XdpConfig { mode: XdpMode::Native, zero_copy: ZeroCopy::No, ..XdpConfig::default() };
    let mut port = b.run(|| XdpPort::open("vb0", 0, &cfg, &mut pool)).unwrap().unwrap();
    assert!(port.mode_info().vlan_restore);
    let stack = b.run(|| RawSocket::open("vb0")).unwrap().unwrap();
    // 64 flows (UDP source ports): the sender's queue choice hashes them over both queues.
    let inner: Frames = (0..N).map(|s| frame((s % 64) as u16, s, 100)).collect();
    let wire: Frames = inner.iter().map(|f| tagged(f, TPID_S, PUSHED_TCI)).collect();
    let (mut via_xdp, mut via_stack) = (Vec::new(), Vec::new());
    for chunk in inner.chunks(CHUNK) {
        for f in chunk {
            tx.send(f).unwrap();
        }
        let before = via_xdp.len() + via_stack.len();
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while via_xdp.len() + via_stack.len() < before + chunk.len() && std::time::Instant::now() < end {
            via_xdp.extend(rx_marked(&mut port, &mut pool, 2, 1, Duration::from_millis(5)));
            via_stack.extend(recv_marked(&stack, 1, Duration::from_millis(5)));
        }
    }
    let seqs: std::collections::BTreeSet<u32> = via_xdp.iter().chain(&via_stack).filter_map(|f| marked_seq(f)).collect();
    assert_eq!((via_xdp.len() + via_stack.len(), seqs.len()), (N as usize, N as usize), "every frame once, through one path");
    assert!(!via_xdp.is_empty() && !via_stack.is_empty(), "both queues used: {} / {}", via_xdp.len(), via_stack.len());
    for f in via_xdp.iter().chain(&via_stack) {
        assert!(wire.contains(f), "a frame not as on the wire: {:02x?}", &f[..20]);
    }
    port.close(&mut pool);
}
