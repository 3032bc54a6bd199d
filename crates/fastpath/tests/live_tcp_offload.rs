//! TCP with the endpoints' offloads on, through every fastpath datapath, checked by an
//! independent dissector: `fastpath lab tcp --check` sends a few MB with iperf3 from a sender
//! whose checksum offload, TSO and GSO are on (veth's defaults) through `fastpath` (AF_XDP
//! ports with `--multi-buffer`), `fastpath-xdp` (the XDP datapath, generic mode, DUT veths at
//! MTU 65,535) and `fastpath-tc` (the same program at tc ingress), captures what the receiver
//! gets, and reads the capture with tshark.
//!
//! What must hold for each DUT: the transfer completes; tshark sees no bad IPv4 header checksum,
//! no TCP checksum that is wrong (a checksum that holds the sender's pseudo-header sum is the
//! offload's partial one, which the receiver's stack trusts on veth and which only a DUT that
//! passes the sender's skb on can deliver), no retransmission that filled a gap (the sender's
//! RetransSegs against the receiver's D-SACKs), nothing dropped by the DUT's interfaces, and no
//! more tshark retransmissions than were sent or reordered; the receiver's stack counted
//! no checksum error (`TcpInCsumErrors`, the authority when a capture cannot verify). The AF_XDP
//! DUT copies frames, so it must deliver MTU-sized frames with full checksums (it cut the
//! sender's 64 KB segments); the eBPF datapath (XDP and tc) must deliver the sender's GSO segments whole
//! (frames above 1514 bytes). Bounded: `timeout 240` around the lab, which removes its
//! namespaces on every exit path; checked after.

mod common;

use std::process::Command;

#[test]
fn tcp_with_offloads_on_through_every_fastpath_datapath_is_clean() {
    if !common::root_or_skip() {
        return;
    }
    for prog in ["iperf3", "tshark", "ethtool"] {
        let found = Command::new("sh").args(["-c", &format!("command -v {prog}")]).output().is_ok_and(|o| o.status.success());
        assert!(found, "{prog} is needed (scripts/setup-lab.sh; tshark: scripts/test installs it)");
    }
    let out = Command::new("timeout")
        .args([
            "-k",
            "5",
            "240",
            env!("CARGO_BIN_EXE_fastpath"),
            "lab",
            "tcp",
            "--dut",
            "fastpath",
            "--dut",
            "fastpath-xdp",
            "--dut",
            "fastpath-tc",
        ])
        .args(["--duration", "0", "--check", "--transfer", "8M", "--json", "--report", "/dev/null"])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "fastpath lab tcp failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    let rows: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let unsupported: Vec<&serde_json::Value> = rows.iter().filter(|r| r["measurement"] == "unsupported").collect();
    assert!(unsupported.is_empty(), "a fastpath DUT could not carry offloaded TCP: {unsupported:?}\n{stderr}");
    for dut in ["fastpath", "fastpath-xdp", "fastpath-tc"] {
        let check = rows
            .iter()
            .find(|r| r["measurement"] == "check" && r["dut"] == dut)
            .unwrap_or_else(|| panic!("no check row for {dut}:\n{stdout}"));
        let n = |k: &str| check[k].as_u64().unwrap_or_else(|| panic!("{k} missing: {check}"));
        assert_eq!(check["completed"], true, "{check}");
        // ~2.9 MB on the wire: ~2,000 MTU frames, or ~45 GSO segments of 64 KB.
        assert!(n("frames") >= 20, "the capture holds the transfer: {check}");
        assert_eq!(n("bad_ip_checksums"), 0, "{check}");
        assert_eq!(n("bad_tcp_checksums"), 0, "{check}");
        // A retransmission the DUT caused fills a gap at the receiver: sent twice by the sender
        // (its RetransSegs) and not reported back as a duplicate (D-SACK). tshark's own
        // retransmission label is not used for this: on veth a segment the sender's ACK-driven
        // softirq sends from the other CPU can overtake one in flight, and tshark then labels
        // the late original a retransmission although nothing was sent twice (seen: tshark 1,
        // the sender's RetransSegs 0).
        // Nor is its count bounded by what was sent: one reordered burst on veth was labelled
        // 42 retransmissions with 20 sent again, all 20 reported back as duplicates.
        let lost = n("sender_retrans_segs").saturating_sub(n("receiver_duplicates"));
        assert_eq!(lost, 0, "retransmissions that filled a gap: {check}");
        assert_eq!(n("dut_if_drops"), 0, "{check}");
        assert_eq!(n("receiver_csum_errors"), 0, "{check}");
        if dut == "fastpath" {
            assert!(n("largest_frame") <= 1514, "the AF_XDP DUT cuts 64 KB segments to the MTU: {check}");
            assert_eq!(n("partial_tcp_checksums"), 0, "a copied frame needs its full checksum: {check}");
        } else {
            assert!(n("largest_frame") > 1514, "the eBPF datapath passes the sender's GSO segments whole: {check}");
        }
        let t = rows
            .iter()
            .find(|r| r["measurement"] == "transfer" && r["dut"] == dut)
            .unwrap_or_else(|| panic!("no transfer row for {dut}:\n{stdout}"));
        assert_eq!(t["bytes"], 8 << 20, "{t}");
        assert!(t["all_done_s"].as_f64().is_some_and(|s| s > 0.0), "{t}");
    }
    // Every namespace the run created carries its PID: none may be left.
    let dut_ns: Vec<&str> = stderr.lines().filter_map(|l| l.split("DUT namespace ").nth(1)?.split([',', ' ']).next()).collect();
    assert_eq!(dut_ns.len(), 3, "one DUT namespace per DUT:\n{stderr}");
    let pid = dut_ns[0].split('-').nth(2).unwrap();
    let ns = fastpath_io::netns::ip(&["netns", "list"]).unwrap();
    assert!(!ns.lines().any(|l| l.contains(&format!("-{pid}-"))), "namespaces of the run left behind:\n{ns}");
}
