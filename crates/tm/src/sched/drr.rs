//! Deficit round robin (Shreedhar and Varghese, "Efficient fair queuing using deficit round
//! robin", SIGCOMM 1995) over at most 8 classes, in bytes.
//!
//! Each DRR class has a quantum (weight × the port's quantum unit) and a deficit counter. The
//! non-empty classes sit in an active list, in the order they became non-empty:
//!
//! ```text
//!   active list:  [2] ─▶ [5] ─▶ [0]           head = 2
//!
//!   visit head c:  deficit[c] += quantum[c]           (once per visit: `granted`)
//!                  while head packet of c ≤ deficit[c]:  send it, deficit[c] −= its length
//!                  c empty       → deficit[c] = 0, drop c from the list
//!                  packet too big → move c to the tail, keep deficit[c]
//!   a class that becomes non-empty joins at the tail (a flat port adds the classes that
//!   became non-empty in one enqueue burst at its end, highest class first).
//! ```
//!
//! Over a busy period class i sends `weight_i / Σ weight` of the bytes, within one maximum
//! packet plus one quantum per class (the paper's Lemma 2); each packet costs O(1) when the
//! quantum unit is at least one maximum packet. This implementation keeps the visit *open*
//! between calls (`granted`), so a dequeue that stops in the middle of a class's turn (budget
//! spent, port shaper) resumes it without a second quantum. A class whose own shaper refuses
//! its head packet is skipped like a packet that does not fit: it moves to the tail with its
//! deficit, and if every listed class is refused the DRR yields nothing this time.

/// How a batched turn ended (see [`Drr::close`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// The class has no packet left.
    Empty,
    /// The budget ran out; the turn resumes at the next call.
    Open,
    /// The head packet did not fit the deficit.
    Done,
}

/// DRR state for the non-strict classes of one port: 72 bytes.
///
/// The active list is packed into one `u32`, one class per nibble, the head in the lowest:
/// reading the head, popping it, appending and rotating are each a shift and a mask, with no
/// memory access. A flat port's batched dequeue (`port::FlatPort`, plain ports) keeps the list
/// in a register through its turns and works on the fields directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drr {
    pub(crate) list: u32,
    pub(crate) len: u8,
    pub(crate) granted: bool,
    pub(crate) deficit: [u32; 8],
    pub(crate) quantum: [u32; 8],
}

/// For each mask of classes, the packed list of its classes, highest first (a class per
/// nibble, the first in the lowest), and how many there are.
const JOIN: [(u32, u8); 256] = {
    let mut t = [(0u32, 0u8); 256];
    let mut m = 0;
    while m < 256 {
        let (mut nibbles, mut count, mut c) = (0u32, 0u8, 8);
        while c > 0 {
            c -= 1;
            if m >> c & 1 != 0 {
                nibbles |= (c as u32) << (count * 4);
                count += 1;
            }
        }
        t[m] = (nibbles, count);
        m += 1;
    }
    t
};

impl Drr {
    /// A DRR with `quantum[c]` bytes per visit for class `c`.
    pub fn new(quantum: [u32; 8]) -> Drr {
        Drr { list: 0, len: 0, granted: false, deficit: [0; 8], quantum }
    }

    /// Class `c` became non-empty: it joins the tail of the active list. Must not be listed.
    #[inline]
    pub fn activate(&mut self, c: usize) {
        debug_assert!(self.len < 8);
        self.list |= ((c & 7) as u32) << ((u32::from(self.len) * 4) & 31);
        self.len += 1;
    }

    /// The classes of `mask` join the tail of the active list together, highest class first
    /// (one table lookup: the packed nibbles and the count of each of the 256 masks). None of
    /// them may be listed.
    #[inline]
    pub fn activate_all(&mut self, mask: u8) {
        let (nibbles, count) = JOIN[usize::from(mask)];
        debug_assert!(usize::from(self.len) + usize::from(count) <= 8);
        // A shift by 32 (eight listed classes and an empty mask) would overflow: nibbles is 0
        // then, and so is the wrapped shift's contribution.
        self.list |= nibbles.checked_shl(u32::from(self.len) * 4).unwrap_or(0);
        self.len += count;
    }

    /// True when the active list is exactly the classes of `mask`, highest first (as one
    /// burst from an empty port lists them).
    #[inline]
    pub(crate) fn is_descending(&self, mask: u8) -> bool {
        let (nibbles, count) = JOIN[usize::from(mask)];
        self.list == nibbles && self.len == count
    }

    /// Drops the head class from the list.
    #[inline]
    fn pop_head(&mut self) {
        self.list >>= 4;
        self.len -= 1;
        self.granted = false;
    }

    /// Classes in the active list.
    pub fn active_len(&self) -> usize {
        usize::from(self.len)
    }

    /// A class's deficit, bytes.
    pub fn deficit(&self, c: usize) -> u32 {
        self.deficit.get(c).copied().unwrap_or(0)
    }

    #[inline]
    fn rotate(&mut self) {
        let c = self.list & 0xf;
        self.list = (self.list >> 4) | c << ((u32::from(self.len).wrapping_sub(1) * 4) & 31);
        self.granted = false;
    }

    /// The class whose head packet goes next, or `None` when no listed class may send.
    /// `head_len(c)` returns the length of class `c`'s head packet, or `None` when its shaper
    /// refuses it now. Does not remove the packet: call [`served`](Self::served) when it left.
    #[inline]
    pub fn select(&mut self, mut head_len: impl FnMut(usize) -> Option<u32>) -> Option<usize> {
        let mut refused = 0u8;
        while self.len > 0 {
            let c = (self.list & 7) as usize;
            let Some(len) = head_len(c) else {
                refused += 1;
                self.rotate();
                if refused >= self.len {
                    return None;
                }
                continue;
            };
            refused = 0;
            if !self.granted {
                self.deficit[c] = self.deficit[c].saturating_add(self.quantum[c]);
                self.granted = true;
            }
            if len <= self.deficit[c] {
                return Some(c);
            }
            self.rotate();
        }
        None
    }

    /// The class at the head of the active list, if any (the batched path: [`open`](Self::open),
    /// send while packets fit, then [`close`](Self::close)).
    #[inline]
    pub fn head(&self) -> Option<usize> {
        if self.len == 0 {
            None
        } else {
            Some((self.list & 7) as usize)
        }
    }

    /// Opens (or resumes) the turn of `c`, the head class: its deficit, after one quantum if
    /// the turn is new.
    #[inline]
    pub fn open(&mut self, c: usize) -> u32 {
        let c = c & 7;
        if !self.granted {
            self.deficit[c] = self.deficit[c].saturating_add(self.quantum[c]);
            self.granted = true;
        }
        self.deficit[c]
    }

    /// Ends the batched turn of `c`, the head class, with `deficit` left: `Turn::Empty` leaves
    /// the list (deficit reset), `Turn::Open` keeps the turn for the next call (the budget ran
    /// out), `Turn::Done` moves `c` to the tail (its head packet did not fit).
    #[inline]
    pub fn close(&mut self, c: usize, deficit: u32, turn: Turn) {
        let c = c & 7;
        match turn {
            Turn::Empty => {
                self.deficit[c] = 0;
                self.pop_head();
            }
            Turn::Open => self.deficit[c] = deficit,
            Turn::Done => {
                self.deficit[c] = deficit;
                self.rotate();
            }
        }
    }

    /// The head packet (`len` bytes) of `c`, the class [`select`](Self::select) returned, left;
    /// `now_empty` says whether `c` has no packet left.
    #[inline]
    pub fn served(&mut self, c: usize, len: u32, now_empty: bool) {
        let c = c & 7;
        self.deficit[c] = self.deficit[c].saturating_sub(len);
        if now_empty {
            self.deficit[c] = 0;
            self.pop_head();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Three always-backlogged classes with weights 1:2:5 and random packet sizes: byte shares
    /// match the weights within one maximum packet (plus one quantum) per class.
    #[test]
    fn byte_shares_follow_weights() {
        let unit = 1500u32;
        let weights = [1u32, 2, 5];
        let mut q = [0u32; 8];
        for (i, w) in weights.iter().enumerate() {
            q[i] = w * unit;
        }
        let mut drr = Drr::new(q);
        let mut queues: Vec<VecDeque<u32>> = vec![VecDeque::new(); 3];
        let mut seed = 12345u64;
        let mut next_len = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            64 + (seed % 1437) as u32
        };
        for (c, qu) in queues.iter_mut().enumerate() {
            for _ in 0..4 {
                qu.push_back(next_len());
            }
            drr.activate(c);
        }
        let mut sent = [0u64; 3];
        for _ in 0..200_000 {
            let c = drr.select(|c| queues[c].front().copied()).unwrap();
            let len = queues[c].pop_front().unwrap();
            sent[c] += u64::from(len);
            queues[c].push_back(next_len()); // stays backlogged
            drr.served(c, len, false);
        }
        let total: u64 = sent.iter().sum();
        let wsum: u32 = weights.iter().sum();
        for c in 0..3 {
            let ideal = total as f64 * f64::from(weights[c]) / f64::from(wsum);
            let err = (sent[c] as f64 - ideal).abs();
            assert!(err <= f64::from(1500 + q[c]), "class {c}: {} vs {ideal} (err {err})", sent[c]);
        }
    }

    /// Joining a mask at once equals joining its classes one by one, highest first.
    #[test]
    fn activate_all_equals_activate_one_by_one() {
        for before in [0u8, 0b0000_0001, 0b0100_0010, 0b0111_1111] {
            for m in 0..=255u8 {
                let m = m & !before;
                let (mut a, mut b) = (Drr::new([1; 8]), Drr::new([1; 8]));
                for c in (0..8).rev().filter(|c| before >> c & 1 != 0) {
                    a.activate(c);
                    b.activate(c);
                }
                a.activate_all(m);
                for c in (0..8).rev().filter(|c| m >> c & 1 != 0) {
                    b.activate(c);
                }
                assert_eq!((a.list, a.len), (b.list, b.len), "before {before:08b} mask {m:08b}");
            }
        }
    }

    #[test]
    fn new_class_joins_the_tail_and_empty_class_leaves() {
        let mut drr = Drr::new([100; 8]);
        drr.activate(3);
        drr.activate(1);
        // Class 3's head (150) does not fit its first quantum: it moves behind 1.
        let lens = |c: usize| Some(if c == 3 { 150 } else { 100 });
        assert_eq!(drr.select(lens), Some(1));
        drr.served(1, 100, true);
        assert_eq!(drr.active_len(), 1);
        assert_eq!(drr.select(lens), Some(3));
        assert_eq!(drr.deficit(3), 200);
        drr.served(3, 150, true);
        assert_eq!(drr.deficit(3), 0);
        assert_eq!(drr.select(lens), None);
    }

    #[test]
    fn refused_classes_are_skipped_and_all_refused_is_none() {
        let mut drr = Drr::new([1000; 8]);
        for c in [0, 2, 4] {
            drr.activate(c);
        }
        assert_eq!(drr.select(|c| if c == 4 { Some(64) } else { None }), Some(4));
        assert_eq!(drr.select(|_| None), None);
        assert_eq!(drr.active_len(), 3);
    }
}
