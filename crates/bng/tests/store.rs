//! The lease store across restarts: every lease the server bound comes back with its expiry, and
//! a store whose last write was torn by a crash opens with the last whole commit.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use fastpath_bng::dhcp::server::{EventKind, Identity, Outcome, PoolConfig, Server, ServerConfig};
use fastpath_bng::dhcp::wire::{DhcpRepr, MessageType, Op};
use fastpath_bng::store::Store;

const SID: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const T0: u64 = 1_700_000_000;

fn config() -> ServerConfig {
    ServerConfig {
        server_id: SID,
        pools: vec![PoolConfig {
            name: "residential".into(),
            svlans: vec![],
            first: Ipv4Addr::new(198, 18, 0, 10),
            last: Ipv4Addr::new(198, 18, 0, 250),
            mask: Ipv4Addr::new(255, 255, 255, 0),
            gateway: SID,
            dns: vec![],
            lease_time_s: 3600,
        }],
        offer_hold_s: 30,
        decline_quarantine_s: 600,
    }
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fastpath-bng-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn id(n: u16) -> Identity {
    Identity { port: 1 + u32::from(n % 4), svlan: 100 + n / 50, cvlan: n, mac: [2, 0, 0, 0, (n >> 8) as u8, n as u8] }
}

/// DORA for subscriber `c` at `now`, the events written to `store`.
fn bind(s: &mut Server, store: &mut Store, c: Identity, now: u64) -> Ipv4Addr {
    let mut d = DhcpRepr::empty(Op::BOOTREQUEST);
    d.chaddr[..6].copy_from_slice(&c.mac);
    d.options.message_type = Some(MessageType::DISCOVER);
    let Outcome::Reply(offer) = s.handle(&d, c, now) else { panic!("no offer") };
    let mut r = d.clone();
    r.options.message_type = Some(MessageType::REQUEST);
    r.options.server_id = Some(SID);
    r.options.requested_ip = Some(offer.msg.yiaddr);
    let Outcome::Reply(ack) = s.handle(&r, c, now) else { panic!("no ack") };
    assert_eq!(ack.msg.options.message_type, Some(MessageType::ACK));
    store.apply(&s.drain_events()).unwrap();
    ack.msg.yiaddr
}

fn reopen(path: &Path, now: u64) -> Server {
    let store = Store::open(path).unwrap();
    let snap = store.load().unwrap();
    let mut s = config().build().unwrap();
    s.restore(&snap.leases, &snap.quarantined, now);
    s
}

#[test]
fn every_lease_survives_a_restart() {
    let dir = tmpdir("restart");
    let path = dir.join("leases.db");
    let (before, quarantined) = {
        let mut store = Store::open(&path).unwrap();
        let mut s = config().build().unwrap();
        // 40 subscribers bind at different times; one renews, one releases, one declines.
        for n in 0..40 {
            bind(&mut s, &mut store, id(n), T0 + u64::from(n));
        }
        let renewer = id(7);
        let mut renew = DhcpRepr::empty(Op::BOOTREQUEST);
        renew.chaddr[..6].copy_from_slice(&renewer.mac);
        renew.options.message_type = Some(MessageType::REQUEST);
        renew.ciaddr = s.lease_of(&renewer).unwrap().ip;
        assert!(matches!(s.handle(&renew, renewer, T0 + 1000), Outcome::Reply(_)));
        let leaver = id(8);
        let mut release = DhcpRepr::empty(Op::BOOTREQUEST);
        release.chaddr[..6].copy_from_slice(&leaver.mac);
        release.options.message_type = Some(MessageType::RELEASE);
        release.ciaddr = s.lease_of(&leaver).unwrap().ip;
        assert_eq!(s.handle(&release, leaver, T0 + 1001), Outcome::Done);
        let decliner = id(9);
        let mut decline = DhcpRepr::empty(Op::BOOTREQUEST);
        decline.chaddr[..6].copy_from_slice(&decliner.mac);
        decline.options.message_type = Some(MessageType::DECLINE);
        decline.options.requested_ip = Some(s.lease_of(&decliner).unwrap().ip);
        assert_eq!(s.handle(&decline, decliner, T0 + 1002), Outcome::Done);
        let events = s.drain_events();
        let kinds: Vec<_> = events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, vec![EventKind::Renewed, EventKind::Released, EventKind::Declined]);
        store.apply(&events).unwrap();
        (s.leases(), s.quarantined())
        // server and store dropped here: the "restart"
    };
    assert_eq!(before.len(), 38);
    assert_eq!(quarantined.len(), 1);
    let s = reopen(&path, T0 + 1003);
    assert_eq!(s.leases(), before, "every lease with its identity and expiry");
    assert_eq!(s.quarantined(), quarantined);
    assert_eq!(s.lease_of(&id(7)).unwrap().expires_s, T0 + 1000 + 3600, "the renewal was stored");
    assert_eq!(s.lease_of(&id(8)), None, "the release was stored");
    // A reopened store keeps taking writes: the leases expire and that is stored too.
    let mut store = Store::open(&path).unwrap();
    let mut s = s;
    s.expire(T0 + 3600 + 20);
    store.apply(&s.drain_events()).unwrap();
    store.prune(T0 + 3600 + 20).unwrap();
    drop(store);
    let s = reopen(&path, T0 + 3600 + 20);
    assert_eq!(s.leases(), before.iter().filter(|l| l.expires_s > T0 + 3620).copied().collect::<Vec<_>>());
    assert!(s.quarantined().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A crash while the last commit was being written: the database and its write-ahead log are
/// copied while the store is open (as a power cut would leave them), the log's last bytes are cut
/// off, and the copy opens with every lease but the one whose commit was torn.
#[test]
fn torn_last_write_is_ignored() {
    let dir = tmpdir("torn");
    let path = dir.join("leases.db");
    let mut store = Store::open(&path).unwrap();
    let mut s = config().build().unwrap();
    let mut ips = Vec::new();
    for n in 0..10 {
        ips.push(bind(&mut s, &mut store, id(n), T0));
    }
    let wal = dir.join("leases.db-wal");
    let wal_len = std::fs::metadata(&wal).expect("the store runs in WAL mode").len();
    assert!(wal_len > 0);
    let crash = dir.join("crash");
    std::fs::create_dir_all(&crash).unwrap();
    std::fs::copy(&path, crash.join("leases.db")).unwrap();
    let torn = std::fs::read(&wal).unwrap();
    // Each commit of one lease is one 4096-byte page plus a 24-byte frame header; cut 100 bytes
    // off the last frame.
    std::fs::write(crash.join("leases.db-wal"), &torn[..torn.len() - 100]).unwrap();
    drop(store);

    let snap = Store::open(&crash.join("leases.db")).unwrap().load().unwrap();
    let got: Vec<_> = snap.leases.iter().map(|l| l.ip).collect();
    assert_eq!(got, ips[..9].to_vec(), "the nine whole commits, not the torn tenth");
    // And the untorn original still has all ten.
    let snap = Store::open(&path).unwrap().load().unwrap();
    assert_eq!(snap.leases.len(), 10);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn refuses_a_store_from_another_schema() {
    let dir = tmpdir("schema");
    let path = dir.join("leases.db");
    drop(Store::open(&path).unwrap());
    let db = rusqlite::Connection::open(&path).unwrap();
    db.pragma_update(None, "user_version", 7).unwrap();
    drop(db);
    let err = Store::open(&path).unwrap_err();
    assert_eq!(err.to_string(), "lease store: schema version 7, this build knows 1");
    std::fs::remove_dir_all(&dir).unwrap();
}
