//! Helpers shared by the live tests (`live_*.rs`): the root check, and a guard that stops the
//! `fastpath` child process by PID and removes its files on every exit path (also when an
//! assertion fails).
// Each test binary compiles its own copy of this module and uses only some of it.
#![allow(dead_code)]

use fastpath_io::netns::Netns;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// True when running as root. Otherwise the test is skipped (false), except in CI (`CI` set),
/// where a missing root is a failure.
pub fn root_or_skip() -> bool {
    if fastpath_io::sys::is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs these tests as root");
    eprintln!("not root: skipped");
    false
}

/// Owns a spawned `fastpath`: on drop, kills it by PID (SIGKILL) if it is still running, reaps
/// it, then removes the files given to [`ChildGuard::removing`].
pub struct ChildGuard {
    child: Child,
    files: Vec<PathBuf>,
}

impl ChildGuard {
    /// Guards `child`.
    pub fn new(child: Child) -> Self {
        ChildGuard { child, files: Vec::new() }
    }

    /// Also removes `path` on drop (after the child is gone).
    pub fn removing(mut self, path: impl Into<PathBuf>) -> Self {
        self.files.push(path.into());
        self
    }

    /// The guarded child.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends SIGTERM first when `term`, then waits (at most 15 s) for the child to exit and
    /// returns its status, stdout and stderr (both must have been piped).
    pub fn stop(&mut self, term: bool) -> (ExitStatus, String, String) {
        let c = &mut self.child;
        if term {
            let st = Command::new("kill").args(["-TERM", &c.id().to_string()]).status().unwrap();
            assert!(st.success());
        }
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break s;
            }
            assert!(t0.elapsed() < Duration::from_secs(15), "fastpath did not stop");
            std::thread::sleep(Duration::from_millis(20));
        };
        let (mut out, mut err) = (String::new(), String::new());
        c.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (status, out, err)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Removes a directory tree on drop (after the guards declared later have stopped their
/// processes, which drop first).
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An Ethernet/IPv4/UDP frame to an unknown unicast MAC (a switch floods it); with `bad_ihl`,
/// its IPv4 header length field says 16 bytes (the parser drops it as `ipv4_bad_ihl`).
pub fn flood_frame(seq: u32, bad_ihl: bool) -> Vec<u8> {
    let mut f = vec![2, 0x18, 0, 0, 0, 0xbb, 2, 0x18, 0, 0, 0, 0xaa, 0x08, 0x00];
    let mut ip = [0u8; 20];
    ip[0] = if bad_ihl { 0x44 } else { 0x45 };
    ip[2..4].copy_from_slice(&(20u16 + 8 + 32).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 0, 2]);
    ip[16..20].copy_from_slice(&[198, 19, 0, 2]);
    let mut s: u32 = ip.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    ip[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x27, 0x10, 0, 7, 0, 40, 0, 0]);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(14 + 60, 0x5a);
    f
}

/// `GET path` from `addr` (HTTP/1.0, so the body is never chunked) inside `ns` → (status code,
/// body).
pub fn http_get(ns: &Netns, addr: &str, path: &str) -> Option<(u16, String)> {
    let (addr, path) = (addr.to_string(), path.to_string());
    ns.run(move || {
        let mut s = TcpStream::connect(&addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
        let mut r = Vec::new();
        s.read_to_end(&mut r).ok()?;
        let r = String::from_utf8_lossy(&r);
        let (head, body) = r.split_once("\r\n\r\n")?;
        Some((head.split(' ').nth(1)?.parse().ok()?, body.to_string()))
    })
    .ok()
    .flatten()
}

/// Polls `f` every 200 ms until it gives a value; panics after `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(x) = f() {
            return x;
        }
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// True when `prog --version` runs.
pub fn have(prog: &str) -> bool {
    Command::new(prog).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// A `fastpath bng-cp` config: CPRi on `cpri`, the user plane's PFCP endpoint at `user_plane`,
/// the store at `store`; gateway 100.64.0.1 (02:fa:00:00:00:01), one pool for S-VLAN 100,
/// 100.64.0.10–20, leases of 600 s.
pub fn bng_cp_config(cpri: &str, user_plane: &str, store: &str) -> String {
    format!(
        r#"store = "{store}"
[cpri]
listen = "{cpri}"
up_id = 1
[pfcp]
user_plane = "{user_plane}"
local = "127.0.0.1:0"
{BNG_CP_DHCP}"#
    )
}

/// The `[dhcp]` part of the test `bng-cp` configs: gateway 100.64.0.1 (02:fa:00:00:00:01), one
/// pool for S-VLAN 100, 100.64.0.10–20, leases of 600 s.
pub const BNG_CP_DHCP: &str = r#"[dhcp]
gateway = "100.64.0.1"
gateway_mac = "02:fa:00:00:00:01"
lease_time_s = 600
[[dhcp.pool]]
name = "s100"
svlans = [100]
first = "100.64.0.10"
last = "100.64.0.20"
mask = "255.255.255.0"
"#;

/// A subscriber's DHCP request of type `ty` (xid fixed, `chaddr` its MAC), with `f` for the rest,
/// as the frame a user plane punts: broadcast, inside its S-tag and C-tag.
pub fn dhcp_client_frame(
    sub: &fastpath_bng::dhcp::server::Identity,
    ty: fastpath_bng::dhcp::wire::MessageType,
    f: impl FnOnce(&mut fastpath_bng::dhcp::wire::DhcpRepr),
) -> Vec<u8> {
    let mut m = fastpath_bng::dhcp::wire::DhcpRepr::empty(fastpath_bng::dhcp::wire::Op::BOOTREQUEST);
    m.xid = 0x1234_5678;
    m.chaddr[..6].copy_from_slice(&sub.mac);
    m.options.message_type = Some(ty);
    f(&mut m);
    fastpath_bng::cpri::client_frame(sub, &m)
}

/// Sends `frame` on `iface` in `peer` (again every 300 ms, for at most 15 s) until a Q-in-Q
/// frame with a DHCP reply (UDP 67 ▸ 68) of type `want` arrives there; returns the frame and
/// the message.
pub fn qinq_dhcp_exchange(
    peer: &Netns,
    iface: &str,
    frame: &[u8],
    want: fastpath_bng::dhcp::wire::MessageType,
) -> Option<(Vec<u8>, fastpath_bng::dhcp::wire::DhcpRepr)> {
    let (frame, iface) = (frame.to_vec(), iface.to_string());
    peer.run(move || {
        let s = fastpath_io::af_packet::RawSocket::open(&iface).unwrap();
        let t0 = Instant::now();
        let mut buf = vec![0u8; 2048];
        while t0.elapsed() < Duration::from_secs(15) {
            s.send(&frame).unwrap();
            let sent = Instant::now();
            while sent.elapsed() < Duration::from_millis(300) {
                let Some(n) = s.recv(&mut buf, 100).unwrap() else { continue };
                // 802.1ad S-tag, 802.1Q C-tag, IPv4, UDP 67 ▸ 68.
                let f = &buf[..n];
                if n > 50 && f[12..14] == [0x88, 0xa8] && f[16..18] == [0x81, 0x00] && f[42..44] == [0, 67] {
                    if let Ok(m) = fastpath_bng::dhcp::wire::DhcpRepr::parse(&f[50..]) {
                        if m.options.message_type == Some(want) {
                            return Some((f.to_vec(), m));
                        }
                    }
                }
            }
        }
        None
    })
    .unwrap()
}
