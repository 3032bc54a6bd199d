//! `bng-dhcp`: real DHCP clients through the broadband user plane and control plane.
//!
//! ```text
//!  N subscriber namespaces ══ access bridge (taggers) ══ fastpath run vbng ══ core namespace
//!  udhcpc / dhclient              + S-tag + C-tag          │ CPRi ▲▼ PFCP      198.18.0.1, VLAN 10
//!                                                          fastpath bng-cp   ping, iperf3 -s
//! ```
//! ([`crate::bng::dhcp_hosts`] builds it.) The phases, in order, each bounded:
//! 1. **Leases.** Every client starts at once; each one's lease latency runs from its start to
//!    its hook's `bound` (the clients' own timestamps); leases per second over the whole set.
//! 2. **Sessions.** The user plane's `down_session` table holds each lease's address with the
//!    client's port, S-VLAN, C-VLAN and MAC.
//! 3. **Forwarding.** Every subscriber pings the core host; a few run iperf3 to it.
//! 4. **Spoofing.** One subscriber replaces its address by hand: its pings fail and the user
//!    plane's `spoofed_source` drops rise; its own address is put back.
//! 5. **Release and expiry.** A udhcpc release (SIGUSR2) and a `dhclient -r` remove their
//!    sessions; the short-lease subscriber's client is killed and its session goes at expiry.
//! 6. **perfdhcp** (optional, `perfdhcp_rate`): DORA exchanges per second
//!    ([`crate::bng::dhcp_relay`] describes the path).
//! 7. **Restarts.** The control plane is killed (SIGKILL) and started on the same store: the
//!    sessions are unchanged and renewals are ACKed. Then the user plane is killed and
//!    started: its sessions must come back from the control plane's store.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::bng::dhcp_hosts::{self, Client, ClientKind, Hosts, SessionTable, Sub, CORE_IP, EXPIRY_SVLAN};
use crate::bng::dhcp_relay::{self, PerfdhcpResult};
use crate::bng::plan;
use crate::report::{Chart, Report};
use crate::topo::{self, stop_child};
use crate::LabError;

/// Configuration of a run.
#[derive(Clone, Debug)]
pub struct DhcpConfig {
    /// Subscribers (one namespace and one client each), 1..=1000.
    pub subscribers: u32,
    /// How many of them run ISC dhclient (the first ones); the rest run udhcpc.
    pub dhclients: u32,
    /// Lease time of the short-lease subscriber's pool, seconds (0: no expiry check).
    pub expiry_lease_s: u32,
    /// Lease time of every other subscriber, seconds.
    pub lease_s: u32,
    /// Bound on the lease phase, seconds.
    pub lease_bound_s: u64,
    /// Subscribers that run iperf3 to the core host (one after the other).
    pub iperf_clients: u32,
    /// Seconds of each iperf3 run.
    pub iperf_s: u32,
    /// Kill and restart the control plane.
    pub restart_cp: bool,
    /// Kill and restart the user plane.
    pub restart_up: bool,
    /// Bound on a restart's recovery, seconds.
    pub restart_bound_s: u64,
    /// perfdhcp's offered rates, DORA exchanges per second, one run each (empty: no perfdhcp
    /// phase).
    pub perfdhcp_rates: Vec<u32>,
    /// perfdhcp's seconds.
    pub perfdhcp_s: u32,
    /// The `fastpath` binary.
    pub fastpath_exe: PathBuf,
    /// `pipelines/vbng.toml`.
    pub vbng_spec: PathBuf,
    /// Where the store, configs and logs go (removed by the caller).
    pub work_dir: PathBuf,
}

impl Default for DhcpConfig {
    fn default() -> DhcpConfig {
        DhcpConfig {
            subscribers: 100,
            dhclients: 1,
            expiry_lease_s: 8,
            lease_s: 3600,
            lease_bound_s: 90,
            iperf_clients: 1,
            iperf_s: 2,
            restart_cp: true,
            restart_up: true,
            restart_bound_s: 20,
            perfdhcp_rates: Vec::new(),
            perfdhcp_s: 5,
            fastpath_exe: PathBuf::from("fastpath"),
            vbng_spec: PathBuf::from("pipelines/vbng.toml"),
            work_dir: std::env::temp_dir(),
        }
    }
}

/// What a check of one behaviour found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Check {
    /// The behaviour was as required.
    pub ok: bool,
    /// What was seen, for a person.
    pub detail: String,
    /// Seconds it took (to removal, to recovery), when that is the measure.
    pub seconds: Option<f64>,
}

/// An iperf3 run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IperfRun {
    /// Subscriber index.
    pub subscriber: u32,
    /// `up` (subscriber to core) or `down` (`-R`).
    pub direction: &'static str,
    /// Received, Mbit/s (0 when it failed).
    pub mbps: f64,
}

/// The run's results (one JSON line, plus one for perfdhcp).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct DhcpResults {
    /// `"bng-dhcp"`.
    pub measurement: &'static str,
    /// Subscribers (clients).
    pub subscribers: u32,
    /// Of them, ISC dhclient.
    pub dhclients: u32,
    /// Seconds to build the namespaces, veths and taggers.
    pub setup_s: f64,
    /// Clients of the lease phase (all but the short-lease one, which leases alone later) that
    /// got a lease within the bound.
    pub leases: u32,
    /// Clients that did not (the short-lease one included).
    pub lease_failures: u32,
    /// Seconds from the first client's start to the last one's (each is an `ip netns exec`
    /// of the client: on a small machine starting them is part of what the lease rate shows).
    pub clients_start_s: f64,
    /// Leases per second: leases ÷ (last bound − first start).
    pub leases_per_s: f64,
    /// The same for the first 99 % of the leases (one slow client, e.g. dhclient backing off,
    /// does not decide it).
    pub leases_per_s_99pct: f64,
    /// Lease latency (start to bound), seconds.
    pub lease_latency_p50_s: f64,
    /// 99th percentile.
    pub lease_latency_p99_s: f64,
    /// Slowest.
    pub lease_latency_max_s: f64,
    /// Leases whose session the user plane holds with the client's line and MAC.
    pub sessions_matching: u32,
    /// Sessions on the user plane after the lease phase.
    pub sessions: u32,
    /// Subscribers whose ping to the core host was answered.
    pub pings_ok: u32,
    /// iperf3 runs.
    pub iperf: Vec<IperfRun>,
    /// A subscriber with a hand-set address is dropped as spoofed.
    pub spoofing: Check,
    /// udhcpc's release removes the session.
    pub release_udhcpc: Check,
    /// `dhclient -r` removes the session.
    pub release_dhclient: Check,
    /// The short lease's expiry removes the session.
    pub expiry: Check,
    /// Control plane killed and restarted: no session lost or re-created, renewals ACKed.
    pub cp_restart: Check,
    /// User plane killed and restarted: every session back.
    pub up_restart: Check,
    /// perfdhcp's runs, one per rate (their own JSON lines).
    #[serde(skip)]
    pub perfdhcp: Vec<PerfdhcpResult>,
    /// The highest offered rate perfdhcp completed with no drop, exchanges per second (0: none).
    pub perfdhcp_zero_drop_rate: u32,
    /// Lease latencies (s) of every client, in start order (for the report's chart).
    #[serde(skip)]
    pub latencies_s: Vec<f64>,
}

/// The user plane process.
struct UserPlane {
    child: Child,
    ctl: PathBuf,
    exe: PathBuf,
}

impl UserPlane {
    fn start(cfg: &DhcpConfig, hosts: &Hosts, entries: &std::path::Path, log: &str) -> Result<UserPlane, LabError> {
        let ctl = cfg.work_dir.join("up.sock");
        let _ = std::fs::remove_file(&ctl);
        let child = Command::new("ip")
            .args(["netns", "exec", hosts.up.name()])
            .arg(&cfg.fastpath_exe)
            .arg("run")
            .arg(&cfg.vbng_spec)
            .arg("--entries")
            .arg(entries)
            .args(["--port", "access=afpacket:acc0", "--port", "core=afpacket:cor0", "--idle-sleep", "50", "--no-pin"])
            .args(["--cpri", "127.0.0.1:2152", "--pfcp", "127.0.0.1", "--ctl"])
            .arg(&ctl)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(cfg.work_dir.join(log))?)
            .spawn()
            .map_err(|e| LabError::Io(format!("{}: {e}", cfg.fastpath_exe.display())))?;
        let mut up = UserPlane { child, ctl, exe: cfg.fastpath_exe.clone() };
        let t0 = Instant::now();
        loop {
            if let Ok(Some(st)) = up.child.try_wait() {
                let log = std::fs::read_to_string(cfg.work_dir.join(log)).unwrap_or_default();
                return Err(LabError::Io(format!("fastpath run exited ({st}): {}", log.trim())));
            }
            if up.ctl("show sessions").is_some_and(|s| s.contains("session(s)")) {
                break;
            }
            if t0.elapsed() > Duration::from_secs(20) {
                return Err(LabError::Io("fastpath run: its control socket did not answer within 20 s".into()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // The control socket answers before the workers' ports are open: ready once the
        // access port answers an ARP for the gateway.
        if !dhcp_hosts::gateway_answers(&hosts.access, "upl0", dhcp_hosts::PROBE_LINE, Duration::from_secs(20))? {
            return Err(LabError::Io("fastpath run: no ARP answer from its access port within 20 s".into()));
        }
        Ok(up)
    }

    /// One `fastpath ctl` request; None when it failed.
    fn ctl(&self, what: &str) -> Option<String> {
        let out = Command::new(&self.exe).args(["ctl", "--socket"]).arg(&self.ctl).arg(what).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn sessions(&self) -> SessionTable {
        self.ctl("show table down_session").map(|t| dhcp_hosts::parse_down_sessions(&t)).unwrap_or_default()
    }

    /// The sum of every stage's `reason` drops.
    fn drops(&self, reason: &str) -> u64 {
        self.ctl("show counters json").and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()).map_or(0, |v| sum_key(&v, reason))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for UserPlane {
    fn drop(&mut self) {
        stop_child(&mut self.child, Duration::from_secs(2));
    }
}

/// The sum of every number under key `k`, anywhere in `v`.
fn sum_key(v: &serde_json::Value, k: &str) -> u64 {
    match v {
        serde_json::Value::Object(m) => m.iter().map(|(key, x)| if key == k { x.as_u64().unwrap_or(0) } else { sum_key(x, k) }).sum(),
        serde_json::Value::Array(a) => a.iter().map(|x| sum_key(x, k)).sum(),
        _ => 0,
    }
}

/// The control plane process.
struct ControlPlane {
    child: Child,
}

impl ControlPlane {
    fn start(cfg: &DhcpConfig, hosts: &Hosts, config: &std::path::Path, log: &str) -> Result<ControlPlane, LabError> {
        let child = Command::new("ip")
            .args(["netns", "exec", hosts.up.name()])
            .arg(&cfg.fastpath_exe)
            .args(["bng-cp", "--config"])
            .arg(config)
            .args(["--stats-s", "5"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(cfg.work_dir.join(log))?)
            .spawn()
            .map_err(|e| LabError::Io(format!("{} bng-cp: {e}", cfg.fastpath_exe.display())))?;
        let mut cp = ControlPlane { child };
        // Ready once its sockets are bound and its store is open (its first line).
        let path = cfg.work_dir.join(log);
        let t0 = Instant::now();
        loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.contains("bng-cp: CPRi (GTP-U) on") {
                return Ok(cp);
            }
            if let Ok(Some(st)) = cp.child.try_wait() {
                return Err(LabError::Io(format!("fastpath bng-cp exited ({st}): {}", text.trim())));
            }
            if t0.elapsed() > Duration::from_secs(20) {
                return Err(LabError::Io(format!("fastpath bng-cp did not start within 20 s: {}", text.trim())));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        stop_child(&mut self.child, Duration::from_secs(2));
    }
}

/// The control plane's configuration: one pool for everyone, a short-lease pool for S-VLAN
/// [`EXPIRY_SVLAN`].
pub fn cp_config(store: &str, lease_s: u32, expiry_lease_s: u32) -> String {
    let short = if expiry_lease_s > 0 {
        format!(
            "[[dhcp.pool]]\nname = \"short-lease\"\nsvlans = [{EXPIRY_SVLAN}]\nfirst = \"100.64.250.1\"\nlast = \"100.64.250.250\"\nmask = \"255.255.0.0\"\nlease_time_s = {expiry_lease_s}\n"
        )
    } else {
        String::new()
    };
    format!(
        r#"store = "{store}"
[cpri]
listen = "127.0.0.1:2152"
up_id = 1
[pfcp]
user_plane = "127.0.0.1:8805"
local = "127.0.0.1:0"
ul_kbps = 20000
dl_kbps = 100000
heartbeat_s = 2
[dhcp]
gateway = "{gw}"
gateway_mac = "{gw_mac}"
lease_time_s = {lease_s}
offer_hold_s = 30
[[dhcp.pool]]
name = "subscribers"
first = "100.64.1.0"
last = "100.64.249.255"
mask = "255.255.0.0"
{short}"#,
        gw = plan::GATEWAY_IP,
        gw_mac = plan::mac_text(plan::GATEWAY_MAC),
    )
}

/// The user plane's start entries: ACL profile 0, the gateway's ARP answer, the punt limit and
/// the core route to the core host.
fn up_entries() -> String {
    let mut s = plan::base_entries();
    s.push_str(&format!(
        "table core_route add 198.18.0.0/24 => core_nh({}, {}, {})\n",
        plan::CORE_PORT,
        dhcp_hosts::CORE_VLAN,
        plan::mac_text(dhcp_hosts::CORE_MAC)
    ));
    s
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let k = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[k]
}

fn check_interrupt() -> Result<(), LabError> {
    if topo::interrupted() {
        Err(LabError::Interrupted)
    } else {
        Ok(())
    }
}

/// Waits up to `bound` for `f` to give Some, polling every 200 ms; the seconds it took.
fn wait_until<T>(bound: Duration, mut f: impl FnMut() -> Option<T>) -> Option<(T, f64)> {
    let t0 = Instant::now();
    loop {
        if let Some(x) = f() {
            return Some((x, t0.elapsed().as_secs_f64()));
        }
        if t0.elapsed() > bound || topo::interrupted() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `ping -c COUNT` from subscriber `s` to the core host: replies received.
fn ping(hosts: &Hosts, s: &Sub, count: u32) -> u32 {
    let Ok(out) = hosts.sub_exec(s, &["ping", "-n", "-q", "-c", &count.to_string(), "-i", "0.2", "-W", "1", &CORE_IP.to_string()]) else {
        return 0;
    };
    // "N packets transmitted, M received"
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(',').find_map(|p| p.trim().strip_suffix(" received").and_then(|n| n.trim().parse().ok())).unwrap_or(0)
}

/// Pings from every subscriber in `subs`, 8 at a time: those answered.
fn ping_all(hosts: &Hosts, subs: &[&Sub]) -> Vec<u32> {
    let mut ok = Vec::new();
    for chunk in subs.chunks(8) {
        let res: Vec<(u32, bool)> = std::thread::scope(|sc| {
            let hs: Vec<_> = chunk.iter().map(|s| sc.spawn(move || (s.index, ping(hosts, s, 2) > 0))).collect();
            hs.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        ok.extend(res.into_iter().filter(|r| r.1).map(|r| r.0));
    }
    ok
}

/// One iperf3 run from `s` to a one-off server in the core namespace.
fn iperf(hosts: &Hosts, s: &Sub, seconds: u32, reverse: bool, port: u16) -> f64 {
    let Ok(mut server) = Command::new("ip")
        .args(["netns", "exec", hosts.core.name(), "iperf3", "-s", "-1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return 0.0;
    };
    std::thread::sleep(Duration::from_millis(300));
    let t = seconds.to_string();
    let p = port.to_string();
    let ip = CORE_IP.to_string();
    let limit = (seconds + 10).to_string();
    let mut args = vec!["timeout", limit.as_str(), "iperf3", "-c", ip.as_str(), "-p", p.as_str(), "-t", t.as_str(), "-J"];
    if reverse {
        args.push("-R");
    }
    let out = hosts.sub_exec(s, &args);
    stop_child(&mut server, Duration::from_millis(500));
    let Ok(out) = out else { return 0.0 };
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .ok()
        .and_then(|v| v["end"]["sum_received"]["bits_per_second"].as_f64())
        .map_or(0.0, |b| b / 1e6)
}

/// Runs the test.
///
/// # Errors
/// [`LabError::Config`] for a bad configuration, [`LabError::NotRoot`], [`LabError::Interrupted`],
/// or a failure to set the lab up. Behaviour that is not as required is a failed [`Check`] (or
/// a count) in the results, not an error.
pub fn run(cfg: &DhcpConfig, progress: &mut dyn FnMut(&str)) -> Result<DhcpResults, LabError> {
    if !fastpath_io::sys::is_root() {
        return Err(LabError::NotRoot);
    }
    if cfg.subscribers == 0 || cfg.subscribers > dhcp_hosts::MAX_SUBSCRIBERS {
        return Err(LabError::Config(format!(
            "--subscribers {}: 1 to {} (one access bridge)",
            cfg.subscribers,
            dhcp_hosts::MAX_SUBSCRIBERS
        )));
    }
    if cfg.dhclients > cfg.subscribers {
        return Err(LabError::Config(format!("{} dhclients of {} subscribers", cfg.dhclients, cfg.subscribers)));
    }
    let pid = std::process::id();
    // The short-lease subscriber: the first udhcpc one.
    let expiry_index = (cfg.expiry_lease_s > 0 && cfg.dhclients < cfg.subscribers).then_some(cfg.dhclients);
    let subs: Vec<Sub> = (0..cfg.subscribers).map(|i| dhcp_hosts::sub(i, cfg.dhclients, expiry_index, pid)).collect();
    std::fs::create_dir_all(&cfg.work_dir)?;
    let script = cfg.work_dir.join("dhcp-hook.sh");
    std::fs::write(&script, dhcp_hosts::HOOK_SCRIPT)?;
    let _ = Command::new("chmod").arg("755").arg(&script).status();
    let entries = cfg.work_dir.join("up-entries.txt");
    std::fs::write(&entries, up_entries())?;
    let cp_toml = cfg.work_dir.join("cp.toml");
    let store = cfg.work_dir.join("cp.db");
    std::fs::write(&cp_toml, cp_config(&store.display().to_string(), cfg.lease_s, cfg.expiry_lease_s))?;

    let t0 = Instant::now();
    let hosts = Hosts::create(subs, progress)?;
    let mut r = DhcpResults {
        measurement: "bng-dhcp",
        subscribers: cfg.subscribers,
        dhclients: cfg.dhclients,
        setup_s: t0.elapsed().as_secs_f64(),
        ..DhcpResults::default()
    };
    let mut up = UserPlane::start(cfg, &hosts, &entries, "up.log")?;
    let mut cp = ControlPlane::start(cfg, &hosts, &cp_toml, "cp.log")?;
    progress("bng-dhcp: user plane and control plane started");

    // 1. Leases.
    // The short-lease subscriber starts later, alone (phase 5): its lease must not run out
    // while the others are still leasing.
    let mut clients = ClientsGuard(Vec::with_capacity(hosts.subs.len()));
    for s in hosts.subs.iter().filter(|s| !s.short_lease) {
        clients.push(Client::start(s, &cfg.work_dir, &script)?);
    }
    progress(&format!("bng-dhcp: {} clients started", clients.len()));
    let bound_t0 = Instant::now();
    let (mut last, mut printed) = (0, Instant::now());
    loop {
        check_interrupt()?;
        let n = clients.iter().filter(|c| c.bound().is_some()).count();
        if n != last && (n == clients.len() || printed.elapsed() >= Duration::from_secs(2)) {
            progress(&format!("bng-dhcp: {n}/{} leases after {:.1} s", clients.len(), bound_t0.elapsed().as_secs_f64()));
            (last, printed) = (n, Instant::now());
        }
        if n == clients.len() || bound_t0.elapsed() > Duration::from_secs(cfg.lease_bound_s) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let first_start = clients.iter().map(|c| c.started_s).fold(f64::INFINITY, f64::min);
    r.clients_start_s = clients.iter().map(|c| c.started_s).fold(first_start, f64::max) - first_start;
    let mut last_bound = first_start;
    let mut lat = Vec::new();
    let mut leased: HashMap<u32, Ipv4Addr> = HashMap::new();
    for c in clients.iter() {
        if let Some(b) = c.bound() {
            lat.push(b.at_s - c.started_s);
            last_bound = last_bound.max(b.at_s);
            if let Some(ip) = b.ip {
                leased.insert(c.index, ip);
            }
        }
    }
    r.latencies_s = lat.clone();
    lat.sort_by(f64::total_cmp);
    r.leases = lat.len() as u32;
    r.lease_failures = clients.len() as u32 - r.leases;
    r.leases_per_s = if last_bound > first_start { f64::from(r.leases) / (last_bound - first_start) } else { 0.0 };
    let mut bound_at: Vec<f64> = clients.iter().filter_map(|c| c.bound()).map(|b| b.at_s).collect();
    bound_at.sort_by(f64::total_cmp);
    let k99 = (bound_at.len() * 99).div_ceil(100);
    r.leases_per_s_99pct = match bound_at.get(k99.saturating_sub(1)) {
        Some(&t) if t > first_start => k99 as f64 / (t - first_start),
        _ => 0.0,
    };
    r.lease_latency_p50_s = percentile(&lat, 0.5);
    r.lease_latency_p99_s = percentile(&lat, 0.99);
    r.lease_latency_max_s = lat.last().copied().unwrap_or(0.0);
    progress(&format!(
        "bng-dhcp: {} leases, {} failures, {:.1} leases/s ({:.1}/s for the first 99 %), latency p50 {:.3} s p99 {:.3} s max {:.3} s; the clients took {:.1} s to start",
        r.leases,
        r.lease_failures,
        r.leases_per_s,
        r.leases_per_s_99pct,
        r.lease_latency_p50_s,
        r.lease_latency_p99_s,
        r.lease_latency_max_s,
        r.clients_start_s
    ));

    // 2. Sessions: wait until the PFCP establishments of every lease are in.
    let matches = |t: &SessionTable| {
        hosts
            .subs
            .iter()
            .filter(|s| {
                leased.get(&s.index).is_some_and(|ip| {
                    t.get(ip).is_some_and(|(port, sv, cv, mac)| {
                        *port == plan::ACCESS_PORT && *sv == s.svid && *cv == s.cvid && *mac == plan::mac_text(s.mac)
                    })
                })
            })
            .count() as u32
    };
    let want = r.leases;
    let table = wait_until(Duration::from_secs(10), || {
        let t = up.sessions();
        (matches(&t) == want).then_some(t)
    })
    .map(|x| x.0)
    .unwrap_or_else(|| up.sessions());
    r.sessions = table.len() as u32;
    r.sessions_matching = matches(&table);
    progress(&format!("bng-dhcp: {} sessions on the user plane, {} match their client's lease and line", r.sessions, r.sessions_matching));

    // 3. Forwarding.
    let with_lease: Vec<&Sub> = hosts.subs.iter().filter(|s| leased.contains_key(&s.index)).collect();
    r.pings_ok = ping_all(&hosts, &with_lease).len() as u32;
    progress(&format!("bng-dhcp: {}/{} subscribers reach the core host", r.pings_ok, with_lease.len()));
    let udhcpc_subs: Vec<&Sub> = with_lease.iter().copied().filter(|s| s.client == ClientKind::Udhcpc && !s.short_lease).collect();
    // The user plane forwards frames, not the kernel's 64 KiB TSO/GSO super-packets with
    // checksums left to a NIC: the TCP hosts compute checksums and segment themselves.
    if cfg.iperf_clients > 0 {
        hosts.core.exec("ethtool", &["-K", "eth0", "tx", "off", "tso", "off", "gso", "off"])?;
    }
    for (k, s) in udhcpc_subs.iter().take(cfg.iperf_clients as usize).enumerate() {
        let _ = hosts.sub_exec(s, &["ethtool", "-K", "eth0", "tx", "off", "tso", "off", "gso", "off"]);
        for (reverse, direction) in [(false, "up"), (true, "down")] {
            let mbps = iperf(&hosts, s, cfg.iperf_s, reverse, 5201 + k as u16);
            progress(&format!("bng-dhcp: iperf3 subscriber {} {direction}: {mbps:.1} Mbit/s", s.index));
            r.iperf.push(IperfRun { subscriber: s.index, direction, mbps });
        }
    }
    check_interrupt()?;

    // 4. Spoofing: the last udhcpc subscriber.
    if let Some(s) = udhcpc_subs.last().copied() {
        let own = leased[&s.index];
        let spoof = Ipv4Addr::from(u32::from(own) ^ 0x0000_8000);
        let before = up.drops("spoofed_source");
        let set = |ip: Ipv4Addr| {
            let _ = hosts.sub_exec(s, &["ip", "addr", "flush", "dev", "eth0"]);
            let _ = hosts.sub_exec(s, &["ip", "addr", "add", &format!("{ip}/16"), "dev", "eth0"]);
            let _ = hosts.sub_exec(s, &["ip", "route", "replace", "default", "via", &plan::GATEWAY_IP.to_string(), "dev", "eth0"]);
        };
        set(spoof);
        let answered = ping(&hosts, s, 3);
        let after = up.drops("spoofed_source");
        set(own);
        let back = ping(&hosts, s, 2);
        r.spoofing = Check {
            ok: answered == 0 && after >= before + 3 && back > 0,
            detail: format!(
                "subscriber {} set {spoof} instead of its lease {own}: {answered}/3 pings answered, spoofed_source {before} -> {after}; with its own address again {back}/2 answered",
                s.index
            ),
            seconds: None,
        };
        progress(&format!("bng-dhcp: spoofing: {}", r.spoofing.detail));
    }

    // 5. Release and expiry.
    let gone = |ip: Ipv4Addr, bound: u64| wait_until(Duration::from_secs(bound), || (!up.sessions().contains_key(&ip)).then_some(()));
    if let Some(s) = udhcpc_subs.first().copied() {
        let ip = leased[&s.index];
        let c = clients.iter().find(|c| c.index == s.index);
        let sent = c.is_some_and(|c| c.signal("USR2"));
        let res = gone(ip, 10);
        r.release_udhcpc = Check {
            ok: sent && res.is_some(),
            detail: format!(
                "subscriber {} (udhcpc, SIGUSR2) released {ip}: session {}",
                s.index,
                if res.is_some() { "removed" } else { "still there after 10 s" }
            ),
            seconds: res.map(|x| x.1),
        };
        progress(&format!("bng-dhcp: release: {}", r.release_udhcpc.detail));
    }
    if let Some(s) = with_lease.iter().find(|s| s.client == ClientKind::Dhclient).copied() {
        let ip = leased[&s.index];
        let files = clients.iter().find(|c| c.index == s.index).and_then(|c| c.files.clone());
        let ran = files.is_some_and(|(lf, pf)| {
            let (lf, pf, sf) = (lf.display().to_string(), pf.display().to_string(), script.display().to_string());
            hosts
                .sub_exec(
                    s,
                    &[
                        "dhclient",
                        "-r",
                        "-4",
                        "-lf",
                        &lf,
                        "-pf",
                        &pf,
                        "-sf",
                        &sf,
                        "-e",
                        &format!("FP_HOOK_LOG={}", cfg.work_dir.join("hook-release.log").display()),
                        "eth0",
                    ],
                )
                .is_ok_and(|o| o.status.success())
        });
        let res = gone(ip, 10);
        r.release_dhclient = Check {
            ok: ran && res.is_some(),
            detail: format!(
                "subscriber {} (dhclient -r{}) released {ip}: session {}",
                s.index,
                if ran { "" } else { ", which failed" },
                if res.is_some() { "removed" } else { "still there after 10 s" }
            ),
            seconds: res.map(|x| x.1),
        };
        progress(&format!("bng-dhcp: release: {}", r.release_dhclient.detail));
    }
    if let Some(s) = hosts.subs.iter().find(|s| s.short_lease) {
        r.expiry = expiry(cfg, s, &script, &up, &mut clients, &mut r.lease_failures)?;
        progress(&format!("bng-dhcp: expiry: {}", r.expiry.detail));
    }
    check_interrupt()?;

    // 6. perfdhcp, while everything is as it should be.
    if !cfg.perfdhcp_rates.is_empty() {
        r.perfdhcp = dhcp_relay::run_perfdhcp(&hosts, &cfg.perfdhcp_rates, cfg.perfdhcp_s, &cfg.work_dir, progress)?;
        r.perfdhcp_zero_drop_rate = r
            .perfdhcp
            .iter()
            .filter(|p| p.drops == 0 && p.acks_received > 0 && p.acks_received == p.discovers_sent)
            .map(|p| p.rate)
            .max()
            .unwrap_or(0);
    }
    check_interrupt()?;

    // 7. Restarts. What must survive: every session (the clients' and perfdhcp's).
    let holders: Vec<&Client> = clients.iter().filter(|c| c.address().is_some() && c.child.id() > 0).collect();
    let snapshot = up.sessions();
    if cfg.restart_cp {
        cp.kill();
        cp = ControlPlane::start(cfg, &hosts, &cp_toml, "cp-restarted.log")?;
        // Renewals of a sample of udhcpc clients (SIGUSR1) must be ACKed by the new process.
        let sample: Vec<&Client> = holders
            .iter()
            .copied()
            .filter(|c| hosts.subs[c.index as usize].client == ClientKind::Udhcpc && !hosts.subs[c.index as usize].short_lease)
            .take(5)
            .collect();
        std::thread::sleep(Duration::from_secs(1));
        let renews_before: Vec<usize> = sample.iter().map(|c| c.events().iter().filter(|e| e.event == "renew").count()).collect();
        for c in &sample {
            c.signal("USR1");
        }
        let renewed = wait_until(Duration::from_secs(cfg.restart_bound_s), || {
            sample.iter().zip(&renews_before).all(|(c, n)| c.events().iter().filter(|e| e.event == "renew").count() > *n).then_some(())
        });
        let after = up.sessions();
        let same = after == snapshot;
        let log = std::fs::read_to_string(cfg.work_dir.join("cp-restarted.log")).unwrap_or_default();
        r.cp_restart = Check {
            ok: renewed.is_some() && same,
            detail: format!(
                "control plane killed and restarted: {} of {} sessions unchanged{}; {} renewals {}",
                snapshot.iter().filter(|(k, v)| after.get(k) == Some(v)).count(),
                snapshot.len(),
                if after.len() != snapshot.len() { format!(", {} now", after.len()) } else { String::new() },
                sample.len(),
                if renewed.is_some() { "ACKed" } else { "not all ACKed" },
            ),
            seconds: renewed.map(|x| x.1),
        };
        if !r.cp_restart.ok {
            progress(&format!("bng-dhcp: the restarted control plane's log:\n{}", log.trim()));
        }
        progress(&format!("bng-dhcp: control-plane restart: {}", r.cp_restart.detail));
    }
    check_interrupt()?;
    if cfg.restart_up {
        let snapshot = up.sessions();
        up.kill();
        up = UserPlane::start(cfg, &hosts, &entries, "up-restarted.log")?;
        let back = wait_until(Duration::from_secs(cfg.restart_bound_s), || (up.sessions() == snapshot).then_some(()));
        let after = up.sessions();
        // Subscribers that held a session before the kill (a client released earlier may still
        // show its last address in its hook's log).
        let sample: Vec<&Sub> = holders
            .iter()
            .filter(|c| c.address().is_some_and(|a| snapshot.contains_key(&a)))
            .map(|c| &hosts.subs[c.index as usize])
            .filter(|s| !s.short_lease)
            .take(5)
            .collect();
        let pinged = ping_all(&hosts, &sample).len();
        r.up_restart = Check {
            ok: back.is_some() && pinged == sample.len(),
            detail: format!(
                "user plane killed and restarted: {} of {} sessions back within {} s; {pinged}/{} sampled subscribers reach the core host",
                snapshot.iter().filter(|(k, v)| after.get(k) == Some(v)).count(),
                snapshot.len(),
                cfg.restart_bound_s,
                sample.len()
            ),
            seconds: back.map(|x| x.1),
        };
        progress(&format!("bng-dhcp: user-plane restart: {}", r.up_restart.detail));
    }
    check_interrupt()?;

    for c in clients.iter_mut() {
        c.stop();
    }
    drop(cp);
    drop(up);
    Ok(r)
}

/// Phase 5's expiry: the short-lease subscriber leases, its session appears, its client is
/// killed (it neither renews nor releases), and the session must go when the lease ends.
fn expiry(
    cfg: &DhcpConfig,
    s: &Sub,
    script: &std::path::Path,
    up: &UserPlane,
    clients: &mut ClientsGuard,
    failures: &mut u32,
) -> Result<Check, LabError> {
    clients.push(Client::start(s, &cfg.work_dir, script)?);
    let Some(c) = clients.last_mut() else { return Ok(Check::default()) };
    let Some((b, _)) = wait_until(Duration::from_secs(cfg.lease_bound_s), || c.bound()) else {
        *failures += 1;
        return Ok(Check { ok: false, detail: format!("subscriber {} (S-VLAN {EXPIRY_SVLAN}) got no lease", s.index), seconds: None });
    };
    let Some(ip) = b.ip else { return Ok(Check::default()) };
    let ends = b.at_s + f64::from(cfg.expiry_lease_s);
    let present = wait_until(Duration::from_secs(5), || up.sessions().contains_key(&ip).then_some(())).is_some();
    let _ = c.child.kill();
    let _ = c.child.wait();
    let gone = wait_until(Duration::from_secs(u64::from(cfg.expiry_lease_s) + 15), || (!up.sessions().contains_key(&ip)).then_some(()));
    let removed_at = dhcp_hosts::unix_now_s();
    // The server expires leases once a second, and the lease's end is counted from the ACK
    // (a little before the client's hook ran).
    let on_time = removed_at + 1.0 >= ends;
    Ok(Check {
        ok: present && gone.is_some() && on_time,
        detail: format!(
            "subscriber {} (S-VLAN {EXPIRY_SVLAN}, {} s lease on {ip}, client killed after its bound): session {}, {} {:.1} s after the lease's end",
            s.index,
            cfg.expiry_lease_s,
            if present { "present" } else { "never present" },
            if gone.is_some() { "removed" } else { "still there" },
            removed_at - ends
        ),
        seconds: gone.map(|_| removed_at - ends),
    })
}

/// Stops every client on drop (an error or a panic on the way).
struct ClientsGuard(Vec<Client>);

impl std::ops::Deref for ClientsGuard {
    type Target = Vec<Client>;
    fn deref(&self) -> &Vec<Client> {
        &self.0
    }
}

impl std::ops::DerefMut for ClientsGuard {
    fn deref_mut(&mut self) -> &mut Vec<Client> {
        &mut self.0
    }
}

impl Drop for ClientsGuard {
    fn drop(&mut self) {
        for c in self.0.iter_mut() {
            c.stop();
        }
    }
}

impl DhcpResults {
    /// The JSON lines: the run, then one per perfdhcp rate.
    pub fn json_lines(&self) -> String {
        let mut s = super::json_lines(std::slice::from_ref(self));
        s.push_str(&super::json_lines(&self.perfdhcp));
        s
    }

    /// Every required behaviour held: all leases, every session, every ping, and each check
    /// that ran.
    pub fn failures(&self) -> Vec<String> {
        let mut f = Vec::new();
        if self.lease_failures > 0 {
            f.push(format!("{} clients got no lease", self.lease_failures));
        }
        if self.sessions_matching != self.leases {
            f.push(format!("{} of {} leases have their session on the user plane", self.sessions_matching, self.leases));
        }
        if self.pings_ok != self.leases {
            f.push(format!("{} of {} subscribers reach the core host", self.pings_ok, self.leases));
        }
        for (name, c) in [
            ("spoofing", &self.spoofing),
            ("udhcpc release", &self.release_udhcpc),
            ("dhclient release", &self.release_dhclient),
            ("expiry", &self.expiry),
            ("control-plane restart", &self.cp_restart),
            ("user-plane restart", &self.up_restart),
        ] {
            if !c.ok && !c.detail.is_empty() {
                f.push(format!("{name}: {}", c.detail));
            }
        }
        f
    }

    /// Adds the results to `report`.
    pub fn add_to(&self, report: &mut Report) {
        report.heading("Broadband: real DHCP clients through the user plane (bng-dhcp)");
        report.para(format!(
            "{} subscriber namespaces ({} ISC dhclient, the rest busybox udhcpc), each behind its own S-VLAN/C-VLAN pair, \
             lease through fastpath run (vbng) and fastpath bng-cp (CPRi, PFCP). Setup {:.1} s.",
            self.subscribers, self.dhclients, self.setup_s
        ));
        let row = |k: &str, v: String| vec![k.to_owned(), v];
        let mut rows = vec![
            row("leases", format!("{} of {} ({} failures)", self.leases, self.subscribers, self.lease_failures)),
            row(
                "leases per second (all; first 99 %)",
                format!(
                    "{:.1}; {:.1} (starting the clients took {:.1} s)",
                    self.leases_per_s, self.leases_per_s_99pct, self.clients_start_s
                ),
            ),
            row(
                "lease latency p50 / p99 / max",
                format!("{:.3} / {:.3} / {:.3} s", self.lease_latency_p50_s, self.lease_latency_p99_s, self.lease_latency_max_s),
            ),
            row(
                "sessions matching their lease",
                format!("{} of {} ({} on the user plane)", self.sessions_matching, self.leases, self.sessions),
            ),
            row("subscribers reaching the core host", format!("{}", self.pings_ok)),
        ];
        for i in &self.iperf {
            rows.push(row(&format!("iperf3 subscriber {} {}", i.subscriber, i.direction), format!("{:.1} Mbit/s", i.mbps)));
        }
        for (name, c) in [
            ("spoofed address dropped", &self.spoofing),
            ("udhcpc release", &self.release_udhcpc),
            ("dhclient release", &self.release_dhclient),
            ("lease expiry", &self.expiry),
            ("control-plane restart", &self.cp_restart),
            ("user-plane restart", &self.up_restart),
        ] {
            if !c.detail.is_empty() {
                rows.push(row(name, format!("{}: {}", if c.ok { "ok" } else { "FAILED" }, c.detail)));
            }
        }
        for p in &self.perfdhcp {
            rows.push(row(
                &format!("perfdhcp offering {}/s for {} s", p.rate, p.seconds),
                format!(
                    "{:.0} DORA exchanges/s: {} DISCOVERs, {} ACKs, {} drops; {} UDP receive-buffer overflows in the user plane's namespace",
                    p.dora_per_s, p.discovers_sent, p.acks_received, p.drops, p.udp_rcvbuf_errors
                ),
            ));
        }
        if !self.perfdhcp.is_empty() {
            rows.push(row("perfdhcp: highest rate with zero drops", format!("{}/s", self.perfdhcp_zero_drop_rate)));
        }
        report.table(&["what", "result"], rows);
        let mut sorted = self.latencies_s.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len().max(1) as f64;
        let cdf: Vec<(f64, f64)> = sorted.iter().enumerate().map(|(k, x)| (x * 1000.0, (k + 1) as f64 / n)).collect();
        report.line_chart(
            Chart::new("Lease latency (client start to bound)").x_label("ms").y_label("fraction of clients").series("clients", cdf),
        );
        if !self.perfdhcp.is_empty() {
            let offered: Vec<(f64, f64)> = self.perfdhcp.iter().map(|p| (f64::from(p.rate), f64::from(p.rate))).collect();
            let done: Vec<(f64, f64)> = self.perfdhcp.iter().map(|p| (f64::from(p.rate), p.dora_per_s)).collect();
            report.line_chart(
                Chart::new("perfdhcp through the user plane and control plane")
                    .x_label("offered DORA exchanges/s")
                    .y_label("completed DORA exchanges/s")
                    .series("offered", offered)
                    .series("completed", done),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_sorted_set() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[3.0], 0.99), 3.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn drops_are_summed_wherever_they_are() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{"stages":[{"drops":{"spoofed_source":3,"no_route":1}},{"drops":{"spoofed_source":4}}]}"#).unwrap();
        assert_eq!(sum_key(&v, "spoofed_source"), 7);
    }

    #[test]
    fn the_control_plane_config_has_the_short_pool_only_when_asked() {
        let c = cp_config("/tmp/x.db", 3600, 8);
        assert!(c.contains("svlans = [99]") && c.contains("lease_time_s = 8"), "{c}");
        assert!(!cp_config("/tmp/x.db", 3600, 0).contains("short-lease"));
    }
}
