//! AF_XDP ports: XSK sockets whose UMEM is the worker's packet pool.
//!
//! ```text
//!          pool region (UMEM): buffer i at i * 2048
//!   fill ring ──▶ kernel writes frames ──▶ rx ring ──▶ rx_burst: PktId(addr / 2048), off, len
//!   tx_burst: (i * 2048 + off, len) ──▶ tx ring ──▶ kernel sends ──▶ completion ring ──▶ pool.free
//! ```
//!
//! The XDP program (`bpf_redirect_map(&xsks, rx_queue_index, XDP_PASS)`, see
//! [`xsk_redirect_insns`]) is loaded and attached by us through `BPF_LINK_CREATE`, once per
//! interface and network namespace; each port puts its socket into the XSKMAP at its queue
//! index. The link is closed with the last port of the interface, and by the kernel if the
//! process dies, so no program is left behind.
//!
//! VLAN tags: XDP sees a frame before the stack takes its outer tag out, so a tag in the frame
//! reaches the socket. A tag the driver keeps outside the frame (a NIC's rx VLAN stripping; on
//! veth, a tag the sender pushed as skb metadata with tx-vlan offload on) does not; in native
//! mode, on a driver with the VLAN metadata kfunc (kernel ≥ 6.8: veth, mlx5, ice, …), the program
//! is [`xsk_redirect_vlan_insns`], which asks for it and writes it back after the MAC addresses.
//! In skb mode, or on other drivers, such a tag is lost ([`XdpModeInfo::vlan_restore`] is false);
//! `tests/vlan_rx.rs` shows both.
//!
//! All ports opened on one [`Pool`] share one UMEM registration (`XDP_SHARED_UMEM`): the first
//! socket registers the pool's region, later sockets bind with `sxdp_shared_umem_fd` and their
//! own fill/completion rings, as the kernel requires for a different device or queue
//! (`Documentation/networking/af_xdp.rst`, "XDP_SHARED_UMEM bind flag"). Zero copy is used
//! where the driver offers it (`ZeroCopy::Auto` tries it, then falls back to copy mode; veth
//! is copy only). With need_wakeup, the kernel says on the ring flags when a `sendto`/`recvfrom`
//! is required; copy-mode transmit always needs `sendto`, which sends up to 32 frames per call
//! (the kernel's `TX_BATCH_SIZE`), so a burst kicks until the tx ring is drained or the kernel
//! stops accepting.
//!
//! Contract: a pool with AF_XDP ports must outlive them (the kernel writes into the pool's pages
//! while a socket is open). [`XdpPort::close`] returns the buffers lent to the kernel (fill ring,
//! unread rx, unsent tx, unreaped completions) to the pool; a plain drop leaves them lent out.
//! Copy-mode frames the kernel had taken but not finished at close are lost to the pool.
//!
//! Thread: open/drop on the control path (any thread in the right network namespace); bursts
//! on the worker that owns the port.

mod mb;
mod ring;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};

use fastpath_packet::{Batch, PktId, Pool, BATCH_MAX, BUF_SIZE};

use crate::bpf::{
    self, helper, xdp_action, xdp_md, BpfError, Insn, Link, Map, MapType, Prog, ProgType, XdpAttachMode, R0, R1, R10, R2, R3, R6,
};
use crate::port::{ErrorLog, Port, PortStats};
use crate::sys;
use ring::{MmapOffsets, Ring, XdpDesc};

const AF_XDP: i32 = 44;
const SOL_XDP: i32 = 283;
const XDP_MMAP_OFFSETS: i32 = 1;
const XDP_RX_RING: i32 = 2;
const XDP_TX_RING: i32 = 3;
const XDP_UMEM_REG: i32 = 4;
const XDP_UMEM_FILL_RING: i32 = 5;
const XDP_UMEM_COMPLETION_RING: i32 = 6;
const XDP_STATISTICS: i32 = 7;
const XDP_OPTIONS: i32 = 8;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const XDP_PGOFF_RX_RING: i64 = 0;
const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;
const XDP_SHARED_UMEM: u16 = 1 << 0;
const XDP_COPY: u16 = 1 << 1;
const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// `XDP_USE_SG` (kernel ≥ 6.6): frames larger than a chunk arrive as descriptor chains.
const XDP_USE_SG: u16 = 1 << 4;
/// `XDP_PKT_CONTD` in a descriptor's options: the frame continues in the next descriptor.
const XDP_PKT_CONTD: u32 = 1;
const SO_PREFER_BUSY_POLL: i32 = 69;
const SO_BUSY_POLL_BUDGET: i32 = 70;
/// Queues an interface's XSKMAP can address.
const MAX_QUEUES: u32 = 256;
/// The fill ring is topped up once this many of its slots are free: one refill per few
/// received frames instead of a pool call on every poll.
const REFILL_MIN: u32 = 32;
/// Bytes the kernel reserves in front of every received frame (`XDP_PACKET_HEADROOM`).
pub const XDP_PACKET_HEADROOM: usize = 256;

/// `struct xdp_umem_reg`.
#[repr(C)]
#[derive(Default)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

/// `struct sockaddr_xdp`.
#[repr(C)]
#[derive(Default)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// The kernel's counters for one AF_XDP socket (`struct xdp_statistics`).
#[repr(C)]
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpStatistics {
    /// Frames dropped for other reasons than a full rx ring (e.g. no fill buffer in copy mode).
    pub rx_dropped: u64,
    /// Invalid descriptors on the rx side.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors we put on the tx ring.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the rx ring was full (we did not poll fast enough).
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when the kernel needed a buffer.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the tx ring was empty when the kernel looked.
    pub tx_ring_empty_descs: u64,
}

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Driver mode if the driver has it, else skb (generic) mode.
    #[default]
    Auto,
    /// Driver (native) mode only.
    Native,
    /// Generic (skb) mode: works on every device, slower.
    Skb,
}

/// Whether the socket may use zero copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ZeroCopy {
    /// Zero copy when the driver supports it, else copy mode.
    #[default]
    Auto,
    /// Zero copy or fail.
    Yes,
    /// Copy mode.
    No,
}

/// How to open an AF_XDP port.
///
/// Pool sizing: every port lends `fill_size` buffers to the kernel for as long as it is open,
/// and up to `tx_size` more sit in its tx/completion rings, so a worker's pool needs at least
/// `ports × (fill_size + tx_size) + 2 × BATCH_MAX` buffers (8192 for two default ports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpConfig {
    /// XDP attach mode.
    pub mode: XdpMode,
    /// Zero-copy policy.
    pub zero_copy: ZeroCopy,
    /// Use `XDP_USE_NEED_WAKEUP` (syscalls only when the kernel asks for them).
    pub need_wakeup: bool,
    /// Rx ring slots (power of two).
    pub rx_size: u32,
    /// Tx ring slots (power of two).
    pub tx_size: u32,
    /// Fill ring slots (power of two); this many pool buffers are lent to the kernel.
    pub fill_size: u32,
    /// Completion ring slots (power of two), at least `tx_size`.
    pub comp_size: u32,
    /// Extra UMEM headroom in bytes on top of the kernel's 256 (only the first port of a pool
    /// sets it).
    pub frame_headroom: u32,
    /// Busy polling (`SO_PREFER_BUSY_POLL` + `SO_BUSY_POLL` µs, budget 64), 0 = off: the
    /// device's NAPI then runs in the worker's `recvfrom`/`sendto` instead of softirq, on the
    /// worker's core (kernel `Documentation/networking/napi.rst`, "busy polling").
    pub busy_poll_us: u32,
    /// Multi-buffer receive for TCP senders that keep their offloads on (off by default): the
    /// socket is bound with `XDP_USE_SG` (kernel ≥ 6.6) and the redirect program loaded with
    /// `BPF_F_XDP_HAS_FRAGS`, so a frame larger than a buffer (a 64 KB TCP segment from a
    /// sender with TSO/GSO) arrives as a chain of descriptors instead of being dropped. An
    /// IPv4 TCP frame longer than the interface MTU is cut into MTU-sized segments with their
    /// checksums (software GSO); other chained frames are dropped and counted. TCP checksums
    /// the sender left partial (checksum offload) are completed. Only the port that registers
    /// the pool's UMEM decides; ports that share it follow. See docs/tcp-gso.md.
    pub multi_buffer: bool,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            mode: XdpMode::Auto,
            zero_copy: ZeroCopy::Auto,
            need_wakeup: true,
            rx_size: 2048,
            tx_size: 2048,
            fill_size: 2048,
            comp_size: 2048,
            frame_headroom: 0,
            busy_poll_us: 0,
            multi_buffer: false,
        }
    }
}

/// Why an AF_XDP port could not open. Each message says what to try.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// The interface does not exist (in this network namespace).
    #[error("af_xdp: no such interface `{iface}` (check `ip link`; is it in another network namespace?)")]
    NoSuchInterface {
        /// Interface name.
        iface: String,
    },
    /// Not allowed to create AF_XDP sockets or BPF objects.
    #[error("af_xdp on `{iface}`: permission denied ({what}): run as root, or grant CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF")]
    NotPermitted {
        /// Interface name.
        iface: String,
        /// The step that was refused.
        what: &'static str,
    },
    /// The kernel refused to attach the XDP program.
    #[error("af_xdp on `{iface}`: XDP program refused in {mode} mode: {err}; {hint}")]
    XdpRefused {
        /// Interface name.
        iface: String,
        /// `driver` or `skb`.
        mode: &'static str,
        /// The kernel's error.
        err: BpfError,
        /// What to try.
        hint: &'static str,
    },
    /// Zero copy was required but the driver does not offer it.
    #[error("af_xdp on `{iface}` queue {queue}: zero-copy refused ({err}); try `--zero-copy no`")]
    ZeroCopyUnavailable {
        /// Interface name.
        iface: String,
        /// Queue index.
        queue: u32,
        /// The kernel's error.
        err: io::Error,
    },
    /// The queue index is out of range for the device.
    #[error("af_xdp on `{iface}`: queue {queue} does not exist ({err}); see `ethtool -l {iface}`")]
    NoSuchQueue {
        /// Interface name.
        iface: String,
        /// Queue index.
        queue: u32,
        /// The kernel's error.
        err: io::Error,
    },
    /// Another AF_XDP socket is bound to the queue.
    #[error("af_xdp on `{iface}`: queue {queue} is taken by another AF_XDP socket ({err}); is another fastpath running?")]
    QueueBusy {
        /// Interface name.
        iface: String,
        /// Queue index.
        queue: u32,
        /// The kernel's error.
        err: io::Error,
    },
    /// A configuration value the kernel cannot take.
    #[error("af_xdp on `{iface}`: bad config: {what}")]
    BadConfig {
        /// Interface name.
        iface: String,
        /// What is wrong.
        what: &'static str,
    },
    /// Any other failed system call.
    #[error("af_xdp on `{iface}`: {what}: {err}")]
    Sys {
        /// Interface name.
        iface: String,
        /// The step that failed.
        what: &'static str,
        /// The OS error.
        err: io::Error,
    },
}

fn sys_err(iface: &str, what: &'static str, err: io::Error) -> XdpError {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => XdpError::NotPermitted { iface: iface.into(), what },
        _ => XdpError::Sys { iface: iface.into(), what, err },
    }
}

/// The AF_XDP redirect program: `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`.
/// Frames on queues without a socket in `xsks` go to the kernel stack.
pub fn xsk_redirect_insns(xsks_map_fd: RawFd) -> [Insn; 6] {
    let [ld0, ld1] = Insn::ld_map_fd(R1, xsks_map_fd);
    [
        Insn::ldx_w(R2, R1, xdp_md::RX_QUEUE_INDEX),
        ld0,
        ld1,
        Insn::mov64_imm(R3, xdp_action::PASS),
        Insn::call(helper::REDIRECT_MAP),
        Insn::exit(),
    ]
}

/// The kfunc through which a driver hands over the VLAN tag it keeps outside the frame
/// (kernel ≥ 6.8; veth, mlx5, ice, …): `int bpf_xdp_metadata_rx_vlan_tag(const struct xdp_md
/// *ctx, __be16 *vlan_proto, u16 *vlan_tci)`.
const RX_VLAN_TAG_KFUNC: &str = "bpf_xdp_metadata_rx_vlan_tag";

/// The redirect program of [`xsk_redirect_insns`], plus: when the driver holds a VLAN tag
/// outside the frame (`kfunc_id` is the BTF id of `bpf_xdp_metadata_rx_vlan_tag`), the tag is
/// written back into the frame, after the MAC addresses, before the frame goes to the socket.
/// Only frames for a queue that has a socket are touched; the others go to the stack as they
/// came. Needs a program bound to the device (native mode).
///
/// ```text
///   if rx_vlan_tag(ctx, &proto, &tci) == 0:          (untagged frames: this call only)
///       if !xsks[queue]                              -> XDP_PASS, frame untouched
///       if adjust_head(ctx, -4) == 0:
///           if data + 16 > data_end                  -> adjust_head(ctx, 4)  (cannot happen)
///           else data[0..12] = data[4..16]; data[12..14] = proto; data[14..16] = htons(tci)
///   return bpf_redirect_map(&xsks, queue, XDP_PASS)
/// ```
pub fn xsk_redirect_vlan_insns(xsks_map_fd: RawFd, kfunc_id: u32) -> [Insn; 49] {
    let [m0, m1] = Insn::ld_map_fd(R1, xsks_map_fd);
    let head = [
        Insn::mov64_reg(R6, R1), // 0: r6 = ctx
        Insn::ldx_w(R2, R6, xdp_md::RX_QUEUE_INDEX),
        Insn::stx_w(R10, R2, -4), // 2: key = queue, at fp-4
        Insn::st_w(R10, -8, 0),   // 3: proto at fp-8, tci at fp-6
        Insn::mov64_reg(R1, R6),
        Insn::mov64_reg(R2, R10),
        Insn::add64_imm(R2, -8),
        Insn::mov64_reg(R3, R10),
        Insn::add64_imm(R3, -6),
        Insn::call_kfunc(kfunc_id),
        Insn::jne_imm(R0, 0, 30), // 10: no tag held outside the frame -> 41
        m0,
        m1,
        Insn::mov64_reg(R2, R10),
        Insn::add64_imm(R2, -4),
        Insn::call(helper::MAP_LOOKUP_ELEM),
        Insn::jeq_imm(R0, 0, 30), // 16: no socket on this queue -> 47 (pass, untouched)
    ];
    let tail = [
        Insn::ldx_w(R2, R10, -4), // 41: redirect
        m0,
        m1,
        Insn::mov64_imm(R3, xdp_action::PASS),
        Insn::call(helper::REDIRECT_MAP),
        Insn::exit(),
        Insn::mov64_imm(R0, xdp_action::PASS), // 47
        Insn::exit(),
    ];
    let mut out = [Insn::default(); 49];
    out[..17].copy_from_slice(&head);
    out[17..41].copy_from_slice(&bpf::reinsert_vlan_tag());
    out[41..].copy_from_slice(&tail);
    out
}

/// Loads [`xsk_redirect_vlan_insns`] bound to `ifindex`, or `None` when the kernel or the driver
/// cannot (no BTF, no such kfunc, a driver without the VLAN metadata kfunc): the plain program
/// is used then and a tag the driver keeps outside the frame is lost (docs/cli.md, VLAN tags).
fn load_vlan_redirect(map: &Map, ifindex: u32) -> Option<Prog> {
    let id = bpf::vmlinux_func_btf_id(RX_VLAN_TAG_KFUNC).ok()??;
    let insns = xsk_redirect_vlan_insns(map.fd(), id);
    Prog::load_on(ProgType::XDP, &insns, "GPL", bpf::BPF_XDP, "fp_xsk_vlan", bpf::BPF_F_XDP_DEV_BOUND_ONLY, ifindex).ok()
}

// ---------------------------------------------------------------------------------------------
// Per-interface XDP program + XSKMAP, shared by the ports of that interface.

/// The redirect program attached to one interface, with its XSKMAP.
struct IfaceXdp {
    map: Map,
    _prog: Prog,
    _link: Link,
    mode: XdpAttachMode,
    /// The program puts a tag the driver kept outside the frame back ([`xsk_redirect_vlan_insns`]).
    vlan_restore: bool,
}

type IfaceKey = (u64, u32);
static IFACES: Mutex<Vec<(IfaceKey, Weak<IfaceXdp>)>> = Mutex::new(Vec::new());

fn attach_iface(iface: &str, ifindex: u32, mode: XdpMode, frags: bool) -> Result<Arc<IfaceXdp>, XdpError> {
    let key = (sys::netns_id(), ifindex);
    let mut reg = IFACES.lock().unwrap_or_else(|p| p.into_inner());
    reg.retain(|(_, w)| w.strong_count() > 0);
    if let Some(a) = reg.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade()) {
        return Ok(a);
    }
    let bpf_err = |e: BpfError, what| {
        if matches!(e.errno(), libc::EPERM | libc::EACCES) {
            XdpError::NotPermitted { iface: iface.into(), what }
        } else {
            XdpError::Sys { iface: iface.into(), what, err: io::Error::other(e.to_string()) }
        }
    };
    let map = Map::create(MapType::XSKMAP, 4, 4, MAX_QUEUES, "fp_xsks").map_err(|e| bpf_err(e, "creating the XSKMAP"))?;
    // Multi-buffer: the program takes frames in several buffers (it reads none of their bytes).
    let frag_flag = if frags { bpf::BPF_F_XDP_HAS_FRAGS } else { 0 };
    let prog = Prog::load_with_flags(ProgType::XDP, &xsk_redirect_insns(map.fd()), "GPL", bpf::BPF_XDP, "fp_xsk_redir", frag_flag)
        .map_err(|e| bpf_err(e, "loading the XDP redirect program"))?;
    // Native mode on a driver with the VLAN metadata kfunc: the program that puts a tag held
    // outside the frame back into it. A device-bound program cannot run in skb mode.
    let mut vlan_prog = if mode == XdpMode::Skb || frags { None } else { load_vlan_redirect(&map, ifindex) };
    let mut prog = Some(prog);
    let tries: &[XdpAttachMode] = match mode {
        XdpMode::Auto => &[XdpAttachMode::Native, XdpAttachMode::Skb],
        XdpMode::Native => &[XdpAttachMode::Native],
        XdpMode::Skb => &[XdpAttachMode::Skb],
    };
    let mut last = None;
    // A program we detached a moment ago can still be attached while a forked child (any
    // `Command` spawned by another thread) holds a copy of the link fd until it execs, so
    // EBUSY/EEXIST is retried briefly before it is reported as a foreign program.
    for _ in 0..25 {
        for &m in tries {
            let vlan_restore = m == XdpAttachMode::Native && vlan_prog.is_some();
            let slot = if vlan_restore { &mut vlan_prog } else { &mut prog };
            let Some(p) = slot.as_ref() else { continue };
            match Link::xdp(p, ifindex, m) {
                Ok(link) => {
                    let Some(p) = slot.take() else { continue };
                    let a = Arc::new(IfaceXdp { map, _prog: p, _link: link, mode: m, vlan_restore });
                    reg.push((key, Arc::downgrade(&a)));
                    return Ok(a);
                }
                Err(e) => last = Some((m, e)),
            }
        }
        match &last {
            Some((_, e)) if matches!(e.errno(), libc::EBUSY | libc::EEXIST) => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => break,
        }
    }
    let Some((m, err)) = last else {
        return Err(XdpError::BadConfig { iface: iface.into(), what: "no XDP mode to try" });
    };
    if matches!(err.errno(), libc::EPERM | libc::EACCES) {
        return Err(XdpError::NotPermitted { iface: iface.into(), what: "attaching the XDP program" });
    }
    let hint = m.attach_hint(err.errno());
    Err(XdpError::XdpRefused { iface: iface.into(), mode: m.name(), err, hint })
}

// ---------------------------------------------------------------------------------------------
// UMEM registration, one per pool.

/// The socket that registered a pool's region as UMEM; later sockets share it by its fd.
struct Umem {
    /// `None` only after [`XdpPort::close`] closed the last user.
    fd: Option<OwnedFd>,
    base: usize,
    zero_copy: bool,
    need_wakeup: bool,
    /// Bound with `XDP_USE_SG`: every socket sharing it receives descriptor chains.
    sg: bool,
}

static UMEMS: Mutex<Vec<(usize, Weak<Umem>)>> = Mutex::new(Vec::new());

fn xsk_socket(iface: &str) -> Result<OwnedFd, XdpError> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EAFNOSUPPORT) {
            return Err(XdpError::Sys { iface: iface.into(), what: "kernel has no AF_XDP (CONFIG_XDP_SOCKETS)", err: e });
        }
        return Err(sys_err(iface, "creating the AF_XDP socket", e));
    }
    // SAFETY: `fd` is a new socket that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setsockopt<T>(fd: RawFd, opt: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` points at a live `T` of the size passed.
    let r = unsafe { libc::setsockopt(fd, SOL_XDP, opt, (v as *const T).cast(), std::mem::size_of::<T>() as u32) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn getsockopt<T: Default>(fd: RawFd, opt: i32) -> io::Result<T> {
    let mut v = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is a live, writable `T`; `len` says how many bytes the kernel may write.
    let r = unsafe { libc::getsockopt(fd, SOL_XDP, opt, (&mut v as *mut T).cast(), &mut len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// The mode a port actually obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpModeInfo {
    /// Where the XDP program runs.
    pub attach: XdpAttachMode,
    /// True for zero copy, false for copy mode.
    pub zero_copy: bool,
    /// True when need_wakeup is in use.
    pub need_wakeup: bool,
    /// True when this socket shares a UMEM registered by another port of the same pool.
    pub shared_umem: bool,
    /// True when the XDP program writes a VLAN tag the driver kept outside the frame back into
    /// it (native mode on a driver with the VLAN metadata kfunc, kernel ≥ 6.8).
    pub vlan_restore: bool,
}

/// An AF_XDP port on one queue of one interface. Implements [`Port`].
pub struct XdpPort {
    // Field order is drop order: rings unmapped first, then our socket, then the UMEM owner
    // (if we were the last user), then the interface's program (if we were its last port).
    rx: Ring<XdpDesc>,
    tx: Ring<XdpDesc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    _own_fd: Option<OwnedFd>,
    fd: RawFd,
    umem: Arc<Umem>,
    attach: Arc<IfaceXdp>,
    name: String,
    queue: u32,
    info: XdpModeInfo,
    pool_base: usize,
    pool_cap: usize,
    busy_poll: bool,
    stats: PortStats,
    errlog: ErrorLog,
    /// Handles on their way between the pool and the fill/completion rings (allocated once).
    scratch: Box<[PktId; BATCH_MAX]>,
    /// Multi-buffer receive state, when the UMEM was bound with `XDP_USE_SG`.
    mb: Option<Box<MultiBuffer>>,
}

/// What multi-buffer receive did on one port ([`XdpPort::multi_buffer_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MultiBufferStats {
    /// Frames that arrived as a chain of descriptors (larger than one buffer).
    pub chains: u64,
    /// Frames longer than the MTU cut into segments (software GSO), and the segments made.
    pub segmented: u64,
    /// Segments made of them.
    pub segments: u64,
    /// TCP checksums completed (the sender left them partial).
    pub csum_completed: u64,
    /// Frames dropped: chained but not IPv4 TCP, or no room in the pool.
    pub dropped: u64,
}

/// Multi-buffer receive state: the gather buffer for chains (allocated once) and counters.
struct MultiBuffer {
    gather: Vec<u8>,
    /// The interface MTU: frames up to `14 + mtu` bytes pass as they are.
    mtu: usize,
    stats: MultiBufferStats,
}

/// Rx descriptors looked at per burst in multi-buffer mode: room for a whole 64 KB chain (37).
const MB_RX_WINDOW: u32 = 512;

/// The MTU of `iface` in the calling thread's network namespace (`SIOCGIFMTU`).
fn if_mtu(iface: &str) -> Option<usize> {
    // SAFETY: plain socket(2); checked below and closed before returning.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return None;
    }
    // SAFETY: ifreq is plain data; all zeros is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, &b) in ifr.ifr_name.iter_mut().zip(iface.as_bytes().iter().take(libc::IFNAMSIZ - 1)) {
        *d = b as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads the name and writes the MTU into the live `ifr`.
    let r = unsafe { libc::ioctl(s, libc::SIOCGIFMTU, &mut ifr) };
    // SAFETY: `s` is our own descriptor.
    unsafe { libc::close(s) };
    if r != 0 {
        return None;
    }
    // SAFETY: after a successful SIOCGIFMTU the union holds the MTU.
    Some(unsafe { ifr.ifr_ifru.ifru_mtu } as usize)
}

impl XdpPort {
    /// Opens an AF_XDP socket on `iface` queue `queue`, with `pool`'s region as UMEM (shared with
    /// every other port already open on `pool`), loads and attaches the redirect program if
    /// this is the interface's first port, and lends `fill_size` buffers to the kernel. Prints
    /// the mode obtained to stderr.
    ///
    /// Must be called from a thread in the interface's network namespace. `pool` must outlive
    /// the port.
    ///
    /// # Errors
    /// [`XdpError`]: no such interface or queue, not permitted, XDP refused (try `--mode skb`),
    /// zero copy refused (try `--zero-copy no`), bad ring sizes.
    pub fn open(iface: &str, queue: u32, cfg: &XdpConfig, pool: &mut Pool) -> Result<XdpPort, XdpError> {
        for s in [cfg.rx_size, cfg.tx_size, cfg.fill_size, cfg.comp_size] {
            if !s.is_power_of_two() {
                return Err(XdpError::BadConfig { iface: iface.into(), what: "ring sizes must be powers of two" });
            }
        }
        if cfg.comp_size < cfg.tx_size {
            return Err(XdpError::BadConfig { iface: iface.into(), what: "comp_size must be at least tx_size" });
        }
        if queue >= MAX_QUEUES {
            return Err(XdpError::BadConfig { iface: iface.into(), what: "queue index above 255" });
        }
        let idx = sys::ifindex(iface).map_err(|_| XdpError::NoSuchInterface { iface: iface.into() })?;
        let attach = attach_iface(iface, idx, cfg.mode, cfg.multi_buffer)?;
        let (base, len) = pool.region_raw();
        let base = base as usize;
        // A socket closed a moment ago releases its queue asynchronously (the kernel defers the
        // buffer pool's teardown to a workqueue), so a busy queue is retried briefly.
        let mut tries = 0;
        let mut port = loop {
            let r = match cfg.zero_copy {
                ZeroCopy::Yes => Self::try_open(iface, idx, queue, cfg, pool, &attach, XDP_ZEROCOPY),
                ZeroCopy::No => Self::try_open(iface, idx, queue, cfg, pool, &attach, XDP_COPY),
                ZeroCopy::Auto => match Self::try_open(iface, idx, queue, cfg, pool, &attach, XDP_ZEROCOPY) {
                    Err(XdpError::ZeroCopyUnavailable { .. }) => Self::try_open(iface, idx, queue, cfg, pool, &attach, XDP_COPY),
                    r => r,
                },
            };
            match r {
                Err(XdpError::QueueBusy { .. }) if tries < 25 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                r => break r?,
            }
        };
        port.pool_base = base;
        port.pool_cap = len / BUF_SIZE;
        // Publish the socket to the XDP program.
        let fd = port.fd as u32;
        attach.map.update(&queue.to_ne_bytes(), &fd.to_ne_bytes()).map_err(|e| XdpError::Sys {
            iface: iface.into(),
            what: "adding the socket to the XSKMAP",
            err: e.err,
        })?;
        port.refill(pool);
        let i = port.info;
        eprintln!(
            "fastpath: af_xdp {iface} queue {queue}: XDP {} mode, {}, need_wakeup {}{}",
            i.attach.name(),
            if i.zero_copy { "zero-copy" } else { "copy mode" },
            if i.need_wakeup { "on" } else { "off" },
            if i.shared_umem { ", shared UMEM" } else { "" },
        );
        Ok(port)
    }

    fn try_open(
        iface: &str,
        ifindex: u32,
        queue: u32,
        cfg: &XdpConfig,
        pool: &mut Pool,
        attach: &Arc<IfaceXdp>,
        copy_flag: u16,
    ) -> Result<XdpPort, XdpError> {
        let (base_ptr, len) = pool.region_raw();
        let base = base_ptr as usize;
        let mut umems = UMEMS.lock().unwrap_or_else(|p| p.into_inner());
        umems.retain(|(_, w)| w.strong_count() > 0);
        let existing = umems.iter().find(|(b, _)| *b == base).and_then(|(_, w)| w.upgrade()).filter(|u| u.fd.is_some());

        let sock = xsk_socket(iface)?;
        let fd = sock.as_raw_fd();
        let e = |what| move |err| sys_err(iface, what, err);
        if existing.is_none() {
            let reg = UmemReg {
                addr: base as u64,
                len: len as u64,
                chunk_size: BUF_SIZE as u32,
                headroom: cfg.frame_headroom,
                ..Default::default()
            };
            setsockopt(fd, XDP_UMEM_REG, &reg).map_err(e("registering the pool as UMEM (XDP_UMEM_REG)"))?;
        }
        setsockopt(fd, XDP_UMEM_FILL_RING, &cfg.fill_size).map_err(e("sizing the fill ring"))?;
        setsockopt(fd, XDP_UMEM_COMPLETION_RING, &cfg.comp_size).map_err(e("sizing the completion ring"))?;
        setsockopt(fd, XDP_RX_RING, &cfg.rx_size).map_err(e("sizing the rx ring"))?;
        setsockopt(fd, XDP_TX_RING, &cfg.tx_size).map_err(e("sizing the tx ring"))?;
        let off: MmapOffsets = getsockopt(fd, XDP_MMAP_OFFSETS).map_err(e("reading XDP_MMAP_OFFSETS"))?;
        let rx = Ring::map(fd, XDP_PGOFF_RX_RING, &off.rx, cfg.rx_size).map_err(e("mapping the rx ring"))?;
        let tx = Ring::map(fd, XDP_PGOFF_TX_RING, &off.tx, cfg.tx_size).map_err(e("mapping the tx ring"))?;
        let fill = Ring::map(fd, XDP_UMEM_PGOFF_FILL_RING, &off.fr, cfg.fill_size).map_err(e("mapping the fill ring"))?;
        let comp = Ring::map(fd, XDP_UMEM_PGOFF_COMPLETION_RING, &off.cr, cfg.comp_size).map_err(e("mapping the completion ring"))?;

        let mut sa = SockaddrXdp { family: AF_XDP as u16, ifindex, queue_id: queue, ..Default::default() };
        match &existing {
            Some(u) => {
                sa.flags = XDP_SHARED_UMEM;
                sa.shared_umem_fd = u.fd.as_ref().map_or(-1, |f| f.as_raw_fd()) as u32;
            }
            None => {
                sa.flags =
                    copy_flag | if cfg.need_wakeup { XDP_USE_NEED_WAKEUP } else { 0 } | if cfg.multi_buffer { XDP_USE_SG } else { 0 };
            }
        }
        // SAFETY: `sa` is a live sockaddr_xdp and its exact size is passed.
        let r = unsafe { libc::bind(fd, (&sa as *const SockaddrXdp).cast(), std::mem::size_of::<SockaddrXdp>() as u32) };
        if r < 0 {
            let err = io::Error::last_os_error();
            let errno = err.raw_os_error().unwrap_or(0);
            return Err(if copy_flag == XDP_ZEROCOPY && existing.is_none() && errno != libc::EBUSY {
                XdpError::ZeroCopyUnavailable { iface: iface.into(), queue, err }
            } else if errno == libc::EINVAL {
                XdpError::NoSuchQueue { iface: iface.into(), queue, err }
            } else if errno == libc::EBUSY {
                XdpError::QueueBusy { iface: iface.into(), queue, err }
            } else {
                sys_err(iface, "binding the AF_XDP socket", err)
            });
        }
        if cfg.busy_poll_us > 0 {
            let sol = |opt: i32, v: i32| -> io::Result<()> {
                // SAFETY: `v` is a live i32 and its size is passed.
                let r = unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, opt, (&v as *const i32).cast(), 4) };
                if r < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            };
            sol(SO_PREFER_BUSY_POLL, 1).map_err(e("SO_PREFER_BUSY_POLL"))?;
            sol(libc::SO_BUSY_POLL, cfg.busy_poll_us as i32).map_err(e("SO_BUSY_POLL"))?;
            sol(SO_BUSY_POLL_BUDGET, BATCH_MAX as i32 / 4).map_err(e("SO_BUSY_POLL_BUDGET"))?;
        }
        let opts: u32 = getsockopt(fd, XDP_OPTIONS).unwrap_or(0);
        let zero_copy = opts & XDP_OPTIONS_ZEROCOPY != 0;
        let (umem, own_fd, shared) = match existing {
            Some(u) => (u, Some(sock), true),
            None => {
                let u = Arc::new(Umem { fd: Some(sock), base, zero_copy, need_wakeup: cfg.need_wakeup, sg: cfg.multi_buffer });
                umems.push((base, Arc::downgrade(&u)));
                (u, None, false)
            }
        };
        let umem_sg = umem.sg;
        let info = XdpModeInfo {
            attach: attach.mode,
            zero_copy: umem.zero_copy && zero_copy,
            need_wakeup: umem.need_wakeup,
            shared_umem: shared,
            vlan_restore: attach.vlan_restore,
        };
        Ok(XdpPort {
            rx,
            tx,
            fill,
            comp,
            _own_fd: own_fd,
            fd,
            umem,
            attach: Arc::clone(attach),
            name: iface.to_string(),
            queue,
            info,
            pool_base: base,
            pool_cap: len / BUF_SIZE,
            busy_poll: cfg.busy_poll_us > 0,
            stats: PortStats::default(),
            errlog: ErrorLog::default(),
            scratch: Box::new([PktId(0); BATCH_MAX]),
            mb: if umem_sg {
                Some(Box::new(MultiBuffer {
                    gather: Vec::with_capacity(mb::GATHER_MAX),
                    mtu: if_mtu(iface).unwrap_or(1500),
                    stats: MultiBufferStats::default(),
                }))
            } else {
                None
            },
        })
    }

    /// The mode obtained (driver/skb, copy/zero copy, need_wakeup, shared UMEM).
    pub fn mode_info(&self) -> XdpModeInfo {
        self.info
    }

    /// The queue index the socket is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Multi-buffer receive counters; `None` when the port was not opened with
    /// [`XdpConfig::multi_buffer`] (or shares a UMEM registered without it).
    pub fn multi_buffer_stats(&self) -> Option<MultiBufferStats> {
        self.mb.as_ref().map(|m| m.stats)
    }

    /// Queues one frame made of several buffers, in order, as a descriptor chain (every
    /// descriptor but the last flagged `XDP_PKT_CONTD`), and asks the kernel to send it. Only
    /// on a port with multi-buffer ([`XdpConfig::multi_buffer`]); returns false (nothing
    /// queued, the buffers stay the caller's) without it, when a buffer is empty or the tx ring
    /// has too little room. The kernel makes one skb of the chain (`xsk_build_skb`, copy mode)
    /// with at most `MAX_SKB_FRAGS` (17) frags, so a chain of more than 18 buffers is dropped
    /// by the kernel (counted in `tx_dropped`); the skb carries no GSO metadata, so the frame
    /// must fit the peer's MTU. See docs/tcp-gso.md.
    pub fn tx_chain(&mut self, pool: &mut Pool, pkts: &[PktId]) -> bool {
        if self.mb.is_none() || pkts.is_empty() || !self.same_pool(pool) || pkts.iter().any(|&h| pool.len(h) == 0) {
            return false;
        }
        self.reap_completions(pool);
        let n = pkts.len() as u32;
        if self.tx.prod_free(n) < n {
            return false;
        }
        let mut bytes = 0u64;
        for (i, &h) in pkts.iter().enumerate() {
            let len = pool.len(h);
            let addr = (h.index() * BUF_SIZE + pool.headroom(h)) as u64;
            let options = if i + 1 < pkts.len() { XDP_PKT_CONTD } else { 0 };
            self.tx.prod_write(i as u32, XdpDesc { addr, len: len as u32, options });
            bytes += len as u64;
        }
        self.tx.prod_submit(n);
        self.kick_tx();
        self.stats.tx_pkts += 1;
        self.stats.tx_bytes += bytes;
        true
    }

    /// [`Port::rx_burst`] with `XDP_USE_SG`: a frame may span several descriptors. Whole chains
    /// only: a chain not yet complete in the ring, or whose segments would not fit the batch,
    /// waits for the next burst.
    /// Returns (packets pushed, their bytes, descriptors available).
    fn rx_burst_mb(&mut self, pool: &mut Pool, batch: &mut Batch, port_id: u16) -> (usize, u64, u32) {
        let Some(mb) = self.mb.as_deref_mut() else { return (0, 0, 0) };
        let n = self.rx.cons_avail(MB_RX_WINDOW);
        let start = batch.len();
        let mut bytes = 0u64;
        let mut i = 0u32;
        while i < n && batch.len() < BATCH_MAX {
            // The chain i..j.
            let mut j = i;
            let mut total = 0usize;
            let mut complete = false;
            while j < n {
                let d = self.rx.cons_read(j);
                j += 1;
                total += d.len as usize;
                if d.options & XDP_PKT_CONTD == 0 {
                    complete = true;
                    break;
                }
            }
            if !complete {
                break;
            }
            let first = self.rx.cons_read(i);
            let single = j - i == 1;
            let idx0 = first.addr as usize / BUF_SIZE;
            // One buffer longer than the MTU that is not IPv4 TCP: nothing to cut, it passes
            // as it would without multi-buffer.
            let pass_long = single
                && total > 14 + mb.mtu
                && idx0 < self.pool_cap
                && pool.set_bounds(PktId(idx0 as u32), first.addr as usize % BUF_SIZE, first.len as usize)
                && mb::parse_tcp4(pool.data(PktId(idx0 as u32))).is_none();
            if single && (total <= 14 + mb.mtu || pass_long) {
                // One buffer that fits the MTU: as without multi-buffer, plus the checksum check.
                let idx = first.addr as usize / BUF_SIZE;
                let h = PktId(idx as u32);
                if idx >= self.pool_cap || !pool.set_bounds(h, first.addr as usize % BUF_SIZE, first.len as usize) {
                    self.stats.errors += 1;
                    if idx < self.pool_cap {
                        pool.free(h);
                    }
                    i = j;
                    continue;
                }
                if mb::complete_partial_csum(pool.data_mut(h)) {
                    mb.stats.csum_completed += 1;
                }
                batch.push(h, port_id);
                bytes += u64::from(first.len);
                i = j;
                continue;
            }
            // Larger than the MTU: gather the chain, then cut it into segments. Enough room in
            // the batch for the most segments it can make (headers of at most 120 bytes), or
            // it waits for the next burst.
            let seg_payload = (mb.mtu.min(fastpath_packet::pool::MAX_FRAME - 14)).saturating_sub(120).max(1);
            let need = total.div_ceil(seg_payload) + 1;
            if need > BATCH_MAX - batch.len() && need <= BATCH_MAX {
                break;
            }
            // (A chain that could not fit even an empty batch, at a tiny MTU, is gathered and
            // then dropped by `segment_tcp4`, so the ring never stalls on it.)
            if j - i > 1 {
                mb.stats.chains += 1;
            }
            mb.gather.clear();
            for k in i..j {
                let d = self.rx.cons_read(k);
                let idx = d.addr as usize / BUF_SIZE;
                if idx >= self.pool_cap {
                    self.stats.errors += 1;
                    continue;
                }
                let h = PktId(idx as u32);
                if pool.set_bounds(h, d.addr as usize % BUF_SIZE, d.len as usize) && mb.gather.len() + pool.len(h) <= mb::GATHER_MAX {
                    mb.gather.extend_from_slice(pool.data(h));
                }
                pool.free(h);
            }
            let t = mb::parse_tcp4(&mb.gather);
            match t {
                Some(t) => {
                    let mss = mb::mss_for(&t, mb.mtu);
                    let got = mb::segment_tcp4(&mb.gather, &t, mss, pool, batch, port_id);
                    if got == 0 {
                        mb.stats.dropped += 1;
                    } else {
                        mb.stats.segmented += 1;
                        mb.stats.segments += got as u64;
                        bytes += (mb.gather.len() + (got - 1) * (t.payload)) as u64;
                    }
                }
                None => mb.stats.dropped += 1,
            }
            i = j;
        }
        if i > 0 {
            self.rx.cons_release(i);
        }
        (batch.len() - start, bytes, n)
    }

    /// True when `pool` is the pool this port's UMEM is.
    #[inline]
    fn same_pool(&self, pool: &mut Pool) -> bool {
        pool.region_raw().0 as usize == self.pool_base && self.umem.base == self.pool_base
    }

    /// Tops the fill ring up with free pool buffers, once at least [`REFILL_MIN`] slots are
    /// free (a poll that received nothing leaves it alone). Handles pass through the port's
    /// scratch array: a fresh `[PktId; BATCH_MAX]` here was a 1 KiB `memset` on every poll,
    /// 7.6 % of a live worker's time (perf, 64 B l2fwd on veth).
    fn refill(&mut self, pool: &mut Pool) {
        loop {
            let free = self.fill.prod_free(REFILL_MIN) as usize;
            if free < REFILL_MIN as usize {
                return;
            }
            let want = free.min(BATCH_MAX);
            let n = pool.alloc_burst(&mut self.scratch[..want]);
            for (i, h) in self.scratch[..n].iter().enumerate() {
                self.fill.prod_write(i as u32, (h.index() * BUF_SIZE) as u64);
            }
            if n > 0 {
                self.fill.prod_submit(n as u32);
            }
            if n < want || n < BATCH_MAX {
                return;
            }
        }
    }

    /// Frees transmitted buffers back to the pool.
    fn reap_completions(&mut self, pool: &mut Pool) {
        loop {
            let n = self.comp.cons_avail(BATCH_MAX as u32);
            if n == 0 {
                return;
            }
            for i in 0..n {
                let idx = self.comp.cons_read(i) as usize / BUF_SIZE;
                self.scratch[i as usize] = PktId(idx as u32);
            }
            self.comp.cons_release(n);
            pool.free_bulk(&self.scratch[..n as usize]);
        }
    }

    /// Asks the kernel to send what is in the tx ring. Copy mode sends at most 32 frames per
    /// call, so this kicks until the ring is drained or the kernel stops making progress.
    fn kick_tx(&mut self) {
        if self.info.need_wakeup && !self.tx.needs_wakeup() {
            return;
        }
        let max_kicks = self.tx.size() / 32 + 2;
        for _ in 0..max_kicks {
            if self.tx.prod_pending() == 0 {
                return;
            }
            // SAFETY: sendto with no buffer and no address: a wakeup on our own socket.
            let r = unsafe { libc::sendto(self.fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
            if r < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    // More to send (budget used up): kick again.
                    Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                    // Device busy or completion ring full: try on the next burst.
                    Some(libc::EBUSY) | Some(libc::ENOBUFS) => return,
                    _ => {
                        self.stats.errors += 1;
                        self.errlog.error(&self.name, "sendto (tx wakeup)", &io::Error::last_os_error());
                        return;
                    }
                }
            }
        }
    }

    /// Closes the port and gives back to `pool` every buffer the kernel no longer holds: those
    /// still in the fill ring, received but not taken, queued but not sent, and sent but not
    /// yet reaped. Returns how many. (Plain `drop` leaves them lent out.) When other ports still
    /// share this port's UMEM registration, its socket cannot close yet and only the
    /// completion ring is reaped. Control path.
    pub fn close(mut self, pool: &mut Pool) -> usize {
        if !self.same_pool(pool) {
            return 0;
        }
        let _ = self.attach.map.delete(&self.queue.to_ne_bytes());
        // Quiesce: closing the socket unbinds it and waits for in-flight NAPI (the kernel's
        // `xsk_release` calls `synchronize_net`), after which the rings are only ours.
        let closed = if let Some(fd) = self._own_fd.take() {
            drop(fd);
            true
        } else {
            // We own the UMEM socket: close it if no other port shares it. `get_mut` needs the
            // registry's weak reference gone too.
            let mut umems = UMEMS.lock().unwrap_or_else(|p| p.into_inner());
            if Arc::strong_count(&self.umem) == 1 {
                umems.retain(|(_, w)| !std::ptr::eq(w.as_ptr(), Arc::as_ptr(&self.umem)));
            }
            drop(umems);
            match Arc::get_mut(&mut self.umem) {
                Some(u) => {
                    u.fd = None;
                    true
                }
                None => false,
            }
        };
        let mut ids: Vec<PktId> = Vec::new();
        let chunk = |addr: u64| PktId((addr as usize / BUF_SIZE) as u32);
        let cap = self.pool_cap;
        if closed {
            self.fill.for_each_leftover(true, |a| ids.push(chunk(a)));
            self.rx.for_each_leftover(false, |d| ids.push(chunk(d.addr)));
            self.tx.for_each_leftover(true, |d| ids.push(chunk(d.addr)));
            self.comp.for_each_leftover(false, |a| ids.push(chunk(a)));
        } else {
            self.reap_completions(pool);
        }
        ids.retain(|h| h.index() < cap);
        pool.free_bulk(&ids);
        ids.len()
    }

    /// The kernel's counters for this socket (`XDP_STATISTICS`; zeros if it cannot be read).
    /// Control path: one system call.
    pub fn xdp_stats(&self) -> XdpStatistics {
        getsockopt(self.fd, XDP_STATISTICS).unwrap_or_default()
    }
}

impl Port for XdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut Pool, batch: &mut Batch, port_id: u16) -> usize {
        if !self.same_pool(pool) {
            self.stats.errors += 1;
            return 0;
        }
        self.reap_completions(pool);
        if self.mb.is_some() {
            let (got, bytes, n) = self.rx_burst_mb(pool, batch, port_id);
            self.refill(pool);
            if n == 0 && (self.busy_poll || (self.info.need_wakeup && self.fill.needs_wakeup())) {
                // SAFETY: recvfrom with no buffer: a wakeup on our own socket.
                unsafe {
                    libc::recvfrom(self.fd, std::ptr::null_mut(), 0, libc::MSG_DONTWAIT, std::ptr::null_mut(), std::ptr::null_mut());
                }
            }
            self.stats.rx_pkts += got as u64;
            self.stats.rx_bytes += bytes;
            return got;
        }
        let room = (BATCH_MAX - batch.len()) as u32;
        let n = self.rx.cons_avail(room);
        let mut bytes = 0u64;
        let mut got = 0usize;
        for i in 0..n {
            let d = self.rx.cons_read(i);
            let idx = d.addr as usize / BUF_SIZE;
            let off = d.addr as usize % BUF_SIZE;
            if idx >= self.pool_cap {
                // Cannot happen with a well-behaved kernel; never index the pool with it.
                self.stats.errors += 1;
                continue;
            }
            let h = PktId(idx as u32);
            if !pool.set_bounds(h, off, d.len as usize) {
                self.stats.errors += 1;
                pool.free(h);
                continue;
            }
            batch.push(h, port_id);
            bytes += u64::from(d.len);
            got += 1;
        }
        if n > 0 {
            self.rx.cons_release(n);
        }
        self.refill(pool);
        if n == 0 && (self.busy_poll || (self.info.need_wakeup && self.fill.needs_wakeup())) {
            // SAFETY: recvfrom with no buffer: a wakeup on our own socket.
            unsafe {
                libc::recvfrom(self.fd, std::ptr::null_mut(), 0, libc::MSG_DONTWAIT, std::ptr::null_mut(), std::ptr::null_mut());
            }
        }
        self.stats.rx_pkts += got as u64;
        self.stats.rx_bytes += bytes;
        got
    }

    fn tx_burst(&mut self, pool: &mut Pool, pkts: &[PktId]) -> usize {
        if !self.same_pool(pool) {
            self.stats.errors += 1;
            return 0;
        }
        self.reap_completions(pool);
        let mut n = (pkts.len() as u32).min(self.tx.prod_free(pkts.len() as u32));
        let mut bytes = 0u64;
        for (i, &h) in pkts[..n as usize].iter().enumerate() {
            let len = pool.len(h);
            if len == 0 {
                // The kernel would count an empty descriptor invalid and never complete it, so
                // the buffer would leak: refuse it (and the rest) and leave them to the caller.
                n = i as u32;
                break;
            }
            let addr = (h.index() * BUF_SIZE + pool.headroom(h)) as u64;
            self.tx.prod_write(i as u32, XdpDesc { addr, len: len as u32, options: 0 });
            bytes += len as u64;
        }
        if n > 0 {
            self.tx.prod_submit(n);
        }
        self.kick_tx();
        self.stats.tx_pkts += u64::from(n);
        self.stats.tx_bytes += bytes;
        n as usize
    }

    fn flush(&mut self, pool: &mut Pool) -> io::Result<()> {
        if self.same_pool(pool) {
            self.kick_tx();
            self.reap_completions(pool);
        }
        Ok(())
    }

    fn stats(&self) -> PortStats {
        let k = self.xdp_stats();
        let mb_dropped = self.mb.as_ref().map_or(0, |m| m.stats.dropped);
        PortStats {
            rx_dropped: k.rx_dropped + k.rx_ring_full + k.rx_invalid_descs + mb_dropped,
            tx_dropped: k.tx_invalid_descs,
            ..self.stats
        }
    }
}

impl Drop for XdpPort {
    fn drop(&mut self) {
        // Name the kernel's losses once, at close (control path): which ring ran short tells
        // a slow worker (rx ring full) from a starved pool (fill ring empty).
        let k = self.xdp_stats();
        if k != XdpStatistics::default() {
            eprintln!(
                "fastpath: af_xdp {} queue {}: kernel counters: rx_dropped {} rx_ring_full {} rx_fill_ring_empty {} rx_invalid {} tx_invalid {} tx_ring_empty {}",
                self.name, self.queue, k.rx_dropped, k.rx_ring_full, k.rx_fill_ring_empty_descs, k.rx_invalid_descs, k.tx_invalid_descs, k.tx_ring_empty_descs
            );
        }
        // Stop the program redirecting into a socket nobody reads. An error here means the map
        // entry is already gone.
        let _ = self.attach.map.delete(&self.queue.to_ne_bytes());
    }
}

impl std::fmt::Debug for XdpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpPort").field("name", &self.name).field("queue", &self.queue).field("info", &self.info).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_struct_sizes() {
        assert_eq!(std::mem::size_of::<UmemReg>(), 32);
        assert_eq!(std::mem::size_of::<SockaddrXdp>(), 16);
        assert_eq!(std::mem::size_of::<XdpDesc>(), 16);
        assert_eq!(std::mem::size_of::<MmapOffsets>(), 128);
        assert_eq!(std::mem::size_of::<XdpStatistics>(), 48);
    }

    #[test]
    fn missing_interface_is_named_in_the_error() {
        let mut pool = Pool::new(64);
        let e = XdpPort::open("fp-nonexistent0", 0, &XdpConfig::default(), &mut pool).unwrap_err();
        assert!(matches!(e, XdpError::NoSuchInterface { .. }), "{e}");
        assert!(e.to_string().contains("no such interface `fp-nonexistent0`"), "{e}");
    }

    #[test]
    fn bad_ring_size_is_refused_before_any_syscall() {
        let mut pool = Pool::new(64);
        let cfg = XdpConfig { rx_size: 1000, ..XdpConfig::default() };
        let e = XdpPort::open("lo", 0, &cfg, &mut pool).unwrap_err();
        assert!(matches!(e, XdpError::BadConfig { .. }), "{e}");
    }

    #[test]
    fn xsk_vlan_program_falls_back_where_the_driver_has_no_metadata_kfuncs() {
        if !sys::is_root() {
            eprintln!("not root: BPF test skipped");
            return;
        }
        // This kernel (6.18) has the kfunc. Loopback (ifindex 1) has no XDP metadata ops: the
        // kernel refuses a program bound to it, so the plain redirect program is used there.
        // veth accepts it (tests/vlan_rx.rs checks `vlan_restore` and the frames).
        let id = bpf::vmlinux_func_btf_id(RX_VLAN_TAG_KFUNC).unwrap().expect("kernel >= 6.8 has the VLAN metadata kfunc");
        let map = Map::create(MapType::XSKMAP, 4, 4, 4, "fp_xsks").unwrap();
        let insns = xsk_redirect_vlan_insns(map.fd(), id);
        let e = Prog::load_on(ProgType::XDP, &insns, "GPL", bpf::BPF_XDP, "fp_xsk_vlan", bpf::BPF_F_XDP_DEV_BOUND_ONLY, 1).unwrap_err();
        assert_eq!(e.errno(), libc::EOPNOTSUPP, "{e}");
        assert!(load_vlan_redirect(&map, 1).is_none());
        // Unbound, the kfunc call itself is refused.
        assert!(Prog::load(ProgType::XDP, &insns, "GPL", bpf::BPF_XDP, "fp_xsk_vlan").is_err());
    }

    #[test]
    fn xsk_redirect_program_verifies_and_passes_without_socket() {
        if !sys::is_root() {
            eprintln!("not root: BPF test skipped");
            return;
        }
        let map = Map::create(MapType::XSKMAP, 4, 4, 4, "fp_xsks").unwrap();
        let prog = Prog::load(ProgType::XDP, &xsk_redirect_insns(map.fd()), "GPL", bpf::BPF_XDP, "fp_xsk").unwrap();
        // XSKMAP values must be AF_XDP sockets: another kind of fd is refused.
        assert!(map.update(&0u32.to_ne_bytes(), &(prog.fd() as u32).to_ne_bytes()).is_err());
        // The fallback action for a missing key is XDP_PASS.
        let r = prog.test_run_xdp(&[0u8; 64], None, 1).unwrap();
        assert_eq!(r.retval, xdp_action::PASS as u32);
    }
}
