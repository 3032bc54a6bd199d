//! AF_PACKET (TPACKET_V3) ports on veth pairs in namespaces the tests create: exact receive
//! (VLAN tags kept), forwarding through the worker loop, own transmissions not looped back.
//! Root only (CI runs as root).

mod netns_common;

use std::time::{Duration, Instant};

use fastpath_io::af_packet::{AfPacketConfig, PacketPort, RawSocket};
use fastpath_io::netns::{Netns, VethPair};
use fastpath_io::worker::{TxAll, Worker};
use fastpath_io::Port;
use fastpath_packet::Pool;
use netns_common::{frame, recv_marked, rx_marked, skip_unless_root, vlan_tagged};

#[test]
fn packet_port_receives_exactly_the_frames_sent_vlan_tags_included() {
    if skip_unless_root() {
        return;
    }
    let a = Netns::new("fp-pa").unwrap();
    let b = Netns::new("fp-pb").unwrap();
    let _v = VethPair::new(&a, "pa0", &b, "pb0").unwrap();
    let mut pool = Pool::new(1024);
    let mut port = b.run(|| PacketPort::open("pb0", &AfPacketConfig::default())).unwrap().unwrap();
    let tx = a.run(|| RawSocket::open("pa0")).unwrap().unwrap();
    const N: u32 = 600;
    // Every third frame carries a VLAN tag; veth offloads it into metadata, the port puts it back.
    let sent: Vec<Vec<u8>> = (0..N)
        .map(|s| {
            let f = frame((s % 4) as u16, s, 60 + (s as usize * 11) % 1400);
            if s % 3 == 0 {
                vlan_tagged(&f, 100 + (s % 7) as u16)
            } else {
                f
            }
        })
        .collect();
    let mut got = Vec::new();
    for chunk in sent.chunks(100) {
        for f in chunk {
            tx.send(f).unwrap();
        }
        got.extend(rx_marked(&mut port, &mut pool, 3, chunk.len(), Duration::from_secs(5)));
    }
    assert_eq!(got.len(), N as usize);
    assert_eq!(got, sent, "same bytes (VLAN tags restored), same order");
    let st = port.stats();
    assert_eq!(st.rx_pkts, u64::from(N));
    assert_eq!(st.rx_dropped, 0);
    assert_eq!(pool.available(), 1024, "every buffer back");
}

#[test]
fn packet_ports_forward_through_the_worker_loop() {
    if skip_unless_root() {
        return;
    }
    // gen:qa0 ──▶ dut:qd0 ─(worker, TxAll(1))─▶ dut:qd1 ──▶ gen:qa1
    let gen = Netns::new("fp-pg").unwrap();
    let dut = Netns::new("fp-pd").unwrap();
    let _v0 = VethPair::new(&gen, "qa0", &dut, "qd0").unwrap();
    let _v1 = VethPair::new(&gen, "qa1", &dut, "qd1").unwrap();
    let ports = dut
        .run(|| {
            let cfg = AfPacketConfig::default();
            let p0: Box<dyn Port> = Box::new(PacketPort::open("qd0", &cfg).unwrap());
            let p1: Box<dyn Port> = Box::new(PacketPort::open("qd1", &cfg).unwrap());
            vec![p0, p1]
        })
        .unwrap();
    let mut w = Worker::new(Pool::new(2048), ports, TxAll(1));
    let (tx, rx) = gen.run(|| (RawSocket::open("qa0").unwrap(), RawSocket::open("qa1").unwrap())).unwrap();

    const N: u32 = 1000;
    let sent: Vec<Vec<u8>> = (0..N).map(|s| frame((s % 5) as u16, s, 64 + (s as usize * 29) % 1400)).collect();
    let mut received = Vec::new();
    for chunk in sent.chunks(50) {
        for f in chunk {
            tx.send(f).unwrap();
        }
        let before = w.stats().tx_pkts;
        let end = Instant::now() + Duration::from_secs(5);
        while w.stats().tx_pkts < before + chunk.len() as u64 && Instant::now() < end {
            if w.poll_once() == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        received.extend(recv_marked(&rx, chunk.len(), Duration::from_secs(5)));
    }
    assert_eq!(received.len(), N as usize, "exactly N frames at the far end");
    assert_eq!(received, sent, "contents and order unchanged");
    let st = w.stats();
    assert_eq!((st.rx_pkts, st.tx_pkts, st.tx_dropped, st.dropped), (u64::from(N), u64::from(N), 0, 0));
    assert_eq!(w.ports()[0].stats().rx_pkts, u64::from(N));
    assert_eq!(w.ports()[1].stats().tx_pkts, u64::from(N));
    assert_eq!(w.ports()[1].stats().tx_bytes, sent.iter().map(|f| f.len() as u64).sum::<u64>());
    // Our own transmissions on qd1 are not received back on qd1 (PACKET_IGNORE_OUTGOING).
    assert_eq!(w.ports()[1].stats().rx_pkts, 0);
    assert_eq!(w.pool().available(), 2048);
}

#[test]
fn open_error_names_the_interface() {
    if skip_unless_root() {
        return;
    }
    let a = Netns::new("fp-pe").unwrap();
    let e = a.run(|| PacketPort::open("lo0nope", &AfPacketConfig::default())).unwrap().unwrap_err();
    assert!(e.to_string().contains("no such interface `lo0nope`"), "{e}");
    // Bad ring geometry is refused by the kernel and reported as such.
    let cfg = AfPacketConfig { block_size: 1000, ..AfPacketConfig::default() };
    let e = a.run(|| PacketPort::open("lo", &cfg)).unwrap().unwrap_err();
    assert!(e.to_string().contains("rx ring"), "{e}");
}

#[test]
fn raw_socket_stamps_frames_when_they_arrive_not_when_they_are_read() {
    if skip_unless_root() {
        return;
    }
    let a = Netns::new("fp-pt").unwrap();
    let b = Netns::new("fp-pu").unwrap();
    let _v = VethPair::new(&a, "pt0", &b, "pu0").unwrap();
    let tx = a.run(|| RawSocket::open("pt0")).unwrap().unwrap();
    let rx = b.run(|| RawSocket::open("pu0")).unwrap().unwrap();
    rx.enable_rx_timestamps().unwrap();
    // The kernel turns receive stamping on from a work item, shortly after the first socket
    // asks for it (`net_enable_timestamp`); until then frames are stamped when read.
    std::thread::sleep(Duration::from_millis(100));
    let mut buf = [0u8; 2048];
    let f = frame(3, 42, 100);
    for _ in 0..3 {
        let before = fastpath_io::sys::realtime_ns();
        tx.send(&f).unwrap();
        // Read well after the frame arrived: the stamp must still be the arrival time.
        std::thread::sleep(Duration::from_millis(50));
        let read_at = fastpath_io::sys::realtime_ns();
        let (n, stamp) = rx.recv_stamped(&mut buf, 1000).unwrap().expect("the frame arrives");
        assert_eq!(&buf[..n], &f[..]);
        let stamp = stamp.expect("SO_TIMESTAMPNS gives a stamp");
        assert!(stamp >= before, "stamp {stamp} before the send at {before}");
        assert!(stamp < read_at - 30_000_000, "stamp {stamp} is not the arrival time (read at {read_at})");
    }
    // Without timestamps on, no stamp.
    let plain = b.run(|| RawSocket::open("pu0")).unwrap().unwrap();
    tx.send(&f).unwrap();
    let (_, stamp) = plain.recv_stamped(&mut buf, 1000).unwrap().expect("the frame arrives");
    assert_eq!(stamp, None);
}
