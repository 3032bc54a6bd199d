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

use fastpath_packet::{Batch, Hdr, Pool, Slot};

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
}

impl L2Edit {
    /// Runs the edit on slot `i`. False when the frame has no room for the tags (the caller
    /// drops it as `no_headroom`, as `push_vlan` does).
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
        let m = b.meta_mut(i);
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
        true
    }
}
