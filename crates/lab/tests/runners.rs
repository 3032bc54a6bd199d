//! Short end-to-end runs of the lab's tests against the Linux bridge, and the generator's
//! loss/latency accounting against a path with known loss and delay (needs root, as CI runs it).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fastpath_lab::dut::{Dut, DutConfig, DutKind};
use fastpath_lab::gen::{self, FrameSpec, ProbeConfig, StreamRx, PROBE_PORT};
use fastpath_lab::tests::rfc2544::{self, LatencyLoad, Rfc2544Config};
use fastpath_lab::tests::tcp::{self, TcpConfig, TcpTool};
use fastpath_lab::topo::{self, ns_exec, TopoConfig, Topology};

/// The tests here load both cores (TCP at Gbps, the generator); run them one at a time so the
/// paced probe sender of the lossy-path test keeps its rate.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sends `count` probes of `size` bytes at `pps` from gen to sink; returns (sent, seconds spent
/// sending, what the receiver saw).
fn probe_run(t: &Topology, count: u64, pps: u64, size: u16) -> (u64, f64, Option<StreamRx>) {
    let clock = gen::ProbeClock::start();
    let (stop, ready, never) = (AtomicBool::new(false), AtomicBool::new(false), AtomicBool::new(false));
    let cfg = ProbeConfig {
        iface: t.gen_if.into(),
        spec: FrameSpec::for_topology(t, PROBE_PORT),
        frame_size: size,
        stream: 7,
        count,
        rate_pps: pps,
    };
    std::thread::scope(|s| {
        let rx = s.spawn(|| {
            topo::in_netns(&t.sink_ns, || gen::receive_probes(t.sink_if, t.sink_ip, clock, &stop, &ready, Duration::from_millis(300)))
                .unwrap()
                .unwrap()
        });
        while !ready.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let t0 = Instant::now();
        let sent = topo::in_netns(&t.gen_ns, || gen::send_probes(&cfg, clock, &never)).unwrap().unwrap();
        let secs = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::SeqCst);
        let mut rx: BTreeMap<u16, StreamRx> = rx.join().unwrap();
        (sent, secs, rx.remove(&7))
    })
}

#[test]
fn loss_and_latency_accounting_on_a_known_lossy_path() {
    let _serial = serial();
    let t = Topology::create(&TopoConfig::default()).unwrap();
    let _dut = Dut::start(&t, &DutConfig::new(DutKind::LinuxBridge)).unwrap();
    // Clean path first: everything arrives, in order.
    let (sent, _, rx) = probe_run(&t, 500, 2000, 128);
    let rx = rx.expect("probes arrive through the bridge");
    assert_eq!((sent, rx.received, rx.reordered), (500, 500, 0));
    // A token-bucket filter on the DUT's egress toward the sink passes `rate` bit/s; offered
    // more, it drops the excess (this kernel has no netem). 1000-byte frames (996 bytes on the
    // wire to tc) at 4000/s offer 31.9 Mbit/s; 28.7 Mbit/s pass: about 10 % loss.
    let rate_bps = 28_700_000.0;
    ns_exec(&t.dut_ns, &["tc", "qdisc", "add", "dev", t.dut_out, "root", "tbf", "rate", "28700kbit", "burst", "4kb", "limit", "100kb"])
        .unwrap();
    let (sent, secs, rx) = probe_run(&t, 4000, 4000, 1000);
    let st = gen::stream_stats(7, sent, rx);
    // What the filter lets through in the time the sender took (a busy machine sends slower).
    // Its 4 kB bucket and 100 kB queue move this by at most 2.6 percentage points.
    let passable = (rate_bps * secs / (996.0 * 8.0)).min(sent as f64);
    let expected = 1.0 - passable / sent as f64;
    eprintln!("{st:?} in {secs:.3} s, expected loss {expected:.3}");
    assert_eq!(st.sent, 4000);
    assert!(st.loss_ratio > 0.0, "the filter drops something: {st:?}");
    assert!((st.loss_ratio - expected).abs() <= 0.03, "measured loss {:.3}, expected {expected:.3} from the filter's rate", st.loss_ratio);
    let lat = st.latency_us.unwrap();
    assert_eq!(lat.samples, st.received);
    // The filter's queue (100 kB at 28.7 Mbit/s ≈ 28 ms) absorbs the sender's jitter and shows
    // in the latency.
    assert!(lat.min > 0.0 && lat.p99 >= lat.p50, "{lat:?}");
}

#[test]
fn short_rfc2544_against_the_linux_bridge() {
    let _serial = serial();
    let cfg = Rfc2544Config {
        duts: vec![DutConfig::new(DutKind::LinuxBridge)],
        frame_sizes: vec![64],
        flows: vec![1],
        loss_threshold: 0.005,
        trial_s: 1.0,
        max_trials: 5,
        resolution: 0.1,
        latency_s: 1.0,
        latency_probe_pps: 500,
        // Latency at a fixed load and at half the found rate, in that order.
        latency_loads: vec![LatencyLoad::Pps(10_000), LatencyLoad::Fraction(0.5)],
        // Two runs: the row is the median run, with the spread and every run kept.
        runs: 2,
        ..Rfc2544Config::default()
    };
    let r = rfc2544::run(&cfg, &mut |l| eprintln!("{l}")).unwrap();
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    assert_eq!(r.rows.len(), 1);
    let row = &r.rows[0];
    assert!(row.throughput_mpps > 0.0, "{row:?}");
    assert!(row.loss <= 0.005, "{row:?}");
    assert!((row.throughput_gbps - row.throughput_mpps * 64.0 * 8.0 / 1e3).abs() < 1e-9);
    assert!(row.latency_us.p50 > 0.0 && row.latency_us.min <= row.latency_us.p99, "{row:?}");
    assert!(row.trials >= 2 && row.trials <= 10, "trials of both runs: {row:?}");
    let [a, b] = row.runs.as_slice() else { panic!("two runs: {row:?}") };
    assert_eq!(row.throughput_mpps, a.throughput_mpps.max(b.throughput_mpps), "upper middle of two: {row:?}");
    assert_eq!(row.throughput_min_mpps, a.throughput_mpps.min(b.throughput_mpps));
    assert_eq!(row.throughput_max_mpps, row.throughput_mpps);
    assert!(a.latency_by_load.len() == 2 && b.latency_by_load.len() == 2, "{row:?}");
    let [first, half] = row.latency_by_load.as_slice() else { panic!("two loads: {row:?}") };
    assert_eq!((first.latency_us, first.load_mpps), (row.latency_us, row.latency_load_mpps), "the row repeats the first load");
    assert!(first.load_mpps > 0.005 && first.load_mpps <= 0.0101, "{first:?}");
    assert!(half.load_mpps > 0.0 && half.load_mpps <= 0.5 * row.throughput_mpps * 1.001, "{half:?} of {row:?}");
    assert!(half.latency_us.p50 > 0.0 && half.latency_us.min <= half.latency_us.p99, "{half:?}");
    assert_eq!(r.latency_samples[0].len(), 2);
    assert!(r.latency_samples[0].iter().all(|s| s.len() > 200), "500 probes/s for 1 s at each load, in each run");
    let line = r.json_lines();
    let v: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    for k in ["dut", "frame_size", "flows", "loss_threshold", "throughput_mpps", "throughput_gbps"] {
        assert!(v.get(k).is_some(), "JSON lacks {k}: {line}");
    }
    for k in ["min", "p50", "p99", "max"] {
        assert!(v["latency_us"].get(k).is_some(), "JSON lacks latency_us.{k}: {line}");
    }
    assert_eq!(v["dut"], "linux-bridge");
    assert_eq!(v["latency_by_load"].as_array().map(Vec::len), Some(2), "{line}");
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(2), "{line}");
    let mut rep = fastpath_lab::tests::report("rfc2544 test", "cargo test");
    r.add_to(&mut rep);
    let html = rep.to_html();
    assert!(html.contains("Throughput vs frame size") && html.contains("linux-bridge, 1 flow"));
    assert!(html.contains("p99 latency vs background load") && html.contains("1 fl at 0.0"), "one series per load");
    assert!(html.contains("Throughput of each run") && html.contains("Mpps min–max"), "the spread over runs");
}

#[test]
fn short_tcp_run_against_the_linux_bridge() {
    let _serial = serial();
    let cfg = TcpConfig {
        duts: vec![DutConfig::new(DutKind::LinuxBridge)],
        streams: vec![1],
        duration_s: 2,
        tools: vec![TcpTool::Iperf3, TcpTool::Iperf2],
        ..TcpConfig::default()
    };
    let r = tcp::run(&cfg, &mut |l| eprintln!("{l}")).unwrap();
    assert_eq!(r.rows.len(), 2);
    for row in &r.rows {
        assert!(row.m.gbps > 0.0, "{row:?}");
        assert!(!row.m.gbps_over_time.is_empty(), "{row:?}");
        assert!(row.m.machine_cpu_pct > 0.0, "TCP at Gbps rates keeps the machine busy: {row:?}");
    }
    let mut rep = fastpath_lab::tests::report("tcp test", "cargo test");
    r.add_to(&mut rep);
    assert!(rep.to_html().contains("TCP throughput over time"));
}
