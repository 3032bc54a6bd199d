//! `sdn-overlay` packet-in / packet-out through pcap ports (`fastpath run`): VXLAN in, VXLAN
//! out, decoded by tshark with checksum validation on — UDP 4789, the tunnel's VNI, outer IPv4
//! checksum valid, inner headers equal to the input's (the inner frame is carried unchanged).

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::TcpFlags;
use fastpath_packet::testutil::{assert_clean, tshark_fields, tshark_or_skip, write_pcap};
use std::net::Ipv4Addr;
use std::process::Command;

const ENTRIES: &str = "\
table vni_map add 100 => set_vnet(1)
table acl_in add 10.0.0.0/24 10.0.1.0/24 80..80 6/0xff priority 10 => allow
table acl_in add 10.0.0.0/24 10.0.1.0/24 * 17/0xff priority 20 => allow
table local_mac add 02:00:00:00:0c:01 => local_mac(1)
table local_mac add 02:00:00:00:0c:02 => local_mac(2)
table ca_pa add 1 10.0.1.1 => to_tunnel(7)
table ca_pa add 1 10.0.0.1 => to_tunnel(8)
table tunnels add 7 => encap(02:00:00:00:0e:07, 02:00:00:00:0e:01, 198.18.0.1, 198.18.7.7, 700, 1)
table tunnels add 8 => encap(02:00:00:00:0e:08, 02:00:00:00:0e:01, 198.18.0.1, 198.18.8.8, 800, 1)
";

fn vxlan(inner_src: [u8; 4], inner_dst: [u8; 4], smac: [u8; 6], dmac: [u8; 6], l4: impl Fn(FrameBuilder) -> FrameBuilder) -> Vec<u8> {
    let b = FrameBuilder::eth([2, 0, 0, 0, 0xe, 1], [2, 0, 0, 0, 0xe, 9])
        .ipv4(Ipv4Addr::new(198, 18, 9, 9), Ipv4Addr::new(198, 18, 0, 1))
        .udp(50000, 4789)
        .vxlan(100)
        .inner_eth(dmac, smac)
        .ipv4(Ipv4Addr::from(inner_src), Ipv4Addr::from(inner_dst));
    l4(b).build()
}

#[test]
fn overlay_frames_leave_as_valid_vxlan_with_the_inner_frame_intact() {
    if !tshark_or_skip("overlay_frames_leave_as_valid_vxlan_with_the_inner_frame_intact") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("fastpath-overlay-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
    let spec = std::fs::read_to_string(format!("{root}pipelines/sdn-overlay.toml")).unwrap().replace("size = 5000000\n", "size = 1000\n");
    std::fs::write(dir.join("spec.toml"), spec).unwrap();
    std::fs::write(dir.join("entries.txt"), ENTRIES).unwrap();
    let (c, s) = ([10, 0, 0, 1], [10, 0, 1, 1]);
    let (cm, sm) = ([2, 0, 0, 0, 0xc, 1], [2, 0, 0, 0, 0xc, 2]);
    let input = vec![
        vxlan(c, s, cm, sm, |b| b.tcp(40000, 80, TcpFlags::SYN, 1000, 0)),
        vxlan(s, c, sm, cm, |b| b.tcp(80, 40000, TcpFlags(0x12), 5000, 1001)),
        vxlan(c, s, cm, sm, |b| b.tcp(40000, 80, TcpFlags::ACK, 1001, 5001).payload(b"GET / HTTP/1.1\r\n\r\n")),
        vxlan(c, s, cm, sm, |b| b.udp(1234, 5001).payload(&[7; 100])),
        // Unsolicited inbound: denied, not in the output.
        vxlan(s, c, sm, cm, |b| b.tcp(80, 40001, TcpFlags::SYN, 1, 0)),
    ];
    let (inp, out) = (dir.join("in.pcap"), dir.join("out.pcap"));
    write_pcap(&inp, &input).unwrap();
    let st = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .arg("run")
        .arg(dir.join("spec.toml"))
        .arg("--entries")
        .arg(dir.join("entries.txt"))
        .arg("--port")
        .arg(format!("p0=pcap:{}", inp.display()))
        .arg("--port")
        .arg(format!("p1=pcap::{}", out.display()))
        .output()
        .unwrap();
    assert!(st.status.success(), "fastpath run failed: {}", String::from_utf8_lossy(&st.stderr));
    assert_clean(&out);
    let rows = tshark_fields(&out, &["udp.dstport", "vxlan.vni", "ip.dst", "ip.checksum.status", "tcp.flags", "eth.src"]).unwrap();
    assert_eq!(rows.len(), 4, "four frames forwarded, the unsolicited SYN denied: {rows:?}");
    let vnis = ["700", "800", "700", "700"];
    let inner_dst = ["10.0.1.1", "10.0.0.1", "10.0.1.1", "10.0.1.1"];
    let vtep = ["198.18.7.7", "198.18.8.8", "198.18.7.7", "198.18.7.7"];
    for (k, r) in rows.iter().enumerate() {
        assert_eq!(r["udp.dstport"][0], "4789", "frame {k}: {r:?}");
        assert_eq!(r["vxlan.vni"], vec![vnis[k].to_string()], "frame {k}");
        assert_eq!(r["ip.dst"], vec![vtep[k].to_string(), inner_dst[k].to_string()], "frame {k}");
        assert!(r["ip.checksum.status"].iter().all(|s| s == "1" || s == "Good"), "frame {k}: {:?}", r["ip.checksum.status"]);
    }
    // The inner frame is carried byte for byte.
    let bytes = std::fs::read(&out).unwrap();
    for (k, f) in input.iter().take(4).enumerate() {
        let inner = &f[50..];
        assert!(bytes.windows(inner.len()).any(|w| w == inner), "frame {k}: inner frame changed");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
