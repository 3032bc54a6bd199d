//! Fuzzing without a fuzzer: a structured property test (random typed messages round-trip
//! exactly) and a mutation loop over encoded seeds (the sample messages) that asserts
//! `decode` never panics and that whatever it accepts is a fixed point:
//! `decode(encode(decode(x))) == decode(x)`.
//!
//! `FUZZ_ITERS` sets the mutation loop's length (default 200 000, a few seconds);
//! `FUZZ_SEED` its seed (default fixed, printed on failure). `scripts/fuzz-pfcp` runs it
//! with 10 000 000 inputs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)]

use std::net::{Ipv4Addr, Ipv6Addr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use fastpath_pfcp::bbf::*;
use fastpath_pfcp::group::*;
use fastpath_pfcp::ie::*;
use fastpath_pfcp::message::*;
use fastpath_pfcp::{decode, encode, samples, Message, RawIe};
use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;

// ---- structured: random typed messages --------------------------------------------------

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..=max)
}

/// Raw IEs no typed field claims: 3GPP types this codec does not type, and vendor IEs of an
/// enterprise other than the BBF.
fn raw_ies() -> impl Strategy<Value = Vec<RawIe>> {
    let tgpp = (250u16..320, bytes(12)).prop_map(|(t, v)| RawIe { ie_type: t, value: v });
    let vendor = (0x8000u16..=0xffff, 1u16..3000, bytes(8)).prop_map(|(t, e, v)| {
        let mut value = e.to_be_bytes().to_vec();
        value.extend(v);
        RawIe { ie_type: t, value }
    });
    vec(prop_oneof![tgpp, vendor], 0..3)
}

fn node_id() -> impl Strategy<Value = NodeId> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|a| NodeId::Ipv4(Ipv4Addr::from(a))),
        any::<[u8; 16]>().prop_map(|a| NodeId::Ipv6(Ipv6Addr::from(a))),
        vec("[a-z0-9_-]{1,12}", 1..4).prop_map(|l| NodeId::Fqdn(l.join("."))),
    ]
}

fn f_seid() -> impl Strategy<Value = FSeid> {
    (any::<u64>(), of(any::<[u8; 4]>()), of(any::<[u8; 16]>())).prop_map(|(seid, a, b)| FSeid {
        seid,
        ipv4: a.map(Ipv4Addr::from),
        ipv6: b.map(Ipv6Addr::from),
    })
}

fn ue_ip() -> impl Strategy<Value = UeIpAddress> {
    (of(any::<[u8; 4]>()), of(any::<[u8; 16]>()), any::<[bool; 3]>(), of(any::<u8>()), of(any::<u8>())).prop_map(|(a, b, f, d, l)| {
        UeIpAddress {
            ipv4: a.map(Ipv4Addr::from),
            ipv6: b.map(Ipv6Addr::from),
            destination: f[0],
            ipv6_prefix_delegation_bits: d,
            choose_ipv4: f[1],
            choose_ipv6: f[2],
            ipv6_prefix_length: l,
        }
    })
}

fn sdf() -> impl Strategy<Value = SdfFilter> {
    (of(bytes(40)), of(any::<u16>()), of(any::<u32>()), of(0u32..0x0100_0000), of(any::<u32>())).prop_map(|(fd, ttc, spi, fl, id)| {
        SdfFilter { flow_description: fd, tos_traffic_class: ttc, security_parameter_index: spi, flow_label: fl, sdf_filter_id: id }
    })
}

fn tag() -> impl Strategy<Value = VlanTag> {
    (of(0u8..8), of(any::<bool>()), of(0u16..4096)).prop_map(|(pcp, dei, vid)| VlanTag { pcp, dei, vid })
}

fn mac() -> impl Strategy<Value = MacAddress> {
    (of(any::<[u8; 6]>()), of(any::<[u8; 6]>()), of(any::<[u8; 6]>()), of(any::<[u8; 6]>())).prop_map(|(a, b, c, d)| MacAddress {
        source: a,
        destination: b,
        upper_source: c,
        upper_destination: d,
    })
}

fn ni() -> impl Strategy<Value = Option<NetworkInstance>> {
    of(bytes(16).prop_map(NetworkInstance))
}

fn lp() -> impl Strategy<Value = Option<LogicalPort>> {
    of(bytes(16).prop_map(LogicalPort))
}

fn pdi() -> impl Strategy<Value = Pdi> {
    let epf = (of(any::<u32>()), of(any::<u8>()), vec(mac(), 0..2), of(any::<u16>()), of(tag()), of(tag()), vec(sdf(), 0..2), raw_ies())
        .prop_map(|(id, p, m, et, c, s, f, u)| EthernetPacketFilter {
            ethernet_filter_id: id.map(EthernetFilterId),
            ethernet_filter_properties: p.map(EthernetFilterProperties),
            mac_address: m,
            ethertype: et.map(Ethertype),
            c_tag: c,
            s_tag: s,
            sdf_filter: f,
            unknown: u,
        });
    (0u8..16, ni(), vec(ue_ip(), 0..3), vec(any::<u8>(), 0..2), vec(sdf(), 0..2), vec(epf, 0..2), lp(), raw_ies()).prop_map(
        |(si, n, ue, te, f, e, l, u)| Pdi {
            source_interface: SourceInterface(si),
            network_instance: n,
            ue_ip_address: ue,
            traffic_endpoint_id: te.into_iter().map(TrafficEndpointId).collect(),
            sdf_filter: f,
            ethernet_packet_filter: e,
            logical_port: l,
            unknown: u,
        },
    )
}

fn ohr() -> impl Strategy<Value = Option<OuterHeaderRemoval>> {
    of((any::<u8>(), of(any::<u8>())).prop_map(|(d, e)| OuterHeaderRemoval { description: d, gtpu_extension_header_deletion: e }))
}

fn create_pdr() -> impl Strategy<Value = CreatePdr> {
    (
        any::<u16>(),
        any::<u32>(),
        pdi(),
        ohr(),
        of(any::<u32>()),
        vec(any::<u32>(), 0..3),
        vec(any::<u32>(), 0..3),
        of(any::<u8>()),
        raw_ies(),
    )
        .prop_map(|(id, p, pdi, ohr, far, urr, qer, b, u)| CreatePdr {
            pdr_id: PdrId(id),
            precedence: Precedence(p),
            pdi,
            outer_header_removal: ohr,
            far_id: far.map(FarId),
            urr_id: urr.into_iter().map(UrrId).collect(),
            qer_id: qer.into_iter().map(QerId).collect(),
            bbf_outer_header_removal: b.map(BbfOuterHeaderRemoval),
            unknown: u,
        })
}

fn ohc() -> impl Strategy<Value = OuterHeaderCreation> {
    (any::<u16>(), any::<u32>(), any::<[u8; 4]>(), any::<[u8; 16]>(), any::<u16>(), any::<[u8; 3]>(), any::<[u8; 3]>()).prop_map(
        |(d, teid, a, b, port, c, s)| {
            // Present exactly when the description calls for it, as decode makes it.
            let has = |bits: u16| d & bits != 0;
            type O = OuterHeaderCreation;
            OuterHeaderCreation {
                description: d,
                teid: has(O::GTPU_UDP_IPV4 | O::GTPU_UDP_IPV6).then_some(teid),
                ipv4: has(O::GTPU_UDP_IPV4 | O::UDP_IPV4 | O::IPV4).then_some(Ipv4Addr::from(a)),
                ipv6: has(O::GTPU_UDP_IPV6 | O::UDP_IPV6 | O::IPV6).then_some(Ipv6Addr::from(b)),
                port: has(O::UDP_IPV4 | O::UDP_IPV6).then_some(port),
                c_tag: has(O::C_TAG).then_some(c),
                s_tag: has(O::S_TAG).then_some(s),
            }
        },
    )
}

fn bbf_ohc() -> impl Strategy<Value = Option<BbfOuterHeaderCreation>> {
    of(any::<[u16; 3]>().prop_map(|[d, t, s]| BbfOuterHeaderCreation { description: d, tunnel_id: t, session_id: s }))
}

fn create_far() -> impl Strategy<Value = CreateFar> {
    let fp = (0u8..16, ni(), of(ohc()), bbf_ohc(), lp(), raw_ies()).prop_map(|(d, n, o, b, l, u)| ForwardingParameters {
        destination_interface: DestinationInterface(d),
        network_instance: n,
        outer_header_creation: o,
        bbf_outer_header_creation: b,
        logical_port: l,
        unknown: u,
    });
    (any::<u32>(), any::<u16>(), of(fp), raw_ies()).prop_map(|(id, a, fp, u)| CreateFar {
        far_id: FarId(id),
        apply_action: ApplyAction(a),
        forwarding_parameters: fp,
        unknown: u,
    })
}

fn rate() -> impl Strategy<Value = BitRate> {
    (0u64..1 << 40, 0u64..1 << 40).prop_map(|(u, d)| BitRate { ul_kbps: u, dl_kbps: d })
}

fn create_qer() -> impl Strategy<Value = CreateQer> {
    (any::<u32>(), 0u8..4, 0u8..4, of(rate()), of(rate()), raw_ies()).prop_map(|(id, ul, dl, m, g, u)| CreateQer {
        qer_id: QerId(id),
        gate_status: GateStatus { ul, dl },
        mbr: m,
        gbr: g,
        unknown: u,
    })
}

fn create_urr() -> impl Strategy<Value = CreateUrr> {
    (any::<u32>(), any::<u8>(), 0u32..0x0100_0000, of(any::<u32>()), raw_ies()).prop_map(|(id, m, t, p, u)| CreateUrr {
        urr_id: UrrId(id),
        measurement_method: MeasurementMethod(m),
        reporting_triggers: Triggers(t),
        measurement_period: p.map(MeasurementPeriod),
        unknown: u,
    })
}

fn te() -> impl Strategy<Value = CreateTrafficEndpoint> {
    (any::<u8>(), ni(), vec(ue_ip(), 0..2), of(mac()), of(tag()), of(tag()), lp(), of(any::<u16>()), of(any::<u16>()), raw_ies()).prop_map(
        |(id, n, ue, m, c, s, l, p, mtu, u)| CreateTrafficEndpoint {
            traffic_endpoint_id: TrafficEndpointId(id),
            network_instance: n,
            ue_ip_address: ue,
            mac_address: m,
            c_tag: c,
            s_tag: s,
            logical_port: l,
            pppoe_session_id: p.map(PppoeSessionId),
            mtu: mtu.map(Mtu),
            unknown: u,
        },
    )
}

fn usage_report() -> impl Strategy<Value = UsageReport> {
    (any::<[u32; 2]>(), 0u32..0x0100_0000, of(any::<u32>()), of(any::<u32>()), of(any::<[Option<u64>; 6]>()), of(any::<u32>()), raw_ies())
        .prop_map(|([id, seq], t, s, e, v, d, u)| UsageReport {
            urr_id: UrrId(id),
            ur_seqn: UrSeqn(seq),
            usage_report_trigger: Triggers(t),
            start_time: s.map(StartTime),
            end_time: e.map(EndTime),
            volume_measurement: v.map(|[a, b, c, d, e, f]| VolumeMeasurement {
                total_bytes: a,
                ul_bytes: b,
                dl_bytes: c,
                total_pkts: d,
                ul_pkts: e,
                dl_pkts: f,
            }),
            duration_measurement: d.map(DurationMeasurement),
            unknown: u,
        })
}

fn session_header() -> impl Strategy<Value = SessionHeader> {
    (any::<u64>(), 0u32..0x0100_0000, of(0u8..16)).prop_map(|(seid, seq, priority)| SessionHeader { seid, seq, priority })
}

fn message() -> impl Strategy<Value = Message> {
    let nh = (0u32..0x0100_0000).prop_map(|seq| NodeHeader { seq });
    let features = (
        of((any::<[u8; 2]>(), bytes(4)).prop_map(|(a, b)| UpFunctionFeatures([a.to_vec(), b].concat()))),
        of((any::<u8>(), bytes(3)).prop_map(|(a, b)| CpFunctionFeatures([vec![a], b].concat()))),
        of(any::<u32>().prop_map(BbfUpFunctionFeatures)),
    );
    let setup = (nh.clone(), node_id(), any::<u32>(), features, raw_ies()).prop_map(|(h, n, r, (up, cp, bbf), u)| {
        Message::AssociationSetupRequest(
            h,
            AssociationSetupRequest {
                node_id: n,
                recovery_time_stamp: RecoveryTimeStamp(r),
                up_function_features: up,
                cp_function_features: cp,
                bbf_up_function_features: bbf,
                pfcp_session_retention_information: (r % 2 == 0).then(PfcpSessionRetentionInformation::default),
                unknown: u,
            },
        )
    });
    let hb = (nh.clone(), any::<u32>(), raw_ies())
        .prop_map(|(h, r, u)| Message::HeartbeatResponse(h, HeartbeatResponse { recovery_time_stamp: RecoveryTimeStamp(r), unknown: u }));
    let release = (nh, node_id(), any::<u8>()).prop_map(|(h, n, c)| {
        Message::AssociationReleaseResponse(h, AssociationReleaseResponse { node_id: n, cause: Cause(c), unknown: vec![] })
    });
    let est = (
        session_header(),
        node_id(),
        f_seid(),
        vec(create_pdr(), 1..3),
        vec(create_far(), 1..3),
        vec(create_urr(), 0..2),
        vec(create_qer(), 0..2),
        vec(te(), 0..2),
        raw_ies(),
    )
        .prop_map(|(h, n, f, pdr, far, urr, qer, te, u)| {
            Message::SessionEstablishmentRequest(
                h,
                SessionEstablishmentRequest {
                    node_id: n,
                    cp_f_seid: f,
                    create_pdr: pdr,
                    create_far: far,
                    create_urr: urr,
                    create_qer: qer,
                    create_traffic_endpoint: te,
                    unknown: u,
                },
            )
        });
    let est_rsp = (session_header(), node_id(), 2u8..=255, of(any::<u16>()), of(f_seid())).prop_map(|(h, n, c, o, f)| {
        Message::SessionEstablishmentResponse(
            h,
            SessionEstablishmentResponse { node_id: n, cause: Cause(c), offending_ie: o.map(OffendingIe), up_f_seid: f, unknown: vec![] },
        )
    });
    let del = (session_header(), any::<u8>(), vec(usage_report(), 0..3)).prop_map(|(h, c, r)| {
        Message::SessionDeletionResponse(
            h,
            SessionDeletionResponse { cause: Cause(c), offending_ie: None, usage_report: r, unknown: vec![] },
        )
    });
    let rep = (session_header(), vec(usage_report(), 1..3), any::<u8>()).prop_map(|(h, r, t)| {
        Message::SessionReportRequest(h, SessionReportRequest { report_type: ReportType(t), usage_report: r, unknown: vec![] })
    });
    let update_far =
        (any::<u32>(), of(any::<u16>()), of((of(0u8..16), ni(), of(ohc()), bbf_ohc(), lp()))).prop_map(|(id, a, fp)| UpdateFar {
            far_id: FarId(id),
            apply_action: a.map(ApplyAction),
            update_forwarding_parameters: fp.map(|(d, n, o, b, l)| UpdateForwardingParameters {
                destination_interface: d.map(DestinationInterface),
                network_instance: n,
                outer_header_creation: o,
                bbf_outer_header_creation: b,
                logical_port: l,
                unknown: vec![],
            }),
            unknown: vec![],
        });
    let update_pdr = (any::<u16>(), of(any::<u32>()), of(pdi()), ohr(), of(any::<u32>())).prop_map(|(id, p, pdi, ohr, far)| UpdatePdr {
        pdr_id: PdrId(id),
        precedence: p.map(Precedence),
        pdi,
        outer_header_removal: ohr,
        far_id: far.map(FarId),
        ..Default::default()
    });
    let update_qer = (any::<u32>(), of((0u8..4, 0u8..4)), of(rate())).prop_map(|(id, g, m)| UpdateQer {
        qer_id: QerId(id),
        gate_status: g.map(|(ul, dl)| GateStatus { ul, dl }),
        mbr: m,
        ..Default::default()
    });
    let update_urr = (any::<u32>(), of(any::<u8>()), of(0u32..0x0100_0000), of(any::<u32>())).prop_map(|(id, m, t, p)| UpdateUrr {
        urr_id: UrrId(id),
        measurement_method: m.map(MeasurementMethod),
        reporting_triggers: t.map(Triggers),
        measurement_period: p.map(MeasurementPeriod),
        unknown: vec![],
    });
    let update_te = (te(), any::<bool>()).prop_map(|(t, _)| UpdateTrafficEndpoint {
        traffic_endpoint_id: t.traffic_endpoint_id,
        network_instance: t.network_instance,
        ue_ip_address: t.ue_ip_address,
        mac_address: t.mac_address,
        c_tag: t.c_tag,
        s_tag: t.s_tag,
        logical_port: t.logical_port,
        pppoe_session_id: t.pppoe_session_id,
        mtu: t.mtu,
        unknown: t.unknown,
    });
    let removes =
        (vec(any::<u16>(), 0..3), vec(any::<u32>(), 0..3), vec(any::<u32>(), 0..3), vec(any::<u32>(), 0..3), vec(any::<u8>(), 0..3));
    let creates = (vec(create_pdr(), 0..2), vec(create_far(), 0..2), vec(create_urr(), 0..2), vec(create_qer(), 0..2), vec(te(), 0..2));
    let updates = (vec(update_pdr, 0..2), vec(update_far, 0..2), vec(update_urr, 0..2), vec(update_qer, 0..2), vec(update_te, 0..2));
    let modify = (session_header(), of(f_seid()), removes, creates, updates, raw_ies()).prop_map(
        |(h, f, (rp, rf, ru, rq, rt), (cp, cf, cu, cq, ct), (up, uf, uu, uq, ut), u)| {
            Message::SessionModificationRequest(
                h,
                SessionModificationRequest {
                    cp_f_seid: f,
                    remove_pdr: rp.into_iter().map(|id| RemovePdr { pdr_id: PdrId(id), unknown: vec![] }).collect(),
                    remove_far: rf.into_iter().map(|id| RemoveFar { far_id: FarId(id), unknown: vec![] }).collect(),
                    remove_urr: ru.into_iter().map(|id| RemoveUrr { urr_id: UrrId(id), unknown: vec![] }).collect(),
                    remove_qer: rq.into_iter().map(|id| RemoveQer { qer_id: QerId(id), unknown: vec![] }).collect(),
                    remove_traffic_endpoint: rt
                        .into_iter()
                        .map(|id| RemoveTrafficEndpoint { traffic_endpoint_id: TrafficEndpointId(id), unknown: vec![] })
                        .collect(),
                    create_pdr: cp,
                    create_far: cf,
                    create_urr: cu,
                    create_qer: cq,
                    update_pdr: up,
                    update_far: uf,
                    update_urr: uu,
                    update_qer: uq,
                    create_traffic_endpoint: ct,
                    update_traffic_endpoint: ut,
                    unknown: u,
                },
            )
        },
    );
    let assoc_update = (0u32..0x0100_0000, node_id(), of(any::<u8>()), of((0u8..8, 0u8..32))).prop_map(|(seq, n, r, g)| {
        Message::AssociationUpdateRequest(
            NodeHeader { seq },
            AssociationUpdateRequest {
                node_id: n,
                association_release_request: r.map(PfcpAssociationReleaseRequest),
                graceful_release_period: g.map(|(unit, value)| Timer { unit, value }),
                ..Default::default()
            },
        )
    });
    prop_oneof![setup, hb, release, est, est_rsp, del, rep, modify, assoc_update]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any typed message this strategy builds survives encode then decode unchanged.
    #[test]
    fn typed_messages_round_trip(m in message()) {
        let mut b = Vec::new();
        encode(&m, &mut b).unwrap();
        prop_assert_eq!(decode(&b).unwrap(), m);
    }

    /// Arbitrary bytes behind a valid-looking header never panic the decoder.
    #[test]
    fn decode_never_panics_on_arbitrary_bodies(ty in prop_oneof![Just(1u8), Just(5), Just(50), Just(52), Just(55), Just(56)], body in bytes(300)) {
        let s = u8::from(ty >= 50);
        let mut b = vec![0x20 | s, ty, 0, 0];
        if s == 1 { b.extend([0u8; 8]); }
        b.extend([0, 0, 1, 0]);
        b.extend(&body);
        let len = (b.len() - 4) as u16;
        b[2..4].copy_from_slice(&len.to_be_bytes());
        if let Ok(m) = decode(&b) {
            let mut again = Vec::new();
            encode(&m, &mut again).unwrap();
            prop_assert_eq!(decode(&again).unwrap(), m);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every BBF type Wireshark knows, with any data: no panic, and what reads back is a fixed
    /// point of to_raw / from_raw.
    #[test]
    fn bbf_ie_from_raw_is_total_and_stable(ty in 32768u16..32784, data in bytes(40)) {
        let raw = RawIe { ie_type: ty, value: [&[0x0d, 0xe9][..], &data].concat() };
        if let Some(Ok(ie)) = BbfIe::from_raw(&raw) {
            prop_assert_eq!(BbfIe::from_raw(&ie.to_raw()), Some(Ok(ie)));
        }
    }
}

// ---- mutation loop ----------------------------------------------------------------------

/// xorshift64* (deterministic; the seed is printed on failure).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING: [u8; 8] = [0x00, 0x01, 0x02, 0x7f, 0x80, 0xff, 0x0d, 0xe9];

/// One random edit: flip, set, insert, delete, duplicate or move a range, rewrite a 16-bit
/// length, truncate, or splice in part of another input.
fn mutate(rng: &mut Rng, x: &mut Vec<u8>, other: &[u8]) {
    let len = x.len();
    match rng.below(9) {
        0 if len > 0 => {
            let i = rng.below(len);
            x[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            x[i] = if rng.below(2) == 0 { INTERESTING[rng.below(INTERESTING.len())] } else { rng.next() as u8 };
        }
        2 => {
            let i = rng.below(len + 1);
            let n = 1 + rng.below(8);
            for _ in 0..n {
                x.insert(i, rng.next() as u8);
            }
        }
        3 if len > 0 => {
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(16));
            x.drain(i..i + n);
        }
        4 if len > 0 => {
            // Duplicate a range (repeats IEs, nests groups deeper).
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(64));
            let chunk = x[i..i + n].to_vec();
            let at = rng.below(len + 1);
            x.splice(at..at, chunk);
        }
        5 if len > 1 => {
            let i = rng.below(len - 1);
            let v = match rng.below(4) {
                0 => 0u16,
                1 => 0xffff,
                2 => (len - i) as u16,
                _ => rng.next() as u16,
            };
            x[i..i + 2].copy_from_slice(&v.to_be_bytes());
        }
        6 if len > 0 => x.truncate(rng.below(len)),
        7 if !other.is_empty() => {
            let i = rng.below(other.len());
            let n = 1 + rng.below((other.len() - i).min(128));
            let at = rng.below(len + 1);
            x.splice(at..at, other[i..i + n].iter().copied());
        }
        _ if len > 0 => {
            let i = rng.below(len);
            x[i] = x[i].wrapping_add(rng.below(3) as u8).wrapping_sub(1);
        }
        _ => x.push(rng.next() as u8),
    }
}

/// Grouped IE types (TS 29.244 Table 8.1.2-1) whose contents the tree mutator walks into.
const GROUPED: [u16; 20] = [1, 2, 3, 4, 6, 7, 9, 10, 11, 13, 14, 15, 16, 17, 18, 78, 79, 80, 127, 132];

/// An IE as a tree: grouped IEs hold their children, others their value bytes.
#[derive(Clone)]
struct Node {
    ty: u16,
    value: Vec<u8>,
    children: Option<Vec<Node>>,
}

fn parse_tree(mut b: &[u8]) -> Option<Vec<Node>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let ty = u16::from_be_bytes([*b.first()?, *b.get(1)?]);
        let len = usize::from(u16::from_be_bytes([*b.get(2)?, *b.get(3)?]));
        let value = b.get(4..4 + len)?.to_vec();
        let children = if GROUPED.contains(&ty) { parse_tree(&value) } else { None };
        out.push(Node { ty, value, children });
        b = &b[4 + len..];
    }
    Some(out)
}

fn emit_tree(nodes: &[Node], out: &mut Vec<u8>) {
    for n in nodes {
        out.extend_from_slice(&n.ty.to_be_bytes());
        let at = out.len();
        out.extend_from_slice(&[0, 0]);
        match &n.children {
            Some(c) => emit_tree(c, out),
            None => out.extend_from_slice(&n.value),
        }
        let len = (out.len() - at - 2).min(usize::from(u16::MAX)) as u16;
        out[at..at + 2].copy_from_slice(&len.to_be_bytes());
    }
}

/// Picks a random IE list in the tree (the top level or a group's children).
fn pick_list<'a>(rng: &mut Rng, list: &'a mut Vec<Node>) -> &'a mut Vec<Node> {
    let groups: Vec<usize> = list.iter().enumerate().filter(|(_, n)| n.children.is_some()).map(|(i, _)| i).collect();
    if groups.is_empty() || rng.below(3) == 0 {
        return list;
    }
    let i = groups[rng.below(groups.len())];
    pick_list(rng, list[i].children.as_mut().unwrap())
}

/// A random leaf (or empty group) under `n`.
fn leaf<'a>(rng: &mut Rng, n: &'a mut Node) -> &'a mut Node {
    let k = match &n.children {
        Some(c) if !c.is_empty() => Some(rng.below(c.len())),
        _ => None,
    };
    match k {
        Some(k) => leaf(rng, &mut n.children.as_mut().unwrap()[k]),
        None => n,
    }
}

/// A structure-aware edit: change a leaf IE's bytes (longer, shorter, different), or
/// duplicate, drop, retype or move an IE, then rewrite every enclosing length, so the edit
/// reaches the IE decoders instead of failing a length check on the way down.
fn mutate_tree(rng: &mut Rng, x: &mut Vec<u8>) {
    let hdr = if x.first().is_some_and(|f| f & 1 == 1) { 16 } else { 8 };
    let Some(mut tree) = x.get(hdr..).and_then(parse_tree) else { return };
    let list = pick_list(rng, &mut tree);
    if list.is_empty() {
        return;
    }
    let i = rng.below(list.len());
    match rng.below(6) {
        0 => {
            let n = list[i].clone();
            let at = rng.below(list.len() + 1);
            list.insert(at, n);
        }
        1 => {
            list.remove(i);
        }
        2 => list[i].ty = if rng.below(2) == 0 { rng.next() as u16 } else { GROUPED[rng.below(GROUPED.len())] },
        3 => {
            let j = rng.below(list.len());
            list.swap(i, j);
        }
        _ => {
            // Edit a leaf's value with the byte-level mutator.
            let n = leaf(rng, &mut list[i]);
            if n.children.is_none() {
                let mut v = std::mem::take(&mut n.value);
                mutate(rng, &mut v, &[]);
                v.truncate(1000);
                n.value = v;
            }
        }
    }
    let mut out = x[..hdr].to_vec();
    emit_tree(&tree, &mut out);
    *x = out;
}

/// Fixes the message length field so mutations reach the IEs instead of failing the header.
fn fix_length(x: &mut [u8]) {
    if x.len() >= 4 && x.len() - 4 <= usize::from(u16::MAX) {
        let len = (x.len() - 4) as u16;
        x[2..4].copy_from_slice(&len.to_be_bytes());
    }
}

#[test]
fn mutation_loop_never_panics_and_is_a_fixed_point() {
    let iters: u64 = std::env::var("FUZZ_ITERS").ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(200_000);
    let seed: u64 = std::env::var("FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed_f9fc);
    let mut rng = Rng(seed | 1);
    let seeds: Vec<Vec<u8>> = samples::all()
        .iter()
        .map(|m| {
            let mut b = Vec::new();
            encode(m, &mut b).unwrap();
            b
        })
        .collect();
    // Inputs that decoded, to mutate further (bounded, replaced at random).
    let mut corpus = seeds.clone();
    let (mut ok, mut rejected) = (0u64, 0u64);
    let start = Instant::now();
    for i in 0..iters {
        let mut x = corpus[rng.below(corpus.len())].clone();
        let other = seeds[rng.below(seeds.len())].clone();
        for _ in 0..1 + rng.below(4) {
            if rng.below(2) == 0 {
                mutate_tree(&mut rng, &mut x);
            } else {
                mutate(&mut rng, &mut x, &other);
            }
        }
        if rng.below(4) != 0 {
            fix_length(&mut x);
        }
        let result = catch_unwind(AssertUnwindSafe(|| match decode(&x) {
            Ok(m) => {
                let mut b = Vec::new();
                if encode(&m, &mut b).is_ok() {
                    let again = decode(&b).unwrap_or_else(|e| panic!("re-decode failed: {e}"));
                    assert_eq!(again, m, "decode(encode(decode(x))) != decode(x)");
                }
                true
            }
            Err(e) => {
                let _ = (e.cause(), e.to_string());
                false
            }
        }));
        match result {
            Ok(true) => {
                ok += 1;
                if x.len() < 4096 {
                    if corpus.len() < 512 {
                        corpus.push(x);
                    } else {
                        let j = rng.below(corpus.len());
                        corpus[j] = x;
                    }
                }
            }
            Ok(false) => rejected += 1,
            Err(_) => {
                panic!("iteration {i} (FUZZ_SEED={seed}) failed on input {}", x.iter().map(|b| format!("{b:02x}")).collect::<String>())
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "fuzz-pfcp: {iters} inputs in {secs:.1} s ({:.0} inputs/s), {ok} decoded, {rejected} rejected, seed {seed}",
        iters as f64 / secs.max(1e-9)
    );
    // The loop must reach both sides, or it tests nothing.
    assert!(iters < 1000 || (ok > iters / 100 && rejected > iters / 100), "decoded {ok}, rejected {rejected}");
}
