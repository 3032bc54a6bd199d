//! PcapSource / PcapSink against files written by an independent encoder (the `pcap-file` 2.0
//! crate) and against bytes assembled here field by field from the format drafts
//! (draft-ietf-opsawg-pcap, draft-ietf-opsawg-pcapng).

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Duration;

use fastpath_io::pcap::{PcapErrorKind, PcapFormat, PcapSink, PcapSource, SinkClock};
use fastpath_io::worker::{RunEnd, TxAll, Worker};
use fastpath_io::Port;
use fastpath_packet::pool::MAX_FRAME;
use fastpath_packet::{Batch, Pool};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, Endianness, TsResolution};

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("io-pcap");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Frame `k`: `len` bytes, byte `i` = `k*7 + i` (distinct per frame and position).
fn frame(k: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (k * 7 + i) as u8).collect()
}

/// Frame lengths used by the fixtures: minimum, odd, typical, jumbo-ish (over MAX_FRAME).
const LENS: [usize; 6] = [60, 61, 128, 1514, 3000, 14];

fn frames() -> Vec<Vec<u8>> {
    LENS.iter().enumerate().map(|(k, &l)| frame(k, l)).collect()
}

/// Timestamp of frame `k`: distinct seconds and a sub-µs part only ns files keep.
fn ts(k: usize) -> Duration {
    Duration::new(1_700_000_000 + k as u64, 123_456_789 + k as u32 * 1000)
}

fn classic_bytes(endianness: Endianness, res: TsResolution, frames: &[Vec<u8>]) -> Vec<u8> {
    let header = PcapHeader { endianness, ts_resolution: res, datalink: DataLink::ETHERNET, ..PcapHeader::default() };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    for (k, f) in frames.iter().enumerate() {
        w.write_packet(&PcapPacket::new(ts(k), f.len() as u32, f)).unwrap();
    }
    w.into_writer()
}

fn ng_bytes(endianness: Endianness, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut w = PcapNgWriter::with_endianness(Vec::new(), endianness).unwrap();
    // pcap-file writes EPB timestamps in ns, so the interface must say so (if_tsresol = 9).
    let idb =
        InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options: vec![InterfaceDescriptionOption::IfTsResol(9)] };
    w.write_pcapng_block(idb).unwrap();
    for (k, f) in frames.iter().enumerate() {
        let epb = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: ts(k),
            original_len: f.len() as u32,
            data: Cow::Borrowed(f),
            options: vec![],
        };
        w.write_pcapng_block(epb).unwrap();
    }
    w.into_inner()
}

/// Reads everything; returns frames, timestamps and the source.
fn read_all(bytes: Vec<u8>) -> (Vec<Vec<u8>>, Vec<u64>, PcapSource) {
    drain(PcapSource::from_reader("in", "in.pcap", std::io::Cursor::new(bytes)).unwrap())
}

fn drain(mut src: PcapSource) -> (Vec<Vec<u8>>, Vec<u64>, PcapSource) {
    let mut pool = Pool::new(16);
    let mut b = Batch::new();
    let (mut out, mut tss) = (Vec::new(), Vec::new());
    // Small batches (pool of 16) exercise many rx_burst calls.
    while !src.is_exhausted() {
        b.clear();
        let n = src.rx_burst(&mut pool, &mut b, 3);
        assert_eq!(n, b.len());
        for i in 0..b.len() {
            assert_eq!(b.meta(i).in_port, 3);
            out.push(pool.data(b.handle(i)).to_vec());
            tss.push(src.rx_timestamp_ns(i));
        }
        pool.free_bulk(b.handles());
    }
    assert_eq!(pool.available(), 16, "source leaked buffers");
    (out, tss, src)
}

fn expected_frames() -> Vec<Vec<u8>> {
    frames()
        .into_iter()
        .map(|mut f| {
            f.truncate(MAX_FRAME);
            f
        })
        .collect()
}

fn ns(k: usize) -> u64 {
    ts(k).as_nanos() as u64
}

#[test]
fn classic_little_endian_microseconds() {
    let (got, tss, src) = read_all(classic_bytes(Endianness::Little, TsResolution::MicroSecond, &frames()));
    assert_eq!(src.format(), PcapFormat::Classic { big_endian: false, nanos: false });
    assert_eq!(got, expected_frames());
    // µs files lose the sub-µs digits.
    assert_eq!(tss, (0..LENS.len()).map(|k| ns(k) / 1000 * 1000).collect::<Vec<_>>());
    assert_eq!(src.snapped_pkts(), 1, "the 3000-byte frame is cut to MAX_FRAME");
    assert!(src.error().is_none());
    let s = src.stats();
    assert_eq!(s.rx_pkts, LENS.len() as u64);
    assert_eq!(s.rx_bytes, expected_frames().iter().map(|f| f.len() as u64).sum::<u64>());
}

#[test]
fn classic_big_endian_nanoseconds() {
    let (got, tss, src) = read_all(classic_bytes(Endianness::Big, TsResolution::NanoSecond, &frames()));
    assert_eq!(src.format(), PcapFormat::Classic { big_endian: true, nanos: true });
    assert_eq!(got, expected_frames());
    assert_eq!(tss, (0..LENS.len()).map(ns).collect::<Vec<_>>());
}

#[test]
fn classic_little_endian_nanoseconds() {
    let (got, tss, _) = read_all(classic_bytes(Endianness::Little, TsResolution::NanoSecond, &frames()));
    assert_eq!(got, expected_frames());
    assert_eq!(tss, (0..LENS.len()).map(ns).collect::<Vec<_>>());
}

/// A big-endian µs file written out by hand, field by field.
#[rustfmt::skip]
const HAND_BE: &[u8] = &[
    0xa1, 0xb2, 0xc3, 0xd4,   // magic, big-endian, µs
    0x00, 0x02, 0x00, 0x04,   // version 2.4
    0, 0, 0, 0,               // thiszone
    0, 0, 0, 0,               // sigfigs
    0x00, 0x00, 0xff, 0xff,   // snaplen 65535
    0x00, 0x00, 0x00, 0x01,   // linktype 1 = Ethernet
    // record 0
    0x00, 0x00, 0x00, 0x05,   // ts_sec 5
    0x00, 0x00, 0x00, 0x07,   // ts_usec 7
    0x00, 0x00, 0x00, 0x0e,   // incl_len 14
    0x00, 0x00, 0x00, 0x40,   // orig_len 64
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff,   // dst MAC broadcast
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,   // src MAC
    0x08, 0x06,                           // EtherType ARP
];

#[test]
fn classic_big_endian_hand_written() {
    let (got, tss, src) = read_all(HAND_BE.to_vec());
    assert_eq!(src.format(), PcapFormat::Classic { big_endian: true, nanos: false });
    assert_eq!(got, vec![HAND_BE[40..54].to_vec()]);
    assert_eq!(tss, vec![5_000_007_000]);
}

#[test]
fn pcapng_from_independent_writer_both_byte_orders() {
    for e in [Endianness::Little, Endianness::Big] {
        let (got, tss, src) = read_all(ng_bytes(e, &frames()));
        assert_eq!(src.format(), PcapFormat::Ng);
        assert_eq!(got, expected_frames(), "{e:?}");
        assert_eq!(tss, (0..LENS.len()).map(ns).collect::<Vec<_>>(), "{e:?}");
        assert!(src.error().is_none());
    }
}

/// pcapng blocks assembled by hand (little-endian): SHB, an unknown block that must be skipped,
/// IDB with if_tsresol = 2^-10 s, a Simple Packet Block, an obsolete Packet Block, a second
/// section (big-endian) with its own IDB (µs default) and an EPB.
fn block(le: bool, ty: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    while !body.len().is_multiple_of(4) {
        body.push(0);
    }
    let total = (body.len() + 12) as u32;
    let w = |x: u32| if le { x.to_le_bytes() } else { x.to_be_bytes() };
    let mut b = w(ty).to_vec();
    b.extend(w(total));
    b.extend(body);
    b.extend(w(total));
    b
}

fn hand_ng() -> (Vec<u8>, Vec<Vec<u8>>, Vec<u64>) {
    let (f0, f1, f2) = (frame(0, 60), frame(1, 75), frame(2, 100));
    let mut v = Vec::new();
    // Section 1, little-endian.
    let mut shb = 0x1A2B_3C4Du32.to_le_bytes().to_vec();
    shb.extend([1, 0, 0, 0]); // version 1.0
    shb.extend((-1i64).to_le_bytes()); // section length unknown
    v.extend(block(true, 0x0A0D_0D0A, &shb));
    v.extend(block(true, 0x0BAD, &[1, 2, 3, 4, 5])); // unknown type: skipped
    let mut idb = 1u16.to_le_bytes().to_vec(); // linktype Ethernet
    idb.extend([0, 0]);
    idb.extend(0u32.to_le_bytes()); // snaplen 0 = none
    idb.extend(9u16.to_le_bytes()); // if_tsresol
    idb.extend(1u16.to_le_bytes());
    idb.extend([0x80 | 10, 0, 0, 0]); // 2^-10 s
    idb.extend([0, 0, 0, 0]); // opt_endofopt
    v.extend(block(true, 1, &idb));
    let mut spb = (f0.len() as u32).to_le_bytes().to_vec();
    spb.extend(&f0);
    v.extend(block(true, 3, &spb));
    let mut pb = 0u16.to_le_bytes().to_vec(); // interface 0
    pb.extend(0u16.to_le_bytes()); // drops
    pb.extend(0u32.to_le_bytes()); // ts high
    pb.extend(3072u32.to_le_bytes()); // ts low: 3 s in 2^-10 units
    pb.extend((f1.len() as u32).to_le_bytes());
    pb.extend((f1.len() as u32).to_le_bytes());
    pb.extend(&f1);
    v.extend(block(true, 2, &pb));
    // Section 2, big-endian.
    let mut shb = 0x1A2B_3C4Du32.to_be_bytes().to_vec();
    shb.extend([0, 1, 0, 0]);
    shb.extend((-1i64).to_be_bytes());
    v.extend(block(false, 0x0A0D_0D0A, &shb));
    let mut idb = 1u16.to_be_bytes().to_vec();
    idb.extend([0, 0]);
    idb.extend(65535u32.to_be_bytes());
    v.extend(block(false, 1, &idb));
    let mut epb = 0u32.to_be_bytes().to_vec();
    epb.extend(0u32.to_be_bytes());
    epb.extend(2_500_000u32.to_be_bytes()); // 2.5 s in µs
    epb.extend((f2.len() as u32).to_be_bytes());
    epb.extend(1500u32.to_be_bytes());
    epb.extend(&f2);
    v.extend(block(false, 6, &epb));
    (v, vec![f0, f1, f2], vec![0, 3_000_000_000, 2_500_000_000])
}

#[test]
fn pcapng_hand_written_blocks_and_sections() {
    let (bytes, want, want_ts) = hand_ng();
    let (got, tss, src) = read_all(bytes);
    assert_eq!(got, want);
    assert_eq!(tss, want_ts);
    assert!(src.error().is_none(), "{:?}", src.error());
}

/// Cuts a file at every byte: the complete records before the cut are delivered, then the
/// error names the byte where the cut record starts and the packets before it.
fn check_every_cut(bytes: &[u8], header_len: usize, record_starts: &[usize]) {
    for cut in header_len..bytes.len() {
        let src = PcapSource::from_reader("in", "cut.pcap", std::io::Cursor::new(bytes[..cut].to_vec()));
        let src = match src {
            Ok(s) => s,
            Err(e) => panic!("open failed at cut {cut}: {e}"),
        };
        let (got, _, src) = drain(src);
        let complete = record_starts.iter().skip(1).filter(|&&s| s <= cut).count();
        assert_eq!(got.len(), complete, "cut at {cut}");
        assert_eq!(got, expected_frames()[..complete].to_vec());
        if record_starts.contains(&cut) {
            assert!(src.error().is_none(), "clean cut at {cut}: {:?}", src.error());
        } else {
            let e = src.error().unwrap_or_else(|| panic!("no error at cut {cut}"));
            match e.kind {
                PcapErrorKind::Truncated { at_byte, after_pkts } => {
                    assert_eq!(at_byte as usize, record_starts[complete], "cut at {cut}");
                    assert_eq!(after_pkts as usize, complete);
                }
                ref k => panic!("cut at {cut}: {k:?}"),
            }
        }
    }
}

#[test]
fn truncated_classic_delivers_what_came_before() {
    let bytes = classic_bytes(Endianness::Little, TsResolution::MicroSecond, &frames());
    let mut starts = vec![24];
    for l in LENS {
        starts.push(starts.last().unwrap() + 16 + l);
    }
    assert_eq!(*starts.last().unwrap(), bytes.len());
    check_every_cut(&bytes, 24, &starts);
}

#[test]
fn truncated_pcapng_delivers_what_came_before() {
    let bytes = ng_bytes(Endianness::Big, &frames());
    // SHB (28) + IDB with one option (20 + 8 + 4 end) ; then EPBs of 32 + padded data.
    let shb = 28;
    let idb = 20 + 8 + 4;
    let mut starts = vec![shb + idb];
    for l in LENS {
        starts.push(starts.last().unwrap() + 32 + l.div_ceil(4) * 4);
    }
    assert_eq!(*starts.last().unwrap(), bytes.len());
    // Cuts inside the first packet are found at open (the source reads ahead one packet).
    check_every_cut(&bytes, shb + idb, &starts);
}

#[test]
fn truncated_message_is_clear() {
    let bytes = classic_bytes(Endianness::Little, TsResolution::MicroSecond, &frames());
    let cut = 24 + 16 + 60 + 16 + 61 + 20; // inside record 2
    let src = PcapSource::from_reader("in", "in.pcap", std::io::Cursor::new(bytes[..cut].to_vec())).unwrap();
    let (got, _, src) = drain(src);
    assert_eq!(got.len(), 2);
    assert_eq!(src.error().unwrap().to_string(), "in.pcap: truncated record at byte 177 after 2 packets");
}

#[test]
fn corrupt_length_stops_with_an_error() {
    let mut bytes = classic_bytes(Endianness::Little, TsResolution::MicroSecond, &frames());
    let rec1 = 24 + 16 + 60;
    bytes[rec1 + 8..rec1 + 12].copy_from_slice(&4_000_000u32.to_le_bytes());
    let (got, _, src) = read_all(bytes);
    assert_eq!(got, expected_frames()[..1].to_vec());
    assert_eq!(
        src.error().unwrap().to_string(),
        "in.pcap: corrupt record at byte 100 after 1 packets: captured length 4000000 exceeds 262144"
    );
}

#[test]
fn corrupt_pcapng_trailer_and_interface() {
    let good = ng_bytes(Endianness::Little, &frames());
    let first_epb = 28 + 32;
    let second_epb = first_epb + 32 + 60;
    // Trailer of the second EPB disagrees with its header.
    let mut bad = good.clone();
    let trailer = second_epb + 32 + 64 - 4;
    bad[trailer] ^= 0x40;
    let (got, _, src) = read_all(bad);
    assert_eq!(got.len(), 1, "the damaged block's packet is not delivered");
    assert!(matches!(src.error().unwrap().kind, PcapErrorKind::Corrupt { at_byte, after_pkts: 1, .. } if at_byte as usize == second_epb));
    // An EPB naming an interface that was never declared.
    let mut bad = good;
    bad[second_epb + 8] = 5;
    let (got, _, src) = read_all(bad);
    assert_eq!(got.len(), 1);
    assert!(src.error().unwrap().to_string().ends_with("interface 5 not declared"), "{}", src.error().unwrap());
}

#[test]
fn not_a_capture_file() {
    let e = PcapSource::from_reader("in", "x.txt", std::io::Cursor::new(b"hello world, no pcap here".to_vec())).err().unwrap();
    assert_eq!(e.to_string(), "x.txt: not a pcap or pcapng file (magic 0x68656c6c)");
    let e = PcapSource::from_reader("in", "empty.pcap", std::io::Cursor::new(Vec::new())).err().unwrap();
    assert!(matches!(e.kind, PcapErrorKind::Truncated { at_byte: 0, after_pkts: 0 }));
    let e = PcapSource::open("in", tmp("does-not-exist.pcap")).err().unwrap();
    assert!(matches!(e.kind, PcapErrorKind::Io(_)));
    assert!(e.to_string().contains("does-not-exist.pcap"));
}

#[test]
fn non_ethernet_link_types_are_refused_at_open() {
    let header = PcapHeader { datalink: DataLink::IEEE802_11, ..PcapHeader::default() };
    let bytes = PcapWriter::with_header(Vec::new(), header).unwrap().into_writer();
    let e = PcapSource::from_reader("in", "wifi.pcap", std::io::Cursor::new(bytes)).err().unwrap();
    assert_eq!(e.to_string(), "wifi.pcap: link type 105 is not Ethernet (1)");

    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::IEEE802_11, 0)).unwrap();
    let e = PcapSource::from_reader("in", "wifi.pcapng", std::io::Cursor::new(w.into_inner())).err().unwrap();
    assert_eq!(e.to_string(), "wifi.pcapng: link type 105 is not Ethernet (1)");
}

/// pcap file ▸ worker (identity: everything to port 1) ▸ pcap file, read back by an independent
/// decoder: identical frames, in order.
#[test]
fn round_trip_through_worker_is_identical() {
    let inp = tmp("rt-in.pcap");
    let out = tmp("rt-out.pcap");
    // 600 frames: several full batches and a partial one.
    let many: Vec<Vec<u8>> = (0..600).map(|k| frame(k, 60 + k % 1400)).collect();
    std::fs::write(&inp, classic_bytes(Endianness::Big, TsResolution::NanoSecond, &many)).unwrap();
    let ports: Vec<Box<dyn Port>> = vec![
        Box::new(PcapSource::open("in", &inp).unwrap()),
        Box::new(PcapSink::create("out", &out).unwrap().with_clock(SinkClock::Sequence)),
    ];
    let mut w = Worker::new(Pool::new(300), ports, TxAll(1));
    assert_eq!(w.run_until_exhausted(), RunEnd::Exhausted);
    assert_eq!(w.stats().rx_pkts, 600);
    assert_eq!(w.stats().tx_pkts, 600);
    assert_eq!(w.pool().available(), 300, "no leaked buffers");
    assert!(w.ports().iter().all(|p| p.error().is_none()));
    drop(w);

    let mut r = PcapReader::new(std::fs::File::open(&out).unwrap()).unwrap();
    assert_eq!(r.header().datalink, DataLink::ETHERNET);
    let mut k = 0;
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        assert_eq!(&*p.data, &many[k][..], "frame {k}");
        assert_eq!(p.orig_len as usize, many[k].len());
        assert_eq!(p.timestamp, Duration::from_micros(k as u64));
        k += 1;
    }
    assert_eq!(k, 600);
}

/// A damaged input still yields an output with every packet before the damage, and the damage
/// is reported through the port's `error()` after the run.
#[test]
fn damaged_input_still_writes_output() {
    let inp = tmp("dmg-in.pcap");
    let out = tmp("dmg-out.pcap");
    let bytes = classic_bytes(Endianness::Little, TsResolution::MicroSecond, &frames());
    let cut = bytes.len() - 5; // inside the last record
    std::fs::write(&inp, &bytes[..cut]).unwrap();
    let ports: Vec<Box<dyn Port>> = vec![Box::new(PcapSource::open("in", &inp).unwrap()), Box::new(PcapSink::create("out", &out).unwrap())];
    let mut w = Worker::new(Pool::new(64), ports, TxAll(1));
    assert_eq!(w.run_until_exhausted(), RunEnd::Exhausted);
    let msg = w.ports()[0].error().map(|e| e.to_string()).unwrap();
    assert!(msg.contains("dmg-in.pcap: truncated record at byte"), "{msg}");
    assert!(msg.ends_with("after 5 packets"), "{msg}");
    drop(w);
    let mut r = PcapReader::new(std::fs::File::open(&out).unwrap()).unwrap();
    let mut got = Vec::new();
    while let Some(p) = r.next_packet() {
        got.push(p.unwrap().data.to_vec());
    }
    assert_eq!(got, expected_frames()[..5].to_vec());
}

#[test]
fn sink_reports_write_errors_and_refuses_afterwards() {
    struct Full(usize);
    impl std::io::Write for Full {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0 < b.len() {
                return Err(std::io::Error::other("disk full"));
            }
            self.0 -= b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut pool = Pool::new(4);
    // Room for the header only: the first flush fails.
    let mut sink = PcapSink::from_writer("out", "full.pcap", Full(24)).unwrap();
    let h = pool.alloc().unwrap();
    pool.set_data(h, &frame(0, 60));
    assert_eq!(sink.tx_burst(&mut pool, &[h]), 1, "buffered");
    assert!(sink.flush(&mut pool).is_err());
    assert!(sink.error().unwrap().to_string().starts_with("full.pcap: disk full"));
    let h = pool.alloc().unwrap();
    assert_eq!(sink.tx_burst(&mut pool, &[h]), 0, "a failed sink accepts nothing");
    pool.free(h);
    assert_eq!(pool.available(), 4);
}
