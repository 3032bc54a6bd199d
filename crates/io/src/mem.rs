//! In-memory ports: [`MemSource`], a synthetic traffic source that behaves like a NIC receive
//! ring, and [`MemSink`], which counts and frees what it is given.
//!
//! **Templates.** A traffic profile (or any [`TemplateGen`]) is turned once into
//! [`Templates`]: the frames the source gives, in the order it gives them, for one period of
//! the traffic pattern — packet `j` is flow `j mod F` at size `sizes[j mod S]`, so the period
//! is `lcm(F, S)` — stored as each frame's first `stride` bytes (64 or 128, enough for all its
//! headers) in one contiguous, cache-line-aligned array plus a `u16` length per frame. Short
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
        let stride = if hdr <= LINE { LINE } else { MAX_STRIDE };
        let (f, s) = (u64::from(flows), seq.len() as u64);
        let period = f / gcd(f, s) * s;
        let reps = (BATCH_MAX as u64).div_ceil(period);
        let total = period * reps;
        if total.saturating_mul(stride as u64 + 2) > 4 << 30 {
            return Err(MemError::TooBig { flows, sizes: seq.len(), stride });
        }
        let (period, total) = (period as usize, total as usize);
        let mut heads = if stride == LINE {
            Heads::Line1(vec![Head([0; LINE]); total])
        } else {
            Heads::Line2(vec![Head([0; MAX_STRIDE]); total])
        };
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
            lens[j] = len as u16;
            let k = len.min(dst.len());
            dst[..k].copy_from_slice(&frame[..k]);
        }
        Ok(Templates { heads, lens, period, flows })
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
    fn fill<const N: usize>(
        hs: &[PktId],
        heads: &[Head<N>],
        lens: &[u16],
        cursor: &mut usize,
        pool: &mut Pool,
    ) -> u64 {
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
        assert!(matches!(
            Templates::build(&g, u32::MAX, &FrameSizes::Imix).err(),
            Some(MemError::TooBig { .. })
        ));
    }
}
