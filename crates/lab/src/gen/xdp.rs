//! The two hand-assembled XDP programs of the lab: the paced generator that runs under
//! `BPF_PROG_RUN` in live-frames mode, and the counting sink.
//!
//! Generator (one run of `BPF_PROG_RUN` = many repetitions of this program on one frame):
//! ```text
//!   st = state[0]                                   ; ARRAY map, one 64-byte value
//!   if st.sent >= st.limit            -> XDP_DROP   ; the trial's frame budget is spent
//!   if st.interval != 0:                            ; paced: a token bucket of depth BURST
//!       now = ktime_get_ns() << 8                   ; 1/256 ns fixed point
//!       if st.next == 0: st.next = now              ; the first frame starts the schedule
//!       if now < st.next              -> XDP_DROP   ; not yet: the frame is not sent
//!       st.next = max(st.next + interval, now - burst)    ; burst: catch-up window
//!   st.sent += 1
//!   if st.flows > 1: udp.src_port = htons(st.base_port + st.sent % st.flows)
//!   -> XDP_TX                                       ; out of the generator's veth
//! ```
//! The kernel repeats the program millions of times per call (~12 Mpps when every frame is
//! sent); a frame that is "not yet" costs tens of nanoseconds, so pacing is smooth at the
//! granularity of one program run, and `sent` is exact. UDP checksums are zero (allowed for
//! IPv4, RFC 768) so rewriting the source port needs no checksum update.
//!
//! Sink: counts IPv4/UDP frames to the data port (packets and bytes, atomic adds in an ARRAY
//! map) and drops them; everything else (latency probes, TCP) passes to the stack. The same
//! counter exists as an XDP program (frames straight from the generator) and as a tc program
//! (frames a DUT transmits, which arrive as socket buffers: see [`SinkProg::attach_tc`]).

use fastpath_io::bpf::{self, sk_buff, tc_action, xdp_action, xdp_md, Insn, Map, MapType, Prog, ProgType, Reg};
use fastpath_io::bpf::{R0, R1, R10, R2, R3, R4, R5, R6, R7};

use crate::LabError;

/// UDP destination port of generated data frames (discard, RFC 863).
pub const DATA_PORT: u16 = 9;
/// After a stall (preemption, a slow batch) the [`super::Pacing::CatchUp`] generator catches up
/// by sending back to back, for this many frames or [`BURST_NS`], whichever is more.
const BURST_FRAMES: u64 = 32;
/// Catch-up window in ns (see [`BURST_FRAMES`]).
const BURST_NS: u64 = 1_000_000;

const HELPER_MAP_LOOKUP: i32 = 1;
const HELPER_KTIME_GET_NS: i32 = 5;
const HELPER_SKB_PULL_DATA: i32 = 39;
const R8: Reg = 8;

/// Byte offsets of the generator state value.
mod st {
    pub const NEXT: i16 = 0;
    pub const INTERVAL: i16 = 8;
    pub const SENT: i16 = 16;
    pub const LIMIT: i16 = 24;
    pub const FLOWS: i16 = 32;
    pub const BASE_PORT: i16 = 40;
    pub const BURST: i16 = 48;
    pub const SIZE: usize = 64;
}

/// A tiny assembler with named jump targets.
struct Asm {
    code: Vec<Insn>,
    fixups: Vec<(usize, &'static str)>,
    labels: Vec<(&'static str, usize)>,
}

impl Asm {
    fn new() -> Asm {
        Asm { code: Vec::new(), fixups: Vec::new(), labels: Vec::new() }
    }
    fn i(&mut self, insn: Insn) -> &mut Asm {
        self.code.push(insn);
        self
    }
    fn i2(&mut self, insns: [Insn; 2]) -> &mut Asm {
        self.code.extend_from_slice(&insns);
        self
    }
    /// A jump whose offset is patched to `label` by [`Asm::finish`].
    fn jmp(&mut self, insn: Insn, label: &'static str) -> &mut Asm {
        self.fixups.push((self.code.len(), label));
        self.code.push(insn);
        self
    }
    fn label(&mut self, name: &'static str) -> &mut Asm {
        self.labels.push((name, self.code.len()));
        self
    }
    /// Sink: jumps to `pass` unless the frame at `r2` (38 bytes known readable) is IPv4/UDP to
    /// [`DATA_PORT`]. Clobbers `r4`.
    fn unless_data_frame_goto_pass(&mut self) -> &mut Asm {
        self.i(Insn::ldx_h(R4, R2, 12))
            .jmp(Insn::jne_imm(R4, i32::from(0x0800u16.to_be()), 0), "pass")
            .i(Insn::ldx_b(R4, R2, 23))
            .jmp(Insn::jne_imm(R4, 17, 0), "pass")
            .i(Insn::ldx_h(R4, R2, 36))
            .jmp(Insn::jne_imm(R4, i32::from(DATA_PORT.to_be()), 0), "pass")
    }
    /// Sink: adds `pkts` and `bytes` (registers) to slot 0 of `counters`, then falls through to
    /// the `drop` label it defines.
    fn count_then_drop(&mut self, counters: &Map, pkts: Reg, bytes: Reg) -> &mut Asm {
        self.i(Insn::st_w(R10, -4, 0))
            .i2(Insn::ld_map_fd(R1, counters.fd()))
            .i(Insn::mov64_reg(R2, R10))
            .i(Insn::add64_imm(R2, -4))
            .i(Insn::call(HELPER_MAP_LOOKUP))
            .jmp(Insn::jeq_imm(R0, 0, 0), "drop")
            .i(atomic_add_dw(R0, pkts, 0))
            .i(atomic_add_dw(R0, bytes, 8))
            .label("drop")
    }
    fn finish(mut self) -> Vec<Insn> {
        for (at, name) in &self.fixups {
            let to = self.labels.iter().find(|l| l.0 == *name).map(|l| l.1).unwrap_or(*at + 1);
            self.code[*at].off = (to as i64 - *at as i64 - 1) as i16;
        }
        self.code
    }
}

fn ldx_dw(dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::new(0x79, dst, src, off, 0)
}
fn stx_dw(dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::new(0x7b, dst, src, off, 0)
}
fn stx_h(dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::new(0x6b, dst, src, off, 0)
}
fn add64_reg(dst: Reg, src: Reg) -> Insn {
    Insn::new(0x0f, dst, src, 0, 0)
}
fn sub64_reg(dst: Reg, src: Reg) -> Insn {
    Insn::new(0x1f, dst, src, 0, 0)
}
fn lsh64_imm(dst: Reg, imm: i32) -> Insn {
    Insn::new(0x67, dst, 0, 0, imm)
}
fn mod64_reg(dst: Reg, src: Reg) -> Insn {
    Insn::new(0x9f, dst, src, 0, 0)
}
fn be16(dst: Reg) -> Insn {
    Insn::new(0xdc, dst, 0, 0, 16)
}
fn jge_reg(dst: Reg, src: Reg) -> Insn {
    Insn::new(0x3d, dst, src, 0, 0)
}
fn jlt_reg(dst: Reg, src: Reg) -> Insn {
    Insn::new(0xad, dst, src, 0, 0)
}
fn jle_reg(dst: Reg, src: Reg) -> Insn {
    Insn::new(0xbd, dst, src, 0, 0)
}
fn jle_imm(dst: Reg, imm: i32) -> Insn {
    Insn::new(0xb5, dst, 0, 0, imm)
}
fn atomic_add_dw(dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::new(0xdb, dst, src, off, 0)
}

fn bpf_err(e: bpf::BpfError) -> LabError {
    let log = if e.log.is_empty() { String::new() } else { format!("\n{}", e.log) };
    LabError::Bpf(format!("{}: {}{log}", e.op, e.err))
}

/// The paced generator program and its state map.
pub struct GenProg {
    prog: Prog,
    state: Map,
}

impl GenProg {
    /// Loads the generator program.
    ///
    /// # Errors
    /// [`LabError::Bpf`] when the kernel refuses the map or the program (with the verifier log).
    pub fn load() -> Result<GenProg, LabError> {
        let state = Map::create(MapType::ARRAY, 4, st::SIZE as u32, 1, "fp_gen_state").map_err(bpf_err)?;
        let mut a = Asm::new();
        a.i(Insn::mov64_reg(R6, R1))
            .i(Insn::st_w(R10, -4, 0))
            .i2(Insn::ld_map_fd(R1, state.fd()))
            .i(Insn::mov64_reg(R2, R10))
            .i(Insn::add64_imm(R2, -4))
            .i(Insn::call(HELPER_MAP_LOOKUP))
            .jmp(Insn::jeq_imm(R0, 0, 0), "drop")
            .i(Insn::mov64_reg(R7, R0))
            .i(ldx_dw(R8, R7, st::SENT))
            .i(ldx_dw(R1, R7, st::LIMIT))
            .jmp(jge_reg(R8, R1), "drop")
            .i(ldx_dw(R1, R7, st::INTERVAL))
            .jmp(Insn::jeq_imm(R1, 0, 0), "admit")
            .i(Insn::call(HELPER_KTIME_GET_NS))
            .i(lsh64_imm(R0, 8))
            .i(ldx_dw(R1, R7, st::NEXT))
            // The first frame starts the schedule now (no catch-up burst at the start).
            .jmp(Insn::jne_imm(R1, 0, 0), "scheduled")
            .i(Insn::mov64_reg(R1, R0))
            .label("scheduled")
            .jmp(jlt_reg(R0, R1), "drop")
            .i(ldx_dw(R2, R7, st::INTERVAL))
            .i(add64_reg(R1, R2))
            .i(ldx_dw(R2, R7, st::BURST))
            .i(Insn::mov64_reg(R3, R0))
            .i(sub64_reg(R3, R2))
            .jmp(Insn::jgt_reg(R1, R3, 0), "store")
            .i(Insn::mov64_reg(R1, R3))
            .label("store")
            .i(stx_dw(R7, R1, st::NEXT))
            .label("admit")
            .i(Insn::add64_imm(R8, 1))
            .i(stx_dw(R7, R8, st::SENT))
            .i(ldx_dw(R1, R7, st::FLOWS))
            .jmp(jle_imm(R1, 1), "tx")
            .i(Insn::mov64_reg(R2, R8))
            .i(mod64_reg(R2, R1))
            .i(ldx_dw(R3, R7, st::BASE_PORT))
            .i(add64_reg(R2, R3))
            .i(be16(R2))
            .i(Insn::ldx_w(R3, R6, xdp_md::DATA))
            .i(Insn::ldx_w(R4, R6, xdp_md::DATA_END))
            .i(Insn::mov64_reg(R5, R3))
            .i(Insn::add64_imm(R5, 36))
            .jmp(Insn::jgt_reg(R5, R4, 0), "tx")
            .i(stx_h(R3, R2, 34))
            .label("tx")
            .i(Insn::mov64_imm(R0, xdp_action::TX))
            .i(Insn::exit())
            .label("drop")
            .i(Insn::mov64_imm(R0, xdp_action::DROP))
            .i(Insn::exit());
        let prog = Prog::load(ProgType::XDP, &a.finish(), "GPL", bpf::BPF_XDP, "fp_gen").map_err(bpf_err)?;
        Ok(GenProg { prog, state })
    }

    /// Resets the state for a trial: send at most `limit` frames at `rate_pps` (0 = as fast as
    /// possible), rotating the UDP source port over `flows` values from `base_port`.
    ///
    /// # Errors
    /// [`LabError::Bpf`] when the map update fails.
    pub fn arm(&self, limit: u64, rate_pps: u64, flows: u32, base_port: u16, pacing: super::Pacing) -> Result<(), LabError> {
        let interval = if rate_pps == 0 { 0 } else { ((1e9 * 256.0) / rate_pps as f64).max(1.0) as u64 };
        let mut v = [0u8; st::SIZE];
        let mut put = |off: i16, x: u64| {
            let o = off as usize;
            v[o..o + 8].copy_from_slice(&x.to_ne_bytes());
        };
        put(st::NEXT, 0);
        put(st::INTERVAL, interval);
        put(st::SENT, 0);
        put(st::LIMIT, limit);
        put(st::FLOWS, u64::from(flows.max(1)));
        put(st::BASE_PORT, u64::from(base_port));
        let burst = match pacing {
            super::Pacing::CatchUp => (interval * BURST_FRAMES).max(BURST_NS << 8),
            // The bucket holds one frame: a stall's missed frames are skipped, not sent.
            super::Pacing::Smooth => interval,
            super::Pacing::CatchUpWithin(w) => (interval * BURST_FRAMES).max((w.as_nanos() as u64) << 8),
        };
        put(st::BURST, burst);
        self.state.update(&0u32.to_ne_bytes(), &v).map_err(bpf_err)
    }

    /// Frames sent since [`GenProg::arm`].
    ///
    /// # Errors
    /// [`LabError::Bpf`] when the map lookup fails.
    pub fn sent(&self) -> Result<u64, LabError> {
        let mut v = [0u8; st::SIZE];
        self.state.lookup(&0u32.to_ne_bytes(), &mut v).map_err(bpf_err)?;
        let o = st::SENT as usize;
        Ok(u64::from_ne_bytes([v[o], v[o + 1], v[o + 2], v[o + 3], v[o + 4], v[o + 5], v[o + 6], v[o + 7]]))
    }

    /// Runs the program `repeat` times on `frame` as live frames arriving on `ifindex` (in the
    /// calling thread's namespace); admitted frames leave through that interface.
    ///
    /// # Errors
    /// [`LabError::Bpf`]: `EINVAL` on kernels older than 5.18 (no live-frames mode).
    pub fn run(&self, ifindex: u32, frame: &[u8], repeat: u32) -> Result<(), LabError> {
        self.prog.test_run_xdp_live(ifindex, frame, repeat, 64, 0).map(|_| ()).map_err(bpf_err)
    }
}

/// The counting sink program, its counters, and its attachment.
pub struct SinkProg {
    counters: Map,
    _link: bpf::Link,
}

impl SinkProg {
    /// Loads the sink program and attaches it (native XDP) to `ifindex` in the calling thread's
    /// namespace. Detached when dropped (or when the process dies).
    ///
    /// # Errors
    /// [`LabError::Bpf`] on load or attach failure.
    pub fn attach(ifindex: u32) -> Result<SinkProg, LabError> {
        let counters = Map::create(MapType::ARRAY, 4, 16, 1, "fp_sink_cnt").map_err(bpf_err)?;
        let mut a = Asm::new();
        a.i(Insn::ldx_w(R2, R1, xdp_md::DATA))
            .i(Insn::ldx_w(R3, R1, xdp_md::DATA_END))
            .i(Insn::mov64_reg(R4, R2))
            .i(Insn::add64_imm(R4, 38))
            .jmp(Insn::jgt_reg(R4, R3, 0), "pass")
            .unless_data_frame_goto_pass()
            .i(Insn::mov64_reg(R7, R3))
            .i(sub64_reg(R7, R2))
            .i(Insn::mov64_imm(R8, 1))
            .count_then_drop(&counters, R8, R7)
            .i(Insn::mov64_imm(R0, xdp_action::DROP))
            .i(Insn::exit())
            .label("pass")
            .i(Insn::mov64_imm(R0, xdp_action::PASS))
            .i(Insn::exit());
        let prog = Prog::load(ProgType::XDP, &a.finish(), "GPL", bpf::BPF_XDP, "fp_sink").map_err(bpf_err)?;
        let link = bpf::Link::xdp(&prog, ifindex, bpf::XdpAttachMode::Native).map_err(bpf_err)?;
        Ok(SinkProg { counters, _link: link })
    }

    /// The same counter as a tc program on the ingress of `ifindex` (tcx, Linux ≥ 6.6), for
    /// frames that reach the sink as socket buffers (everything a DUT transmits).
    ///
    /// Why not XDP there: a veth runs an XDP program on a socket buffer only after copying it
    /// into a fresh page when it has less than 256 bytes of headroom (`skb_pp_cow_data`), which
    /// is the case for every AF_XDP copy-mode transmit (fastpath, testpmd, OVS) and not for the
    /// bridges' frames. That copy ran on the DUT's core, in the softirq of its transmit: 9 % of
    /// the fastpath worker's samples at 64 B (perf), a 1.5 KB copy per frame at 1518 B. A tc
    /// program reads the buffer as it is, for every DUT alike. GRO-merged buffers count as
    /// their `gso_segs` frames.
    ///
    /// # Errors
    /// [`LabError::Bpf`] on load or attach failure (e.g. a kernel without tcx).
    pub fn attach_tc(ifindex: u32) -> Result<SinkProg, LabError> {
        let counters = Map::create(MapType::ARRAY, 4, 16, 1, "fp_sink_cnt").map_err(bpf_err)?;
        let mut a = Asm::new();
        a.i(Insn::mov64_reg(R6, R1))
            .i(Insn::ldx_w(R2, R6, sk_buff::DATA))
            .i(Insn::ldx_w(R3, R6, sk_buff::DATA_END))
            .i(Insn::mov64_reg(R4, R2))
            .i(Insn::add64_imm(R4, 38))
            .jmp(Insn::jgt_reg(R4, R3, 0), "pull")
            .label("parse")
            .unless_data_frame_goto_pass()
            .i(Insn::ldx_w(R7, R6, sk_buff::LEN))
            .i(Insn::ldx_w(R8, R6, sk_buff::GSO_SEGS))
            .jmp(Insn::jne_imm(R8, 0, 0), "segs")
            .i(Insn::mov64_imm(R8, 1))
            .label("segs")
            .count_then_drop(&counters, R8, R7)
            .i(Insn::mov64_imm(R0, tc_action::SHOT))
            .i(Insn::exit())
            // Headers outside the linear part (an AF_PACKET TX-ring frame carries only its
            // Ethernet header there): pull 38 bytes in, then look again.
            .label("pull")
            .i(Insn::mov64_reg(R1, R6))
            .i(Insn::mov64_imm(R2, 38))
            .i(Insn::call(HELPER_SKB_PULL_DATA))
            .jmp(Insn::jne_imm(R0, 0, 0), "pass")
            .i(Insn::ldx_w(R2, R6, sk_buff::DATA))
            .i(Insn::ldx_w(R3, R6, sk_buff::DATA_END))
            .i(Insn::mov64_reg(R4, R2))
            .i(Insn::add64_imm(R4, 38))
            .jmp(jle_reg(R4, R3), "parse")
            .label("pass")
            .i(Insn::mov64_imm(R0, tc_action::OK))
            .i(Insn::exit());
        let prog = Prog::load(ProgType::SCHED_CLS, &a.finish(), "GPL", 0, "fp_sink_tc").map_err(bpf_err)?;
        let link = bpf::Link::tcx_ingress(&prog, ifindex).map_err(bpf_err)?;
        Ok(SinkProg { counters, _link: link })
    }

    /// (packets, bytes) counted since attach or the last [`SinkProg::reset`].
    ///
    /// # Errors
    /// [`LabError::Bpf`] when the map lookup fails.
    pub fn read(&self) -> Result<(u64, u64), LabError> {
        let mut v = [0u8; 16];
        self.counters.lookup(&0u32.to_ne_bytes(), &mut v).map_err(bpf_err)?;
        let (a, b) = v.split_at(8);
        let p = u64::from_ne_bytes(a.try_into().unwrap_or([0; 8]));
        let by = u64::from_ne_bytes(b.try_into().unwrap_or([0; 8]));
        Ok((p, by))
    }

    /// Zeroes the counters.
    ///
    /// # Errors
    /// [`LabError::Bpf`] when the map update fails.
    pub fn reset(&self) -> Result<(), LabError> {
        self.counters.update(&0u32.to_ne_bytes(), &[0u8; 16]).map_err(bpf_err)
    }
}
