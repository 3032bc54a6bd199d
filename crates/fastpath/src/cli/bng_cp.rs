//! `fastpath bng-cp --config cp.toml`: the broadband control plane of one or more user planes.
//!
//! ```text
//!  user plane (fastpath run --pfcp … --cpri CP)                       this process
//!   punted DHCP frame ──GTP-U G-PDU, TEID = UP << 16 | port──▶ [cpri] listen ─▶ DHCP server ─▶ store
//!   out of that port  ◀──G-PDU, same TEID, the reply frame──── (reply to the G-PDU's source)   │ lease events
//!   sessions table    ◀──PFCP (association, establishment, deletion)── [pfcp] user_plane ◀──────┘
//! ```
//! Three threads (four with `--metrics`, one more in relay mode): one reads the CPRi socket, one
//! the PFCP socket (one socket for every user plane: a datagram's source address names its user
//! plane), in relay mode one the socket the DHCP servers answer to (giaddr, port 67), and the
//! main one runs `ControlPlane::tick` each second (associations, heartbeats, retransmissions,
//! lease expiry).
//! They share the `fastpath_bng::cp::ControlPlane` behind a mutex. Each socket's thread takes
//! what is queued (up to 64 datagrams) as one batch with one store commit; the store is written
//! before any reply or PFCP message leaves, so a kill at any moment loses no acknowledged lease.

use clap::Args;
use fastpath_bng::cp::{ControlPlane, DhcpMode, Out, Params, UpParams};
use fastpath_bng::dhcp::relay::RelayConfig;
use fastpath_bng::dhcp::server::{PoolConfig, ServerConfig};
use fastpath_bng::pfcp_cp::CpConfig;
use serde::Deserialize;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const AFTER_HELP: &str = "\
The control plane receives the DHCP frames its user planes punt (GTP-U G-PDUs on UDP 2152, each
a whole Q-in-Q Ethernet frame; TEID = user-plane number << 16 | access port), serves them from
the pools of its config, and sends each reply back in a G-PDU with the same TEID: the user plane
transmits it out of that port, tagged with the subscriber's S-VLAN and C-VLAN, from the gateway
MAC. A subscriber is (user plane, port, S-VLAN, C-VLAN, MAC). Every lease is written to the
SQLite store; a bound lease becomes a PFCP session on the user plane it came from, and release,
decline or expiry deletes it. Each session reports its usage every urr_period_s (records in the
store, sums in --metrics).

Heartbeats go to each user plane every heartbeat_s; max_missed unanswered in a row mark it down
(logged, counted, in --metrics). A user plane that restarted (another Recovery Time Stamp) is
associated again and gets every session of the store back, without DHCP from the clients.
Restarted on the same store, the control plane gets every lease and session back and asks the
user planes to keep theirs (PFCP Session Retention Information): nothing is re-created and no
subscriber stops forwarding.

Example cp.toml:

  store = \"/var/lib/fastpath/cp.db\"

  [cpri]
  listen = \"0.0.0.0:2152\"        # GTP-U from the user planes (their --cpri ADDR)

  [pfcp]
  local = \"192.0.2.1:8805\"       # our socket; its address is our Node ID
  ul_kbps = 20000                  # each session's upstream rate
  dl_kbps = 100000                 # downstream: picks the user plane's tier of this rate
  heartbeat_s = 10
  max_missed = 3                   # heartbeats unanswered before a user plane is down
  urr_period_s = 300               # usage reporting period

  [[user_plane]]
  id = 1                           # its --cpri-up N: the TEID's high 16 bits
  pfcp = \"192.0.2.2:8805\"        # its --pfcp ADDR
  ports = [0]                      # its access ports (none: any)

  [[user_plane]]
  id = 2
  pfcp = \"192.0.2.3:8805\"

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

Relay mode: instead of the pools, relay each subscriber's DHCP to external DHCP servers (Kea,
dnsmasq). The control plane sets giaddr to dhcp.gateway and adds option 82 (circuit-id
\"<TEID>/<S-VLAN>/<C-VLAN>\", remote-id the MAC); the servers answer to dhcp.gateway, port 67,
which must be an address of this host; each reply goes down to its subscriber's line, and the
leases of the servers' ACKs are stored and made sessions as the built-in server's are:

  [dhcp]
  mode = \"relay\"
  gateway = \"100.64.0.1\"          # giaddr: the servers pick the subnet by it and answer to it
  gateway_mac = \"02:fa:00:00:00:01\"
  [dhcp.relay]
  servers = [\"192.0.2.67\"]        # each request goes to every one, UDP port 67
  # listen = \"100.64.0.1:67\"     # where their replies arrive (default: gateway, port 67)
  # max_hops = 4

One user plane can also be given as pfcp.user_plane = \"ADDR\" with cpri.up_id = N (default 1).
See docs/bng.md.";

/// `fastpath bng-cp`.
#[derive(Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct BngCpArgs {
    /// The control plane's TOML config (see below).
    #[arg(long)]
    pub config: PathBuf,
    /// Print a counter line and each user plane's state every N seconds (0: never).
    #[arg(long, default_value_t = 0)]
    pub stats_s: u64,
    /// Serve Prometheus metrics (counters, user planes, per-subscriber usage) at
    /// http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
}

/// The config file.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct CpFile {
    /// SQLite store.
    pub store: PathBuf,
    /// The CPRi.
    pub cpri: CpriSection,
    /// PFCP towards the user planes.
    pub pfcp: PfcpSection,
    /// The user planes (or `pfcp.user_plane` for one).
    #[serde(default)]
    pub user_plane: Vec<UserPlaneSection>,
    /// The DHCP server.
    pub dhcp: DhcpSection,
}

/// `[[user_plane]]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct UserPlaneSection {
    /// Its number (TEID high half).
    pub id: u16,
    /// Its PFCP address.
    pub pfcp: String,
    /// Its access ports (none: any).
    #[serde(default)]
    pub ports: Vec<u16>,
}

/// `[cpri]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct CpriSection {
    /// Our GTP-U socket.
    pub listen: String,
    /// The user plane's number (TEID high half), with `pfcp.user_plane`.
    pub up_id: Option<u16>,
}

/// `[pfcp]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct PfcpSection {
    /// The user plane's PFCP address (one user plane; else `[[user_plane]]`).
    pub user_plane: Option<String>,
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
    /// Heartbeats missed in a row that mark a user plane down.
    #[serde(default = "missed")]
    pub max_missed: u32,
    /// Usage reporting period, seconds.
    #[serde(default = "period")]
    pub urr_period_s: u32,
}

/// `[dhcp]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct DhcpSection {
    /// `server` (default) or `relay`.
    pub mode: Option<String>,
    /// Gateway address: server id, router, source of replies; giaddr in relay mode.
    pub gateway: String,
    /// Gateway MAC.
    pub gateway_mac: String,
    /// Lease time (server mode).
    pub lease_time_s: Option<u32>,
    /// Offer hold (server mode).
    pub offer_hold_s: Option<u64>,
    /// Quarantine of a declined address (server mode).
    pub decline_quarantine_s: Option<u64>,
    /// DNS servers (server mode).
    #[serde(default)]
    pub dns: Vec<String>,
    /// Pools (server mode).
    #[serde(default)]
    pub pool: Vec<PoolSection>,
    /// The external servers (relay mode).
    pub relay: Option<RelaySection>,
}

/// `[dhcp.relay]`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RelaySection {
    /// The DHCP servers.
    pub servers: Vec<String>,
    /// Where their replies arrive (default: gateway, port 67).
    pub listen: Option<String>,
    /// Relayed messages with this many hops already are dropped.
    #[serde(default = "hops")]
    pub max_hops: u8,
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

fn missed() -> u32 {
    3
}
fn period() -> u32 {
    300
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
const LEASE_S: u32 = 3600;
const OFFER_HOLD_S: u64 = 30;
const QUARANTINE_S: u64 = 600;
fn hops() -> u8 {
    4
}

/// The process's settings, checked.
#[derive(Debug)]
pub struct Settings {
    /// For the control plane.
    pub params: Params,
    /// CPRi socket.
    pub cpri_listen: SocketAddr,
    /// Each user plane's PFCP address, by its number.
    pub pfcp_peers: Vec<(u16, SocketAddr)>,
    /// PFCP socket.
    pub pfcp_local: SocketAddr,
    /// Relay mode: the socket the DHCP servers answer to.
    pub relay_listen: Option<SocketAddr>,
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

/// `[dhcp]` in server mode: the pools.
fn server_config(file: &Path, d: &DhcpSection, gateway: Ipv4Addr) -> Result<ServerConfig, String> {
    let dns = d.dns.iter().enumerate().map(|(i, v)| ip(file, &format!("dhcp.dns[{i}]"), v)).collect::<Result<Vec<_>, _>>()?;
    let lease_time_s = d.lease_time_s.unwrap_or(LEASE_S);
    let mut pools = Vec::new();
    for (i, p) in d.pool.iter().enumerate() {
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
            lease_time_s: p.lease_time_s.unwrap_or(lease_time_s),
        });
    }
    if pools.is_empty() {
        return Err(format!("{}: dhcp.pool: at least one [[dhcp.pool]] is needed (or dhcp.mode = \"relay\")", file.display()));
    }
    if lease_time_s < 10 {
        return Err(bad(file, "dhcp.lease_time_s", &lease_time_s.to_string(), "at least 10 seconds"));
    }
    let server = ServerConfig {
        server_id: gateway,
        pools,
        offer_hold_s: d.offer_hold_s.unwrap_or(OFFER_HOLD_S),
        decline_quarantine_s: d.decline_quarantine_s.unwrap_or(QUARANTINE_S),
    };
    // The DHCP server's own checks (ranges, masks, overlaps), named by pool.
    server.build().map_err(|e| format!("{}: [[dhcp.pool]]: {e:?}", file.display()))?;
    Ok(server)
}

/// `[dhcp]` in relay mode: `[dhcp.relay]`, and none of the server's keys.
fn relay_config(file: &Path, d: &DhcpSection, gateway: Ipv4Addr) -> Result<(RelayConfig, SocketAddr), String> {
    let server_only = [
        ("dhcp.pool", !d.pool.is_empty()),
        ("dhcp.dns", !d.dns.is_empty()),
        ("dhcp.lease_time_s", d.lease_time_s.is_some()),
        ("dhcp.offer_hold_s", d.offer_hold_s.is_some()),
        ("dhcp.decline_quarantine_s", d.decline_quarantine_s.is_some()),
    ];
    if let Some((key, _)) = server_only.iter().find(|k| k.1) {
        return Err(format!("{}: {key}: not with dhcp.mode = \"relay\" (the external servers lease the addresses)", file.display()));
    }
    let Some(r) = &d.relay else {
        return Err(format!("{}: dhcp.mode = \"relay\" needs [dhcp.relay] with servers = [\"ADDR\", …]", file.display()));
    };
    if r.servers.is_empty() {
        return Err(format!("{}: dhcp.relay.servers: at least one DHCP server", file.display()));
    }
    let servers =
        r.servers.iter().enumerate().map(|(i, v)| ip(file, &format!("dhcp.relay.servers[{i}]"), v)).collect::<Result<Vec<_>, _>>()?;
    if !(1..=16).contains(&r.max_hops) {
        return Err(bad(file, "dhcp.relay.max_hops", &r.max_hops.to_string(), "1 to 16 (RFC 1542 §4.1.1)"));
    }
    let listen = match &r.listen {
        Some(l) => sock(file, "dhcp.relay.listen", l)?,
        None => SocketAddr::V4(SocketAddrV4::new(gateway, 67)),
    };
    if listen.port() != 67 {
        return Err(bad(file, "dhcp.relay.listen", &listen.to_string(), "port 67: servers answer a relay there (RFC 2131 §4.1)"));
    }
    Ok((RelayConfig { giaddr: gateway, servers, max_hops: r.max_hops }, listen))
}

/// Reads and checks a config file (relative store paths are relative to the file).
///
/// # Errors
/// Every message names the file, the key and the value it refuses.
pub fn load(file: &Path) -> Result<Settings, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let c: CpFile = toml::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let gateway = ip(file, "dhcp.gateway", &c.dhcp.gateway)?;
    let (dhcp, relay_listen) = match c.dhcp.mode.as_deref().unwrap_or("server") {
        "server" => {
            if c.dhcp.relay.is_some() {
                return Err(format!("{}: [dhcp.relay]: only with dhcp.mode = \"relay\"", file.display()));
            }
            (DhcpMode::Server(server_config(file, &c.dhcp, gateway)?), None)
        }
        "relay" => {
            let (cfg, listen) = relay_config(file, &c.dhcp, gateway)?;
            (DhcpMode::Relay(cfg), Some(listen))
        }
        m => return Err(bad(file, "dhcp.mode", m, "\"server\" (the pools here) or \"relay\" (to the servers of [dhcp.relay])")),
    };
    // The user planes: `[[user_plane]]` entries, or the one of `pfcp.user_plane`.
    let mut ups: Vec<(String, u16, String, Vec<u16>)> = Vec::new();
    match (&c.pfcp.user_plane, c.user_plane.is_empty()) {
        (Some(a), true) => ups.push(("pfcp.user_plane".into(), c.cpri.up_id.unwrap_or(1), a.clone(), Vec::new())),
        (None, false) => {
            if let Some(n) = c.cpri.up_id {
                return Err(bad(file, "cpri.up_id", &n.to_string(), "with [[user_plane]] entries, each names its own id"));
            }
            for (i, u) in c.user_plane.iter().enumerate() {
                ups.push((format!("user_plane[{i}]"), u.id, u.pfcp.clone(), u.ports.clone()));
            }
        }
        (Some(a), false) => return Err(bad(file, "pfcp.user_plane", a, "give the user planes either here or as [[user_plane]], not both")),
        (None, true) => return Err(format!("{}: no user plane: add [[user_plane]] entries (or pfcp.user_plane)", file.display())),
    }
    let mut user_planes = Vec::new();
    let mut pfcp_peers: Vec<(u16, SocketAddr)> = Vec::new();
    for (key, id, addr, ports) in ups {
        let id_key = if key == "pfcp.user_plane" { "cpri.up_id".to_string() } else { format!("{key}.id") };
        if id == 0 {
            return Err(bad(file, &id_key, "0", "1 to 65535 (TEID 0 is the echo's)"));
        }
        if pfcp_peers.iter().any(|p| p.0 == id) {
            return Err(bad(file, &id_key, &id.to_string(), "another user plane has this id"));
        }
        let pfcp_key = if key == "pfcp.user_plane" { key.clone() } else { format!("{key}.pfcp") };
        let a = sock(file, &pfcp_key, &addr)?;
        if !a.is_ipv4() {
            return Err(bad(file, &pfcp_key, &addr, "PFCP over IPv4 only"));
        }
        if pfcp_peers.iter().any(|p| p.1 == a) {
            return Err(bad(file, &pfcp_key, &addr, "another user plane has this address"));
        }
        pfcp_peers.push((id, a));
        user_planes.push(UpParams { id, ports });
    }
    let pfcp_local = sock(file, "pfcp.local", &c.pfcp.local)?;
    let node = match pfcp_local {
        SocketAddr::V4(l) if !l.ip().is_unspecified() => *l.ip(),
        SocketAddr::V4(_) if pfcp_peers.iter().all(|p| p.1.ip().is_loopback()) => Ipv4Addr::LOCALHOST,
        SocketAddr::V4(_) => return Err(bad(file, "pfcp.local", &c.pfcp.local, "name our address (it is our PFCP Node ID and F-SEID)")),
        SocketAddr::V6(_) => return Err(bad(file, "pfcp.local", &c.pfcp.local, "PFCP over IPv4 only")),
    };
    if c.pfcp.max_missed == 0 {
        return Err(bad(file, "pfcp.max_missed", "0", "at least 1"));
    }
    if c.pfcp.urr_period_s == 0 {
        return Err(bad(file, "pfcp.urr_period_s", "0", "at least 1 second"));
    }
    let mut pfcp = CpConfig::new(node);
    pfcp.ul_kbps = c.pfcp.ul_kbps;
    pfcp.dl_kbps = c.pfcp.dl_kbps;
    pfcp.urr_period_s = c.pfcp.urr_period_s;
    pfcp.recovery_ntp = fastpath_control::pfcp_up::ntp_now();
    let store = if c.store.is_relative() { file.parent().unwrap_or(Path::new(".")).join(&c.store) } else { c.store.clone() };
    Ok(Settings {
        params: Params {
            dhcp,
            gw_mac: mac(file, "dhcp.gateway_mac", &c.dhcp.gateway_mac)?,
            store,
            pfcp,
            user_planes,
            heartbeat_s: c.pfcp.heartbeat_s,
            max_missed: c.pfcp.max_missed,
        },
        cpri_listen: sock(file, "cpri.listen", &c.cpri.listen)?,
        pfcp_peers,
        pfcp_local,
        relay_listen,
    })
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The sockets what the control plane says goes out of.
struct Sockets<'a> {
    cpri: &'a UdpSocket,
    pfcp: &'a UdpSocket,
    peers: &'a [(u16, SocketAddr)],
    /// Relay mode: towards the DHCP servers (from giaddr, port 67).
    relay: Option<&'a UdpSocket>,
}

impl Sockets<'_> {
    fn send_all(&self, out: Out) {
        for n in out.notes {
            eprintln!("bng-cp: {n}");
        }
        for (to, d) in out.gtpu {
            if let Err(e) = self.cpri.send_to(&d, to) {
                eprintln!("bng-cp: CPRi send to {to}: {e}");
            }
        }
        for (up, d) in out.pfcp {
            let Some(&(_, addr)) = self.peers.iter().find(|p| p.0 == up) else { continue };
            // A user plane that is down refuses nothing we need to hear about: heartbeats count it.
            let _ = self.pfcp.send_to(&d, addr);
        }
        if let Some(relay) = self.relay {
            for (server, d) in out.dhcp {
                if let Err(e) = relay.send_to(&d, (server, 67)) {
                    eprintln!("bng-cp: relay send to {server}:67: {e}");
                }
            }
        }
    }
}

/// Serves one batch of datagrams (bytes, source) and says what to send, or why to stop.
type Serve<'a> = dyn Fn(&mut ControlPlane, &[(&[u8], SocketAddr)]) -> Result<Out, String> + 'a;

/// Most datagrams served per store commit (a batch).
const BATCH: usize = 64;

/// Waits for a datagram on `sock`, then takes whatever else is queued behind it, at most
/// [`BATCH`] in all: their lengths and sources in `got`, their bytes in `bufs`.
fn recv_batch(sock: &UdpSocket, bufs: &mut [Vec<u8>], got: &mut Vec<(usize, SocketAddr)>) -> std::io::Result<()> {
    got.clear();
    let first = sock.recv_from(bufs.first_mut().map_or(&mut [][..], |b| &mut b[..]))?;
    got.push(first);
    if sock.set_nonblocking(true).is_ok() {
        while let Some(b) = bufs.get_mut(got.len()) {
            match sock.recv_from(b) {
                Ok(r) => got.push(r),
                Err(_) => break,
            }
        }
        let _ = sock.set_nonblocking(false);
    }
    Ok(())
}

/// `--metrics ADDR`: answers `GET /metrics` with the exposition, one connection at a time
/// (a request head of at most 8 KiB, read within 2 s).
fn serve_metrics(listener: &TcpListener, cp: &Mutex<ControlPlane>) {
    for conn in listener.incoming() {
        let Ok(mut c) = conn else { continue };
        let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = c.set_write_timeout(Some(Duration::from_secs(2)));
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while head.len() < 8192 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match c.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(buf.get(..n).unwrap_or_default()),
            }
        }
        let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string();
        let mut parts = line.split(' ');
        let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
        let (status, ctype, body) = match (method, path) {
            ("GET", "/metrics") => match cp.lock().map_err(|e| e.to_string()).and_then(|g| g.metrics().map_err(|e| e.to_string())) {
                Ok(b) => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", b),
                Err(e) => ("503 Service Unavailable", "text/plain; charset=utf-8", format!("{e}\n")),
            },
            ("GET", "/") => ("200 OK", "text/plain; charset=utf-8", "fastpath bng-cp: see /metrics\n".to_string()),
            ("GET", _) => ("404 Not Found", "text/plain; charset=utf-8", format!("{path}: not found (try /metrics)\n")),
            _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", "GET only\n".to_string()),
        };
        let _ =
            write!(c, "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    }
}

/// The CPRi socket's receive buffer, bytes.
const CPRI_RCVBUF: usize = 8 << 20;
/// The PFCP socket's: a user plane that restarted answers thousands of establishments at once.
const PFCP_RCVBUF: usize = 8 << 20;
/// The relay socket's (the DHCP servers' replies).
const RELAY_RCVBUF: usize = 8 << 20;

/// `fastpath bng-cp`.
///
/// # Errors
/// A bad config, a socket that cannot be bound, or a store failure (the process stops rather
/// than lose a lease).
pub fn run(a: BngCpArgs) -> Result<(), String> {
    let s = load(&a.config)?;
    let cp = ControlPlane::open(&s.params, now_s()).map_err(|e| format!("{}: {e}", s.params.store.display()))?;
    let cpri = UdpSocket::bind(s.cpri_listen).map_err(|e| format!("cpri.listen {}: {e}", s.cpri_listen))?;
    // Room for bursts of DISCOVERs while a batch is being committed (the kernel caps it at
    // net.core.rmem_max unless we are root, who may exceed it).
    super::grow_rcvbuf(&cpri, CPRI_RCVBUF, "bng-cp: the CPRi socket");
    let pfcp = UdpSocket::bind(s.pfcp_local).map_err(|e| format!("pfcp.local {}: {e}", s.pfcp_local))?;
    super::grow_rcvbuf(&pfcp, PFCP_RCVBUF, "bng-cp: the PFCP socket");
    let relay = match s.relay_listen {
        Some(l) => {
            let r = UdpSocket::bind(l).map_err(|e| {
                format!(
                    "dhcp.relay.listen {l}: {e} (the DHCP servers answer the relay at giaddr, port 67: it must be an address of this host)"
                )
            })?;
            super::grow_rcvbuf(&r, RELAY_RCVBUF, "bng-cp: the relay socket");
            Some(r)
        }
        None => None,
    };
    let metrics = a.metrics.map(|m| TcpListener::bind(m).map_err(|e| format!("--metrics {m}: {e}"))).transpose()?;
    let peers = s.pfcp_peers.clone();
    let dhcp = match &relay {
        Some(r) => format!(
            "relaying DHCP from {} to {}",
            r.local_addr().map_or(String::from("?"), |a| a.to_string()),
            cp.relay_servers().iter().map(|a| format!("{a}:67")).collect::<Vec<_>>().join(", ")
        ),
        None => "DHCP server".to_string(),
    };
    eprintln!(
        "bng-cp: CPRi (GTP-U) on {}, PFCP from {} to user planes {}, {dhcp}, store {}, {} leases restored",
        cpri.local_addr().map_or(s.cpri_listen, |a| a),
        pfcp.local_addr().map_or(s.pfcp_local, |a| a),
        peers.iter().map(|(id, a)| format!("{id} at {a}")).collect::<Vec<_>>().join(", "),
        s.params.store.display(),
        cp.leases().len()
    );
    if let Some(m) = &metrics {
        eprintln!("bng-cp: Prometheus metrics at http://{}/metrics", m.local_addr().map_or(String::from("?"), |a| a.to_string()));
    }
    let cp = Mutex::new(cp);
    let failed = Mutex::new(None::<String>);
    let socks = Sockets { cpri: &cpri, pfcp: &pfcp, peers: &peers, relay: relay.as_ref() };
    // A socket's thread: batches of datagrams (the one that woke it and whatever else is queued
    // behind it, at most BATCH), each served with one store commit before anything it caused
    // is sent. A store failure stops the process (it must not lose a lease).
    let serve = |sock: &UdpSocket, what: &str, f: &Serve<'_>| {
        let mut bufs = vec![vec![0u8; 65_536]; BATCH];
        let mut got: Vec<(usize, SocketAddr)> = Vec::with_capacity(BATCH);
        loop {
            if recv_batch(sock, &mut bufs, &mut got).is_err() {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            let dgrams: Vec<(&[u8], SocketAddr)> =
                got.iter().zip(&bufs).map(|((n, from), b)| (b.get(..*n).unwrap_or_default(), *from)).collect();
            let Ok(mut g) = cp.lock() else { return };
            match f(&mut g, &dgrams) {
                Ok(out) => {
                    drop(g);
                    socks.send_all(out);
                }
                Err(e) => {
                    if let Ok(mut f) = failed.lock() {
                        *f = Some(format!("{what}: {e}"));
                    }
                    return;
                }
            }
        }
    };
    std::thread::scope(|sc| {
        if let Some(m) = &metrics {
            let cp = &cp;
            sc.spawn(move || serve_metrics(m, cp));
        }
        sc.spawn(|| {
            // A reply goes back to the source of the datagram it answers (the user plane's
            // worker that punted it).
            serve(&cpri, "CPRi", &|g, d| g.on_gtpu_batch(d.iter().copied(), now_s()).map_err(|e| e.to_string()))
        });
        sc.spawn(|| {
            // A datagram from no user plane of ours is counted as stray (number 0).
            let up_of = |from: SocketAddr| peers.iter().find(|p| p.1 == from).map_or(0, |p| p.0);
            serve(&pfcp, "PFCP", &|g, d| {
                g.on_pfcp_batch(d.iter().map(|(b, from)| (up_of(*from), *b))).map_err(|e| format!("session store: {e}"))
            })
        });
        if let Some(r) = &relay {
            // Only the configured servers are heard: the source address goes along (an IPv6
            // source is no server of ours: the unspecified address stands for it).
            let v4 = |a: SocketAddr| match a.ip() {
                std::net::IpAddr::V4(ip) => ip,
                std::net::IpAddr::V6(ip) => ip.to_ipv4_mapped().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
            };
            sc.spawn(move || {
                serve(r, "relay", &|g, d| {
                    g.on_dhcp_server_batch(d.iter().map(|(b, from)| (*b, v4(*from))), now_s()).map_err(|e| e.to_string())
                })
            });
        }
        let mut last_stats = Instant::now();
        loop {
            if let Some(e) = failed.lock().ok().and_then(|f| f.clone()) {
                eprintln!("bng-cp: stopping: {e}");
                std::process::exit(1);
            }
            {
                let Ok(mut g) = cp.lock() else { std::process::exit(1) };
                match g.tick(now_s()) {
                    Ok(out) => socks.send_all(out),
                    Err(e) => {
                        eprintln!("bng-cp: stopping: {e}");
                        std::process::exit(1);
                    }
                }
                if a.stats_s > 0 && last_stats.elapsed() >= Duration::from_secs(a.stats_s) {
                    last_stats = Instant::now();
                    eprintln!("bng-cp: {:?}, {} sessions", g.counters, g.established());
                    for u in g.user_planes() {
                        eprintln!("bng-cp: user plane {}: {u:?}", u.id);
                    }
                }
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}
