//! A running data plane: [`Dataplane::start`] opens the live ports, starts one pinned
//! run-to-completion worker per core, each with its own pipeline replica, and owns their
//! mailboxes and the [`Control`] plane over them. Front ends — the text `ctl` socket,
//! Prometheus, the live page, PFCP, P4Runtime — are threads the caller attaches with
//! [`Dataplane::serve`]; each gets the shared `Mutex<Control>` and a flag that tells it the
//! workers have stopped.
//!
//! ```text
//!   Dataplane::start(spec, entries, ports, options)
//!     ├─ shadow = spec + entries (errors here, before any socket opens) ─▶ Control
//!     ├─ runtime thread: fastpath_io::multi::run ─▶ worker w: own pool, own sockets
//!     │        (AF_XDP queue base + w, or one member of an AF_PACKET fanout group),
//!     │        own pipeline; between batches it polls its mailbox (one atomic load when idle)
//!     └─ serve(name, |control, done| …)  ×  each front end on its own thread
//!   counts() · stop() · wait() ─▶ Report
//! ```
//!
//! Workers publish rx/tx/drop counts once per batch into a cache-line-sized slot of relaxed
//! atomics each, for [`Dataplane::counts`]; everything else (per-port, per-stage counters,
//! tables) is read through the control plane, which asks the workers between batches.

use fastpath_control::mailbox::{ControlEnd, WorkerEnd};
use fastpath_control::{Control, LoopCounters, PortCounters, WorkerSnapshot};
use fastpath_io::af_packet::{AfPacketConfig, PacketPort, PACKET_FANOUT_HASH};
use fastpath_io::af_xdp::{XdpConfig, XdpPort};
use fastpath_io::multi::{self, MultiConfig, MultiReport};
use fastpath_io::port::Port;
use fastpath_io::worker::{Exception, Processor, Worker, WorkerStats};
use fastpath_packet::{Batch, Pool, Verdict};
use fastpath_pipeline::{Pipeline, StageStats};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The pipeline as a worker's processor.
pub struct PipeProc(pub Pipeline);

impl Processor for PipeProc {
    #[inline]
    fn process(&mut self, pool: &mut Pool, batch: &mut Batch, now_ns: u64) {
        self.0.process(pool, batch, now_ns);
    }
    #[inline]
    fn has_queues(&self) -> bool {
        self.0.has_tm()
    }
    #[inline]
    fn egress(&mut self, pool: &mut Pool, port: u16, batch: &mut Batch, now_ns: u64) -> usize {
        self.0.egress(port, pool, batch, now_ns)
    }
    #[inline]
    fn held(&self) -> u64 {
        self.0.tm_backlog()
    }
    fn next_due_ns(&self) -> Option<u64> {
        self.0.next_due_ns()
    }
}

/// A live port, opened once per worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortSpec {
    /// An AF_XDP socket on `iface`; worker w binds queue `queue + w`.
    AfXdp {
        /// The port's name.
        name: String,
        /// The interface.
        iface: String,
        /// Worker 0's queue.
        queue: u32,
    },
    /// An AF_PACKET (TPACKET_V3) socket on `iface`; several workers share a fanout group.
    AfPacket {
        /// The port's name.
        name: String,
        /// The interface.
        iface: String,
    },
}

impl PortSpec {
    /// The port's name.
    pub fn name(&self) -> &str {
        match self {
            PortSpec::AfXdp { name, .. } | PortSpec::AfPacket { name, .. } => name,
        }
    }
}

/// Builds worker `w`'s exception path (punted packets out, packet-outs in).
pub type ExceptionFactory = Arc<dyn Fn(usize) -> Result<Box<dyn Exception>, String> + Send + Sync>;

/// How to run.
#[derive(Clone)]
pub struct Options {
    /// Worker threads, one per core.
    pub workers: usize,
    /// Pin workers (worker w on core `first_core + w`); the process's other threads then run on
    /// the remaining cores, when there are any.
    pub pin: bool,
    /// First core to pin to.
    pub first_core: usize,
    /// Sleep this many µs after 1024 idle polls (0: spin).
    pub idle_sleep_us: u64,
    /// Buffers in each worker's pool [default: enough for every port's rings and two batches].
    pub pool: Option<usize>,
    /// AF_XDP settings.
    pub xdp: XdpConfig,
    /// AF_PACKET settings (the fanout group is set here).
    pub packet: AfPacketConfig,
    /// Give the workers mailboxes and keep a control plane (needed by every front end).
    pub control: bool,
    /// Send punted packets out of this port.
    pub punt_port: Option<u16>,
    /// Or hand them to this exception path.
    pub exception: Option<ExceptionFactory>,
    /// Run the front ends' threads ([`Dataplane::serve`]) and those they start (connection
    /// threads, the P4Runtime server's) real-time, `SCHED_FIFO` at this priority (1–99), so
    /// that a write's hand-offs between them do not wait for a busy thread's time slice on a
    /// shared core. The control plane's background classifier builds go back to the ordinary
    /// scheduler. `None`: the ordinary scheduler for all.
    pub control_rt: Option<i32>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            workers: 1,
            pin: true,
            first_core: 0,
            idle_sleep_us: 0,
            pool: None,
            xdp: XdpConfig::default(),
            packet: AfPacketConfig::default(),
            control: true,
            punt_port: None,
            exception: None,
            control_rt: None,
        }
    }
}

/// The control plane the front ends share.
pub type SharedControl = Arc<Mutex<Control<'static>>>;

/// What a run leaves: per worker, its loop and port counters and a last snapshot of its
/// pipeline's counters.
pub type Report = MultiReport<WorkerSnapshot>;

/// A running data plane (module docs).
pub struct Dataplane {
    control: Option<SharedControl>,
    control_rt: Option<i32>,
    slots: Arc<[LiveSlot]>,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    runtime: JoinHandle<Result<Report, String>>,
    front: Vec<(String, JoinHandle<()>)>,
    names: Vec<String>,
    housekeeping: Option<Vec<usize>>,
    worker_cores: Vec<usize>,
}

/// Compiles the spec, sizes it for `ports` and loads the entries files.
pub fn build_pipeline(spec: &std::path::Path, entries: &[PathBuf], ports: usize) -> Result<Pipeline, String> {
    let prog = fastpath_pipeline::compile_file(spec).map_err(|e| e.to_string())?;
    let mut pipe = prog.instantiate();
    pipe.set_ports(ports)?;
    for e in entries {
        let text = std::fs::read_to_string(e).map_err(|err| format!("{}: {err}", e.display()))?;
        pipe.load_entries(&e.display().to_string(), &text).map_err(|err| err.to_string())?;
    }
    Ok(pipe)
}

impl Dataplane {
    /// Compiles `spec` with `entries` (so spec and entry errors stop us before any socket
    /// opens), then opens `ports` on every worker and starts them. Returns once the workers are
    /// starting; a port that fails to open ends the run, and [`Dataplane::wait`] reports it.
    ///
    /// # Errors
    /// A bad spec or entries file, no ports, zero workers, or a thread that could not start.
    pub fn start(spec: PathBuf, entries: Vec<PathBuf>, ports: Vec<PortSpec>, opts: Options) -> Result<Dataplane, String> {
        let shadow = build_pipeline(&spec, &entries, ports.len())?;
        Dataplane::start_with(shadow, spec, entries, ports, opts)
    }

    /// [`Dataplane::start`] with the control plane's replica already built from `spec` and
    /// `entries` for these ports (a caller that compiled them to check them first saves doing
    /// it twice: with a million routes, seconds).
    ///
    /// # Errors
    /// As [`Dataplane::start`].
    pub fn start_with(
        shadow: Pipeline,
        spec: PathBuf,
        entries: Vec<PathBuf>,
        ports: Vec<PortSpec>,
        opts: Options,
    ) -> Result<Dataplane, String> {
        if opts.workers == 0 {
            return Err("at least one worker is needed".into());
        }
        if ports.is_empty() {
            return Err("no ports".into());
        }
        let n_ports = ports.len();
        if let Some(p) = opts.punt_port.filter(|&p| usize::from(p) >= n_ports) {
            return Err(format!("punt port {p}: there are {n_ports} ports"));
        }
        let (ends, mail): (Vec<ControlEnd>, Vec<Mutex<Option<WorkerEnd>>>) = if opts.control {
            (0..opts.workers).map(|_| fastpath_control::mailbox()).map(|(c, w)| (c, Mutex::new(Some(w)))).unzip()
        } else {
            (Vec::new(), (0..opts.workers).map(|_| Mutex::new(None)).collect())
        };
        let control = opts.control.then(|| {
            let (spec, entries) = (spec.clone(), entries.clone());
            let rebuild = Box::new(move || build_pipeline(&spec, &entries, n_ports));
            let mut c = Control::new(shadow, rebuild, ends).with_ports(n_ports);
            if opts.control_rt.is_some() {
                c.set_background_setup(|| {
                    let _ = fastpath_io::sys::set_normal();
                });
            }
            Arc::new(Mutex::new(c))
        });
        let mut mcfg = MultiConfig {
            workers: opts.workers,
            pin: opts.pin,
            first_core: opts.first_core,
            idle_sleep_us: opts.idle_sleep_us,
            ..MultiConfig::default()
        };
        // Keep this thread and the ones it starts (control, front ends) off the workers' cores.
        let housekeeping = mcfg.pin_housekeeping().map_err(|e| format!("pinning the main thread off the worker cores: {e}"))?;
        let worker_cores = mcfg.worker_cores();
        let slots: Arc<[LiveSlot]> = (0..opts.workers).map(|_| LiveSlot::default()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let names = ports.iter().map(|p| p.name().to_string()).collect();
        let need = n_ports * (opts.xdp.fill_size + opts.xdp.tx_size) as usize + 2 * fastpath_packet::BATCH_MAX + 256;
        let pool_size = opts.pool.unwrap_or(need.max(8192));
        let control_rt = opts.control_rt;
        let runtime = {
            let (slots, stop, done) = (slots.clone(), stop.clone(), done.clone());
            std::thread::Builder::new()
                .name("fp-runtime".into())
                .spawn(move || {
                    let r = multi::run(
                        &mcfg,
                        &stop,
                        |w| {
                            let mut pool = Pool::new(pool_size);
                            let opened = open_ports(&ports, w, &opts, &mut pool)?;
                            let pipe = build_pipeline(&spec, &entries, n_ports)?;
                            let mail = mail.get(w).and_then(|m| m.lock().ok().and_then(|mut m| m.take()));
                            let worker = Worker::new(pool, opened, LiveProc { inner: PipeProc(pipe), slot: &slots[w], mail });
                            Ok(match (opts.punt_port, &opts.exception) {
                                (Some(p), _) => worker.with_punt_port(p),
                                (None, Some(make)) => worker.with_exception(make(w)?),
                                (None, None) => worker,
                            })
                        },
                        |_, w| WorkerSnapshot::of(&w.processor().inner.0),
                    );
                    done.store(true, Ordering::SeqCst);
                    r.map_err(|e| e.to_string())
                })
                .map_err(|e| format!("starting the runtime thread: {e}"))?
        };
        Ok(Dataplane { control, control_rt, slots, stop, done, runtime, front: Vec::new(), names, housekeeping, worker_cores })
    }

    /// The control plane (None when started without one).
    pub fn control(&self) -> Option<&SharedControl> {
        self.control.as_ref()
    }

    /// Runs a front end on a thread of its own: `f` gets the control plane and a flag that
    /// turns true once the workers have stopped; it should return soon after. Joined by
    /// [`Dataplane::wait`]. With [`Options::control_rt`] the thread is real-time (a refusal, no
    /// CAP_SYS_NICE, is said once on stderr and the thread runs as it is).
    ///
    /// # Errors
    /// No control plane, or the thread could not start.
    pub fn serve(&mut self, name: &str, f: impl FnOnce(&Mutex<Control<'static>>, &AtomicBool) + Send + 'static) -> Result<(), String> {
        let control = self.control.clone().ok_or_else(|| format!("{name}: the data plane runs without a control plane"))?;
        let done = self.done.clone();
        let rt = self.control_rt;
        let label = name.to_string();
        let h = std::thread::Builder::new()
            .name(format!("fp-{name}"))
            .spawn(move || {
                if let Some(p) = rt {
                    if let Err(e) = fastpath_io::sys::set_realtime(p) {
                        eprintln!("fastpath: --control-rt {p}: the {label} thread stays on the ordinary scheduler: {e}");
                    }
                }
                f(&control, &done)
            })
            .map_err(|e| format!("{name}: no thread: {e}"))?;
        self.front.push((name.to_string(), h));
        Ok(())
    }

    /// Packets received, transmitted and dropped so far, summed over workers (relaxed reads of
    /// counters the workers publish once per batch).
    pub fn counts(&self) -> (u64, u64, u64) {
        sum_slots(&self.slots)
    }

    /// Asks the workers to drain and stop.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// True once stop was asked for.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// True once every worker has stopped (asked to, or a port failed to open).
    pub fn finished(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }

    /// The ports' names, by number.
    pub fn port_names(&self) -> &[String] {
        &self.names
    }

    /// The cores the workers are pinned to (empty when not pinned).
    pub fn worker_cores(&self) -> &[usize] {
        &self.worker_cores
    }

    /// The cores this process's other threads run on, when the workers left some.
    pub fn housekeeping_cores(&self) -> Option<&[usize]> {
        self.housekeeping.as_deref()
    }

    /// Waits for the workers (call [`Dataplane::stop`] first, or they run on) and the front
    /// ends, and returns the workers' final counters.
    ///
    /// # Errors
    /// A worker that failed to start (a port that would not open names itself), or a panic.
    pub fn wait(self) -> Result<Report, String> {
        let r = self.runtime.join().map_err(|_| "the runtime thread panicked".to_string())?;
        // A failed start leaves `done` set too, so the front ends end either way.
        self.done.store(true, Ordering::SeqCst);
        for (name, h) in self.front {
            if h.join().is_err() {
                eprintln!("fastpath: the {name} thread panicked");
            }
        }
        r
    }
}

/// Opens worker `w`'s socket on every port; errors name the port.
fn open_ports(ports: &[PortSpec], w: usize, opts: &Options, pool: &mut Pool) -> Result<Vec<Box<dyn Port>>, String> {
    let mut out: Vec<Box<dyn Port>> = Vec::with_capacity(ports.len());
    for (i, p) in ports.iter().enumerate() {
        match p {
            PortSpec::AfXdp { name, iface, queue } => {
                let q = queue + w as u32;
                let port = XdpPort::open(iface, q, &opts.xdp, pool).map_err(|e| format!("port {name} (afxdp:{iface} queue {q}): {e}"))?;
                out.push(Box::new(port));
            }
            PortSpec::AfPacket { name, iface } => {
                // One fanout group per (process, port): ids unique enough for one data plane.
                let group = ((std::process::id() as u16) ^ (i as u16).wrapping_mul(0x9e37)) | 1;
                let cfg = AfPacketConfig { fanout: (opts.workers > 1).then_some((group, PACKET_FANOUT_HASH)), ..opts.packet };
                let port = PacketPort::open(iface, &cfg).map_err(|e| format!("port {name} (afpacket:{iface}): {e}"))?;
                out.push(Box::new(port));
            }
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

fn sum_slots(slots: &[LiveSlot]) -> (u64, u64, u64) {
    slots.iter().fold((0, 0, 0), |(r, t, d), s| {
        (r + s.rx_pkts.load(Ordering::Relaxed), t + s.tx_pkts.load(Ordering::Relaxed), d + s.drop_pkts.load(Ordering::Relaxed))
    })
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
        self.inner.has_queues() || self.mail.as_ref().is_some_and(WorkerEnd::draining)
    }

    /// A pipeline replaced by a reload drains first: what it queued leaves before what the new
    /// one queues.
    #[inline]
    fn egress(&mut self, pool: &mut Pool, port: u16, batch: &mut Batch, now_ns: u64) -> usize {
        let mut n = match &mut self.mail {
            Some(m) if m.draining() => m.drain(port, pool, batch, now_ns),
            _ => 0,
        };
        if n == 0 {
            n = self.inner.egress(pool, port, batch, now_ns);
        }
        self.slot.count(0, batch.verdicts());
        n
    }

    #[inline]
    fn held(&self) -> u64 {
        self.inner.held() + self.mail.as_ref().map_or(0, WorkerEnd::draining_held)
    }

    fn next_due_ns(&self) -> Option<u64> {
        let old = self.mail.as_ref().and_then(WorkerEnd::draining_due_ns);
        match (self.inner.next_due_ns(), old) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    #[inline]
    fn between_batches(&mut self, ports: &[Box<dyn Port>], stats: &WorkerStats) {
        if let Some(m) = &mut self.mail {
            m.poll(&mut self.inner.0, |snap| fill_snapshot(snap, ports, stats));
        }
    }
}

/// Adds `b`'s per-stage counters into `a` (same pipeline, so the same stage order).
pub fn add_stage_stats(a: &mut Vec<(String, StageStats)>, b: &[(String, StageStats)]) {
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

/// The final counters as text: the total, per port, per worker, and the traffic manager's
/// queues when the pipeline has one. `stages` formats the per-stage table.
pub fn render_report(
    r: &Report,
    names: &[String],
    secs: f64,
    ended_by: &str,
    stages: impl Fn(&[(String, StageStats)]) -> String,
) -> String {
    let total = r.total();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "stopped by {ended_by} after {secs:.2} s: rx {} tx {} dropped {} tx_dropped {} unfinished {} ({:.3} Mpps rx average)",
        total.rx_pkts,
        total.tx_pkts,
        total.dropped,
        total.tx_dropped,
        total.unfinished,
        total.rx_pkts as f64 / secs.max(1e-9) / 1e6
    );
    let _ = writeln!(
        o,
        "{:<4} {:<12} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10} {:>8}",
        "id", "port", "rx_pkts", "rx_bytes", "rx_drop", "tx_pkts", "tx_bytes", "tx_drop", "errors"
    );
    for (i, (_, st)) in r.port_totals().iter().enumerate() {
        let name = names.get(i).map_or("?", String::as_str);
        let _ = writeln!(
            o,
            "{i:<4} {name:<12} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10} {:>8}",
            st.rx_pkts, st.rx_bytes, st.rx_dropped, st.tx_pkts, st.tx_bytes, st.tx_dropped, st.errors
        );
    }
    let mut all = Vec::new();
    for w in &r.workers {
        let s = &w.stats;
        let core = w.core.map_or_else(|| "-".to_string(), |c| c.to_string());
        let _ = writeln!(
            o,
            "worker {} (core {core}): rx {} tx {} tx_dropped {} dropped {} unfinished {} batches {} polls {} idle {}",
            w.worker, s.rx_pkts, s.tx_pkts, s.tx_dropped, s.dropped, s.unfinished, s.batches, s.polls, s.idle_polls
        );
        add_stage_stats(&mut all, &w.extra.stages);
    }
    let _ = writeln!(o, "{}", stages(&all));
    let snaps: Vec<WorkerSnapshot> = r.workers.iter().map(|w| w.extra.clone()).collect();
    let tm = fastpath_control::metrics::Counters::sum(&snaps);
    if !tm.queues.is_empty() || total.queued > 0 {
        // Losses the worker names: the tx ring (tx_dropped above), the queues (refused by
        // reason below) and what the shapers still held when the run stopped.
        let held: u64 = tm.queues.iter().map(|q| q.occ_pkts).sum();
        let _ = writeln!(o, "traffic manager: queued {}, still held by the shapers at exit {held} (freed)", total.queued);
        o.push_str(&tm.render_queues());
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn l2fwd() -> Pipeline {
        let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/l2fwd.toml");
        let mut p = fastpath_pipeline::compile_file(std::path::Path::new(spec)).unwrap().instantiate();
        p.load_entries("e", "table port_pair add 0 => forward(1)\ntable port_pair add 1 => forward(0)\n").unwrap();
        p
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
        assert_eq!(a[0].1.drops[fastpath_packet::DropReason::ALL[1] as usize], 4);
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
    fn start_refuses_a_bad_spec_before_any_port_opens_and_a_missing_interface_ends_the_run_with_its_name() {
        let spec = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/l2fwd.toml"));
        let port = |iface: &str| PortSpec::AfPacket { name: "p0".into(), iface: iface.into() };
        let opts = Options { pin: false, ..Options::default() };
        let e = Dataplane::start(PathBuf::from("/nonexistent/spec.toml"), vec![], vec![port("lo")], opts.clone()).err().unwrap();
        assert!(e.contains("spec.toml"), "{e}");
        let e = Dataplane::start(spec.clone(), vec![], vec![], opts.clone()).err().unwrap();
        assert!(e.contains("no ports"), "{e}");
        let e = Dataplane::start(spec.clone(), vec![], vec![port("lo")], Options { workers: 0, ..opts.clone() }).err().unwrap();
        assert!(e.contains("worker"), "{e}");
        // An interface that does not exist: the start returns, and wait names the port.
        let mut dp = Dataplane::start(spec, vec![], vec![port("fp-no-such-if0")], opts).unwrap();
        let served = Arc::new(AtomicBool::new(false));
        let s = served.clone();
        dp.serve("probe", move |ctl, done| {
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
            // The control plane is usable from a front end: the shadow has the spec's tables.
            assert!(ctl.lock().unwrap().shadow().table("port_pair").is_some());
            s.store(true, Ordering::SeqCst);
        })
        .unwrap();
        let e = dp.wait().err().unwrap();
        assert!(e.contains("port p0") && e.contains("fp-no-such-if0"), "{e}");
        assert!(served.load(Ordering::SeqCst), "the front end ran and was joined");
    }

    /// The calling thread's scheduling policy and real-time priority (`/proc/thread-self/stat`
    /// fields 40 and 41).
    fn policy() -> (u32, u32) {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after.split_whitespace().collect();
        // Fields from 3 on: rt_priority is field 40, policy 41.
        (f[41 - 3].parse().unwrap(), f[40 - 3].parse().unwrap())
    }

    /// With `control_rt`, a front end's thread is SCHED_FIFO and so are the threads it starts
    /// (connection threads); the control plane's background builds go back to SCHED_OTHER.
    #[test]
    fn control_rt_makes_front_end_threads_real_time_and_background_builds_ordinary() {
        if !fastpath_io::sys::is_root() {
            eprintln!("skipped: setting a real-time policy needs root");
            assert!(std::env::var_os("CI").is_none(), "CI runs this test as root");
            return;
        }
        let spec = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../pipelines/l2fwd.toml"));
        let port = PortSpec::AfPacket { name: "p0".into(), iface: "fp-no-such-if1".into() };
        let opts = Options { pin: false, control_rt: Some(3), ..Options::default() };
        let mut dp = Dataplane::start(spec, vec![], vec![port], opts).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        dp.serve("rt-probe", move |ctl, _| {
            let child = std::thread::spawn(policy).join().unwrap();
            // What Control::start_folds runs first on a build thread (set by the runtime).
            let built = std::thread::spawn(|| {
                let _ = fastpath_io::sys::set_normal();
                policy()
            })
            .join()
            .unwrap();
            let _ = tx.send((policy(), child, built, ctl.lock().is_ok()));
        })
        .unwrap();
        let (me, child, built, locked) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let _ = dp.wait();
        assert_eq!(me, (1, 3), "the front end's thread: SCHED_FIFO at 3");
        assert_eq!(child, (1, 3), "a thread it starts inherits it");
        assert_eq!(built.0, 0, "a background build is SCHED_OTHER again");
        assert!(locked);
    }
}
