//! tshark interop: every sample message (one of each kind, BBF IEs included) is encoded,
//! wrapped in UDP 8805 / IPv4 / Ethernet, written to a pcap, and decoded by tshark 4.0's PFCP
//! dissector, an implementation independent of ours. Every field we set must come back with
//! the value we set, and tshark must report nothing malformed and no warning- or error-level
//! expert item.
//!
//! tshark is installed by `scripts/test`; without it this test fails (it does not skip).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use fastpath_pfcp::{encode, samples, Message};

mod common;

use common::{ip_udp, write_pcap};

/// One frame: Ethernet II, IPv4 (checksummed), UDP 8805 → 8805 (checksummed), PFCP.
fn frame(pfcp: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00]; // dst, src, IPv4
    f.extend_from_slice(&ip_udp([192, 0, 2, 2], [192, 0, 2, 1], 8805, 8805, pfcp));
    f
}

fn pcap_of_samples(name: &str) -> (PathBuf, Vec<Message>) {
    let msgs = samples::all();
    let frames: Vec<Vec<u8>> = msgs
        .iter()
        .map(|m| {
            let mut b = Vec::new();
            encode(m, &mut b).unwrap();
            frame(&b)
        })
        .collect();
    // One directory per test (they run in parallel), removed by the test when it passes.
    let dir = std::env::temp_dir().join(format!("fastpath-pfcp-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    write_pcap(&path, &frames);
    (path, msgs)
}

/// Runs tshark with checksum validation on and returns, per frame number, each field's
/// values (all occurrences, in order).
fn tshark_fields(pcap: &Path, fields: &[&str]) -> BTreeMap<usize, BTreeMap<String, Vec<String>>> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(pcap);
    cmd.args(["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"]);
    cmd.args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|", "-E", "separator=\t", "-e", "frame.number"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("tshark must be installed (scripts/test installs it)");
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut frames = BTreeMap::new();
    for line in text.lines() {
        let mut cols = line.split('\t');
        let n: usize = cols.next().unwrap().parse().unwrap();
        let mut per = BTreeMap::new();
        for (f, v) in fields.iter().zip(cols) {
            let vals: Vec<String> = if v.is_empty() { vec![] } else { v.split('|').map(str::to_string).collect() };
            per.insert(f.to_string(), vals);
        }
        frames.insert(n, per);
    }
    frames
}

/// What tshark should show for one message: (field, value as `tshark -T fields` prints it).
#[derive(Default)]
struct Expect(Vec<(&'static str, String)>);

impl Expect {
    fn push(&mut self, f: &'static str, v: impl ToString) {
        self.0.push((f, v.to_string()));
    }
    fn opt<T: ToString>(&mut self, f: &'static str, v: Option<T>) {
        if let Some(v) = v {
            self.push(f, v);
        }
    }
    fn flags(&mut self, byte: u8, names: [&'static str; 8]) {
        for (i, n) in names.iter().enumerate() {
            if !n.is_empty() {
                self.push(n, (byte >> i) & 1);
            }
        }
    }
}

/// NTP seconds as tshark prints an absolute time in UTC, e.g. "Jan  1, 2026 00:00:00.000000000 UTC".
fn ntp_time(ntp: u32) -> String {
    let unix = i64::from(ntp) - 2_208_988_800;
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let mon = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][(m - 1) as usize];
    format!("{mon} {d:>2}, {y} {:02}:{:02}:{:02}.000000000 UTC", secs / 3600, secs / 60 % 60, secs % 60)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

mod walk {
    use super::{hex, ntp_time, Expect};
    use fastpath_pfcp::bbf::*;
    use fastpath_pfcp::group::*;
    use fastpath_pfcp::ie::*;
    use fastpath_pfcp::RawIe;

    pub fn node_id(e: &mut Expect, n: &NodeId) {
        match n {
            NodeId::Ipv4(a) => e.push("pfcp.node_id_ipv4", a),
            NodeId::Ipv6(a) => e.push("pfcp.node_id_ipv6", a),
            NodeId::Fqdn(s) => e.push("pfcp.node_id_fqdn", s),
        }
    }
    pub fn recovery(e: &mut Expect, r: &RecoveryTimeStamp) {
        e.push("pfcp.recovery_time_stamp", ntp_time(r.0));
    }
    pub fn up_features(e: &mut Expect, f: &Option<UpFunctionFeatures>) {
        let Some(f) = f else { return };
        e.flags(
            f.0[0],
            [
                "pfcp.up_function_features.bucp",
                "pfcp.up_function_features.ddnd",
                "pfcp.up_function_features.dlbd",
                "pfcp.up_function_features.trst",
                "pfcp.up_function_features.ftup",
                "pfcp.up_function_features.pfdm",
                "pfcp.up_function_features.heeu",
                "pfcp.up_function_features.treu",
            ],
        );
        e.flags(
            f.0[1],
            [
                "pfcp.up_function_features.empu",
                "pfcp.up_function_features.pdiu",
                "pfcp.up_function_features.udbc",
                "pfcp.up_function_features.quoac",
                "pfcp.up_function_features.trace",
                "pfcp.up_function_features.frrt",
                "pfcp.up_function_features.pfde",
                "pfcp.up_function_features.epfar",
            ],
        );
    }
    pub fn cp_features(e: &mut Expect, f: &Option<CpFunctionFeatures>) {
        let Some(f) = f else { return };
        e.flags(
            f.0[0],
            [
                "pfcp.cp_function_features.load",
                "pfcp.cp_function_features.ovrl",
                "pfcp.cp_function_features.epfar",
                "pfcp.cp_function_features.sset",
                "pfcp.cp_function_features.bundl",
                "pfcp.cp_function_features.mpas",
                "pfcp.cp_function_features.ardr",
                "pfcp.cp_function_features.uiaur",
            ],
        );
    }
    pub fn bbf_features(e: &mut Expect, f: &Option<BbfUpFunctionFeatures>) {
        let Some(f) = f else { return };
        e.flags(
            f.0.to_be_bytes()[0],
            [
                "pfcp.bbf.up_function_features.pppoe",
                "pfcp.bbf.up_function_features.ipoe",
                "pfcp.bbf.up_function_features.lac",
                "pfcp.bbf.up_function_features.lns",
                "pfcp.bbf.up_function_features.lcp_keepalive_offload",
                "",
                "",
                "",
            ],
        );
        e.push("pfcp.enterprise_id", ENTERPRISE_BBF);
    }
    pub fn f_seid(e: &mut Expect, f: &FSeid) {
        e.push("pfcp.seid", format!("0x{:016x}", f.seid));
        e.opt("pfcp.f_seid.ipv4", f.ipv4);
        e.opt("pfcp.f_seid.ipv6", f.ipv6);
    }
    pub fn logical_port(e: &mut Expect, p: &Option<LogicalPort>) {
        if let Some(p) = p {
            e.push("pfcp.bbf.logical_port_id_str", String::from_utf8_lossy(&p.0));
            e.push("pfcp.enterprise_id", ENTERPRISE_BBF);
        }
    }
    pub fn ni(e: &mut Expect, n: &Option<NetworkInstance>) {
        if let Some(n) = n {
            e.push("pfcp.network_instance", n.name());
        }
    }
    pub fn ue_ip(e: &mut Expect, u: &UeIpAddress) {
        e.opt("pfcp.ue_ip_addr_ipv4", u.ipv4);
        e.opt("pfcp.ue_ip_addr_ipv6", u.ipv6);
        e.push("pfcp.ue_ip_address_flag.sd", u8::from(u.destination));
    }
    pub fn mac(e: &mut Expect, m: &MacAddress) {
        e.opt("pfcp.mac_address.sour", m.source.map(|m| hex(&m)));
        e.opt("pfcp.mac_address.dest", m.destination.map(|m| hex(&m)));
    }
    pub fn tag(e: &mut Expect, t: &Option<VlanTag>, c: bool) {
        let Some(t) = t else { return };
        let (vid, pcp, dei) = if c {
            ("pfcp.c_tag.cvid", "pfcp.c_tag.pcp", "pfcp.c_tag.dei_flag")
        } else {
            ("pfcp.s_tag.svid", "pfcp.s_tag.pcp", "pfcp.s_tag.dei_flag")
        };
        e.opt(vid, t.vid.map(|v| format!("0x{v:04x}")));
        e.opt(pcp, t.pcp);
        e.opt(dei, t.dei.map(u8::from));
    }
    pub fn sdf(e: &mut Expect, s: &SdfFilter) {
        e.opt("pfcp.flow_desc", s.flow_description.as_ref().map(|d| String::from_utf8_lossy(d).into_owned()));
        e.opt("pfcp.sdf_filter_id", s.sdf_filter_id);
    }
    pub fn pdi(e: &mut Expect, p: &Pdi) {
        e.push("pfcp.source_interface", p.source_interface.0);
        ni(e, &p.network_instance);
        p.ue_ip_address.iter().for_each(|u| ue_ip(e, u));
        p.traffic_endpoint_id.iter().for_each(|t| e.push("pfcp.traffic_endpoint_id", t.0));
        p.sdf_filter.iter().for_each(|s| sdf(e, s));
        for f in &p.ethernet_packet_filter {
            e.opt("pfcp.ethertype_filter_id", f.ethernet_filter_id.map(|v| v.0));
            e.opt("pfcp.ethertype_filter_properties.flags.bide", f.ethernet_filter_properties.map(|v| v.0 & 1));
            f.mac_address.iter().for_each(|m| mac(e, m));
            e.opt("pfcp.ethertype", f.ethertype.map(|t| format!("0x{:04x}", t.0)));
            tag(e, &f.c_tag, true);
            tag(e, &f.s_tag, false);
        }
        logical_port(e, &p.logical_port);
    }
    fn pdr_common(
        e: &mut Expect,
        ohr: &Option<OuterHeaderRemoval>,
        far: &Option<FarId>,
        urr: &[UrrId],
        qer: &[QerId],
        bbf: &Option<BbfOuterHeaderRemoval>,
    ) {
        e.opt("pfcp.out_hdr_desc", ohr.map(|o| o.description));
        e.opt("pfcp.far_id", far.map(|f| f.0));
        urr.iter().for_each(|u| e.push("pfcp.urr_id", u.0));
        qer.iter().for_each(|q| e.push("pfcp.qer_id", q.0));
        e.opt("pfcp.bbf.out_hdr_desc", bbf.map(|b| b.0));
    }
    pub fn create_pdr(e: &mut Expect, p: &CreatePdr) {
        e.push("pfcp.pdr_id", p.pdr_id.0);
        e.push("pfcp.precedence", p.precedence.0);
        pdi(e, &p.pdi);
        pdr_common(e, &p.outer_header_removal, &p.far_id, &p.urr_id, &p.qer_id, &p.bbf_outer_header_removal);
    }
    pub fn update_pdr(e: &mut Expect, p: &UpdatePdr) {
        e.push("pfcp.pdr_id", p.pdr_id.0);
        e.opt("pfcp.precedence", p.precedence.map(|v| v.0));
        if let Some(p) = &p.pdi {
            pdi(e, p);
        }
        pdr_common(e, &p.outer_header_removal, &p.far_id, &p.urr_id, &p.qer_id, &p.bbf_outer_header_removal);
    }
    pub fn apply_action(e: &mut Expect, a: &ApplyAction) {
        e.flags(
            a.0 as u8,
            [
                "pfcp.apply_action.drop",
                "pfcp.apply_action.forw",
                "pfcp.apply_action.buff",
                "pfcp.apply_action.nocp",
                "pfcp.apply_action.dupl",
                "",
                "",
                "",
            ],
        );
    }
    #[allow(clippy::too_many_arguments)]
    fn fwd(
        e: &mut Expect,
        dst: Option<DestinationInterface>,
        n: &Option<NetworkInstance>,
        ohc: &Option<OuterHeaderCreation>,
        bbf: &Option<BbfOuterHeaderCreation>,
        lp: &Option<LogicalPort>,
    ) {
        e.opt("pfcp.dst_interface", dst.map(|d| d.0));
        ni(e, n);
        if let Some(o) = ohc {
            e.push("pfcp.outer_hdr_desc", o.description);
            e.opt("pfcp.outer_hdr_creation.teid", o.teid.map(|t| format!("0x{t:08x}")));
            e.opt("pfcp.outer_hdr_creation.ipv4", o.ipv4);
            e.opt("pfcp.outer_hdr_creation.port", o.port);
        }
        if let Some(b) = bbf {
            e.push("pfcp.bbf.outer_hdr_desc", b.description);
            e.push("pfcp.bbf.outer_hdr_creation.tunnel_id", format!("0x{:04x}", b.tunnel_id));
            e.push("pfcp.bbf.outer_hdr_creation.session_id", format!("0x{:04x}", b.session_id));
        }
        logical_port(e, lp);
    }
    pub fn create_far(e: &mut Expect, f: &CreateFar) {
        e.push("pfcp.far_id", f.far_id.0);
        apply_action(e, &f.apply_action);
        if let Some(p) = &f.forwarding_parameters {
            fwd(
                e,
                Some(p.destination_interface),
                &p.network_instance,
                &p.outer_header_creation,
                &p.bbf_outer_header_creation,
                &p.logical_port,
            );
        }
    }
    pub fn update_far(e: &mut Expect, f: &UpdateFar) {
        e.push("pfcp.far_id", f.far_id.0);
        if let Some(a) = &f.apply_action {
            apply_action(e, a);
        }
        if let Some(p) = &f.update_forwarding_parameters {
            fwd(e, p.destination_interface, &p.network_instance, &p.outer_header_creation, &p.bbf_outer_header_creation, &p.logical_port);
        }
    }
    fn qer_common(e: &mut Expect, g: Option<GateStatus>, mbr: Option<BitRate>, gbr: Option<BitRate>) {
        if let Some(g) = g {
            e.push("pfcp.gate_status.ulgate", g.ul);
            e.push("pfcp.gate_status.dlgate", g.dl);
        }
        if let Some(m) = mbr {
            e.push("pfcp.ul_mbr", m.ul_kbps);
            e.push("pfcp.dl_mbr", m.dl_kbps);
        }
        if let Some(m) = gbr {
            e.push("pfcp.ul_gbr", m.ul_kbps);
            e.push("pfcp.dl_gbr", m.dl_kbps);
        }
    }
    pub fn create_qer(e: &mut Expect, q: &CreateQer) {
        e.push("pfcp.qer_id", q.qer_id.0);
        qer_common(e, Some(q.gate_status), q.mbr, q.gbr);
    }
    pub fn update_qer(e: &mut Expect, q: &UpdateQer) {
        e.push("pfcp.qer_id", q.qer_id.0);
        qer_common(e, q.gate_status, q.mbr, q.gbr);
    }
    fn urr_common(e: &mut Expect, m: Option<MeasurementMethod>, t: Option<Triggers>, p: Option<MeasurementPeriod>) {
        if let Some(m) = m {
            e.flags(
                m.0,
                [
                    "pfcp.measurement_method_flags.durat",
                    "pfcp.measurement_method_flags.volume",
                    "pfcp.measurement_method_flags.event",
                    "",
                    "",
                    "",
                    "",
                    "",
                ],
            );
        }
        if let Some(t) = t {
            e.flags(
                t.0 as u8,
                [
                    "pfcp.reporting_triggers_flags.perio",
                    "pfcp.reporting_triggers_flags.volth",
                    "pfcp.reporting_triggers_flags.timth",
                    "pfcp.reporting_triggers_flags.quhti",
                    "pfcp.reporting_triggers_flags.start",
                    "pfcp.reporting_triggers_flags.stopt",
                    "pfcp.reporting_triggers_flags.droth",
                    "pfcp.reporting_triggers_flags.liusa",
                ],
            );
        }
        e.opt("pfcp.measurement_period", p.map(|p| p.0));
    }
    pub fn create_urr(e: &mut Expect, u: &CreateUrr) {
        e.push("pfcp.urr_id", u.urr_id.0);
        urr_common(e, Some(u.measurement_method), Some(u.reporting_triggers), u.measurement_period);
    }
    pub fn update_urr(e: &mut Expect, u: &UpdateUrr) {
        e.push("pfcp.urr_id", u.urr_id.0);
        urr_common(e, u.measurement_method, u.reporting_triggers, u.measurement_period);
    }
    pub fn te(e: &mut Expect, t: &CreateTrafficEndpoint) {
        e.push("pfcp.traffic_endpoint_id", t.traffic_endpoint_id.0);
        ni(e, &t.network_instance);
        t.ue_ip_address.iter().for_each(|u| ue_ip(e, u));
        if let Some(m) = &t.mac_address {
            mac(e, m);
        }
        tag(e, &t.c_tag, true);
        tag(e, &t.s_tag, false);
        logical_port(e, &t.logical_port);
        e.opt("pfcp.bbf.pppoe_session_id", t.pppoe_session_id.map(|p| format!("0x{:04x}", p.0)));
        e.opt("pfcp.bbf.mtu", t.mtu.map(|m| m.0));
    }
    pub fn update_te(e: &mut Expect, t: &UpdateTrafficEndpoint) {
        e.push("pfcp.traffic_endpoint_id", t.traffic_endpoint_id.0);
        ni(e, &t.network_instance);
        t.ue_ip_address.iter().for_each(|u| ue_ip(e, u));
        if let Some(m) = &t.mac_address {
            mac(e, m);
        }
        tag(e, &t.c_tag, true);
        tag(e, &t.s_tag, false);
        logical_port(e, &t.logical_port);
        e.opt("pfcp.bbf.pppoe_session_id", t.pppoe_session_id.map(|p| format!("0x{:04x}", p.0)));
        e.opt("pfcp.bbf.mtu", t.mtu.map(|m| m.0));
    }
    pub fn usage_report(e: &mut Expect, u: &UsageReport) {
        e.push("pfcp.urr_id", u.urr_id.0);
        e.push("pfcp.ur_seqn", u.ur_seqn.0);
        let t = u.usage_report_trigger.0;
        e.push("pfcp.usage_report_trigger_flags.perio", t & 1);
        e.push("pfcp.usage_report_trigger.term", (t >> 11) & 1);
        e.opt("pfcp.start_time", u.start_time.map(|t| ntp_time(t.0)));
        e.opt("pfcp.end_time", u.end_time.map(|t| ntp_time(t.0)));
        if let Some(v) = &u.volume_measurement {
            e.opt("pfcp.volume_measurement.tovol", v.total_bytes);
            e.opt("pfcp.volume_measurement.ulvol", v.ul_bytes);
            e.opt("pfcp.volume_measurement.dlvol", v.dl_bytes);
            e.opt("pfcp.volume_measurement.tonop", v.total_pkts);
            e.opt("pfcp.volume_measurement.ulnop", v.ul_pkts);
            e.opt("pfcp.volume_measurement.dlnop", v.dl_pkts);
        }
        e.opt("pfcp.duration_measurement", u.duration_measurement.map(|d| d.0));
    }
    pub fn raw(e: &mut Expect, r: &[RawIe]) {
        for r in r {
            if let (Some(ent), Some(data)) = (r.enterprise(), r.value.get(2..)) {
                e.push("pfcp.enterprise_id", ent);
                e.push("pfcp.enterprise_ie_data", hex(data));
            }
        }
    }
}

fn expect(m: &Message) -> Expect {
    use walk::*;
    let mut e = Expect::default();
    e.push("pfcp.msg_type", m.msg_type());
    e.push("pfcp.seqno", m.seq());
    if let Ok(h) = m.header() {
        e.push("pfcp.seid", format!("0x{:016x}", h.seid));
        e.opt("pfcp.mp", h.priority);
    }
    match m {
        Message::HeartbeatRequest(_, b) => recovery(&mut e, &b.recovery_time_stamp),
        Message::HeartbeatResponse(_, b) => recovery(&mut e, &b.recovery_time_stamp),
        Message::AssociationSetupRequest(_, b) => {
            node_id(&mut e, &b.node_id);
            recovery(&mut e, &b.recovery_time_stamp);
            up_features(&mut e, &b.up_function_features);
            cp_features(&mut e, &b.cp_function_features);
            bbf_features(&mut e, &b.bbf_up_function_features);
            if let Some(r) = &b.pfcp_session_retention_information {
                for ip in r.unknown.iter().filter(|r| r.ie_type == 185).filter_map(|r| r.value.get(1..5)) {
                    e.push("pfcp.cp_pfcp_entity_ip_address.ipv4", format!("{}.{}.{}.{}", ip[0], ip[1], ip[2], ip[3]));
                }
            }
        }
        Message::AssociationSetupResponse(_, b) => {
            node_id(&mut e, &b.node_id);
            e.push("pfcp.cause", b.cause.0);
            recovery(&mut e, &b.recovery_time_stamp);
            up_features(&mut e, &b.up_function_features);
            cp_features(&mut e, &b.cp_function_features);
            bbf_features(&mut e, &b.bbf_up_function_features);
            e.opt("pfcp.asrsp_flags.flags.psrei", b.pfcpasrsp_flags.map(|f| f.0 & fastpath_pfcp::ie::PfcpasRspFlags::PSREI));
        }
        Message::AssociationUpdateRequest(_, b) => {
            node_id(&mut e, &b.node_id);
            up_features(&mut e, &b.up_function_features);
            cp_features(&mut e, &b.cp_function_features);
            e.opt("pfcp.assoc_rel_req.sarr", b.association_release_request.map(|a| a.0 & 1));
            if let Some(t) = b.graceful_release_period {
                e.push("pfcp.timer_unit", t.unit);
                e.push("pfcp.timer_value", t.value);
            }
            bbf_features(&mut e, &b.bbf_up_function_features);
        }
        Message::AssociationUpdateResponse(_, b) => {
            node_id(&mut e, &b.node_id);
            e.push("pfcp.cause", b.cause.0);
            up_features(&mut e, &b.up_function_features);
            cp_features(&mut e, &b.cp_function_features);
            bbf_features(&mut e, &b.bbf_up_function_features);
        }
        Message::AssociationReleaseRequest(_, b) => node_id(&mut e, &b.node_id),
        Message::AssociationReleaseResponse(_, b) => {
            node_id(&mut e, &b.node_id);
            e.push("pfcp.cause", b.cause.0);
        }
        Message::SessionEstablishmentRequest(_, b) => {
            node_id(&mut e, &b.node_id);
            f_seid(&mut e, &b.cp_f_seid);
            b.create_pdr.iter().for_each(|p| create_pdr(&mut e, p));
            b.create_far.iter().for_each(|f| create_far(&mut e, f));
            b.create_urr.iter().for_each(|u| create_urr(&mut e, u));
            b.create_qer.iter().for_each(|q| create_qer(&mut e, q));
            b.create_traffic_endpoint.iter().for_each(|t| te(&mut e, t));
        }
        Message::SessionEstablishmentResponse(_, b) => {
            node_id(&mut e, &b.node_id);
            e.push("pfcp.cause", b.cause.0);
            e.opt("pfcp.offending_ie", b.offending_ie.map(|o| o.0));
            if let Some(f) = &b.up_f_seid {
                f_seid(&mut e, f);
            }
        }
        Message::SessionModificationRequest(_, b) => {
            if let Some(f) = &b.cp_f_seid {
                f_seid(&mut e, f);
            }
            b.remove_pdr.iter().for_each(|r| e.push("pfcp.pdr_id", r.pdr_id.0));
            b.remove_far.iter().for_each(|r| e.push("pfcp.far_id", r.far_id.0));
            b.remove_urr.iter().for_each(|r| e.push("pfcp.urr_id", r.urr_id.0));
            b.remove_qer.iter().for_each(|r| e.push("pfcp.qer_id", r.qer_id.0));
            b.remove_traffic_endpoint.iter().for_each(|r| e.push("pfcp.traffic_endpoint_id", r.traffic_endpoint_id.0));
            b.update_traffic_endpoint.iter().for_each(|t| update_te(&mut e, t));
            b.create_pdr.iter().for_each(|p| create_pdr(&mut e, p));
            b.create_far.iter().for_each(|f| create_far(&mut e, f));
            b.create_urr.iter().for_each(|u| create_urr(&mut e, u));
            b.create_qer.iter().for_each(|q| create_qer(&mut e, q));
            b.update_pdr.iter().for_each(|p| update_pdr(&mut e, p));
            b.update_far.iter().for_each(|f| update_far(&mut e, f));
            b.update_urr.iter().for_each(|u| update_urr(&mut e, u));
            b.update_qer.iter().for_each(|q| update_qer(&mut e, q));
            b.create_traffic_endpoint.iter().for_each(|t| te(&mut e, t));
        }
        Message::SessionModificationResponse(_, b) => {
            e.push("pfcp.cause", b.cause.0);
            e.opt("pfcp.offending_ie", b.offending_ie.map(|o| o.0));
            b.usage_report.iter().for_each(|u| usage_report(&mut e, u));
        }
        Message::SessionDeletionRequest(_, _) => {}
        Message::SessionDeletionResponse(_, b) => {
            e.push("pfcp.cause", b.cause.0);
            e.opt("pfcp.offending_ie", b.offending_ie.map(|o| o.0));
            b.usage_report.iter().for_each(|u| usage_report(&mut e, u));
        }
        Message::SessionReportRequest(_, b) => {
            e.flags(
                b.report_type.0,
                ["pfcp.report_type.dldr", "pfcp.report_type.usar", "pfcp.report_type.erir", "pfcp.report_type.upir", "", "", "", ""],
            );
            b.usage_report.iter().for_each(|u| usage_report(&mut e, u));
            raw(&mut e, &b.unknown);
        }
        Message::SessionReportResponse(_, b) => {
            e.push("pfcp.cause", b.cause.0);
            e.opt("pfcp.offending_ie", b.offending_ie.map(|o| o.0));
        }
    }
    e
}

/// Checks each frame against its expectations: every expected value appears among tshark's
/// values for that field in that frame, as often as we expect it. Returns the mismatches.
fn mismatches(pcap: &Path, msgs: &[Message]) -> Vec<String> {
    let exps: Vec<Expect> = msgs.iter().map(expect).collect();
    let mut fields: Vec<&str> = exps.iter().flat_map(|e| e.0.iter().map(|(f, _)| *f)).collect();
    fields.sort_unstable();
    fields.dedup();
    let got = tshark_fields(pcap, &fields);
    let mut bad = Vec::new();
    for (i, e) in exps.iter().enumerate() {
        let frame = got.get(&(i + 1)).cloned().unwrap_or_default();
        let mut left: BTreeMap<&str, Vec<String>> = frame.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        for (f, want) in &e.0 {
            let vals = left.entry(f).or_default();
            match vals.iter().position(|v| v == want) {
                Some(p) => {
                    vals.remove(p);
                }
                None => bad.push(format!("frame {} ({:?}): {f} = {want:?} not among {:?}", i + 1, msgs[i].msg_type(), frame.get(*f))),
            }
        }
    }
    bad
}

/// Frames with a malformed packet or a warning/error expert item (severity ≥ PI_WARN).
fn dissector_complaints(pcap: &Path) -> Vec<String> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args(["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"])
        .args(["-Y", "_ws.malformed || _ws.expert.severity >= 0x00600000 || !pfcp"])
        .args(["-T", "fields", "-e", "frame.number", "-e", "_ws.expert.message", "-e", "_ws.malformed"])
        .output()
        .expect("tshark must be installed (scripts/test installs it)");
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

#[test]
fn tshark_decodes_every_message_with_the_values_we_set() {
    let (pcap, msgs) = pcap_of_samples("all.pcap");
    assert_eq!(msgs.len(), 16);
    let n: usize = msgs.iter().map(|m| expect(m).0.len()).sum();
    assert!(n > 250, "only {n} field checks");
    println!("{n} field checks over {} messages", msgs.len());
    let bad = mismatches(&pcap, &msgs);
    assert!(bad.is_empty(), "{} of {n} fields differ:\n{}", bad.len(), bad.join("\n"));
    let complaints = dissector_complaints(&pcap);
    assert!(complaints.is_empty(), "tshark complains:\n{}", complaints.join("\n"));
    let _ = std::fs::remove_dir_all(pcap.parent().unwrap());
}

/// The checks above can fail: a value we did not send and a broken IE are both caught.
#[test]
fn the_tshark_checks_catch_a_wrong_value_and_a_malformed_ie() {
    let (pcap, mut msgs) = pcap_of_samples("wrong.pcap");
    let Message::HeartbeatRequest(_, hb) = &mut msgs[0] else { panic!() };
    hb.recovery_time_stamp.0 += 1;
    assert_eq!(mismatches(&pcap, &msgs).len(), 1);

    let mut b = Vec::new();
    encode(&samples::all()[8], &mut b).unwrap();
    b[18] = 0xff; // the Node ID's length now runs past the message
    let dir = pcap.parent().unwrap();
    let broken = dir.join("broken.pcap");
    write_pcap(&broken, &[frame(&b)]);
    assert!(!dissector_complaints(&broken).is_empty());
    let _ = std::fs::remove_dir_all(dir);
}

/// The PPPoE / L2TP BBF IEs (typed in `bbf`, carried raw in `unknown`), written with
/// `BbfIe::to_raw`, as tshark's BBF dissector reads them.
#[test]
fn tshark_decodes_every_bbf_ie_type() {
    use fastpath_pfcp::bbf::*;
    use std::net::{Ipv4Addr, Ipv6Addr};
    let endpoint = L2tpTunnelEndpoint {
        choose: false,
        tunnel_id: 0x1234,
        ipv4: Some(Ipv4Addr::new(198, 51, 100, 20)),
        ipv6: Some(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x20)),
    };
    let lcp = PppLcpConnectivity {
        verification_timers: Some(VerificationTimers { interval_s: 30, count: 3 }),
        ppp_lcp_magic_number: Some(PppLcpMagicNumber { tx: 0x1111_2222, rx: 0x3333_4444 }),
        unknown: vec![],
    };
    let ies = [
        BbfIe::PppoeSessionId(PppoeSessionId(0x0042)),
        BbfIe::PppProtocol(PppProtocol { control: true, data: false, protocol: Some(0xc021) }),
        BbfIe::VerificationTimers(VerificationTimers { interval_s: 10, count: 5 }),
        BbfIe::PppLcpMagicNumber(PppLcpMagicNumber { tx: 0xdead_beef, rx: 0x0102_0304 }),
        BbfIe::Mtu(Mtu(1492)),
        BbfIe::L2tpTunnelEndpoint(endpoint),
        BbfIe::L2tpSessionId(L2tpSessionId(0x5678)),
        BbfIe::L2tpType(L2tpType { control: true }),
        BbfIe::PppLcpConnectivity(lcp),
        BbfIe::L2tpTunnel(L2tpTunnel { l2tp_tunnel_endpoint: Some(endpoint), unknown: vec![] }),
    ];
    let mut msg = samples::all().remove(8);
    let Message::SessionEstablishmentRequest(_, m) = &mut msg else { panic!() };
    m.unknown = ies.iter().map(BbfIe::to_raw).collect();
    // Each reads back as itself.
    for (raw, ie) in m.unknown.iter().zip(&ies) {
        assert_eq!(BbfIe::from_raw(raw), Some(Ok(ie.clone())));
    }
    let mut b = Vec::new();
    encode(&msg, &mut b).unwrap();
    let dir = std::env::temp_dir().join(format!("fastpath-pfcp-{}-bbf", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("bbf.pcap");
    write_pcap(&pcap, &[frame(&b)]);

    let want: &[(&str, &str)] = &[
        ("pfcp.bbf.pppoe_session_id", "0x0042"),
        ("pfcp.bbf.protocol_flags.control", "1"),
        ("pfcp.bbf.protocol_flags.data", "0"),
        ("pfcp.bbf.protocol_flags.specific", "1"),
        ("pfcp.bbf.protocol_flags.protocol", "0xc021"),
        ("pfcp.bbf.verification_timer.interval", "10"),
        ("pfcp.bbf.verification_timer.count", "5"),
        ("pfcp.bbf.lcp_magic_number.tx", "0xdeadbeef"),
        ("pfcp.bbf.lcp_magic_number.rx", "0x01020304"),
        ("pfcp.bbf.mtu", "1492"),
        ("pfcp.bbf.l2tp_endp_flags.v4", "1"),
        ("pfcp.bbf.l2tp_endp_flags.v6", "1"),
        ("pfcp.bbf.l2tp_endp_flags.ch", "0"),
        ("pfcp.bbf.l2tp_endp.tunnel_id", "0x1234"),
        ("pfcp.bbf.l2tp_endp.ipv4_addr", "198.51.100.20"),
        ("pfcp.bbf.l2tp_endp.ipv6_addr", "2001:db8::20"),
        ("pfcp.bbf.bbf_l2tp_session_id", "0x5678"),
        ("pfcp.bbf.l2tp_type_flags.t", "1"),
        // Inside PPP LCP Connectivity and L2TP Tunnel.
        ("pfcp.bbf.verification_timer.interval", "30"),
        ("pfcp.bbf.verification_timer.count", "3"),
        ("pfcp.bbf.lcp_magic_number.tx", "0x11112222"),
        ("pfcp.bbf.lcp_magic_number.rx", "0x33334444"),
        ("pfcp.bbf.l2tp_endp.tunnel_id", "0x1234"),
    ];
    let mut fields: Vec<&str> = want.iter().map(|(f, _)| *f).collect();
    fields.sort_unstable();
    fields.dedup();
    let got = tshark_fields(&pcap, &fields);
    let mut left = got[&1].clone();
    let mut bad = Vec::new();
    for (f, v) in want {
        let vals = left.get_mut(*f).unwrap();
        match vals.iter().position(|x| x == v) {
            Some(p) => {
                vals.remove(p);
            }
            None => bad.push(format!("{f} = {v:?} not among {:?}", got[&1][*f])),
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let complaints = dissector_complaints(&pcap);
    assert!(complaints.is_empty(), "tshark complains:\n{}", complaints.join("\n"));
    let _ = std::fs::remove_dir_all(dir);
}
