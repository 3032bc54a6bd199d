//! A table entry's layer-2 rewrite, pre-digested: register writes, VLAN tags popped and pushed,
//! MAC addresses and the output port, done in one pass over the frame's first bytes instead of
//! one primitive at a time. A broadband gateway's downstream session entry (`set meta.sub = S;
//! pop_vlan; push_vlan C; push_vlan S 0 0x88a8; set eth.dst = M; set eth.src = G; forward P`)
//! and a core next hop with a VLAN (`push_vlan V; set eth.dst …; forward P`) are this shape.
//!
//! It does exactly what the primitives do, in the same order ([`crate::action::apply`] is the
//! reference; the tests compare them): the pops remove the outer tags the frame has (a pop on
//! an untagged frame does nothing), the pushes insert after the MAC addresses (the last pushed
//! is the outermost), and the frame moves once by the difference.

use fastpath_packet::{Batch, Hdr, Meta, Pool, Slot};

/// Most registers, pops and pushes one edit holds.
pub const MAX_REGS: usize = 3;
/// Most tags pushed.
pub const MAX_PUSH: usize = 2;

/// The pre-digested edit of one table entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct L2Edit {
    /// `set meta.R = V`, in order: (register, value).
    pub regs: [(u8, u32); MAX_REGS],
    /// Registers written.
    pub n_regs: u8,
    /// `pop_vlan`s (0..=2).
    pub pops: u8,
    /// Tags to insert after the MAC addresses, outermost first (TPID, TCI in network order).
    pub push: [[u8; 4]; MAX_PUSH],
    /// Tags pushed.
    pub n_push: u8,
    /// New destination MAC.
    pub dst: Option<[u8; 6]>,
    /// New source MAC.
    pub src: Option<[u8; 6]>,
    /// Output port.
    pub port: Option<u16>,
    /// How [`L2Edit::run`] does it ([`L2Edit::sealed`]).
    shape: Shape,
}

// A table of edits is read at random (vbng's 256k sessions): each entry in two cache lines.
const _: () = assert!(std::mem::size_of::<L2Edit>() <= 128);

/// The kinds of edit [`L2Edit::run`] tells apart, worked out when the edit is sealed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Shape {
    /// Not sealed, or neither of the others: one primitive's worth at a time.
    #[default]
    General,
    /// Registers and the output port only: the frame is not touched (a broadband gateway's
    /// upstream session entry).
    MetaOnly,
    /// Both MAC addresses set: the fast path over the frame's first bytes.
    Sealed(Sealed),
}

/// A sealed edit's fast path, worked out once: the new first bytes, and per number of tags the
/// frame arrives with what the edit does to it, so that a packet pays no arithmetic on the
/// edit's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sealed {
    /// Destination, source and the pushed tags, right-aligned in 20 bytes (the first
    /// `8 - 4 * n_push` are filler that lands in the headroom): written in one copy just in
    /// front of the bytes the edit keeps.
    head: [u8; HEAD],
    /// By the arriving frame's VLAN validity bits ([`tag_bits`]): 0, 1 and 2 tags, and 2
    /// again for the bits of `qinq` alone, so that a packet pays no clamp on its tag count.
    by_bits: [Step; 4],
}

/// What a sealed edit does to a frame that arrives with a given number of tags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Step {
    /// The first byte kept, from the frame's start: the one after the MAC addresses and the
    /// tags popped.
    keep: u16,
    /// The new frame's start, from the old one (wrapping: a frame that grows starts earlier).
    start: u16,
    /// Bytes the frame grows by (4 per tag pushed, −4 per tag popped; wrapping).
    grow: u16,
    /// Header offsets at or past this (the end of the arriving tags) move by `grow`.
    end: u16,
    /// The VLAN headers' validity after the edit: `valid & !clear_valid | set_valid` (16 bits:
    /// `vlan` and `qinq` are among the low ones, and a 12-byte step keeps an edit, a table
    /// entry, in two cache lines: at 16 bytes its fourth step grew it to 144 bytes and vbng
    /// lost about 10 % of its Mpps).
    clear_valid: u16,
    set_valid: u16,
}

/// Bytes of [`Sealed::head`]: both MAC addresses and the most tags pushed.
const HEAD: usize = 12 + 4 * MAX_PUSH;
/// Shortest frame the fast path takes: every pop finds its tag (18 bytes for one, 22 for two)
/// and what is left after two pops holds an Ethernet header (22 - 8 = 14).
const FAST_MIN_LEN: usize = 22;

/// What runs on a frame right after its edit ([`L2Edit::run_then`]): nothing (`()`), or a
/// folded count and `ttl_dec`; false drops the packet.
pub trait Then {
    /// Nothing to run: the frame need not be looked up.
    const NOTHING: bool = false;
    /// Runs on the edited frame and its metadata.
    fn frame(&mut self, data: &mut [u8], m: &Meta) -> bool;
}

impl Then for () {
    const NOTHING: bool = true;
    #[inline(always)]
    fn frame(&mut self, _data: &mut [u8], _m: &Meta) -> bool {
        true
    }
}

impl L2Edit {
    /// The edit with its fast path worked out: the new first bytes and each tag count's
    /// step when it sets both MAC addresses (a session's or a next hop's rewrite), or nothing
    /// to do to the frame when it only writes registers and the output port (measured on
    /// `scripts/instructions vbng`: the upstream session entry took the general path, about
    /// 100 instructions for three register writes). Build it this way once its fields are final.
    pub fn sealed(mut self) -> L2Edit {
        self.shape = Shape::General;
        if self.pops == 0 && self.n_push == 0 && self.dst.is_none() && self.src.is_none() {
            self.shape = Shape::MetaOnly;
        } else if let (Some(d), Some(s)) = (self.dst, self.src) {
            let push = usize::from(self.n_push).min(MAX_PUSH);
            let mut head = [0u8; HEAD];
            let at = HEAD - 12 - 4 * push;
            head[at..at + 6].copy_from_slice(&d);
            head[at + 6..at + 12].copy_from_slice(&s);
            for (k, t) in self.push[..push].iter().enumerate() {
                head[at + 12 + 4 * k..at + 16 + 4 * k].copy_from_slice(t);
            }
            let by_bits = std::array::from_fn(|bits| {
                let tags = bits.min(2);
                Step::new(tags, usize::from(self.pops).min(tags), push)
            });
            self.shape = Shape::Sealed(Sealed { head, by_bits });
        }
        self
    }

    /// Runs the edit on slot `i`. False when the frame has no room for the tags (the caller
    /// drops it as `no_headroom`, as `push_vlan` does).
    #[inline(always)]
    pub fn run(&self, pool: &mut Pool, b: &mut Batch, i: usize) -> bool {
        self.run_then(pool, b, i, &mut ()).is_some()
    }

    /// Runs the edit on slot `i`, then `then` on the frame and metadata it leaves (a folded
    /// count and `ttl_dec`: the frame's address is at hand); `then`'s verdict, or `None` when the
    /// frame has no room for the tags, and `then` does not run.
    ///
    /// A sealed edit that sets both MAC addresses, on a frame of at least `FAST_MIN_LEN`
    /// bytes with at least 8 bytes of headroom, writes the new addresses and tags in one
    /// 20-byte copy ending where the kept bytes begin, and moves the frame's start: the old
    /// addresses need not move, since both are replaced. Everything it needs about the edit's
    /// shape was worked out when it was sealed (`Step`), and it is inlined into the table's
    /// action pass; anything else takes the general path, out of line.
    #[inline(always)]
    pub fn run_then<T: Then>(&self, pool: &mut Pool, b: &mut Batch, i: usize, then: &mut T) -> Option<bool> {
        // The sealed edit tested first: one compare for the common case.
        let fast = if let Shape::Sealed(f) = &self.shape {
            f
        } else if matches!(self.shape, Shape::MetaOnly) {
            let m = b.meta_mut(i);
            self.set_regs(m);
            if let Some(p) = self.port {
                m.out_port = p;
            }
            return Some(T::NOTHING || then.frame(pool.data_mut(b.handle(i)), b.meta(i)));
        } else {
            return self.general_then(pool, b, i, then);
        };
        let h = b.handle(i);
        let (off, len) = (pool.headroom(h), pool.len(h));
        if len < FAST_MIN_LEN || off < HEAD - 12 {
            return self.general_then(pool, b, i, then);
        }
        let m = b.meta_mut(i);
        self.set_regs(m);
        let s = &fast.by_bits[tag_bits(m)];
        let keep = off + usize::from(s.keep);
        let buf = pool.buffer_mut(h);
        buf.get_mut(keep - HEAD..keep)?.copy_from_slice(&fast.head);
        // `off >= 8` and the start moves back by at most 8: no wrap below 0.
        let (start, new_len) = ((off as u16).wrapping_add(s.start), (len as u16).wrapping_add(s.grow));
        let (start, new_len) = (usize::from(start), usize::from(new_len));
        // Within the buffer, so `set_bounds` below takes it.
        let frame = buf.get_mut(start..start + new_len)?;
        self.finish(m, s);
        let kept = then.frame(frame, m);
        pool.set_bounds(h, start, new_len).then_some(kept)
    }

    /// The general path, then `then` (see [`L2Edit::run_then`]).
    #[inline(always)]
    fn general_then<T: Then>(&self, pool: &mut Pool, b: &mut Batch, i: usize, then: &mut T) -> Option<bool> {
        if !self.run_general(pool, b, i) {
            return None;
        }
        Some(T::NOTHING || then.frame(pool.data_mut(b.handle(i)), b.meta(i)))
    }

    /// `set meta.R = V`, in order.
    #[inline(always)]
    fn set_regs(&self, m: &mut Meta) {
        for &(r, v) in &self.regs[..usize::from(self.n_regs).min(MAX_REGS)] {
            if let Some(x) = m.regs.get_mut(usize::from(r)) {
                *x = v;
            }
        }
    }

    /// The edit one primitive's worth at a time: an edit that pops or pushes without setting
    /// both MAC addresses, a frame too short or without the headroom for the fast path.
    #[cold]
    #[inline(never)]
    fn run_general(&self, pool: &mut Pool, b: &mut Batch, i: usize) -> bool {
        let h = b.handle(i);
        let m = b.meta_mut(i);
        self.set_regs(m);
        let tags = tags(m);
        // Each pop needs the MAC addresses and a whole tag (18 bytes), as `pop_vlan` checks.
        let len = pool.len(h);
        let mut popped = 0;
        while popped < usize::from(self.pops).min(tags) && len >= 18 + 4 * popped {
            popped += 1;
        }
        let push = usize::from(self.n_push);
        if push > 0 && len - 4 * popped < 14 {
            return false;
        }
        let grow = 4 * push as isize - 4 * popped as isize;
        let f = if grow > 0 {
            let g = grow as usize;
            let Some(f) = pool.prepend(h, g) else { return false };
            f.copy_within(g..g + 12, 0);
            f
        } else if grow < 0 {
            let s = (-grow) as usize;
            pool.data_mut(h).copy_within(0..12, s);
            pool.strip(h, s);
            pool.data_mut(h)
        } else {
            pool.data_mut(h)
        };
        for (k, t) in self.push[..push].iter().enumerate() {
            if let Some(d) = f.get_mut(12 + 4 * k..16 + 4 * k) {
                d.copy_from_slice(t);
            }
        }
        if let (Some(d), Some(x)) = (self.dst, f.get_mut(0..6)) {
            x.copy_from_slice(&d);
        }
        if let (Some(s), Some(x)) = (self.src, f.get_mut(6..12)) {
            x.copy_from_slice(&s);
        }
        self.finish(b.meta_mut(i), &Step::new(tags, popped, push));
        true
    }

    /// The metadata after step `s`: header offsets, the VLAN headers' validity and offsets,
    /// and the output port.
    #[inline(always)]
    fn finish(&self, m: &mut Meta, s: &Step) {
        if s.grow != 0 {
            shift_offsets(m, s.end, s.grow);
        }
        m.valid.0 = m.valid.0 & !u32::from(s.clear_valid) | u32::from(s.set_valid);
        if u32::from(s.set_valid) & Hdr::Vlan.bit() != 0 {
            m.set_offset(Slot::Vlan0, 12);
        }
        if u32::from(s.set_valid) & Hdr::Qinq.bit() != 0 {
            m.set_offset(Slot::Vlan1, 16);
        }
        if let Some(p) = self.port {
            m.out_port = p;
        }
    }
}

impl Step {
    /// What popping `popped` of a frame's `tags` tags and pushing `push` does (the fast path
    /// works it out once per tag count when the edit is sealed, the general path per packet).
    fn new(tags: usize, popped: usize, push: usize) -> Step {
        let (vlan, qinq) = (Hdr::Vlan.bit(), Hdr::Qinq.bit());
        let now = tags - popped + push;
        let keep = 12 + 4 * popped;
        let changed = popped > 0 || push > 0;
        let set = if !changed { 0 } else { (u32::from(now >= 1) * vlan) | (u32::from(now >= 2) * qinq) };
        Step {
            keep: keep as u16,
            start: (keep as u16).wrapping_sub(12 + 4 * push as u16),
            grow: (4 * push as u16).wrapping_sub(4 * popped as u16),
            end: (12 + 4 * tags) as u16,
            clear_valid: if changed { (vlan | qinq) as u16 } else { 0 },
            set_valid: set as u16,
        }
    }
}

/// The frame's two VLAN validity bits side by side, 0 to 3 (`vlan` the low one).
#[inline(always)]
fn tag_bits(m: &Meta) -> usize {
    const _: () = assert!(Hdr::Qinq as u32 == Hdr::Vlan as u32 + 1);
    ((m.valid.0 >> Hdr::Vlan as u32) & 3) as usize
}

/// Tags the frame has (0, 1 or 2): two when `qinq` is valid, else one when `vlan` is.
#[inline(always)]
fn tags(m: &Meta) -> usize {
    tag_bits(m).min(2)
}

/// Everything after the old tags (offsets at or past `end`) moves by `by` (wrapping); Ethernet
/// stays at 0 and is not looked at, so the other eight offsets are one 16-byte vector.
/// Branch-free: a few vector instructions.
#[inline(always)]
fn shift_offsets(m: &mut Meta, end: u16, by: u16) {
    const _: () = assert!(Slot::Eth as usize == 0);
    for o in m.off[1..].iter_mut() {
        *o = o.wrapping_add(u16::from(*o >= end).wrapping_mul(by));
    }
}
