//! Forwarding rate of one worker between two veth pairs (measured and printed, never asserted).
//!
//! ```text
//!  gen: XDP live-frames generator ─▶ ga0 ═veth═ da0 ─▶ [DUT worker, core 0] ─▶ da1 ═veth═ ga1 ─▶ XDP drop+count
//! ```
//! The generator is `BPF_PROG_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES` and a program returning
//! `XDP_TX` (frames leave through `ga0`); the sink is a native XDP program on `ga1` counting in
//! an array map and dropping. The DUT is offered more than it can take (an overload test, not a
//! zero-loss RFC 2544 search): the figure is what leaves the DUT per second.
//!
//! Run: `cargo test -p fastpath-io --release --test multi_rate -- --ignored --nocapture`

mod netns_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fastpath_io::af_packet::AfPacketConfig;
use fastpath_io::af_xdp::XdpConfig;
use fastpath_io::bpf::{self, Insn, Link, Map, MapType, Prog, ProgType, XdpAttachMode, R0, R1, R10, R2};
use fastpath_io::multi::{self, MultiConfig, PortSpec};
use fastpath_io::netns::{Netns, VethPair};
use fastpath_io::sys::ifindex;
use fastpath_io::worker::{TxAll, Worker};
use fastpath_packet::Pool;
use netns_common::{frame, skip_unless_root};

const GEN_SECS: u64 = 3;

/// `counter[0] += 1; return XDP_DROP`.
fn count_drop_insns(map_fd: i32) -> Vec<Insn> {
    let [m0, m1] = Insn::ld_map_fd(R1, map_fd);
    vec![
        Insn::st_w(R10, -4, 0),
        Insn::mov64_reg(R2, R10),
        Insn::add64_imm(R2, -4),
        m0,
        m1,
        Insn::call(1), // bpf_map_lookup_elem
        Insn::jeq_imm(R0, 0, 2),
        Insn::mov64_imm(R1, 1),
        Insn::new(0xdb, R0, R1, 0, 0), // lock *(u64 *)(r0 + 0) += r1
        Insn::mov64_imm(R0, bpf::xdp_action::DROP),
        Insn::exit(),
    ]
}

fn measure(name: &str, specs: Vec<PortSpec>, queues: u32, pass_on_da0: bool) {
    let gen = Netns::new("fp-rg").unwrap();
    let dut = Netns::new("fp-rd").unwrap();
    let _v0 = VethPair::with_queues(&gen, "ga0", &dut, "da0", queues).unwrap();
    let _v1 = VethPair::with_queues(&gen, "ga1", &dut, "da1", queues).unwrap();
    // Sink on ga1.
    let (map, _sink_prog, _sink_link) = gen
        .run(|| {
            let map = Map::create(MapType::ARRAY, 4, 8, 1, "fp_cnt").unwrap();
            let prog = Prog::load(ProgType::XDP, &count_drop_insns(map.fd()), "GPL", bpf::BPF_XDP, "fp_sink").unwrap();
            let link = Link::xdp(&prog, ifindex("ga1").unwrap(), XdpAttachMode::Native).unwrap();
            (map, prog, link)
        })
        .unwrap();
    // Frames sent with XDP_TX (ndo_xdp_xmit) into a veth are only taken by a peer that runs
    // NAPI, i.e. has an XDP program: AF_XDP attaches its own; for AF_PACKET attach XDP_PASS.
    let _pass = if pass_on_da0 {
        Some(
            dut.run(|| {
                let p =
                    Prog::load(ProgType::XDP, &[Insn::mov64_imm(R0, bpf::xdp_action::PASS), Insn::exit()], "GPL", bpf::BPF_XDP, "fp_pass")
                        .unwrap();
                let l = Link::xdp(&p, ifindex("da0").unwrap(), XdpAttachMode::Native).unwrap();
                (p, l)
            })
            .unwrap(),
        )
    } else {
        None
    };
    let stop = AtomicBool::new(false);
    let cfg = MultiConfig { workers: 1, pin: true, first_core: 0, netns: Some(dut.path()), ..MultiConfig::default() };
    let f = frame(0, 1, 60);
    let (report, gen_ns, sent) = std::thread::scope(|s| {
        let rt = s.spawn(|| {
            multi::run(
                &cfg,
                &stop,
                |w| {
                    let mut pool = Pool::new(8192);
                    let ports = multi::open_worker_ports(&specs, w, 1, &mut pool)?;
                    Ok(Worker::new(pool, ports, TxAll(1)))
                },
                |_, _| String::new(),
            )
        });
        std::thread::sleep(Duration::from_millis(300));
        let (gen_ns, sent) = gen
            .run(|| {
                fastpath_io::sys::pin_to_core(1).ok();
                let prog =
                    Prog::load(ProgType::XDP, &[Insn::mov64_imm(R0, bpf::xdp_action::TX), Insn::exit()], "GPL", bpf::BPF_XDP, "fp_gen")
                        .unwrap();
                let idx = ifindex("ga0").unwrap();
                let start = Instant::now();
                let mut sent = 0u64;
                while start.elapsed() < Duration::from_secs(GEN_SECS) {
                    prog.test_run_xdp_live(idx, &f, 200_000, 64, 0).unwrap();
                    sent += 200_000;
                }
                (start.elapsed().as_nanos() as u64, sent)
            })
            .unwrap();
        stop.store(true, Ordering::Relaxed);
        (rt.join().unwrap().unwrap(), gen_ns, sent)
    });
    let mut v = [0u8; 8];
    map.lookup(&0u32.to_ne_bytes(), &mut v).unwrap();
    let sunk = u64::from_ne_bytes(v);
    let t = report.total();
    let secs = gen_ns as f64 / 1e9;
    println!("{report}");
    println!(
        "{name}: offered {:.2} Mpps, DUT forwarded {} pkts = {:.3} Mpps, far end counted {} = {:.3} Mpps (64 B, 1 flow, 1 worker, {secs:.1} s)",
        sent as f64 / secs / 1e6,
        t.tx_pkts,
        t.tx_pkts as f64 / secs / 1e6,
        sunk,
        sunk as f64 / secs / 1e6
    );
}

#[test]
#[ignore = "measurement: run with --release --ignored --nocapture"]
fn rate_af_xdp_forwarding() {
    if skip_unless_root() {
        return;
    }
    let cfg = XdpConfig::default();
    measure("af_xdp", vec![PortSpec::AfXdp { iface: "da0".into(), cfg }, PortSpec::AfXdp { iface: "da1".into(), cfg }], 1, false);
}

#[test]
#[ignore = "measurement: run with --release --ignored --nocapture"]
fn rate_af_packet_forwarding() {
    if skip_unless_root() {
        return;
    }
    let cfg = AfPacketConfig::default();
    measure(
        "af_packet",
        vec![
            PortSpec::AfPacket { iface: "da0".into(), cfg, fanout_group: 1 },
            PortSpec::AfPacket { iface: "da1".into(), cfg, fanout_group: 2 },
        ],
        1,
        true,
    );
}

#[test]
#[ignore = "measurement: run with --release --ignored --nocapture"]
fn rate_af_xdp_forwarding_busy_poll() {
    if skip_unless_root() {
        return;
    }
    let cfg = XdpConfig { busy_poll_us: 20, ..XdpConfig::default() };
    measure("af_xdp busy-poll", vec![PortSpec::AfXdp { iface: "da0".into(), cfg }, PortSpec::AfXdp { iface: "da1".into(), cfg }], 1, false);
}
