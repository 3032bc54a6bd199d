//! The multi-core runtime: one run-to-completion [`Worker`] per core, flows spread by hash.
//!
//! ```text
//!            NIC / veth RSS (AF_XDP queue w)  or  PACKET_FANOUT_HASH group (AF_PACKET)
//!                 │ flow hash picks one worker; a flow always lands on the same one
//!      ┌──────────┼──────────────────────┐
//!   worker 0 (core 0)               worker 1 (core 1)          ... one thread per core, pinned
//!   own Pool, own port queues,      own Pool, own port queues,
//!   own Processor                   own Processor
//!   loop { rx burst ▸ process ▸ tx burst } until the shared stop flag is set, then drain
//! ```
//! Nothing is shared between workers on the packet path: each has its pool (its own AF_XDP
//! UMEM), its sockets (one AF_XDP socket per queue, or one AF_PACKET socket per fanout member)
//! and its processor instance; the only shared state is the stop flag, read once per poll.
//! This is the DPDK/VPP model (RSS spreading, per-lcore run to completion). A worker is built
//! on its own thread, after pinning and after joining the namespace, so its memory is first
//! touched on its core and its sockets are opened in the right network namespace.
//!
//! SIGINT/SIGTERM set the stop flag ([`stop_on_signals`]); workers then poll until their ports
//! stay idle (drain), flush, and report their counters, which [`MultiReport`] sums and prints
//! per port and per worker.
//!
//! Thread: `run` is called from the control thread and returns when every worker stopped.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fastpath_packet::Pool;

use crate::af_packet::{AfPacketConfig, PacketPort, PACKET_FANOUT_HASH};
use crate::af_xdp::{XdpConfig, XdpPort};
use crate::port::{Port, PortStats};
use crate::signals::SecondSignal;
use crate::sys;
use crate::worker::{Processor, Worker, WorkerStats};

/// How to run the workers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiConfig {
    /// Number of worker threads.
    pub workers: usize,
    /// Pin worker `w` to core `(first_core + w) % cores`.
    pub pin: bool,
    /// First core to pin to.
    pub first_core: usize,
    /// CPUs to spread the workers over (0: those this thread may run on when [`run`] starts).
    /// Set it when the caller narrows its own affinity first ([`MultiConfig::pin_housekeeping`]).
    pub cores: usize,
    /// Network namespace file each worker joins before building its ports.
    pub netns: Option<PathBuf>,
    /// Sleep this long after 1024 consecutive idle polls (0: spin, the data-plane default;
    /// tests on small machines sleep so the traffic generator gets a core).
    pub idle_sleep_us: u64,
    /// After stop, consecutive idle polls that end the drain.
    pub drain_idle_polls: u32,
    /// Longest the drain may take.
    pub drain_max: Duration,
}

impl Default for MultiConfig {
    fn default() -> Self {
        MultiConfig {
            workers: 1,
            pin: true,
            first_core: 0,
            cores: 0,
            netns: None,
            idle_sleep_us: 0,
            drain_idle_polls: 64,
            drain_max: Duration::from_millis(500),
        }
    }
}

impl MultiConfig {
    /// The CPU count the workers are spread over: [`MultiConfig::cores`], else the CPUs the
    /// calling thread may run on.
    pub fn cpu_count(&self) -> usize {
        if self.cores > 0 {
            self.cores
        } else {
            sys::available_cores()
        }
    }

    /// The cores the workers are pinned to (empty when they are not pinned).
    pub fn worker_cores(&self) -> Vec<usize> {
        if !self.pin {
            return Vec::new();
        }
        let n = self.cpu_count().max(1);
        let mut v: Vec<usize> = (0..self.workers).map(|w| (self.first_core + w) % n).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The cores no worker is pinned to: where the process's other threads (control, display)
    /// and the kernel's own work should run, as DPDK's main lcore and VPP's main core do.
    pub fn housekeeping_cores(&self) -> Vec<usize> {
        let busy = self.worker_cores();
        (0..self.cpu_count()).filter(|c| !busy.contains(c)).collect()
    }

    /// Pins the calling thread (and so the threads it starts from now on) to
    /// [`MultiConfig::housekeeping_cores`], and fixes [`MultiConfig::cores`] first so the
    /// workers still spread over every CPU. Returns the cores, or `None` when there is no core
    /// to spare (workers unpinned, or one on every core).
    ///
    /// # Errors
    /// The `sched_setaffinity` error.
    pub fn pin_housekeeping(&mut self) -> std::io::Result<Option<Vec<usize>>> {
        self.cores = self.cpu_count();
        let spare = self.housekeeping_cores();
        if !self.pin || spare.is_empty() {
            return Ok(None);
        }
        sys::pin_to_cores(&spare)?;
        Ok(Some(spare))
    }
}

/// A port to open once per worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortSpec {
    /// AF_XDP on `iface`; worker `w` uses queue `w`.
    AfXdp {
        /// Interface name.
        iface: String,
        /// Socket settings.
        cfg: XdpConfig,
    },
    /// AF_PACKET on `iface`; with more than one worker, every worker's socket joins fanout
    /// group `fanout_group` in hash mode.
    AfPacket {
        /// Interface name.
        iface: String,
        /// Socket settings (its `fanout` is set from `fanout_group`).
        cfg: AfPacketConfig,
        /// Fanout group id (unique per interface in the system).
        fanout_group: u16,
    },
}

/// Opens worker `worker`'s share of `specs` (port id = index in `specs`).
///
/// # Errors
/// The first port that fails, with its message (which says what to try).
pub fn open_worker_ports(specs: &[PortSpec], worker: usize, workers: usize, pool: &mut Pool) -> Result<Vec<Box<dyn Port>>, String> {
    let mut ports: Vec<Box<dyn Port>> = Vec::with_capacity(specs.len());
    for s in specs {
        match s {
            PortSpec::AfXdp { iface, cfg } => {
                ports.push(Box::new(XdpPort::open(iface, worker as u32, cfg, pool).map_err(|e| e.to_string())?));
            }
            PortSpec::AfPacket { iface, cfg, fanout_group } => {
                let cfg = AfPacketConfig { fanout: if workers > 1 { Some((*fanout_group, PACKET_FANOUT_HASH)) } else { None }, ..*cfg };
                ports.push(Box::new(PacketPort::open(iface, &cfg).map_err(|e| e.to_string())?));
            }
        }
    }
    Ok(ports)
}

/// Installs SIGINT/SIGTERM handlers and returns the stop flag they set (a second signal exits
/// with status 130): [`crate::signals`] with [`SecondSignal::Exit`].
///
/// # Errors
/// When the handlers cannot be installed.
pub fn stop_on_signals() -> std::io::Result<&'static AtomicBool> {
    crate::signals::install_stop_signals(SecondSignal::Exit)
}

/// Why the runtime could not run.
#[derive(Debug, thiserror::Error)]
pub enum MultiError {
    /// A worker could not be built (a port failed to open, ...).
    #[error("worker {worker}: {msg}")]
    Setup {
        /// Worker index.
        worker: usize,
        /// What failed.
        msg: String,
    },
    /// A worker thread panicked.
    #[error("worker {worker} panicked")]
    Panicked {
        /// Worker index.
        worker: usize,
    },
    /// Zero workers asked for.
    #[error("at least one worker is needed")]
    NoWorkers,
}

/// One worker's final counters.
#[derive(Clone, Debug)]
pub struct WorkerReport<R> {
    /// Worker index.
    pub worker: usize,
    /// Core it was pinned to, if pinned.
    pub core: Option<usize>,
    /// Loop counters.
    pub stats: WorkerStats,
    /// Each port's counters, by port id.
    pub ports: Vec<(String, PortStats)>,
    /// What the `finish` callback returned (e.g. the pipeline's per-stage counters).
    pub extra: R,
}

/// Every worker's final counters.
#[derive(Clone, Debug)]
pub struct MultiReport<R> {
    /// One entry per worker, by index.
    pub workers: Vec<WorkerReport<R>>,
}

fn add_worker_stats(a: &mut WorkerStats, b: &WorkerStats) {
    a.polls += b.polls;
    a.idle_polls += b.idle_polls;
    a.batches += b.batches;
    a.rx_pkts += b.rx_pkts;
    a.tx_pkts += b.tx_pkts;
    a.tx_dropped += b.tx_dropped;
    a.tx_bad_port += b.tx_bad_port;
    a.dropped += b.dropped;
    a.punted += b.punted;
    a.punt_dropped += b.punt_dropped;
    a.unfinished += b.unfinished;
    a.queued += b.queued;
    a.egress_batches += b.egress_batches;
    a.flush_errors += b.flush_errors;
    a.injected += b.injected;
    a.inject_refused += b.inject_refused;
}

fn add_port_stats(a: &mut PortStats, b: &PortStats) {
    a.rx_pkts += b.rx_pkts;
    a.rx_bytes += b.rx_bytes;
    a.rx_dropped += b.rx_dropped;
    a.tx_pkts += b.tx_pkts;
    a.tx_bytes += b.tx_bytes;
    a.tx_dropped += b.tx_dropped;
    a.errors += b.errors;
}

impl<R> MultiReport<R> {
    /// Worker counters summed over workers.
    pub fn total(&self) -> WorkerStats {
        let mut t = WorkerStats::default();
        for w in &self.workers {
            add_worker_stats(&mut t, &w.stats);
        }
        t
    }

    /// Port counters summed over workers, by port id.
    pub fn port_totals(&self) -> Vec<(String, PortStats)> {
        let mut out: Vec<(String, PortStats)> = Vec::new();
        for w in &self.workers {
            for (i, (name, st)) in w.ports.iter().enumerate() {
                if out.len() <= i {
                    out.push((name.clone(), PortStats::default()));
                }
                add_port_stats(&mut out[i].1, st);
            }
        }
        out
    }
}

impl<R: fmt::Display> fmt::Display for MultiReport<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<12} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10} {:>8}",
            "port", "rx_pkts", "rx_bytes", "rx_drop", "tx_pkts", "tx_bytes", "tx_drop", "errors"
        )?;
        for (name, s) in self.port_totals() {
            writeln!(
                f,
                "{name:<12} {:>12} {:>14} {:>10} {:>12} {:>14} {:>10} {:>8}",
                s.rx_pkts, s.rx_bytes, s.rx_dropped, s.tx_pkts, s.tx_bytes, s.tx_dropped, s.errors
            )?;
        }
        for w in &self.workers {
            let s = &w.stats;
            let core = w.core.map_or_else(|| "-".to_string(), |c| c.to_string());
            writeln!(
                f,
                "worker {} (core {core}): rx {} tx {} tx_dropped {} dropped {} punted {} unfinished {} batches {} polls {} idle {}",
                w.worker, s.rx_pkts, s.tx_pkts, s.tx_dropped, s.dropped, s.punted, s.unfinished, s.batches, s.polls, s.idle_polls
            )?;
            let extra = w.extra.to_string();
            if !extra.is_empty() {
                writeln!(f, "{extra}")?;
            }
        }
        Ok(())
    }
}

/// Runs `cfg.workers` workers until `stop` is set, then drains them and returns their counters.
///
/// On each worker thread, in order: pin to its core, join `cfg.netns`, call `make(w)` to build
/// the worker (open ports with [`open_worker_ports`], build the processor), loop, drain, and
/// call `finish(w, &worker)` for the processor's own counters. If any worker fails to build,
/// the others stop and the first error is returned.
///
/// # Errors
/// [`MultiError`]: a worker could not be built, or panicked.
pub fn run<P, M, F, R>(cfg: &MultiConfig, stop: &AtomicBool, make: M, finish: F) -> Result<MultiReport<R>, MultiError>
where
    P: Processor,
    M: Fn(usize) -> Result<Worker<P>, String> + Sync,
    F: Fn(usize, &Worker<P>) -> R + Sync,
    R: Send,
{
    if cfg.workers == 0 {
        return Err(MultiError::NoWorkers);
    }
    let abort = AtomicBool::new(false);
    let cores = cfg.cpu_count();
    let results: Vec<Result<WorkerReport<R>, MultiError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.workers)
            .map(|w| {
                let (make, finish, abort) = (&make, &finish, &abort);
                let h = std::thread::Builder::new().name(format!("fp-worker-{w}")).spawn_scoped(s, move || {
                    let r = worker_main(cfg, w, cores, stop, abort, make, finish);
                    if r.is_err() {
                        abort.store(true, Ordering::Relaxed);
                    }
                    r
                });
                (w, h)
            })
            .collect();
        handles
            .into_iter()
            .map(|(w, h)| match h {
                Ok(h) => h.join().unwrap_or(Err(MultiError::Panicked { worker: w })),
                Err(e) => Err(MultiError::Setup { worker: w, msg: format!("spawning the thread: {e}") }),
            })
            .collect()
    });
    let mut workers = Vec::with_capacity(results.len());
    let mut first_err = None;
    for r in results {
        match r {
            Ok(rep) => workers.push(rep),
            Err(e) => {
                // A setup error explains the others' early stop: report the first real one.
                if first_err.is_none() || matches!(first_err, Some(MultiError::Panicked { .. })) {
                    first_err = Some(e);
                }
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(MultiReport { workers }),
    }
}

fn worker_main<P, M, F, R>(
    cfg: &MultiConfig,
    w: usize,
    cores: usize,
    stop: &AtomicBool,
    abort: &AtomicBool,
    make: &M,
    finish: &F,
) -> Result<WorkerReport<R>, MultiError>
where
    P: Processor,
    M: Fn(usize) -> Result<Worker<P>, String>,
    F: Fn(usize, &Worker<P>) -> R,
{
    let setup = |msg: String| MultiError::Setup { worker: w, msg };
    let core = if cfg.pin {
        let c = (cfg.first_core + w) % cores.max(1);
        sys::pin_to_core(c).map_err(|e| setup(format!("pinning to core {c}: {e}")))?;
        Some(c)
    } else {
        None
    };
    if let Some(ns) = &cfg.netns {
        sys::enter_netns(ns).map_err(|e| setup(format!("joining network namespace {}: {e}", ns.display())))?;
    }
    let mut worker = make(w).map_err(setup)?;
    let mut idle = 0u32;
    while !stop.load(Ordering::Relaxed) && !abort.load(Ordering::Relaxed) {
        if worker.poll_once() > 0 {
            idle = 0;
            continue;
        }
        worker.flush();
        idle = idle.saturating_add(1);
        if cfg.idle_sleep_us > 0 && idle >= 1024 {
            // Not past the moment a shaped packet may leave.
            let d = worker.idle_sleep(Duration::from_micros(cfg.idle_sleep_us));
            if !d.is_zero() {
                std::thread::sleep(d);
            }
        }
    }
    // Drain: keep polling until the ports stay quiet, bounded in time.
    let end = Instant::now() + cfg.drain_max;
    let mut quiet = 0;
    while quiet < cfg.drain_idle_polls && Instant::now() < end {
        if worker.poll_once() > 0 {
            quiet = 0;
        } else {
            worker.flush();
            quiet += 1;
        }
    }
    worker.flush();
    let ports = worker.ports().iter().map(|p| (p.name().to_string(), p.stats())).collect();
    let extra = finish(w, &worker);
    Ok(WorkerReport { worker: w, core, stats: worker.stats(), ports, extra })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::TxAll;

    #[test]
    fn zero_workers_is_an_error() {
        let stop = AtomicBool::new(true);
        let r = run(&MultiConfig { workers: 0, ..MultiConfig::default() }, &stop, |_| Err::<Worker<TxAll>, _>("x".into()), |_, _| ());
        assert!(matches!(r, Err(MultiError::NoWorkers)));
    }

    #[test]
    fn setup_error_names_the_worker_and_stops_the_others() {
        let stop = AtomicBool::new(false);
        let cfg = MultiConfig { workers: 2, pin: false, ..MultiConfig::default() };
        let r = run(
            &cfg,
            &stop,
            |w| if w == 1 { Err("no such interface `x`".to_string()) } else { Ok(Worker::new(Pool::new(8), Vec::new(), TxAll(0))) },
            |_, _| (),
        );
        let e = r.unwrap_err();
        assert_eq!(e.to_string(), "worker 1: no such interface `x`");
    }

    #[test]
    fn worker_and_housekeeping_cores_split_the_machine() {
        let cfg = MultiConfig { workers: 2, first_core: 1, cores: 4, ..MultiConfig::default() };
        assert_eq!(cfg.worker_cores(), vec![1, 2]);
        assert_eq!(cfg.housekeeping_cores(), vec![0, 3]);
        // Wrapping around, and more workers than cores: every core busy, none to spare.
        let cfg = MultiConfig { workers: 3, first_core: 1, cores: 2, ..MultiConfig::default() };
        assert_eq!(cfg.worker_cores(), vec![0, 1]);
        assert!(cfg.housekeeping_cores().is_empty());
        // Unpinned workers may run anywhere: every core is a housekeeping core.
        let cfg = MultiConfig { workers: 1, pin: false, cores: 2, ..MultiConfig::default() };
        assert!(cfg.worker_cores().is_empty());
        assert_eq!(cfg.housekeeping_cores(), vec![0, 1]);
    }

    #[test]
    fn pin_housekeeping_keeps_the_caller_off_the_worker_cores() {
        let n = sys::available_cores();
        // On a thread of its own: the affinity it sets must not leak into other tests.
        let (spare, seen) = std::thread::spawn(move || {
            let mut cfg = MultiConfig { workers: 1, first_core: n - 1, ..MultiConfig::default() };
            let spare = cfg.pin_housekeeping().unwrap();
            assert_eq!(cfg.cores, n, "the CPU count is fixed before the caller narrows itself");
            (spare, sys::available_cores())
        })
        .join()
        .unwrap();
        if n == 1 {
            assert_eq!(spare, None);
        } else {
            assert_eq!(spare, Some((0..n - 1).collect::<Vec<_>>()));
            assert_eq!(seen, n - 1);
        }
    }

    #[test]
    fn workers_stop_on_the_flag_and_report() {
        let stop = AtomicBool::new(true);
        let cfg = MultiConfig { workers: 2, pin: true, ..MultiConfig::default() };
        let r = run(&cfg, &stop, |_| Ok(Worker::new(Pool::new(8), Vec::new(), TxAll(0))), |w, _| w * 10).unwrap();
        assert_eq!(r.workers.len(), 2);
        assert_eq!(r.workers[1].extra, 10);
        assert!(r.workers[0].core.is_some());
        assert_eq!(r.total().rx_pkts, 0);
    }

    #[test]
    fn sigterm_sets_the_stop_flag_and_the_workers_drain_and_stop() {
        let stop = stop_on_signals().unwrap();
        assert!(!stop.load(Ordering::SeqCst));
        let cfg = MultiConfig { workers: 2, pin: false, idle_sleep_us: 100, ..MultiConfig::default() };
        let report = std::thread::scope(|s| {
            let rt = s.spawn(|| run(&cfg, stop, |_| Ok(Worker::new(Pool::new(8), Vec::new(), TxAll(0))), |_, _| ()));
            let pid = std::process::id().to_string();
            let status = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
            assert!(status.success());
            rt.join().unwrap()
        });
        assert!(stop.load(Ordering::SeqCst));
        assert_eq!(report.unwrap().workers.len(), 2);
    }

    #[test]
    fn open_worker_ports_reports_the_failing_port() {
        let mut pool = Pool::new(64);
        let specs = [PortSpec::AfPacket { iface: "fp-nonexistent0".into(), cfg: AfPacketConfig::default(), fanout_group: 7 }];
        let e = open_worker_ports(&specs, 0, 2, &mut pool).err().unwrap();
        assert!(e.contains("no such interface `fp-nonexistent0`"), "{e}");
    }
}
