//! fastpath-tables: the lookup structures of the data path.
//!
//! Owns exact-match hashing (`exact`), longest-prefix match (`lpm`), the multi-field ACL
//! classifier (`acl`, with the ClassBench loader and generator, and `LiveAcl`, its incremental
//! form whose full builds are jobs the caller runs on a thread of its choice), the
//! connection-tracking flow
//! table (`flow`), per-worker counters (`counter`) and RFC 2697/2698 meters (`meter`), plus naive
//! reference twins (`reference`) that the fast structures are property-tested against. Depends
//! only on `fastpath-packet`.
//!
//! Invariants: lookups never allocate, never lock and never read a clock (time is passed in as
//! `now_ns`); builders reject bad input with a typed error naming the offending rule.
#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod acl;
pub mod counter;
pub mod exact;
pub mod flow;
pub mod hash;
pub mod lpm;
pub mod meter;
pub mod reference;

/// What the batch lookups (`lookup_lanes` of [`exact::ExactTable`], [`lpm::Lpm4`] and
/// [`lpm::Lpm6`]) write for a key with no entry: a plain `u32` per lane instead of an
/// `Option<u32>` (a tag to store and test again in the action pass).
pub const MISS: u32 = u32::MAX;
