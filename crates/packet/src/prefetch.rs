//! CPU hints and the cycle counter: software prefetch and `rdtsc`.
//!
//! The only other home of `unsafe` in this crate besides `pool`. On targets without these
//! instructions the functions are no-ops (prefetch) or return 0 (cycles).

/// Hints the CPU to bring the cache line holding `p` into L1 for reading. Never faults.
#[inline(always)]
pub fn prefetch_read<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, and `p` is a valid reference anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>((p as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The CPU's time-stamp counter (constant-rate on every x86-64 of the last decade).
/// Benchmarks only: the packet path reads time once per batch through its caller.
#[inline]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `rdtsc` has no preconditions on x86-64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}
