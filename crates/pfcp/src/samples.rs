//! One populated message of every kind this codec types: a TR-459 IPoE subscriber session
//! (S-VLAN 100 / C-VLAN 200, MAC 02:00:00:00:00:01, 100.64.0.1 on logical port "port-1"),
//! its association and its usage reports. The round-trip, tshark, scapy and fuzz tests use
//! them (as seeds), and they show how a control plane fills the structs.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::bbf::*;
use crate::group::*;
use crate::ie::*;
use crate::message::*;
use crate::wire::RawIe;

/// The control plane's Node ID.
pub const CP_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The user plane's Node ID.
pub const UP_ADDR: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// The subscriber's address.
pub const UE_ADDR: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 1);
/// The subscriber's MAC address.
pub const UE_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// Recovery Time Stamp: 2026-01-01T00:00:00Z in NTP seconds.
pub const RECOVERY: u32 = 3_976_214_400;

fn node(seq: u32) -> NodeHeader {
    NodeHeader { seq }
}

fn session(seid: u64, seq: u32) -> SessionHeader {
    SessionHeader { seid, seq, priority: Some(3) }
}

fn tag(vid: u16, pcp: u8) -> VlanTag {
    VlanTag { pcp: Some(pcp), dei: Some(false), vid: Some(vid) }
}

/// The access side of the subscriber: Traffic Endpoint 1.
pub fn traffic_endpoint() -> CreateTrafficEndpoint {
    CreateTrafficEndpoint {
        traffic_endpoint_id: TrafficEndpointId(1),
        network_instance: Some(NetworkInstance::from_name("access")),
        ue_ip_address: vec![UeIpAddress { ipv4: Some(UE_ADDR), ..Default::default() }],
        mac_address: Some(MacAddress { source: Some(UE_MAC), ..Default::default() }),
        c_tag: Some(tag(200, 0)),
        s_tag: Some(tag(100, 5)),
        logical_port: Some(LogicalPort(b"port-1".to_vec())),
        pppoe_session_id: None,
        mtu: Some(Mtu(1500)),
        unknown: vec![],
    }
}

/// PDR 1: upstream data, anti-spoofing match on port, tags, MAC and source IP; strips the
/// Ethernet and VLAN headers.
pub fn pdr_up() -> CreatePdr {
    CreatePdr {
        pdr_id: PdrId(1),
        precedence: Precedence(100),
        pdi: Pdi {
            source_interface: SourceInterface::ACCESS,
            network_instance: Some(NetworkInstance::from_name("access")),
            ue_ip_address: vec![UeIpAddress { ipv4: Some(UE_ADDR), ..Default::default() }],
            traffic_endpoint_id: vec![TrafficEndpointId(1)],
            sdf_filter: vec![SdfFilter {
                flow_description: Some(b"permit out ip from any to assigned".to_vec()),
                sdf_filter_id: Some(7),
                ..Default::default()
            }],
            ethernet_packet_filter: vec![EthernetPacketFilter {
                ethernet_filter_id: Some(EthernetFilterId(11)),
                ethernet_filter_properties: Some(EthernetFilterProperties(1)),
                mac_address: vec![MacAddress { source: Some(UE_MAC), ..Default::default() }],
                ethertype: Some(Ethertype(0x0800)),
                c_tag: Some(tag(200, 0)),
                s_tag: Some(tag(100, 5)),
                sdf_filter: vec![],
                unknown: vec![],
            }],
            logical_port: Some(LogicalPort(b"port-1".to_vec())),
            unknown: vec![],
        },
        outer_header_removal: Some(OuterHeaderRemoval {
            description: OuterHeaderRemoval::S_TAG_AND_C_TAG,
            gtpu_extension_header_deletion: None,
        }),
        far_id: Some(FarId(1)),
        urr_id: vec![UrrId(1)],
        qer_id: vec![QerId(1)],
        bbf_outer_header_removal: Some(BbfOuterHeaderRemoval::ETHERNET),
        unknown: vec![],
    }
}

/// PDR 2: downstream data to the subscriber's address.
pub fn pdr_down() -> CreatePdr {
    CreatePdr {
        pdr_id: PdrId(2),
        precedence: Precedence(100),
        pdi: Pdi {
            source_interface: SourceInterface::CORE,
            network_instance: Some(NetworkInstance::from_name("internet")),
            ue_ip_address: vec![UeIpAddress { ipv4: Some(UE_ADDR), destination: true, ..Default::default() }],
            ..Default::default()
        },
        far_id: Some(FarId(2)),
        urr_id: vec![UrrId(1)],
        qer_id: vec![QerId(1)],
        ..Default::default()
    }
}

/// FAR 1: upstream to the core.
pub fn far_up() -> CreateFar {
    CreateFar {
        far_id: FarId(1),
        apply_action: ApplyAction(ApplyAction::FORW),
        forwarding_parameters: Some(ForwardingParameters {
            destination_interface: DestinationInterface::CORE,
            network_instance: Some(NetworkInstance::from_name("internet")),
            ..Default::default()
        }),
        unknown: vec![],
    }
}

/// FAR 2: downstream to the access port, rebuilding the subscriber's Ethernet and Q-in-Q
/// headers from Traffic Endpoint 1.
pub fn far_down() -> CreateFar {
    CreateFar {
        far_id: FarId(2),
        apply_action: ApplyAction(ApplyAction::FORW),
        forwarding_parameters: Some(ForwardingParameters {
            destination_interface: DestinationInterface::ACCESS,
            network_instance: Some(NetworkInstance::from_name("access")),
            outer_header_creation: None,
            bbf_outer_header_creation: Some(BbfOuterHeaderCreation {
                description: BbfOuterHeaderCreation::TRAFFIC_ENDPOINT,
                tunnel_id: 0,
                session_id: 0,
            }),
            logical_port: Some(LogicalPort(b"port-1".to_vec())),
            unknown: vec![],
        }),
        unknown: vec![],
    }
}

/// FAR 3: control packets (DHCP) to the control plane over GTP-U (CPRi).
pub fn far_cp() -> CreateFar {
    CreateFar {
        far_id: FarId(3),
        apply_action: ApplyAction(ApplyAction::FORW),
        forwarding_parameters: Some(ForwardingParameters {
            destination_interface: DestinationInterface::CP_FUNCTION,
            outer_header_creation: Some(OuterHeaderCreation {
                description: OuterHeaderCreation::GTPU_UDP_IPV4,
                teid: Some(0x0000_1001),
                ipv4: Some(CP_ADDR),
                ..Default::default()
            }),
            ..Default::default()
        }),
        unknown: vec![],
    }
}

/// QER 1: the subscriber's tier, 100 Mbit/s down, 20 Mbit/s up.
pub fn qer() -> CreateQer {
    CreateQer {
        qer_id: QerId(1),
        gate_status: GateStatus::OPEN,
        mbr: Some(BitRate { ul_kbps: 20_000, dl_kbps: 100_000 }),
        gbr: Some(BitRate { ul_kbps: 1_000, dl_kbps: 2_000 }),
        unknown: vec![],
    }
}

/// URR 1: volume, reported every 300 s.
pub fn urr() -> CreateUrr {
    CreateUrr {
        urr_id: UrrId(1),
        measurement_method: MeasurementMethod(MeasurementMethod::VOLUM | MeasurementMethod::DURAT),
        reporting_triggers: Triggers(Triggers::PERIO),
        measurement_period: Some(MeasurementPeriod(300)),
        unknown: vec![],
    }
}

/// A usage report for URR 1.
pub fn usage_report(trigger: u32) -> UsageReport {
    UsageReport {
        urr_id: UrrId(1),
        ur_seqn: UrSeqn(4),
        usage_report_trigger: Triggers(trigger),
        start_time: Some(StartTime(RECOVERY + 60)),
        end_time: Some(EndTime(RECOVERY + 360)),
        volume_measurement: Some(VolumeMeasurement {
            total_bytes: Some(1_500_000),
            ul_bytes: Some(500_000),
            dl_bytes: Some(1_000_000),
            total_pkts: Some(1500),
            ul_pkts: Some(600),
            dl_pkts: Some(900),
        }),
        duration_measurement: Some(DurationMeasurement(300)),
        unknown: vec![],
    }
}

/// One message of every kind, in the order a session's life sends them.
pub fn all() -> Vec<Message> {
    let bbf = Some(BbfUpFunctionFeatures(BbfUpFunctionFeatures::IPOE));
    vec![
        Message::HeartbeatRequest(node(1), HeartbeatRequest { recovery_time_stamp: RecoveryTimeStamp(RECOVERY), unknown: vec![] }),
        Message::HeartbeatResponse(node(1), HeartbeatResponse { recovery_time_stamp: RecoveryTimeStamp(RECOVERY + 5), unknown: vec![] }),
        Message::AssociationSetupRequest(
            node(2),
            AssociationSetupRequest {
                node_id: NodeId::Ipv4(UP_ADDR),
                recovery_time_stamp: RecoveryTimeStamp(RECOVERY),
                up_function_features: Some(UpFunctionFeatures(vec![0x10, 0x00])),
                cp_function_features: None,
                bbf_up_function_features: bbf,
                // CP PFCP Entity IP Address (clause 8.2.150): V4 flag, 192.0.2.1.
                pfcp_session_retention_information: Some(PfcpSessionRetentionInformation {
                    unknown: vec![RawIe { ie_type: 185, value: vec![0x02, 192, 0, 2, 1] }],
                }),
                unknown: vec![],
            },
        ),
        Message::AssociationSetupResponse(
            node(2),
            AssociationSetupResponse {
                node_id: NodeId::Fqdn("cp1.bng.example".into()),
                cause: Cause::REQUEST_ACCEPTED,
                recovery_time_stamp: RecoveryTimeStamp(RECOVERY + 5),
                up_function_features: None,
                cp_function_features: Some(CpFunctionFeatures(vec![0x01])),
                bbf_up_function_features: None,
                pfcpasrsp_flags: Some(PfcpasRspFlags(PfcpasRspFlags::PSREI)),
                unknown: vec![],
            },
        ),
        Message::AssociationUpdateRequest(
            node(3),
            AssociationUpdateRequest {
                node_id: NodeId::Ipv6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
                up_function_features: Some(UpFunctionFeatures(vec![0x10, 0x00])),
                cp_function_features: None,
                association_release_request: Some(PfcpAssociationReleaseRequest(PfcpAssociationReleaseRequest::SARR)),
                graceful_release_period: Some(Timer { unit: 1, value: 5 }),
                bbf_up_function_features: bbf,
                unknown: vec![],
            },
        ),
        Message::AssociationUpdateResponse(
            node(3),
            AssociationUpdateResponse { node_id: NodeId::Ipv4(CP_ADDR), cause: Cause::REQUEST_ACCEPTED, ..Default::default() },
        ),
        Message::AssociationReleaseRequest(node(4), AssociationReleaseRequest { node_id: NodeId::Ipv4(CP_ADDR), unknown: vec![] }),
        Message::AssociationReleaseResponse(
            node(4),
            AssociationReleaseResponse { node_id: NodeId::Ipv4(UP_ADDR), cause: Cause::REQUEST_ACCEPTED, unknown: vec![] },
        ),
        Message::SessionEstablishmentRequest(
            session(0, 10),
            SessionEstablishmentRequest {
                node_id: NodeId::Ipv4(CP_ADDR),
                cp_f_seid: FSeid { seid: 0x1000, ipv4: Some(CP_ADDR), ipv6: None },
                create_pdr: vec![pdr_up(), pdr_down()],
                create_far: vec![far_up(), far_down(), far_cp()],
                create_urr: vec![urr()],
                create_qer: vec![qer()],
                create_traffic_endpoint: vec![traffic_endpoint()],
                unknown: vec![],
            },
        ),
        Message::SessionEstablishmentResponse(
            session(0x1000, 10),
            SessionEstablishmentResponse {
                node_id: NodeId::Ipv4(UP_ADDR),
                cause: Cause::REQUEST_ACCEPTED,
                offending_ie: None,
                up_f_seid: Some(FSeid { seid: 0x2000, ipv4: Some(UP_ADDR), ipv6: None }),
                unknown: vec![],
            },
        ),
        Message::SessionModificationRequest(
            session(0x2000, 11),
            SessionModificationRequest {
                remove_pdr: vec![RemovePdr { pdr_id: PdrId(2), unknown: vec![] }],
                remove_far: vec![RemoveFar { far_id: FarId(3), unknown: vec![] }],
                remove_urr: vec![RemoveUrr { urr_id: UrrId(9), unknown: vec![] }],
                remove_qer: vec![RemoveQer { qer_id: QerId(9), unknown: vec![] }],
                remove_traffic_endpoint: vec![RemoveTrafficEndpoint { traffic_endpoint_id: TrafficEndpointId(2), unknown: vec![] }],
                update_traffic_endpoint: vec![UpdateTrafficEndpoint {
                    traffic_endpoint_id: TrafficEndpointId(1),
                    ue_ip_address: vec![UeIpAddress { ipv4: Some(Ipv4Addr::new(100, 64, 0, 9)), ..Default::default() }],
                    logical_port: Some(LogicalPort(b"port-2".to_vec())),
                    ..Default::default()
                }],
                update_pdr: vec![UpdatePdr {
                    pdr_id: PdrId(1),
                    precedence: Some(Precedence(50)),
                    far_id: Some(FarId(1)),
                    ..Default::default()
                }],
                update_far: vec![UpdateFar {
                    far_id: FarId(2),
                    apply_action: Some(ApplyAction(ApplyAction::DROP)),
                    update_forwarding_parameters: Some(UpdateForwardingParameters {
                        destination_interface: Some(DestinationInterface::ACCESS),
                        logical_port: Some(LogicalPort(b"port-2".to_vec())),
                        ..Default::default()
                    }),
                    unknown: vec![],
                }],
                update_urr: vec![UpdateUrr { urr_id: UrrId(1), measurement_period: Some(MeasurementPeriod(600)), ..Default::default() }],
                update_qer: vec![UpdateQer {
                    qer_id: QerId(1),
                    gate_status: Some(GateStatus { ul: 1, dl: 0 }),
                    mbr: Some(BitRate { ul_kbps: 50_000, dl_kbps: 250_000 }),
                    gbr: None,
                    unknown: vec![],
                }],
                ..Default::default()
            },
        ),
        Message::SessionModificationResponse(
            session(0x1000, 11),
            SessionModificationResponse {
                cause: Cause::REQUEST_ACCEPTED,
                offending_ie: None,
                usage_report: vec![usage_report(Triggers::PERIO)],
                unknown: vec![],
            },
        ),
        Message::SessionDeletionRequest(session(0x2000, 12), SessionDeletionRequest { unknown: vec![] }),
        Message::SessionDeletionResponse(
            session(0x1000, 12),
            SessionDeletionResponse {
                cause: Cause::REQUEST_ACCEPTED,
                offending_ie: None,
                usage_report: vec![usage_report(Triggers::TERMR)],
                unknown: vec![],
            },
        ),
        Message::SessionReportRequest(
            session(0x1000, 13),
            SessionReportRequest {
                report_type: ReportType(ReportType::USAR),
                usage_report: vec![usage_report(Triggers::PERIO)],
                // A vendor IE of another enterprise (32473, the IANA number for documentation) rides
                // along raw.
                unknown: vec![RawIe { ie_type: 32770, value: vec![0x7e, 0xd9, 0xde, 0xad] }],
            },
        ),
        Message::SessionReportResponse(
            session(0x2000, 13),
            SessionReportResponse {
                cause: Cause::MANDATORY_IE_MISSING,
                offending_ie: Some(OffendingIe(ie_type::REPORT_TYPE)),
                unknown: vec![],
            },
        ),
    ]
}
