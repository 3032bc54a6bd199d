//! Grouped IEs (TS 29.244 clause 7.5 tables), each with the IEs a TR-459 IPoE session uses.
//! Any other IE inside a group is kept raw in `unknown` and written back after the typed
//! ones. Groups nest (a PDI inside a Create PDR, Forwarding Parameters inside a Create FAR).

use crate::bbf::{b, bbf_type as bt, BbfOuterHeaderCreation, BbfOuterHeaderRemoval, LogicalPort, Mtu, PppoeSessionId};
use crate::ie::{ie_type as t, k, *};
use crate::wire::{grouped, ies};

ies! {
    /// PDI (TS 29.244 Table 7.5.2.2-2): what a PDR matches. TR-459 adds the BBF Logical Port.
    pub struct Pdi {
        /// Source Interface (M).
        source_interface: SourceInterface = k(t::SOURCE_INTERFACE),
        /// Network Instance.
        network_instance: Option<NetworkInstance> = k(t::NETWORK_INSTANCE),
        /// UE IP Address(es).
        ue_ip_address: Vec<UeIpAddress> = k(t::UE_IP_ADDRESS),
        /// Traffic Endpoint ID(s).
        traffic_endpoint_id: Vec<TrafficEndpointId> = k(t::TRAFFIC_ENDPOINT_ID),
        /// SDF Filter(s).
        sdf_filter: Vec<SdfFilter> = k(t::SDF_FILTER),
        /// Ethernet Packet Filter(s).
        ethernet_packet_filter: Vec<EthernetPacketFilter> = k(t::ETHERNET_PACKET_FILTER),
        /// BBF Logical Port.
        logical_port: Option<LogicalPort> = b(bt::LOGICAL_PORT),
    }
}

ies! {
    /// Ethernet Packet Filter (TS 29.244 Table 7.5.2.2-3): MAC, tags and Ethertype to match.
    pub struct EthernetPacketFilter {
        /// Ethernet Filter ID.
        ethernet_filter_id: Option<EthernetFilterId> = k(t::ETHERNET_FILTER_ID),
        /// Ethernet Filter Properties.
        ethernet_filter_properties: Option<EthernetFilterProperties> = k(t::ETHERNET_FILTER_PROPERTIES),
        /// MAC address(es).
        mac_address: Vec<MacAddress> = k(t::MAC_ADDRESS),
        /// Ethertype.
        ethertype: Option<Ethertype> = k(t::ETHERTYPE),
        /// C-TAG.
        c_tag: Option<VlanTag> = k(t::C_TAG),
        /// S-TAG.
        s_tag: Option<VlanTag> = k(t::S_TAG),
        /// SDF Filter(s).
        sdf_filter: Vec<SdfFilter> = k(t::SDF_FILTER),
    }
}

ies! {
    /// Create PDR (TS 29.244 Table 7.5.2.2-1). TR-459 adds the BBF Outer Header Removal.
    pub struct CreatePdr {
        /// PDR ID (M).
        pdr_id: PdrId = k(t::PDR_ID),
        /// Precedence (M).
        precedence: Precedence = k(t::PRECEDENCE),
        /// PDI (M).
        pdi: Pdi = k(t::PDI),
        /// Outer Header Removal.
        outer_header_removal: Option<OuterHeaderRemoval> = k(t::OUTER_HEADER_REMOVAL),
        /// FAR ID.
        far_id: Option<FarId> = k(t::FAR_ID),
        /// URR ID(s).
        urr_id: Vec<UrrId> = k(t::URR_ID),
        /// QER ID(s).
        qer_id: Vec<QerId> = k(t::QER_ID),
        /// BBF Outer Header Removal.
        bbf_outer_header_removal: Option<BbfOuterHeaderRemoval> = b(bt::OUTER_HEADER_REMOVAL),
    }
}

ies! {
    /// Update PDR (TS 29.244 Table 7.5.4.2-1).
    pub struct UpdatePdr {
        /// PDR ID (M).
        pdr_id: PdrId = k(t::PDR_ID),
        /// Outer Header Removal.
        outer_header_removal: Option<OuterHeaderRemoval> = k(t::OUTER_HEADER_REMOVAL),
        /// Precedence.
        precedence: Option<Precedence> = k(t::PRECEDENCE),
        /// PDI.
        pdi: Option<Pdi> = k(t::PDI),
        /// FAR ID.
        far_id: Option<FarId> = k(t::FAR_ID),
        /// URR ID(s).
        urr_id: Vec<UrrId> = k(t::URR_ID),
        /// QER ID(s).
        qer_id: Vec<QerId> = k(t::QER_ID),
        /// BBF Outer Header Removal.
        bbf_outer_header_removal: Option<BbfOuterHeaderRemoval> = b(bt::OUTER_HEADER_REMOVAL),
    }
}

ies! {
    /// PFCP Session Retention Information (TS 29.244 Table 7.4.4.1-2), in an Association Setup
    /// Request: the CP function asks the UP function to keep the PFCP sessions of the former
    /// association with this Node ID (clause 6.2.6.2.2). Its only IE, CP PFCP Entity IP
    /// Address (optional), is kept raw.
    pub struct PfcpSessionRetentionInformation {
    }
}

ies! {
    /// Remove PDR (TS 29.244 Table 7.5.4.6-1).
    pub struct RemovePdr {
        /// PDR ID (M).
        pdr_id: PdrId = k(t::PDR_ID),
    }
}

ies! {
    /// Forwarding Parameters (TS 29.244 Table 7.5.2.3-2). TR-459 adds the BBF Outer Header
    /// Creation and the egress Logical Port.
    pub struct ForwardingParameters {
        /// Destination Interface (M).
        destination_interface: DestinationInterface = k(t::DESTINATION_INTERFACE),
        /// Network Instance.
        network_instance: Option<NetworkInstance> = k(t::NETWORK_INSTANCE),
        /// Outer Header Creation.
        outer_header_creation: Option<OuterHeaderCreation> = k(t::OUTER_HEADER_CREATION),
        /// BBF Outer Header Creation.
        bbf_outer_header_creation: Option<BbfOuterHeaderCreation> = b(bt::OUTER_HEADER_CREATION),
        /// BBF Logical Port.
        logical_port: Option<LogicalPort> = b(bt::LOGICAL_PORT),
    }
}

ies! {
    /// Update Forwarding Parameters (TS 29.244 Table 7.5.4.3-2).
    pub struct UpdateForwardingParameters {
        /// Destination Interface.
        destination_interface: Option<DestinationInterface> = k(t::DESTINATION_INTERFACE),
        /// Network Instance.
        network_instance: Option<NetworkInstance> = k(t::NETWORK_INSTANCE),
        /// Outer Header Creation.
        outer_header_creation: Option<OuterHeaderCreation> = k(t::OUTER_HEADER_CREATION),
        /// BBF Outer Header Creation.
        bbf_outer_header_creation: Option<BbfOuterHeaderCreation> = b(bt::OUTER_HEADER_CREATION),
        /// BBF Logical Port.
        logical_port: Option<LogicalPort> = b(bt::LOGICAL_PORT),
    }
}

ies! {
    /// Create FAR (TS 29.244 Table 7.5.2.3-1).
    pub struct CreateFar {
        /// FAR ID (M).
        far_id: FarId = k(t::FAR_ID),
        /// Apply Action (M).
        apply_action: ApplyAction = k(t::APPLY_ACTION),
        /// Forwarding Parameters (C: when forwarding).
        forwarding_parameters: Option<ForwardingParameters> = k(t::FORWARDING_PARAMETERS),
    }
}

ies! {
    /// Update FAR (TS 29.244 Table 7.5.4.3-1).
    pub struct UpdateFar {
        /// FAR ID (M).
        far_id: FarId = k(t::FAR_ID),
        /// Apply Action.
        apply_action: Option<ApplyAction> = k(t::APPLY_ACTION),
        /// Update Forwarding Parameters.
        update_forwarding_parameters: Option<UpdateForwardingParameters> = k(t::UPDATE_FORWARDING_PARAMETERS),
    }
}

ies! {
    /// Remove FAR (TS 29.244 Table 7.5.4.7-1).
    pub struct RemoveFar {
        /// FAR ID (M).
        far_id: FarId = k(t::FAR_ID),
    }
}

ies! {
    /// Create QER (TS 29.244 Table 7.5.2.5-1).
    pub struct CreateQer {
        /// QER ID (M).
        qer_id: QerId = k(t::QER_ID),
        /// Gate Status (M).
        gate_status: GateStatus = k(t::GATE_STATUS),
        /// Maximum Bitrate.
        mbr: Option<BitRate> = k(t::MBR),
        /// Guaranteed Bitrate.
        gbr: Option<BitRate> = k(t::GBR),
    }
}

ies! {
    /// Update QER (TS 29.244 Table 7.5.4.5-1).
    pub struct UpdateQer {
        /// QER ID (M).
        qer_id: QerId = k(t::QER_ID),
        /// Gate Status.
        gate_status: Option<GateStatus> = k(t::GATE_STATUS),
        /// Maximum Bitrate.
        mbr: Option<BitRate> = k(t::MBR),
        /// Guaranteed Bitrate.
        gbr: Option<BitRate> = k(t::GBR),
    }
}

ies! {
    /// Remove QER (TS 29.244 Table 7.5.4.9-1).
    pub struct RemoveQer {
        /// QER ID (M).
        qer_id: QerId = k(t::QER_ID),
    }
}

ies! {
    /// Create URR (TS 29.244 Table 7.5.2.4-1).
    pub struct CreateUrr {
        /// URR ID (M).
        urr_id: UrrId = k(t::URR_ID),
        /// Measurement Method (M).
        measurement_method: MeasurementMethod = k(t::MEASUREMENT_METHOD),
        /// Reporting Triggers (M).
        reporting_triggers: Triggers = k(t::REPORTING_TRIGGERS),
        /// Measurement Period (C: when PERIO is set).
        measurement_period: Option<MeasurementPeriod> = k(t::MEASUREMENT_PERIOD),
    }
}

ies! {
    /// Update URR (TS 29.244 Table 7.5.4.4-1).
    pub struct UpdateUrr {
        /// URR ID (M).
        urr_id: UrrId = k(t::URR_ID),
        /// Measurement Method.
        measurement_method: Option<MeasurementMethod> = k(t::MEASUREMENT_METHOD),
        /// Reporting Triggers.
        reporting_triggers: Option<Triggers> = k(t::REPORTING_TRIGGERS),
        /// Measurement Period.
        measurement_period: Option<MeasurementPeriod> = k(t::MEASUREMENT_PERIOD),
    }
}

ies! {
    /// Remove URR (TS 29.244 Table 7.5.4.8-1).
    pub struct RemoveUrr {
        /// URR ID (M).
        urr_id: UrrId = k(t::URR_ID),
    }
}

ies! {
    /// Create Traffic Endpoint (TS 29.244 Table 7.5.2.7-1): a subscriber's access side. TR-459
    /// puts the Logical Port, the MAC address and the tags here, and the PDRs and FARs refer
    /// to the endpoint by its ID.
    pub struct CreateTrafficEndpoint {
        /// Traffic Endpoint ID (M).
        traffic_endpoint_id: TrafficEndpointId = k(t::TRAFFIC_ENDPOINT_ID),
        /// Network Instance.
        network_instance: Option<NetworkInstance> = k(t::NETWORK_INSTANCE),
        /// UE IP Address(es).
        ue_ip_address: Vec<UeIpAddress> = k(t::UE_IP_ADDRESS),
        /// MAC address.
        mac_address: Option<MacAddress> = k(t::MAC_ADDRESS),
        /// C-TAG.
        c_tag: Option<VlanTag> = k(t::C_TAG),
        /// S-TAG.
        s_tag: Option<VlanTag> = k(t::S_TAG),
        /// BBF Logical Port.
        logical_port: Option<LogicalPort> = b(bt::LOGICAL_PORT),
        /// BBF PPPoE Session ID.
        pppoe_session_id: Option<PppoeSessionId> = b(bt::PPPOE_SESSION_ID),
        /// BBF MTU.
        mtu: Option<Mtu> = b(bt::MTU),
    }
}

ies! {
    /// Update Traffic Endpoint (TS 29.244 Table 7.5.4.13-1).
    pub struct UpdateTrafficEndpoint {
        /// Traffic Endpoint ID (M).
        traffic_endpoint_id: TrafficEndpointId = k(t::TRAFFIC_ENDPOINT_ID),
        /// Network Instance.
        network_instance: Option<NetworkInstance> = k(t::NETWORK_INSTANCE),
        /// UE IP Address(es).
        ue_ip_address: Vec<UeIpAddress> = k(t::UE_IP_ADDRESS),
        /// MAC address.
        mac_address: Option<MacAddress> = k(t::MAC_ADDRESS),
        /// C-TAG.
        c_tag: Option<VlanTag> = k(t::C_TAG),
        /// S-TAG.
        s_tag: Option<VlanTag> = k(t::S_TAG),
        /// BBF Logical Port.
        logical_port: Option<LogicalPort> = b(bt::LOGICAL_PORT),
        /// BBF PPPoE Session ID.
        pppoe_session_id: Option<PppoeSessionId> = b(bt::PPPOE_SESSION_ID),
        /// BBF MTU.
        mtu: Option<Mtu> = b(bt::MTU),
    }
}

ies! {
    /// Remove Traffic Endpoint (TS 29.244 Table 7.5.4.14-1).
    pub struct RemoveTrafficEndpoint {
        /// Traffic Endpoint ID (M).
        traffic_endpoint_id: TrafficEndpointId = k(t::TRAFFIC_ENDPOINT_ID),
    }
}

ies! {
    /// Usage Report (TS 29.244 Tables 7.5.5.2-1, 7.5.7.2-1 and 7.5.8.3-1: the same contents
    /// under IE types 78, 79 and 80).
    pub struct UsageReport {
        /// URR ID (M).
        urr_id: UrrId = k(t::URR_ID),
        /// UR-SEQN (M).
        ur_seqn: UrSeqn = k(t::UR_SEQN),
        /// Usage Report Trigger (M).
        usage_report_trigger: Triggers = k(t::USAGE_REPORT_TRIGGER),
        /// Start Time.
        start_time: Option<StartTime> = k(t::START_TIME),
        /// End Time.
        end_time: Option<EndTime> = k(t::END_TIME),
        /// Volume Measurement.
        volume_measurement: Option<VolumeMeasurement> = k(t::VOLUME_MEASUREMENT),
        /// Duration Measurement.
        duration_measurement: Option<DurationMeasurement> = k(t::DURATION_MEASUREMENT),
    }
}

grouped!(
    PfcpSessionRetentionInformation,
    Pdi,
    EthernetPacketFilter,
    CreatePdr,
    UpdatePdr,
    RemovePdr,
    ForwardingParameters,
    UpdateForwardingParameters,
    CreateFar,
    UpdateFar,
    RemoveFar,
    CreateQer,
    UpdateQer,
    RemoveQer,
    CreateUrr,
    UpdateUrr,
    RemoveUrr,
    CreateTrafficEndpoint,
    UpdateTrafficEndpoint,
    RemoveTrafficEndpoint,
    UsageReport,
);
