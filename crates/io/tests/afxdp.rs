//! AF_XDP ports on veth pairs in namespaces the tests create: open/close, exact receive,
//! forwarding between two ports sharing one UMEM, and error messages. Root only (CI runs as root).

mod netns_common;

use std::time::{Duration, Instant};

use fastpath_io::af_packet::RawSocket;
use fastpath_io::af_xdp::{XdpConfig, XdpError, XdpMode, XdpPort, ZeroCopy};
use fastpath_io::bpf::XdpAttachMode;
use fastpath_io::netns::{Netns, VethPair};
use fastpath_io::Port;
use fastpath_packet::{Batch, PktId, Pool};
use netns_common::{frame, recv_marked, rx_marked, skip_unless_root, vlan_tagged};

#[test]
fn xdp_port_receives_exactly_the_frames_sent() {
    if skip_unless_root() {
        return;
    }
    let a = Netns::new("fp-xa").unwrap();
    let b = Netns::new("fp-xb").unwrap();
    let _v = VethPair::new(&a, "xa0", &b, "xb0").unwrap();
    let mut pool = Pool::new(4096);
    let mut port = b.run(|| XdpPort::open("xb0", 0, &XdpConfig::default(), &mut pool)).unwrap().unwrap();
    let info = port.mode_info();
    assert_eq!(info.attach, XdpAttachMode::Native, "veth has native XDP");
    assert!(!info.zero_copy, "veth is copy mode only");
    assert!(b.ip(&["link", "show", "xb0"]).unwrap().contains("xdp"));
    let free_after_open = pool.available();
    assert_eq!(free_after_open, 4096 - 2048, "fill ring holds fill_size buffers");

    let tx = a.run(|| RawSocket::open("xa0")).unwrap().unwrap();
    const N: u32 = 500;
    // Every third frame carries an 802.1Q tag: XDP sees frames as they are on the wire.
    let sent: Vec<Vec<u8>> = (0..N)
        .map(|s| {
            let f = frame(0, s, 60 + (s as usize * 7) % 1400);
            if s % 3 == 0 {
                vlan_tagged(&f, 200 + (s % 5) as u16)
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
        got.extend(rx_marked(&mut port, &mut pool, 0, chunk.len(), Duration::from_secs(5)));
    }
    assert_eq!(got.len(), N as usize);
    assert_eq!(got, sent, "same bytes, same order");
    let st = port.stats();
    assert_eq!(st.rx_pkts, u64::from(N));
    assert_eq!(st.rx_bytes, sent.iter().map(|f| f.len() as u64).sum::<u64>());
    assert_eq!(st.rx_dropped, 0);
    // Every buffer is either free or lent to the fill ring again.
    assert_eq!(pool.available(), free_after_open);

    drop(port);
    assert!(!b.ip(&["link", "show", "xb0"]).unwrap().contains("xdp"), "program detached on close");
}

#[test]
fn xdp_forwarding_between_two_ports_sharing_one_umem() {
    if skip_unless_root() {
        return;
    }
    // gen:ga0 ──▶ dut:da0 ─(AF_XDP forward)─▶ dut:da1 ──▶ gen:ga1
    let gen = Netns::new("fp-xg").unwrap();
    let dut = Netns::new("fp-xd").unwrap();
    let _v0 = VethPair::new(&gen, "ga0", &dut, "da0").unwrap();
    let _v1 = VethPair::new(&gen, "ga1", &dut, "da1").unwrap();
    let mut pool = Pool::new(8192);
    let cfg = XdpConfig { mode: XdpMode::Skb, zero_copy: ZeroCopy::No, ..XdpConfig::default() };
    let (mut p0, mut p1) = dut
        .run(|| {
            let p0 = XdpPort::open("da0", 0, &cfg, &mut pool)?;
            let p1 = XdpPort::open("da1", 0, &cfg, &mut pool)?;
            Ok::<_, XdpError>((p0, p1))
        })
        .unwrap()
        .unwrap();
    assert!(!p0.mode_info().shared_umem);
    assert!(p1.mode_info().shared_umem, "second port on the pool shares the UMEM");
    assert_eq!(p1.mode_info().attach, XdpAttachMode::Skb);
    let (tx, rx) = gen.run(|| (RawSocket::open("ga0").unwrap(), RawSocket::open("ga1").unwrap())).unwrap();

    const N: u32 = 1000;
    let sent: Vec<Vec<u8>> = (0..N).map(|s| frame((s % 8) as u16, s, 64 + (s as usize * 13) % 1000)).collect();
    let mut received = Vec::new();
    let mut batch = Batch::new();
    let mut forwarded = 0u64;
    for chunk in sent.chunks(50) {
        for f in chunk {
            tx.send(f).unwrap();
        }
        let end = Instant::now() + Duration::from_secs(5);
        let mut moved = 0;
        while moved < chunk.len() && Instant::now() < end {
            batch.clear();
            p0.rx_burst(&mut pool, &mut batch, 0);
            let hs: Vec<PktId> = batch.handles().to_vec();
            let n = p1.tx_burst(&mut pool, &hs);
            pool.free_bulk(&hs[n..]);
            moved += n;
            if hs.is_empty() {
                p1.flush(&mut pool).unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        p1.flush(&mut pool).unwrap();
        forwarded += moved as u64;
        received.extend(recv_marked(&rx, chunk.len(), Duration::from_secs(5)));
    }
    assert_eq!(forwarded, u64::from(N));
    assert_eq!(received.len(), N as usize, "exactly N frames at the far end");
    assert_eq!(received, sent, "contents and order unchanged");
    assert_eq!(p1.stats().tx_pkts, u64::from(N));
    assert_eq!(p1.stats().tx_bytes, sent.iter().map(|f| f.len() as u64).sum::<u64>());
    // Completions have come back: nothing leaks (2 fill rings of 2048 are lent out).
    let end = Instant::now() + Duration::from_secs(2);
    while pool.available() != 8192 - 4096 && Instant::now() < end {
        p1.flush(&mut pool).unwrap();
    }
    assert_eq!(pool.available(), 8192 - 4096);
    // Closing the sharing port, then the UMEM owner, returns every lent buffer.
    p1.close(&mut pool);
    p0.close(&mut pool);
    assert_eq!(pool.available(), 8192);
}

#[test]
fn open_errors_say_what_and_what_to_try() {
    if skip_unless_root() {
        return;
    }
    let a = Netns::new("fp-xe").unwrap();
    let b = Netns::new("fp-xe").unwrap();
    let _v = VethPair::new(&a, "xe0", &b, "xe1").unwrap();
    let mut pool = Pool::new(4096);
    // The interface exists in `a`, not in this namespace's view from `b`.
    let e = b.run(|| XdpPort::open("xe0", 0, &XdpConfig::default(), &mut pool)).unwrap().unwrap_err();
    assert!(matches!(e, XdpError::NoSuchInterface { .. }), "{e}");
    assert!(e.to_string().contains("no such interface `xe0`"));
    // Queue 5 does not exist on a single-queue veth.
    let e = a.run(|| XdpPort::open("xe0", 5, &XdpConfig::default(), &mut pool)).unwrap().unwrap_err();
    assert!(e.to_string().contains("queue 5"), "{e}");
    // veth has no zero copy: `Yes` fails with a hint, `Auto` falls back.
    let cfg = XdpConfig { zero_copy: ZeroCopy::Yes, ..XdpConfig::default() };
    let e = a.run(|| XdpPort::open("xe0", 0, &cfg, &mut pool)).unwrap().unwrap_err();
    assert!(e.to_string().contains("--zero-copy no"), "{e}");
    // After the failed attempts the port opens with the defaults (copy mode fallback).
    let p = a.run(|| XdpPort::open("xe0", 0, &XdpConfig::default(), &mut pool)).unwrap();
    assert!(p.is_ok(), "{:?}", p.err());
}

#[test]
fn queue_is_exclusive_and_reusable_after_close() {
    if skip_unless_root() {
        return;
    }
    let a = Netns::new("fp-xq").unwrap();
    let b = Netns::new("fp-xq").unwrap();
    let _v = VethPair::new(&a, "xq0", &b, "xq1").unwrap();
    let mut pool = Pool::new(4096);
    let mut other = Pool::new(4096);
    let cfg = XdpConfig::default();
    for _ in 0..3 {
        let p = a.run(|| XdpPort::open("xq0", 0, &cfg, &mut pool)).unwrap().unwrap();
        // A second socket (another pool, so another UMEM) cannot take the same queue.
        let e = a.run(|| XdpPort::open("xq0", 0, &cfg, &mut other)).unwrap().unwrap_err();
        assert!(matches!(e, XdpError::QueueBusy { .. }), "{e}");
        assert!(e.to_string().contains("queue 0 is taken"), "{e}");
        // Bursts with a pool that is not the port's UMEM do nothing and count an error.
        let mut p = p;
        let mut batch = Batch::new();
        assert_eq!(p.rx_burst(&mut other, &mut batch, 0), 0);
        let h = other.alloc().unwrap();
        assert_eq!(p.tx_burst(&mut other, &[h]), 0);
        other.free(h);
        assert_eq!(p.stats().errors, 2);
        // An empty frame is refused (the kernel would never complete it).
        let h = pool.alloc().unwrap();
        assert_eq!(p.tx_burst(&mut pool, &[h]), 0);
        pool.free(h);
        // Closing gives back every buffer the port lent to the kernel.
        p.close(&mut pool);
        assert_eq!(pool.available(), 4096);
    }
}

#[test]
fn close_returns_received_queued_and_lent_buffers() {
    if skip_unless_root() {
        return;
    }
    let a = Netns::new("fp-xc").unwrap();
    let b = Netns::new("fp-xc").unwrap();
    let _v = VethPair::new(&a, "xc0", &b, "xc1").unwrap();
    let mut pool = Pool::new(8192);
    let cfg = XdpConfig::default();
    let p0 = b.run(|| XdpPort::open("xc1", 0, &cfg, &mut pool)).unwrap().unwrap();
    // Frames arrive and stay in the rx ring (never polled).
    let tx = a.run(|| RawSocket::open("xc0")).unwrap().unwrap();
    for s in 0..10 {
        tx.send(&frame(0, s, 100)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(pool.available(), 8192 - 2048);
    let back = p0.close(&mut pool);
    assert_eq!(back, 2048, "fill ring leftovers plus the 10 frames in the rx ring");
    assert_eq!(pool.available(), 8192);
}
