//! The P4Runtime client (`fastpath_p4rt::client`) against the in-process server, with a worker
//! thread that applies what the control plane posts: over a unix socket — arbitration as the
//! primary (a lower election id refused, a higher one taking over and the first told so), the
//! P4Info's names, INSERT / MODIFY / DELETE by name in batches reaching the worker's replica and
//! read back, a duplicate INSERT and a DELETE of a missing entry answered with per-update errors,
//! the others of a CONTINUE_ON_ERROR write applied, ROLLBACK_ON_ERROR applying nothing — and
//! over TCP with TLS (a self-signed certificate from `openssl req`): trusted, a wrong name and
//! no TLS refused.

use fastpath_control::{mailbox, Access, Control};
use fastpath_p4rt::client::{ClientError, ClientTls, Entry};
use fastpath_p4rt::{proto, Client, ClientConfig, Config, Listen, PacketIo, Server};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tonic::Code;

const SPEC: &str = r#"
name = "client-test"
[parser]
headers = ["eth", "ipv4", "udp", "tcp"]
[[action]]
name = "nexthop"
params = ["port", "dmac", "smac"]
body = '''
set eth.dst = dmac
set eth.src = smac
forward port
'''
[[action]]
name = "deny"
body = "drop acl_deny"
[[table]]
name = "acl"
key = [
    { field = "ipv4.src", match = "ternary" },
    { field = "ipv4.dst", match = "ternary" },
    { field = "ipv4.proto", match = "ternary" },
    { field = "l4.dport", match = "range" },
]
actions = ["no_action", "deny"]
size = 1024
default = "no_action"
[[table]]
name = "fib4"
key = [{ field = "ipv4.dst", match = "lpm" }]
actions = ["nexthop", "drop"]
size = 1024
default = "drop(no_route)"
[control]
ingress = '''
apply acl
apply fib4
'''
"#;

fn pipe() -> fastpath_pipeline::Pipeline {
    let mut p = fastpath_pipeline::compile("client-test.toml", SPEC).unwrap().instantiate();
    p.set_ports(2).unwrap();
    p
}

/// The route `10.a.b.0/24` for `k = a << 8 | b`, to port 1.
fn route(k: u32) -> Entry {
    Entry::new("fib4")
        .lpm("ipv4.dst", u128::from(0x0a00_0000 | k << 8), 24)
        .action("nexthop", &[("port", 1), ("dmac", 0x0200_0000_0101), ("smac", 0x0200_0000_0001)])
}

/// A UDP deny rule on destination `10.128.x.y` (`k = x << 8 | y`), ports 1000..=1999.
fn rule(k: u32) -> Entry {
    Entry::new("acl")
        .ternary("ipv4.dst", u128::from(0x0a80_0000 | k), u128::from(u32::MAX))
        .ternary("ipv4.proto", 17, 0xff)
        .range("l4.dport", 1000, 1999)
        .priority(100 + k as i32)
        .action("deny", &[])
}

/// Serves SPEC on `listen` (with TLS from `tls`) to `body`, with one worker applying changes;
/// returns the worker's (acl, fib4) entry counts at the end.
fn with_server<F>(listen: Listen, tls: Option<(PathBuf, PathBuf)>, body: F) -> (usize, usize)
where
    F: FnOnce(String, &tokio::runtime::Runtime),
{
    let (end, mut worker_end) = mailbox();
    let stop = AtomicBool::new(false);
    let server = Server::bind(&listen, &Access::default(), tls).unwrap();
    let addr = server.client_addr();
    let io = PacketIo::new();
    let control = Mutex::new(Control::new(pipe(), Box::new(|| Ok(pipe())), vec![end]));
    let cfg = Config { device_id: 1, spec_text: SPEC.to_string(), ports: 2 };
    /// Stops the server and the worker however `body` ends (a failed assertion included).
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        let stop = &stop;
        let worker = s.spawn(move || {
            let mut p = pipe();
            while !stop.load(Ordering::Relaxed) {
                worker_end.poll(&mut p, |_| {});
                std::thread::sleep(Duration::from_micros(200));
            }
            (p.table("acl").unwrap().len(), p.table("fib4").unwrap().len())
        });
        let (io, control) = (&io, &control);
        let srv = s.spawn(move || server.serve_until(cfg, io, control, stop));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let guard = StopOnDrop(stop);
        body(addr, &rt);
        drop(guard);
        srv.join().unwrap().unwrap();
        worker.join().unwrap()
    })
}

fn at(addr: &str, low: u64) -> ClientConfig {
    let mut c = ClientConfig::new(addr, 1);
    c.election_id = proto::Uint128 { high: 0, low };
    c
}

#[test]
fn a_primary_writes_by_name_over_a_unix_socket_and_the_worker_applies_it() {
    let sock = std::env::temp_dir().join(format!("fp-p4rt-client-{}.sock", std::process::id()));
    let counts = with_server(Listen::Unix(sock.clone()), None, |addr, rt| {
        assert!(addr.starts_with("unix:"), "{addr}");
        rt.block_on(async {
            // With the 8 KiB header list of Python's gRPC clients: a failed Write's status
            // trailer must fit it.
            let mut a = Client::connect(&ClientConfig { max_header_list_bytes: 8192, ..at(&addr, 5) }).await.unwrap();
            assert!(a.is_primary());
            let tables: Vec<&str> = a.p4info().tables.iter().map(|t| t.preamble.as_ref().unwrap().name.as_str()).collect();
            assert_eq!(tables, ["acl", "fib4"]);
            // A lower election id is a backup: connect refuses to pretend it is the primary.
            match Client::connect(&at(&addr, 3)).await.unwrap_err() {
                ClientError::NotPrimary(m) => assert!(m.contains("the primary's is (high 0, low 5)"), "{m}"),
                other => panic!("{other}"),
            }
            // The wrong device: the server's message.
            let mut wrong = at(&addr, 9);
            wrong.device_id = 2;
            assert!(Client::connect(&wrong).await.unwrap_err().to_string().contains("this is device 1"));

            // Batches of INSERTs: 200 routes and 100 ACL rules in two writes.
            let n = a.names().clone();
            let mut ups: Vec<proto::Update> = (0..200).map(|k| n.insert(&route(k)).unwrap()).collect();
            a.write(ups.split_off(100)).await.unwrap();
            ups.extend((0..100).map(|k| n.insert(&rule(k)).unwrap()));
            a.write(ups).await.unwrap();
            assert_eq!(a.read_table("fib4").await.unwrap().len(), 200);
            let acl = a.read_table("acl").await.unwrap();
            assert_eq!(acl.len(), 100);
            assert!(acl.iter().all(|e| (100..200).contains(&e.priority)), "priorities read back as written");

            // A duplicate INSERT and a DELETE of a missing rule fail by update; the MODIFY and
            // the DELETE between them are applied (CONTINUE_ON_ERROR).
            let batch = vec![
                n.insert(&route(7)).unwrap(),
                n.modify(&route(8).action("drop", &[])).unwrap(),
                n.delete(&rule(5000)).unwrap(),
                n.delete(&rule(3)).unwrap(),
            ];
            match a.write(batch).await.unwrap_err() {
                ClientError::Write { failed, .. } => {
                    assert_eq!(failed.len(), 2, "{failed:?}");
                    assert_eq!((failed[0].0, failed[0].1), (0, Code::AlreadyExists));
                    assert!(failed[0].2.contains("table \"fib4\""), "{failed:?}");
                    assert_eq!((failed[1].0, failed[1].1), (2, Code::NotFound));
                }
                other => panic!("{other}"),
            }
            assert_eq!(a.read_table("acl").await.unwrap().len(), 99, "rule 3 deleted");
            let drop_id = a.p4info().actions.iter().find(|x| x.preamble.as_ref().unwrap().name == "drop").unwrap();
            let drop_id = drop_id.preamble.as_ref().unwrap().id;
            let routed_to_drop = a
                .read_table("fib4")
                .await
                .unwrap()
                .iter()
                .filter(
                    |e| matches!(&e.action.as_ref().unwrap().r#type, Some(proto::table_action::Type::Action(x)) if x.action_id == drop_id),
                )
                .count();
            assert_eq!(routed_to_drop, 1, "route 8 modified");
            // ROLLBACK_ON_ERROR: one bad update, nothing applied.
            let bad = vec![n.insert(&route(300)).unwrap(), n.insert(&route(0)).unwrap()];
            let e = a.write_with(bad, proto::atomicity::ROLLBACK_ON_ERROR).await.unwrap_err();
            assert!(matches!(&e, ClientError::Write { failed, .. } if failed.len() == 2 && failed[0].1 == Code::Aborted), "{e}");
            assert_eq!(a.read_table("fib4").await.unwrap().len(), 200);
            // The same with 50 updates: every update's p4.v1.Error reaches the client.
            let mut mid: Vec<proto::Update> = (1000..1049).map(|k| n.insert(&route(k)).unwrap()).collect();
            mid.push(n.insert(&route(0)).unwrap());
            let e = a.write_with(mid, proto::atomicity::ROLLBACK_ON_ERROR).await.unwrap_err();
            match &e {
                ClientError::Write { failed, .. } => {
                    assert_eq!(failed.len(), 50, "{e}");
                    assert_eq!(failed[49].1, Code::AlreadyExists, "{e}");
                    assert!(failed[..49].iter().all(|f| f.1 == Code::Aborted), "{e}");
                }
                other => panic!("not the per-update errors: {other}"),
            }
            // And with 1,000: one p4.v1.Error per update would not fit 8 KiB (it would come
            // as an h2 protocol error); the status names the refused update instead.
            let mut big: Vec<proto::Update> = (1000..1999).map(|k| n.insert(&route(k)).unwrap()).collect();
            big.push(n.insert(&route(0)).unwrap());
            let e = a.write_with(big, proto::atomicity::ROLLBACK_ON_ERROR).await.unwrap_err();
            match &e {
                ClientError::Rpc { rpc: "Write", status } => {
                    assert_eq!(status.code(), Code::Unknown, "{e}");
                    assert!(status.message().contains("update 999: table \"fib4\": an entry with this match exists"), "{e}");
                    assert!(status.message().contains("per-update errors are left out"), "{e}");
                }
                other => panic!("not the status: {other}"),
            }
            assert_eq!(a.read_table("fib4").await.unwrap().len(), 200);

            // A higher election id takes over: the first client is told, and its writes refused.
            let mut b = Client::connect(&at(&addr, 9)).await.unwrap();
            for _ in 0..500 {
                if !a.is_primary() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(!a.is_primary(), "the old primary was told");
            match a.write(vec![n.delete(&route(0)).unwrap()]).await.unwrap_err() {
                ClientError::Rpc { rpc: "Write", status } => assert_eq!(status.code(), Code::PermissionDenied),
                other => panic!("{other}"),
            }
            b.write((0..10).map(|k| b.names().delete(&route(k)).unwrap()).collect()).await.unwrap();
        });
    });
    assert_eq!(counts, (99, 190), "the worker's replica holds what was written");
    assert!(!sock.exists(), "the server removed its socket");
}

#[test]
fn tls_over_tcp_with_a_trusted_root_and_refused_otherwise() {
    let dir = std::env::temp_dir().join(format!("fp-p4rt-client-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A root (rustls takes no self-signed CA as the server's own certificate) and the server's
    // certificate for 127.0.0.1, signed by it.
    let f = |name: &str| dir.join(name);
    let (ca, ca_key, csr, cert, key, ext) = (f("ca.pem"), f("ca.key"), f("req.csr"), f("cert.pem"), f("key.pem"), f("ext.cnf"));
    std::fs::write(&ext, "subjectAltName=IP:127.0.0.1\n").unwrap();
    let openssl = |args: &[&std::ffi::OsStr]| {
        let ok = Command::new("openssl").args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
        assert!(ok, "openssl (Debian's openssl) failed: {args:?}");
    };
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let ec = [os("-newkey"), os("ec"), os("-pkeyopt"), os("ec_paramgen_curve:prime256v1"), os("-nodes")];
    openssl(
        &[
            &[os("req"), os("-x509"), os("-days"), os("1"), os("-subj"), os("/CN=fastpath-test-ca")][..],
            &ec,
            &[os("-keyout"), ca_key.as_os_str(), os("-out"), ca.as_os_str()],
        ]
        .concat(),
    );
    openssl(
        &[&[os("req"), os("-subj"), os("/CN=127.0.0.1")][..], &ec, &[os("-keyout"), key.as_os_str(), os("-out"), csr.as_os_str()]].concat(),
    );
    openssl(&[
        os("x509"),
        os("-req"),
        os("-days"),
        os("1"),
        os("-in"),
        csr.as_os_str(),
        os("-CA"),
        ca.as_os_str(),
        os("-CAkey"),
        ca_key.as_os_str(),
        os("-CAcreateserial"),
        os("-extfile"),
        ext.as_os_str(),
        os("-out"),
        cert.as_os_str(),
    ]);
    let ca_pem = std::fs::read(&ca).unwrap();
    let counts = with_server(Listen::Tcp("127.0.0.1:0".parse().unwrap()), Some((cert.clone(), key.clone())), |addr, rt| {
        rt.block_on(async {
            let tls = |domain: &str| ClientTls { ca_pem: ca_pem.clone(), domain: domain.into() };
            let mut cfg = at(&addr, 1);
            cfg.timeout = Duration::from_secs(5);
            // Plaintext to a TLS server, and a certificate checked against another name: no.
            // The TLS side answers the HTTP/2 preface with a TLS alert and closes: the client
            // sees a protocol error, or the closed stream first (broken pipe, reset), by timing.
            let e = Client::connect(&cfg).await.unwrap_err().to_string();
            assert!(
                ["h2 protocol error", "broken pipe", "connection reset"].iter().any(|w| e.contains(w)),
                "plaintext to a TLS listener: {e}"
            );
            cfg.tls = Some(tls("192.0.2.1"));
            let e = Client::connect(&cfg).await.unwrap_err();
            assert!(e.to_string().contains("invalid peer certificate"), "the certificate is for 127.0.0.1: {e}");
            cfg.tls = Some(tls("127.0.0.1"));
            let mut c = Client::connect(&cfg).await.unwrap();
            let ups = (0..3).map(|k| c.names().insert(&rule(k)).unwrap()).collect();
            c.write(ups).await.unwrap();
        });
    });
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(counts, (3, 0));
}
