//! Client arbitration (P4Runtime §5): every `StreamChannel` that sent a
//! `MasterArbitrationUpdate` has an election id; the stream with the highest one is the primary,
//! the only client whose `Write`, `SetForwardingPipelineConfig` and `PacketOut` are accepted, and
//! the one packet-ins go to. Others are backups: they may read. Two streams may not hold the same
//! election id. When the primary's stream ends, the highest remaining one becomes primary, and
//! every stream is told.
//!
//! Only the default role is served (an empty role); pure data, no I/O: the server sends what
//! [`Arbiter::arbitrate`] and [`Arbiter::leave`] return.

use crate::proto::Uint128;
use std::collections::BTreeMap;

/// A stream's number, given by the server.
pub type StreamId = u64;

/// What a stream is told after an arbitration change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The stream.
    pub stream: StreamId,
    /// The primary's election id (the highest).
    pub primary_election: Uint128,
    /// True when this stream is the primary (status OK; else ALREADY_EXISTS).
    pub is_primary: bool,
}

/// The election ids of the streams that arbitrated.
#[derive(Debug, Default)]
pub struct Arbiter {
    streams: BTreeMap<StreamId, Uint128>,
}

/// Why an arbitration request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clash {
    /// Another stream holds this election id.
    InUse(StreamId),
}

impl Arbiter {
    /// The primary stream and its election id, if any stream arbitrated.
    pub fn primary(&self) -> Option<(StreamId, Uint128)> {
        self.streams.iter().max_by_key(|(_, e)| **e).map(|(s, e)| (*s, *e))
    }

    /// True when `election` is the primary's election id (what a `Write` must carry).
    pub fn is_primary_election(&self, election: Option<Uint128>) -> bool {
        matches!((self.primary(), election), (Some((_, p)), Some(e)) if p == e)
    }

    /// Stream `s` asks for election id `e`. Returns who must be told what: `s` itself always,
    /// and every other stream when the primary changed.
    ///
    /// # Errors
    /// [`Clash::InUse`] when another stream holds `e` (nothing changes).
    pub fn arbitrate(&mut self, s: StreamId, e: Uint128) -> Result<Vec<Verdict>, Clash> {
        if let Some((&other, _)) = self.streams.iter().find(|(&o, &x)| o != s && x == e) {
            return Err(Clash::InUse(other));
        }
        let before = self.primary().map(|p| p.0);
        self.streams.insert(s, e);
        let after = self.primary();
        let changed = before != after.map(|p| p.0);
        Ok(self.tell(after, |t| t == s || changed))
    }

    /// Stream `s` ended. Returns who must be told about a new primary (nobody when `s` was not
    /// the primary).
    pub fn leave(&mut self, s: StreamId) -> Vec<Verdict> {
        let was = self.primary().map(|p| p.0);
        self.streams.remove(&s);
        if was != Some(s) {
            return Vec::new();
        }
        let now = self.primary();
        self.tell(now, |_| true)
    }

    fn tell(&self, primary: Option<(StreamId, Uint128)>, who: impl Fn(StreamId) -> bool) -> Vec<Verdict> {
        let Some((p, pe)) = primary else { return Vec::new() };
        self.streams.keys().filter(|&&t| who(t)).map(|&t| Verdict { stream: t, primary_election: pe, is_primary: t == p }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(low: u64) -> Uint128 {
        Uint128 { high: 0, low }
    }

    #[test]
    fn the_highest_election_id_is_primary_and_a_departure_hands_over() {
        let mut a = Arbiter::default();
        assert_eq!(a.arbitrate(1, e(5)).unwrap(), [Verdict { stream: 1, primary_election: e(5), is_primary: true }]);
        // A lower one is a backup; only it is told.
        assert_eq!(a.arbitrate(2, e(3)).unwrap(), [Verdict { stream: 2, primary_election: e(5), is_primary: false }]);
        assert_eq!(a.arbitrate(3, e(5)), Err(Clash::InUse(1)));
        // A higher one takes over: everyone is told.
        let v = a.arbitrate(3, e(9)).unwrap();
        assert_eq!(v.len(), 3);
        assert!(v.iter().all(|x| x.primary_election == e(9) && x.is_primary == (x.stream == 3)));
        assert!(a.is_primary_election(Some(e(9))));
        assert!(!a.is_primary_election(Some(e(5))));
        assert!(!a.is_primary_election(None));
        // A backup leaving changes nothing; the primary leaving hands over to the next highest.
        assert!(a.leave(2).is_empty());
        assert_eq!(a.leave(3), [Verdict { stream: 1, primary_election: e(5), is_primary: true }]);
        assert_eq!(a.leave(1), []);
        assert_eq!(a.primary(), None);
        // The high half counts first.
        a.arbitrate(4, Uint128 { high: 1, low: 0 }).unwrap();
        a.arbitrate(5, e(u64::MAX)).unwrap();
        assert_eq!(a.primary().map(|p| p.0), Some(4));
    }
}
