//! The single-producer single-consumer rings AF_XDP shares with the kernel (fill, completion,
//! rx, tx), mapped from the socket.
//!
//! ```text
//!  mmap(fd, pgoff):  [producer:u32 ..] [consumer:u32 ..] [flags:u32 ..] [desc 0][desc 1]...[desc n-1]
//!                     offsets from getsockopt(XDP_MMAP_OFFSETS); n a power of two
//! ```
//! Indices run freely (wrapping `u32`); slot = index & (n - 1). The producer writes slots, then
//! publishes its index with a release store; the consumer reads the index with an acquire load,
//! reads the slots, then publishes its own index with a release store (kernel
//! `Documentation/networking/af_xdp.rst`, `net/xdp/xsk_queue.h`). Each side caches the other's
//! index and re-reads it only when the cache says the ring is full (producer) or empty
//! (consumer), so a burst costs two shared-cache-line accesses, not one per descriptor.

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// `struct xdp_ring_offset`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct RingOffset {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    pub flags: u64,
}

/// `struct xdp_mmap_offsets`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct MmapOffsets {
    pub rx: RingOffset,
    pub tx: RingOffset,
    pub fr: RingOffset,
    pub cr: RingOffset,
}

/// `struct xdp_desc`: a frame in the UMEM (rx and tx rings).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// `XDP_RING_NEED_WAKEUP`: the kernel wants a syscall to make progress on this ring.
const XDP_RING_NEED_WAKEUP: u32 = 1;

/// One mapped ring of `T` (`u64` addresses for fill/completion, [`XdpDesc`] for rx/tx).
pub(crate) struct Ring<T> {
    map: NonNull<libc::c_void>,
    map_len: usize,
    prod: NonNull<AtomicU32>,
    cons: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<T>,
    mask: u32,
    size: u32,
    cached_prod: u32,
    cached_cons: u32,
}

// SAFETY: the ring's memory is a private mapping owned by this value (unmapped on drop); the
// kernel is the only other party and synchronises through the atomics. Moving the owner to
// another thread is fine; it is not `Sync` (one thread drives it).
unsafe impl<T> Send for Ring<T> {}

impl<T: Copy> Ring<T> {
    /// Maps ring `size` (power of two) of socket `fd` at page offset `pgoff`.
    pub(crate) fn map(fd: i32, pgoff: i64, off: &RingOffset, size: u32) -> io::Result<Ring<T>> {
        if !size.is_power_of_two() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "ring size must be a power of two"));
        }
        let map_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // SAFETY: a fresh shared mapping chosen by the kernel (addr NULL); the arguments describe
        // the ring the socket created with setsockopt before this call.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_POPULATE, fd, pgoff)
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p.cast::<u8>();
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS for this ring, so each field lies inside
        // the `map_len` bytes just mapped; the mapping is page aligned, and the kernel aligns the
        // producer/consumer/flags words to 4 and the descriptors to 8 bytes.
        let (prod, cons, flags, descs) = unsafe {
            (
                NonNull::new_unchecked(base.add(off.producer as usize).cast::<AtomicU32>()),
                NonNull::new_unchecked(base.add(off.consumer as usize).cast::<AtomicU32>()),
                NonNull::new_unchecked(base.add(off.flags as usize).cast::<AtomicU32>()),
                NonNull::new_unchecked(base.add(off.desc as usize).cast::<T>()),
            )
        };
        // SAFETY: `p` is not MAP_FAILED, so it is a valid non-null mapping.
        let map = unsafe { NonNull::new_unchecked(p) };
        let mut r = Ring { map, map_len, prod, cons, flags, descs, mask: size - 1, size, cached_prod: 0, cached_cons: 0 };
        r.cached_prod = r.prod().load(Ordering::Acquire);
        r.cached_cons = r.cons().load(Ordering::Acquire);
        Ok(r)
    }

    #[inline]
    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into our live mapping (see `map`); AtomicU32 has u32's layout.
        unsafe { self.prod.as_ref() }
    }
    #[inline]
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as in `prod`.
        unsafe { self.cons.as_ref() }
    }

    /// Ring size in slots.
    #[inline]
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// True when the kernel set `XDP_RING_NEED_WAKEUP` on this ring.
    #[inline]
    pub(crate) fn needs_wakeup(&self) -> bool {
        // SAFETY: as in `prod`.
        unsafe { self.flags.as_ref() }.load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    // ---- producer side (fill, tx) ----

    /// Free slots, re-reading the consumer index only when fewer than `want` are known free.
    #[inline]
    pub(crate) fn prod_free(&mut self, want: u32) -> u32 {
        let mut free = self.size.wrapping_sub(self.cached_prod.wrapping_sub(self.cached_cons));
        if free < want {
            self.cached_cons = self.cons().load(Ordering::Acquire);
            free = self.size.wrapping_sub(self.cached_prod.wrapping_sub(self.cached_cons));
        }
        free
    }

    /// Writes slot `cached_prod + i` (not yet visible to the kernel).
    #[inline]
    pub(crate) fn prod_write(&mut self, i: u32, v: T) {
        let slot = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: `slot < size`, inside the descriptor array of the mapping; the caller checked
        // with `prod_free` that the kernel does not own this slot.
        unsafe { self.descs.as_ptr().add(slot).write(v) }
    }

    /// Publishes `n` written slots to the kernel.
    #[inline]
    pub(crate) fn prod_submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.prod().store(self.cached_prod, Ordering::Release);
    }

    /// Slots the producer published that the kernel has not consumed yet.
    #[inline]
    pub(crate) fn prod_pending(&mut self) -> u32 {
        self.cached_cons = self.cons().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    // ---- consumer side (rx, completion) ----

    /// Slots ready to read, at most `max`; re-reads the producer index when the cache is empty.
    #[inline]
    pub(crate) fn cons_avail(&mut self, max: u32) -> u32 {
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail == 0 {
            self.cached_prod = self.prod().load(Ordering::Acquire);
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        avail.min(max)
    }

    /// Reads slot `cached_cons + i`.
    #[inline]
    pub(crate) fn cons_read(&self, i: u32) -> T {
        let slot = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: `slot < size`; the caller checked with `cons_avail` that the kernel published it.
        unsafe { self.descs.as_ptr().add(slot).read() }
    }

    /// Gives `n` read slots back to the kernel.
    #[inline]
    pub(crate) fn cons_release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.cons().store(self.cached_cons, Ordering::Release);
    }
}

impl<T: Copy> Ring<T> {
    /// After the kernel stopped using the ring (socket closed): calls `f` on every slot one
    /// side published that the other never took. Producer side (fill, tx): ours, not consumed
    /// by the kernel. Consumer side (rx, completion): the kernel's, not read by us.
    pub(crate) fn for_each_leftover(&mut self, producer_side: bool, mut f: impl FnMut(T)) {
        let (from, to) = if producer_side {
            (self.cons().load(Ordering::Acquire), self.cached_prod)
        } else {
            (self.cached_cons, self.prod().load(Ordering::Acquire))
        };
        let n = to.wrapping_sub(from).min(self.size);
        for i in 0..n {
            let slot = (from.wrapping_add(i) & self.mask) as usize;
            // SAFETY: `slot < size`, inside the descriptor array of our live mapping; the kernel
            // no longer writes to it.
            f(unsafe { self.descs.as_ptr().add(slot).read() });
        }
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`; nothing borrows it past this point.
        unsafe {
            libc::munmap(self.map.as_ptr(), self.map_len);
        }
    }
}
