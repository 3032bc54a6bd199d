//! The lab topology: generator ▸ DUT ▸ sink, three network namespaces joined by two veth pairs.
//!
//! ```text
//!   ns fp-gen-P-N            ns fp-dut-P-N                 ns fp-sink-P-N
//!  ┌──────────────┐        ┌──────────────────────┐       ┌──────────────┐
//!  │ gen0         ├─veth───┤ dut0   [DUT]   dut1  ├─veth──┤ sink0        │
//!  │ 198.18.0.1/24│        │ (no addresses)       │       │ 198.18.0.2/24│
//!  └──────────────┘        └──────────────────────┘       └──────────────┘
//! ```
//!
//! Names carry the process id and a per-process counter, so parallel tests and concurrent lab
//! runs never collide, and a crashed run's leftovers can be recognised ([`cleanup_stale`]).
//! Addresses come from 198.18.0.0/15, the benchmarking range of RFC 2544 §C.2.2; IPv6 is
//! switched off in every namespace so no router solicitations or DAD probes disturb counts.
//! Everything is created with `ip` (iproute2) and removed by [`Topology::teardown`], which runs
//! on `Drop` — after a panic in the run too — and kills by PID any process still inside the
//! namespaces (they can only be processes the lab started there). SIGINT/SIGTERM set a flag
//! ([`install_ctrlc`]); runners check it between trials and return [`LabError::Interrupted`], so
//! the guard still runs.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use fastpath_io::netns::{Netns, VethPair};
use fastpath_io::signals::{self, SecondSignal};

use crate::LabError;

/// Namespace name prefix of everything the lab creates.
pub const PREFIX: &str = "fp-";

/// Options for [`Topology::create`].
#[derive(Clone, Debug)]
pub struct TopoConfig {
    /// MTU of all four veth ends (bytes of L3 payload).
    pub mtu: u32,
    /// Enable GRO on the DUT-facing veths. A veth receives XDP-redirected frames (the
    /// generator's live frames) only when it has GRO on or an XDP program attached.
    pub gro: bool,
}

impl Default for TopoConfig {
    fn default() -> TopoConfig {
        TopoConfig { mtu: 1500, gro: true }
    }
}

/// A created generator ▸ DUT ▸ sink topology. Dropping it tears it down.
#[derive(Debug)]
pub struct Topology {
    /// Generator namespace name.
    pub gen_ns: String,
    /// DUT namespace name.
    pub dut_ns: String,
    /// Sink namespace name.
    pub sink_ns: String,
    /// Generator interface (in `gen_ns`).
    pub gen_if: &'static str,
    /// DUT ingress interface, peer of `gen_if` (in `dut_ns`).
    pub dut_in: &'static str,
    /// DUT egress interface, peer of `sink_if` (in `dut_ns`).
    pub dut_out: &'static str,
    /// Sink interface (in `sink_ns`).
    pub sink_if: &'static str,
    /// Generator address.
    pub gen_ip: Ipv4Addr,
    /// Sink address.
    pub sink_ip: Ipv4Addr,
    /// Generator MAC (source of generated frames).
    pub gen_mac: [u8; 6],
    /// Sink MAC (destination of generated frames).
    pub sink_mac: [u8; 6],
    /// Veths before namespaces: dropped in this order.
    veths: Vec<VethPair>,
    live: Vec<Netns>,
}

/// Stops a process the lab started: SIGTERM by its PID, then SIGKILL if it is still running
/// after `grace`; reaps it either way.
pub fn stop_child(c: &mut std::process::Child, grace: std::time::Duration) {
    if let Ok(None) = c.try_wait() {
        let _ = run_cmd("kill", &["-TERM", &c.id().to_string()]);
    }
    let t0 = std::time::Instant::now();
    loop {
        match c.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) if t0.elapsed() > grace => {
                let _ = c.kill();
                let _ = c.wait();
                return;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

/// Runs `cmd args…` and returns its stdout.
///
/// # Errors
/// [`LabError::Cmd`] with the command line, exit status and stderr when it fails or cannot start.
pub fn run_cmd(cmd: &str, args: &[&str]) -> Result<String, LabError> {
    let line = || format!("{cmd} {}", args.join(" "));
    let out = Command::new(cmd).args(args).stdin(Stdio::null()).output().map_err(|e| LabError::Cmd {
        cmd: line(),
        status: -1,
        stderr: e.to_string(),
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(LabError::Cmd { cmd: line(), status: out.status.code().unwrap_or(-1), stderr });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `args` inside namespace `ns` (`ip netns exec`) and returns stdout.
///
/// # Errors
/// As [`run_cmd`].
pub fn ns_exec(ns: &str, args: &[&str]) -> Result<String, LabError> {
    let mut a = vec!["netns", "exec", ns];
    a.extend_from_slice(args);
    run_cmd("ip", &a)
}

fn ns_path(ns: &str) -> std::path::PathBuf {
    std::path::PathBuf::from("/var/run/netns").join(ns)
}

/// Runs `f` on a new thread that has entered network namespace `ns` (and, while a DUT core is
/// reserved, is pinned to [`tester_cpus`]), and returns its result.
///
/// # Errors
/// [`LabError::Io`] when the namespace cannot be entered; a panic in `f` is re-raised.
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> Result<T, LabError> {
    std::thread::scope(|s| {
        let h = s.spawn(move || -> Result<T, LabError> {
            enter_netns(ns)?;
            pin_to_tester_cpus()?;
            Ok(f())
        });
        match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
}

/// Enters namespace `ns` on the calling thread, for threads that live inside one namespace.
///
/// # Errors
/// [`LabError::Io`] when the namespace cannot be entered.
pub fn enter_netns(ns: &str) -> Result<(), LabError> {
    fastpath_io::sys::enter_netns(&ns_path(ns)).map_err(|e| LabError::Io(format!("entering netns {ns}: {e}")))
}

/// The CPU reserved for the device under test; `usize::MAX` when none is.
static DUT_CORE: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Reserves `core` for the device under test (`None` lifts the reservation). While a core is
/// reserved, the lab keeps its own work off it: every thread [`in_netns`] starts (generator,
/// latency probes, sink counter) runs on [`tester_cpus`]. A DUT then competes for its core with
/// no thread the lab runs, as with a separate tester box in RFC 2544 §6. One piece of the
/// tester stays on the DUT's core: a veth receives in the softirq of the CPU that sent, so the
/// sink's receive path runs where the DUT transmits — which is also where the probes' kernel
/// receive stamp is taken, right as the DUT's frame arrives. [`crate::dut::Dut::start`]
/// reserves the DUT's core and `stop` lifts it.
pub fn reserve_dut_core(core: Option<usize>) {
    DUT_CORE.store(core.unwrap_or(usize::MAX), Ordering::SeqCst);
}

/// The reserved DUT core, if any.
pub fn dut_core() -> Option<usize> {
    let c = DUT_CORE.load(Ordering::SeqCst);
    (c != usize::MAX).then_some(c)
}

/// The CPUs the lab's own threads use: all but the reserved DUT core (all of them when no core
/// is reserved or the machine has only one).
pub fn tester_cpus() -> Vec<usize> {
    let n = fastpath_io::sys::available_cores();
    let all: Vec<usize> = (0..n).collect();
    match dut_core() {
        Some(d) if n > 1 && d < n => all.into_iter().filter(|&c| c != d).collect(),
        _ => all,
    }
}

/// The nice value of everything the lab measures with while a DUT runs: the DUT's threads
/// ([`crate::dut::DutConfig::nice`]) and the lab's own traffic threads. On a machine shared with
/// other work (compilers), a polling DUT at nice 0 gets a fair share of its core, not the core:
/// at load 5 the fastpath worker got 23–40 % of core 1 and held frames for the others' time
/// slices (p50 3.4 ms at half rate), and the generator could not offer 0.16 Mpps. At nice -10 a
/// thread outweighs an ordinary one about 9:1 (the worker got its whole core: p50 34 µs). At
/// −20 it also outweighs the machine's own agent, whose thread runs at −10 and preempted the
/// DUT for up to 57 ms at a time: in three runs each of `fastpath lab rfc2544 --sizes 64 --dut
/// fastpath --latency-mpps 0.25 --latency-s 5` (−10 as at commit 36951b2, −20 as since), the
/// longest probe delay fell from 0.16–2.8 ms to 0.08–0.22 ms and the 0 %-loss rate rose from
/// 0.73–0.81 to 0.79–0.94 Mpps. Every DUT gets the same.
pub const LAB_NICE: i32 = -20;

/// Pins the calling thread to [`tester_cpus`] and gives it [`LAB_NICE`] when a DUT core is
/// reserved (else leaves it be).
///
/// # Errors
/// [`LabError::Io`] when the affinity cannot be set (the nice value is best effort).
pub fn pin_to_tester_cpus() -> Result<(), LabError> {
    if dut_core().is_none() {
        return Ok(());
    }
    let cpus = tester_cpus();
    fastpath_io::sys::pin_to_cores(&cpus).map_err(|e| LabError::Io(format!("pinning to CPUs {cpus:?}: {e}")))?;
    let _ = fastpath_io::sys::set_nice(LAB_NICE);
    Ok(())
}

/// The command prefix that starts a tester program (iperf3, …) like the lab's own traffic
/// threads: on [`tester_cpus`] at [`LAB_NICE`] (`taskset -c … nice -n …`), when a DUT core is
/// reserved; empty otherwise.
pub fn tester_prefix() -> Vec<String> {
    if dut_core().is_none() {
        return Vec::new();
    }
    let cpus: Vec<String> = tester_cpus().iter().map(usize::to_string).collect();
    ["taskset", "-c", &cpus.join(","), "nice", "-n", &LAB_NICE.to_string()].map(str::to_owned).to_vec()
}

/// PIDs of all NAPI kernel threads (`napi/<dev>-<id>`).
pub fn napi_threads() -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(c) = std::fs::read_to_string(format!("/proc/{pid}/comm")) {
                if c.starts_with("napi/") {
                    out.push(pid);
                }
            }
        }
    }
    out
}

/// Switches `ifname` (in namespace `ns`) to threaded NAPI, so its receive processing runs in
/// kernel threads instead of the softirq of whichever CPU queued the frames, and pins those
/// threads to `cpus` (unpinned when `cpus` is empty). Returns the threads' PIDs.
///
/// # Errors
/// [`LabError::Cmd`] when the interface has no `threaded` switch or a thread cannot be pinned.
pub fn thread_napi(ns: &str, ifname: &str, cpus: &[usize]) -> Result<Vec<u32>, LabError> {
    let before = napi_threads();
    ns_exec(ns, &["sh", "-c", &format!("echo 1 > /sys/class/net/{ifname}/threaded")])?;
    // The kernel starts the threads synchronously, but give /proc a moment.
    let mut new = Vec::new();
    for _ in 0..20 {
        new = napi_threads().into_iter().filter(|p| !before.contains(p)).collect();
        if !new.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    if !cpus.is_empty() {
        let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
        for pid in &new {
            run_cmd("taskset", &["-pc", &list.join(","), &pid.to_string()])?;
        }
    }
    Ok(new)
}

/// Installs SIGINT/SIGTERM handlers that set the lab's interrupted flag (checked by runners
/// between trials, so the topology's drop guard still runs). The flag is the process's one stop
/// flag, [`fastpath_io::signals`]; a second Ctrl-C does not exit (teardown must still run).
///
/// # Errors
/// [`LabError::Io`] when the handler cannot be registered.
pub fn install_ctrlc() -> Result<(), LabError> {
    signals::install_stop_signals(SecondSignal::Ignore)?;
    Ok(())
}

/// True once Ctrl-C (SIGINT) or SIGTERM arrived after [`install_ctrlc`].
pub fn interrupted() -> bool {
    signals::stopped()
}

/// Sets or clears the interrupted flag by hand (tests inject a Ctrl-C with it).
pub fn set_interrupted(v: bool) {
    signals::set_stopped(v);
}

/// Namespaces currently present whose name starts with `prefix`.
pub fn namespaces(prefix: &str) -> Vec<String> {
    let Ok(out) = run_cmd("ip", &["netns", "list"]) else {
        return Vec::new();
    };
    out.lines().filter_map(|l| l.split_whitespace().next()).filter(|n| n.starts_with(prefix)).map(str::to_owned).collect()
}

/// PIDs of processes running inside namespace `ns`.
pub fn ns_pids(ns: &str) -> Vec<i32> {
    run_cmd("ip", &["netns", "pids", ns]).map(|o| o.split_whitespace().filter_map(|p| p.parse().ok()).collect()).unwrap_or_default()
}

/// Removes lab namespaces left behind by lab processes that no longer exist (a crash or
/// SIGKILL). Returns the names it removed.
pub fn cleanup_stale() -> Vec<String> {
    let mut removed = Vec::new();
    for ns in namespaces(PREFIX) {
        // fp-<role>-<pid>-<n>
        let pid: Option<u32> = ns.split('-').nth(2).and_then(|p| p.parse().ok());
        if let Some(pid) = pid {
            if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                kill_all(&ns);
                if run_cmd("ip", &["netns", "del", &ns]).is_ok() {
                    removed.push(ns);
                }
            }
        }
    }
    removed
}

/// Kills any process left inside the namespaces of `live` (by PID: only the lab starts processes
/// there), then deletes the veth pairs and the namespaces. Idempotent. Every topology's teardown.
///
/// # Errors
/// [`LabError::Io`] naming the namespaces that could not be deleted.
pub(crate) fn teardown_namespaces(live: &mut Vec<Netns>, veths: &mut Vec<VethPair>) -> Result<(), LabError> {
    for ns in live.iter() {
        kill_all(ns.name());
    }
    veths.clear();
    let names: Vec<String> = live.iter().map(|n| n.name().to_owned()).collect();
    live.clear(); // Netns::drop deletes each namespace
    let left: Vec<String> = namespaces(PREFIX).into_iter().filter(|n| names.contains(n)).collect();
    if left.is_empty() {
        Ok(())
    } else {
        Err(LabError::Io(format!("namespaces not deleted: {}", left.join(", "))))
    }
}

/// What of the namespaces `mine` still exists on the machine: namespaces, and processes in them.
pub(crate) fn leftovers_of<'a>(mine: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let all = namespaces(PREFIX);
    let mut left = Vec::new();
    for ns in mine {
        if all.contains(ns) {
            left.push(format!("netns {ns}"));
            left.extend(ns_pids(ns).into_iter().map(|p| format!("pid {p} in {ns}")));
        }
    }
    left
}

fn kill_all(ns: &str) {
    for pid in ns_pids(ns) {
        // Only processes inside a namespace the lab created: the lab started them.
        let _ = run_cmd("kill", &["-KILL", &pid.to_string()]);
    }
}

/// Reads an interface counter (`rx_packets`, `tx_bytes`, ...) of `ifname` inside `ns`.
///
/// # Errors
/// [`LabError::Cmd`] when the interface or counter does not exist.
pub fn if_counter(ns: &str, ifname: &str, counter: &str) -> Result<u64, LabError> {
    let out = ns_exec(ns, &["cat", &format!("/sys/class/net/{ifname}/statistics/{counter}")])?;
    out.trim().parse().map_err(|_| LabError::Io(format!("bad counter {counter} of {ifname}: {out}")))
}

fn mac_of(ns: &str, ifname: &str) -> Result<[u8; 6], LabError> {
    let out = ns_exec(ns, &["cat", &format!("/sys/class/net/{ifname}/address")])?;
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = out.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(LabError::Io(format!("bad MAC of {ifname}: {out}")));
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(|_| LabError::Io(format!("bad MAC {out}")))?;
    }
    Ok(mac)
}

impl Topology {
    /// Creates the three namespaces, both veth pairs, addresses and routes; all links up.
    ///
    /// # Errors
    /// [`LabError::NotRoot`] without root; [`LabError::Cmd`] for a failing `ip` command (what
    /// was created so far is removed again).
    pub fn create(cfg: &TopoConfig) -> Result<Topology, LabError> {
        if !fastpath_io::sys::is_root() {
            return Err(LabError::NotRoot);
        }
        // Each Netns is removed on drop, so an error part-way leaves nothing behind.
        let gen = Netns::new(&format!("{PREFIX}gen"))?;
        let dut = Netns::new(&format!("{PREFIX}dut"))?;
        let sink = Netns::new(&format!("{PREFIX}sink"))?;
        let mut t = Topology {
            gen_ns: gen.name().to_owned(),
            dut_ns: dut.name().to_owned(),
            sink_ns: sink.name().to_owned(),
            gen_if: "gen0",
            dut_in: "dut0",
            dut_out: "dut1",
            sink_if: "sink0",
            gen_ip: Ipv4Addr::new(198, 18, 0, 1),
            sink_ip: Ipv4Addr::new(198, 18, 0, 2),
            gen_mac: [0; 6],
            sink_mac: [0; 6],
            veths: Vec::new(),
            live: Vec::new(),
        };
        t.veths.push(VethPair::new(&gen, t.gen_if, &dut, t.dut_in)?);
        t.veths.push(VethPair::new(&dut, t.dut_out, &sink, t.sink_if)?);
        t.live = vec![gen, dut, sink];
        t.build(cfg)?;
        Ok(t)
    }

    fn build(&mut self, cfg: &TopoConfig) -> Result<(), LabError> {
        let mtu = cfg.mtu.to_string();
        for ns in [&self.gen_ns, &self.dut_ns, &self.sink_ns] {
            // No IPv6 anywhere in the lab namespaces: no RS/DAD/MLD packets in the counts.
            ns_exec(ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])?;
            ns_exec(ns, &["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])?;
        }
        for (ns, ifn) in self.links() {
            ns_exec(&ns, &["ip", "link", "set", ifn, "mtu", &mtu, "up"])?;
        }
        ns_exec(&self.gen_ns, &["ip", "addr", "add", &format!("{}/24", self.gen_ip), "dev", self.gen_if])?;
        ns_exec(&self.sink_ns, &["ip", "addr", "add", &format!("{}/24", self.sink_ip), "dev", self.sink_if])?;
        if cfg.gro {
            for (ns, ifn) in self.links() {
                // Needs ethtool; without GRO a veth drops XDP-redirected frames, which only the
                // XDP generator sends (the DUTs that attach XDP programs do not need it).
                let _ = ns_exec(&ns, &["ethtool", "-K", ifn, "gro", "on"]);
            }
        }
        self.gen_mac = mac_of(&self.gen_ns, self.gen_if)?;
        self.sink_mac = mac_of(&self.sink_ns, self.sink_if)?;
        // Static neighbours: no ARP in the counted traffic.
        let (gm, sm) = (fmt_mac(&self.gen_mac), fmt_mac(&self.sink_mac));
        let (gip, sip) = (self.gen_ip.to_string(), self.sink_ip.to_string());
        ns_exec(&self.gen_ns, &["ip", "neigh", "replace", &sip, "lladdr", &sm, "dev", self.gen_if, "nud", "permanent"])?;
        ns_exec(&self.sink_ns, &["ip", "neigh", "replace", &gip, "lladdr", &gm, "dev", self.sink_if, "nud", "permanent"])?;
        Ok(())
    }

    /// The four (namespace, interface) pairs.
    pub fn links(&self) -> [(String, &'static str); 4] {
        [
            (self.gen_ns.clone(), self.gen_if),
            (self.dut_ns.clone(), self.dut_in),
            (self.dut_ns.clone(), self.dut_out),
            (self.sink_ns.clone(), self.sink_if),
        ]
    }

    /// The namespaces this topology created and still owns.
    pub fn namespaces(&self) -> Vec<String> {
        self.live.iter().map(|n| n.name().to_owned()).collect()
    }

    /// Kills any process left inside the namespaces (by PID) and deletes the namespaces, which
    /// deletes the veth pairs with them. Idempotent.
    ///
    /// # Errors
    /// [`LabError::Cmd`] when a namespace cannot be deleted (it is still attempted for the rest).
    pub fn teardown(&mut self) -> Result<(), LabError> {
        teardown_namespaces(&mut self.live, &mut self.veths)
    }

    /// What of this topology still exists on the machine: namespaces, and processes in them.
    /// Empty after a clean teardown.
    pub fn leftovers(&self) -> Vec<String> {
        leftovers_of([&self.gen_ns, &self.dut_ns, &self.sink_ns])
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn fmt_mac(m: &[u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}
