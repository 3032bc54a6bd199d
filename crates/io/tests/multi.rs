//! The multi-core runtime on real ports: two pinned workers forwarding between veth pairs in
//! namespaces the tests create, flows spread by hash (AF_PACKET fanout, AF_XDP queues), every
//! frame counted and checked at the far end. Root only (CI runs as root).

mod netns_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fastpath_io::af_packet::{AfPacketConfig, RawSocket};
use fastpath_io::af_xdp::{XdpConfig, XdpMode};
use fastpath_io::multi::{self, MultiConfig, MultiReport, PortSpec};
use fastpath_io::netns::{Netns, VethPair};
use fastpath_io::worker::{Processor, Worker};
use fastpath_packet::{Batch, Pool};
use netns_common::{frame, marked_seq, recv_marked, skip_unless_root};

const FLOWS: usize = 32;

/// Forwards everything to port 1 and counts packets per flow (UDP source port - 1000).
struct FlowCount {
    seen: [u64; FLOWS],
}

impl Processor for FlowCount {
    fn process(&mut self, pool: &mut Pool, batch: &mut Batch, _now_ns: u64) {
        for i in batch.live() {
            let d = pool.data(batch.handle(i));
            if marked_seq(d).is_some() {
                if let Some(p) = d.get(34..36) {
                    let flow = usize::from(u16::from_be_bytes([p[0], p[1]])).wrapping_sub(1000);
                    if let Some(c) = self.seen.get_mut(flow) {
                        *c += 1;
                    }
                }
            }
            batch.tx(i, 1);
        }
    }
}

/// Frames sent, frames received at the far end (sorted by sequence), and the runtime's report.
type Driven = (Vec<Vec<u8>>, Vec<Vec<u8>>, MultiReport<[u64; FLOWS]>);

/// Sends `n` frames over [`FLOWS`] flows into `tx` in chunks while the runtime forwards them,
/// collects them on `rx`, then stops the runtime. Returns the received frames sorted by
/// sequence number, and the report.
fn drive(gen: &Netns, dut: &Netns, specs: Vec<PortSpec>, pool_size: usize, n: u32) -> Driven {
    let (tx, rx) = gen.run(|| (RawSocket::open("ga0").unwrap(), RawSocket::open("ga1").unwrap())).unwrap();
    let stop = AtomicBool::new(false);
    let cfg = MultiConfig { workers: 2, pin: true, netns: Some(dut.path()), idle_sleep_us: 50, ..MultiConfig::default() };
    let sent: Vec<Vec<u8>> = (0..n).map(|s| frame((s as usize % FLOWS) as u16, s, 64 + (s as usize * 17) % 1000)).collect();
    let mut received = Vec::new();
    let report = std::thread::scope(|s| {
        let rt = s.spawn(|| {
            multi::run(
                &cfg,
                &stop,
                |w| {
                    let mut pool = Pool::new(pool_size);
                    let ports = multi::open_worker_ports(&specs, w, 2, &mut pool)?;
                    Ok(Worker::new(pool, ports, FlowCount { seen: [0; FLOWS] }))
                },
                |_, w| w.processor().seen,
            )
        });
        // Give both workers time to open their ports before traffic starts.
        std::thread::sleep(Duration::from_millis(300));
        for chunk in sent.chunks(50) {
            for f in chunk {
                tx.send(f).unwrap();
            }
            received.extend(recv_marked(&rx, chunk.len(), Duration::from_secs(5)));
        }
        stop.store(true, Ordering::Relaxed);
        rt.join().unwrap()
    })
    .unwrap();
    received.sort_by_key(|f| marked_seq(f));
    (sent, received, report)
}

fn check(sent: &[Vec<u8>], received: &[Vec<u8>], report: &MultiReport<[u64; FLOWS]>) {
    println!("{}", report_text(report));
    assert_eq!(received.len(), sent.len(), "exactly N frames at the far end");
    assert_eq!(received, sent, "contents unchanged");
    let t = report.total();
    assert_eq!((t.rx_pkts, t.tx_pkts, t.tx_dropped), (sent.len() as u64, sent.len() as u64, 0));
    let ports = report.port_totals();
    assert_eq!(ports[0].1.rx_pkts, sent.len() as u64);
    assert_eq!(ports[1].1.tx_pkts, sent.len() as u64);
    // One flow stays on one worker, and flows are spread over both.
    for f in 0..FLOWS {
        let on: Vec<usize> = (0..2).filter(|&w| report.workers[w].extra[f] > 0).collect();
        assert_eq!(on.len(), 1, "flow {f} seen by workers {on:?}");
    }
    for w in 0..2 {
        assert!(report.workers[w].stats.rx_pkts > 0, "worker {w} got no flow");
    }
}

fn report_text(r: &MultiReport<[u64; FLOWS]>) -> String {
    struct Flows([u64; FLOWS]);
    impl std::fmt::Display for Flows {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "  flows: {:?}", self.0)
        }
    }
    let r2 = MultiReport {
        workers: r
            .workers
            .iter()
            .map(|w| multi::WorkerReport { worker: w.worker, core: w.core, stats: w.stats, ports: w.ports.clone(), extra: Flows(w.extra) })
            .collect(),
    };
    r2.to_string()
}

#[test]
fn two_workers_forward_af_packet_with_fanout_hash() {
    if skip_unless_root() {
        return;
    }
    let gen = Netns::new("fp-mg").unwrap();
    let dut = Netns::new("fp-md").unwrap();
    let _v0 = VethPair::new(&gen, "ga0", &dut, "da0").unwrap();
    let _v1 = VethPair::new(&gen, "ga1", &dut, "da1").unwrap();
    let specs = vec![
        PortSpec::AfPacket { iface: "da0".into(), cfg: AfPacketConfig::default(), fanout_group: 11 },
        PortSpec::AfPacket { iface: "da1".into(), cfg: AfPacketConfig::default(), fanout_group: 12 },
    ];
    let (sent, received, report) = drive(&gen, &dut, specs, 2048, 2000);
    check(&sent, &received, &report);
}

#[test]
fn two_workers_forward_af_xdp_one_queue_each() {
    if skip_unless_root() {
        return;
    }
    let gen = Netns::new("fp-mg").unwrap();
    let dut = Netns::new("fp-md").unwrap();
    let _v0 = VethPair::with_queues(&gen, "ga0", &dut, "da0", 2).unwrap();
    let _v1 = VethPair::with_queues(&gen, "ga1", &dut, "da1", 2).unwrap();
    let cfg = XdpConfig { mode: XdpMode::Native, fill_size: 1024, rx_size: 1024, ..XdpConfig::default() };
    let specs = vec![PortSpec::AfXdp { iface: "da0".into(), cfg }, PortSpec::AfXdp { iface: "da1".into(), cfg }];
    let (sent, received, report) = drive(&gen, &dut, specs, 4096, 2000);
    check(&sent, &received, &report);
}
