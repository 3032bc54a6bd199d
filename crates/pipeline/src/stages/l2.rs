//! `l2_switch FDB`: a transparent bridge (IEEE 802.1D / 802.1Q) in one stage. Per frame:
//!
//! ```text
//!  vid = outer 802.1Q VID, or 0 untagged ──▶ in_port not a member of vid: drop vlan_filtered
//!  learn:   (vid, eth.src) ▸ in_port, stamped now (group source addresses are not learned)
//!  forward: eth.dst group (broadcast, multicast), or (vid, eth.dst) unknown or aged ▸ FLOOD_PORT
//!           (the enqueue copies it to every member port of vid but in_port)
//!           learned on in_port ▸ drop l2_same_port; otherwise ▸ that port
//! ```
//!
//! The MAC table belongs to the stage, so learning happens on the worker with no lock and no
//! message: each worker learns what it sees (a frame's answer comes back through the same
//! worker when the ports spread flows by their hash). It is an open-addressing table with
//! linear probing at most half full, keyed by `vid << 48 | mac`. An entry not refreshed within
//! the ageing time counts as absent at once and is removed by a sweep that visits a few slots
//! per batch (backward-shift deletion keeps probe chains intact without tombstones).

use crate::exec::{Stage, StageCx};
use crate::ir::FdbDef;
use fastpath_packet::{Batch, DropReason, Lanes, Pool, FLOOD_PORT};

/// Time is kept per entry in units of 2^20 ns (about 1 ms) in 32 bits (52 days around).
const TICK_SHIFT: u32 = 20;

/// Slots the ageing sweep visits per batch, at least.
const SWEEP_MIN: usize = 32;

/// Counters of a MAC table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdbStats {
    /// Addresses learned (new entries).
    pub learned: u64,
    /// Addresses that moved to another port.
    pub moved: u64,
    /// Entries the sweep removed after the ageing time.
    pub aged: u64,
    /// Addresses not learned because the table was full.
    pub full: u64,
    /// Frames flooded (group destination, or unknown or aged unicast).
    pub flooded: u64,
}

/// The MAC table and the stage that uses it.
pub struct L2Switch {
    name: String,
    /// `vid << 48 | mac`, 0 for an empty slot (the all-zero MAC is never learned).
    keys: Box<[u64]>,
    ports: Box<[u16]>,
    seen: Box<[u32]>,
    mask: usize,
    len: usize,
    size: usize,
    ageing: u32,
    def: FdbDef,
    sweep: usize,
    stats: FdbStats,
}

impl L2Switch {
    /// An empty table for `def`.
    pub fn new(def: &FdbDef) -> L2Switch {
        let slots = (def.size * 2).next_power_of_two().max(16);
        L2Switch {
            name: def.name.clone(),
            keys: vec![0; slots].into_boxed_slice(),
            ports: vec![0; slots].into_boxed_slice(),
            seen: vec![0; slots].into_boxed_slice(),
            mask: slots - 1,
            len: 0,
            size: def.size,
            ageing: u32::try_from(def.ageing_ns >> TICK_SHIFT).unwrap_or(u32::MAX).max(1),
            def: def.clone(),
            sweep: 0,
            stats: FdbStats::default(),
        }
    }

    /// Entries now (aged ones count until the sweep removes them).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is learned.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The counters.
    pub fn stats(&self) -> FdbStats {
        self.stats
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & self.mask
    }

    #[inline]
    fn fresh(&self, slot: usize, now: u32) -> bool {
        now.wrapping_sub(self.seen[slot]) < self.ageing
    }

    /// The slot holding `key`, or the empty slot where it would go.
    #[inline]
    fn probe(&self, key: u64) -> (usize, bool) {
        let mut i = self.home(key);
        loop {
            let k = self.keys[i];
            if k == key {
                return (i, true);
            }
            if k == 0 {
                return (i, false);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The port `(vid, mac)` was learned on, if it is fresh at `now_ns`.
    pub fn lookup(&self, vid: u16, mac: u64, now_ns: u64) -> Option<u16> {
        let key = u64::from(vid) << 48 | mac;
        let (i, found) = self.probe(key);
        (found && self.fresh(i, (now_ns >> TICK_SHIFT) as u32)).then(|| self.ports[i])
    }

    /// Learns or refreshes `(vid, mac)` on `port`.
    #[inline]
    fn learn(&mut self, key: u64, port: u16, now: u32) {
        let (i, found) = self.probe(key);
        if found {
            if self.ports[i] != port {
                self.ports[i] = port;
                self.stats.moved += 1;
            }
            self.seen[i] = now;
        } else if self.len < self.size {
            self.keys[i] = key;
            self.ports[i] = port;
            self.seen[i] = now;
            self.len += 1;
            self.stats.learned += 1;
        } else {
            self.stats.full += 1;
        }
    }

    /// Removes the entry in slot `i`, moving later entries of its probe chain back.
    fn remove_at(&mut self, mut i: usize) {
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let k = self.keys[j];
            if k == 0 {
                break;
            }
            // The entry at j may move to i if its home is not cyclically in (i, j].
            let h = self.home(k);
            let stays = if i <= j { i < h && h <= j } else { i < h || h <= j };
            if !stays {
                self.keys[i] = k;
                self.ports[i] = self.ports[j];
                self.seen[i] = self.seen[j];
                i = j;
            }
        }
        self.keys[i] = 0;
        self.len -= 1;
    }

    /// Visits `n` slots from the cursor and removes the aged entries among them.
    fn sweep(&mut self, n: usize, now: u32) {
        for _ in 0..n.min(self.keys.len()) {
            let i = self.sweep;
            // A later entry may move into slot i when one is removed: look at it again.
            while self.keys[i] != 0 && !self.fresh(i, now) {
                self.remove_at(i);
                self.stats.aged += 1;
            }
            self.sweep = (i + 1) & self.mask;
        }
    }
}

impl Stage for L2Switch {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, cx: &mut StageCx<'_>) {
        let now = (cx.now_ns >> TICK_SHIFT) as u32;
        let vlan_blind = self.def.vlans.is_empty();
        for i in lanes {
            let frame = pool.data(b.handle(i));
            let m = b.meta(i);
            let in_port = m.in_port;
            let vid = m.vid(frame);
            // Both addresses with two 8-byte loads (the parser saw a whole Ethernet header).
            let (Some(d8), Some(s8)) = (frame.first_chunk::<8>(), frame.get(6..).and_then(|t| t.first_chunk::<8>())) else { continue };
            let (dst, src) = (u64::from_be_bytes(*d8) >> 16, u64::from_be_bytes(*s8) >> 16);
            let member = vlan_blind || (in_port < 64 && self.def.members(vid).is_some_and(|ms| ms >> in_port & 1 == 1));
            if !member {
                cx.drop(b, i, DropReason::VlanFiltered);
                continue;
            }
            // Group addresses (I/G bit) and the all-zero address are never learned.
            if src >> 40 & 1 == 0 && src != 0 {
                self.learn(u64::from(vid) << 48 | src, in_port, now);
            }
            let out = if dst >> 40 & 1 == 1 {
                FLOOD_PORT
            } else {
                let (s, found) = self.probe(u64::from(vid) << 48 | dst);
                if found && self.fresh(s, now) {
                    self.ports[s]
                } else {
                    FLOOD_PORT
                }
            };
            if out == in_port {
                cx.drop(b, i, DropReason::L2SamePort);
                continue;
            }
            self.stats.flooded += u64::from(out == FLOOD_PORT);
            b.meta_mut(i).out_port = out;
        }
        self.sweep(SWEEP_MIN.max(lanes.count()), now);
    }

    fn describe(&self) -> String {
        let s = self.stats;
        format!(
            "l2_switch {}: {} of {} MACs, ageing {:.0} s, {} VLANs; learned {} moved {} aged {} full {} flooded {}",
            self.name,
            self.len,
            self.size,
            (u64::from(self.ageing) << TICK_SHIFT) as f64 / 1e9,
            self.def.vlans.len(),
            s.learned,
            s.moved,
            s.aged,
            s.full,
            s.flooded
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(size: usize) -> L2Switch {
        L2Switch::new(&FdbDef { name: "t".into(), size, ageing_ns: 1 << 30, vlans: Vec::new() })
    }

    #[test]
    fn learn_lookup_move_and_full() {
        let mut t = table(3);
        t.learn(1 << 48 | 0xa, 4, 0);
        t.learn(0xa, 5, 0); // same MAC, other VLAN: its own entry
        assert_eq!((t.lookup(1, 0xa, 0), t.lookup(0, 0xa, 0)), (Some(4), Some(5)));
        t.learn(0xa, 6, 0);
        assert_eq!((t.lookup(0, 0xa, 0), t.stats().moved), (Some(6), 1));
        t.learn(0xb, 1, 0);
        t.learn(0xc, 1, 0);
        assert_eq!((t.len(), t.stats().full, t.lookup(0, 0xc, 0)), (3, 1, None));
    }

    #[test]
    fn entries_age_out_and_the_sweep_frees_them_without_breaking_chains() {
        let mut t = table(64);
        let ns = |ticks: u64| ticks << TICK_SHIFT;
        for k in 1..=40u64 {
            t.learn(k * 0x1_0000_0001, k as u16, 0);
        }
        // Refresh the even ones later; the odd ones age out.
        let later = (t.ageing / 2) as u64;
        for k in (2..=40u64).step_by(2) {
            t.learn(k * 0x1_0000_0001, k as u16, later as u32);
        }
        let after = u64::from(t.ageing) + 1;
        assert_eq!(t.lookup(0, 0x1_0000_0001, ns(after)), None, "aged entries are misses at once");
        t.sweep(t.keys.len() * 2, after as u32);
        assert_eq!((t.len(), t.stats().aged), (20, 20));
        for k in (2..=40u64).step_by(2) {
            assert_eq!(t.lookup(0, k * 0x1_0000_0001, ns(after)), Some(k as u16), "entry {k} survives every removal");
        }
    }

    #[test]
    fn removal_matches_a_model_under_random_churn() {
        use std::collections::HashMap;
        let mut t = table(200);
        let mut model: HashMap<u64, u16> = HashMap::new();
        let mut x = 0x1234_5678_9abc_def1u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 300) + 1;
            if x >> 60 < 10 {
                t.learn(key, (x >> 8) as u16, 0);
                if model.len() < 200 || model.contains_key(&key) {
                    model.insert(key, (x >> 8) as u16);
                }
            } else {
                let (i, found) = t.probe(key);
                assert_eq!(found, model.contains_key(&key), "step {step}");
                if found {
                    t.remove_at(i);
                    model.remove(&key);
                }
            }
            assert_eq!(t.len(), model.len());
        }
        for (k, p) in &model {
            assert_eq!(t.lookup((k >> 48) as u16, k & ((1 << 48) - 1), 0), Some(*p));
        }
    }
}
