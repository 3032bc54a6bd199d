//! The capture files in `testdata/pcap/` are generated here, and this test keeps them honest:
//! it regenerates each one in memory and fails when the committed bytes differ. Regenerate
//! after an intended change with
//!
//! ```text
//! FASTPATH_REGEN_TESTDATA=1 cargo test -p fastpath-io --test pcap_testdata
//! ```
//!
//! Every generated file is also read back by `PcapSource` and, when tshark is installed, checked
//! by it with checksum validation on. `testdata/pcap/README.md` says what each file holds.

use std::borrow::Cow;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fastpath_io::mem::{Encap, FrameSizes, MemSource, ProtoMix, TrafficProfile};
use fastpath_io::pcap::{PcapErrorKind, PcapSink, PcapSource, SinkClock};
use fastpath_io::worker::{RunEnd, TxAll, Worker};
use fastpath_io::Port;
use fastpath_packet::{testutil, Batch, Pool};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcap")
}

#[derive(Clone)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `pkts` packets of `p`, through a worker, into classic-pcap bytes (deterministic stamps).
fn generate(p: &TrafficProfile, pkts: u64) -> Vec<u8> {
    let buf = Shared(Arc::new(Mutex::new(Vec::new())));
    let ports: Vec<Box<dyn Port>> = vec![
        Box::new(MemSource::new("gen", p).unwrap().with_limit(pkts)),
        Box::new(PcapSink::from_writer("out", "mem", buf.clone()).unwrap().with_clock(SinkClock::Sequence)),
    ];
    let mut w = Worker::new(Pool::new(1024), ports, TxAll(1));
    assert_eq!(w.run_until_exhausted(), RunEnd::Exhausted);
    drop(w);
    let out = buf.0.lock().unwrap().clone();
    out
}

fn frames_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut src = PcapSource::from_reader("in", "mem", std::io::Cursor::new(bytes.to_vec())).unwrap();
    let mut pool = Pool::new(256);
    let mut b = Batch::new();
    let mut out = Vec::new();
    while !src.is_exhausted() {
        b.clear();
        src.rx_burst(&mut pool, &mut b, 0);
        out.extend(b.handles().iter().map(|&h| pool.data(h).to_vec()));
        pool.free_bulk(b.handles());
    }
    out
}

fn ng_of(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let idb =
        InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![InterfaceDescriptionOption::IfTsResol(9)] };
    w.write_pcapng_block(idb).unwrap();
    for (k, f) in frames.iter().enumerate() {
        let epb = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_micros(k as u64),
            original_len: f.len() as u32,
            data: Cow::Borrowed(f),
            options: vec![],
        };
        w.write_pcapng_block(epb).unwrap();
    }
    w.into_inner()
}

fn udp64() -> TrafficProfile {
    TrafficProfile { flows: 16, ..Default::default() }
}

fn mix() -> TrafficProfile {
    TrafficProfile {
        flows: 24,
        frame_sizes: FrameSizes::Imix,
        proto: ProtoMix { udp: 2, tcp: 1, icmp: 1, ipv6_percent: 25, ..Default::default() },
        seed: 5,
        ..Default::default()
    }
}

fn qinq() -> TrafficProfile {
    TrafficProfile {
        flows: 8,
        frame_sizes: FrameSizes::Fixed(128),
        proto: ProtoMix { encap: Encap::QinQ { s_vid: 100, c_vid: 10, c_per_s: 4 }, ..Default::default() },
        ..Default::default()
    }
}

fn vxlan() -> TrafficProfile {
    TrafficProfile {
        flows: 6,
        frame_sizes: FrameSizes::Fixed(160),
        proto: ProtoMix {
            tcp: 1,
            encap: Encap::Vxlan {
                vni: 7000,
                vnis: 2,
                outer_src_mac: [2, 0, 0, 0, 9, 1],
                outer_dst_mac: [2, 0, 0, 0, 9, 2],
                outer_src: Ipv4Addr::new(198, 18, 200, 1),
                outer_dst: Ipv4Addr::new(198, 19, 200, 1),
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Every file: name and bytes.
fn files() -> Vec<(&'static str, Vec<u8>)> {
    let udp = generate(&udp64(), 32);
    let mix = generate(&mix(), 48);
    // Cut inside record 10 (each record is 16 + 64 bytes after the 24-byte header).
    let truncated = udp[..24 + 9 * 80 + 20].to_vec();
    let mix_ng = ng_of(&frames_of(&mix));
    vec![
        ("udp64-16flows.pcap", udp),
        ("mix-imix-v4v6.pcap", mix),
        ("mix-imix-v4v6.pcapng", mix_ng),
        ("qinq-8subs.pcap", generate(&qinq(), 8)),
        ("vxlan-6flows.pcap", generate(&vxlan(), 6)),
        ("truncated-udp64.pcap", truncated),
    ]
}

#[test]
fn committed_captures_match_their_generator() {
    let regen = std::env::var_os("FASTPATH_REGEN_TESTDATA").is_some();
    for (name, bytes) in files() {
        let path = dir().join(name);
        if regen {
            std::fs::create_dir_all(dir()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(committed == bytes, "{name} differs from its generator (see the module doc to regenerate)");
    }
}

#[test]
fn committed_captures_read_back() {
    let count = |name: &str| {
        let src = PcapSource::open("in", dir().join(name)).unwrap();
        let mut pool = Pool::new(64);
        let mut b = Batch::new();
        let mut src = src;
        let mut n = 0;
        while !src.is_exhausted() {
            b.clear();
            n += src.rx_burst(&mut pool, &mut b, 0);
            pool.free_bulk(b.handles());
        }
        (n, src.error().map(|e| e.kind.to_string()))
    };
    assert_eq!(count("udp64-16flows.pcap"), (32, None));
    assert_eq!(count("mix-imix-v4v6.pcap"), (48, None));
    assert_eq!(count("mix-imix-v4v6.pcapng"), (48, None));
    assert_eq!(count("qinq-8subs.pcap"), (8, None));
    assert_eq!(count("vxlan-6flows.pcap"), (6, None));
    let (n, e) = count("truncated-udp64.pcap");
    assert_eq!(n, 9);
    assert_eq!(e, Some(PcapErrorKind::Truncated { at_byte: 744, after_pkts: 9 }.to_string()));
    assert_eq!(
        frames_of(&std::fs::read(dir().join("mix-imix-v4v6.pcapng")).unwrap()),
        frames_of(&std::fs::read(dir().join("mix-imix-v4v6.pcap")).unwrap()),
        "the pcapng holds the same frames as the pcap"
    );
}

#[test]
fn committed_captures_are_clean_for_tshark() {
    if !testutil::tshark_or_skip("committed_captures_are_clean_for_tshark") {
        return;
    }
    for name in ["mix-imix-v4v6.pcap", "mix-imix-v4v6.pcapng", "vxlan-6flows.pcap"] {
        testutil::assert_clean(&dir().join(name));
    }
}
