//! CPU load per core, of the machine and of a DUT's threads, sampled from `/proc` at fixed
//! intervals while a TCP test runs.
//!
//! ```text
//!  /proc/stat            cpuN user nice system idle iowait irq softirq steal …  (USER_HZ ticks)
//!      busy = all − idle − iowait        softirq = irq + softirq
//!  /proc/PID/task/TID/stat   … utime(14) stime(15) … processor(39)
//!      a thread's ticks since the last sample go to the core it last ran on
//! ```
//!
//! Figures are in percent of one core, so two busy cores are 200 % for the machine. The kernel
//! DUTs (the bridge, the XDP datapath) have no thread of their own: their work is softirq time
//! on whatever core received, which the per-core softirq figure shows.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

/// Ticks per second of the `/proc` counters (`USER_HZ`, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// One core's (or the machine's) counters from a `/proc/stat` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreTicks {
    /// Busy ticks: everything but idle and iowait.
    pub busy: u64,
    /// All ticks.
    pub total: u64,
    /// Interrupt and softirq ticks (where a kernel datapath's work is counted).
    pub softirq: u64,
}

/// Parses `/proc/stat`: the machine (`cpu`) first, then `cpu0`, `cpu1`, … in order. Lines that
/// do not parse are left out.
pub fn parse_proc_stat(text: &str) -> Vec<CoreTicks> {
    text.lines()
        .filter(|l| l.starts_with("cpu"))
        .filter_map(|l| {
            let v: Vec<u64> = l.split_whitespace().skip(1).map_while(|x| x.parse().ok()).collect();
            if v.len() < 7 {
                return None;
            }
            // user nice system idle iowait irq softirq steal (guest time is inside user).
            let total: u64 = v.iter().take(8).sum();
            let idle = v[3] + v[4];
            Some(CoreTicks { busy: total.saturating_sub(idle), total, softirq: v[5] + v[6] })
        })
        .collect()
}

/// A thread's user + system ticks and the core it last ran on, from its `stat` line.
pub fn parse_task_stat(text: &str) -> Option<(u64, usize)> {
    // The command name (field 2) may hold spaces and parentheses: fields after it start after
    // the last ')'. Field k (1-based) is then at index k − 3.
    let rest = text.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |k: usize| f.get(k - 3).and_then(|x| x.parse::<u64>().ok());
    Some((n(14)? + n(15)?, n(39)? as usize))
}

/// One sample: the load over the interval that ends at `t_s`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CpuSample {
    /// Seconds since sampling started.
    pub t_s: f64,
    /// The machine, % of one core (all cores summed).
    pub machine_pct: f64,
    /// Each core, %.
    pub core_pct: Vec<f64>,
    /// Each core's interrupt + softirq time, %.
    pub core_softirq_pct: Vec<f64>,
    /// The DUT's threads, % of one core (summed).
    pub dut_pct: f64,
    /// The DUT's threads per core they ran on, %.
    pub dut_core_pct: Vec<f64>,
}

/// Takes [`CpuSample`]s of the machine and of the threads of `pids` (every task of each).
#[derive(Debug)]
pub struct Sampler {
    pids: Vec<u32>,
    cores: Vec<CoreTicks>,
    threads: BTreeMap<(u32, u32), u64>,
    t0: Instant,
    last: Instant,
}

fn read_cores() -> Vec<CoreTicks> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").unwrap_or_default())
}

/// (pid, tid) → (ticks, core) of every task of `pids` that can be read now.
fn read_threads(pids: &[u32]) -> BTreeMap<(u32, u32), (u64, usize)> {
    let mut out = BTreeMap::new();
    for &pid in pids {
        let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for e in rd.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            if let Some(x) = std::fs::read_to_string(e.path().join("stat")).ok().as_deref().and_then(parse_task_stat) {
                out.insert((pid, tid), x);
            }
        }
    }
    out
}

impl Sampler {
    /// Starts sampling: the counters now are the base of the first interval.
    pub fn start(pids: &[u32]) -> Sampler {
        let now = Instant::now();
        let threads = read_threads(pids).into_iter().map(|(k, (t, _))| (k, t)).collect();
        Sampler { pids: pids.to_vec(), cores: read_cores(), threads, t0: now, last: now }
    }

    /// The load since the previous sample (or the start).
    pub fn sample(&mut self) -> CpuSample {
        let now = Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64().max(1e-3);
        let cores = read_cores();
        let pct = |a: u64, b: u64, tot: u64| if tot > 0 { a.saturating_sub(b) as f64 / tot as f64 * 100.0 } else { 0.0 };
        let mut s = CpuSample { t_s: now.duration_since(self.t0).as_secs_f64(), ..CpuSample::default() };
        let ncores = cores.len().saturating_sub(1);
        for (i, (c, p)) in cores.iter().zip(self.cores.iter()).enumerate() {
            let tot = c.total.saturating_sub(p.total);
            if i == 0 {
                s.machine_pct = pct(c.busy, p.busy, tot) * ncores as f64;
            } else {
                s.core_pct.push(pct(c.busy, p.busy, tot));
                s.core_softirq_pct.push(pct(c.softirq, p.softirq, tot));
            }
        }
        s.dut_core_pct = vec![0.0; ncores];
        let threads = read_threads(&self.pids);
        for (k, &(ticks, core)) in &threads {
            let d = ticks.saturating_sub(self.threads.get(k).copied().unwrap_or(ticks)) as f64 / USER_HZ / dt * 100.0;
            s.dut_pct += d;
            if let Some(x) = s.dut_core_pct.get_mut(core) {
                *x += d;
            }
        }
        self.threads = threads.into_iter().map(|(k, (t, _))| (k, t)).collect();
        self.cores = cores;
        self.last = now;
        s
    }
}

/// The mean of each column of `rows` (rows of unequal length: missing values count as absent).
pub fn mean_columns(rows: impl Iterator<Item = Vec<f64>>) -> Vec<f64> {
    let mut sum: Vec<f64> = Vec::new();
    let mut n: Vec<u32> = Vec::new();
    for r in rows {
        if r.len() > sum.len() {
            sum.resize(r.len(), 0.0);
            n.resize(r.len(), 0);
        }
        for (i, x) in r.into_iter().enumerate() {
            sum[i] += x;
            n[i] += 1;
        }
    }
    sum.into_iter().zip(n).map(|(s, n)| if n > 0 { s / f64::from(n) } else { 0.0 }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_lines_give_busy_total_and_softirq() {
        let text = "cpu  100 5 50 800 10 3 7 0 0 0\n\
                    cpu0 60 5 20 400 5 2 4 0 0 0\n\
                    cpu1 40 0 30 400 5 1 3 0 0 0\n\
                    intr 12345 0 0\n\
                    ctxt 999\n";
        let v = parse_proc_stat(text);
        assert_eq!(v.len(), 3);
        assert_eq!(v[0], CoreTicks { busy: 165, total: 975, softirq: 10 });
        assert_eq!(v[1], CoreTicks { busy: 91, total: 496, softirq: 6 });
        assert_eq!(v[2], CoreTicks { busy: 74, total: 479, softirq: 4 });
        assert!(parse_proc_stat("cpu 1 2\n").is_empty(), "too few fields");
    }

    #[test]
    fn task_stat_takes_times_and_processor_after_the_command_name() {
        // A real line of a thread named "fp worker) 0" (parentheses and spaces in the name).
        let line = "4242 (fp worker) 0) R 1 4242 4242 0 -1 4194368 120 0 0 0 731 52 0 0 20 0 3 0 \
                    1000 123456789 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(parse_task_stat(line), Some((783, 1)));
        assert_eq!(parse_task_stat("12 (x) R 1 2"), None);
        assert_eq!(parse_task_stat("garbage"), None);
    }

    #[test]
    fn sampler_sees_its_own_thread_burn_cpu() {
        let mut s = Sampler::start(&[std::process::id()]);
        let t = Instant::now();
        let mut x = 1u64;
        while t.elapsed().as_millis() < 300 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        }
        std::hint::black_box(x);
        let c = s.sample();
        assert!(!c.core_pct.is_empty() && c.core_pct.len() == c.dut_core_pct.len(), "{c:?}");
        // 300 ms of spinning is ~30 ticks; allow for a busy machine taking our core away.
        assert!(c.dut_pct > 10.0, "our own thread's CPU was not seen: {c:?}");
        assert!(c.machine_pct >= c.dut_pct * 0.5, "{c:?}");
        assert!((c.dut_core_pct.iter().sum::<f64>() - c.dut_pct).abs() < 1e-6, "{c:?}");
    }

    #[test]
    fn column_means() {
        assert_eq!(mean_columns(vec![vec![1.0, 2.0], vec![3.0, 4.0, 6.0]].into_iter()), vec![2.0, 3.0, 6.0]);
        assert!(mean_columns(std::iter::empty()).is_empty());
    }
}
