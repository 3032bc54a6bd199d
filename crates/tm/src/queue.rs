//! Queues of packet descriptors.
//!
//! Flat ports give each class a [`Ring`]: a fixed-capacity, power-of-two ring allocated at build
//! time, read and written sequentially (the cache-friendly case). A hierarchical port has
//! millions of queues, most of them empty, so its queues are [`ListQueue`]s: a head and a tail
//! index into one [`Slab`] of descriptors shared by the whole port, sized by the shared buffer's
//! packet count. An empty queue then costs 8 bytes, not a ring.
//!
//! ```text
//!   Ring (capacity 8)            Slab: desc[] + next[] + free list
//!   ┌─┬─┬─┬─┬─┬─┬─┬─┐            queue ─head─▶ [17] ─next─▶ [4] ─next─▶ [230] ◀─tail─
//!   │ │ │a│b│c│ │ │ │            free  ─────▶ [5] ─▶ [6] ─▶ …
//!   └─┴─┴─┴─┴─┴─┴─┴─┘
//!        head    tail   (u32 counters that wrap; index = counter & mask)
//! ```

use crate::Desc;

/// A fixed-capacity FIFO of descriptors. Never allocates after [`Ring::new`].
#[derive(Clone, Debug)]
pub struct Ring {
    buf: Box<[Desc]>,
    mask: u32,
    pub(crate) head: u32,
    pub(crate) tail: u32,
}

impl Ring {
    /// A ring of `capacity` slots (a power of two; others are rounded up).
    pub fn new(capacity: u32) -> Ring {
        let cap = capacity.max(1).next_power_of_two();
        Ring { buf: vec![Desc::default(); cap as usize].into_boxed_slice(), mask: cap - 1, head: 0, tail: 0 }
    }

    /// Descriptors held.
    #[inline]
    pub fn len(&self) -> u32 {
        self.tail.wrapping_sub(self.head)
    }

    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// True when full.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len() > self.mask
    }

    /// Slots, a power of two.
    #[inline]
    pub fn capacity(&self) -> u32 {
        self.mask + 1
    }

    /// Free slots.
    #[inline]
    pub fn room(&self) -> u32 {
        self.capacity() - self.len()
    }

    /// Appends `d`; false (and nothing stored) when full.
    #[inline]
    pub fn push(&mut self, d: Desc) -> bool {
        if self.is_full() {
            return false;
        }
        if let Some(slot) = self.buf.get_mut((self.tail & self.mask) as usize) {
            *slot = d;
        }
        self.tail = self.tail.wrapping_add(1);
        true
    }

    /// The oldest descriptor, if any.
    #[inline]
    pub fn peek(&self) -> Option<&Desc> {
        if self.is_empty() {
            return None;
        }
        self.buf.get((self.head & self.mask) as usize)
    }

    /// Removes and returns the oldest descriptor.
    #[inline]
    pub fn pop(&mut self) -> Option<Desc> {
        let d = *self.peek()?;
        self.head = self.head.wrapping_add(1);
        Some(d)
    }
}

/// Every ring's slots as one slice of `all + 1` (a power of two), `all`, and each class's base
/// and index mask (see [`ClassRings::all_slots_mut`]).
pub(crate) type AllSlots<'a> = (&'a mut [Desc], usize, [u32; 8], [u32; 8]);

/// The 8 class rings of a flat port in one allocation: class `c` owns the slots
/// `base[c] .. base[c] + mask[c] + 1` (a power of two), with wrapping `u32` head and tail
/// counters as in [`Ring`]. Heads, tails, bases and masks are arrays indexed by `c & 7`, so a
/// class's ring is reached with no pointer to follow and no bounds check but the slot's.
#[derive(Clone, Debug)]
pub(crate) struct ClassRings {
    /// A power of two slots long (the rings' total, rounded up): an index masked with
    /// `all_mask` is in range, which the compiler can see on a slice of `all_mask + 1` slots.
    slots: Box<[Desc]>,
    all_mask: usize,
    base: [u32; 8],
    mask: [u32; 8],
    /// The smallest ring's slots.
    min_cap: u32,
    pub(crate) head: [u32; 8],
    pub(crate) tail: [u32; 8],
}

impl ClassRings {
    /// Rings of `caps[c]` slots (powers of two; others are rounded up).
    pub(crate) fn new(caps: [u32; 8]) -> ClassRings {
        let caps = caps.map(|c| c.max(1).next_power_of_two());
        let mut base = [0u32; 8];
        let mut at = 0u32;
        for (b, c) in base.iter_mut().zip(caps) {
            *b = at;
            at = at.saturating_add(c);
        }
        let len = (at as usize).next_power_of_two();
        ClassRings {
            slots: vec![Desc::default(); len].into_boxed_slice(),
            all_mask: len - 1,
            base,
            mask: caps.map(|c| c - 1),
            min_cap: caps.into_iter().min().unwrap_or(0),
            head: [0; 8],
            tail: [0; 8],
        }
    }

    /// Descriptors held by class `c`.
    #[inline]
    pub(crate) fn len(&self, c: usize) -> u32 {
        self.tail[c & 7].wrapping_sub(self.head[c & 7])
    }

    #[inline]
    pub(crate) fn is_empty(&self, c: usize) -> bool {
        self.head[c & 7] == self.tail[c & 7]
    }

    #[inline]
    pub(crate) fn is_full(&self, c: usize) -> bool {
        self.len(c) > self.mask[c & 7]
    }

    /// True when every class has room for `n` more descriptors. Checks the cheap sufficient
    /// condition first (all the rings together hold at most the smallest ring's slots less `n`:
    /// one vector sum), then each ring.
    #[inline]
    pub(crate) fn all_have_room(&self, n: usize) -> bool {
        let mut held = 0u32;
        for c in 0..8 {
            held = held.wrapping_add(self.tail[c].wrapping_sub(self.head[c]));
        }
        u64::from(held) + n as u64 <= u64::from(self.min_cap) || (0..8).all(|c| self.room(c) as usize >= n)
    }

    /// The smallest ring's slots.
    #[inline]
    pub(crate) fn min_cap(&self) -> u32 {
        self.min_cap
    }

    /// Free slots of class `c`.
    #[inline]
    pub(crate) fn room(&self, c: usize) -> u32 {
        self.mask[c & 7] + 1 - self.len(c)
    }

    /// Every ring's slots as one slice of `all_mask + 1` (a power of two), the mask, and each
    /// class's base and index mask: a burst indexes it with `(base[c] + (t & mask[c])) &
    /// all_mask`, which needs no bounds check.
    #[inline]
    pub(crate) fn all_slots_mut(&mut self) -> Option<AllSlots<'_>> {
        let m = self.all_mask;
        Some((self.slots.get_mut(..=m)?, m, self.base, self.mask))
    }

    /// Stores `d` in class `c`'s slot of counter value `at` (`tail` + k for the k-th packet of
    /// a burst) without moving the tail: the caller commits by setting `tail`, or drops the
    /// write by not doing so. Must stay within [`room`](Self::room) of the tail.
    #[inline]
    pub(crate) fn write_at(&mut self, c: usize, at: u32, d: Desc) {
        let c = c & 7;
        if let Some(slot) = self.slots.get_mut((self.base[c] + (at & self.mask[c])) as usize) {
            *slot = d;
        }
    }

    /// Appends `d` to class `c`; false (and nothing stored) when full.
    #[inline]
    pub(crate) fn push(&mut self, c: usize, d: Desc) -> bool {
        if self.is_full(c) {
            return false;
        }
        let t = self.tail[c & 7];
        self.write_at(c, t, d);
        self.tail[c & 7] = t.wrapping_add(1);
        true
    }

    /// Class `c`'s oldest descriptor, if any.
    #[inline]
    pub(crate) fn peek(&self, c: usize) -> Option<&Desc> {
        if self.is_empty(c) {
            return None;
        }
        let c = c & 7;
        self.slots.get((self.base[c] + (self.head[c] & self.mask[c])) as usize)
    }

    /// Removes and returns class `c`'s oldest descriptor.
    #[inline]
    pub(crate) fn pop(&mut self, c: usize) -> Option<Desc> {
        let d = *self.peek(c)?;
        self.head[c & 7] = self.head[c & 7].wrapping_add(1);
        Some(d)
    }

    /// Moves class `c`'s head packets into `out[n..]` while each fits in `credit` bytes;
    /// returns the new `n` and the credit left (the bytes moved are the credit spent). Stops at
    /// an empty ring, a full `out`, or a packet longer than the credit left. A DRR turn moves
    /// one or two packets on average, so this is written for short runs: no set-up beyond four
    /// loads, one masked index and one bounds check per packet.
    #[inline]
    pub(crate) fn pop_into(&mut self, c: usize, out: &mut [Desc], mut n: usize, mut credit: u64) -> (usize, u64, bool) {
        let c = c & 7;
        let (base, mask, t) = (self.base[c] as usize, self.mask[c], self.tail[c]);
        let mut h = self.head[c];
        let ring = self.slots.get(base..=base + mask as usize).unwrap_or_default();
        while h != t {
            let Some(slot) = out.get_mut(n) else { break };
            let Some(d) = ring.get((h & mask) as usize) else { break };
            let len = u64::from(d.len_bytes);
            if len > credit {
                break;
            }
            credit -= len;
            *slot = *d;
            h = h.wrapping_add(1);
            n += 1;
        }
        self.head[c] = h;
        (n, credit, h == t)
    }
}

/// Copies each of `descs` to `out[off[key]]`, `key` its cell, and moves the cell's start on.
/// The caller guarantees every place is below `descs.len()` (the cells' starts are a prefix
/// sum of their counts) and `descs.len() <= out.len()`. Out of line: on its own the loop keeps
/// `out` in a register (measured).
#[inline(never)]
pub(crate) fn scatter(descs: &[Desc], keys: &[u8], off: &mut [u8; 256], out: &mut [Desc]) {
    // Into a window of a power-of-two length where one exists, so that a masked place needs
    // no bounds check (the mask never changes a place, all of them are below the length).
    match out.len() {
        64.. if descs.len() <= 64 => scatter_in::<64>(descs, keys, off, out),
        32.. if descs.len() <= 32 => scatter_in::<32>(descs, keys, off, out),
        _ => {
            for (d, &k) in descs.iter().zip(keys) {
                let k = usize::from(k);
                let p = off[k];
                off[k] = p.wrapping_add(1);
                if let Some(slot) = out.get_mut(usize::from(p)) {
                    *slot = *d;
                }
            }
        }
    }
}

/// [`scatter`] into the first `N` slots of `out` (`N` a power of two, at most `out.len()`).
#[inline(always)]
fn scatter_in<const N: usize>(descs: &[Desc], keys: &[u8], off: &mut [u8; 256], out: &mut [Desc]) {
    let Some(Ok(win)) = out.get_mut(..N).map(<&mut [Desc; N]>::try_from) else { return };
    let mut put = |d: &Desc, k: u8| {
        let k = usize::from(k);
        let p = off[k];
        off[k] = p.wrapping_add(1);
        win[usize::from(p) & (N - 1)] = *d;
    };
    let mut d4 = descs.chunks_exact(4);
    let mut k4 = keys.chunks_exact(4);
    for (d, k) in (&mut d4).zip(&mut k4) {
        if let ([a, b, c, e], [ka, kb, kc, ke]) = (d, k) {
            put(a, *ka);
            put(b, *kb);
            put(c, *kc);
            put(e, *ke);
        }
    }
    for (d, &k) in d4.remainder().iter().zip(k4.remainder()) {
        put(d, k);
    }
}

/// No slot: the end of a list.
pub const NIL: u32 = u32::MAX;

/// One slab slot: a descriptor and the link to the next slot of its list (20 bytes), kept
/// together so that reaching either costs one bounds check.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    desc: Desc,
    next: u32,
}

/// Descriptor storage for list queues: `slots[i]` holds a descriptor and the link to the next
/// slot, with a free list through the links.
#[derive(Clone, Debug)]
pub struct Slab {
    slots: Box<[Slot]>,
    free: u32,
}

impl Slab {
    /// A slab of `n` descriptors (20 bytes each).
    pub fn new(n: u32) -> Slab {
        let slots: Vec<Slot> = (0..n).map(|i| Slot { desc: Desc::default(), next: if i + 1 < n { i + 1 } else { NIL } }).collect();
        Slab { slots: slots.into_boxed_slice(), free: if n > 0 { 0 } else { NIL } }
    }

    /// Slots in use: the slab's size less the free list's length, which is walked (tests and
    /// the control path; the packet path keeps no count of its own, the shared buffer has one).
    pub fn used(&self) -> u32 {
        let n = self.slots.len() as u32;
        let (mut free, mut i) = (0u32, self.free);
        while let (Some(s), true) = (self.slots.get(i as usize), free < n) {
            free += 1;
            i = s.next;
        }
        n - free
    }

    /// The descriptor in slot `i` (a default one for an out-of-range `i`).
    #[inline]
    pub fn get(&self, i: u32) -> Desc {
        self.slots.get(i as usize).map(|s| s.desc).unwrap_or_default()
    }

    #[inline]
    fn set_next(&mut self, i: u32, n: u32) {
        if let Some(x) = self.slots.get_mut(i as usize) {
            x.next = n;
        }
    }

    /// Stores `d` in a free slot, the end of a list ([`NIL`] next); `None` when the slab is full.
    #[inline]
    pub fn alloc(&mut self, d: Desc) -> Option<u32> {
        let i = self.free;
        let slot = self.slots.get_mut(i as usize)?;
        slot.desc = d;
        self.free = std::mem::replace(&mut slot.next, NIL);
        Some(i)
    }

    /// Returns slot `i` to the free list, with its descriptor and its list successor.
    #[inline]
    fn take(&mut self, i: u32) -> Option<(Desc, u32)> {
        let slot = self.slots.get_mut(i as usize)?;
        let next = std::mem::replace(&mut slot.next, self.free);
        self.free = i;
        Some((slot.desc, next))
    }

    /// Slot `i`, held from looking at its descriptor to freeing it ([`SlotRef::take`]): one
    /// bounds check for both. `None` for an out-of-range `i` ([`NIL`] included).
    #[inline]
    pub(crate) fn slot_mut(&mut self, i: u32) -> Option<SlotRef<'_>> {
        let slot = self.slots.get_mut(i as usize)?;
        Some(SlotRef { slot, free: &mut self.free, i })
    }

    /// Returns slot `i` to the free list.
    #[inline]
    pub fn release(&mut self, i: u32) {
        let f = self.free;
        self.set_next(i, f);
        self.free = i;
    }
}

/// A slot of a [`Slab`] in hand (see [`Slab::slot_mut`]).
pub(crate) struct SlotRef<'a> {
    slot: &'a mut Slot,
    free: &'a mut u32,
    i: u32,
}

impl SlotRef<'_> {
    /// The descriptor's length.
    #[inline]
    pub(crate) fn len_bytes(&self) -> u32 {
        self.slot.desc.len_bytes
    }

    /// Frees the slot; returns its descriptor and its list successor.
    #[inline]
    pub(crate) fn take(self) -> (Desc, u32) {
        let next = std::mem::replace(&mut self.slot.next, *self.free);
        *self.free = self.i;
        (self.slot.desc, next)
    }
}

/// A FIFO threaded through a [`Slab`]: 8 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListQueue {
    /// First slot, or [`NIL`].
    pub head: u32,
    /// Last slot (meaningless when empty).
    pub tail: u32,
}

impl Default for ListQueue {
    fn default() -> ListQueue {
        ListQueue { head: NIL, tail: NIL }
    }
}

impl ListQueue {
    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }

    /// Appends slot `i`, fresh from [`Slab::alloc`] (holding its descriptor, next = [`NIL`]).
    #[inline]
    pub fn push(&mut self, slab: &mut Slab, i: u32) {
        if self.head == NIL {
            self.head = i;
        } else {
            slab.set_next(self.tail, i);
        }
        self.tail = i;
    }

    /// The head descriptor (a default one when empty).
    #[inline]
    pub fn peek(&self, slab: &Slab) -> Desc {
        slab.get(self.head)
    }

    /// Unlinks the head and frees its slot; returns its descriptor.
    #[inline]
    pub fn pop(&mut self, slab: &mut Slab) -> Option<Desc> {
        let (d, next) = slab.take(self.head)?;
        self.head = next;
        Some(d)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use fastpath_packet::PktId;

    fn d(i: u32) -> Desc {
        Desc { pkt: PktId(i), len_bytes: 64 + i, ..Desc::default() }
    }

    #[test]
    fn ring_is_fifo_and_bounded_across_wrap() {
        let mut r = Ring::new(4);
        let mut next_in = 0;
        let mut next_out = 0;
        for round in 0..100 {
            while r.push(d(next_in)) {
                next_in += 1;
            }
            assert_eq!(r.len(), 4);
            for _ in 0..(round % 4) + 1 {
                assert_eq!(r.pop(), Some(d(next_out)));
                next_out += 1;
            }
        }
        while let Some(x) = r.pop() {
            assert_eq!(x, d(next_out));
            next_out += 1;
        }
        assert_eq!(next_in, next_out);
        assert!(r.is_empty() && r.peek().is_none());
    }

    #[test]
    fn list_queues_share_a_slab() {
        let mut s = Slab::new(5);
        let (mut a, mut b) = (ListQueue::default(), ListQueue::default());
        for i in 0..5 {
            let q = if i % 2 == 0 { &mut a } else { &mut b };
            let slot = s.alloc(d(i)).unwrap();
            q.push(&mut s, slot);
        }
        assert!(s.alloc(d(9)).is_none(), "slab full");
        assert_eq!(a.pop(&mut s), Some(d(0)));
        let slot = s.alloc(d(5)).unwrap();
        b.push(&mut s, slot);
        let got_a: Vec<_> = std::iter::from_fn(|| a.pop(&mut s)).collect();
        let got_b: Vec<_> = std::iter::from_fn(|| b.pop(&mut s)).collect();
        assert_eq!(got_a, vec![d(2), d(4)]);
        assert_eq!(got_b, vec![d(1), d(3), d(5)]);
        assert_eq!(s.used(), 0);
        assert!(a.is_empty() && b.is_empty());
    }
}
