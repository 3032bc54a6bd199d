//! Operating-system helpers around the ports: interface indexes and kinds, network namespaces, CPU
//! pinning, scheduling priority, the real-time clock and the root check.
//!
//! Each is one system call (or a `/proc`/`/sys` read) with its error turned into an
//! `io::Error`; none of them knows about ports, pools or BPF, so every other module of the
//! crate may use this one and this one uses none of them.
//!
//! Thread: control path (a worker calls the pinning and namespace helpers once, at start, on
//! itself).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd};

/// The interface index of `iface` in the calling thread's network namespace.
///
/// # Errors
/// `NotFound` when there is no such interface; `InvalidInput` when the name holds a NUL.
pub fn ifindex(iface: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(iface).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    }
    Ok(idx)
}

/// What rtnetlink tells about one link (`ip -d link show`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkInfo {
    /// The link's kind (`IFLA_INFO_KIND`: `veth`, `bridge`, `vxlan`, …); empty for a device
    /// that has none (a NIC, `lo`).
    pub kind: String,
    /// Whether the device at the link's other end (a veth's peer) lives in another network
    /// namespace (`IFLA_LINK_NETNSID` present).
    pub peer_elsewhere: bool,
}

/// Asks rtnetlink (`RTM_GETLINK`) about the link `ifindex` of the calling thread's namespace.
///
/// # Errors
/// The socket cannot be opened, or the kernel's error (`ENODEV` for no such link).
pub fn link_info(ifindex: u32) -> io::Result<LinkInfo> {
    // SAFETY: plain socket(2); the fd is owned at once.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    // nlmsghdr (len, type, flags = NLM_F_REQUEST, seq, pid) + ifinfomsg (family, type, index,
    // flags, change).
    let mut req = [0u8; 32];
    req[0..4].copy_from_slice(&32u32.to_ne_bytes());
    req[4..6].copy_from_slice(&rtnl::RTM_GETLINK.to_ne_bytes());
    req[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[20..24].copy_from_slice(&ifindex.to_ne_bytes());
    // SAFETY: `req` is valid for its length; the kernel is the default destination.
    if unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: `buf` is valid for writes of its length.
    let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    rtnl::parse_link_reply(&buf[..n as usize])
}

/// The rtnetlink reply to one `RTM_GETLINK`, decoded.
mod rtnl {
    use super::LinkInfo;
    use std::io;

    pub(super) const RTM_NEWLINK: u16 = 16;
    pub(super) const RTM_GETLINK: u16 = 18;
    pub(super) const NLMSG_ERROR: u16 = 2;
    pub(super) const IFLA_LINKINFO: u16 = 18;
    pub(super) const IFLA_INFO_KIND: u16 = 1;
    pub(super) const IFLA_LINK_NETNSID: u16 = 37;

    /// Attributes (rtattr: length, type; each padded to 4 bytes), the type without its
    /// nested / byte-order flags; stops at the first that does not fit.
    fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
        std::iter::from_fn(move || {
            let len = usize::from(u16::from_ne_bytes([*b.first()?, *b.get(1)?]));
            let ty = u16::from_ne_bytes([*b.get(2)?, *b.get(3)?]) & 0x3fff;
            let body = b.get(4..len)?;
            b = b.get((len + 3) & !3..).unwrap_or(&[]);
            Some((ty, body))
        })
    }

    /// `msg`: an nlmsghdr, then an ifinfomsg and its attributes (`RTM_NEWLINK`), or the
    /// kernel's error (`NLMSG_ERROR`).
    pub(super) fn parse_link_reply(msg: &[u8]) -> io::Result<LinkInfo> {
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "a malformed rtnetlink reply");
        let word = |b: &[u8], o: usize| b.get(o..o + 4).map(|x| [x[0], x[1], x[2], x[3]]).ok_or_else(bad);
        let msg = msg.get(..u32::from_ne_bytes(word(msg, 0)?) as usize).ok_or_else(bad)?;
        let [t0, t1, ..] = word(msg, 4)?;
        match u16::from_ne_bytes([t0, t1]) {
            NLMSG_ERROR => match i32::from_ne_bytes(word(msg, 16)?) {
                e if e < 0 => return Err(io::Error::from_raw_os_error(-e)),
                _ => return Err(bad()),
            },
            RTM_NEWLINK => {}
            _ => return Err(bad()),
        }
        let mut info = LinkInfo::default();
        for (ty, body) in attrs(msg.get(32..).ok_or_else(bad)?) {
            match ty {
                IFLA_LINK_NETNSID => info.peer_elsewhere = true,
                IFLA_LINKINFO => {
                    if let Some((_, kind)) = attrs(body).find(|a| a.0 == IFLA_INFO_KIND) {
                        info.kind = String::from_utf8_lossy(kind).trim_end_matches('\0').to_owned();
                    }
                }
                _ => {}
            }
        }
        Ok(info)
    }
}

/// Inode of the calling thread's network namespace (0 if it cannot be read): ifindexes are only
/// unique within one namespace, so this plus an ifindex names an interface.
pub(crate) fn netns_id() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net").map(|m| m.ino()).unwrap_or(0)
}

/// Moves the calling thread into the network namespace at `path` (e.g. `/var/run/netns/NAME`).
/// Sockets it opens afterwards live in that namespace, wherever they are used later.
///
/// # Errors
/// The namespace file does not exist; `EPERM` without CAP_SYS_ADMIN.
pub fn enter_netns(path: &std::path::Path) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    // SAFETY: `f` is an open namespace file; setns only changes the calling thread's namespace.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Pins the calling thread to CPU `core`.
///
/// # Errors
/// `EINVAL` when the core does not exist or is not allowed for this process.
pub fn pin_to_core(core: usize) -> io::Result<()> {
    if core >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is plain old data; CPU_ZERO/CPU_SET only write inside it (core checked
    // above); sched_setaffinity(0) affects only the calling thread.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Pins the calling thread to the CPUs in `cores` (any of them).
///
/// # Errors
/// `EINVAL` when `cores` is empty, names no existing CPU, or one past `CPU_SETSIZE`.
pub fn pin_to_cores(cores: &[usize]) -> io::Result<()> {
    if cores.is_empty() || cores.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: as in `pin_to_core`; every index was checked against CPU_SETSIZE above.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &c in cores {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Number of CPUs this process may run on.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Sets the nice value of the calling thread (-20..=19; lower runs more). Linux keeps a nice
/// value per thread, so other threads of the process keep theirs.
///
/// # Errors
/// `EACCES`/`EPERM` when lowering it without CAP_SYS_NICE.
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: plain setpriority(2) on our own thread id.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the calling thread a real-time thread (`SCHED_FIFO` at `priority`, 1..=99): it then
/// runs as soon as it wakes, ahead of every ordinary thread. For threads that sleep almost
/// always (latency probes); a busy one would starve its CPU's ordinary work.
///
/// # Errors
/// `EPERM` without CAP_SYS_NICE; `EINVAL` for a priority out of range.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    let p = libc::sched_param { sched_priority: priority };
    // SAFETY: `p` is a live sched_param; pid 0 means the calling thread.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Gives the calling thread the ordinary scheduler back (`SCHED_OTHER`), for a thread that
/// inherited a real-time policy from the thread that started it ([`set_realtime`]) and does
/// long work. Its nice value is kept.
///
/// # Errors
/// As `sched_setscheduler(2)`.
pub fn set_normal() -> io::Result<()> {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: `p` is a live sched_param; pid 0 means the calling thread.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `CLOCK_REALTIME` in nanoseconds: the clock of the kernel's receive timestamps
/// (`af_packet::RawSocket::recv_stamped`).
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a live timespec; CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// True when the process runs as root (the BPF, AF_XDP and namespace calls need it, or
/// CAP_BPF/CAP_NET_ADMIN/CAP_SYS_ADMIN). CI runs as root; tests that need it skip otherwise.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifindex_finds_loopback_and_names_a_missing_interface() {
        assert!(ifindex("lo").unwrap() > 0);
        assert_eq!(ifindex("fp-nonexistent0").unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(ifindex("a\0b").unwrap_err().kind(), io::ErrorKind::InvalidInput);
    }

    /// An `RTM_NEWLINK` reply: headers, then `attrs` (type, body) packed as the kernel does.
    fn reply(ty: u16, attrs: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut m = vec![0u8; 32];
        m[4..6].copy_from_slice(&ty.to_ne_bytes());
        for (t, body) in attrs {
            m.extend_from_slice(&((4 + body.len()) as u16).to_ne_bytes());
            m.extend_from_slice(&t.to_ne_bytes());
            m.extend_from_slice(body);
            m.resize((m.len() + 3) & !3, 0);
        }
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    #[test]
    fn link_reply_gives_the_kind_and_the_peer_namespace_and_refuses_garbage() {
        use rtnl::*;
        let kind = |k: &str| {
            let mut nested = ((5 + k.len()) as u16).to_ne_bytes().to_vec();
            nested.extend_from_slice(&IFLA_INFO_KIND.to_ne_bytes());
            nested.extend_from_slice(k.as_bytes());
            nested.push(0);
            nested
        };
        let mtu = (4u16, 1500u32.to_ne_bytes().to_vec());
        let veth =
            reply(RTM_NEWLINK, &[mtu.clone(), (IFLA_LINKINFO | 0x8000, kind("veth")), (IFLA_LINK_NETNSID, 3i32.to_ne_bytes().to_vec())]);
        assert_eq!(parse_link_reply(&veth).unwrap(), LinkInfo { kind: "veth".into(), peer_elsewhere: true });
        let plain = reply(RTM_NEWLINK, &[mtu]);
        assert_eq!(parse_link_reply(&plain).unwrap(), LinkInfo::default());
        // nlmsghdr, then nlmsgerr: the error and the request's own header.
        let mut err = vec![0u8; 16];
        err[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err.extend_from_slice(&(-libc::ENODEV).to_ne_bytes());
        err.extend_from_slice(&[0; 16]);
        let len = err.len() as u32;
        err[0..4].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(parse_link_reply(&err).unwrap_err().raw_os_error(), Some(libc::ENODEV));
        // Cut anywhere, the reply is refused or read as far as it goes, never a panic.
        for n in 0..veth.len() {
            let _ = parse_link_reply(&veth[..n]);
        }
        assert_eq!(parse_link_reply(&veth[..3]).unwrap_err().kind(), io::ErrorKind::InvalidData);
    }

    proptest::proptest! {
        #[test]
        fn link_reply_decoder_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = rtnl::parse_link_reply(&bytes);
            // The same bytes as the attributes of a well-formed header, so they are walked.
            let mut m = reply(rtnl::RTM_NEWLINK, &[]);
            m.extend_from_slice(&bytes);
            let len = m.len() as u32;
            m[0..4].copy_from_slice(&len.to_ne_bytes());
            let _ = rtnl::parse_link_reply(&m);
        }
    }

    #[test]
    fn pin_to_core_accepts_core_0_and_refuses_nonsense() {
        pin_to_core(0).unwrap();
        assert!(pin_to_core(1 << 20).is_err());
    }

    #[test]
    fn pin_to_cores_sets_the_mask() {
        std::thread::spawn(|| {
            pin_to_cores(&[0]).unwrap();
            // SAFETY: sched_getcpu has no arguments and only reads the calling thread's CPU.
            assert_eq!(unsafe { libc::sched_getcpu() }, 0);
            assert!(pin_to_cores(&[]).is_err());
            assert!(pin_to_cores(&[0, 1 << 20]).is_err());
        })
        .join()
        .unwrap();
    }
}
