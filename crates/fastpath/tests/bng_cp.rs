//! `fastpath bng-cp` against a user plane on 127.0.0.1, over its two interfaces.
//!
//! The user plane is driven in-process the way `fastpath bench bng-cp` does it: the PFCP
//! endpoint of `fastpath run --pfcp` (`pfcp_up::PfcpServer`) in front of the vbng pipeline's
//! `Control`, and a worker thread applying what it commits. The test plays the user plane's
//! CPRi end with a UDP socket: it sends a Q-in-Q subscriber's DHCP frames as G-PDUs (TEID =
//! user plane 1, port 1) to the control plane, which runs as its own process
//! (`fastpath bng-cp --config`), and reads the G-PDUs that come back.
//!
//! What it shows: DISCOVER ▸ OFFER and REQUEST ▸ ACK come back over GTP-U with the TEID they
//! went up with, as whole frames with the subscriber's S-VLAN and C-VLAN, from the gateway MAC,
//! to the client; after the ACK the session is on the user plane (a `down_session` entry for the
//! leased address, an `up_session` entry for the line). Then the control plane is killed and
//! started again on the same store: it renews the lease (so it has it) without re-creating the
//! session (it logs no establishment and no refusal, and the UP's entry is unchanged), and a
//! RELEASE then removes the session from the user plane (so it knew the session's UP SEID).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

mod common;

use common::{bng_cp_config, dhcp_client_frame};
use fastpath_bng::dhcp::server::Identity;
use fastpath_bng::dhcp::wire::{DhcpRepr, MessageType};
use fastpath_control::mailbox::mailbox;
use fastpath_control::pfcp_up::{self, Endpoint, PfcpServer};
use fastpath_control::Control;
use fastpath_pfcp::gtpu::{self, Gtpu};
use fastpath_pipeline::value::Match;
use fastpath_pipeline::Pipeline;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const GW_MAC: [u8; 6] = [0x02, 0xfa, 0, 0, 0, 1];
const GW: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);

fn vbng() -> Result<Pipeline, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/vbng.toml");
    let mut p = fastpath_pipeline::compile_file(&path).map_err(|e| e.to_string())?.instantiate();
    p.set_ports(2)?;
    Ok(p)
}

fn free_udp_port() -> u16 {
    UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap().port()
}

/// The control plane process; killed (by its PID, through `Child`) when dropped.
struct Cp(Child);

impl Drop for Cp {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_cp(config: &Path, log: &Path) -> Cp {
    let err = std::fs::File::create(log).unwrap();
    Cp(Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["bng-cp", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap())
}

/// `sub`'s DHCP request as a G-PDU from user plane 1, port `sub.port`.
fn request(sub: &Identity, ty: MessageType, f: impl FnOnce(&mut DhcpRepr)) -> Vec<u8> {
    let mut d = Vec::new();
    gtpu::emit_gpdu(gtpu::cpri_teid(1, sub.port as u16), &dhcp_client_frame(sub, ty, f), &mut d).unwrap();
    d
}

/// Sends `req` (again every 300 ms, the control plane may still be starting) until a G-PDU
/// with a DHCP message of type `want` comes back; returns (TEID, frame, message).
fn exchange(up: &UdpSocket, cp: SocketAddr, req: &[u8], want: MessageType) -> (u32, Vec<u8>, DhcpRepr) {
    let t0 = Instant::now();
    let mut buf = [0u8; 2048];
    while t0.elapsed() < Duration::from_secs(10) {
        up.send_to(req, cp).unwrap();
        while let Ok((n, _)) = up.recv_from(&mut buf) {
            let g = Gtpu::parse(&buf[..n]).unwrap();
            let frame = g.payload.to_vec();
            let m = DhcpRepr::parse(&frame[50..]).unwrap();
            if m.options.message_type == Some(want) {
                return (g.teid, frame, m);
            }
        }
    }
    panic!("no {want:?} from the control plane in 10 s");
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(10), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn dhcp_over_cpri_makes_a_session_on_the_user_plane() {
    let dir = std::env::temp_dir().join(format!("fastpath-bng-cp-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    // The user plane: PFCP endpoint + control + one worker.
    let shadow = vbng().unwrap();
    let cfg = pfcp_up::Config::for_program(shadow.program(), IpAddr::V4(Ipv4Addr::LOCALHOST), vec!["0".into(), "1".into()], 1).unwrap();
    let mut server = PfcpServer::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), Endpoint::new(cfg)).unwrap();
    let pfcp_addr = server.local_addr().unwrap();
    let (end, mut wend) = mailbox();
    let control = Mutex::new(Control::new(shadow, Box::new(vbng), vec![end]));
    let stop = AtomicBool::new(false);
    let up = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    up.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let cpri = SocketAddr::from((Ipv4Addr::LOCALHOST, free_udp_port()));
    let config = dir.join("cp.toml");
    std::fs::write(&config, bng_cp_config(&cpri.to_string(), &pfcp_addr.to_string(), "cp.db")).unwrap();
    let sub = Identity { port: 1, svlan: 100, cvlan: 7, mac: [0x02, 0, 0, 0, 0x12, 0x34] };
    // The session entries the user plane holds: (down_session keys, up_session len).
    let tables = || {
        let c = control.lock().unwrap();
        let down: Vec<Match> = c.shadow().table("down_session").unwrap().dump().into_iter().map(|e| e.key[0]).collect();
        (down, c.shadow().table("up_session").unwrap().len())
    };

    std::thread::scope(|s| {
        s.spawn(|| {
            let mut p = vbng().unwrap();
            while !stop.load(Ordering::Relaxed) {
                wend.poll(&mut p, |_| {});
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        s.spawn(|| server.serve_until(&control, &stop));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let log1 = dir.join("cp1.log");
            let cp = start_cp(&config, &log1);
            let (teid, offer_frame, offer) = exchange(&up, cpri, &request(&sub, MessageType::DISCOVER, |_| {}), MessageType::OFFER);
            let leased = offer.yiaddr;
            assert_eq!(leased, Ipv4Addr::new(100, 64, 0, 10));
            assert_eq!(teid, gtpu::cpri_teid(1, 1), "the reply names the port the request came in on");
            assert_eq!(&offer_frame[6..12], &GW_MAC, "from the gateway MAC");
            assert_eq!(&offer_frame[12..22], &[0x88, 0xa8, 0, 100, 0x81, 0x00, 0, 7, 0x08, 0x00], "S-VLAN 100, C-VLAN 7");
            let (_, ack_frame, ack) = exchange(
                &up,
                cpri,
                &request(&sub, MessageType::REQUEST, |m| {
                    m.options.requested_ip = Some(leased);
                    m.options.server_id = Some(GW);
                }),
                MessageType::ACK,
            );
            assert_eq!((ack.yiaddr, ack.options.lease_time_s), (leased, Some(600)));
            assert_eq!((&ack_frame[..6], &ack_frame[6..12]), (&sub.mac[..], &GW_MAC[..]), "gateway MAC ▸ the client's MAC");
            assert_eq!(&ack_frame[12..22], &[0x88, 0xa8, 0, 100, 0x81, 0x00, 0, 7, 0x08, 0x00]);
            assert_eq!(&ack_frame[22 + 12..22 + 20], &[100, 64, 0, 1, 100, 64, 0, 10], "gateway ▸ leased address");
            wait_for("the session on the user plane", || tables().0.len() == 1);
            let (down, ups) = tables();
            assert_eq!((down[0], ups), (Match::Exact(u128::from(u32::from(leased))), 1));
            wait_for("the establishment's answer", || std::fs::read_to_string(&log1).unwrap_or_default().contains("session up"));
            drop(cp);
            let log = std::fs::read_to_string(&log1).unwrap();
            assert!(log.contains("session up 1:1/100/7"), "{log}");

            // Restart on the same store.
            let log2 = dir.join("cp2.log");
            let cp = start_cp(&config, &log2);
            let renew = request(&sub, MessageType::REQUEST, |m| m.ciaddr = leased);
            let (_, _, ack) = exchange(&up, cpri, &renew, MessageType::ACK);
            assert_eq!(ack.yiaddr, leased, "the restarted control plane has the lease");
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(tables(), (down.clone(), 1), "the user plane's session is untouched");
            let release = request(&sub, MessageType::RELEASE, |m| {
                m.ciaddr = leased;
                m.options.server_id = Some(GW);
            });
            up.send_to(&release, cpri).unwrap();
            wait_for("the session to leave the user plane", || tables() == (vec![], 0));
            // The tables change before the user plane answers (it reads the final counters
            // first): wait for the answer to reach the control plane's log.
            wait_for("the deletion's answer", || std::fs::read_to_string(&log2).unwrap_or_default().contains("session down"));
            drop(cp);
            let log = std::fs::read_to_string(&log2).unwrap();
            assert!(log.contains("1 leases restored"), "{log}");
            assert!(!log.contains("session up") && !log.contains("refused"), "re-created after the restart: {log}");
            assert!(log.contains("session down 1:1/100/7"), "{log}");
        }));
        stop.store(true, Ordering::Relaxed);
        if let Err(e) = result {
            std::panic::resume_unwind(e);
        }
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_config_names_the_value() {
    let dir = std::env::temp_dir().join(format!("fastpath-bng-cp-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("cp.toml");
    let good = r#"store = "cp.db"
[cpri]
listen = "127.0.0.1:2152"
[pfcp]
user_plane = "127.0.0.1:8805"
[dhcp]
gateway = "100.64.0.1"
gateway_mac = "02:fa:00:00:00:01"
[[dhcp.pool]]
name = "p"
first = "100.64.0.10"
last = "100.64.0.20"
mask = "255.255.255.0"
"#;
    for (from, to, want) in [
        ("02:fa:00:00:00:01", "02:fa:00:00:01", r#"dhcp.gateway_mac = "02:fa:00:00:01": not a MAC address"#),
        ("\"100.64.0.20\"", "\"100.64.0.300\"", r#"dhcp.pool[0].last = "100.64.0.300": not an IPv4 address"#),
        ("127.0.0.1:8805", "127.0.0.1", r#"pfcp.user_plane = "127.0.0.1": not an address:port"#),
        ("name = \"p\"", "name = \"p\"\nsvlans = [5000]", r#"dhcp.pool[0].svlans = "5000": an S-VLAN is 1 to 4094"#),
        ("[cpri]", "[cpri]\nlisen = 1", "unknown field `lisen`"),
        ("[dhcp]", "[[user_plane]]\nid = 2\npfcp = \"127.0.0.1:8806\"\n[dhcp]", "not both"),
        (
            "user_plane = \"127.0.0.1:8805\"",
            "[[user_plane]]\nid = 2\npfcp = \"127.0.0.1:8806\"\n[[user_plane]]\nid = 2\npfcp = \"127.0.0.1:8807\"",
            r#"user_plane[1].id = "2": another user plane has this id"#,
        ),
        ("user_plane = \"127.0.0.1:8805\"", "", "no user plane"),
        ("[dhcp]", "[dhcp]\nmode = \"proxy\"", r#"dhcp.mode = "proxy": "server" (the pools here) or "relay""#),
        // Relay mode: no pools, and [dhcp.relay] with its servers.
        ("[dhcp]", "[dhcp]\nmode = \"relay\"", "dhcp.pool: not with dhcp.mode = \"relay\""),
        ("[[dhcp.pool]]", "[dhcp.relay]\nservers = [\"198.18.0.2\"]\n[[dhcp.pool]]", "[dhcp.relay]: only with dhcp.mode = \"relay\""),
    ] {
        std::fs::write(&config, good.replace(from, to)).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_fastpath")).args(["bng-cp", "--config"]).arg(&config).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{want}: {err}");
    }
    // Relay mode, the pools gone.
    let relay = good.split("[[dhcp.pool]]").next().unwrap().replace("[dhcp]", "[dhcp]\nmode = \"relay\"");
    for (add, want) in [
        ("", "dhcp.mode = \"relay\" needs [dhcp.relay]"),
        ("[dhcp.relay]\nservers = []\n", "dhcp.relay.servers: at least one DHCP server"),
        ("[dhcp.relay]\nservers = [\"198.18.0.300\"]\n", r#"dhcp.relay.servers[0] = "198.18.0.300": not an IPv4 address"#),
        ("[dhcp.relay]\nservers = [\"198.18.0.2\"]\nlisten = \"127.0.0.1:6767\"\n", r#"dhcp.relay.listen = "127.0.0.1:6767": port 67"#),
        ("[dhcp.relay]\nservers = [\"198.18.0.2\"]\nmax_hops = 0\n", r#"dhcp.relay.max_hops = "0": 1 to 16"#),
        ("lease_time_s = 60\n[dhcp.relay]\nservers = [\"198.18.0.2\"]\n", "dhcp.lease_time_s: not with dhcp.mode = \"relay\""),
        // Valid, but 100.64.0.1 is no address of this host: the servers could not answer us.
        ("[dhcp.relay]\nservers = [\"198.18.0.2\"]\n", "dhcp.relay.listen 100.64.0.1:67: "),
    ] {
        // The [dhcp] keys end the text: `add` continues that section.
        std::fs::write(&config, format!("{relay}{add}").replace("127.0.0.1:2152", "127.0.0.1:0")).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_fastpath")).args(["bng-cp", "--config"]).arg(&config).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{want}: {err}");
    }
    let help = Command::new(env!("CARGO_BIN_EXE_fastpath")).args(["bng-cp", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&help.stdout).contains("TEID = user-plane number << 16 | access port"));
    std::fs::remove_dir_all(&dir).unwrap();
}
