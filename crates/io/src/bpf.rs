//! A minimal BPF toolkit over the raw `bpf(2)` system call: instruction encoding, maps, program
//! loading (with the verifier log on failure), XDP links and `BPF_PROG_TEST_RUN`.
//!
//! Everything fastpath needs from the kernel's BPF subsystem is a handful of hand-assembled XDP
//! programs (the AF_XDP redirect program in `af_xdp`, the lab's traffic generator, the programs
//! `fastpath-xdp` compiles), so a C toolchain and libbpf are not needed. Encodings follow the kernel's `Documentation/bpf/standardization/
//! instruction-set.rst`; attribute layouts follow `include/uapi/linux/bpf.h` (`union bpf_attr`).
//!
//! ```text
//!  Insn (8 bytes):  code:u8 | dst:4 src:4 | off:i16 | imm:i32     (little-endian host)
//!  ld_imm64 takes two slots; src = BPF_PSEUDO_MAP_FD makes imm a map fd the loader resolves.
//! ```
//!
//! Lifetimes are RAII: a [`Map`], [`Prog`] or [`Link`] closes its file descriptor on drop, and an
//! XDP program attached through a [`Link`] (`BPF_LINK_CREATE`) is detached when the link's last
//! fd closes — also when the process dies, even by SIGKILL, unlike the legacy netlink attach.
//!
//! Thread: control path only (every call is a system call).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// bpf(2) commands (enum bpf_cmd).
const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_LOOKUP_ELEM: u32 = 1;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_MAP_DELETE_ELEM: u32 = 3;
const BPF_MAP_GET_NEXT_KEY: u32 = 4;
const BPF_PROG_LOAD: u32 = 5;
const BPF_PROG_TEST_RUN: u32 = 10;
const BPF_LINK_CREATE: u32 = 28;

/// `enum bpf_attach_type` value of an XDP program attached to a device.
pub const BPF_XDP: u32 = 37;
/// `BPF_PROG_LOAD` flag: the XDP program handles multi-buffer frames (it reads only the first
/// buffer through `data`/`data_end`), so the kernel hands it frames larger than a page (jumbo,
/// GRO/GSO skbs in generic mode) instead of dropping them.
pub const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
/// `BPF_PROG_LOAD` flag: the XDP program is bound to one device (`prog_ifindex`) and may call
/// that driver's metadata kfuncs; native mode on that device only (kernel ≥ 6.3).
pub const BPF_F_XDP_DEV_BOUND_ONLY: u32 = 1 << 6;
/// `BPF_PROG_TEST_RUN` flag: run the XDP program on live frames that really leave (kernel ≥ 5.18).
pub const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// `BPF_PROG_TEST_RUN` flag: run on the CPU given in `cpu` (not supported for XDP live mode).
pub const BPF_F_TEST_RUN_ON_CPU: u32 = 1 << 0;

/// XDP action codes (`enum xdp_action`).
pub mod xdp_action {
    /// Error; the packet is dropped and a tracepoint fires.
    pub const ABORTED: i32 = 0;
    /// Drop the packet.
    pub const DROP: i32 = 1;
    /// Hand the packet to the kernel stack.
    pub const PASS: i32 = 2;
    /// Send the packet back out of the interface it came in on.
    pub const TX: i32 = 3;
    /// Redirect (to another device, a CPU, or an AF_XDP socket) as set up by a helper.
    pub const REDIRECT: i32 = 4;
}

/// BPF helper function ids (`enum bpf_func_id`) used by fastpath's programs.
pub mod helper {
    /// `long bpf_skb_vlan_push(struct sk_buff *skb, __be16 vlan_proto, u16 vlan_tci)`: the new
    /// tag goes into the skb's metadata (a tag already there moves into the frame first).
    pub const SKB_VLAN_PUSH: i32 = 18;
    /// `void *bpf_map_lookup_elem(struct bpf_map *map, const void *key)`.
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    /// `long bpf_redirect(u32 ifindex, u64 flags)`.
    pub const REDIRECT: i32 = 23;
    /// `long bpf_xdp_adjust_head(struct xdp_buff *xdp_md, int delta)`: moves the frame's start
    /// (negative `delta` grows it into the headroom); packet pointers must be reloaded after.
    pub const XDP_ADJUST_HEAD: i32 = 44;
    /// `long bpf_redirect_map(struct bpf_map *map, u64 key, u64 flags)`; the low two bits of
    /// `flags` are the action returned when the key has no entry.
    pub const REDIRECT_MAP: i32 = 51;
    /// `long bpf_redirect_peer(u32 ifindex, u64 flags)`, tc ingress only: the skb enters the
    /// ingress of the peer of `ifindex` (a veth or netkit device whose peer is in another
    /// namespace) at once, without the device's transmit and a pass through the per-CPU backlog.
    pub const REDIRECT_PEER: i32 = 155;
}

/// Offsets of the fields of `struct xdp_md`, the XDP program's context (in `r1`).
pub mod xdp_md {
    /// `u32 data`: start of the frame.
    pub const DATA: i16 = 0;
    /// `u32 data_end`: one past the frame's end.
    pub const DATA_END: i16 = 4;
    /// `u32 ingress_ifindex`.
    pub const INGRESS_IFINDEX: i16 = 12;
    /// `u32 rx_queue_index`.
    pub const RX_QUEUE_INDEX: i16 = 16;
}

/// A register number `r0`..`r10` (`r0` return value, `r1`–`r5` arguments, `r10` frame pointer).
pub type Reg = u8;
/// Return value / scratch.
pub const R0: Reg = 0;
/// First argument (the context on entry).
pub const R1: Reg = 1;
/// Second argument.
pub const R2: Reg = 2;
/// Third argument.
pub const R3: Reg = 3;
/// Fourth argument.
pub const R4: Reg = 4;
/// Fifth argument.
pub const R5: Reg = 5;
/// Callee-saved.
pub const R6: Reg = 6;
/// Callee-saved.
pub const R7: Reg = 7;
/// Callee-saved.
pub const R8: Reg = 8;
/// Callee-saved.
pub const R9: Reg = 9;
/// Puts back a VLAN tag that the driver holds outside the frame, after the MAC addresses: the
/// body of an XDP program that has called `bpf_xdp_metadata_rx_vlan_tag` and found a tag.
/// Expects `r6` = the context, the TPID at `fp-8` (network order, as the kfunc leaves it) and
/// the TCI at `fp-6` (host order); every path falls through at the end (relative jumps stay
/// inside). The AF_XDP redirect program and the XDP datapath's prologue both use it.
///
/// ```text
///   if adjust_head(ctx, -4) == 0:
///       if data + 16 > data_end   -> adjust_head(ctx, 4)   (cannot happen)
///       else data[0..12] = data[4..16]; data[12..14] = proto; data[14..16] = htons(tci)
/// ```
pub fn reinsert_vlan_tag() -> [Insn; 24] {
    [
        Insn::mov64_reg(R1, R6),
        Insn::mov64_imm(R2, -4),
        Insn::call(helper::XDP_ADJUST_HEAD),
        Insn::jne_imm(R0, 0, 20), // 3: no headroom -> 24, the end (the tag stays lost)
        Insn::ldx_w(R2, R6, xdp_md::DATA),
        Insn::ldx_w(R3, R6, xdp_md::DATA_END),
        Insn::mov64_reg(R4, R2),
        Insn::add64_imm(R4, 16),
        Insn::jgt_reg(R4, R3, 12), // 8: shorter than MACs + tag -> 21 (undo)
        Insn::ldx_w(R5, R2, 4),    // 9: MAC addresses 4 bytes forward, a word at a time
        Insn::stx_w(R2, R5, 0),
        Insn::ldx_w(R5, R2, 8),
        Insn::stx_w(R2, R5, 4),
        Insn::ldx_w(R5, R2, 12),
        Insn::stx_w(R2, R5, 8),
        Insn::ldx_h(R5, R10, -8), // 15: TPID, already in network order
        Insn::stx_h(R2, R5, 12),
        Insn::ldx_h(R5, R10, -6), // 17: TCI, host order
        Insn::be16(R5),
        Insn::stx_h(R2, R5, 14),
        Insn::ja(3), // 20: -> 24
        Insn::mov64_reg(R1, R6),
        Insn::mov64_imm(R2, 4),
        Insn::call(helper::XDP_ADJUST_HEAD), // 23: undo the push, fall through
    ]
}

/// Read-only frame pointer.
pub const R10: Reg = 10;

/// One eBPF instruction (`struct bpf_insn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Insn {
    /// Opcode: class | size/source | mode/operation.
    pub code: u8,
    /// `dst` in the low nibble, `src` in the high nibble.
    pub regs: u8,
    /// Signed offset (memory access, jump distance in instructions).
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

impl Insn {
    /// Any instruction from its fields.
    pub const fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        Insn { code, regs: (dst & 0xf) | (src << 4), off, imm }
    }
    /// `dst = imm` (64-bit, sign-extended).
    pub const fn mov64_imm(dst: Reg, imm: i32) -> Insn {
        Insn::new(0xb7, dst, 0, 0, imm)
    }
    /// `dst = src` (64-bit).
    pub const fn mov64_reg(dst: Reg, src: Reg) -> Insn {
        Insn::new(0xbf, dst, src, 0, 0)
    }
    /// `dst += imm` (64-bit).
    pub const fn add64_imm(dst: Reg, imm: i32) -> Insn {
        Insn::new(0x07, dst, 0, 0, imm)
    }
    /// `dst = *(u32 *)(src + off)`.
    pub const fn ldx_w(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(0x61, dst, src, off, 0)
    }
    /// `dst = *(u16 *)(src + off)`.
    pub const fn ldx_h(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(0x69, dst, src, off, 0)
    }
    /// `dst = *(u8 *)(src + off)`.
    pub const fn ldx_b(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(0x71, dst, src, off, 0)
    }
    /// `*(u32 *)(dst + off) = src`.
    pub const fn stx_w(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(0x63, dst, src, off, 0)
    }
    /// `*(u32 *)(dst + off) = imm`.
    pub const fn st_w(dst: Reg, off: i16, imm: i32) -> Insn {
        Insn::new(0x62, dst, 0, off, imm)
    }
    /// `if dst == imm goto +off`.
    pub const fn jeq_imm(dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(0x15, dst, 0, off, imm)
    }
    /// `if dst != imm goto +off`.
    pub const fn jne_imm(dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(0x55, dst, 0, off, imm)
    }
    /// `if dst > src goto +off` (unsigned).
    pub const fn jgt_reg(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(0x2d, dst, src, off, 0)
    }
    /// `goto +off`.
    pub const fn ja(off: i16) -> Insn {
        Insn::new(0x05, 0, 0, off, 0)
    }
    /// Calls helper `id` (arguments in `r1`–`r5`, result in `r0`).
    pub const fn call(id: i32) -> Insn {
        Insn::new(0x85, 0, 0, 0, id)
    }
    /// Calls the vmlinux kfunc whose BTF id is `btf_id` (`BPF_PSEUDO_KFUNC_CALL`); see
    /// [`vmlinux_func_btf_id`].
    pub const fn call_kfunc(btf_id: u32) -> Insn {
        Insn::new(0x85, 0, 2, 0, btf_id as i32)
    }
    /// `*(u16 *)(dst + off) = src`.
    pub const fn stx_h(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(0x6b, dst, src, off, 0)
    }
    /// `*(u16 *)(dst + off) = imm`.
    pub const fn st_h(dst: Reg, off: i16, imm: i32) -> Insn {
        Insn::new(0x6a, dst, 0, off, imm)
    }
    /// `dst = htobe16(dst)` (`BPF_END | BPF_TO_BE`, 16 bits; upper bits cleared).
    pub const fn be16(dst: Reg) -> Insn {
        Insn::new(0xdc, dst, 0, 0, 16)
    }
    /// Returns `r0`.
    pub const fn exit() -> Insn {
        Insn::new(0x95, 0, 0, 0, 0)
    }
    /// `dst = imm64` (two slots).
    pub const fn ld_imm64(dst: Reg, imm: u64) -> [Insn; 2] {
        [Insn::new(0x18, dst, 0, 0, imm as u32 as i32), Insn::new(0, 0, 0, 0, (imm >> 32) as u32 as i32)]
    }
    /// `dst = map` (two slots): the loader replaces the fd with the map's address
    /// (`src = BPF_PSEUDO_MAP_FD`).
    pub const fn ld_map_fd(dst: Reg, map_fd: RawFd) -> [Insn; 2] {
        [Insn::new(0x18, dst, 1, 0, map_fd), Insn::new(0, 0, 0, 0, 0)]
    }
}

/// A failed BPF system call: which operation, the OS error, and the verifier log if any.
#[derive(Debug, thiserror::Error)]
#[error("bpf {op}: {err}{}", if log.is_empty() { String::new() } else { format!("\nverifier log:\n{log}") })]
pub struct BpfError {
    /// The operation (`map create`, `prog load`, `link create`, ...).
    pub op: &'static str,
    /// The OS error.
    pub err: io::Error,
    /// The verifier's log (program loads only; empty otherwise).
    pub log: String,
}

impl BpfError {
    fn last(op: &'static str) -> BpfError {
        BpfError { op, err: io::Error::last_os_error(), log: String::new() }
    }
    fn inval(op: &'static str) -> BpfError {
        BpfError { op, err: io::Error::from_raw_os_error(libc::EINVAL), log: String::new() }
    }
    /// The raw errno.
    pub fn errno(&self) -> i32 {
        self.err.raw_os_error().unwrap_or(0)
    }
}

/// Calls `bpf(cmd, attr, size_of::<A>())`. Returns the result (an fd or 0) or -1.
fn sys_bpf<A>(cmd: u32, attr: &mut A) -> libc::c_long {
    // SAFETY: `attr` is a live, exclusively borrowed `#[repr(C)]` struct laid out as the prefix of
    // `union bpf_attr` for `cmd`; the kernel reads/writes at most `size_of::<A>()` bytes of it.
    // Pointers stored inside it (insns, keys, buffers) are kept alive by the callers for the
    // duration of the call.
    unsafe { libc::syscall(libc::SYS_bpf, cmd as libc::c_long, attr as *mut A as *mut libc::c_void, std::mem::size_of::<A>()) }
}

fn fd_from(ret: libc::c_long, op: &'static str) -> Result<OwnedFd, BpfError> {
    if ret < 0 {
        return Err(BpfError::last(op));
    }
    // SAFETY: a non-negative return of these bpf commands is a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

fn obj_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let ok = name.bytes().filter(|c| c.is_ascii_alphanumeric() || *c == b'_').take(15);
    for (o, c) in out.iter_mut().zip(ok) {
        *o = c;
    }
    out
}

/// A map type (`enum bpf_map_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapType(pub u32);

impl MapType {
    /// Hash table.
    pub const HASH: MapType = MapType(1);
    /// Array indexed by a `u32`.
    pub const ARRAY: MapType = MapType(2);
    /// Per-CPU array.
    pub const PERCPU_ARRAY: MapType = MapType(6);
    /// Hash table that evicts its least recently used entry when full.
    pub const LRU_HASH: MapType = MapType(9);
    /// Device map for `bpf_redirect_map` to interfaces (values are ifindexes).
    pub const DEVMAP: MapType = MapType(14);
    /// AF_XDP socket map for `bpf_redirect_map` to XSKs (values are socket fds).
    pub const XSKMAP: MapType = MapType(17);
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct ElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// A BPF map. Closed on drop (the kernel frees it when no program holds it either).
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    key_size: usize,
    value_size: usize,
}

impl Map {
    /// Creates a map named `name` (up to 15 characters kept).
    ///
    /// # Errors
    /// `EPERM` without CAP_BPF/root; `EINVAL` for sizes the type does not allow.
    pub fn create(ty: MapType, key_size: u32, value_size: u32, max_entries: u32, name: &str) -> Result<Map, BpfError> {
        let mut a = MapCreateAttr { map_type: ty.0, key_size, value_size, max_entries, map_name: obj_name(name), ..Default::default() };
        let fd = fd_from(sys_bpf(BPF_MAP_CREATE, &mut a), "map create")?;
        Ok(Map { fd, key_size: key_size as usize, value_size: value_size as usize })
    }

    /// Sets `key` to `value` (`BPF_ANY`).
    ///
    /// # Errors
    /// `EINVAL` when the slices do not have the map's key/value sizes, or the kernel refuses the
    /// value (e.g. an XSKMAP value that is not a bound AF_XDP socket).
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<(), BpfError> {
        self.update_with(key, value, UpdateFlags::Any)
    }

    /// Sets `key` to `value` under `flags`.
    ///
    /// # Errors
    /// As [`Map::update`]; `ENOENT` for [`UpdateFlags::Exist`] on a missing key, `EEXIST` for
    /// [`UpdateFlags::NoExist`] on a present one, `E2BIG` when a hash map is full.
    pub fn update_with(&self, key: &[u8], value: &[u8], flags: UpdateFlags) -> Result<(), BpfError> {
        if key.len() != self.key_size || value.len() != self.value_size {
            return Err(BpfError::inval("map update"));
        }
        let mut a = ElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            value: value.as_ptr() as u64,
            flags: flags as u64,
            ..Default::default()
        };
        if sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a) < 0 {
            return Err(BpfError::last("map update"));
        }
        Ok(())
    }

    /// Reads `key` into `value`. `Ok(false)` when the key has no entry.
    ///
    /// # Errors
    /// `EINVAL` when the slices do not have the map's key/value sizes.
    pub fn lookup(&self, key: &[u8], value: &mut [u8]) -> Result<bool, BpfError> {
        if key.len() != self.key_size || value.len() != self.value_size {
            return Err(BpfError::inval("map lookup"));
        }
        self.lookup_raw(key, value)
    }

    /// `BPF_MAP_LOOKUP_ELEM` into `value`, which the caller sized for the map's type.
    fn lookup_raw(&self, key: &[u8], value: &mut [u8]) -> Result<bool, BpfError> {
        let mut a = ElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            value: value.as_mut_ptr() as u64,
            ..Default::default()
        };
        if sys_bpf(BPF_MAP_LOOKUP_ELEM, &mut a) < 0 {
            let e = BpfError::last("map lookup");
            return if e.errno() == libc::ENOENT { Ok(false) } else { Err(e) };
        }
        Ok(true)
    }

    /// Reads `key` of a per-CPU map: one value per possible CPU ([`possible_cpus`]), each
    /// padded to 8 bytes, concatenated. `Ok(None)` when the key has no entry.
    ///
    /// # Errors
    /// `EINVAL` when the key has the wrong size; the kernel's error otherwise.
    pub fn lookup_percpu(&self, key: &[u8]) -> Result<Option<Vec<u8>>, BpfError> {
        if key.len() != self.key_size {
            return Err(BpfError::inval("map lookup"));
        }
        let cpus = possible_cpus().map_err(|err| BpfError { op: "map lookup", err, log: String::new() })?;
        let mut value = vec![0u8; self.value_size.next_multiple_of(8) * cpus];
        Ok(self.lookup_raw(key, &mut value)?.then_some(value))
    }

    /// Every key of the map (`BPF_MAP_GET_NEXT_KEY` from the start). A map changed meanwhile
    /// may yield a key twice or miss one, as the kernel documents.
    ///
    /// # Errors
    /// The kernel's error other than the end of the map.
    pub fn keys(&self) -> Result<Vec<Vec<u8>>, BpfError> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        loop {
            let mut next = vec![0u8; self.key_size];
            let mut a = ElemAttr {
                map_fd: self.fd.as_raw_fd() as u32,
                key: out.last().map_or(0, |k| k.as_ptr() as u64),
                value: next.as_mut_ptr() as u64,
                ..Default::default()
            };
            if sys_bpf(BPF_MAP_GET_NEXT_KEY, &mut a) < 0 {
                let e = BpfError::last("map next key");
                return if e.errno() == libc::ENOENT { Ok(out) } else { Err(e) };
            }
            out.push(next);
        }
    }

    /// Removes `key`. `Ok(false)` when it had no entry.
    ///
    /// # Errors
    /// `EINVAL` when the key has the wrong size.
    pub fn delete(&self, key: &[u8]) -> Result<bool, BpfError> {
        if key.len() != self.key_size {
            return Err(BpfError::inval("map delete"));
        }
        let mut a = ElemAttr { map_fd: self.fd.as_raw_fd() as u32, key: key.as_ptr() as u64, ..Default::default() };
        if sys_bpf(BPF_MAP_DELETE_ELEM, &mut a) < 0 {
            let e = BpfError::last("map delete");
            return if e.errno() == libc::ENOENT { Ok(false) } else { Err(e) };
        }
        Ok(true)
    }

    /// The map's fd, for [`Insn::ld_map_fd`].
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// How [`Map::update_with`] treats an existing key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum UpdateFlags {
    /// Create or replace (`BPF_ANY`).
    Any = 0,
    /// Create only (`BPF_NOEXIST`).
    NoExist = 1,
    /// Replace only (`BPF_EXIST`).
    Exist = 2,
}

/// Number of possible CPUs (`/sys/devices/system/cpu/possible`, e.g. `0-1`, read once): the
/// number of values a per-CPU map returns per key.
///
/// # Errors
/// The file cannot be read or parsed.
pub fn possible_cpus() -> io::Result<usize> {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    if let Some(n) = CPUS.get() {
        return Ok(*n);
    }
    let n = read_possible_cpus()?;
    Ok(*CPUS.get_or_init(|| n))
}

fn read_possible_cpus() -> io::Result<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("cannot parse cpu list {s:?}"));
    let mut max = 0usize;
    for part in s.trim().split(',') {
        let hi = part.rsplit('-').next().ok_or_else(bad)?;
        max = max.max(hi.parse::<usize>().map_err(|_| bad())?);
    }
    Ok(max + 1)
}

/// The BTF type id of the kernel function `name` in the running kernel's BTF
/// (`/sys/kernel/btf/vmlinux`, `BTF_KIND_FUNC`), for [`Insn::call_kfunc`]. `Ok(None)` when the
/// kernel has no such function.
///
/// # Errors
/// The file cannot be read (no `CONFIG_DEBUG_INFO_BTF`) or is not BTF.
pub fn vmlinux_func_btf_id(name: &str) -> io::Result<Option<u32>> {
    btf_func_id(&std::fs::read("/sys/kernel/btf/vmlinux")?, name)
}

/// [`vmlinux_func_btf_id`] on the bytes of a BTF blob (`Documentation/bpf/btf.rst`: a header,
/// then type records of 12 bytes plus a kind-dependent tail, ids from 1, then the strings).
fn btf_func_id(btf: &[u8], name: &str) -> io::Result<Option<u32>> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("BTF: {what}"));
    let u32_at = |off: usize| btf.get(off..off + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    if btf.get(..2) != Some(&[0x9f, 0xeb]) {
        return Err(bad("bad magic (not little-endian BTF)"));
    }
    let hdr_len = u32_at(4).ok_or_else(|| bad("short header"))? as usize;
    let field = |i: usize| u32_at(8 + 4 * i).map(|v| v as usize).ok_or_else(|| bad("short header"));
    let (type_off, type_len, str_off, str_len) = (field(0)?, field(1)?, field(2)?, field(3)?);
    let types = btf.get(hdr_len + type_off..hdr_len + type_off + type_len).ok_or_else(|| bad("type section out of range"))?;
    let strs = btf.get(hdr_len + str_off..hdr_len + str_off + str_len).ok_or_else(|| bad("string section out of range"))?;
    let mut off = 0usize;
    let mut id = 1u32;
    while off + 12 <= types.len() {
        let w = |i: usize| u32::from_le_bytes([types[off + i], types[off + i + 1], types[off + i + 2], types[off + i + 3]]);
        let (name_off, info) = (w(0) as usize, w(4));
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        const FUNC: u32 = 12;
        if kind == FUNC {
            let n = strs.get(name_off..).and_then(|s| s.split(|&c| c == 0).next()).unwrap_or_default();
            if n == name.as_bytes() {
                return Ok(Some(id));
            }
        }
        // Bytes after the 12-byte record, by kind (int, array, struct/union, enum, func_proto,
        // var, datasec, decl_tag, enum64; the rest have none).
        let tail = match kind {
            1 | 14 | 17 => 4,
            3 => 12,
            4 | 5 => 12 * vlen,
            6 | 13 => 8 * vlen,
            15 | 19 => 12 * vlen,
            _ => 0,
        };
        off += 12 + tail;
        id += 1;
    }
    Ok(None)
}

/// A program type (`enum bpf_prog_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgType(pub u32);

impl ProgType {
    /// XDP.
    pub const XDP: ProgType = ProgType(6);
    /// Traffic-control classifier (`BPF_PROG_TYPE_SCHED_CLS`): runs on `struct __sk_buff`.
    pub const SCHED_CLS: ProgType = ProgType(3);
}

/// `enum bpf_attach_type` value of a tc program on a device's ingress (tcx, Linux ≥ 6.6).
pub const BPF_TCX_INGRESS: u32 = 46;
/// `enum bpf_attach_type` value of a tc program on a device's egress (tcx, Linux ≥ 6.6).
pub const BPF_TCX_EGRESS: u32 = 47;

/// Verdicts of a tc (tcx) program.
pub mod tc_action {
    /// Let the packet continue (`TC_ACT_OK` / `TCX_PASS`).
    pub const OK: i32 = 0;
    /// Drop it (`TC_ACT_SHOT` / `TCX_DROP`).
    pub const SHOT: i32 = 2;
    /// Sent where `bpf_redirect` said (`TC_ACT_REDIRECT` / `TCX_REDIRECT`).
    pub const REDIRECT: i32 = 7;
}

/// Field offsets in `struct __sk_buff` (the tc program's context), from `linux/bpf.h`.
pub mod sk_buff {
    /// `len`: bytes of the packet (from the Ethernet header at tc ingress).
    pub const LEN: i16 = 0;
    /// `ifindex`: the device the packet is on (at tc ingress, the one that received it).
    pub const IFINDEX: i16 = 40;
    /// `data`: packet start (u32 in the context, a pointer to the verifier).
    pub const DATA: i16 = 76;
    /// `data_end`: end of the linear part.
    pub const DATA_END: i16 = 80;
    /// `gso_segs`: frames a GRO-merged packet stands for (0 or 1 otherwise).
    pub const GSO_SEGS: i16 = 164;
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// `struct xdp_md` as passed in `ctx_in` of a test run.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct XdpMdCtx {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

/// Result of a (non-live) test run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestRun {
    /// The program's return value (an XDP action or a tc verdict).
    pub retval: u32,
    /// Average run time per repetition in ns, as the kernel measured it.
    pub duration_ns: u32,
    /// Length of the frame after the program ran.
    pub data_len: usize,
}

/// A loaded BPF program. Unloaded when its fd and every link/map reference are gone.
#[derive(Debug)]
pub struct Prog {
    fd: OwnedFd,
}

impl Prog {
    /// Loads a program. `license` must be GPL-compatible ("GPL", "Dual MIT/GPL") for GPL-only
    /// helpers such as `bpf_redirect_map`. `expected_attach_type` is [`BPF_XDP`] for XDP
    /// programs that will be attached to a device.
    ///
    /// # Errors
    /// The verifier's rejection with its log (re-loaded with logging on to get it); `EPERM`
    /// without CAP_BPF/root.
    pub fn load(ty: ProgType, insns: &[Insn], license: &str, expected_attach_type: u32, name: &str) -> Result<Prog, BpfError> {
        Prog::load_with_flags(ty, insns, license, expected_attach_type, name, 0)
    }

    /// As [`Prog::load`], with `BPF_PROG_LOAD` flags (e.g. [`BPF_F_XDP_HAS_FRAGS`]).
    ///
    /// # Errors
    /// As [`Prog::load`].
    pub fn load_with_flags(
        ty: ProgType,
        insns: &[Insn],
        license: &str,
        expected_attach_type: u32,
        name: &str,
        prog_flags: u32,
    ) -> Result<Prog, BpfError> {
        Prog::load_on(ty, insns, license, expected_attach_type, name, prog_flags, 0)
    }

    /// As [`Prog::load_with_flags`], bound to device `ifindex` (with
    /// [`BPF_F_XDP_DEV_BOUND_ONLY`]: the driver's metadata kfuncs become callable).
    ///
    /// # Errors
    /// As [`Prog::load`]; `EOPNOTSUPP` when the device has no metadata kfuncs.
    pub fn load_on(
        ty: ProgType,
        insns: &[Insn],
        license: &str,
        expected_attach_type: u32,
        name: &str,
        prog_flags: u32,
        prog_ifindex: u32,
    ) -> Result<Prog, BpfError> {
        let mut lic = Vec::with_capacity(license.len() + 1);
        lic.extend_from_slice(license.as_bytes());
        lic.push(0);
        let mut a = ProgLoadAttr {
            prog_type: ty.0,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: lic.as_ptr() as u64,
            prog_name: obj_name(name),
            expected_attach_type,
            prog_flags,
            prog_ifindex,
            ..Default::default()
        };
        match fd_from(sys_bpf(BPF_PROG_LOAD, &mut a), "prog load") {
            Ok(fd) => Ok(Prog { fd }),
            Err(first) => {
                // Load again with the verifier log on, to say why.
                let mut log = vec![0u8; 1 << 16];
                a.log_level = 1;
                a.log_size = log.len() as u32;
                a.log_buf = log.as_mut_ptr() as u64;
                if let Ok(fd) = fd_from(sys_bpf(BPF_PROG_LOAD, &mut a), "prog load") {
                    return Ok(Prog { fd });
                }
                let end = log.iter().position(|&c| c == 0).unwrap_or(log.len());
                Err(BpfError { log: String::from_utf8_lossy(&log[..end]).into_owned(), ..first })
            }
        }
    }

    /// The program's fd.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Runs an XDP program `repeat` times on a copy of `data` (`BPF_PROG_TEST_RUN`) and returns
    /// its action, average time and the length of the frame it left in `out` (if given).
    ///
    /// # Errors
    /// `EINVAL` for frames shorter than 14 bytes or bad arguments; `ENOSPC` when `out` is too small.
    pub fn test_run_xdp(&self, data: &[u8], out: Option<&mut [u8]>, repeat: u32) -> Result<TestRun, BpfError> {
        let (out_ptr, out_len) = match out {
            Some(o) => (o.as_mut_ptr() as u64, o.len() as u32),
            None => (0, 0),
        };
        let mut a = TestRunAttr {
            prog_fd: self.fd() as u32,
            data_size_in: data.len() as u32,
            data_in: data.as_ptr() as u64,
            data_out: out_ptr,
            data_size_out: out_len,
            repeat,
            ..Default::default()
        };
        if sys_bpf(BPF_PROG_TEST_RUN, &mut a) < 0 {
            return Err(BpfError::last("prog test run"));
        }
        Ok(TestRun { retval: a.retval, duration_ns: a.duration, data_len: a.data_size_out as usize })
    }

    /// Runs an XDP program once on a copy of `data` as if it arrived on device `ingress_ifindex`
    /// (which must exist in the caller's namespace), queue 0. Returns its action and the frame
    /// it left in `out`.
    ///
    /// # Errors
    /// `ENODEV` for a missing device; as [`Prog::test_run_xdp`] otherwise.
    pub fn test_run_xdp_on(&self, ingress_ifindex: u32, data: &[u8], out: &mut [u8]) -> Result<TestRun, BpfError> {
        let mut ctx = XdpMdCtx { data: 0, data_end: data.len() as u32, ingress_ifindex, ..Default::default() };
        self.test_run_once(data, out, &mut ctx as *mut XdpMdCtx as u64, std::mem::size_of::<XdpMdCtx>(), "prog test run")
    }

    /// One run of the program on a copy of `data` with the context at `ctx_in` (`ctx_size`
    /// bytes); the frame it leaves goes to `out`.
    fn test_run_once(&self, data: &[u8], out: &mut [u8], ctx_in: u64, ctx_size: usize, what: &'static str) -> Result<TestRun, BpfError> {
        let mut a = TestRunAttr {
            prog_fd: self.fd() as u32,
            data_size_in: data.len() as u32,
            data_in: data.as_ptr() as u64,
            data_out: out.as_mut_ptr() as u64,
            data_size_out: out.len() as u32,
            repeat: 1,
            ctx_size_in: ctx_size as u32,
            ctx_in,
            ..Default::default()
        };
        if sys_bpf(BPF_PROG_TEST_RUN, &mut a) < 0 {
            return Err(BpfError::last(what));
        }
        Ok(TestRun { retval: a.retval, duration_ns: a.duration, data_len: a.data_size_out as usize })
    }

    /// Runs a tc (`SCHED_CLS`) program once on an skb built from a copy of `data` (an Ethernet
    /// frame) as if it arrived on device `ifindex` (which must exist in the caller's namespace).
    /// Returns its verdict (a redirect is reported, not carried out) and the frame it left in
    /// `out`.
    ///
    /// # Errors
    /// `ENODEV` for a missing device; `EINVAL` for frames shorter than 14 bytes; `ENOSPC` when
    /// `out` is too small.
    pub fn test_run_skb_on(&self, ifindex: u32, data: &[u8], out: &mut [u8]) -> Result<TestRun, BpfError> {
        // `struct __sk_buff` up to `ifindex` (the kernel takes a prefix and zeroes the rest).
        let mut ctx = [0u32; 11];
        ctx[sk_buff::IFINDEX as usize / 4] = ifindex;
        self.test_run_once(data, out, ctx.as_mut_ptr() as u64, std::mem::size_of_val(&ctx), "prog test run (skb)")
    }

    /// Runs an XDP program on live frames (`BPF_F_TEST_XDP_LIVE_FRAMES`, kernel ≥ 5.18): the
    /// kernel builds `repeat` frames from `data`, in batches of `batch_size` (0 = kernel default
    /// 64), runs the program on each as if it arrived on `ingress_ifindex` (queue 0), and acts on
    /// the verdict for real: `XDP_TX` transmits out of `ingress_ifindex` itself (turned into a
    /// redirect back to that device), `XDP_REDIRECT` goes where `bpf_redirect`/`bpf_redirect_map`
    /// said, `XDP_PASS` hands the frame to the stack, `XDP_DROP` frees it. Frames are recycled
    /// (page pool) without being re-initialised when the program did not change them, so a
    /// program that rewrites frames must rewrite every field it changes. Returns the kernel's
    /// reported duration field. A veth peer receives such `ndo_xdp_xmit` frames only when it has
    /// an XDP program attached or GRO enabled.
    ///
    /// # Errors
    /// `EINVAL` on kernels without live mode, a frame shorter than 14 bytes, or `ENODEV` for an
    /// ifindex that does not exist in the caller's namespace.
    pub fn test_run_xdp_live(&self, ingress_ifindex: u32, data: &[u8], repeat: u32, batch_size: u32, flags: u32) -> Result<u32, BpfError> {
        let mut ctx = XdpMdCtx { data: 0, data_end: data.len() as u32, ingress_ifindex, ..Default::default() };
        let mut a = TestRunAttr {
            prog_fd: self.fd() as u32,
            data_size_in: data.len() as u32,
            data_in: data.as_ptr() as u64,
            repeat,
            ctx_size_in: std::mem::size_of::<XdpMdCtx>() as u32,
            ctx_in: &mut ctx as *mut XdpMdCtx as u64,
            flags: flags | BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size,
            ..Default::default()
        };
        if sys_bpf(BPF_PROG_TEST_RUN, &mut a) < 0 {
            return Err(BpfError::last("prog test run (live frames)"));
        }
        Ok(a.duration)
    }
}

/// How an XDP program is attached to a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpAttachMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`), before an skb exists: fastest, needs driver support.
    Native,
    /// Generic XDP (`XDP_FLAGS_SKB_MODE`) after skb allocation: works on any device.
    Skb,
}

impl XdpAttachMode {
    fn flags(self) -> u32 {
        match self {
            XdpAttachMode::Native => 1 << 2,
            XdpAttachMode::Skb => 1 << 1,
        }
    }
    /// `driver` or `skb`.
    pub fn name(self) -> &'static str {
        match self {
            XdpAttachMode::Native => "driver",
            XdpAttachMode::Skb => "skb",
        }
    }

    /// What to try after attaching in this mode failed with `errno`.
    pub fn attach_hint(self, errno: i32) -> &'static str {
        match (self, errno) {
            (_, libc::EBUSY | libc::EEXIST) => {
                "another XDP program is attached: see `ip link show`, remove it with `ip link set dev IFACE xdp off`"
            }
            (_, libc::EPERM | libc::EACCES) => "run as root (CAP_NET_ADMIN and CAP_BPF)",
            (XdpAttachMode::Native, _) => "the driver may lack native XDP: try `--mode skb`",
            (XdpAttachMode::Skb, _) => "check that the device is up and XDP is enabled in the kernel",
        }
    }
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    _rest: [u64; 2],
}

/// A BPF link: the program stays attached while the link's fd is open; drop detaches it.
#[derive(Debug)]
pub struct Link {
    fd: OwnedFd,
}

impl Link {
    /// Attaches an XDP program to interface `ifindex` (`BPF_LINK_CREATE`, attach type `BPF_XDP`).
    ///
    /// # Errors
    /// `EBUSY` when another XDP program is already attached to the device; `EOPNOTSUPP`/`EINVAL`
    /// when the driver has no native XDP (try [`XdpAttachMode::Skb`]); `ENODEV` for a bad ifindex.
    pub fn xdp(prog: &Prog, ifindex: u32, mode: XdpAttachMode) -> Result<Link, BpfError> {
        let mut a = LinkCreateAttr {
            prog_fd: prog.fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags: mode.flags(),
            ..Default::default()
        };
        Ok(Link { fd: fd_from(sys_bpf(BPF_LINK_CREATE, &mut a), "link create (xdp)")? })
    }

    /// Attaches a `SCHED_CLS` program to the ingress of interface `ifindex` (tcx,
    /// `BPF_LINK_CREATE` with `BPF_TCX_INGRESS`, after any programs already there).
    ///
    /// # Errors
    /// `EINVAL` on kernels without tcx (< 6.6); `ENODEV` for a bad ifindex.
    pub fn tcx_ingress(prog: &Prog, ifindex: u32) -> Result<Link, BpfError> {
        let mut a =
            LinkCreateAttr { prog_fd: prog.fd() as u32, target_ifindex: ifindex, attach_type: BPF_TCX_INGRESS, ..Default::default() };
        Ok(Link { fd: fd_from(sys_bpf(BPF_LINK_CREATE, &mut a), "link create (tcx ingress)")? })
    }

    /// Attaches a `SCHED_CLS` program to the egress of interface `ifindex` (tcx,
    /// `BPF_LINK_CREATE` with `BPF_TCX_EGRESS`, after any programs already there).
    ///
    /// # Errors
    /// `EINVAL` on kernels without tcx (< 6.6); `ENODEV` for a bad ifindex.
    pub fn tcx_egress(prog: &Prog, ifindex: u32) -> Result<Link, BpfError> {
        let mut a =
            LinkCreateAttr { prog_fd: prog.fd() as u32, target_ifindex: ifindex, attach_type: BPF_TCX_EGRESS, ..Default::default() };
        Ok(Link { fd: fd_from(sys_bpf(BPF_LINK_CREATE, &mut a), "link create (tcx egress)")? })
    }

    /// The link's fd.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::is_root;

    /// A BTF blob of three types: `[1] int`, `[2] func_proto (int) -> int`, `[3] func foo`.
    fn tiny_btf() -> Vec<u8> {
        let strs = b"\0int\0foo\0x\0";
        let mut types = Vec::new();
        let mut rec = |name: u32, info: u32, size: u32, tail: &[u32]| {
            for w in [name, info, size].iter().chain(tail) {
                types.extend_from_slice(&w.to_le_bytes());
            }
        };
        rec(1, 1 << 24, 4, &[32]); // INT "int", 32 bits
        rec(0, (13 << 24) | 1, 1, &[7, 1]); // FUNC_PROTO returning [1], one arg "x" of [1]
        rec(5, 12 << 24, 2, &[]); // FUNC "foo" of proto [2]
        let mut b = vec![0x9f, 0xeb, 1, 0];
        for w in [24u32, 0, types.len() as u32, types.len() as u32, strs.len() as u32] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(&types);
        b.extend_from_slice(strs);
        b
    }

    #[test]
    fn btf_func_id_finds_functions_by_name_only() {
        let b = tiny_btf();
        assert_eq!(btf_func_id(&b, "foo").unwrap(), Some(3));
        assert_eq!(btf_func_id(&b, "int").unwrap(), None, "a type of another kind is not a function");
        assert_eq!(btf_func_id(&b, "fo").unwrap(), None);
        // Damaged blobs are errors, never panics.
        assert!(btf_func_id(&b[..10], "foo").is_err());
        assert!(btf_func_id(&[0u8; 64], "foo").is_err());
        for n in 0..b.len() {
            let _ = btf_func_id(&b[..n], "foo");
        }
        // The running kernel's BTF has the kfunc the AF_XDP program uses (kernel >= 6.8).
        if std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            assert!(vmlinux_func_btf_id("bpf_xdp_metadata_rx_vlan_tag").unwrap().is_some());
        }
    }

    #[test]
    fn insn_encoding_matches_the_kernel_layout() {
        // `r2 = *(u32 *)(r1 + 16)` is 61 12 10 00 00 00 00 00 (llvm-objdump of the C equivalent).
        let i = Insn::ldx_w(R2, R1, 16);
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        assert_eq!((i.code, i.regs, i.off, i.imm), (0x61, 0x12, 16, 0));
        let [a, b] = Insn::ld_imm64(R1, 0x1122_3344_5566_7788);
        assert_eq!((a.code, a.regs, a.imm as u32, b.imm as u32), (0x18, 0x01, 0x5566_7788, 0x1122_3344));
        assert_eq!(Insn::ld_map_fd(R1, 7)[0].regs, 0x11);
        assert_eq!(Insn::exit().code, 0x95);
    }

    // The BPF tests need root; CI runs them as root. Without it they report and return.
    fn root_or_skip() -> bool {
        if !is_root() {
            eprintln!("not root: BPF test skipped");
        }
        is_root()
    }

    #[test]
    fn xdp_pass_program_loads_and_runs() {
        if !root_or_skip() {
            return;
        }
        let insns = [Insn::mov64_imm(R0, xdp_action::PASS), Insn::exit()];
        let prog = Prog::load(ProgType::XDP, &insns, "GPL", BPF_XDP, "fp_pass").unwrap();
        let frame = [0xabu8; 64];
        let mut out = [0u8; 128];
        let r = prog.test_run_xdp(&frame, Some(&mut out), 10).unwrap();
        assert_eq!(r.retval, xdp_action::PASS as u32);
        assert_eq!(r.data_len, 64);
        assert_eq!(&out[..64], &frame[..]);
    }

    #[test]
    fn program_writes_are_visible_in_test_run_output() {
        if !root_or_skip() {
            return;
        }
        // r2 = data; r3 = data_end; if r2 + 4 > r3 drop; *(u32*)data = 0x42424242; return TX.
        let insns = [
            Insn::ldx_w(R2, R1, xdp_md::DATA),
            Insn::ldx_w(R3, R1, xdp_md::DATA_END),
            Insn::mov64_reg(R4, R2),
            Insn::add64_imm(R4, 4),
            Insn::jgt_reg(R4, R3, 3),
            Insn::st_w(R2, 0, 0x4242_4242),
            Insn::mov64_imm(R0, xdp_action::TX),
            Insn::exit(),
            Insn::mov64_imm(R0, xdp_action::DROP),
            Insn::exit(),
        ];
        let prog = Prog::load(ProgType::XDP, &insns, "Dual MIT/GPL", BPF_XDP, "fp_wr").unwrap();
        let mut out = [0u8; 64];
        let r = prog.test_run_xdp(&[0u8; 60], Some(&mut out), 1).unwrap();
        assert_eq!(r.retval, xdp_action::TX as u32);
        assert_eq!(&out[..5], &[0x42, 0x42, 0x42, 0x42, 0]);
    }

    #[test]
    fn verifier_rejection_carries_the_log() {
        if !root_or_skip() {
            return;
        }
        // Reads r2 before writing it: the verifier says "R2 !read_ok".
        let insns = [Insn::mov64_reg(R0, R2), Insn::exit()];
        let e = Prog::load(ProgType::XDP, &insns, "GPL", BPF_XDP, "fp_bad").unwrap_err();
        assert_eq!(e.errno(), libc::EACCES);
        assert!(e.log.contains("R2"), "log: {}", e.log);
    }

    #[test]
    fn hash_map_update_lookup_delete() {
        if !root_or_skip() {
            return;
        }
        let m = Map::create(MapType::HASH, 4, 8, 16, "fp_h").unwrap();
        let k = 5u32.to_ne_bytes();
        let mut v = [0u8; 8];
        assert!(!m.lookup(&k, &mut v).unwrap());
        m.update(&k, &77u64.to_ne_bytes()).unwrap();
        assert!(m.lookup(&k, &mut v).unwrap());
        assert_eq!(u64::from_ne_bytes(v), 77);
        assert!(m.delete(&k).unwrap());
        assert!(!m.delete(&k).unwrap());
        assert!(m.update(&k, &[0u8; 4]).is_err());
    }
}
