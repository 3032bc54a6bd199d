//! The traffic generator and receiver.
//!
//! ```text
//!  gen ns                                                            sink ns
//!  XDP live frames (BPF_PROG_RUN, paced in BPF) ─▶ gen0 ─▶ DUT ─▶ sink0 ─▶ XDP count + drop
//!  AF_PACKET probes (seq, tx time)  ─────────────▶ gen0 ─▶ DUT ─▶ sink0 ─▶ stack ─▶ AF_PACKET rx
//! ```
//!
//! Two paths, because one cannot do both jobs well:
//! - **Throughput** frames come from the kernel's XDP live-frames mode of `BPF_PROG_RUN`
//!   (`BPF_F_TEST_XDP_LIVE_FRAMES`, Linux ≥ 5.18): one core offers ~12 Mpps of any size into a
//!   veth, and the program itself paces them and counts what it sent ([`xdp`]). The sink counts
//!   them with a second XDP program. Loss = sent − received, per trial. The AF_PACKET sender
//!   ([`GenMode::AfPacket`]) is the slow fallback (one `send` per frame).
//! - **Latency, loss and reordering** per stream come from probes: frames carrying a payload
//!   header (magic, stream id, sequence number, transmit time), sent by an AF_PACKET socket at a
//!   low rate alongside the load and received by an AF_PACKET socket in the sink namespace.
//!   The transmit time is read just before the send call; the receive time is the kernel's
//!   (`SO_TIMESTAMPNS`: when the sink's receive path took the frame), so the wake-up of the
//!   receiving thread is not counted as latency — a tester stamps frames as they arrive, not
//!   when its software gets to them. Both are `CLOCK_REALTIME` read on one machine
//!   ([`ProbeClock`]), so no clock synchronisation is needed. Latency is summarised from the
//!   sorted sample (min, mean, p50, p99, p99.9, max): probes are few, so exact percentiles are
//!   affordable.
//!
//! Frame sizes follow RFC 2544: the size counts the Ethernet header and the 4-byte FCS, so a
//! "64-byte frame" is 60 bytes handed to the kernel. Gbps figures count the same bytes (no
//! preamble or inter-frame gap). Simple IMIX is 7 × 64, 4 × 594, 1 × 1518 bytes.

pub mod xdp;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fastpath_io::af_packet::RawSocket;
use fastpath_io::netns::{Netns, VethPair};

use crate::topo::{self, Topology};
use crate::LabError;
pub use xdp::{GenProg, SinkProg, DATA_PORT};

/// Magic number at the start of the probe payload header.
pub const MAGIC: u16 = 0xfa57;
/// UDP destination port of latency probes (these pass the sink's XDP counter to the stack).
pub const PROBE_PORT: u16 = 7777;
/// Length of the payload header: magic u16, stream u16, sequence u32, transmit time u64 (ns).
pub const HDR_LEN: usize = 16;
/// Bytes of Ethernet FCS counted in an RFC 2544 frame size but not handed to the kernel.
pub const FCS_LEN: usize = 4;
/// Offset of the payload header: Ethernet (14) + IPv4 (20) + UDP (8).
pub const HDR_OFF: usize = 42;
/// Smallest frame size (with FCS) that holds the headers and the payload header.
pub const MIN_FRAME: u16 = 64;
/// Largest frame size (with FCS) for a 1500-byte MTU.
pub const MAX_FRAME: u16 = 1518;
/// First UDP source port; `flows` frames rotate through `BASE_PORT..BASE_PORT + flows`.
pub const BASE_PORT: u16 = 10_000;

/// The RFC 2544 frame sizes for Ethernet (§9.1).
pub const RFC2544_SIZES: [u16; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// Frame sizes of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sizes {
    /// One size.
    Fixed(u16),
    /// Each size in turn (a separate trial per size).
    Sweep(Vec<u16>),
    /// Simple IMIX: 7 × 64, 4 × 594, 1 × 1518 bytes, interleaved.
    Imix,
}

impl Sizes {
    /// The sizes to run trials at; IMIX is one trial with mixed sizes, listed as `0`.
    pub fn trials(&self) -> Vec<u16> {
        match self {
            Sizes::Fixed(s) => vec![*s],
            Sizes::Sweep(v) => v.clone(),
            Sizes::Imix => vec![0],
        }
    }

    /// The repeating size pattern of one trial at `size` (`0` = IMIX).
    pub fn pattern(size: u16) -> Vec<u16> {
        if size == 0 {
            let mut p = vec![64; 7];
            p.extend([594; 4]);
            p.push(1518);
            p
        } else {
            vec![size]
        }
    }
}

/// How the paced generator behaves after a stall (the generator's thread preempted, a slow
/// program run): its token bucket's depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    /// Catch up on up to 1 ms of missed frames, back to back: the offered count stays exact
    /// (throughput trials).
    CatchUp,
    /// Never catch up: frames missed in a stall are skipped, so the load stays evenly spaced
    /// (the latency test), at the price of offering slightly less than asked. A catch-up burst
    /// is not neutral between DUTs: a DUT on its own core queues it and the probes sent next
    /// wait behind it, while the Linux bridge forwards it inside the generator's own call, on
    /// the tester's core, before the next probe can even be stamped. With bursts of up to 32
    /// frames, fastpath's p99 at 0.25 Mpps was 24–41 µs; without, 11–12 µs (two runs each,
    /// the burst switched in a scratch build while making the change).
    Smooth,
    /// Catch up on up to this long of missed frames: for several generators sharing the
    /// tester's core (the switch tests' N senders), where each waits for the others' time
    /// slices — milliseconds, longer than [`Pacing::CatchUp`]'s window, so each sender fell to
    /// half its rate with 2 senders. Bursts are at most as long as the wait.
    CatchUpWithin(Duration),
}

/// Addresses and ports of generated frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    /// Source MAC (the generator's interface).
    pub src_mac: [u8; 6],
    /// Destination MAC (the sink's interface).
    pub dst_mac: [u8; 6],
    /// Source IPv4 address.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    pub dst_ip: Ipv4Addr,
    /// UDP source port (the first flow's).
    pub src_port: u16,
    /// UDP destination port: [`DATA_PORT`] for load, [`PROBE_PORT`] for probes.
    pub dst_port: u16,
}

impl FrameSpec {
    /// Generator-to-sink frames of `topo` to `dst_port`.
    pub fn for_topology(t: &Topology, dst_port: u16) -> FrameSpec {
        FrameSpec { src_mac: t.gen_mac, dst_mac: t.sink_mac, src_ip: t.gen_ip, dst_ip: t.sink_ip, src_port: BASE_PORT, dst_port }
    }
}

/// RFC 1071 checksum of `b`.
fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        let w = match c {
            [a, b] => u16::from_be_bytes([*a, *b]),
            [a] => u16::from_be_bytes([*a, 0]),
            _ => 0,
        };
        s += u32::from(w);
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Builds an Ethernet/IPv4/UDP frame of RFC 2544 size `frame_size` (with FCS, clamped to
/// [`MIN_FRAME`]..=[`MAX_FRAME`]) carrying the payload header. The UDP checksum is zero (no
/// checksum, RFC 768), so the XDP generator can rewrite ports without updating it.
pub fn build_frame(spec: &FrameSpec, frame_size: u16, stream: u16, seq: u32, tx_ns: u64) -> Vec<u8> {
    frame_of_len(spec, usize::from(frame_size.clamp(MIN_FRAME, MAX_FRAME)) - FCS_LEN, stream, seq, tx_ns)
}

/// Largest frame size (with FCS) of [`build_jumbo_frame`]: 9216 bytes, the jumbo size of the
/// switch reports' burst tests (a 9198-byte IP MTU, which the lab's jumbo veths allow).
pub const MAX_JUMBO_FRAME: u16 = 9216;

/// As [`build_frame`], for frame sizes up to [`MAX_JUMBO_FRAME`] (clamped to
/// [`MIN_FRAME`]..=[`MAX_JUMBO_FRAME`]), for paths whose MTU takes them.
pub fn build_jumbo_frame(spec: &FrameSpec, frame_size: u16) -> Vec<u8> {
    frame_of_len(spec, usize::from(frame_size.clamp(MIN_FRAME, MAX_JUMBO_FRAME)) - FCS_LEN, 0, 0, 0)
}

/// An Ethernet/IPv4/UDP frame of `len` bytes (without FCS; `HDR_OFF + HDR_LEN..=65535 + 14`)
/// carrying the payload header.
fn frame_of_len(spec: &FrameSpec, len: usize, stream: u16, seq: u32, tx_ns: u64) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&spec.dst_mac);
    f[6..12].copy_from_slice(&spec.src_mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (len - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45; // version 4, IHL 5
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64; // TTL
    ip[9] = 17; // UDP
    ip[12..16].copy_from_slice(&spec.src_ip.octets());
    ip[16..20].copy_from_slice(&spec.dst_ip.octets());
    let c = csum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&spec.src_port.to_be_bytes());
    udp[2..4].copy_from_slice(&spec.dst_port.to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
    write_header(&mut f, stream, seq, tx_ns);
    f
}

/// Writes the payload header into a frame built by [`build_frame`].
pub fn write_header(frame: &mut [u8], stream: u16, seq: u32, tx_ns: u64) {
    if let Some(h) = frame.get_mut(HDR_OFF..HDR_OFF + HDR_LEN) {
        h[0..2].copy_from_slice(&MAGIC.to_be_bytes());
        h[2..4].copy_from_slice(&stream.to_be_bytes());
        h[4..8].copy_from_slice(&seq.to_be_bytes());
        h[8..16].copy_from_slice(&tx_ns.to_be_bytes());
    }
}

/// The payload header of a received probe frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Stream id.
    pub stream: u16,
    /// Sequence number within the stream.
    pub seq: u32,
    /// Transmit time, ns since the run's time base.
    pub tx_ns: u64,
}

/// Parses an Ethernet/IPv4/UDP frame to [`PROBE_PORT`] carrying our header. `None` for
/// anything else (never panics on any bytes).
pub fn parse_probe(f: &[u8]) -> Option<Probe> {
    if f.get(12..14)? != [0x08, 0x00] || *f.get(23)? != 17 || f.get(14)? & 0xf0 != 0x40 {
        return None;
    }
    let ihl = usize::from(f.get(14)? & 0x0f) * 4;
    let udp = 14 + ihl;
    let dport = u16::from_be_bytes(f.get(udp + 2..udp + 4)?.try_into().ok()?);
    if dport != PROBE_PORT {
        return None;
    }
    parse_probe_payload(f.get(udp + 8..)?)
}

/// Parses the payload header at the start of a probe's UDP payload (as a UDP socket reads it).
/// `None` when it is shorter than [`HDR_LEN`] or lacks the magic (never panics on any bytes).
pub fn parse_probe_payload(p: &[u8]) -> Option<Probe> {
    let h = p.get(..HDR_LEN)?;
    if u16::from_be_bytes([h[0], h[1]]) != MAGIC {
        return None;
    }
    Some(Probe {
        stream: u16::from_be_bytes([h[2], h[3]]),
        seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        tx_ns: u64::from_be_bytes(h[8..16].try_into().ok()?),
    })
}

/// Latency percentiles of a sample, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Latency {
    /// Smallest.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Number of samples.
    pub samples: u64,
}

impl Latency {
    /// Summarises samples in nanoseconds (sorted in place). Nearest-rank percentiles. `None` for
    /// an empty sample.
    pub fn from_ns(s: &mut [u64]) -> Option<Latency> {
        if s.is_empty() {
            return None;
        }
        s.sort_unstable();
        let n = s.len();
        let rank = |p: f64| s[((p * n as f64).ceil() as usize).clamp(1, n) - 1] as f64 / 1e3;
        let mean = s.iter().map(|&x| x as f64).sum::<f64>() / n as f64 / 1e3;
        Some(Latency {
            min: s[0] as f64 / 1e3,
            mean,
            p50: rank(0.50),
            p99: rank(0.99),
            p999: rank(0.999),
            max: s[n - 1] as f64 / 1e3,
            samples: n as u64,
        })
    }
}

/// What the receiver saw of one stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamRx {
    /// Frames received (duplicates included).
    pub received: u64,
    /// Frames that arrived after a frame with a higher sequence number.
    pub reordered: u64,
    /// Highest sequence number seen.
    pub max_seq: u32,
    /// One-way latency of each frame, ns.
    pub latency_ns: Vec<u64>,
}

/// Per-stream results of a probe run.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct StreamStats {
    /// Stream id.
    pub stream: u16,
    /// Frames sent.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// `sent − received` (never negative).
    pub lost: u64,
    /// Loss ratio, 0..1.
    pub loss_ratio: f64,
    /// Frames received out of order.
    pub reordered: u64,
    /// Latency summary (None when nothing arrived).
    pub latency_us: Option<Latency>,
}

/// A stream of latency probes.
#[derive(Clone, Debug)]
pub struct ProbeConfig {
    /// Interface to send on (in the calling thread's namespace).
    pub iface: String,
    /// Addresses; the destination port should be [`PROBE_PORT`].
    pub spec: FrameSpec,
    /// RFC 2544 frame size.
    pub frame_size: u16,
    /// Stream id carried in the payload header.
    pub stream: u16,
    /// Probes to send.
    pub count: u64,
    /// Probes per second.
    pub rate_pps: u64,
}

/// Real-time priority of the probe sender and receiver threads.
pub const PROBE_RT_PRIORITY: i32 = 10;

/// Makes the calling probe thread `SCHED_FIFO` (best effort). A probe thread is asleep except
/// for a few microseconds per probe, but an ordinary thread waking on a CPU where a busy thread
/// (the paced generator, a polling DUT) runs waits for that thread's time slice: EEVDF lets the
/// running task finish its slice (`RUN_TO_PARITY`), ~1.5 ms on 2 CPUs. That wait, not the DUT,
/// was the p99 of every polling DUT. A real-time probe thread is stamped when its frame moves.
fn realtime_probe_thread() {
    let _ = fastpath_io::sys::set_realtime(PROBE_RT_PRIORITY);
}

/// The time base of probe stamps: nanoseconds of `CLOCK_REALTIME` since the clock was
/// started, the clock of the kernel's receive timestamps.
#[derive(Clone, Copy, Debug)]
pub struct ProbeClock {
    base_ns: u64,
}

impl ProbeClock {
    /// A clock starting now.
    pub fn start() -> ProbeClock {
        ProbeClock { base_ns: fastpath_io::sys::realtime_ns() }
    }

    /// Nanoseconds since the start.
    pub fn now_ns(self) -> u64 {
        self.at_ns(fastpath_io::sys::realtime_ns())
    }

    /// A `CLOCK_REALTIME` time (e.g. a kernel receive stamp) as nanoseconds since the start.
    pub fn at_ns(self, realtime_ns: u64) -> u64 {
        realtime_ns.saturating_sub(self.base_ns)
    }
}

/// Sends the probes of `cfg` from the calling thread (which must be in the generator's
/// namespace), each stamped with its sequence number and the time on `clock`. Stops early
/// when `stop` is set. Returns how many were sent.
///
/// # Errors
/// [`LabError::Io`] when the socket cannot be opened.
pub fn send_probes(cfg: &ProbeConfig, clock: ProbeClock, stop: &AtomicBool) -> Result<u64, LabError> {
    let iface = &cfg.iface;
    let sock = RawSocket::open(iface).map_err(|e| LabError::Io(format!("probe socket on {iface}: {e}")))?;
    realtime_probe_thread();
    let mut frame = build_frame(&cfg.spec, cfg.frame_size, cfg.stream, 0, 0);
    let interval = Duration::from_secs_f64(1.0 / cfg.rate_pps.max(1) as f64);
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < cfg.count && !stop.load(Ordering::Relaxed) {
        let due = start + interval.mul_f64(sent as f64);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        write_header(&mut frame, cfg.stream, sent as u32, clock.now_ns());
        if sock.send(&frame).is_ok() {
            sent += 1;
        } else {
            // ENOBUFS when the qdisc is full: back off briefly, the probe is not sent.
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    Ok(sent)
}

/// Receives probes on `iface` from the calling thread (in the sink's namespace) until `stop`
/// is set and then `drain` more time has passed without a frame. A probe's latency ends at its
/// kernel receive stamp (at the time it is read when the kernel gave none). Binds a UDP socket on
/// `bind_ip:PROBE_PORT` so the sink's stack does not answer probes with ICMP port unreachable.
/// The packet socket carries a classic BPF filter that takes only UDP frames to
/// [`PROBE_PORT`]: packet sockets see frames before the sink's tc counter drops the data
/// frames, and without the filter each of those would be copied to this socket.
///
/// # Errors
/// [`LabError::Io`] when a socket cannot be opened.
pub fn receive_probes(
    iface: &str,
    bind_ip: Ipv4Addr,
    clock: ProbeClock,
    stop: &AtomicBool,
    ready: &AtomicBool,
    drain: Duration,
) -> Result<BTreeMap<u16, StreamRx>, LabError> {
    let sock = RawSocket::open(iface).map_err(|e| LabError::Io(format!("receive socket on {iface}: {e}")))?;
    sock.accept_only_udp_dport(PROBE_PORT).map_err(|e| LabError::Io(format!("probe filter on {iface}: {e}")))?;
    sock.enable_rx_timestamps().map_err(|e| LabError::Io(format!("receive timestamps on {iface}: {e}")))?;
    let _quiet = std::net::UdpSocket::bind((bind_ip, PROBE_PORT))?;
    // Let the kernel switch receive stamping on before the first probe (see
    // `RawSocket::enable_rx_timestamps`).
    std::thread::sleep(Duration::from_millis(50));
    realtime_probe_thread();
    ready.store(true, Ordering::SeqCst);
    let mut streams: BTreeMap<u16, StreamRx> = BTreeMap::new();
    let mut buf = vec![0u8; 2048];
    let mut quiet_since: Option<Instant> = None;
    loop {
        match sock.recv_stamped(&mut buf, 20)? {
            Some((n, stamp)) => {
                let now_ns = stamp.map_or_else(|| clock.now_ns(), |t| clock.at_ns(t));
                quiet_since = None;
                if let Some(p) = buf.get(..n).and_then(parse_probe) {
                    let s = streams.entry(p.stream).or_default();
                    if s.received > 0 && p.seq < s.max_seq {
                        s.reordered += 1;
                    }
                    s.max_seq = s.max_seq.max(p.seq);
                    s.received += 1;
                    s.latency_ns.push(now_ns.saturating_sub(p.tx_ns));
                }
            }
            None => {
                if stop.load(Ordering::SeqCst) {
                    let q = *quiet_since.get_or_insert_with(Instant::now);
                    if q.elapsed() >= drain {
                        break;
                    }
                }
            }
        }
    }
    Ok(streams)
}

/// Turns a receiver's view plus the sent count into [`StreamStats`].
pub fn stream_stats(stream: u16, sent: u64, rx: Option<StreamRx>) -> StreamStats {
    let mut rx = rx.unwrap_or_default();
    let lost = sent.saturating_sub(rx.received);
    StreamStats {
        stream,
        sent,
        received: rx.received,
        lost,
        loss_ratio: if sent == 0 { 0.0 } else { lost as f64 / sent as f64 },
        reordered: rx.reordered,
        latency_us: Latency::from_ns(&mut rx.latency_ns),
    }
}

/// How throughput frames are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GenMode {
    /// XDP live frames (`BPF_PROG_RUN`), paced in BPF: millions of packets per second.
    #[default]
    XdpLive,
    /// One AF_PACKET `send` per frame: the slow fallback for kernels without live frames.
    AfPacket,
}

/// One throughput trial's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Trial {
    /// RFC 2544 frame size (0 = IMIX).
    pub frame_size: u16,
    /// Requested rate, packets per second (0 = as fast as possible).
    pub rate_pps: u64,
    /// Frames the generator sent.
    pub sent: u64,
    /// Data frames the sink counted.
    pub received: u64,
    /// Bytes (with FCS) the sink counted.
    pub received_bytes: u64,
    /// Seconds the generator spent sending.
    pub elapsed_s: f64,
}

impl Trial {
    /// Loss ratio 0..1 (`sent − received` over `sent`).
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.sent.saturating_sub(self.received) as f64 / self.sent as f64
        }
    }
    /// Offered rate actually achieved, Mpps.
    pub fn offered_mpps(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.sent as f64 / self.elapsed_s / 1e6
        } else {
            0.0
        }
    }
    /// Received rate, Mpps.
    pub fn received_mpps(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.received as f64 / self.elapsed_s / 1e6
        } else {
            0.0
        }
    }
    /// Received rate in Gbps, counting frames with FCS.
    pub fn received_gbps(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.received_bytes as f64 * 8.0 / self.elapsed_s / 1e9
        } else {
            0.0
        }
    }
}

/// Where the sink counts: XDP for frames straight from the generator (no DUT), tc for frames
/// a DUT transmits (socket buffers; see [`SinkProg::attach_tc`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SinkHook {
    Xdp,
    Tc,
}

/// A loaded generator and an attached sink counter between two interfaces in two namespaces.
pub struct Traffic {
    gen: Option<GenProg>,
    sink: SinkProg,
    gen_ns: String,
    gen_if: String,
    spec: FrameSpec,
    mode: GenMode,
}

impl Traffic {
    /// Loads the generator (in XDP mode) and attaches the sink counter to the topology's sink
    /// (a tc program: the frames come through a DUT, as socket buffers).
    ///
    /// # Errors
    /// [`LabError::Bpf`] when the kernel refuses a program; [`LabError::Io`] for namespaces.
    pub fn attach(t: &Topology, mode: GenMode) -> Result<Traffic, LabError> {
        let spec = FrameSpec::for_topology(t, DATA_PORT);
        Traffic::connect(&t.gen_ns, t.gen_if, &t.sink_ns, t.sink_if, spec, mode, SinkHook::Tc)
    }

    /// As [`Traffic::attach`] for any generator and sink interfaces, with the sink counting in
    /// XDP (the generator's frames arrive as XDP frames, e.g. straight from the generator).
    ///
    /// # Errors
    /// As [`Traffic::attach`].
    pub fn between(gen_ns: &str, gen_if: &str, sink_ns: &str, sink_if: &str, spec: FrameSpec, mode: GenMode) -> Result<Traffic, LabError> {
        Traffic::connect(gen_ns, gen_if, sink_ns, sink_if, spec, mode, SinkHook::Xdp)
    }

    #[allow(clippy::too_many_arguments)]
    fn connect(
        gen_ns: &str,
        gen_if: &str,
        sink_ns: &str,
        sink_if: &str,
        spec: FrameSpec,
        mode: GenMode,
        hook: SinkHook,
    ) -> Result<Traffic, LabError> {
        let gen = match mode {
            GenMode::XdpLive => Some(GenProg::load()?),
            GenMode::AfPacket => None,
        };
        let sif = sink_if.to_owned();
        let sink = topo::in_netns(sink_ns, move || -> Result<SinkProg, LabError> {
            let idx = fastpath_io::sys::ifindex(&sif)?;
            match hook {
                SinkHook::Xdp => SinkProg::attach(idx),
                SinkHook::Tc => SinkProg::attach_tc(idx),
            }
        })??;
        Ok(Traffic { gen, sink, gen_ns: gen_ns.to_owned(), gen_if: gen_if.to_owned(), spec, mode })
    }

    /// The frame addresses of data frames.
    pub fn spec(&self) -> &FrameSpec {
        &self.spec
    }

    /// Offers `rate_pps` (0 = as fast as possible) frames of `frame_size` (0 = IMIX) over
    /// `flows` UDP source ports for `duration`, then waits for the sink's count to settle.
    /// A stalled generator catches up ([`Pacing::CatchUp`]), so the offered count is exact.
    ///
    /// # Errors
    /// [`LabError::Bpf`]/[`LabError::Io`] from the generator or the sink counter.
    pub fn trial(&self, frame_size: u16, flows: u32, rate_pps: u64, duration: Duration) -> Result<Trial, LabError> {
        self.trial_paced(frame_size, flows, rate_pps, duration, Pacing::CatchUp)
    }

    /// [`Traffic::trial`] with the given pacing.
    ///
    /// # Errors
    /// As [`Traffic::trial`].
    pub fn trial_paced(&self, frame_size: u16, flows: u32, rate_pps: u64, duration: Duration, pacing: Pacing) -> Result<Trial, LabError> {
        self.sink.reset()?;
        let limit = if rate_pps == 0 { u64::MAX } else { (rate_pps as f64 * duration.as_secs_f64()).ceil() as u64 };
        let (sent, elapsed) = match (&self.gen, self.mode) {
            (Some(g), GenMode::XdpLive) => {
                let (gif, spec) = (self.gen_if.clone(), self.spec.clone());
                let offer = XdpOffer { frame_size, flows, rate_pps, limit, duration, pacing };
                topo::in_netns(&self.gen_ns, move || xdp_send(g, &gif, &spec, &offer))??
            }
            _ => {
                let (gif, spec) = (self.gen_if.clone(), self.spec.clone());
                topo::in_netns(&self.gen_ns, move || packet_send(&gif, &spec, frame_size, flows, rate_pps, limit, duration))??
            }
        };
        // Let in-flight frames arrive: wait until the count stops moving (≤ 1 s).
        let t0 = Instant::now();
        let mut last = self.sink.read()?;
        loop {
            std::thread::sleep(Duration::from_millis(30));
            let now = self.sink.read()?;
            if now == last || t0.elapsed() > Duration::from_secs(1) {
                last = now;
                break;
            }
            last = now;
        }
        Ok(Trial { frame_size, rate_pps, sent, received: last.0, received_bytes: last.1 + last.0 * FCS_LEN as u64, elapsed_s: elapsed })
    }
}

/// What one XDP generator run offers: frames of `frame_size` (0 = IMIX) over `flows` UDP
/// source ports at `rate_pps` (0 = as fast as possible), until `limit` frames are out or
/// `duration` has passed.
#[derive(Clone, Copy, Debug)]
struct XdpOffer {
    frame_size: u16,
    flows: u32,
    rate_pps: u64,
    limit: u64,
    duration: Duration,
    pacing: Pacing,
}

/// Sends with the XDP generator from the calling thread (in the generator's namespace).
/// Returns (frames sent, seconds). IMIX runs its three sizes as consecutive segments whose
/// lengths follow the 7:4:1 mix (the kernel repeats one frame per call).
fn xdp_send(g: &GenProg, iface: &str, spec: &FrameSpec, offer: &XdpOffer) -> Result<(u64, f64), LabError> {
    let ifindex = fastpath_io::sys::ifindex(iface)?;
    let (limit, duration) = (offer.limit, offer.duration);
    let pattern = Sizes::pattern(offer.frame_size);
    let mut segments: Vec<(u16, u64)> = Vec::new(); // (size, weight)
    for s in pattern {
        match segments.iter_mut().find(|x| x.0 == s) {
            Some(x) => x.1 += 1,
            None => segments.push((s, 1)),
        }
    }
    let total_w: u64 = segments.iter().map(|x| x.1).sum();
    let (mut sent, mut secs) = (0u64, 0f64);
    for (size, w) in segments {
        let frame = build_frame(spec, size, 0, 0, 0);
        let seg_limit = if limit == u64::MAX { u64::MAX } else { limit * w / total_w };
        let seg_time = duration.mul_f64(w as f64 / total_w as f64);
        let (n, t) = xdp_segment(g, ifindex, &frame, &XdpOffer { limit: seg_limit, duration: seg_time, ..*offer })?;
        sent += n;
        secs += t;
    }
    Ok((sent, secs))
}

/// One size (`frame`; the offer's `frame_size` is not used): runs the paced program until
/// `limit` frames are out or the time is up (with slack for a busy machine). Returns (sent,
/// seconds of sending).
fn xdp_segment(g: &GenProg, ifindex: u32, frame: &[u8], offer: &XdpOffer) -> Result<(u64, f64), LabError> {
    let XdpOffer { flows, rate_pps, limit, duration, pacing, .. } = *offer;
    g.arm(limit, rate_pps, flows, BASE_PORT, pacing)?;
    let start = Instant::now();
    let paced = rate_pps != 0 && limit != u64::MAX;
    // A paced run may take a little longer than planned when the core is shared.
    let deadline = if paced { start + duration.mul_f64(2.0) + Duration::from_secs(1) } else { start + duration };
    // Repetitions per call: long runs amortise the call's set-up (page pool, batches); a frame
    // that is "not yet" costs tens of ns, so 2^20 repetitions are some tens of milliseconds.
    let repeat: u32 = if paced { 1 << 20 } else { 1 << 21 };
    loop {
        g.run(ifindex, frame, repeat)?;
        if g.sent()? >= limit || Instant::now() >= deadline {
            break;
        }
    }
    let sent = g.sent()?;
    let wall = start.elapsed().as_secs_f64();
    // The program never sends faster than the rate, so a paced run that sent its whole budget
    // took budget / rate seconds of sending; the wall clock also counts the idle tail of the
    // last call.
    let secs = if paced && sent >= limit { (limit as f64 / rate_pps as f64).min(wall) } else { wall };
    Ok((sent, secs))
}

/// Sends with an AF_PACKET socket from the calling thread (in the generator's namespace),
/// paced by a token bucket refilled every millisecond.
fn packet_send(
    iface: &str,
    spec: &FrameSpec,
    frame_size: u16,
    flows: u32,
    rate_pps: u64,
    limit: u64,
    duration: Duration,
) -> Result<(u64, f64), LabError> {
    let sock = RawSocket::open(iface).map_err(|e| LabError::Io(format!("sender socket on {iface}: {e}")))?;
    let pattern = Sizes::pattern(frame_size);
    let mut frames: Vec<Vec<u8>> = pattern.iter().map(|&s| build_frame(spec, s, 0, 0, 0)).collect();
    let start = Instant::now();
    let end = start + duration;
    let mut sent = 0u64;
    let flows = u64::from(flows.max(1));
    while sent < limit && Instant::now() < end {
        let allowed = if rate_pps == 0 { limit } else { ((start.elapsed().as_secs_f64() * rate_pps as f64) as u64).min(limit) };
        if sent >= allowed {
            std::thread::sleep(Duration::from_micros(500));
            continue;
        }
        for _ in 0..(allowed - sent).min(256) {
            let n = frames.len();
            let f = &mut frames[(sent as usize) % n];
            let port = BASE_PORT.wrapping_add((sent % flows) as u16);
            f[34..36].copy_from_slice(&port.to_be_bytes());
            if sock.send(f).is_ok() {
                sent += 1;
            } else {
                break;
            }
        }
    }
    Ok((sent, start.elapsed().as_secs_f64()))
}

/// Configuration of a stand-alone generator run (`fastpath gen`): the generator's own veth pair
/// into an XDP sink, no DUT — how fast the generator itself is.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// Frame sizes.
    pub sizes: Sizes,
    /// Number of flows (UDP source ports).
    pub flows: u32,
    /// Rate, packets per second (0 = as fast as possible).
    pub rate_pps: u64,
    /// Seconds per size.
    pub duration_s: f64,
    /// How frames are sent.
    pub mode: GenMode,
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig { sizes: Sizes::Fixed(64), flows: 1, rate_pps: 0, duration_s: 2.0, mode: GenMode::XdpLive }
    }
}

/// Results of [`run`]: one trial per frame size.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct GenResults {
    /// One per size.
    pub trials: Vec<Trial>,
}

/// Runs the generator into its own XDP sink over a fresh veth pair (two namespaces, removed
/// afterwards) and reports sent and received rates per frame size.
///
/// # Errors
/// [`LabError::NotRoot`], [`LabError::Bpf`] (e.g. no live-frames mode), [`LabError::Interrupted`].
pub fn run(cfg: &GenConfig, progress: &mut dyn FnMut(&str)) -> Result<GenResults, LabError> {
    if !fastpath_io::sys::is_root() {
        return Err(LabError::NotRoot);
    }
    let gen = Netns::new(&format!("{}gen", topo::PREFIX))?;
    let sink = Netns::new(&format!("{}sink", topo::PREFIX))?;
    let _pair = VethPair::new(&gen, "gen0", &sink, "sink0")?;
    let mac = |ns: &Netns, i: &str| -> Result<[u8; 6], LabError> {
        let s = ns.exec("cat", &[&format!("/sys/class/net/{i}/address")])?;
        let mut m = [0u8; 6];
        for (o, p) in m.iter_mut().zip(s.trim().split(':')) {
            *o = u8::from_str_radix(p, 16).map_err(|_| LabError::Io(format!("bad MAC {s}")))?;
        }
        Ok(m)
    };
    let spec = FrameSpec {
        src_mac: mac(&gen, "gen0")?,
        dst_mac: mac(&sink, "sink0")?,
        src_ip: Ipv4Addr::new(198, 18, 0, 1),
        dst_ip: Ipv4Addr::new(198, 18, 0, 2),
        src_port: BASE_PORT,
        dst_port: DATA_PORT,
    };
    let traffic = Traffic::between(gen.name(), "gen0", sink.name(), "sink0", spec, cfg.mode)?;
    let mut out = GenResults::default();
    for size in cfg.sizes.trials() {
        if topo::interrupted() {
            return Err(LabError::Interrupted);
        }
        let t = traffic.trial(size, cfg.flows, cfg.rate_pps, Duration::from_secs_f64(cfg.duration_s))?;
        progress(&format!(
            "gen {} B: sent {} ({:.2} Mpps), received {} ({:.2} Mpps, {:.2} Gbps)",
            if size == 0 { "IMIX".to_owned() } else { size.to_string() },
            t.sent,
            t.offered_mpps(),
            t.received,
            t.received_mpps(),
            t.received_gbps()
        ));
        out.trials.push(t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec() -> FrameSpec {
        FrameSpec {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_ip: Ipv4Addr::new(198, 18, 0, 1),
            dst_ip: Ipv4Addr::new(198, 18, 0, 2),
            src_port: 10_000,
            dst_port: PROBE_PORT,
        }
    }

    #[test]
    fn frame_fields_and_checksum() {
        let f = build_frame(&spec(), 64, 3, 77, 123_456_789);
        assert_eq!(f.len(), 60);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 46, "IPv4 total length");
        assert_eq!(csum(&f[14..34]), 0, "IPv4 header checksum verifies");
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 26, "UDP length");
        assert_eq!(&f[26..30], &[198, 18, 0, 1]);
        let p = parse_probe(&f).unwrap();
        assert_eq!(p, Probe { stream: 3, seq: 77, tx_ns: 123_456_789 });
        let big = build_frame(&spec(), 1518, 0, 0, 0);
        assert_eq!(big.len(), 1514);
        assert_eq!(build_frame(&spec(), 10, 0, 0, 0).len(), 60, "clamped to the minimum");
        assert_eq!(build_frame(&spec(), 9216, 0, 0, 0).len(), 1514, "clamped to the maximum");
        let j = build_jumbo_frame(&spec(), 9216);
        assert_eq!(j.len(), 9212);
        assert_eq!(u16::from_be_bytes([j[16], j[17]]), 9198, "IPv4 total length");
        assert_eq!(u16::from_be_bytes([j[38], j[39]]), 9178, "UDP length");
        assert_eq!(csum(&j[14..34]), 0, "IPv4 header checksum verifies");
        assert_eq!(build_jumbo_frame(&spec(), 65_000).len(), 9212, "clamped to the jumbo maximum");
    }

    #[test]
    fn known_ip_checksum() {
        // RFC 1071 example header (from the classic worked example): checksum 0xb861.
        let h = [0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7];
        assert_eq!(csum(&h), 0xb861);
    }

    #[test]
    fn non_probes_are_rejected() {
        let mut f = build_frame(&spec(), 64, 1, 1, 1);
        f[37] = 9; // destination port 7777 -> other
        assert_eq!(parse_probe(&f), None);
        let mut g = build_frame(&spec(), 64, 1, 1, 1);
        g[HDR_OFF] = 0; // bad magic
        assert_eq!(parse_probe(&g), None);
        assert_eq!(parse_probe(&[]), None);
    }

    #[test]
    fn latency_percentiles_nearest_rank() {
        let mut s: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let l = Latency::from_ns(&mut s).unwrap();
        assert_eq!((l.min, l.p50, l.p99, l.p999, l.max), (1.0, 500.0, 990.0, 999.0, 1000.0));
        assert!((l.mean - 500.5).abs() < 1e-9);
        assert_eq!(Latency::from_ns(&mut []), None);
    }

    #[test]
    fn stream_stats_loss() {
        let rx = StreamRx { received: 90, reordered: 2, max_seq: 99, latency_ns: vec![1000; 90] };
        let s = stream_stats(1, 100, Some(rx));
        assert_eq!((s.lost, s.reordered), (10, 2));
        assert!((s.loss_ratio - 0.1).abs() < 1e-12);
        assert_eq!(stream_stats(2, 5, None).lost, 5);
    }

    #[test]
    fn imix_pattern() {
        let p = Sizes::pattern(0);
        assert_eq!(p.len(), 12);
        assert_eq!(p.iter().filter(|&&s| s == 64).count(), 7);
        assert_eq!(Sizes::Imix.trials(), vec![0]);
        assert_eq!(Sizes::Sweep(vec![64, 128]).trials(), vec![64, 128]);
    }

    proptest! {
        #[test]
        fn parse_probe_never_panics(b in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = parse_probe(&b);
        }

        #[test]
        fn header_round_trips(stream in any::<u16>(), seq in any::<u32>(), ts in any::<u64>(), size in 64u16..=1518) {
            let f = build_frame(&spec(), size, stream, seq, ts);
            prop_assert_eq!(f.len(), usize::from(size) - 4);
            prop_assert_eq!(parse_probe(&f), Some(Probe { stream, seq, tx_ns: ts }));
            // What a UDP socket reads: the payload after the 42 bytes of headers.
            prop_assert_eq!(parse_probe_payload(&f[HDR_OFF..]), Some(Probe { stream, seq, tx_ns: ts }));
        }

        #[test]
        fn parse_probe_payload_never_panics(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = parse_probe_payload(&b);
        }
    }
}
