//! TCP incast: `senders` hosts, each on its own port, run `flows_per_sender` TCP transfers
//! each to one receiver on port 0, through the switch's traffic manager.
//!
//! ```text
//!  host 1 ─ flows 0..M ─(link L, RR per packet)─▶ port 1 ┐
//!  host 2 ─ flows M..2M ────────────────────────▶ port 2 ├─▶ TM port 0 ─(link L)─▶ receiver
//!   …                                                    │   class 0, shared or
//!  host N ──────────────────────────────────────▶ port N ┘   static buffer
//!     ▲                                                                   │
//!     └──────────── ACK, one per segment: a fixed delay 2·(84 B / L + prop) ┘
//! ```
//!
//! Events: a flow starts (`Start`), a host's link frees (`HostFree`: the next flow in the
//! host's round robin that its window lets send puts one segment on the wire), a segment
//! reaches the switch (`Arrive`, after serialisation and propagation: TM enqueue, which may
//! drop or mark CE), the egress link frees (`EgressFree`: TM dequeue of one packet; it reaches
//! the receiver one serialisation and one propagation later), an ACK reaches its sender
//! (`Ack`), a retransmission timer may have expired (`Timer`, re-armed lazily: one event per
//! timeout period, not one per ACK). The receiver's work is done when its packet leaves the
//! switch, with the arrival time as its timestamp: the receiver has no other input, so nothing
//! can reorder it.
//!
//! The reverse path does not go through the TM: the receiver's port carries one 84-byte ACK per
//! 1538-byte segment (5.5 % load) and each sender's port only its own ACKs, so no ACK queue
//! ever forms at these rates.

use super::engine::{ser_ps, EventQueue, PS_PER_S};
use super::switch::{BufferModel, SwitchConfig, MIN_FRAME, TCP_FRAME_OVERHEAD, WIRE_OVERHEAD};
use super::tcp::{EcnMode, Receiver, Sender, SenderStats, TcpConfig};
use super::SimError;
use fastpath_packet::PktId;
use fastpath_tm::wred::{ECT0, NOT_ECT};
use fastpath_tm::{Desc, Enq, Tm};
use std::collections::VecDeque;

/// One incast experiment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IncastConfig {
    /// The switch and its links.
    pub switch: SwitchConfig,
    /// The TCP senders.
    pub tcp: TcpConfig,
    /// Sender hosts (1 ≤ N < ports).
    pub senders: u32,
    /// TCP flows per sender host.
    pub flows_per_sender: u32,
    /// Payload bytes each flow transfers (0: without end, until `duration_ps`).
    pub bytes_per_flow: u64,
    /// Virtual time after which the run stops even if transfers are unfinished, ps.
    pub duration_ps: u64,
    /// Flows start at a time drawn uniformly from `0..start_jitter_ps` (seeded).
    pub start_jitter_ps: u64,
    /// After each frame a host's link stays idle for a time drawn uniformly from
    /// `0..=host_gap_ps` (seeded): hosts are not metronomes. Without it, senders of one rate
    /// keep a fixed phase against the egress, and at a full queue the same sender's frames
    /// would arrive just after every departure and be refused every time (drop-tail lockout).
    pub host_gap_ps: u64,
    /// Width of a goodput-over-time bin, ps.
    pub bin_ps: u64,
    /// Seed of the start times.
    pub seed: u64,
}

impl Default for IncastConfig {
    /// 16 senders × 16 flows of 64 MB on the default switch, stop at 10 s, starts within 10 µs,
    /// host gaps up to 25 ns, 10 ms bins.
    fn default() -> IncastConfig {
        IncastConfig {
            switch: SwitchConfig::default(),
            tcp: TcpConfig::default(),
            senders: 16,
            flows_per_sender: 16,
            bytes_per_flow: 64_000_000,
            duration_ps: 10 * PS_PER_S,
            start_jitter_ps: 10_000_000,
            host_gap_ps: 25_000,
            bin_ps: 10_000_000_000,
            seed: 1,
        }
    }
}

/// What one incast run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct IncastResult {
    /// The buffer model.
    pub model: BufferModel,
    /// Sender hosts.
    pub senders: u32,
    /// Flows in all.
    pub flows: u32,
    /// Payload bytes requested in all (0: flows without end).
    pub bytes_total: u64,
    /// Payload bytes delivered in order to the receiver.
    pub delivered_bytes: u64,
    /// When the last byte of the job reached the receiver, ps (`None`: not by the end).
    pub jct_ps: Option<u64>,
    /// The job's bytes ÷ the line rate, ps.
    pub ideal_ps: u64,
    /// Virtual time simulated, ps.
    pub end_ps: u64,
    /// Goodput bin width, ps.
    pub bin_ps: u64,
    /// Payload bytes delivered per bin.
    pub bins: Vec<u64>,
    /// Per flow: its bytes ÷ its completion time (what iperf3 reports at the end), or what it
    /// delivered ÷ the time it ran when unfinished, bits per second.
    pub flow_rates_bps: Vec<f64>,
    /// Per flow: completion time from its start, ps.
    pub fct_ps: Vec<Option<u64>>,
    /// Jain's index of `flow_rates_bps`.
    pub jain: f64,
    /// The senders' counters, summed.
    pub tcp: SenderStats,
    /// Packets the TM dropped.
    pub drops: u64,
    /// Packets the TM marked CE.
    pub marks: u64,
    /// Highest occupancy of the receiver's queue, bytes.
    pub hwm_bytes: u64,
    /// Events processed.
    pub events: u64,
}

impl IncastResult {
    /// Job time: the completion time, or the time simulated.
    pub fn job_ps(&self) -> u64 {
        self.jct_ps.unwrap_or(self.end_ps).max(1)
    }

    /// Delivered bytes ÷ job time, Gbit/s.
    pub fn mean_gbps(&self) -> f64 {
        self.delivered_bytes as f64 * 8.0 / (self.job_ps() as f64 / PS_PER_S as f64) / 1e9
    }

    fn central_bins_gbps(&self) -> Vec<f64> {
        let job = self.job_ps();
        let (lo, hi) = (job / 10, job - job / 10);
        let scale = 8.0 / (self.bin_ps as f64 / PS_PER_S as f64) / 1e9;
        self.bins
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                let (a, b) = (*i as u64 * self.bin_ps, (*i as u64 + 1) * self.bin_ps);
                a >= lo && b <= hi
            })
            .map(|(_, &b)| b as f64 * scale)
            .collect()
    }

    /// Median goodput of the bins between 10 % and 90 % of the job, Gbit/s (the level a
    /// throughput-over-time chart shows).
    pub fn steady_gbps(&self) -> f64 {
        let mut v = self.central_bins_gbps();
        if v.is_empty() {
            return self.mean_gbps();
        }
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    /// Lowest bin between 10 % and 90 % of the job, Gbit/s.
    pub fn min_gbps(&self) -> f64 {
        self.central_bins_gbps().into_iter().reduce(f64::min).unwrap_or_else(|| self.mean_gbps())
    }

    /// Goodput over time: (ms, Gbit/s) per bin, at most `max_points` points (neighbouring bins
    /// merged).
    pub fn series_gbps(&self, max_points: usize) -> Vec<(f64, f64)> {
        let k = self.bins.len().div_ceil(max_points.max(1)).max(1);
        let w = self.bin_ps * k as u64;
        self.bins
            .chunks(k)
            .enumerate()
            .map(|(i, c)| {
                let t_ms = (i as u64 * w) as f64 / 1e9;
                let gbps = c.iter().sum::<u64>() as f64 * 8.0 / (w as f64 / PS_PER_S as f64) / 1e9;
                (t_ms, gbps)
            })
            .collect()
    }
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Start(u32),
    HostFree(u32),
    Arrive(u32),
    EgressFree,
    Ack { flow: u32, ack: u32, seq: u32, ece: bool },
    Timer(u32),
}

#[derive(Clone, Copy, Debug, Default)]
struct Pkt {
    flow: u32,
    seq: u32,
    len: u32,
    ce: bool,
}

struct Flow {
    host: u32,
    tx: Sender,
    rx: Receiver,
    in_ready: bool,
    timer_at: Option<u64>,
    start_ps: u64,
    done_ps: Option<u64>,
    delivered: u64,
}

struct Host {
    busy: bool,
    ready: VecDeque<u32>,
}

struct Sim<'a> {
    cfg: &'a IncastConfig,
    q: EventQueue<Ev>,
    tm: Tm,
    flows: Vec<Flow>,
    hosts: Vec<Host>,
    pkts: Vec<Pkt>,
    free: Vec<u32>,
    egress_busy: bool,
    ecn: u8,
    ack_path_ps: u64,
    remaining: u32,
    rng: fastpath_tm::wred::Rng,
    bins: Vec<u64>,
    delivered: u64,
}

/// Runs one incast experiment with `model`. `progress` gets a line now and then on long runs.
///
/// # Errors
/// A configuration the switch or the TM refuses.
pub fn run(cfg: &IncastConfig, model: BufferModel, progress: &mut dyn FnMut(&str)) -> Result<IncastResult, SimError> {
    let sw = &cfg.switch;
    if cfg.senders == 0 || cfg.senders >= sw.ports {
        return Err(SimError::Config(format!(
            "senders must be 1..{} (one port each, port 0 is the receiver's), not {}",
            sw.ports, cfg.senders
        )));
    }
    if cfg.flows_per_sender == 0 {
        return Err(SimError::Config("flows per sender must be at least 1".into()));
    }
    if sw.rate_bps == 0 || cfg.bin_ps == 0 || cfg.tcp.mss_bytes == 0 {
        return Err(SimError::Config("rate, bin width and MSS must be above 0".into()));
    }
    let mut swc = *sw;
    swc.min_frame_bytes = MIN_FRAME;
    let tm = Tm::build(&swc.tm_config(model)).map_err(SimError::Tm)?;
    let full_wire = u64::from(cfg.tcp.mss_bytes + TCP_FRAME_OVERHEAD + WIRE_OVERHEAD);
    let ack_path_ps = 2 * (ser_ps(u64::from(MIN_FRAME + WIRE_OVERHEAD), sw.rate_bps) + sw.prop_ps);
    let base_rtt_ps = 2 * (ser_ps(full_wire, sw.rate_bps) + sw.prop_ps) + ack_path_ps;
    let nflows = cfg.senders * cfg.flows_per_sender;
    let mut rng = fastpath_tm::wred::Rng::new(cfg.seed);
    let mut q = EventQueue::new();
    let flows: Vec<Flow> = (0..nflows)
        .map(|f| {
            let start = if cfg.start_jitter_ps > 0 { rng.next_u64() % cfg.start_jitter_ps } else { 0 };
            q.schedule(start, Ev::Start(f));
            Flow {
                host: f / cfg.flows_per_sender,
                tx: Sender::new(&cfg.tcp, cfg.bytes_per_flow, base_rtt_ps),
                rx: Receiver::new(),
                in_ready: false,
                timer_at: None,
                start_ps: start,
                done_ps: None,
                delivered: 0,
            }
        })
        .collect();
    let mut sim = Sim {
        cfg,
        q,
        tm,
        flows,
        hosts: (0..cfg.senders).map(|_| Host { busy: false, ready: VecDeque::new() }).collect(),
        pkts: Vec::new(),
        free: Vec::new(),
        egress_busy: false,
        ecn: if cfg.tcp.ecn == EcnMode::Off { NOT_ECT } else { ECT0 },
        ack_path_ps,
        remaining: if cfg.bytes_per_flow == 0 { u32::MAX } else { nflows },
        rng,
        bins: Vec::new(),
        delivered: 0,
    };
    let bytes_total = cfg.bytes_per_flow * u64::from(nflows);
    let mut next_progress = 4_000_000u64;
    while let Some((now, ev)) = sim.q.pop() {
        if now > cfg.duration_ps {
            break;
        }
        sim.step(now, ev);
        if sim.remaining == 0 {
            break;
        }
        if sim.q.popped() >= next_progress {
            next_progress += 4_000_000;
            let pct = if bytes_total > 0 {
                format!(", {:.0} % delivered", sim.delivered as f64 * 100.0 / bytes_total as f64)
            } else {
                String::new()
            };
            progress(&format!("  {} {}x{}: {:.1} ms simulated{pct}", model.name(), cfg.senders, cfg.flows_per_sender, now as f64 / 1e9));
        }
    }
    let end_ps = sim.q.now_ps().min(cfg.duration_ps);
    Ok(sim.finish(model, end_ps, bytes_total))
}

impl Sim<'_> {
    fn step(&mut self, now: u64, ev: Ev) {
        match ev {
            Ev::Start(f) => {
                self.flows[f as usize].start_ps = now;
                self.ready(f, now);
            }
            Ev::HostFree(h) => {
                self.hosts[h as usize].busy = false;
                self.kick(h, now);
            }
            Ev::Arrive(p) => self.arrive(p, now),
            Ev::EgressFree => {
                self.egress_busy = false;
                self.egress(now);
            }
            Ev::Ack { flow, ack, seq, ece } => {
                self.flows[flow as usize].tx.on_ack(now, ack, seq, ece);
                self.arm_timer(flow);
                self.ready(flow, now);
            }
            Ev::Timer(f) => {
                let fl = &mut self.flows[f as usize];
                fl.timer_at = None;
                if fl.tx.on_timer(now) {
                    self.arm_timer(f);
                    self.ready(f, now);
                } else {
                    self.arm_timer(f);
                }
            }
        }
    }

    /// Keeps one timer event pending at or before the sender's deadline.
    fn arm_timer(&mut self, f: u32) {
        let fl = &mut self.flows[f as usize];
        if let Some(d) = fl.tx.rto_deadline_ps() {
            if fl.timer_at.is_none_or(|t| t > d) {
                fl.timer_at = Some(d);
                self.q.schedule(d, Ev::Timer(f));
            }
        }
    }

    fn ready(&mut self, f: u32, now: u64) {
        let fl = &mut self.flows[f as usize];
        if !fl.in_ready && fl.tx.can_send() {
            fl.in_ready = true;
            let h = fl.host;
            self.hosts[h as usize].ready.push_back(f);
            if !self.hosts[h as usize].busy {
                self.kick(h, now);
            }
        }
    }

    /// The host's link is free: the next ready flow sends one segment.
    fn kick(&mut self, h: u32, now: u64) {
        let sw = &self.cfg.switch;
        while let Some(f) = self.hosts[h as usize].ready.pop_front() {
            let fl = &mut self.flows[f as usize];
            fl.in_ready = false;
            let Some(seg) = fl.tx.next_segment(now) else { continue };
            if fl.tx.can_send() {
                fl.in_ready = true;
                self.hosts[h as usize].ready.push_back(f);
            }
            let pkt = Pkt { flow: f, seq: seg.seq, len: seg.len_bytes, ce: false };
            let id = match self.free.pop() {
                Some(i) => {
                    self.pkts[i as usize] = pkt;
                    i
                }
                None => {
                    self.pkts.push(pkt);
                    (self.pkts.len() - 1) as u32
                }
            };
            let ser = ser_ps(u64::from(seg.len_bytes + TCP_FRAME_OVERHEAD + WIRE_OVERHEAD), sw.rate_bps);
            let gap = if self.cfg.host_gap_ps > 0 { self.rng.next_u64() % (self.cfg.host_gap_ps + 1) } else { 0 };
            self.hosts[h as usize].busy = true;
            self.q.schedule(now + ser + gap, Ev::HostFree(h));
            self.q.schedule(now + ser + sw.prop_ps, Ev::Arrive(id));
            self.arm_timer(f);
            return;
        }
    }

    fn arrive(&mut self, id: u32, now: u64) {
        let p = self.pkts[id as usize];
        let len_bytes = self.cfg.switch.buffer_bytes_of(p.len + TCP_FRAME_OVERHEAD);
        let d = Desc { pkt: PktId(id), len_bytes, ecn: self.ecn, ..Desc::default() };
        let mut res = [Enq::Queued];
        self.tm.enqueue_burst(0, &[d], now / 1000, &mut res);
        match res[0] {
            Enq::Queued => {}
            Enq::Marked => self.pkts[id as usize].ce = true,
            Enq::Dropped(_) => self.free.push(id),
        }
        if !self.egress_busy {
            self.egress(now);
        }
    }

    /// The egress link is free: one packet leaves; the receiver takes it on arrival.
    fn egress(&mut self, now: u64) {
        let mut out = [Desc::default()];
        if self.tm.dequeue_burst(0, 1, now / 1000, &mut out) == 0 {
            return;
        }
        let id = out[0].pkt.0;
        let p = self.pkts[id as usize];
        self.free.push(id);
        let sw = &self.cfg.switch;
        let ser = ser_ps(u64::from(p.len + TCP_FRAME_OVERHEAD + WIRE_OVERHEAD), sw.rate_bps);
        self.egress_busy = true;
        self.q.schedule(now + ser, Ev::EgressFree);
        let t_rx = now + ser + sw.prop_ps;
        let fl = &mut self.flows[p.flow as usize];
        let (ack, newly) = fl.rx.on_segment(p.seq);
        if newly > 0 {
            let bytes = fl.tx.payload_bytes(ack - newly, ack);
            fl.delivered += bytes;
            self.delivered += bytes;
            let b = (t_rx / self.cfg.bin_ps) as usize;
            if self.bins.len() <= b {
                self.bins.resize(b + 1, 0);
            }
            self.bins[b] += bytes;
            if ack >= fl.tx.segs() && fl.done_ps.is_none() {
                fl.done_ps = Some(t_rx);
                self.remaining -= 1;
            }
        }
        self.q.schedule(t_rx + self.ack_path_ps, Ev::Ack { flow: p.flow, ack, seq: p.seq, ece: p.ce });
    }

    fn finish(self, model: BufferModel, end_ps: u64, bytes_total: u64) -> IncastResult {
        let cfg = self.cfg;
        let flow_rates_bps: Vec<f64> = self
            .flows
            .iter()
            .map(|f| {
                let t = f.done_ps.unwrap_or(end_ps).saturating_sub(f.start_ps).max(1);
                f.delivered as f64 * 8.0 / (t as f64 / PS_PER_S as f64)
            })
            .collect();
        let jain = fastpath_tm::jain_index(&flow_rates_bps);
        let mut tcp = SenderStats::default();
        for f in &self.flows {
            let s = f.tx.stats();
            tcp.sent_segs += s.sent_segs;
            tcp.retx_segs += s.retx_segs;
            tcp.fast_retx += s.fast_retx;
            tcp.timeouts += s.timeouts;
            tcp.ecn_cuts += s.ecn_cuts;
        }
        let pc = self.tm.port_counters(0).unwrap_or_default();
        let jct_ps = if cfg.bytes_per_flow > 0 && self.remaining == 0 { self.flows.iter().filter_map(|f| f.done_ps).max() } else { None };
        IncastResult {
            model,
            senders: cfg.senders,
            flows: self.flows.len() as u32,
            bytes_total,
            delivered_bytes: self.delivered,
            jct_ps,
            ideal_ps: ser_ps(bytes_total, cfg.switch.rate_bps),
            end_ps,
            bin_ps: cfg.bin_ps,
            bins: self.bins,
            flow_rates_bps,
            fct_ps: self.flows.iter().map(|f| f.done_ps.map(|d| d - f.start_ps)).collect(),
            jain,
            tcp,
            drops: pc.total_drops(),
            marks: pc.ecn_marks,
            hwm_bytes: pc.hwm_bytes,
            events: self.q.popped(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GBPS10: u64 = 10_000_000_000;

    /// A small switch: 8 × 10 Gbit/s, 1 MiB.
    fn small(senders: u32, flows: u32, bytes: u64) -> IncastConfig {
        IncastConfig {
            switch: SwitchConfig { ports: 8, rate_bps: GBPS10, buffer_bytes: 1 << 20, ..SwitchConfig::default() },
            senders,
            flows_per_sender: flows,
            bytes_per_flow: bytes,
            bin_ps: 100_000_000,
            ..IncastConfig::default()
        }
    }

    #[test]
    fn one_flow_alone_runs_at_line_rate_and_finishes_in_bytes_over_rate_plus_a_trip() {
        let cfg = IncastConfig { start_jitter_ps: 0, host_gap_ps: 0, ..small(1, 1, 2_920_000) }; // 2000 segments
        let r = run(&cfg, BufferModel::Shared, &mut |_| {}).unwrap();
        assert_eq!(r.delivered_bytes, 2_920_000);
        assert_eq!((r.drops, r.tcp.retx_segs, r.tcp.timeouts), (0, 0, 0));
        // 2000 frames of 1538 bytes on the wire back to back, plus the last one's trip through
        // the switch (serialisation again and two propagation delays).
        let wire = ser_ps(2000 * 1538, GBPS10);
        let trip = ser_ps(1538, GBPS10) + 2 * cfg.switch.prop_ps;
        let jct = r.jct_ps.unwrap();
        assert!(jct >= wire + trip, "{jct} < {}", wire + trip);
        assert!(jct <= wire + trip + 2_000_000, "{jct}: more than 2 µs of idle link"); // IW10 covers the BDP
        let goodput = r.steady_gbps();
        assert!((goodput - 10.0 * 1460.0 / 1538.0).abs() < 0.1, "{goodput} Gbit/s");
    }

    #[test]
    fn runs_are_deterministic_per_seed() {
        let cfg = small(3, 2, 300_000);
        let a = run(&cfg, BufferModel::Static, &mut |_| {}).unwrap();
        let b = run(&cfg, BufferModel::Static, &mut |_| {}).unwrap();
        assert_eq!(a, b);
        let c = run(&IncastConfig { seed: 2, ..cfg }, BufferModel::Static, &mut |_| {}).unwrap();
        assert_ne!(a.fct_ps, c.fct_ps);
    }

    #[test]
    fn shared_buffer_beats_the_static_split_in_incast() {
        // 6 senders × 4 flows of 500 kB into one port: 24 initial windows of 10 segments
        // (350 kB) meet a 128 KiB static share, or 8/9 MiB shared.
        let cfg = small(6, 4, 500_000);
        let shared = run(&cfg, BufferModel::Shared, &mut |_| {}).unwrap();
        let stat = run(&cfg, BufferModel::Static, &mut |_| {}).unwrap();
        for r in [&shared, &stat] {
            assert_eq!(r.delivered_bytes, 12_000_000, "{:?}", r.model);
            assert!(r.jct_ps.is_some());
        }
        assert_eq!(shared.tcp.timeouts, 0);
        assert!(stat.tcp.timeouts > 0, "the static share should force timeouts");
        assert!(stat.jain < shared.jain, "static {} shared {}", stat.jain, shared.jain);
        let (js, jt) = (shared.jct_ps.unwrap(), stat.jct_ps.unwrap());
        assert!(jt > 2 * js, "static {jt} ps vs shared {js} ps");
        assert!(js < shared.ideal_ps * 12 / 10, "shared JCT {js} vs ideal {}", shared.ideal_ps);
        assert!(shared.mean_gbps() > 8.5, "{}", shared.mean_gbps());
        assert!(shared.jain > 0.9, "{}", shared.jain);
        assert!(shared.hwm_bytes > stat.hwm_bytes);
        assert!(stat.hwm_bytes <= (1 << 20) / 8);
    }

    #[test]
    fn ecn_marks_instead_of_dropping() {
        let mut cfg = small(4, 4, 400_000);
        cfg.switch.wred =
            Some(fastpath_tm::wred::WredConfig { min_bytes: 30_000, max_bytes: 600_000, maxp_inv: 1, weight_log2: 1, ecn: true });
        cfg.tcp.ecn = EcnMode::Dctcp;
        let r = run(&cfg, BufferModel::Shared, &mut |_| {}).unwrap();
        assert!(r.marks > 0 && r.tcp.ecn_cuts > 0);
        assert_eq!(r.drops, 0);
        assert!(r.hwm_bytes < 600_000, "{}", r.hwm_bytes);
        assert_eq!(r.delivered_bytes, 6_400_000);
    }

    #[test]
    fn bad_configs_are_refused() {
        assert!(run(&small(8, 1, 1000), BufferModel::Shared, &mut |_| {}).is_err()); // 8 senders, 8 ports
        assert!(run(&small(2, 0, 1000), BufferModel::Shared, &mut |_| {}).is_err());
        let mut cfg = small(2, 1, 1000);
        cfg.switch.alpha_log2 = 5;
        let e = run(&cfg, BufferModel::Shared, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("alpha exponent 5"), "{e}");
    }
}
