//! TCP window tracking in the generated program: the engine's checks (`flow::tcp`, after G. van
//! Rooij and netfilter's TCP tracker) for a conntrack table with `window_check = true`.
//!
//! ```text
//!  SEG     the packet's segment: seq, ack, payload length (to the IP total length, so a GSO
//!          train counts as the bytes it carries), window, window scale (a SYN's option)
//!  value   +16 the original direction's window, +32 the reply's: end, maxend, maxwin, scale
//!  check   seq ≤ snd.maxend and snd.end − rcv.maxwin ≤ seq end; an ACK within
//!          [rcv.end − max(snd.maxwin, 66000), rcv.end]; then the windows move
//! ```

use super::{Gen, Hook, HELPER_SKB_PULL_DATA, ITER, PEND, SEG, SLOTS, START, TMP};
use crate::asm::{Alu, Jmp, Label, Size};
use fastpath_io::bpf::{Insn, Reg, R0, R1, R10, R2, R3, R4, R5, R6, R8, R9};
use fastpath_packet::{Hdr, HdrSet, Slot};
use fastpath_tables::flow::{flags, Segment};

/// Where the two windows start in a flow's value.
pub const WIN: i16 = 16;
const W_END: i16 = 0;
const W_MAXEND: i16 = 4;
const W_MAXWIN: i16 = 8;
const W_SCALE: i16 = 12;
/// `Segment::NO_WSCALE`.
const NO_WSCALE: i32 = Segment::NO_WSCALE as i32;
/// `tcp::MAX_ACK_WINDOW`.
const MAX_ACK_WINDOW: i32 = 66_000;
/// Compare-and-swap attempts of one window edge's update. Each failure means another CPU
/// moved that edge in the few instructions between the load and the swap; four in a row do
/// not happen with two directions of one flow, and the edge then stays where the other CPUs
/// put it.
const CAS_TRIES: usize = 4;

/// SEG's words.
const SEQ: i16 = SEG;
const ACK: i16 = SEG + 4;
const PAYLOAD: i16 = SEG + 8;
const WINDOW: i16 = SEG + 12;
const WSCALE: i16 = SEG + 16;
const END: i16 = SEG + 20;
/// TMP's words: the direction, the next state, the closer, the scaled window, has-ack; the
/// options walk's index and length.
pub const T_DIR: i16 = TMP;
pub const T_NEXT: i16 = TMP + 8;
pub const T_CLOSER: i16 = TMP + 16;
const T_WIN: i16 = TMP + 24;
const T_HAS_ACK: i16 = TMP + 32;
const T_OPT_I: i16 = TMP + 8;
const T_OPT_LEN: i16 = TMP + 16;

impl Gen<'_> {
    /// Jumps to `no` unless `seq_le(a, b)` (`(b − a) as i32 ≥ 0`); clobbers `t`.
    fn seq_le_or(&mut self, a: Reg, b: Reg, t: Reg, no: Label) {
        self.seq_sign(a, b, t);
        self.a.jmp_imm(Jmp::Ne, t, 0, no);
    }

    /// Jumps to `yes` when `seq_le(a, b)`; clobbers `t`.
    fn seq_le_to(&mut self, a: Reg, b: Reg, t: Reg, yes: Label) {
        self.seq_sign(a, b, t);
        self.a.jmp_imm(Jmp::Eq, t, 0, yes);
    }

    /// Raises the u32 at `ptr + off` to `new` (kept) unless it is already there or past it
    /// (`seq_le` order when `seq`, else unsigned), by compare-and-swap. Both CPUs of a
    /// connection's two directions, and the sender's own packets on either CPU, move its
    /// edges at once; with a plain load, compare and store the slower CPU can put back an
    /// older edge, and the next ACK beyond it looks out of window. Clobbers r0 and `t`.
    fn raise(&mut self, ptr: Reg, off: i16, new: Reg, t: Reg, seq: bool) {
        let done = self.a.label();
        self.a.ldx(Size::W, R0, ptr, off);
        for _ in 0..CAS_TRIES {
            if seq {
                self.seq_le_to(new, R0, t, done);
            } else {
                self.a.jmp_reg(Jmp::Ge, R0, new, done);
            }
            self.a.alu_reg(Alu::Mov, t, R0);
            self.a.cmpxchg(Size::W, ptr, off, new);
            // Swapped; else r0 has the value another CPU stored meanwhile: compare again.
            self.a.jmp_reg(Jmp::Eq, R0, t, done);
        }
        self.a.bind(done);
    }

    /// `t` = the sign bit of the 32-bit difference `b − a` (0: `seq_le(a, b)`).
    fn seq_sign(&mut self, a: Reg, b: Reg, t: Reg) {
        self.a.alu_reg(Alu::Mov, t, b);
        self.a.alu_reg(Alu::Sub, t, a);
        self.a.alu_imm(Alu::Lsh, t, 32);
        self.a.alu_imm(Alu::Rsh, t, 63);
    }

    /// SEG = the TCP segment of the packet (its TCP header present; `absent` when not in the
    /// linear data). Flags are in PEND.
    pub(super) fn tcp_segment(&mut self, absent: Label) {
        let tcp = (Slot::L4, HdrSet::EMPTY.with(Hdr::Tcp), HdrSet::EMPTY);
        let base = self.header(tcp, 20, (R1, R2), absent);
        for (at, to) in [(4, SEQ), (8, ACK)] {
            self.a.ldx(Size::W, R1, base, at);
            self.a.be(R1, 32);
            self.a.stx(Size::W, R10, to, R1);
        }
        self.a.ldx(Size::H, R1, base, 14);
        self.a.be(R1, 16);
        self.a.stx(Size::W, R10, WINDOW, R1);
        self.a.ldx(Size::B, R4, base, 12);
        self.a.alu_imm(Alu::Rsh, R4, 4);
        self.a.alu_imm(Alu::Lsh, R4, 2);
        self.a.stx(Size::Dw, R10, T_OPT_LEN, R4);
        // The payload: the IP total length's end less the TCP header's (0 when before it).
        let ip = (Slot::L3, HdrSet::EMPTY.with(Hdr::Ipv4), HdrSet::EMPTY);
        let base = self.header(ip, 4, (R1, R2), absent);
        self.a.ldx(Size::H, R1, base, 2);
        self.a.be(R1, 16);
        self.a.ldx(Size::Dw, R2, R10, SLOTS - 8 * Slot::L3 as i16);
        self.a.alu_reg(Alu::Add, R1, R2);
        self.a.ldx(Size::Dw, R2, R10, SLOTS - 8 * Slot::L4 as i16);
        self.a.ldx(Size::Dw, R4, R10, T_OPT_LEN);
        self.a.alu_reg(Alu::Add, R2, R4);
        let (none, have) = (self.a.label(), self.a.label());
        self.a.jmp_reg(Jmp::Lt, R1, R2, none);
        self.a.alu_reg(Alu::Sub, R1, R2);
        self.a.ja(have);
        self.a.bind(none);
        self.a.alu_imm(Alu::Mov, R1, 0);
        self.a.bind(have);
        self.a.stx(Size::W, R10, PAYLOAD, R1);
        self.a.st(Size::W, R10, WSCALE, NO_WSCALE);
        let done = self.a.label();
        self.a.ldx(Size::Dw, R1, R10, PEND);
        self.a.alu_imm(Alu::And, R1, i32::from(flags::SYN));
        self.a.jmp_imm(Jmp::Eq, R1, 0, done);
        self.wscale();
        self.a.bind(done);
    }

    /// WSCALE = the window-scale option of a SYN (`conntrack::wscale`): the options walked
    /// one by one (an open-coded iterator of at most 40 steps); T_OPT_LEN holds the TCP header
    /// length.
    fn wscale(&mut self) {
        let [new, next_fn, destroy] = self.maps.iter_num;
        let (lp, end, notnop, notws) = (self.a.label(), self.a.label(), self.a.label(), self.a.label());
        if self.hook == Hook::Tc {
            self.pull_tcp_options();
        }
        self.a.ldx(Size::Dw, R1, R10, T_OPT_LEN);
        self.a.alu_imm(Alu::Sub, R1, 20);
        self.a.stx(Size::Dw, R10, T_OPT_LEN, R1);
        self.a.st(Size::Dw, R10, T_OPT_I, 0);
        self.a.alu_reg(Alu::Mov, R1, R10);
        self.a.alu_imm(Alu::Add, R1, i32::from(ITER));
        self.a.alu_imm(Alu::Mov, R2, 0);
        self.a.alu_imm(Alu::Mov, R3, 40);
        self.a.raw(&[Insn::call_kfunc(new)]);
        self.a.bind(lp);
        self.a.alu_reg(Alu::Mov, R1, R10);
        self.a.alu_imm(Alu::Add, R1, i32::from(ITER));
        self.a.raw(&[Insn::call_kfunc(next_fn)]);
        self.a.jmp_imm(Jmp::Eq, R0, 0, end);
        self.a.ldx(Size::Dw, R2, R10, T_OPT_I);
        self.a.ldx(Size::Dw, R3, R10, T_OPT_LEN);
        self.a.jmp_reg(Jmp::Ge, R2, R3, end);
        self.a.jmp_imm(Jmp::Gt, R2, 40, end);
        let tcp = (Slot::L4, HdrSet::EMPTY.with(Hdr::Tcp), HdrSet::EMPTY);
        let base = self.header(tcp, 20, (R1, R4), end);
        // r1 = the option's first byte (each byte read only where the linear data has it).
        self.a.ldx(Size::Dw, R2, R10, T_OPT_I);
        self.a.jmp_imm(Jmp::Gt, R2, 40, end);
        self.a.alu_reg(Alu::Mov, R1, base);
        self.a.alu_imm(Alu::Add, R1, 20);
        self.a.alu_reg(Alu::Add, R1, R2);
        let room = |g: &mut Gen<'_>, n: i32| {
            g.a.alu_reg(Alu::Mov, R4, R1);
            g.a.alu_imm(Alu::Add, R4, n);
            g.a.jmp_reg(Jmp::Gt, R4, R8, end);
        };
        room(self, 1);
        self.a.ldx(Size::B, R0, R1, 0);
        self.a.jmp_imm(Jmp::Eq, R0, 0, end);
        self.a.jmp_imm(Jmp::Ne, R0, 1, notnop);
        self.a.alu_imm(Alu::Add, R2, 1);
        self.a.stx(Size::Dw, R10, T_OPT_I, R2);
        self.a.ja(lp);
        self.a.bind(notnop);
        // The length byte, inside the options.
        self.a.alu_reg(Alu::Mov, R3, R2);
        self.a.alu_imm(Alu::Add, R3, 1);
        self.a.ldx(Size::Dw, R4, R10, T_OPT_LEN);
        self.a.jmp_reg(Jmp::Ge, R3, R4, end);
        room(self, 2);
        self.a.ldx(Size::B, R3, R1, 1);
        self.a.jmp_imm(Jmp::Ne, R0, 3, notws);
        self.a.jmp_imm(Jmp::Ne, R3, 3, notws);
        // Window scale: its shift when inside the options, capped at 14.
        self.a.alu_imm(Alu::Add, R2, 2);
        self.a.ldx(Size::Dw, R4, R10, T_OPT_LEN);
        self.a.jmp_reg(Jmp::Ge, R2, R4, end);
        room(self, 3);
        let capped = self.a.label();
        self.a.ldx(Size::B, R3, R1, 2);
        self.a.jmp_imm(Jmp::Le, R3, 14, capped);
        self.a.alu_imm(Alu::Mov, R3, 14);
        self.a.bind(capped);
        self.a.stx(Size::W, R10, WSCALE, R3);
        self.a.ja(end);
        self.a.bind(notws);
        self.a.jmp_imm(Jmp::Lt, R3, 2, end);
        self.a.alu_reg(Alu::Add, R2, R3);
        self.a.stx(Size::Dw, R10, T_OPT_I, R2);
        self.a.ja(lp);
        self.a.bind(end);
        self.a.alu_reg(Alu::Mov, R1, R10);
        self.a.alu_imm(Alu::Add, R1, i32::from(ITER));
        self.a.raw(&[Insn::call_kfunc(destroy)]);
    }

    /// At tc: pulls the whole TCP header, options included, into the skb's linear part when
    /// it is not there. The parser pulled the 20 fixed bytes; a NIC that splits headers from
    /// payload (and does not look inside a tunnel) leaves a SYN's options in page fragments,
    /// and a walk that stopped there would lose the window scale, after which every ACK more
    /// than 64 KB behind looks out of window. SYNs only: other packets pay nothing. T_OPT_LEN
    /// holds the TCP header length; reloads r7/r8.
    fn pull_tcp_options(&mut self) {
        let linear = self.a.label();
        let tcp = (Slot::L4, HdrSet::EMPTY.with(Hdr::Tcp), HdrSet::EMPTY);
        let base = self.header(tcp, 20, (R1, R2), linear);
        self.a.ldx(Size::Dw, R2, R10, T_OPT_LEN);
        self.a.alu_reg(Alu::Mov, R1, base);
        self.a.alu_reg(Alu::Add, R1, R2);
        self.a.jmp_reg(Jmp::Le, R1, R8, linear);
        // The header's end, from the frame's start: its offset (after a decap, START on).
        self.a.ldx(Size::Dw, R2, R10, SLOTS - 8 * Slot::L4 as i16);
        if self.moves {
            self.a.ldx(Size::Dw, R1, R10, START);
            self.a.alu_reg(Alu::Add, R2, R1);
        }
        self.a.ldx(Size::Dw, R1, R10, T_OPT_LEN);
        self.a.alu_reg(Alu::Add, R2, R1);
        self.a.alu_reg(Alu::Mov, R1, R6);
        self.a.call(HELPER_SKB_PULL_DATA);
        // Failed or not, the walk reads only what the linear part has.
        self.reload();
        self.a.bind(linear);
    }

    /// END = seq + payload + SYN + FIN (u32).
    fn seg_end(&mut self) {
        self.a.ldx(Size::W, R0, R10, SEQ);
        self.a.ldx(Size::W, R1, R10, PAYLOAD);
        self.a.alu_reg(Alu::Add, R0, R1);
        self.a.ldx(Size::Dw, R1, R10, PEND);
        self.a.alu_reg(Alu::Mov, R2, R1);
        self.a.alu_imm(Alu::And, R2, i32::from(flags::SYN));
        self.a.alu_imm(Alu::Rsh, R2, 1);
        self.a.alu_reg(Alu::Add, R0, R2);
        self.a.alu_imm(Alu::And, R1, i32::from(flags::FIN));
        self.a.alu_reg(Alu::Add, R0, R1);
        self.a.stx(Size::W, R10, END, R0);
    }

    /// The windows of a connection opened (or reopened) by this SYN (`Conn::syn_init`), in the
    /// value at `base + at`.
    pub(super) fn syn_init(&mut self, base: Reg, at: i16) {
        self.a.ldx(Size::W, R1, R10, SEQ);
        self.a.ldx(Size::W, R2, R10, PAYLOAD);
        self.a.alu_reg(Alu::Add, R1, R2);
        self.a.alu_imm(Alu::Add, R1, 1);
        self.a.stx(Size::W, base, at + WIN + W_END, R1);
        self.a.stx(Size::W, base, at + WIN + W_MAXEND, R1);
        let nz = self.a.label();
        self.a.ldx(Size::W, R1, R10, WINDOW);
        self.a.jmp_imm(Jmp::Ne, R1, 0, nz);
        self.a.alu_imm(Alu::Mov, R1, 1);
        self.a.bind(nz);
        self.a.stx(Size::W, base, at + WIN + W_MAXWIN, R1);
        self.a.ldx(Size::W, R1, R10, WSCALE);
        self.a.stx(Size::W, base, at + WIN + W_SCALE, R1);
        for w in [16, 20, 24, 28] {
            self.a.st(Size::W, base, at + WIN + w, 0);
        }
    }

    /// r4 = the sender's window, r5 = the receiver's (T_DIR: 0 original, 1 reply).
    fn win_ptrs(&mut self) {
        for (r, flip) in [(R4, false), (R5, true)] {
            self.a.ldx(Size::Dw, R1, R10, T_DIR);
            if flip {
                self.a.alu_imm(Alu::Xor, R1, 1);
            }
            self.a.alu_imm(Alu::And, R1, 1);
            self.a.alu_imm(Alu::Lsh, R1, 4);
            self.a.alu_reg(Alu::Mov, r, R9);
            self.a.alu_imm(Alu::Add, r, i32::from(WIN));
            self.a.alu_reg(Alu::Add, r, R1);
        }
    }

    /// `Conn::init_sender`: the first packet from a side whose window is unknown (r4, r5 as
    /// [`Gen::win_ptrs`] left them).
    fn init_sender(&mut self) {
        self.seg_end();
        let (nosyn, noscale, have, done) = (self.a.label(), self.a.label(), self.a.label(), self.a.label());
        self.a.ldx(Size::Dw, R1, R10, PEND);
        self.a.alu_imm(Alu::And, R1, i32::from(flags::SYN));
        self.a.jmp_imm(Jmp::Eq, R1, 0, nosyn);
        // RFC 7323 §2.2: scaling only when both SYNs carried the option.
        self.a.ldx(Size::W, R2, R10, WSCALE);
        self.a.jmp_imm(Jmp::Eq, R2, NO_WSCALE, noscale);
        self.a.ldx(Size::B, R3, R5, W_SCALE);
        self.a.jmp_imm(Jmp::Eq, R3, NO_WSCALE, noscale);
        let (a, b) = (self.a.label(), self.a.label());
        self.a.jmp_imm(Jmp::Le, R2, 14, a);
        self.a.alu_imm(Alu::Mov, R2, 14);
        self.a.bind(a);
        self.a.jmp_imm(Jmp::Le, R3, 14, b);
        self.a.alu_imm(Alu::Mov, R3, 14);
        self.a.bind(b);
        self.a.stx(Size::B, R5, W_SCALE, R3);
        self.a.ja(have);
        self.a.bind(noscale);
        self.a.st(Size::B, R5, W_SCALE, 0);
        self.a.alu_imm(Alu::Mov, R2, 0);
        self.a.ja(have);
        self.a.bind(nosyn);
        let kept = self.a.label();
        self.a.ldx(Size::B, R3, R5, W_SCALE);
        self.a.jmp_imm(Jmp::Ne, R3, NO_WSCALE, kept);
        self.a.st(Size::B, R5, W_SCALE, 0);
        self.a.bind(kept);
        self.a.alu_imm(Alu::Mov, R2, 0);
        // r2 = the sender's scale; its window is the segment's, unscaled (a SYN's never is,
        // and the scale of any other first packet is 0).
        self.a.bind(have);
        self.a.stx(Size::B, R4, W_SCALE, R2);
        let nz = self.a.label();
        self.a.ldx(Size::W, R3, R10, WINDOW);
        self.a.alu_reg(Alu::Mov, R1, R3);
        self.a.jmp_imm(Jmp::Ne, R1, 0, nz);
        self.a.alu_imm(Alu::Mov, R1, 1);
        self.a.bind(nz);
        self.a.stx(Size::W, R4, W_MAXWIN, R1);
        self.a.ldx(Size::W, R1, R10, END);
        self.a.stx(Size::W, R4, W_END, R1);
        self.a.stx(Size::W, R4, W_MAXEND, R1);
        self.a.ldx(Size::Dw, R1, R10, PEND);
        self.a.alu_imm(Alu::And, R1, i32::from(flags::ACK));
        self.a.jmp_imm(Jmp::Eq, R1, 0, done);
        self.a.ldx(Size::W, R1, R10, ACK);
        self.a.alu_reg(Alu::Add, R1, R3);
        self.raise(R5, W_MAXEND, R1, R2, true);
        self.a.bind(done);
    }

    /// `Conn::in_window`: jumps to `invalid` for a segment outside the windows, else moves
    /// them. T_DIR holds the direction.
    pub(super) fn in_window(&mut self, invalid: Label) {
        self.win_ptrs();
        let (checks, done) = (self.a.label(), self.a.label());
        self.a.ldx(Size::W, R1, R4, W_MAXWIN);
        self.a.jmp_imm(Jmp::Ne, R1, 0, checks);
        self.init_sender();
        self.a.ja(done);
        self.a.bind(checks);
        self.seg_end();
        // The window, scaled unless a SYN or the scale is unknown.
        let (unscaled, scaled) = (self.a.label(), self.a.label());
        self.a.ldx(Size::B, R2, R4, W_SCALE);
        self.a.jmp_imm(Jmp::Eq, R2, NO_WSCALE, unscaled);
        self.a.ldx(Size::Dw, R1, R10, PEND);
        self.a.alu_imm(Alu::And, R1, i32::from(flags::SYN));
        self.a.jmp_imm(Jmp::Eq, R1, 0, scaled);
        self.a.bind(unscaled);
        self.a.alu_imm(Alu::Mov, R2, 0);
        self.a.bind(scaled);
        self.a.ldx(Size::W, R3, R10, WINDOW);
        self.a.alu_reg(Alu::Lsh, R3, R2);
        self.a.stx(Size::Dw, R10, T_WIN, R3);
        // seq ≤ snd.maxend and snd.end − rcv.maxwin ≤ end.
        self.a.ldx(Size::W, R1, R10, SEQ);
        self.a.ldx(Size::W, R2, R4, W_MAXEND);
        self.seq_le_or(R1, R2, R0, invalid);
        self.a.ldx(Size::W, R1, R4, W_END);
        self.a.ldx(Size::W, R2, R5, W_MAXWIN);
        self.a.alu_reg(Alu::Sub, R1, R2);
        self.a.ldx(Size::W, R2, R10, END);
        self.seq_le_or(R1, R2, R0, invalid);
        // An ACK (when the receiver has spoken): within [rcv.end − max(snd.maxwin, 66000), rcv.end].
        let (no_ack, upd) = (self.a.label(), self.a.label());
        self.a.ldx(Size::Dw, R1, R10, PEND);
        self.a.alu_imm(Alu::And, R1, i32::from(flags::ACK));
        self.a.jmp_imm(Jmp::Eq, R1, 0, no_ack);
        self.a.ldx(Size::W, R1, R5, W_MAXWIN);
        self.a.jmp_imm(Jmp::Eq, R1, 0, no_ack);
        self.a.ldx(Size::W, R1, R10, ACK);
        self.a.ldx(Size::W, R2, R5, W_END);
        self.seq_le_or(R1, R2, R0, invalid);
        let m = self.a.label();
        self.a.ldx(Size::W, R1, R4, W_MAXWIN);
        self.a.jmp_imm(Jmp::Ge, R1, MAX_ACK_WINDOW, m);
        self.a.alu_imm(Alu::Mov, R1, MAX_ACK_WINDOW);
        self.a.bind(m);
        self.a.ldx(Size::W, R2, R5, W_END);
        self.a.alu_reg(Alu::Sub, R2, R1);
        self.a.ldx(Size::W, R1, R10, ACK);
        self.seq_le_or(R2, R1, R0, invalid);
        self.a.st(Size::Dw, R10, T_HAS_ACK, 1);
        self.a.ja(upd);
        self.a.bind(no_ack);
        self.a.st(Size::Dw, R10, T_HAS_ACK, 0);
        // Accepted: snd.maxwin rises to max(win, 1); snd.end to end.
        self.a.bind(upd);
        let w1 = self.a.label();
        self.a.ldx(Size::Dw, R1, R10, T_WIN);
        self.a.jmp_imm(Jmp::Ne, R1, 0, w1);
        self.a.alu_imm(Alu::Mov, R1, 1);
        self.a.bind(w1);
        self.a.stx(Size::Dw, R10, T_WIN, R1);
        self.raise(R4, W_MAXWIN, R1, R2, false);
        self.a.ldx(Size::W, R1, R10, END);
        self.raise(R4, W_END, R1, R2, true);
        // With an ACK: rcv.maxend rises to ack + max(win, 1).
        self.a.ldx(Size::Dw, R1, R10, T_HAS_ACK);
        self.a.jmp_imm(Jmp::Eq, R1, 0, done);
        self.a.ldx(Size::W, R1, R10, ACK);
        self.a.ldx(Size::Dw, R2, R10, T_WIN);
        self.a.alu_reg(Alu::Add, R1, R2);
        self.raise(R5, W_MAXEND, R1, R2, true);
        self.a.bind(done);
    }

    /// `Conn::rst_in_window`: jumps to `invalid` for a RST outside the receiver's window.
    pub(super) fn rst_in_window(&mut self, invalid: Label) {
        self.win_ptrs();
        let (normal, ok) = (self.a.label(), self.a.label());
        self.a.ldx(Size::W, R1, R4, W_MAXWIN);
        self.a.jmp_imm(Jmp::Ne, R1, 0, normal);
        // The reply side never spoke (a RST answering a SYN): it must acknowledge the SYN.
        self.a.ldx(Size::Dw, R1, R10, PEND);
        self.a.alu_imm(Alu::And, R1, i32::from(flags::ACK));
        self.a.jmp_imm(Jmp::Eq, R1, 0, invalid);
        self.a.ldx(Size::W, R1, R10, ACK);
        self.a.ldx(Size::W, R2, R5, W_END);
        self.a.jmp_reg(Jmp::Ne, R1, R2, invalid);
        self.a.ja(ok);
        self.a.bind(normal);
        self.a.ldx(Size::W, R1, R10, SEQ);
        self.a.ldx(Size::W, R2, R4, W_MAXEND);
        self.seq_le_or(R1, R2, R0, invalid);
        let m = self.a.label();
        self.a.ldx(Size::W, R2, R5, W_MAXWIN);
        self.a.jmp_imm(Jmp::Ne, R2, 0, m);
        self.a.alu_imm(Alu::Mov, R2, 1);
        self.a.bind(m);
        self.a.ldx(Size::W, R1, R4, W_END);
        self.a.alu_reg(Alu::Sub, R1, R2);
        self.a.ldx(Size::W, R2, R10, SEQ);
        self.seq_le_or(R1, R2, R0, invalid);
        self.a.bind(ok);
    }
}
