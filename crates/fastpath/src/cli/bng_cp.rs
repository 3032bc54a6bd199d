//! `fastpath bng-cp --config cp.toml`: the broadband control plane of one user plane.
//!
//! ```text
//!  user plane (fastpath run --pfcp … --cpri CP)                       this process
//!   punted DHCP frame ──GTP-U G-PDU, TEID = UP << 16 | port──▶ [cpri] listen ─▶ DHCP server ─▶ store
//!   out of that port  ◀──G-PDU, same TEID, the reply frame──── (reply to the G-PDU's source)   │ lease events
//!   sessions table    ◀──PFCP (association, establishment, deletion)── [pfcp] user_plane ◀──────┘
//! ```
//! Three threads: one reads the CPRi socket, one the PFCP socket, and the main one (re)sends
//! the association until it is accepted, sends heartbeats and runs lease expiry each second.
//! They share the `fastpath_bng::cp::ControlPlane` behind a mutex. The store is written before
//! any reply or PFCP request leaves, so a kill at any moment loses no acknowledged lease.

use clap::Args;
use fastpath_bng::cp::{ControlPlane, Out, Params};
use fastpath_bng::dhcp::server::{PoolConfig, ServerConfig};
use fastpath_bng::pfcp_cp::CpConfig;
use serde::Deserialize;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const AFTER_HELP: &str = "\
The control plane receives the DHCP frames a user plane punts (GTP-U G-PDUs on UDP 2152, each
a whole Q-in-Q Ethernet frame; TEID = user-plane number << 16 | access port), serves them from
the pools of its config, and sends each reply back in a G-PDU with the same TEID: the user plane
transmits it out of that port, tagged with the subscriber's S-VLAN and C-VLAN, from the gateway
MAC. A subscriber is (port, S-VLAN, C-VLAN, MAC). Every lease is written to the SQLite store;
a bound lease becomes a PFCP session on the user plane, and release, decline or expiry deletes
it. Restarted on the same store, it gets every lease and session back and re-creates nothing.

Example cp.toml:

  store = \"/var/lib/fastpath/cp.db\"

  [cpri]
  listen = \"0.0.0.0:2152\"        # GTP-U from the user plane (its --cpri ADDR)
  up_id = 1                        # the TEID's high 16 bits

  [pfcp]
  user_plane = \"192.0.2.2:8805\"  # the user plane's --pfcp ADDR
  local = \"192.0.2.1:0\"          # our socket; its address is our Node ID
  ul_kbps = 20000                  # each session's upstream rate
  dl_kbps = 100000                 # downstream: picks the user plane's tier of this rate
  heartbeat_s = 10

  [dhcp]
  gateway = \"100.64.0.1\"          # server identifier, router option, source of replies
  gateway_mac = \"02:fa:00:00:00:01\"
  lease_time_s = 3600
  dns = [\"192.0.2.53\"]

  [[dhcp.pool]]
  name = \"residential\"
  svlans = [100, 101]               # none: the default pool
  first = \"100.64.0.10\"
  last = \"100.64.255.250\"
  mask = \"255.255.0.0\"

See docs/bng.md.";

/// `fastpath bng-cp`.
#[derive(Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct BngCpArgs {
    /// The control plane's TOML config (see below).
    #[arg(long)]
    pub config: PathBuf,
    /// Print a counter line every N seconds (0: never).
    #[arg(long, default_value_t = 0)]
    pub stats_s: u64,
}

/// The config file.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct CpFile {
    /// SQLite store.
    pub store: PathBuf,
    /// The CPRi.
    pub cpri: CpriSection,
    /// PFCP towards the user plane.
    pub pfcp: PfcpSection,
    /// The DHCP server.
    pub dhcp: DhcpSection,
}

/// `[cpri]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct CpriSection {
    /// Our GTP-U socket.
    pub listen: String,
    /// The user plane's number (TEID high half).
    #[serde(default = "one")]
    pub up_id: u16,
}

/// `[pfcp]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct PfcpSection {
    /// The user plane's PFCP address.
    pub user_plane: String,
    /// Our socket.
    #[serde(default = "any_local")]
    pub local: String,
    /// Upstream rate, kbit/s.
    #[serde(default = "ul")]
    pub ul_kbps: u64,
    /// Downstream rate, kbit/s.
    #[serde(default = "dl")]
    pub dl_kbps: u64,
    /// Heartbeat period, seconds (0: none).
    #[serde(default = "hb")]
    pub heartbeat_s: u64,
}

/// `[dhcp]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct DhcpSection {
    /// Gateway address: server id, router, source of replies.
    pub gateway: String,
    /// Gateway MAC.
    pub gateway_mac: String,
    /// Lease time.
    #[serde(default = "lease")]
    pub lease_time_s: u32,
    /// Offer hold.
    #[serde(default = "hold")]
    pub offer_hold_s: u64,
    /// Quarantine of a declined address.
    #[serde(default = "quarantine")]
    pub decline_quarantine_s: u64,
    /// DNS servers.
    #[serde(default)]
    pub dns: Vec<String>,
    /// Pools.
    pub pool: Vec<PoolSection>,
}

/// `[[dhcp.pool]]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct PoolSection {
    /// Name.
    pub name: String,
    /// S-VLANs served (none: default pool).
    #[serde(default)]
    pub svlans: Vec<u16>,
    /// First address.
    pub first: String,
    /// Last address.
    pub last: String,
    /// Netmask.
    pub mask: String,
    /// Lease time of this pool (default: `dhcp.lease_time_s`).
    pub lease_time_s: Option<u32>,
}

fn one() -> u16 {
    1
}
fn any_local() -> String {
    "0.0.0.0:0".into()
}
fn ul() -> u64 {
    20_000
}
fn dl() -> u64 {
    100_000
}
fn hb() -> u64 {
    10
}
fn lease() -> u32 {
    3600
}
fn hold() -> u64 {
    30
}
fn quarantine() -> u64 {
    600
}

/// The process's settings, checked.
#[derive(Debug)]
pub struct Settings {
    /// For the control plane.
    pub params: Params,
    /// CPRi socket.
    pub cpri_listen: SocketAddr,
    /// PFCP peer.
    pub pfcp_peer: SocketAddr,
    /// PFCP socket.
    pub pfcp_local: SocketAddr,
    /// Heartbeat period.
    pub heartbeat_s: u64,
}

fn bad(file: &Path, key: &str, value: &str, why: &str) -> String {
    format!("{}: {key} = {value:?}: {why}", file.display())
}

fn ip(file: &Path, key: &str, v: &str) -> Result<Ipv4Addr, String> {
    v.parse().map_err(|_| bad(file, key, v, "not an IPv4 address (like 100.64.0.1)"))
}

fn sock(file: &Path, key: &str, v: &str) -> Result<SocketAddr, String> {
    v.parse().map_err(|_| bad(file, key, v, "not an address:port (like 127.0.0.1:2152)"))
}

fn mac(file: &Path, key: &str, v: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = v.split(':').collect();
    let mut m = [0u8; 6];
    if parts.len() != 6 {
        return Err(bad(file, key, v, "not a MAC address (like 02:fa:00:00:00:01)"));
    }
    for (b, p) in m.iter_mut().zip(&parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| bad(file, key, v, "not a MAC address (like 02:fa:00:00:00:01)"))?;
    }
    Ok(m)
}

/// Reads and checks a config file (relative store paths are relative to the file).
///
/// # Errors
/// Every message names the file, the key and the value it refuses.
pub fn load(file: &Path) -> Result<Settings, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let c: CpFile = toml::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let gateway = ip(file, "dhcp.gateway", &c.dhcp.gateway)?;
    let dns = c.dhcp.dns.iter().enumerate().map(|(i, d)| ip(file, &format!("dhcp.dns[{i}]"), d)).collect::<Result<Vec<_>, _>>()?;
    let mut pools = Vec::new();
    for (i, p) in c.dhcp.pool.iter().enumerate() {
        let k = |f: &str| format!("dhcp.pool[{i}].{f}");
        if let Some(v) = p.svlans.iter().find(|v| !(1..=4094).contains(*v)) {
            return Err(bad(file, &k("svlans"), &v.to_string(), "an S-VLAN is 1 to 4094"));
        }
        pools.push(PoolConfig {
            name: p.name.clone(),
            svlans: p.svlans.clone(),
            first: ip(file, &k("first"), &p.first)?,
            last: ip(file, &k("last"), &p.last)?,
            mask: ip(file, &k("mask"), &p.mask)?,
            gateway,
            dns: dns.clone(),
            lease_time_s: p.lease_time_s.unwrap_or(c.dhcp.lease_time_s),
        });
    }
    if pools.is_empty() {
        return Err(format!("{}: dhcp.pool: at least one [[dhcp.pool]] is needed", file.display()));
    }
    if c.dhcp.lease_time_s < 10 {
        return Err(bad(file, "dhcp.lease_time_s", &c.dhcp.lease_time_s.to_string(), "at least 10 seconds"));
    }
    let server =
        ServerConfig { server_id: gateway, pools, offer_hold_s: c.dhcp.offer_hold_s, decline_quarantine_s: c.dhcp.decline_quarantine_s };
    // The DHCP server's own checks (ranges, masks, overlaps), named by pool.
    server.build().map_err(|e| format!("{}: [[dhcp.pool]]: {e:?}", file.display()))?;
    if c.cpri.up_id == 0 {
        return Err(bad(file, "cpri.up_id", "0", "1 to 65535 (TEID 0 is the echo's)"));
    }
    let pfcp_local = sock(file, "pfcp.local", &c.pfcp.local)?;
    let pfcp_peer = sock(file, "pfcp.user_plane", &c.pfcp.user_plane)?;
    let node = match (pfcp_local, pfcp_peer) {
        (SocketAddr::V4(l), _) if !l.ip().is_unspecified() => *l.ip(),
        (_, SocketAddr::V4(p)) if p.ip().is_loopback() => Ipv4Addr::LOCALHOST,
        (SocketAddr::V4(_), SocketAddr::V4(_)) => {
            return Err(bad(file, "pfcp.local", &c.pfcp.local, "name our address (it is our PFCP Node ID and F-SEID)"))
        }
        _ => return Err(bad(file, "pfcp.user_plane", &c.pfcp.user_plane, "PFCP over IPv4 only")),
    };
    let mut pfcp = CpConfig::new(node);
    pfcp.ul_kbps = c.pfcp.ul_kbps;
    pfcp.dl_kbps = c.pfcp.dl_kbps;
    pfcp.recovery_ntp = fastpath_control::pfcp_up::ntp_now();
    let store = if c.store.is_relative() { file.parent().unwrap_or(Path::new(".")).join(&c.store) } else { c.store.clone() };
    Ok(Settings {
        params: Params { server, gw_mac: mac(file, "dhcp.gateway_mac", &c.dhcp.gateway_mac)?, store, pfcp, up_id: c.cpri.up_id },
        cpri_listen: sock(file, "cpri.listen", &c.cpri.listen)?,
        pfcp_peer,
        pfcp_local,
        heartbeat_s: c.pfcp.heartbeat_s,
    })
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn send_all(out: Out, cpri: &UdpSocket, to: Option<SocketAddr>, pfcp: &UdpSocket) {
    for n in out.notes {
        eprintln!("bng-cp: {n}");
    }
    if let Some(to) = to {
        for d in out.gtpu {
            if let Err(e) = cpri.send_to(&d, to) {
                eprintln!("bng-cp: CPRi send to {to}: {e}");
            }
        }
    }
    for d in out.pfcp {
        if let Err(e) = pfcp.send(&d) {
            eprintln!("bng-cp: PFCP send: {e}");
        }
    }
}

/// `fastpath bng-cp`.
///
/// # Errors
/// A bad config, a socket that cannot be bound, or a store failure (the process stops rather
/// than lose a lease).
pub fn run(a: BngCpArgs) -> Result<(), String> {
    let s = load(&a.config)?;
    let cp = ControlPlane::open(&s.params, now_s()).map_err(|e| format!("{}: {e}", s.params.store.display()))?;
    let cpri = UdpSocket::bind(s.cpri_listen).map_err(|e| format!("cpri.listen {}: {e}", s.cpri_listen))?;
    let pfcp = UdpSocket::bind(s.pfcp_local).map_err(|e| format!("pfcp.local {}: {e}", s.pfcp_local))?;
    pfcp.connect(s.pfcp_peer).map_err(|e| format!("pfcp.user_plane {}: {e}", s.pfcp_peer))?;
    eprintln!(
        "bng-cp: CPRi (GTP-U) on {}, PFCP {} ▸ {}, store {}, {} leases restored",
        cpri.local_addr().map_or(s.cpri_listen, |a| a),
        pfcp.local_addr().map_or(s.pfcp_local, |a| a),
        s.pfcp_peer,
        s.params.store.display(),
        cp.server().leases().len()
    );
    let cp = Mutex::new(cp);
    let failed = Mutex::new(None::<String>);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut buf = vec![0u8; 65_536];
            loop {
                let Ok((n, from)) = cpri.recv_from(&mut buf) else { continue };
                let Ok(mut g) = cp.lock() else { return };
                match g.on_gtpu(buf.get(..n).unwrap_or_default(), now_s()) {
                    Ok(out) => send_all(out, &cpri, Some(from), &pfcp),
                    Err(e) => {
                        if let Ok(mut f) = failed.lock() {
                            *f = Some(e.to_string());
                        }
                        return;
                    }
                }
            }
        });
        sc.spawn(|| {
            let mut buf = vec![0u8; 65_536];
            loop {
                let Ok(n) = pfcp.recv(&mut buf) else {
                    // ECONNREFUSED while the user plane is not up yet: retry.
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                };
                let Ok(mut g) = cp.lock() else { return };
                match g.on_pfcp(buf.get(..n).unwrap_or_default()) {
                    Ok(out) => send_all(out, &cpri, None, &pfcp),
                    Err(e) => {
                        if let Ok(mut f) = failed.lock() {
                            *f = Some(format!("session store: {e}"));
                        }
                        return;
                    }
                }
            }
        });
        let (mut last_hb, mut last_stats) = (Instant::now(), Instant::now());
        loop {
            if let Some(e) = failed.lock().ok().and_then(|f| f.clone()) {
                eprintln!("bng-cp: stopping: {e}");
                std::process::exit(1);
            }
            {
                let Ok(mut g) = cp.lock() else { std::process::exit(1) };
                if !g.is_associated() {
                    let req = g.association_setup();
                    let _ = pfcp.send(&req);
                } else if s.heartbeat_s > 0 && last_hb.elapsed() >= Duration::from_secs(s.heartbeat_s) {
                    last_hb = Instant::now();
                    let req = g.heartbeat();
                    let _ = pfcp.send(&req);
                }
                match g.tick(now_s()) {
                    Ok(out) => send_all(out, &cpri, None, &pfcp),
                    Err(e) => {
                        eprintln!("bng-cp: stopping: {e}");
                        std::process::exit(1);
                    }
                }
                if a.stats_s > 0 && last_stats.elapsed() >= Duration::from_secs(a.stats_s) {
                    last_stats = Instant::now();
                    eprintln!("bng-cp: {:?}, {} sessions", g.counters, g.established());
                }
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}
