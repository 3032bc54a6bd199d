//! Exact-match table used the way a stage uses it: keys packed into `u64`/`[u64; 4]` from the
//! live slots of a batch, the hash–prefetch–lookup pipeline driven by hand (`hash`, `prefetch`,
//! `lookup_hashed`) and through `lookup_lanes`, which must agree.

use fastpath_packet::batch::{Lanes, BATCH_MAX};
use fastpath_tables::exact::{ExactTable, InsertError};

#[test]
fn hand_pipelined_equals_lanes_and_batch() {
    let mut t = ExactTable::<[u64; 4], u32>::with_capacity(4096);
    for i in 0..4000u64 {
        assert_eq!(t.insert([i, i * 3, 7, !i], i as u32), Ok(None));
    }
    assert_eq!(t.insert([1 << 40, 0, 0, 0], 1), Ok(None));
    let keys: [[u64; 4]; BATCH_MAX] = core::array::from_fn(|i| {
        let i = (i * 37) as u64;
        if i.is_multiple_of(3) {
            [i, i * 3, 7, !i]
        } else {
            [i, i * 3, 8, !i]
        }
    });
    let mut hashes = [0u64; BATCH_MAX];
    for i in 0..BATCH_MAX {
        hashes[i] = t.hash(&keys[i]);
        t.prefetch(hashes[i]);
    }
    let by_hand: Vec<Option<u32>> = (0..BATCH_MAX).map(|i| t.lookup_hashed(&keys[i], hashes[i])).collect();
    let mut lanes_out = [0; BATCH_MAX];
    let hits = t.lookup_lanes(&keys, Lanes::first(BATCH_MAX), &mut lanes_out, fastpath_tables::MISS);
    let lanes_out: Vec<Option<u32>> = lanes_out.iter().map(|&r| (r != fastpath_tables::MISS).then_some(r)).collect();
    let mut batch_out = [None; BATCH_MAX];
    assert_eq!(t.lookup_batch(&keys, &mut batch_out), hits);
    assert_eq!(&by_hand[..], &lanes_out[..]);
    assert_eq!(&batch_out[..], &lanes_out[..]);
    assert_eq!(hits, (0..BATCH_MAX).filter(|i| (i * 37) % 3 == 0 && i * 37 < 4000).count() as u64);
    // Capacity 4096 is a hard limit: the table reports Full, not a silent overwrite.
    for i in 4000..4095u64 {
        assert_eq!(t.insert([i, i * 3, 7, !i], 0), Ok(None));
    }
    assert_eq!(t.insert([u64::MAX; 4], 0), Err(InsertError::Full));
}
