//! A packet-level TCP: a NewReno sender (RFC 5681 and RFC 6582) and a receiver that acknowledges
//! every segment cumulatively, with an optional reaction to CE marks (RFC 3168 halving, or
//! DCTCP's proportional cut, RFC 8257).
//!
//! Sequence numbers count whole segments (`0..segs`; the last one may be short). The sender is a
//! state machine with no clock of its own: the simulation calls [`Sender::next_segment`] when
//! the host's link is free, [`Sender::on_ack`] when an ACK arrives and [`Sender::on_timer`]
//! when the retransmission timer may have expired, always with the time.
//!
//! ```text
//!  slow start          cwnd += acked                      (cwnd < ssthresh; IW = 10)
//!  congestion avoid.   cwnd += acked / cwnd
//!  3 dup ACKs          ssthresh = max(flight/2, 2); resend snd_una; cwnd = ssthresh + 3;
//!                      recover = highest sent           (not again until an ACK passes recover)
//!  in recovery         dup ACK: cwnd += 1;  partial ACK: resend the next hole, deflate cwnd;
//!                      ACK past recover: cwnd = ssthresh, recovery over
//!  RTO                 ssthresh = max(flight/2, 2); cwnd = 1; go back to snd_una; RTO doubles
//!  RTO value           max(min_rto, srtt + 4·rttvar) (RFC 6298), samples by Karn's rule
//!  ECN (classic)       once per window on ECE: ssthresh = cwnd = max(cwnd/2, 2)
//!  DCTCP               α ← (1 − 1/16)·α + F/16 per window (F: marked fraction);
//!                      once per window on ECE: ssthresh = cwnd = max(cwnd·(1 − α/2), 2)
//! ```
//!
//! Not modelled: SACK and RACK (Linux has both; they recover several holes per round trip
//! where NewReno recovers one), delayed ACKs, pacing, TSO bursts, receive-window limits beyond
//! a fixed cap, the handshake (flows start established, with the base RTT as their first RTT
//! sample, so the first RTO is `min_rto` as in Linux after the SYN exchange).

use std::collections::{BTreeSet, VecDeque};

/// How the sender reacts to CE marks echoed by the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcnMode {
    /// Packets are Not-ECT; the switch drops instead of marking.
    Off,
    /// RFC 3168: ECT(0) packets; an ECE halves the window once per round trip.
    Classic,
    /// DCTCP (RFC 8257): ECT(0); the window shrinks in proportion to the marked fraction.
    Dctcp,
}

/// How the sender finds and repairs losses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// NewReno (RFC 6582): three duplicate ACKs resend the first hole; each partial ACK resends
    /// the next one, so a window with k losses takes k round trips to repair.
    NewReno,
    /// SACK with RACK-style loss detection, as Linux: every ACK names the segment that caused
    /// it; a segment is lost once a segment sent after it has arrived (the path is FIFO, so
    /// nothing is reordered), retransmissions included; lost segments are resent as the pipe
    /// (segments in flight, RFC 6675) falls below the window.
    Sack,
}

/// The sender's fixed parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TcpConfig {
    /// Payload bytes per full segment.
    pub mss_bytes: u32,
    /// Initial window, segments (Linux: 10, RFC 6928).
    pub init_cwnd_segs: u32,
    /// Largest window, segments: the receive window.
    pub max_cwnd_segs: u32,
    /// Lower bound of the retransmission timeout, ps (Linux: 200 ms).
    pub min_rto_ps: u64,
    /// Upper bound of the retransmission timeout after backoff, ps (Linux: 120 s).
    pub max_rto_ps: u64,
    /// Duplicate ACKs that trigger a fast retransmit (3).
    pub dupack_thresh: u32,
    /// Reaction to CE.
    pub ecn: EcnMode,
    /// Loss detection and repair.
    pub recovery: Recovery,
}

impl Default for TcpConfig {
    /// MSS 1460 (1500-byte MTU, no options), IW 10, a 16 MiB receive window (11,490 segments),
    /// min RTO 200 ms and max 120 s as Linux, 3 dup ACKs, no ECN, SACK recovery.
    fn default() -> TcpConfig {
        TcpConfig {
            mss_bytes: 1460,
            init_cwnd_segs: 10,
            max_cwnd_segs: (16 << 20) / 1460,
            min_rto_ps: 200 * 1_000_000_000,
            max_rto_ps: 120 * 1_000_000_000_000,
            dupack_thresh: 3,
            ecn: EcnMode::Off,
            recovery: Recovery::Sack,
        }
    }
}

/// Counters of one sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Segments sent, first transmissions and retransmissions.
    pub sent_segs: u64,
    /// Segments sent again (fast retransmits, partial-ACK resends, resends after a timeout).
    pub retx_segs: u64,
    /// Fast retransmits (entries into fast recovery).
    pub fast_retx: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Window reductions on ECE.
    pub ecn_cuts: u64,
}

/// One segment the sender hands to its host's link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Sequence number (segment index).
    pub seq: u32,
    /// Payload bytes.
    pub len_bytes: u32,
    /// Sent before (a retransmission).
    pub retx: bool,
}

/// A NewReno sender of `bytes` bytes.
#[derive(Clone, Debug)]
pub struct Sender {
    cfg: TcpConfig,
    segs: u32,
    last_len: u32,
    snd_una: u32,
    snd_nxt: u32,
    snd_max: u32,
    /// Congestion window, segments.
    cwnd: f64,
    ssthresh: f64,
    dupacks: u32,
    in_recovery: bool,
    recover: i64,
    resend_una: bool,
    srtt_ps: f64,
    rttvar_ps: f64,
    rto_ps: u64,
    timing: Option<(u32, u64)>,
    rto_deadline_ps: Option<u64>,
    ecn_recover: i64,
    dctcp_alpha: f64,
    win_end: u32,
    win_acked: u64,
    win_marked: u64,
    stats: SenderStats,
    // SACK scoreboard: one slot per segment of snd_una..snd_max.
    sb: VecDeque<Slot>,
    // (transmission number, segment) in the order sent, for RACK.
    txq: VecDeque<(u64, u32)>,
    // Segments marked lost, in the order found (stale entries are skipped).
    lostq: VecDeque<u32>,
    xmit: u64,
    rack_xmit: u64,
    sacked_cnt: u32,
    lost_cnt: u32,
}

const SACKED: u8 = 1;
const LOST: u8 = 2;

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    xmit: u64,
    flags: u8,
}

impl Sender {
    /// A sender of `bytes` (0: without end) whose first round trip took `base_rtt_ps` (the
    /// handshake's sample).
    pub fn new(cfg: &TcpConfig, bytes: u64, base_rtt_ps: u64) -> Sender {
        let mss = u64::from(cfg.mss_bytes.max(1));
        let (segs, last_len) = if bytes == 0 {
            (u32::MAX, cfg.mss_bytes)
        } else {
            let segs = bytes.div_ceil(mss).min(u64::from(u32::MAX));
            (segs as u32, (bytes - (segs - 1) * mss) as u32)
        };
        let srtt = base_rtt_ps as f64;
        let mut s = Sender {
            cfg: *cfg,
            segs,
            last_len,
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            cwnd: f64::from(cfg.init_cwnd_segs.max(1)),
            ssthresh: f64::INFINITY,
            dupacks: 0,
            in_recovery: false,
            recover: -1,
            resend_una: false,
            srtt_ps: srtt,
            rttvar_ps: srtt / 2.0,
            rto_ps: 0,
            timing: None,
            rto_deadline_ps: None,
            ecn_recover: -1,
            dctcp_alpha: 1.0,
            win_end: 0,
            win_acked: 0,
            win_marked: 0,
            stats: SenderStats::default(),
            sb: VecDeque::new(),
            txq: VecDeque::new(),
            lostq: VecDeque::new(),
            xmit: 0,
            rack_xmit: 0,
            sacked_cnt: 0,
            lost_cnt: 0,
        };
        s.rto_ps = s.compute_rto();
        s
    }

    fn compute_rto(&self) -> u64 {
        let r = (self.srtt_ps + 4.0 * self.rttvar_ps) as u64;
        r.clamp(self.cfg.min_rto_ps, self.cfg.max_rto_ps.max(self.cfg.min_rto_ps))
    }

    fn seg_len(&self, seq: u32) -> u32 {
        if seq + 1 == self.segs {
            self.last_len
        } else {
            self.cfg.mss_bytes
        }
    }

    fn flight(&self) -> u32 {
        self.snd_max - self.snd_una
    }

    /// Segments sent and not yet acknowledged, counting from where the sender resends.
    fn in_window(&self) -> u32 {
        self.snd_nxt - self.snd_una
    }

    /// Segments in flight as SACK counts them: outstanding, less those SACKed and those lost
    /// and not yet sent again (RFC 6675 `pipe`).
    fn pipe(&self) -> u32 {
        (self.snd_max - self.snd_una) - self.sacked_cnt - self.lost_cnt
    }

    /// True when every segment is acknowledged.
    pub fn done(&self) -> bool {
        self.snd_una >= self.segs
    }

    /// True when [`next_segment`](Self::next_segment) would return a segment now.
    pub fn can_send(&self) -> bool {
        if self.done() {
            return false;
        }
        if self.cfg.recovery == Recovery::Sack {
            let wnd = (self.cwnd.min(f64::from(self.cfg.max_cwnd_segs)) as u32).max(1);
            return self.pipe() < wnd && (self.lost_cnt > 0 || self.snd_max < self.segs);
        }
        if self.resend_una {
            return true;
        }
        let wnd = (self.cwnd.min(f64::from(self.cfg.max_cwnd_segs)) as u32).max(1);
        self.snd_nxt < self.segs && self.in_window() < wnd
    }

    /// The next segment to put on the wire at `now_ps`, if the window allows one: a resend of
    /// the first unacknowledged segment that recovery owes, else the next one. Arms the
    /// retransmission timer when nothing was outstanding.
    pub fn next_segment(&mut self, now_ps: u64) -> Option<Segment> {
        if !self.can_send() {
            return None;
        }
        let seq = if self.cfg.recovery == Recovery::Sack {
            self.sack_pick()
        } else if self.resend_una {
            self.resend_una = false;
            self.snd_una
        } else {
            let s = self.snd_nxt;
            self.snd_nxt += 1;
            s
        };
        let retx = seq < self.snd_max;
        if retx {
            self.stats.retx_segs += 1;
            // Karn: a sample that spans a resend of its segment is ambiguous.
            if self.timing.is_some_and(|(t, _)| t >= seq) {
                self.timing = None;
            }
        } else {
            self.snd_max = seq + 1;
            if self.timing.is_none() {
                self.timing = Some((seq, now_ps));
            }
        }
        if self.cfg.recovery == Recovery::Sack {
            self.xmit += 1;
            let i = (seq - self.snd_una) as usize;
            if i == self.sb.len() {
                self.sb.push_back(Slot::default());
            }
            if let Some(slot) = self.sb.get_mut(i) {
                slot.xmit = self.xmit;
            }
            self.txq.push_back((self.xmit, seq));
        }
        self.stats.sent_segs += 1;
        if self.rto_deadline_ps.is_none() {
            self.rto_deadline_ps = Some(now_ps + self.rto_ps);
        }
        Some(Segment { seq, len_bytes: self.seg_len(seq), retx })
    }

    /// SACK: the first segment still marked lost (taken off the lost list), else the next new
    /// one. Only called when [`can_send`](Self::can_send) holds.
    fn sack_pick(&mut self) -> u32 {
        while self.lost_cnt > 0 {
            let Some(seq) = self.lostq.pop_front() else { break };
            let Some(slot) = seq.checked_sub(self.snd_una).and_then(|i| self.sb.get_mut(i as usize)) else { continue };
            if slot.flags & LOST != 0 {
                slot.flags &= !LOST;
                self.lost_cnt -= 1;
                return seq;
            }
        }
        let s = self.snd_max;
        self.snd_nxt = s + 1;
        s
    }

    /// Processes a cumulative ACK (`ack` = the next segment the receiver expects) that arrives
    /// at `now_ps`, caused by the arrival of segment `trig` (what a SACK block names; NewReno
    /// ignores it); `ece` is set when that segment carried CE.
    pub fn on_ack(&mut self, now_ps: u64, ack: u32, trig: u32, ece: bool) {
        if self.cfg.recovery == Recovery::Sack {
            self.on_ack_sack(now_ps, ack, trig, ece);
            return;
        }
        let ack = ack.min(self.snd_max);
        if ack > self.snd_una {
            let acked = ack - self.snd_una;
            self.time_ack(now_ps, ack);
            let cut = self.ecn_account(ack, u64::from(acked), ece);
            if self.in_recovery {
                if i64::from(ack) > self.recover {
                    self.cwnd = self.ssthresh;
                    self.in_recovery = false;
                    self.resend_una = false;
                    self.dupacks = 0;
                } else {
                    // Partial ACK (RFC 6582 §3.2 step 3): the next hole is lost too.
                    self.resend_una = true;
                    self.cwnd = (self.cwnd - f64::from(acked) + 1.0).max(1.0);
                }
            } else if cut {
                self.dupacks = 0; // CWR: no growth on the ACK that cut the window
            } else {
                self.dupacks = 0;
                self.grow(acked);
            }
            self.advance(now_ps, ack);
        } else if ack == self.snd_una && self.snd_una < self.snd_max {
            let _ = self.ecn_account(ack, 1, ece);
            self.dupacks += 1;
            if self.in_recovery {
                self.cwnd += 1.0;
            } else if self.dupacks == self.cfg.dupack_thresh && i64::from(ack) > self.recover {
                self.ssthresh = (f64::from(self.flight()) / 2.0).max(2.0);
                self.cwnd = self.ssthresh + f64::from(self.cfg.dupack_thresh);
                self.recover = i64::from(self.snd_max) - 1;
                self.in_recovery = true;
                self.resend_una = true;
                self.stats.fast_retx += 1;
            }
        }
    }

    fn on_ack_sack(&mut self, now_ps: u64, ack: u32, trig: u32, ece: bool) {
        let ack = ack.min(self.snd_max);
        // The segment that caused this ACK arrived: everything sent before it that has not
        // arrived is lost (RACK on a FIFO path), and if it is above the cumulative ACK it is
        // SACKed.
        if let Some(slot) = trig.checked_sub(self.snd_una).and_then(|i| self.sb.get_mut(i as usize)) {
            self.rack_xmit = self.rack_xmit.max(slot.xmit);
            if trig >= ack && slot.flags & SACKED == 0 {
                if slot.flags & LOST != 0 {
                    self.lost_cnt -= 1;
                }
                slot.flags = SACKED;
                self.sacked_cnt += 1;
            }
        }
        let acked = ack.saturating_sub(self.snd_una);
        let cut = self.ecn_account(ack, u64::from(acked.max(1)), ece);
        if acked > 0 {
            for _ in 0..acked {
                if let Some(slot) = self.sb.pop_front() {
                    if slot.flags & SACKED != 0 {
                        self.sacked_cnt -= 1;
                    }
                    if slot.flags & LOST != 0 {
                        self.lost_cnt -= 1;
                    }
                }
            }
            self.time_ack(now_ps, ack);
            if self.in_recovery {
                if i64::from(ack) > self.recover {
                    self.cwnd = self.ssthresh;
                    self.in_recovery = false;
                }
            } else if !cut {
                self.grow(acked);
            }
            self.advance(now_ps, ack);
        }
        let mut found = false;
        while let Some(&(x, seq)) = self.txq.front() {
            if x >= self.rack_xmit {
                break;
            }
            self.txq.pop_front();
            let Some(slot) = seq.checked_sub(self.snd_una).and_then(|i| self.sb.get_mut(i as usize)) else { continue };
            if slot.xmit == x && slot.flags == 0 {
                slot.flags = LOST;
                self.lost_cnt += 1;
                self.lostq.push_back(seq);
                found = true;
            }
        }
        if found && !self.in_recovery && i64::from(ack) > self.recover {
            self.ssthresh = (self.cwnd / 2.0).max(2.0);
            self.cwnd = self.ssthresh;
            self.recover = i64::from(self.snd_max) - 1;
            self.in_recovery = true;
            self.stats.fast_retx += 1;
        }
    }

    /// Takes the RTT sample of the timed segment once `ack` covers it.
    fn time_ack(&mut self, now_ps: u64, ack: u32) {
        if let Some((seq, sent)) = self.timing {
            if ack > seq {
                self.rtt_sample(now_ps.saturating_sub(sent) as f64);
                self.timing = None;
            }
        }
    }

    /// Window growth for `acked` newly acknowledged segments: slow start up to ssthresh, then
    /// one segment per window (Reno congestion avoidance).
    fn grow(&mut self, acked: u32) {
        if self.cwnd < self.ssthresh {
            self.cwnd = (self.cwnd + f64::from(acked)).min(self.ssthresh);
        } else {
            self.cwnd += f64::from(acked) / self.cwnd;
        }
    }

    /// Moves the left edge to `ack` and re-arms the retransmission timer.
    fn advance(&mut self, now_ps: u64, ack: u32) {
        self.cwnd = self.cwnd.min(f64::from(self.cfg.max_cwnd_segs));
        self.snd_una = ack;
        self.snd_nxt = self.snd_nxt.max(ack);
        self.rto_deadline_ps = if self.snd_una >= self.snd_max { None } else { Some(now_ps + self.rto_ps) };
    }

    fn rtt_sample(&mut self, r: f64) {
        // RFC 6298 §2.3, α = 1/8, β = 1/4.
        self.rttvar_ps = 0.75 * self.rttvar_ps + 0.25 * (self.srtt_ps - r).abs();
        self.srtt_ps = 0.875 * self.srtt_ps + 0.125 * r;
        self.rto_ps = self.compute_rto();
    }

    /// Counts an ACK for the ECN reaction; true when it cut the window.
    fn ecn_account(&mut self, ack: u32, acked: u64, ece: bool) -> bool {
        match self.cfg.ecn {
            EcnMode::Off => false,
            EcnMode::Classic => {
                if ece && i64::from(ack) > self.ecn_recover && !self.in_recovery {
                    self.ssthresh = (self.cwnd / 2.0).max(2.0);
                    self.cwnd = self.ssthresh;
                    self.ecn_recover = i64::from(self.snd_max) - 1;
                    self.stats.ecn_cuts += 1;
                    return true;
                }
                false
            }
            EcnMode::Dctcp => {
                self.win_acked += acked;
                if ece {
                    self.win_marked += acked;
                }
                if ack > self.win_end {
                    let f = if self.win_acked == 0 { 0.0 } else { self.win_marked as f64 / self.win_acked as f64 };
                    self.dctcp_alpha = (1.0 - 1.0 / 16.0) * self.dctcp_alpha + f / 16.0;
                    self.win_acked = 0;
                    self.win_marked = 0;
                    self.win_end = self.snd_max;
                }
                if ece && i64::from(ack) > self.ecn_recover && !self.in_recovery {
                    self.cwnd = (self.cwnd * (1.0 - self.dctcp_alpha / 2.0)).max(2.0);
                    self.ssthresh = self.cwnd;
                    self.ecn_recover = i64::from(self.snd_max) - 1;
                    self.stats.ecn_cuts += 1;
                    return true;
                }
                false
            }
        }
    }

    /// When the retransmission timer expires, if it is armed.
    pub fn rto_deadline_ps(&self) -> Option<u64> {
        self.rto_deadline_ps
    }

    /// Fires the retransmission timer if it has expired at `now_ps`; returns true when it did.
    /// The window collapses to one segment, sending goes back to the first unacknowledged
    /// segment, and the timeout doubles (up to the maximum).
    pub fn on_timer(&mut self, now_ps: u64) -> bool {
        match self.rto_deadline_ps {
            Some(d) if d <= now_ps && !self.done() && self.snd_una < self.snd_max => {}
            _ => return false,
        }
        self.ssthresh = (f64::from(self.flight()) / 2.0).max(2.0);
        self.cwnd = 1.0;
        self.snd_nxt = self.snd_una;
        if self.cfg.recovery == Recovery::Sack {
            // Everything outstanding and not SACKed is lost; resend it in order.
            self.lostq.clear();
            self.txq.clear();
            self.lost_cnt = 0;
            for (i, slot) in self.sb.iter_mut().enumerate() {
                if slot.flags & SACKED == 0 {
                    slot.flags = LOST;
                    self.lost_cnt += 1;
                    self.lostq.push_back(self.snd_una + i as u32);
                }
            }
        }
        self.resend_una = false;
        self.in_recovery = false;
        self.dupacks = 0;
        self.recover = i64::from(self.snd_max) - 1;
        self.timing = None;
        self.rto_ps = (self.rto_ps.saturating_mul(2)).min(self.cfg.max_rto_ps);
        self.rto_deadline_ps = Some(now_ps + self.rto_ps);
        self.stats.timeouts += 1;
        true
    }

    /// The congestion window, segments.
    pub fn cwnd_segs(&self) -> f64 {
        self.cwnd
    }

    /// The smoothed RTT, ps.
    pub fn srtt_ps(&self) -> f64 {
        self.srtt_ps
    }

    /// The current retransmission timeout, ps.
    pub fn rto_ps(&self) -> u64 {
        self.rto_ps
    }

    /// The first segment not yet acknowledged.
    pub fn snd_una(&self) -> u32 {
        self.snd_una
    }

    /// Segments in the transfer (`u32::MAX` for one without end).
    pub fn segs(&self) -> u32 {
        self.segs
    }

    /// Payload bytes of segments `from..to`.
    pub fn payload_bytes(&self, from: u32, to: u32) -> u64 {
        if to <= from {
            return 0;
        }
        let n = u64::from(to - from) * u64::from(self.cfg.mss_bytes);
        if to >= self.segs {
            n - u64::from(self.cfg.mss_bytes - self.last_len)
        } else {
            n
        }
    }

    /// Counters.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }
}

/// A receiver: delivers in order, keeps out-of-order segments, acknowledges every segment with
/// the next one it expects.
#[derive(Clone, Debug, Default)]
pub struct Receiver {
    rcv_nxt: u32,
    ooo: BTreeSet<u32>,
}

impl Receiver {
    /// A receiver expecting segment 0.
    pub fn new() -> Receiver {
        Receiver::default()
    }

    /// Takes segment `seq`; returns the cumulative ACK to send and how many segments became
    /// deliverable in order (0 for a duplicate or a segment past a hole).
    pub fn on_segment(&mut self, seq: u32) -> (u32, u32) {
        if seq < self.rcv_nxt {
            return (self.rcv_nxt, 0);
        }
        if seq > self.rcv_nxt {
            self.ooo.insert(seq);
            return (self.rcv_nxt, 0);
        }
        let start = self.rcv_nxt;
        self.rcv_nxt += 1;
        while self.ooo.first() == Some(&self.rcv_nxt) {
            self.ooo.pop_first();
            self.rcv_nxt += 1;
        }
        (self.rcv_nxt, self.rcv_nxt - start)
    }

    /// The next segment expected (all before it delivered).
    pub fn rcv_nxt(&self) -> u32 {
        self.rcv_nxt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000_000;

    /// A NewReno sender (SACK has its own tests).
    fn sender(bytes: u64) -> Sender {
        Sender::new(&TcpConfig { recovery: Recovery::NewReno, ..TcpConfig::default() }, bytes, 10_000_000)
    }

    fn sack(bytes: u64) -> Sender {
        Sender::new(&TcpConfig::default(), bytes, 10_000_000)
    }

    /// Sends everything the window allows at `now`; returns the sequence numbers.
    fn burst(s: &mut Sender, now: u64) -> Vec<u32> {
        std::iter::from_fn(|| s.next_segment(now).map(|g| g.seq)).collect()
    }

    #[test]
    fn receiver_delivers_in_order_and_fills_holes() {
        let mut r = Receiver::new();
        assert_eq!(r.on_segment(0), (1, 1));
        assert_eq!(r.on_segment(2), (1, 0)); // hole at 1: duplicate ACK
        assert_eq!(r.on_segment(3), (1, 0));
        assert_eq!(r.on_segment(1), (4, 3)); // the hole filled: 1, 2, 3 delivered
        assert_eq!(r.on_segment(2), (4, 0)); // an old segment again
        assert_eq!(r.rcv_nxt(), 4);
    }

    #[test]
    fn segment_lengths_and_payload() {
        let s = sender(10_000); // 6 full segments of 1460 + 1240
        assert_eq!(s.segs(), 7);
        assert_eq!(s.payload_bytes(0, 7), 10_000);
        assert_eq!(s.payload_bytes(0, 6), 6 * 1460);
        assert_eq!(s.payload_bytes(6, 7), 1240);
        let mut s = sender(10_000);
        let segs: Vec<Segment> = std::iter::from_fn(|| s.next_segment(0)).collect();
        assert_eq!(segs.len(), 7);
        assert_eq!(segs[6], Segment { seq: 6, len_bytes: 1240, retx: false });
        assert!(!s.can_send());
    }

    #[test]
    fn slow_start_doubles_the_window_per_round_trip() {
        let mut s = sender(0);
        assert_eq!(burst(&mut s, 0), (0..10).collect::<Vec<_>>());
        for a in 1..=10 {
            s.on_ack(MS / 100, a, 0, false);
        }
        assert_eq!(s.cwnd_segs(), 20.0);
        assert_eq!(burst(&mut s, MS / 100).len(), 20);
        assert_eq!(s.stats().retx_segs, 0);
    }

    #[test]
    fn three_dup_acks_resend_the_hole_and_halve_the_window() {
        let mut s = sender(0);
        burst(&mut s, 0); // 0..10 out; segment 2 is lost
        s.on_ack(1, 1, 0, false);
        s.on_ack(1, 2, 0, false); // cwnd 12: 4 more may leave
        assert_eq!(burst(&mut s, 1), vec![10, 11, 12, 13]);
        for _ in 0..2 {
            s.on_ack(2, 2, 0, false);
            assert!(s.next_segment(2).is_none(), "no new data before the third dup ACK");
        }
        s.on_ack(2, 2, 0, false);
        assert_eq!(s.stats().fast_retx, 1);
        let g = s.next_segment(2).unwrap();
        assert_eq!(g, Segment { seq: 2, len_bytes: 1460, retx: true });
        // flight was 12 (2..14): ssthresh 6, cwnd 6 + 3.
        assert_eq!(s.cwnd_segs(), 9.0);
        // More dup ACKs inflate the window until new data may go (12 in the window).
        for _ in 0..3 {
            s.on_ack(3, 2, 0, false);
            assert!(s.next_segment(3).is_none());
        }
        s.on_ack(3, 2, 0, false);
        assert_eq!(s.next_segment(3).map(|g| g.seq), Some(14));
        // The resend is acknowledged with everything after it: recovery ends at ssthresh.
        s.on_ack(4, 15, 0, false);
        assert_eq!(s.cwnd_segs(), 6.0);
        assert_eq!(s.stats().timeouts, 0);
        // A fourth dup ACK of a new hole only counts from zero again.
        s.on_ack(5, 15, 0, false);
        assert_eq!(s.stats().fast_retx, 1);
    }

    #[test]
    fn a_partial_ack_resends_the_next_hole_at_once() {
        let mut s = sender(0);
        burst(&mut s, 0); // 0..10; 2 and 5 are lost
        s.on_ack(1, 1, 0, false);
        s.on_ack(1, 2, 0, false);
        for _ in 0..3 {
            s.on_ack(2, 2, 0, false);
        }
        assert_eq!(s.next_segment(2).map(|g| g.seq), Some(2));
        s.on_ack(3, 5, 0, false); // partial: 2..5 acked, 5 still missing
        assert_eq!(s.next_segment(3), Some(Segment { seq: 5, len_bytes: 1460, retx: true }));
        assert_eq!(s.stats().fast_retx, 1, "one recovery, two resends");
        assert_eq!(s.stats().retx_segs, 2);
    }

    #[test]
    fn timeout_goes_back_to_the_first_unacked_segment() {
        let mut s = sender(0);
        burst(&mut s, 0);
        let d = s.rto_deadline_ps().unwrap();
        assert_eq!(d, 200 * MS, "min RTO");
        assert!(!s.on_timer(d - 1));
        s.on_ack(1, 3, 0, false); // restarts the timer
        let d = s.rto_deadline_ps().unwrap();
        assert!(s.on_timer(d));
        assert_eq!(s.cwnd_segs(), 1.0);
        assert_eq!(s.rto_ps(), 400 * MS, "backed off");
        assert_eq!(burst(&mut s, d), vec![3]);
        assert_eq!(s.stats().timeouts, 1);
        // The receiver had 4..10: the ACK jumps, and sending resumes past it.
        s.on_ack(d + 1, 10, 0, false);
        // ssthresh = 7/2: the window is 3.5 segments.
        assert_eq!(burst(&mut s, d + 1), vec![10, 11, 12]);
    }

    #[test]
    fn sack_resends_every_hole_in_one_round_trip() {
        let mut s = sack(0);
        assert_eq!(burst(&mut s, 0), (0..10).collect::<Vec<_>>());
        // 2, 4 and 6 are lost; the others arrive, each ACK naming its segment.
        s.on_ack(1, 1, 0, false);
        s.on_ack(1, 2, 1, false);
        assert_eq!(burst(&mut s, 1), vec![10, 11, 12, 13]); // slow start: cwnd 12
        s.on_ack(2, 2, 3, false); // 3 arrived, and 2 was sent before it: 2 is lost
        assert_eq!(s.stats().fast_retx, 1);
        assert_eq!(s.cwnd_segs(), 6.0);
        // pipe = 12 outstanding - 1 SACKed - 1 lost = 10 ≥ 6: nothing may leave yet.
        assert!(s.next_segment(2).is_none());
        for trig in [5, 7, 8, 9, 10, 11, 12, 13] {
            s.on_ack(3, 2, trig, false);
        }
        // 4 and 6 are lost too; pipe = 12 - 9 - 3 = 0: the three holes go in one round trip.
        let sent: Vec<(u32, bool)> = std::iter::from_fn(|| s.next_segment(3).map(|g| (g.seq, g.retx))).collect();
        assert_eq!(sent, vec![(2, true), (4, true), (6, true), (14, false), (15, false), (16, false)]);
        assert_eq!(s.stats().fast_retx, 1, "one recovery");
        // The resends arrive: the cumulative ACK jumps past the recovery point.
        s.on_ack(4, 4, 2, false);
        s.on_ack(4, 6, 4, false);
        s.on_ack(4, 14, 6, false);
        assert_eq!(s.snd_una(), 14);
        assert_eq!(s.cwnd_segs(), 6.0, "recovery over at ssthresh");
        assert_eq!((s.stats().timeouts, s.stats().retx_segs), (0, 3));
    }

    #[test]
    fn sack_finds_a_lost_retransmission_without_a_timeout() {
        let mut s = sack(0);
        burst(&mut s, 0); // 0..10; 0 is lost
        for trig in 1..10 {
            s.on_ack(1, 0, trig, false);
        }
        let sent: Vec<(u32, bool)> = std::iter::from_fn(|| s.next_segment(1).map(|g| (g.seq, g.retx))).collect();
        assert_eq!(sent, vec![(0, true), (10, false), (11, false), (12, false), (13, false)]);
        // The resend of 0 is lost too: 10, sent after it, arrives first.
        s.on_ack(2, 0, 10, false);
        assert_eq!(s.next_segment(2).map(|g| (g.seq, g.retx)), Some((0, true)));
        assert_eq!((s.stats().timeouts, s.stats().retx_segs), (0, 2));
    }

    #[test]
    fn sack_timeout_resends_only_what_did_not_arrive() {
        let mut s = sack(0);
        burst(&mut s, 0); // 0..10; all lost but 5
        s.on_ack(1, 0, 5, false); // 0..5 lost by RACK, 6..10 still in flight
        let d = s.rto_deadline_ps().unwrap();
        while s.next_segment(1).is_some() {}
        assert!(s.on_timer(d));
        let resent = burst(&mut s, d);
        assert_eq!(resent, vec![0], "cwnd 1");
        s.on_ack(d + 1, 1, 0, false);
        s.on_ack(d + 1, 1, 0, false);
        let more = burst(&mut s, d + 1);
        assert!(!more.contains(&5), "5 was SACKed: {more:?}");
    }

    #[test]
    fn ecn_cuts_once_per_window() {
        let cfg = TcpConfig { ecn: EcnMode::Classic, ..TcpConfig::default() };
        let mut s = Sender::new(&cfg, 0, 10_000_000);
        burst(&mut s, 0);
        s.on_ack(1, 1, 0, true);
        assert_eq!(s.cwnd_segs(), 5.0);
        s.on_ack(1, 2, 1, true); // same window: no second cut (CA growth only)
        assert!(s.cwnd_segs() > 5.0 && s.cwnd_segs() < 5.5);
        assert_eq!(s.stats().ecn_cuts, 1);
        let cfg = TcpConfig { ecn: EcnMode::Dctcp, ..TcpConfig::default() };
        let mut s = Sender::new(&cfg, 0, 10_000_000);
        let mut t = 0;
        for _ in 0..40 {
            // 40 unmarked windows: α decays from 1 to 1 · (15/16)^40 ≈ 0.076.
            let sent = burst(&mut s, t);
            t += 1;
            for &q in &sent {
                s.on_ack(t, q + 1, q, false);
            }
        }
        burst(&mut s, t);
        let before = s.cwnd_segs();
        s.on_ack(t + 1, s.snd_una() + 1, s.snd_una(), true);
        let ratio = s.cwnd_segs() / before;
        assert!(ratio > 0.95 && ratio < 0.97, "cut by α/2 ≈ 4 %: {ratio}");
        assert_eq!(s.stats().ecn_cuts, 1);
    }
}
