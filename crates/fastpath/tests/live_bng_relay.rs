//! Relay mode, as deployed: `fastpath run pipelines/vbng.toml --cpri … --pfcp …` (the user
//! plane) and `fastpath bng-cp` with `[dhcp] mode = "relay"`, in a namespace of their own, and
//! Debian's dnsmasq as the external DHCP server in another.
//!
//! ```text
//!   peer ns                          dut ns                                                   srv ns
//!   s0 (subscribers) ── veth ── a0 access ┐ fastpath run vbng ─ CPRi, PFCP (127.0.0.1) ─ fastpath bng-cp
//!   c0               ── veth ── a1 core   ┘                                        r0 198.18.7.1/24 ── veth ── r1 198.18.7.2 dnsmasq
//!                                                                                     + 100.64.0.1 (giaddr)      route 100.64.0.0/24 via r0
//! ```
//! dnsmasq hands out addresses only by the circuit-id our option 82 carries: line A (S-VLAN 100,
//! C-VLAN 7) from 100.64.0.50–59, line B (C-VLAN 8) from .60–69, nothing to any other. The test:
//! 1. A and B lease (crafted DHCP frames, as `live_cpri.rs`): each OFFER and ACK comes back
//!    out of the access port inside the line's S-tag and C-tag from the gateway MAC, with an
//!    address of its line's range and the relay (the gateway) as server identifier; dnsmasq's
//!    lease file, the control plane's store and the user plane's sessions agree;
//! 2. the control plane is killed (SIGKILL) and started again on the same store: A's renewal
//!    is relayed and ACKed, and nothing was re-created on the user plane;
//! 3. A releases: its session leaves the user plane, its lease leaves dnsmasq and the store.
//!
//! Bounded: each wait has its limit (about 60 s in all); every process is stopped by PID and
//! the namespaces are removed on every exit path. Needs root (in CI a missing root or dnsmasq is
//! a failure).

mod common;

use common::{dhcp_client_frame, qinq_dhcp_exchange, root_or_skip, wait_for, ChildGuard, TempDir};
use fastpath_bng::dhcp::server::Identity;
use fastpath_bng::dhcp::wire::MessageType;
use fastpath_bng::store::Store;
use fastpath_io::netns::{Netns, VethPair};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const GW: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);
const SERVER: &str = "198.18.7.2";

/// The address dnsmasq's lease file holds for `mac` (lines: expiry, MAC, address, name, id).
fn dnsmasq_lease(file: &Path, mac: [u8; 6]) -> Option<Ipv4Addr> {
    let text = std::fs::read_to_string(file).ok()?;
    let m = format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&m.as_str())).then(|| f.get(2)?.parse().ok()).flatten()
    })
}

/// The lease the control plane's store holds for `id` (read while the process runs).
fn stored(store: &Path, id: &Identity) -> Option<Ipv4Addr> {
    Store::open(store).ok()?.load().ok()?.leases.iter().find(|l| l.identity == *id).map(|l| l.ip)
}

fn bng_cp(ns: &Netns, config: &Path, log: PathBuf) -> ChildGuard {
    let c = Command::new("ip")
        .args(["netns", "exec", ns.name(), env!("CARGO_BIN_EXE_fastpath"), "bng-cp", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    ChildGuard::new(c)
}

#[test]
fn subscribers_lease_from_an_external_server_through_the_relay() {
    if !root_or_skip() {
        return;
    }
    if !common::have("dnsmasq") {
        assert!(std::env::var_os("CI").is_none(), "dnsmasq is missing (scripts/setup-lab.sh installs dnsmasq-base)");
        eprintln!("no dnsmasq: skipped");
        return;
    }
    let tmp = TempDir(std::env::temp_dir().join(format!("fp-relay-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();
    let peer = Netns::new("fpr-peer").unwrap();
    let dut = Netns::new("fpr-dut").unwrap();
    let srv = Netns::new("fpr-srv").unwrap();
    let _veths = [
        VethPair::new(&peer, "s0", &dut, "a0").unwrap(),
        VethPair::new(&peer, "c0", &dut, "a1").unwrap(),
        VethPair::new(&dut, "r0", &srv, "r1").unwrap(),
    ];
    dut.add_addr("r0", "198.18.7.1/24").unwrap();
    // giaddr: the servers answer the relay there, port 67.
    dut.add_addr("r0", "100.64.0.1/32").unwrap();
    srv.add_addr("r1", &format!("{SERVER}/24")).unwrap();
    srv.ip(&["route", "add", "100.64.0.0/24", "via", "198.18.7.1"]).unwrap();

    // dnsmasq: an address only for the circuit-ids of lines A and B (TEID 1 << 16 | port 0).
    let leases = tmp.0.join("dnsmasq.leases");
    let dnsmasq = Command::new("ip")
        .args(["netns", "exec", srv.name(), "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0"])
        .args(["--no-resolv", "--no-hosts", "--user=root", "--bind-interfaces", "--interface=r1", "--dhcp-authoritative"])
        .args(["--dhcp-circuitid=set:lineA,65536/100/7", "--dhcp-circuitid=set:lineB,65536/100/8"])
        .args(["--dhcp-range=tag:lineA,100.64.0.50,100.64.0.59,255.255.255.0,2m"])
        .args(["--dhcp-range=tag:lineB,100.64.0.60,100.64.0.69,255.255.255.0,2m"])
        .args(["--dhcp-option=3,100.64.0.1", "--log-dhcp", "--log-facility=-"])
        .arg(format!("--dhcp-leasefile={}", leases.display()))
        .arg(format!("--pid-file={}", tmp.0.join("dnsmasq.pid").display()))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.0.join("dnsmasq.log")).unwrap())
        .spawn()
        .unwrap();
    let _dnsmasq = ChildGuard::new(dnsmasq);

    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let ctl = tmp.0.join("ctl.sock");
    let up = Command::new("ip")
        .args(["netns", "exec", dut.name(), env!("CARGO_BIN_EXE_fastpath"), "run"])
        .arg(format!("{root}/pipelines/vbng.toml"))
        .arg("--entries")
        .arg(format!("{root}/testdata/vbng/demo.txt"))
        .args(["--port", "access=afpacket:a0", "--port", "core=afpacket:a1", "--idle-sleep", "50", "--no-pin"])
        .args(["--cpri", "127.0.0.1:2152", "--pfcp", "127.0.0.1", "--ctl"])
        .arg(&ctl)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.0.join("up.log")).unwrap())
        .spawn()
        .unwrap();
    let mut up = ChildGuard::new(up);
    let config = tmp.0.join("cp.toml");
    let store = tmp.0.join("cp.db");
    std::fs::write(
        &config,
        format!(
            r#"store = "{}"
[cpri]
listen = "127.0.0.1:2152"
[pfcp]
user_plane = "127.0.0.1:8805"
local = "127.0.0.1:0"
[dhcp]
mode = "relay"
gateway = "{GW}"
gateway_mac = "02:fa:00:00:00:01"
[dhcp.relay]
servers = ["{SERVER}"]
"#,
            store.display()
        ),
    )
    .unwrap();
    let mut cp = bng_cp(&dut, &config, tmp.0.join("cp1.log"));
    let show = |what: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_fastpath")).args(["ctl", "--socket"]).arg(&ctl).arg(what).output().unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    wait_for("the user plane's control socket", Duration::from_secs(10), || {
        assert!(
            up.child().try_wait().unwrap().is_none(),
            "fastpath run exited early: {}",
            std::fs::read_to_string(tmp.0.join("up.log")).unwrap_or_default()
        );
        show("show sessions").starts_with("0 session(s)").then_some(())
    });
    let logs = || {
        let read = |f: &str| std::fs::read_to_string(tmp.0.join(f)).unwrap_or_default();
        format!(
            "counters:\n{}\nbng-cp:\n{}{}\ndnsmasq:\n{}\nrun:\n{}",
            show("show counters"),
            read("cp1.log"),
            read("cp2.log"),
            read("dnsmasq.log"),
            read("up.log")
        )
    };

    // 1. Lines A and B lease through the relay, each from its own range.
    let a = Identity { port: 0, svlan: 100, cvlan: 7, mac: [0x02, 0, 0, 0, 0x12, 0x34] };
    let b = Identity { port: 0, svlan: 100, cvlan: 8, mac: [0x02, 0, 0, 0, 0x12, 0x35] };
    let mut ips = Vec::new();
    for (sub, range) in [(&a, 50..=59), (&b, 60..=69)] {
        let (frame, offer) = qinq_dhcp_exchange(&peer, "s0", &dhcp_client_frame(sub, MessageType::DISCOVER, |_| {}), MessageType::OFFER)
            .unwrap_or_else(|| panic!("no OFFER for C-VLAN {} in 15 s\n{}", sub.cvlan, logs()));
        assert!(range.contains(&offer.yiaddr.octets()[3]), "C-VLAN {}: {} is not of its line's range", sub.cvlan, offer.yiaddr);
        assert_eq!(offer.options.server_id, Some(GW), "the relay stands in for the server");
        assert_eq!(offer.options.relay_agent_info, None, "option 82 is removed");
        assert_eq!(&frame[..6], &sub.mac, "to the subscriber");
        assert_eq!(&frame[6..12], &[0x02, 0xfa, 0, 0, 0, 1], "from the gateway MAC");
        assert_eq!(&frame[12..20], &[0x88, 0xa8, 0, 100, 0x81, 0x00, 0, sub.cvlan as u8], "inside the line's tags");
        let (_, ack) = qinq_dhcp_exchange(
            &peer,
            "s0",
            &dhcp_client_frame(sub, MessageType::REQUEST, |m| {
                m.options.requested_ip = Some(offer.yiaddr);
                m.options.server_id = Some(GW);
            }),
            MessageType::ACK,
        )
        .unwrap_or_else(|| panic!("no ACK for C-VLAN {} in 15 s\n{}", sub.cvlan, logs()));
        assert_eq!(ack.yiaddr, offer.yiaddr);
        ips.push(ack.yiaddr);
        // The server, our store and the user plane agree.
        let line = Identity { port: 1 << 16, ..*sub };
        assert_eq!(dnsmasq_lease(&leases, sub.mac), Some(ack.yiaddr), "dnsmasq's lease\n{}", logs());
        assert_eq!(stored(&store, &line), Some(ack.yiaddr), "the control plane's store\n{}", logs());
    }
    let table = wait_for("both sessions on the user plane", Duration::from_secs(10), || {
        let t = show("show table down_session");
        ips.iter().all(|ip| t.contains(&ip.to_string())).then_some(t)
    });
    assert!(show("show sessions").starts_with("2 session(s)"), "{table}");

    // 2. The control plane is killed and started again: the renewal is relayed and ACKed by
    //    the server, and nothing is re-created.
    drop(cp);
    cp = bng_cp(&dut, &config, tmp.0.join("cp2.log"));
    let log2 = tmp.0.join("cp2.log");
    wait_for("the restarted control plane", Duration::from_secs(10), || {
        std::fs::read_to_string(&log2).unwrap_or_default().contains("2 leases restored").then_some(())
    });
    let (_, ack) = qinq_dhcp_exchange(&peer, "s0", &dhcp_client_frame(&a, MessageType::REQUEST, |m| m.ciaddr = ips[0]), MessageType::ACK)
        .unwrap_or_else(|| panic!("no ACK to the renewal after the restart\n{}", logs()));
    assert_eq!(ack.yiaddr, ips[0]);
    assert!(show("show sessions").starts_with("2 session(s)"));

    // 3. A releases: gone from the user plane, the server and the store.
    let release = dhcp_client_frame(&a, MessageType::RELEASE, |m| {
        m.ciaddr = ips[0];
        m.options.server_id = Some(GW);
    });
    peer.run(move || fastpath_io::af_packet::RawSocket::open("s0").unwrap().send(&release).unwrap()).unwrap();
    wait_for("A's session gone from the user plane", Duration::from_secs(10), || {
        show("show sessions").starts_with("1 session(s)").then_some(())
    });
    wait_for("A's lease gone from dnsmasq", Duration::from_secs(10), || dnsmasq_lease(&leases, a.mac).is_none().then_some(()));
    // The control plane logs the deletion and drops it from the store once the user plane has
    // answered it, which can be after the session left the user plane's table (a loaded host).
    let log = wait_for("the control plane's log of the deletion", Duration::from_secs(10), || {
        let log = std::fs::read_to_string(&log2).unwrap_or_default();
        log.contains("session down 1:0/100/7").then_some(log)
    });
    assert_eq!(stored(&store, &Identity { port: 1 << 16, ..a }), None, "the store\n{}", logs());
    assert_eq!(stored(&store, &Identity { port: 1 << 16, ..b }), Some(ips[1]));
    assert!(!log.contains("session up") && !log.contains("refused"), "re-created after the restart: {log}");
    drop(cp);
}
