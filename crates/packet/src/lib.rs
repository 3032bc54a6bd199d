//! fastpath-packet: the packet's memory and its view of itself.
//!
//! Owns the buffer pool (one pre-allocated region of fixed-size buffers with headroom), packet
//! handles (`PktId`, a `u32` index), the `Batch` of up to [`BATCH_MAX`] packets with per-packet
//! [`Meta`] and [`Verdict`], the drop-reason table, checksums, and typed zero-copy header views
//! (`hdr`). Depends on nothing else in fastpath.
//!
//! Invariants: nothing here allocates after a pool is built; a parsed header view never panics;
//! packet bytes never cause a panic anywhere in this crate.
//!
//! ```
//! use fastpath_packet::{Pool, Batch, Verdict};
//! let mut pool = Pool::new(64);
//! let h = pool.alloc().unwrap();
//! pool.set_data(h, &[0u8; 60]);
//! let mut b = Batch::new();
//! b.push(h, 0);
//! assert_eq!(b.len(), 1);
//! assert_eq!(b.verdict(0), Verdict::Continue);
//! ```
// Packet code must not panic; tests may (an unwrap that fails is the test failing), so the
// lints cover everything but `cfg(test)` code.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod batch;
pub mod build;
pub mod csum;
pub mod drop;
pub mod hdr;
pub mod meta;
pub mod pool;
pub mod prefetch;
#[cfg(feature = "testutil")]
pub mod testutil;
pub mod verdict;

pub use batch::{Batch, Lanes, BATCH_MAX};
pub use drop::DropReason;
pub use meta::{Hdr, HdrSet, Meta, Slot, FLOOD_PORT, NO_PORT};
pub use pool::{PktId, Pool, BUF_SIZE, HEADROOM};
pub use verdict::{PuntReason, Verdict};

/// The `N` bytes of `d` from `at`, if the frame has them. One compare where
/// `d.get(at..)?.first_chunk()` costs a subtraction and two (an offset read from the
/// metadata is at most a `u16` plus a small constant, so `at + N` cannot wrap).
#[inline(always)]
pub fn window<const N: usize>(d: &[u8], at: usize) -> Option<&[u8; N]> {
    d.get(at..at.wrapping_add(N))?.try_into().ok()
}

/// [`window`], writable.
#[inline(always)]
pub fn window_mut<const N: usize>(d: &mut [u8], at: usize) -> Option<&mut [u8; N]> {
    d.get_mut(at..at.wrapping_add(N))?.try_into().ok()
}
