//! `fastpath run --p4rt` driven by a real P4Runtime client: p4runtime-shell (the P4 project's
//! Python shell, from PyPI, installed by scripts/setup-python.sh into target/python).
//!
//! ```text
//!   peer ns                          dut ns
//!   h0 (raw socket: sends) ── veth ── d0 = p0 ┐ fastpath run SPEC --p4rt ADDR
//!   h1 (raw socket: counts) ─ veth ── d1 = p1 ┘   ▲ p4runtime-shell (python, in the dut ns)
//! ```
//! 1. `router`: pipelines/router.toml over the unix socket (0600 under umask 000). The shell
//!    reads the P4Info from the device, INSERTs a route, reads it back (wildcard read), is
//!    refused a second INSERT (ALREADY_EXISTS) and a MODIFY of a missing route (NOT_FOUND);
//!    traffic to the route is forwarded with the next hop's MACs and TTL − 1; after a MODIFY
//!    it carries the new MAC; after a DELETE it is dropped again. Then the shell pushes another
//!    program (pipelines/l2fwd.toml, with the P4Info `fastpath p4info` wrote): the running data
//!    plane switches to it, and traffic follows the new program's one entry.
//! 2. `switch_acl`: pipelines/switch-acl.toml over TCP with TLS (a self-signed certificate from
//!    `openssl req`, the client's root): an ACL deny INSERTed with a priority
//!    stops the flooded traffic it matches; read back with its priority and ternary mask; a
//!    DELETE lets it through again.
//! 3. `packet_io`: examples/p4rt_l2_learn.toml: a packet-out leaves the port it names (seen on
//!    the wire by h1); a frame from an unknown source arrives as a packet-in with its ingress
//!    port; the `punted` counter reads 1 for port 0. Then the example controller
//!    (examples/p4rt_l2_learn.py) learns both hosts from their first frames, and a third frame
//!    is forwarded by the switch's tables without a punt.
//!
//! Needs root and the Python environment (a missing one fails in CI, or prints a hint
//! elsewhere). Every fastpath and python child is stopped by PID, and namespaces and temp files
//! removed, on every exit path (drop guards). Traffic is a few dozen frames per phase.

mod common;

use common::{root_or_skip, wait_for, ChildGuard, TempDir};
use fastpath_io::af_packet::RawSocket;
use fastpath_io::netns::{Netns, VethPair};
use fastpath_packet::build::FrameBuilder;
use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The interpreter with p4runtime-shell (scripts/setup-python.sh).
fn python() -> Option<PathBuf> {
    let p = std::env::var_os("FASTPATH_PYENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/python"))
        .join("bin/python");
    if p.exists() {
        return Some(p);
    }
    assert!(std::env::var_os("CI").is_none(), "CI installs p4runtime-shell (scripts/setup-python.sh)");
    eprintln!("no {} (run scripts/setup-python.sh): skipped", p.display());
    None
}

/// The Python side: one phase per run, chosen by argv[2]; prints `KEY value` lines.
const DRIVER: &str = r#"
import os, sys, time, grpc
import p4runtime_sh.shell as sh
from p4runtime_sh.p4runtime import SSLOptions
from p4runtime_sh.context import P4Type
from p4runtime_sh.p4runtime import P4RuntimeWriteException

addr, phase = sys.argv[1], sys.argv[2]
if addr.startswith("unix:"):
    # gRPC's C core sends a unix socket's path as the HTTP/2 :authority, which the server's
    # HTTP/2 stack refuses; name it "localhost", as grpc-go and grpcurl do.
    plain = grpc.insecure_channel
    grpc.insecure_channel = lambda t, options=None, compression=None: plain(
        t, options=list(options or []) + [("grpc.default_authority", "localhost")], compression=compression)
# With TLS (P4RT_CACERT: the server's self-signed certificate, trusted as the root).
cacert = os.environ.get("P4RT_CACERT")
ssl = SSLOptions(False, cacert) if cacert else None
# With P4RT_P4INFO and P4RT_SPEC: push that pipeline first (SetForwardingPipelineConfig,
# VERIFY_AND_COMMIT), as a controller that brings its own program does.
config = None
if os.environ.get("P4RT_SPEC"):
    config = sh.FwdPipeConfig(os.environ["P4RT_P4INFO"], os.environ["P4RT_SPEC"])
sh.setup(device_id=1, grpc_addr=addr, election_id=(0, 1), ssl_options=ssl, config=config, verbose=False)

def code(f):
    try:
        f()
        return "OK"
    except P4RuntimeWriteException as e:
        for c in ("ALREADY_EXISTS", "NOT_FOUND", "INVALID_ARGUMENT", "PERMISSION_DENIED", "OUT_OF_RANGE"):
            if c in str(e):
                return c
        return "OTHER " + str(e).replace("\n", " ")

def route(dmac):
    te = sh.TableEntry("fib4")(action="nexthop")
    te.match["ipv4.dst"] = "198.18.1.0/24"
    te.action["port"] = "1"
    te.action["dmac"] = dmac
    te.action["smac"] = "02:00:00:00:00:01"
    return te

def show(name):
    for e in sh.TableEntry(name).read():
        e._update_msg()
        print("ENTRY", e.priority, " ".join(f"{m.field_id}={m.WhichOneof('field_match_type')}:{getattr(m, m.WhichOneof('field_match_type')).SerializeToString().hex()}" for m in e._entry.match),
              "ACTION", sh.context.get_name_from_id(e._entry.action.action.action_id),
              " ".join(p.value.hex() for p in e._entry.action.action.params))

def run():
    if phase == "info":
        print("VERSION", sh.client.api_version())
        t = sh.context.get_obj(P4Type.table, "fib4")
        print("TABLE", hex(t.preamble.id), t.size, " ".join(f"{f.name}/{f.bitwidth}/{f.match_type}" for f in t.match_fields))
        a = sh.context.get_obj(P4Type.action, "nexthop")
        print("ACTION", " ".join(f"{p.name}/{p.bitwidth}" for p in a.params))
    elif phase == "insert":
        print("INSERT", code(lambda: route("02:00:00:00:01:01").insert()))
        print("AGAIN", code(lambda: route("02:00:00:00:01:01").insert()))
        missing = sh.TableEntry("fib4")(action="drop")
        missing.match["ipv4.dst"] = "10.0.0.0/8"
        print("MODIFY_MISSING", code(missing.modify))
        show("fib4")
    elif phase == "modify":
        print("MODIFY", code(lambda: route("02:00:00:00:01:02").modify()))
    elif phase == "delete":
        print("DELETE", code(lambda: route("02:00:00:00:01:02").delete()))
        show("fib4")
    elif phase == "l2fwd":
        t = sh.context.get_obj(P4Type.table, "port_pair")
        print("TABLE", t.preamble.name, t.size)
        te = sh.TableEntry("port_pair")(action="forward")
        te.match["meta.in_port"] = "0"
        te.action["port"] = "1"
        print("INSERT", code(te.insert))
    elif phase == "acl_deny":
        te = sh.TableEntry("acl")(action="deny")
        te.match["ipv4.dst"] = "198.19.0.0&&&255.255.0.0"
        te.priority = 10
        print("INSERT", code(te.insert))
        show("acl")
    elif phase == "acl_delete":
        te = sh.TableEntry("acl")
        te.match["ipv4.dst"] = "198.19.0.0&&&255.255.0.0"
        te.priority = 10
        print("DELETE", code(te.delete))
        show("acl")
    elif phase == "inject":
        # Into the pipeline as if it arrived on port 0: routed like a frame from the wire.
        sh.PacketOut(payload=bytes.fromhex(sys.argv[3]), egress_port="0", submit_to_ingress="1").send()
        print("SENT", 1)
    elif phase == "packet_io":
        sh.PacketOut(payload=bytes.fromhex(sys.argv[3]), egress_port="1").send()
        print("READY", flush=True)
        pin = sh.client.get_stream_packet("packet", timeout=10)
        if pin is not None:
            md = {m.metadata_id: int.from_bytes(m.value, "big") for m in pin.packet.metadata}
            print("PACKET_IN", md.get(1), md.get(2), pin.packet.payload.hex())
        for c in sh.CounterEntry("punted").read():
            c._update_msg()
            if c._entry.data.packet_count:
                print("COUNTER", c._entry.index.index, c._entry.data.packet_count, c._entry.data.byte_count)

try:
    run()
finally:
    sys.stdout.flush()
    sh.teardown()
"#;

/// Runs one driver phase inside `dut`; returns its `KEY rest` lines.
fn phase(py: &Path, script: &Path, dut: &Netns, addr: &str, name: &str) -> Vec<(String, String)> {
    phase_env(py, script, dut, addr, name, &[])
}

/// [`phase`] with environment variables for the driver.
fn phase_env(py: &Path, script: &Path, dut: &Netns, addr: &str, name: &str, env: &[(&str, &Path)]) -> Vec<(String, String)> {
    phase_full(py, script, dut, addr, name, &[], env)
}

/// [`phase`] with more arguments for the driver (`sys.argv[3:]`).
fn phase_args(py: &Path, script: &Path, dut: &Netns, addr: &str, name: &str, args: &[&str]) -> Vec<(String, String)> {
    phase_full(py, script, dut, addr, name, args, &[])
}

fn phase_full(
    py: &Path,
    script: &Path,
    dut: &Netns,
    addr: &str,
    name: &str,
    args: &[&str],
    env: &[(&str, &Path)],
) -> Vec<(String, String)> {
    let out = Command::new("ip")
        .args(["netns", "exec", dut.name()])
        .arg(py)
        .arg(script)
        .args([addr, name])
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(&mut ChildGuard::new(out), Duration::from_secs(60));
    assert!(out.0.success(), "driver phase {name}: {}\n{}\n{}", out.0, out.1, out.2);
    out.1.lines().filter_map(|l| l.split_once(' ').map(|(k, v)| (k.to_string(), v.to_string()))).collect()
}

/// Waits (at most `limit`) for a child to exit; its status and what is left of its output.
fn finish(g: &mut ChildGuard, limit: Duration) -> (std::process::ExitStatus, String, String) {
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = g.child().try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < limit, "a python child did not finish within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut o) = g.child().stdout.take() {
        std::io::Read::read_to_string(&mut o, &mut out).unwrap();
    }
    if let Some(mut e) = g.child().stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err).unwrap();
    }
    (status, out, err)
}

fn get<'a>(lines: &'a [(String, String)], key: &str) -> Vec<&'a str> {
    lines.iter().filter(|(k, _)| k == key).map(|(_, v)| v.as_str()).collect()
}

/// Sends `frames` from h0 and returns the frames h1 saw within 1 s after the last one that
/// `keep` accepts (the kernel's own IPv6 chatter on the veths is not ours).
fn probe(peer: &Netns, frames: Vec<Vec<u8>>, keep: fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
    peer.run(move || {
        let rx = RawSocket::open("h1").unwrap();
        let tx = RawSocket::open("h0").unwrap();
        for f in &frames {
            tx.send(f).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(1) {
            if let Some(n) = rx.recv(&mut buf, 100).unwrap() {
                if keep(&buf[..n]) {
                    got.push(buf[..n].to_vec());
                }
            }
        }
        got
    })
    .unwrap()
}

/// Our probe frames carry UDP source port 40000.
fn ours(f: &[u8]) -> bool {
    f.len() >= 14 + 20 + 8 && f[12..14] == [0x08, 0x00] && f[14 + 20..14 + 22] == 40000u16.to_be_bytes()
}

fn udp_to(dst: Ipv4Addr, seq: u16) -> Vec<u8> {
    FrameBuilder::eth([2, 0, 0, 0, 0, 0xfe], [2, 0, 0, 0, 0, 0xaa])
        .ipv4(Ipv4Addr::new(198, 18, 0, 2), dst)
        .udp(40000, seq)
        .frame_len(100)
        .build()
}

/// The two namespaces, their veths, and fastpath running `spec` with `extra` arguments.
struct Rig {
    peer: Netns,
    dut: Netns,
    _veths: [VethPair; 2],
    fastpath: ChildGuard,
}

fn start(tag: &str, spec: &str, extra: &[&str], tmp: &Path) -> Rig {
    let peer = Netns::new(&format!("fp4{tag}-peer")).unwrap();
    let dut = Netns::new(&format!("fp4{tag}-dut")).unwrap();
    let veths = [VethPair::new(&peer, "h0", &dut, "d0").unwrap(), VethPair::new(&peer, "h1", &dut, "d1").unwrap()];
    // TCP listeners inside the dut namespace need its loopback up.
    let up = Command::new("ip").args(["netns", "exec", dut.name(), "ip", "link", "set", "lo", "up"]).status().unwrap();
    assert!(up.success());
    let ctl = tmp.join("ctl.sock");
    // Under umask 000: the P4Runtime socket must still come out 0600. `exec` keeps the PID.
    let child = Command::new("sh")
        .args(["-c", "umask 000 && exec \"$0\" \"$@\"", "ip"])
        .args(["netns", "exec", dut.name(), env!("CARGO_BIN_EXE_fastpath"), "run", spec])
        .args(["--port", "p0=afpacket:d0", "--port", "p1=afpacket:d1", "--idle-sleep", "50", "--no-pin", "--ctl"])
        .arg(&ctl)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut fastpath = ChildGuard::new(child);
    wait_for("the control socket", Duration::from_secs(10), || {
        assert!(fastpath.child().try_wait().unwrap().is_none(), "fastpath run exited early");
        ctl.exists().then_some(())
    });
    Rig { peer, dut, _veths: veths, fastpath }
}

fn spec(rel: &str) -> String {
    format!("{}/../../{rel}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn router_routes_through_p4runtime_shell() {
    if !root_or_skip() {
        return;
    }
    let Some(py) = python() else { return };
    let tmp = TempDir(std::env::temp_dir().join(format!("fp-p4rt-router-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();
    let script = tmp.0.join("driver.py");
    std::fs::write(&script, DRIVER).unwrap();
    let sock = tmp.0.join("p4rt.sock");
    let addr = format!("unix:{}", sock.display());
    let mut rig = start("r", &spec("pipelines/router.toml"), &["--p4rt", &addr], &tmp.0);
    wait_for("the P4Runtime socket", Duration::from_secs(10), || sock.exists().then_some(()));
    let mode = std::fs::metadata(&sock).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777);
    assert_eq!(mode.ok(), Some(0o600), "the P4Runtime socket is the owner's only, whatever the umask");

    let info = phase(&py, &script, &rig.dut, &addr, "info");
    assert_eq!(get(&info, "VERSION"), ["1.4.1"]);
    // EXACT 2, LPM 3 (p4info.proto's MatchType).
    assert_eq!(get(&info, "TABLE"), ["0x2000001 2000000 ipv4.dst/32/3"]);
    assert_eq!(get(&info, "ACTION"), ["port/16 dmac/48 smac/48"]);

    let to_route = || (0..20).map(|k| udp_to(Ipv4Addr::new(198, 18, 1, 5), k)).collect::<Vec<_>>();
    assert!(probe(&rig.peer, to_route(), ours).is_empty(), "no route yet: dropped");

    let ins = phase(&py, &script, &rig.dut, &addr, "insert");
    assert_eq!(get(&ins, "INSERT"), ["OK"]);
    assert_eq!(get(&ins, "AGAIN"), ["ALREADY_EXISTS"]);
    assert_eq!(get(&ins, "MODIFY_MISSING"), ["NOT_FOUND"]);
    // The route read back: field 1 lpm (value c6120100, prefix 24 as the LPM message's bytes),
    // nexthop(1, 02:00:00:00:01:01, 02:00:00:00:00:01) with canonical byte strings.
    assert_eq!(get(&ins, "ENTRY"), ["0 1=lpm:0a04c61201001018 ACTION nexthop 01 020000000101 020000000001"]);

    let got = probe(&rig.peer, to_route(), ours);
    assert_eq!(got.len(), 20, "every frame to the route is forwarded");
    for f in &got {
        assert_eq!((&f[0..6], &f[6..12], f[14 + 8]), (&[2u8, 0, 0, 0, 1, 1][..], &[2u8, 0, 0, 0, 0, 1][..], 63), "next hop MACs, TTL − 1");
    }

    assert_eq!(get(&phase(&py, &script, &rig.dut, &addr, "modify"), "MODIFY"), ["OK"]);
    let got = probe(&rig.peer, to_route(), ours);
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|f| f[0..6] == [2, 0, 0, 0, 1, 2]), "the modified next hop");

    // A packet-out submitted to ingress is routed by the pipeline and leaves through port 1
    // with the next hop's MACs and its TTL decremented; nothing leaves through port 0.
    let frame = udp_to(Ipv4Addr::new(198, 18, 1, 5), 7);
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    let got = std::thread::scope(|sc| {
        let rx = sc.spawn(|| {
            rig.peer
                .run(|| {
                    let rx = RawSocket::open("h1").unwrap();
                    let (mut got, mut buf, t0) = (Vec::new(), [0u8; 2048], Instant::now());
                    while t0.elapsed() < Duration::from_secs(8) && got.is_empty() {
                        if let Some(n) = rx.recv(&mut buf, 100).unwrap() {
                            if ours(&buf[..n]) {
                                got.push(buf[..n].to_vec());
                            }
                        }
                    }
                    got
                })
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        let sent = phase_args(&py, &script, &rig.dut, &addr, "inject", &[&hex]);
        assert_eq!(get(&sent, "SENT"), ["1"]);
        rx.join().unwrap()
    });
    assert_eq!(got.len(), 1, "the injected frame was routed out of port 1");
    assert_eq!((&got[0][0..6], got[0][14 + 8]), (&[2u8, 0, 0, 0, 1, 2][..], 63), "next hop MAC, TTL − 1");

    let del = phase(&py, &script, &rig.dut, &addr, "delete");
    assert_eq!(get(&del, "DELETE"), ["OK"]);
    assert!(get(&del, "ENTRY").is_empty(), "{del:?}");
    assert!(probe(&rig.peer, to_route(), ours).is_empty(), "the route is gone: dropped again");

    // The controller brings another program: `fastpath p4info` writes its P4Info, the shell
    // pushes it with the spec as the device config, and the running data plane switches to it
    // (empty tables: the router's routes are gone) and forwards by its new table.
    let (l2fwd, p4info) = (spec("pipelines/l2fwd.toml"), tmp.0.join("l2fwd.p4info.txt"));
    let made = Command::new(env!("CARGO_BIN_EXE_fastpath")).args(["p4info", &l2fwd, "-o"]).arg(&p4info).output().unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let l2 = phase_env(&py, &script, &rig.dut, &addr, "l2fwd", &[("P4RT_P4INFO", &p4info), ("P4RT_SPEC", Path::new(&l2fwd))]);
    assert_eq!(get(&l2, "TABLE"), ["port_pair 256"], "{l2:?}");
    assert_eq!(get(&l2, "INSERT"), ["OK"]);
    let got = probe(&rig.peer, to_route(), ours);
    assert_eq!(got.len(), 20, "port 0 now forwards everything to port 1, by the new pipeline");
    assert!(got.iter().all(|f| f[0..6] == [2, 0, 0, 0, 0, 0xaa] && f[14 + 8] == 64), "MACs swapped, TTL untouched: l2fwd, not the router");

    let (status, out, err) = rig.fastpath.stop(true);
    assert!(status.success(), "{status}\n{out}\n{err}");
    assert!(err.contains(&format!("P4Runtime at {addr}")), "{err}");
    assert!(!sock.exists(), "the socket file is removed at exit");
}

#[test]
fn switch_acl_entries_through_p4runtime_shell_over_tls() {
    if !root_or_skip() {
        return;
    }
    let Some(py) = python() else { return };
    let tmp = TempDir(std::env::temp_dir().join(format!("fp-p4rt-acl-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();
    let script = tmp.0.join("driver.py");
    std::fs::write(&script, DRIVER).unwrap();
    let addr = "127.0.0.1:9559";
    // A self-signed certificate for 127.0.0.1: the server's identity and the client's root.
    let (cert, key) = (tmp.0.join("cert.pem"), tmp.0.join("key.pem"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=fastpath-test"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(made.is_ok_and(|s| s.success()), "openssl req (Debian's openssl) made no certificate");
    let (c, k) = (cert.display().to_string(), key.display().to_string());
    let mut rig = start("a", &spec("pipelines/switch-acl.toml"), &["--p4rt", addr, "--p4rt-cert", &c, "--p4rt-key", &k], &tmp.0);
    let tls = [("P4RT_CACERT", cert.as_path())];
    // Flooded (unknown unicast) to h1 until the ACL denies 198.19.0.0/16.
    let flood = || (0..20).map(|k| udp_to(Ipv4Addr::new(198, 19, 0, 2), k)).collect::<Vec<_>>();
    wait_for("flooded frames reach h1", Duration::from_secs(10), || (probe(&rig.peer, flood(), ours).len() == 20).then_some(()));

    let ins = phase_env(&py, &script, &rig.dut, addr, "acl_deny", &tls);
    assert_eq!(get(&ins, "INSERT"), ["OK"]);
    // Priority 10 and field 3 (ipv4.dst) ternary c6130000 / ffff0000, the others omitted.
    assert_eq!(get(&ins, "ENTRY"), ["10 3=ternary:0a04c61300001204ffff0000 ACTION deny "]);
    assert!(probe(&rig.peer, flood(), ours).is_empty(), "the deny rule drops them");

    let del = phase_env(&py, &script, &rig.dut, addr, "acl_delete", &tls);
    assert_eq!(get(&del, "DELETE"), ["OK"]);
    assert!(get(&del, "ENTRY").is_empty());
    assert_eq!(probe(&rig.peer, flood(), ours).len(), 20, "flooded again");
    let (status, out, err) = rig.fastpath.stop(true);
    assert!(status.success(), "{status}\n{out}\n{err}");
    assert!(err.contains("P4Runtime at 127.0.0.1:9559 (TLS)"), "{err}");
}

/// A frame from `src` to `dst` (MAC addresses), from our UDP port.
fn l2(dst: [u8; 6], src: [u8; 6], seq: u16) -> Vec<u8> {
    FrameBuilder::eth(dst, src).ipv4(Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 3)).udp(40000, seq).frame_len(80).build()
}

#[test]
fn packet_out_to_the_wire_and_packet_in_from_it_and_the_learning_example() {
    if !root_or_skip() {
        return;
    }
    let Some(py) = python() else { return };
    let tmp = TempDir(std::env::temp_dir().join(format!("fp-p4rt-pio-{}", std::process::id())));
    std::fs::create_dir_all(&tmp.0).unwrap();
    let script = tmp.0.join("driver.py");
    std::fs::write(&script, DRIVER).unwrap();
    let sock = tmp.0.join("p4rt.sock");
    let addr = format!("unix:{}", sock.display());
    let mut rig = start("p", &spec("examples/p4rt_l2_learn.toml"), &["--p4rt", &addr], &tmp.0);
    wait_for("the P4Runtime socket", Duration::from_secs(10), || sock.exists().then_some(()));

    // 1. Packet-out → wire, and wire → packet-in, in one controller session.
    let (a, b) = ([2, 0, 0, 0, 0, 0x0a], [2, 0, 0, 0, 0, 0x0b]);
    let out_frame = l2(b, a, 7);
    let hex: String = out_frame.iter().map(|x| format!("{x:02x}")).collect();
    let child = Command::new("ip")
        .args(["netns", "exec", rig.dut.name()])
        .arg(&py)
        .arg(&script)
        .args([addr.as_str(), "packet_io", hex.as_str()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut driver = ChildGuard::new(child);
    let mut lines = BufReader::new(driver.child().stdout.take().unwrap()).lines();
    // The packet-out was sent before READY; capture on h1 meanwhile and send the punt.
    let (seen, punt) = rig
        .peer
        .run(|| {
            let rx = RawSocket::open("h1").unwrap();
            let tx = RawSocket::open("h0").unwrap();
            let mut buf = [0u8; 2048];
            let mut seen = None;
            let t0 = Instant::now();
            while seen.is_none() && t0.elapsed() < Duration::from_secs(10) {
                if let Some(n) = rx.recv(&mut buf, 100).unwrap() {
                    if ours(&buf[..n]) {
                        seen = Some(buf[..n].to_vec());
                    }
                }
            }
            let punt = l2(b, [2, 0, 0, 0, 0, 0x0c], 9);
            tx.send(&punt).unwrap();
            (seen, punt)
        })
        .unwrap();
    let mut got: Vec<String> = Vec::new();
    for l in lines.by_ref() {
        got.push(l.unwrap());
    }
    let (status, _, err) = finish(&mut driver, Duration::from_secs(30));
    assert!(status.success(), "driver: {status}\n{got:?}\n{err}");
    assert_eq!(seen.as_deref(), Some(&out_frame[..]), "the packet-out left port 1 as it was sent");
    let hex_punt: String = punt.iter().map(|x| format!("{x:02x}")).collect();
    assert!(got.iter().any(|l| l == &format!("PACKET_IN 0 0 {hex_punt}")), "packet-in with ingress port 0, reason 0: {got:?}");
    assert!(got.iter().any(|l| l == &format!("COUNTER 0 1 {}", punt.len())), "the punted counter of port 0: {got:?}");

    // 2. The example controller learns both hosts from their first (flooded) frames; then the
    // switch forwards a third frame on its own.
    let example = spec("examples/p4rt_l2_learn.py");
    let ctl = Command::new("ip")
        .args(["netns", "exec", rig.dut.name()])
        .arg(&py)
        .args([example.as_str(), "--addr", addr.as_str(), "--ports", "2", "--duration", "12"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut controller = ChildGuard::new(ctl);
    // Traffic only once the controller is connected: p4runtime-shell's set-up took more than
    // the 2 s this test once slept on a loaded machine, and the first frame's packet-in was
    // lost (CI, 2026-11-30). Its output is collected on a thread meanwhile.
    let stdout = controller.child().stdout.take().unwrap();
    let (connected, wait) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if l.starts_with("connected to ") {
                let _ = connected.send(());
            }
            all.push_str(&l);
            all.push('\n');
        }
        all
    });
    wait.recv_timeout(Duration::from_secs(60)).expect("the example controller connects");
    let delivered = rig
        .peer
        .run(|| {
            let (s0, s1) = (RawSocket::open("h0").unwrap(), RawSocket::open("h1").unwrap());
            let mut buf = [0u8; 2048];
            let mut recv_ours = |s: &RawSocket| {
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_secs(5) {
                    if let Some(n) = s.recv(&mut buf, 100).unwrap() {
                        if ours(&buf[..n]) {
                            return Some(buf[..n].to_vec());
                        }
                    }
                }
                None
            };
            s0.send(&l2(b, a, 1)).unwrap(); // A → B: punted, A learnt on 0, flooded to h1
            let first = recv_ours(&s1);
            s1.send(&l2(a, b, 2)).unwrap(); // B → A: punted, B learnt on 1, flooded to h0
            let second = recv_ours(&s0);
            std::thread::sleep(Duration::from_millis(500));
            s0.send(&l2(b, a, 3)).unwrap(); // A → B: both known, forwarded by the switch
            let third = recv_ours(&s1);
            [first, second, third]
        })
        .unwrap();
    let (status, _, err) = finish(&mut controller, Duration::from_secs(30));
    let out = reader.join().unwrap();
    assert!(status.success(), "example: {status}\n{out}\n{err}");
    assert!(delivered.iter().all(Option::is_some), "every frame delivered: {delivered:?}\n{out}");
    assert!(out.contains("learned 02:00:00:00:00:0a on port 0") && out.contains("learned 02:00:00:00:00:0b on port 1"), "{out}");
    assert!(out.contains("2 packet-ins, 2 addresses learned"), "the third frame was not punted: {out}");
    let (status, out, err) = rig.fastpath.stop(true);
    assert!(status.success(), "{status}\n{out}\n{err}");
    assert!(err.contains("packet-outs (3 sent"), "{err}");
}
