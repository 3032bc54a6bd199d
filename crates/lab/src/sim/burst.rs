//! Burst absorption: `senders` hosts each send `n` back-to-back frames at line rate, all
//! starting at the same instant, to one port of the same rate. With K senders the queue grows
//! by (K − 1) frames per frame time, so a burst of B bytes in all peaks at (K − 1)/K · B:
//! 2-to-1 absorbs twice the queue's room, 4-to-1 4/3 of it.
//!
//! The largest burst with no loss is found in one run, not by a search: the senders send
//! without end, and the first packet dropped has some index `d` in its sender's stream. A
//! burst of `n ≤ d` frames per sender is the same run cut short, with every packet in it
//! arriving before that drop, so it loses nothing; a burst of `d + 1` contains the dropped
//! packet, with the same history up to it. So the answer is `d` frames per sender.
//! [`max_lossless`] checks it by running `d` frames per sender to the end (no loss) and
//! reports that run's peak occupancy.

use super::engine::{ser_ps, EventQueue};
use super::switch::{BufferModel, SwitchConfig, WIRE_OVERHEAD};
use super::SimError;
use fastpath_packet::PktId;
use fastpath_tm::{Desc, Enq, Tm};

/// One burst experiment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurstConfig {
    /// The switch and its links.
    pub switch: SwitchConfig,
    /// Sender hosts (≥ 2, < ports).
    pub senders: u32,
    /// Frame size, bytes (with FCS; the wire adds 20).
    pub frame_bytes: u32,
}

/// What one burst run saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BurstRun {
    /// Frames offered, all senders.
    pub offered_pkts: u64,
    /// Frames the TM dropped.
    pub drops: u64,
    /// Index in its sender's stream of the first frame dropped.
    pub first_drop_index: Option<u64>,
    /// Peak occupancy of the receiver's queue, bytes.
    pub hwm_bytes: u64,
}

/// The largest burst absorbed with zero loss.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurstResult {
    /// The buffer model.
    pub model: BufferModel,
    /// Senders.
    pub senders: u32,
    /// Frame size, bytes.
    pub frame_bytes: u32,
    /// Frames per sender in the largest lossless burst.
    pub pkts_per_sender: u64,
    /// The burst's bytes, all senders (frames × size).
    pub burst_bytes: u64,
    /// Peak occupancy during that burst, bytes.
    pub hwm_bytes: u64,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Arrive(u32),
    EgressFree,
}

/// Runs a burst of `pkts_per_sender` frames from each sender (`u64::MAX`: until the first drop).
///
/// # Errors
/// A configuration the switch or the TM refuses.
pub fn run(cfg: &BurstConfig, model: BufferModel, pkts_per_sender: u64) -> Result<BurstRun, SimError> {
    let sw = &cfg.switch;
    if cfg.senders < 2 || cfg.senders >= sw.ports {
        return Err(SimError::Config(format!(
            "burst senders must be 2..{} (one port each, port 0 is the receiver's), not {}",
            sw.ports, cfg.senders
        )));
    }
    if cfg.frame_bytes < 64 || sw.rate_bps == 0 {
        return Err(SimError::Config(format!("frame size {} below 64 bytes, or a zero rate", cfg.frame_bytes)));
    }
    let mut swc = *sw;
    swc.min_frame_bytes = cfg.frame_bytes;
    let mut tm = Tm::build(&swc.tm_config(model)).map_err(SimError::Tm)?;
    // Without end, the stream stops at the first drop; it must come by the time one sender
    // alone has sent twice the whole buffer (the queue grows by ≥ ½ frame per arrival).
    let cap = 2 * (sw.buffer_bytes / u64::from(cfg.frame_bytes)) + 2;
    let n = pkts_per_sender.min(cap);
    let ser = ser_ps(u64::from(cfg.frame_bytes + WIRE_OVERHEAD), sw.rate_bps);
    let mut q = EventQueue::new();
    let mut sent = vec![0u64; cfg.senders as usize];
    if n > 0 {
        for s in 0..cfg.senders {
            q.schedule(ser + sw.prop_ps, Ev::Arrive(s));
        }
    }
    let mut r = BurstRun::default();
    let mut busy = false;
    let mut left = u64::from(cfg.senders) * n;
    let mut out = [Desc::default()];
    while let Some((now, ev)) = q.pop() {
        match ev {
            Ev::Arrive(s) => {
                let j = sent[s as usize];
                sent[s as usize] += 1;
                left -= 1;
                r.offered_pkts += 1;
                if j + 1 < n {
                    q.schedule(now + ser, Ev::Arrive(s));
                }
                let d = Desc { pkt: PktId(s), len_bytes: sw.buffer_bytes_of(cfg.frame_bytes), ..Desc::default() };
                let mut res = [Enq::Queued];
                tm.enqueue_burst(0, &[d], now / 1000, &mut res);
                if let Enq::Dropped(_) = res[0] {
                    r.drops += 1;
                    if r.first_drop_index.is_none() {
                        r.first_drop_index = Some(j);
                        if pkts_per_sender == u64::MAX {
                            break;
                        }
                    }
                }
            }
            Ev::EgressFree => busy = false,
        }
        if left == 0 {
            break; // drops happen only on arrival: the drain changes nothing measured
        }
        if !busy && tm.dequeue_burst(0, 1, now / 1000, &mut out) == 1 {
            busy = true;
            q.schedule(now + ser, Ev::EgressFree);
        }
    }
    r.hwm_bytes = tm.port_counters(0).map_or(0, |c| c.hwm_bytes);
    Ok(r)
}

/// The largest burst `cfg` absorbs under `model` with zero loss (see the module's argument),
/// confirmed by a run of that size.
///
/// # Errors
/// A configuration the switch or the TM refuses, or a confirmation run that lost packets (a
/// bug in the argument, which the tests check).
pub fn max_lossless(cfg: &BurstConfig, model: BufferModel) -> Result<BurstResult, SimError> {
    let unbounded = run(cfg, model, u64::MAX)?;
    let d = unbounded.first_drop_index.ok_or_else(|| SimError::Config("the stream never overflowed the buffer".into()))?;
    let check = run(cfg, model, d)?;
    if check.drops > 0 {
        return Err(SimError::Config(format!("a burst of {d} frames per sender lost {} packets", check.drops)));
    }
    Ok(BurstResult {
        model,
        senders: cfg.senders,
        frame_bytes: cfg.frame_bytes,
        pkts_per_sender: d,
        burst_bytes: d * u64::from(cfg.senders) * u64::from(cfg.frame_bytes),
        hwm_bytes: check.hwm_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(senders: u32, frame: u32) -> BurstConfig {
        BurstConfig {
            switch: SwitchConfig { ports: 8, rate_bps: 10_000_000_000, buffer_bytes: 1 << 20, ..SwitchConfig::default() },
            senders,
            frame_bytes: frame,
        }
    }

    #[test]
    fn the_one_run_answer_is_exact() {
        for (k, f) in [(2, 1518), (4, 192), (3, 9216)] {
            for m in BufferModel::ALL {
                let c = cfg(k, f);
                let r = max_lossless(&c, m).unwrap();
                assert_eq!(run(&c, m, r.pkts_per_sender).unwrap().drops, 0);
                assert!(run(&c, m, r.pkts_per_sender + 1).unwrap().drops > 0, "{k} {f} {m:?}");
            }
        }
    }

    #[test]
    fn shared_absorbs_what_dynamic_thresholds_predict_and_static_does_not() {
        // α = 8: one queue holds 8/9 of 1 MiB; 2-to-1 peaks at half the burst.
        let c = cfg(2, 1024);
        let s = max_lossless(&c, BufferModel::Shared).unwrap();
        let t = max_lossless(&c, BufferModel::Static).unwrap();
        let room = c.switch.queue_cap_bytes(BufferModel::Shared) as f64;
        let want = 2.0 * room;
        assert!((s.burst_bytes as f64 - want).abs() < 0.01 * want, "{} vs {want}", s.burst_bytes);
        let want = 2.0 * ((1 << 20) / 8) as f64;
        assert!((t.burst_bytes as f64 - want).abs() < 0.02 * want, "{} vs {want}", t.burst_bytes);
        assert!(s.burst_bytes > 6 * t.burst_bytes);
        // A packet is admitted while the queue is below the threshold, so it may end one frame above.
        assert!(s.hwm_bytes as f64 <= room + 1024.0 && s.hwm_bytes as f64 > 0.98 * room, "{} vs {room}", s.hwm_bytes);
        // 4-to-1 peaks at ¾ of the burst.
        let s4 = max_lossless(&cfg(4, 1024), BufferModel::Shared).unwrap();
        assert!((s4.burst_bytes as f64 - room * 4.0 / 3.0).abs() < 0.01 * room, "{}", s4.burst_bytes);
    }

    #[test]
    fn one_sender_cannot_overflow_and_is_refused() {
        assert!(max_lossless(&cfg(1, 1518), BufferModel::Shared).is_err());
    }

    #[test]
    fn cells_waste_buffer_on_frames_that_do_not_fill_them() {
        let mut c = cfg(2, 209); // two 208-byte cells for 209 bytes: half the memory wasted
        let exact = max_lossless(&c, BufferModel::Shared).unwrap();
        c.switch.cell_bytes = 208;
        let cells = max_lossless(&c, BufferModel::Shared).unwrap();
        let ratio = cells.burst_bytes as f64 / exact.burst_bytes as f64;
        assert!((ratio - 209.0 / 416.0).abs() < 0.01, "{ratio}");
        c.frame_bytes = 416; // exactly two cells: nothing wasted
        let full = max_lossless(&c, BufferModel::Shared).unwrap();
        assert!((full.burst_bytes as f64 / exact.burst_bytes as f64 - 1.0).abs() < 0.01);
    }
}
