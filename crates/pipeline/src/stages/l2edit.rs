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
    /// The new frame's first bytes when both MAC addresses are set ([`L2Edit::sealed`]):
    /// destination, source and the pushed tags, right-aligned in 20 bytes (the first
    /// `8 - 4 * n_push` are filler that lands in the headroom). The fast path writes it in one
    /// copy just in front of the bytes the edit keeps.
    head: Option<[u8; HEAD]>,
}

/// Bytes of [`L2Edit::head`]: both MAC addresses and the most tags pushed.
const HEAD: usize = 12 + 4 * MAX_PUSH;
/// Shortest frame the fast path takes: every pop finds its tag (18 bytes for one, 22 for two)
/// and what is left after two pops holds an Ethernet header (22 - 8 = 14).
const FAST_MIN_LEN: usize = 22;

impl L2Edit {
    /// The edit with its fast path's bytes worked out, when it sets both MAC addresses (a
    /// session's or a next hop's rewrite); build it this way once its fields are final.
    pub fn sealed(mut self) -> L2Edit {
        self.head = None;
        if let (Some(d), Some(s)) = (self.dst, self.src) {
            let push = usize::from(self.n_push).min(MAX_PUSH);
            let mut head = [0u8; HEAD];
            let at = HEAD - 12 - 4 * push;
            head[at..at + 6].copy_from_slice(&d);
            head[at + 6..at + 12].copy_from_slice(&s);
            for (k, t) in self.push[..push].iter().enumerate() {
                head[at + 12 + 4 * k..at + 16 + 4 * k].copy_from_slice(t);
            }
            self.head = Some(head);
        }
        self
    }

    /// Runs the edit on slot `i`. False when the frame has no room for the tags (the caller
    /// drops it as `no_headroom`, as `push_vlan` does).
    ///
    /// A sealed edit that sets both MAC addresses, on a frame of at least [`FAST_MIN_LEN`]
    /// bytes with at least 8 bytes of headroom, writes the new addresses and tags in one
    /// 20-byte copy ending where the kept bytes begin, and moves the frame's start: the old
    /// addresses need not move, since both are replaced. Anything else takes the general path.
    #[inline]
    pub fn run(&self, pool: &mut Pool, b: &mut Batch, i: usize) -> bool {
        let h = b.handle(i);
        let m = b.meta_mut(i);
        for &(r, v) in &self.regs[..usize::from(self.n_regs)] {
            if let Some(x) = m.regs.get_mut(usize::from(r)) {
                *x = v;
            }
        }
        let tags = if m.valid.has(Hdr::Qinq) { 2 } else { usize::from(m.valid.has(Hdr::Vlan)) };
        if let Some(head) = &self.head {
            let (off, len) = (pool.headroom(h), pool.len(h));
            if len >= FAST_MIN_LEN && off >= HEAD - 12 {
                let popped = usize::from(self.pops).min(tags);
                let push = usize::from(self.n_push);
                // The first byte kept: the one after the MAC addresses and the popped tags.
                let keep = off + 12 + 4 * popped;
                let Some(d) = pool.buffer_mut(h).get_mut(keep - HEAD..keep) else { return false };
                d.copy_from_slice(head);
                if !pool.set_bounds(h, keep - 12 - 4 * push, len + 4 * push - 4 * popped) {
                    return false;
                }
                self.finish(b.meta_mut(i), tags, popped, push);
                return true;
            }
        }
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
        self.finish(b.meta_mut(i), tags, popped, push);
        true
    }

    /// The metadata after `popped` of the frame's `tags` tags went and `push` came: header
    /// offsets, the VLAN headers' validity and offsets, and the output port.
    #[inline(always)]
    fn finish(&self, m: &mut Meta, tags: usize, popped: usize, push: usize) {
        let grow = 4 * push as isize - 4 * popped as isize;
        if grow != 0 {
            // Everything after the old tags moves by `grow`; Ethernet stays at 0. Branch-free,
            // so the loop over the offsets is a few vector instructions.
            let (end, by) = ((12 + 4 * tags) as u16, grow as u16);
            for o in m.off.iter_mut() {
                *o = o.wrapping_add(u16::from(*o >= end).wrapping_mul(by));
            }
        }
        if popped > 0 || push > 0 {
            let now = tags - popped + push;
            m.valid.remove(Hdr::Vlan);
            m.valid.remove(Hdr::Qinq);
            if now >= 1 {
                m.valid.insert(Hdr::Vlan);
                m.set_offset(Slot::Vlan0, 12);
            }
            if now >= 2 {
                m.valid.insert(Hdr::Qinq);
                m.set_offset(Slot::Vlan1, 16);
            }
        }
        if let Some(p) = self.port {
            m.out_port = p;
        }
    }
}
