//! Packet trace: for the first N packets after `trace_next(N)`, what each stage saw and did,
//! printed VPP-style (a block per packet, a line per stage).
//!
//! Stages push small `Copy` records for traced lanes only; the executor formats them after the
//! batch, so a pipeline with tracing off pays one branch per batch.

use crate::ir::Program;
use fastpath_packet::{Batch, Hdr, Lanes, Pool, Verdict};
use std::fmt::Write;

/// What a stage did to a traced packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceRec {
    /// The parser found these headers (bitmask) in a frame of `len` bytes.
    Parsed { valid: u32, len: u16 },
    /// Table `table` looked up `key` (up to four fields) and hit entry `entry` with action
    /// `action` of the table's list, or missed and ran the default.
    Lookup { table: u16, key: [u128; 4], hit: bool, action: u16 },
    /// After stage `stage` the verdict was this.
    Stage { stage: u16, verdict: Verdict },
    /// The traffic manager's decision on port `port`, class `class`: queued, marked CE, or
    /// refused; `queue_bytes` is the queue's occupancy after it.
    Tm { port: u16, class: u8, enq: fastpath_tm::Enq, queue_bytes: u64 },
}

/// Trace state: how many packets are still to be traced and the formatted text so far.
#[derive(Default)]
pub struct Trace {
    remaining: usize,
    seq: u64,
    out: String,
    first_bytes: Vec<(usize, Vec<u8>)>,
}

impl Trace {
    /// Trace the next `n` packets.
    pub fn arm(&mut self, n: usize) {
        self.remaining = n;
    }

    /// Lanes to trace in a batch of `len` packets (the first `remaining`).
    #[inline]
    pub fn lanes_for(&mut self, len: usize) -> Lanes {
        if self.remaining == 0 {
            return Lanes::NONE;
        }
        let n = self.remaining.min(len);
        self.remaining -= n;
        Lanes::first(n)
    }

    /// Remembers the frames as they arrived.
    pub fn begin_batch(&mut self, pool: &Pool, b: &Batch, lanes: Lanes) {
        self.first_bytes.clear();
        for i in lanes {
            let d = pool.data(b.handle(i));
            self.first_bytes.push((i, d[..d.len().min(64)].to_vec()));
        }
    }

    /// Formats this batch's records.
    pub fn end_batch(&mut self, b: &Batch, lanes: Lanes, recs: &[(usize, TraceRec)], names: &[String], prog: &Program) {
        for i in lanes {
            self.seq += 1;
            let m = b.meta(i);
            let _ = writeln!(self.out, "Packet {}  (port {}, batch slot {i})", self.seq, m.in_port);
            if let Some((_, bytes)) = self.first_bytes.iter().find(|(k, _)| *k == i) {
                let hex: String = bytes.iter().map(|x| format!("{x:02x}")).collect();
                let _ = writeln!(self.out, "  rx: {hex}{}", if bytes.len() == 64 { "…" } else { "" });
            }
            for (_, r) in recs.iter().filter(|(k, _)| *k == i) {
                match r {
                    TraceRec::Parsed { valid, len } => {
                        let hs: Vec<&str> = Hdr::ALL.iter().filter(|h| valid & h.bit() != 0).map(|h| h.name()).collect();
                        let _ = writeln!(self.out, "  parser: {} bytes, headers [{}]", len, hs.join(", "));
                    }
                    TraceRec::Lookup { table, key, hit, action } => {
                        let t = prog.tables.get(usize::from(*table));
                        let keys = t.map_or(String::new(), |t| {
                            t.key
                                .iter()
                                .zip(key.iter())
                                .map(|(k, v)| format!("{}={}", k.name, k.field.kind.format(*v)))
                                .collect::<Vec<_>>()
                                .join(" ")
                        });
                        let act = t
                            .and_then(|t| t.actions.get(usize::from(*action)))
                            .and_then(|a| prog.actions.get(*a))
                            .map_or("?", |a| a.name.as_str());
                        let name = t.map_or("?", |t| t.name.as_str());
                        let _ = writeln!(self.out, "  {name}: key {keys} -> {} action {act}", if *hit { "hit" } else { "miss (default)" });
                    }
                    TraceRec::Tm { port, class, enq, queue_bytes } => {
                        let what = match enq {
                            fastpath_tm::Enq::Queued => "queued".to_string(),
                            fastpath_tm::Enq::Marked => "queued, marked CE (WRED)".to_string(),
                            fastpath_tm::Enq::Dropped(r) => format!("refused ({})", r.name()),
                        };
                        let _ = writeln!(self.out, "  tm: port {port} class {class}: {what}, queue {queue_bytes} bytes");
                    }
                    TraceRec::Stage { stage, verdict } => {
                        let n = names.get(usize::from(*stage)).map_or("?", |s| s.as_str());
                        if *verdict != Verdict::Continue {
                            let _ = writeln!(self.out, "  {n}: {}", verdict_text(*verdict));
                        }
                    }
                }
            }
            let _ = writeln!(self.out, "  verdict: {}\n", verdict_text(b.verdict(i)));
        }
    }

    /// The text so far; clears it.
    pub fn take(&mut self) -> String {
        std::mem::take(&mut self.out)
    }
}

/// The verdict a stage left, for traces.
pub fn verdict_text(v: Verdict) -> String {
    match v {
        Verdict::Continue => "continue".into(),
        Verdict::Drop(r) => format!("drop ({})", r.name()),
        Verdict::Tx(p) => format!("tx port {p}"),
        Verdict::Punt(r) => format!("punt ({})", r.0),
        Verdict::Queued(p) => format!("queued for port {p}"),
    }
}
