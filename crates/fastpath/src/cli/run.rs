//! `fastpath run`: a pipeline between ports — capture files, or live AF_XDP / AF_PACKET ports.
//!
//! Live ports run on the multi-core runtime (`fastpath_io::multi`): one pinned run-to-completion
//! worker per core (rx burst ▸ pipeline ▸ tx burst), each with its own packet pool, its own
//! sockets (AF_XDP queue `base + w`, or one member of a `PACKET_FANOUT_HASH` group) and its own
//! pipeline instance built from the same spec and entries, so flows are spread by the NIC/veth
//! RSS hash or the fanout hash and one flow stays on one worker (the DPDK/VPP model).
//!
//! Live runs serve the control socket (`--ctl PATH`, default `/run/fastpath/<pid>.sock`) on a
//! control thread of their own: `fastpath ctl` changes tables and reads counters while traffic
//! flows. Each worker checks its mailbox between batches (one atomic load when idle) and applies
//! a request's changes to its own pipeline replica all at once; see `fastpath_control`. With
//! `--metrics ADDR` a second thread serves Prometheus scrapes through the same control plane
//! (a `Mutex<Control>`: ctl requests and scrapes take it in turn, each once fully read).
//!
//! The display thread only watches: once per batch each worker adds its rx/tx/drop counts to
//! its own cache-line-sized slot of relaxed atomics, and the control thread reads them every
//! 100 ms to draw the one-line rate display (when stdout is a terminal) and to apply the
//! `--duration` / `--packets` bounds. SIGINT/SIGTERM (or a bound) set the stop flag; workers
//! drain, flush and report, and the final counters (per port, per worker, per stage summed
//! over workers) are printed.

use super::{load_pipeline, PipeProc};
use clap::{Args, ValueEnum};
use fastpath_control::mailbox::{ControlEnd, WorkerEnd};
use fastpath_control::pfcp_up::{self, PfcpServer};
use fastpath_control::{Access, Control, LoopCounters, MetricsServer, PortCounters, Server, WorkerSnapshot};
use fastpath_io::af_packet::{AfPacketConfig, PacketPort, PACKET_FANOUT_HASH};
use fastpath_io::af_xdp::{XdpConfig, XdpMode, XdpPort, ZeroCopy};
use fastpath_io::multi::{self, MultiConfig};
use fastpath_io::pcap::{PcapSink, PcapSource};
use fastpath_io::port::{Duplex, Port};
use fastpath_io::worker::{Processor, Worker, WorkerStats};
use fastpath_packet::{Batch, Pool, Verdict};
use fastpath_pipeline::{Pipeline, StageStats};
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Arguments of `fastpath run`.
#[derive(Args)]
#[command(after_help = "\
Ports are numbered in the order given (the first --port is port 0), and actions name them by \
number (forward 1).\n\nPort kinds:\n  \
NAME=pcap:IN.pcap            read a capture (pcap or pcapng); packets sent to it are dropped\n  \
NAME=pcap:IN.pcap:OUT.pcap   read IN, write what the pipeline sends to this port into OUT\n  \
NAME=pcap::OUT.pcap          output only\n  \
NAME=afxdp:IFACE[@QUEUE]     AF_XDP socket on IFACE; worker w uses queue QUEUE+w (default 0+w)\n  \
NAME=afpacket:IFACE          AF_PACKET (TPACKET_V3) socket; several workers share a fanout group\n  \
NAME=xdp:IFACE               XDP datapath: the pipeline compiled to eBPF and run in the kernel's \
receive path of IFACE (every port must then be xdp:; Ethernet-only pipelines with exact-match \
tables, e.g. l2fwd; see docs/xdp.md)\n\n\
Capture ports run one worker until the files are read; live ports run until Ctrl-C/SIGTERM, \
--duration or --packets, then drain and print per-port and per-stage counters.\n\n\
Examples:\n  fastpath run pipelines/router.toml --entries testdata/routes/small.txt \\\n    \
--port p0=pcap:testdata/pcap/router-in.pcap --port p1=pcap::out.pcap --trace 3\n  \
fastpath run pipelines/l2fwd.toml --entries l2fwd.txt --port p0=afxdp:veth0 --port p1=afxdp:veth1 --workers 2\n  \
fastpath run pipelines/l2fwd.toml --entries l2fwd.txt --port p0=xdp:veth0 --port p1=xdp:veth1")]
pub struct RunArgs {
    /// The pipeline spec (TOML).
    pub(super) spec: PathBuf,
    /// Entries file (table entries, meter settings) loaded before traffic starts.
    #[arg(long, short = 'e')]
    pub(super) entries: Vec<PathBuf>,
    /// A port: NAME=KIND:ARGS (see below). Repeat for each port.
    #[arg(long = "port", short = 'p', required = true)]
    ports: Vec<String>,
    /// Send what the pipeline punts (`to_control`: DHCP, unknown subscribers…) out of the port
    /// named NAME, a link to the control plane, instead of counting it dropped.
    #[arg(long, value_name = "NAME")]
    punt: Option<String>,
    /// Trace the first N packets through every stage and print it (capture ports only).
    #[arg(long, default_value_t = 0)]
    pub(super) trace: usize,
    /// Buffers in each worker's packet pool [default: 8192 for capture ports; for live ports
    /// enough for every port's rings plus two batches].
    #[arg(long)]
    pool: Option<usize>,
    /// Worker threads (live ports), one per core, pinned.
    #[arg(long, default_value_t = 1)]
    pub(super) workers: usize,
    /// First core to pin workers to (worker w runs on core + w).
    #[arg(long, default_value_t = 0)]
    core: usize,
    /// Do not pin the workers. (Pinned workers keep their cores to themselves: the process's
    /// other threads run on the remaining cores, when there are any.)
    #[arg(long)]
    no_pin: bool,
    /// XDP attach mode for afxdp and xdp ports.
    #[arg(long, value_enum, default_value_t = Mode::Auto)]
    pub(super) mode: Mode,
    /// Zero-copy policy for afxdp ports.
    #[arg(long = "zero-copy", value_enum, default_value_t = Zc::Auto)]
    zero_copy: Zc,
    /// Busy polling for afxdp ports, in microseconds (0: off).
    #[arg(long = "busy-poll", default_value_t = 0)]
    busy_poll_us: u32,
    /// Multi-buffer receive on afxdp ports (kernel >= 6.6, `XDP_USE_SG`), for TCP senders that
    /// keep their offloads on: a 64 KB TSO/GSO segment arrives as a chain of buffers and is cut
    /// into segments of the port's MTU, and checksums the sender left partial are completed
    /// (docs/tcp-gso.md). Other frames larger than a buffer are dropped and counted.
    #[arg(long = "multi-buffer")]
    multi_buffer: bool,
    /// AF_XDP rx and fill ring slots (power of two): deeper rings absorb bursts and stalls of
    /// the worker (32768 = 36 ms at 0.9 Mpps; 68 MiB of buffers per port with the tx ring). Lab
    /// l2fwd 64 B at 0 % loss, median of 3 runs, two rounds: 0.71 and 0.76 Mpps with 8192, 0.88
    /// and 0.92 with 32768.
    #[arg(long = "rx-ring", default_value_t = 32768)]
    rx_ring: u32,
    /// Sleep this many microseconds after 1024 idle polls (0: spin, the data-plane default);
    /// never past the moment a packet held by the traffic manager's shapers may leave.
    #[arg(long = "idle-sleep", default_value_t = 0)]
    idle_sleep_us: u64,
    /// Stop after this many seconds (live ports).
    #[arg(long)]
    pub(super) duration: Option<f64>,
    /// Stop once this many packets were received (live ports; the drain may add a few).
    #[arg(long)]
    pub(super) packets: Option<u64>,
    /// Also write the final counters (live ports) to this file.
    #[arg(long = "counters-out")]
    pub(super) counters_out: Option<PathBuf>,
    /// Control socket for `fastpath ctl` (live ports) [default: /run/fastpath/<pid>.sock].
    #[arg(long)]
    pub(super) ctl: Option<PathBuf>,
    /// Do not serve a control socket.
    #[arg(long = "no-ctl", conflicts_with = "ctl")]
    no_ctl: bool,
    /// Let this group use the control socket too (socket 0660, its directory 0750; without it
    /// 0600 and 0700, whatever the umask). A name from /etc/group or a numeric gid.
    #[arg(long = "ctl-group", value_name = "NAME", conflicts_with = "no_ctl")]
    pub(super) ctl_group: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (live ports), e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub(super) metrics: Option<String>,
    /// Serve a live page of rates, drops, table fill and queues at http://ADDR/ (live ports; its
    /// JSON at /api/counters), e.g. 127.0.0.1:8080.
    #[arg(long, value_name = "ADDR")]
    pub(super) web: Option<String>,
    /// Serve the user plane's PFCP endpoint (TS 29.244 with the BBF TR-459 IEs, live ports) at
    /// ADDR, the address control planes reach us at (our Node ID), e.g. 192.0.2.2 or
    /// 192.0.2.2:8805 (default port 8805): they create subscriber sessions (pipelines/vbng.toml).
    #[arg(long, value_name = "ADDR")]
    pub(super) pfcp: Option<String>,
    /// Send what the pipeline punts to the control plane at ADDR over the CPRi (GTP-U, UDP 2152
    /// unless ADDR names a port; TEID = user plane << 16 | in-port) and send the frames it
    /// returns out of the ports they name (live ports; `fastpath bng-cp` is the other end).
    #[arg(long, value_name = "ADDR", conflicts_with = "punt")]
    pub(super) cpri: Option<String>,
    /// This user plane's number on the CPRi (the high 16 bits of its TEIDs).
    #[arg(long = "cpri-up", value_name = "N", default_value_t = 1)]
    pub(super) cpri_up: u16,
}

/// XDP attach mode on the command line.
#[derive(Clone, Copy, ValueEnum)]
pub(super) enum Mode {
    Auto,
    Native,
    Skb,
}

/// Zero-copy policy on the command line.
#[derive(Clone, Copy, ValueEnum)]
enum Zc {
    Auto,
    Yes,
    No,
}

/// A parsed `--port`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PortArg {
    Pcap { name: String, input: String, output: String },
    AfXdp { name: String, iface: String, queue: u32 },
    AfPacket { name: String, iface: String },
    Xdp { name: String, iface: String },
}

impl PortArg {
    fn name(&self) -> &str {
        match self {
            PortArg::Pcap { name, .. } | PortArg::AfXdp { name, .. } | PortArg::AfPacket { name, .. } | PortArg::Xdp { name, .. } => name,
        }
    }
    fn is_live(&self) -> bool {
        !matches!(self, PortArg::Pcap { .. })
    }
}

fn parse_port(spec: &str) -> Result<PortArg, String> {
    let (name, rest) =
        spec.split_once('=').ok_or_else(|| format!("--port {spec}: expected NAME=KIND:ARGS, e.g. p0=pcap:in.pcap or p0=afxdp:eth0"))?;
    if name.is_empty() {
        return Err(format!("--port {spec}: the port needs a name before `=`"));
    }
    let name = name.to_string();
    let (kind, args) = rest.split_once(':').unwrap_or((rest, ""));
    match kind {
        "pcap" => {
            let (input, output) = args.split_once(':').unwrap_or((args, ""));
            if input.is_empty() && output.is_empty() {
                return Err(format!("--port {spec}: pcap needs an input file, an output file, or both (pcap:IN[:OUT], pcap::OUT)"));
            }
            Ok(PortArg::Pcap { name, input: input.into(), output: output.into() })
        }
        "afxdp" => {
            let (iface, queue) = match args.split_once('@') {
                Some((i, q)) => (i, q.parse::<u32>().map_err(|_| format!("--port {spec}: bad queue number \"{q}\" (afxdp:IFACE@QUEUE)"))?),
                None => (args, 0),
            };
            if iface.is_empty() {
                return Err(format!("--port {spec}: afxdp needs an interface (afxdp:IFACE[@QUEUE])"));
            }
            Ok(PortArg::AfXdp { name, iface: iface.into(), queue })
        }
        "afpacket" => {
            if args.is_empty() || args.contains('@') {
                return Err(format!("--port {spec}: afpacket needs an interface (afpacket:IFACE)"));
            }
            Ok(PortArg::AfPacket { name, iface: args.into() })
        }
        "xdp" => {
            if args.is_empty() || args.contains('@') {
                return Err(format!("--port {spec}: xdp needs an interface (xdp:IFACE)"));
            }
            Ok(PortArg::Xdp { name, iface: args.into() })
        }
        other => Err(format!("--port {spec}: unknown port kind \"{other}\" (known: pcap, afxdp, afpacket, xdp)")),
    }
}

fn open_pcap(name: &str, input: &str, output: &str) -> Result<Box<dyn Port>, String> {
    let rx: Option<Box<dyn Port>> =
        if input.is_empty() { None } else { Some(Box::new(PcapSource::open(name, input).map_err(|e| format!("port {name}: {e}"))?)) };
    let tx: Option<Box<dyn Port>> =
        if output.is_empty() { None } else { Some(Box::new(PcapSink::create(name, output).map_err(|e| format!("port {name}: {e}"))?)) };
    Ok(Box::new(Duplex::new(name, rx, tx)))
}

/// Live-port settings shared by every worker.
struct LiveCfg {
    xdp: XdpConfig,
    pkt: AfPacketConfig,
    workers: usize,
}

/// Opens worker `w`'s socket on every live port; errors name the port.
fn open_live_ports(ports: &[PortArg], w: usize, lc: &LiveCfg, pool: &mut Pool) -> Result<Vec<Box<dyn Port>>, String> {
    let mut out: Vec<Box<dyn Port>> = Vec::with_capacity(ports.len());
    for (i, p) in ports.iter().enumerate() {
        match p {
            PortArg::AfXdp { name, iface, queue } => {
                let q = queue + w as u32;
                let port = XdpPort::open(iface, q, &lc.xdp, pool).map_err(|e| format!("port {name} (afxdp:{iface} queue {q}): {e}"))?;
                out.push(Box::new(port));
            }
            PortArg::AfPacket { name, iface } => {
                // One fanout group per (process, port): ids unique enough for one data plane.
                let group = ((std::process::id() as u16) ^ (i as u16).wrapping_mul(0x9e37)) | 1;
                let cfg = AfPacketConfig { fanout: (lc.workers > 1).then_some((group, PACKET_FANOUT_HASH)), ..lc.pkt };
                let port = PacketPort::open(iface, &cfg).map_err(|e| format!("port {name} (afpacket:{iface}): {e}"))?;
                out.push(Box::new(port));
            }
            PortArg::Pcap { name, .. } => return Err(format!("port {name}: capture ports cannot be mixed with live ports")),
            PortArg::Xdp { name, .. } => return Err(format!("port {name}: xdp ports cannot be mixed with socket ports")),
        }
    }
    Ok(out)
}

/// One worker's live counters, written once per batch by that worker only.
#[repr(align(64))]
#[derive(Default)]
struct LiveSlot {
    rx_pkts: AtomicU64,
    tx_pkts: AtomicU64,
    drop_pkts: AtomicU64,
}

impl LiveSlot {
    /// Adds a batch: `rx` packets received, and its verdicts (`Queued` packets are counted when
    /// they leave the traffic manager). Single writer per slot: load + store keeps the hot path
    /// free of locked instructions.
    #[inline]
    fn count(&self, rx: u64, verdicts: &[Verdict]) {
        let (mut tx, mut dropped) = (0u64, 0u64);
        for v in verdicts {
            tx += u64::from(matches!(v, Verdict::Tx(_)));
            dropped += u64::from(!matches!(v, Verdict::Tx(_) | Verdict::Queued(_)));
        }
        self.rx_pkts.store(self.rx_pkts.load(Ordering::Relaxed) + rx, Ordering::Relaxed);
        self.tx_pkts.store(self.tx_pkts.load(Ordering::Relaxed) + tx, Ordering::Relaxed);
        self.drop_pkts.store(self.drop_pkts.load(Ordering::Relaxed) + dropped, Ordering::Relaxed);
    }
}

/// The pipeline plus the per-batch live counters and the worker's control mailbox.
struct LiveProc<'a> {
    inner: PipeProc,
    slot: &'a LiveSlot,
    mail: Option<WorkerEnd>,
}

/// Copies a worker's port and loop counters into a control snapshot.
fn fill_snapshot(snap: &mut WorkerSnapshot, ports: &[Box<dyn Port>], st: &WorkerStats) {
    snap.ports = ports
        .iter()
        .map(|p| {
            let s = p.stats();
            PortCounters {
                name: p.name().to_string(),
                rx_pkts: s.rx_pkts,
                rx_bytes: s.rx_bytes,
                rx_dropped: s.rx_dropped,
                tx_pkts: s.tx_pkts,
                tx_bytes: s.tx_bytes,
                tx_dropped: s.tx_dropped,
                errors: s.errors,
            }
        })
        .collect();
    snap.totals = LoopCounters {
        worker: 0,
        rx_pkts: st.rx_pkts,
        tx_pkts: st.tx_pkts,
        dropped: st.dropped,
        tx_dropped: st.tx_dropped,
        batches: st.batches,
    };
}

impl Processor for LiveProc<'_> {
    #[inline]
    fn process(&mut self, pool: &mut Pool, batch: &mut Batch, now_ns: u64) {
        self.inner.process(pool, batch, now_ns);
        self.slot.count(batch.len() as u64, batch.verdicts());
    }

    #[inline]
    fn has_queues(&self) -> bool {
        self.inner.has_queues()
    }

    #[inline]
    fn egress(&mut self, pool: &mut Pool, port: u16, batch: &mut Batch, now_ns: u64) -> usize {
        let n = self.inner.egress(pool, port, batch, now_ns);
        self.slot.count(0, batch.verdicts());
        n
    }

    #[inline]
    fn held(&self) -> u64 {
        self.inner.held()
    }

    fn next_due_ns(&self) -> Option<u64> {
        self.inner.next_due_ns()
    }

    #[inline]
    fn between_batches(&mut self, ports: &[Box<dyn Port>], stats: &WorkerStats) {
        if let Some(m) = &mut self.mail {
            m.poll(&mut self.inner.0, |snap| fill_snapshot(snap, ports, stats));
        }
    }
}

fn sum_slots(slots: &[LiveSlot]) -> (u64, u64, u64) {
    slots.iter().fold((0, 0, 0), |(r, t, d), s| {
        (r + s.rx_pkts.load(Ordering::Relaxed), t + s.tx_pkts.load(Ordering::Relaxed), d + s.drop_pkts.load(Ordering::Relaxed))
    })
}

/// Adds `b`'s per-stage counters into `a` (same pipeline, so the same stage order).
fn add_stage_stats(a: &mut Vec<(String, StageStats)>, b: &[(String, StageStats)]) {
    for (i, (name, st)) in b.iter().enumerate() {
        if a.len() <= i {
            a.push((name.clone(), StageStats::default()));
        }
        let t = &mut a[i].1;
        t.calls += st.calls;
        t.pkts_in += st.pkts_in;
        t.pkts_out += st.pkts_out;
        t.cycles += st.cycles;
        for (x, y) in t.drops.iter_mut().zip(st.drops.iter()) {
            *x += y;
        }
    }
}

/// Compiles the spec and loads the entries, quietly (every worker builds its own instance).
fn build_pipeline(a: &RunArgs) -> Result<Pipeline, String> {
    let prog = fastpath_pipeline::compile_file(&a.spec).map_err(|e| e.to_string())?;
    let mut pipe = prog.instantiate();
    pipe.set_ports(a.ports.len())?;
    for e in &a.entries {
        let text = std::fs::read_to_string(e).map_err(|err| format!("{}: {err}", e.display()))?;
        pipe.load_entries(&e.display().to_string(), &text).map_err(|err| err.to_string())?;
    }
    Ok(pipe)
}

/// Runs `fastpath run`.
pub fn run(a: RunArgs) -> Result<(), String> {
    let ports = a.ports.iter().map(|p| parse_port(p)).collect::<Result<Vec<_>, _>>()?;
    for (i, p) in ports.iter().enumerate() {
        if ports[..i].iter().any(|q| q.name() == p.name()) {
            return Err(format!("--port {}: the name \"{}\" is used twice", a.ports[i], p.name()));
        }
    }
    if let Some(n) = &a.punt {
        punt_port(n, &ports)?;
    }
    // A bad --cpri address is reported before any port opens.
    a.cpri.as_deref().map(cpri_addr).transpose()?;
    let xdp: Vec<(String, String)> = ports
        .iter()
        .filter_map(|p| match p {
            PortArg::Xdp { name, iface } => Some((name.clone(), iface.clone())),
            _ => None,
        })
        .collect();
    if !xdp.is_empty() {
        if xdp.len() != ports.len() {
            return Err("xdp: ports run the pipeline in the kernel and cannot be mixed with capture or socket ports".into());
        }
        return super::run_xdp::run(&a, &xdp);
    }
    let live = ports.iter().filter(|p| p.is_live()).count();
    if live == 0 {
        return run_pcap(a, &ports);
    }
    if live != ports.len() {
        return Err("capture (pcap:) ports cannot be mixed with live (afxdp:, afpacket:) ports".into());
    }
    run_live(a, &ports)
}

/// `--cpri ADDR`: the control plane's GTP-U address (port 2152 unless given).
fn cpri_addr(addr: &str) -> Result<std::net::SocketAddr, String> {
    addr.parse()
        .or_else(|_| addr.parse::<std::net::IpAddr>().map(|ip| std::net::SocketAddr::new(ip, 2152)))
        .map_err(|_| format!("--cpri {addr}: expected an address, e.g. 192.0.2.1 or 192.0.2.1:2152"))
}

/// The id of the `--punt` port.
fn punt_port(name: &str, ports: &[PortArg]) -> Result<u16, String> {
    ports.iter().position(|p| p.name() == name).map(|i| i as u16).ok_or_else(|| {
        let names: Vec<&str> = ports.iter().map(PortArg::name).collect();
        format!("--punt {name}: no port of that name (ports: {})", names.join(", "))
    })
}

fn run_pcap(a: RunArgs, ports: &[PortArg]) -> Result<(), String> {
    if a.workers != 1 {
        return Err("capture ports run on one worker (drop --workers)".into());
    }
    if a.ctl.is_some() || a.ctl_group.is_some() || a.metrics.is_some() || a.web.is_some() || a.pfcp.is_some() || a.cpri.is_some() {
        return Err(
            "--ctl, --ctl-group, --metrics, --web, --pfcp and --cpri serve live runs only (a capture run ends when its files are read)"
                .into(),
        );
    }
    let mut pipe = load_pipeline(&a.spec, &a.entries)?;
    pipe.set_ports(ports.len())?;
    let mut opened = Vec::with_capacity(ports.len());
    for p in ports {
        if let PortArg::Pcap { name, input, output } = p {
            opened.push(open_pcap(name, input, output)?);
        }
    }
    if a.trace > 0 {
        pipe.trace_next(a.trace);
    }
    let mut w = Worker::new(Pool::new(a.pool.unwrap_or(8192)), opened, PipeProc(pipe));
    if let Some(n) = &a.punt {
        w = w.with_punt_port(punt_port(n, ports)?);
    }
    let end = w.run_until_exhausted();
    w.flush();
    let pipe = &mut w.processor_mut().0;
    if a.trace > 0 {
        print!("{}", pipe.take_trace());
    }
    println!("{}", super::format_stats(&pipe.stats()));
    if pipe.has_tm() {
        let snap = WorkerSnapshot::of(pipe);
        print!("{}", fastpath_control::metrics::Counters::sum(&[snap]).render_queues());
    }
    for (i, p) in w.ports().iter().enumerate() {
        let s = p.stats();
        println!("port {i} {:<8} rx {:>10} pkts  tx {:>10} pkts  tx_dropped {}", p.name(), s.rx_pkts, s.tx_pkts, s.tx_dropped);
    }
    let mut failed = false;
    for p in w.ports() {
        if let Some(e) = p.error() {
            eprintln!("error: port {}: {e}", p.name());
            failed = true;
        }
    }
    if let fastpath_io::worker::RunEnd::PoolEmpty = end {
        return Err("stopped: the packet pool ran dry (raise --pool)".into());
    }
    if failed {
        return Err("a port stopped early (see above); packets read before the damage were processed and written".into());
    }
    Ok(())
}

/// `--pfcp ADDR`: the user plane's PFCP endpoint, bound before any port opens.
fn pfcp_server(addr: &str, shadow: &Pipeline, ports: &[PortArg]) -> Result<PfcpServer, String> {
    let sa: SocketAddr = addr
        .parse()
        .or_else(|_| addr.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 8805)))
        .map_err(|_| format!("--pfcp {addr}: expected an address, e.g. 192.0.2.2 or 192.0.2.2:8805"))?;
    if sa.ip().is_unspecified() {
        return Err(format!("--pfcp {addr}: give the address control planes reach us at (it is our Node ID), not {}", sa.ip()));
    }
    let names = ports.iter().map(|p| p.name().to_string()).collect();
    let cfg = pfcp_up::Config::for_program(shadow.program(), sa.ip(), names, pfcp_up::ntp_now())?;
    PfcpServer::bind(sa, pfcp_up::Endpoint::new(cfg))
}

fn run_live(a: RunArgs, ports: &[PortArg]) -> Result<(), String> {
    if a.trace > 0 {
        return Err("--trace works on capture ports only (a live trace would stall the worker)".into());
    }
    if a.workers == 0 {
        return Err("--workers must be at least 1".into());
    }
    if !a.rx_ring.is_power_of_two() || a.rx_ring < 64 {
        return Err(format!("--rx-ring {}: a power of two, at least 64", a.rx_ring));
    }
    // Compile once up front so spec and entry errors stop us before any socket opens; this
    // instance becomes the control plane's shadow replica.
    let shadow = build_pipeline(&a)?;
    for e in &a.entries {
        eprintln!("loaded entries from {}", e.display());
    }
    let access = match &a.ctl_group {
        Some(g) => Access::group(g)?,
        None => Access::default(),
    };
    let server = if a.no_ctl {
        None
    } else {
        let path = a.ctl.clone().unwrap_or_else(fastpath_control::default_socket_path);
        match Server::bind_with(&path, &access) {
            Ok(s) => Some(s),
            Err(e) if a.ctl.is_some() || a.ctl_group.is_some() => return Err(e),
            Err(e) => {
                eprintln!("fastpath: no control socket ({e}); give --ctl PATH to serve one elsewhere");
                None
            }
        }
    };
    let metrics = a.metrics.as_deref().map(MetricsServer::bind).transpose()?;
    let web = a.web.as_deref().map(MetricsServer::bind_web).transpose()?;
    let mut pfcp = a.pfcp.as_deref().map(|addr| pfcp_server(addr, &shadow, ports)).transpose()?;
    let has_control = server.is_some() || metrics.is_some() || web.is_some() || pfcp.is_some();
    let (ends, mail): (Vec<ControlEnd>, Vec<Mutex<Option<WorkerEnd>>>) = if has_control {
        (0..a.workers).map(|_| fastpath_control::mailbox()).map(|(c, w)| (c, Mutex::new(Some(w)))).unzip()
    } else {
        (Vec::new(), (0..a.workers).map(|_| Mutex::new(None)).collect())
    };
    let xdp = XdpConfig {
        mode: match a.mode {
            Mode::Auto => XdpMode::Auto,
            Mode::Native => XdpMode::Native,
            Mode::Skb => XdpMode::Skb,
        },
        zero_copy: match a.zero_copy {
            Zc::Auto => ZeroCopy::Auto,
            Zc::Yes => ZeroCopy::Yes,
            Zc::No => ZeroCopy::No,
        },
        busy_poll_us: a.busy_poll_us,
        multi_buffer: a.multi_buffer,
        rx_size: a.rx_ring,
        fill_size: a.rx_ring,
        ..XdpConfig::default()
    };
    let lc = LiveCfg { xdp, pkt: AfPacketConfig::default(), workers: a.workers };
    let need = ports.len() * (xdp.fill_size + xdp.tx_size) as usize + 2 * fastpath_packet::BATCH_MAX + 256;
    let pool_size = a.pool.unwrap_or(need.max(8192));
    let mut mcfg =
        MultiConfig { workers: a.workers, pin: !a.no_pin, first_core: a.core, idle_sleep_us: a.idle_sleep_us, ..MultiConfig::default() };
    // Keep this thread and the ones it starts (control, display) off the workers' cores.
    let housekeeping = mcfg.pin_housekeeping().map_err(|e| format!("pinning the main thread off the worker cores: {e}"))?;
    let stop = multi::stop_on_signals().map_err(|e| format!("installing signal handlers: {e}"))?;
    let slots: Vec<LiveSlot> = (0..a.workers).map(|_| LiveSlot::default()).collect();
    let done = AtomicBool::new(false);
    let tty = std::io::stdout().is_terminal();
    let names: Vec<String> = ports.iter().map(|p| p.name().to_string()).collect();
    eprintln!("fastpath: {} on {} with {} worker(s) (Ctrl-C stops)", a.spec.display(), a.ports.join(" "), a.workers);
    if let Some(hk) = &housekeeping {
        let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        eprintln!("fastpath: worker core(s) {}, other threads on {}", list(&mcfg.worker_cores()), list(hk));
    }
    if let Some(sv) = &server {
        eprintln!("fastpath: control socket {} (fastpath ctl --socket {} show counters)", sv.path().display(), sv.path().display());
    }
    if let Some(m) = &metrics {
        eprintln!("fastpath: Prometheus metrics at http://{}/metrics", m.local_addr());
    }
    // Requests (ctl and scrapes) take the control plane one at a time, each only once it has
    // been read in full.
    let control = has_control.then(|| Mutex::new(Control::new(shadow, Box::new(|| build_pipeline(&a)), ends)));
    let t0 = Instant::now();
    let (report, ended_by) = std::thread::scope(|s| {
        if let (Some(sv), Some(ctl)) = (&server, control.as_ref()) {
            let done = &done;
            let spawned = std::thread::Builder::new().name("fp-ctl".into()).spawn_scoped(s, move || sv.serve_until(ctl, done));
            if let Err(e) = spawned {
                eprintln!("fastpath: no control thread: {e}");
            }
        }
        if let (Some(pf), Some(ctl)) = (pfcp.as_mut(), control.as_ref()) {
            let done = &done;
            eprintln!("fastpath: PFCP endpoint at {}", pf.local_addr().map_or("?".into(), |a| a.to_string()));
            let serve = move || {
                pf.serve_until(ctl, done);
                eprint!("{}", pf.endpoint().stats().render());
            };
            if let Err(e) = std::thread::Builder::new().name("fp-pfcp".into()).spawn_scoped(s, serve) {
                eprintln!("fastpath: no PFCP thread: {e}");
            }
        }
        if let (Some(ms), Some(ctl)) = (&metrics, control.as_ref()) {
            let done = &done;
            let spawned = std::thread::Builder::new().name("fp-metrics".into()).spawn_scoped(s, move || ms.serve_until(ctl, done));
            if let Err(e) = spawned {
                eprintln!("fastpath: no metrics thread: {e}");
            }
        }
        if let (Some(ws), Some(ctl)) = (&web, control.as_ref()) {
            eprintln!("fastpath: live page at http://{}/", ws.local_addr());
            let done = &done;
            if let Err(e) = std::thread::Builder::new().name("fp-web".into()).spawn_scoped(s, move || ws.serve_until(ctl, done)) {
                eprintln!("fastpath: no web thread: {e}");
            }
        }
        let rt = s.spawn(|| {
            let r = multi::run(
                &mcfg,
                stop,
                |w| {
                    let mut pool = Pool::new(pool_size);
                    let opened = open_live_ports(ports, w, &lc, &mut pool)?;
                    let pipe = build_pipeline(&a)?;
                    let mail = mail.get(w).and_then(|m| m.lock().ok().and_then(|mut m| m.take()));
                    let worker = Worker::new(pool, opened, LiveProc { inner: PipeProc(pipe), slot: &slots[w], mail });
                    Ok(match (&a.punt, a.cpri.as_deref()) {
                        (Some(n), _) => worker.with_punt_port(punt_port(n, ports)?),
                        (None, Some(addr)) => {
                            let end = super::cpri::CpriEnd::connect(cpri_addr(addr)?, a.cpri_up)
                                .map_err(|e| format!("--cpri {addr}: no socket: {e}"))?;
                            worker.with_exception(Box::new(end))
                        }
                        (None, None) => worker,
                    })
                },
                |_, w| WorkerSnapshot::of(&w.processor().inner.0),
            );
            done.store(true, Ordering::SeqCst);
            r
        });
        let mut ended_by = "signal";
        let (mut last_t, mut last) = (Instant::now(), (0u64, 0u64, 0u64));
        let mut next_draw = Instant::now() + Duration::from_secs(1);
        while !done.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
            let now_c = sum_slots(&slots);
            if !stop.load(Ordering::SeqCst) {
                if a.duration.is_some_and(|d| t0.elapsed().as_secs_f64() >= d) {
                    ended_by = "--duration";
                    stop.store(true, Ordering::SeqCst);
                } else if a.packets.is_some_and(|n| now_c.0 >= n) {
                    ended_by = "--packets";
                    stop.store(true, Ordering::SeqCst);
                }
            }
            if tty && Instant::now() >= next_draw {
                let dt = last_t.elapsed().as_secs_f64().max(1e-6);
                let mpps = |x: u64, y: u64| (x - y) as f64 / dt / 1e6;
                print!(
                    "\r{:>7.1}s  rx {:>7.3} Mpps  tx {:>7.3} Mpps  drops {:>7.3} Mpps  total rx {} tx {} drops {}   ",
                    t0.elapsed().as_secs_f64(),
                    mpps(now_c.0, last.0),
                    mpps(now_c.1, last.1),
                    mpps(now_c.2, last.2),
                    now_c.0,
                    now_c.1,
                    now_c.2
                );
                let _ = std::io::stdout().flush();
                last = now_c;
                last_t = Instant::now();
                next_draw += Duration::from_secs(1);
            }
        }
        if tty {
            println!();
        }
        (rt.join(), ended_by)
    });
    let report = match report {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err("the runtime thread panicked".into()),
    };
    let secs = t0.elapsed().as_secs_f64();
    let total = report.total();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "stopped by {ended_by} after {secs:.2} s: rx {} tx {} dropped {} tx_dropped {} unfinished {} ({:.3} Mpps rx average)",
        total.rx_pkts,
        total.tx_pkts,
        total.dropped,
        total.tx_dropped,
        total.unfinished,
        total.rx_pkts as f64 / secs / 1e6
    );
    let _ = writeln!(
        o,
        "{:<4} {:<12} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10} {:>8}",
        "id", "port", "rx_pkts", "rx_bytes", "rx_drop", "tx_pkts", "tx_bytes", "tx_drop", "errors"
    );
    for (i, (_, st)) in report.port_totals().iter().enumerate() {
        let name = names.get(i).map_or("?", String::as_str);
        let _ = writeln!(
            o,
            "{i:<4} {name:<12} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10} {:>8}",
            st.rx_pkts, st.rx_bytes, st.rx_dropped, st.tx_pkts, st.tx_bytes, st.tx_dropped, st.errors
        );
    }
    let mut stages = Vec::new();
    for w in &report.workers {
        let s = &w.stats;
        let core = w.core.map_or_else(|| "-".to_string(), |c| c.to_string());
        let _ = writeln!(
            o,
            "worker {} (core {core}): rx {} tx {} tx_dropped {} dropped {} unfinished {} batches {} polls {} idle {}",
            w.worker, s.rx_pkts, s.tx_pkts, s.tx_dropped, s.dropped, s.unfinished, s.batches, s.polls, s.idle_polls
        );
        add_stage_stats(&mut stages, &w.extra.stages);
    }
    let _ = writeln!(o, "{}", super::format_stats(&stages));
    let snaps: Vec<WorkerSnapshot> = report.workers.iter().map(|w| w.extra.clone()).collect();
    let tm = fastpath_control::metrics::Counters::sum(&snaps);
    if !tm.queues.is_empty() || total.queued > 0 {
        // Losses the worker names: the tx ring (tx_dropped above), the queues (refused by
        // reason below) and what the shapers still held when the run stopped.
        let held: u64 = tm.queues.iter().map(|q| q.occ_pkts).sum();
        let _ = writeln!(o, "traffic manager: queued {}, still held by the shapers at exit {held} (freed)", total.queued);
        o.push_str(&tm.render_queues());
    }
    print!("{o}");
    if let Some(p) = &a.counters_out {
        std::fs::write(p, &o).map_err(|e| format!("--counters-out {}: {e}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_specs_parse() {
        assert_eq!(parse_port("p0=afxdp:veth0").unwrap(), PortArg::AfXdp { name: "p0".into(), iface: "veth0".into(), queue: 0 });
        assert_eq!(parse_port("up=afxdp:eth1@3").unwrap(), PortArg::AfXdp { name: "up".into(), iface: "eth1".into(), queue: 3 });
        assert_eq!(parse_port("p1=afpacket:v1").unwrap(), PortArg::AfPacket { name: "p1".into(), iface: "v1".into() });
        assert_eq!(parse_port("p2=pcap::o.pcap").unwrap(), PortArg::Pcap { name: "p2".into(), input: "".into(), output: "o.pcap".into() });
        assert!(parse_port("p0=afxdp:eth0@x").unwrap_err().contains("bad queue number"));
        assert!(parse_port("p0=afxdp:").unwrap_err().contains("needs an interface"));
        assert!(parse_port("p0=tap:x").unwrap_err().contains("known: pcap, afxdp, afpacket, xdp"));
        assert_eq!(parse_port("p1=xdp:v1").unwrap(), PortArg::Xdp { name: "p1".into(), iface: "v1".into() });
        assert!(parse_port("p1=xdp:").unwrap_err().contains("xdp needs an interface"));
        assert!(parse_port("afxdp:eth0").unwrap_err().contains("NAME=KIND:ARGS"));
    }

    #[test]
    fn stage_stats_sum_over_workers() {
        let mut a = Vec::new();
        let mut st = StageStats { calls: 2, pkts_in: 10, pkts_out: 8, cycles: 100, ..StageStats::default() };
        st.drops[fastpath_packet::DropReason::ALL[1] as usize] = 2;
        add_stage_stats(&mut a, &[("port_pair".into(), st.clone())]);
        add_stage_stats(&mut a, &[("port_pair".into(), st)]);
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].1.calls, a[0].1.pkts_in, a[0].1.pkts_out, a[0].1.cycles), (4, 20, 16, 200));
        let text = crate::cli::format_stats(&a);
        assert!(text.contains(&format!("port_pair/{}: 4", fastpath_packet::DropReason::ALL[1].name())), "{text}");
    }

    #[test]
    fn live_slot_counts_rx_tx_and_drops() {
        let slot = LiveSlot::default();
        let mut pool = Pool::new(16);
        let mut b = Batch::new();
        // Two frames from port 0 (forwarded to 1), one from port 5 (no entry: dropped).
        for in_port in [0u16, 0, 5] {
            let h = pool.alloc().unwrap();
            let mut f = vec![0u8; 60];
            f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
            f[12..14].copy_from_slice(&[0x88, 0xb5]);
            pool.set_data(h, &f);
            b.push(h, in_port);
        }
        let mut p = LiveProc { inner: PipeProc(l2fwd()), slot: &slot, mail: None };
        p.process(&mut pool, &mut b, 0);
        assert_eq!(b.verdict(0), Verdict::Tx(1));
        assert_eq!(sum_slots(std::slice::from_ref(&slot)), (3, 2, 1));
        p.process(&mut pool, &mut b, 0);
        assert_eq!(sum_slots(std::slice::from_ref(&slot)), (6, 4, 2));
    }

    #[test]
    fn live_proc_applies_control_changes_between_batches_and_snapshots_its_counters() {
        let slot = LiveSlot::default();
        let (end, mail) = fastpath_control::mailbox();
        let mut p = LiveProc { inner: PipeProc(l2fwd()), slot: &slot, mail: Some(mail) };
        let op = p.inner.0.program().parse_entry("table port_pair add 5 => forward(0)").unwrap();
        end.post(fastpath_control::mailbox::ToWorker::Apply {
            seq: 1,
            ops: std::sync::Arc::from(vec![op]),
            prebuilt: std::sync::Arc::from(Vec::new()),
        })
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(1);
        p.between_batches(&[], &WorkerStats { rx_pkts: 9, ..WorkerStats::default() });
        let r = end.reply(1, deadline).unwrap();
        assert!(matches!(r, fastpath_control::mailbox::FromWorker::Applied { result: Ok(()), .. }), "{r:?}");
        assert_eq!(p.inner.0.table("port_pair").unwrap().len(), 3);
        end.post(fastpath_control::mailbox::ToWorker::Snapshot { seq: 2 }).unwrap();
        p.between_batches(&[], &WorkerStats { rx_pkts: 9, ..WorkerStats::default() });
        let fastpath_control::mailbox::FromWorker::Snapshot { snap, .. } = end.reply(2, deadline).unwrap() else { panic!("no snapshot") };
        assert_eq!(snap.totals.rx_pkts, 9);
    }

    #[test]
    fn pfcp_option_binds_a_specific_address_of_a_session_pipeline() {
        let vbng = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/vbng.toml");
        let vbng = fastpath_pipeline::compile_file(std::path::Path::new(vbng)).unwrap().instantiate();
        let ports = [parse_port("access=afpacket:va").unwrap(), parse_port("core=afpacket:vb").unwrap()];
        let s = pfcp_server("127.0.0.1:0", &vbng, &ports).unwrap();
        assert_eq!(s.local_addr().unwrap().ip(), IpAddr::from([127, 0, 0, 1]));
        let e = |addr: &str, p: &Pipeline| pfcp_server(addr, p, &ports).err().unwrap();
        assert!(e("0.0.0.0", &vbng).contains("not 0.0.0.0"), "{}", e("0.0.0.0", &vbng));
        assert!(e("pfcp.example", &vbng).contains("expected an address"));
        assert!(e("127.0.0.1:0", &l2fwd()).contains("up_session"), "{}", e("127.0.0.1:0", &l2fwd()));
    }

    fn l2fwd() -> Pipeline {
        let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/l2fwd.toml");
        let mut p = fastpath_pipeline::compile_file(std::path::Path::new(spec)).unwrap().instantiate();
        p.load_entries("e", "table port_pair add 0 => forward(1)\ntable port_pair add 1 => forward(0)\n").unwrap();
        p
    }
}
