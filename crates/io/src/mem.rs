//! In-memory ports: [`MemSource`], a synthetic traffic source that behaves like a NIC receive
//! ring, and [`MemSink`], which counts and frees what it is given.
//!
//! **Templates.** A traffic profile (or any [`TemplateGen`]) is turned once into
//! [`Templates`]: the frames the source gives, in the order it gives them, for one period of
//! the traffic pattern — packet `j` is flow `j mod F` at size `sizes[j mod S]`, so the period
//! is `lcm(F, S)` — stored as each frame's first `stride` bytes (64 or 128, enough for all its
//! headers; 64 when every frame fits in 64, as it is then restored whole) in one contiguous,
//! cache-line-aligned array plus a `u16` length per frame. Short
//! periods are repeated up to a batch (256) so a burst wraps at most once.
//!
//! ```text
//!  heads: [ pkt 0 | pkt 1 | pkt 2 | … | pkt P−1 ]   stride bytes each (flow j mod F, size seq[j mod S])
//!  lens:  [ len   | len   | len   | … | len     ]   u16 each
//!  cursor ─────────▲ next packet; wraps to 0
//! ```
//! 64k flows × 128 B is 8 MiB; 1M flows × 64 B is 64 MiB; 1M flows of IMIX (S = 12,
//! lcm = 3M) × 64 B is 192 MiB.
//!
//! **Receive, like DMA.** `rx_burst` pops buffer handles from the pool's free list
//! ([`Pool::alloc_burst`]), appends them to the batch ([`Batch::push_burst`]), then walks the
//! templates from the cursor: one fixed-size copy of the `stride` header bytes into each buffer
//! at the default headroom, and the frame length ([`Pool::write_head`]). There is no index
//! arithmetic or bounds check per packet, only a zip over handles and templates. Flows come
//! round-robin; frame sizes follow the profile's size sequence (IMIX is spread evenly, not in
//! runs). Only the header bytes are restored: **the payload bytes beyond `stride` are whatever
//! the buffer last held** (zeros in a fresh pool; what an earlier frame left otherwise), so L4
//! checksums over the payload may not verify. This is what a NIC benchmark source does (DPDK
//! testpmd's `txonly` rewrites headers only) and keeps the source at a few instructions per
//! packet; its cost is measured separately from the pipeline's (`tests/mem_cost.rs`).
//!
//! **Sink.** `MemSink::tx_burst` counts packets (bytes on request) and returns the whole burst
//! to the pool with one [`Pool::free_bulk`].
//!
//! Thread: worker only; nothing here allocates after construction.

// cost: source 25.2 instr/pkt in rx_burst (incl. Batch::push_burst, Pool::write_head) + ~1 in
// libc memcpy; sink 0.1 + its free_bulk memcpy; 64 B UDP/IPv4 profile, 1 or 64k flows —
// tests/mem_cost.rs under callgrind, (Ir(2N)−Ir(N))/N, N = 1M, commit 5fe5ba3+.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use fastpath_packet::build::FrameBuilder;
use fastpath_packet::hdr::{TcpFlags, VXLAN_PORT};
use fastpath_packet::pool::MAX_FRAME;
use fastpath_packet::{Batch, PktId, Pool, BATCH_MAX};

use crate::port::{Port, PortStats};

/// Bytes of one cache line: templates are 1 or 2 lines.
const LINE: usize = 64;
/// Most header bytes a template restores per packet.
pub const MAX_STRIDE: usize = 2 * LINE;

/// The header bytes of one template, cache-line aligned.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Head<const N: usize>([u8; N]);

/// All templates' header bytes, contiguous, 64 or 128 bytes each.
enum Heads {
    Line1(Vec<Head<LINE>>),
    Line2(Vec<Head<MAX_STRIDE>>),
}

/// Frame sizes of a profile, in bytes as they sit in the buffer (no 4-byte FCS, as
/// `FrameBuilder::frame_len` counts them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameSizes {
    /// Every frame this size.
    Fixed(usize),
    /// The "simple IMIX": 64, 570 and 1518 bytes in the ratio 7:4:1, interleaved.
    Imix,
    /// These sizes, in this order, repeated.
    List(Vec<usize>),
}

impl FrameSizes {
    /// The repeating sequence of sizes the source follows. IMIX is spread by smooth weighted
    /// round robin (no runs of one size): `64 570 64 1518 64 570 64 64 570 64 570 64`-like.
    pub fn sequence(&self) -> Vec<usize> {
        match self {
            FrameSizes::Fixed(n) => vec![*n],
            FrameSizes::List(v) => v.clone(),
            FrameSizes::Imix => smooth_wrr(&[(64, 7), (570, 4), (1518, 1)]),
        }
    }
}

/// Smooth weighted round robin (as in nginx's upstream balancer): each step every entry gains
/// its weight, the largest current value is chosen and loses the total. One period is
/// `sum(weights)` long and each entry appears exactly `weight` times, spread out.
fn smooth_wrr(entries: &[(usize, i64)]) -> Vec<usize> {
    let total: i64 = entries.iter().map(|e| e.1).sum();
    let mut cur = vec![0i64; entries.len()];
    let mut out = Vec::with_capacity(total.max(0) as usize);
    for _ in 0..total {
        let mut best = 0;
        for (j, e) in entries.iter().enumerate() {
            cur[j] += e.1;
            if cur[j] > cur[best] {
                best = j;
            }
        }
        cur[best] -= total;
        out.push(entries[best].0);
    }
    out
}

/// Builds the frame of one flow at one size: the pluggable part of a traffic profile.
///
/// A later pipeline (VXLAN overlay, Q-in-Q subscribers) supplies its own frames by implementing
/// this, or by passing a closure `Fn(flow, frame_len) -> Vec<u8>`.
pub trait TemplateGen {
    /// The whole frame of `flow` at `frame_len` bytes. A frame may come out longer than asked
    /// when its headers do not fit (it is then as long as its headers).
    fn frame(&self, flow: u32, frame_len: usize) -> Vec<u8>;
    /// How many leading bytes of each frame hold headers a pipeline may rewrite; the source
    /// restores this many (rounded up to 64 or 128) per packet.
    fn header_len(&self) -> usize {
        MAX_STRIDE
    }
}

impl<F: Fn(u32, usize) -> Vec<u8>> TemplateGen for F {
    fn frame(&self, flow: u32, frame_len: usize) -> Vec<u8> {
        self(flow, frame_len)
    }
}

/// The L4 protocol of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    /// UDP.
    Udp,
    /// TCP (flags from [`ProtoMix::tcp_flags`]).
    Tcp,
    /// ICMP / ICMPv6 echo request (id = source port, sequence = destination port).
    Icmp,
}

/// An encapsulation applied to every flow of a profile, for pipelines that expect one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Encap {
    /// Plain Ethernet.
    None,
    /// One 802.1Q tag (PCP 0).
    Vlan {
        /// VLAN id.
        vid: u16,
    },
    /// 802.1ad Q-in-Q per subscriber: flow `i` gets S-VID `s_vid + i / c_per_s` and C-VID
    /// `c_vid + i mod c_per_s` (IDs wrap within 1..=4094).
    QinQ {
        /// First S-VID.
        s_vid: u16,
        /// First C-VID.
        c_vid: u16,
        /// Subscribers (C-VIDs) per S-VID, at least 1.
        c_per_s: u16,
    },
    /// VXLAN (RFC 7348) between two tunnel endpoints over IPv4: flow `i` has VNI
    /// `vni + i mod vnis` and an outer UDP source port (49152..=65535) from its flow hash; the
    /// inner frame is the flow's plain frame, and the frame size counts the outer headers.
    Vxlan {
        /// First VNI.
        vni: u32,
        /// Number of distinct VNIs, at least 1.
        vnis: u32,
        /// Outer source MAC.
        outer_src_mac: [u8; 6],
        /// Outer destination MAC.
        outer_dst_mac: [u8; 6],
        /// Outer (tunnel endpoint) source address.
        outer_src: Ipv4Addr,
        /// Outer (tunnel endpoint) destination address.
        outer_dst: Ipv4Addr,
    },
}

/// Which protocols a profile's flows use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtoMix {
    /// Relative weight of UDP flows.
    pub udp: u32,
    /// Relative weight of TCP flows.
    pub tcp: u32,
    /// Relative weight of ICMP echo flows.
    pub icmp: u32,
    /// Percent (0..=100) of flows over IPv6; the rest use IPv4.
    pub ipv6_percent: u8,
    /// TCP flags of TCP frames (default ACK).
    pub tcp_flags: TcpFlags,
    /// Encapsulation of every frame.
    pub encap: Encap,
}

impl Default for ProtoMix {
    /// All UDP over IPv4, no encapsulation.
    fn default() -> Self {
        ProtoMix { udp: 1, tcp: 0, icmp: 0, ipv6_percent: 0, tcp_flags: TcpFlags::ACK, encap: Encap::None }
    }
}

/// Base addresses of a profile. Defaults are the benchmarking ranges: IPv4 198.18.0.0/15
/// (RFC 2544 App. C, sources in 198.18/16, destinations in 198.19/16) and IPv6 2001:2::/48
/// (RFC 5180), and locally administered MACs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addresses {
    /// Source MAC of every frame.
    pub src_mac: [u8; 6],
    /// Destination MAC of every frame (the device under test).
    pub dst_mac: [u8; 6],
    /// First IPv4 source; flows use the 64k addresses from here.
    pub src_v4: Ipv4Addr,
    /// First IPv4 destination; flows use the 64k addresses from here.
    pub dst_v4: Ipv4Addr,
    /// First IPv6 source; flows vary its low 16 bits.
    pub src_v6: Ipv6Addr,
    /// First IPv6 destination; flows vary its low 16 bits.
    pub dst_v6: Ipv6Addr,
}

impl Default for Addresses {
    fn default() -> Self {
        Addresses {
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            src_v4: Ipv4Addr::new(198, 18, 0, 0),
            dst_v4: Ipv4Addr::new(198, 19, 0, 0),
            src_v6: Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 0),
            dst_v6: Ipv6Addr::new(0x2001, 2, 0, 2, 0, 0, 0, 0),
        }
    }
}

/// A synthetic traffic profile: sizes, flows, protocols, addresses and a seed.
///
/// Flow `i` (of `flows`): with `lo = i mod 65536` and `hi = i / 65536`, its source and
/// destination addresses are the bases plus two different seeded permutations of `lo`
/// (`lo·a + b mod 2^16`, `a` odd), its source port is `1024 + (hi·7919 + c) mod 64512` and its
/// destination port a seeded hash; so every flow below 65536 × 64512 has its own 5-tuple, and
/// the first 65536 flows each have their own source and destination address. Protocol and IP
/// version are drawn from the seeded hash of `i` by the mix's weights. Everything is a pure
/// function of `(seed, i)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrafficProfile {
    /// Frame sizes (FCS excluded).
    pub frame_sizes: FrameSizes,
    /// Number of flows (at least 1).
    pub flows: u32,
    /// Protocols and encapsulation.
    pub proto: ProtoMix,
    /// Base addresses.
    pub addrs: Addresses,
    /// Seed of every per-flow choice.
    pub seed: u64,
}

impl Default for TrafficProfile {
    /// 64-byte UDP/IPv4 frames of one flow.
    fn default() -> Self {
        TrafficProfile { frame_sizes: FrameSizes::Fixed(64), flows: 1, proto: ProtoMix::default(), addrs: Addresses::default(), seed: 0 }
    }
}

/// One flow of a profile, as [`TrafficProfile::flow`] describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// L4 protocol.
    pub l4: L4,
    /// Source address (inner, for VXLAN).
    pub src: IpAddr,
    /// Destination address (inner, for VXLAN).
    pub dst: IpAddr,
    /// Source port (ICMP: echo id).
    pub src_port: u16,
    /// Destination port (ICMP: echo sequence).
    pub dst_port: u16,
    /// Outer and inner VLAN ids (Q-in-Q: S-VID, C-VID; 802.1Q: the VID and `None`).
    pub vlan: Option<(u16, Option<u16>)>,
    /// VXLAN VNI and outer UDP source port.
    pub vxlan: Option<(u32, u16)>,
}

/// splitmix64 (Steele, Lea, Flood 2014): a cheap, well-mixed hash of a counter.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A VLAN id `base + k` kept within 1..=4094.
fn vid(base: u16, k: u32) -> u16 {
    ((u32::from(base).saturating_sub(1) + k) % 4094 + 1) as u16
}

impl TrafficProfile {
    /// The addresses, ports, protocol and tags of flow `i`.
    pub fn flow(&self, i: u32) -> FlowSpec {
        let s = self.seed;
        let (lo, hi) = (i & 0xffff, i >> 16);
        let perm = |salt: u64| {
            let a = (splitmix(s ^ salt) as u32 | 1) & 0xffff;
            let b = splitmix(s ^ salt ^ 0x55) as u32 & 0xffff;
            lo.wrapping_mul(a).wrapping_add(b) & 0xffff
        };
        let (so, dof) = (perm(0x5a1), perm(0xd57));
        let h = splitmix(s ^ 0xf10 ^ u64::from(i).wrapping_mul(0x100_0000_01b3));
        let c = (splitmix(s ^ 0x907) % 64512) as u32;
        let src_port = (1024 + (hi.wrapping_mul(7919).wrapping_add(c)) % 64512) as u16;
        let dst_port = (1024 + (h >> 16) % 64512) as u16;
        let m = &self.proto;
        let total = u64::from(m.udp) + u64::from(m.tcp) + u64::from(m.icmp);
        let r = if total == 0 { 0 } else { h % total };
        let l4 = if r < u64::from(m.udp) || total == 0 {
            L4::Udp
        } else if r < u64::from(m.udp) + u64::from(m.tcp) {
            L4::Tcp
        } else {
            L4::Icmp
        };
        let v6 = (h >> 40) % 100 < u64::from(m.ipv6_percent);
        let (src, dst) = if v6 {
            (
                IpAddr::V6(Ipv6Addr::from(u128::from(self.addrs.src_v6).wrapping_add(u128::from(so)))),
                IpAddr::V6(Ipv6Addr::from(u128::from(self.addrs.dst_v6).wrapping_add(u128::from(dof)))),
            )
        } else {
            (
                IpAddr::V4(Ipv4Addr::from(u32::from(self.addrs.src_v4).wrapping_add(so))),
                IpAddr::V4(Ipv4Addr::from(u32::from(self.addrs.dst_v4).wrapping_add(dof))),
            )
        };
        let (vlan, vxlan) = match m.encap {
            Encap::None => (None, None),
            Encap::Vlan { vid: v } => (Some((vid(v, 0), None)), None),
            Encap::QinQ { s_vid, c_vid, c_per_s } => {
                let per = u32::from(c_per_s.max(1));
                (Some((vid(s_vid, i / per), Some(vid(c_vid, i % per)))), None)
            }
            Encap::Vxlan { vni, vnis, .. } => {
                let v = vni.wrapping_add(i % vnis.max(1)) & 0xff_ffff;
                (None, Some((v, 49152 + (h >> 48) as u16 % 16384)))
            }
        };
        FlowSpec { l4, src, dst, src_port, dst_port, vlan, vxlan }
    }

    /// Builds the profile's templates.
    ///
    /// # Errors
    /// As [`Templates::build`].
    pub fn templates(&self) -> Result<Templates, MemError> {
        Templates::build(self, self.flows, &self.frame_sizes)
    }
}

impl TemplateGen for TrafficProfile {
    fn frame(&self, flow: u32, frame_len: usize) -> Vec<u8> {
        let f = self.flow(flow);
        let a = &self.addrs;
        let mut b = match (&self.proto.encap, f.vxlan) {
            (Encap::Vxlan { outer_src_mac, outer_dst_mac, outer_src, outer_dst, .. }, Some((vni, sport))) => {
                FrameBuilder::eth(*outer_dst_mac, *outer_src_mac)
                    .ipv4(*outer_src, *outer_dst)
                    .udp(sport, VXLAN_PORT)
                    .vxlan(vni)
                    .inner_eth(a.dst_mac, a.src_mac)
            }
            _ => FrameBuilder::eth(a.dst_mac, a.src_mac),
        };
        b = match f.vlan {
            Some((v, None)) => b.vlan(v, 0),
            Some((s, Some(c))) => b.qinq(s, c),
            None => b,
        };
        b = match (f.src, f.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => b.ipv4(s, d),
            (IpAddr::V6(s), IpAddr::V6(d)) => b.ipv6(s, d),
            _ => b, // never: a flow's two addresses share a family
        };
        b = match f.l4 {
            L4::Udp => b.udp(f.src_port, f.dst_port),
            L4::Tcp => b.tcp(f.src_port, f.dst_port, self.proto.tcp_flags, 1, 1),
            L4::Icmp => b.icmp_echo(f.src_port, f.dst_port),
        };
        b.frame_len(frame_len).build()
    }

    fn header_len(&self) -> usize {
        let m = &self.proto;
        let l3 = if m.ipv6_percent > 0 { 40 } else { 20 };
        let l4 = if m.tcp > 0 { 20 } else { 8 };
        let outer = match m.encap {
            Encap::None => 0,
            Encap::Vlan { .. } => 4,
            Encap::QinQ { .. } => 8,
            Encap::Vxlan { .. } => 14 + 20 + 8 + 8,
        };
        14 + outer + l3 + l4
    }
}

/// Why templates could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemError {
    /// A profile needs at least one flow.
    #[error("a traffic profile needs at least one flow")]
    NoFlows,
    /// A profile needs at least one frame size.
    #[error("a traffic profile needs at least one frame size")]
    NoSizes,
    /// A frame size outside what a buffer holds.
    #[error("frame size {0} is outside 14..={max}", max = MAX_FRAME)]
    BadSize(usize),
    /// Headers longer than a template line pair.
    #[error("header length {0} exceeds the {max} bytes a template restores", max = MAX_STRIDE)]
    HeadersTooLong(usize),
    /// The templates would not fit in memory sensibly.
    #[error("{flows} flows × {sizes} sizes × {stride} B of templates exceed 4 GiB")]
    TooBig {
        /// Flows asked for.
        flows: u32,
        /// Distinct frame sizes.
        sizes: usize,
        /// Bytes per template.
        stride: usize,
    },
}

/// The frames of one traffic period, in the order the source gives them: header bytes
/// (contiguous, cache-line aligned) and lengths.
pub struct Templates {
    heads: Heads,
    /// Frame length of each entry (same index as `heads`).
    lens: Vec<u16>,
    /// Entries in one period before repetition: `lcm(flows, sizes)`.
    period: usize,
    flows: u32,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Templates {
    /// Builds the frames of one period of `flows` flows at the sizes of `sizes`: entry `j` is
    /// `gen.frame(j mod flows, sequence[j mod S])`. Control path; allocates.
    ///
    /// # Errors
    /// No flows or sizes, a size outside 14..=MAX_FRAME, headers over 128 bytes, or more than
    /// 4 GiB of templates.
    pub fn build(gen: &dyn TemplateGen, flows: u32, sizes: &FrameSizes) -> Result<Templates, MemError> {
        if flows == 0 {
            return Err(MemError::NoFlows);
        }
        let seq = sizes.sequence();
        if seq.is_empty() {
            return Err(MemError::NoSizes);
        }
        if let Some(&bad) = seq.iter().find(|s| !(14..=MAX_FRAME).contains(*s)) {
            return Err(MemError::BadSize(bad));
        }
        let hdr = gen.header_len();
        if hdr > MAX_STRIDE {
            return Err(MemError::HeadersTooLong(hdr));
        }
        // Frames that all fit one line are restored whole by one line, whatever the header
        // length says (a closure's default is 128: l2fwd's and the router's 64-byte frames
        // copied 64 bytes past their end on every pass, 4 instructions per packet). A frame
        // that comes out longer than asked (its headers did not fit) builds again with the
        // stride its headers need.
        if hdr > LINE && seq.iter().all(|&len| len <= LINE) {
            if let Some(t) = Self::build_stride(gen, flows, &seq, LINE)? {
                return Ok(t);
            }
        }
        let stride = if hdr <= LINE { LINE } else { MAX_STRIDE };
        // (At this stride `hdr` fits, so the build never gives up.)
        Self::build_stride(gen, flows, &seq, stride)?.ok_or(MemError::HeadersTooLong(hdr))
    }

    /// [`Templates::build`] with `stride` bytes per template; `None` when a frame comes out
    /// longer than `stride` and its headers may be too (`header_len() > stride`).
    fn build_stride(gen: &dyn TemplateGen, flows: u32, seq: &[usize], stride: usize) -> Result<Option<Templates>, MemError> {
        let (f, s) = (u64::from(flows), seq.len() as u64);
        let period = f / gcd(f, s) * s;
        let reps = (BATCH_MAX as u64).div_ceil(period);
        let total = period * reps;
        if total.saturating_mul(stride as u64 + 2) > 4 << 30 {
            return Err(MemError::TooBig { flows, sizes: seq.len(), stride });
        }
        let (period, total) = (period as usize, total as usize);
        let mut heads =
            if stride == LINE { Heads::Line1(vec![Head([0; LINE]); total]) } else { Heads::Line2(vec![Head([0; MAX_STRIDE]); total]) };
        let mut lens = vec![0u16; total];
        for j in 0..total {
            let dst: &mut [u8] = match &mut heads {
                Heads::Line1(v) => &mut v[j].0,
                Heads::Line2(v) => &mut v[j].0,
            };
            if j >= period {
                // A repetition of the period: copy the entry built already.
                lens[j] = lens[j - period];
                match &mut heads {
                    Heads::Line1(v) => v[j] = v[j - period],
                    Heads::Line2(v) => v[j] = v[j - period],
                }
                continue;
            }
            let frame = gen.frame((j as u64 % f) as u32, seq[j % seq.len()]);
            let len = frame.len().min(MAX_FRAME);
            if len > stride && gen.header_len() > stride {
                return Ok(None);
            }
            lens[j] = len as u16;
            let k = len.min(dst.len());
            dst[..k].copy_from_slice(&frame[..k]);
        }
        Ok(Some(Templates { heads, lens, period, flows }))
    }

    /// Number of flows.
    pub fn flows(&self) -> u32 {
        self.flows
    }
    /// Frames in one period of the pattern (`lcm(flows, sizes)`).
    pub fn period(&self) -> usize {
        self.period
    }
    /// Header bytes restored per packet (64 or 128).
    pub fn stride(&self) -> usize {
        match self.heads {
            Heads::Line1(_) => LINE,
            Heads::Line2(_) => MAX_STRIDE,
        }
    }
    /// Bytes of template memory.
    pub fn memory_bytes(&self) -> usize {
        self.lens.len() * (self.stride() + 2)
    }
    /// Length of the `j`-th frame the source gives (from 0, counting from its start).
    pub fn frame_len(&self, j: u64) -> usize {
        usize::from(self.lens[(j % self.period as u64) as usize])
    }
}

/// A synthetic source: template frames into pool buffers, round-robin over flows, optionally
/// stopping after a number of packets. See the module doc for what is restored per packet.
pub struct MemSource {
    name: String,
    t: Templates,
    /// Next template entry.
    cursor: usize,
    /// Packets still to give (`u64::MAX`: unlimited).
    remaining: u64,
    burst: usize,
    hs: Box<[PktId; BATCH_MAX]>,
    stats: PortStats,
}

impl MemSource {
    /// A source of `profile`'s traffic, unlimited.
    ///
    /// # Errors
    /// The profile's templates cannot be built ([`Templates::build`]).
    pub fn new(name: &str, profile: &TrafficProfile) -> Result<MemSource, MemError> {
        Ok(MemSource::from_templates(name, profile.templates()?))
    }

    /// A source over built templates, unlimited, giving up to a full batch per call.
    pub fn from_templates(name: &str, t: Templates) -> MemSource {
        MemSource {
            name: name.to_string(),
            t,
            cursor: 0,
            remaining: u64::MAX,
            burst: BATCH_MAX,
            hs: Box::new([PktId(0); BATCH_MAX]),
            stats: PortStats::default(),
        }
    }

    /// Stops after `pkts` packets (then `is_exhausted`).
    pub fn with_limit(mut self, pkts: u64) -> MemSource {
        self.remaining = pkts;
        self
    }

    /// Gives at most `n` packets per `rx_burst` (1..=BATCH_MAX), like a NIC ring's burst size.
    pub fn with_burst(mut self, n: usize) -> MemSource {
        self.burst = n.clamp(1, BATCH_MAX);
        self
    }

    /// The templates.
    pub fn templates(&self) -> &Templates {
        &self.t
    }

    /// Packets still to give (`u64::MAX` when unlimited).
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Restores the buffers `hs` from the templates at `cursor` onwards (wrapping), returning
    /// the bytes given. `heads` and `lens` have the same, non-zero length.
    #[inline]
    fn fill<const N: usize>(hs: &[PktId], heads: &[Head<N>], lens: &[u16], cursor: &mut usize, pool: &mut Pool) -> u64 {
        let mut bytes = 0u64;
        let mut rest = hs;
        while !rest.is_empty() && !heads.is_empty() {
            let j = (*cursor).min(heads.len() - 1);
            let k = rest.len().min(heads.len() - j);
            let (now, later) = rest.split_at(k);
            for ((&h, head), &len) in now.iter().zip(&heads[j..j + k]).zip(&lens[j..j + k]) {
                pool.write_head(h, &head.0, usize::from(len));
                bytes += u64::from(len);
            }
            *cursor = if j + k == heads.len() { 0 } else { j + k };
            rest = later;
        }
        bytes
    }
}

impl Port for MemSource {
    fn name(&self) -> &str {
        &self.name
    }

    #[inline]
    fn rx_burst(&mut self, pool: &mut Pool, batch: &mut Batch, port_id: u16) -> usize {
        let room = BATCH_MAX - batch.len();
        let want = room.min(self.burst).min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let n = pool.alloc_burst(&mut self.hs[..want]);
        batch.push_burst(&self.hs[..n], port_id);
        let hs = &self.hs[..n];
        let t = &self.t;
        let bytes = match &t.heads {
            Heads::Line1(v) => Self::fill(hs, v, &t.lens, &mut self.cursor, pool),
            Heads::Line2(v) => Self::fill(hs, v, &t.lens, &mut self.cursor, pool),
        };
        if self.remaining != u64::MAX {
            self.remaining -= n as u64;
        }
        self.stats.rx_pkts += n as u64;
        self.stats.rx_bytes += bytes;
        n
    }

    fn tx_burst(&mut self, _pool: &mut Pool, _pkts: &[PktId]) -> usize {
        0
    }

    fn is_exhausted(&self) -> bool {
        self.remaining == 0
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// A sink that counts what it is given and frees it: the end of an in-memory benchmark.
pub struct MemSink {
    name: String,
    count_bytes: bool,
    stats: PortStats,
}

impl MemSink {
    /// A sink counting packets (not bytes: see [`MemSink::counting_bytes`]).
    pub fn new(name: &str) -> MemSink {
        MemSink { name: name.to_string(), count_bytes: false, stats: PortStats::default() }
    }

    /// Also counts bytes (`tx_bytes`), at the cost of reading each packet's length (about 4
    /// instructions per packet).
    pub fn counting_bytes(mut self) -> MemSink {
        self.count_bytes = true;
        self
    }
}

impl Port for MemSink {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, _pool: &mut Pool, _batch: &mut Batch, _port_id: u16) -> usize {
        0
    }

    #[inline]
    fn tx_burst(&mut self, pool: &mut Pool, pkts: &[PktId]) -> usize {
        if self.count_bytes {
            self.stats.tx_bytes += pkts.iter().map(|&h| pool.len(h) as u64).sum::<u64>();
        }
        self.stats.tx_pkts += pkts.len() as u64;
        pool.free_bulk(pkts);
        pkts.len()
    }

    fn is_exhausted(&self) -> bool {
        true
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imix_sequence_is_7_4_1_and_spread() {
        let s = FrameSizes::Imix.sequence();
        assert_eq!(s.len(), 12);
        assert_eq!(s.iter().filter(|&&x| x == 64).count(), 7);
        assert_eq!(s.iter().filter(|&&x| x == 570).count(), 4);
        assert_eq!(s.iter().filter(|&&x| x == 1518).count(), 1);
        // Spread: never two 570s or two 1518s in a row (cyclically).
        for i in 0..12 {
            let (a, b) = (s[i], s[(i + 1) % 12]);
            assert!(a == 64 || a != b, "{s:?}");
        }
    }

    #[test]
    fn template_errors() {
        let g = |_: u32, n: usize| vec![0u8; n];
        assert_eq!(Templates::build(&g, 0, &FrameSizes::Fixed(64)).err(), Some(MemError::NoFlows));
        assert_eq!(Templates::build(&g, 1, &FrameSizes::List(vec![])).err(), Some(MemError::NoSizes));
        assert_eq!(Templates::build(&g, 1, &FrameSizes::Fixed(5000)).err(), Some(MemError::BadSize(5000)));
        assert!(matches!(Templates::build(&g, u32::MAX, &FrameSizes::Imix).err(), Some(MemError::TooBig { .. })));
    }
}
