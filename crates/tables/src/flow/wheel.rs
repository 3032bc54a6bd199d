//! A single-level timer wheel over entry indices, linked intrusively (no allocation after build).
//!
//! Time is cut into ticks of `2^shift` ns; the wheel has `N` (a power of two) slots, slot
//! `t mod N` holding the entries scheduled for tick `t`. An entry with deadline `d` is scheduled
//! for tick `ceil(d / 2^shift)`, clamped to `[next, next + N - 1]` where `next` is the first
//! tick not yet fully processed — so a slot only ever holds one tick's entries, and deadlines
//! beyond the horizon simply come round again (the caller re-schedules them). This is Varghese
//! and Lauck's "scheme 4" (SOSP 1987) with lazy re-scheduling, as in Linux's timer wheel:
//!
//! ```text
//!   heads[N]:  [t=next] ─▶ e7 ⇄ e3 ⇄ e9      each entry: next, prev (prev of a head = slot|HEAD)
//!              [next+1] ─▶ ·
//!              [next+2] ─▶ e1
//! ```
//! Scheduling and unscheduling are O(1); [`Wheel::pop_due`] walks ticks up to `now` and hands
//! back one due entry at a time, so the caller can bound work per call. The flow table keeps the
//! real deadline in the entry and moves an entry only when its deadline moves *earlier* than its
//! tick; a later deadline is discovered when the tick comes round (one re-link per timeout
//! period instead of one per packet).

/// No entry.
pub const NIL: u32 = u32::MAX;
/// Tag in `prev`: this entry is the head of slot `prev & !HEAD`.
const HEAD: u32 = 1 << 31;

/// Links of one entry (8 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Link {
    next: u32,
    /// Previous entry, or `HEAD | slot` for a list head, or `NIL` when not scheduled.
    prev: u32,
}

/// The timer wheel. Control path and worker only (single owner).
#[derive(Clone, Debug)]
pub struct Wheel {
    heads: Vec<u32>,
    links: Vec<Link>,
    shift: u32,
    /// First tick whose slot is not yet fully processed.
    next: u64,
    /// Entries scheduled.
    len: usize,
}

impl Wheel {
    /// A wheel for entries `0..capacity` with `slots` slots (rounded up to a power of two, at
    /// least 2) of `2^shift` ns each. `capacity` must be below 2^31.
    pub fn new(capacity: u32, slots: u32, shift: u32) -> Wheel {
        let slots = slots.max(2).next_power_of_two().min(HEAD) as usize;
        Wheel {
            heads: vec![NIL; slots],
            links: vec![Link { next: NIL, prev: NIL }; capacity as usize],
            shift: shift.min(63),
            next: 0,
            len: 0,
        }
    }

    /// Number of scheduled entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is scheduled.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes used per entry (links) plus the slot heads.
    pub fn memory_bytes(&self) -> usize {
        self.heads.len() * 4 + self.links.len() * 8
    }

    /// True when `idx` is scheduled.
    #[inline]
    pub fn is_scheduled(&self, idx: u32) -> bool {
        self.links.get(idx as usize).is_some_and(|l| l.prev != NIL)
    }

    /// The tick an entry with deadline `deadline_ns` goes to.
    #[inline]
    fn tick_for(&self, deadline_ns: u64) -> u64 {
        let t = deadline_ns.div_ceil(1u64 << self.shift);
        t.clamp(self.next, self.next + self.heads.len() as u64 - 1)
    }

    /// First nanosecond of tick `t`.
    #[inline]
    pub fn tick_start_ns(&self, t: u64) -> u64 {
        t.saturating_mul(1u64 << self.shift)
    }

    /// The time up to which every tick has been processed: deadlines at or before it are gone.
    #[inline]
    pub fn horizon_ns(&self) -> u64 {
        self.tick_start_ns(self.next.saturating_sub(1))
    }

    /// Schedules `idx` (which must not be scheduled) for `deadline_ns`.
    pub fn schedule(&mut self, idx: u32, deadline_ns: u64) {
        let mask = self.heads.len() - 1;
        let slot = (self.tick_for(deadline_ns) as usize) & mask;
        let Some(head) = self.heads.get(slot).copied() else { return };
        if let Some(l) = self.links.get_mut(idx as usize) {
            debug_assert_eq!(l.prev, NIL, "entry {idx} scheduled twice");
            *l = Link { next: head, prev: HEAD | slot as u32 };
        } else {
            return;
        }
        if let Some(h) = self.links.get_mut(head as usize) {
            h.prev = idx;
        }
        self.heads[slot] = idx;
        self.len += 1;
    }

    /// Removes `idx` from its slot; no-op when it is not scheduled.
    pub fn unschedule(&mut self, idx: u32) {
        let Some(l) = self.links.get(idx as usize).copied() else { return };
        if l.prev == NIL {
            return;
        }
        if l.prev & HEAD != 0 {
            if let Some(h) = self.heads.get_mut((l.prev & !HEAD) as usize) {
                *h = l.next;
            }
        } else if let Some(p) = self.links.get_mut(l.prev as usize) {
            p.next = l.next;
        }
        if let Some(n) = self.links.get_mut(l.next as usize) {
            n.prev = l.prev;
        }
        self.links[idx as usize] = Link { next: NIL, prev: NIL };
        self.len -= 1;
    }

    /// Moves `idx` to the tick of `deadline_ns` (scheduling it if it was not).
    pub fn reschedule(&mut self, idx: u32, deadline_ns: u64) {
        self.unschedule(idx);
        self.schedule(idx, deadline_ns);
    }

    /// Takes the next entry of a due tick (a tick whose start is `<= now_ns`) off the wheel and
    /// returns it with that tick's start time, or `None` when no tick up to `now_ns` holds
    /// anything. Walking empty ticks is O(ticks passed); an empty wheel jumps straight to `now`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<(u32, u64)> {
        let now_tick = now_ns >> self.shift;
        let mask = self.heads.len() - 1;
        loop {
            if self.next > now_tick {
                return None;
            }
            if self.len == 0 {
                self.next = now_tick + 1;
                return None;
            }
            let slot = (self.next as usize) & mask;
            let head = self.heads.get(slot).copied().unwrap_or(NIL);
            if head != NIL {
                self.unschedule(head);
                return Some((head, self.tick_start_ns(self.next)));
            }
            self.next += 1;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_out_at_their_tick_in_any_order() {
        // 1 s ticks (2^30 ns ~ 1.07 s), 8 slots.
        let mut w = Wheel::new(16, 8, 30);
        let t = 1u64 << 30;
        w.schedule(0, 3 * t);
        w.schedule(1, t + 1); // -> tick 2
        w.schedule(2, 2 * t);
        w.schedule(3, 100 * t); // beyond the horizon: clamped to tick 7
        assert_eq!(w.len(), 4);
        assert_eq!(w.pop_due(t), None);
        let mut due: Vec<u32> = std::iter::from_fn(|| w.pop_due(2 * t).map(|(i, _)| i)).collect();
        due.sort();
        assert_eq!(due, vec![1, 2]);
        assert_eq!(w.pop_due(3 * t), Some((0, 3 * t)));
        assert_eq!(w.pop_due(6 * t), None);
        assert_eq!(w.pop_due(7 * t), Some((3, 7 * t)));
        assert!(w.is_empty());
    }

    #[test]
    fn unschedule_from_head_middle_and_tail() {
        let mut w = Wheel::new(8, 4, 0);
        for i in 0..5 {
            w.schedule(i, 2);
        }
        w.unschedule(4); // head
        w.unschedule(2); // middle
        w.unschedule(0); // tail
        w.unschedule(0); // no-op
        assert_eq!(w.len(), 2);
        assert!(!w.is_scheduled(0) && w.is_scheduled(1));
        let mut due: Vec<u32> = std::iter::from_fn(|| w.pop_due(2).map(|(i, _)| i)).collect();
        due.sort();
        assert_eq!(due, vec![1, 3]);
        w.reschedule(1, 5);
        assert_eq!(w.pop_due(4), None);
        assert_eq!(w.pop_due(5), Some((1, 5)));
    }

    #[test]
    fn past_deadlines_go_to_the_current_tick_and_empty_wheel_jumps() {
        let mut w = Wheel::new(4, 4, 0);
        assert_eq!(w.pop_due(1_000_000), None); // empty: jumps
        w.schedule(0, 5); // in the past: tick 1_000_001
        assert_eq!(w.pop_due(1_000_000), None);
        assert_eq!(w.pop_due(1_000_001), Some((0, 1_000_001)));
    }
}
