//! VLAN tags through the XDP datapath, live: a Q-in-Q frame (outer TPID 0x88a8) sent into a
//! veth reaches the compiled program with its outer tag in the frame, is matched on it, and
//! leaves the other port as it was on the wire; in generic (skb) and native (driver) mode.
//!
//! ```text
//!  ns A: RawSocket ── va0 ═ veth ═ vb0 [XDP datapath, ns B] vb1 ═ veth ═ vc0 ── RawSocket (ns C)
//!  program: table by_type, key (meta.in_port, eth.type): (0, 0x88a8) => forward(1), else drop
//! ```
//!
//! The frames are written by the test (this kernel has no 802.1ad devices): untagged, 802.1Q,
//! Q-in-Q 0x88a8/0x8100 and 0x8100/0x8100 in turn. Only the 0x88a8 frames match, so a hit count
//! equal to their number proves the program read 0x88a8 at offset 12, and the receiver in ns C
//! (a packet socket, which puts back the tag its own stack takes out) compares them byte for
//! byte. XDP, generic or native, runs before the stack's `skb_vlan_untag`, so an inline tag is
//! always there.
//!
//! A tag can also cross the veth outside the frame, as skb metadata (a tc program's
//! `bpf_skb_vlan_push` or a VLAN device on the sender with tx-vlan offload on, as a NIC with
//! rx-vlan offload keeps it in its descriptor). In native mode the datapath's program, bound to
//! each port, fetches it with the `bpf_xdp_metadata_rx_vlan_tag` kfunc and writes it back
//! before the pipeline runs; in generic mode the kfunc cannot be used (a device-bound program is
//! refused there by `dev_xdp_attach`) and the program sees the frame without the tag — pinned
//! here, so a kernel that starts to hand it over shows up.
//!
//! At the tc hook (`AttachMode::Tc`) the stack has already run `skb_vlan_untag`: an outer tag,
//! 802.1Q or 802.1ad, is skb metadata before the program runs, so the program never sees 0x88a8
//! at offset 12 (pinned here too; docs/xdp.md says so).
//! Root only (CI runs as root); namespaces are removed on every path, panics included.

#[path = "../../io/tests/netns_common/mod.rs"]
mod netns_common;

use std::time::Duration;

use fastpath_io::af_packet::RawSocket;
use fastpath_io::bpf::{helper, tc_action, Insn, Link, Prog, ProgType, BPF_TCX_EGRESS, R0, R2, R3};
use fastpath_io::netns::{Netns, VethPair};
use fastpath_xdp::{AttachMode, XdpCounters, XdpDatapath, XdpPortSpec};
use netns_common::{frame, recv_marked, skip_unless_root, tagged};

const TPID_C: u16 = 0x8100;
const TPID_S: u16 = 0x88a8;
/// Frames per run, cycling through the four shapes.
const N: u32 = 120;
/// Whole frames, in order.
type Frames = Vec<Vec<u8>>;
/// Frames sent before the receiver is read.
const CHUNK: usize = 24;

const SPEC: &str = r#"
name = "tpid"
[parser]
headers = ["eth"]
[[table]]
name = "by_type"
key = [{ field = "meta.in_port", match = "exact" }, { field = "eth.type", match = "exact" }]
actions = ["forward", "drop"]
size = 16
default = "drop"
[control]
ingress = "apply by_type"
"#;

/// Frame `seq`: untagged, 802.1Q, Q-in-Q 0x88a8/0x8100, Q-in-Q 0x8100/0x8100 in turn, with
/// PCP/DEI bits set and VIDs that change with `seq`.
fn shaped(seq: u32) -> Vec<u8> {
    let f = frame((seq % 3) as u16, seq, 60 + (seq as usize * 37) % 1380);
    let vid = 1 + (seq % 4000) as u16;
    let (c_tci, s_tci) = (0x3000 | vid, 0xa000 | (4095 - vid));
    match seq % 4 {
        0 => f,
        1 => tagged(&f, TPID_C, c_tci),
        2 => tagged(&tagged(&f, TPID_C, c_tci), TPID_S, s_tci),
        _ => tagged(&tagged(&f, TPID_C, c_tci), TPID_C, s_tci),
    }
}

/// The three namespaces, the datapath on ns B's two ports in `mode`, a sender in A and a
/// receiver in C. `push` puts a tc program on va0 that pushes an S-tag (`bpf_skb_vlan_push`)
/// with va0's tx-vlan offload on, so the tag crosses as skb metadata.
struct Rig {
    _ns: [Netns; 3],
    _veths: [VethPair; 2],
    _push: Option<(Prog, Link)>,
    dp: XdpDatapath,
    tx: RawSocket,
    rx: RawSocket,
}

fn rig(mode: AttachMode, push: bool, prefix: &str) -> Rig {
    let a = Netns::new(&format!("{prefix}a")).unwrap();
    let b = Netns::new(&format!("{prefix}b")).unwrap();
    let c = Netns::new(&format!("{prefix}c")).unwrap();
    let v0 = VethPair::new(&a, "va0", &b, "vb0").unwrap();
    let v1 = VethPair::new(&b, "vb1", &c, "vc0").unwrap();
    // Native mode: a veth takes redirected XDP frames only when its peer has NAPI (GRO on).
    c.exec("ethtool", &["-K", "vc0", "gro", "on"]).unwrap();
    let push = push.then(|| {
        a.exec("ethtool", &["-K", "va0", "txvlan", "on", "tx-vlan-stag-hw-insert", "on"]).unwrap();
        let prog = vlan_push_prog(TPID_S, PUSHED_TCI);
        let link = a.run(|| Link::tcx_egress(&prog, fastpath_io::sys::ifindex("va0").unwrap())).unwrap().unwrap();
        (prog, link)
    });
    let program = fastpath_pipeline::compile("tpid.toml", SPEC).unwrap();
    let ports = [XdpPortSpec { name: "p0".into(), iface: "vb0".into() }, XdpPortSpec { name: "p1".into(), iface: "vb1".into() }];
    let dp = b
        .run(|| {
            let mut dp = XdpDatapath::build(program, &ports).unwrap();
            dp.load_entries("entries", "table by_type add 0 0x88a8 => forward(1)\n").unwrap();
            dp.attach(mode).unwrap();
            dp
        })
        .unwrap();
    let tx = a.run(|| RawSocket::open("va0")).unwrap().unwrap();
    let rx = c.run(|| RawSocket::open("vc0")).unwrap().unwrap();
    Rig { _ns: [a, b, c], _veths: [v0, v1], _push: push, dp, tx, rx }
}

/// S-tag the sender's tc program pushes: PCP 5, VID 10.
const PUSHED_TCI: u16 = 0xa00a;

/// A tc egress program that pushes one tag with `bpf_skb_vlan_push` (as in
/// `crates/io/tests/vlan_rx.rs`).
fn vlan_push_prog(tpid: u16, tci: u16) -> Prog {
    let insns = [
        Insn::mov64_imm(R2, i32::from(tpid.to_be())),
        Insn::mov64_imm(R3, i32::from(tci)),
        Insn::call(helper::SKB_VLAN_PUSH),
        Insn::mov64_imm(R0, tc_action::OK),
        Insn::exit(),
    ];
    Prog::load(ProgType::SCHED_CLS, &insns, "GPL", BPF_TCX_EGRESS, "fp_vlan_push").unwrap()
}

/// Sends `frames` in chunks and returns the marked frames ns C received.
fn send(r: &Rig, frames: &[Vec<u8>], expect: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for chunk in frames.chunks(CHUNK) {
        for f in chunk {
            r.tx.send(f).unwrap();
        }
        got.extend(recv_marked(&r.rx, expect.saturating_sub(got.len()), Duration::from_millis(300)));
    }
    got.extend(recv_marked(&r.rx, expect.saturating_sub(got.len()), Duration::from_secs(2)));
    got
}

fn hits(c: &XdpCounters) -> (u64, u64) {
    (c.tables[0].1, c.tables[0].2)
}

fn inline_tags(mode: AttachMode, prefix: &str) {
    let r = rig(mode, false, prefix);
    let sent: Vec<Vec<u8>> = (0..N).map(shaped).collect();
    let want: Vec<Vec<u8>> = sent.iter().filter(|f| f[12..14] == TPID_S.to_be_bytes()).cloned().collect();
    let got = send(&r, &sent, want.len());
    let c = r.dp.counters();
    assert_eq!(hits(&c), (want.len() as u64, (sent.len() - want.len()) as u64), "{mode:?}: the program matched 0x88a8 at offset 12: {c:?}");
    assert_eq!(c.rx[0], u64::from(N), "{mode:?}: every frame reached the program: {c:?}");
    assert_eq!(got.len(), want.len(), "{mode:?}: every 0x88a8 frame arrived: {c:?}");
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "{mode:?}: Q-in-Q frame {k} arrived as sent");
    }
}

#[test]
fn xdp_datapath_skb_mode_sees_and_forwards_the_inline_outer_tag() {
    if skip_unless_root() {
        return;
    }
    inline_tags(AttachMode::Skb, "fp-xvs");
}

#[test]
fn xdp_datapath_native_sees_and_forwards_the_inline_outer_tag() {
    if skip_unless_root() {
        return;
    }
    inline_tags(AttachMode::Native, "fp-xvn");
}

#[test]
fn tc_mode_does_not_see_the_outer_tag_the_stack_took_out() {
    if skip_unless_root() {
        return;
    }
    let r = rig(AttachMode::Tc, false, "fp-xvt");
    let sent: Vec<Vec<u8>> = (0..N).map(shaped).collect();
    let got = send(&r, &sent, sent.len());
    let c = r.dp.counters();
    assert_eq!(c.rx[0], u64::from(N), "every frame reached the tc program: {c:?}");
    assert_eq!(hits(&c), (0, u64::from(N)), "the outer tag was out of the frame before tc ran: {c:?}");
    assert!(got.is_empty(), "{} frames forwarded", got.len());
}

/// Untagged and C-tagged frames sent while the sender's tc program pushes an S-tag held as skb
/// metadata. Returns (frames on the wire, frames received, counters).
fn pushed(mode: AttachMode, prefix: &str) -> (Frames, Frames, XdpCounters, Vec<bool>) {
    let r = rig(mode, true, prefix);
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
    let got = send(&r, &inner, wire.len());
    (wire, got, r.dp.counters(), r.dp.vlan_restore())
}

#[test]
fn xdp_datapath_native_restores_an_outer_tag_held_as_skb_metadata() {
    if skip_unless_root() {
        return;
    }
    let (wire, got, c, restore) = pushed(AttachMode::Native, "fp-xvm");
    assert_eq!(restore, [true, true], "veth has the VLAN metadata kfunc (kernel >= 6.8)");
    assert_eq!(hits(&c), (u64::from(N), 0), "the program saw the restored 0x88a8 tag: {c:?}");
    assert_eq!(got, wire, "frames arrived as on the wire");
}

#[test]
fn xdp_datapath_skb_mode_does_not_see_an_outer_tag_held_as_skb_metadata() {
    if skip_unless_root() {
        return;
    }
    let (_, got, c, restore) = pushed(AttachMode::Skb, "fp-xvk");
    assert_eq!(restore, [false, false]);
    // Generic XDP has no metadata kfuncs: the program sees the frame without the pushed tag,
    // misses and drops every frame.
    assert_eq!(hits(&c), (0, u64::from(N)), "{c:?}");
    assert!(got.is_empty());
}
