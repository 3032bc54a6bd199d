//! The hosts of `fastpath lab bng-dhcp`: N subscriber namespaces behind one access bridge, a
//! core namespace, and the namespace the user plane and the control plane run in.
//!
//! ```text
//!  ns fp-bsub-P-i (one per subscriber)   ns fp-bacc-P-n                     ns fp-bup-P-n                       ns fp-bcore-P-n
//!  eth0 02:5b:00:ii:ii:ii ══ veth ══ s<i> ┐ tagger: + C-tag + S-tag
//!  udhcpc / dhclient (untagged)      s<j> ├─ br0 ─ upl0 ══ veth ══ acc0 (port 0) fastpath run vbng   cor0 (port 1) ══ eth0 198.18.0.1
//!                                    ...  ┘ (ports isolated)           CPRi ▲ ▼ PFCP (127.0.0.1)           tagger: VLAN 10
//!                                                                      fastpath bng-cp (DHCP server, store)          ping, iperf3 -s
//! ```
//!
//! **Why one bridge with per-port taggers.** The kernel here has no VLAN devices, so every
//! subscriber's tags are pushed and popped by a tc program ([`super::tagger`]) on the access
//! namespace's end of its veth: the subscriber sees untagged Ethernet (any DHCP client works),
//! the user plane sees port + S-VLAN + C-VLAN + MAC, as a BNG does. The subscriber ports are
//! `isolated` (`bridge link set … isolated on`), so they reach only the uplink: a subscriber's
//! broadcast (DISCOVER, ARP) is copied once, to the user plane, not to the other N − 1 ports,
//! which is what lets one bridge carry 1,000 subscribers (a bridge holds at most 1,023 ports,
//! `BR_MAX_PORTS`). The other way, the bridge forwards by the learned MAC; what it floods is
//! dropped by every tagger whose tags it does not carry. The alternative, one uplink per S-VLAN
//! with the tagger on the user plane's side, still needs a C-tag per subscriber port, so it
//! saves nothing.
//!
//! Scale: the subscriber namespaces are created with one `ip -batch`, their veths with one
//! more in the access namespace; each subscriber then costs one `ip` process (loopback and eth0
//! up) and two BPF programs. Teardown is one `ip -batch` of `netns del`.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fastpath_io::netns::{Netns, VethPair};

use super::plan::{mac_text, GATEWAY_IP, GATEWAY_MAC};
use super::tagger::Tagger;
use crate::topo::{run_cmd, stop_child};
use crate::LabError;

/// The most subscribers one access bridge takes (`BR_MAX_PORTS` is 1,024 with port 0 unused,
/// and the uplink needs one).
pub const MAX_SUBSCRIBERS: u32 = 1000;
/// MTU of the access side's links (the subscribers' own stay at 1,500): room for two tags.
pub const ACCESS_MTU: u32 = 1600;
/// The S-VLAN of the short-lease subscriber (its own pool, `expiry_lease_s`).
pub const EXPIRY_SVLAN: u16 = 99;
/// The core host: its address, MAC and the VLAN the core side uses.
pub const CORE_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The core host's MAC.
pub const CORE_MAC: [u8; 6] = [0x02, 0xc0, 0, 0, 0, 1];
/// The core VLAN (the vbng spec's core side is single-tagged).
pub const CORE_VLAN: u16 = 10;
/// The address the core host routes subscribers through (the user plane answers no ARP on
/// the core side, so the core host has a permanent neighbour entry for it).
pub const CORE_GATEWAY: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 254);

/// Which DHCP client a subscriber runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ClientKind {
    /// busybox `udhcpc`.
    Udhcpc,
    /// ISC `dhclient`.
    Dhclient,
}

/// One subscriber line and host.
#[derive(Clone, Debug)]
pub struct Sub {
    /// Index (0-based).
    pub index: u32,
    /// Its namespace.
    pub ns: String,
    /// The access namespace's end of its veth.
    pub port_if: String,
    /// Outer tag.
    pub svid: u16,
    /// Inner tag.
    pub cvid: u16,
    /// Its MAC (eth0).
    pub mac: [u8; 6],
    /// Its DHCP client.
    pub client: ClientKind,
    /// Its pool has the short lease (S-VLAN [`EXPIRY_SVLAN`]).
    pub short_lease: bool,
}

/// Subscriber `i` of `n`: subscriber 0 runs ISC dhclient (when `dhclients` > 0, the first
/// `dhclients` do), subscriber 1 (when `expiry` and `n` > 1) is on the short-lease S-VLAN, the
/// rest run udhcpc; S-VLAN 100 + i / 4000 and C-VLAN 1 + i % 4000 as in [`super::plan`].
pub fn sub(i: u32, dhclients: u32, expiry_index: Option<u32>, pid: u32) -> Sub {
    let p = super::plan::Subscriber::nth(i);
    let short = expiry_index == Some(i);
    Sub {
        index: i,
        ns: format!("fp-bsub-{pid}-{i}"),
        port_if: format!("s{i}"),
        svid: if short { EXPIRY_SVLAN } else { p.svid },
        cvid: p.cvid,
        mac: p.mac,
        client: if i < dhclients { ClientKind::Dhclient } else { ClientKind::Udhcpc },
        short_lease: short,
    }
}

/// The namespaces and links of a run; dropping it tears everything down (clients first).
pub struct Hosts {
    /// The user plane's and control plane's namespace.
    pub up: Netns,
    /// The access bridge's namespace.
    pub access: Netns,
    /// The core host's namespace.
    pub core: Netns,
    /// The subscribers.
    pub subs: Vec<Sub>,
    veths: Vec<VethPair>,
    taggers: Vec<Tagger>,
    sub_ns_created: bool,
}

fn batch(args: &[&str], lines: &str) -> Result<(), LabError> {
    let mut c = Command::new("ip")
        .args(args)
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LabError::Io(format!("ip -batch: {e}")))?;
    if let Some(mut i) = c.stdin.take() {
        i.write_all(lines.as_bytes()).map_err(|e| LabError::Io(format!("ip -batch: {e}")))?;
    }
    let out = c.wait_with_output().map_err(|e| LabError::Io(format!("ip -batch: {e}")))?;
    if !out.status.success() {
        return Err(LabError::Cmd {
            cmd: format!("ip {} -batch -", args.join(" ")),
            status: out.status.code().unwrap_or(-1),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(())
}

/// Writes a sysctl of the calling thread's namespace (`/proc/sys/net` is per namespace).
fn sysctl_here(key: &str, value: &str) -> Result<(), LabError> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).map_err(|e| LabError::Io(format!("{path}: {e}")))
}

impl Hosts {
    /// Builds the topology for `subs` (see the module doc). `progress` hears about each step.
    ///
    /// # Errors
    /// [`LabError::Config`] for more than [`MAX_SUBSCRIBERS`]; a command, BPF or namespace
    /// failure otherwise (what was created is removed again).
    pub fn create(subs: Vec<Sub>, progress: &mut dyn FnMut(&str)) -> Result<Hosts, LabError> {
        if subs.is_empty() || subs.len() as u32 > MAX_SUBSCRIBERS {
            return Err(LabError::Config(format!(
                "{} subscribers: one access bridge takes 1 to {MAX_SUBSCRIBERS} (a Linux bridge has at most 1,023 ports)",
                subs.len()
            )));
        }
        let up = Netns::new("fp-bup")?;
        let access = Netns::new("fp-bacc")?;
        let core = Netns::new("fp-bcore")?;
        let mut h = Hosts { up, access, core, subs, veths: Vec::new(), taggers: Vec::new(), sub_ns_created: false };
        let t0 = Instant::now();
        h.veths.push(VethPair::new(&h.access, "upl0", &h.up, "acc0")?);
        h.veths.push(VethPair::new(&h.up, "cor0", &h.core, "eth0")?);
        for (ns, ifs) in [(&h.up, &["acc0", "cor0"][..]), (&h.access, &["upl0"][..])] {
            for i in ifs {
                ns.link_up(i)?;
            }
        }
        // The bridge: no STP, ports forward at once.
        h.access.sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
        h.access.sysctl("net.ipv6.conf.default.disable_ipv6", "1")?;
        // Frames towards a subscriber carry both tags inline (1,522 bytes for a full 1,500-byte
        // packet) until the tagger pops them; a veth takes at most MTU + 14 + one tag.
        h.up.set_mtu("acc0", ACCESS_MTU)?;
        h.access.set_mtu("upl0", ACCESS_MTU)?;
        h.access.ip(&["link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0"])?;
        h.access.ip(&["link", "set", "upl0", "master", "br0"])?;
        h.access.ip(&["link", "set", "br0", "mtu", &ACCESS_MTU.to_string(), "up"])?;
        // The core host.
        let core_mac = mac_text(CORE_MAC);
        h.core.ip(&["link", "set", "eth0", "address", &core_mac])?;
        h.core.link_up("eth0")?;
        h.core.add_addr("eth0", &format!("{CORE_IP}/24"))?;
        h.core.ip(&["neigh", "replace", &CORE_GATEWAY.to_string(), "lladdr", &mac_text(GATEWAY_MAC), "dev", "eth0", "nud", "permanent"])?;
        h.core.ip(&["route", "add", "100.64.0.0/10", "via", &CORE_GATEWAY.to_string(), "dev", "eth0"])?;
        let core_tagger = h.core.run(|| Tagger::core_host("eth0", CORE_VLAN))??;
        h.taggers.push(core_tagger);

        // Subscriber namespaces: one batch.
        let mut lines = String::new();
        for s in &h.subs {
            lines.push_str(&format!("netns add {}\n", s.ns));
        }
        h.sub_ns_created = true;
        batch(&[], &lines)?;
        // Their veths, bridged and isolated: one batch in the access namespace.
        let mut lines = String::new();
        for s in &h.subs {
            lines.push_str(&format!(
                "link add {p} type veth peer name eth0 address {m} netns {ns}\nlink set {p} mtu {mtu} master br0\nlink set {p} type bridge_slave isolated on\nlink set {p} up\n",
                p = s.port_if,
                m = mac_text(s.mac),
                ns = s.ns,
                mtu = ACCESS_MTU
            ));
        }
        batch(&["-n", h.access.name()], &lines)?;
        progress(&format!("bng-dhcp: {} subscriber namespaces and veths in {:.1} s", h.subs.len(), t0.elapsed().as_secs_f64()));
        // Per subscriber: IPv6 off before the link comes up (no solicitations into the user
        // plane), loopback and eth0 up.
        for (k, s) in h.subs.iter().enumerate() {
            let path = PathBuf::from("/var/run/netns").join(&s.ns);
            std::thread::scope(|sc| {
                sc.spawn(|| -> Result<(), LabError> {
                    fastpath_io::sys::enter_netns(&path).map_err(|e| LabError::Io(format!("{}: {e}", s.ns)))?;
                    sysctl_here("net.ipv6.conf.all.disable_ipv6", "1")?;
                    sysctl_here("net.ipv6.conf.eth0.disable_ipv6", "1")
                })
                .join()
                .unwrap_or_else(|_| Err(LabError::Io("sysctl thread panicked".into())))
            })?;
            batch(&["-n", &s.ns], "link set lo up\nlink set eth0 up\n")?;
            if crate::topo::interrupted() {
                return Err(LabError::Interrupted);
            }
            if (k + 1) % 250 == 0 {
                progress(&format!("bng-dhcp: {} subscribers up", k + 1));
            }
        }
        // Taggers, all from one thread in the access namespace.
        let tags: Vec<(String, u16, u16)> = h.subs.iter().map(|s| (s.port_if.clone(), s.svid, s.cvid)).collect();
        let taggers =
            h.access.run(move || tags.iter().map(|(p, sv, cv)| Tagger::subscriber(p, *sv, *cv)).collect::<Result<Vec<_>, _>>())??;
        h.taggers.extend(taggers);
        progress(&format!(
            "bng-dhcp: topology ready in {:.1} s ({} subscribers, {} tc programs)",
            t0.elapsed().as_secs_f64(),
            h.subs.len(),
            2 * h.taggers.len()
        ));
        Ok(h)
    }

    /// Runs `args` inside subscriber `s`'s namespace and returns its output (any status).
    pub fn sub_exec(&self, s: &Sub, args: &[&str]) -> std::io::Result<std::process::Output> {
        Command::new("ip").args(["netns", "exec", &s.ns]).args(args).stdin(Stdio::null()).output()
    }

    /// Removes everything: the subscriber namespaces (one batch), the taggers, the veths and
    /// the three namespaces. Idempotent.
    pub fn teardown(&mut self) {
        self.taggers.clear();
        if self.sub_ns_created {
            self.sub_ns_created = false;
            for s in &self.subs {
                for pid in crate::topo::ns_pids(&s.ns) {
                    // Only the lab starts processes in its namespaces.
                    let _ = run_cmd("kill", &["-KILL", &pid.to_string()]);
                }
            }
            let lines: String = self.subs.iter().map(|s| format!("netns del {}\n", s.ns)).collect();
            // -force: go on past a namespace that is already gone.
            let _ = batch(&["-force"], &lines);
        }
        self.veths.clear();
    }

    /// Namespaces of this run still present on the machine (after [`Hosts::teardown`] and drop:
    /// none).
    pub fn namespaces(&self) -> Vec<String> {
        let mut v: Vec<String> = self.subs.iter().map(|s| s.ns.clone()).collect();
        v.extend([self.up.name().to_owned(), self.access.name().to_owned(), self.core.name().to_owned()]);
        v
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// The clients' hook: sets the address and the default route and appends `EVENT UNIX_TIME
/// ADDRESS` to `$FP_HOOK_LOG` (udhcpc: `$1` with `$ip`, `$subnet`, `$router`; dhclient:
/// `$reason` with `$new_*`, the log given with `-e`). The distributions' own scripts would also
/// rewrite the host's `resolv.conf`.
pub const HOOK_SCRIPT: &str = r#"#!/bin/sh
# fastpath lab bng-dhcp: the DHCP clients' hook script.
log() { echo "$1 $(date +%s.%N) $2" >> "$FP_HOOK_LOG"; }
if [ -n "$reason" ]; then
    case "$reason" in
    BOUND|REBOOT)
        ip addr flush dev "$interface"
        ip addr add "$new_ip_address/$new_subnet_mask" dev "$interface"
        [ -n "$new_routers" ] && ip route replace default via "${new_routers%% *}" dev "$interface"
        log bound "$new_ip_address" ;;
    RENEW|REBIND)
        ip addr replace "$new_ip_address/$new_subnet_mask" dev "$interface"
        log renew "$new_ip_address" ;;
    EXPIRE|FAIL|RELEASE|STOP)
        ip addr flush dev "$interface"
        log deconfig "$old_ip_address" ;;
    esac
    exit 0
fi
case "$1" in
bound)
    ip addr flush dev "$interface"
    ip addr add "$ip/$subnet" dev "$interface"
    [ -n "$router" ] && ip route replace default via "${router%% *}" dev "$interface"
    log bound "$ip" ;;
renew)
    ip addr replace "$ip/$subnet" dev "$interface"
    log renew "$ip" ;;
deconfig)
    ip addr flush dev "$interface"
    log deconfig "" ;;
esac
exit 0
"#;

/// One line of a hook log.
#[derive(Clone, Debug, PartialEq)]
pub struct HookEvent {
    /// `bound`, `renew` or `deconfig`.
    pub event: String,
    /// UNIX seconds.
    pub at_s: f64,
    /// The address (none for a deconfig of udhcpc).
    pub ip: Option<Ipv4Addr>,
}

/// Parses a hook log; lines that do not parse are skipped (a line being written).
pub fn parse_hook_log(text: &str) -> Vec<HookEvent> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let event = w.next()?.to_owned();
            let at_s = w.next()?.parse().ok()?;
            let ip = w.next().and_then(|x| x.parse().ok());
            Some(HookEvent { event, at_s, ip })
        })
        .collect()
}

/// Seconds since the UNIX epoch.
pub fn unix_now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// A running DHCP client.
pub struct Client {
    /// The subscriber's index.
    pub index: u32,
    /// The process (`ip netns exec` execs the client itself, so this is its PID).
    pub child: Child,
    /// When it was started (UNIX seconds).
    pub started_s: f64,
    /// Its hook log.
    pub log: PathBuf,
    /// dhclient's lease and pid files (for `dhclient -r`).
    pub files: Option<(PathBuf, PathBuf)>,
}

impl Client {
    /// Starts `s`'s client, its files in `dir`, the hook script at `script`.
    ///
    /// # Errors
    /// When the client cannot be started (not installed: `scripts/setup-lab.sh`).
    pub fn start(s: &Sub, dir: &Path, script: &Path) -> Result<Client, LabError> {
        let log = dir.join(format!("hook-{}.log", s.index));
        let _ = std::fs::remove_file(&log);
        let errlog = std::fs::File::create(dir.join(format!("client-{}.log", s.index)))?;
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &s.ns]).env("FP_HOOK_LOG", &log).stdin(Stdio::null()).stdout(Stdio::null()).stderr(errlog);
        let files = match s.client {
            ClientKind::Udhcpc => {
                // -f foreground, -t/-T: 30 DISCOVERs 2 s apart before a pause of -A s.
                c.args(["busybox", "udhcpc", "-f", "-i", "eth0", "-t", "30", "-T", "2", "-A", "2", "-s"]).arg(script);
                None
            }
            ClientKind::Dhclient => {
                let (lf, pf, cf) = (
                    dir.join(format!("dhclient-{}.leases", s.index)),
                    dir.join(format!("dhclient-{}.pid", s.index)),
                    dir.join("dhclient.conf"),
                );
                std::fs::write(&cf, "")?;
                c.args(["dhclient", "-d", "-4", "-cf"])
                    .arg(&cf)
                    .arg("-lf")
                    .arg(&lf)
                    .arg("-pf")
                    .arg(&pf)
                    .arg("-sf")
                    .arg(script)
                    .arg("-e")
                    .arg(format!("FP_HOOK_LOG={}", log.display()))
                    .arg("eth0");
                Some((lf, pf))
            }
        };
        let started_s = unix_now_s();
        let child = c.spawn().map_err(|e| LabError::Unavailable {
            dut: format!("{:?}", s.client),
            why: format!("cannot start it ({e}); scripts/setup-lab.sh installs busybox and isc-dhcp-client"),
        })?;
        Ok(Client { index: s.index, child, started_s, log, files })
    }

    /// What its hook has logged so far.
    pub fn events(&self) -> Vec<HookEvent> {
        parse_hook_log(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }

    /// Its first `bound` event.
    pub fn bound(&self) -> Option<HookEvent> {
        self.events().into_iter().find(|e| e.event == "bound")
    }

    /// The address it holds now: the last bound/renew not followed by a deconfig.
    pub fn address(&self) -> Option<Ipv4Addr> {
        let mut a = None;
        for e in self.events() {
            match e.event.as_str() {
                "bound" | "renew" => a = e.ip,
                "deconfig" => a = None,
                _ => {}
            }
        }
        a
    }

    /// Sends `sig` (a number) to the client by its PID.
    pub fn signal(&self, sig: &str) -> bool {
        run_cmd("kill", &[&format!("-{sig}"), &self.child.id().to_string()]).is_ok()
    }

    /// Stops it (SIGTERM, then SIGKILL).
    pub fn stop(&mut self) {
        stop_child(&mut self.child, Duration::from_millis(500));
    }
}

/// The user plane's sessions as its `down_session` table shows them: address ▸ (port, S-VLAN,
/// C-VLAN, MAC).
pub type SessionTable = HashMap<Ipv4Addr, (u16, u16, u16, String)>;

/// Parses `fastpath ctl show table down_session`: lines `table down_session add A =>
/// session_down(ID, PORT, SVLAN, CVLAN, MAC)`.
pub fn parse_down_sessions(text: &str) -> SessionTable {
    let mut t = SessionTable::new();
    for l in text.lines() {
        let Some(rest) = l.trim().strip_prefix("table down_session add ") else { continue };
        let Some((ip, act)) = rest.split_once("=>") else { continue };
        let Ok(ip) = ip.trim().parse::<Ipv4Addr>() else { continue };
        let Some(args) = act.trim().strip_prefix("session_down(").and_then(|a| a.strip_suffix(')')) else { continue };
        let f: Vec<&str> = args.split(',').map(str::trim).collect();
        if f.len() != 5 {
            continue;
        }
        let (Ok(port), Ok(sv), Ok(cv)) = (f[1].parse(), f[2].parse(), f[3].parse()) else { continue };
        t.insert(ip, (port, sv, cv, f[4].to_ascii_lowercase()));
    }
    t
}

/// The readiness probe's line (S-VLAN, C-VLAN, MAC): tags no subscriber has, a MAC of its own.
pub const PROBE_LINE: (u16, u16, [u8; 6]) = (4094, 4094, [0x02, 0x5b, 0xff, 0xff, 0xff, 0xfe]);

/// Sends an ARP request for the gateway, tagged with `line`'s S-VLAN and C-VLAN from its MAC,
/// out of `iface` of `ns` every 100 ms until the user plane's answer comes back there (at most
/// `bound`): the access path through the bridge into the user plane's access port works.
///
/// # Errors
/// When the raw socket cannot be opened or the send fails.
pub fn gateway_answers(ns: &Netns, iface: &str, line: (u16, u16, [u8; 6]), bound: Duration) -> Result<bool, LabError> {
    use fastpath_packet::hdr::arp::ArpRepr;
    let (svid, cvid, mac) = line;
    let req = fastpath_packet::build::FrameBuilder::eth([0xff; 6], mac)
        .qinq(svid, cvid)
        .arp(ArpRepr::request(mac, Ipv4Addr::new(100, 64, 255, 254), GATEWAY_IP))
        .build();
    ns.run(|| -> Result<bool, LabError> {
        let sock = fastpath_io::af_packet::RawSocket::open(iface).map_err(|e| LabError::Io(format!("{iface}: {e}")))?;
        let t0 = Instant::now();
        let mut buf = vec![0u8; 2048];
        while t0.elapsed() < bound {
            sock.send(&req).map_err(|e| LabError::Io(format!("{iface}: {e}")))?;
            let sent = Instant::now();
            while sent.elapsed() < Duration::from_millis(100) {
                let Ok(Some(n)) = sock.recv(&mut buf, 20) else { continue };
                // To the probe, from the gateway, ARP (0x0806) inside the two tags.
                if n >= 22 && buf[..6] == mac && buf[6..12] == GATEWAY_MAC && buf[20..22] == [0x08, 0x06] {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    })?
}

/// The gateway's address as the clients see it (their default route).
pub const GATEWAY: Ipv4Addr = GATEWAY_IP;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_log_lines_parse_and_partial_lines_are_skipped() {
        let ev = parse_hook_log("bound 1764039000.125 100.64.1.7\nrenew 1764039010.5 100.64.1.7\ndeconfig 1764039020.0\nbou");
        assert_eq!(ev.len(), 3);
        assert_eq!(ev[0], HookEvent { event: "bound".into(), at_s: 1_764_039_000.125, ip: Some(Ipv4Addr::new(100, 64, 1, 7)) });
        assert_eq!(ev[2].ip, None);
    }

    #[test]
    fn down_session_lines_give_address_and_line() {
        let t = parse_down_sessions(
            "table down_session add 100.64.1.7 => session_down(3, 0, 100, 8, 02:5B:00:00:00:07)\n\
             table up_session add 0 100 8 02:5b:00:00:00:07 => session_up(3, 100.64.1.7, 0)\n\
             table down_session add 100.64.1.9 => session_down(4, 0, 100)\n",
        );
        assert_eq!(t.len(), 1);
        assert_eq!(t[&Ipv4Addr::new(100, 64, 1, 7)], (0, 100, 8, "02:5b:00:00:00:07".to_owned()));
    }

    #[test]
    fn roles_and_tags() {
        let s = sub(0, 1, Some(1), 42);
        assert_eq!((s.client, s.svid, s.cvid, s.short_lease), (ClientKind::Dhclient, 100, 1, false));
        let s = sub(1, 1, Some(1), 42);
        assert_eq!((s.client, s.svid, s.cvid, s.short_lease), (ClientKind::Udhcpc, EXPIRY_SVLAN, 2, true));
        assert_eq!(s.ns, "fp-bsub-42-1");
        let s = sub(999, 1, Some(1), 42);
        assert_eq!((s.svid, s.cvid, s.mac), (100, 1000, [0x02, 0x5b, 0, 0, 0x03, 0xe7]));
    }
}
