"""A PFCP peer built on scapy's PFCP layer (scapy.contrib.pfcp), independent of our codec.

  build   print one scapy-built message per line: "<name> <hex>"; the Rust test decodes them
          and checks each field against the values below
  check   read "<index> <hex>" lines (our encoding of fastpath_pfcp::samples::all()), parse
          them with scapy and assert the fields; print "ok <n>"

Run by crates/pfcp/tests/scapy.rs. Exits non-zero (with a traceback) on any mismatch.
"""
import sys

from scapy.contrib.pfcp import *  # noqa: F401,F403
from scapy.contrib import pfcp as P

BBF = 3561


def bbf(ietype, data):
    return P.IE_EnterpriseSpecific(ietype=ietype, enterprise_id=BBF, data=data)


def tag(cls, vid, pcp):
    return cls(VID=1, DEI=1, PCP=1, cvid_value_hi=vid >> 8, cvid_value_low=vid & 0xff,
               dei_flag=0, pcp_value=pcp) if cls is P.IE_C_TAG else \
        cls(VID=1, DEI=1, PCP=1, svid_value_hi=vid >> 8, svid_value_low=vid & 0xff,
            dei_flag=0, pcp_value=pcp)


def build():
    node = P.IE_NodeId(id_type=0, ipv4="198.51.100.7")
    msgs = {}
    msgs["heartbeat_request"] = P.PFCP(S=0, seq=7) / P.PFCPHeartbeatRequest(
        IE_list=[P.IE_RecoveryTimeStamp(timestamp=0x70000000)])
    msgs["association_setup_request"] = P.PFCP(S=0, seq=8) / P.PFCPAssociationSetupRequest(IE_list=[
        node, P.IE_RecoveryTimeStamp(timestamp=0x70000001),
        P.IE_UPFunctionFeatures(FTUP=1),
        bbf(32768, b"\x02\x00\x00\x00")])
    msgs["association_setup_response"] = P.PFCP(S=0, seq=8) / P.PFCPAssociationSetupResponse(IE_list=[
        P.IE_NodeId(id_type=2, id=b"up1.bng.example"), P.IE_Cause(cause=1),
        P.IE_RecoveryTimeStamp(timestamp=0x70000002)])
    msgs["association_release_request"] = P.PFCP(S=0, seq=9) / P.PFCPAssociationReleaseRequest(
        IE_list=[P.IE_NodeId(id_type=1, ipv6="2001:db8::7")])
    pdi = P.IE_PDI(IE_list=[
        P.IE_SourceInterface(interface=0),
        P.IE_NetworkInstance(instance=b"access"),
        P.IE_UE_IP_Address(V4=1, ipv4="100.64.1.2"),
        P.IE_TrafficEndpointId(id=4),
        P.IE_EthernetPacketFilter(IE_list=[
            P.IE_MACAddress(SOUR=1, source_mac="02:00:00:00:01:02"),
            P.IE_Ethertype(type=0x0800),
            tag(P.IE_C_TAG, 301, 0),
            tag(P.IE_S_TAG, 101, 5)]),
        bbf(32769, b"port-7")])
    pdr = P.IE_CreatePDR(IE_list=[
        P.IE_PDR_Id(id=5), P.IE_Precedence(precedence=200), pdi,
        P.IE_OuterHeaderRemoval(header=8), P.IE_FAR_Id(id=6), P.IE_URR_Id(id=8),
        P.IE_QER_Id(id=9), bbf(32771, b"\x01")])
    far = P.IE_CreateFAR(IE_list=[
        P.IE_FAR_Id(id=6), P.IE_ApplyAction(FORW=1),
        P.IE_ForwardingParameters(IE_list=[
            P.IE_DestinationInterface(interface=1),
            P.IE_NetworkInstance(instance=b"internet"),
            P.IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=0x1234, ipv4="198.51.100.9"),
            bbf(32770, b"\x02\x00\x00\x00\x00\x00")])])
    qer = P.IE_CreateQER(IE_list=[P.IE_QER_Id(id=9), P.IE_GateStatus(ul=0, dl=1),
                                  P.IE_MBR(ul=30000, dl=150000)])
    urr = P.IE_CreateURR(IE_list=[P.IE_URR_Id(id=8), P.IE_MeasurementMethod(VOLUM=1),
                                  P.IE_ReportingTriggers(periodic_reporting=1),
                                  P.IE_MeasurementPeriod(period=60)])
    te = P.IE_CreateTrafficEndpoint(IE_list=[P.IE_TrafficEndpointId(id=4),
                                             bbf(32769, b"port-7"), bbf(32776, b"\x05\xd4")])
    msgs["session_establishment_request"] = P.PFCP(S=1, seid=0, seq=10) / \
        P.PFCPSessionEstablishmentRequest(IE_list=[
            node, P.IE_FSEID(v4=1, seid=0xabc, ipv4="198.51.100.7"), pdr, far, urr, qer, te,
            P.IE_EnterpriseSpecific(ietype=33000, enterprise_id=32473, data=b"\xbe\xef")])
    msgs["session_establishment_response"] = P.PFCP(S=1, seid=0xabc, seq=10) / \
        P.PFCPSessionEstablishmentResponse(IE_list=[
            node, P.IE_Cause(cause=1), P.IE_FSEID(v4=1, seid=0xdef, ipv4="198.51.100.8")])
    msgs["session_modification_request"] = P.PFCP(S=1, seid=0xdef, seq=11, MP=1, priority=2) / \
        P.PFCPSessionModificationRequest(IE_list=[
            P.IE_RemovePDR(IE_list=[P.IE_PDR_Id(id=5)]),
            P.IE_UpdateFAR(IE_list=[P.IE_FAR_Id(id=6), P.IE_ApplyAction(DROP=1)]),
            P.IE_UpdateQER(IE_list=[P.IE_QER_Id(id=9), P.IE_MBR(ul=1000, dl=2000)])])
    ur = [P.IE_URR_Id(id=8), P.IE_UR_SEQN(number=3), P.IE_UsageReportTrigger(PERIO=1),
          P.IE_VolumeMeasurement(TOVOL=1, ULVOL=1, DLVOL=1, total=3000, uplink=1000, downlink=2000),
          P.IE_DurationMeasurement(duration=60)]
    msgs["session_report_request"] = P.PFCP(S=1, seid=0xabc, seq=12) / P.PFCPSessionReportRequest(
        IE_list=[P.IE_ReportType(USAR=1), P.IE_UsageReport_SRR(IE_list=ur)])
    msgs["session_deletion_request"] = P.PFCP(S=1, seid=0xdef, seq=13) / P.PFCPSessionDeletionRequest()
    msgs["session_deletion_response"] = P.PFCP(S=1, seid=0xabc, seq=13) / P.PFCPSessionDeletionResponse(
        IE_list=[P.IE_Cause(cause=1), P.IE_UsageReport_SDR(IE_list=ur)])
    msgs["session_report_response"] = P.PFCP(S=1, seid=0xdef, seq=12) / P.PFCPSessionReportResponse(
        IE_list=[P.IE_Cause(cause=69), P.IE_OffendingIE(type=39)])
    for name, m in msgs.items():
        print(name, bytes(m).hex())


def only(ies, cls):
    found = [ie for ie in ies if isinstance(ie, cls)]
    assert len(found) == 1, (cls.__name__, [type(i).__name__ for i in ies])
    return found[0]


def every(ies, cls):
    return [ie for ie in ies if isinstance(ie, cls)]


def vendor(ies, ietype):
    found = [ie for ie in ies if isinstance(ie, P.IE_EnterpriseSpecific) and ie.ietype == ietype]
    assert len(found) == 1, (ietype, [type(i).__name__ for i in ies])
    assert found[0].enterprise_id == BBF
    return found[0].data


def vid(t, c):
    return ((t.cvid_value_hi << 8) | t.cvid_value_low) if c else ((t.svid_value_hi << 8) | t.svid_value_low)


RECOVERY = 3976214400
CP, UP, UE = "192.0.2.1", "192.0.2.2", "100.64.0.1"


def check_usage_report(ur, termr):
    ies = ur.IE_list
    assert only(ies, P.IE_URR_Id).id == 1
    assert only(ies, P.IE_UR_SEQN).number == 4
    t = only(ies, P.IE_UsageReportTrigger)
    assert (t.PERIO, t.TERMR) == ((0, 1) if termr else (1, 0))
    assert only(ies, P.IE_StartTime).timestamp & 0xffffffff == RECOVERY + 60
    assert only(ies, P.IE_EndTime).timestamp & 0xffffffff == RECOVERY + 360
    v = only(ies, P.IE_VolumeMeasurement)
    assert (v.TOVOL, v.ULVOL, v.DLVOL, v.total, v.uplink, v.downlink) == (1, 1, 1, 1500000, 500000, 1000000)
    assert only(ies, P.IE_DurationMeasurement).duration == 300


def check(index, pkt):
    """Asserts the fields of fastpath_pfcp::samples::all()[index], as scapy parses them."""
    h = pkt[P.PFCP]
    types = [1, 2, 5, 6, 7, 8, 9, 10, 50, 51, 52, 53, 54, 55, 56, 57]
    assert h.version == 1 and h.message_type == types[index], (index, h.message_type)
    assert h.S == (1 if index >= 8 else 0)
    ies = h.payload.IE_list if hasattr(h.payload, "IE_list") else []
    # scapy's PFCP layer has no class for IEs 183 and 184 (Rel-16): their raw bytes are checked.
    raw = {ie.ietype: bytes(ie.data) for ie in ies if isinstance(ie, P.IE_NotImplemented)}
    assert set(raw) <= {183, 184}, ies
    if index in (0, 1):
        assert h.seq == 1
        assert only(ies, P.IE_RecoveryTimeStamp).timestamp & 0xffffffff == RECOVERY + 5 * index
    elif index == 2:
        n = only(ies, P.IE_NodeId)
        assert (n.id_type, n.ipv4) == (0, UP)
        assert only(ies, P.IE_UPFunctionFeatures).FTUP == 1
        assert vendor(ies, 32768) == b"\x02\x00\x00\x00"
        # PFCP Session Retention Information ▸ CP PFCP Entity IP Address (185), V4, 192.0.2.1.
        assert raw[183] == b"\x00\xb9\x00\x05\x02\xc0\x00\x02\x01", raw
    elif index == 3:
        assert only(ies, P.IE_NodeId).id == b"cp1.bng.example"
        assert only(ies, P.IE_Cause).cause == 1
        assert only(ies, P.IE_CPFunctionFeatures).LOAD == 1
        assert raw[184] == b"\x01", raw  # PFCPASRsp-Flags: PSREI
    elif index == 4:
        n = only(ies, P.IE_NodeId)
        assert (n.id_type, n.ipv6) == (1, "2001:db8::2")
        assert only(ies, P.IE_PFCPAssociationReleaseRequest).SARR == 1
        g = only(ies, P.IE_GracefulReleasePeriod)
        assert (g.release_timer_unit, g.release_timer_value) == (1, 5)
    elif index == 8:
        assert (h.seid, h.seq, h.MP, h.priority) == (0, 10, 1, 3)
        f = only(ies, P.IE_FSEID)
        assert (f.v4, f.seid, f.ipv4) == (1, 0x1000, CP)
        pdrs = every(ies, P.IE_CreatePDR)
        assert len(pdrs) == 2
        up = pdrs[0].IE_list
        assert only(up, P.IE_PDR_Id).id == 1 and only(up, P.IE_Precedence).precedence == 100
        pdi = only(up, P.IE_PDI).IE_list
        assert only(pdi, P.IE_SourceInterface).interface == 0
        assert only(pdi, P.IE_NetworkInstance).instance == b"access"
        assert only(pdi, P.IE_UE_IP_Address).ipv4 == UE
        assert only(pdi, P.IE_TrafficEndpointId).id == 1
        assert vendor(pdi, 32769) == b"port-1"
        epf = only(pdi, P.IE_EthernetPacketFilter).IE_list
        assert only(epf, P.IE_MACAddress).source_mac == "02:00:00:00:00:01"
        assert only(epf, P.IE_Ethertype).type == 0x0800
        c, s = only(epf, P.IE_C_TAG), only(epf, P.IE_S_TAG)
        assert (vid(c, True), c.pcp_value, vid(s, False), s.pcp_value) == (200, 0, 100, 5)
        assert only(up, P.IE_OuterHeaderRemoval).header == 8
        assert only(up, P.IE_FAR_Id).id == 1
        assert vendor(up, 32771) == b"\x01"
        fars = every(ies, P.IE_CreateFAR)
        assert [only(f.IE_list, P.IE_FAR_Id).id for f in fars] == [1, 2, 3]
        fp = only(fars[1].IE_list, P.IE_ForwardingParameters).IE_list
        assert only(fp, P.IE_DestinationInterface).interface == 0
        assert vendor(fp, 32770) == b"\x02\x00\x00\x00\x00\x00"
        assert vendor(fp, 32769) == b"port-1"
        ohc = only(only(fars[2].IE_list, P.IE_ForwardingParameters).IE_list, P.IE_OuterHeaderCreation)
        assert (ohc.GTPUUDPIPV4, ohc.TEID, ohc.ipv4) == (1, 0x1001, CP)
        qer = only(ies, P.IE_CreateQER).IE_list
        m = only(qer, P.IE_MBR)
        assert (m.ul, m.dl) == (20000, 100000)
        urr = only(ies, P.IE_CreateURR).IE_list
        assert only(urr, P.IE_ReportingTriggers).periodic_reporting == 1
        assert only(urr, P.IE_MeasurementPeriod).period == 300
        te = only(ies, P.IE_CreateTrafficEndpoint).IE_list
        assert only(te, P.IE_TrafficEndpointId).id == 1
        assert vendor(te, 32769) == b"port-1"
        assert vendor(te, 32776) == b"\x05\xdc"
        c, s = only(te, P.IE_C_TAG), only(te, P.IE_S_TAG)
        assert (vid(c, True), vid(s, False)) == (200, 100)
    elif index == 9:
        f = only(ies, P.IE_FSEID)
        assert (h.seid, f.seid, f.ipv4) == (0x1000, 0x2000, UP)
    elif index == 10:
        assert only(only(ies, P.IE_RemovePDR).IE_list, P.IE_PDR_Id).id == 2
        uf = only(ies, P.IE_UpdateFAR).IE_list
        assert only(uf, P.IE_ApplyAction).DROP == 1
        assert vendor(only(uf, P.IE_UpdateForwardingParameters).IE_list, 32769) == b"port-2"
        m = only(only(ies, P.IE_UpdateQER).IE_list, P.IE_MBR)
        assert (m.ul, m.dl) == (50000, 250000)
        assert only(only(ies, P.IE_RemoveTrafficEndpoint).IE_list, P.IE_TrafficEndpointId).id == 2
        ute = only(ies, P.IE_UpdateTrafficEndpoint).IE_list
        assert only(ute, P.IE_TrafficEndpointId).id == 1
        assert only(ute, P.IE_UE_IP_Address).ipv4 == "100.64.0.9"
        assert vendor(ute, 32769) == b"port-2"
    elif index == 11:
        check_usage_report(only(ies, P.IE_UsageReport_SMR), False)
    elif index == 12:
        assert (h.seid, h.seq) == (0x2000, 12) and ies == []
    elif index == 13:
        check_usage_report(only(ies, P.IE_UsageReport_SDR), True)
    elif index == 14:
        assert only(ies, P.IE_ReportType).USAR == 1
        check_usage_report(only(ies, P.IE_UsageReport_SRR), False)
    elif index == 15:
        assert only(ies, P.IE_Cause).cause == 66
        assert only(ies, P.IE_OffendingIE).type == 39


def main():
    if sys.argv[1:] == ["build"]:
        build()
    elif sys.argv[1:] == ["check"]:
        n = 0
        for line in sys.stdin:
            index, hexa = line.split()
            check(int(index), P.PFCP(bytes.fromhex(hexa)))
            n += 1
        print("ok", n)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
