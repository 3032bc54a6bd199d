//! The generated parser: the engine's header walk (`stages::parser`) over [`PARSED`], with the
//! same drops, one header at a time from frame offset `r9`.

use super::{Gen, Hook, FLEN, HELPER_SKB_PULL_DATA, PEND, PROTO, SLOTS, VALID};
use crate::asm::{Alu, Jmp, Label, Size};
use fastpath_io::bpf::{Reg, R0, R1, R10, R2, R3, R5, R6, R7, R8, R9};
use fastpath_packet::{DropReason, Hdr, Slot};

/// The opposite of a jump's condition.
fn inverse(j: Jmp) -> Jmp {
    match j {
        Jmp::Eq => Jmp::Ne,
        Jmp::Ne => Jmp::Eq,
        Jmp::Lt => Jmp::Ge,
        Jmp::Ge => Jmp::Lt,
        Jmp::Gt => Jmp::Le,
        Jmp::Le => Jmp::Gt,
    }
}

/// The header being parsed starts at frame offset `r9`; [`Gen::ensure`] points `r5` at it.
impl Gen<'_> {
    /// Drops for `r` when `reg op imm`.
    pub(super) fn drop_if(&mut self, op: Jmp, reg: Reg, imm: i32, r: DropReason) {
        let skip = self.a.label();
        self.a.jmp_imm(inverse(op), reg, imm, skip);
        self.drop(r);
        self.a.bind(skip);
    }

    /// Drops for `r` when `x op y`.
    pub(super) fn drop_if_reg(&mut self, op: Jmp, x: Reg, y: Reg, r: DropReason) {
        let skip = self.a.label();
        self.a.jmp_reg(inverse(op), x, y, skip);
        self.drop(r);
        self.a.bind(skip);
    }

    /// `dst` = the stack word at `from` minus `r9` (bytes from the header to the frame's or
    /// the IP payload's end).
    fn room(&mut self, dst: Reg, from: i16) {
        self.a.ldx(Size::Dw, dst, R10, from);
        self.a.alu_reg(Alu::Sub, dst, R9);
    }

    /// `r5` = the frame's start + `r9`; on to `ok` when `n` bytes from there are linear.
    fn at_r9(&mut self, n: i32, ok: Label) {
        self.a.alu_reg(Alu::Mov, R5, R7);
        self.a.alu_reg(Alu::Add, R5, R9);
        self.a.alu_reg(Alu::Mov, R1, R5);
        self.a.alu_imm(Alu::Add, R1, n);
        self.a.jmp_reg(Jmp::Le, R1, R8, ok);
    }

    /// Reloads `r7`/`r8` after a helper that may move the packet, and the verifier's
    /// knowledge that the Ethernet header is there.
    pub(super) fn reload(&mut self) {
        let (_, data, end) = self.hook.ctx();
        let ok = self.a.label();
        self.a.ldx(Size::W, R7, R6, data);
        self.a.ldx(Size::W, R8, R6, end);
        self.a.alu_reg(Alu::Mov, R1, R7);
        self.a.alu_imm(Alu::Add, R1, 14);
        self.a.jmp_reg(Jmp::Le, R1, R8, ok);
        self.drop(DropReason::EthTruncated);
        self.a.bind(ok);
    }

    /// Points `r5` at the `n` bytes at `r9`, pulling them into an skb's linear part at tc
    /// (the caller checked they are in the frame); drops for `r` when they cannot be had (at
    /// XDP, a header past the first buffer). Clobbers `r0`–`r5`.
    fn ensure(&mut self, n: i32, r: DropReason) {
        let ok = self.a.label();
        self.at_r9(n, ok);
        if self.hook == Hook::Tc {
            self.a.alu_reg(Alu::Mov, R1, R6);
            self.a.alu_reg(Alu::Mov, R2, R9);
            self.a.alu_imm(Alu::Add, R2, n);
            self.a.call(HELPER_SKB_PULL_DATA);
            self.reload();
            self.at_r9(n, ok);
        }
        self.drop(r);
        self.a.bind(ok);
    }

    /// Records header `h` as found, in `slot` at offset `r9` (clobbers `r0` only).
    fn mark(&mut self, h: Hdr, slot: Slot) {
        self.a.ldx(Size::Dw, R0, R10, VALID);
        self.a.alu_imm(Alu::Or, R0, h.bit() as i32);
        self.a.stx(Size::Dw, R10, VALID, R0);
        self.a.stx(Size::Dw, R10, SLOTS - 8 * slot as i16, R9);
    }

    /// The walk from the outer IPv4 header on (the Ethernet header is checked).
    pub(super) fn parse(&mut self) {
        let hs = self.p.headers;
        if !hs.has(Hdr::Ipv4) {
            return;
        }
        let done = self.a.label();
        self.a.ldx(Size::H, R1, R7, 12);
        self.a.be(R1, 16);
        self.a.jmp_imm(Jmp::Ne, R1, 0x0800, done);
        self.a.alu_imm(Alu::Mov, R9, 14);
        self.ipv4(false, done);
        self.l4(false, done);
        self.a.bind(done);
    }

    /// IPv4 at `r9` (as `hdr::Ipv4::parse`): on return `r9` is the upper layer's offset and
    /// PROTO / PEND are set; a non-first fragment goes to `done`.
    fn ipv4(&mut self, inner: bool, done: Label) {
        let (h, slot) = if inner { (Hdr::InnerIpv4, Slot::InnerL3) } else { (Hdr::Ipv4, Slot::L3) };
        let trunc = DropReason::Ipv4Truncated;
        self.room(R1, FLEN);
        self.drop_if(Jmp::Lt, R1, 20, trunc);
        self.ensure(20, trunc);
        self.a.ldx(Size::B, R1, R5, 0);
        self.a.alu_reg(Alu::Mov, R2, R1);
        self.a.alu_imm(Alu::Rsh, R2, 4);
        self.drop_if(Jmp::Ne, R2, 4, DropReason::Ipv4Version);
        self.a.alu_imm(Alu::And, R1, 0xf);
        self.a.alu_imm(Alu::Lsh, R1, 2);
        self.drop_if(Jmp::Lt, R1, 20, DropReason::Ipv4BadIhl);
        self.a.ldx(Size::H, R2, R5, 2);
        self.a.be(R2, 16);
        self.drop_if_reg(Jmp::Lt, R2, R1, DropReason::Ipv4BadTotalLen);
        self.room(R3, FLEN);
        self.drop_if_reg(Jmp::Gt, R2, R3, trunc);
        self.mark(h, slot);
        // A non-first fragment has no upper-layer header.
        self.a.ldx(Size::H, R3, R5, 6);
        self.a.be(R3, 16);
        self.a.alu_imm(Alu::And, R3, 0x1fff);
        self.a.jmp_imm(Jmp::Ne, R3, 0, done);
        self.a.ldx(Size::B, R3, R5, 9);
        self.a.stx(Size::Dw, R10, PROTO, R3);
        self.a.alu_reg(Alu::Mov, R3, R9);
        self.a.alu_reg(Alu::Add, R3, R2);
        self.a.stx(Size::Dw, R10, PEND, R3);
        self.a.alu_reg(Alu::Add, R9, R1);
    }

    /// A fixed header of `n` bytes at `r9` inside the IP payload, or a drop for `r`.
    fn fixed(&mut self, n: i32, r: DropReason) {
        self.room(R1, PEND);
        self.drop_if(Jmp::Lt, R1, n, r);
        self.ensure(n, r);
    }

    /// The upper layer at `r9` (PROTO, PEND set), as the engine's `Parser::l4`; the outer UDP
    /// leads on to VXLAN and the inner frame.
    fn l4(&mut self, inner: bool, done: Label) {
        let hs = self.p.headers;
        let (udp, tcp, icmp, slot) =
            if inner { (Hdr::InnerUdp, Hdr::InnerTcp, Hdr::InnerIcmp, Slot::InnerL4) } else { (Hdr::Udp, Hdr::Tcp, Hdr::Icmp, Slot::L4) };
        if hs.has(udp) {
            let next = self.a.label();
            self.a.ldx(Size::Dw, R1, R10, PROTO);
            self.a.jmp_imm(Jmp::Ne, R1, 17, next);
            let r = DropReason::UdpTruncated;
            self.fixed(8, r);
            self.a.ldx(Size::H, R2, R5, 4);
            self.a.be(R2, 16);
            self.drop_if(Jmp::Lt, R2, 8, r);
            self.room(R1, PEND);
            self.drop_if_reg(Jmp::Gt, R2, R1, r);
            self.mark(udp, slot);
            // Past the inner IPv4 header, the VXLAN walk ends in a jump to `done` of its own
            // (and the verifier refuses unreachable code).
            if inner || !hs.has(Hdr::Vxlan) || !self.vxlan(done) {
                self.a.ja(done);
            }
            self.a.bind(next);
        }
        if hs.has(tcp) {
            let next = self.a.label();
            self.a.ldx(Size::Dw, R1, R10, PROTO);
            self.a.jmp_imm(Jmp::Ne, R1, 6, next);
            let r = DropReason::TcpTruncated;
            self.fixed(20, r);
            self.a.ldx(Size::B, R2, R5, 12);
            self.a.alu_imm(Alu::Rsh, R2, 4);
            self.a.alu_imm(Alu::Lsh, R2, 2);
            self.drop_if(Jmp::Lt, R2, 20, r);
            self.room(R1, PEND);
            self.drop_if_reg(Jmp::Gt, R2, R1, r);
            self.mark(tcp, slot);
            self.a.ja(done);
            self.a.bind(next);
        }
        if hs.has(icmp) {
            // The engine parses ICMP (and, inside, also protocol 58) where the spec lists it.
            let (yes, next) = (self.a.label(), self.a.label());
            self.a.ldx(Size::Dw, R1, R10, PROTO);
            self.a.jmp_imm(Jmp::Eq, R1, 1, yes);
            if inner {
                self.a.jmp_imm(Jmp::Eq, R1, 58, yes);
            }
            self.a.ja(next);
            self.a.bind(yes);
            self.fixed(8, DropReason::IcmpTruncated);
            self.mark(icmp, slot);
            self.a.bind(next);
        }
        self.a.ja(done);
    }

    /// After the outer UDP header (`r5` on it): VXLAN on destination port 4789 (RFC 7348 §5),
    /// then the inner Ethernet frame and its IPv4 packet where the spec parses them. True when
    /// the code ends in a jump to `done`.
    fn vxlan(&mut self, done: Label) -> bool {
        let hs = self.p.headers;
        self.a.ldx(Size::H, R1, R5, 2);
        self.a.be(R1, 16);
        self.a.jmp_imm(Jmp::Ne, R1, 4789, done);
        self.a.alu_imm(Alu::Add, R9, 8);
        self.fixed(8, DropReason::VxlanTruncated);
        self.a.ldx(Size::B, R1, R5, 0);
        self.a.alu_imm(Alu::And, R1, 0x08);
        self.drop_if(Jmp::Eq, R1, 0, DropReason::VxlanBadFlags);
        self.mark(Hdr::Vxlan, Slot::Tunnel);
        if !hs.has(Hdr::InnerEth) {
            return false;
        }
        self.a.alu_imm(Alu::Add, R9, 8);
        self.fixed(14, DropReason::VxlanTruncated);
        self.mark(Hdr::InnerEth, Slot::InnerEth);
        if !hs.has(Hdr::InnerIpv4) {
            return false;
        }
        self.a.ldx(Size::H, R1, R5, 12);
        self.a.be(R1, 16);
        self.a.jmp_imm(Jmp::Ne, R1, 0x0800, done);
        self.a.alu_imm(Alu::Add, R9, 14);
        self.ipv4(true, done);
        self.l4(true, done);
        true
    }
}
