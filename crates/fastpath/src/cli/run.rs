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
use fastpath_control::pfcp_up::{self, PfcpServer};
use fastpath_control::{Access, MetricsServer, Server, WorkerSnapshot};
use fastpath_io::af_packet::AfPacketConfig;
use fastpath_io::af_xdp::{XdpConfig, XdpMode, ZeroCopy};
use fastpath_io::multi;
use fastpath_io::pcap::{PcapSink, PcapSource};
use fastpath_io::port::{Duplex, Port};
use fastpath_io::worker::Worker;
use fastpath_packet::Pool;
use fastpath_pipeline::Pipeline;
use fastpath_runtime::{Dataplane, ExceptionFactory, Options, PortSpec};
use std::io::{IsTerminal, Write as _};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
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
    /// XDP attach mode for afxdp and xdp ports (or tc, xdp ports only).
    #[arg(long, value_enum, default_value_t = Mode::Auto)]
    pub(super) mode: Mode,
    /// Where --mode tc sends a forwarded packet: auto, straight into the ingress of a veth
    /// port's peer in another namespace (bpf_redirect_peer: no second pass through the
    /// transmit path and the backlog; the port's own egress and its tx statistics do not see
    /// the frame), other ports as xmit; xmit, out of the port's egress always (bpf_redirect).
    #[arg(long = "tc-redirect", value_enum, value_name = "auto|xmit")]
    pub(super) tc_redirect: Option<TcRedirectArg>,
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
    /// Run the control threads (--ctl, --p4rt and the other front ends, and the threads they
    /// start) real-time, SCHED_FIFO at this priority (1-99; needs CAP_SYS_NICE), so a change's
    /// hand-offs between them do not wait for a busy thread's time slice on the cores the
    /// workers leave (a generator, a build). Classifier rebuilds stay ordinary.
    #[arg(long = "control-rt", value_name = "PRIO", value_parser = clap::value_parser!(i32).range(1..=99))]
    control_rt: Option<i32>,
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
    /// Serve P4Runtime over gRPC (live ports) at ADDR: a unix socket, unix:PATH or a path (mode
    /// 0600, 0660 with --ctl-group, whatever the umask), or TCP IP:PORT, e.g. 127.0.0.1:9559.
    /// Device id 1; the device config is the spec file's text; what the pipeline punts goes to
    /// the primary controller as packet-in (unless --punt or --cpri take it). docs/control.md.
    #[arg(long, value_name = "ADDR")]
    pub(super) p4rt: Option<String>,
    /// TLS certificate chain (PEM) for a TCP --p4rt listener; needs --p4rt-key.
    #[arg(long = "p4rt-cert", value_name = "PEM", requires_all = ["p4rt", "p4rt_key"])]
    p4rt_cert: Option<PathBuf>,
    /// TLS private key (PEM) for a TCP --p4rt listener; needs --p4rt-cert.
    #[arg(long = "p4rt-key", value_name = "PEM", requires_all = ["p4rt", "p4rt_cert"])]
    p4rt_key: Option<PathBuf>,
}

/// XDP attach mode on the command line.
#[derive(Clone, Copy, ValueEnum)]
pub(super) enum Mode {
    /// Driver (native) XDP where the driver has it, else generic.
    Auto,
    /// Driver XDP only.
    Native,
    /// Generic (skb) XDP.
    Skb,
    /// The pipeline at the tc hook (tcx ingress) instead of XDP, for `xdp:` ports only; each
    /// skb is forwarded whole, so TCP with the hosts' offloads on (64 KB GSO segments) is not
    /// copied.
    Tc,
}

/// `--tc-redirect` on the command line.
#[derive(Clone, Copy, ValueEnum)]
pub(super) enum TcRedirectArg {
    /// Into a veth port's peer when it is in another namespace, else out of the port.
    Auto,
    /// Out of the port's egress always.
    Xmit,
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
    if a.ctl.is_some()
        || a.ctl_group.is_some()
        || a.metrics.is_some()
        || a.web.is_some()
        || a.pfcp.is_some()
        || a.cpri.is_some()
        || a.p4rt.is_some()
    {
        return Err(
            "--ctl, --ctl-group, --metrics, --web, --pfcp, --cpri and --p4rt serve live runs only (a capture run ends when its files are read)"
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
    let server = PfcpServer::bind(sa, pfcp_up::Endpoint::new(cfg))?;
    // A control plane refilling a restarted user plane sends every session at once.
    super::grow_rcvbuf(server.socket(), 8 << 20, "fastpath: the PFCP socket");
    Ok(server)
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
    // instance becomes the control plane's replica (every worker builds its own).
    let shadow = fastpath_runtime::build_pipeline(&a.spec, &a.entries, ports.len())?;
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
    let pfcp = a.pfcp.as_deref().map(|addr| pfcp_server(addr, &shadow, ports)).transpose()?;
    let p4rt = match a.p4rt.as_deref() {
        Some(addr) => {
            let listen = fastpath_p4rt::Listen::parse(addr)?;
            let text = std::fs::read_to_string(&a.spec).map_err(|e| format!("{}: {e}", a.spec.display()))?;
            let server = fastpath_p4rt::Server::bind(&listen, &access, a.p4rt_cert.clone().zip(a.p4rt_key.clone()))?;
            Some((
                server,
                fastpath_p4rt::Config { device_id: 1, spec_text: text, ports: ports.len() },
                Arc::new(fastpath_p4rt::PacketIo::new()),
            ))
        }
        None => None,
    };
    if a.tc_redirect.is_some() {
        return Err("--tc-redirect is for xdp: ports with --mode tc".into());
    }
    let xdp = XdpConfig {
        mode: match a.mode {
            Mode::Auto => XdpMode::Auto,
            Mode::Native => XdpMode::Native,
            Mode::Skb => XdpMode::Skb,
            Mode::Tc => return Err("--mode tc is for xdp: ports (the eBPF datapath); afxdp: ports use auto, native or skb".into()),
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
    let exception: Option<ExceptionFactory> = match (&a.punt, a.cpri.as_deref()) {
        (None, Some(addr)) => {
            let (sa, up) = (cpri_addr(addr)?, a.cpri_up);
            let addr = addr.to_string();
            Some(Arc::new(move |_w| {
                let end = super::cpri::CpriEnd::connect(sa, up).map_err(|e| format!("--cpri {addr}: no socket: {e}"))?;
                Ok(Box::new(end) as Box<dyn fastpath_io::worker::Exception>)
            }))
        }
        // Without --punt or --cpri, punts go to the P4Runtime controller as packet-ins.
        (None, None) => p4rt.as_ref().map(|(_, _, io)| {
            let io = io.clone();
            Arc::new(move |w| Ok(io.exception(w))) as ExceptionFactory
        }),
        _ => None,
    };
    let opts = Options {
        workers: a.workers,
        pin: !a.no_pin,
        first_core: a.core,
        idle_sleep_us: a.idle_sleep_us,
        pool: a.pool,
        xdp,
        packet: AfPacketConfig::default(),
        control: server.is_some() || metrics.is_some() || web.is_some() || pfcp.is_some() || p4rt.is_some(),
        punt_port: a.punt.as_deref().map(|n| punt_port(n, ports)).transpose()?,
        exception,
        control_rt: a.control_rt,
    };
    let live: Vec<PortSpec> = ports
        .iter()
        .map(|p| match p {
            PortArg::AfXdp { name, iface, queue } => Ok(PortSpec::AfXdp { name: name.clone(), iface: iface.clone(), queue: *queue }),
            PortArg::AfPacket { name, iface } => Ok(PortSpec::AfPacket { name: name.clone(), iface: iface.clone() }),
            PortArg::Pcap { name, .. } | PortArg::Xdp { name, .. } => Err(format!("port {name}: not a socket port")),
        })
        .collect::<Result<_, String>>()?;
    let stop = multi::stop_on_signals().map_err(|e| format!("installing signal handlers: {e}"))?;
    let t0 = Instant::now();
    let mut dp = Dataplane::start_with(shadow, a.spec.clone(), a.entries.clone(), live, opts)?;
    eprintln!("fastpath: {} on {} with {} worker(s) (Ctrl-C stops)", a.spec.display(), a.ports.join(" "), a.workers);
    if let Some(hk) = dp.housekeeping_cores() {
        let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        eprintln!("fastpath: worker core(s) {}, other threads on {}", list(dp.worker_cores()), list(hk));
    }
    // Front ends: each on its own thread, over the one control plane.
    if let Some(sv) = server {
        eprintln!("fastpath: control socket {} (fastpath ctl --socket {} show counters)", sv.path().display(), sv.path().display());
        dp.serve("ctl", move |ctl, done| sv.serve_until(ctl, done))?;
    }
    if let Some(mut pf) = pfcp {
        eprintln!("fastpath: PFCP endpoint at {}", pf.local_addr().map_or("?".into(), |a| a.to_string()));
        dp.serve("pfcp", move |ctl, done| {
            pf.serve_until(ctl, done);
            eprint!("{}", pf.endpoint().stats().render());
        })?;
    }
    if let Some(ms) = metrics {
        eprintln!("fastpath: Prometheus metrics at http://{}/metrics", ms.local_addr());
        dp.serve("metrics", move |ctl, done| ms.serve_until(ctl, done))?;
    }
    if let Some(ws) = web {
        eprintln!("fastpath: live page at http://{}/", ws.local_addr());
        dp.serve("web", move |ctl, done| ws.serve_until(ctl, done))?;
    }
    if let Some((ps, cfg, io)) = p4rt {
        let tls = if ps.is_tls() { " (TLS)" } else { "" };
        eprintln!("fastpath: P4Runtime at {}{tls}, device id {}", ps.client_addr(), cfg.device_id);
        if let Some(w) = ps.exposure() {
            eprintln!("fastpath: warning: {w}");
        }
        if a.punt.is_some() || a.cpri.is_some() {
            eprintln!("fastpath: punts go to --punt/--cpri, not to P4Runtime packet-ins");
        }
        dp.serve("p4rt", move |ctl, done| {
            if let Err(e) = ps.serve_until(cfg, &io, ctl, done) {
                eprintln!("fastpath: {e}");
            }
            eprintln!("{}", io.stats().render());
        })?;
    }
    let tty = std::io::stdout().is_terminal();
    let mut ended_by = "signal";
    let (mut last_t, mut last) = (Instant::now(), (0u64, 0u64, 0u64));
    let mut next_draw = Instant::now() + Duration::from_secs(1);
    while !dp.finished() {
        std::thread::sleep(Duration::from_millis(50));
        let now_c = dp.counts();
        if !dp.stopping() {
            if stop.load(Ordering::SeqCst) {
                dp.stop();
            } else if a.duration.is_some_and(|d| t0.elapsed().as_secs_f64() >= d) {
                ended_by = "--duration";
                dp.stop();
            } else if a.packets.is_some_and(|n| now_c.0 >= n) {
                ended_by = "--packets";
                dp.stop();
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
    let names = dp.port_names().to_vec();
    let report = dp.wait()?;
    let o = fastpath_runtime::render_report(&report, &names, t0.elapsed().as_secs_f64(), ended_by, super::format_stats);
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
