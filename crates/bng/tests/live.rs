//! Real DHCP clients against our server, over a veth pair between two network namespaces the
//! test creates (root only; skipped with a message otherwise).
//!
//! ```text
//!  ns "server"                                     ns "client"
//!  harness (this test binary, `harness` test)      busybox udhcpc, then ISC dhclient
//!  UDP 0.0.0.0:67, SO_BROADCAST, SO_BINDTODEVICE
//!  198.18.0.1/24 ── veth ───────────────────────── veth (MAC per client)
//!  lease store: <tmp>/leases.db (SQLite)
//! ```
//!
//! Each client gets a lease, renews it (dhclient at T1: the lease is 10 s, so T1 is 5 s; udhcpc
//! when told to, see below), and releases it. Between udhcpc's lease and its renewal the server
//! harness is stopped and started again, so the renewal is answered from the store.
//! The test asserts that the address the client configured on its interface (`ip addr` in the
//! client namespace, set by a small script of ours) is the address the server's store holds for
//! that client's MAC, that the server raised Bound, Renewed and Released for it, and that the
//! store no longer holds the lease after the release. Everything is bounded in time; the
//! namespaces (and with them the veth pair) are deleted and every process this test started is
//! killed by its PID on every exit path, including a failed assertion (a drop guard). The logs
//! (harness, clients, client scripts) are kept in the temp dir named on failure, or always with
//! `FASTPATH_BNG_LIVE_KEEP=1`.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fastpath_bng::dhcp::server::{Destination, EventKind, Identity, Outcome, PoolConfig, ServerConfig};
use fastpath_bng::dhcp::wire::{DhcpRepr, CLIENT_PORT, SERVER_PORT};
use fastpath_bng::store::Store;

/// Set (to "<interface> <dir> <max seconds>") when this binary runs as the server harness.
const HARNESS_ENV: &str = "FASTPATH_BNG_HARNESS";
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const LEASE_S: u32 = 10;

fn unix_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn event_name(k: EventKind) -> &'static str {
    match k {
        EventKind::Bound => "bound",
        EventKind::Renewed => "renewed",
        EventKind::Released => "released",
        EventKind::Expired => "expired",
        EventKind::Declined => "declined",
    }
}

fn mac_text(m: [u8; 6]) -> String {
    Identity { port: 0, svlan: 0, cvlan: 0, mac: m }.remote_id()
}

/// The server harness: serves DHCP on one interface with our server and store until
/// `<dir>/stop` appears or the time is up. Lease events go to the store and, one line each
/// ("<event> <ip> <mac> <expires_s>"), to `<dir>/events`. Run by `live_dhcp_clients` through
/// `ip netns exec`; does nothing in a plain `cargo test --ignored` without the variable.
#[test]
#[ignore = "the server side of live_dhcp_clients, started by it inside a network namespace"]
fn harness() {
    let Ok(spec) = std::env::var(HARNESS_ENV) else { return };
    let mut it = spec.split(' ');
    let (iface, dir, max_s) = (it.next().unwrap(), PathBuf::from(it.next().unwrap()), it.next().unwrap());
    let deadline = Instant::now() + Duration::from_secs(max_s.parse().unwrap());

    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, Some(socket2::Protocol::UDP)).unwrap();
    sock.set_reuse_address(true).unwrap();
    sock.set_broadcast(true).unwrap();
    // Replies to 255.255.255.255 leave through this interface, and only its requests arrive.
    sock.bind_device(Some(iface.as_bytes())).unwrap();
    sock.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, SERVER_PORT)).into()).unwrap();
    let sock: UdpSocket = sock.into();
    sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();

    let mut store = Store::open(&dir.join("leases.db")).unwrap();
    let mut server = ServerConfig {
        server_id: SERVER_IP,
        pools: vec![PoolConfig {
            name: "live".into(),
            svlans: vec![],
            first: Ipv4Addr::new(198, 18, 0, 10),
            last: Ipv4Addr::new(198, 18, 0, 50),
            mask: Ipv4Addr::new(255, 255, 255, 0),
            gateway: SERVER_IP,
            dns: vec![SERVER_IP],
            lease_time_s: LEASE_S,
        }],
        offer_hold_s: 10,
        decline_quarantine_s: 60,
    }
    .build()
    .unwrap();
    let snap = store.load().unwrap();
    server.restore(&snap.leases, &snap.quarantined, unix_s());
    let mut events = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("events")).unwrap();
    std::fs::write(dir.join("ready"), b"").unwrap();

    let mut buf = [0u8; 1500];
    while Instant::now() < deadline && !dir.join("stop").exists() {
        let now = unix_s();
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            match DhcpRepr::parse(&buf[..n]) {
                Ok(req) => {
                    // One access port, untagged: the line is (1, 0, 0) and the MAC tells clients apart.
                    let id = Identity { port: 1, svlan: 0, cvlan: 0, mac: req.mac() };
                    let outcome = server.handle(&req, id, now);
                    let said = match &outcome {
                        Outcome::Reply(r) => format!("{:?} {} to {:?}", r.msg.options.message_type, r.msg.yiaddr, r.dst),
                        other => format!("{other:?}"),
                    };
                    eprintln!("harness: {:?} ciaddr {} from {from} ({}) -> {said}", req.options.message_type, req.ciaddr, mac_text(id.mac));
                    if let Outcome::Reply(r) = outcome {
                        let to: SocketAddr = match r.dst {
                            Destination::Relay(ip) => (ip, SERVER_PORT).into(),
                            Destination::Unicast(ip) => (ip, CLIENT_PORT).into(),
                            // Unicast to a MAC without ARP needs a raw socket; broadcast is what
                            // RFC 2131 §4.1 allows a server that cannot do it.
                            Destination::Broadcast | Destination::UnicastToMac(..) => (Ipv4Addr::BROADCAST, CLIENT_PORT).into(),
                        };
                        sock.send_to(&r.msg.to_bytes(), to).unwrap();
                    }
                }
                Err(e) => eprintln!("harness: undecodable message from {from}: {e}"),
            }
        }
        server.expire(unix_s());
        let evs = server.drain_events();
        store.apply(&evs).unwrap();
        for e in &evs {
            writeln!(events, "{} {} {} {}", event_name(e.kind), e.ip, mac_text(e.identity.mac), e.expires_s).unwrap();
        }
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(1) == Some("0")))
        .unwrap_or(false)
}

fn have(prog: &str, arg: &str) -> bool {
    Command::new(prog).arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap();
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// Everything the test created, undone on drop: processes killed by PID, namespaces deleted.
struct Lab {
    /// Every namespace the test made (deleted on drop); the clients run in `client_ns`.
    namespaces: Vec<String>,
    client_ns: String,
    dir: PathBuf,
    children: Vec<(String, Child)>,
}

impl Drop for Lab {
    fn drop(&mut self) {
        // The harnesses stop by themselves when they see the stop file (they poll it several
        // times a second); other children get SIGTERM, then SIGKILL, each by its PID.
        let _ = std::fs::write(self.dir.join("stop"), b"");
        let settle = |children: &mut Vec<(String, Child)>, within: Duration| {
            let deadline = Instant::now() + within;
            while Instant::now() < deadline && children.iter_mut().any(|(_, c)| matches!(c.try_wait(), Ok(None))) {
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        settle(&mut self.children, Duration::from_millis(500));
        for (_, child) in &mut self.children {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            }
        }
        settle(&mut self.children, Duration::from_secs(2));
        for (name, child) in &mut self.children {
            if matches!(child.try_wait(), Ok(None)) {
                eprintln!("live: killing {name} (pid {})", child.id());
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        if !std::thread::panicking() && std::env::var_os("FASTPATH_BNG_LIVE_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("live: logs kept in {}", self.dir.display());
        }
    }
}

impl Lab {
    fn add_ns(&mut self, ns: &str) {
        run(&["ip", "netns", "add", ns]);
        self.namespaces.push(ns.to_owned());
    }

    fn spawn(&mut self, name: &str, args: &[&str], env: Option<(&str, String)>) -> u32 {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).unwrap();
        let mut cmd = Command::new(args[0]);
        cmd.args(&args[1..]).stdin(Stdio::null()).stdout(log.try_clone().unwrap()).stderr(log);
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let pid = child.id();
        self.children.push((name.to_string(), child));
        pid
    }

    /// Waits (bounded) for the named child to exit.
    fn wait_exit(&mut self, name: &str, within: Duration) {
        let deadline = Instant::now() + within;
        let (_, child) = self.children.iter_mut().find(|(n, _)| n == name).unwrap();
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{name} did not exit within {within:?}; logs in {}", self.dir.display());
    }

    /// The IPv4 address and prefix length configured on `dev` in the client namespace.
    fn client_addr(&self, dev: &str) -> Option<String> {
        let out = Command::new("ip").args(["-n", &self.client_ns, "-4", "-o", "addr", "show", "dev", dev]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let mut words = text.split_whitespace();
        words.find(|w| *w == "inet")?;
        words.next().map(str::to_owned)
    }

    fn events(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("events")).unwrap_or_default().lines().map(str::to_owned).collect()
    }

    /// Waits (bounded) for an event line starting with `kind` for `mac`; returns its fields.
    fn wait_event(&self, kind: &str, mac: &str, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(line) = self.events().into_iter().find(|l| l.starts_with(kind) && l.contains(mac)) {
                return line.split(' ').map(str::to_owned).collect();
            }
            assert!(
                Instant::now() < deadline,
                "no '{kind}' event for {mac} within {within:?}; events so far: {:?}; logs in {}",
                self.events(),
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server store's lease for `mac`, read from the harness's live SQLite file.
    fn stored_lease(&self, mac: [u8; 6]) -> Option<(Ipv4Addr, u64)> {
        let snap = Store::open(&self.dir.join("leases.db")).unwrap().load().unwrap();
        snap.leases.iter().find(|l| l.identity.mac == mac).map(|l| (l.ip, l.expires_s))
    }

    fn set_client_mac(&self, dev: &str, mac: &str) {
        run(&["ip", "-n", &self.client_ns, "link", "set", dev, "down"]);
        run(&["ip", "-n", &self.client_ns, "link", "set", dev, "address", mac]);
        run(&["ip", "-n", &self.client_ns, "link", "set", dev, "up"]);
    }
}

fn write_script(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    run(&["chmod", "755", path.to_str().unwrap()]);
}

/// Client scripts: configure only the address (the distributions' scripts would also rewrite
/// the host's resolv.conf). Each call is logged to `client-script.log`. Returns the udhcpc and
/// the dhclient script.
fn write_client_scripts(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("client-script.log");
    let udhcpc_script = dir.join("udhcpc.sh");
    write_script(
        &udhcpc_script,
        &format!(
            "#!/bin/sh\necho \"udhcpc $1 $ip\" >> {log}\ncase \"$1\" in\n  deconfig) ip -4 addr flush dev \"$interface\" ;;\n  \
             bound) ip -4 addr flush dev \"$interface\"; ip addr add \"$ip/$subnet\" dev \"$interface\" ;;\n  \
             renew) ip addr replace \"$ip/$subnet\" dev \"$interface\" ;;\nesac\n",
            log = log.display()
        ),
    );
    let dhclient_script = dir.join("dhclient.sh");
    write_script(
        &dhclient_script,
        &format!(
            "#!/bin/sh\necho \"dhclient $reason $new_ip_address\" >> {log}\ncase \"$reason\" in\n  PREINIT) ip link set \"$interface\" up ;;\n  \
             BOUND|REBOOT) ip -4 addr flush dev \"$interface\"; ip addr add \"$new_ip_address/$new_subnet_mask\" dev \"$interface\" ;;\n  \
             RENEW|REBIND) ip addr replace \"$new_ip_address/$new_subnet_mask\" dev \"$interface\" ;;\n  \
             EXPIRE|FAIL|RELEASE|STOP) ip -4 addr flush dev \"$interface\" ;;\nesac\nexit 0\n",
            log = log.display()
        ),
    );

    (udhcpc_script, dhclient_script)
}

/// Looks up the lease an external DHCP server holds for a MAC.
type ExternalLease<'a> = &'a dyn Fn([u8; 6]) -> Option<Ipv4Addr>;

/// One client's life: bound, renewed (`renew` makes it happen, or does nothing and the client
/// renews at T1), released (`release` makes it happen); each checked against our store and, in
/// relay mode, against the `external` server's own lease table.
fn check_client(
    lab: &mut Lab,
    dev: &str,
    mac: [u8; 6],
    external: Option<ExternalLease<'_>>,
    renew: impl FnOnce(&mut Lab),
    release: impl FnOnce(&mut Lab),
) {
    let m = mac_text(mac);
    let bound = lab.wait_event("bound", &m, Duration::from_secs(20));
    let (ip, expires) = lab.stored_lease(mac).expect("the store holds the new lease");
    assert_eq!(bound[1], ip.to_string());
    // The client's script runs right after the ACK; give it a moment, bounded.
    let deadline = Instant::now() + Duration::from_secs(5);
    while lab.client_addr(dev).is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(lab.client_addr(dev), Some(format!("{ip}/24")), "the client configured the server's lease");
    if let Some(lookup) = external {
        assert_eq!(lookup(mac), Some(ip), "the external server leased the same address");
    }

    renew(lab);
    let renewed = lab.wait_event("renewed", &m, Duration::from_secs(u64::from(LEASE_S) + 5));
    assert_eq!(renewed[1], ip.to_string(), "renewed the same address");
    let (ip2, expires2) = lab.stored_lease(mac).expect("the store still holds the lease");
    assert_eq!(ip2, ip);
    if external.is_none() {
        assert!(expires2 > expires, "the renewal extended the stored lease ({expires} -> {expires2})");
    } else {
        // In relay mode the end is what the external server's ACK says: dnsmasq answered some
        // renewals with the lease's remaining time (the stored end unchanged, once in three
        // runs here), so only a shortened lease would be wrong.
        assert!(expires2 >= expires, "the renewal shortened the stored lease ({expires} -> {expires2})");
    }
    assert_eq!(lab.client_addr(dev), Some(format!("{ip}/24")), "still configured after renewing");

    release(lab);
    let released = lab.wait_event("released", &m, Duration::from_secs(10));
    assert_eq!(released[1], ip.to_string());
    assert_eq!(lab.stored_lease(mac), None, "the store dropped the released lease");
    if let Some(lookup) = external {
        let deadline = Instant::now() + Duration::from_secs(5);
        while lookup(mac).is_some() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(lookup(mac), None, "the external server received the release");
    }
}

/// Starts the server harness: this same test binary, running the ignored `harness` test in the
/// server namespace (`ip netns exec` execs it, so the child's PID is the harness's); waits
/// (bounded) until it serves.
fn start_harness(lab: &mut Lab, name: &str, ns: &str, dev: &str) {
    let exe = std::env::current_exe().unwrap();
    let spec = format!("{dev} {} 120", lab.dir.display());
    let args = ["ip", "netns", "exec", ns, exe.to_str().unwrap(), "--ignored", "--exact", "harness", "--nocapture", "--test-threads=1"];
    lab.spawn(name, &args, Some((HARNESS_ENV, spec)));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !lab.dir.join("ready").exists() {
        assert!(Instant::now() < deadline, "{name} did not start; see {}", lab.dir.join(format!("{name}.log")).display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// busybox udhcpc through its life (`check_client`): foreground, releasing on exit (-R), which
/// we cause with SIGTERM by its PID.
/// `before_renew` runs once the lease is bound and checked (the server test restarts the server
/// there).
fn run_udhcpc(
    lab: &mut Lab,
    dev: &str,
    script: &Path,
    mac: [u8; 6],
    external: Option<ExternalLease<'_>>,
    before_renew: impl FnOnce(&mut Lab),
) {
    lab.set_client_mac(dev, &mac_text(mac));
    let ns = lab.client_ns.clone();
    let script = script.to_str().unwrap();
    let args = ["ip", "netns", "exec", &ns, "busybox", "udhcpc", "-f", "-R", "-i", dev, "-s", script, "-t", "10", "-T", "1", "-A", "1"];
    let upid = lab.spawn("udhcpc", &args, None);
    // udhcpc raises any lease under 122 s to 122 s (busybox networking/udhcp/dhcpc.c), so it
    // would renew only after a short lease ran out: SIGUSR1 makes it renew now (its manual:
    // "SIGUSR1: renew lease").
    check_client(
        lab,
        dev,
        mac,
        external,
        |lab| {
            before_renew(lab);
            // A second later, so the renewed lease ends later than the first on a clock in seconds.
            std::thread::sleep(Duration::from_millis(1100));
            run(&["kill", "-USR1", &upid.to_string()]);
        },
        |lab| {
            run(&["kill", "-TERM", &upid.to_string()]);
            lab.wait_exit("udhcpc", Duration::from_secs(10));
        },
    );
    assert_eq!(lab.client_addr(dev), None, "udhcpc removed the address on release");
}

#[test]
fn live_dhcp_clients() {
    if !is_root() {
        eprintln!("live_dhcp_clients: skipped, needs root for network namespaces");
        return;
    }
    let ci = std::env::var_os("CI").is_some();
    for (prog, arg) in [("busybox", "--help"), ("dhclient", "--version"), ("ip", "-V")] {
        if !have(prog, arg) {
            assert!(!ci, "{prog} is required in CI (scripts/setup-lab.sh installs it)");
            eprintln!("live_dhcp_clients: skipped, {prog} is not installed (scripts/setup-lab.sh)");
            return;
        }
    }
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("fastpath-bng-live-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (sdev, cdev) = (format!("fpb{pid}s"), format!("fpb{pid}c"));
    let (sns, cns) = (format!("fpbng{pid}s"), format!("fpbng{pid}c"));
    let mut lab = Lab { namespaces: Vec::new(), client_ns: cns.clone(), dir: dir.clone(), children: Vec::new() };
    lab.add_ns(&sns);
    lab.add_ns(&cns);
    run(&["ip", "link", "add", &sdev, "type", "veth", "peer", "name", &cdev]);
    run(&["ip", "link", "set", &sdev, "netns", &sns]);
    run(&["ip", "link", "set", &cdev, "netns", &cns]);
    run(&["ip", "-n", &sns, "addr", "add", "198.18.0.1/24", "dev", &sdev]);
    for (ns, dev) in [(&sns, &sdev), (&cns, &cdev)] {
        run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        run(&["ip", "-n", ns, "link", "set", dev, "up"]);
    }

    start_harness(&mut lab, "harness", &sns, &sdev);
    let (udhcpc_script, dhclient_script) = write_client_scripts(&dir);

    // 1. busybox udhcpc; between its lease and its renewal the server is stopped and started
    //    again: the new server has the lease from the store, so the renewal is ACKed (a server
    //    that forgot it would NAK, and the test would see no 'renewed').
    let (sns2, sdev2) = (sns.clone(), sdev.clone());
    run_udhcpc(&mut lab, &cdev, &udhcpc_script, [2, 0, 0, 0, 1, 1], None, move |lab| {
        std::fs::write(lab.dir.join("stop"), b"").unwrap();
        lab.wait_exit("harness", Duration::from_secs(5));
        std::fs::remove_file(lab.dir.join("stop")).unwrap();
        std::fs::remove_file(lab.dir.join("ready")).unwrap();
        start_harness(lab, "harness-restarted", &sns2, &sdev2);
    });

    // 2. ISC dhclient: foreground (-d), one attempt (-1); released with `dhclient -r`, which
    //    stops the running client through the PID file (checked to be our child's first).
    let dh_mac = [2, 0, 0, 0, 1, 2];
    lab.set_client_mac(&cdev, &mac_text(dh_mac));
    let (lf, pf) = (dir.join("dhclient.leases"), dir.join("dhclient.pid"));
    let (lf, pf, script) = (lf.to_str().unwrap().to_owned(), pf.to_str().unwrap().to_owned(), dhclient_script.to_str().unwrap().to_owned());
    let dpid = lab.spawn(
        "dhclient",
        &["ip", "netns", "exec", &cns, "dhclient", "-4", "-d", "-v", "-1", "-sf", &script, "-lf", &lf, "-pf", &pf, &cdev],
        None,
    );
    let (cns2, cdev2) = (cns.clone(), cdev.clone());
    // dhclient renews by itself at T1 (option 58, 5 s).
    check_client(
        &mut lab,
        &cdev,
        dh_mac,
        None,
        |_| {},
        move |lab| {
            let recorded = std::fs::read_to_string(&pf).unwrap_or_default();
            assert_eq!(recorded.trim(), dpid.to_string(), "dhclient's PID file names the client we started");
            let out = Command::new("ip")
                .args(["netns", "exec", &cns2, "dhclient", "-4", "-r", "-v", "-sf", &script, "-lf", &lf, "-pf", &pf, &cdev2])
                .output()
                .unwrap();
            assert!(out.status.success(), "dhclient -r: {}", String::from_utf8_lossy(&out.stderr));
            lab.wait_exit("dhclient", Duration::from_secs(10));
        },
    );
    assert_eq!(lab.client_addr(&cdev), None, "dhclient removed the address on release");

    // Both clients were served from one pool, one after the other, and nothing else happened.
    let kinds: Vec<String> = lab.events().iter().map(|l| l.split(' ').next().unwrap_or("").to_owned()).collect();
    assert!(!kinds.iter().any(|k| k == "expired" || k == "declined"), "events: {:?}", lab.events());
}

/// Set (to "<subscriber interface> <server interface> <dir> <max seconds>") when this binary
/// runs as the relay harness.
const RELAY_HARNESS_ENV: &str = "FASTPATH_BNG_RELAY_HARNESS";
/// The relay's address on the subscriber side (giaddr).
const RELAY_GIADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The external DHCP server (dnsmasq).
const EXTERNAL_SERVER: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);

fn udp_on(iface: &str, port: u16) -> UdpSocket {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, Some(socket2::Protocol::UDP)).unwrap();
    sock.set_reuse_address(true).unwrap();
    sock.set_broadcast(true).unwrap();
    sock.bind_device(Some(iface.as_bytes())).unwrap();
    sock.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)).into()).unwrap();
    let sock: UdpSocket = sock.into();
    sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    sock
}

/// The relay harness: relays DHCP between subscribers on one interface and the external server
/// behind the other with our relay, until `<dir>/stop` appears or the time is up. Lease events
/// go to the store and to `<dir>/events`, as in [`harness`].
#[test]
#[ignore = "the relay of live_dhcp_relay, started by it inside a network namespace"]
fn relay_harness() {
    use fastpath_bng::dhcp::relay::{Relay, RelayConfig};
    let Ok(spec) = std::env::var(RELAY_HARNESS_ENV) else { return };
    let mut it = spec.split(' ');
    let (sub_if, srv_if) = (it.next().unwrap(), it.next().unwrap());
    let (dir, max_s) = (PathBuf::from(it.next().unwrap()), it.next().unwrap());
    let deadline = Instant::now() + Duration::from_secs(max_s.parse().unwrap());
    // Two sockets on port 67, one per interface: subscribers' requests arrive on the first, the
    // server's replies (to giaddr, port 67) on the second.
    let (subs, upstream) = (udp_on(sub_if, SERVER_PORT), udp_on(srv_if, SERVER_PORT));
    let mut store = Store::open(&dir.join("leases.db")).unwrap();
    let mut relay = Relay::new(RelayConfig { giaddr: RELAY_GIADDR, servers: vec![EXTERNAL_SERVER], max_hops: 4 });
    relay.restore(&store.load().unwrap().leases, unix_s());
    let mut events = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("events")).unwrap();
    std::fs::write(dir.join("ready"), b"").unwrap();
    let mut buf = [0u8; 1500];
    while Instant::now() < deadline && !dir.join("stop").exists() {
        if let Ok((n, from)) = subs.recv_from(&mut buf) {
            match DhcpRepr::parse(&buf[..n]) {
                Ok(req) => {
                    let id = Identity { port: 1, svlan: 0, cvlan: 0, mac: req.mac() };
                    let fwd = relay.from_client(&req, id, unix_s());
                    eprintln!(
                        "relay: {:?} from {from} ({}) -> {:?}",
                        req.options.message_type,
                        mac_text(id.mac),
                        fwd.as_ref().map(|_| "relayed")
                    );
                    if let Ok(m) = fwd {
                        for server in relay.servers().to_vec() {
                            upstream.send_to(&m.to_bytes(), (server, SERVER_PORT)).unwrap();
                        }
                    }
                }
                Err(e) => eprintln!("relay: undecodable message from {from}: {e}"),
            }
        }
        if let Ok((n, from)) = upstream.recv_from(&mut buf) {
            match DhcpRepr::parse(&buf[..n]) {
                Ok(rep) => match relay.from_server(&rep, unix_s()) {
                    Ok((id, r)) => {
                        eprintln!(
                            "relay: {:?} {} for {} from {from} to {:?}",
                            rep.options.message_type,
                            rep.yiaddr,
                            mac_text(id.mac),
                            r.dst
                        );
                        let to: SocketAddr = match r.dst {
                            Destination::Unicast(ip) => (ip, CLIENT_PORT).into(),
                            _ => (Ipv4Addr::BROADCAST, CLIENT_PORT).into(),
                        };
                        subs.send_to(&r.msg.to_bytes(), to).unwrap();
                    }
                    Err(e) => eprintln!("relay: reply from {from} not relayed: {e:?}"),
                },
                Err(e) => eprintln!("relay: undecodable message from {from}: {e}"),
            }
        }
        relay.expire(unix_s());
        let evs = relay.drain_events();
        store.apply(&evs).unwrap();
        for e in &evs {
            writeln!(events, "{} {} {} {}", event_name(e.kind), e.ip, mac_text(e.identity.mac), e.expires_s).unwrap();
        }
    }
}

/// The address dnsmasq's lease file holds for `mac` (lines: expiry, MAC, address, name, id).
fn dnsmasq_lease(file: &Path, mac: [u8; 6]) -> Option<Ipv4Addr> {
    let text = std::fs::read_to_string(file).ok()?;
    let m = mac_text(mac);
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&m.as_str())).then(|| f.get(2)?.parse().ok()).flatten()
    })
}

/// Relay mode with a real server: busybox udhcpc in one namespace, our relay in a second,
/// dnsmasq (Debian's, as the external DHCP server) in a third. The client gets its lease from
/// dnsmasq through the relay, renews and releases; the address it configured is the one in
/// dnsmasq's lease file and in our store, and after the release neither holds it.
///
/// ```text
///  client ── veth ── 198.18.0.1 [relay] 198.19.0.1 ── veth ── 198.19.0.2 dnsmasq
/// ```
#[test]
fn live_dhcp_relay() {
    if !is_root() {
        eprintln!("live_dhcp_relay: skipped, needs root for network namespaces");
        return;
    }
    let ci = std::env::var_os("CI").is_some();
    for (prog, arg) in [("busybox", "--help"), ("dnsmasq", "--version"), ("ip", "-V")] {
        if !have(prog, arg) {
            assert!(!ci, "{prog} is required in CI (scripts/setup-lab.sh installs it)");
            eprintln!("live_dhcp_relay: skipped, {prog} is not installed (scripts/setup-lab.sh)");
            return;
        }
    }
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("fastpath-bng-relay-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Namespaces and devices: c(lient), r(elay), s(erver); devices ≤ 15 characters.
    let (cns, rns, sns) = (format!("fprly{pid}c"), format!("fprly{pid}r"), format!("fprly{pid}s"));
    let (cdev, rsub, rsrv, sdev) = (format!("fpr{pid}c"), format!("fpr{pid}a"), format!("fpr{pid}b"), format!("fpr{pid}s"));
    let mut lab = Lab { namespaces: Vec::new(), client_ns: cns.clone(), dir: dir.clone(), children: Vec::new() };
    for ns in [&cns, &rns, &sns] {
        lab.add_ns(ns);
        run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
    }
    run(&["ip", "link", "add", &cdev, "type", "veth", "peer", "name", &rsub]);
    run(&["ip", "link", "set", &cdev, "netns", &cns]);
    run(&["ip", "link", "set", &rsub, "netns", &rns]);
    run(&["ip", "link", "add", &rsrv, "type", "veth", "peer", "name", &sdev]);
    run(&["ip", "link", "set", &rsrv, "netns", &rns]);
    run(&["ip", "link", "set", &sdev, "netns", &sns]);
    run(&["ip", "-n", &rns, "addr", "add", "198.18.0.1/24", "dev", &rsub]);
    run(&["ip", "-n", &rns, "addr", "add", "198.19.0.1/24", "dev", &rsrv]);
    run(&["ip", "-n", &sns, "addr", "add", "198.19.0.2/24", "dev", &sdev]);
    for (ns, dev) in [(&cns, &cdev), (&rns, &rsub), (&rns, &rsrv), (&sns, &sdev)] {
        run(&["ip", "-n", ns, "link", "set", dev, "up"]);
    }
    // dnsmasq answers the relay at giaddr, which is behind the relay.
    run(&["ip", "-n", &sns, "route", "add", "198.18.0.0/24", "via", "198.19.0.1"]);

    let leases = dir.join("dnsmasq.leases");
    let (lease_arg, pid_arg) =
        (format!("--dhcp-leasefile={}", leases.display()), format!("--pid-file={}", dir.join("dnsmasq.pid").display()));
    let iface_arg = format!("--interface={sdev}");
    lab.spawn(
        "dnsmasq",
        &[
            "ip",
            "netns",
            "exec",
            &sns,
            "dnsmasq",
            "--keep-in-foreground",
            "--conf-file=/dev/null",
            "--port=0",
            "--no-resolv",
            "--no-hosts",
            "--user=root",
            "--bind-interfaces",
            &iface_arg,
            "--dhcp-range=198.18.0.100,198.18.0.150,255.255.255.0,2m",
            "--dhcp-option=3,198.18.0.1",
            "--dhcp-authoritative",
            &lease_arg,
            &pid_arg,
            "--log-dhcp",
            "--log-facility=-",
        ],
        None,
    );
    let exe = std::env::current_exe().unwrap();
    let spec = format!("{rsub} {rsrv} {} 120", dir.display());
    lab.spawn(
        "relay",
        &["ip", "netns", "exec", &rns, exe.to_str().unwrap(), "--ignored", "--exact", "relay_harness", "--nocapture", "--test-threads=1"],
        Some((RELAY_HARNESS_ENV, spec)),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.join("ready").exists() {
        assert!(Instant::now() < deadline, "the relay did not start; see {}", dir.join("relay.log").display());
        std::thread::sleep(Duration::from_millis(50));
    }
    let (udhcpc_script, _) = write_client_scripts(&dir);
    let lookup = |mac| dnsmasq_lease(&leases, mac);
    run_udhcpc(&mut lab, &cdev, &udhcpc_script, [2, 0, 0, 0, 2, 1], Some(&lookup), |_| {});
}
