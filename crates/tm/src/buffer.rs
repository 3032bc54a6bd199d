//! The shared buffer: one pool of bytes and packet descriptors for every queue of the traffic
//! manager, with a reservation per queue and Choudhury–Hahne dynamic thresholds.
//!
//! ```text
//!   total_bytes
//!   ┌──────────────────────────┬──────────────────────────────────────────────────┐
//!   │ reserved: Σ min_q        │ shared: S = total − Σ min_q                       │
//!   │ (queue q always gets its │ used: U = Σ max(0, len_q − min_q)   free F = S−U   │
//!   │  first min_q bytes)      │                                                  │
//!   └──────────────────────────┴──────────────────────────────────────────────────┘
//!
//!   admit L bytes to q:   len_q + L ≤ min_q                  → yes (reserved part)
//!                         shared part of L > F               → BufferFull
//!                         max(0, len_q − min_q) ≥ α_q · F     → Threshold
//!                         otherwise                          → yes
//! ```
//!
//! The dynamic threshold (Choudhury and Hahne, "Dynamic queue length thresholds for
//! shared-memory packet switches", IEEE/ACM ToN 1998): a queue may take more of the shared
//! buffer only while its share is below α times what is still free. In steady state with `n`
//! congested queues of equal α each holds `q = α(S − nq)`, i.e. **α/(1+nα) of S**, and
//! `S/(1+nα)` stays free as headroom for queues that become active; a single congested queue
//! cannot starve the others.
//!
//! **α as a power of two.** α = 2ⁿ with n in −4..=3, the encoding of SAI's
//! `SAI_BUFFER_PROFILE_ATTR_SHARED_DYNAMIC_TH` (SONiC lossy profiles use n = 3, α = 8; lossless
//! n = −4, α = 1/16). `α · F` is then a shift: no multiply or divide per packet. A rational α
//! would cost a multiply and give no setting SONiC uses.
//!
//! Descriptors are a second resource: at most `total_pkts` packets are queued at once
//! (BufferFull beyond). Thresholds apply to bytes only.

use crate::TmDrop;

/// The shared pool's accounting. Worker only. `Copy` (four integers), so a burst loop can work
/// on a local copy that stays in registers and write it back once.
#[derive(Clone, Copy, Debug)]
pub struct SharedBuffer {
    shared_bytes: u64,
    shared_used: u64,
    total_pkts: u32,
    used_pkts: u32,
}

/// `α · free` for α = 2^`alpha_log2` (−4..=3).
#[inline]
pub fn alpha_times(free: u64, alpha_log2: i8) -> u64 {
    if alpha_log2 >= 0 {
        free << (alpha_log2 as u32 & 7)
    } else {
        free >> (alpha_log2.unsigned_abs() as u32 & 7)
    }
}

impl SharedBuffer {
    /// A buffer of `total_bytes` and `total_pkts`, of which `reserved_bytes` are the queues'
    /// reservations.
    pub fn new(total_bytes: u64, total_pkts: u32, reserved_bytes: u64) -> SharedBuffer {
        SharedBuffer { shared_bytes: total_bytes.saturating_sub(reserved_bytes), shared_used: 0, total_pkts, used_pkts: 0 }
    }

    /// Decides whether `len` bytes may join a queue holding `q_bytes` with reservation
    /// `min_bytes` and threshold exponent `alpha_log2`. On `Ok` the caller must
    /// [`take`](Self::take) them. Never panics.
    ///
    /// # Errors
    /// `TmDrop::BufferFull` when the descriptors or the shared bytes are exhausted,
    /// `TmDrop::Threshold` when the queue is at its dynamic threshold.
    #[inline]
    pub fn admit(&self, q_bytes: u64, min_bytes: u64, alpha_log2: i8, len: u64) -> Result<(), TmDrop> {
        if self.used_pkts >= self.total_pkts {
            return Err(TmDrop::BufferFull);
        }
        let after = q_bytes + len;
        if after <= min_bytes {
            return Ok(());
        }
        let need = after - q_bytes.max(min_bytes);
        let free = self.shared_bytes - self.shared_used;
        if need > free {
            return Err(TmDrop::BufferFull);
        }
        if q_bytes.saturating_sub(min_bytes) >= alpha_times(free, alpha_log2) {
            return Err(TmDrop::Threshold);
        }
        Ok(())
    }

    /// [`admit`](Self::admit) and, on `Ok`, [`take`](Self::take), in one pass (the packet path).
    ///
    /// # Errors
    /// As [`admit`](Self::admit); nothing is taken then.
    #[inline]
    pub fn try_take(&mut self, q_bytes: u64, min_bytes: u64, alpha_log2: i8, len: u64) -> Result<(), TmDrop> {
        if self.used_pkts >= self.total_pkts {
            return Err(TmDrop::BufferFull);
        }
        let after = q_bytes + len;
        if after > min_bytes {
            let need = after - q_bytes.max(min_bytes);
            let free = self.shared_bytes - self.shared_used;
            if need > free {
                return Err(TmDrop::BufferFull);
            }
            if q_bytes.saturating_sub(min_bytes) >= alpha_times(free, alpha_log2) {
                return Err(TmDrop::Threshold);
            }
            self.shared_used += need;
        }
        self.used_pkts += 1;
        Ok(())
    }

    /// Accounts `len` bytes joining a queue that held `q_bytes` (reservation `min_bytes`).
    #[inline]
    pub fn take(&mut self, q_bytes: u64, min_bytes: u64, len: u64) {
        let after = q_bytes + len;
        self.shared_used += after.saturating_sub(q_bytes.max(min_bytes));
        self.used_pkts += 1;
    }

    /// Descriptors still free.
    #[inline]
    pub fn free_pkts(&self) -> u64 {
        u64::from(self.total_pkts.saturating_sub(self.used_pkts))
    }

    /// Accounts a whole burst admitted at once: `shared` bytes out of the shared part (the
    /// caller checked they are free) and `pkts` descriptors.
    #[inline]
    pub fn take_shared(&mut self, shared: u64, pkts: u32) {
        self.shared_used += shared;
        self.used_pkts += pkts;
    }

    /// Accounts a whole burst leaving at once: `shared` bytes back to the shared part and
    /// `pkts` descriptors.
    #[inline]
    pub fn give_shared(&mut self, shared: u64, pkts: u32) {
        self.shared_used -= shared;
        self.used_pkts -= pkts;
    }

    /// Accounts `len` bytes leaving a queue that held `q_bytes` (reservation `min_bytes`).
    #[inline]
    pub fn give(&mut self, q_bytes: u64, min_bytes: u64, len: u64) {
        self.shared_used -= len.min(q_bytes.saturating_sub(min_bytes));
        self.used_pkts -= 1;
    }

    /// Free shared bytes.
    pub fn free_bytes(&self) -> u64 {
        self.shared_bytes - self.shared_used
    }

    /// Shared bytes in use.
    pub fn used_bytes(&self) -> u64 {
        self.shared_used
    }

    /// Size of the shared (unreserved) part, bytes.
    pub fn shared_bytes(&self) -> u64 {
        self.shared_bytes
    }

    /// Packets held.
    pub fn used_pkts(&self) -> u32 {
        self.used_pkts
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    /// Fills `n` queues with `pkt`-byte packets round-robin until every one is refused; returns
    /// each queue's bytes.
    fn congest(buf: &mut SharedBuffer, n: usize, min: u64, alpha: i8, pkt: u64) -> Vec<u64> {
        let mut q = vec![0u64; n];
        let mut refused = vec![false; n];
        while refused.iter().any(|r| !r) {
            for i in 0..n {
                let ok = buf.admit(q[i], min, alpha, pkt);
                let mut twin = *buf;
                assert_eq!(twin.try_take(q[i], min, alpha, pkt), ok);
                match ok {
                    Ok(()) => {
                        buf.take(q[i], min, pkt);
                        assert_eq!((twin.used_bytes(), twin.used_pkts()), (buf.used_bytes(), buf.used_pkts()));
                        q[i] += pkt;
                        refused[i] = false;
                    }
                    Err(_) => refused[i] = true,
                }
            }
        }
        q
    }

    #[test]
    fn one_congested_queue_takes_alpha_over_one_plus_alpha() {
        for alpha in -4i8..=3 {
            let s = 1u64 << 24;
            let pkt = 256;
            let mut buf = SharedBuffer::new(s, u32::MAX, 0);
            let q = congest(&mut buf, 1, 0, alpha, pkt);
            let a = 2f64.powi(i32::from(alpha));
            let expect = a / (1.0 + a) * s as f64;
            assert!((q[0] as f64 - expect).abs() <= pkt as f64, "alpha 2^{alpha}: {} vs {expect}", q[0]);
        }
    }

    #[test]
    fn two_congested_queues_each_take_alpha_over_one_plus_two_alpha() {
        for alpha in -4i8..=3 {
            let s = 1u64 << 24;
            let pkt = 128;
            let mut buf = SharedBuffer::new(s, u32::MAX, 0);
            let q = congest(&mut buf, 2, 0, alpha, pkt);
            let a = 2f64.powi(i32::from(alpha));
            let expect = a / (1.0 + 2.0 * a) * s as f64;
            for (i, &qi) in q.iter().enumerate() {
                assert!((qi as f64 - expect).abs() <= 2.0 * pkt as f64, "alpha 2^{alpha} q{i}: {qi} vs {expect}");
            }
        }
    }

    #[test]
    fn reservation_is_always_admitted_and_not_shared() {
        // 1000 shared + 2 × 500 reserved.
        let mut buf = SharedBuffer::new(2000, 100, 1000);
        // Queue A takes all it can of the shared part (α = 8).
        let qa = congest(&mut buf, 1, 500, 3, 100);
        assert!(qa[0] >= 500 + 800, "A holds its 500 reserved + most of the shared");
        // Queue B still gets its 500 reserved bytes.
        let mut qb = 0;
        for _ in 0..5 {
            assert_eq!(buf.admit(qb, 500, 3, 100), Ok(()));
            buf.take(qb, 500, 100);
            qb += 100;
        }
        // Past its reservation B competes for what A left free (F = 100, 8·F > 0).
        assert_eq!(buf.free_bytes(), 100);
        assert_eq!(buf.admit(qb, 500, 3, 100), Ok(()));
        assert_eq!(buf.admit(qb, 500, 3, 101), Err(TmDrop::BufferFull));
        // Everything returned leaves the accounting at zero.
        let mut qa = qa[0];
        while qa > 0 {
            buf.give(qa, 500, 100);
            qa -= 100;
        }
        while qb > 0 {
            buf.give(qb, 500, 100);
            qb -= 100;
        }
        assert_eq!((buf.used_bytes(), buf.used_pkts()), (0, 0));
    }

    #[test]
    fn descriptors_run_out() {
        let mut buf = SharedBuffer::new(1 << 20, 3, 0);
        for i in 0..3 {
            assert_eq!(buf.admit(i * 64, 0, 3, 64), Ok(()));
            buf.take(i * 64, 0, 64);
        }
        assert_eq!(buf.admit(192, 0, 3, 64), Err(TmDrop::BufferFull));
    }
}
