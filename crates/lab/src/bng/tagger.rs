//! VLAN taggers for the broadband lab's real hosts: small tc (tcx) BPF programs that push and
//! pop the tags this kernel has no VLAN devices for (no 802.1Q / 802.1ad modules).
//!
//! ```text
//!   subscriber ns            access ns (bridge, ports isolated)              user plane
//!   eth0 (untagged) ══ veth ══ aN ─ ingress: push C-tag, push S-tag ─▶ br0 ─▶ uplink ══▶ access port
//!                               └─ egress:  S-tag and C-tag ours? pop both, else drop ◀── Q-in-Q
//!   core ns: core0 ─ egress: push VLAN 10 ─▶ user plane's core port; ingress: pop it
//! ```
//!
//! The subscriber's own namespace sees only untagged frames, so every DHCP client works
//! unchanged — ISC dhclient too, whose `ETH_P_ALL` packet socket would otherwise see a frame
//! before a tc ingress program had popped its tags.
//!
//! How the tags travel (kernel 6.x, `net/core/skbuff.c` `skb_vlan_push` / `skb_vlan_pop`):
//! `bpf_skb_vlan_push` puts the new tag in the skb's metadata and first moves a tag already
//! there into the frame, so pushing C then S leaves the C-tag inline and the S-tag (TPID
//! 0x88a8) in the metadata — which veth hands over as it is and the user plane's AF_PACKET
//! port writes back into the frame (`PACKET_AUXDATA`, docs/cli.md "VLAN tags"). On the way back
//! the access namespace's receive path has moved the outer tag into the metadata again
//! (`skb_vlan_untag`), the C-tag is inline, and each `bpf_skb_vlan_pop` removes the metadata
//! tag and moves the next inline one up, so two pops leave the frame untagged.
//!
//! Why a check before the pop: a frame the bridge floods (an unknown destination MAC, a
//! broadcast from the user plane) reaches every subscriber port; only the subscriber whose
//! S-VLAN and C-VLAN it carries may see it, as on a real access network.

use fastpath_io::bpf::{self, helper, sk_buff, tc_action, Insn, Link, Prog, ProgType, R0, R1, R2, R3, R4, R6};

use crate::LabError;

/// `long bpf_skb_vlan_pop(struct sk_buff *skb)` (`enum bpf_func_id`).
const HELPER_SKB_VLAN_POP: i32 = 19;
/// `long bpf_skb_pull_data(struct sk_buff *skb, u32 len)`: makes `len` bytes linear.
const HELPER_SKB_PULL_DATA: i32 = 39;
/// `struct __sk_buff` fields (`include/uapi/linux/bpf.h`): `vlan_present`, `vlan_tci` (host
/// order, PCP and DEI included), `vlan_proto` (network order).
const SKB_VLAN_PRESENT: i16 = 20;
const SKB_VLAN_TCI: i16 = 24;
const SKB_VLAN_PROTO: i16 = 28;
/// TPIDs as a BPF program compares them: network order in a host register.
const TPID_C: i32 = 0x8100u16.to_be() as i32;
const TPID_S: i32 = 0x88a8u16.to_be() as i32;

/// `dst &= imm` (64-bit; `BPF_ALU64 | BPF_AND | BPF_K`).
const fn and64_imm(dst: u8, imm: i32) -> Insn {
    Insn::new(0x57, dst, 0, 0, imm)
}

/// Pushes a C-tag (`cvid`, TPID 0x8100) and then an S-tag (`svid`, TPID 0x88a8) onto every
/// frame; a failed push drops the frame rather than send it with half its tags.
pub fn push_qinq(svid: u16, cvid: u16) -> Vec<Insn> {
    vec![
        Insn::mov64_reg(R6, R1),
        Insn::mov64_reg(R1, R6),
        Insn::mov64_imm(R2, TPID_C),
        Insn::mov64_imm(R3, i32::from(cvid & 0xfff)),
        Insn::call(helper::SKB_VLAN_PUSH),
        Insn::jne_imm(R0, 0, 7), // 5: -> 13 (drop)
        Insn::mov64_reg(R1, R6),
        Insn::mov64_imm(R2, TPID_S),
        Insn::mov64_imm(R3, i32::from(svid & 0xfff)),
        Insn::call(helper::SKB_VLAN_PUSH),
        Insn::jne_imm(R0, 0, 2), // 10: -> 13 (drop)
        Insn::mov64_imm(R0, tc_action::OK),
        Insn::exit(),
        Insn::mov64_imm(R0, tc_action::SHOT),
        Insn::exit(),
    ]
}

/// Lets through only frames tagged S-VLAN `svid` (TPID 0x88a8, held in the skb's metadata)
/// over C-VLAN `cvid` (0x8100, inline), and pops both tags; everything else is dropped.
pub fn pop_qinq(svid: u16, cvid: u16) -> Vec<Insn> {
    vec![
        Insn::mov64_reg(R6, R1),
        Insn::ldx_w(R2, R6, SKB_VLAN_PRESENT),
        Insn::jeq_imm(R2, 0, 27), // 2: -> 30 (drop)
        Insn::ldx_w(R2, R6, SKB_VLAN_PROTO),
        Insn::jne_imm(R2, TPID_S, 25), // 4: -> 30
        Insn::ldx_w(R2, R6, SKB_VLAN_TCI),
        and64_imm(R2, 0xfff),
        Insn::jne_imm(R2, i32::from(svid & 0xfff), 22), // 7: -> 30
        Insn::mov64_reg(R1, R6),
        Insn::mov64_imm(R2, 18),
        Insn::call(HELPER_SKB_PULL_DATA), // 10: the C-tag in the linear part (a no-op when it is)
        Insn::ldx_w(R2, R6, sk_buff::DATA),
        Insn::ldx_w(R3, R6, sk_buff::DATA_END),
        Insn::mov64_reg(R4, R2),
        Insn::add64_imm(R4, 18),
        Insn::jgt_reg(R4, R3, 14), // 15: shorter than MACs + C-tag -> 30
        Insn::ldx_h(R4, R2, 12),
        Insn::jne_imm(R4, TPID_C, 12), // 17: -> 30
        Insn::ldx_h(R4, R2, 14),
        Insn::be16(R4),
        and64_imm(R4, 0xfff),
        Insn::jne_imm(R4, i32::from(cvid & 0xfff), 8), // 21: -> 30
        Insn::mov64_reg(R1, R6),
        Insn::call(HELPER_SKB_VLAN_POP), // 23: the S-tag; the C-tag moves to the metadata
        Insn::jne_imm(R0, 0, 5),         // 24: -> 30
        Insn::mov64_reg(R1, R6),
        Insn::call(HELPER_SKB_VLAN_POP), // 26: the C-tag
        Insn::jne_imm(R0, 0, 2),         // 27: -> 30
        Insn::mov64_imm(R0, tc_action::OK),
        Insn::exit(),
        Insn::mov64_imm(R0, tc_action::SHOT),
        Insn::exit(),
    ]
}

/// Pushes one 802.1Q tag (`vid`, TPID 0x8100): the core side's VLAN.
pub fn push_vlan(vid: u16) -> Vec<Insn> {
    vec![
        Insn::mov64_reg(R6, R1),
        Insn::mov64_reg(R1, R6),
        Insn::mov64_imm(R2, TPID_C),
        Insn::mov64_imm(R3, i32::from(vid & 0xfff)),
        Insn::call(helper::SKB_VLAN_PUSH),
        Insn::jne_imm(R0, 0, 2), // 5: -> 8 (drop)
        Insn::mov64_imm(R0, tc_action::OK),
        Insn::exit(),
        Insn::mov64_imm(R0, tc_action::SHOT),
        Insn::exit(),
    ]
}

/// Lets through only frames whose (metadata) tag is `vid`, and pops it.
pub fn pop_vlan(vid: u16) -> Vec<Insn> {
    vec![
        Insn::mov64_reg(R6, R1),
        Insn::ldx_w(R2, R6, SKB_VLAN_PRESENT),
        Insn::jeq_imm(R2, 0, 8), // 2: -> 11 (drop)
        Insn::ldx_w(R2, R6, SKB_VLAN_TCI),
        and64_imm(R2, 0xfff),
        Insn::jne_imm(R2, i32::from(vid & 0xfff), 5), // 5: -> 11
        Insn::mov64_reg(R1, R6),
        Insn::call(HELPER_SKB_VLAN_POP),
        Insn::jne_imm(R0, 0, 2), // 8: -> 11
        Insn::mov64_imm(R0, tc_action::OK),
        Insn::exit(),
        Insn::mov64_imm(R0, tc_action::SHOT),
        Insn::exit(),
    ]
}

/// A tagger attached to one interface: its two links (ingress, egress). The programs stay
/// attached while this lives (and while the interface does); drop detaches them.
#[derive(Debug)]
pub struct Tagger {
    _ingress: Link,
    _egress: Link,
}

fn bpf_err(what: &str, iface: &str, e: bpf::BpfError) -> LabError {
    let log = if e.log.is_empty() { String::new() } else { format!("\n{}", e.log) };
    LabError::Bpf(format!("{what} on {iface}: {}: {}{log}", e.op, e.err))
}

impl Tagger {
    /// Loads `ingress` and `egress` and attaches them (tcx) to `iface` of the calling thread's
    /// network namespace. The program fds are closed again: each link holds its program.
    ///
    /// # Errors
    /// [`LabError::Bpf`] with the verifier's log, or when the interface does not exist or the
    /// kernel has no tcx (< 6.6).
    pub fn attach(iface: &str, ingress: &[Insn], egress: &[Insn]) -> Result<Tagger, LabError> {
        let ifindex = fastpath_io::sys::ifindex(iface).map_err(|e| LabError::Io(format!("{iface}: {e}")))?;
        let pi = Prog::load(ProgType::SCHED_CLS, ingress, "GPL", bpf::BPF_TCX_INGRESS, "fp_tag_in")
            .map_err(|e| bpf_err("loading the ingress tagger", iface, e))?;
        let pe = Prog::load(ProgType::SCHED_CLS, egress, "GPL", bpf::BPF_TCX_EGRESS, "fp_tag_out")
            .map_err(|e| bpf_err("loading the egress tagger", iface, e))?;
        let i = Link::tcx_ingress(&pi, ifindex).map_err(|e| bpf_err("attaching the ingress tagger", iface, e))?;
        let o = Link::tcx_egress(&pe, ifindex).map_err(|e| bpf_err("attaching the egress tagger", iface, e))?;
        Ok(Tagger { _ingress: i, _egress: o })
    }

    /// A subscriber port's tagger (the access namespace's end of its veth): frames from the
    /// subscriber get its C-tag and S-tag, frames to it must carry them and lose them.
    ///
    /// # Errors
    /// As [`Tagger::attach`].
    pub fn subscriber(iface: &str, svid: u16, cvid: u16) -> Result<Tagger, LabError> {
        Tagger::attach(iface, &push_qinq(svid, cvid), &pop_qinq(svid, cvid))
    }

    /// A core host's tagger (on its own interface): frames it sends get VLAN `vid`, frames it
    /// receives must carry it and lose it.
    ///
    /// # Errors
    /// As [`Tagger::attach`].
    pub fn core_host(iface: &str, vid: u16) -> Result<Tagger, LabError> {
        Tagger::attach(iface, &pop_vlan(vid), &push_vlan(vid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every jump of a program lands inside it, and the ones meant to drop land on the
    /// `r0 = SHOT` of its end.
    fn check_jumps(p: &[Insn]) {
        let drop_at = p.len() - 2;
        assert_eq!(p[drop_at], Insn::mov64_imm(R0, tc_action::SHOT));
        for (k, insn) in p.iter().enumerate() {
            let class = insn.code & 0x07;
            let op = insn.code & 0xf0;
            // BPF_JMP class, not call (0x80) or exit (0x90).
            if class == 0x05 && op != 0x80 && op != 0x90 {
                let to = k as i64 + 1 + i64::from(insn.off);
                assert!((0..p.len() as i64).contains(&to), "insn {k} jumps out to {to}");
                if insn.code != 0x05 {
                    assert_eq!(to as usize, drop_at, "conditional jump at {k} should drop");
                }
            }
        }
    }

    #[test]
    fn conditional_jumps_go_to_the_drop() {
        check_jumps(&push_qinq(100, 7));
        check_jumps(&pop_qinq(100, 7));
        check_jumps(&push_vlan(10));
        check_jumps(&pop_vlan(10));
    }

    #[test]
    fn tags_are_immediates() {
        let p = pop_qinq(4094, 4000);
        assert!(p.contains(&Insn::jne_imm(R2, 4094, 22)));
        assert!(p.contains(&Insn::jne_imm(R4, 4000, 8)));
        let p = push_qinq(100, 7);
        assert!(p.contains(&Insn::mov64_imm(R3, 7)) && p.contains(&Insn::mov64_imm(R3, 100)));
    }
}
