//! fastpath-control: the runtime control API of a running data plane — add, modify, delete
//! and clear table entries, configure meters, read counters, tables, meters and conntrack
//! occupancy, as a typed surface ([`Control::apply`], [`Control::read`], [`Control::tables`],
//! [`Control::pipeline_info`]; P4Runtime in `fastpath-p4rt` is built on it) — and its front ends: the unix-socket protocol `fastpath ctl` speaks ([`server`]),
//! Prometheus metrics and a live page over HTTP ([`prom`], [`web`], [`http`]), which serve their
//! clients the same way ([`conn`]: a thread per connection, a request read in full before it takes the
//! [`Control`]). Uses `pipeline` (and the `packet` and `tm` types it exposes); knows nothing of
//! ports beyond the counters workers report, nor of threads beyond the mailbox and its front
//! ends' connection threads.
//!
//! # How a change reaches the workers
//!
//! ```text
//!  fastpath ctl ──unix socket──▶ control thread ─ parse + check (api) ─▶ shadow replica (state)
//!                                      │ accepted: Arc<[EntryOp]>, one per request
//!                  ┌───────────────────┼────────────────────┐  mailbox per worker (mailbox)
//!                  ▼                   ▼                    ▼
//!   worker 0: own pipeline    worker 1: own pipeline   …   applied between two batches,
//!   (replica of every table)  (replica)                    then Applied{seq} back
//! ```
//! Design (a) of the brief: **per-worker replicas with typed ops from a per-worker queue**.
//! The multi-core runtime already gives each worker its own pipeline instance built from the
//! same spec and entries (tables, meters, conntrack and counters are per worker, nothing is
//! shared on the packet path), so the memory for one replica per worker is already paid. An
//! update then costs O(change) on each worker — one LPM insert — where read-copy-update of a
//! shared table (design (b), `arc-swap`) would copy a 1M-route DIR-24-8 table (64 MiB+) per
//! update, or need a persistent structure the lookup engines do not have. Meters and conntrack
//! must be per worker anyway (they are written per packet). The cost is memory × workers.
//! Classifiers (ACL tables) are the exception, because they are rebuilt rather than updated
//! (21–33 ms for 10k rules, `fastpath bench acl`): the control thread's replica builds the new
//! classifier once and sends it with the ops; each worker applies the ops to its rule list and
//! adopts the shared, read-only classifier — a pointer swap between two batches instead of a
//! forwarding stall of a build on every worker — and hands the one it replaced back in its
//! reply, so the control thread frees it.
//!
//! The packet path sees no lock and no shared write: a worker checks its mailbox once per poll
//! (`Processor::between_batches`), which is one `Acquire` load of a counter only the control
//! thread writes ([`mailbox`]).
//!
//! **Consistency.** A request (all changes of one `fastpath ctl` call, or those between two
//! `show`s) is one transaction: a worker applies all its ops, then switches each touched
//! classifier once, between two batches, so a batch sees the tables entirely before or entirely
//! after the request — never half of it. Workers switch at slightly different moments (each at
//! its next batch boundary); the `ctl` call returns only after every worker has confirmed. A
//! request is accepted only if the control thread's shadow replica accepts every op (see
//! [`state`]), so a bad or refused request changes nothing on any worker. Counters are each
//! worker's own plain `u64`s, copied at a batch boundary on request and summed by the control
//! thread ([`metrics`]).
//!
//! ```
//! use fastpath_control::{mailbox::mailbox, Control};
//! let spec = r#"
//! name = "demo"
//! [parser]
//! headers = ["eth"]
//! [[table]]
//! name = "port_map"
//! key = [{ field = "meta.in_port", match = "exact" }]
//! actions = ["forward", "drop"]
//! size = 16
//! default = "drop"
//! [control]
//! ingress = "apply port_map"
//! "#;
//! let build = || fastpath_pipeline::compile("demo.toml", spec).map(|p| p.instantiate()).map_err(|e| e.to_string());
//! let (end, mut worker_end) = mailbox();
//! let mut worker_pipe = build().unwrap();
//! let stop = std::sync::atomic::AtomicBool::new(false);
//! std::thread::scope(|s| {
//!     let stop = &stop;
//!     let pipe = &mut worker_pipe;
//!     // The worker: checks its mailbox between batches.
//!     s.spawn(move || while !stop.load(std::sync::atomic::Ordering::Relaxed) { worker_end.poll(pipe, |_| {}); });
//!     let mut ctl = Control::new(build().unwrap(), Box::new(build), vec![end]);
//!     let out = ctl.execute("table port_map add 1 => forward(0)").unwrap();
//!     assert!(out.starts_with("ok: 1 change(s) applied on 1 worker(s)"));
//!     assert_eq!(ctl.execute("table port_map del 2").unwrap_err().code(), "rejected");
//!     stop.store(true, std::sync::atomic::Ordering::Relaxed);
//! });
//! assert_eq!(worker_pipe.table("port_map").unwrap().len(), 1);
//! ```
#![forbid(unsafe_code)]

pub mod api;
mod background;
pub mod changelog;
pub mod conn;
pub mod http;
pub mod mailbox;
pub mod metrics;
pub mod pfcp_up;
pub mod prom;
pub mod server;
pub mod session;
pub mod state;
#[cfg(test)]
pub(crate) mod testutil;
pub mod web;
pub mod writes;

pub use api::{parse_request, Command, CtlError, Show};
pub use conn::Limits;
pub use http::{MetricsServer, Site};
pub use mailbox::{mailbox, ControlEnd, WorkerEnd};
pub use metrics::{Counters, LoopCounters, PortCounters, WorkerSnapshot};
pub use server::{bind_socket, default_socket_path, request, running_sockets, Access, Server};
pub use state::{op_text, Control, TableInfo};
pub use writes::{ApplyStamps, WriteLog};
