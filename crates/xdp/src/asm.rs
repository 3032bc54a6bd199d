//! A small eBPF assembler with forward labels, over [`fastpath_io::bpf::Insn`].
//!
//! The code generator emits straight-line code with forward jumps only (the verifier would
//! reject a back edge it cannot bound anyway), so a label is bound once and every jump to it is
//! patched when the program is finished.

use fastpath_io::bpf::{Insn, Reg};

/// A jump target, bound later with [`Asm::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// Conditional jump kinds (64-bit, unsigned comparisons).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jmp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `>` (unsigned)
    Gt,
    /// `>=` (unsigned)
    Ge,
    /// `<` (unsigned)
    Lt,
    /// `<=` (unsigned)
    Le,
}

impl Jmp {
    fn op(self) -> u8 {
        match self {
            Jmp::Eq => 0x10,
            Jmp::Gt => 0x20,
            Jmp::Ge => 0x30,
            Jmp::Ne => 0x50,
            Jmp::Lt => 0xa0,
            Jmp::Le => 0xb0,
        }
    }
}

/// 64-bit ALU operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alu {
    /// `+=`
    Add,
    /// `-=`
    Sub,
    /// `*=`
    Mul,
    /// `/=` (unsigned)
    Div,
    /// `%=` (unsigned)
    Mod,
    /// `^=`
    Xor,
    /// `|=`
    Or,
    /// `&=`
    And,
    /// `<<=`
    Lsh,
    /// `>>=` (logical)
    Rsh,
    /// `=`
    Mov,
}

impl Alu {
    fn op(self) -> u8 {
        match self {
            Alu::Add => 0x00,
            Alu::Sub => 0x10,
            Alu::Mul => 0x20,
            Alu::Div => 0x30,
            Alu::Mod => 0x90,
            Alu::Xor => 0xa0,
            Alu::Or => 0x40,
            Alu::And => 0x50,
            Alu::Lsh => 0x60,
            Alu::Rsh => 0x70,
            Alu::Mov => 0xb0,
        }
    }
}

/// Memory access sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// 1 byte.
    B,
    /// 2 bytes.
    H,
    /// 4 bytes.
    W,
    /// 8 bytes.
    Dw,
}

impl Size {
    fn bits(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::H => 0x08,
            Size::B => 0x10,
            Size::Dw => 0x18,
        }
    }
    /// The access of `n` bytes (1, 2, 4 or 8).
    pub fn of(n: usize) -> Size {
        match n {
            1 => Size::B,
            2 => Size::H,
            4 => Size::W,
            _ => Size::Dw,
        }
    }
}

const CLASS_LDX: u8 = 0x01;
const CLASS_ST: u8 = 0x02;
const CLASS_STX: u8 = 0x03;
const CLASS_JMP: u8 = 0x05;
const CLASS_ALU64: u8 = 0x07;
const MODE_MEM: u8 = 0x60;
const MODE_ATOMIC: u8 = 0xc0;
/// `BPF_CMPXCHG` (`0xf0 | BPF_FETCH`).
const ATOMIC_CMPXCHG: i32 = 0xf1;
const SRC_X: u8 = 0x08;

/// The program being assembled.
#[derive(Default, Debug)]
pub struct Asm {
    insns: Vec<Insn>,
    /// Bound position of each label (`usize::MAX` while unbound).
    labels: Vec<usize>,
    /// (instruction index, label) of every jump still to patch.
    fixups: Vec<(usize, Label)>,
}

impl Asm {
    /// An empty program.
    pub fn new() -> Asm {
        Asm::default()
    }

    /// Appends raw instructions.
    pub fn raw(&mut self, i: &[Insn]) {
        self.insns.extend_from_slice(i);
    }

    /// A new unbound label.
    pub fn label(&mut self) -> Label {
        self.labels.push(usize::MAX);
        Label(self.labels.len() - 1)
    }

    /// Binds `l` to the next instruction.
    pub fn bind(&mut self, l: Label) {
        self.labels[l.0] = self.insns.len();
    }

    /// `dst op= imm`.
    pub fn alu_imm(&mut self, op: Alu, dst: Reg, imm: i32) {
        self.insns.push(Insn::new(CLASS_ALU64 | op.op(), dst, 0, 0, imm));
    }

    /// `dst op= src`.
    pub fn alu_reg(&mut self, op: Alu, dst: Reg, src: Reg) {
        self.insns.push(Insn::new(CLASS_ALU64 | op.op() | SRC_X, dst, src, 0, 0));
    }

    /// `dst = v` for any 64-bit constant (one instruction when it fits a sign-extended imm32).
    pub fn mov_const(&mut self, dst: Reg, v: u64) {
        if i64::from(v as i32) == v as i64 {
            self.alu_imm(Alu::Mov, dst, v as i32);
        } else {
            self.raw(&Insn::ld_imm64(dst, v));
        }
    }

    /// Converts the low `bits` (16, 32, 64) of `dst` from big-endian (network order) to host order
    /// and back (`BPF_END | BPF_TO_BE`; the upper bits are cleared for 16 and 32).
    pub fn be(&mut self, dst: Reg, bits: i32) {
        self.insns.push(Insn::new(0x04 | 0xd0 | 0x08, dst, 0, 0, bits));
    }

    /// `dst = *(size *)(src + off)`.
    pub fn ldx(&mut self, size: Size, dst: Reg, src: Reg, off: i16) {
        self.insns.push(Insn::new(CLASS_LDX | MODE_MEM | size.bits(), dst, src, off, 0));
    }

    /// `*(size *)(dst + off) = src`.
    pub fn stx(&mut self, size: Size, dst: Reg, off: i16, src: Reg) {
        self.insns.push(Insn::new(CLASS_STX | MODE_MEM | size.bits(), dst, src, off, 0));
    }

    /// Compare-and-swap (`BPF_ATOMIC | BPF_CMPXCHG`, kernel 5.12): when `*(size *)(dst + off)`
    /// equals `r0`, it becomes `src`; either way `r0` gets the old value (zero-extended for
    /// [`Size::W`]). Only [`Size::W`] and [`Size::Dw`] exist.
    pub fn cmpxchg(&mut self, size: Size, dst: Reg, off: i16, src: Reg) {
        debug_assert!(matches!(size, Size::W | Size::Dw), "BPF atomics are 32 or 64 bits wide");
        self.insns.push(Insn::new(CLASS_STX | MODE_ATOMIC | size.bits(), dst, src, off, ATOMIC_CMPXCHG));
    }

    /// `*(size *)(dst + off) = imm`.
    pub fn st(&mut self, size: Size, dst: Reg, off: i16, imm: i32) {
        self.insns.push(Insn::new(CLASS_ST | MODE_MEM | size.bits(), dst, 0, off, imm));
    }

    /// `if dst op imm goto l`.
    pub fn jmp_imm(&mut self, op: Jmp, dst: Reg, imm: i32, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.insns.push(Insn::new(CLASS_JMP | op.op(), dst, 0, 0, imm));
    }

    /// `if dst op src goto l`.
    pub fn jmp_reg(&mut self, op: Jmp, dst: Reg, src: Reg, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.insns.push(Insn::new(CLASS_JMP | op.op() | SRC_X, dst, src, 0, 0));
    }

    /// `goto l`.
    pub fn ja(&mut self, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.insns.push(Insn::ja(0));
    }

    /// Calls helper `id`.
    pub fn call(&mut self, id: i32) {
        self.insns.push(Insn::call(id));
    }

    /// `r0 = action; exit`.
    pub fn ret(&mut self, action: i32) {
        self.alu_imm(Alu::Mov, 0, action);
        self.insns.push(Insn::exit());
    }

    /// Returns `r0`.
    pub fn exit(&mut self) {
        self.insns.push(Insn::exit());
    }

    /// Patches every jump and returns the program.
    ///
    /// # Panics
    /// On a jump to a label never bound, or one beyond ±32k
    /// instructions: bugs of the code generator, not of its input.
    pub fn finish(mut self) -> Vec<Insn> {
        for &(at, l) in &self.fixups {
            let to = self.labels[l.0];
            assert!(to != usize::MAX, "jump to an unbound label");
            self.insns[at].off = i16::try_from(to as isize - at as isize - 1).expect("jump beyond 32k instructions");
        }
        self.insns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_are_patched_relative_to_the_next_instruction() {
        let mut a = Asm::new();
        let l = a.label();
        a.jmp_imm(Jmp::Eq, 1, 5, l);
        a.alu_imm(Alu::Mov, 0, 1);
        a.ja(l);
        a.bind(l);
        a.exit();
        let p = a.finish();
        assert_eq!(p[0].off, 2);
        assert_eq!((p[0].code, p[0].imm), (0x15, 5));
        assert_eq!(p[2].off, 0);
        assert_eq!(p[1].code, 0xb7);
    }

    #[test]
    fn encodings_match_the_instruction_set() {
        let mut a = Asm::new();
        a.ldx(Size::Dw, 2, 10, -8);
        a.stx(Size::B, 10, -1, 3);
        a.st(Size::W, 10, -4, 7);
        a.alu_reg(Alu::Or, 1, 2);
        a.be(3, 32);
        a.mov_const(4, 0x1_0000_0000);
        let p = a.finish();
        assert_eq!(p[0].code, 0x79);
        assert_eq!(p[1].code, 0x73);
        assert_eq!(p[2].code, 0x62);
        assert_eq!(p[3].code, 0x4f);
        assert_eq!((p[4].code, p[4].imm), (0xdc, 32));
        assert_eq!(p[5].code, 0x18);
        assert_eq!(p.len(), 7);
    }
}
