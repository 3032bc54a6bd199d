//! Operating-system helpers around the ports: interface indexes, network namespaces, CPU
//! pinning, scheduling priority, the real-time clock and the root check.
//!
//! Each is one system call (or a `/proc`/`/sys` read) with its error turned into an
//! `io::Error`; none of them knows about ports, pools or BPF, so every other module of the
//! crate may use this one and this one uses none of them.
//!
//! Thread: control path (a worker calls the pinning and namespace helpers once, at start, on
//! itself).

use std::io;
use std::os::fd::AsRawFd;

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
