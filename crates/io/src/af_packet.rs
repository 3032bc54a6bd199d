//! AF_PACKET ports: a TPACKET_V3 receive ring and `sendmmsg` transmit (packet(7)).
//!
//! ```text
//!  rx ring (mmap, block_nr blocks of block_size bytes, owned alternately by kernel and us)
//!  ┌ block 0 ─────────────────────────────┬ block 1 ──── …
//!  │ tpacket_block_desc │ pkt │ pkt │ … ──▶│ status: TP_STATUS_KERNEL (0) / TP_STATUS_USER (1)
//!  └──────────────────────────────────────┴───────────── …
//! ```
//! TPACKET_V3 (kernel `Documentation/networking/packet_mmap.rst`) hands whole blocks to user
//! space: a block is ours once its status has `TP_STATUS_USER`, and goes back to the kernel when
//! we store `TP_STATUS_KERNEL`. Frames inside a block are chained by `tp_next_offset`. A block
//! is retired to us when full or after `retire_blk_tov_ms`. Each frame is copied into a pool
//! buffer (the ring is not the pool, so this copy is unavoidable). Our own transmitted frames
//! are not looped back (`PACKET_IGNORE_OUTGOING`).
//!
//! VLAN tags: the kernel's receive path takes the outer tag of a tagged frame out of the frame
//! (`skb_vlan_untag`, in software, whatever the device's rx-vlan-offload says) before packet
//! sockets see it, and leaves it as metadata: `TP_STATUS_VLAN_VALID` with `tp_vlan_tci` and,
//! with `TP_STATUS_VLAN_TPID_VALID`, `tp_vlan_tpid` in the ring header (`PACKET_AUXDATA` for
//! `recvmsg`). An inner tag stays in the frame. Both receive paths here put the tag back where
//! it was, so a port delivers the frame as it was on the wire (`tests/vlan_rx.rs` checks
//! untagged, 802.1Q, Q-in-Q 0x88a8/0x8100 and 0x8100/0x8100 on veth, offload on and off):
//!
//! ```text
//!   ring:  dst src │ C-tag │ type │ …        + hdr: VLAN_VALID, TPID_VALID, tci, tpid 0x88a8
//!   pool:  dst src │ S-tag │ C-tag │ type │ …  (dst src moved 4 bytes into the headroom)
//! ```
//! The tag goes into the buffer's headroom (`restore_tag`), so an untagged frame pays one
//! status-bit test and a tagged one a 12-byte move; a buffer with no headroom left is a counted
//! drop (`rx_dropped`), never a panic.
//!
//! Transmit copies each frame into the kernel with one `sendmmsg` per burst. `PACKET_QDISC_BYPASS`
//! skips the qdisc layer; `PACKET_FANOUT` (hash mode) spreads flows over the sockets of a group,
//! one socket per worker, so one flow stays on one worker.
//!
//! This module also holds a plain [`RawSocket`] for tests and generators.
//!
//! Thread: open on the control path (in the interface's network namespace); bursts on the
//! owning worker.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use fastpath_packet::hdr::vlan::TAG_LEN;
use fastpath_packet::{Batch, PktId, Pool, BATCH_MAX, BUF_SIZE, HEADROOM};

use crate::port::{ErrorLog, Port, PortStats};
use crate::sys;

const SOL_PACKET: i32 = 263;
const PACKET_RX_RING: i32 = 5;
const PACKET_STATISTICS: i32 = 6;
const PACKET_AUXDATA: i32 = 8;
const PACKET_VERSION: i32 = 10;
const PACKET_VNET_HDR: i32 = 15;
const PACKET_FANOUT: i32 = 18;
const PACKET_QDISC_BYPASS: i32 = 20;
const PACKET_IGNORE_OUTGOING: i32 = 23;
const TPACKET_V3: i32 = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
const ETH_P_ALL: u16 = 0x0003;
const ETH_P_8021Q: u16 = 0x8100;
/// Destination and source MAC address: the bytes in front of a VLAN tag.
const ADDRS_LEN: usize = 12;
/// Fanout by flow hash (`PACKET_FANOUT_HASH`).
pub const PACKET_FANOUT_HASH: u16 = 0;

// struct tpacket_block_desc / tpacket_hdr_v1 field offsets.
const BLK_STATUS: usize = 8;
const BLK_NUM_PKTS: usize = 12;
const BLK_FIRST_PKT: usize = 16;
// struct tpacket3_hdr field offsets (hv1 = { tp_rxhash @28, tp_vlan_tci @32, tp_vlan_tpid @36 }).
const PKT_NEXT: usize = 0;
const PKT_SNAPLEN: usize = 12;
const PKT_LEN: usize = 16;
const PKT_STATUS: usize = 20;
const PKT_MAC: usize = 24;
const PKT_VLAN_TCI: usize = 32;
const PKT_VLAN_TPID: usize = 36;

/// How to open an AF_PACKET port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// Join fanout group `(id, mode)` (mode [`PACKET_FANOUT_HASH`] keeps a flow on one socket).
    pub fanout: Option<(u16, u16)>,
    /// Bypass the qdisc layer on transmit.
    pub qdisc_bypass: bool,
    /// Bytes per ring block (a multiple of the page size).
    pub block_size: u32,
    /// Number of ring blocks.
    pub block_nr: u32,
    /// Frame slot size (a multiple of 16); bounds the largest frame received.
    pub frame_size: u32,
    /// Milliseconds after which a partly filled block is handed to us anyway.
    pub retire_blk_tov_ms: u32,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        AfPacketConfig { fanout: None, qdisc_bypass: true, block_size: 1 << 18, block_nr: 16, frame_size: 2048, retire_blk_tov_ms: 1 }
    }
}

/// Why an AF_PACKET port could not open. Each message says what to try.
#[derive(Debug, thiserror::Error)]
pub enum AfPacketError {
    /// The interface does not exist (in this network namespace).
    #[error("af_packet: no such interface `{iface}` (check `ip link`; is it in another network namespace?)")]
    NoSuchInterface {
        /// Interface name.
        iface: String,
    },
    /// Not allowed to open packet sockets.
    #[error("af_packet on `{iface}`: permission denied ({what}): run as root or grant CAP_NET_RAW")]
    NotPermitted {
        /// Interface name.
        iface: String,
        /// The step that was refused.
        what: &'static str,
    },
    /// Any other failed system call.
    #[error("af_packet on `{iface}`: {what}: {err}")]
    Sys {
        /// Interface name.
        iface: String,
        /// The step that failed.
        what: &'static str,
        /// The OS error.
        err: io::Error,
    },
}

fn sys_err(iface: &str, what: &'static str, err: io::Error) -> AfPacketError {
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => AfPacketError::NotPermitted { iface: iface.into(), what },
        _ => AfPacketError::Sys { iface: iface.into(), what, err },
    }
}

fn setsockopt<T>(fd: RawFd, level: i32, opt: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` points at a live `T` of the size passed.
    let r = unsafe { libc::setsockopt(fd, level, opt, (v as *const T).cast(), std::mem::size_of::<T>() as u32) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Opens a raw packet socket for all protocols (bound later).
fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, i32::from(ETH_P_ALL.to_be())) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new socket nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind_ll(fd: RawFd, ifindex: u32) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = ETH_P_ALL.to_be();
    sa.sll_ifindex = ifindex as i32;
    // SAFETY: `sa` is a live sockaddr_ll and its size is passed.
    let r = unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `struct tpacket_req3`.
#[repr(C)]
#[derive(Default)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// `struct tpacket_auxdata`, the `PACKET_AUXDATA` control message.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct TpacketAuxdata {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}

/// `struct tpacket_stats_v3`.
#[repr(C)]
#[derive(Default)]
struct TpacketStatsV3 {
    packets: u32,
    drops: u32,
    freeze_q_cnt: u32,
}

/// The mapped TPACKET_V3 rx ring.
struct RxRing {
    base: NonNull<u8>,
    len: usize,
    block_size: usize,
    block_nr: usize,
}

// SAFETY: a private mapping owned by this value, unmapped on drop; the kernel synchronises
// through the block status words. It moves with its port to the worker thread.
unsafe impl Send for RxRing {}

impl RxRing {
    #[inline]
    fn block(&self, b: usize) -> *mut u8 {
        // SAFETY: `b < block_nr`, so the block lies inside the mapping.
        unsafe { self.base.as_ptr().add(b * self.block_size) }
    }
    #[inline]
    fn status(&self, b: usize) -> &AtomicU32 {
        // SAFETY: the status word of block `b` is 4-byte aligned inside the mapping (blocks are
        // page aligned); AtomicU32 has u32's layout.
        unsafe { &*(self.block(b).add(BLK_STATUS).cast::<AtomicU32>()) }
    }
    #[inline]
    fn read_u32(&self, b: usize, off: usize) -> u32 {
        if off + 4 > self.block_size {
            return 0;
        }
        // SAFETY: `off + 4 <= block_size`: inside block `b`; unaligned read is allowed.
        unsafe { self.block(b).add(off).cast::<u32>().read_unaligned() }
    }
    #[inline]
    fn read_u16(&self, b: usize, off: usize) -> u16 {
        if off + 2 > self.block_size {
            return 0;
        }
        // SAFETY: as in `read_u32`.
        unsafe { self.block(b).add(off).cast::<u16>().read_unaligned() }
    }
    /// Bytes `off..off+len` of block `b`, or `None` when they do not lie inside it.
    #[inline]
    fn bytes(&self, b: usize, off: usize, len: usize) -> Option<&[u8]> {
        if off.checked_add(len)? > self.block_size {
            return None;
        }
        // SAFETY: inside block `b`, which the kernel handed to us (status USER) and will not
        // write until we give it back.
        Some(unsafe { std::slice::from_raw_parts(self.block(b).add(off), len) })
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `open`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// An AF_PACKET port (TPACKET_V3 rx ring, `sendmmsg` tx). Implements [`Port`].
pub struct PacketPort {
    ring: RxRing,
    fd: OwnedFd,
    name: String,
    /// Block being read, packets left in it, offset of the next packet.
    cur_block: usize,
    pkts_left: u32,
    next_off: usize,
    stats: PortStats,
    kernel_drops: Cell<u64>,
    errlog: ErrorLog,
    vlan_restored_pkts: u64,
}

impl PacketPort {
    /// Opens a TPACKET_V3 socket on `iface`. Must be called from a thread in the interface's
    /// network namespace.
    ///
    /// # Errors
    /// No such interface; permission denied (needs CAP_NET_RAW); ring sizes the kernel refuses;
    /// a fanout group whose mode differs from an existing one.
    pub fn open(iface: &str, cfg: &AfPacketConfig) -> Result<PacketPort, AfPacketError> {
        let idx = sys::ifindex(iface).map_err(|_| AfPacketError::NoSuchInterface { iface: iface.into() })?;
        let fd = packet_socket().map_err(|e| sys_err(iface, "creating the packet socket", e))?;
        let raw = fd.as_raw_fd();
        setsockopt(raw, SOL_PACKET, PACKET_VERSION, &TPACKET_V3).map_err(|e| sys_err(iface, "selecting TPACKET_V3", e))?;
        let frame_nr = cfg.block_size / cfg.frame_size.max(16) * cfg.block_nr;
        let req = TpacketReq3 {
            block_size: cfg.block_size,
            block_nr: cfg.block_nr,
            frame_size: cfg.frame_size,
            frame_nr,
            retire_blk_tov: cfg.retire_blk_tov_ms,
            ..Default::default()
        };
        setsockopt(raw, SOL_PACKET, PACKET_RX_RING, &req)
            .map_err(|e| sys_err(iface, "creating the rx ring (check block/frame sizes)", e))?;
        let len = cfg.block_size as usize * cfg.block_nr as usize;
        // SAFETY: maps the ring just created on this socket; the kernel picks the address.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_POPULATE, raw, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(sys_err(iface, "mapping the rx ring", io::Error::last_os_error()));
        }
        let Some(base) = NonNull::new(p.cast::<u8>()) else {
            return Err(sys_err(iface, "mapping the rx ring", io::Error::from(io::ErrorKind::Other)));
        };
        let ring = RxRing { base, len, block_size: cfg.block_size as usize, block_nr: cfg.block_nr as usize };
        // Not fatal on kernels before 4.20: outgoing frames are then filtered by nobody, and the
        // pipeline sees its own transmissions. Every supported kernel has it.
        setsockopt(raw, SOL_PACKET, PACKET_IGNORE_OUTGOING, &1i32).map_err(|e| sys_err(iface, "PACKET_IGNORE_OUTGOING", e))?;
        if cfg.qdisc_bypass {
            setsockopt(raw, SOL_PACKET, PACKET_QDISC_BYPASS, &1i32).map_err(|e| sys_err(iface, "PACKET_QDISC_BYPASS", e))?;
        }
        bind_ll(raw, idx).map_err(|e| sys_err(iface, "binding to the interface", e))?;
        if let Some((id, mode)) = cfg.fanout {
            let v: i32 = i32::from(id) | (i32::from(mode) << 16);
            setsockopt(raw, SOL_PACKET, PACKET_FANOUT, &v)
                .map_err(|e| sys_err(iface, "joining the fanout group (same id with another mode?)", e))?;
        }
        Ok(PacketPort {
            ring,
            fd,
            name: iface.to_string(),
            cur_block: 0,
            pkts_left: 0,
            next_off: 0,
            stats: PortStats::default(),
            kernel_drops: Cell::new(0),
            errlog: ErrorLog::default(),
            vlan_restored_pkts: 0,
        })
    }

    /// Copies one frame at `off` in block `b` into a pool buffer; returns its handle and length.
    fn take_frame(&mut self, pool: &mut Pool, b: usize, off: usize) -> Option<(PktId, usize)> {
        let snaplen = self.ring.read_u32(b, off + PKT_SNAPLEN) as usize;
        let wire_len = self.ring.read_u32(b, off + PKT_LEN) as usize;
        let status = self.ring.read_u32(b, off + PKT_STATUS);
        let mac = self.ring.read_u16(b, off + PKT_MAC) as usize;
        if snaplen < wire_len {
            self.stats.rx_dropped += 1;
            return None;
        }
        let Some(src) = self.ring.bytes(b, off + mac, snaplen) else {
            self.stats.errors += 1;
            return None;
        };
        // One status-bit test per frame; the header words are read only for a moved tag.
        let tag = if status & TP_STATUS_VLAN_VALID != 0 {
            moved_tag(status, self.ring.read_u32(b, off + PKT_VLAN_TCI) as u16, self.ring.read_u16(b, off + PKT_VLAN_TPID))
        } else {
            None
        };
        let h = copy_in(pool, src, tag, HEADROOM, &mut self.stats)?;
        if tag.is_some() {
            self.vlan_restored_pkts += 1;
        }
        Some((h, pool.len(h)))
    }

    /// Frames whose outer VLAN tag the kernel had moved into the ring header and this port put
    /// back (see the module doc). Control thread or tests.
    pub fn vlan_restored_pkts(&self) -> u64 {
        self.vlan_restored_pkts
    }
}

/// A VLAN tag as it sits on the wire after the MAC addresses: TPID, then TCI (PCP, DEI, VID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VlanTag {
    /// Tag protocol identifier: 0x8100 (802.1Q C-tag) or 0x88a8 (802.1ad S-tag), or another
    /// the kernel recognised.
    pub tpid: u16,
    /// Tag control information.
    pub tci: u16,
}

/// The tag the kernel moved out of a received frame, from the metadata it left instead
/// (`tpacket3_hdr.hv1` or `tpacket_auxdata`: `tp_status`, `tp_vlan_tci`, `tp_vlan_tpid`).
/// `None` without `TP_STATUS_VLAN_VALID`. The TPID is `tp_vlan_tpid` when
/// `TP_STATUS_VLAN_TPID_VALID` says the kernel filled it (≥ 3.14), else 0x8100, the only tag
/// older kernels took out — libpcap's rule too.
#[inline]
pub(crate) fn moved_tag(status: u32, tci: u16, tpid: u16) -> Option<VlanTag> {
    if status & TP_STATUS_VLAN_VALID == 0 {
        return None;
    }
    let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 { tpid } else { ETH_P_8021Q };
    Some(VlanTag { tpid, tci })
}

/// Puts `tag` back into frame `h` after its MAC addresses, where it was on the wire: the frame
/// grows by 4 bytes into the buffer's headroom and the 12 MAC address bytes move to the new
/// front, so the payload is not copied again. Returns false, changing nothing, when the
/// headroom is smaller than 4 bytes or the frame is shorter than its 12 address bytes.
///
/// # Panics
/// Never. Worker only.
#[inline]
pub(crate) fn restore_tag(pool: &mut Pool, h: PktId, tag: VlanTag) -> bool {
    if pool.len(h) < ADDRS_LEN || pool.headroom(h) < TAG_LEN {
        return false;
    }
    let Some(f) = pool.prepend(h, TAG_LEN) else { return false };
    f.copy_within(TAG_LEN..TAG_LEN + ADDRS_LEN, 0);
    f[ADDRS_LEN..ADDRS_LEN + 2].copy_from_slice(&tag.tpid.to_be_bytes());
    f[ADDRS_LEN + 2..ADDRS_LEN + TAG_LEN].copy_from_slice(&tag.tci.to_be_bytes());
    true
}

/// Puts `tag` back after the MAC addresses of the `n`-byte frame at the start of `buf`, moving
/// the bytes behind them 4 bytes on; returns the new length. Bytes that would pass the end of
/// `buf` are cut; a frame shorter than 12 bytes is left alone. For [`RawSocket`], not the data
/// path.
fn insert_tag(buf: &mut [u8], n: usize, tag: VlanTag) -> usize {
    let n = n.min(buf.len());
    if n < ADDRS_LEN {
        return n;
    }
    let end = (n + TAG_LEN).min(buf.len());
    let kept = end.saturating_sub(TAG_LEN);
    if kept > ADDRS_LEN {
        buf.copy_within(ADDRS_LEN..kept, ADDRS_LEN + TAG_LEN);
    }
    let mut wire = [0u8; TAG_LEN];
    wire[..2].copy_from_slice(&tag.tpid.to_be_bytes());
    wire[2..].copy_from_slice(&tag.tci.to_be_bytes());
    let room = (end - ADDRS_LEN).min(TAG_LEN);
    buf[ADDRS_LEN..ADDRS_LEN + room].copy_from_slice(&wire[..room]);
    end
}

/// Copies one received frame (`src`, as the kernel left it) into a new pool buffer at
/// `headroom`, putting back the tag the kernel moved out (`tag`, from [`moved_tag`]). A frame
/// that cannot be taken — longer than a buffer, no free buffer, no room for the tag — is
/// counted in `stats.rx_dropped` and `None` returned.
///
/// # Panics
/// Never. Worker only.
#[inline]
fn copy_in(pool: &mut Pool, src: &[u8], tag: Option<VlanTag>, headroom: usize, stats: &mut PortStats) -> Option<PktId> {
    if src.len() < ADDRS_LEN || headroom.checked_add(src.len()).is_none_or(|end| end > BUF_SIZE) {
        stats.rx_dropped += 1;
        return None;
    }
    let Some(h) = pool.alloc() else {
        stats.rx_dropped += 1;
        return None;
    };
    pool.buffer_mut(h)[headroom..headroom + src.len()].copy_from_slice(src);
    pool.set_bounds(h, headroom, src.len());
    if let Some(tag) = tag {
        if !restore_tag(pool, h, tag) {
            pool.free(h);
            stats.rx_dropped += 1;
            return None;
        }
    }
    Some(h)
}

impl Port for PacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut Pool, batch: &mut Batch, port_id: u16) -> usize {
        let mut got = 0usize;
        let mut bytes = 0u64;
        // Bounded: at most every block once per burst.
        for _ in 0..=self.ring.block_nr {
            if batch.is_full() {
                break;
            }
            let b = self.cur_block;
            if self.pkts_left == 0 {
                if self.ring.status(b).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                    break;
                }
                self.pkts_left = self.ring.read_u32(b, BLK_NUM_PKTS);
                self.next_off = self.ring.read_u32(b, BLK_FIRST_PKT) as usize;
            }
            while self.pkts_left > 0 && !batch.is_full() {
                let off = self.next_off;
                if let Some((h, len)) = self.take_frame(pool, b, off) {
                    batch.push(h, port_id);
                    got += 1;
                    bytes += len as u64;
                }
                self.next_off = off + self.ring.read_u32(b, off + PKT_NEXT) as usize;
                self.pkts_left -= 1;
            }
            if self.pkts_left == 0 {
                self.ring.status(b).store(TP_STATUS_KERNEL, Ordering::Release);
                self.cur_block = (b + 1) % self.ring.block_nr;
            }
        }
        self.stats.rx_pkts += got as u64;
        self.stats.rx_bytes += bytes;
        got
    }

    fn tx_burst(&mut self, pool: &mut Pool, pkts: &[PktId]) -> usize {
        let n = pkts.len().min(BATCH_MAX);
        if n == 0 {
            return 0;
        }
        // SAFETY: iovec and mmsghdr are plain old data; all-zero is valid (null pointers, 0 lengths).
        let mut iov: [libc::iovec; BATCH_MAX] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; BATCH_MAX] = unsafe { std::mem::zeroed() };
        let mut bytes = [0u32; BATCH_MAX];
        for i in 0..n {
            let d = pool.data(pkts[i]);
            iov[i] = libc::iovec { iov_base: d.as_ptr() as *mut libc::c_void, iov_len: d.len() };
            bytes[i] = d.len() as u32;
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `msgs[..n]` point at `iov[..n]`, which point at pool buffers that stay alive
        // and unmodified for the call (we hold `&mut Pool`). The kernel only reads them.
        let r = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs.as_mut_ptr(), n as u32, libc::MSG_DONTWAIT) };
        let sent = if r < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {}
                _ => {
                    self.stats.errors += 1;
                    self.errlog.error(&self.name, "sendmmsg", &e);
                }
            }
            0
        } else {
            r as usize
        };
        // The kernel copied the frames: the buffers are free again.
        pool.free_bulk(&pkts[..sent]);
        self.stats.tx_pkts += sent as u64;
        self.stats.tx_bytes += bytes[..sent].iter().map(|&b| u64::from(b)).sum::<u64>();
        sent
    }

    fn stats(&self) -> PortStats {
        let mut st = TpacketStatsV3::default();
        let mut len = std::mem::size_of::<TpacketStatsV3>() as libc::socklen_t;
        // SAFETY: `st` is a live, writable tpacket_stats_v3; `len` is its size.
        let r = unsafe {
            libc::getsockopt(self.fd.as_raw_fd(), SOL_PACKET, PACKET_STATISTICS, (&mut st as *mut TpacketStatsV3).cast(), &mut len)
        };
        if r == 0 {
            // Reading resets the kernel's counters: accumulate.
            self.kernel_drops.set(self.kernel_drops.get() + u64::from(st.drops));
        }
        PortStats { rx_dropped: self.stats.rx_dropped + self.kernel_drops.get(), ..self.stats }
    }
}

impl std::fmt::Debug for PacketPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketPort").field("name", &self.name).finish()
    }
}

/// A plain (non-ring) packet socket bound to one interface: send and receive whole frames.
/// For tests and simple generators, not the data path (one syscall per frame).
#[derive(Debug)]
pub struct RawSocket {
    fd: OwnedFd,
    /// Opened by [`RawSocket::open_split`]: every frame carries a `virtio_net_hdr`.
    split: bool,
}

/// Bytes of a `struct virtio_net_hdr` (flags, gso_type, hdr_len, gso_size, csum_start,
/// csum_offset).
const VNET_HDR_LEN: usize = 10;

impl RawSocket {
    /// Opens a raw socket on `iface`, in the calling thread's network namespace, that does not
    /// see its own transmissions.
    ///
    /// # Errors
    /// No such interface; permission denied.
    pub fn open(iface: &str) -> Result<RawSocket, AfPacketError> {
        let idx = sys::ifindex(iface).map_err(|_| AfPacketError::NoSuchInterface { iface: iface.into() })?;
        let fd = packet_socket().map_err(|e| sys_err(iface, "creating the packet socket", e))?;
        setsockopt(fd.as_raw_fd(), SOL_PACKET, PACKET_IGNORE_OUTGOING, &1i32).map_err(|e| sys_err(iface, "PACKET_IGNORE_OUTGOING", e))?;
        // The tag the kernel moves out of a received frame comes back as a control message.
        setsockopt(fd.as_raw_fd(), SOL_PACKET, PACKET_AUXDATA, &1i32).map_err(|e| sys_err(iface, "PACKET_AUXDATA", e))?;
        bind_ll(fd.as_raw_fd(), idx).map_err(|e| sys_err(iface, "binding to the interface", e))?;
        Ok(RawSocket { fd, split: false })
    }

    /// As [`RawSocket::open`], for [`RawSocket::send_split`]: frames carry a `virtio_net_hdr`
    /// (`PACKET_VNET_HDR`), whose `hdr_len` sets how much of the frame the kernel puts in the
    /// skb's linear part. For receiving, use [`RawSocket::open`].
    ///
    /// # Errors
    /// As [`RawSocket::open`]; a kernel without `PACKET_VNET_HDR`.
    pub fn open_split(iface: &str) -> Result<RawSocket, AfPacketError> {
        let s = RawSocket::open(iface)?;
        setsockopt(s.fd.as_raw_fd(), SOL_PACKET, PACKET_VNET_HDR, &1i32).map_err(|e| sys_err(iface, "PACKET_VNET_HDR", e))?;
        Ok(RawSocket { split: true, ..s })
    }

    /// Sends `frame` as an skb whose first `linear` bytes (at least the Ethernet header) are
    /// in its linear part and the rest in page fragments, as a NIC that splits headers from
    /// payload hands frames up: for testing code that must pull what it reads. Needs a socket
    /// from [`RawSocket::open_split`].
    ///
    /// # Errors
    /// `InvalidInput` on a socket from [`RawSocket::open`]; the OS error of `send`.
    pub fn send_split(&self, frame: &[u8], linear: u16) -> io::Result<()> {
        if !self.split {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "send_split needs a socket from RawSocket::open_split"));
        }
        // No checksum or GSO request; hdr_len (little-endian, as for a legacy virtio device on
        // this host) is the linear part's length.
        let mut buf = vec![0u8; VNET_HDR_LEN + frame.len()];
        buf[2..4].copy_from_slice(&linear.to_le_bytes());
        buf[VNET_HDR_LEN..].copy_from_slice(frame);
        self.send_raw(&buf)
    }

    /// Keeps only IPv4/UDP frames to destination port `port` (with a 20-byte IP header): a
    /// classic BPF socket filter, run by the kernel before a frame is queued to the socket, so
    /// other traffic costs no copy.
    ///
    /// # Errors
    /// The OS error of `setsockopt(SO_ATTACH_FILTER)`.
    pub fn accept_only_udp_dport(&self, port: u16) -> io::Result<()> {
        // ldh [12]; jeq 0x800; ldb [23]; jeq 17; ldh [36]; jeq port; ret 0xffff | ret 0
        let code = [
            libc::sock_filter { code: 0x28, jt: 0, jf: 0, k: 12 },
            libc::sock_filter { code: 0x15, jt: 0, jf: 5, k: 0x0800 },
            libc::sock_filter { code: 0x30, jt: 0, jf: 0, k: 23 },
            libc::sock_filter { code: 0x15, jt: 0, jf: 3, k: 17 },
            libc::sock_filter { code: 0x28, jt: 0, jf: 0, k: 36 },
            libc::sock_filter { code: 0x15, jt: 0, jf: 1, k: u32::from(port) },
            libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0xffff },
            libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 0 },
        ];
        let prog = libc::sock_fprog { len: code.len() as u16, filter: code.as_ptr().cast_mut() };
        // SAFETY: `prog` points at `code`, both live for the call; the kernel copies the program.
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                (&prog as *const libc::sock_fprog).cast(),
                std::mem::size_of::<libc::sock_fprog>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Sends one frame.
    ///
    /// # Errors
    /// The OS error of `send`.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        if self.split {
            // The kernel reads a virtio_net_hdr first: an all-zero one asks for nothing.
            let mut buf = vec![0u8; VNET_HDR_LEN + frame.len()];
            buf[VNET_HDR_LEN..].copy_from_slice(frame);
            return self.send_raw(&buf);
        }
        self.send_raw(frame)
    }

    fn send_raw(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is a live buffer of the length passed.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receives one frame into `buf`, waiting at most `timeout_ms`. `Ok(None)` on timeout.
    /// The frame is as it was on the wire: a VLAN tag the kernel moved into `PACKET_AUXDATA` is
    /// put back (a frame longer than `buf` is cut, as `recv` cuts it).
    ///
    /// # Errors
    /// The OS error of `poll`/`recv`.
    pub fn recv(&self, buf: &mut [u8], timeout_ms: i32) -> io::Result<Option<usize>> {
        Ok(self.recv_stamped(buf, timeout_ms)?.map(|(n, _)| n))
    }

    /// Asks the kernel to stamp each received frame (`SO_TIMESTAMPNS`): the time the receive
    /// path took it, before this socket's reader woke up. [`RawSocket::recv_stamped`] returns it.
    /// The kernel switches stamping on from a work item shortly after the first socket asks
    /// (`net_enable_timestamp`); frames that arrive before that are stamped when read, so give
    /// it some milliseconds before the frames that matter.
    ///
    /// # Errors
    /// The OS error of `setsockopt(SO_TIMESTAMPNS)`.
    pub fn enable_rx_timestamps(&self) -> io::Result<()> {
        setsockopt(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &1i32)
    }

    /// As [`RawSocket::recv`], with the frame's kernel receive time (`CLOCK_REALTIME`, ns) when
    /// [`RawSocket::enable_rx_timestamps`] is on.
    ///
    /// # Errors
    /// The OS error of `poll`/`recvmsg`.
    pub fn recv_stamped(&self, buf: &mut [u8], timeout_ms: i32) -> io::Result<Option<(usize, Option<u64>)>> {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one live pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if r == 0 {
            return Ok(None);
        }
        // Room for an SCM_TIMESTAMPNS and a PACKET_AUXDATA control message, u64-aligned as
        // cmsghdr requires.
        let mut control = [0u64; 16];
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: `msg` points at `iov` (over `buf`) and `control`, all live and writable.
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock { Ok(None) } else { Err(e) };
        }
        let mut stamp = None;
        let mut tag = None;
        // SAFETY: the CMSG_* walk stays within `msg.msg_control`/`msg_controllen` as the kernel
        // filled them; the payload of SCM_TIMESTAMPNS is a timespec, that of PACKET_AUXDATA a
        // tpacket_auxdata (both read unaligned).
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                }
                if (*c).cmsg_level == SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                    let aux: TpacketAuxdata = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                    tag = moved_tag(aux.tp_status, aux.tp_vlan_tci, aux.tp_vlan_tpid);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let n = match tag {
            Some(tag) => insert_tag(buf, n as usize, tag),
            None => n as usize,
        };
        Ok(Some((n, stamp)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::Netns;
    use crate::sys::{enter_netns, is_root};

    #[test]
    fn missing_interface_is_named_in_the_error() {
        let e = PacketPort::open("fp-nonexistent0", &AfPacketConfig::default()).unwrap_err();
        assert!(matches!(e, AfPacketError::NoSuchInterface { .. }));
        assert!(e.to_string().contains("no such interface `fp-nonexistent0`"), "{e}");
    }

    #[test]
    fn struct_sizes_match_the_kernel() {
        assert_eq!(std::mem::size_of::<TpacketReq3>(), 28);
        assert_eq!(std::mem::size_of::<TpacketStatsV3>(), 12);
        assert_eq!(std::mem::size_of::<TpacketAuxdata>(), 20);
    }

    /// dst MAC, src MAC, then an 802.1Q tag (VID 30) and IPv4: what the kernel leaves in the
    /// ring for a Q-in-Q frame whose outer tag it moved out.
    const INNER: [u8; 20] = [
        0x02, 0, 0, 0, 0, 0x02, // dst MAC
        0x02, 0, 0, 0, 0, 0x01, // src MAC
        0x81, 0x00, 0x00, 0x1e, // C-tag: TPID 0x8100, VID 30
        0x08, 0x00, // EtherType IPv4
        0x45, 0x00, // first IPv4 bytes
    ];
    /// The same frame as it was on the wire: S-tag 0x88a8, PCP 5, VID 100 in front.
    const WIRE: [u8; 24] = [
        0x02, 0, 0, 0, 0, 0x02, // dst MAC
        0x02, 0, 0, 0, 0, 0x01, // src MAC
        0x88, 0xa8, 0xa0, 0x64, // S-tag: TPID 0x88a8, PCP 5, VID 100
        0x81, 0x00, 0x00, 0x1e, // C-tag: TPID 0x8100, VID 30
        0x08, 0x00, // EtherType IPv4
        0x45, 0x00, // first IPv4 bytes
    ];
    const S_TAG: VlanTag = VlanTag { tpid: 0x88a8, tci: 0xa064 };

    #[test]
    fn moved_tag_takes_the_tpid_only_when_the_kernel_says_it_is_valid() {
        let both = TP_STATUS_USER | TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID;
        assert_eq!(moved_tag(both, 0xa064, 0x88a8), Some(S_TAG));
        assert_eq!(moved_tag(both, 0x0064, 0x8100), Some(VlanTag { tpid: 0x8100, tci: 0x0064 }));
        // Kernels before 3.14 fill no TPID: the tag was an 802.1Q one.
        assert_eq!(moved_tag(TP_STATUS_VLAN_VALID, 7, 0x88a8), Some(VlanTag { tpid: 0x8100, tci: 7 }));
        assert_eq!(moved_tag(TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID, 7, 0), Some(VlanTag { tpid: 0x8100, tci: 7 }));
        // TCI 0 (priority 0, VID 0) is a tag too.
        assert_eq!(moved_tag(both, 0, 0x8100), Some(VlanTag { tpid: 0x8100, tci: 0 }));
        // No VLAN_VALID: nothing was moved, whatever the other words hold.
        assert_eq!(moved_tag(TP_STATUS_USER | TP_STATUS_VLAN_TPID_VALID, 0xa064, 0x88a8), None);
        assert_eq!(moved_tag(0, 0, 0), None);
    }

    #[test]
    fn restore_tag_puts_the_tag_back_in_the_headroom() {
        let mut pool = Pool::new(2);
        let h = pool.alloc().unwrap();
        pool.set_data(h, &INNER);
        assert!(restore_tag(&mut pool, h, S_TAG));
        assert_eq!(pool.data(h), &WIRE[..]);
        assert_eq!(pool.headroom(h), HEADROOM - TAG_LEN, "the tag came out of the headroom");
    }

    #[test]
    fn restore_tag_refuses_without_room_and_changes_nothing() {
        let mut pool = Pool::new(2);
        let h = pool.alloc().unwrap();
        for headroom in 0..TAG_LEN {
            pool.buffer_mut(h)[headroom..headroom + INNER.len()].copy_from_slice(&INNER);
            assert!(pool.set_bounds(h, headroom, INNER.len()));
            assert!(!restore_tag(&mut pool, h, S_TAG));
            assert_eq!((pool.headroom(h), pool.data(h)), (headroom, &INNER[..]));
        }
        // A frame too short to hold the MAC addresses is left alone too.
        for len in 0..ADDRS_LEN {
            assert!(pool.set_bounds(h, HEADROOM, len));
            assert!(!restore_tag(&mut pool, h, S_TAG));
            assert_eq!((pool.headroom(h), pool.len(h)), (HEADROOM, len));
        }
    }

    #[test]
    fn copy_in_restores_the_tag_or_counts_a_drop() {
        let mut pool = Pool::new(2);
        let mut st = PortStats::default();
        let h = copy_in(&mut pool, &INNER, Some(S_TAG), HEADROOM, &mut st).unwrap();
        assert_eq!(pool.data(h), &WIRE[..]);
        // Untagged: the bytes as they came, at the headroom.
        let u = copy_in(&mut pool, &INNER, None, HEADROOM, &mut st).unwrap();
        assert_eq!((pool.data(u), pool.headroom(u)), (&INNER[..], HEADROOM));
        assert_eq!(st, PortStats::default());
        pool.free(h);
        pool.free(u);
        // No room for the tag: a counted drop, and the buffer goes back.
        assert_eq!(copy_in(&mut pool, &INNER, Some(S_TAG), 2, &mut st), None);
        assert_eq!((st.rx_dropped, pool.available()), (1, 2));
        // Longer than a buffer, shorter than the MAC addresses, or no buffer free: counted too.
        let big = vec![0u8; BUF_SIZE - HEADROOM + 1];
        assert_eq!(copy_in(&mut pool, &big, None, HEADROOM, &mut st), None);
        assert_eq!(copy_in(&mut pool, &INNER[..11], Some(S_TAG), HEADROOM, &mut st), None);
        let held = [pool.alloc().unwrap(), pool.alloc().unwrap()];
        assert_eq!(copy_in(&mut pool, &INNER, None, HEADROOM, &mut st), None);
        assert_eq!(st.rx_dropped, 4);
        pool.free_bulk(&held);
        assert_eq!(pool.available(), 2);
        // The longest frame still takes its tag: the tag goes into the headroom, not the tail.
        let max = vec![0x5au8; BUF_SIZE - HEADROOM];
        let h = copy_in(&mut pool, &max, Some(S_TAG), HEADROOM, &mut st).unwrap();
        assert_eq!(pool.len(h), max.len() + TAG_LEN);
        assert_eq!(st.rx_dropped, 4);
    }

    #[test]
    fn insert_tag_shifts_in_place_and_cuts_at_the_buffer_end() {
        let mut buf = [0u8; 64];
        buf[..INNER.len()].copy_from_slice(&INNER);
        assert_eq!(insert_tag(&mut buf, INNER.len(), S_TAG), WIRE.len());
        assert_eq!(&buf[..WIRE.len()], &WIRE[..]);
        // A buffer with no room behind the frame: the tail is cut, never a panic.
        for len in 0..=INNER.len() {
            let mut buf = INNER[..len].to_vec();
            let n = insert_tag(&mut buf, len, S_TAG);
            if len < ADDRS_LEN {
                assert_eq!((n, &buf[..]), (len, &INNER[..len]));
            } else {
                assert_eq!((n, &buf[..]), (len, &WIRE[..len]));
            }
        }
    }

    #[test]
    fn udp_port_filter_keeps_only_that_port() {
        if !is_root() {
            eprintln!("skipped: needs root");
            return;
        }
        // In a private network namespace, on its loopback.
        let ns = Netns::new("fp-filt").unwrap();
        let got = std::thread::scope(|s| {
            s.spawn(|| {
                enter_netns(&ns.path()).unwrap();
                std::process::Command::new("ip").args(["link", "set", "lo", "up"]).status().unwrap();
                let raw = RawSocket::open("lo").unwrap();
                raw.accept_only_udp_dport(7777).unwrap();
                let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                let _rx = std::net::UdpSocket::bind("127.0.0.1:7777").unwrap();
                tx.send_to(b"other", "127.0.0.1:7778").unwrap();
                tx.send_to(b"probe", "127.0.0.1:7777").unwrap();
                let mut buf = [0u8; 2048];
                let mut got = Vec::new();
                while let Some(n) = raw.recv(&mut buf, 200).unwrap() {
                    got.push(buf[42..n].to_vec());
                }
                got
            })
            .join()
            .unwrap()
        });
        assert_eq!(got, vec![b"probe".to_vec()]);
    }
}
