//! scapy interop: scapy's PFCP layer (`scapy.contrib.pfcp`, an independent implementation)
//! builds messages that we decode and check field by field, and parses our encoding of every
//! sample message with its own assertions (`tests/scapy_peer.py`).
//!
//! Needs python3 with scapy (`scripts/setup-lab.sh` installs Debian's python3-scapy). The
//! interpreter is `$PFCP_PYTHON`, else the first of `python3` and `/usr/bin/python3` that can
//! import scapy's PFCP layer; with none, the test fails (it does not skip).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Command, Stdio};

use fastpath_pfcp::bbf::*;
use fastpath_pfcp::ie::*;
use fastpath_pfcp::{decode, encode, samples, Message, RawIe};

const PEER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scapy_peer.py");

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

fn scapy_built() -> BTreeMap<String, Message> {
    let out = Command::new(python()).arg(PEER).arg("build").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut msgs = BTreeMap::new();
    for line in text.lines() {
        let (name, hexa) = line.split_once(' ').unwrap();
        let bytes: Vec<u8> = (0..hexa.len()).step_by(2).map(|i| u8::from_str_radix(&hexa[i..i + 2], 16).unwrap()).collect();
        let m = decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Our canonical re-encoding decodes to the same message.
        let mut again = Vec::new();
        encode(&m, &mut again).unwrap();
        assert_eq!(decode(&again).unwrap(), m, "{name}");
        msgs.insert(name.to_string(), m);
    }
    assert_eq!(msgs.len(), 11, "{:?}", msgs.keys());
    msgs
}

#[test]
fn we_decode_what_scapy_builds() {
    let msgs = scapy_built();
    let node = NodeId::Ipv4(Ipv4Addr::new(198, 51, 100, 7));

    let Message::HeartbeatRequest(h, m) = &msgs["heartbeat_request"] else { panic!() };
    assert_eq!((h.seq, m.recovery_time_stamp), (7, RecoveryTimeStamp(0x7000_0000)));

    let Message::AssociationSetupRequest(h, m) = &msgs["association_setup_request"] else { panic!() };
    assert_eq!((h.seq, &m.node_id, m.recovery_time_stamp), (8, &node, RecoveryTimeStamp(0x7000_0001)));
    assert_eq!(m.up_function_features.as_ref().unwrap().0[0], 0x10); // FTUP
    assert_eq!(m.bbf_up_function_features, Some(BbfUpFunctionFeatures(BbfUpFunctionFeatures::IPOE)));
    assert!(m.unknown.is_empty());

    let Message::AssociationSetupResponse(_, m) = &msgs["association_setup_response"] else { panic!() };
    assert_eq!((&m.node_id, m.cause), (&NodeId::Fqdn("up1.bng.example".into()), Cause::REQUEST_ACCEPTED));

    let Message::AssociationReleaseRequest(_, m) = &msgs["association_release_request"] else { panic!() };
    assert_eq!(m.node_id, NodeId::Ipv6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7)));

    let Message::SessionEstablishmentRequest(h, m) = &msgs["session_establishment_request"] else { panic!() };
    assert_eq!((h.seid, h.seq, h.priority), (0, 10, None));
    assert_eq!(m.cp_f_seid, FSeid { seid: 0xabc, ipv4: Some(Ipv4Addr::new(198, 51, 100, 7)), ipv6: None });
    let pdr = &m.create_pdr[0];
    assert_eq!((pdr.pdr_id, pdr.precedence, pdr.far_id), (PdrId(5), Precedence(200), Some(FarId(6))));
    assert_eq!((&pdr.urr_id[..], &pdr.qer_id[..]), (&[UrrId(8)][..], &[QerId(9)][..]));
    assert_eq!(pdr.outer_header_removal.unwrap().description, OuterHeaderRemoval::S_TAG_AND_C_TAG);
    assert_eq!(pdr.bbf_outer_header_removal, Some(BbfOuterHeaderRemoval::ETHERNET));
    let pdi = &pdr.pdi;
    assert_eq!(pdi.source_interface, SourceInterface::ACCESS);
    assert_eq!(pdi.network_instance, Some(NetworkInstance::from_name("access")));
    assert_eq!(pdi.ue_ip_address[0].ipv4, Some(Ipv4Addr::new(100, 64, 1, 2)));
    assert_eq!(pdi.traffic_endpoint_id, vec![TrafficEndpointId(4)]);
    assert_eq!(pdi.logical_port, Some(LogicalPort(b"port-7".to_vec())));
    let epf = &pdi.ethernet_packet_filter[0];
    assert_eq!(epf.mac_address[0].source, Some([2, 0, 0, 0, 1, 2]));
    assert_eq!(epf.ethertype, Some(Ethertype(0x0800)));
    assert_eq!(epf.c_tag, Some(VlanTag { pcp: Some(0), dei: Some(false), vid: Some(301) }));
    assert_eq!(epf.s_tag, Some(VlanTag { pcp: Some(5), dei: Some(false), vid: Some(101) }));
    let far = &m.create_far[0];
    assert_eq!((far.far_id, far.apply_action), (FarId(6), ApplyAction(ApplyAction::FORW)));
    let fp = far.forwarding_parameters.as_ref().unwrap();
    assert_eq!(fp.destination_interface, DestinationInterface::CORE);
    assert_eq!(fp.network_instance, Some(NetworkInstance::from_name("internet")));
    let ohc = fp.outer_header_creation.unwrap();
    assert_eq!(
        (ohc.description, ohc.teid, ohc.ipv4),
        (OuterHeaderCreation::GTPU_UDP_IPV4, Some(0x1234), Some(Ipv4Addr::new(198, 51, 100, 9)))
    );
    assert_eq!(fp.bbf_outer_header_creation.unwrap().description, BbfOuterHeaderCreation::TRAFFIC_ENDPOINT);
    let urr = &m.create_urr[0];
    assert_eq!(
        (urr.urr_id, urr.measurement_method, urr.reporting_triggers),
        (UrrId(8), MeasurementMethod(MeasurementMethod::VOLUM), Triggers(Triggers::PERIO))
    );
    assert_eq!(urr.measurement_period, Some(MeasurementPeriod(60)));
    let qer = &m.create_qer[0];
    assert_eq!(
        (qer.qer_id, qer.gate_status, qer.mbr),
        (QerId(9), GateStatus { ul: 0, dl: 1 }, Some(BitRate { ul_kbps: 30_000, dl_kbps: 150_000 }))
    );
    let te = &m.create_traffic_endpoint[0];
    assert_eq!(
        (te.traffic_endpoint_id, &te.logical_port, te.mtu),
        (TrafficEndpointId(4), &Some(LogicalPort(b"port-7".to_vec())), Some(Mtu(1492)))
    );
    // A vendor IE of another enterprise is kept raw.
    assert_eq!(m.unknown, vec![RawIe { ie_type: 33000, value: vec![0x7e, 0xd9, 0xbe, 0xef] }]);

    let Message::SessionEstablishmentResponse(h, m) = &msgs["session_establishment_response"] else { panic!() };
    assert_eq!((h.seid, m.cause, m.up_f_seid.unwrap().seid), (0xabc, Cause::REQUEST_ACCEPTED, 0xdef));

    let Message::SessionModificationRequest(h, m) = &msgs["session_modification_request"] else { panic!() };
    assert_eq!((h.seid, h.seq, h.priority), (0xdef, 11, Some(2)));
    assert_eq!(m.remove_pdr[0].pdr_id, PdrId(5));
    assert_eq!((m.update_far[0].far_id, m.update_far[0].apply_action), (FarId(6), Some(ApplyAction(ApplyAction::DROP))));
    assert_eq!(m.update_qer[0].mbr, Some(BitRate { ul_kbps: 1000, dl_kbps: 2000 }));

    let ur_ok = |u: &fastpath_pfcp::group::UsageReport| {
        assert_eq!((u.urr_id, u.ur_seqn, u.usage_report_trigger), (UrrId(8), UrSeqn(3), Triggers(Triggers::PERIO)));
        let v = u.volume_measurement.unwrap();
        assert_eq!((v.total_bytes, v.ul_bytes, v.dl_bytes, v.total_pkts), (Some(3000), Some(1000), Some(2000), None));
        assert_eq!(u.duration_measurement, Some(DurationMeasurement(60)));
    };
    let Message::SessionReportRequest(_, m) = &msgs["session_report_request"] else { panic!() };
    assert_eq!(m.report_type, ReportType(ReportType::USAR));
    ur_ok(&m.usage_report[0]);
    let Message::SessionDeletionResponse(_, m) = &msgs["session_deletion_response"] else { panic!() };
    ur_ok(&m.usage_report[0]);
    let Message::SessionDeletionRequest(h, _) = &msgs["session_deletion_request"] else { panic!() };
    assert_eq!((h.seid, h.seq), (0xdef, 13));
    let Message::SessionReportResponse(_, m) = &msgs["session_report_response"] else { panic!() };
    assert_eq!((m.cause, m.offending_ie), (Cause::MANDATORY_IE_INCORRECT, Some(OffendingIe(ie_type::REPORT_TYPE))));
}

fn run_check(msgs: &[Message]) -> std::process::Output {
    let mut child =
        Command::new(python()).arg(PEER).arg("check").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut input = String::new();
    for (i, m) in msgs.iter().enumerate() {
        let mut b = Vec::new();
        encode(m, &mut b).unwrap();
        input.push_str(&format!("{i} {}\n", b.iter().map(|x| format!("{x:02x}")).collect::<String>()));
    }
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn scapy_parses_what_we_encode() {
    let out = run_check(&samples::all());
    assert!(out.status.success(), "scapy peer failed:\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok 16");
}

/// The peer's assertions can fail: a message with one value changed is rejected.
#[test]
fn scapy_peer_rejects_a_wrong_value() {
    let mut msgs = samples::all();
    let Message::SessionEstablishmentRequest(_, m) = &mut msgs[8] else { panic!() };
    m.create_pdr[0].pdi.logical_port = Some(LogicalPort(b"port-9".to_vec()));
    let out = run_check(&msgs);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("AssertionError"));
}
