//! Test topologies: network namespaces and veth pairs that clean up after themselves.
//!
//! ```text
//!   Netns "fp-a-<pid>-<n>"            Netns "fp-b-<pid>-<n>"
//!   ┌──────────────┐   VethPair   ┌──────────────┐
//!   │   veth0  ────┼──────────────┼──── veth1    │
//!   └──────────────┘              └──────────────┘
//! ```
//! Everything is done by shelling out to iproute2 (`ip netns add`, `ip link add … type veth`),
//! so this module has no `unsafe`. Code that must open sockets inside a namespace runs in a
//! helper thread that first joins it ([`Netns::run`], via `sys::enter_netns`): sockets
//! stay in the namespace they were created in, so the port can be used from any thread after.
//! Names carry the process id and a counter, so parallel tests never collide. Dropping a
//! [`Netns`] deletes it (and with it every interface inside); dropping a [`VethPair`] deletes the
//! link. Both run during unwinding too, so a failing test leaves nothing behind. IPv6 is
//! disabled on created links so the kernel does not send router solicitations into a test.
//!
//! Thread: control path / tests only. Needs root.

use std::io;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::sys;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn run(cmd: &str, args: &[&str]) -> io::Result<String> {
    let out = Command::new(cmd).args(args).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!("`{cmd} {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `ip ARGS`.
///
/// # Errors
/// When `ip` is missing or exits non-zero (its stderr is in the message).
pub fn ip(args: &[&str]) -> io::Result<String> {
    run("ip", args)
}

/// A network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a namespace named `<prefix>-<pid>-<n>` with loopback up.
    ///
    /// # Errors
    /// When `ip netns add` fails (not root, iproute2 missing).
    pub fn new(prefix: &str) -> io::Result<Netns> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace's file, for `setns`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.name)
    }

    /// Runs `ip -n NAME ARGS`.
    ///
    /// # Errors
    /// When the command fails.
    pub fn ip(&self, args: &[&str]) -> io::Result<String> {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        ip(&a)
    }

    /// Runs a program inside the namespace (`ip netns exec NAME PROG ARGS`) and returns stdout.
    ///
    /// # Errors
    /// When the program fails.
    pub fn exec(&self, prog: &str, args: &[&str]) -> io::Result<String> {
        let mut a = vec!["netns", "exec", self.name.as_str(), prog];
        a.extend_from_slice(args);
        ip(&a)
    }

    /// A statistics counter of `iface` in the namespace (`rx_packets`, `tx_bytes`, … under
    /// `/sys/class/net/IFACE/statistics`).
    ///
    /// # Errors
    /// No such interface or counter; a value that is not a number.
    pub fn if_counter(&self, iface: &str, counter: &str) -> io::Result<u64> {
        let out = self.exec("cat", &[&format!("/sys/class/net/{iface}/statistics/{counter}")])?;
        out.trim().parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{counter} of {iface}: {out:?}")))
    }

    /// Sets a sysctl inside the namespace (`sysctl -w KEY=VALUE`).
    ///
    /// # Errors
    /// When `sysctl` fails.
    pub fn sysctl(&self, key: &str, value: &str) -> io::Result<()> {
        self.exec("sysctl", &["-q", "-w", &format!("{key}={value}")]).map(|_| ())
    }

    /// Runs `f` on a thread that has joined this namespace, and returns its result. Sockets
    /// opened by `f` belong to the namespace.
    ///
    /// # Errors
    /// When joining the namespace fails. A panic in `f` is propagated.
    pub fn run<T: Send, F: FnOnce() -> T + Send>(&self, f: F) -> io::Result<T> {
        let path = self.path();
        std::thread::scope(|s| {
            let h = s.spawn(move || {
                sys::enter_netns(&path)?;
                Ok(f())
            });
            match h.join() {
                Ok(r) => r,
                Err(p) => std::panic::resume_unwind(p),
            }
        })
    }

    /// Brings `iface` up and disables IPv6 on it (no router solicitations, no DAD traffic).
    ///
    /// # Errors
    /// When the interface does not exist.
    pub fn link_up(&self, iface: &str) -> io::Result<()> {
        self.sysctl(&format!("net.ipv6.conf.{iface}.disable_ipv6"), "1")?;
        self.ip(&["link", "set", iface, "up"]).map(|_| ())
    }

    /// Adds an address (`198.18.0.1/24`) to `iface`.
    ///
    /// # Errors
    /// When `ip addr add` fails.
    pub fn add_addr(&self, iface: &str, cidr: &str) -> io::Result<()> {
        self.ip(&["addr", "add", cidr, "dev", iface]).map(|_| ())
    }

    /// Sets `iface`'s MTU.
    ///
    /// # Errors
    /// When `ip link set mtu` fails.
    pub fn set_mtu(&self, iface: &str, mtu: u32) -> io::Result<()> {
        self.ip(&["link", "set", iface, "mtu", &mtu.to_string()]).map(|_| ())
    }

    /// The interface's index inside the namespace.
    ///
    /// # Errors
    /// When there is no such interface.
    pub fn ifindex(&self, iface: &str) -> io::Result<u32> {
        let iface = iface.to_string();
        self.run(move || sys::ifindex(&iface))?
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace destroys the interfaces in it; the name is ours alone.
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// A veth pair between two namespaces (or one namespace twice), deleted on drop.
#[derive(Debug)]
pub struct VethPair {
    ns_a: String,
    if_a: String,
    /// Queues per direction.
    pub queues: u32,
}

impl VethPair {
    /// Creates `if_a` in `ns_a` and `if_b` in `ns_b`, both up, IPv6 off, one queue each.
    ///
    /// # Errors
    /// When `ip link add` fails (name taken, not root).
    pub fn new(ns_a: &Netns, if_a: &str, ns_b: &Netns, if_b: &str) -> io::Result<VethPair> {
        VethPair::with_queues(ns_a, if_a, ns_b, if_b, 1)
    }

    /// As [`VethPair::new`], with `queues` rx and tx queues on each end (for multi-queue AF_XDP).
    ///
    /// # Errors
    /// When `ip link add` fails.
    pub fn with_queues(ns_a: &Netns, if_a: &str, ns_b: &Netns, if_b: &str, queues: u32) -> io::Result<VethPair> {
        let q = queues.to_string();
        ns_a.ip(&[
            "link",
            "add",
            if_a,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            if_b,
            "netns",
            ns_b.name(),
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
        ])?;
        let pair = VethPair { ns_a: ns_a.name().to_string(), if_a: if_a.to_string(), queues };
        ns_a.link_up(if_a)?;
        ns_b.link_up(if_b)?;
        Ok(pair)
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting one end deletes both. Already gone if its namespace was deleted first.
        let _ = ip(&["-n", &self.ns_a, "link", "del", &self.if_a]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::is_root;

    #[test]
    fn netns_and_veth_are_created_and_removed() {
        if !is_root() {
            eprintln!("not root: skipped");
            return;
        }
        let name;
        {
            let a = Netns::new("fp-t").unwrap();
            let b = Netns::new("fp-t").unwrap();
            name = a.name().to_string();
            let _v = VethPair::with_queues(&a, "t0", &b, "t1", 2).unwrap();
            assert!(ip(&["netns", "list"]).unwrap().contains(&name));
            let link = a.ip(&["-d", "link", "show", "t0"]).unwrap();
            assert!(link.contains("state UP") || link.contains("LOWERLAYERDOWN") || link.contains(",UP"), "{link}");
            assert!(a.ifindex("t0").unwrap() > 0);
            assert!(a.ifindex("t1").is_err());
            a.add_addr("t0", "198.18.0.1/24").unwrap();
            assert!(a.ip(&["addr", "show", "t0"]).unwrap().contains("198.18.0.1/24"));
            assert_eq!(a.exec("cat", &["/proc/sys/net/ipv6/conf/t0/disable_ipv6"]).unwrap().trim(), "1");
        }
        assert!(!ip(&["netns", "list"]).unwrap().contains(&name));
    }

    #[test]
    fn link_info_tells_a_veth_whose_peer_is_in_another_namespace() {
        use crate::sys::{link_info, LinkInfo};
        if !is_root() {
            eprintln!("not root: skipped");
            return;
        }
        let (a, b) = (Netns::new("fp-t").unwrap(), Netns::new("fp-t").unwrap());
        let _across = VethPair::new(&a, "x0", &b, "x1").unwrap();
        let _within = VethPair::new(&a, "w0", &a, "w1").unwrap();
        let info = |ns: &Netns, i: &str| {
            let idx = ns.ifindex(i).unwrap();
            ns.run(move || link_info(idx)).unwrap().unwrap()
        };
        assert_eq!(info(&a, "x0"), LinkInfo { kind: "veth".into(), peer_elsewhere: true });
        assert_eq!(info(&b, "x1"), LinkInfo { kind: "veth".into(), peer_elsewhere: true });
        assert_eq!(info(&a, "w0"), LinkInfo { kind: "veth".into(), peer_elsewhere: false });
        assert_eq!(info(&a, "lo"), LinkInfo { kind: String::new(), peer_elsewhere: false });
        let missing = a.run(|| link_info(999_999)).unwrap().unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(libc::ENODEV), "{missing}");
    }

    #[test]
    fn run_executes_inside_the_namespace() {
        if !is_root() {
            return;
        }
        let a = Netns::new("fp-t").unwrap();
        let outside = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        let inside = a.run(|| std::fs::read_link("/proc/thread-self/ns/net").unwrap()).unwrap();
        assert_ne!(inside, outside);
    }
}
