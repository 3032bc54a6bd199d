//! The user plane's PFCP endpoint over UDP on 127.0.0.1, with a real control plane over the
//! `vbng` pipeline and worker threads that apply its changes between batches:
//!
//! - our codec plays the control plane: association, establishment, modification and deletion
//!   of sessions, checked in the workers' tables and in the usage report (packets a worker
//!   counted for the session);
//! - scapy's PFCP layer (`scapy.contrib.pfcp`, an independent implementation) plays the
//!   control plane: it associates and establishes one subscriber, checks our responses with its
//!   own parser, and `show session` shows the subscriber; tshark then decodes our responses
//!   with no malformed field and no warning- or error-level expert item.
//!
//! The scapy test needs python3 with scapy (`$PFCP_PYTHON`, else `python3` or
//! `/usr/bin/python3`, the first that imports scapy's PFCP layer) and tshark; without them it
//! fails (it does not skip).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use fastpath_control::mailbox::{mailbox, ControlEnd, WorkerEnd};
use fastpath_control::pfcp_up::{Config, Endpoint, PfcpServer, Stats};
use fastpath_control::Control;
use fastpath_packet::build::FrameBuilder;
use fastpath_packet::testutil::write_pcap;
use fastpath_packet::{Batch, Pool};
use fastpath_pfcp::bbf::{BbfUpFunctionFeatures, LogicalPort};
use fastpath_pfcp::group::*;
use fastpath_pfcp::ie::*;
use fastpath_pfcp::message::*;
use fastpath_pfcp::{decode, encode, Message, NodeHeader, SessionHeader};
use fastpath_pipeline::Pipeline;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

const LOCAL: Ipv4Addr = Ipv4Addr::LOCALHOST;

fn vbng() -> Pipeline {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/vbng.toml")).unwrap();
    let mut p = fastpath_pipeline::compile("vbng.toml", &text).unwrap().instantiate();
    p.set_ports(2).unwrap();
    p
}

/// What the workers hold when they stop: the lines of `up_session` and `down_session`.
type Tables = (Vec<String>, Vec<String>);

/// Runs `f` with an endpoint on 127.0.0.1 (ports "access" = 0, "core" = 1) serving a control
/// plane over two workers. Each worker, when `inject` is non-zero, runs that many downstream
/// frames to `inject_ip` through its pipeline (worker 0 only) and sets `inject` back to 0.
/// Returns what `f` returns, the endpoint's counters and each worker's tables.
fn with_endpoint<R>(f: impl FnOnce(SocketAddr, &Mutex<Control<'_>>, &AtomicU32) -> R) -> (R, Stats, Vec<Tables>) {
    let (ends, wends): (Vec<ControlEnd>, Vec<WorkerEnd>) = (0..2).map(|_| mailbox()).unzip();
    let stop = AtomicBool::new(false);
    let inject = AtomicU32::new(0);
    let shadow = vbng();
    let cfg = Config::for_program(shadow.program(), IpAddr::V4(LOCAL), vec!["access".into(), "core".into()], 3_976_214_400).unwrap();
    let mut server = PfcpServer::bind(SocketAddr::new(IpAddr::V4(LOCAL), 0), Endpoint::new(cfg)).unwrap();
    let addr = server.local_addr().unwrap();
    let control = Mutex::new(Control::new(shadow, Box::new(|| Ok(vbng())), ends));
    std::thread::scope(|s| {
        let workers: Vec<_> = wends
            .into_iter()
            .enumerate()
            .map(|(w, mut end)| {
                let (stop, inject) = (&stop, &inject);
                s.spawn(move || {
                    let mut p = vbng();
                    while !stop.load(Ordering::Relaxed) {
                        end.poll(&mut p, |_| {});
                        let n = inject.load(Ordering::Acquire);
                        if w == 0 && n > 0 {
                            let mut pool = Pool::new(64);
                            let mut b = Batch::new();
                            for _ in 0..n {
                                let h = pool.alloc().unwrap();
                                pool.set_data(h, &downstream_frame(Ipv4Addr::new(100, 64, 0, 1)));
                                b.push(h, 1);
                            }
                            p.process(&mut pool, &mut b, 0);
                            inject.store(0, Ordering::Release);
                        }
                        std::thread::yield_now();
                    }
                    (p.entry_lines("up_session").unwrap(), p.entry_lines("down_session").unwrap())
                })
            })
            .collect();
        let pfcp = {
            let (stop, control, server) = (&stop, &control, &mut server);
            s.spawn(move || {
                server.serve_until(control, stop);
                server.endpoint().stats().clone()
            })
        };
        /// Stops the threads also when `f` fails an assertion, so the scope ends.
        struct StopOnDrop<'s>(&'s AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let guard = StopOnDrop(&stop);
        let r = f(addr, &control, &inject);
        drop(guard);
        let stats = pfcp.join().unwrap();
        let tables = workers.into_iter().map(|h| h.join().unwrap()).collect();
        (r, stats, tables)
    })
}

/// A downstream frame from the core port: Ethernet, one 802.1Q tag (VLAN 10), IPv4 (with its
/// checksum) from 198.51.100.1 to `dst`, UDP, 18 bytes of payload.
fn downstream_frame(dst: Ipv4Addr) -> Vec<u8> {
    FrameBuilder::eth([0x02, 0xfa, 0, 0, 0, 0x01], [0x02, 0xc0, 0, 0, 0, 0x01])
        .vlan(10, 0)
        .ipv4(Ipv4Addr::new(198, 51, 100, 1), dst)
        .udp(12345, 12345)
        .payload(&[0xa5; 18])
        .build()
}

/// A control plane played with our codec.
struct Cp {
    sock: UdpSocket,
    up: SocketAddr,
    seq: u32,
}

impl Cp {
    fn new(up: SocketAddr) -> Cp {
        let sock = UdpSocket::bind((LOCAL, 0)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Cp { sock, up, seq: 0 }
    }

    fn node_id(&self) -> NodeId {
        NodeId::Fqdn("cp.test".into())
    }

    fn ask(&mut self, m: impl FnOnce(u32) -> Message) -> Message {
        self.seq += 1;
        let seq = self.seq;
        let mut out = Vec::new();
        encode(&m(seq), &mut out).unwrap();
        self.sock.send_to(&out, self.up).unwrap();
        let mut buf = [0u8; 65_536];
        let (n, _) = self.sock.recv_from(&mut buf).unwrap();
        let r = decode(&buf[..n]).unwrap();
        assert_eq!(r.seq(), seq, "{r:?}");
        r
    }

    fn establish(&mut self, cp_seid: u64, te: CreateTrafficEndpoint, qer: CreateQer) -> SessionEstablishmentResponse {
        let node_id = self.node_id();
        let r = self.ask(|seq| {
            let mut pdr = fastpath_pfcp::samples::pdr_up();
            pdr.pdi.logical_port = te.logical_port.clone();
            Message::SessionEstablishmentRequest(
                SessionHeader { seid: 0, seq, priority: None },
                SessionEstablishmentRequest {
                    node_id,
                    cp_f_seid: FSeid { seid: cp_seid, ipv4: Some(LOCAL), ipv6: None },
                    create_pdr: vec![pdr, fastpath_pfcp::samples::pdr_down()],
                    create_far: vec![fastpath_pfcp::samples::far_up(), fastpath_pfcp::samples::far_down()],
                    create_urr: vec![fastpath_pfcp::samples::urr()],
                    create_qer: vec![qer],
                    create_traffic_endpoint: vec![te],
                    unknown: vec![],
                },
            )
        });
        let Message::SessionEstablishmentResponse(h, r) = r else { panic!("{r:?}") };
        assert_eq!(h.seid, if r.cause == Cause::REQUEST_ACCEPTED { cp_seid } else { h.seid });
        r
    }
}

fn te(vlans: (u16, u16), mac: [u8; 6], ip: Ipv4Addr) -> CreateTrafficEndpoint {
    let tag = |vid| Some(VlanTag { pcp: None, dei: None, vid: Some(vid) });
    CreateTrafficEndpoint {
        traffic_endpoint_id: TrafficEndpointId(1),
        ue_ip_address: vec![UeIpAddress { ipv4: Some(ip), ..Default::default() }],
        mac_address: Some(MacAddress { source: Some(mac), ..Default::default() }),
        s_tag: tag(vlans.0),
        c_tag: tag(vlans.1),
        logical_port: Some(LogicalPort(b"access".to_vec())),
        ..Default::default()
    }
}

fn qer(ul_kbps: u64, dl_kbps: u64) -> CreateQer {
    CreateQer { qer_id: QerId(1), gate_status: GateStatus::OPEN, mbr: Some(BitRate { ul_kbps, dl_kbps }), gbr: None, unknown: vec![] }
}

#[test]
fn a_control_plane_establishes_modifies_and_deletes_sessions_over_udp() {
    let ((), stats, tables) = with_endpoint(|addr, control, inject| {
        let mut cp = Cp::new(addr);
        // Heartbeats need no association; sessions do.
        let r = cp.ask(|seq| {
            Message::HeartbeatRequest(NodeHeader { seq }, HeartbeatRequest { recovery_time_stamp: RecoveryTimeStamp(5), unknown: vec![] })
        });
        let Message::HeartbeatResponse(_, r) = r else { panic!("{r:?}") };
        assert_eq!(r.recovery_time_stamp, RecoveryTimeStamp(3_976_214_400));
        let a = cp.establish(0xa, te((100, 200), [2, 0, 0, 0, 0, 1], Ipv4Addr::new(100, 64, 0, 1)), qer(20_000, 100_000));
        assert_eq!(a.cause, Cause::NO_ESTABLISHED_ASSOCIATION);
        let node_id = cp.node_id();
        let r = cp.ask(|seq| {
            Message::AssociationSetupRequest(
                NodeHeader { seq },
                AssociationSetupRequest { node_id, recovery_time_stamp: RecoveryTimeStamp(9), ..Default::default() },
            )
        });
        let Message::AssociationSetupResponse(_, r) = r else { panic!("{r:?}") };
        assert_eq!((r.cause, r.node_id), (Cause::REQUEST_ACCEPTED, NodeId::Ipv4(LOCAL)));
        assert_eq!(r.bbf_up_function_features.map(|f| f.0 & BbfUpFunctionFeatures::IPOE), Some(BbfUpFunctionFeatures::IPOE));

        // Two subscribers: A at 100 Mbit/s down (tier 0), B at 1 Gbit/s (tier 1).
        let a = cp.establish(0xa, te((100, 200), [2, 0, 0, 0, 0, 1], Ipv4Addr::new(100, 64, 0, 1)), qer(20_000, 100_000));
        assert_eq!(a.cause, Cause::REQUEST_ACCEPTED, "{a:?}");
        let b = cp.establish(0xb, te((100, 201), [2, 0, 0, 0, 0, 2], Ipv4Addr::new(100, 64, 0, 2)), qer(0, 1_000_000));
        assert_eq!(b.cause, Cause::REQUEST_ACCEPTED, "{b:?}");
        // A third with B's address: refused, nothing changes.
        let c = cp.establish(0xc, te((100, 202), [2, 0, 0, 0, 0, 3], Ipv4Addr::new(100, 64, 0, 2)), qer(0, 100_000));
        assert_eq!((c.cause, c.offending_ie), (Cause::REQUEST_REJECTED, Some(OffendingIe(127))));
        {
            let mut c = control.lock().unwrap();
            assert_eq!(
                c.execute("show session 1").unwrap().lines().next().unwrap(),
                "session 1: port 0 s-vlan 100 c-vlan 200 mac 02:00:00:00:00:01 ip 100.64.0.1 tier 0 acl 0 up 20000000/20000000 bit/s"
            );
            assert!(c.execute("show session 2").unwrap().contains("ip 100.64.0.2 tier 1 acl 0 up unpoliced"));
            assert!(c.execute("show sessions").unwrap().starts_with("2 session(s)"));
        }
        let (seid_a, seid_b) = (a.up_f_seid.unwrap().seid, b.up_f_seid.unwrap().seid);

        // B moves to 20 Mbit/s (tier 2) and gets an upstream policer.
        let r = cp.ask(|seq| {
            Message::SessionModificationRequest(
                SessionHeader { seid: seid_b, seq, priority: None },
                SessionModificationRequest {
                    update_qer: vec![UpdateQer {
                        qer_id: QerId(1),
                        mbr: Some(BitRate { ul_kbps: 5_000, dl_kbps: 20_000 }),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            )
        });
        let Message::SessionModificationResponse(h, r) = r else { panic!("{r:?}") };
        assert_eq!((h.seid, r.cause), (0xb, Cause::REQUEST_ACCEPTED));
        assert!(control.lock().unwrap().execute("show session 2").unwrap().contains("tier 2 acl 0 up 5000000/5000000 bit/s"));

        // Seven packets to A, counted by worker 0; then A is deleted and reports them.
        inject.store(7, Ordering::Release);
        while inject.load(Ordering::Acquire) != 0 {
            std::thread::yield_now();
        }
        let r = cp.ask(|seq| {
            Message::SessionDeletionRequest(SessionHeader { seid: seid_a, seq, priority: None }, SessionDeletionRequest::default())
        });
        let Message::SessionDeletionResponse(h, r) = r else { panic!("{r:?}") };
        assert_eq!((h.seid, r.cause), (0xa, Cause::REQUEST_ACCEPTED));
        let v = r.usage_report[0].volume_measurement.unwrap();
        // Counted once the subscriber's two tags replaced the core tag: 64 - 4 + 8 bytes.
        assert_eq!((v.dl_pkts, v.dl_bytes, v.ul_pkts), (Some(7), Some(7 * 68), Some(0)), "{v:?}");
        // Again: the session is gone.
        let r = cp.ask(|seq| {
            Message::SessionDeletionRequest(SessionHeader { seid: seid_a, seq, priority: None }, SessionDeletionRequest::default())
        });
        let Message::SessionDeletionResponse(h, r) = r else { panic!("{r:?}") };
        assert_eq!((h.seid, r.cause), (0, Cause::SESSION_CONTEXT_NOT_FOUND));
    });
    // Every worker holds B, as modified, and nothing of A.
    for (up, down) in tables {
        // session_up's address parameter is untyped: shown as a number.
        let ip = u32::from(Ipv4Addr::new(100, 64, 0, 2));
        assert_eq!(up, [format!("table up_session add 0 100 201 02:00:00:00:00:02 => session_up(2, {ip}, 0)")]);
        assert_eq!(down, ["table down_session add 100.64.0.2 => session_down(2, 0, 100, 201, 02:00:00:00:00:02)"]);
    }
    assert_eq!((stats.rx, stats.tx), (9, 9));
    assert_eq!(stats.causes.iter().map(|(c, n)| (*c, *n)).collect::<Vec<_>>(), [(1, 5), (64, 1), (65, 1), (72, 1)]);
}

fn python() -> String {
    let mut candidates = vec!["python3".to_string(), "/usr/bin/python3".to_string()];
    if let Ok(p) = std::env::var("PFCP_PYTHON") {
        candidates.insert(0, p);
    }
    for p in &candidates {
        let ok = Command::new(p).args(["-c", "import scapy.contrib.pfcp"]).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
        if ok {
            return p.clone();
        }
    }
    panic!("no python3 with scapy's PFCP layer among {candidates:?}; run scripts/setup-lab.sh (installs python3-scapy)");
}

/// The scapy control plane: associates with the user plane at argv[1]:argv[2] (whose Recovery
/// Time Stamp must be argv[3], when given), establishes one
/// subscriber (S-VLAN 300 / C-VLAN 42, 02:00:00:00:2a:2a, 100.64.42.42, 1 Gbit/s down, 40
/// Mbit/s up), checks both responses with scapy's parser and prints each as
/// "<local port> <hex>".
const SCAPY_CP: &str = r#"
import socket, sys
from scapy.contrib import pfcp as P

BBF = 3561
up = (sys.argv[1], int(sys.argv[2]))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
s.settimeout(10)

def bbf(ietype, data):
    return P.IE_EnterpriseSpecific(ietype=ietype, enterprise_id=BBF, data=data)

def ask(msg):
    s.sendto(bytes(msg), up)
    data, _ = s.recvfrom(65535)
    print(s.getsockname()[1], data.hex())
    return P.PFCP(data)

def only(ies, cls):
    found = [ie for ie in ies if isinstance(ie, cls)]
    assert len(found) == 1, (cls.__name__, [type(i).__name__ for i in ies])
    return found[0]

node = P.IE_NodeId(id_type=0, ipv4="127.0.0.1")
r = ask(P.PFCP(S=0, seq=1) / P.PFCPAssociationSetupRequest(IE_list=[
    node, P.IE_RecoveryTimeStamp(timestamp=0x70000000), P.IE_CPFunctionFeatures(LOAD=0)]))
assert r.message_type == 6 and r.seq == 1
ies = r.payload.IE_list
assert only(ies, P.IE_Cause).cause == 1
assert only(ies, P.IE_NodeId).ipv4 == "127.0.0.1"
rts = only(ies, P.IE_RecoveryTimeStamp).timestamp & 0xffffffff
assert len(sys.argv) < 4 or rts == int(sys.argv[3]), rts
only(ies, P.IE_UPFunctionFeatures)
feats = [ie for ie in ies if isinstance(ie, P.IE_EnterpriseSpecific) and ie.ietype == 32768]
assert len(feats) == 1 and feats[0].enterprise_id == BBF and feats[0].data[0] & 0x02, feats

def tag(cls, vid):
    if cls is P.IE_C_TAG:
        return cls(VID=1, cvid_value_hi=vid >> 8, cvid_value_low=vid & 0xff)
    return cls(VID=1, svid_value_hi=vid >> 8, svid_value_low=vid & 0xff)

pdi = P.IE_PDI(IE_list=[
    P.IE_SourceInterface(interface=0), P.IE_UE_IP_Address(V4=1, ipv4="100.64.42.42"),
    P.IE_TrafficEndpointId(id=1), bbf(32769, b"access")])
pdr = P.IE_CreatePDR(IE_list=[P.IE_PDR_Id(id=1), P.IE_Precedence(precedence=100), pdi,
                              P.IE_FAR_Id(id=1), P.IE_QER_Id(id=1), P.IE_URR_Id(id=1)])
far = P.IE_CreateFAR(IE_list=[P.IE_FAR_Id(id=1), P.IE_ApplyAction(FORW=1),
    P.IE_ForwardingParameters(IE_list=[P.IE_DestinationInterface(interface=1)])])
qer = P.IE_CreateQER(IE_list=[P.IE_QER_Id(id=1), P.IE_GateStatus(ul=0, dl=0),
                              P.IE_MBR(ul=40000, dl=1000000)])
urr = P.IE_CreateURR(IE_list=[P.IE_URR_Id(id=1), P.IE_MeasurementMethod(VOLUM=1),
                              P.IE_ReportingTriggers(periodic_reporting=1),
                              P.IE_MeasurementPeriod(period=60)])
te = P.IE_CreateTrafficEndpoint(IE_list=[
    P.IE_TrafficEndpointId(id=1), P.IE_UE_IP_Address(V4=1, ipv4="100.64.42.42"),
    P.IE_MACAddress(SOUR=1, source_mac="02:00:00:00:2a:2a"),
    tag(P.IE_C_TAG, 42), tag(P.IE_S_TAG, 300), bbf(32769, b"access")])
r = ask(P.PFCP(S=1, seid=0, seq=2) / P.PFCPSessionEstablishmentRequest(IE_list=[
    node, P.IE_FSEID(v4=1, seid=0x4242, ipv4="127.0.0.1"), pdr, far, urr, qer, te]))
assert r.message_type == 51 and r.seq == 2 and r.seid == 0x4242, r.show(dump=True)
ies = r.payload.IE_list
assert only(ies, P.IE_Cause).cause == 1, r.show(dump=True)
f = only(ies, P.IE_FSEID)
assert f.v4 == 1 and f.ipv4 == "127.0.0.1" and f.seid != 0
assert not any(isinstance(ie, P.IE_NotImplemented) for ie in ies)
"#;

#[test]
fn scapy_plays_the_control_plane_and_tshark_reads_our_answers() {
    let py = python();
    let ((), stats, tables) = with_endpoint(|addr, control, _| {
        let out =
            Command::new(&py).args(["-c", SCAPY_CP, &addr.ip().to_string(), &addr.port().to_string(), "3976214400"]).output().unwrap();
        assert!(out.status.success(), "scapy peer failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let shown = control.lock().unwrap().execute("show session 1").unwrap();
        assert_eq!(
            shown.lines().next().unwrap(),
            "session 1: port 0 s-vlan 300 c-vlan 42 mac 02:00:00:00:2a:2a ip 100.64.42.42 tier 1 acl 0 up 40000000/40000000 bit/s"
        );
        // Our responses, as frames from the endpoint to the peer, for tshark.
        let text = String::from_utf8(out.stdout).unwrap();
        let frames: Vec<Vec<u8>> = text
            .lines()
            .map(|l| {
                let (port, hexa) = l.split_once(' ').unwrap();
                let pfcp: Vec<u8> = (0..hexa.len()).step_by(2).map(|i| u8::from_str_radix(&hexa[i..i + 2], 16).unwrap()).collect();
                frame(&pfcp, addr.port(), port.parse().unwrap())
            })
            .collect();
        assert_eq!(frames.len(), 2);
        let dir = std::env::temp_dir().join(format!("fastpath-pfcp-up-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pcap = dir.join("answers.pcap");
        write_pcap(&pcap, &frames).unwrap();
        assert_eq!(tshark(&pcap, addr.port(), &["-T", "fields", "-e", "pfcp.msg_type", "-e", "pfcp.cause"]), ["6\t1", "51\t1"]);
        let complaints = tshark(
            &pcap,
            addr.port(),
            &["-Y", "_ws.malformed || _ws.expert.severity >= 0x00600000 || !pfcp", "-T", "fields", "-e", "frame.number"],
        );
        assert!(complaints.is_empty(), "tshark complains about frames {complaints:?}");
        // The BBF UP Function Features IE with the IPoE bit, as tshark reads it.
        let bbf = tshark(
            &pcap,
            addr.port(),
            &["-Y", "pfcp.msg_type == 6", "-T", "fields", "-e", "pfcp.enterprise_id", "-e", "pfcp.bbf.up_function_features.ipoe"],
        );
        assert_eq!(bbf.len(), 1);
        assert_eq!(bbf[0], "3561\t1", "{bbf:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    });
    assert_eq!(stats.causes.get(&1), Some(&2));
    for (up, _) in tables {
        let ip = u32::from(Ipv4Addr::new(100, 64, 42, 42));
        assert_eq!(up, [format!("table up_session add 0 300 42 02:00:00:00:2a:2a => session_up(1, {ip}, 0)")]);
    }
}

/// tshark over `pcap`, with UDP `port` (the endpoint's, not 8805 here) decoded as PFCP.
fn tshark(pcap: &Path, port: u16, args: &[&str]) -> Vec<String> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args(["-d", &format!("udp.port=={port},pfcp")])
        .args(["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"])
        .args(args)
        .output()
        .expect("tshark must be installed (scripts/test installs it)");
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

/// One frame: Ethernet II, IPv4 127.0.0.1 → 127.0.0.1, UDP `sport` → `dport`, both checksummed.
fn frame(pfcp: &[u8], sport: u16, dport: u16) -> Vec<u8> {
    FrameBuilder::eth([0; 6], [0; 6]).ipv4(LOCAL, LOCAL).udp(sport, dport).payload(pfcp).build()
}
