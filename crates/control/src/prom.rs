//! Prometheus metrics: the counters `ctl show counters` reads, in the Prometheus text
//! exposition format (version 0.0.4). Served at `/metrics` by [`crate::http`].
//!
//! A scrape is one [`Control::snapshots`] round trip — each worker copies its plain counters at
//! its next batch boundary, as for `ctl show counters` — plus the control replica's table sizes
//! ([`Scrape::take`], with the Control held); the text is rendered afterwards, with the Control
//! released ([`Scrape::render`]). Workers see nothing but the one mailbox message: answering it
//! took a worker 26–29 µs on the lab's 2-vCPU guest, 0.03 % of its time at 10 scrapes per second
//! (`fastpath lab metrics-cost`, docs/lab.md), as the workers' own
//! `fastpath_worker_control_{messages,cycles}_total` count it.
//!
//! Names follow the Prometheus conventions: a `fastpath_` prefix, `_total` on counters, units in
//! the name (`_bytes`, `_packets`), and what varies (port, stage, reason, table, worker) in
//! labels. Sums over workers are left to PromQL except where a figure is per worker by nature
//! (worker loop counters, each worker's own conntrack table). Every family has one `# HELP`
//! and one `# TYPE` line, and its samples follow them together.
//!
//! | family | type | labels |
//! |---|---|---|
//! | `fastpath_port_{rx,tx}_{packets,bytes}_total` | counter | `port` |
//! | `fastpath_port_{rx,tx}_drops_total`, `fastpath_port_errors_total` | counter | `port` |
//! | `fastpath_stage_{calls,packets_in,packets_out,cycles}_total` | counter | `stage` |
//! | `fastpath_stage_drops_total` | counter | `stage`, `reason` |
//! | `fastpath_table_entries`, `fastpath_table_capacity_entries` | gauge | `table`, `engine` |
//! | `fastpath_table_lookups_total` | counter | `table`, `result` (`hit`, `miss`) |
//! | `fastpath_conntrack_flows`, `fastpath_conntrack_capacity_flows` | gauge | `table`, `worker` |
//! | `fastpath_queue_{enqueued,dequeued}_{packets,bytes}_total` | counter | `port`, `class` |
//! | `fastpath_queue_drops_total` | counter | `port`, `class`, `reason` |
//! | `fastpath_queue_ecn_marks_total` | counter | `port`, `class` |
//! | `fastpath_queue_occupancy_{packets,bytes}`, `fastpath_queue_high_watermark_bytes` | gauge | `port`, `class` |
//! | `fastpath_worker_{rx,tx}_packets_total`, `fastpath_worker_{drops,tx_drops,batches}_total` | counter | `worker` |
//! | `fastpath_worker_control_{messages,cycles}_total` | counter | `worker` |
//! | `fastpath_workers` | gauge | `pipeline` |
//!
//! Queue families appear only with a `[tm]` section (and only for queues that saw traffic).

use crate::api::CtlError;
use crate::metrics::{Counters, WorkerSnapshot};
use crate::state::Control;
use std::fmt::Write as _;

/// The content type of the exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One table of the program, as the control replica holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableInfo {
    /// Table name.
    pub name: String,
    /// Engine (`direct`, `exact`, `lpm`, `acl`).
    pub engine: String,
    /// Entries now.
    pub entries: usize,
    /// Capacity.
    pub capacity: usize,
}

/// What one scrape read: every worker's snapshot and the tables.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    /// Pipeline name.
    pub pipeline: String,
    /// The workers' snapshots, by worker index.
    pub snaps: Vec<WorkerSnapshot>,
    /// The program's tables, in program order (the order of [`WorkerSnapshot::tables`]).
    pub tables: Vec<TableInfo>,
    /// The spec has a traffic manager.
    pub has_tm: bool,
}

impl Scrape {
    /// Reads every worker's counters (one mailbox round trip) and the control replica's tables.
    /// Control thread (whoever holds the Control).
    ///
    /// # Errors
    /// A worker that did not answer.
    pub fn take(control: &mut Control<'_>) -> Result<Scrape, CtlError> {
        let snaps = control.snapshots()?;
        let shadow = control.shadow();
        let tables = shadow
            .program()
            .tables
            .iter()
            .map(|t| TableInfo {
                name: t.name.clone(),
                engine: format!("{:?}", t.imp).to_lowercase(),
                entries: shadow.table(&t.name).map_or(0, |x| x.len()),
                capacity: t.size,
            })
            .collect();
        Ok(Scrape { pipeline: shadow.program().name.clone(), snaps, tables, has_tm: shadow.has_tm() })
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let c = Counters::sum(&self.snaps);
        let mut w = Writer::default();
        let port = |i: usize| c.ports.get(i).map_or_else(|| i.to_string(), |p| p.name.clone());

        w.gauge(
            "fastpath_workers",
            "Worker threads running the pipeline.",
            [(vec![("pipeline", self.pipeline.clone())], self.snaps.len() as u64)],
        );

        type PortField = fn(&crate::metrics::PortCounters) -> u64;
        let port_families: [(&str, &str, PortField); 7] = [
            ("fastpath_port_rx_packets_total", "Packets received on the port.", |p| p.rx_pkts),
            ("fastpath_port_rx_bytes_total", "Bytes received on the port.", |p| p.rx_bytes),
            ("fastpath_port_rx_drops_total", "Packets the port or the kernel dropped before the pipeline saw them.", |p| p.rx_dropped),
            ("fastpath_port_tx_packets_total", "Packets transmitted on the port.", |p| p.tx_pkts),
            ("fastpath_port_tx_bytes_total", "Bytes transmitted on the port.", |p| p.tx_bytes),
            ("fastpath_port_tx_drops_total", "Packets the port could not transmit.", |p| p.tx_dropped),
            ("fastpath_port_errors_total", "Failed system calls on the port.", |p| p.errors),
        ];
        for (name, help, f) in port_families {
            w.counter(name, help, c.ports.iter().map(|p| (vec![("port", p.name.clone())], f(p))));
        }

        // Stages: summed over workers, with cycles (which `Counters` leaves out).
        let mut cycles: Vec<u64> = Vec::new();
        for s in &self.snaps {
            for (i, (_, st)) in s.stages.iter().enumerate() {
                if cycles.len() <= i {
                    cycles.resize(i + 1, 0);
                }
                cycles[i] += st.cycles;
            }
        }
        let stage = |s: &crate::metrics::StageCounters| vec![("stage", s.name.clone())];
        w.counter("fastpath_stage_calls_total", "Batches the stage ran on.", c.stages.iter().map(|s| (stage(s), s.calls)));
        w.counter("fastpath_stage_packets_in_total", "Packets that entered the stage.", c.stages.iter().map(|s| (stage(s), s.pkts_in)));
        w.counter(
            "fastpath_stage_packets_out_total",
            "Packets still live after the stage.",
            c.stages.iter().map(|s| (stage(s), s.pkts_out)),
        );
        w.counter(
            "fastpath_stage_drops_total",
            "Packets the stage dropped, by drop reason (docs/drop-reasons.md).",
            c.stages.iter().flat_map(|s| s.drops.iter().map(move |(r, n)| (vec![("stage", s.name.clone()), ("reason", r.clone())], *n))),
        );
        w.counter(
            "fastpath_stage_cycles_total",
            "TSC cycles spent in the stage.",
            c.stages.iter().zip(&cycles).map(|(s, &n)| (stage(s), n)),
        );

        // Tables: sizes from the control replica (every worker holds the same), lookups summed.
        let table = |t: &TableInfo| vec![("table", t.name.clone()), ("engine", t.engine.clone())];
        w.gauge("fastpath_table_entries", "Entries in the table.", self.tables.iter().map(|t| (table(t), t.entries as u64)));
        w.gauge(
            "fastpath_table_capacity_entries",
            "Entries the table can hold.",
            self.tables.iter().map(|t| (table(t), t.capacity as u64)),
        );
        let mut lookups = Vec::new();
        for (i, t) in self.tables.iter().enumerate() {
            let (h, m) = self.snaps.iter().filter_map(|s| s.tables.get(i)).fold((0, 0), |(h, m), &(a, b)| (h + a, m + b));
            lookups.push((vec![("table", t.name.clone()), ("result", "hit".to_string())], h));
            lookups.push((vec![("table", t.name.clone()), ("result", "miss".to_string())], m));
        }
        w.counter("fastpath_table_lookups_total", "Table lookups, by result (hit or miss).", lookups);

        // Conntrack: one table per worker.
        let ct = |f: fn(&(String, usize, usize)) -> usize| {
            self.snaps
                .iter()
                .flat_map(move |s| {
                    s.conntrack.iter().map(move |x| (vec![("table", x.0.clone()), ("worker", s.worker.to_string())], f(x) as u64))
                })
                .collect::<Vec<_>>()
        };
        w.gauge("fastpath_conntrack_flows", "Live flows in the worker's conntrack table.", ct(|x| x.1));
        w.gauge("fastpath_conntrack_capacity_flows", "Flows the worker's conntrack table can hold.", ct(|x| x.2));

        if self.has_tm {
            type QueueField = fn(&crate::metrics::QueueRow) -> u64;
            let q = |r: &crate::metrics::QueueRow| vec![("port", port(usize::from(r.port))), ("class", r.class.to_string())];
            let counters: [(&str, &str, QueueField); 5] = [
                ("fastpath_queue_enqueued_packets_total", "Packets the queue accepted.", |r| r.enq_pkts),
                ("fastpath_queue_enqueued_bytes_total", "Bytes the queue accepted.", |r| r.enq_bytes),
                ("fastpath_queue_dequeued_packets_total", "Packets the queue sent on.", |r| r.deq_pkts),
                ("fastpath_queue_dequeued_bytes_total", "Bytes the queue sent on.", |r| r.deq_bytes),
                ("fastpath_queue_ecn_marks_total", "Packets the queue marked CE.", |r| r.ecn_marks),
            ];
            for (name, help, f) in counters {
                w.counter(name, help, c.queues.iter().map(|r| (q(r), f(r))));
            }
            w.counter(
                "fastpath_queue_drops_total",
                "Packets the queue refused, by reason.",
                c.queues.iter().flat_map(|r| {
                    r.drops.iter().map(move |(reason, n)| {
                        let mut l = q(r);
                        l.push(("reason", reason.clone()));
                        (l, *n)
                    })
                }),
            );
            let gauges: [(&str, &str, QueueField); 3] = [
                ("fastpath_queue_occupancy_packets", "Packets queued now.", |r| r.occ_pkts),
                ("fastpath_queue_occupancy_bytes", "Bytes queued now.", |r| r.occ_bytes),
                ("fastpath_queue_high_watermark_bytes", "Most bytes queued at once since start (the largest of the workers').", |r| {
                    r.hwm_bytes
                }),
            ];
            for (name, help, f) in gauges {
                w.gauge(name, help, c.queues.iter().map(|r| (q(r), f(r))));
            }
        }

        type LoopField = fn(&crate::metrics::LoopCounters) -> u64;
        let loops: [(&str, &str, LoopField); 5] = [
            ("fastpath_worker_rx_packets_total", "Packets the worker received from all its ports.", |l| l.rx_pkts),
            ("fastpath_worker_tx_packets_total", "Packets the worker's ports accepted for transmission.", |l| l.tx_pkts),
            ("fastpath_worker_drops_total", "Packets the worker's pipeline dropped.", |l| l.dropped),
            ("fastpath_worker_tx_drops_total", "Packets to transmit that a port refused.", |l| l.tx_dropped),
            ("fastpath_worker_batches_total", "Batches the worker processed.", |l| l.batches),
        ];
        for (name, help, f) in loops {
            w.counter(name, help, c.workers.iter().map(|l| (vec![("worker", l.worker.to_string())], f(l))));
        }
        // What answering the control plane (this scrape's predecessors among it) took from the workers.
        let worker = |s: &WorkerSnapshot| vec![("worker", s.worker.to_string())];
        w.counter(
            "fastpath_worker_control_messages_total",
            "Control messages (changes, counter snapshots such as a scrape's) the worker answered between batches, before this scrape's.",
            self.snaps.iter().map(|s| (worker(s), s.control.messages)),
        );
        w.counter(
            "fastpath_worker_control_cycles_total",
            "TSC cycles the worker spent answering those messages instead of forwarding.",
            self.snaps.iter().map(|s| (worker(s), s.control.cycles)),
        );
        w.out
    }
}

/// Labels of one sample: (name, value).
type Labels = Vec<(&'static str, String)>;

/// Writes families; each name once (checked in debug builds).
#[derive(Default)]
struct Writer {
    out: String,
    names: Vec<&'static str>,
}

impl Writer {
    fn counter(&mut self, name: &'static str, help: &str, samples: impl IntoIterator<Item = (Labels, u64)>) {
        debug_assert!(name.ends_with("_total"), "{name}: counters end in _total");
        self.family(name, "counter", help, samples);
    }

    fn gauge(&mut self, name: &'static str, help: &str, samples: impl IntoIterator<Item = (Labels, u64)>) {
        self.family(name, "gauge", help, samples);
    }

    /// HELP, TYPE, then every sample; a family without samples is left out.
    fn family(&mut self, name: &'static str, kind: &str, help: &str, samples: impl IntoIterator<Item = (Labels, u64)>) {
        debug_assert!(!self.names.contains(&name), "{name} written twice");
        self.names.push(name);
        let mut samples = samples.into_iter().peekable();
        if samples.peek().is_none() {
            return;
        }
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            self.out.push_str(name);
            if !labels.is_empty() {
                self.out.push('{');
                for (i, (k, v)) in labels.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
                }
                self.out.push('}');
            }
            let _ = writeln!(self.out, " {value}");
        }
    }
}

/// A label value: backslash, double quote and line feed escaped (`\\`, `\"`, `\n`).
fn escape_label(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for ch in v.chars() {
        match ch {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

/// HELP text: backslash and line feed escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{LoopCounters, PortCounters, QueueRow};
    use fastpath_packet::DropReason;
    use fastpath_pipeline::StageStats;
    use std::collections::{BTreeMap, BTreeSet};

    fn snap(worker: usize, rx: u64) -> WorkerSnapshot {
        let mut st = StageStats { calls: 2, pkts_in: rx, pkts_out: rx - 1, cycles: 1000 + worker as u64, ..StageStats::default() };
        st.drops[DropReason::NoRoute as usize] = 1;
        WorkerSnapshot {
            worker,
            stages: vec![("fib4".into(), st), ("vxlan-decap".into(), StageStats::default())],
            tables: vec![(rx - 1, 1)],
            conntrack: vec![("flows".into(), 3 + worker, 1024)],
            ports: vec![
                // A port name that needs escaping: names come from the command line.
                PortCounters { name: "p\"0\\\n".into(), rx_pkts: rx, rx_bytes: 64 * rx, ..PortCounters::default() },
                PortCounters { name: "p1".into(), tx_pkts: rx - 1, ..PortCounters::default() },
            ],
            totals: LoopCounters { worker, rx_pkts: rx, tx_pkts: rx - 1, dropped: 1, batches: 1, ..LoopCounters::default() },
            queues: vec![QueueRow {
                port: 1,
                class: 3,
                enq_pkts: rx,
                drops: [("tm_threshold".to_string(), 2)].into(),
                hwm_bytes: 100 * rx,
                ..QueueRow::default()
            }],
            control: crate::metrics::ControlLoad { messages: 3 + worker as u64, cycles: 5000 },
        }
    }

    fn scrape(has_tm: bool) -> Scrape {
        Scrape {
            pipeline: "router".into(),
            snaps: vec![snap(0, 10), snap(1, 7)],
            tables: vec![TableInfo { name: "fib4".into(), engine: "lpm".into(), entries: 5, capacity: 1024 }],
            has_tm,
        }
    }

    /// One parsed sample line.
    #[derive(Debug)]
    struct Sample {
        name: String,
        labels: BTreeMap<String, String>,
        value: f64,
    }

    /// A strict reader of the text format (version 0.0.4): it fails on anything out of place,
    /// so the renderer is checked against the format, not against itself. Returns the samples
    /// and each family's type.
    fn parse(text: &str) -> (Vec<Sample>, BTreeMap<String, String>) {
        let metric_name = |s: &str| {
            let mut c = s.chars();
            c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
                && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
        };
        let label_name = |s: &str| {
            let mut c = s.chars();
            c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_') && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
        };
        let (mut samples, mut types, mut helps) = (Vec::new(), BTreeMap::new(), BTreeSet::new());
        let mut current: Option<String> = None;
        let mut done: BTreeSet<String> = BTreeSet::new();
        assert!(text.ends_with('\n'), "the text ends with a line feed");
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, _) = rest.split_once(' ').unwrap_or_else(|| panic!("{line}"));
                assert!(metric_name(name), "{line}");
                assert!(helps.insert(name.to_string()), "a second HELP for {name}");
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("{line}"));
                assert!(["counter", "gauge"].contains(&kind), "{line}");
                assert!(types.insert(name.to_string(), kind.to_string()).is_none(), "a second TYPE for {name}");
                assert!(helps.contains(name), "HELP comes before TYPE: {line}");
                if let Some(prev) = current.replace(name.to_string()) {
                    done.insert(prev);
                }
                continue;
            }
            assert!(!line.starts_with('#') && !line.is_empty(), "unexpected line {line:?}");
            let (name, rest) = match line.find(['{', ' ']) {
                Some(i) => line.split_at(i),
                None => panic!("{line}"),
            };
            assert!(metric_name(name), "{line}");
            assert_eq!(Some(name), current.as_deref(), "a sample outside its family's block: {line}");
            assert!(!done.contains(name), "{name}'s samples are split: {line}");
            let mut labels = BTreeMap::new();
            let mut rest = rest.to_string();
            if let Some(r) = rest.strip_prefix('{') {
                let mut it = r.chars().peekable();
                if it.next_if_eq(&'}').is_none() {
                    loop {
                        let key: String = std::iter::from_fn(|| it.next_if(|&c| c != '=')).collect();
                        assert!(label_name(&key), "label {key:?}: {line}");
                        assert_eq!((it.next(), it.next()), (Some('='), Some('"')), "{line}");
                        let mut value = String::new();
                        loop {
                            match it.next() {
                                Some('"') => break,
                                Some('\\') => match it.next() {
                                    Some('\\') => value.push('\\'),
                                    Some('"') => value.push('"'),
                                    Some('n') => value.push('\n'),
                                    e => panic!("bad escape {e:?}: {line}"),
                                },
                                Some(c) => value.push(c),
                                None => panic!("unterminated value: {line}"),
                            }
                        }
                        assert!(labels.insert(key.clone(), value).is_none(), "label {key} twice: {line}");
                        match it.next() {
                            Some(',') => {}
                            Some('}') => break,
                            other => panic!("{other:?} after a label: {line}"),
                        }
                    }
                }
                rest = it.collect();
            }
            let value = rest.strip_prefix(' ').unwrap_or_else(|| panic!("one space before the value: {line}"));
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("value: {line}"));
            samples.push(Sample { name: name.to_string(), labels, value });
        }
        (samples, types)
    }

    fn value(s: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
        let hits: Vec<&Sample> =
            s.iter().filter(|x| x.name == name && labels.iter().all(|(k, v)| x.labels.get(*k).map(String::as_str) == Some(*v))).collect();
        assert_eq!(hits.len(), 1, "{name} {labels:?}: {hits:?}");
        hits[0].value
    }

    #[test]
    fn the_exposition_is_valid_text_format_with_the_summed_counters() {
        let text = scrape(true).render();
        let (s, types) = parse(&text);
        for (name, kind) in &types {
            assert!(name.starts_with("fastpath_"), "{name}");
            assert_eq!(name.ends_with("_total"), kind == "counter", "{name} is a {kind}");
        }
        assert!(s.iter().all(|x| types.contains_key(&x.name)), "every sample has a TYPE");
        // The escaped port name reads back exactly.
        assert_eq!(value(&s, "fastpath_port_rx_packets_total", &[("port", "p\"0\\\n")]), 17.0);
        assert!(text.contains(r#"port="p\"0\\\n""#), "{text}");
        assert_eq!(value(&s, "fastpath_port_rx_bytes_total", &[("port", "p\"0\\\n")]), 64.0 * 17.0);
        assert_eq!(value(&s, "fastpath_port_tx_packets_total", &[("port", "p1")]), 15.0);
        assert_eq!(value(&s, "fastpath_stage_drops_total", &[("stage", "fib4"), ("reason", "no_route")]), 2.0);
        assert_eq!(value(&s, "fastpath_stage_cycles_total", &[("stage", "fib4")]), 2001.0);
        assert_eq!(value(&s, "fastpath_stage_packets_in_total", &[("stage", "vxlan-decap")]), 0.0);
        assert_eq!(value(&s, "fastpath_table_lookups_total", &[("table", "fib4"), ("result", "hit")]), 15.0);
        assert_eq!(value(&s, "fastpath_table_capacity_entries", &[("table", "fib4"), ("engine", "lpm")]), 1024.0);
        assert_eq!(value(&s, "fastpath_conntrack_flows", &[("table", "flows"), ("worker", "1")]), 4.0);
        assert_eq!(value(&s, "fastpath_queue_drops_total", &[("port", "p1"), ("class", "3"), ("reason", "tm_threshold")]), 4.0);
        assert_eq!(value(&s, "fastpath_queue_high_watermark_bytes", &[("port", "p1"), ("class", "3")]), 1000.0);
        assert_eq!(value(&s, "fastpath_worker_rx_packets_total", &[("worker", "0")]), 10.0);
        assert_eq!(value(&s, "fastpath_worker_control_messages_total", &[("worker", "1")]), 4.0);
        assert_eq!(value(&s, "fastpath_worker_control_cycles_total", &[("worker", "0")]), 5000.0);
        assert_eq!(value(&s, "fastpath_workers", &[("pipeline", "router")]), 2.0);
        assert!(types.len() >= 30, "{}", types.len());
    }

    #[test]
    fn queue_families_appear_only_with_a_traffic_manager() {
        let (_, types) = parse(&scrape(false).render());
        assert!(!types.keys().any(|n| n.starts_with("fastpath_queue_")), "{types:?}");
        let (_, types) = parse(&scrape(true).render());
        assert!(types.contains_key("fastpath_queue_occupancy_bytes"));
    }

    #[test]
    fn the_reader_catches_what_the_format_forbids() {
        for bad in [
            "# HELP a x\n# TYPE a counter\na{l=\"v\"} 1\n# HELP a x\n# TYPE a counter\n", // two TYPEs
            "# HELP a x\n# TYPE a gauge\na{l=\"a\nb\"} 1\n",                              // raw line feed
            "# HELP a x\n# TYPE a gauge\n# HELP b x\n# TYPE b gauge\nb 1\na 1\n",         // split family
            "# HELP a-b x\n# TYPE a-b gauge\n",                                           // bad name
            "# HELP a x\n# TYPE a gauge\na{l=\"\\t\"} 1\n",                               // bad escape
        ] {
            assert!(std::panic::catch_unwind(|| parse(bad)).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(escape_help("x\\y\nz \"q\""), "x\\\\y\\nz \"q\"");
    }
}
