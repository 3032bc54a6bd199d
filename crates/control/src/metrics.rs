//! Counters read from the workers: each worker copies its own plain `u64` counters into a
//! [`WorkerSnapshot`] at a batch boundary when asked; the control thread sums them
//! ([`Counters::sum`]) and renders text or JSON. Nothing on the packet path is shared or atomic.

use fastpath_packet::DropReason;
use fastpath_pipeline::{Pipeline, StageStats};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One port's counters (as the worker's port reports them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PortCounters {
    /// Port name.
    pub name: String,
    /// Packets received.
    pub rx_pkts: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets the port or kernel dropped before we saw them.
    pub rx_dropped: u64,
    /// Packets transmitted.
    pub tx_pkts: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Packets that could not be transmitted.
    pub tx_dropped: u64,
    /// Failed system calls.
    pub errors: u64,
}

/// One worker's loop counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LoopCounters {
    /// Worker index.
    pub worker: usize,
    /// Packets received from all ports.
    pub rx_pkts: u64,
    /// Packets the ports accepted for transmission.
    pub tx_pkts: u64,
    /// Packets with a `Drop` verdict.
    pub dropped: u64,
    /// `Tx` packets a port refused.
    pub tx_dropped: u64,
    /// Batches processed.
    pub batches: u64,
}

/// A copy of one worker's counters, taken by the worker at a batch boundary.
#[derive(Clone, Debug, Default)]
pub struct WorkerSnapshot {
    /// Worker index.
    pub worker: usize,
    /// Per-stage counters in plan order, plus `end`.
    pub stages: Vec<(String, StageStats)>,
    /// Per table of the program: (hits, misses).
    pub tables: Vec<(u64, u64)>,
    /// Per conntrack table: (name, live flows, capacity).
    pub conntrack: Vec<(String, usize, usize)>,
    /// The worker's ports, by id.
    pub ports: Vec<PortCounters>,
    /// The worker's loop counters.
    pub totals: LoopCounters,
    /// The traffic manager's queues that saw traffic, by (port, class).
    pub queues: Vec<QueueRow>,
    /// Control messages the worker answered before this one, and what they cost it.
    pub control: ControlLoad,
}

/// What answering control messages (changes, counter snapshots, counter reads) has cost a
/// worker: the messages, and the TSC cycles between its batches it spent on them (read twice
/// per batch boundary at which a message waited, never otherwise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ControlLoad {
    /// Messages answered.
    pub messages: u64,
    /// TSC cycles spent answering them.
    pub cycles: u64,
}

/// One traffic-manager queue (a port's class): what entered, left, was refused and is queued.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueRow {
    /// Port id.
    pub port: u16,
    /// Traffic class (7 the highest priority).
    pub class: u8,
    /// Packets accepted.
    pub enq_pkts: u64,
    /// Bytes accepted.
    pub enq_bytes: u64,
    /// Packets sent on.
    pub deq_pkts: u64,
    /// Bytes sent on.
    pub deq_bytes: u64,
    /// Packets refused, by reason name (non-zero only).
    pub drops: BTreeMap<String, u64>,
    /// Packets marked CE.
    pub ecn_marks: u64,
    /// Packets queued now.
    pub occ_pkts: u64,
    /// Bytes queued now.
    pub occ_bytes: u64,
    /// Most bytes ever queued at once (the largest of the workers').
    pub hwm_bytes: u64,
}

impl QueueRow {
    fn add(&mut self, o: &QueueRow) {
        self.enq_pkts += o.enq_pkts;
        self.enq_bytes += o.enq_bytes;
        self.deq_pkts += o.deq_pkts;
        self.deq_bytes += o.deq_bytes;
        for (r, n) in &o.drops {
            *self.drops.entry(r.clone()).or_default() += n;
        }
        self.ecn_marks += o.ecn_marks;
        self.occ_pkts += o.occ_pkts;
        self.occ_bytes += o.occ_bytes;
        self.hwm_bytes = self.hwm_bytes.max(o.hwm_bytes);
    }
}

/// The queues of `pipe`'s traffic manager that saw a packet.
fn queue_rows(pipe: &Pipeline) -> Vec<QueueRow> {
    let Some(tm) = pipe.tm() else { return Vec::new() };
    let mut v = Vec::new();
    for port in 0..tm.ports() {
        for class in 0..8u8 {
            let Some(c) = tm.queue_counters(port, usize::from(class)) else { continue };
            if c.enq_pkts + c.total_drops() == 0 {
                continue;
            }
            let drops = fastpath_tm::TmDrop::ALL.iter().filter(|r| c.drops(**r) > 0).map(|r| (r.name().to_string(), c.drops(*r))).collect();
            v.push(QueueRow {
                port: port as u16,
                class,
                enq_pkts: c.enq_pkts,
                enq_bytes: c.enq_bytes,
                deq_pkts: c.deq_pkts,
                deq_bytes: c.deq_bytes,
                drops,
                ecn_marks: c.ecn_marks,
                occ_pkts: c.occ_pkts,
                occ_bytes: c.occ_bytes,
                hwm_bytes: c.hwm_bytes,
            });
        }
    }
    v
}

impl WorkerSnapshot {
    /// The pipeline's own counters (ports and loop counters are filled in by the caller).
    /// Allocates: call only when asked for a snapshot.
    pub fn of(pipe: &Pipeline) -> WorkerSnapshot {
        let tables = pipe.program().tables.iter().map(|t| pipe.table(&t.name).map_or((0, 0), |t| t.hit_miss())).collect();
        let conntrack = pipe.objects().conntracks.iter().map(|c| (c.name.clone(), c.table.len(), c.table.capacity())).collect();
        WorkerSnapshot { stages: pipe.stats(), tables, conntrack, queues: queue_rows(pipe), ..WorkerSnapshot::default() }
    }
}

/// One stage's counters summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StageCounters {
    /// Stage name.
    pub name: String,
    /// Batches it ran on.
    pub calls: u64,
    /// Packets in.
    pub pkts_in: u64,
    /// Packets still live after it.
    pub pkts_out: u64,
    /// Drops by reason name (non-zero only).
    pub drops: BTreeMap<String, u64>,
}

/// Every counter of a running data plane: per worker, per port and per stage (summed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Each worker's loop counters.
    pub workers: Vec<LoopCounters>,
    /// Port counters summed over workers, by port id.
    pub ports: Vec<PortCounters>,
    /// Stage counters summed over workers, in plan order (`end` last).
    pub stages: Vec<StageCounters>,
    /// Traffic-manager queues summed over workers, by port and class (those with traffic).
    pub queues: Vec<QueueRow>,
}

impl Counters {
    /// Sums worker snapshots.
    pub fn sum(snaps: &[WorkerSnapshot]) -> Counters {
        let mut c = Counters::default();
        for s in snaps {
            c.workers.push(s.totals.clone());
            for (i, p) in s.ports.iter().enumerate() {
                if c.ports.len() <= i {
                    c.ports.push(PortCounters { name: p.name.clone(), ..PortCounters::default() });
                }
                let t = &mut c.ports[i];
                t.rx_pkts += p.rx_pkts;
                t.rx_bytes += p.rx_bytes;
                t.rx_dropped += p.rx_dropped;
                t.tx_pkts += p.tx_pkts;
                t.tx_bytes += p.tx_bytes;
                t.tx_dropped += p.tx_dropped;
                t.errors += p.errors;
            }
            for (i, (name, st)) in s.stages.iter().enumerate() {
                if c.stages.len() <= i {
                    c.stages.push(StageCounters { name: name.clone(), ..StageCounters::default() });
                }
                let t = &mut c.stages[i];
                t.calls += st.calls;
                t.pkts_in += st.pkts_in;
                t.pkts_out += st.pkts_out;
                for (r, &n) in DropReason::ALL.iter().zip(st.drops.iter()) {
                    if n > 0 {
                        *t.drops.entry(r.name().to_string()).or_default() += n;
                    }
                }
            }
            for q in &s.queues {
                match c.queues.iter_mut().find(|x| (x.port, x.class) == (q.port, q.class)) {
                    Some(x) => x.add(q),
                    None => c.queues.push(q.clone()),
                }
            }
        }
        c.queues.sort_by_key(|q| (q.port, q.class));
        c
    }

    /// The traffic manager's queues as aligned text, then refusals by `port/class/reason`.
    pub fn render_queues(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "{:<5} {:<5} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10} {:>9} {:>11} {:>11}",
            "port", "class", "enq_pkts", "enq_bytes", "deq_pkts", "deq_bytes", "drops", "ecn_marks", "occ_pkts", "occ_bytes", "hwm_bytes"
        );
        for q in &self.queues {
            let _ = writeln!(
                o,
                "{:<5} {:<5} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10} {:>9} {:>11} {:>11}",
                q.port,
                q.class,
                q.enq_pkts,
                q.enq_bytes,
                q.deq_pkts,
                q.deq_bytes,
                q.drops.values().sum::<u64>(),
                q.ecn_marks,
                q.occ_pkts,
                q.occ_bytes,
                q.hwm_bytes
            );
        }
        let drops: Vec<String> = self
            .queues
            .iter()
            .flat_map(|q| q.drops.iter().map(move |(r, n)| format!("  port {} class {}/{r}: {n}", q.port, q.class)))
            .collect();
        if !drops.is_empty() {
            let _ = writeln!(o, "refused by reason:");
            for d in drops {
                let _ = writeln!(o, "{d}");
            }
        }
        o
    }

    /// Total drops of `stage` for `reason` (by name).
    pub fn drops(&self, stage: &str, reason: &str) -> u64 {
        self.stages.iter().filter(|s| s.name == stage).filter_map(|s| s.drops.get(reason)).sum()
    }

    /// The counters as aligned text: workers, ports, stages, then drops by `stage/reason`.
    pub fn render(&self) -> String {
        let mut o = String::new();
        for w in &self.workers {
            let _ = writeln!(
                o,
                "worker {:<3} rx {:>12}  tx {:>12}  dropped {:>12}  tx_dropped {:>8}  batches {:>10}",
                w.worker, w.rx_pkts, w.tx_pkts, w.dropped, w.tx_dropped, w.batches
            );
        }
        let _ = writeln!(
            o,
            "{:<4} {:<12} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10} {:>8}",
            "id", "port", "rx_pkts", "rx_bytes", "rx_drop", "tx_pkts", "tx_bytes", "tx_drop", "errors"
        );
        for (i, p) in self.ports.iter().enumerate() {
            let _ = writeln!(
                o,
                "{i:<4} {:<12} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10} {:>8}",
                p.name, p.rx_pkts, p.rx_bytes, p.rx_dropped, p.tx_pkts, p.tx_bytes, p.tx_dropped, p.errors
            );
        }
        let _ = writeln!(o, "{:<18} {:>10} {:>12} {:>12} {:>10}", "stage", "calls", "packets in", "packets out", "drops");
        for s in &self.stages {
            let _ =
                writeln!(o, "{:<18} {:>10} {:>12} {:>12} {:>10}", s.name, s.calls, s.pkts_in, s.pkts_out, s.drops.values().sum::<u64>());
        }
        let drops: Vec<String> =
            self.stages.iter().flat_map(|s| s.drops.iter().map(move |(r, n)| format!("  {}/{r}: {n}", s.name))).collect();
        if !drops.is_empty() {
            let _ = writeln!(o, "drops by reason:");
            for d in drops {
                let _ = writeln!(o, "{d}");
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(worker: usize, rx: u64, no_route: u64) -> WorkerSnapshot {
        let mut st = StageStats { calls: 1, pkts_in: rx, pkts_out: rx - no_route, ..StageStats::default() };
        st.drops[DropReason::NoRoute as usize] = no_route;
        WorkerSnapshot {
            worker,
            stages: vec![("fib4".into(), st), ("end".into(), StageStats::default())],
            tables: vec![(rx - no_route, no_route)],
            conntrack: Vec::new(),
            ports: vec![
                PortCounters { name: "p0".into(), rx_pkts: rx, ..PortCounters::default() },
                PortCounters { name: "p1".into(), tx_pkts: rx - no_route, ..PortCounters::default() },
            ],
            totals: LoopCounters { worker, rx_pkts: rx, tx_pkts: rx - no_route, dropped: no_route, ..LoopCounters::default() },
            queues: vec![QueueRow {
                port: 1,
                class: 3,
                enq_pkts: rx,
                drops: [("tm_threshold".to_string(), no_route)].into(),
                hwm_bytes: rx * 100,
                ..QueueRow::default()
            }],
            ..WorkerSnapshot::default()
        }
    }

    #[test]
    fn snapshots_sum_per_port_and_stage_and_keep_workers_apart() {
        let c = Counters::sum(&[snap(0, 10, 4), snap(1, 7, 1)]);
        assert_eq!(c.workers.iter().map(|w| w.rx_pkts).collect::<Vec<_>>(), vec![10, 7]);
        assert_eq!((c.ports[0].rx_pkts, c.ports[1].tx_pkts), (17, 12));
        assert_eq!(c.drops("fib4", "no_route"), 5);
        assert_eq!(c.stages[0].pkts_in, 17);
        let text = c.render();
        assert!(text.contains("fib4/no_route: 5"), "{text}");
        assert!(text.lines().next().unwrap().starts_with("worker 0"), "{text}");
        assert_eq!(c.queues.len(), 1);
        assert_eq!((c.queues[0].enq_pkts, c.queues[0].hwm_bytes), (17, 1000), "packets add up, watermarks take the larger");
        let q = c.render_queues();
        assert!(q.contains("port 1 class 3/tm_threshold: 5"), "{q}");
    }
}
