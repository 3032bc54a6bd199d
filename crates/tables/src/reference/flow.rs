//! Reference twin of the flow table: a `HashMap` from key to connection, with the same state
//! machine (`flow::tcp::Conn`), the same deadline rule (gone at or after `expires_ns`) and the
//! same wheel-visible expiry rule (`expire(now)` frees every entry whose deadline is at or
//! before `now` rounded down to a `2^tick_shift` ns tick). Control and test use only.

use std::collections::HashMap;

use crate::flow::{Conn, Dir, FlowConfig, FlowKey, InsertError, Segment, Side, State, TcpVerdict};

/// One connection of the twin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefEntry {
    /// Tracking state.
    pub conn: Conn,
    /// Side that opened the connection.
    pub initiator: Side,
    /// Deadline in ns.
    pub expires_ns: u64,
    /// Packets per direction.
    pub pkts: [u32; 2],
    /// Bytes per direction.
    pub bytes: [u64; 2],
}

/// Naive flow table: a map and a capacity.
#[derive(Clone, Debug)]
pub struct RefFlowTable {
    /// Entries by key.
    pub map: HashMap<FlowKey, RefEntry>,
    cfg: FlowConfig,
}

impl RefFlowTable {
    /// An empty twin with the fast table's configuration.
    pub fn new(cfg: FlowConfig) -> RefFlowTable {
        RefFlowTable { map: HashMap::new(), cfg }
    }

    /// Entries held (live or not yet collected).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The live entry for `key` at `now_ns`; a passed deadline removes it.
    pub fn lookup(&mut self, key: &FlowKey, now_ns: u64) -> Option<&RefEntry> {
        if self.map.get(key).is_some_and(|e| e.expires_ns <= now_ns) {
            self.map.remove(key);
        }
        self.map.get(key)
    }

    /// Opens a connection. Errors mirror the fast table, except `Exists` carries no id (0).
    pub fn insert(&mut self, key: &FlowKey, side: Side, seg: &Segment, now_ns: u64) -> Result<(), InsertError> {
        if self.lookup(key, now_ns).is_some() {
            return Err(InsertError::Exists(0));
        }
        let conn = Conn::open(key.proto, seg).map_err(InsertError::Invalid)?;
        if self.map.len() >= self.cfg.capacity as usize {
            return Err(InsertError::Full);
        }
        let expires_ns = now_ns.saturating_add(self.cfg.timeouts.of(conn.state));
        self.map.insert(*key, RefEntry { conn, initiator: side, expires_ns, pkts: [1, 0], bytes: [u64::from(seg.wire_len), 0] });
        Ok(())
    }

    /// Tracks a packet on the live connection `key`; `None` when there is none.
    pub fn track(&mut self, key: &FlowKey, side: Side, seg: &Segment, now_ns: u64) -> Option<TcpVerdict> {
        self.lookup(key, now_ns)?;
        let check = self.cfg.window_check;
        let t = self.cfg.timeouts;
        let e = self.map.get_mut(key)?;
        let dir = if e.initiator == side { Dir::Original } else { Dir::Reply };
        let v = e.conn.step(dir, seg, check);
        if v == TcpVerdict::Accept {
            e.pkts[dir as usize] = e.pkts[dir as usize].wrapping_add(1);
            e.bytes[dir as usize] = e.bytes[dir as usize].wrapping_add(u64::from(seg.wire_len));
            e.expires_ns = now_ns.saturating_add(t.of(e.conn.state));
        }
        Some(v)
    }

    /// Removes `key`; true when it was held.
    pub fn remove(&mut self, key: &FlowKey) -> bool {
        self.map.remove(key).is_some()
    }

    /// Frees every entry with a deadline at or before `now_ns` rounded down to the tick.
    /// Returns how many.
    pub fn expire(&mut self, now_ns: u64) -> usize {
        let edge = (now_ns >> self.cfg.tick_shift) << self.cfg.tick_shift;
        let before = self.map.len();
        self.map.retain(|_, e| e.expires_ns > edge);
        before - self.map.len()
    }

    /// State of `key`'s entry, live or not (`State::None` when absent).
    pub fn state(&self, key: &FlowKey) -> State {
        self.map.get(key).map_or(State::None, |e| e.conn.state)
    }
}
