//! VXLAN (RFC 7348) in the generated program, with the engine's meaning
//! (`stages::vxlan`, `action::vxlan_decap`):
//!
//! ```text
//!  vxlan_decap   the outer headers are not cut: START (bytes before the frame's logical start)
//!                grows by the inner frame's offset, and the header offsets and validity move
//!                as the engine's do
//!  vxlan_encap   START ≥ 50: the 50 outer bytes are written in place, START -= 50 — a decap
//!                then an encap of an IPv4 tunnel without options rewrites the outer headers
//!                in place, and a 64 KB GSO packet stays one packet with its offload state
//!                START < 50: the frame is cut to its logical start, then grown by 50 bytes
//!                (`bpf_xdp_adjust_head` / `bpf_skb_adjust_room` with the encapsulation flags)
//!  at the end    START > 0: the frame is cut to its logical start
//! ```
//! The outer headers are the engine's template: DF, TTL 64, IP id 0, UDP checksum 0, the UDP
//! source port `0xC000 | hash[13:0]` from the inner flow's hash (computed here the same way).

use super::{
    Args, Gen, Hook, ADJ_ENCAP_VXLAN, ADJ_FIXED_GSO, ADJ_ROOM_MAC, FLEN, HASH, HELPER_SKB_ADJUST_ROOM, HELPER_XDP_ADJUST_HEAD, KEY, SLOTS,
    START, VALID,
};
use crate::asm::{Alu, Jmp, Size};
use fastpath_io::bpf::{Reg, R0, R1, R10, R2, R3, R4, R5, R6, R7, R8};
use fastpath_packet::{DropReason, Hdr, HdrSet, Slot};
use fastpath_pipeline::ir::Operand;

/// Bytes `vxlan_encap` puts in front: Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8.
const ENCAP: i32 = 50;

/// The flow hash's constants (`stages::vxlan::flow_hash`).
const H1: u64 = 0x9e37_79b9_7f4a_7c15;
const H2: u64 = 0xbf58_476d_1ce4_e5b9;
const H3: u64 = 0x94d0_49bb_1331_11eb;

fn slot_off(s: Slot) -> i16 {
    SLOTS - 8 * s as i16
}

impl Gen<'_> {
    /// `*(u16 *)(base + off) = v` in network order.
    fn st_be16(&mut self, base: Reg, off: i16, v: u16) {
        self.a.st(Size::H, base, off, i32::from(v.swap_bytes()));
    }

    /// `r1` = the engine's flow hash of the packet as it now is (never 0). Clobbers r0–r5.
    fn flow_hash(&mut self) {
        let (no_ports, ports_done, no_ip, mix, none, nonzero) =
            (self.a.label(), self.a.label(), self.a.label(), self.a.label(), self.a.label(), self.a.label());
        let (udp, tcp) = (HdrSet::EMPTY.with(Hdr::Udp), HdrSet::EMPTY.with(Hdr::Tcp));
        let base = self.header((Slot::L4, udp, tcp), 4, (R1, R2), no_ports);
        self.a.ldx(Size::W, R3, base, 0);
        self.a.be(R3, 32);
        self.a.ja(ports_done);
        self.a.bind(no_ports);
        self.a.alu_imm(Alu::Mov, R3, 0);
        self.a.bind(ports_done);
        self.a.stx(Size::Dw, R10, KEY, R3);
        // r3 = a, r4 = b, r2 = the protocol.
        let base = self.header((Slot::L3, HdrSet::EMPTY.with(Hdr::Ipv4), HdrSet::EMPTY), 20, (R1, R2), no_ip);
        self.a.ldx(Size::W, R3, base, 12);
        self.a.be(R3, 32);
        self.a.ldx(Size::W, R4, base, 16);
        self.a.be(R4, 32);
        self.a.ldx(Size::B, R2, base, 9);
        self.a.ja(mix);
        // No IP header: the MAC addresses.
        self.a.bind(no_ip);
        let base = self.header((Slot::Eth, HdrSet::EMPTY, HdrSet::EMPTY), 12, (R1, R2), none);
        self.a.ldx(Size::W, R3, base, 0);
        self.a.be(R3, 32);
        self.a.alu_imm(Alu::Lsh, R3, 16);
        self.a.ldx(Size::W, R1, base, 4);
        self.a.be(R1, 32);
        self.a.alu_reg(Alu::Or, R3, R1);
        self.a.ldx(Size::W, R4, base, 8);
        self.a.be(R4, 32);
        self.a.alu_imm(Alu::Mov, R2, 0);
        self.a.ja(mix);
        self.a.bind(none);
        for r in [R2, R3, R4] {
            self.a.alu_imm(Alu::Mov, r, 0);
        }
        self.a.bind(mix);
        // x = (a ^ H1) * (b ^ H2 ^ (proto << 32 | ports)); x = (x ^ x >> 29) * H3; x ^ x >> 32.
        self.a.alu_imm(Alu::Lsh, R2, 32);
        self.a.ldx(Size::Dw, R1, R10, KEY);
        self.a.alu_reg(Alu::Or, R2, R1);
        self.a.mov_const(R1, H2);
        self.a.alu_reg(Alu::Xor, R4, R1);
        self.a.alu_reg(Alu::Xor, R4, R2);
        self.a.mov_const(R1, H1);
        self.a.alu_reg(Alu::Xor, R3, R1);
        self.a.alu_reg(Alu::Mul, R3, R4);
        self.a.alu_reg(Alu::Mov, R1, R3);
        self.a.alu_imm(Alu::Rsh, R1, 29);
        self.a.alu_reg(Alu::Xor, R3, R1);
        self.a.mov_const(R1, H3);
        self.a.alu_reg(Alu::Mul, R3, R1);
        self.a.alu_reg(Alu::Mov, R1, R3);
        self.a.alu_imm(Alu::Rsh, R1, 32);
        self.a.alu_reg(Alu::Xor, R3, R1);
        self.a.alu_imm(Alu::Lsh, R3, 32);
        self.a.alu_imm(Alu::Rsh, R3, 32);
        self.a.jmp_imm(Jmp::Ne, R3, 0, nonzero);
        self.a.alu_imm(Alu::Mov, R3, 1);
        self.a.bind(nonzero);
        self.a.alu_reg(Alu::Mov, R1, R3);
    }

    /// `hash`: `meta.hash` from the flow, kept when already set; left in `r1`.
    pub(super) fn hash(&mut self) {
        let have = self.a.label();
        self.a.ldx(Size::Dw, R1, R10, HASH);
        self.a.jmp_imm(Jmp::Ne, R1, 0, have);
        self.flow_hash();
        self.a.stx(Size::Dw, R10, HASH, R1);
        self.a.bind(have);
    }

    /// `vxlan_decap` (drops as `vxlan_truncated` without VXLAN and an inner frame).
    pub(super) fn vxlan_decap(&mut self) {
        let ok = self.a.label();
        let need = HdrSet::EMPTY.with(Hdr::Vxlan).with(Hdr::InnerEth);
        self.a.ldx(Size::Dw, R1, R10, VALID);
        self.a.alu_imm(Alu::And, R1, need.0 as i32);
        self.a.jmp_imm(Jmp::Eq, R1, need.0 as i32, ok);
        self.drop(DropReason::VxlanTruncated);
        self.a.bind(ok);
        // r3 = the cut: the inner frame's offset. Inner layers become the outer ones (an
        // absent one's offset: 0, as the engine's saturating subtraction gives).
        self.a.ldx(Size::Dw, R3, R10, slot_off(Slot::InnerEth));
        for (from, to) in [(Slot::InnerL3, Slot::L3), (Slot::InnerL4, Slot::L4)] {
            let (zero, store) = (self.a.label(), self.a.label());
            self.a.ldx(Size::Dw, R1, R10, slot_off(from));
            self.a.jmp_reg(Jmp::Lt, R1, R3, zero);
            self.a.alu_reg(Alu::Sub, R1, R3);
            self.a.ja(store);
            self.a.bind(zero);
            self.a.alu_imm(Alu::Mov, R1, 0);
            self.a.bind(store);
            self.a.stx(Size::Dw, R10, slot_off(to), R1);
        }
        for s in [Slot::Vlan0, Slot::Vlan1, Slot::Tunnel, Slot::InnerEth, Slot::InnerL3, Slot::InnerL4] {
            self.a.st(Size::Dw, R10, slot_off(s), 0);
        }
        let map = [(Hdr::InnerIpv4, Hdr::Ipv4), (Hdr::InnerUdp, Hdr::Udp), (Hdr::InnerTcp, Hdr::Tcp), (Hdr::InnerIcmp, Hdr::Icmp)];
        self.remap_valid(HdrSet::EMPTY.with(Hdr::Eth), &map);
        self.a.ldx(Size::Dw, R1, R10, START);
        self.a.alu_reg(Alu::Add, R1, R3);
        self.a.stx(Size::Dw, R10, START, R1);
    }

    /// VALID = `base` plus, for each `(from, to)` of `map`, `to` when VALID has `from`.
    fn remap_valid(&mut self, base: HdrSet, map: &[(Hdr, Hdr)]) {
        self.a.ldx(Size::Dw, R1, R10, VALID);
        self.a.alu_imm(Alu::Mov, R2, base.0 as i32);
        for &(from, to) in map {
            let skip = self.a.label();
            self.a.alu_reg(Alu::Mov, R4, R1);
            self.a.alu_imm(Alu::And, R4, from.bit() as i32);
            self.a.jmp_imm(Jmp::Eq, R4, 0, skip);
            self.a.alu_imm(Alu::Or, R2, to.bit() as i32);
            self.a.bind(skip);
        }
        self.a.stx(Size::Dw, R10, VALID, R2);
    }

    /// After a helper that moved the frame's start: drops as `no_headroom` when it failed
    /// (`r0` ≠ 0), else reloads `r7`/`r8`.
    fn adjusted(&mut self) {
        let ok = self.a.label();
        self.a.jmp_imm(Jmp::Eq, R0, 0, ok);
        self.drop(DropReason::NoHeadroom);
        self.a.bind(ok);
        self.reload();
    }

    /// Cuts the frame to its logical start (START bytes off its front), START = 0. Clobbers
    /// r0–r5; reloads r7/r8.
    pub(super) fn cut_to_start(&mut self) {
        let done = self.a.label();
        self.a.ldx(Size::Dw, R2, R10, START);
        self.a.jmp_imm(Jmp::Eq, R2, 0, done);
        match self.hook {
            Hook::Xdp => {
                self.a.alu_reg(Alu::Mov, R1, R6);
                self.a.call(HELPER_XDP_ADJUST_HEAD);
            }
            Hook::Tc => {
                // The room goes right after the Ethernet header: the logical frame's Ethernet
                // header is copied to the front first (forwards: its source lies after it).
                let ok = self.a.label();
                self.a.alu_reg(Alu::Mov, R5, R7);
                self.a.alu_reg(Alu::Add, R5, R2);
                self.a.alu_reg(Alu::Mov, R1, R5);
                self.a.alu_imm(Alu::Add, R1, 14);
                self.a.jmp_reg(Jmp::Le, R1, R8, ok);
                self.drop(DropReason::VxlanTruncated);
                self.a.bind(ok);
                for (off, size) in [(0, Size::Dw), (8, Size::W), (12, Size::H)] {
                    self.a.ldx(size, R1, R5, off);
                    self.a.stx(size, R7, off, R1);
                }
                self.a.alu_reg(Alu::Mov, R1, R6);
                self.a.alu_imm(Alu::Mov, R3, 0);
                self.a.alu_reg(Alu::Sub, R3, R2);
                self.a.alu_reg(Alu::Mov, R2, R3);
                self.a.alu_imm(Alu::Mov, R3, ADJ_ROOM_MAC);
                self.a.mov_const(R4, ADJ_FIXED_GSO);
                self.a.call(HELPER_SKB_ADJUST_ROOM);
            }
        }
        self.adjusted();
        self.a.ldx(Size::Dw, R1, R10, FLEN);
        self.a.ldx(Size::Dw, R2, R10, START);
        self.a.alu_reg(Alu::Sub, R1, R2);
        self.a.stx(Size::Dw, R10, FLEN, R1);
        self.a.st(Size::Dw, R10, START, 0);
        self.a.bind(done);
    }

    /// Grows the frame by [`ENCAP`] bytes in front; START = [`ENCAP`] (START was 0).
    fn grow(&mut self) {
        match self.hook {
            Hook::Xdp => {
                self.a.alu_reg(Alu::Mov, R1, R6);
                self.a.alu_imm(Alu::Mov, R2, -ENCAP);
                self.a.call(HELPER_XDP_ADJUST_HEAD);
            }
            Hook::Tc => {
                self.a.alu_reg(Alu::Mov, R1, R6);
                self.a.alu_imm(Alu::Mov, R2, ENCAP);
                self.a.alu_imm(Alu::Mov, R3, ADJ_ROOM_MAC);
                self.a.mov_const(R4, ADJ_ENCAP_VXLAN);
                self.a.call(HELPER_SKB_ADJUST_ROOM);
            }
        }
        self.adjusted();
        if self.hook == Hook::Tc {
            // The room is after the Ethernet header: move that header behind it.
            let ok = self.a.label();
            self.a.alu_reg(Alu::Mov, R1, R7);
            self.a.alu_imm(Alu::Add, R1, ENCAP + 14);
            self.a.jmp_reg(Jmp::Le, R1, R8, ok);
            self.drop(DropReason::NoHeadroom);
            self.a.bind(ok);
            for (off, size) in [(0, Size::Dw), (8, Size::W), (12, Size::H)] {
                self.a.ldx(size, R1, R7, off);
                self.a.stx(size, R7, ENCAP as i16 + off, R1);
            }
        }
        self.a.ldx(Size::Dw, R1, R10, FLEN);
        self.a.alu_imm(Alu::Add, R1, ENCAP);
        self.a.stx(Size::Dw, R10, FLEN, R1);
        self.a.st(Size::Dw, R10, START, ENCAP);
    }

    /// `vxlan_encap DMAC SMAC SRC DST VNI`.
    pub(super) fn vxlan_encap(&mut self, ops: &[Operand; 5], args: Args<'_>) {
        self.hash();
        // The operands, at KEY+8.. (the flow hash used KEY).
        for (i, o) in ops.iter().enumerate() {
            self.operand(o, args, R3, R1);
            self.a.stx(Size::Dw, R10, KEY + 8 * (i as i16 + 1), R3);
        }
        let room = self.a.label();
        self.a.ldx(Size::Dw, R1, R10, START);
        self.a.jmp_imm(Jmp::Ge, R1, ENCAP, room);
        self.cut_to_start();
        self.grow();
        self.a.bind(room);
        // r4 = the IPv4 total length: the frame's logical length + 36.
        self.a.ldx(Size::Dw, R4, R10, FLEN);
        self.a.ldx(Size::Dw, R1, R10, START);
        self.a.alu_reg(Alu::Sub, R4, R1);
        self.a.alu_imm(Alu::Add, R4, 36);
        self.a.alu_imm(Alu::And, R4, 0xffff);
        self.a.alu_imm(Alu::Sub, R1, ENCAP);
        self.a.stx(Size::Dw, R10, START, R1);
        // r5 = the new logical start, with the 50 bytes and the inner Ethernet header there.
        let ok = self.a.label();
        self.a.alu_reg(Alu::Mov, R5, R7);
        self.a.alu_reg(Alu::Add, R5, R1);
        self.a.alu_reg(Alu::Mov, R2, R5);
        self.a.alu_imm(Alu::Add, R2, ENCAP + 14);
        self.a.jmp_reg(Jmp::Le, R2, R8, ok);
        self.drop(DropReason::NoHeadroom);
        self.a.bind(ok);
        // Ethernet.
        self.a.ldx(Size::Dw, R3, R10, KEY + 8);
        self.store_be(R5, 0, 6, R3, R1);
        self.a.ldx(Size::Dw, R3, R10, KEY + 16);
        self.store_be(R5, 6, 6, R3, R1);
        self.st_be16(R5, 12, 0x0800);
        // IPv4: 45 00 len | 0000 4000 | 40 11 csum | src | dst.
        self.st_be16(R5, 14, 0x4500);
        self.store_be(R5, 16, 2, R4, R1);
        self.st_be16(R5, 18, 0);
        self.st_be16(R5, 20, 0x4000);
        self.st_be16(R5, 22, 0x4011);
        self.a.ldx(Size::Dw, R3, R10, KEY + 24);
        self.store_be(R5, 26, 4, R3, R1);
        self.a.ldx(Size::Dw, R2, R10, KEY + 32);
        self.store_be(R5, 30, 4, R2, R1);
        // The header checksum: the fold of its words (RFC 1071), in r3.
        self.a.alu_imm(Alu::Lsh, R3, 32);
        self.a.alu_imm(Alu::Rsh, R3, 32);
        self.a.alu_imm(Alu::Lsh, R2, 32);
        self.a.alu_imm(Alu::Rsh, R2, 32);
        self.a.alu_reg(Alu::Add, R3, R2);
        self.a.alu_reg(Alu::Add, R3, R4);
        self.a.alu_imm(Alu::Add, R3, 0x4500 + 0x4000 + 0x4011);
        self.fold(R3, R1);
        self.a.alu_imm(Alu::Xor, R3, 0xffff);
        self.store_be(R5, 24, 2, R3, R1);
        // UDP: sport | 4789 | length | checksum 0.
        self.a.ldx(Size::Dw, R3, R10, HASH);
        self.a.alu_imm(Alu::And, R3, 0x3fff);
        self.a.alu_imm(Alu::Or, R3, 0xc000);
        self.store_be(R5, 34, 2, R3, R1);
        self.st_be16(R5, 36, 4789);
        self.a.alu_imm(Alu::Sub, R4, 20);
        self.a.alu_imm(Alu::And, R4, 0xffff);
        self.store_be(R5, 38, 2, R4, R1);
        self.st_be16(R5, 40, 0);
        // VXLAN: flags 08, the VNI in bytes 4..7.
        self.a.st(Size::W, R5, 42, 0x08);
        self.a.ldx(Size::Dw, R3, R10, KEY + 40);
        self.a.alu_imm(Alu::Lsh, R3, 8);
        self.store_be(R5, 46, 4, R3, R1);
        // The old layers become the inner ones.
        for (from, to) in [(Slot::L3, Slot::InnerL3), (Slot::L4, Slot::InnerL4)] {
            self.a.ldx(Size::Dw, R1, R10, slot_off(from));
            self.a.alu_imm(Alu::Add, R1, ENCAP);
            self.a.stx(Size::Dw, R10, slot_off(to), R1);
        }
        for (s, at) in [
            (Slot::Eth, 0),
            (Slot::Vlan0, 0),
            (Slot::Vlan1, 0),
            (Slot::L3, 14),
            (Slot::L4, 34),
            (Slot::Tunnel, 42),
            (Slot::InnerEth, ENCAP),
        ] {
            self.a.st(Size::Dw, R10, slot_off(s), at);
        }
        let base = HdrSet::EMPTY.with(Hdr::Eth).with(Hdr::Ipv4).with(Hdr::Udp).with(Hdr::Vxlan).with(Hdr::InnerEth);
        let map = [(Hdr::Ipv4, Hdr::InnerIpv4), (Hdr::Udp, Hdr::InnerUdp), (Hdr::Tcp, Hdr::InnerTcp), (Hdr::Icmp, Hdr::InnerIcmp)];
        self.remap_valid(base, &map);
    }
}
