//! Meters in the generated program: the engine's RFC 2697 and RFC 2698 markers
//! (`fastpath_tables::meter`: the same token clock on the 10⁹/rate ns grid, the same fills and
//! colour rules) over an array map of meter states, timed by `bpf_ktime_get_ns`.
//!
//! ```text
//!  value (96 bytes)  kind (0 unset: green, 1 srTCM, 2 trTCM) ▸ colour-aware ▸ CIR ▸ CBS ▸
//!                    EBS or PBS ▸ PIR ▸ clock 1 (last, frac) ▸ clock 2 (last, frac) ▸
//!                    tokens A (srTCM Tc / trTCM Tp) ▸ tokens B (srTCM Te / trTCM Tc)
//! ```
//! A meter's state is updated without a lock: packets of one meter on two CPUs at once can
//! lose each other's token updates (a spin lock needs BTF, which this code generator does
//! not write).

use super::{Args, Gen, CNT_KEY, COLOR, COUNT, FLEN, LOOP_I, START};
use crate::asm::{Alu, Jmp, Size};
use fastpath_io::bpf::{R0, R1, R10, R2, R3, R4, R5, R9};
use fastpath_packet::DropReason;
use fastpath_pipeline::ir::Operand;

/// Bytes of a meter's map value.
pub const METER_VALUE_SIZE: u32 = 96;

/// Offsets in a meter's value.
pub const KIND: i16 = 0;
/// Colour-aware (1) or blind (0).
pub const AWARE: i16 = 8;
/// Committed rate, bytes/s.
pub const CIR: i16 = 16;
/// Committed burst, bytes.
pub const CBS: i16 = 24;
/// srTCM: excess burst; trTCM: peak burst.
pub const EBS_PBS: i16 = 32;
/// trTCM: peak rate, bytes/s.
pub const PIR: i16 = 40;
/// First clock: last update (ns), fraction.
pub const CLOCK1: i16 = 48;
/// Second clock (trTCM's committed one).
pub const CLOCK2: i16 = 64;
/// srTCM Tc / trTCM Tp.
pub const TOKENS_A: i16 = 80;
/// srTCM Te / trTCM Tc.
pub const TOKENS_B: i16 = 88;

const NS_PER_S: i32 = 1_000_000_000;
/// `bpf_ktime_get_ns()`.
const HELPER_KTIME_GET_NS: i32 = 5;

impl Gen<'_> {
    /// `r0` = tokens arrived at `rate` since the clock at `clock` last moved (`meter::Clock`),
    /// the clock moved to now (LOOP_I). `r9` is the meter.
    fn tokens(&mut self, clock: i16, rate: i16) {
        let (zero, done, no_secs) = (self.a.label(), self.a.label(), self.a.label());
        self.a.ldx(Size::Dw, R1, R10, LOOP_I);
        self.a.ldx(Size::Dw, R2, R9, clock);
        self.a.jmp_reg(Jmp::Lt, R1, R2, zero);
        self.a.alu_reg(Alu::Sub, R1, R2);
        self.a.jmp_imm(Jmp::Eq, R1, 0, zero);
        self.a.ldx(Size::Dw, R2, R10, LOOP_I);
        self.a.stx(Size::Dw, R9, clock, R2);
        // r3 = whole seconds, r1 = the rest; acc = frac + rest * rate.
        self.a.alu_reg(Alu::Mov, R3, R1);
        self.a.alu_imm(Alu::Div, R3, NS_PER_S);
        self.a.alu_imm(Alu::Mod, R1, NS_PER_S);
        self.a.ldx(Size::Dw, R4, R9, rate);
        self.a.alu_reg(Alu::Mul, R1, R4);
        self.a.ldx(Size::Dw, R2, R9, clock + 8);
        self.a.alu_reg(Alu::Add, R1, R2);
        self.a.alu_reg(Alu::Mov, R2, R1);
        self.a.alu_imm(Alu::Mod, R2, NS_PER_S);
        self.a.stx(Size::Dw, R9, clock + 8, R2);
        self.a.alu_imm(Alu::Div, R1, NS_PER_S);
        self.a.alu_reg(Alu::Mov, R0, R1);
        self.a.jmp_imm(Jmp::Eq, R3, 0, no_secs);
        self.a.alu_reg(Alu::Mul, R3, R4);
        self.a.alu_reg(Alu::Add, R0, R3);
        self.a.bind(no_secs);
        self.a.ja(done);
        self.a.bind(zero);
        self.a.alu_imm(Alu::Mov, R0, 0);
        self.a.bind(done);
    }

    /// Adds `r0` tokens to the bucket at `bucket` (capped by the word at `cap`); `r0` = the
    /// overflow (`meter::fill`).
    fn fill(&mut self, bucket: i16, cap: i16) {
        let (over, done) = (self.a.label(), self.a.label());
        self.a.ldx(Size::Dw, R1, R9, cap);
        self.a.ldx(Size::Dw, R2, R9, bucket);
        self.a.alu_reg(Alu::Sub, R1, R2);
        self.a.jmp_reg(Jmp::Gt, R0, R1, over);
        self.a.alu_reg(Alu::Add, R2, R0);
        self.a.stx(Size::Dw, R9, bucket, R2);
        self.a.alu_imm(Alu::Mov, R0, 0);
        self.a.ja(done);
        self.a.bind(over);
        self.a.alu_reg(Alu::Sub, R0, R1);
        self.a.ldx(Size::Dw, R1, R9, cap);
        self.a.stx(Size::Dw, R9, bucket, R1);
        self.a.bind(done);
    }

    /// `meter METERS INDEX [drop_red]`: `meta.color` from meter INDEX of array `m` (green when
    /// INDEX is out of range or the meter is unset).
    pub(super) fn meter(&mut self, m: u16, idx: &Operand, drop_red: bool, args: Args<'_>) {
        let (fd, size) = (self.maps.meters[usize::from(m)], self.p.meters[usize::from(m)].size);
        let (green, colored, red, yellow, sr) = (self.a.label(), self.a.label(), self.a.label(), self.a.label(), self.a.label());
        self.operand(idx, args, R3, R1);
        self.a.mov_const(R1, size as u64);
        self.a.jmp_reg(Jmp::Ge, R3, R1, green);
        self.a.stx(Size::W, R10, CNT_KEY, R3);
        // r9 may hold a table entry whose arguments the action reads after this.
        self.a.stx(Size::Dw, R10, COUNT, R9);
        self.map_lookup(fd, CNT_KEY);
        self.a.jmp_imm(Jmp::Eq, R0, 0, green);
        self.a.alu_reg(Alu::Mov, R9, R0);
        self.a.ldx(Size::Dw, R1, R9, KIND);
        self.a.jmp_imm(Jmp::Eq, R1, 0, green);
        self.a.call(HELPER_KTIME_GET_NS);
        self.a.stx(Size::Dw, R10, LOOP_I, R0);
        self.a.ldx(Size::Dw, R1, R9, KIND);
        self.a.jmp_imm(Jmp::Eq, R1, 1, sr);
        // trTCM: refill Tp from PIR, Tc from CIR.
        self.tokens(CLOCK1, PIR);
        self.fill(TOKENS_A, EBS_PBS);
        self.tokens(CLOCK2, CIR);
        self.fill(TOKENS_B, CBS);
        self.packet_len_and_color();
        // Red when pre-coloured red or Tp < B; yellow when pre-coloured yellow or Tc < B.
        self.a.jmp_imm(Jmp::Ge, R3, 2, red);
        self.a.ldx(Size::Dw, R1, R9, TOKENS_A);
        self.a.jmp_reg(Jmp::Lt, R1, R4, red);
        let tr_yellow = self.a.label();
        self.a.jmp_imm(Jmp::Eq, R3, 1, tr_yellow);
        self.a.ldx(Size::Dw, R2, R9, TOKENS_B);
        self.a.jmp_reg(Jmp::Lt, R2, R4, tr_yellow);
        self.a.alu_reg(Alu::Sub, R1, R4);
        self.a.stx(Size::Dw, R9, TOKENS_A, R1);
        self.a.alu_reg(Alu::Sub, R2, R4);
        self.a.stx(Size::Dw, R9, TOKENS_B, R2);
        self.a.alu_imm(Alu::Mov, R0, 0);
        self.a.ja(colored);
        self.a.bind(tr_yellow);
        self.a.alu_reg(Alu::Sub, R1, R4);
        self.a.stx(Size::Dw, R9, TOKENS_A, R1);
        self.a.alu_imm(Alu::Mov, R0, 1);
        self.a.ja(colored);
        // srTCM: tokens from CIR fill Tc, its overflow Te.
        self.a.bind(sr);
        let no_tokens = self.a.label();
        self.tokens(CLOCK1, CIR);
        self.a.jmp_imm(Jmp::Eq, R0, 0, no_tokens);
        self.fill(TOKENS_A, CBS);
        self.fill(TOKENS_B, EBS_PBS);
        self.a.bind(no_tokens);
        self.packet_len_and_color();
        self.a.jmp_imm(Jmp::Ne, R3, 0, yellow);
        self.a.ldx(Size::Dw, R1, R9, TOKENS_A);
        self.a.jmp_reg(Jmp::Lt, R1, R4, yellow);
        self.a.alu_reg(Alu::Sub, R1, R4);
        self.a.stx(Size::Dw, R9, TOKENS_A, R1);
        self.a.alu_imm(Alu::Mov, R0, 0);
        self.a.ja(colored);
        self.a.bind(yellow);
        self.a.jmp_imm(Jmp::Ge, R3, 2, red);
        self.a.ldx(Size::Dw, R1, R9, TOKENS_B);
        self.a.jmp_reg(Jmp::Lt, R1, R4, red);
        self.a.alu_reg(Alu::Sub, R1, R4);
        self.a.stx(Size::Dw, R9, TOKENS_B, R1);
        self.a.alu_imm(Alu::Mov, R0, 1);
        self.a.ja(colored);
        self.a.bind(red);
        self.a.alu_imm(Alu::Mov, R0, 2);
        self.a.ja(colored);
        self.a.bind(green);
        self.a.alu_imm(Alu::Mov, R0, 0);
        self.a.bind(colored);
        self.a.stx(Size::Dw, R10, COLOR, R0);
        self.a.ldx(Size::Dw, R9, R10, COUNT);
        if drop_red {
            let keep = self.a.label();
            self.a.jmp_imm(Jmp::Ne, R0, 2, keep);
            self.drop(DropReason::MeterRed);
            self.a.bind(keep);
        }
    }

    /// `r4` = the packet's length (its logical frame, as a u32), `r3` = the colour the marker
    /// takes in (the packet's, when colour-aware; else green).
    fn packet_len_and_color(&mut self) {
        self.a.ldx(Size::Dw, R4, R10, FLEN);
        self.a.ldx(Size::Dw, R1, R10, START);
        self.a.alu_reg(Alu::Sub, R4, R1);
        self.a.alu_imm(Alu::Lsh, R4, 32);
        self.a.alu_imm(Alu::Rsh, R4, 32);
        let keep = self.a.label();
        self.a.ldx(Size::Dw, R3, R10, COLOR);
        self.a.ldx(Size::Dw, R5, R9, AWARE);
        self.a.jmp_imm(Jmp::Ne, R5, 0, keep);
        self.a.alu_imm(Alu::Mov, R3, 0);
        self.a.bind(keep);
    }
}
