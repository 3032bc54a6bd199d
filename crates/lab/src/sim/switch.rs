//! The simulated switch: `ports` ports of one rate, one egress traffic manager
//! ([`fastpath_tm::Tm`], the data plane's own) whose buffer is either shared with dynamic
//! thresholds or split statically between the ports.
//!
//! ```text
//!  shared  (SONiC lossy):  every queue: min_bytes = 0, α = 2^alpha_log2 on the whole buffer B
//!                          one congested queue may hold α/(1+α)·B (8/9 of B at α = 8)
//!  static  (even split):   class 0 of every port: min_bytes = B/P, shared part = 0
//!                          a queue holds exactly B/P; beyond, `tm_buffer_full`
//! ```
//!
//! The static split is the TM's reservation mechanism with nothing left to share: each port's
//! queue owns B/P bytes that no other port can use, which is what a switch with per-port
//! packet memory (or `tc` with a byte limit per port) does. A per-queue ring limit would cap
//! packets rather than bytes, so it would hold 3× more bytes of 1518-byte frames than of
//! 512-byte ones; the reservation caps bytes, as memory does.
//!
//! Only class 0 carries traffic. Its ring on the receiver's port (port 0) is sized so the ring
//! never binds before the buffer does (⌈B / smallest frame⌉ rounded up to a power of two, at
//! most 2²⁰ packets); the other ports' rings keep the TM's default size, since the simulation
//! sends them nothing (the ACKs' reverse path is a fixed delay, see [`super::incast`]).

use fastpath_tm::config::{BufferConfig, FlatPortConfig, PortConfig, TmConfig, MAX_RING_PKTS};
use fastpath_tm::wred::WredConfig;

/// How the packet memory is given to the ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferModel {
    /// One pool with Choudhury–Hahne dynamic thresholds.
    Shared,
    /// Total ÷ ports per port, nothing shared.
    Static,
}

impl BufferModel {
    /// Both models, shared first.
    pub const ALL: [BufferModel; 2] = [BufferModel::Shared, BufferModel::Static];

    /// `shared` or `static`.
    pub fn name(self) -> &'static str {
        match self {
            BufferModel::Shared => "shared",
            BufferModel::Static => "static",
        }
    }
}

/// The switch and its links.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwitchConfig {
    /// Ports (each sender uses one, the receiver port 0).
    pub ports: u32,
    /// Rate of every link, bits per second on the wire (preamble and gap included).
    pub rate_bps: u64,
    /// Packet memory of the whole switch, bytes.
    pub buffer_bytes: u64,
    /// Dynamic threshold α = 2^`alpha_log2` of the shared model (−4..=3; SONiC lossy: 3).
    pub alpha_log2: i8,
    /// Propagation delay of each link, ps.
    pub prop_ps: u64,
    /// WRED / ECN marking on the queues (`None`: tail drop at the threshold only).
    pub wred: Option<WredConfig>,
    /// Smallest frame the run will queue, bytes (sizes the receiver port's ring).
    pub min_frame_bytes: u32,
    /// Buffer cell, bytes: a frame occupies its length rounded up to whole cells, as in a
    /// switch ASIC's packet memory (0: the TM's exact byte count).
    pub cell_bytes: u32,
    /// Seed of the TM's WRED draws.
    pub seed: u64,
}

impl Default for SwitchConfig {
    /// 32 × 100 Gbit/s, 32 MiB, α = 8, 2.5 µs per link (500 m of fibre), no WRED.
    fn default() -> SwitchConfig {
        SwitchConfig {
            ports: 32,
            rate_bps: 100_000_000_000,
            buffer_bytes: 32 << 20,
            alpha_log2: 3,
            prop_ps: 2_500_000,
            wred: None,
            min_frame_bytes: 64,
            cell_bytes: 0,
            seed: 1,
        }
    }
}

impl SwitchConfig {
    /// The traffic manager for `model`.
    pub fn tm_config(&self, model: BufferModel) -> TmConfig {
        let ports = self.ports.max(1);
        let per_port = self.buffer_bytes / u64::from(ports);
        let total = match model {
            BufferModel::Shared => self.buffer_bytes,
            BufferModel::Static => per_port * u64::from(ports),
        };
        let ring_want = (total / u64::from(self.min_frame_bytes.max(1)) + 1).min(u64::from(MAX_RING_PKTS));
        let ring = (ring_want as u32).next_power_of_two().min(MAX_RING_PKTS);
        let port_cfg = |p: u32| {
            let mut f = FlatPortConfig::default();
            let c0 = &mut f.classes[0];
            c0.alpha_log2 = self.alpha_log2;
            c0.wred = self.wred;
            if p == 0 {
                c0.ring_pkts = ring;
            }
            if model == BufferModel::Static {
                c0.min_bytes = per_port;
            }
            PortConfig::Flat(f)
        };
        TmConfig {
            buffer: BufferConfig { total_bytes: total, total_pkts: u32::try_from((total / 64).max(1024)).unwrap_or(u32::MAX) },
            seed: self.seed,
            ports: (0..ports).map(port_cfg).collect(),
        }
    }

    /// The bytes a frame of `frame_bytes` occupies in the buffer: whole cells, or its length.
    #[inline]
    pub fn buffer_bytes_of(&self, frame_bytes: u32) -> u32 {
        if self.cell_bytes == 0 {
            frame_bytes
        } else {
            frame_bytes.div_ceil(self.cell_bytes) * self.cell_bytes
        }
    }

    /// The most one congested queue can hold under `model`, bytes: α/(1+α) of the buffer
    /// (shared), or the buffer ÷ ports (static).
    pub fn queue_cap_bytes(&self, model: BufferModel) -> u64 {
        match model {
            BufferModel::Shared => {
                let b = self.buffer_bytes as f64;
                let a = 2f64.powi(i32::from(self.alpha_log2));
                (b * a / (1.0 + a)) as u64
            }
            BufferModel::Static => self.buffer_bytes / u64::from(self.ports.max(1)),
        }
    }
}

/// Ethernet + IPv4 + TCP headers and FCS around a TCP payload: 14 + 20 + 20 + 4 bytes.
pub const TCP_FRAME_OVERHEAD: u32 = 58;
/// Preamble, start delimiter and inter-frame gap: 8 + 12 bytes of wire time per frame.
pub const WIRE_OVERHEAD: u32 = 20;
/// The smallest Ethernet frame (a bare ACK is padded to it).
pub const MIN_FRAME: u32 = 64;
