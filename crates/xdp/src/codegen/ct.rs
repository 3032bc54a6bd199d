//! Connection tracking in the generated program: the engine's `conntrack` stage
//! (`stages::conntrack`, `fastpath_tables::flow`) for a table without window checks
//! (`window_check = false`), one packet at a time.
//!
//! ```text
//!  key     zone (u32) ▸ lower (address, port) ▸ higher (address, port) ▸ protocol: 24 bytes,
//!          the engine's normalised FlowKey for IPv4 (ICMP echo: the identifier as both ports)
//!  map     LRU hash of `size` flows: state, closer, initiator's side, cached verdict, deadline
//!  lookup  a live entry (now < deadline) ▸ the state machine (netfilter's TCP states, UDP
//!          unreplied/replied, ICMP echo) ▸ ct.established (+ ct.reply), the deadline pushed to
//!          now + timeout(state); an invalid packet changes nothing (ct.invalid)
//!  miss    a packet that may open a connection (TCP: a lone SYN) inserts one ▸ ct.new
//! ```
//! `meta.hash` becomes the engine's: the high half of `hash_key(key, seed)` (a 64×64→128-bit
//! multiply done in 32-bit halves), with bit 0 set. Unlike the engine's table, a full LRU map
//! evicts its least recently used flow instead of dropping the new one.

use super::tcpwin::{T_CLOSER, T_DIR, T_NEXT};
use super::{Args, Gen, COUNT, CT, CTKEY, FLOW, HASH, KEY, LOOP_I, PEND, PROTO, VALID};
use crate::asm::{Alu, Jmp, Label, Size};
use fastpath_io::bpf::{Insn, Reg, R0, R1, R10, R2, R3, R4, R5, R9};
use fastpath_packet::{DropReason, Hdr, HdrSet, Slot};
use fastpath_pipeline::ir::Operand;
use fastpath_tables::flow::{flags, proto, State, Timeouts, HASH_PRIMES};

/// `bpf_map_update_elem(map, key, value, flags)`.
const HELPER_MAP_UPDATE: i32 = 2;
/// `bpf_ktime_get_ns()`.
const HELPER_KTIME_GET_NS: i32 = 5;

/// `ct.*` flag bits (`stages::conntrack`).
const CT_NEW: i32 = 1;
const CT_ESTABLISHED: i32 = 2;
const CT_INVALID: i32 = 8;

/// Bytes of a flow's map key.
pub const CT_KEY_SIZE: u32 = 24;
/// Bytes of a flow's map value: state, closer, initiator's side, verdict, deadline, then the
/// two directions' TCP windows (`tcpwin`).
pub const CT_VALUE_SIZE: u32 = 48;

fn st(s: State) -> i32 {
    s as i32
}

impl Gen<'_> {
    /// `dst` = the timeout of the state in `state` (a compare chain over the states), using
    /// nothing else.
    fn timeout(&mut self, t: &Timeouts, state: Reg, dst: Reg) {
        let done = self.a.label();
        for s in State::ALL {
            let next = self.a.label();
            self.a.jmp_imm(Jmp::Ne, state, st(s), next);
            self.a.mov_const(dst, t.of(s));
            self.a.ja(done);
            self.a.bind(next);
        }
        self.a.alu_imm(Alu::Mov, dst, 0);
        self.a.bind(done);
    }

    /// `r0` = mum(`r1`, `r2`): the 128-bit product's halves xor-ed (`flow::mum`). Clobbers
    /// r1–r5.
    fn mum(&mut self) {
        let lo32 = |g: &mut Gen<'_>, r: Reg| {
            g.a.alu_imm(Alu::Lsh, r, 32);
            g.a.alu_imm(Alu::Rsh, r, 32);
        };
        self.a.alu_reg(Alu::Mov, R3, R1);
        self.a.alu_imm(Alu::Rsh, R3, 32); // xh
        lo32(self, R1); // xl
        self.a.alu_reg(Alu::Mov, R4, R2);
        self.a.alu_imm(Alu::Rsh, R4, 32); // yh
        lo32(self, R2); // yl
        self.a.alu_reg(Alu::Mov, R0, R1);
        self.a.alu_reg(Alu::Mul, R0, R2); // ll
        self.a.alu_reg(Alu::Mov, R5, R1);
        self.a.alu_reg(Alu::Mul, R5, R4); // lh
        self.a.alu_reg(Alu::Mov, R1, R3);
        self.a.alu_reg(Alu::Mul, R1, R2); // hl
        self.a.alu_reg(Alu::Mul, R3, R4); // hh
                                          // mid = (ll >> 32) + lo32(lh) + lo32(hl)
        self.a.alu_reg(Alu::Mov, R2, R0);
        self.a.alu_imm(Alu::Rsh, R2, 32);
        self.a.alu_reg(Alu::Mov, R4, R5);
        lo32(self, R4);
        self.a.alu_reg(Alu::Add, R2, R4);
        self.a.alu_reg(Alu::Mov, R4, R1);
        lo32(self, R4);
        self.a.alu_reg(Alu::Add, R2, R4);
        // hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32)
        self.a.alu_imm(Alu::Rsh, R5, 32);
        self.a.alu_reg(Alu::Add, R3, R5);
        self.a.alu_imm(Alu::Rsh, R1, 32);
        self.a.alu_reg(Alu::Add, R3, R1);
        self.a.alu_reg(Alu::Mov, R4, R2);
        self.a.alu_imm(Alu::Rsh, R4, 32);
        self.a.alu_reg(Alu::Add, R3, R4);
        // lo = lo32(ll) | mid << 32
        lo32(self, R0);
        self.a.alu_imm(Alu::Lsh, R2, 32);
        self.a.alu_reg(Alu::Or, R0, R2);
        self.a.alu_reg(Alu::Xor, R0, R3);
    }

    /// HASH = the engine's `(hash_key(key, seed) >> 32) | 1` of the key at CTKEY.
    fn ct_hash(&mut self, seed: u64) {
        let [p0, p1, p2, p3] = HASH_PRIMES;
        // a = mum(addrs ^ P0 ^ seed, ports ^ P1); addrs = lo << 32 | hi.
        self.a.ldx(Size::W, R1, R10, CTKEY + 4);
        self.a.alu_imm(Alu::Lsh, R1, 32);
        self.a.ldx(Size::W, R2, R10, CTKEY + 8);
        self.a.alu_reg(Alu::Or, R1, R2);
        self.a.mov_const(R2, p0 ^ seed);
        self.a.alu_reg(Alu::Xor, R1, R2);
        // ports = zone << 32 | lo_port << 16 | hi_port.
        self.a.ldx(Size::W, R2, R10, CTKEY);
        self.a.alu_imm(Alu::Lsh, R2, 32);
        self.a.ldx(Size::H, R3, R10, CTKEY + 12);
        self.a.alu_imm(Alu::Lsh, R3, 16);
        self.a.alu_reg(Alu::Or, R2, R3);
        self.a.ldx(Size::H, R3, R10, CTKEY + 14);
        self.a.alu_reg(Alu::Or, R2, R3);
        self.a.mov_const(R3, p1);
        self.a.alu_reg(Alu::Xor, R2, R3);
        self.mum();
        // mum(a ^ P2, proto ^ seed ^ P3)
        self.a.alu_reg(Alu::Mov, R1, R0);
        self.a.mov_const(R2, p2);
        self.a.alu_reg(Alu::Xor, R1, R2);
        self.a.ldx(Size::B, R2, R10, CTKEY + 16);
        self.a.mov_const(R3, seed ^ p3);
        self.a.alu_reg(Alu::Xor, R2, R3);
        self.mum();
        self.a.alu_imm(Alu::Rsh, R0, 32);
        self.a.alu_imm(Alu::Or, R0, 1);
        self.a.stx(Size::Dw, R10, HASH, R0);
    }

    /// Jumps to `bad` for TCP flags (in `f`) no packet may carry (`tcp::bad_flags`); `t` is
    /// scratch.
    fn bad_flags(&mut self, f: Reg, t: Reg, bad: Label) {
        let sf = i32::from(flags::SYN | flags::FIN);
        let sr = i32::from(flags::SYN | flags::RST);
        let any = i32::from(flags::SYN | flags::FIN | flags::RST | flags::ACK);
        for (mask, want) in [(sf, sf), (sr, sr), (any, 0)] {
            self.a.alu_reg(Alu::Mov, t, f);
            self.a.alu_imm(Alu::And, t, mask);
            self.a.jmp_imm(Jmp::Eq, t, want, bad);
        }
    }

    /// The `conntrack CT ZONE` stage.
    pub(super) fn conntrack(&mut self, ct: u16, zone: Option<&Operand>) {
        let def = &self.p.conntracks[usize::from(ct)];
        let (timeouts, seed, window) = (def.config.timeouts, def.config.seed, def.config.window_check);
        let fd = self.maps.conntracks[usize::from(ct)];
        let a_done = self.a.label();
        let (tcp_l, udp_l, icmp_l, have, invalid, insert, track) =
            (self.a.label(), self.a.label(), self.a.label(), self.a.label(), self.a.label(), self.a.label(), self.a.label());
        self.a.st(Size::Dw, R10, CT, 0);
        self.a.st(Size::Dw, R10, FLOW, 0);
        // The zone (a field the packet lacks reads 0), then the protocol and its ports.
        match zone {
            Some(o) => self.operand(o, Args::None, R3, R1),
            None => self.a.alu_imm(Alu::Mov, R3, 0),
        }
        self.a.stx(Size::W, R10, CTKEY, R3);
        self.a.ldx(Size::Dw, R1, R10, VALID);
        self.a.alu_reg(Alu::Mov, R2, R1);
        self.a.alu_imm(Alu::And, R2, Hdr::Ipv4.bit() as i32);
        self.a.jmp_imm(Jmp::Eq, R2, 0, a_done);
        for (h, l) in [(Hdr::Tcp, tcp_l), (Hdr::Udp, udp_l), (Hdr::Icmp, icmp_l)] {
            self.a.alu_reg(Alu::Mov, R2, R1);
            self.a.alu_imm(Alu::And, R2, h.bit() as i32);
            self.a.jmp_imm(Jmp::Ne, R2, 0, l);
        }
        self.a.ja(a_done);
        let l4 = |h: Hdr| (Slot::L4, HdrSet::EMPTY.with(h), HdrSet::EMPTY);
        // TCP: flags in PEND, the segment in SEG (window checks), ports.
        self.a.bind(tcp_l);
        let base = self.header(l4(Hdr::Tcp), 20, (R1, R2), a_done);
        self.a.ldx(Size::B, R4, base, 13);
        self.a.stx(Size::Dw, R10, PEND, R4);
        if window {
            self.tcp_segment(a_done);
        }
        let base = self.header(l4(Hdr::Tcp), 20, (R1, R2), a_done);
        self.a.ldx(Size::W, R3, base, 0);
        self.a.be(R3, 32);
        self.a.st(Size::Dw, R10, PROTO, i32::from(proto::TCP));
        self.a.ja(have);
        self.a.bind(udp_l);
        let base = self.header(l4(Hdr::Udp), 4, (R1, R2), a_done);
        self.a.ldx(Size::W, R3, base, 0);
        self.a.be(R3, 32);
        self.a.st(Size::Dw, R10, PROTO, i32::from(proto::UDP));
        self.a.ja(have);
        // ICMP: an echo's identifier as both ports, else 0.
        self.a.bind(icmp_l);
        let (echo, no_id) = (self.a.label(), self.a.label());
        let base = self.header(l4(Hdr::Icmp), 8, (R1, R2), a_done);
        self.a.alu_imm(Alu::Mov, R3, 0);
        self.a.ldx(Size::B, R4, base, 0);
        for t in [0, 8, 128, 129] {
            self.a.jmp_imm(Jmp::Eq, R4, t, echo);
        }
        self.a.ja(no_id);
        self.a.bind(echo);
        self.a.ldx(Size::H, R3, base, 4);
        self.a.be(R3, 16);
        self.a.alu_reg(Alu::Mov, R4, R3);
        self.a.alu_imm(Alu::Lsh, R3, 16);
        self.a.alu_reg(Alu::Or, R3, R4);
        self.a.bind(no_id);
        self.a.st(Size::Dw, R10, PROTO, i32::from(proto::ICMP));
        self.a.bind(have);
        // r3 = sport << 16 | dport. The key, normalised: (address, port) pairs in order.
        let base = self.header((Slot::L3, HdrSet::EMPTY.with(Hdr::Ipv4), HdrSet::EMPTY), 20, (R1, R2), a_done);
        self.a.ldx(Size::W, R1, base, 12);
        self.a.be(R1, 32);
        self.a.ldx(Size::W, R2, base, 16);
        self.a.be(R2, 32);
        self.a.alu_reg(Alu::Mov, R4, R1);
        self.a.alu_imm(Alu::Lsh, R4, 16);
        self.a.alu_reg(Alu::Mov, R5, R3);
        self.a.alu_imm(Alu::Rsh, R5, 16);
        self.a.alu_reg(Alu::Or, R4, R5); // s << 16 | sport
        self.a.alu_reg(Alu::Mov, R0, R2);
        self.a.alu_imm(Alu::Lsh, R0, 16);
        self.a.alu_reg(Alu::Mov, R5, R3);
        self.a.alu_imm(Alu::And, R5, 0xffff);
        self.a.alu_reg(Alu::Or, R0, R5); // d << 16 | dport
        let (hi_side, stored) = (self.a.label(), self.a.label());
        self.a.jmp_reg(Jmp::Gt, R4, R0, hi_side);
        self.a.stx(Size::W, R10, CTKEY + 4, R1);
        self.a.stx(Size::W, R10, CTKEY + 8, R2);
        self.a.alu_reg(Alu::Mov, R5, R3);
        self.a.alu_imm(Alu::Rsh, R5, 16);
        self.a.stx(Size::H, R10, CTKEY + 12, R5);
        self.a.stx(Size::H, R10, CTKEY + 14, R3);
        self.a.st(Size::Dw, R10, LOOP_I, 0);
        self.a.ja(stored);
        self.a.bind(hi_side);
        self.a.stx(Size::W, R10, CTKEY + 4, R2);
        self.a.stx(Size::W, R10, CTKEY + 8, R1);
        self.a.stx(Size::H, R10, CTKEY + 12, R3);
        self.a.alu_imm(Alu::Rsh, R3, 16);
        self.a.stx(Size::H, R10, CTKEY + 14, R3);
        self.a.st(Size::Dw, R10, LOOP_I, 1);
        self.a.bind(stored);
        self.a.ldx(Size::Dw, R1, R10, PROTO);
        self.a.stx(Size::B, R10, CTKEY + 16, R1);
        self.a.st(Size::B, R10, CTKEY + 17, 0);
        self.a.st(Size::H, R10, CTKEY + 18, 0);
        self.a.st(Size::W, R10, CTKEY + 20, 0);
        self.ct_hash(seed);
        // The entry (r9) and the time (COUNT).
        self.map_lookup(fd, CTKEY);
        self.a.alu_reg(Alu::Mov, R9, R0);
        self.a.call(HELPER_KTIME_GET_NS);
        self.a.stx(Size::Dw, R10, COUNT, R0);
        self.a.jmp_imm(Jmp::Eq, R9, 0, insert);
        self.a.ldx(Size::Dw, R1, R9, 8);
        self.a.jmp_reg(Jmp::Gt, R1, R0, track);
        // A miss (or an expired entry): a packet that may open a connection inserts one.
        self.a.bind(insert);
        self.a.ldx(Size::Dw, R3, R10, PROTO);
        let (not_tcp, opened) = (self.a.label(), self.a.label());
        self.a.jmp_imm(Jmp::Ne, R3, i32::from(proto::TCP), not_tcp);
        self.a.ldx(Size::Dw, R2, R10, PEND);
        self.bad_flags(R2, R1, invalid);
        self.a.alu_imm(Alu::And, R2, i32::from(flags::SYN | flags::ACK | flags::RST));
        self.a.jmp_imm(Jmp::Ne, R2, i32::from(flags::SYN), invalid);
        // The windows: the SYN's (window checks), else none.
        if window {
            self.syn_init(R10, KEY);
        } else {
            self.no_windows();
        }
        self.a.alu_imm(Alu::Mov, R1, st(State::SynSent));
        self.a.ja(opened);
        self.a.bind(not_tcp);
        self.no_windows();
        let udp_like = self.a.label();
        self.a.alu_imm(Alu::Mov, R1, st(State::EchoRequest));
        self.a.jmp_imm(Jmp::Eq, R3, i32::from(proto::ICMP), opened);
        self.a.ja(udp_like);
        self.a.bind(udp_like);
        self.a.alu_imm(Alu::Mov, R1, st(State::Unreplied));
        self.a.bind(opened);
        // The value at KEY: state, closer 0, initiator's side, 0, verdict 0, deadline.
        self.a.stx(Size::B, R10, KEY, R1);
        self.a.st(Size::B, R10, KEY + 1, 0);
        self.a.ldx(Size::Dw, R2, R10, LOOP_I);
        self.a.stx(Size::B, R10, KEY + 2, R2);
        self.a.st(Size::B, R10, KEY + 3, 0);
        self.a.st(Size::W, R10, KEY + 4, 0);
        self.timeout(&timeouts, R1, R2);
        self.a.ldx(Size::Dw, R1, R10, COUNT);
        self.a.alu_reg(Alu::Add, R2, R1);
        self.a.stx(Size::Dw, R10, KEY + 8, R2);
        self.a.raw(&Insn::ld_map_fd(R1, fd));
        self.a.alu_reg(Alu::Mov, R2, R10);
        self.a.alu_imm(Alu::Add, R2, i32::from(CTKEY));
        self.a.alu_reg(Alu::Mov, R3, R10);
        self.a.alu_imm(Alu::Add, R3, i32::from(KEY));
        self.a.alu_imm(Alu::Mov, R4, 0);
        self.a.call(HELPER_MAP_UPDATE);
        let stored = self.a.label();
        self.a.jmp_imm(Jmp::Eq, R0, 0, stored);
        self.drop(DropReason::FlowTableFull);
        self.a.bind(stored);
        self.a.st(Size::Dw, R10, CT, CT_NEW);
        self.a.st(Size::Dw, R10, FLOW, 1);
        self.a.ja(a_done);
        // A live flow: r1 = state, r2 = flags, r3 = direction (1: reply), r4 = closer.
        self.a.bind(track);
        self.a.ldx(Size::B, R3, R9, 2);
        self.a.ldx(Size::Dw, R1, R10, LOOP_I);
        self.a.alu_reg(Alu::Xor, R3, R1);
        self.a.ldx(Size::B, R1, R9, 0);
        self.a.ldx(Size::B, R4, R9, 1);
        self.a.ldx(Size::Dw, R2, R10, PEND);
        let (accept, kept) = (self.a.label(), self.a.label());
        let (not_tcp, datagram) = (self.a.label(), self.a.label());
        self.a.ldx(Size::Dw, R5, R10, PROTO);
        self.a.jmp_imm(Jmp::Ne, R5, i32::from(proto::TCP), not_tcp);
        self.tcp_step(window, invalid, (accept, kept));
        self.a.bind(not_tcp);
        // ICMP: a reply makes EchoReply; UDP and the rest: Replied.
        self.a.jmp_imm(Jmp::Ne, R5, i32::from(proto::ICMP), datagram);
        self.a.jmp_imm(Jmp::Eq, R3, 0, accept);
        self.a.alu_imm(Alu::Mov, R1, st(State::EchoReply));
        self.a.ja(accept);
        self.a.bind(datagram);
        self.a.jmp_imm(Jmp::Eq, R3, 0, accept);
        self.a.alu_imm(Alu::Mov, R1, st(State::Replied));
        self.a.bind(accept);
        // Accepted: state, closer, deadline; ct.established (+ reply) and the verdict.
        self.a.stx(Size::B, R9, 0, R1);
        self.a.stx(Size::B, R9, 1, R4);
        self.a.bind(kept);
        self.a.alu_imm(Alu::Lsh, R3, 2);
        self.a.alu_imm(Alu::Or, R3, CT_ESTABLISHED);
        self.a.ldx(Size::W, R4, R9, 4);
        self.a.alu_imm(Alu::And, R4, 0xff);
        self.a.alu_imm(Alu::Lsh, R4, 8);
        self.a.alu_reg(Alu::Or, R3, R4);
        self.a.stx(Size::Dw, R10, CT, R3);
        self.timeout(&timeouts, R1, R2);
        self.a.ldx(Size::Dw, R1, R10, COUNT);
        self.a.alu_reg(Alu::Add, R2, R1);
        self.a.stx(Size::Dw, R9, 8, R2);
        self.a.st(Size::Dw, R10, FLOW, 1);
        self.a.ja(a_done);
        self.a.bind(invalid);
        self.a.st(Size::Dw, R10, CT, CT_INVALID);
        self.a.bind(a_done);
        // `r9` held a flow entry: no table's entry is live across stages.
        self.a.alu_imm(Alu::Mov, R9, 0);
    }

    /// The TCP state machine without window checks (`tcp::Conn::step` with `window_check`
    /// off): r1 = state, r2 = flags, r3 = direction (0 original, 1 reply), r4 = closer (0
    /// original, 1 reply). Leaves the next state in r1 and the closer in r4, then goes to
    /// `accept`; or to `invalid`, changing nothing. Uses r0 and r5.
    /// With `window`, the window checks of `tcpwin` where the engine makes them. A plain ACK
    /// on an established connection goes to `kept` instead, with r1 and r3 as they were: it
    /// changes no state, so it stores none. (Stored, the state it read could overwrite a FIN's
    /// transition made on another CPU meanwhile.)
    fn tcp_step(&mut self, window: bool, invalid: Label, (accept, kept): (Label, Label)) {
        let any = i32::from(flags::SYN | flags::FIN | flags::RST | flags::ACK);
        let (syn, ack, fin, rst) = (i32::from(flags::SYN), i32::from(flags::ACK), i32::from(flags::FIN), i32::from(flags::RST));
        if window {
            self.a.stx(Size::Dw, R10, T_DIR, R3);
        }
        // Established and a plain ACK: no change of state (its window is still checked).
        let (general, set) = (self.a.label(), self.a.label());
        self.a.jmp_imm(Jmp::Ne, R1, st(State::Established), general);
        self.a.alu_reg(Alu::Mov, R5, R2);
        self.a.alu_imm(Alu::And, R5, any);
        self.a.jmp_imm(Jmp::Ne, R5, ack, general);
        if window {
            self.in_window(invalid);
            self.a.alu_imm(Alu::Mov, R1, st(State::Established));
            self.a.ldx(Size::Dw, R3, R10, T_DIR);
        }
        self.a.ja(kept);
        self.a.bind(general);
        self.bad_flags(R2, R5, invalid);
        // r5 = the next state; r0 scratch.
        self.a.alu_reg(Alu::Mov, R5, R1);
        // A new SYN from the initiator reopens TimeWait / Closed.
        {
            let skip = self.a.label();
            self.a.alu_reg(Alu::Mov, R0, R2);
            self.a.alu_imm(Alu::And, R0, syn | ack);
            self.a.jmp_imm(Jmp::Ne, R0, syn, skip);
            self.a.jmp_imm(Jmp::Ne, R3, 0, skip);
            let reopen = self.a.label();
            self.a.jmp_imm(Jmp::Eq, R1, st(State::TimeWait), reopen);
            self.a.jmp_imm(Jmp::Ne, R1, st(State::Closed), skip);
            self.a.bind(reopen);
            if window {
                self.syn_init(R9, 0);
            }
            self.a.alu_imm(Alu::Mov, R1, st(State::SynSent));
            self.a.alu_imm(Alu::Mov, R4, 0);
            self.a.ja(accept);
            self.a.bind(skip);
        }
        // RST closes.
        {
            let skip = self.a.label();
            self.a.alu_reg(Alu::Mov, R0, R2);
            self.a.alu_imm(Alu::And, R0, rst);
            self.a.jmp_imm(Jmp::Eq, R0, 0, skip);
            if window {
                self.rst_in_window(invalid);
                self.a.ldx(Size::Dw, R3, R10, T_DIR);
                self.a.ldx(Size::B, R4, R9, 1);
            }
            self.a.alu_imm(Alu::Mov, R1, st(State::Closed));
            self.a.ja(accept);
            self.a.bind(skip);
        }
        // Per state. `has(bit, l)`: jump to l when the flag is set; `not(bit, l)` when clear.
        let has = |g: &mut Gen<'_>, bit: i32, l: Label| {
            g.a.alu_reg(Alu::Mov, R0, R2);
            g.a.alu_imm(Alu::And, R0, bit);
            g.a.jmp_imm(Jmp::Ne, R0, 0, l);
        };
        let not = |g: &mut Gen<'_>, bit: i32, l: Label| {
            g.a.alu_reg(Alu::Mov, R0, R2);
            g.a.alu_imm(Alu::And, R0, bit);
            g.a.jmp_imm(Jmp::Eq, R0, 0, l);
        };
        let to = |g: &mut Gen<'_>, s: State| {
            g.a.alu_imm(Alu::Mov, R5, st(s));
            g.a.ja(set);
        };
        let arms: Vec<(State, Label)> = [
            State::SynSent,
            State::SynRecv,
            State::Established,
            State::FinWait,
            State::CloseWait,
            State::LastAck,
            State::TimeWait,
            State::Closed,
        ]
        .into_iter()
        .map(|s| (s, self.a.label()))
        .collect();
        for &(s, l) in &arms {
            self.a.jmp_imm(Jmp::Eq, R1, st(s), l);
        }
        // None and the datagram states: not a TCP connection.
        self.a.ja(invalid);
        for (s, l) in arms {
            self.a.bind(l);
            match s {
                State::SynSent => {
                    // (orig, syn, ack): (1,1,0) SynSent; (0,1,1) and (0,1,0) SynRecv.
                    not(self, syn, invalid);
                    let reply = self.a.label();
                    self.a.jmp_imm(Jmp::Ne, R3, 0, reply);
                    has(self, ack, invalid);
                    to(self, State::SynSent);
                    self.a.bind(reply);
                    to(self, State::SynRecv);
                }
                State::SynRecv => {
                    let (no_syn, reply) = (self.a.label(), self.a.label());
                    not(self, syn, no_syn);
                    to(self, State::SynRecv);
                    self.a.bind(no_syn);
                    self.a.jmp_imm(Jmp::Ne, R3, 0, reply);
                    let (no_fin, _) = (self.a.label(), ());
                    not(self, fin, no_fin);
                    to(self, State::FinWait);
                    self.a.bind(no_fin);
                    not(self, ack, invalid);
                    to(self, State::Established);
                    self.a.bind(reply);
                    to(self, State::SynRecv);
                }
                State::Established => {
                    has(self, syn, invalid);
                    let no_fin = self.a.label();
                    not(self, fin, no_fin);
                    to(self, State::FinWait);
                    self.a.bind(no_fin);
                    to(self, State::Established);
                }
                State::FinWait | State::CloseWait | State::LastAck | State::TimeWait => {
                    has(self, syn, invalid);
                    // r0 = 1 when the packet comes from the closer.
                    let other = self.a.label();
                    match s {
                        State::FinWait => {
                            self.a.jmp_reg(Jmp::Eq, R3, R4, other);
                            let no_fin = self.a.label();
                            not(self, fin, no_fin);
                            to(self, State::LastAck);
                            self.a.bind(no_fin);
                            not(self, ack, other);
                            to(self, State::CloseWait);
                            self.a.bind(other);
                            to(self, State::FinWait);
                        }
                        State::CloseWait => {
                            self.a.jmp_reg(Jmp::Eq, R3, R4, other);
                            not(self, fin, other);
                            to(self, State::LastAck);
                            self.a.bind(other);
                            to(self, State::CloseWait);
                        }
                        State::LastAck => {
                            self.a.jmp_reg(Jmp::Ne, R3, R4, other);
                            not(self, ack, other);
                            to(self, State::TimeWait);
                            self.a.bind(other);
                            to(self, State::LastAck);
                        }
                        _ => {
                            self.a.bind(other);
                            to(self, State::TimeWait);
                        }
                    }
                }
                _ => {
                    // Closed
                    has(self, syn, invalid);
                    to(self, State::Closed);
                }
            }
        }
        // Entering FinWait: the sender is the closer.
        self.a.bind(set);
        let keep = self.a.label();
        self.a.jmp_imm(Jmp::Ne, R5, st(State::FinWait), keep);
        self.a.jmp_imm(Jmp::Eq, R1, st(State::FinWait), keep);
        self.a.alu_reg(Alu::Mov, R4, R3);
        self.a.bind(keep);
        self.a.alu_reg(Alu::Mov, R1, R5);
        if window {
            // The window check decides before anything changes.
            self.a.stx(Size::Dw, R10, T_NEXT, R1);
            self.a.stx(Size::Dw, R10, T_CLOSER, R4);
            self.in_window(invalid);
            self.a.ldx(Size::Dw, R1, R10, T_NEXT);
            self.a.ldx(Size::Dw, R4, R10, T_CLOSER);
            self.a.ldx(Size::Dw, R3, R10, T_DIR);
        }
        self.a.ja(accept);
    }

    /// A new flow's value at KEY without TCP windows (zeros: the map copies all of it).
    fn no_windows(&mut self) {
        for w in 0..4 {
            self.a.st(Size::Dw, R10, KEY + 16 + 8 * w, 0);
        }
    }

    /// `ct_commit CT VERDICT`: the verdict into the packet's flow (when it has one) and into
    /// `ct.verdict`.
    pub(super) fn ct_commit(&mut self, ct: u16, v: &Operand, args: Args<'_>) {
        self.operand(v, args, R3, R1);
        self.a.alu_imm(Alu::And, R3, 0xff);
        self.a.stx(Size::Dw, R10, LOOP_I, R3);
        self.ct_set_verdict(R3);
        let skip = self.a.label();
        self.ct_entry(ct, skip);
        self.a.ldx(Size::Dw, R3, R10, LOOP_I);
        self.a.stx(Size::W, R0, 4, R3);
        self.a.bind(skip);
    }

    /// `ct_load CT`: `ct.verdict` from the packet's flow (0 without one).
    pub(super) fn ct_load(&mut self, ct: u16) {
        let (none, set) = (self.a.label(), self.a.label());
        self.ct_entry(ct, none);
        self.a.ldx(Size::W, R3, R0, 4);
        self.a.alu_imm(Alu::And, R3, 0xff);
        self.a.ja(set);
        self.a.bind(none);
        self.a.alu_imm(Alu::Mov, R3, 0);
        self.a.bind(set);
        self.ct_set_verdict(R3);
    }

    /// CT's verdict byte = `v` (0..=255); clobbers r1.
    fn ct_set_verdict(&mut self, v: Reg) {
        self.a.ldx(Size::Dw, R1, R10, CT);
        self.a.alu_imm(Alu::And, R1, 0xff);
        self.a.alu_imm(Alu::Lsh, v, 8);
        self.a.alu_reg(Alu::Or, R1, v);
        self.a.stx(Size::Dw, R10, CT, R1);
    }

    /// `r0` = the packet's flow entry in conntrack table `ct`, or a jump to `none` (no flow).
    fn ct_entry(&mut self, ct: u16, none: Label) {
        self.a.ldx(Size::Dw, R1, R10, FLOW);
        self.a.jmp_imm(Jmp::Eq, R1, 0, none);
        self.map_lookup(self.maps.conntracks[usize::from(ct)], CTKEY);
        self.a.jmp_imm(Jmp::Eq, R0, 0, none);
    }
}
