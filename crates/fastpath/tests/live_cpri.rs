//! The broadband gateway split in two real processes, as deployed: `fastpath run
//! pipelines/vbng.toml --cpri … --pfcp …` (the user plane) and `fastpath bng-cp` (the control
//! plane), in a namespace of their own, with a Q-in-Q subscriber on a veth.
//!
//! ```text
//!   peer ns                       dut ns
//!   s0 (the subscriber: DHCP) ── veth ── a0 = access ┐ fastpath run vbng  ── CPRi (GTP-U, 127.0.0.1:2152) ──┐
//!   c0                        ── veth ── a1 = core   ┘   --pfcp 127.0.0.1 ◀─ PFCP (127.0.0.1:8805) ── fastpath bng-cp
//! ```
//! The subscriber's DISCOVER is punted by the pipeline, goes up as a G-PDU, and the OFFER the
//! control plane answers comes back down and out of the access port inside the subscriber's
//! S-tag and C-tag; REQUEST ▸ ACK likewise; after the ACK the control plane has created the
//! session on the user plane over PFCP (`fastpath ctl show sessions`). Bounded: 30 s at most;
//! both processes are stopped by PID and the namespaces removed on every exit path.

mod common;

use common::{bng_cp_config, dhcp_client_frame, qinq_dhcp_exchange, root_or_skip, wait_for, ChildGuard, TempDir};
use fastpath_bng::dhcp::server::Identity;
use fastpath_bng::dhcp::wire::MessageType;
use fastpath_io::netns::{Netns, VethPair};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::Duration;

const GW: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);

#[test]
fn a_subscriber_leases_through_the_user_plane_and_the_control_plane() {
    if !root_or_skip() {
        return;
    }
    let tmp = TempDir(std::env::temp_dir().join(format!("fp-cpri-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();
    let peer = Netns::new("fpc-peer").unwrap();
    let dut = Netns::new("fpc-dut").unwrap();
    let _veths = [VethPair::new(&peer, "s0", &dut, "a0").unwrap(), VethPair::new(&peer, "c0", &dut, "a1").unwrap()];
    dut.link_up("lo").unwrap();
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
    std::fs::write(&config, bng_cp_config("127.0.0.1:2152", "127.0.0.1:8805", &store.display().to_string())).unwrap();
    let cp = Command::new("ip")
        .args(["netns", "exec", dut.name(), env!("CARGO_BIN_EXE_fastpath"), "bng-cp", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.0.join("cp.log")).unwrap())
        .spawn()
        .unwrap();
    let _cp = ChildGuard::new(cp);
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

    // What the two processes and the counters say, for a failure's message.
    let logs = || {
        let read = |f: &str| std::fs::read_to_string(tmp.0.join(f)).unwrap_or_default();
        format!("counters:\n{}\nbng-cp:\n{}\nrun:\n{}", show("show counters"), read("cp.log"), read("up.log"))
    };
    let sub = Identity { port: 0, svlan: 100, cvlan: 7, mac: [0x02, 0, 0, 0, 0x12, 0x34] };
    let (offer_frame, offer) = qinq_dhcp_exchange(&peer, "s0", &dhcp_client_frame(&sub, MessageType::DISCOVER, |_| {}), MessageType::OFFER)
        .unwrap_or_else(|| panic!("no OFFER reached the subscriber in 15 s\n{}", logs()));
    assert_eq!(offer.yiaddr, Ipv4Addr::new(100, 64, 0, 10));
    assert_eq!(&offer_frame[..6], &sub.mac, "to the subscriber");
    assert_eq!(&offer_frame[6..12], &[0x02, 0xfa, 0, 0, 0, 1], "from the gateway MAC");
    assert_eq!(&offer_frame[12..22], &[0x88, 0xa8, 0, 100, 0x81, 0x00, 0, 7, 0x08, 0x00], "inside S-VLAN 100, C-VLAN 7");
    let (_, ack) = qinq_dhcp_exchange(
        &peer,
        "s0",
        &dhcp_client_frame(&sub, MessageType::REQUEST, |m| {
            m.options.requested_ip = Some(offer.yiaddr);
            m.options.server_id = Some(GW);
        }),
        MessageType::ACK,
    )
    .unwrap_or_else(|| panic!("no ACK reached the subscriber in 15 s\n{}", logs()));
    assert_eq!(ack.yiaddr, offer.yiaddr);
    let shown = wait_for("the session on the user plane", Duration::from_secs(10), || {
        let s = show("show session 1");
        s.contains("ip 100.64.0.10").then_some(s)
    });
    assert!(shown.contains("s-vlan 100 c-vlan 7 mac 02:00:00:00:12:34"), "{shown}");
}
