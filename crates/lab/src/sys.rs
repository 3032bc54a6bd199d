//! The few system calls the lab makes itself: entering a network namespace on the current
//! thread (`setns(2)`), interface index lookup, the CLOCK_MONOTONIC nanosecond clock that BPF's
//! `bpf_ktime_get_ns` also reads, SIGINT/SIGTERM flag handlers, and raw AF_PACKET sockets for
//! the low-rate latency probes and the fallback sender/receiver.
//!
//! Lab-specific and control-path only: the packet path proper lives in `io`. Every `unsafe`
//! block carries its `SAFETY:` argument.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Moves the calling thread into the network namespace at `path` (`/run/netns/NAME`).
pub(crate) fn setns_net(path: &str) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    // SAFETY: `f` is an open namespace fd for the duration of the call; setns only affects the
    // calling thread's network namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The index of interface `name` in the calling thread's network namespace.
pub(crate) fn ifindex(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(i)
}

/// CLOCK_MONOTONIC in nanoseconds: the clock `bpf_ktime_get_ns()` reads, so user space and XDP
/// timestamps compare directly.
pub(crate) fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Async-signal-safe: a single atomic store.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs SIGINT and SIGTERM handlers that only set the interrupted flag.
pub(crate) fn install_signal_flag() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `on_signal` is an `extern "C"` function that only performs an atomic store,
        // which is async-signal-safe; replacing the disposition of SIGINT/SIGTERM is sound.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
}

/// True once SIGINT or SIGTERM arrived after [`install_signal_flag`].
pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Sets the interrupted flag (tests inject a Ctrl-C this way).
pub(crate) fn set_interrupted(v: bool) {
    INTERRUPTED.store(v, Ordering::SeqCst);
}

/// A raw AF_PACKET socket bound to one interface (all EtherTypes).
pub(crate) struct PacketSocket {
    fd: OwnedFd,
    ifindex: u32,
}

impl PacketSocket {
    /// Opens and binds a socket on `ifindex` in the calling thread's namespace, with a receive
    /// timeout of `rcv_timeout_ms` and PACKET_QDISC_BYPASS on the send side.
    pub(crate) fn open(ifindex: u32, rcv_timeout_ms: u64) -> io::Result<PacketSocket> {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2) call; the result is checked before use.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh, valid descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let s = PacketSocket { fd, ifindex };
        let mut sll: libc::sockaddr_ll = s.addr();
        sll.sll_protocol = proto;
        // SAFETY: `sll` is a properly initialised sockaddr_ll and the length matches its type.
        let rc = unsafe {
            libc::bind(
                s.fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let tv = libc::timeval {
            tv_sec: (rcv_timeout_ms / 1000) as libc::time_t,
            tv_usec: ((rcv_timeout_ms % 1000) * 1000) as libc::suseconds_t,
        };
        s.setopt(libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)?;
        let one: libc::c_int = 1;
        // Best effort: skip the qdisc layer when sending (PACKET_QDISC_BYPASS = 20).
        let _ = s.setopt(libc::SOL_PACKET, 20, &one);
        let big: libc::c_int = 8 << 20;
        let _ = s.setopt(libc::SOL_SOCKET, libc::SO_RCVBUF, &big);
        Ok(s)
    }

    fn setopt<T>(&self, level: i32, name: i32, v: &T) -> io::Result<()> {
        // SAFETY: `v` points at a live `T` of the size passed.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                (v as *const T).cast(),
                std::mem::size_of::<T>() as u32,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn addr(&self) -> libc::sockaddr_ll {
        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = self.ifindex as i32;
        sll
    }

    /// Sends each frame of `frames` once with one `sendmmsg(2)` call (frames are complete
    /// Ethernet frames). Returns how many the kernel took.
    pub(crate) fn send_burst(&self, frames: &[&[u8]]) -> io::Result<usize> {
        const MAX: usize = 64;
        let n = frames.len().min(MAX);
        // SAFETY: iovec and mmsghdr are plain old data; zero is a valid initial value.
        let mut iov: [libc::iovec; MAX] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; MAX] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            iov[i] = libc::iovec {
                iov_base: frames[i].as_ptr() as *mut libc::c_void,
                iov_len: frames[i].len(),
            };
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `msgs[..n]` point at `iov[..n]`, which point at the caller's frames; all live
        // for the duration of the call, and the kernel only reads them.
        let rc = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs.as_mut_ptr(), n as u32, 0) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(rc as usize)
    }

    /// Receives one frame into `buf` (blocking up to the receive timeout). `Ok(None)` on
    /// timeout; outgoing copies of our own frames are skipped.
    pub(crate) fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: sockaddr_ll is plain old data.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: `buf` is writable for `buf.len()` bytes; `from`/`len` describe a valid
            // address buffer.
            let rc = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Ok(Some(rc as usize));
        }
    }
}
