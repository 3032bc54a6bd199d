//! The buffer pool: one pre-allocated, page-aligned region cut into fixed-size buffers.
//!
//! ```text
//!  region (n × BUF_SIZE bytes, 4 KiB aligned; usable as an AF_XDP UMEM)
//!  ┌──────────── buffer 0 ────────────┬──────────── buffer 1 ────────────┬ …
//!  │ headroom │ data (off..off+len) │ tailroom │ headroom │ data │ …
//!  └──────────────────────────────────┴──────────────────────────────────┴ …
//! ```
//!
//! A packet is a [`PktId`]: the buffer's index. Each buffer has a data offset and length; the
//! bytes before the offset are headroom for encapsulation ([`Pool::prepend`]). Free buffers sit on
//! a LIFO free list, so the most recently freed (cache-hot) buffer is handed out next. Nothing
//! allocates after [`Pool::new`].
//!
//! Thread: a pool belongs to one worker (it is `Send`, not `Sync`).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// Bytes per buffer (headroom + frame + tailroom). 2 KiB, the AF_XDP default frame size.
pub const BUF_SIZE: usize = 2048;
/// Default headroom in front of a frame: room for two VXLAN encapsulations and more.
pub const HEADROOM: usize = 256;
/// Largest frame a buffer can hold with the default headroom.
pub const MAX_FRAME: usize = BUF_SIZE - HEADROOM;

/// A packet handle: the index of its buffer in the pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PktId(pub u32);

impl PktId {
    /// The buffer index as a `usize`.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Copy, Default)]
struct BufMeta {
    off: u16,
    len: u16,
}

/// The page-aligned backing memory. Owns its allocation; freed on drop.
struct Region {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: `Region` owns its allocation exclusively (like a `Box<[u8]>`); moving it between
// threads moves that ownership.
unsafe impl Send for Region {}

impl Region {
    fn new(bytes: usize) -> Region {
        let layout = match Layout::from_size_align(bytes.max(BUF_SIZE), 4096) {
            Ok(l) => l,
            Err(_) => std::process::abort(),
        };
        // SAFETY: `layout` has a non-zero size (at least BUF_SIZE).
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else { std::alloc::handle_alloc_error(layout) };
        Region { ptr, layout }
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` points at `layout.size()` initialised (zeroed) bytes that we own; the
        // returned borrow is tied to `&self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }

    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and `&mut self` guarantees the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `Region::new` with exactly this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// A pool of fixed-size packet buffers in one pre-allocated region.
pub struct Pool {
    region: Region,
    meta: Vec<BufMeta>,
    free: Vec<PktId>,
    n: usize,
}

impl Pool {
    /// A pool of `n` buffers of [`BUF_SIZE`] bytes, all free. Allocates once, here.
    ///
    /// # Panics
    /// If `n` is 0 or more than 2^24 buffers (32 GiB).
    pub fn new(n: usize) -> Pool {
        assert!(n > 0 && n <= 1 << 24, "pool size {n} out of range 1..=2^24");
        let region = Region::new(n * BUF_SIZE);
        let meta = vec![BufMeta { off: HEADROOM as u16, len: 0 }; n];
        // LIFO: buffer 0 is handed out first.
        let free = (0..n as u32).rev().map(PktId).collect();
        Pool { region, meta, free, n }
    }

    /// Number of buffers in the pool.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.n
    }

    /// Number of free buffers.
    #[inline]
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Takes a free buffer, with data offset [`HEADROOM`] and length 0. `None` when empty.
    #[inline]
    pub fn alloc(&mut self) -> Option<PktId> {
        let h = self.free.pop()?;
        self.meta[h.index()] = BufMeta { off: HEADROOM as u16, len: 0 };
        Some(h)
    }

    /// Takes up to `out.len()` buffers; returns how many it wrote into `out`.
    #[inline]
    pub fn alloc_burst(&mut self, out: &mut [PktId]) -> usize {
        let n = out.len().min(self.free.len());
        let from = self.free.len() - n;
        // One copy and a truncate (a `drain` + `zip` loop cost ~6 instructions per handle).
        out[..n].copy_from_slice(&self.free[from..]);
        self.free.truncate(from);
        n
    }

    /// Returns a buffer to the free list.
    #[inline]
    pub fn free(&mut self, h: PktId) {
        debug_assert!(h.index() < self.n);
        debug_assert!(self.free.len() < self.n, "double free of {h:?}");
        self.free.push(h);
    }

    /// Returns many buffers to the free list.
    #[inline]
    pub fn free_bulk(&mut self, hs: &[PktId]) {
        debug_assert!(self.free.len() + hs.len() <= self.n);
        self.free.extend_from_slice(hs);
    }

    /// The frame's bytes.
    #[inline]
    pub fn data(&self, h: PktId) -> &[u8] {
        let m = self.meta[h.index()];
        let start = h.index() * BUF_SIZE + m.off as usize;
        debug_assert!(usize::from(m.off) + usize::from(m.len) <= BUF_SIZE);
        // SAFETY: `h.index() < meta.len() == n` (the index above is checked) and every
        // `BufMeta` keeps `off + len <= BUF_SIZE` (`new`, `alloc`, `set_bounds`, `set_data`,
        // `write_head` and `set_len` set or check it; `prepend` and `strip` move bytes between
        // `off` and `len`; `BufMeta` is private to this file), so the frame lies
        // inside buffer `h.index()` of the region, which holds `n * BUF_SIZE` initialised bytes.
        // One bounds check instead of three on every packet access (2-4 instructions each).
        unsafe { std::slice::from_raw_parts(self.region.ptr.as_ptr().add(start), usize::from(m.len)) }
    }

    /// The frame's bytes, writable in place.
    #[inline]
    pub fn data_mut(&mut self, h: PktId) -> &mut [u8] {
        let m = self.meta[h.index()];
        let start = h.index() * BUF_SIZE + m.off as usize;
        debug_assert!(usize::from(m.off) + usize::from(m.len) <= BUF_SIZE);
        // SAFETY: as in `data`; `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.region.ptr.as_ptr().add(start), usize::from(m.len)) }
    }

    /// Frame length in bytes.
    #[inline]
    pub fn len(&self, h: PktId) -> usize {
        self.meta[h.index()].len as usize
    }

    /// True when the frame has no bytes.
    #[inline]
    pub fn is_empty(&self, h: PktId) -> bool {
        self.len(h) == 0
    }

    /// Data offset of the frame inside its buffer (the headroom left in front of it).
    #[inline]
    pub fn headroom(&self, h: PktId) -> usize {
        self.meta[h.index()].off as usize
    }

    /// Sets offset and length directly (ports that receive into the buffer use this).
    /// Returns false, changing nothing, when `off + len` does not fit in the buffer.
    #[inline]
    pub fn set_bounds(&mut self, h: PktId, off: usize, len: usize) -> bool {
        if off + len > BUF_SIZE {
            return false;
        }
        self.meta[h.index()] = BufMeta { off: off as u16, len: len as u16 };
        true
    }

    /// The receive step of a synthetic source, as a NIC's DMA would do it: copies `head` to the
    /// front of buffer `h` at the default headroom and makes the frame `len` bytes long (at most
    /// [`MAX_FRAME`]). Bytes past `head` keep whatever the buffer held. One bounds check; no-op
    /// for a handle outside the pool. (`io::mem` measured 31 → 21 instructions per packet
    /// against `buffer_mut` + `set_bounds`.)
    #[inline]
    pub fn write_head<const N: usize>(&mut self, h: PktId, head: &[u8; N], len: usize) {
        const { assert!(HEADROOM + N <= BUF_SIZE) };
        let i = h.index();
        let Some(m) = self.meta.get_mut(i) else { return };
        *m = BufMeta { off: HEADROOM as u16, len: len.min(MAX_FRAME) as u16 };
        // SAFETY: `i < meta.len() == n` and the region holds at least `n * BUF_SIZE` bytes, so
        // `[i * BUF_SIZE + HEADROOM, + N)` lies inside buffer `i` (checked above at compile
        // time); `&mut self` makes the write unique and `head` cannot alias the region
        // (it is borrowed while `self` is mutably borrowed).
        unsafe {
            let dst = self.region.ptr.as_ptr().add(i * BUF_SIZE + HEADROOM);
            std::ptr::copy_nonoverlapping(head.as_ptr(), dst, N);
        }
    }

    /// A copy of frame `h` in a new buffer, at the same headroom: one copy per output port when a
    /// frame is flooded. `None` when the pool has no free buffer (or `h` is not of this pool).
    pub fn clone_pkt(&mut self, h: PktId) -> Option<PktId> {
        let m = *self.meta.get(h.index())?;
        let c = self.free.pop()?;
        self.meta[c.index()] = m;
        let (from, to) = (h.index() * BUF_SIZE + usize::from(m.off), c.index() * BUF_SIZE + usize::from(m.off));
        self.region.bytes_mut().copy_within(from..from + usize::from(m.len), to);
        Some(c)
    }

    /// Copies `bytes` in as the frame, at the default headroom. Truncates to [`MAX_FRAME`].
    /// Control path and sources only.
    pub fn set_data(&mut self, h: PktId, bytes: &[u8]) {
        let len = bytes.len().min(MAX_FRAME);
        self.meta[h.index()] = BufMeta { off: HEADROOM as u16, len: len as u16 };
        self.data_mut(h).copy_from_slice(&bytes[..len]);
    }

    /// Grows the frame at the front by `n` bytes taken from the headroom and returns the whole
    /// new frame. `None`, changing nothing, when the headroom is smaller than `n`.
    #[inline]
    pub fn prepend(&mut self, h: PktId, n: usize) -> Option<&mut [u8]> {
        let m = &mut self.meta[h.index()];
        let off = (m.off as usize).checked_sub(n)?;
        m.off = off as u16;
        m.len += n as u16;
        Some(self.data_mut(h))
    }

    /// Removes `n` bytes from the front of the frame (decapsulation). False, changing nothing,
    /// when the frame is shorter than `n`.
    #[inline]
    pub fn strip(&mut self, h: PktId, n: usize) -> bool {
        let m = &mut self.meta[h.index()];
        if (m.len as usize) < n {
            return false;
        }
        m.off += n as u16;
        m.len -= n as u16;
        true
    }

    /// Sets the frame length, keeping the offset. False, changing nothing, when it would not fit.
    #[inline]
    pub fn set_len(&mut self, h: PktId, len: usize) -> bool {
        let m = &mut self.meta[h.index()];
        if m.off as usize + len > BUF_SIZE {
            return false;
        }
        m.len = len as u16;
        true
    }

    /// The whole buffer (headroom, frame and tailroom): for ports that receive into it.
    #[inline]
    pub fn buffer_mut(&mut self, h: PktId) -> &mut [u8] {
        let start = h.index() * BUF_SIZE;
        &mut self.region.bytes_mut()[start..start + BUF_SIZE]
    }

    /// Base address and length of the region, for registering it as an AF_XDP UMEM.
    /// Buffer `i` starts at byte `i * BUF_SIZE`.
    pub fn region_raw(&mut self) -> (*mut u8, usize) {
        (self.region.ptr.as_ptr(), self.region.layout.size())
    }

    /// Prefetches the first cache line of a packet's data.
    #[inline]
    pub fn prefetch(&self, h: PktId) {
        let m = self.meta[h.index()];
        let start = h.index() * BUF_SIZE + m.off as usize;
        if let Some(b) = self.region.bytes().get(start) {
            crate::prefetch::prefetch_read(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_roundtrip_and_exhaustion() {
        let mut p = Pool::new(4);
        let hs: Vec<_> = (0..4).map(|_| p.alloc().unwrap()).collect();
        assert!(p.alloc().is_none());
        assert_eq!(p.available(), 0);
        p.free_bulk(&hs);
        assert_eq!(p.available(), 4);
        let mut out = [PktId(0); 8];
        assert_eq!(p.alloc_burst(&mut out), 4);
        assert_eq!(p.alloc_burst(&mut out), 0);
    }

    #[test]
    fn write_head_writes_the_front_and_keeps_the_rest() {
        let mut p = Pool::new(2);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        p.set_data(a, &[0x11; 200]);
        p.set_data(b, &[0x22; 200]);
        p.write_head(a, &[0xAB; 64], 150);
        assert_eq!(p.headroom(a), HEADROOM);
        assert_eq!(p.len(a), 150);
        assert!(p.data(a)[..64].iter().all(|&x| x == 0xAB));
        assert!(p.data(a)[64..].iter().all(|&x| x == 0x11));
        assert!(p.data(b).iter().all(|&x| x == 0x22), "neighbour untouched");
        p.write_head(a, &[0xCD; 128], 5000);
        assert_eq!(p.len(a), MAX_FRAME);
        p.write_head(PktId(7), &[0; 64], 60); // outside the pool: nothing happens
        assert_eq!(p.len(b), 200);
    }

    #[test]
    fn region_is_page_aligned() {
        let mut p = Pool::new(3);
        let (ptr, len) = p.region_raw();
        assert_eq!(ptr as usize % 4096, 0);
        assert_eq!(len, 3 * BUF_SIZE);
    }

    #[test]
    fn prepend_and_strip_move_the_front() {
        let mut p = Pool::new(1);
        let h = p.alloc().unwrap();
        p.set_data(h, &[1, 2, 3, 4]);
        let f = p.prepend(h, 2).unwrap();
        f[..2].copy_from_slice(&[9, 8]);
        assert_eq!(p.data(h), &[9, 8, 1, 2, 3, 4]);
        assert!(p.strip(h, 3));
        assert_eq!(p.data(h), &[2, 3, 4]);
        assert!(!p.strip(h, 4));
        assert!(p.prepend(h, HEADROOM + 10).is_none());
        assert_eq!(p.data(h), &[2, 3, 4]);
    }

    #[test]
    fn buffers_do_not_overlap() {
        let mut p = Pool::new(2);
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        p.set_data(a, &[0xAA; MAX_FRAME]);
        p.set_data(b, &[0xBB; MAX_FRAME]);
        assert!(p.data(a).iter().all(|&x| x == 0xAA));
        assert!(p.set_bounds(b, 0, BUF_SIZE));
        assert!(!p.set_bounds(b, 1, BUF_SIZE));
    }
}
